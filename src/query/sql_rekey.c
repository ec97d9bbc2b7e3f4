/*
 * sql_rekey.c — statements that rebuild a table's storage: ALTER TABLE ...
 * ADD PRIMARY KEY (col) on a table made without a key (its documents move
 * from the hidden row id to `col`), and a full-text CREATE INDEX on a table
 * that holds rows (every document is analyzed again).
 *
 * Layer: query/.  Calls quarry.h, sequence.h, the SQL internals and cJSON.
 *
 * pg_dump writes every table without its key, loads the data, then adds
 * the key; pgbench -i does the same.  A Quarry document id is the primary
 * key, and a field's analysis is fixed once segments hold it, so the table
 * is rebuilt: every stored document is read, checked (a new key must be
 * present and unique: 23502 / 23505 otherwise) and written to a spare table
 * (quarry.h qr_spare_*) with the new schema and metadata.
 *
 * Outside a transaction block the table is claimed first (its users
 * finish, new ones wait, as PostgreSQL's ACCESS EXCLUSIVE lock makes them),
 * then copied, then exchanged with the spare in one atomic rename; the old
 * documents go with the spare.  A crash before the exchange leaves the old
 * table whole, after it the new one (spares are removed at the next open).
 * Inside a block the copy, with the block's own writes to the table, is
 * the block's until COMMIT (sqld_rebuild, sql_txn_rebuild.c).
 */
#include "query/query_int.h"
#include "query/sequence.h"
#include "query/sql_w.h"
#include "store/util.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Copy {
    SqlCtx *cx;
    const char *table;
    const SqlwRekey *how;
    QrBatch *batch;
    uint64_t n;
} Copy;

/* Put document d (as changed) into the copy; *replaced (may be NULL): its
 * key was there already. */
static int put_doc(Copy *c, const cJSON *d, bool *replaced)
{
    char *text = cJSON_PrintUnformatted(d);
    int rc = text ? qr_batch_put(c->batch, text, strlen(text), replaced, c->cx->err)
                  : qr_error_set(c->cx->err, QR_ENOMEM, "out of memory");
    cJSON_free(text);
    return rc;
}

/* A document of the old table keyed by a new row id from how->rowid_seq. */
static int put_numbered(Copy *c, cJSON *d)
{
    SqlCtx *cx = c->cx;
    int64_t id;
    int rc = seq_next(qr_db_dir(cx->sess->db), c->how->rowid_seq, &id, cx->err);
    cJSON_DeleteItemFromObjectCaseSensitive(d, SQLW_ROWID);
    if (rc == QR_OK && !cJSON_AddNumberToObject(d, SQLW_ROWID, (double)id))
        rc = qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    return rc == QR_OK ? put_doc(c, d, NULL) : rc;
}

