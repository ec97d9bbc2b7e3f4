/*
 * sql_expr.c — SQL expressions: binding a parse-tree expression against a
 * scope (names, types, implicit coercions of literals and parameters,
 * aggregates, text predicates) and evaluating it over one row with SQL's
 * three-valued logic.
 *
 * Layer: query/.  Calls sql_value.c, sql_func.c, the catalog hooks and
 * (for subqueries) sql_select.c.
 *
 * NULL logic: every operator is strict except AND/OR (Kleene), IS [NOT]
 * NULL, COALESCE, CASE and IN (x IN (1, NULL) is NULL when x is not 1).
 */
#include "query/sql_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <regex.h>
#include <string.h>
#include <strings.h>

static SqlExpr *new_expr(SqlBind *b, SqlExprKind k, int loc)
{
    SqlExpr *e = qr_arena_calloc(b->cx->arena, sizeof *e);
    if (!e) {
        sql_err_at(b->cx, -1, QR_ELIMIT, NULL, "query memory limit exceeded");
        return NULL;
    }
    e->kind = k;
    e->loc = loc;
    e->col = -1;
    return e;
}

static int set_args(SqlBind *b, SqlExpr *e, int n)
{
    e->n_args = n;
    e->args = n ? qr_arena_calloc(b->cx->arena, (size_t)n * sizeof *e->args) : NULL;
    if (n && !e->args)
        return sql_err_at(b->cx, -1, QR_ELIMIT, NULL, "query memory limit exceeded");
    return QR_OK;
}

/* A node of kind k over two operands. */
static SqlExpr *new_binary(SqlBind *b, SqlExprKind k, int op, SqlExpr *l, SqlExpr *r, int loc)
{
    SqlExpr *e = new_expr(b, k, loc);
    if (!e || set_args(b, e, 2))
        return NULL;
    e->op = op;
    e->args[0] = l;
    e->args[1] = r;
    return e;
}

static int nomem(SqlCtx *cx)
{
    return sql_err_at(cx, -1, QR_ELIMIT, NULL, "query memory limit exceeded");
}

/* ---- coercion at bind time ---- */

/* Make e of type `to` when it is an untyped literal or an untyped
 * parameter (the types PostgreSQL resolves from context). */
static int coerce_unknown(SqlBind *b, SqlExpr *e, QrSqlType to)
{
    if (to == QR_SQL_UNKNOWN)
        return QR_OK;
    if (e->kind == SE_PARAM && b->cx->param_types[e->col] == QR_SQL_UNKNOWN) {
        b->cx->param_types[e->col] = to;
        e->type = to;
        return QR_OK;
    }
    if (e->kind == SE_CONST && e->type == QR_SQL_UNKNOWN) {
        SqlValue v;
        int rc = sqlv_cast(b->cx, &e->val, to, e->loc, &v);
        if (rc)
            return rc;
        e->val = v;
        e->type = to;
    }
    return QR_OK;
}

int sql_coerce_unknown(SqlBind *b, SqlExpr *e, QrSqlType to) { return coerce_unknown(b, e, to); }

static SqlExpr *wrap_cast(SqlBind *b, SqlExpr *e, QrSqlType to)
{
    if (e->type == to)
        return e;
    if (e->kind == SE_CONST) {
        SqlValue v;
        if (sqlv_cast(b->cx, &e->val, to, e->loc, &v))
            return NULL;
        e->val = v;
        e->type = to;
        return e;
    }
    SqlExpr *c = new_expr(b, SE_CAST, e->loc);
    if (!c || set_args(b, c, 1))
        return NULL;
    c->args[0] = e;
    c->type = to;
    c->name = e->name;
    return c;
}

SqlExpr *sql_bind_cast(SqlBind *b, SqlExpr *e, QrSqlType to) { return wrap_cast(b, e, to); }

/* Types a text operand is read as when compared with them (ts = '2024-01-01',
 * d < '...', t = '10:00', iv > '1 day', arr = '{1,2}'). */
static bool text_castable(QrSqlType t)
{
    return sqlt_is_datetime(t) || t == QR_SQL_TIME || t == QR_SQL_INTERVAL || QR_SQL_IS_ARRAY(t) ||
           t == QR_SQL_UUID || t == QR_SQL_BYTEA || t == QR_SQL_JSON || t == QR_SQL_JSONB;
}

/* The common type of two operands for comparison / CASE / COALESCE. */
static int unify(SqlBind *b, SqlExpr **x, SqlExpr **y, int loc, QrSqlType *out)
{
    SqlExpr *l = *x, *r = *y;
    if (l->type == QR_SQL_UNKNOWN && r->type != QR_SQL_UNKNOWN) {
        if (coerce_unknown(b, l, r->type))
            return b->cx->err->code;
    } else if (r->type == QR_SQL_UNKNOWN && l->type != QR_SQL_UNKNOWN) {
        if (coerce_unknown(b, r, l->type))
            return b->cx->err->code;
    }
    QrSqlType a = l->type, c = r->type;
    if (a == QR_SQL_UNKNOWN && c == QR_SQL_UNKNOWN) {
        *out = QR_SQL_TEXT;
        return QR_OK;
    }
    if (a == c || (sqlt_is_str(a) && sqlt_is_str(c))) {
        *out = a == c ? a : QR_SQL_TEXT;
        return QR_OK;
    }
    if (sqlt_is_num(a) && sqlt_is_num(c)) {
        *out = sqlt_num_common(a, c);
        return QR_OK;
    }
    if (sqlt_is_datetime(a) && sqlt_is_datetime(c)) { /* a date is its midnight */
        *out = a == QR_SQL_DATE ? c : c == QR_SQL_DATE ? a : QR_SQL_TIMESTAMPTZ;
        return QR_OK;
    }
    if (text_castable(a) && sqlt_is_str(c)) {
        *y = wrap_cast(b, r, a);
        *out = a;
        return *y ? QR_OK : b->cx->err->code;
    }
    if (text_castable(c) && sqlt_is_str(a)) {
        *x = wrap_cast(b, l, c);
        *out = c;
        return *x ? QR_OK : b->cx->err->code;
    }
    return sql_err_at(b->cx, loc, QR_ETYPE, "42883", "operator does not exist: %s = %s",
                      qr_sql_type_name(a), qr_sql_type_name(c));
}

/* ---- names ---- */

/* A name in one scope: its index, -1 if absent, -2 (error set) if ambiguous. */
static int scope_find(SqlBind *b, const SqlScope *sc, const char *qual, const char *name, int loc)
{
    int found = -1;
    for (int i = 0; sc && i < sc->n; i++) {
        const SqlCol *c = &sc->cols[i];
        if (strcmp(c->name, name) != 0)
            continue;
        /* a join alias renames the columns under it; USING merges two into one */
        const char *cq = c->jqual && !c->hidden ? c->jqual : c->qual;
        if (qual && (!cq || strcmp(cq, qual) != 0))
            continue;
        if (!qual && c->no_bare)
            continue;
        if (found >= 0) {
            sql_err_at(b->cx, loc, QR_EINVAL, "42702", "column reference \"%s\" is ambiguous",
                       name);
            return -2;
        }
        found = i;
    }
    return found;
}

/* A column by name: the bind's own scope first, then the enclosing queries'
 * (correlated subqueries).  *depth is 0 for an own column, d for one of the
 * query d levels out, whose scope is *in. */
static const SqlCol *find_col_outer(SqlBind *b, const char *qual, const char *name, int loc,
                                    int *idx, int *depth, const SqlScope **in)
{
    const SqlScope *sc = b->scope;
    int d = 0;
    if (!sc) { /* no columns here (VALUES, LIMIT): straight to the outer query */
        sc = b->cx->outer_scope;
        d = 1;
    }
    for (; sc; sc = sc->outer, d++) {
        int found = scope_find(b, sc, qual, name, loc);
        if (found == -2)
            return NULL;
        if (found >= 0) {
            *idx = found;
            *depth = d;
            *in = sc;
            return &sc->cols[found];
        }
    }
    if (qual)
        sql_err_at(b->cx, loc, QR_ENOTFOUND, "42703", "column %s.%s does not exist", qual, name);
    else
        sql_err_at(b->cx, loc, QR_ENOTFOUND, "42703", "column \"%s\" does not exist", name);
    return NULL;
}

/* A column of the bind's own scope only (text predicates, score()). */
static const SqlCol *find_col(SqlBind *b, const char *qual, const char *name, int loc, int *idx)
{
    int found = b->scope ? scope_find(b, b->scope, qual, name, loc) : -1;
    if (found == -2)
        return NULL;
    if (found < 0) {
        int d;
        const SqlScope *in;
        if (find_col_outer(b, qual, name, loc, &found, &d, &in) && d > 0)
            sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000",
                       "column \"%s\" of an outer query cannot be used here", name);
        return NULL;
    }
    *idx = found;
    return &b->scope->cols[found];
}

/* Is `name` a table (qualifier) in scope? Returns the _id column index. */
static int find_table(SqlBind *b, const char *name)
{
    const SqlScope *sc = b->scope;
    for (int i = 0; sc && i < sc->n; i++)
        if (sc->cols[i].field == -2 && sc->cols[i].qual && strcmp(sc->cols[i].qual, name) == 0)
            return i;
    return -1;
}

static int find_hidden(const SqlScope *sc, const char *qual, int field)
{
    for (int i = 0; sc && i < sc->n; i++)
        if (sc->cols[i].field == field && sc->cols[i].qual && qual &&
            strcmp(sc->cols[i].qual, qual) == 0)
            return i;
    return -1;
}

/* Record an outer reference (see SqlCorrRef).  Every occurrence is kept:
 * each subquery looks only at the entries made while it was bound. */
static int note_ref(SqlCtx *cx, int level, int col, const SqlCol *c)
{
    if (cx->n_refs == cx->cap_refs) {
        int nc = cx->cap_refs ? cx->cap_refs * 2 : 8;
        SqlCorrRef *nr = qr_arena_alloc(cx->arena, (size_t)nc * sizeof *nr);
        if (!nr)
            return nomem(cx);
        if (cx->n_refs)
            memcpy(nr, cx->refs, (size_t)cx->n_refs * sizeof *nr);
        cx->refs = nr;
        cx->cap_refs = nc;
    }
    cx->refs[cx->n_refs++] = (SqlCorrRef){level, col, c->type, c->name};
    return QR_OK;
}

static int bind_colref(SqlBind *b, const cJSON *body, int loc, SqlExpr **out)
{
    const cJSON *fields = sqlj_get(body, "fields");
    int n = cJSON_GetArraySize(fields);
    const char *names[3] = {0};
    if (n < 1 || n > 3)
        return sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000", "column reference form is not supported");
    for (int i = 0; i < n; i++) {
        const cJSON *f = cJSON_GetArrayItem(fields, i);
        if (sqlj_is(f, "A_Star"))
            return sql_err_at(b->cx, loc, QR_ESYNTAX, "42601", "\"*\" is not allowed here");
        names[i] = sqlj_sval(f);
    }
    const char *qual = n >= 2 ? names[n - 2] : NULL, *name = names[n - 1];
    int idx, depth;
    const SqlScope *in;
    const SqlCol *c = find_col_outer(b, qual, name, loc, &idx, &depth, &in);
    if (!c)
        return b->cx->err->code;
    SqlExpr *e = new_expr(b, depth ? SE_OUTER : SE_COL, loc);
    if (!e)
        return b->cx->err->code;
    e->col = idx;
    e->op = depth;
    e->type = c->type;
    e->typmod = c->typmod;
    e->name = c->name;
    ((SqlScope *)in)->cols[idx].used = true; /* scans fetch only used columns */
    if (depth) {
        int rc = note_ref(b->cx, b->cx->sub_level - depth, idx, c);
        if (rc)
            return rc;
    }
    *out = e;
    return QR_OK;
}

/* ---- text predicates ---- */

static int bind_match(SqlBind *b, const cJSON *target, const cJSON *query, int loc, SqlExpr **out)
{
    const cJSON *cr = sqlj_is(target, "ColumnRef");
    if (!cr)
        return sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000",
                          "full-text match needs a column or table name on its left");
    const cJSON *fields = sqlj_get(cr, "fields");
    int n = cJSON_GetArraySize(fields);
    const char *n0 = sqlj_sval(cJSON_GetArrayItem(fields, 0));
    const char *n1 = n > 1 ? sqlj_sval(cJSON_GetArrayItem(fields, 1)) : NULL;
    const char *qual = NULL, *field = NULL;
    int id_col = -1;
    if (n == 1 && n0 && (id_col = find_table(b, n0)) >= 0) {
        qual = n0; /* whole table: its default fields */
    } else {
        int idx;
        const SqlCol *c = find_col(b, n == 2 ? n0 : NULL, n == 2 ? n1 : n0, loc, &idx);
        if (!c)
            return b->cx->err->code;
        if (c->field < 0 || !c->qual)
            return sql_err_at(b->cx, loc, QR_ETYPE, "42804",
                              "column \"%s\" is not a full-text field of a table", c->name);
        qual = c->qual;
        field = c->name;
        id_col = find_hidden(b->scope, qual, -2);
    }
    int score_col = find_hidden(b->scope, qual, -3);
    if (id_col < 0 || score_col < 0)
        return sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000",
                          "full-text match is only supported on tables");
    SqlExpr *q;
    int rc = sql_expr_bind(b, query, &q);
    if (rc)
        return rc;
    if ((rc = coerce_unknown(b, q, QR_SQL_TEXT)))
        return rc;
    if (!(q->kind == SE_CONST || q->kind == SE_PARAM) || !sqlt_is_str(q->type))
        return sql_err_at(b->cx, sqlj_loc(query), QR_EUNSUPPORTED, "0A000",
                          "the full-text query must be a text constant or parameter");
    SqlTextPred *tp = qr_arena_calloc(b->cx->arena, sizeof *tp);
    SqlExpr *e = new_expr(b, SE_MATCH, loc);
    if (!tp || !e)
        return nomem(b->cx);
    tp->id_col = id_col;
    tp->score_col = score_col;
    tp->qual = qual;
    tp->field = field;
    tp->query = q;
    tp->loc = loc;
    b->scope->cols[id_col].used = true;
    if (b->n_texts == b->cap_texts) {
        int nc = b->cap_texts ? b->cap_texts * 2 : 4;
        SqlTextPred **nt = qr_arena_alloc(b->cx->arena, (size_t)nc * sizeof *nt);
        if (!nt)
            return nomem(b->cx);
        if (b->n_texts)
            memcpy(nt, b->texts, (size_t)b->n_texts * sizeof *nt);
        b->texts = nt;
        b->cap_texts = nc;
    }
    for (int i = b->n_texts - 1; i >= 0; i--)
        if (!strcmp(b->texts[i]->qual, qual)) {
            b->texts[i]->next = tp;
            break;
        }
    b->texts[b->n_texts++] = tp;
    e->text = tp;
    e->type = QR_SQL_BOOL;
    e->name = "matches";
    *out = e;
    return QR_OK;
}

/* score() / snippet(col): the table of the single text predicate (or the
 * one named). */
static int bind_text_fn(SqlBind *b, const char *fname, const cJSON *args, int loc, SqlExpr **out)
{
    bool snippet = strcmp(fname, "score") != 0;
    /* a static name: fname lives on the caller's stack */
    fname = !snippet ? "score" : !strcmp(fname, "snippet") ? "snippet" : "highlight";
    const char *qual = NULL;
    int col = -1; /* snippet(col): the passage comes from that column */
    if (cJSON_GetArraySize(args) >= 1) {
        const cJSON *cr = sqlj_is(cJSON_GetArrayItem(args, 0), "ColumnRef");
        const cJSON *fields = sqlj_get(cr, "fields");
        int n = cJSON_GetArraySize(fields);
        const char *n0 = sqlj_sval(cJSON_GetArrayItem(fields, 0));
        if (!cr || !n0)
            return sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000", "%s() takes a column or table name", fname);
        if (n == 1 && find_table(b, n0) >= 0)
            qual = n0;
        else {
            const SqlCol *c = find_col(b, n == 2 ? n0 : NULL,
                                       sqlj_sval(cJSON_GetArrayItem(fields, n - 1)), loc, &col);
            if (!c)
                return b->cx->err->code;
            qual = c->qual;
        }
    }
    /* the text predicate of that table (or the only one) */
    SqlTextPred *tp = NULL;
    for (int i = 0; i < b->n_texts; i++)
        if (!qual || strcmp(b->texts[i]->qual, qual) == 0) {
            if (tp && strcmp(tp->qual, b->texts[i]->qual) != 0)
                return sql_err_at(b->cx, loc, QR_EINVAL, "42725",
                                  "%s() is ambiguous: name the table, as in %s(t)", fname, fname);
            if (!tp)
                tp = b->texts[i];
        }
    SqlExpr *e = new_expr(b, snippet ? SE_SNIPPET : SE_SCORE, loc);
    if (!e)
        return b->cx->err->code;
    if (!tp) {
        if (snippet)
            return sql_err_at(b->cx, loc, QR_EINVAL, "42809",
                              "%s() needs a full-text predicate (col @@ 'query') in WHERE", fname);
        /* no text predicate: score is 0 */
        e->kind = SE_CONST;
        e->val = sqlv_float(0);
        e->val.type = QR_SQL_FLOAT4;
        e->type = QR_SQL_FLOAT4;
        e->name = fname;
        *out = e;
        return QR_OK;
    }
    if (snippet) {
        /* the text it is cut from: the column named, else the columns the
         * predicate searched (its field, or every text column of the table;
         * sql_text.c keeps the indexed ones); they become columns the scan
         * fills */
        const SqlScope *sc = b->scope;
        int n = 0;
        for (int i = 0; i < sc->n; i++)
            n += i == col || (col < 0 && sc->cols[i].field >= 0 && sqlt_is_str(sc->cols[i].type) &&
                              sc->cols[i].qual && !strcmp(sc->cols[i].qual, tp->qual) &&
                              (!tp->field || !strcmp(sc->cols[i].name, tp->field)));
        if (set_args(b, e, n))
            return b->cx->err->code;
        n = 0;
        for (int i = 0; i < sc->n; i++)
            if (i == col || (col < 0 && sc->cols[i].field >= 0 && sqlt_is_str(sc->cols[i].type) &&
                             sc->cols[i].qual && !strcmp(sc->cols[i].qual, tp->qual) &&
                             (!tp->field || !strcmp(sc->cols[i].name, tp->field)))) {
                SqlExpr *c = new_expr(b, SE_COL, loc);
                if (!c)
                    return b->cx->err->code;
                c->col = i;
                c->type = sc->cols[i].type;
                c->name = sc->cols[i].name;
                b->scope->cols[i].used = true;
                e->args[n++] = c;
            }
        e->op = col >= 0; /* 1: a column was named */
    } else {
        b->scope->cols[tp->score_col].used = true;
    }
    e->text = tp;
    e->col = snippet ? tp->id_col : tp->score_col;
    e->type = snippet ? QR_SQL_TEXT : QR_SQL_FLOAT4;
    e->name = fname;
    *out = e;
    return QR_OK;
}

/* ---- aggregates ---- */

