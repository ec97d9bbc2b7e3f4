/*
 * sql_dml.c — INSERT, UPDATE, DELETE and the value coercion they share
 * with COPY: SQL values become the JSON documents Quarry stores, and
 * writes go through the session's write buffer (sql_txn.c) so that a
 * transaction block applies them at COMMIT.
 *
 * Layer: query/.  Calls quarry.h, the SQL internals (sql_int.h), cJSON.
 */
#include "query/sql_w.h"
#include "query/sql.h"
#include "store/decimal.h"
#include "store/mem.h"

#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- value coercion ---- */

static bool v_is_text(const QrSqlValue *v)
{
    switch (v->type) {
    case QR_SQL_UNKNOWN:
    case QR_SQL_TEXT:
    case QR_SQL_VARCHAR:
    case QR_SQL_NAME:
    case QR_SQL_CHAR:
        return true;
    default:
        return false;
    }
}

static bool v_is_int(const QrSqlValue *v)
{
    return v->type == QR_SQL_INT2 || v->type == QR_SQL_INT4 || v->type == QR_SQL_INT8 ||
           v->type == QR_SQL_OID;
}

/* The bytes of a text value without surrounding blanks, into tmp. */
static const char *trimmed(const QrSqlValue *v, char *tmp, size_t tmp_len)
{
    const char *s = v->u.s.s;
    size_t n = v->u.s.n;
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (n >= tmp_len)
        n = tmp_len - 1;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    return tmp;
}

static int bad_text(const char *type, const QrSqlValue *v, const char *col, QrError *err)
{
    qr_error_set(err, QR_ETYPE, "invalid input syntax for type %s: \"%.*s\"", type,
                 (int)(v->u.s.n > 80 ? 80 : v->u.s.n), v->u.s.s);
    qr_error_detail(err, "column \"%s\"", col);
    qr_error_set_sqlstate(err, "22P02");
    return QR_ETYPE;
}

static int mismatch(const char *type, const QrSqlValue *v, const char *col, QrError *err)
{
    qr_error_set(err, QR_ETYPE, "column \"%s\" is of type %s but expression is of type %s", col,
                 type, qr_sql_type_name(v->type));
    qr_error_hint(err, "rewrite or cast the expression");
    qr_error_set_sqlstate(err, "42804");
    return QR_ETYPE;
}

static cJSON *raw_int(int64_t i)
{
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%lld", (long long)i);
    return cJSON_CreateRaw(tmp);
}

static int to_int(const char *col, const QrSqlValue *v, cJSON **out, QrError *err)
{
    int64_t i;
    if (v_is_int(v)) {
        i = v->u.i;
    } else if (v->type == QR_SQL_FLOAT4 || v->type == QR_SQL_FLOAT8 ||
               v->type == QR_SQL_NUMERIC) {
        double d;
        if (v->type == QR_SQL_NUMERIC) {
            char tmp[128];
            char *end;
            d = strtod(trimmed(v, tmp, sizeof tmp), &end);
        } else {
            d = v->u.f;
        }
        d = round(d); /* PostgreSQL rounds half away from zero */
        if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) {
            qr_error_set(err, QR_EINVAL, "bigint out of range");
            qr_error_detail(err, "column \"%s\"", col);
            qr_error_set_sqlstate(err, "22003");
            return QR_EINVAL;
        }
        i = (int64_t)d;
    } else if (v_is_text(v)) {
        char tmp[64];
        const char *s = trimmed(v, tmp, sizeof tmp);
        char *end;
        errno = 0;
        long long ll = strtoll(s, &end, 10);
        if (!*s || *end || v->u.s.n >= sizeof tmp)
            return bad_text("bigint", v, col, err);
        if (errno == ERANGE) {
            qr_error_set(err, QR_EINVAL, "value \"%s\" is out of range for type bigint", s);
            qr_error_set_sqlstate(err, "22003");
            return QR_EINVAL;
        }
        i = ll;
    } else {
        return mismatch("bigint", v, col, err);
    }
    *out = raw_int(i);
    return *out ? QR_OK : qr_error_set(err, QR_ENOMEM, "out of memory");
}

static int to_float(const char *col, const QrSqlValue *v, cJSON **out, QrError *err)
{
    double d;
    if (v_is_int(v)) {
        d = (double)v->u.i;
    } else if (v->type == QR_SQL_FLOAT4 || v->type == QR_SQL_FLOAT8) {
        d = v->u.f;
    } else if (v_is_text(v) || v->type == QR_SQL_NUMERIC) {
        char tmp[128];
        const char *s = trimmed(v, tmp, sizeof tmp);
        char *end;
        d = strtod(s, &end);
        if (!*s || *end || v->u.s.n >= sizeof tmp)
            return bad_text("double precision", v, col, err);
    } else {
        return mismatch("double precision", v, col, err);
    }
    if (!isfinite(d)) {
        qr_error_set(err, QR_EUNSUPPORTED, "column \"%s\" cannot store %s", col,
                     isnan(d) ? "NaN" : "Infinity");
        qr_error_detail(err, "documents are JSON, which has no NaN or infinite numbers");
        return QR_EUNSUPPORTED;
    }
    *out = cJSON_CreateNumber(d);
    return *out ? QR_OK : qr_error_set(err, QR_ENOMEM, "out of memory");
}

static int to_bool(const char *col, const QrSqlValue *v, cJSON **out, QrError *err)
{
    bool b;
    if (v->type == QR_SQL_BOOL) {
        b = v->u.b;
    } else if (v_is_text(v)) {
        static const char *const yes[] = {"t", "true", "y", "yes", "on", "1"};
        static const char *const no[] = {"f", "false", "n", "no", "off", "0"};
        char tmp[16];
        const char *s = trimmed(v, tmp, sizeof tmp);
        int found = -1;
        for (size_t k = 0; k < sizeof yes / sizeof yes[0] && found < 0; k++) {
            if (!strcasecmp(s, yes[k]))
                found = 1;
            else if (!strcasecmp(s, no[k]))
                found = 0;
        }
        if (found < 0 || v->u.s.n >= sizeof tmp)
            return bad_text("boolean", v, col, err);
        b = found;
    } else {
        return mismatch("boolean", v, col, err);
    }
    *out = cJSON_CreateBool(b);
    return *out ? QR_OK : qr_error_set(err, QR_ENOMEM, "out of memory");
}

static int to_timestamp(const char *col, const QrSqlValue *v, cJSON **out, QrError *err)
{
    int64_t us;
    if (sqlt_is_datetime(v->type)) {
        us = v->u.i;
    } else if (v_is_text(v)) {
        char tmp[80];
        const char *s = trimmed(v, tmp, sizeof tmp);
        size_t n = strlen(s);
        /* PostgreSQL prints timestamptz with "+00"; ISO 8601 wants "+00:00" */
        char fixed[88];
        if (n > 3 && (s[n - 3] == '+' || s[n - 3] == '-') && isdigit((unsigned char)s[n - 2]) &&
            isdigit((unsigned char)s[n - 1]) && strchr(s, ':')) {
            snprintf(fixed, sizeof fixed, "%s:00", s);
            s = fixed;
            n += 3;
        }
        if (v->u.s.n >= sizeof tmp || !qr_parse_timestamp(s, n, &us))
            return bad_text("timestamp with time zone", v, col, err);
    } else {
        return mismatch("timestamp with time zone", v, col, err);
    }
    char buf[48];
    qr_format_timestamp(us, buf, sizeof buf);
    *out = cJSON_CreateString(buf);
    return *out ? QR_OK : qr_error_set(err, QR_ENOMEM, "out of memory");
}

