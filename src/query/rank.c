/*
 * rank.c — ranking expressions (rank.h): a recursive-descent parser into a
 * small node array, evaluation per document, and interval bounds.
 *
 * Layer: query/.  Calls store/schema.h and the base kit.
 *
 * Nodes are kept in an array in post order of construction; each refers to
 * its arguments by index, so evaluation is a recursion over at most
 * RANK_MAX_NODES nodes (the parser bounds nesting by the same count).
 */
#include "query/rank.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum RankOp {
    RK_NUM, RK_SCORE, RK_FIELD, RK_NEG, RK_ADD, RK_SUB, RK_MUL, RK_DIV,
    RK_LOG, RK_LOG10, RK_LOG1P, RK_SQRT, RK_EXP, RK_ABS, RK_MIN, RK_MAX,
} RankOp;

typedef struct RankNode {
    RankOp op;
    int a, b;        /* argument node indexes (-1 none) */
    double num;      /* RK_NUM */
    int slot;        /* RK_FIELD: index into fields[] */
} RankNode;

struct RankExpr {
    RankNode nodes[RANK_MAX_NODES];
    int n_nodes, root;
    int fields[RANK_MAX_FIELDS]; /* schema field indexes */
    int n_fields;
    bool uses_score;
};

static const struct {
    const char *name;
    RankOp op;
    int n_args;
} FUNCS[] = {{"log", RK_LOG, 1},   {"ln", RK_LOG, 1},    {"log10", RK_LOG10, 1},
             {"log1p", RK_LOG1P, 1}, {"sqrt", RK_SQRT, 1}, {"exp", RK_EXP, 1},
             {"abs", RK_ABS, 1},   {"min", RK_MIN, 2},   {"max", RK_MAX, 2}};

typedef struct Parser {
    const QrSchema *schema;
    const char *text, *p;
    RankExpr *e;
    QrError *err;
    int depth;
} Parser;

static int perr(Parser *ps, int code, const char *msg, const char *at)
{
    if (ps->err->code != QR_OK)
        return -1;
    qr_error_set(ps->err, code, "%s", msg);
    ps->err->offset = (int)(at - ps->text);
    return -1;
}

static void skip_ws(Parser *ps)
{
    while (*ps->p && isspace((unsigned char)*ps->p))
        ps->p++;
}

static int node(Parser *ps, RankOp op, int a, int b)
{
    RankExpr *e = ps->e;
    if (a < 0 || (b < 0 && (op == RK_ADD || op == RK_SUB || op == RK_MUL || op == RK_DIV ||
                            op == RK_MIN || op == RK_MAX)))
        return -1;
    if (e->n_nodes == RANK_MAX_NODES)
        return perr(ps, QR_ELIMIT, "rank expression is too long", ps->p);
    e->nodes[e->n_nodes] = (RankNode){.op = op, .a = a, .b = b, .slot = -1};
    return e->n_nodes++;
}

static int parse_expr(Parser *ps);