static const struct {
    const char *name;
    SqlAggKind kind;
} AGGS[] = {
    {"count", SA_COUNT},  {"sum", SA_SUM},       {"avg", SA_AVG},
    {"min", SA_MIN},      {"max", SA_MAX},       {"percentile_cont", SA_PCT_CONT},
    {"percentile_disc", SA_PCT_DISC}, {"bool_and", SA_BOOL_AND}, {"bool_or", SA_BOOL_OR},
    {"every", SA_BOOL_AND}, {"string_agg", SA_STRING_AGG},
    {"stddev", SA_STDDEV_SAMP}, {"stddev_samp", SA_STDDEV_SAMP}, {"stddev_pop", SA_STDDEV_POP},
    {"variance", SA_VAR_SAMP}, {"var_samp", SA_VAR_SAMP}, {"var_pop", SA_VAR_POP},
    {"array_agg", SA_ARRAY_AGG}, {"json_agg", SA_JSON_AGG}, {"jsonb_agg", SA_JSONB_AGG},
};

bool sql_agg_known(const char *lname)
{
    for (size_t i = 0; i < sizeof AGGS / sizeof *AGGS; i++)
        if (strcmp(AGGS[i].name, lname) == 0)
            return true;
    return false;
}

/* ORDER BY inside an aggregate call: the sort expressions (no aggregate
 * inside them), with DISTINCT only over the aggregate's arguments. */
static int bind_agg_order(SqlBind *b, const cJSON *order, SqlAgg *a, const char *fname, int loc)
{
    int n = cJSON_GetArraySize(order);
    a->order = qr_arena_calloc(b->cx->arena, (size_t)(n + 1) * sizeof *a->order);
    a->order_desc = qr_arena_calloc(b->cx->arena, (size_t)(n + 1) * sizeof *a->order_desc);
    a->order_nulls_first = qr_arena_calloc(b->cx->arena, (size_t)(n + 1) * sizeof *a->order_nulls_first);
    if (!a->order || !a->order_desc || !a->order_nulls_first)
        return nomem(b->cx);
    const cJSON *it;
    cJSON_ArrayForEach(it, order)
    {
        const cJSON *sb = sqlj_is(it, "SortBy");
        const char *dir = sqlj_str(sb, "sortby_dir"), *nl = sqlj_str(sb, "sortby_nulls");
        if (!sb || sqlj_get(sb, "useOp"))
            return sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000",
                              "ORDER BY USING inside %s() is not supported", fname);
        int k = a->n_order;
        int rc = sql_expr_bind(b, sqlj_get(sb, "node"), &a->order[k]);
        if (rc == QR_OK)
            rc = coerce_unknown(b, a->order[k], QR_SQL_TEXT);
        if (rc)
            return rc;
        bool desc = dir && !strcmp(dir, "SORTBY_DESC");
        a->order_desc[k] = desc;
        a->order_nulls_first[k] = nl && !strcmp(nl, "SORTBY_NULLS_FIRST") ? true
                                  : nl && !strcmp(nl, "SORTBY_NULLS_LAST") ? false
                                                                           : desc;
        a->n_order++;
        if (a->distinct && !sql_expr_same(a->order[k], a->arg) &&
            !(a->arg2 && sql_expr_same(a->order[k], a->arg2)))
            return sql_err_at(b->cx, a->order[k]->loc >= 0 ? a->order[k]->loc : loc, QR_EINVAL,
                              "42P10", "in an aggregate with DISTINCT, ORDER BY expressions must "
                              "appear in argument list");
    }
    return QR_OK;
}

/* An aggregate call into a SqlAgg: arguments, result type, ORDER BY,
 * FILTER.  A window's aggregate (`window`) may read the query's own
 * aggregates in its arguments and has no DISTINCT or ORDER BY. */
static int agg_def(SqlBind *b, const cJSON *fc, SqlAggKind kind, const char *fname, int loc,
                   bool window, SqlAgg **out)
{
    if (!window && !b->allow_aggs)
        return sql_err_at(b->cx, loc, QR_EINVAL, "42803", "aggregate functions are not allowed here");
    if (b->in_agg)
        return sql_err_at(b->cx, loc, QR_EINVAL, "42803", "aggregate function calls cannot be nested");
    if (window && (kind == SA_PCT_CONT || kind == SA_PCT_DISC))
        return sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000",
                          "OVER is not supported for ordered-set aggregate %s", fname);
    /* an aggregate over a window: PostgreSQL 15's own 0A000 refusals */
    if (window && sqlj_bool(fc, "agg_distinct"))
        return sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000",
                          "DISTINCT is not implemented for window functions");
    if (window && sqlj_get(fc, "agg_order"))
        return sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000",
                          "aggregate ORDER BY is not implemented for window functions");
    SqlAgg *a = qr_arena_calloc(b->cx->arena, sizeof *a);
    if (!a)
        return nomem(b->cx);
    a->kind = kind;
    a->distinct = sqlj_bool(fc, "agg_distinct");
    const cJSON *args = sqlj_get(fc, "args");
    int nargs = cJSON_GetArraySize(args);
    b->in_agg = !window;
    int rc = QR_OK;
    if (sqlj_bool(fc, "agg_star")) {
        if (kind != SA_COUNT) {
            b->in_agg = false;
            return sql_err_at(b->cx, loc, QR_ESYNTAX, "42601", "%s(*) is not allowed", fname);
        }
        a->kind = SA_COUNT_STAR;
        a->type = QR_SQL_INT8;
    } else if (kind == SA_PCT_CONT || kind == SA_PCT_DISC) {
        const cJSON *order = sqlj_get(fc, "agg_order");
        if (!sqlj_bool(fc, "agg_within_group") || cJSON_GetArraySize(order) != 1 || nargs != 1) {
            b->in_agg = false;
            return sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000",
                              "%s needs one fraction and WITHIN GROUP (ORDER BY one expression)",
                              fname);
        }
        const cJSON *sb = sqlj_is(cJSON_GetArrayItem(order, 0), "SortBy");
        if ((rc = sql_expr_bind(b, cJSON_GetArrayItem(args, 0), &a->arg2)) ||
            (rc = coerce_unknown(b, a->arg2, QR_SQL_FLOAT8)) ||
            (rc = sql_expr_bind(b, sqlj_get(sb, "node"), &a->arg))) {
            b->in_agg = false;
            return rc;
        }
        if (strcmp(sqlj_str(sb, "sortby_dir") ? sqlj_str(sb, "sortby_dir") : "", "SORTBY_DESC") == 0) {
            b->in_agg = false;
            return sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000",
                              "%s WITHIN GROUP (ORDER BY ... DESC) is not supported", fname);
        }
        if (!sql_expr_is_const(a->arg2)) {
            b->in_agg = false;
            return sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000",
                              "the fraction of %s must be a constant", fname);
        }
        if (kind == SA_PCT_CONT) {
            if (!sqlt_is_num(a->arg->type) && !sqlt_is_ts(a->arg->type)) {
                b->in_agg = false;
                return sql_err_at(b->cx, loc, QR_ETYPE, "42883",
                                  "function percentile_cont(%s) does not exist",
                                  qr_sql_type_name(a->arg->type));
            }
            a->type = sqlt_is_ts(a->arg->type) ? a->arg->type : QR_SQL_FLOAT8;
        } else {
            a->type = a->arg->type;
        }
    } else {
        int want = kind == SA_STRING_AGG ? 2 : 1;
        if (nargs != want || sqlj_bool(fc, "agg_within_group")) {
            b->in_agg = false;
            return sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883",
                              "function %s with %d arguments does not exist", fname, nargs);
        }
        if ((rc = sql_expr_bind(b, cJSON_GetArrayItem(args, 0), &a->arg))) {
            b->in_agg = false;
            return rc;
        }
        if (want == 2 && ((rc = sql_expr_bind(b, cJSON_GetArrayItem(args, 1), &a->arg2)) ||
                          (rc = coerce_unknown(b, a->arg2, QR_SQL_TEXT)))) {
            b->in_agg = false;
            return rc;
        }
        QrSqlType t = a->arg->type;
        switch (kind) {
        case SA_COUNT:
            a->type = QR_SQL_INT8;
            break;
        case SA_SUM:
            if (t == QR_SQL_UNKNOWN)
                coerce_unknown(b, a->arg, t = QR_SQL_FLOAT8);
            if (!sqlt_is_num(t))
                goto badarg;
            a->type = sqlt_is_int(t) ? QR_SQL_INT8 : t == QR_SQL_NUMERIC ? t : QR_SQL_FLOAT8;
            break;
        case SA_AVG:
        case SA_STDDEV_SAMP:
        case SA_STDDEV_POP:
        case SA_VAR_SAMP:
        case SA_VAR_POP:
            if (t == QR_SQL_UNKNOWN)
                coerce_unknown(b, a->arg, t = QR_SQL_FLOAT8);
            if (!sqlt_is_num(t))
                goto badarg;
            a->type = kind == SA_AVG && t == QR_SQL_NUMERIC ? t : QR_SQL_FLOAT8;
            break;
        case SA_MIN:
        case SA_MAX:
            if (t == QR_SQL_UNKNOWN)
                coerce_unknown(b, a->arg, t = QR_SQL_TEXT);
            if (t == QR_SQL_BOOL) /* as PostgreSQL: bool_and / bool_or instead */
                goto badarg;
            a->type = t;
            break;
        case SA_BOOL_AND:
        case SA_BOOL_OR:
            if ((rc = coerce_unknown(b, a->arg, QR_SQL_BOOL))) {
                b->in_agg = false;
                return rc;
            }
            if (a->arg->type != QR_SQL_BOOL)
                goto badarg;
            a->type = QR_SQL_BOOL;
            break;
        case SA_STRING_AGG:
            coerce_unknown(b, a->arg, QR_SQL_TEXT);
            if (!sqlt_is_str(a->arg->type))
                goto badarg;
            a->type = QR_SQL_TEXT;
            break;
        case SA_JSON_AGG:
        case SA_JSONB_AGG:
            coerce_unknown(b, a->arg, QR_SQL_TEXT);
            a->type = kind == SA_JSON_AGG ? QR_SQL_JSON : QR_SQL_JSONB;
            break;
        case SA_ARRAY_AGG:
            coerce_unknown(b, a->arg, QR_SQL_TEXT);
            if (QR_SQL_IS_ARRAY(a->arg->type)) {
                b->in_agg = false;
                return sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000",
                                  "array_agg of arrays is not supported");
            }
            a->type = QR_SQL_ARRAY_OF(a->arg->type);
            break;
        default:
            break;
        }
        const cJSON *order = sqlj_get(fc, "agg_order");
        if (order && (rc = bind_agg_order(b, order, a, fname, loc))) {
            b->in_agg = false;
            return rc;
        }
    }
    const cJSON *flt = sqlj_get(fc, "agg_filter");
    if (flt) {
        /* bound as the arguments are: no aggregate inside */
        b->in_agg = true;
        if ((rc = sql_expr_bind(b, flt, &a->filter)) ||
            (rc = coerce_unknown(b, a->filter, QR_SQL_BOOL))) {
            b->in_agg = false;
            return rc;
        }
        if (a->filter->type != QR_SQL_BOOL) {
            b->in_agg = false;
            return sql_err_at(b->cx, a->filter->loc >= 0 ? a->filter->loc : loc, QR_EINVAL, "42804",
                              "argument of FILTER must be type boolean, not type %s",
                              qr_sql_type_name(a->filter->type));
        }
    }
    b->in_agg = false;
    *out = a;
    return QR_OK;
badarg:
    b->in_agg = false;
    return sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883", "function %s(%s) does not exist", fname,
                      qr_sql_type_name(a->arg->type));
}

int sql_agg_bind(SqlBind *b, const cJSON *fc, const char *lname, int loc, bool window,
                 SqlAgg **out)
{
    for (size_t i = 0; i < sizeof AGGS / sizeof *AGGS; i++)
        if (strcmp(AGGS[i].name, lname) == 0)
            return agg_def(b, fc, AGGS[i].kind, lname, loc, window, out);
    return QR_ENOTFOUND;
}

int sql_bind_add_agg(SqlBind *b, SqlAgg *a, int loc, const char *name, SqlExpr **out)
{
    if (b->n_aggs == b->cap_aggs) {
        int nc = b->cap_aggs ? b->cap_aggs * 2 : 8;
        SqlAgg **na = qr_arena_alloc(b->cx->arena, (size_t)nc * sizeof *na);
        if (!na)
            return nomem(b->cx);
        if (b->n_aggs)
            memcpy(na, b->aggs, (size_t)b->n_aggs * sizeof *na);
        b->aggs = na;
        b->cap_aggs = nc;
    }
    SqlExpr *e = new_expr(b, SE_AGG, loc);
    if (!e)
        return b->cx->err->code;
    e->col = b->n_aggs;
    b->aggs[b->n_aggs++] = a;
    e->type = a->type;
    e->name = qr_arena_strndup(b->cx->arena, name, strlen(name));
    *out = e;
    return QR_OK;
}

static int bind_agg(SqlBind *b, const cJSON *fc, SqlAggKind kind, const char *fname, int loc,
                    SqlExpr **out)
{
    SqlAgg *a;
    int rc = agg_def(b, fc, kind, fname, loc, false, &a);
    return rc ? rc : sql_bind_add_agg(b, a, loc, fname, out);
}

/* ---- function calls ---- */

static int bind_srf(SqlBind *b, SqlExpr *e, int loc, SqlExpr **out);

static int bind_func(SqlBind *b, const cJSON *fc, int loc, SqlExpr **out);

/* information_schema._pg_expandarray(arr) returns (x, n) rows: the element
 * and its subscript.  JDBC's getPrimaryKeys / getIndexInfo select
 * (_pg_expandarray(a)).x and .n side by side, so .x binds as unnest(a) and
 * .n as generate_subscripts(a, 1) (set-returning functions in one select
 * list advance together); the bare call reads as its x.  `field` "x", "n"
 * or NULL. */
static int bind_expandarray(SqlBind *b, const cJSON *fc, const char *field, int loc,
                            SqlExpr **out)
{
    const cJSON *args = sqlj_get(fc, "args");
    if (cJSON_GetArraySize(args) != 1 || (field && strcmp(field, "x") && strcmp(field, "n")))
        return sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883",
                          "function _pg_expandarray needs one array; its fields are x and n");
    bool n = field && !strcmp(field, "n");
    char text[160];
    snprintf(text, sizeof text,
             "{\"funcname\":[{\"String\":{\"sval\":\"%s\"}}],\"args\":[null%s],\"location\":%d}",
             n ? "generate_subscripts" : "unnest", n ? ",{\"A_Const\":{\"ival\":{\"ival\":1}}}" : "",
             loc);
    cJSON *call = cJSON_Parse(text);
    cJSON *a = call ? cJSON_Duplicate(cJSON_GetArrayItem(args, 0), true) : NULL;
    if (!a) {
        cJSON_Delete(call);
        return nomem(b->cx);
    }
    cJSON_ReplaceItemInArray(cJSON_GetObjectItemCaseSensitive(call, "args"), 0, a);
    int rc = bind_func(b, call, loc, out);
    cJSON_Delete(call); /* bound expressions keep no pointer into the tree */
    if (rc == QR_OK && !(*out)->name)
        (*out)->name = n ? "n" : "x";
    return rc;
}

/* row_to_json(t) of a FROM item t: its visible columns' names and values
 * handed to SQLJS_ROW_TO_JSON in order. */
static int bind_row_to_json(SqlBind *b, const cJSON *cr, int loc, SqlExpr **out)
{
    const cJSON *fields = sqlj_get(sqlj_is(cr, "ColumnRef"), "fields");
    const char *name = cJSON_GetArraySize(fields) == 1 ? sqlj_sval(cJSON_GetArrayItem(fields, 0))
                                                      : NULL;
    const SqlScope *sc = b->scope;
    int n = 0;
    for (int i = 0; name && sc && i < sc->n; i++) {
        const SqlCol *c = &sc->cols[i];
        const char *q = c->jqual && *c->jqual ? c->jqual : c->qual;
        n += !c->hidden && q && !strcmp(q, name);
    }
    if (!n)
        return sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000",
                          "row_to_json takes a table or FROM item name (row_to_json(t))");
    SqlExpr *e = new_expr(b, SE_FUNC, loc);
    if (!e || set_args(b, e, 2 * n))
        return b->cx->err->code;
    int k = 0;
    for (int i = 0; i < sc->n; i++) {
        const SqlCol *c = &sc->cols[i];
        const char *q = c->jqual && *c->jqual ? c->jqual : c->qual;
        if (c->hidden || !q || strcmp(q, name))
            continue;
        SqlExpr *kn = new_expr(b, SE_CONST, loc), *col = new_expr(b, SE_COL, loc);
        if (!kn || !col)
            return b->cx->err->code;
        kn->val = sqlv_text(c->name, strlen(c->name));
        kn->type = QR_SQL_TEXT;
        col->col = i;
        col->type = c->type;
        col->name = c->name;
        ((SqlScope *)sc)->cols[i].used = true;
        e->args[k++] = kn;
        e->args[k++] = col;
    }
    e->fn = &SQLJS_ROW_TO_JSON;
    e->type = QR_SQL_JSON;
    e->name = "row_to_json";
    *out = e;
    return QR_OK;
}

