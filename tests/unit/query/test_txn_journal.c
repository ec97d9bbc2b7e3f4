/*
 * test_txn_journal.c — atomic commit across tables (query/txn_journal.c):
 * what opening the data directory does with the journal of a multi-table
 * transaction that a crash left behind, cut at every byte.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#include "engine_util.h"
#include "sql_test_env.h"
#include "query/sequence.h"
#include "query/sql.h"
#include "query/sql_w.h"
#include "store/util.h"

static void reopen(Env *e)
{
    qr_sql_session_free(e->s);
    qr_db_close(e->db);
    QrError err;
    cr_assert_eq(env_db_open(e, &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_sql_session_new(e->db, &e->s, &err), QR_OK, "%s", err.message);
}

static char *rows(Env *e, const char *table)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT id, v FROM %s ORDER BY id", table);
    QrSqlResult *r = NULL;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_exec(e->s, sql, strlen(sql), &r, &err), QR_OK, "%s", err.message);
    char *t = env_result_text(r);
    qr_sql_result_free(r);
    return t;
}

static void exec_ok(Env *e, const char *sql)
{
    QrSqlResult *r = NULL;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_exec(e->s, sql, strlen(sql), &r, &err), QR_OK, "%s: %s", sql,
                 err.message);
    qr_sql_result_free(r);
}

/* The bytes of the journal txnj_write makes of ops and ddl (*len of them);
 * the file itself is removed, so the directory holds no journal. */
static uint8_t *journal_image(Env *e, const TxnOp *ops, int n_ops, const TxnjItem *ddl,
                              int n_ddl, size_t *len)
{
    char path[4400];
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(txnj_write(e->db, ops, n_ops, ddl, n_ddl, path, sizeof path, &err), QR_OK,
                 "%s", err.message);
    uint8_t *data;
    cr_assert_eq(qr_file_read_all(path, &data, len, &err), QR_OK, "%s", err.message);
    cr_assert_eq(unlink(path), 0);
    return data;
}

/* The journal of: INSERT a 1, b 2, DELETE a 7, a 1 again (v 5) -> bytes. */
static uint8_t *journal_bytes(Env *e, size_t *len)
{
    TxnOp ops[4] = {
        {.table = "a", .key = "1", .doc = "{\"id\":1,\"v\":1}"},
        {.table = "b", .key = "2", .doc = "{\"id\":2,\"v\":2}"},
        {.table = "a", .key = "7", .is_delete = true},
        {.table = "a", .key = "1", .doc = "{\"id\":1,\"v\":5}"},
    };
    for (int i = 0; i < 4; i++)
        ops[i].doc_len = ops[i].doc ? strlen(ops[i].doc) : 0;
    return journal_image(e, ops, 4, NULL, 0, len);
}

static void place(Env *e, const char *name, const uint8_t *data, size_t len)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/txn/%s", e->dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* The journal cut at `cut` bytes: the open fails naming it (never applied in
 * part); with the file removed, the directory opens again. */
