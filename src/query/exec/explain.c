/*
 * explain.c — EXPLAIN of an operator tree, as PostgreSQL prints it: one
 * line per node with its estimates `(cost=a..b rows=n width=w)` (and
 * under ANALYZE `(actual time=a..b rows=n loops=l)`), its properties
 * indented under it, children after "->".  FORMAT JSON gives the same tree
 * as objects ("Node Type", "Startup Cost", ..., "Plans").  Also the SQL
 * text of bound expressions for those properties.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- node properties ---- */

void sql_explain_type(SqlExplainNode *n, const char *type, const char *relation, const char *alias)
{
    n->type = type;
    n->relation = relation;
    n->alias = alias;
}

static void add_prop(SqlExplainNode *n, SqlCtx *cx, const char *key, bool analyze_only,
                     const char *fmt, va_list ap)
{
    if (n->n_props == SQL_EXPLAIN_MAX_PROPS)
        return;
    char buf[2048];
    vsnprintf(buf, sizeof buf, fmt, ap);
    char *v = qr_arena_strndup(cx->arena, buf, strlen(buf));
    if (!v)
        return;
    n->props[n->n_props].key = key;
    n->props[n->n_props].val = v;
    n->props[n->n_props].analyze_only = analyze_only;
    n->n_props++;
}

void sql_explain_prop(SqlExplainNode *n, SqlCtx *cx, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_prop(n, cx, key, false, fmt, ap);
    va_end(ap);
}

void sql_explain_actual(SqlExplainNode *n, SqlCtx *cx, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_prop(n, cx, key, true, fmt, ap);
    va_end(ap);
}

/* ---- expressions as SQL ---- */

static void expr_sql(QrBuf *b, SqlCtx *cx, const SqlExpr *e, const SqlScope *scope, bool qualify,
                     int depth);

static void args_sql(QrBuf *b, SqlCtx *cx, const SqlExpr *e, int from, const SqlScope *scope,
                     bool qualify, int depth)
{
    for (int i = from; i < e->n_args; i++) {
        if (i > from)
            qr_buf_append(b, ", ", 2);
        expr_sql(b, cx, e->args[i], scope, qualify, depth + 1);
    }
}

static void value_sql(QrBuf *b, const SqlValue *v)
{
    if (v->is_null) {
        qr_buf_append(b, "NULL", 4);
        return;
    }
    QrBuf t;
    qr_buf_init(&t);
    qr_sql_value_text(v, &t);
    bool quote = sqlt_is_str(v->type) || sqlt_is_ts(v->type) || QR_SQL_IS_ARRAY(v->type);
    if (quote) {
        qr_buf_putc(b, '\'');
        for (size_t i = 0; i < t.len; i++) {
            char c = ((char *)t.data)[i];
            if (c == '\'')
                qr_buf_putc(b, '\'');
            qr_buf_putc(b, c);
        }
        qr_buf_putc(b, '\'');
    } else if (t.len) {
        qr_buf_append(b, t.data, t.len);
    }
    qr_buf_free(&t);
}

