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

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "store/util.h"

#define MAX_ITEMS 64
#define NESTED_LOOP_MAX 50000000ull

/* ---- CTEs and EXPLAIN records ---- */

typedef struct SqlCte {
    const char *name;
    QrSqlResult res;          /* columns (+ rows unless describing) */
    struct SqlCte *next;
} SqlCte;

typedef struct SqlExplain {
    QrBuf lines;              /* '\n'-separated */
    bool analyze;
    cJSON *json;              /* FORMAT JSON: the plans as flushed (sub-selects first) */
} SqlExplain;

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
    /* results */
    SqlValue *rows;           /* whole-scope width */
    uint64_t n_rows;
} Item;

typedef struct Sel Sel;
struct Sel {
    SqlCtx *cx;
    Item items[MAX_ITEMS];
    int n_items;
    SqlScope scope;
    int cap_cols;
    SqlBind bind;
    char plan[4096];          /* EXPLAIN lines of this level, top-down, built bottom-up */
    int plan_len;
    const char *plan_nodes[16];
    int n_plan_nodes;
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

static int add_item_rows(Sel *s, const char *qual, QrSqlResult *src, const cJSON *colnames, int loc)
{
    if (s->n_items == MAX_ITEMS)
        return sql_err_at(s->cx, loc, QR_ELIMIT, "54000", "too many FROM items (at most %d)", MAX_ITEMS);
    Item *it = &s->items[s->n_items];
    memset(it, 0, sizeof *it);
    it->kind = IT_ROWS;
    it->qual = qual;
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
                return add_item_rows(s, qual, &c->res, colnames, loc);
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
            return add_item_rows(s, qual, &r, colnames, loc);
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
    return add_item_rows(s, aname ? aname : e->name, &r, sqlj_get(alias, "colnames"), loc);
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
        rc = add_item_rows(s, sqlj_str(alias, "aliasname"), &r, sqlj_get(alias, "colnames"), loc);
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

typedef struct SortKey {
    int col;                  /* column of the extended row */
    bool desc, nulls_first;
} SortKey;

typedef struct SortCtx {
    const SortKey *keys;
    int n_keys, width;
    const SqlValue *vals;
} SortCtx;

static int row_cmp(const void *a, const void *b, void *arg)
{
    const SortCtx *sc = arg;
    uint64_t ia = *(const uint64_t *)a, ib = *(const uint64_t *)b;
    const SqlValue *ra = sc->vals + ia * (uint64_t)sc->width, *rb = sc->vals + ib * (uint64_t)sc->width;
    for (int k = 0; k < sc->n_keys; k++) {
        int c = sqlv_key_cmp(&ra[sc->keys[k].col], &rb[sc->keys[k].col], sc->keys[k].desc,
                             sc->keys[k].nulls_first);
        if (c)
            return c;
    }
    return ia < ib ? -1 : ia > ib; /* stable */
}

static int value_cmp(const void *a, const void *b)
{
    return sqlv_cmp(a, b);
}

void sql_sort_values(SqlValue *v, uint64_t n)
{
    qsort(v, n, sizeof *v, value_cmp);
}

/* Reorder v so that v[k] holds the value a sort would put there, with
 * nothing larger before it and nothing smaller after it (quickselect,
 * Hoare partitions around a median of three): O(n) on average, where a
 * percentile used to sort all n values. */
static void select_kth(SqlValue *v, uint64_t n, uint64_t k)
{
    int64_t lo = 0, hi = (int64_t)n - 1, kk = (int64_t)k;
    SqlValue t;
#define SWAPV(a, b) (t = v[a], v[a] = v[b], v[b] = t)
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (sqlv_cmp(&v[mid], &v[lo]) < 0)
            SWAPV(mid, lo);
        if (sqlv_cmp(&v[hi], &v[lo]) < 0)
            SWAPV(hi, lo);
        if (sqlv_cmp(&v[hi], &v[mid]) < 0)
            SWAPV(hi, mid);
        SqlValue pivot = v[mid];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (sqlv_cmp(&v[i], &pivot) < 0)
                i++;
            while (sqlv_cmp(&v[j], &pivot) > 0)
                j--;
            if (i <= j) {
                SWAPV(i, j);
                i++;
                j--;
            }
        }
        /* [lo, j] <= pivot <= [i, hi]; between them, values equal to it */
        if (kk <= j)
            hi = j;
        else if (kk >= i)
            lo = i;
        else
            break;
    }
#undef SWAPV
}

/* Sort rows [n x width] by keys, keep [offset, offset+limit), copy the first
 * out_width columns of each into a new array. */
static int sort_limit(SqlCtx *cx, SqlValue *vals, uint64_t n, int width, const SortKey *keys,
                      int n_keys, uint64_t offset, uint64_t limit, int out_width, SqlValue **out,
                      uint64_t *n_out)
{
    uint64_t *idx = qr_malloc((n + 1) * sizeof *idx);
    if (!idx)
        return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    for (uint64_t i = 0; i < n; i++)
        idx[i] = i;
    if (n_keys) {
        SortCtx sc = {keys, n_keys, width, vals};
        qsort_r(idx, n, sizeof *idx, row_cmp, &sc);
    }
    uint64_t from = offset < n ? offset : n;
    uint64_t k = n - from < limit ? n - from : limit;
    SqlValue *o = qr_arena_alloc(cx->arena, (k * (uint64_t)out_width + 1) * sizeof *o);
    if (!o) {
        qr_free(idx);
        return nomem(cx);
    }
    for (uint64_t i = 0; i < k; i++)
        memcpy(o + i * (uint64_t)out_width, vals + idx[from + i] * (uint64_t)width,
               (size_t)out_width * sizeof *o);
    qr_free(idx);
    *out = o;
    *n_out = k;
    return QR_OK;
}

/* LIMIT / OFFSET expressions: constants or parameters, NULL = none. */
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

/* Hash set of rows (DISTINCT / UNION): keeps the first of equal rows. */
static int dedupe(SqlCtx *cx, SqlValue *vals, uint64_t *n, int width)
{
    uint64_t cap = 16;
    while (cap < *n * 2)
        cap <<= 1;
    int64_t *slots = qr_malloc(cap * sizeof *slots);
    if (!slots)
        return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    memset(slots, 0xff, cap * sizeof *slots);
    uint64_t k = 0;
    for (uint64_t i = 0; i < *n; i++) {
        const SqlValue *r = vals + i * (uint64_t)width;
        uint64_t h = 0;
        for (int c = 0; c < width; c++)
            h = h * 31 + sqlv_hash(&r[c]);
        uint64_t p = h & (cap - 1);
        bool dup = false;
        while (slots[p] >= 0) {
            const SqlValue *o = vals + (uint64_t)slots[p] * (uint64_t)width;
            bool same = true;
            for (int c = 0; c < width && same; c++)
                same = sqlv_same(&o[c], &r[c]);
            if (same) {
                dup = true;
                break;
            }
            p = (p + 1) & (cap - 1);
        }
        if (dup)
            continue;
        if (k != i)
            memcpy(vals + k * (uint64_t)width, r, (size_t)width * sizeof *r);
        slots[p] = (int64_t)k;
        k++;
    }
    qr_free(slots);
    *n = k;
    return QR_OK;
}

/* ---- aggregation ---- */

typedef struct AggState {
    int64_t count;
    int64_t sum_i;
    double sum_f;
    bool sum_is_f;
    SqlValue best;            /* min / max */
    bool has;
    bool bool_acc;
    SqlValue *vals;           /* DISTINCT, percentiles, string_agg */
    uint64_t n_vals, cap_vals;
} AggState;

typedef struct Group {
    const SqlValue *rep;      /* a representative input row */
    SqlValue *keys;
    AggState *st;
    uint64_t hash;
} Group;

static int agg_push_val(SqlCtx *cx, AggState *st, const SqlValue *v)
{
    if (st->n_vals == st->cap_vals) {
        uint64_t nc = st->cap_vals ? st->cap_vals * 2 : 16;
        SqlValue *nv = qr_arena_alloc(cx->arena, nc * sizeof *nv);
        if (!nv)
            return nomem(cx);
        if (st->n_vals)
            memcpy(nv, st->vals, st->n_vals * sizeof *nv);
        st->vals = nv;
        st->cap_vals = nc;
    }
    st->vals[st->n_vals++] = *v;
    return QR_OK;
}