static void refused_whole(Env *e, const uint8_t *j, size_t cut)
{
    place(e, "0000000000000001.qtxj", j, cut);
    qr_sql_session_free(e->s);
    qr_db_close(e->db);
    QrError err;
    cr_assert_eq(env_db_open(e, &err), QR_ECORRUPT, "cut at %zu", cut);
    cr_assert(strstr(err.message, "transaction journal"), "%s", err.message);
    char path[4400];
    snprintf(path, sizeof path, "%s/txn/0000000000000001.qtxj", e->dir);
    unlink(path);
    cr_assert_eq(env_db_open(e, &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_sql_session_new(e->db, &e->s, &err), QR_OK);
}

Test(txn_journal, recovery_applies_whole_transactions_only, .timeout = 240)
{
    Env e;
    env_open(&e);
    exec_ok(&e, "CREATE TABLE a (id bigint PRIMARY KEY, v bigint)");
    exec_ok(&e, "CREATE TABLE b (id bigint PRIMARY KEY, v bigint)");
    exec_ok(&e, "INSERT INTO a VALUES (7, 7)");
    size_t len;
    uint8_t *j = journal_bytes(&e, &len);
    /* a crash before the rename: a ".tmp" of any length applies nothing */
    for (size_t cut = 0; cut <= len; cut++) {
        place(&e, "0000000000000001.qtxj.tmp", j, cut);
        reopen(&e);
        char *ra = rows(&e, "a"), *rb = rows(&e, "b");
        cr_assert_str_eq(ra, "7|7\n", "cut at %zu", cut);
        cr_assert_str_eq(rb, "", "cut at %zu", cut);
        free(ra);
        free(rb);
    }
    /* a damaged journal is never applied in part: the open fails naming it */
    for (size_t cut = 0; cut < len; cut += 1) {
        refused_whole(&e, j, cut);
        char *ra = rows(&e, "a");
        cr_assert_str_eq(ra, "7|7\n", "cut at %zu", cut);
        free(ra);
    }
    /* the whole journal, with table a's part already committed before the
     * crash: applied in full, once */
    exec_ok(&e, "BEGIN");
    exec_ok(&e, "INSERT INTO a VALUES (1, 1)");
    exec_ok(&e, "DELETE FROM a WHERE id = 7");
    exec_ok(&e, "COMMIT");
    place(&e, "0000000000000001.qtxj", j, len);
    reopen(&e);
    char *ra = rows(&e, "a"), *rb = rows(&e, "b");
    cr_assert_str_eq(ra, "1|5\n");
    cr_assert_str_eq(rb, "2|2\n");
    free(ra);
    free(rb);
    char path[4400];
    snprintf(path, sizeof path, "%s/txn/0000000000000001.qtxj", e.dir);
    cr_assert(!qr_path_exists(path), "the journal is removed once applied");
    free(j);
    env_close(&e);
}

/* A multi-table COMMIT leaves no journal behind, and its writes are all
 * there after the data directory is opened again. */
Test(txn_journal, multi_table_commit_cleans_up)
{
    Env e;
    env_open(&e);
    exec_ok(&e, "CREATE TABLE a (id bigint PRIMARY KEY, v bigint)");
    exec_ok(&e, "CREATE TABLE b (id bigint PRIMARY KEY, v bigint)");
    exec_ok(&e, "BEGIN");
    exec_ok(&e, "INSERT INTO a VALUES (1, 10)");
    exec_ok(&e, "INSERT INTO b VALUES (2, 20)");
    exec_ok(&e, "COMMIT");
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/txn", e.dir);
    int n = 0;
    DIR *d = opendir(dir);
    cr_assert(d, "the multi-table commit went through the journal directory");
    for (struct dirent *de; (de = readdir(d));)
        n += de->d_name[0] != '.';
    closedir(d);
    cr_assert_eq(n, 0, "no journal left");
    reopen(&e);
    char *ra = rows(&e, "a"), *rb = rows(&e, "b");
    cr_assert_str_eq(ra, "1|10\n");
    cr_assert_str_eq(rb, "2|20\n");
    free(ra);
    free(rb);
    env_close(&e);
}

/* A block's DDL is journaled with its writes (version 2): a crash after the
 * journal's rename completes it at the next open -- the table's new
 * sql.json (a NOT NULL set, an index name gone), the B-tree dropped, the
 * dropped table gone with the sequences it owns -- and applies the writes;
 * cut short, it is refused whole and all is as it was. */
Test(txn_journal, journaled_ddl_is_completed_at_open, .timeout = 120)
{
    Env e;
    env_open(&e);
    exec_ok(&e, "CREATE TABLE a (id bigint PRIMARY KEY, v bigint, tag varchar(8))");
    exec_ok(&e, "CREATE INDEX a_tag ON a (tag)");
    exec_ok(&e, "CREATE TABLE gone (id serial PRIMARY KEY, v bigint)");
    exec_ok(&e, "INSERT INTO gone (v) VALUES (1)");
    TxnOp ops[1] = {{.table = "a", .key = "3", .doc = "{\"id\":3,\"v\":30}"}};
    ops[0].doc_len = strlen(ops[0].doc);
    cJSON *meta = sqlw_meta_load_db(e.db, "a");
    cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(meta, "columns"), "v");
    cr_assert(v && cJSON_GetObjectItem(cJSON_GetObjectItem(meta, "indexes"), "a_tag"));
    cJSON_AddTrueToObject(v, "not_null");
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(meta, "indexes"), "a_tag");
    char *mt = cJSON_PrintUnformatted(meta);
    cJSON_Delete(meta);
    TxnjItem ddl[3] = {
        {.kind = TXNJ_META, .table = "a", .doc = mt, .doc_len = strlen(mt)},
        {.kind = TXNJ_DROP_BTREE, .table = "a", .key = "tag"},
        {.kind = TXNJ_DROP_TABLE, .table = "gone"},
    };
    size_t len;
    uint8_t *j = journal_image(&e, ops, 1, ddl, 3, &len);
    cJSON_free(mt);
    QrError err;
    for (size_t cut = 0; cut < len; cut += 7) {
        refused_whole(&e, j, cut);
        char *rg = rows(&e, "gone");
        cr_assert_str_eq(rg, "1|1\n", "cut at %zu", cut);
        free(rg);
    }
    exec_ok(&e, "INSERT INTO a VALUES (4, NULL, 'x')"); /* v may be NULL before */
    place(&e, "0000000000000001.qtxj", j, len);
    reopen(&e);
    char *ra = rows(&e, "a");
    cr_assert_str_eq(ra, "3|30\n4|\n");
    free(ra);
    const char *bad[] = {"SELECT * FROM gone", "SELECT nextval('gone_id_seq')",
                         "INSERT INTO a VALUES (5, NULL, 'y')"};
    const char *state[] = {"42P01", "42P01", "23502"};
    for (int i = 0; i < 3; i++) {
        QrSqlResult *r = NULL;
        qr_error_clear(&err);
        cr_assert_neq(qr_sql_exec(e.s, bad[i], strlen(bad[i]), &r, &err), QR_OK, "%s", bad[i]);
        cr_assert_str_eq(qr_error_sqlstate(&err), state[i], "%s: %s", bad[i], err.message);
        qr_sql_result_free(r);
    }
    QrTable *t;
    cr_assert_eq(qr_table_get(e.db, "a", &t, &err), QR_OK);
    const QrSchema *sc = qr_table_schema(t);
    cr_assert(!sc->fields[schema_field_index(sc, "tag")].btree, "the B-tree was dropped");
    free(j);
    env_close(&e);
}