static int copy_one(void *arg, const char *doc, size_t len, QrError *err)
{
    Copy *c = arg;
    SqlCtx *cx = c->cx;
    (void)err; /* errors go to cx->err, which the caller passed as err */
    int rc = QR_OK;
    if (!c->how->key_col && !c->how->rowid_seq && !c->how->drop_col && !c->how->rename_from) {
        rc = qr_batch_put(c->batch, doc, len, NULL, cx->err);
        return rc == QR_OK && ++c->n % 1024 == 0 ? sql_check(cx) : rc;
    }
    cJSON *d = cJSON_ParseWithLength(doc, len);
    if (d && c->how->drop_col)
        cJSON_DeleteItemFromObjectCaseSensitive(d, c->how->drop_col);
    cJSON *moved = d && c->how->rename_from
                       ? cJSON_DetachItemFromObjectCaseSensitive(d, c->how->rename_from)
                       : NULL;
    if (moved)
        cJSON_AddItemToObject(d, c->how->rename_to, moved);
    const cJSON *k = c->how->key_col ? cJSON_GetObjectItemCaseSensitive(d, c->how->key_col) : NULL;
    if (!d) {
        rc = qr_error_set(cx->err, QR_ECORRUPT, "a stored document of table \"%s\" is not JSON",
                          c->table);
    } else if (c->how->rowid_seq) {
        rc = put_numbered(c, d);
    } else if (!c->how->key_col) { /* the same key, a column less */
        rc = put_doc(c, d, NULL);
    } else if (!k || cJSON_IsNull(k)) {
        rc = sql_err_at(cx, -1, QR_ECONSTRAINT, "23502",
                        "column \"%s\" of relation \"%s\" contains null values", c->how->key_col,
                        c->table);
    } else {
        cJSON_DeleteItemFromObjectCaseSensitive(d, SQLW_ROWID);
        bool replaced = false;
        rc = put_doc(c, d, &replaced);
        if (rc == QR_OK && replaced) {
            char *kt = cJSON_PrintUnformatted(k);
            sql_err_at(cx, -1, QR_ECONSTRAINT, "23505", "could not create unique index \"%s_pkey\"",
                       c->table);
            qr_error_detail(cx->err, "Key (%s)=(%s) is duplicated.", c->how->key_col,
                            kt ? kt : "?");
            cJSON_free(kt);
            rc = QR_ECONSTRAINT;
        }
    }
    cJSON_Delete(d);
    if (rc == QR_OK && ++c->n % 1024 == 0)
        rc = sql_check(cx);
    return rc;
}

int sqlw_rebuild_copy(SqlCtx *cx, QrTable *from, QrTable *to, const SqlwRekey *how)
{
    Copy c = {cx, qr_table_name(from), how, NULL, 0};
    int rc = qr_batch_begin(to, &c.batch, cx->err);
    /* the latest commit (every commit below the write mark taken before is
     * in it), with the block's own writes to the table over it */
    SqluState *st = cx->sess->u_state;
    Snapshot *s = rc == QR_OK ? table_snapshot_latest(from->table) : NULL;
    if (s && st && st->in_block && !(s = sqlo_overlay(cx, st, from, s)))
        rc = cx->err->code ? (int)cx->err->code : QR_ENOMEM;
    if (rc == QR_OK)
        rc = snapshot_each_doc(s, copy_one, &c, cx->err);
    snapshot_release(s);
    if (rc == QR_OK)
        rc = qr_batch_commit(c.batch, cx->err);
    qr_batch_free(c.batch);
    return rc;
}

void sqlw_spare_id(const char *table, char *out, size_t cap)
{
    static _Atomic uint32_t counter;
    snprintf(out, cap, "%08x-%u", sqlcat_table_oid(table), atomic_fetch_add(&counter, 1) + 1);
}

/* Outside a block (or on a table the block created before any savepoint):
 * claim, copy, exchange, now. */
static int rebuild_now(SqlCtx *cx, QrTable *t, const QrSchema *ns, const SqlwRekey *how,
                       const cJSON *meta)
{
    char table[QR_NAME_MAX + 1]; /* a copy: the handle goes with the exchange */
    snprintf(table, sizeof table, "%s", qr_table_name(t));
    QrDb *db = cx->sess->db;
    char id[QR_NAME_MAX + 1];
    sqlw_spare_id(table, id, sizeof id);
    sqlw_release(cx->sess, table); /* the statement's own reference: the claim waits for all */
    int rc = qr_table_claim(db, table, SQLW_DROP_WAIT_MS, cx->err);
    if (rc != QR_OK)
        return rc;
    QrTable *to = NULL;
    rc = qr_table_get(db, table, &t, cx->err); /* the claim keeps it */
    if (rc == QR_OK)
        rc = qr_spare_create(db, id, table, ns, &to, cx->err);
    if (rc == QR_OK)
        rc = sqlw_rebuild_copy(cx, t, to, how);
    if (rc == QR_OK)
        rc = sqlw_spare_meta(db, id, meta, cx->err);
    qr_spare_close(to);
    if (rc == QR_OK)
        rc = qr_spare_swap(db, table, id, cx->err);
    qr_table_unclaim(db, table);
    qr_spare_drop(db, id, NULL); /* the old documents, or the failed copy */
    if (rc == QR_OK) {
        qr_db_ddl_bump(db); /* the metadata changed with the directory */
        sqld_meta_forget_table(cx->sess->u_state, table); /* it went in with the table */
        if (how->drop_seq && how->drop_seq[0])
            seq_drop(qr_db_dir(db), how->drop_seq, NULL);
    }
    return rc;
}

