/*
 * sql_catalog.c — the PostgreSQL catalog as Quarry sees itself: virtual
 * relations of pg_catalog and information_schema built from the real
 * tables, columns and indexes on every read; the catalog and session
 * functions (version(), current_database(), format_type()...); the
 * settings Quarry knows.
 *
 * Layer: query/.  Calls quarry.h and the SQL internals.
 *
 * Relations are described as data (CAT_RELS: name, schema, columns as
 * "name:type" with one-letter types) and filled by one generator each;
 * relations tools ask about but Quarry has nothing for (pg_inherits,
 * pg_policy, pg_trigger...) exist and are empty, so psql's queries run.
 *
 * OIDs are stable: a table's is 16384 + a hash of its name (below 2^31),
 * its primary key index's the hash of "<table>_pkey", a B-tree index's the
 * hash of its name.  Namespaces: pg_catalog 11, public 2200,
 * information_schema 13000.  Types use PostgreSQL's OIDs.
 */
#include "query/sql_w.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- settings ---- */

const SqlwSettingDef SQLW_SETTINGS[] = {
    {"application_name", "", "Sets the application name to be reported."},
    {"client_encoding", "UTF8", "Sets the client's character set encoding."},
    {"DateStyle", "ISO, MDY", "Sets the display format for date and time values."},
    {"default_transaction_isolation", "read committed", "Transaction isolation level."},
    {"extra_float_digits", "1", "Sets the number of digits displayed for floating-point values."},
    {"integer_datetimes", "on", "Datetimes are integer based."},
    {"IntervalStyle", "postgres", "Sets the display format for interval values."},
    {"lc_collate", "C", "Collation order (Quarry compares bytes)."},
    {"lc_ctype", "C.UTF-8", "Character classification."},
    {"max_identifier_length", "63", "Maximum identifier length."},
    {"quarry.access_path", "auto",
     "How filtered queries read tables: auto, text, btree, scan, check, full."},
    {"quarry.mem_cap", "0", "Per-query memory cap in bytes (0 = the default)."},
    {"search_path", "\"$user\", public", "Sets the schema search order for names."},
    {"server_encoding", "UTF8", "Server (database) character set encoding."},
    {"server_version", "15.0", "PostgreSQL version Quarry's SQL follows."},
    {"server_version_num", "150000", "PostgreSQL version number Quarry's SQL follows."},
    {"standard_conforming_strings", "on", "Backslashes in ordinary strings are literal."},
    {"statement_timeout", "0", "Maximum time of any statement (ms, 0 = none)."},
    {"TimeZone", "UTC", "Time zone for displaying timestamps (Quarry works in UTC)."},
    {"transaction_isolation", "read committed", "Current transaction's isolation level."},
};
const int SQLW_N_SETTINGS = (int)(sizeof SQLW_SETTINGS / sizeof SQLW_SETTINGS[0]);

const char *sqlw_setting(const QrSqlSession *s, const char *name)
{
    const char *v = qr_sql_session_get(s, name);
    if (v)
        return v;
    for (int i = 0; i < SQLW_N_SETTINGS; i++)
        if (!strcasecmp(SQLW_SETTINGS[i].name, name))
            return SQLW_SETTINGS[i].dflt;
    return NULL;
}

/* ---- OIDs and types ---- */

enum { NS_CATALOG = 11, NS_PUBLIC = 2200, NS_INFO = 13000, OWNER_OID = 10, DB_OID = 16383 };

static uint32_t name_oid(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return 16384 + h % 2000000000u;
}

uint32_t sqlcat_table_oid(const char *table) { return name_oid(table); }

static uint32_t pkey_oid(const char *table)
{
    char b[QR_NAME_MAX + 8];
    snprintf(b, sizeof b, "%s_pkey", table);
    return name_oid(b);
}

typedef struct PgType {
    const char *name;    /* typname */
    uint32_t oid;
    int16_t len;
    char category;
    const char *sql;     /* format_type / information_schema data_type */
} PgType;

static const PgType PG_TYPES[] = {
    {"bool", 16, 1, 'B', "boolean"},
    {"char", 18, 1, 'Z', "\"char\""},
    {"name", 19, 64, 'S', "name"},
    {"int8", 20, 8, 'N', "bigint"},
    {"int2", 21, 2, 'N', "smallint"},
    {"int4", 23, 4, 'N', "integer"},
    {"text", 25, -1, 'S', "text"},
    {"oid", 26, 4, 'N', "oid"},
    {"float4", 700, 4, 'N', "real"},
    {"float8", 701, 8, 'N', "double precision"},
    {"bpchar", 1042, -1, 'S', "character"},
    {"varchar", 1043, -1, 'S', "character varying"},
    {"timestamp", 1114, 8, 'D', "timestamp without time zone"},
    {"timestamptz", 1184, 8, 'D', "timestamp with time zone"},
    {"numeric", 1700, -1, 'N', "numeric"},
};
#define N_PG_TYPES (int)(sizeof PG_TYPES / sizeof PG_TYPES[0])

/* ---- the types of sql_types.c beyond PG_TYPES (arrays, ...) ---- */

/* Their rows come from the registry (sqlt_catalog_row), made once. */
static PgType more_types[128];
static uint32_t more_elem[128];   /* typelem of more_types[i] */
static int n_more_types;
static pthread_once_t more_once = PTHREAD_ONCE_INIT;

static void more_types_init(void)
{
    SqlTypeRow r;
    for (int i = 0; sqlt_catalog_row(i, &r) && n_more_types < 128; i++) {
        bool have = false;
        for (int k = 0; k < N_PG_TYPES && !have; k++)
            have = PG_TYPES[k].oid == r.oid;
        if (have)
            continue;
        more_elem[n_more_types] = r.elem;
        more_types[n_more_types++] = (PgType){r.name, r.oid, r.len, r.category, r.sql};
    }
}

static int n_more(void)
{
    pthread_once(&more_once, more_types_init);
    return n_more_types;
}

static const PgType *type_by_name(const char *n)
{
    for (int i = 0; i < N_PG_TYPES; i++)
        if (!strcmp(PG_TYPES[i].name, n))
            return &PG_TYPES[i];
    for (int i = 0; i < n_more(); i++)
        if (!strcmp(more_types[i].name, n))
            return &more_types[i];
    return &PG_TYPES[6]; /* text */
}

static const PgType *type_by_oid(uint32_t oid)
{
    for (int i = 0; i < N_PG_TYPES; i++)
        if (PG_TYPES[i].oid == oid)
            return &PG_TYPES[i];
    for (int i = 0; i < n_more(); i++)
        if (more_types[i].oid == oid)
            return &more_types[i];
    return NULL;
}

/* ---- one column of one table, as the catalog shows it ---- */

typedef struct CatCol {
    const char *name;
    const PgType *type;
    int32_t typmod;
    bool not_null;
    const cJSON *dflt;   /* borrows the metadata */
} CatCol;

static const char *storage_pg(QrFieldType t)
{
    switch (t) {
    case QR_FT_INT: return "int8";
    case QR_FT_FLOAT: return "float8";
    case QR_FT_BOOL: return "bool";
    case QR_FT_TIMESTAMP: return "timestamptz";
    case QR_FT_KEYWORD: return "varchar";
    case QR_FT_TEXT: return "text";
    }
    return "text";
}