static int to_text(const QrSqlValue *v, cJSON **out, QrError *err)
{
    QrBuf b;
    qr_buf_init(&b);
    if (v_is_text(v) || v->type == QR_SQL_NUMERIC)
        qr_buf_append(&b, v->u.s.s, v->u.s.n);
    else
        qr_sql_value_text(v, &b);
    qr_buf_putc(&b, 0);
    *out = qr_buf_ok(&b) ? cJSON_CreateString((const char *)b.data) : NULL;
    qr_buf_free(&b);
    return *out ? QR_OK : qr_error_set(err, QR_ENOMEM, "out of memory");
}

/* A numeric field keeps its canonical decimal text as a JSON string: exact,
 * with its scale, through every parse and print of the document (cJSON
 * numbers are doubles). */
static int to_numeric(const char *col, const QrSqlValue *v, cJSON **out, QrError *err)
{
    char buf[DEC_TEXT_MAX];
    int n;
    if (v_is_int(v)) {
        n = snprintf(buf, sizeof buf, "%lld", (long long)v->u.i);
    } else if (v->type == QR_SQL_FLOAT4 || v->type == QR_SQL_FLOAT8) {
        n = dec_from_double(v->u.f, buf);
    } else if (v_is_text(v) || v->type == QR_SQL_NUMERIC) {
        n = dec_canon(v->u.s.s, v->u.s.n, buf, sizeof buf);
        if (n < 0 && v->type == QR_SQL_NUMERIC) {
            qr_error_set(err, QR_EINVAL, "numeric value of %zu characters is too long to store",
                         v->u.s.n);
            qr_error_detail(err, "column \"%s\" keeps at most %d characters", col,
                            DEC_TEXT_MAX - 1);
            qr_error_set_sqlstate(err, "22003");
            return QR_EINVAL;
        }
        if (n < 0)
            return bad_text("numeric", v, col, err);
    } else {
        return mismatch("numeric", v, col, err);
    }
    *out = n >= 0 ? cJSON_CreateString(buf) : NULL;
    return *out ? QR_OK : qr_error_set(err, QR_ENOMEM, "out of memory");
}

int sqlw_value_to_cjson(QrFieldType t, const char *col, const QrSqlValue *v, cJSON **out,
                        QrError *err)
{
    *out = NULL;
    if (v->is_null) {
        *out = cJSON_CreateNull();
        return *out ? QR_OK : qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    switch (t) {
    case QR_FT_INT: return to_int(col, v, out, err);
    case QR_FT_FLOAT: return to_float(col, v, out, err);
    case QR_FT_BOOL: return to_bool(col, v, out, err);
    case QR_FT_TIMESTAMP: return to_timestamp(col, v, out, err);
    case QR_FT_NUMERIC: return to_numeric(col, v, out, err);
    case QR_FT_TEXT:
    case QR_FT_KEYWORD: return to_text(v, out, err);
    }
    return qr_error_set(err, QR_EINTERNAL, "unknown field type %d", (int)t);
}

/* ---- keys and rows ---- */

/* The primary key of a row as JSON text (arena).  NULL keys are 23502. */
static int key_json(SqlCtx *cx, QrSqlType pk_type, const char *pk, const SqlValue *v,
                    char **out)
{
    if (v->is_null) {
        sql_err_at(cx, -1, QR_ECONSTRAINT, "23502",
                   "null value in column \"%s\" violates not-null constraint", pk);
        qr_error_detail(cx->err, "the primary key is the document id");
        return QR_ECONSTRAINT;
    }
    bool as_int = pk_type == QR_SQL_INT8 ||
                  (pk_type == QR_SQL_UNKNOWN && (v_is_int(v) || v->type == QR_SQL_FLOAT8));
    cJSON *j = NULL;
    int rc = sqlw_value_to_cjson(as_int ? QR_FT_INT : QR_FT_KEYWORD, pk, v, &j, cx->err);
    if (rc)
        return rc;
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!text)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    *out = qr_arena_strndup(cx->arena, text, strlen(text));
    cJSON_free(text);
    return *out ? QR_OK : qr_error_set(cx->err, QR_ENOMEM, "out of memory");
}

/* A stored JSON value as an SQL value of the column's type (arena). */
static int json_to_value(SqlCtx *cx, const cJSON *j, QrSqlType type, SqlValue *out)
{
    *out = sqlv_null();
    if (!j || cJSON_IsNull(j))
        return QR_OK;
    if (cJSON_IsBool(j)) {
        *out = sqlv_bool(cJSON_IsTrue(j));
    } else if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (sqlt_is_int(type) || (type == QR_SQL_UNKNOWN && d == (double)(int64_t)d)) {
            *out = sqlv_int((int64_t)d);
        } else if (sqlt_is_ts(type)) {
            out->type = type;
            out->is_null = false;
            out->u.i = (int64_t)(d * 1e6);
        } else {
            *out = sqlv_float(d);
        }
    } else if (cJSON_IsString(j)) {
        size_t n = strlen(j->valuestring);
        int64_t us;
        if (sqlt_is_ts(type) && qr_parse_timestamp(j->valuestring, n, &us)) {
            out->type = type;
            out->is_null = false;
            out->u.i = us;
        } else {
            char *s = qr_arena_strndup(cx->arena, j->valuestring, n);
            if (!s)
                return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
            *out = sqlv_text(s, n);
        }
    } else {
        /* arrays of strings (multi-valued text) read as their JSON text */
        char *text = cJSON_PrintUnformatted(j);
        char *s = text ? qr_arena_strndup(cx->arena, text, strlen(text)) : NULL;
        cJSON_free(text);
        if (!s)
            return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
        *out = sqlv_text(s, strlen(s));
    }
    if (!out->is_null && type != QR_SQL_UNKNOWN && out->type != type &&
        !(sqlt_is_str(type) && sqlt_is_str(out->type))) {
        SqlValue in = *out;
        return sqlv_cast(cx, &in, type, -1, out);
    }
    return QR_OK;
}

/* A document as a row of the table scope. */
static int doc_to_row(SqlCtx *cx, const SqlScope *sc, const QrSchema *s, const cJSON *doc,
                      SqlValue *row)
{
    for (int i = 0; i < sc->n; i++) {
        const SqlCol *c = &sc->cols[i];
        const cJSON *j = NULL;
        if (c->field == -1)
            j = cJSON_GetObjectItemCaseSensitive(doc, s->primary_key);
        else if (c->field >= 0 && c->field < s->n_fields)
            j = cJSON_GetObjectItemCaseSensitive(doc, s->fields[c->field].name);
        int rc = json_to_value(cx, j, c->type, &row[i]);
        if (rc)
            return rc;
        if (c->field == -3)
            row[i] = sqlv_float(0);
    }
    return QR_OK;
}

static int pk_col(const SqlScope *sc)
{
    for (int i = 0; i < sc->n; i++)
        if (sc->cols[i].field == -1)
            return i;
    return -1;
}

/* varchar(n) holds at most n characters: a longer string is 22001, unless
 * what is past the n-th character is spaces, which are cut off (PostgreSQL's
 * rule for assignments). */
static int varchar_fit(SqlCtx *cx, const SqlCol *c, cJSON *j)
{
    if (c->type != QR_SQL_VARCHAR || c->typmod <= 4 || !cJSON_IsString(j))
        return QR_OK;
    int n = c->typmod - 4, chars = 0;
    char *p = j->valuestring, *cut = NULL;
    for (; *p; p++) {
        if (((unsigned char)*p & 0xC0) == 0x80)
            continue; /* a UTF-8 continuation byte */
        if (chars++ == n)
            cut = p;
        if (cut && *p != ' ')
            return sql_err_at(cx, -1, QR_EINVAL, "22001",
                              "value too long for type character varying(%d)", n);
    }
    if (cut)
        *cut = 0;
    return QR_OK;
}

