/*
 * bind_semi.c — subqueries in WHERE that PostgreSQL plans as joins:
 * `x IN (SELECT y ...)` (uncorrelated, or correlated on equalities),
 * `EXISTS (SELECT ... WHERE inner = outer AND ...)` and its NOT EXISTS
 * become semi / anti joins (plan.h SqlSemiJoin) instead of a subquery
 * run per row: the subquery, stripped of its correlated equalities, yields
 * the inner side of each key once per execution, and the join hashes it.
 *
 * Only what stays exact is moved: a top-level WHERE conjunct (not under
 * OR / NOT, except NOT EXISTS), a subquery without aggregates, LIMIT or
 * set-returning functions, whose every reference to the outer query is
 * the outer side of one of those equalities, with keys of one type class
 * on both sides.  `x NOT IN (SELECT ...)` stays a subquery, as in
 * PostgreSQL: its answer is NULL, not true, when the subquery yields a
 * NULL, which an anti join cannot say.
 *
 * Layer: query/ (SQL).  Reads bound expressions; calls sql_expr.c for the
 * subqueries' bound queries.
 */
#include "query/plan/plan_int.h"

#include <string.h>

/* Type classes an equality key may join across (sqlv_cmp / sqlv_hash agree
 * within a class). */
static int type_class(QrSqlType t)
{
    if (t == QR_SQL_BOOL)
        return 1;
    if (sqlt_is_num(t))
        return 2;
    if (sqlt_is_str(t))
        return 3;
    if (sqlt_is_ts(t))
        return 4;
    return 100 + (int)t;
}

/* Occurrences of a column of the enclosing query (SE_OUTER one level out)
 * in e; *own: whether e reads anything of the subquery's own rows. */
static int outer_refs(const SqlExpr *e, bool *own)
{
    int n = 0;
    switch (e->kind) {
    case SE_OUTER:
        n += e->op == 1;
        break;
    case SE_COL:
    case SE_SCORE:
    case SE_SNIPPET:
    case SE_MATCH:
    case SE_AGG:
    case SE_SUBQ:
    case SE_IN_SET:
    case SE_SRF:
        *own = true;
        break;
    default:
        break;
    }
    if (e->kind == SE_FUNC && !e->fn)
        *own = true; /* a catalog function: leave it where it is */
    for (int i = 0; i < e->n_args; i++)
        n += outer_refs(e->args[i], own);
    return n;
}

/* A copy of an outer-side expression in the enclosing query's terms: its
 * columns one level out become its own. */
static SqlExpr *lift(SqlCtx *cx, const SqlExpr *e)
{
    SqlExpr *x = qr_arena_alloc(cx->arena, sizeof *x);
    if (!x)
        return NULL;
    *x = *e;
    if (e->kind == SE_OUTER) {
        if (e->op == 1)
            x->kind = SE_COL;
        else
            x->op = e->op - 1;
    }
    if (e->n_args) {
        if (!(x->args = qr_arena_alloc(cx->arena, (size_t)e->n_args * sizeof *x->args)))
            return NULL;
        for (int i = 0; i < e->n_args; i++)
            if (!(x->args[i] = lift(cx, e->args[i])))
                return NULL;
    }
    return x;
}

typedef struct SemiBuild {
    SqlExpr *okeys[SQL_JOIN_MAX_KEYS];   /* outer sides, still in the subquery's terms */
    SqlExpr *ikeys[SQL_JOIN_MAX_KEYS];
    bool lifted[SQL_JOIN_MAX_KEYS];      /* okeys[i] is already in the outer query's terms */
    int n_keys;
    SqlExpr **rest;                      /* the subquery's other conjuncts */
    int n_rest;
} SemiBuild;

static bool add_key(SemiBuild *b, SqlExpr *o, SqlExpr *i, bool lifted)
{
    if (b->n_keys == SQL_JOIN_MAX_KEYS || type_class(o->type) != type_class(i->type))
        return false;
    b->okeys[b->n_keys] = o;
    b->ikeys[b->n_keys] = i;
    b->lifted[b->n_keys++] = lifted;
    return true;
}

/* Split the subquery's WHERE into keys (inner = outer) and the rest; false
 * when a conjunct reads the outer query otherwise, or when some reference
 * to the outer query is not a key's (refs_here counts them all). */
static bool split_where(SqlCtx *cx, const SqlQuery *q, int refs_here, SemiBuild *b)
{
    int seen = 0;
    if (!(b->rest = qr_arena_alloc(cx->arena, ((size_t)q->n_conj + 1) * sizeof *b->rest)))
        return false;
    for (int i = 0; i < q->n_conj; i++) {
        SqlExpr *c = q->conj[i];
        bool own = false;
        if (outer_refs(c, &own) == 0) {
            b->rest[b->n_rest++] = c;
            continue;
        }
        if (c->kind != SE_CMP || c->op != SQL_CMP_EQ || c->n_args != 2)
            return false;
        bool own0 = false, own1 = false;
        int r0 = outer_refs(c->args[0], &own0), r1 = outer_refs(c->args[1], &own1);
        SqlExpr *o, *in;
        if (r0 && !own0 && !r1 && own1) {
            o = c->args[0];
            in = c->args[1];
        } else if (r1 && !own1 && !r0 && own0) {
            o = c->args[1];
            in = c->args[0];
        } else {
            return false;
        }
        if (!add_key(b, o, in, false))
            return false;
        seen += r0 + r1;
    }
    return seen == refs_here;
}

