/*
 * filter_parse.c — the filter tree (query/filter.h): constructors, copy,
 * schema check, the SQL-WHERE text parser and printing back to text.
 *
 * Layer: query/.  Calls store/ (column types, schema, timestamps, base kit).
 *
 * The parser is a recursive descent over a small tokenizer; every token
 * remembers its byte offset so errors point at it (QrError offset, line,
 * column) the way PostgreSQL's "at or near" errors do.  Literals are typed
 * by the column they are compared with, so '2025-01-01' is a timestamp next
 * to a timestamp column and a string next to a keyword column.
 */
#include "query/filter.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "store/mem.h"

/* ---- nodes ---- */

static QrFilter *node_new(QrFilterKind k)
{
    QrFilter *f = qr_calloc(1, sizeof *f);
    if (f) {
        f->kind = k;
        f->pos = -1;
    }
    return f;
}

QrFilter *qr_filter_true(void) { return node_new(QF_TRUE); }
QrFilter *qr_filter_false(void) { return node_new(QF_FALSE); }

static bool val_copy(ColVal *dst, const ColVal *src)
{
    *dst = *src;
    if (src->kind != CV_STR)
        return true;
    char *s = qr_malloc(src->u.str.n + 1);
    if (!s)
        return false;
    if (src->u.str.n)
        memcpy(s, src->u.str.s, src->u.str.n);
    s[src->u.str.n] = 0;
    dst->u.str.s = s;
    return true;
}

static void val_free(ColVal *v)
{
    if (v->kind == CV_STR)
        qr_free((void *)v->u.str.s);
    v->kind = CV_INT;
}

/* Release the operands a PRED node owns. */
static void pred_free(ColPred *p)
{
    val_free(&p->v);
    val_free(&p->hi);
    if (p->set) {
        for (size_t i = 0; i < p->n_set; i++)
            val_free((ColVal *)&p->set[i]);
        qr_free((void *)p->set);
    }
    p->set = NULL;
    p->n_set = 0;
}

static bool pred_copy(ColPred *dst, const ColPred *src)
{
    memset(dst, 0, sizeof *dst);
    dst->op = src->op;
    dst->v.kind = dst->hi.kind = CV_INT;
    bool need_v = src->op != CP_IN && src->op != CP_IS_NULL && src->op != CP_IS_NOT_NULL;
    if (need_v && !val_copy(&dst->v, &src->v))
        return false;
    if (src->op == CP_BETWEEN && !val_copy(&dst->hi, &src->hi)) {
        pred_free(dst);
        return false;
    }
    if (src->op == CP_IN && src->n_set) {
        ColVal *set = qr_calloc(src->n_set, sizeof *set);
        if (!set)
            return false;
        dst->set = set;
        for (size_t i = 0; i < src->n_set; i++) {
            if (!val_copy(&set[i], &src->set[i])) {
                pred_free(dst);
                return false;
            }
            dst->n_set = i + 1;
        }
    }
    return true;
}

QrFilter *qr_filter_pred(int field, const ColPred *pred)
{
    QrFilter *f = node_new(QF_PRED);
    if (!f)
        return NULL;
    f->field = field;
    if (!pred_copy(&f->pred, pred)) {
        qr_free(f);
        return NULL;
    }
    return f;
}

QrFilter *qr_filter_like(int field, const char *pattern, size_t len)
{
    bool wild_inside = false;
    size_t n_pct_end = 0;
    for (size_t i = 0; i < len; i++) {
        if (pattern[i] == '_' || pattern[i] == '\\' || (pattern[i] == '%' && i + 1 < len))
            wild_inside = true;
    }
    if (len && pattern[len - 1] == '%')
        n_pct_end = 1;
    if (!wild_inside) {
        ColPred p = {.op = n_pct_end ? CP_PREFIX : CP_EQ,
                     .v = col_val_str(pattern, len - n_pct_end)};
        return qr_filter_pred(field, &p);
    }
    QrFilter *f = node_new(QF_LIKE);
    if (!f)
        return NULL;
    f->field = field;
    f->pattern = qr_strndup(pattern, len);
    f->pattern_len = len;
    if (!f->pattern) {
        qr_free(f);
        return NULL;
    }
    return f;
}

void qr_filter_free(QrFilter *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->n_kids; i++)
        qr_filter_free(f->kids[i]);
    qr_free(f->kids);
    if (f->kind == QF_PRED)
        pred_free(&f->pred);
    qr_free(f->pattern);
    qr_free(f);
}

static QrFilter *combine(QrFilterKind k, QrFilter **kids, int n)
{
    for (int i = 0; i < n; i++)
        if (!kids[i])
            goto fail;
    QrFilter *f = node_new(k);
    if (!f)
        goto fail;
    f->kids = qr_malloc((size_t)(n ? n : 1) * sizeof *f->kids);
    if (!f->kids) {
        qr_free(f);
        goto fail;
    }
    memcpy(f->kids, kids, (size_t)n * sizeof *kids);
    f->n_kids = n;
    return f;
fail:
    for (int i = 0; i < n; i++)
        qr_filter_free(kids[i]);
    return NULL;
}

