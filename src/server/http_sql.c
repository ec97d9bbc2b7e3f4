/*
 * http_sql.c — POST /sql: {"query": "...", "params": [...]} runs SQL and
 * answers {"columns": [{"name", "type"}], "rows": [[...]], "command": tag}.
 *
 * Layer: server/.  Calls query/sql.h, the HTTP core (http_int.h), cJSON.
 *
 * Each request is its own session: a query string may hold several
 * statements (BEGIN ... COMMIT included; a block left open is rolled
 * back); the answer is the last statement's result, with "results"
 * listing every statement's when there are several.  "params" ($1, $2 ...)
 * need a single statement; JSON strings, numbers, booleans and null are
 * sent as the parameters' text.  COPY FROM STDIN is refused (use
 * POST /tables/{t}/documents for bulk loads).
 *
 * Errors: {"error": {"code", "sqlstate", "message", "detail", "hint",
 * "position"}} where position is PostgreSQL's 1-based character position in
 * the query string; status from the one code table, except 23505
 * unique_violation which is 409 Conflict.
 */
#include "query/sql.h"
#include "server/http_int.h"
#include "server/sql_shell.h"
#include "store/mem.h"
#include "store/util.h"

#include <cJSON.h>
#include <stdio.h>
#include <string.h>

static void sql_error(HttpReq *r, const QrError *e, int64_t pos_base)
{
    QrBuf b;
    qr_buf_init(&b);
    const char *st = qr_error_sqlstate(e);
    int status = !strcmp(st, "23505") ? 409 : http_status_of((int)e->code);
    qr_buf_append(&b, "{\"error\":{", 10);
    jw_key(&b, "code");
    jw_cstr(&b, http_code_name((int)e->code));
    qr_buf_putc(&b, ',');
    jw_key(&b, "sqlstate");
    jw_cstr(&b, st);
    qr_buf_putc(&b, ',');
    jw_key(&b, "message");
    jw_cstr(&b, e->message[0] ? e->message : "error");
    if (e->detail[0]) {
        qr_buf_putc(&b, ',');
        jw_key(&b, "detail");
        jw_cstr(&b, e->detail);
    }
    if (e->hint[0]) {
        qr_buf_putc(&b, ',');
        jw_key(&b, "hint");
        jw_cstr(&b, e->hint);
    }
    if (e->offset > 0)
        qr_buf_printf(&b, ",\"position\":%lld", (long long)(e->offset + pos_base));
    if (e->line >= 0)
        qr_buf_printf(&b, ",\"line\":%lld", (long long)e->line);
    qr_buf_append(&b, "}}", 2);
    r->status = status;
    http_reply_json(r, status, &b);
}

static void result_json(QrBuf *b, const QrSqlSession *sess, const QrSqlResult *res)
{
    qr_buf_putc(b, '{');
    jw_key(b, "columns");
    qr_buf_putc(b, '[');
    int nc = res->kind == QR_SQL_RES_ROWS || res->kind == QR_SQL_RES_COPY_OUT ? res->n_cols : 0;
    for (int c = 0; c < nc; c++) {
        qr_buf_append(b, c ? ",{" : "{", c ? 2 : 1);
        jw_key(b, "name");
        jw_cstr(b, res->cols[c].name);
        qr_buf_putc(b, ',');
        jw_key(b, "type");
        jw_cstr(b, qr_sql_type_name(res->cols[c].type));
        qr_buf_putc(b, '}');
    }
    qr_buf_append(b, "],", 2);
    jw_key(b, "rows");
    qr_buf_putc(b, '[');
    for (uint64_t i = 0; nc && i < res->n_rows; i++) {
        qr_buf_append(b, i ? ",[" : "[", i ? 2 : 1);
        for (int c = 0; c < nc; c++) {
            if (c)
                qr_buf_putc(b, ',');
            sql_shell_json_value(b, sess, &res->vals[i * (uint64_t)nc + c]);
        }
        qr_buf_putc(b, ']');
    }
    qr_buf_append(b, "],", 2);
    jw_key(b, "command");
    jw_cstr(b, res->tag);
    if (res->n_notices) {
        qr_buf_putc(b, ',');
        jw_key(b, "notices");
        qr_buf_putc(b, '[');
        for (int i = 0; i < res->n_notices; i++) {
            if (i)
                qr_buf_putc(b, ',');
            jw_cstr(b, res->notices[i].message);
        }
        qr_buf_putc(b, ']');
    }
    qr_buf_printf(b, ",\"took_ms\":%.3f}", res->took_ms);
}

/* Parameters as text (NULL entries are SQL NULL); strings in `arena`. */
static int params_text(HttpReq *r, const cJSON *params, QrArena *a, const char ***vals, int *n)
{
    *n = cJSON_GetArraySize(params);
    *vals = qr_arena_calloc(a, (size_t)(*n + 1) * sizeof **vals);
    if (!*vals)
        return http_error(r, QR_ENOMEM, "out of memory");
    int i = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, params)
    {
        char tmp[64];
        const char *s = NULL;
        if (cJSON_IsString(p)) {
            s = p->valuestring;
        } else if (cJSON_IsBool(p)) {
            s = cJSON_IsTrue(p) ? "true" : "false";
        } else if (cJSON_IsNumber(p)) {
            double d = p->valuedouble;
            if (d == (double)(long long)d && d > -9e15 && d < 9e15)
                snprintf(tmp, sizeof tmp, "%lld", (long long)d);
            else
                snprintf(tmp, sizeof tmp, "%.17g", d);
            s = tmp;
        } else if (!cJSON_IsNull(p)) {
            return http_error(r, QR_EINVAL, "parameter $%d must be a string, number, boolean or "
                                            "null", i + 1);
        }
        (*vals)[i++] = s ? qr_arena_strndup(a, s, strlen(s)) : NULL;
    }
    return QR_OK;
}