/* Columns of a table in attnum order (primary key first); *out in arena. */
static int table_cols(SqlCtx *cx, QrTable *t, const cJSON *meta, CatCol **out, int *n)
{
    const QrSchema *s = qr_table_schema(t);
    CatCol *c = qr_arena_calloc(cx->arena, (size_t)(s->n_fields + 1) * sizeof *c);
    if (!c)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    for (int i = 0; i <= s->n_fields; i++) {
        const char *name = i == 0 ? s->primary_key : s->fields[i - 1].name;
        const cJSON *m = sqlw_meta_col(meta, name);
        const char *pg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "type"));
        if (!pg)
            pg = i == 0 ? (sqlw_pk_type(meta) == QR_SQL_INT8 ? "int8" : "text")
                        : storage_pg(s->fields[i - 1].type);
        const cJSON *tm = cJSON_GetObjectItemCaseSensitive(m, "typmod");
        c[i] = (CatCol){.name = name,
                        .type = type_by_name(pg),
                        .typmod = cJSON_IsNumber(tm) ? (int32_t)tm->valuedouble : -1,
                        .not_null = i == 0 ||
                                    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "not_null")),
                        .dflt = cJSON_GetObjectItemCaseSensitive(m, "default")};
    }
    *out = c;
    *n = s->n_fields + 1;
    return QR_OK;
}

/* format_type(): "character varying(20)", "bigint"... into the arena. */
static const char *format_type(SqlCtx *cx, const PgType *ty, int32_t typmod)
{
    if (!ty)
        return "???";
    if (typmod >= 4 && (ty->oid == 1043 || ty->oid == 1042)) {
        char b[64];
        snprintf(b, sizeof b, "%s(%d)", ty->sql, typmod - 4);
        return qr_arena_strndup(cx->arena, b, strlen(b));
    }
    if (typmod >= 4 && ty->oid == 1700) { /* numeric(p,s) */
        char b[64];
        snprintf(b, sizeof b, "numeric(%d,%d)", (typmod - 4) >> 16, (typmod - 4) & 0xffff);
        return qr_arena_strndup(cx->arena, b, strlen(b));
    }
    return ty->sql;
}

/* Text of a stored DEFAULT expression (constants; others as "(expr)"). */
static const char *default_text(SqlCtx *cx, const cJSON *d)
{
    const cJSON *ac = sqlj_is(d, "A_Const");
    if (!ac)
        return d ? "(expression)" : NULL;
    if (sqlj_get(ac, "sval")) {
        const char *s = sqlj_str(sqlj_get(ac, "sval"), "sval");
        QrBuf b;
        qr_buf_init(&b);
        qr_buf_putc(&b, '\'');
        for (; s && *s; s++) {
            if (*s == '\'')
                qr_buf_putc(&b, '\'');
            qr_buf_putc(&b, (uint8_t)*s);
        }
        qr_buf_append(&b, "'::text", 7);
        const char *r = qr_arena_strndup(cx->arena, (const char *)b.data, b.len);
        qr_buf_free(&b);
        return r;
    }
    return sqlw_const_text(cx, d);
}

/* ---- relations as data ---- */

typedef struct CatRel CatRel;
typedef struct CatBuild {
    SqlCtx *cx;
    const CatRel *rel;
    SqlwRows rows;
    SqlValue *row;          /* the row being filled */
} CatBuild;

struct CatRel {
    const char *schema;     /* "pg_catalog" or "information_schema" */
    const char *name;
    const char *cols;       /* "oid:o,relname:n,..." o oid, n name, t text, i int4, s int2,
                               l int8, b bool, c "char", f float4 */
    int (*fill)(CatBuild *b);  /* NULL: always empty */
};

static QrSqlType letter_type(char c)
{
    switch (c) {
    case 'o': return QR_SQL_OID;
    case 'n': return QR_SQL_NAME;
    case 'i': return QR_SQL_INT4;
    case 's': return QR_SQL_INT2;
    case 'l': return QR_SQL_INT8;
    case 'b': return QR_SQL_BOOL;
    case 'c': return QR_SQL_CHAR;
    case 'f': return QR_SQL_FLOAT4;
    default: return QR_SQL_TEXT;
    }
}

/* Column index by name in a spec, -1 if absent. */
static int spec_index(const char *spec, const char *name)
{
    size_t nl = strlen(name);
    int i = 0;
    for (const char *p = spec; *p; i++) {
        const char *colon = strchr(p, ':');
        if ((size_t)(colon - p) == nl && !memcmp(p, name, nl))
            return i;
        p = colon + 2;
        if (*p == ',')
            p++;
    }
    return -1;
}

static int new_row(CatBuild *b)
{
    b->row = sqlw_rows_add(b->cx, &b->rows);
    return b->row ? QR_OK : b->cx->err->code;
}

static void set_v(CatBuild *b, const char *col, SqlValue v)
{
    int i = spec_index(b->rel->cols, col);
    if (i < 0)
        return;
    const char *p = b->rel->cols;
    for (int k = 0; k < i; k++)
        p = strchr(p, ',') + 1;
    v.type = letter_type(strchr(p, ':')[1]);
    b->row[i] = v;
}

static void set_s(CatBuild *b, const char *col, const char *s)
{
    if (s)
        set_v(b, col, sqlv_text(s, strlen(s)));
}
static void set_i(CatBuild *b, const char *col, int64_t i) { set_v(b, col, sqlv_int(i)); }
static void set_b(CatBuild *b, const char *col, bool v) { set_v(b, col, sqlv_bool(v)); }
static void set_f(CatBuild *b, const char *col, double f) { set_v(b, col, sqlv_float(f)); }

/* Every table with its metadata, in name order. */
typedef struct CatTables {
    QrDb *db;               /* borrows */
    int n;
    char **names;           /* owns (qr_table_list) */
    QrTable **t;            /* arena */
    cJSON **meta;           /* owns each */
} CatTables;

static void tables_free(CatTables *ts)
{
    for (int i = 0; i < ts->n; i++) {
        if (ts->t && ts->t[i])
            qr_table_release(ts->db, ts->names[i]);
        qr_free(ts->names[i]);
        cJSON_Delete(ts->meta ? ts->meta[i] : NULL);
    }
    qr_free(ts->names);
    qr_free(ts->meta);
}

static int tables_load(SqlCtx *cx, CatTables *ts)
{
    memset(ts, 0, sizeof *ts);
    ts->db = cx->sess->db;
    int rc = qr_table_list(cx->sess->db, &ts->names, &ts->n, cx->err);
    if (rc)
        return rc;
    ts->t = qr_arena_calloc(cx->arena, (size_t)(ts->n + 1) * sizeof *ts->t);
    ts->meta = qr_calloc((size_t)(ts->n + 1), sizeof *ts->meta);
    if (!ts->t || !ts->meta)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    /* compact in place: a table dropped since the listing is left out */
    int k = 0, n = ts->n;
    rc = QR_OK;
    for (int i = 0; i < n; i++) {
        if (rc != QR_OK) {
            qr_free(ts->names[i]); /* after an error: not kept */
            continue;
        }
        QrError e;
        qr_error_clear(&e);
        int arc = qr_table_acquire(cx->sess->db, ts->names[i], &ts->t[k], &e);
        if (arc == QR_ENOTFOUND) {
            qr_free(ts->names[i]);
            continue;
        }
        ts->names[k] = ts->names[i];
        if (arc != QR_OK) {
            ts->t[k] = NULL; /* kept for freeing, not released */
            qr_error_copy(cx->err, &e);
            rc = arc;
        } else if (!(ts->meta[k] = sqlw_meta_load(cx->sess->db, ts->names[k]))) {
            rc = qr_error_set(cx->err, QR_ENOMEM, "out of memory");
        }
        k++;
    }
    ts->n = k;
    return rc;
}

/* Indexes of a table: the primary key's, then B-trees (sql.json names, or
 * "<table>_<col>_idx" for B-trees made outside SQL). */
typedef struct CatIndex {
    char name[2 * QR_NAME_MAX + 8];
    const char *col;
    int attnum;
    bool primary;
} CatIndex;

