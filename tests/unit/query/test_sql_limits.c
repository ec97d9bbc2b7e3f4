/*
 * test_sql_limits.c — the SQL engine's answers to hostile input: sizes
 * computed from user values (repeat, replace, substr, generate_series,
 * to_timestamp), statements nested past the complexity limit, read-only
 * sessions, and loops that must see the deadline and cancel.
 *
 * Every case asserts the exact answer (a value, or an SQLSTATE) and each
 * was seen to fail with the guard it covers taken out.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/sql_int.h"
#include "query/sql_w.h"
#include "sql_test_env.h"
#include "store/util.h"

static Env env;

static void setup(void)
{
    qr_log_set_level(QR_LOG_ERROR);
    env_open(&env);
}

static void teardown(void) { env_close(&env); }

TestSuite(sql_limits, .init = setup, .fini = teardown);

/* Run one statement; the result (NULL on error, err filled). */
static QrSqlResult *try_sql(QrSqlSession *s, const char *sql, size_t len, QrError *err)
{
    qr_error_clear(err);
    QrSqlResult *r = NULL;
    if (qr_sql_exec(s, sql, len, &r, err) != QR_OK)
        cr_assert_null(r);
    return r;
}

static QrSqlResult *run(const char *sql)
{
    QrError err;
    QrSqlResult *r = try_sql(env.s, sql, strlen(sql), &err);
    cr_assert_not_null(r, "%.200s: %s (%s)", sql, err.message, qr_error_sqlstate(&err));
    return r;
}

static void fails_len(QrSqlSession *s, const char *sql, size_t len, const char *sqlstate)
{
    QrError err;
    QrSqlResult *r = try_sql(s, sql, len, &err);
    cr_assert_null(r, "%.200s should fail with %s", sql, sqlstate);
    cr_assert_str_eq(qr_error_sqlstate(&err), sqlstate, "%.200s: %s (%s)", sql, err.message,
                     qr_error_sqlstate(&err));
}

static void fails(const char *sql, const char *sqlstate)
{
    fails_len(env.s, sql, strlen(sql), sqlstate);
}

/* The text of row 0, column c. */
static const char *cell0(const QrSqlResult *r, int c)
{
    static char out[4][256];
    static int k;
    char *o = out[k++ & 3];
    const QrSqlValue *v = &r->vals[c];
    if (v->is_null)
        return strcpy(o, "NULL");
    QrBuf b;
    qr_buf_init(&b);
    qr_sql_value_text(v, &b);
    snprintf(o, 256, "%.*s", (int)b.len, b.data ? (char *)b.data : "");
    qr_buf_free(&b);
    return o;
}

/* ---- sizes from user values ---- */

Test(sql_limits, repeat_and_replace_check_the_length_before_building)
{
    /* 4 * (2^62 + 1) wraps to 4 in 64 bits: the old check passed and the
     * loop wrote 2^62 copies into 5 bytes */
    fails("SELECT repeat('abcd', 4611686018427387905)", "54000");
    fails("SELECT repeat('abcd', 9223372036854775807)", "54000");
    fails("SELECT repeat('x', 67108865)", "54000");
    fails("SELECT replace(repeat('a', 10000000), 'a', repeat('b', 10000000))", "54000");
    QrSqlResult *r = run("SELECT repeat('abcd', 3), length(repeat('x', 67108864)), "
                         "repeat('ab', 0), repeat('ab', -5), replace('abcabc', 'b', 'XY'), "
                         "replace('aaa', 'a', ''), replace('abc', '', 'z'), replace('aaaa', 'aa', 'b')");
    cr_assert_str_eq(cell0(r, 0), "abcdabcdabcd");
    cr_assert_str_eq(cell0(r, 1), "67108864");
    cr_assert_str_eq(cell0(r, 2), "");
    cr_assert_str_eq(cell0(r, 3), "");
    cr_assert_str_eq(cell0(r, 4), "aXYcaXYc");
    cr_assert_str_eq(cell0(r, 5), "");
    cr_assert_str_eq(cell0(r, 6), "abc");
    cr_assert_str_eq(cell0(r, 7), "bb");
    qr_sql_result_free(r);
}

