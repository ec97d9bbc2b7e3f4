/*
 * pgwire_msg.c — the PostgreSQL protocol 3.0 message codec: bounds-checked
 * decoders of frontend messages and builders of backend messages (see
 * pgwire_int.h for the framing).  No sockets here: tests/unit/server/
 * test_pgwire_msg.c and tests/fuzz/pgwire_fuzz.c drive it directly.
 *
 * Layer: server/.  Calls query/sql.h (value text forms) and the base kit.
 *
 * Binary value formats (PostgreSQL's *send functions): bool 1 byte; int2,
 * int4, int8, oid big-endian; float4/float8 IEEE 754 big-endian;
 * text/varchar/name/char the bytes; timestamp(tz) int64 microseconds since
 * 2000-01-01 00:00:00 UTC; numeric as
 *   ndigits:i16 weight:i16 sign:i16 dscale:i16 digits:i16[ndigits] (base 10000).
 */
#include "server/pgwire_int.h"
#include "store/mem.h"

#include <stdio.h>
#include <string.h>

/* ---- reading ---- */

void pgw_rd_init(PgwRd *r, const void *body, size_t len)
{
    r->p = body;
    r->end = (const uint8_t *)body + len;
    r->bad = false;
}

const uint8_t *pgw_rd_bytes(PgwRd *r, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *q = r->p;
    r->p += n;
    return q;
}

uint8_t pgw_rd_u8(PgwRd *r)
{
    const uint8_t *q = pgw_rd_bytes(r, 1);
    return q ? q[0] : 0;
}

int16_t pgw_rd_i16(PgwRd *r)
{
    const uint8_t *q = pgw_rd_bytes(r, 2);
    return q ? (int16_t)(uint16_t)((unsigned)q[0] << 8 | q[1]) : 0;
}

