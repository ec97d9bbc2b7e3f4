/*
 * join.c — planning a query block's FROM clause: where each condition
 * goes, the leaves, the joins, the semi / anti joins.
 *
 * Conditions go as deep as they may (sql_from_prepare): a WHERE conjunct
 * enters a join's side when it reads only that side's items and the side
 * is not the nullable one of an outer join (through LEFT into the left,
 * RIGHT into the right, INNER into both, FULL into neither); an ON
 * conjunct enters a side when it reads only that side and the side is the
 * nullable one or the join is INNER.  At a leaf a table takes its
 * conditions into its scan (the access-path planner sees them), any other
 * item filters its rows.  What reaches a join and reads both sides is its
 * pair condition (WHERE conjuncts only for INNER joins); what is left over
 * filters the join's output.  Equalities between the two sides, of one
 * type class, become hash keys.
 *
 * Join order (sql_from_build): the FROM tree's shape is kept (left-deep in
 * FROM order, parentheses as written); for each hash or nested-loop join
 * the side the planner estimates smaller is read first and hashed (an
 * INNER join swaps its sides, a LEFT join becomes PostgreSQL's Hash Right
 * Join and back).  A LATERAL item runs per row of its left side.
 *
 * Layer: query/ (SQL).  Calls exec/ (operators), sql_scan.c (a table's
 * access path), sql_expr.c and the catalog hook.
 */
#include "query/plan/plan_int.h"

#include <stdio.h>
#include <string.h>

static int nomem(SqlCtx *cx) { return sql_nomem(cx); }

/* ---- masks: the items an expression needs ---- */

/* colmask[c]: the items scope column c needs (its item, or for a USING
 * column every item of the join that computes it). */
static void node_masks(const SqlQuery *s, const SqlFromNode *n, uint64_t *colmask)
{
    if (!n || n->item >= 0)
        return;
    uint64_t m = 0;
    for (int i = n->i0; i < n->i1; i++)
        m |= 1ull << i;
    for (int k = 0; k < n->n_merged; k++)
        colmask[n->merged_col[k]] = m;
    node_masks(s, n->l, colmask);
    node_masks(s, n->r, colmask);
}

static uint64_t expr_mask(const uint64_t *colmask, const SqlExpr *e)
{
    uint64_t m = 0;
    if (!e)
        return 0;
    if (e->kind == SE_COL || e->kind == SE_SCORE || e->kind == SE_SNIPPET)
        m |= colmask[e->col];
    if (e->kind == SE_MATCH)
        m |= colmask[e->text->id_col];
    for (int k = 0; k < e->n_args; k++)
        m |= expr_mask(colmask, e->args[k]);
    return m;
}

static uint64_t node_items(const SqlFromNode *n)
{
    uint64_t m = 0;
    for (int i = n->i0; i < n->i1; i++)
        m |= 1ull << i;
    return m;
}

/* ---- where the conditions go ---- */

typedef struct CondList {
    SqlExpr **e;
    int n;
} CondList;

typedef struct FromCx {
    SqlQuery *s;
    uint64_t *colmask;
    int cap;                  /* room in every list: all conditions of the block */
} FromCx;

static int list_new(FromCx *f, CondList *l)
{
    l->n = 0;
    l->e = qr_arena_alloc(f->s->cx->arena, ((size_t)f->cap + 1) * sizeof *l->e);
    return l->e ? QR_OK : nomem(f->s->cx);
}

static void take_scan(SqlTableScan *sc, SqlExpr *e)
{
    sc->conj[sc->n_conj++] = e;
    if (e->kind == SE_MATCH && sc->drive < 0)
        for (int k = 0; k < sc->n_texts; k++)
            if (sc->texts[k] == e->text)
                sc->drive = k;
}

