/*
 * decimal.c — exact decimals at rest (decimal.h): canonical text and scaled
 * int64.  PostgreSQL's numeric_in / numeric_out decide the forms; the SQL
 * layer's arithmetic lives in query/sql_numeric.c.
 *
 * Layer: store/ (base kit).
 */
#include "store/decimal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEC_MAX_EXP 1000 /* |exponent| accepted in input ("1e1000") */

int dec_lex(const char *s, size_t n, DecLex *out)
{
    const char *p = s, *end = s + n;
    memset(out, 0, sizeof *out);
    while (p < end && isspace((unsigned char)*p))
        p++;
    while (end > p && isspace((unsigned char)end[-1]))
        end--;
    const char *q = p;
    if (q < end && (*q == '+' || *q == '-'))
        out->neg = *q++ == '-';
    size_t rest = (size_t)(end - q);
    if (q == p && rest == 3 && !strncasecmp(q, "nan", 3)) {
        out->special = 'n';
        return 0;
    }
    if ((rest == 8 && !strncasecmp(q, "infinity", 8)) || (rest == 3 && !strncasecmp(q, "inf", 3))) {
        out->special = out->neg ? 'm' : 'p';
        return 0;
    }
    out->ip = q;
    while (q < end && isdigit((unsigned char)*q))
        q++;
    out->il = (size_t)(q - out->ip);
    out->fp = q;
    if (q < end && *q == '.') {
        out->fp = ++q;
        while (q < end && isdigit((unsigned char)*q))
            q++;
        out->fl = (size_t)(q - out->fp);
    }
    if (out->il + out->fl == 0)
        return -1;
    if (q < end && (*q == 'e' || *q == 'E')) {
        q++;
        bool eneg = false;
        if (q < end && (*q == '+' || *q == '-'))
            eneg = *q++ == '-';
        if (q == end || !isdigit((unsigned char)*q))
            return -1;
        while (q < end && isdigit((unsigned char)*q)) {
            out->exp = out->exp * 10 + (*q++ - '0');
            if (out->exp > DEC_MAX_EXP)
                return -1;
        }
        if (eneg)
            out->exp = -out->exp;
    }
    return q == end ? 0 : -1;
}

int dec_canon(const char *s, size_t n, char *out, size_t out_cap)
{
    DecLex x;
    if (dec_lex(s, n, &x) < 0)
        return -1;
    if (x.special) {
        const char *t = x.special == 'n' ? "NaN" : x.special == 'p' ? "Infinity" : "-Infinity";
        size_t l = strlen(t);
        if (l + 1 > out_cap)
            return -1;
        memcpy(out, t, l + 1);
        return (int)l;
    }
    const char *ip = x.ip, *fp = x.fp;
    size_t il = x.il, fl = x.fl;
    bool neg = x.neg;
    long exp = x.exp;
    /* the digits ip fp as one run with `scale` of them after the point */
    long scale = (long)fl - exp;
    long nd = (long)(il + fl);
    long int_digits = nd - scale;  /* may be <= 0 or > nd */
    long frac = scale > 0 ? scale : 0;
    size_t need = 1 + (size_t)(int_digits > 0 ? int_digits : 1) + 1 + (size_t)frac + 1;
    if (need > out_cap)
        return -1;
#define DIG(k) ((k) < 0 || (k) >= nd ? '0' : (size_t)(k) < il ? ip[(k)] : fp[(k) - (long)il])
    bool zero = true;
    for (long k = 0; k < nd; k++)
        zero &= DIG(k) == '0';
    size_t o = 0;
    if (neg && !zero)
        out[o++] = '-';
    long k = 0;
    if (int_digits > 0) {
        while (k < int_digits - 1 && DIG(k) == '0') /* leading zeros */
            k++;
        for (; k < int_digits; k++)
            out[o++] = DIG(k);
    } else {
        out[o++] = '0';
    }
    if (frac > 0) {
        out[o++] = '.';
        for (long j = int_digits; j < int_digits + frac; j++)
            out[o++] = DIG(j);
    }
#undef DIG
    out[o] = 0;
    return (int)o;
}

int dec_from_double(double d, char *out)
{
    if (d != d)
        return (int)(strcpy(out, "NaN"), 3);
    if (d > 1.7976931348623157e308 || d < -1.7976931348623157e308)
        return (int)(strcpy(out, d > 0 ? "Infinity" : "-Infinity"), d > 0 ? 8 : 9);
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    int n = dec_canon(buf, strlen(buf), out, DEC_TEXT_MAX);
    return n < 0 ? (int)(strcpy(out, "0"), 1) : n;
}

int dec_to_scaled(const char *s, size_t n, int scale, int64_t *out)
{
    char buf[2 * DEC_MAX_EXP + 64];
    int len = dec_canon(s, n, buf, sizeof buf);
    if (len < 0 || scale < 0 || scale > DEC_SCALED_MAX_PREC)
        return -1;
    if (!strcmp(buf, "NaN")) {
        *out = DEC_SCALED_NAN;
        return 0;
    }
    if (buf[0] == 'I' || buf[1] == 'I')
        return -2;
    const char *p = buf;
    bool neg = *p == '-';
    p += neg;
    const char *dot = strchr(p, '.');
    size_t il = dot ? (size_t)(dot - p) : strlen(p);
    const char *f = dot ? dot + 1 : "";
    size_t fl = strlen(f);
    uint64_t v = 0, lim = 1000000000000000000ull; /* 10^18: p <= 18 digits */
    for (size_t i = 0; i < il; i++) {
        v = v * 10 + (uint64_t)(p[i] - '0');
        if (v >= lim)
            return -2;
    }
    for (int i = 0; i < scale; i++) {
        v = v * 10 + ((size_t)i < fl ? (uint64_t)(f[i] - '0') : 0);
        if (v >= lim)
            return -2;
    }
    if ((size_t)scale < fl && f[scale] >= '5' && ++v >= lim) /* half away from zero */
        return -2;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

int dec_from_scaled(int64_t v, int scale, char *out)
{
    if (v == DEC_SCALED_NAN)
        return (int)(strcpy(out, "NaN"), 3);
    if (scale < 0)
        scale = 0;
    if (scale > DEC_SCALED_MAX_PREC)
        scale = DEC_SCALED_MAX_PREC;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    char dig[24];
    int nd = snprintf(dig, sizeof dig, "%0*llu", scale + 1, (unsigned long long)u);
    int o = 0;
    if (v < 0)
        out[o++] = '-';
    memcpy(out + o, dig, (size_t)(nd - scale));
    o += nd - scale;
    if (scale > 0) {
        out[o++] = '.';
        memcpy(out + o, dig + nd - scale, (size_t)scale);
        o += scale;
    }
    out[o] = 0;
    return o;
}