static int agg_step_keep(SqlCtx *cx, const SqlAgg *a, AggState *st, const SqlEvalRow *r,
                         bool *keep)
{
    if (a->filter) {
        bool pass;
        int frc = sql_expr_test(cx, a->filter, r, &pass);
        if (frc || !pass)
            return frc;
    }
    if (a->kind == SA_COUNT_STAR) {
        st->count++;
        return QR_OK;
    }
    SqlValue v;
    int rc = sql_expr_eval(cx, a->arg, r, &v);
    if (rc)
        return rc;
    if (v.is_null)
        return QR_OK;
    if (a->distinct || a->kind == SA_PCT_CONT || a->kind == SA_PCT_DISC || a->kind == SA_STRING_AGG) {
        /* kept past the row: strings are copied */
        if (a->kind == SA_STRING_AGG) {
            /* keep value and delimiter pairs */
            SqlValue d;
            if ((rc = sql_expr_eval(cx, a->arg2, r, &d)) || (rc = sqlv_own(cx, &d)) ||
                (rc = agg_push_val(cx, st, &d)))
                return rc;
        }
        *keep = true;
        if ((rc = sqlv_own(cx, &v)))
            return rc;
        return agg_push_val(cx, st, &v);
    }
    st->count++;
    switch (a->kind) {
    case SA_SUM:
    case SA_AVG:
        if (sqlt_is_int(v.type) && !st->sum_is_f) {
            if (__builtin_add_overflow(st->sum_i, v.u.i, &st->sum_i)) {
                if (a->kind == SA_SUM)
                    return sql_err_at(cx, -1, QR_EINVAL, "22003", "bigint out of range");
                st->sum_is_f = true;
                st->sum_f = (double)st->sum_i + (double)v.u.i;
            }
        } else {
            if (!st->sum_is_f) {
                st->sum_is_f = true;
                st->sum_f = (double)st->sum_i;
            }
            double d = v.u.f;
            if (v.type == QR_SQL_NUMERIC || sqlt_is_int(v.type)) {
                SqlValue f;
                if ((rc = sqlv_cast(cx, &v, QR_SQL_FLOAT8, -1, &f)))
                    return rc;
                d = f.u.f;
            }
            st->sum_f += d;
        }
        break;
    case SA_MIN:
    case SA_MAX: {
        int c = st->has ? sqlv_cmp(&v, &st->best) : 0;
        if (!st->has || (a->kind == SA_MIN ? c < 0 : c > 0)) {
            *keep = true;
            if ((rc = sqlv_own(cx, &v)))
                return rc;
            st->best = v;
            st->has = true;
        }
        break;
    }
    case SA_BOOL_AND:
        st->bool_acc = st->has ? st->bool_acc && v.u.b : v.u.b;
        st->has = true;
        break;
    case SA_BOOL_OR:
        st->bool_acc = st->has ? st->bool_acc || v.u.b : v.u.b;
        st->has = true;
        break;
    default:
        break;
    }
    return QR_OK;
}

/* One row into one aggregate.  What the argument's evaluation allocated is
 * given back unless the state kept it (a new min/max, a distinct value). */
static int agg_step(SqlCtx *cx, const SqlAgg *a, AggState *st, const SqlEvalRow *r)
{
    QrArenaMark m = qr_arena_mark(cx->arena);
    bool keep = false;
    int rc = agg_step_keep(cx, a, st, r, &keep);
    if (rc == QR_OK && !keep)
        qr_arena_release(cx->arena, m);
    return rc;
}

static int agg_final(SqlCtx *cx, const SqlAgg *a, AggState *st, SqlValue *out)
{
    *out = sqlv_null();
    out->type = a->type;
    int rc;
    if (a->distinct && a->kind != SA_STRING_AGG && st->n_vals) {
        sql_sort_values(st->vals, st->n_vals);
        uint64_t k = 0;
        for (uint64_t i = 0; i < st->n_vals; i++)
            if (k == 0 || sqlv_cmp(&st->vals[k - 1], &st->vals[i]) != 0)
                st->vals[k++] = st->vals[i];
        st->n_vals = k;
        if (a->kind != SA_PCT_CONT && a->kind != SA_PCT_DISC) {
            AggState s2;
            memset(&s2, 0, sizeof s2);
            SqlAgg plain = *a;
            plain.distinct = false;
            plain.filter = NULL;   /* applied when the values were collected */
            SqlExpr colx = {.kind = SE_COL, .col = 0, .type = a->arg->type};
            plain.arg = &colx;
            for (uint64_t i = 0; i < k; i++) {
                SqlEvalRow r = {.row = &st->vals[i], .doc = -1};
                if ((rc = agg_step(cx, &plain, &s2, &r)))
                    return rc;
            }
            return agg_final(cx, &plain, &s2, out);
        }
    }
    switch (a->kind) {
    case SA_COUNT_STAR:
    case SA_COUNT:
        *out = sqlv_int(a->distinct ? (int64_t)st->n_vals : st->count);
        return QR_OK;
    case SA_SUM:
        if (!st->count)
            return QR_OK;
        if (st->sum_is_f)
            *out = sqlv_float(st->sum_f);
        else
            *out = sqlv_int(st->sum_i);
        out->type = a->type;
        if (a->type == QR_SQL_FLOAT8 && !st->sum_is_f)
            *out = sqlv_float((double)st->sum_i);
        return QR_OK;
    case SA_AVG:
        if (!st->count)
            return QR_OK;
        *out = sqlv_float((st->sum_is_f ? st->sum_f : (double)st->sum_i) / (double)st->count);
        return QR_OK;
    case SA_MIN:
    case SA_MAX:
        if (st->has) {
            *out = st->best;
            out->type = a->type;
        }
        return QR_OK;
    case SA_BOOL_AND:
    case SA_BOOL_OR:
        if (st->has)
            *out = sqlv_bool(st->bool_acc);
        return QR_OK;
    case SA_STRING_AGG: {
        if (!st->n_vals)
            return QR_OK;
        QrBuf b;
        qr_buf_init(&b);
        for (uint64_t i = 0; i + 1 < st->n_vals; i += 2) {
            if (i && !st->vals[i].is_null)
                qr_buf_append(&b, st->vals[i].u.s.s, st->vals[i].u.s.n);
            SqlValue t;
            if (sqlv_cast(cx, &st->vals[i + 1], QR_SQL_TEXT, -1, &t) == QR_OK)
                qr_buf_append(&b, t.u.s.s, t.u.s.n);
        }
        char *s = qr_arena_strndup(cx->arena, b.data ? (char *)b.data : "", b.len);
        size_t n = b.len;
        qr_buf_free(&b);
        if (!s)
            return nomem(cx);
        *out = sqlv_text(s, n);
        return QR_OK;
    }
    case SA_PCT_CONT:
    case SA_PCT_DISC: {
        if (!st->n_vals)
            return QR_OK;
        SqlValue fv;
        SqlEvalRow none = {.doc = -1};
        if ((rc = sql_expr_eval(cx, a->arg2, &none, &fv)))
            return rc;
        SqlValue ff;
        if ((rc = sqlv_cast(cx, &fv, QR_SQL_FLOAT8, a->arg2->loc, &ff)))
            return rc;
        double p = ff.u.f;
        if (fv.is_null)
            return QR_OK;
        if (p < 0 || p > 1 || isnan(p))
            return sql_err_at(cx, a->arg2->loc, QR_EINVAL, "22003",
                              "percentile value %g is not between 0 and 1", p);
        /* DISTINCT values arrive sorted; others are only partly ordered,
         * enough to put the one or two order statistics in place */
        uint64_t n = st->n_vals;
        if (a->kind == SA_PCT_DISC) {
            /* the first value whose position >= p * n */
            double pos = p * (double)n;
            uint64_t k = pos <= 0 ? 0 : (uint64_t)ceil(pos) - 1;
            if (k >= n)
                k = n - 1;
            if (!a->distinct)
                select_kth(st->vals, n, k);
            *out = st->vals[k];
            out->type = a->type;
            return QR_OK;
        }
        double pos = p * (double)(n - 1);
        uint64_t lo = (uint64_t)floor(pos), hi = (uint64_t)ceil(pos);
        if (!a->distinct) {
            select_kth(st->vals, n, lo);
            if (hi != lo) {
                /* the next order statistic: the least value after lo */
                uint64_t m = lo + 1;
                for (uint64_t i = lo + 2; i < n; i++)
                    if (sqlv_cmp(&st->vals[i], &st->vals[m]) < 0)
                        m = i;
                SqlValue t = st->vals[hi];
                st->vals[hi] = st->vals[m];
                st->vals[m] = t;
            }
        }
        SqlValue lv, hv;
        if ((rc = sqlv_cast(cx, &st->vals[lo], QR_SQL_FLOAT8, -1, &lv)) ||
            (rc = sqlv_cast(cx, &st->vals[hi], QR_SQL_FLOAT8, -1, &hv)))
            return rc;
        if (sqlt_is_ts(a->arg->type)) {
            double x = (double)st->vals[lo].u.i, y = (double)st->vals[hi].u.i;
            out->is_null = false;
            out->u.i = (int64_t)llround(x + (y - x) * (pos - (double)lo));
            return QR_OK;
        }
        *out = sqlv_float(lv.u.f + (hv.u.f - lv.u.f) * (pos - (double)lo));
        return QR_OK;
    }
    }
    return QR_OK;
}

typedef struct Target {
    SqlExpr *e;
    const char *name;
    int scope_col;            /* plain column: scope index, else -1 */
} Target;

/* Grouping and projection as a row consumer: rows come from a streaming
 * table scan (borrowed, valid during the call) or from the joined array.
 * Grouped: per-group keys, a copy of the first row (for grouped columns)
 * and aggregate states.  Not grouped: the output values (targets + extra
 * sort keys) of every row.  Strings kept are copied to the arena. */
typedef struct Agg {
    SqlCtx *cx;
    int W;
    bool grouped;
    SqlExpr **groups;
    int n_groups;
    SqlBind *bind;
    Target *tg;
    int n_tg;
    SqlExpr **extra;
    int n_extra, XW;
    const SortKey *keys;      /* ORDER BY ... LIMIT: keep only the first `keep` rows */
    int n_keys;
    uint64_t keep;            /* 0 = keep every row */
    SqlValue *ca_row;         /* aggregates from column blocks: the group's row */
    int ca_col;               /* (NULLs but the grouped column ca_col) */
    SqlValue bar;             /* after a compaction (have_bar): the first key of */
    bool have_bar;            /* the keep-th row; a row sorting after it cannot enter */
    int64_t *slots;           /* owns (qr_malloc) */
    uint64_t cap;
    Group *gs;                /* owns (qr_malloc) */
    uint64_t n_g, gcap;
    SqlValue *keyv;
    SqlRowSink x;             /* output rows, XW wide */
    bool has_srf;             /* a target is a set-returning function: rows fan out */
} Agg;

