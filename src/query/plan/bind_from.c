/*
 * bind_from.c — binding FROM and WITH: tables, catalog relations, WITH
 * queries, subqueries, set-returning functions, joins (INNER, LEFT, RIGHT,
 * FULL, CROSS, comma lists, parenthesized on either side, ON, USING,
 * NATURAL, aliases on joins) and LATERAL items, into the query's FROM
 * items (plan.h SqlItem: their columns appended to the scope in FROM
 * order) and its FROM tree (SqlFromNode).  WITH queries, WITH RECURSIVE
 * with PostgreSQL's restrictions on the recursive reference.
 *
 * Names follow PostgreSQL: a USING / NATURAL join shows its common
 * columns once (merged: the left's value, the right's for RIGHT JOIN,
 * COALESCE of both for FULL), first in SELECT *, and a bare name reaches
 * the merged column while t.col still reaches each input; an alias on a
 * join names its columns and hides the tables inside it.
 *
 * Layer: query/ (SQL).  Calls sql_expr.c (binding), sql_scan.c (a table's
 * SQL columns) and the catalog hook (a catalog relation's columns).
 */
#include "query/plan/plan_int.h"
#include "query/sql_w.h"

#include <stdio.h>
#include <string.h>

static int nomem(SqlCtx *cx) { return sql_nomem(cx); }

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

/* A reference to a WITH query: an ordinary one, or a recursive query's
 * reference to itself (its working table), which PostgreSQL allows once,
 * in the recursive term, outside subqueries and outer joins' nullable
 * sides (that last checked by join_node). */
static int add_cte_ref(SqlQuery *s, SqlCteDef *c, const char *qual, const cJSON *colnames, int loc)
{
    SqlCtx *cx = s->cx;
    bool self = c->rec_state != 0;
    if (c->rec_state == 1)
        return sql_err_at(cx, loc, QR_EINVAL, "42P19",
                          "recursive reference to query \"%s\" must not appear within its non-recursive term",
                          c->name);
    if (self && cx->depth != c->rec_depth)
        return sql_err_at(cx, loc, QR_EINVAL, "42P19",
                          "recursive reference to query \"%s\" must not appear within a subquery", c->name);
    if (self && c->rec_refs++)
        return sql_err_at(cx, loc, QR_EINVAL, "42P19",
                          "recursive reference to query \"%s\" must not appear more than once", c->name);
    SqlItem *it = new_item(s, self ? SQL_ITEM_WORKTABLE : SQL_ITEM_CTE, qual, loc);
    if (!it)
        return cx->err->code;
    it->cte = c;
    if (!self)
        c->n_refs++;
    return add_item_cols(s, it, c->n_cols, c->cols, colnames, loc, self ? "WorkTable Scan" : "CTE Scan");
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
            if (!strcmp(c->name, name))
                return add_cte_ref(s, c, qual, colnames, loc);
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
    if (sqld_hidden(cx->sess, name) || qr_table_get(cx->sess->db, name, &t, &e) != QR_OK) {
        if (e.code == QR_OK || e.code == QR_ENOTFOUND || e.code == QR_EINVAL)
            return sql_err_at(cx, loc, QR_ENOTFOUND, "42P01", "relation \"%s\" does not exist", name);
        qr_error_copy(cx->err, &e);
        return e.code;
    }
    QrTable *view = sqld_view(cx->sess, name); /* the session's block rebuilt it */
    if (view)
        t = view;
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
    /* RowDescription names the table and column of a plain column (pg_class
     * and pg_attribute numbering, as clients such as JDBC's getTableName read) */
    uint32_t oid = sqlcat_table_oid(qr_table_name(t));
    for (int i = 0; i < tscope->n; i++)
        tscope->cols[i].table_oid = tscope->cols[i].hidden ? 0 : oid;
    it->first = s->scope.n;
    it->n_cols = tscope->n;
    it->label = qr_table_name(t);
    s->n_items++;
    return add_cols(s, qual, tscope->n, NULL, tscope->cols);
}

/* The items whose columns an expression reads (SE_COL of this scope). */
static uint64_t items_read(const SqlQuery *s, const SqlExpr *e)
{
    uint64_t m = 0;
    if (e->kind == SE_COL)
        for (int i = 0; i < s->n_items; i++)
            if (e->col >= s->items[i].first && e->col < s->items[i].first + s->items[i].n_cols)
                m |= 1ull << i;
    for (int k = 0; k < e->n_args; k++)
        m |= items_read(s, e->args[k]);
    return m;
}