int32_t pgw_rd_i32(PgwRd *r)
{
    const uint8_t *q = pgw_rd_bytes(r, 4);
    return q ? (int32_t)((uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 |
                         q[3])
             : 0;
}

const char *pgw_rd_cstr(PgwRd *r)
{
    if (r->bad)
        return NULL;
    const uint8_t *nul = memchr(r->p, 0, (size_t)(r->end - r->p));
    if (!nul) {
        r->bad = true;
        return NULL;
    }
    const char *s = (const char *)r->p;
    r->p = nul + 1;
    return s;
}

static int proto_violation(QrError *err, const char *fmt, const char *what)
{
    qr_error_set(err, QR_EINVAL, fmt, what);
    qr_error_set_sqlstate(err, "08P01");
    return QR_EINVAL;
}

int pgw_rd_finish(const PgwRd *r, const char *what, QrError *err)
{
    if (r->bad)
        return proto_violation(err, "invalid %s message: truncated or missing a terminator",
                               what);
    if (r->p != r->end)
        return proto_violation(err, "invalid %s message: bytes left over at the end", what);
    return QR_OK;
}

int pgw_decode_startup(const uint8_t *body, size_t len, PgwStartup *out, QrError *err)
{
    memset(out, 0, sizeof *out);
    PgwRd r;
    pgw_rd_init(&r, body, len);
    int32_t code = pgw_rd_i32(&r);
    if (r.bad)
        return proto_violation(err, "invalid %s: too short", "startup packet");
    if (code == PGW_SSL_CODE || code == PGW_GSSENC_CODE) {
        out->kind = code == PGW_SSL_CODE ? PGW_START_SSL : PGW_START_GSSENC;
        return pgw_rd_finish(&r, "SSLRequest", err);
    }
    if (code == PGW_CANCEL_CODE) {
        out->kind = PGW_START_CANCEL;
        out->cancel_pid = pgw_rd_i32(&r);
        out->cancel_key = pgw_rd_i32(&r);
        return pgw_rd_finish(&r, "CancelRequest", err);
    }
    out->kind = PGW_START_NORMAL;
    out->major = (int)((uint32_t)code >> 16);
    out->minor = code & 0xffff;
    if (out->major != 3) {
        qr_error_set(err, QR_EUNSUPPORTED, "unsupported frontend protocol %d.%d", out->major,
                     out->minor);
        qr_error_detail(err, "this server supports protocol 3.0");
        qr_error_set_sqlstate(err, "0A000");
        return QR_EUNSUPPORTED;
    }
    for (;;) {
        const char *k = pgw_rd_cstr(&r);
        if (!k)
            break;
        if (!k[0])
            return pgw_rd_finish(&r, "startup packet", err);
        const char *v = pgw_rd_cstr(&r);
        if (!v)
            break;
        if (out->n_params == PGW_MAX_STARTUP_PARAMS)
            return proto_violation(err, "invalid %s: too many parameters", "startup packet");
        out->keys[out->n_params] = k;
        out->vals[out->n_params++] = v;
    }
    return proto_violation(err, "invalid %s: missing the final terminator", "startup packet");
}

const char *pgw_startup_get(const PgwStartup *s, const char *key)
{
    for (int i = 0; i < s->n_params; i++)
        if (!strcmp(s->keys[i], key))
            return s->vals[i];
    return NULL;
}

int pgw_decode_parse(const uint8_t *body, size_t len, PgwParse *out, QrError *err)
{
    memset(out, 0, sizeof *out);
    PgwRd r;
    pgw_rd_init(&r, body, len);
    out->name = pgw_rd_cstr(&r);
    out->query = pgw_rd_cstr(&r);
    int16_t n = pgw_rd_i16(&r);
    if (n < 0)
        return proto_violation(err, "invalid %s message: negative parameter count", "Parse");
    out->n_types = n;
    out->types = pgw_rd_bytes(&r, (size_t)n * 4);
    return pgw_rd_finish(&r, "Parse", err);
}

uint32_t pgw_parse_type(const PgwParse *p, int i)
{
    const uint8_t *q = p->types + (size_t)i * 4;
    return (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
}

void pgw_bind_free(PgwBind *b)
{
    if (!b)
        return;
    qr_free(b->block);
    memset(b, 0, sizeof *b);
}

int pgw_decode_bind(const uint8_t *body, size_t len, PgwBind *out, QrError *err)
{
    memset(out, 0, sizeof *out);
    PgwRd r;
    pgw_rd_init(&r, body, len);
    out->portal = pgw_rd_cstr(&r);
    out->stmt = pgw_rd_cstr(&r);
    int nf = pgw_rd_i16(&r);
    if (r.bad || nf < 0 || (size_t)nf * 2 > (size_t)(r.end - r.p))
        return proto_violation(err, "invalid %s message: bad parameter format count", "Bind");
    const uint8_t *fmt = pgw_rd_bytes(&r, (size_t)nf * 2);
    int np = pgw_rd_i16(&r);
    /* every parameter takes at least its 4-byte length word */
    if (r.bad || np < 0 || (size_t)np * 4 > (size_t)(r.end - r.p))
        return proto_violation(err, "invalid %s message: bad parameter count", "Bind");
    if (nf > 1 && nf != np)
        return proto_violation(err, "invalid %s message: parameter format count does not "
                                    "match the parameter count", "Bind");
    /* one block for the arrays; the result formats, counted after the
     * parameters, are added by growing it */
    size_t sz = (size_t)nf * sizeof(int16_t) + (size_t)np * (sizeof(char *) + sizeof(int)) + 16;
    uint8_t *block = qr_malloc(sz + 8);
    if (!block)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    out->block = block;
    out->values = (const char **)block;
    out->lengths = (int *)(block + (size_t)np * sizeof(char *));
    out->formats = (int16_t *)(block + (size_t)np * (sizeof(char *) + sizeof(int)));
    out->n_formats = nf;
    out->n_params = np;
    for (int i = 0; i < nf; i++) {
        out->formats[i] = (int16_t)(uint16_t)((unsigned)fmt[2 * i] << 8 | fmt[2 * i + 1]);
        if (out->formats[i] != 0 && out->formats[i] != 1) {
            pgw_bind_free(out);
            qr_error_set(err, QR_EINVAL, "unsupported format code: %d",
                         (int)(int16_t)(uint16_t)((unsigned)fmt[2 * i] << 8 | fmt[2 * i + 1]));
            qr_error_set_sqlstate(err, "22023");
            return QR_EINVAL;
        }
    }
    for (int i = 0; i < np; i++) {
        int32_t l = pgw_rd_i32(&r);
        if (l < -1 || r.bad) {
            pgw_bind_free(out);
            return proto_violation(err, "invalid %s message: bad parameter length", "Bind");
        }
        out->lengths[i] = l < 0 ? 0 : l;
        out->values[i] = l < 0 ? NULL : (const char *)pgw_rd_bytes(&r, (size_t)l);
        if (r.bad) {
            pgw_bind_free(out);
            return proto_violation(err, "invalid %s message: parameter runs past the end",
                                   "Bind");
        }
    }
    int nr = pgw_rd_i16(&r);
    if (r.bad || nr < 0 || (size_t)nr * 2 != (size_t)(r.end - r.p)) {
        pgw_bind_free(out);
        return proto_violation(err, "invalid %s message: bad result format count", "Bind");
    }
    if (nr > 0) {
        /* keep one block: grow it (the arrays move with it) */
        uint8_t *nb = qr_realloc(out->block, sz + 8 + (size_t)nr * sizeof(int16_t));
        if (!nb) {
            pgw_bind_free(out);
            return qr_error_set(err, QR_ENOMEM, "out of memory");
        }
        out->block = nb;
        out->values = (const char **)nb;
        out->lengths = (int *)(nb + (size_t)np * sizeof(char *));
        out->formats = (int16_t *)(nb + (size_t)np * (sizeof(char *) + sizeof(int)));
        out->result_formats = (int16_t *)(nb + sz + 8);
    }
    out->n_result_formats = nr;
    for (int i = 0; i < nr; i++) {
        int16_t f = pgw_rd_i16(&r);
        if (f != 0 && f != 1) {
            pgw_bind_free(out);
            qr_error_set(err, QR_EINVAL, "unsupported format code: %d", (int)f);
            qr_error_set_sqlstate(err, "22023");
            return QR_EINVAL;
        }
        out->result_formats[i] = f;
    }
    int rc = pgw_rd_finish(&r, "Bind", err);
    if (rc != QR_OK)
        pgw_bind_free(out);
    return rc;
}

int pgw_decode_target(const uint8_t *body, size_t len, const char *what, PgwTarget *out,
                      QrError *err)
{
    PgwRd r;
    pgw_rd_init(&r, body, len);
    out->kind = (char)pgw_rd_u8(&r);
    out->name = pgw_rd_cstr(&r);
    int rc = pgw_rd_finish(&r, what, err);
    if (rc == QR_OK && out->kind != 'S' && out->kind != 'P')
        return proto_violation(err, "invalid %s message: expected 'S' or 'P'", what);
    return rc;
}

int pgw_decode_execute(const uint8_t *body, size_t len, PgwExecute *out, QrError *err)
{
    PgwRd r;
    pgw_rd_init(&r, body, len);
    out->portal = pgw_rd_cstr(&r);
    out->max_rows = pgw_rd_i32(&r);
    if (out->max_rows < 0)
        out->max_rows = 0;
    return pgw_rd_finish(&r, "Execute", err);
}

int pgw_decode_string(const uint8_t *body, size_t len, const char *what, const char **out,
                      QrError *err)
{
    PgwRd r;
    pgw_rd_init(&r, body, len);
    *out = pgw_rd_cstr(&r);
    return pgw_rd_finish(&r, what, err);
}

int pgw_decode_sasl_init(const uint8_t *body, size_t len, PgwSaslInit *out, QrError *err)
{
    PgwRd r;
    pgw_rd_init(&r, body, len);
    out->mechanism = pgw_rd_cstr(&r);
    out->data_len = pgw_rd_i32(&r);
    out->data = NULL;
    if (!r.bad && out->data_len < -1)
        return proto_violation(err, "invalid %s message: bad length", "SASLInitialResponse");
    if (out->data_len > 0)
        out->data = pgw_rd_bytes(&r, (size_t)out->data_len);
    return pgw_rd_finish(&r, "SASLInitialResponse", err);
}

/* ---- writing ---- */

static void put_be(QrBuf *b, uint64_t v, int n)
{
    uint8_t t[8];
    for (int i = 0; i < n; i++)
        t[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    qr_buf_append(b, t, (size_t)n);
}

void pgw_put_i16(QrBuf *b, int16_t v) { put_be(b, (uint16_t)v, 2); }
void pgw_put_i32(QrBuf *b, int32_t v) { put_be(b, (uint32_t)v, 4); }
void pgw_put_i64(QrBuf *b, int64_t v) { put_be(b, (uint64_t)v, 8); }

void pgw_put_cstr(QrBuf *b, const char *s) { qr_buf_append(b, s, strlen(s) + 1); }

size_t pgw_begin(QrBuf *b, char type)
{
    size_t start = b->len;
    qr_buf_putc(b, (uint8_t)type);
    pgw_put_i32(b, 0);
    return start;
}

static void patch_i32(QrBuf *b, size_t at, uint32_t v)
{
    if (!qr_buf_ok(b) || at + 4 > b->len)
        return;
    b->data[at] = (uint8_t)(v >> 24);
    b->data[at + 1] = (uint8_t)(v >> 16);
    b->data[at + 2] = (uint8_t)(v >> 8);
    b->data[at + 3] = (uint8_t)v;
}

void pgw_end(QrBuf *b, size_t start)
{
    patch_i32(b, start + 1, (uint32_t)(b->len - start - 1));
}

static void put_field(QrBuf *b, char code, const char *s)
{
    if (!s || !s[0])
        return;
    qr_buf_putc(b, (uint8_t)code);
    /* a field is a C string: cut at an embedded NUL (cannot happen with
     * QrError's fixed buffers, but keep the frame well formed anyway) */
    pgw_put_cstr(b, s);
}

void pgw_put_error(QrBuf *b, char type, const char *severity, const QrError *e,
                   int64_t position)
{
    pgw_put_error_where(b, type, severity, e, position, NULL);
}

void pgw_put_error_where(QrBuf *b, char type, const char *severity, const QrError *e,
                         int64_t position, const char *where)
{
    size_t m = pgw_begin(b, type);
    put_field(b, 'S', severity);
    put_field(b, 'V', severity);
    put_field(b, 'C', qr_error_sqlstate(e));
    put_field(b, 'M', e->message[0] ? e->message : qr_code_name(e->code));
    put_field(b, 'D', e->detail);
    put_field(b, 'H', e->hint);
    if (position > 0) {
        char pos[24];
        snprintf(pos, sizeof pos, "%lld", (long long)position);
        put_field(b, 'P', pos);
    }
    put_field(b, 'W', where);
    qr_buf_putc(b, 0);
    pgw_end(b, m);
}

void pgw_put_value(QrBuf *b, const QrSqlValue *v, int16_t format, const QrSqlSession *s)
{
    if (v->is_null) {
        pgw_put_i32(b, -1);
        return;
    }
    size_t at = b->len;
    pgw_put_i32(b, 0);
    if (format == 1)
        qr_sql_value_send(v, b);
    else
        qr_sql_session_value_text(s, v, b);
    patch_i32(b, at, (uint32_t)(b->len - at - 4));
}

void pgw_put_row_description(QrBuf *b, const QrSqlColumn *cols, int n_cols,
                             const int16_t *formats, int n_formats)
{
    size_t m = pgw_begin(b, 'T');
    pgw_put_i16(b, (int16_t)n_cols);
    for (int i = 0; i < n_cols; i++) {
        pgw_put_cstr(b, cols[i].name ? cols[i].name : "?column?");
        pgw_put_i32(b, (int32_t)cols[i].table_oid);
        pgw_put_i16(b, cols[i].attnum);
        pgw_put_i32(b, (int32_t)qr_sql_type_oid(cols[i].type));
        pgw_put_i16(b, qr_sql_type_len(cols[i].type));
        pgw_put_i32(b, cols[i].typmod);
        pgw_put_i16(b, formats ? pgw_format_of(formats, n_formats, i) : 0);
    }
    pgw_end(b, m);
}
