/*
 * test_sql_numeric.c — numeric as an exact decimal, against the results
 * PostgreSQL 15 prints: input forms, + - * / % with PostgreSQL's result
 * scales (the quotient's from select_div_scale), round / trunc / ceil /
 * floor half away from zero, numeric(p, s) typmods and their errors, the
 * special values, and a brute-force model: sums and products of random
 * decimals checked against exact integer arithmetic on the scaled values.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "sql_test_env.h"
#include "sql_test_cells.h"
#include "query/sql.h"
#include "query/filter.h"
#include "query/sql_w.h"
#include "store/mem.h"
#include "store/schema.h"

#include <cJSON.h>

static Env env;

static void setup(void) { env_open(&env); }
static void teardown(void) { env_close(&env); }

TestSuite(numeric, .init = setup, .fini = teardown, .timeout = 120);

static QrSqlResult *run(const char *sql) { return tc_run(&env, sql); }
static void exec_ok(const char *sql) { tc_exec(&env, sql); }
static void is(const char *sql, const char *want) { tc_is(&env, sql, want); }
static void fails(const char *sql, const char *state) { tc_fails(&env, sql, state); }


static void check_cases(const char *const (*cases)[2], size_t n) { tc_select_each(&env, cases, n); }

Test(numeric, input_and_output_as_postgresql)
{
    static const char *const cases[][2] = {
        {"'12.50'::numeric", "12.50"},       {"' 12.50 '::numeric", "12.50"},
        {"'1e3'::numeric", "1000"},          {"'1.5e-2'::numeric", "0.015"},
        {"'-0.00'::numeric", "0.00"},        {"'+007'::numeric", "7"},
        {"'.5'::numeric", "0.5"},            {"'5.'::numeric", "5"},
        {"'nan'::numeric", "NaN"},           {"'-Infinity'::numeric", "-Infinity"},
        {"'123456789012345678901234567890.123456789'::numeric",
         "123456789012345678901234567890.123456789"},
        {"2.5::numeric", "2.5"},             {"42::numeric", "42"},
        {"'2.5'::numeric::int4", "3"},       {"'-2.5'::numeric::int8", "-3"},
        {"pg_typeof('1'::numeric + 1)", "numeric"},
        {"pg_typeof('1'::numeric + 1.5)", "numeric"},
        {"pg_typeof('1'::numeric + 1.5::float8)", "double precision"},
    };
    check_cases(cases, sizeof cases / sizeof *cases);
    fails("SELECT 'abc'::numeric", "22P02");
    fails("SELECT '1.2.3'::numeric", "22P02");
    fails("SELECT ''::numeric", "22P02");
    fails("SELECT '1e'::numeric", "22P02");
    fails("SELECT '99999999999999999999'::numeric::int8", "22003");
    fails("SELECT repeat('9', 20001)::numeric", "22003");            /* past 20,000 digits */
    fails("SELECT repeat('9', 15000)::numeric * repeat('9', 6000)::numeric", "22003");
    is("SELECT length(repeat('9', 9000)::numeric::text)", "9000");
}

Test(numeric, arithmetic_keeps_postgresql_scales)
{
    static const char *const cases[][2] = {
        {"'0.1'::numeric + '0.2'::numeric", "0.3"},
        {"'1.10'::numeric + 2", "3.10"},
        {"'1.10'::numeric - '1.1'::numeric", "0.00"},
        {"'1.5'::numeric * '2.25'::numeric", "3.375"},
        {"'0.10'::numeric * '0.10'::numeric", "0.0100"},
        {"10::numeric / 4", "2.5000000000000000"},
        {"1::numeric / 3", "0.33333333333333333333"},
        {"2::numeric / 3", "0.66666666666666666667"},
        {"3::numeric / 3", "1.00000000000000000000"},
        {"'12.5'::numeric / 3", "4.1666666666666667"},
        {"'1'::numeric / '0.0003'::numeric", "3333.3333333333333333"},
        {"'123456789012345678901234567890'::numeric * 10", "1234567890123456789012345678900"},
        {"'99999999999999999999'::numeric + 1", "100000000000000000000"},
        {"'-7.5'::numeric % 2", "-1.5"},
        {"7::numeric % -3", "1"},
        {"-('1.50'::numeric)", "-1.50"},
        {"'NaN'::numeric + 1", "NaN"},
        {"'Infinity'::numeric - 'Infinity'::numeric", "NaN"},
        {"'Infinity'::numeric * -1", "-Infinity"},
        {"1::numeric / 'Infinity'::numeric", "0"},
        {"'NaN'::numeric > 'Infinity'::numeric", "t"},
        {"'1.0'::numeric = 1", "t"},
        {"'0.30'::numeric = '0.1'::numeric + '0.2'::numeric", "t"},
        {"'-1'::numeric < '-0.5'::numeric", "t"},
    };
    check_cases(cases, sizeof cases / sizeof *cases);
    fails("SELECT 1::numeric / 0", "22012");
    fails("SELECT '1.5'::numeric % 0", "22012");
}

