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
#include "query/sequence.h"
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
    {"max_index_keys", "32", "Maximum number of index keys."},
    {"block_size", "8192", "Size of a disk block (nominal in Quarry)."},
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

/* The role the session authenticated as (current_user); "quarry" over HTTP. */
static const char *cat_user(const SqlCtx *cx)
{
    const char *u = qr_sql_session_get(cx->sess, "session_authorization");
    return u && *u ? u : "quarry";
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
    /* pseudo-types tools name in their catalog queries ('trigger'::regtype) */
    {"record", 2249, -1, 'P', "record"},
    {"cstring", 2275, -2, 'P', "cstring"},
    {"void", 2278, 4, 'P', "void"},
    {"trigger", 2279, 4, 'P', "trigger"},
    {"internal", 2281, 8, 'P', "internal"},
    {"anyelement", 2283, 4, 'P', "anyelement"},
    {"event_trigger", 3838, 4, 'P', "event_trigger"},
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

/* A type's input or output function as PostgreSQL names it (int4in,
 * timestamp_out, array_in): `dir` is "in" or "out". */
static void type_io_name(const PgType *t, const char *dir, char *buf, size_t cap)
{
    static const char *const PLAIN[] = {"bool", "char", "name", "text", "oid", "bpchar", "varchar"};
    size_t n = strlen(t->name);
    bool plain = n && t->name[n - 1] >= '0' && t->name[n - 1] <= '9';
    for (size_t i = 0; i < sizeof PLAIN / sizeof *PLAIN && !plain; i++)
        plain = !strcmp(PLAIN[i], t->name);
    snprintf(buf, cap, "%s%s%s", t->name, plain ? "" : "_", dir);
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
    const char *seq;     /* borrows: the sequence of a SERIAL / identity column */
    char identity;       /* 'a' GENERATED ALWAYS, 'd' BY DEFAULT, 0 */
} CatCol;

/* Columns of a table in attnum order (primary key first, a hidden row id
 * left out), with the types SELECT gives them; *out in arena. */
static int table_cols(SqlCtx *cx, QrTable *t, const cJSON *meta, CatCol **out, int *n)
{
    SqlScope *sc;
    int rc = sql_table_scope(cx, t, NULL, &sc);
    if (rc)
        return rc;
    CatCol *c = qr_arena_calloc(cx->arena, (size_t)(sc->n + 1) * sizeof *c);
    if (!c)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    int k = 0;
    for (int i = 0; i < sc->n; i++) {
        if (sc->cols[i].hidden)
            continue;
        const char *name = sc->cols[i].name;
        const cJSON *m = sqlw_meta_col(meta, name);
        const char *pg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "type"));
        int f = sc->cols[i].field;
        if (!pg && f >= 0 && qr_table_schema(t)->fields[f].type == QR_FT_KEYWORD)
            pg = "varchar"; /* an exact-string column */
        if (!pg)
            pg = qr_sql_type_name(sc->cols[i].type);
        const cJSON *tm = cJSON_GetObjectItemCaseSensitive(m, "typmod");
        const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "identity"));
        c[k++] = (CatCol){.name = name,
                          .type = type_by_name(pg),
                          .typmod = cJSON_IsNumber(tm) ? (int32_t)tm->valuedouble : -1,
                          .not_null = sc->cols[i].field == -1 ||
                                      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "not_null")),
                          .dflt = id ? NULL : cJSON_GetObjectItemCaseSensitive(m, "default"),
                          .seq = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "sequence")),
                          .identity = id ? id[0] : 0};
    }
    *out = c;
    *n = k;
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
static const char *default_text(SqlCtx *cx, const cJSON *d);

