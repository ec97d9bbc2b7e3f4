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
#include "query/plan/plan.h"

#include <stdio.h>
#include <string.h>

static int nomem(SqlCtx *cx) { return sql_nomem(cx); }

static int bind_body(SqlCtx *cx, const cJSON *body, SqlQuery **out);

static int add_cols(SqlQuery *s, const char *qual, int n, const QrSqlColumn *cols, const SqlCol *tcols)
{
    if (s->scope.n + n > s->cap_cols) {
        int nc = (s->scope.n + n) * 2 + 8;
        SqlCol *c = qr_arena_calloc(s->cx->arena, (size_t)nc * sizeof *c);
        if (!c)
            return nomem(s->cx);
        if (s->scope.n)
            memcpy(c, s->scope.cols, (size_t)s->scope.n * sizeof *c);
        s->scope.cols = c;
        s->cap_cols = nc;
    }
    for (int i = 0; i < n; i++) {
        SqlCol *c = &s->scope.cols[s->scope.n++];
        if (tcols) {
            *c = tcols[i];
            c->qual = qual;
        } else {
            memset(c, 0, sizeof *c);
            c->name = cols[i].name;
            c->qual = qual;
            c->type = cols[i].type;
            c->field = -4;
        }
    }
    return QR_OK;
}

/* A subquery of this one (FROM, WITH, set operation): one level deeper. */
static int bind_sub(SqlCtx *cx, const cJSON *body, SqlQuery **out)
{
    cx->depth++;
    int rc = bind_body(cx, body, out);
    cx->depth--;
    return rc;
}

/* ---- FROM items ---- */

static SqlItem *new_item(SqlQuery *s, SqlItemKind kind, const char *qual, int loc)
{
    if (s->n_items == SQL_MAX_ITEMS) {
        sql_err_at(s->cx, loc, QR_ELIMIT, "54000", "too many FROM items (at most %d)", SQL_MAX_ITEMS);
        return NULL;
    }
    SqlItem *it = &s->items[s->n_items];
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->qual = qual;
    return it;
}

/* An item whose rows come from elsewhere (a CTE, a subquery, a catalog, a
 * function): its columns, renamed by the alias's column list. */
static int add_item_cols(SqlQuery *s, SqlItem *it, int n_cols, const QrSqlColumn *cols,
                         const cJSON *colnames, int loc, const char *kind)
{
    SqlCtx *cx = s->cx;
    char lb[160];
    snprintf(lb, sizeof lb, "%s%s%s", kind, it->qual ? " on " : "", it->qual ? it->qual : "");
    if (!(it->label = qr_arena_strndup(cx->arena, lb, strlen(lb))))
        return nomem(cx);
    int n = cJSON_GetArraySize(colnames);
    if (n > n_cols)
        return sql_err_at(cx, loc, QR_EINVAL, "42P10",
                          "table \"%s\" has %d columns available but %d columns specified",
                          it->qual ? it->qual : "?", n_cols, n);
    QrSqlColumn *c = qr_arena_alloc(cx->arena, (size_t)(n_cols + 1) * sizeof *c);
    if (!c)
        return nomem(cx);
    memcpy(c, cols, (size_t)n_cols * sizeof *c);
    for (int i = 0; i < n; i++)
        c[i].name = sqlj_sval(cJSON_GetArrayItem(colnames, i));
    it->cols = c;
    it->first = s->scope.n;
    it->n_cols = n_cols;
    s->n_items++;
    return add_cols(s, it->qual, n_cols, c, NULL);
}

