/*
 * sql_ddl.c — CREATE TABLE, CREATE INDEX (full-text and B-tree), DROP
 * TABLE / INDEX, ALTER TABLE ADD COLUMN, TRUNCATE, and the SQL metadata
 * kept beside each table (sql_w.h).
 *
 * Layer: query/.  Calls quarry.h, schema.h, the SQL internals and cJSON.
 *
 * Types (docs/sql.md "Tables"):
 *   bigint, integer, smallint         -> int column (int64)
 *   double precision, real            -> float column (float64)
 *   numeric(p, s) with p <= 18        -> numeric field of scale s: value * 10^s in an
 *                                        int64 column (store/decimal.h)
 *   numeric, numeric(p, s) p > 18     -> numeric field: canonical decimal text
 *                                        (tables made before this keep float columns)
 *   boolean                           -> bool column
 *   timestamp, timestamptz, date      -> timestamp column (microseconds UTC)
 *   text                              -> full-text field (analyzed, english by
 *                                        default; CREATE INDEX ... USING fulltext
 *                                        chooses the language)
 *   varchar(n), char(n)               -> keyword column (exact string)
 * The primary key (one column, integer or string type) is the document id.
 * The declared type, NOT NULL and DEFAULT are kept in the table's sql.json;
 * storage keeps the wider type (an integer column stores int64).
 *
 * In a transaction block, DROP TABLE waits for COMMIT and CREATE TABLE /
 * INDEX are dropped again by ROLLBACK (sql_txn_ddl.c, docs/sql-writes.md).
 */
#include "query/sequence.h"
#include "query/sql_w.h"
#include "store/decimal.h"
#include "store/util.h"

#include <pg_query.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* ---- metadata ---- */

static void meta_path(QrDb *db, const char *table, char *out, size_t n)
{
    snprintf(out, n, "%s/tables/%s/sql.json", qr_db_dir(db), table);
}

/* Every statement that names a table reads its metadata (declared types,
 * keys): parsed files are kept here, each with the identity of the file it
 * came from, and reused while a stat() shows the same file.  The file is
 * only ever replaced by an atomic rename, so a change always shows as a new
 * inode or mtime. */
#define META_CACHE 32
static struct {
    char *path;               /* owns; NULL = free slot */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtim;
    cJSON *json;              /* owns */
} meta_cache[META_CACHE];
static int meta_cache_next;
static pthread_mutex_t meta_cache_mu = PTHREAD_MUTEX_INITIALIZER;

static bool meta_same(int i, const struct stat *st)
{
    return meta_cache[i].dev == st->st_dev && meta_cache[i].ino == st->st_ino &&
           meta_cache[i].size == st->st_size && meta_cache[i].mtim.tv_sec == st->st_mtim.tv_sec &&
           meta_cache[i].mtim.tv_nsec == st->st_mtim.tv_nsec;
}

cJSON *sqlw_meta_load_db(QrDb *db, const char *table)
{
    char path[4096];
    meta_path(db, table, path, sizeof path);
    struct stat st;
    cJSON *m = NULL;
    if (stat(path, &st) == 0) {
        pthread_mutex_lock(&meta_cache_mu);
        for (int i = 0; i < META_CACHE && !m; i++)
            if (meta_cache[i].path && !strcmp(meta_cache[i].path, path) && meta_same(i, &st))
                m = cJSON_Duplicate(meta_cache[i].json, true);
        pthread_mutex_unlock(&meta_cache_mu);
        uint8_t *data = NULL;
        size_t len = 0;
        if (!m && qr_file_read_all(path, &data, &len, NULL) == QR_OK) {
            m = cJSON_ParseWithLength((const char *)data, len);
            cJSON *keep = cJSON_IsObject(m) ? cJSON_Duplicate(m, true) : NULL;
            char *kp = keep ? qr_strdup(path) : NULL;
            if (keep && kp) {
                pthread_mutex_lock(&meta_cache_mu);
                int i = meta_cache_next;
                for (int j = 0; j < META_CACHE; j++)   /* the same path's old entry first */
                    if (meta_cache[j].path && !strcmp(meta_cache[j].path, path))
                        i = j;
                if (i == meta_cache_next)
                    meta_cache_next = (meta_cache_next + 1) % META_CACHE;
                qr_free(meta_cache[i].path);
                cJSON_Delete(meta_cache[i].json);
                meta_cache[i].path = kp;
                meta_cache[i].json = keep;
                meta_cache[i].dev = st.st_dev;
                meta_cache[i].ino = st.st_ino;
                meta_cache[i].size = st.st_size;
                meta_cache[i].mtim = st.st_mtim;
                pthread_mutex_unlock(&meta_cache_mu);
            } else {
                cJSON_Delete(keep);
                qr_free(kp);
            }
        }
        qr_free(data);
    }
    if (!cJSON_IsObject(m)) {
        cJSON_Delete(m);
        m = cJSON_CreateObject();
    }
    return m;
}

static int meta_write(const char *path, const cJSON *meta, QrError *err)
{
    char *text = cJSON_PrintUnformatted(meta);
    if (!text)
        return qr_error_set(err, QR_ENOMEM, "out of memory writing table metadata");
    int rc = qr_file_write_atomic(path, text, strlen(text), true, err);
    cJSON_free(text);
    return rc;
}

int sqlw_meta_save_db(QrDb *db, const char *table, const cJSON *meta, QrError *err)
{
    qr_db_ddl_bump(db); /* declared types and defaults change what binding sees */
    char path[4096];
    meta_path(db, table, path, sizeof path);
    return meta_write(path, meta, err);
}

int sqlw_spare_meta(QrDb *db, const char *id, const cJSON *meta, QrError *err)
{
    char path[4300];
    qr_spare_path(db, id, path, sizeof path);
    size_t l = strlen(path);
    snprintf(path + l, sizeof path - l, "/sql.json");
    return meta_write(path, meta, err);
}

cJSON *sqlw_meta_load(SqlCtx *cx, const char *table)
{
    SqluState *st = cx->sess->u_state;
    /* undoing a block's CREATE INDEX: the committed metadata has it */
    const cJSON *staged = st && st->undoing ? NULL : sqld_meta_staged(cx->sess, table);
    return staged ? cJSON_Duplicate(staged, true) : sqlw_meta_load_db(cx->sess->db, table);
}

int sqlw_meta_save(SqlCtx *cx, const char *table, const cJSON *meta)
{
    SqluState *st = cx->sess->u_state;
    if (st && st->in_block && !st->undoing)
        return sqld_meta_stage(cx, st, table, meta);
    return sqlw_meta_save_db(cx->sess->db, table, meta, cx->err);
}

const cJSON *sqlw_meta_col(const cJSON *meta, const char *col)
{
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(meta, "columns"),
                                            col);
}

bool sqlw_col_pending(const cJSON *meta, const char *col)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(meta, "pending_columns"))
        if (cJSON_IsString(it) && !strcmp(it->valuestring, col))
            return !sqlw_meta_col(meta, col);
    return false;
}

QrSqlType sqlw_pk_type(const cJSON *meta)
{
    const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "pk_type"));
    if (!t)
        return QR_SQL_UNKNOWN;
    return !strcmp(t, "int8") ? QR_SQL_INT8 : QR_SQL_TEXT;
}

static cJSON *meta_obj(cJSON *meta, const char *key)
{
    cJSON *o = cJSON_GetObjectItemCaseSensitive(meta, key);
    if (!cJSON_IsObject(o)) {
        cJSON_DeleteItemFromObjectCaseSensitive(meta, key);
        o = cJSON_AddObjectToObject(meta, key);
    }
    return o;
}

/* ---- types ---- */

typedef struct ColSpec {
    const char *name;
    QrFieldType ft;
    const char *pg;        /* pg_type name */
    int typmod;
    bool not_null, is_pk;
    bool doc_only;         /* kept in the document only, no index or column (sqlt_storage) */
    const cJSON *dflt;     /* borrows the parse tree */
    int loc;
    bool serial;           /* SERIAL / BIGSERIAL / SMALLSERIAL */
    char identity;         /* GENERATED 'a'LWAYS / BY 'd'EFAULT AS IDENTITY, or 0 */
    const cJSON *id_opts;  /* borrows: the identity's sequence options */
    char seq[64];          /* the sequence behind a serial or identity column */
} ColSpec;

