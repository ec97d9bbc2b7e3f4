/*
 * test_sql_types.c — SQL types beyond numbers and text, against the results
 * PostgreSQL documents for them: arrays (input and output, subscripts and
 * slices against a model, = ANY / ALL under three-valued logic, the array
 * functions, binary send / receive, columns that store them); date, time
 * and interval (input, output, arithmetic, age, justify_*, extract,
 * to_char); uuid, bytea, json and jsonb, quote_ident / format / pg_typeof:
 * each expected value is what PostgreSQL 15 prints.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "sql_test_env.h"
#include "sql_test_cells.h"
#include "query/sql.h"

static Env env;

static void setup(void) { env_open(&env); }
static void teardown(void) { env_close(&env); }

TestSuite(types, .init = setup, .fini = teardown, .timeout = 120);

static QrSqlResult *run(const char *sql) { return tc_run(&env, sql); }
static void exec_ok(const char *sql) { tc_exec(&env, sql); }
static const char *one(const char *sql) { return tc_one(&env, sql); }
static void is(const char *sql, const char *want) { tc_is(&env, sql, want); }
static void fails(const char *sql, const char *state) { tc_fails(&env, sql, state); }

static void select_each(const char *const (*cases)[2], size_t n) { tc_select_each(&env, cases, n); }

/* ---- arrays ---- */

