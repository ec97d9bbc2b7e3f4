/*
 * sql_datetime.c — date, time and interval: the calendar (civil dates of
 * microseconds), PostgreSQL's input and output of the three types, the
 * date / time / timestamp / interval arithmetic with PostgreSQL's rules
 * (month arithmetic clamps to the month's end, timestamp - timestamp is
 * justified into days, interval * number cascades fractions down), age,
 * justify_*, extract of intervals, dates and times, and to_char.
 *
 * Layer: query/.  Calls sql_value.c and the base kit (the wall clock).
 *
 * Values: a date is the microseconds since 1970-01-01 of its midnight (so it
 * compares with timestamps as PostgreSQL's implicit date -> timestamp cast
 * does), a time the microseconds since midnight (0 .. 24:00:00), an
 * interval its months, days and microseconds kept apart.  Everything is
 * UTC: the session's TimeZone is UTC.
 */
#include "query/sql_int.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "store/util.h"

#define US_PER_SEC 1000000LL
#define US_PER_MIN 60000000LL
#define US_PER_HOUR 3600000000LL
#define PG_EPOCH_DAYS 10957 /* 2000-01-01 in days since 1970-01-01 */

/* ---- the calendar ---- */

/* Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm). */
int64_t sqld_days_from_civil(int64_t y, unsigned m, unsigned d)
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

void sqld_split(int64_t us, SqlTm *tm)
{
    int64_t days = us / SQL_US_PER_DAY, rem = us % SQL_US_PER_DAY;
    if (rem < 0) {
        rem += SQL_US_PER_DAY;
        days--;
    }
    civil_from_days(days, &tm->year, &tm->mon, &tm->day);
    tm->hour = (unsigned)(rem / US_PER_HOUR);
    tm->min = (unsigned)(rem / US_PER_MIN % 60);
    tm->sec = (unsigned)(rem / US_PER_SEC % 60);
    tm->usec = (unsigned)(rem % US_PER_SEC);
    tm->dow = (unsigned)(((days % 7) + 11) % 7); /* 1970-01-01 was a Thursday (4) */
    tm->doy = (unsigned)(days - sqld_days_from_civil(tm->year, 1, 1) + 1);
}

int64_t sqld_join(const SqlTm *tm)
{
    return sqld_days_from_civil(tm->year, tm->mon, tm->day) * SQL_US_PER_DAY +
           (int64_t)tm->hour * US_PER_HOUR + (int64_t)tm->min * US_PER_MIN +
           (int64_t)tm->sec * US_PER_SEC + tm->usec;
}