QrFilter *qr_filter_and_n(QrFilter **kids, int n)
{
    return n == 0 ? qr_filter_true() : combine(QF_AND, kids, n);
}

QrFilter *qr_filter_or_n(QrFilter **kids, int n)
{
    return n == 0 ? qr_filter_false() : combine(QF_OR, kids, n);
}

QrFilter *qr_filter_and(QrFilter *a, QrFilter *b)
{
    QrFilter *v[2] = {a, b};
    return combine(QF_AND, v, 2);
}

QrFilter *qr_filter_or(QrFilter *a, QrFilter *b)
{
    QrFilter *v[2] = {a, b};
    return combine(QF_OR, v, 2);
}

QrFilter *qr_filter_not(QrFilter *a)
{
    return combine(QF_NOT, &a, 1);
}

QrFilter *qr_filter_clone(const QrFilter *f)
{
    if (!f)
        return NULL;
    QrFilter *c;
    switch (f->kind) {
    case QF_PRED:
        if ((c = qr_filter_pred(f->field, &f->pred)))
            c->multi = f->multi;
        break;
    case QF_LIKE:
        c = node_new(QF_LIKE);
        if (c) {
            c->field = f->field;
            c->pattern_len = f->pattern_len;
            if (!(c->pattern = qr_strndup(f->pattern, f->pattern_len))) {
                qr_free(c);
                c = NULL;
            }
        }
        break;
    case QF_TRUE:
    case QF_FALSE: c = node_new(f->kind); break;
    default: {
        QrFilter *stackv[8];
        QrFilter **v = f->n_kids <= 8 ? stackv : qr_malloc((size_t)f->n_kids * sizeof *v);
        if (!v)
            return NULL;
        for (int i = 0; i < f->n_kids; i++)
            v[i] = qr_filter_clone(f->kids[i]);
        c = combine(f->kind, v, f->n_kids);
        if (v != stackv)
            qr_free(v);
    }
    }
    if (c)
        c->pos = f->pos;
    return c;
}

/* ---- schema check ---- */

int qr_filter_field_coltype(const QrSchema *schema, int field)
{
    if (field < 0 || field >= schema->n_fields)
        return -1;
    if (schema->fields[field].type == QR_FT_NUMERIC)
        return -1; /* its column holds scaled integers or decimal text: SQL reads it */
    return schema_column_type(&schema->fields[field]);
}

static bool kind_fits(int ct, ColValKind k)
{
    switch (ct) {
    case QR_COL_INT64:
    case QR_COL_TIMESTAMP:
    case QR_COL_FLOAT64: return k == CV_INT || k == CV_FLOAT;
    case QR_COL_BOOL: return k == CV_BOOL;
    case QR_COL_KEYWORD: return k == CV_STR;
    }
    return false;
}

static int at_pos(QrError *err, int32_t pos)
{
    if (err && pos >= 0)
        qr_error_pos(err, pos, -1, pos + 1);
    return err ? err->code : QR_EINVAL;
}

