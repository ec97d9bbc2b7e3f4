/*
 * sql_txn_ddl.c — DDL inside a transaction block, undone by ROLLBACK and
 * published by COMMIT.
 *
 * Layer: query/.  Calls quarry.h (table handles), sequence.h and the
 * session's own statement execution (sql.h).
 *
 * CREATE TABLE and a B-tree CREATE INDEX's B-tree take effect when they
 * run; the statement that drops the new object again is remembered
 * (savepoints record how many there were); ROLLBACK, a COMMIT that fails or
 * answers ROLLBACK, ROLLBACK TO a savepoint set before it, and a session
 * that ends inside the block run them, newest first (DROP TABLE also drops
 * the sequences its serial columns own), so the block's CREATE TABLE and
 * its writes to the table go or stay together.  Until the block ends, a
 * table it created is hidden from other SQL sessions (a process-wide
 * registry consulted by sqld_hidden), as PostgreSQL hides it until COMMIT;
 * the HTTP API does not hide it.  A B-tree CREATE INDEX's name is staged
 * metadata (below), published at COMMIT; the B-tree it made is in the same
 * registry, so other sessions' catalogs do not show it either, and its
 * undo (UNDO_BTREE, not SQL) drops it unless an index then names the
 * column.
 *
 * DROP TABLE in a block is deferred: the table is only remembered, and
 * hidden from the session (sqld_hidden, asked wherever the session looks
 * a table up), while other sessions go on using it.  COMMIT claims the
 * tables (waiting for their users), discards the block's writes to them,
 * journals the drops with the block's writes (txn_journal.c: the commit
 * point), commits the writes, drops the tables and only then removes the
 * journal, so a crash anywhere leaves either all of it or none of it.
 * ROLLBACK [TO] forgets the drops after the mark, and the tables are back.
 *
 * ALTER TABLE ... ALTER COLUMN and DROP INDEX in a block change only the
 * table's metadata (sql.json): sqlw_meta_save stages it in the session
 * (SqluState.meta, with the committed copy it started from), every
 * sqlw_meta_load of the session reads the staged copy, other sessions the
 * committed one; a dropped index's B-tree is remembered.  COMMIT checks
 * under the apply lock that nobody changed the committed copy since (else
 * 40001), journals the new sql.json files and B-tree drops with the writes,
 * and publishes them after the writes committed.  Savepoints keep a copy of
 * the staged metadata; ROLLBACK forgets it.  A B-tree CREATE INDEX's name
 * is staged the same way.  ADD COLUMN on a table the block created changes
 * storage when it runs, so its metadata is committed then too
 * (sqld_meta_now), the staged copy following along.
 *
 * ADD COLUMN on an older table (and ADD COLUMN ... DEFAULT / NOT NULL
 * outside a block, whose rewritten rows must commit with the column) adds
 * the storage field at once, but only after the committed sql.json lists
 * it in "pending_columns": SQL shows a pending field only where the
 * sql.json it reads also has its entry under "columns", i.e. the block's
 * staged copy, until COMMIT publishes (and journals) that copy with the
 * rows.  A rollback forgets the copy; the unshown field is taken over by
 * the next ADD COLUMN of the name (sql_ddl.c).  A process-wide registration
 * (the created registry, marked `column`) makes another session's ADD
 * COLUMN of the name 40001 while the block is open.
 *
 * ADD PRIMARY KEY and a full-text CREATE INDEX rebuild the table into a
 * copy the block reads and writes until COMMIT exchanges it with the table
 * (sql_txn_rebuild.c).
 */
#include "query/sequence.h"
#include "query/sql_int.h"
#include "query/sql_w.h"
#include "store/util.h"

#include <pg_query.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* First byte of an undo entry that is not SQL: UNDO_BTREE table UNDO_BTREE col;
 * UNDO_COLUMN table: nothing to run (ADD COLUMN's staged entry goes with the
 * staged metadata), it only marks where the column's registration lies. */
#define UNDO_BTREE '\x01'
#define UNDO_COLUMN '\x02'

