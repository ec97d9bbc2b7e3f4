/*
 * sql_txn.c — transactions for SQL sessions: the write buffer, BEGIN /
 * COMMIT / ROLLBACK, and applying a batch of writes.
 *
 * Layer: query/.  Calls quarry.h (QrBatch writes, qr_get).
 *
 * Every INSERT, UPDATE, DELETE, COPY and TRUNCATE buffers its writes in the
 * session (TxnOp), each op's bytes taken from the process-wide memory
 * budget until it is applied or discarded (53200 when they do not fit).  Outside a block a statement's writes are applied when
 * it ends (so a statement is all or nothing: a bad row in a 1,000-row
 * INSERT writes nothing); inside BEGIN ... COMMIT they wait for COMMIT.
 *
 * Guarantees (docs/sql-writes.md "Transactions"):
 *   - Atomic visibility per table: all of a transaction's writes to a table
 *     go to a batch of their own (QrBatch) and become durable and visible in
 *     its one commit; readers never see part of them, and no other writer's
 *     commit can publish them early.
 *   - Across tables the commits follow one another under the process-wide
 *     apply lock, so no other SQL transaction interleaves, but a reader may
 *     see table A's part before table B's, and a crash between the two
 *     table commits keeps A's part only.
 *   - Isolation: sql_isolation.c (levels, snapshots); every read inside a
 *     block also sees the block's own buffered writes (sql_own_writes.c for
 *     scans, txn_find for the write path's key lookups).
 *   - DDL of a block (sql_txn_ddl.c): the tables it drops are claimed
 *     before the lock, its changed table definitions checked under it
 *     (40001), and both journaled with the writes and published after them
 *     in the same apply, so they commit together.
 *   - A plain INSERT's key is checked again at apply time under the lock:
 *     a key committed meanwhile by another session fails the whole COMMIT
 *     with 23505 and applies nothing.  Writers that bypass SQL (HTTP, import)
 *     do not take the lock.
 */
#include "query/sql_int.h"
#include "query/sql_w.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t apply_lock = PTHREAD_MUTEX_INITIALIZER;

void txn_lock(void) { pthread_mutex_lock(&apply_lock); }
void txn_unlock(void) { pthread_mutex_unlock(&apply_lock); }

SqluState *sqlu_state(QrSqlSession *s, QrError *err)
{
    if (!s->u_state) {
        s->u_state = qr_calloc(1, sizeof(SqluState));
        if (!s->u_state)
            qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    return s->u_state;
}

static uint64_t op_hash(const char *table, const char *key)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = table; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
    for (const char *p = key; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h;
}

/* The slot of (table, key): its entry, or the empty slot where it goes. */
static int *slot_of(const SqluState *st, uint64_t h, const char *table, const char *key)
{
    uint32_t mask = (uint32_t)st->n_slots - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        int *sl = &st->slots[i];
        if (*sl < 0)
            return sl;
        const TxnOp *o = &st->ops[*sl];
        if (o->hash == h && !strcmp(o->key, key) && !strcmp(o->table, table))
            return sl;
    }
}

/* Rebuild the slots for ops[0..n_ops) (after growth or a truncation). */
static int rehash(SqluState *st, int want_slots)
{
    int *slots = qr_malloc((size_t)want_slots * sizeof *slots);
    if (!slots)
        return QR_ENOMEM;
    qr_free(st->slots);
    st->slots = slots;
    st->n_slots = want_slots;
    for (int i = 0; i < want_slots; i++)
        slots[i] = -1;
    for (int i = 0; i < st->n_ops; i++)
        *slot_of(st, st->ops[i].hash, st->ops[i].table, st->ops[i].key) = i;
    return QR_OK;
}

/* The bytes an op holds, as taken from the memory budget (store/mem.h):
 * a COPY or a transaction block keeps every row here until it ends. */
static size_t op_bytes(const TxnOp *o)
{
    return sizeof *o + strlen(o->key) + 1 + (o->doc ? o->doc_len + 1 : 0);
}