/* A column's default as pg_attrdef / information_schema show it. */
static const char *col_default(SqlCtx *cx, const CatCol *c)
{
    if (c->seq && c->dflt) {
        char b[128];
        snprintf(b, sizeof b, "nextval('%s'::regclass)", c->seq);
        return qr_arena_strndup(cx->arena, b, strlen(b));
    }
    return default_text(cx, c->dflt);
}

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
        int arc = sqld_hidden(cx->sess, ts->names[i]) /* dropped by the open block */
                      ? QR_ENOTFOUND
                      : qr_table_acquire(cx->sess->db, ts->names[i], &ts->t[k], &e);
        if (arc == QR_ENOTFOUND) {
            qr_free(ts->names[i]);
            continue;
        }
        ts->names[k] = ts->names[i];
        if (arc == QR_OK && sqld_view(cx->sess, ts->names[k])) /* rebuilt by the block */
            ts->t[k] = sqld_view(cx->sess, ts->names[k]);
        if (arc != QR_OK) {
            ts->t[k] = NULL; /* kept for freeing, not released */
            qr_error_copy(cx->err, &e);
            rc = arc;
        } else if (!(ts->meta[k] = sqlw_meta_load(cx, ts->names[k]))) {
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
    int hidden = sqlw_hidden_pk(meta); /* a row id has no index the catalog shows */
    if (!hidden) {
        snprintf(x[k].name, sizeof x[k].name, "%s_pkey", qr_table_name(t));
        x[k].col = s->primary_key;
        x[k].attnum = 1;
        x[k++].primary = true;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, idxs)
    {
        if (!cJSON_IsString(it) || k >= cap)
            continue;
        int fi = schema_field_index(s, it->valuestring);
        snprintf(x[k].name, sizeof x[k].name, "%s", it->string);
        x[k].col = it->valuestring;
        x[k++].attnum = fi < 0 ? 1 : fi + 2 - hidden;
    }
    for (int i = 0; i < s->n_fields && k < cap; i++) {
        if (!s->fields[i].btree || sqld_btree_dropping(cx->sess, qr_table_name(t), s->fields[i].name) ||
            sqld_btree_of_other(cx->sess, qr_table_name(t), s->fields[i].name))
            continue; /* (a DROP INDEX of the session's open block drops it at COMMIT; another
                         session's open block made it: its index is not committed yet) */
        bool named = false;
        cJSON_ArrayForEach(it, idxs) named |= cJSON_IsString(it) &&
                                              !strcmp(it->valuestring, s->fields[i].name);
        if (named)
            continue;
        snprintf(x[k].name, sizeof x[k].name, "%s_%s_idx", qr_table_name(t), s->fields[i].name);
        x[k].col = s->fields[i].name;
        x[k++].attnum = i + 2 - hidden;
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

/* The sequences the catalog shows (hidden row ids left out), with their
 * definitions and positions; names qr_malloc'd (seqs_free). */
typedef struct CatSeqs {
    int n;
    char **names;
    SeqDef *def;
    int64_t *last;
    bool *called;
} CatSeqs;

static void seqs_free(CatSeqs *q)
{
    for (int i = 0; i < q->n; i++)
        qr_free(q->names[i]);
    qr_free(q->names);
}

static int seqs_load(SqlCtx *cx, CatSeqs *q)
{
    memset(q, 0, sizeof *q);
    const char *dir = qr_db_dir(cx->sess->db);
    int rc = seq_list(dir, &q->names, &q->n, cx->err);
    if (rc)
        return rc;
    q->def = qr_arena_calloc(cx->arena, (size_t)(q->n + 1) * sizeof *q->def);
    q->last = qr_arena_calloc(cx->arena, (size_t)(q->n + 1) * sizeof *q->last);
    q->called = qr_arena_calloc(cx->arena, (size_t)(q->n + 1) * sizeof *q->called);
    if (!q->def || !q->last || !q->called)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    int k = 0;
    for (int i = 0; i < q->n; i++) {
        QrError e;
        qr_error_clear(&e);
        if (seq_get(dir, q->names[i], &q->def[k], &q->last[k], &q->called[k], &e) != QR_OK ||
            q->def[k].internal) {
            qr_free(q->names[i]); /* dropped meanwhile, or a row id */
            continue;
        }
        q->names[k++] = q->names[i];
    }
    q->n = k;
    return QR_OK;
}

static const PgType *seq_type(const SeqDef *d) { return type_by_name(d->type); }

/* The attnum of "table.column" a sequence is owned by (0 if none). */
static int owner_attnum(SqlCtx *cx, const char *owned_by, char *table, size_t n)
{
    const char *dot = strchr(owned_by, '.');
    if (!dot)
        return 0;
    snprintf(table, n, "%.*s", (int)(dot - owned_by), owned_by);
    QrTable *t;
    if (sqld_hidden(cx->sess, table) || qr_table_acquire(cx->sess->db, table, &t, NULL) != QR_OK)
        return 0;
    if (sqld_view(cx->sess, table))
        t = sqld_view(cx->sess, table);
    cJSON *meta = sqlw_meta_load(cx, table);
    CatCol *c;
    int nc = 0, at = 0;
    if (meta && table_cols(cx, t, meta, &c, &nc) == QR_OK)
        for (int i = 0; i < nc && !at; i++)
            if (!strcmp(c[i].name, dot + 1))
                at = i + 1;
    cJSON_Delete(meta);
    qr_table_release(cx->sess->db, table);
    return at;
}

static int fill_sequence(CatBuild *b)
{
    CatSeqs q;
    int rc = seqs_load(b->cx, &q);
    for (int i = 0; rc == QR_OK && i < q.n; i++) {
        if ((rc = new_row(b)) != QR_OK)
            break;
        const SeqDef *d = &q.def[i];
        set_i(b, "seqrelid", name_oid(q.names[i]));
        set_i(b, "seqtypid", seq_type(d)->oid);
        set_i(b, "seqstart", d->start);
        set_i(b, "seqincrement", d->increment);
        set_i(b, "seqmax", d->max);
        set_i(b, "seqmin", d->min);
        set_i(b, "seqcache", d->cache);
        set_b(b, "seqcycle", d->cycle);
    }
    seqs_free(&q);
    return rc;
}

static int fill_sequences(CatBuild *b)
{
    CatSeqs q;
    int rc = seqs_load(b->cx, &q);
    for (int i = 0; rc == QR_OK && i < q.n; i++) {
        if ((rc = new_row(b)) != QR_OK)
            break;
        const SeqDef *d = &q.def[i];
        const char *nm = qr_arena_strndup(b->cx->arena, q.names[i], strlen(q.names[i]));
        if (!strcmp(b->rel->schema, "pg_catalog")) {
            set_s(b, "schemaname", "public");
            set_s(b, "sequencename", nm);
            set_s(b, "sequenceowner", cat_user(b->cx));
            set_s(b, "data_type", seq_type(d)->sql);
            set_i(b, "start_value", d->start);
            set_i(b, "min_value", d->min);
            set_i(b, "max_value", d->max);
            set_i(b, "increment_by", d->increment);
            set_b(b, "cycle", d->cycle);
            set_i(b, "cache_size", d->cache);
            if (q.called[i])
                set_i(b, "last_value", q.last[i]);
            continue;
        }
        /* information_schema.sequences: numbers as text */
        set_s(b, "sequence_catalog", "quarry");
        set_s(b, "sequence_schema", "public");
        set_s(b, "sequence_name", nm);
        set_s(b, "data_type", seq_type(d)->sql);
        set_i(b, "numeric_precision", seq_type(d)->len * 8);
        set_i(b, "numeric_precision_radix", 2);
        set_i(b, "numeric_scale", 0);
        const int64_t nums[4] = {d->start, d->min, d->max, d->increment};
        static const char *const cols[4] = {"start_value", "minimum_value", "maximum_value",
                                            "increment"};
        for (int k = 0; k < 4; k++) {
            char v[24];
            snprintf(v, sizeof v, "%lld", (long long)nums[k]);
            set_s(b, cols[k], qr_arena_strndup(b->cx->arena, v, strlen(v)));
        }
        set_s(b, "cycle_option", d->cycle ? "YES" : "NO");
    }
    seqs_free(&q);
    return rc;
}

/* pg_depend: a SERIAL's sequence depends on its column ('a'uto), an
 * identity's is 'i'nternal to it; pg_dump and psql read OWNED BY here. */
static int fill_depend(CatBuild *b)
{
    CatSeqs q;
    int rc = seqs_load(b->cx, &q);
    for (int i = 0; rc == QR_OK && i < q.n; i++) {
        char table[QR_NAME_MAX + 1];
        int at = owner_attnum(b->cx, q.def[i].owned_by, table, sizeof table);
        if (!at)
            continue;
        cJSON *meta = sqlw_meta_load(b->cx, table);
        const cJSON *m = sqlw_meta_col(meta, strchr(q.def[i].owned_by, '.') + 1);
        bool identity = cJSON_GetObjectItemCaseSensitive(m, "identity") != NULL;
        cJSON_Delete(meta);
        if ((rc = new_row(b)) != QR_OK)
            break;
        set_i(b, "classid", 1259);
        set_i(b, "objid", name_oid(q.names[i]));
        set_i(b, "objsubid", 0);
        set_i(b, "refclassid", 1259);
        set_i(b, "refobjid", name_oid(table));
        set_i(b, "refobjsubid", at);
        set_s(b, "deptype", identity ? "i" : "a");
        if (identity || (rc = new_row(b)) != QR_OK)
            continue;
        /* a SERIAL's default depends on its sequence: pg_dump sets it after both exist */
        const char *col = strchr(q.def[i].owned_by, '.') + 1;
        set_i(b, "classid", 2604);
        set_i(b, "objid", name_oid(col) ^ name_oid(table));
        set_i(b, "objsubid", 0);
        set_i(b, "refclassid", 1259);
        set_i(b, "refobjid", name_oid(q.names[i]));
        set_i(b, "refobjsubid", 0);
        set_s(b, "deptype", "n");
    }
    seqs_free(&q);
    return rc;
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
        const QrSchema *sc = qr_table_schema(ts.t[i]);
        int natts = sc->n_fields + 1 - sqlw_hidden_pk(ts.meta[i]);
        for (int f = 0; f < sc->n_fields; f++)
            natts -= sqlw_col_pending(ts.meta[i], sc->fields[f].name); /* not shown */
        class_row(b, name_oid(ts.names[i]), ts.names[i], 'r', natts, nx > 0, (double)st.docs);
        for (int k = 0; k < nx && rc == QR_OK; k++) {
            if ((rc = new_row(b)) != QR_OK)
                break;
            class_row(b, x[k].primary ? pkey_oid(ts.names[i]) : name_oid(x[k].name), x[k].name,
                      'i', 1, false, 0);
        }
    }
    tables_free(&ts);
    CatSeqs q;
    if (rc == QR_OK)
        rc = seqs_load(b->cx, &q);
    else
        memset(&q, 0, sizeof q);
    for (int i = 0; rc == QR_OK && i < q.n; i++)
        if ((rc = new_row(b)) == QR_OK)
            class_row(b, name_oid(q.names[i]), q.names[i], 'S', 3, false, 1);
    seqs_free(&q);
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
    char idn[2] = {c->identity, 0};
    set_s(b, "attidentity", qr_arena_strndup(b->cx->arena, idn, strlen(idn)));
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
    set_s(b, "adbin", col_default(b->cx, c));
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
            set_s(b, "indoption", "0");
            set_s(b, "indclass", "0");
            set_s(b, "indcollation", "0");
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
        if (sqlw_hidden_pk(ts.meta[i]))
            continue;
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
        set_s(b, "typtype", t->category == 'P' ? "p" : "b");
        set_s(b, "typalign", t->len == 8 ? "d" : t->len == 2 ? "s" : t->len == 1 ? "c" : "i");
        set_s(b, "typstorage", t->len > 0 ? "p" : "x");
        set_s(b, "typsubscript", "-");
        char io[64];
        type_io_name(t, "in", io, sizeof io);
        set_s(b, "typinput", qr_arena_strndup(b->cx->arena, io, strlen(io)));
        type_io_name(t, "out", io, sizeof io);
        set_s(b, "typoutput", qr_arena_strndup(b->cx->arena, io, strlen(io)));
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

/* quarry, and the names tools connect to first (psql -l, pg_dumpall): the
 * PG port accepts postgres and template1 as other names of the one database,
 * so they are listed as not connectable and pg_dumpall dumps quarry once. */
static int fill_database(CatBuild *b)
{
    static const struct {
        const char *name;
        uint32_t oid;
        bool tmpl, conn;
    } dbs[] = {{"postgres", 5, false, false},
               {"quarry", DB_OID, false, true},
               {"template0", 4, true, false},
               {"template1", 1, true, false}};
    for (size_t i = 0; i < sizeof dbs / sizeof dbs[0]; i++) {
        if (new_row(b))
            return b->cx->err->code;
        set_i(b, "oid", dbs[i].oid);
        set_s(b, "datname", dbs[i].name);
        set_i(b, "datdba", OWNER_OID);
        set_i(b, "encoding", 6);
        set_s(b, "datlocprovider", "c");
        set_b(b, "datistemplate", dbs[i].tmpl);
        set_b(b, "datallowconn", dbs[i].conn);
        set_i(b, "datconnlimit", -1);
        set_i(b, "dattablespace", 1663);
        set_s(b, "datcollate", "C");
        set_s(b, "datctype", "C.UTF-8");
        set_s(b, "datfrozenxid", "716");
        set_s(b, "datminmxid", "1");
    }
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
    set_i(b, "oid", OWNER_OID);
    set_s(b, "rolname", cat_user(b->cx));
    set_s(b, "usename", cat_user(b->cx));
    set_i(b, "usesysid", OWNER_OID);
    set_b(b, "rolsuper", true);
    set_b(b, "usesuper", true);
    set_b(b, "rolinherit", true);
    set_b(b, "rolcreaterole", true);
    set_b(b, "rolcreatedb", true);
    set_b(b, "rolcanlogin", true);
    set_b(b, "rolreplication", false);
    set_b(b, "rolbypassrls", false);
    set_i(b, "rolconnlimit", -1);
    return QR_OK;
}

static int fill_proc(CatBuild *b);

/* Comments: only PostgreSQL's own on the public schema (COMMENT is not kept). */
static int fill_description(CatBuild *b)
{
    if (new_row(b))
        return b->cx->err->code;
    set_i(b, "objoid", NS_PUBLIC);
    set_i(b, "classoid", 2615);
    set_i(b, "objsubid", 0);
    set_s(b, "description", "standard public schema");
    return QR_OK;
}

/* pg_get_keywords(): the reserved words (psql, pgcli and JDBC quote them). */
static int fill_keywords(CatBuild *b)
{
    static const char *const W[] = {
        "all", "and", "any", "array", "as", "asc", "both", "case", "cast", "check", "collate",
        "column", "constraint", "create", "default", "desc", "distinct", "do", "else", "end",
        "except", "false", "fetch", "for", "foreign", "from", "grant", "group", "having", "in",
        "initially", "intersect", "into", "leading", "limit", "not", "null", "offset", "on",
        "only", "or", "order", "primary", "references", "returning", "select", "some",
        "table", "then", "to", "trailing", "true", "union", "unique", "user", "using", "when",
        "where", "window", "with"};
    for (size_t i = 0; i < sizeof W / sizeof W[0]; i++) {
        if (new_row(b))
            return b->cx->err->code;
        set_s(b, "word", W[i]);
        set_s(b, "catcode", "R");
        set_b(b, "barelabel", true);
        set_s(b, "catdesc", "reserved");
        set_s(b, "baredesc", "can be bare label");
    }
    return QR_OK;
}

bool sqlcat_srf_known(const char *name)
{
    return !strcmp(name, "pg_options_to_table") || !strcmp(name, "pg_get_keywords");
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
        set_s(b, "schema_owner", cat_user(b->cx));
    }
    return QR_OK;
}

/* information_schema.table_constraints and .key_column_usage: the primary
 * keys (the only constraints Quarry has). */
static int fill_is_keys(CatBuild *b)
{
    CatTables ts;
    int rc = tables_load(b->cx, &ts);
    bool usage = !strcmp(b->rel->name, "key_column_usage");
    for (int i = 0; rc == QR_OK && i < ts.n; i++) {
        if (sqlw_hidden_pk(ts.meta[i]) || (rc = new_row(b)) != QR_OK)
            continue;
        char name[QR_NAME_MAX + 8];
        snprintf(name, sizeof name, "%s_pkey", ts.names[i]);
        const char *cn = qr_arena_strndup(b->cx->arena, name, strlen(name));
        const char *tn = qr_arena_strndup(b->cx->arena, ts.names[i], strlen(ts.names[i]));
        const char *pk = qr_table_schema(ts.t[i])->primary_key;
        set_s(b, "constraint_catalog", "quarry");
        set_s(b, "constraint_schema", "public");
        set_s(b, "constraint_name", cn);
        set_s(b, "table_catalog", "quarry");
        set_s(b, "table_schema", "public");
        set_s(b, "table_name", tn);
        if (usage) {
            set_s(b, "column_name", qr_arena_strndup(b->cx->arena, pk, strlen(pk)));
            set_i(b, "ordinal_position", 1);
        } else {
            set_s(b, "constraint_type", "PRIMARY KEY");
            set_s(b, "is_deferrable", "NO");
            set_s(b, "initially_deferred", "NO");
            set_s(b, "enforced", "YES");
        }
    }
    tables_free(&ts);
    return rc;
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
    set_s(b, "column_default", col_default(b->cx, c));
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
    set_s(b, "is_identity", c->identity ? "YES" : "NO");
    if (c->identity)
        set_s(b, "identity_generation", c->identity == 'a' ? "ALWAYS" : "BY DEFAULT");
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
     "oid:o,typname:n,typnamespace:o,typowner:o,typlen:s,typbyval:b,typtype:c,"
     "typcategory:c,typispreferred:b,typisdefined:b,typdelim:c,typrelid:o,"
     "typsubscript:t,typelem:o,typarray:o,typinput:t,typoutput:t,typreceive:t,"
     "typsend:t,typmodin:t,typmodout:t,typanalyze:t,typalign:c,typstorage:c,"
     "typnotnull:b,typbasetype:o,typtypmod:i,typndims:i,typcollation:o,"
     "typdefaultbin:t,typdefault:t,typacl:t",
     fill_type},
    {"pg_catalog", "pg_index",
     "indexrelid:o,indrelid:o,indnatts:s,indnkeyatts:s,indisunique:b,indisprimary:b,"
     "indisexclusion:b,indimmediate:b,indisclustered:b,indisvalid:b,indcheckxmin:b,"
     "indisready:b,indislive:b,indisreplident:b,indnullsnotdistinct:b,indkey:t,indcollation:t,indclass:t,"
     "indoption:t,indexprs:t,indpred:t",
     fill_index},
    {"pg_catalog", "pg_constraint",
     "oid:o,conname:n,connamespace:o,contype:c,condeferrable:b,condeferred:b,"
     "convalidated:b,conrelid:o,contypid:o,conindid:o,conparentid:o,confrelid:o,"
     "confupdtype:c,confdeltype:c,confmatchtype:c,conislocal:b,coninhcount:i,"
     "connoinherit:b,conkey:t,confkey:t,conpfeqop:t,conppeqop:t,conffeqop:t,"
     "confdelsetcols:t,conexclop:t,conbin:t",
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
    {"pg_catalog", "pg_authid",
     "oid:o,rolname:n,rolsuper:b,rolinherit:b,rolcreaterole:b,rolcreatedb:b,rolcanlogin:b,"
     "rolreplication:b,rolbypassrls:b,rolconnlimit:i,rolpassword:t,rolvaliduntil:t",
     fill_roles},
    {"pg_catalog", "pg_db_role_setting", "setdatabase:o,setrole:o,setconfig:t", NULL},
    {"pg_catalog", "pg_parameter_acl", "oid:o,parname:t,paracl:t", NULL},
    {"pg_catalog", "pg_user", "usename:n,usesysid:o,usecreatedb:b,usesuper:b,userepl:b,"
                              "usebypassrls:b,passwd:t,valuntil:t,useconfig:t",
     fill_roles},
    {"pg_catalog", "pg_description", "objoid:o,classoid:o,objsubid:i,description:t",
     fill_description},
    {"pg_catalog", "pg_shdescription", "objoid:o,classoid:o,description:t", NULL},
    {"pg_catalog", "pg_inherits", "inhrelid:o,inhparent:o,inhseqno:i,inhdetachpending:b", NULL},
    {"pg_catalog", "pg_policy",
     "oid:o,polname:n,polrelid:o,polcmd:c,polpermissive:b,polroles:t,polqual:t,polwithcheck:t",
     NULL},
    {"pg_catalog", "pg_trigger",
     "oid:o,tgrelid:o,tgparentid:o,tgname:n,tgfoid:o,tgtype:s,tgenabled:c,"
     "tgisinternal:b,tgconstrrelid:o,tgconstrindid:o,tgconstraint:o,tgdeferrable:b,"
     "tginitdeferred:b,tgnargs:s,tgattr:t,tgargs:t,tgqual:t,tgoldtable:n,"
     "tgnewtable:n",
     NULL},
    {"pg_catalog", "pg_rewrite",
     "oid:o,rulename:n,ev_class:o,ev_type:c,ev_enabled:c,is_instead:b,ev_qual:t,"
     "ev_action:t",
     NULL},
    {"pg_catalog", "pg_statistic_ext",
     "oid:o,stxrelid:o,stxname:n,stxnamespace:o,stxowner:o,stxstattarget:i,"
     "stxkeys:t,stxkind:t,stxexprs:t",
     NULL},
    {"pg_catalog", "pg_publication",
     "oid:o,pubname:n,pubowner:o,puballtables:b,pubinsert:b,pubupdate:b,pubdelete:b,"
     "pubtruncate:b,pubviaroot:b",
     NULL},
    {"pg_catalog", "pg_publication_rel", "oid:o,prpubid:o,prrelid:o,prqual:t,prattrs:t", NULL},
    {"pg_catalog", "pg_publication_namespace", "oid:o,pnpubid:o,pnnspid:o", NULL},
    {"pg_catalog", "pg_collation",
     "oid:o,collname:n,collnamespace:o,collowner:o,collprovider:c,"
     "collisdeterministic:b,collencoding:i,collcollate:t,collctype:t,"
     "colliculocale:t,collversion:t",
     NULL},
    {"pg_catalog", "pg_foreign_table", "ftrelid:o,ftserver:o,ftoptions:t", NULL},
    {"pg_catalog", "pg_partitioned_table",
     "partrelid:o,partstrat:c,partnatts:s,partdefid:o,partattrs:t,partclass:t,partcollation:t,"
     "partexprs:t",
     NULL},
    {"pg_catalog", "pg_tablespace",
     "oid:o,spcname:n,spcowner:o,spcacl:t,spcoptions:t",
     NULL},
    {"pg_catalog", "pg_extension", "oid:o,extname:n,extowner:o,extnamespace:o,"
                                   "extrelocatable:b,extversion:t,extconfig:t,extcondition:t",
     NULL},
    {"pg_catalog", "pg_proc",
     "oid:o,proname:n,pronamespace:o,proowner:o,prolang:o,procost:f,prorows:f,provariadic:o,"
     "prosupport:t,prokind:c,prosecdef:b,proleakproof:b,proisstrict:b,proretset:b,"
     "provolatile:c,proparallel:c,pronargs:s,pronargdefaults:s,prorettype:o,proargtypes:t,"
     "proallargtypes:t,proargmodes:t,proargnames:t,proargdefaults:t,protrftypes:t,prosrc:t,"
     "probin:t,prosqlbody:t,proconfig:t,proacl:t",
     fill_proc},
    {"pg_catalog", "pg_sequence", "seqrelid:o,seqtypid:o,seqstart:l,seqincrement:l,seqmax:l,"
                                  "seqmin:l,seqcache:l,seqcycle:b",
     fill_sequence},
    {"pg_catalog", "pg_sequences",
     "schemaname:n,sequencename:n,sequenceowner:n,data_type:t,start_value:l,min_value:l,"
     "max_value:l,increment_by:l,cycle:b,cache_size:l,last_value:l",
     fill_sequences},
    {"pg_catalog", "pg_auth_members", "oid:o,roleid:o,member:o,grantor:o,admin_option:b", NULL},
    {"pg_catalog", "pg_language",
     "oid:o,lanname:n,lanowner:o,lanispl:b,lanpltrusted:b,lanplcallfoid:o,"
     "laninline:o,lanvalidator:o,lanacl:t",
     NULL},
    {"pg_catalog", "pg_event_trigger",
     "oid:o,evtname:n,evtevent:n,evtowner:o,evtfoid:o,evtenabled:c,evttags:t",
     NULL},
    {"pg_catalog", "pg_cast",
     "oid:o,castsource:o,casttarget:o,castfunc:o,castcontext:c,castmethod:c",
     NULL},
    {"pg_catalog", "pg_operator",
     "oid:o,oprname:n,oprnamespace:o,oprowner:o,oprkind:c,oprcanmerge:b,"
     "oprcanhash:b,oprleft:o,oprright:o,oprresult:o,oprcom:o,oprnegate:o,oprcode:t,"
     "oprrest:t,oprjoin:t",
     NULL},
    {"pg_catalog", "pg_opclass",
     "oid:o,opcmethod:o,opcname:n,opcnamespace:o,opcowner:o,opcfamily:o,opcintype:o,"
     "opcdefault:b,opckeytype:o",
     NULL},
    {"pg_catalog", "pg_aggregate",
     "aggfnoid:o,aggkind:c,aggnumdirectargs:s,aggtransfn:t,aggfinalfn:t,"
     "aggcombinefn:t,aggserialfn:t,aggdeserialfn:t,aggmtransfn:t,aggminvtransfn:t,"
     "aggmfinalfn:t,aggfinalextra:b,aggmfinalextra:b,aggfinalmodify:c,"
     "aggmfinalmodify:c,aggsortop:o,aggtranstype:o,aggtransspace:i,aggmtranstype:o,"
     "aggmtransspace:i,agginitval:t,aggminitval:t",
     NULL},
    {"pg_catalog", "pg_conversion",
     "oid:o,conname:n,connamespace:o,conowner:o,conforencoding:i,contoencoding:i,"
     "conproc:t,condefault:b",
     NULL},
    {"pg_catalog", "pg_default_acl",
     "oid:o,defaclrole:o,defaclnamespace:o,defaclobjtype:c,defaclacl:t",
     NULL},
    {"pg_catalog", "pg_init_privs", "objoid:o,classoid:o,objsubid:i,privtype:c,initprivs:t",
     NULL},
    {"pg_catalog", "pg_seclabel", "objoid:o,classoid:o,objsubid:i,provider:t,label:t", NULL},
    {"pg_catalog", "pg_seclabels", "objoid:o,classoid:o,objsubid:i,objtype:t,objnamespace:o,"
                                   "objname:t,provider:t,label:t",
     NULL},
    {"pg_catalog", "pg_shseclabel", "objoid:o,classoid:o,provider:t,label:t", NULL},
    {"pg_catalog", "pg_transform",
     "oid:o,trftype:o,trflang:o,trffromsql:o,trftosql:o",
     NULL},
    {"pg_catalog", "pg_foreign_data_wrapper", "oid:o,fdwname:n,fdwowner:o,fdwhandler:o,"
                                              "fdwvalidator:o,fdwacl:t,fdwoptions:t",
     NULL},
    {"pg_catalog", "pg_foreign_server", "oid:o,srvname:n,srvowner:o,srvfdw:o,srvtype:t,"
                                        "srvversion:t,srvacl:t,srvoptions:t",
     NULL},
    {"pg_catalog", "pg_user_mapping", "oid:o,umuser:o,umserver:o,umoptions:t", NULL},
    {"pg_catalog", "pg_largeobject_metadata", "oid:o,lomowner:o,lomacl:t", NULL},
    {"pg_catalog", "pg_subscription",
     "oid:o,subdbid:o,subskiplsn:t,subname:n,subowner:o,subenabled:b,subbinary:b,"
     "substream:b,subtwophasestate:c,subdisableonerr:b,subconninfo:t,subslotname:n,"
     "subsynccommit:t,subpublications:t",
     NULL},
    {"pg_catalog", "pg_ts_config",
     "oid:o,cfgname:n,cfgnamespace:o,cfgowner:o,cfgparser:o",
     NULL},
    {"pg_catalog", "pg_ts_dict",
     "oid:o,dictname:n,dictnamespace:o,dictowner:o,dicttemplate:o,dictinitoption:t",
     NULL},
    {"pg_catalog", "pg_ts_parser",
     "oid:o,prsname:n,prsnamespace:o,prsstart:t,prstoken:t,prsend:t,prsheadline:t,"
     "prslextype:t",
     NULL},
    {"pg_catalog", "pg_ts_template",
     "oid:o,tmplname:n,tmplnamespace:o,tmplinit:t,tmpllexize:t",
     NULL},
    {"pg_catalog", "pg_opfamily",
     "oid:o,opfmethod:o,opfname:n,opfnamespace:o,opfowner:o",
     NULL},
    {"pg_catalog", "pg_amop", "oid:o,amopfamily:o,amoplefttype:o,amoprighttype:o", NULL},
    {"pg_catalog", "pg_amproc", "oid:o,amprocfamily:o,amproclefttype:o,amprocrighttype:o", NULL},
    {"pg_catalog", "pg_statistic_ext_data", "stxoid:o,stxdinherit:b", NULL},
    {"pg_catalog", "pg_stat_user_tables", "relid:o,schemaname:n,relname:n,seq_scan:l,"
                                          "n_live_tup:l,n_dead_tup:l",
     NULL},
    {"pg_catalog", "pg_stat_activity", "datid:o,datname:n,pid:i,usename:n,application_name:t,"
                                       "client_addr:t,state:t,query:t,backend_type:t",
     NULL},
    {"pg_catalog", "pg_locks", "locktype:t,database:o,relation:o,pid:i,mode:t,granted:b", NULL},
    {"pg_catalog", "pg_timezone_names", "name:t,abbrev:t,utc_offset:t,is_dst:b", NULL},
    {"pg_catalog", "pg_enum", "oid:o,enumtypid:o,enumsortorder:f,enumlabel:n", NULL},
    /* functions returning rows (FROM pg_options_to_table(...)): no object has options */
    {"pg_catalog", "pg_options_to_table", "option_name:t,option_value:t", NULL},
    {"pg_catalog", "pg_get_keywords", "word:t,catcode:c,barelabel:b,catdesc:t,baredesc:t",
     fill_keywords},
    {"pg_catalog", "pg_range", "rngtypid:o,rngsubtype:o,rngmultitypid:o,rngcollation:o,"
                               "rngsubopc:o,rngcanonical:t,rngsubdiff:t",
     NULL},
    {"pg_catalog", "pg_depend", "classid:o,objid:o,objsubid:i,refclassid:o,refobjid:o,"
                                "refobjsubid:i,deptype:c",
     fill_depend},
    {"information_schema", "schemata", "catalog_name:t,schema_name:t,schema_owner:t",
     fill_is_schemata},
    {"information_schema", "table_constraints",
     "constraint_catalog:t,constraint_schema:t,constraint_name:t,table_catalog:t,"
     "table_schema:t,table_name:t,constraint_type:t,is_deferrable:t,initially_deferred:t,"
     "enforced:t,nulls_distinct:t",
     fill_is_keys},
    {"information_schema", "key_column_usage",
     "constraint_catalog:t,constraint_schema:t,constraint_name:t,table_catalog:t,"
     "table_schema:t,table_name:t,column_name:t,ordinal_position:i,"
     "position_in_unique_constraint:i",
     fill_is_keys},
    {"information_schema", "constraint_column_usage",
     "table_catalog:t,table_schema:t,table_name:t,column_name:t,constraint_catalog:t,"
     "constraint_schema:t,constraint_name:t",
     NULL},
    {"information_schema", "referential_constraints",
     "constraint_catalog:t,constraint_schema:t,constraint_name:t,unique_constraint_catalog:t,"
     "unique_constraint_schema:t,unique_constraint_name:t,match_option:t,update_rule:t,"
     "delete_rule:t",
     NULL},
    {"information_schema", "views",
     "table_catalog:t,table_schema:t,table_name:t,view_definition:t,check_option:t,"
     "is_updatable:t,is_insertable_into:t,is_trigger_updatable:t,is_trigger_deletable:t,"
     "is_trigger_insertable_into:t",
     NULL},
    {"information_schema", "routines",
     "specific_catalog:t,specific_schema:t,specific_name:t,routine_catalog:t,routine_schema:t,"
     "routine_name:t,routine_type:t,data_type:t,routine_definition:t,external_language:t",
     NULL},
    {"information_schema", "sequences",
     "sequence_catalog:t,sequence_schema:t,sequence_name:t,data_type:t,"
     "numeric_precision:i,numeric_precision_radix:i,numeric_scale:i,start_value:t,"
     "minimum_value:t,maximum_value:t,increment:t,cycle_option:t",
     fill_sequences},
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
     "identity_generation:t,is_generated:t,is_updatable:t",
     fill_is_columns},
};
#define N_CAT_RELS (int)(sizeof CAT_RELS / sizeof CAT_RELS[0])

