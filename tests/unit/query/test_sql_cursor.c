/*
 * test_sql_cursor.c — the session's named things (query/sql_cursor.c):
 * DECLARE / FETCH / MOVE / CLOSE checked against a model cursor that steps
 * one row at a time over random direction sequences, the transaction rules
 * of cursors, PREPARE / EXECUTE / DEALLOCATE sharing one namespace with
 * qr_sql_named_*, DISCARD ALL, and parameter types inferred from their
 * context in INSERT / UPDATE / DELETE.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "sql_test_env.h"
#include "query/sql.h"

static QrSqlResult *q(Env *e, const char *sql)
{
    QrSqlResult *r = NULL;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_exec(e->s, sql, strlen(sql), &r, &err), QR_OK, "%s: %s", sql,
                 err.message);
    return r;
}

static void ok(Env *e, const char *sql) { qr_sql_result_free(q(e, sql)); }

/* The statement fails with this SQLSTATE. */
static void fails(Env *e, const char *sql, const char *sqlstate)
{
    QrSqlResult *r = NULL;
    QrError err;
    qr_error_clear(&err);
    cr_assert_neq(qr_sql_exec(e->s, sql, strlen(sql), &r, &err), QR_OK, "%s should fail", sql);
    cr_assert_str_eq(qr_error_sqlstate(&err), sqlstate, "%s: %s", sql, err.message);
}

/* The first column of every row as integers, in order; the count. */
static int ints(const QrSqlResult *r, int64_t *out, int cap)
{
    int n = 0;
    for (uint64_t i = 0; i < r->n_rows && n < cap; i++)
        out[n++] = r->vals[i * (uint64_t)r->n_cols].u.i;
    return n;
}

#define N_ROWS 23

/* PostgreSQL's cursor, stepped one row at a time: pos 0 is before the
 * first row, N_ROWS + 1 after the last.  Fills the ids fetched (id = row
 * number * 10) and returns how many. */
static int model_fetch(int *pos, const char *dir, long count, int64_t *out)
{
    int n = 0;
    if (!strcmp(dir, "ABSOLUTE") || !strcmp(dir, "RELATIVE")) {
        long target = !strcmp(dir, "ABSOLUTE") ? (count >= 0 ? count : N_ROWS + 1 + count)
                                               : *pos + count;
        /* walk there a row at a time */
        while (*pos < target && *pos < N_ROWS + 1)
            (*pos)++;
        while (*pos > target && *pos > 0)
            (*pos)--;
        if (*pos >= 1 && *pos <= N_ROWS)
            out[n++] = *pos * 10;
        return n;
    }
    bool back = !strcmp(dir, "BACKWARD");
    if (count < 0) { /* a negative count goes the other way */
        back = !back;
        count = -count;
    }
    if (count == 0) {
        if (*pos >= 1 && *pos <= N_ROWS)
            out[n++] = *pos * 10;
        return n;
    }
    for (long i = 0; i < count; i++) {
        if (!back) {
            if (*pos >= N_ROWS) {
                *pos = N_ROWS + 1;
                break;
            }
            (*pos)++;
        } else {
            if (*pos <= 1) {
                *pos = 0;
                break;
            }
            (*pos)--;
        }
        out[n++] = *pos * 10;
    }
    return n;
}