static int push_op(SqluState *st, TxnOp *op, QrError *err)
{
    if (!qr_mem_budget_take(op_bytes(op))) {
        size_t lim = qr_mem_budget_limit(), used = qr_mem_budget_used();
        qr_free(op->key);
        qr_free(op->doc);
        qr_error_set(err, QR_ENOMEM, "out of memory for the writes of this transaction: the "
                                     "server's memory limit is reached");
        qr_error_detail(err, "a transaction's rows wait in memory until it ends; running "
                             "queries and transactions hold %zu MiB of the limit of %zu MiB",
                        used >> 20, lim >> 20);
        qr_error_hint(err, "write in smaller transactions (COPY or INSERT in parts), or raise "
                           "the server's mem_limit_bytes (quarry serve --mem-limit)");
        return QR_ENOMEM;
    }
    op->hash = op_hash(op->table, op->key);
    if (2 * (st->n_ops + 1) >= st->n_slots &&
        rehash(st, st->n_slots ? st->n_slots * 2 : 256) != QR_OK)
        goto oom;
    if (st->n_ops == st->cap_ops) {
        int cap = st->cap_ops ? st->cap_ops * 2 : 64;
        TxnOp *o = qr_realloc(st->ops, (size_t)cap * sizeof *o);
        if (!o)
            goto oom;
        st->ops = o;
        st->cap_ops = cap;
    }
    int *sl = slot_of(st, op->hash, op->table, op->key);
    op->first = *sl < 0;
    *sl = st->n_ops;
    st->ops_gen++;
    st->ops[st->n_ops++] = *op;
    return QR_OK;
oom:
    qr_mem_budget_give(op_bytes(op));
    qr_free(op->key);
    qr_free(op->doc);
    return qr_error_set(err, QR_ENOMEM, "out of memory buffering a write");
}

int txn_put(SqluState *st, const char *table, const char *key, const char *doc, size_t doc_len,
            bool must_be_new, QrError *err)
{
    TxnOp op = {.must_be_new = must_be_new, .doc_len = doc_len};
    snprintf(op.table, sizeof op.table, "%s", table);
    op.key = qr_strdup(key);
    op.doc = qr_strndup(doc, doc_len);
    if (!op.key || !op.doc) {
        qr_free(op.key);
        qr_free(op.doc);
        return qr_error_set(err, QR_ENOMEM, "out of memory buffering a write");
    }
    return push_op(st, &op, err);
}

int txn_delete(SqluState *st, const char *table, const char *key, QrError *err)
{
    TxnOp op = {.is_delete = true};
    snprintf(op.table, sizeof op.table, "%s", table);
    op.key = qr_strdup(key);
    if (!op.key)
        return qr_error_set(err, QR_ENOMEM, "out of memory buffering a write");
    return push_op(st, &op, err);
}

const TxnOp *txn_find(const SqluState *st, const char *table, const char *key)
{
    if (!st->n_ops)
        return NULL;
    int i = *slot_of(st, op_hash(table, key), table, key);
    return i < 0 ? NULL : &st->ops[i];
}

static void discard_from(SqluState *st, int from);

/* ops changed under the slots, which may name dropped ops: rebuild them
 * (cannot fail at the same size unless memory is gone; then forget the
 * index and the ops) */
static void reindex(SqluState *st)
{
    st->ops_gen++;
    if (st->n_slots && rehash(st, st->n_slots) != QR_OK) {
        qr_free(st->slots);
        st->slots = NULL;
        st->n_slots = 0;
        discard_from(st, 0);
    }
}

static void discard_from(SqluState *st, int from)
{
    for (int i = from; i < st->n_ops; i++) {
        qr_mem_budget_give(op_bytes(&st->ops[i]));
        qr_free(st->ops[i].key);
        qr_free(st->ops[i].doc);
    }
    if (from < st->n_ops) {
        st->n_ops = from;
        reindex(st);
    }
}

void txn_discard(SqluState *st)
{
    discard_from(st, 0);
    st->stmt_start = 0;
}

/* Drop the ops of `table` (NULL: the absorbed ones), keeping the others in
 * order. */
static void discard_some(SqluState *st, const char *table)
{
    int k = 0;
    for (int i = 0; i < st->n_ops; i++) {
        const TxnOp *o = &st->ops[i];
        if (table ? strcmp(o->table, table) != 0 : !o->absorbed) {
            st->ops[k++] = st->ops[i];
            continue;
        }
        qr_mem_budget_give(op_bytes(o));
        qr_free(o->key);
        qr_free(o->doc);
    }
    if (k == st->n_ops)
        return;
    st->n_ops = k;
    st->stmt_start = st->stmt_start > k ? k : st->stmt_start;
    reindex(st);
}

void txn_discard_table(SqluState *st, const char *table) { discard_some(st, table); }

/* An absorbed op's hash differs from its (table, key)'s, so that lookups of
 * the key and the ops after it never meet it. */