/* The one answer of sql in session s, as text (free() it). */
static char *answer(QrSqlSession *s, const char *sql)
{
    QrSqlResult *r = NULL;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_exec(s, sql, strlen(sql), &r, &err), QR_OK, "%s: %s", sql, err.message);
    char *t = env_result_text(r);
    qr_sql_result_free(r);
    return t;
}

static void answers(QrSqlSession *s, const char *sql, const char *want, size_t cut)
{
    char *t = answer(s, sql);
    cr_assert_str_eq(t, want, "%s (cut at %zu)", sql, cut);
    free(t);
}

/* ADD COLUMN in a block on an older table commits with the block's rows:
 * the storage field exists from the ALTER on, but no session shows it until
 * the sql.json the COMMIT journals names it.  A crash before the COMMIT (the
 * block's session gone, its journal never written), or a journal cut short,
 * leaves the column unshown and the rows out; the whole journal, replayed
 * at the next open, brings both. */
Test(txn_journal, added_column_commits_with_its_rows, .timeout = 120)
{
    Env e;
    env_open(&e);
    exec_ok(&e, "CREATE TABLE a (id bigint PRIMARY KEY, v bigint)");
    exec_ok(&e, "INSERT INTO a VALUES (1, 10)");
    QrSqlSession *x;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_new(e.db, &x, &err), QR_OK, "%s", err.message);
    free(answer(x, "BEGIN"));
    free(answer(x, "ALTER TABLE a ADD COLUMN c int"));
    free(answer(x, "INSERT INTO a VALUES (2, 20, 5)"));
    answers(x, "SELECT id, v, c FROM a ORDER BY id", "1|10|\n2|20|5\n", 0);
    char *mt = cJSON_PrintUnformatted(sqld_meta_staged(x, "a"));
    cr_assert(mt);
    qr_sql_session_free(x); /* the crash: nothing of the block committed */
    TxnOp ops[1] = {{.table = "a", .key = "2", .doc = "{\"id\":2,\"v\":20,\"c\":5}"}};
    ops[0].doc_len = strlen(ops[0].doc);
    TxnjItem ddl[1] = {{.kind = TXNJ_META, .table = "a", .doc = mt, .doc_len = strlen(mt)}};
    size_t len;
    uint8_t *j = journal_image(&e, ops, 1, ddl, 1, &len);
    cJSON_free(mt);
    const char *has_c = "SELECT count(*) FROM information_schema.columns "
                        "WHERE table_name = 'a' AND column_name = 'c'";
    reopen(&e);
    answers(e.s, has_c, "0\n", 0);
    answers(e.s, "SELECT * FROM a", "1|10\n", 0);
    for (size_t cut = 0; cut < len; cut += 5) {
        refused_whole(&e, j, cut);
        answers(e.s, has_c, "0\n", cut);
        answers(e.s, "SELECT * FROM a", "1|10\n", cut);
    }
    place(&e, "0000000000000001.qtxj", j, len);
    reopen(&e);
    answers(e.s, "SELECT id, v, c FROM a ORDER BY id", "1|10|\n2|20|5\n", len);
    answers(e.s, "SELECT * FROM a WHERE c = 5", "2|20|5\n", len);
    free(j);
    env_close(&e);
}

