/*
 * bind.c — the binder: libpg_query's tree of a SELECT (with its WITH
 * queries, set operations, VALUES, FROM items, joins, WHERE, select list,
 * GROUP BY, HAVING, ORDER BY, LIMIT) into a bound SqlQuery (plan.h).  Names
 * resolve to columns of the query's scope (every FROM item's columns in
 * order) or of enclosing queries, types are inferred and checked,
 * aggregates and text predicates collected, subqueries bound in turn.
 * Nothing is evaluated or read here: a bound query is planned and run by
 * planner.c, as many times as its statement is executed.
 *
 * Layer: query/ (SQL).  Calls sql_expr.c (expressions), sql_scan.c (a
 * table's SQL columns) and the catalog hook (a catalog relation's columns).
 */
#include "query/plan/plan_int.h"
#include "query/sql_w.h"

#include <stdio.h>
#include <string.h>

static int nomem(SqlCtx *cx) { return sql_nomem(cx); }

static int bind_body(SqlCtx *cx, const cJSON *body, SqlQuery **out);

/* A subquery of this one (FROM, WITH, set operation): one level deeper. */
int sql_bind_sub(SqlCtx *cx, const cJSON *body, SqlQuery **out)
{
    cx->depth++;
    int rc = bind_body(cx, body, out);
    cx->depth--;
    return rc;
}

/* ---- expression helpers ---- */

/* Does the expression hold a node of this kind (aggregates, set-returning
 * functions)? */
static bool expr_has_kind(const SqlExpr *e, SqlExprKind kind)
{
    if (e->kind == kind)
        return true;
    for (int k = 0; k < e->n_args; k++)
        if (expr_has_kind(e->args[k], kind))
            return true;
    return false;
}

static bool expr_has_agg(const SqlExpr *e) { return expr_has_kind(e, SE_AGG); }
static bool expr_has_srf(const SqlExpr *e) { return expr_has_kind(e, SE_SRF); }

static bool expr_equal(const SqlExpr *a, const SqlExpr *b)
{
    if (a->kind != b->kind || a->op != b->op || a->col != b->col || a->n_args != b->n_args ||
        a->fn != b->fn || a->type != b->type)
        return false;
    if (a->kind == SE_CONST && !(a->val.is_null == b->val.is_null &&
                                 (a->val.is_null || sqlv_cmp(&a->val, &b->val) == 0)))
        return false;
    if (a->kind == SE_FUNC && !a->fn && strcmp(a->name, b->name) != 0)
        return false;
    if (a->kind == SE_MATCH && a->text != b->text)
        return false;
    if (a->kind == SE_SUBQ && a->subq != b->subq)
        return false;
    for (int k = 0; k < a->n_args; k++)
        if (!expr_equal(a->args[k], b->args[k]))
            return false;
    return true;
}

/* Every column outside aggregates must be grouped (or inside a grouped
 * expression).  Returns the offending column expression or NULL. */
static const SqlExpr *ungrouped(const SqlExpr *e, SqlExpr **groups, int n_groups)
{
    if (e->kind == SE_AGG)
        return NULL;
    for (int g = 0; g < n_groups; g++)
        if (expr_equal(e, groups[g]))
            return NULL;
    if (e->kind == SE_COL || e->kind == SE_SCORE || e->kind == SE_SNIPPET || e->kind == SE_MATCH)
        return e;
    for (int k = 0; k < e->n_args; k++) {
        const SqlExpr *x = ungrouped(e->args[k], groups, n_groups);
        if (x)
            return x;
    }
    return NULL;
}

int sql_add_conj(SqlCtx *cx, SqlExpr *e, SqlExpr ***v, int *n, int *cap)
{
    if (e->kind == SE_AND) {
        for (int k = 0; k < e->n_args; k++) {
            int rc = sql_add_conj(cx, e->args[k], v, n, cap);
            if (rc)
                return rc;
        }
        return QR_OK;
    }
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        SqlExpr **nv = qr_arena_alloc(cx->arena, (size_t)nc * sizeof *nv);
        if (!nv)
            return nomem(cx);
        if (*n)
            memcpy(nv, *v, (size_t)*n * sizeof *nv);
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = e;
    return QR_OK;
}