int qr_filter_check(const QrFilter *f, const QrSchema *schema, QrError *err)
{
    if (!f)
        return qr_error_set(err, QR_EINVAL, "missing filter");
    switch (f->kind) {
    case QF_TRUE:
    case QF_FALSE: return QR_OK;
    case QF_AND:
    case QF_OR:
    case QF_NOT:
        if (f->n_kids < 1 || (f->kind == QF_NOT && f->n_kids != 1))
            return qr_error_set(err, QR_EINVAL, "malformed filter node");
        for (int i = 0; i < f->n_kids; i++) {
            int rc = qr_filter_check(f->kids[i], schema, err);
            if (rc != QR_OK)
                return rc;
        }
        return QR_OK;
    case QF_PRED:
    case QF_LIKE: break;
    default: return qr_error_set(err, QR_EINVAL, "malformed filter node");
    }
    if (f->field < 0 || f->field >= schema->n_fields) {
        qr_error_set(err, QR_ENOTFOUND, "filter names a column that does not exist");
        qr_error_set_sqlstate(err, "42703");
        return at_pos(err, f->pos);
    }
    const char *name = schema->fields[f->field].name;
    int ct = qr_filter_field_coltype(schema, f->field);
    if (ct < 0 && schema->fields[f->field].type == QR_FT_NUMERIC) {
        qr_error_set(err, QR_EUNSUPPORTED, "numeric field \"%s\" cannot be filtered here", name);
        qr_error_hint(err, "filter it in SQL (WHERE %s > 12.50)", name);
        return at_pos(err, f->pos);
    }
    if (ct < 0) {
        qr_error_set(err, QR_ETYPE, "field \"%s\" is full text and has no column to filter on",
                     name);
        qr_error_hint(err, "search it in the query text, or declare it with \"column\": true");
        return at_pos(err, f->pos);
    }
    if (schema->fields[f->field].multi &&
        (f->kind == QF_LIKE ||
         (f->pred.op != CP_EQ && f->pred.op != CP_NE && f->pred.op != CP_IN &&
          f->pred.op != CP_IS_NULL && f->pred.op != CP_IS_NOT_NULL))) {
        qr_error_set(err, QR_ETYPE, "multi-valued keyword field \"%s\" takes =, <>, IN and IS "
                                    "NULL only", name);
        qr_error_detail(err, "it holds a list of values per document");
        return at_pos(err, f->pos);
    }
    if (f->kind == QF_LIKE || f->pred.op == CP_PREFIX) {
        if (ct != QR_COL_KEYWORD) {
            qr_error_set(err, QR_ETYPE, "LIKE needs a keyword column, \"%s\" is %s", name,
                         col_type_name((QrColType)ct));
            return at_pos(err, f->pos);
        }
    }
    if (f->kind == QF_LIKE)
        return QR_OK;
    const ColPred *p = &f->pred;
    bool ok = true;
    switch (p->op) {
    case CP_IS_NULL:
    case CP_IS_NOT_NULL: break;
    case CP_IN:
        for (size_t i = 0; i < p->n_set; i++)
            ok = ok && kind_fits(ct, p->set[i].kind);
        break;
    case CP_BETWEEN: ok = kind_fits(ct, p->v.kind) && kind_fits(ct, p->hi.kind); break;
    case CP_EQ:
    case CP_NE:
    case CP_LT:
    case CP_LE:
    case CP_GT:
    case CP_GE:
    case CP_PREFIX: ok = kind_fits(ct, p->v.kind); break;
    default: return qr_error_set(err, QR_EINVAL, "bad filter operator on \"%s\"", name);
    }
    if (!ok) {
        qr_error_set(err, QR_ETYPE, "value of the wrong type for %s column \"%s\"",
                     col_type_name((QrColType)ct), name);
        return at_pos(err, f->pos);
    }
    return QR_OK;
}

/* ---- tokenizer ---- */

typedef enum {
    T_END, T_IDENT, T_QIDENT, T_NUM, T_STR, T_LP, T_RP, T_COMMA,
    T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE, T_BAD
} TokKind;

typedef struct Tok {
    TokKind k;
    const char *s; /* token text (for T_STR / T_QIDENT: inside the quotes) */
    size_t n;
    int32_t pos;   /* byte offset of the token */
    bool has_escape; /* T_STR / T_QIDENT: doubled quotes to undo */
} Tok;

typedef struct Parser {
    const QrSchema *schema;
    const char *src;
    size_t len, i;
    Tok tok;       /* current token */
    QrError *err;
    int depth;
} Parser;

static void lex(Parser *p)
{
    while (p->i < p->len && isspace((unsigned char)p->src[p->i]))
        p->i++;
    Tok *t = &p->tok;
    t->pos = (int32_t)p->i;
    t->s = p->src + p->i;
    t->n = 0;
    t->has_escape = false;
    if (p->i >= p->len) {
        t->k = T_END;
        return;
    }
    char c = p->src[p->i];
    const char *s = p->src;
    size_t i = p->i;
    if (isalpha((unsigned char)c) || c == '_') {
        while (i < p->len && (isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '.'))
            i++;
        t->k = T_IDENT;
    } else if (isdigit((unsigned char)c) || ((c == '-' || c == '+' || c == '.') && i + 1 < p->len &&
                                             (isdigit((unsigned char)s[i + 1]) || s[i + 1] == '.'))) {
        i++;
        while (i < p->len && (isalnum((unsigned char)s[i]) || s[i] == '.' ||
                              ((s[i] == '-' || s[i] == '+') && (s[i - 1] == 'e' || s[i - 1] == 'E'))))
            i++;
        t->k = T_NUM;
    } else if (c == '\'' || c == '"') {
        i++;
        for (;;) {
            if (i >= p->len) {
                t->k = T_BAD; /* unterminated */
                p->i = p->len;
                t->n = p->len - (size_t)t->pos;
                return;
            }
            if (s[i] == c) {
                if (i + 1 < p->len && s[i + 1] == c) {
                    t->has_escape = true;
                    i += 2;
                    continue;
                }
                break;
            }
            i++;
        }
        t->k = c == '\'' ? T_STR : T_QIDENT;
        t->s = s + p->i + 1;
        t->n = i - p->i - 1;
        p->i = i + 1;
        return;
    } else {
        i++;
        switch (c) {
        case '(': t->k = T_LP; break;
        case ')': t->k = T_RP; break;
        case ',': t->k = T_COMMA; break;
        case '=': t->k = T_EQ; if (i < p->len && s[i] == '=') i++; break;
        case '!':
            if (i < p->len && s[i] == '=') { i++; t->k = T_NE; } else t->k = T_BAD;
            break;
        case '<':
            if (i < p->len && s[i] == '=') { i++; t->k = T_LE; }
            else if (i < p->len && s[i] == '>') { i++; t->k = T_NE; }
            else t->k = T_LT;
            break;
        case '>':
            if (i < p->len && s[i] == '=') { i++; t->k = T_GE; } else t->k = T_GT;
            break;
        default: t->k = T_BAD;
        }
    }
    t->n = i - p->i;
    p->i = i;
}

