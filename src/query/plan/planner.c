/*
 * planner.c — from a bound query (plan.h) to a tree of exec/ operators,
 * then the run.  A plain SELECT: its FROM clause (join.c: conditions
 * pushed to the scans and joins, each table's access path costed by
 * sql_scan.c, joins, semi / anti joins), grouping (aggregates from column
 * blocks, counts from the postings or column statistics where they can
 * answer), the select list, DISTINCT, ORDER BY (a bounded top-N under
 * LIMIT, feeding the ordered walk's stop rule back to the scan), LIMIT.
 * Set operations (Append, HashSetOp), VALUES and WITH RECURSIVE
 * (Recursive Union) are planned here too; FROM subqueries, set operations'
 * branches and WITH queries read once go into the same tree, so their rows
 * stream.  The rules and the cost model are written in docs/planner.md.
 *
 * Layer: query/ (SQL).  Calls exec/ (operators), join.c, sql_scan.c,
 * sql_expr.c and the catalog hook.
 */
#include "query/plan/plan_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int nomem(SqlCtx *cx) { return sql_nomem(cx); }

/* OFFSET from which ORDER BY <column> LIMIT n OFFSET k is a deep page: a
 * pass over the column's candidates (selecting the page's keys by rank)
 * then costs less than a top-N of k + n rows. */
#define SQL_DEEP_OFFSET 1000
/* ... and below which LIMIT and OFFSET keep the top-N's arithmetic (twice
 * their sum) far from overflowing; past it, a plain sort. */
#define SQL_DEEP_MAX (1ull << 40)

/* A LIMIT or OFFSET value (dflt when absent or NULL). */
static int limit_value(SqlCtx *cx, const SqlExpr *e, uint64_t dflt, uint64_t *out)
{
    *out = dflt;
    if (!e)
        return QR_OK;
    SqlValue v, iv;
    SqlEvalRow r = {.doc = -1};
    int rc;
    if ((rc = sql_expr_eval(cx, e, &r, &v)))
        return rc;
    if (v.is_null)
        return QR_OK;
    if ((rc = sqlv_cast(cx, &v, QR_SQL_INT8, e->loc, &iv)))
        return rc;
    if (iv.u.i < 0)
        return sql_err_at(cx, e->loc, QR_EINVAL, "2201W", "LIMIT must not be negative");
    *out = (uint64_t)iv.u.i;
    return QR_OK;
}

/* Run a subquery (a WITH query, a FROM subquery, a side of a set
 * operation) into rows, one EXPLAIN level deeper. */
static int run_sub(SqlCtx *cx, SqlQuery *q, QrSqlResult *out)
{
    cx->depth++;
    int rc = sql_query_exec(cx, q, out);
    cx->depth--;
    return rc;
}

/* ORDER BY (a top-N under a small LIMIT) and LIMIT / OFFSET over a
 * tree's output columns. */
static int finish(SqlCtx *cx, SqlOp **t, const SqlSortKey *keys, int nk, uint64_t limit, uint64_t offset)
{
    if (nk)
        *t = limit != UINT64_MAX && limit + offset <= 100000 && limit + offset > 0
                 ? sql_op_topn(cx, *t, keys, nk, limit + offset)
                 : sql_op_sort(cx, *t, keys, nk);
    if (*t && (limit != UINT64_MAX || offset))
        *t = sql_op_limit(cx, *t, limit, offset);
    return *t ? QR_OK : cx->err->code;
}

/* ---- planner rules for aggregates ---- */

/* The aggregates of item `it` that column blocks can give: count(*), and
 * count / sum / avg / min / max and percentiles of its columns, without
 * FILTER, DISTINCT or ORDER BY inside; *ok false otherwise.  Percentiles
 * get the values themselves (keep). */
