/*
 * sql_json.c — json and jsonb: input (a strict JSON parser that keeps
 * numbers as written and where each value stands in the text), json kept
 * as given and jsonb normalized as PostgreSQL prints it (keys ordered by
 * length then bytes, the last of duplicate keys kept, ", " and ": "
 * separators, numbers as numeric), the -> ->> #> #>> operators, SQL values
 * as JSON (to_json), the json / jsonb builders and typeof / array_length
 * functions, and json_agg's result.
 *
 * Layer: query/.  Calls sql_value.c, sql_array.c and the base kit.
 */
#include "query/sql_int.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 1000 /* nesting past it is 54001, as a deep stack is in PostgreSQL */

static int nomem(SqlCtx *cx)
{
    return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
}

/* ---- the parse tree ---- */

typedef struct JNode JNode;
struct JNode {
    char t;                /* 'o' object, 'a' array, 's' string, 'n' number, 't', 'f', 'z' null */
    const char *s;         /* string: its unescaped bytes; number: its text */
    size_t n;
    const char *raw;       /* where the value stands in the input, and how long */
    size_t raw_n;
    int n_kids;
    JNode **kids;          /* elements, or members' values */
    JNode **keys;          /* members' keys (strings), objects only */
};

typedef struct JParse {
    SqlCtx *cx;
    const char *p, *end, *start;
    int depth;
    const char *err;       /* the detail of a syntax error */
} JParse;

static void ws(JParse *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static JNode *jnew(JParse *j, char t)
{
    JNode *n = qr_arena_calloc(j->cx->arena, sizeof *n);
    if (n)
        n->t = t;
    return n;
}

static void put_utf8(char *d, size_t *k, uint32_t c)
{
    if (c < 0x80) {
        d[(*k)++] = (char)c;
    } else if (c < 0x800) {
        d[(*k)++] = (char)(0xC0 | c >> 6);
        d[(*k)++] = (char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        d[(*k)++] = (char)(0xE0 | c >> 12);
        d[(*k)++] = (char)(0x80 | (c >> 6 & 0x3F));
        d[(*k)++] = (char)(0x80 | (c & 0x3F));
    } else {
        d[(*k)++] = (char)(0xF0 | c >> 18);
        d[(*k)++] = (char)(0x80 | (c >> 12 & 0x3F));
        d[(*k)++] = (char)(0x80 | (c >> 6 & 0x3F));
        d[(*k)++] = (char)(0x80 | (c & 0x3F));
    }
}

static int hex4(const char *p, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], h = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f'
                                                               ? (c | 0x20) - 'a' + 10 : -1;
        if (h < 0)
            return -1;
        v = v << 4 | (uint32_t)h;
    }
    *out = v;
    return 0;
}