int sql_bind_bool(SqlQuery *s, const cJSON *node, const char *what, SqlExpr **out)
{
    int rc = sql_expr_bind(&s->bind, node, out);
    if (rc)
        return rc;
    SqlExpr *e = *out;
    if (e->kind == SE_CONST && e->type == QR_SQL_UNKNOWN) {
        SqlValue v;
        if ((rc = sqlv_cast(s->cx, &e->val, QR_SQL_BOOL, e->loc, &v)))
            return rc;
        e->val = v;
        e->type = QR_SQL_BOOL;
    }
    if (e->type != QR_SQL_BOOL)
        return sql_err_at(s->cx, e->loc, QR_ETYPE, "42804", "argument of %s must be type boolean, not type %s",
                          what, qr_sql_type_name(e->type));
    return QR_OK;
}

static int expand_star(SqlQuery *s, const char *qual, int loc, SqlTarget **tg, int *n, int *cap)
{
    int *cols, n_cols;
    int rc = sql_star_cols(s, qual, loc, &cols, &n_cols);
    if (rc)
        return rc;
    for (int k = 0; k < n_cols; k++) {
        int i = cols[k];
        SqlCol *c = &s->scope.cols[i];
        if (*n == *cap) {
            int nc = *cap * 2 + 16;
            SqlTarget *nt = qr_arena_alloc(s->cx->arena, (size_t)nc * sizeof *nt);
            if (!nt)
                return nomem(s->cx);
            if (*n)
                memcpy(nt, *tg, (size_t)*n * sizeof *nt);
            *tg = nt;
            *cap = nc;
        }
        SqlExpr *e = qr_arena_calloc(s->cx->arena, sizeof *e);
        if (!e)
            return nomem(s->cx);
        e->kind = SE_COL;
        e->col = i;
        e->type = c->type;
        e->typmod = c->typmod;
        e->name = c->name;
        e->loc = loc;
        c->used = true;
        (*tg)[(*n)++] = (SqlTarget){e, c->name, i};
    }
    return QR_OK;
}

QrSqlType sql_union_type(QrSqlType a, QrSqlType b)
{
    if (a == b)
        return a;
    if (a == QR_SQL_UNKNOWN)
        return b;
    if (b == QR_SQL_UNKNOWN)
        return a;
    if (sqlt_is_num(a) && sqlt_is_num(b))
        return sqlt_num_common(a, b);
    if (sqlt_is_str(a) && sqlt_is_str(b))
        return QR_SQL_TEXT;
    if (sqlt_is_ts(a) && sqlt_is_ts(b))
        return QR_SQL_TIMESTAMPTZ;
    return QR_SQL_TYPE_COUNT; /* no common type */
}


/* LIMIT / OFFSET: bound here, evaluated when the query runs. */
static int bind_limit(SqlCtx *cx, const cJSON *node, SqlExpr **out)
{
    *out = NULL;
    return node ? sql_expr_compile(cx, node, NULL, out) : QR_OK;
}

/* ORDER BY of a set operation or VALUES: output columns only. */
static int bind_output_order(SqlCtx *cx, const cJSON *body, SqlQuery *q)
{
    const cJSON *sort = sqlj_get(body, "sortClause");
    int n = cJSON_GetArraySize(sort);
    if (n > 32)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "too many ORDER BY items");
    q->keys = qr_arena_calloc(cx->arena, (size_t)(n + 1) * sizeof *q->keys);
    if (!q->keys)
        return nomem(cx);
    const cJSON *it;
    cJSON_ArrayForEach(it, sort)
    {
        const cJSON *sb = sqlj_is(it, "SortBy");
        const cJSON *node = sqlj_get(sb, "node");
        int col = -1;
        const cJSON *ac = sqlj_is(node, "A_Const");
        const cJSON *cr = sqlj_is(node, "ColumnRef");
        if (ac && sqlj_get(ac, "ival")) {
            int k = sqlj_int(sqlj_get(ac, "ival"), "ival", 0);
            if (k < 1 || k > q->n_cols)
                return sql_err_at(cx, sqlj_loc(node), QR_EINVAL, "42P10",
                                  "ORDER BY position %d is not in select list", k);
            col = k - 1;
        } else if (cr && cJSON_GetArraySize(sqlj_get(cr, "fields")) == 1) {
            const char *nm = sqlj_sval(cJSON_GetArrayItem(sqlj_get(cr, "fields"), 0));
            for (int c = 0; c < q->n_cols && col < 0; c++)
                if (nm && !strcmp(q->cols[c].name, nm))
                    col = c;
        }
        if (col < 0)
            return sql_err_at(cx, sqlj_loc(node), QR_EUNSUPPORTED, "0A000",
                              "ORDER BY on a UNION or VALUES must name an output column");
        const char *dir = sqlj_str(sb, "sortby_dir"), *nl = sqlj_str(sb, "sortby_nulls");
        bool desc = dir && !strcmp(dir, "SORTBY_DESC");
        q->keys[q->n_sort++] = (SqlSortKey){col, desc,
                                            nl && !strcmp(nl, "SORTBY_NULLS_FIRST") ? true
                                            : nl && !strcmp(nl, "SORTBY_NULLS_LAST") ? false
                                                                                     : desc,
                                            q->cols[col].name};
    }
    int rc;
    if ((rc = bind_limit(cx, sqlj_get(body, "limitCount"), &q->limit)) ||
        (rc = bind_limit(cx, sqlj_get(body, "limitOffset"), &q->offset)))
        return rc;
    return QR_OK;
}

