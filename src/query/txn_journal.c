/*
 * txn_journal.c — atomic commit of an SQL transaction that writes several
 * tables: a redo journal in front of the per-table commits.
 *
 * Layer: query/.  Calls quarry.h (tables, batches) and the base kit (files,
 * CRC-32C).
 *
 * Each table has its own WAL, so one table's COMMIT record cannot cover
 * another's.  A transaction that touches two or more tables therefore
 * writes all its ops into one journal file first, made durable with
 * qr_file_write_atomic (tmp + rename + fsync of file and directory): from
 * that moment it is committed.  Then each table's batch commits as before,
 * and the journal is unlinked (and the unlink made durable) before the
 * process-wide apply lock is released, so no later SQL commit can come
 * before the journal is gone.  Opening the data directory (qr_db_open,
 * writable opens) applies every journal still there -- a crash between
 * its rename and its unlink -- to every table named, as one batch per table
 * (puts are upserts and deletes of absent keys do nothing, so ops a table
 * already committed are applied again harmlessly), then removes it.  A
 * crash before the rename leaves a ".tmp" that is removed unread: nothing
 * of the transaction was applied anywhere.  So recovery applies whole
 * transactions only.
 *
 * A transaction block with DDL to publish (DROP TABLE, ALTER TABLE, DROP
 * INDEX: sql_txn_ddl.c) journals every COMMIT (one table or none written
 * too): its DDL follows its data ops and is done after they committed and
 * before the journal goes -- sql.json files written, B-trees dropped, tables
 * dropped with the sequences they own -- so a crash in between completes it
 * at the next open, and a crash before the rename leaves all as it was.
 *
 * A block that rebuilt a table (ADD PRIMARY KEY, a full-text CREATE INDEX:
 * sql_txn_rebuild.c) wrote the table's writes into its spare, and journals
 * the exchange of the two (kind 6, version 3).  Recovery does the exchange
 * first -- when the spare is still the one the journal names (its
 * directory identity), i.e. the crash came before the exchange -- then the
 * data ops (into the rebuilt table), the other DDL, and removes the spare
 * (which holds the old documents by then).
 *
 * Format of <data>/txn/<16 hex digits>.qtxj (little endian):
 *
 *   u32 magic "QTXJ"  u32 version (1; 2 with DDL; 3 with an exchange)  u32 n_ops
 *   n_ops x { u8 kind (1 put, 2 delete; version 2 also: 3 drop table,
 *                      4 sql.json, 5 drop B-tree; version 3 also 6 exchange,
 *                      7 drop sequences)
 *             u16 table_len  table bytes
 *             u32 key_len  key (JSON text; the column for 5; the spare's id
 *                               for 6; 0 for 3, 4)
 *             u32 doc_len  doc (JSON: puts, the sql.json of 4; the spare's
 *                               directory identity in decimal for 6; sequence
 *                               names, '\n'-separated, for 7; 0 otherwise) }
 *   u32 CRC-32C of every byte before it
 *
 * A file that is short, has bytes left over, or fails its checksum is
 * damaged: qr_db_open fails naming it (QR_ECORRUPT), because applying part
 * of a committed transaction is the one thing the journal exists to avoid.
 */
#include "query/sequence.h"
#include "query/sql_int.h"
#include "query/sql_w.h"
#include "store/buf.h"
#include "store/crc32c.h"
#include "store/util.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TXNJ_MAGIC 0x4A585451u /* "QTXJ" */
#define TXNJ_VERSION 1u      /* data ops only */
#define TXNJ_VERSION_DDL 2u /* also DDL (kinds 3-5) */
#define TXNJ_VERSION_SWAP 3u /* also exchanges with spares (kind 6) */

static _Atomic uint64_t journal_counter;

