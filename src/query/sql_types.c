/*
 * sql_types.c — the SQL type registry: every type Quarry knows with its
 * PostgreSQL OID, pg_type name and length, its array type's OID, its
 * category and SQL spelling (format_type); the type classes operators
 * dispatch on; names from the parse tree to types; and the pg_type rows
 * the catalog shows for them (sql_catalog.c asks sqlt_catalog_*).
 *
 * Layer: query/.  Calls nothing but libc.
 *
 * An array type is QR_SQL_ARRAY | elem (sql.h): its OID, "_elem" name and
 * "elem[]" spelling come from the element's row here, so every scalar type
 * has its array type, as in PostgreSQL.
 */
#include "query/sql_int.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const SqlTypeInfo TYPES[QR_SQL_TYPE_COUNT] = {
    [QR_SQL_UNKNOWN] = {25, "text", -1, 1009, 'S', "text"},
    [QR_SQL_BOOL] = {16, "bool", 1, 1000, 'B', "boolean"},
    [QR_SQL_INT2] = {21, "int2", 2, 1005, 'N', "smallint"},
    [QR_SQL_INT4] = {23, "int4", 4, 1007, 'N', "integer"},
    [QR_SQL_INT8] = {20, "int8", 8, 1016, 'N', "bigint"},
    [QR_SQL_FLOAT4] = {700, "float4", 4, 1021, 'N', "real"},
    [QR_SQL_FLOAT8] = {701, "float8", 8, 1022, 'N', "double precision"},
    [QR_SQL_NUMERIC] = {1700, "numeric", -1, 1231, 'N', "numeric"},
    [QR_SQL_TEXT] = {25, "text", -1, 1009, 'S', "text"},
    [QR_SQL_VARCHAR] = {1043, "varchar", -1, 1015, 'S', "character varying"},
    [QR_SQL_NAME] = {19, "name", 64, 1003, 'S', "name"},
    [QR_SQL_CHAR] = {18, "char", 1, 1002, 'Z', "\"char\""},
    [QR_SQL_OID] = {26, "oid", 4, 1028, 'N', "oid"},
    [QR_SQL_TIMESTAMP] = {1114, "timestamp", 8, 1115, 'D', "timestamp without time zone"},
    [QR_SQL_TIMESTAMPTZ] = {1184, "timestamptz", 8, 1185, 'D', "timestamp with time zone"},
    [QR_SQL_DATE] = {1082, "date", 4, 1182, 'D', "date"},
    [QR_SQL_TIME] = {1083, "time", 8, 1183, 'D', "time without time zone"},
    [QR_SQL_INTERVAL] = {1186, "interval", 16, 1187, 'T', "interval"},
    [QR_SQL_UUID] = {2950, "uuid", 16, 2951, 'U', "uuid"},
    [QR_SQL_BYTEA] = {17, "bytea", -1, 1001, 'U', "bytea"},
    [QR_SQL_JSON] = {114, "json", -1, 199, 'U', "json"},
    [QR_SQL_JSONB] = {3802, "jsonb", -1, 3807, 'U', "jsonb"},
};

/* Is t a type of the registry (a scalar, or an array of one)? */
static bool known(QrSqlType t)
{
    QrSqlType e = QR_SQL_ELEM(t);
    return (unsigned)e < QR_SQL_TYPE_COUNT && (!QR_SQL_IS_ARRAY(t) || e != QR_SQL_UNKNOWN);
}

const SqlTypeInfo *sqlt_info(QrSqlType t)
{
    return known(QR_SQL_ELEM(t)) ? &TYPES[QR_SQL_ELEM(t)] : &TYPES[QR_SQL_TEXT];
}

uint32_t qr_sql_type_oid(QrSqlType t)
{
    if (!known(t))
        return 25;
    return QR_SQL_IS_ARRAY(t) ? TYPES[QR_SQL_ELEM(t)].array_oid : TYPES[t].oid;
}

/* "int4[]" for arrays: the name error messages and HTTP results show
 * (pg_type's own name for it, "_int4", is sqlt_typname's). */