static bool is_kw(const Tok *t, const char *kw)
{
    return t->k == T_IDENT && strlen(kw) == t->n && strncasecmp(t->s, kw, t->n) == 0;
}

static int syntax_at(Parser *p, const Tok *t, const char *what)
{
    if (t->k == T_END)
        qr_error_set(p->err, QR_ESYNTAX, "filter syntax error at end of input: %s", what);
    else if (t->k == T_BAD && (t->s[0] == '\'' || t->s[0] == '"'))
        qr_error_set(p->err, QR_ESYNTAX, "unterminated quoted string in filter");
    else
        qr_error_set(p->err, QR_ESYNTAX, "filter syntax error at or near \"%.*s\": %s",
                     (int)(t->n > 40 ? 40 : t->n), t->s, what);
    return at_pos(p->err, t->pos);
}

/* Unescape a quoted token into a new string. */
static char *tok_text(const Tok *t, size_t *n_out)
{
    char *o = qr_malloc(t->n + 1);
    if (!o)
        return NULL;
    char q = t->k == T_STR ? '\'' : '"';
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++) {
        o[n++] = t->s[i];
        if (t->has_escape && t->s[i] == q)
            i++;
    }
    o[n] = 0;
    *n_out = n;
    return o;
}

/* ---- literals ---- */

typedef struct Lit {
    ColVal v;
    char *owned; /* string bytes */
} Lit;

static int number_val(Parser *p, const Tok *t, int ct, ColVal *v)
{
    char buf[64];
    if (t->n >= sizeof buf)
        return syntax_at(p, t, "number too long");
    memcpy(buf, t->s, t->n);
    buf[t->n] = 0;
    bool integral = !strpbrk(buf, ".eE") && !strpbrk(buf + 2, "xX");
    char *end;
    if (integral) {
        errno = 0;
        long long x = strtoll(buf, &end, 10);
        if (*end == 0 && errno == 0) {
            *v = col_val_int(x);
            return QR_OK;
        }
    }
    errno = 0;
    double d = strtod(buf, &end);
    if (*end != 0 || isnan(d))
        return syntax_at(p, t, "not a number");
    if (ct == QR_COL_TIMESTAMP) {
        if (!(d >= -9.2e18 && d <= 9.2e18))
            return syntax_at(p, t, "timestamp out of range");
    }
    *v = col_val_float(d);
    return QR_OK;
}