Test(sql_limits, substr_series_and_timestamps_do_not_wrap)
{
    QrSqlResult *r = run("SELECT substr('hello', 9223372036854775807, 10), "
                         "substr('hello', 2, 9223372036854775807), substr('hello', -3, 6), "
                         "substr('hello', -9223372036854775807, 9223372036854775807)");
    cr_assert_str_eq(cell0(r, 0), "");
    cr_assert_str_eq(cell0(r, 1), "ello");
    cr_assert_str_eq(cell0(r, 2), "he");
    cr_assert_str_eq(cell0(r, 3), "");
    qr_sql_result_free(r);
    /* the whole int8 range is 2^64 values: the count wrapped to 0 rows */
    fails("SELECT count(*) FROM generate_series(-9223372036854775808, 9223372036854775807)",
          "54000");
    fails("SELECT count(*) FROM generate_series(9223372036854775807, "
          "-9223372036854775808, -1)", "54000");
    r = run("SELECT count(*), min(x), max(x) FROM generate_series(9223372036854775800, "
            "9223372036854775807, 3) AS g(x)");
    cr_assert_str_eq(cell0(r, 0), "3");
    cr_assert_str_eq(cell0(r, 1), "9223372036854775800");
    cr_assert_str_eq(cell0(r, 2), "9223372036854775806");
    qr_sql_result_free(r);
    fails("SELECT to_timestamp(1e300)", "22008");
    fails("SELECT to_timestamp('NaN'::float8)", "22008");
    r = run("SELECT to_timestamp(86400)");
    cr_assert_str_eq(cell0(r, 0), "1970-01-02 00:00:00+00");
    qr_sql_result_free(r);
}

Test(sql_limits, function_calls_take_at_most_100_arguments)
{
    QrBuf q;
    qr_buf_init(&q);
    qr_buf_printf(&q, "SELECT json_build_object(");
    for (int i = 0; i < 20000; i++)
        qr_buf_printf(&q, "%s'k%d', %d", i ? ", " : "", i, i);
    qr_buf_printf(&q, ")");
    fails_len(env.s, (const char *)q.data, q.len, "54023");
    qr_buf_free(&q);
    QrSqlResult *r = run("SELECT json_build_object('a', 1, 'b', 'x')");
    cr_assert_str_eq(cell0(r, 0), "{\"a\" : 1, \"b\" : \"x\"}");
    qr_sql_result_free(r);
}

static int count_rows(void *ctx, int n, char **vals, size_t *lens, int64_t line, QrError *err)
{
    (void)n, (void)vals, (void)lens, (void)line, (void)err;
    ++*(int *)ctx;
    return QR_OK;
}

Test(sql_limits, copy_rows_have_bounded_fields_and_length)
{
    /* a row of 2,000 fields: refused at its line, not split into ever
     * larger arrays (a line of a billion tabs) */
    CopyFmt fmt;
    copy_fmt_init(&fmt, false);
    int rows = 0;
    CopyReader rd;
    copy_reader_init(&rd, &fmt, count_rows, &rows);
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_printf(&b, "1\tok\n");
    for (int i = 0; i < 2000; i++)
        qr_buf_putc(&b, '\t');
    qr_buf_putc(&b, '\n');
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(copy_reader_feed(&rd, (const char *)b.data, b.len, &err), QR_EINVAL);
    cr_assert_str_eq(qr_error_sqlstate(&err), "22P04");
    cr_assert_eq(err.line, 2);
    cr_assert_eq(rows, 1);
    copy_reader_free(&rd);
    /* a row that never ends: refused once it passes 256 MB */
    copy_reader_init(&rd, &fmt, count_rows, &rows);
    size_t chunk = 4u << 20, fed = 0;
    char *a = malloc(chunk);
    cr_assert(a);
    memset(a, 'a', chunk);
    qr_error_clear(&err);
    int rc = QR_OK;
    while (rc == QR_OK && fed < (300u << 20)) {
        rc = copy_reader_feed(&rd, a, chunk, &err);
        fed += chunk;
    }
    cr_assert_eq(rc, QR_ELIMIT, "%s", err.message);
    cr_assert_str_eq(qr_error_sqlstate(&err), "54000");
    cr_assert_leq(fed, (size_t)(260u << 20));
    free(a);
    copy_reader_free(&rd);
    qr_buf_free(&b);
}

