/*
 * bind_window.c — window functions, bound as PostgreSQL binds them: a call
 * with OVER (row_number, rank, dense_rank, percent_rank, cume_dist, ntile,
 * lag, lead, first_value, last_value, nth_value, or any aggregate over the
 * frame) in the select list, ORDER BY or DISTINCT ON; its window given
 * inline, by a WINDOW clause's name (`OVER w`) or copied from one and
 * extended (`OVER (w ORDER BY x)`); its frame (ROWS, RANGE or GROUPS
 * between UNBOUNDED / n PRECEDING / CURRENT ROW / n FOLLOWING /
 * UNBOUNDED, EXCLUDE ...).  The checks and their SQLSTATEs are
 * PostgreSQL's: windows elsewhere or nested 42P20, inside an aggregate
 * 42803, unknown windows 42704, frame offsets with columns 42P10.
 *
 * A window function's value is an SE_WIN expression reading the column
 * the window operator (exec/op_window.c) writes: below the projection,
 * rows are [input row..., aggregate values... (grouped),
 * window values...], so its column is fixed once binding knows the scope
 * and the aggregates (sql_bind_windows_place).  Identical calls share one
 * column.
 *
 * Layer: query/ (SQL).  Calls sql_expr.c (expressions, aggregates) and
 * bind.c (grouping checks).
 */
#include "query/plan/plan.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    SqlWinKind kind;
    int min_args, max_args;
} WINFNS[] = {
    {"row_number", SW_ROW_NUMBER, 0, 0},   {"rank", SW_RANK, 0, 0},
    {"dense_rank", SW_DENSE_RANK, 0, 0},   {"percent_rank", SW_PERCENT_RANK, 0, 0},
    {"cume_dist", SW_CUME_DIST, 0, 0},     {"ntile", SW_NTILE, 1, 1},
    {"lag", SW_LAG, 1, 3},                 {"lead", SW_LEAD, 1, 3},
    {"first_value", SW_FIRST_VALUE, 1, 1}, {"last_value", SW_LAST_VALUE, 1, 1},
    {"nth_value", SW_NTH_VALUE, 2, 2},
};

/* PostgreSQL's frameOptions bits (nodes/parsenodes.h) */
enum {
    FO_NONDEFAULT = 0x1, FO_RANGE = 0x2, FO_ROWS = 0x4, FO_GROUPS = 0x8,
    FO_START_UNBOUNDED_PRECEDING = 0x20, FO_END_UNBOUNDED_FOLLOWING = 0x100,
    FO_START_CURRENT_ROW = 0x200, FO_END_CURRENT_ROW = 0x400,
    FO_START_OFFSET_PRECEDING = 0x800, FO_END_OFFSET_PRECEDING = 0x1000,
    FO_START_OFFSET_FOLLOWING = 0x2000, FO_END_OFFSET_FOLLOWING = 0x4000,
    FO_EXCLUDE_CURRENT_ROW = 0x8000, FO_EXCLUDE_GROUP = 0x10000, FO_EXCLUDE_TIES = 0x20000,
};

static int nomem(SqlCtx *cx) { return sql_nomem(cx); }

bool sql_win_known(const char *lname)
{
    for (size_t i = 0; i < sizeof WINFNS / sizeof *WINFNS; i++)
        if (!strcmp(WINFNS[i].name, lname))
            return true;
    return false;
}

/* An untyped literal or parameter takes type t (as the argument of a
 * function declared with that type). */
static int settle(SqlCtx *cx, SqlExpr *e, QrSqlType t)
{
    if (e->type != QR_SQL_UNKNOWN)
        return QR_OK;
    if (e->kind == SE_PARAM && cx->param_types && cx->param_types[e->col] == QR_SQL_UNKNOWN) {
        cx->param_types[e->col] = t;
        e->type = t;
        return QR_OK;
    }
    if (e->kind == SE_CONST) {
        SqlValue v;
        int rc = sqlv_cast(cx, &e->val, t, e->loc, &v);
        if (rc)
            return rc;
        e->val = v;
        e->type = t;
    }
    return QR_OK;
}

/* ---- windows ---- */

static SqlWinDef *find_named(const SqlQuery *s, const char *name)
{
    for (int i = 0; i < s->n_windefs; i++)
        if (!strcmp(s->windefs[i]->name, name))
            return s->windefs[i];
    return NULL;
}