/* A set-returning function in FROM (generate_series(1, 10) AS g(n),
 * unnest(...)).  Its arguments may read outer queries' columns and, as in
 * PostgreSQL, the items before it (then it is LATERAL: run per row). */
static int add_range_function(SqlQuery *s, const cJSON *rf, int loc)
{
    SqlCtx *cx = s->cx;
    const cJSON *fns = sqlj_get(rf, "functions");
    const cJSON *pair = sqlj_list(cJSON_GetArrayItem(fns, 0));
    const cJSON *fc = cJSON_GetArrayItem(pair, 0);
    const cJSON *alias = sqlj_get(rf, "alias");
    if (cJSON_GetArraySize(fns) != 1 || sqlj_bool(rf, "ordinality") || sqlj_bool(rf, "is_rowsfrom") ||
        !sqlj_is(fc, "FuncCall"))
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000",
                          "only one set-returning function (generate_series, unnest, "
                          "generate_subscripts) is supported in FROM, without ROWS FROM or "
                          "WITH ORDINALITY");
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
    rc = sql_expr_compile(cx, fc, &s->scope, &e);
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
    it->lateral = items_read(s, e);
    return add_item_cols(s, it, 1, &col, sqlj_get(alias, "colnames"), loc, "Function Scan");
}

/* (SELECT ...) AS x; LATERAL: the items before it are visible to it as an
 * outer query's columns, and it runs per row of them. */
static int add_subselect(SqlQuery *s, const cJSON *b, int loc)
{
    SqlCtx *cx = s->cx;
    const cJSON *alias = sqlj_get(b, "alias");
    bool lateral = sqlj_bool(b, "lateral");
    const SqlScope *saved_outer = cx->outer_scope;
    int level = cx->sub_level, ref0 = cx->n_refs;
    if (lateral) {
        cx->outer_scope = &s->scope;
        cx->sub_level++;
    }
    SqlQuery *sub;
    int rc = sql_bind_sub(cx, sqlj_is(sqlj_get(b, "subquery"), "SelectStmt"), &sub);
    cx->outer_scope = saved_outer;
    cx->sub_level = level;
    if (rc)
        return rc;
    uint64_t reads = 0;
    int k = ref0;
    for (int i = ref0; i < cx->n_refs; i++) {
        if (lateral && cx->refs[i].level >= level) { /* this query's columns: not correlation */
            for (int t = 0; t < s->n_items && cx->refs[i].level == level; t++)
                if (cx->refs[i].col >= s->items[t].first &&
                    cx->refs[i].col < s->items[t].first + s->items[t].n_cols)
                    reads |= 1ull << t;
            continue;
        }
        cx->refs[k++] = cx->refs[i];
    }
    cx->n_refs = k;
    SqlItem *it = new_item(s, SQL_ITEM_SUBQUERY, sqlj_str(alias, "aliasname"), loc);
    if (!it)
        return cx->err->code;
    it->sub = sub;
    it->lateral = reads;
    it->lateral_bound = lateral;
    return add_item_cols(s, it, sub->n_cols, sub->cols, sqlj_get(alias, "colnames"), loc,
                         "Subquery Scan");
}

/* ---- the FROM tree ---- */

static SqlFromNode *new_node(SqlCtx *cx)
{
    SqlFromNode *n = qr_arena_calloc(cx->arena, sizeof *n);
    if (!n)
        nomem(cx);
    return n;
}

static int leaf_node(SqlQuery *s, int item, SqlFromNode **out)
{
    SqlCtx *cx = s->cx;
    const SqlItem *it = &s->items[item];
    SqlFromNode *n = new_node(cx);
    if (!n || !(n->vis = qr_arena_alloc(cx->arena, ((size_t)it->n_cols + 1) * sizeof *n->vis)))
        return nomem(cx);
    n->item = item;
    n->i0 = item;
    n->i1 = item + 1;
    n->c0 = it->first;
    n->c1 = it->first + it->n_cols;
    for (int c = n->c0; c < n->c1; c++)
        if (!s->scope.cols[c].hidden)
            n->vis[n->n_vis++] = c;
    *out = n;
    return QR_OK;
}

static bool has_worktable(const SqlQuery *s, const SqlFromNode *n)
{
    for (int i = n->i0; i < n->i1; i++)
        if (s->items[i].kind == SQL_ITEM_WORKTABLE)
            return true;
    return false;
}

static int vis_find(const SqlQuery *s, const SqlFromNode *n, const char *name, const char *side,
                    int *out)
{
    *out = -1;
    for (int i = 0; i < n->n_vis; i++)
        if (!strcmp(s->scope.cols[n->vis[i]].name, name)) {
            if (*out >= 0)
                return sql_err_at(s->cx, -1, QR_EINVAL, "42702",
                                  "common column name \"%s\" appears more than once in %s table", name,
                                  side);
            *out = n->vis[i];
        }
    return QR_OK;
}