int sqlw_rebuild(SqlCtx *cx, QrTable *t, const QrSchema *ns, const SqlwRekey *how,
                 const cJSON *meta)
{
    static const SqlwRekey same = {0};
    SqluState *st = cx->sess->u_state;
    if (!how)
        how = &same;
    if (st && st->in_block && !st->undoing) /* the block's own copy, with its writes */
        return sqld_rebuild(cx, st, t, ns, how, meta);
    return rebuild_now(cx, t, ns, how, meta);
}

/* The schema of the rekeyed table: `col` becomes the key, the other fields
 * stay as they are (B-trees and analyzers included). */
static int new_schema(SqlCtx *cx, const QrSchema *old, const char *col, QrSchema **out)
{
    QrSchema *s = qr_arena_calloc(cx->arena, sizeof *s);
    if (!s)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    *s = *old;
    s->n_fields = 0;
    snprintf(s->primary_key, sizeof s->primary_key, "%s", col);
    for (int i = 0; i < old->n_fields; i++) {
        if (!strcmp(old->fields[i].name, col) || !strcmp(old->fields[i].name, SQLW_ROWID))
            continue;
        if (schema_add_field(s, &old->fields[i], cx->err) < 0)
            return cx->err->code;
    }
    *out = s;
    return QR_OK;
}

int sqlw_add_primary_key(SqlCtx *cx, QrTable *t, const char *col, int loc)
{
    const char *table = qr_table_name(t);
    cJSON *meta = sqlw_meta_load(cx, table);
    if (!meta)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    const QrSchema *s = qr_table_schema(t);
    int fi = schema_field_index(s, col);
    int rc = QR_OK;
    if (!sqlw_hidden_pk(meta))
        rc = sql_err_at(cx, loc, QR_EINVAL, "42P16",
                        "multiple primary keys for table \"%s\" are not allowed", table);
    else if (fi < 0)
        rc = sql_err_at(cx, loc, QR_ENOTFOUND, "42703",
                        "column \"%s\" named in key does not exist", col);
    else if (s->fields[fi].type != QR_FT_INT && s->fields[fi].type != QR_FT_KEYWORD &&
             s->fields[fi].type != QR_FT_TEXT)
        rc = sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000",
                        "primary key \"%s\" must be an integer or a string type", col);
    QrSchema *ns = NULL;
    if (rc == QR_OK && (rc = new_schema(cx, s, col, &ns)) == QR_OK)
        sqld_schema_settle(cx->sess, table, ns);
    /* the metadata: the column is the key, the row id and its sequence go */
    char seq[SEQ_NAME_MAX + 1] = "";
    if (rc == QR_OK) {
        const char *rowid_seq = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(sqlw_meta_col(meta, SQLW_ROWID), "sequence"));
        if (rowid_seq)
            snprintf(seq, sizeof seq, "%s", rowid_seq);
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "hidden_pk");
        cJSON_DeleteItemFromObjectCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(meta, "columns"), SQLW_ROWID);
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "pk_type");
        cJSON_AddStringToObject(meta, "pk_type", s->fields[fi].type == QR_FT_INT ? "int8" : "text");
        cJSON *mc = (cJSON *)sqlw_meta_col(meta, col);
        if (mc && !cJSON_GetObjectItemCaseSensitive(mc, "not_null"))
            cJSON_AddTrueToObject(mc, "not_null");
        SqlwRekey how = {.key_col = col, .drop_seq = seq};
        rc = sqlw_rebuild(cx, t, ns, &how, meta);
    }
    cJSON_Delete(meta);
    return rc;
}