/* One literal typed by the column it is compared with. */
static int parse_lit(Parser *p, int ct, const char *fname, Lit *out)
{
    Tok t = p->tok;
    memset(out, 0, sizeof *out);
    int rc = QR_OK;
    if (t.k == T_NUM) {
        if (ct == QR_COL_KEYWORD || ct == QR_COL_BOOL) {
            qr_error_set(p->err, QR_ETYPE, "column \"%s\" is %s, not a number: quote the value",
                         fname, col_type_name((QrColType)ct));
            return at_pos(p->err, t.pos);
        }
        rc = number_val(p, &t, ct, &out->v);
    } else if (is_kw(&t, "true") || is_kw(&t, "false")) {
        if (ct != QR_COL_BOOL) {
            qr_error_set(p->err, QR_ETYPE, "column \"%s\" is %s, not bool", fname,
                         col_type_name((QrColType)ct));
            return at_pos(p->err, t.pos);
        }
        out->v = col_val_bool(is_kw(&t, "true"));
    } else if (t.k == T_STR) {
        size_t n;
        char *s = tok_text(&t, &n);
        if (!s)
            return qr_error_set(p->err, QR_ENOMEM, "out of memory");
        switch (ct) {
        case QR_COL_KEYWORD:
            out->owned = s;
            out->v = col_val_str(s, n);
            s = NULL;
            break;
        case QR_COL_TIMESTAMP: {
            int64_t us;
            if (!qr_parse_timestamp(s, n, &us)) {
                qr_error_set(p->err, QR_ETYPE, "invalid timestamp '%s' for column \"%s\"", s,
                             fname);
                qr_error_hint(p->err, "write ISO 8601, e.g. '2025-01-15' or '2025-01-15T10:00:00Z'");
                rc = at_pos(p->err, t.pos);
            } else {
                out->v = col_val_int(us);
            }
            break;
        }
        case QR_COL_BOOL:
            if (!strcasecmp(s, "true") || !strcasecmp(s, "t"))
                out->v = col_val_bool(true);
            else if (!strcasecmp(s, "false") || !strcasecmp(s, "f"))
                out->v = col_val_bool(false);
            else {
                qr_error_set(p->err, QR_ETYPE, "invalid bool '%s' for column \"%s\"", s, fname);
                rc = at_pos(p->err, t.pos);
            }
            break;
        default: {
            /* numbers in quotes are accepted, as PostgreSQL casts unknown literals */
            Tok nt = {.k = T_NUM, .s = s, .n = n, .pos = t.pos};
            QrError *e = p->err;
            if (n == 0 || n > 60 || strspn(s, "0123456789+-.eE") != n) {
                qr_error_set(e, QR_ETYPE, "invalid %s '%s' for column \"%s\"",
                             col_type_name((QrColType)ct), s, fname);
                rc = at_pos(e, t.pos);
            } else {
                rc = number_val(p, &nt, ct, &out->v);
            }
        }
        }
        qr_free(s);
    } else if (is_kw(&t, "null")) {
        qr_error_set(p->err, QR_ESYNTAX, "comparison with NULL never matches");
        qr_error_hint(p->err, "write \"%s IS NULL\" or \"%s IS NOT NULL\"", fname, fname);
        return at_pos(p->err, t.pos);
    } else {
        return syntax_at(p, &t, "expected a value");
    }
    if (rc == QR_OK)
        lex(p);
    return rc;
}

static void lit_free(Lit *l) { qr_free(l->owned); }

/* ---- grammar ---- */

static QrFilter *parse_or(Parser *p);

static QrFilter *fail_nomem(Parser *p)
{
    qr_error_set(p->err, QR_ENOMEM, "out of memory");
    return NULL;
}

static QrFilter *with_pos(QrFilter *f, int32_t pos)
{
    if (f)
        f->pos = pos;
    return f;
}

/* A multi-valued keyword takes =, <>, IN and IS [NOT] NULL (op < 0: LIKE). */
static bool multi_op_ok(Parser *p, int field, int op, int32_t pos)
{
    if (!p->schema->fields[field].multi || op == CP_EQ || op == CP_NE || op == CP_IN ||
        op == CP_IS_NULL || op == CP_IS_NOT_NULL)
        return true;
    qr_error_set(p->err, QR_ETYPE, "multi-valued keyword field \"%s\" takes =, <>, IN and IS "
                                   "NULL only", p->schema->fields[field].name);
    qr_error_detail(p->err, "it holds a list of values per document");
    at_pos(p->err, pos);
    return false;
}

static QrFilter *pred_node(Parser *p, int field, const ColPred *cp, bool negate, int32_t pos)
{
    if (!multi_op_ok(p, field, (int)cp->op, pos))
        return NULL;
    QrFilter *f = with_pos(qr_filter_pred(field, cp), pos);
    if (f)
        f->multi = p->schema->fields[field].multi;
    if (f && negate)
        f = with_pos(qr_filter_not(f), pos);
    return f ? f : fail_nomem(p);
}