Test(numeric, round_trunc_ceil_floor)
{
    static const char *const cases[][2] = {
        {"round('2.5'::numeric)", "3"},          {"round('-2.5'::numeric)", "-3"},
        {"round('1234.5678'::numeric, 2)", "1234.57"},
        {"round('1234.5678'::numeric, -2)", "1200"},
        {"round('9.995'::numeric, 2)", "10.00"}, {"round(5)", "5"},
        {"round(5, 2)", "5.00"},                 {"pg_typeof(round(5))", "numeric"},
        {"trunc('1234.5678'::numeric, 2)", "1234.56"},
        {"trunc('-1.99'::numeric)", "-1"},       {"ceil('-1.5'::numeric)", "-1"},
        {"floor('-1.5'::numeric)", "-2"},        {"ceil('1.1'::numeric)", "2"},
        {"floor('7'::numeric)", "7"},            {"abs('-3.50'::numeric)", "3.50"},
        {"round(2.5::float8)", "3"},             {"pg_typeof(round(2.5::float8))", "double precision"},
    };
    check_cases(cases, sizeof cases / sizeof *cases);
}

Test(numeric, typmods_round_and_overflow_as_postgresql)
{
    static const char *const cases[][2] = {
        {"'1.5'::numeric(5,2)", "1.50"},
        {"'123.456'::numeric(5,1)", "123.5"},
        {"'0.005'::numeric(3,2)", "0.01"},
        {"'-0.004'::numeric(3,2)", "0.00"},
        {"'1e-3'::numeric(2)", "0"},
        {"'NaN'::numeric(3)", "NaN"},
        {"'99.994'::numeric(4,2)", "99.99"},
    };
    check_cases(cases, sizeof cases / sizeof *cases);
    fails("SELECT '99.995'::numeric(4,2)", "22003");   /* rounds to 100.00 */
    fails("SELECT '1'::numeric(2,2)", "22003");
    fails("SELECT 'Infinity'::numeric(3)", "22003");
    fails("SELECT 1::numeric(0)", "22023");
    fails("SELECT 1::numeric(3,4)", "22023");
    fails("SELECT 1::numeric(1001)", "22023");
    /* the typmod applies to non-constant values too */
    is("SELECT x::numeric(6,3) FROM (SELECT '12.5'::numeric AS x) s", "12.500");
    fails("SELECT x::numeric(2,1) FROM (SELECT '12.5'::numeric AS x) s", "22003");
}

/* v / 10^scale as a decimal with exactly `scale` fraction digits. */
static void scaled(char *buf, size_t n, int64_t v, int scale)
{
    int64_t p = 1;
    for (int k = 0; k < scale; k++)
        p *= 10;
    uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    snprintf(buf, n, "%s%" PRIu64 ".%0*" PRIu64, v < 0 ? "-" : "", m / (uint64_t)p, scale,
             m % (uint64_t)p);
}

/* Sums, products and remainders of random decimals against exact integer
 * arithmetic on their scaled values (all fit in int64 at scale 4). */
Test(numeric, arithmetic_agrees_with_a_scaled_integer_model)
{
    srand(15);
    for (int i = 0; i < 300; i++) {
        int64_t a = (int64_t)(rand() % 2000001) - 1000000; /* a / 100 */
        int64_t b = (int64_t)(rand() % 2000001) - 1000000;
        char as[32], bs[32], q[256], want[64];
        scaled(as, sizeof as, a, 2);
        scaled(bs, sizeof bs, b, 2);
        snprintf(q, sizeof q, "SELECT '%s'::numeric + '%s'::numeric", as, bs);
        scaled(want, sizeof want, a + b, 2);
        is(q, want);
        snprintf(q, sizeof q, "SELECT '%s'::numeric * '%s'::numeric", as, bs);
        scaled(want, sizeof want, a * b, 4);
        is(q, want);
        if (b != 0) { /* a % b: the dividend's sign, scale 2 */
            snprintf(q, sizeof q, "SELECT '%s'::numeric %% '%s'::numeric", as, bs);
            scaled(want, sizeof want, a % b, 2);
            is(q, want);
        }
    }
}