static int table_indexes(SqlCtx *cx, QrTable *t, const cJSON *meta, CatIndex **out, int *n)
{
    const QrSchema *s = qr_table_schema(t);
    const cJSON *idxs = cJSON_GetObjectItemCaseSensitive(meta, "indexes");
    int cap = 1 + cJSON_GetArraySize(idxs) + s->n_fields;
    CatIndex *x = qr_arena_calloc(cx->arena, (size_t)cap * sizeof *x);
    if (!x)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    int k = 0;
    snprintf(x[k].name, sizeof x[k].name, "%s_pkey", qr_table_name(t));
    x[k].col = s->primary_key;
    x[k].attnum = 1;
    x[k++].primary = true;
    const cJSON *it;
    cJSON_ArrayForEach(it, idxs)
    {
        if (!cJSON_IsString(it) || k >= cap)
            continue;
        int fi = schema_field_index(s, it->valuestring);
        snprintf(x[k].name, sizeof x[k].name, "%s", it->string);
        x[k].col = it->valuestring;
        x[k++].attnum = fi < 0 ? 1 : fi + 2;
    }
    for (int i = 0; i < s->n_fields && k < cap; i++) {
        if (!s->fields[i].btree)
            continue;
        bool named = false;
        cJSON_ArrayForEach(it, idxs) named |= cJSON_IsString(it) &&
                                              !strcmp(it->valuestring, s->fields[i].name);
        if (named)
            continue;
        snprintf(x[k].name, sizeof x[k].name, "%s_%s_idx", qr_table_name(t), s->fields[i].name);
        x[k].col = s->fields[i].name;
        x[k++].attnum = i + 2;
    }
    *out = x;
    *n = k;
    return QR_OK;
}

/* ---- generators ---- */

static int fill_namespace(CatBuild *b)
{
    static const struct {
        uint32_t oid;
        const char *name;
    } ns[] = {{NS_CATALOG, "pg_catalog"}, {NS_PUBLIC, "public"}, {NS_INFO, "information_schema"}};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        if (new_row(b))
            return b->cx->err->code;
        set_i(b, "oid", ns[i].oid);
        set_s(b, "nspname", ns[i].name);
        set_i(b, "nspowner", OWNER_OID);
    }
    return QR_OK;
}

static void class_row(CatBuild *b, uint32_t oid, const char *name, char kind, int natts,
                      bool has_index, double tuples)
{
    char k[2] = {kind, 0};
    set_i(b, "oid", oid);
    set_s(b, "relname", qr_arena_strndup(b->cx->arena, name, strlen(name)));
    set_i(b, "relnamespace", NS_PUBLIC);
    set_i(b, "reltype", 0);
    set_i(b, "reloftype", 0);
    set_i(b, "relowner", OWNER_OID);
    set_i(b, "relam", kind == 'i' ? 403 : 2);
    set_i(b, "relfilenode", oid);
    set_i(b, "reltablespace", 0);
    set_i(b, "relpages", 0);
    set_f(b, "reltuples", tuples);
    set_i(b, "relallvisible", 0);
    set_i(b, "reltoastrelid", 0);
    set_b(b, "relhasindex", has_index);
    set_b(b, "relisshared", false);
    set_s(b, "relpersistence", "p");
    set_s(b, "relkind", qr_arena_strndup(b->cx->arena, k, 1));
    set_i(b, "relnatts", natts);
    set_i(b, "relchecks", 0);
    set_b(b, "relhasrules", false);
    set_b(b, "relhastriggers", false);
    set_b(b, "relhassubclass", false);
    set_b(b, "relrowsecurity", false);
    set_b(b, "relforcerowsecurity", false);
    set_b(b, "relispopulated", true);
    set_s(b, "relreplident", "d");
    set_b(b, "relispartition", false);
}

static int fill_class(CatBuild *b)
{
    CatTables ts;
    int rc = tables_load(b->cx, &ts);
    for (int i = 0; rc == QR_OK && i < ts.n; i++) {
        QrTableStats st;
        qr_table_stats(ts.t[i], &st);
        CatIndex *x;
        int nx;
        if ((rc = table_indexes(b->cx, ts.t[i], ts.meta[i], &x, &nx)) != QR_OK ||
            (rc = new_row(b)) != QR_OK)
            break;
        class_row(b, name_oid(ts.names[i]), ts.names[i], 'r',
                  qr_table_schema(ts.t[i])->n_fields + 1, true, (double)st.docs);
        for (int k = 0; k < nx && rc == QR_OK; k++) {
            if ((rc = new_row(b)) != QR_OK)
                break;
            class_row(b, x[k].primary ? pkey_oid(ts.names[i]) : name_oid(x[k].name), x[k].name,
                      'i', 1, false, 0);
        }
    }
    tables_free(&ts);
    return rc;
}

/* Call row(b, table name, column, attnum) for every column of every table
 * (the callback adds its row with new_row, or skips the column). */
typedef int (*CatColRow)(CatBuild *b, const char *table, const CatCol *c, int attnum);

static int each_column(CatBuild *b, CatColRow row)
{
    CatTables ts;
    int rc = tables_load(b->cx, &ts);
    for (int i = 0; rc == QR_OK && i < ts.n; i++) {
        CatCol *c = NULL;
        int nc = 0;
        if ((rc = table_cols(b->cx, ts.t[i], ts.meta[i], &c, &nc)) != QR_OK)
            break;
        for (int k = 0; k < nc && rc == QR_OK; k++)
            rc = row(b, ts.names[i], &c[k], k + 1);
    }
    tables_free(&ts);
    return rc;
}

static int attribute_row(CatBuild *b, const char *table, const CatCol *c, int attnum)
{
    int rc = new_row(b);
    if (rc != QR_OK)
        return rc;
    set_i(b, "attrelid", name_oid(table));
    set_s(b, "attname", c->name);
    set_i(b, "atttypid", c->type->oid);
    set_i(b, "attstattarget", -1);
    set_i(b, "attlen", c->type->len);
    set_i(b, "attnum", attnum);
    set_i(b, "attndims", 0);
    set_i(b, "attcacheoff", -1);
    set_i(b, "atttypmod", c->typmod);
    set_b(b, "attbyval", c->type->len > 0);
    set_s(b, "attalign", c->type->len == 8 ? "d" : "i");
    set_s(b, "attstorage", c->type->len > 0 ? "p" : "x");
    set_s(b, "attcompression", "");
    set_b(b, "attnotnull", c->not_null);
    set_b(b, "atthasdef", c->dflt != NULL);
    set_b(b, "atthasmissing", false);
    set_s(b, "attidentity", "");
    set_s(b, "attgenerated", "");
    set_b(b, "attisdropped", false);
    set_b(b, "attislocal", true);
    set_i(b, "attinhcount", 0);
    set_i(b, "attcollation", c->type->category == 'S' ? 100 : 0);
    return QR_OK;
}

static int fill_attribute(CatBuild *b) { return each_column(b, attribute_row); }

static int attrdef_row(CatBuild *b, const char *table, const CatCol *c, int attnum)
{
    if (!c->dflt)
        return QR_OK;
    int rc = new_row(b);
    if (rc != QR_OK)
        return rc;
    set_i(b, "oid", name_oid(c->name) ^ name_oid(table));
    set_i(b, "adrelid", name_oid(table));
    set_i(b, "adnum", attnum);
    set_s(b, "adbin", default_text(b->cx, c->dflt));
    return QR_OK;
}

static int fill_attrdef(CatBuild *b) { return each_column(b, attrdef_row); }