static QrFilter *parse_pred(Parser *p)
{
    Tok ft = p->tok;
    char name[QR_NAME_MAX + 1];
    if (ft.k == T_QIDENT) {
        size_t n;
        char *s = tok_text(&ft, &n);
        if (!s)
            return fail_nomem(p);
        snprintf(name, sizeof name, "%s", s);
        qr_free(s);
    } else {
        snprintf(name, sizeof name, "%.*s", (int)(ft.n > QR_NAME_MAX ? QR_NAME_MAX : ft.n), ft.s);
    }
    int field = schema_field_index(p->schema, name);
    if (field < 0) {
        qr_error_set(p->err, QR_ENOTFOUND, "column \"%s\" does not exist", name);
        qr_error_set_sqlstate(p->err, "42703");
        at_pos(p->err, ft.pos);
        return NULL;
    }
    int ct = qr_filter_field_coltype(p->schema, field);
    if (ct < 0 && p->schema->fields[field].type == QR_FT_NUMERIC) {
        qr_error_set(p->err, QR_EUNSUPPORTED, "numeric field \"%s\" cannot be filtered here", name);
        qr_error_hint(p->err, "filter it in SQL (WHERE %s > 12.50)", name);
        at_pos(p->err, ft.pos);
        return NULL;
    }
    if (ct < 0) {
        qr_error_set(p->err, QR_ETYPE, "field \"%s\" is full text and has no column to filter on",
                     name);
        qr_error_hint(p->err, "search it in the query text, or declare it with \"column\": true");
        at_pos(p->err, ft.pos);
        return NULL;
    }
    lex(p);
    Tok op = p->tok;
    ColPred cp;
    memset(&cp, 0, sizeof cp);
    Lit a, b;
    bool negate = false;
    if (op.k >= T_EQ && op.k <= T_GE) {
        static const ColPredOp map[] = {CP_EQ, CP_NE, CP_LT, CP_LE, CP_GT, CP_GE};
        cp.op = map[op.k - T_EQ];
        lex(p);
        if (parse_lit(p, ct, name, &a) != QR_OK)
            return NULL;
        cp.v = a.v;
        QrFilter *f = pred_node(p, field, &cp, false, ft.pos);
        lit_free(&a);
        return f;
    }
    if (is_kw(&op, "is")) {
        lex(p);
        if (is_kw(&p->tok, "not")) {
            negate = true;
            lex(p);
        }
        if (!is_kw(&p->tok, "null")) {
            syntax_at(p, &p->tok, "expected NULL after IS");
            return NULL;
        }
        lex(p);
        cp.op = negate ? CP_IS_NOT_NULL : CP_IS_NULL;
        return pred_node(p, field, &cp, false, ft.pos);
    }
    if (ct == QR_COL_BOOL && (op.k == T_END || op.k == T_RP || is_kw(&op, "and") ||
                              is_kw(&op, "or"))) {
        cp.op = CP_EQ; /* a bare boolean column */
        cp.v = col_val_bool(true);
        return pred_node(p, field, &cp, false, ft.pos);
    }
    if (is_kw(&op, "not")) {
        negate = true;
        lex(p);
    }
    if (is_kw(&p->tok, "between")) {
        lex(p);
        if (parse_lit(p, ct, name, &a) != QR_OK)
            return NULL;
        if (!is_kw(&p->tok, "and")) {
            lit_free(&a);
            syntax_at(p, &p->tok, "expected AND in BETWEEN");
            return NULL;
        }
        lex(p);
        if (parse_lit(p, ct, name, &b) != QR_OK) {
            lit_free(&a);
            return NULL;
        }
        cp.op = CP_BETWEEN;
        cp.v = a.v;
        cp.hi = b.v;
        QrFilter *f = pred_node(p, field, &cp, negate, ft.pos);
        lit_free(&a);
        lit_free(&b);
        return f;
    }
    if (is_kw(&p->tok, "in")) {
        lex(p);
        if (p->tok.k != T_LP) {
            syntax_at(p, &p->tok, "expected ( after IN");
            return NULL;
        }
        lex(p);
        size_t n = 0, cap = 8;
        Lit *v = qr_malloc(cap * sizeof *v);
        ColVal *cv = NULL;
        QrFilter *f = NULL;
        if (!v)
            return fail_nomem(p);
        for (;;) {
            if (n == cap) {
                Lit *nv = qr_realloc(v, cap * 2 * sizeof *nv);
                if (!nv) {
                    fail_nomem(p);
                    goto in_done;
                }
                v = nv;
                cap *= 2;
            }
            if (parse_lit(p, ct, name, &v[n]) != QR_OK)
                goto in_done;
            n++;
            if (p->tok.k == T_COMMA) {
                lex(p);
                continue;
            }
            if (p->tok.k == T_RP) {
                lex(p);
                break;
            }
            syntax_at(p, &p->tok, "expected , or ) in the IN list");
            goto in_done;
        }
        cv = qr_malloc(n * sizeof *cv);
        if (!cv) {
            fail_nomem(p);
            goto in_done;
        }
        for (size_t i = 0; i < n; i++)
            cv[i] = v[i].v;
        cp.op = CP_IN;
        cp.set = cv;
        cp.n_set = n;
        f = pred_node(p, field, &cp, negate, ft.pos);
    in_done:
        for (size_t i = 0; i < n; i++)
            lit_free(&v[i]);
        qr_free(v);
        qr_free(cv);
        return f;
    }
    if (is_kw(&p->tok, "like")) {
        if (!multi_op_ok(p, field, -1, ft.pos))
            return NULL;
        if (ct != QR_COL_KEYWORD) {
            qr_error_set(p->err, QR_ETYPE, "LIKE needs a keyword column, \"%s\" is %s", name,
                         col_type_name((QrColType)ct));
            at_pos(p->err, p->tok.pos);
            return NULL;
        }
        lex(p);
        if (p->tok.k != T_STR) {
            syntax_at(p, &p->tok, "expected a quoted pattern after LIKE");
            return NULL;
        }
        size_t n;
        char *s = tok_text(&p->tok, &n);
        if (!s)
            return fail_nomem(p);
        lex(p);
        QrFilter *f = with_pos(qr_filter_like(field, s, n), ft.pos);
        qr_free(s);
        if (f && negate)
            f = with_pos(qr_filter_not(f), ft.pos);
        return f ? f : fail_nomem(p);
    }
    syntax_at(p, &p->tok,
              negate ? "expected BETWEEN, IN or LIKE after NOT"
                     : "expected a comparison (=, !=, <, <=, >, >=, BETWEEN, IN, IS, LIKE)");
    return NULL;
}

