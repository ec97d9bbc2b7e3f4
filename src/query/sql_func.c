/*
 * sql_func.c — built-in scalar functions, described as data (one table row
 * per name: arity, result type, strictness, implementation).  Catalog and
 * session functions (version(), current_database()...) live behind the
 * sqlcat_func_* hooks instead.
 *
 * Layer: query/.  Calls sql_value.c.
 */
#include "query/sql_int.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "store/util.h"

static int out_str(SqlCtx *cx, const char *s, size_t n, SqlValue *out)
{
    char *d = qr_arena_strndup(cx->arena, s, n);
    if (!d)
        return sql_err_at(cx, -1, QR_ELIMIT, NULL, "query memory limit exceeded");
    *out = sqlv_text(d, n);
    return QR_OK;
}

/* A result longer than SQL_TEXT_MAX (PostgreSQL's 54000 for repeat, lpad...). */
static int text_too_long(SqlCtx *cx)
{
    sql_err_at(cx, -1, QR_ELIMIT, "54000", "requested length too large");
    qr_error_detail(cx->err, "results of string functions are limited to %u bytes",
                    (unsigned)SQL_TEXT_MAX);
    return QR_ELIMIT;
}

static int as_text(SqlCtx *cx, const SqlValue *in, SqlValue *out)
{
    return sqlv_cast(cx, in, QR_SQL_TEXT, -1, out);
}

static int as_float(SqlCtx *cx, const SqlValue *in, double *d)
{
    SqlValue v;
    int rc = sqlv_cast(cx, in, QR_SQL_FLOAT8, -1, &v);
    *d = v.u.f;
    return rc;
}

static int as_int(SqlCtx *cx, const SqlValue *in, int64_t *i)
{
    SqlValue v;
    int rc = sqlv_cast(cx, in, QR_SQL_INT8, -1, &v);
    *i = v.u.i;
    return rc;
}

/* ASCII case mapping (multi-byte UTF-8 sequences pass through unchanged). */
static int f_case(SqlCtx *cx, const SqlValue *a, bool up, SqlValue *out)
{
    SqlValue t;
    int rc = as_text(cx, a, &t);
    if (rc)
        return rc;
    char *d = qr_arena_alloc(cx->arena, t.u.s.n + 1);
    if (!d)
        return sql_err_at(cx, -1, QR_ELIMIT, NULL, "query memory limit exceeded");
    for (size_t i = 0; i < t.u.s.n; i++)
        d[i] = (char)(up ? toupper((unsigned char)t.u.s.s[i]) : tolower((unsigned char)t.u.s.s[i]));
    d[t.u.s.n] = 0;
    *out = sqlv_text(d, t.u.s.n);
    return QR_OK;
}

static int f_lower(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    return f_case(cx, a, false, out);
}
static int f_upper(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    return f_case(cx, a, true, out);
}

static int64_t utf8_len(const char *s, size_t n)
{
    int64_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* byte offset of the k-th (0-based) character */
static size_t utf8_off(const char *s, size_t n, int64_t k)
{
    size_t i = 0;
    while (i < n && k > 0) {
        i++;
        while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80)
            i++;
        k--;
    }
    return i;
}

static int f_length(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    SqlValue t;
    if (a->type == QR_SQL_BYTEA) { /* bytes, as octet_length */
        *out = sqlv_int((int64_t)a->u.s.n);
        out->type = QR_SQL_INT4;
        return QR_OK;
    }
    int rc = as_text(cx, a, &t);
    if (rc)
        return rc;
    *out = sqlv_int(utf8_len(t.u.s.s, t.u.s.n));
    out->type = QR_SQL_INT4;
    return QR_OK;
}

static int f_octet_length(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    SqlValue t = *a;
    int rc = a->type == QR_SQL_BYTEA ? QR_OK : as_text(cx, a, &t);
    *out = sqlv_int((int64_t)t.u.s.n);
    out->type = QR_SQL_INT4;
    return rc;
}