/* ---- nesting ---- */

/* prefix + unit x n + middle + close x n + suffix */
static char *nested(const char *prefix, const char *unit, int n, const char *middle,
                    const char *close, const char *suffix, size_t *len)
{
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_append(&b, prefix, strlen(prefix));
    for (int i = 0; i < n; i++)
        qr_buf_append(&b, unit, strlen(unit));
    qr_buf_append(&b, middle, strlen(middle));
    for (int i = 0; i < n; i++)
        qr_buf_append(&b, close, strlen(close));
    qr_buf_append(&b, suffix, strlen(suffix));
    qr_buf_putc(&b, 0);
    cr_assert(qr_buf_ok(&b));
    *len = b.len - 1;
    return (char *)b.data;
}

typedef struct DeepRun {
    const char *sql;
    size_t len;
    int rc;
    char sqlstate[6];
    char first[64]; /* row 0, column 0 */
    char msg[256];
} DeepRun;

static void *deep_thread(void *arg)
{
    DeepRun *d = arg;
    QrError err;
    QrSqlResult *r = try_sql(env.s, d->sql, d->len, &err);
    d->rc = r ? QR_OK : err.code;
    snprintf(d->sqlstate, sizeof d->sqlstate, "%s", r ? "00000" : qr_error_sqlstate(&err));
    snprintf(d->msg, sizeof d->msg, "%s", r ? "" : err.message);
    if (r && r->n_rows && r->n_cols)
        snprintf(d->first, sizeof d->first, "%s", cell0(r, 0));
    qr_sql_result_free(r);
    return NULL;
}

/* Run sql on a thread with a stack of stack_mb MB (the PostgreSQL port's
 * threads have 8). */
static DeepRun run_deep(const char *sql, size_t len, unsigned stack_mb)
{
    DeepRun d = {.sql = sql, .len = len};
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, (size_t)stack_mb << 20);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, &at, deep_thread, &d), 0);
    pthread_join(t, NULL);
    pthread_attr_destroy(&at);
    return d;
}

/* The longest sum asked to run: near the limit (ASan's frames are about
 * three times larger, and its 8 MB hold 3,000 levels). */
#ifdef __SANITIZE_ADDRESS__
#define SUM_OK 1000
#else
#define SUM_OK 4900
#endif

Test(sql_limits, deep_statements_answer_or_refuse_with_54001, .timeout = 300)
{
    static const struct {
        const char *prefix, *unit, *middle, *close, *suffix;
        int ok_n;          /* a depth that must run (8 MB stack) and answer `want` */
        const char *want;  /* %d: ok_n + 1 */
    } C[] = {
        {"SELECT ", "1+", "1", "", "", SUM_OK, "%d"},
        {"SELECT ", "NOT ", "true", "", "", 1000, "t"},
        {"SELECT ", "(", "7", ")", "", 2000, "7"},
        {"SELECT ", "abs(", "-3", ")", "", 1000, "3"},
        {"SELECT ", "coalesce(NULL, ", "5", ")", "", 1000, "5"},
        {"SELECT 1", "::int8", "", "", "", 1000, "1"},
        {"SELECT ", "CASE WHEN true THEN ", "2", " END", "", 500, "2"},
        {"SELECT ", "(SELECT ", "4", ")", "", 60, "4"},
        {"SELECT ", "1 + (", "1", ")", "", 1000, "%d"},
        {"SELECT length(", "'a' || ", "'b'", "", ")", 1000, "%d"},
        {"SELECT count(*) FROM (SELECT 1", " UNION ALL SELECT 1", "", "", ") u", 1000, "%d"},
        {"SELECT ", "- ", "8", "", "", 1000, "8"},
        {"SELECT 1 WHERE ", "(", "true", " AND true)", "", 1000, "1"},
    };
    char want[64];
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        int sizes[] = {C[i].ok_n, 6000, 40000};
        for (int k = 0; k < 3; k++) {
            size_t len;
            char *sql = nested(C[i].prefix, C[i].unit, sizes[k], C[i].middle, C[i].close,
                               C[i].suffix, &len);
            /* too deep must be refused however small the stack: 4 MB there */
            DeepRun d = run_deep(sql, len, k == 0 ? 8 : 4);
            free(sql);
            if (k == 0) {
                cr_assert_eq(d.rc, QR_OK, "%s x %d: %s (%s)", C[i].unit, sizes[k], d.msg,
                             d.sqlstate);
                snprintf(want, sizeof want, C[i].want, sizes[k] + 1);
                if (!strcmp(C[i].unit, "- ")) /* an even number of minus signs */
                    snprintf(want, sizeof want, "%s", sizes[k] % 2 ? "-8" : "8");
                cr_assert_str_eq(d.first, want, "%s x %d", C[i].unit, sizes[k]);
            } else {
                /* refused with 54001 (or, for the brackets the grammar limits
                 * itself, its syntax error), never a crash */
                cr_assert_neq(d.rc, QR_OK, "%s x %d should be refused", C[i].unit, sizes[k]);
                cr_assert(!strcmp(d.sqlstate, "54001") || !strcmp(d.sqlstate, "42601"),
                          "%s x %d: %s (%s)", C[i].unit, sizes[k], d.msg, d.sqlstate);
            }
        }
    }
}