Test(numeric, numeric_columns_compute_exactly)
{
    exec_ok("CREATE TABLE prices (id int PRIMARY KEY, amount numeric, qty int)");
    exec_ok("INSERT INTO prices VALUES (1, 0.1, 3), (2, 0.2, 1), (3, 12.5, 2)");
    is("SELECT amount * qty FROM prices WHERE id = 1", "0.3");
    is("SELECT amount + 0.2::numeric FROM prices WHERE id = 1", "0.3");
    is("SELECT -amount FROM prices WHERE id = 3", "-12.5");
    is("SELECT amount / 3 FROM prices WHERE id = 3", "4.1666666666666667");
    is("SELECT pg_typeof(amount * qty) FROM prices WHERE id = 1", "numeric");
    is("SELECT sum(amount) FROM prices", "12.8");
    is("SELECT pg_typeof(sum(amount)) FROM prices", "numeric");
    is("SELECT avg(amount) FROM prices WHERE id < 3", "0.15000000000000000000");
    is("SELECT id FROM prices ORDER BY amount DESC LIMIT 1", "3");
    /* a decimal literal beside a numeric is numeric, with its written scale */
    is("SELECT amount * 1.10 FROM prices WHERE id = 3", "13.750");
    is("SELECT amount * 1.1 FROM prices WHERE id = 1", "0.11");
    is("SELECT amount - -0.05 FROM prices WHERE id = 2", "0.25");
    is("SELECT pg_typeof(amount * 1.5) FROM prices WHERE id = 1", "numeric");
    is("SELECT 1.50::numeric", "1.50");
    is("SELECT 0.1 + 0.2", "0.3");                  /* literals with each other */
    is("SELECT 2.5 * 2", "5.0");
    is("SELECT pg_typeof(1.5 * 2)", "numeric");
    is("SELECT pg_typeof(1.5 * 2::float8)", "double precision"); /* beside a float */
}

Test(numeric, typmod_columns_round_check_and_describe)
{
    exec_ok("CREATE TABLE money (id int PRIMARY KEY, p numeric(10,2), q numeric)");
    exec_ok("INSERT INTO money VALUES (1, 12.5, 12.5), (2, '3.14159', 3.14159), (3, NULL, -0.5)");
    is("SELECT p FROM money WHERE id = 1", "12.50");  /* the declared scale */
    is("SELECT q FROM money WHERE id = 1", "12.5");
    is("SELECT (SELECT p FROM money m WHERE id = 1) FROM money WHERE id = 1", "12.50");
    QrSqlResult *star = run("SELECT * FROM money WHERE id = 1");
    QrBuf sb;
    qr_buf_init(&sb);
    qr_sql_value_text(&star->vals[1], &sb);
    cr_expect(sb.len == 5 && !memcmp(sb.data, "12.50", 5), "SELECT *: %.*s", (int)sb.len,
              (const char *)sb.data);
    qr_buf_free(&sb);
    qr_sql_result_free(star);
    is("UPDATE money SET q = 12.5 WHERE id = 1 RETURNING p", "12.50");
    is("SELECT p FROM money WHERE id = 2", "3.14");   /* rounded on the way in */
    is("SELECT p + q FROM money WHERE id = 2", "6.28159");
    fails("INSERT INTO money VALUES (4, 123456789.5, 1)", "22003");
    fails("UPDATE money SET p = 1e9 WHERE id = 1", "22003");
    exec_ok("UPDATE money SET p = p * 3 WHERE id = 2");
    is("SELECT p FROM money WHERE id = 2", "9.42");
    is("SELECT sum(p) FROM money", "21.92");
    is("SELECT sum(p) FROM money WHERE id = 1", "12.50"); /* the column's scale */
    is("SELECT avg(p) FROM money WHERE id = 1", "12.5000000000000000");
    is("SELECT sum(q) FROM money WHERE id = 1", "12.5");
    is("SELECT count(*) FROM money WHERE p > '9.415'::numeric", "2");
    is("SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
       "WHERE attrelid = 'money'::regclass AND attname = 'p'", "numeric(10,2)");
    is("SELECT numeric_precision || ',' || numeric_scale FROM information_schema.columns "
       "WHERE table_name = 'money' AND column_name = 'p'", "10,2");
    /* the result column's typmod, as RowDescription carries it */
    QrSqlResult *r = run("SELECT p, q, q::numeric(5,1) FROM money WHERE id = 1");
    cr_expect_eq(r->cols[0].typmod, (10 << 16 | 2) + 4);
    cr_expect_eq(r->cols[1].typmod, -1);
    cr_expect_eq(r->cols[2].typmod, (5 << 16 | 1) + 4);
    qr_sql_result_free(r);
    fails("CREATE TABLE bad (id int PRIMARY KEY, p numeric(2,3))", "22023");
}

/* The examples of PostgreSQL's documentation (Table 9.29, to_char), between
 * brackets so the padding counts. */
