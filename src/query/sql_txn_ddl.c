/*
 * sql_txn_ddl.c — CREATE TABLE inside a transaction block, undone by
 * ROLLBACK.
 *
 * Layer: query/.  Calls quarry.h (table handles) and the session's own
 * statement execution (sql.h).
 *
 * DDL takes effect when it runs.  A table a block creates is remembered
 * (with the savepoint depth it was made at); ROLLBACK, a COMMIT that fails
 * or answers ROLLBACK, ROLLBACK TO a savepoint set before it, and a session
 * that ends inside the block drop it again (DROP TABLE, which also drops the
 * sequences its serial columns own), so the block's CREATE TABLE and its
 * writes to the table go or stay together.  Other sessions can see the
 * empty table before the block ends (PostgreSQL hides it until COMMIT).
 * Other DDL in a block is not undone (docs/sql-writes.md).
 */
#include "query/sql_int.h"
#include "query/sql_w.h"
#include "store/util.h"

#include <stdio.h>
#include <string.h>

int sqld_before_create(SqlCtx *cx, SqluState *st, const cJSON *body, bool *is_new)
{
    *is_new = false;
    const char *name = sqlj_str(sqlj_get(body, "relation"), "relname");
    if (!st->in_block || !name)
        return QR_OK;
    QrTable *t = NULL;
    QrError e;
    qr_error_clear(&e);
    int rc = qr_table_acquire(cx->sess->db, name, &t, &e);
    if (rc == QR_OK)
        qr_table_release(cx->sess->db, name);
    *is_new = rc == QR_ENOTFOUND; /* IF NOT EXISTS of an existing table creates nothing */
    return QR_OK;
}

int sqld_created(SqlCtx *cx, SqluState *st, const cJSON *body)
{
    const char *name = sqlj_str(sqlj_get(body, "relation"), "relname");
    if (!name || strlen(name) > QR_NAME_MAX)
        return QR_OK;
    if (st->n_undo == st->cap_undo) {
        int nc = st->cap_undo ? st->cap_undo * 2 : 4;
        char(*n)[QR_NAME_MAX + 1] = qr_realloc(st->undo, (size_t)nc * sizeof *n);
        if (!n)
            return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
        st->undo = n;
        st->cap_undo = nc;
    }
    snprintf(st->undo[st->n_undo++], sizeof st->undo[0], "%s", name);
    return QR_OK;
}

void sqld_undo_to(QrSqlSession *s, SqluState *st, int mark)
{
    while (st->n_undo > mark) {
        const char *name = st->undo[--st->n_undo];
        char sql[QR_NAME_MAX * 2 + 64];
        size_t o = (size_t)snprintf(sql, sizeof sql, "DROP TABLE IF EXISTS \"");
        for (const char *p = name; *p && o + 3 < sizeof sql; p++) {
            if (*p == '"')
                sql[o++] = '"';
            sql[o++] = *p;
        }
        snprintf(sql + o, sizeof sql - o, "\"");
        QrSqlResult *r = NULL;
        QrError e;
        qr_error_clear(&e);
        char status = s->txn_status;
        s->txn_status = status == 'E' ? 'T' : status; /* the drop must run */
        if (qr_sql_exec(s, sql, strlen(sql), &r, &e) != QR_OK)
            qr_log(QR_LOG_WARN, "could not drop table \"%s\" created by a rolled back "
                                "transaction: %s", name, e.message);
        s->txn_status = status;
        qr_sql_result_free(r);
    }
}