static int distribute(FromCx *f, SqlFromNode *n, const CondList *avail)
{
    SqlQuery *s = f->s;
    if (n->item >= 0) {
        SqlItem *it = &s->items[n->item];
        for (int i = 0; i < avail->n; i++) {
            if (it->kind == SQL_ITEM_TABLE)
                take_scan(&it->scan, avail->e[i]);
            else
                n->filt[n->n_filt++] = avail->e[i];
        }
        return QR_OK;
    }
    SqlJoinType t = n->type;
    uint64_t ml = node_items(n->l), mr = node_items(n->r);
    CondList L, R;
    int rc;
    if ((rc = list_new(f, &L)) || (rc = list_new(f, &R)))
        return rc;
    for (int i = 0; i < avail->n; i++) {
        SqlExpr *e = avail->e[i];
        uint64_t m = expr_mask(f->colmask, e);
        if ((m & ~ml) == 0 && (t == SQL_JOIN_INNER || t == SQL_JOIN_LEFT))
            L.e[L.n++] = e;
        else if ((m & ~mr) == 0 && (t == SQL_JOIN_INNER || t == SQL_JOIN_RIGHT))
            R.e[R.n++] = e;
        else if (t == SQL_JOIN_INNER)
            n->cond[n->n_cond++] = e;
        else
            n->filt[n->n_filt++] = e;
    }
    for (int i = 0; i < n->n_on; i++) {
        SqlExpr *e = n->on[i];
        uint64_t m = expr_mask(f->colmask, e);
        bool pass = false;
        SqlEvalRow er = {.doc = -1};
        if (m == 0 && (rc = sql_expr_test(s->cx, e, &er, &pass)))
            return rc;
        if (pass) /* ON true, ON 1 = 1: nothing to test */
            continue;
        if (m && (m & ~ml) == 0 && (t == SQL_JOIN_INNER || t == SQL_JOIN_RIGHT))
            L.e[L.n++] = e;
        else if (m && (m & ~mr) == 0 && (t == SQL_JOIN_INNER || t == SQL_JOIN_LEFT))
            R.e[R.n++] = e;
        else
            n->cond[n->n_cond++] = e;
    }
    if ((rc = distribute(f, n->l, &L)))
        return rc;
    return distribute(f, n->r, &R);
}

static int reset_nodes(FromCx *f, SqlFromNode *n)
{
    if (!n)
        return QR_OK;
    SqlCtx *cx = f->s->cx;
    n->n_filt = n->n_cond = 0;
    n->filt = qr_arena_alloc(cx->arena, ((size_t)f->cap + 1) * sizeof *n->filt);
    n->cond = qr_arena_alloc(cx->arena, ((size_t)f->cap + 1) * sizeof *n->cond);
    if (!n->filt || !n->cond)
        return nomem(cx);
    int rc = reset_nodes(f, n->l);
    return rc ? rc : reset_nodes(f, n->r);
}

static int count_on(const SqlFromNode *n)
{
    return !n || n->item >= 0 ? 0 : n->n_on + count_on(n->l) + count_on(n->r);
}

int sql_from_prepare(SqlQuery *s, bool *const_false)
{
    SqlCtx *cx = s->cx;
    int rc;
    *const_false = false;
    FromCx f = {s, NULL, s->n_conj + count_on(s->from)};
    if (!(f.colmask = qr_arena_calloc(cx->arena, ((size_t)s->scope.n + 1) * sizeof *f.colmask)))
        return nomem(cx);
    for (int i = 0; i < s->n_items; i++) {
        SqlItem *it = &s->items[i];
        memset(&it->scan, 0, sizeof it->scan);
        memset(&it->set, 0, sizeof it->set);
        memset(&it->rows, 0, sizeof it->rows);
        for (int c = it->first; c < it->first + it->n_cols; c++)
            f.colmask[c] = 1ull << i;
    }
    node_masks(s, s->from, f.colmask);
    for (int i = 0; i < s->bind.n_texts; i++)
        s->bind.texts[i]->run = NULL;
    if ((rc = reset_nodes(&f, s->from)))
        return rc;
    /* the tables' scans, each with its text predicates */
    for (int ii = 0; ii < s->n_items; ii++) {
        SqlItem *it = &s->items[ii];
        if (it->kind != SQL_ITEM_TABLE)
            continue;
        SqlTableScan *sc = &it->scan;
        sc->t = it->t;
        sc->qual = it->qual;
        sc->scope = &s->scope;
        sc->first = it->first;
        sc->n_cols = it->n_cols;
        sc->drive = -1;
        sc->topk = -1;
        sc->conj = qr_arena_calloc(cx->arena, ((size_t)f.cap + 1) * sizeof *sc->conj);
        sc->texts = qr_arena_calloc(cx->arena, (size_t)(s->bind.n_texts + 1) * sizeof *sc->texts);
        if (!sc->conj || !sc->texts)
            return nomem(cx);
        for (int i = 0; i < s->bind.n_texts; i++)
            if (f.colmask[s->bind.texts[i]->id_col] == 1ull << ii)
                sc->texts[sc->n_texts++] = s->bind.texts[i];
    }
    /* constant conditions now; the others down the tree */
    CondList where;
    if ((rc = list_new(&f, &where)))
        return rc;
    for (int i = 0; i < s->n_conj; i++) {
        if (expr_mask(f.colmask, s->conj[i]) != 0) {
            where.e[where.n++] = s->conj[i];
            continue;
        }
        bool pass;
        SqlEvalRow er = {.doc = -1};
        if ((rc = sql_expr_test(cx, s->conj[i], &er, &pass)))
            return rc;
        *const_false |= !pass;
    }
    s->from_colmask = f.colmask;
    return s->from ? distribute(&f, s->from, &where) : QR_OK;
}

