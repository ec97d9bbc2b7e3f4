/*
 * sql_array.c — arrays as a real type: the in-memory layout of an array
 * value, PostgreSQL's text input and output (array_in / array_out) and
 * binary send / receive, comparison and hashing, casts between array
 * types, and the array functions and operators (subscripts and slices,
 * array_length, cardinality, unnest's rows, array_agg's result,
 * array_to_string, string_to_array, array_append / prepend / cat,
 * array_position, array_remove, @>, <@, &&, = ANY).
 *
 * Layer: query/.  Calls sql_value.c (element casts and order) and the
 * base kit.
 *
 * Layout of an array value (SqlValue.u.s, in an arena; every integer in
 * host order, read with memcpy, so the bytes need no alignment):
 *
 *   u8  ndim            0 for the empty array, at most SQL_ARRAY_MAXDIM
 *   u8  flags           bit 0: some element is NULL
 *   u16 0
 *   u32 n               elements, the product of dims
 *   i32 dims[ndim], i32 lbound[ndim]
 *   u8  nulls[(n + 7) / 8]   only with flag bit 0: bit i set = element i NULL
 *   fixed-width elements (bool, integers, oid, floats, timestamps, dates,
 *   times: 8 bytes; interval, uuid: 16): n slots, a NULL's slot zero
 *   variable-width elements (strings, numeric, bytea, json): u32 offs[n + 1]
 *   into the bytes that follow (a NULL is empty)
 *
 * Elements are in row-major order.  Invariant: a value of an array type
 * always has this layout (casts from text parse into it), so readers check
 * only its length.
 */
#include "query/sql_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HDR 8

static int nomem(SqlCtx *cx)
{
    return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
}

/* Slot bytes of a fixed-width element type, 0 for variable width. */
static int elem_width(QrSqlType t)
{
    if (t == QR_SQL_INTERVAL || t == QR_SQL_UUID)
        return 16;
    if (sqlt_has_bytes(t))
        return 0;
    return 8;
}

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

bool sqla_view(const SqlValue *v, SqlArr *a)
{
    memset(a, 0, sizeof *a);
    a->elem = QR_SQL_ELEM(v->type);
    a->width = elem_width(a->elem);
    const uint8_t *p = (const uint8_t *)v->u.s.s;
    size_t len = v->u.s.n;
    if (!QR_SQL_IS_ARRAY(v->type) || v->is_null || !p || len < HDR)
        return false;
    a->ndim = p[0];
    bool has_null = p[1] & 1;
    a->n = rd32(p + 4);
    if (a->ndim > SQL_ARRAY_MAXDIM || len < HDR + 8u * (size_t)a->ndim)
        return false;
    uint64_t prod = a->ndim ? 1 : 0;
    for (int d = 0; d < a->ndim; d++) {
        int32_t dim, lb;
        memcpy(&dim, p + HDR + 4 * d, 4);
        memcpy(&lb, p + HDR + 4 * (a->ndim + d), 4);
        a->dims[d] = dim;
        a->lbound[d] = lb;
        prod *= (uint64_t)(dim < 0 ? 0 : dim);
    }
    if (prod != a->n)
        return false;
    size_t off = HDR + 8u * (size_t)a->ndim;
    if (has_null) {
        a->nulls = p + off;
        off += (a->n + 7) / 8;
    }
    if (off > len)
        return false;
    if (a->width) {
        a->slots = p + off;
        return len - off >= (size_t)a->n * (size_t)a->width;
    }
    a->offs = p + off;
    if (len - off < 4 * ((size_t)a->n + 1))
        return false;
    a->bytes = p + off + 4 * ((size_t)a->n + 1);
    return rd32(a->offs + 4 * (size_t)a->n) <= len - (off + 4 * ((size_t)a->n + 1));
}

void sqla_get(const SqlArr *a, uint32_t i, SqlValue *out)
{
    memset(out, 0, sizeof *out);
    out->type = a->elem;
    if (i >= a->n || (a->nulls && (a->nulls[i / 8] >> (i % 8) & 1))) {
        out->is_null = true;
        return;
    }
    if (a->width) {
        const uint8_t *s = a->slots + (size_t)i * (size_t)a->width;
        if (a->elem == QR_SQL_INTERVAL) {
            memcpy(&out->u.iv.us, s, 8);
            memcpy(&out->u.iv.days, s + 8, 4);
            memcpy(&out->u.iv.months, s + 12, 4);
        } else if (a->elem == QR_SQL_UUID) {
            memcpy(out->u.uuid, s, 16);
        } else if (a->elem == QR_SQL_FLOAT4 || a->elem == QR_SQL_FLOAT8) {
            memcpy(&out->u.f, s, 8);
        } else if (a->elem == QR_SQL_BOOL) {
            int64_t b;
            memcpy(&b, s, 8);
            out->u.b = b != 0;
        } else {
            memcpy(&out->u.i, s, 8);
        }
        return;
    }
    uint32_t o0 = rd32(a->offs + 4 * (size_t)i), o1 = rd32(a->offs + 4 * ((size_t)i + 1));
    out->u.s.s = (const char *)a->bytes + o0;
    out->u.s.n = o1 >= o0 ? o1 - o0 : 0;
}