static void expr_sql(QrBuf *b, SqlCtx *cx, const SqlExpr *e, const SqlScope *scope, bool qualify,
                     int depth)
{
    static const char *CMP[] = {"=", "<>", "<", "<=", ">", ">="};
    if (!e) {
        qr_buf_append(b, "?", 1);
        return;
    }
    if (depth > 64) {
        qr_buf_append(b, "...", 3);
        return;
    }
    switch (e->kind) {
    case SE_CONST:
        value_sql(b, &e->val);
        return;
    case SE_COL:
    case SE_SCORE: {
        const SqlCol *c = scope && e->col < scope->n ? &scope->cols[e->col] : NULL;
        if (e->kind == SE_SCORE && (!c || !c->name || strcmp(c->name, "_score") != 0)) {
            qr_buf_append(b, "score()", 7);
            return;
        }
        if (qualify && c && c->qual)
            qr_buf_printf(b, "%s.", c->qual);
        const char *name = c ? c->name : e->name;
        qr_buf_printf(b, "%s", name ? name : "?");
        return;
    }
    case SE_OUTER:
        qr_buf_printf(b, "%s", e->name ? e->name : "?");
        return;
    case SE_PARAM:
        qr_buf_printf(b, "$%d", e->col + 1);
        return;
    case SE_AGG: /* (op 1: a grouping set's key, named as its expression) */
        qr_buf_printf(b, e->op == 1 ? "%s" : "%s(...)", e->name ? e->name : "agg");
        return;
    case SE_WIN: /* as PostgreSQL prints a window function's reference */
        qr_buf_printf(b, "%s(%s) OVER (?)", e->name ? e->name : "?", e->op ? "..." : "");
        return;
    case SE_ARITH:
    case SE_CMP:
    case SE_CONCAT: {
        char op[3] = {(char)e->op, 0, 0};
        const char *o = e->kind == SE_CMP ? (e->op >= 0 && e->op < 6 ? CMP[e->op] : "?")
                        : e->kind == SE_CONCAT ? "||"
                                               : op;
        qr_buf_putc(b, '(');
        expr_sql(b, cx, e->args[0], scope, qualify, depth + 1);
        qr_buf_printf(b, " %s ", o);
        if (e->n_args > 1)
            expr_sql(b, cx, e->args[1], scope, qualify, depth + 1);
        qr_buf_putc(b, ')');
        return;
    }
    case SE_NEG:
        qr_buf_append(b, "(-", 2);
        expr_sql(b, cx, e->args[0], scope, qualify, depth + 1);
        qr_buf_putc(b, ')');
        return;
    case SE_AND:
    case SE_OR:
        qr_buf_putc(b, '(');
        for (int i = 0; i < e->n_args; i++) {
            if (i)
                qr_buf_printf(b, " %s ", e->kind == SE_AND ? "AND" : "OR");
            expr_sql(b, cx, e->args[i], scope, qualify, depth + 1);
        }
        qr_buf_putc(b, ')');
        return;
    case SE_NOT:
        qr_buf_append(b, "(NOT ", 5);
        expr_sql(b, cx, e->args[0], scope, qualify, depth + 1);
        qr_buf_putc(b, ')');
        return;
    case SE_IS_NULL:
    case SE_IS_NOT_NULL:
    case SE_IS_TRUE:
    case SE_IS_FALSE:
        qr_buf_putc(b, '(');
        expr_sql(b, cx, e->args[0], scope, qualify, depth + 1);
        qr_buf_printf(b, " %s)", e->kind == SE_IS_NULL       ? "IS NULL"
                                 : e->kind == SE_IS_NOT_NULL ? "IS NOT NULL"
                                 : e->kind == SE_IS_TRUE     ? "IS TRUE"
                                                             : "IS FALSE");
        return;
    case SE_IN:
        qr_buf_putc(b, '(');
        expr_sql(b, cx, e->args[0], scope, qualify, depth + 1);
        qr_buf_printf(b, " %sIN (", e->op & 1 ? "NOT " : "");
        args_sql(b, cx, e, 1, scope, qualify, depth);
        qr_buf_append(b, "))", 2);
        return;
    case SE_IN_SET:
        qr_buf_putc(b, '(');
        expr_sql(b, cx, e->args[0], scope, qualify, depth + 1);
        qr_buf_printf(b, " %sIN (SubPlan))", e->op & 1 ? "NOT " : "");
        return;
    case SE_LIKE: {
        const char *op = e->op & 4 ? (e->op & 1 ? (e->op & 2 ? "!~*" : "~*") : (e->op & 2 ? "!~" : "~"))
                                   : (e->op & 1 ? (e->op & 2 ? "NOT ILIKE" : "ILIKE")
                                                : (e->op & 2 ? "NOT LIKE" : "LIKE"));
        qr_buf_putc(b, '(');
        expr_sql(b, cx, e->args[0], scope, qualify, depth + 1);
        qr_buf_printf(b, " %s ", op);
        expr_sql(b, cx, e->args[1], scope, qualify, depth + 1);
        qr_buf_putc(b, ')');
        return;
    }
    case SE_CASE: {
        qr_buf_append(b, "CASE", 4);
        int i = 0;
        if (e->case_has_arg) {
            qr_buf_putc(b, ' ');
            expr_sql(b, cx, e->args[0], scope, qualify, depth + 1);
            i = 1;
        }
        int end = e->n_args - (e->case_has_else ? 1 : 0);
        for (; i + 1 < end; i += 2) {
            qr_buf_append(b, " WHEN ", 6);
            expr_sql(b, cx, e->args[i], scope, qualify, depth + 1);
            qr_buf_append(b, " THEN ", 6);
            expr_sql(b, cx, e->args[i + 1], scope, qualify, depth + 1);
        }
        if (e->case_has_else) {
            qr_buf_append(b, " ELSE ", 6);
            expr_sql(b, cx, e->args[e->n_args - 1], scope, qualify, depth + 1);
        }
        qr_buf_append(b, " END", 4);
        return;
    }
    case SE_CAST:
        qr_buf_putc(b, '(');
        expr_sql(b, cx, e->args[0], scope, qualify, depth + 1);
        qr_buf_printf(b, ")::%s", qr_sql_type_name(e->type));
        return;
    case SE_COALESCE:
    case SE_NULLIF:
    case SE_GREATEST:
    case SE_LEAST:
    case SE_FUNC:
    case SE_SRF: {
        const char *fn = e->kind == SE_COALESCE  ? "COALESCE"
                         : e->kind == SE_NULLIF  ? "NULLIF"
                         : e->kind == SE_GREATEST ? "GREATEST"
                         : e->kind == SE_LEAST   ? "LEAST"
                         : e->fn && e->fn->name  ? e->fn->name
                         : e->name               ? e->name
                                                 : "?";
        qr_buf_printf(b, "%s(", fn);
        args_sql(b, cx, e, 0, scope, qualify, depth);
        qr_buf_putc(b, ')');
        return;
    }
    case SE_MATCH:
    case SE_SNIPPET: {
        const SqlTextPred *tp = e->text;
        if (e->kind == SE_SNIPPET) { /* snippet(col), else the table's */
            qr_buf_printf(b, "%s(%s)", e->name ? e->name : "snippet",
                          e->op && e->n_args ? e->args[0]->name : tp ? tp->qual : "?");
            return;
        }
        qr_buf_printf(b, "(%s @@ ", tp && tp->field ? tp->field : tp && tp->qual ? tp->qual : "?");
        if (tp)
            expr_sql(b, cx, tp->query, scope, qualify, depth + 1);
        qr_buf_putc(b, ')');
        return;
    }
    case SE_SUBQ:
        qr_buf_append(b, "(SubPlan)", 9);
        return;
    case SE_ANY_ARRAY:
        qr_buf_putc(b, '(');
        expr_sql(b, cx, e->args[0], scope, qualify, depth + 1);
        qr_buf_printf(b, " %s %s (", (e->op & 7) < 6 ? CMP[e->op & 7] : "?",
                      e->op >= 8 ? "ALL" : "ANY");
        expr_sql(b, cx, e->args[1], scope, qualify, depth + 1);
        qr_buf_append(b, "))", 2);
        return;
    case SE_ARRAY:
        qr_buf_append(b, "ARRAY[", 6);
        args_sql(b, cx, e, 0, scope, qualify, depth);
        qr_buf_putc(b, ']');
        return;
    case SE_SUBSCRIPT:
        qr_buf_putc(b, '(');
        expr_sql(b, cx, e->args[0], scope, qualify, depth + 1);
        qr_buf_putc(b, ')');
        for (int k = 1; k + 1 < e->n_args; k += 2) {
            qr_buf_putc(b, '[');
            if (e->op && !(e->args[k]->kind == SE_CONST && e->args[k]->val.is_null))
                expr_sql(b, cx, e->args[k], scope, qualify, depth + 1);
            if (e->op)
                qr_buf_putc(b, ':');
            if (!(e->args[k + 1]->kind == SE_CONST && e->args[k + 1]->val.is_null))
                expr_sql(b, cx, e->args[k + 1], scope, qualify, depth + 1);
            qr_buf_putc(b, ']');
        }
        return;
    case SE_JSON_OP:
        qr_buf_putc(b, '(');
        expr_sql(b, cx, e->args[0], scope, qualify, depth + 1);
        qr_buf_printf(b, " %s ", e->op == SQLJS_GET ? "->" : e->op == SQLJS_GET_TEXT ? "->>"
                                 : e->op == SQLJS_PATH ? "#>" : "#>>");
        expr_sql(b, cx, e->args[1], scope, qualify, depth + 1);
        qr_buf_putc(b, ')');
        return;
    case SE_ARRAY_OP:
        qr_buf_putc(b, '(');
        expr_sql(b, cx, e->args[0], scope, qualify, depth + 1);
        qr_buf_printf(b, " %s ", e->op == '|'                 ? "||"
                                 : e->op == SQLA_OP_CONTAINS  ? "@>"
                                 : e->op == SQLA_OP_CONTAINED ? "<@"
                                                              : "&&");
        expr_sql(b, cx, e->args[1], scope, qualify, depth + 1);
        qr_buf_putc(b, ')');
        return;
    }
    qr_buf_append(b, "?", 1);
}

