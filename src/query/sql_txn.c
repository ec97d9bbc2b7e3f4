/*
 * sql_txn.c — transactions for SQL sessions: the write buffer, BEGIN /
 * COMMIT / ROLLBACK, and applying a batch of writes.
 *
 * Layer: query/.  Calls quarry.h (qr_put / qr_delete / qr_commit / qr_get).
 *
 * Every INSERT, UPDATE, DELETE, COPY and TRUNCATE buffers its writes in the
 * session (TxnOp).  Outside a block a statement's writes are applied when
 * it ends (so a statement is all or nothing: a bad row in a 1,000-row
 * INSERT writes nothing); inside BEGIN ... COMMIT they wait for COMMIT.
 *
 * Guarantees (docs/sql.md "Transactions"):
 *   - Atomic visibility per table: all of a transaction's writes to a table
 *     become visible in one table commit; readers never see part of them.
 *   - Across tables the commits follow one another under the process-wide
 *     apply lock, so no other SQL transaction interleaves, but a reader may
 *     see table A's part before table B's, and a crash between the two
 *     table commits keeps A's part only.
 *   - Isolation: statements read the committed state (a snapshot per
 *     statement, "read committed").  Key lookups of the write path (unique
 *     checks, ON CONFLICT, UPDATE/DELETE by key) also see the block's own
 *     buffered writes; SELECT inside a block does not see them yet.
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

SqluState *sqlu_state(QrSqlSession *s, QrError *err)
{
    if (!s->u_state) {
        s->u_state = qr_calloc(1, sizeof(SqluState));
        if (!s->u_state)
            qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    return s->u_state;
}

static int push_op(SqluState *st, TxnOp *op, QrError *err)
{
    if (st->n_ops == st->cap_ops) {
        int cap = st->cap_ops ? st->cap_ops * 2 : 64;
        TxnOp *o = qr_realloc(st->ops, (size_t)cap * sizeof *o);
        if (!o)
            goto oom;
        st->ops = o;
        st->cap_ops = cap;
    }
    st->ops[st->n_ops++] = *op;
    return QR_OK;
oom:
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
    for (int i = st->n_ops - 1; i >= 0; i--) {
        const TxnOp *o = &st->ops[i];
        if (!strcmp(o->key, key) && !strcmp(o->table, table))
            return o;
    }
    return NULL;
}

static void discard_from(SqluState *st, int from)
{
    for (int i = from; i < st->n_ops; i++) {
        qr_free(st->ops[i].key);
        qr_free(st->ops[i].doc);
    }
    if (from < st->n_ops)
        st->n_ops = from;
}

void txn_discard(SqluState *st)
{
    discard_from(st, 0);
    st->stmt_start = 0;
}

void txn_stmt_begin(SqluState *st) { st->stmt_start = st->n_ops; }

void txn_stmt_fail(SqluState *st) { discard_from(st, st->stmt_start); }

/* Is a key present in the table, counting earlier ops of the same batch
 * (ops[0..upto))? */
static int key_exists(QrTable *t, const SqluState *st, int upto, const TxnOp *op, bool *exists,
                      QrError *err)
{
    for (int i = upto - 1; i >= 0; i--) {
        const TxnOp *o = &st->ops[i];
        if (!strcmp(o->key, op->key) && !strcmp(o->table, op->table)) {
            *exists = !o->is_delete;
            return QR_OK;
        }
    }
    QrBuf doc;
    qr_buf_init(&doc);
    QrError e;
    qr_error_clear(&e);
    int rc = qr_get(t, op->key, strlen(op->key), &doc, &e);
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

/* Apply every buffered op, then commit each table touched.  Under the
 * apply lock.  Empties the buffer whatever happens. */
static int apply_all(QrSqlSession *s, SqluState *st, QrError *err)
{
    if (st->n_ops == 0)
        return QR_OK;
    int rc = QR_OK;
    QrTable **touched = qr_calloc((size_t)st->n_ops, sizeof *touched);
    int n_touched = 0;
    if (!touched) {
        txn_discard(st);
        return qr_error_set(err, QR_ENOMEM, "out of memory applying writes");
    }
    pthread_mutex_lock(&apply_lock);
    /* pass 1: resolve tables and check the keys that must be new, so a
     * late conflict applies nothing */
    QrTable **tab = qr_calloc((size_t)st->n_ops, sizeof *tab);
    if (!tab)
        rc = qr_error_set(err, QR_ENOMEM, "out of memory applying writes");
    for (int i = 0; rc == QR_OK && i < st->n_ops; i++) {
        TxnOp *o = &st->ops[i];
        rc = qr_table_get(s->db, o->table, &tab[i], err);
        if (rc != QR_OK)
            break;
        if (o->must_be_new) {
            bool exists = false;
            rc = key_exists(tab[i], st, i, o, &exists, err);
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
    /* pass 2: write */
    for (int i = 0; rc == QR_OK && i < st->n_ops; i++) {
        TxnOp *o = &st->ops[i];
        if (o->is_delete)
            rc = qr_delete(tab[i], o->key, strlen(o->key), NULL, err);
        else
            rc = qr_put(tab[i], o->doc, o->doc_len, NULL, err);
        bool seen = false;
        for (int k = 0; k < n_touched && !seen; k++)
            seen = touched[k] == tab[i];
        if (!seen)
            touched[n_touched++] = tab[i];
    }
    /* pass 3: one commit per table (also after a failed write: what was
     * written must not ride along with somebody else's later commit
     * unannounced; the error still reports the failure) */
    for (int k = 0; k < n_touched; k++) {
        QrError e;
        qr_error_clear(&e);
        int crc = qr_commit(touched[k], &e);
        if (crc != QR_OK && rc == QR_OK) {
            qr_error_copy(err, &e);
            rc = crc;
        }
    }
    pthread_mutex_unlock(&apply_lock);
    qr_free(tab);
    qr_free(touched);
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