static int fill_index(CatBuild *b)
{
    CatTables ts;
    int rc = tables_load(b->cx, &ts);
    for (int i = 0; rc == QR_OK && i < ts.n; i++) {
        CatIndex *x;
        int nx;
        if ((rc = table_indexes(b->cx, ts.t[i], ts.meta[i], &x, &nx)) != QR_OK)
            break;
        for (int k = 0; k < nx && rc == QR_OK; k++) {
            if ((rc = new_row(b)) != QR_OK)
                break;
            char key[16];
            snprintf(key, sizeof key, "%d", x[k].attnum);
            set_i(b, "indexrelid", x[k].primary ? pkey_oid(ts.names[i]) : name_oid(x[k].name));
            set_i(b, "indrelid", name_oid(ts.names[i]));
            set_i(b, "indnatts", 1);
            set_i(b, "indnkeyatts", 1);
            set_b(b, "indisunique", x[k].primary);
            set_b(b, "indisprimary", x[k].primary);
            set_b(b, "indisexclusion", false);
            set_b(b, "indimmediate", true);
            set_b(b, "indisclustered", false);
            set_b(b, "indisvalid", true);
            set_b(b, "indcheckxmin", false);
            set_b(b, "indisready", true);
            set_b(b, "indislive", true);
            set_b(b, "indisreplident", false);
            set_b(b, "indnullsnotdistinct", false);
            set_s(b, "indkey", qr_arena_strndup(b->cx->arena, key, strlen(key)));
        }
    }
    tables_free(&ts);
    return rc;
}

static int fill_constraint(CatBuild *b)
{
    CatTables ts;
    int rc = tables_load(b->cx, &ts);
    for (int i = 0; rc == QR_OK && i < ts.n; i++) {
        if ((rc = new_row(b)) != QR_OK)
            break;
        char name[QR_NAME_MAX + 8];
        snprintf(name, sizeof name, "%s_pkey", ts.names[i]);
        set_i(b, "oid", pkey_oid(ts.names[i]) + 1);
        set_s(b, "conname", qr_arena_strndup(b->cx->arena, name, strlen(name)));
        set_i(b, "connamespace", NS_PUBLIC);
        set_s(b, "contype", "p");
        set_b(b, "condeferrable", false);
        set_b(b, "condeferred", false);
        set_b(b, "convalidated", true);
        set_i(b, "conrelid", name_oid(ts.names[i]));
        set_i(b, "conindid", pkey_oid(ts.names[i]));
        set_s(b, "conkey", "{1}");
    }
    tables_free(&ts);
    return rc;
}

static int fill_type(CatBuild *b)
{
    for (int i = 0; i < N_PG_TYPES + n_more(); i++) {
        if (new_row(b))
            return b->cx->err->code;
        const PgType *t = i < N_PG_TYPES ? &PG_TYPES[i] : &more_types[i - N_PG_TYPES];
        char cat[2] = {t->category, 0};
        set_i(b, "oid", t->oid);
        set_s(b, "typname", t->name);
        set_i(b, "typnamespace", NS_CATALOG);
        set_i(b, "typowner", OWNER_OID);
        set_i(b, "typlen", t->len);
        set_b(b, "typbyval", t->len > 0 && t->len <= 8);
        set_s(b, "typtype", "b");
        set_s(b, "typcategory", qr_arena_strndup(b->cx->arena, cat, 1));
        set_b(b, "typispreferred", t->oid == 25 || t->oid == 701 || t->oid == 1184);
        set_b(b, "typisdefined", true);
        set_s(b, "typdelim", ",");
        set_i(b, "typrelid", 0);
        set_i(b, "typelem", i < N_PG_TYPES ? 0 : more_elem[i - N_PG_TYPES]);
        set_i(b, "typarray", sqlt_array_oid(t->oid));
        set_b(b, "typnotnull", false);
        set_i(b, "typbasetype", 0);
        set_i(b, "typtypmod", -1);
        set_i(b, "typndims", 0);
        set_i(b, "typcollation", t->category == 'S' ? 100 : 0);
    }
    return QR_OK;
}

static int fill_database(CatBuild *b)
{
    if (new_row(b))
        return b->cx->err->code;
    set_i(b, "oid", DB_OID);
    set_s(b, "datname", "quarry");
    set_i(b, "datdba", OWNER_OID);
    set_i(b, "encoding", 6);
    set_s(b, "datlocprovider", "c");
    set_b(b, "datistemplate", false);
    set_b(b, "datallowconn", true);
    set_i(b, "datconnlimit", -1);
    set_s(b, "datcollate", "C");
    set_s(b, "datctype", "C.UTF-8");
    return QR_OK;
}

static int fill_am(CatBuild *b)
{
    static const struct {
        uint32_t oid;
        const char *name;
        const char *type;
    } am[] = {{2, "heap", "t"}, {403, "btree", "i"}, {16300, "fulltext", "i"}};
    for (size_t i = 0; i < sizeof am / sizeof am[0]; i++) {
        if (new_row(b))
            return b->cx->err->code;
        set_i(b, "oid", am[i].oid);
        set_s(b, "amname", am[i].name);
        set_s(b, "amhandler", "-");
        set_s(b, "amtype", am[i].type);
    }
    return QR_OK;
}

static int fill_roles(CatBuild *b)
{
    if (new_row(b))
        return b->cx->err->code;
    const char *u = sqlw_setting(b->cx->sess, "session_user");
    set_i(b, "oid", OWNER_OID);
    set_s(b, "rolname", u && *u ? u : "quarry");
    set_s(b, "usename", u && *u ? u : "quarry");
    set_i(b, "usesysid", OWNER_OID);
    set_b(b, "rolsuper", true);
    set_b(b, "usesuper", true);
    set_b(b, "rolinherit", true);
    set_b(b, "rolcreaterole", true);
    set_b(b, "rolcreatedb", true);
    set_b(b, "rolcanlogin", true);
    set_i(b, "rolconnlimit", -1);
    return QR_OK;
}

static int fill_settings(CatBuild *b)
{
    for (int i = 0; i < SQLW_N_SETTINGS; i++) {
        if (new_row(b))
            return b->cx->err->code;
        const char *v = sqlw_setting(b->cx->sess, SQLW_SETTINGS[i].name);
        set_s(b, "name", SQLW_SETTINGS[i].name);
        set_s(b, "setting", qr_arena_strndup(b->cx->arena, v, strlen(v)));
        set_s(b, "category", "Quarry");
        set_s(b, "short_desc", SQLW_SETTINGS[i].desc);
        set_s(b, "context", "user");
        set_s(b, "vartype", "string");
        set_s(b, "source", "default");
        set_s(b, "boot_val", SQLW_SETTINGS[i].dflt);
        set_s(b, "reset_val", SQLW_SETTINGS[i].dflt);
        set_b(b, "pending_restart", false);
    }
    return QR_OK;
}

static int fill_is_schemata(CatBuild *b)
{
    static const char *const ns[] = {"pg_catalog", "public", "information_schema"};
    for (int i = 0; i < 3; i++) {
        if (new_row(b))
            return b->cx->err->code;
        set_s(b, "catalog_name", "quarry");
        set_s(b, "schema_name", ns[i]);
        set_s(b, "schema_owner", "quarry");
    }
    return QR_OK;
}

static int fill_is_tables(CatBuild *b)
{
    CatTables ts;
    int rc = tables_load(b->cx, &ts);
    for (int i = 0; rc == QR_OK && i < ts.n; i++) {
        if ((rc = new_row(b)) != QR_OK)
            break;
        set_s(b, "table_catalog", "quarry");
        set_s(b, "table_schema", "public");
        set_s(b, "table_name", qr_arena_strndup(b->cx->arena, ts.names[i], strlen(ts.names[i])));
        set_s(b, "table_type", "BASE TABLE");
        set_s(b, "is_insertable_into", "YES");
        set_s(b, "is_typed", "NO");
    }
    tables_free(&ts);
    return rc;
}