static int bind_part(SqlQuery *s, const cJSON *part, SqlWinDef *w)
{
    SqlCtx *cx = s->cx;
    int n = cJSON_GetArraySize(part), rc;
    if (!(w->part = qr_arena_calloc(cx->arena, (size_t)(n + 1) * sizeof *w->part)))
        return nomem(cx);
    const cJSON *it;
    cJSON_ArrayForEach(it, part)
    {
        if ((rc = sql_expr_bind(&s->bind, it, &w->part[w->n_part])) ||
            (rc = settle(cx, w->part[w->n_part], QR_SQL_TEXT)))
            return rc;
        w->n_part++;
    }
    return QR_OK;
}

static int bind_order(SqlQuery *s, const cJSON *order, SqlWinDef *w)
{
    SqlCtx *cx = s->cx;
    int n = cJSON_GetArraySize(order), rc;
    w->order = qr_arena_calloc(cx->arena, (size_t)(n + 1) * sizeof *w->order);
    w->desc = qr_arena_calloc(cx->arena, (size_t)(n + 1) * sizeof *w->desc);
    w->nulls_first = qr_arena_calloc(cx->arena, (size_t)(n + 1) * sizeof *w->nulls_first);
    if (!w->order || !w->desc || !w->nulls_first)
        return nomem(cx);
    const cJSON *it;
    cJSON_ArrayForEach(it, order)
    {
        const cJSON *sb = sqlj_is(it, "SortBy");
        if (!sb || sqlj_get(sb, "useOp"))
            return sql_err_at(cx, sqlj_loc(it), QR_EUNSUPPORTED, "0A000",
                              "ORDER BY USING in a window is not supported");
        const char *dir = sqlj_str(sb, "sortby_dir"), *nl = sqlj_str(sb, "sortby_nulls");
        int k = w->n_order;
        if ((rc = sql_expr_bind(&s->bind, sqlj_get(sb, "node"), &w->order[k])) ||
            (rc = settle(cx, w->order[k], QR_SQL_TEXT)))
            return rc;
        w->desc[k] = dir && !strcmp(dir, "SORTBY_DESC");
        w->nulls_first[k] = nl && !strcmp(nl, "SORTBY_NULLS_FIRST") ? true
                            : nl && !strcmp(nl, "SORTBY_NULLS_LAST") ? false
                                                                     : w->desc[k];
        w->n_order++;
    }
    return QR_OK;
}

/* An interval literal ('1 day', '2 hours 30 minutes', '90 seconds') in
 * microseconds: the units of fixed length (months and years are not). */
static int parse_interval(SqlCtx *cx, const char *txt, int loc, int64_t *us)
{
    static const struct {
        const char *unit;
        double us;
    } U[] = {
        {"microsecond", 1},   {"microseconds", 1},   {"us", 1},          {"usec", 1},
        {"usecs", 1},         {"millisecond", 1e3},  {"milliseconds", 1e3}, {"ms", 1e3},
        {"msec", 1e3},        {"msecs", 1e3},        {"second", 1e6},    {"seconds", 1e6},
        {"sec", 1e6},         {"secs", 1e6},         {"s", 1e6},         {"minute", 6e7},
        {"minutes", 6e7},     {"min", 6e7},          {"mins", 6e7},      {"m", 6e7},
        {"hour", 3.6e9},      {"hours", 3.6e9},      {"hr", 3.6e9},      {"hrs", 3.6e9},
        {"h", 3.6e9},         {"day", 8.64e10},      {"days", 8.64e10},  {"d", 8.64e10},
        {"week", 6.048e11},   {"weeks", 6.048e11},   {"w", 6.048e11},
    };
    const char *p = txt;
    double total = 0;
    int parts = 0;
    while (*p) {
        while (isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        char *end;
        double v = strtod(p, &end);
        if (end == p)
            goto bad;
        p = end;
        while (isspace((unsigned char)*p))
            p++;
        char unit[16];
        int n = 0;
        while (isalpha((unsigned char)*p) && n < 15)
            unit[n++] = (char)tolower((unsigned char)*p++);
        unit[n] = 0;
        if (isalpha((unsigned char)*p))
            goto bad;
        size_t k = 0;
        while (k < sizeof U / sizeof *U && strcmp(U[k].unit, n ? unit : "second") != 0)
            k++;
        if (k == sizeof U / sizeof *U) {
            if (!strncmp(unit, "mon", 3) || !strncmp(unit, "year", 4) || !strcmp(unit, "y"))
                return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000",
                                  "RANGE offsets in months or years are not supported (use days)");
            goto bad;
        }
        total += v * U[k].us;
        parts++;
    }
    if (!parts || !isfinite(total) || fabs(total) > 9.2e18)
        goto bad;
    *us = (int64_t)llround(total);
    return QR_OK;
bad:
    return sql_err_at(cx, loc, QR_EINVAL, "22007", "invalid input syntax for type interval: \"%s\"", txt);
}