static void put_u32(QrBuf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    qr_buf_append(b, x, 4);
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void journal_dir(const QrDb *db, char *out, size_t cap)
{
    snprintf(out, cap, "%s/txn", qr_db_dir(db));
}

/* One op's bytes (kind 3, a dropped table, has no key or doc). */
static void put_op(QrBuf *b, uint8_t kind, const char *table, const char *key, const char *doc,
                   size_t doc_len)
{
    size_t tl = strlen(table), kl = key ? strlen(key) : 0;
    qr_buf_append(b, &kind, 1);
    uint8_t t16[2] = {(uint8_t)tl, (uint8_t)(tl >> 8)};
    qr_buf_append(b, t16, 2);
    qr_buf_append(b, table, tl);
    put_u32(b, (uint32_t)kl);
    qr_buf_append(b, key, kl);
    put_u32(b, doc ? (uint32_t)doc_len : 0);
    if (doc)
        qr_buf_append(b, doc, doc_len);
}

int txnj_write(QrDb *db, const TxnOp *ops, int n_ops, const TxnjItem *ddl, int n_ddl,
               char *path, size_t path_cap, QrError *err)
{
    char dir[4096];
    journal_dir(db, dir, sizeof dir);
    int rc = qr_mkdir_p(dir, err);
    if (rc)
        return rc;
    QrBuf b;
    qr_buf_init(&b);
    put_u32(&b, TXNJ_MAGIC);
    uint32_t version = n_ddl ? TXNJ_VERSION_DDL : TXNJ_VERSION;
    for (int i = 0; i < n_ddl; i++)
        if (ddl[i].kind >= TXNJ_SWAP)
            version = TXNJ_VERSION_SWAP;
    put_u32(&b, version);
    put_u32(&b, (uint32_t)(n_ops + n_ddl));
    for (int i = 0; i < n_ops; i++)
        put_op(&b, ops[i].is_delete ? 2 : 1, ops[i].table, ops[i].key,
               ops[i].is_delete ? NULL : ops[i].doc, ops[i].doc_len);
    for (int i = 0; i < n_ddl; i++)
        put_op(&b, ddl[i].kind, ddl[i].table, ddl[i].key, ddl[i].doc, ddl[i].doc_len);
    if (!qr_buf_ok(&b)) {
        qr_buf_free(&b);
        return qr_error_set(err, QR_ENOMEM, "out of memory writing the transaction journal");
    }
    put_u32(&b, qr_crc32c(0, b.data, b.len));
    /* names sort in commit order: the clock, then a counter */
    snprintf(path, path_cap, "%s/%016llx.qtxj", dir,
             (unsigned long long)(qr_now_ns() / 1000 + atomic_fetch_add(&journal_counter, 1)));
    rc = qr_buf_ok(&b) ? qr_file_write_atomic(path, b.data, b.len, true, err)
                       : qr_error_set(err, QR_ENOMEM, "out of memory writing the transaction "
                                                      "journal");
    qr_buf_free(&b);
    return rc;
}

static int txnj_remove(QrDb *db, const char *path, QrError *err)
{
    if (unlink(path) != 0)
        return qr_error_set(err, QR_EIO, "could not remove transaction journal \"%s\"", path);
    char dir[4096];
    journal_dir(db, dir, sizeof dir);
    return qr_fsync_dir(dir, err);
}

void txnj_done(QrDb *db, const char *path)
{
    QrError e;
    qr_error_clear(&e);
    if (txnj_remove(db, path, &e) != QR_OK)
        qr_log(QR_LOG_WARN, "%s (the transaction is committed; the journal would be applied "
                            "again at the next open)", e.message);
}

/* One decoded op: views into the file's bytes. */
typedef struct JOp {
    uint8_t kind;          /* 1 put, 2 delete, TXNJ_* (applied after every data op) */
    bool is_delete;
    bool is_drop;          /* kind >= 3: DDL, not a data op */
    char table[QR_NAME_MAX + 1];
    const char *key;
    size_t key_len;
    const char *doc;
    size_t doc_len;
} JOp;

static int corrupt(const char *path, const char *what, QrError *err)
{
    qr_error_set(err, QR_ECORRUPT, "transaction journal \"%s\" is damaged: %s", path, what);
    qr_error_hint(err, "the transaction it holds was committed; restore the data directory "
                       "from a backup, or remove the file to give that transaction up");
    return QR_ECORRUPT;
}

/* Decode the whole file into ops (qr_malloc'd array) after checking it. */
static int decode(const char *path, const uint8_t *p, size_t len, JOp **out, int *n_out,
                  QrError *err)
{
    if (len < 16)
        return corrupt(path, "too short", err);
    if (get_u32(p + len - 4) != qr_crc32c(0, p, len - 4))
        return corrupt(path, "checksum mismatch", err);
    uint32_t version = get_u32(p + 4);
    if (get_u32(p) != TXNJ_MAGIC || version < TXNJ_VERSION || version > TXNJ_VERSION_SWAP)
        return corrupt(path, "bad magic or version", err);
    uint8_t max_kind = version == TXNJ_VERSION_SWAP  ? TXNJ_DROP_SEQS
                       : version == TXNJ_VERSION_DDL ? TXNJ_DROP_BTREE
                                                     : 2;
    uint32_t n = get_u32(p + 8);
    size_t end = len - 4, off = 12;
    if (n > end / 11)
        return corrupt(path, "op count beyond the file", err);
    JOp *ops = qr_calloc((size_t)n + 1, sizeof *ops);
    if (!ops)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        JOp *o = &ops[i];
        if (end - off < 3)
            goto bad;
        uint8_t kind = p[off];
        size_t tl = (size_t)p[off + 1] | (size_t)p[off + 2] << 8;
        off += 3;
        if (kind < 1 || kind > max_kind || tl == 0 || tl > QR_NAME_MAX || end - off < tl + 4)
            goto bad;
        o->kind = kind;
        o->is_delete = kind == 2;
        o->is_drop = kind >= TXNJ_DROP_TABLE;
        memcpy(o->table, p + off, tl);
        off += tl;
        o->key_len = get_u32(p + off);
        off += 4;
        if (end - off < o->key_len + (size_t)4)
            goto bad;
        o->key = (const char *)p + off;
        off += o->key_len;
        o->doc_len = get_u32(p + off);
        off += 4;
        bool has_key = kind <= 2 || kind == TXNJ_DROP_BTREE || kind == TXNJ_SWAP;
        bool has_doc = kind == 1 || kind == TXNJ_META || kind == TXNJ_SWAP || kind == TXNJ_DROP_SEQS;
        if (end - off < o->doc_len || (!has_doc && o->doc_len) || (has_key != (o->key_len > 0)))
            goto bad;
        o->doc = (const char *)p + off;
        off += o->doc_len;
    }
    if (off != end)
        goto bad;
    *out = ops;
    *n_out = (int)n;
    return QR_OK;
bad:
    qr_free(ops);
    return corrupt(path, "an op runs past the end, or bytes are left over", err);
}

