/*
 * sql_txn_ddl.c — DDL inside a transaction block, undone by ROLLBACK.
 *
 * Layer: query/.  Calls quarry.h (table handles), sequence.h and the
 * session's own statement execution (sql.h).
 *
 * CREATE TABLE and B-tree CREATE INDEX take effect when they run; the
 * statement that drops the new object again is remembered (savepoints
 * record how many there were); ROLLBACK, a COMMIT that fails or answers
 * ROLLBACK, ROLLBACK TO a savepoint set before it, and a session that ends
 * inside the block run them, newest first (DROP TABLE also drops the
 * sequences its serial columns own), so the block's CREATE TABLE and its
 * writes to the table go or stay together.  Other sessions can see the
 * empty table before the block ends (PostgreSQL hides it until COMMIT).
 *
 * DROP TABLE in a block is deferred: the table is only remembered, and
 * hidden from the session (sqld_hidden, asked wherever the session looks
 * a table up), while other sessions go on using it.  COMMIT claims the
 * tables (waiting for their users), discards the block's writes to them,
 * journals the drops with the block's writes (txn_journal.c: the commit
 * point), commits the writes, drops the tables and only then removes the
 * journal, so a crash anywhere leaves either all of it or none of it.
 * ROLLBACK [TO] forgets the drops after the mark, and the tables are back.
 */
#include "query/sequence.h"
#include "query/sql_int.h"
#include "query/sql_w.h"
#include "store/util.h"

#include <stdio.h>
#include <string.h>

/* Append the identifier quoted ("a""b") to sql[*o, cap). */
static void quote_ident(char *sql, size_t cap, size_t *o, const char *name)
{
    if (*o + 1 < cap)
        sql[(*o)++] = '"';
    for (const char *p = name; *p && *o + 3 < cap; p++) {
        if (*p == '"')
            sql[(*o)++] = '"';
        sql[(*o)++] = *p;
    }
    if (*o + 1 < cap)
        sql[(*o)++] = '"';
    sql[*o] = 0;
}

/* The B-tree index name a CREATE INDEX makes (as sql_ddl.c names it), or
 * false when the statement is not one (full-text analysis is not undone). */
static bool btree_index_name(const cJSON *body, char *out, size_t cap)
{
    const char *am = sqlj_str(body, "accessMethod");
    const char *table = sqlj_str(sqlj_get(body, "relation"), "relname");
    const cJSON *ie = sqlj_is(cJSON_GetArrayItem(sqlj_get(body, "indexParams"), 0), "IndexElem");
    const char *col = sqlj_str(ie, "name");
    const char *given = sqlj_str(body, "idxname");
    if ((am && strcmp(am, "btree") != 0) || !table || !col)
        return false;
    if (given)
        snprintf(out, cap, "%s", given);
    else
        snprintf(out, cap, "%s_%s_idx", table, col);
    return true;
}

int sqld_before_create(SqlCtx *cx, SqluState *st, const char *tag, const cJSON *body,
                       char *undo, size_t undo_cap)
{
    undo[0] = 0;
    const char *table = sqlj_str(sqlj_get(body, "relation"), "relname");
    if (!st->in_block || !table)
        return QR_OK;
    size_t o = 0;
    if (!strcmp(tag, "CreateStmt")) {
        QrTable *t = NULL;
        QrError e;
        qr_error_clear(&e);
        int rc = qr_table_acquire(cx->sess->db, table, &t, &e);
        if (rc == QR_OK)
            qr_table_release(cx->sess->db, table);
        if (rc != QR_ENOTFOUND)
            return QR_OK; /* IF NOT EXISTS of an existing table creates nothing */
        o = (size_t)snprintf(undo, undo_cap, "DROP TABLE IF EXISTS ");
        quote_ident(undo, undo_cap, &o, table);
        return QR_OK;
    }
    char idx[2 * QR_NAME_MAX + 8];
    if (!btree_index_name(body, idx, sizeof idx))
        return QR_OK;
    cJSON *meta = sqlw_meta_load(cx->sess->db, table);
    bool exists = cJSON_GetObjectItemCaseSensitive(
                      cJSON_GetObjectItemCaseSensitive(meta, "indexes"), idx) != NULL;
    cJSON_Delete(meta);
    if (exists)
        return QR_OK;
    o = (size_t)snprintf(undo, undo_cap, "DROP INDEX IF EXISTS ");
    quote_ident(undo, undo_cap, &o, idx);
    return QR_OK;
}