static int ag_init(Agg *a, SqlCtx *cx, int W, bool grouped, SqlExpr **groups, int n_groups,
                   SqlBind *bind, Target *tg, int n_tg, SqlExpr **extra, int n_extra)
{
    memset(a, 0, sizeof *a);
    a->cx = cx;
    a->W = W;
    a->grouped = grouped;
    a->groups = groups;
    a->n_groups = n_groups;
    a->bind = bind;
    a->tg = tg;
    a->n_tg = n_tg;
    a->extra = extra;
    a->n_extra = n_extra;
    a->XW = n_tg + n_extra;
    a->x.width = a->XW ? a->XW : 1;
    if (!grouped)
        return QR_OK;
    a->cap = 64;
    a->gcap = 16;
    a->slots = qr_malloc(a->cap * sizeof *a->slots);
    a->gs = qr_malloc(a->gcap * sizeof *a->gs);
    a->keyv = qr_arena_alloc(cx->arena, (size_t)(n_groups + 1) * sizeof *a->keyv);
    if (!a->slots || !a->gs || !a->keyv) {
        qr_free(a->slots);
        qr_free(a->gs);
        a->slots = NULL;
        a->gs = NULL;
        return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    }
    memset(a->slots, 0xff, a->cap * sizeof *a->slots);
    return QR_OK;
}

static void ag_free(Agg *a)
{
    qr_free(a->slots);
    qr_free(a->gs);
    a->slots = NULL;
    a->gs = NULL;
}

/* Bounded sort: once twice `keep` rows are held, sort them and keep the
 * first `keep` (ties keep their arrival order, as the final sort does). */
static int ag_compact(Agg *a)
{
    uint64_t n = a->x.n, w = (uint64_t)a->XW;
    uint64_t *idx = qr_malloc(n * sizeof *idx);
    SqlValue *tmp = qr_malloc(a->keep * w * sizeof *tmp + 1);
    if (!idx || !tmp) {
        qr_free(idx);
        qr_free(tmp);
        return sql_err_at(a->cx, -1, QR_ENOMEM, NULL, "out of memory");
    }
    for (uint64_t i = 0; i < n; i++)
        idx[i] = i;
    SortCtx sc = {a->keys, a->n_keys, a->XW, a->x.rows};
    qsort_r(idx, n, sizeof *idx, row_cmp, &sc);
    for (uint64_t i = 0; i < a->keep; i++)
        memcpy(tmp + i * w, a->x.rows + idx[i] * w, w * sizeof *tmp);
    memcpy(a->x.rows, tmp, a->keep * w * sizeof *tmp);
    a->x.n = a->keep;
    a->bar = a->x.rows[(a->keep - 1) * w + (uint64_t)a->keys[0].col];
    a->have_bar = true;
    qr_free(idx);
    qr_free(tmp);
    return QR_OK;
}

/* The scan's ordered walk asks whether a row with this first sort key can
 * still be among the first `keep` rows. */
static bool ag_may_enter(void *arg, const SqlValue *key)
{
    const Agg *a = arg;
    return !a->have_bar ||
           sqlv_key_cmp(key, &a->bar, a->keys[0].desc, a->keys[0].nulls_first) <= 0;
}

/* One output row into the sink: the targets (set-returning ones take
 * element r of their list, NULL past its end) and the extra sort keys. */
static int ag_project_row(Agg *a, const SqlEvalRow *er, SqlValue **lists, const uint64_t *lens,
                          uint64_t r)
{
    SqlCtx *cx = a->cx;
    SqlValue *x = sql_sink_slot(cx, &a->x);
    int rc = QR_OK;
    if (!x)
        return cx->err->code;
    for (int i = 0; i < a->n_tg && rc == QR_OK; i++) {
        if (lists && a->tg[i].e->kind == SE_SRF) {
            x[i] = r < lens[i] ? lists[i][r] : sqlv_null();
            x[i].type = a->tg[i].e->type;
        } else {
            rc = sql_expr_eval(cx, a->tg[i].e, er, &x[i]);
        }
        if (rc == QR_OK)
            rc = sqlv_own(cx, &x[i]);
    }
    for (int i = 0; i < a->n_extra && rc == QR_OK; i++)
        if ((rc = sql_expr_eval(cx, a->extra[i], er, &x[a->n_tg + i])) == QR_OK)
            rc = sqlv_own(cx, &x[a->n_tg + i]);
    if (rc == QR_OK)
        a->x.n++;
    if (rc == QR_OK && a->keep && !a->grouped && a->x.n >= 2 * a->keep)
        rc = ag_compact(a);
    return rc;
}

/* Evaluate the output values of one (group) row into the sink.  With
 * set-returning targets, as many rows as the longest function gives,
 * shorter ones padded with NULLs (PostgreSQL 10's rule); the other targets
 * repeat. */
static int ag_project(Agg *a, const SqlEvalRow *er)
{
    SqlCtx *cx = a->cx;
    if (!a->has_srf)
        return ag_project_row(a, er, NULL, NULL, 0);
    SqlValue **lists = qr_arena_calloc(cx->arena, (size_t)(a->n_tg + 1) * sizeof *lists);
    uint64_t *lens = qr_arena_calloc(cx->arena, (size_t)(a->n_tg + 1) * sizeof *lens);
    uint64_t n = 0;
    int rc = QR_OK;
    if (!lists || !lens)
        return nomem(cx);
    for (int i = 0; i < a->n_tg && rc == QR_OK; i++) {
        const SqlExpr *e = a->tg[i].e;
        if (e->kind != SE_SRF)
            continue;
        SqlValue argv[3];
        for (int k = 0; k < e->n_args && rc == QR_OK; k++)
            rc = sql_expr_eval(cx, e->args[k], er, &argv[k]);
        if (rc == QR_OK)
            rc = sql_srf_rows(cx, e->name, e->n_args, argv, e->type, &lists[i], &lens[i]);
        if (lens[i] > n)
            n = lens[i];
    }
    for (uint64_t r = 0; r < n && rc == QR_OK; r++)
        rc = ag_project_row(a, er, lists, lens, r);
    return rc;
}

static int ag_new_group(Agg *a, const SqlValue *row, uint64_t h, uint64_t p, int64_t *gi)
{
    SqlCtx *cx = a->cx;
    if (a->n_g == a->gcap) {
        Group *ng = qr_realloc(a->gs, a->gcap * 2 * sizeof *ng);
        if (!ng)
            return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
        a->gs = ng;
        a->gcap *= 2;
    }
    Group *G = &a->gs[a->n_g];
    SqlValue *rep = qr_arena_alloc(cx->arena, (size_t)(a->W + 1) * sizeof *rep);
    G->hash = h;
    G->keys = qr_arena_alloc(cx->arena, (size_t)(a->n_groups + 1) * sizeof *G->keys);
    G->st = qr_arena_calloc(cx->arena, (size_t)(a->bind->n_aggs + 1) * sizeof *G->st);
    if (!rep || !G->keys || !G->st)
        return nomem(cx);
    memcpy(rep, row, (size_t)a->W * sizeof *rep);
    for (int c = 0; c < a->W; c++)
        if (sqlv_own(cx, &rep[c]))
            return cx->err->code;
    G->rep = rep;
    for (int g = 0; g < a->n_groups; g++) {
        G->keys[g] = a->keyv[g];
        if (sqlv_own(cx, &G->keys[g]))
            return cx->err->code;
    }
    a->slots[p] = (int64_t)a->n_g;
    *gi = (int64_t)a->n_g++;
    if (a->n_g * 2 > a->cap) { /* grow and rehash */
        uint64_t nc = a->cap * 2;
        int64_t *ns = qr_malloc(nc * sizeof *ns);
        if (!ns)
            return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
        memset(ns, 0xff, nc * sizeof *ns);
        for (uint64_t g = 0; g < a->n_g; g++) {
            uint64_t q = a->gs[g].hash & (nc - 1);
            while (ns[q] >= 0)
                q = (q + 1) & (nc - 1);
            ns[q] = (int64_t)g;
        }
        qr_free(a->slots);
        a->slots = ns;
        a->cap = nc;
    }
    return QR_OK;
}

/* The group of a row (created when new): *gi indexes a->gs. */
static int ag_group(Agg *a, const SqlValue *row, int64_t *gi)
{
    SqlCtx *cx = a->cx;
    SqlEvalRow er = {.row = row, .doc = -1};
    int rc;
    uint64_t h = 0;
    QrArenaMark keys_mark = qr_arena_mark(cx->arena);
    for (int g = 0; g < a->n_groups; g++) {
        if ((rc = sql_expr_eval(cx, a->groups[g], &er, &a->keyv[g])))
            return rc;
        h = h * 31 + sqlv_hash(&a->keyv[g]);
    }
    uint64_t p = h & (a->cap - 1);
    *gi = -1;
    while (a->slots[p] >= 0) {
        Group *G = &a->gs[a->slots[p]];
        bool same = G->hash == h;
        for (int g = 0; g < a->n_groups && same; g++)
            same = sqlv_same(&G->keys[g], &a->keyv[g]);
        if (same) {
            *gi = a->slots[p];
            break;
        }
        p = (p + 1) & (a->cap - 1);
    }
    if (*gi < 0)
        return ag_new_group(a, row, h, p, gi);
    qr_arena_release(cx->arena, keys_mark);   /* the group's keys are kept already */
    return QR_OK;
}

