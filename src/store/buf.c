/*
 * buf.c — QrBuf, varints, QrReader.
 * Layer: store/ (base kit).
 */
#include "store/buf.h"
#include "store/mem.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void qr_buf_init(QrBuf *b)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->oom = false;
}

void qr_buf_free(QrBuf *b)
{
    qr_free(b->data);
    qr_buf_init(b);
}

bool qr_buf_try_reserve(QrBuf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    if (extra > SIZE_MAX / 4 - b->len) { /* doubling below would wrap */
        b->oom = true;
        return false;
    }
    bool ok = qr_buf_reserve(b, extra);
    b->oom = false; /* the contents are intact: nothing was appended */
    return ok;
}

bool qr_buf_reserve(QrBuf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    if (extra > SIZE_MAX / 4 - b->len) { /* doubling below would wrap */
        b->oom = true;
        return false;
    }
    size_t nc = b->cap ? b->cap : 256;
    while (nc < b->len + extra + 1)
        nc *= 2;
    uint8_t *nd = qr_realloc(b->data, nc);
    if (!nd) {
        b->oom = true;
        return false;
    }
    b->data = nd;
    b->cap = nc;
    return true;
}

void qr_buf_append(QrBuf *b, const void *p, size_t n)
{
    if (!n || !qr_buf_reserve(b, n))
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void qr_buf_putc(QrBuf *b, uint8_t c)
{
    if (!qr_buf_reserve(b, 1))
        return;
    b->data[b->len++] = c;
}

void qr_buf_put_u16(QrBuf *b, uint16_t v) { qr_buf_append(b, &v, 2); }
void qr_buf_put_u32(QrBuf *b, uint32_t v) { qr_buf_append(b, &v, 4); }
void qr_buf_put_u64(QrBuf *b, uint64_t v) { qr_buf_append(b, &v, 8); }

void qr_buf_put_varint(QrBuf *b, uint64_t v)
{
    if ((b->oom || b->len + 11 > b->cap) && !qr_buf_reserve(b, 10))
        return;
    b->len += qr_varint_encode(b->data + b->len, v);
}

void qr_buf_put_str(QrBuf *b, const char *s, size_t n)
{
    qr_buf_put_varint(b, n);
    qr_buf_append(b, s, n);
}

void qr_buf_printf(QrBuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof tmp) {
        qr_buf_append(b, tmp, (size_t)n);
        return;
    }
    if (!qr_buf_reserve(b, (size_t)n + 1))
        return;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

uint8_t *qr_buf_steal(QrBuf *b, size_t *len)
{
    if (!qr_buf_reserve(b, 0)) {
        qr_buf_free(b);
        if (len)
            *len = 0;
        return NULL;
    }
    b->data[b->len] = '\0';
    uint8_t *d = b->data;
    if (len)
        *len = b->len;
    qr_buf_init(b);
    return d;
}

size_t qr_varint_decode(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    uint64_t r = 0;
    for (size_t i = 0; i < 10; i++) {
        if (p + i >= end)
            return 0;
        uint8_t c = p[i];
        if (i == 9 && c > 1)
            return 0; /* overlong: more than 64 bits */
        r |= (uint64_t)(c & 0x7f) << (7 * i);
        if (!(c & 0x80)) {
            *v = r;
            return i + 1;
        }
    }
    return 0;
}

static inline bool rd_need(QrReader *r, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = true;
        return false;
    }
    return true;
}

uint8_t qr_rd_u8(QrReader *r) { return rd_need(r, 1) ? *r->p++ : 0; }

uint16_t qr_rd_u16(QrReader *r)
{
    if (!rd_need(r, 2))
        return 0;
    uint16_t v = qr_get_u16le(r->p);
    r->p += 2;
    return v;
}

uint32_t qr_rd_u32(QrReader *r)
{
    if (!rd_need(r, 4))
        return 0;
    uint32_t v = qr_get_u32le(r->p);
    r->p += 4;
    return v;
}

uint64_t qr_rd_u64(QrReader *r)
{
    if (!rd_need(r, 8))
        return 0;
    uint64_t v = qr_get_u64le(r->p);
    r->p += 8;
    return v;
}

uint64_t qr_rd_varint_slow(QrReader *r)
{
    uint64_t v = 0;
    if (r->bad)
        return 0;
    size_t n = qr_varint_decode(r->p, r->end, &v);
    if (!n) {
        r->bad = true;
        return 0;
    }
    r->p += n;
    return v;
}