static uint32_t catalog_rel_oid(const char *name, uint32_t oid, const char **name_out);

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

bool sqlcat_is_sequence(SqlCtx *cx, const char *name)
{
    SeqDef d;
    int64_t last;
    bool called;
    QrError e;
    qr_error_clear(&e);
    return seq_get(qr_db_dir(cx->sess->db), name, &d, &last, &called, &e) == QR_OK && !d.internal;
}

/* A sequence read as a relation (pg_dump: SELECT last_value, is_called
 * FROM s): one row. */
static int sequence_source(SqlCtx *cx, const char *name, SqlSource **out)
{
    static const CatRel SEQ_REL = {"public", "sequence", "last_value:l,log_cnt:l,is_called:b",
                                   NULL};
    SeqDef d;
    int64_t last;
    bool called;
    if (seq_get(qr_db_dir(cx->sess->db), name, &d, &last, &called, cx->err) != QR_OK)
        return cx->err->code;
    CatSource *c = qr_arena_calloc(cx->arena, sizeof *c);
    static const char *names[] = {"last_value", "log_cnt", "is_called"};
    static QrSqlType types[] = {QR_SQL_INT8, QR_SQL_INT8, QR_SQL_BOOL};
    CatBuild b = {.cx = cx, .rel = &SEQ_REL, .rows = {.n_cols = 3}};
    if (!c || new_row(&b))
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    set_i(&b, "last_value", last);
    set_i(&b, "log_cnt", 0);
    set_b(&b, "is_called", called);
    c->base = (SqlSource){.vt = &CAT_VT, .n_cols = 3, .col_names = names, .col_types = types};
    c->rows = b.rows;
    *out = &c->base;
    return QR_OK;
}