/* The row consumer (SqlTableScan.consume and the joined-rows loop). */
static int ag_row(void *arg, const SqlValue *row)
{
    Agg *a = arg;
    SqlCtx *cx = a->cx;
    SqlEvalRow er = {.row = row, .doc = -1};
    int rc = sql_check(cx);
    if (rc)
        return rc;
    if (!a->grouped)
        return ag_project(a, &er);
    int64_t gi;
    if ((rc = ag_group(a, row, &gi)))
        return rc;
    for (int k = 0; k < a->bind->n_aggs && rc == QR_OK; k++)
        rc = agg_step(cx, a->bind->aggs[k], &a->gs[gi].st[k], &er);
    return rc;
}

/* Aggregates read from column blocks: one group's partial states from one
 * segment (SqlColAgg.emit), merged as agg_step would have added the rows. */
static int ag_colagg_part(void *arg, const SqlValue *key, const SqlColAggPart *parts)
{
    Agg *a = arg;
    SqlCtx *cx = a->cx;
    if (a->n_groups) {
        a->ca_row[a->ca_col] = *key;
        a->ca_row[a->ca_col].type = a->groups[0]->type;
    }
    int64_t gi;
    int rc = ag_group(a, a->ca_row, &gi);
    for (int k = 0; k < a->bind->n_aggs && rc == QR_OK; k++) {
        const SqlAgg *A = a->bind->aggs[k];
        const SqlColAggPart *P = &parts[k];
        AggState *st = &a->gs[gi].st[k];
        if (A->kind == SA_COUNT_STAR) {
            st->count += parts[0].rows; /* the group's rows are counted in the first part */
            continue;
        }
        if (!P->count)
            continue;
        bool fl = sqlt_is_float(A->arg->type);
        switch (A->kind) {
        case SA_SUM:
        case SA_AVG:
            if (!fl && P->sum_is_f && A->kind == SA_SUM)
                return sql_err_at(cx, -1, QR_EINVAL, "22003", "bigint out of range");
            if (!P->sum_is_f && !st->sum_is_f) {
                if (!__builtin_add_overflow(st->sum_i, P->sum_i, &st->sum_i))
                    break;
                if (A->kind == SA_SUM)
                    return sql_err_at(cx, -1, QR_EINVAL, "22003", "bigint out of range");
                st->sum_is_f = true;
                st->sum_f = (double)st->sum_i + (double)P->sum_i;
                break;
            }
            if (!st->sum_is_f) {
                st->sum_is_f = true;
                st->sum_f = (double)st->sum_i;
            }
            st->sum_f += P->sum_is_f ? P->sum_f : (double)P->sum_i;
            break;
        case SA_MIN:
        case SA_MAX: {
            bool mn = A->kind == SA_MIN;
            SqlValue v = fl ? sqlv_float(mn ? P->min_f : P->max_f) : sqlv_int(mn ? P->min_i : P->max_i);
            v.type = A->arg->type;
            int c = st->has ? sqlv_cmp(&v, &st->best) : 0;
            if (!st->has || (mn ? c < 0 : c > 0))
                st->best = v;
            st->has = true;
            break;
        }
        default:
            break;
        }
        st->count += P->count;
    }
    return rc;
}

/* GROUP BY one keyword column of the query's one table (or no GROUP BY)
 * with only count(*) and count / sum / avg / min / max of its columns, no
 * FILTER or DISTINCT: the scan may aggregate from column blocks (it
 * decides, knowing the conditions and the column types). */
static int colagg_setup(Sel *s, Agg *a, SqlColAgg *ca, bool *on)
{
    SqlCtx *cx = s->cx;
    const SqlTableScan *sc = &s->items[0].scan;
    *on = false;
    memset(ca, 0, sizeof *ca);
    ca->group_field = -1;
    if (a->n_groups > 1)
        return QR_OK;
    if (a->n_groups == 1) {
        const SqlExpr *g = a->groups[0];
        if (g->kind != SE_COL || g->col < sc->first || g->col >= sc->first + sc->n_cols ||
            s->scope.cols[g->col].field < 0)
            return QR_OK;
        ca->group_field = s->scope.cols[g->col].field;
        a->ca_col = g->col;
    }
    int n = a->bind->n_aggs;
    int *field = qr_arena_alloc(cx->arena, ((size_t)n + 1) * sizeof *field);
    if (!field)
        return nomem(cx);
    for (int k = 0; k < n; k++) {
        const SqlAgg *A = a->bind->aggs[k];
        if (A->filter || A->distinct ||
            (A->kind != SA_COUNT_STAR && A->kind != SA_COUNT && A->kind != SA_SUM &&
             A->kind != SA_AVG && A->kind != SA_MIN && A->kind != SA_MAX))
            return QR_OK;
        field[k] = -1;
        if (A->kind == SA_COUNT_STAR)
            continue;
        const SqlExpr *x = A->arg;
        if (x->kind != SE_COL || x->col < sc->first || x->col >= sc->first + sc->n_cols ||
            s->scope.cols[x->col].field < 0)
            return QR_OK;
        field[k] = s->scope.cols[x->col].field;
    }
    if (!(a->ca_row = qr_arena_alloc(cx->arena, ((size_t)a->W + 1) * sizeof *a->ca_row)))
        return nomem(cx);
    for (int c = 0; c < a->W; c++)
        a->ca_row[c] = sqlv_null();
    ca->n = n;
    ca->field = field;
    ca->emit = ag_colagg_part;
    ca->arg = a;
    *on = true;
    return QR_OK;
}

/* Grouped: final aggregates, HAVING, one output row per group. */
static int ag_finish(Agg *a, const SqlExpr *having)
{
    SqlCtx *cx = a->cx;
    if (!a->grouped)
        return QR_OK;
    int na = a->bind->n_aggs, rc = QR_OK;
    if (a->n_groups == 0 && a->n_g == 0) { /* no GROUP BY: one group even over no rows */
        SqlValue *nullrow = qr_arena_alloc(cx->arena, (size_t)(a->W + 1) * sizeof *nullrow);
        AggState *st = qr_arena_calloc(cx->arena, (size_t)(na + 1) * sizeof *st);
        if (!nullrow || !st)
            return nomem(cx);
        for (int c = 0; c < a->W; c++)
            nullrow[c] = sqlv_null();
        a->gs[0] = (Group){.rep = nullrow, .st = st};
        a->n_g = 1;
    }
    SqlValue *aggv = qr_arena_alloc(cx->arena, (size_t)(na + 1) * sizeof *aggv);
    if (!aggv)
        return nomem(cx);
    for (uint64_t g = 0; g < a->n_g && rc == QR_OK; g++) {
        for (int k = 0; k < na && rc == QR_OK; k++)
            rc = agg_final(cx, a->bind->aggs[k], &a->gs[g].st[k], &aggv[k]);
        SqlEvalRow er = {.row = a->gs[g].rep, .aggv = aggv, .doc = -1};
        bool pass = true;
        if (rc == QR_OK && having)
            rc = sql_expr_test(cx, having, &er, &pass);
        if (rc == QR_OK && pass)
            rc = ag_project(a, &er);
    }
    return rc;
}

/* ---- EXPLAIN lines ---- */