void http_sql_query(HttpReq *r)
{
    cJSON *root = http_body_json(r);
    if (!root)
        return;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, "query");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "params");
    QrSqlSession *sess = NULL;
    QrSqlSpan *spans = NULL;
    QrArena *a = NULL;
    QrBuf out;
    qr_buf_init(&out);
    QrError err;
    qr_error_clear(&err);
    if (!cJSON_IsObject(root) || !cJSON_IsString(q)) {
        http_error(r, QR_EINVAL, "request body must be a JSON object with a \"query\" string");
        http_error_hint(r, "e.g. {\"query\": \"SELECT count(*) FROM news WHERE body @@ $1\", "
                           "\"params\": [\"merger\"]}");
        goto done;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, root) if (strcmp(it->string, "query") && strcmp(it->string, "params"))
    {
        http_error(r, QR_EINVAL, "unknown field \"%.40s\" in the request body", it->string);
        goto done;
    }
    if (params && !cJSON_IsArray(params)) {
        http_error(r, QR_EINVAL, "\"params\" must be an array");
        goto done;
    }
    const char *sql = q->valuestring;
    size_t len = strlen(sql);
    int n = 0;
    if (qr_sql_split(sql, len, &spans, &n, &err) != QR_OK) {
        sql_error(r, &err, 0);
        goto done;
    }
    if (qr_sql_session_new(r->srv->db, &sess, &err) != QR_OK) {
        sql_error(r, &err, 0);
        goto done;
    }
    /* each statement is bounded by query_timeout_ms, as a search is; and
     * the engine refuses, as it runs them, statements the key's scope does
     * not allow (auth_check_sql refused the string already from its parse:
     * this holds whatever that check missed) */
    qr_sql_session_limit_timeout(sess, r->srv->cfg.query_timeout_ms);
    qr_sql_session_limit_access(sess, http_scope_access(r->granted),
                                "use an API key with scope write for INSERT, UPDATE and DELETE, "
                                "admin for DDL (quarry key add NAME --scope ...)");
    a = qr_arena_new(0);
    if (!a) {
        http_error(r, QR_ENOMEM, "out of memory");
        goto done;
    }
    int n_params = cJSON_GetArraySize(params);
    if (n_params && n != 1) {
        http_error(r, QR_EINVAL, "\"params\" need exactly one statement in \"query\"");
        goto done;
    }
    QrBuf all;
    qr_buf_init(&all);
    for (int i = 0; i < n; i++) {
        const char *s = sql + spans[i].offset;
        int64_t base = qr_sql_utf8_chars(sql, spans[i].offset);
        QrSqlResult *res = NULL;
        int rc;
        qr_error_clear(&err);
        uint64_t st_t0 = qr_now_ns();
        if (n_params) {
            const char **vals;
            int nv;
            QrSqlStmt *st = NULL;
            if (params_text(r, params, a, &vals, &nv) != QR_OK) {
                qr_buf_free(&all);
                goto done;
            }
            QrSqlParams p = {.n = nv, .values = vals};
            rc = qr_sql_prepare(sess, s, spans[i].len, NULL, 0, &st, &err);
            if (rc == QR_OK)
                rc = qr_sql_execute(sess, st, &p, &res, &err);
            qr_sql_stmt_unref(st);
        } else {
            rc = qr_sql_exec(sess, s, spans[i].len, &res, &err);
        }
        if (rc == QR_OK && res && res->kind == QR_SQL_RES_COPY_IN) {
            qr_sql_copy_fail(sess, "COPY FROM STDIN over HTTP");
            qr_sql_result_free(res);
            res = NULL;
            qr_error_set(&err, QR_EUNSUPPORTED, "COPY FROM STDIN is not available over HTTP");
            qr_error_hint(&err, "use POST /tables/{t}/documents with JSON lines");
            rc = QR_EUNSUPPORTED;
        }
        /* the query history (admin page, GET /stats/queries) */
        http_history_sql(r->srv->history, "http", s, spans[i].len,
                         rc == QR_OK && res ? res->n_rows : 0, (double)(qr_now_ns() - st_t0) / 1e6,
                         rc == QR_OK ? 200 : http_status_of((int)err.code),
                         rc == QR_OK && res ? res->plan : NULL);
        if (rc != QR_OK) {
            qr_buf_free(&all);
            sql_error(r, &err, base);
            goto done;
        }
        if (n > 1) {
            qr_buf_append(&all, i ? "," : "", i ? 1 : 0);
            result_json(&all, sess, res);
        }
        if (i == n - 1) {
            QrBuf last;
            qr_buf_init(&last);
            result_json(&last, sess, res);
            /* {...,"results":[...]} when there were several statements */
            if (n > 1 && last.len) {
                last.len--; /* the closing brace */
                qr_buf_append(&last, ",\"results\":[", 12);
                qr_buf_append(&last, all.data, all.len);
                qr_buf_append(&last, "]}", 2);
            }
            out = last;
        }
        qr_sql_result_free(res);
    }
    qr_buf_free(&all);
    if (n == 0)
        qr_buf_printf(&out, "{\"columns\":[],\"rows\":[],\"command\":\"\"}");
    if (!qr_buf_ok(&out)) {
        http_error(r, QR_ENOMEM, "out of memory writing the result");
        goto done;
    }
    qr_buf_putc(&out, '\n');
    http_reply_json(r, 200, &out);
done:
    qr_buf_free(&out);
    qr_sql_session_free(sess);
    qr_arena_free(a);
    qr_free(spans);
    cJSON_Delete(root);
}