static int f_substr(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    SqlValue t;
    int64_t from, len = INT64_MAX;
    int rc = as_text(cx, &a[0], &t);
    if (rc || (rc = as_int(cx, &a[1], &from)) || (n > 2 && (rc = as_int(cx, &a[2], &len))))
        return rc;
    if (len < 0)
        return sql_err_at(cx, -1, QR_EINVAL, "22011", "negative substring length not allowed");
    /* characters [from, from + len) counted from 1; before 1 is cut (the
     * sum saturates: substr(s, 2^62, 2^62) must not wrap) */
    int64_t end;
    if (n < 3 || __builtin_add_overflow(from, len, &end))
        end = INT64_MAX;
    if (from < 1)
        from = 1;
    if (end <= from) {
        *out = sqlv_text("", 0);
        return QR_OK;
    }
    size_t b0 = utf8_off(t.u.s.s, t.u.s.n, from - 1);
    size_t b1 = end == INT64_MAX ? t.u.s.n : utf8_off(t.u.s.s, t.u.s.n, end - 1);
    *out = sqlv_text(t.u.s.s + b0, b1 - b0);
    return QR_OK;
}

static int f_trim(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out, int side)
{
    SqlValue t, c;
    int rc = as_text(cx, &a[0], &t);
    if (rc)
        return rc;
    const char *chars = " ";
    size_t nc = 1;
    if (n > 1) {
        if ((rc = as_text(cx, &a[1], &c)))
            return rc;
        chars = c.u.s.s;
        nc = c.u.s.n;
    }
    size_t i = 0, j = t.u.s.n;
    if (side & 1)
        while (i < j && memchr(chars, t.u.s.s[i], nc))
            i++;
    if (side & 2)
        while (j > i && memchr(chars, t.u.s.s[j - 1], nc))
            j--;
    *out = sqlv_text(t.u.s.s + i, j - i);
    return QR_OK;
}
static int f_btrim(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out) { return f_trim(cx, n, a, out, 3); }
static int f_ltrim(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out) { return f_trim(cx, n, a, out, 1); }
static int f_rtrim(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out) { return f_trim(cx, n, a, out, 2); }

/* The first occurrence of needle[0, m) (m > 0) in hay[0, n), or NULL.
 * memchr, then compare: reads only up to the match (memmem's checked
 * builds read the whole rest each call, quadratic over many matches). */
static const char *find_bytes(const char *hay, size_t n, const char *needle, size_t m)
{
    const char *end = hay + n;
    while ((size_t)(end - hay) >= m) {
        const char *c = memchr(hay, needle[0], (size_t)(end - hay) - m + 1);
        if (!c)
            return NULL;
        if (memcmp(c, needle, m) == 0)
            return c;
        hay = c + 1;
    }
    return NULL;
}

static int f_replace(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    SqlValue s, f, r;
    int rc;
    if ((rc = as_text(cx, &a[0], &s)) || (rc = as_text(cx, &a[1], &f)) || (rc = as_text(cx, &a[2], &r)))
        return rc;
    if (f.u.s.n == 0) {
        *out = s;
        return QR_OK;
    }
    /* count first: the result's length is checked before it is built
     * (replace(repeat('a', 10^7), 'a', repeat('b', 10^7)) asks for 10^14) */
    uint64_t hits = 0;
    for (const char *p = s.u.s.s, *end = s.u.s.s + s.u.s.n;
         (p = find_bytes(p, (size_t)(end - p), f.u.s.s, f.u.s.n)) != NULL; p += f.u.s.n)
        hits++;
    if (r.u.s.n > f.u.s.n && hits > (SQL_TEXT_MAX - s.u.s.n) / (r.u.s.n - f.u.s.n))
        return text_too_long(cx);
    size_t total = s.u.s.n - hits * f.u.s.n + hits * r.u.s.n;
    char *d = qr_arena_alloc(cx->arena, total + 1);
    if (!d)
        return sql_err_at(cx, -1, QR_ELIMIT, NULL, "query memory limit exceeded");
    size_t k = 0;
    for (const char *p = s.u.s.s, *end = s.u.s.s + s.u.s.n; p < end;) {
        const char *m = find_bytes(p, (size_t)(end - p), f.u.s.s, f.u.s.n);
        size_t lit = m ? (size_t)(m - p) : (size_t)(end - p);
        memcpy(d + k, p, lit);
        k += lit;
        if (!m)
            break;
        memcpy(d + k, r.u.s.s, r.u.s.n);
        k += r.u.s.n;
        p = m + f.u.s.n;
    }
    d[k] = 0;
    *out = sqlv_text(d, k);
    return QR_OK;
}

static int f_concat(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    QrBuf b;
    qr_buf_init(&b);
    for (int i = 0; i < n; i++)
        qr_sql_value_text(&a[i], &b);
    int rc = out_str(cx, b.data ? (char *)b.data : "", b.len, out);
    qr_buf_free(&b);
    return rc;
}