/* A string at j->p (its opening quote): unescaped into the arena. */
static JNode *jstring(JParse *j)
{
    const char *q = ++j->p;
    while (q < j->end && *q != '"') {
        if (*q == '\\')
            q++;
        q++;
    }
    if (q >= j->end) {
        j->err = "The input string ended unexpectedly.";
        return NULL;
    }
    JNode *n = jnew(j, 's');
    char *d = n ? qr_arena_alloc(j->cx->arena, (size_t)(q - j->p) + 1) : NULL;
    if (!d)
        return NULL;
    size_t k = 0;
    for (const char *p = j->p; p < q; p++) {
        if ((unsigned char)*p < 0x20) {
            j->err = "Character with value 0x00-0x1f must be escaped.";
            return NULL;
        }
        if (*p != '\\') {
            d[k++] = *p;
            continue;
        }
        p++;
        switch (*p) {
        case '"': case '\\': case '/': d[k++] = *p; break;
        case 'b': d[k++] = '\b'; break;
        case 'f': d[k++] = '\f'; break;
        case 'n': d[k++] = '\n'; break;
        case 'r': d[k++] = '\r'; break;
        case 't': d[k++] = '\t'; break;
        case 'u': {
            uint32_t c, lo;
            if (q - p < 5 || hex4(p + 1, &c)) {
                j->err = "\"\\u\" must be followed by four hexadecimal digits.";
                return NULL;
            }
            p += 4;
            if (c >= 0xD800 && c < 0xDC00 && q - p >= 7 && p[1] == '\\' && p[2] == 'u' &&
                !hex4(p + 3, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            } else if (c >= 0xD800 && c < 0xE000) {
                j->err = "Unicode low surrogate must follow a high surrogate.";
                return NULL;
            }
            if (c == 0) {
                j->err = "\\u0000 cannot be converted to text.";
                return NULL;
            }
            put_utf8(d, &k, c);
            break;
        }
        default:
            j->err = "Escape sequence is invalid.";
            return NULL;
        }
    }
    n->s = d;
    n->n = k;
    j->p = q + 1;
    return n;
}

static JNode *jvalue(JParse *j);

static bool grow(JParse *j, JNode *n, int *cap, bool keys)
{
    if (n->n_kids < *cap)
        return true;
    int nc = *cap ? *cap * 2 : 4;
    JNode **nk = qr_arena_alloc(j->cx->arena, (size_t)nc * sizeof *nk);
    JNode **nkeys = keys ? qr_arena_alloc(j->cx->arena, (size_t)nc * sizeof *nkeys) : NULL;
    if (!nk || (keys && !nkeys))
        return false;
    if (n->n_kids) {
        memcpy(nk, n->kids, (size_t)n->n_kids * sizeof *nk);
        if (keys)
            memcpy(nkeys, n->keys, (size_t)n->n_kids * sizeof *nkeys);
    }
    n->kids = nk;
    n->keys = nkeys;
    *cap = nc;
    return true;
}

static JNode *jcontainer(JParse *j, bool obj)
{
    if (++j->depth > JSON_MAX_DEPTH) {
        j->err = "nesting";
        return NULL;
    }
    JNode *n = jnew(j, obj ? 'o' : 'a');
    if (!n)
        return NULL;
    int cap = 0;
    j->p++;
    ws(j);
    if (j->p < j->end && *j->p == (obj ? '}' : ']')) {
        j->p++;
        j->depth--;
        return n;
    }
    for (;;) {
        ws(j);
        JNode *key = NULL;
        if (obj) {
            if (j->p >= j->end || *j->p != '"') {
                j->err = "Expected string or \"}\".";
                return NULL;
            }
            if (!(key = jstring(j)))
                return NULL;
            ws(j);
            if (j->p >= j->end || *j->p != ':') {
                j->err = "Expected \":\".";
                return NULL;
            }
            j->p++;
        }
        JNode *v = jvalue(j);
        if (!v || !grow(j, n, &cap, obj))
            return NULL;
        if (obj)
            n->keys[n->n_kids] = key;
        n->kids[n->n_kids++] = v;
        ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == (obj ? '}' : ']')) {
            j->p++;
            break;
        }
        j->err = obj ? "Expected \",\" or \"}\"." : "Expected \",\" or \"]\".";
        return NULL;
    }
    j->depth--;
    return n;
}

static JNode *jvalue(JParse *j)
{
    ws(j);
    if (j->p >= j->end) {
        j->err = "The input string ended unexpectedly.";
        return NULL;
    }
    const char *start = j->p;
    JNode *n = NULL;
    char c = *j->p;
    if (c == '{' || c == '[') {
        n = jcontainer(j, c == '{');
    } else if (c == '"') {
        n = jstring(j);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        const char *p = j->p;
        if (*p == '-')
            p++;
        if (p < j->end && *p == '0')
            p++;
        else if (p < j->end && *p >= '1' && *p <= '9')
            while (p < j->end && isdigit((unsigned char)*p))
                p++;
        else
            goto bad_token;
        if (p < j->end && *p == '.') {
            p++;
            if (p >= j->end || !isdigit((unsigned char)*p))
                goto bad_token;
            while (p < j->end && isdigit((unsigned char)*p))
                p++;
        }
        if (p < j->end && (*p == 'e' || *p == 'E')) {
            p++;
            if (p < j->end && (*p == '+' || *p == '-'))
                p++;
            if (p >= j->end || !isdigit((unsigned char)*p))
                goto bad_token;
            while (p < j->end && isdigit((unsigned char)*p))
                p++;
        }
        if ((n = jnew(j, 'n'))) {
            n->s = j->p;
            n->n = (size_t)(p - j->p);
        }
        j->p = p;
    } else {
        static const struct {
            const char *w;
            char t;
        } LIT[] = {{"true", 't'}, {"false", 'f'}, {"null", 'z'}};
        for (int i = 0; i < 3 && !n; i++) {
            size_t l = strlen(LIT[i].w);
            if ((size_t)(j->end - j->p) >= l && !memcmp(j->p, LIT[i].w, l) &&
                ((size_t)(j->end - j->p) == l || !isalnum((unsigned char)j->p[l]))) {
                n = jnew(j, LIT[i].t);
                j->p += l;
            }
        }
        if (!n)
            goto bad_token;
    }
    if (n) {
        n->raw = start;
        n->raw_n = (size_t)(j->p - start);
    }
    return n;
bad_token:
    j->err = "Token is invalid.";
    return NULL;
}

