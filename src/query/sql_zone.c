/*
 * sql_zone.c — time zones for timestamptz output: SET TIME ZONE / SET
 * TimeZone take UTC, an ISO offset ('+05:45', '-3') or an IANA name
 * ('Asia/Kathmandu', through ICU's zone data); a timestamptz is printed as
 * the local time there with its offset, as PostgreSQL does
 * ("2024-01-01 15:45:00+05:45").
 *
 * Layer: query/.  Calls ICU (ucal) and the base kit.
 *
 * The display zone is per thread: qr_sql_execute sets the session's zone on
 * the thread that runs the statement, and the same thread formats the
 * statement's rows (each PG connection and HTTP request has its own thread),
 * so qr_sql_value_text needs no session argument.  Storage stays UTC.
 */
#include "query/sql_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <unicode/ucal.h>
#include <unicode/ustring.h>

static _Thread_local char disp_zone[64];     /* "" = UTC */
static _Thread_local UCalendar *zone_cal;    /* owns: the calendar of cal_zone */
static _Thread_local char cal_zone[64];

/* "+05:45", "-3", "5" (ISO sign: east of Greenwich positive): seconds, or
 * false when `z` is not an offset. */
static bool iso_offset(const char *z, int32_t *off)
{
    const char *p = z;
    int sign = 1;
    if (*p == '+' || *p == '-')
        sign = *p++ == '-' ? -1 : 1;
    if (*p < '0' || *p > '9')
        return false;
    int h = 0, m = 0, n = 0;
    while (*p >= '0' && *p <= '9' && n < 2) {
        h = h * 10 + (*p++ - '0');
        n++;
    }
    if (*p == ':') {
        p++;
        if (p[0] < '0' || p[0] > '9' || p[1] < '0' || p[1] > '9')
            return false;
        m = (p[0] - '0') * 10 + (p[1] - '0');
        p += 2;
    }
    if (*p || h > 15 || m > 59)
        return false;
    *off = sign * (h * 3600 + m * 60);
    return true;
}

static bool is_utc(const char *z)
{
    return !*z || !strcasecmp(z, "UTC") || !strcasecmp(z, "GMT") || !strcasecmp(z, "Z") ||
           !strcasecmp(z, "Etc/UTC") || !strcasecmp(z, "Universal") || !strcasecmp(z, "Zulu");
}

/* The calendar of an IANA zone (cached per thread); NULL if ICU does not
 * know the zone. */
static UCalendar *zone_calendar(const char *z)
{
    if (zone_cal && !strcmp(cal_zone, z))
        return zone_cal;
    UChar id[64];
    int32_t n = 0;
    UErrorCode st = U_ZERO_ERROR;
    u_strFromUTF8(id, 64, &n, z, -1, &st);
    if (U_FAILURE(st))
        return NULL;
    UChar canon[64];
    UBool system = false;
    ucal_getCanonicalTimeZoneID(id, n, canon, 64, &system, &st);
    if (U_FAILURE(st) || !system)
        return NULL;
    UCalendar *c = ucal_open(id, n, "en_US", UCAL_GREGORIAN, &st);
    if (U_FAILURE(st))
        return NULL;
    if (zone_cal)
        ucal_close(zone_cal);
    zone_cal = c;
    snprintf(cal_zone, sizeof cal_zone, "%s", z);
    return c;
}

bool sqlz_valid(const char *zone)
{
    int32_t off;
    return zone && strlen(zone) < sizeof disp_zone &&
           (is_utc(zone) || iso_offset(zone, &off) || zone_calendar(zone) != NULL);
}

bool sqlz_offset(const char *zone, int64_t us, int32_t *off_s)
{
    *off_s = 0;
    if (!zone || is_utc(zone))
        return true;
    if (iso_offset(zone, off_s))
        return true;
    UCalendar *c = zone_calendar(zone);
    if (!c)
        return false;
    UErrorCode st = U_ZERO_ERROR;
    ucal_setMillis(c, (UDate)(us / 1000), &st);
    int32_t z = ucal_get(c, UCAL_ZONE_OFFSET, &st);
    int32_t d = ucal_get(c, UCAL_DST_OFFSET, &st);
    if (U_FAILURE(st))
        return false;
    *off_s = (z + d) / 1000;
    return true;
}

void sqlz_display_set(const char *zone)
{
    snprintf(disp_zone, sizeof disp_zone, "%s", zone && sqlz_valid(zone) ? zone : "");
}

int32_t sqlz_display_offset(int64_t us)
{
    int32_t off;
    return sqlz_offset(disp_zone, us, &off) ? off : 0;
}
