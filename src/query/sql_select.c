/*
 * sql_select.c — SELECT: CTEs, FROM items (tables, catalog relations,
 * subqueries, VALUES), inner and left hash joins on equality, WHERE
 * pushdown to table scans, hash GROUP BY with aggregates and HAVING,
 * projection, DISTINCT, ORDER BY any expression, LIMIT/OFFSET, UNION [ALL],
 * and EXPLAIN [ANALYZE].
 *
 * Layer: query/.  Calls sql_expr.c (binding, evaluation), sql_scan.c (table
 * access and the access-path planner) and the catalog hook.
 *
 * Execution is materialized: each FROM item yields rows as wide as the
 * query's whole scope (its own columns filled, the others NULL), joins copy
 * column ranges, and every later stage works on arrays in the statement's
 * arena, whose cap bounds the memory a query may take.
 */
#include "query/sql_int.h"
#include "query/exec/exec.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "store/util.h"

#define MAX_ITEMS 64

/* ---- CTEs and EXPLAIN records ---- */

typedef struct SqlCte {
    const char *name;
    QrSqlResult res;          /* columns (+ rows unless describing) */
    struct SqlCte *next;
} SqlCte;

static int nomem(SqlCtx *cx)
{
    sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    if (cx->err->hint[0] == 0)
        qr_error_hint(cx->err, "raise quarry.mem_cap or narrow the query");
    return cx->err->code;
}

/* ---- FROM items ---- */

typedef enum ItemKind { IT_TABLE, IT_ROWS } ItemKind;

typedef struct Item {
    ItemKind kind;
    const char *qual;
    int first, n_cols;
    /* IT_ROWS: materialized rows of the item's own width */
    QrSqlResult src;
    /* IT_TABLE */
    QrTable *t;
    SqlScope *tscope;         /* the table's own columns */
    SqlTableScan scan;
    /* join */
    bool left;                /* LEFT JOIN: this item is the nullable side */
    const cJSON *on;          /* ON condition (parse node), NULL for comma / cross */
    SqlExpr **on_conj;
    int n_on;
    /* IT_ROWS: the WHERE conditions on its own columns (planning) */
    SqlExpr **rows_conj;
    int n_on_rows;
    const char *label;        /* EXPLAIN: "Values Scan", "CTE Scan on x" ... */
} Item;

typedef struct Sel Sel;
struct Sel {
    SqlCtx *cx;
    Item items[MAX_ITEMS];
    int n_items;
    SqlScope scope;
    int cap_cols;
    SqlBind bind;
    SqlSubq *subqs;           /* correlated subqueries bound here: their caches (freed at the end) */
};

static int add_cols(Sel *s, const char *qual, int n, const QrSqlColumn *cols, const SqlCol *tcols)
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

static int select_body(SqlCtx *cx, const cJSON *body, bool describe, QrSqlResult *out);
static int select_plain(struct Sel *s, const cJSON *body, bool describe, QrSqlResult *out);

static int run_sub(SqlCtx *cx, const cJSON *body, bool describe, QrSqlResult *out)
{
    cx->depth++;
    int rc = select_body(cx, body, describe, out);
    cx->depth--;
    return rc;
}

static int add_item_rows(Sel *s, const char *qual, QrSqlResult *src, const cJSON *colnames, int loc,
                         const char *kind)
{
    if (s->n_items == MAX_ITEMS)
        return sql_err_at(s->cx, loc, QR_ELIMIT, "54000", "too many FROM items (at most %d)", MAX_ITEMS);
    Item *it = &s->items[s->n_items];
    memset(it, 0, sizeof *it);
    it->kind = IT_ROWS;
    it->qual = qual;
    char lb[160];
    snprintf(lb, sizeof lb, "%s%s%s", kind, qual ? " on " : "", qual ? qual : "");
    if (!(it->label = qr_arena_strndup(s->cx->arena, lb, strlen(lb))))
        return nomem(s->cx);
    it->src = *src;
    int n = cJSON_GetArraySize(colnames);
    if (n > src->n_cols)
        return sql_err_at(s->cx, loc, QR_EINVAL, "42P10",
                          "table \"%s\" has %d columns available but %d columns specified",
                          qual ? qual : "?", src->n_cols, n);
    QrSqlColumn *cols = qr_arena_alloc(s->cx->arena, (size_t)(src->n_cols + 1) * sizeof *cols);
    if (!cols)
        return nomem(s->cx);
    memcpy(cols, src->cols, (size_t)src->n_cols * sizeof *cols);
    for (int i = 0; i < n; i++)
        cols[i].name = sqlj_sval(cJSON_GetArrayItem(colnames, i));
    it->src.cols = cols;
    it->first = s->scope.n;
    it->n_cols = src->n_cols;
    s->n_items++;
    return add_cols(s, qual, src->n_cols, cols, NULL);
}