static const struct {
    const char *name;
    const char *pg;
    QrFieldType ft;
} TYPES[] = {
    {"int8", "int8", QR_FT_INT},          {"bigint", "int8", QR_FT_INT},
    {"int4", "int4", QR_FT_INT},          {"integer", "int4", QR_FT_INT},
    {"int", "int4", QR_FT_INT},           {"int2", "int2", QR_FT_INT},
    {"smallint", "int2", QR_FT_INT},      {"float8", "float8", QR_FT_FLOAT},
    {"float4", "float4", QR_FT_FLOAT},    {"real", "float4", QR_FT_FLOAT},
    {"numeric", "numeric", QR_FT_NUMERIC}, {"decimal", "numeric", QR_FT_NUMERIC},
    {"bool", "bool", QR_FT_BOOL},         {"boolean", "bool", QR_FT_BOOL},
    {"timestamp", "timestamp", QR_FT_TIMESTAMP}, {"timestamptz", "timestamptz", QR_FT_TIMESTAMP},
    {"date", "date", QR_FT_TIMESTAMP},    {"text", "text", QR_FT_TEXT},
    {"varchar", "varchar", QR_FT_KEYWORD}, {"bpchar", "bpchar", QR_FT_KEYWORD},
    {"char", "bpchar", QR_FT_KEYWORD},
    /* SERIAL: an integer column whose default is nextval of its own sequence */
    {"serial", "int4", QR_FT_INT},        {"serial4", "int4", QR_FT_INT},
    {"bigserial", "int8", QR_FT_INT},     {"serial8", "int8", QR_FT_INT},
    {"smallserial", "int2", QR_FT_INT},   {"serial2", "int2", QR_FT_INT},
};

static int map_type(SqlCtx *cx, const cJSON *tn, ColSpec *c)
{
    const char *name = sqlj_last_name(sqlj_get(tn, "names"));
    bool array = sqlj_get(tn, "arrayBounds") != NULL;
    for (size_t i = 0; name && !array && i < sizeof TYPES / sizeof TYPES[0]; i++) {
        if (strcmp(TYPES[i].name, name) != 0)
            continue;
        c->ft = TYPES[i].ft;
        c->pg = TYPES[i].pg;
        c->typmod = -1;
        c->serial = strstr(name, "serial") != NULL;
        const cJSON *mods = sqlj_get(tn, "typmods");
        if (c->ft == QR_FT_KEYWORD && cJSON_GetArraySize(mods) == 1) {
            const cJSON *ac = sqlj_is(cJSON_GetArrayItem(mods, 0), "A_Const");
            int n = sqlj_int(sqlj_get(ac, "ival"), "ival", -1);
            if (n > 0)
                c->typmod = n + 4;
        }
        if (!strcmp(c->pg, "numeric")) /* numeric(p, s): kept in sql.json, applied by writes */
            return sqln_typmod_of(cx, mods, sqlj_loc(tn), &c->typmod);
        return QR_OK;
    }
    /* the types of sql_types.c (arrays, ...): their storage from there */
    if (name && sqlt_storage(name, array, &c->ft, &c->pg, &c->doc_only)) {
        c->typmod = -1;
        return QR_OK;
    }
    return sql_err_at(cx, sqlj_loc(tn), QR_EUNSUPPORTED, "0A000",
                      "type \"%s%s\" is not supported (column \"%s\")", name ? name : "?",
                      array ? "[]" : "", c->name);
}

/* The schema field of a column: numeric(p, s) with p <= 18 keeps value *
 * 10^s in an int64 column, other numerics their decimal text. */
static void col_field(const ColSpec *c, QrField *f)
{
    schema_field_defaults(f, c->name, c->ft);
    f->indexed = f->indexed && !c->doc_only;
    if (c->ft == QR_FT_NUMERIC && c->typmod >= 4 &&
        ((c->typmod - 4) >> 16 & 0xffff) <= DEC_SCALED_MAX_PREC)
        f->scale = (int8_t)((c->typmod - 4) & 0xffff);
}

/* Column constraints: PRIMARY KEY, NOT NULL, NULL, DEFAULT. */
static int col_constraints(SqlCtx *cx, const cJSON *list, ColSpec *c)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, list)
    {
        const cJSON *k = sqlj_is(it, "Constraint");
        const char *ct = sqlj_str(k, "contype");
        if (!ct)
            continue;
        if (!strcmp(ct, "CONSTR_PRIMARY"))
            c->is_pk = true;
        else if (!strcmp(ct, "CONSTR_NOTNULL"))
            c->not_null = true;
        else if (!strcmp(ct, "CONSTR_NULL"))
            c->not_null = false;
        else if (!strcmp(ct, "CONSTR_DEFAULT"))
            c->dflt = sqlj_get(k, "raw_expr");
        else if (!strcmp(ct, "CONSTR_IDENTITY")) {
            const char *gw = sqlj_str(k, "generated_when");
            c->identity = gw && gw[0] == 'd' ? 'd' : 'a';
            c->id_opts = sqlj_get(k, "options");
            c->not_null = true;
        } else
            return sql_err_at(cx, sqlj_loc(k), QR_EUNSUPPORTED, "0A000",
                              "%s constraints are not supported (column \"%s\")",
                              !strcmp(ct, "CONSTR_UNIQUE")    ? "UNIQUE"
                              : !strcmp(ct, "CONSTR_CHECK")   ? "CHECK"
                              : !strcmp(ct, "CONSTR_FOREIGN") ? "FOREIGN KEY"
                                                              : "these",
                              c->name);
    }
    return QR_OK;
}

static int col_from_def(SqlCtx *cx, const cJSON *cd, ColSpec *c)
{
    memset(c, 0, sizeof *c);
    c->name = sqlj_str(cd, "colname");
    c->loc = sqlj_loc(cd);
    if (!c->name || !qr_name_valid(c->name) || c->name[0] == '_')
        return sql_err_at(cx, c->loc, QR_EINVAL, "42602", "invalid column name \"%s\"",
                          c->name ? c->name : "");
    int rc = map_type(cx, sqlj_get(cd, "typeName"), c);
    if (rc || (rc = col_constraints(cx, sqlj_get(cd, "constraints"), c)) != QR_OK)
        return rc;
    if (c->identity && c->ft != QR_FT_INT)
        return sql_err_at(cx, c->loc, QR_EINVAL, "22023",
                          "identity column type must be smallint, integer, or bigint");
    if (c->identity && (c->dflt || c->serial))
        return sql_err_at(cx, c->loc, QR_ESYNTAX, "42601",
                          "both default and identity specified for column \"%s\"", c->name);
    if (c->serial && c->dflt)
        return sql_err_at(cx, c->loc, QR_ESYNTAX, "42601",
                          "multiple default values specified for column \"%s\"", c->name);
    if (c->serial)
        c->not_null = true;
    return QR_OK;
}

static void meta_put_col(cJSON *cols, const ColSpec *c)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", c->pg);
    cJSON_AddNumberToObject(o, "typmod", c->typmod);
    if (c->not_null || c->is_pk)
        cJSON_AddTrueToObject(o, "not_null");
    if (c->seq[0]) {
        cJSON_AddItemToObject(o, "default", sqlseq_default_tree(c->seq));
        cJSON_AddStringToObject(o, "sequence", c->seq);
    } else if (c->dflt) {
        cJSON_AddItemToObject(o, "default", cJSON_Duplicate(c->dflt, true));
    }
    if (c->identity)
        cJSON_AddStringToObject(o, "identity", c->identity == 'd' ? "d" : "a");
    cJSON_DeleteItemFromObjectCaseSensitive(cols, c->name);
    cJSON_AddItemToObject(cols, c->name, o);
}

/* ---- CREATE TABLE ---- */

static int relation_name(SqlCtx *cx, const cJSON *rv, const char **name)
{
    *name = sqlj_str(rv, "relname");
    const char *schema = sqlj_str(rv, "schemaname");
    if (schema && strcmp(schema, "public") != 0)
        return sql_err_at(cx, sqlj_loc(rv), QR_EINVAL, "3F000", "schema \"%s\" does not exist",
                          schema);
    if (!*name || !qr_name_valid(*name))
        return sql_err_at(cx, sqlj_loc(rv), QR_EINVAL, "42602", "invalid table name \"%s\"",
                          *name ? *name : "");
    return QR_OK;
}

/* Does the table exist for this session (a table its open block dropped
 * does not)? */
static bool table_exists(SqlCtx *cx, const char *name)
{
    QrTable *t;
    return !sqld_hidden(cx->sess, name) && qr_table_get(cx->sess->db, name, &t, NULL) == QR_OK;
}

/* The sequences of SERIAL, identity and row-id columns, then their
 * defaults into mcols; made (may be NULL) gets each new name followed by
 * '\n' (room for n_cols names). */
static int make_sequences(SqlCtx *cx, const char *name, ColSpec *cols, int n_cols,
                          bool hidden_pk, cJSON *mcols, char *made)
{
    int rc = QR_OK;
    size_t o = 0;
    for (int i = 0; i < n_cols && rc == QR_OK; i++) {
        if (!cols[i].serial && !cols[i].identity)
            continue;
        rc = sqlseq_for_column(cx, name, cols[i].name, cols[i].pg, cols[i].id_opts,
                               hidden_pk && cols[i].is_pk, cols[i].seq, sizeof cols[i].seq);
        if (rc == QR_OK)
            meta_put_col(mcols, &cols[i]);
        if (rc == QR_OK && made)
            o += (size_t)sprintf(made + o, "%s\n", cols[i].seq);
    }
    return rc;
}