static int add_range_var(SqlQuery *s, const cJSON *rv)
{
    SqlCtx *cx = s->cx;
    const char *name = sqlj_str(rv, "relname");
    const char *schema = sqlj_str(rv, "schemaname");
    const cJSON *alias = sqlj_get(rv, "alias");
    const char *aname = sqlj_str(alias, "aliasname");
    const cJSON *colnames = sqlj_get(alias, "colnames");
    int loc = sqlj_loc(rv);
    const char *qual = aname ? aname : name;
    /* CTEs first */
    if (!schema)
        for (SqlCteDef *c = (SqlCteDef *)cx->ctes; c; c = c->next)
            if (!strcmp(c->name, name)) {
                SqlItem *it = new_item(s, SQL_ITEM_CTE, qual, loc);
                if (!it)
                    return cx->err->code;
                it->cte = c;
                return add_item_cols(s, it, c->n_cols, c->cols, colnames, loc, "CTE Scan");
            }
    /* catalogs: their columns now, their rows when the query runs */
    bool user_schema = !schema || !strcmp(schema, "public");
    if (!user_schema || !strncmp(name, "pg_", 3) || schema || sqlcat_is_sequence(cx, name)) {
        SqlSource *src = NULL;
        int rc = sqlcat_open(cx, schema, name, &src);
        if (rc)
            return rc;
        if (src) {
            QrSqlColumn *cols = qr_arena_calloc(cx->arena, (size_t)(src->n_cols + 1) * sizeof *cols);
            int n = src->n_cols;
            for (int i = 0; cols && i < n; i++) {
                cols[i].name = src->col_names[i];
                cols[i].type = src->col_types[i];
                cols[i].typmod = -1;
            }
            src->vt->close(src);
            if (!cols)
                return nomem(cx);
            SqlItem *it = new_item(s, SQL_ITEM_CATALOG, qual, loc);
            if (!it)
                return cx->err->code;
            it->schema = schema;
            it->relname = name;
            rc = add_item_cols(s, it, n, cols, colnames, loc, "Catalog Scan");
            if (rc == QR_OK) /* the system column tableoid, last: not in SELECT * */
                s->scope.cols[s->scope.n - 1].hidden = true;
            return rc;
        }
        if (schema && strcmp(schema, "public") != 0)
            return sql_err_at(cx, loc, QR_ENOTFOUND, "42P01", "relation \"%s.%s\" does not exist",
                              schema, name);
    }
    QrTable *t;
    QrError e;
    qr_error_clear(&e);
    if (qr_table_get(cx->sess->db, name, &t, &e) != QR_OK) {
        if (e.code == QR_ENOTFOUND || e.code == QR_EINVAL)
            return sql_err_at(cx, loc, QR_ENOTFOUND, "42P01", "relation \"%s\" does not exist", name);
        qr_error_copy(cx->err, &e);
        return e.code;
    }
    if (cJSON_GetArraySize(colnames) > 0)
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "column aliases on a table are not supported");
    SqlItem *it = new_item(s, SQL_ITEM_TABLE, qual, loc);
    if (!it)
        return cx->err->code;
    it->t = t;
    SqlScope *tscope;
    int rc = sql_table_scope(cx, t, qual, &tscope);
    if (rc)
        return rc;
    uint32_t toid = sqlcat_table_oid(qr_table_name(t)); /* RowDescription: table OID, attnum */
    for (int i = 0; i < tscope->n; i++)
        tscope->cols[i].table_oid = tscope->cols[i].hidden ? 0 : toid;
    it->first = s->scope.n;
    it->n_cols = tscope->n;
    it->label = qr_table_name(t);
    s->n_items++;
    return add_cols(s, qual, tscope->n, NULL, tscope->cols);
}

/* A set-returning function in FROM (generate_series(1, 10) AS g(n),
 * unnest(...)).  The arguments may read outer queries' columns, not other
 * FROM items (no LATERAL). */
