/*
 * sql_rekey.c — ALTER TABLE ... ADD PRIMARY KEY (col) on a table made
 * without a key: its documents move from the hidden row id to `col`.
 *
 * Layer: query/.  Calls quarry.h, sequence.h, the SQL internals and cJSON.
 *
 * pg_dump writes every table without its key, loads the data, then adds
 * the key; pgbench -i does the same.  A Quarry document id is the primary
 * key, so the table is rebuilt: every document is read by its row id,
 * checked (the key must be present and unique: 23502 / 23505 otherwise) and
 * written to a new table keyed by `col`; the new table then takes the old
 * one's place in one atomic directory exchange (qr_table_swap_wait), and
 * the old documents are dropped with the spare table.  A crash before the
 * exchange leaves the old table whole (the spare is dropped on retry); a
 * crash after it leaves the new one whole.
 */
#include "query/sequence.h"
#include "query/sql_w.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pg_query.h>

/* The row ids of every document of `table` (SELECT _rowid FROM t), in the
 * arena. */
static int row_ids(SqlCtx *cx, const char *table, QrSqlResult *res)
{
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT \"%s\" FROM \"%s\"", SQLW_ROWID, table);
    PgQueryParseResult pr = pg_query_parse(sql);
    if (pr.error) {
        pg_query_free_parse_result(pr);
        return qr_error_set(cx->err, QR_EINTERNAL, "cannot build the row id query");
    }
    cJSON *root = cJSON_Parse(pr.parse_tree);
    pg_query_free_parse_result(pr);
    const cJSON *node = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "stmts"), 0), "stmt");
    int rc = node ? sql_query_run(cx, node, res) : qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    cJSON_Delete(root);
    return rc;
}

/* The schema of the rebuilt table: `col` becomes the key, the other fields
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

/* Copy every document into `to`, keyed by `col`. */
static int copy_docs(SqlCtx *cx, QrTable *from, QrTable *to, const char *col,
                     const QrSqlResult *ids)
{
    const char *table = qr_table_name(from);
    QrBuf doc;
    qr_buf_init(&doc);
    QrBatch *batch = NULL;
    int rc = qr_batch_begin(to, &batch, cx->err);
    for (uint64_t i = 0; rc == QR_OK && i < ids->n_rows; i++) {
        char key[32];
        snprintf(key, sizeof key, "%" PRId64, ids->vals[i * (uint64_t)ids->n_cols].u.i);
        doc.len = 0;
        QrError e;
        qr_error_clear(&e);
        if (qr_get(from, key, strlen(key), &doc, &e) != QR_OK) {
            if (e.code == QR_ENOTFOUND) /* deleted meanwhile */
                continue;
            qr_error_copy(cx->err, &e);
            rc = e.code;
            break;
        }
        cJSON *d = cJSON_ParseWithLength((const char *)doc.data, doc.len);
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(d, col);
        if (!d) {
            rc = qr_error_set(cx->err, QR_ECORRUPT, "stored document %s of table \"%s\" is not JSON",
                              key, table);
        } else if (!k || cJSON_IsNull(k)) {
            sql_err_at(cx, -1, QR_ECONSTRAINT, "23502",
                       "column \"%s\" of relation \"%s\" contains null values", col, table);
            rc = QR_ECONSTRAINT;
        } else {
            cJSON_DeleteItemFromObjectCaseSensitive(d, SQLW_ROWID);
            char *text = cJSON_PrintUnformatted(d);
            bool replaced = false;
            rc = text ? qr_batch_put(batch, text, strlen(text), &replaced, cx->err)
                      : qr_error_set(cx->err, QR_ENOMEM, "out of memory");
            if (rc == QR_OK && replaced) {
                char *kt = cJSON_PrintUnformatted(k);
                sql_err_at(cx, -1, QR_ECONSTRAINT, "23505",
                           "could not create unique index \"%s_pkey\"", table);
                qr_error_detail(cx->err, "Key (%s)=(%s) is duplicated.", col, kt ? kt : "?");
                cJSON_free(kt);
                rc = QR_ECONSTRAINT;
            }
            cJSON_free(text);
        }
        cJSON_Delete(d);
        if (rc == QR_OK)
            rc = sql_check(cx);
    }
    qr_buf_free(&doc);
    if (rc == QR_OK)
        rc = qr_batch_commit(batch, cx->err);
    qr_batch_free(batch);
    return rc;
}

int sqlw_add_primary_key(SqlCtx *cx, QrTable *t, const char *col, int loc)
{
    char table[QR_NAME_MAX + 1]; /* a copy: the handle goes with the swap */
    snprintf(table, sizeof table, "%s", qr_table_name(t));
    QrDb *db = cx->sess->db;
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
    SqluState *us = cx->sess->u_state;
    for (int i = 0; rc == QR_OK && us && i < us->n_ops; i++)
        if (!strcmp(us->ops[i].table, table)) {
            /* they would commit into the rebuilt table under their row ids */
            rc = sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000",
                            "ALTER TABLE ADD PRIMARY KEY cannot follow writes to \"%s\" in the "
                            "same transaction",
                            table);
            qr_error_hint(cx->err, "COMMIT the writes first");
        }
    char spare[QR_NAME_MAX + 1];
    snprintf(spare, sizeof spare, "_rekey_%08x", sqlcat_table_oid(table));
    QrSqlResult *ids = qr_arena_calloc(cx->arena, sizeof *ids);
    QrSchema *ns = NULL;
    QrTable *to = NULL;
    if (rc == QR_OK && !ids)
        rc = qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    if (rc == QR_OK) {
        qr_table_drop_wait(db, spare, 10000, NULL); /* a spare left by a crash */
        rc = row_ids(cx, table, ids);
    }
    if (rc == QR_OK && (rc = new_schema(cx, s, col, &ns)) == QR_OK) {
        sqld_schema_settle(cx->sess, table, ns);
        rc = qr_table_create(db, spare, ns, &to, cx->err);
    }
    if (rc == QR_OK)
        rc = copy_docs(cx, t, to, col, ids);
    /* the metadata: the column is the key, the row id and its sequence go */
    const char *rowid_seq = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(sqlw_meta_col(meta, SQLW_ROWID), "sequence"));
    char seq[SEQ_NAME_MAX + 1] = "";
    if (rowid_seq)
        snprintf(seq, sizeof seq, "%s", rowid_seq);
    if (rc == QR_OK) {
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "hidden_pk");
        cJSON_DeleteItemFromObjectCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(meta, "columns"), SQLW_ROWID);
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "pk_type");
        cJSON_AddStringToObject(meta, "pk_type", s->fields[fi].type == QR_FT_INT ? "int8" : "text");
        cJSON *mc = (cJSON *)sqlw_meta_col(meta, col);
        if (mc && !cJSON_GetObjectItemCaseSensitive(mc, "not_null"))
            cJSON_AddTrueToObject(mc, "not_null");
        rc = sqlw_meta_save_db(db, spare, meta, cx->err); /* the new table, swapped in now */
    }
    cJSON_Delete(meta);
    if (rc == QR_OK) {
        sqlw_release(cx->sess, table); /* the statement's own reference */
        rc = qr_table_swap_wait(db, table, spare, 10000, cx->err);
    }
    if (rc == QR_OK) /* the block's staged definition went in with the new table */
        sqld_meta_forget_table(cx->sess->u_state, table);
    if (to || rc == QR_OK)
        qr_table_drop_wait(db, spare, 10000, NULL); /* the old documents, or the failed copy */
    if (rc == QR_OK && seq[0])
        seq_drop(qr_db_dir(db), seq, NULL);
    return rc;
}