int sqla_build(SqlCtx *cx, QrSqlType elem, int ndim, const int *dims, const int *lbound,
               const SqlValue *el, uint64_t n, SqlValue *out)
{
    if (ndim > SQL_ARRAY_MAXDIM)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000",
                          "number of array dimensions (%d) exceeds the maximum allowed (%d)", ndim,
                          SQL_ARRAY_MAXDIM);
    if (n > (uint64_t)SQL_ARRAY_MAX_ELEMS)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000",
                          "array size exceeds the maximum allowed (%d)", SQL_ARRAY_MAX_ELEMS);
    if (n == 0)
        ndim = 0;
    int w = elem_width(elem);
    bool has_null = false;
    size_t var = 0;
    for (uint64_t i = 0; i < n; i++) {
        has_null |= el[i].is_null;
        if (!w && !el[i].is_null)
            var += el[i].u.s.n;
    }
    if (var > SQL_TEXT_MAX)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "array size exceeds the maximum allowed");
    size_t len = HDR + 8u * (size_t)ndim + (has_null ? (n + 7) / 8 : 0) +
                 (w ? (size_t)n * (size_t)w : 4 * (n + 1) + var);
    uint8_t *p = qr_arena_calloc(cx->arena, len ? len : 1);
    if (!p)
        return nomem(cx);
    p[0] = (uint8_t)ndim;
    p[1] = has_null ? 1 : 0;
    uint32_t n32 = (uint32_t)n;
    memcpy(p + 4, &n32, 4);
    for (int d = 0; d < ndim; d++) {
        int32_t dim = dims[d], lb = lbound ? lbound[d] : 1;
        memcpy(p + HDR + 4 * d, &dim, 4);
        memcpy(p + HDR + 4 * (ndim + d), &lb, 4);
    }
    size_t off = HDR + 8u * (size_t)ndim;
    uint8_t *nulls = p + off;
    if (has_null)
        off += (n + 7) / 8;
    uint8_t *data = p + off, *bytes = data + 4 * (n + 1);
    uint32_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        const SqlValue *x = &el[i];
        if (x->is_null)
            nulls[i / 8] |= (uint8_t)(1u << (i % 8));
        if (w) {
            uint8_t *s = data + i * (uint64_t)w;
            if (x->is_null)
                continue;
            if (elem == QR_SQL_INTERVAL) {
                memcpy(s, &x->u.iv.us, 8);
                memcpy(s + 8, &x->u.iv.days, 4);
                memcpy(s + 12, &x->u.iv.months, 4);
            } else if (elem == QR_SQL_UUID) {
                memcpy(s, x->u.uuid, 16);
            } else if (elem == QR_SQL_FLOAT4 || elem == QR_SQL_FLOAT8) {
                memcpy(s, &x->u.f, 8);
            } else if (elem == QR_SQL_BOOL) {
                int64_t b = x->u.b;
                memcpy(s, &b, 8);
            } else {
                memcpy(s, &x->u.i, 8);
            }
            continue;
        }
        memcpy(data + 4 * i, &pos, 4);
        if (!x->is_null && x->u.s.n) {
            memcpy(bytes + pos, x->u.s.s, x->u.s.n);
            pos += (uint32_t)x->u.s.n;
        }
    }
    if (!w)
        memcpy(data + 4 * n, &pos, 4);
    memset(out, 0, sizeof *out);
    out->type = QR_SQL_ARRAY_OF(elem);
    out->u.s.s = (const char *)p;
    out->u.s.n = len;
    return QR_OK;
}

int sqla_list(SqlCtx *cx, QrSqlType elem, const SqlValue *el, uint64_t n, SqlValue *out)
{
    /* elements of another type are cast first (ARRAY[1, 2.5]: numeric) */
    SqlValue *cast = NULL;
    for (uint64_t i = 0; i < n; i++) {
        if (el[i].is_null || el[i].type == elem)
            continue;
        if (!cast) {
            cast = qr_arena_alloc(cx->arena, n * sizeof *cast);
            if (!cast)
                return nomem(cx);
            memcpy(cast, el, n * sizeof *cast);
        }
        int rc = sqlv_cast(cx, &el[i], elem, -1, &cast[i]);
        if (rc)
            return rc;
    }
    int dim = (int)n;
    return sqla_build(cx, elem, 1, &dim, NULL, cast ? cast : el, n, out);
}

/* ---- text input (array_in) ---- */

typedef struct ArrIn {
    SqlCtx *cx;
    const char *s, *end, *p;   /* the literal, the read position */
    QrSqlType elem;
    int loc;
    int ndim;                  /* 0 until the first element shows the depth */
    int dims[SQL_ARRAY_MAXDIM];
    SqlValue *el;              /* arena, grows */
    uint64_t n, cap;
    char *buf;                 /* unescaped element text (arena, the literal's size) */
} ArrIn;

static int malformed(ArrIn *in, const char *detail)
{
    SqlCtx *cx = in->cx;
    size_t n = (size_t)(in->end - in->s);
    sql_err_at(cx, in->loc, QR_EINVAL, "22P02", "malformed array literal: \"%.*s\"",
               (int)(n > 200 ? 200 : n), in->s);
    if (detail)
        qr_error_detail(cx->err, "%s", detail);
    return QR_EINVAL;
}

static void skip_ws(ArrIn *in)
{
    while (in->p < in->end && isspace((unsigned char)*in->p))
        in->p++;
}

static int push_elem(ArrIn *in, SqlValue v)
{
    if (in->n == in->cap) {
        uint64_t nc = in->cap ? in->cap * 2 : 16;
        if (nc > (uint64_t)SQL_ARRAY_MAX_ELEMS + 1)
            return sql_err_at(in->cx, in->loc, QR_ELIMIT, "54000",
                              "array size exceeds the maximum allowed (%d)", SQL_ARRAY_MAX_ELEMS);
        SqlValue *ne = qr_arena_alloc(in->cx->arena, nc * sizeof *ne);
        if (!ne)
            return nomem(in->cx);
        if (in->n)
            memcpy(ne, in->el, in->n * sizeof *ne);
        in->el = ne;
        in->cap = nc;
    }
    in->el[in->n++] = v;
    return QR_OK;
}

/* One element at the read position: quoted ("a \"b\"") or bare (trimmed;
 * NULL in any case is the null element). */
static int read_elem(ArrIn *in)
{
    char *b = in->buf;
    size_t k = 0;
    bool quoted = false, any = false;
    const char *p = in->p;
    while (p < in->end && *p != ',' && *p != '}') {
        if (*p == '"') {
            quoted = any = true;
            for (p++; p < in->end && *p != '"'; p++) {
                if (*p == '\\') {
                    if (++p == in->end)
                        break;
                }
                b[k++] = *p;
            }
            if (p == in->end)
                return malformed(in, "Unexpected end of input.");
            p++;
            continue;
        }
        if (*p == '{')
            return malformed(in, "Unexpected \"{\" character.");
        if (*p == '\\') {
            if (++p == in->end)
                return malformed(in, "Unexpected end of input.");
            b[k++] = *p++;
            any = true;
            continue;
        }
        if (isspace((unsigned char)*p) && !any) {
            p++;
            continue;
        }
        b[k++] = *p++;
        any = true;
    }
    if (!quoted)
        while (k && isspace((unsigned char)b[k - 1]))
            k--;
    in->p = p;
    if (!any)
        return malformed(in, "Unexpected \",\" character.");
    SqlValue v;
    if (!quoted && k == 4 && !strncasecmp(b, "NULL", 4)) {
        v = sqlv_null();
        v.type = in->elem;
    } else {
        SqlValue t = sqlv_text(b, k);
        int rc = sqlv_cast(in->cx, &t, in->elem, in->loc, &v);
        if (rc)
            return rc;
    }
    in->buf = b + k;
    return push_elem(in, v);
}