const uint8_t *qr_rd_bytes(QrReader *r, size_t n)
{
    if (!rd_need(r, n))
        return NULL;
    const uint8_t *p = r->p;
    r->p += n;
    return p;
}

const uint8_t *qr_rd_str(QrReader *r, size_t *n)
{
    uint64_t len = qr_rd_varint(r);
    if (r->bad || len > qr_rd_left(r)) {
        r->bad = true;
        *n = 0;
        return NULL;
    }
    *n = (size_t)len;
    return qr_rd_bytes(r, (size_t)len);
}

/* ---- JSON strings ---- */

int qr_utf8_seq_len(const unsigned char *p, size_t left)
{
    unsigned c = p[0];
    int n;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    if ((size_t)n > left)
        return 0;
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return n;
}

size_t qr_utf8_invalid_at(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        uint64_t w;
        if (i + 8 <= n && (memcpy(&w, p + i, 8), (w & 0x8080808080808080ull) == 0)) {
            i += 8;
            continue;
        }
        int l = qr_utf8_seq_len(p + i, n - i);
        if (l == 0)
            return i;
        i += (size_t)l;
    }
    return n;
}

void qr_buf_json_str(QrBuf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    qr_buf_putc(b, '"');
    while (p < end) {
        const unsigned char *run = p;
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
            p++;
        if (p > run)
            qr_buf_append(b, run, (size_t)(p - run));
        if (p >= end)
            break;
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            qr_buf_putc(b, '\\');
            qr_buf_putc(b, (uint8_t)c);
            p++;
        } else if (c < 0x20) {
            switch (c) {
            case '\n': qr_buf_append(b, "\\n", 2); break;
            case '\r': qr_buf_append(b, "\\r", 2); break;
            case '\t': qr_buf_append(b, "\\t", 2); break;
            default: {
                char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                qr_buf_append(b, e, 6);
            }
            }
            p++;
        } else {
            int l = qr_utf8_seq_len(p, (size_t)(end - p));
            if (l == 0) {
                qr_buf_append(b, "\xEF\xBF\xBD", 3);
                p++;
            } else {
                qr_buf_append(b, p, (size_t)l);
                p += l;
            }
        }
    }
    qr_buf_putc(b, '"');
}

/* d's digits rounded to p significant digits as "%.{p}g" prints them,
 * derived from its 17 correctly rounded digits dig[0..17) (decimal
 * exponent e): exact unless the digits cut off are a half to within the
 * 17th digit's rounding, when *ok is false and the caller prints it. */
static void g_from_digits(const char *dig, int e, bool neg, int p, char *out, bool *ok)
{
    char r[18];
    memcpy(r, dig, (size_t)p);
    int tail = p >= 17 ? 0 : p == 16 ? dig[16] - '0' : (dig[15] - '0') * 10 + (dig[16] - '0');
    int half = p >= 17 ? 1 : p == 16 ? 5 : 50;
    *ok = tail != half;
    if (!*ok)
        return;
    if (tail > half) { /* round up, carrying */
        int i = p - 1;
        while (i >= 0 && r[i] == '9')
            r[i--] = '0';
        if (i >= 0) {
            r[i]++;
        } else {
            r[0] = '1'; /* 99...9 became 100...0: one more digit before the point */
            e++;
        }
    }
    int nd = p; /* %g drops trailing zeros (and a point left alone) */
    while (nd > 1 && r[nd - 1] == '0')
        nd--;
    char *o = out;
    if (neg)
        *o++ = '-';
    if (e < -4 || e >= p) {
        *o++ = r[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, r + 1, (size_t)nd - 1);
            o += nd - 1;
        }
        sprintf(o, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
        return;
    }
    if (e < 0) {
        *o++ = '0';
        *o++ = '.';
        for (int z = 0; z < -e - 1; z++)
            *o++ = '0';
        memcpy(o, r, (size_t)nd);
        o += nd;
    } else {
        int ip = e + 1; /* digits before the point */
        for (int i = 0; i < ip; i++)
            *o++ = i < nd ? r[i] : '0';
        if (nd > ip) {
            *o++ = '.';
            memcpy(o, r + ip, (size_t)(nd - ip));
            o += nd - ip;
        }
    }
    *o = '\0';
}