Test(sql_limits, the_stack_check_stops_what_the_count_lets_through)
{
    /* 2,400 nested calls are 4,800 levels by the count, under the limit;
     * binding them takes more than a 1 MB stack has, and the check answers
     * 54001 before it runs out */
    size_t len;
    char *sql = nested("SELECT ", "abs(", 2400, "-3", ")", "", &len);
    DeepRun d = run_deep(sql, len, 1);
    cr_assert_str_eq(d.sqlstate, "54001", "%s", d.msg);
    d = run_deep(sql, len, 8); /* and runs where the stack is larger */
    free(sql);
#ifndef __SANITIZE_ADDRESS__
    cr_assert_eq(d.rc, QR_OK, "%s (%s)", d.msg, d.sqlstate);
    cr_assert_str_eq(d.first, "3");
#endif
    /* subqueries in FROM bind no expression on the way down (SELECT *):
     * the query binder checks the stack itself */
    sql = nested("SELECT * FROM ", "(SELECT * FROM ", 1200, "(SELECT 1) a", ") s", "", &len);
    d = run_deep(sql, len, 1);
    free(sql);
    cr_assert_str_eq(d.sqlstate, "54001", "%s", d.msg);
}

Test(sql_limits, long_flat_lists_are_not_nesting)
{
    /* 10,000-item IN lists and OR chains nest one level: they run */
    QrBuf q;
    qr_buf_init(&q);
    qr_buf_printf(&q, "SELECT 9999 IN (");
    for (int i = 0; i < 10000; i++)
        qr_buf_printf(&q, "%s%d", i ? ", " : "", i);
    qr_buf_printf(&q, "), (SELECT count(*) FROM generate_series(1, 300) g(x) WHERE ");
    for (int i = 0; i < 10000; i++)
        qr_buf_printf(&q, "%sx = %d", i ? " OR " : "", 2 * i);
    qr_buf_printf(&q, ")");
    DeepRun d = run_deep((const char *)q.data, q.len, 4);
    cr_assert_eq(d.rc, QR_OK, "%s (%s)", d.msg, d.sqlstate);
    cr_assert_str_eq(d.first, "t");
    QrSqlResult *r = try_sql(env.s, (const char *)q.data, q.len, &(QrError){0});
    cr_assert_not_null(r);
    cr_assert_str_eq(cell0(r, 1), "150"); /* the even numbers of 1..300 */
    qr_sql_result_free(r);
    qr_buf_free(&q);
}

typedef struct NormRun {
    const char *sql;
    size_t len;
    int rc;
    char sqlstate[6];
    size_t out_len;
} NormRun;

static void *norm_thread(void *arg)
{
    NormRun *n = arg;
    QrBuf out;
    qr_buf_init(&out);
    QrError err;
    qr_error_clear(&err);
    uint64_t fp;
    n->rc = qr_sql_normalize(n->sql, n->len, &out, &fp, &err);
    snprintf(n->sqlstate, sizeof n->sqlstate, "%s", n->rc ? qr_error_sqlstate(&err) : "00000");
    n->out_len = out.len;
    qr_buf_free(&out);
    return NULL;
}