/* A {...} at depth `level`, the read position at its "{". */
static int read_sub(ArrIn *in, int level)
{
    int rc, count = 0;
    in->p++;
    skip_ws(in);
    if (in->p < in->end && *in->p == '}') {
        in->p++;
        if (level == 0)
            return QR_OK; /* '{}' */
        return malformed(in, "Multidimensional arrays must have sub-arrays with matching "
                             "dimensions.");
    }
    for (;;) {
        skip_ws(in);
        if (in->p < in->end && *in->p == '{') {
            if (level + 1 >= SQL_ARRAY_MAXDIM)
                return sql_err_at(in->cx, in->loc, QR_ELIMIT, "54000",
                                  "number of array dimensions (%d) exceeds the maximum allowed "
                                  "(%d)", level + 2, SQL_ARRAY_MAXDIM);
            if (in->ndim && level + 1 >= in->ndim)
                return malformed(in, "Unexpected \"{\" character.");
            if ((rc = read_sub(in, level + 1)))
                return rc;
        } else {
            if (!in->ndim)
                in->ndim = level + 1;
            else if (level != in->ndim - 1)
                return malformed(in, "Unexpected array element.");
            if ((rc = read_elem(in)))
                return rc;
        }
        count++;
        skip_ws(in);
        if (in->p >= in->end)
            return malformed(in, "Unexpected end of input.");
        if (*in->p == ',') {
            in->p++;
            continue;
        }
        if (*in->p == '}') {
            in->p++;
            break;
        }
        return malformed(in, "Unexpected array element.");
    }
    if (in->dims[level] == 0)
        in->dims[level] = count;
    else if (in->dims[level] != count)
        return malformed(in, "Multidimensional arrays must have sub-arrays with matching "
                             "dimensions.");
    return QR_OK;
}

/* "[1:3][0:1]=" before the braces: explicit bounds. */
static int read_bounds(ArrIn *in, int *nb, int *lb, int *ub)
{
    *nb = 0;
    while (in->p < in->end && *in->p == '[') {
        if (*nb >= SQL_ARRAY_MAXDIM)
            return sql_err_at(in->cx, in->loc, QR_ELIMIT, "54000",
                              "number of array dimensions (%d) exceeds the maximum allowed (%d)",
                              *nb + 1, SQL_ARRAY_MAXDIM);
        long v[2] = {1, 0};
        int k = 0;
        in->p++;
        for (;;) {
            char *e;
            const char *st = in->p;
            long x = strtol(st, &e, 10);
            if (e == st || e > in->end)
                return malformed(in, "\"[\" must introduce explicitly-specified array "
                                     "dimensions.");
            v[k] = x;
            in->p = e;
            if (in->p < in->end && *in->p == ':' && k == 0) {
                in->p++;
                k = 1;
                continue;
            }
            break;
        }
        if (in->p >= in->end || *in->p != ']')
            return malformed(in, "Missing \"]\" after array dimensions.");
        in->p++;
        if (k == 0) { /* [n] means [1:n] */
            v[1] = v[0];
            v[0] = 1;
        }
        if (v[1] < v[0] || v[0] < -2147483647L || v[1] > 2147483647L)
            return sql_err_at(in->cx, in->loc, QR_EINVAL, "2202E",
                              "upper bound cannot be less than lower bound");
        lb[*nb] = (int)v[0];
        ub[*nb] = (int)v[1];
        (*nb)++;
    }
    if (*nb) {
        skip_ws(in);
        if (in->p >= in->end || *in->p != '=')
            return malformed(in, "Missing \"=\" after array dimensions.");
        in->p++;
        skip_ws(in);
    }
    return QR_OK;
}

int sqla_in(SqlCtx *cx, const char *s, size_t n, QrSqlType elem, int loc, SqlValue *out)
{
    ArrIn in = {.cx = cx, .s = s, .end = s + n, .p = s, .elem = elem, .loc = loc};
    int rc, nb, lb[SQL_ARRAY_MAXDIM], ub[SQL_ARRAY_MAXDIM];
    in.buf = qr_arena_alloc(cx->arena, n + 1);
    if (!in.buf)
        return nomem(cx);
    skip_ws(&in);
    if ((rc = read_bounds(&in, &nb, lb, ub)))
        return rc;
    if (in.p >= in.end || *in.p != '{')
        return malformed(&in, "Array value must start with \"{\" or dimension information.");
    if ((rc = read_sub(&in, 0)))
        return rc;
    skip_ws(&in);
    if (in.p != in.end)
        return malformed(&in, "Junk after closing right brace.");
    if (nb) {
        if (nb != in.ndim && !(in.n == 0))
            return malformed(&in, "Specified array dimensions do not match array contents.");
        for (int d = 0; d < nb && in.n; d++)
            if (ub[d] - lb[d] + 1 != in.dims[d])
                return malformed(&in, "Specified array dimensions do not match array contents.");
    }
    return sqla_build(cx, elem, in.ndim, in.dims, nb ? lb : NULL, in.el, in.n, out);
}

/* ---- text output (array_out) ---- */

static void put_elem_text(const SqlValue *x, QrBuf *out)
{
    if (x->is_null) {
        qr_buf_append(out, "NULL", 4);
        return;
    }
    QrBuf e;
    qr_buf_init(&e);
    qr_sql_value_text(x, &e);
    const char *s = e.data ? (const char *)e.data : "";
    bool quote = e.len == 0 || (e.len == 4 && !strncasecmp(s, "NULL", 4));
    for (size_t k = 0; k < e.len && !quote; k++)
        quote = strchr("{},\"\\", s[k]) != NULL || isspace((unsigned char)s[k]);
    if (quote)
        qr_buf_putc(out, '"');
    for (size_t k = 0; k < e.len; k++) {
        if (quote && (s[k] == '"' || s[k] == '\\'))
            qr_buf_putc(out, '\\');
        qr_buf_putc(out, (uint8_t)s[k]);
    }
    if (quote)
        qr_buf_putc(out, '"');
    qr_buf_free(&e);
}

void sqla_out(const SqlValue *v, QrBuf *out)
{
    SqlArr a;
    if (!sqla_view(v, &a)) {
        qr_buf_append(out, "{}", 2);
        return;
    }
    if (a.n == 0) {
        qr_buf_append(out, "{}", 2);
        return;
    }
    bool bounds = false;
    for (int d = 0; d < a.ndim; d++)
        bounds |= a.lbound[d] != 1;
    if (bounds) {
        for (int d = 0; d < a.ndim; d++)
            qr_buf_printf(out, "[%d:%d]", a.lbound[d], a.lbound[d] + a.dims[d] - 1);
        qr_buf_putc(out, '=');
    }
    /* idx[d]: position inside dimension d of the element written next */
    int idx[SQL_ARRAY_MAXDIM] = {0};
    for (int d = 0; d < a.ndim; d++)
        qr_buf_putc(out, '{');
    for (uint32_t i = 0; i < a.n; i++) {
        SqlValue x;
        sqla_get(&a, i, &x);
        put_elem_text(&x, out);
        int d = a.ndim - 1;
        while (d >= 0 && ++idx[d] == a.dims[d]) {
            idx[d] = 0;
            qr_buf_putc(out, '}');
            d--;
        }
        if (d >= 0) {
            qr_buf_putc(out, ',');
            for (int k = d + 1; k < a.ndim; k++)
                qr_buf_putc(out, '{');
        }
    }
}