static int bind_setop(SqlCtx *cx, const cJSON *body, const char *op, SqlQuery *q)
{
    q->kind = SQL_Q_SETOP;
    q->all = sqlj_bool(body, "all");
    q->setop = !strcmp(op, "SETOP_INTERSECT") ? "INTERSECT" : !strcmp(op, "SETOP_EXCEPT") ? "EXCEPT" : "UNION";
    int rc;
    if ((rc = sql_bind_sub(cx, sqlj_get(body, "larg"), &q->larg)) ||
        (rc = sql_bind_sub(cx, sqlj_get(body, "rarg"), &q->rarg)))
        return rc;
    const SqlQuery *l = q->larg, *r = q->rarg;
    if (l->n_cols != r->n_cols)
        return sql_err_at(cx, -1, QR_ESYNTAX, "42601", "each %s query must have the same number of columns",
                          q->setop);
    q->n_cols = l->n_cols;
    q->cols = qr_arena_calloc(cx->arena, (size_t)(l->n_cols + 1) * sizeof *q->cols);
    if (!q->cols)
        return nomem(cx);
    for (int c = 0; c < l->n_cols; c++) {
        QrSqlType t = sql_union_type(l->cols[c].type, r->cols[c].type);
        if (t == QR_SQL_TYPE_COUNT)
            return sql_err_at(cx, -1, QR_ETYPE, "42804", "%s types %s and %s cannot be matched", q->setop,
                              qr_sql_type_name(l->cols[c].type), qr_sql_type_name(r->cols[c].type));
        q->cols[c] = l->cols[c];
        q->cols[c].type = t == QR_SQL_UNKNOWN ? QR_SQL_TEXT : t;
        q->cols[c].table_oid = 0;
        q->cols[c].attnum = 0;
    }
    return bind_output_order(cx, body, q);
}

static int bind_values(SqlCtx *cx, const cJSON *body, SqlQuery *q)
{
    const cJSON *lists = sqlj_get(body, "valuesLists");
    int n_rows = cJSON_GetArraySize(lists);
    int n_cols = cJSON_GetArraySize(sqlj_get(sqlj_is(cJSON_GetArrayItem(lists, 0), "List"), "items"));
    q->kind = SQL_Q_VALUES;
    q->n_cols = n_cols;
    q->n_rows = n_rows;
    q->cols = qr_arena_calloc(cx->arena, (size_t)(n_cols + 1) * sizeof *q->cols);
    q->cells = qr_arena_calloc(cx->arena, ((size_t)n_rows * (size_t)n_cols + 1) * sizeof *q->cells);
    if (!q->cols || !q->cells)
        return nomem(cx);
    int r = 0, rc;
    const cJSON *l;
    cJSON_ArrayForEach(l, lists)
    {
        const cJSON *items = sqlj_get(sqlj_is(l, "List"), "items");
        if (cJSON_GetArraySize(items) != n_cols)
            return sql_err_at(cx, sqlj_loc(l), QR_ESYNTAX, "42601",
                              "VALUES lists must all be the same length");
        for (int c = 0; c < n_cols; c++)
            if ((rc = sql_expr_compile(cx, cJSON_GetArrayItem(items, c), NULL, &q->cells[r * n_cols + c])))
                return rc;
        r++;
    }
    for (int c = 0; c < n_cols; c++) {
        QrSqlType t = QR_SQL_UNKNOWN;
        for (int i = 0; i < n_rows; i++) {
            t = sql_union_type(t, q->cells[i * n_cols + c]->type);
            if (t == QR_SQL_TYPE_COUNT)
                return sql_err_at(cx, q->cells[i * n_cols + c]->loc, QR_ETYPE, "42804",
                                  "VALUES types cannot be matched");
        }
        char name[24];
        snprintf(name, sizeof name, "column%d", c + 1);
        q->cols[c].name = qr_arena_strndup(cx->arena, name, strlen(name));
        q->cols[c].type = t == QR_SQL_UNKNOWN ? QR_SQL_TEXT : t;
        q->cols[c].typmod = -1;
    }
    return bind_output_order(cx, body, q);
}