int sqlcat_open(SqlCtx *cx, const char *schema, const char *name, SqlSource **out)
{
    *out = NULL;
    if ((!schema || !strcmp(schema, "public")) && sqlcat_is_sequence(cx, name))
        return sequence_source(cx, name, out);
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
    int n_spec = n++; /* and the system column tableoid, last (not in SELECT *) */
    CatSource *c = qr_arena_calloc(cx->arena, sizeof *c);
    const char **names = qr_arena_calloc(cx->arena, (size_t)n * sizeof *names);
    QrSqlType *types = qr_arena_calloc(cx->arena, (size_t)n * sizeof *types);
    if (!c || !names || !types)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    const char *p = rel->cols;
    names[n_spec] = "tableoid";
    types[n_spec] = QR_SQL_OID;
    for (int i = 0; i < n_spec; i++) {
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
    uint32_t rel_oid = catalog_rel_oid(rel->name, 0, NULL);
    if (!rel_oid)
        rel_oid = name_oid(rel->name);
    for (uint64_t r = 0; r < b.rows.n; r++) {
        SqlValue *v = &b.rows.vals[r * (uint64_t)n + n_spec];
        *v = sqlv_int(rel_oid);
        v->type = QR_SQL_OID;
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
    {"pg_function_is_visible", 1, 1, QR_SQL_BOOL},
    {"quote_ident", 1, 1, QR_SQL_TEXT},
    {"quote_literal", 1, 1, QR_SQL_TEXT},
    {"acldefault", 2, 2, QR_SQL_TEXT},
    {"array_remove", 2, 2, QR_SQL_TEXT},
    {"pg_get_function_sqlbody", 1, 1, QR_SQL_TEXT},
    {"row_security_active", 1, 1, QR_SQL_BOOL},
    {"pg_has_role", 2, 3, QR_SQL_BOOL},
    {"current_schemas", 1, 1, QR_SQL_TEXT},
    {"pg_get_function_result", 1, 1, QR_SQL_TEXT},
    {"pg_get_function_arguments", 1, 1, QR_SQL_TEXT},
    {"pg_get_function_identity_arguments", 1, 1, QR_SQL_TEXT},
    {"pg_tablespace_location", 1, 1, QR_SQL_TEXT},
    {"pg_get_ruledef", 1, 2, QR_SQL_TEXT},
    {"pg_postmaster_start_time", 0, 0, QR_SQL_TIMESTAMPTZ},
    {"nextval", 1, 1, QR_SQL_INT8},
    {"currval", 1, 1, QR_SQL_INT8},
    {"setval", 2, 3, QR_SQL_INT8},
    {"lastval", 0, 0, QR_SQL_INT8},
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

static uint32_t func_oid(const CatFunc *f)
{
    char b[80];
    snprintf(b, sizeof b, "%s(%d)", f->name, f->min_args);
    return name_oid(b);
}

/* pg_proc: the catalog functions (what tools look up by name and oid). */
static int fill_proc(CatBuild *b)
{
    for (int i = 0; i < N_CAT_FUNCS; i++) {
        if (new_row(b))
            return b->cx->err->code;
        const CatFunc *f = &CAT_FUNCS[i];
        set_i(b, "oid", func_oid(f));
        set_s(b, "proname", f->name);
        set_i(b, "pronamespace", NS_CATALOG);
        set_i(b, "proowner", OWNER_OID);
        set_i(b, "prolang", 12);
        set_f(b, "procost", 1);
        set_f(b, "prorows", 0);
        set_i(b, "provariadic", 0);
        set_s(b, "prosupport", "-");
        set_s(b, "prokind", "f");
        set_b(b, "prosecdef", false);
        set_b(b, "proleakproof", false);
        set_b(b, "proisstrict", true);
        set_b(b, "proretset", false);
        set_s(b, "provolatile", "s");
        set_s(b, "proparallel", "s");
        set_i(b, "pronargs", f->min_args);
        set_i(b, "pronargdefaults", f->max_args - f->min_args);
        set_i(b, "prorettype", qr_sql_type_oid(f->ret));
        set_s(b, "proargtypes", "");
        set_s(b, "prosrc", f->name);
    }
    return QR_OK;
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

/* pg_get_indexdef(oid [, column, pretty]): the CREATE INDEX statement, or
 * with column > 0 that key column's name. */
static SqlValue index_def(SqlCtx *cx, int64_t oid, int64_t column)
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
            out = text_v(cx, column > 1 ? "" : column == 1 ? x[k].col : b);
            break;
        }
    }
    tables_free(&ts);
    return out;
}

/* quote_ident: double quotes unless the name is lowercase letters, digits
 * and underscores not starting with a digit (keywords are not checked). */
static SqlValue quote_ident(SqlCtx *cx, const char *s, size_t n)
{
    bool plain = n > 0 && !(s[0] >= '0' && s[0] <= '9');
    for (size_t i = 0; i < n && plain; i++)
        plain = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_';
    if (plain)
        return sqlv_text(s, n);
    char *o = qr_arena_alloc(cx->arena, 2 * n + 3);
    if (!o)
        return sqlv_null();
    size_t k = 0;
    o[k++] = '"';
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"')
            o[k++] = '"';
        o[k++] = s[i];
    }
    o[k++] = '"';
    o[k] = 0;
    return sqlv_text(o, k);
}

