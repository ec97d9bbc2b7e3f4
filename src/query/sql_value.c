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

/* ---- the type table ---- */

static const struct {
    uint32_t oid;
    const char *name;
    int16_t len;
} TYPES[QR_SQL_TYPE_COUNT] = {
    [QR_SQL_UNKNOWN] = {25, "text", -1},       [QR_SQL_BOOL] = {16, "bool", 1},
    [QR_SQL_INT2] = {21, "int2", 2},           [QR_SQL_INT4] = {23, "int4", 4},
    [QR_SQL_INT8] = {20, "int8", 8},           [QR_SQL_FLOAT4] = {700, "float4", 4},
    [QR_SQL_FLOAT8] = {701, "float8", 8},      [QR_SQL_NUMERIC] = {1700, "numeric", -1},
    [QR_SQL_TEXT] = {25, "text", -1},          [QR_SQL_VARCHAR] = {1043, "varchar", -1},
    [QR_SQL_NAME] = {19, "name", 64},          [QR_SQL_CHAR] = {18, "char", 1},
    [QR_SQL_OID] = {26, "oid", 4},             [QR_SQL_TIMESTAMP] = {1114, "timestamp", 8},
    [QR_SQL_TIMESTAMPTZ] = {1184, "timestamptz", 8},
};

uint32_t qr_sql_type_oid(QrSqlType t) { return t < QR_SQL_TYPE_COUNT ? TYPES[t].oid : 25; }
const char *qr_sql_type_name(QrSqlType t) { return t < QR_SQL_TYPE_COUNT ? TYPES[t].name : "text"; }
int16_t qr_sql_type_len(QrSqlType t) { return t < QR_SQL_TYPE_COUNT ? TYPES[t].len : -1; }

bool qr_sql_type_from_oid(uint32_t oid, QrSqlType *out)
{
    for (int t = 1; t < QR_SQL_TYPE_COUNT; t++)
        if (TYPES[t].oid == oid) {
            *out = (QrSqlType)t;
            return true;
        }
    if (oid == 705) { /* unknown */
        *out = QR_SQL_TEXT;
        return true;
    }
    return false;
}

bool sqlt_is_int(QrSqlType t)
{
    return t == QR_SQL_INT2 || t == QR_SQL_INT4 || t == QR_SQL_INT8 || t == QR_SQL_OID;
}
bool sqlt_is_float(QrSqlType t)
{
    return t == QR_SQL_FLOAT4 || t == QR_SQL_FLOAT8 || t == QR_SQL_NUMERIC;
}
bool sqlt_is_num(QrSqlType t) { return sqlt_is_int(t) || sqlt_is_float(t); }
bool sqlt_is_str(QrSqlType t)
{
    return t == QR_SQL_TEXT || t == QR_SQL_VARCHAR || t == QR_SQL_NAME || t == QR_SQL_CHAR ||
           t == QR_SQL_UNKNOWN;
}
bool sqlt_is_ts(QrSqlType t) { return t == QR_SQL_TIMESTAMP || t == QR_SQL_TIMESTAMPTZ; }

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
    {"bpchar", QR_SQL_VARCHAR},    {"name", QR_SQL_NAME},
    {"char", QR_SQL_CHAR},         {"oid", QR_SQL_OID},
    {"regclass", QR_SQL_OID},      {"regtype", QR_SQL_OID},
    {"timestamp", QR_SQL_TIMESTAMP}, {"timestamptz", QR_SQL_TIMESTAMPTZ},
    {"date", QR_SQL_TIMESTAMP},
};

bool sqlt_from_name(const char *name, QrSqlType *out)
{
    for (size_t i = 0; i < sizeof TYPE_NAMES / sizeof *TYPE_NAMES; i++)
        if (strcasecmp(TYPE_NAMES[i].name, name) == 0) {
            *out = TYPE_NAMES[i].t;
            return true;
        }
    return false;
}

/* ---- timestamps ---- */

/* Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t yy = (int64_t)yoe + era * 400;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yy + (*m <= 2);
}

#define US_PER_DAY 86400000000LL

/* Broken-down UTC time of microseconds since the epoch. */
typedef struct SqlTm {
    int64_t year;
    unsigned mon, day, hour, min, sec, usec, dow, doy;
} SqlTm;

static void ts_split(int64_t us, SqlTm *tm)
{
    int64_t days = us / US_PER_DAY, rem = us % US_PER_DAY;
    if (rem < 0) {
        rem += US_PER_DAY;
        days--;
    }
    civil_from_days(days, &tm->year, &tm->mon, &tm->day);
    tm->hour = (unsigned)(rem / 3600000000LL);
    tm->min = (unsigned)(rem / 60000000LL % 60);
    tm->sec = (unsigned)(rem / 1000000 % 60);
    tm->usec = (unsigned)(rem % 1000000);
    tm->dow = (unsigned)(((days % 7) + 11) % 7); /* 1970-01-01 was a Thursday (4) */
    tm->doy = (unsigned)(days - days_from_civil(tm->year, 1, 1) + 1);
}

static int64_t ts_join(const SqlTm *tm)
{
    return days_from_civil(tm->year, tm->mon, tm->day) * US_PER_DAY +
           (int64_t)tm->hour * 3600000000LL + (int64_t)tm->min * 60000000LL +
           (int64_t)tm->sec * 1000000LL + tm->usec;
}

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
    return qr_parse_timestamp(buf, n, us);
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
    if (v->is_null || (!sqlt_is_str(v->type) && v->type != QR_SQL_NUMERIC))
        return QR_OK;
    char *s = qr_arena_strndup(cx->arena, v->u.s.s ? v->u.s.s : "", v->u.s.n);
    if (!s)
        return sql_err_at(cx, -1, QR_ELIMIT, NULL, "query memory limit exceeded");
    v->u.s.s = s;
    return QR_OK;
}

