/*
 * sql_txn_rebuild.c — statements that rebuild a table (ALTER TABLE ... ADD
 * PRIMARY KEY / DROP CONSTRAINT ..._pkey / DROP COLUMN / RENAME COLUMN /
 * ALTER COLUMN TYPE between text and a string, a full-text CREATE INDEX:
 * sql_ddl.c, sql_rekey.c) or make a dropped one again, inside a transaction block:
 * undone by ROLLBACK, published by COMMIT with the block's writes.
 *
 * Layer: query/.  Calls quarry.h (spare tables, claims), sequence.h and the
 * session's transaction state (sql_w.h).
 *
 * The statement copies the table, as it is committed now with the block's
 * own writes to it over it (sqlo_overlay), into a spare table (quarry.h
 * qr_spare_*) with the new schema, and stages the new metadata
 * (sqld_meta_stage).  The block's writes it copied are absorbed (TxnOp
 * .absorbed): no read, key lookup or COMMIT sees them again, and a rollback
 * of the rebuild gives them back.  From then on the session reads and
 * writes the spare wherever it names the table (sqld_view: the statement's
 * table lookups, the catalog, COMMIT's writes), while every other session
 * goes on with the table as it was, writes included.
 *
 * COMMIT claims the table (its users finish, new ones wait), and under the
 * apply lock checks that nothing committed to it since the copy -- its
 * write mark (qr_table_write_mark) and directory are the ones the copy saw
 * -- else 40001, first committer wins, as for keys (sql_conflict.c) -- and
 * writes the staged metadata into the spare's directory.  The journal
 * (txn_journal.c, kind 6) names the exchange; the block's writes commit
 * into the spare; the spare and the table are exchanged in one rename; the
 * claim ends; the spare, now holding the old documents, is removed.  A
 * crash after the journal is durable redoes the exchange at the next open,
 * a crash before it leaves the table untouched (the spare is removed then).
 * ROLLBACK, ROLLBACK TO a savepoint set before the statement, and a session
 * ending in the block close and remove the spare.
 *
 * CREATE TABLE of a name the block dropped (sqld_replace) is the same
 * machinery with nothing to copy: the new table is a spare shown under the
 * name, the block's drop of the old table moves into the entry (a rollback
 * of the entry puts it back where it was in SqluState.drops), the block's
 * writes to the old table are absorbed (they go with it), and COMMIT
 * exchanges the two and drops the old table's sequences (journal kind 7);
 * the new table's sequences are dropped by a rollback of the entry.
 * DROP CONSTRAINT <table>_pkey is a rebuild numbering the rows from a new
 * sequence, dropped the same way.
 *
 * Differences from PostgreSQL, whose ALTER TABLE locks the table until the
 * block ends: other sessions are not made to wait while the block is open,
 * and one that commits to the table meanwhile makes the block's COMMIT fail
 * with 40001 instead.
 */
#include "query/query_int.h"
#include "query/sequence.h"
#include "query/sql_w.h"
#include "store/util.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The newest rebuild of table in the block, or NULL. */
static SqldRebuild *newest(const SqluState *st, const char *table)
{
    for (int i = st ? st->n_rebuilds - 1 : -1; i >= 0; i--)
        if (!strcmp(st->rebuilds[i].table, table))
            return &st->rebuilds[i];
    return NULL;
}

QrTable *sqld_view(const QrSqlSession *s, const char *table)
{
    SqldRebuild *r = table ? newest(s ? s->u_state : NULL, table) : NULL;
    return r ? r->view : NULL;
}

/* Close the spare's handle, after the block's snapshots of it. */
static void view_close(SqluState *st, SqldRebuild *r)
{
    if (!r->view)
        return;
    sqli_unpin(st, r->view);
    sqlo_clear(st);
    qr_spare_close(r->view);
    r->view = NULL;
}

/* REPEATABLE READ: the copy is of the table as committed now, so the block
 * must not have read an older state of it. */
