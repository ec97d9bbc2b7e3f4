/*
 * sql_lr_env.h — the tables the operator tests share (static functions:
 * include once per test file): l<n>(id, k) and r<n>(id, k) for n in
 * SIZES (no row, one, exactly a batch, a batch and one), ids 1..n, keys
 * with NULLs and many duplicates given by lkey / rkey (the brute-force
 * models' side), and run / fails over one session.
 */
#ifndef QR_SQL_LR_ENV_H
#define QR_SQL_LR_ENV_H

#include <stdio.h>
#include <string.h>

#include "sql_test_env.h"
#include "store/util.h"

#define NUL INT32_MIN

static const int SIZES[] = {0, 1, 1024, 1025};
#define N_SIZES 4

static Env env;

static int lkey(int id) { return id % 5 == 0 ? NUL : (id * 7) % 37; }
static int rkey(int id) { return id % 6 == 0 ? NUL : (id * 3) % 41; }

static QrSqlResult *run(const char *sql) { return env_run(&env, sql); }

/* sql fails with sqlstate, its message holding msg_part (when given). */
static void fails(const char *sql, const char *sqlstate, const char *msg_part)
{
    QrError err;
    qr_error_clear(&err);
    QrSqlResult *r = NULL;
    int rc = qr_sql_exec(env.s, sql, strlen(sql), &r, &err);
    cr_assert_neq(rc, QR_OK, "%s should fail", sql);
    cr_assert_str_eq(qr_error_sqlstate(&err), sqlstate, "%s: %s (%s)", sql, err.message,
                     qr_error_sqlstate(&err));
    if (msg_part)
        cr_assert(strstr(err.message, msg_part), "%s: message \"%s\" lacks \"%s\"", sql, err.message, msg_part);
}

/* Open the session and make the l / r tables. */
static void lr_setup(void)
{
    qr_log_set_level(QR_LOG_ERROR);
    env_open(&env);
    char q[512];
    for (int i = 0; i < N_SIZES; i++) {
        int n = SIZES[i];
        for (int side = 0; side < 2; side++) {
            snprintf(q, sizeof q, "CREATE TABLE %c%d (id bigint PRIMARY KEY, k integer)", "lr"[side], n);
            qr_sql_result_free(run(q));
            if (n == 0)
                continue;
            snprintf(q, sizeof q,
                     side ? "INSERT INTO r%d SELECT g, CASE WHEN g %% 6 = 0 THEN NULL ELSE (g * 3) %% 41 END "
                            "FROM generate_series(1, %d) g"
                          : "INSERT INTO l%d SELECT g, CASE WHEN g %% 5 = 0 THEN NULL ELSE (g * 7) %% 37 END "
                            "FROM generate_series(1, %d) g",
                     n, n);
            qr_sql_result_free(run(q));
        }
    }
}

static void lr_teardown(void) { env_close(&env); }

#endif