/* ---- binary send / receive ---- */

static void put_be32(QrBuf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    qr_buf_append(b, x, 4);
}

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void sqla_send(const SqlValue *v, QrBuf *out)
{
    SqlArr a;
    if (!sqla_view(v, &a))
        memset(&a, 0, sizeof a);
    put_be32(out, (uint32_t)a.ndim);
    put_be32(out, a.nulls ? 1 : 0);
    put_be32(out, qr_sql_type_oid(QR_SQL_ELEM(v->type)));
    for (int d = 0; d < a.ndim; d++) {
        put_be32(out, (uint32_t)a.dims[d]);
        put_be32(out, (uint32_t)a.lbound[d]);
    }
    for (uint32_t i = 0; i < a.n; i++) {
        SqlValue x;
        sqla_get(&a, i, &x);
        if (x.is_null) {
            put_be32(out, 0xffffffffu);
            continue;
        }
        size_t at = out->len;
        put_be32(out, 0);
        qr_sql_value_send(&x, out);
        if (qr_buf_ok(out)) {
            uint32_t n = (uint32_t)(out->len - at - 4);
            uint8_t be[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
            memcpy(out->data + at, be, 4);
        }
    }
}

int sqla_recv(SqlCtx *cx, const uint8_t *p, size_t n, QrSqlType elem, SqlValue *out)
{
    const uint8_t *end = p + n;
    if (n < 12)
        goto bad;
    uint32_t ndim = get_be32(p), flags = get_be32(p + 4), eoid = get_be32(p + 8);
    p += 12;
    if (ndim > SQL_ARRAY_MAXDIM)
        return sql_err_at(cx, -1, QR_EINVAL, "22P03", "invalid number of dimensions: %u", ndim);
    if (flags > 1)
        return sql_err_at(cx, -1, QR_EINVAL, "22P03", "invalid array flags");
    QrSqlType et;
    if (!qr_sql_type_from_oid(eoid, &et) || QR_SQL_IS_ARRAY(et))
        return sql_err_at(cx, -1, QR_EINVAL, "22P03",
                          "binary data has array element type %u instead of expected %u", eoid,
                          qr_sql_type_oid(elem));
    if ((size_t)(end - p) < 8u * ndim)
        goto bad;
    int dims[SQL_ARRAY_MAXDIM], lb[SQL_ARRAY_MAXDIM];
    uint64_t total = ndim ? 1 : 0;
    for (uint32_t d = 0; d < ndim; d++) {
        dims[d] = (int32_t)get_be32(p);
        lb[d] = (int32_t)get_be32(p + 4);
        p += 8;
        if (dims[d] < 0)
            goto bad;
        total *= (uint64_t)dims[d];
        if (total > (uint64_t)SQL_ARRAY_MAX_ELEMS)
            return sql_err_at(cx, -1, QR_ELIMIT, "54000",
                              "array size exceeds the maximum allowed (%d)", SQL_ARRAY_MAX_ELEMS);
    }
    /* every element takes at least its 4-byte length */
    if (total > (uint64_t)(end - p) / 4)
        goto bad;
    SqlValue *el = total ? qr_arena_alloc(cx->arena, total * sizeof *el) : NULL;
    if (total && !el)
        return nomem(cx);
    for (uint64_t i = 0; i < total; i++) {
        if (end - p < 4)
            goto bad;
        int32_t len = (int32_t)get_be32(p);
        p += 4;
        if (len < -1 || (len >= 0 && (size_t)(end - p) < (size_t)len))
            goto bad;
        int rc;
        SqlValue x;
        if ((rc = sql_param_decode(cx, et, len < 0 ? NULL : (const char *)p, len < 0 ? 0 : len,
                                   1, &x)))
            return rc;
        if (!x.is_null && et != elem && (rc = sqlv_cast(cx, &x, elem, -1, &x)))
            return rc;
        x.type = elem;
        el[i] = x;
        if (len > 0)
            p += len;
    }
    if (p != end)
        goto bad;
    return sqla_build(cx, elem, (int)ndim, dims, lb, el, total, out);
bad:
    return sql_err_at(cx, -1, QR_EINVAL, "22P03", "incorrect binary data format in array");
}

/* ---- order and hashing ---- */

int sqla_cmp(const SqlValue *x, const SqlValue *y)
{
    SqlArr a, b;
    bool va = sqla_view(x, &a), vb = sqla_view(y, &b);
    if (!va || !vb)
        return va - vb;
    uint32_t n = a.n < b.n ? a.n : b.n;
    for (uint32_t i = 0; i < n; i++) {
        SqlValue ea, eb;
        sqla_get(&a, i, &ea);
        sqla_get(&b, i, &eb);
        int c = sqlv_cmp(&ea, &eb);
        if (c)
            return c;
    }
    if (a.n != b.n)
        return a.n < b.n ? -1 : 1;
    if (a.ndim != b.ndim)
        return a.ndim < b.ndim ? -1 : 1;
    for (int d = 0; d < a.ndim; d++) {
        if (a.dims[d] != b.dims[d])
            return a.dims[d] < b.dims[d] ? -1 : 1;
        if (a.lbound[d] != b.lbound[d])
            return a.lbound[d] < b.lbound[d] ? -1 : 1;
    }
    return 0;
}

uint64_t sqla_hash(const SqlValue *v)
{
    SqlArr a;
    if (!sqla_view(v, &a))
        return 0;
    uint64_t h = 0x51ed27a3u + a.n;
    for (uint32_t i = 0; i < a.n; i++) {
        SqlValue x;
        sqla_get(&a, i, &x);
        h = h * 0x100000001b3ULL ^ sqlv_hash(&x);
    }
    return h;
}

/* ---- casts ---- */

int sqla_cast(SqlCtx *cx, const SqlValue *in, QrSqlType to, int loc, SqlValue *out)
{
    QrSqlType te = QR_SQL_ELEM(to);
    if (!QR_SQL_IS_ARRAY(in->type)) { /* text -> array */
        if (!sqlt_is_str(in->type))
            return sql_err_at(cx, loc, QR_ETYPE, "42846", "cannot cast type %s to %s",
                              qr_sql_type_name(in->type), qr_sql_type_name(to));
        return sqla_in(cx, in->u.s.s ? in->u.s.s : "", in->u.s.n, te, loc, out);
    }
    SqlArr a;
    if (!sqla_view(in, &a))
        return sql_err_at(cx, loc, QR_EINTERNAL, "XX000", "damaged array value");
    SqlValue *el = a.n ? qr_arena_alloc(cx->arena, (size_t)a.n * sizeof *el) : NULL;
    if (a.n && !el)
        return nomem(cx);
    for (uint32_t i = 0; i < a.n; i++) {
        SqlValue x;
        sqla_get(&a, i, &x);
        int rc = sqlv_cast(cx, &x, te, loc, &el[i]);
        if (rc)
            return rc;
        el[i].type = te;
    }
    return sqla_build(cx, te, a.ndim, a.dims, a.lbound, el, a.n, out);
}

/* A value to read as an array: an array as it is; a string as an array
 * literal of elements `elem` (catalog columns keep int2vector / oidvector
 * text, "1 2 3", which reads as such an array too). */
int sqla_of(SqlCtx *cx, const SqlValue *v, QrSqlType elem, SqlValue *out)
{
    if (QR_SQL_IS_ARRAY(v->type) || v->is_null) {
        *out = *v;
        return QR_OK;
    }
    if (!sqlt_is_str(v->type))
        return sql_err_at(cx, -1, QR_ETYPE, "42804", "value of type %s is not an array",
                          qr_sql_type_name(v->type));
    const char *s = v->u.s.s ? v->u.s.s : "";
    size_t n = v->u.s.n, i = 0;
    while (i < n && isspace((unsigned char)s[i]))
        i++;
    if (i < n && s[i] != '{' && s[i] != '[') { /* "1 2 3" */
        SqlValue *el = NULL;
        uint64_t k = 0, cap = 0;
        while (i < n) {
            size_t w = i;
            while (i < n && !isspace((unsigned char)s[i]))
                i++;
            if (k == cap) {
                cap = cap ? cap * 2 : 8;
                SqlValue *ne = qr_arena_alloc(cx->arena, cap * sizeof *ne);
                if (!ne)
                    return nomem(cx);
                if (k)
                    memcpy(ne, el, k * sizeof *ne);
                el = ne;
            }
            SqlValue t = sqlv_text(s + w, i - w);
            int rc = sqlv_cast(cx, &t, elem, -1, &el[k++]);
            if (rc)
                return rc;
            while (i < n && isspace((unsigned char)s[i]))
                i++;
        }
        return sqla_list(cx, elem, el, k, out);
    }
    return sqla_in(cx, s, n, elem, -1, out);
}

/* ---- subscripts and slices ---- */

int sqla_subscript(SqlCtx *cx, const SqlValue *arr, int n_subs, const SqlValue *lo,
                   const SqlValue *hi, bool slice, int loc, SqlValue *out)
{
    SqlArr a;
    *out = sqlv_null();
    out->type = slice ? arr->type : QR_SQL_ELEM(arr->type);
    if (arr->is_null || !sqla_view(arr, &a))
        return QR_OK;
    if (n_subs > SQL_ARRAY_MAXDIM)
        return sql_err_at(cx, loc, QR_ELIMIT, "54000",
                          "number of array dimensions (%d) exceeds the maximum allowed (%d)",
                          n_subs, SQL_ARRAY_MAXDIM);
    if (!slice) {
        /* arr[i][j]: NULL unless there is one subscript per dimension, each inside */
        if (n_subs != a.ndim)
            return QR_OK;
        uint64_t off = 0;
        for (int d = 0; d < n_subs; d++) {
            if (hi[d].is_null)
                return QR_OK;
            int64_t i = hi[d].u.i - a.lbound[d];
            if (i < 0 || i >= a.dims[d])
                return QR_OK;
            off = off * (uint64_t)a.dims[d] + (uint64_t)i;
        }
        sqla_get(&a, (uint32_t)off, out);
        return QR_OK;
    }
    /* arr[a:b][c:d]: the sub-array inside the bounds, empty when none; a
     * missing bound is the dimension's own; dimensions not named are whole */
    if (a.ndim == 0 || n_subs > a.ndim) {
        int zero = 0;
        return sqla_build(cx, a.elem, 0, &zero, NULL, NULL, 0, out);
    }
    int from[SQL_ARRAY_MAXDIM], cnt[SQL_ARRAY_MAXDIM];
    uint64_t total = 1;
    for (int d = 0; d < a.ndim; d++) {
        int64_t l = a.lbound[d], u = (int64_t)a.lbound[d] + a.dims[d] - 1;
        if (d < n_subs) {
            if ((lo[d].is_null && lo[d].type != QR_SQL_UNKNOWN) ||
                (hi[d].is_null && hi[d].type != QR_SQL_UNKNOWN))
                return QR_OK; /* a NULL bound: NULL */
            if (!lo[d].is_null && lo[d].u.i > l)
                l = lo[d].u.i;
            if (!hi[d].is_null && hi[d].u.i < u)
                u = hi[d].u.i;
        }
        if (u < l) {
            int zero = 0;
            return sqla_build(cx, a.elem, 0, &zero, NULL, NULL, 0, out);
        }
        from[d] = (int)(l - a.lbound[d]);
        cnt[d] = (int)(u - l + 1);
        total *= (uint64_t)cnt[d];
    }
    SqlValue *el = qr_arena_alloc(cx->arena, total * sizeof *el);
    if (!el)
        return nomem(cx);
    int idx[SQL_ARRAY_MAXDIM] = {0};
    for (uint64_t k = 0; k < total; k++) {
        uint64_t off = 0;
        for (int d = 0; d < a.ndim; d++)
            off = off * (uint64_t)a.dims[d] + (uint64_t)(from[d] + idx[d]);
        sqla_get(&a, (uint32_t)off, &el[k]);
        for (int d = a.ndim - 1; d >= 0 && ++idx[d] == cnt[d]; d--)
            idx[d] = 0;
    }
    return sqla_build(cx, a.elem, a.ndim, cnt, NULL, el, total, out);
}

/* ---- the elements of an array, flattened (unnest, = ANY) ---- */

int sqla_elems(SqlCtx *cx, const SqlValue *arr, SqlValue **out, uint64_t *n)
{
    SqlArr a;
    *out = NULL;
    *n = 0;
    if (arr->is_null)
        return QR_OK;
    if (!sqla_view(arr, &a))
        return sql_err_at(cx, -1, QR_EINTERNAL, "XX000", "damaged array value");
    if (!a.n)
        return QR_OK;
    SqlValue *el = qr_arena_alloc(cx->arena, (size_t)a.n * sizeof *el);
    if (!el)
        return nomem(cx);
    for (uint32_t i = 0; i < a.n; i++)
        sqla_get(&a, i, &el[i]);
    *out = el;
    *n = a.n;
    return QR_OK;
}

/* ---- functions ---- */

/* The first argument as an array (text arguments: catalog arrays). */
static int arg_array(SqlCtx *cx, const SqlValue *v, SqlArr *a, SqlValue *hold)
{
    int rc = sqla_of(cx, v, sqlt_is_str(v->type) ? QR_SQL_TEXT : QR_SQL_ELEM(v->type), hold);
    if (rc)
        return rc;
    if (!sqla_view(hold, a))
        return sql_err_at(cx, -1, QR_EINTERNAL, "XX000", "damaged array value");
    return QR_OK;
}

static SqlValue int4v(int64_t i)
{
    SqlValue v = sqlv_int(i);
    v.type = QR_SQL_INT4;
    return v;
}

static SqlValue null_of(QrSqlType t)
{
    SqlValue v = sqlv_null();
    v.type = t;
    return v;
}

/* array_length / array_lower / array_upper (array, dim) */
static int dim_fn(SqlCtx *cx, const SqlValue *args, int which, SqlValue *out)
{
    SqlArr a;
    SqlValue hold;
    int rc = arg_array(cx, &args[0], &a, &hold);
    if (rc)
        return rc;
    int64_t d = args[1].u.i;
    *out = null_of(QR_SQL_INT4);
    if (d < 1 || d > a.ndim)
        return QR_OK;
    int lb = a.lbound[d - 1], len = a.dims[d - 1];
    *out = int4v(which == 0 ? len : which == 1 ? lb : (int64_t)lb + len - 1);
    return QR_OK;
}

static int f_array_length(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    return dim_fn(cx, a, 0, out);
}
static int f_array_lower(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    return dim_fn(cx, a, 1, out);
}
static int f_array_upper(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    return dim_fn(cx, a, 2, out);
}

/* cardinality (which 0) / array_ndims (1) of the array */
static int count_fn(SqlCtx *cx, const SqlValue *args, int which, SqlValue *out)
{
    SqlArr a;
    SqlValue hold;
    int rc = arg_array(cx, &args[0], &a, &hold);
    if (rc == QR_OK)
        *out = which == 0 ? int4v(a.n) : a.ndim ? int4v(a.ndim) : null_of(QR_SQL_INT4);
    return rc;
}

static int f_cardinality(SqlCtx *cx, int n, const SqlValue *args, SqlValue *out)
{
    (void)n;
    return count_fn(cx, args, 0, out);
}

static int f_array_ndims(SqlCtx *cx, int n, const SqlValue *args, SqlValue *out)
{
    (void)n;
    return count_fn(cx, args, 1, out);
}

static int f_array_dims(SqlCtx *cx, int n, const SqlValue *args, SqlValue *out)
{
    (void)n;
    SqlArr a;
    SqlValue hold;
    int rc = arg_array(cx, &args[0], &a, &hold);
    if (rc)
        return rc;
    if (!a.ndim) {
        *out = null_of(QR_SQL_TEXT);
        return QR_OK;
    }
    char buf[SQL_ARRAY_MAXDIM * 26 + 1];
    size_t k = 0;
    for (int d = 0; d < a.ndim; d++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "[%d:%d]", a.lbound[d],
                              a.lbound[d] + a.dims[d] - 1);
    char *s = qr_arena_strndup(cx->arena, buf, k);
    if (!s)
        return nomem(cx);
    *out = sqlv_text(s, k);
    return QR_OK;
}

/* array_to_string(array, delimiter [, null_string]) */
static int f_array_to_string(SqlCtx *cx, int n, const SqlValue *args, SqlValue *out)
{
    if (args[0].is_null || args[1].is_null) {
        *out = null_of(QR_SQL_TEXT);
        return QR_OK;
    }
    SqlArr a;
    SqlValue hold, d;
    int rc = arg_array(cx, &args[0], &a, &hold);
    if (rc || (rc = sqlv_cast(cx, &args[1], QR_SQL_TEXT, -1, &d)))
        return rc;
    bool null_str = n > 2 && !args[2].is_null;
    QrBuf b;
    qr_buf_init(&b);
    bool first = true;
    for (uint32_t i = 0; i < a.n && rc == QR_OK; i++) {
        SqlValue x;
        sqla_get(&a, i, &x);
        if (x.is_null && !null_str)
            continue;
        if (!first)
            qr_buf_append(&b, d.u.s.s, d.u.s.n);
        first = false;
        if (x.is_null) {
            SqlValue t;
            if ((rc = sqlv_cast(cx, &args[2], QR_SQL_TEXT, -1, &t)) == QR_OK)
                qr_buf_append(&b, t.u.s.s, t.u.s.n);
        } else {
            qr_sql_value_text(&x, &b);
        }
        if (b.len > SQL_TEXT_MAX)
            rc = sql_err_at(cx, -1, QR_ELIMIT, "54000", "requested length too large");
    }
    if (rc) {
        qr_buf_free(&b);
        return rc;
    }
    return sqlv_buf_text(cx, &b, out);
}

/* string_to_array(text, delimiter [, null_string]): a NULL delimiter splits
 * into characters, an empty one keeps the whole string. */
static int f_string_to_array(SqlCtx *cx, int n, const SqlValue *args, SqlValue *out)
{
    if (args[0].is_null) {
        *out = null_of(QR_SQL_ARRAY_OF(QR_SQL_TEXT));
        return QR_OK;
    }
    SqlValue s, d = {0}, ns = {0};
    int rc = sqlv_cast(cx, &args[0], QR_SQL_TEXT, -1, &s);
    if (rc || (!args[1].is_null && (rc = sqlv_cast(cx, &args[1], QR_SQL_TEXT, -1, &d))) ||
        (n > 2 && !args[2].is_null && (rc = sqlv_cast(cx, &args[2], QR_SQL_TEXT, -1, &ns))))
        return rc;
    bool has_ns = n > 2 && !args[2].is_null;
    if (s.u.s.n == 0)
        return sqla_list(cx, QR_SQL_TEXT, NULL, 0, out);
    uint64_t cap = args[1].is_null ? s.u.s.n : d.u.s.n == 0 ? 1 : s.u.s.n / d.u.s.n + 1;
    SqlValue *el = qr_arena_alloc(cx->arena, cap * sizeof *el);
    if (!el)
        return nomem(cx);
    uint64_t k = 0;
    const char *p = s.u.s.s, *end = p + s.u.s.n;
    while (p < end || (k == 0 && p == end)) {
        const char *q;
        size_t step;
        if (args[1].is_null) { /* one UTF-8 character each */
            q = p + 1;
            while (q < end && ((unsigned char)*q & 0xC0) == 0x80)
                q++;
            step = 0;
        } else if (d.u.s.n == 0) {
            q = end;
            step = 0;
        } else {
            q = p;
            while (q + d.u.s.n <= end && memcmp(q, d.u.s.s, d.u.s.n) != 0)
                q++;
            if (q + d.u.s.n > end)
                q = end;
            step = q < end ? d.u.s.n : 0;
        }
        SqlValue x = sqlv_text(p, (size_t)(q - p));
        if (has_ns && x.u.s.n == ns.u.s.n && !memcmp(x.u.s.s, ns.u.s.s, ns.u.s.n))
            x = null_of(QR_SQL_TEXT);
        el[k++] = x;
        p = q + step;
        if (step && p == end) { /* a trailing delimiter: one more empty element */
            el[k++] = sqlv_text(end, 0);
            break;
        }
    }
    return sqla_list(cx, QR_SQL_TEXT, el, k, out);
}

/* array_append(array, x) / array_prepend(x, array) / array_cat(a, b) on one
 * dimension (a NULL array is the empty one) */
static int concat(SqlCtx *cx, const SqlValue *x, const SqlValue *y, QrSqlType elem,
                  SqlValue *out)
{
    SqlValue *ex, *ey;
    uint64_t nx, ny;
    int rc;
    if ((rc = sqla_elems(cx, x, &ex, &nx)) || (rc = sqla_elems(cx, y, &ey, &ny)))
        return rc;
    SqlArr ax, ay;
    bool vx = !x->is_null && sqla_view(x, &ax), vy = !y->is_null && sqla_view(y, &ay);
    if ((vx && ax.ndim > 1) || (vy && ay.ndim > 1))
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                          "concatenating multidimensional arrays is not supported");
    SqlValue *el = nx + ny ? qr_arena_alloc(cx->arena, (nx + ny) * sizeof *el) : NULL;
    if (nx + ny && !el)
        return nomem(cx);
    if (nx)
        memcpy(el, ex, nx * sizeof *el);
    if (ny)
        memcpy(el + nx, ey, ny * sizeof *el);
    int lb = vx && ax.ndim ? ax.lbound[0] : vy && ay.ndim ? ay.lbound[0] : 1;
    int dim = (int)(nx + ny);
    return sqla_build(cx, elem, 1, &dim, &lb, el, nx + ny, out);
}