Test(sql_cursor, fetch_and_move_match_a_stepping_model)
{
    Env e;
    env_open(&e);
    ok(&e, "CREATE TABLE r (id bigint PRIMARY KEY, v text)");
    char sql[256];
    for (int i = 1; i <= N_ROWS; i++) {
        snprintf(sql, sizeof sql, "INSERT INTO r VALUES (%d, 'v%d')", i * 10, i);
        ok(&e, sql);
    }
    static const char *const DIRS[] = {"FORWARD", "BACKWARD", "ABSOLUTE", "RELATIVE"};
    uint64_t rng = 77;
    for (int round = 0; round < 20; round++) {
        ok(&e, "BEGIN");
        ok(&e, "DECLARE c SCROLL CURSOR FOR SELECT id, v FROM r ORDER BY id");
        int pos = 0;
        for (int step = 0; step < 40; step++) {
            const char *dir = DIRS[eu_below(&rng, 4)];
            long count = (long)eu_below(&rng, 9) - 2;
            bool all = eu_chance(&rng, 0.08) && strcmp(dir, "ABSOLUTE") && strcmp(dir, "RELATIVE");
            bool move = eu_chance(&rng, 0.25);
            if (all)
                snprintf(sql, sizeof sql, "%s %s ALL FROM c", move ? "MOVE" : "FETCH", dir);
            else
                snprintf(sql, sizeof sql, "%s %s %ld FROM c", move ? "MOVE" : "FETCH", dir, count);
            int64_t want[64], got[64];
            int nw = model_fetch(&pos, dir, all ? 1000 : count, want);
            QrSqlResult *r = q(&e, sql);
            char tag[64];
            snprintf(tag, sizeof tag, "%s %d", move ? "MOVE" : "FETCH", nw);
            cr_assert_str_eq(r->tag, tag, "round %d step %d: %s", round, step, sql);
            if (!move) {
                cr_assert_eq(r->kind, QR_SQL_RES_ROWS);
                cr_assert_eq(r->n_cols, 2);
                int ng = ints(r, got, 64);
                cr_assert_eq(ng, nw, "%s: %d rows, model %d", sql, ng, nw);
                for (int i = 0; i < nw; i++)
                    cr_assert_eq(got[i], want[i], "%s: row %d is %lld, model %lld", sql, i,
                                 (long long)got[i], (long long)want[i]);
            }
            qr_sql_result_free(r);
        }
        ok(&e, "COMMIT");
    }
    env_close(&e);
}

Test(sql_cursor, transaction_rules_hold_and_no_scroll)
{
    Env e;
    env_open(&e);
    ok(&e, "CREATE TABLE r (id bigint PRIMARY KEY)");
    ok(&e, "INSERT INTO r VALUES (1), (2), (3)");
    /* without HOLD only inside a block, and gone when it ends */
    fails(&e, "DECLARE c CURSOR FOR SELECT id FROM r", "25P01");
    ok(&e, "BEGIN");
    ok(&e, "DECLARE c NO SCROLL CURSOR FOR SELECT id FROM r ORDER BY id");
    fails(&e, "DECLARE c CURSOR FOR SELECT 1", "42P03");
    ok(&e, "ROLLBACK"); /* the failed DECLARE aborted the block */
    fails(&e, "FETCH c", "34000");
    ok(&e, "BEGIN");
    ok(&e, "DECLARE c NO SCROLL CURSOR FOR SELECT id FROM r ORDER BY id");
    QrSqlResult *r = q(&e, "FETCH NEXT FROM c");
    cr_assert_eq(r->n_rows, 1);
    cr_assert_eq(r->vals[0].u.i, 1);
    qr_sql_result_free(r);
    fails(&e, "FETCH PRIOR FROM c", "55000");
    ok(&e, "ROLLBACK");
    /* WITH HOLD outlives its block, and the rows were read at DECLARE */
    ok(&e, "BEGIN");
    ok(&e, "DECLARE h CURSOR WITH HOLD FOR SELECT id FROM r ORDER BY id");
    ok(&e, "COMMIT");
    ok(&e, "INSERT INTO r VALUES (4)");
    r = q(&e, "FETCH ALL FROM h");
    cr_assert_eq(r->n_rows, 3);
    cr_assert_str_eq(r->tag, "FETCH 3");
    qr_sql_result_free(r);
    const QrSqlColumn *cols;
    int n_cols;
    bool binary = true;
    cr_assert(qr_sql_cursor_columns(e.s, "h", &cols, &n_cols, &binary));
    cr_assert(n_cols == 1 && !strcmp(cols[0].name, "id") && !binary);
    ok(&e, "CLOSE h");
    fails(&e, "CLOSE h", "34000");
    /* BINARY cursors say so on their results */
    ok(&e, "DECLARE b BINARY CURSOR WITH HOLD FOR SELECT id FROM r");
    r = q(&e, "FETCH 2 FROM b");
    cr_assert(r->binary && r->n_rows == 2);
    qr_sql_result_free(r);
    ok(&e, "CLOSE ALL");
    cr_assert(!qr_sql_cursor_columns(e.s, "b", &cols, &n_cols, &binary));
    env_close(&e);
}