/* Parse s[0, n) whole; errors 22P02 "invalid input syntax for type json"
 * with PostgreSQL's detail, 54001 past JSON_MAX_DEPTH levels. */
static int jparse(SqlCtx *cx, const char *s, size_t n, QrSqlType t, int loc, JNode **out)
{
    JParse j = {.cx = cx, .p = s, .end = s + n, .start = s};
    JNode *v = jvalue(&j);
    if (v) {
        ws(&j);
        if (j.p != j.end) {
            v = NULL;
            j.err = "Expected end of input, but found more.";
        }
    }
    if (!v) {
        if (cx->err->code)
            return cx->err->code;
        if (j.err && !strcmp(j.err, "nesting"))
            return sql_err_at(cx, loc, QR_ELIMIT, "54001",
                              "JSON nests deeper than %d levels", JSON_MAX_DEPTH);
        if (!j.err)
            return nomem(cx);
        sql_err_at(cx, loc, QR_EINVAL, "22P02", "invalid input syntax for type %s",
                   t == QR_SQL_JSONB ? "json" : "json");
        qr_error_detail(cx->err, "%s", j.err);
        return QR_EINVAL;
    }
    *out = v;
    return QR_OK;
}

/* ---- printing ---- */

static void put_jstr(QrBuf *b, const char *s, size_t n)
{
    qr_buf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': qr_buf_append(b, "\\\"", 2); break;
        case '\\': qr_buf_append(b, "\\\\", 2); break;
        case '\b': qr_buf_append(b, "\\b", 2); break;
        case '\f': qr_buf_append(b, "\\f", 2); break;
        case '\n': qr_buf_append(b, "\\n", 2); break;
        case '\r': qr_buf_append(b, "\\r", 2); break;
        case '\t': qr_buf_append(b, "\\t", 2); break;
        default:
            if (c < 0x20)
                qr_buf_printf(b, "\\u%04x", c);
            else
                qr_buf_putc(b, c);
        }
    }
    qr_buf_putc(b, '"');
}

/* A JSON number as numeric prints it: the exponent applied ("1e2" is 100,
 * "1.5E-3" 0.0015), "-0" as 0. */
static void put_jnum(QrBuf *b, const char *s, size_t n)
{
    const char *e = memchr(s, 'e', n);
    if (!e)
        e = memchr(s, 'E', n);
    if (!e) {
        if (n == 2 && s[0] == '-' && s[1] == '0')
            qr_buf_putc(b, '0');
        else
            qr_buf_append(b, s, n);
        return;
    }
    long x = strtol(e + 1, NULL, 10);
    bool neg = s[0] == '-';
    char digs[400];
    size_t nd = 0;
    long point = -1;
    for (const char *p = s + neg; p < e && nd < sizeof digs; p++) {
        if (*p == '.')
            point = (long)nd;
        else
            digs[nd++] = *p;
    }
    if (point < 0)
        point = (long)nd;
    long scale = (long)nd - point; /* fraction digits as written */
    point += x;
    if (x > 300 || x < -300) { /* beyond what we spell out: as written */
        qr_buf_append(b, s, n);
        return;
    }
    /* digits digs[0, nd) with the point after position `point`, keeping the
     * written scale minus the exponent (numeric keeps 1.50e1 as 15.0) */
    long keep = scale - x < 0 ? 0 : scale - x;
    QrBuf t;
    qr_buf_init(&t);
    if (point <= 0) {
        qr_buf_putc(&t, '0');
    } else {
        for (long i = 0; i < point; i++)
            qr_buf_putc(&t, (uint8_t)(i < (long)nd ? digs[i] : '0'));
    }
    if (keep > 0) {
        qr_buf_putc(&t, '.');
        for (long i = point; i < point + keep; i++)
            qr_buf_putc(&t, (uint8_t)(i >= 0 && i < (long)nd ? digs[i] : '0'));
    }
    /* strip leading zeros of the integer part */
    const char *d = t.data ? (const char *)t.data : "0";
    size_t dl = t.len, k = 0;
    while (k + 1 < dl && d[k] == '0' && d[k + 1] != '.')
        k++;
    bool zero = true;
    for (size_t i = k; i < dl; i++)
        zero &= d[i] == '0' || d[i] == '.';
    if (neg && !zero)
        qr_buf_putc(b, '-');
    qr_buf_append(b, d + k, dl - k);
    qr_buf_free(&t);
}