/* The USING (or NATURAL) columns of a join: an equality per pair, a merged
 * column per pair (appended to the scope), the visible columns in
 * PostgreSQL's order. */
static int using_cols(SqlQuery *s, SqlFromNode *n, const char **names, int n_names)
{
    SqlCtx *cx = s->cx;
    const SqlFromNode *l = n->l, *r = n->r;
    int cap = l->n_vis + r->n_vis + 1, rc;
    n->vis = qr_arena_alloc(cx->arena, (size_t)cap * sizeof *n->vis);
    n->merged_col = qr_arena_alloc(cx->arena, ((size_t)n_names + 1) * sizeof *n->merged_col);
    n->merged = qr_arena_alloc(cx->arena, ((size_t)n_names + 1) * sizeof *n->merged);
    n->on = qr_arena_alloc(cx->arena, ((size_t)n_names + 1) * sizeof *n->on);
    int *lc = qr_arena_alloc(cx->arena, ((size_t)n_names + 1) * sizeof *lc);
    int *rcol = qr_arena_alloc(cx->arena, ((size_t)n_names + 1) * sizeof *rcol);
    if (!n->vis || !n->merged_col || !n->merged || !n->on || !lc || !rcol)
        return nomem(cx);
    n->n_vis = 0;
    for (int i = 0; i < n_names; i++) {
        for (int j = 0; j < i; j++)
            if (!strcmp(names[i], names[j]))
                return sql_err_at(cx, -1, QR_EINVAL, "42701",
                                  "column name \"%s\" appears more than once in USING clause", names[i]);
        if ((rc = vis_find(s, l, names[i], "left", &lc[i])) || (rc = vis_find(s, r, names[i], "right", &rcol[i])))
            return rc;
        if (lc[i] < 0 || rcol[i] < 0)
            return sql_err_at(cx, -1, QR_ENOTFOUND, "42703",
                              "column \"%s\" specified in USING clause does not exist in %s table",
                              names[i], lc[i] < 0 ? "left" : "right");
        SqlCol *a = &s->scope.cols[lc[i]], *b = &s->scope.cols[rcol[i]];
        QrSqlType t = sql_union_type(a->type, b->type);
        if (t == QR_SQL_TYPE_COUNT)
            return sql_err_at(cx, -1, QR_ETYPE, "42804", "JOIN/USING types %s and %s cannot be matched",
                              qr_sql_type_name(a->type), qr_sql_type_name(b->type));
        SqlExpr *x = qr_arena_calloc(cx->arena, sizeof *x), *y = qr_arena_calloc(cx->arena, sizeof *y);
        SqlExpr *eq = qr_arena_calloc(cx->arena, sizeof *eq), *m = qr_arena_calloc(cx->arena, sizeof *m);
        SqlExpr **ea = qr_arena_alloc(cx->arena, 2 * sizeof *ea);
        SqlExpr **ma = qr_arena_alloc(cx->arena, 2 * sizeof *ma);
        if (!x || !y || !eq || !m || !ea || !ma)
            return nomem(cx);
        *x = (SqlExpr){.kind = SE_COL, .type = a->type, .loc = -1, .col = lc[i], .name = a->name};
        *y = (SqlExpr){.kind = SE_COL, .type = b->type, .loc = -1, .col = rcol[i], .name = b->name};
        ea[0] = x;
        ea[1] = y;
        *eq = (SqlExpr){.kind = SE_CMP, .type = QR_SQL_BOOL, .loc = -1, .op = SQL_CMP_EQ, .n_args = 2,
                        .args = ea, .name = "?column?"};
        n->on[n->n_on++] = eq;
        ma[0] = x;
        ma[1] = y;
        if (n->type == SQL_JOIN_FULL)
            *m = (SqlExpr){.kind = SE_COALESCE, .type = t, .loc = -1, .n_args = 2, .args = ma,
                           .name = a->name};
        else
            *m = n->type == SQL_JOIN_RIGHT ? *y : *x;
        a->used = b->used = true;
        a->no_bare = b->no_bare = true;
        n->merged_col[n->n_merged] = s->scope.n;
        n->merged[n->n_merged++] = m;
        QrSqlColumn mc = {.name = a->name, .type = t, .typmod = -1};
        if ((rc = add_cols(s, NULL, 1, &mc, NULL)))
            return rc;
        n->vis[n->n_vis++] = s->scope.n - 1;
    }
    for (int side = 0; side < 2; side++) {
        const SqlFromNode *k = side ? r : l;
        const int *gone = side ? rcol : lc;
        for (int i = 0; i < k->n_vis; i++) {
            bool merged = false;
            for (int j = 0; j < n_names && !merged; j++)
                merged = gone[j] == k->vis[i];
            if (!merged)
                n->vis[n->n_vis++] = k->vis[i];
        }
    }
    return QR_OK;
}

