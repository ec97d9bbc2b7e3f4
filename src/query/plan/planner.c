/*
 * planner.c — from a bound query (plan.h) to a tree of exec/ operators,
 * then the run: WITH queries and FROM subqueries first (their rows
 * materialized), each table's conditions pushed to its scan and its access
 * path costed (sql_scan.c), joins left-deep in FROM order (hash joins on
 * equalities, nested loops otherwise), the WHERE conditions no scan or join
 * took, grouping (aggregates from column blocks, counts from the postings
 * or column statistics where they can answer), the select list, DISTINCT,
 * ORDER BY (a bounded top-N under LIMIT, feeding the ordered walk's stop
 * rule back to the scan), LIMIT.  Set operations and VALUES run here too.
 * The rules and the cost model are written in docs/planner.md.
 *
 * Layer: query/ (SQL).  Calls exec/ (operators), sql_scan.c, sql_expr.c and
 * the catalog hook.
 */
#include "query/plan/plan.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int nomem(SqlCtx *cx) { return sql_nomem(cx); }

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

static int item_of_col(const SqlQuery *s, int col)
{
    for (int i = 0; i < s->n_items; i++)
        if (col >= s->items[i].first && col < s->items[i].first + s->items[i].n_cols)
            return i;
    return -1;
}

static uint64_t expr_items(const SqlQuery *s, const SqlExpr *e)
{
    uint64_t m = 0;
    if (!e)
        return 0;
    if (e->kind == SE_COL || e->kind == SE_SCORE || e->kind == SE_SNIPPET) {
        int i = item_of_col(s, e->col);
        if (i >= 0)
            m |= 1ull << i;
    }
    if (e->kind == SE_MATCH) {
        int i = item_of_col(s, e->text->id_col);
        if (i >= 0)
            m |= 1ull << i;
    }
    for (int k = 0; k < e->n_args; k++)
        m |= expr_items(s, e->args[k]);
    return m;
}

static int cast_column(SqlCtx *cx, QrSqlResult *r, int c, QrSqlType t)
{
    for (uint64_t i = 0; i < r->n_rows; i++) {
        SqlValue *v = &r->vals[i * (uint64_t)r->n_cols + (uint64_t)c];
        SqlValue o;
        if (v->type == t)
            continue;
        int rc = sqlv_cast(cx, v, t, -1, &o);
        if (rc)
            return rc;
        *v = o;
    }
    return QR_OK; /* (r->cols are the bound query's: the caller types its output) */
}

/* Rows of a result through DISTINCT, ORDER BY and LIMIT (set operations,
 * VALUES): the operators over the materialized rows. */
static int rows_finish(SqlCtx *cx, QrSqlResult *out, const SqlSortKey *keys, int nk, bool distinct,
                       uint64_t limit, uint64_t offset)
{
    if (!distinct && nk == 0 && limit == UINT64_MAX && offset == 0)
        return QR_OK;
    int W = out->n_cols;
    SqlOp *t = sql_op_rows(cx, out->vals, out->n_rows, W, 0, W, NULL, 0, "Result");
    if (t && distinct)
        t = sql_op_unique(cx, t, W);
    if (t && nk)
        t = limit != UINT64_MAX && limit + offset <= 100000 && limit + offset > 0
                ? sql_op_topn(cx, t, keys, nk, limit + offset)
                : sql_op_sort(cx, t, keys, nk);
    if (t && (limit != UINT64_MAX || offset))
        t = sql_op_limit(cx, t, limit, offset);
    if (!t)
        return cx->err->code;
    SqlRowSink sink = {.width = W};
    int rc = sql_op_drain(t, cx, &sink);
    if (rc)
        return rc;
    out->vals = sink.rows ? sink.rows : out->vals;
    out->n_rows = sink.n;
    return QR_OK;
}

/* ---- planner rules for aggregates ---- */

/* GROUP BY one keyword column of the query's one table (or no GROUP BY)
 * with only count(*) and count / sum / avg / min / max of its columns, no
 * FILTER or DISTINCT: the scan may aggregate from column blocks (it
 * decides when it runs, knowing the conditions and the column types). */