static int parse_primary(Parser *ps)
{
    skip_ws(ps);
    const char *at = ps->p;
    char c = *ps->p;
    if (c == '(') {
        ps->p++;
        int n = parse_expr(ps);
        skip_ws(ps);
        if (n < 0)
            return -1;
        if (*ps->p != ')')
            return perr(ps, QR_ESYNTAX, "\")\" expected in rank expression", ps->p);
        ps->p++;
        return n;
    }
    if (isdigit((unsigned char)c) || c == '.') {
        char *end;
        double v = strtod(ps->p, &end);
        if (end == ps->p || !isfinite(v))
            return perr(ps, QR_ESYNTAX, "bad number in rank expression", at);
        ps->p = end;
        int n = node(ps, RK_NUM, 0, -1);
        if (n >= 0)
            ps->e->nodes[n].num = v;
        return n;
    }
    if (!isalpha((unsigned char)c) && c != '_')
        return perr(ps, QR_ESYNTAX, *ps->p ? "unexpected character in rank expression"
                                           : "rank expression ends too early", at);
    const char *s = ps->p;
    while (isalnum((unsigned char)*ps->p) || *ps->p == '_')
        ps->p++;
    size_t len = (size_t)(ps->p - s);
    char name[QR_NAME_MAX + 1];
    if (len > QR_NAME_MAX)
        return perr(ps, QR_ESYNTAX, "name too long in rank expression", at);
    memcpy(name, s, len);
    name[len] = 0;
    skip_ws(ps);
    if (*ps->p == '(') {
        for (size_t f = 0; f < sizeof FUNCS / sizeof FUNCS[0]; f++) {
            if (strcasecmp(FUNCS[f].name, name))
                continue;
            ps->p++;
            int a = parse_expr(ps), b = -1;
            skip_ws(ps);
            if (a >= 0 && FUNCS[f].n_args == 2) {
                if (*ps->p != ',')
                    return perr(ps, QR_ESYNTAX, "this function takes two arguments", ps->p);
                ps->p++;
                b = parse_expr(ps);
                skip_ws(ps);
            }
            if (a < 0 || (FUNCS[f].n_args == 2 && b < 0))
                return -1;
            if (*ps->p != ')')
                return perr(ps, QR_ESYNTAX, "\")\" expected after the function's arguments",
                            ps->p);
            ps->p++;
            return node(ps, FUNCS[f].op, a, b);
        }
        qr_error_set(ps->err, QR_ESYNTAX, "unknown function \"%s\" in rank expression", name);
        qr_error_hint(ps->err, "functions: log, log10, log1p, sqrt, exp, abs, min, max");
        ps->err->offset = (int)(at - ps->text);
        return -1;
    }
    if (!strcasecmp(name, "score") || !strcasecmp(name, "_score")) {
        ps->e->uses_score = true;
        return node(ps, RK_SCORE, 0, -1);
    }
    int fi = schema_field_index(ps->schema, name);
    if (fi < 0) {
        qr_error_set(ps->err, QR_ENOTFOUND, "field \"%s\" of the rank expression does not exist",
                     name);
        ps->err->offset = (int)(at - ps->text);
        return -1;
    }
    QrFieldType ft = ps->schema->fields[fi].type;
    if (ft != QR_FT_INT && ft != QR_FT_FLOAT && ft != QR_FT_BOOL && ft != QR_FT_TIMESTAMP) {
        qr_error_set(ps->err, QR_ETYPE, "rank expression field \"%s\" is not numeric", name);
        qr_error_hint(ps->err, "rank by int, float, bool or timestamp fields");
        ps->err->offset = (int)(at - ps->text);
        return -1;
    }
    RankExpr *e = ps->e;
    int slot = -1;
    for (int i = 0; i < e->n_fields; i++)
        if (e->fields[i] == fi)
            slot = i;
    if (slot < 0) {
        if (e->n_fields == RANK_MAX_FIELDS)
            return perr(ps, QR_ELIMIT, "a rank expression reads at most 8 fields", at);
        slot = e->n_fields;
        e->fields[e->n_fields++] = fi;
    }
    int n = node(ps, RK_FIELD, 0, -1);
    if (n >= 0)
        e->nodes[n].slot = slot;
    return n;
}

static int parse_unary(Parser *ps)
{
    skip_ws(ps);
    if (++ps->depth > RANK_MAX_NODES)
        return perr(ps, QR_ELIMIT, "rank expression is nested too deeply", ps->p);
    int n;
    if (*ps->p == '-') {
        ps->p++;
        n = node(ps, RK_NEG, parse_unary(ps), -1);
    } else if (*ps->p == '+') {
        ps->p++;
        n = parse_unary(ps);
    } else {
        n = parse_primary(ps);
    }
    ps->depth--;
    return n;
}

static int parse_term(Parser *ps)
{
    int n = parse_unary(ps);
    for (;;) {
        skip_ws(ps);
        char c = *ps->p;
        if (n < 0 || (c != '*' && c != '/'))
            return n;
        ps->p++;
        n = node(ps, c == '*' ? RK_MUL : RK_DIV, n, parse_unary(ps));
    }
}

static int parse_expr(Parser *ps)
{
    int n = parse_term(ps);
    for (;;) {
        skip_ws(ps);
        char c = *ps->p;
        if (n < 0 || (c != '+' && c != '-'))
            return n;
        ps->p++;
        n = node(ps, c == '+' ? RK_ADD : RK_SUB, n, parse_term(ps));
    }
}

int rank_parse(const QrSchema *schema, const char *text, QrArena *arena, RankExpr **out,
               QrError *err)
{
    *out = NULL;
    RankExpr *e = qr_arena_calloc(arena, sizeof *e);
    if (!e)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    Parser ps = {.schema = schema, .text = text, .p = text, .e = e, .err = err};
    e->root = parse_expr(&ps);
    skip_ws(&ps);
    if (e->root >= 0 && *ps.p)
        perr(&ps, QR_ESYNTAX, "unexpected text after the rank expression", ps.p);
    if (e->root < 0 || err->code != QR_OK) {
        if (err->code == QR_OK)
            perr(&ps, QR_ESYNTAX, "bad rank expression", ps.p);
        return err->code;
    }
    *out = e;
    return QR_OK;
}

int rank_n_fields(const RankExpr *e) { return e->n_fields; }
int rank_field(const RankExpr *e, int i) { return e->fields[i]; }
bool rank_uses_score(const RankExpr *e) { return e->uses_score; }