/* NATURAL: the names both sides show, in the left's order. */
static int natural_names(SqlQuery *s, SqlFromNode *n, const char ***out, int *n_out)
{
    const char **names = qr_arena_alloc(s->cx->arena, ((size_t)n->l->n_vis + 1) * sizeof *names);
    if (!names)
        return nomem(s->cx);
    int k = 0;
    for (int i = 0; i < n->l->n_vis; i++) {
        const char *nm = s->scope.cols[n->l->vis[i]].name;
        bool in_r = false, dup = false;
        for (int j = 0; j < n->r->n_vis && !in_r; j++)
            in_r = !strcmp(s->scope.cols[n->r->vis[j]].name, nm);
        for (int j = 0; j < k && !dup; j++)
            dup = !strcmp(names[j], nm);
        if (in_r && !dup)
            names[k++] = nm;
    }
    *out = names;
    *n_out = k;
    return QR_OK;
}

/* ON: bound over the join's own columns (an earlier item is 42P01, as in
 * PostgreSQL). */
static int bind_on(SqlQuery *s, SqlFromNode *n, const cJSON *quals)
{
    SqlCtx *cx = s->cx;
    SqlExpr *w;
    int cap = 0;
    int rc = sql_bind_bool(s, quals, "JOIN/ON", &w);
    if (rc)
        return rc;
    uint8_t *marks = qr_arena_calloc(cx->arena, (size_t)s->scope.n + 1);
    if (!marks)
        return nomem(cx);
    sql_expr_cols(w, marks);
    for (int c = 0; c < n->c0; c++)
        if (marks[c])
            return sql_err_at(cx, w->loc, QR_EINVAL, "42P01",
                              "invalid reference to FROM-clause entry for table \"%s\"",
                              s->scope.cols[c].qual ? s->scope.cols[c].qual : "?");
    return sql_add_conj(cx, w, &n->on, &n->n_on, &cap);
}

/* An alias on a join: its columns answer to it (renamed by its column
 * list), the tables inside to nothing. */
static int join_alias(SqlQuery *s, SqlFromNode *n, const cJSON *alias)
{
    const char *an = sqlj_str(alias, "aliasname");
    const cJSON *names = sqlj_get(alias, "colnames");
    int nn = cJSON_GetArraySize(names);
    if (nn > n->n_vis)
        return sql_err_at(s->cx, -1, QR_EINVAL, "42P10",
                          "join expression \"%s\" has %d columns available but %d columns specified",
                          an ? an : "?", n->n_vis, nn);
    n->alias = an;
    for (int c = n->c0; c < n->c1; c++)
        s->scope.cols[c].jqual = "";
    for (int i = 0; i < n->n_vis; i++) {
        SqlCol *c = &s->scope.cols[n->vis[i]];
        c->jqual = an;
        c->no_bare = false;
        if (i < nn)
            c->name = sqlj_sval(cJSON_GetArrayItem(names, i));
    }
    return QR_OK;
}

static int from_node(SqlQuery *s, const cJSON *node, SqlFromNode **out);

/* A join node over l and r; its visible columns are theirs (USING and
 * NATURAL replace them).  c1 is set once the node's columns are all in. */
static SqlFromNode *join_new(SqlCtx *cx, SqlJoinType type, SqlFromNode *l, SqlFromNode *r)
{
    SqlFromNode *n = new_node(cx);
    if (!n || !(n->vis = qr_arena_alloc(cx->arena, ((size_t)l->n_vis + r->n_vis + 1) * sizeof *n->vis))) {
        nomem(cx);
        return NULL;
    }
    n->item = -1;
    n->type = type;
    n->l = l;
    n->r = r;
    n->i0 = l->i0;
    n->i1 = r->i1;
    n->c0 = l->c0;
    n->c1 = r->c1;
    memcpy(n->vis, l->vis, (size_t)l->n_vis * sizeof *n->vis);
    memcpy(n->vis + l->n_vis, r->vis, (size_t)r->n_vis * sizeof *n->vis);
    n->n_vis = l->n_vis + r->n_vis;
    return n;
}