static uint64_t absorbed_hash(const TxnOp *o) { return op_hash(o->table, o->key) ^ 0x5bd1e995u; }

void txn_absorb(SqluState *st, const char *table, int by)
{
    bool any = false;
    for (int i = 0; i < st->n_ops; i++) {
        TxnOp *o = &st->ops[i];
        if (o->absorbed || strcmp(o->table, table) != 0)
            continue;
        o->absorbed = by;
        o->hash = absorbed_hash(o);
        any = true;
    }
    if (any)
        reindex(st);
}

void txn_unabsorb(SqluState *st, int by)
{
    bool any = false;
    for (int i = 0; i < st->n_ops; i++) {
        TxnOp *o = &st->ops[i];
        if (o->absorbed < by)
            continue;
        o->absorbed = 0;
        o->hash = op_hash(o->table, o->key);
        any = true;
    }
    if (any)
        reindex(st);
}

void txn_drop_absorbed(SqluState *st) { discard_some(st, NULL); }

void txn_stmt_begin(SqluState *st) { st->stmt_start = st->n_ops; }

void txn_stmt_fail(SqluState *st) { discard_from(st, st->stmt_start); }

/* Is the key of a must-be-new op present in the committed table (only
 * asked when no earlier op of the batch touched the key)? */
static int key_exists(QrTable *t, const TxnOp *op, bool *exists, QrError *err)
{
    if (!op->first) {
        /* an earlier op of this batch (a delete) freed the key: the
         * statement already checked that against what it saw */
        *exists = false;
        return QR_OK;
    }
    QrBuf doc;
    qr_buf_init(&doc);
    QrError e;
    qr_error_clear(&e);
    /* commits ordered before this one but not yet acknowledged count */
    int rc = qr_get_latest(t, op->key, strlen(op->key), &doc, &e);
    qr_buf_free(&doc);
    if (rc == QR_ENOTFOUND) {
        *exists = false;
        return QR_OK;
    }
    if (rc != QR_OK) {
        qr_error_copy(err, &e);
        return rc;
    }
    *exists = true;
    return QR_OK;
}

/* Apply every buffered op to one batch per table touched, then commit the
 * batches in turn.  Under the apply lock.  Empties the buffer whatever
 * happens.  A failed write commits nothing; a failed commit names, in the
 * error's detail, the tables whose commits came before it. */