/* An interval constant: 'text'::interval, interval 'text', or (over a
 * timestamp, as PostgreSQL resolves it) a bare string literal.  *text
 * NULL when the node is not one. */
static const char *interval_text(const cJSON *node)
{
    const cJSON *tc = sqlj_is(node, "TypeCast");
    if (tc) {
        const char *t = sqlj_last_name(sqlj_get(sqlj_get(tc, "typeName"), "names"));
        if (!t || strcmp(t, "interval") != 0)
            return NULL;
        node = sqlj_get(tc, "arg");
    }
    const cJSON *ac = sqlj_is(node, "A_Const");
    return ac ? sqlj_str(sqlj_get(ac, "sval"), "sval") : NULL;
}

/* n PRECEDING / FOLLOWING: a constant or a parameter (evaluated when the
 * query runs), typed by the frame mode and, for RANGE, the ORDER BY key. */
static int frame_offset(SqlQuery *s, SqlWinDef *w, const cJSON *node, SqlExpr **out)
{
    SqlCtx *cx = s->cx;
    int loc = sqlj_loc(node), rc;
    const char *mode = w->mode == SQL_FRAME_ROWS ? "ROWS" : w->mode == SQL_FRAME_GROUPS ? "GROUPS" : "RANGE";
    const char *itv = interval_text(node);
    const SqlExpr *key = w->mode == SQL_FRAME_RANGE ? w->order[0] : NULL;
    bool ts = key && sqlt_is_ts(key->type);
    SqlExpr *e = NULL;
    if (!(ts && itv) && !(key && sqlj_is(node, "TypeCast") && itv)) {
        /* bound on its own: it may read parameters, not columns or aggregates */
        SqlBind ob;
        memset(&ob, 0, sizeof ob);
        ob.cx = cx;
        ob.scope = &s->scope;
        if ((rc = sql_expr_bind(&ob, node, &e)))
            return rc;
        if (!sql_expr_is_const(e))
            return sql_err_at(cx, e->loc >= 0 ? e->loc : loc, QR_EINVAL, "42P10",
                              "argument of %s must not contain variables", mode);
    }
    if (key && (ts ? !itv : !sqlt_is_num(key->type) || !e))
        return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000",
                          "RANGE with offset PRECEDING/FOLLOWING is not supported for column type %s "
                          "and offset type %s", qr_sql_type_name(key->type),
                          e ? qr_sql_type_name(e->type == QR_SQL_UNKNOWN ? QR_SQL_TEXT : e->type)
                            : "interval");
    if (ts) { /* an interval over a timestamp: microseconds */
        int64_t us = 0;
        if ((rc = parse_interval(cx, itv, loc, &us)))
            return rc;
        if (!(e = qr_arena_calloc(cx->arena, sizeof *e)))
            return nomem(cx);
        e->kind = SE_CONST;
        e->loc = loc;
        e->val = sqlv_int(us);
        e->type = QR_SQL_INT8;
        w->off_us = true;
        *out = e;
        return QR_OK;
    }
    if ((rc = settle(cx, e, key ? key->type : QR_SQL_INT8)))
        return rc;
    if (key ? !sqlt_is_num(e->type) : !sqlt_is_int(e->type))
        return sql_err_at(cx, e->loc >= 0 ? e->loc : loc, QR_ETYPE, "42804",
                          "argument of %s must be type %s, not type %s", mode,
                          key ? qr_sql_type_name(key->type) : "bigint", qr_sql_type_name(e->type));
    *out = e;
    return QR_OK;
}

