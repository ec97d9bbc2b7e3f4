/*
 * sql_test_env.h — a temporary data directory with one SQL session, shared
 * by the SQL unit tests (static functions: include once per test file).
 */
#ifndef QR_SQL_TEST_ENV_H
#define QR_SQL_TEST_ENV_H

#include <criterion/criterion.h>
#include <stdlib.h>

#include "engine_util.h"
#include "query/sql.h"

typedef struct Env {
    char *dir;
    QrDb *db;
    QrSqlSession *s;
} Env;

static void env_open(Env *e)
{
    e->dir = eu_tmpdir("sqltest");
    QrDbOpts o;
    qr_db_opts_default(&o);
    o.fsync = QR_FSYNC_OFF;
    o.background_merge = false;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_db_open(e->dir, &o, &e->db, &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_sql_session_new(e->db, &e->s, &err), QR_OK, "%s", err.message);
}

static void env_close(Env *e)
{
    qr_sql_session_free(e->s);
    qr_db_close(e->db);
    eu_rmtree(e->dir);
    free(e->dir);
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