/* A crash image of a directory tree: rm -rf to, then cp -a from to. */
static void copy_tree(const char *from, const char *to)
{
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", to, from, to);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* What a block that rekeyed table k left when the process died at its
 * COMMIT: the spare it wrote (a crash image, kept at saved), the write it
 * buffered and the metadata it staged. */
typedef struct Rekeyed {
    char id[QR_NAME_MAX + 1];
    char saved[4200];
    TxnOp op;
    char *meta;
    char *seqs; /* the row id's sequence, which goes with the old table */
} Rekeyed;

static void rekey_in_a_block(Env *e, Rekeyed *rk)
{
    exec_ok(e, "CREATE TABLE k (a int, b varchar(8))");
    exec_ok(e, "INSERT INTO k VALUES (1, 'x'), (2, 'y')");
    QrSqlSession *x;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_new(e->db, &x, &err), QR_OK, "%s", err.message);
    free(answer(x, "BEGIN"));
    free(answer(x, "ALTER TABLE k ADD PRIMARY KEY (a)"));
    free(answer(x, "INSERT INTO k VALUES (3, 'w')"));
    SqluState *st = x->u_state;
    cr_assert_eq(st->n_rebuilds, 1);
    cr_assert_eq(st->n_ops, 1);
    snprintf(rk->id, sizeof rk->id, "%s", st->rebuilds[0].id);
    rk->op = (TxnOp){.table = "k", .key = strdup(st->ops[0].key), .doc = strdup(st->ops[0].doc),
                     .doc_len = st->ops[0].doc_len};
    rk->meta = cJSON_PrintUnformatted(sqld_meta_staged(x, "k"));
    cr_assert(rk->meta);
    cr_assert(st->rebuilds[0].drop_seqs && st->rebuilds[0].drop_seqs[0]);
    rk->seqs = strdup(st->rebuilds[0].drop_seqs);
    char spare[4200];
    qr_spare_path(e->db, rk->id, spare, sizeof spare);
    snprintf(rk->saved, sizeof rk->saved, "%s/saved-spare", e->dir);
    copy_tree(spare, rk->saved);
    qr_sql_session_free(x); /* the crash: the block's copy goes */
    cr_assert(!qr_path_exists(spare));
}

/* The journal of that COMMIT, naming the spare as it is on disk now. */
static uint8_t *rekey_journal(Env *e, const Rekeyed *rk, size_t *len)
{
    char ident[32];
    snprintf(ident, sizeof ident, "%llu", (unsigned long long)qr_spare_ident(e->db, rk->id));
    TxnjItem ddl[3] = {
        {.kind = TXNJ_META, .table = "k", .doc = rk->meta, .doc_len = strlen(rk->meta)},
        {.kind = TXNJ_SWAP, .table = "k", .key = rk->id, .doc = ident, .doc_len = strlen(ident)},
        {.kind = TXNJ_DROP_SEQS, .table = "k", .doc = rk->seqs, .doc_len = strlen(rk->seqs)},
    };
    return journal_image(e, &rk->op, 1, ddl, 3, len);
}