static int colagg_setup(SqlQuery *s, SqlAggSpec *spec)
{
    SqlCtx *cx = s->cx;
    SqlTableScan *sc = &s->items[0].scan;
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
    int n = spec->n_aggs;
    int *field = qr_arena_alloc(cx->arena, ((size_t)n + 1) * sizeof *field);
    if (!field)
        return nomem(cx);
    for (int k = 0; k < n; k++) {
        const SqlAgg *A = spec->aggs[k];
        if (A->filter || A->distinct ||
            (A->kind != SA_COUNT_STAR && A->kind != SA_COUNT && A->kind != SA_SUM &&
             A->kind != SA_AVG && A->kind != SA_MIN && A->kind != SA_MAX))
            return QR_OK;
        field[k] = -1;
        if (A->kind == SA_COUNT_STAR)
            continue;
        const SqlExpr *x = A->arg;
        if (x->kind != SE_COL || x->col < it->first || x->col >= it->first + it->n_cols ||
            s->scope.cols[x->col].field < 0)
            return QR_OK;
        field[k] = s->scope.cols[x->col].field;
    }
    spec->colagg_scan = sc;
    spec->colagg_col = gcol;
    spec->colagg_field = field;
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
    if (!(s->n_items == 1 && s->items[0].kind == SQL_ITEM_TABLE) || n_groups || having ||
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

/* ---- FROM items that are not tables: their rows now ---- */

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

static int item_rows(SqlCtx *cx, SqlItem *it)
{
    memset(&it->rows, 0, sizeof it->rows);
    switch (it->kind) {
    case SQL_ITEM_CTE:
        it->rows = it->cte->rows;
        return QR_OK;
    case SQL_ITEM_SUBQUERY:
        return run_sub(cx, it->sub, &it->rows);
    case SQL_ITEM_CATALOG:
        return catalog_rows(cx, it);
    case SQL_ITEM_FUNCTION: {
        const SqlExpr *e = it->srf;
        SqlValue argv[3];
        SqlEvalRow er = {.doc = -1};
        int rc;
        for (int i = 0; i < e->n_args; i++)
            if ((rc = sql_expr_eval(cx, e->args[i], &er, &argv[i])))
                return rc;
        it->rows.n_cols = 1;
        return sql_srf_rows(cx, e->name, e->n_args, argv, e->type, &it->rows.vals, &it->rows.n_rows);
    }
    case SQL_ITEM_TABLE:
        break;
    }
    return QR_OK;
}

/* ---- a plain SELECT ---- */

static int exec_plain(SqlQuery *s, QrSqlResult *out)
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
    out->n_cols = s->n_cols;
    out->cols = s->cols;
    /* run-time state from an earlier execution goes */
    for (int ii = 0; ii < s->n_items; ii++) {
        memset(&s->items[ii].scan, 0, sizeof s->items[ii].scan);
        s->items[ii].rows_conj = NULL;
        s->items[ii].n_rows_conj = 0;
        if (s->items[ii].kind != SQL_ITEM_TABLE && (rc = item_rows(cx, &s->items[ii])))
            return rc;
    }
    for (int i = 0; i < s->bind.n_texts; i++)
        s->bind.texts[i]->run = NULL;
    /* ---- plan: conjuncts to the scans and joins, then the tree ---- */
    bool *done = qr_arena_calloc(cx->arena, (size_t)(n_conj + 1) * sizeof *done);
    if (!done)
        return nomem(cx);
    bool const_false = false;
    for (int i = 0; i < n_conj; i++) {
        uint64_t m = expr_items(s, conj[i]);
        if (m == 0) {
            bool pass;
            SqlEvalRow er = {.doc = -1};
            if ((rc = sql_expr_test(cx, conj[i], &er, &pass)))
                return rc;
            if (!pass)
                const_false = true;
            done[i] = true;
        }
    }
    for (int ii = 0; ii < s->n_items; ii++) {
        SqlItem *it = &s->items[ii];
        if (it->kind != SQL_ITEM_TABLE) {
            /* materialized rows take the conditions on their own columns */
            it->n_rows_conj = 0;
            it->rows_conj = qr_arena_calloc(cx->arena, (size_t)(n_conj + 1) * sizeof *it->rows_conj);
            if (!it->rows_conj)
                return nomem(cx);
            for (int i = 0; i < n_conj && !it->left; i++)
                if (!done[i] && expr_items(s, conj[i]) == (1ull << ii)) {
                    it->rows_conj[it->n_rows_conj++] = conj[i];
                    done[i] = true;
                }
            continue;
        }
        SqlTableScan *sc = &it->scan;
        sc->t = it->t;
        sc->qual = it->qual;
        sc->scope = &s->scope;
        sc->first = it->first;
        sc->n_cols = it->n_cols;
        sc->drive = -1;
        sc->topk = -1;
        sc->conj = qr_arena_calloc(cx->arena, (size_t)(n_conj + 1) * sizeof *sc->conj);
        sc->texts = qr_arena_calloc(cx->arena, (size_t)(s->bind.n_texts + 1) * sizeof *sc->texts);
        if (!sc->conj || !sc->texts)
            return nomem(cx);
        for (int i = 0; i < s->bind.n_texts; i++)
            if (item_of_col(s, s->bind.texts[i]->id_col) == ii)
                sc->texts[sc->n_texts++] = s->bind.texts[i];
        if (!it->left)
            for (int i = 0; i < n_conj; i++)
                if (!done[i] && expr_items(s, conj[i]) == (1ull << ii)) {
                    sc->conj[sc->n_conj++] = conj[i];
                    done[i] = true;
                    if (conj[i]->kind == SE_MATCH && sc->drive < 0)
                        for (int k2 = 0; k2 < sc->n_texts; k2++)
                            if (sc->texts[k2] == conj[i]->text)
                                sc->drive = k2;
                }
    }
    bool one_table = s->n_items == 1 && s->items[0].kind == SQL_ITEM_TABLE;
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
        if (by_score && sc0->drive >= 0 && sc0->n_conj == n_conj && sc0->n_texts == 1)
            sc0->topk = (int64_t)(limit + offset);
    }
    /* ORDER BY a column of the one table LIMIT k: the scan may walk the
     * column's blocks best zone-map bound first, asking the top-N above */
    bool topn = n_sort && limit != UINT64_MAX && !distinct && !s->n_distinct_on &&
                limit + offset <= 100000 && limit + offset > 0;
    if (topn && one_table && !grouped && !has_srf && !all_rows) {
        const SqlExpr *k0 = keys[0].col < n_tg ? tg[keys[0].col].e : extra[keys[0].col - n_tg];
        if (k0->kind == SE_COL && k0->col >= sc0->first && k0->col < sc0->first + sc0->n_cols) {
            sc0->order_on = true;
            sc0->order_col = k0->col;
            sc0->order_desc = keys[0].desc;
            sc0->order_nulls_first = keys[0].nulls_first;
            sc0->order_may_enter = sql_topn_may_enter;
        }
    }
    /* EXPLAIN (SCORES): the outermost query's first table with a text predicate */
    for (int ii = 0; ii < s->n_items && cx->scores && cx->depth == 0 && !cx->scores_scan; ii++)
        if (s->items[ii].kind == SQL_ITEM_TABLE && s->items[ii].scan.drive >= 0) {
            s->items[ii].scan.keep_docs = true;
            cx->scores_scan = &s->items[ii].scan;
        }
    int W = s->scope.n;
    /* the leaves, joined left-deep in FROM order */
    SqlOp *tree = NULL;
    if (s->n_items == 0 || const_false)
        tree = sql_op_result(cx, W, NULL, NULL, const_false, "Result", NULL, NULL);
    for (int ii = 0; ii < s->n_items && !const_false; ii++) {
        SqlItem *it = &s->items[ii];
        SqlOp *leaf;
        if (it->kind == SQL_ITEM_TABLE) {
            if ((rc = sql_scan_plan(cx, &it->scan)))
                return rc;
            leaf = sql_op_scan(cx, &it->scan, W);
        } else {
            leaf = sql_op_rows(cx, it->rows.vals, it->rows.n_rows, it->n_cols, it->first, W,
                               it->rows_conj, it->n_rows_conj, it->label);
        }
        if (!leaf)
            return cx->err->code;
        if (ii == 0) {
            tree = leaf;
            continue;
        }
        /* the conditions this join applies: over items 0..ii, not applied yet
         * (LEFT: its ON conditions), equalities between the sides as keys */
        uint64_t left_mask = (1ull << ii) - 1, me = 1ull << ii;
        SqlExpr **cond = it->left ? it->on_conj : conj;
        int n_cond = it->left ? it->n_on : n_conj;
        SqlJoinSpec js = {.first = it->first, .n_cols = it->n_cols, .left = it->left,
                          .inner_name = it->qual};
        js.lk = qr_arena_calloc(cx->arena, 17 * sizeof *js.lk);
        js.rk = qr_arena_calloc(cx->arena, 17 * sizeof *js.rk);
        js.cond = qr_arena_calloc(cx->arena, (size_t)(n_cond + 1) * sizeof *js.cond);
        if (!js.lk || !js.rk || !js.cond)
            return nomem(cx);
        for (int i = 0; i < n_cond; i++) {
            if (!it->left && done[i])
                continue;
            SqlExpr *e = cond[i];
            uint64_t m = expr_items(s, e);
            if ((m & ~(left_mask | me)) != 0)
                continue; /* needs a later item */
            js.cond[js.n_cond++] = e; /* a key is tested per pair too: hashes collide */
            if (!it->left)
                done[i] = true;
            if (e->kind == SE_CMP && e->op == SQL_CMP_EQ && js.n_keys < 16) {
                uint64_t a = expr_items(s, e->args[0]), b = expr_items(s, e->args[1]);
                if (a && b && !(a & me) && b == me) {
                    js.lk[js.n_keys] = e->args[0];
                    js.rk[js.n_keys++] = e->args[1];
                } else if (a && b && !(b & me) && a == me) {
                    js.lk[js.n_keys] = e->args[1];
                    js.rk[js.n_keys++] = e->args[0];
                }
            }
        }
        tree = js.n_keys ? sql_op_hash_join(cx, tree, leaf, &js) : sql_op_nl_join(cx, tree, leaf, &js);
        if (!tree)
            return cx->err->code;
    }
    if (!tree)
        return cx->err->code;
    /* WHERE conjuncts no scan or join took */
    SqlExpr **post = qr_arena_calloc(cx->arena, (size_t)(n_conj + 1) * sizeof *post);
    int n_post = 0;
    if (!post)
        return nomem(cx);
    for (int i = 0; i < n_conj; i++)
        if (!done[i])
            post[n_post++] = conj[i];
    if (n_post && !const_false && !(tree = sql_op_filter(cx, tree, post, n_post)))
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
        pt[i] = out->cols[i].type;
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
    /* run */
    bool run = !(cx->ex && !cx->ex->analyze);
    if (run) {
        SqlRowSink sink = {.width = n_tg};
        if ((rc = sql_op_drain(tree, cx, &sink)))
            return rc;
        out->vals = sink.rows;
        out->n_rows = sink.n;
        if (!out->vals && !(out->vals = qr_arena_calloc(cx->arena, sizeof *out->vals)))
            return nomem(cx);
    }
    for (int ii = 0; ii < s->n_items; ii++)
        if (s->items[ii].kind == SQL_ITEM_TABLE && run)
            sql_scan_note(cx, &s->items[ii].scan);
    sql_explain_tree(cx, tree, &s->scope, cx->depth);
    return QR_OK;
}