static int add_range_var(Sel *s, const cJSON *rv, bool describe)
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
        for (SqlCte *c = (SqlCte *)cx->ctes; c; c = c->next)
            if (!strcmp(c->name, name))
                return add_item_rows(s, qual, &c->res, colnames, loc, "CTE Scan");
    /* catalogs */
    bool user_schema = !schema || !strcmp(schema, "public");
    if (!user_schema || !strncmp(name, "pg_", 3) || schema) {
        SqlSource *src = NULL;
        int rc = sqlcat_open(cx, schema, name, &src);
        if (rc)
            return rc;
        if (src) {
            QrSqlResult r;
            memset(&r, 0, sizeof r);
            r.n_cols = src->n_cols;
            r.cols = qr_arena_calloc(cx->arena, (size_t)(src->n_cols + 1) * sizeof *r.cols);
            if (!r.cols) {
                src->vt->close(src);
                return nomem(cx);
            }
            for (int i = 0; i < src->n_cols; i++) {
                r.cols[i].name = src->col_names[i];
                r.cols[i].type = src->col_types[i];
                r.cols[i].typmod = -1;
            }
            uint64_t cap = 0;
            while (!describe && rc == QR_OK) {
                if (r.n_rows == cap) {
                    uint64_t nc = cap ? cap * 2 : 64;
                    SqlValue *nv = qr_arena_alloc(cx->arena, nc * (uint64_t)r.n_cols * sizeof *nv);
                    if (!nv) {
                        rc = nomem(cx);
                        break;
                    }
                    if (r.n_rows)
                        memcpy(nv, r.vals, r.n_rows * (uint64_t)r.n_cols * sizeof *nv);
                    r.vals = nv;
                    cap = nc;
                }
                bool has = false;
                rc = src->vt->next(src, cx, r.vals + r.n_rows * (uint64_t)r.n_cols, &has);
                if (rc || !has)
                    break;
                r.n_rows++;
            }
            src->vt->close(src);
            if (rc)
                return rc;
            return add_item_rows(s, qual, &r, colnames, loc, "Catalog Scan");
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
    if (s->n_items == MAX_ITEMS)
        return sql_err_at(cx, loc, QR_ELIMIT, "54000", "too many FROM items (at most %d)", MAX_ITEMS);
    Item *it = &s->items[s->n_items];
    memset(it, 0, sizeof *it);
    it->kind = IT_TABLE;
    it->t = t;
    it->qual = qual;
    int rc = sql_table_scope(cx, t, qual, &it->tscope);
    if (rc)
        return rc;
    for (int i = 0; i < it->tscope->n; i++)
        it->tscope->cols[i].table_oid = 0;
    it->first = s->scope.n;
    it->n_cols = it->tscope->n;
    s->n_items++;
    return add_cols(s, qual, it->tscope->n, NULL, it->tscope->cols);
}

/* A set-returning function in FROM (generate_series(1, 10) AS g(n),
 * unnest(...)): its rows materialized.  The arguments may read outer
 * queries' columns, not other FROM items (no LATERAL). */
static int add_range_function(Sel *s, const cJSON *rf, int loc, bool describe)
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
    SqlExpr *e;
    int rc = sql_expr_compile(cx, fc, NULL, &e);
    if (rc)
        return rc;
    if (e->kind != SE_SRF)
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000",
                          "function %s in FROM is not supported (generate_series, unnest and "
                          "generate_subscripts are)", e->name ? e->name : "?");
    QrSqlResult r;
    memset(&r, 0, sizeof r);
    r.n_cols = 1;
    r.cols = qr_arena_calloc(cx->arena, 2 * sizeof *r.cols);
    if (!r.cols)
        return nomem(cx);
    const char *aname = sqlj_str(alias, "aliasname");
    r.cols[0].name = aname ? aname : e->name;
    r.cols[0].type = e->type;
    r.cols[0].typmod = -1;
    if (!describe) {
        SqlValue argv[3];
        SqlEvalRow er = {.doc = -1};
        for (int i = 0; i < e->n_args; i++)
            if ((rc = sql_expr_eval(cx, e->args[i], &er, &argv[i])))
                return rc;
        if ((rc = sql_srf_rows(cx, e->name, e->n_args, argv, e->type, &r.vals, &r.n_rows)))
            return rc;
    }
    return add_item_rows(s, aname ? aname : e->name, &r, sqlj_get(alias, "colnames"), loc,
                         "Function Scan");
}