Test(sql_limits, normalizing_for_the_query_history_refuses_deep_statements)
{
    /* libpg_query's normalization walks the tree with about 700 bytes of
     * stack a level: 1,500 NOTs in a row crashed a 1 MB stack */
    static const struct {
        const char *unit, *middle;
        int n;
        bool ok;
    } C[] = {
        {"1+", "1", 1000, true},  {"NOT ", "true", 1000, true}, {"1+", "1", 40000, false},
        {"NOT ", "true", 9000, false}, {"abs(", "1", 3000, false},
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        size_t len;
        char *sql = nested("SELECT ", C[i].unit, C[i].n, C[i].middle,
                           C[i].unit[0] == 'a' ? ")" : "", "", &len);
        NormRun n = {.sql = sql, .len = len};
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, 2u << 20);
        pthread_t t;
        cr_assert_eq(pthread_create(&t, &at, norm_thread, &n), 0);
        pthread_join(t, NULL);
        pthread_attr_destroy(&at);
        free(sql);
        if (C[i].ok)
            cr_assert_eq(n.rc, QR_OK, "%s x %d: %s", C[i].unit, C[i].n, n.sqlstate);
        else
            cr_assert_str_eq(n.sqlstate, "54001", "%s x %d", C[i].unit, C[i].n);
    }
}

/* ---- access ---- */

Test(sql_limits, the_access_a_query_string_needs_comes_from_its_parse)
{
    enum { R = QR_SQL_ACCESS_READ, W = QR_SQL_ACCESS_WRITE, S = QR_SQL_ACCESS_SCHEMA, SYNTAX = 0 };
    static const struct {
        const char *sql;
        int want;
    } C[] = {
        {"SELECT 1", R},
        {"  select * from t where x = 'drop table t'", R},
        {"/* delete */ SELECT 1 -- update\n", R},
        {"/* nested /* drop */ still comment */ SELECT 1", R},
        {"SELECT \"update\" FROM t", R},
        {"SELECT $tag$ insert $tag$, $1", R},
        {"SELECT 'it''s; drop table x'", R},
        {"(SELECT 1) UNION (SELECT 2)", R},
        {"BEGIN; SELECT 1; COMMIT;", R},
        {"EXPLAIN ANALYZE SELECT 1", R},
        {"SELECT lock, call FROM t", R},
        {"SET statement_timeout = 5; SHOW x", R},
        {"", R},
        {"COPY t TO STDOUT", R},
        {"COPY (SELECT 1) TO STDOUT", R},
        {"DECLARE c CURSOR FOR SELECT 1", R},
        {"VALUES (1), (2)", R},
        {"SELECT $a$ $b$ ; DELETE FROM t; $a$", R}, /* one dollar-quoted string */
        {"EXPLAIN ANALYZE INSERT INTO t VALUES (1)", W},
        {"EXPLAIN DELETE FROM t", W}, /* not run, but refused all the same */
        {"INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING", W},
        {"INSERT INTO t VALUES (1)", W},
        {"select 1; delete from t", W},
        {"WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d", W},
        {"SELECT * FROM t FOR UPDATE", W},
        {"SELECT 1 FROM t FOR SHARE", W},
        {"(SELECT 1 FROM t FOR UPDATE) UNION SELECT 2", W},
        {"COPY t FROM STDIN", W},
        /* what fooled the tokenizer POST /sql had: E'' escapes, dollar quotes */
        {"SELECT E'\\'' AS a; DELETE FROM t WHERE id = 4; SELECT 'x'", W},
        {"SELECT E'\\\\'; DELETE FROM t; --'", W},
        {"SELECT E'\\''; INSERT INTO t VALUES (5); SELECT '", SYNTAX},
        {"SELECT E'\\''; INSERT INTO t VALUES (5); SELECT ''", W},
        {"SELECT U&'\\0041'; UPDATE t SET v = 'x'", W},
        {"SELECT $$;$$; DROP TABLE t", S},
        {"SELECT E'\\''; CREATE TABLE x (id int); SELECT ''", S},
        {"SELECT $x$'$x$; DROP TABLE t; SELECT $y$'$y$", S},
        {"ANALYZE t", S},
        {"LOCK TABLE t", S},
        {"CREATE TABLE x (id int)", S},
        {"select 1;drop table t", S},
        {"SELECT 1; TRUNCATE t", S},
        {"insert into t select 1; alter table t add column y int", S},
        {"VACUUM", S},
        {"grant all on t to x", S},
        {"SELECT * INTO x FROM t", S},
        {"CREATE TABLE x AS SELECT 1", S},
        {"COPY t TO 'out.csv'", S},
        {"COPY t FROM PROGRAM 'true'", S},
        {"PREPARE p AS DELETE FROM t", S},
        {"CALL f()", S},
        {"DO $$ begin end $$", S},
        {"frobnicate", SYNTAX},
        {"SELECT 'unterminated", SYNTAX},
        {"SELECT $$ never closed drop", SYNTAX},
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        QrSqlAccess need = 0;
        QrError err;
        qr_error_clear(&err);
        int rc = qr_sql_access_needed(C[i].sql, strlen(C[i].sql), &need, &err);
        if (C[i].want == SYNTAX) {
            cr_expect_eq(rc, QR_ESYNTAX, "%s: %d", C[i].sql, rc);
            continue;
        }
        cr_expect_eq(rc, QR_OK, "%s: %s", C[i].sql, err.message);
        cr_expect_eq((int)need, C[i].want, "%s -> %d, want %d", C[i].sql, (int)need, C[i].want);
    }
}