static int bind_frame(SqlQuery *s, const cJSON *wd, SqlWinDef *w)
{
    SqlCtx *cx = s->cx;
    int o = sqlj_int(wd, "frameOptions", 0), rc, loc = sqlj_loc(wd);
    w->has_frame = (o & FO_NONDEFAULT) != 0;
    if (!w->has_frame) { /* RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW */
        w->mode = SQL_FRAME_RANGE;
        w->start = SQL_FB_UNBOUNDED_PRECEDING;
        w->end = SQL_FB_CURRENT;
        return QR_OK;
    }
    w->mode = o & FO_ROWS ? SQL_FRAME_ROWS : o & FO_GROUPS ? SQL_FRAME_GROUPS : SQL_FRAME_RANGE;
    w->start = o & FO_START_UNBOUNDED_PRECEDING ? SQL_FB_UNBOUNDED_PRECEDING
               : o & FO_START_OFFSET_PRECEDING  ? SQL_FB_PRECEDING
               : o & FO_START_OFFSET_FOLLOWING  ? SQL_FB_FOLLOWING
                                                : SQL_FB_CURRENT;
    w->end = o & FO_END_UNBOUNDED_FOLLOWING ? SQL_FB_UNBOUNDED_FOLLOWING
             : o & FO_END_OFFSET_PRECEDING  ? SQL_FB_PRECEDING
             : o & FO_END_OFFSET_FOLLOWING  ? SQL_FB_FOLLOWING
                                            : SQL_FB_CURRENT;
    w->exclude = o & FO_EXCLUDE_CURRENT_ROW ? SQL_EXCLUDE_CURRENT
                 : o & FO_EXCLUDE_GROUP     ? SQL_EXCLUDE_GROUP
                 : o & FO_EXCLUDE_TIES      ? SQL_EXCLUDE_TIES
                                            : SQL_EXCLUDE_NONE;
    bool offsets = o & (FO_START_OFFSET_PRECEDING | FO_START_OFFSET_FOLLOWING |
                        FO_END_OFFSET_PRECEDING | FO_END_OFFSET_FOLLOWING);
    if (w->mode == SQL_FRAME_RANGE && offsets && w->n_order != 1)
        return sql_err_at(cx, loc, QR_EINVAL, "42P20",
                          "RANGE with offset PRECEDING/FOLLOWING requires exactly one ORDER BY column");
    if (w->mode == SQL_FRAME_GROUPS && w->n_order == 0)
        return sql_err_at(cx, loc, QR_EINVAL, "42P20", "GROUPS mode requires an ORDER BY clause");
    if ((w->start == SQL_FB_PRECEDING || w->start == SQL_FB_FOLLOWING) &&
        (rc = frame_offset(s, w, sqlj_get(wd, "startOffset"), &w->start_off)))
        return rc;
    if ((w->end == SQL_FB_PRECEDING || w->end == SQL_FB_FOLLOWING) &&
        (rc = frame_offset(s, w, sqlj_get(wd, "endOffset"), &w->end_off)))
        return rc;
    return QR_OK;
}

/* A window from a WindowDef node: an OVER clause (over) or a WINDOW
 * clause entry.  Its expressions are "window definitions": aggregates
 * allowed (grouped rows), window functions not. */