/* One GROUP BY item: an output ordinal, an output name (when no input
 * column has it), else an expression over the input. */
int sql_bind_group_item(SqlQuery *s, const cJSON *g, SqlExpr **out)
{
    SqlCtx *cx = s->cx;
    SqlTarget *tg = s->tg;
    int n_tg = s->n_tg;
    const cJSON *ac = sqlj_is(g, "A_Const");
    const cJSON *cr = sqlj_is(g, "ColumnRef");
    const char *tag = sqlj_tag(g);
    if (tag && !strcmp(tag, "RowExpr"))
        return sql_err_at(cx, sqlj_loc(g), QR_EUNSUPPORTED, "0A000",
                          "GROUP BY a row expression is not supported");
    if (ac && sqlj_get(ac, "ival")) {
        int k = sqlj_int(sqlj_get(ac, "ival"), "ival", 0);
        if (k < 1 || k > n_tg)
            return sql_err_at(cx, sqlj_loc(g), QR_EINVAL, "42P10",
                              "GROUP BY position %d is not in select list", k);
        if (expr_has_agg(tg[k - 1].e))
            return sql_err_at(cx, sqlj_loc(g), QR_EINVAL, "42803",
                              "aggregate functions are not allowed in GROUP BY");
        if (expr_has_kind(tg[k - 1].e, SE_WIN))
            return sql_err_at(cx, sqlj_loc(g), QR_EINVAL, "42P20",
                              "window functions are not allowed in GROUP BY");
        *out = tg[k - 1].e;
        return QR_OK;
    }
    if (cr && cJSON_GetArraySize(sqlj_get(cr, "fields")) == 1) {
        const char *n = sqlj_sval(cJSON_GetArrayItem(sqlj_get(cr, "fields"), 0));
        bool in_scope = false;
        for (int i = 0; i < s->scope.n; i++)
            in_scope |= n && !strcmp(s->scope.cols[i].name, n);
        if (!in_scope) {
            int hit = -1;
            for (int k = 0; k < n_tg; k++)
                if (n && !strcmp(tg[k].name, n))
                    hit = k;
            if (hit >= 0) {
                *out = tg[hit].e;
                return QR_OK;
            }
        }
    }
    return sql_expr_bind(&s->bind, g, out);
}

/* DISTINCT ON (...): each item an output column (a position, an output
 * name, a target's expression or an extra ORDER BY key's, else a new
 * extra).  The ORDER BY must begin with them (PostgreSQL's rule: 42P10);
 * those it lacks are sorted by after it. */