static int is_column_row(CatBuild *b, const char *table, const CatCol *c, int attnum)
{
    int rc = new_row(b);
    if (rc != QR_OK)
        return rc;
    const PgType *t = c->type;
    set_s(b, "table_catalog", "quarry");
    set_s(b, "table_schema", "public");
    set_s(b, "table_name", qr_arena_strndup(b->cx->arena, table, strlen(table)));
    set_s(b, "column_name", c->name);
    set_i(b, "ordinal_position", attnum);
    set_s(b, "column_default", default_text(b->cx, c->dflt));
    set_s(b, "is_nullable", c->not_null ? "NO" : "YES");
    set_s(b, "data_type", t->category == 'A' ? "ARRAY" : t->sql);
    if (c->typmod >= 4 && t->oid == 1700) { /* numeric(p, s) */
        set_i(b, "numeric_precision", (c->typmod - 4) >> 16);
        set_i(b, "numeric_precision_radix", 10);
        set_i(b, "numeric_scale", (c->typmod - 4) & 0xffff);
    } else if (c->typmod >= 4) {
        set_i(b, "character_maximum_length", c->typmod - 4);
    }
    if (t->oid == 20 || t->oid == 23 || t->oid == 21) {
        set_i(b, "numeric_precision", t->oid == 20 ? 64 : t->oid == 23 ? 32 : 16);
        set_i(b, "numeric_precision_radix", 2);
        set_i(b, "numeric_scale", 0);
    } else if (t->oid == 700 || t->oid == 701) {
        set_i(b, "numeric_precision", t->oid == 701 ? 53 : 24);
        set_i(b, "numeric_precision_radix", 2);
    }
    if (t->category == 'D')
        set_i(b, "datetime_precision", 6);
    set_s(b, "udt_catalog", "quarry");
    set_s(b, "udt_schema", "pg_catalog");
    set_s(b, "udt_name", t->name);
    set_s(b, "is_identity", "NO");
    set_s(b, "is_generated", "NEVER");
    set_s(b, "is_updatable", "YES");
    return QR_OK;
}

static int fill_is_columns(CatBuild *b) { return each_column(b, is_column_row); }

static const CatRel CAT_RELS[] = {
    {"pg_catalog", "pg_namespace", "oid:o,nspname:n,nspowner:o,nspacl:t", fill_namespace},
    {"pg_catalog", "pg_class",
     "oid:o,relname:n,relnamespace:o,reltype:o,reloftype:o,relowner:o,relam:o,relfilenode:o,"
     "reltablespace:o,relpages:i,reltuples:f,relallvisible:i,reltoastrelid:o,relhasindex:b,"
     "relisshared:b,relpersistence:c,relkind:c,relnatts:s,relchecks:s,relhasrules:b,"
     "relhastriggers:b,relhassubclass:b,relrowsecurity:b,relforcerowsecurity:b,"
     "relispopulated:b,relreplident:c,relispartition:b,relrewrite:o,relfrozenxid:t,"
     "relminmxid:t,relacl:t,reloptions:t,relpartbound:t",
     fill_class},
    {"pg_catalog", "pg_attribute",
     "attrelid:o,attname:n,atttypid:o,attstattarget:i,attlen:s,attnum:s,attndims:i,"
     "attcacheoff:i,atttypmod:i,attbyval:b,attalign:c,attstorage:c,attcompression:c,"
     "attnotnull:b,atthasdef:b,atthasmissing:b,attidentity:c,attgenerated:c,attisdropped:b,"
     "attislocal:b,attinhcount:i,attcollation:o,attacl:t,attoptions:t,attfdwoptions:t,"
     "attmissingval:t",
     fill_attribute},
    {"pg_catalog", "pg_attrdef", "oid:o,adrelid:o,adnum:s,adbin:t", fill_attrdef},
    {"pg_catalog", "pg_type",
     "oid:o,typname:n,typnamespace:o,typowner:o,typlen:s,typbyval:b,typtype:c,typcategory:c,"
     "typispreferred:b,typisdefined:b,typdelim:c,typrelid:o,typelem:o,typarray:o,typinput:t,"
     "typoutput:t,typreceive:t,typsend:t,typnotnull:b,typbasetype:o,typtypmod:i,typndims:i,"
     "typcollation:o,typdefault:t,typacl:t",
     fill_type},
    {"pg_catalog", "pg_index",
     "indexrelid:o,indrelid:o,indnatts:s,indnkeyatts:s,indisunique:b,indisprimary:b,"
     "indisexclusion:b,indimmediate:b,indisclustered:b,indisvalid:b,indcheckxmin:b,"
     "indisready:b,indislive:b,indisreplident:b,indnullsnotdistinct:b,indkey:t,indcollation:t,indclass:t,"
     "indoption:t,indexprs:t,indpred:t",
     fill_index},
    {"pg_catalog", "pg_constraint",
     "oid:o,conname:n,connamespace:o,contype:c,condeferrable:b,condeferred:b,convalidated:b,"
     "conrelid:o,contypid:o,conindid:o,conparentid:o,confrelid:o,conkey:t,confkey:t,conbin:t",
     fill_constraint},
    {"pg_catalog", "pg_database",
     "oid:o,datname:n,datdba:o,encoding:i,datlocprovider:c,datistemplate:b,datallowconn:b,"
     "datconnlimit:i,datfrozenxid:t,datminmxid:t,dattablespace:o,datcollate:t,datctype:t,"
     "daticulocale:t,datcollversion:t,datacl:t",
     fill_database},
    {"pg_catalog", "pg_am", "oid:o,amname:n,amhandler:t,amtype:c", fill_am},
    {"pg_catalog", "pg_settings",
     "name:t,setting:t,unit:t,category:t,short_desc:t,extra_desc:t,context:t,vartype:t,"
     "source:t,min_val:t,max_val:t,enumvals:t,boot_val:t,reset_val:t,sourcefile:t,"
     "sourceline:i,pending_restart:b",
     fill_settings},
    {"pg_catalog", "pg_roles",
     "oid:o,rolname:n,rolsuper:b,rolinherit:b,rolcreaterole:b,rolcreatedb:b,rolcanlogin:b,"
     "rolreplication:b,rolconnlimit:i,rolpassword:t,rolvaliduntil:t,rolbypassrls:b,"
     "rolconfig:t",
     fill_roles},
    {"pg_catalog", "pg_user", "usename:n,usesysid:o,usecreatedb:b,usesuper:b,userepl:b,"
                              "usebypassrls:b,passwd:t,valuntil:t,useconfig:t",
     fill_roles},
    {"pg_catalog", "pg_description", "objoid:o,classoid:o,objsubid:i,description:t", NULL},
    {"pg_catalog", "pg_shdescription", "objoid:o,classoid:o,description:t", NULL},
    {"pg_catalog", "pg_inherits", "inhrelid:o,inhparent:o,inhseqno:i,inhdetachpending:b", NULL},
    {"pg_catalog", "pg_policy",
     "oid:o,polname:n,polrelid:o,polcmd:c,polpermissive:b,polroles:t,polqual:t,polwithcheck:t",
     NULL},
    {"pg_catalog", "pg_trigger", "oid:o,tgrelid:o,tgname:n,tgfoid:o,tgtype:s,tgenabled:c,"
                                 "tgisinternal:b,tgconstraint:o",
     NULL},
    {"pg_catalog", "pg_rewrite", "oid:o,rulename:n,ev_class:o,ev_type:c", NULL},
    {"pg_catalog", "pg_statistic_ext",
     "oid:o,stxrelid:o,stxname:n,stxnamespace:o,stxowner:o,stxstattarget:i,stxkeys:t,stxkind:t",
     NULL},
    {"pg_catalog", "pg_publication", "oid:o,pubname:n,pubowner:o,puballtables:b", NULL},
    {"pg_catalog", "pg_publication_rel", "oid:o,prpubid:o,prrelid:o,prqual:t,prattrs:t", NULL},
    {"pg_catalog", "pg_publication_namespace", "oid:o,pnpubid:o,pnnspid:o", NULL},
    {"pg_catalog", "pg_collation", "oid:o,collname:n,collnamespace:o,collprovider:c", NULL},
    {"pg_catalog", "pg_foreign_table", "ftrelid:o,ftserver:o,ftoptions:t", NULL},
    {"pg_catalog", "pg_partitioned_table", "partrelid:o,partstrat:c,partnatts:s", NULL},
    {"pg_catalog", "pg_tablespace", "oid:o,spcname:n,spcowner:o", NULL},
    {"pg_catalog", "pg_extension", "oid:o,extname:n,extowner:o,extnamespace:o,extversion:t",
     NULL},
    {"pg_catalog", "pg_proc", "oid:o,proname:n,pronamespace:o,prorettype:o,prokind:c", NULL},
    {"pg_catalog", "pg_sequence", "seqrelid:o,seqtypid:o,seqstart:l,seqincrement:l,seqmax:l,"
                                  "seqmin:l,seqcache:l,seqcycle:b",
     NULL},
    {"pg_catalog", "pg_enum", "oid:o,enumtypid:o,enumsortorder:f,enumlabel:n", NULL},
    {"pg_catalog", "pg_depend", "classid:o,objid:o,objsubid:i,refclassid:o,refobjid:o,"
                                "refobjsubid:i,deptype:c",
     NULL},
    {"information_schema", "schemata", "catalog_name:t,schema_name:t,schema_owner:t",
     fill_is_schemata},
    {"information_schema", "tables",
     "table_catalog:t,table_schema:t,table_name:t,table_type:t,"
     "self_referencing_column_name:t,reference_generation:t,user_defined_type_catalog:t,"
     "user_defined_type_schema:t,user_defined_type_name:t,is_insertable_into:t,is_typed:t,"
     "commit_action:t",
     fill_is_tables},
    {"information_schema", "columns",
     "table_catalog:t,table_schema:t,table_name:t,column_name:t,ordinal_position:i,"
     "column_default:t,is_nullable:t,data_type:t,character_maximum_length:i,"
     "character_octet_length:i,numeric_precision:i,numeric_precision_radix:i,numeric_scale:i,"
     "datetime_precision:i,udt_catalog:t,udt_schema:t,udt_name:t,is_identity:t,"
     "is_generated:t,is_updatable:t",
     fill_is_columns},
};
#define N_CAT_RELS (int)(sizeof CAT_RELS / sizeof CAT_RELS[0])