Test(types, array_literals_read_and_print_as_postgresql)
{
    /* input -> output pairs as PostgreSQL 15 prints them */
    static const char *const cases[][2] = {
        {"SELECT '{1,2,3}'::int[]", "{1,2,3}"},
        {"SELECT '{ 1 , 2 }'::int4[]", "{1,2}"},
        {"SELECT '{}'::int[]", "{}"},
        {"SELECT '{{1,2},{3,4}}'::int[]", "{{1,2},{3,4}}"},
        {"SELECT '[0:2]={7,8,9}'::int[]", "[0:2]={7,8,9}"},
        {"SELECT '{\"a b\",\"c\\\"d\",NULL,\"NULL\",\"\",e\\\\f}'::text[]",
         "{\"a b\",\"c\\\"d\",NULL,\"NULL\",\"\",\"e\\\\f\"}"},
        {"SELECT '{t,f,NULL}'::bool[]", "{t,f,NULL}"},
        {"SELECT '{1.5,-2,1e3}'::float8[]", "{1.5,-2,1000}"},
        {"SELECT '{{a},{b}}'::varchar[]", "{{a},{b}}"},
        {"SELECT ARRAY[1, 2] || 3", "{1,2,3}"},
        {"SELECT 0 || ARRAY[1, 2]", "{0,1,2}"},
        {"SELECT ARRAY[1, 2] || ARRAY[3, 4]", "{1,2,3,4}"},
        {"SELECT ARRAY[[1, 2], [3, 4]]", "{{1,2},{3,4}}"},
        {"SELECT ARRAY['a', NULL, 'b c']", "{a,NULL,\"b c\"}"},
        {"SELECT ARRAY[1, 2.5]", "{1,2.5}"},
        {"SELECT ARRAY(SELECT x * 2 FROM generate_series(1, 3) g(x))", "{2,4,6}"},
        {"SELECT array_agg(x ORDER BY x DESC) FROM generate_series(1, 4) g(x)", "{4,3,2,1}"},
        {"SELECT '{1,2}'::int8[] = ARRAY[1, 2]::int8[]", "t"},
        {"SELECT '{1,2}'::int[] < '{1,3}'::int[]", "t"},
        {"SELECT '{1,2}'::int[] < '{1,2,0}'::int[]", "t"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        is(cases[i][0], cases[i][1]);
    /* the type of the result column */
    QrSqlResult *r = run("SELECT ARRAY[1, 2], '{a}'::text[], ARRAY[1::int8], '{1}'::float8[]");
    cr_expect_eq(qr_sql_type_oid(r->cols[0].type), 1007u);
    cr_expect_eq(qr_sql_type_oid(r->cols[1].type), 1009u);
    cr_expect_eq(qr_sql_type_oid(r->cols[2].type), 1016u);
    cr_expect_eq(qr_sql_type_oid(r->cols[3].type), 1022u);
    qr_sql_result_free(r);
}

Test(types, malformed_array_literals_are_22P02)
{
    fails("SELECT '{1,2'::int[]", "22P02");
    fails("SELECT '1,2'::int[]", "22P02");
    fails("SELECT '{1,,2}'::int[]", "22P02");
    fails("SELECT '{{1},{2,3}}'::int[]", "22P02");
    fails("SELECT '{1,2}x'::int[]", "22P02");
    fails("SELECT '{1,x}'::int[]", "22P02");                /* the element's own input */
    fails("SELECT '{99999999999}'::int4[]", "22003");       /* out of range for int4 */
    fails("SELECT '{{{{{{{1}}}}}}}'::int[]", "54000");      /* more than 6 dimensions */
    fails("SELECT 1 = ANY ('nope')", "22P02");              /* untyped: an array literal */
    fails("SELECT ARRAY[1] @> ARRAY['a']", "42883");           /* text[], as PostgreSQL */
    fails("SELECT '{1,2}'::int[] = '{1,2}'::int8[]", "42883");
    fails("SELECT 'a'::text = ANY (ARRAY[1, 2])", "42883");
}

/* arr[i] and arr[a:b] over an array with lower bound lb against a model. */
Test(types, subscripts_and_slices_agree_with_a_model)
{
    for (int lb = -1; lb <= 2; lb++) {
        int n = 6;
        char lit[128];
        snprintf(lit, sizeof lit, "'[%d:%d]={10,11,12,13,14,15}'::int[]", lb, lb + n - 1);
        for (int i = lb - 2; i <= lb + n + 1; i++) {
            char q[256], want[64];
            snprintf(q, sizeof q, "SELECT (%s)[%d]", lit, i);
            if (i >= lb && i < lb + n)
                snprintf(want, sizeof want, "%d", 10 + i - lb);
            else
                snprintf(want, sizeof want, "NULL");
            is(q, want);
            for (int j = i - 1; j <= lb + n + 1; j++) {
                int lo = i < lb ? lb : i, hi = j >= lb + n ? lb + n - 1 : j;
                char w[128] = "{}";
                if (lo <= hi) {
                    size_t k = 0;
                    w[k++] = '{';
                    for (int x = lo; x <= hi; x++)
                        k += (size_t)snprintf(w + k, sizeof w - k, "%s%d", x > lo ? "," : "",
                                              10 + x - lb);
                    snprintf(w + k, sizeof w - k, "}");
                }
                snprintf(q, sizeof q, "SELECT (%s)[%d:%d]", lit, i, j);
                is(q, w);
            }
        }
    }
    /* slices of two dimensions, omitted bounds, subscripts of the wrong count */
    is("SELECT ('{{1,2,3},{4,5,6}}'::int[])[2][3]", "6");
    is("SELECT ('{{1,2,3},{4,5,6}}'::int[])[2]", "NULL");
    is("SELECT ('{{1,2,3},{4,5,6}}'::int[])[1:2][2:3]", "{{2,3},{5,6}}");
    is("SELECT ('{{1,2,3},{4,5,6}}'::int[])[2][2:]", "{{2,3},{5,6}}");
    is("SELECT ('{1,2,3,4}'::int[])[:2]", "{1,2}");
    is("SELECT ('{1,2,3,4}'::int[])[3:]", "{3,4}");
    is("SELECT ('{1,2,3}'::int[])[NULL]", "NULL");
}

/* x = ANY / ALL (array) over arrays with NULLs: true, false or NULL as
 * SQL's three-valued logic says, against a model. */
Test(types, any_and_all_follow_three_valued_logic)
{
    static const char *const arrays[] = {"{}", "{1}", "{1,2}", "{NULL}", "{1,NULL}", "{2,NULL,3}"};
    /* vals[k][0] = the count, then the elements, -1 for NULL */
    static const int vals[][4] = {{0}, {1, 1}, {2, 1, 2}, {1, -1}, {2, 1, -1}, {3, 2, -1, 3}};
    for (size_t k = 0; k < sizeof arrays / sizeof *arrays; k++)
        for (int x = 0; x <= 3; x++)
            for (int all = 0; all <= 1; all++) {
                /* model: ANY true if some element equals; else NULL if a NULL; else false */
                bool some = false, every = true, has_null = false;
                for (int i = 1; i <= vals[k][0]; i++) {
                    if (vals[k][i] < 0) {
                        has_null = true;
                        continue;
                    }
                    some |= vals[k][i] == x;
                    every &= vals[k][i] == x;
                }
                const char *want = all ? (!every ? "f" : has_null ? "NULL" : "t")
                                       : (some ? "t" : has_null ? "NULL" : "f");
                char q[128];
                snprintf(q, sizeof q, "SELECT %d = %s ('%s'::int[])", x, all ? "ALL" : "ANY",
                         arrays[k]);
                is(q, want);
            }
    is("SELECT NULL::int = ANY ('{1}'::int[])", "NULL");
    is("SELECT NULL::int = ANY ('{}'::int[])", "f");
    is("SELECT 5 > ALL ('{1,2,3}'::int[])", "t");
    is("SELECT 2 <> ANY ('{2,2}'::int[])", "f");
}

Test(types, array_functions)
{
    is("SELECT array_length('{{1,2,3},{4,5,6}}'::int[], 2)", "3");
    is("SELECT array_length('{}'::int[], 1)", "NULL");
    is("SELECT array_lower('[3:4]={1,2}'::int[], 1)", "3");
    is("SELECT array_upper('[3:4]={1,2}'::int[], 1)", "4");
    is("SELECT array_ndims('{{1},{2}}'::int[])", "2");
    is("SELECT array_dims('[0:1]={1,2}'::int[])", "[0:1]");
    is("SELECT cardinality('{{1,2},{3,4}}'::int[])", "4");
    is("SELECT cardinality('{}'::int[])", "0");
    is("SELECT array_to_string(ARRAY[1, NULL, 3], ',')", "1,3");
    is("SELECT array_to_string(ARRAY[1, NULL, 3], ',', '*')", "1,*,3");
    is("SELECT string_to_array('a,b,,c', ',')", "{a,b,\"\",c}");
    is("SELECT string_to_array('a,b,', ',')", "{a,b,\"\"}");
    is("SELECT string_to_array('abc', NULL)", "{a,b,c}");
    is("SELECT string_to_array('abc', '')", "{abc}");
    is("SELECT string_to_array('a,*,c', ',', '*')", "{a,NULL,c}");
    is("SELECT string_to_array('', ',')", "{}");
    is("SELECT array_append(ARRAY[1, 2], 3)", "{1,2,3}");
    is("SELECT array_prepend(0, ARRAY[1])", "{0,1}");
    is("SELECT array_cat(ARRAY[1], ARRAY[2, 3])", "{1,2,3}");
    is("SELECT array_position(ARRAY['a', 'b', 'c'], 'b')", "2");
    is("SELECT array_position(ARRAY['a', 'b'], 'z')", "NULL");
    is("SELECT array_remove(ARRAY[1, 2, 1, 3], 1)", "{2,3}");
    is("SELECT ARRAY[1, 2, 3] @> ARRAY[3, 1]", "t");
    is("SELECT ARRAY[1, 2] <@ ARRAY[1]", "f");
    is("SELECT ARRAY[1, 2] && ARRAY[2, 9]", "t");
    is("SELECT ARRAY[1, NULL] @> ARRAY[NULL::int]", "f");
    is("SELECT count(*) FROM (SELECT unnest('{{1,2},{3,NULL}}'::int[])) u", "4");
    is("SELECT sum(u) FROM unnest(ARRAY[1, 2, 3]) u", "6");
    is("SELECT string_agg(g::text, ',') FROM generate_subscripts('[2:4]={a,b,c}'::text[], 1) g",
       "2,3,4");
}

/* Arrays sent and received in PostgreSQL's binary format (what psycopg 3
 * and JDBC use), every element type through one round trip. */
Test(types, arrays_round_trip_through_the_binary_format)
{
    static const char *const exprs[] = {
        "'{1,NULL,-3}'::int2[]", "'{{1,2},{3,4}}'::int4[]", "'{9000000000}'::int8[]",
        "'{1.5,NULL}'::float4[]", "'{-2.25,1e300}'::float8[]", "'{t,f}'::bool[]",
        "'{a,\"b c\",NULL,\"\"}'::text[]", "'[0:1]={x,y}'::varchar[]",
        "'{\"2024-01-02 03:04:05\"}'::timestamp[]", "'{}'::int[]", "'{12.50,-3}'::numeric[]",
        "date '2024-02-29'", "date '1999-12-31'", "time '23:59:59.5'", "interval '-1 year 2 days 03:04:05.5'",
        "'{2024-01-01,NULL}'::date[]", "'{\"1 day\",\"-02:00:00\"}'::interval[]", "12.5::numeric",
        "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid", "'\\x00ff10'::bytea", "'{\"a\": [1, 2.50]}'::jsonb",
        "'{\"b\":1 , \"a\":2}'::json", "'{\"{\\\"a\\\": 1}\"}'::jsonb[]",
        "ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, NULL]", "ARRAY['\\x01'::bytea]",
    };
    for (size_t i = 0; i < sizeof exprs / sizeof *exprs; i++) {
        char q[256];
        snprintf(q, sizeof q, "SELECT %s", exprs[i]);
        QrSqlResult *r = run(q);
        QrBuf bin, want;
        qr_buf_init(&bin);
        qr_buf_init(&want);
        qr_sql_value_send(&r->vals[0], &bin);
        qr_sql_value_text(&r->vals[0], &want);
        uint32_t oid = qr_sql_type_oid(r->cols[0].type);
        /* back in as a binary parameter of the same type */
        QrSqlStmt *st;
        QrError err;
        qr_error_clear(&err);
        const char *sql = "SELECT $1";
        cr_assert_eq(qr_sql_prepare(env.s, sql, strlen(sql), &oid, 1, &st, &err), QR_OK, "%s",
                     err.message);
        const char *vals[1] = {(const char *)bin.data};
        int lens[1] = {(int)bin.len};
        int16_t fmts[1] = {1};
        QrSqlParams p = {1, vals, lens, fmts, 1};
        QrSqlResult *back;
        cr_assert_eq(qr_sql_execute(env.s, st, &p, &back, &err), QR_OK, "%s: %s", exprs[i],
                     err.message);
        QrBuf got;
        qr_buf_init(&got);
        qr_sql_value_text(&back->vals[0], &got);
        cr_expect(got.len == want.len && !memcmp(got.data, want.data, got.len),
                  "%s: %.*s back as %.*s", exprs[i], (int)want.len, want.data, (int)got.len,
                  got.data);
        /* and a damaged form is 22P03 (or the text inside it 22P02), never a
         * crash: every truncation; any prefix of a bytea is a bytea */
        bool any_prefix = oid == 17;
        for (size_t cut = 0; cut < bin.len; cut++) {
            lens[0] = (int)cut;
            QrSqlResult *bad = NULL;
            qr_error_clear(&err);
            int rc = qr_sql_execute(env.s, st, &p, &bad, &err);
            cr_expect(rc != QR_OK || any_prefix, "%s cut at %zu accepted", exprs[i], cut);
            const char *state = qr_error_sqlstate(&err);
            cr_expect(rc == QR_OK || !strcmp(state, "22P03") || !strcmp(state, "22P02"),
                      "%s cut at %zu: %s (%s)", exprs[i], cut, err.message, state);
            qr_sql_result_free(bad);
        }
        qr_buf_free(&got);
        qr_sql_result_free(back);
        qr_sql_stmt_unref(st);
        qr_buf_free(&bin);
        qr_buf_free(&want);
        qr_sql_result_free(r);
    }
}

Test(types, array_columns_store_and_round_trip)
{
    qr_sql_result_free(run("CREATE TABLE arr (id int PRIMARY KEY, tags text[], nums int[])"));
    qr_sql_result_free(run("INSERT INTO arr VALUES (1, ARRAY['x', 'y z'], '{1,2,3}'), "
                           "(2, '{}', NULL), (3, '{a,NULL}', '{{1,2},{3,4}}')"));
    is("SELECT string_agg(id || ':' || tags::text || ':' || coalesce(nums::text, '-'), ' ' "
       "ORDER BY id) FROM arr",
       "1:{x,\"y z\"}:{1,2,3} 2:{}:- 3:{a,NULL}:{{1,2},{3,4}}");
    is("SELECT string_agg(id::text, ',' ORDER BY id) FROM arr WHERE 2 = ANY (nums)", "1,3");
    is("SELECT nums[2] FROM arr WHERE id = 1", "2");
    is("SELECT udt_name FROM information_schema.columns WHERE table_name = 'arr' AND "
       "column_name = 'nums'",
       "_int4");
    qr_sql_result_free(run("UPDATE arr SET nums = nums || 4 WHERE id = 1"));
    is("SELECT nums FROM arr WHERE id = 1", "{1,2,3,4}");
    fails("INSERT INTO arr VALUES (4, '{a', NULL)", "22P02");
    fails("INSERT INTO arr (id, nums) VALUES (5, '{1,x}')", "22P02");
    is("SELECT count(*) FROM arr", "3");
    /* sorted and grouped by the array value */
    is("SELECT string_agg(nums::text, ' ' ORDER BY nums) FROM arr", "{1,2,3,4} {{1,2},{3,4}}");
    is("SELECT count(DISTINCT tags) FROM arr", "3");
}

/* pg_type has an array type for every scalar type, linked both ways. */
Test(types, pg_type_lists_array_types)
{
    is("SELECT count(*) FROM pg_type a JOIN pg_type e ON a.typelem = e.oid "
       "WHERE a.typcategory = 'A' AND e.typarray = a.oid",
       one("SELECT count(*) FROM pg_type WHERE typcategory = 'A'"));
    is("SELECT typname FROM pg_type WHERE oid = 1007", "_int4");
    is("SELECT typarray FROM pg_type WHERE typname = 'text'", "1009");
    is("SELECT format_type(1016, -1)", "bigint[]");
}

/* ---- date, time, interval ---- */

Test(types, datetime_values_and_arithmetic_as_postgresql)
{
    /* every expected value is PostgreSQL 15's output for the same expression */
    static const char *const cases[][2] = {
        {"date '2024-01-31' + 1", "2024-02-01"},
        {"date '2024-03-01' - date '2024-02-01'", "29"},
        {"date '2024-03-01' - 5", "2024-02-25"},
        {"1 + date '2024-01-01'", "2024-01-02"},
        {"timestamp '2024-01-31 10:00' + interval '1 month'", "2024-02-29 10:00:00"},
        {"timestamp '2024-03-31' - interval '1 month'", "2024-02-29 00:00:00"},
        {"timestamptz '2024-01-01 00:00+00' + interval '1 day 1 hour'", "2024-01-02 01:00:00+00"},
        {"date '2024-02-29' + interval '1 year'", "2025-02-28 00:00:00"},
        {"date '2024-01-01' + time '10:00'", "2024-01-01 10:00:00"},
        {"'2024-06-01'::date - interval '7 days'", "2024-05-25 00:00:00"},
        {"'1999-12-31 23:59:59.5'::timestamp + interval '0.5 seconds'", "2000-01-01 00:00:00"},
        {"interval '1 day 2 hours' * 2.5", "2 days 17:00:00"},
        {"2 * interval '1 hour'", "02:00:00"},
        {"interval '90 minutes' / 4", "00:22:30"},
        {"interval '1 month' / 3", "10 days"},
        {"interval '1 day' * 0.1", "02:24:00"},
        {"- interval '1 day'", "-1 days"},
        {"interval '1 year 2 months 3 days 04:05:06.5'", "1 year 2 mons 3 days 04:05:06.5"},
        {"interval '-1 day +02:00'", "-1 days +02:00:00"},
        {"interval '-1 year -2 mons +3 days'", "-1 years -2 mons +3 days"},
        {"interval '1.5 months'", "1 mon 15 days"},
        {"interval '1.75 days'", "1 day 18:00:00"},
        {"interval '100 hours'", "100:00:00"},
        {"interval '36:00:00'", "36:00:00"},
        {"interval 'P1Y2M3DT4H5M6S'", "1 year 2 mons 3 days 04:05:06"},
        {"interval '2 weeks'", "14 days"},
        {"interval '1 hour ago'", "-01:00:00"},
        {"'2024-01-02 03:00'::timestamp - '2024-01-01'::timestamp", "1 day 03:00:00"},
        {"'2024-01-01'::timestamp - '2024-01-02 03:00'::timestamp", "-1 days -03:00:00"},
        {"age(timestamp '2024-03-01', timestamp '2023-01-15 12:00')", "1 year 1 mon 16 days 12:00:00"},
        {"age(timestamp '2023-01-15 12:00', timestamp '2024-03-01')", "-1 years -1 mons -16 days -12:00:00"},
        {"age(timestamp '2024-02-29', timestamp '2023-02-28')", "1 year 1 day"},
        {"extract(epoch from interval '1 day 1 hour')", "90000"},
        {"extract(year from interval '2 years 3 months')", "2"},
        {"extract(month from interval '2 years 3 months')", "3"},
        {"extract(hour from interval '-1 day -03:00:00')", "-3"},
        {"extract(minute from time '10:45:30')", "45"},
        {"extract(doy from date '2024-12-31')", "366"},
        {"date_part('day', interval '40 days')", "40"},
        {"time '10:30' + interval '14 hours'", "00:30:00"},
        {"time '10:30' - time '08:15:30'", "02:14:30"},
        {"time '24:00'", "24:00:00"},
        {"justify_hours(interval '50 hours')", "2 days 02:00:00"},
        {"justify_days(interval '40 days')", "1 mon 10 days"},
        {"justify_interval(interval '1 mon -1 hour')", "29 days 23:00:00"},
        {"justify_interval(interval '-35 days 2 hours')", "-1 mons -4 days -22:00:00"},
        {"to_char(timestamp '2024-03-05 14:07:09.5', 'YYYY-MM-DD HH24:MI:SS.MS Day Mon FMDD HH12 AM')",
         "2024-03-05 14:07:09.500 Tuesday   Mar 5 02 PM"},
        {"to_char(date '2024-12-25', 'FMMonth DD, YYYY (Dy) \"Q\"Q DDD')", "December 25, 2024 (Wed) Q4 360"},
        {"to_char(timestamp '2024-01-01 00:00:00', 'HH12:MI am yyyy-mm-dd')", "12:00 am 2024-01-01"},
        {"to_char(timestamptz '2024-01-01 10:00+00', 'YYYY-MM-DD HH24:MI TZ')", "2024-01-01 10:00 UTC"},
        {"date '2024-01-01' = timestamp '2024-01-01 00:00'", "t"},
        {"date '2024-01-01' < timestamp '2024-01-01 00:01'", "t"},
        {"'2024-01-01 23:00'::date", "2024-01-01"},
        {"'2024-01-01 10:11:12'::timestamp::time", "10:11:12"},
        {"interval '1 day' > interval '23 hours'", "t"},
        {"interval '30 days' = interval '1 month'", "t"},
        {"make_date(2024, 2, 29)", "2024-02-29"},
        {"'2024-01-01 10:00:00 +02'::timestamptz", "2024-01-01 08:00:00+00"},
        {"'2024-01-01 +00'::timestamptz", "2024-01-01 00:00:00+00"},   /* JDBC's setDate */
        {"'2024-01-01 +00'::date", "2024-01-01"},
    };
    select_each(cases, sizeof cases / sizeof *cases);
    QrSqlResult *r = run("SELECT date '2024-01-01', time '10:00', interval '1 day', current_date");
    cr_expect_eq(qr_sql_type_oid(r->cols[0].type), 1082u);
    cr_expect_eq(qr_sql_type_oid(r->cols[1].type), 1083u);
    cr_expect_eq(qr_sql_type_oid(r->cols[2].type), 1186u);
    cr_expect_eq(qr_sql_type_oid(r->cols[3].type), 1082u);
    qr_sql_result_free(r);
    is("SELECT now() - interval '7 days' < now()", "t");
}

Test(types, bad_datetime_input_is_an_error)
{
    fails("SELECT '2024-02-30'::date", "22008");
    fails("SELECT '2024-13-01'::date", "22008");
    fails("SELECT 'nope'::date", "22007");
    fails("SELECT '25:00'::time", "22008");
    fails("SELECT 'abc'::interval", "22007");
    fails("SELECT '1 fortnight'::interval", "22007");
    fails("SELECT date '2024-01-01' * 2", "42883");
    fails("SELECT timestamp '2024-01-01' + 1", "42883");
    fails("SELECT interval '7 days' / 0", "22012");
    fails("SELECT timestamp '294000-01-01' + interval '1000 years'", "22008");
    fails("SELECT extract(hour from date '2024-01-01')", "22023");
}

/* Columns of the three types store, compare and update; a date column is
 * a timestamp column read as dates. */
Test(types, datetime_columns_store_and_round_trip)
{
    qr_sql_result_free(run("CREATE TABLE ev (id int PRIMARY KEY, d date, t time, iv interval)"));
    qr_sql_result_free(run("INSERT INTO ev VALUES (1, '2024-01-15', '10:30', '1 day 2 hours'), "
                           "(2, '2024-02-29 23:00', '23:59:59.5', '-3 mons'), (3, NULL, NULL, NULL)"));
    is("SELECT string_agg(id || ' ' || d || ' ' || t || ' ' || iv, '; ' ORDER BY id) FROM ev",
       "1 2024-01-15 10:30:00 1 day 02:00:00; 2 2024-02-29 23:59:59.5 -3 mons");
    is("SELECT string_agg(id::text, ',' ORDER BY iv) FROM ev", "2,1,3");
    is("SELECT string_agg(id::text, ',' ORDER BY id) FROM ev WHERE d > '2024-02-01' OR t < '10:31'",
       "1,2");
    qr_sql_result_free(run("UPDATE ev SET iv = iv + interval '1 hour', d = d + 7 WHERE id = 1"));
    is("SELECT d || ' ' || iv FROM ev WHERE id = 1", "2024-01-22 1 day 03:00:00");
    is("SELECT data_type FROM information_schema.columns WHERE table_name = 'ev' AND "
       "column_name = 't'", "time without time zone");
    fails("INSERT INTO ev (id, d) VALUES (9, 'nope')", "22007");
    fails("INSERT INTO ev (id, iv) VALUES (9, '1 fortnight')", "22007");
}

/* ---- uuid, bytea, json, jsonb, text functions ---- */

Test(types, uuid_bytea_json_as_postgresql)
{
    static const char *const cases[][2] = {
        {"'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
        {"'{a0eebc999c0b4ef8bb6d6bb9bd380a11}'::uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
        {"'a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11'::uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
        {"'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid < 'b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid", "t"},
        {"substr(gen_random_uuid()::text, 15, 1)", "4"},
        {"'\\x0102ff'::bytea", "\\x0102ff"},
        {"'abc\\\\def\\001'::bytea", "\\x6162635c64656601"},
        {"encode('\\x00ff10'::bytea, 'hex')", "00ff10"},
        {"encode('hello'::bytea, 'base64')", "aGVsbG8="},
        {"decode('aGVsbG8=', 'base64')", "\\x68656c6c6f"},
        {"encode('a\\\\b\\000c'::bytea, 'escape')", "a\\\\b\\000c"},
        {"length('\\x0102'::bytea)", "2"},
        {"'\\x01'::bytea < '\\x0101'::bytea", "t"},
        {"'{\"b\": 1, \"a\": [1, 2.50, \"x\"], \"a\": 3}'::json",
         "{\"b\": 1, \"a\": [1, 2.50, \"x\"], \"a\": 3}"},
        {"'{\"b\": 1, \"aa\": [1, 2.50, \"x\"], \"a\": 3, \"a\": 4}'::jsonb",
         "{\"a\": 4, \"b\": 1, \"aa\": [1, 2.50, \"x\"]}"},
        {"'{\"a\":{\"b\":[10,20,{\"c\":\"d\"}]}}'::jsonb -> 'a'", "{\"b\": [10, 20, {\"c\": \"d\"}]}"},
        {"'{\"a\":{\"b\":[10,20,{\"c\":\"d\"}]}}'::json -> 'a' -> 'b' -> 2", "{\"c\":\"d\"}"},
        {"'{\"a\":{\"b\":[10,20,{\"c\":\"d\"}]}}'::jsonb #>> '{a,b,2,c}'", "d"},
        {"'{\"a\":\"x\\ny\"}'::jsonb ->> 'a'", "x\ny"},
        {"'{\"a\":null}'::jsonb ->> 'a'", "NULL"},
        {"'[1,2,3]'::jsonb -> -1", "3"},
        {"'[1,2,3]'::jsonb ->> 5", "NULL"},
        {"'1e2'::jsonb", "100"},
        {"'[1.5E-3, -0, 0.10]'::jsonb", "[0.0015, 0, 0.10]"},
        {"'\"\\u00e9\\t\"'::jsonb", "\"é\\t\""},
        {"json_build_object('a', 1, 'b', 'x', 'c', NULL, 'd', true, 'e', ARRAY[1,2])",
         "{\"a\" : 1, \"b\" : \"x\", \"c\" : null, \"d\" : true, \"e\" : [1,2]}"},
        {"jsonb_build_object('b', 1, 'a', 2.5)", "{\"a\": 2.5, \"b\": 1}"},
        {"json_build_array(1, 'a', NULL, 2.5)", "[1, \"a\", null, 2.5]"},
        {"to_json('he said \"hi\"'::text)", "\"he said \\\"hi\\\"\""},
        {"to_json(timestamp '2024-01-01 10:00')", "\"2024-01-01T10:00:00\""},
        {"to_jsonb(ARRAY[[1,2],[3,4]])", "[[1, 2], [3, 4]]"},
        {"json_typeof('{\"a\":1}')", "object"},
        {"jsonb_typeof('1.5')", "number"},
        {"json_array_length('[1,2,[3]]')", "3"},
        {"(SELECT json_agg(x) FROM (VALUES (1),(NULL),(3)) v(x))", "[1, null, 3]"},
        {"(SELECT jsonb_agg(x ORDER BY x DESC) FROM (VALUES ('a'),('b')) v(x))", "[\"b\", \"a\"]"},
        {"(SELECT row_to_json(v) FROM (VALUES (1, 'x', NULL::int)) v(a, b, c))",
         "{\"a\":1,\"b\":\"x\",\"c\":null}"},
        {"'{\"a\":1}'::jsonb = '{ \"a\" : 1 }'::jsonb", "t"},
        {"pg_typeof(ARRAY[1])", "integer[]"},
        {"pg_typeof(now())", "timestamp with time zone"},
        {"quote_ident('Abc') || quote_ident('abc') || quote_ident('select') || quote_ident('a\"b')",
         "\"Abc\"abc\"select\"\"a\"\"b\""},
        {"quote_ident('_x1$')", "\"_x1$\""},
        {"quote_literal('it''s') || quote_literal('a\\b') || quote_nullable(NULL)",
         "'it''s'E'a\\\\b'NULL"},
        {"format('Hello %s, %I, %L, %%', 'World', 'My Table', 'O''Reilly')",
         "Hello World, \"My Table\", 'O''Reilly', %"},
        {"format('%2$s %1$s %s', 'a', 'b')", "b a b"},
        {"format('|%5s|%-5s|', 'ab', 'cd')", "|   ab|cd   |"},
        {"format('%L', NULL)", "NULL"},
    };
    select_each(cases, sizeof cases / sizeof *cases);
    QrSqlResult *r = run("SELECT gen_random_uuid(), '\\x01'::bytea, '{}'::json, '[]'::jsonb");
    cr_expect_eq(qr_sql_type_oid(r->cols[0].type), 2950u);
    cr_expect_eq(qr_sql_type_oid(r->cols[1].type), 17u);
    cr_expect_eq(qr_sql_type_oid(r->cols[2].type), 114u);
    cr_expect_eq(qr_sql_type_oid(r->cols[3].type), 3802u);
    qr_sql_result_free(r);
    fails("SELECT 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1'::uuid", "22P02");
    fails("SELECT 'a0eebc99--9c0b-4ef8-bb6d-6bb9bd380a11'::uuid", "22P02");
    fails("SELECT '\\x0g'::bytea", "22P02");
    fails("SELECT '\\x012'::bytea", "22P02");
    fails("SELECT '{\"a\":1'::json", "22P02");
    fails("SELECT '{\"a\":1} x'::jsonb", "22P02");
    fails("SELECT '[01]'::json", "22P02");
    fails("SELECT json_build_object(NULL, 1)", "22004");
    fails("SELECT json_array_length('{}')", "22023");
    fails("SELECT format('%s and %s', 'one')", "22023");
    fails("SELECT format('%I', NULL)", "22004");
    /* deep nesting is an error, never a crash */
    char deep[8200];
    size_t k = (size_t)snprintf(deep, sizeof deep, "SELECT '");
    for (int i = 0; i < 4000; i++)
        deep[k++] = '[';
    snprintf(deep + k, sizeof deep - k, "'::jsonb");
    fails(deep, "54001");
}

Test(types, bytea_output_escape_as_postgresql)
{
    /* byteaout with bytea_output = escape: \\ doubled, bytes outside
     * 0x20..0x7e as \ooo; both for the text a client reads and for ::text */
    static const unsigned char BYTES[] = {'A', 0xff, '\\', '\n', ' ', 0, '~', 0x7f};
    QrSqlValue v = {.type = QR_SQL_BYTEA};
    v.u.s.s = (const char *)BYTES;
    v.u.s.n = sizeof BYTES;
    QrBuf b;
    qr_buf_init(&b);
    qr_sql_session_value_text(env.s, &v, &b);
    cr_expect(b.len == 18 && !memcmp(b.data, "\\x41ff5c0a20007e7f", 18), "hex by default: %.*s",
              (int)b.len, (const char *)b.data);
    exec_ok("SET bytea_output = 'escape'");
    b.len = 0;
    qr_sql_session_value_text(env.s, &v, &b);
    const char *want = "A\\377\\\\\\012 \\000~\\177";
    cr_expect(b.len == strlen(want) && !memcmp(b.data, want, b.len), "escape: %.*s", (int)b.len,
              (const char *)b.data);
    qr_buf_free(&b);
    is("SELECT '\\x41ff'::bytea::text", "A\\377");
    is("SELECT 'a\\\\b'::bytea::text", "a\\\\b");
    exec_ok("SET bytea_output = hex");
    is("SELECT '\\x41ff'::bytea::text", "\\x41ff");
    fails("SET bytea_output = 'octal'", "22023");
}

Test(types, uuid_bytea_json_columns_store_and_round_trip)
{
    qr_sql_result_free(run("CREATE TABLE things (id int PRIMARY KEY, u uuid, b bytea, j json, "
                           "jb jsonb)"));
    qr_sql_result_free(run("INSERT INTO things VALUES (1, 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', "
                           "'\\x00ff', '{\"k\" : [1, 2]}', '{\"b\": 1, \"a\": {\"c\": true}}'), "
                           "(2, NULL, '', 'null', '[]')"));
    is("SELECT u || ' ' || b || ' ' || j || ' ' || jb FROM things WHERE id = 1",
       "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11 \\x00ff {\"k\" : [1, 2]} {\"a\": {\"c\": true}, \"b\": 1}");
    is("SELECT jb -> 'a' ->> 'c' FROM things WHERE id = 1", "true");
    is("SELECT count(*) FROM things WHERE u = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "1");
    is("SELECT length(b) FROM things WHERE id = 2", "0");
    fails("INSERT INTO things (id, u) VALUES (3, 'nope')", "22P02");
    fails("INSERT INTO things (id, jb) VALUES (3, '{')", "22P02");
}