static int bind_func(SqlBind *b, const cJSON *fc, int loc, SqlExpr **out)
{
    const cJSON *fn = sqlj_get(fc, "funcname");
    const char *fname = sqlj_last_name(fn);
    if (fname && !strcmp(fname, "_pg_expandarray"))
        return bind_expandarray(b, fc, NULL, loc, out);
    const char *schema = cJSON_GetArraySize(fn) > 1 ? sqlj_sval(cJSON_GetArrayItem(fn, 0)) : NULL;
    if (!fname)
        return sql_err_at(b->cx, loc, QR_ESYNTAX, "42601", "bad function name");
    char lname[64];
    snprintf(lname, sizeof lname, "%s", fname);
    for (char *p = lname; *p; p++)
        *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
    if (sqlj_get(fc, "over")) {
        if (!b->bind_window)
            return sql_err_at(b->cx, loc, QR_EINVAL, "42P20", "window functions are not allowed here");
        return b->bind_window(b, fc, lname, loc, out);
    }
    if (sql_win_known(lname) && !schema)
        return sql_err_at(b->cx, loc, QR_EINVAL, "42809", "window function %s requires an OVER clause",
                          lname);
    const cJSON *args = sqlj_get(fc, "args");
    int nargs = cJSON_GetArraySize(args);
    if (nargs > SQL_FUNC_MAX_ARGS) /* PostgreSQL's FUNC_MAX_ARGS */
        return sql_err_at(b->cx, loc, QR_ELIMIT, "54023",
                          "cannot pass more than %d arguments to a function", SQL_FUNC_MAX_ARGS);
    for (size_t i = 0; i < sizeof AGGS / sizeof *AGGS; i++)
        if (strcmp(AGGS[i].name, lname) == 0)
            return bind_agg(b, fc, AGGS[i].kind, lname, loc, out);
    if (sqlj_bool(fc, "agg_star") || sqlj_bool(fc, "agg_distinct"))
        return sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883", "function %s(*) does not exist", lname);
    if (sqlj_get(fc, "agg_filter"))
        return sql_err_at(b->cx, loc, QR_EINVAL, "42809",
                          "FILTER specified, but %s is not an aggregate function", lname);
    /* Quarry's text functions: unqualified, or in schema quarry as the
     * PostgreSQL extension of src/pgext defines them (postgres_fdw writes
     * quarry.matches(...)) */
    bool text_fn = !strcmp(lname, "matches") || !strcmp(lname, "score") ||
                   !strcmp(lname, "snippet") || !strcmp(lname, "highlight");
    if (text_fn && schema && strcmp(schema, "quarry") != 0) {
        sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883", "function %s.%s(%s) does not exist", schema,
                   lname, nargs ? "..." : "");
        qr_error_hint(b->cx->err, "Quarry's text functions are unqualified or in schema quarry, "
                                  "as quarry.%s", lname);
        return QR_ENOTFOUND;
    }
    if (strcmp(lname, "matches") == 0) {
        if (nargs != 2)
            return sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883",
                              "function matches needs two arguments: a column and a query");
        return bind_match(b, cJSON_GetArrayItem(args, 0), cJSON_GetArrayItem(args, 1), loc, out);
    }
    if (strcmp(lname, "score") == 0 || strcmp(lname, "snippet") == 0 ||
        strcmp(lname, "highlight") == 0)
        return bind_text_fn(b, lname, args, loc, out);
    if (!strcmp(lname, "row_to_json") && nargs == 1 && sqlj_is(cJSON_GetArrayItem(args, 0), "ColumnRef"))
        return bind_row_to_json(b, cJSON_GetArrayItem(args, 0), loc, out);
    bool srf = sql_srf_known(lname) && (!schema || !strcmp(schema, "pg_catalog"));
    SqlExpr *e = new_expr(b, srf ? SE_SRF : SE_FUNC, loc);
    if (!e || set_args(b, e, nargs))
        return b->cx->err->code;
    int k = 0;
    const cJSON *arg;
    cJSON_ArrayForEach(arg, args)
    {
        int rc = sql_expr_bind(b, arg, &e->args[k++]);
        if (rc)
            return rc;
    }
    e->name = qr_arena_strndup(b->cx->arena, lname, strlen(lname));
    if (srf)
        return bind_srf(b, e, loc, out);
    const SqlFuncDef *def = schema && strcmp(schema, "pg_catalog") != 0 ? NULL
                                                                        : sql_func_find(lname, nargs);
    if (!def) {
        QrSqlType rt;
        if (sqlcat_func_lookup(schema, lname, nargs, &rt) == QR_OK) {
            /* a catalog function: called through the hook at run time */
            e->fn = NULL;
            e->type = rt;
            e->op = 1;
            *out = e;
            return QR_OK;
        }
        return sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883", "function %s(%s) does not exist",
                          lname, nargs ? "..." : "");
    }
    e->fn = def;
    if (def->check) { /* polymorphic or overloaded: the function's own rules */
        e->type = def->ret;
        int rc = def->check(b, e);
        if (rc)
            return rc;
        if (e->type == QR_SQL_UNKNOWN)
            e->type = QR_SQL_TEXT;
        *out = e;
        return QR_OK;
    }
    QrSqlType rt = def->ret;
    if (rt == QR_SQL_UNKNOWN) {
        /* same type as the arguments (coalesce-like: abs, round...) */
        rt = nargs ? e->args[0]->type : QR_SQL_TEXT;
        if (rt == QR_SQL_UNKNOWN)
            rt = QR_SQL_TEXT;
    }
    for (int i = 0; i < nargs; i++)
        if (e->args[i]->type == QR_SQL_UNKNOWN) {
            /* untyped literal arguments: text, except numbers for math */
            int rc = coerce_unknown(b, e->args[i],
                                    def->numeric_args ? QR_SQL_FLOAT8 : QR_SQL_TEXT);
            if (rc)
                return rc;
        }
    if (def->ret == QR_SQL_UNKNOWN && nargs && e->args[0]->type != QR_SQL_UNKNOWN)
        rt = e->args[0]->type;
    if (!strcmp(lname, "date_trunc"))
        rt = sqlt_is_ts(e->args[1]->type) ? e->args[1]->type : QR_SQL_TIMESTAMPTZ;
    e->type = rt;
    *out = e;
    return QR_OK;
}

/* ---- set-returning functions ---- */

#define SQL_SRF_MAX_ROWS 100000000ull /* generate_series: more is 54000 */

static const char *const SRF_NAMES[] = {"unnest", "generate_series", "generate_subscripts"};

bool sql_srf_known(const char *name)
{
    for (size_t i = 0; i < sizeof SRF_NAMES / sizeof *SRF_NAMES; i++)
        if (!strcmp(SRF_NAMES[i], name))
            return true;
    return false;
}

/* Argument checks and the element type; the rows come at run time from
 * sql_srf_rows (select lists and FROM). */
static int bind_srf(SqlBind *b, SqlExpr *e, int loc, SqlExpr **out)
{
    int n = e->n_args;
    bool series = !strcmp(e->name, "generate_series");
    if (series ? n < 2 || n > 3 : !strcmp(e->name, "unnest") ? n != 1 : n != 2)
        return sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883", "function %s with %d arguments does not exist",
                          e->name, n);
    if (series) {
        e->type = QR_SQL_INT4;
        for (int i = 0; i < n; i++) {
            int rc = coerce_unknown(b, e->args[i], QR_SQL_INT8);
            if (rc)
                return rc;
            if (!sqlt_is_int(e->args[i]->type))
                return sql_err_at(b->cx, e->args[i]->loc, QR_EUNSUPPORTED, "0A000",
                                  "generate_series over %s is not supported (integers only)",
                                  qr_sql_type_name(e->args[i]->type));
            if (e->args[i]->type == QR_SQL_INT8)
                e->type = QR_SQL_INT8;
        }
    } else {
        /* unnest(anyarray), generate_subscripts(anyarray, dim); a catalog
         * array in its text form reads as its column's element type */
        int rc = coerce_unknown(b, e->args[0], QR_SQL_ARRAY_OF(QR_SQL_TEXT));
        if (rc || (n == 2 && (rc = coerce_unknown(b, e->args[1], QR_SQL_INT4))))
            return rc;
        QrSqlType at = e->args[0]->type;
        if (!sqlt_is_str(at) && !QR_SQL_IS_ARRAY(at))
            return sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883", "function %s(%s) does not exist",
                              e->name, qr_sql_type_name(at));
        QrSqlType el = QR_SQL_IS_ARRAY(at) ? QR_SQL_ELEM(at)
                       : e->args[0]->name  ? sqlcat_array_elem(e->args[0]->name)
                                           : QR_SQL_UNKNOWN;
        e->type = n == 2 ? QR_SQL_INT4 : el == QR_SQL_UNKNOWN ? QR_SQL_TEXT : el;
    }
    *out = e;
    return QR_OK;
}

int sql_srf_rows(SqlCtx *cx, const char *name, int n, const SqlValue *args, QrSqlType elem,
                 SqlValue **out, uint64_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    if (!sql_srf_known(name))
        return QR_ENOTFOUND;
    for (int i = 0; i < n; i++)
        if (args[i].is_null)
            return QR_OK;
    if (!strcmp(name, "generate_series")) {
        int64_t a = args[0].u.i, z = args[1].u.i, step = n > 2 ? args[2].u.i : 1;
        if (step == 0)
            return sql_err_at(cx, -1, QR_EINVAL, "22023", "step size cannot equal zero");
        if ((step > 0 && a > z) || (step < 0 && a < z))
            return QR_OK;
        /* steps after the first; the row count is that + 1, checked before
         * adding (the whole int8 range has 2^64 values, which wraps to 0) */
        uint64_t steps = (step > 0 ? (uint64_t)z - (uint64_t)a : (uint64_t)a - (uint64_t)z) /
                         (step > 0 ? (uint64_t)step : 0 - (uint64_t)step);
        if (steps >= SQL_SRF_MAX_ROWS)
            return sql_err_at(cx, -1, QR_ELIMIT, "54000",
                              "generate_series would return more than %llu rows",
                              (unsigned long long)SQL_SRF_MAX_ROWS);
        uint64_t cnt = steps + 1;
        SqlValue *v = qr_arena_alloc(cx->arena, cnt * sizeof *v);
        if (!v)
            return nomem(cx);
        for (uint64_t i = 0; i < cnt; i++) {
            v[i] = sqlv_int((int64_t)((uint64_t)a + i * (uint64_t)step));
            v[i].type = elem;
        }
        *out = v;
        *n_out = cnt;
        return QR_OK;
    }
    SqlValue *el, arr;
    uint64_t cnt;
    int rc = sqla_of(cx, &args[0], n == 2 ? QR_SQL_TEXT : elem, &arr);
    if (rc)
        return rc;
    if (n == 2) { /* generate_subscripts(array, dim): the dimension's subscripts */
        SqlArr a;
        if (!sqla_view(&arr, &a) || args[1].u.i < 1 || args[1].u.i > a.ndim)
            return QR_OK;
        int d = (int)args[1].u.i - 1;
        cnt = (uint64_t)a.dims[d];
        if (!(el = qr_arena_alloc(cx->arena, (cnt ? cnt : 1) * sizeof *el)))
            return nomem(cx);
        for (uint64_t i = 0; i < cnt; i++) {
            el[i] = sqlv_int((int64_t)i + a.lbound[d]);
            el[i].type = QR_SQL_INT4;
        }
    } else if ((rc = sqla_elems(cx, &arr, &el, &cnt))) {
        return rc;
    }
    *out = el;
    *n_out = cnt;
    return QR_OK;
}

/* ---- operators ---- */

static int cmp_op(const char *op)
{
    if (!strcmp(op, "="))
        return SQL_CMP_EQ;
    if (!strcmp(op, "<>") || !strcmp(op, "!="))
        return SQL_CMP_NE;
    if (!strcmp(op, "<"))
        return SQL_CMP_LT;
    if (!strcmp(op, "<="))
        return SQL_CMP_LE;
    if (!strcmp(op, ">"))
        return SQL_CMP_GT;
    if (!strcmp(op, ">="))
        return SQL_CMP_GE;
    return -1;
}

static int bind_cmp(SqlBind *b, int op, SqlExpr *l, SqlExpr *r, int loc, SqlExpr **out)
{
    QrSqlType t;
    int rc = unify(b, &l, &r, loc, &t);
    if (rc)
        return rc;
    SqlExpr *e = new_expr(b, SE_CMP, loc);
    if (!e || set_args(b, e, 2))
        return b->cx->err->code;
    e->op = op;
    e->args[0] = l;
    e->args[1] = r;
    e->type = QR_SQL_BOOL;
    *out = e;
    return QR_OK;
}

static bool is_dt(QrSqlType t)
{
    return sqlt_is_datetime(t) || t == QR_SQL_TIME || t == QR_SQL_INTERVAL;
}

/* The type an untyped literal takes beside a date/time operand `t` under
 * operator o, as PostgreSQL picks: the same type for '-' (ts - '2024-01-01'),
 * an interval for '+' (ts + '1 day'), an integer for a date and a number
 * (d + '1'), a number for * and /. */
static QrSqlType dt_unknown(QrSqlType t, int o, const SqlExpr *lit)
{
    if (o == '*' || o == '/')
        return t == QR_SQL_INTERVAL ? QR_SQL_FLOAT8 : QR_SQL_INTERVAL;
    if (t == QR_SQL_INTERVAL)
        return QR_SQL_INTERVAL;
    if (t == QR_SQL_DATE && lit->kind == SE_CONST && !lit->val.is_null) {
        const char *p = lit->val.u.s.s;
        size_t n = lit->val.u.s.n, i = n && (p[0] == '-' || p[0] == '+');
        bool num = i < n;
        for (; i < n && num; i++)
            num = p[i] >= '0' && p[i] <= '9';
        if (num)
            return QR_SQL_INT4;
    }
    return o == '-' ? t : QR_SQL_INTERVAL;
}

/* timestamp +- interval, date +- int, date - date, timestamp - timestamp,
 * interval arithmetic... (sql_datetime.c): SE_ARITH with col 1. */
static int bind_dt_arith(SqlBind *b, int o, const char *op, SqlExpr *l, SqlExpr *r, int loc,
                         SqlExpr **out)
{
    int rc = QR_OK;
    if (l->type == QR_SQL_UNKNOWN)
        rc = coerce_unknown(b, l, dt_unknown(r->type, o, l));
    else if (r->type == QR_SQL_UNKNOWN)
        rc = coerce_unknown(b, r, dt_unknown(l->type, o, r));
    if (rc)
        return rc;
    QrSqlType t;
    if (sqld_arith_type(o, l->type, r->type, &t) != 0)
        return sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883", "operator does not exist: %s %s %s",
                          qr_sql_type_name(l->type), op, qr_sql_type_name(r->type));
    SqlExpr *e = new_binary(b, SE_ARITH, o, l, r, loc);
    if (!e)
        return b->cx->err->code;
    e->col = 1;
    e->type = t;
    *out = e;
    return QR_OK;
}

static int bind_arith(SqlBind *b, const char *op, SqlExpr *l, SqlExpr *r, int loc, SqlExpr **out)
{
    if (!strcmp(op, "||")) {
        if (l->type == QR_SQL_UNKNOWN)
            coerce_unknown(b, l, QR_SQL_TEXT);
        if (r->type == QR_SQL_UNKNOWN)
            coerce_unknown(b, r, QR_SQL_TEXT);
        SqlExpr *e = new_expr(b, SE_CONCAT, loc);
        if (!e || set_args(b, e, 2))
            return b->cx->err->code;
        e->args[0] = l;
        e->args[1] = r;
        e->type = QR_SQL_TEXT;
        *out = e;
        return QR_OK;
    }
    int o = op[1] ? 0 : op[0];
    if ((o == '&' || o == '|') && (!sqlt_is_int(l->type) || !sqlt_is_int(r->type)) &&
        l->type != QR_SQL_UNKNOWN && r->type != QR_SQL_UNKNOWN)
        o = 0; /* bitwise AND / OR: integers only */
    if (o != '+' && o != '-' && o != '*' && o != '/' && o != '%' && o != '&' && o != '|')
        return sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883", "operator does not exist: %s %s %s",
                          qr_sql_type_name(l->type), op, qr_sql_type_name(r->type));
    if (is_dt(l->type) || is_dt(r->type))
        return bind_dt_arith(b, o, op, l, r, loc, out);
    if (l->type == QR_SQL_UNKNOWN)
        coerce_unknown(b, l, sqlt_is_num(r->type) ? r->type : QR_SQL_FLOAT8);
    if (r->type == QR_SQL_UNKNOWN)
        coerce_unknown(b, r, sqlt_is_num(l->type) ? l->type : QR_SQL_FLOAT8);
    if (b->cx->err->code)
        return b->cx->err->code;
    if (!sqlt_is_num(l->type) || !sqlt_is_num(r->type))
        return sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883", "operator does not exist: %s %s %s",
                          qr_sql_type_name(l->type), op, qr_sql_type_name(r->type));
    SqlExpr *e = new_binary(b, SE_ARITH, o, l, r, loc);
    if (!e)
        return b->cx->err->code;
    /* numeric stays exact with integers; with a float it is a float8 (as
     * PostgreSQL's implicit numeric -> float8 cast) */
    bool fl = l->type == QR_SQL_FLOAT4 || l->type == QR_SQL_FLOAT8 || r->type == QR_SQL_FLOAT4 ||
              r->type == QR_SQL_FLOAT8;
    bool num = l->type == QR_SQL_NUMERIC || r->type == QR_SQL_NUMERIC;
    e->type = fl    ? QR_SQL_FLOAT8
              : num ? QR_SQL_NUMERIC
              : (l->type == QR_SQL_INT8 || r->type == QR_SQL_INT8) ? QR_SQL_INT8
              : (l->type == QR_SQL_INT2 && r->type == QR_SQL_INT2) ? QR_SQL_INT2
                                                                    : QR_SQL_INT4;
    if (l->type == QR_SQL_OID || r->type == QR_SQL_OID)
        e->type = QR_SQL_INT8;
    *out = e;
    return QR_OK;
}

static int bind_list(SqlBind *b, const cJSON *list, SqlExpr *head, SqlExpr **e_out, int kind)
{
    int n = cJSON_GetArraySize(list);
    SqlExpr *e = new_expr(b, (SqlExprKind)kind, sqlj_loc(list));
    if (!e || set_args(b, e, n + (head ? 1 : 0)))
        return b->cx->err->code;
    int k = 0;
    if (head)
        e->args[k++] = head;
    const cJSON *it;
    cJSON_ArrayForEach(it, list)
    {
        int rc = sql_expr_bind(b, it, &e->args[k++]);
        if (rc || (rc = sql_check(b->cx))) /* long lists: cancel and the deadline */
            return rc;
    }
    *e_out = e;
    return QR_OK;
}

/* The class of values sqlv_cmp orders exactly among themselves: 1 exact
 * integers (int, timestamp, bool), 2 floats and numerics, 3 strings. */
static int cmp_class(QrSqlType t)
{
    if (sqlt_is_int(t) || sqlt_is_ts(t) || t == QR_SQL_BOOL)
        return 1;
    if (sqlt_is_float(t))
        return 2;
    return sqlt_is_str(t) ? 3 : 0;
}

/* A long IN list of constants of one class is also kept sorted (e->set):
 * evaluation then searches it instead of comparing every item per row (a
 * million-item list against every row ran for minutes).  The list stays in
 * args, where the planner looks for key and column lookups.  Any item that
 * is not a constant, or fails to evaluate, leaves the list as it is. */
static int in_list_set(SqlBind *b, SqlExpr *e)
{
    SqlCtx *cx = b->cx;
    uint64_t n = (uint64_t)e->n_args - 1;
    for (uint64_t i = 1; i <= n; i++) {
        const SqlExpr *x = e->args[i];
        if (x->kind != SE_CONST && !(x->kind == SE_CAST && x->args[0]->kind == SE_CONST))
            return QR_OK;
    }
    SqlValueSet *set = qr_arena_calloc(cx->arena, sizeof *set);
    SqlValue *v = set ? qr_arena_alloc(cx->arena, n * sizeof *v) : NULL;
    if (!v)
        return nomem(cx);
    QrError scratch, *saved = cx->err;
    qr_error_clear(&scratch);
    cx->err = &scratch; /* an item that fails reports its error at run time, as before */
    int cls = 0;
    bool ok = true;
    SqlEvalRow none = {.doc = -1};
    for (uint64_t i = 1; i <= n && ok; i++) {
        SqlValue x;
        ok = sql_expr_eval(cx, e->args[i], &none, &x) == QR_OK;
        if (!ok || x.is_null) {
            set->has_null |= ok;
            continue;
        }
        int c = cmp_class(x.type);
        ok = c && (!cls || c == cls);
        cls = c;
        v[set->n++] = x;
    }
    cx->err = saved;
    if (!ok)
        return QR_OK;
    set->vals = v;
    sql_sort_values(v, set->n);
    e->set = set;
    return sql_check(cx);
}

/* x IN (a, b, c): args[0] = x, every other arg coerced to the common type */
static int bind_in_list(SqlBind *b, const cJSON *lexpr, const cJSON *list, int loc, bool neg,
                        SqlExpr **out)
{
    SqlExpr *x, *e;
    int rc = sql_expr_bind(b, lexpr, &x);
    if (rc || (rc = bind_list(b, list, x, &e, SE_IN)))
        return rc;
    for (int i = 1; i < e->n_args; i++) {
        QrSqlType t;
        if ((rc = unify(b, &e->args[0], &e->args[i], e->args[i]->loc, &t)) || (rc = sql_check(b->cx)))
            return rc;
    }
    if (e->n_args - 1 >= SQL_IN_SET_MIN && (rc = in_list_set(b, e)))
        return rc;
    e->op = neg;
    e->loc = loc;
    e->type = QR_SQL_BOOL;
    *out = e;
    return QR_OK;
}

static int bind_in(SqlBind *b, const cJSON *ae, int loc, bool neg, SqlExpr **out)
{
    return bind_in_list(b, sqlj_get(ae, "lexpr"), sqlj_list(sqlj_get(ae, "rexpr")), loc, neg, out);
}