static int f_strpos(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out, bool swap)
{
    (void)n;
    SqlValue s, f;
    int rc;
    if ((rc = as_text(cx, &a[swap ? 1 : 0], &s)) || (rc = as_text(cx, &a[swap ? 0 : 1], &f)))
        return rc;
    int64_t pos = 0;
    if (f.u.s.n == 0)
        pos = 1;
    for (size_t i = 0; !pos && i + f.u.s.n <= s.u.s.n; i++)
        if (memcmp(s.u.s.s + i, f.u.s.s, f.u.s.n) == 0)
            pos = utf8_len(s.u.s.s, i) + 1;
    *out = sqlv_int(pos);
    out->type = QR_SQL_INT4;
    return QR_OK;
}
/* position(sub IN s) arrives as position(s, sub) */
static int f_position(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out) { return f_strpos(cx, n, a, out, false); }

static int f_left_right(SqlCtx *cx, const SqlValue *a, SqlValue *out, bool left)
{
    SqlValue s;
    int64_t k;
    int rc;
    if ((rc = as_text(cx, &a[0], &s)) || (rc = as_int(cx, &a[1], &k)))
        return rc;
    int64_t len = utf8_len(s.u.s.s, s.u.s.n);
    int64_t take = k >= 0 ? (k < len ? k : len) : (len + k > 0 ? len + k : 0);
    size_t off = left ? 0 : utf8_off(s.u.s.s, s.u.s.n, len - take);
    size_t end = left ? utf8_off(s.u.s.s, s.u.s.n, take) : s.u.s.n;
    *out = sqlv_text(s.u.s.s + off, end - off);
    return QR_OK;
}
static int f_left(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out) { (void)n; return f_left_right(cx, a, out, true); }
static int f_right(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out) { (void)n; return f_left_right(cx, a, out, false); }

/* round / trunc / floor / ceil of a numeric (or an integer made one) to
 * k digits after the point. */
static int num_round(SqlCtx *cx, const SqlValue *a, int64_t k, int how, SqlValue *out)
{
    SqlValue x;
    int rc = sqlv_cast(cx, a, QR_SQL_NUMERIC, -1, &x);
    return rc ? rc : sqln_round(cx, &x, k, how, out);
}

static int f_abs(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    *out = a[0];
    if (sqlt_is_int(a->type)) {
        if (a->u.i == INT64_MIN)
            return sql_err_at(cx, -1, QR_EINVAL, "22003", "bigint out of range");
        out->u.i = a->u.i < 0 ? -a->u.i : a->u.i;
        return QR_OK;
    }
    if (a->type == QR_SQL_NUMERIC) { /* exact: the sign dropped */
        if (out->u.s.n && out->u.s.s[0] == '-')
            out->u.s.s++, out->u.s.n--;
        return QR_OK;
    }
    double d;
    int rc = as_float(cx, a, &d);
    *out = sqlv_float(fabs(d));
    return rc;
}

static int f_round(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    double d;
    int64_t k = 0;
    int rc;
    if (n > 1 && (rc = as_int(cx, &a[1], &k)))
        return rc;
    if (a[0].type == QR_SQL_NUMERIC || sqlt_is_int(a[0].type)) /* exact, numeric out */
        return num_round(cx, &a[0], k, SQLN_ROUND, out);
    if ((rc = as_float(cx, &a[0], &d)))
        return rc;
    double p = pow(10, (double)k);
    double r = d * p;
    r = r < 0 ? -floor(-r + 0.5) : floor(r + 0.5); /* half away from zero, as numeric */
    *out = sqlv_float(r / p);
    return QR_OK;
}

static int f_math1(SqlCtx *cx, const SqlValue *a, SqlValue *out, double (*fn)(double), bool keep_int)
{
    if (keep_int && sqlt_is_int(a->type)) {
        *out = *a;
        return QR_OK;
    }
    if (keep_int && a->type == QR_SQL_NUMERIC) /* floor, ceil, trunc: exact */
        return num_round(cx, a, 0, fn == floor ? SQLN_FLOOR : fn == ceil ? SQLN_CEIL : SQLN_TRUNC, out);
    double d;
    int rc = as_float(cx, a, &d);
    *out = sqlv_float(fn(d));
    return rc;
}
static int f_floor(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out) { (void)n; return f_math1(cx, a, out, floor, true); }
static int f_ceil(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out) { (void)n; return f_math1(cx, a, out, ceil, true); }
static int f_trunc(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    int64_t k;
    int rc;
    if (n == 1)
        return f_math1(cx, a, out, trunc, true);
    if ((rc = as_int(cx, &a[1], &k)))
        return rc;
    if (a[0].type == QR_SQL_NUMERIC || sqlt_is_int(a[0].type))
        return num_round(cx, &a[0], k, SQLN_TRUNC, out);
    double d, p = pow(10, (double)k);
    if ((rc = as_float(cx, &a[0], &d)))
        return rc;
    *out = sqlv_float(trunc(d * p) / p);
    return QR_OK;
}
static int f_exp(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out) { (void)n; return f_math1(cx, a, out, exp, false); }

