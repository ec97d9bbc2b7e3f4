/*
 * test_sql_txn.c — SQL transactions between sessions: isolation levels
 * (what BEGIN / SET TRANSACTION / SHOW accept and refuse, and what a
 * REPEATABLE READ block reads while another session commits, checked
 * against a model of the table) and savepoints (random nested blocks
 * against a model keeping a copy of the table per savepoint).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "sql_test_env.h"
#include "query/sql.h"

/* Run sql; the result's cells as text (env_result_text form), or NULL when
 * it failed (err filled).  free() the text. */
static char *run(QrSqlSession *s, const char *sql, QrError *err)
{
    QrSqlResult *r = NULL;
    qr_error_clear(err);
    int rc = qr_sql_exec(s, sql, strlen(sql), &r, err);
    char *text = rc == QR_OK ? env_result_text(r) : NULL;
    qr_sql_result_free(r);
    return text;
}

static void ok(QrSqlSession *s, const char *sql)
{
    QrError err;
    char *t = run(s, sql, &err);
    cr_assert(t, "%s: %s", sql, err.message);
    free(t);
}

/* The one-line answer of sql equals want ("a|b\n" form without the
 * newline). */
static void expect(QrSqlSession *s, const char *sql, const char *want)
{
    QrError err;
    char *t = run(s, sql, &err);
    cr_assert(t, "%s: %s", sql, err.message);
    size_t n = strlen(t);
    if (n && t[n - 1] == '\n')
        t[n - 1] = 0;
    cr_assert_str_eq(t, want, "%s: got [%s] want [%s]", sql, t, want);
    free(t);
}

static void fails(QrSqlSession *s, const char *sql, const char *sqlstate, const char *msg_part)
{
    QrError err;
    char *t = run(s, sql, &err);
    cr_assert_null(t, "%s should fail", sql);
    cr_assert_str_eq(qr_error_sqlstate(&err), sqlstate, "%s: %s", sql, err.message);
    cr_assert(strstr(err.message, msg_part), "%s: message %s", sql, err.message);
}

static QrSqlSession *second_session(Env *e)
{
    QrSqlSession *s;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_new(e->db, &s, &err), QR_OK, "%s", err.message);
    return s;
}

Test(sql_txn, serializable_is_refused_not_weakened)
{
    Env e;
    env_open(&e);
    QrError err;
    char *t = run(e.s, "BEGIN ISOLATION LEVEL SERIALIZABLE", &err);
    cr_assert_null(t);
    cr_assert_str_eq(qr_error_sqlstate(&err), "0A000");
    cr_assert(strstr(err.message, "SERIALIZABLE"), "%s", err.message);
    cr_assert(strstr(err.hint, "REPEATABLE READ"), "hint: %s", err.hint);
    cr_assert_eq(qr_sql_session_txn_status(e.s), 'I', "no block began");
    fails(e.s, "START TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ WRITE", "0A000",
          "SERIALIZABLE");
    fails(e.s, "SET default_transaction_isolation = 'serializable'", "0A000", "SERIALIZABLE");
    fails(e.s, "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
          "0A000", "SERIALIZABLE");
    fails(e.s, "SET default_transaction_isolation = 'sometimes'", "22023",
          "default_transaction_isolation");
    expect(e.s, "SHOW default_transaction_isolation", "read committed");
    ok(e.s, "BEGIN");
    fails(e.s, "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", "0A000", "SERIALIZABLE");
    cr_assert_eq(qr_sql_session_txn_status(e.s), 'E', "the block is aborted");
    ok(e.s, "ROLLBACK");
    env_close(&e);
}