/* Can values of the two types be compared (=, <, ...)? */
static bool comparable(QrSqlType a, QrSqlType c)
{
    return a == c || (sqlt_is_num(a) && sqlt_is_num(c)) || (sqlt_is_str(a) && sqlt_is_str(c)) ||
           (sqlt_is_datetime(a) && sqlt_is_datetime(c)) ||
           (QR_SQL_IS_ARRAY(a) && QR_SQL_IS_ARRAY(c) && comparable(QR_SQL_ELEM(a), QR_SQL_ELEM(c)));
}

/* x op ANY / ALL (array): an untyped array (a parameter postgres.js sends
 * as text, a '{...}' literal) is an array of x's type; a catalog array in
 * its text form is read as such at run time. */
static int bind_any(SqlBind *b, const cJSON *lx, const cJSON *rx, int op, const char *opname,
                    int loc, SqlExpr **out)
{
    SqlExpr *l, *r;
    int rc;
    if ((rc = sql_expr_bind(b, lx, &l)) || (rc = sql_expr_bind(b, rx, &r)))
        return rc;
    if (r->type == QR_SQL_UNKNOWN)
        rc = coerce_unknown(b, r, QR_SQL_ARRAY_OF(l->type == QR_SQL_UNKNOWN ? QR_SQL_TEXT : l->type));
    if (rc == QR_OK && l->type == QR_SQL_UNKNOWN)
        rc = coerce_unknown(b, l, QR_SQL_IS_ARRAY(r->type) ? QR_SQL_ELEM(r->type) : QR_SQL_TEXT);
    if (rc)
        return rc;
    if (!sqlt_is_str(r->type) && !QR_SQL_IS_ARRAY(r->type))
        return sql_err_at(b->cx, loc, QR_ETYPE, "42809",
                          "op ANY/ALL (array) requires array on right side");
    if (QR_SQL_IS_ARRAY(r->type) && !comparable(l->type, QR_SQL_ELEM(r->type)))
        return sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883", "operator does not exist: %s %s %s",
                          qr_sql_type_name(l->type), opname, qr_sql_type_name(QR_SQL_ELEM(r->type)));
    SqlExpr *e = new_binary(b, SE_ANY_ARRAY, op, l, r, loc);
    if (!e)
        return b->cx->err->code;
    e->type = QR_SQL_BOOL;
    *out = e;
    return QR_OK;
}

/* a || b with an array on either side, a @> b, a <@ b, a && b. */
static int bind_array_op(SqlBind *b, const char *op, SqlExpr *l, SqlExpr *r, int loc,
                         SqlExpr **out)
{
    bool cat = !strcmp(op, "||");
    QrSqlType at = QR_SQL_IS_ARRAY(l->type) ? l->type : r->type;
    int rc = QR_OK;
    if (cat && !QR_SQL_IS_ARRAY(l->type) && l->type != QR_SQL_UNKNOWN)
        rc = coerce_unknown(b, r, QR_SQL_ARRAY_OF(l->type)); /* x || '{...}' */
    else if (cat && !QR_SQL_IS_ARRAY(r->type) && r->type != QR_SQL_UNKNOWN)
        rc = coerce_unknown(b, l, QR_SQL_ARRAY_OF(r->type));
    else {
        rc = coerce_unknown(b, l, at);
        if (rc == QR_OK)
            rc = coerce_unknown(b, r, at);
    }
    if (rc)
        return rc;
    at = QR_SQL_IS_ARRAY(l->type) ? l->type : r->type;
    bool ok = QR_SQL_IS_ARRAY(l->type) && QR_SQL_IS_ARRAY(r->type)
                  ? comparable(l->type, r->type)
                  : cat && comparable(QR_SQL_ELEM(at), QR_SQL_IS_ARRAY(l->type) ? r->type : l->type);
    if (!ok)
        return sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883", "operator does not exist: %s %s %s",
                          qr_sql_type_name(l->type), op, qr_sql_type_name(r->type));
    /* the other side in the array's element type (int4[] || int8: int8[]
     * in PostgreSQL; here the array's own type, widened for numbers) */
    if (QR_SQL_IS_ARRAY(l->type) && QR_SQL_IS_ARRAY(r->type) && l->type != r->type &&
        !(r = wrap_cast(b, r, l->type)))
        return b->cx->err->code;
    if (cat && !QR_SQL_IS_ARRAY(r->type) && r->type != QR_SQL_ELEM(at) &&
        !(r = wrap_cast(b, r, QR_SQL_ELEM(at))))
        return b->cx->err->code;
    if (cat && !QR_SQL_IS_ARRAY(l->type) && l->type != QR_SQL_ELEM(at) &&
        !(l = wrap_cast(b, l, QR_SQL_ELEM(at))))
        return b->cx->err->code;
    SqlExpr *e = new_binary(b, SE_ARRAY_OP,
                            cat ? '|' : !strcmp(op, "@>") ? SQLA_OP_CONTAINS
                            : !strcmp(op, "<@")           ? SQLA_OP_CONTAINED
                                                          : SQLA_OP_OVERLAP,
                            l, r, loc);
    if (!e)
        return b->cx->err->code;
    e->type = cat ? at : QR_SQL_BOOL;
    *out = e;
    return QR_OK;
}

/* json -> key / ->> key (text or integer), #> path / #>> path (text[]). */
static int bind_json_op(SqlBind *b, const char *op, SqlExpr *l, SqlExpr *r, int loc,
                        SqlExpr **out)
{
    bool path = op[0] == '#', text = !strcmp(op, "->>") || !strcmp(op, "#>>");
    int rc = coerce_unknown(b, l, QR_SQL_JSONB);
    if (rc == QR_OK)
        rc = coerce_unknown(b, r, path ? QR_SQL_ARRAY_OF(QR_SQL_TEXT) : QR_SQL_TEXT);
    if (rc)
        return rc;
    bool key_ok = path ? QR_SQL_IS_ARRAY(r->type) || sqlt_is_str(r->type)
                       : sqlt_is_str(r->type) || sqlt_is_int(r->type);
    if ((l->type != QR_SQL_JSON && l->type != QR_SQL_JSONB) || !key_ok)
        return sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883", "operator does not exist: %s %s %s",
                          qr_sql_type_name(l->type), op, qr_sql_type_name(r->type));
    SqlExpr *e = new_binary(b, SE_JSON_OP,
                            path ? (text ? SQLJS_PATH_TEXT : SQLJS_PATH)
                                 : (text ? SQLJS_GET_TEXT : SQLJS_GET),
                            l, r, loc);
    if (!e)
        return b->cx->err->code;
    e->type = text ? QR_SQL_TEXT : l->type;
    e->name = "?column?";
    *out = e;
    return QR_OK;
}

static int bind_aexpr(SqlBind *b, const cJSON *ae, int loc, SqlExpr **out)
{
    const char *kind = sqlj_str(ae, "kind");
    const char *op = sqlj_last_name(sqlj_get(ae, "name"));
    if (!kind || !op)
        return sql_err_at(b->cx, loc, QR_ESYNTAX, "42601", "bad expression");
    if (!strcmp(kind, "AEXPR_IN"))
        return bind_in(b, ae, loc, strcmp(op, "<>") == 0, out);
    if (!strcmp(kind, "AEXPR_OP_ANY") || !strcmp(kind, "AEXPR_OP_ALL")) {
        bool all = !strcmp(kind, "AEXPR_OP_ALL");
        int c = cmp_op(op);
        if (c < 0)
            return sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000",
                              "operator %s %s (array) is not supported", op, all ? "ALL" : "ANY");
        const cJSON *arr = sqlj_is(sqlj_get(ae, "rexpr"), "A_ArrayExpr");
        if (arr && c == SQL_CMP_EQ && !all) /* x = ANY (ARRAY[a, b]) is x IN (a, b): psycopg2's lists */
            return bind_in_list(b, sqlj_get(ae, "lexpr"), sqlj_get(arr, "elements"), loc, false,
                                out);
        return bind_any(b, sqlj_get(ae, "lexpr"), sqlj_get(ae, "rexpr"), c + (all ? 8 : 0), op,
                        loc, out);
    }
    if (!strcmp(kind, "AEXPR_OP") && !strcmp(op, "@@"))
        return bind_match(b, sqlj_get(ae, "lexpr"), sqlj_get(ae, "rexpr"), loc, out);
    if (!strcmp(kind, "AEXPR_BETWEEN") || !strcmp(kind, "AEXPR_NOT_BETWEEN")) {
        const cJSON *r = sqlj_list(sqlj_get(ae, "rexpr"));
        SqlExpr *x, *lo, *hi, *c1, *c2;
        int rc;
        if ((rc = sql_expr_bind(b, sqlj_get(ae, "lexpr"), &x)) ||
            (rc = sql_expr_bind(b, cJSON_GetArrayItem(r, 0), &lo)) ||
            (rc = sql_expr_bind(b, cJSON_GetArrayItem(r, 1), &hi)) ||
            (rc = bind_cmp(b, SQL_CMP_GE, x, lo, loc, &c1)) ||
            (rc = bind_cmp(b, SQL_CMP_LE, x, hi, loc, &c2)))
            return rc;
        SqlExpr *e = new_expr(b, SE_AND, loc);
        if (!e || set_args(b, e, 2))
            return b->cx->err->code;
        e->args[0] = c1;
        e->args[1] = c2;
        e->type = QR_SQL_BOOL;
        if (!strcmp(kind, "AEXPR_NOT_BETWEEN")) {
            SqlExpr *n = new_expr(b, SE_NOT, loc);
            if (!n || set_args(b, n, 1))
                return b->cx->err->code;
            n->args[0] = e;
            n->type = QR_SQL_BOOL;
            e = n;
        }
        *out = e;
        return QR_OK;
    }
    if (!strcmp(kind, "AEXPR_NULLIF")) {
        SqlExpr *l, *r;
        int rc;
        if ((rc = sql_expr_bind(b, sqlj_get(ae, "lexpr"), &l)) ||
            (rc = sql_expr_bind(b, sqlj_get(ae, "rexpr"), &r)))
            return rc;
        QrSqlType t;
        if ((rc = unify(b, &l, &r, loc, &t)))
            return rc;
        SqlExpr *e = new_expr(b, SE_NULLIF, loc);
        if (!e || set_args(b, e, 2))
            return b->cx->err->code;
        e->args[0] = l;
        e->args[1] = r;
        e->type = l->type;
        *out = e;
        return QR_OK;
    }
    bool is_regex = !strcmp(kind, "AEXPR_OP") && (!strcmp(op, "~") || !strcmp(op, "!~") ||
                                                  !strcmp(op, "~*") || !strcmp(op, "!~*"));
    if (!strcmp(kind, "AEXPR_LIKE") || !strcmp(kind, "AEXPR_ILIKE") || is_regex) {
        SqlExpr *l, *r;
        int rc;
        if ((rc = sql_expr_bind(b, sqlj_get(ae, "lexpr"), &l)) ||
            (rc = sql_expr_bind(b, sqlj_get(ae, "rexpr"), &r)))
            return rc;
        coerce_unknown(b, l, QR_SQL_TEXT);
        coerce_unknown(b, r, QR_SQL_TEXT);
        if (!sqlt_is_str(l->type) || !sqlt_is_str(r->type))
            return sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883", "operator does not exist: %s %s %s",
                              qr_sql_type_name(l->type), op, qr_sql_type_name(r->type));
        SqlExpr *e = new_expr(b, SE_LIKE, loc);
        if (!e || set_args(b, e, 2))
            return b->cx->err->code;
        e->args[0] = l;
        e->args[1] = r;
        if (is_regex) /* POSIX regular expressions: 4 regex | 1 case-insensitive | 2 NOT */
            e->op = 4 | (strchr(op, '*') ? 1 : 0) | (op[0] == '!' ? 2 : 0);
        else
            e->op = (kind[6] == 'I' ? 1 : 0) | (op[0] == '!' ? 2 : 0);
        e->type = QR_SQL_BOOL;
        *out = e;
        return QR_OK;
    }
    if (!strcmp(kind, "AEXPR_DISTINCT") || !strcmp(kind, "AEXPR_NOT_DISTINCT")) {
        SqlExpr *l, *r, *e;
        int rc;
        if ((rc = sql_expr_bind(b, sqlj_get(ae, "lexpr"), &l)) ||
            (rc = sql_expr_bind(b, sqlj_get(ae, "rexpr"), &r)) ||
            (rc = bind_cmp(b, SQL_CMP_EQ, l, r, loc, &e)))
            return rc;
        /* IS NOT DISTINCT FROM (null-safe =) / IS DISTINCT FROM */
        e->op = !strcmp(kind, "AEXPR_NOT_DISTINCT") ? 100 : 101;
        *out = e;
        return QR_OK;
    }
    if (strcmp(kind, "AEXPR_OP") != 0)
        return sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000", "%s expressions are not supported",
                          kind + 6);
    const cJSON *lx = sqlj_get(ae, "lexpr"), *rx = sqlj_get(ae, "rexpr");
    SqlExpr *l = NULL, *r = NULL;
    int rc;
    if (lx && (rc = sql_expr_bind(b, lx, &l)))
        return rc;
    if ((rc = sql_expr_bind(b, rx, &r)))
        return rc;
    if (!l) { /* unary */
        if (!strcmp(op, "+"))
            return *out = r, QR_OK;
        if (strcmp(op, "-") != 0)
            return sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883", "operator does not exist: %s %s",
                              op, qr_sql_type_name(r->type));
        coerce_unknown(b, r, QR_SQL_FLOAT8);
        if (!sqlt_is_num(r->type) && r->type != QR_SQL_INTERVAL)
            return sql_err_at(b->cx, loc, QR_ENOTFOUND, "42883", "operator does not exist: - %s",
                              qr_sql_type_name(r->type));
        if (r->kind == SE_CONST && r->type == QR_SQL_NUMERIC && !r->val.is_null)
            return (rc = sqln_neg(b->cx, &r->val, &r->val)) ? rc : (*out = r, QR_OK);
        if (r->kind == SE_CONST && sqlt_is_float(r->type) && r->type != QR_SQL_NUMERIC) {
            r->val.u.f = -r->val.u.f;
            return *out = r, QR_OK;
        }
        SqlExpr *e = new_expr(b, SE_NEG, loc);
        if (!e || set_args(b, e, 1))
            return b->cx->err->code;
        e->args[0] = r;
        e->type = r->type;
        *out = e;
        return QR_OK;
    }
    if (!strcmp(op, "->") || !strcmp(op, "->>") || !strcmp(op, "#>") || !strcmp(op, "#>>"))
        return bind_json_op(b, op, l, r, loc, out);
    bool arr_op = !strcmp(op, "@>") || !strcmp(op, "<@") || !strcmp(op, "&&");
    if (arr_op || (!strcmp(op, "||") && (QR_SQL_IS_ARRAY(l->type) || QR_SQL_IS_ARRAY(r->type))))
        return bind_array_op(b, op, l, r, loc, out);
    int c = cmp_op(op);
    if (c >= 0)
        return bind_cmp(b, c, l, r, loc, out);
    return bind_arith(b, op, l, r, loc, out);
}

static int bind_const(SqlBind *b, const cJSON *ac, int loc, SqlExpr **out)
{
    SqlExpr *e = new_expr(b, SE_CONST, loc);
    if (!e)
        return b->cx->err->code;
    const cJSON *v;
    if (sqlj_bool(ac, "isnull")) {
        e->val = sqlv_null();
        e->type = QR_SQL_UNKNOWN;
    } else if ((v = sqlj_get(ac, "ival"))) {
        int64_t iv = sqlj_int(v, "ival", 0);
        /* libpg_query's JSON prints a negative ival as {}: read the literal back
         * from the statement text (loc points at its sign) */
        if (!sqlj_get(v, "ival") && loc >= 0 && b->cx->sql && (size_t)loc < b->cx->sql_len) {
            const char *p = b->cx->sql + loc;
            bool neg = false;
            while (*p == '-' || *p == ' ' || *p == '\t' || *p == '\n' || *p == '(')
                neg ^= *p++ == '-';
            iv = 0;
            while (*p >= '0' && *p <= '9')
                iv = iv * 10 + (*p++ - '0');
            if (neg)
                iv = -iv;
        }
        e->val = sqlv_int(iv);
        e->val.type = e->type = QR_SQL_INT4;
    } else if ((v = sqlj_get(ac, "fval"))) {
        const char *s = sqlj_str(v, "fval");
        /* integers too large for int4 come as fval */
        int64_t i;
        char *end;
        long long ll = strtoll(s ? s : "0", &end, 10);
        if (s && *end == 0 && strchr(s, '.') == NULL) {
            i = ll;
            e->val = sqlv_int(i);
            e->type = QR_SQL_INT8;
            if (strlen(s) > 18) { /* check range exactly */
                SqlValue t = sqlv_text(s, strlen(s)), o;
                int rc = sqlv_cast(b->cx, &t, QR_SQL_INT8, loc, &o);
                if (rc) {
                    /* beyond int8: a numeric literal */
                    qr_error_clear(b->cx->err);
                    if ((rc = sqln_in(b->cx, s, strlen(s), loc, &e->val)))
                        return rc;
                    e->type = QR_SQL_NUMERIC;
                }
            }
        } else { /* 1.50: the numeric its digits say, as PostgreSQL types it */
            int rc = sqln_in(b->cx, s ? s : "0", s ? strlen(s) : 1, loc, &e->val);
            if (rc)
                return rc;
            e->type = QR_SQL_NUMERIC;
        }
    } else if ((v = sqlj_get(ac, "sval"))) {
        const char *s0 = sqlj_str(v, "sval");
        /* copied: results outlive the statement's parse tree */
        char *s = qr_arena_strndup(b->cx->arena, s0 ? s0 : "", s0 ? strlen(s0) : 0);
        if (!s)
            return nomem(b->cx);
        e->val = sqlv_text(s, strlen(s));
        e->val.type = e->type = QR_SQL_UNKNOWN;
    } else if ((v = sqlj_get(ac, "boolval"))) {
        e->val = sqlv_bool(sqlj_bool(v, "boolval"));
        e->type = QR_SQL_BOOL;
    } else if ((v = sqlj_get(ac, "bsval"))) {
        return sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000", "bit string constants are not supported");
    } else {
        /* {"ival": {}} for 0 */
        e->val = sqlv_int(0);
        e->val.type = e->type = QR_SQL_INT4;
    }
    e->name = "?column?";
    *out = e;
    return QR_OK;
}

/* The reg* type a cast names: 'c' regclass, 't' regtype, 'n' regnamespace,
 * 'p' regproc / regprocedure, 'r' regrole; 0 for another type. */
static char reg_kind(const char *name)
{
    return !name                            ? 0
           : !strcmp(name, "regclass")      ? 'c'
           : !strcmp(name, "regtype")       ? 't'
           : !strcmp(name, "regnamespace")  ? 'n'
           : !strcmp(name, "regproc") || !strcmp(name, "regprocedure") ? 'p'
           : !strcmp(name, "regrole")       ? 'r'
                                            : 0;
}