static int bind_windef(SqlQuery *s, const cJSON *wd, bool over, SqlWinDef **out)
{
    SqlCtx *cx = s->cx;
    const char *name = sqlj_str(wd, "name"), *ref = sqlj_str(wd, "refname");
    int loc = sqlj_loc(wd), rc = QR_OK;
    if (over && name) { /* OVER w */
        if (!(*out = find_named(s, name)))
            return sql_err_at(cx, loc, QR_ENOTFOUND, "42704", "window \"%s\" does not exist", name);
        return QR_OK;
    }
    SqlWinDef *base = NULL;
    if (ref) {
        if (!(base = find_named(s, ref)))
            return sql_err_at(cx, loc, QR_ENOTFOUND, "42704", "window \"%s\" does not exist", ref);
        if (sqlj_get(wd, "partitionClause"))
            return sql_err_at(cx, loc, QR_EINVAL, "42P20",
                              "cannot override PARTITION BY clause of window \"%s\"", ref);
        if (sqlj_get(wd, "orderClause") && base->n_order)
            return sql_err_at(cx, loc, QR_EINVAL, "42P20",
                              "cannot override ORDER BY clause of window \"%s\"", ref);
        if (base->has_frame)
            return sql_err_at(cx, loc, QR_EINVAL, "42P20",
                              "cannot copy window \"%s\" because it has a frame clause", ref);
    }
    SqlWinDef *w = qr_arena_calloc(cx->arena, sizeof *w);
    if (!w)
        return nomem(cx);
    const char *clause = s->clause;
    bool win_ok = s->win_ok;
    s->clause = "window definitions";
    s->win_ok = false;
    w->name = over ? NULL : name;
    if (base) {
        w->part = base->part;
        w->n_part = base->n_part;
    } else {
        rc = bind_part(s, sqlj_get(wd, "partitionClause"), w);
    }
    if (rc == QR_OK && base && base->n_order) {
        w->order = base->order;
        w->desc = base->desc;
        w->nulls_first = base->nulls_first;
        w->n_order = base->n_order;
    } else if (rc == QR_OK) {
        rc = bind_order(s, sqlj_get(wd, "orderClause"), w);
    }
    if (rc == QR_OK)
        rc = bind_frame(s, wd, w);
    s->clause = clause;
    s->win_ok = win_ok;
    if (rc == QR_OK)
        *out = w;
    return rc;
}

int sql_bind_window_clause(SqlQuery *s, const cJSON *wc)
{
    SqlCtx *cx = s->cx;
    int n = cJSON_GetArraySize(wc), rc;
    if (!n)
        return QR_OK;
    if (!(s->windefs = qr_arena_calloc(cx->arena, (size_t)(n + 1) * sizeof *s->windefs)))
        return nomem(cx);
    const cJSON *it;
    cJSON_ArrayForEach(it, wc)
    {
        const cJSON *wd = sqlj_is(it, "WindowDef");
        const char *name = sqlj_str(wd, "name");
        if (!wd || !name)
            return sql_err_at(cx, sqlj_loc(it), QR_ESYNTAX, "42601", "bad WINDOW clause");
        if (find_named(s, name))
            return sql_err_at(cx, sqlj_loc(it), QR_EINVAL, "42P20", "window \"%s\" is already defined",
                              name);
        SqlWinDef *w;
        if ((rc = bind_windef(s, wd, false, &w)))
            return rc;
        s->windefs[s->n_windefs++] = w;
    }
    return QR_OK;
}

/* ---- calls ---- */

static bool same_list(SqlExpr *const *a, SqlExpr *const *b, int n)
{
    for (int i = 0; i < n; i++)
        if (!(a[i] == b[i] || (a[i] && b[i] && sql_expr_same(a[i], b[i]))))
            return false;
    return true;
}

static bool same_window(const SqlWinDef *a, const SqlWinDef *b)
{
    if (a == b)
        return true;
    if (a->n_part != b->n_part || a->n_order != b->n_order || a->mode != b->mode ||
        a->start != b->start || a->end != b->end || a->exclude != b->exclude ||
        !same_list(a->part, b->part, a->n_part) || !same_list(a->order, b->order, a->n_order))
        return false;
    for (int i = 0; i < a->n_order; i++)
        if (a->desc[i] != b->desc[i] || a->nulls_first[i] != b->nulls_first[i])
            return false;
    return same_list(&a->start_off, &b->start_off, 1) && same_list(&a->end_off, &b->end_off, 1);
}

/* Two calls computing the same values (they share a column). */
static bool same_call(const SqlWinFunc *a, const SqlWinFunc *b)
{
    if (a->kind != b->kind || strcmp(a->name, b->name) != 0 || a->n_args != b->n_args ||
        a->type != b->type || !same_list(a->args, b->args, a->n_args) || !same_window(a->win, b->win))
        return false;
    if (!a->agg)
        return true;
    const SqlAgg *x = a->agg, *y = b->agg;
    return x->kind == y->kind && same_list(&x->arg, &y->arg, 1) && same_list(&x->arg2, &y->arg2, 1) &&
           same_list(&x->filter, &y->filter, 1);
}