/* ---- the row source ---- */

typedef struct CatSource {
    SqlSource base;
    SqlwRows rows;
    uint64_t pos;
} CatSource;

static int cat_next(SqlSource *src, SqlCtx *cx, SqlValue *row, bool *has_row)
{
    (void)cx;
    CatSource *c = (CatSource *)src;
    if (c->pos >= c->rows.n) {
        *has_row = false;
        return QR_OK;
    }
    memcpy(row, c->rows.vals + c->pos * (uint64_t)src->n_cols,
           (size_t)src->n_cols * sizeof *row);
    c->pos++;
    *has_row = true;
    return QR_OK;
}

static void cat_close(SqlSource *src) { (void)src; }

static const SqlSourceVt CAT_VT = {cat_next, cat_close};

int sqlcat_open(SqlCtx *cx, const char *schema, const char *name, SqlSource **out)
{
    *out = NULL;
    if (schema && strcmp(schema, "pg_catalog") != 0 && strcmp(schema, "information_schema") != 0)
        return QR_OK;
    const CatRel *rel = NULL;
    for (int i = 0; i < N_CAT_RELS && !rel; i++) {
        if (strcmp(CAT_RELS[i].name, name) != 0)
            continue;
        /* without a schema only pg_catalog is on the search path */
        if (schema ? !strcmp(schema, CAT_RELS[i].schema) : !strcmp(CAT_RELS[i].schema, "pg_catalog"))
            rel = &CAT_RELS[i];
    }
    if (!rel)
        return QR_OK;
    int n = 1;
    for (const char *p = rel->cols; *p; p++)
        n += *p == ',';
    CatSource *c = qr_arena_calloc(cx->arena, sizeof *c);
    const char **names = qr_arena_calloc(cx->arena, (size_t)n * sizeof *names);
    QrSqlType *types = qr_arena_calloc(cx->arena, (size_t)n * sizeof *types);
    if (!c || !names || !types)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    const char *p = rel->cols;
    for (int i = 0; i < n; i++) {
        const char *colon = strchr(p, ':');
        names[i] = qr_arena_strndup(cx->arena, p, (size_t)(colon - p));
        types[i] = letter_type(colon[1]);
        if (!names[i])
            return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
        p = colon + 2;
        if (*p == ',')
            p++;
    }
    c->base = (SqlSource){.vt = &CAT_VT, .n_cols = n, .col_names = names, .col_types = types};
    CatBuild b = {.cx = cx, .rel = rel, .rows = {.n_cols = n}};
    if (rel->fill) {
        int rc = rel->fill(&b);
        if (rc)
            return rc;
    }
    /* NULLs typed as their column */
    for (uint64_t r = 0; r < b.rows.n; r++)
        for (int i = 0; i < n; i++)
            if (b.rows.vals[r * (uint64_t)n + i].is_null)
                b.rows.vals[r * (uint64_t)n + i].type = types[i];
    c->rows = b.rows;
    *out = &c->base;
    return QR_OK;
}

/* ---- functions ---- */

typedef struct CatFunc {
    const char *name;
    int min_args, max_args;
    QrSqlType ret;
} CatFunc;

static const CatFunc CAT_FUNCS[] = {
    {"version", 0, 0, QR_SQL_TEXT},
    {"current_database", 0, 0, QR_SQL_NAME},
    {"current_catalog", 0, 0, QR_SQL_NAME},
    {"current_schema", 0, 0, QR_SQL_NAME},
    {"current_user", 0, 0, QR_SQL_NAME},
    {"session_user", 0, 0, QR_SQL_NAME},
    {"user", 0, 0, QR_SQL_NAME},
    {"pg_backend_pid", 0, 0, QR_SQL_INT4},
    {"pg_get_userbyid", 1, 1, QR_SQL_NAME},
    {"pg_table_is_visible", 1, 1, QR_SQL_BOOL},
    {"pg_type_is_visible", 1, 1, QR_SQL_BOOL},
    {"format_type", 2, 2, QR_SQL_TEXT},
    {"pg_encoding_to_char", 1, 1, QR_SQL_NAME},
    {"obj_description", 1, 2, QR_SQL_TEXT},
    {"col_description", 2, 2, QR_SQL_TEXT},
    {"shobj_description", 2, 2, QR_SQL_TEXT},
    {"pg_get_expr", 2, 3, QR_SQL_TEXT},
    {"pg_get_indexdef", 1, 3, QR_SQL_TEXT},
    {"pg_get_constraintdef", 1, 2, QR_SQL_TEXT},
    {"pg_relation_is_publishable", 1, 1, QR_SQL_BOOL},
    {"current_setting", 1, 2, QR_SQL_TEXT},
    {"set_config", 3, 3, QR_SQL_TEXT},
    {"pg_is_in_recovery", 0, 0, QR_SQL_BOOL},
    {"has_table_privilege", 2, 3, QR_SQL_BOOL},
    {"has_schema_privilege", 2, 3, QR_SQL_BOOL},
    {"has_database_privilege", 2, 3, QR_SQL_BOOL},
    {"pg_relation_size", 1, 2, QR_SQL_INT8},
    {"pg_total_relation_size", 1, 1, QR_SQL_INT8},
    {"pg_table_size", 1, 1, QR_SQL_INT8},
    {"pg_database_size", 1, 1, QR_SQL_INT8},
    {"pg_size_pretty", 1, 1, QR_SQL_TEXT},
    {"inet_server_port", 0, 0, QR_SQL_INT4},
    {"txid_current", 0, 0, QR_SQL_INT8},
    {"pg_get_serial_sequence", 2, 2, QR_SQL_TEXT},
    {"pg_get_statisticsobjdef_columns", 1, 1, QR_SQL_TEXT},
    {"pg_get_triggerdef", 1, 2, QR_SQL_TEXT},
    {"pg_get_viewdef", 1, 2, QR_SQL_TEXT},
    {"pg_get_partkeydef", 1, 1, QR_SQL_TEXT},
};
#define N_CAT_FUNCS (int)(sizeof CAT_FUNCS / sizeof CAT_FUNCS[0])