/* ---- set operations and VALUES ---- */

static int exec_setop(SqlQuery *q, QrSqlResult *out)
{
    SqlCtx *cx = q->cx;
    QrSqlResult l, r;
    memset(&l, 0, sizeof l);
    memset(&r, 0, sizeof r);
    int rc;
    if ((rc = run_sub(cx, q->larg, &l)) || (rc = run_sub(cx, q->rarg, &r)))
        return rc;
    bool run = !(cx->ex && !cx->ex->analyze);
    out->n_cols = q->n_cols;
    out->cols = q->cols;
    if (!run)
        return QR_OK;
    for (int c = 0; c < q->n_cols; c++)
        if ((rc = cast_column(cx, &l, c, q->cols[c].type)) || (rc = cast_column(cx, &r, c, q->cols[c].type)))
            return rc;
    uint64_t n = l.n_rows + r.n_rows;
    SqlValue *v = qr_arena_alloc(cx->arena, (n * (uint64_t)q->n_cols + 1) * sizeof *v);
    if (!v)
        return nomem(cx);
    if (l.n_rows)
        memcpy(v, l.vals, l.n_rows * (uint64_t)q->n_cols * sizeof *v);
    if (r.n_rows)
        memcpy(v + l.n_rows * (uint64_t)q->n_cols, r.vals, r.n_rows * (uint64_t)q->n_cols * sizeof *v);
    out->vals = v;
    out->n_rows = n;
    uint64_t limit, offset;
    if ((rc = limit_value(cx, q->limit, UINT64_MAX, &limit)) ||
        (rc = limit_value(cx, q->offset, 0, &offset)))
        return rc;
    if (!q->all && (rc = rows_finish(cx, out, NULL, 0, true, UINT64_MAX, 0)))
        return rc;
    return rows_finish(cx, out, q->keys, q->n_sort, false, limit, offset);
}

