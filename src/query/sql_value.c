/*
 * sql_value.c — SQL values: type table (OIDs, names), casts with
 * PostgreSQL's input rules, the total order used by sorting and grouping,
 * hashing, and the text and JSON forms.
 *
 * Layer: query/.  Calls store/ (buf, schema timestamp parsing) only.
 */
#include "query/sql_int.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- timestamps ---- */

#define US_PER_DAY SQL_US_PER_DAY

bool sqlv_parse_ts(const char *s, size_t n, int64_t *us)
{
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    char buf[64];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, s, n);
    buf[n] = 0;
    /* "+00" style offsets (PostgreSQL's output) -> "+00:00" */
    if (n >= 3 && (buf[n - 3] == '+' || buf[n - 3] == '-') && isdigit((unsigned char)buf[n - 2]) &&
        isdigit((unsigned char)buf[n - 1]) && n + 3 < sizeof buf && strchr(buf, ':')) {
        memcpy(buf + n, ":00", 4);
        n += 3;
    }
    if (qr_parse_timestamp(buf, n, us))
        return true;
    /* PostgreSQL's other forms: "2024-01-01 +00" (JDBC's setDate), "2024-01-01 10:00 UTC",
     * "... BC", "now", "today", "epoch" */
    int64_t zone;
    bool has_zone;
    if (sqld_parse_datetime(buf, n, us, &zone, &has_zone) != 0)
        return false;
    *us -= zone * 1000000;
    return true;
}