static bool names_index_on(const cJSON *meta, const char *col);

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
    st->creating[0] = 0;
    st->creating_col[0] = 0;
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
        snprintf(st->creating, sizeof st->creating, "%s", table); /* hidden once made */
        return QR_OK;
    }
    char idx[2 * QR_NAME_MAX + 8];
    const char *col = sqlj_str(sqlj_is(cJSON_GetArrayItem(sqlj_get(body, "indexParams"), 0),
                                       "IndexElem"),
                               "name");
    if (!btree_index_name(body, idx, sizeof idx) || strlen(col) > QR_NAME_MAX)
        return QR_OK;
    /* the name is staged (a rollback forgets it); the B-tree, if this
     * statement makes it, is undone here */
    QrTable *t = NULL;
    QrError e;
    qr_error_clear(&e);
    if (qr_table_acquire(cx->sess->db, table, &t, &e) != QR_OK)
        return QR_OK;
    QrTable *v = sqld_view(cx->sess, table); /* the block's rebuilt copy */
    const QrSchema *sc = qr_table_schema(v ? v : t);
    int fi = schema_field_index(sc, col);
    bool made = fi >= 0 && !sc->fields[fi].btree;
    qr_table_release(cx->sess->db, table);
    if (!made)
        return QR_OK;
    snprintf(undo, undo_cap, "%c%s%c%s", UNDO_BTREE, table, UNDO_BTREE, col);
    snprintf(st->creating, sizeof st->creating, "%s", table);
    snprintf(st->creating_col, sizeof st->creating_col, "%s", col);
    return QR_OK;
}

/* A block's CREATE INDEX made the B-tree on table.col: a rollback drops it
 * unless an index names the column then (committed, or staged by what the
 * block keeps: the staged metadata is restored before undo runs). */
static void undo_btree(QrSqlSession *s, const char *table, const char *col)
{
    cJSON *m = sqlw_meta_load_db(s->db, table);
    bool named = names_index_on(m, col) || names_index_on(sqld_meta_staged(s, table), col);
    cJSON_Delete(m);
    QrTable *t = NULL;
    QrError e;
    qr_error_clear(&e);
    if (named || qr_table_acquire(s->db, table, &t, &e) != QR_OK)
        return; /* kept, or the table is gone */
    int fi = schema_field_index(qr_table_schema(t), col);
    if (fi >= 0 && qr_table_schema(t)->fields[fi].btree && qr_table_drop_index(t, col, &e) != QR_OK)
        qr_log(QR_LOG_WARN, "could not drop the B-tree on %s.%s of a rolled back transaction: %s",
               table, col, e.message);
    qr_table_release(s->db, table);
}

/* ---- tables created by open blocks: hidden from other sessions ---- */

/* One table a session's open block created (registered when its CREATE
 * succeeded), hidden from every other session until the block ends. */
typedef struct Created {
    const QrDb *db;
    const QrSqlSession *owner;
    int undo_at;                /* its undo statement's index in the owner's list */
    char name[QR_NAME_MAX + 1];
    char col[QR_NAME_MAX + 1];  /* a B-tree on this column of table `name`; "": the table */
    bool column;                /* not a B-tree: col is a column the block is adding */
} Created;

static pthread_mutex_t created_lock = PTHREAD_MUTEX_INITIALIZER;
static Created *created;        /* guarded by created_lock */
static int n_created, cap_created;
static _Atomic int any_created; /* n_created, read without the lock */

static bool created_add(const QrSqlSession *s, int undo_at, const char *name, const char *col,
                        bool column)
{
    pthread_mutex_lock(&created_lock);
    bool ok = true;
    if (n_created == cap_created) {
        int nc = cap_created ? cap_created * 2 : 8;
        Created *n = qr_realloc(created, (size_t)nc * sizeof *n);
        if ((ok = n != NULL)) {
            created = n;
            cap_created = nc;
        }
    }
    if (ok) {
        Created *c = &created[n_created++];
        *c = (Created){.db = s->db, .owner = s, .undo_at = undo_at, .column = column};
        snprintf(c->name, sizeof c->name, "%s", name);
        snprintf(c->col, sizeof c->col, "%s", col);
        atomic_store(&any_created, n_created);
    }
    pthread_mutex_unlock(&created_lock);
    return ok;
}