static int colagg_aggs(SqlQuery *s, const SqlItem *it, const SqlAggSpec *spec, int **field_out,
                       bool **keep_out, bool *ok)
{
    SqlCtx *cx = s->cx;
    int n = spec->n_aggs;
    int *field = qr_arena_alloc(cx->arena, ((size_t)n + 1) * sizeof *field);
    bool *keep = qr_arena_calloc(cx->arena, (size_t)n + 1);
    if (!field || !keep)
        return nomem(cx);
    *ok = false;
    for (int k = 0; k < n; k++) {
        const SqlAgg *A = spec->aggs[k];
        bool pct = A->kind == SA_PCT_CONT || A->kind == SA_PCT_DISC;
        if (A->filter || A->distinct || A->n_order ||
            (A->kind != SA_COUNT_STAR && A->kind != SA_COUNT && A->kind != SA_SUM &&
             A->kind != SA_AVG && A->kind != SA_MIN && A->kind != SA_MAX && !pct))
            return QR_OK;
        keep[k] = pct;
        field[k] = -1;
        if (A->kind == SA_COUNT_STAR)
            continue;
        const SqlExpr *x = A->arg;
        if (x->kind != SE_COL || x->col < it->first || x->col >= it->first + it->n_cols ||
            s->scope.cols[x->col].field < 0 || (pct && x->type == QR_SQL_NUMERIC))
            return QR_OK; /* (percentiles of numerics: as values, from the rows) */
        field[k] = s->scope.cols[x->col].field;
    }
    *field_out = field;
    *keep_out = keep;
    *ok = true;
    return QR_OK;
}

/* GROUP BY one keyword column of the query's one table (or no GROUP BY)
 * with aggregates colagg_aggs accepts: the scan may aggregate from column
 * blocks (it decides when it runs, knowing the conditions and the column
 * types). */
static int colagg_setup(SqlQuery *s, SqlAggSpec *spec)
{
    SqlItem *it = &s->items[0];
    if (spec->n_groups > 1)
        return QR_OK;
    int gcol = -1;
    if (spec->n_groups == 1) {
        const SqlExpr *g = spec->groups[0];
        if (g->kind != SE_COL || g->col < it->first || g->col >= it->first + it->n_cols ||
            s->scope.cols[g->col].field < 0)
            return QR_OK;
        gcol = g->col;
    }
    int *field;
    bool *keep, ok;
    int rc = colagg_aggs(s, it, spec, &field, &keep, &ok);
    if (rc || !ok)
        return rc;
    spec->colagg_scan = &it->scan;
    spec->colagg_col = gcol;
    spec->colagg_field = field;
    spec->colagg_keep = keep;
    return QR_OK;
}

/* Two tables joined on a keyword column of one (the outer side of the hash
 * join: SELECT c.sector, count(*), sum(n.views) FROM news n JOIN companies
 * c ON n.symbol = c.symbol GROUP BY c.sector): the aggregates of the outer
 * table's columns are taken from column blocks per key value, once per
 * distinct key instead of once per row, then joined to the inner rows of
 * that key and grouped as the joined rows would be.  Exact for any inner
 * side (each joined row adds the key's partial states once), as long as
 * nothing above (nor a merged USING column) reads another column of the
 * outer table. */
static int colagg_join_setup(SqlQuery *s, SqlOp *tree, const uint8_t *need, SqlAggSpec *spec)
{
    const SqlJoinSpec *js = sql_op_hash_join_spec(tree);
    SqlTableScan *sc = js ? sql_op_scan_of(tree->kids[0]) : NULL;
    if (!sc || js->type != SQL_JOIN_INNER || js->n_keys != 1 || js->n_cond)
        return QR_OK;
    const SqlItem *it = NULL;
    for (int i = 0; i < s->n_items; i++)
        if (s->items[i].kind == SQL_ITEM_TABLE && &s->items[i].scan == sc)
            it = &s->items[i];
    const SqlExpr *k = js->lk[0];
    if (!it || k->kind != SE_COL || k->col < it->first || k->col >= it->first + it->n_cols ||
        s->scope.cols[k->col].field < 0)
        return QR_OK;
    /* above the aggregate and in the group keys: no column of the outer
     * table but the key */
    uint8_t *marks = qr_arena_calloc(s->cx->arena, (size_t)s->scope.n + 1);
    if (!marks)
        return nomem(s->cx);
    for (int g = 0; g < spec->n_groups; g++)
        sql_expr_cols(spec->groups[g], marks);
    for (int i = 0; i < js->n_calc; i++) /* USING's merged columns (of the key) */
        sql_expr_cols(js->calc[i], marks);
    for (int c = it->first; c < it->first + it->n_cols; c++)
        if (c != k->col && (marks[c] || need[c]))
            return QR_OK;
    int *field;
    bool *keep, ok;
    int rc = colagg_aggs(s, it, spec, &field, &keep, &ok);
    if (rc || !ok)
        return rc;
    spec->colagg_scan = sc;
    spec->colagg_col = k->col;
    spec->colagg_field = field;
    spec->colagg_keep = keep;
    spec->colagg_join = tree;
    return QR_OK;
}