static int key_cmp(const JNode *a, const JNode *b)
{
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    return memcmp(a->s, b->s, a->n);
}

/* Print a parsed value: jsonb's normal form, or (json) the text as given. */
static void jprint(const JNode *n, bool jsonb, QrBuf *b)
{
    if (!jsonb) {
        qr_buf_append(b, n->raw, n->raw_n);
        return;
    }
    switch (n->t) {
    case 's':
        put_jstr(b, n->s, n->n);
        break;
    case 'n':
        put_jnum(b, n->s, n->n);
        break;
    case 't':
        qr_buf_append(b, "true", 4);
        break;
    case 'f':
        qr_buf_append(b, "false", 5);
        break;
    case 'z':
        qr_buf_append(b, "null", 4);
        break;
    case 'a':
        qr_buf_putc(b, '[');
        for (int i = 0; i < n->n_kids; i++) {
            if (i)
                qr_buf_append(b, ", ", 2);
            jprint(n->kids[i], true, b);
        }
        qr_buf_putc(b, ']');
        break;
    default: { /* object: keys by length then bytes, the last duplicate wins */
        int m = n->n_kids;
        int *ord = qr_malloc((size_t)(m ? m : 1) * sizeof *ord);
        if (!ord) {
            b->oom = true;
            return;
        }
        for (int i = 0; i < m; i++)
            ord[i] = i;
        for (int i = 1; i < m; i++) { /* insertion sort, stable */
            int x = ord[i], k = i;
            while (k > 0 && key_cmp(n->keys[ord[k - 1]], n->keys[x]) > 0) {
                ord[k] = ord[k - 1];
                k--;
            }
            ord[k] = x;
        }
        qr_buf_putc(b, '{');
        bool first = true;
        for (int i = 0; i < m; i++) {
            if (i + 1 < m && key_cmp(n->keys[ord[i]], n->keys[ord[i + 1]]) == 0)
                continue; /* a later duplicate follows */
            if (!first)
                qr_buf_append(b, ", ", 2);
            first = false;
            put_jstr(b, n->keys[ord[i]]->s, n->keys[ord[i]]->n);
            qr_buf_append(b, ": ", 2);
            jprint(n->kids[ord[i]], true, b);
        }
        qr_buf_putc(b, '}');
        qr_free(ord);
    }
    }
}

static int jvalue_of(SqlCtx *cx, const JNode *n, QrSqlType t, SqlValue *out)
{
    QrBuf b;
    qr_buf_init(&b);
    jprint(n, t == QR_SQL_JSONB, &b);
    int rc = sqlv_buf_text(cx, &b, out);
    out->type = t;
    return rc;
}

int sqljs_in(SqlCtx *cx, const char *s, size_t n, QrSqlType t, int loc, SqlValue *out)
{
    JNode *root;
    int rc = jparse(cx, s, n, t, loc, &root);
    if (rc)
        return rc;
    if (t == QR_SQL_JSON) { /* as given */
        char *d = qr_arena_strndup(cx->arena, s, n);
        if (!d)
            return nomem(cx);
        *out = sqlv_text(d, n);
        out->type = QR_SQL_JSON;
        return QR_OK;
    }
    return jvalue_of(cx, root, t, out);
}

/* ---- SQL values as JSON (to_json) ---- */

static void put_value(const SqlValue *v, QrBuf *b);

static void put_array(const SqlArr *a, int dim, uint32_t *pos, QrBuf *b)
{
    qr_buf_putc(b, '[');
    for (int i = 0; i < a->dims[dim]; i++) {
        if (i)
            qr_buf_putc(b, ',');
        if (dim + 1 < a->ndim) {
            put_array(a, dim + 1, pos, b);
        } else {
            SqlValue x;
            sqla_get(a, (*pos)++, &x);
            put_value(&x, b);
        }
    }
    qr_buf_putc(b, ']');
}