/* Forget the owner's tables whose undo statements are from `mark` on. */
static void created_forget(const QrSqlSession *s, int mark)
{
    if (!atomic_load(&any_created))
        return;
    bool any = false;
    pthread_mutex_lock(&created_lock);
    for (int i = n_created - 1; i >= 0; i--)
        if (created[i].owner == s && created[i].undo_at >= mark) {
            created[i] = created[--n_created];
            any = true;
        }
    atomic_store(&any_created, n_created);
    pthread_mutex_unlock(&created_lock);
    if (any)
        qr_db_ddl_bump(s->db); /* other sessions see them now (or never) */
}

/* Is `name` a table (col ""), B-tree or (column) column another session's
 * open block created? */
static bool created_by_other(const QrSqlSession *s, const char *name, const char *col,
                             bool column)
{
    if (!atomic_load(&any_created))
        return false;
    bool hit = false;
    pthread_mutex_lock(&created_lock);
    for (int i = 0; i < n_created && !hit; i++)
        hit = created[i].db == s->db && created[i].owner != s && !strcmp(created[i].name, name) &&
              !strcmp(created[i].col, col) && created[i].column == column;
    pthread_mutex_unlock(&created_lock);
    return hit;
}

bool sqld_btree_of_other(const QrSqlSession *s, const char *table, const char *col)
{
    return s && table && col && col[0] && created_by_other(s, table, col, false);
}

bool sqld_column_of_other(const QrSqlSession *s, const char *table, const char *col)
{
    return s && table && col && created_by_other(s, table, col, true);
}

bool sqld_goes_with_block(const QrSqlSession *s, const char *table)
{
    const SqluState *st = s ? s->u_state : NULL;
    if (!st || !st->in_block || !atomic_load(&any_created))
        return false;
    int undo_at = -1;
    pthread_mutex_lock(&created_lock);
    for (int i = 0; i < n_created; i++)
        if (created[i].owner == s && !strcmp(created[i].name, table) && !created[i].col[0])
            undo_at = created[i].undo_at; /* the table, not a B-tree the block made on it */
    pthread_mutex_unlock(&created_lock);
    /* a savepoint set after the CREATE would keep the table on ROLLBACK TO */
    return undo_at >= 0 && (st->n_svps == 0 || st->svps[st->n_svps - 1].n_undo <= undo_at);
}