/* Set a field of a document from a value (NULL removes it). */
static int doc_set(SqlCtx *cx, cJSON *doc, const QrSchema *s, const SqlCol *c,
                   QrSqlType pk_type, const SqlValue *v)
{
    cJSON *j = NULL;
    int rc;
    const char *name = c->field == -1 ? s->primary_key : s->fields[c->field].name;
    if (c->field == -1) {
        char *k;
        if ((rc = key_json(cx, pk_type, s->primary_key, v, &k)) != QR_OK)
            return rc;
        j = cJSON_Parse(k);
    } else if (s->fields[c->field].multi && !v->is_null) {
        /* a multi-valued keyword takes an array ('{a,b}', ARRAY['a','b']) */
        SqlValue *el;
        uint64_t n;
        if ((rc = sqlv_array_parse(cx, v, &el, &n)) != QR_OK)
            return rc;
        if (!(j = cJSON_CreateArray()))
            return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
        for (uint64_t i = 0; i < n; i++) {
            if (el[i].is_null) {
                cJSON_Delete(j);
                return sql_err_at(cx, -1, QR_ECONSTRAINT, "22004",
                                  "multi-valued keyword column \"%s\" holds no NULL elements",
                                  name);
            }
            char *z = qr_arena_strndup(cx->arena, el[i].u.s.s, el[i].u.s.n);
            cJSON *e = z ? cJSON_CreateString(z) : NULL;
            if (!e) {
                cJSON_Delete(j);
                return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
            }
            cJSON_AddItemToArray(j, e);
        }
    } else {
        /* types kept in the document as their text (arrays...): checked
         * and normalized by a cast to the column's type first */
        SqlValue cv;
        bool checked = QR_SQL_IS_ARRAY(c->type) || c->type == QR_SQL_DATE ||
                       c->type == QR_SQL_TIME || c->type == QR_SQL_INTERVAL ||
                       c->type == QR_SQL_UUID || c->type == QR_SQL_BYTEA ||
                       c->type == QR_SQL_JSON || c->type == QR_SQL_JSONB;
        if (!v->is_null && checked && v->type != c->type) {
            if ((rc = sqlv_cast(cx, v, c->type, -1, &cv)) != QR_OK)
                return rc;
            v = &cv;
        }
        if (!v->is_null && c->type == QR_SQL_NUMERIC) { /* numeric input rules, numeric(p, s) */
            if ((rc = sqlv_cast(cx, v, QR_SQL_NUMERIC, -1, &cv)) != QR_OK ||
                (c->typmod >= 4 && (rc = sqln_typmod(cx, &cv, c->typmod, -1, &cv)) != QR_OK))
                return rc;
            v = &cv;
        }
        if ((rc = sqlw_value_to_cjson(s->fields[c->field].type, name, v, &j, cx->err)) != QR_OK)
            return rc;
    }
    if (!j)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    if ((rc = varchar_fit(cx, c, j)) != QR_OK) {
        cJSON_Delete(j);
        return rc;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(doc, name);
    if (cJSON_IsNull(j))
        cJSON_Delete(j);
    else
        cJSON_AddItemToObject(doc, name, j);
    return QR_OK;
}

/* The current document of a key: the block's own pending write first, then
 * the committed table.  *doc NULL when absent (or deleted in the block). */
static int current_doc(SqlCtx *cx, SqluState *st, QrTable *t, const char *key, cJSON **doc,
                       int *op_index)
{
    *doc = NULL;
    *op_index = -1;
    const TxnOp *op = txn_find(st, qr_table_name(t), key);
    if (op) {
        *op_index = (int)(op - st->ops);
        if (op->is_delete)
            return QR_OK;
        *doc = cJSON_ParseWithLength(op->doc, op->doc_len);
        return *doc ? QR_OK : qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    }
    QrBuf b;
    qr_buf_init(&b);
    QrError e;
    qr_error_clear(&e);
    int rc = qr_get(t, key, strlen(key), &b, &e);
    if (rc == QR_OK) {
        *doc = cJSON_ParseWithLength((const char *)b.data, b.len);
        if (!*doc)
            rc = qr_error_set(cx->err, QR_ECORRUPT, "stored document of key %s is not JSON", key);
    } else if (rc == QR_ENOTFOUND) {
        rc = QR_OK;
    } else {
        qr_error_copy(cx->err, &e);
    }
    qr_buf_free(&b);
    return rc;
}

/* Buffer a put of a document. */
static int put_doc(SqlCtx *cx, SqluState *st, QrTable *t, const char *key, const cJSON *doc,
                   bool must_be_new)
{
    char *text = cJSON_PrintUnformatted(doc);
    if (!text)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    /* refused here, at the statement, not at COMMIT (22021) */
    int rc = quarry_doc_check(text, strlen(text), cx->err);
    if (rc == QR_OK)
        rc = txn_put(st, qr_table_name(t), key, text, strlen(text), must_be_new, cx->err);
    cJSON_free(text);
    return rc;
}

/* ---- RETURNING ---- */

typedef struct Returning {
    int n;
    SqlExpr **exprs;
    QrSqlColumn *cols;
    SqlwRows rows;
} Returning;

static int returning_bind(SqlCtx *cx, const cJSON *list, const SqlScope *sc, Returning *r)
{
    memset(r, 0, sizeof *r);
    int cap = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, list)
    {
        const cJSON *rt = sqlj_is(it, "ResTarget");
        const cJSON *cr = sqlj_is(sqlj_get(rt, "val"), "ColumnRef");
        bool star = cr && sqlj_is(cJSON_GetArrayItem(sqlj_get(cr, "fields"),
                                                     cJSON_GetArraySize(sqlj_get(cr, "fields")) - 1),
                                  "A_Star");
        cap += star ? sc->n : 1;
    }
    if (!cap)
        return QR_OK;
    r->exprs = qr_arena_calloc(cx->arena, (size_t)cap * sizeof *r->exprs);
    r->cols = qr_arena_calloc(cx->arena, (size_t)cap * sizeof *r->cols);
    if (!r->exprs || !r->cols)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    cJSON_ArrayForEach(it, list)
    {
        const cJSON *rt = sqlj_is(it, "ResTarget");
        const cJSON *val = sqlj_get(rt, "val");
        const cJSON *cr = sqlj_is(val, "ColumnRef");
        const cJSON *fields = sqlj_get(cr, "fields");
        if (cr && sqlj_is(cJSON_GetArrayItem(fields, cJSON_GetArraySize(fields) - 1), "A_Star")) {
            for (int i = 0; i < sc->n; i++) {
                if (sc->cols[i].hidden)
                    continue;
                SqlExpr *e = qr_arena_calloc(cx->arena, sizeof *e);
                if (!e)
                    return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
                e->kind = SE_COL;
                e->col = i;
                e->type = sc->cols[i].type;
                e->typmod = sc->cols[i].typmod;
                e->loc = -1;
                e->name = sc->cols[i].name;
                r->exprs[r->n] = e;
                r->cols[r->n] = (QrSqlColumn){.name = sc->cols[i].name,
                                              .type = sc->cols[i].type,
                                              .table_oid = sc->cols[i].table_oid,
                                              .attnum = sc->cols[i].attnum,
                                              .typmod = -1};
                r->n++;
            }
            continue;
        }
        SqlExpr *e;
        int rc = sql_expr_compile(cx, val, sc, &e);
        if (rc)
            return rc;
        const char *name = sqlj_str(rt, "name");
        r->exprs[r->n] = e;
        r->cols[r->n] = (QrSqlColumn){.name = name ? name : sql_expr_name(e),
                                      .type = e->type == QR_SQL_UNKNOWN ? QR_SQL_TEXT : e->type,
                                      .typmod = -1};
        r->n++;
    }
    r->rows.n_cols = r->n;
    return QR_OK;
}