static void plan_node(Sel *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void plan_node(Sel *s, const char *fmt, ...)
{
    if (!s->cx->ex || s->n_plan_nodes == 16)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    s->plan_nodes[s->n_plan_nodes++] = qr_arena_strndup(s->cx->arena, buf, strlen(buf));
}

/* EXPLAIN ANALYZE: append the actual row count to the newest plan node. */
static void plan_actual(Sel *s, uint64_t rows)
{
    SqlCtx *cx = s->cx;
    if (!cx->ex || !cx->ex->analyze || !s->n_plan_nodes)
        return;
    char buf[64];
    snprintf(buf, sizeof buf, " (actual rows=%" PRIu64 ")", rows);
    size_t l0 = strlen(s->plan_nodes[s->n_plan_nodes - 1]);
    char *nn = qr_arena_alloc(cx->arena, l0 + strlen(buf) + 1);
    if (nn) {
        memcpy(nn, s->plan_nodes[s->n_plan_nodes - 1], l0);
        strcpy(nn + l0, buf);
        s->plan_nodes[s->n_plan_nodes - 1] = nn;
    }
}

static void scan_node(Sel *s, const Item *it)
{
    SqlCtx *cx = s->cx;
    if (!cx->ex)
        return;
    const SqlTableScan *sc = &it->scan;
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_printf(&b, "Scan on %s", qr_table_name(it->t));
    if (strcmp(it->qual, qr_table_name(it->t)) != 0)
        qr_buf_printf(&b, " %s", it->qual);
    qr_buf_printf(&b, "  (path=%s rows=%.0f cost=%.1f)", sql_path_name(sc->path), sc->est_rows, sc->cost);
    if (cx->ex->analyze)
        qr_buf_printf(&b, " (actual rows=%" PRIu64 " time=%.3f ms)", sc->rows_out, sc->ms);
    for (int i = 0; i < sc->n_texts; i++) {
        SqlValue q;
        SqlEvalRow r = {.doc = -1};
        QrBuf qb;
        qr_buf_init(&qb);
        if (sql_expr_eval(cx, sc->texts[i]->query, &r, &q) == QR_OK)
            qr_sql_value_text(&q, &qb);
        qr_buf_printf(&b, "\n  Text: %s @@ '%.*s'%s", sc->texts[i]->field ? sc->texts[i]->field : it->qual,
                      (int)qb.len, qb.data ? (char *)qb.data : "", i == sc->drive ? " (driving)" : "");
        if (i == sc->drive)
            qr_buf_printf(&b, sc->uncounted ? "  matches=(not counted: top-%" PRIu64 " only)"
                                            : "  matches=%" PRIu64, sc->text_rows);
        qr_buf_free(&qb);
    }
    if (sc->n_conj)
        qr_buf_printf(&b, "\n  Filter: %d condition%s (%d on columns with zone maps)", sc->n_conj,
                      sc->n_conj == 1 ? "" : "s", sc->n_colpreds);
    if (sc->topk >= 0)
        qr_buf_printf(&b, "\n  Top-k: %" PRId64 " by score from the text index", sc->topk);
    if (sc->path == SQL_PATH_PK && sc->pk_range)
        qr_buf_printf(&b, "\n  Key range: %" PRIu64 " keys", sc->pk_range_keys);
    if (sc->ordered)
        qr_buf_printf(&b, "\n  Order: %s %s, blocks best zone-map bound first",
                      s->scope.cols[sc->order_col].name, sc->order_desc ? "DESC" : "ASC");
    qr_buf_printf(&b, "\n  Alternatives:");
    for (int i = 0; i < sc->n_alts; i++)
        qr_buf_printf(&b, "%s %s (rows=%.0f cost=%.1f)%s", i ? "," : "", sql_path_name(sc->alts[i].path),
                      sc->alts[i].rows, sc->alts[i].cost, sc->alts[i].path == sc->path ? " *" : "");
    if (sc->note)
        qr_buf_printf(&b, "\n  Note: %s", sc->note);
    if (cx->ex->analyze) {
        qr_buf_printf(&b, "\n  Candidates checked: %" PRIu64, sc->candidates);
        if (sc->zm_blocks_total)
            qr_buf_printf(&b, "\n  Zone maps: %" PRIu64 " of %" PRIu64 " blocks skipped",
                          sc->zm_blocks_skipped, sc->zm_blocks_total);
        if (sc->bt_pages)
            qr_buf_printf(&b, "\n  B-tree: %" PRIu64 " pages read", sc->bt_pages);
        if (sc->colagg_used)
            qr_buf_printf(&b, "\n  Aggregated from column blocks: %" PRIu64 " rows", sc->colagg_rows);
        if (sc->ordered)
            qr_buf_printf(&b, "\n  Ordered walk: %" PRIu64 " of %" PRIu64 " blocks read, %" PRIu64
                              " rows skipped by their key",
                          sc->ord_blocks_read, sc->ord_blocks_total, sc->ord_rows_skipped);
        if (sc->n_texts)
            qr_buf_printf(&b, "\n  Postings: %" PRIu64 " blocks decoded, %" PRIu64 " skipped%s%s",
                          sc->post_blocks_decoded, sc->post_blocks_skipped,
                          sc->text_strategy ? ", strategy " : "",
                          sc->text_strategy ? sc->text_strategy : "");
    }
    plan_node(s, "%.*s", (int)b.len, b.data ? (char *)b.data : "");
    qr_buf_free(&b);
}

/* FORMAT JSON: one plan node from its text form.  The header line
 * "Scan on docs  (path=scan rows=96 cost=6128.4) (actual rows=101 time=4.2 ms)"
 * gives "Node Type" and the numbers; other lines are "Details". */
static cJSON *json_node(const char *text)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    const char *nl = strchr(text, '\n');
    size_t hl = nl ? (size_t)(nl - text) : strlen(text);
    char hdr[1024];
    snprintf(hdr, sizeof hdr, "%.*s", (int)hl, text);
    char *paren = strstr(hdr, "  (");
    const char *estim = strstr(hdr, "(path=");
    const char *actual = strstr(hdr, "(actual rows=");
    if (paren)
        *paren = 0;
    cJSON_AddStringToObject(o, "Node Type", hdr);
    if (paren) {
        char path[32];
        double rows, cost;
        if (estim && sscanf(estim, "(path=%31[^ )] rows=%lf cost=%lf", path, &rows, &cost) == 3) {
            cJSON_AddStringToObject(o, "Access Path", path);
            cJSON_AddNumberToObject(o, "Plan Rows", rows);
            cJSON_AddNumberToObject(o, "Total Cost", cost);
        } else { /* "(1 group key, 2 aggregates)" without its parentheses */
            char *d = paren + 3;
            size_t dl = strlen(d);
            if (dl && d[dl - 1] == ')')
                d[dl - 1] = 0;
            cJSON_AddStringToObject(o, "Detail", d);
        }
        double arows, ams;
        if (actual && sscanf(actual, "(actual rows=%lf time=%lf", &arows, &ams) == 2) {
            cJSON_AddNumberToObject(o, "Actual Rows", arows);
            cJSON_AddNumberToObject(o, "Actual Total Time", ams);
        }
    }
    if (nl) {
        cJSON *d = cJSON_AddArrayToObject(o, "Details");
        for (const char *p = nl + 1; d && *p;) {
            const char *e = strchr(p, '\n');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            while (n && *p == ' ') {
                p++;
                n--;
            }
            char line[1024];
            snprintf(line, sizeof line, "%.*s", (int)n, p);
            cJSON_AddItemToArray(d, cJSON_CreateString(line));
            p += n + (e ? 1 : 0);
        }
    }
    return o;
}

static void plan_flush_json(Sel *s, SqlExplain *ex)
{
    cJSON *root = NULL, *parent = NULL;
    for (int i = s->n_plan_nodes - 1; i >= 0; i--) {
        cJSON *n = json_node(s->plan_nodes[i]);
        if (!n)
            break;
        if (!root)
            root = n;
        else
            cJSON_AddItemToArray(cJSON_AddArrayToObject(parent, "Plans"), n);
        parent = n;
    }
    if (!root)
        return;
    cJSON *entry = cJSON_CreateObject();
    if (!entry) {
        cJSON_Delete(root);
        return;
    }
    cJSON_AddItemToObject(entry, "Plan", root);
    if (s->cx->depth > 0)
        cJSON_AddNumberToObject(entry, "Subquery Level", s->cx->depth);
    cJSON_AddItemToArray(ex->json, entry);
}

static void plan_flush(Sel *s)
{
    SqlExplain *ex = s->cx->ex;
    if (!ex)
        return;
    if (ex->json) {
        plan_flush_json(s, ex);
        return;
    }
    int base = s->cx->depth * 2;
    for (int i = s->n_plan_nodes - 1, d = 0; i >= 0; i--, d++) {
        const char *p = s->plan_nodes[i];
        int ind = base + d * 2;
        /* indent each line of the node */
        while (*p) {
            const char *nl = strchr(p, '\n');
            size_t n = nl ? (size_t)(nl - p) : strlen(p);
            for (int k = 0; k < ind; k++)
                qr_buf_putc(&ex->lines, ' ');
            if (p == s->plan_nodes[i] && d)
                qr_buf_append(&ex->lines, "-> ", 3);
            else if (d)
                qr_buf_append(&ex->lines, "   ", 3);
            qr_buf_append(&ex->lines, p, n);
            qr_buf_putc(&ex->lines, '\n');
            p += n + (nl ? 1 : 0);
        }
    }
}

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

/* ORDER BY / LIMIT over output columns only (set operations, VALUES). */
static int finish_output(SqlCtx *cx, const cJSON *body, bool describe, QrSqlResult *out)
{
    const cJSON *sort = sqlj_get(body, "sortClause");
    SortKey keys[32];
    int nk = 0;
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
        keys[nk++] = (SortKey){col, desc,
                               nl && !strcmp(nl, "SORTBY_NULLS_FIRST") ? true
                               : nl && !strcmp(nl, "SORTBY_NULLS_LAST") ? false
                                                                        : desc};
    }
    uint64_t limit, offset;
    int rc;
    if ((rc = limit_value(cx, sqlj_get(body, "limitCount"), UINT64_MAX, &limit)) ||
        (rc = limit_value(cx, sqlj_get(body, "limitOffset"), 0, &offset)))
        return rc;
    if (describe || (nk == 0 && limit == UINT64_MAX && offset == 0))
        return QR_OK;
    SqlValue *o;
    uint64_t n;
    if ((rc = sort_limit(cx, out->vals, out->n_rows, out->n_cols, keys, nk, offset, limit,
                         out->n_cols, &o, &n)))
        return rc;
    out->vals = o;
    out->n_rows = n;
    return QR_OK;
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
        if (!all && (rc = dedupe(cx, out->vals, &out->n_rows, out->n_cols)))
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
    if (sql_check(cx) || sql_check_stack(cx)) /* UNION chains and subqueries recurse here */
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

/* One row of the last join: the WHERE conjuncts the join did not apply,
 * then grouping/projection (which copies what it keeps). */
static int join_emit(SqlCtx *cx, Agg *ag, const SqlValue *row, SqlExpr **conj, int n_conj,
                     const bool *post, uint64_t *n_out)
{
    bool pass = true;
    SqlEvalRow er = {.row = row, .doc = -1};
    int rc = QR_OK;
    for (int i = 0; i < n_conj && pass && rc == QR_OK; i++)
        if (post[i])
            rc = sql_expr_test(cx, conj[i], &er, &pass);
    if (rc || !pass)
        return rc;
    ++*n_out;
    return ag_row(ag, row);
}

/* ---- joins ---- */

/* One join step: item `it` joined to the rows of the items before it. */
typedef struct JoinLevel {
    Item *it;
    SqlExpr **cond;           /* the conditions this join may apply: ON (LEFT) or WHERE */
    int n_cond;
    int *use;                 /* per cond: 0 no, 1 tested per pair, 2 a hash key */
    SqlExpr *lk[16], *rk[16]; /* hash keys: left side, this item's side */
    int n_keys;
    uint64_t rn, cap;         /* this item's rows; hash slots */
    int64_t *slots, *chain;   /* owns (qr_malloc) */
    uint64_t *hashes;         /* owns */
    uint64_t n_out;           /* rows the join produced (EXPLAIN ANALYZE) */
    int W;                    /* row width (the whole scope) */
} JoinLevel;