/* The aggregates of a query over one table answered without rows. */
typedef struct FastAgg {
    SqlQuery *s;
    int W;
    bool count;               /* a count of matches may answer */
    bool stats;               /* column statistics may answer */
} FastAgg;

static int fast_agg_row(void *arg, SqlCtx *cx, SqlValue *row, bool *answered)
{
    FastAgg *f = arg;
    SqlQuery *s = f->s;
    SqlTableScan *sc = &s->items[0].scan;
    SqlValue *aggv = row + f->W;
    int rc;
    *answered = false;
    uint64_t cnt = 0;
    if (f->count && (rc = sql_scan_count_text(cx, sc, &cnt, answered)))
        return rc;
    for (int i = 0; *answered && i < s->bind.n_aggs; i++)
        aggv[i] = sqlv_int((int64_t)cnt);
    if (!*answered && f->stats)
        return sql_scan_stats_aggs(cx, sc, s->bind.aggs, s->bind.n_aggs, aggv, answered);
    return QR_OK;
}

/* count(*) over a text predicate and column predicates (the postings and
 * column filters alone), or count / min / max over a whole table (column
 * statistics): *tree becomes a Result node with the aggregate as its
 * fallback. */
static int fast_aggs(SqlQuery *s, SqlOp **tree, int n_groups, const SqlExpr *having, const SqlTarget *tg,
                     int n_tg, SqlExpr **conj, int n_conj, bool const_false)
{
    SqlCtx *cx = s->cx;
    (void)conj;
    if (!(s->n_items == 1 && s->items[0].kind == SQL_ITEM_TABLE) || s->n_semis || n_groups || having ||
        !s->bind.n_aggs || const_false || cx->scores)
        return QR_OK;
    bool only_count = true, plain = true;
    for (int i = 0; i < s->bind.n_aggs; i++)
        only_count &= s->bind.aggs[i]->kind == SA_COUNT_STAR && !s->bind.aggs[i]->filter;
    for (int i = 0; i < n_tg; i++)
        plain &= tg[i].e->kind == SE_AGG || sql_expr_is_const(tg[i].e);
    SqlTableScan *sc = &s->items[0].scan;
    FastAgg *f = qr_arena_calloc(cx->arena, sizeof *f);
    if (!f)
        return nomem(cx);
    f->s = s;
    f->W = s->scope.n;
    f->count = plain && only_count && (sc->drive >= 0 || sc->n_texts == 0) && n_conj == sc->n_conj &&
               n_conj > 0;
    f->stats = plain && n_conj == 0 && sc->n_texts == 0;
    if (!f->count && !f->stats)
        return QR_OK;
    const char *src = f->stats                ? "column statistics (no documents fetched)"
                      : sc->drive >= 0        ? "the postings (no documents fetched)"
                                              : "B-tree counts and column filters (no documents fetched)";
    SqlOp *r = sql_op_result(cx, (*tree)->width, fast_agg_row, f, false, "Aggregate", src, *tree);
    if (!r)
        return cx->err->code;
    *tree = r;
    return QR_OK;
}

/* ---- a plain SELECT ---- */