/* CREATE TABLE of a name the open block dropped: the old table stays for
 * every other session until COMMIT exchanges it with the new one, a spare
 * the block reads and writes under the name (sqld_replace).  The old
 * table's sequences keep their names until then: the new ones get another
 * (sqlseq_for_column adds a digit). */
static int replace_table(SqlCtx *cx, const char *name, const QrSchema *s, ColSpec *cols,
                         int n_cols, bool hidden_pk, cJSON *meta, cJSON *mcols)
{
    const char *dir = qr_db_dir(cx->sess->db);
    char *old = NULL;
    char *made = qr_arena_alloc(cx->arena, (size_t)(n_cols + 1) * (SEQ_NAME_MAX + 2));
    if (!made)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    made[0] = 0;
    int rc = seq_owned_names(dir, name, &old, cx->err);
    if (rc == QR_OK)
        rc = make_sequences(cx, name, cols, n_cols, hidden_pk, mcols, made);
    if (rc == QR_OK)
        rc = sqld_replace(cx, cx->sess->u_state, name, s, meta, old, made);
    if (rc != QR_OK)
        seq_drop_names(dir, made, NULL);
    qr_free(old);
    return rc;
}

static int create_table(SqlCtx *cx, const cJSON *b, QrSqlResult *res)
{
    const char *name;
    int rc = relation_name(cx, sqlj_get(b, "relation"), &name);
    if (rc)
        return rc;
    snprintf(res->tag, sizeof res->tag, "CREATE TABLE");
    /* made again in the block that dropped it: the block's until COMMIT */
    bool replacing = sqld_dropped(cx->sess, name);
    if (!replacing && sqld_hidden(cx->sess, name)) { /* another session's open block created it */
        qr_error_detail(cx->err, "A transaction that has not committed yet created it.");
        return sql_err_at(cx, sqlj_loc(sqlj_get(b, "relation")), QR_EEXISTS, "42P07",
                          "relation \"%s\" already exists", name);
    }
    if (table_exists(cx, name)) {
        if (sqlj_bool(b, "if_not_exists")) {
            sql_notice(cx, "NOTICE", "42P07", "relation \"%s\" already exists, skipping", name);
            return QR_OK;
        }
        return sql_err_at(cx, sqlj_loc(sqlj_get(b, "relation")), QR_EEXISTS, "42P07",
                          "relation \"%s\" already exists", name);
    }
    int n = cJSON_GetArraySize(sqlj_get(b, "tableElts"));
    /* one spare: the hidden row id of a table without a declared key */
    ColSpec *cols = qr_arena_calloc(cx->arena, (size_t)(n + 1) * sizeof *cols);
    if (!cols)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    int n_cols = 0;
    const char *pk = NULL;
    const cJSON *it;
    cJSON_ArrayForEach(it, sqlj_get(b, "tableElts"))
    {
        const cJSON *cd = sqlj_is(it, "ColumnDef");
        const cJSON *k = sqlj_is(it, "Constraint");
        if (cd) {
            if ((rc = col_from_def(cx, cd, &cols[n_cols])) != QR_OK)
                return rc;
            for (int i = 0; i < n_cols; i++)
                if (!strcmp(cols[i].name, cols[n_cols].name))
                    return sql_err_at(cx, cols[n_cols].loc, QR_EEXISTS, "42701",
                                      "column \"%s\" specified more than once", cols[i].name);
            if (cols[n_cols].is_pk) {
                if (pk)
                    return sql_err_at(cx, cols[n_cols].loc, QR_EINVAL, "42P16",
                                      "multiple primary keys for table \"%s\" are not allowed",
                                      name);
                pk = cols[n_cols].name;
            }
            n_cols++;
        } else if (k && sqlj_str(k, "contype") && !strcmp(sqlj_str(k, "contype"), "CONSTR_PRIMARY")) {
            const cJSON *keys = sqlj_get(k, "keys");
            if (cJSON_GetArraySize(keys) != 1)
                return sql_err_at(cx, sqlj_loc(k), QR_EUNSUPPORTED, "0A000",
                                  "a Quarry table needs a primary key of exactly one column");
            if (pk)
                return sql_err_at(cx, sqlj_loc(k), QR_EINVAL, "42P16",
                                  "multiple primary keys for table \"%s\" are not allowed", name);
            pk = sqlj_sval(cJSON_GetArrayItem(keys, 0));
        } else {
            return sql_err_at(cx, sqlj_loc(it), QR_EUNSUPPORTED, "0A000",
                              "this table element is not supported (only columns and PRIMARY "
                              "KEY)");
        }
    }
    bool hidden_pk = !pk;
    if (hidden_pk) {
        /* no declared key: a hidden row id from the table's own sequence is
         * the document id (PostgreSQL's tables need no key either) */
        cols[n_cols] = (ColSpec){.name = SQLW_ROWID, .ft = QR_FT_INT, .pg = "int8", .typmod = -1,
                                 .is_pk = true, .not_null = true, .serial = true, .loc = -1};
        pk = cols[n_cols++].name;
    }
    ColSpec *pkc = NULL;
    for (int i = 0; i < n_cols; i++)
        if (!strcmp(cols[i].name, pk))
            pkc = &cols[i];
    if (!pkc)
        return sql_err_at(cx, -1, QR_ENOTFOUND, "42703",
                          "column \"%s\" named in key does not exist", pk);
    pkc->is_pk = true;
    if (pkc->ft != QR_FT_INT && pkc->ft != QR_FT_TEXT && pkc->ft != QR_FT_KEYWORD)
        return sql_err_at(cx, pkc->loc, QR_EUNSUPPORTED, "0A000",
                          "primary key \"%s\" must be an integer or a string type", pk);
    QrSchema *s = qr_arena_calloc(cx->arena, sizeof *s);
    cJSON *meta = cJSON_CreateObject();
    if (!s || !meta) {
        cJSON_Delete(meta);
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    }
    schema_init(s);
    snprintf(s->primary_key, sizeof s->primary_key, "%s", pk);
    cJSON_AddStringToObject(meta, "pk_type", pkc->ft == QR_FT_INT ? "int8" : "text");
    cJSON *mcols = cJSON_AddObjectToObject(meta, "columns");
    int n_text = 0;
    for (int i = 0; i < n_cols && rc == QR_OK; i++) {
        meta_put_col(mcols, &cols[i]);
        if (cols[i].is_pk)
            continue;
        QrField f;
        col_field(&cols[i], &f);
        n_text += cols[i].ft == QR_FT_TEXT && !cols[i].doc_only;
        if (schema_add_field(s, &f, cx->err) < 0)
            rc = cx->err->code;
    }
    s->all_field = n_text >= 2;
    if (hidden_pk)
        cJSON_AddTrueToObject(meta, "hidden_pk");
    if (rc == QR_OK && replacing)
        rc = replace_table(cx, name, s, cols, n_cols, hidden_pk, meta, mcols);
    else if (rc == QR_OK) {
        QrTable *t = NULL;
        rc = qr_table_create(cx->sess->db, name, s, &t, cx->err);
        if (rc == QR_OK)
            rc = make_sequences(cx, name, cols, n_cols, hidden_pk, mcols, NULL);
        if (rc == QR_OK) /* with the table: a block's CREATE is undone by dropping both */
            rc = sqlw_meta_save_db(cx->sess->db, name, meta, cx->err);
        if (rc != QR_OK && t) {
            qr_table_drop(cx->sess->db, name, NULL);
            seq_drop_owned(qr_db_dir(cx->sess->db), name, NULL);
        }
    }
    cJSON_Delete(meta);
    return rc;
}

/* A rebuilt schema keeps the "_all" field while it has two analyzed text
 * fields or more (as CREATE TABLE decides it). */
static void set_all_field(QrSchema *s)
{
    int n_text = 0;
    for (int i = 0; i < s->n_fields; i++)
        n_text += s->fields[i].type == QR_FT_TEXT && s->fields[i].indexed;
    s->all_field = n_text >= 2;
}

/* ---- CREATE INDEX ---- */

