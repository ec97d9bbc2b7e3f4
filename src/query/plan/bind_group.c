/*
 * bind_group.c — GROUP BY with grouping sets (GROUPING SETS, ROLLUP, CUBE,
 * the empty set `()`) and GROUPING(...), bound as PostgreSQL does:
 *
 * - Each GROUP BY item stands for a list of grouping sets: a plain
 *   expression (or a parenthesized row of them) for one set, ROLLUP(a, b)
 *   for {a, b}, {a}, {}, CUBE(a, b) for every subset, GROUPING SETS (...)
 *   for the concatenation of its items' lists (nesting allowed), () for
 *   the empty set.  The query's sets are the cross product of its items'
 *   lists, repeated sets kept (they give repeated rows) unless GROUP BY
 *   DISTINCT.  At most 4096 sets (54001), CUBE of at most 12 (54011).
 * - Every distinct key expression is one group key (at most 64 with
 *   grouping sets); a set is a bit mask over them (SqlQuery.sets), which
 *   the hash aggregate (exec/op_hash_agg.c) reads.
 * - Above the aggregate, a grouped expression means its key in the row's
 *   set and NULL outside it: with grouping sets, every expression equal to
 *   a key in the select list, HAVING, ORDER BY and the windows is read
 *   through an SA_GROUP_KEY aggregate (the hash aggregate fills it), so
 *   GROUPING SETS ((a), (a + 1)) shows `a` NULL in the second set while
 *   `a + 1` has its value.
 * - GROUPING(a, b, ...) is an SA_GROUPING aggregate: one bit per argument
 *   (the first the highest), set when that key is not in the row's set.
 *   Its arguments must be group keys (42803).
 *
 * Layer: query/ (SQL).  Calls bind.c (GROUP BY items) and sql_expr.c.
 */
#include "query/plan/plan.h"

#include <string.h>

#define MAX_SETS 4096
#define MAX_KEYS 64
#define MAX_CUBE 12

/* A GROUPING(...) call: its arguments, resolved to keys at the end. */
typedef struct SqlGroupingCall {
    SqlAgg *a;
    SqlExpr **args;
    int n_args;
    int loc;
} SqlGroupingCall;

/* A list of grouping sets (key masks). */
typedef struct SetList {
    uint64_t *m;
    int n, cap;
} SetList;

static int nomem(SqlCtx *cx) { return sql_nomem(cx); }

static int push_set(SqlCtx *cx, SetList *l, uint64_t m, int loc)
{
    if (l->n >= MAX_SETS)
        return sql_err_at(cx, loc, QR_ELIMIT, "54001", "too many grouping sets present (maximum %d)",
                          MAX_SETS);
    if (l->n == l->cap) {
        int nc = l->cap ? l->cap * 2 : 8;
        uint64_t *nm = qr_arena_alloc(cx->arena, (size_t)nc * sizeof *nm);
        if (!nm)
            return nomem(cx);
        if (l->n)
            memcpy(nm, l->m, (size_t)l->n * sizeof *nm);
        l->m = nm;
        l->cap = nc;
    }
    l->m[l->n++] = m;
    return QR_OK;
}

bool sql_group_has_sets(const cJSON *gb)
{
    const cJSON *g;
    cJSON_ArrayForEach(g, gb)
    {
        const char *tag = sqlj_tag(g);
        if (tag && (!strcmp(tag, "GroupingSet") || !strcmp(tag, "RowExpr")))
            return true;
    }
    return false;
}

/* The key of one GROUP BY expression (an ordinal, an output name, an
 * expression), added to s->groups when new: its bit. */
static int key_mask(SqlQuery *s, const cJSON *node, uint64_t *out)
{
    SqlCtx *cx = s->cx;
    SqlExpr *e;
    int rc = sql_bind_group_item(s, node, &e);
    if (rc)
        return rc;
    int k = 0;
    while (k < s->n_groups && !sql_expr_same(s->groups[k], e))
        k++;
    if (k == s->n_groups) {
        if (k == MAX_KEYS)
            return sql_err_at(cx, sqlj_loc(node), QR_ELIMIT, "54000",
                              "too many grouping keys in GROUPING SETS, ROLLUP or CUBE (at most %d)",
                              MAX_KEYS);
        s->groups[s->n_groups++] = e;
    }
    *out = 1ull << k;
    return QR_OK;
}