/* The DDL a journal holds, as the COMMIT that wrote it did after its data
 * ops: sql.json files written, B-trees dropped, then tables dropped (with
 * the sequences they own).  What is already done (a table gone, a B-tree
 * not there) is fine. */
static int apply_ddl(QrDb *db, const JOp *ops, int n, QrError *err)
{
    int rc = QR_OK;
    bool dropped = false;
    static const uint8_t order[] = {TXNJ_META, TXNJ_DROP_BTREE, TXNJ_DROP_TABLE, TXNJ_DROP_SEQS};
    for (size_t k = 0; k < sizeof order; k++) {
        uint8_t kind = order[k];
        for (int i = 0; rc == QR_OK && i < n; i++) {
            const JOp *o = &ops[i];
            if (o->kind != kind)
                continue;
            if (kind == TXNJ_DROP_SEQS) { /* a rebuilt table's old sequences */
                char *names = qr_strndup(o->doc, o->doc_len);
                rc = names ? seq_drop_names(qr_db_dir(db), names, err)
                           : qr_error_set(err, QR_ENOMEM, "out of memory");
                qr_free(names);
                continue;
            }
            if (kind == TXNJ_DROP_TABLE) {
                dropped = true;
                rc = qr_table_drop(db, o->table, err);
                if (rc == QR_OK || rc == QR_ENOTFOUND) {
                    qr_error_clear(err);
                    rc = seq_drop_owned(qr_db_dir(db), o->table, err);
                }
                continue;
            }
            QrTable *t;
            rc = qr_table_acquire(db, o->table, &t, err);
            if (rc == QR_ENOTFOUND) { /* dropped since */
                qr_error_clear(err);
                rc = QR_OK;
                continue;
            }
            if (rc)
                break;
            if (kind == TXNJ_META) {
                cJSON *m = cJSON_ParseWithLength(o->doc, o->doc_len);
                rc = m ? sqlw_meta_save_db(db, o->table, m, err)
                       : qr_error_set(err, QR_ECORRUPT, "transaction journal: bad sql.json of "
                                                        "table \"%s\"", o->table);
                cJSON_Delete(m);
            } else {
                char col[QR_NAME_MAX + 1];
                snprintf(col, sizeof col, "%.*s", (int)o->key_len, o->key);
                int fi = schema_field_index(qr_table_schema(t), col);
                if (fi >= 0 && qr_table_schema(t)->fields[fi].btree)
                    rc = qr_table_drop_index(t, col, err);
            }
            qr_table_release(db, o->table);
        }
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/tables", qr_db_dir(db));
    return rc == QR_OK && dropped ? qr_fsync_dir(dir, err) : rc;
}

/* Exchange (kind 6) or, after, drop the spares of rebuilt tables.  The
 * exchange happens only while the spare is still the copy the COMMIT made:
 * after it, the spare holds the old documents. */
static int apply_swaps(QrDb *db, const JOp *ops, int n, bool drop, QrError *err)
{
    int rc = QR_OK;
    for (int i = 0; rc == QR_OK && i < n; i++) {
        if (ops[i].kind != TXNJ_SWAP)
            continue;
        char id[QR_NAME_MAX + 1], ident[32];
        snprintf(id, sizeof id, "%.*s", (int)ops[i].key_len, ops[i].key);
        snprintf(ident, sizeof ident, "%.*s", (int)ops[i].doc_len, ops[i].doc);
        if (drop)
            rc = qr_spare_drop(db, id, err);
        else if (qr_spare_ident(db, id) == strtoull(ident, NULL, 10))
            rc = qr_spare_swap(db, ops[i].table, id, err);
    }
    return rc;
}

/* Apply the exchanges with spares, the ops, one batch per table, in the
 * order the tables appear, then the other DDL, then remove the spares. */
static int apply(QrDb *db, const JOp *ops, int n, QrError *err)
{
    int rc = apply_swaps(db, ops, n, false, err);
    if (rc != QR_OK)
        return rc;
    bool *done = qr_calloc((size_t)n + 1, sizeof *done);
    if (!done)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    for (int i = 0; rc == QR_OK && i < n; i++) {
        if (done[i] || ops[i].is_drop)
            continue;
        QrTable *t;
        QrBatch *b = NULL;
        rc = qr_table_acquire(db, ops[i].table, &t, err);
        if (rc == QR_ENOTFOUND) { /* dropped since: nothing to apply to */
            qr_error_clear(err);
            rc = QR_OK;
            for (int j = i; j < n; j++)
                done[j] |= !strcmp(ops[j].table, ops[i].table);
            continue;
        }
        if (rc)
            break;
        rc = qr_batch_begin(t, &b, err);
        for (int j = i; rc == QR_OK && j < n; j++) {
            if (done[j] || ops[j].is_drop || strcmp(ops[j].table, ops[i].table) != 0)
                continue;
            done[j] = true;
            rc = ops[j].is_delete
                     ? qr_batch_delete(b, ops[j].key, ops[j].key_len, NULL, err)
                     : qr_batch_put(b, ops[j].doc, ops[j].doc_len, NULL, err);
        }
        if (rc == QR_OK)
            rc = qr_batch_commit(b, err);
        qr_batch_free(b);
        qr_table_release(db, ops[i].table);
    }
    qr_free(done);
    if (rc == QR_OK)
        rc = apply_ddl(db, ops, n, err);
    return rc == QR_OK ? apply_swaps(db, ops, n, true, err) : rc;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int txnj_recover(QrDb *db, int *n_applied, QrError *err)
{
    *n_applied = 0;
    char dir[4096];
    journal_dir(db, dir, sizeof dir);
    DIR *d = opendir(dir);
    if (!d)
        return QR_OK; /* no multi-table transaction ever committed here */
    char **names = NULL;
    int n = 0, cap = 0, rc = QR_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        char path[4096 + 300];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (l > 4 && !strcmp(e->d_name + l - 4, ".tmp")) {
            unlink(path); /* never renamed: never committed, applied nowhere */
            continue;
        }
        if (l < 6 || strcmp(e->d_name + l - 5, ".qtxj") != 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 4;
            char **nn = qr_realloc(names, (size_t)cap * sizeof *nn);
            if (!nn) {
                rc = qr_error_set(err, QR_ENOMEM, "out of memory");
                break;
            }
            names = nn;
        }
        if (!(names[n] = qr_strdup(path))) {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory");
            break;
        }
        n++;
    }
    closedir(d);
    if (n > 1)
        qsort(names, (size_t)n, sizeof *names, cmp_names);
    for (int i = 0; rc == QR_OK && i < n; i++) {
        uint8_t *data = NULL;
        size_t len = 0;
        JOp *ops = NULL;
        int n_ops = 0;
        rc = qr_file_read_all(names[i], &data, &len, err);
        if (rc == QR_OK)
            rc = decode(names[i], data, len, &ops, &n_ops, err);
        if (rc == QR_OK)
            rc = apply(db, ops, n_ops, err);
        if (rc == QR_OK)
            rc = txnj_remove(db, names[i], err);
        if (rc == QR_OK) {
            (*n_applied)++;
            qr_log(QR_LOG_INFO, "transaction journal \"%s\": %d ops applied after a crash",
                   names[i], n_ops);
        }
        qr_free(ops);
        qr_free(data);
    }
    for (int i = 0; i < n; i++)
        qr_free(names[i]);
    qr_free(names);
    return rc;
}