Test(numeric, to_char_of_numbers_as_postgresql)
{
    static const char *const cases[][2] = {
        {"'[' || to_char(-0.1, '99.99') || ']'", "[  -.10]"},
        {"'[' || to_char(-0.1, 'FM9.99') || ']'", "[-.1]"},
        {"'[' || to_char(-0.1, 'FM90.99') || ']'", "[-0.1]"},
        {"'[' || to_char(0.1, '0.9') || ']'", "[ 0.1]"},
        {"'[' || to_char(12, '9990999.9') || ']'", "[    0012.0]"},
        {"'[' || to_char(12, 'FM9990999.9') || ']'", "[0012.]"},
        {"'[' || to_char(485, '999') || ']'", "[ 485]"},
        {"'[' || to_char(-485, '999') || ']'", "[-485]"},
        {"'[' || to_char(485, '9 9 9') || ']'", "[ 4 8 5]"},
        {"'[' || to_char(1485, '9,999') || ']'", "[ 1,485]"},
        {"'[' || to_char(1485, '9G999') || ']'", "[ 1,485]"},
        {"'[' || to_char(148.5, '999.999') || ']'", "[ 148.500]"},
        {"'[' || to_char(148.5, 'FM999.999') || ']'", "[148.5]"},
        {"'[' || to_char(148.5, 'FM999.990') || ']'", "[148.500]"},
        {"'[' || to_char(148.5, '999D999') || ']'", "[ 148.500]"},
        {"'[' || to_char(3148.5, '9G999D999') || ']'", "[ 3,148.500]"},
        {"'[' || to_char(-485, '999S') || ']'", "[485-]"},
        {"'[' || to_char(-485, '999MI') || ']'", "[485-]"},
        {"'[' || to_char(485, '999MI') || ']'", "[485 ]"},
        {"'[' || to_char(485, 'FM999MI') || ']'", "[485]"},
        {"'[' || to_char(485, 'SG999') || ']'", "[+485]"},
        {"'[' || to_char(-485, 'SG999') || ']'", "[-485]"},
        {"'[' || to_char(-485, '9SG99') || ']'", "[4-85]"},
        {"'[' || to_char(-485, '999PR') || ']'", "[<485>]"},
        {"'[' || to_char(485, '\"Good number:\"999') || ']'", "[Good number: 485]"},
        {"'[' || to_char(485.8, '\"Pre:\"999\" Post:\" .999') || ']'", "[Pre: 485 Post: .800]"},
        {"'[' || to_char(12, '99V999') || ']'", "[ 12000]"},
        {"'[' || to_char(12.4, '99V999') || ']'", "[ 12400]"},
        {"'[' || to_char(12.45, '99V9') || ']'", "[ 125]"},
        /* exact numerics, rounding half away from zero, overflow as # */
        {"to_char('1234567.891'::numeric, 'FM9,999,999.00')", "1,234,567.89"},
        {"to_char('0.125'::numeric, 'FM0.00')", "0.13"},
        {"'[' || to_char(1234, '99') || ']'", "[ ##]"},
        {"'[' || to_char(1234.5, '99.9') || ']'", "[ ##.#]"},
    };
    check_cases(cases, sizeof cases / sizeof *cases);
    fails("SELECT to_char(1, '9.9.9')", "42601");
    fails("SELECT to_char(12, '9V9.9')", "42601");
    fails("SELECT to_char(1, '9EEEE')", "0A000");
    fails("SELECT to_char(1, 'RN')", "0A000");
    fails("SELECT to_char(1, 'SG999PR')", "42601");
    fails("SELECT to_char(1, 'S999S')", "42601");
}