void qr_buf_double(QrBuf *b, double d, bool f4)
{
    char t[40];
    if (f4 || !isfinite(d)) {
        for (int p = f4 ? 6 : 15; p <= 17; p++) {
            snprintf(t, sizeof t, "%.*g", p, d);
            if (f4 ? (float)strtod(t, NULL) == (float)d : strtod(t, NULL) == d)
                break;
        }
        qr_buf_append(b, t, strlen(t));
        return;
    }
    /* the shortest of 15, 16, 17 digits that reads back as d, as the loop
     * above finds it, with one conversion of the value to decimal instead
     * of three: 15 and 16 digits are rounded from the 17 */
    char e17[40], dig[17];
    snprintf(e17, sizeof e17, "%.16e", d); /* [-]d.dddddddddddddddde[+-]XX */
    bool neg = e17[0] == '-';
    const char *m = e17 + neg;
    dig[0] = m[0];
    memcpy(dig + 1, m + 2, 16);
    int e = atoi(m + 19);
    for (int p = 15; p <= 16; p++) {
        bool ok;
        g_from_digits(dig, e, neg, p, t, &ok);
        if (!ok)
            snprintf(t, sizeof t, "%.*g", p, d);
        if (strtod(t, NULL) == d) {
            qr_buf_append(b, t, strlen(t));
            return;
        }
    }
    bool ok;
    g_from_digits(dig, e, neg, 17, t, &ok); /* the 17 digits as they are */
    qr_buf_append(b, t, strlen(t));
}

/* ---- PostgreSQL array text ---- */

static bool arr_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

void qr_buf_array_elem(QrBuf *b, const char *s, size_t n)
{
    bool quote = n == 0 || (n == 4 && !strncasecmp(s, "NULL", 4));
    for (size_t k = 0; k < n && !quote; k++)
        quote = s[k] == '{' || s[k] == '}' || s[k] == ',' || s[k] == '"' || s[k] == '\\' ||
                arr_space(s[k]);
    if (!quote) {
        qr_buf_append(b, s, n);
        return;
    }
    qr_buf_putc(b, '"');
    for (size_t k = 0; k < n; k++) {
        if (s[k] == '"' || s[k] == '\\')
            qr_buf_putc(b, '\\');
        qr_buf_putc(b, (uint8_t)s[k]);
    }
    qr_buf_putc(b, '"');
}

int qr_array_next(const char *s, size_t n, size_t *pos, char *out, size_t *len, bool *is_null)
{
    size_t p = *pos;
    *len = 0;
    *is_null = false;
    if (p == 0) { /* the opening brace; "{}" is the empty array */
        while (p < n && arr_space(s[p]))
            p++;
        if (p == n || s[p] != '{')
            return -1;
        p++;
        while (p < n && arr_space(s[p]))
            p++;
        if (p < n && s[p] == '}') {
            *pos = p;
            goto closing;
        }
    } else {
        while (p < n && arr_space(s[p]))
            p++;
        if (p < n && s[p] == '}') {
            *pos = p;
            goto closing;
        }
        if (p == n || s[p] != ',')
            return -1;
        p++;
    }
    while (p < n && arr_space(s[p]))
        p++;
    size_t k = 0;
    if (p < n && s[p] == '"') {
        for (p++; p < n && s[p] != '"'; p++) {
            if (s[p] == '\\' && p + 1 < n)
                p++;
            out[k++] = s[p];
        }
        if (p == n)
            return -1;
        p++;
    } else {
        size_t keep = 0; /* bytes up to the last escaped one stay, white or not */
        while (p < n && s[p] != ',' && s[p] != '}') {
            if (s[p] == '{' || s[p] == '"')
                return -1;
            bool esc = s[p] == '\\' && p + 1 < n;
            if (esc)
                p++;
            out[k++] = s[p++];
            if (esc)
                keep = k;
        }
        while (k > keep && arr_space(out[k - 1]))
            k--;
        if (k == 0)
            return -1; /* "{a,,b}" */
        *is_null = k == 4 && keep == 0 && !strncasecmp(out, "NULL", 4);
    }
    *len = k;
    *pos = p;
    return 1;
closing:
    p = *pos + 1;
    while (p < n && arr_space(s[p]))
        p++;
    *pos = p;
    return p == n ? 0 : -1;
}