static void put_value(const SqlValue *v, QrBuf *b)
{
    if (v->is_null) {
        qr_buf_append(b, "null", 4);
        return;
    }
    if (QR_SQL_IS_ARRAY(v->type)) {
        SqlArr a;
        uint32_t pos = 0;
        if (!sqla_view(v, &a) || a.ndim == 0)
            qr_buf_append(b, "[]", 2);
        else
            put_array(&a, 0, &pos, b);
        return;
    }
    QrBuf t;
    switch (v->type) {
    case QR_SQL_BOOL:
        qr_buf_append(b, v->u.b ? "true" : "false", v->u.b ? 4 : 5);
        return;
    case QR_SQL_INT2:
    case QR_SQL_INT4:
    case QR_SQL_INT8:
    case QR_SQL_OID:
        qr_sql_value_text(v, b);
        return;
    case QR_SQL_FLOAT4:
    case QR_SQL_FLOAT8:
    case QR_SQL_NUMERIC:
        qr_buf_init(&t);
        qr_sql_value_text(v, &t);
        if (t.len && (isdigit(t.data[0]) || t.data[0] == '-') && !memchr(t.data, 'n', t.len) &&
            !memchr(t.data, 'N', t.len))
            qr_buf_append(b, t.data, t.len);
        else
            put_jstr(b, t.data ? (const char *)t.data : "", t.len); /* NaN, Infinity */
        qr_buf_free(&t);
        return;
    case QR_SQL_JSON:
    case QR_SQL_JSONB:
        qr_buf_append(b, v->u.s.s, v->u.s.n);
        return;
    case QR_SQL_TIMESTAMP:
    case QR_SQL_TIMESTAMPTZ: { /* ISO 8601, as to_json writes timestamps */
        qr_buf_init(&t);
        qr_sql_value_text(v, &t);
        char *d = t.data ? (char *)t.data : NULL;
        if (d && t.len > 10 && d[10] == ' ')
            d[10] = 'T';
        if (d && v->type == QR_SQL_TIMESTAMPTZ && t.len > 3 && d[t.len - 3] == '+')
            qr_buf_append(&t, ":00", 3);
        put_jstr(b, t.data ? (const char *)t.data : "", t.len);
        qr_buf_free(&t);
        return;
    }
    default:
        qr_buf_init(&t);
        qr_sql_value_text(v, &t);
        put_jstr(b, t.data ? (const char *)t.data : "", t.len);
        qr_buf_free(&t);
        return;
    }
}

int sqljs_from_value(SqlCtx *cx, const SqlValue *v, QrSqlType t, SqlValue *out)
{
    QrBuf b;
    qr_buf_init(&b);
    put_value(v, &b);
    int rc = sqlv_buf_text(cx, &b, out);
    if (rc == QR_OK && t == QR_SQL_JSONB) /* normalized */
        return sqljs_in(cx, out->u.s.s, out->u.s.n, QR_SQL_JSONB, -1, out);
    out->type = t;
    return rc;
}

int sqljs_agg(SqlCtx *cx, const SqlValue *vals, uint64_t n, uint64_t stride, QrSqlType t,
             SqlValue *out)
{
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_putc(&b, '[');
    for (uint64_t i = 0; i < n; i++) {
        if (i)
            qr_buf_append(&b, ", ", 2);
        put_value(&vals[i * stride], &b);
        if (b.len > SQL_TEXT_MAX) {
            qr_buf_free(&b);
            return sql_err_at(cx, -1, QR_ELIMIT, "54000", "json_agg result exceeds %u bytes",
                              (unsigned)SQL_TEXT_MAX);
        }
    }
    qr_buf_putc(&b, ']');
    int rc = sqlv_buf_text(cx, &b, out);
    if (rc == QR_OK && t == QR_SQL_JSONB)
        return sqljs_in(cx, out->u.s.s, out->u.s.n, QR_SQL_JSONB, -1, out);
    out->type = t;
    return rc;
}

/* ---- operators: -> ->> #> #>> ---- */

/* The member `key` of an object, or element `idx` of an array (negative
 * from the end); NULL when absent. */
static const JNode *jget(const JNode *n, const SqlValue *k)
{
    if (k->is_null)
        return NULL;
    if (sqlt_is_int(k->type)) {
        if (n->t != 'a')
            return NULL;
        int64_t i = k->u.i < 0 ? n->n_kids + k->u.i : k->u.i;
        return i >= 0 && i < n->n_kids ? n->kids[i] : NULL;
    }
    if (n->t != 'o')
        return NULL;
    const JNode *found = NULL; /* the last of duplicates, as jsonb keeps it */
    for (int i = 0; i < n->n_kids; i++)
        if (n->keys[i]->n == k->u.s.n && !memcmp(n->keys[i]->s, k->u.s.s, k->u.s.n))
            found = n->kids[i];
    return found;
}