static void reopen(void)
{
    qr_sql_session_free(env.s);
    qr_db_close(env.db);
    QrError err;
    cr_assert_eq(env_db_open(&env, &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_sql_session_new(env.db, &env.s, &err), QR_OK, "%s", err.message);
}

/* Does a line of the EXPLAIN statement's output hold `text`? */
static bool plan_says(const char *explain, const char *text)
{
    QrSqlResult *r = run(explain);
    bool found = false;
    for (uint64_t i = 0; i < r->n_rows; i++)
        found |= memmem(r->vals[i].u.s.s, r->vals[i].u.s.n, text, strlen(text)) != NULL;
    qr_sql_result_free(r);
    return found;
}

static void flush(const char *table)
{
    QrTable *t;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_table_get(env.db, table, &t, &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_flush(t, &err), QR_OK, "%s", err.message);
}

/* numeric columns store exactly: a plain numeric keeps its digits and the
 * scale it was written with (PostgreSQL: 12.50 reads back 12.50), numeric(p,
 * s) its declared scale, through the write buffer, a flushed segment and a
 * reopen; order, grouping, min / max and comparisons are exact. */
Test(numeric, numeric_columns_store_exactly)
{
    exec_ok("CREATE TABLE ex (id int PRIMARY KEY, a numeric, b numeric(12,2), "
            "c numeric(30,4))");
    exec_ok("INSERT INTO ex VALUES (1, 12.50, 12.5, 1.5), "
            "(2, '123456789012345678901234567890.123456789', 9999999999.99, "
            "'12345678901234567890123.4567'), (3, 0.1, -0.01, NULL), (4, 'NaN', 'NaN', 'NaN'), "
            "(5, 2, 1.005, -2), (6, '-Infinity', '-3', 0.00001)");
    for (int pass = 0; pass < 3; pass++) {
        is("SELECT a FROM ex WHERE id = 1", "12.50");
        is("SELECT a FROM ex WHERE id = 2", "123456789012345678901234567890.123456789");
        is("SELECT b FROM ex WHERE id = 2", "9999999999.99");
        is("SELECT b FROM ex WHERE id = 5", "1.01"); /* rounded half away from zero */
        is("SELECT c FROM ex WHERE id = 2", "12345678901234567890123.4567");
        is("SELECT c FROM ex WHERE id = 6", "0.0000");
        is("SELECT string_agg(id::text, ',' ORDER BY a) FROM ex", "6,3,5,1,2,4");
        is("SELECT string_agg(id::text, ',' ORDER BY b DESC) FROM ex", "4,2,1,5,3,6");
        is("SELECT min(a)::text || ' ' || max(a) || ' ' || min(b) || ' ' || max(b) FROM ex",
           "-Infinity NaN -3.00 NaN");
        is("SELECT count(*) FROM ex WHERE a = 12.5", "1");  /* equal at any scale */
        is("SELECT count(*) FROM ex WHERE b > 1.005", "4");   /* 1.01, 12.50, 9999999999.99, NaN */
        is("SELECT count(DISTINCT b) FROM ex", "6");
        is("SELECT pg_typeof(a)::text || ' ' || pg_typeof(b) FROM ex WHERE id = 1",
           "numeric numeric");
        if (pass == 0)
            flush("ex");
        if (pass == 1)
            reopen();
    }
    exec_ok("INSERT INTO ex VALUES (7, 12.5000, 12.5, 1)");
    is("SELECT count(*) FROM (SELECT a FROM ex GROUP BY a) g", "6"); /* 12.50 = 12.5000 */
    /* a merge copies both column kinds row by row */
    flush("ex");
    QrTable *t;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_table_get(env.db, "ex", &t, &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_merge(t, &err), QR_OK, "%s", err.message);
    is("SELECT string_agg(a || '/' || b, ' ' ORDER BY id) FROM ex WHERE id IN (1, 4, 7)",
       "12.50/12.50 NaN/NaN 12.5000/12.50");
    fails("INSERT INTO ex VALUES (8, 1, 99999999999, 1)", "22003");  /* past numeric(12,2) */
    fails("INSERT INTO ex VALUES (8, 'abc', 1, 1)", "22P02");
    fails("INSERT INTO ex VALUES (8, 1, 'Infinity', 1)", "22003");
}

/* Random numeric(12, 3) and numeric values against a scaled-integer model:
 * every stored value reads back as the model prints it, the order by the
 * column is the model's, and sums are exact. */
Test(numeric, stored_numerics_agree_with_a_scaled_integer_model)
{
    exec_ok("CREATE TABLE rnd (id int PRIMARY KEY, s numeric(12,3), t numeric)");
    srand(99);
    enum { N = 400 };
    static int64_t m[N];
    int64_t total = 0;
    char q[256], v[64];
    for (int i = 0; i < N; i++) {
        m[i] = (int64_t)(rand() % 2000000001) - 1000000000; /* +-1e6 at scale 3 */
        total += m[i];
        scaled(v, sizeof v, m[i], 3);
        snprintf(q, sizeof q, "INSERT INTO rnd VALUES (%d, '%s', '%s')", i, v, v);
        exec_ok(q);
        if (i == N / 2)
            flush("rnd");
    }
    for (int i = 0; i < N; i += 7) {
        scaled(v, sizeof v, m[i], 3);
        snprintf(q, sizeof q, "SELECT s::text || '|' || t FROM rnd WHERE id = %d", i);
        char want[160];
        snprintf(want, sizeof want, "%s|%s", v, v);
        is(q, want);
    }
    scaled(v, sizeof v, total, 3);
    is("SELECT sum(s) FROM rnd", v);
    is("SELECT sum(t) FROM rnd", v);
    /* the smallest and largest by the model */
    int lo = 0, hi = 0;
    for (int i = 1; i < N; i++) {
        lo = m[i] < m[lo] ? i : lo;
        hi = m[i] > m[hi] ? i : hi;
    }
    snprintf(v, sizeof v, "%d", lo);
    is("SELECT id FROM rnd ORDER BY s LIMIT 1", v);
    is("SELECT id FROM rnd ORDER BY t LIMIT 1", v);
    snprintf(v, sizeof v, "%d", hi);
    is("SELECT id FROM rnd ORDER BY s DESC LIMIT 1", v);
    is("SELECT id FROM rnd ORDER BY t DESC LIMIT 1", v);
    /* ORDER BY a numeric(p, s) column LIMIT k walks its blocks best bound first
     * (value * 10^s orders as the value) and agrees with sorting the rows */
    exec_ok("INSERT INTO rnd VALUES (1000, 'NaN', 'NaN'), (1001, NULL, NULL)");
    cr_expect(plan_says("EXPLAIN ANALYZE SELECT id FROM rnd ORDER BY s DESC LIMIT 5", "Ordered Walk"),
              "ORDER BY s LIMIT walks the column's blocks");
    const char *orders[] = {"DESC", "DESC NULLS LAST", "", "NULLS FIRST"};
    for (int i = 0; i < 4; i++) {
        char a[160], b[160], want[400];
        snprintf(a, sizeof a, "SELECT string_agg(id::text, ',') FROM (SELECT id FROM rnd ORDER BY s "
                 "%s, id LIMIT 7) q", orders[i]);
        snprintf(b, sizeof b, "SELECT string_agg(id::text, ',') FROM (SELECT id FROM rnd ORDER BY "
                 "s + 0 %s, id LIMIT 7) q", orders[i]);
        snprintf(want, sizeof want, "%s", tc_one(&env, b));
        is(a, want);
    }
}

/* Tables made before numeric was stored exactly keep a float8 column (the
 * schema's "float", sql.json's "numeric"): they keep opening and reading,
 * at the declared scale. */
Test(numeric, old_float8_numeric_columns_keep_reading)
{
    QrSchema *s = calloc(1, sizeof *s);
    const char *js = "{\"primary_key\": \"id\", \"fields\": [{\"name\": \"p\", \"type\": \"float\"},"
                     "{\"name\": \"q\", \"type\": \"float\"}]}";
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(schema_from_json(js, strlen(js), s, &err), QR_OK, "%s", err.message);
    QrTable *t;
    cr_assert_eq(qr_table_create(env.db, "old", s, &t, &err), QR_OK, "%s", err.message);
    free(s);
    cJSON *meta = cJSON_Parse("{\"pk_type\": \"int8\", \"columns\": {"
                              "\"id\": {\"type\": \"int4\", \"typmod\": -1},"
                              "\"p\": {\"type\": \"numeric\", \"typmod\": 655366},"
                              "\"q\": {\"type\": \"numeric\", \"typmod\": -1}}}");
    cr_assert_eq(sqlw_meta_save_db(env.db, "old", meta, &err), QR_OK, "%s", err.message);
    cJSON_Delete(meta);
    reopen();
    exec_ok("INSERT INTO old VALUES (1, 12.5, 0.1), (2, 3.14159, 0.2)");
    flush("old");
    reopen();
    is("SELECT p FROM old WHERE id = 1", "12.50"); /* numeric(10,2): 655366 */
    is("SELECT p FROM old WHERE id = 2", "3.14");
    is("SELECT q FROM old WHERE id = 2", "0.2");
    is("SELECT sum(q) FROM old", "0.3");
    is("SELECT pg_typeof(p) FROM old LIMIT 1", "numeric");
    is("SELECT string_agg(id::text, ',' ORDER BY p DESC) FROM old", "1,2");
}

/* sum and avg of numeric add exactly (int128 at the largest scale, the
 * decimal code past it), at PostgreSQL's scales, with NaN and infinities
 * as PostgreSQL adds them. */
Test(numeric, sums_of_numeric_are_exact)
{
    exec_ok("CREATE TABLE sx (id int PRIMARY KEY, a numeric(18,2), b numeric)");
    exec_ok("INSERT INTO sx VALUES (1, 9999999999999999.99, '12345678901234567890.5'), "
            "(2, 0.01, 0.25), (3, NULL, 'NaN'), (4, 1.5, '100000000000000000000000000000000000'), "
            "(5, -1.5, '0.0001'), (6, 0, 'Infinity'), (7, 0, '-Infinity')");
    is("SELECT sum(a) FROM sx", "10000000000000000.00");
    is("SELECT sum(a) FROM sx WHERE id IN (4, 5)", "0.00");
    is("SELECT sum(b) FROM sx WHERE id < 3", "12345678901234567890.75");
    is("SELECT sum(b) FROM sx WHERE id IN (4, 5)", "100000000000000000000000000000000000.0001");
    is("SELECT sum(b) FROM sx WHERE id IN (1, 2, 4, 5)",
       "100000000000000012345678901234567890.7501");
    is("SELECT sum(b) FROM sx", "NaN");
    is("SELECT sum(b) FROM sx WHERE id >= 6", "NaN");        /* Infinity + -Infinity */
    is("SELECT sum(b) FROM sx WHERE id IN (2, 6)", "Infinity");
    is("SELECT avg(a) FROM sx WHERE id < 3", "5000000000000000.0000"); /* 16 digits */
    is("SELECT avg(b) FROM sx WHERE id IN (2, 5)", "0.12505000000000000000");
    is("SELECT sum(a) FILTER (WHERE id > 1) FROM sx", "0.01");
    is("SELECT string_agg(s::text, ',' ORDER BY g) FROM (SELECT id % 2 AS g, sum(a) AS s FROM sx "
       "GROUP BY id % 2) q", "1.51,9999999999999998.49");
}

/* The HTTP side's filters see a numeric field's column as scaled integers
 * or decimal text: they refuse it rather than compare wrongly. */
Test(numeric, http_filters_refuse_numeric_fields)
{
    exec_ok("CREATE TABLE hf (id int PRIMARY KEY, p numeric(10,2), q numeric)");
    QrTable *t;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_table_get(env.db, "hf", &t, &err), QR_OK, "%s", err.message);
    const char *texts[] = {"p > 12", "q = 1.5"};
    for (int i = 0; i < 2; i++) {
        QrFilter *f = NULL;
        qr_error_clear(&err);
        cr_expect_neq(qr_filter_parse(qr_table_schema(t), texts[i], strlen(texts[i]), &f, &err),
                      QR_OK, "%s", texts[i]);
        cr_expect(strstr(err.message, "numeric field") != NULL, "%s", err.message);
        qr_filter_free(f);
    }
}