static int fulltext_index(SqlCtx *cx, QrTable *t, const cJSON *b)
{
    const char *lang = "english";
    const cJSON *it;
    cJSON_ArrayForEach(it, sqlj_get(b, "options"))
    {
        const cJSON *d = sqlj_is(it, "DefElem");
        const char *dn = sqlj_str(d, "defname");
        const char *v = sqlw_const_text(cx, sqlj_get(d, "arg"));
        if (dn && !strcmp(dn, "language") && v)
            lang = v;
        else
            return sql_err_at(cx, sqlj_loc(d), QR_EUNSUPPORTED, "0A000",
                              "full-text index option \"%s\" is not supported (language is)",
                              dn ? dn : "?");
    }
    QrSchema *s = qr_arena_calloc(cx->arena, sizeof *s);
    if (!s)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    *s = *qr_table_schema(t);
    bool change = false;
    cJSON_ArrayForEach(it, sqlj_get(b, "indexParams"))
    {
        const cJSON *ie = sqlj_is(it, "IndexElem");
        const char *col = sqlj_str(ie, "name");
        if (!col)
            return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                              "full-text indexes take column names, not expressions");
        int fi = schema_field_index(s, col);
        if (fi < 0)
            return sql_err_at(cx, -1, QR_ENOTFOUND, "42703", "column \"%s\" does not exist",
                              col);
        QrField *f = &s->fields[fi];
        if (f->type != QR_FT_TEXT && f->type != QR_FT_KEYWORD)
            return sql_err_at(cx, -1, QR_ETYPE, "42804",
                              "column \"%s\" is not a string column: it cannot be full-text "
                              "indexed",
                              col);
        if (f->type != QR_FT_TEXT || !f->indexed || strcmp(f->language, lang) != 0) {
            f->type = QR_FT_TEXT;
            f->indexed = true;
            snprintf(f->language, sizeof f->language, "%s", lang);
            change = true;
        }
    }
    if (!change)
        return QR_OK;
    /* a field's analysis is fixed once segments hold it: the table is
     * rebuilt, every document analyzed again (sql_rekey.c) */
    set_all_field(s);
    sqld_schema_settle(cx->sess, qr_table_name(t), s);
    cJSON *meta = sqlw_meta_load(cx, qr_table_name(t));
    int rc = meta ? sqlw_rebuild(cx, t, s, NULL, meta)
                  : qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    cJSON_Delete(meta);
    return rc;
}

static void edit_add_index(cJSON *meta, const void *arg)
{
    const char *const *kv = arg; /* index name, column */
    cJSON *idxs = meta_obj(meta, "indexes");
    cJSON_DeleteItemFromObjectCaseSensitive(idxs, kv[0]);
    cJSON_AddStringToObject(idxs, kv[0], kv[1]);
}

/* The storage field of column col as the session sees the table: -1 when
 * there is none, or SQL does not show it (sqlw_col_pending). */
static int shown_field(SqlCtx *cx, QrTable *t, const char *col)
{
    int fi = schema_field_index(qr_table_schema(t), col);
    if (fi < 0)
        return -1;
    cJSON *meta = sqlw_meta_load(cx, qr_table_name(t));
    bool pending = sqlw_col_pending(meta, col);
    cJSON_Delete(meta);
    return pending ? -1 : fi;
}

static int create_index(SqlCtx *cx, const cJSON *b, QrSqlResult *res)
{
    QrTable *t;
    snprintf(res->tag, sizeof res->tag, "CREATE INDEX");
    int rc = sqlw_table(cx, sqlj_get(b, "relation"), &t);
    if (rc)
        return rc;
    const char *am = sqlj_str(b, "accessMethod");
    if (am && !strcmp(am, "fulltext"))
        return fulltext_index(cx, t, b);
    if (am && strcmp(am, "btree") != 0)
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                          "access method \"%s\" is not supported (btree or fulltext)", am);
    const cJSON *params = sqlj_get(b, "indexParams");
    const cJSON *ie = sqlj_is(cJSON_GetArrayItem(params, 0), "IndexElem");
    const char *col = sqlj_str(ie, "name");
    if (cJSON_GetArraySize(params) != 1 || !col)
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                          "B-tree indexes are on one column (no expressions)");
    const QrSchema *s = qr_table_schema(t);
    bool is_pk = !strcmp(col, s->primary_key);
    int fi = shown_field(cx, t, col);
    if (fi < 0 && !is_pk)
        return sql_err_at(cx, -1, QR_ENOTFOUND, "42703", "column \"%s\" does not exist", col);
    if (sqlj_bool(b, "unique") && !is_pk)
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                          "unique indexes are supported only on the primary key");
    if (fi >= 0 && s->fields[fi].type == QR_FT_TEXT)
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                          "column \"%s\" is full-text: a B-tree needs a varchar or number column",
                          col);
    char idx[2 * QR_NAME_MAX + 8];
    const char *given = sqlj_str(b, "idxname");
    if (given)
        snprintf(idx, sizeof idx, "%s", given);
    else
        snprintf(idx, sizeof idx, "%s_%s_idx", qr_table_name(t), col);
    cJSON *meta = sqlw_meta_load(cx, qr_table_name(t));
    if (!meta)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    cJSON *idxs = meta_obj(meta, "indexes");
    if (cJSON_GetObjectItemCaseSensitive(idxs, idx)) {
        cJSON_Delete(meta);
        if (sqlj_bool(b, "if_not_exists")) {
            sql_notice(cx, "NOTICE", "42P07", "relation \"%s\" already exists, skipping", idx);
            return QR_OK;
        }
        return sql_err_at(cx, -1, QR_EEXISTS, "42P07", "relation \"%s\" already exists", idx);
    }
    if (!is_pk && !s->fields[fi].btree)
        rc = qr_table_create_index(t, col, cx->err);
    /* in a block the name is staged, published at COMMIT (a B-tree the
     * statement made is dropped again by a rollback, sql_txn_ddl.c);
     * outside one the B-tree and its name are committed now */
    const char *kv[2] = {idx, col};
    SqluState *st = cx->sess->u_state;
    if (rc == QR_OK && st && st->in_block && !st->undoing) {
        edit_add_index(meta, kv);
        rc = sqlw_meta_save(cx, qr_table_name(t), meta);
    } else if (rc == QR_OK) {
        rc = sqld_meta_now(cx, qr_table_name(t), edit_add_index, kv);
    }
    cJSON_Delete(meta);
    return rc;
}

/* ---- DROP ---- */

static const char *object_name(const cJSON *obj)
{
    const cJSON *list = sqlj_get(sqlj_is(obj, "List"), "items");
    return list ? sqlj_last_name(list) : sqlj_sval(obj);
}

static int drop_index(SqlCtx *cx, const char *idx, bool missing_ok)
{
    char **names = NULL;
    int n = 0;
    int rc = qr_table_list(cx->sess->db, &names, &n, cx->err);
    bool done = false;
    for (int i = 0; rc == QR_OK && i < n && !done; i++) {
        if (sqld_hidden(cx->sess, names[i]))
            continue; /* its indexes went with it */
        cJSON *meta = sqlw_meta_load(cx, names[i]);
        cJSON *idxs = cJSON_GetObjectItemCaseSensitive(meta, "indexes");
        const char *cv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(idxs, idx));
        char col[QR_NAME_MAX + 1]; /* a copy: the entry goes below */
        snprintf(col, sizeof col, "%s", cv ? cv : "");
        if (cv) {
            QrTable *t;
            rc = sqlw_acquire(cx, names[i], &t, cx->err);
            bool other = false; /* another index name on the same column keeps the B-tree */
            const cJSON *it;
            cJSON_ArrayForEach(it, idxs) if (strcmp(it->string, idx) && cJSON_IsString(it) &&
                                             !strcmp(it->valuestring, col)) other = true;
            int fi = rc == QR_OK ? schema_field_index(qr_table_schema(t), col) : -1;
            SqluState *st = cx->sess->u_state;
            bool later = st && st->in_block && !st->undoing; /* the B-tree goes at COMMIT */
            if (!later && !other && fi >= 0 && qr_table_schema(t)->fields[fi].btree)
                rc = qr_table_drop_index(t, col, cx->err);
            cJSON_DeleteItemFromObjectCaseSensitive(idxs, idx);
            if (rc == QR_OK)
                rc = sqlw_meta_save(cx, names[i], meta);
            if (rc == QR_OK && later && !other && fi >= 0)
                rc = sqld_btree_drop_later(cx, st, names[i], col);
            done = true;
        }
        cJSON_Delete(meta);
    }
    for (int i = 0; i < n; i++)
        qr_free(names[i]);
    qr_free(names);
    if (rc == QR_OK && !done) {
        if (missing_ok)
            sql_notice(cx, "NOTICE", "00000", "index \"%s\" does not exist, skipping", idx);
        else
            rc = sql_err_at(cx, -1, QR_ENOTFOUND, "42704", "index \"%s\" does not exist", idx);
    }
    return rc;
}

static int drop_stmt(SqlCtx *cx, const cJSON *b, QrSqlResult *res)
{
    const char *rt = sqlj_str(b, "removeType");
    bool missing_ok = sqlj_bool(b, "missing_ok");
    bool is_index = rt && !strcmp(rt, "OBJECT_INDEX");
    if (!rt || (!is_index && strcmp(rt, "OBJECT_TABLE") != 0))
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                          "only DROP TABLE and DROP INDEX are supported");
    snprintf(res->tag, sizeof res->tag, is_index ? "DROP INDEX" : "DROP TABLE");
    if (sqlj_str(b, "behavior") && !strcmp(sqlj_str(b, "behavior"), "DROP_CASCADE"))
        sql_notice(cx, "NOTICE", "00000", "CASCADE has nothing to drop in Quarry");
    const cJSON *it;
    cJSON_ArrayForEach(it, sqlj_get(b, "objects"))
    {
        const char *name = object_name(it);
        if (!name)
            return sql_err_at(cx, -1, QR_ESYNTAX, "42601", "object name expected");
        if (is_index) {
            int rc = drop_index(cx, name, missing_ok);
            if (rc)
                return rc;
            continue;
        }
        if (!qr_name_valid(name) || !table_exists(cx, name)) {
            if (missing_ok) {
                sql_notice(cx, "NOTICE", "00000", "table \"%s\" does not exist, skipping", name);
                continue;
            }
            return sql_err_at(cx, -1, QR_ENOTFOUND, "42P01", "table \"%s\" does not exist",
                              name);
        }
        SqluState *st = cx->sess->u_state;
        if (st && st->in_block && !st->undoing) {
            /* dropped at COMMIT (sql_txn_ddl.c); gone for this session now */
            int rc = sqld_defer_drop(cx, st, name);
            if (rc)
                return rc;
            continue;
        }
        sqlw_release(cx->sess, name);
        int rc = qr_table_drop_wait(cx->sess->db, name, SQLW_DROP_WAIT_MS, cx->err);
        if (rc == QR_OK) /* SERIAL, identity and row-id sequences go with their table */
            rc = seq_drop_owned(qr_db_dir(cx->sess->db), name, cx->err);
        if (rc)
            return rc;
    }
    return QR_OK;
}