/* quote_literal: 'text' with quotes doubled; E'...' when it holds a
 * backslash (doubled too), as PostgreSQL writes it. */
static SqlValue quote_literal(SqlCtx *cx, const char *s, size_t n)
{
    bool bs = memchr(s, '\\', n) != NULL;
    char *o = qr_arena_alloc(cx->arena, 2 * n + 4);
    if (!o)
        return sqlv_null();
    size_t k = 0;
    if (bs)
        o[k++] = 'E';
    o[k++] = '\'';
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\'' || s[i] == '\\')
            o[k++] = s[i];
        o[k++] = s[i];
    }
    o[k++] = '\'';
    o[k] = 0;
    return sqlv_text(o, k);
}

/* pg_get_serial_sequence('table', 'column'): "public.<seq>" or NULL. */
static SqlValue serial_sequence(SqlCtx *cx, const SqlValue *table, const SqlValue *col)
{
    if (table->is_null || col->is_null || !sqlt_is_str(table->type) || !sqlt_is_str(col->type))
        return sqlv_null();
    char t[2 * QR_NAME_MAX + 8], c[QR_NAME_MAX + 1];
    snprintf(t, sizeof t, "%.*s", (int)table->u.s.n, table->u.s.s);
    snprintf(c, sizeof c, "%.*s", (int)col->u.s.n, col->u.s.s);
    const char *tn = !strncmp(t, "public.", 7) ? t + 7 : t;
    cJSON *meta = qr_name_valid(tn) ? sqlw_meta_load(cx, tn) : NULL;
    const char *seq = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(sqlw_meta_col(meta, c), "sequence"));
    char b[128];
    if (seq)
        snprintf(b, sizeof b, "public.%s", seq);
    cJSON_Delete(meta);
    return seq ? text_v(cx, b) : sqlv_null();
}