const char *qr_sql_type_name(QrSqlType t)
{
    static const char *const ARR[QR_SQL_TYPE_COUNT] = {
        [QR_SQL_UNKNOWN] = "text[]", [QR_SQL_BOOL] = "bool[]", [QR_SQL_INT2] = "int2[]",
        [QR_SQL_INT4] = "int4[]", [QR_SQL_INT8] = "int8[]", [QR_SQL_FLOAT4] = "float4[]",
        [QR_SQL_FLOAT8] = "float8[]", [QR_SQL_NUMERIC] = "numeric[]", [QR_SQL_TEXT] = "text[]",
        [QR_SQL_VARCHAR] = "varchar[]", [QR_SQL_NAME] = "name[]", [QR_SQL_CHAR] = "char[]",
        [QR_SQL_OID] = "oid[]", [QR_SQL_TIMESTAMP] = "timestamp[]",
        [QR_SQL_TIMESTAMPTZ] = "timestamptz[]", [QR_SQL_DATE] = "date[]",
        [QR_SQL_TIME] = "time[]", [QR_SQL_INTERVAL] = "interval[]", [QR_SQL_UUID] = "uuid[]",
        [QR_SQL_BYTEA] = "bytea[]", [QR_SQL_JSON] = "json[]", [QR_SQL_JSONB] = "jsonb[]",
    };
    if (!known(t))
        return "text";
    return QR_SQL_IS_ARRAY(t) ? ARR[QR_SQL_ELEM(t)] : TYPES[t].name;
}

const char *sqlt_typname(QrSqlType t)
{
    static const char *const ARR[QR_SQL_TYPE_COUNT] = {
        [QR_SQL_UNKNOWN] = "_text", [QR_SQL_BOOL] = "_bool", [QR_SQL_INT2] = "_int2",
        [QR_SQL_INT4] = "_int4", [QR_SQL_INT8] = "_int8", [QR_SQL_FLOAT4] = "_float4",
        [QR_SQL_FLOAT8] = "_float8", [QR_SQL_NUMERIC] = "_numeric", [QR_SQL_TEXT] = "_text",
        [QR_SQL_VARCHAR] = "_varchar", [QR_SQL_NAME] = "_name", [QR_SQL_CHAR] = "_char",
        [QR_SQL_OID] = "_oid", [QR_SQL_TIMESTAMP] = "_timestamp",
        [QR_SQL_TIMESTAMPTZ] = "_timestamptz", [QR_SQL_DATE] = "_date", [QR_SQL_TIME] = "_time",
        [QR_SQL_INTERVAL] = "_interval", [QR_SQL_UUID] = "_uuid", [QR_SQL_BYTEA] = "_bytea",
        [QR_SQL_JSON] = "_json", [QR_SQL_JSONB] = "_jsonb",
    };
    if (!known(t))
        return "text";
    return QR_SQL_IS_ARRAY(t) ? ARR[QR_SQL_ELEM(t)] : TYPES[t].name;
}

int16_t qr_sql_type_len(QrSqlType t)
{
    if (!known(t) || QR_SQL_IS_ARRAY(t))
        return -1;
    return TYPES[t].len;
}

bool qr_sql_type_from_oid(uint32_t oid, QrSqlType *out)
{
    for (int t = 1; t < QR_SQL_TYPE_COUNT; t++) {
        if (TYPES[t].oid == oid) {
            *out = (QrSqlType)t;
            return true;
        }
        if (TYPES[t].array_oid == oid) {
            *out = QR_SQL_ARRAY_OF((QrSqlType)t);
            return true;
        }
    }
    switch (oid) {
    case 705:  /* unknown */
        *out = QR_SQL_TEXT;
        return true;
    case 1042: /* bpchar: Quarry's strings do not pad */
        *out = QR_SQL_VARCHAR;
        return true;
    case 1014: /* bpchar[] */
        *out = QR_SQL_ARRAY_OF(QR_SQL_VARCHAR);
        return true;
    case 22:   /* int2vector, oidvector: catalog arrays */
        *out = QR_SQL_ARRAY_OF(QR_SQL_INT2);
        return true;
    case 30:
        *out = QR_SQL_ARRAY_OF(QR_SQL_OID);
        return true;
    }
    return false;
}

/* ---- classes ---- */