static int join_node(SqlQuery *s, const cJSON *b, SqlFromNode **out)
{
    SqlCtx *cx = s->cx;
    const char *jt = sqlj_str(b, "jointype");
    SqlJoinType type = !jt || !strcmp(jt, "JOIN_INNER") ? SQL_JOIN_INNER
                       : !strcmp(jt, "JOIN_LEFT")      ? SQL_JOIN_LEFT
                       : !strcmp(jt, "JOIN_RIGHT")     ? SQL_JOIN_RIGHT
                       : !strcmp(jt, "JOIN_FULL")      ? SQL_JOIN_FULL
                                                       : SQL_JOIN_SEMI;
    if (type == SQL_JOIN_SEMI)
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000", "join type %s is not supported", jt);
    if (sqlj_get(b, "join_using_alias"))
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000", "an alias on JOIN ... USING is not supported");
    SqlFromNode *n, *l, *r;
    int rc;
    if ((rc = from_node(s, sqlj_get(b, "larg"), &l)) || (rc = from_node(s, sqlj_get(b, "rarg"), &r)))
        return rc;
    if (!(n = join_new(cx, type, l, r)))
        return cx->err->code;
    if ((type == SQL_JOIN_LEFT && has_worktable(s, r)) || (type == SQL_JOIN_RIGHT && has_worktable(s, l)) ||
        (type == SQL_JOIN_FULL && (has_worktable(s, l) || has_worktable(s, r)))) {
        const SqlItem *w = NULL;
        for (int i = n->i0; i < n->i1 && !w; i++)
            if (s->items[i].kind == SQL_ITEM_WORKTABLE)
                w = &s->items[i];
        return sql_err_at(cx, -1, QR_EINVAL, "42P19",
                          "recursive reference to query \"%s\" must not appear within an outer join",
                          w->cte->name);
    }
    const cJSON *using = sqlj_get(b, "usingClause");
    if (using || sqlj_bool(b, "isNatural")) {
        const char **names = NULL;
        int nn = cJSON_GetArraySize(using);
        if (using) {
            if (!(names = qr_arena_alloc(cx->arena, ((size_t)nn + 1) * sizeof *names)))
                return nomem(cx);
            for (int i = 0; i < nn; i++)
                names[i] = sqlj_sval(cJSON_GetArrayItem(using, i));
        } else if ((rc = natural_names(s, n, &names, &nn))) {
            return rc;
        }
        rc = using_cols(s, n, names, nn);
    } else {
        rc = sqlj_get(b, "quals") ? bind_on(s, n, sqlj_get(b, "quals")) : QR_OK;
    }
    n->c1 = s->scope.n;
    if (rc == QR_OK && sqlj_get(b, "alias"))
        rc = join_alias(s, n, sqlj_get(b, "alias"));
    *out = n;
    return rc;
}

static int from_node(SqlQuery *s, const cJSON *node, SqlFromNode **out)
{
    SqlCtx *cx = s->cx;
    const char *tag = sqlj_tag(node);
    const cJSON *b = sqlj_body(node);
    int loc = sqlj_loc(node), rc;
    int before = s->n_items;
    if (!tag)
        return sql_err_at(cx, loc, QR_ESYNTAX, "42601", "bad FROM item");
    if (!strcmp(tag, "JoinExpr"))
        return join_node(s, b, out);
    if (!strcmp(tag, "RangeVar"))
        rc = add_range_var(s, b);
    else if (!strcmp(tag, "RangeSubselect"))
        rc = add_subselect(s, b, loc);
    else if (!strcmp(tag, "RangeFunction"))
        rc = add_range_function(s, b, loc);
    else
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "FROM item %s is not supported", tag);
    if (rc)
        return rc;
    if (s->n_items != before + 1)
        return sql_err_at(cx, loc, QR_EINTERNAL, "XX000", "FROM item not added");
    return leaf_node(s, before, out);
}

/* A LATERAL item runs per row of what it reads, so it must be the right
 * side of a join (or comma) whose left side holds those items, and the
 * join INNER or LEFT. */