static int bind_cast(SqlBind *b, const cJSON *tc, int loc, SqlExpr **out)
{
    const cJSON *tn = sqlj_get(tc, "typeName");
    const char *name = sqlj_last_name(sqlj_get(tn, "names"));
    QrSqlType t;
    /* reg* casts: an object's name to its oid (op 'c' / 't' / 'n'), and
     * such an oid back to the name when cast to text (op 'C' / 'T' / 'N') */
    char reg = reg_kind(name);
    if (reg && sqlj_get(tn, "arrayBounds")) {
        /* ::regtype[] (psql, pgcli on pg_proc's argument types): the names,
         * as PostgreSQL prints a regtype[] ({integer,text}), in a text[] */
        SqlExpr *a, *e;
        int rc = sql_expr_bind(b, sqlj_get(tc, "arg"), &a);
        if (rc)
            return rc;
        coerce_unknown(b, a, QR_SQL_TEXT);
        if (!(e = new_expr(b, SE_CAST, loc)) || set_args(b, e, 1))
            return b->cx->err->code;
        e->args[0] = a;
        e->type = QR_SQL_ARRAY_OF(QR_SQL_TEXT);
        e->op = 'V';
        e->name = name;
        *out = e;
        return QR_OK;
    }
    if (reg) {
        SqlExpr *a, *e;
        int rc = sql_expr_bind(b, sqlj_get(tc, "arg"), &a);
        if (rc)
            return rc;
        coerce_unknown(b, a, QR_SQL_TEXT);
        if (!sqlt_is_str(a->type) && !sqlt_is_int(a->type))
            return sql_err_at(b->cx, loc, QR_ETYPE, "42846", "cannot cast type %s to %s",
                              qr_sql_type_name(a->type), name);
        if (!(e = new_expr(b, SE_CAST, loc)) || set_args(b, e, 1))
            return b->cx->err->code;
        e->args[0] = a;
        /* regproc is its name: Quarry's functions have no oids of their own
         * beyond the catalog's (typinput = 'array_in'::regproc compares names) */
        e->type = reg == 'p' ? QR_SQL_TEXT : QR_SQL_OID;
        e->op = reg;
        e->name = name;
        *out = e;
        return QR_OK;
    }
    if (name && sqlt_from_name(name, &t) && sqlt_is_str(t)) {
        const cJSON *arg = sqlj_get(tc, "arg");
        const cJSON *inner = sqlj_is(arg, "TypeCast");
        const char *iname = inner ? sqlj_last_name(sqlj_get(sqlj_get(inner, "typeName"), "names"))
                                  : NULL;
        if (iname && (!strcmp(iname, "regclass") || !strcmp(iname, "regtype") ||
                      !strcmp(iname, "regnamespace") || !strcmp(iname, "regproc") ||
                      !strcmp(iname, "regprocedure") || !strcmp(iname, "regrole"))) {
            SqlExpr *a, *e;
            int rc = sql_expr_bind(b, arg, &a);
            if (rc)
                return rc;
            if (!(e = new_expr(b, SE_CAST, loc)) || set_args(b, e, 1))
                return b->cx->err->code;
            e->args[0] = a;
            e->type = t;
            e->op = a->op - 'a' + 'A';
            e->name = name;
            *out = e;
            return QR_OK;
        }
    }
    if (!name || !sqlt_from_name(name, &t))
        return sql_err_at(b->cx, sqlj_loc(tn), QR_ENOTFOUND, "42704", "type \"%s\" does not exist",
                          name ? name : "?");
    if (sqlj_get(tn, "arrayBounds")) { /* ::int4[] (any number of [] is one array type) */
        if (QR_SQL_IS_ARRAY(t))
            return sql_err_at(b->cx, sqlj_loc(tn), QR_ENOTFOUND, "42704",
                              "type \"%s[]\" does not exist", name);
        t = QR_SQL_ARRAY_OF(t);
    }
    SqlExpr *a;
    int32_t typmod = -1; /* numeric(p, s) */
    int rc;
    if (t == QR_SQL_NUMERIC && (rc = sqln_typmod_of(b->cx, sqlj_get(tn, "typmods"), sqlj_loc(tn), &typmod)))
        return rc;
    if ((rc = sql_expr_bind(b, sqlj_get(tc, "arg"), &a)))
        return rc;
    if (a->kind == SE_PARAM && b->cx->param_types[a->col] == QR_SQL_UNKNOWN && typmod < 0) {
        coerce_unknown(b, a, t);
        *out = a;
        return QR_OK;
    }
    if (a->kind == SE_CONST) {
        SqlValue v;
        if ((rc = sqlv_cast(b->cx, &a->val, t, loc, &v)) ||
            (typmod >= 0 && (rc = sqln_typmod(b->cx, &v, typmod, loc, &v))))
            return rc;
        a->val = v;
        a->type = t;
        *out = a;
        return QR_OK;
    }
    SqlExpr *e = new_expr(b, SE_CAST, loc);
    if (!e || set_args(b, e, 1))
        return b->cx->err->code;
    e->args[0] = a;
    e->type = t;
    e->typmod = typmod;
    e->name = a->kind == SE_COL ? a->name : name;
    *out = e;
    return QR_OK;
}

/* The place of a number type in PostgreSQL's implicit widening. */
static int num_rank(QrSqlType t)
{
    return t == QR_SQL_FLOAT8 ? 5 : t == QR_SQL_FLOAT4 ? 4 : t == QR_SQL_NUMERIC ? 3
           : t == QR_SQL_INT8 ? 2 : t == QR_SQL_INT2 ? 0 : 1;
}

/* The common type of several expressions (CASE results, COALESCE,
 * GREATEST...): the first typed one, widened across numbers; untyped
 * literals take it, others are cast to it.  `what` names the construct. */
static int resolve_common(SqlBind *b, SqlExpr ***items, int n, const char *what, QrSqlType *out)
{
    QrSqlType rt = QR_SQL_UNKNOWN;
    for (int i = 0; i < n; i++) {
        QrSqlType t = (*items[i])->type;
        if (t == QR_SQL_UNKNOWN)
            continue;
        if (rt == QR_SQL_UNKNOWN)
            rt = t;
        else if (sqlt_is_num(rt) && sqlt_is_num(t) && rt != t) /* int < numeric < float */
            rt = num_rank(t) > num_rank(rt) ? t : rt;
    }
    if (rt == QR_SQL_UNKNOWN)
        rt = QR_SQL_TEXT;
    for (int i = 0; i < n; i++) {
        int rc = coerce_unknown(b, *items[i], rt);
        if (rc)
            return rc;
        QrSqlType t = (*items[i])->type;
        if (t == rt)
            continue;
        if (!(sqlt_is_num(rt) && sqlt_is_num(t)) && !(sqlt_is_str(rt) && sqlt_is_str(t)) &&
            !(sqlt_is_datetime(rt) && sqlt_is_datetime(t)))
            return sql_err_at(b->cx, (*items[i])->loc, QR_ETYPE, "42804",
                              "%s types %s and %s cannot be matched", what, qr_sql_type_name(rt),
                              qr_sql_type_name(t));
        if (!(*items[i] = wrap_cast(b, *items[i], rt)))
            return b->cx->err->code;
    }
    *out = rt;
    return QR_OK;
}

static int bind_case(SqlBind *b, const cJSON *ce, int loc, SqlExpr **out)
{
    const cJSON *arg = sqlj_get(ce, "arg"), *whens = sqlj_get(ce, "args"),
                *def = sqlj_get(ce, "defresult");
    int nw = cJSON_GetArraySize(whens);
    SqlExpr *e = new_expr(b, SE_CASE, loc);
    if (!e || set_args(b, e, (arg ? 1 : 0) + 2 * nw + (def ? 1 : 0)))
        return b->cx->err->code;
    e->case_has_arg = arg != NULL;
    e->case_has_else = def != NULL;
    int k = 0, rc;
    if (arg && (rc = sql_expr_bind(b, arg, &e->args[k++])))
        return rc;
    const cJSON *w;
    QrSqlType rt = QR_SQL_UNKNOWN;
    int first_res = k + 1;
    cJSON_ArrayForEach(w, whens)
    {
        const cJSON *cw = sqlj_is(w, "CaseWhen");
        if ((rc = sql_expr_bind(b, sqlj_get(cw, "expr"), &e->args[k])))
            return rc;
        if (arg) {
            QrSqlType t;
            if ((rc = unify(b, &e->args[0], &e->args[k], e->args[k]->loc, &t)))
                return rc;
        } else {
            coerce_unknown(b, e->args[k], QR_SQL_BOOL);
            if (e->args[k]->type != QR_SQL_BOOL)
                return sql_err_at(b->cx, e->args[k]->loc, QR_ETYPE, "42804",
                                  "argument of CASE/WHEN must be type boolean, not type %s",
                                  qr_sql_type_name(e->args[k]->type));
        }
        k++;
        if ((rc = sql_expr_bind(b, sqlj_get(cw, "result"), &e->args[k++])))
            return rc;
    }
    if (def && (rc = sql_expr_bind(b, def, &e->args[k++])))
        return rc;
    /* result type: the first typed result; others coerced (the list is in
     * the arena: this frame is on the stack once per level of nested CASE) */
    int n_res = 0;
    SqlExpr ***res = qr_arena_alloc(b->cx->arena, (size_t)(nw + 1) * sizeof *res);
    if (!res)
        return nomem(b->cx);
    for (int i = first_res; i < (arg ? 1 : 0) + 2 * nw; i += 2)
        res[n_res++] = &e->args[i];
    if (def)
        res[n_res++] = &e->args[k - 1];
    if ((rc = resolve_common(b, res, n_res, "CASE", &rt)))
        return rc;
    e->type = rt;
    e->name = "case";
    *out = e;
    return QR_OK;
}

/* COALESCE / GREATEST / LEAST: common type of all arguments */
static int bind_variadic(SqlBind *b, const cJSON *list, SqlExprKind k, int loc, const char *name,
                         SqlExpr **out)
{
    SqlExpr *e;
    int rc = bind_list(b, list, NULL, &e, k);
    if (rc)
        return rc;
    SqlExpr ***items = qr_arena_alloc(b->cx->arena, (size_t)(e->n_args + 1) * sizeof *items);
    if (!items)
        return nomem(b->cx);
    for (int i = 0; i < e->n_args; i++)
        items[i] = &e->args[i];
    QrSqlType rt;
    if ((rc = resolve_common(b, items, e->n_args, name, &rt)))
        return rc;
    e->type = rt;
    e->loc = loc;
    e->name = name;
    *out = e;
    return QR_OK;
}

/* ---- subqueries ---- */

typedef enum SubqKind { SQ_EXPR, SQ_EXISTS, SQ_ANY, SQ_ARRAY } SubqKind;

#define SUBQ_MAX_KEYS 32
#define SUBQ_CACHE_BYTES (64u << 20)

/* One cached run of a correlated subquery: the key values, then the
 * result, strings copied after them (one qr_malloc block). */
typedef struct SubqEnt {
    uint64_t hash;
    struct SubqEnt *next;  /* chain */
    SqlValue vals[];       /* n_args keys, then the result */
} SubqEnt;

/* A correlated subquery: run again for each distinct set of the outer
 * values it reads (the SE_SUBQ's args), the result kept per set. */
struct SqlSubq {
    struct SqlQuery *query; /* the bound subquery (plan/plan.h) */
    SubqKind kind;
    bool correlated;       /* reads columns of enclosing queries (else it runs once per
                              execution, when first needed) */
    QrSqlType col_type;    /* the subquery's (one) column */
    const SqlScope *scope; /* the enclosing query's scope: the subquery's outer */
    int level;             /* the subquery's level (SqlCtx.sub_level while it runs) */
    bool cache;            /* listed on a SqlBind.live: results are cached */
    uint64_t runs;
    SubqEnt **slots;       /* owns (qr_malloc), cap slots; entries owned too */
    uint64_t cap, n;
    size_t bytes;
    SqlValueSet set;       /* uncorrelated x IN (subquery): the rows, sorted (run time) */
    bool set_ready;
    int refs_here;         /* references to columns of the query it sits in (occurrences) */
    bool refs_far;         /* ... and to queries further out */
    SqlSubq *next;         /* SqlBind.live list */
};

void sql_subq_info(const SqlSubq *q, SqlSubqInfo *out)
{
    out->query = q->query;
    out->kind = q->kind == SQ_EXISTS ? 'e' : q->kind == SQ_ANY ? 'a' : q->kind == SQ_EXPR ? 'x' : 'r';
    out->refs_here = q->refs_here;
    out->refs_far = q->refs_far;
}

void sql_subq_free_all(SqlSubq *list)
{
    for (SqlSubq *q = list; q; q = q->next) {
        for (uint64_t i = 0; i < q->cap; i++)
            for (SubqEnt *e = q->slots[i], *nx; e; e = nx) {
                nx = e->next;
                qr_free(e);
            }
        qr_free(q->slots);
        q->slots = NULL;
        q->cap = q->n = 0;
        q->bytes = 0;
        q->runs = 0;
        q->set_ready = false;
        memset(&q->set, 0, sizeof q->set);
    }
}

/* A heap copy of n values (strings copied into the same block). */
static SubqEnt *subq_ent_new(const SqlValue *v, int n, size_t *bytes)
{
    size_t sz = sizeof(SubqEnt) + (size_t)n * sizeof(SqlValue);
    for (int i = 0; i < n; i++)
        if (!v[i].is_null && sqlt_has_bytes(v[i].type))
            sz += v[i].u.s.n + 1;
    SubqEnt *e = qr_malloc(sz);
    if (!e)
        return NULL;
    char *p = (char *)&e->vals[n];
    for (int i = 0; i < n; i++) {
        e->vals[i] = v[i];
        if (!v[i].is_null && sqlt_has_bytes(v[i].type)) {
            if (v[i].u.s.n)
                memcpy(p, v[i].u.s.s, v[i].u.s.n);
            p[v[i].u.s.n] = 0;
            e->vals[i].u.s.s = p;
            p += v[i].u.s.n + 1;
        }
    }
    e->next = NULL;
    *bytes = sz;
    return e;
}

static bool subq_cache_put(SqlSubq *q, SubqEnt *e, size_t bytes)
{
    if (q->bytes + bytes > SUBQ_CACHE_BYTES)
        return false;
    if (q->n >= q->cap) {
        uint64_t nc = q->cap ? q->cap * 4 : 64;
        SubqEnt **ns = qr_calloc(nc, sizeof *ns);
        if (!ns)
            return false;
        for (uint64_t i = 0; i < q->cap; i++)
            for (SubqEnt *x = q->slots[i], *nx; x; x = nx) {
                nx = x->next;
                x->next = ns[x->hash & (nc - 1)];
                ns[x->hash & (nc - 1)] = x;
            }
        qr_free(q->slots);
        q->slots = ns;
        q->cap = nc;
    }
    e->next = q->slots[e->hash & (q->cap - 1)];
    q->slots[e->hash & (q->cap - 1)] = e;
    q->n++;
    q->bytes += bytes;
    return true;
}

/* The value a subquery's rows give: its one value (EXPR), whether it has
 * rows (EXISTS), x = ANY (rows), or the rows as an array's text (ARRAY). */
static int subq_value(SqlCtx *cx, SubqKind kind, const QrSqlResult *r, const SqlValue *x,
                      int loc, SqlValue *out)
{
    switch (kind) {
    case SQ_EXISTS:
        *out = sqlv_bool(r->n_rows > 0);
        return QR_OK;
    case SQ_EXPR:
        if (r->n_rows > 1)
            return sql_err_at(cx, loc, QR_EINVAL, "21000",
                              "more than one row returned by a subquery used as an expression");
        *out = r->n_rows ? r->vals[0] : sqlv_null();
        if (out->is_null)
            out->type = r->cols[0].type;
        return QR_OK;
    case SQ_ARRAY:
        if (QR_SQL_IS_ARRAY(r->cols[0].type))
            return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000",
                              "ARRAY(subquery) of arrays is not supported");
        return sqla_list(cx, r->cols[0].type == QR_SQL_UNKNOWN ? QR_SQL_TEXT : r->cols[0].type,
                         r->vals, r->n_rows, out);
    case SQ_ANY: {
        bool has_null = false;
        *out = sqlv_bool(false);
        for (uint64_t i = 0; i < r->n_rows; i++) {
            if (x->is_null || r->vals[i].is_null)
                has_null = true;
            else if (sqlv_cmp(x, &r->vals[i]) == 0)
                return *out = sqlv_bool(true), QR_OK;
        }
        out->is_null = has_null;
        return QR_OK;
    }
    }
    return QR_OK;
}

/* Bind a subquery whose outer query is `scope` at level `level - 1`: its
 * outer references are added to cx->refs (the caller keeps or drops them). */
static int subq_bind(SqlCtx *cx, const cJSON *sub, const SqlScope *scope, int level,
                     struct SqlQuery **q, QrSqlColumn **cols, int *n_cols)
{
    const SqlScope *saved_outer = cx->outer_scope;
    int saved_level = cx->sub_level;
    cx->outer_scope = scope;
    cx->sub_level = level;
    cx->depth++;
    int rc = sql_query_bind(cx, sub, q, cols, n_cols);
    cx->depth--;
    cx->outer_scope = saved_outer;
    cx->sub_level = saved_level;
    return rc;
}

/* Run a bound subquery (its outer row, if any, is on cx->frames). */
static int subq_exec(SqlCtx *cx, SqlSubq *q, QrSqlResult *r)
{
    int saved_level = cx->sub_level;
    cx->sub_level = q->level;
    cx->depth++;
    memset(r, 0, sizeof *r);
    r->arena = cx->arena;
    int rc = sql_query_run_bound(cx, q->query, r);
    cx->depth--;
    cx->sub_level = saved_level;
    return rc;
}