int sqld_created(SqlCtx *cx, SqluState *st, const char *undo)
{
    if (!undo[0])
        return QR_OK;
    if (st->creating[0] &&
        !created_add(cx->sess, st->n_undo, st->creating, st->creating_col, false))
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    st->creating[0] = 0;
    st->creating_col[0] = 0;
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
    created_forget(s, mark);
    while (st->n_undo > mark) {
        char *sql = st->undo[--st->n_undo];
        if (sql[0] == UNDO_COLUMN) {
            qr_free(sql);
            continue;
        }
        if (sql[0] == UNDO_BTREE) {
            char *col = strchr(sql + 1, UNDO_BTREE);
            if (col) {
                *col++ = 0;
                undo_btree(s, sql + 1, col);
            }
            qr_free(sql);
            continue;
        }
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

void sqld_forget(QrSqlSession *s, SqluState *st)
{
    created_forget(s, 0); /* committed: everybody sees them */
    for (int i = 0; i < st->n_undo; i++)
        qr_free(st->undo[i]);
    st->n_undo = 0;
}

/* ---- DROP TABLE in a block: deferred to COMMIT ---- */

bool sqld_dropped(const QrSqlSession *s, const char *table)
{
    const SqluState *st = s ? s->u_state : NULL;
    for (int i = 0; st && table && i < st->n_drops; i++)
        if (!strcmp(st->drops[i].name, table))
            return true;
    return false;
}

bool sqld_hidden(const QrSqlSession *s, const char *table)
{
    return sqld_dropped(s, table) || (s && table && created_by_other(s, table, "", false));
}

bool sqld_drops_grow(SqluState *st)
{
    int nc = st->cap_drops ? st->cap_drops * 2 : 4;
    SqldDrop *n = qr_realloc(st->drops, (size_t)nc * sizeof *n);
    if (!n)
        return false;
    st->drops = n;
    st->cap_drops = nc;
    return true;
}

int sqld_defer_drop(SqlCtx *cx, SqluState *st, const char *table)
{
    if (sqld_dropped(cx->sess, table))
        return QR_OK;
    if (st->n_drops == st->cap_drops && !sqld_drops_grow(st))
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    SqldDrop *d = &st->drops[st->n_drops++];
    snprintf(d->name, sizeof d->name, "%s", table);
    d->ident = qr_table_ident(cx->sess->db, table);
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
        txn_discard_table(st, st->drops[i].name); /* writes to a dropped table go with it */
    for (int i = 0; i < st->n_drops; i++) {
        int rc = qr_table_claim(s->db, st->drops[i].name, SQLW_DROP_WAIT_MS, err);
        if (rc != QR_OK) {
            while (i-- > 0)
                qr_table_unclaim(s->db, st->drops[i].name);
            return rc;
        }
        if (qr_table_ident(s->db, st->drops[i].name) != st->drops[i].ident) {
            /* dropped by another session meanwhile (and perhaps made again
             * under the name): not the block's to drop */
            qr_table_unclaim(s->db, st->drops[i].name);
            st->drops[i--] = st->drops[--st->n_drops];
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
        const char *name = st->drops[i].name;
        int rc = ok ? qr_table_drop(s->db, name, &e) : QR_OK;
        if (rc == QR_OK && ok) /* SERIAL, identity and row-id sequences go with it */
            rc = seq_drop_owned(qr_db_dir(s->db), name, &e);
        dropped |= ok;
        if (rc != QR_OK && rc != QR_ENOTFOUND) {
            qr_log(QR_LOG_WARN, "could not drop table \"%s\" at COMMIT: %s", name, e.message);
            if (err && err->code == QR_OK)
                qr_error_copy(err, &e);
        }
        qr_table_unclaim(s->db, name);
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

/* ---- ALTER TABLE / DROP INDEX in a block: metadata staged until COMMIT ---- */

static cJSON *meta_entry(const SqluState *st, const char *table)
{
    return st && st->meta ? cJSON_GetObjectItemCaseSensitive(st->meta, table) : NULL;
}

const cJSON *sqld_meta_staged(const QrSqlSession *s, const char *table)
{
    return cJSON_GetObjectItemCaseSensitive(meta_entry(s ? s->u_state : NULL, table), "meta");
}

/* Replace (or add) obj[key] by item (owned); false without memory. */
static bool put_item(cJSON *obj, const char *key, cJSON *item)
{
    if (!item)
        return false;
    cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
    cJSON_AddItemToObject(obj, key, item);
    return true;
}

int sqld_meta_stage(SqlCtx *cx, SqluState *st, const char *table, const cJSON *meta)
{
    if (!st->meta && !(st->meta = cJSON_CreateObject()))
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    cJSON *e = meta_entry(st, table);
    if (!e) {
        e = cJSON_AddObjectToObject(st->meta, table);
        if (!e || !put_item(e, "base", sqlw_meta_load_db(cx->sess->db, table)))
            return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    }
    if (!put_item(e, "meta", cJSON_Duplicate(meta, true)))
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    qr_db_ddl_bump(cx->sess->db); /* the session's bound statements bind again */
    return QR_OK;
}

int sqld_meta_now(SqlCtx *cx, const char *table, void (*edit)(cJSON *meta, const void *arg),
                  const void *arg)
{
    cJSON *e = meta_entry(cx->sess->u_state, table);
    if (e) { /* the block's copy, and what it was made from, get it too */
        edit(cJSON_GetObjectItemCaseSensitive(e, "meta"), arg);
        edit(cJSON_GetObjectItemCaseSensitive(e, "base"), arg);
    }
    cJSON *m = sqlw_meta_load_db(cx->sess->db, table);
    if (!m)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    edit(m, arg);
    int rc = sqlw_meta_save_db(cx->sess->db, table, m, cx->err);
    cJSON_Delete(m);
    return rc;
}

/* Add name to meta's "pending_columns" (once); false without memory. */
static bool add_pending(cJSON *meta, const char *name)
{
    cJSON *a = cJSON_GetObjectItemCaseSensitive(meta, "pending_columns");
    if (!cJSON_IsArray(a)) {
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "pending_columns");
        a = cJSON_AddArrayToObject(meta, "pending_columns");
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, a) if (cJSON_IsString(it) && !strcmp(it->valuestring, name)) return true;
    return a && cJSON_AddItemToArray(a, cJSON_CreateString(name));
}

/* The field becomes storage only after the committed sql.json lists it as
 * pending (so no other session ever shows it before the block's COMMIT
 * publishes its entry, nor after a crash or a rollback); under the apply
 * lock, as COMMIT checks and publishes sql.json under it, so no block's
 * check-then-publish can lose the listing.  The staged copy and its base
 * list it too, so the block's COMMIT check still finds the base it
 * started from. */
int sqld_add_column(SqlCtx *cx, SqluState *st, QrTable *t, const QrField *f, bool adopt,
                    void (*edit)(cJSON *meta, const void *arg), const void *arg)
{
    const char *table = qr_table_name(t);
    QrDb *db = cx->sess->db;
    int rc = QR_OK;
    txn_lock();
    cJSON *m = sqlw_meta_load_db(db, table);
    if (!m || !add_pending(m, f->name))
        rc = qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    if (rc == QR_OK)
        rc = sqlw_meta_save_db(db, table, m, cx->err);
    if (rc == QR_OK && !adopt)
        rc = qr_table_add_field(t, f, cx->err);
    txn_unlock();
    cJSON *e = meta_entry(st, table);
    if (rc == QR_OK && e) {
        if (!add_pending(cJSON_GetObjectItemCaseSensitive(e, "base"), f->name) ||
            !add_pending(cJSON_GetObjectItemCaseSensitive(e, "meta"), f->name))
            rc = qr_error_set(cx->err, QR_ENOMEM, "out of memory");
        cJSON_Delete(m);
        m = rc == QR_OK ? cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(e, "meta"), true)
                        : NULL;
    }
    if (rc == QR_OK && !m)
        rc = qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    if (rc == QR_OK) {
        edit(m, arg);
        rc = sqld_meta_stage(cx, st, table, m);
    }
    cJSON_Delete(m);
    if (rc != QR_OK)
        return rc;
    /* other sessions' ADD COLUMN of the name waits for the block's end
     * (40001); the mark's undo entry ends the registration on rollback */
    char undo[QR_NAME_MAX + 2];
    snprintf(undo, sizeof undo, "%c%s", UNDO_COLUMN, table);
    if (!created_add(cx->sess, st->n_undo, table, f->name, true))
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    return sqld_created(cx, st, undo);
}

int sqld_fill_column(SqlCtx *cx, SqluState *st, const char *table, const char *col,
                     const cJSON *dflt)
{
    char sql[3 * QR_NAME_MAX + 64];
    size_t o = (size_t)snprintf(sql, sizeof sql, "UPDATE ");
    quote_ident(sql, sizeof sql, &o, table);
    o += (size_t)snprintf(sql + o, sizeof sql - o, " SET ");
    quote_ident(sql, sizeof sql, &o, col);
    snprintf(sql + o, sizeof sql - o, " = NULL");
    PgQueryParseResult pr = pg_query_parse(sql);
    cJSON *root = pr.error ? NULL : cJSON_Parse(pr.parse_tree);
    pg_query_free_parse_result(pr);
    const cJSON *body = sqlj_get(
        sqlj_get(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "stmts"), 0), "stmt"),
        "UpdateStmt");
    /* SET col = the default's own parse tree */
    cJSON *rt = (cJSON *)sqlj_get(cJSON_GetArrayItem(sqlj_get(body, "targetList"), 0), "ResTarget");
    if (rt && dflt && !cJSON_ReplaceItemInObjectCaseSensitive(rt, "val", cJSON_Duplicate(dflt, true)))
        rt = NULL;
    if (!rt)
        body = NULL;
    QrSqlResult res;
    memset(&res, 0, sizeof res);
    int rc = body ? sqlw_update(cx, st, body, &res)
                  : qr_error_set(cx->err, QR_EINTERNAL, "cannot build the column's fill");
    cJSON_Delete(root);
    return rc;
}

int sqld_btree_drop_later(SqlCtx *cx, SqluState *st, const char *table, const char *col)
{
    cJSON *e = meta_entry(st, table);
    cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "drop_btrees");
    if (e && !a)
        a = cJSON_AddArrayToObject(e, "drop_btrees");
    if (!e) /* staged by sqlw_meta_save just before */
        return qr_error_set(cx->err, QR_EINTERNAL, "DROP INDEX of table \"%s\" was not staged",
                            table);
    if (!a || !cJSON_AddItemToArray(a, cJSON_CreateString(col)))
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    return QR_OK;
}