const char *sql_expr_sql(SqlCtx *cx, const SqlExpr *e, const SqlScope *scope, bool qualify)
{
    if (!scope && cx->ex)
        scope = cx->ex->scope;
    QrBuf b;
    qr_buf_init(&b);
    expr_sql(&b, cx, e, scope, qualify, 0);
    char *s = qr_arena_strndup(cx->arena, b.data ? (char *)b.data : "", b.len);
    qr_buf_free(&b);
    return s ? s : "?";
}

const char *sql_conj_sql(SqlCtx *cx, SqlExpr *const *conj, int n, const SqlScope *scope,
                         bool qualify)
{
    if (n == 1)
        return sql_expr_sql(cx, conj[0], scope, qualify);
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_putc(&b, '(');
    for (int i = 0; i < n; i++)
        qr_buf_printf(&b, "%s%s", i ? " AND " : "", sql_expr_sql(cx, conj[i], scope, qualify));
    qr_buf_putc(&b, ')');
    char *s = qr_arena_strndup(cx->arena, b.data ? (char *)b.data : "", b.len);
    qr_buf_free(&b);
    return s ? s : "?";
}

/* ---- the tree ---- */

static double ms(uint64_t ns) { return (double)ns / 1e6; }

static void label(QrBuf *b, const SqlExplainNode *n)
{
    qr_buf_printf(b, "%s", n->type ? n->type : "?");
    if (n->relation) {
        qr_buf_printf(b, " on %s", n->relation);
        if (n->alias && strcmp(n->alias, n->relation) != 0)
            qr_buf_printf(b, " %s", n->alias);
    }
    if (n->extra)
        qr_buf_printf(b, " %s", n->extra);
}