static const CatFunc *func_find(const char *name, int n_args)
{
    for (int i = 0; i < N_CAT_FUNCS; i++)
        if (!strcmp(CAT_FUNCS[i].name, name) && n_args >= CAT_FUNCS[i].min_args &&
            n_args <= CAT_FUNCS[i].max_args)
            return &CAT_FUNCS[i];
    return NULL;
}

int sqlcat_func_lookup(const char *schema, const char *name, int n_args, QrSqlType *ret)
{
    if (schema && strcmp(schema, "pg_catalog") != 0)
        return QR_ENOTFOUND;
    const CatFunc *f = func_find(name, n_args);
    if (!f)
        return QR_ENOTFOUND;
    *ret = f->ret;
    return QR_OK;
}

static SqlValue text_v(SqlCtx *cx, const char *s)
{
    char *d = qr_arena_strndup(cx->arena, s, strlen(s));
    return d ? sqlv_text(d, strlen(d)) : sqlv_null();
}

/* A table by OID (NULL if none), with its name copied into name_out. */
static QrTable *table_by_oid(SqlCtx *cx, int64_t oid, cJSON **meta)
{
    CatTables ts;
    QrTable *found = NULL;
    if (tables_load(cx, &ts) == QR_OK)
        for (int i = 0; i < ts.n && !found; i++)
            if (name_oid(ts.names[i]) == (uint32_t)oid) {
                found = ts.t[i];
                *meta = ts.meta[i];
                ts.meta[i] = NULL;
            }
    tables_free(&ts);
    return found;
}

static SqlValue index_def(SqlCtx *cx, int64_t oid)
{
    CatTables ts;
    SqlValue out = sqlv_null();
    if (tables_load(cx, &ts) != QR_OK)
        return out;
    for (int i = 0; i < ts.n && out.is_null; i++) {
        CatIndex *x;
        int nx;
        if (table_indexes(cx, ts.t[i], ts.meta[i], &x, &nx) != QR_OK)
            break;
        for (int k = 0; k < nx; k++) {
            uint32_t o = x[k].primary ? pkey_oid(ts.names[i]) : name_oid(x[k].name);
            if (o != (uint32_t)oid)
                continue;
            char b[512];
            snprintf(b, sizeof b, "CREATE %sINDEX %s ON public.%s USING btree (%s)",
                     x[k].primary ? "UNIQUE " : "", x[k].name, ts.names[i], x[k].col);
            out = text_v(cx, b);
            break;
        }
    }
    tables_free(&ts);
    return out;
}

int sqlcat_func_call(SqlCtx *cx, const char *schema, const char *name, int n_args,
                     const SqlValue *args, SqlValue *out)
{
    (void)schema;
    const CatFunc *f = func_find(name, n_args);
    if (!f)
        return sql_err_at(cx, -1, QR_ENOTFOUND, "42883", "function %s does not exist", name);
    *out = sqlv_null();
    out->type = f->ret;
    int64_t a0 = n_args > 0 && !args[0].is_null && sqlt_is_int(args[0].type) ? args[0].u.i : 0;
    if (!strcmp(name, "version")) {
        *out = text_v(cx, "PostgreSQL 15.0 (Quarry " QUARRY_VERSION
                          ") on x86_64-pc-linux-gnu, a search-first database");
    } else if (!strcmp(name, "current_database") || !strcmp(name, "current_catalog")) {
        *out = text_v(cx, "quarry");
    } else if (!strcmp(name, "current_schema")) {
        *out = text_v(cx, "public");
    } else if (!strcmp(name, "current_user") || !strcmp(name, "session_user") ||
               !strcmp(name, "user") || !strcmp(name, "pg_get_userbyid")) {
        const char *u = qr_sql_session_get(cx->sess, "session_user");
        *out = text_v(cx, u && *u ? u : "quarry");
    } else if (!strcmp(name, "pg_backend_pid")) {
        *out = sqlv_int((int64_t)getpid());
    } else if (!strcmp(name, "pg_table_is_visible") || !strcmp(name, "pg_type_is_visible") ||
               !strncmp(name, "has_", 4)) {
        *out = sqlv_bool(true);
    } else if (!strcmp(name, "pg_relation_is_publishable") || !strcmp(name, "pg_is_in_recovery")) {
        *out = sqlv_bool(false);
    } else if (!strcmp(name, "format_type")) {
        if (args[0].is_null)
            return QR_OK;
        int32_t tm = n_args > 1 && !args[1].is_null ? (int32_t)args[1].u.i : -1;
        const PgType *t = type_by_oid((uint32_t)a0);
        *out = text_v(cx, format_type(cx, t, tm));
    } else if (!strcmp(name, "pg_encoding_to_char")) {
        *out = text_v(cx, a0 == 6 ? "UTF8" : "SQL_ASCII");
    } else if (!strcmp(name, "pg_get_expr")) {
        if (args[0].is_null)
            return QR_OK;
        out->type = QR_SQL_TEXT;
        *out = sqlt_is_str(args[0].type) ? args[0] : text_v(cx, "");
    } else if (!strcmp(name, "pg_get_indexdef")) {
        *out = index_def(cx, a0);
    } else if (!strcmp(name, "pg_get_constraintdef")) {
        /* constraint oid = its index oid + 1: the primary key */
        CatTables ts;
        if (tables_load(cx, &ts) == QR_OK)
            for (int i = 0; i < ts.n; i++)
                if (pkey_oid(ts.names[i]) + 1 == (uint32_t)a0) {
                    char b[128];
                    snprintf(b, sizeof b, "PRIMARY KEY (%s)",
                             qr_table_schema(ts.t[i])->primary_key);
                    *out = text_v(cx, b);
                }
        tables_free(&ts);
    } else if (!strcmp(name, "current_setting")) {
        if (args[0].is_null)
            return QR_OK;
        char n[128];
        snprintf(n, sizeof n, "%.*s", (int)args[0].u.s.n, args[0].u.s.s);
        const char *v = sqlw_setting(cx->sess, n);
        if (!v) {
            if (n_args > 1 && !args[1].is_null && args[1].u.b)
                return QR_OK;
            return sql_err_at(cx, -1, QR_EINVAL, "42704",
                              "unrecognized configuration parameter \"%s\"", n);
        }
        *out = text_v(cx, v);
    } else if (!strcmp(name, "set_config")) {
        if (args[0].is_null || args[1].is_null)
            return QR_OK;
        char n[128], v[512];
        snprintf(n, sizeof n, "%.*s", (int)args[0].u.s.n, args[0].u.s.s);
        snprintf(v, sizeof v, "%.*s", (int)args[1].u.s.n, args[1].u.s.s);
        int rc = qr_sql_session_set(cx->sess, n, v, cx->err);
        if (rc)
            return rc;
        *out = text_v(cx, v);
    } else if (!strcmp(name, "pg_relation_size") || !strcmp(name, "pg_total_relation_size") ||
               !strcmp(name, "pg_table_size")) {
        cJSON *meta = NULL;
        QrTable *t = table_by_oid(cx, a0, &meta);
        cJSON_Delete(meta);
        if (t) {
            QrTableStats st;
            qr_table_stats(t, &st);
            *out = sqlv_int((int64_t)st.disk_bytes);
        }
    } else if (!strcmp(name, "pg_database_size")) {
        CatTables ts;
        int64_t total = 0;
        if (tables_load(cx, &ts) == QR_OK)
            for (int i = 0; i < ts.n; i++) {
                QrTableStats st;
                qr_table_stats(ts.t[i], &st);
                total += (int64_t)st.disk_bytes;
            }
        tables_free(&ts);
        *out = sqlv_int(total);
    } else if (!strcmp(name, "pg_size_pretty")) {
        char b[64];
        double v = (double)a0;
        const char *unit = "bytes";
        if (v >= 10240) { v /= 1024; unit = "kB"; }
        if (v >= 10240) { v /= 1024; unit = "MB"; }
        if (v >= 10240) { v /= 1024; unit = "GB"; }
        snprintf(b, sizeof b, "%.0f %s", v, unit);
        *out = text_v(cx, b);
    } else if (!strcmp(name, "txid_current")) {
        *out = sqlv_int(1);
    }
    /* obj_description, col_description, shobj_description, inet_server_port,
     * pg_get_serial_sequence (Quarry has no sequences), pg_get_*def of objects Quarry does not have: NULL */
    if (!out->is_null && out->type != f->ret && f->ret != QR_SQL_UNKNOWN) {
        if (sqlt_is_str(f->ret) && sqlt_is_str(out->type))
            out->type = f->ret;
        else if (sqlt_is_int(f->ret) && sqlt_is_int(out->type))
            out->type = f->ret;
    }
    return QR_OK;
}