static int bind_distinct_on(SqlQuery *s, const cJSON *don, SqlTarget *tg, int n_tg, SqlSortKey *keys,
                            int *n_sort, SqlExpr **extra, int *n_extra)
{
    SqlCtx *cx = s->cx;
    int n = cJSON_GetArraySize(don), rc, k = 0;
    int *cols = qr_arena_calloc(cx->arena, (size_t)(n + 1) * sizeof *cols);
    int *locs = qr_arena_calloc(cx->arena, (size_t)(n + 1) * sizeof *locs);
    bool *matched = qr_arena_calloc(cx->arena, (size_t)(n + 1) * sizeof *matched);
    if (!cols || !locs || !matched)
        return nomem(cx);
    const cJSON *it;
    cJSON_ArrayForEach(it, don)
    {
        const cJSON *ac = sqlj_is(it, "A_Const");
        const cJSON *cr = sqlj_is(it, "ColumnRef");
        int col = -1;
        locs[k] = sqlj_loc(it);
        if (ac && sqlj_get(ac, "ival")) {
            int p = sqlj_int(sqlj_get(ac, "ival"), "ival", 0);
            if (p < 1 || p > n_tg)
                return sql_err_at(cx, locs[k], QR_EINVAL, "42P10",
                                  "DISTINCT ON position %d is not in select list", p);
            col = p - 1;
        } else if (cr && cJSON_GetArraySize(sqlj_get(cr, "fields")) == 1) {
            const char *nm = sqlj_sval(cJSON_GetArrayItem(sqlj_get(cr, "fields"), 0));
            for (int i = 0; nm && i < n_tg && col < 0; i++)
                if (!strcmp(tg[i].name, nm))
                    col = i;
        }
        if (col < 0) {
            SqlExpr *e;
            if ((rc = sql_expr_bind(&s->bind, it, &e)))
                return rc;
            for (int i = 0; i < n_tg + *n_extra && col < 0; i++)
                if (expr_equal(e, i < n_tg ? tg[i].e : extra[i - n_tg]))
                    col = i;
            if (col < 0) {
                col = n_tg + *n_extra;
                extra[(*n_extra)++] = e;
            }
        }
        cols[k++] = col;
    }
    bool skipped = false;
    for (int i = 0; i < *n_sort; i++) {
        const SqlExpr *ke = keys[i].col < n_tg ? tg[keys[i].col].e : extra[keys[i].col - n_tg];
        bool in = false;
        for (int d = 0; d < n; d++) {
            const SqlExpr *de = cols[d] < n_tg ? tg[cols[d]].e : extra[cols[d] - n_tg];
            if (cols[d] == keys[i].col || expr_equal(de, ke)) {
                in = true;
                if (skipped)
                    return sql_err_at(cx, locs[d], QR_EINVAL, "42P10",
                                      "SELECT DISTINCT ON expressions must match initial ORDER BY "
                                      "expressions");
                matched[d] = true;
            }
        }
        skipped |= !in;
    }
    for (int d = 0; d < n; d++) {
        if (matched[d])
            continue;
        if (skipped)
            return sql_err_at(cx, locs[d], QR_EINVAL, "42P10",
                              "SELECT DISTINCT ON expressions must match initial ORDER BY expressions");
        keys[(*n_sort)++] = (SqlSortKey){cols[d], false, false, NULL};
        matched[d] = true;
    }
    s->distinct_on = cols;
    s->n_distinct_on = n;
    return QR_OK;
}

/* ---- the main SELECT ---- */