static void text_node(SqlCtx *cx, const SqlOp *op, int depth, int base);

/* A query block's root prints its subtree in the block's own columns. */
static void text_block(SqlCtx *cx, const SqlOp *op, int depth, int base)
{
    const SqlScope *saved = cx->ex->scope;
    if (op->scope)
        cx->ex->scope = op->scope;
    text_node(cx, op, depth, base);
    cx->ex->scope = saved;
}

static void text_node(SqlCtx *cx, const SqlOp *op, int depth, int base)
{
    struct SqlExplain *ex = cx->ex;
    SqlExplainNode n;
    memset(&n, 0, sizeof n);
    op->vt->explain(op, cx, &n);
    if (!n.type) { /* a transparent node (a plain projection): its child in its place */
        for (int k = 0; k < op->n_kids; k++)
            if (op->kids[k])
                text_block(cx, op->kids[k], depth, base);
        return;
    }
    int ind = base + (depth ? 6 * depth - 4 : 0);
    QrBuf *out = &ex->lines;
    for (int i = 0; i < ind; i++)
        qr_buf_putc(out, ' ');
    if (depth)
        qr_buf_append(out, "->  ", 4);
    label(out, &n);
    if (ex->costs)
        qr_buf_printf(out, "  (cost=%.2f..%.2f rows=%.0f width=%d)", op->startup_cost, op->total_cost,
                      op->est_rows < 0 ? 0 : op->est_rows, op->est_width ? op->est_width : 8 * op->width);
    if (ex->analyze) {
        uint64_t loops = op->st.loops ? op->st.loops : 1;
        if (op->st.loops)
            qr_buf_printf(out, " (actual time=%.3f..%.3f rows=%" PRIu64 " loops=%" PRIu64 ")",
                          ms(op->st.ns_first) / (double)loops, ms(op->st.ns_total) / (double)loops,
                          op->st.rows / loops, op->st.loops);
        else
            qr_buf_printf(out, " (never executed)");
    }
    qr_buf_putc(out, '\n');
    int pind = base + 6 * depth + 2;
    for (int i = 0; i < n.n_props; i++) {
        if (n.props[i].analyze_only && !ex->analyze)
            continue;
        for (int k = 0; k < pind; k++)
            qr_buf_putc(out, ' ');
        qr_buf_printf(out, "%s: %s\n", n.props[i].key, n.props[i].val);
    }
    for (int k = 0; k < op->n_kids; k++)
        if (op->kids[k])
            text_block(cx, op->kids[k], depth + 1, base);
}