static QrSqlStmt *prep(Env *e, const char *sql)
{
    QrSqlStmt *st = NULL;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_prepare(e->s, sql, strlen(sql), NULL, 0, &st, &err), QR_OK, "%s: %s",
                 sql, err.message);
    return st;
}

static QrSqlResult *run(Env *e, QrSqlStmt *st, int n, const char *const *vals)
{
    QrSqlParams p = {.n = n, .values = vals};
    QrSqlResult *r = NULL;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_execute(e->s, st, &p, &r, &err), QR_OK, "%s", err.message);
    return r;
}

Test(sql_cursor, dml_parameters_take_their_column_types)
{
    Env e;
    env_open(&e);
    ok(&e, "CREATE TABLE t (id bigint PRIMARY KEY, n integer, name text, ok boolean)");
    ok(&e, "INSERT INTO t VALUES (1, 10, 'a', true), (2, 20, 'b', false)");
    /* untyped text parameters, as node-pg sends them */
    QrSqlStmt *up = prep(&e, "UPDATE t SET n = n + $1, ok = $3 WHERE id = $2");
    cr_assert_eq(qr_sql_stmt_param_oid(up, 0), 23); /* int4: n's */
    cr_assert_eq(qr_sql_stmt_param_oid(up, 1), 20); /* int8: id's */
    cr_assert_eq(qr_sql_stmt_param_oid(up, 2), 16); /* bool */
    const char *v1[] = {"5", "2", "true"};
    QrSqlResult *r = run(&e, up, 3, v1);
    cr_assert_str_eq(r->tag, "UPDATE 1");
    qr_sql_result_free(r);
    qr_sql_stmt_unref(up);
    QrSqlStmt *ins = prep(&e, "INSERT INTO t (name, id, n) VALUES ($1, $2, $3)");
    cr_assert_eq(qr_sql_stmt_param_oid(ins, 0), 25);
    cr_assert_eq(qr_sql_stmt_param_oid(ins, 1), 20);
    cr_assert_eq(qr_sql_stmt_param_oid(ins, 2), 23);
    const char *v2[] = {"c", "3", "30"};
    qr_sql_result_free(run(&e, ins, 3, v2));
    qr_sql_stmt_unref(ins);
    QrSqlStmt *del = prep(&e, "DELETE FROM t WHERE id = $1 AND n > $2");
    cr_assert_eq(qr_sql_stmt_param_oid(del, 0), 20);
    const char *v3[] = {"1", "0"};
    r = run(&e, del, 2, v3);
    cr_assert_str_eq(r->tag, "DELETE 1");
    qr_sql_result_free(r);
    qr_sql_stmt_unref(del);
    QrSqlResult *rows = q(&e, "SELECT id, n, ok FROM t ORDER BY id");
    cr_assert_eq(rows->n_rows, 2);
    cr_assert(rows->vals[0].u.i == 2 && rows->vals[1].u.i == 25 && rows->vals[2].u.b);
    cr_assert(rows->vals[3].u.i == 3 && rows->vals[4].u.i == 30 && rows->vals[5].is_null);
    qr_sql_result_free(rows);
    env_close(&e);
}