/* ---- ALTER TABLE ---- */

static void edit_put_col(cJSON *meta, const void *arg) { meta_put_col(meta_obj(meta, "columns"), arg); }

/* Would a column made as f be stored as the field g is (so that an
 * unshown field left by a rolled back ADD COLUMN can be taken over)? */
static bool same_storage(const QrField *f, const QrField *g)
{
    return f->type == g->type && f->indexed == g->indexed && f->multi == g->multi &&
           f->scale == g->scale && f->column == g->column && !strcmp(f->language, g->language);
}

/* ADD COLUMN: a new storage field, whose existing rows read NULL.  In a
 * block on a table older than the block it is staged (sqld_add_column):
 * only the block sees it until COMMIT.  A field an ADD COLUMN of a block
 * that did not commit left behind (unshown: sqlw_col_pending) is taken
 * over by the next ADD COLUMN of the name with the same storage. */
static int add_column(SqlCtx *cx, QrTable *t, const cJSON *c)
{
    ColSpec cs;
    int rc;
    if ((rc = col_from_def(cx, sqlj_is(sqlj_get(c, "def"), "ColumnDef"), &cs)) != QR_OK)
        return rc;
    const QrSchema *s = qr_table_schema(t);
    const char *table = qr_table_name(t);
    int fi = schema_field_index(s, cs.name);
    cJSON *meta = fi >= 0 ? sqlw_meta_load(cx, table) : NULL;
    bool adopt = fi >= 0 && sqlw_col_pending(meta, cs.name);
    cJSON_Delete(meta);
    if (adopt && sqld_column_of_other(cx->sess, table, cs.name)) {
        qr_error_detail(cx->err, "another transaction is adding column \"%s\" to table \"%s\"",
                        cs.name, table);
        qr_error_hint(cx->err, "The transaction might succeed if retried.");
        return sql_err_at(cx, cs.loc, QR_EBUSY, "40001",
                          "could not serialize access due to concurrent update");
    }
    if ((fi >= 0 && !adopt) || !strcmp(cs.name, s->primary_key)) {
        if (sqlj_bool(c, "missing_ok")) {
            sql_notice(cx, "NOTICE", "42701",
                       "column \"%s\" of relation \"%s\" already exists, skipping", cs.name,
                       table);
            return QR_OK;
        }
        return sql_err_at(cx, cs.loc, QR_EEXISTS, "42701",
                          "column \"%s\" of relation \"%s\" already exists", cs.name, table);
    }
    if (cs.is_pk || cs.serial || cs.identity)
        return sql_err_at(cx, cs.loc, QR_EUNSUPPORTED, "0A000",
                          "ADD COLUMN takes no PRIMARY KEY, SERIAL or identity column");
    QrField f;
    col_field(&cs, &f);
    if (adopt && !same_storage(&f, &s->fields[fi])) {
        qr_error_detail(cx->err, "an ADD COLUMN that did not commit left column \"%s\" behind, "
                                 "unshown, with another storage type",
                        cs.name);
        qr_error_hint(cx->err, "add the column under another name");
        return sql_err_at(cx, cs.loc, QR_EUNSUPPORTED, "0A000",
                          "column \"%s\" of relation \"%s\" cannot be added with type %s",
                          cs.name, table, cs.pg);
    }
    /* a DEFAULT or NOT NULL column is filled (and checked) by rewriting the
     * rows, which must commit with the column: staged, in a block or not */
    bool fill = cs.dflt || cs.not_null;
    SqluState *st = cx->sess->u_state;
    if (st && !st->undoing && (st->in_block || fill) && !sqld_goes_with_block(cx->sess, table))
        rc = sqld_add_column(cx, st, t, &f, adopt, edit_put_col, &cs);
    else if (!adopt && (rc = qr_table_add_field(t, &f, cx->err)) != QR_OK)
        return rc;
    else /* the storage field exists now: its declared type too */
        rc = sqld_meta_now(cx, table, edit_put_col, &cs);
    if (rc != QR_OK || !fill || !st)
        return rc;
    rc = sqld_fill_column(cx, st, table, cs.name, cs.dflt);
    if (rc == QR_ECONSTRAINT && !strcmp(qr_error_sqlstate(cx->err), "23502")) {
        qr_error_clear(cx->err); /* PostgreSQL's words for it */
        return sql_err_at(cx, cs.loc, QR_ECONSTRAINT, "23502",
                          "column \"%s\" of relation \"%s\" contains null values", cs.name,
                          table);
    }
    return rc;
}

/* The sequence a DEFAULT nextval('<seq>'::regclass) draws from, or NULL. */
static const char *nextval_seq(const cJSON *e)
{
    const cJSON *fc = sqlj_is(e, "FuncCall");
    const char *fn = sqlj_last_name(sqlj_get(fc, "funcname"));
    const cJSON *a = cJSON_GetArrayItem(sqlj_get(fc, "args"), 0);
    if (!fn || strcmp(fn, "nextval") != 0 || cJSON_GetArraySize(sqlj_get(fc, "args")) != 1)
        return NULL;
    if (sqlj_is(a, "TypeCast"))
        a = sqlj_get(sqlj_is(a, "TypeCast"), "arg");
    const cJSON *sv = sqlj_get(sqlj_is(a, "A_Const"), "sval");
    const char *name = sqlj_str(sv, "sval");
    if (name && !strncmp(name, "public.", 7))
        name += 7;
    return name;
}

/* ALTER COLUMN SET / DROP DEFAULT, ADD GENERATED ... AS IDENTITY, SET /
 * DROP NOT NULL: the column's entry in the SQL metadata. */
static int alter_column(SqlCtx *cx, QrTable *t, const cJSON *c, const char *sub)
{
    const char *col = sqlj_str(c, "name");
    const QrSchema *s = qr_table_schema(t);
    if (!col || (shown_field(cx, t, col) < 0 && strcmp(col, s->primary_key) != 0))
        return sql_err_at(cx, -1, QR_ENOTFOUND, "42703",
                          "column \"%s\" of relation \"%s\" does not exist", col ? col : "",
                          qr_table_name(t));
    cJSON *meta = sqlw_meta_load(cx, qr_table_name(t));
    cJSON *mc = meta ? cJSON_GetObjectItemCaseSensitive(meta_obj(meta, "columns"), col) : NULL;
    if (meta && !mc)
        mc = cJSON_AddObjectToObject(cJSON_GetObjectItemCaseSensitive(meta, "columns"), col);
    if (!mc) {
        cJSON_Delete(meta);
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    }
    int rc = QR_OK;
    const cJSON *def = sqlj_get(c, "def");
    if (!strcmp(sub, "AT_ColumnDefault")) {
        cJSON_DeleteItemFromObjectCaseSensitive(mc, "default");
        cJSON_DeleteItemFromObjectCaseSensitive(mc, "sequence");
        if (def) {
            const char *seq = nextval_seq(def);
            cJSON_AddItemToObject(mc, "default", cJSON_Duplicate(def, true));
            if (seq)
                cJSON_AddStringToObject(mc, "sequence", seq);
        }
    } else if (!strcmp(sub, "AT_AddIdentity")) {
        const cJSON *k = sqlj_is(def, "Constraint");
        const char *gw = sqlj_str(k, "generated_when");
        const char *pg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(mc, "type"));
        char seq[64];
        int fi = schema_field_index(s, col);
        if ((fi >= 0 && s->fields[fi].type != QR_FT_INT) || cJSON_GetObjectItemCaseSensitive(mc, "default"))
            rc = sql_err_at(cx, -1, QR_EINVAL, "42611",
                            "column \"%s\" of relation \"%s\" must be an integer without a default "
                            "to be an identity column",
                            col, qr_table_name(t));
        else if ((rc = sqlseq_for_column(cx, qr_table_name(t), col, pg ? pg : "int8",
                                         sqlj_get(k, "options"), false, seq, sizeof seq)) == QR_OK) {
            cJSON_AddItemToObject(mc, "default", sqlseq_default_tree(seq));
            cJSON_AddStringToObject(mc, "sequence", seq);
            cJSON_AddStringToObject(mc, "identity", gw && gw[0] == 'd' ? "d" : "a");
            cJSON_DeleteItemFromObjectCaseSensitive(mc, "not_null");
            cJSON_AddTrueToObject(mc, "not_null");
            rc = sqld_seq_created(cx, seq); /* a block's ROLLBACK drops it again */
        }
    } else {
        cJSON_DeleteItemFromObjectCaseSensitive(mc, "not_null");
        if (!strcmp(sub, "AT_SetNotNull"))
            cJSON_AddTrueToObject(mc, "not_null");
    }
    if (rc == QR_OK)
        rc = sqlw_meta_save(cx, qr_table_name(t), meta);
    cJSON_Delete(meta);
    return rc;
}