static int apply_all(QrSqlSession *s, SqluState *st, QrError *err)
{
    if (st->n_ops == 0 && !sqld_pending(st))
        return QR_OK;
    if (st->n_rebuilds) /* the rebuilt tables' copies hold the absorbed writes */
        txn_drop_absorbed(st);
    /* DROP TABLE in the block: its tables claimed first (their users
     * waited for, outside the lock), its writes to them discarded */
    int rc = st->n_drops ? sqld_drops_claim(s, st, err) : QR_OK;
    if (rc != QR_OK) {
        txn_discard(st);
        return rc;
    }
    /* tables the block rebuilt: claimed too, its writes go to their copies */
    if (st->n_rebuilds && (rc = sqld_rebuilds_claim(s, st, err)) != QR_OK) {
        sqld_drops_finish(s, st, false, NULL);
        txn_discard(st);
        return rc;
    }
    size_t n_alloc = (size_t)st->n_ops + 1;
    QrTable **touched = qr_calloc(n_alloc, sizeof *touched);
    int *first_op = qr_calloc(n_alloc, sizeof *first_op); /* per touched table */
    int *tk = qr_calloc(n_alloc, sizeof *tk); /* per op: its table in touched[] */
    QrBatch **batch = qr_calloc(n_alloc, sizeof *batch); /* per touched table */
    QrTable **tab = qr_calloc(n_alloc, sizeof *tab);
    bool *viewed = qr_calloc(n_alloc, sizeof *viewed); /* per touched table: a rebuilt copy */
    int n_touched = 0;
    if (!touched || !first_op || !tk || !batch || !tab || !viewed) {
        qr_free(viewed);
        qr_free(touched);
        qr_free(first_op);
        qr_free(tk);
        qr_free(batch);
        qr_free(tab);
        sqld_drops_finish(s, st, false, NULL);
        sqld_rebuilds_finish(s, st, false, NULL);
        txn_discard(st);
        return qr_error_set(err, QR_ENOMEM, "out of memory applying writes");
    }
    /* pass 1: resolve tables before the lock (acquiring waits while a
     * table is claimed by a drop, which may be waiting for the lock) ... */
    for (int i = 0; rc == QR_OK && i < st->n_ops; i++) {
        TxnOp *o = &st->ops[i];
        /* a reference per distinct table keeps a DROP from freeing it */
        int prev = -1;
        for (int k = 0; k < n_touched && prev < 0; k++)
            if (!strcmp(st->ops[first_op[k]].table, o->table))
                prev = k;
        if (prev >= 0) {
            tab[i] = touched[prev];
            tk[i] = prev;
        } else {
            /* a rebuilt table: its copy, which only this session holds */
            tab[i] = sqld_view(s, o->table);
            rc = tab[i] ? QR_OK : qr_table_acquire(s->db, o->table, &tab[i], err);
            if (rc != QR_OK)
                break;
            viewed[n_touched] = tab[i] != NULL && tab[i] == sqld_view(s, o->table);
            first_op[n_touched] = i;
            tk[i] = n_touched;
            touched[n_touched++] = tab[i];
        }
    }
    pthread_mutex_lock(&apply_lock);
    /* ... then, under it, check the keys that must be new, so a late
     * conflict applies nothing */
    for (int i = 0; rc == QR_OK && i < st->n_ops; i++) {
        TxnOp *o = &st->ops[i];
        if (o->must_be_new) {
            bool exists = false;
            rc = key_exists(tab[i], o, &exists, err);
            if (rc == QR_OK && exists) {
                rc = qr_error_set(err, QR_ECONSTRAINT,
                                  "duplicate key value violates unique constraint \"%s_pkey\"",
                                  o->table);
                qr_error_detail(err, "Key (%s)=(%s) already exists.",
                                qr_table_schema(tab[i])->primary_key, o->key);
                qr_error_set_sqlstate(err, "23505");
            }
        }
    }
    if (rc == QR_OK)
        rc = sqlx_check(st, err); /* first committer wins (sql_conflict.c) */
    if (rc == QR_OK && st->meta)
        rc = sqld_meta_check(s, st, err); /* ... on table definitions too */
    if (rc == QR_OK && st->n_rebuilds)
        rc = sqld_rebuilds_check(s, st, err); /* ... and on whole tables rebuilt */
    /* pass 2: each table's writes into its own batch (invisible, not yet
     * in the WAL: a failure here writes nothing anywhere) */
    for (int k = 0; rc == QR_OK && k < n_touched; k++)
        rc = qr_batch_begin(touched[k], &batch[k], err);
    /* each table's ops in order, indexed on several threads when many (a
     * COPY): slices in parallel, joined in order */
    QrLoadOp *lops = rc == QR_OK ? qr_calloc((size_t)st->n_ops + 1, sizeof *lops) : NULL;
    if (rc == QR_OK && !lops)
        rc = qr_error_set(err, QR_ENOMEM, "out of memory applying writes");
    for (int k = 0; rc == QR_OK && k < n_touched; k++) {
        size_t n = 0;
        for (int i = first_op[k]; i < st->n_ops; i++)
            if (tk[i] == k)
                lops[n++] = st->ops[i].is_delete
                                ? (QrLoadOp){true, st->ops[i].key, strlen(st->ops[i].key)}
                                : (QrLoadOp){false, st->ops[i].doc, st->ops[i].doc_len};
        rc = qr_batch_fill(batch[k], lops, n, 0, NULL, err);
    }
    qr_free(lops);
    /* several tables: one journal makes them commit together (txn_journal.c) */
    char jpath[4400] = "";
    TxnjItem *ddl = NULL;
    int n_ddl = 0;
    if (rc == QR_OK && sqld_pending(st))
        rc = sqld_journal_items(s, st, &ddl, &n_ddl, err);
    if (rc == QR_OK && (n_touched > 1 || n_ddl))
        rc = txnj_write(s->db, st->ops, st->n_ops, ddl, n_ddl, jpath, sizeof jpath, err);
    sqld_journal_free(ddl, n_ddl);
    /* pass 3: one commit per table, ordered under the lock; the waits for
     * the log (shared with concurrent commits: group commit) after it */
    int n_done = 0;
    QrCommit *cm = qr_calloc((size_t)n_touched + 1, sizeof *cm);
    if (rc == QR_OK && !cm)
        rc = qr_error_set(err, QR_ENOMEM, "out of memory applying writes");
    for (int k = 0; rc == QR_OK && k < n_touched; k++)
        if ((rc = qr_batch_commit_start(batch[k], &cm[k], err)) == QR_OK)
            n_done++;
    if (rc == QR_OK) /* published: later checks (under this lock) see its keys */
        sqlx_committed(st);
    /* one table: the wait for the log happens outside the lock (group
     * commit); several: the journal goes before the lock does, so no later
     * commit can be undone by replaying it (docs/format.md) */
    if (!jpath[0])
        pthread_mutex_unlock(&apply_lock);
    for (int k = 0; k < n_done; k++) {
        int w = qr_commit_wait(&cm[k], rc == QR_OK ? err : NULL);
        if (rc == QR_OK && w != QR_OK) {
            rc = w;
            n_done = k;
        }
    }
    qr_free(cm);
    for (int k = 0; k < n_touched; k++) { /* before a rebuilt copy's handle closes */
        qr_batch_free(batch[k]);
        batch[k] = NULL;
    }
    if (sqld_pending(st)) { /* the journal names it: a crash from here redoes it at open */
        QrError de;
        qr_error_clear(&de);
        if (st->n_rebuilds) /* the copies take the tables' places */
            sqld_rebuilds_finish(s, st, rc == QR_OK, &de);
        if (rc == QR_OK && de.code == QR_OK && st->meta)
            sqld_meta_publish(s, st, &de);
        sqld_drops_finish(s, st, rc == QR_OK && de.code == QR_OK, &de);
        if (rc == QR_OK && de.code != QR_OK) {
            qr_error_copy(err, &de);
            rc = de.code;
        }
    }
    if (jpath[0]) { /* every table's part is durable (or failed without a crash) */
        txnj_done(s->db, jpath);
        pthread_mutex_unlock(&apply_lock);
    }
    if (rc != QR_OK && n_done > 0 && err) {
        /* the truth about a transaction over several tables */
        char done[200] = "";
        size_t o = 0;
        for (int k = 0; k < n_done && o < sizeof done; k++)
            o += (size_t)snprintf(done + o, sizeof done - o, "%s\"%s\"", k ? ", " : "",
                                  st->ops[first_op[k]].table);
        size_t dl = strlen(err->detail);
        snprintf(err->detail + dl, sizeof err->detail - dl,
                 "%sthe writes to table%s %s were committed before the failure",
                 dl ? "; " : "", n_done > 1 ? "s" : "", done);
    }
    for (int k = 0; k < n_touched; k++) {
        qr_batch_free(batch[k]);
        if (!viewed[k]) /* a rebuilt table's copy took no reference */
            qr_table_release(s->db, st->ops[first_op[k]].table);
    }
    qr_free(viewed);
    qr_free(tab);
    qr_free(touched);
    qr_free(first_op);
    qr_free(tk);
    qr_free(batch);
    txn_discard(st);
    return rc;
}