static int bind_sublink(SqlBind *b, const cJSON *sl, int loc, SqlExpr **out)
{
    SqlCtx *cx = b->cx;
    const char *type = sqlj_str(sl, "subLinkType");
    const cJSON *sub = sqlj_get(sl, "subselect");
    SubqKind kind;
    if (type && !strcmp(type, "ANY_SUBLINK"))
        kind = SQ_ANY;
    else if (type && !strcmp(type, "EXPR_SUBLINK"))
        kind = SQ_EXPR;
    else if (type && !strcmp(type, "EXISTS_SUBLINK"))
        kind = SQ_EXISTS;
    else if (type && !strcmp(type, "ARRAY_SUBLINK"))
        kind = SQ_ARRAY;
    else
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "%s subqueries are not supported",
                          type ? type : "these");
    if (kind == SQ_ANY) {
        const char *op = sqlj_last_name(sqlj_get(sl, "operName"));
        if (op && strcmp(op, "=") != 0)
            return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000",
                              "%s ANY (subquery) is not supported", op);
    }
    /* the subquery's outer scope is this query's (an empty one where this
     * expression has no columns: VALUES, LIMIT) */
    SqlScope *mine = (SqlScope *)b->scope;
    if (!mine) {
        if (!(mine = qr_arena_calloc(cx->arena, sizeof *mine)))
            return nomem(cx);
        mine->outer = cx->outer_scope;
    }
    int L = cx->sub_level, ref0 = cx->n_refs;
    /* bind it once, learning its columns and whether it reads columns of
     * this query or of queries further out */
    struct SqlQuery *bound;
    QrSqlColumn *rcols;
    int rn;
    int rc = subq_bind(cx, sub, mine, L + 1, &bound, &rcols, &rn);
    if (rc)
        return rc;
    if (kind != SQ_EXISTS && rn != 1)
        return sql_err_at(cx, loc, QR_ESYNTAX, "42601", "subquery must return only one column");
    int k = ref0, refs_here = 0;
    bool refs_far = false;
    for (int i = ref0; i < cx->n_refs; i++)
        if (cx->refs[i].level <= L) {
            refs_here += cx->refs[i].level == L;
            refs_far |= cx->refs[i].level < L;
            cx->refs[k++] = cx->refs[i];
        }
    cx->n_refs = k; /* the references out of this query stay for its own outer query */
    QrSqlType ct = kind == SQ_EXISTS ? QR_SQL_BOOL : rcols[0].type;
    SqlSubq *q = qr_arena_calloc(cx->arena, sizeof *q);
    if (!q)
        return nomem(cx);
    q->query = bound;
    q->kind = kind;
    q->col_type = ct;
    q->scope = mine;
    q->level = L + 1;
    q->correlated = k > ref0;
    q->refs_here = refs_here;
    q->refs_far = refs_far;
    /* run-time state (caches, the IN set) is reset with the query's */
    if (b->live) {
        q->cache = true;
        q->next = *b->live;
        *b->live = q;
    }
    if (k == ref0 && kind == SQ_ANY) {
        /* uncorrelated x IN (subquery): its rows as a sorted set, made when
         * first needed in each execution */
        SqlExpr *x;
        if ((rc = sql_expr_bind(b, sqlj_get(sl, "testexpr"), &x)))
            return rc;
        coerce_unknown(b, x, ct);
        SqlExpr *e = new_expr(b, SE_IN_SET, loc);
        if (!e || set_args(b, e, 1))
            return nomem(cx);
        e->args[0] = x;
        e->subq = q;
        e->type = QR_SQL_BOOL;
        *out = e;
        return QR_OK;
    }
    /* correlated: the outer values it reads become its arguments (and its
     * cache key); it runs per row (sql_expr_eval) */
    int n_keys = 0;
    for (int i = ref0; i < k; i++) {
        bool dup = false;
        for (int j = ref0; j < i && !dup; j++)
            dup = cx->refs[j].level == cx->refs[i].level && cx->refs[j].col == cx->refs[i].col;
        n_keys += !dup;
    }
    if (n_keys > SUBQ_MAX_KEYS)
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000",
                          "a correlated subquery may read at most %d outer columns", SUBQ_MAX_KEYS);
    SqlExpr *e = new_expr(b, SE_SUBQ, loc);
    if (!e || set_args(b, e, n_keys + (kind == SQ_ANY)))
        return nomem(cx);
    int a = 0;
    for (int i = ref0; i < k; i++) {
        const SqlCorrRef *cr = &cx->refs[i];
        bool dup = false;
        for (int j = ref0; j < i && !dup; j++)
            dup = cx->refs[j].level == cr->level && cx->refs[j].col == cr->col;
        if (dup)
            continue;
        SqlExpr *x = new_expr(b, cr->level == L ? SE_COL : SE_OUTER, loc);
        if (!x)
            return cx->err->code;
        x->col = cr->col;
        x->op = L - cr->level;
        x->type = cr->type;
        x->name = cr->name;
        e->args[a++] = x;
    }
    if (kind == SQ_ANY) {
        if ((rc = sql_expr_bind(b, sqlj_get(sl, "testexpr"), &e->args[a])))
            return rc;
        coerce_unknown(b, e->args[a], ct);
    }
    e->subq = q;
    e->type = kind == SQ_EXPR ? (ct == QR_SQL_UNKNOWN ? QR_SQL_TEXT : ct)
              : kind == SQ_ARRAY ? QR_SQL_ARRAY_OF(ct == QR_SQL_UNKNOWN ? QR_SQL_TEXT : ct)
                                 : QR_SQL_BOOL;
    e->name = kind == SQ_EXPR ? rcols[0].name : kind == SQ_EXISTS ? "exists"
                                               : kind == SQ_ARRAY ? "array"
                                                                  : "?column?";
    *out = e;
    return QR_OK;
}

/* An uncorrelated x IN (subquery)'s rows, sorted, made once per execution
 * (reset with the query's other run-time state, sql_subq_free_all). */
static int subq_set(SqlCtx *cx, SqlSubq *q, const SqlValueSet **out)
{
    if (!q->set_ready) {
        struct SqlExplain *saved_ex = cx->ex;
        if (q->runs++)
            cx->ex = NULL; /* EXPLAIN shows the first run's plan */
        SqlFrame fr = {NULL, cx->frames};
        cx->frames = &fr;
        QrSqlResult r;
        /* the set lasts the execution: not in an operator's per-batch scratch */
        QrArena *saved_arena = cx->arena;
        if (cx->root_arena)
            cx->arena = cx->root_arena;
        int rc = subq_exec(cx, q, &r);
        cx->arena = saved_arena;
        cx->frames = fr.next;
        cx->ex = saved_ex;
        if (rc)
            return rc;
        memset(&q->set, 0, sizeof q->set);
        q->set.n = r.n_rows;
        q->set.vals = r.vals;
        for (uint64_t i = 0; i < r.n_rows; i++)
            if (r.vals[i].is_null)
                q->set.has_null = true;
        if (q->set.n > 1) /* sorted for binary search */
            sql_sort_values(q->set.vals, q->set.n);
        q->set_ready = true;
    }
    *out = &q->set;
    return QR_OK;
}

/* A correlated subquery for one outer row: from the cache, or run with the
 * row as its outer frame.  What the run allocates goes back to the arena;
 * the result lives in the cache entry (or is copied to the arena). */
static __attribute__((noinline)) int subq_eval(SqlCtx *cx, const SqlExpr *e, const SqlEvalRow *r,
                                                SqlValue *out)
{
    SqlSubq *q = e->subq;
    SqlValue kv[SUBQ_MAX_KEYS + 2];
    int n = e->n_args, rc;
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < n; i++) {
        if ((rc = sql_expr_eval(cx, e->args[i], r, &kv[i])))
            return rc;
        h = h * 31 + sqlv_hash(&kv[i]);
    }
    if (q->cache && q->cap)
        for (SubqEnt *x = q->slots[h & (q->cap - 1)]; x; x = x->next) {
            bool same = x->hash == h;
            for (int i = 0; i < n && same; i++)
                same = sqlv_same(&x->vals[i], &kv[i]);
            if (same) {
                *out = x->vals[n];
                return QR_OK;
            }
        }
    QrArenaMark m = qr_arena_mark(cx->arena);
    int notices = cx->res ? cx->res->n_notices : 0;
    SqlFrame fr = {q->correlated ? r->row : NULL, cx->frames};
    SqlCorrRef *saved_refs = cx->refs;
    int saved_cap = cx->cap_refs;
    struct SqlExplain *saved_ex = cx->ex;
    if (q->runs++)
        cx->ex = NULL; /* EXPLAIN shows the first run's plan */
    cx->frames = &fr;
    QrSqlResult res;
    rc = subq_exec(cx, q, &res);
    cx->frames = fr.next;
    cx->ex = saved_ex;
    cx->refs = saved_refs;
    cx->cap_refs = saved_cap;
    if (rc == QR_OK && q->kind != SQ_EXISTS && res.n_cols != 1)
        rc = sql_err_at(cx, e->loc, QR_ESYNTAX, "42601", "subquery must return only one column");
    if (rc == QR_OK)
        rc = subq_value(cx, q->kind, &res, q->kind == SQ_ANY ? &kv[n - 1] : NULL, e->loc, &kv[n]);
    if (rc)
        return rc;
    if (q->kind == SQ_EXPR && !kv[n].is_null && kv[n].type != e->type &&
        (rc = sqlv_cast(cx, &kv[n], e->type, e->loc, &kv[n])))
        return rc;
    size_t bytes;
    SubqEnt *x = subq_ent_new(kv, n + 1, &bytes);
    if (!x)
        return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    x->hash = h;
    if (!cx->res || cx->res->n_notices == notices)
        qr_arena_release(cx->arena, m);
    *out = x->vals[n];
    if (q->cache && subq_cache_put(q, x, bytes))
        return QR_OK;
    rc = sqlv_own(cx, out);
    qr_free(x);
    return rc;
}

/* arr[i][j] / arr[a:b][c:d]: SE_SUBSCRIPT.  PostgreSQL takes the whole
 * list as a slice when any subscript is one (arr[2][1:2] is arr[1:2][1:2]),
 * a missing lower bound of a plain subscript being 1.  A catalog array in
 * its text form is read as its column's element type. */
static int bind_subscript(SqlBind *b, const cJSON *ind, int loc, SqlExpr **out)
{
    const cJSON *subs = sqlj_get(ind, "indirection");
    const char *field = cJSON_GetArraySize(subs) == 1 ? sqlj_sval(cJSON_GetArrayItem(subs, 0)) : NULL;
    const cJSON *fc = sqlj_is(sqlj_get(ind, "arg"), "FuncCall");
    if (field && fc && sqlj_last_name(sqlj_get(fc, "funcname")) &&
        !strcmp(sqlj_last_name(sqlj_get(fc, "funcname")), "_pg_expandarray"))
        return bind_expandarray(b, fc, field, loc, out);
    if (field && !strcmp(field, "x") && sqlj_is(sqlj_get(ind, "arg"), "ColumnRef"))
        /* (keys).x of a column holding _pg_expandarray's x (JDBC getPrimaryKeys) */
        return sql_expr_bind(b, sqlj_get(ind, "arg"), out);
    int n = cJSON_GetArraySize(subs), rc;
    const cJSON *it;
    bool slice = false;
    cJSON_ArrayForEach(it, subs)
    {
        const cJSON *ix = sqlj_is(it, "A_Indices");
        if (!ix)
            return sql_err_at(b->cx, loc, QR_EUNSUPPORTED, "0A000",
                              "field selection (x).name is not supported");
        slice |= sqlj_bool(ix, "is_slice");
    }
    if (n > SQL_ARRAY_MAXDIM)
        return sql_err_at(b->cx, loc, QR_ELIMIT, "54000",
                          "number of array dimensions (%d) exceeds the maximum allowed (%d)", n,
                          SQL_ARRAY_MAXDIM);
    SqlExpr *e = new_expr(b, SE_SUBSCRIPT, loc);
    if (!e || set_args(b, e, 1 + 2 * n))
        return b->cx->err->code;
    if ((rc = sql_expr_bind(b, sqlj_get(ind, "arg"), &e->args[0])) ||
        (rc = coerce_unknown(b, e->args[0], QR_SQL_ARRAY_OF(QR_SQL_TEXT))))
        return rc;
    SqlExpr *arr = e->args[0];
    if (!QR_SQL_IS_ARRAY(arr->type) && !sqlt_is_str(arr->type))
        return sql_err_at(b->cx, loc, QR_ETYPE, "42804",
                          "cannot subscript type %s because it does not support subscripting",
                          qr_sql_type_name(arr->type));
    int k = 1;
    cJSON_ArrayForEach(it, subs)
    {
        const cJSON *ix = sqlj_is(it, "A_Indices");
        const cJSON *bounds[2] = {sqlj_get(ix, "lidx"), sqlj_get(ix, "uidx")};
        for (int j = 0; j < 2; j++, k++) {
            if (!bounds[j]) { /* omitted: a NULL the evaluation reads as "none" */
                if (!(e->args[k] = new_expr(b, SE_CONST, loc)))
                    return b->cx->err->code;
                e->args[k]->val = sqlv_null();
                e->args[k]->type = QR_SQL_UNKNOWN;
                if (j == 0 && slice && !sqlj_bool(ix, "is_slice")) { /* [i] in a slice: [1:i] */
                    e->args[k]->val = sqlv_int(1);
                    e->args[k]->type = e->args[k]->val.type = QR_SQL_INT4;
                }
                continue;
            }
            if ((rc = sql_expr_bind(b, bounds[j], &e->args[k])) ||
                (rc = coerce_unknown(b, e->args[k], QR_SQL_INT4)))
                return rc;
            if (!sqlt_is_int(e->args[k]->type))
                return sql_err_at(b->cx, e->args[k]->loc, QR_ETYPE, "42804",
                                  "array subscript must have type integer");
        }
    }
    QrSqlType el = QR_SQL_IS_ARRAY(arr->type) ? QR_SQL_ELEM(arr->type)
                   : arr->name                ? sqlcat_array_elem(arr->name)
                                              : QR_SQL_UNKNOWN;
    if (el == QR_SQL_UNKNOWN)
        el = QR_SQL_TEXT;
    e->op = slice;
    e->type = slice ? QR_SQL_ARRAY_OF(el) : el;
    e->name = arr->name;
    *out = e;
    return QR_OK;
}

/* ARRAY[a, b, ...]: the elements' common type; ARRAY[[1, 2], [3, 4]] (its
 * elements arrays themselves) is two-dimensional.  ARRAY[] needs a cast
 * to know its type (42P18 otherwise, as PostgreSQL). */
static int resolve_common(SqlBind *b, SqlExpr ***items, int n, const char *what, QrSqlType *out);

static int bind_array_expr(SqlBind *b, const cJSON *ae, int loc, SqlExpr **out)
{
    const cJSON *els = sqlj_get(ae, "elements");
    SqlExpr *e;
    int rc = bind_list(b, els, NULL, &e, SE_ARRAY);
    if (rc)
        return rc;
    e->loc = loc;
    e->name = "array";
    if (e->n_args == 0) {
        e->type = QR_SQL_ARRAY_OF(QR_SQL_UNKNOWN);
        *out = e;
        return QR_OK;
    }
    bool nested = false;
    for (int i = 0; i < e->n_args; i++)
        nested |= e->args[i]->kind == SE_ARRAY || QR_SQL_IS_ARRAY(e->args[i]->type);
    SqlExpr ***items = qr_arena_alloc(b->cx->arena, (size_t)e->n_args * sizeof *items);
    if (!items)
        return nomem(b->cx);
    for (int i = 0; i < e->n_args; i++)
        items[i] = &e->args[i];
    QrSqlType t;
    if (nested) { /* sub-arrays: their elements' common type (ARRAY[[1.5], [2]]) */
        QrSqlType et = QR_SQL_UNKNOWN;
        for (int i = 0; i < e->n_args; i++) {
            QrSqlType x = e->args[i]->type;
            if (!QR_SQL_IS_ARRAY(x))
                continue;
            x = QR_SQL_ELEM(x);
            if (et == QR_SQL_UNKNOWN || (sqlt_is_num(et) && sqlt_is_num(x) && !sqlt_is_float(et) &&
                                         (sqlt_is_float(x) || x == QR_SQL_INT8)))
                et = x;
        }
        for (int i = 0; et != QR_SQL_UNKNOWN && i < e->n_args; i++)
            if ((rc = coerce_unknown(b, e->args[i], QR_SQL_ARRAY_OF(et))) ||
                (QR_SQL_IS_ARRAY(e->args[i]->type) && e->args[i]->type != QR_SQL_ARRAY_OF(et) &&
                 comparable(e->args[i]->type, QR_SQL_ARRAY_OF(et)) &&
                 !(e->args[i] = wrap_cast(b, e->args[i], QR_SQL_ARRAY_OF(et)))))
                return rc ? rc : (int)b->cx->err->code;
    }
    if ((rc = resolve_common(b, items, e->n_args, "ARRAY", &t)))
        return rc;
    if (nested && !QR_SQL_IS_ARRAY(t))
        return sql_err_at(b->cx, loc, QR_ETYPE, "42804",
                          "multidimensional arrays must have array expressions with matching "
                          "dimensions");
    e->op = nested;
    e->type = nested ? t : QR_SQL_ARRAY_OF(t);
    *out = e;
    return QR_OK;
}

static int bind_node(SqlBind *b, const cJSON *node, SqlExpr **out);

/* Every expression level passes here: the nesting (subqueries included)
 * and the stack are checked before the recursion goes deeper. */
int sql_expr_bind(SqlBind *b, const cJSON *node, SqlExpr **out)
{
    SqlCtx *cx = b->cx;
    if (cx->nest >= SQL_MAX_NESTING) {
        if (cx->err->code == QR_OK)
            sql_too_complex(cx->err, SQL_MAX_NESTING);
        return cx->err->code;
    }
    if (sql_check_stack(cx))
        return cx->err->code;
    cx->nest++;
    int rc = bind_node(b, node, out);
    cx->nest--;
    return rc;
}