static int check_lateral(SqlQuery *s, const SqlFromNode *n, const SqlFromNode *parent)
{
    if (n->item >= 0) {
        const SqlItem *it = &s->items[n->item];
        if (!it->lateral)
            return QR_OK;
        bool right = parent && parent->r == n;
        uint64_t left = 0;
        for (int i = parent ? parent->l->i0 : 0; parent && i < parent->l->i1; i++)
            left |= 1ull << i;
        if (!right || (it->lateral & ~left))
            return sql_err_at(s->cx, -1, QR_EUNSUPPORTED, "0A000",
                              "LATERAL item \"%s\" must directly follow the items it reads",
                              it->qual ? it->qual : "?");
        if (parent->type != SQL_JOIN_INNER && parent->type != SQL_JOIN_LEFT) {
            sql_err_at(s->cx, -1, QR_EINVAL, "42P10",
                       "invalid reference to FROM-clause entry for table \"%s\"",
                       it->qual ? it->qual : "?");
            qr_error_detail(s->cx->err, "The combining JOIN type must be INNER or LEFT for a LATERAL reference.");
            return s->cx->err->code;
        }
        return QR_OK;
    }
    int rc = check_lateral(s, n->l, n);
    return rc ? rc : check_lateral(s, n->r, n);
}

int sql_bind_from(SqlQuery *s, const cJSON *from_clause)
{
    SqlCtx *cx = s->cx;
    s->bind.cx = cx;
    s->bind.scope = &s->scope;
    const cJSON *f;
    SqlFromNode *root = NULL;
    cJSON_ArrayForEach(f, from_clause)
    {
        SqlFromNode *n;
        int rc = from_node(s, f, &n);
        if (rc)
            return rc;
        if (!root) {
            root = n;
            continue;
        }
        /* a comma: an INNER join without ON */
        SqlFromNode *j = join_new(cx, SQL_JOIN_INNER, root, n);
        if (!j)
            return cx->err->code;
        root = j;
    }
    s->from = root;
    return root ? check_lateral(s, root, NULL) : QR_OK;
}

/* ---- outer joins that WHERE makes inner ---- */

/* The items whose row of NULLs (a null-extended row) makes e NULL. */
static uint64_t nulls_on(const SqlQuery *s, const SqlExpr *e)
{
    uint64_t m = 0;
    switch (e->kind) {
    case SE_COL:
    case SE_MATCH: {
        int c = e->kind == SE_COL ? e->col : e->text->id_col;
        for (int i = 0; i < s->n_items; i++)
            if (c >= s->items[i].first && c < s->items[i].first + s->items[i].n_cols)
                m |= 1ull << i;
        return m;
    }
    case SE_CMP:
        if (e->op >= 100) /* IS [NOT] DISTINCT FROM */
            return 0;
        break;
    case SE_FUNC:
        if (!e->fn || !e->fn->strict)
            return 0;
        break;
    case SE_ARITH:
    case SE_NEG:
    case SE_LIKE:
    case SE_CAST:
        break;
    default:
        return 0;
    }
    for (int k = 0; k < e->n_args; k++)
        m |= nulls_on(s, e->args[k]);
    return m;
}

/* The items whose row of NULLs makes a WHERE condition NULL or false. */
static uint64_t rejects(const SqlQuery *s, const SqlExpr *e)
{
    uint64_t m = 0;
    switch (e->kind) {
    case SE_AND:
        for (int k = 0; k < e->n_args; k++)
            m |= rejects(s, e->args[k]);
        return m;
    case SE_OR:
        m = ~0ull;
        for (int k = 0; k < e->n_args; k++)
            m &= rejects(s, e->args[k]);
        return m;
    case SE_IS_TRUE:
        return rejects(s, e->args[0]);
    case SE_IS_NOT_NULL:
        return nulls_on(s, e->args[0]);
    case SE_IN:
        return e->op & 1 ? 0 : nulls_on(s, e->args[0]);
    default:
        return nulls_on(s, e);
    }
}

static void reduce(SqlQuery *s, SqlFromNode *n, uint64_t rej)
{
    if (!n || n->item >= 0)
        return;
    uint64_t ml = 0, mr = 0;
    for (int i = n->l->i0; i < n->l->i1; i++)
        ml |= 1ull << i;
    for (int i = n->r->i0; i < n->r->i1; i++)
        mr |= 1ull << i;
    bool l_kept = (rej & ml) != 0, r_kept = (rej & mr) != 0; /* no null-extended row survives */
    if (n->type == SQL_JOIN_LEFT && r_kept)
        n->type = SQL_JOIN_INNER;
    else if (n->type == SQL_JOIN_RIGHT && l_kept)
        n->type = SQL_JOIN_INNER;
    else if (n->type == SQL_JOIN_FULL && (l_kept || r_kept))
        n->type = l_kept && r_kept ? SQL_JOIN_INNER : l_kept ? SQL_JOIN_LEFT : SQL_JOIN_RIGHT;
    reduce(s, n->l, rej);
    reduce(s, n->r, rej);
}