static int add_from(Sel *s, const cJSON *node, bool describe, bool left, const cJSON *on)
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
        rc = add_range_var(s, b, describe);
    } else if (!strcmp(tag, "RangeSubselect")) {
        if (sqlj_bool(b, "lateral"))
            return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "LATERAL is not supported");
        const cJSON *alias = sqlj_get(b, "alias");
        QrSqlResult r;
        memset(&r, 0, sizeof r);
        if ((rc = run_sub(cx, sqlj_is(sqlj_get(b, "subquery"), "SelectStmt"), describe, &r)))
            return rc;
        rc = add_item_rows(s, sqlj_str(alias, "aliasname"), &r, sqlj_get(alias, "colnames"), loc,
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
        if ((rc = add_from(s, sqlj_get(b, "larg"), describe, left, on)))
            return rc;
        return add_from(s, r, describe, is_left, sqlj_get(b, "quals"));
    } else if (!strcmp(tag, "RangeFunction")) {
        rc = add_range_function(s, b, loc, describe);
    } else {
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "FROM item %s is not supported", tag);
    }
    if (rc == QR_OK && s->n_items > before) {
        s->items[s->n_items - 1].left = left;
        s->items[s->n_items - 1].on = on;
    }
    return rc;
}

/* ---- expression helpers ---- */

static int item_of_col(const Sel *s, int col)
{
    for (int i = 0; i < s->n_items; i++)
        if (col >= s->items[i].first && col < s->items[i].first + s->items[i].n_cols)
            return i;
    return -1;
}

static uint64_t expr_items(const Sel *s, const SqlExpr *e)
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

static int bind_bool(Sel *s, const cJSON *node, const char *what, SqlExpr **out)
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

/* ---- sorting ---- */

static int limit_value(SqlCtx *cx, const cJSON *node, uint64_t dflt, uint64_t *out)
{
    *out = dflt;
    if (!node)
        return QR_OK;
    SqlExpr *e;
    int rc = sql_expr_compile(cx, node, NULL, &e);
    if (rc)
        return rc;
    if (cx->analyze_only)
        return QR_OK;
    SqlValue v, iv;
    SqlEvalRow r = {.doc = -1};
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

typedef struct Target {
    SqlExpr *e;
    const char *name;
    int scope_col;            /* plain column: scope index, else -1 */
} Target;

/* ---- set operations and VALUES ---- */

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
    r->cols[c].type = t;
    return QR_OK;
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

/* ORDER BY / LIMIT over output columns only (set operations, VALUES). */
static int finish_output(SqlCtx *cx, const cJSON *body, bool describe, QrSqlResult *out)
{
    const cJSON *sort = sqlj_get(body, "sortClause");
    SqlSortKey *keys = qr_arena_calloc(cx->arena, 33 * sizeof *keys);
    int nk = 0;
    if (!keys)
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
            if (k < 1 || k > out->n_cols)
                return sql_err_at(cx, sqlj_loc(node), QR_EINVAL, "42P10",
                                  "ORDER BY position %d is not in select list", k);
            col = k - 1;
        } else if (cr && cJSON_GetArraySize(sqlj_get(cr, "fields")) == 1) {
            const char *n = sqlj_sval(cJSON_GetArrayItem(sqlj_get(cr, "fields"), 0));
            for (int c = 0; c < out->n_cols && col < 0; c++)
                if (n && !strcmp(out->cols[c].name, n))
                    col = c;
        }
        if (col < 0)
            return sql_err_at(cx, sqlj_loc(node), QR_EUNSUPPORTED, "0A000",
                              "ORDER BY on a UNION or VALUES must name an output column");
        if (nk == 32)
            return sql_err_at(cx, sqlj_loc(node), QR_ELIMIT, "54000", "too many ORDER BY items");
        const char *dir = sqlj_str(sb, "sortby_dir"), *nl = sqlj_str(sb, "sortby_nulls");
        bool desc = dir && !strcmp(dir, "SORTBY_DESC");
        keys[nk++] = (SqlSortKey){col, desc,
                                  nl && !strcmp(nl, "SORTBY_NULLS_FIRST") ? true
                                  : nl && !strcmp(nl, "SORTBY_NULLS_LAST") ? false
                                                                           : desc,
                                  out->cols[col].name};
    }
    uint64_t limit, offset;
    int rc;
    if ((rc = limit_value(cx, sqlj_get(body, "limitCount"), UINT64_MAX, &limit)) ||
        (rc = limit_value(cx, sqlj_get(body, "limitOffset"), 0, &offset)))
        return rc;
    if (describe)
        return QR_OK;
    return rows_finish(cx, out, keys, nk, false, limit, offset);
}