/* Does the metadata name an index on col? */
static bool names_index_on(const cJSON *meta, const char *col)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(meta, "indexes"))
        if (cJSON_IsString(it) && !strcmp(it->valuestring, col))
            return true;
    return false;
}

/* Is the B-tree on col of the staged entry e to be dropped at COMMIT? */
static bool btree_goes(const cJSON *e, const char *col)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(e, "drop_btrees"))
        if (cJSON_IsString(it) && !strcmp(it->valuestring, col))
            return !names_index_on(cJSON_GetObjectItemCaseSensitive(e, "meta"), col);
    return false;
}

bool sqld_btree_dropping(const QrSqlSession *s, const char *table, const char *col)
{
    return btree_goes(meta_entry(s ? s->u_state : NULL, table), col);
}

void sqld_schema_settle(const QrSqlSession *s, const char *table, QrSchema *ns)
{
    for (int i = 0; i < ns->n_fields; i++)
        if (ns->fields[i].btree && sqld_btree_dropping(s, table, ns->fields[i].name))
            ns->fields[i].btree = false;
}

int sqld_seq_created(SqlCtx *cx, const char *seq)
{
    SqluState *st = cx->sess->u_state;
    if (!st || !st->in_block || st->undoing)
        return QR_OK;
    char undo[QR_NAME_MAX + 64];
    size_t o = (size_t)snprintf(undo, sizeof undo, "DROP SEQUENCE IF EXISTS ");
    quote_ident(undo, sizeof undo, &o, seq);
    return sqld_created(cx, st, undo);
}

