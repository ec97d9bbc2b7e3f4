/*
 * sql_savepoint.c — SAVEPOINT, ROLLBACK TO SAVEPOINT and RELEASE SAVEPOINT
 * inside a transaction block.
 *
 * Layer: query/.  Calls the session's write buffer (sql_txn.c).
 *
 * A savepoint is a mark in the block's write buffer: the number of
 * buffered ops when it was set.  ROLLBACK TO discards the ops after the
 * mark (their memory goes back to the budget), forgets the savepoints set
 * after it, keeps it, and turns an aborted block ('E') back into a working
 * one, which is what psql's ON_ERROR_ROLLBACK, SQLAlchemy's begin_nested()
 * and Django's nested atomic() rely on.  RELEASE forgets the savepoint and
 * those after it and keeps their writes.  Names may repeat; ROLLBACK TO and
 * RELEASE take the latest of the name, as PostgreSQL does.
 *
 * ROLLBACK TO also drops the tables the block created after the savepoint
 * and brings back those it dropped, and the table definitions as they
 * were (sql_txn_ddl.c).  What it does not
 * undo: nextval() (as in PostgreSQL).
 */
#include "query/sql_int.h"
#include "query/sql_w.h"

#include <stdio.h>
#include <string.h>

/* Forget the savepoints from the n-th on. */
static void svp_truncate(SqluState *st, int n)
{
    while (st->n_svps > n)
        cJSON_Delete(st->svps[--st->n_svps].meta);
}

void svp_clear(SqluState *st) { svp_truncate(st, 0); }

void svp_session_free(SqluState *st)
{
    svp_truncate(st, 0);
    qr_free(st->svps);
    st->svps = NULL;
    st->n_svps = st->cap_svps = 0;
}

/* The latest savepoint named `name`, or -1. */
static int svp_find(const SqluState *st, const char *name)
{
    for (int i = st->n_svps - 1; i >= 0; i--)
        if (!strcmp(st->svps[i].name, name))
            return i;
    return -1;
}

/* An error inside the block aborts it, as any failed statement does. */
static int block_error(SqlCtx *cx, SqluState *st, QrCode code, const char *sqlstate,
                       const char *msg, const char *name)
{
    sql_err_at(cx, -1, code, sqlstate, msg, name);
    if (st->in_block)
        cx->sess->txn_status = 'E';
    return code;
}

int svp_exec(SqlCtx *cx, SqluState *st, const char *kind, const char *name, char *tag,
             size_t tag_len)
{
    const char *what = !strcmp(kind, "TRANS_STMT_SAVEPOINT")  ? "SAVEPOINT"
                       : !strcmp(kind, "TRANS_STMT_RELEASE") ? "RELEASE SAVEPOINT"
                                                              : "ROLLBACK TO SAVEPOINT";
    if (!st->in_block)
        return sql_err_at(cx, -1, QR_EINVAL, "25P01", "%s can only be used in transaction blocks",
                          what);
    if (!name || !*name)
        return block_error(cx, st, QR_ESYNTAX, "42601", "%s needs a savepoint name", what);
    if (!strcmp(what, "SAVEPOINT")) {
        if (cx->sess->txn_status == 'E')
            return block_error(cx, st, QR_EINVAL, "25P02",
                               "current transaction is aborted, commands ignored until end of "
                               "transaction block%s", "");
        if (st->n_svps == st->cap_svps) {
            int nc = st->cap_svps ? st->cap_svps * 2 : 8;
            SvpMark *n = qr_realloc(st->svps, (size_t)nc * sizeof *n);
            if (!n)
                return block_error(cx, st, QR_ENOMEM, "53200", "out of memory%s", "");
            st->svps = n;
            st->cap_svps = nc;
        }
        SvpMark *m = &st->svps[st->n_svps++];
        snprintf(m->name, sizeof m->name, "%s", name);
        m->n_ops = st->n_ops;
        m->n_undo = st->n_undo;
        m->n_drops = st->n_drops;
        m->n_rebuilds = st->n_rebuilds;
        m->meta = sqld_meta_mark(st);
        if (st->meta && !m->meta) {
            st->n_svps--;
            return block_error(cx, st, QR_ENOMEM, "53200", "out of memory%s", "");
        }
        snprintf(tag, tag_len, "SAVEPOINT");
        return QR_OK;
    }
    int i = svp_find(st, name);
    if (i < 0)
        return block_error(cx, st, QR_ENOTFOUND, "3B001", "savepoint \"%s\" does not exist",
                           name);
    if (!strcmp(what, "RELEASE SAVEPOINT")) {
        if (cx->sess->txn_status == 'E')
            return block_error(cx, st, QR_EINVAL, "25P02",
                               "current transaction is aborted, commands ignored until end of "
                               "transaction block%s", "");
        svp_truncate(st, i);
        snprintf(tag, tag_len, "RELEASE");
        return QR_OK;
    }
    /* ROLLBACK TO: the writes after the mark go, the savepoint stays */
    st->stmt_start = st->svps[i].n_ops;
    txn_stmt_fail(st);
    svp_truncate(st, i + 1);
    cx->sess->txn_status = 'T';
    sqld_meta_restore(cx->sess, st, st->svps[i].meta); /* ALTERs after it are undone */
    /* tables rebuilt (or made again) after it are as they were, then those
     * dropped after it are back */
    sqld_rebuilds_to(cx->sess, st, st->svps[i].n_rebuilds);
    sqld_drops_to(cx->sess, st, st->svps[i].n_drops);
    sqld_undo_to(cx->sess, st, st->svps[i].n_undo);   /* tables created after it go */
    snprintf(tag, tag_len, "ROLLBACK");
    return QR_OK;
}