void sql_reduce_outer_joins(SqlQuery *s)
{
    uint64_t rej = 0;
    for (int i = 0; i < s->n_conj; i++)
        rej |= rejects(s, s->conj[i]);
    if (rej)
        reduce(s, s->from, rej);
}

/* ---- SELECT * ---- */

static const SqlFromNode *alias_node(const SqlFromNode *n, const char *alias)
{
    if (!n || n->item >= 0)
        return NULL;
    if (n->alias && !strcmp(n->alias, alias))
        return n;
    const SqlFromNode *x = alias_node(n->l, alias);
    return x ? x : alias_node(n->r, alias);
}

int sql_star_cols(SqlQuery *s, const char *qual, int loc, int **cols, int *n)
{
    SqlCtx *cx = s->cx;
    *n = 0;
    if (!qual && !s->from)
        return sql_err_at(cx, loc, QR_ESYNTAX, "42601", "SELECT * with no tables specified is not valid");
    const SqlFromNode *an = qual ? alias_node(s->from, qual) : s->from;
    if (an) {
        *cols = an->vis;
        *n = an->n_vis;
        return QR_OK;
    }
    int *v = qr_arena_alloc(cx->arena, ((size_t)s->scope.n + 1) * sizeof *v);
    if (!v)
        return nomem(cx);
    for (int i = 0; i < s->scope.n; i++) {
        const SqlCol *c = &s->scope.cols[i];
        const char *cq = c->jqual ? c->jqual : c->qual;
        if (!c->hidden && cq && !strcmp(cq, qual))
            v[(*n)++] = i;
    }
    if (*n == 0) {
        bool known = false;
        for (int i = 0; i < s->n_items; i++)
            known |= s->items[i].qual && !strcmp(s->items[i].qual, qual);
        for (int i = 0; i < s->scope.n; i++)
            if (s->scope.cols[i].jqual && s->scope.cols[i].qual && !strcmp(s->scope.cols[i].qual, qual))
                return sql_err_at(cx, loc, QR_EINVAL, "42P01",
                                  "invalid reference to FROM-clause entry for table \"%s\"", qual);
        if (!known)
            return sql_err_at(cx, loc, QR_ENOTFOUND, "42P01", "missing FROM-clause entry for table \"%s\"",
                              qual);
    }
    *cols = v;
    return QR_OK;
}

/* ---- WITH ---- */

/* Does the tree read a relation of this name (a RangeVar without schema)? */
static bool reads_relation(const cJSON *n, const char *name, int depth)
{
    if (!n || depth > 200)
        return false;
    if (cJSON_IsObject(n)) {
        const cJSON *rv = cJSON_GetObjectItemCaseSensitive(n, "RangeVar");
        if (rv && !sqlj_str(rv, "schemaname") && sqlj_str(rv, "relname") &&
            !strcmp(sqlj_str(rv, "relname"), name))
            return true;
    }
    const cJSON *k;
    cJSON_ArrayForEach(k, n)
    {
        if (reads_relation(k, name, depth + 1))
            return true;
    }
    return false;
}

static int cte_cols(SqlCtx *cx, SqlCteDef *d, const SqlQuery *q, const cJSON *cte, int loc)
{
    const cJSON *names = sqlj_get(cte, "aliascolnames");
    int nn = cJSON_GetArraySize(names);
    if (nn > q->n_cols)
        return sql_err_at(cx, loc, QR_EINVAL, "42P10",
                          "WITH query \"%s\" has %d columns available but %d columns specified", d->name,
                          q->n_cols, nn);
    d->n_cols = q->n_cols;
    if (!(d->cols = qr_arena_alloc(cx->arena, ((size_t)d->n_cols + 1) * sizeof *d->cols)))
        return nomem(cx);
    memcpy(d->cols, q->cols, (size_t)d->n_cols * sizeof *d->cols);
    for (int i = 0; i < nn; i++)
        d->cols[i].name = sqlj_sval(cJSON_GetArrayItem(names, i));
    for (int i = 0; i < d->n_cols; i++)
        if (d->cols[i].type == QR_SQL_UNKNOWN)
            d->cols[i].type = QR_SQL_TEXT;
    return QR_OK;
}

/* WITH RECURSIVE x AS (non-recursive term UNION [ALL] recursive term):
 * the first term bound with x unreadable, its columns become x's, then the
 * second with x readable once, as its working table. */