int sqljs_op(SqlCtx *cx, int op, const SqlValue *doc, const SqlValue *key, QrSqlType ret,
            SqlValue *out)
{
    JNode *root;
    int rc = jparse(cx, doc->u.s.s ? doc->u.s.s : "", doc->u.s.n, doc->type, -1, &root);
    if (rc)
        return rc;
    const JNode *n = root;
    if (op == SQLJS_GET || op == SQLJS_GET_TEXT) {
        n = jget(root, key);
    } else { /* a path: text[] */
        SqlValue *el, arr;
        uint64_t k;
        if ((rc = sqla_of(cx, key, QR_SQL_TEXT, &arr)) || (rc = sqla_elems(cx, &arr, &el, &k)))
            return rc;
        for (uint64_t i = 0; i < k && n; i++) {
            SqlValue step = el[i];
            if (!step.is_null && n->t == 'a') { /* a subscript of an array */
                char *end, num[32];
                snprintf(num, sizeof num, "%.*s", (int)(step.u.s.n < 31 ? step.u.s.n : 31),
                         step.u.s.s);
                long long x = strtoll(num, &end, 10);
                if (*end || !*num) {
                    n = NULL;
                    break;
                }
                step = sqlv_int(x);
            }
            n = jget(n, &step);
        }
    }
    *out = sqlv_null();
    out->type = ret;
    if (!n)
        return QR_OK;
    if (ret == QR_SQL_TEXT) { /* ->> and #>>: strings unquoted, null as NULL */
        if (n->t == 'z')
            return QR_OK;
        if (n->t == 's') {
            char *d = qr_arena_strndup(cx->arena, n->s, n->n);
            if (!d)
                return nomem(cx);
            *out = sqlv_text(d, n->n);
            return QR_OK;
        }
        return jvalue_of(cx, n, doc->type, out) ? cx->err->code : (out->type = QR_SQL_TEXT, QR_OK);
    }
    return jvalue_of(cx, n, doc->type, out);
}

/* ---- functions ---- */

static bool is_jsonish(QrSqlType t) { return t == QR_SQL_JSON || t == QR_SQL_JSONB; }

static int parse_arg(SqlCtx *cx, const SqlValue *v, JNode **out)
{
    return jparse(cx, v->u.s.s ? v->u.s.s : "", v->u.s.n, v->type, -1, out);
}

static int f_typeof(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    JNode *root;
    int rc = parse_arg(cx, a, &root);
    if (rc)
        return rc;
    const char *t = root->t == 'o' ? "object" : root->t == 'a' ? "array" : root->t == 's' ? "string"
                    : root->t == 'n' ? "number" : root->t == 'z' ? "null" : "boolean";
    *out = sqlv_text(t, strlen(t));
    return QR_OK;
}

static int f_array_length(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    JNode *root;
    int rc = parse_arg(cx, a, &root);
    if (rc)
        return rc;
    if (root->t != 'a')
        return sql_err_at(cx, -1, QR_EINVAL, "22023", "cannot get array length of a %s",
                          root->t == 'o' ? "non-array" : "scalar");
    *out = sqlv_int(root->n_kids);
    out->type = QR_SQL_INT4;
    return QR_OK;
}

/* json[b]_build_object(k1, v1, ...): keys not NULL (22004), as text */
static int build_object(SqlCtx *cx, int n, const SqlValue *a, QrSqlType t, SqlValue *out)
{
    if (n % 2)
        return sql_err_at(cx, -1, QR_EINVAL, "22023",
                          "argument list must have even number of elements");
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_putc(&b, '{');
    for (int i = 0; i < n; i += 2) {
        if (a[i].is_null) {
            qr_buf_free(&b);
            return sql_err_at(cx, -1, QR_EINVAL, "22004", "null value not allowed for object key");
        }
        QrBuf k;
        qr_buf_init(&k);
        qr_sql_value_text(&a[i], &k);
        if (i)
            qr_buf_append(&b, ", ", 2);
        put_jstr(&b, k.data ? (const char *)k.data : "", k.len);
        qr_buf_free(&k);
        qr_buf_append(&b, " : ", 3);
        put_value(&a[i + 1], &b);
    }
    qr_buf_putc(&b, '}');
    int rc = sqlv_buf_text(cx, &b, out);
    if (rc == QR_OK && t == QR_SQL_JSONB)
        return sqljs_in(cx, out->u.s.s, out->u.s.n, QR_SQL_JSONB, -1, out);
    out->type = t;
    return rc;
}