/* A bare decimal literal is numeric, as PostgreSQL types it; beside a float
 * it becomes float8, and comparisons of float, int and numeric(p, s) columns
 * with it still prune by zone maps (EXPLAIN's column predicates). */
Test(numeric, decimal_literals_are_numeric)
{
    static const char *const cases[][2] = {
        {"1.50", "1.50"},
        {"pg_typeof(1.5)", "numeric"},
        {"-0.50", "-0.50"},
        {"1e3", "1000"},
        {"pg_typeof(1.5 * 2::float8)", "double precision"},
        {"pg_typeof(CASE WHEN true THEN 1.5 ELSE 2 END)", "numeric"},
        {"pg_typeof(coalesce(1.5, 2::float8))", "double precision"},
        {"round(2.5)", "3"},
        {"0.1 + 0.2 = 0.3", "t"},
        {"'1e300'::numeric::float8 > 1e299", "t"},
    };
    check_cases(cases, sizeof cases / sizeof *cases);
    exec_ok("CREATE TABLE lit (id int PRIMARY KEY, x float8, n int, p numeric(10,2))");
    exec_ok("INSERT INTO lit VALUES (1, 0.1, 1, 1.25), (2, 2.5, 3, 'NaN'), (3, 7, 5, -3.5)");
    is("SELECT string_agg(id::text, ',' ORDER BY id) FROM lit WHERE x = 0.1", "1");
    is("SELECT string_agg(id::text, ',' ORDER BY id) FROM lit WHERE n > 2.5", "2,3");
    is("SELECT string_agg(id::text, ',' ORDER BY id) FROM lit WHERE p > 1.2", "1,2"); /* NaN > */
    is("SELECT string_agg(id::text, ',' ORDER BY id) FROM lit WHERE p > 1.249", "1,2");
    is("SELECT string_agg(id::text, ',' ORDER BY id) FROM lit WHERE p = 1.250", "1");
    is("SELECT string_agg(id::text, ',' ORDER BY id) FROM lit WHERE p <> 1.25", "2,3");
    is("SELECT string_agg(id::text, ',' ORDER BY id) FROM lit WHERE id < 2.5", "1,2");
    is("SELECT string_agg(id::text, ',' ORDER BY id) FROM lit WHERE id = 2.0", "2");
    const char *plans[] = {"EXPLAIN SELECT id FROM lit WHERE x > 0.5",
                           "EXPLAIN SELECT id FROM lit WHERE p > 1.2"};
    for (int i = 0; i < 2; i++)
        cr_expect(plan_says(plans[i], "Column Predicates: 1"), "%s: no column predicate", plans[i]);
}

