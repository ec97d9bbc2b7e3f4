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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