/* The arguments of a window function that is not an aggregate, typed. */
static int bind_args(SqlBind *b, const cJSON *args, SqlWinFunc *f, int loc)
{
    SqlCtx *cx = b->cx;
    int n = cJSON_GetArraySize(args), rc;
    if (!(f->args = qr_arena_calloc(cx->arena, (size_t)(n + 1) * sizeof *f->args)))
        return nomem(cx);
    for (int i = 0; i < n; i++) {
        if ((rc = sql_expr_bind(b, cJSON_GetArrayItem(args, i), &f->args[i])))
            return rc;
        f->n_args++;
    }
    SqlExpr **a = f->args;
    /* integer arguments: ntile's buckets, lag / lead's offset, nth_value's n */
    int ia = f->kind == SW_NTILE ? 0 : f->kind == SW_NTH_VALUE || f->kind == SW_LAG || f->kind == SW_LEAD ? 1 : -1;
    if (ia >= 0 && ia < n) {
        if ((rc = settle(cx, a[ia], QR_SQL_INT8)))
            return rc;
        if (!sqlt_is_int(a[ia]->type))
            return sql_err_at(cx, a[ia]->loc >= 0 ? a[ia]->loc : loc, QR_ENOTFOUND, "42883",
                              "function %s with argument %d of type %s does not exist", f->name,
                              ia + 1, qr_sql_type_name(a[ia]->type));
    }
    switch (f->kind) {
    case SW_ROW_NUMBER:
    case SW_RANK:
    case SW_DENSE_RANK:
        f->type = QR_SQL_INT8;
        break;
    case SW_PERCENT_RANK:
    case SW_CUME_DIST:
        f->type = QR_SQL_FLOAT8;
        break;
    case SW_NTILE:
        f->type = QR_SQL_INT4;
        break;
    default: /* the value's type; lag / lead's default shares it (anycompatible) */
        if ((rc = settle(cx, a[0], n == 3 && a[2]->type != QR_SQL_UNKNOWN ? a[2]->type : QR_SQL_TEXT)))
            return rc;
        f->type = a[0]->type;
        if (n == 3) {
            QrSqlType t = a[0]->type, d;
            if ((rc = settle(cx, a[2], t)))
                return rc;
            d = a[2]->type;
            if (d != t) {
                if (sqlt_is_num(t) && sqlt_is_num(d))
                    f->type = sqlt_num_common(t, d);
                else if (sqlt_is_str(t) && sqlt_is_str(d))
                    f->type = QR_SQL_TEXT;
                else if (sqlt_is_ts(t) && sqlt_is_ts(d))
                    f->type = QR_SQL_TIMESTAMPTZ;
                else
                    return sql_err_at(cx, loc, QR_ENOTFOUND, "42883",
                                      "function %s(%s, bigint, %s) does not exist", f->name,
                                      qr_sql_type_name(t), qr_sql_type_name(d));
            }
        }
        break;
    }
    return QR_OK;
}