/* A set-returning function's rows for the row `row` (NULL: its arguments
 * read no FROM item). */
static int srf_rows(SqlCtx *cx, const SqlExpr *e, const SqlValue *row, SqlRowSet *out)
{
    SqlValue argv[3];
    SqlEvalRow er = {.row = row, .doc = -1};
    int rc;
    for (int i = 0; i < e->n_args && i < 3; i++)
        if ((rc = sql_expr_eval(cx, e->args[i], &er, &argv[i])))
            return rc;
    SqlValue *vals;
    uint64_t n;
    if ((rc = sql_srf_rows(cx, e->name, e->n_args, argv, e->type, &vals, &n)))
        return rc;
    *out = (SqlRowSet){vals, n, 1};
    return QR_OK;
}

/* ---- LATERAL ---- */

typedef struct LateralArg {
    SqlQuery *sub;            /* a subquery, or */
    const SqlExpr *srf;       /* a set-returning function */
    uint64_t runs;
} LateralArg;

static int lateral_rows(void *arg, SqlCtx *cx, const SqlValue *row, SqlRowSet *out)
{
    LateralArg *a = arg;
    if (a->srf)
        return srf_rows(cx, a->srf, row, out);
    struct SqlExplain *saved_ex = cx->ex;
    if (a->runs++)
        cx->ex = NULL; /* EXPLAIN ANALYZE shows the first run's plan */
    SqlFrame fr = {row, cx->frames};
    cx->frames = &fr;
    cx->depth++;
    QrSqlResult r;
    int rc = sql_query_exec(cx, a->sub, &r);
    cx->depth--;
    cx->frames = fr.next;
    cx->ex = saved_ex;
    if (rc == QR_OK)
        *out = (SqlRowSet){r.vals, r.n_rows, r.n_cols};
    return rc;
}

/* ---- the leaves ---- */

static int catalog_rows(SqlCtx *cx, SqlItem *it)
{
    SqlSource *src = NULL;
    int rc = sqlcat_open(cx, it->schema, it->relname, &src);
    if (rc)
        return rc;
    if (!src)
        return sql_err_at(cx, -1, QR_ENOTFOUND, "42P01", "relation \"%s\" does not exist", it->relname);
    QrSqlResult *r = &it->rows;
    uint64_t cap = 0;
    r->n_cols = src->n_cols;
    while (rc == QR_OK) {
        if (r->n_rows == cap) {
            uint64_t nc = cap ? cap * 2 : 64;
            SqlValue *nv = qr_arena_alloc(cx->arena, nc * (uint64_t)r->n_cols * sizeof *nv);
            if (!nv) {
                rc = nomem(cx);
                break;
            }
            if (r->n_rows)
                memcpy(nv, r->vals, r->n_rows * (uint64_t)r->n_cols * sizeof *nv);
            r->vals = nv;
            cap = nc;
        }
        bool has = false;
        rc = src->vt->next(src, cx, r->vals + r->n_rows * (uint64_t)r->n_cols, &has);
        if (rc || !has)
            break;
        r->n_rows++;
    }
    src->vt->close(src);
    return rc;
}


