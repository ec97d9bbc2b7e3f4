/*
 * sql_txn_ddl.c — CREATE TABLE and CREATE INDEX inside a transaction
 * block, undone by ROLLBACK.
 *
 * Layer: query/.  Calls quarry.h (table handles) and the session's own
 * statement execution (sql.h).
 *
 * DDL takes effect when it runs.  For a table or B-tree index a block
 * creates, the statement that drops it again is remembered (savepoints
 * record how many there were); ROLLBACK, a COMMIT that fails or answers
 * ROLLBACK, ROLLBACK TO a savepoint set before it, and a session that ends
 * inside the block run them, newest first (DROP TABLE also drops the
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
        if (qr_sql_exec(s, sql, strlen(sql), &r, &e) != QR_OK)
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