int sqlcat_func_call(SqlCtx *cx, const char *schema, const char *name, int n_args,
                     const SqlValue *args, SqlValue *out)
{
    (void)schema;
    const CatFunc *f = func_find(name, n_args);
    if (!f)
        return sql_err_at(cx, -1, QR_ENOTFOUND, "42883", "function %s does not exist", name);
    if (sqlseq_func_known(name))
        return sqlseq_func_call(cx, name, n_args, args, out);
    *out = sqlv_null();
    out->type = f->ret;
    int64_t a0 = n_args > 0 && !args[0].is_null && sqlt_is_int(args[0].type) ? args[0].u.i : 0;
    if (n_args > 0 && !args[0].is_null && sqlt_is_str(args[0].type) && strstr(name, "_size") &&
        strcmp(name, "pg_size_pretty") != 0) {
        /* pg_relation_size('t'): the literal is a regclass */
        SqlValue oid;
        int rc = sqlcat_reg_oid(cx, 'c', &args[0], -1, &oid);
        if (rc)
            return rc;
        a0 = oid.u.i;
    }
    if (!strcmp(name, "version")) {
        *out = text_v(cx, "PostgreSQL 15.0 (Quarry " QUARRY_VERSION
                          ") on x86_64-pc-linux-gnu, a search-first database");
    } else if (!strcmp(name, "current_database") || !strcmp(name, "current_catalog")) {
        *out = text_v(cx, "quarry");
    } else if (!strcmp(name, "current_schema")) {
        *out = text_v(cx, "public");
    } else if (!strcmp(name, "current_user") || !strcmp(name, "session_user") ||
               !strcmp(name, "user") || !strcmp(name, "pg_get_userbyid")) {
        *out = text_v(cx, cat_user(cx));
    } else if (!strcmp(name, "pg_backend_pid")) {
        *out = sqlv_int((int64_t)getpid());
    } else if (!strcmp(name, "quote_literal")) {
        if (!args[0].is_null) {
            SqlValue t;
            int rc = sqlv_cast(cx, &args[0], QR_SQL_TEXT, -1, &t);
            if (rc)
                return rc;
            *out = quote_literal(cx, t.u.s.s, t.u.s.n);
        }
    } else if (!strcmp(name, "quote_ident")) {
        if (!args[0].is_null && sqlt_is_str(args[0].type))
            *out = quote_ident(cx, args[0].u.s.s, args[0].u.s.n);
    } else if (!strcmp(name, "array_remove")) {
        /* arrays are their text form: parse, drop the element, print */
        SqlValue *el;
        uint64_t ne, k = 0;
        if (args[0].is_null)
            return QR_OK;
        int rc = sqlv_array_parse(cx, &args[0], &el, &ne);
        if (rc)
            return rc;
        for (uint64_t i = 0; i < ne; i++)
            if (args[1].is_null ? !el[i].is_null : el[i].is_null || sqlv_cmp(&el[i], &args[1]) != 0)
                el[k++] = el[i];
        if ((rc = sqlv_array_text(cx, el, k, out)))
            return rc;
    } else if (!strcmp(name, "current_schemas")) {
        bool implicit = n_args > 0 && !args[0].is_null && args[0].u.b;
        *out = text_v(cx, implicit ? "{pg_catalog,public}" : "{public}");
    } else if (!strcmp(name, "pg_get_function_result")) {
        for (int i = 0; i < N_CAT_FUNCS; i++)
            if (func_oid(&CAT_FUNCS[i]) == (uint32_t)a0)
                *out = text_v(cx, type_by_oid(qr_sql_type_oid(CAT_FUNCS[i].ret))
                                      ? type_by_oid(qr_sql_type_oid(CAT_FUNCS[i].ret))->sql
                                      : qr_sql_type_name(CAT_FUNCS[i].ret));
    } else if (!strcmp(name, "pg_get_function_arguments") ||
               !strcmp(name, "pg_get_function_identity_arguments")) {
        for (int i = 0; i < N_CAT_FUNCS; i++)
            if (func_oid(&CAT_FUNCS[i]) == (uint32_t)a0)
                *out = text_v(cx, "");
    } else if (!strcmp(name, "pg_get_serial_sequence")) {
        *out = serial_sequence(cx, &args[0], &args[1]);
    } else if (!strcmp(name, "pg_table_is_visible") || !strcmp(name, "pg_type_is_visible") ||
               !strcmp(name, "pg_function_is_visible") || !strncmp(name, "has_", 4)) {
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
        *out = index_def(cx, a0, n_args > 1 && !args[1].is_null ? args[1].u.i : 0);
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
            /* segment files and the WAL (which alone holds small recent
             * commits: their segments live in memory until flushed) */
            *out = sqlv_int((int64_t)(st.disk_bytes + st.wal_bytes));
        }
    } else if (!strcmp(name, "pg_database_size")) {
        CatTables ts;
        int64_t total = 0;
        if (tables_load(cx, &ts) == QR_OK)
            for (int i = 0; i < ts.n; i++) {
                QrTableStats st;
                qr_table_stats(ts.t[i], &st);
                total += (int64_t)(st.disk_bytes + st.wal_bytes);
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
        {"partclass", QR_SQL_OID}, {"partattrs", QR_SQL_INT2}, {"partcollation", QR_SQL_OID},
        {"i_indoption", QR_SQL_INT2}, /* JDBC getIndexInfo's alias of indoption */
    };
    for (size_t i = 0; i < sizeof A / sizeof *A; i++)
        if (!strcmp(A[i].col, column))
            return A[i].elem;
    QrSqlType t; /* a literal cast to an array type: "_oid" */
    if (column[0] == '_' && sqlt_from_name(column + 1, &t))
        return t;
    return QR_SQL_UNKNOWN;
}