static cJSON *json_node(SqlCtx *cx, const SqlOp *op);

static cJSON *json_block(SqlCtx *cx, const SqlOp *op)
{
    const SqlScope *saved = cx->ex->scope;
    if (op->scope)
        cx->ex->scope = op->scope;
    cJSON *o = json_node(cx, op);
    cx->ex->scope = saved;
    return o;
}

static cJSON *json_node(SqlCtx *cx, const SqlOp *op)
{
    struct SqlExplain *ex = cx->ex;
    SqlExplainNode n;
    memset(&n, 0, sizeof n);
    op->vt->explain(op, cx, &n);
    if (!n.type && op->n_kids == 1 && op->kids[0])
        return json_block(cx, op->kids[0]);
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "Node Type", n.type ? n.type : "?");
    if (n.relation) {
        cJSON_AddStringToObject(o, "Relation Name", n.relation);
        cJSON_AddStringToObject(o, "Alias", n.alias ? n.alias : n.relation);
    }
    if (ex->costs) {
        cJSON_AddNumberToObject(o, "Startup Cost", op->startup_cost);
        cJSON_AddNumberToObject(o, "Total Cost", op->total_cost);
        cJSON_AddNumberToObject(o, "Plan Rows", op->est_rows < 0 ? 0 : (double)(uint64_t)op->est_rows);
        cJSON_AddNumberToObject(o, "Plan Width", op->est_width ? op->est_width : 8 * op->width);
    }
    if (ex->analyze) {
        uint64_t loops = op->st.loops ? op->st.loops : 1;
        cJSON_AddNumberToObject(o, "Actual Startup Time", ms(op->st.ns_first) / (double)loops);
        cJSON_AddNumberToObject(o, "Actual Total Time", ms(op->st.ns_total) / (double)loops);
        cJSON_AddNumberToObject(o, "Actual Rows", (double)(op->st.rows / loops));
        cJSON_AddNumberToObject(o, "Actual Loops", (double)op->st.loops);
    }
    for (int i = 0; i < n.n_props; i++) {
        if (n.props[i].analyze_only && !ex->analyze)
            continue;
        if (!cJSON_GetObjectItemCaseSensitive(o, n.props[i].key))
            cJSON_AddStringToObject(o, n.props[i].key, n.props[i].val);
    }
    if (op->n_kids) {
        cJSON *plans = cJSON_AddArrayToObject(o, "Plans");
        for (int k = 0; plans && k < op->n_kids; k++) {
            cJSON *kid = op->kids[k] ? json_block(cx, op->kids[k]) : NULL;
            if (kid)
                cJSON_AddItemToArray(plans, kid);
        }
    }
    return o;
}

void sql_explain_tree(SqlCtx *cx, const SqlOp *root, const SqlScope *scope, int level)
{
    struct SqlExplain *ex = cx->ex;
    if (!ex || !root)
        return;
    const SqlScope *saved = ex->scope;
    ex->scope = scope;
    if (ex->json) {
        cJSON *plan = json_node(cx, root);
        cJSON *entry = plan ? cJSON_CreateObject() : NULL;
        if (entry) {
            cJSON_AddItemToObject(entry, "Plan", plan);
            if (level > 0)
                cJSON_AddNumberToObject(entry, "Subquery Level", level);
            cJSON_AddItemToArray(ex->json, entry);
        } else {
            cJSON_Delete(plan);
        }
    } else {
        if (level > 0) {
            for (int i = 0; i < 2 * (level - 1); i++)
                qr_buf_putc(&ex->lines, ' ');
            qr_buf_printf(&ex->lines, "SubPlan (level %d)\n", level);
        }
        text_node(cx, root, 0, level > 0 ? 2 * level : 0);
    }
    ex->scope = saved;
}