static int f_sqrt(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    double d;
    int rc = as_float(cx, a, &d);
    if (rc)
        return rc;
    if (d < 0)
        return sql_err_at(cx, -1, QR_EINVAL, "2201F", "cannot take square root of a negative number");
    *out = sqlv_float(sqrt(d));
    return QR_OK;
}

static int f_ln(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    double d;
    int rc = as_float(cx, a, &d);
    if (rc)
        return rc;
    if (d <= 0)
        return sql_err_at(cx, -1, QR_EINVAL, "2201E", "cannot take logarithm of %s",
                          d == 0 ? "zero" : "a negative number");
    *out = sqlv_float(log(d));
    return QR_OK;
}

static int f_power(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    double x, y;
    int rc;
    if ((rc = as_float(cx, &a[0], &x)) || (rc = as_float(cx, &a[1], &y)))
        return rc;
    *out = sqlv_float(pow(x, y));
    return QR_OK;
}

static int f_mod(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    int64_t x, y;
    int rc;
    if ((rc = as_int(cx, &a[0], &x)) || (rc = as_int(cx, &a[1], &y)))
        return rc;
    if (y == 0)
        return sql_err_at(cx, -1, QR_EINVAL, "22012", "division by zero");
    *out = sqlv_int(y == -1 ? 0 : x % y);
    return QR_OK;
}

static int f_now(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n, (void)a;
    /* the statement's start, as PostgreSQL's transaction timestamp */
    out->type = QR_SQL_TIMESTAMPTZ;
    out->is_null = false;
    out->u.i = (int64_t)(qr_wall_us());
    (void)cx;
    return QR_OK;
}

static int f_current_date(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    int rc = f_now(cx, n, a, out);
    int64_t d;
    sqlv_date_trunc("day", out->u.i, &d);
    out->u.i = d;
    out->type = QR_SQL_DATE;
    return rc;
}

static int ts_arg(SqlCtx *cx, const SqlValue *a, SqlValue *ts)
{
    if (sqlt_is_ts(a->type)) {
        *ts = *a;
        return QR_OK;
    }
    return sqlv_cast(cx, a, QR_SQL_TIMESTAMPTZ, -1, ts);
}

/* (unit text, timestamp) arguments of date_trunc / extract. */
static int unit_ts_args(SqlCtx *cx, const SqlValue *a, char *u, size_t un, SqlValue *ts)
{
    SqlValue unit;
    int rc;
    if ((rc = as_text(cx, &a[0], &unit)) || (rc = ts_arg(cx, &a[1], ts)))
        return rc;
    int k = (int)(unit.u.s.n < un - 1 ? unit.u.s.n : un - 1);
    snprintf(u, un, "%.*s", k, unit.u.s.s);
    return QR_OK;
}

static int f_date_trunc(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    SqlValue ts;
    char u[32];
    int64_t r;
    int rc = unit_ts_args(cx, a, u, sizeof u, &ts);
    if (rc)
        return rc;
    if (sqlv_date_trunc(u, ts.u.i, &r) < 0)
        return sql_err_at(cx, -1, QR_EINVAL, "22023", "unit \"%s\" not recognized for date_trunc", u);
    *out = ts;
    out->u.i = r;
    return QR_OK;
}

static int f_extract(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    SqlValue ts;
    char u[32];
    double d;
    int rc;
    if (a[1].type == QR_SQL_INTERVAL || a[1].type == QR_SQL_TIME || a[1].type == QR_SQL_DATE) {
        SqlValue unit;
        if ((rc = as_text(cx, &a[0], &unit)))
            return rc;
        snprintf(u, sizeof u, "%.*s", (int)(unit.u.s.n < 31 ? unit.u.s.n : 31), unit.u.s.s);
        ts = a[1];
    } else if ((rc = unit_ts_args(cx, a, u, sizeof u, &ts))) {
        return rc;
    }
    if ((rc = sqld_extract(cx, u, &ts, &d)))
        return rc;
    *out = sqlv_float(d);
    return QR_OK;
}