static int returning_row(SqlCtx *cx, Returning *r, const SqlValue *row)
{
    if (!r->n)
        return QR_OK;
    SqlValue *out = sqlw_rows_add(cx, &r->rows);
    if (!out)
        return cx->err->code;
    SqlEvalRow er = {.row = row, .doc = -1};
    for (int i = 0; i < r->n; i++) {
        int rc = sql_expr_eval(cx, r->exprs[i], &er, &out[i]);
        if (rc == QR_OK)
            rc = sqlv_own(cx, &out[i]);
        if (rc)
            return rc;
    }
    return QR_OK;
}

static void returning_result(Returning *r, QrSqlResult *res)
{
    if (r->n)
        sqlw_rows_result(res, &r->rows, r->cols, r->n);
}

/* Scope of a DML target table (alias from the RangeVar). */
static int target_scope(SqlCtx *cx, const cJSON *rv, QrTable **t, SqlScope **sc)
{
    int rc = sqlw_table(cx, rv, t);
    if (rc)
        return rc;
    const char *alias = sqlj_str(sqlj_get(rv, "alias"), "aliasname");
    return sql_table_scope(cx, *t, alias, sc);
}

/* The target table, its scope and its SQL metadata (caller deletes meta). */
static int target_open(SqlCtx *cx, const cJSON *rv, QrTable **t, SqlScope **sc, cJSON **meta)
{
    *meta = NULL;
    int rc = target_scope(cx, rv, t, sc);
    if (rc)
        return rc;
    *meta = sqlw_meta_load(cx, qr_table_name(*t));
    return *meta ? QR_OK : qr_error_set(cx->err, QR_ENOMEM, "out of memory");
}

/* The key type writes use: the declared one; for tables made outside SQL,
 * integers when the stored keys are integers, else whatever each value is. */
static QrSqlType dml_pk_type(const cJSON *meta, const SqlScope *sc)
{
    QrSqlType t = sqlw_pk_type(meta);
    int pk = pk_col(sc);
    if (t == QR_SQL_UNKNOWN && pk >= 0 && sqlt_is_int(sc->cols[pk].type))
        t = QR_SQL_INT8;
    return t;
}

/* Parameters of a DML statement take their types from their context, as
 * in PostgreSQL: INSERT values and UPDATE SET values the target column's,
 * WHERE operands what they are compared or combined with.  Binding the
 * expressions once here, at prepare time, records those types in
 * cx->param_types (execution binds them again with the types fixed). */
static int find_col(SqlCtx *cx, const SqlScope *sc, const char *name, int loc);
static int find_insert_col(SqlCtx *cx, const SqlScope *sc, const char *name, int loc);
static const cJSON *values_lists(const cJSON *sel);

static int dml_infer_params(SqlCtx *cx, const cJSON *b, const SqlScope *sc)
{
    SqlExpr *e;
    int rc = QR_OK;
    const cJSON *it;
    const cJSON *vl = values_lists(sqlj_get(b, "selectStmt"));
    if (vl) { /* INSERT ... VALUES: the target columns, named or all */
        const cJSON *cols = sqlj_get(b, "cols");
        int tgt[1024], nt = 0;
        cJSON_ArrayForEach(it, cols)
        {
            const char *cname = sqlj_str(sqlj_is(it, "ResTarget"), "name");
            int ci = cname ? find_insert_col(cx, sc, cname, sqlj_loc(it)) : -1;
            if (ci < 0 || nt == 1024)
                return cname ? cx->err->code : QR_OK;
            tgt[nt++] = ci;
        }
        for (int i = 0; !cols && i < sc->n && nt < 1024; i++)
            if (!sc->cols[i].hidden)
                tgt[nt++] = i;
        const cJSON *list;
        cJSON_ArrayForEach(list, vl)
        {
            int k = 0;
            cJSON_ArrayForEach(it, sqlj_get(sqlj_is(list, "List"), "items"))
            {
                if (k >= nt)
                    break; /* execution reports the count mismatch */
                if (!sqlj_is(it, "SetToDefault") &&
                    (rc = sql_expr_compile_as(cx, it, NULL, sc->cols[tgt[k]].type, &e)))
                    return rc;
                k++;
            }
        }
    }
    cJSON_ArrayForEach(it, sqlj_get(b, "targetList")) /* UPDATE SET */
    {
        const cJSON *r = sqlj_is(it, "ResTarget");
        int ci = find_col(cx, sc, sqlj_str(r, "name"), sqlj_loc(r));
        if (ci < 0)
            return cx->err->code;
        if ((rc = sql_expr_compile_as(cx, sqlj_get(r, "val"), sc, sc->cols[ci].type, &e)))
            return rc;
    }
    const cJSON *w = sqlj_get(b, "whereClause");
    if (w && (rc = sql_expr_compile_as(cx, w, sc, QR_SQL_BOOL, &e)))
        return rc;
    return QR_OK;
}

int sqlw_dml_describe(SqlCtx *cx, const cJSON *b, QrSqlColumn **cols, int *n_cols)
{
    *cols = NULL;
    *n_cols = 0;
    const cJSON *list = sqlj_get(b, "returningList");
    if (!cJSON_GetArraySize(list) && cx->n_params == 0)
        return QR_OK;
    QrTable *t;
    SqlScope *sc;
    int rc = target_scope(cx, sqlj_get(b, "relation"), &t, &sc);
    if (rc)
        return rc;
    if (cx->n_params > 0)
        rc = dml_infer_params(cx, b, sc);
    Returning r;
    if (rc == QR_OK && (rc = returning_bind(cx, list, sc, &r)) == QR_OK) {
        *cols = r.cols;
        *n_cols = r.n;
    }
    sqlw_release(cx->sess, qr_table_name(t));
    return rc;
}

/* ---- rows of a WHERE, with the block's own writes ---- */

typedef struct DmlRow {
    SqlValue *row;    /* scope values */
    char *key;        /* JSON text */
} DmlRow;

typedef struct DmlRows {
    int n, cap;
    DmlRow *r;
} DmlRows;

static int rows_push(SqlCtx *cx, DmlRows *rs, SqlValue *row, char *key)
{
    if (rs->n == rs->cap) {
        int cap = rs->cap ? rs->cap * 2 : 64;
        DmlRow *r = qr_arena_alloc(cx->arena, (size_t)cap * sizeof *r);
        if (!r)
            return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
        if (rs->n)
            memcpy(r, rs->r, (size_t)rs->n * sizeof *r);
        rs->r = r;
        rs->cap = cap;
    }
    rs->r[rs->n++] = (DmlRow){row, key};
    return QR_OK;
}

/* Committed rows matching `where`, with the block's pending writes to the
 * table overlaid: a pending delete hides a row, a pending put replaces it
 * (tested against `where` again) or adds one. */