static int add_range_function(SqlQuery *s, const cJSON *rf, int loc)
{
    SqlCtx *cx = s->cx;
    const cJSON *fns = sqlj_get(rf, "functions");
    const cJSON *pair = sqlj_list(cJSON_GetArrayItem(fns, 0));
    const cJSON *fc = cJSON_GetArrayItem(pair, 0);
    const cJSON *alias = sqlj_get(rf, "alias");
    if (cJSON_GetArraySize(fns) != 1 || sqlj_bool(rf, "lateral") || sqlj_bool(rf, "ordinality") ||
        sqlj_bool(rf, "is_rowsfrom") || !sqlj_is(fc, "FuncCall"))
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000",
                          "only one set-returning function (generate_series, unnest, "
                          "generate_subscripts) is supported in FROM, without LATERAL, "
                          "ROWS FROM or WITH ORDINALITY");
    /* catalog functions returning rows (pg_options_to_table, pg_get_keywords)
     * are catalog relations whose rows do not depend on the arguments */
    const char *fname = sqlj_last_name(sqlj_get(sqlj_is(fc, "FuncCall"), "funcname"));
    SqlSource *src = NULL;
    int rc = fname && sqlcat_srf_known(fname) ? sqlcat_open(cx, "pg_catalog", fname, &src) : QR_OK;
    if (rc)
        return rc;
    if (src) {
        int n = src->n_cols - 1; /* without tableoid */
        QrSqlColumn *cols = qr_arena_calloc(cx->arena, (size_t)(n + 1) * sizeof *cols);
        for (int i = 0; cols && i < n; i++)
            cols[i] = (QrSqlColumn){.name = src->col_names[i], .type = src->col_types[i],
                                    .typmod = -1};
        src->vt->close(src);
        if (!cols)
            return nomem(cx);
        const char *aname = sqlj_str(alias, "aliasname");
        SqlItem *it = new_item(s, SQL_ITEM_CATALOG, aname ? aname : fname, loc);
        if (!it)
            return cx->err->code;
        it->schema = "pg_catalog";
        it->relname = fname;
        return add_item_cols(s, it, n, cols, sqlj_get(alias, "colnames"), loc, "Function Scan");
    }
    SqlExpr *e;
    rc = sql_expr_compile(cx, fc, NULL, &e);
    if (rc)
        return rc;
    if (e->kind != SE_SRF)
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000",
                          "function %s in FROM is not supported (generate_series, unnest and "
                          "generate_subscripts are)", e->name ? e->name : "?");
    const char *aname = sqlj_str(alias, "aliasname");
    QrSqlColumn col = {.name = aname ? aname : e->name, .type = e->type, .typmod = -1};
    SqlItem *it = new_item(s, SQL_ITEM_FUNCTION, aname ? aname : e->name, loc);
    if (!it)
        return cx->err->code;
    it->srf = e;
    return add_item_cols(s, it, 1, &col, sqlj_get(alias, "colnames"), loc, "Function Scan");
}

/* FROM items, joins flattened left-deep in FROM order; `on` is the ON
 * condition the item joins with (bound once every item is known). */
static int add_from(SqlQuery *s, const cJSON *node, bool left, const cJSON *on, const cJSON **ons)
{
    SqlCtx *cx = s->cx;
    const char *tag = sqlj_tag(node);
    const cJSON *b = sqlj_body(node);
    int loc = sqlj_loc(node);
    int rc;
    int before = s->n_items;
    if (!tag)
        return sql_err_at(cx, loc, QR_ESYNTAX, "42601", "bad FROM item");
    if (!strcmp(tag, "RangeVar")) {
        rc = add_range_var(s, b);
    } else if (!strcmp(tag, "RangeSubselect")) {
        if (sqlj_bool(b, "lateral"))
            return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "LATERAL is not supported");
        const cJSON *alias = sqlj_get(b, "alias");
        SqlQuery *sub;
        if ((rc = bind_sub(cx, sqlj_is(sqlj_get(b, "subquery"), "SelectStmt"), &sub)))
            return rc;
        SqlItem *it = new_item(s, SQL_ITEM_SUBQUERY, sqlj_str(alias, "aliasname"), loc);
        if (!it)
            return cx->err->code;
        it->sub = sub;
        rc = add_item_cols(s, it, sub->n_cols, sub->cols, sqlj_get(alias, "colnames"), loc,
                           "Subquery Scan");
    } else if (!strcmp(tag, "JoinExpr")) {
        const char *jt = sqlj_str(b, "jointype");
        bool is_left = jt && !strcmp(jt, "JOIN_LEFT");
        if (jt && strcmp(jt, "JOIN_INNER") != 0 && !is_left)
            return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "%s joins are not supported",
                              !strcmp(jt, "JOIN_RIGHT") ? "RIGHT" : !strcmp(jt, "JOIN_FULL") ? "FULL"
                                                                                              : jt);
        if (sqlj_get(b, "usingClause") || sqlj_bool(b, "isNatural"))
            return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000",
                              "JOIN ... USING and NATURAL JOIN are not supported (use ON)");
        if (sqlj_get(b, "alias"))
            return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "aliases on joins are not supported");
        const cJSON *r = sqlj_get(b, "rarg");
        if (is_left && sqlj_is(r, "JoinExpr"))
            return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000",
                              "LEFT JOIN to a parenthesized join is not supported");
        if ((rc = add_from(s, sqlj_get(b, "larg"), left, on, ons)))
            return rc;
        return add_from(s, r, is_left, sqlj_get(b, "quals"), ons);
    } else if (!strcmp(tag, "RangeFunction")) {
        rc = add_range_function(s, b, loc);
    } else {
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "FROM item %s is not supported", tag);
    }
    if (rc == QR_OK && s->n_items > before) {
        s->items[s->n_items - 1].left = left;
        ons[s->n_items - 1] = on;
    }
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