/* The subquery stripped for the join: its other conjuncts, its keys'
 * inner sides as its output, no ORDER BY. */
static SqlQuery *inner_query(SqlCtx *cx, const SqlQuery *q, const SemiBuild *b)
{
    SqlQuery *d = qr_arena_alloc(cx->arena, sizeof *d);
    SqlTarget *tg = qr_arena_calloc(cx->arena, ((size_t)b->n_keys + 1) * sizeof *tg);
    QrSqlColumn *cols = qr_arena_calloc(cx->arena, ((size_t)b->n_keys + 1) * sizeof *cols);
    if (!d || !tg || !cols)
        return NULL;
    *d = *q;
    for (int i = 0; i < b->n_keys; i++) {
        tg[i] = (SqlTarget){b->ikeys[i], "key", b->ikeys[i]->kind == SE_COL ? b->ikeys[i]->col : -1};
        cols[i] = (QrSqlColumn){.name = "key", .type = b->ikeys[i]->type, .typmod = -1};
    }
    d->conj = b->rest;
    d->n_conj = b->n_rest;
    d->tg = tg;
    d->n_tg = d->n_cols = b->n_keys;
    d->cols = cols;
    d->n_sort = d->n_extra = 0;
    d->distinct = false;
    return d;
}

/* One WHERE conjunct as a semi / anti join, when it can be one. */
static int try_semi(SqlQuery *s, SqlExpr *c, bool *moved)
{
    SqlCtx *cx = s->cx;
    bool anti = false;
    *moved = false;
    if (c->kind == SE_NOT && c->args[0]->kind == SE_SUBQ) {
        anti = true;
        c = c->args[0];
    }
    if (c->kind != SE_SUBQ && !(c->kind == SE_IN_SET && !(c->op & 1) && !anti))
        return QR_OK;
    SqlSubqInfo info;
    sql_subq_info(c->subq, &info);
    SqlQuery *q = info.query;
    SemiBuild b;
    memset(&b, 0, sizeof b);
    SqlQuery *inner = q;
    if (c->kind == SE_IN_SET) {
        /* x IN (uncorrelated): the subquery's rows are the keys */
        SqlExpr *y = q->kind == SQL_Q_SELECT ? q->tg[0].e : NULL;
        if (type_class(c->args[0]->type) != type_class(q->cols[0].type))
            return QR_OK;
        b.okeys[0] = c->args[0];
        b.ikeys[0] = y;
        b.lifted[0] = true;
        b.n_keys = 1;
    } else {
        bool is_any = info.kind == 'a';
        if ((info.kind != 'e' && !(is_any && !anti)) || info.refs_far || q->kind != SQL_Q_SELECT ||
            q->grouped || q->has_srf || q->limit || q->offset)
            return QR_OK;
        if (is_any && !add_key(&b, c->args[c->n_args - 1], q->tg[0].e, true))
            return QR_OK;
        if (!split_where(cx, q, info.refs_here, &b) || b.n_keys == 0)
            return QR_OK;
        if (!(inner = inner_query(cx, q, &b)))
            return sql_nomem(cx);
    }
    SqlSemiJoin *sj;
    SqlSemiJoin *ns = qr_arena_alloc(cx->arena, ((size_t)s->n_semis + 1) * sizeof *ns);
    SqlExpr **ok = qr_arena_alloc(cx->arena, (size_t)b.n_keys * sizeof *ok);
    SqlExpr **ik = qr_arena_alloc(cx->arena, (size_t)b.n_keys * sizeof *ik);
    if (!ns || !ok || !ik)
        return sql_nomem(cx);
    if (s->n_semis)
        memcpy(ns, s->semis, (size_t)s->n_semis * sizeof *ns);
    for (int i = 0; i < b.n_keys; i++) {
        ok[i] = b.lifted[i] ? b.okeys[i] : lift(cx, b.okeys[i]);
        ik[i] = b.ikeys[i];
        if (!ok[i])
            return sql_nomem(cx);
    }
    sj = &ns[s->n_semis];
    *sj = (SqlSemiJoin){anti, inner, ok, ik, b.n_keys};
    s->semis = ns;
    s->n_semis++;
    *moved = true;
    return QR_OK;
}

int sql_bind_semis(SqlQuery *s)
{
    int k = 0;
    for (int i = 0; i < s->n_conj; i++) {
        bool moved;
        int rc = try_semi(s, s->conj[i], &moved);
        if (rc)
            return rc;
        if (!moved)
            s->conj[k++] = s->conj[i];
    }
    s->n_conj = k;
    return QR_OK;
}