static int rr_check(SqlCtx *cx, const SqluState *st, QrTable *t, uint64_t mark)
{
    if (st->iso != SQLI_REPEATABLE_READ)
        return QR_OK;
    for (int i = 0; i < st->n_pins; i++) {
        const SqliPin *p = &st->pins[i];
        if (p->tab == t->table && p->snap->lsn && p->snap->lsn != mark) {
            qr_error_hint(cx->err, "The transaction might succeed if retried.");
            return sql_err_at(cx, -1, QR_EBUSY, "40001",
                              "could not serialize access due to concurrent update of table "
                              "\"%s\"",
                              t->name);
        }
    }
    return QR_OK;
}

/* Room for one more entry. */
static int grow(SqlCtx *cx, SqluState *st)
{
    if (st->n_rebuilds < st->cap_rebuilds)
        return QR_OK;
    int nc = st->cap_rebuilds ? st->cap_rebuilds * 2 : 4;
    SqldRebuild *nr = qr_realloc(st->rebuilds, (size_t)nc * sizeof *nr);
    if (!nr)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    st->rebuilds = nr;
    st->cap_rebuilds = nc;
    return QR_OK;
}

/* Make r's spare with schema s (copying from, when not NULL, into it) and
 * stage meta; then r is the block's newest entry, and the block's writes to
 * the table so far are in it (absorbed).  On error r's spare is gone and
 * its strings are freed. */
static int add_entry(SqlCtx *cx, SqluState *st, SqldRebuild *r, QrTable *from, const QrSchema *s,
                     const SqlwRekey *how, const cJSON *meta)
{
    QrDb *db = cx->sess->db;
    sqlw_spare_id(r->table, r->id, sizeof r->id);
    int rc = grow(cx, st);
    if (rc == QR_OK)
        rc = qr_spare_create(db, r->id, r->table, s, &r->view, cx->err);
    if (rc == QR_OK && from)
        rc = sqlw_rebuild_copy(cx, from, r->view, how);
    if (rc == QR_OK)
        rc = sqld_meta_stage(cx, st, r->table, meta);
    if (rc != QR_OK) {
        qr_spare_close(r->view);
        qr_spare_drop(db, r->id, NULL);
        qr_free(r->drop_seqs);
        qr_free(r->new_seqs);
        return rc;
    }
    st->rebuilds[st->n_rebuilds++] = *r;
    txn_absorb(st, r->table, st->n_rebuilds);
    sqlo_clear(st); /* overlays of the table's old storage */
    qr_db_ddl_bump(db);
    return QR_OK;
}

int sqld_rebuild(SqlCtx *cx, SqluState *st, QrTable *t, const QrSchema *ns,
                 const SqlwRekey *how, const cJSON *meta)
{
    SqldRebuild r;
    memset(&r, 0, sizeof r);
    snprintf(r.table, sizeof r.table, "%s", qr_table_name(t));
    const SqldRebuild *prev = newest(st, r.table);
    if (prev) { /* a rebuild of the block's copy: COMMIT checks the same base */
        r.base_ident = prev->base_ident;
        r.base_mark = prev->base_mark;
        r.replaces = prev->replaces;
    } else { /* taken before the copy reads: a commit in between is seen at COMMIT */
        r.base_ident = qr_table_ident(cx->sess->db, r.table);
        r.base_mark = qr_table_write_mark(t);
        int rc = rr_check(cx, st, t, r.base_mark);
        if (rc != QR_OK)
            return rc;
    }
    if ((how->drop_seq && how->drop_seq[0] && !(r.drop_seqs = qr_strdup(how->drop_seq))) ||
        (how->rowid_seq && !(r.new_seqs = qr_strdup(how->rowid_seq)))) {
        qr_free(r.drop_seqs);
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    }
    return add_entry(cx, st, &r, t, ns, how, meta);
}

