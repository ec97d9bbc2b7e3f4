/*
 * sql_bytes.c — uuid and bytea: PostgreSQL's text input and output
 * (uuid in any of its accepted spellings, bytea in hex and escape forms,
 * printed as hex as bytea_output = hex does), gen_random_uuid(),
 * encode / decode (hex, base64, escape), md5.
 *
 * Layer: query/.  Calls sql_value.c and libc.
 *
 * Values: a uuid is its 16 bytes inline (SqlValue.u.uuid); a bytea is its
 * bytes in u.s (any bytes, NULs included).
 */
#include "query/sql_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

static int nomem(SqlCtx *cx)
{
    return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* ---- uuid ---- */

int sqlb_uuid_in(SqlCtx *cx, const char *s, size_t n, int loc, SqlValue *out)
{
    const char *p = s, *end = s + n;
    while (p < end && isspace((unsigned char)*p))
        p++;
    while (end > p && isspace((unsigned char)end[-1]))
        end--;
    bool brace = p < end && *p == '{';
    if (brace) {
        if (end - p < 2 || end[-1] != '}')
            goto bad;
        p++, end--;
    }
    uint8_t u[16];
    int k = 0; /* hex digits read */
    for (; p < end; p++) {
        if (*p == '-') { /* a hyphen after a group of four digits, never first or doubled */
            if (k == 0 || k % 4 || k == 32 || p + 1 == end || p[1] == '-')
                goto bad;
            continue;
        }
        int h = hexval((unsigned char)*p);
        if (h < 0 || k == 32)
            goto bad;
        if (k % 2 == 0)
            u[k / 2] = (uint8_t)(h << 4);
        else
            u[k / 2] |= (uint8_t)h;
        k++;
    }
    if (k != 32)
        goto bad;
    memset(out, 0, sizeof *out);
    out->type = QR_SQL_UUID;
    memcpy(out->u.uuid, u, 16);
    return QR_OK;
bad:
    return sql_err_at(cx, loc, QR_EINVAL, "22P02", "invalid input syntax for type uuid: \"%.*s\"",
                      (int)(n > 80 ? 80 : n), s);
}

void sqlb_uuid_out(const uint8_t *u, QrBuf *out)
{
    static const char HEX[] = "0123456789abcdef";
    char b[36];
    int k = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            b[k++] = '-';
        b[k++] = HEX[u[i] >> 4];
        b[k++] = HEX[u[i] & 15];
    }
    qr_buf_append(out, b, 36);
}

static int f_gen_random_uuid(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n, (void)a;
    memset(out, 0, sizeof *out);
    out->type = QR_SQL_UUID;
    size_t got = 0;
    while (got < 16) {
        ssize_t r = getrandom(out->u.uuid + got, 16 - got, 0);
        if (r <= 0)
            return sql_err_at(cx, -1, QR_EINTERNAL, "XX000", "could not generate random values");
        got += (size_t)r;
    }
    out->u.uuid[6] = (uint8_t)((out->u.uuid[6] & 0x0F) | 0x40); /* version 4 */
    out->u.uuid[8] = (uint8_t)((out->u.uuid[8] & 0x3F) | 0x80); /* RFC 4122 variant */
    return QR_OK;
}

/* ---- bytea ---- */

static int bytea_of(SqlCtx *cx, const uint8_t *p, size_t n, SqlValue *out)
{
    char *d = qr_arena_alloc(cx->arena, n ? n : 1);
    if (!d)
        return nomem(cx);
    if (n)
        memcpy(d, p, n);
    memset(out, 0, sizeof *out);
    out->type = QR_SQL_BYTEA;
    out->u.s.s = d;
    out->u.s.n = n;
    return QR_OK;
}