int sqld_created(SqlCtx *cx, SqluState *st, const char *undo)
{
    if (!undo[0])
        return QR_OK;
    if (st->n_undo == st->cap_undo) {
        int nc = st->cap_undo ? st->cap_undo * 2 : 4;
        char **n = qr_realloc(st->undo, (size_t)nc * sizeof *n);
        if (!n)
            return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
        st->undo = n;
        st->cap_undo = nc;
    }
    if (!(st->undo[st->n_undo] = qr_strdup(undo)))
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    st->n_undo++;
    return QR_OK;
}

void sqld_undo_to(QrSqlSession *s, SqluState *st, int mark)
{
    while (st->n_undo > mark) {
        char *sql = st->undo[--st->n_undo];
        QrSqlResult *r = NULL;
        QrError e;
        qr_error_clear(&e);
        char status = s->txn_status;
        s->txn_status = status == 'E' ? 'T' : status; /* the drop must run */
        st->undoing = true; /* ... now, not at COMMIT */
        int rc = qr_sql_exec(s, sql, strlen(sql), &r, &e);
        st->undoing = false;
        if (rc != QR_OK)
            qr_log(QR_LOG_WARN, "could not undo DDL of a rolled back transaction (%s): %s", sql,
                   e.message);
        s->txn_status = status;
        qr_sql_result_free(r);
        qr_free(sql);
    }
}

void sqld_forget(SqluState *st)
{
    for (int i = 0; i < st->n_undo; i++)
        qr_free(st->undo[i]);
    st->n_undo = 0;
}

/* ---- DROP TABLE in a block: deferred to COMMIT ---- */

bool sqld_hidden(const QrSqlSession *s, const char *table)
{
    const SqluState *st = s ? s->u_state : NULL;
    for (int i = 0; st && table && i < st->n_drops; i++)
        if (!strcmp(st->drops[i], table))
            return true;
    return false;
}

int sqld_defer_drop(SqlCtx *cx, SqluState *st, const char *table)
{
    if (sqld_hidden(cx->sess, table))
        return QR_OK;
    if (st->n_drops == st->cap_drops) {
        int nc = st->cap_drops ? st->cap_drops * 2 : 4;
        char(*n)[QR_NAME_MAX + 1] = qr_realloc(st->drops, (size_t)nc * sizeof *n);
        if (!n)
            return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
        st->drops = n;
        st->cap_drops = nc;
    }
    snprintf(st->drops[st->n_drops++], sizeof st->drops[0], "%s", table);
    qr_db_ddl_bump(cx->sess->db); /* the session's bound statements bind again */
    return QR_OK;
}

void sqld_drops_to(QrSqlSession *s, SqluState *st, int mark)
{
    if (st->n_drops <= mark)
        return;
    st->n_drops = mark;
    qr_db_ddl_bump(s->db); /* the tables are back for the session */
}

int sqld_drops_claim(QrSqlSession *s, SqluState *st, QrError *err)
{
    for (int i = 0; i < st->n_drops; i++)
        txn_discard_table(st, st->drops[i]); /* writes to a dropped table go with it */
    for (int i = 0; i < st->n_drops; i++) {
        int rc = qr_table_claim(s->db, st->drops[i], SQLW_DROP_WAIT_MS, err);
        if (rc != QR_OK) {
            while (i-- > 0)
                qr_table_unclaim(s->db, st->drops[i]);
            return rc;
        }
    }
    return QR_OK;
}

void sqld_drops_finish(QrSqlSession *s, SqluState *st, bool ok, QrError *err)
{
    bool dropped = false;
    for (int i = 0; i < st->n_drops; i++) {
        QrError e;
        qr_error_clear(&e);
        int rc = ok ? qr_table_drop(s->db, st->drops[i], &e) : QR_OK;
        if (rc == QR_OK && ok) /* SERIAL, identity and row-id sequences go with it */
            rc = seq_drop_owned(qr_db_dir(s->db), st->drops[i], &e);
        dropped |= ok;
        if (rc != QR_OK && rc != QR_ENOTFOUND) {
            qr_log(QR_LOG_WARN, "could not drop table \"%s\" at COMMIT: %s", st->drops[i],
                   e.message);
            if (err && err->code == QR_OK)
                qr_error_copy(err, &e);
        }
        qr_table_unclaim(s->db, st->drops[i]);
    }
    if (dropped) { /* the drops are durable before the journal naming them goes */
        char dir[4200];
        QrError e;
        qr_error_clear(&e);
        snprintf(dir, sizeof dir, "%s/tables", qr_db_dir(s->db));
        if (qr_fsync_dir(dir, &e) != QR_OK && err && err->code == QR_OK)
            qr_error_copy(err, &e);
    }
}