static int plan_plain(SqlPlanRun *pr, SqlQuery *s, const QrSqlType *want, SqlOp **out)
{
    SqlCtx *cx = s->cx;
    int rc;
    SqlExpr **conj = s->conj;
    int n_conj = s->n_conj, n_tg = s->n_tg, n_groups = s->n_groups, n_extra = s->n_extra,
        n_sort = s->n_sort;
    SqlTarget *tg = s->tg;
    SqlExpr **groups = s->groups, **extra = s->extra, *having = s->having;
    SqlSortKey *keys = s->keys;
    bool distinct = s->distinct, grouped = s->grouped, has_srf = s->has_srf;
    uint64_t limit, offset;
    if ((rc = limit_value(cx, s->limit, UINT64_MAX, &limit)) ||
        (rc = limit_value(cx, s->offset, 0, &offset)))
        return rc;
    /* ---- plan: conditions to the scans and joins (join.c), then the tree ---- */
    bool const_false;
    if ((rc = sql_from_prepare(s, &const_false)))
        return rc;
    bool one_table = s->n_items == 1 && s->items[0].kind == SQL_ITEM_TABLE && s->n_semis == 0;
    SqlTableScan *sc0 = one_table ? &s->items[0].scan : NULL;
    /* windows and DISTINCT ON read every row: no scan may stop early */
    bool all_rows = s->n_wins > 0 || s->n_distinct_on > 0;
    /* top-k: ORDER BY score() DESC LIMIT k over one table whose only
     * condition is its text predicate, no grouping / distinct */
    if (one_table && !grouped && !distinct && !all_rows && n_sort >= 1 && limit != UINT64_MAX &&
        keys[0].desc) {
        const SqlExpr *k0 = keys[0].col < n_tg ? tg[keys[0].col].e : extra[keys[0].col - n_tg];
        bool by_score = k0->kind == SE_SCORE ||
                        (k0->kind == SE_COL && s->scope.cols[k0->col].field == -3);
        /* the scan keeps it only when the other conditions are column predicates */
        if (by_score && sc0->drive >= 0 && sc0->n_conj == n_conj && sc0->n_texts == 1) {
            sc0->topk = (int64_t)(limit + offset);
            sc0->topk_ties = n_sort > 1; /* a further key ranks ties at the k-th score */
        }
    }
    /* ORDER BY a column of the one table LIMIT k: the scan may walk the
     * column's blocks best zone-map bound first, asking the top-N above */
    bool by_col = false;
    if (n_sort && one_table && !grouped && !has_srf && !all_rows) {
        const SqlExpr *k0 = keys[0].col < n_tg ? tg[keys[0].col].e : extra[keys[0].col - n_tg];
        by_col = k0->kind == SE_COL && k0->col >= sc0->first && k0->col < sc0->first + sc0->n_cols;
    }
    /* ... and a deep page of it (OFFSET k large, every condition on the
     * scan): the scan keeps only the page's rows and their ties, found by
     * rank on the raw column (docs/planner.md, "deep pages"), so the top-N
     * holds a page instead of k rows, whatever k */
    bool deep = by_col && limit > 0 && limit < SQL_DEEP_MAX && offset >= SQL_DEEP_OFFSET &&
                offset < SQL_DEEP_MAX && n_conj == sc0->n_conj && !distinct && !s->n_distinct_on;
    bool topn = n_sort && limit != UINT64_MAX && !distinct && !s->n_distinct_on &&
                ((limit + offset <= 100000 && limit + offset > 0) || deep);
    if (topn && by_col) {
        const SqlExpr *k0 = keys[0].col < n_tg ? tg[keys[0].col].e : extra[keys[0].col - n_tg];
        sc0->order_on = true;
        sc0->order_col = k0->col;
        sc0->order_desc = keys[0].desc;
        sc0->order_nulls_first = keys[0].nulls_first;
        sc0->order_may_enter = sql_topn_may_enter;
        sc0->rank_on = deep;
        sc0->rank_from = offset;
        sc0->rank_count = limit;
    }
    /* EXPLAIN (SCORES): the outermost query's first table with a text predicate */
    for (int ii = 0; ii < s->n_items && cx->scores && cx->depth == 0 && !cx->scores_scan; ii++)
        if (s->items[ii].kind == SQL_ITEM_TABLE && s->items[ii].scan.drive >= 0) {
            s->items[ii].scan.keep_docs = true;
            cx->scores_scan = &s->items[ii].scan;
        }
    int W = s->scope.n;
    /* the FROM tree: leaves, joins, semi joins, leftover WHERE conditions */
    SqlOp *tree = NULL;
    if (s->n_items == 0 || const_false)
        tree = sql_op_result(cx, W, NULL, NULL, const_false, "Result", NULL, NULL);
    else if ((rc = sql_from_build(pr, s, &tree)))
        return rc;
    if (!tree)
        return cx->err->code;
    /* grouping */
    int in_width = W;
    if (grouped) {
        uint8_t *need = qr_arena_calloc(cx->arena, (size_t)W + 1);
        if (!need)
            return nomem(cx);
        for (int i = 0; i < n_tg; i++)
            sql_expr_cols(tg[i].e, need);
        for (int i = 0; i < n_extra; i++)
            sql_expr_cols(extra[i], need);
        sql_expr_cols(having, need);
        for (int i = 0; i < s->n_wins; i++) { /* windows read the groups' rows too */
            const SqlWinFunc *f = s->wins[i];
            for (int k = 0; k < f->n_args; k++)
                sql_expr_cols(f->args[k], need);
            for (int k = 0; k < f->win->n_part; k++)
                sql_expr_cols(f->win->part[k], need);
            for (int k = 0; k < f->win->n_order; k++)
                sql_expr_cols(f->win->order[k], need);
            if (f->agg) {
                sql_expr_cols(f->agg->arg, need);
                sql_expr_cols(f->agg->arg2, need);
                sql_expr_cols(f->agg->filter, need);
            }
        }
        SqlAggSpec spec = {.groups = groups, .n_groups = n_groups, .aggs = s->bind.aggs,
                           .n_aggs = s->bind.n_aggs, .having = having, .in_width = W, .need = need,
                           .colagg_col = -1, .sets = s->sets, .n_sets = s->n_sets};
        if (one_table && !const_false && !has_srf && !cx->scores && !s->sets &&
            (rc = colagg_setup(s, &spec)))
            return rc;
        if (s->n_items == 2 && s->n_semis == 0 && !const_false && !has_srf && !cx->scores &&
            !s->sets && (rc = colagg_join_setup(s, tree, need, &spec)))
            return rc;
        SqlOp *agg = sql_op_hash_agg(cx, tree, &spec);
        if (!agg)
            return cx->err->code;
        tree = agg;
        /* count(*) over a text predicate (postings only), or count/min/max
         * over a whole table (column statistics): no documents fetched; the
         * aggregate above is the fallback when they cannot answer */
        if (!s->sets && (rc = fast_aggs(s, &tree, n_groups, having, tg, n_tg, conj, n_conj, const_false)))
            return rc;
    }
    /* window functions, over the groups when grouped */
    if (s->n_wins && !(tree = sql_op_window(cx, tree, s->wins, s->n_wins, tree->width + s->n_wins,
                                            grouped ? W : -1)))
        return cx->err->code;
    /* the select list (and extra ORDER BY keys), typed */
    int XW = n_tg + n_extra;
    SqlExpr **px = qr_arena_calloc(cx->arena, ((size_t)XW + 1) * sizeof *px);
    QrSqlType *pt = qr_arena_calloc(cx->arena, ((size_t)XW + 1) * sizeof *pt);
    if (!px || !pt)
        return nomem(cx);
    for (int i = 0; i < n_tg; i++) {
        px[i] = tg[i].e;
        pt[i] = want ? want[i] : s->cols[i].type;
    }
    for (int i = 0; i < n_extra; i++) {
        px[n_tg + i] = extra[i];
        pt[n_tg + i] = extra[i]->type == QR_SQL_UNKNOWN ? QR_SQL_TEXT : extra[i]->type;
    }
    if (!(tree = sql_op_project(cx, tree, px, XW, pt, in_width, grouped, has_srf)))
        return cx->err->code;
    if (distinct && !(tree = sql_op_unique(cx, tree, n_tg)))
        return cx->err->code;
    for (int i = 0; i < n_sort; i++) {
        const SqlExpr *ke = keys[i].col < n_tg ? tg[keys[i].col].e : extra[keys[i].col - n_tg];
        keys[i].label = sql_expr_sql(cx, ke, &s->scope, s->n_items > 1);
    }
    if (s->n_distinct_on) {
        /* DISTINCT ON: every row sorted, the first of each run of equal keys */
        if (!(tree = sql_op_sort(cx, tree, keys, n_sort)) ||
            !(tree = sql_op_unique_on(cx, tree, s->distinct_on, s->n_distinct_on)))
            return cx->err->code;
    } else if (topn) {
        if (!(tree = sql_op_topn(cx, tree, keys, n_sort, limit + offset)))
            return cx->err->code;
        if (sc0 && sc0->order_on)
            sc0->order_arg = tree;
    } else if (n_sort && !(tree = sql_op_sort(cx, tree, keys, n_sort))) {
        return cx->err->code;
    }
    if ((limit != UINT64_MAX || offset) && !(tree = sql_op_limit(cx, tree, limit, offset)))
        return cx->err->code;
    if (sc0 && sc0->rank_on)
        sql_op_limit_less(tree, &sc0->rank_before);
    tree->scope = &s->scope;
    *out = tree;
    return QR_OK;
}