static int one_elem_array(SqlCtx *cx, const SqlValue *x, QrSqlType elem, SqlValue *out)
{
    SqlValue v = *x;
    if (!v.is_null && v.type != elem) {
        int rc = sqlv_cast(cx, x, elem, -1, &v);
        if (rc)
            return rc;
    }
    v.type = elem;
    return sqla_list(cx, elem, &v, 1, out);
}

static int f_array_append(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    QrSqlType elem = QR_SQL_ELEM(a[0].type);
    SqlValue one;
    int rc = one_elem_array(cx, &a[1], elem, &one);
    return rc ? rc : concat(cx, &a[0], &one, elem, out);
}

static int f_array_prepend(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    QrSqlType elem = QR_SQL_ELEM(a[1].type);
    SqlValue one;
    int rc = one_elem_array(cx, &a[0], elem, &one);
    return rc ? rc : concat(cx, &one, &a[1], elem, out);
}

static int f_array_cat(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    if (a[0].is_null && a[1].is_null) {
        *out = a[0];
        return QR_OK;
    }
    QrSqlType elem = QR_SQL_ELEM(a[0].is_null ? a[1].type : a[0].type);
    SqlValue y = a[1];
    int rc;
    if (!y.is_null && y.type != a[0].type && !a[0].is_null &&
        (rc = sqla_cast(cx, &a[1], a[0].type, -1, &y)))
        return rc;
    return concat(cx, &a[0], &y, elem, out);
}