static int dml_rows(SqlCtx *cx, SqluState *st, QrTable *t, const SqlScope *sc, const char *alias,
                    const cJSON *where, QrSqlType pk_type, DmlRows *out)
{
    SqlTableRows tr;
    memset(out, 0, sizeof *out);
    snprintf(st->dml_target, sizeof st->dml_target, "%s", qr_table_name(t));
    int rc = sql_table_rows(cx, t, alias, where, &tr);
    st->dml_target[0] = 0;
    if (rc)
        return rc;
    const QrSchema *s = qr_table_schema(t);
    int pk = pk_col(sc);
    if (pk < 0)
        return qr_error_set(cx->err, QR_EINTERNAL, "table scope without a primary key");
    const char *tname = qr_table_name(t);
    bool pending = false;
    for (int i = 0; i < st->n_ops && !pending; i++)
        pending = !st->ops[i].absorbed && !strcmp(st->ops[i].table, tname);
    for (uint64_t i = 0; i < tr.n; i++) {
        SqlValue *row = tr.vals + i * (uint64_t)sc->n;
        char *key;
        if ((rc = key_json(cx, pk_type, s->primary_key, &row[pk], &key)) != QR_OK)
            return rc;
        if (pending && txn_find(st, tname, key))
            continue; /* overlaid below */
        if ((rc = rows_push(cx, out, row, key)) != QR_OK)
            return rc;
    }
    if (!pending)
        return QR_OK;
    SqlExpr *w = NULL;
    if (where && (rc = sql_expr_compile(cx, where, sc, &w)) != QR_OK)
        return rc;
    for (int i = 0; i < st->n_ops; i++) {
        const TxnOp *o = &st->ops[i];
        if (o->absorbed || strcmp(o->table, tname) != 0 || txn_find(st, tname, o->key) != o ||
            o->is_delete)
            continue; /* only the last op of each key counts */
        cJSON *doc = cJSON_ParseWithLength(o->doc, o->doc_len);
        SqlValue *row = qr_arena_calloc(cx->arena, (size_t)sc->n * sizeof *row + 1);
        if (!doc || !row) {
            cJSON_Delete(doc);
            return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
        }
        rc = doc_to_row(cx, sc, s, doc, row);
        cJSON_Delete(doc);
        bool pass = true;
        SqlEvalRow er = {.row = row, .doc = -1};
        if (rc == QR_OK && w)
            rc = sql_expr_test(cx, w, &er, &pass);
        char *key = qr_arena_strndup(cx->arena, o->key, strlen(o->key));
        if (rc == QR_OK && pass)
            rc = key ? rows_push(cx, out, row, key) : qr_error_set(cx->err, QR_ENOMEM, "oom");
        if (rc)
            return rc;
    }
    return QR_OK;
}

/* ---- INSERT ---- */

struct InsertCx {
    QrTable *t;
    const QrSchema *s;
    SqlScope *sc;
    cJSON *meta;             /* owns */
    QrSqlType pk_type;
    int *target;             /* scope index per source column */
    int n_target;
    SqlExpr **dflt;          /* per scope column: DEFAULT expression or NULL */
    const char *conflict;    /* NULL, "nothing", "update" */
    SqlScope *both;          /* ON CONFLICT DO UPDATE: table columns then excluded.* */
    int *set_col;            /* DO UPDATE SET targets (scope index) */
    SqlExpr **set_expr;
    int n_set;
    SqlExpr *set_where;
    Returning ret;
    uint64_t count;
    bool check_identity;     /* INSERT (not COPY): GENERATED ALWAYS refuses given values */
};

static int find_col(SqlCtx *cx, const SqlScope *sc, const char *name, int loc)
{
    for (int i = 0; i < sc->n; i++)
        if (!sc->cols[i].hidden && !strcmp(sc->cols[i].name, name))
            return i;
    sql_err_at(cx, loc, QR_ENOTFOUND, "42703", "column \"%s\" does not exist", name);
    return -1;
}

/* An INSERT's target column: find_col's, and the hidden _score too, which
 * a foreign table declaring it (postgres_fdw, docs/scale-out.md) sends in
 * every INSERT it routes, NULL or DEFAULT; insert_row refuses a value. */
static int find_insert_col(SqlCtx *cx, const SqlScope *sc, const char *name, int loc)
{
    for (int i = 0; name && !strcmp(name, "_score") && i < sc->n; i++)
        if (sc->cols[i].hidden && sc->cols[i].field == -3)
            return i;
    return find_col(cx, sc, name, loc);
}

static int check_not_null(SqlCtx *cx, InsertCx *ic, const SqlValue *row)
{
    for (int i = 0; i < ic->sc->n; i++) {
        const SqlCol *c = &ic->sc->cols[i];
        if (c->hidden || !row[i].is_null)
            continue;
        const cJSON *m = sqlw_meta_col(ic->meta, c->name);
        if (c->field == -1 || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "not_null"))) {
            sql_err_at(cx, -1, QR_ECONSTRAINT, "23502",
                       "null value in column \"%s\" of relation \"%s\" violates not-null "
                       "constraint",
                       c->name, qr_table_name(ic->t));
            return QR_ECONSTRAINT;
        }
    }
    return QR_OK;
}

/* Build the document of a full row (scope order). */
static int row_to_doc(SqlCtx *cx, InsertCx *ic, const SqlValue *row, cJSON *doc)
{
    for (int i = 0; i < ic->sc->n; i++) {
        const SqlCol *c = &ic->sc->cols[i];
        if (c->field < -1 || (c->hidden && c->field != -1)) /* a hidden row id is the key */
            continue;
        int rc = doc_set(cx, doc, ic->s, c, ic->pk_type, &row[i]);
        if (rc)
            return rc;
    }
    return QR_OK;
}

static bool identity_always(const InsertCx *ic, int col)
{
    const cJSON *m = sqlw_meta_col(ic->meta, ic->sc->cols[col].name);
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "identity"));
    return id && id[0] == 'a';
}

static int identity_error(SqlCtx *cx, const char *col)
{
    sql_err_at(cx, -1, QR_EINVAL, "428C9", "cannot insert a non-DEFAULT value into column \"%s\"",
               col);
    qr_error_detail(cx->err, "Column \"%s\" is an identity column defined as GENERATED ALWAYS.",
                    col);
    qr_error_hint(cx->err, "Use OVERRIDING SYSTEM VALUE to override.");
    return cx->err->code;
}