Test(sql_cursor, prepare_execute_deallocate_share_the_protocol_names)
{
    Env e;
    env_open(&e);
    ok(&e, "CREATE TABLE t (id bigint PRIMARY KEY, n integer)");
    ok(&e, "PREPARE ins (bigint, int) AS INSERT INTO t VALUES ($1, $2)");
    for (int i = 1; i <= 5; i++) {
        char sql[96];
        snprintf(sql, sizeof sql, "EXECUTE ins(%d, %d * 7)", i, i);
        QrSqlResult *r = q(&e, sql);
        cr_assert_str_eq(r->tag, "INSERT 0 1");
        qr_sql_result_free(r);
    }
    fails(&e, "PREPARE ins AS SELECT 1", "42P05");
    fails(&e, "EXECUTE ins(1)", "42601"); /* wrong number of parameters */
    /* a PREPAREd statement is a protocol named statement, and back */
    QrSqlStmt *st = qr_sql_named_get(e.s, "ins");
    cr_assert_not_null(st);
    cr_assert_eq(qr_sql_stmt_n_params(st), 2);
    QrSqlStmt *sel = prep(&e, "SELECT n FROM t WHERE id = $1");
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_named_add(e.s, "byid", sel, &err), QR_OK);
    qr_sql_stmt_unref(sel);
    QrSqlResult *r = q(&e, "EXECUTE byid(4)");
    cr_assert_eq(r->n_rows, 1);
    cr_assert_eq(r->vals[0].u.i, 28);
    qr_sql_result_free(r);
    /* Describe of an EXECUTE gives the prepared query's columns */
    QrSqlStmt *ex = prep(&e, "EXECUTE byid($1)");
    const QrSqlColumn *cols;
    int n_cols;
    qr_sql_stmt_columns(ex, &cols, &n_cols);
    cr_assert(n_cols == 1 && !strcmp(cols[0].name, "n"));
    cr_assert_eq(qr_sql_stmt_param_oid(ex, 0), 20);
    qr_sql_stmt_unref(ex);
    ok(&e, "DEALLOCATE ins");
    cr_assert_null(qr_sql_named_get(e.s, "ins"));
    fails(&e, "DEALLOCATE ins", "26000");
    fails(&e, "EXECUTE ins(9, 9)", "26000");
    /* DISCARD ALL: names, cursors and settings as in a new session */
    ok(&e, "SET application_name = 'x'");
    ok(&e, "DECLARE k CURSOR WITH HOLD FOR SELECT 1");
    ok(&e, "BEGIN");
    fails(&e, "DISCARD ALL", "25001");
    ok(&e, "ROLLBACK");
    ok(&e, "DISCARD ALL");
    cr_assert_null(qr_sql_named_get(e.s, "byid"));
    cr_assert(!qr_sql_cursor_columns(e.s, "k", &cols, &n_cols, &(bool){false}));
    cr_assert_str_eq(qr_sql_session_get(e.s, "application_name"), "");
    ok(&e, "PREPARE byid AS SELECT 1");
    ok(&e, "DEALLOCATE ALL");
    cr_assert_null(qr_sql_named_get(e.s, "byid"));
    env_close(&e);
}

/* psycopg2 sends a list parameter as ARRAY[...]: x = ANY (ARRAY[...]) answers
 * as x IN (...) does, over random lists (with NULLs and duplicates). */
Test(sql_cursor, any_of_an_array_literal_matches_in)
{
    Env e;
    env_open(&e);
    ok(&e, "CREATE TABLE t (id bigint PRIMARY KEY, name text)");
    ok(&e, "INSERT INTO t SELECT g, 'n' || (g % 7) FROM generate_series(1, 60) g");
    uint64_t rng = 5;
    for (int round = 0; round < 30; round++) {
        char list[512] = "", a[1024], b[1024];
        size_t off = 0;
        int n = 1 + (int)eu_below(&rng, 8);
        for (int i = 0; i < n; i++) {
            if (eu_chance(&rng, 0.1))
                off += (size_t)snprintf(list + off, sizeof list - off, "%sNULL", i ? ", " : "");
            else
                off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", i ? ", " : "",
                                        (int)eu_below(&rng, 80));
        }
        snprintf(a, sizeof a, "SELECT id FROM t WHERE id = ANY(ARRAY[%s]) ORDER BY id", list);
        snprintf(b, sizeof b, "SELECT id FROM t WHERE id IN (%s) ORDER BY id", list);
        QrSqlResult *ra = q(&e, a), *rb = q(&e, b);
        int64_t va[128], vb[128];
        int na = ints(ra, va, 128), nb = ints(rb, vb, 128);
        cr_assert_eq(na, nb, "%s: %d rows, IN gives %d", a, na, nb);
        cr_assert(na == 0 || !memcmp(va, vb, (size_t)na * sizeof *va), "%s", a);
        qr_sql_result_free(ra);
        qr_sql_result_free(rb);
    }
    QrSqlResult *r = q(&e, "SELECT count(*) FROM t WHERE name = ANY(ARRAY['n1', 'n3'])");
    cr_assert_eq(r->vals[0].u.i, 18); /* g % 7 in (1, 3) for g in 1..60 */
    qr_sql_result_free(r);
    env_close(&e);
}