/* name as a quoted SQL identifier ("a""b") into out. */
static void quote_name(char *out, size_t cap, const char *name)
{
    size_t o = 0;
    out[o++] = '"';
    for (const char *p = name; *p && o + 3 < cap; p++) {
        if (*p == '"')
            out[o++] = '"';
        out[o++] = *p;
    }
    out[o++] = '"';
    out[o] = 0;
}

/* How many rows of table satisfy cond (SQL text over the quoted column
 * col: "%s" stands for it), as the session sees them. */
static int count_where(SqlCtx *cx, const char *table, const char *col, const char *cond,
                       int64_t *n)
{
    char qt[2 * QR_NAME_MAX + 3], qc[2 * QR_NAME_MAX + 3], where[512], sql[1400];
    quote_name(qt, sizeof qt, table);
    quote_name(qc, sizeof qc, col);
    snprintf(where, sizeof where, cond, qc);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE %s", qt, where);
    PgQueryParseResult pr = pg_query_parse(sql);
    cJSON *root = pr.error ? NULL : cJSON_Parse(pr.parse_tree);
    pg_query_free_parse_result(pr);
    const cJSON *node = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "stmts"), 0), "stmt");
    QrSqlResult *res = qr_arena_calloc(cx->arena, sizeof *res);
    int rc = node && res ? sql_query_run(cx, node, res)
                         : qr_error_set(cx->err, QR_EINTERNAL, "cannot build a check of the column");
    cJSON_Delete(root);
    if (rc == QR_OK)
        *n = res->n_rows ? res->vals[0].u.i : 0;
    return rc;
}

/* USING expr of ALTER COLUMN TYPE: none, the column, or a cast of it. */
static bool plain_using(const cJSON *e, const char *col)
{
    const cJSON *tc = sqlj_is(e, "TypeCast");
    if (tc)
        e = sqlj_get(tc, "arg");
    const cJSON *ref = sqlj_is(e, "ColumnRef");
    const char *name = sqlj_last_name(sqlj_get(ref, "fields"));
    return !e || (ref && name && !strcmp(name, col));
}

/* ALTER TABLE ... ALTER COLUMN c [SET DATA] TYPE t [USING c::t] (Django's
 * AlterField of max_length, IntegerField to BigIntegerField): between types
 * stored alike -- the integers; varchar(n), text and the other strings -- the
 * rows must fit the new type (a longer string 22001, an integer out of
 * range 22003, as PostgreSQL checks), and only the definition changes, or,
 * between an analyzed text column and an unanalyzed string, the table is
 * rebuilt (sql_rekey.c).  Other changes are 0A000.  In a block it goes with
 * the block like any ALTER. */
static int alter_column_type(SqlCtx *cx, QrTable *t, const cJSON *c)
{
    const char *col = sqlj_str(c, "name");
    const char *table = qr_table_name(t);
    const QrSchema *s = qr_table_schema(t);
    bool is_pk = col && !strcmp(col, s->primary_key);
    int fi = col ? shown_field(cx, t, col) : -1;
    if (!col || (fi < 0 && !is_pk))
        return sql_err_at(cx, -1, QR_ENOTFOUND, "42703",
                          "column \"%s\" of relation \"%s\" does not exist", col ? col : "",
                          table);
    const cJSON *cd = sqlj_is(sqlj_get(c, "def"), "ColumnDef");
    ColSpec nc;
    memset(&nc, 0, sizeof nc);
    nc.name = col;
    int rc = map_type(cx, sqlj_get(cd, "typeName"), &nc);
    if (rc)
        return rc;
    if (nc.serial)
        return sql_err_at(cx, -1, QR_ENOTFOUND, "42704", "type \"%s\" does not exist",
                          sqlj_last_name(sqlj_get(sqlj_get(cd, "typeName"), "names")));
    if (!plain_using(sqlj_get(cd, "raw_default"), col))
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                          "ALTER COLUMN TYPE ... USING takes the column or a cast of it only");
    cJSON *meta = sqlw_meta_load(cx, table);
    cJSON *mc = meta ? (cJSON *)sqlw_meta_col(meta, col) : NULL;
    if (!mc) {
        cJSON_Delete(meta);
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    }
    const char *pkt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "pk_type"));
    QrFieldType old_ft = is_pk ? (pkt && !strcmp(pkt, "int8") ? QR_FT_INT : QR_FT_KEYWORD)
                               : s->fields[fi].type;
    bool str_old = old_ft == QR_FT_KEYWORD || old_ft == QR_FT_TEXT;
    bool str_new = nc.ft == QR_FT_KEYWORD || nc.ft == QR_FT_TEXT;
    bool rebuild = nc.ft != old_ft && !is_pk;
    if (nc.doc_only || (nc.ft != old_ft && !(str_old && str_new && !is_pk))) {
        const char *op = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(mc, "type"));
        rc = sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                        "changing column \"%s\" from %s to %s is not supported (integers to "
                        "integers and strings to strings are)",
                        col, op ? op : "?", nc.pg);
        cJSON_Delete(meta);
        return rc;
    }
    /* the rows must fit */
    int64_t n = 0;
    if (nc.ft == QR_FT_KEYWORD && nc.typmod > 4) {
        char cond[64];
        snprintf(cond, sizeof cond, "length(%%s) > %d", nc.typmod - 4);
        if ((rc = count_where(cx, table, col, cond, &n)) == QR_OK && n > 0)
            rc = sql_err_at(cx, -1, QR_EINVAL, "22001",
                            "value too long for type character varying(%d)", nc.typmod - 4);
    } else if (nc.ft == QR_FT_INT && strcmp(nc.pg, "int8") != 0) {
        bool small = !strcmp(nc.pg, "int2");
        if ((rc = count_where(cx, table, col,
                              small ? "%s NOT BETWEEN -32768 AND 32767"
                                    : "%s NOT BETWEEN -2147483648 AND 2147483647",
                              &n)) == QR_OK &&
            n > 0)
            rc = sql_err_at(cx, -1, QR_EINVAL, "22003", "%s out of range",
                            small ? "smallint" : "integer");
    }
    if (rc == QR_OK) {
        cJSON_DeleteItemFromObjectCaseSensitive(mc, "type");
        cJSON_DeleteItemFromObjectCaseSensitive(mc, "typmod");
        cJSON_AddStringToObject(mc, "type", nc.pg);
        cJSON_AddNumberToObject(mc, "typmod", nc.typmod);
    }
    if (rc == QR_OK && rebuild) { /* analyzed or not: every row indexed again */
        QrSchema *ns = qr_arena_calloc(cx->arena, sizeof *ns);
        if (!ns)
            rc = qr_error_set(cx->err, QR_ENOMEM, "out of memory");
        else {
            *ns = *s;
            col_field(&nc, &ns->fields[fi]);
            ns->fields[fi].btree = s->fields[fi].btree && nc.ft != QR_FT_TEXT;
            set_all_field(ns);
            sqld_schema_settle(cx->sess, table, ns);
            rc = sqlw_rebuild(cx, t, ns, NULL, meta);
        }
    } else if (rc == QR_OK) {
        rc = sqlw_meta_save(cx, table, meta);
    }
    cJSON_Delete(meta);
    return rc;
}

/* ALTER TABLE IF EXISTS of a table that does not exist: a NOTICE, and
 * nothing to do. */
static bool skip_missing(SqlCtx *cx, const cJSON *b, const cJSON *rv)
{
    const char *name = sqlj_str(rv, "relname");
    if (!sqlj_bool(b, "missing_ok") || !name || table_exists(cx, name))
        return false;
    sql_notice(cx, "NOTICE", "42P01", "relation \"%s\" does not exist, skipping", name);
    return true;
}

/* ALTER TABLE t RENAME [COLUMN] a TO b (Django's RenameField): the table
 * is rebuilt with the column renamed in every row (sql_rekey.c), the key
 * too; indexes naming it follow.  In a block it goes with the block.
 * Renaming tables, indexes and sequences is 0A000. */