int sqlb_bytea_in(SqlCtx *cx, const char *s, size_t n, int loc, SqlValue *out)
{
    uint8_t *d = qr_arena_alloc(cx->arena, n ? n : 1);
    if (!d)
        return nomem(cx);
    size_t k = 0;
    if (n >= 2 && s[0] == '\\' && s[1] == 'x') { /* hex: pairs, white space between them */
        for (size_t i = 2; i < n;) {
            if (isspace((unsigned char)s[i])) {
                i++;
                continue;
            }
            int h = hexval((unsigned char)s[i]), l = i + 1 < n ? hexval((unsigned char)s[i + 1]) : -2;
            if (h < 0 || l < 0) {
                int bad = h < 0 ? (unsigned char)s[i] : i + 1 < n ? (unsigned char)s[i + 1] : 0;
                if (l == -2 && h >= 0)
                    return sql_err_at(cx, loc, QR_EINVAL, "22P02",
                                      "invalid hexadecimal data: odd number of digits");
                return sql_err_at(cx, loc, QR_EINVAL, "22P02", "invalid hexadecimal digit: \"%c\"",
                                  bad);
            }
            d[k++] = (uint8_t)(h << 4 | l);
            i += 2;
        }
    } else { /* escape: \\ and \ooo, other bytes as they are */
        for (size_t i = 0; i < n;) {
            if (s[i] != '\\') {
                d[k++] = (uint8_t)s[i++];
            } else if (i + 1 < n && s[i + 1] == '\\') {
                d[k++] = '\\';
                i += 2;
            } else if (i + 3 < n + 0 && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
                       s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
                d[k++] = (uint8_t)((s[i + 1] - '0') << 6 | (s[i + 2] - '0') << 3 | (s[i + 3] - '0'));
                i += 4;
            } else {
                return sql_err_at(cx, loc, QR_EINVAL, "22P02",
                                  "invalid input syntax for type bytea");
            }
        }
    }
    memset(out, 0, sizeof *out);
    out->type = QR_SQL_BYTEA;
    out->u.s.s = (const char *)d;
    out->u.s.n = k;
    return QR_OK;
}

void sqlb_bytea_out(const SqlValue *v, QrBuf *out)
{
    static const char HEX[] = "0123456789abcdef";
    qr_buf_append(out, "\\x", 2);
    const uint8_t *p = (const uint8_t *)v->u.s.s;
    for (size_t i = 0; i < v->u.s.n; i++) {
        char h[2] = {HEX[p[i] >> 4], HEX[p[i] & 15]};
        qr_buf_append(out, h, 2);
    }
}

/* bytea_output = escape, as byteaout: a backslash doubled, bytes outside
 * 0x20..0x7e as \ooo, the rest as they are. */
static void bytea_escape_out(const SqlValue *v, QrBuf *out)
{
    const uint8_t *p = (const uint8_t *)v->u.s.s;
    for (size_t i = 0; i < v->u.s.n; i++) {
        if (p[i] == '\\')
            qr_buf_append(out, "\\\\", 2);
        else if (p[i] < 0x20 || p[i] > 0x7e)
            qr_buf_printf(out, "\\%03o", p[i]);
        else
            qr_buf_putc(out, p[i]);
    }
}

void qr_sql_session_value_text(const QrSqlSession *s, const QrSqlValue *v, QrBuf *out)
{
    const char *bo = s && v->type == QR_SQL_BYTEA ? qr_sql_session_get(s, "bytea_output") : NULL;
    if (!v->is_null && bo && !strcasecmp(bo, "escape"))
        bytea_escape_out(v, out);
    else
        qr_sql_value_text(v, out);
}

int sqlb_cast(SqlCtx *cx, const SqlValue *in, QrSqlType to, int loc, SqlValue *out)
{
    if (sqlt_is_str(in->type)) {
        const char *s = in->u.s.s ? in->u.s.s : "";
        if (to == QR_SQL_UUID)
            return sqlb_uuid_in(cx, s, in->u.s.n, loc, out);
        if (to == QR_SQL_BYTEA)
            return sqlb_bytea_in(cx, s, in->u.s.n, loc, out);
    }
    return sql_err_at(cx, loc, QR_ETYPE, "42846", "cannot cast type %s to %s",
                      qr_sql_type_name(in->type), qr_sql_type_name(to));
}

int sqlb_recv(SqlCtx *cx, QrSqlType t, const uint8_t *p, size_t n, SqlValue *out)
{
    if (t == QR_SQL_UUID) {
        if (n != 16)
            return sql_err_at(cx, -1, QR_EINVAL, "22P03", "invalid length in external \"uuid\" value");
        memset(out, 0, sizeof *out);
        out->type = QR_SQL_UUID;
        memcpy(out->u.uuid, p, 16);
        return QR_OK;
    }
    return bytea_of(cx, p, n, out);
}