bool sqlt_is_int(QrSqlType t)
{
    return t == QR_SQL_INT2 || t == QR_SQL_INT4 || t == QR_SQL_INT8 || t == QR_SQL_OID;
}
bool sqlt_is_float(QrSqlType t)
{
    return t == QR_SQL_FLOAT4 || t == QR_SQL_FLOAT8 || t == QR_SQL_NUMERIC;
}
bool sqlt_is_num(QrSqlType t) { return sqlt_is_int(t) || sqlt_is_float(t); }

QrSqlType sqlt_num_common(QrSqlType a, QrSqlType b)
{
    if (a == QR_SQL_FLOAT4 || a == QR_SQL_FLOAT8 || b == QR_SQL_FLOAT4 || b == QR_SQL_FLOAT8)
        return QR_SQL_FLOAT8;
    return a == QR_SQL_NUMERIC || b == QR_SQL_NUMERIC ? QR_SQL_NUMERIC : QR_SQL_INT8;
}
bool sqlt_is_str(QrSqlType t)
{
    return t == QR_SQL_TEXT || t == QR_SQL_VARCHAR || t == QR_SQL_NAME || t == QR_SQL_CHAR ||
           t == QR_SQL_UNKNOWN;
}
bool sqlt_is_ts(QrSqlType t) { return t == QR_SQL_TIMESTAMP || t == QR_SQL_TIMESTAMPTZ; }
bool sqlt_is_datetime(QrSqlType t) { return sqlt_is_ts(t) || t == QR_SQL_DATE; }
bool sqlt_has_bytes(QrSqlType t)
{
    return sqlt_is_str(t) || t == QR_SQL_NUMERIC || t == QR_SQL_BYTEA || t == QR_SQL_JSON ||
           t == QR_SQL_JSONB || QR_SQL_IS_ARRAY(t);
}

/* ---- names ---- */

static const struct {
    const char *name;
    QrSqlType t;
} TYPE_NAMES[] = {
    {"bool", QR_SQL_BOOL},         {"boolean", QR_SQL_BOOL},
    {"int2", QR_SQL_INT2},         {"smallint", QR_SQL_INT2},
    {"int4", QR_SQL_INT4},         {"int", QR_SQL_INT4},
    {"integer", QR_SQL_INT4},      {"int8", QR_SQL_INT8},
    {"bigint", QR_SQL_INT8},       {"float4", QR_SQL_FLOAT4},
    {"real", QR_SQL_FLOAT4},       {"float8", QR_SQL_FLOAT8},
    {"float", QR_SQL_FLOAT8},      {"double precision", QR_SQL_FLOAT8},
    {"numeric", QR_SQL_NUMERIC},   {"decimal", QR_SQL_NUMERIC},
    {"text", QR_SQL_TEXT},         {"varchar", QR_SQL_VARCHAR},
    {"character varying", QR_SQL_VARCHAR},
    {"bpchar", QR_SQL_VARCHAR},    {"name", QR_SQL_NAME},
    {"char", QR_SQL_CHAR},         {"oid", QR_SQL_OID},
    {"regclass", QR_SQL_OID},      {"regtype", QR_SQL_OID},
    {"int2vector", QR_SQL_ARRAY_OF(QR_SQL_INT2)},
    {"oidvector", QR_SQL_ARRAY_OF(QR_SQL_OID)},
    {"timestamp", QR_SQL_TIMESTAMP}, {"timestamptz", QR_SQL_TIMESTAMPTZ},
    {"timestamp without time zone", QR_SQL_TIMESTAMP},
    {"timestamp with time zone", QR_SQL_TIMESTAMPTZ},
    {"date", QR_SQL_DATE},         {"time", QR_SQL_TIME},
    {"time without time zone", QR_SQL_TIME},
    {"interval", QR_SQL_INTERVAL}, {"uuid", QR_SQL_UUID},
    {"bytea", QR_SQL_BYTEA},       {"json", QR_SQL_JSON},
    {"jsonb", QR_SQL_JSONB},
};