/* The keys of one element of ROLLUP / CUBE / GROUPING SETS: an expression,
 * or a parenthesized row of them. */
static int elem_mask(SqlQuery *s, const cJSON *node, uint64_t *out)
{
    const cJSON *row = sqlj_is(node, "RowExpr");
    if (!row)
        return key_mask(s, node, out);
    *out = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, sqlj_get(row, "args"))
    {
        uint64_t m;
        int rc = key_mask(s, a, &m);
        if (rc)
            return rc;
        *out |= m;
    }
    return QR_OK;
}

/* The grouping sets one GROUP BY item stands for, appended to out. */
static int item_sets(SqlQuery *s, const cJSON *node, SetList *out)
{
    SqlCtx *cx = s->cx;
    const cJSON *gs = sqlj_is(node, "GroupingSet");
    int loc = sqlj_loc(node), rc;
    if (!gs) {
        uint64_t m;
        return (rc = elem_mask(s, node, &m)) ? rc : push_set(cx, out, m, loc);
    }
    const char *kind = sqlj_str(gs, "kind");
    const cJSON *content = sqlj_get(gs, "content");
    int n = cJSON_GetArraySize(content);
    if (!kind || !strcmp(kind, "GROUPING_SET_EMPTY"))
        return push_set(cx, out, 0, loc);
    if (!strcmp(kind, "GROUPING_SET_SETS")) {
        const cJSON *c;
        cJSON_ArrayForEach(c, content)
        {
            if ((rc = item_sets(s, c, out)))
                return rc;
        }
        return QR_OK;
    }
    bool cube = !strcmp(kind, "GROUPING_SET_CUBE");
    if (!cube && strcmp(kind, "GROUPING_SET_ROLLUP") != 0)
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "grouping set %s is not supported", kind);
    if (cube && n > MAX_CUBE)
        return sql_err_at(cx, loc, QR_ELIMIT, "54011", "CUBE is limited to %d elements", MAX_CUBE);
    uint64_t el[MAX_KEYS];
    if (n > MAX_KEYS)
        return sql_err_at(cx, loc, QR_ELIMIT, "54000",
                          "too many grouping keys in GROUPING SETS, ROLLUP or CUBE (at most %d)",
                          MAX_KEYS);
    for (int i = 0; i < n; i++)
        if ((rc = elem_mask(s, cJSON_GetArrayItem(content, i), &el[i])))
            return rc;
    if (!cube) { /* ROLLUP (e1, ..., en): the prefixes, longest first */
        for (int k = n; k >= 0; k--) {
            uint64_t m = 0;
            for (int i = 0; i < k; i++)
                m |= el[i];
            if ((rc = push_set(cx, out, m, loc)))
                return rc;
        }
        return QR_OK;
    }
    /* CUBE (e1, ..., en): every subset, the whole first */
    for (uint64_t sub = (1ull << n) - 1;; sub--) {
        uint64_t m = 0;
        for (int i = 0; i < n; i++)
            if (sub >> (n - 1 - i) & 1)
                m |= el[i];
        if ((rc = push_set(cx, out, m, loc)))
            return rc;
        if (sub == 0)
            break;
    }
    return QR_OK;
}