static int leaf_op(SqlPlanRun *pr, SqlQuery *s, SqlFromNode *n, SqlOp **out)
{
    SqlCtx *cx = s->cx;
    SqlItem *it = &s->items[n->item];
    int W = s->scope.n, rc;
    SqlOp *sub = NULL;
    const SqlRowSet *set = &it->set;
    const char *label = it->label;
    switch (it->kind) {
    case SQL_ITEM_TABLE:
        if ((rc = sql_scan_plan(cx, &it->scan)))
            return rc;
        *out = sql_op_scan(cx, &it->scan, W);
        return *out ? QR_OK : cx->err->code;
    case SQL_ITEM_CTE:
        if (sql_cte_inline(it->cte)) {
            if ((rc = sql_plan_query(pr, cx, it->cte->q, NULL, &sub)))
                return rc;
            if (!it->cte->recursive) {
                char lb[160];
                snprintf(lb, sizeof lb, "Subquery Scan on %s", it->qual);
                if (!(label = qr_arena_strndup(cx->arena, lb, strlen(lb))))
                    return nomem(cx);
            }
        } else {
            set = &it->cte->set;
        }
        break;
    case SQL_ITEM_SUBQUERY:
        if (it->lateral_bound) {
            /* LATERAL but reading no item before it: run once, under an empty
             * frame for this query's row (its outer references count it) */
            LateralArg a = {.sub = it->sub};
            if ((rc = lateral_rows(&a, cx, NULL, &it->set)))
                return rc;
            break;
        }
        if ((rc = sql_plan_query(pr, cx, it->sub, NULL, &sub)))
            return rc;
        break;
    case SQL_ITEM_CATALOG:
        if ((rc = catalog_rows(cx, it)))
            return rc;
        it->set = (SqlRowSet){it->rows.vals, it->rows.n_rows, it->rows.n_cols};
        break;
    case SQL_ITEM_FUNCTION:
        if ((rc = srf_rows(cx, it->srf, NULL, &it->set)))
            return rc;
        break;
    case SQL_ITEM_WORKTABLE:
        if (!it->cte->wt)
            return sql_err_at(cx, -1, QR_EINTERNAL, "XX000", "working table of \"%s\" read outside its query",
                              it->cte->name);
        set = it->cte->wt;
        break;
    }
    *out = sub ? sql_op_subquery(cx, sub, it->n_cols, it->first, W, n->filt, n->n_filt, label)
               : sql_op_rows(cx, set, it->first, W, n->filt, n->n_filt, label);
    return *out ? QR_OK : cx->err->code;
}

/* ---- joins ---- */

static int type_class(QrSqlType t)
{
    return t == QR_SQL_BOOL ? 1 : sqlt_is_num(t) ? 2 : sqlt_is_str(t) ? 3 : sqlt_is_ts(t) ? 4 : 100 + (int)t;
}

static int build(SqlPlanRun *pr, SqlQuery *s, SqlFromNode *n, SqlOp **out);

static int join_op(SqlPlanRun *pr, SqlQuery *s, SqlFromNode *n, SqlOp **out)
{
    SqlCtx *cx = s->cx;
    const uint64_t *cm = s->from_colmask;
    SqlOp *lop, *rop = NULL;
    int rc;
    SqlItem *lat = n->r->item >= 0 && s->items[n->r->item].lateral ? &s->items[n->r->item] : NULL;
    if ((rc = build(pr, s, n->l, &lop)) || (!lat && (rc = build(pr, s, n->r, &rop))))
        return rc;
    SqlJoinSpec js = {.type = n->type, .first = n->r->c0, .n_cols = n->r->c1 - n->r->c0,
                      .calc_col = n->merged_col, .calc = n->merged, .n_calc = n->n_merged};
    js.lk = qr_arena_alloc(cx->arena, SQL_JOIN_MAX_KEYS * sizeof *js.lk);
    js.rk = qr_arena_alloc(cx->arena, SQL_JOIN_MAX_KEYS * sizeof *js.rk);
    js.cond = qr_arena_alloc(cx->arena, ((size_t)n->n_cond + n->r->n_filt + 1) * sizeof *js.cond);
    if (!js.lk || !js.rk || !js.cond)
        return nomem(cx);
    if (lat) {
        /* the item's own conditions are tested per pair */
        memcpy(js.cond, n->cond, (size_t)n->n_cond * sizeof *js.cond);
        memcpy(js.cond + n->n_cond, n->r->filt, (size_t)n->r->n_filt * sizeof *js.cond);
        js.n_cond = n->n_cond + n->r->n_filt;
        LateralArg *a = qr_arena_calloc(cx->arena, sizeof *a);
        if (!a)
            return nomem(cx);
        a->sub = lat->sub;
        a->srf = lat->kind == SQL_ITEM_FUNCTION ? lat->srf : NULL;
        *out = sql_op_lateral(cx, lop, lateral_rows, a, &js, lat->label);
        return *out ? QR_OK : cx->err->code;
    }
    uint64_t ml = node_items(n->l), mr = node_items(n->r);
    for (int i = 0; i < n->n_cond; i++) {
        SqlExpr *e = n->cond[i];
        if (e->kind == SE_CMP && e->op == SQL_CMP_EQ && e->n_args == 2 && js.n_keys < SQL_JOIN_MAX_KEYS &&
            type_class(e->args[0]->type) == type_class(e->args[1]->type)) {
            uint64_t a = expr_mask(cm, e->args[0]), b = expr_mask(cm, e->args[1]);
            if (a && b && (a & ~ml) == 0 && (b & ~mr) == 0) {
                js.lk[js.n_keys] = e->args[0];
                js.rk[js.n_keys++] = e->args[1];
                continue;
            }
            if (a && b && (a & ~mr) == 0 && (b & ~ml) == 0) {
                js.lk[js.n_keys] = e->args[1];
                js.rk[js.n_keys++] = e->args[0];
                continue;
            }
        }
        js.cond[js.n_cond++] = e;
    }
    /* the smaller side is read first (and hashed) */
    if (rop->est_rows > lop->est_rows) {
        SqlOp *t = lop;
        lop = rop;
        rop = t;
        SqlExpr **k = js.lk;
        js.lk = js.rk;
        js.rk = k;
        js.type = js.type == SQL_JOIN_LEFT ? SQL_JOIN_RIGHT : js.type == SQL_JOIN_RIGHT ? SQL_JOIN_LEFT : js.type;
        js.first = n->l->c0;
        js.n_cols = n->l->c1 - n->l->c0;
    }
    *out = js.n_keys ? sql_op_hash_join(cx, lop, rop, &js) : sql_op_nl_join(cx, lop, rop, &js);
    return *out ? QR_OK : cx->err->code;
}