/* ---- encode / decode ---- */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int f_encode(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    SqlValue fmt;
    int rc = sqlv_cast(cx, &a[1], QR_SQL_TEXT, -1, &fmt);
    if (rc)
        return rc;
    const uint8_t *p = (const uint8_t *)a[0].u.s.s;
    size_t len = a[0].u.s.n;
    QrBuf b;
    qr_buf_init(&b);
    if (fmt.u.s.n == 3 && !strncasecmp(fmt.u.s.s, "hex", 3)) {
        sqlb_bytea_out(&a[0], &b);
        memmove(b.data, b.data + 2, b.len - 2); /* without the \x */
        b.len -= 2;
    } else if (fmt.u.s.n == 6 && !strncasecmp(fmt.u.s.s, "base64", 6)) {
        for (size_t i = 0; i < len; i += 3) {
            uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0) |
                         (i + 2 < len ? p[i + 2] : 0);
            char q[4] = {B64[v >> 18], B64[v >> 12 & 63], i + 1 < len ? B64[v >> 6 & 63] : '=',
                         i + 2 < len ? B64[v & 63] : '='};
            if (i && i % 57 == 0) /* PostgreSQL breaks lines every 76 characters */
                qr_buf_putc(&b, '\n');
            qr_buf_append(&b, q, 4);
        }
    } else if (fmt.u.s.n == 6 && !strncasecmp(fmt.u.s.s, "escape", 6)) {
        for (size_t i = 0; i < len; i++) {
            if (p[i] == '\\')
                qr_buf_append(&b, "\\\\", 2);
            else if (p[i] == 0 || p[i] >= 0x80)
                qr_buf_printf(&b, "\\%03o", p[i]);
            else
                qr_buf_putc(&b, p[i]);
        }
    } else {
        qr_buf_free(&b);
        return sql_err_at(cx, -1, QR_EINVAL, "22023", "unrecognized encoding: \"%.*s\"",
                          (int)fmt.u.s.n, fmt.u.s.s);
    }
    return sqlv_buf_text(cx, &b, out);
}

static int f_decode(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    SqlValue s, fmt;
    int rc;
    if ((rc = sqlv_cast(cx, &a[0], QR_SQL_TEXT, -1, &s)) ||
        (rc = sqlv_cast(cx, &a[1], QR_SQL_TEXT, -1, &fmt)))
        return rc;
    if (fmt.u.s.n == 3 && !strncasecmp(fmt.u.s.s, "hex", 3)) {
        char *h = qr_arena_alloc(cx->arena, s.u.s.n + 3);
        if (!h)
            return nomem(cx);
        h[0] = '\\', h[1] = 'x';
        memcpy(h + 2, s.u.s.s, s.u.s.n);
        return sqlb_bytea_in(cx, h, s.u.s.n + 2, -1, out);
    }
    if (fmt.u.s.n == 6 && !strncasecmp(fmt.u.s.s, "escape", 6))
        return sqlb_bytea_in(cx, s.u.s.s, s.u.s.n, -1, out);
    if (!(fmt.u.s.n == 6 && !strncasecmp(fmt.u.s.s, "base64", 6)))
        return sql_err_at(cx, -1, QR_EINVAL, "22023", "unrecognized encoding: \"%.*s\"",
                          (int)fmt.u.s.n, fmt.u.s.s);
    uint8_t *d = qr_arena_alloc(cx->arena, s.u.s.n + 1);
    if (!d)
        return nomem(cx);
    size_t k = 0, bits = 0, pad = 0;
    uint32_t acc = 0;
    for (size_t i = 0; i < s.u.s.n; i++) {
        char c = s.u.s.s[i];
        if (isspace((unsigned char)c))
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        const char *q = strchr(B64, c);
        if (!q || !c || pad)
            return sql_err_at(cx, -1, QR_EINVAL, "22023", "invalid symbol \"%c\" found while "
                              "decoding base64 sequence", c);
        acc = acc << 6 | (uint32_t)(q - B64);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            d[k++] = (uint8_t)(acc >> bits);
        }
    }
    if (bits >= 6 || pad > 2)
        return sql_err_at(cx, -1, QR_EINVAL, "22023", "invalid base64 end sequence");
    return bytea_of(cx, d, k, out);
}

static int chk_encode(SqlBind *b, SqlExpr *e)
{
    int rc = sql_coerce_unknown(b, e->args[0], QR_SQL_BYTEA);
    if (rc == QR_OK)
        rc = sql_coerce_unknown(b, e->args[1], QR_SQL_TEXT);
    if (rc == QR_OK && e->args[0]->type != QR_SQL_BYTEA)
        rc = sql_err_at(b->cx, e->loc, QR_ENOTFOUND, "42883",
                        "function encode(%s, text) does not exist",
                        qr_sql_type_name(e->args[0]->type));
    return rc;
}

const SqlFuncDef SQL_BYTES_FUNCS[] = {
    {"gen_random_uuid", 0, 0, QR_SQL_UUID, f_gen_random_uuid, false},
    {"encode", 2, 2, QR_SQL_TEXT, f_encode, true, false, chk_encode},
    {"decode", 2, 2, QR_SQL_BYTEA, f_decode, true},
};
const int SQL_N_BYTES_FUNCS = (int)(sizeof SQL_BYTES_FUNCS / sizeof SQL_BYTES_FUNCS[0]);