/* ---- set operations and VALUES ---- */

/* The types a set operation's branches are cast to. */
static const QrSqlType *col_types(SqlCtx *cx, const SqlQuery *q, const QrSqlType *want)
{
    if (want)
        return want;
    QrSqlType *t = qr_arena_alloc(cx->arena, ((size_t)q->n_cols + 1) * sizeof *t);
    for (int c = 0; t && c < q->n_cols; c++)
        t[c] = q->cols[c].type;
    if (!t)
        nomem(cx);
    return t;
}

/* UNION [ALL] (Append, then distinct rows through a hash), INTERSECT /
 * EXCEPT [ALL] (HashSetOp), the branches cast to the result's types. */
static int plan_setop(SqlPlanRun *pr, SqlQuery *q, const QrSqlType *want, SqlOp **out)
{
    SqlCtx *cx = q->cx;
    const QrSqlType *types = col_types(cx, q, want);
    SqlOp *l, *r, *t;
    uint64_t limit, offset;
    int rc, W = q->n_cols;
    if (!types)
        return cx->err->code;
    if ((rc = sql_plan_query(pr, cx, q->larg, types, &l)) || (rc = sql_plan_query(pr, cx, q->rarg, types, &r)) ||
        (rc = limit_value(cx, q->limit, UINT64_MAX, &limit)) || (rc = limit_value(cx, q->offset, 0, &offset)))
        return rc;
    if (!strcmp(q->setop, "UNION")) {
        t = sql_op_append(cx, l, r, W);
        if (t && !q->all)
            t = sql_op_unique(cx, t, W);
    } else {
        t = sql_op_setop(cx, l, r, W, !strcmp(q->setop, "EXCEPT"), q->all);
    }
    if (!t)
        return cx->err->code;
    *out = t;
    return finish(cx, out, q->keys, q->n_sort, limit, offset);
}