static int insert_row(SqlCtx *cx, SqluState *st, InsertCx *ic, const SqlValue *src)
{
    int n = ic->sc->n;
    SqlValue *row = qr_arena_calloc(cx->arena, (size_t)n * sizeof *row + 1);
    if (!row)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    SqlEvalRow none = {.doc = -1};
    bool *given = qr_arena_calloc(cx->arena, (size_t)n + 1);
    if (!given)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    for (int k = 0; k < ic->n_target; k++)
        if (ic->target[k] >= 0) {
            given[ic->target[k]] = true;
            if (ic->check_identity && identity_always(ic, ic->target[k]))
                return identity_error(cx, ic->sc->cols[ic->target[k]].name);
        }
    /* defaults only where no value is given: nextval is not spent in vain */
    for (int i = 0; i < n; i++) {
        row[i] = sqlv_null();
        if (ic->dflt[i] && !given[i]) {
            int rc = sql_expr_eval(cx, ic->dflt[i], &none, &row[i]);
            if (rc)
                return rc;
        }
    }
    for (int k = 0; k < ic->n_target; k++)
        if (ic->target[k] >= 0)
            row[ic->target[k]] = src[k];
    for (int k = 0; k < ic->n_target; k++)
        if (ic->target[k] >= 0 && ic->sc->cols[ic->target[k]].hidden && !src[k].is_null) {
            sql_err_at(cx, -1, QR_EINVAL, "428C9",
                       "cannot insert a non-DEFAULT value into column \"%s\"",
                       ic->sc->cols[ic->target[k]].name);
            qr_error_detail(cx->err, "Column \"%s\" is the full-text score a query computes.",
                            ic->sc->cols[ic->target[k]].name);
            return QR_EINVAL;
        }
    /* coerce to the column types now so RETURNING and conflicts see them */
    int rc = check_not_null(cx, ic, row);
    if (rc)
        return rc;
    int pk = pk_col(ic->sc);
    char *key;
    if ((rc = key_json(cx, ic->pk_type, ic->s->primary_key, &row[pk], &key)) != QR_OK)
        return rc;
    cJSON *old = NULL;
    int op_index;
    if ((rc = current_doc(cx, st, ic->t, key, &old, &op_index)) != QR_OK)
        return rc;
    if (old) {
        if (!ic->conflict) {
            cJSON_Delete(old);
            sql_err_at(cx, -1, QR_ECONSTRAINT, "23505",
                       "duplicate key value violates unique constraint \"%s_pkey\"",
                       qr_table_name(ic->t));
            qr_error_detail(cx->err, "Key (%s)=(%s) already exists.", ic->s->primary_key, key);
            return QR_ECONSTRAINT;
        }
        if (!strcmp(ic->conflict, "nothing")) {
            cJSON_Delete(old);
            return QR_OK;
        }
        if (op_index >= st->stmt_start) {
            cJSON_Delete(old);
            sql_err_at(cx, -1, QR_EINVAL, "21000",
                       "ON CONFLICT DO UPDATE command cannot affect row a second time");
            qr_error_hint(cx->err, "Ensure that no rows proposed for insertion within the same "
                                   "command have duplicate constrained values.");
            return QR_EINVAL;
        }
        /* DO UPDATE: evaluate over (existing row, excluded row) */
        SqlValue *both = qr_arena_calloc(cx->arena, (size_t)(2 * n) * sizeof *both + 1);
        if (!both) {
            cJSON_Delete(old);
            return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
        }
        rc = doc_to_row(cx, ic->sc, ic->s, old, both);
        for (int i = 0; i < n; i++)
            both[n + i] = row[i];
        SqlEvalRow er = {.row = both, .doc = -1};
        bool pass = true;
        if (rc == QR_OK && ic->set_where)
            rc = sql_expr_test(cx, ic->set_where, &er, &pass);
        if (rc || !pass) {
            cJSON_Delete(old);
            return rc;
        }
        SqlValue *upd = qr_arena_alloc(cx->arena, (size_t)n * sizeof *upd + 1);
        if (!upd) {
            cJSON_Delete(old);
            return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
        }
        memcpy(upd, both, (size_t)n * sizeof *upd);
        for (int k = 0; k < ic->n_set && rc == QR_OK; k++)
            rc = sql_expr_eval(cx, ic->set_expr[k], &er, &upd[ic->set_col[k]]);
        for (int k = 0; k < ic->n_set && rc == QR_OK; k++)
            rc = doc_set(cx, old, ic->s, &ic->sc->cols[ic->set_col[k]], ic->pk_type,
                         &upd[ic->set_col[k]]);
        if (rc == QR_OK)
            rc = check_not_null(cx, ic, upd);
        if (rc == QR_OK)
            rc = put_doc(cx, st, ic->t, key, old, false);
        if (rc == QR_OK && ic->ret.n && (rc = doc_to_row(cx, ic->sc, ic->s, old, upd)) == QR_OK)
            rc = returning_row(cx, &ic->ret, upd);
        cJSON_Delete(old);
        if (rc == QR_OK)
            ic->count++;
        return rc;
    }
    cJSON *doc = cJSON_CreateObject();
    if (!doc)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    rc = row_to_doc(cx, ic, row, doc);
    if (rc == QR_OK)
        rc = put_doc(cx, st, ic->t, key, doc, ic->conflict == NULL);
    if (rc == QR_OK) {
        /* RETURNING sees the stored (coerced) values */
        rc = doc_to_row(cx, ic->sc, ic->s, doc, row);
        if (rc == QR_OK)
            rc = returning_row(cx, &ic->ret, row);
    }
    cJSON_Delete(doc);
    if (rc == QR_OK)
        ic->count++;
    return rc;
}

static int insert_prepare(SqlCtx *cx, const cJSON *b, InsertCx *ic)
{
    int rc = target_open(cx, sqlj_get(b, "relation"), &ic->t, &ic->sc, &ic->meta);
    if (rc)
        return rc;
    ic->s = qr_table_schema(ic->t);
    ic->pk_type = dml_pk_type(ic->meta, ic->sc);
    int n = ic->sc->n;
    /* target columns */
    const cJSON *cols = sqlj_get(b, "cols");
    int nt = cJSON_GetArraySize(cols);
    ic->target = qr_arena_calloc(cx->arena, (size_t)(nt ? nt : n) * sizeof(int) + 1);
    ic->dflt = qr_arena_calloc(cx->arena, (size_t)n * sizeof(SqlExpr *) + 1);
    if (!ic->target || !ic->dflt)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    if (nt) {
        const cJSON *it;
        cJSON_ArrayForEach(it, cols)
        {
            const cJSON *rt = sqlj_is(it, "ResTarget");
            if (sqlj_get(rt, "indirection"))
                return sql_err_at(cx, sqlj_loc(rt), QR_EUNSUPPORTED, "0A000",
                                  "INSERT into subfields or array elements is not supported");
            const char *cname = rt ? sqlj_str(rt, "name") : sqlj_sval(it); /* COPY: String */
            if (!cname)
                return sql_err_at(cx, -1, QR_ESYNTAX, "42601", "column name expected");
            int ci = find_insert_col(cx, ic->sc, cname, rt ? sqlj_loc(rt) : -1);
            if (ci < 0)
                return cx->err->code;
            for (int k = 0; k < ic->n_target; k++)
                if (ic->target[k] == ci)
                    return sql_err_at(cx, sqlj_loc(rt), QR_ESYNTAX, "42701",
                                      "column \"%s\" specified more than once",
                                      ic->sc->cols[ci].name);
            ic->target[ic->n_target++] = ci;
        }
    } else {
        for (int i = 0; i < n; i++)
            if (!ic->sc->cols[i].hidden)
                ic->target[ic->n_target++] = i;
    }
    /* defaults */
    for (int i = 0; i < n; i++) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(sqlw_meta_col(ic->meta, ic->sc->cols[i].name),
                                                          "default");
        bool row_id = ic->sc->cols[i].field == -1; /* a hidden row id has its default too */
        if (d && (!ic->sc->cols[i].hidden || row_id) &&
            (rc = sql_expr_compile(cx, d, NULL, &ic->dflt[i])))
            return rc;
    }
    /* ON CONFLICT */
    const cJSON *oc = sqlj_get(b, "onConflictClause");
    if (oc) {
        const char *action = sqlj_str(oc, "action");
        ic->conflict = action && !strcmp(action, "ONCONFLICT_UPDATE") ? "update" : "nothing";
        const cJSON *elems = sqlj_get(sqlj_get(oc, "infer"), "indexElems");
        const cJSON *it;
        cJSON_ArrayForEach(it, elems)
        {
            const char *nm = sqlj_str(sqlj_is(it, "IndexElem"), "name");
            if (!nm || strcmp(nm, ic->s->primary_key) != 0 || cJSON_GetArraySize(elems) != 1)
                return sql_err_at(cx, sqlj_loc(oc), QR_EUNSUPPORTED, "0A000",
                                  "ON CONFLICT works on the primary key (%s) only",
                                  ic->s->primary_key);
        }
        if (!strcmp(ic->conflict, "update")) {
            if (!elems)
                return sql_err_at(cx, sqlj_loc(oc), QR_ESYNTAX, "42601",
                                  "ON CONFLICT DO UPDATE requires inference specification or "
                                  "constraint name");
            ic->both = qr_arena_calloc(cx->arena, sizeof *ic->both);
            SqlCol *bc = qr_arena_calloc(cx->arena, (size_t)(2 * n) * sizeof *bc);
            if (!ic->both || !bc)
                return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
            for (int i = 0; i < n; i++) {
                bc[i] = ic->sc->cols[i];
                bc[n + i] = ic->sc->cols[i];
                bc[n + i].qual = "excluded";
                bc[n + i].hidden = true;
            }
            ic->both->n = 2 * n;
            ic->both->cols = bc;
            const cJSON *tl = sqlj_get(oc, "targetList");
            int ns = cJSON_GetArraySize(tl);
            ic->set_col = qr_arena_calloc(cx->arena, (size_t)(ns + 1) * sizeof(int));
            ic->set_expr = qr_arena_calloc(cx->arena, (size_t)(ns + 1) * sizeof(SqlExpr *));
            if (!ic->set_col || !ic->set_expr)
                return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
            cJSON_ArrayForEach(it, tl)
            {
                const cJSON *rt = sqlj_is(it, "ResTarget");
                int ci = find_col(cx, ic->sc, sqlj_str(rt, "name"), sqlj_loc(rt));
                if (ci < 0)
                    return cx->err->code;
                if (ic->sc->cols[ci].field == -1)
                    return sql_err_at(cx, sqlj_loc(rt), QR_EUNSUPPORTED, "0A000",
                                      "ON CONFLICT DO UPDATE cannot change the primary key");
                ic->set_col[ic->n_set] = ci;
                if ((rc = sql_expr_compile(cx, sqlj_get(rt, "val"), ic->both,
                                           &ic->set_expr[ic->n_set])) != QR_OK)
                    return rc;
                ic->n_set++;
            }
            const cJSON *w = sqlj_get(oc, "whereClause");
            if (w && (rc = sql_expr_compile(cx, w, ic->both, &ic->set_where)) != QR_OK)
                return rc;
        }
    }
    return returning_bind(cx, sqlj_get(b, "returningList"), ic->sc, &ic->ret);
}