static int f_to_timestamp(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    double d;
    int rc = as_float(cx, a, &d);
    if (rc)
        return rc;
    /* llround of a value outside int64 is unspecified: refuse it */
    double us = d * 1e6;
    if (!(us > -9.2e18 && us < 9.2e18))
        return sql_err_at(cx, -1, QR_EINVAL, "22008", "timestamp out of range: \"%g\"", d);
    out->type = QR_SQL_TIMESTAMPTZ;
    out->is_null = false;
    out->u.i = (int64_t)llround(us);
    return QR_OK;
}

static int f_md5_free_random(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)cx, (void)n, (void)a;
    *out = sqlv_float((double)rand() / ((double)RAND_MAX + 1.0));
    return QR_OK;
}

static int f_repeat(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    SqlValue s;
    int64_t k;
    int rc;
    if ((rc = as_text(cx, &a[0], &s)) || (rc = as_int(cx, &a[1], &k)))
        return rc;
    if (k <= 0 || s.u.s.n == 0) {
        *out = sqlv_text("", 0);
        return QR_OK;
    }
    /* divide, never multiply: k * n wraps for k near 2^62 */
    if ((uint64_t)k > SQL_TEXT_MAX / s.u.s.n)
        return text_too_long(cx);
    size_t total = (size_t)k * s.u.s.n;
    char *d = qr_arena_alloc(cx->arena, total + 1);
    if (!d)
        return sql_err_at(cx, -1, QR_ELIMIT, NULL, "query memory limit exceeded");
    for (size_t off = 0; off < total; off += s.u.s.n)
        memcpy(d + off, s.u.s.s, s.u.s.n);
    d[total] = 0;
    *out = sqlv_text(d, total);
    return QR_OK;
}

/* pg_sleep(seconds): waits in slices of at most 10 ms so that a cancel, a
 * vanished client or the statement timeout ends it as it would a scan. */
static int f_pg_sleep(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    double secs;
    int rc = as_float(cx, a, &secs);
    if (rc)
        return rc;
    uint64_t end = qr_now_ns() + (secs > 0 ? (uint64_t)(secs * 1e9) : 0);
    for (;;) {
        uint64_t now = qr_now_ns();
        if ((rc = sql_check_now(cx)))
            return rc;
        if (now >= end)
            break;
        uint64_t left = end - now;
        struct timespec ts = {0, (long)(left < 10000000u ? left : 10000000u)};
        nanosleep(&ts, NULL);
    }
    *out = sqlv_text("", 0);   /* PostgreSQL's void prints as an empty string */
    return QR_OK;
}

/* ---- quoting and format() ---- */

/* PostgreSQL's keywords other than the unreserved ones: quote_ident quotes them. */
static const char *const KEYWORDS[] = {
    "all", "analyse", "analyze", "and", "any", "array", "as", "asc", "asymmetric",
    "authorization", "between", "bigint", "binary", "bit", "boolean", "both", "case", "cast",
    "char", "character", "check", "coalesce", "collate", "collation", "column", "concurrently",
    "constraint", "create", "cross", "current_catalog", "current_date", "current_role",
    "current_schema", "current_time", "current_timestamp", "current_user", "dec", "decimal",
    "default", "deferrable", "desc", "distinct", "do", "else", "end", "except", "exists",
    "extract", "false", "fetch", "float", "for", "foreign", "freeze", "from", "full", "grant",
    "greatest", "group", "grouping", "having", "ilike", "in", "initially", "inner", "inout",
    "int", "integer", "intersect", "interval", "into", "is", "isnull", "join", "lateral",
    "leading", "least", "left", "like", "limit", "localtime", "localtimestamp", "national",
    "natural", "nchar", "none", "normalize", "not", "notnull", "null", "nullif", "numeric",
    "offset", "on", "only", "or", "order", "out", "outer", "overlaps", "overlay", "placing",
    "position", "precision", "primary", "real", "references", "returning", "right", "row",
    "select", "session_user", "setof", "similar", "smallint", "some", "substring", "symmetric",
    "table", "tablesample", "then", "time", "timestamp", "to", "trailing", "treat", "trim",
    "true", "union", "unique", "user", "using", "values", "varchar", "variadic", "verbose",
    "when", "where", "window", "with", "xmlattributes", "xmlconcat", "xmlelement",
    "xmlexists", "xmlforest", "xmlnamespaces", "xmlparse", "xmlpi", "xmlroot", "xmlserialize",
    "xmltable",
};