/* ---- arrays and reg* casts ---- */

QrSqlType sqlcat_array_elem(const char *column)
{
    static const struct {
        const char *col;
        QrSqlType elem;
    } A[] = {
        {"indkey", QR_SQL_INT2},   {"indoption", QR_SQL_INT2}, {"conkey", QR_SQL_INT2},
        {"confkey", QR_SQL_INT2},  {"stxkeys", QR_SQL_INT2},   {"prattrs", QR_SQL_INT2},
        {"indclass", QR_SQL_OID},  {"indcollation", QR_SQL_OID}, {"polroles", QR_SQL_OID},
    };
    for (size_t i = 0; i < sizeof A / sizeof *A; i++)
        if (!strcmp(A[i].col, column))
            return A[i].elem;
    return QR_SQL_UNKNOWN;
}

static const char *const NS_NAMES[][2] = {{"11", "pg_catalog"}, {"2200", "public"},
                                          {"13000", "information_schema"}};

/* The relation (table or index) called `name`, or of oid `oid` when name is
 * NULL: its oid and name (copied to the arena).  false if none. */
static bool rel_lookup(SqlCtx *cx, const char *name, int64_t oid, uint32_t *oid_out,
                       const char **name_out)
{
    CatTables ts;
    bool found = false;
    if (tables_load(cx, &ts) != QR_OK) {
        tables_free(&ts);
        return false;
    }
    for (int i = 0; i < ts.n && !found; i++) {
        uint32_t o = name_oid(ts.names[i]);
        if (name ? !strcmp(name, ts.names[i]) : o == (uint32_t)oid) {
            *oid_out = o;
            *name_out = qr_arena_strndup(cx->arena, ts.names[i], strlen(ts.names[i]));
            found = true;
            break;
        }
        CatIndex *x;
        int nx;
        if (table_indexes(cx, ts.t[i], ts.meta[i], &x, &nx) != QR_OK)
            break;
        for (int k = 0; k < nx && !found; k++) {
            o = x[k].primary ? pkey_oid(ts.names[i]) : name_oid(x[k].name);
            if (name ? !strcmp(name, x[k].name) : o == (uint32_t)oid) {
                *oid_out = o;
                *name_out = qr_arena_strndup(cx->arena, x[k].name, strlen(x[k].name));
                found = true;
            }
        }
    }
    tables_free(&ts);
    return found;
}

int sqlcat_reg_oid(SqlCtx *cx, char kind, const SqlValue *in, int loc, SqlValue *out)
{
    char n[2 * QR_NAME_MAX + 16];
    snprintf(n, sizeof n, "%.*s", (int)in->u.s.n, in->u.s.s);
    const char *name = n;
    char *end;
    long long num = strtoll(n, &end, 10);
    if (*n && *end == 0) { /* a number is the oid itself */
        *out = sqlv_int(num);
        out->type = QR_SQL_OID;
        return QR_OK;
    }
    /* unquote "name" and drop a schema qualification */
    const char *dot = strrchr(name, '.');
    if (dot && (kind != 't' || !strncmp(name, "pg_catalog.", 11)))
        name = dot + 1;
    size_t len = strlen(name);
    if (len >= 2 && name[0] == '"' && name[len - 1] == '"') {
        memmove(n, name + 1, len - 2);
        n[len - 2] = 0;
        name = n;
    }
    uint32_t oid = 0;
    bool found = false;
    if (kind == 'c') {
        const char *nm;
        found = rel_lookup(cx, name, 0, &oid, &nm);
    } else if (kind == 't') {
        for (int i = 0; i < N_PG_TYPES + n_more() && !found; i++) {
            const PgType *t = i < N_PG_TYPES ? &PG_TYPES[i] : &more_types[i - N_PG_TYPES];
            if (!strcmp(t->name, name) || !strcmp(t->sql, name)) {
                oid = t->oid;
                found = true;
            }
        }
    } else {
        for (size_t i = 0; i < sizeof NS_NAMES / sizeof *NS_NAMES && !found; i++)
            if (!strcmp(NS_NAMES[i][1], name)) {
                oid = (uint32_t)atoi(NS_NAMES[i][0]);
                found = true;
            }
    }
    if (!found)
        return kind == 'c' ? sql_err_at(cx, loc, QR_ENOTFOUND, "42P01",
                                        "relation \"%s\" does not exist", name)
               : kind == 't' ? sql_err_at(cx, loc, QR_ENOTFOUND, "42704",
                                          "type \"%s\" does not exist", name)
                             : sql_err_at(cx, loc, QR_ENOTFOUND, "3F000",
                                          "schema \"%s\" does not exist", name);
    *out = sqlv_int(oid);
    out->type = QR_SQL_OID;
    return QR_OK;
}

int sqlcat_reg_name(SqlCtx *cx, char kind, int64_t oid, SqlValue *out)
{
    char num[24];
    snprintf(num, sizeof num, "%lld", (long long)oid);
    const char *name = NULL;
    if (oid == 0) {
        name = "-";
    } else if (kind == 'c') {
        uint32_t o;
        if (!rel_lookup(cx, NULL, oid, &o, &name))
            name = NULL;
    } else if (kind == 't') {
        const PgType *t = type_by_oid((uint32_t)oid);
        name = t ? t->sql : NULL;
    } else {
        for (size_t i = 0; i < sizeof NS_NAMES / sizeof *NS_NAMES; i++)
            if (!strcmp(NS_NAMES[i][0], num))
                name = NS_NAMES[i][1];
    }
    *out = text_v(cx, name ? name : num);  /* PostgreSQL prints an unknown oid as its number */
    return out->is_null ? qr_error_set(cx->err, QR_ENOMEM, "out of memory") : QR_OK;
}