static int bind_node(SqlBind *b, const cJSON *node, SqlExpr **out)
{
    SqlCtx *cx = b->cx;
    const char *tag = sqlj_tag(node);
    const cJSON *body = sqlj_body(node);
    int loc = sqlj_loc(node);
    if (!tag)
        return sql_err_at(cx, loc, QR_ESYNTAX, "42601", "missing expression");
    if (!strcmp(tag, "A_Const"))
        return bind_const(b, body, loc, out);
    if (!strcmp(tag, "ColumnRef"))
        return bind_colref(b, body, loc, out);
    if (!strcmp(tag, "ParamRef")) {
        int n = sqlj_int(body, "number", 0);
        if (n < 1 || n > 65535)
            return sql_err_at(cx, loc, QR_ESYNTAX, "42P02", "there is no parameter $%d", n);
        if (n > cx->n_params) {
            if (!cx->analyze_only && (!cx->params || n > cx->params->n))
                return sql_err_at(cx, loc, QR_EINVAL, "42P02", "there is no parameter $%d", n);
            if (cx->analyze_only)
                cx->n_params = n;
        }
        SqlExpr *e = new_expr(b, SE_PARAM, loc);
        if (!e)
            return cx->err->code;
        e->col = n - 1;
        e->type = cx->param_types ? cx->param_types[n - 1] : QR_SQL_TEXT;
        e->name = "?column?";
        *out = e;
        return QR_OK;
    }
    if (!strcmp(tag, "A_Expr"))
        return bind_aexpr(b, body, loc, out);
    if (!strcmp(tag, "BoolExpr")) {
        const char *op = sqlj_str(body, "boolop");
        SqlExprKind k = !strcmp(op, "AND_EXPR") ? SE_AND : !strcmp(op, "OR_EXPR") ? SE_OR : SE_NOT;
        SqlExpr *e;
        int rc = bind_list(b, sqlj_get(body, "args"), NULL, &e, k);
        if (rc)
            return rc;
        for (int i = 0; i < e->n_args; i++) {
            if ((rc = coerce_unknown(b, e->args[i], QR_SQL_BOOL)))
                return rc;
            if (e->args[i]->type != QR_SQL_BOOL)
                return sql_err_at(cx, e->args[i]->loc, QR_ETYPE, "42804",
                                  "argument of %s must be type boolean, not type %s",
                                  k == SE_AND ? "AND" : k == SE_OR ? "OR" : "NOT",
                                  qr_sql_type_name(e->args[i]->type));
        }
        e->loc = loc;
        e->type = QR_SQL_BOOL;
        *out = e;
        return QR_OK;
    }
    if (!strcmp(tag, "NullTest")) {
        SqlExpr *e = new_expr(b, strcmp(sqlj_str(body, "nulltesttype"), "IS_NULL") == 0
                                     ? SE_IS_NULL : SE_IS_NOT_NULL, loc);
        if (!e || set_args(b, e, 1))
            return cx->err->code;
        e->type = QR_SQL_BOOL;
        return sql_expr_bind(b, sqlj_get(body, "arg"), &e->args[0]) ? cx->err->code
                                                                    : (*out = e, QR_OK);
    }
    if (!strcmp(tag, "BooleanTest")) {
        const char *t = sqlj_str(body, "booltesttype");
        bool neg = strstr(t, "_NOT_") != NULL;
        SqlExprKind k = strstr(t, "TRUE") ? SE_IS_TRUE : strstr(t, "FALSE") ? SE_IS_FALSE
                                                                           : SE_IS_NULL;
        SqlExpr *e = new_expr(b, k, loc);
        if (!e || set_args(b, e, 1))
            return cx->err->code;
        int rc = sql_expr_bind(b, sqlj_get(body, "arg"), &e->args[0]);
        if (rc)
            return rc;
        coerce_unknown(b, e->args[0], QR_SQL_BOOL);
        e->type = QR_SQL_BOOL;
        if (neg) {
            SqlExpr *n = new_expr(b, k == SE_IS_NULL ? SE_IS_NOT_NULL : SE_NOT, loc);
            if (!n || set_args(b, n, 1))
                return cx->err->code;
            if (k == SE_IS_NULL) {
                n->args[0] = e->args[0];
            } else {
                n->args[0] = e;
            }
            n->type = QR_SQL_BOOL;
            e = n;
        }
        *out = e;
        return QR_OK;
    }
    if (!strcmp(tag, "TypeCast"))
        return bind_cast(b, body, loc, out);
    if (!strcmp(tag, "FuncCall"))
        return bind_func(b, body, loc, out);
    if (!strcmp(tag, "CaseExpr"))
        return bind_case(b, body, loc, out);
    if (!strcmp(tag, "CoalesceExpr"))
        return bind_variadic(b, sqlj_get(body, "args"), SE_COALESCE, loc, "coalesce", out);
    if (!strcmp(tag, "MinMaxExpr")) {
        bool g = !strcmp(sqlj_str(body, "op") ? sqlj_str(body, "op") : "", "IS_GREATEST");
        return bind_variadic(b, sqlj_get(body, "args"), g ? SE_GREATEST : SE_LEAST, loc,
                             g ? "greatest" : "least", out);
    }
    if (!strcmp(tag, "SubLink"))
        return bind_sublink(b, body, loc, out);
    if (!strcmp(tag, "SQLValueFunction")) {
        const char *op = sqlj_str(body, "op");
        const char *fname = NULL;
        if (!strcmp(op, "SVFOP_CURRENT_TIMESTAMP") || !strcmp(op, "SVFOP_LOCALTIMESTAMP"))
            fname = "now";
        else if (!strcmp(op, "SVFOP_CURRENT_DATE"))
            fname = "current_date";
        else if (!strcmp(op, "SVFOP_CURRENT_USER") || !strcmp(op, "SVFOP_SESSION_USER") ||
                 !strcmp(op, "SVFOP_USER"))
            fname = "current_user";
        else if (!strcmp(op, "SVFOP_CURRENT_SCHEMA"))
            fname = "current_schema";
        else if (!strcmp(op, "SVFOP_CURRENT_CATALOG"))
            fname = "current_database";
        const SqlFuncDef *def = fname ? sql_func_find(fname, 0) : NULL;
        QrSqlType rt;
        SqlExpr *e = new_expr(b, SE_FUNC, loc);
        if (!e)
            return cx->err->code;
        e->name = fname;
        if (def) {
            e->fn = def;
            e->type = def->ret;
        } else if (fname && sqlcat_func_lookup(NULL, fname, 0, &rt) == QR_OK) {
            e->type = rt;
            e->op = 1;
        } else {
            return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "%s is not supported", op + 6);
        }
        *out = e;
        return QR_OK;
    }
    if (!strcmp(tag, "CollateClause")) {
        /* strings compare by bytes (COLLATE "C"); "default", "C" and "POSIX"
         * (what psql and drivers write) change nothing */
        const char *coll = sqlj_last_name(sqlj_get(body, "collname"));
        if (coll && (!strcmp(coll, "default") || !strcmp(coll, "C") || !strcmp(coll, "POSIX")))
            return sql_expr_bind(b, sqlj_get(body, "arg"), out);
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "collation \"%s\" is not supported",
                          coll ? coll : "?");
    }
    if (!strcmp(tag, "A_Indirection"))
        return bind_subscript(b, body, loc, out);
    if (!strcmp(tag, "GroupingFunc")) {
        if (!b->bind_grouping)
            return sql_err_at(cx, loc, QR_EINVAL, "42803", "grouping operations are not allowed here");
        return b->bind_grouping(b, body, loc, out);
    }
    if (!strcmp(tag, "A_ArrayExpr"))
        return bind_array_expr(b, body, loc, out);
    if (!strcmp(tag, "A_Expr") || !strcmp(tag, "RowExpr"))
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "%s is not supported", tag);
    return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000", "expression %s is not supported", tag);
}

int sql_expr_compile(SqlCtx *cx, const cJSON *node, const SqlScope *scope, SqlExpr **out)
{
    SqlBind b;
    memset(&b, 0, sizeof b);
    b.cx = cx;
    b.scope = scope;
    return sql_expr_bind(&b, node, out);
}

int sql_expr_compile_as(SqlCtx *cx, const cJSON *node, const SqlScope *scope, QrSqlType want,
                        SqlExpr **out)
{
    SqlBind b;
    memset(&b, 0, sizeof b);
    b.cx = cx;
    b.scope = scope;
    int rc = sql_expr_bind(&b, node, out);
    return rc ? rc : coerce_unknown(&b, *out, want);
}

bool sql_expr_is_const(const SqlExpr *e)
{
    if (e->kind == SE_COL || e->kind == SE_AGG || e->kind == SE_MATCH || e->kind == SE_SCORE ||
        e->kind == SE_SNIPPET || e->kind == SE_WIN)
        return false;
    if ((e->kind == SE_FUNC && e->fn == NULL) || e->kind == SE_SRF)
        return false;
    /* SE_OUTER is constant while its subquery runs, and so is an SE_SUBQ that
     * reads only such columns */
    for (int i = 0; i < e->n_args; i++)
        if (!sql_expr_is_const(e->args[i]))
            return false;
    return true;
}

const char *sql_expr_name(const SqlExpr *e)
{
    /* binding names columns, functions, CASE... as PostgreSQL does; operators
     * and literals stay "?column?" */
    if (e->kind == SE_ARITH || e->kind == SE_CMP || e->kind == SE_CONCAT || e->kind == SE_AND ||
        e->kind == SE_OR || e->kind == SE_NOT || e->kind == SE_NEG)
        return "?column?";
    return e->name ? e->name : "?column?";
}

/* ======================================================================== */
/* Evaluation                                                                */
/* ======================================================================== */

/* s ~ p (POSIX extended regular expressions; PostgreSQL's advanced forms
 * beyond ERE are not supported).  Strings are copied to be NUL-terminated;
 * an embedded NUL cannot occur in SQL text.  Bad patterns: 2201B.  A
 * statement compiles each distinct pattern once: the last few are kept in
 * cx->regex (a pattern from a column changes per row and rotates through). */
#define REGEX_CACHE 8
typedef struct SqlRegexCache {
    struct {
        char *pat;            /* owns (qr_malloc); NULL = empty slot */
        size_t n;
        bool ci;
        regex_t re;
    } e[REGEX_CACHE];
    int next;                 /* slot replaced next */
} SqlRegexCache;

void sql_ctx_done(SqlCtx *cx)
{
    SqlRegexCache *c = cx->regex;
    if (!c)
        return;
    for (int i = 0; i < REGEX_CACHE; i++)
        if (c->e[i].pat) {
            regfree(&c->e[i].re);
            qr_free(c->e[i].pat);
        }
    qr_free(c);
    cx->regex = NULL;
}

static int regex_get(SqlCtx *cx, const SqlExpr *e, const char *p, size_t m, bool ci, regex_t **out)
{
    if (!cx->regex && !(cx->regex = qr_calloc(1, sizeof *cx->regex)))
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    SqlRegexCache *c = cx->regex;
    for (int i = 0; i < REGEX_CACHE; i++)
        if (c->e[i].pat && c->e[i].n == m && c->e[i].ci == ci && !memcmp(c->e[i].pat, p, m)) {
            *out = &c->e[i].re;
            return QR_OK;
        }
    char *ps = qr_malloc(m + 1);
    if (!ps)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    memcpy(ps, p, m);
    ps[m] = '\0';
    regex_t re;
    int rc = regcomp(&re, ps, REG_EXTENDED | REG_NOSUB | (ci ? REG_ICASE : 0));
    if (rc != 0) {
        char msg[128];
        regerror(rc, &re, msg, sizeof msg);
        qr_free(ps);
        return sql_err_at(cx, e->loc, QR_EINVAL, "2201B", "invalid regular expression: %s", msg);
    }
    int k = c->next;
    c->next = (c->next + 1) % REGEX_CACHE;
    if (c->e[k].pat) {
        regfree(&c->e[k].re);
        qr_free(c->e[k].pat);
    }
    c->e[k].pat = ps;
    c->e[k].n = m;
    c->e[k].ci = ci;
    c->e[k].re = re;
    *out = &c->e[k].re;
    return QR_OK;
}

static __attribute__((noinline)) int regex_match(SqlCtx *cx, const SqlExpr *e, const char *s,
                                                  size_t n, const char *p,
                       size_t m, bool ci, bool *out)
{
    regex_t *re = NULL;
    int rc = regex_get(cx, e, p, m, ci, &re);
    if (rc)
        return rc;
    char small[256];
    char *ss = n < sizeof small ? small : qr_malloc(n + 1);
    if (!ss)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    memcpy(ss, s, n);
    ss[n] = '\0';
    *out = regexec(re, ss, 0, NULL, 0) == 0;
    if (ss != small)
        qr_free(ss);
    return QR_OK;
}

static bool like_match(const char *s, size_t n, const char *p, size_t m, bool ci)
{
    /* iterative with backtracking over the last % */
    size_t i = 0, j = 0, star_j = (size_t)-1, star_i = 0;
    while (i < n) {
        if (j < m && p[j] == '\\' && j + 1 < m) {
            char pc = p[j + 1], sc = s[i];
            if (ci && pc >= 'A' && pc <= 'Z')
                pc = (char)(pc + 32);
            if (ci && sc >= 'A' && sc <= 'Z')
                sc = (char)(sc + 32);
            if (pc == sc) {
                i++;
                j += 2;
                continue;
            }
        } else if (j < m && p[j] == '%') {
            star_j = j++;
            star_i = i;
            continue;
        } else if (j < m && p[j] == '_') {
            /* one character (UTF-8 aware) */
            i++;
            while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80)
                i++;
            j++;
            continue;
        } else if (j < m) {
            char pc = p[j], sc = s[i];
            if (ci && pc >= 'A' && pc <= 'Z')
                pc = (char)(pc + 32);
            if (ci && sc >= 'A' && sc <= 'Z')
                sc = (char)(sc + 32);
            if (pc == sc) {
                i++;
                j++;
                continue;
            }
        }
        if (star_j == (size_t)-1)
            return false;
        j = star_j + 1;
        i = ++star_i;
    }
    while (j < m && p[j] == '%')
        j++;
    return j == m;
}

static int arith(SqlCtx *cx, const SqlExpr *e, const SqlValue *a, const SqlValue *b, SqlValue *out)
{
    if (e->type == QR_SQL_NUMERIC)
        return sqln_arith(cx, e->op, a, b, out);
    if (sqlt_is_float(e->type)) {
        double x = sqlt_is_int(a->type) ? (double)a->u.i : a->u.f;
        double y = sqlt_is_int(b->type) ? (double)b->u.i : b->u.f;
        if (a->type == QR_SQL_NUMERIC || b->type == QR_SQL_NUMERIC) {
            SqlValue fa, fb;
            if (sqlv_cast(cx, a, QR_SQL_FLOAT8, e->loc, &fa) ||
                sqlv_cast(cx, b, QR_SQL_FLOAT8, e->loc, &fb))
                return cx->err->code;
            x = fa.u.f;
            y = fb.u.f;
        }
        double r;
        switch (e->op) {
        case '+': r = x + y; break;
        case '-': r = x - y; break;
        case '*': r = x * y; break;
        case '/':
            if (y == 0)
                return sql_err_at(cx, e->loc, QR_EINVAL, "22012", "division by zero");
            r = x / y;
            break;
        default:
            if (y == 0)
                return sql_err_at(cx, e->loc, QR_EINVAL, "22012", "division by zero");
            r = fmod(x, y);
            break;
        }
        if (isinf(r) && !isinf(x) && !isinf(y))
            return sql_err_at(cx, e->loc, QR_EINVAL, "22003", "value out of range: overflow");
        *out = sqlv_float(r);
        out->type = e->type;
        return QR_OK;
    }
    int64_t x = a->u.i, y = b->u.i, r;
    bool ovf = false;
    switch (e->op) {
    case '+': ovf = __builtin_add_overflow(x, y, &r); break;
    case '-': ovf = __builtin_sub_overflow(x, y, &r); break;
    case '*': ovf = __builtin_mul_overflow(x, y, &r); break;
    case '&': r = x & y; break;
    case '|': r = x | y; break;
    case '/':
        if (y == 0)
            return sql_err_at(cx, e->loc, QR_EINVAL, "22012", "division by zero");
        if (x == INT64_MIN && y == -1)
            ovf = true;
        else
            r = x / y;
        break;
    default:
        if (y == 0)
            return sql_err_at(cx, e->loc, QR_EINVAL, "22012", "division by zero");
        r = y == -1 ? 0 : x % y;
        break;
    }
    if (!ovf && e->type == QR_SQL_INT4)
        ovf = r < INT32_MIN || r > INT32_MAX;
    if (!ovf && e->type == QR_SQL_INT2)
        ovf = r < INT16_MIN || r > INT16_MAX;
    if (ovf)
        return sql_err_at(cx, e->loc, QR_EINVAL, "22003", "%s out of range",
                          e->type == QR_SQL_INT4 ? "integer" : e->type == QR_SQL_INT2 ? "smallint"
                                                                                      : "bigint");
    *out = sqlv_int(r);
    out->type = e->type;
    return QR_OK;
}

static bool cmp_result(int op, int c)
{
    switch (op) {
    case SQL_CMP_EQ: return c == 0;
    case SQL_CMP_NE: return c != 0;
    case SQL_CMP_LT: return c < 0;
    case SQL_CMP_LE: return c <= 0;
    case SQL_CMP_GT: return c > 0;
    default: return c >= 0;
    }
}