static void join_level_free(JoinLevel *jl)
{
    qr_free(jl->slots);
    qr_free(jl->chain);
    qr_free(jl->hashes);
    jl->slots = jl->chain = NULL;
    jl->hashes = NULL;
}

static int join_key_hash(SqlCtx *cx, SqlExpr *const *k, int n, const SqlValue *row, uint64_t *h,
                         bool *null_key)
{
    SqlEvalRow er = {.row = row, .doc = -1};
    *h = 0;
    *null_key = false;
    for (int i = 0; i < n; i++) {
        SqlValue v;
        int rc = sql_expr_eval(cx, k[i], &er, &v);
        if (rc)
            return rc;
        *null_key |= v.is_null;
        *h = *h * 31 + sqlv_hash(&v);
    }
    return QR_OK;
}

/* Which conditions join `ii` applies (those over items 0..ii not applied
 * yet), its equality keys, and the hash table over the item's rows. */
static int join_prepare(Sel *s, int ii, SqlExpr **conj, int n_conj, const bool *done, JoinLevel *jl)
{
    SqlCtx *cx = s->cx;
    Item *it = &s->items[ii];
    uint64_t left_mask = (1ull << ii) - 1, me = 1ull << ii;
    memset(jl, 0, sizeof *jl);
    jl->it = it;
    jl->W = s->scope.n;
    jl->cond = it->left ? it->on_conj : conj;
    jl->n_cond = it->left ? it->n_on : n_conj;
    jl->use = qr_arena_calloc(cx->arena, (size_t)(jl->n_cond + 1) * sizeof *jl->use);
    if (!jl->use)
        return nomem(cx);
    for (int i = 0; i < jl->n_cond; i++) {
        if (!it->left && done[i])
            continue;
        uint64_t m = expr_items(s, jl->cond[i]);
        if ((m & ~(left_mask | me)) != 0)
            continue; /* needs a later item */
        jl->use[i] = 1;
        SqlExpr *e = jl->cond[i];
        if (e->kind == SE_CMP && e->op == SQL_CMP_EQ && jl->n_keys < 16) {
            uint64_t a = expr_items(s, e->args[0]), b = expr_items(s, e->args[1]);
            if (a && b && !(a & me) && b == me) {
                jl->lk[jl->n_keys] = e->args[0];
                jl->rk[jl->n_keys++] = e->args[1];
                jl->use[i] = 2;
            } else if (a && b && !(b & me) && a == me) {
                jl->lk[jl->n_keys] = e->args[1];
                jl->rk[jl->n_keys++] = e->args[0];
                jl->use[i] = 2;
            }
        }
    }
    jl->rn = it->n_rows;
    if (!jl->n_keys)
        return QR_OK;
    jl->cap = 16;
    while (jl->cap < jl->rn * 2)
        jl->cap <<= 1;
    jl->slots = qr_malloc(jl->cap * sizeof *jl->slots);
    jl->chain = qr_malloc((jl->rn + 1) * sizeof *jl->chain);
    jl->hashes = qr_malloc((jl->rn + 1) * sizeof *jl->hashes);
    if (!jl->slots || !jl->chain || !jl->hashes)
        return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    memset(jl->slots, 0xff, jl->cap * sizeof *jl->slots);
    for (uint64_t r = 0; r < jl->rn; r++) {
        uint64_t h;
        bool null_key;
        int rc = join_key_hash(cx, jl->rk, jl->n_keys, it->rows + r * (uint64_t)s->scope.n, &h,
                               &null_key);
        if (rc)
            return rc;
        jl->hashes[r] = h;
        jl->chain[r] = -1;
        if (null_key)
            continue;  /* NULL never equals: the row can only be unmatched */
        uint64_t p = h & (jl->cap - 1);
        jl->chain[r] = jl->slots[p];
        jl->slots[p] = (int64_t)r;
    }
    return QR_OK;
}

/* The candidates of one left row: its hash chain, or every row. */
typedef struct JoinProbe {
    int64_t r;
    uint64_t h, next;
    bool matched;
} JoinProbe;

static int join_probe_start(SqlCtx *cx, const JoinLevel *jl, const SqlValue *lrow, JoinProbe *pr)
{
    memset(pr, 0, sizeof *pr);
    pr->r = -1;
    if (!jl->n_keys)
        return QR_OK;
    bool null_key;
    int rc = join_key_hash(cx, jl->lk, jl->n_keys, lrow, &pr->h, &null_key);
    if (rc == QR_OK && !null_key)
        pr->r = jl->slots[pr->h & (jl->cap - 1)];
    return rc;
}

/* The next candidate row of the item, or -1. */
static int64_t join_probe_next(const JoinLevel *jl, JoinProbe *pr)
{
    if (!jl->n_keys)
        return pr->next < jl->rn ? (int64_t)pr->next++ : -1;
    while (pr->r >= 0 && jl->hashes[pr->r] != pr->h)
        pr->r = jl->chain[pr->r];
    if (pr->r < 0)
        return -1;
    int64_t c = pr->r;
    pr->r = jl->chain[c];
    return c;
}

/* Put candidate `cand`'s columns into `o` (which holds the left row) and
 * test the join's conditions. */
static int join_candidate(SqlCtx *cx, const JoinLevel *jl, SqlValue *o, uint64_t cand, bool *pass)
{
    const Item *it = jl->it;
    memcpy(o + it->first, it->rows + cand * (uint64_t)jl->W + it->first,
           (size_t)it->n_cols * sizeof *o);
    *pass = true;
    SqlEvalRow er = {.row = o, .doc = -1};
    int rc = QR_OK;
    for (int i = 0; i < jl->n_cond && *pass && rc == QR_OK; i++)
        if (jl->use[i])
            rc = sql_expr_test(cx, jl->cond[i], &er, pass);
    return rc;
}

static void join_plan_node(Sel *s, const JoinLevel *jl)
{
    const Item *it = jl->it;
    plan_node(s, "%s Join on %s  (%d key%s)", it->left ? "Left Hash" : jl->n_keys ? "Hash" : "Nested Loop",
              it->qual ? it->qual : "subquery", jl->n_keys, jl->n_keys == 1 ? "" : "s");
    plan_actual(s, jl->n_out);
}

/* The pipelined join: the first table's scan streams each row through every
 * join's hash table in turn and on into grouping/projection; only the later
 * items are stored.  Nothing of the join's output is kept. */
typedef struct JoinPipe {
    SqlCtx *cx;
    Agg *ag;
    JoinLevel *lv;
    int n_lv, W;
    SqlValue *row;            /* the row being built: item 0's columns, then each level's */
    SqlExpr **conj;
    int n_conj;
    const bool *post;
    uint64_t n_post_out;
} JoinPipe;

static int pipe_level(JoinPipe *p, int k)
{
    SqlCtx *cx = p->cx;
    if (k == p->n_lv)
        return join_emit(cx, p->ag, p->row, p->conj, p->n_conj, p->post, &p->n_post_out);
    JoinLevel *jl = &p->lv[k];
    JoinProbe pr;
    int rc = join_probe_start(cx, jl, p->row, &pr);
    for (int64_t cand; rc == QR_OK && (cand = join_probe_next(jl, &pr)) >= 0;) {
        bool pass;
        if ((rc = sql_check(cx)) || (rc = join_candidate(cx, jl, p->row, (uint64_t)cand, &pass)))
            break;
        if (pass) {
            pr.matched = true;
            jl->n_out++;
            rc = pipe_level(p, k + 1);
        }
    }
    if (rc == QR_OK && jl->it->left && !pr.matched) {
        for (int c = jl->it->first; c < jl->it->first + jl->it->n_cols; c++)
            p->row[c] = sqlv_null();
        jl->n_out++;
        rc = pipe_level(p, k + 1);
    }
    return rc;
}

