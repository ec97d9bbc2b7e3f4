/*
 * sql_test_env.h — a temporary data directory with one SQL session, shared
 * by the SQL unit tests (static functions: include once per test file).
 */
#ifndef QR_SQL_TEST_ENV_H
#define QR_SQL_TEST_ENV_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "query/sql.h"

typedef struct Env {
    char *dir;
    QrDb *db;
    QrSqlSession *s;
} Env;

/* Open e->dir as the tests do (no fsync, no background merges). */
static int env_db_open(Env *e, QrError *err)
{
    QrDbOpts o;
    qr_db_opts_default(&o);
    o.fsync = QR_FSYNC_OFF;
    o.background_merge = false;
    qr_error_clear(err);
    return qr_db_open(e->dir, &o, &e->db, err);
}

static void env_open(Env *e)
{
    e->dir = eu_tmpdir("sqltest");
    QrError err;
    cr_assert_eq(env_db_open(e, &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_sql_session_new(e->db, &e->s, &err), QR_OK, "%s", err.message);
}

static void env_close(Env *e)
{
    qr_sql_session_free(e->s);
    qr_db_close(e->db);
    eu_rmtree(e->dir);
    free(e->dir);
}

/* Run sql in e's session, which must succeed. */
__attribute__((unused)) static QrSqlResult *env_run(Env *e, const char *sql)
{
    QrError err;
    qr_error_clear(&err);
    QrSqlResult *r = NULL;
    int rc = qr_sql_exec(e->s, sql, strlen(sql), &r, &err);
    cr_assert_eq(rc, QR_OK, "%s: %s (%s)", sql, err.message, qr_error_sqlstate(&err));
    return r;
}

/* The text form of every cell: rows joined by '\n', cells by '|' (free()). */
__attribute__((unused)) static char *env_result_text(const QrSqlResult *r)
{
    QrBuf b;
    qr_buf_init(&b);
    for (uint64_t i = 0; i < r->n_rows; i++) {
        for (int c = 0; c < r->n_cols; c++) {
            if (c)
                qr_buf_putc(&b, '|');
            qr_sql_value_text(&r->vals[i * (uint64_t)r->n_cols + c], &b);
        }
        qr_buf_putc(&b, '\n');
    }
    qr_buf_putc(&b, 0);
    return (char *)qr_buf_steal(&b, NULL);
}

#endif