/* array_position(array, x [, start]): first subscript holding x (IS NOT
 * DISTINCT FROM), NULL if none */
static int f_array_position(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    *out = null_of(QR_SQL_INT4);
    if (a[0].is_null)
        return QR_OK;
    SqlArr arr;
    SqlValue hold;
    int rc = arg_array(cx, &a[0], &arr, &hold);
    if (rc)
        return rc;
    if (arr.ndim > 1)
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                          "searching for elements in multidimensional arrays is not supported");
    int64_t from = n > 2 && !a[2].is_null ? a[2].u.i - (arr.ndim ? arr.lbound[0] : 1) : 0;
    for (uint32_t i = from < 0 ? 0 : (uint32_t)from; i < arr.n; i++) {
        SqlValue x;
        sqla_get(&arr, i, &x);
        if ((x.is_null && a[1].is_null) || (!x.is_null && !a[1].is_null && sqlv_cmp(&x, &a[1]) == 0)) {
            *out = int4v((int64_t)i + arr.lbound[0]);
            return QR_OK;
        }
    }
    return QR_OK;
}

/* array_remove(array, x): every element equal to x (or NULL for NULL) taken out */
static int f_array_remove(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    if (a[0].is_null) {
        *out = a[0];
        return QR_OK;
    }
    SqlArr arr;
    SqlValue hold;
    int rc = arg_array(cx, &a[0], &arr, &hold);
    if (rc)
        return rc;
    if (arr.ndim > 1)
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                          "removing elements from multidimensional arrays is not supported");
    SqlValue *el = arr.n ? qr_arena_alloc(cx->arena, (size_t)arr.n * sizeof *el) : NULL;
    if (arr.n && !el)
        return nomem(cx);
    uint64_t k = 0;
    for (uint32_t i = 0; i < arr.n; i++) {
        SqlValue x;
        sqla_get(&arr, i, &x);
        bool same = (x.is_null && a[1].is_null) ||
                    (!x.is_null && !a[1].is_null && sqlv_cmp(&x, &a[1]) == 0);
        if (!same)
            el[k++] = x;
    }
    return sqla_list(cx, arr.elem, el, k, out);
}