/* Aggregates of a numeric(p, s) column from column blocks (GROUP BY a
 * keyword, EXPLAIN's "partial states from column blocks"): the int64 sums
 * of value * 10^s carry past int64 exactly, NaN (the column's maximum)
 * makes the sum NaN, min / max print at the column's scale, and every
 * result equals the row-at-a-time answer (the same query with a FILTER,
 * which column blocks do not serve). */
Test(numeric, column_block_aggregates_of_numeric_are_exact)
{
    exec_ok("CREATE TABLE cb (id int PRIMARY KEY, k varchar(8), p numeric(18,0), q numeric(12,2))");
    char sql[256];
    for (int i = 1; i <= 10; i++) {
        snprintf(sql, sizeof sql, "INSERT INTO cb VALUES (%d, 'big', 999999999999999999, %d.25)",
                 i, i);
        exec_ok(sql);
    }
    exec_ok("INSERT INTO cb VALUES (11, 'big', -5, NULL), (12, 'nan', 'NaN', 1.10), "
            "(13, 'nan', 7, -2.5), (14, 'one', NULL, 0.1)");
    flush("cb");
    cr_expect(plan_says("EXPLAIN ANALYZE SELECT k, sum(p) FROM cb GROUP BY k", "column blocks"),
              "the aggregate reads column blocks");
    static const char *const q[][2] = {
        {"SELECT string_agg(k || ':' || s, ' ' ORDER BY k) FROM (SELECT k, sum(p)::text AS s "
         "FROM cb GROUP BY k) g",
         "big:9999999999999999985 nan:NaN"},
        {"SELECT string_agg(k || ':' || s, ' ' ORDER BY k) FROM (SELECT k, avg(p)::text AS s "
         "FROM cb GROUP BY k) g",
         "big:909090909090909090 nan:NaN"},
        {"SELECT string_agg(k || ':' || a || '/' || b || '/' || c, ' ' ORDER BY k) FROM (SELECT k, "
         "sum(q)::text AS a, min(q)::text AS b, max(q)::text AS c FROM cb GROUP BY k) g",
         "big:57.50/1.25/10.25 nan:-1.40/-2.50/1.10 one:0.10/0.10/0.10"},
        {"SELECT min(p)::text || ' ' || max(p) || ' ' || count(p) FROM cb WHERE k <> 'nan'",
         "-5 999999999999999999 11"},
    };
    for (size_t i = 0; i < sizeof q / sizeof *q; i++)
        is(q[i][0], q[i][1]);
    /* an int8 average past int8 goes on in float8 from the true sum (the
     * overflowing add once left its wrapped result behind) */
    is("SELECT avg(x) FROM (VALUES (9223372036854775807::int8), (9223372036854775807::int8)) v(x)",
       "9.223372036854776e+18");
    /* the same through the rows */
    is("SELECT sum(p) FILTER (WHERE id > 0)::text FROM cb WHERE k = 'big'", "9999999999999999985");
    is("SELECT sum(q) FILTER (WHERE id > 0)::text FROM cb WHERE k = 'big'", "57.50");
}

