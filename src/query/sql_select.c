/*
 * sql_select.c — queries as the statement layer sees them: bind a SELECT
 * (plan/bind.c), run it (plan/planner.c), describe its columns at prepare,
 * and EXPLAIN [ANALYZE] [(FORMAT JSON | SCORES)].
 *
 * Layer: query/ (SQL).  Calls plan/ and exec/.
 */
#include "query/plan/plan.h"

#include <inttypes.h>
#include <string.h>
#include <strings.h>

#include "store/util.h"

static int nomem(SqlCtx *cx) { return sql_nomem(cx); }

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

int sql_query_run_bound(SqlCtx *cx, SqlQuery *q, QrSqlResult *res)
{
    QrSqlResult r;
    int rc = sql_query_exec(cx, q, &r);
    if (rc)
        return rc;
    /* the columns are the bound query's: the result gets its own copy */
    res->n_cols = r.n_cols;
    res->cols = qr_arena_alloc(cx->arena, ((size_t)r.n_cols + 1) * sizeof *res->cols);
    if (!res->cols)
        return nomem(cx);
    memcpy(res->cols, r.cols, (size_t)r.n_cols * sizeof *res->cols);
    res->n_rows = r.n_rows;
    res->vals = r.vals;
    return own_names(cx, res->cols, res->n_cols);
}

int sql_query_run(SqlCtx *cx, const cJSON *select_node, QrSqlResult *res)
{
    SqlQuery *q;
    int rc = sql_bind_query(cx, select_node, &q);
    return rc ? rc : sql_query_run_bound(cx, q, res);
}

int sql_query_bind(SqlCtx *cx, const cJSON *select_node, SqlQuery **q, QrSqlColumn **cols,
                   int *n_cols)
{
    bool was = cx->analyze_only;
    cx->analyze_only = true;
    int rc = sql_bind_query(cx, select_node, q);
    cx->analyze_only = was;
    if (rc)
        return rc;
    QrSqlColumn *c = qr_arena_alloc(cx->arena, ((size_t)(*q)->n_cols + 1) * sizeof *c);
    if (!c)
        return sql_nomem(cx);
    memcpy(c, (*q)->cols, (size_t)(*q)->n_cols * sizeof *c);
    *cols = c;
    *n_cols = (*q)->n_cols;
    return own_names(cx, c, *n_cols);
}

int sql_query_describe(SqlCtx *cx, const cJSON *select_node, QrSqlColumn **cols, int *n_cols)
{
    SqlQuery *q;
    return sql_query_bind(cx, select_node, &q, cols, n_cols);
}

/* EXPLAIN without ANALYZE of SELECT ... FOR UPDATE / FOR SHARE: what
 * postgres_fdw sends with use_remote_estimate to cost the scan of an UPDATE
 * or DELETE it then pushes down whole (docs/scale-out.md).  Nothing runs
 * and nothing is locked, so the plan is the plain SELECT's: a copy of q
 * without its locking clause, ctid (which Quarry's rows do not have)
 * planned as NULL.  NULL when out of memory. */
static cJSON *explain_unlocked(const cJSON *q)
{
    cJSON *d = cJSON_Duplicate(q, true);
    cJSON *sel = d ? cJSON_GetObjectItemCaseSensitive(d, "SelectStmt") : NULL;
    if (!sel) {
        cJSON_Delete(d);
        return NULL;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(sel, "lockingClause");
    cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(sel, "targetList"))
    {
        cJSON *rt = cJSON_GetObjectItemCaseSensitive(it, "ResTarget");
        const cJSON *f = sqlj_get(sqlj_is(sqlj_get(rt, "val"), "ColumnRef"), "fields");
        const char *last = sqlj_sval(cJSON_GetArrayItem(f, cJSON_GetArraySize(f) - 1));
        if (!last || strcmp(last, "ctid") != 0)
            continue;
        cJSON *nul = cJSON_CreateObject();
        cJSON *ac = nul ? cJSON_AddObjectToObject(nul, "A_Const") : NULL;
        if (!ac || !cJSON_AddTrueToObject(ac, "isnull") ||
            !cJSON_ReplaceItemInObjectCaseSensitive(rt, "val", nul)) {
            cJSON_Delete(nul); /* not attached */
            cJSON_Delete(d);
            return NULL;
        }
    }
    return d;
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
        int rc = sql_query_run(cx, q, &r);
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
                                            "doc_len", "avgdl", "weight", "score", "source"};
        static const QrSqlType types[] = {QR_SQL_INT8, QR_SQL_TEXT, QR_SQL_TEXT, QR_SQL_TEXT,
                                          QR_SQL_INT8, QR_SQL_INT8, QR_SQL_FLOAT8, QR_SQL_INT8,
                                          QR_SQL_FLOAT8, QR_SQL_FLOAT8, QR_SQL_FLOAT8,
                                          QR_SQL_TEXT};
        enum { N_SCORE_COLS = sizeof names / sizeof names[0] };
        SqlRowSink sink = {.width = N_SCORE_COLS};
        if ((rc = sql_scores_rows(cx, sc->t, sc->texts[sc->drive], sc->kept_docs, sc->n_kept, &sink)))
            return rc;
        res->n_cols = N_SCORE_COLS;
        res->cols = qr_arena_calloc(cx->arena, N_SCORE_COLS * sizeof *res->cols);
        if (!res->cols)
            return nomem(cx);
        for (int c = 0; c < N_SCORE_COLS; c++) {
            res->cols[c].name = names[c];
            res->cols[c].type = types[c];
            res->cols[c].typmod = -1;
        }
        res->vals = sink.rows;
        res->n_rows = sink.n;
        return QR_OK;
    }
    cJSON *unlocked = NULL; /* owns */
    if (!ex.analyze && sqlj_get(sqlj_is(q, "SelectStmt"), "lockingClause")) {
        if (!(unlocked = explain_unlocked(q))) {
            cJSON_Delete(ex.json);
            return nomem(cx);
        }
        q = unlocked;
    }
    cx->ex = &ex;
    int rc = sql_query_run(cx, q, &r);
    cx->ex = NULL;
    cJSON_Delete(unlocked);
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