/* A VALUES list: plain (no ORDER BY / LIMIT / set operations). */
static const cJSON *values_lists(const cJSON *sel)
{
    const cJSON *sb = sqlj_is(sel, "SelectStmt");
    const cJSON *vl = sqlj_get(sb, "valuesLists");
    if (!vl || sqlj_get(sb, "sortClause") || sqlj_get(sb, "limitCount") ||
        sqlj_get(sb, "limitOffset") || sqlj_get(sb, "withClause"))
        return NULL;
    return vl;
}

int sqlw_insert(SqlCtx *cx, SqluState *st, const cJSON *b, QrSqlResult *res)
{
    InsertCx ic;
    memset(&ic, 0, sizeof ic);
    const char *ov = sqlj_str(b, "override");
    ic.check_identity = !ov || strcmp(ov, "OVERRIDING_SYSTEM_VALUE") != 0;
    int rc = insert_prepare(cx, b, &ic);
    const cJSON *sel = sqlj_get(b, "selectStmt");
    const cJSON *vl = sel ? values_lists(sel) : NULL;
    SqlValue *src = rc ? NULL : qr_arena_calloc(cx->arena, (size_t)(ic.n_target + 1) * sizeof *src);
    if (rc == QR_OK && !src)
        rc = qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    /* without a column list, fewer values fill the leading columns and the
     * rest take their defaults, as in PostgreSQL */
    bool implicit = !sqlj_get(b, "cols");
    if (rc == QR_OK && !sel) {
        /* DEFAULT VALUES */
        for (int k = 0; k < ic.n_target; k++)
            ic.target[k] = -1;
        rc = insert_row(cx, st, &ic, src);
    } else if (rc == QR_OK && vl) {
        const cJSON *list;
        cJSON_ArrayForEach(list, vl)
        {
            const cJSON *items = sqlj_get(sqlj_is(list, "List"), "items");
            int ni = cJSON_GetArraySize(items);
            if (ni != ic.n_target && !(implicit && ni > 0 && ni < ic.n_target)) {
                rc = sql_err_at(cx, sqlj_loc(cJSON_GetArrayItem(items, 0)), QR_ESYNTAX, "42601",
                                "INSERT has more %s than target columns",
                                ni > ic.n_target ? "expressions" : "target columns");
                if (ni < ic.n_target)
                    snprintf(cx->err->message, sizeof cx->err->message,
                             "INSERT has more target columns than expressions");
                break;
            }
            int k = 0;
            const cJSON *it;
            SqlEvalRow none = {.doc = -1};
            int *tgt = qr_arena_alloc(cx->arena, (size_t)(ic.n_target + 1) * sizeof *tgt);
            if (!tgt) {
                rc = qr_error_set(cx->err, QR_ENOMEM, "out of memory");
                break;
            }
            memcpy(tgt, ic.target, (size_t)ic.n_target * sizeof *tgt);
            for (int m = ni; m < ic.n_target; m++) {
                src[m] = sqlv_null();
                ic.target[m] = -1; /* not given: the column's default */
            }
            cJSON_ArrayForEach(it, items)
            {
                if (sqlj_is(it, "SetToDefault")) {
                    src[k] = sqlv_null();
                    ic.target[k] = -1; /* leave the column at its default */
                } else {
                    SqlExpr *e;
                    rc = sql_expr_compile(cx, it, NULL, &e);
                    if (rc == QR_OK)
                        rc = sql_expr_eval(cx, e, &none, &src[k]);
                    if (rc)
                        break;
                }
                k++;
            }
            if (rc == QR_OK)
                rc = insert_row(cx, st, &ic, src);
            memcpy(ic.target, tgt, (size_t)ic.n_target * sizeof *tgt);
            if (rc == QR_OK)
                rc = sql_check(cx);
            if (rc)
                break;
        }
    } else if (rc == QR_OK) {
        /* INSERT ... SELECT */
        QrSqlResult *q = qr_arena_calloc(cx->arena, sizeof *q);
        if (!q)
            rc = qr_error_set(cx->err, QR_ENOMEM, "out of memory");
        if (rc == QR_OK)
            rc = sql_query_run(cx, sel, q);
        bool fewer = rc == QR_OK && implicit && q->n_cols > 0 && q->n_cols < ic.n_target;
        if (rc == QR_OK && q->n_cols != ic.n_target && !fewer)
            rc = sql_err_at(cx, -1, QR_ESYNTAX, "42601",
                            q->n_cols > ic.n_target ? "INSERT has more expressions than target columns"
                                                    : "INSERT has more target columns than expressions");
        for (int m = q->n_cols; fewer && m < ic.n_target; m++) {
            src[m] = sqlv_null();
            ic.target[m] = -1; /* not given: the column's default */
        }
        for (uint64_t i = 0; rc == QR_OK && i < q->n_rows; i++) {
            const SqlValue *row = q->vals + i * (uint64_t)q->n_cols;
            if (fewer) { /* the row's values, then the defaults' placeholders */
                memcpy(src, row, (size_t)q->n_cols * sizeof *src);
                row = src;
            }
            rc = insert_row(cx, st, &ic, row);
            if (rc == QR_OK)
                rc = sql_check(cx);
        }
    }
    cJSON_Delete(ic.meta);
    if (rc)
        return rc;
    snprintf(res->tag, sizeof res->tag, "INSERT 0 %llu", (unsigned long long)ic.count);
    returning_result(&ic.ret, res);
    return QR_OK;
}

/* ---- UPDATE / DELETE / TRUNCATE ---- */