/* ---- binding: polymorphic argument and result types ---- */

/* The array argument i: an array type, or an untyped literal read as
 * elem[] (text[] when nothing says more). */
static int want_array(SqlBind *b, SqlExpr *e, int i, QrSqlType elem)
{
    SqlExpr *x = e->args[i];
    if (x->type == QR_SQL_UNKNOWN)
        return sql_coerce_unknown(b, x, QR_SQL_ARRAY_OF(elem));
    if (QR_SQL_IS_ARRAY(x->type) || sqlt_is_str(x->type))
        return QR_OK;
    return sql_err_at(b->cx, e->loc, QR_ENOTFOUND, "42883", "function %s(%s) does not exist",
                      e->name, qr_sql_type_name(x->type));
}

static QrSqlType elem_of(const SqlExpr *x)
{
    if (QR_SQL_IS_ARRAY(x->type))
        return QR_SQL_ELEM(x->type);
    QrSqlType el = x->name ? sqlcat_array_elem(x->name) : QR_SQL_UNKNOWN;
    return el == QR_SQL_UNKNOWN ? QR_SQL_TEXT : el;
}

static int chk_dims(SqlBind *b, SqlExpr *e)
{
    int rc = want_array(b, e, 0, QR_SQL_TEXT);
    for (int i = 1; rc == QR_OK && i < e->n_args; i++)
        if ((rc = sql_coerce_unknown(b, e->args[i], QR_SQL_INT4)) == QR_OK &&
            !sqlt_is_int(e->args[i]->type))
            rc = sql_err_at(b->cx, e->loc, QR_ENOTFOUND, "42883",
                            "function %s(%s, %s) does not exist", e->name,
                            qr_sql_type_name(e->args[0]->type), qr_sql_type_name(e->args[i]->type));
    return rc;
}