bool sqlt_from_name(const char *name, QrSqlType *out)
{
    for (size_t i = 0; i < sizeof TYPE_NAMES / sizeof *TYPE_NAMES; i++)
        if (strcasecmp(TYPE_NAMES[i].name, name) == 0) {
            *out = TYPE_NAMES[i].t;
            return true;
        }
    /* "_int4": pg_type's name of int4[] */
    if (name[0] == '_' && name[1]) {
        QrSqlType e;
        if (sqlt_from_name(name + 1, &e) && !QR_SQL_IS_ARRAY(e)) {
            *out = QR_SQL_ARRAY_OF(e);
            return true;
        }
    }
    return false;
}

/* ---- pg_type rows ---- */

int sqlt_catalog_n(void) { return 2 * (QR_SQL_TYPE_COUNT - 1); }

/* Row i: the scalar types (text once), then their array types. */
bool sqlt_catalog_row(int i, SqlTypeRow *out)
{
    int n_scalar = QR_SQL_TYPE_COUNT - 1; /* without UNKNOWN */
    memset(out, 0, sizeof *out);
    if (i < 0 || i >= sqlt_catalog_n())
        return false;
    if (i < n_scalar) {
        QrSqlType t = (QrSqlType)(i + 1);
        const SqlTypeInfo *ti = &TYPES[t];
        out->type = t;
        out->oid = ti->oid;
        out->name = ti->name;
        out->len = ti->len;
        out->category = ti->category;
        out->sql = ti->sql;
        out->elem = 0;
        out->array = ti->array_oid;
        return true;
    }
    static const char *const SQL[QR_SQL_TYPE_COUNT] = {
        [QR_SQL_BOOL] = "boolean[]", [QR_SQL_INT2] = "smallint[]", [QR_SQL_INT4] = "integer[]",
        [QR_SQL_INT8] = "bigint[]", [QR_SQL_FLOAT4] = "real[]",
        [QR_SQL_FLOAT8] = "double precision[]", [QR_SQL_NUMERIC] = "numeric[]",
        [QR_SQL_TEXT] = "text[]", [QR_SQL_VARCHAR] = "character varying[]",
        [QR_SQL_NAME] = "name[]", [QR_SQL_CHAR] = "\"char\"[]", [QR_SQL_OID] = "oid[]",
        [QR_SQL_TIMESTAMP] = "timestamp without time zone[]",
        [QR_SQL_TIMESTAMPTZ] = "timestamp with time zone[]", [QR_SQL_DATE] = "date[]",
        [QR_SQL_TIME] = "time without time zone[]", [QR_SQL_INTERVAL] = "interval[]",
        [QR_SQL_UUID] = "uuid[]", [QR_SQL_BYTEA] = "bytea[]", [QR_SQL_JSON] = "json[]",
        [QR_SQL_JSONB] = "jsonb[]",
    };
    QrSqlType t = (QrSqlType)(i - n_scalar + 1);
    const SqlTypeInfo *ti = &TYPES[t];
    out->type = QR_SQL_ARRAY_OF(t);
    out->oid = ti->array_oid;
    out->name = sqlt_typname(out->type);
    out->len = -1;
    out->category = 'A';
    out->elem = ti->oid;
    out->array = 0;
    out->sql = SQL[t];
    return true;
}

uint32_t sqlt_array_oid(uint32_t elem_oid)
{
    for (int t = 1; t < QR_SQL_TYPE_COUNT; t++)
        if (TYPES[t].oid == elem_oid)
            return TYPES[t].array_oid;
    return elem_oid == 1042 ? 1014 : 0;
}

/* ---- storage of declared columns ---- */

bool sqlt_storage(const char *name, bool array, QrFieldType *ft, const char **pg, bool *doc_only)
{
    QrSqlType t;
    if (!sqlt_from_name(name, &t))
        return false;
    if (array && !QR_SQL_IS_ARRAY(t))
        t = QR_SQL_ARRAY_OF(t);
    /* arrays live in the document as their text form: no column or index
     * orders or compares them the way SQL does */
    if (QR_SQL_IS_ARRAY(t) || t == QR_SQL_TIME || t == QR_SQL_INTERVAL || t == QR_SQL_UUID ||
        t == QR_SQL_BYTEA || t == QR_SQL_JSON || t == QR_SQL_JSONB) {
        *ft = QR_FT_TEXT;
        *pg = sqlt_typname(t);
        *doc_only = true;
        return true;
    }
    return false;
}