static int add_conj(SqlCtx *cx, SqlExpr *e, SqlExpr ***v, int *n, int *cap)
{
    if (e->kind == SE_AND) {
        for (int k = 0; k < e->n_args; k++) {
            int rc = add_conj(cx, e->args[k], v, n, cap);
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

static int bind_bool(SqlQuery *s, const cJSON *node, const char *what, SqlExpr **out)
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
    int found = 0;
    for (int i = 0; i < s->scope.n; i++) {
        SqlCol *c = &s->scope.cols[i];
        if (c->hidden || (qual && (!c->qual || strcmp(c->qual, qual) != 0)))
            continue;
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
        e->name = c->name;
        e->loc = loc;
        c->used = true;
        (*tg)[(*n)++] = (SqlTarget){e, c->name, i};
        found++;
    }
    if (qual && !found) {
        bool known = false;
        for (int i = 0; i < s->n_items; i++)
            known |= s->items[i].qual && !strcmp(s->items[i].qual, qual);
        if (!known)
            return sql_err_at(s->cx, loc, QR_ENOTFOUND, "42P01",
                              "missing FROM-clause entry for table \"%s\"", qual);
    }
    if (!qual && s->n_items == 0)
        return sql_err_at(s->cx, loc, QR_ESYNTAX, "42601", "SELECT * with no tables specified is not valid");
    return QR_OK;
}

static QrSqlType union_type(QrSqlType a, QrSqlType b)
{
    if (a == b)
        return a;
    if (a == QR_SQL_UNKNOWN)
        return b;
    if (b == QR_SQL_UNKNOWN)
        return a;
    if (sqlt_is_num(a) && sqlt_is_num(b))
        return sqlt_is_float(a) || sqlt_is_float(b) ? QR_SQL_FLOAT8 : QR_SQL_INT8;
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
    if (strcmp(op, "SETOP_UNION") != 0)
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000", "%s is not supported",
                          !strcmp(op, "SETOP_INTERSECT") ? "INTERSECT" : "EXCEPT");
    q->setop = "UNION";
    int rc;
    if ((rc = bind_sub(cx, sqlj_get(body, "larg"), &q->larg)) ||
        (rc = bind_sub(cx, sqlj_get(body, "rarg"), &q->rarg)))
        return rc;
    const SqlQuery *l = q->larg, *r = q->rarg;
    if (l->n_cols != r->n_cols)
        return sql_err_at(cx, -1, QR_ESYNTAX, "42601", "each UNION query must have the same number of columns");
    q->n_cols = l->n_cols;
    q->cols = qr_arena_calloc(cx->arena, (size_t)(l->n_cols + 1) * sizeof *q->cols);
    if (!q->cols)
        return nomem(cx);
    for (int c = 0; c < l->n_cols; c++) {
        QrSqlType t = union_type(l->cols[c].type, r->cols[c].type);
        if (t == QR_SQL_TYPE_COUNT)
            return sql_err_at(cx, -1, QR_ETYPE, "42804", "UNION types %s and %s cannot be matched",
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
            t = union_type(t, q->cells[i * n_cols + c]->type);
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

/* ---- the main SELECT ---- */

static int bind_plain(SqlQuery *s, const cJSON *body)
{
    SqlCtx *cx = s->cx;
    int rc;
    if (sqlj_get(body, "intoClause"))
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000", "SELECT INTO is not supported");
    if (sqlj_get(body, "lockingClause"))
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000", "SELECT ... FOR UPDATE is not supported");
    if (sqlj_get(body, "windowClause"))
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000", "WINDOW is not supported");
    const cJSON *dist = sqlj_get(body, "distinctClause");
    bool distinct = dist != NULL;
    if (dist && cJSON_GetArraySize(dist) > 0 && sqlj_tag(cJSON_GetArrayItem(dist, 0)))
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000", "DISTINCT ON is not supported");
    /* FROM */
    const cJSON *ons[SQL_MAX_ITEMS] = {0};
    const cJSON *f;
    cJSON_ArrayForEach(f, sqlj_get(body, "fromClause"))
    {
        if ((rc = add_from(s, f, false, NULL, ons)))
            return rc;
    }
    s->bind.cx = cx;
    s->bind.scope = &s->scope;
    /* WHERE (no aggregates) */
    SqlExpr **conj = NULL;
    int n_conj = 0, cap_conj = 0;
    const cJSON *where = sqlj_get(body, "whereClause");
    if (where) {
        SqlExpr *w;
        if ((rc = bind_bool(s, where, "WHERE", &w)) || (rc = add_conj(cx, w, &conj, &n_conj, &cap_conj)))
            return rc;
    }
    /* ON conditions of joins */
    for (int i = 0; i < s->n_items; i++) {
        SqlItem *it = &s->items[i];
        if (!ons[i])
            continue;
        SqlExpr *w;
        int cap = 0;
        if ((rc = bind_bool(s, ons[i], "JOIN/ON", &w)))
            return rc;
        if (it->left) {
            if ((rc = add_conj(cx, w, &it->on_conj, &it->n_on, &cap)))
                return rc;
        } else if ((rc = add_conj(cx, w, &conj, &n_conj, &cap_conj))) {
            return rc;
        }
    }
    /* target list (aggregates allowed) */
    s->bind.allow_aggs = true;
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
    /* GROUP BY: expressions, output ordinals or output names */
    SqlExpr **groups = NULL;
    int n_groups = 0;
    const cJSON *gb = sqlj_get(body, "groupClause");
    int ng = cJSON_GetArraySize(gb);
    if (ng) {
        groups = qr_arena_calloc(cx->arena, (size_t)ng * sizeof *groups);
        if (!groups)
            return nomem(cx);
        const cJSON *g;
        s->bind.allow_aggs = false;
        cJSON_ArrayForEach(g, gb)
        {
            const cJSON *ac = sqlj_is(g, "A_Const");
            const cJSON *cr = sqlj_is(g, "ColumnRef");
            const char *tag = sqlj_tag(g);
            if (tag && (!strcmp(tag, "GroupingSet") || !strcmp(tag, "RowExpr")))
                return sql_err_at(cx, sqlj_loc(g), QR_EUNSUPPORTED, "0A000",
                                  "GROUPING SETS, ROLLUP and CUBE are not supported");
            if (ac && sqlj_get(ac, "ival")) {
                int k = sqlj_int(sqlj_get(ac, "ival"), "ival", 0);
                if (k < 1 || k > n_tg)
                    return sql_err_at(cx, sqlj_loc(g), QR_EINVAL, "42P10",
                                      "GROUP BY position %d is not in select list", k);
                if (expr_has_agg(tg[k - 1].e))
                    return sql_err_at(cx, sqlj_loc(g), QR_EINVAL, "42803",
                                      "aggregate functions are not allowed in GROUP BY");
                groups[n_groups++] = tg[k - 1].e;
                continue;
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
                        groups[n_groups++] = tg[hit].e;
                        continue;
                    }
                }
            }
            if ((rc = sql_expr_bind(&s->bind, g, &groups[n_groups])))
                return rc;
            n_groups++;
        }
        s->bind.allow_aggs = true;
    }
    /* HAVING */
    SqlExpr *having = NULL;
    if (sqlj_get(body, "havingClause") &&
        (rc = bind_bool(s, sqlj_get(body, "havingClause"), "HAVING", &having)))
        return rc;
    /* ORDER BY: output names / ordinals, else expressions over the input */
    const cJSON *sortc = sqlj_get(body, "sortClause");
    int n_sort = cJSON_GetArraySize(sortc);
    SqlSortKey *keys = qr_arena_calloc(cx->arena, (size_t)(n_sort + 1) * sizeof *keys);
    SqlExpr **extra = qr_arena_calloc(cx->arena, (size_t)(n_sort + 1) * sizeof *extra);
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
    bool grouped = n_groups > 0 || s->bind.n_aggs > 0 || having;
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
    /* output columns */
    s->n_cols = n_tg;
    s->cols = qr_arena_calloc(cx->arena, (size_t)(n_tg + 1) * sizeof *s->cols);
    if (!s->cols)
        return nomem(cx);
    for (int i = 0; i < n_tg; i++) {
        QrSqlColumn *c = &s->cols[i];
        c->name = tg[i].name;
        c->type = tg[i].e->type == QR_SQL_UNKNOWN ? QR_SQL_TEXT : tg[i].e->type;
        c->typmod = -1;
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
    return QR_OK;
}


static int bind_body(SqlCtx *cx, const cJSON *body, SqlQuery **out)
{
    int rc;
    *out = NULL;
    if (!body)
        return sql_err_at(cx, -1, QR_ESYNTAX, "42601", "missing SELECT");
    SqlQuery *q = qr_arena_calloc(cx->arena, sizeof *q);
    if (!q)
        return nomem(cx);
    q->cx = cx;
    /* WITH: each query bound once, visible to what follows */
    void *saved = cx->ctes;
    const cJSON *with = sqlj_get(body, "withClause");
    if (with) {
        if (sqlj_bool(with, "recursive"))
            return sql_err_at(cx, sqlj_loc(with), QR_EUNSUPPORTED, "0A000", "WITH RECURSIVE is not supported");
        const cJSON *ctes = sqlj_get(with, "ctes"), *c;
        q->ctes = qr_arena_calloc(cx->arena, ((size_t)cJSON_GetArraySize(ctes) + 1) * sizeof *q->ctes);
        if (!q->ctes)
            return nomem(cx);
        cJSON_ArrayForEach(c, ctes)
        {
            const cJSON *cte = sqlj_is(c, "CommonTableExpr");
            SqlCteDef *d = qr_arena_calloc(cx->arena, sizeof *d);
            if (!d) {
                cx->ctes = saved;
                return nomem(cx);
            }
            d->name = sqlj_str(cte, "ctename");
            const cJSON *sub = sqlj_is(sqlj_get(cte, "ctequery"), "SelectStmt");
            if (!sub) {
                cx->ctes = saved;
                return sql_err_at(cx, sqlj_loc(c), QR_EUNSUPPORTED, "0A000",
                                  "only SELECT is supported inside WITH");
            }
            if ((rc = bind_sub(cx, sub, &d->q))) {
                cx->ctes = saved;
                return rc;
            }
            const cJSON *names = sqlj_get(cte, "aliascolnames");
            int nn = cJSON_GetArraySize(names);
            if (nn > d->q->n_cols) {
                cx->ctes = saved;
                return sql_err_at(cx, sqlj_loc(c), QR_EINVAL, "42P10",
                                  "WITH query \"%s\" has %d columns available but %d columns specified",
                                  d->name, d->q->n_cols, nn);
            }
            d->n_cols = d->q->n_cols;
            if (!(d->cols = qr_arena_alloc(cx->arena, ((size_t)d->n_cols + 1) * sizeof *d->cols))) {
                cx->ctes = saved;
                return nomem(cx);
            }
            memcpy(d->cols, d->q->cols, (size_t)d->n_cols * sizeof *d->cols);
            for (int i = 0; i < nn; i++)
                d->cols[i].name = sqlj_sval(cJSON_GetArrayItem(names, i));
            d->next = (SqlCteDef *)cx->ctes;
            cx->ctes = d;
            q->ctes[q->n_ctes++] = d;
        }
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