static int rename_stmt(SqlCtx *cx, const cJSON *b, QrSqlResult *res)
{
    const char *rt = sqlj_str(b, "renameType");
    snprintf(res->tag, sizeof res->tag, "ALTER TABLE");
    if (!rt || strcmp(rt, "OBJECT_COLUMN") != 0)
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                          "ALTER ... RENAME is supported for columns only (not tables, indexes "
                          "or sequences)");
    const cJSON *rv = sqlj_get(b, "relation");
    if (skip_missing(cx, b, rv))
        return QR_OK;
    QrTable *t;
    int rc = sqlw_table(cx, rv, &t);
    if (rc)
        return rc;
    const char *table = qr_table_name(t);
    const char *from = sqlj_str(b, "subname"), *to = sqlj_str(b, "newname");
    cJSON *meta = sqlw_meta_load(cx, table);
    if (!meta)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    const QrSchema *old = qr_table_schema(t);
    if (!from || !sqlw_meta_col(meta, from) || sqlw_col_pending(meta, from) || from[0] == '_')
        rc = sql_err_at(cx, -1, QR_ENOTFOUND, "42703", "column \"%s\" does not exist",
                        from ? from : "");
    else if (!to || !qr_name_valid(to) || to[0] == '_')
        rc = sql_err_at(cx, -1, QR_EINVAL, "42602", "invalid column name \"%s\"", to ? to : "");
    else if (sqlw_meta_col(meta, to) || schema_field_index(old, to) >= 0 ||
             !strcmp(to, old->primary_key))
        rc = sql_err_at(cx, -1, QR_EEXISTS, "42701",
                        "column \"%s\" of relation \"%s\" already exists", to, table);
    QrSchema *s = rc == QR_OK ? qr_arena_calloc(cx->arena, sizeof *s) : NULL;
    if (rc == QR_OK && !s)
        rc = qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    if (rc == QR_OK) {
        *s = *old;
        int fi = schema_field_index(s, from);
        if (!strcmp(s->primary_key, from))
            snprintf(s->primary_key, sizeof s->primary_key, "%s", to);
        else if (fi >= 0)
            snprintf(s->fields[fi].name, sizeof s->fields[fi].name, "%s", to);
        sqld_schema_settle(cx->sess, table, s);
        /* the columns in their order, this one under its new name */
        cJSON *cols = cJSON_GetObjectItemCaseSensitive(meta, "columns");
        cJSON *renamed = cJSON_CreateObject();
        while (renamed && cols && cols->child) {
            cJSON *it = cJSON_DetachItemViaPointer(cols, cols->child);
            cJSON_AddItemToObject(renamed, !strcmp(it->string, from) ? to : it->string, it);
        }
        if (!renamed || !cJSON_ReplaceItemInObjectCaseSensitive(meta, "columns", renamed))
            rc = qr_error_set(cx->err, QR_ENOMEM, "out of memory");
        const cJSON *ix;
        cJSON_ArrayForEach(ix, cJSON_GetObjectItemCaseSensitive(meta, "indexes"))
            if (cJSON_IsString(ix) && !strcmp(ix->valuestring, from))
                cJSON_SetValuestring((cJSON *)ix, to);
    }
    if (rc == QR_OK) {
        SqlwRekey how = {.rename_from = from, .rename_to = to};
        rc = sqlw_rebuild(cx, t, s, &how, meta);
    }
    cJSON_Delete(meta);
    return rc;
}

/* ALTER TABLE s OWNER TO r on a sequence (pg_dump writes it so): the one
 * owner is the role that connected, so nothing changes. */
static bool owner_of_sequence(SqlCtx *cx, const cJSON *b)
{
    const cJSON *it;
    const char *rel = sqlj_str(sqlj_get(b, "relation"), "relname");
    if (!rel || !sqlcat_is_sequence(cx, rel))
        return false;
    cJSON_ArrayForEach(it, sqlj_get(b, "cmds"))
    {
        const char *sub = sqlj_str(sqlj_is(it, "AlterTableCmd"), "subtype");
        if (!sub || strcmp(sub, "AT_ChangeOwner") != 0)
            return false;
    }
    return true;
}

/* ALTER TABLE ... DROP CONSTRAINT [IF EXISTS] <table>_pkey (pg_dump --clean
 * drops keys before tables): the table goes back to a hidden row id.  It
 * is rebuilt (sql_rekey.c), every row numbered from a new internal
 * sequence; the key column stays, NOT NULL, as an ordinary column.  Quarry
 * tables have no other constraints: any other name is 42704. */
static int drop_primary_key(SqlCtx *cx, QrTable *t, const cJSON *c)
{
    const char *table = qr_table_name(t);
    const char *cname = sqlj_str(c, "name");
    char pkey[QR_NAME_MAX + 8];
    snprintf(pkey, sizeof pkey, "%s_pkey", table);
    cJSON *meta = sqlw_meta_load(cx, table);
    if (!meta)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    if (!cname || strcmp(cname, pkey) != 0 || sqlw_hidden_pk(meta)) {
        cJSON_Delete(meta);
        if (sqlj_bool(c, "missing_ok")) {
            sql_notice(cx, "NOTICE", "42704",
                       "constraint \"%s\" of relation \"%s\" does not exist, skipping",
                       cname ? cname : "", table);
            return QR_OK;
        }
        return sql_err_at(cx, -1, QR_ENOTFOUND, "42704",
                          "constraint \"%s\" of relation \"%s\" does not exist", cname ? cname : "",
                          table);
    }
    /* the key column as an ordinary one, typed as sql.json declares it */
    const QrSchema *old = qr_table_schema(t);
    const char *pg = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(sqlw_meta_col(meta, old->primary_key), "type"));
    const char *pkt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "pk_type"));
    ColSpec kc = {.name = old->primary_key, .typmod = -1,
                  .ft = pkt && !strcmp(pkt, "int8") ? QR_FT_INT : QR_FT_KEYWORD};
    for (size_t i = 0; pg && i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (!strcmp(TYPES[i].pg, pg)) {
            kc.ft = TYPES[i].ft;
            break;
        }
    QrSchema *s = qr_arena_calloc(cx->arena, sizeof *s);
    if (!s) {
        cJSON_Delete(meta);
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    }
    *s = *old;
    s->n_fields = 0;
    snprintf(s->primary_key, sizeof s->primary_key, "%s", SQLW_ROWID);
    /* the fields in the columns' order (SELECT *, INSERT without a column
     * list), the key column in its place; then any the columns do not name */
    QrField kf;
    col_field(&kc, &kf);
    int rc = QR_OK;
    const cJSON *mc;
    cJSON_ArrayForEach(mc, cJSON_GetObjectItemCaseSensitive(meta, "columns"))
    {
        int fi = schema_field_index(old, mc->string);
        const QrField *f = !strcmp(mc->string, old->primary_key) ? &kf
                           : fi >= 0                              ? &old->fields[fi]
                                                                  : NULL;
        if (rc == QR_OK && f && schema_add_field(s, f, cx->err) < 0)
            rc = cx->err->code;
    }
    for (int i = 0; rc == QR_OK && i < old->n_fields; i++)
        if (schema_field_index(s, old->fields[i].name) < 0 &&
            schema_add_field(s, &old->fields[i], cx->err) < 0)
            rc = cx->err->code;
    set_all_field(s);
    sqld_schema_settle(cx->sess, table, s);
    /* the row id: a new internal sequence, as CREATE TABLE without a key makes */
    ColSpec rid = {.name = SQLW_ROWID, .ft = QR_FT_INT, .pg = "int8", .typmod = -1,
                   .is_pk = true, .not_null = true, .serial = true, .loc = -1};
    if (rc == QR_OK)
        rc = sqlseq_for_column(cx, table, SQLW_ROWID, "int8", NULL, true, rid.seq,
                               sizeof rid.seq);
    if (rc == QR_OK) {
        cJSON *mcols = cJSON_GetObjectItemCaseSensitive(meta, "columns");
        meta_put_col(mcols, &rid);
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "pk_type");
        cJSON_AddStringToObject(meta, "pk_type", "int8");
        cJSON_AddTrueToObject(meta, "hidden_pk");
        SqlwRekey how = {.rowid_seq = rid.seq};
        rc = sqlw_rebuild(cx, t, s, &how, meta);
        SqluState *st = cx->sess->u_state;
        if (rc != QR_OK && !(st && st->in_block)) /* in a block the rebuild's own rollback does */
            seq_drop(qr_db_dir(cx->sess->db), rid.seq, NULL);
    }
    cJSON_Delete(meta);
    return rc;
}

/* ALTER TABLE ... DROP COLUMN [IF EXISTS] c: the table is rebuilt without
 * it (sql_rekey.c: every row rewritten, the column's B-tree and the
 * indexes naming it dropped with it, a serial's sequence too, as
 * PostgreSQL's dependent objects go).  The key column stays: drop the key
 * first. */