/* row_to_json(t): the binder passes the row's column names and values
 * alternately; PostgreSQL prints it without spaces. */
static int f_row_to_json(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_putc(&b, '{');
    for (int i = 0; i + 1 < n; i += 2) {
        if (i)
            qr_buf_putc(&b, ',');
        put_jstr(&b, a[i].u.s.s, a[i].u.s.n);
        qr_buf_putc(&b, ':');
        put_value(&a[i + 1], &b);
    }
    qr_buf_putc(&b, '}');
    int rc = sqlv_buf_text(cx, &b, out);
    out->type = QR_SQL_JSON;
    return rc;
}

const SqlFuncDef SQLJS_ROW_TO_JSON = {"row_to_json", 0, 2 * QR_MAX_FIELDS + 4, QR_SQL_JSON,
                                       f_row_to_json, false};

static int f_json_build_object(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    return build_object(cx, n, a, QR_SQL_JSON, out);
}

static int f_jsonb_build_object(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    return build_object(cx, n, a, QR_SQL_JSONB, out);
}

static int f_json_build_array(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    return sqljs_agg(cx, a, (uint64_t)n, 1, QR_SQL_JSON, out);
}

static int f_jsonb_build_array(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    return sqljs_agg(cx, a, (uint64_t)n, 1, QR_SQL_JSONB, out);
}

static int f_to_json(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    return sqljs_from_value(cx, a, QR_SQL_JSON, out);
}

static int f_to_jsonb(SqlCtx *cx, int n, const SqlValue *a, SqlValue *out)
{
    (void)n;
    return sqljs_from_value(cx, a, QR_SQL_JSONB, out);
}

static int chk_json_arg(SqlBind *b, SqlExpr *e)
{
    QrSqlType want = strncmp(e->name, "jsonb", 5) == 0 ? QR_SQL_JSONB : QR_SQL_JSON;
    int rc = sql_coerce_unknown(b, e->args[0], want);
    if (rc == QR_OK && !is_jsonish(e->args[0]->type))
        rc = sql_err_at(b->cx, e->loc, QR_ENOTFOUND, "42883", "function %s(%s) does not exist",
                        e->name, qr_sql_type_name(e->args[0]->type));
    return rc;
}

/* builders and to_json: untyped literal arguments are text */
static int chk_any_text(SqlBind *b, SqlExpr *e)
{
    for (int i = 0; i < e->n_args; i++) {
        int rc = sql_coerce_unknown(b, e->args[i], QR_SQL_TEXT);
        if (rc)
            return rc;
    }
    return QR_OK;
}

const SqlFuncDef SQL_JSON_FUNCS[] = {
    {"json_build_object", 0, 100, QR_SQL_JSON, f_json_build_object, false, false, chk_any_text},
    {"jsonb_build_object", 0, 100, QR_SQL_JSONB, f_jsonb_build_object, false, false, chk_any_text},
    {"json_build_array", 0, 100, QR_SQL_JSON, f_json_build_array, false, false, chk_any_text},
    {"jsonb_build_array", 0, 100, QR_SQL_JSONB, f_jsonb_build_array, false, false, chk_any_text},
    {"to_json", 1, 1, QR_SQL_JSON, f_to_json, false, false, chk_any_text},
    {"to_jsonb", 1, 1, QR_SQL_JSONB, f_to_jsonb, false, false, chk_any_text},
    {"json_typeof", 1, 1, QR_SQL_TEXT, f_typeof, true, false, chk_json_arg},
    {"jsonb_typeof", 1, 1, QR_SQL_TEXT, f_typeof, true, false, chk_json_arg},
    {"json_array_length", 1, 1, QR_SQL_INT4, f_array_length, true, false, chk_json_arg},
    {"jsonb_array_length", 1, 1, QR_SQL_INT4, f_array_length, true, false, chk_json_arg},
};
const int SQL_N_JSON_FUNCS = (int)(sizeof SQL_JSON_FUNCS / sizeof SQL_JSON_FUNCS[0]);