cJSON *sqld_meta_mark(const SqluState *st)
{
    return st->meta ? cJSON_Duplicate(st->meta, true) : NULL;
}

void sqld_meta_restore(QrSqlSession *s, SqluState *st, const cJSON *mark)
{
    if (!st->meta && !mark)
        return;
    cJSON_Delete(st->meta);
    st->meta = mark ? cJSON_Duplicate(mark, true) : NULL; /* NULL on OOM: nothing staged */
    qr_db_ddl_bump(s->db);
}

void sqld_meta_forget(QrSqlSession *s, SqluState *st) { sqld_meta_restore(s, st, NULL); }

void sqld_meta_forget_table(SqluState *st, const char *table)
{
    if (st && st->meta)
        cJSON_DeleteItemFromObjectCaseSensitive(st->meta, table);
}

bool sqld_pending(const SqluState *st) { return st->n_drops > 0 || st->meta || st->n_rebuilds; }

int sqld_conflict(QrError *err, const char *did, const char *table, const char *we_did)
{
    qr_error_set(err, QR_EBUSY, "could not serialize access due to concurrent update");
    qr_error_detail(err, "another transaction %s table \"%s\" after this one %s it", did, table,
                    we_did);
    qr_error_hint(err, "The transaction might succeed if retried.");
    qr_error_set_sqlstate(err, "40001");
    return QR_EBUSY;
}

int sqld_meta_check(QrSqlSession *s, const SqluState *st, QrError *err)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, st->meta)
    {
        if (sqld_hidden(s, e->string))
            continue;
        cJSON *now = sqlw_meta_load_db(s->db, e->string);
        bool same = now && cJSON_Compare(now, cJSON_GetObjectItemCaseSensitive(e, "base"), true);
        cJSON_Delete(now);
        if (!same)
            return sqld_conflict(err, "changed the definition of", e->string, "altered");
    }
    return QR_OK;
}

/* Visit every DDL change the COMMIT publishes, in the order it does them:
 * sql.json texts, B-trees, tables.  fn returns false to stop. */