static int exec_values(SqlQuery *q, QrSqlResult *out)
{
    SqlCtx *cx = q->cx;
    int n_cols = q->n_cols, rc;
    out->n_cols = n_cols;
    out->cols = q->cols;
    out->n_rows = (uint64_t)q->n_rows;
    out->vals = qr_arena_alloc(cx->arena, ((uint64_t)q->n_rows * (uint64_t)n_cols + 1) * sizeof *out->vals);
    if (!out->vals)
        return nomem(cx);
    SqlEvalRow er = {.doc = -1};
    for (int i = 0; i < q->n_rows * n_cols; i++) {
        SqlValue v;
        if ((rc = sql_expr_eval(cx, q->cells[i], &er, &v)) ||
            (rc = sqlv_cast(cx, &v, q->cols[i % n_cols].type, q->cells[i]->loc, &out->vals[i])))
            return rc;
    }
    uint64_t limit, offset;
    if ((rc = limit_value(cx, q->limit, UINT64_MAX, &limit)) ||
        (rc = limit_value(cx, q->offset, 0, &offset)))
        return rc;
    return rows_finish(cx, out, q->keys, q->n_sort, false, limit, offset);
}

int sql_query_exec(SqlCtx *cx, SqlQuery *q, QrSqlResult *out)
{
    memset(out, 0, sizeof *out);
    out->arena = cx->arena;
    if (sql_check_now(cx))
        return cx->err->code;
    q->cx = cx;
    int rc = QR_OK;
    /* WITH queries: each materialized once, before the body */
    for (int i = 0; i < q->n_ctes && rc == QR_OK; i++) {
        SqlCteDef *d = q->ctes[i];
        memset(&d->rows, 0, sizeof d->rows);
        rc = run_sub(cx, d->q, &d->rows);
        d->rows.cols = d->cols;
        d->ready = rc == QR_OK;
    }
    if (rc == QR_OK)
        rc = q->kind == SQL_Q_SETOP  ? exec_setop(q, out)
             : q->kind == SQL_Q_VALUES ? exec_values(q, out)
                                       : exec_plain(q, out);
    sql_subq_free_all(q->subqs);
    for (int i = 0; i < q->n_ctes; i++)
        q->ctes[i]->ready = false;
    return rc;
}