static int set_find(const SqlValueSet *s, const SqlValue *v)
{
    uint64_t lo = 0, hi = s->n;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        int c = sqlv_cmp(&s->vals[mid], v);
        if (c == 0)
            return 1;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

static int eval_node(SqlCtx *cx, const SqlExpr *e, const SqlEvalRow *r, SqlValue *out);

/* The array expressions: x op ANY / ALL (array), ARRAY[...], subscripts
 * and slices, ||, @>, <@, &&. */
static __attribute__((noinline)) int eval_array(SqlCtx *cx, const SqlExpr *e,
                                                const SqlEvalRow *r, SqlValue *out)
{
    SqlValue a, b;
    int rc;
    switch (e->kind) {
    case SE_ANY_ARRAY: {
        if ((rc = sql_expr_eval(cx, e->args[0], r, &a)) || (rc = sql_expr_eval(cx, e->args[1], r, &b)))
            return rc;
        *out = sqlv_null();
        out->type = QR_SQL_BOOL;
        if (b.is_null)
            return QR_OK;
        SqlValue arr, *el;
        uint64_t n;
        if ((rc = sqla_of(cx, &b, a.type == QR_SQL_UNKNOWN ? QR_SQL_TEXT : a.type, &arr)) ||
            (rc = sqla_elems(cx, &arr, &el, &n)))
            return rc;
        bool all = e->op >= 8, has_null = false;
        int op = e->op & 7;
        for (uint64_t i = 0; i < n; i++) {
            if (a.is_null || el[i].is_null) {
                has_null = true;
                continue;
            }
            if (cmp_result(op, sqlv_cmp(&a, &el[i])) != all)
                return *out = sqlv_bool(!all), QR_OK;
        }
        if (!has_null)
            *out = sqlv_bool(all);
        return QR_OK;
    }
    case SE_ARRAY: {
        SqlValue small[16], *el = e->n_args <= 16 ? small
                                                  : qr_arena_alloc(cx->arena, (size_t)e->n_args * sizeof *el);
        if (!el)
            return nomem(cx);
        for (int i = 0; i < e->n_args; i++)
            if ((rc = sql_expr_eval(cx, e->args[i], r, &el[i])))
                return rc;
        QrSqlType elem = QR_SQL_ELEM(e->type);
        if (!e->op)
            return sqla_list(cx, elem, el, (uint64_t)e->n_args, out);
        /* ARRAY[[...], [...]]: sub-arrays of one shape, one more dimension */
        SqlArr first = {0};
        uint64_t total = 0;
        bool have = false;
        for (int i = 0; i < e->n_args; i++) {
            SqlArr s;
            if (el[i].is_null || !sqla_view(&el[i], &s))
                return sql_err_at(cx, e->loc, QR_EUNSUPPORTED, "0A000",
                                  "NULL sub-arrays in a multidimensional ARRAY[] are not supported");
            bool same = !have || (s.ndim == first.ndim &&
                                  !memcmp(s.dims, first.dims, (size_t)s.ndim * sizeof *s.dims));
            if (!same)
                return sql_err_at(cx, e->loc, QR_EINVAL, "2202E",
                                  "multidimensional arrays must have array expressions with "
                                  "matching dimensions");
            if (!have)
                first = s;
            have = true;
            total += s.n;
        }
        if (first.ndim + 1 > SQL_ARRAY_MAXDIM)
            return sql_err_at(cx, e->loc, QR_ELIMIT, "54000",
                              "number of array dimensions (%d) exceeds the maximum allowed (%d)",
                              first.ndim + 1, SQL_ARRAY_MAXDIM);
        SqlValue *all = total ? qr_arena_alloc(cx->arena, total * sizeof *all) : NULL;
        if (total && !all)
            return nomem(cx);
        uint64_t k = 0;
        for (int i = 0; i < e->n_args; i++) {
            SqlArr s;
            sqla_view(&el[i], &s);
            for (uint32_t j = 0; j < s.n; j++)
                sqla_get(&s, j, &all[k++]);
        }
        int dims[SQL_ARRAY_MAXDIM];
        dims[0] = e->n_args;
        for (int d = 0; d < first.ndim; d++)
            dims[d + 1] = first.dims[d];
        return sqla_build(cx, elem, first.n ? first.ndim + 1 : 0, dims, NULL, all, total, out);
    }
    case SE_SUBSCRIPT: {
        int n = (e->n_args - 1) / 2;
        SqlValue lo[SQL_ARRAY_MAXDIM], hi[SQL_ARRAY_MAXDIM], arr;
        if ((rc = sql_expr_eval(cx, e->args[0], r, &a)))
            return rc;
        for (int k = 0; k < n; k++)
            if ((rc = sql_expr_eval(cx, e->args[1 + 2 * k], r, &lo[k])) ||
                (rc = sql_expr_eval(cx, e->args[2 + 2 * k], r, &hi[k])))
                return rc;
        QrSqlType elem = e->op ? QR_SQL_ELEM(e->type) : e->type;
        if (a.is_null) {
            *out = sqlv_null();
            out->type = e->type;
            return QR_OK;
        }
        if ((rc = sqla_of(cx, &a, elem, &arr)))
            return rc;
        return sqla_subscript(cx, &arr, n, lo, hi, e->op != 0, e->loc, out);
    }
    default: /* SE_ARRAY_OP */
        if ((rc = sql_expr_eval(cx, e->args[0], r, &a)) || (rc = sql_expr_eval(cx, e->args[1], r, &b)))
            return rc;
        if (e->op == '|') { /* array || array / element: NULL arrays are empty, NULL elements kept */
            SqlValue x = a, y = b;
            QrSqlType elem = QR_SQL_ELEM(e->type);
            if (!QR_SQL_IS_ARRAY(e->args[0]->type) && (rc = sqla_list(cx, elem, &a, 1, &x)))
                return rc;
            if (!QR_SQL_IS_ARRAY(e->args[1]->type) && (rc = sqla_list(cx, elem, &b, 1, &y)))
                return rc;
            if (x.is_null && y.is_null) {
                *out = x;
                out->type = e->type;
                return QR_OK;
            }
            SqlValue args[2] = {x, y};
            args[0].type = args[1].type = e->type;
            const SqlFuncDef *cat = sql_func_find("array_cat", 2);
            return cat ? cat->fn(cx, 2, args, out) : sql_err_at(cx, e->loc, QR_EINTERNAL, "XX000", "no array_cat");
        }
        if (a.is_null || b.is_null) {
            *out = sqlv_null();
            out->type = QR_SQL_BOOL;
            return QR_OK;
        }
        return sqla_op(cx, e->op, &a, &b, out);
    }
}

/* Nodes with operands recurse: they check the stack first (binding bounded
 * the depth, but a correlated subquery runs inside an outer evaluation). */
int sql_expr_eval(SqlCtx *cx, const SqlExpr *e, const SqlEvalRow *r, SqlValue *out)
{
    if (e->n_args && sql_stack_low() && sql_check_stack(cx))
        return cx->err->code;
    return eval_node(cx, e, r, out);
}

/* A scalar function call.  Apart from eval_node, whose frame every level
 * of an expression pays: the argument array is large. */
static __attribute__((noinline)) int eval_func(SqlCtx *cx, const SqlExpr *e,
                                               const SqlEvalRow *r, SqlValue *out)
{
    SqlValue small[16], *argv = small;
    int rc = QR_OK;
    if (e->n_args > 16 && !(argv = qr_arena_alloc(cx->arena, (size_t)e->n_args * sizeof *argv)))
        return nomem(cx);
    for (int i = 0; i < e->n_args; i++) {
        if ((rc = sql_expr_eval(cx, e->args[i], r, &argv[i])))
            return rc;
        if (argv[i].is_null && e->fn && e->fn->strict) {
            *out = sqlv_null();
            out->type = e->type;
            return QR_OK;
        }
    }
    if (!e->fn)
        rc = sqlcat_func_call(cx, NULL, e->name, e->n_args, argv, out);
    else
        rc = e->fn->fn(cx, e->n_args, argv, out);
    if (rc == QR_OK && out->type != e->type && !out->is_null && e->type != QR_SQL_UNKNOWN) {
        SqlValue c;
        if ((rc = sqlv_cast(cx, out, e->type, e->loc, &c)) == QR_OK)
            *out = c;
    }
    if (rc == QR_OK && out->is_null)
        out->type = e->type;
    return rc;
}

/* x::regtype[] (and kin; e->name says which): every element of an array, an
 * array literal or an oidvector's text ("23 25"), an oid or a name, as the
 * object's name ('{int4,text}' and '{23,25}' both give {integer,text});
 * unknown names fail as ::regtype does (42704), unknown oids print as
 * numbers. */
static int reg_array(SqlCtx *cx, const SqlExpr *e, const SqlValue *a, SqlValue *out)
{
    char kind = reg_kind(e->name);
    *out = sqlv_null();
    out->type = e->type;
    if (a->is_null)
        return QR_OK;
    SqlValue arr = *a, *el;
    uint64_t n;
    int rc;
    if (!sqlt_is_str(a->type) && !QR_SQL_IS_ARRAY(a->type) &&
        (rc = sqlv_cast(cx, a, QR_SQL_ARRAY_OF(QR_SQL_OID), e->loc, &arr)))
        return rc;
    if ((rc = sqlv_array_parse(cx, &arr, &el, &n)))
        return rc;
    for (uint64_t i = 0; i < n; i++) {
        if (el[i].is_null)
            continue;
        bool digits = el[i].u.s.n > 0;
        for (size_t k = 0; k < el[i].u.s.n; k++)
            digits &= el[i].u.s.s[k] >= '0' && el[i].u.s.s[k] <= '9';
        SqlValue oid;
        if (digits) {
            if ((rc = sqlv_cast(cx, &el[i], QR_SQL_OID, e->loc, &oid)))
                return rc;
        } else if (kind == 'p') { /* regproc is its name already */
            continue;
        } else if ((rc = sqlcat_reg_oid(cx, kind, &el[i], e->loc, &oid))) {
            return rc;
        }
        if ((rc = sqlcat_reg_name(cx, kind, oid.u.i, &el[i])))
            return rc;
    }
    SqlValue text;
    if ((rc = sqlv_array_text(cx, el, n, &text)))
        return rc;
    return sqlv_cast(cx, &text, e->type, e->loc, out);
}

static int eval_node(SqlCtx *cx, const SqlExpr *e, const SqlEvalRow *r, SqlValue *out)
{
    SqlValue a, b;
    int rc;
    switch (e->kind) {
    case SE_CONST:
        *out = e->val;
        if (out->type == QR_SQL_UNKNOWN && !out->is_null)
            out->type = QR_SQL_TEXT;
        return QR_OK;
    case SE_COL:
        *out = r->row[e->col];
        if (e->type != QR_SQL_NUMERIC || out->is_null)
            return QR_OK;
        if (sqlt_is_float(out->type) && out->type != QR_SQL_NUMERIC && /* float storage */
            sqln_from_double(cx, out->u.f, out))
            return cx->err->code;
        if (e->typmod >= 4 && sqln_typmod(cx, out, e->typmod, e->loc, out)) /* at its scale */
            return cx->err->code;
        return QR_OK;
    case SE_PARAM:
        if (!cx->params || e->col >= cx->params->n)
            return sql_err_at(cx, e->loc, QR_EINVAL, "08P01", "no value bound for parameter $%d",
                              e->col + 1);
        *out = cx->params->v[e->col];
        if (out->type != e->type && e->type != QR_SQL_UNKNOWN)
            return sqlv_cast(cx, &cx->params->v[e->col], e->type, e->loc, out);
        return QR_OK;
    case SE_AGG:
        *out = r->aggv ? r->aggv[e->col] : sqlv_null();
        return QR_OK;
    case SE_WIN: /* computed below the projection, into the row */
        *out = r->row[e->col];
        return QR_OK;
    case SE_OUTER: {
        const SqlFrame *f = cx->frames;
        for (int d = 1; f && d < e->op; d++)
            f = f->next;
        if (!f || !f->row)
            return sql_err_at(cx, e->loc, QR_EINTERNAL, "XX000",
                              "outer column \"%s\" read outside its subquery", e->name);
        *out = f->row[e->col];
        return QR_OK;
    }
    case SE_SUBQ:
        return subq_eval(cx, e, r, out);
    case SE_ANY_ARRAY:
    case SE_ARRAY:
    case SE_SUBSCRIPT:
    case SE_ARRAY_OP:
        return eval_array(cx, e, r, out);
    case SE_JSON_OP:
        if ((rc = sql_expr_eval(cx, e->args[0], r, &a)) || (rc = sql_expr_eval(cx, e->args[1], r, &b)))
            return rc;
        if (a.is_null || b.is_null) {
            *out = sqlv_null();
            out->type = e->type;
            return QR_OK;
        }
        return sqljs_op(cx, e->op, &a, &b, e->type, out);
    case SE_SRF:
        return sql_err_at(cx, e->loc, QR_EUNSUPPORTED, "0A000",
                          "set-returning function %s() is only supported as a whole select-list "
                          "item or in FROM", e->name);
    case SE_SCORE:
        *out = r->row[e->col];
        if (out->is_null) {
            *out = sqlv_float(0);
        }
        out->type = QR_SQL_FLOAT4;
        return QR_OK;
    case SE_SNIPPET:
        return sql_text_snippet(cx, e, r, out);
    case SE_MATCH: {
        const SqlValue *id = &r->row[e->text->id_col];
        bool m = false;
        if (!id->is_null && (rc = sql_text_has(cx, e->text->run, id->u.i, &m, NULL)))
            return rc;
        *out = sqlv_bool(m);
        out->is_null = id->is_null; /* the NULL row of an outer join: its text is NULL */
        return QR_OK;
    }
    case SE_ARITH:
        if ((rc = sql_expr_eval(cx, e->args[0], r, &a)) || (rc = sql_expr_eval(cx, e->args[1], r, &b)))
            return rc;
        if (a.is_null || b.is_null) {
            *out = sqlv_null();
            out->type = e->type;
            return QR_OK;
        }
        if (e->col == 1)
            return sqld_arith(cx, e->op, &a, &b, e->type, e->loc, out);
        return arith(cx, e, &a, &b, out);
    case SE_NEG:
        if ((rc = sql_expr_eval(cx, e->args[0], r, &a)))
            return rc;
        *out = a;
        out->type = e->type;
        if (a.is_null)
            return QR_OK;
        if (sqlt_is_int(a.type)) {
            if (a.u.i == INT64_MIN || (e->type == QR_SQL_INT4 && a.u.i == INT32_MIN))
                return sql_err_at(cx, e->loc, QR_EINVAL, "22003", "integer out of range");
            out->u.i = -a.u.i;
        } else if (a.type == QR_SQL_INTERVAL) {
            return sqld_negate(cx, &a, out);
        } else if (a.type == QR_SQL_NUMERIC) {
            return sqln_neg(cx, &a, out);
        } else {
            out->u.f = -a.u.f;
        }
        return QR_OK;
    case SE_CMP:
        if ((rc = sql_expr_eval(cx, e->args[0], r, &a)) || (rc = sql_expr_eval(cx, e->args[1], r, &b)))
            return rc;
        if (e->op >= 100) { /* IS [NOT] DISTINCT FROM */
            bool same = (a.is_null && b.is_null) ||
                        (!a.is_null && !b.is_null && sqlv_cmp(&a, &b) == 0);
            *out = sqlv_bool(e->op == 100 ? same : !same);
            return QR_OK;
        }
        if (a.is_null || b.is_null) {
            *out = sqlv_null();
            out->type = QR_SQL_BOOL;
            return QR_OK;
        }
        *out = sqlv_bool(cmp_result(e->op, sqlv_cmp(&a, &b)));
        return QR_OK;
    case SE_AND:
    case SE_OR: {
        bool has_null = false, is_and = e->kind == SE_AND;
        for (int i = 0; i < e->n_args; i++) {
            if ((rc = sql_expr_eval(cx, e->args[i], r, &a)))
                return rc;
            if (a.is_null)
                has_null = true;
            else if (a.u.b != is_and) {
                *out = sqlv_bool(!is_and);
                return QR_OK;
            }
        }
        *out = sqlv_bool(is_and);
        if (has_null)
            out->is_null = true;
        return QR_OK;
    }
    case SE_NOT:
        if ((rc = sql_expr_eval(cx, e->args[0], r, &a)))
            return rc;
        *out = a;
        out->type = QR_SQL_BOOL;
        if (!a.is_null)
            out->u.b = !a.u.b;
        return QR_OK;
    case SE_IS_NULL:
    case SE_IS_NOT_NULL:
        if ((rc = sql_expr_eval(cx, e->args[0], r, &a)))
            return rc;
        *out = sqlv_bool(a.is_null == (e->kind == SE_IS_NULL));
        return QR_OK;
    case SE_IS_TRUE:
    case SE_IS_FALSE:
        if ((rc = sql_expr_eval(cx, e->args[0], r, &a)))
            return rc;
        *out = sqlv_bool(!a.is_null && a.u.b == (e->kind == SE_IS_TRUE));
        return QR_OK;
    case SE_IN: {
        if ((rc = sql_expr_eval(cx, e->args[0], r, &a)))
            return rc;
        bool has_null = a.is_null, found = false;
        if (e->set && !a.is_null) { /* a long list of constants, sorted */
            found = set_find(e->set, &a);
            has_null = e->set->has_null;
        }
        for (int i = 1; i < e->n_args && !found && !a.is_null && !e->set; i++) {
            /* a long list of expressions: the deadline and cancel are seen */
            if ((rc = sql_expr_eval(cx, e->args[i], r, &b)) || (rc = sql_check(cx)))
                return rc;
            if (b.is_null)
                has_null = true;
            else if (sqlv_cmp(&a, &b) == 0)
                found = true;
        }
        *out = sqlv_bool(found != (e->op == 1));
        if (!found && has_null)
            out->is_null = true;
        return QR_OK;
    }
    case SE_IN_SET: {
        if ((rc = sql_expr_eval(cx, e->args[0], r, &a)))
            return rc;
        const SqlValueSet *set = e->set;
        if (!set && (rc = subq_set(cx, e->subq, &set)))
            return rc;
        if (a.is_null) { /* NULL IN (no rows) is false, not NULL */
            *out = sqlv_bool(false);
            out->is_null = set->n > 0;
            return QR_OK;
        }
        bool found = set_find(set, &a);
        *out = sqlv_bool(found);
        if (!found && set->has_null)
            out->is_null = true;
        return QR_OK;
    }
    case SE_LIKE:
        if ((rc = sql_expr_eval(cx, e->args[0], r, &a)) || (rc = sql_expr_eval(cx, e->args[1], r, &b)))
            return rc;
        if (a.is_null || b.is_null) {
            *out = sqlv_null();
            out->type = QR_SQL_BOOL;
            return QR_OK;
        }
        if (e->op & 4) {
            bool m = false;
            if ((rc = regex_match(cx, e, a.u.s.s, a.u.s.n, b.u.s.s, b.u.s.n, e->op & 1, &m)))
                return rc;
            *out = sqlv_bool(m != ((e->op & 2) != 0));
            return QR_OK;
        }
        *out = sqlv_bool(like_match(a.u.s.s, a.u.s.n, b.u.s.s, b.u.s.n, e->op & 1) != ((e->op & 2) != 0));
        return QR_OK;
    case SE_CASE: {
        int k = 0;
        SqlValue x = {0};
        if (e->case_has_arg) {
            if ((rc = sql_expr_eval(cx, e->args[0], r, &x)))
                return rc;
            k = 1;
        }
        int end = e->n_args - (e->case_has_else ? 1 : 0);
        for (; k + 1 < end + 1 && k < end; k += 2) {
            if ((rc = sql_expr_eval(cx, e->args[k], r, &a)))
                return rc;
            bool hit = e->case_has_arg ? (!x.is_null && !a.is_null && sqlv_cmp(&x, &a) == 0)
                                       : (!a.is_null && a.u.b);
            if (hit)
                return sql_expr_eval(cx, e->args[k + 1], r, out);
        }
        if (e->case_has_else)
            return sql_expr_eval(cx, e->args[e->n_args - 1], r, out);
        *out = sqlv_null();
        out->type = e->type;
        return QR_OK;
    }
    case SE_COALESCE:
        for (int i = 0; i < e->n_args; i++) {
            if ((rc = sql_expr_eval(cx, e->args[i], r, out)))
                return rc;
            if (!out->is_null)
                return QR_OK;
        }
        *out = sqlv_null();
        out->type = e->type;
        return QR_OK;
    case SE_GREATEST:
    case SE_LEAST: {
        bool any = false;
        SqlValue best = sqlv_null();
        for (int i = 0; i < e->n_args; i++) {
            if ((rc = sql_expr_eval(cx, e->args[i], r, &a)))
                return rc;
            if (a.is_null)
                continue;
            if (!any || (e->kind == SE_GREATEST ? sqlv_cmp(&a, &best) > 0 : sqlv_cmp(&a, &best) < 0))
                best = a;
            any = true;
        }
        *out = best;
        out->type = e->type;
        return QR_OK;
    }
    case SE_NULLIF:
        if ((rc = sql_expr_eval(cx, e->args[0], r, &a)) || (rc = sql_expr_eval(cx, e->args[1], r, &b)))
            return rc;
        *out = a;
        if (!a.is_null && !b.is_null && sqlv_cmp(&a, &b) == 0)
            out->is_null = true;
        return QR_OK;
    case SE_CAST:
        if ((rc = sql_expr_eval(cx, e->args[0], r, &a)))
            return rc;
        if (e->op == 'V') /* ::regtype[] and kin: the objects' names */
            return reg_array(cx, e, &a, out);
        if (e->op == 'p') /* regproc: a function's name */
            return sqlcat_reg_proc(cx, &a, e->loc, out);
        if (e->op == 'c' || e->op == 't' || e->op == 'n' || e->op == 'p' || e->op == 'r') {
            if (a.is_null || !sqlt_is_str(a.type)) {
                if ((rc = sqlv_cast(cx, &a, QR_SQL_OID, e->loc, out)))
                    return rc;
                out->type = QR_SQL_OID;
                return QR_OK;
            }
            return sqlcat_reg_oid(cx, (char)e->op, &a, e->loc, out);
        }
        if (e->op == 'C' || e->op == 'T' || e->op == 'N' || e->op == 'P' || e->op == 'R') {
            if (a.is_null || sqlt_is_str(a.type)) { /* (regproc is text already) */
                if (!a.is_null) {
                    *out = a;
                    out->type = e->type;
                    return QR_OK;
                }
                *out = sqlv_null();
                out->type = e->type;
                return QR_OK;
            }
            if ((rc = sqlcat_reg_name(cx, (char)(e->op - 'A' + 'a'), a.u.i, out)))
                return rc;
            out->type = e->type;
            return QR_OK;
        }
        if (e->typmod >= 4 && e->type == QR_SQL_NUMERIC) /* numeric(p, s) */
            return sqlv_cast(cx, &a, e->type, e->loc, out) ||
                           sqln_typmod(cx, out, e->typmod, e->loc, out)
                       ? cx->err->code
                       : QR_OK;
        return sqlv_cast(cx, &a, e->type, e->loc, out);
    case SE_CONCAT: {
        if ((rc = sql_expr_eval(cx, e->args[0], r, &a)) || (rc = sql_expr_eval(cx, e->args[1], r, &b)))
            return rc;
        if (a.is_null || b.is_null) {
            *out = sqlv_null();
            out->type = QR_SQL_TEXT;
            return QR_OK;
        }
        SqlValue ta, tb;
        if ((rc = sqlv_cast(cx, &a, QR_SQL_TEXT, e->loc, &ta)) ||
            (rc = sqlv_cast(cx, &b, QR_SQL_TEXT, e->loc, &tb)))
            return rc;
        char *s = qr_arena_alloc(cx->arena, ta.u.s.n + tb.u.s.n + 1);
        if (!s)
            return nomem(cx);
        memcpy(s, ta.u.s.s, ta.u.s.n);
        memcpy(s + ta.u.s.n, tb.u.s.s, tb.u.s.n);
        s[ta.u.s.n + tb.u.s.n] = 0;
        *out = sqlv_text(s, ta.u.s.n + tb.u.s.n);
        return QR_OK;
    }
    case SE_FUNC:
        return eval_func(cx, e, r, out);
    }
    return sql_err_at(cx, e->loc, QR_EINTERNAL, NULL, "unknown expression kind %d", e->kind);
}

int sql_expr_test(SqlCtx *cx, const SqlExpr *e, const SqlEvalRow *r, bool *pass)
{
    /* only the truth value outlives the call: the temporaries the test made
     * (concatenations, casts, function results) go back to the arena, so a
     * predicate over millions of rows runs in constant memory */
    QrArenaMark m = qr_arena_mark(cx->arena);
    SqlValue v;
    int rc = sql_expr_eval(cx, e, r, &v);
    if (rc)
        return rc;
    *pass = !v.is_null && v.u.b;
    qr_arena_release(cx->arena, m);
    return QR_OK;
}