static int bind_recursive(SqlCtx *cx, SqlCteDef *d, const cJSON *cte, const cJSON *body, int loc)
{
    const char *op = sqlj_str(body, "op");
    if (!op || strcmp(op, "SETOP_UNION") != 0)
        return sql_err_at(cx, loc, QR_EINVAL, "42P19",
                          "recursive query \"%s\" does not have the form non-recursive-term UNION [ALL] "
                          "recursive-term", d->name);
    /* PostgreSQL refuses these three with the same 0A000 words (parse_cte.c):
     * a recursive term's order and limit have no meaning per iteration, so
     * they are parity with PostgreSQL, not a gap of Quarry's */
    if (sqlj_get(body, "sortClause"))
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "ORDER BY in a recursive query is not implemented");
    if (sqlj_get(body, "limitCount"))
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "LIMIT in a recursive query is not implemented");
    if (sqlj_get(body, "limitOffset"))
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "OFFSET in a recursive query is not implemented");
    if (sqlj_get(body, "withClause"))
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "WITH inside a recursive query is not supported");
    SqlQuery *q = qr_arena_calloc(cx->arena, sizeof *q), *l, *r;
    if (!q)
        return nomem(cx);
    d->recursive = true;
    d->rec_state = 1;
    int rc = sql_bind_sub(cx, sqlj_get(body, "larg"), &l);
    if (rc == QR_OK)
        rc = cte_cols(cx, d, l, cte, loc);
    if (rc)
        return rc;
    d->rec_state = 2;
    d->rec_depth = cx->depth + 1;
    rc = sql_bind_sub(cx, sqlj_get(body, "rarg"), &r);
    d->rec_state = 0;
    if (rc)
        return rc;
    if (r->n_cols != l->n_cols)
        return sql_err_at(cx, loc, QR_ESYNTAX, "42601", "each UNION query must have the same number of columns");
    if (r->kind == SQL_Q_SELECT && r->bind.n_aggs)
        return sql_err_at(cx, loc, QR_EINVAL, "42P19",
                          "aggregate functions are not allowed in a recursive query's recursive term");
    for (int c = 0; c < l->n_cols; c++)
        if (sql_union_type(d->cols[c].type, r->cols[c].type) == QR_SQL_TYPE_COUNT)
            return sql_err_at(cx, loc, QR_ETYPE, "42804",
                              "recursive query \"%s\" column %d has type %s in non-recursive term but type %s "
                              "overall", d->name, c + 1, qr_sql_type_name(d->cols[c].type),
                              qr_sql_type_name(r->cols[c].type));
    q->kind = SQL_Q_RECURSIVE;
    q->cx = cx;
    q->all = sqlj_bool(body, "all");
    q->setop = "UNION";
    q->larg = l;
    q->rarg = r;
    q->cte = d;
    q->n_cols = d->n_cols;
    q->cols = d->cols;
    d->q = q;
    return QR_OK;
}

int sql_bind_with(SqlCtx *cx, const cJSON *with, SqlQuery *q)
{
    bool recursive = sqlj_bool(with, "recursive");
    const cJSON *ctes = sqlj_get(with, "ctes"), *c;
    q->ctes = qr_arena_calloc(cx->arena, ((size_t)cJSON_GetArraySize(ctes) + 1) * sizeof *q->ctes);
    if (!q->ctes)
        return nomem(cx);
    cJSON_ArrayForEach(c, ctes)
    {
        const cJSON *cte = sqlj_is(c, "CommonTableExpr");
        SqlCteDef *d = qr_arena_calloc(cx->arena, sizeof *d);
        if (!d)
            return nomem(cx);
        d->name = sqlj_str(cte, "ctename");
        const char *mat = sqlj_str(cte, "ctematerialized");
        d->materialize = !mat ? 0 : !strcmp(mat, "CTEMaterializeAlways") ? 1
                                  : !strcmp(mat, "CTEMaterializeNever") ? -1
                                                                        : 0;
        const cJSON *sub = sqlj_is(sqlj_get(cte, "ctequery"), "SelectStmt");
        if (!sub)
            return sql_err_at(cx, sqlj_loc(c), QR_EUNSUPPORTED, "0A000",
                              "only SELECT is supported inside WITH");
        int rc;
        if (recursive && reads_relation(sub, d->name, 0)) {
            d->next = (SqlCteDef *)cx->ctes; /* visible to itself */
            cx->ctes = d;
            rc = bind_recursive(cx, d, cte, sub, sqlj_loc(c));
        } else {
            rc = sql_bind_sub(cx, sub, &d->q);
            if (rc == QR_OK)
                rc = cte_cols(cx, d, d->q, cte, sqlj_loc(c));
            d->next = (SqlCteDef *)cx->ctes;
            cx->ctes = d;
        }
        if (rc)
            return rc;
        q->ctes[q->n_ctes++] = d;
    }
    return QR_OK;
}