static int drop_column(SqlCtx *cx, QrTable *t, const cJSON *c)
{
    const char *table = qr_table_name(t);
    const char *col = sqlj_str(c, "name");
    cJSON *meta = sqlw_meta_load(cx, table);
    if (!meta)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    const QrSchema *old = qr_table_schema(t);
    int rc = QR_OK;
    if (!col || !sqlw_meta_col(meta, col) || sqlw_col_pending(meta, col) || col[0] == '_') {
        if (sqlj_bool(c, "missing_ok"))
            sql_notice(cx, "NOTICE", "42703",
                       "column \"%s\" of relation \"%s\" does not exist, skipping",
                       col ? col : "", table);
        else
            rc = sql_err_at(cx, -1, QR_ENOTFOUND, "42703",
                            "column \"%s\" of relation \"%s\" does not exist", col ? col : "",
                            table);
        cJSON_Delete(meta);
        return rc;
    }
    if (!strcmp(col, old->primary_key)) {
        qr_error_hint(cx->err, "drop the key first: ALTER TABLE %s DROP CONSTRAINT %s_pkey", table,
                      table);
        cJSON_Delete(meta);
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                          "cannot drop column \"%s\", the primary key of table \"%s\"", col,
                          table);
    }
    QrSchema *s = qr_arena_calloc(cx->arena, sizeof *s);
    if (!s) {
        cJSON_Delete(meta);
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    }
    *s = *old;
    s->n_fields = 0;
    for (int i = 0; rc == QR_OK && i < old->n_fields; i++)
        if (strcmp(old->fields[i].name, col) != 0 && schema_add_field(s, &old->fields[i], cx->err) < 0)
            rc = cx->err->code;
    set_all_field(s);
    sqld_schema_settle(cx->sess, table, s);
    char seq[SEQ_NAME_MAX + 1] = ""; /* a serial's sequence goes with its column */
    const char *cs = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(sqlw_meta_col(meta, col), "sequence"));
    if (cs)
        snprintf(seq, sizeof seq, "%s", cs);
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(meta, "columns"),
                                            col);
    cJSON *idxs = cJSON_GetObjectItemCaseSensitive(meta, "indexes");
    for (cJSON *it = idxs ? idxs->child : NULL, *next; it; it = next) {
        next = it->next;
        if (cJSON_IsString(it) && !strcmp(it->valuestring, col))
            cJSON_Delete(cJSON_DetachItemViaPointer(idxs, it));
    }
    if (rc == QR_OK) {
        SqlwRekey how = {.drop_col = col, .drop_seq = seq};
        rc = sqlw_rebuild(cx, t, s, &how, meta);
    }
    cJSON_Delete(meta);
    return rc;
}

static int alter_table(SqlCtx *cx, const cJSON *b, QrSqlResult *res)
{
    QrTable *t;
    snprintf(res->tag, sizeof res->tag, "ALTER TABLE");
    if (owner_of_sequence(cx, b))
        return QR_OK;
    const cJSON *rv = sqlj_get(b, "relation");
    if (skip_missing(cx, b, rv))
        return QR_OK;
    int rc = sqlw_table(cx, rv, &t);
    if (rc)
        return rc;
    const cJSON *it;
    cJSON_ArrayForEach(it, sqlj_get(b, "cmds"))
    {
        const cJSON *c = sqlj_is(it, "AlterTableCmd");
        const char *sub = sqlj_str(c, "subtype");
        const cJSON *k = sqlj_is(sqlj_get(c, "def"), "Constraint");
        const char *ct = sqlj_str(k, "contype");
        if (sub && !strcmp(sub, "AT_AddColumn")) {
            rc = add_column(cx, t, c);
        } else if (sub && !strcmp(sub, "AT_ChangeOwner")) {
            rc = QR_OK; /* one owner: the role that connected */
        } else if (sub && (!strcmp(sub, "AT_ColumnDefault") || !strcmp(sub, "AT_AddIdentity") ||
                           !strcmp(sub, "AT_SetNotNull") || !strcmp(sub, "AT_DropNotNull"))) {
            rc = alter_column(cx, t, c, sub);
        } else if (sub && !strcmp(sub, "AT_AlterColumnType")) {
            rc = alter_column_type(cx, t, c);
            if (rc == QR_OK && cJSON_GetArraySize(sqlj_get(b, "cmds")) > 1)
                rc = sqlw_table(cx, sqlj_get(b, "relation"), &t); /* perhaps rebuilt */
        } else if (sub && !strcmp(sub, "AT_DropColumn")) {
            rc = drop_column(cx, t, c);
            if (rc == QR_OK && cJSON_GetArraySize(sqlj_get(b, "cmds")) > 1)
                rc = sqlw_table(cx, sqlj_get(b, "relation"), &t); /* rebuilt: a new handle */
        } else if (sub && !strcmp(sub, "AT_DropConstraint")) {
            rc = drop_primary_key(cx, t, c);
            if (rc == QR_OK && cJSON_GetArraySize(sqlj_get(b, "cmds")) > 1)
                rc = sqlw_table(cx, sqlj_get(b, "relation"), &t); /* rebuilt: a new handle */
        } else if (sub && !strcmp(sub, "AT_AddConstraint") && ct && !strcmp(ct, "CONSTR_PRIMARY")) {
            const cJSON *keys = sqlj_get(k, "keys");
            if (cJSON_GetArraySize(keys) != 1)
                return sql_err_at(cx, sqlj_loc(k), QR_EUNSUPPORTED, "0A000",
                                  "a Quarry table needs a primary key of exactly one column");
            rc = sqlw_add_primary_key(cx, t, sqlj_sval(cJSON_GetArrayItem(keys, 0)),
                                      sqlj_loc(k));
            /* the table was rebuilt: its handle is gone */
            if (rc == QR_OK && cJSON_GetArraySize(sqlj_get(b, "cmds")) > 1)
                rc = sqlw_table(cx, sqlj_get(b, "relation"), &t);
        } else {
            return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                              "ALTER TABLE supports ADD COLUMN, DROP COLUMN, ADD PRIMARY KEY, "
                              "DROP CONSTRAINT (the primary key), ALTER COLUMN SET/DROP DEFAULT, "
                              "SET/DROP NOT NULL, TYPE, ADD GENERATED AS IDENTITY and OWNER TO");
        }
        if (rc)
            return rc;
    }
    return QR_OK;
}

/* LOCK TABLE (pg_dump) and VACUUM / ANALYZE (pgbench): the tables must
 * exist; nothing else to do, since readers work on snapshots and segments
 * are merged in the background. */
static int lock_or_vacuum(SqlCtx *cx, const cJSON *b, const char *tag, QrSqlResult *res)
{
    bool lock = !strcmp(tag, "LockStmt");
    snprintf(res->tag, sizeof res->tag, "%s",
             lock ? "LOCK TABLE" : sqlj_bool(b, "is_vacuumcmd") ? "VACUUM" : "ANALYZE");
    const cJSON *it;
    cJSON_ArrayForEach(it, sqlj_get(b, lock ? "relations" : "rels"))
    {
        const cJSON *rv = lock ? sqlj_is(it, "RangeVar")
                               : sqlj_get(sqlj_is(it, "VacuumRelation"), "relation");
        QrTable *t;
        int rc = sqlw_table(cx, rv, &t);
        if (rc)
            return rc;
    }
    return QR_OK;
}

int sqlw_ddl_exec(SqlCtx *cx, const cJSON *b, const char *tag, QrSqlResult *res)
{
    if (!strcmp(tag, "CreateStmt"))
        return create_table(cx, b, res);
    if (!strcmp(tag, "IndexStmt"))
        return create_index(cx, b, res);
    if (!strcmp(tag, "DropStmt")) {
        const char *rt = sqlj_str(b, "removeType");
        if (rt && !strcmp(rt, "OBJECT_SEQUENCE"))
            return sqlseq_drop(cx, b, res);
        return drop_stmt(cx, b, res);
    }
    if (!strcmp(tag, "AlterOwnerStmt") || !strcmp(tag, "CommentStmt")) {
        /* one owner (the role that connected); comments are not kept */
        const char *ot = sqlj_str(b, "objectType");
        snprintf(res->tag, sizeof res->tag, "%s",
                 !strcmp(tag, "CommentStmt") ? "COMMENT"
                 : ot && !strcmp(ot, "OBJECT_SCHEMA") ? "ALTER SCHEMA" : "ALTER OWNER");
        return QR_OK;
    }
    if (!strcmp(tag, "LockStmt") || !strcmp(tag, "VacuumStmt"))
        return lock_or_vacuum(cx, b, tag, res);
    if (!strcmp(tag, "CreateSeqStmt"))
        return sqlseq_create(cx, b, res);
    if (!strcmp(tag, "AlterSeqStmt"))
        return sqlseq_alter(cx, b, res);
    if (!strcmp(tag, "AlterTableStmt"))
        return alter_table(cx, b, res);
    if (!strcmp(tag, "RenameStmt"))
        return rename_stmt(cx, b, res);
    if (!strcmp(tag, "CreateTableAsStmt"))
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                          "CREATE TABLE AS is not supported: CREATE TABLE with a primary key, "
                          "then INSERT ... SELECT");
    return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000", "%s is not supported",
                      tag);
}