Test(sql_txn, show_and_set_the_level_as_postgresql)
{
    Env e;
    env_open(&e);
    ok(e.s, "CREATE TABLE t (id bigint PRIMARY KEY, v bigint)");
    expect(e.s, "SHOW transaction_isolation", "read committed");
    ok(e.s, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    expect(e.s, "SHOW transaction_isolation", "repeatable read");
    expect(e.s, "SELECT current_setting('transaction_isolation')", "repeatable read");
    ok(e.s, "COMMIT");
    expect(e.s, "SHOW transaction_isolation", "read committed");
    /* READ UNCOMMITTED runs as READ COMMITTED, as in PostgreSQL */
    ok(e.s, "BEGIN TRANSACTION ISOLATION LEVEL READ UNCOMMITTED");
    expect(e.s, "SHOW transaction_isolation", "read committed");
    ok(e.s, "ROLLBACK");
    /* SET TRANSACTION: only before the block's first query */
    ok(e.s, "BEGIN");
    ok(e.s, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
    expect(e.s, "SHOW transaction_isolation", "repeatable read");
    expect(e.s, "SELECT count(*) FROM t", "0");
    fails(e.s, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", "25001", "before any query");
    ok(e.s, "ROLLBACK");
    ok(e.s, "BEGIN");
    ok(e.s, "INSERT INTO t VALUES (1, 1)");
    fails(e.s, "SET transaction_isolation = 'repeatable read'", "25001", "before any query");
    ok(e.s, "ROLLBACK");
    /* the session's default */
    ok(e.s, "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ");
    expect(e.s, "SHOW default_transaction_isolation", "repeatable read");
    ok(e.s, "BEGIN");
    expect(e.s, "SHOW transaction_isolation", "repeatable read");
    ok(e.s, "COMMIT");
    ok(e.s, "SET default_transaction_isolation TO 'read committed'");
    ok(e.s, "BEGIN");
    expect(e.s, "SHOW transaction_isolation", "read committed");
    ok(e.s, "COMMIT");
    env_close(&e);
}

/* ---- reads while another session commits, against a model ---- */

#define N_KEYS 24
typedef struct Model {
    bool live[N_KEYS];
    int v[N_KEYS];
    bool red[N_KEYS]; /* body holds the word "red" */
} Model;

/* What reader r sees must be model m: the rows, a count, a full-text count
 * and a grouped sum. */
static void check_reads(QrSqlSession *r, const Model *m)
{
    char want[4096] = "";
    size_t o = 0;
    int n = 0, n_red = 0;
    long long sum_red = 0, sum_other = 0;
    for (int k = 0; k < N_KEYS; k++)
        if (m->live[k]) {
            o += (size_t)snprintf(want + o, sizeof want - o, "%s%d|%d", n ? "\n" : "", k, m->v[k]);
            n++;
            if (m->red[k]) {
                n_red++;
                sum_red += m->v[k];
            } else
                sum_other += m->v[k];
        }
    expect(r, "SELECT id, v FROM kv ORDER BY id", want);
    snprintf(want, sizeof want, "%d", n);
    expect(r, "SELECT count(*) FROM kv", want);
    snprintf(want, sizeof want, "%d", n_red);
    expect(r, "SELECT count(*) FROM kv WHERE body @@ 'red'", want);
    o = 0;
    if (n - n_red)
        o += (size_t)snprintf(want + o, sizeof want - o, "f|%lld", sum_other);
    if (n_red)
        snprintf(want + o, sizeof want - o, "%st|%lld", o ? "\n" : "", sum_red);
    if (!n)
        want[0] = 0;
    expect(r, "SELECT body @@ 'red' AS red, sum(v) FROM kv GROUP BY 1 ORDER BY 1", want);
}

/* Session w commits random writes while session r runs blocks at `level`
 * and reads between them: a REPEATABLE READ block keeps seeing the state
 * of its first read, a READ COMMITTED one the latest commit. */
static void isolation_run(const char *level, bool repeatable, uint64_t seed)
{
    Env e;
    env_open(&e);
    QrSqlSession *w = second_session(&e), *r = e.s;
    ok(w, "CREATE TABLE kv (id bigint PRIMARY KEY, v bigint, body text)");
    Model now = {0}, seen = {0};
    bool in_block = false, has_seen = false;
    uint64_t rng = seed;
    char sql[256];
    for (int step = 0; step < 160; step++) {
        int k = (int)eu_below(&rng, N_KEYS);
        switch (eu_below(&rng, 6)) {
        case 0:
        case 1: { /* w: upsert */
            int v = (int)eu_below(&rng, 1000);
            bool red = eu_below(&rng, 2);
            snprintf(sql, sizeof sql,
                     "INSERT INTO kv VALUES (%d, %d, '%s') ON CONFLICT (id) DO UPDATE SET "
                     "v = excluded.v, body = excluded.body",
                     k, v, red ? "a red fox" : "a grey wolf");
            ok(w, sql);
            now.live[k] = true;
            now.v[k] = v;
            now.red[k] = red;
            break;
        }
        case 2: /* w: delete */
            snprintf(sql, sizeof sql, "DELETE FROM kv WHERE id = %d", k);
            ok(w, sql);
            now.live[k] = false;
            break;
        case 3: /* r: a block begins or ends */
            if (in_block) {
                ok(r, eu_below(&rng, 2) ? "COMMIT" : "ROLLBACK");
                in_block = has_seen = false;
            } else {
                snprintf(sql, sizeof sql, "BEGIN ISOLATION LEVEL %s", level);
                ok(r, sql);
                in_block = true;
            }
            break;
        default: /* r reads */
            if (in_block && repeatable && !has_seen) {
                seen = now;
                has_seen = true;
            }
            check_reads(r, in_block && repeatable ? &seen : &now);
        }
    }
    if (in_block)
        ok(r, "COMMIT");
    check_reads(r, &now);
    qr_sql_session_free(w);
    env_close(&e);
}

Test(sql_txn, repeatable_read_keeps_the_first_snapshot, .timeout = 120)
{
    for (uint64_t seed = 1; seed <= 3; seed++)
        isolation_run("REPEATABLE READ", true, seed);
}

Test(sql_txn, read_committed_sees_each_commit, .timeout = 120)
{
    for (uint64_t seed = 1; seed <= 2; seed++)
        isolation_run("READ COMMITTED", false, seed);
}

/* ---- savepoints ---- */

Test(sql_txn, savepoint_errors_as_postgresql)
{
    Env e;
    env_open(&e);
    fails(e.s, "SAVEPOINT a", "25P01", "SAVEPOINT can only be used in transaction blocks");
    fails(e.s, "RELEASE SAVEPOINT a", "25P01", "RELEASE SAVEPOINT can only be used");
    fails(e.s, "ROLLBACK TO SAVEPOINT a", "25P01", "ROLLBACK TO SAVEPOINT can only be used");
    ok(e.s, "BEGIN");
    fails(e.s, "ROLLBACK TO SAVEPOINT nope", "3B001", "savepoint \"nope\" does not exist");
    cr_assert_eq(qr_sql_session_txn_status(e.s), 'E');
    fails(e.s, "SAVEPOINT a", "25P02", "current transaction is aborted");
    ok(e.s, "ROLLBACK");
    ok(e.s, "BEGIN");
    ok(e.s, "SAVEPOINT a");
    fails(e.s, "SELECT nope FROM pg_class", "42703", "nope");
    /* a failed block only parses: binding errors are 25P02 too */
    fails(e.s, "SELECT nope FROM pg_class", "25P02", "current transaction is aborted");
    fails(e.s, "SELEC 1", "42601", "syntax");
    ok(e.s, "ROLLBACK TO a");
    ok(e.s, "RELEASE a");
    fails(e.s, "RELEASE a", "3B001", "does not exist");
    ok(e.s, "ROLLBACK");
    cr_assert_eq(qr_sql_session_txn_status(e.s), 'I');
    env_close(&e);
}

/* Random blocks of writes, savepoints (nested, names repeating), releases,
 * rollbacks to them and failing statements, checked against a model that
 * keeps a copy of the table per savepoint. */
Test(sql_txn, savepoints_against_a_model, .timeout = 120)
{
    Env e;
    env_open(&e);
    QrSqlSession *s = e.s, *other = second_session(&e);
    ok(s, "CREATE TABLE kv (id bigint PRIMARY KEY, v bigint, body text)");
    Model committed = {0}, cur = {0};
    struct {
        char name[8];
        Model m;
    } stack[64];
    int depth = 0;
    bool in_block = false, aborted = false;
    uint64_t rng = 42;
    char sql[256];
    for (int step = 0; step < 600; step++) {
        int k = (int)eu_below(&rng, N_KEYS);
        uint64_t op = eu_below(&rng, 10);
        if (!in_block) {
            ok(s, "BEGIN");
            in_block = true;
            aborted = false;
            depth = 0;
            cur = committed;
            continue;
        }
        if (aborted && op < 7)
            op = 7; /* only a rollback helps now */
        switch (op) {
        case 0:
        case 1: { /* a write: an insert that may hit a live key (23505) */
            int v = (int)eu_below(&rng, 1000);
            bool red = eu_below(&rng, 2);
            snprintf(sql, sizeof sql, "INSERT INTO kv VALUES (%d, %d, '%s')", k, v,
                     red ? "red apples" : "green pears");
            QrError err;
            char *t = run(s, sql, &err);
            if (cur.live[k]) {
                cr_assert_null(t, "%s: the key is live", sql);
                cr_assert_str_eq(qr_error_sqlstate(&err), "23505");
                aborted = true;
            } else {
                cr_assert(t, "%s: %s", sql, err.message);
                cur.live[k] = true;
                cur.v[k] = v;
                cur.red[k] = red;
            }
            free(t);
            break;
        }
        case 2:
            if (eu_below(&rng, 2)) {
                snprintf(sql, sizeof sql, "UPDATE kv SET v = v + 1 WHERE id = %d", k);
                ok(s, sql);
                cur.v[k] += cur.live[k];
            } else { /* a text predicate finds the rows, own writes included */
                ok(s, "UPDATE kv SET v = v + 2 WHERE body @@ 'red'");
                for (int j = 0; j < N_KEYS; j++)
                    cur.v[j] += cur.live[j] && cur.red[j] ? 2 : 0;
            }
            if (!aborted && eu_below(&rng, 3) == 0) {
                check_reads(s, &cur);           /* the block reads its own writes */
                check_reads(other, &committed); /* nobody else does */
            }
            break;
        case 3:
            snprintf(sql, sizeof sql, "DELETE FROM kv WHERE id = %d", k);
            ok(s, sql);
            cur.live[k] = false;
            break;
        case 4:
        case 5:
            if (depth < 64) {
                snprintf(stack[depth].name, sizeof stack[depth].name, "s%d",
                         (int)eu_below(&rng, 4));
                stack[depth].m = cur;
                snprintf(sql, sizeof sql, "SAVEPOINT %s", stack[depth].name);
                ok(s, sql);
                depth++;
            }
            break;
        case 6: /* release the latest of a name */
        case 7: /* roll back to it */ {
            char name[8];
            snprintf(name, sizeof name, "s%d", (int)eu_below(&rng, 4));
            int i = depth - 1;
            while (i >= 0 && strcmp(stack[i].name, name))
                i--;
            snprintf(sql, sizeof sql, "%s %s", op == 6 ? "RELEASE SAVEPOINT" : "ROLLBACK TO",
                     name);
            if (i < 0) {
                fails(s, sql, aborted && op == 6 ? "25P02" : "3B001",
                      aborted && op == 6 ? "aborted" : "does not exist");
                aborted = true;
            } else if (op == 6 && aborted) {
                fails(s, sql, "25P02", "aborted");
            } else if (op == 6) {
                ok(s, sql);
                depth = i;
            } else {
                ok(s, sql);
                cur = stack[i].m;
                depth = i + 1;
                aborted = false;
            }
            break;
        }
        case 8: /* the block ends */
        case 9: {
            bool commit = op == 8;
            QrSqlResult *r = NULL;
            QrError err;
            qr_error_clear(&err);
            const char *q = commit ? "COMMIT" : "ROLLBACK";
            cr_assert_eq(qr_sql_exec(s, q, strlen(q), &r, &err), QR_OK, "%s", err.message);
            cr_assert_str_eq(r->tag, commit && !aborted ? "COMMIT" : "ROLLBACK");
            qr_sql_result_free(r);
            if (commit && !aborted)
                committed = cur;
            in_block = false;
            check_reads(s, &committed);
            break;
        }
        }
    }
    if (in_block)
        ok(s, "ROLLBACK");
    check_reads(s, &committed);
    qr_sql_session_free(other);
    env_close(&e);
}

/* The scores a block computes over its own writes are the scores the same
 * rows get once committed, and INSERT ... SELECT copies what the block
 * sees. */
Test(sql_txn, own_writes_score_as_committed)
{
    Env e;
    env_open(&e);
    QrSqlSession *s = e.s;
    ok(s, "CREATE TABLE docs (id bigint PRIMARY KEY, body text)");
    ok(s, "CREATE TABLE copy (id bigint PRIMARY KEY, body text)");
    ok(s, "INSERT INTO docs VALUES (1, 'red fox'), (2, 'red red wine'), (3, 'blue sky')");
    const char *q = "SELECT id, score() FROM docs WHERE body @@ 'red' ORDER BY score() DESC, id";
    ok(s, "BEGIN");
    ok(s, "INSERT INTO docs VALUES (4, 'a red red red balloon'), (5, 'red')");
    ok(s, "DELETE FROM docs WHERE id = 1");
    ok(s, "UPDATE docs SET body = 'red sky at night' WHERE id = 3");
    QrError err;
    char *inside = run(s, q, &err);
    cr_assert(inside, "%s", err.message);
    expect(s, "SELECT count(*) FROM docs WHERE body @@ 'red'", "4");
    ok(s, "INSERT INTO copy SELECT * FROM docs WHERE body @@ 'sky'");
    expect(s, "SELECT id FROM copy", "3");
    ok(s, "COMMIT");
    char *after = run(s, q, &err);
    cr_assert(after, "%s", err.message);
    cr_assert_str_eq(inside, after);
    cr_assert(strstr(inside, "4|") && !strstr(inside, "1|"), "%s", inside);
    free(inside);
    free(after);
    env_close(&e);
}

/* ---- two writers of one key: first committer wins ---- */

Test(sql_txn, repeatable_read_first_committer_wins)
{
    Env e;
    env_open(&e);
    QrSqlSession *a = e.s, *b = second_session(&e);
    ok(a, "CREATE TABLE t (id bigint PRIMARY KEY, v bigint)");
    ok(a, "INSERT INTO t VALUES (1, 0), (2, 0)");
    /* an autocommit update after the block began: the block's update of
     * that row loses at COMMIT, and applies nothing */
    ok(a, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    expect(a, "SELECT v FROM t WHERE id = 1", "0");
    ok(b, "UPDATE t SET v = v + 1 WHERE id = 1");
    ok(a, "UPDATE t SET v = v + 10 WHERE id = 2");
    ok(a, "UPDATE t SET v = v + 10 WHERE id = 1");
    QrError err;
    char *t = run(a, "COMMIT", &err);
    cr_assert_null(t, "the second committer must fail");
    cr_assert_str_eq(qr_error_sqlstate(&err), "40001", "%s", err.message);
    cr_assert(strstr(err.message, "could not serialize access"), "%s", err.message);
    cr_assert_eq(qr_sql_session_txn_status(a), 'I');
    expect(a, "SELECT id, v FROM t ORDER BY id", "1|1\n2|0");
    /* two blocks: the first COMMIT wins, on another key both do */
    ok(a, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    ok(b, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    expect(a, "SELECT v FROM t WHERE id = 1", "1");
    expect(b, "SELECT v FROM t WHERE id = 1", "1");
    ok(a, "UPDATE t SET v = v + 1 WHERE id = 1");
    ok(b, "UPDATE t SET v = v + 5 WHERE id = 1");
    ok(b, "COMMIT");
    fails(a, "COMMIT", "40001", "could not serialize");
    expect(a, "SELECT v FROM t WHERE id = 1", "6");
    ok(a, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    ok(b, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    ok(a, "UPDATE t SET v = v + 1 WHERE id = 1");
    ok(b, "UPDATE t SET v = v + 1 WHERE id = 2");
    ok(b, "COMMIT");
    ok(a, "COMMIT");
    expect(a, "SELECT id, v FROM t ORDER BY id", "1|7\n2|1");
    /* READ COMMITTED blocks: the later commit wins (documented) */
    ok(a, "BEGIN");
    ok(b, "BEGIN");
    ok(a, "UPDATE t SET v = 100 WHERE id = 1");
    ok(b, "UPDATE t SET v = 200 WHERE id = 1");
    ok(a, "COMMIT");
    ok(b, "COMMIT");
    expect(a, "SELECT v FROM t WHERE id = 1", "200");
    qr_sql_session_free(b);
    env_close(&e);
}

/* Increments from interleaved REPEATABLE READ blocks of two sessions, each
 * retried on 40001: no increment is lost and none counted twice. */
Test(sql_txn, repeatable_read_loses_no_update, .timeout = 120)
{
    Env e;
    env_open(&e);
    QrSqlSession *ss[2] = {e.s, second_session(&e)};
    ok(e.s, "CREATE TABLE c (id bigint PRIMARY KEY, v bigint)");
    ok(e.s, "INSERT INTO c VALUES (0, 0), (1, 0), (2, 0)");
    long long want[3] = {0};
    int pending_key[2] = {-1, -1}; /* the key each session's open block incremented */
    int stage[2] = {0, 0};          /* 0 idle, 1 begun and read, 2 updated */
    int conflicts = 0;
    uint64_t rng = 7;
    char sql[128];
    for (int step = 0; step < 400; step++) {
        int w = (int)eu_below(&rng, 2);
        QrSqlSession *s = ss[w];
        if (stage[w] == 0) {
            ok(s, "BEGIN ISOLATION LEVEL REPEATABLE READ");
            ok(s, "SELECT sum(v) FROM c");
            stage[w] = 1;
        } else if (stage[w] == 1) {
            pending_key[w] = (int)eu_below(&rng, 3);
            snprintf(sql, sizeof sql, "UPDATE c SET v = v + 1 WHERE id = %d", pending_key[w]);
            ok(s, sql);
            stage[w] = 2;
        } else {
            QrError err;
            char *t = run(s, "COMMIT", &err);
            if (t)
                want[pending_key[w]]++;
            else {
                cr_assert_str_eq(qr_error_sqlstate(&err), "40001", "%s", err.message);
                conflicts++;
            }
            free(t);
            stage[w] = 0;
        }
    }
    for (int w = 0; w < 2; w++)
        if (stage[w])
            ok(ss[w], "ROLLBACK");
    snprintf(sql, sizeof sql, "0|%lld\n1|%lld\n2|%lld", want[0], want[1], want[2]);
    expect(e.s, "SELECT id, v FROM c ORDER BY id", sql);
    cr_assert_gt(conflicts, 0, "the interleavings should have conflicted");
    qr_sql_session_free(ss[1]);
    env_close(&e);
}

/* ---- CREATE TABLE in a block ---- */

Test(sql_txn, create_table_is_undone_by_rollback)
{
    Env e;
    env_open(&e);
    QrSqlSession *s = e.s;
    ok(s, "BEGIN");
    ok(s, "CREATE TABLE n1 (id bigint PRIMARY KEY, body text)");
    ok(s, "INSERT INTO n1 VALUES (1, 'one')");
    expect(s, "SELECT count(*) FROM n1", "1");
    ok(s, "ROLLBACK");
    fails(s, "SELECT * FROM n1", "42P01", "n1");
    ok(s, "BEGIN");
    ok(s, "CREATE TABLE n2 (id bigint PRIMARY KEY)");
    ok(s, "INSERT INTO n2 VALUES (2)");
    ok(s, "COMMIT");
    expect(s, "SELECT id FROM n2", "2");
    /* IF NOT EXISTS of a table that exists created nothing to undo */
    ok(s, "BEGIN");
    ok(s, "CREATE TABLE IF NOT EXISTS n2 (id bigint PRIMARY KEY)");
    ok(s, "ROLLBACK");
    expect(s, "SELECT id FROM n2", "2");
    /* ROLLBACK TO a savepoint set before it; its serial's sequence goes too */
    ok(s, "BEGIN");
    ok(s, "CREATE TABLE n3 (id serial PRIMARY KEY, v int)");
    ok(s, "SAVEPOINT a");
    ok(s, "CREATE TABLE n4 (id serial PRIMARY KEY, v int)");
    ok(s, "INSERT INTO n4 (v) VALUES (4)");
    ok(s, "ROLLBACK TO a");
    fails(s, "SELECT * FROM n4", "42P01", "n4");
    ok(s, "ROLLBACK TO a");
    fails(s, "SELECT nextval('n4_id_seq')", "42P01", "n4_id_seq");
    ok(s, "ROLLBACK TO a");
    ok(s, "INSERT INTO n3 (v) VALUES (3)");
    ok(s, "COMMIT");
    expect(s, "SELECT v FROM n3", "3");
    /* a failed block's COMMIT answers ROLLBACK and drops it */
    ok(s, "BEGIN");
    ok(s, "CREATE TABLE n5 (id bigint PRIMARY KEY)");
    fails(s, "SELECT nope FROM n5", "42703", "nope");
    ok(s, "COMMIT");
    fails(s, "SELECT * FROM n5", "42P01", "n5");
    /* CREATE INDEX: dropped again by ROLLBACK, kept by COMMIT */
    ok(s, "CREATE TABLE n7 (id bigint PRIMARY KEY, tag varchar(10))");
    ok(s, "BEGIN");
    ok(s, "CREATE INDEX n7_tag ON n7 (tag)");
    expect(s, "SELECT count(*) FROM pg_class WHERE relname = 'n7_tag'", "1");
    ok(s, "ROLLBACK");
    expect(s, "SELECT count(*) FROM pg_class WHERE relname = 'n7_tag'", "0");
    ok(s, "BEGIN");
    ok(s, "CREATE INDEX ON n7 (tag)");
    ok(s, "COMMIT");
    expect(s, "SELECT count(*) FROM pg_class WHERE relname = 'n7_tag_idx'", "1");
    /* a session that ends inside its block */
    QrSqlSession *other = second_session(&e);
    ok(other, "BEGIN");
    ok(other, "CREATE TABLE n6 (id bigint PRIMARY KEY)");
    qr_sql_session_free(other);
    fails(s, "SELECT * FROM n6", "42P01", "n6");
    /* other sessions see the new table only once the block commits; one
     * dropped again by ROLLBACK TO is no one's */
    other = second_session(&e);
    ok(s, "BEGIN");
    ok(s, "CREATE TABLE h1 (id bigint PRIMARY KEY)");
    ok(s, "INSERT INTO h1 VALUES (1)");
    expect(other, "SELECT count(*) FROM pg_class WHERE relname = 'h1'", "0");
    fails(other, "INSERT INTO h1 VALUES (9)", "42P01", "h1");
    fails(other, "CREATE TABLE h1 (id bigint PRIMARY KEY)", "42P07", "h1");
    ok(s, "SAVEPOINT a");
    ok(s, "CREATE TABLE h2 (id bigint PRIMARY KEY)");
    ok(s, "ROLLBACK TO a");
    ok(other, "CREATE TABLE h2 (id bigint PRIMARY KEY)");
    ok(other, "INSERT INTO h2 VALUES (2)");
    expect(other, "SELECT id FROM h2", "2");
    ok(s, "COMMIT");
    expect(other, "SELECT id FROM h1", "1");
    qr_sql_session_free(other);
    env_close(&e);
}

/* ---- DROP TABLE in a block ---- */

/* Rows of t as the session sees them ("" when none), or NULL when the
 * table does not exist for it (42P01). */
static char *rows_of(QrSqlSession *s, const char *t)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT * FROM %s ORDER BY 1", t);
    QrError err;
    char *r = run(s, sql, &err);
    if (!r)
        cr_assert_str_eq(qr_error_sqlstate(&err), "42P01", "%s: %s", sql, err.message);
    return r;
}

static void sees(QrSqlSession *s, const char *t, const char *want)
{
    char *r = rows_of(s, t);
    if (!want)
        cr_assert_null(r, "%s should be gone, has [%s]", t, r ? r : "");
    else
        cr_assert(r && !strcmp(r, want), "%s: got [%s] want [%s]", t, r ? r : "(gone)", want);
    free(r);
}

Test(sql_txn, drop_table_waits_for_commit)
{
    Env e;
    env_open(&e);
    QrSqlSession *s = e.s, *o = second_session(&e);
    ok(s, "CREATE TABLE d1 (id serial PRIMARY KEY, v int)");
    ok(s, "CREATE TABLE d2 (id bigint PRIMARY KEY, v int)");
    ok(s, "INSERT INTO d1 (v) VALUES (10), (20)");
    /* gone for the dropping session at once, there for the others; ROLLBACK
     * brings it back whole */
    ok(s, "BEGIN");
    ok(s, "INSERT INTO d1 (v) VALUES (30)");
    ok(s, "DROP TABLE d1");
    expect(s, "SELECT count(*) FROM pg_class WHERE relname = 'd1'", "0");
    ok(s, "DROP TABLE IF EXISTS d1");
    sees(o, "d1", "1|10\n2|20\n");
    expect(o, "SELECT count(*) FROM pg_class WHERE relname = 'd1'", "1");
    sees(s, "d1", NULL); /* an error: the block is aborted */
    ok(s, "ROLLBACK");
    sees(s, "d1", "1|10\n2|20\n");
    /* ROLLBACK TO a savepoint set before it */
    ok(s, "BEGIN");
    ok(s, "SAVEPOINT a");
    ok(s, "DROP TABLE d1");
    ok(s, "INSERT INTO d2 VALUES (1, 1)");
    ok(s, "ROLLBACK TO a");
    sees(s, "d1", "1|10\n2|20\n");
    sees(s, "d2", "");
    ok(s, "COMMIT");
    sees(o, "d1", "1|10\n2|20\n");
    /* a failed block's COMMIT answers ROLLBACK: nothing dropped */
    ok(s, "BEGIN");
    ok(s, "DROP TABLE d1");
    fails(s, "SELECT nope FROM d2", "42703", "nope");
    ok(s, "COMMIT");
    sees(s, "d1", "1|10\n2|20\n");
    /* a session that ends inside its block */
    QrSqlSession *x = second_session(&e);
    ok(x, "BEGIN");
    ok(x, "DROP TABLE d1");
    qr_sql_session_free(x);
    sees(s, "d1", "1|10\n2|20\n");
    /* the same name can come back in the block that dropped it
     * (a_table_dropped_and_made_again_goes_with_the_block) */
    ok(s, "BEGIN");
    ok(s, "DROP TABLE d1");
    ok(s, "CREATE TABLE d1 (id bigint PRIMARY KEY)");
    ok(s, "ROLLBACK");
    sees(s, "d1", "1|10\n2|20\n");
    /* COMMIT: the drop and the block's other writes together; writes to the
     * dropped table go with it, and so does its serial's sequence */
    ok(s, "BEGIN");
    ok(s, "INSERT INTO d1 (v) VALUES (40)");
    ok(s, "INSERT INTO d2 VALUES (2, 2)");
    ok(s, "DROP TABLE d1");
    sees(o, "d1", "1|10\n2|20\n");
    sees(o, "d2", "");
    ok(s, "COMMIT");
    sees(o, "d1", NULL);
    sees(o, "d2", "2|2\n");
    fails(o, "SELECT nextval('d1_id_seq')", "42P01", "d1_id_seq");
    /* the table the block dropped was dropped and made again by another
     * session meanwhile: COMMIT leaves the new one alone */
    ok(s, "CREATE TABLE d5 (id bigint PRIMARY KEY)");
    ok(s, "BEGIN");
    ok(s, "DROP TABLE d5");
    ok(o, "DROP TABLE d5");
    ok(o, "CREATE TABLE d5 (id bigint PRIMARY KEY)");
    ok(o, "INSERT INTO d5 VALUES (5)");
    ok(s, "COMMIT");
    sees(o, "d5", "5\n");
    /* a table created and dropped in one block is gone either way */
    ok(s, "BEGIN");
    ok(s, "CREATE TABLE d3 (id bigint PRIMARY KEY)");
    ok(s, "DROP TABLE d3");
    ok(s, "COMMIT");
    sees(s, "d3", NULL);
    ok(s, "BEGIN");
    ok(s, "CREATE TABLE d4 (id bigint PRIMARY KEY)");
    ok(s, "DROP TABLE d4");
    ok(s, "ROLLBACK");
    sees(s, "d4", NULL);
    qr_sql_session_free(o);
    env_close(&e);
}

/* ---- REPEATABLE READ: one snapshot of the whole database ---- */

/* Another session commits to b (alone, then with a) after the block read a
 * only: the block's first read of b shows b as of the block's start, as
 * PostgreSQL's does; READ COMMITTED shows the commit. */
Test(sql_txn, repeatable_read_snapshot_covers_every_table)
{
    Env e;
    env_open(&e);
    QrSqlSession *s = e.s, *o = second_session(&e);
    ok(s, "CREATE TABLE ra (id bigint PRIMARY KEY, v int)");
    ok(s, "CREATE TABLE rb (id bigint PRIMARY KEY, v int)");
    ok(s, "INSERT INTO ra VALUES (1, 1)");
    ok(s, "INSERT INTO rb VALUES (1, 1)");
    for (int rr = 1; rr >= 0; rr--) {
        ok(s, rr ? "BEGIN ISOLATION LEVEL REPEATABLE READ" : "BEGIN");
        expect(s, "SELECT count(*) FROM ra", rr ? "1" : "2");
        ok(o, rr ? "INSERT INTO rb VALUES (2, 2)" : "INSERT INTO rb VALUES (3, 3)");
        ok(o, "BEGIN");
        ok(o, rr ? "INSERT INTO ra VALUES (2, 2)" : "INSERT INTO ra VALUES (3, 3)");
        ok(o, rr ? "UPDATE rb SET v = 10 WHERE id = 1" : "UPDATE rb SET v = 20 WHERE id = 1");
        ok(o, "COMMIT");
        expect(s, "SELECT count(*), sum(v) FROM rb", rr ? "1|1" : "3|25");
        expect(s, "SELECT count(*) FROM ra", rr ? "1" : "3");
        ok(s, "COMMIT");
    }
    expect(s, "SELECT count(*), sum(v) FROM rb", "3|25");
    /* the start is the block's first statement, a write too */
    ok(s, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    ok(s, "INSERT INTO ra VALUES (9, 9)");
    ok(o, "DELETE FROM rb");
    expect(s, "SELECT count(*) FROM rb", "3");
    ok(s, "COMMIT");
    expect(s, "SELECT count(*) FROM rb", "0");
    qr_sql_session_free(o);
    env_close(&e);
}

/* ---- ALTER TABLE and DROP INDEX in a block ---- */

Test(sql_txn, alter_table_and_drop_index_wait_for_commit)
{
    Env e;
    env_open(&e);
    QrSqlSession *s = e.s, *o = second_session(&e);
    ok(s, "CREATE TABLE al (id bigint PRIMARY KEY, v int, tag varchar(8))");
    ok(s, "CREATE INDEX al_tag ON al (tag)");
    const char *idx = "SELECT count(*) FROM pg_class WHERE relname LIKE 'al_tag%'";
    /* the block's own statements see the change, others do not; ROLLBACK
     * undoes it */
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE al ALTER COLUMN v SET DEFAULT 7");
    ok(s, "DROP INDEX al_tag");
    ok(s, "INSERT INTO al (id, tag) VALUES (1, 'a')");
    expect(s, "SELECT v FROM al WHERE id = 1", "7");
    expect(s, idx, "0");
    ok(o, "INSERT INTO al (id) VALUES (100)");
    expect(o, "SELECT count(*) FROM al WHERE v IS NULL", "1");
    expect(o, idx, "1");
    ok(s, "ROLLBACK");
    ok(s, "INSERT INTO al (id) VALUES (2)");
    expect(s, "SELECT count(*) FROM al WHERE v IS NULL", "2");
    expect(s, idx, "1");
    expect(s, "SELECT count(*) FROM al WHERE tag = 'a'", "0");
    /* ROLLBACK TO a savepoint set before it */
    ok(s, "BEGIN");
    ok(s, "SAVEPOINT a");
    ok(s, "ALTER TABLE al ALTER COLUMN v SET NOT NULL");
    ok(s, "DROP INDEX al_tag");
    ok(s, "ROLLBACK TO a");
    ok(s, "INSERT INTO al VALUES (3, NULL, 'c')");
    expect(s, idx, "1");
    ok(s, "COMMIT");
    expect(o, "SELECT count(*) FROM al WHERE v IS NULL", "3");
    /* a failed block's COMMIT answers ROLLBACK; a session ending in its block */
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE al ALTER COLUMN v SET DEFAULT 9");
    fails(s, "SELECT nope FROM al", "42703", "nope");
    ok(s, "COMMIT");
    QrSqlSession *x = second_session(&e);
    ok(x, "BEGIN");
    ok(x, "ALTER TABLE al ALTER COLUMN v SET DEFAULT 9");
    ok(x, "DROP INDEX al_tag");
    qr_sql_session_free(x);
    ok(s, "INSERT INTO al (id) VALUES (4)");
    expect(s, "SELECT v IS NULL FROM al WHERE id = 4", "t");
    expect(s, idx, "1");
    /* an index dropped and created again in a block is there after ROLLBACK */
    ok(s, "BEGIN");
    ok(s, "DROP INDEX al_tag");
    ok(s, "CREATE INDEX al_tag ON al (tag)");
    ok(s, "DROP INDEX al_tag");
    expect(s, idx, "0");
    ok(s, "ROLLBACK");
    expect(s, idx, "1");
    /* an identity column's new sequence goes with ROLLBACK */
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE al ALTER COLUMN v ADD GENERATED BY DEFAULT AS IDENTITY");
    ok(s, "ROLLBACK");
    fails(s, "SELECT nextval('al_v_seq')", "42P01", "al_v_seq");
    /* another transaction changed the table since: 40001, nothing applied */
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE al ALTER COLUMN v SET DEFAULT 1");
    ok(s, "INSERT INTO al (id) VALUES (5)");
    ok(o, "ALTER TABLE al ALTER COLUMN v SET DEFAULT 2");
    fails(s, "COMMIT", "40001", "concurrent update");
    expect(o, "SELECT count(*) FROM al WHERE id = 5", "0");
    ok(o, "ALTER TABLE al ALTER COLUMN v DROP DEFAULT");
    /* COMMIT: the definition, the B-tree and the rows together */
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE al ALTER COLUMN v SET DEFAULT 5");
    ok(s, "DROP INDEX al_tag");
    ok(s, "INSERT INTO al (id) VALUES (6)");
    ok(s, "COMMIT");
    ok(o, "INSERT INTO al (id) VALUES (7)");
    expect(o, "SELECT sum(v) FROM al WHERE id IN (6, 7)", "10");
    expect(o, idx, "0");
    qr_sql_session_free(o);
    env_close(&e);
}

/* ---- ADD COLUMN, ADD PRIMARY KEY, full-text CREATE INDEX in a block ---- */

static int spares_left(Env *e)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/spares", e->dir);
    DIR *d = opendir(path);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* ADD PRIMARY KEY and a full-text CREATE INDEX on a committed table rebuild
 * it into a copy that only the block sees (and writes) until COMMIT puts it
 * in the table's place; ROLLBACK, ROLLBACK TO and a session that ends in
 * the block drop the copy.  The other session sees and writes the table as
 * it was; a write of its own to the table makes the block's COMMIT 40001. */
Test(sql_txn, rebuilds_in_a_block_go_with_the_block)
{
    Env e;
    env_open(&e);
    QrSqlSession *s = e.s, *o = second_session(&e);
    const char *rows = "SELECT string_agg(a || ':' || b, ',' ORDER BY a, b) FROM sk";
    const char *pk = "SELECT count(*) FROM pg_constraint WHERE conrelid = 'sk'::regclass";
    ok(s, "CREATE TABLE sk (a int, b varchar(8))");
    ok(s, "INSERT INTO sk VALUES (1, 'x'), (2, 'y')");
    for (int commit = 0; commit < 2; commit++) {
        ok(s, "BEGIN");
        ok(s, "INSERT INTO sk VALUES (0, 'pre')"); /* keyed by the row id: the copy takes it */
        ok(s, "ALTER TABLE sk ADD PRIMARY KEY (a)");
        expect(s, pk, "1");
        ok(s, "INSERT INTO sk VALUES (3, 'w')");
        ok(s, "UPDATE sk SET b = 'xx' WHERE a = 1");
        expect(s, rows, "0:pre,1:xx,2:y,3:w");
        expect(s, "SELECT b FROM sk WHERE a = 3", "w");
        expect(o, rows, "1:x,2:y");
        expect(o, pk, "0");
        cr_assert_eq(spares_left(&e), 1);
        ok(s, commit ? "COMMIT" : "ROLLBACK");
        cr_assert_eq(spares_left(&e), 0, "the copy (or the old table) is gone");
        expect(o, rows, commit ? "0:pre,1:xx,2:y,3:w" : "1:x,2:y");
        expect(o, pk, commit ? "1" : "0");
        expect(s, pk, commit ? "1" : "0");
    }
    fails(o, "INSERT INTO sk VALUES (1, 'd')", "23505", "duplicate key");
    expect(o, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'sk'::regclass", "2");

    /* a full-text index on a table with rows: every row analyzed again */
    ok(s, "CREATE TABLE sc (id bigint PRIMARY KEY, body varchar(20))");
    ok(s, "INSERT INTO sc VALUES (1, 'red foxes'), (2, 'blue')");
    const char *fox = "SELECT string_agg(id::text, ',' ORDER BY id) FROM sc WHERE body @@ 'fox'";
    fails(o, fox, "22023", "not a full-text field");
    ok(s, "BEGIN");
    ok(s, "CREATE INDEX ON sc USING fulltext (body)");
    ok(s, "INSERT INTO sc VALUES (3, 'a fox')");
    expect(s, fox, "1,3");
    fails(o, fox, "22023", "not a full-text field");
    ok(s, "SAVEPOINT a");
    ok(s, "DELETE FROM sc WHERE id = 1");
    expect(s, fox, "3");
    ok(s, "ROLLBACK TO a");
    ok(s, "COMMIT");
    expect(o, fox, "1,3");
    ok(s, "CREATE INDEX ON sc USING fulltext (body)"); /* the same analysis: nothing to do */
    cr_assert_eq(spares_left(&e), 0);

    /* ROLLBACK TO a savepoint set before the rebuild: the table as it was */
    ok(s, "CREATE TABLE sv (a int, b varchar(8))");
    ok(s, "INSERT INTO sv VALUES (1, 'x')");
    ok(s, "BEGIN");
    ok(s, "SAVEPOINT a");
    ok(s, "ALTER TABLE sv ADD PRIMARY KEY (a)");
    ok(s, "INSERT INTO sv VALUES (2, 'y')");
    ok(s, "ROLLBACK TO a");
    cr_assert_eq(spares_left(&e), 0);
    expect(s, "SELECT count(*) FROM pg_constraint WHERE conrelid = 'sv'::regclass", "0");
    ok(s, "INSERT INTO sv VALUES (1, 'again')"); /* no key: a duplicate a goes in */
    ok(s, "COMMIT");
    expect(o, "SELECT count(*) FROM sv WHERE a = 1", "2");

    /* a commit to the table while the block has its copy: first committer wins */
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE sv ADD COLUMN c int");
    ok(s, "DELETE FROM sv WHERE b = 'again'");
    ok(s, "COMMIT");
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE sv ADD PRIMARY KEY (a)");
    ok(o, "INSERT INTO sv (a, b) VALUES (1, 'other')"); /* its key is still the row id */
    fails(s, "COMMIT", "40001", "concurrent update");
    cr_assert_eq(spares_left(&e), 0);
    expect(o, "SELECT string_agg(b, ',' ORDER BY b) FROM sv", "other,x");
    expect(o, "SELECT count(*) FROM pg_constraint WHERE conrelid = 'sv'::regclass", "0");
    /* a duplicate (or NULL) key found by the copy: refused, nothing changed */
    ok(s, "BEGIN");
    fails(s, "ALTER TABLE sv ADD PRIMARY KEY (a)", "23505", "could not create unique index");
    ok(s, "ROLLBACK");
    cr_assert_eq(spares_left(&e), 0);
    /* the block's earlier writes to the table go into the copy; ROLLBACK TO a
     * savepoint between them and the rebuild gives them back to the table */
    ok(s, "BEGIN");
    ok(s, "DELETE FROM sv WHERE b = 'other'");
    ok(s, "SAVEPOINT w");
    ok(s, "ALTER TABLE sv ADD PRIMARY KEY (a)");
    expect(s, "SELECT string_agg(a || b, ',') FROM sv", "1x");
    ok(s, "ROLLBACK TO w");
    cr_assert_eq(spares_left(&e), 0);
    expect(s, "SELECT count(*) FROM pg_constraint WHERE conrelid = 'sv'::regclass", "0");
    expect(s, "SELECT string_agg(b, ',' ORDER BY b) FROM sv", "x");
    ok(s, "INSERT INTO sv (a, b) VALUES (2, 'two')");
    ok(s, "ALTER TABLE sv ADD PRIMARY KEY (a)");
    expect(s, "SELECT string_agg(a || b, ',' ORDER BY a) FROM sv", "1x,2two");
    ok(s, "ROLLBACK");
    expect(o, "SELECT string_agg(b, ',' ORDER BY b) FROM sv", "other,x");
    /* a session that ends inside its block: the copy goes */
    QrSqlSession *x = second_session(&e);
    ok(x, "BEGIN");
    ok(x, "DELETE FROM sv WHERE b = 'other'");
    ok(x, "COMMIT");
    ok(x, "BEGIN");
    ok(x, "ALTER TABLE sv ADD PRIMARY KEY (a)");
    cr_assert_eq(spares_left(&e), 1);
    qr_sql_session_free(x);
    cr_assert_eq(spares_left(&e), 0);
    expect(o, "SELECT count(*) FROM pg_constraint WHERE conrelid = 'sv'::regclass", "0");
    /* twice in one block: the second rebuild copies the first's copy */
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE sv ADD PRIMARY KEY (a)");
    ok(s, "CREATE INDEX ON sv USING fulltext (b)");
    ok(s, "INSERT INTO sv (a, b) VALUES (5, 'foxes')");
    expect(s, "SELECT a FROM sv WHERE b @@ 'fox'", "5");
    ok(s, "COMMIT");
    cr_assert_eq(spares_left(&e), 0);
    expect(o, "SELECT string_agg(a::text, ',' ORDER BY a) FROM sv", "1,5");
    expect(o, "SELECT a FROM sv WHERE b @@ 'fox'", "5");
    fails(o, "INSERT INTO sv (a, b) VALUES (5, 'd')", "23505", "duplicate key");
    qr_sql_session_free(o);
    env_close(&e);
}

/* On a table the block created (and no savepoint set since) they rebuild
 * it at once, and go or stay with the table. */
Test(sql_txn, storage_ddl_in_a_block_goes_with_its_table)
{
    Env e;
    env_open(&e);
    QrSqlSession *s = e.s, *o = second_session(&e);
    /* a table the block created: the column, the key and the analysis come
     * and go with it */
    for (int commit = 0; commit < 2; commit++) {
        ok(s, "BEGIN");
        ok(s, "CREATE TABLE nt (id bigint PRIMARY KEY, body varchar(20))");
        ok(s, "ALTER TABLE nt ADD COLUMN c int");
        ok(s, "CREATE INDEX nt_c ON nt (c)");
        ok(s, "CREATE INDEX ON nt USING fulltext (body)");
        ok(s, "CREATE TABLE nk (a int, b varchar(8))");
        ok(s, "ALTER TABLE nk ADD PRIMARY KEY (a)");
        ok(s, "INSERT INTO nt VALUES (1, 'red foxes', 5), (2, 'blue', 6)");
        ok(s, "INSERT INTO nk VALUES (1, 'x')");
        expect(s, "SELECT c FROM nt WHERE body @@ 'fox'", "5");
        fails(o, "SELECT * FROM nt", "42P01", "nt");
        ok(s, commit ? "COMMIT" : "ROLLBACK");
        if (!commit) {
            fails(o, "SELECT * FROM nt", "42P01", "nt");
            fails(o, "SELECT * FROM nk", "42P01", "nk");
            continue;
        }
        expect(o, "SELECT c FROM nt WHERE body @@ 'fox'", "5");
        expect(o, "SELECT id FROM nt WHERE c = 6", "2");
        expect(o, "SELECT count(*) FROM pg_class WHERE relname = 'nt_c'", "1");
        expect(o, "SELECT count(*) FROM nk", "1");
        fails(o, "INSERT INTO nk VALUES (1, 'z')", "23505", "duplicate key");
    }
    /* rebuilt with a B-tree the block made and dropped again: not rebuilt */
    ok(s, "BEGIN");
    ok(s, "CREATE TABLE nd (id bigint PRIMARY KEY, c int, body varchar(20))");
    ok(s, "CREATE INDEX nd_c ON nd (c)");
    ok(s, "DROP INDEX nd_c");
    ok(s, "CREATE INDEX ON nd USING fulltext (body)");
    ok(s, "CREATE TABLE ne (a int, c int)");
    ok(s, "CREATE INDEX ne_c ON ne (c)");
    ok(s, "DROP INDEX ne_c");
    ok(s, "ALTER TABLE ne ADD PRIMARY KEY (a)");
    ok(s, "COMMIT");
    expect(o, "SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class "
              "WHERE relname LIKE 'nd\\_%' OR relname LIKE 'ne\\_%'",
           "nd_pkey,ne_pkey");
    /* a savepoint set after the CREATE: the rebuild is the block's copy
     * (ROLLBACK TO keeps the table, drops the copy); one set before it
     * drops the table with the column */
    ok(s, "BEGIN");
    ok(s, "CREATE TABLE sv (id bigint PRIMARY KEY, body varchar(20))");
    ok(s, "INSERT INTO sv VALUES (1, 'foxes')");
    ok(s, "COMMIT");
    ok(s, "BEGIN");
    ok(s, "CREATE TABLE sv2 (id bigint PRIMARY KEY, body varchar(20))");
    ok(s, "SAVEPOINT a");
    ok(s, "CREATE INDEX ON sv2 USING fulltext (body)");
    ok(s, "ROLLBACK TO a");
    ok(s, "DELETE FROM sv WHERE id = 1");
    ok(s, "RELEASE a");
    ok(s, "SAVEPOINT b");
    ok(s, "CREATE TABLE sw (id bigint PRIMARY KEY)");
    ok(s, "ALTER TABLE sw ADD COLUMN c int");
    ok(s, "INSERT INTO sw VALUES (1, 2)");
    ok(s, "ROLLBACK TO b");
    fails(s, "SELECT * FROM sw", "42P01", "sw");
    ok(s, "ROLLBACK TO b");
    ok(s, "INSERT INTO sv (id) VALUES (7)");
    ok(s, "COMMIT");
    expect(o, "SELECT id FROM sv", "7");
    fails(o, "SELECT * FROM sw", "42P01", "sw");
    qr_sql_session_free(o);
    env_close(&e);
}

/* ADD COLUMN on a table older than the block goes or stays with the block:
 * the block sees the column (older rows read NULL), other sessions do not
 * until COMMIT publishes it with the block's rows; ROLLBACK, ROLLBACK TO, a
 * failed COMMIT and the session's end take it back, and the next ADD
 * COLUMN of the name starts afresh. */
Test(sql_txn, add_column_in_a_block_goes_with_the_block)
{
    Env e;
    env_open(&e);
    QrSqlSession *s = e.s, *o = second_session(&e);
    const char *cols = "SELECT string_agg(column_name, ',' ORDER BY ordinal_position) "
                       "FROM information_schema.columns WHERE table_name = 'ac'";
    ok(s, "CREATE TABLE ac (id bigint PRIMARY KEY, body varchar(20))");
    ok(s, "INSERT INTO ac VALUES (1, 'a')");
    ok(s, "BEGIN");
    QrSqlResult *r = NULL;
    QrError err;
    qr_error_clear(&err);
    const char *q = "ALTER TABLE ac ADD COLUMN c int";
    cr_assert_eq(qr_sql_exec(s, q, strlen(q), &r, &err), QR_OK, "%s", err.message);
    cr_assert_eq(r->n_notices, 0, "no warning: the column goes with the block");
    qr_sql_result_free(r);
    ok(s, "INSERT INTO ac VALUES (2, 'b', 5)");
    expect(s, "SELECT count(*), count(c), sum(c) FROM ac", "2|1|5");
    expect(s, cols, "id,body,c");
    expect(s, "SELECT relnatts FROM pg_class WHERE relname = 'ac'", "3");
    /* other sessions: no column c, and their writes go on */
    fails(o, "SELECT c FROM ac", "42703", "c");
    expect(o, cols, "id,body");
    expect(o, "SELECT relnatts FROM pg_class WHERE relname = 'ac'", "2");
    ok(o, "INSERT INTO ac VALUES (3, 'o')");
    expect(o, "SELECT count(*) FROM ac", "2");
    fails(o, "ALTER TABLE ac ADD COLUMN c int", "40001", "concurrent update");
    fails(o, "ALTER TABLE ac ALTER COLUMN c SET DEFAULT 1", "42703", "c");
    fails(o, "CREATE INDEX ac_c ON ac (c)", "42703", "c");
    ok(s, "ROLLBACK");
    fails(s, "SELECT c FROM ac", "42703", "c");
    fails(o, "SELECT c FROM ac", "42703", "c");
    expect(o, cols, "id,body");
    expect(o, "SELECT string_agg(id::text, ',' ORDER BY id) FROM ac", "1,3");
    /* again, committed: the column and the block's rows together */
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE ac ADD COLUMN c int");
    ok(s, "INSERT INTO ac VALUES (4, 'd', 7)");
    ok(s, "UPDATE ac SET c = 1 WHERE id = 1");
    fails(o, "SELECT c FROM ac", "42703", "c");
    ok(s, "COMMIT");
    expect(o, "SELECT count(*), count(c), sum(c) FROM ac", "3|2|8");
    expect(o, cols, "id,body,c");
    fails(o, "ALTER TABLE ac ADD COLUMN c int", "42701", "already exists");
    /* ROLLBACK TO a savepoint set before it; one set after it keeps it */
    ok(s, "BEGIN");
    ok(s, "SAVEPOINT a");
    ok(s, "ALTER TABLE ac ADD COLUMN d int");
    ok(s, "INSERT INTO ac VALUES (5, 'e', 0, 9)");
    ok(s, "ROLLBACK TO a");
    expect(s, cols, "id,body,c");
    ok(s, "ALTER TABLE ac ADD COLUMN d int");
    ok(s, "SAVEPOINT b");
    ok(s, "INSERT INTO ac VALUES (6, 'f', 0, 9)");
    ok(s, "ROLLBACK TO b");
    ok(s, "INSERT INTO ac VALUES (7, 'g', 0, 10)");
    ok(s, "COMMIT");
    expect(o, "SELECT string_agg(id || ':' || d, ',' ORDER BY id) FROM ac WHERE d IS NOT NULL",
           "7:10");
    /* a failed block's COMMIT answers ROLLBACK */
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE ac ADD COLUMN f int");
    fails(s, "SELECT nope FROM ac", "42703", "nope");
    ok(s, "COMMIT");
    fails(o, "SELECT f FROM ac", "42703", "f");
    /* another transaction changed the table's definition since: 40001 */
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE ac ADD COLUMN f int");
    ok(s, "INSERT INTO ac VALUES (8, 'h', 0, 0, 1)");
    ok(o, "ALTER TABLE ac ALTER COLUMN body SET DEFAULT 'z'");
    fails(s, "COMMIT", "40001", "concurrent update");
    fails(o, "SELECT f FROM ac", "42703", "f");
    expect(o, "SELECT count(*) FROM ac WHERE id = 8", "0");
    /* a session that ends inside its block */
    QrSqlSession *x = second_session(&e);
    ok(x, "BEGIN");
    ok(x, "ALTER TABLE ac ADD COLUMN g text");
    ok(x, "INSERT INTO ac (id, g) VALUES (9, 'x')");
    qr_sql_session_free(x);
    fails(o, "SELECT g FROM ac", "42703", "g");
    expect(o, "SELECT count(*) FROM ac WHERE id = 9", "0");
    /* outside a block, the left-behind field is taken over: every row NULL */
    ok(o, "ALTER TABLE ac ADD COLUMN g text");
    expect(s, "SELECT count(*), count(g) FROM ac", "4|0");
    /* ... but not with another storage type */
    fails(o, "ALTER TABLE ac ADD COLUMN f text", "0A000", "cannot be added");
    ok(o, "ALTER TABLE ac ADD COLUMN f int");
    /* (a taken-over field keeps its place: f was stored before g) */
    expect(s, cols, "id,body,c,d,f,g");
    /* IF NOT EXISTS of a column the table has changes nothing */
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE ac ADD COLUMN IF NOT EXISTS body text");
    ok(s, "COMMIT");
    qr_sql_session_free(o);
    env_close(&e);
}

/* ADD COLUMN ... DEFAULT / NOT NULL as PostgreSQL: the rows there read the
 * default, NOT NULL without one fails on a table with rows (23502) and
 * leaves no column; the rewritten rows commit with the column, in a block
 * (other sessions see neither before COMMIT, ROLLBACK takes both) or not. */
Test(sql_txn, add_column_with_default_or_not_null)
{
    Env e;
    env_open(&e);
    QrSqlSession *s = e.s, *o = second_session(&e);
    ok(s, "CREATE TABLE ad (id bigint PRIMARY KEY, v int)");
    ok(s, "INSERT INTO ad VALUES (1, 1), (2, 2)");
    ok(s, "ALTER TABLE ad ADD COLUMN c int DEFAULT 7");
    expect(o, "SELECT count(c), sum(c) FROM ad", "2|14");
    ok(o, "INSERT INTO ad (id, v) VALUES (3, 3)");
    expect(s, "SELECT c FROM ad WHERE id = 3", "7");
    fails(s, "ALTER TABLE ad ADD COLUMN d int NOT NULL", "23502",
          "column \"d\" of relation \"ad\" contains null values");
    fails(o, "SELECT d FROM ad", "42703", "d");
    ok(s, "ALTER TABLE ad ADD COLUMN d int NOT NULL DEFAULT 1");
    expect(o, "SELECT count(d), sum(d) FROM ad", "3|3");
    fails(o, "INSERT INTO ad (id, d) VALUES (4, NULL)", "23502", "d");
    /* in a block */
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE ad ADD COLUMN e varchar(4) DEFAULT 'x'");
    expect(s, "SELECT string_agg(e, ',') FROM ad", "x,x,x");
    fails(o, "SELECT e FROM ad", "42703", "e");
    expect(o, "SELECT count(*), sum(c) FROM ad", "3|21");
    ok(s, "ROLLBACK");
    fails(s, "SELECT e FROM ad", "42703", "e");
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE ad ADD COLUMN e varchar(4) NOT NULL DEFAULT 'y'");
    ok(s, "INSERT INTO ad (id) VALUES (4)");
    fails(o, "SELECT e FROM ad", "42703", "e");
    ok(s, "COMMIT");
    expect(o, "SELECT string_agg(id || e, ',' ORDER BY id), sum(c), sum(d) FROM ad",
           "1y,2y,3y,4y|28|4");
    /* REPEATABLE READ: a row another session changed meanwhile fails the
     * block's rewrite (first committer wins) */
    ok(s, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    ok(s, "ALTER TABLE ad ADD COLUMN g int DEFAULT 3");
    ok(o, "UPDATE ad SET v = 100 WHERE id = 1");
    fails(s, "COMMIT", "40001", "concurrent update");
    expect(o, "SELECT v FROM ad WHERE id = 1", "100");
    fails(o, "SELECT g FROM ad", "42703", "g");
    /* NOT NULL without a default: fine while the block sees no row */
    ok(s, "CREATE TABLE ae (id bigint PRIMARY KEY)");
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE ae ADD COLUMN n int NOT NULL");
    fails(s, "INSERT INTO ae VALUES (1)", "23502", "n");
    ok(s, "ROLLBACK");
    ok(s, "BEGIN");
    ok(s, "INSERT INTO ae VALUES (1)");
    fails(s, "ALTER TABLE ae ADD COLUMN n int NOT NULL", "23502", "contains null values");
    ok(s, "COMMIT");
    expect(o, "SELECT count(*) FROM ae", "0");
    fails(o, "SELECT n FROM ae", "42703", "n");
    /* ... and a savepoint set before the failing ALTER takes nothing of it
     * along (psql's ON_ERROR_ROLLBACK) */
    ok(s, "BEGIN");
    ok(s, "INSERT INTO ae VALUES (2)");
    ok(s, "SAVEPOINT a");
    fails(s, "ALTER TABLE ae ADD COLUMN n int NOT NULL", "23502", "contains null values");
    ok(s, "ROLLBACK TO a");
    ok(s, "ALTER TABLE ae ADD COLUMN m int DEFAULT 4");
    ok(s, "COMMIT");
    expect(o, "SELECT string_agg(id || ':' || m, ',') FROM ae", "2:4");
    fails(o, "SELECT n FROM ae", "42703", "n");
    qr_sql_session_free(o);
    env_close(&e);
}

/* A REPEATABLE READ block keeps its snapshot of a table whose columns
 * change meanwhile: its own ADD COLUMN, or another session's (which then
 * fails the block's COMMIT: its ADD COLUMN's table changed). */
Test(sql_txn, repeatable_read_snapshot_survives_add_column)
{
    Env e;
    env_open(&e);
    QrSqlSession *s = e.s, *o = second_session(&e), *r = second_session(&e);
    ok(s, "CREATE TABLE rr (id bigint PRIMARY KEY, v int)");
    ok(s, "INSERT INTO rr VALUES (1, 1)");
    ok(s, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    ok(r, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    expect(s, "SELECT count(*) FROM rr", "1");
    expect(r, "SELECT count(*) FROM rr", "1");
    ok(o, "INSERT INTO rr VALUES (2, 2)");
    ok(s, "ALTER TABLE rr ADD COLUMN c int");
    expect(s, "SELECT count(*), count(c) FROM rr", "1|0");
    expect(r, "SELECT count(*) FROM rr", "1");
    ok(o, "ALTER TABLE rr ADD COLUMN d int");
    expect(r, "SELECT count(*) FROM rr", "1");
    expect(s, "SELECT count(*) FROM rr", "1");
    /* another transaction changed the table's definition since */
    fails(s, "COMMIT", "40001", "concurrent update");
    ok(r, "COMMIT");
    expect(r, "SELECT count(*), count(d) FROM rr", "2|0");
    fails(r, "SELECT c FROM rr", "42703", "c");
    qr_sql_session_free(o);
    qr_sql_session_free(r);
    env_close(&e);
}

/* A block's B-tree CREATE INDEX: its index is the block's until COMMIT
 * (other sessions' catalogs do not show it, named or as an unnamed B-tree);
 * a rollback drops the B-tree it made, so no unnamed "<table>_<col>_idx"
 * is left behind either. */
Test(sql_txn, btree_index_is_the_blocks_until_commit)
{
    Env e;
    env_open(&e);
    QrSqlSession *s = e.s, *o = second_session(&e);
    const char *cat = "SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class "
                      "WHERE relname LIKE 'bt\\_%'";
    ok(s, "CREATE TABLE bt (id bigint PRIMARY KEY, v int, tag varchar(8))");
    ok(s, "INSERT INTO bt VALUES (1, 1, 'a'), (2, 2, 'b')");
    ok(s, "BEGIN");
    ok(s, "CREATE INDEX bt_tag ON bt (tag)");
    expect(s, cat, "bt_pkey,bt_tag");
    expect(o, cat, "bt_pkey");
    expect(o, "SELECT id FROM bt WHERE tag = 'b'", "2");
    ok(s, "ROLLBACK");
    expect(s, cat, "bt_pkey");
    expect(o, cat, "bt_pkey");
    /* COMMIT publishes it */
    ok(s, "BEGIN");
    ok(s, "CREATE INDEX ON bt (tag)");
    expect(o, cat, "bt_pkey");
    ok(s, "COMMIT");
    expect(o, cat, "bt_pkey,bt_tag_idx");
    /* ROLLBACK TO a savepoint set before it; a session ending in its block */
    ok(s, "BEGIN");
    ok(s, "SAVEPOINT a");
    ok(s, "CREATE INDEX bt_v ON bt (v)");
    ok(s, "ROLLBACK TO a");
    expect(s, cat, "bt_pkey,bt_tag_idx");
    ok(s, "CREATE INDEX bt_v2 ON bt (v)");
    ok(s, "SAVEPOINT b");
    ok(s, "CREATE INDEX bt_v3 ON bt (v)");
    ok(s, "ROLLBACK TO b"); /* bt_v2 still names the B-tree */
    ok(s, "COMMIT");
    expect(o, cat, "bt_pkey,bt_tag_idx,bt_v2");
    ok(s, "DROP INDEX bt_v2");
    QrSqlSession *x = second_session(&e);
    ok(x, "BEGIN");
    ok(x, "CREATE INDEX bt_vx ON bt (v)");
    expect(o, cat, "bt_pkey,bt_tag_idx");
    qr_sql_session_free(x);
    expect(s, cat, "bt_pkey,bt_tag_idx");
    /* another session named the column's B-tree meanwhile: the rollback
     * leaves it */
    ok(s, "BEGIN");
    ok(s, "CREATE INDEX bt_v ON bt (v)");
    ok(o, "CREATE INDEX bt_vo ON bt (v)");
    ok(s, "ROLLBACK");
    expect(s, cat, "bt_pkey,bt_tag_idx,bt_vo");
    ok(o, "DROP INDEX bt_vo");
    expect(s, cat, "bt_pkey,bt_tag_idx");
    qr_sql_session_free(o);
    env_close(&e);
}

/* CREATE TABLE of a name the block dropped: the new table is the block's
 * (a copy only it reads and writes) while every other session keeps the
 * old one; COMMIT puts it in the old one's place with its rows and drops
 * the old one's sequences; ROLLBACK, ROLLBACK TO and a second DROP take it
 * back.  pg_dump --clean restored with psql --single-transaction does this. */
Test(sql_txn, a_table_dropped_and_made_again_goes_with_the_block)
{
    Env e;
    env_open(&e);
    QrSqlSession *s = e.s, *o = second_session(&e);
    const char *rows = "SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM rt";
    const char *cols = "SELECT count(*) FROM information_schema.columns WHERE table_name = 'rt'";
    const char *seqs = "SELECT string_agg(sequencename, ',' ORDER BY 1) FROM pg_sequences "
                       "WHERE sequencename LIKE 'rt%'";
    ok(s, "CREATE TABLE rt (id serial PRIMARY KEY, v int)");
    ok(s, "INSERT INTO rt (v) VALUES (1), (2)");
    for (int commit = 0; commit < 2; commit++) {
        ok(s, "BEGIN");
        ok(s, "INSERT INTO rt (v) VALUES (3)"); /* into the old table: goes with it */
        ok(s, "DROP TABLE rt");
        expect(s, "SELECT count(*) FROM pg_class WHERE relname = 'rt'", "0");
        ok(s, "CREATE TABLE rt (id serial PRIMARY KEY, v int, w text)");
        ok(s, "INSERT INTO rt (v, w) VALUES (10, 'a')");
        expect(s, rows, "1:10");
        expect(s, cols, "3");
        expect(o, rows, "1:1,2:2");
        expect(o, cols, "2");
        cr_assert_eq(spares_left(&e), 1);
        ok(s, commit ? "COMMIT" : "ROLLBACK");
        cr_assert_eq(spares_left(&e), 0);
        expect(o, rows, commit ? "1:10" : "1:1,2:2");
        expect(o, cols, commit ? "3" : "2");
        expect(o, seqs, commit ? "rt_id_seq1" : "rt_id_seq");
    }
    ok(o, "INSERT INTO rt (v) VALUES (11)"); /* the new table's own sequence */
    expect(o, rows, "1:10,2:11");
    fails(o, "INSERT INTO rt (id, v) VALUES (1, 0)", "23505", "duplicate key");
    /* ROLLBACK TO a savepoint between the DROP and the CREATE: dropped again */
    ok(s, "BEGIN");
    ok(s, "DROP TABLE rt");
    ok(s, "SAVEPOINT a");
    ok(s, "CREATE TABLE rt (k text PRIMARY KEY)");
    ok(s, "INSERT INTO rt VALUES ('x')");
    ok(s, "ROLLBACK TO a");
    expect(s, "SELECT count(*) FROM pg_class WHERE relname = 'rt'", "0");
    ok(s, "ROLLBACK");
    expect(o, rows, "1:10,2:11");
    /* ... and one before the DROP: the table is back as it was */
    ok(s, "BEGIN");
    ok(s, "SAVEPOINT b");
    ok(s, "DROP TABLE rt");
    ok(s, "CREATE TABLE rt (k text PRIMARY KEY)");
    ok(s, "ROLLBACK TO b");
    expect(s, rows, "1:10,2:11");
    ok(s, "COMMIT");
    expect(o, rows, "1:10,2:11");
    expect(o, seqs, "rt_id_seq1");
    /* made again without a key, loaded, keyed: a restore of pg_dump --clean in
     * one transaction */
    ok(s, "BEGIN");
    ok(s, "DROP TABLE IF EXISTS rt");
    ok(s, "CREATE TABLE rt (id int, v int)");
    ok(s, "INSERT INTO rt VALUES (7, 70), (8, 80)");
    ok(s, "ALTER TABLE rt ADD PRIMARY KEY (id)");
    expect(s, rows, "7:70,8:80");
    expect(o, rows, "1:10,2:11");
    ok(s, "COMMIT");
    cr_assert_eq(spares_left(&e), 0);
    expect(o, rows, "7:70,8:80");
    expect(o, seqs, "");
    fails(o, "INSERT INTO rt VALUES (7, 0)", "23505", "duplicate key");
    /* dropped a second time in the block: gone at COMMIT, sequences too */
    ok(s, "BEGIN");
    ok(s, "DROP TABLE rt");
    ok(s, "CREATE TABLE rt (id serial PRIMARY KEY, v int)");
    ok(s, "INSERT INTO rt (v) VALUES (1)");
    ok(s, "DROP TABLE rt");
    ok(s, "COMMIT");
    cr_assert_eq(spares_left(&e), 0);
    fails(o, "SELECT * FROM rt", "42P01", "rt");
    expect(o, seqs, "");
    qr_sql_session_free(o);
    env_close(&e);
}

/* ALTER TABLE ... DROP COLUMN rebuilds the table without it: in a block the
 * other session keeps the column (and its index) until COMMIT, and a write
 * of its own to the table meanwhile fails the block's COMMIT (40001). */
Test(sql_txn, drop_column_goes_with_the_block)
{
    Env e;
    env_open(&e);
    QrSqlSession *s = e.s, *o = second_session(&e);
    const char *cols = "SELECT string_agg(column_name, ',' ORDER BY ordinal_position) "
                       "FROM information_schema.columns WHERE table_name = 'dcol'";
    ok(s, "CREATE TABLE dcol (id int PRIMARY KEY, a text, b varchar(8))");
    ok(s, "CREATE INDEX dcol_b ON dcol (b)");
    ok(s, "INSERT INTO dcol VALUES (1, 'red fox', 'x')");
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE dcol DROP COLUMN b");
    expect(s, cols, "id,a");
    expect(o, cols, "id,a,b");
    expect(o, "SELECT b FROM dcol", "x");
    expect(s, "SELECT id FROM dcol WHERE a @@ 'fox'", "1");
    ok(s, "COMMIT");
    cr_assert_eq(spares_left(&e), 0);
    expect(o, cols, "id,a");
    fails(o, "SELECT b FROM dcol", "42703", "b");
    expect(o, "SELECT count(*) FROM pg_class WHERE relname = 'dcol_b'", "0");
    expect(o, "SELECT id FROM dcol WHERE a @@ 'fox'", "1");
    /* first committer wins */
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE dcol DROP COLUMN a");
    ok(o, "INSERT INTO dcol VALUES (2, 'blue')");
    fails(s, "COMMIT", "40001", "concurrent update");
    cr_assert_eq(spares_left(&e), 0);
    expect(o, cols, "id,a");
    expect(o, "SELECT string_agg(a, ',' ORDER BY id) FROM dcol", "red fox,blue");
    fails(o, "ALTER TABLE dcol DROP COLUMN id", "0A000", "primary key");
    qr_sql_session_free(o);
    env_close(&e);
}

/* ALTER COLUMN ... TYPE: between types stored alike only the definition
 * changes (staged: the block's until COMMIT), once the rows fit; between an
 * analyzed text and a plain string the table is rebuilt. */
Test(sql_txn, alter_column_type_goes_with_the_block)
{
    Env e;
    env_open(&e);
    QrSqlSession *s = e.s, *o = second_session(&e);
    const char *len = "SELECT character_maximum_length FROM information_schema.columns "
                      "WHERE table_name = 'at' AND column_name = 'name'";
    ok(s, "CREATE TABLE at (id int PRIMARY KEY, name varchar(6), n int, body text)");
    ok(s, "INSERT INTO at VALUES (1, 'abcdef', 40000, 'red foxes'), (2, 'ab', 5, 'blue')");
    fails(s, "ALTER TABLE at ALTER COLUMN name TYPE varchar(4)", "22001", "varying(4)");
    fails(s, "ALTER TABLE at ALTER COLUMN n TYPE smallint", "22003", "smallint out of range");
    fails(s, "ALTER TABLE at ALTER COLUMN n TYPE text", "0A000", "not supported");
    fails(s, "ALTER TABLE at ALTER COLUMN n TYPE int USING n + 1", "0A000", "USING");
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE at ALTER COLUMN name TYPE varchar(20) USING name::varchar(20)");
    ok(s, "INSERT INTO at VALUES (3, 'abcdefghijkl', 1, 'x')");
    expect(s, len, "20");
    expect(o, len, "6");
    fails(o, "INSERT INTO at VALUES (4, 'abcdefghijkl', 1, 'x')", "22001", "varying(6)");
    ok(s, "ROLLBACK");
    expect(o, len, "6");
    expect(o, "SELECT count(*) FROM at", "2");
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE at ALTER COLUMN n TYPE bigint");
    ok(s, "ALTER TABLE at ALTER COLUMN body TYPE varchar(20)"); /* a rebuild: not analyzed */
    expect(s, "SELECT id FROM at WHERE body = 'blue'", "2");
    expect(o, "SELECT id FROM at WHERE body @@ 'fox'", "1"); /* still analyzed for it */
    ok(s, "COMMIT");
    fails(o, "SELECT id FROM at WHERE body @@ 'fox'", "22023", "not a full-text field");
    cr_assert_eq(spares_left(&e), 0);
    expect(o, "SELECT data_type FROM information_schema.columns WHERE table_name = 'at' "
              "AND column_name = 'n'",
           "bigint");
    expect(o, "SELECT id FROM at WHERE body = 'blue'", "2");
    ok(o, "ALTER TABLE at ALTER COLUMN name TYPE text");
    expect(o, "SELECT id FROM at WHERE name @@ 'abcdef'", "1");
    qr_sql_session_free(o);
    env_close(&e);
}

/* ALTER TABLE ... RENAME COLUMN rebuilds the table with the column renamed
 * in every row (the key too): the block's until COMMIT. */
Test(sql_txn, rename_column_goes_with_the_block)
{
    Env e;
    env_open(&e);
    QrSqlSession *s = e.s, *o = second_session(&e);
    const char *cols = "SELECT string_agg(column_name, ',' ORDER BY ordinal_position) "
                       "FROM information_schema.columns WHERE table_name = 'rc'";
    ok(s, "CREATE TABLE rc (id int PRIMARY KEY, a varchar(5), body text)");
    ok(s, "CREATE INDEX rc_a ON rc (a)");
    ok(s, "INSERT INTO rc VALUES (1, 'x', 'red foxes'), (2, 'y', 'blue')");
    ok(s, "BEGIN");
    ok(s, "ALTER TABLE rc RENAME COLUMN a TO b");
    ok(s, "ALTER TABLE rc RENAME COLUMN id TO k");
    expect(s, cols, "k,b,body");
    expect(s, "SELECT k FROM rc WHERE b = 'y'", "2");
    expect(o, cols, "id,a,body");
    expect(o, "SELECT id FROM rc WHERE a = 'y'", "2");
    ok(s, "COMMIT");
    cr_assert_eq(spares_left(&e), 0);
    expect(o, cols, "k,b,body");
    expect(o, "SELECT k FROM rc WHERE b = 'y' AND body @@ 'blue'", "2");
    expect(o, "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
              "WHERE c.relname = 'rc_a'",
           "1");
    fails(o, "INSERT INTO rc VALUES (1, 'z', 'dup')", "23505", "duplicate key");
    fails(o, "ALTER TABLE rc RENAME COLUMN b TO body", "42701", "already exists");
    fails(o, "ALTER TABLE rc RENAME COLUMN nope TO x", "42703", "does not exist");
    fails(o, "ALTER TABLE rc RENAME TO rc2", "0A000", "columns only");
    qr_sql_session_free(o);
    env_close(&e);
}

/* REPEATABLE READ: a rebuild copies the table as committed now, so a block
 * whose snapshot of it is older is 40001 (it would see rows its snapshot
 * does not have); one whose snapshot is current rebuilds. */
Test(sql_txn, repeatable_read_rebuild_needs_a_current_snapshot)
{
    Env e;
    env_open(&e);
    QrSqlSession *s = e.s, *o = second_session(&e);
    ok(s, "CREATE TABLE rr (a int, b varchar(8))");
    ok(s, "INSERT INTO rr VALUES (1, 'x')");
    ok(s, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    expect(s, "SELECT count(*) FROM rr", "1");
    ok(o, "INSERT INTO rr VALUES (2, 'y')");
    fails(s, "ALTER TABLE rr ADD PRIMARY KEY (a)", "40001", "concurrent update");
    ok(s, "ROLLBACK");
    cr_assert_eq(spares_left(&e), 0);
    ok(s, "BEGIN ISOLATION LEVEL REPEATABLE READ");
    expect(s, "SELECT count(*) FROM rr", "2");
    ok(s, "ALTER TABLE rr ADD PRIMARY KEY (a)");
    expect(s, "SELECT string_agg(b, ',' ORDER BY a) FROM rr", "x,y");
    ok(s, "COMMIT");
    fails(o, "INSERT INTO rr VALUES (2, 'z')", "23505", "duplicate key");
    qr_sql_session_free(o);
    env_close(&e);
}