/* Int8 text parse with overflow check.  false on bad syntax; *ovf on range. */
static bool parse_int(const char *s, size_t n, int64_t *out, bool *ovf)
{
    *ovf = false;
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (!n)
        return false;
    bool neg = false;
    size_t i = 0;
    if (s[0] == '-' || s[0] == '+') {
        neg = s[0] == '-';
        i = 1;
    }
    if (i == n)
        return false;
    uint64_t v = 0;
    for (; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return false;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) {
            *ovf = true;
            return true;
        }
        v = v * 10 + d;
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) {
        *ovf = true;
        return true;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static bool parse_float(const char *s, size_t n, double *out)
{
    char buf[128];
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (!n || n >= sizeof buf)
        return false;
    memcpy(buf, s, n);
    buf[n] = 0;
    if (strcasecmp(buf, "nan") == 0) {
        *out = NAN;
        return true;
    }
    if (strcasecmp(buf, "infinity") == 0 || strcasecmp(buf, "inf") == 0 ||
        strcasecmp(buf, "+infinity") == 0) {
        *out = INFINITY;
        return true;
    }
    if (strcasecmp(buf, "-infinity") == 0 || strcasecmp(buf, "-inf") == 0) {
        *out = -INFINITY;
        return true;
    }
    char *end;
    errno = 0;
    double d = strtod(buf, &end);
    if (*end || end == buf || isnan(d) || isinf(d))
        return false;
    *out = d;
    return true;
}

static int range_for(QrSqlType t, int64_t v)
{
    if (t == QR_SQL_INT2)
        return v >= INT16_MIN && v <= INT16_MAX;
    if (t == QR_SQL_INT4)
        return v >= INT32_MIN && v <= INT32_MAX;
    if (t == QR_SQL_OID)
        return v >= 0 && v <= UINT32_MAX;
    return 1;
}

static int cast_err(SqlCtx *cx, int loc, const char *state, const char *what, QrSqlType to,
                    const SqlValue *in)
{
    QrBuf b;
    qr_buf_init(&b);
    qr_sql_value_text(in, &b);
    int rc = sql_err_at(cx, loc, QR_EINVAL, state, "%s for type %s: \"%.*s\"", what,
                        qr_sql_type_name(to), (int)(b.len > 80 ? 80 : b.len),
                        b.data ? (const char *)b.data : "");
    qr_buf_free(&b);
    return rc;
}

int sqlv_own(SqlCtx *cx, SqlValue *v)
{
    if (v->is_null || !sqlt_has_bytes(v->type))
        return QR_OK;
    char *s = qr_arena_strndup(cx->arena, v->u.s.s ? v->u.s.s : "", v->u.s.n);
    if (!s)
        return sql_err_at(cx, -1, QR_ELIMIT, NULL, "query memory limit exceeded");
    v->u.s.s = s;
    return QR_OK;
}

int sqlv_buf_text(SqlCtx *cx, QrBuf *b, SqlValue *out)
{
    char *s = qr_buf_ok(b) ? qr_arena_strndup(cx->arena, b->data ? (char *)b->data : "", b->len)
                           : NULL;
    size_t n = b->len;
    qr_buf_free(b);
    if (!s)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    *out = sqlv_text(s, n);
    return QR_OK;
}

static int text_value(SqlCtx *cx, const SqlValue *in, QrSqlType to, SqlValue *out)
{
    QrBuf b;
    qr_buf_init(&b);
    qr_sql_session_value_text(cx->sess, in, &b); /* bytea::text follows bytea_output */
    char *s = qr_buf_ok(&b) ? qr_arena_strndup(cx->arena, b.data ? (char *)b.data : "", b.len)
                            : NULL;
    size_t n = b.len;
    qr_buf_free(&b);
    if (!s)
        return sql_err_at(cx, -1, QR_ELIMIT, NULL, "query memory limit exceeded");
    out->type = to;
    out->is_null = false;
    out->u.s.s = s;
    out->u.s.n = n;
    return QR_OK;
}

int sqlv_cast(SqlCtx *cx, const SqlValue *in, QrSqlType to, int loc, SqlValue *out)
{
    if (in->is_null) {
        *out = *in;
        out->type = to;
        return QR_OK;
    }
    QrSqlType from = in->type;
    if (from == to || (sqlt_is_str(from) && sqlt_is_str(to) && to != QR_SQL_CHAR)) {
        *out = *in;
        out->type = to;
        return QR_OK;
    }
    if (QR_SQL_IS_ARRAY(to))
        return sqla_cast(cx, in, to, loc, out);
    if ((to == QR_SQL_JSON || to == QR_SQL_JSONB) &&
        (sqlt_is_str(from) || from == QR_SQL_JSON || from == QR_SQL_JSONB))
        return sqljs_in(cx, in->u.s.s ? in->u.s.s : "", in->u.s.n, to, loc, out);
    if ((from == QR_SQL_JSON || from == QR_SQL_JSONB) && sqlt_is_str(to)) {
        *out = *in;
        out->type = to;
        return QR_OK;
    }
    if ((to == QR_SQL_UUID || to == QR_SQL_BYTEA) && sqlt_is_str(from))
        return sqlb_cast(cx, in, to, loc, out);
    if (((to == QR_SQL_UUID || to == QR_SQL_BYTEA || to == QR_SQL_JSON || to == QR_SQL_JSONB) &&
         !sqlt_is_str(from)) ||
        ((from == QR_SQL_UUID || from == QR_SQL_BYTEA || from == QR_SQL_JSON ||
          from == QR_SQL_JSONB) && !sqlt_is_str(to)))
        return sql_err_at(cx, loc, QR_ETYPE, "42846", "cannot cast type %s to %s",
                          qr_sql_type_name(from), qr_sql_type_name(to));
    if ((to == QR_SQL_DATE || to == QR_SQL_TIME || to == QR_SQL_INTERVAL ||
         ((from == QR_SQL_DATE || from == QR_SQL_TIME || from == QR_SQL_INTERVAL) && !sqlt_is_str(to))))
        return sqld_cast(cx, in, to, loc, out);
    if (QR_SQL_IS_ARRAY(from) && !sqlt_is_str(to))
        return sql_err_at(cx, loc, QR_ETYPE, "42846", "cannot cast type %s to %s",
                          qr_sql_type_name(from), qr_sql_type_name(to));
    SqlValue v = {.type = to};
    if (sqlt_is_str(to)) {
        if (to == QR_SQL_CHAR && sqlt_is_str(from)) {
            *out = *in;
            out->type = to;
            if (out->u.s.n > 1)
                out->u.s.n = 1;
            return QR_OK;
        }
        return text_value(cx, in, to, out);
    }
    if (to == QR_SQL_NUMERIC) {
        if (sqlt_is_str(from))
            return sqln_in(cx, in->u.s.s ? in->u.s.s : "", in->u.s.n, loc, out);
        if (from == QR_SQL_FLOAT4 || from == QR_SQL_FLOAT8)
            return sqln_from_double(cx, in->u.f, out);
        if (sqlt_is_int(from))
            return text_value(cx, in, to, out);
        return sql_err_at(cx, loc, QR_ETYPE, "42846", "cannot cast type %s to numeric",
                          qr_sql_type_name(from));
    }
    if (sqlt_is_int(to)) {
        int64_t i;
        if (sqlt_is_int(from)) {
            i = in->u.i;
        } else if (from == QR_SQL_FLOAT4 || from == QR_SQL_FLOAT8 || from == QR_SQL_NUMERIC) {
            double d = in->u.f;
            if (from == QR_SQL_NUMERIC) { /* rounded half away from zero, exactly */
                SqlValue r;
                int rc = sqln_round(cx, in, 0, SQLN_ROUND, &r);
                if (rc)
                    return rc;
                bool ovf;
                if (!parse_int(r.u.s.s, r.u.s.n, &i, &ovf) || ovf)
                    return sql_err_at(cx, loc, QR_EINVAL, "22003", "%s out of range",
                                      to == QR_SQL_INT2 ? "smallint" : to == QR_SQL_INT4 ? "integer"
                                                                                       : "bigint");
                if (!range_for(to, i))
                    return sql_err_at(cx, loc, QR_EINVAL, "22003", "%s out of range",
                                      to == QR_SQL_INT2 ? "smallint" : to == QR_SQL_INT4 ? "integer"
                                                                                       : "oid");
                v.u.i = i;
                *out = v;
                return QR_OK;
            }
            d = rint(d);
            if (isnan(d) || d < -9223372036854775808.0 || d >= 9223372036854775808.0)
                return sql_err_at(cx, loc, QR_EINVAL, "22003", "%s out of range",
                                  qr_sql_type_name(to) + 0);
            i = (int64_t)d;
        } else if (from == QR_SQL_BOOL) {
            if (to != QR_SQL_INT4)
                return sql_err_at(cx, loc, QR_ETYPE, "42846", "cannot cast type boolean to %s",
                                  qr_sql_type_name(to));
            i = in->u.b;
        } else if (sqlt_is_str(from)) {
            bool ovf;
            if (!parse_int(in->u.s.s, in->u.s.n, &i, &ovf))
                return cast_err(cx, loc, "22P02", "invalid input syntax", to, in);
            if (ovf)
                return sql_err_at(cx, loc, QR_EINVAL, "22003", "value \"%.*s\" is out of range for type %s",
                                  (int)(in->u.s.n > 60 ? 60 : in->u.s.n), in->u.s.s,
                                  qr_sql_type_name(to));
        } else {
            return sql_err_at(cx, loc, QR_ETYPE, "42846", "cannot cast type %s to %s",
                              qr_sql_type_name(from), qr_sql_type_name(to));
        }
        if (!range_for(to, i))
            return sql_err_at(cx, loc, QR_EINVAL, "22003", "%s out of range",
                              to == QR_SQL_INT2 ? "smallint" : to == QR_SQL_INT4 ? "integer" : "oid");
        v.u.i = i;
    } else if (to == QR_SQL_FLOAT4 || to == QR_SQL_FLOAT8) {
        double d;
        if (sqlt_is_int(from))
            d = (double)in->u.i;
        else if (from == QR_SQL_FLOAT4 || from == QR_SQL_FLOAT8)
            d = in->u.f;
        else if (from == QR_SQL_NUMERIC && in->u.s.n >= 120) { /* (1e300 has 301 digits) */
            char *z = qr_arena_strndup(cx->arena, in->u.s.s, in->u.s.n);
            if (!z)
                return sql_err_at(cx, loc, QR_ELIMIT, "54000", "query memory limit exceeded");
            d = strtod(z, NULL);
            if (isinf(d) || (d == 0 && strspn(z, "-0.") != in->u.s.n))
                return cast_err(cx, loc, "22003", "out of range", to, in);
        } else if (sqlt_is_str(from) || from == QR_SQL_NUMERIC) {
            if (!parse_float(in->u.s.s, in->u.s.n, &d))
                return cast_err(cx, loc, "22P02", "invalid input syntax", to, in);
        } else
            return sql_err_at(cx, loc, QR_ETYPE, "42846", "cannot cast type %s to %s",
                              qr_sql_type_name(from), qr_sql_type_name(to));
        if (to == QR_SQL_FLOAT4)
            d = (float)d;
        v.u.f = d;
    } else if (to == QR_SQL_BOOL) {
        if (sqlt_is_int(from))
            v.u.b = in->u.i != 0;
        else if (sqlt_is_str(from)) {
            char b[8];
            size_t n = in->u.s.n;
            const char *s = in->u.s.s;
            while (n && isspace((unsigned char)*s))
                s++, n--;
            while (n && isspace((unsigned char)s[n - 1]))
                n--;
            if (n == 0 || n >= sizeof b)
                return cast_err(cx, loc, "22P02", "invalid input syntax", to, in);
            memcpy(b, s, n);
            b[n] = 0;
            if (!strcasecmp(b, "t") || !strcasecmp(b, "true") || !strcasecmp(b, "yes") ||
                !strcasecmp(b, "on") || !strcmp(b, "1") || !strcasecmp(b, "y"))
                v.u.b = true;
            else if (!strcasecmp(b, "f") || !strcasecmp(b, "false") || !strcasecmp(b, "no") ||
                     !strcasecmp(b, "off") || !strcmp(b, "0") || !strcasecmp(b, "n"))
                v.u.b = false;
            else
                return cast_err(cx, loc, "22P02", "invalid input syntax", to, in);
        } else
            return sql_err_at(cx, loc, QR_ETYPE, "42846", "cannot cast type %s to boolean",
                              qr_sql_type_name(from));
    } else if (sqlt_is_ts(to)) {
        if (sqlt_is_ts(from))
            v.u.i = in->u.i;
        else if (sqlt_is_str(from)) {
            if (!sqlv_parse_ts(in->u.s.s, in->u.s.n, &v.u.i))
                return cast_err(cx, loc, "22007", "invalid input syntax", to, in);
        } else
            return sql_err_at(cx, loc, QR_ETYPE, "42846", "cannot cast type %s to %s",
                              qr_sql_type_name(from), qr_sql_type_name(to));
    } else {
        return sql_err_at(cx, loc, QR_ETYPE, "42846", "cannot cast type %s to %s",
                          qr_sql_type_name(from), qr_sql_type_name(to));
    }
    *out = v;
    return QR_OK;
}

/* ---- order, equality, hashing ---- */

static double num_of(const SqlValue *v)
{
    if (sqlt_is_int(v->type) || sqlt_is_datetime(v->type) || v->type == QR_SQL_TIME)
        return (double)v->u.i;
    if (v->type == QR_SQL_NUMERIC) {
        char buf[64];
        size_t n = v->u.s.n < 63 ? v->u.s.n : 63;
        memcpy(buf, v->u.s.s, n);
        buf[n] = 0;
        return strtod(buf, NULL);
    }
    if (v->type == QR_SQL_BOOL)
        return v->u.b;
    return v->u.f;
}

static int cmp_double(double a, double b)
{
    /* PostgreSQL: NaN equals NaN and sorts above every number */
    if (isnan(a) || isnan(b))
        return isnan(a) ? (isnan(b) ? 0 : 1) : -1;
    return a < b ? -1 : a > b;
}

int sqlv_cmp(const SqlValue *a, const SqlValue *b)
{
    if (a->is_null || b->is_null)
        return a->is_null ? (b->is_null ? 0 : 1) : -1;
    if (QR_SQL_IS_ARRAY(a->type) || QR_SQL_IS_ARRAY(b->type)) {
        if (QR_SQL_IS_ARRAY(a->type) && QR_SQL_IS_ARRAY(b->type))
            return sqla_cmp(a, b);
        return QR_SQL_IS_ARRAY(a->type) ? 1 : -1; /* arrays after scalars */
    }
    if (a->type == QR_SQL_INTERVAL || b->type == QR_SQL_INTERVAL) {
        if (a->type == b->type)
            return sqld_interval_cmp(a, b);
        return a->type == QR_SQL_INTERVAL ? 1 : -1;
    }
    if (a->type == QR_SQL_UUID || b->type == QR_SQL_UUID) {
        if (a->type == b->type) {
            int c = memcmp(a->u.uuid, b->u.uuid, 16);
            return c < 0 ? -1 : c > 0;
        }
        return a->type == QR_SQL_UUID ? 1 : -1;
    }
    bool ai = sqlt_is_int(a->type) || sqlt_is_datetime(a->type) || a->type == QR_SQL_TIME ||
              a->type == QR_SQL_BOOL;
    bool bi = sqlt_is_int(b->type) || sqlt_is_datetime(b->type) || b->type == QR_SQL_TIME ||
              b->type == QR_SQL_BOOL;
    if (ai && bi) {
        int64_t x = a->type == QR_SQL_BOOL ? a->u.b : a->u.i;
        int64_t y = b->type == QR_SQL_BOOL ? b->u.b : b->u.i;
        return x < y ? -1 : x > y;
    }
    bool an = ai || sqlt_is_float(a->type), bn = bi || sqlt_is_float(b->type);
    if ((a->type == QR_SQL_NUMERIC && (b->type == QR_SQL_NUMERIC || sqlt_is_int(b->type))) ||
        (b->type == QR_SQL_NUMERIC && sqlt_is_int(a->type))) { /* exact */
        char ia[24], ib[24];
        SqlValue x = *a, y = *b;
        if (sqlt_is_int(a->type))
            x = sqlv_text(ia, (size_t)snprintf(ia, sizeof ia, "%" PRId64, a->u.i));
        if (sqlt_is_int(b->type))
            y = sqlv_text(ib, (size_t)snprintf(ib, sizeof ib, "%" PRId64, b->u.i));
        return sqln_cmp(&x, &y);
    }
    if (an && bn) {
        if (ai && sqlt_is_int(a->type) && !bi) { /* exact int vs float */
            double y = num_of(b);
            if (!isnan(y) && y >= -9.2e18 && y <= 9.2e18) {
                double fy = floor(y);
                int64_t iy = (int64_t)fy;
                if (a->u.i != iy)
                    return a->u.i < iy ? -1 : 1;
                return fy == y ? 0 : -1;
            }
        } else if (bi && sqlt_is_int(b->type) && !ai) {
            return -sqlv_cmp(b, a);
        }
        return cmp_double(num_of(a), num_of(b));
    }
    /* strings (and mixed kinds by text) */
    const char *s1 = a->u.s.s, *s2 = b->u.s.s;
    size_t n1 = a->u.s.n, n2 = b->u.s.n;
    if (!sqlt_has_bytes(a->type))
        return an ? -1 : 1;
    if (!sqlt_has_bytes(b->type))
        return bn ? 1 : -1;
    int c = memcmp(s1, s2, n1 < n2 ? n1 : n2);
    if (c)
        return c < 0 ? -1 : 1;
    return n1 < n2 ? -1 : n1 > n2;
}

int sqlv_key_cmp(const SqlValue *a, const SqlValue *b, bool desc, bool nulls_first)
{
    if (a->is_null || b->is_null) {
        if (a->is_null && b->is_null)
            return 0;
        int c = a->is_null ? 1 : -1;
        return nulls_first ? -c : c;
    }
    int c = sqlv_cmp(a, b);
    return desc ? -c : c;
}

bool sqlv_same(const SqlValue *a, const SqlValue *b)
{
    return sqlv_cmp(a, b) == 0;
}

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

uint64_t sqlv_hash(const SqlValue *v)
{
    if (v->is_null)
        return 0x9e3779b97f4a7c15ULL;
    if (QR_SQL_IS_ARRAY(v->type))
        return mix(sqla_hash(v));
    if (v->type == QR_SQL_INTERVAL)
        return mix(sqld_interval_hash(v));
    if (v->type == QR_SQL_UUID) {
        uint64_t x, y;
        memcpy(&x, v->u.uuid, 8);
        memcpy(&y, v->u.uuid + 8, 8);
        return mix(x ^ mix(y));
    }
    if (sqlt_is_str(v->type) || v->type == QR_SQL_BYTEA || v->type == QR_SQL_JSON ||
        v->type == QR_SQL_JSONB) {
        uint64_t h = 1469598103934665603ULL;
        for (size_t i = 0; i < v->u.s.n; i++)
            h = (h ^ (uint8_t)v->u.s.s[i]) * 1099511628211ULL;
        return mix(h);
    }
    /* numbers hash by value so 1 and 1.0 meet in the same bucket */
    double d = num_of(v);
    if (d == 0)
        d = 0; /* -0 */
    if (isnan(d))
        return 0x7ff8;
    int64_t i = (int64_t)d;
    if ((double)i == d)
        return mix((uint64_t)i);
    uint64_t bits;
    memcpy(&bits, &d, 8);
    return mix(bits);
}

/* ---- text and JSON forms ---- */

static void put_float(QrBuf *out, double d, bool f4)
{
    if (isnan(d)) {
        qr_buf_append(out, "NaN", 3);
        return;
    }
    if (isinf(d)) {
        if (d < 0)
            qr_buf_append(out, "-Infinity", 9);
        else
            qr_buf_append(out, "Infinity", 8);
        return;
    }
    qr_buf_double(out, d, f4);
}

static void put_ts(QrBuf *out, int64_t us, bool tz)
{
    SqlTm tm;
    int32_t off = tz ? sqlz_display_offset(us) : 0; /* timestamptz: the session's zone */
    sqld_split(us + (int64_t)off * 1000000, &tm);
    if (tm.year > 0)
        qr_buf_printf(out, "%04" PRId64 "-%02u-%02u %02u:%02u:%02u", tm.year, tm.mon, tm.day,
                      tm.hour, tm.min, tm.sec);
    else
        qr_buf_printf(out, "%04" PRId64 "-%02u-%02u %02u:%02u:%02u BC", 1 - tm.year, tm.mon,
                      tm.day, tm.hour, tm.min, tm.sec);
    if (tm.usec) {
        char f[16];
        snprintf(f, sizeof f, "%06u", tm.usec);
        int n = 6;
        while (n > 0 && f[n - 1] == '0')
            n--;
        qr_buf_putc(out, '.');
        qr_buf_append(out, f, (size_t)n);
    }
    if (tz) {
        int32_t a = off < 0 ? -off : off;
        qr_buf_printf(out, "%c%02d", off < 0 ? '-' : '+', a / 3600);
        if (a % 3600)
            qr_buf_printf(out, ":%02d", a % 3600 / 60);
        if (a % 60)
            qr_buf_printf(out, ":%02d", a % 60);
    }
}

void qr_sql_value_text(const QrSqlValue *v, QrBuf *out)
{
    if (v->is_null)
        return;
    if (QR_SQL_IS_ARRAY(v->type)) {
        sqla_out(v, out);
        return;
    }
    switch (v->type) {
    case QR_SQL_BOOL:
        qr_buf_putc(out, v->u.b ? 't' : 'f');
        break;
    case QR_SQL_INT2:
    case QR_SQL_INT4:
    case QR_SQL_INT8:
    case QR_SQL_OID:
        qr_buf_printf(out, "%" PRId64, v->u.i);
        break;
    case QR_SQL_FLOAT4:
    case QR_SQL_FLOAT8:
        put_float(out, v->u.f, v->type == QR_SQL_FLOAT4);
        break;
    case QR_SQL_TIMESTAMP:
    case QR_SQL_TIMESTAMPTZ:
        put_ts(out, v->u.i, v->type == QR_SQL_TIMESTAMPTZ);
        break;
    case QR_SQL_DATE:
        sqld_date_out(v->u.i, out);
        break;
    case QR_SQL_TIME:
        sqld_time_out(v->u.i, out);
        break;
    case QR_SQL_INTERVAL:
        sqld_interval_out(v, out);
        break;
    case QR_SQL_UUID:
        sqlb_uuid_out(v->u.uuid, out);
        break;
    case QR_SQL_BYTEA:
        sqlb_bytea_out(v, out);
        break;
    default:
        qr_buf_append(out, v->u.s.s ? v->u.s.s : "", v->u.s.n);
        break;
    }
}

void sqlv_json(const SqlValue *v, QrBuf *out)
{
    if (v->is_null) {
        qr_buf_append(out, "null", 4);
        return;
    }
    if (QR_SQL_IS_ARRAY(v->type)) { /* its text form, as a string */
        QrBuf t;
        qr_buf_init(&t);
        sqla_out(v, &t);
        qr_buf_json_str(out, t.data ? (const char *)t.data : "", t.len);
        qr_buf_free(&t);
        return;
    }
    switch (v->type) {
    case QR_SQL_BOOL:
        if (v->u.b)
            qr_buf_append(out, "true", 4);
        else
            qr_buf_append(out, "false", 5);
        break;
    case QR_SQL_INT2:
    case QR_SQL_INT4:
    case QR_SQL_INT8:
    case QR_SQL_OID:
        qr_buf_printf(out, "%" PRId64, v->u.i);
        break;
    case QR_SQL_FLOAT4:
    case QR_SQL_FLOAT8:
        if (isnan(v->u.f) || isinf(v->u.f))
            qr_buf_append(out, "null", 4);
        else
            put_float(out, v->u.f, v->type == QR_SQL_FLOAT4);
        break;
    case QR_SQL_NUMERIC:
        qr_buf_append(out, v->u.s.s, v->u.s.n);
        break;
    case QR_SQL_TIMESTAMP:
    case QR_SQL_TIMESTAMPTZ: {
        char b[48];
        qr_format_timestamp(v->u.i, b, sizeof b);
        qr_buf_json_str(out, b, strlen(b));
        break;
    }
    case QR_SQL_DATE:
    case QR_SQL_TIME:
    case QR_SQL_INTERVAL:
    case QR_SQL_UUID:
    case QR_SQL_BYTEA:
    case QR_SQL_JSON:
    case QR_SQL_JSONB: {
        QrBuf t;
        qr_buf_init(&t);
        qr_sql_value_text(v, &t);
        qr_buf_json_str(out, t.data ? (const char *)t.data : "", t.len);
        qr_buf_free(&t);
        break;
    }
    default:
        qr_buf_json_str(out, v->u.s.s ? v->u.s.s : "", v->u.s.n);
        break;
    }
}

/* ---- date functions shared with sql_func.c ---- */

int sqlv_date_trunc(const char *unit, int64_t us, int64_t *out)
{
    SqlTm tm;
    sqld_split(us, &tm);
    if (!strcasecmp(unit, "microseconds")) {
        *out = us;
        return 0;
    }
    if (!strcasecmp(unit, "milliseconds")) {
        tm.usec -= tm.usec % 1000;
    } else if (!strcasecmp(unit, "second")) {
        tm.usec = 0;
    } else if (!strcasecmp(unit, "minute")) {
        tm.usec = tm.sec = 0;
    } else if (!strcasecmp(unit, "hour")) {
        tm.usec = tm.sec = tm.min = 0;
    } else if (!strcasecmp(unit, "day")) {
        tm.usec = tm.sec = tm.min = tm.hour = 0;
    } else if (!strcasecmp(unit, "week")) {
        int64_t days = sqld_days_from_civil(tm.year, tm.mon, tm.day);
        days -= (tm.dow + 6) % 7; /* ISO weeks start on Monday */
        *out = days * US_PER_DAY;
        return 0;
    } else if (!strcasecmp(unit, "month")) {
        tm.usec = tm.sec = tm.min = tm.hour = 0;
        tm.day = 1;
    } else if (!strcasecmp(unit, "quarter")) {
        tm.usec = tm.sec = tm.min = tm.hour = 0;
        tm.day = 1;
        tm.mon = (tm.mon - 1) / 3 * 3 + 1;
    } else if (!strcasecmp(unit, "year")) {
        tm.usec = tm.sec = tm.min = tm.hour = 0;
        tm.day = tm.mon = 1;
    } else if (!strcasecmp(unit, "decade")) {
        tm.usec = tm.sec = tm.min = tm.hour = 0;
        tm.day = tm.mon = 1;
        tm.year -= ((tm.year % 10) + 10) % 10;
    } else {
        return -1;
    }
    *out = sqld_join(&tm);
    return 0;
}

int sqlv_extract(const char *field, int64_t us, double *out)
{
    SqlTm tm;
    sqld_split(us, &tm);
    const struct {
        const char *name;
        double v;
    } F[] = {
        {"year", (double)tm.year},      {"month", tm.mon},
        {"day", tm.day},                {"hour", tm.hour},
        {"minute", tm.min},             {"second", tm.sec + tm.usec / 1e6},
        {"dow", tm.dow},                {"isodow", tm.dow ? tm.dow : 7},
        {"doy", tm.doy},                {"quarter", (tm.mon - 1) / 3 + 1},
        {"epoch", (double)us / 1e6},    {"microseconds", tm.sec * 1e6 + tm.usec},
        {"milliseconds", tm.sec * 1e3 + tm.usec / 1e3},
    };
    for (size_t i = 0; i < sizeof F / sizeof *F; i++)
        if (!strcasecmp(field, F[i].name)) {
            *out = F[i].v;
            return 0;
        }
    return -1;
}

/* ---- arrays as text ---- */

static int array_push(SqlCtx *cx, SqlValue **v, uint64_t *n, uint64_t *cap, SqlValue x)
{
    if (*n == *cap) {
        uint64_t nc = *cap ? *cap * 2 : 8;
        SqlValue *nv = qr_arena_alloc(cx->arena, nc * sizeof *nv);
        if (!nv)
            return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
        if (*n)
            memcpy(nv, *v, *n * sizeof *nv);
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = x;
    return QR_OK;
}

int sqlv_array_parse(SqlCtx *cx, const SqlValue *arr, SqlValue **elems, uint64_t *n)
{
    *elems = NULL;
    *n = 0;
    if (arr->is_null)
        return QR_OK;
    SqlValue t;
    int rc = sqlv_cast(cx, arr, QR_SQL_TEXT, -1, &t);
    if (rc)
        return rc;
    const char *p = t.u.s.s, *end = p + t.u.s.n;
    uint64_t cap = 0;
    while (p < end && isspace((unsigned char)*p))
        p++;
    if (p == end || *p != '{') { /* int2vector / oidvector: "1 2 3" */
        while (p < end) {
            const char *w = p;
            while (p < end && !isspace((unsigned char)*p))
                p++;
            if (p > w && (rc = array_push(cx, elems, n, &cap, sqlv_text(w, (size_t)(p - w)))))
                return rc;
            while (p < end && isspace((unsigned char)*p))
                p++;
        }
        return QR_OK;
    }
    char *buf = qr_arena_alloc(cx->arena, t.u.s.n + 1);
    if (!buf)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    size_t pos = 0, k;
    bool null;
    int got;
    while ((got = qr_array_next(t.u.s.s, t.u.s.n, &pos, buf, &k, &null)) > 0) {
        SqlValue x = sqlv_text(buf, k);
        if (null) {
            x = sqlv_null();
            x.type = QR_SQL_TEXT;
        }
        buf += k;
        if ((rc = array_push(cx, elems, n, &cap, x)))
            return rc;
    }
    if (got < 0)
        return sql_err_at(cx, -1, QR_EINVAL, "22P02", "malformed array literal: \"%.*s\"",
                          (int)(t.u.s.n > 64 ? 64 : t.u.s.n), t.u.s.s);
    return QR_OK;
}

int sqlv_array_text(SqlCtx *cx, const SqlValue *elems, uint64_t n, SqlValue *out)
{
    QrBuf b, e;
    qr_buf_init(&b);
    qr_buf_putc(&b, '{');
    for (uint64_t i = 0; i < n; i++) {
        if (i)
            qr_buf_putc(&b, ',');
        if (elems[i].is_null) {
            qr_buf_append(&b, "NULL", 4);
            continue;
        }
        qr_buf_init(&e);
        qr_sql_value_text(&elems[i], &e);
        qr_buf_array_elem(&b, e.data ? (const char *)e.data : "", e.len);
        qr_buf_free(&e);
    }
    qr_buf_putc(&b, '}');
    char *s = qr_buf_ok(&b) ? qr_arena_strndup(cx->arena, (const char *)b.data, b.len) : NULL;
    size_t len = b.len;
    qr_buf_free(&b);
    if (!s)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    *out = sqlv_text(s, len);
    return QR_OK;
}

/* ---- binary send form ---- */

#define PG_EPOCH_OFFSET_US 946684800000000LL /* 2000-01-01 minus 1970-01-01 */

static void put_be(QrBuf *b, uint64_t v, int n)
{
    uint8_t x[8];
    for (int i = 0; i < n; i++)
        x[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    qr_buf_append(b, x, (size_t)n);
}

/* Decimal text -> PostgreSQL binary numeric: ndigits, weight, sign, dscale,
 * then base-10000 digits. */
static void put_numeric_binary(QrBuf *b, const char *s, size_t n)
{
    uint16_t sign = 0;
    size_t i = 0;
    if (n == 3 && !memcmp(s, "NaN", 3)) {
        put_be(b, 0, 2), put_be(b, 0, 2), put_be(b, 0xC000, 2), put_be(b, 0, 2);
        return;
    }
    if (i < n && (s[i] == '-' || s[i] == '+'))
        sign = s[i++] == '-' ? 0x4000 : 0;
    if (n - i == 8 && !memcmp(s + i, "Infinity", 8)) {
        put_be(b, 0, 2), put_be(b, 0, 2);
        put_be(b, sign ? 0xF000 : 0xD000, 2), put_be(b, 0, 2);
        return;
    }
    size_t i0 = i, il = 0, f0 = 0, fl = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
        il++;
    if (i < n && s[i] == '.') {
        f0 = ++i;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            fl++;
    }
    /* base-10000 groups: integer part padded left, fraction padded right */
    size_t lead = (4 - il % 4) % 4;
    size_t n_int = (il + lead) / 4, n_frac = (fl + 3) / 4;
    int weight = (int)n_int - 1, first = 0, nd = (int)(n_int + n_frac);
    uint16_t small[64], *digits = nd <= 64 ? small : qr_malloc((size_t)nd * sizeof *digits);
    if (!digits) {
        b->oom = true;
        return;
    }
    for (size_t g = 0; g < n_int; g++) {
        int v = 0;
        for (size_t k = 0; k < 4; k++) {
            size_t pos = g * 4 + k;
            v = v * 10 + (pos < lead ? 0 : s[i0 + pos - lead] - '0');
        }
        digits[g] = (uint16_t)v;
    }
    for (size_t g = 0; g < n_frac; g++) {
        int v = 0;
        for (size_t k = 0; k < 4; k++) {
            size_t pos = g * 4 + k;
            v = v * 10 + (pos < fl ? s[f0 + pos] - '0' : 0);
        }
        digits[n_int + g] = (uint16_t)v;
    }
    while (first < nd && digits[first] == 0)
        first++, weight--;
    while (nd > first && digits[nd - 1] == 0)
        nd--;
    if (first == nd)
        weight = 0, sign = 0, first = nd = 0;
    put_be(b, (uint64_t)(nd - first), 2);
    put_be(b, (uint64_t)(uint16_t)(int16_t)weight, 2);
    put_be(b, sign, 2);
    put_be(b, fl, 2);
    for (int k = first; k < nd; k++)
        put_be(b, digits[k], 2);
    if (digits != small)
        qr_free(digits);
}

void qr_sql_value_send(const QrSqlValue *v, QrBuf *b)
{
    if (v->is_null)
        return;
    if (QR_SQL_IS_ARRAY(v->type)) {
        sqla_send(v, b);
        return;
    }
    switch (v->type) {
    case QR_SQL_BOOL:
        qr_buf_putc(b, v->u.b ? 1 : 0);
        break;
    case QR_SQL_INT2:
        put_be(b, (uint64_t)v->u.i, 2);
        break;
    case QR_SQL_INT4:
    case QR_SQL_OID:
        put_be(b, (uint64_t)v->u.i, 4);
        break;
    case QR_SQL_INT8:
        put_be(b, (uint64_t)v->u.i, 8);
        break;
    case QR_SQL_FLOAT4: {
        float f = (float)v->u.f;
        uint32_t w;
        memcpy(&w, &f, 4);
        put_be(b, w, 4);
        break;
    }
    case QR_SQL_FLOAT8: {
        uint64_t w;
        memcpy(&w, &v->u.f, 8);
        put_be(b, w, 8);
        break;
    }
    case QR_SQL_TIMESTAMP:
    case QR_SQL_TIMESTAMPTZ:
        put_be(b, (uint64_t)(v->u.i - PG_EPOCH_OFFSET_US), 8);
        break;
    case QR_SQL_NUMERIC:
        put_numeric_binary(b, v->u.s.s, v->u.s.n);
        break;
    case QR_SQL_DATE:
    case QR_SQL_TIME:
    case QR_SQL_INTERVAL:
        sqld_send(v, b);
        break;
    case QR_SQL_UUID:
        qr_buf_append(b, v->u.uuid, 16);
        break;
    case QR_SQL_JSONB: /* version 1, then the text */
        qr_buf_putc(b, 1);
        qr_buf_append(b, v->u.s.s, v->u.s.n);
        break;
    case QR_SQL_BYTEA:
        qr_buf_append(b, v->u.s.s, v->u.s.n);
        break;
    default:
        qr_sql_value_text(v, b);
        break;
    }
}

int sqlv_numeric_recv(SqlCtx *cx, const uint8_t *p, size_t n, SqlValue *out)
{
    if (n < 8)
        goto bad;
    int nd = p[0] << 8 | p[1];
    int weight = (int16_t)(p[2] << 8 | p[3]);
    unsigned sign = (unsigned)(p[4] << 8 | p[5]);
    int dscale = p[6] << 8 | p[7];
    if (n != 8 + 2 * (size_t)nd || dscale > 0x3FFF)
        goto bad;
    const char *special = sign == 0xC000 ? "NaN" : sign == 0xD000 ? "Infinity"
                          : sign == 0xF000 ? "-Infinity" : NULL;
    if (special) {
        *out = sqlv_text(special, strlen(special));
        out->type = QR_SQL_NUMERIC;
        return QR_OK;
    }
    if (sign != 0 && sign != 0x4000)
        goto bad;
    QrBuf b;
    qr_buf_init(&b);
    if (sign)
        qr_buf_putc(&b, '-');
    /* integer part: groups weight..0, the first without leading zeros */
    if (weight < 0) {
        qr_buf_putc(&b, '0');
    } else {
        for (int g = 0; g <= weight; g++) {
            int d = g < nd ? (p[8 + 2 * g] << 8 | p[9 + 2 * g]) : 0;
            if (d > 9999) {
                qr_buf_free(&b);
                goto bad;
            }
            qr_buf_printf(&b, g == 0 ? "%d" : "%04d", d);
        }
    }
    if (dscale > 0) {
        qr_buf_putc(&b, '.');
        for (int k = 0; k < dscale; k++) {
            int g = weight + 1 + k / 4; /* the group holding fraction digit k */
            int d = g >= 0 && g < nd ? (p[8 + 2 * g] << 8 | p[9 + 2 * g]) : 0;
            static const int div[4] = {1000, 100, 10, 1};
            qr_buf_putc(&b, (uint8_t)('0' + d / div[k % 4] % 10));
        }
    }
    char *s = qr_buf_ok(&b) ? qr_arena_strndup(cx->arena, (const char *)b.data, b.len) : NULL;
    size_t len = b.len;
    qr_buf_free(&b);
    if (!s)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    /* "-0" is 0 */
    if (len == 2 && s[0] == '-' && s[1] == '0')
        s++, len--;
    *out = sqlv_text(s, len);
    out->type = QR_SQL_NUMERIC;
    return QR_OK;
bad:
    return sql_err_at(cx, -1, QR_EINVAL, "22P03", "invalid numeric in binary data");
}