/* A digest of every table's rows and of the tables that exist: what a
 * refused statement must leave as it was. */
static void digest(char *out, size_t n)
{
    QrBuf b;
    qr_buf_init(&b);
    QrSqlResult *r = run("SELECT id, v FROM t ORDER BY id");
    for (uint64_t i = 0; i < r->n_rows; i++)
        qr_buf_printf(&b, "%lld=%.*s,", (long long)r->vals[2 * i].u.i, (int)r->vals[2 * i + 1].u.s.n,
                      r->vals[2 * i + 1].u.s.s);
    qr_sql_result_free(r);
    r = run("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
            "ORDER BY 1");
    for (uint64_t i = 0; i < r->n_rows; i++)
        qr_buf_printf(&b, "|%.*s", (int)r->vals[i].u.s.n, r->vals[i].u.s.s);
    qr_sql_result_free(r);
    snprintf(out, n, "%.*s", (int)b.len, b.data ? (char *)b.data : "");
    qr_buf_free(&b);
}

Test(sql_limits, a_limited_session_refuses_every_quoting_trick, .timeout = 120)
{
    QrSqlResult *r = run("CREATE TABLE t (id bigint PRIMARY KEY, v text)");
    qr_sql_result_free(r);
    r = run("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 10) g");
    qr_sql_result_free(r);
    char before[512], after[512];
    digest(before, sizeof before);
    QrSqlSession *ro, *rw;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_new(env.db, &ro, &err), QR_OK);
    cr_assert_eq(qr_sql_session_new(env.db, &rw, &err), QR_OK);
    qr_sql_session_limit_access(ro, QR_SQL_ACCESS_READ, "use a read-write login");
    qr_sql_session_limit_access(rw, QR_SQL_ACCESS_WRITE, NULL);
    /* generated query strings: statements after literals written in every
     * quoting form (some of which end, or seem to end, a literal where a
     * naive scan would not), and loose pieces of those forms */
    static const char *const LITS[] = {
        "E'\\''", "E'\\\\'", "'it''s'", "$$;$$", "$a$ $b$ ;$a$", "$x$'$x$", "U&'\\0041'",
        "B'101'", "X'1f'", "'/* ; */'", "\"q;\"", "e'\\047'", "'a' /* ' */", "'--'",
    };
    static const char *const STMTS[] = {
        "DELETE FROM t WHERE id = 4", "INSERT INTO t VALUES (99, 'x')", "UPDATE t SET v = 'y'",
        "DROP TABLE t", "CREATE TABLE z (id int)", "TRUNCATE t",
        "WITH d AS (DELETE FROM t RETURNING *) SELECT 1", "COPY t FROM STDIN",
        "SELECT 1 FROM t FOR UPDATE", "EXPLAIN ANALYZE DELETE FROM t", "SELECT * INTO z FROM t",
        "BEGIN", "COMMIT", "ROLLBACK", "SELECT count(*) FROM t", "SET statement_timeout = 50",
        "COPY t TO STDOUT", "VALUES (1)",
    };
    static const char *const LOOSE[] = {"'", "$$", "$a$", "\"", "E'\\", "/*", "*/", "--", "\n",
                                        "\\", ";"};
    enum { N_LITS = sizeof LITS / sizeof *LITS, N_STMTS = sizeof STMTS / sizeof *STMTS,
           N_LOOSE = sizeof LOOSE / sizeof *LOOSE };
    uint64_t rng = 13;
    int refused = 0, ran = 0;
    for (int round = 0; round < 3000; round++) {
        QrBuf q;
        qr_buf_init(&q);
        int n = 1 + (int)eu_below(&rng, 4);
        for (int k = 0; k < n; k++) {
            uint64_t c = eu_below(&rng, 10);
            if (c < 4)
                qr_buf_printf(&q, "SELECT %s AS a", LITS[eu_below(&rng, N_LITS)]);
            else if (c < 8)
                qr_buf_printf(&q, "%s", STMTS[eu_below(&rng, N_STMTS)]);
            else
                qr_buf_printf(&q, "%s", LOOSE[eu_below(&rng, N_LOOSE)]);
            c = eu_below(&rng, 10);
            qr_buf_printf(&q, "%s", c < 8 ? "; " : c < 9 ? " " : LOOSE[eu_below(&rng, N_LOOSE)]);
        }
        qr_buf_putc(&q, 0);
        const char *sql = (const char *)q.data;
        QrSqlAccess need = QR_SQL_ACCESS_SCHEMA;
        qr_error_clear(&err);
        bool parsed = qr_sql_access_needed(sql, q.len - 1, &need, &err) == QR_OK;
        QrSqlSpan *sp = NULL;
        int ns = 0;
        bool ro_refused = false;
        qr_error_clear(&err);
        if (qr_sql_split(sql, q.len - 1, &sp, &ns, &err) == QR_OK) {
            /* read-only: nothing changes; may write rows: no table comes or goes */
            for (int s = 0; s < 2; s++) {
                QrSqlSession *ss = s ? rw : ro;
                for (int i = 0; i < ns; i++) {
                    QrSqlResult *x = try_sql(ss, sql + sp[i].offset, sp[i].len, &err);
                    if (x && x->kind == QR_SQL_RES_COPY_IN)
                        qr_sql_copy_fail(ss, "test");
                    if (x)
                        ran++;
                    else if (!strcmp(qr_error_sqlstate(&err), "25006") ||
                             !strcmp(qr_error_sqlstate(&err), "42501")) {
                        refused++;
                        ro_refused |= s == 0;
                    }
                    qr_sql_result_free(x);
                }
                qr_sql_result_free(try_sql(ss, "ROLLBACK", 8, &err));
                digest(after, sizeof after);
                if (s == 0)
                    cr_assert_str_eq(after, before, "a read-only session changed something: %s",
                                     sql);
                else
                    cr_assert_str_eq(strchr(after, '|'), strchr(before, '|'),
                                     "a session without schema access changed it: %s", sql);
            }
        }
        qr_free(sp);
        if (strcmp(after, before)) { /* rows the writing session changed */
            qr_sql_result_free(run("DELETE FROM t"));
            qr_sql_result_free(run("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 10) g"));
        }
        /* what the whole string's parse said (POST /sql's check before it
         * runs anything) agrees with what its statements met as they ran */
        if (parsed && need == QR_SQL_ACCESS_READ)
            cr_assert(!ro_refused, "a read by its parse was refused as it ran: %s", sql);
        if (ro_refused)
            cr_assert(parsed && need > QR_SQL_ACCESS_READ, "refused, not a write by its parse: %s",
                      sql);
        qr_buf_free(&q);
    }
    /* the generator reaches both outcomes often */
    cr_assert_gt(refused, 300, "refused %d", refused);
    cr_assert_gt(ran, 300, "ran %d", ran);
    qr_sql_session_free(ro);
    qr_sql_session_free(rw);
}