static QrFilter *parse_unary(Parser *p)
{
    if (++p->depth > 200) {
        qr_error_set(p->err, QR_ELIMIT, "filter nested too deeply");
        at_pos(p->err, p->tok.pos);
        return NULL;
    }
    QrFilter *f = NULL;
    Tok t = p->tok;
    if (is_kw(&t, "not")) {
        lex(p);
        QrFilter *k = parse_unary(p);
        f = k ? with_pos(qr_filter_not(k), t.pos) : NULL;
        if (k && !f)
            fail_nomem(p);
    } else if (t.k == T_LP) {
        lex(p);
        f = parse_or(p);
        if (f && p->tok.k != T_RP) {
            syntax_at(p, &p->tok, "expected )");
            qr_filter_free(f);
            f = NULL;
        } else if (f) {
            lex(p);
        }
    } else if (is_kw(&t, "true") || is_kw(&t, "false")) {
        lex(p);
        f = with_pos(is_kw(&t, "true") ? qr_filter_true() : qr_filter_false(), t.pos);
        if (!f)
            fail_nomem(p);
    } else if (t.k == T_QIDENT ||
               (t.k == T_IDENT && !is_kw(&t, "and") && !is_kw(&t, "or"))) {
        f = parse_pred(p);
    } else {
        syntax_at(p, &t, "expected a condition");
    }
    p->depth--;
    return f;
}

static QrFilter *parse_chain(Parser *p, bool is_or)
{
    QrFilter *stackv[16];
    QrFilter **v = stackv;
    int n = 0, cap = 16;
    int32_t pos = p->tok.pos;
    for (;;) {
        QrFilter *k = is_or ? parse_chain(p, false) : parse_unary(p);
        if (!k)
            goto fail;
        if (n == cap) {
            QrFilter **nv = qr_malloc((size_t)cap * 2 * sizeof *nv);
            if (!nv) {
                qr_filter_free(k);
                fail_nomem(p);
                goto fail;
            }
            memcpy(nv, v, (size_t)n * sizeof *v);
            if (v != stackv)
                qr_free(v);
            v = nv;
            cap *= 2;
        }
        v[n++] = k;
        if (!is_kw(&p->tok, is_or ? "or" : "and"))
            break;
        lex(p);
    }
    QrFilter *f = n == 1 ? v[0] : with_pos(combine(is_or ? QF_OR : QF_AND, v, n), pos);
    if (!f)
        fail_nomem(p);
    if (v != stackv)
        qr_free(v);
    return f;
fail:
    for (int i = 0; i < n; i++)
        qr_filter_free(v[i]);
    if (v != stackv)
        qr_free(v);
    return NULL;
}

static QrFilter *parse_or(Parser *p) { return parse_chain(p, true); }

int qr_filter_parse(const QrSchema *schema, const char *text, size_t len, QrFilter **out,
                    QrError *err)
{
    QrError local;
    qr_error_clear(&local);
    if (len > (1u << 20))
        return qr_error_set(err, QR_ELIMIT, "filter text is too long (at most 1 MiB)");
    Parser P = {.schema = schema, .src = text ? text : "", .len = text ? len : 0, .err = &local};
    lex(&P);
    if (P.tok.k == T_END) {
        qr_error_set(&local, QR_ESYNTAX, "empty filter");
        at_pos(&local, 0);
        qr_error_copy(err, &local);
        return QR_ESYNTAX;
    }
    QrFilter *f = parse_or(&P);
    if (f && P.tok.k != T_END) {
        syntax_at(&P, &P.tok, P.tok.k == T_RP ? "unbalanced )" : "expected AND, OR or the end");
        qr_filter_free(f);
        f = NULL;
    }
    if (!f) {
        if (local.code == QR_OK)
            qr_error_set(&local, QR_ENOMEM, "out of memory");
        qr_error_copy(err, &local);
        return local.code;
    }
    *out = f;
    return QR_OK;
}

/* ---- printing ---- */