/* VALUES: the rows evaluated now (they may read parameters and outer
 * queries' columns), cast to the column types. */
static int plan_values(SqlQuery *q, const QrSqlType *want, SqlOp **out)
{
    SqlCtx *cx = q->cx;
    int n_cols = q->n_cols, rc;
    SqlValue *vals = qr_arena_alloc(cx->arena, ((uint64_t)q->n_rows * (uint64_t)n_cols + 1) * sizeof *vals);
    if (!vals)
        return nomem(cx);
    SqlEvalRow er = {.doc = -1};
    for (int i = 0; i < q->n_rows * n_cols; i++) {
        SqlValue v;
        QrSqlType t = want ? want[i % n_cols] : q->cols[i % n_cols].type;
        if ((rc = sql_expr_eval(cx, q->cells[i], &er, &v)) || (rc = sqlv_cast(cx, &v, t, q->cells[i]->loc, &vals[i])))
            return rc;
    }
    q->values = (SqlRowSet){vals, (uint64_t)q->n_rows, n_cols};
    uint64_t limit, offset;
    if ((rc = limit_value(cx, q->limit, UINT64_MAX, &limit)) || (rc = limit_value(cx, q->offset, 0, &offset)))
        return rc;
    if (!(*out = sql_op_rows(cx, &q->values, 0, n_cols, NULL, 0, "Values Scan")))
        return cx->err->code;
    return finish(cx, out, q->keys, q->n_sort, limit, offset);
}