int sqld_replace(SqlCtx *cx, SqluState *st, const char *table, const QrSchema *s,
                 const cJSON *meta, const char *old_seqs, const char *new_seqs)
{
    int at = -1;
    for (int i = 0; i < st->n_drops && at < 0; i++)
        if (!strcmp(st->drops[i].name, table))
            at = i;
    if (at < 0)
        return qr_error_set(cx->err, QR_EINTERNAL, "table \"%s\" is not dropped", table);
    SqldRebuild r;
    memset(&r, 0, sizeof r);
    snprintf(r.table, sizeof r.table, "%s", table);
    r.replaces = true;
    r.drop = st->drops[at];
    r.drop_at = at;
    r.base_ident = r.drop.ident;
    if ((old_seqs && !(r.drop_seqs = qr_strdup(old_seqs))) ||
        (new_seqs && !(r.new_seqs = qr_strdup(new_seqs)))) {
        qr_free(r.drop_seqs);
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    }
    /* the old table's writes (before its DROP) are absorbed: they go with it */
    int rc = add_entry(cx, st, &r, NULL, s, NULL, meta);
    if (rc == QR_OK) { /* the name is the block's new table's now */
        memmove(&st->drops[at], &st->drops[at + 1], (size_t)(st->n_drops - at - 1) * sizeof *st->drops);
        st->n_drops--;
    }
    return rc;
}

void sqld_rebuilds_to(QrSqlSession *s, SqluState *st, int mark)
{
    if (!st || st->n_rebuilds <= mark)
        return;
    for (int i = st->n_rebuilds - 1; i >= mark; i--) {
        SqldRebuild *r = &st->rebuilds[i];
        view_close(st, r);
        if (r->claimed)
            qr_table_unclaim(s->db, r->table);
        qr_spare_drop(s->db, r->id, NULL);
        if (!r->done) /* the new table's sequences go with it */
            seq_drop_names(qr_db_dir(s->db), r->new_seqs, NULL);
        if (r->replaces && !r->done && st->in_block && r->drop.name[0] &&
            (st->n_drops < st->cap_drops || sqld_drops_grow(st))) {
            /* the block's DROP of the old table is back where it was */
            int at = r->drop_at < st->n_drops ? r->drop_at : st->n_drops;
            memmove(&st->drops[at + 1], &st->drops[at],
                    (size_t)(st->n_drops - at) * sizeof *st->drops);
            st->drops[at] = r->drop;
            st->n_drops++;
        }
        qr_free(r->drop_seqs);
        qr_free(r->new_seqs);
    }
    txn_unabsorb(st, mark + 1); /* the writes those copies had are the table's again */
    st->n_rebuilds = mark;
    qr_db_ddl_bump(s->db); /* the session sees the tables as they were */
}

/* The entries COMMIT exchanges: the newest of each table the block did not
 * drop. */
static bool exchanged(const QrSqlSession *s, const SqluState *st, int i)
{
    const SqldRebuild *r = &st->rebuilds[i];
    return newest(st, r->table) == r && !sqld_dropped(s, r->table);
}

int sqld_rebuilds_claim(QrSqlSession *s, SqluState *st, QrError *err)
{
    for (int i = 0; i < st->n_rebuilds; i++) {
        if (!exchanged(s, st, i))
            continue;
        int rc = qr_table_claim(s->db, st->rebuilds[i].table, SQLW_DROP_WAIT_MS, err);
        if (rc != QR_OK) {
            for (int k = 0; k < i; k++)
                if (st->rebuilds[k].claimed) {
                    qr_table_unclaim(s->db, st->rebuilds[k].table);
                    st->rebuilds[k].claimed = false;
                }
            return rc;
        }
        st->rebuilds[i].claimed = true;
    }
    return QR_OK;
}