static int chk_to_string(SqlBind *b, SqlExpr *e)
{
    int rc = want_array(b, e, 0, QR_SQL_TEXT);
    for (int i = 1; rc == QR_OK && i < e->n_args; i++)
        rc = sql_coerce_unknown(b, e->args[i], QR_SQL_TEXT);
    return rc;
}

static int chk_append(SqlBind *b, SqlExpr *e)
{
    int ai = strcmp(e->name, "array_prepend") == 0 ? 1 : 0, xi = 1 - ai;
    SqlExpr *x = e->args[xi];
    QrSqlType elem = QR_SQL_IS_ARRAY(e->args[ai]->type) ? QR_SQL_ELEM(e->args[ai]->type)
                     : x->type != QR_SQL_UNKNOWN      ? x->type
                                                      : QR_SQL_TEXT;
    int rc = want_array(b, e, ai, elem);
    if (rc == QR_OK)
        rc = sql_coerce_unknown(b, x, elem);
    if (rc == QR_OK && !QR_SQL_IS_ARRAY(e->args[ai]->type) &&
        (e->args[ai] = sql_bind_cast(b, e->args[ai], QR_SQL_ARRAY_OF(elem))) == NULL)
        return b->cx->err->code;
    e->type = QR_SQL_ARRAY_OF(elem);
    return rc;
}

static int chk_cat(SqlBind *b, SqlExpr *e)
{
    QrSqlType t = QR_SQL_IS_ARRAY(e->args[0]->type)   ? e->args[0]->type
                  : QR_SQL_IS_ARRAY(e->args[1]->type) ? e->args[1]->type
                                                      : QR_SQL_ARRAY_OF(QR_SQL_TEXT);
    for (int i = 0; i < 2; i++) {
        int rc = sql_coerce_unknown(b, e->args[i], t);
        if (rc)
            return rc;
        if (!QR_SQL_IS_ARRAY(e->args[i]->type))
            return sql_err_at(b->cx, e->loc, QR_ENOTFOUND, "42883",
                              "function array_cat(%s, %s) does not exist",
                              qr_sql_type_name(e->args[0]->type), qr_sql_type_name(e->args[1]->type));
    }
    e->type = t;
    return QR_OK;
}

static int chk_search(SqlBind *b, SqlExpr *e)
{
    int rc = want_array(b, e, 0, e->args[1]->type != QR_SQL_UNKNOWN ? e->args[1]->type
                                                                      : QR_SQL_TEXT);
    if (rc == QR_OK)
        rc = sql_coerce_unknown(b, e->args[1], elem_of(e->args[0]));
    if (rc == QR_OK && e->n_args > 2)
        rc = sql_coerce_unknown(b, e->args[2], QR_SQL_INT4);
    if (rc == QR_OK && !strcmp(e->name, "array_remove"))
        e->type = QR_SQL_IS_ARRAY(e->args[0]->type) ? e->args[0]->type
                                                    : QR_SQL_ARRAY_OF(elem_of(e->args[0]));
    return rc;
}

static int chk_split(SqlBind *b, SqlExpr *e)
{
    for (int i = 0; i < e->n_args; i++) {
        int rc = sql_coerce_unknown(b, e->args[i], QR_SQL_TEXT);
        if (rc)
            return rc;
    }
    e->type = QR_SQL_ARRAY_OF(QR_SQL_TEXT);
    return QR_OK;
}

const SqlFuncDef SQL_ARRAY_FUNCS[] = {
    {"array_length", 2, 2, QR_SQL_INT4, f_array_length, true, false, chk_dims},
    {"array_lower", 2, 2, QR_SQL_INT4, f_array_lower, true, false, chk_dims},
    {"array_upper", 2, 2, QR_SQL_INT4, f_array_upper, true, false, chk_dims},
    {"cardinality", 1, 1, QR_SQL_INT4, f_cardinality, true, false, chk_dims},
    {"array_ndims", 1, 1, QR_SQL_INT4, f_array_ndims, true, false, chk_dims},
    {"array_dims", 1, 1, QR_SQL_TEXT, f_array_dims, true, false, chk_dims},
    {"array_to_string", 2, 3, QR_SQL_TEXT, f_array_to_string, false, false, chk_to_string},
    {"string_to_array", 2, 3, QR_SQL_ARRAY_OF(QR_SQL_TEXT), f_string_to_array, false, false,
     chk_split},
    {"array_append", 2, 2, QR_SQL_UNKNOWN, f_array_append, false, false, chk_append},
    {"array_prepend", 2, 2, QR_SQL_UNKNOWN, f_array_prepend, false, false, chk_append},
    {"array_cat", 2, 2, QR_SQL_UNKNOWN, f_array_cat, false, false, chk_cat},
    {"array_position", 2, 3, QR_SQL_INT4, f_array_position, false, false, chk_search},
    {"array_remove", 2, 2, QR_SQL_UNKNOWN, f_array_remove, false, false, chk_search},
};
const int SQL_N_ARRAY_FUNCS = (int)(sizeof SQL_ARRAY_FUNCS / sizeof SQL_ARRAY_FUNCS[0]);

/* ---- operators: @>, <@, && ---- */

/* Does every element of y occur in x (NULLs never match)? */
static bool contains(const SqlArr *x, const SqlArr *y)
{
    for (uint32_t j = 0; j < y->n; j++) {
        SqlValue b;
        sqla_get(y, j, &b);
        bool found = false;
        for (uint32_t i = 0; i < x->n && !found && !b.is_null; i++) {
            SqlValue a;
            sqla_get(x, i, &a);
            found = !a.is_null && sqlv_cmp(&a, &b) == 0;
        }
        if (!found)
            return false;
    }
    return true;
}

int sqla_op(SqlCtx *cx, int op, const SqlValue *x, const SqlValue *y, SqlValue *out)
{
    SqlArr a, b;
    if (!sqla_view(x, &a) || !sqla_view(y, &b))
        return sql_err_at(cx, -1, QR_EINTERNAL, "XX000", "damaged array value");
    bool r = false;
    switch (op) {
    case SQLA_OP_CONTAINS:
        r = contains(&a, &b);
        break;
    case SQLA_OP_CONTAINED:
        r = contains(&b, &a);
        break;
    default: /* overlap */
        for (uint32_t j = 0; j < b.n && !r; j++) {
            SqlValue e;
            sqla_get(&b, j, &e);
            for (uint32_t i = 0; i < a.n && !r && !e.is_null; i++) {
                SqlValue d;
                sqla_get(&a, i, &d);
                r = !d.is_null && sqlv_cmp(&d, &e) == 0;
            }
        }
        break;
    }
    *out = sqlv_bool(r);
    return QR_OK;
}