static bool is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static unsigned month_days(int64_t y, unsigned m)
{
    static const unsigned D[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : D[m - 1];
}

/* Microseconds of a day: floor to its midnight. */
static int64_t day_floor(int64_t us)
{
    int64_t d = us / SQL_US_PER_DAY;
    if (us % SQL_US_PER_DAY < 0)
        d--;
    return d * SQL_US_PER_DAY;
}

/* The range PostgreSQL's timestamps cover: 4713 BC .. (its end, counted
 * from 2000, read from 1970 here so that the binary form cannot wrap). */
#define TS_MIN_US (-210866803200000000LL)
#define TS_MAX_US (9223371331200000000LL)

static bool ts_ok(int64_t us) { return us >= TS_MIN_US && us < TS_MAX_US; }

/* ---- input ---- */

/* s[0, n) without its leading and trailing white space. */
static void trim(const char **s, size_t *n)
{
    while (*n && isspace((unsigned char)**s))
        (*s)++, (*n)--;
    while (*n && isspace((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

static size_t digits_at(const char *s, size_t n, size_t i, int max, int64_t *v)
{
    size_t k = 0;
    *v = 0;
    while (i + k < n && isdigit((unsigned char)s[i + k]) && (int)k < max) {
        *v = *v * 10 + (s[i + k] - '0');
        k++;
    }
    return k;
}

/* "HH:MM[:SS[.ffffff]]" at s[*i]: microseconds since midnight; false if
 * not such a time (24:00:00 is allowed, as PostgreSQL does). */
static bool read_clock(const char *s, size_t n, size_t *i, int64_t *us)
{
    int64_t h, m, sec = 0, frac = 0;
    size_t k = digits_at(s, n, *i, 2, &h);
    if (!k || *i + k >= n || s[*i + k] != ':')
        return false;
    size_t j = *i + k + 1;
    if (digits_at(s, n, j, 2, &m) != 2)
        return false;
    j += 2;
    if (j < n && s[j] == ':') {
        if (digits_at(s, n, j + 1, 2, &sec) != 2)
            return false;
        j += 3;
        if (j < n && s[j] == '.') {
            j++;
            int64_t scale = 100000;
            size_t nd = 0;
            while (j < n && isdigit((unsigned char)s[j])) {
                if (nd < 6)
                    frac += (s[j] - '0') * scale;
                else if (nd == 6 && s[j] >= '5')
                    frac++; /* rounded to microseconds */
                scale /= 10;
                nd++;
                j++;
            }
        }
    }
    if (m > 59 || sec > 60 || h > 24 || (h == 24 && (m || sec || frac)))
        return false;
    *us = h * US_PER_HOUR + m * US_PER_MIN + sec * US_PER_SEC + frac;
    *i = j;
    return true;
}

/* A zone at s[*i]: "Z", "UTC", "GMT", "+HH", "+HHMM", "+HH:MM" (seconds
 * east of UTC). */
static bool read_zone(const char *s, size_t n, size_t *i, int64_t *off)
{
    size_t j = *i;
    if (j < n && (s[j] == 'Z' || s[j] == 'z') && j + 1 == n) {
        *off = 0;
        *i = j + 1;
        return true;
    }
    if (n - j == 3 && (!strncasecmp(s + j, "UTC", 3) || !strncasecmp(s + j, "GMT", 3))) {
        *off = 0;
        *i = n;
        return true;
    }
    if (j < n && (s[j] == '+' || s[j] == '-')) {
        int sign = s[j] == '-' ? -1 : 1;
        int64_t h, m = 0;
        size_t k = digits_at(s, n, j + 1, 2, &h);
        if (!k)
            return false;
        j += 1 + k;
        if (j < n && s[j] == ':')
            j++;
        if (j < n && digits_at(s, n, j, 2, &m) == 2)
            j += 2;
        if (h > 15 || m > 59)
            return false;
        *off = sign * (h * 3600 + m * 60);
        *i = j;
        return true;
    }
    return false;
}

int sqld_parse_datetime(const char *s0, size_t n0, int64_t *us, int64_t *zone, bool *has_zone)
{
    const char *s = s0;
    size_t n = n0;
    trim(&s, &n);
    *has_zone = false;
    *zone = 0;
    static const struct {
        const char *w;
        int day;            /* days from today; 100 = now, 200 = the epoch */
    } SPECIAL[] = {{"now", 100}, {"today", 0}, {"tomorrow", 1}, {"yesterday", -1}, {"epoch", 200}};
    for (size_t k = 0; k < sizeof SPECIAL / sizeof *SPECIAL; k++)
        if (n == strlen(SPECIAL[k].w) && !strncasecmp(s, SPECIAL[k].w, n)) {
            int64_t now = qr_wall_us();
            *us = SPECIAL[k].day == 100 ? now : SPECIAL[k].day == 200 ? 0
                                                : day_floor(now) + SPECIAL[k].day * SQL_US_PER_DAY;
            return 0;
        }
    int64_t y, m, d;
    size_t i = digits_at(s, n, 0, 7, &y);
    if (i < 4 || i >= n || s[i] != '-')
        return -1;
    size_t k = digits_at(s, n, i + 1, 2, &m);
    if (!k || i + 1 + k >= n || s[i + 1 + k] != '-')
        return -1;
    i += 2 + k;
    k = digits_at(s, n, i, 2, &d);
    if (!k)
        return -1;
    i += k;
    if (m < 1 || m > 12 || d < 1 || d > (int64_t)month_days(y, (unsigned)m))
        return -2; /* out of range: 22008 */
    int64_t t = 0;
    if (i < n && (s[i] == 'T' || s[i] == 't' || s[i] == ' ')) {
        size_t j = i + 1;
        while (j < n && s[j] == ' ')
            j++;
        if (read_clock(s, n, &j, &t))
            i = j;
        else if (s[i] != ' ')
            return -1;
    }
    while (i < n && s[i] == ' ')
        i++;
    if (i < n) {
        int64_t off;
        if (!read_zone(s, n, &i, &off))
            goto bc;
        *zone = off;
        *has_zone = true;
        while (i < n && s[i] == ' ')
            i++;
    }
bc:
    if (n - i == 2 && !strncasecmp(s + i, "BC", 2)) {
        y = 1 - y;
        i = n;
    }
    if (i != n)
        return -1;
    *us = sqld_days_from_civil(y, (unsigned)m, (unsigned)d) * SQL_US_PER_DAY + t;
    if (!ts_ok(*us))
        return -2;
    return 0;
}

static int bad_input(SqlCtx *cx, int loc, const char *state, const char *type, const char *s,
                     size_t n)
{
    if (!strcmp(state, "22008"))
        return sql_err_at(cx, loc, QR_EINVAL, state,
                          "date/time field value out of range: \"%.*s\"", (int)(n > 80 ? 80 : n), s);
    return sql_err_at(cx, loc, QR_EINVAL, state, "invalid input syntax for type %s: \"%.*s\"",
                      type, (int)(n > 80 ? 80 : n), s);
}

int sqld_date_in(SqlCtx *cx, const char *s, size_t n, int loc, SqlValue *out)
{
    int64_t us, zone;
    bool has_zone;
    int r = sqld_parse_datetime(s, n, &us, &zone, &has_zone);
    if (r < 0)
        return bad_input(cx, loc, r == -2 ? "22008" : "22007", "date", s, n);
    /* the time and zone of a full timestamp are ignored, as date_in does */
    memset(out, 0, sizeof *out);
    out->type = QR_SQL_DATE;
    out->u.i = day_floor(us);
    return QR_OK;
}

int sqld_time_in(SqlCtx *cx, const char *s0, size_t n0, int loc, SqlValue *out)
{
    const char *s = s0;
    size_t n = n0, i = 0;
    trim(&s, &n);
    int64_t t, zone;
    bool has_zone;
    bool clock = read_clock(s, n, &i, &t);
    while (clock && i < n && s[i] == ' ')
        i++;
    if (clock && i < n && !read_zone(s, n, &i, &zone)) /* a zone is read and ignored ("10:30+00", JDBC) */
        clock = false;
    if (!(clock && i == n)) {
        int64_t us;
        if (sqld_parse_datetime(s, n, &us, &zone, &has_zone) < 0 || n < 11) {
            /* "25:00", "10:61": the right shape, a field out of range */
            int64_t h, m;
            size_t k = digits_at(s, n, 0, 2, &h);
            bool shape = k && k < n && s[k] == ':' && digits_at(s, n, k + 1, 2, &m) == 2;
            return bad_input(cx, loc, shape ? "22008" : "22007", "time without time zone", s0, n0);
        }
        t = us - day_floor(us);
    }
    memset(out, 0, sizeof *out);
    out->type = QR_SQL_TIME;
    out->u.i = t;
    return QR_OK;
}

/* ---- intervals ---- */

/* 128-bit total for comparison: PostgreSQL's interval_cmp_value (a month is
 * 30 days, a day 24 hours). */
static __int128 iv_total(const SqlValue *v)
{
    return ((__int128)v->u.iv.months * 30 + v->u.iv.days) * SQL_US_PER_DAY + v->u.iv.us;
}

int sqld_interval_cmp(const SqlValue *a, const SqlValue *b)
{
    __int128 x = iv_total(a), y = iv_total(b);
    return x < y ? -1 : x > y;
}

uint64_t sqld_interval_hash(const SqlValue *v)
{
    __int128 t = iv_total(v);
    return (uint64_t)t ^ (uint64_t)(t >> 64) * 0x9e3779b97f4a7c15ULL;
}

static SqlValue iv_make(int64_t months, int64_t days, int64_t us)
{
    SqlValue v;
    memset(&v, 0, sizeof v);
    v.type = QR_SQL_INTERVAL;
    v.u.iv.months = (int32_t)months;
    v.u.iv.days = (int32_t)days;
    v.u.iv.us = us;
    return v;
}

static bool iv_fits(int64_t months, int64_t days)
{
    return months >= INT32_MIN && months <= INT32_MAX && days >= INT32_MIN && days <= INT32_MAX;
}

/* The units of interval input: months, days or microseconds per unit. */
static const struct {
    const char *name;
    char kind;           /* 'm' months, 'd' days, 'u' microseconds */
    double per;
} UNITS[] = {
    {"millennium", 'm', 12000}, {"millenniums", 'm', 12000}, {"millennia", 'm', 12000},
    {"century", 'm', 1200},     {"centuries", 'm', 1200},    {"decade", 'm', 120},
    {"decades", 'm', 120},      {"year", 'm', 12},           {"years", 'm', 12},
    {"y", 'm', 12},             {"yr", 'm', 12},             {"yrs", 'm', 12},
    {"month", 'm', 1},          {"months", 'm', 1},          {"mon", 'm', 1},
    {"mons", 'm', 1},           {"week", 'd', 7},            {"weeks", 'd', 7},
    {"w", 'd', 7},              {"day", 'd', 1},             {"days", 'd', 1},
    {"d", 'd', 1},              {"hour", 'u', 3600e6},       {"hours", 'u', 3600e6},
    {"h", 'u', 3600e6},         {"hr", 'u', 3600e6},         {"hrs", 'u', 3600e6},
    {"minute", 'u', 60e6},      {"minutes", 'u', 60e6},      {"min", 'u', 60e6},
    {"mins", 'u', 60e6},        {"m", 'u', 60e6},            {"second", 'u', 1e6},
    {"seconds", 'u', 1e6},      {"sec", 'u', 1e6},           {"secs", 'u', 1e6},
    {"s", 'u', 1e6},            {"millisecond", 'u', 1e3},   {"milliseconds", 'u', 1e3},
    {"ms", 'u', 1e3},           {"msec", 'u', 1e3},          {"msecs", 'u', 1e3},
    {"microsecond", 'u', 1},    {"microseconds", 'u', 1},    {"us", 'u', 1},
    {"usec", 'u', 1},           {"usecs", 'u', 1},
};

/* Add q units of kind k: fractions of months cascade into days (30 a
 * month) and fractions of days into microseconds, as PostgreSQL does. */
static void iv_add_units(double q, char k, double per, double *mo, double *dd, double *us)
{
    double x = q * per;
    if (k == 'm') {
        double w = trunc(x);
        *mo += w;
        x = (x - w) * 30;
        k = 'd';
    }
    if (k == 'd') {
        double w = trunc(x);
        *dd += w;
        *us += (x - w) * 86400e6;
        return;
    }
    *us += x;
}

/* An interval's clock: "H:MM[:SS[.f]]" with any number of hours. */
static bool read_iv_clock(const char *s, size_t n, size_t *i, int64_t *us)
{
    int64_t h, m, sec = 0;
    size_t k = digits_at(s, n, *i, 12, &h);
    if (!k || *i + k >= n || s[*i + k] != ':')
        return false;
    size_t j = *i + k + 1;
    if (digits_at(s, n, j, 2, &m) != 2 || m > 59)
        return false;
    j += 2;
    double frac = 0;
    if (j < n && s[j] == ':') {
        if (digits_at(s, n, j + 1, 2, &sec) != 2 || sec > 59)
            return false;
        j += 3;
        if (j < n && s[j] == '.') {
            double scale = 0.1;
            for (j++; j < n && isdigit((unsigned char)s[j]); j++, scale /= 10)
                frac += (s[j] - '0') * scale;
        }
    }
    if (j < n && !isspace((unsigned char)s[j]))
        return false;
    *us = h * US_PER_HOUR + m * US_PER_MIN + sec * US_PER_SEC + (int64_t)llround(frac * 1e6);
    *i = j;
    return true;
}

/* ISO 8601 "P1Y2M3DT4H5M6.5S" / "P2W". */
static bool iso_interval(const char *s, size_t n, double *mo, double *dd, double *us)
{
    size_t i = 1;
    bool time = false, any = false;
    while (i < n) {
        if (s[i] == 'T' || s[i] == 't') {
            time = true;
            i++;
            continue;
        }
        char *end;
        char buf[64];
        size_t k = 0;
        while (i + k < n && k < 63 && (isdigit((unsigned char)s[i + k]) || s[i + k] == '.' ||
                                      s[i + k] == '-' || s[i + k] == '+'))
            k++;
        if (!k || i + k >= n)
            return false;
        memcpy(buf, s + i, k);
        buf[k] = 0;
        double q = strtod(buf, &end);
        if (*end)
            return false;
        char u = (char)toupper((unsigned char)s[i + k]);
        i += k + 1;
        any = true;
        if (!time && u == 'Y')
            iv_add_units(q, 'm', 12, mo, dd, us);
        else if (!time && u == 'M')
            iv_add_units(q, 'm', 1, mo, dd, us);
        else if (!time && u == 'W')
            iv_add_units(q, 'd', 7, mo, dd, us);
        else if (!time && u == 'D')
            iv_add_units(q, 'd', 1, mo, dd, us);
        else if (time && u == 'H')
            iv_add_units(q, 'u', 3600e6, mo, dd, us);
        else if (time && u == 'M')
            iv_add_units(q, 'u', 60e6, mo, dd, us);
        else if (time && u == 'S')
            iv_add_units(q, 'u', 1e6, mo, dd, us);
        else
            return false;
    }
    return any;
}

int sqld_interval_in(SqlCtx *cx, const char *s0, size_t n0, int loc, SqlValue *out)
{
    const char *s = s0;
    size_t n = n0;
    trim(&s, &n);
    double mo = 0, dd = 0, us = 0;
    bool ok = n > 0;
    if (ok && (s[0] == 'P' || s[0] == 'p')) {
        ok = iso_interval(s, n, &mo, &dd, &us);
    } else {
        size_t i = 0;
        bool any = false, ago = false;
        if (n && s[0] == '@')
            i++;
        while (ok && i < n) {
            while (i < n && isspace((unsigned char)s[i]))
                i++;
            if (i == n)
                break;
            /* a clock: [+-]HH:MM[:SS[.f]] */
            size_t jj = i + (s[i] == '-' || s[i] == '+');
            int64_t t;
            if (read_iv_clock(s, n, &jj, &t)) {
                us += s[i] == '-' ? -(double)t : (double)t;
                i = jj;
                any = true;
                continue;
            }
            if (n - i >= 3 && !strncasecmp(s + i, "ago", 3) && (i + 3 == n || isspace((unsigned char)s[i + 3]))) {
                ago = true;
                i += 3;
                continue;
            }
            char buf[64];
            size_t k = 0;
            while (i + k < n && k < 63 &&
                   (isdigit((unsigned char)s[i + k]) || s[i + k] == '.' ||
                    ((s[i + k] == '-' || s[i + k] == '+') && k == 0) ||
                    ((s[i + k] == 'e' || s[i + k] == 'E') && k > 0)))
                k++;
            if (!k) {
                ok = false;
                break;
            }
            memcpy(buf, s + i, k);
            buf[k] = 0;
            char *end;
            double q = strtod(buf, &end);
            if (*end || !isfinite(q)) {
                ok = false;
                break;
            }
            i += k;
            while (i < n && isspace((unsigned char)s[i]))
                i++;
            size_t w = 0;
            while (i + w < n && isalpha((unsigned char)s[i + w]))
                w++;
            if (!w) { /* a bare number: seconds */
                iv_add_units(q, 'u', 1e6, &mo, &dd, &us);
                any = true;
                continue;
            }
            bool found = false;
            for (size_t u = 0; u < sizeof UNITS / sizeof *UNITS && !found; u++)
                if (strlen(UNITS[u].name) == w && !strncasecmp(UNITS[u].name, s + i, w)) {
                    iv_add_units(q, UNITS[u].kind, UNITS[u].per, &mo, &dd, &us);
                    found = true;
                }
            if (!found) {
                ok = false;
                break;
            }
            i += w;
            while (i < n && s[i] == ',')
                i++;
            any = true;
        }
        ok = ok && any;
        if (ago)
            mo = -mo, dd = -dd, us = -us;
    }
    if (!ok)
        return bad_input(cx, loc, "22007", "interval", s0, n0);
    us = rint(us);
    if (!iv_fits((int64_t)mo, (int64_t)dd) || fabs(us) > 9.2e18 || fabs(mo) > 2147483647.0 ||
        fabs(dd) > 2147483647.0)
        return sql_err_at(cx, loc, QR_EINVAL, "22015", "interval out of range");
    *out = iv_make((int64_t)mo, (int64_t)dd, (int64_t)us);
    return QR_OK;
}

/* ---- output ---- */

static void put_frac(QrBuf *out, int64_t usec)
{
    if (!usec)
        return;
    char f[8];
    snprintf(f, sizeof f, "%06" PRId64, usec);
    int k = 6;
    while (k > 0 && f[k - 1] == '0')
        k--;
    qr_buf_putc(out, '.');
    qr_buf_append(out, f, (size_t)k);
}

void sqld_date_out(int64_t us, QrBuf *out)
{
    SqlTm tm;
    sqld_split(us, &tm);
    if (tm.year > 0)
        qr_buf_printf(out, "%04" PRId64 "-%02u-%02u", tm.year, tm.mon, tm.day);
    else
        qr_buf_printf(out, "%04" PRId64 "-%02u-%02u BC", 1 - tm.year, tm.mon, tm.day);
}

void sqld_time_out(int64_t us, QrBuf *out)
{
    qr_buf_printf(out, "%02" PRId64 ":%02" PRId64 ":%02" PRId64, (int64_t)(us / US_PER_HOUR),
                  (int64_t)(us / US_PER_MIN % 60), (int64_t)(us / US_PER_SEC % 60));
    put_frac(out, us % US_PER_SEC);
}

/* IntervalStyle postgres: "1 year 2 mons -3 days +04:05:06.5". */
void sqld_interval_out(const SqlValue *v, QrBuf *out)
{
    int64_t months = v->u.iv.months, days = v->u.iv.days, t = v->u.iv.us;
    int64_t fields[3] = {months / 12, months % 12, days};
    static const char *const name[3][2] = {{"year", "years"}, {"mon", "mons"}, {"day", "days"}};
    bool is_zero = true, is_before = false;
    for (int k = 0; k < 3; k++) {
        if (!fields[k])
            continue;
        qr_buf_printf(out, "%s%s%" PRId64 " %s", is_zero ? "" : " ",
                      is_before && fields[k] > 0 ? "+" : "", fields[k],
                      name[k][fields[k] == 1 ? 0 : 1]);
        is_before = fields[k] < 0;
        is_zero = false;
    }
    if (is_zero || t) {
        bool minus = t < 0;
        uint64_t a = minus ? 0 - (uint64_t)t : (uint64_t)t;
        qr_buf_printf(out, "%s%s%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64, is_zero ? "" : " ",
                      minus ? "-" : is_before ? "+" : "", a / (uint64_t)US_PER_HOUR,
                      a / (uint64_t)US_PER_MIN % 60, a / (uint64_t)US_PER_SEC % 60);
        put_frac(out, (int64_t)(a % (uint64_t)US_PER_SEC));
    }
}

/* ---- casts ---- */

int sqld_cast(SqlCtx *cx, const SqlValue *in, QrSqlType to, int loc, SqlValue *out)
{
    QrSqlType from = in->type;
    SqlValue v;
    memset(&v, 0, sizeof v);
    v.type = to;
    if (sqlt_is_str(from)) {
        const char *s = in->u.s.s ? in->u.s.s : "";
        switch (to) {
        case QR_SQL_DATE:
            return sqld_date_in(cx, s, in->u.s.n, loc, out);
        case QR_SQL_TIME:
            return sqld_time_in(cx, s, in->u.s.n, loc, out);
        case QR_SQL_INTERVAL:
            return sqld_interval_in(cx, s, in->u.s.n, loc, out);
        default:
            break;
        }
    } else if (to == QR_SQL_DATE && sqlt_is_datetime(from)) {
        v.u.i = day_floor(in->u.i);
        *out = v;
        return QR_OK;
    } else if (sqlt_is_ts(to) && from == QR_SQL_DATE) {
        v.u.i = in->u.i;
        *out = v;
        return QR_OK;
    } else if (to == QR_SQL_TIME && sqlt_is_ts(from)) {
        v.u.i = in->u.i - day_floor(in->u.i);
        *out = v;
        return QR_OK;
    } else if (to == QR_SQL_TIME && from == QR_SQL_INTERVAL) {
        int64_t t = in->u.iv.us % SQL_US_PER_DAY;
        v.u.i = t < 0 ? t + SQL_US_PER_DAY : t;
        *out = v;
        return QR_OK;
    } else if (to == QR_SQL_INTERVAL && from == QR_SQL_TIME) {
        *out = iv_make(0, 0, in->u.i);
        return QR_OK;
    }
    return sql_err_at(cx, loc, QR_ETYPE, "42846", "cannot cast type %s to %s",
                      qr_sql_type_name(from), qr_sql_type_name(to));
}

/* ---- arithmetic ---- */

/* timestamp + interval: months (the day clamped to the month's end), then
 * days, then microseconds (timestamp_pl_interval). */
static int ts_plus(SqlCtx *cx, int64_t ts, const SqlValue *iv, int sign, int64_t *out)
{
    int64_t months = sign * (int64_t)iv->u.iv.months, days = sign * (int64_t)iv->u.iv.days;
    int64_t us = iv->u.iv.us;
    if (sign < 0 && us == INT64_MIN)
        goto range;
    us *= sign;
    if (months) {
        SqlTm tm;
        sqld_split(ts, &tm);
        int64_t m0 = tm.year * 12 + (tm.mon - 1) + months;
        tm.year = m0 >= 0 ? m0 / 12 : -((-m0 + 11) / 12);
        tm.mon = (unsigned)(m0 - tm.year * 12 + 1);
        if (tm.year < -4714 || tm.year > 294277) /* past the range: sqld_join would overflow */
            goto range;
        if (tm.day > month_days(tm.year, tm.mon))
            tm.day = month_days(tm.year, tm.mon);
        ts = sqld_join(&tm);
    }
    if (days && __builtin_add_overflow(ts, days * SQL_US_PER_DAY, &ts))
        goto range;
    if (__builtin_add_overflow(ts, us, &ts) || !ts_ok(ts))
        goto range;
    *out = ts;
    return QR_OK;
range:
    return sql_err_at(cx, -1, QR_EINVAL, "22008", "timestamp out of range");
}

/* interval_justify_hours of a pure-time interval. */
static SqlValue justify_hours(int64_t months, int64_t days, int64_t us)
{
    int64_t whole = us / SQL_US_PER_DAY;
    us -= whole * SQL_US_PER_DAY;
    days += whole;
    if (days > 0 && us < 0) {
        us += SQL_US_PER_DAY;
        days--;
    } else if (days < 0 && us > 0) {
        us -= SQL_US_PER_DAY;
        days++;
    }
    return iv_make(months, days, us);
}

static SqlValue justify_days(int64_t months, int64_t days, int64_t us)
{
    int64_t whole = days / 30;
    days -= whole * 30;
    months += whole;
    if (months > 0 && days < 0) {
        days += 30;
        months--;
    } else if (months < 0 && days > 0) {
        days -= 30;
        months++;
    }
    return iv_make(months, days, us);
}

static int iv_range(SqlCtx *cx) { return sql_err_at(cx, -1, QR_EINVAL, "22015", "interval out of range"); }

/* interval * factor (interval_mul), or / factor when div. */
static int iv_scale(SqlCtx *cx, const SqlValue *iv, double f, bool div, SqlValue *out)
{
    if (div && f == 0)
        return sql_err_at(cx, -1, QR_EINVAL, "22012", "division by zero");
    if (isnan(f) || isinf(f))
        return iv_range(cx);
    double m = div ? iv->u.iv.months / f : iv->u.iv.months * f;
    double d = div ? iv->u.iv.days / f : iv->u.iv.days * f;
    if (fabs(m) > 2147483647.0 || fabs(d) > 2147483647.0)
        return iv_range(cx);
    int64_t rm = (int64_t)m, rd = (int64_t)d;
    double mdays = rint((m - (double)rm) * 30 * 1e6) / 1e6;
    double secs = rint((d - (double)rd + mdays - (double)(int64_t)mdays) * 86400 * 1e6) / 1e6;
    if (fabs(secs) >= 86400) {
        rd += (int64_t)(secs / 86400);
        secs -= (double)(int64_t)(secs / 86400) * 86400;
    }
    rd += (int64_t)mdays;
    double t = rint((div ? (double)iv->u.iv.us / f : (double)iv->u.iv.us * f) + secs * 1e6);
    if (fabs(t) > 9.2e18 || !iv_fits(rm, rd))
        return iv_range(cx);
    *out = iv_make(rm, rd, (int64_t)t);
    return QR_OK;
}

static int num_arg(SqlCtx *cx, const SqlValue *v, double *f)
{
    SqlValue d;
    int rc = sqlv_cast(cx, v, QR_SQL_FLOAT8, -1, &d);
    *f = d.u.f;
    return rc;
}

/* One typed operator: the kinds of its operands (T timestamp[tz], D date,
 * H time, I interval, N integer, F number) and its result (T: the
 * timestamp operand's type). */
typedef struct DtOp {
    char op, l, r, ret;
} DtOp;

static const DtOp OPS[] = {
    {'+', 'T', 'I', 'T'}, {'+', 'I', 'T', 'T'}, {'-', 'T', 'I', 'T'}, {'-', 'T', 'T', 'I'},
    {'+', 'D', 'N', 'D'}, {'+', 'N', 'D', 'D'}, {'-', 'D', 'N', 'D'}, {'-', 'D', 'D', 'N'},
    {'+', 'D', 'I', 'S'}, {'+', 'I', 'D', 'S'}, {'-', 'D', 'I', 'S'}, {'+', 'D', 'H', 'S'},
    {'+', 'H', 'D', 'S'}, {'-', 'D', 'T', 'I'}, {'-', 'T', 'D', 'I'},
    {'+', 'I', 'I', 'I'}, {'-', 'I', 'I', 'I'}, {'*', 'I', 'F', 'I'}, {'*', 'F', 'I', 'I'},
    {'/', 'I', 'F', 'I'}, {'+', 'H', 'I', 'H'}, {'+', 'I', 'H', 'H'}, {'-', 'H', 'I', 'H'},
    {'-', 'H', 'H', 'I'},
};

static char kind_of(QrSqlType t)
{
    return sqlt_is_ts(t) ? 'T' : t == QR_SQL_DATE ? 'D' : t == QR_SQL_TIME ? 'H'
           : t == QR_SQL_INTERVAL ? 'I' : sqlt_is_int(t) ? 'N' : sqlt_is_num(t) ? 'F' : 0;
}

static bool kind_fits(char want, char have) { return want == have || (want == 'F' && have == 'N'); }

int sqld_arith(SqlCtx *cx, int op, const SqlValue *a, const SqlValue *b, QrSqlType ret, int loc,
               SqlValue *out)
{
    char ka = kind_of(a->type), kb = kind_of(b->type);
    memset(out, 0, sizeof *out);
    out->type = ret;
    int rc;
    (void)loc;
    /* normalize operand order: interval / number / time first only where it commutes */
    if ((ka == 'I' && (kb == 'T' || kb == 'D' || kb == 'H')) || (ka == 'N' && kb == 'D') ||
        ((ka == 'F' || ka == 'N') && kb == 'I') || (ka == 'H' && kb == 'D')) {
        const SqlValue *t = a;
        a = b;
        b = t;
        char k = ka;
        ka = kb;
        kb = k;
    }
    if ((ka == 'T' || ka == 'D') && kb == 'I') { /* timestamp / date +- interval */
        if ((rc = ts_plus(cx, a->u.i, b, op == '-' ? -1 : 1, &out->u.i)))
            return rc;
        return QR_OK;
    }
    if (ka == 'D' && kb == 'N') { /* date +- days */
        int64_t d;
        if (__builtin_mul_overflow(b->u.i, SQL_US_PER_DAY, &d) ||
            __builtin_add_overflow(a->u.i, op == '-' ? -d : d, &out->u.i) || !ts_ok(out->u.i))
            return sql_err_at(cx, -1, QR_EINVAL, "22008", "date out of range");
        return QR_OK;
    }
    if (ka == 'D' && kb == 'D') { /* date - date: days */
        out->u.i = (a->u.i - b->u.i) / SQL_US_PER_DAY;
        return QR_OK;
    }
    if (ka == 'D' && kb == 'H') { /* date + time */
        out->u.i = a->u.i + b->u.i;
        return QR_OK;
    }
    if ((ka == 'T' || ka == 'D') && (kb == 'T' || kb == 'D')) { /* timestamp - timestamp */
        int64_t d;
        if (__builtin_sub_overflow(a->u.i, b->u.i, &d))
            return iv_range(cx);
        *out = justify_hours(0, 0, d);
        return QR_OK;
    }
    if (ka == 'I' && kb == 'I') {
        int64_t m = (int64_t)a->u.iv.months + (op == '-' ? -1 : 1) * (int64_t)b->u.iv.months;
        int64_t d = (int64_t)a->u.iv.days + (op == '-' ? -1 : 1) * (int64_t)b->u.iv.days;
        int64_t us;
        if ((op == '-' ? __builtin_sub_overflow(a->u.iv.us, b->u.iv.us, &us)
                       : __builtin_add_overflow(a->u.iv.us, b->u.iv.us, &us)) ||
            !iv_fits(m, d))
            return iv_range(cx);
        *out = iv_make(m, d, us);
        return QR_OK;
    }
    if (ka == 'I' && (kb == 'F' || kb == 'N')) {
        double f;
        if ((rc = num_arg(cx, b, &f)))
            return rc;
        return iv_scale(cx, a, f, op == '/', out);
    }
    if (ka == 'H' && kb == 'I') { /* time +- interval: wraps around midnight */
        int64_t t = (a->u.i + (op == '-' ? -1 : 1) * (b->u.iv.us % SQL_US_PER_DAY)) % SQL_US_PER_DAY;
        out->u.i = t < 0 ? t + SQL_US_PER_DAY : t;
        return QR_OK;
    }
    if (ka == 'H' && kb == 'H') {
        *out = iv_make(0, 0, a->u.i - b->u.i);
        return QR_OK;
    }
    return sql_err_at(cx, loc, QR_EINTERNAL, "XX000", "no date/time operator for these operands");
}

int sqld_arith_type(int op, QrSqlType l, QrSqlType r, QrSqlType *ret)
{
    char kl = kind_of(l), kr = kind_of(r);
    if (!kl || !kr || (kl != 'T' && kl != 'D' && kl != 'H' && kl != 'I' && kr != 'T' &&
                       kr != 'D' && kr != 'H' && kr != 'I'))
        return -1;
    for (size_t i = 0; i < sizeof OPS / sizeof *OPS; i++) {
        const DtOp *o = &OPS[i];
        if (o->op != op || !kind_fits(o->l, kl) || !kind_fits(o->r, kr))
            continue;
        switch (o->ret) {
        case 'T':
            *ret = kl == 'T' ? l : r;
            break;
        case 'S':
            *ret = QR_SQL_TIMESTAMP;
            break;
        case 'D':
            *ret = QR_SQL_DATE;
            break;
        case 'H':
            *ret = QR_SQL_TIME;
            break;
        case 'N':
            *ret = QR_SQL_INT4;
            break;
        default:
            *ret = QR_SQL_INTERVAL;
            break;
        }
        return 0;
    }
    return 1;
}

int sqld_negate(SqlCtx *cx, const SqlValue *v, SqlValue *out)
{
    if (v->u.iv.us == INT64_MIN || v->u.iv.days == INT32_MIN || v->u.iv.months == INT32_MIN)
        return iv_range(cx);
    *out = iv_make(-(int64_t)v->u.iv.months, -(int64_t)v->u.iv.days, -v->u.iv.us);
    return QR_OK;
}

/* ---- extract ---- */

int sqld_extract(SqlCtx *cx, const char *field, const SqlValue *v, double *out)
{
    if (v->type == QR_SQL_INTERVAL) {
        int64_t m = v->u.iv.months, d = v->u.iv.days, t = v->u.iv.us;
        int64_t hour = t / US_PER_HOUR, min = t / US_PER_MIN % 60;
        int64_t usec = t % US_PER_MIN; /* seconds and their fraction, in microseconds */
        const struct {
            const char *name;
            double v;
        } F[] = {
            {"epoch", (double)(m / 12) * 365.25 * 86400 + (double)(m % 12) * 30 * 86400 +
                          (double)d * 86400 + (double)t / 1e6},
            {"millennium", (double)(m / 12 / 1000)}, {"century", (double)(m / 12 / 100)},
            {"decade", (double)(m / 12 / 10)},       {"year", (double)(m / 12)},
            {"quarter", (double)((m % 12) / 3 + 1)}, {"month", (double)(m % 12)},
            {"day", (double)d},                      {"hour", (double)hour},
            {"minute", (double)min},                 {"second", (double)usec / 1e6},
            {"milliseconds", (double)usec / 1e3},    {"microseconds", (double)usec},
        };
        for (size_t i = 0; i < sizeof F / sizeof *F; i++)
            if (!strcasecmp(field, F[i].name)) {
                *out = F[i].v;
                return QR_OK;
            }
        return sql_err_at(cx, -1, QR_EINVAL, "22023", "unit \"%s\" not supported for type interval",
                          field);
    }
    if (v->type == QR_SQL_TIME) {
        int64_t t = v->u.i;
        const struct {
            const char *name;
            double v;
        } F[] = {
            {"hour", (double)(t / US_PER_HOUR)}, {"minute", (double)(t / US_PER_MIN % 60)},
            {"second", (double)(t % US_PER_MIN) / 1e6},
            {"milliseconds", (double)(t % US_PER_MIN) / 1e3},
            {"microseconds", (double)(t % US_PER_MIN)}, {"epoch", (double)t / 1e6},
        };
        for (size_t i = 0; i < sizeof F / sizeof *F; i++)
            if (!strcasecmp(field, F[i].name)) {
                *out = F[i].v;
                return QR_OK;
            }
        return sql_err_at(cx, -1, QR_EINVAL, "22023",
                          "unit \"%s\" not supported for type time without time zone", field);
    }
    if (v->type == QR_SQL_DATE) {
        static const char *const NOT_DATE[] = {"hour", "minute", "second", "milliseconds",
                                               "microseconds", "timezone"};
        for (size_t i = 0; i < sizeof NOT_DATE / sizeof *NOT_DATE; i++)
            if (!strcasecmp(field, NOT_DATE[i]))
                return sql_err_at(cx, -1, QR_EINVAL, "22023",
                                  "unit \"%s\" not supported for type date", field);
    }
    if (sqlv_extract(field, v->u.i, out) < 0)
        return sql_err_at(cx, -1, QR_EINVAL, "22023", "unit \"%s\" not recognized for extract",
                          field);
    return QR_OK;
}

/* ---- functions ---- */

static int ts_of(SqlCtx *cx, const SqlValue *v, int64_t *us)
{
    SqlValue t;
    int rc = sqlt_is_datetime(v->type) ? (t = *v, QR_OK)
                                       : sqlv_cast(cx, v, QR_SQL_TIMESTAMPTZ, -1, &t);
    *us = t.u.i;
    return rc;
}

/* age(a, b): the symbolic difference in years, months, days and time, as
 * PostgreSQL's timestamp_age; age(a) is age(today's midnight, a). */
static int f_age(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    int64_t t1, t2;
    int rc;
    if (n == 1) {
        t1 = day_floor(qr_wall_us());
        rc = ts_of(cx, &a[0], &t2);
    } else if ((rc = ts_of(cx, &a[0], &t1)) == QR_OK) {
        rc = ts_of(cx, &a[1], &t2);
    }
    if (rc)
        return rc;
    SqlTm x, y;
    sqld_split(t1, &x);
    sqld_split(t2, &y);
    int64_t usec = (int64_t)x.usec - y.usec, sec = (int64_t)x.sec - y.sec,
            min = (int64_t)x.min - y.min, hour = (int64_t)x.hour - y.hour,
            day = (int64_t)x.day - y.day, mon = (int64_t)x.mon - y.mon, year = x.year - y.year;
    bool flip = t1 < t2;
    if (flip)
        usec = -usec, sec = -sec, min = -min, hour = -hour, day = -day, mon = -mon, year = -year;
    while (usec < 0)
        usec += US_PER_SEC, sec--;
    while (sec < 0)
        sec += 60, min--;
    while (min < 0)
        min += 60, hour--;
    while (hour < 0)
        hour += 24, day--;
    while (day < 0) {
        const SqlTm *m = flip ? &x : &y;
        day += month_days(m->year, m->mon);
        mon--;
    }
    while (mon < 0)
        mon += 12, year--;
    if (flip)
        usec = -usec, sec = -sec, min = -min, hour = -hour, day = -day, mon = -mon, year = -year;
    *out = iv_make(year * 12 + mon, day, hour * US_PER_HOUR + min * US_PER_MIN + sec * US_PER_SEC + usec);
    return QR_OK;
}

static int f_justify_days(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)cx, (void)n;
    *out = justify_days(a->u.iv.months, a->u.iv.days, a->u.iv.us);
    return QR_OK;
}

static int f_justify_hours(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)cx, (void)n;
    *out = justify_hours(a->u.iv.months, a->u.iv.days, a->u.iv.us);
    return QR_OK;
}

static int f_justify_interval(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)cx, (void)n;
    int64_t months = a->u.iv.months, days = a->u.iv.days, us = a->u.iv.us;
    int64_t whole = us / SQL_US_PER_DAY;
    us -= whole * SQL_US_PER_DAY;
    days += whole;
    whole = days / 30;
    days -= whole * 30;
    months += whole;
    if (months > 0 && (days < 0 || (days == 0 && us < 0))) {
        days += 30;
        months--;
    } else if (months < 0 && (days > 0 || (days == 0 && us > 0))) {
        days -= 30;
        months++;
    }
    if (!iv_fits(months, days))
        return iv_range(cx);
    *out = justify_hours(months, days, us); /* the time under a day: its sign agrees */
    return QR_OK;
}

static int f_make_date(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    int64_t y = a[0].u.i, m = a[1].u.i, d = a[2].u.i;
    if (y == 0 || m < 1 || m > 12 || d < 1 || y < -4713 || y > 5874897 ||
        d > (int64_t)month_days(y < 0 ? y + 1 : y, (unsigned)m))
        return sql_err_at(cx, -1, QR_EINVAL, "22008", "date field value out of range: %" PRId64
                          "-%02" PRId64 "-%02" PRId64, y, m, d);
    memset(out, 0, sizeof *out);
    out->type = QR_SQL_DATE;
    out->u.i = sqld_days_from_civil(y < 0 ? y + 1 : y, (unsigned)m, (unsigned)d) * SQL_US_PER_DAY;
    return QR_OK;
}

static void put_num(QrBuf *b, bool fm, int width, int64_t v)
{
    if (fm)
        qr_buf_printf(b, "%" PRId64, v);
    else
        qr_buf_printf(b, "%0*" PRId64, width, v);
}

/* to_char(timestamp / date / interval, format) with PostgreSQL's common
 * patterns: YYYY YYY YY Y, MM, MONTH Month month MON Mon mon, DD DDD D,
 * DAY Day day DY Dy dy, HH HH12 HH24, MI, SS, MS, US, AM PM am pm A.M.
 * P.M., Q, TZ tz OF, the FM prefix (no padding), "quoted text" and \x. */
static int f_to_char(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    SqlValue f;
    int rc;
    if ((rc = sqlv_cast(cx, &a[1], QR_SQL_TEXT, -1, &f)))
        return rc;
    if (sqlt_is_num(a[0].type)) /* numbers: sql_numeric.c */
        return sqln_to_char(cx, &a[0], f.u.s.s ? f.u.s.s : "", f.u.s.n, out);
    SqlTm tm;
    bool tz = a[0].type == QR_SQL_TIMESTAMPTZ;
    if (a[0].type == QR_SQL_INTERVAL) {
        /* an interval's fields: years and months of its months, days, then time */
        int64_t t = a[0].u.iv.us;
        memset(&tm, 0, sizeof tm);
        tm.year = a[0].u.iv.months / 12;
        tm.mon = (unsigned)(a[0].u.iv.months % 12);
        tm.day = (unsigned)a[0].u.iv.days;
        tm.hour = (unsigned)(t / US_PER_HOUR);
        tm.min = (unsigned)(t / US_PER_MIN % 60);
        tm.sec = (unsigned)(t / US_PER_SEC % 60);
        tm.usec = (unsigned)(t % US_PER_SEC);
    } else {
        int64_t us;
        if ((rc = ts_of(cx, &a[0], &us)))
            return rc;
        sqld_split(us, &tm);
    }
    static const char *const MONTHS[] = {"January", "February", "March",     "April",
                                         "May",     "June",     "July",      "August",
                                         "September", "October", "November", "December"};
    static const char *const DAYS[] = {"Sunday", "Monday", "Tuesday", "Wednesday",
                                       "Thursday", "Friday", "Saturday"};
    QrBuf b;
    qr_buf_init(&b);
    const char *p = f.u.s.s, *end = p + f.u.s.n;
    while (p < end) {
        bool fm = false;
        if (end - p >= 2 && !strncasecmp(p, "FM", 2)) {
            fm = true;
            p += 2;
            if (p == end)
                break;
        }
        size_t left = (size_t)(end - p);
#define IS(tok) (left >= strlen(tok) && !strncmp(p, tok, strlen(tok)) && (p += strlen(tok), true))
#define ISI(tok) (left >= strlen(tok) && !strncasecmp(p, tok, strlen(tok)) && (p += strlen(tok), true))
#define NUM(w, v) put_num(&b, fm, (w), (int64_t)(v))
        if (*p == '"') {
            for (p++; p < end && *p != '"'; p++) {
                if (*p == '\\' && p + 1 < end)
                    p++;
                qr_buf_putc(&b, (uint8_t)*p);
            }
            if (p < end)
                p++;
        } else if (*p == '\\' && p + 1 < end) {
            qr_buf_putc(&b, (uint8_t)p[1]);
            p += 2;
        } else if (ISI("YYYY")) {
            NUM(4, tm.year > 0 ? tm.year : 1 - tm.year);
        } else if (ISI("YYY")) {
            NUM(3, (tm.year > 0 ? tm.year : 1 - tm.year) % 1000);
        } else if (ISI("YY")) {
            NUM(2, (tm.year > 0 ? tm.year : 1 - tm.year) % 100);
        } else if (ISI("Y")) {
            NUM(1, (tm.year > 0 ? tm.year : 1 - tm.year) % 10);
        } else if (IS("MONTH") || IS("Month") || IS("month")) {
            const char *m = tm.mon >= 1 && tm.mon <= 12 ? MONTHS[tm.mon - 1] : "";
            char w[16];
            snprintf(w, sizeof w, "%s", m);
            char c0 = p[-5], c1 = p[-4];
            for (char *q = w; *q; q++)
                *q = (char)(c1 == 'O' ? toupper((unsigned char)*q)
                            : c0 == 'm' ? tolower((unsigned char)*q) : *q);
            qr_buf_printf(&b, fm ? "%s" : "%-9s", w);
        } else if (IS("MON") || IS("Mon") || IS("mon")) {
            const char *m = tm.mon >= 1 && tm.mon <= 12 ? MONTHS[tm.mon - 1] : "";
            char w[4] = {m[0], m[0] ? m[1] : 0, m[0] ? m[2] : 0, 0};
            char c0 = p[-3], c1 = p[-2];
            for (char *q = w; *q; q++)
                *q = (char)(c1 == 'O' ? toupper((unsigned char)*q)
                            : c0 == 'm' ? tolower((unsigned char)*q) : *q);
            qr_buf_append(&b, w, strlen(w));
        } else if (ISI("MM")) {
            NUM(2, tm.mon);
        } else if (IS("DAY") || IS("Day") || IS("day")) {
            char w[16];
            snprintf(w, sizeof w, "%s", DAYS[tm.dow % 7]);
            char c0 = p[-3], c1 = p[-2];
            for (char *q = w; *q; q++)
                *q = (char)(c1 == 'A' ? toupper((unsigned char)*q)
                            : c0 == 'd' ? tolower((unsigned char)*q) : *q);
            qr_buf_printf(&b, fm ? "%s" : "%-9s", w);
        } else if (IS("DY") || IS("Dy") || IS("dy")) {
            const char *d = DAYS[tm.dow % 7];
            char w[4] = {d[0], d[1], d[2], 0};
            char c0 = p[-2], c1 = p[-1];
            for (char *q = w; *q; q++)
                *q = (char)(c1 == 'Y' ? toupper((unsigned char)*q)
                            : c0 == 'd' ? tolower((unsigned char)*q) : *q);
            qr_buf_append(&b, w, 3);
        } else if (ISI("DDD")) {
            NUM(3, tm.doy);
        } else if (ISI("DD")) {
            NUM(2, tm.day);
        } else if (ISI("D")) {
            NUM(1, tm.dow + 1);
        } else if (ISI("HH24")) {
            NUM(2, tm.hour);
        } else if (ISI("HH12") || ISI("HH")) {
            NUM(2, tm.hour % 12 == 0 ? 12 : tm.hour % 12);
        } else if (ISI("MI")) {
            NUM(2, tm.min);
        } else if (ISI("SS")) {
            NUM(2, tm.sec);
        } else if (ISI("MS")) {
            NUM(3, tm.usec / 1000);
        } else if (ISI("US")) {
            NUM(6, tm.usec);
        } else if (IS("AM") || IS("PM")) {
            qr_buf_append(&b, tm.hour < 12 ? "AM" : "PM", 2);
        } else if (IS("am") || IS("pm")) {
            qr_buf_append(&b, tm.hour < 12 ? "am" : "pm", 2);
        } else if (IS("A.M.") || IS("P.M.")) {
            qr_buf_append(&b, tm.hour < 12 ? "A.M." : "P.M.", 4);
        } else if (ISI("Q")) {
            NUM(1, (tm.mon - 1) / 3 + 1);
        } else if (IS("TZ") || IS("tz")) {
            if (tz)
                qr_buf_append(&b, p[-1] == 'Z' ? "UTC" : "utc", 3);
        } else if (IS("OF")) {
            if (tz)
                qr_buf_append(&b, "+00", 3);
        } else {
            qr_buf_putc(&b, (uint8_t)*p++);
        }
#undef IS
#undef ISI
#undef NUM
        if (b.len > SQL_TEXT_MAX)
            break;
    }
    return sqlv_buf_text(cx, &b, out);
}

/* ---- binding ---- */

/* The first n arguments: untyped ones take `want`, each must pass ok(). */
static int args_as(SqlBind *b, SqlExpr *e, int n, QrSqlType want, bool (*ok)(QrSqlType))
{
    for (int i = 0; i < n; i++) {
        int rc = sql_coerce_unknown(b, e->args[i], want);
        if (rc)
            return rc;
        if (!ok(e->args[i]->type))
            return sql_err_at(b->cx, e->loc, QR_ENOTFOUND, "42883",
                              "function %s(%s%s) does not exist", e->name,
                              qr_sql_type_name(e->args[i]->type), e->n_args > 1 ? ", ..." : "");
    }
    return QR_OK;
}

static bool is_interval(QrSqlType t) { return t == QR_SQL_INTERVAL; }
static bool is_chartable(QrSqlType t)
{
    return sqlt_is_datetime(t) || t == QR_SQL_INTERVAL || sqlt_is_num(t);
}

static int chk_interval(SqlBind *b, SqlExpr *e)
{
    return args_as(b, e, 1, QR_SQL_INTERVAL, is_interval);
}

static int chk_age(SqlBind *b, SqlExpr *e)
{
    return args_as(b, e, e->n_args, QR_SQL_TIMESTAMPTZ, sqlt_is_datetime);
}

static int chk_to_char(SqlBind *b, SqlExpr *e)
{
    int rc = args_as(b, e, 1, QR_SQL_TIMESTAMPTZ, is_chartable);
    return rc ? rc : sql_coerce_unknown(b, e->args[1], QR_SQL_TEXT);
}

static int chk_make_date(SqlBind *b, SqlExpr *e)
{
    return args_as(b, e, 3, QR_SQL_INT4, sqlt_is_int);
}

const SqlFuncDef SQL_DATETIME_FUNCS[] = {
    {"age", 1, 2, QR_SQL_INTERVAL, f_age, true, false, chk_age},
    {"justify_days", 1, 1, QR_SQL_INTERVAL, f_justify_days, true, false, chk_interval},
    {"justify_hours", 1, 1, QR_SQL_INTERVAL, f_justify_hours, true, false, chk_interval},
    {"justify_interval", 1, 1, QR_SQL_INTERVAL, f_justify_interval, true, false, chk_interval},
    {"make_date", 3, 3, QR_SQL_DATE, f_make_date, true, false, chk_make_date},
    {"to_char", 2, 2, QR_SQL_TEXT, f_to_char, true, false, chk_to_char},
};
const int SQL_N_DATETIME_FUNCS = (int)(sizeof SQL_DATETIME_FUNCS / sizeof SQL_DATETIME_FUNCS[0]);

/* ---- binary forms ---- */

void sqld_send(const SqlValue *v, QrBuf *b)
{
    uint8_t x[16];
    int n = 0;
    if (v->type == QR_SQL_DATE) {
        int32_t d = (int32_t)(v->u.i / SQL_US_PER_DAY - PG_EPOCH_DAYS);
        for (int i = 0; i < 4; i++)
            x[n++] = (uint8_t)((uint32_t)d >> (24 - 8 * i));
    } else if (v->type == QR_SQL_TIME) {
        for (int i = 0; i < 8; i++)
            x[n++] = (uint8_t)((uint64_t)v->u.i >> (56 - 8 * i));
    } else { /* interval: microseconds, days, months */
        for (int i = 0; i < 8; i++)
            x[n++] = (uint8_t)((uint64_t)v->u.iv.us >> (56 - 8 * i));
        for (int i = 0; i < 4; i++)
            x[n++] = (uint8_t)((uint32_t)v->u.iv.days >> (24 - 8 * i));
        for (int i = 0; i < 4; i++)
            x[n++] = (uint8_t)((uint32_t)v->u.iv.months >> (24 - 8 * i));
    }
    qr_buf_append(b, x, (size_t)n);
}

int sqld_recv(SqlCtx *cx, QrSqlType t, const uint8_t *p, size_t n, SqlValue *out)
{
    uint64_t u = 0;
    memset(out, 0, sizeof *out);
    out->type = t;
    if (t == QR_SQL_DATE && n == 4) {
        int32_t d = (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
        out->u.i = ((int64_t)d + PG_EPOCH_DAYS) * SQL_US_PER_DAY;
        return QR_OK;
    }
    if (t == QR_SQL_TIME && n == 8) {
        for (int i = 0; i < 8; i++)
            u = u << 8 | p[i];
        if ((int64_t)u < 0 || (int64_t)u > SQL_US_PER_DAY)
            return sql_err_at(cx, -1, QR_EINVAL, "22008", "time out of range");
        out->u.i = (int64_t)u;
        return QR_OK;
    }
    if (t == QR_SQL_INTERVAL && n == 16) {
        for (int i = 0; i < 8; i++)
            u = u << 8 | p[i];
        out->u.iv.us = (int64_t)u;
        out->u.iv.days = (int32_t)((uint32_t)p[8] << 24 | (uint32_t)p[9] << 16 | (uint32_t)p[10] << 8 | p[11]);
        out->u.iv.months = (int32_t)((uint32_t)p[12] << 24 | (uint32_t)p[13] << 16 |
                                     (uint32_t)p[14] << 8 | p[15]);
        return QR_OK;
    }
    return sql_err_at(cx, -1, QR_EINVAL, "22P03", "incorrect binary data format in bind parameter");
}