static int select_setop(SqlCtx *cx, const cJSON *body, const char *op, bool describe,
                        QrSqlResult *out)
{
    bool all = sqlj_bool(body, "all");
    if (strcmp(op, "SETOP_UNION") != 0)
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000", "%s is not supported",
                          !strcmp(op, "SETOP_INTERSECT") ? "INTERSECT" : "EXCEPT");
    QrSqlResult l, r;
    memset(&l, 0, sizeof l);
    memset(&r, 0, sizeof r);
    int rc;
    if ((rc = run_sub(cx, sqlj_get(body, "larg"), describe, &l)) ||
        (rc = run_sub(cx, sqlj_get(body, "rarg"), describe, &r)))
        return rc;
    if (l.n_cols != r.n_cols)
        return sql_err_at(cx, -1, QR_ESYNTAX, "42601", "each UNION query must have the same number of columns");
    for (int c = 0; c < l.n_cols; c++) {
        QrSqlType t = union_type(l.cols[c].type, r.cols[c].type);
        if (t == QR_SQL_TYPE_COUNT)
            return sql_err_at(cx, -1, QR_ETYPE, "42804", "UNION types %s and %s cannot be matched",
                              qr_sql_type_name(l.cols[c].type), qr_sql_type_name(r.cols[c].type));
        if (t == QR_SQL_UNKNOWN)
            t = QR_SQL_TEXT;
        if (!describe && ((rc = cast_column(cx, &l, c, t)) || (rc = cast_column(cx, &r, c, t))))
            return rc;
        l.cols[c].type = t;
        l.cols[c].table_oid = 0;
        l.cols[c].attnum = 0;
    }
    *out = l;
    out->arena = cx->arena;
    if (!describe) {
        uint64_t n = l.n_rows + r.n_rows;
        SqlValue *v = qr_arena_alloc(cx->arena, (n * (uint64_t)l.n_cols + 1) * sizeof *v);
        if (!v)
            return nomem(cx);
        if (l.n_rows)
            memcpy(v, l.vals, l.n_rows * (uint64_t)l.n_cols * sizeof *v);
        if (r.n_rows)
            memcpy(v + l.n_rows * (uint64_t)l.n_cols, r.vals, r.n_rows * (uint64_t)l.n_cols * sizeof *v);
        out->vals = v;
        out->n_rows = n;
        if (!all && (rc = rows_finish(cx, out, NULL, 0, true, UINT64_MAX, 0)))
            return rc;
    }
    return finish_output(cx, body, describe, out);
}

static int select_values(SqlCtx *cx, const cJSON *body, bool describe, QrSqlResult *out)
{
    const cJSON *lists = sqlj_get(body, "valuesLists");
    int n_rows = cJSON_GetArraySize(lists);
    int n_cols = cJSON_GetArraySize(sqlj_get(sqlj_is(cJSON_GetArrayItem(lists, 0), "List"), "items"));
    out->n_cols = n_cols;
    out->cols = qr_arena_calloc(cx->arena, (size_t)(n_cols + 1) * sizeof *out->cols);
    SqlExpr **ex = qr_arena_calloc(cx->arena, ((size_t)n_rows * (size_t)n_cols + 1) * sizeof *ex);
    if (!out->cols || !ex)
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
            if ((rc = sql_expr_compile(cx, cJSON_GetArrayItem(items, c), NULL, &ex[r * n_cols + c])))
                return rc;
        r++;
    }
    for (int c = 0; c < n_cols; c++) {
        QrSqlType t = QR_SQL_UNKNOWN;
        for (int i = 0; i < n_rows; i++) {
            t = union_type(t, ex[i * n_cols + c]->type);
            if (t == QR_SQL_TYPE_COUNT)
                return sql_err_at(cx, ex[i * n_cols + c]->loc, QR_ETYPE, "42804",
                                  "VALUES types cannot be matched");
        }
        char name[24];
        snprintf(name, sizeof name, "column%d", c + 1);
        out->cols[c].name = qr_arena_strndup(cx->arena, name, strlen(name));
        out->cols[c].type = t == QR_SQL_UNKNOWN ? QR_SQL_TEXT : t;
        out->cols[c].typmod = -1;
    }
    if (!describe) {
        out->vals = qr_arena_alloc(cx->arena, ((uint64_t)n_rows * (uint64_t)n_cols + 1) * sizeof *out->vals);
        if (!out->vals)
            return nomem(cx);
        SqlEvalRow er = {.doc = -1};
        for (int i = 0; i < n_rows * n_cols; i++) {
            SqlValue v;
            if ((rc = sql_expr_eval(cx, ex[i], &er, &v)) ||
                (rc = sqlv_cast(cx, &v, out->cols[i % n_cols].type, ex[i]->loc, &out->vals[i])))
                return rc;
        }
        out->n_rows = (uint64_t)n_rows;
    }
    return finish_output(cx, body, describe, out);
}

/* ---- the main SELECT ---- */