int sql_bind_window_call(SqlBind *b, const cJSON *fc, const char *lname, int loc, SqlExpr **out)
{
    SqlQuery *s = b->hook_arg;
    SqlCtx *cx = b->cx;
    int rc;
    if (b->in_agg)
        return sql_err_at(cx, loc, QR_EINVAL, "42803",
                          "aggregate function calls cannot contain window function calls");
    if (b->in_win)
        return sql_err_at(cx, loc, QR_EINVAL, "42P20", "window function calls cannot be nested");
    if (!s->win_ok)
        return sql_err_at(cx, loc, QR_EINVAL, "42P20", "window functions are not allowed in %s",
                          s->clause ? s->clause : "this context");
    SqlWinFunc *f = qr_arena_calloc(cx->arena, sizeof *f);
    if (!f || !(f->name = qr_arena_strndup(cx->arena, lname, strlen(lname))))
        return nomem(cx);
    size_t k = 0;
    while (k < sizeof WINFNS / sizeof *WINFNS && strcmp(WINFNS[k].name, lname) != 0)
        k++;
    const cJSON *args = sqlj_get(fc, "args");
    int nargs = cJSON_GetArraySize(args);
    if (k == sizeof WINFNS / sizeof *WINFNS) {
        if (!sql_agg_known(lname))
            return sql_err_at(cx, loc, QR_EINVAL, "42809",
                              "OVER specified, but %s is not a window function nor an aggregate "
                              "function", lname);
        f->kind = SW_AGG;
        b->in_win = true;
        rc = sql_agg_bind(b, fc, lname, loc, true, &f->agg);
        b->in_win = false;
        if (rc)
            return rc;
        f->type = f->agg->type;
        nargs = f->agg->kind == SA_COUNT_STAR ? 0 : nargs;
    } else {
        f->kind = WINFNS[k].kind;
        /* PostgreSQL 15 refuses these three with the same 0A000 words
         * (parse_func.c): clients see what PostgreSQL would answer */
        if (sqlj_get(fc, "agg_filter"))
            return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000",
                              "FILTER is not implemented for non-aggregate window functions");
        if (sqlj_bool(fc, "agg_distinct"))
            return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000",
                              "DISTINCT is not implemented for window functions");
        if (sqlj_get(fc, "agg_order"))
            return sql_err_at(cx, loc, QR_EUNSUPPORTED, "0A000",
                              "aggregate ORDER BY is not implemented for window functions");
        if (sqlj_bool(fc, "agg_star") || nargs < WINFNS[k].min_args || nargs > WINFNS[k].max_args)
            return sql_err_at(cx, loc, QR_ENOTFOUND, "42883", "function %s with %d arguments does not exist",
                              lname, nargs);
        b->in_win = true;
        rc = bind_args(b, args, f, loc);
        b->in_win = false;
        if (rc)
            return rc;
    }
    if ((rc = bind_windef(s, sqlj_get(fc, "over"), true, &f->win)))
        return rc;
    /* an identical call (ORDER BY repeating a select-list item) shares its column */
    for (int i = 0; i < s->n_wins; i++)
        if (same_call(s->wins[i], f)) {
            *out = s->wins[i]->ref;
            return QR_OK;
        }
    if (s->n_wins == s->cap_wins) {
        int nc = s->cap_wins ? s->cap_wins * 2 : 8;
        SqlWinFunc **nw = qr_arena_alloc(cx->arena, (size_t)nc * sizeof *nw);
        if (!nw)
            return nomem(cx);
        if (s->n_wins)
            memcpy(nw, s->wins, (size_t)s->n_wins * sizeof *nw);
        s->wins = nw;
        s->cap_wins = nc;
    }
    SqlExpr *e = qr_arena_calloc(cx->arena, sizeof *e);
    if (!e)
        return nomem(cx);
    e->kind = SE_WIN;
    e->loc = loc;
    e->type = f->type;
    e->name = f->name;
    e->op = nargs;
    e->col = s->n_wins; /* the slot; its column once binding ends */
    f->ref = e;
    s->wins[s->n_wins++] = f;
    *out = e;
    return QR_OK;
}

/* ---- the end of binding ---- */

static int check_grouped(SqlQuery *s, SqlExpr *const *v, int n)
{
    for (int i = 0; i < n; i++) {
        const SqlExpr *x = v[i] ? sql_bind_ungrouped(v[i], s->groups, s->n_groups) : NULL;
        if (x)
            return sql_err_at(s->cx, x->loc, QR_EINVAL, "42803",
                              "column \"%s\" must appear in the GROUP BY clause or be used in an "
                              "aggregate function", x->name ? x->name : "?");
    }
    return QR_OK;
}

int sql_bind_windows_check(SqlQuery *s)
{
    int rc;
    if (!s->grouped)
        return QR_OK;
    for (int i = 0; i < s->n_wins; i++) {
        const SqlWinFunc *f = s->wins[i];
        if ((rc = check_grouped(s, f->args, f->n_args)) ||
            (rc = check_grouped(s, f->win->part, f->win->n_part)) ||
            (rc = check_grouped(s, f->win->order, f->win->n_order)))
            return rc;
        if (f->agg && ((rc = check_grouped(s, &f->agg->arg, 1)) || (rc = check_grouped(s, &f->agg->arg2, 1)) ||
                       (rc = check_grouped(s, &f->agg->filter, 1))))
            return rc;
    }
    return QR_OK;
}

void sql_bind_windows_place(SqlQuery *s)
{
    int base = s->scope.n + (s->grouped ? s->bind.n_aggs : 0);
    for (int i = 0; i < s->n_wins; i++) {
        s->wins[i]->col = base + i;
        s->wins[i]->ref->col = base + i;
    }
}