int txn_stmt_end(QrSqlSession *s, SqluState *st, QrError *err)
{
    if (st->in_block)
        return QR_OK;
    return apply_all(s, st, err);
}

int txn_exec(SqlCtx *cx, SqluState *st, const char *kind, char *tag, size_t tag_len)
{
    QrSqlSession *s = cx->sess;
    if (!strcmp(kind, "BEGIN")) {
        if (st->in_block)
            sql_notice(cx, "WARNING", "25001", "there is already a transaction in progress");
        st->in_block = true;
        if (s->txn_status == 'I')
            s->txn_status = 'T';
        snprintf(tag, tag_len, "BEGIN");
        return QR_OK;
    }
    if (!strcmp(kind, "ROLLBACK")) {
        if (!st->in_block)
            sql_notice(cx, "WARNING", "25P01", "there is no transaction in progress");
        txn_discard(st);
        st->in_block = false;
        s->txn_status = 'I';
        snprintf(tag, tag_len, "ROLLBACK");
        return QR_OK;
    }
    if (!strcmp(kind, "COMMIT")) {
        if (!st->in_block) {
            sql_notice(cx, "WARNING", "25P01", "there is no transaction in progress");
            snprintf(tag, tag_len, "COMMIT");
            return QR_OK;
        }
        bool failed = s->txn_status == 'E';
        st->in_block = false;
        s->txn_status = 'I';
        if (failed) {
            /* PostgreSQL answers COMMIT of a failed block with ROLLBACK */
            txn_discard(st);
            snprintf(tag, tag_len, "ROLLBACK");
            return QR_OK;
        }
        int rc = apply_all(s, st, cx->err);
        if (rc != QR_OK)
            return rc;
        snprintf(tag, tag_len, "COMMIT");
        return QR_OK;
    }
    return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000", "%s is not supported", kind);
}