/* s quoted as an identifier when PostgreSQL's quote_ident would. */
static void put_ident(QrBuf *b, const char *s, size_t n)
{
    bool plain = n > 0 && ((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_');
    for (size_t i = 1; i < n && plain; i++)
        plain = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_';
    for (size_t k = 0; plain && k < sizeof KEYWORDS / sizeof *KEYWORDS; k++)
        plain = !(strlen(KEYWORDS[k]) == n && !memcmp(KEYWORDS[k], s, n));
    if (plain) {
        qr_buf_append(b, s, n);
        return;
    }
    qr_buf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"')
            qr_buf_putc(b, '"');
        qr_buf_putc(b, (uint8_t)s[i]);
    }
    qr_buf_putc(b, '"');
}

/* s as a string literal ('it''s'; E'...' when it holds a backslash). */
static void put_literal(QrBuf *b, const char *s, size_t n)
{
    if (memchr(s, '\\', n))
        qr_buf_putc(b, 'E');
    qr_buf_putc(b, '\'');
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\'' || s[i] == '\\')
            qr_buf_putc(b, (uint8_t)s[i]);
        qr_buf_putc(b, (uint8_t)s[i]);
    }
    qr_buf_putc(b, '\'');
}

/* The text of a through put (put_ident / put_literal) as the result. */
static int quoted(SqlCtx *cx, const SqlValue *a, void (*put)(QrBuf *, const char *, size_t),
                  SqlValue *out)
{
    SqlValue t;
    int rc = as_text(cx, a, &t);
    if (rc)
        return rc;
    QrBuf b;
    qr_buf_init(&b);
    put(&b, t.u.s.s, t.u.s.n);
    return sqlv_buf_text(cx, &b, out);
}

static int f_quote_ident(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    return quoted(cx, a, put_ident, out);
}

/* quote_literal (strict) and quote_nullable (NULL -> 'NULL') */
static int f_quote_literal(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    if (a->is_null) {
        *out = sqlv_text("NULL", 4);
        return QR_OK;
    }
    return quoted(cx, a, put_literal, out);
}

/* format(fmt, args...): %s, %I, %L and %% with an optional position n$,
 * the - flag and a width, as PostgreSQL's format(). */
static int f_format(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    if (a[0].is_null) {
        *out = sqlv_null();
        out->type = QR_SQL_TEXT;
        return QR_OK;
    }
    SqlValue f;
    int rc = as_text(cx, &a[0], &f);
    if (rc)
        return rc;
    QrBuf b;
    qr_buf_init(&b);
    int next = 1;
    const char *p = f.u.s.s, *end = p + f.u.s.n;
    while (p < end && rc == QR_OK) {
        if (*p != '%') {
            qr_buf_putc(&b, (uint8_t)*p++);
            continue;
        }
        if (++p == end) {
            rc = sql_err_at(cx, -1, QR_EINVAL, "22023", "unterminated format() type specifier");
            break;
        }
        if (*p == '%') {
            qr_buf_putc(&b, '%');
            p++;
            continue;
        }
        long num = 0, width = 0;
        bool left = false, pos = false;
        const char *q = p;
        while (q < end && isdigit((unsigned char)*q))
            num = num * 10 + (*q++ - '0');
        if (q > p && q < end && *q == '$') {
            pos = true;
            p = q + 1;
        }
        if (p < end && *p == '-') {
            left = true;
            p++;
        }
        while (p < end && isdigit((unsigned char)*p))
            width = width * 10 + (*p++ - '0');
        if (p == end) {
            rc = sql_err_at(cx, -1, QR_EINVAL, "22023", "unterminated format() type specifier");
            break;
        }
        char type = *p++;
        if (type != 's' && type != 'I' && type != 'L') {
            rc = sql_err_at(cx, -1, QR_EINVAL, "22023", "unrecognized format() type specifier "
                            "\"%c\"", type);
            break;
        }
        int arg = pos ? (int)num : next;
        if (pos && num == 0) {
            rc = sql_err_at(cx, -1, QR_EINVAL, "22023",
                            "format specifies argument 0, but arguments are numbered from 1");
            break;
        }
        if (arg >= n) {
            rc = sql_err_at(cx, -1, QR_EINVAL, "22023", "too few arguments for format()");
            break;
        }
        next = arg + 1;
        QrBuf one;
        qr_buf_init(&one);
        if (a[arg].is_null) {
            if (type == 'I')
                rc = sql_err_at(cx, -1, QR_EINVAL, "22004",
                                "null values cannot be formatted as an SQL identifier");
            else if (type == 'L')
                qr_buf_append(&one, "NULL", 4);
        } else {
            QrBuf t;
            qr_buf_init(&t);
            qr_sql_value_text(&a[arg], &t);
            const char *ts = t.data ? (const char *)t.data : "";
            if (type == 's')
                qr_buf_append(&one, ts, t.len);
            else if (type == 'I')
                put_ident(&one, ts, t.len);
            else
                put_literal(&one, ts, t.len);
            qr_buf_free(&t);
        }
        long pad = width - (long)utf8_len(one.data ? (const char *)one.data : "", one.len);
        for (long i = 0; !left && i < pad; i++)
            qr_buf_putc(&b, ' ');
        qr_buf_append(&b, one.data ? one.data : (uint8_t *)"", one.len);
        for (long i = 0; left && i < pad; i++)
            qr_buf_putc(&b, ' ');
        qr_buf_free(&one);
        if (b.len > SQL_TEXT_MAX)
            rc = text_too_long(cx);
    }
    if (rc) {
        qr_buf_free(&b);
        return rc;
    }
    return sqlv_buf_text(cx, &b, out);
}