static int bind_plain(SqlQuery *s, const cJSON *body)
{
    SqlCtx *cx = s->cx;
    int rc;
    if (sqlj_get(body, "intoClause"))
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000", "SELECT INTO is not supported");
    if (sqlj_get(body, "lockingClause"))
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000", "SELECT ... FOR UPDATE is not supported");
    const cJSON *dist = sqlj_get(body, "distinctClause");
    bool distinct = dist != NULL;
    const cJSON *dist_on = NULL; /* DISTINCT ON (...): bound after ORDER BY */
    if (dist && cJSON_GetArraySize(dist) > 0 && sqlj_tag(cJSON_GetArrayItem(dist, 0))) {
        dist_on = dist;
        distinct = false;
    }
    s->bind.cx = cx;
    s->bind.scope = &s->scope;
    s->bind.bind_window = sql_bind_window_call;
    s->bind.bind_grouping = sql_bind_grouping_call;
    s->bind.hook_arg = s;
    /* FROM (its ON conditions bound with it) */
    s->clause = "JOIN conditions";
    if ((rc = sql_bind_from(s, sqlj_get(body, "fromClause"))))
        return rc;
    s->clause = "WHERE";
    /* WHERE (no aggregates) */
    SqlExpr **conj = NULL;
    int n_conj = 0, cap_conj = 0;
    const cJSON *where = sqlj_get(body, "whereClause");
    if (where) {
        SqlExpr *w;
        if ((rc = sql_bind_bool(s, where, "WHERE", &w)) || (rc = sql_add_conj(cx, w, &conj, &n_conj, &cap_conj)))
            return rc;
    }
    /* WINDOW w AS (...), then the target list (aggregates and windows allowed) */
    s->bind.allow_aggs = true;
    s->clause = "window definitions";
    if ((rc = sql_bind_window_clause(s, sqlj_get(body, "windowClause"))))
        return rc;
    s->clause = NULL;
    s->win_ok = true;
    SqlTarget *tg = NULL;
    int n_tg = 0, cap_tg = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, sqlj_get(body, "targetList"))
    {
        const cJSON *rt = sqlj_is(t, "ResTarget");
        const cJSON *val = sqlj_get(rt, "val");
        const cJSON *cr = sqlj_is(val, "ColumnRef");
        if (cr) {
            const cJSON *fields = sqlj_get(cr, "fields");
            int nf = cJSON_GetArraySize(fields);
            if (sqlj_is(cJSON_GetArrayItem(fields, nf - 1), "A_Star")) {
                if ((rc = expand_star(s, nf == 2 ? sqlj_sval(cJSON_GetArrayItem(fields, 0)) : NULL,
                                      sqlj_loc(val), &tg, &n_tg, &cap_tg)))
                    return rc;
                continue;
            }
        }
        if (n_tg == cap_tg) {
            int nc = cap_tg * 2 + 16;
            SqlTarget *nt = qr_arena_alloc(cx->arena, (size_t)nc * sizeof *nt);
            if (!nt)
                return nomem(cx);
            if (n_tg)
                memcpy(nt, tg, (size_t)n_tg * sizeof *nt);
            tg = nt;
            cap_tg = nc;
        }
        SqlExpr *e;
        if ((rc = sql_expr_bind(&s->bind, val, &e)))
            return rc;
        if (e->type == QR_SQL_UNKNOWN && e->kind == SE_CONST) {
            SqlValue v;
            if ((rc = sqlv_cast(cx, &e->val, QR_SQL_TEXT, e->loc, &v)))
                return rc;
            e->val = v;
            e->type = QR_SQL_TEXT;
        }
        const char *name = sqlj_str(rt, "name");
        tg[n_tg++] = (SqlTarget){e, name ? name : sql_expr_name(e), e->kind == SE_COL ? e->col : -1};
    }
    /* GROUP BY: expressions, output ordinals or output names; grouping sets */
    SqlExpr **groups = NULL;
    int n_groups = 0;
    const cJSON *gb = sqlj_get(body, "groupClause");
    int ng = cJSON_GetArraySize(gb);
    s->tg = tg;
    s->n_tg = n_tg;
    s->clause = "GROUP BY";
    s->win_ok = false;
    if (ng && sql_group_has_sets(gb)) {
        s->bind.allow_aggs = false;
        if ((rc = sql_bind_grouping_sets(s, gb, sqlj_bool(body, "groupDistinct"))))
            return rc;
        s->bind.allow_aggs = true;
        groups = s->groups;
        n_groups = s->n_groups;
    } else if (ng) {
        groups = qr_arena_calloc(cx->arena, (size_t)ng * sizeof *groups);
        if (!groups)
            return nomem(cx);
        const cJSON *g;
        s->bind.allow_aggs = false;
        cJSON_ArrayForEach(g, gb)
        {
            if ((rc = sql_bind_group_item(s, g, &groups[n_groups])))
                return rc;
            n_groups++;
        }
        s->bind.allow_aggs = true;
    }
    /* HAVING */
    SqlExpr *having = NULL;
    s->clause = "HAVING";
    if (sqlj_get(body, "havingClause") &&
        (rc = sql_bind_bool(s, sqlj_get(body, "havingClause"), "HAVING", &having)))
        return rc;
    /* ORDER BY: output names / ordinals, else expressions over the input */
    const cJSON *sortc = sqlj_get(body, "sortClause");
    int n_sort = cJSON_GetArraySize(sortc);
    int n_don = cJSON_GetArraySize(dist_on); /* DISTINCT ON may add sort keys and extras */
    SqlSortKey *keys = qr_arena_calloc(cx->arena, (size_t)(n_sort + n_don + 1) * sizeof *keys);
    SqlExpr **extra = qr_arena_calloc(cx->arena, (size_t)(n_sort + n_don + 1) * sizeof *extra);
    s->clause = NULL;
    s->win_ok = true;
    int n_extra = 0;
    if (!keys || !extra)
        return nomem(cx);
    int k = 0;
    cJSON_ArrayForEach(t, sortc)
    {
        const cJSON *sb = sqlj_is(t, "SortBy");
        const cJSON *node = sqlj_get(sb, "node");
        const char *dir = sqlj_str(sb, "sortby_dir"), *nl = sqlj_str(sb, "sortby_nulls");
        if (sqlj_get(sb, "useOp"))
            return sql_err_at(cx, sqlj_loc(node), QR_EUNSUPPORTED, "0A000", "ORDER BY USING is not supported");
        bool desc = dir && !strcmp(dir, "SORTBY_DESC");
        keys[k].desc = desc;
        keys[k].nulls_first = nl && !strcmp(nl, "SORTBY_NULLS_FIRST") ? true
                              : nl && !strcmp(nl, "SORTBY_NULLS_LAST") ? false
                                                                       : desc;
        keys[k].col = -1;
        const cJSON *ac = sqlj_is(node, "A_Const");
        const cJSON *cr = sqlj_is(node, "ColumnRef");
        if (ac && sqlj_get(ac, "ival")) {
            int p = sqlj_int(sqlj_get(ac, "ival"), "ival", 0);
            if (p < 1 || p > n_tg)
                return sql_err_at(cx, sqlj_loc(node), QR_EINVAL, "42P10",
                                  "ORDER BY position %d is not in select list", p);
            keys[k].col = p - 1;
        } else if (cr && cJSON_GetArraySize(sqlj_get(cr, "fields")) == 1) {
            const char *n = sqlj_sval(cJSON_GetArrayItem(sqlj_get(cr, "fields"), 0));
            int hit = -1, hits = 0;
            for (int i = 0; n && i < n_tg; i++)
                if (!strcmp(tg[i].name, n)) {
                    if (hit < 0 || !(tg[i].e->kind == SE_COL && tg[hit].e->kind == SE_COL &&
                                     tg[i].e->col == tg[hit].e->col))
                        hits++;
                    if (hit < 0)
                        hit = i;
                }
            if (hits > 1)
                return sql_err_at(cx, sqlj_loc(node), QR_EINVAL, "42702",
                                  "ORDER BY \"%s\" is ambiguous", n);
            keys[k].col = hit;
        }
        if (keys[k].col < 0) {
            SqlExpr *e;
            if ((rc = sql_expr_bind(&s->bind, node, &e)))
                return rc;
            /* the same expression as an output column: sort by that column */
            for (int i = 0; i < n_tg && keys[k].col < 0; i++)
                if (expr_equal(e, tg[i].e))
                    keys[k].col = i;
            if (keys[k].col < 0) {
                if (distinct)
                    return sql_err_at(cx, sqlj_loc(node), QR_EINVAL, "42P10",
                                      "for SELECT DISTINCT, ORDER BY expressions must appear in select list");
                keys[k].col = n_tg + n_extra;
                extra[n_extra++] = e;
            }
        }
        k++;
    }
    if (dist_on && (rc = bind_distinct_on(s, dist_on, tg, n_tg, keys, &n_sort, extra, &n_extra)))
        return rc;
    bool grouped = n_groups > 0 || s->bind.n_aggs > 0 || having || s->sets;
    /* set-returning functions: whole select-list items of an ungrouped query */
    bool has_srf = false;
    for (int i = 0; i < n_tg; i++) {
        const SqlExpr *e = tg[i].e;
        bool nested = false;
        for (int ai = 0; e->kind == SE_SRF && ai < e->n_args; ai++)
            nested |= expr_has_srf(e->args[ai]);
        if (nested || (e->kind != SE_SRF && expr_has_srf(e)) || (e->kind == SE_SRF && grouped))
            return sql_err_at(cx, e->loc, QR_EUNSUPPORTED, "0A000",
                              "set-returning functions are supported only as whole select-list "
                              "items of a query without GROUP BY or aggregates");
        has_srf |= e->kind == SE_SRF;
    }
    if (grouped) {
        for (int i = 0; i < n_tg; i++) {
            const SqlExpr *x = ungrouped(tg[i].e, groups, n_groups);
            if (x)
                return sql_err_at(cx, x->loc, QR_EINVAL, "42803",
                                  "column \"%s\" must appear in the GROUP BY clause or be used in an aggregate function",
                                  x->name ? x->name : "?");
        }
        for (int i = 0; i < n_extra; i++) {
            const SqlExpr *x = ungrouped(extra[i], groups, n_groups);
            if (x)
                return sql_err_at(cx, x->loc, QR_EINVAL, "42803",
                                  "column \"%s\" must appear in the GROUP BY clause or be used in an aggregate function",
                                  x->name ? x->name : "?");
        }
        const SqlExpr *x = having ? ungrouped(having, groups, n_groups) : NULL;
        if (x)
            return sql_err_at(cx, x->loc, QR_EINVAL, "42803",
                              "column \"%s\" must appear in the GROUP BY clause or be used in an aggregate function",
                              x->name ? x->name : "?");
    }
    for (int i = 0; i < n_conj; i++)
        if (expr_has_agg(conj[i]))
            return sql_err_at(cx, conj[i]->loc, QR_EINVAL, "42803",
                              "aggregate functions are not allowed in WHERE");
    /* windows over groups; grouped expressions read as grouping-set keys;
     * each window function's column */
    s->tg = tg;
    s->n_tg = n_tg;
    s->groups = groups;
    s->n_groups = n_groups;
    s->having = having;
    s->extra = extra;
    s->n_extra = n_extra;
    s->grouped = grouped;
    if ((rc = sql_bind_windows_check(s)) || (rc = sql_bind_grouping_finish(s)))
        return rc;
    tg = s->tg;
    having = s->having;
    sql_bind_windows_place(s);
    /* output columns */
    s->n_cols = n_tg;
    s->cols = qr_arena_calloc(cx->arena, (size_t)(n_tg + 1) * sizeof *s->cols);
    if (!s->cols)
        return nomem(cx);
    for (int i = 0; i < n_tg; i++) {
        QrSqlColumn *c = &s->cols[i];
        c->name = tg[i].name;
        c->type = tg[i].e->type == QR_SQL_UNKNOWN ? QR_SQL_TEXT : tg[i].e->type;
        /* numeric(p, s): a column's or a cast's, as PostgreSQL describes it */
        c->typmod = c->type == QR_SQL_NUMERIC && tg[i].e->typmod >= 4 &&
                            (tg[i].e->kind == SE_COL || tg[i].e->kind == SE_CAST)
                        ? tg[i].e->typmod
                        : -1;
        if (tg[i].scope_col >= 0) {
            c->table_oid = s->scope.cols[tg[i].scope_col].table_oid;
            c->attnum = s->scope.cols[tg[i].scope_col].attnum;
        }
    }
    if ((rc = bind_limit(cx, sqlj_get(body, "limitCount"), &s->limit)) ||
        (rc = bind_limit(cx, sqlj_get(body, "limitOffset"), &s->offset)))
        return rc;
    s->conj = conj;
    s->n_conj = n_conj;
    s->tg = tg;
    s->n_tg = n_tg;
    s->groups = groups;
    s->n_groups = n_groups;
    s->having = having;
    s->keys = keys;
    s->n_sort = n_sort;
    s->extra = extra;
    s->n_extra = n_extra;
    s->distinct = distinct;
    s->grouped = grouped;
    s->has_srf = has_srf;
    sql_reduce_outer_joins(s);
    return sql_bind_semis(s);
}