static int pipe_row(void *arg, const SqlValue *row)
{
    JoinPipe *p = arg;
    memcpy(p->row, row, (size_t)p->W * sizeof *row);
    return pipe_level(p, 0);
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
    SortKey *keys = qr_arena_calloc(cx->arena, (size_t)(n_sort + 1) * sizeof *keys);
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

    /* ---- plan the table accesses ---- */
    uint64_t applied = 0; /* conjuncts already applied, bit per conjunct (first 64) */
    bool *done = qr_arena_calloc(cx->arena, (size_t)(n_conj + 1) * sizeof *done);
    /* the items each conjunct reads, walked once: per row, a walk of a
     * 100,000-item IN list was the whole cost of the query */
    uint64_t *conj_items = qr_arena_alloc(cx->arena, (size_t)(n_conj + 1) * sizeof *conj_items);
    if (!done || !conj_items)
        return nomem(cx);
    (void)applied;
    bool const_false = false;
    for (int i = 0; i < n_conj; i++)
        conj_items[i] = expr_items(s, conj[i]);
    for (int i = 0; i < n_conj; i++) {
        uint64_t m = conj_items[i];
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
        if (it->kind != IT_TABLE)
            continue;
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
                if (!done[i] && conj_items[i] == (1ull << ii)) {
                    sc->conj[sc->n_conj++] = conj[i];
                    done[i] = true;
                    if (conj[i]->kind == SE_MATCH && sc->drive < 0)
                        for (int k2 = 0; k2 < sc->n_texts; k2++)
                            if (sc->texts[k2] == conj[i]->text)
                                sc->drive = k2;
                }
    }
    /* top-k: ORDER BY score() DESC LIMIT k over one table whose only
     * condition is its text predicate, no grouping / distinct */
    if (s->n_items == 1 && s->items[0].kind == IT_TABLE && !grouped && !distinct && n_sort >= 1 &&
        limit != UINT64_MAX && keys[0].desc) {
        SqlTableScan *sc = &s->items[0].scan;
        const SqlExpr *k0 = keys[0].col < n_tg ? tg[keys[0].col].e : extra[keys[0].col - n_tg];
        bool by_score = k0->kind == SE_SCORE ||
                        (k0->kind == SE_COL && s->scope.cols[k0->col].field == -3);
        /* the scan keeps it only when the other conditions are column predicates */
        if (by_score && sc->drive >= 0 && sc->n_conj == n_conj && sc->n_texts == 1)
            sc->topk = (int64_t)(limit + offset);
    }
    /* count(*) over a text predicate (postings only), or count/min/max over a
     * whole table (column statistics): no documents fetched */
    if (s->n_items == 1 && s->items[0].kind == IT_TABLE && n_groups == 0 && !having &&
        s->bind.n_aggs > 0 && !const_false && !cx->scores) {
        bool only_count = true, plain = true;
        for (int i = 0; i < s->bind.n_aggs; i++)
            only_count &= s->bind.aggs[i]->kind == SA_COUNT_STAR && !s->bind.aggs[i]->filter;
        for (int i = 0; i < n_tg; i++)
            plain &= tg[i].e->kind == SE_AGG || sql_expr_is_const(tg[i].e);
        SqlTableScan *sc = &s->items[0].scan;
        SqlValue *aggv = qr_arena_calloc(cx->arena, (size_t)(s->bind.n_aggs + 1) * sizeof *aggv);
        uint64_t cnt = 0;
        bool have = false, from_stats = false;
        if (!aggv)
            return nomem(cx);
        if (plain && only_count && (sc->drive >= 0 || sc->n_texts == 0) && n_conj == sc->n_conj) {
            if ((rc = sql_scan_count_text(cx, sc, &cnt, &have)))
                return rc;
            for (int i = 0; have && i < s->bind.n_aggs; i++)
                aggv[i] = sqlv_int((int64_t)cnt);
        }
        if (!have && plain && n_conj == 0 && sc->n_texts == 0) {
            if ((rc = sql_scan_stats_aggs(cx, sc, s->bind.aggs, s->bind.n_aggs, aggv, &have)))
                return rc;
            from_stats = have;
        }
        if (have) {
            SqlValue *row = qr_arena_calloc(cx->arena, (size_t)(s->scope.n + 1) * sizeof *row);
            out->vals = qr_arena_calloc(cx->arena, (size_t)(n_tg + 1) * sizeof *out->vals);
            if (!row || !out->vals)
                return nomem(cx);
            for (int i = 0; i < s->scope.n; i++)
                row[i] = sqlv_null();
            SqlEvalRow er = {.row = row, .aggv = aggv, .doc = -1};
            for (int i = 0; i < n_tg; i++) {
                SqlValue v;
                if ((rc = sql_expr_eval(cx, tg[i].e, &er, &v)) ||
                    (rc = sqlv_cast(cx, &v, out->cols[i].type, -1, &out->vals[i])))
                    return rc;
            }
            out->n_rows = offset == 0 && limit > 0 ? 1 : 0;
            plan_node(s, "Aggregate  (from %s, no documents fetched)",
                      from_stats ? "column statistics"
                      : sc->drive >= 0 ? "the postings"
                                       : "B-tree counts and column filters");
            if (cx->ex && !from_stats)
                scan_node(s, &s->items[0]);
            plan_flush(s);
            return QR_OK;
        }
    }
    bool run = !(cx->ex && !cx->ex->analyze);
    int W = s->scope.n;
    /* join steps; their hash tables are freed at ag_out.  In the arena: on
     * the stack they were 23 KB that every level of nested subqueries paid */
    int n_lv = s->n_items;    /* lv[ii - 1] joins item ii: n_items - 1 used */
    JoinLevel *lv = qr_arena_calloc(cx->arena, (size_t)n_lv * sizeof *lv + 1);
    if (!lv)
        return nomem(cx);
    Agg ag;
    if ((rc = ag_init(&ag, cx, W, grouped, groups, n_groups, &s->bind, tg, n_tg, extra, n_extra)))
        return rc;
    ag.has_srf = has_srf;
    JoinPipe pipe;
    memset(&pipe, 0, sizeof pipe);
    /* ORDER BY ... LIMIT without DISTINCT: a bounded sort while projecting */
    if (n_sort && limit != UINT64_MAX && !distinct && limit + offset <= 100000 && limit + offset > 0) {
        ag.keys = keys;
        ag.n_keys = n_sort;
        ag.keep = limit + offset;
        /* over one table ordered by one of its int, timestamp or keyword
         * columns, the scan walks blocks best zone-map bound first */
        const SqlExpr *k0 = keys[0].col < n_tg ? tg[keys[0].col].e : extra[keys[0].col - n_tg];
        SqlTableScan *sc0 = &s->items[0].scan;
        if (s->n_items == 1 && s->items[0].kind == IT_TABLE && !grouped && !has_srf &&
            k0->kind == SE_COL && k0->col >= sc0->first && k0->col < sc0->first + sc0->n_cols) {
            sc0->order_on = true;
            sc0->order_col = k0->col;
            sc0->order_desc = keys[0].desc;
            sc0->order_nulls_first = keys[0].nulls_first;
            sc0->order_may_enter = ag_may_enter;
            sc0->order_arg = &ag;
        }
    }
    /* EXPLAIN (SCORES): the outermost query's first table with a text predicate */
    for (int ii = 0; ii < s->n_items && cx->scores && cx->depth == 0 && !cx->scores_scan; ii++)
        if (s->items[ii].kind == IT_TABLE && s->items[ii].scan.drive >= 0) {
            s->items[ii].scan.keep_docs = true;
            cx->scores_scan = &s->items[ii].scan;
        }
    /* one table: its rows stream into grouping / projection, never stored */
    bool streamed = s->n_items == 1 && s->items[0].kind == IT_TABLE && run;
    if (streamed) {
        s->items[0].scan.consume = ag_row;
        s->items[0].scan.consume_arg = &ag;
    }
    SqlColAgg colagg;
    if (s->n_items == 1 && s->items[0].kind == IT_TABLE)
        s->items[0].scan.colagg = NULL;
    if (streamed && grouped && !has_srf && !cx->scores) {
        bool on;
        if ((rc = colagg_setup(s, &ag, &colagg, &on)))
            goto ag_out;
        if (on)
            s->items[0].scan.colagg = &colagg;
    }
    /* ---- scans ---- */
    /* a join whose first item is a table runs pipelined: the later items
     * are read and hashed first, then the first table's scan streams */
    bool pipe_ok = run && !const_false && s->n_items >= 2 && s->items[0].kind == IT_TABLE;
    bool pipelined = false;
    for (int ii = pipe_ok ? 1 : 0; ii < s->n_items; ii++) {
        Item *it = &s->items[ii];
        if (it->kind == IT_TABLE) {
            if (const_false && run) {
                it->rows = NULL;
                it->n_rows = 0;
                continue;
            }
            if ((rc = sql_scan_table(cx, &it->scan, run, &it->rows, &it->n_rows))) {
                goto ag_out;
            }
            continue;
        }
        /* materialized rows: widen, apply the item's own conditions */
        uint64_t n = it->src.n_rows;
        it->rows = qr_arena_alloc(cx->arena, (n * (uint64_t)W + 1) * sizeof *it->rows);
        if (!it->rows)
            { rc = nomem(cx); goto ag_out; }
        uint64_t kept = 0;
        for (uint64_t r = 0; r < n; r++) {
            SqlValue *row = it->rows + kept * (uint64_t)W;
            for (int c = 0; c < W; c++)
                row[c] = sqlv_null();
            memcpy(row + it->first, it->src.vals + r * (uint64_t)it->n_cols,
                   (size_t)it->n_cols * sizeof *row);
            bool pass = true;
            SqlEvalRow er = {.row = row, .doc = -1};
            for (int i = 0; i < n_conj && pass && !it->left; i++)
                if (!done[i] && conj_items[i] == (1ull << ii))
                    if ((rc = sql_expr_test(cx, conj[i], &er, &pass)))
                        goto ag_out;
            if (pass)
                kept++;
        }
        for (int i = 0; i < n_conj && !it->left; i++)
            if (!done[i] && conj_items[i] == (1ull << ii))
                done[i] = true;
        it->n_rows = kept;
    }
    if (pipe_ok) {
        bool *done0 = qr_arena_alloc(cx->arena, (size_t)n_conj + 1);
        if (!done0)
            { rc = nomem(cx); goto ag_out; }
        memcpy(done0, done, (size_t)n_conj);
        /* pairs compared without a hash key, at most: the first table's
         * rows times the rows of every key-less item */
        QrTableStats ts;
        qr_table_stats(s->items[0].t, &ts);
        uint64_t pairs = ts.docs_total ? ts.docs_total : 1;
        bool keyless = false;
        for (int ii = 1; ii < s->n_items; ii++) {
            JoinLevel *jl = &lv[ii - 1];
            if ((rc = join_prepare(s, ii, conj, n_conj, done, jl)))
                goto ag_out;
            if (!jl->n_keys) {
                keyless = true;
                if (__builtin_mul_overflow(pairs, jl->rn ? jl->rn : 1, &pairs))
                    pairs = UINT64_MAX;
            }
            if (!s->items[ii].left)
                for (int i = 0; i < n_conj; i++)
                    if (jl->use[i])
                        done[i] = true;
        }
        if (!keyless || pairs <= NESTED_LOOP_MAX) {
            bool *post = qr_arena_calloc(cx->arena, (size_t)n_conj + 1);
            SqlValue *prow = qr_arena_alloc(cx->arena, ((size_t)W + 1) * sizeof *prow);
            if (!post || !prow)
                { rc = nomem(cx); goto ag_out; }
            for (int i = 0; i < n_conj; i++)
                post[i] = !done[i];
            pipe = (JoinPipe){.cx = cx, .ag = &ag, .lv = lv, .n_lv = s->n_items - 1, .W = W,
                              .row = prow, .conj = conj, .n_conj = n_conj, .post = post};
            s->items[0].scan.consume = pipe_row;
            s->items[0].scan.consume_arg = &pipe;
            pipelined = streamed = true;
        } else {
            /* too many pairs to be sure of: store the first table's rows
             * and join step by step, which knows the exact count */
            for (int i = 0; i < n_lv; i++)
                join_level_free(&lv[i]);
            memcpy(done, done0, (size_t)n_conj);
        }
        Item *it0 = &s->items[0];
        it0->scan.plan_first = true;
        if ((rc = sql_scan_table(cx, &it0->scan, run, &it0->rows, &it0->n_rows)))
            goto ag_out;
    }
    for (int ii = s->n_items - 1; ii >= 0; ii--)
        if (s->items[ii].kind == IT_TABLE)
            scan_node(s, &s->items[ii]);
    if (pipelined) {
        for (int ii = 1; ii < s->n_items; ii++)
            join_plan_node(s, &lv[ii - 1]);
        int n_post = 0;
        for (int i = 0; i < n_conj; i++)
            if (!done[i]) {
                done[i] = true;
                n_post++;
            }
        if (n_post) {
            plan_node(s, "Filter  (%d condition%s)", n_post, n_post == 1 ? "" : "s");
            plan_actual(s, pipe.n_post_out);
        }
    }
    /* ---- joins (left-deep, in FROM order) ---- */
    SqlValue *rows;
    uint64_t n_rows;
    if (s->n_items == 0) {
        rows = qr_arena_calloc(cx->arena, sizeof *rows);
        n_rows = const_false ? 0 : 1;
        if (!rows)
            { rc = nomem(cx); goto ag_out; }
    } else {
        rows = s->items[0].rows;
        n_rows = s->items[0].n_rows;
    }
    for (int ii = 1; ii < s->n_items && !pipelined; ii++) {
        Item *it = &s->items[ii];
        JoinLevel *jl = &lv[ii - 1];
        if ((rc = join_prepare(s, ii, conj, n_conj, done, jl)))
            goto ag_out;
        if (!jl->n_keys && n_rows * (jl->rn ? jl->rn : 1) > NESTED_LOOP_MAX) {
            rc = sql_err_at(cx, -1, QR_ELIMIT, "54000",
                            "join without an equality condition would compare %" PRIu64 " row pairs",
                            n_rows * jl->rn);
            goto ag_out;
        }
        /* probe.  The last join streams its rows into grouping/projection
         * through one scratch row, as a one-table scan does, instead of
         * storing its (possibly huge) output first. */
        SqlRowSink sink = {.width = W};
        bool stream_out = ii == s->n_items - 1;
        SqlValue *scratch = NULL;
        uint64_t n_streamed = 0;
        bool *post = NULL;      /* WHERE conjuncts tested on each streamed row */
        if (stream_out) {
            scratch = qr_arena_alloc(cx->arena, ((size_t)W + 1) * sizeof *scratch);
            post = qr_arena_calloc(cx->arena, (size_t)n_conj + 1);
            if (!scratch || !post)
                { rc = nomem(cx); goto ag_out; }
            for (int i = 0; i < n_conj; i++)
                post[i] = !done[i] && (it->left || !jl->use[i]);
        }
        for (uint64_t l = 0; l < n_rows && rc == QR_OK; l++) {
            const SqlValue *lrow = rows + l * (uint64_t)W;
            JoinProbe pr;
            if ((rc = join_probe_start(cx, jl, lrow, &pr)))
                break;
            for (;;) {
                int64_t cand = join_probe_next(jl, &pr);
                if (cand == -1)
                    break;
                if ((rc = sql_check(cx)))
                    break;
                SqlValue *o = stream_out ? scratch : sql_sink_slot(cx, &sink);
                if (!o) {
                    rc = cx->err->code;
                    break;
                }
                if (o != lrow)
                    memcpy(o, lrow, (size_t)W * sizeof *o);
                bool pass;
                if ((rc = join_candidate(cx, jl, o, (uint64_t)cand, &pass)))
                    break;
                if (!pass)
                    continue;
                pr.matched = true;
                jl->n_out++;
                if (!stream_out)
                    sink.n++;
                else if ((rc = join_emit(cx, &ag, o, conj, n_conj, post, &n_streamed)))
                    break;
            }
            if (rc == QR_OK && it->left && !pr.matched) {
                SqlValue *o = stream_out ? scratch : sql_sink_slot(cx, &sink);
                if (!o) {
                    rc = cx->err->code;
                    break;
                }
                memcpy(o, lrow, (size_t)W * sizeof *o);
                jl->n_out++;
                if (!stream_out)
                    sink.n++;
                else
                    rc = join_emit(cx, &ag, o, conj, n_conj, post, &n_streamed);
            }
        }
        if (rc)
            goto ag_out;
        if (!it->left)
            for (int i = 0; i < n_conj; i++)
                if (jl->use[i])
                    done[i] = true;
        join_plan_node(s, jl);
        int n_post = 0;
        for (int i = 0; stream_out && i < n_conj; i++)
            if (post[i]) {
                done[i] = true;
                n_post++;
            }
        if (n_post) {
            plan_node(s, "Filter  (%d condition%s)", n_post, n_post == 1 ? "" : "s");
            plan_actual(s, n_streamed);
        }
        if (stream_out) {
            streamed = true;   /* the rows went to the aggregator already */
            n_rows = 0;
        } else {
            rows = sink.rows;
            n_rows = sink.n;
        }
    }
    /* remaining WHERE conjuncts */
    int left_over = 0;
    for (int i = 0; i < n_conj; i++)
        left_over += !done[i];
    if (left_over) {
        uint64_t kept = 0;
        for (uint64_t r = 0; r < n_rows; r++) {
            SqlValue *row = rows + r * (uint64_t)W;
            bool pass = true;
            SqlEvalRow er = {.row = row, .doc = -1};
            for (int i = 0; i < n_conj && pass; i++)
                if (!done[i] && (rc = sql_expr_test(cx, conj[i], &er, &pass)))
                    goto ag_out;
            if (pass) {
                if (kept != r)
                    memcpy(rows + kept * (uint64_t)W, row, (size_t)W * sizeof *row);
                kept++;
            }
        }
        n_rows = kept;
        plan_node(s, "Filter  (%d condition%s)", left_over, left_over == 1 ? "" : "s");
    }
    /* ---- aggregation / projection over the joined rows ---- */
    if (!streamed) {
        for (uint64_t r = 0; r < n_rows && rc == QR_OK; r++)
            rc = ag_row(&ag, rows + r * (uint64_t)W);
        if (rc) {
            goto ag_out;
        }
    }
    rc = ag_finish(&ag, having);
ag_out:
    for (int i = 0; i < n_lv; i++)
        join_level_free(&lv[i]);
    ag_free(&ag);
    if (rc)
        return rc;
    if (grouped)
        plan_node(s, "HashAggregate  (%d group key%s, %d aggregate%s%s)", n_groups,
                  n_groups == 1 ? "" : "s", s->bind.n_aggs, s->bind.n_aggs == 1 ? "" : "s",
                  having ? ", having" : "");
    int XW = ag.XW;
    SqlValue *xrows = ag.x.rows;
    uint64_t n_x = ag.x.n;
    if (!xrows && !(xrows = qr_arena_calloc(cx->arena, sizeof *xrows)))
        return nomem(cx);
    /* output types: values of a declared type (casts of results of an
     * untyped branch) */
    for (uint64_t r = 0; r < n_x; r++)
        for (int i = 0; i < n_tg; i++) {
            SqlValue *v = &xrows[r * (uint64_t)XW + (uint64_t)i];
            if (v->is_null)
                v->type = out->cols[i].type;
            else if (v->type != out->cols[i].type) {
                SqlValue o;
                if ((rc = sqlv_cast(cx, v, out->cols[i].type, -1, &o)))
                    return rc;
                *v = o;
            }
        }
    if (distinct) {
        if (n_extra == 0) {
            if ((rc = dedupe(cx, xrows, &n_x, XW)))
                return rc;
        }
        plan_node(s, "Unique");
    }
    if (n_sort || limit != UINT64_MAX || offset || n_extra) {
        SqlValue *o;
        uint64_t n;
        if ((rc = sort_limit(cx, xrows, n_x, XW, keys, n_sort, offset, limit, n_tg, &o, &n)))
            return rc;
        xrows = o;
        n_x = n;
        if (n_sort)
            plan_node(s, "Sort  (%d key%s)", n_sort, n_sort == 1 ? "" : "s");
        if (limit != UINT64_MAX || offset)
            plan_node(s, "Limit  (%s%" PRIu64 " offset %" PRIu64 ")",
                      limit == UINT64_MAX ? "all" : "", limit == UINT64_MAX ? 0 : limit, offset);
    }
    out->vals = xrows;
    out->n_rows = n_x;
    plan_flush(s);
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
    SqlExplain ex;
    memset(&ex, 0, sizeof ex);
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