static int text_value(SqlCtx *cx, const SqlValue *in, QrSqlType to, SqlValue *out)
{
    QrBuf b;
    qr_buf_init(&b);
    qr_sql_value_text(in, &b);
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
        if (sqlt_is_str(from)) {
            double d;
            if (!parse_float(in->u.s.s, in->u.s.n, &d))
                return cast_err(cx, loc, "22P02", "invalid input syntax", to, in);
        }
        if (sqlt_is_str(from) || sqlt_is_num(from))
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
            if (from == QR_SQL_NUMERIC && !parse_float(in->u.s.s, in->u.s.n, &d))
                return cast_err(cx, loc, "22P02", "invalid input syntax", to, in);
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
        else if (sqlt_is_str(from) || from == QR_SQL_NUMERIC) {
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
    if (sqlt_is_int(v->type) || sqlt_is_ts(v->type))
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
    bool ai = sqlt_is_int(a->type) || sqlt_is_ts(a->type) || a->type == QR_SQL_BOOL;
    bool bi = sqlt_is_int(b->type) || sqlt_is_ts(b->type) || b->type == QR_SQL_BOOL;
    if (ai && bi) {
        int64_t x = a->type == QR_SQL_BOOL ? a->u.b : a->u.i;
        int64_t y = b->type == QR_SQL_BOOL ? b->u.b : b->u.i;
        return x < y ? -1 : x > y;
    }
    bool an = ai || sqlt_is_float(a->type), bn = bi || sqlt_is_float(b->type);
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
    if (!sqlt_is_str(a->type) && a->type != QR_SQL_NUMERIC)
        return an ? -1 : 1;
    if (!sqlt_is_str(b->type) && b->type != QR_SQL_NUMERIC)
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
    if (sqlt_is_str(v->type)) {
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
    char buf[40];
    for (int p = f4 ? 6 : 15; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, d);
        if (f4 ? (float)strtod(buf, NULL) == (float)d : strtod(buf, NULL) == d)
            break;
    }
    qr_buf_append(out, buf, strlen(buf));
}

static void put_ts(QrBuf *out, int64_t us, bool tz)
{
    SqlTm tm;
    int32_t off = tz ? sqlz_display_offset(us) : 0; /* timestamptz: the session's zone */
    ts_split(us + (int64_t)off * 1000000, &tm);
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
    default:
        qr_buf_json_str(out, v->u.s.s ? v->u.s.s : "", v->u.s.n);
        break;
    }
}

/* ---- date functions shared with sql_func.c ---- */

int sqlv_date_trunc(const char *unit, int64_t us, int64_t *out)
{
    SqlTm tm;
    ts_split(us, &tm);
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
        int64_t days = days_from_civil(tm.year, tm.mon, tm.day);
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
    *out = ts_join(&tm);
    return 0;
}

int sqlv_extract(const char *field, int64_t us, double *out)
{
    SqlTm tm;
    ts_split(us, &tm);
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
    p++;
    char *buf = qr_arena_alloc(cx->arena, t.u.s.n + 1);
    if (!buf)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    bool closed = false;
    while (p < end && !closed) {
        while (p < end && isspace((unsigned char)*p))
            p++;
        if (p < end && *p == '}' && *n == 0) {
            closed = true;
            p++;
            break;
        }
        size_t k = 0;
        bool quoted = false;
        if (p < end && *p == '"') {
            quoted = true;
            for (p++; p < end && *p != '"'; p++) {
                if (*p == '\\' && p + 1 < end)
                    p++;
                buf[k++] = *p;
            }
            if (p == end)
                break;
            p++;
        } else {
            while (p < end && *p != ',' && *p != '}') {
                if (*p == '\\' && p + 1 < end)
                    p++;
                buf[k++] = *p++;
            }
            while (k && isspace((unsigned char)buf[k - 1]))
                k--;
        }
        SqlValue x = sqlv_text(buf, k);
        if (!quoted && k == 4 && !strncasecmp(buf, "NULL", 4)) {
            x = sqlv_null();
            x.type = QR_SQL_TEXT;
        }
        buf += k;
        if ((rc = array_push(cx, elems, n, &cap, x)))
            return rc;
        while (p < end && isspace((unsigned char)*p))
            p++;
        if (p < end && *p == ',')
            p++;
        else if (p < end && *p == '}') {
            closed = true;
            p++;
        } else
            break;
    }
    while (p < end && isspace((unsigned char)*p))
        p++;
    if (!closed || p != end)
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
        const char *s = e.data ? (const char *)e.data : "";
        bool quote = e.len == 0 || (e.len == 4 && !strncasecmp(s, "NULL", 4));
        for (size_t k = 0; k < e.len && !quote; k++)
            quote = strchr("{},\"\\ \t\n", s[k]) != NULL;
        if (quote)
            qr_buf_putc(&b, '"');
        for (size_t k = 0; k < e.len; k++) {
            if (quote && (s[k] == '"' || s[k] == '\\'))
                qr_buf_putc(&b, '\\');
            qr_buf_putc(&b, (uint8_t)s[k]);
        }
        if (quote)
            qr_buf_putc(&b, '"');
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