static void restore_spare(Env *e, const Rekeyed *rk)
{
    char spares[4200], spare[4200];
    snprintf(spares, sizeof spares, "%s/spares", e->dir);
    qr_mkdir_p(spares, NULL);
    qr_spare_path(e->db, rk->id, spare, sizeof spare);
    copy_tree(rk->saved, spare);
}

static void rekey_free(Rekeyed *rk)
{
    free(rk->op.key);
    free(rk->op.doc);
    free(rk->seqs);
    cJSON_free(rk->meta);
}

static const char *K_ROWS = "SELECT string_agg(a || ':' || b, ',' ORDER BY a) FROM k";
static const char *K_PK = "SELECT count(*) FROM pg_constraint WHERE conrelid = 'k'::regclass";

/* Does k still own a sequence (its hidden row id's)? */
static bool k_owns_a_sequence(Env *e)
{
    char *names;
    QrError err;
    cr_assert_eq(seq_owned_names(qr_db_dir(e->db), "k", &names, &err), QR_OK);
    bool any = names[0] != 0;
    qr_free(names);
    return any;
}

/* ALTER TABLE ADD PRIMARY KEY in a block on an older table: the COMMIT's
 * journal names the exchange of the table with the block's copy.  Cut
 * anywhere, it is refused whole and the table stays as it was (the copy is
 * removed); whole, the open exchanges them -- or, when the crash came after
 * the exchange, sees the copy already in place -- then applies the block's
 * write and metadata. */
Test(txn_journal, rebuilt_table_is_exchanged_whole_or_not_at_all, .timeout = 240)
{
    for (int exchanged = 0; exchanged < 2; exchanged++) {
        Env e;
        env_open(&e);
        Rekeyed rk;
        rekey_in_a_block(&e, &rk);
        restore_spare(&e, &rk);
        size_t len;
        uint8_t *j = rekey_journal(&e, &rk, &len);
        for (size_t cut = exchanged ? len : 0; cut < len; cut += 7) {
            restore_spare(&e, &rk);
            refused_whole(&e, j, cut);
            answers(e.s, K_ROWS, "1:x,2:y\n", cut);
            answers(e.s, K_PK, "0\n", cut);
            cr_assert(k_owns_a_sequence(&e), "cut at %zu", cut);
            char spare[4200];
            qr_spare_path(e.db, rk.id, spare, sizeof spare);
            cr_assert(!qr_path_exists(spare), "a spare no journal names is removed (cut %zu)",
                      cut);
        }
        restore_spare(&e, &rk);
        free(j);
        j = rekey_journal(&e, &rk, &len);
        if (exchanged) { /* the crash came after the exchange: the spare holds the old table */
            QrError err;
            cr_assert_eq(qr_spare_swap(e.db, "k", rk.id, &err), QR_OK, "%s", err.message);
        }
        place(&e, "0000000000000001.qtxj", j, len);
        reopen(&e);
        answers(e.s, K_ROWS, "1:x,2:y,3:w\n", len);
        answers(e.s, K_PK, "1\n", len);
        cr_assert(!k_owns_a_sequence(&e), "the row id's sequence went with the old table");
        QrSqlResult *r = NULL;
        QrError err;
        qr_error_clear(&err);
        const char *dup = "INSERT INTO k VALUES (2, 'd')";
        cr_assert_neq(qr_sql_exec(e.s, dup, strlen(dup), &r, &err), QR_OK);
        cr_assert_str_eq(qr_error_sqlstate(&err), "23505", "%s", err.message);
        char spare[4200];
        qr_spare_path(e.db, rk.id, spare, sizeof spare);
        cr_assert(!qr_path_exists(spare), "the old table is removed");
        free(j);
        rekey_free(&rk);
        env_close(&e);
    }
}