static int expand_star(Sel *s, const char *qual, int loc, Target **tg, int *n, int *cap)
{
    int found = 0;
    for (int i = 0; i < s->scope.n; i++) {
        SqlCol *c = &s->scope.cols[i];
        if (c->hidden || (qual && (!c->qual || strcmp(c->qual, qual) != 0)))
            continue;
        if (*n == *cap) {
            int nc = *cap * 2 + 16;
            Target *nt = qr_arena_alloc(s->cx->arena, (size_t)nc * sizeof *nt);
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
        (*tg)[(*n)++] = (Target){e, c->name, i};
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

static int select_body(SqlCtx *cx, const cJSON *body, bool describe, QrSqlResult *out)
{
    int rc;
    memset(out, 0, sizeof *out);
    out->arena = cx->arena;
    if (!body)
        return sql_err_at(cx, -1, QR_ESYNTAX, "42601", "missing SELECT");
    if (sql_check(cx))
        return cx->err->code;
    /* WITH: materialize each CTE once, visible to what follows */
    SqlCte *saved = (SqlCte *)cx->ctes;
    const cJSON *with = sqlj_get(body, "withClause");
    if (with) {
        if (sqlj_bool(with, "recursive"))
            return sql_err_at(cx, sqlj_loc(with), QR_EUNSUPPORTED, "0A000", "WITH RECURSIVE is not supported");
        const cJSON *c;
        cJSON_ArrayForEach(c, sqlj_get(with, "ctes"))
        {
            const cJSON *cte = sqlj_is(c, "CommonTableExpr");
            SqlCte *node = qr_arena_calloc(cx->arena, sizeof *node);
            if (!node)
                return nomem(cx);
            node->name = sqlj_str(cte, "ctename");
            const cJSON *q = sqlj_is(sqlj_get(cte, "ctequery"), "SelectStmt");
            if (!q) {
                cx->ctes = saved;
                return sql_err_at(cx, sqlj_loc(c), QR_EUNSUPPORTED, "0A000",
                                  "only SELECT is supported inside WITH");
            }
            if ((rc = run_sub(cx, q, describe, &node->res))) {
                cx->ctes = saved;
                return rc;
            }
            const cJSON *names = sqlj_get(cte, "aliascolnames");
            int nn = cJSON_GetArraySize(names);
            if (nn > node->res.n_cols) {
                cx->ctes = saved;
                return sql_err_at(cx, sqlj_loc(c), QR_EINVAL, "42P10",
                                  "WITH query \"%s\" has %d columns available but %d columns specified",
                                  node->name, node->res.n_cols, nn);
            }
            for (int i = 0; i < nn; i++)
                node->res.cols[i].name = sqlj_sval(cJSON_GetArrayItem(names, i));
            node->next = (SqlCte *)cx->ctes;
            cx->ctes = node;
        }
    }
    const char *op = sqlj_str(body, "op");
    if (op && strcmp(op, "SETOP_NONE") != 0)
        rc = select_setop(cx, body, op, describe, out);
    else if (sqlj_get(body, "valuesLists"))
        rc = select_values(cx, body, describe, out);
    else {
        Sel *s = qr_arena_calloc(cx->arena, sizeof *s);
        if (!s)
            rc = nomem(cx);
        else {
            s->cx = cx;
            s->scope.outer = cx->outer_scope;
            s->bind.live = &s->subqs;
            rc = select_plain(s, body, describe, out);
            sql_subq_free_all(s->subqs);
        }
    }
    cx->ctes = saved;
    return rc;
}

/* ---- planner rules for aggregates ---- */

/* GROUP BY one keyword column of the query's one table (or no GROUP BY)
 * with only count(*) and count / sum / avg / min / max of its columns, no
 * FILTER or DISTINCT: the scan may aggregate from column blocks (it
 * decides when it runs, knowing the conditions and the column types). */
static int colagg_setup(Sel *s, SqlAggSpec *spec)
{
    SqlCtx *cx = s->cx;
    SqlTableScan *sc = &s->items[0].scan;
    Item *it = &s->items[0];
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
    Sel *s;
    int W;
    bool count;               /* a count of matches may answer */
    bool stats;               /* column statistics may answer */
} FastAgg;

static int fast_agg_row(void *arg, SqlCtx *cx, SqlValue *row, bool *answered)
{
    FastAgg *f = arg;
    Sel *s = f->s;
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
static int fast_aggs(Sel *s, SqlOp **tree, int n_groups, const SqlExpr *having, const Target *tg,
                     int n_tg, SqlExpr **conj, int n_conj, bool const_false)
{
    SqlCtx *cx = s->cx;
    (void)conj;
    if (!(s->n_items == 1 && s->items[0].kind == IT_TABLE) || n_groups || having ||
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

static int select_plain(Sel *s, const cJSON *body, bool describe, QrSqlResult *out)
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
    const cJSON *f;
    cJSON_ArrayForEach(f, sqlj_get(body, "fromClause"))
    {
        if ((rc = add_from(s, f, describe, false, NULL)))
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
        Item *it = &s->items[i];
        if (!it->on)
            continue;
        SqlExpr *w;
        int cap = 0;
        if ((rc = bind_bool(s, it->on, "JOIN/ON", &w)))
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
    Target *tg = NULL;
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
            Target *nt = qr_arena_alloc(cx->arena, (size_t)nc * sizeof *nt);
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
        tg[n_tg++] = (Target){e, name ? name : sql_expr_name(e), e->kind == SE_COL ? e->col : -1};
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
    out->n_cols = n_tg;
    out->cols = qr_arena_calloc(cx->arena, (size_t)(n_tg + 1) * sizeof *out->cols);
    if (!out->cols)
        return nomem(cx);
    for (int i = 0; i < n_tg; i++) {
        QrSqlColumn *c = &out->cols[i];
        c->name = tg[i].name;
        c->type = tg[i].e->type == QR_SQL_UNKNOWN ? QR_SQL_TEXT : tg[i].e->type;
        c->typmod = -1;
        if (tg[i].scope_col >= 0) {
            c->table_oid = s->scope.cols[tg[i].scope_col].table_oid;
            c->attnum = s->scope.cols[tg[i].scope_col].attnum;
        }
    }
    uint64_t limit, offset;
    if ((rc = limit_value(cx, sqlj_get(body, "limitCount"), UINT64_MAX, &limit)) ||
        (rc = limit_value(cx, sqlj_get(body, "limitOffset"), 0, &offset)))
        return rc;
    if (describe)
        return QR_OK;

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
        Item *it = &s->items[ii];
        if (it->kind != IT_TABLE) {
            /* materialized rows take the conditions on their own columns */
            it->n_on_rows = 0;
            it->rows_conj = qr_arena_calloc(cx->arena, (size_t)(n_conj + 1) * sizeof *it->rows_conj);
            if (!it->rows_conj)
                return nomem(cx);
            for (int i = 0; i < n_conj && !it->left; i++)
                if (!done[i] && expr_items(s, conj[i]) == (1ull << ii)) {
                    it->rows_conj[it->n_on_rows++] = conj[i];
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
    bool one_table = s->n_items == 1 && s->items[0].kind == IT_TABLE;
    SqlTableScan *sc0 = one_table ? &s->items[0].scan : NULL;
    /* top-k: ORDER BY score() DESC LIMIT k over one table whose only
     * condition is its text predicate, no grouping / distinct */
    if (one_table && !grouped && !distinct && n_sort >= 1 && limit != UINT64_MAX && keys[0].desc) {
        const SqlExpr *k0 = keys[0].col < n_tg ? tg[keys[0].col].e : extra[keys[0].col - n_tg];
        bool by_score = k0->kind == SE_SCORE ||
                        (k0->kind == SE_COL && s->scope.cols[k0->col].field == -3);
        /* the scan keeps it only when the other conditions are column predicates */
        if (by_score && sc0->drive >= 0 && sc0->n_conj == n_conj && sc0->n_texts == 1)
            sc0->topk = (int64_t)(limit + offset);
    }
    /* ORDER BY a column of the one table LIMIT k: the scan may walk the
     * column's blocks best zone-map bound first, asking the top-N above */
    bool topn = n_sort && limit != UINT64_MAX && !distinct && limit + offset <= 100000 &&
                limit + offset > 0;
    if (topn && one_table && !grouped && !has_srf) {
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
        if (s->items[ii].kind == IT_TABLE && s->items[ii].scan.drive >= 0) {
            s->items[ii].scan.keep_docs = true;
            cx->scores_scan = &s->items[ii].scan;
        }
    int W = s->scope.n;
    /* the leaves, joined left-deep in FROM order */
    SqlOp *tree = NULL;
    if (s->n_items == 0 || const_false)
        tree = sql_op_result(cx, W, NULL, NULL, const_false, "Result", NULL, NULL);
    for (int ii = 0; ii < s->n_items && !const_false; ii++) {
        Item *it = &s->items[ii];
        SqlOp *leaf;
        if (it->kind == IT_TABLE) {
            if ((rc = sql_scan_plan(cx, &it->scan)))
                return rc;
            leaf = sql_op_scan(cx, &it->scan, W);
        } else {
            leaf = sql_op_rows(cx, it->src.vals, it->src.n_rows, it->n_cols, it->first, W,
                               it->rows_conj, it->n_on_rows, it->label);
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
        SqlAggSpec spec = {.groups = groups, .n_groups = n_groups, .aggs = s->bind.aggs,
                           .n_aggs = s->bind.n_aggs, .having = having, .in_width = W, .need = need,
                           .colagg_col = -1};
        if (one_table && !const_false && !has_srf && !cx->scores &&
            (rc = colagg_setup(s, &spec)))
            return rc;
        SqlOp *agg = sql_op_hash_agg(cx, tree, &spec);
        if (!agg)
            return cx->err->code;
        tree = agg;
        /* count(*) over a text predicate (postings only), or count/min/max
         * over a whole table (column statistics): no documents fetched; the
         * aggregate above is the fallback when they cannot answer */
        if ((rc = fast_aggs(s, &tree, n_groups, having, tg, n_tg, conj, n_conj, const_false)))
            return rc;
    }
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
    if (topn) {
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
        if (s->items[ii].kind == IT_TABLE && (run || cx->ex))
            sql_scan_note(cx, &s->items[ii].scan);
    sql_explain_tree(cx, tree, &s->scope, cx->depth);
    return QR_OK;
}

/* Column names may point into the parse tree: copy them to the arena so
 * results outlive their statement. */
static int own_names(SqlCtx *cx, QrSqlColumn *cols, int n)
{
    for (int i = 0; i < n; i++) {
        const char *nm = cols[i].name ? cols[i].name : "?column?";
        if (!(cols[i].name = qr_arena_strndup(cx->arena, nm, strlen(nm))))
            return nomem(cx);
    }
    return QR_OK;
}

int sql_query_run(SqlCtx *cx, const cJSON *select_node, QrSqlResult *res)
{
    const cJSON *body = sqlj_is(select_node, "SelectStmt");
    if (!body)
        body = select_node; /* a bare SelectStmt body */
    QrSqlResult r;
    int rc = select_body(cx, body, false, &r);
    if (rc)
        return rc;
    res->n_cols = r.n_cols;
    res->cols = r.cols;
    res->n_rows = r.n_rows;
    res->vals = r.vals;
    return own_names(cx, res->cols, res->n_cols);
}

int sql_query_describe(SqlCtx *cx, const cJSON *select_node, QrSqlColumn **cols, int *n_cols)
{
    const cJSON *body = sqlj_is(select_node, "SelectStmt");
    if (!body)
        body = select_node;
    QrSqlResult r;
    bool was = cx->analyze_only;
    cx->analyze_only = true;
    int rc = select_body(cx, body, true, &r);
    cx->analyze_only = was;
    if (rc)
        return rc;
    *cols = r.cols;
    *n_cols = r.n_cols;
    return own_names(cx, r.cols, r.n_cols);
}

int sql_explain(SqlCtx *cx, const cJSON *explain_node, QrSqlResult *res)
{
    const cJSON *b = sqlj_is(explain_node, "ExplainStmt");
    struct SqlExplain ex;
    memset(&ex, 0, sizeof ex);
    ex.costs = true;
    qr_buf_init(&ex.lines);
    const cJSON *o;
    cJSON_ArrayForEach(o, sqlj_get(b, "options"))
    {
        const cJSON *de = sqlj_is(o, "DefElem");
        const char *name = sqlj_str(de, "defname");
        const cJSON *arg = sqlj_get(de, "arg");
        bool on = true;
        if (arg) {
            const char *sv = sqlj_sval(arg);
            const cJSON *ac = sqlj_is(arg, "A_Const");
            if (sv)
                on = strcasecmp(sv, "false") && strcasecmp(sv, "off") && strcmp(sv, "0");
            else if (ac && sqlj_get(ac, "boolval"))
                on = sqlj_bool(sqlj_get(ac, "boolval"), "boolval");
        }
        if (name && !strcasecmp(name, "analyze"))
            ex.analyze = on;
        else if (name && !strcasecmp(name, "costs"))
            ex.costs = on;
        else if (name && !strcasecmp(name, "format")) {
            const char *fmt = arg ? sqlj_sval(arg) : NULL;
            if (fmt && !strcasecmp(fmt, "json")) {
                if (!ex.json && !(ex.json = cJSON_CreateArray()))
                    return nomem(cx);
            } else if (!fmt || strcasecmp(fmt, "text")) {
                cJSON_Delete(ex.json);
                return sql_err_at(cx, sqlj_loc(o), QR_EUNSUPPORTED, "0A000",
                                  "EXPLAIN format \"%s\" is not supported (text or json)",
                                  fmt ? fmt : "?");
            }
        }
        else if (name && (!strcasecmp(name, "scores")))
            cx->scores = on;
        else if (name && strcasecmp(name, "verbose") && strcasecmp(name, "costs") &&
                 strcasecmp(name, "format") && strcasecmp(name, "buffers") &&
                 strcasecmp(name, "timing") && strcasecmp(name, "summary")) {
            cJSON_Delete(ex.json);
            return sql_err_at(cx, sqlj_loc(o), QR_EINVAL, "42601",
                              "unrecognized EXPLAIN option \"%s\"", name);
        }
    }
    const cJSON *q = sqlj_get(b, "query");
    if (!sqlj_is(q, "SelectStmt") || (ex.json && cx->scores)) {
        cJSON_Delete(ex.json);
        return sql_err_at(cx, sqlj_loc(q), QR_EUNSUPPORTED, "0A000",
                          cx->scores ? "EXPLAIN (SCORES) returns rows: FORMAT JSON does not apply"
                                     : "EXPLAIN is supported for SELECT only");
    }
    QrSqlResult r;
    uint64_t t0 = qr_now_ns();
    if (cx->scores) {
        /* run the query, then one row per (returned doc, term, field) */
        int rc = select_body(cx, sqlj_body(q), false, &r);
        SqlTableScan *sc = cx->scores_scan;
        cx->scores = false;
        cx->scores_scan = NULL;
        qr_buf_free(&ex.lines);
        if (rc)
            return rc;
        if (!sc)
            return sql_err_at(cx, sqlj_loc(q), QR_EINVAL, "42809",
                              "EXPLAIN (SCORES) needs a full-text predicate (col @@ 'query') in WHERE");
        static const char *const names[] = {"_id", "doc_key", "term", "field", "tf", "df", "idf",
                                            "doc_len", "avgdl", "weight", "score"};
        static const QrSqlType types[] = {QR_SQL_INT8, QR_SQL_TEXT, QR_SQL_TEXT, QR_SQL_TEXT,
                                          QR_SQL_INT8, QR_SQL_INT8, QR_SQL_FLOAT8, QR_SQL_INT8,
                                          QR_SQL_FLOAT8, QR_SQL_FLOAT8, QR_SQL_FLOAT8};
        SqlRowSink sink = {.width = 11};
        if ((rc = sql_scores_rows(cx, sc->t, sc->texts[sc->drive], sc->kept_docs, sc->n_kept, &sink)))
            return rc;
        res->n_cols = 11;
        res->cols = qr_arena_calloc(cx->arena, 11 * sizeof *res->cols);
        if (!res->cols)
            return nomem(cx);
        for (int c = 0; c < 11; c++) {
            res->cols[c].name = names[c];
            res->cols[c].type = types[c];
            res->cols[c].typmod = -1;
        }
        res->vals = sink.rows;
        res->n_rows = sink.n;
        return QR_OK;
    }
    cx->ex = &ex;
    int rc = select_body(cx, sqlj_body(q), false, &r);
    cx->ex = NULL;
    bool json_out = ex.json != NULL;
    if (rc == QR_OK && ex.json) {
        /* the outermost plan is the last entry; it carries the totals */
        cJSON *last = cJSON_GetArrayItem(ex.json, cJSON_GetArraySize(ex.json) - 1);
        if (last && ex.analyze) {
            cJSON_AddNumberToObject(last, "Execution Time", (double)(qr_now_ns() - t0) / 1e6);
            cJSON_AddNumberToObject(last, "Rows", (double)r.n_rows);
        }
        char *js = cJSON_Print(ex.json);
        cJSON_Delete(ex.json);
        ex.json = NULL;
        if (js) {
            qr_buf_append(&ex.lines, js, strlen(js));
            cJSON_free(js);
        }
        qr_buf_putc(&ex.lines, '\n');
    }
    cJSON_Delete(ex.json);
    if (rc == QR_OK && ex.analyze && !json_out)
        qr_buf_printf(&ex.lines, "Execution Time: %.3f ms\nRows: %" PRIu64 "\n",
                      (double)(qr_now_ns() - t0) / 1e6, r.n_rows);
    if (rc == QR_OK && !qr_buf_ok(&ex.lines))
        rc = sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    if (rc) {
        qr_buf_free(&ex.lines);
        return rc;
    }
    /* one row per line */
    uint64_t n = 0;
    for (size_t i = 0; i < ex.lines.len; i++)
        n += ex.lines.data[i] == '\n';
    if (json_out) /* one row: the whole document, its inner newlines kept */
        n = 1;
    res->n_cols = 1;
    res->cols = qr_arena_calloc(cx->arena, sizeof *res->cols);
    res->vals = qr_arena_alloc(cx->arena, (n + 1) * sizeof *res->vals);
    if (!res->cols || !res->vals) {
        qr_buf_free(&ex.lines);
        return nomem(cx);
    }
    res->cols[0].name = "QUERY PLAN";
    res->cols[0].type = QR_SQL_TEXT;
    res->cols[0].typmod = -1;
    const char *p = (const char *)ex.lines.data;
    for (uint64_t i = 0; i < n; i++) {
        const char *nl = json_out ? p + ex.lines.len - 1 : strchr(p, '\n');
        char *line = qr_arena_strndup(cx->arena, p, (size_t)(nl - p));
        if (!line) {
            qr_buf_free(&ex.lines);
            return nomem(cx);
        }
        res->vals[i] = sqlv_text(line, (size_t)(nl - p));
        p = nl + 1;
    }
    res->n_rows = n;
    qr_buf_free(&ex.lines);
    return QR_OK;
}