int sql_bind_grouping_sets(SqlQuery *s, const cJSON *gb, bool distinct)
{
    SqlCtx *cx = s->cx;
    int rc;
    if (!(s->groups = qr_arena_calloc(cx->arena, (MAX_KEYS + 1) * sizeof *s->groups)))
        return nomem(cx);
    s->n_groups = 0;
    /* the cross product of the items' lists */
    SetList acc = {0};
    if ((rc = push_set(cx, &acc, 0, -1)))
        return rc;
    const cJSON *g;
    cJSON_ArrayForEach(g, gb)
    {
        SetList one = {0}, next = {0};
        if ((rc = item_sets(s, g, &one)))
            return rc;
        for (int i = 0; i < acc.n; i++)
            for (int j = 0; j < one.n; j++)
                if ((rc = push_set(cx, &next, acc.m[i] | one.m[j], sqlj_loc(g))))
                    return rc;
        acc = next;
    }
    if (distinct) { /* GROUP BY DISTINCT: each set once, first place kept */
        int k = 0;
        for (int i = 0; i < acc.n; i++) {
            bool seen = false;
            for (int j = 0; j < k && !seen; j++)
                seen = acc.m[j] == acc.m[i];
            if (!seen)
                acc.m[k++] = acc.m[i];
        }
        acc.n = k;
    }
    s->sets = acc.m;
    s->n_sets = acc.n;
    return QR_OK;
}

int sql_bind_grouping_call(SqlBind *b, const cJSON *gf, int loc, SqlExpr **out)
{
    SqlQuery *s = b->hook_arg;
    SqlCtx *cx = b->cx;
    if (b->in_agg)
        return sql_err_at(cx, loc, QR_EINVAL, "42803", "aggregate function calls cannot be nested");
    if (!b->allow_aggs)
        return sql_err_at(cx, loc, QR_EINVAL, "42803", "grouping operations are not allowed in %s",
                          s->clause ? s->clause : "this context");
    const cJSON *args = sqlj_get(gf, "args");
    int n = cJSON_GetArraySize(args), rc;
    if (n >= 32)
        return sql_err_at(cx, loc, QR_ELIMIT, "54023", "GROUPING must have fewer than 32 arguments");
    if (s->n_groupings == s->cap_groupings) {
        int nc = s->cap_groupings ? s->cap_groupings * 2 : 4;
        SqlGroupingCall *ng = qr_arena_alloc(cx->arena, (size_t)nc * sizeof *ng);
        if (!ng)
            return nomem(cx);
        if (s->n_groupings)
            memcpy(ng, s->groupings, (size_t)s->n_groupings * sizeof *ng);
        s->groupings = ng;
        s->cap_groupings = nc;
    }
    SqlGroupingCall *gc = &s->groupings[s->n_groupings];
    SqlAgg *a = qr_arena_calloc(cx->arena, sizeof *a);
    gc->args = qr_arena_calloc(cx->arena, (size_t)(n + 1) * sizeof *gc->args);
    if (!a || !gc->args)
        return nomem(cx);
    b->in_agg = true; /* grouped expressions: no aggregate inside */
    for (int i = 0; i < n; i++)
        if ((rc = sql_expr_bind(b, cJSON_GetArrayItem(args, i), &gc->args[i]))) {
            b->in_agg = false;
            return rc;
        }
    b->in_agg = false;
    gc->a = a;
    gc->n_args = n;
    gc->loc = loc;
    a->kind = SA_GROUPING;
    a->type = QR_SQL_INT4;
    s->n_groupings++;
    return sql_bind_add_agg(b, a, loc, "grouping", out);
}

/* ---- above the aggregate: grouped expressions read as keys ---- */

typedef struct KeyRefs {
    SqlQuery *s;
    SqlExpr *ref[MAX_KEYS];   /* per key: its SE_AGG reference, made on first use */
} KeyRefs;

static int key_ref(KeyRefs *kr, int g, SqlExpr **out)
{
    SqlQuery *s = kr->s;
    SqlCtx *cx = s->cx;
    if (!kr->ref[g]) {
        SqlAgg *a = qr_arena_calloc(cx->arena, sizeof *a);
        int *keys = qr_arena_calloc(cx->arena, 2 * sizeof *keys);
        if (!a || !keys)
            return nomem(cx);
        keys[0] = g;
        a->kind = SA_GROUP_KEY;
        a->keys = keys;
        a->n_keys = 1;
        a->type = s->groups[g]->type;
        const char *label = sql_expr_sql(cx, s->groups[g], &s->scope, s->n_items > 1);
        int rc = sql_bind_add_agg(&s->bind, a, s->groups[g]->loc, label, &kr->ref[g]);
        if (rc)
            return rc;
        kr->ref[g]->op = 1; /* EXPLAIN prints it as the key expression */
        kr->ref[g]->type = a->type;
    }
    *out = kr->ref[g];
    return QR_OK;
}