int sqlw_update(SqlCtx *cx, SqluState *st, const cJSON *b, QrSqlResult *res)
{
    const cJSON *rv = sqlj_get(b, "relation");
    QrTable *t;
    SqlScope *sc;
    if (sqlj_get(b, "fromClause"))
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000", "UPDATE ... FROM is not supported");
    cJSON *meta;
    int rc = target_open(cx, rv, &t, &sc, &meta);
    if (rc)
        return rc;
    const QrSchema *s = qr_table_schema(t);
    InsertCx ic = {.t = t, .s = s, .sc = sc, .meta = meta, .pk_type = dml_pk_type(meta, sc)};
    const cJSON *tl = sqlj_get(b, "targetList");
    int ns = cJSON_GetArraySize(tl);
    int *set_col = qr_arena_calloc(cx->arena, (size_t)(ns + 1) * sizeof(int));
    SqlExpr **set_expr = qr_arena_calloc(cx->arena, (size_t)(ns + 1) * sizeof(SqlExpr *));
    if (!set_col || !set_expr)
        rc = qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    int k = 0;
    bool pk_changes = false;
    const cJSON *it;
    cJSON_ArrayForEach(it, tl)
    {
        if (rc)
            break;
        const cJSON *r = sqlj_is(it, "ResTarget");
        if (sqlj_get(r, "indirection")) {
            rc = sql_err_at(cx, sqlj_loc(r), QR_EUNSUPPORTED, "0A000",
                            "UPDATE of subfields or array elements is not supported");
            break;
        }
        set_col[k] = find_col(cx, sc, sqlj_str(r, "name"), sqlj_loc(r));
        if (set_col[k] < 0) {
            rc = cx->err->code;
            break;
        }
        pk_changes |= sc->cols[set_col[k]].field == -1;
        rc = sql_expr_compile(cx, sqlj_get(r, "val"), sc, &set_expr[k]);
        k++;
    }
    Returning ret = {0};
    if (rc == QR_OK)
        rc = returning_bind(cx, sqlj_get(b, "returningList"), sc, &ret);
    DmlRows rows = {0};
    if (rc == QR_OK)
        rc = dml_rows(cx, st, t, sc, sqlj_str(sqlj_get(rv, "alias"), "aliasname"),
                      sqlj_get(b, "whereClause"), ic.pk_type, &rows);
    uint64_t count = 0;
    for (int i = 0; rc == QR_OK && i < rows.n; i++) {
        SqlValue *old = rows.r[i].row;
        SqlValue *upd = qr_arena_alloc(cx->arena, (size_t)sc->n * sizeof *upd + 1);
        if (!upd) {
            rc = qr_error_set(cx->err, QR_ENOMEM, "out of memory");
            break;
        }
        memcpy(upd, old, (size_t)sc->n * sizeof *upd);
        SqlEvalRow er = {.row = old, .doc = -1};
        for (int j = 0; j < k && rc == QR_OK; j++)
            rc = sql_expr_eval(cx, set_expr[j], &er, &upd[set_col[j]]);
        if (rc == QR_OK)
            rc = check_not_null(cx, &ic, upd);
        cJSON *doc = NULL;
        int op_index;
        if (rc == QR_OK)
            rc = current_doc(cx, st, t, rows.r[i].key, &doc, &op_index);
        if (rc == QR_OK && !doc)
            continue; /* deleted since the scan */
        for (int j = 0; j < k && rc == QR_OK; j++)
            rc = doc_set(cx, doc, s, &sc->cols[set_col[j]], ic.pk_type, &upd[set_col[j]]);
        char *key = rows.r[i].key;
        bool moved = false; /* the primary key changed: delete + insert of a new key */
        if (rc == QR_OK && pk_changes) {
            rc = key_json(cx, ic.pk_type, s->primary_key, &upd[pk_col(sc)], &key);
            moved = rc == QR_OK && strcmp(key, rows.r[i].key) != 0;
            if (moved)
                rc = txn_delete(st, qr_table_name(t), rows.r[i].key, cx->err);
        }
        if (rc == QR_OK)
            rc = put_doc(cx, st, t, key, doc, moved);
        if (rc == QR_OK && ret.n && (rc = doc_to_row(cx, sc, s, doc, upd)) == QR_OK)
            rc = returning_row(cx, &ret, upd);
        cJSON_Delete(doc);
        if (rc == QR_OK)
            rc = sql_check(cx);
        count++;
    }
    cJSON_Delete(meta);
    if (rc)
        return rc;
    snprintf(res->tag, sizeof res->tag, "UPDATE %llu", (unsigned long long)count);
    returning_result(&ret, res);
    return QR_OK;
}

int sqlw_delete(SqlCtx *cx, SqluState *st, const cJSON *b, QrSqlResult *res)
{
    const cJSON *rv = sqlj_get(b, "relation");
    QrTable *t;
    SqlScope *sc;
    if (sqlj_get(b, "usingClause"))
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000", "DELETE ... USING is not supported");
    cJSON *meta;
    int rc = target_open(cx, rv, &t, &sc, &meta);
    if (rc)
        return rc;
    Returning ret = {0};
    rc = returning_bind(cx, sqlj_get(b, "returningList"), sc, &ret);
    DmlRows rows = {0};
    if (rc == QR_OK)
        rc = dml_rows(cx, st, t, sc, sqlj_str(sqlj_get(rv, "alias"), "aliasname"),
                      sqlj_get(b, "whereClause"), dml_pk_type(meta, sc), &rows);
    cJSON_Delete(meta);
    for (int i = 0; rc == QR_OK && i < rows.n; i++) {
        rc = txn_delete(st, qr_table_name(t), rows.r[i].key, cx->err);
        if (rc == QR_OK)
            rc = returning_row(cx, &ret, rows.r[i].row);
    }
    if (rc)
        return rc;
    snprintf(res->tag, sizeof res->tag, "DELETE %d", rows.n);
    returning_result(&ret, res);
    return QR_OK;
}

int sqlw_truncate(SqlCtx *cx, SqluState *st, const cJSON *b, QrSqlResult *res)
{
    snprintf(res->tag, sizeof res->tag, "TRUNCATE TABLE");
    const cJSON *it;
    cJSON_ArrayForEach(it, sqlj_get(b, "relations"))
    {
        const cJSON *rv = sqlj_is(it, "RangeVar");
        QrTable *t;
        SqlScope *sc;
        cJSON *meta;
        int rc = target_open(cx, rv, &t, &sc, &meta);
        if (rc)
            return rc;
        DmlRows rows = {0};
        rc = dml_rows(cx, st, t, sc, NULL, NULL, dml_pk_type(meta, sc), &rows);
        cJSON_Delete(meta);
        for (int i = 0; rc == QR_OK && i < rows.n; i++)
            rc = txn_delete(st, qr_table_name(t), rows.r[i].key, cx->err);
        if (rc)
            return rc;
    }
    return QR_OK;
}

/* ---- INSERT for COPY ---- */

int sqlw_insert_open(SqlCtx *cx, const cJSON *b, InsertCx **out)
{
    InsertCx *ic = qr_arena_calloc(cx->arena, sizeof *ic);
    if (!ic)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    int rc = insert_prepare(cx, b, ic);
    if (rc) {
        cJSON_Delete(ic->meta);
        return rc;
    }
    *out = ic;
    return QR_OK;
}

int sqlw_insert_values(SqlCtx *cx, SqluState *st, InsertCx *ic, const SqlValue *src)
{
    return insert_row(cx, st, ic, src);
}

int sqlw_insert_n_target(const InsertCx *ic) { return ic->n_target; }
QrSqlType sqlw_insert_target_type(const InsertCx *ic, int k)
{
    return ic->sc->cols[ic->target[k]].type;
}
uint64_t sqlw_insert_count(const InsertCx *ic) { return ic->count; }

void sqlw_insert_close(InsertCx *ic)
{
    if (ic) {
        cJSON_Delete(ic->meta);
        ic->meta = NULL;
    }
}