static int bind_body(SqlCtx *cx, const cJSON *body, SqlQuery **out)
{
    int rc;
    *out = NULL;
    if (sql_check_stack(cx)) /* nested subqueries recurse here */
        return cx->err->code;
    if (!body)
        return sql_err_at(cx, -1, QR_ESYNTAX, "42601", "missing SELECT");
    SqlQuery *q = qr_arena_calloc(cx->arena, sizeof *q);
    if (!q)
        return nomem(cx);
    q->cx = cx;
    /* WITH: each query bound once, visible to what follows */
    void *saved = cx->ctes;
    const cJSON *with = sqlj_get(body, "withClause");
    if (with && (rc = sql_bind_with(cx, with, q))) {
        cx->ctes = saved;
        return rc;
    }
    const char *op = sqlj_str(body, "op");
    if (op && strcmp(op, "SETOP_NONE") != 0) {
        rc = bind_setop(cx, body, op, q);
    } else if (sqlj_get(body, "valuesLists")) {
        rc = bind_values(cx, body, q);
    } else {
        q->kind = SQL_Q_SELECT;
        q->scope.outer = cx->outer_scope;
        q->bind.live = &q->subqs;
        rc = bind_plain(q, body);
    }
    cx->ctes = saved;
    if (rc == QR_OK)
        *out = q;
    return rc;
}

int sql_bind_query(SqlCtx *cx, const cJSON *select, SqlQuery **out)
{
    const cJSON *body = sqlj_is(select, "SelectStmt");
    return bind_body(cx, body ? body : select, out);
}

bool sql_expr_same(const SqlExpr *a, const SqlExpr *b) { return expr_equal(a, b); }

const SqlExpr *sql_bind_ungrouped(const SqlExpr *e, SqlExpr **groups, int n_groups)
{
    return ungrouped(e, groups, n_groups);
}