static void put_val(QrBuf *o, const ColVal *v, int ct)
{
    char tmp[64];
    switch (v->kind) {
    case CV_INT:
        if (ct == QR_COL_TIMESTAMP) {
            qr_format_timestamp(v->u.i, tmp, sizeof tmp);
            qr_buf_printf(o, "'%s'", tmp);
        } else {
            qr_buf_printf(o, "%lld", (long long)v->u.i);
        }
        break;
    case CV_FLOAT:
        if (isinf(v->u.f))
            qr_buf_printf(o, "%s", v->u.f > 0 ? "1e999" : "-1e999");
        else
            qr_buf_printf(o, "%.17g", v->u.f);
        break;
    case CV_BOOL: qr_buf_printf(o, "%s", v->u.b ? "TRUE" : "FALSE"); break;
    case CV_STR:
        qr_buf_printf(o, "'");
        for (size_t i = 0; i < v->u.str.n; i++) {
            char c = v->u.str.s[i];
            qr_buf_append(o, &c, 1);
            if (c == '\'')
                qr_buf_append(o, &c, 1);
        }
        qr_buf_printf(o, "'");
        break;
    }
}

int qr_filter_to_text(const QrFilter *f, const QrSchema *schema, QrBuf *o)
{
    static const char *ops[] = {"=", "!=", "<", "<=", ">", ">="};
    const char *name = (f->kind == QF_PRED || f->kind == QF_LIKE) && f->field >= 0 &&
                               f->field < schema->n_fields
                           ? schema->fields[f->field].name
                           : "?";
    int ct = (f->kind == QF_PRED || f->kind == QF_LIKE) ? qr_filter_field_coltype(schema, f->field)
                                                        : -1;
    switch (f->kind) {
    case QF_TRUE: qr_buf_printf(o, "TRUE"); break;
    case QF_FALSE: qr_buf_printf(o, "FALSE"); break;
    case QF_NOT:
        qr_buf_printf(o, "NOT (");
        qr_filter_to_text(f->kids[0], schema, o);
        qr_buf_printf(o, ")");
        break;
    case QF_AND:
    case QF_OR:
        for (int i = 0; i < f->n_kids; i++) {
            if (i)
                qr_buf_printf(o, f->kind == QF_AND ? " AND " : " OR ");
            qr_buf_printf(o, "(");
            qr_filter_to_text(f->kids[i], schema, o);
            qr_buf_printf(o, ")");
        }
        break;
    case QF_LIKE: {
        qr_buf_printf(o, "\"%s\" LIKE ", name);
        ColVal v = col_val_str(f->pattern, f->pattern_len);
        put_val(o, &v, QR_COL_KEYWORD);
        break;
    }
    case QF_PRED: {
        const ColPred *p = &f->pred;
        qr_buf_printf(o, "\"%s\" ", name);
        switch (p->op) {
        case CP_IS_NULL: qr_buf_printf(o, "IS NULL"); break;
        case CP_IS_NOT_NULL: qr_buf_printf(o, "IS NOT NULL"); break;
        case CP_BETWEEN:
            qr_buf_printf(o, "BETWEEN ");
            put_val(o, &p->v, ct);
            qr_buf_printf(o, " AND ");
            put_val(o, &p->hi, ct);
            break;
        case CP_IN:
            if (p->n_set == 0) {
                /* IN () cannot be written; this is FALSE on values and
                 * UNKNOWN on NULL, as an empty IN is (NOT flips only values) */
                const char *z = ct == QR_COL_KEYWORD ? "''" : ct == QR_COL_BOOL ? "TRUE" : "0";
                qr_buf_printf(o, "= %s AND \"%s\" <> %s", z, name, z);
                break;
            }
            qr_buf_printf(o, "IN (");
            for (size_t i = 0; i < p->n_set; i++) {
                if (i)
                    qr_buf_printf(o, ", ");
                put_val(o, &p->set[i], ct);
            }
            qr_buf_printf(o, ")");
            break;
        case CP_PREFIX: {
            qr_buf_printf(o, "LIKE ");
            /* (a prefix holding % or _ prints as a pattern with wildcards: the
             * parser never builds one, API callers get an approximate text) */
            ColVal v = p->v;
            QrBuf tmp;
            qr_buf_init(&tmp);
            qr_buf_append(&tmp, v.u.str.s, v.u.str.n);
            qr_buf_append(&tmp, "%", 1);
            v.u.str.s = (const char *)tmp.data;
            v.u.str.n = tmp.len;
            put_val(o, &v, ct);
            qr_buf_free(&tmp);
            break;
        }
        default:
            qr_buf_printf(o, "%s ", ops[p->op]);
            put_val(o, &p->v, ct);
        }
        break;
    }
    }
    return QR_OK;
}

const char *qr_access_path_name(QrAccessPath p)
{
    switch (p) {
    case QR_ACCESS_AUTO: return "auto";
    case QR_ACCESS_SCAN: return "scan";
    case QR_ACCESS_CHECK: return "check";
    case QR_ACCESS_BTREE: return "btree";
    }
    return "?";
}

int qr_access_path_parse(const char *name)
{
    static const char *names[] = {"auto", "scan", "check", "btree"};
    for (int i = 0; i < 4; i++)
        if (name && !strcasecmp(name, names[i]))
            return i;
    return -1;
}