/* The oid of a catalog relation by name (PostgreSQL's for the ones tools
 * compare classid / refclassid with), or its name by oid; 0 / false if none. */
static uint32_t catalog_rel_oid(const char *name, uint32_t oid, const char **name_out)
{
    static const struct {
        const char *name;
        uint32_t oid;
    } K[] = {{"pg_class", 1259},      {"pg_proc", 1255},       {"pg_type", 1247},
             {"pg_attribute", 1249},  {"pg_constraint", 2606}, {"pg_namespace", 2615},
             {"pg_database", 1262},   {"pg_index", 2610},      {"pg_attrdef", 2604},
             {"pg_trigger", 2620},    {"pg_rewrite", 2618},    {"pg_am", 2601},
             {"pg_description", 2609}, {"pg_depend", 2608},    {"pg_authid", 1260},
             {"pg_roles", 12001},     {"pg_collation", 3456},  {"pg_extension", 3079},
             {"pg_sequence", 2224},   {"pg_operator", 2617},   {"pg_language", 2612},
             {"pg_opclass", 2616},    {"pg_cast", 2605},       {"pg_tablespace", 1213},
             {"pg_policy", 3256},     {"pg_event_trigger", 3466}, {"pg_publication", 6104},
             {"pg_foreign_table", 3118}, {"pg_foreign_server", 1417},
             {"pg_foreign_data_wrapper", 2328}, {"pg_ts_config", 3602},
             {"pg_ts_dict", 3600},    {"pg_ts_parser", 3601},  {"pg_ts_template", 3764},
             {"pg_largeobject", 2613}, {"pg_statistic_ext", 3381}, {"pg_inherits", 2611},
             {"pg_user_mapping", 1418}, {"pg_conversion", 2607}, {"pg_aggregate", 2600},
             {"pg_enum", 3501},       {"pg_settings", 12002},  {"pg_subscription", 6100}};
    for (size_t i = 0; i < sizeof K / sizeof K[0]; i++)
        if (name ? !strcmp(name, K[i].name) : K[i].oid == oid) {
            if (name_out)
                *name_out = K[i].name;
            return K[i].oid;
        }
    for (int i = 0; i < N_CAT_RELS; i++) /* the others: a hash of the name */
        if (!strcmp(CAT_RELS[i].schema, "pg_catalog") &&
            (name ? !strcmp(name, CAT_RELS[i].name) : name_oid(CAT_RELS[i].name) == oid)) {
            if (name_out)
                *name_out = CAT_RELS[i].name;
            return name_oid(CAT_RELS[i].name);
        }
    return 0;
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
    char **seqs;
    int n_seqs;
    if (seq_list(qr_db_dir(cx->sess->db), &seqs, &n_seqs, NULL) == QR_OK) {
        for (int i = 0; i < n_seqs; i++) {
            uint32_t o = name_oid(seqs[i]);
            if (!found && (name ? !strcmp(name, seqs[i]) : o == (uint32_t)oid)) {
                *oid_out = o;
                *name_out = qr_arena_strndup(cx->arena, seqs[i], strlen(seqs[i]));
                found = true;
            }
            qr_free(seqs[i]);
        }
        qr_free(seqs);
        if (found)
            return true;
    }
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
    if (!strcmp(name, "-")) { /* no object */
        found = true;
    } else if (kind == 'p') {
        char fn[QR_NAME_MAX + 1];
        snprintf(fn, sizeof fn, "%.*s", (int)strcspn(name, "("), name);
        for (int i = 0; i < N_CAT_FUNCS && !found; i++)
            if (!strcmp(CAT_FUNCS[i].name, fn)) {
                oid = func_oid(&CAT_FUNCS[i]);
                found = true;
            }
    } else if (kind == 'r') {
        found = !strcmp(name, cat_user(cx));
        oid = OWNER_OID;
    } else if (kind == 'c' && (oid = catalog_rel_oid(name, 0, NULL)) != 0) {
        found = true;
    } else if (kind == 'c') {
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
    if (!found && (kind == 'p' || kind == 'r'))
        return sql_err_at(cx, loc, QR_ENOTFOUND, kind == 'p' ? "42883" : "42704",
                          kind == 'p' ? "function \"%s\" does not exist"
                                      : "role \"%s\" does not exist",
                          name);
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

int sqlcat_reg_proc(SqlCtx *cx, const SqlValue *in, int loc, SqlValue *out)
{
    if (in->is_null) {
        *out = sqlv_null();
        out->type = QR_SQL_TEXT;
        return QR_OK;
    }
    if (!sqlt_is_str(in->type)) {
        int rc = sqlcat_reg_name(cx, 'p', in->u.i, out);
        out->type = QR_SQL_TEXT;
        return rc;
    }
    char n[2 * QR_NAME_MAX + 16];
    snprintf(n, sizeof n, "%.*s", (int)in->u.s.n, in->u.s.s);
    const char *name = n;
    if (!strncmp(name, "pg_catalog.", 11))
        name += 11;
    size_t len = strcspn(name, "(");
    bool found = !strcmp(name, "-") || !strncmp(name, "array_in", len) || !strncmp(name, "array_out", len);
    for (int i = 0; i < N_CAT_FUNCS && !found; i++)
        found = strlen(CAT_FUNCS[i].name) == len && !strncmp(CAT_FUNCS[i].name, name, len);
    for (int i = 0; i < N_PG_TYPES && !found; i++) {
        char io[64];
        type_io_name(&PG_TYPES[i], "in", io, sizeof io);
        found = strlen(io) == len && !strncmp(io, name, len);
        type_io_name(&PG_TYPES[i], "out", io, sizeof io);
        found = found || (strlen(io) == len && !strncmp(io, name, len));
    }
    if (!found)
        return sql_err_at(cx, loc, QR_ENOTFOUND, "42883", "function \"%.*s\" does not exist", (int)len, name);
    char *s = qr_arena_strndup(cx->arena, name, len);
    if (!s)
        return sql_err_at(cx, loc, QR_ENOMEM, NULL, "out of memory");
    *out = sqlv_text(s, len);
    out->type = QR_SQL_TEXT;
    return QR_OK;
}

int sqlcat_reg_name(SqlCtx *cx, char kind, int64_t oid, SqlValue *out)
{
    char num[24];
    snprintf(num, sizeof num, "%lld", (long long)oid);
    const char *name = NULL;
    if (oid == 0) {
        name = "-";
    } else if (kind == 'p') {
        for (int i = 0; i < N_CAT_FUNCS && !name; i++)
            if (func_oid(&CAT_FUNCS[i]) == (uint32_t)oid)
                name = CAT_FUNCS[i].name;
    } else if (kind == 'r') {
        name = oid == OWNER_OID ? cat_user(cx) : NULL;
    } else if (kind == 'c' && catalog_rel_oid(NULL, (uint32_t)oid, &name)) {
        /* a catalog relation */
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