static int build(SqlPlanRun *pr, SqlQuery *s, SqlFromNode *n, SqlOp **out)
{
    SqlCtx *cx = s->cx;
    if (n->item >= 0)
        return leaf_op(pr, s, n, out); /* its conditions are inside */
    int rc = join_op(pr, s, n, out);
    if (rc == QR_OK && n->n_filt && !(*out = sql_op_filter(cx, *out, n->filt, n->n_filt)))
        return cx->err->code;
    return rc;
}

/* EXPLAIN's "Hash Cond" of a semi join: outer keys in this block's names,
 * inner ones in the subquery's. */
static const char *semi_label(SqlCtx *cx, const SqlQuery *s, const SqlSemiJoin *sj)
{
    QrBuf b;
    qr_buf_init(&b);
    if (sj->n_keys > 1)
        qr_buf_putc(&b, '(');
    for (int i = 0; i < sj->n_keys; i++)
        qr_buf_printf(&b, "%s(%s = %s)", i ? " AND " : "", sql_expr_sql(cx, sj->okeys[i], &s->scope, true),
                      sj->ikeys[i] && sj->sub->kind == SQL_Q_SELECT
                          ? sql_expr_sql(cx, sj->ikeys[i], &sj->sub->scope, true)
                          : sj->sub->cols[i].name);
    if (sj->n_keys > 1)
        qr_buf_putc(&b, ')');
    const char *l = qr_arena_strndup(cx->arena, b.data ? (char *)b.data : "", b.len);
    qr_buf_free(&b);
    return l;
}

int sql_from_build(SqlPlanRun *pr, SqlQuery *s, SqlOp **out)
{
    SqlCtx *cx = s->cx;
    int rc = build(pr, s, s->from, out);
    for (int i = 0; rc == QR_OK && i < s->n_semis; i++) {
        const SqlSemiJoin *sj = &s->semis[i];
        SqlOp *sub;
        if ((rc = sql_plan_query(pr, cx, sj->sub, NULL, &sub)))
            return rc;
        SqlJoinSpec js = {.type = sj->anti ? SQL_JOIN_ANTI : SQL_JOIN_SEMI, .lk = sj->okeys,
                          .n_keys = sj->n_keys};
        js.rk = qr_arena_alloc(cx->arena, (size_t)sj->n_keys * sizeof *js.rk);
        SqlExpr *cols = qr_arena_calloc(cx->arena, (size_t)sj->n_keys * sizeof *cols);
        if (!js.rk || !cols)
            return nomem(cx);
        for (int k = 0; k < sj->n_keys; k++) {
            cols[k] = (SqlExpr){.kind = SE_COL, .col = k, .type = sj->sub->cols[k].type, .loc = -1,
                                .name = sj->sub->cols[k].name};
            js.rk[k] = &cols[k];
        }
        if (cx->ex && !(js.cond_label = semi_label(cx, s, sj)))
            return nomem(cx);
        if (!(*out = sql_op_hash_join(cx, *out, sub, &js)))
            return cx->err->code;
    }
    return rc;
}