/* pg_typeof(x): the argument's type, known when binding: a constant. */
static int f_pg_typeof(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)cx, (void)n, (void)a, (void)out;
    return QR_EINTERNAL; /* folded by chk_pg_typeof */
}

static int chk_pg_typeof(SqlBind *b, SqlExpr *e)
{
    QrSqlType t = e->args[0]->type;
    const char *name = t == QR_SQL_UNKNOWN ? "unknown" : sqlt_info(t)->sql;
    if (QR_SQL_IS_ARRAY(t)) { /* "integer[]": the array row's spelling */
        SqlTypeRow r;
        for (int i = 0; sqlt_catalog_row(i, &r); i++)
            if (r.type == t)
                name = r.sql;
    }
    e->kind = SE_CONST;
    e->n_args = 0;
    e->val = sqlv_text(name, strlen(name));
    e->type = QR_SQL_TEXT;
    e->name = "pg_typeof";
    (void)b;
    return QR_OK;
}

/* round(x [, k]) and trunc(x [, k]): numeric for numerics and integers,
 * float8 for floats, as PostgreSQL's overloads (an untyped literal is a
 * numeric). */
static int chk_round(SqlBind *b, SqlExpr *e)
{
    int rc = sql_coerce_unknown(b, e->args[0], QR_SQL_NUMERIC);
    if (!rc && e->n_args > 1)
        rc = sql_coerce_unknown(b, e->args[1], QR_SQL_INT4);
    if (rc)
        return rc;
    QrSqlType t = e->args[0]->type;
    if (!sqlt_is_num(t))
        return sql_err_at(b->cx, e->loc, QR_ENOTFOUND, "42883", "function %s(%s) does not exist",
                          e->name, qr_sql_type_name(t));
    e->type = t == QR_SQL_NUMERIC || (sqlt_is_int(t) && (e->n_args > 1 || e->name[0] == 'r'))
                  ? QR_SQL_NUMERIC
              : sqlt_is_int(t) ? t
                               : QR_SQL_FLOAT8;
    return QR_OK;
}

static int chk_text_args(SqlBind *b, SqlExpr *e)
{
    for (int i = 0; i < e->n_args; i++) {
        int rc = sql_coerce_unknown(b, e->args[i], QR_SQL_TEXT);
        if (rc)
            return rc;
    }
    return QR_OK;
}