/* e with every subexpression equal to a group key read through the key
 * (aggregates' own arguments stay: they read input rows).  Copies the
 * nodes on the way to a change; *out is e itself when nothing changed. */
static int rewrite(KeyRefs *kr, SqlExpr *e, SqlExpr **out)
{
    SqlQuery *s = kr->s;
    *out = e;
    if (!e || e->kind == SE_AGG)
        return QR_OK;
    for (int g = 0; g < s->n_groups; g++)
        if (sql_expr_same(e, s->groups[g]))
            return key_ref(kr, g, out);
    SqlExpr **args = NULL;
    for (int k = 0; k < e->n_args; k++) {
        SqlExpr *x;
        int rc = rewrite(kr, e->args[k], &x);
        if (rc)
            return rc;
        if (x == e->args[k] && !args)
            continue;
        if (!args) {
            if (!(args = qr_arena_alloc(s->cx->arena, (size_t)e->n_args * sizeof *args)))
                return nomem(s->cx);
            memcpy(args, e->args, (size_t)e->n_args * sizeof *args);
        }
        args[k] = x;
    }
    if (!args)
        return QR_OK;
    SqlExpr *c = qr_arena_alloc(s->cx->arena, sizeof *c);
    if (!c)
        return nomem(s->cx);
    *c = *e;
    c->args = args;
    *out = c;
    return QR_OK;
}

static int rewrite_all(KeyRefs *kr, SqlExpr **v, int n)
{
    for (int i = 0; i < n; i++) {
        int rc = rewrite(kr, v[i], &v[i]);
        if (rc)
            return rc;
    }
    return QR_OK;
}

int sql_bind_grouping_finish(SqlQuery *s)
{
    SqlCtx *cx = s->cx;
    int rc;
    for (int i = 0; i < s->n_groupings; i++) {
        SqlGroupingCall *gc = &s->groupings[i];
        int *keys = qr_arena_calloc(cx->arena, (size_t)(gc->n_args + 1) * sizeof *keys);
        if (!keys)
            return nomem(cx);
        for (int k = 0; k < gc->n_args; k++) {
            keys[k] = -1;
            for (int g = 0; g < s->n_groups && keys[k] < 0; g++)
                if (sql_expr_same(gc->args[k], s->groups[g]))
                    keys[k] = g;
            if (keys[k] < 0 || keys[k] >= MAX_KEYS)
                return sql_err_at(cx, gc->args[k]->loc >= 0 ? gc->args[k]->loc : gc->loc, QR_EINVAL,
                                  "42803", "arguments to GROUPING must be grouping expressions of "
                                  "the associated query level");
        }
        gc->a->keys = keys;
        gc->a->n_keys = gc->n_args;
    }
    if (!s->sets)
        return QR_OK;
    KeyRefs *kr = qr_arena_calloc(cx->arena, sizeof *kr);
    if (!kr)
        return nomem(cx);
    kr->s = s;
    for (int i = 0; i < s->n_tg; i++)
        if ((rc = rewrite(kr, s->tg[i].e, &s->tg[i].e)))
            return rc;
    if ((rc = rewrite_all(kr, s->extra, s->n_extra)) || (rc = rewrite(kr, s->having, &s->having)))
        return rc;
    for (int i = 0; i < s->n_wins; i++) {
        SqlWinFunc *f = s->wins[i];
        SqlWinDef *w = f->win;
        if ((rc = rewrite_all(kr, f->args, f->n_args)) || (rc = rewrite_all(kr, w->part, w->n_part)) ||
            (rc = rewrite_all(kr, w->order, w->n_order)))
            return rc;
        if (f->agg && ((rc = rewrite(kr, f->agg->arg, &f->agg->arg)) ||
                       (rc = rewrite(kr, f->agg->arg2, &f->agg->arg2)) ||
                       (rc = rewrite(kr, f->agg->filter, &f->agg->filter))))
            return rc;
    }
    return QR_OK;
}