static bool each_change(QrSqlSession *s, const SqluState *st,
                        bool (*fn)(void *arg, uint8_t kind, const char *table, const char *col,
                                   const cJSON *meta),
                        void *arg)
{
    const cJSON *e, *c;
    cJSON_ArrayForEach(e, st->meta) if (!sqld_hidden(s, e->string) &&
                                        !fn(arg, TXNJ_META, e->string, NULL,
                                            cJSON_GetObjectItemCaseSensitive(e, "meta"))) return false;
    cJSON_ArrayForEach(e, st->meta)
    {
        if (sqld_hidden(s, e->string))
            continue;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(e, "drop_btrees"))
            if (cJSON_IsString(c) && btree_goes(e, c->valuestring) &&
                !fn(arg, TXNJ_DROP_BTREE, e->string, c->valuestring, NULL))
                return false;
    }
    for (int i = 0; i < st->n_drops; i++)
        if (!fn(arg, TXNJ_DROP_TABLE, st->drops[i].name, NULL, NULL))
            return false;
    return true;
}

typedef struct JItems {
    TxnjItem *v;
    int n, cap;
} JItems;

static bool add_item(void *arg, uint8_t kind, const char *table, const char *col,
                     const cJSON *meta)
{
    JItems *j = arg;
    if (j->n == j->cap) {
        int nc = j->cap ? j->cap * 2 : 8;
        TxnjItem *nv = qr_realloc(j->v, (size_t)nc * sizeof *nv);
        if (!nv)
            return false;
        j->v = nv;
        j->cap = nc;
    }
    TxnjItem *it = &j->v[j->n];
    *it = (TxnjItem){.kind = kind, .table = table, .key = col};
    if (meta) {
        char *txt = cJSON_PrintUnformatted(meta);
        if (!txt || !(it->doc = qr_strdup(txt))) {
            cJSON_free(txt);
            return false;
        }
        cJSON_free(txt);
        it->doc_len = strlen(it->doc);
    }
    j->n++;
    return true;
}

int sqld_journal_items(QrSqlSession *s, const SqluState *st, TxnjItem **items, int *n,
                       QrError *err)
{
    JItems j = {0};
    if (!each_change(s, st, add_item, &j)) {
        sqld_journal_free(j.v, j.n);
        return qr_error_set(err, QR_ENOMEM, "out of memory writing the transaction journal");
    }
    if (st->n_rebuilds) { /* the exchanges with the block's rebuilt copies */
        TxnjItem *nv = qr_realloc(j.v, (size_t)(j.n + 2 * st->n_rebuilds) * sizeof *nv);
        int rc = nv ? sqld_rebuild_journal(s, st, (j.v = nv), &j.n, err)
                    : qr_error_set(err, QR_ENOMEM, "out of memory writing the transaction "
                                                   "journal");
        if (rc != QR_OK) {
            sqld_journal_free(j.v, j.n);
            return rc;
        }
    }
    *items = j.v;
    *n = j.n;
    return QR_OK;
}

void sqld_journal_free(TxnjItem *items, int n)
{
    for (int i = 0; i < n; i++)
        qr_free(items[i].doc);
    qr_free(items);
}

typedef struct Publish {
    QrSqlSession *s;
    QrError *err;
} Publish;

static bool publish_one(void *arg, uint8_t kind, const char *table, const char *col,
                        const cJSON *meta)
{
    Publish *p = arg;
    QrDb *db = p->s->db;
    if (kind == TXNJ_META)
        return sqlw_meta_save_db(db, table, meta, p->err) == QR_OK;
    if (kind != TXNJ_DROP_BTREE)
        return true; /* tables: sqld_drops_finish, after the claims */
    QrTable *t;
    int rc = qr_table_acquire(db, table, &t, p->err);
    if (rc != QR_OK)
        return false;
    int fi = schema_field_index(qr_table_schema(t), col);
    if (fi >= 0 && qr_table_schema(t)->fields[fi].btree)
        rc = qr_table_drop_index(t, col, p->err);
    qr_table_release(db, table);
    return rc == QR_OK;
}

int sqld_meta_publish(QrSqlSession *s, SqluState *st, QrError *err)
{
    Publish p = {s, err};
    if (!each_change(s, st, publish_one, &p)) {
        qr_log(QR_LOG_WARN, "could not publish the DDL of a committed transaction: %s",
               err->message);
        return err->code ? err->code : QR_EIO;
    }
    return QR_OK;
}