static double eval(const RankExpr *e, int i, double score, const double *vals)
{
    const RankNode *n = &e->nodes[i];
    switch (n->op) {
    case RK_NUM: return n->num;
    case RK_SCORE: return score;
    case RK_FIELD: return vals[n->slot];
    default: break;
    }
    double a = eval(e, n->a, score, vals);
    double b = n->b >= 0 ? eval(e, n->b, score, vals) : 0;
    switch (n->op) {
    case RK_NEG: return -a;
    case RK_ADD: return a + b;
    case RK_SUB: return a - b;
    case RK_MUL: return a * b;
    case RK_DIV: return a / b;
    case RK_LOG: return log(a);
    case RK_LOG10: return log10(a);
    case RK_LOG1P: return log1p(a);
    case RK_SQRT: return sqrt(a);
    case RK_EXP: return exp(a);
    case RK_ABS: return fabs(a);
    case RK_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b; /* NaN ranks last */
    case RK_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    default: return NAN;
    }
}

double rank_eval(const RankExpr *e, double score, const double *vals)
{
    double v = eval(e, e->root, score, vals);
    return isnan(v) || v == -INFINITY ? -INFINITY : v;
}

/* ---- intervals ---- */

typedef struct Iv {
    double lo, hi;
} Iv;

static const Iv IV_ALL = {-INFINITY, INFINITY};

static Iv iv_fix(Iv r) { return isnan(r.lo) || isnan(r.hi) ? IV_ALL : r; }

static Iv iv_mul(Iv a, Iv b)
{
    double p[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
    Iv r = {p[0], p[0]};
    for (int i = 0; i < 4; i++) {
        if (isnan(p[i]))
            return IV_ALL; /* 0 * inf: say nothing */
        r.lo = p[i] < r.lo ? p[i] : r.lo;
        r.hi = p[i] > r.hi ? p[i] : r.hi;
    }
    return r;
}

/* A monotone non-decreasing function f over [lo, hi] whose domain starts
 * at `from` (NaN below it: those values rank last, so only hi matters). */
static Iv iv_mono(double (*f)(double), Iv a, double from)
{
    if (a.hi < from)
        return (Iv){-INFINITY, -INFINITY}; /* every value is NaN: ranks last */
    return iv_fix((Iv){a.lo < from ? -INFINITY : f(a.lo), f(a.hi)});
}

static Iv bound(const RankExpr *e, int i, Iv s, const Iv *f)
{
    const RankNode *n = &e->nodes[i];
    switch (n->op) {
    case RK_NUM: return (Iv){n->num, n->num};
    case RK_SCORE: return s;
    case RK_FIELD: return f[n->slot];
    default: break;
    }
    Iv a = bound(e, n->a, s, f);
    Iv b = n->b >= 0 ? bound(e, n->b, s, f) : a;
    switch (n->op) {
    case RK_NEG: return (Iv){-a.hi, -a.lo};
    case RK_ADD: return iv_fix((Iv){a.lo + b.lo, a.hi + b.hi});
    case RK_SUB: return iv_fix((Iv){a.lo - b.hi, a.hi - b.lo});
    case RK_MUL: return iv_mul(a, b);
    case RK_DIV:
        if (b.lo <= 0 && b.hi >= 0)
            return IV_ALL;
        return iv_mul(a, (Iv){1 / b.hi, 1 / b.lo}) /* 1/x decreasing on one sign */;
    case RK_LOG: return iv_mono(log, a, 0);
    case RK_LOG10: return iv_mono(log10, a, 0);
    case RK_LOG1P: return iv_mono(log1p, a, -1);
    case RK_SQRT: return iv_mono(sqrt, a, 0);
    case RK_EXP: return iv_mono(exp, a, -INFINITY);
    case RK_ABS:
        if (a.lo >= 0)
            return a;
        if (a.hi <= 0)
            return (Iv){-a.hi, -a.lo};
        return (Iv){0, -a.lo > a.hi ? -a.lo : a.hi};
    case RK_MIN: return (Iv){a.lo < b.lo ? a.lo : b.lo, a.hi < b.hi ? a.hi : b.hi};
    case RK_MAX: return (Iv){a.lo > b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi};
    default: return IV_ALL;
    }
}

void rank_bound(const RankExpr *e, double s_lo, double s_hi, const double *lo, const double *hi,
                double *out_lo, double *out_hi)
{
    Iv f[RANK_MAX_FIELDS];
    for (int i = 0; i < e->n_fields; i++)
        f[i] = (Iv){lo[i], hi[i]};
    Iv r = bound(e, e->root, (Iv){s_lo, s_hi}, f);
    *out_lo = r.lo;
    *out_hi = r.hi;
}