/* WITH RECURSIVE: the non-recursive term, then the recursive one over the
 * working table the Recursive Union fills. */
static int plan_recursive(SqlPlanRun *pr, SqlQuery *q, const QrSqlType *want, SqlOp **out)
{
    SqlCtx *cx = q->cx;
    SqlCteDef *d = q->cte;
    const QrSqlType *types = col_types(cx, q, want);
    SqlOp *init, *step;
    int rc;
    if (!types)
        return cx->err->code;
    if ((rc = sql_plan_query(pr, cx, q->larg, types, &init)))
        return rc;
    if (!(d->wt = qr_arena_calloc(cx->arena, sizeof *d->wt)))
        return nomem(cx);
    d->wt->n_cols = q->n_cols;
    if ((rc = sql_plan_query(pr, cx, q->rarg, types, &step)))
        return rc;
    *out = sql_op_recursive(cx, init, step, d->wt, q->n_cols, !q->all, d->name);
    return *out ? QR_OK : cx->err->code;
}

int sql_plan_query(SqlPlanRun *pr, SqlCtx *cx, SqlQuery *q, const QrSqlType *want, SqlOp **out)
{
    *out = NULL;
    if (sql_check_now(cx))
        return cx->err->code;
    q->cx = cx;
    if (pr->n == pr->cap) {
        int nc = pr->cap ? pr->cap * 2 : 8;
        SqlQuery **nb = qr_arena_alloc(cx->arena, (size_t)nc * sizeof *nb);
        if (!nb)
            return nomem(cx);
        if (pr->n)
            memcpy(nb, pr->blocks, (size_t)pr->n * sizeof *nb);
        pr->blocks = nb;
        pr->cap = nc;
    }
    pr->blocks[pr->n++] = q;
    /* WITH queries read more than once (or MATERIALIZED): their rows now,
     * each planned and run on its own */
    for (int i = 0; i < q->n_ctes; i++) {
        SqlCteDef *d = q->ctes[i];
        if (sql_cte_inline(d) || d->n_refs == 0 || d->ready)
            continue;
        memset(&d->rows, 0, sizeof d->rows);
        int rc = run_sub(cx, d->q, &d->rows);
        if (rc)
            return rc;
        d->rows.cols = d->cols;
        d->set = (SqlRowSet){d->rows.vals, d->rows.n_rows, d->n_cols};
        d->ready = true;
    }
    switch (q->kind) {
    case SQL_Q_SETOP:
        return plan_setop(pr, q, want, out);
    case SQL_Q_VALUES:
        return plan_values(q, want, out);
    case SQL_Q_RECURSIVE:
        return plan_recursive(pr, q, want, out);
    case SQL_Q_SELECT:
        break;
    }
    return plan_plain(pr, q, want, out);
}

int sql_query_exec(SqlCtx *cx, SqlQuery *q, QrSqlResult *out)
{
    memset(out, 0, sizeof *out);
    out->arena = cx->arena;
    SqlPlanRun pr = {0};
    SqlOp *tree = NULL;
    int rc = sql_plan_query(&pr, cx, q, NULL, &tree);
    out->n_cols = q->n_cols;
    out->cols = q->cols;
    bool run = !(cx->ex && !cx->ex->analyze);
    if (rc == QR_OK && run) {
        SqlRowSink sink = {.width = q->n_cols};
        if ((rc = sql_op_drain(tree, cx, &sink)) == QR_OK) {
            out->vals = sink.rows;
            out->n_rows = sink.n;
            if (!out->vals && !(out->vals = qr_arena_calloc(cx->arena, sizeof *out->vals)))
                rc = nomem(cx);
        }
    }
    if (rc == QR_OK) {
        if (run)
            sql_op_scan_notes(cx, tree);
        sql_explain_tree(cx, tree, q->kind == SQL_Q_SELECT ? &q->scope : NULL, cx->depth);
    }
    /* run-time state of every block planned: subquery caches, WITH rows */
    for (int i = 0; i < pr.n; i++) {
        sql_subq_free_all(pr.blocks[i]->subqs);
        for (int k = 0; k < pr.blocks[i]->n_ctes; k++)
            pr.blocks[i]->ctes[k]->ready = false;
    }
    return rc;
}