int sqld_rebuilds_check(QrSqlSession *s, const SqluState *st, QrError *err)
{
    for (int i = 0; i < st->n_rebuilds; i++) {
        const SqldRebuild *r = &st->rebuilds[i];
        if (!r->claimed)
            continue;
        QrTable *t = NULL;
        QrError e;
        qr_error_clear(&e);
        /* a table the block dropped and created again: only the same table */
        bool same = qr_table_ident(s->db, r->table) == r->base_ident &&
                    (r->replaces || (qr_table_get(s->db, r->table, &t, &e) == QR_OK &&
                                     qr_table_write_mark(t) == r->base_mark));
        if (!same)
            return sqld_conflict(err, "wrote to", r->table, "rebuilt");
        /* the metadata goes into the copy now, before the commit point: a
         * full disk fails the COMMIT here, with nothing applied, instead of
         * after it */
        const cJSON *meta = sqld_meta_staged(s, r->table);
        int rc = meta ? sqlw_spare_meta(s->db, r->id, meta, err) : QR_OK;
        if (rc != QR_OK)
            return rc;
    }
    return QR_OK;
}

/* Exchange table with its newest spare (its metadata written by
 * sqld_rebuilds_check), every handle of the block's copies closed first. */
static int exchange(QrSqlSession *s, SqluState *st, SqldRebuild *r, QrError *err)
{
    for (int k = 0; k < st->n_rebuilds; k++)
        if (!strcmp(st->rebuilds[k].table, r->table))
            view_close(st, &st->rebuilds[k]);
    return qr_spare_swap(s->db, r->table, r->id, err);
}

int sqld_rebuilds_finish(QrSqlSession *s, SqluState *st, bool ok, QrError *err)
{
    int rc = QR_OK;
    for (int i = 0; i < st->n_rebuilds; i++) {
        SqldRebuild *r = &st->rebuilds[i];
        if (!r->claimed)
            continue;
        if (ok && rc == QR_OK) {
            rc = exchange(s, st, r, err);
            for (int k = 0; rc == QR_OK && k < st->n_rebuilds; k++)
                if (!strcmp(st->rebuilds[k].table, r->table)) {
                    st->rebuilds[k].done = true;
                    seq_drop_names(qr_db_dir(s->db), st->rebuilds[k].drop_seqs, NULL);
                }
            if (rc != QR_OK)
                qr_log(QR_LOG_WARN, "could not exchange table \"%s\" with its rebuilt copy at "
                                    "COMMIT: %s",
                       r->table, err->message);
        }
        qr_table_unclaim(s->db, r->table);
        r->claimed = false;
    }
    /* the old documents of the exchanged tables, and the copies not taken */
    sqld_rebuilds_to(s, st, 0);
    return rc;
}

int sqld_rebuild_journal(QrSqlSession *s, const SqluState *st, TxnjItem *items, int *n,
                         QrError *err)
{
    for (int i = 0; i < st->n_rebuilds; i++) {
        const SqldRebuild *r = &st->rebuilds[i];
        if (!r->claimed)
            continue;
        char ident[32];
        snprintf(ident, sizeof ident, "%" PRIu64, qr_spare_ident(s->db, r->id));
        TxnjItem *it = &items[(*n)++];
        *it = (TxnjItem){.kind = TXNJ_SWAP, .table = r->table, .key = r->id};
        if (!(it->doc = qr_strdup(ident))) {
            (*n)--;
            return qr_error_set(err, QR_ENOMEM, "out of memory writing the transaction journal");
        }
        it->doc_len = strlen(ident);
        for (int k = 0; k < st->n_rebuilds; k++) { /* the sequences that go with it */
            const SqldRebuild *q = &st->rebuilds[k];
            if (strcmp(q->table, r->table) != 0 || !q->drop_seqs || !q->drop_seqs[0])
                continue;
            it = &items[(*n)++];
            *it = (TxnjItem){.kind = TXNJ_DROP_SEQS, .table = q->table};
            if (!(it->doc = qr_strdup(q->drop_seqs))) {
                (*n)--;
                return qr_error_set(err, QR_ENOMEM, "out of memory writing the transaction "
                                                    "journal");
            }
            it->doc_len = strlen(it->doc);
        }
    }
    return QR_OK;
}
