/*
 * sql_test_cells.h — run a statement in a test Env and check its first
 * cell's text or its SQLSTATE (static inline: include once per test file,
 * after sql_test_env.h).
 */
#ifndef QR_SQL_TEST_CELLS_H
#define QR_SQL_TEST_CELLS_H

#include <stdio.h>
#include <string.h>

#include "sql_test_env.h"
#include "store/buf.h"

/* The statement's result; the test fails if it errs. */
static inline QrSqlResult *tc_run(Env *e, const char *sql)
{
    QrSqlResult *r = NULL;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_exec(e->s, sql, strlen(sql), &r, &err), QR_OK, "%s: %s (%s)", sql,
                 err.message, qr_error_sqlstate(&err));
    return r;
}

/* Run a statement whose result is not needed. */
static inline void tc_exec(Env *e, const char *sql) { qr_sql_result_free(tc_run(e, sql)); }

/* The first cell's text ("NULL" for NULL), in a static buffer. */
static inline const char *tc_one(Env *e, const char *sql)
{
    static char buf[4096];
    QrSqlResult *r = tc_run(e, sql);
    cr_assert(r->n_rows >= 1 && r->n_cols >= 1, "%s: no rows", sql);
    QrBuf b;
    qr_buf_init(&b);
    if (r->vals[0].is_null)
        qr_buf_append(&b, "NULL", 4);
    else
        qr_sql_value_text(&r->vals[0], &b);
    snprintf(buf, sizeof buf, "%.*s", (int)b.len, b.data ? (const char *)b.data : "");
    qr_buf_free(&b);
    qr_sql_result_free(r);
    return buf;
}

static inline void tc_is(Env *e, const char *sql, const char *want)
{
    const char *got = tc_one(e, sql);
    cr_expect_str_eq(got, want, "%s: got %s, want %s", sql, got, want);
}

/* SELECT each expression and compare with its expected text. */
static inline void tc_select_each(Env *e, const char *const (*cases)[2], size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char q[1024];
        snprintf(q, sizeof q, "SELECT %s", cases[i][0]);
        tc_is(e, q, cases[i][1]);
    }
}

/* The statement fails with this SQLSTATE. */
static inline void tc_fails(Env *e, const char *sql, const char *state)
{
    QrSqlResult *r = NULL;
    QrError err;
    qr_error_clear(&err);
    int rc = qr_sql_exec(e->s, sql, strlen(sql), &r, &err);
    cr_expect_neq(rc, QR_OK, "%s: succeeded", sql);
    cr_expect_str_eq(qr_error_sqlstate(&err), state, "%s: %s (%s)", sql, err.message,
                     qr_error_sqlstate(&err));
    qr_sql_result_free(r);
}

#endif