static const SqlFuncDef FUNCS[] = {
    {"quote_ident", 1, 1, QR_SQL_TEXT, f_quote_ident, true},
    {"quote_literal", 1, 1, QR_SQL_TEXT, f_quote_literal, true},
    {"quote_nullable", 1, 1, QR_SQL_TEXT, f_quote_literal, false},
    {"format", 1, 100, QR_SQL_TEXT, f_format, false, false, chk_text_args},
    {"pg_typeof", 1, 1, QR_SQL_TEXT, f_pg_typeof, false, false, chk_pg_typeof},
    {"lower", 1, 1, QR_SQL_TEXT, f_lower, true},
    {"upper", 1, 1, QR_SQL_TEXT, f_upper, true},
    {"length", 1, 1, QR_SQL_INT4, f_length, true},
    {"char_length", 1, 1, QR_SQL_INT4, f_length, true},
    {"character_length", 1, 1, QR_SQL_INT4, f_length, true},
    {"octet_length", 1, 1, QR_SQL_INT4, f_octet_length, true},
    {"substring", 2, 3, QR_SQL_TEXT, f_substr, true},
    {"substr", 2, 3, QR_SQL_TEXT, f_substr, true},
    {"btrim", 1, 2, QR_SQL_TEXT, f_btrim, true},
    {"trim", 1, 2, QR_SQL_TEXT, f_btrim, true},
    {"ltrim", 1, 2, QR_SQL_TEXT, f_ltrim, true},
    {"rtrim", 1, 2, QR_SQL_TEXT, f_rtrim, true},
    {"replace", 3, 3, QR_SQL_TEXT, f_replace, true},
    {"concat", 0, 16, QR_SQL_TEXT, f_concat, false},
    {"position", 2, 2, QR_SQL_INT4, f_position, true},
    {"strpos", 2, 2, QR_SQL_INT4, f_position, true},
    {"left", 2, 2, QR_SQL_TEXT, f_left, true},
    {"right", 2, 2, QR_SQL_TEXT, f_right, true},
    {"repeat", 2, 2, QR_SQL_TEXT, f_repeat, true},
    {"abs", 1, 1, QR_SQL_UNKNOWN, f_abs, true, true},
    {"round", 1, 2, QR_SQL_FLOAT8, f_round, true, true, chk_round},
    {"floor", 1, 1, QR_SQL_UNKNOWN, f_floor, true, true},
    {"ceil", 1, 1, QR_SQL_UNKNOWN, f_ceil, true, true},
    {"ceiling", 1, 1, QR_SQL_UNKNOWN, f_ceil, true, true},
    {"trunc", 1, 2, QR_SQL_FLOAT8, f_trunc, true, true, chk_round},
    {"sqrt", 1, 1, QR_SQL_FLOAT8, f_sqrt, true, true},
    {"exp", 1, 1, QR_SQL_FLOAT8, f_exp, true, true},
    {"ln", 1, 1, QR_SQL_FLOAT8, f_ln, true, true},
    {"power", 2, 2, QR_SQL_FLOAT8, f_power, true, true},
    {"pow", 2, 2, QR_SQL_FLOAT8, f_power, true, true},
    {"mod", 2, 2, QR_SQL_INT8, f_mod, true, true},
    {"random", 0, 0, QR_SQL_FLOAT8, f_md5_free_random, false},
    {"pg_sleep", 1, 1, QR_SQL_TEXT, f_pg_sleep, true, true},
    {"now", 0, 0, QR_SQL_TIMESTAMPTZ, f_now, false},
    {"current_timestamp", 0, 0, QR_SQL_TIMESTAMPTZ, f_now, false},
    {"transaction_timestamp", 0, 0, QR_SQL_TIMESTAMPTZ, f_now, false},
    {"statement_timestamp", 0, 0, QR_SQL_TIMESTAMPTZ, f_now, false},
    {"current_date", 0, 0, QR_SQL_DATE, f_current_date, false},
    {"date_trunc", 2, 2, QR_SQL_UNKNOWN, f_date_trunc, true},
    {"extract", 2, 2, QR_SQL_FLOAT8, f_extract, true},
    {"date_part", 2, 2, QR_SQL_FLOAT8, f_extract, true},
    {"to_timestamp", 1, 1, QR_SQL_TIMESTAMPTZ, f_to_timestamp, true, true},
};

static const SqlFuncDef *find_in(const SqlFuncDef *t, size_t n, const char *name, int n_args)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0 && n_args >= t[i].min_args && n_args <= t[i].max_args)
            return &t[i];
    return NULL;
}

const SqlFuncDef *sql_func_find(const char *name, int n_args)
{
    const SqlFuncDef *f = find_in(FUNCS, sizeof FUNCS / sizeof *FUNCS, name, n_args);
    if (!f)
        f = find_in(SQL_ARRAY_FUNCS, (size_t)SQL_N_ARRAY_FUNCS, name, n_args);
    if (!f)
        f = find_in(SQL_DATETIME_FUNCS, (size_t)SQL_N_DATETIME_FUNCS, name, n_args);
    if (!f)
        f = find_in(SQL_BYTES_FUNCS, (size_t)SQL_N_BYTES_FUNCS, name, n_args);
    if (!f)
        f = find_in(SQL_JSON_FUNCS, (size_t)SQL_N_JSON_FUNCS, name, n_args);
    return f;
}