Test(sql_limits, a_statements_parse_tree_counts_against_the_memory_cap)
{
    /* a 64 MB statement of list items made a tree of gigabytes outside any
     * cap; it is held to quarry.mem_cap (here its 1 MB minimum) */
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_set(env.s, "quarry.mem_cap", "1048576", &err), QR_OK);
    for (int n = 1000; n <= 20000; n += 19000) {
        QrBuf q;
        qr_buf_init(&q);
        qr_buf_printf(&q, "SELECT 7 IN (");
        for (int i = 0; i < n; i++)
            qr_buf_printf(&q, "%s%d", i ? "," : "", i);
        qr_buf_printf(&q, ")");
        QrSqlResult *r = try_sql(env.s, (const char *)q.data, q.len, &err);
        if (n == 1000) {
            cr_assert_not_null(r, "%s", err.message);
            cr_assert_str_eq(cell0(r, 0), "t");
        } else {
            cr_assert_null(r);
            cr_assert_str_eq(qr_error_sqlstate(&err), "54000", "%s", err.message);
            cr_assert_str_eq(err.message, "statement too large");
        }
        qr_sql_result_free(r);
        qr_buf_free(&q);
    }
}

/* ---- loops that must end ---- */

Test(sql_limits, in_lists_searched_or_scanned_agree_with_the_model)
{
    /* lists of 5 items are scanned, of 40 searched (SQL_IN_SET_MIN): both
     * against counting by hand, with NULLs, NOT IN, text, mixed numbers */
    uint64_t rng = 7;
    for (int round = 0; round < 60; round++) {
        int n = round % 2 ? 40 : 5;
        bool has_null = eu_below(&rng, 4) == 0, text = eu_below(&rng, 3) == 0,
             mixed = !text && eu_below(&rng, 4) == 0;
        bool in[301] = {false};
        QrBuf q;
        qr_buf_init(&q);
        qr_buf_printf(&q, "SELECT count(*) FILTER (WHERE %s IN (", text ? "'v' || x" : "x");
        for (int i = 0; i < n; i++) {
            int v = (int)eu_below(&rng, 300) + 1;
            in[v] = true;
            if (i)
                qr_buf_printf(&q, ", ");
            if (has_null && i == n / 2)
                qr_buf_printf(&q, "NULL, ");
            qr_buf_printf(&q, text ? "'v%d'" : mixed && i % 2 ? "%d.0" : "%d", v);
        }
        qr_buf_printf(&q, ")), count(*) FILTER (WHERE NOT (%s IN (", text ? "'v' || x" : "x");
        /* the same list again for NOT IN */
        const char *open = strstr((const char *)q.data, "IN (") + 4;
        const char *close = strstr(open, "))");
        qr_buf_printf(&q, "%.*s))) FROM generate_series(1, 300) g(x)", (int)(close - open), open);
        qr_buf_putc(&q, 0);
        int want_in = 0, want_not = 0;
        for (int x = 1; x <= 300; x++) {
            want_in += in[x];
            want_not += !in[x] && !has_null; /* x NOT IN (..., NULL) is never true */
        }
        QrSqlResult *r = run((const char *)q.data);
        char w1[16], w2[16];
        snprintf(w1, sizeof w1, "%d", want_in);
        snprintf(w2, sizeof w2, "%d", want_not);
        cr_assert_str_eq(cell0(r, 0), w1, "%s", (const char *)q.data);
        cr_assert_str_eq(cell0(r, 1), w2, "%s", (const char *)q.data);
        qr_sql_result_free(r);
        qr_buf_free(&q);
    }
}

Test(sql_limits, a_long_in_list_is_searched_per_row, .timeout = 120)
{
    /* 300,000 rows against 100,000 items: compared one by one that is
     * 10^10 comparisons (the test's timeout); searched, 17 per row */
    QrBuf q;
    qr_buf_init(&q);
    qr_buf_printf(&q, "SELECT count(*) FROM generate_series(1, 300000) g(x) WHERE x IN (");
    for (int i = 1; i <= 100000; i++)
        qr_buf_printf(&q, "%s%d", i > 1 ? "," : "", 3 * i);
    qr_buf_printf(&q, ")");
    qr_buf_putc(&q, 0);
    QrSqlResult *r = run((const char *)q.data);
    cr_assert_str_eq(cell0(r, 0), "100000");
    qr_sql_result_free(r);
    qr_buf_free(&q);
}