/* Column statistics (quarry stats, GET /tables/{t}/stats) show a numeric(p, s)
 * field's bounds as decimals (NaN, its maximum, as a string), and a plain
 * numeric's as null: its text orders by bytes. */
Test(numeric, column_stats_show_decimals)
{
    exec_ok("CREATE TABLE st (id int PRIMARY KEY, p numeric(10,2), q numeric)");
    exec_ok("INSERT INTO st VALUES (1, -1.5, 10), (2, 12.25, 9), (3, 3, NULL)");
    flush("st");
    QrTable *t;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_table_get(env.db, "st", &t, &err), QR_OK, "%s", err.message);
    QrColumnStats *cs;
    int n;
    cr_assert_eq(qr_table_column_stats(t, &cs, &n, &err), QR_OK, "%s", err.message);
    cr_assert_eq(n, 2);
    cr_expect_str_eq(cs[0].name, "p");
    cr_expect_str_eq(cs[0].col_type, "numeric");
    cr_expect_str_eq(cs[0].min_json, "-1.50");
    cr_expect_str_eq(cs[0].max_json, "12.25");
    cr_expect_str_eq(cs[1].min_json, "null");
    qr_free(cs);
    exec_ok("INSERT INTO st VALUES (4, 'NaN', 1)");
    flush("st");
    cr_assert_eq(qr_table_column_stats(t, &cs, &n, &err), QR_OK, "%s", err.message);
    cr_expect_str_eq(cs[0].max_json, "\"NaN\"");
    qr_free(cs);
}
