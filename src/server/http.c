/*
 * http.c — the HTTP server core: libmicrohttpd daemon and request
 * lifecycle (see http_int.h), the route table that drives dispatch and the
 * 404/405 answers, the one QrCode -> HTTP status table, replies, JSON
 * writing helpers, table guards, API key checks (each route's scope, the
 * scope a POST /sql needs), the max_query_terms check, TLS, and graceful
 * shutdown.
 *
 * Layer: server/.  Calls query/quarry.h, the base kit, libmicrohttpd, cJSON.
 *
 * Paths and query strings are decoded here from the raw request target
 * (uri_log callback), not by libmicrohttpd, so that "%2F" inside a
 * document id stays part of that segment.
 */
#include "server/http_int.h"
#include "server/netaddr.h"
#include "store/mem.h"
#include "store/util.h"

#include <arpa/inet.h>
#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- the route table ---- */

const HttpRoute HTTP_ROUTES[] = {
    {HM_GET, "/", "admin_page", API_SCOPE_NONE, HB_NONE, false, http_admin_asset},
    {HM_GET, "/admin/{file}", "admin_asset", API_SCOPE_NONE, HB_NONE, false, http_admin_asset},
    {HM_GET, "/openapi.yaml", "openapi", API_SCOPE_NONE, HB_NONE, false, http_admin_asset},
    {HM_GET, "/health", "health", API_SCOPE_NONE, HB_NONE, false, http_health},
    {HM_GET, "/metrics", "metrics", API_SCOPE_ADMIN, HB_NONE, false, http_metrics_get},
    {HM_GET, "/stats", "stats", API_SCOPE_ADMIN, HB_NONE, false, http_stats_get},
    {HM_GET, "/stats/queries", "stats_queries", API_SCOPE_ADMIN, HB_NONE, false,
     http_queries_get},
    {HM_GET, "/tables", "tables_list", API_SCOPE_SEARCH, HB_NONE, false, http_tables_list},
    {HM_POST, "/tables", "tables_create", API_SCOPE_ADMIN, HB_JSON, false, http_tables_create},
    {HM_GET, "/tables/{t}", "tables_describe", API_SCOPE_SEARCH, HB_NONE, true,
     http_tables_describe},
    {HM_DELETE, "/tables/{t}", "tables_drop", API_SCOPE_ADMIN, HB_NONE, false, http_tables_drop},
    {HM_POST, "/tables/{t}/documents", "documents_ingest", API_SCOPE_WRITE, HB_STREAM, false,
     http_docs_ingest_end, http_docs_ingest_begin, http_docs_ingest_feed,
     http_docs_ingest_cleanup},
    {HM_GET, "/tables/{t}/documents/{id}", "documents_get", API_SCOPE_SEARCH, HB_NONE, true,
     http_docs_get},
    {HM_PUT, "/tables/{t}/documents/{id}", "documents_put", API_SCOPE_WRITE, HB_JSON, true,
     http_docs_put},
    {HM_PATCH, "/tables/{t}/documents/{id}", "documents_patch", API_SCOPE_WRITE, HB_JSON, true,
     http_docs_patch},
    {HM_DELETE, "/tables/{t}/documents/{id}", "documents_delete", API_SCOPE_WRITE, HB_NONE,
     true, http_docs_delete},
    {HM_POST, "/tables/{t}/delete_by_query", "delete_by_query", API_SCOPE_WRITE, HB_JSON, true,
     http_docs_delete_by_query},
    {HM_GET, "/tables/{t}/search", "search", API_SCOPE_SEARCH, HB_NONE, true, http_search_get},
    {HM_POST, "/tables/{t}/search", "search_post", API_SCOPE_SEARCH, HB_JSON, true,
     http_search_post},
    {HM_GET, "/tables/{t}/synonyms", "synonyms_get", API_SCOPE_SEARCH, HB_NONE, true,
     http_synonyms_get},
    {HM_PUT, "/tables/{t}/synonyms", "synonyms_put", API_SCOPE_ADMIN, HB_JSON, true,
     http_synonyms_put},
    {HM_POST, "/tables/{t}/flush", "flush", API_SCOPE_ADMIN, HB_NONE, true, http_tables_flush},
    {HM_POST, "/tables/{t}/merge", "merge", API_SCOPE_ADMIN, HB_NONE, true, http_tables_merge},
    {HM_POST, "/tables/{t}/bm25_stats", "bm25_stats", API_SCOPE_SEARCH, HB_JSON, true,
     http_tables_bm25_stats},
    {HM_POST, "/multi_search", "multi_search", API_SCOPE_SEARCH, HB_JSON, false,
     http_search_multi},
    {HM_POST, "/sql", "sql", API_SCOPE_SEARCH, HB_JSON, false, http_sql_query},
};
const int HTTP_N_ROUTES = (int)(sizeof HTTP_ROUTES / sizeof HTTP_ROUTES[0]);

#define MAX_SEGS 8

static const struct {
    HttpMethod m;
    const char *name;
} METHODS[] = {{HM_GET, "GET"},       {HM_POST, "POST"},   {HM_PUT, "PUT"},
               {HM_PATCH, "PATCH"},   {HM_DELETE, "DELETE"}, {HM_HEAD, "HEAD"},
               {HM_OPTIONS, "OPTIONS"}};

/* "GET, HEAD, POST": the methods of a mask, in METHODS order. */
void http_methods_text(unsigned mask, char *out, size_t cap)
{
    out[0] = 0;
    if (mask & HM_GET)
        mask |= HM_HEAD;
    for (size_t m = 0; m < sizeof METHODS / sizeof METHODS[0]; m++)
        if (mask & METHODS[m].m)
            snprintf(out + strlen(out), cap - strlen(out), "%s%s", out[0] ? ", " : "",
                     METHODS[m].name);
}

/* ---- the one error table: QrCode (and HTTP-only codes) -> status ---- */

static const struct {
    int status;
    const char *name; /* NULL: qr_code_name() */
} CODES[HTTP_ECODE_END] = {
    [QR_OK] = {200, NULL},
    [QR_EINVAL] = {400, NULL},
    [QR_ESYNTAX] = {400, NULL},
    [QR_ETYPE] = {422, NULL},
    [QR_ENOTFOUND] = {404, NULL},
    [QR_EEXISTS] = {409, NULL},
    [QR_ECONSTRAINT] = {422, NULL},
    [QR_EUNSUPPORTED] = {400, NULL},
    [QR_ELIMIT] = {413, NULL},
    [QR_ENOMEM] = {503, NULL},
    [QR_EIO] = {500, NULL},
    [QR_ECORRUPT] = {500, NULL},
    [QR_ECANCELED] = {499, NULL},
    [QR_ETIMEOUT] = {504, NULL},
    [QR_EBUSY] = {503, "overloaded"},
    [QR_EAUTH] = {401, "unauthorized"},
    [QR_EPERM] = {403, NULL},
    [QR_EINTERNAL] = {500, NULL},
    [QR_EUNAVAILABLE] = {502, "peer_unavailable"},
    [HTTP_EMETHOD] = {405, "method_not_allowed"},
    [HTTP_EMEDIA] = {415, "unsupported_media_type"},
    [HTTP_EHEADER_TIMEOUT] = {408, "request_timeout"},
};

int http_status_of(int code)
{
    if (code < 0 || code >= HTTP_ECODE_END || !CODES[code].status)
        return 500;
    return CODES[code].status;
}

const char *http_code_name(int code)
{
    if (code < 0 || code >= HTTP_ECODE_END)
        return "internal_error";
    return CODES[code].name ? CODES[code].name : qr_code_name((QrCode)code);
}

/* ---- JSON writing ---- */

/* Length of a valid UTF-8 sequence at p (1..4), or 0 if invalid. */
void jw_str(QrBuf *b, const char *s, size_t n) { qr_buf_json_str(b, s, n); }

void jw_key(QrBuf *b, const char *k)
{
    jw_cstr(b, k);
    qr_buf_putc(b, ':');
}

void jw_cjson(QrBuf *b, const cJSON *v)
{
    if (!v) {
        qr_buf_append(b, "null", 4);
        return;
    }
    char *s = cJSON_PrintUnformatted(v);
    if (!s) {
        b->oom = true;
        return;
    }
    qr_buf_append(b, s, strlen(s));
    cJSON_free(s);
}

void http_error_json(QrBuf *b, int code, const QrError *e)
{
    qr_buf_append(b, "{\"error\":{", 10);
    jw_key(b, "code");
    jw_cstr(b, http_code_name(code));
    qr_buf_putc(b, ',');
    jw_key(b, "message");
    jw_cstr(b, e->message[0] ? e->message : "error");
    if (e->detail[0]) {
        qr_buf_putc(b, ',');
        jw_key(b, "detail");
        jw_cstr(b, e->detail);
    }
    if (e->hint[0]) {
        qr_buf_putc(b, ',');
        jw_key(b, "hint");
        jw_cstr(b, e->hint);
    }
    if (e->offset >= 0)
        qr_buf_printf(b, ",\"position\":%lld", (long long)e->offset + 1);
    if (e->line >= 0)
        qr_buf_printf(b, ",\"line\":%lld", (long long)e->line);
    if (e->column >= 0 && e->line >= 0)
        qr_buf_printf(b, ",\"column\":%d", e->column);
    qr_buf_append(b, "}}", 2);
}

/* ---- errors recorded on a request ---- */

int http_error(HttpReq *r, int code, const char *fmt, ...)
{
    if (r->err.code != QR_OK)
        return r->xcode ? r->xcode : (int)r->err.code;
    va_list ap;
    va_start(ap, fmt);
    /* HTTP-only codes keep a QrCode in err (EINVAL) and the real one in xcode */
    qr_error_setv(&r->err, code >= QR_CODE_COUNT ? QR_EINVAL : (QrCode)code, fmt, ap);
    va_end(ap);
    r->xcode = code >= QR_CODE_COUNT ? code : 0;
    return code;
}

int http_error_from(HttpReq *r, const QrError *e)
{
    if (r->err.code == QR_OK) {
        r->err = *e;
        if (r->err.code == QR_OK)
            r->err.code = QR_EINTERNAL;
    }
    return r->xcode ? r->xcode : (int)r->err.code;
}

/* detail and hint: set once, only on a recorded error */
static void error_text(HttpReq *r, char *field, size_t cap, const char *fmt, va_list ap)
{
    if (r->err.code != QR_OK && !field[0])
        vsnprintf(field, cap, fmt, ap);
}

void http_error_detail(HttpReq *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_text(r, r->err.detail, sizeof r->err.detail, fmt, ap);
    va_end(ap);
}

void http_error_hint(HttpReq *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_text(r, r->err.hint, sizeof r->err.hint, fmt, ap);
    va_end(ap);
}

/* ---- replies ---- */

void http_header(HttpReq *r, const char *name, const char *value)
{
    if (r->n_hdr >= HTTP_MAX_HEADERS)
        return;
    char *v = qr_strdup(value);
    if (!v)
        return;
    r->hdr_k[r->n_hdr] = name;
    r->hdr_v[r->n_hdr++] = v;
}

static void reply_mhd(HttpReq *r, int status, const char *ctype, struct MHD_Response *resp,
                      size_t len)
{
    if (!resp)
        return;
    if (ctype)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    for (int i = 0; i < r->n_hdr; i++)
        MHD_add_response_header(resp, r->hdr_k[i], r->hdr_v[i]);
    if (MHD_queue_response(r->conn, (unsigned)status, resp) == MHD_YES) {
        r->queued = true;
        r->status = status;
        r->reply_len = len;
    }
    MHD_destroy_response(resp);
}

void http_reply(HttpReq *r, int status, const char *content_type, QrBuf *body)
{
    if (r->queued) {
        if (body)
            qr_buf_free(body);
        return;
    }
    if (r->capture) {
        if (body) {
            qr_buf_append(r->capture, body->data, body->len);
            if (!qr_buf_ok(body))
                r->capture->oom = true;
            qr_buf_free(body);
        }
        r->queued = true;
        r->status = status;
        return;
    }
    if (body && !qr_buf_ok(body)) {
        qr_buf_free(body);
        http_error(r, QR_ENOMEM, "out of memory while writing the response");
        QrBuf e;
        qr_buf_init(&e);
        http_error_json(&e, QR_ENOMEM, &r->err);
        body = &e;
        status = 503;
        content_type = "application/json";
        size_t n;
        uint8_t *d = qr_buf_steal(body, &n);
        if (!d)
            return;
        reply_mhd(r, status, content_type,
                  MHD_create_response_from_buffer_with_free_callback(n, d, qr_free), n);
        return;
    }
    size_t n = 0;
    uint8_t *d = body && body->len ? qr_buf_steal(body, &n) : NULL;
    struct MHD_Response *resp =
        d ? MHD_create_response_from_buffer_with_free_callback(n, d, qr_free)
          : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp)
        qr_free(d);
    reply_mhd(r, status, content_type, resp, n);
}

void http_reply_json(HttpReq *r, int status, QrBuf *body)
{
    http_reply(r, status, "application/json", body);
}

void http_reply_static(HttpReq *r, const char *content_type, const void *data, size_t len,
                       const char *etag)
{
    const char *inm = http_req_header(r, MHD_HTTP_HEADER_IF_NONE_MATCH);
    http_header(r, MHD_HTTP_HEADER_ETAG, etag);
    http_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    if (inm && !strcmp(inm, etag)) {
        reply_mhd(r, 304, NULL, MHD_create_response_from_buffer(0, (void *)"",
                                                                 MHD_RESPMEM_PERSISTENT), 0);
        return;
    }
    reply_mhd(r, 200, content_type,
              MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_PERSISTENT), len);
}

/* Answer the recorded error (or a generic one) as JSON. */
static void reply_error(HttpReq *r)
{
    if (r->err.code == QR_OK)
        http_error(r, QR_EINTERNAL, "the handler produced no answer");
    int code = r->xcode ? r->xcode : (int)r->err.code;
    QrBuf b;
    qr_buf_init(&b);
    http_error_json(&b, code, &r->err);
    http_reply_json(r, http_status_of(code), &b);
}

/* ---- request helpers ---- */

const char *http_req_header(HttpReq *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decode s[0..n) into a new string; '+' is a space in query
 * strings.  NULL for a bad escape or a NUL byte (or OOM: *oom set). */
static char *pct_decode(const char *s, size_t n, bool plus, bool *oom)
{
    char *out = qr_malloc(n + 1);
    if (!out) {
        *oom = true;
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= n) {
                qr_free(out);
                return NULL;
            }
            int a = hexval((unsigned char)s[i + 1]), b = hexval((unsigned char)s[i + 2]);
            if (a < 0 || b < 0 || (a == 0 && b == 0)) {
                qr_free(out);
                return NULL;
            }
            out[o++] = (char)(a * 16 + b);
            i += 2;
        } else if (c == '+' && plus) {
            out[o++] = ' ';
        } else {
            out[o++] = c;
        }
    }
    out[o] = 0;
    return out;
}

static void parse_args(HttpReq *r)
{
    r->args_parsed = true;
    const char *q = strchr(r->uri, '?');
    if (!q)
        return;
    q++;
    while (*q) {
        const char *amp = strchr(q, '&');
        size_t n = amp ? (size_t)(amp - q) : strlen(q);
        if (n) {
            const char *eq = memchr(q, '=', n);
            size_t kn = eq ? (size_t)(eq - q) : n;
            bool oom = false;
            char *k = pct_decode(q, kn, true, &oom);
            char *v = eq ? pct_decode(eq + 1, n - kn - 1, true, &oom) : qr_strdup("");
            if (!k || !v || r->n_args >= HTTP_MAX_ARGS) {
                qr_free(k);
                qr_free(v);
                r->args_bad = true;
                if (oom)
                    http_error(r, QR_ENOMEM, "out of memory");
                else if (r->n_args >= HTTP_MAX_ARGS)
                    http_error(r, QR_ELIMIT, "too many query parameters (at most %d)",
                               HTTP_MAX_ARGS);
                else
                    http_error(r, QR_EINVAL, "bad percent-encoding in query parameter \"%.*s\"",
                               (int)(kn > 60 ? 60 : kn), q);
                return;
            }
            for (int i = 0; i < r->n_args; i++)
                if (!strcmp(r->arg_k[i], k)) {
                    http_error(r, QR_EINVAL, "query parameter \"%.60s\" is given twice", k);
                    r->args_bad = true;
                    qr_free(k);
                    qr_free(v);
                    return;
                }
            r->arg_k[r->n_args] = k;
            r->arg_v[r->n_args++] = v;
        }
        if (!amp)
            break;
        q = amp + 1;
    }
}

const char *http_arg(HttpReq *r, const char *name)
{
    if (!r->args_parsed)
        parse_args(r);
    for (int i = 0; i < r->n_args; i++)
        if (!strcmp(r->arg_k[i], name))
            return r->arg_v[i];
    return NULL;
}

cJSON *http_body_json(HttpReq *r)
{
    const char *s = r->body.data ? (const char *)r->body.data : "";
    size_t n = r->body.len;
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
        i++;
    if (i == n) {
        http_error(r, QR_EINVAL, "request body is empty");
        http_error_hint(r, "send a JSON object with Content-Type: application/json");
        return NULL;
    }
    const char *end = NULL;
    /* parse without cJSON's end check (it wants a NUL inside the length)
     * and check for trailing bytes here */
    cJSON *v = cJSON_ParseWithLengthOpts(s, n, &end, false);
    if (v && end) {
        while (end < s + n && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n'))
            end++;
        if (end < s + n) {
            cJSON_Delete(v);
            v = NULL;
        }
    }
    if (!v) {
        if (!end || end < s || end > s + n)
            end = s + n;
        QrError e;
        qr_error_clear(&e);
        qr_error_set(&e, QR_ESYNTAX, "request body is not valid JSON");
        int64_t off = end - s, line = 1, col = 1;
        for (int64_t k = 0; k < off; k++) {
            if (s[k] == '\n') {
                line++;
                col = 1;
            } else if (((unsigned char)s[k] & 0xC0) != 0x80) {
                col++;
            }
        }
        if (off >= (int64_t)n)
            qr_error_detail(&e, "the body ends before the JSON value is complete");
        else
            qr_error_detail(&e, "unexpected input at line %lld, column %lld", (long long)line,
                            (long long)col);
        qr_error_pos(&e, off, line, (int32_t)col);
        http_error_from(r, &e);
        return NULL;
    }
    return v;
}

/* ---- table guards ----
 * Users of a table hold an engine reference on its name
 * (qr_table_acquire), which qr_table_drop_wait waits for.  Here we count
 * only the uploads, which a drop refuses instead of waiting for. */

struct TableGuard {
    char name[QR_NAME_MAX + 1];
    int streams; /* uploads into the table now */
};

static TableGuard *guard_find(HttpServer *s, const char *name, bool create)
{
    for (int i = 0; i < s->n_guards; i++)
        if (!strcmp(s->guards[i].name, name))
            return &s->guards[i];
    if (!create)
        return NULL;
    if (s->n_guards == s->cap_guards) {
        int nc = s->cap_guards ? s->cap_guards * 2 : 16;
        TableGuard *ng = qr_realloc(s->guards, (size_t)nc * sizeof *ng);
        if (!ng)
            return NULL;
        s->guards = ng;
        s->cap_guards = nc;
    }
    TableGuard *g = &s->guards[s->n_guards++];
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name);
    return g;
}

int http_table_enter(HttpServer *s, const char *name, bool streaming)
{
    if (!qr_name_valid(name))
        return QR_OK; /* the engine rejects the name; nothing to guard */
    if (streaming) {
        pthread_mutex_lock(&s->guard_lock);
        TableGuard *g = guard_find(s, name, true);
        if (g)
            g->streams++;
        pthread_mutex_unlock(&s->guard_lock);
        if (!g)
            return QR_ENOMEM;
    }
    QrError e;
    qr_error_clear(&e);
    int rc = qr_table_acquire(s->db, name, NULL, &e);
    if (rc != QR_OK && streaming) {
        pthread_mutex_lock(&s->guard_lock);
        TableGuard *g = guard_find(s, name, false);
        if (g && --g->streams == 0)
            *g = s->guards[--s->n_guards];
        pthread_mutex_unlock(&s->guard_lock);
    }
    return rc;
}

void http_table_leave(HttpServer *s, const char *name, bool streaming)
{
    if (!qr_name_valid(name))
        return;
    qr_table_release(s->db, name);
    if (!streaming)
        return;
    pthread_mutex_lock(&s->guard_lock);
    TableGuard *g = guard_find(s, name, false);
    if (g && --g->streams <= 0)
        *g = s->guards[--s->n_guards];
    pthread_mutex_unlock(&s->guard_lock);
}

int http_table_drop(HttpServer *s, const char *name, QrError *err)
{
    if (qr_name_valid(name)) {
        pthread_mutex_lock(&s->guard_lock);
        TableGuard *g = guard_find(s, name, false);
        int n = g ? g->streams : 0;
        pthread_mutex_unlock(&s->guard_lock);
        if (n > 0) {
            qr_error_set(err, QR_EBUSY, "table \"%s\" is busy: %d upload(s) are streaming into it",
                         name, n);
            qr_error_hint(err, "retry the drop when the uploads have finished");
            return QR_EBUSY;
        }
    }
    /* waits for searches and other short users; an upload that starts
     * meanwhile makes it give up after HTTP_DROP_WAIT_MS */
    return qr_table_drop_wait(s->db, name, HTTP_DROP_WAIT_MS, err);
}

/* ---- API keys (apikey.h) ---- */

/* Does word w[0..n) equal one of list (case-insensitive)? */
/* Are API keys enforced now?  Keys exist, or the server listens beyond
 * loopback without allow_remote (then, with every key removed, nobody gets
 * in rather than everybody). */
static bool auth_on(HttpServer *s, int *n_keys)
{
    *n_keys = s->keys ? apikey_count(s->keys) : 0;
    return *n_keys > 0 || (s->remote && !s->cfg.allow_remote);
}

/* Check the request's key against `need`; records 401 or 403. */
static void auth_check(HttpReq *r, ApiScope need)
{
    int n_keys;
    r->granted = API_SCOPE_ADMIN;
    if (need == API_SCOPE_NONE || !auth_on(r->srv, &n_keys))
        return;
    r->granted = API_SCOPE_NONE;
    const char *h = http_req_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h) {
        http_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"quarry\"");
        http_error(r, QR_EAUTH, "an API key is required");
        if (n_keys)
            http_error_hint(r, "send \"Authorization: Bearer KEY\" (quarry key add NAME "
                               "--scope %s)", apikey_scope_name(need));
        else
            http_error_hint(r, "no API key exists: make one with quarry key add NAME --scope "
                               "admin");
        return;
    }
    while (*h == ' ')
        h++;
    size_t len;
    if (strncasecmp(h, "Bearer ", 7) != 0) {
        http_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"quarry\", error=\"invalid_request\"");
        http_error(r, QR_EAUTH, "the Authorization header must be \"Bearer KEY\"");
        return;
    }
    h += 7;
    while (*h == ' ')
        h++;
    len = strlen(h);
    while (len && h[len - 1] == ' ')
        len--;
    ApiKeyInfo info;
    memset(&info, 0, sizeof info);
    ApiScope got = r->srv->keys ? apikey_check_info(r->srv->keys, h, len, &info)
                                : API_SCOPE_NONE;
    const char *name = info.name;
    if (got == API_SCOPE_NONE) {
        http_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"quarry\", error=\"invalid_token\"");
        http_error(r, QR_EAUTH, "the API key is not valid");
        http_error_hint(r, "quarry key list shows the keys that exist; a removed key stops "
                           "working within a second");
        return;
    }
    if (info.expires && (int64_t)time(NULL) >= info.expires) {
        char when[32];
        time_t t = (time_t)info.expires;
        struct tm tm;
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
        http_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"quarry\", error=\"invalid_token\"");
        http_error(r, QR_EAUTH, "API key \"%s\" expired at %s", name, when);
        http_error_hint(r, "make a new key (quarry key add NAME --expires ...)");
        return;
    }
    r->granted = got;
    snprintf(r->key_name, sizeof r->key_name, "%s", name);
    memcpy(r->key_tables, info.tables, sizeof r->key_tables);
    if (got < need) {
        http_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"quarry\", error=\"insufficient_scope\"");
        http_error(r, QR_EPERM, "API key \"%s\" has scope %s; this request needs %s", name,
                   apikey_scope_name(got), apikey_scope_name(need));
        http_error_hint(r, "use a key made with quarry key add NAME --scope %s",
                        apikey_scope_name(need));
    }
}

bool http_key_table_ok(HttpReq *r, const char *table)
{
    if (apikey_table_ok(r->key_tables, table))
        return true;
    http_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"quarry\", error=\"insufficient_scope\"");
    http_error(r, QR_EPERM, "API key \"%s\" may not use table \"%.80s\"", r->key_name, table);
    http_error_detail(r, "the key is limited to the tables %.400s", r->key_tables);
    http_error_hint(r, "use a key made with quarry key add NAME --tables %.80s", table);
    return false;
}

/* A key limited to tables may use routes of one table ({t}) and
 * multi-search (which checks each query's table); nothing that reaches
 * beyond its tables (the table list, SQL, statistics, creating tables). */
static void key_tables_check(HttpReq *r)
{
    const HttpRoute *rt = &HTTP_ROUTES[r->route];
    if (!r->key_tables[0] || rt->scope == API_SCOPE_NONE || rt->handle == http_search_multi)
        return;
    if (r->t) {
        http_key_table_ok(r, r->t);
        return;
    }
    http_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"quarry\", error=\"insufficient_scope\"");
    http_error(r, QR_EPERM, "API key \"%s\" is limited to tables and cannot use %s %s",
               r->key_name, r->method_name, rt->pattern);
    http_error_detail(r, "the key is limited to the tables %.400s", r->key_tables);
    http_error_hint(r, "use a key without --tables for this request");
}

/* The SQL a key's scope lets a session run (POST /sql limits its session
 * with it too, so a statement that got past this check is refused when it
 * executes). */
QrSqlAccess http_scope_access(ApiScope s)
{
    return s >= API_SCOPE_ADMIN ? QR_SQL_ACCESS_SCHEMA
           : s == API_SCOPE_WRITE ? QR_SQL_ACCESS_WRITE
                                  : QR_SQL_ACCESS_READ;
}

/* POST /sql: the statements decide the scope, checked once the body is in,
 * from libpg_query's parse of every statement, before any runs.  A query
 * string that does not parse is left to the handler, which reports the
 * syntax error and runs nothing. */
static void auth_check_sql(HttpReq *r)
{
    if (r->granted >= API_SCOPE_ADMIN)
        return;
    cJSON *root = cJSON_ParseWithLength(r->body.data ? (const char *)r->body.data : "",
                                        r->body.len);
    const cJSON *q = root ? cJSON_GetObjectItemCaseSensitive(root, "query") : NULL;
    QrSqlAccess need;
    QrError e;
    qr_error_clear(&e);
    if (cJSON_IsString(q) &&
        qr_sql_access_needed(q->valuestring, strlen(q->valuestring), &need, &e) == QR_OK &&
        need > http_scope_access(r->granted)) {
        ApiScope want = need == QR_SQL_ACCESS_WRITE ? API_SCOPE_WRITE : API_SCOPE_ADMIN;
        http_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                    "Bearer realm=\"quarry\", error=\"insufficient_scope\"");
        http_error(r, QR_EPERM, "this SQL needs an API key with scope %s; the key has %s",
                   apikey_scope_name(want), apikey_scope_name(r->granted));
        http_error_hint(r, "SELECT needs search, INSERT/UPDATE/DELETE write, and DDL admin");
        qr_error_set_sqlstate(&r->err, "42501");
    }
    cJSON_Delete(root);
}

/* ---- text query size (max_query_terms) ---- */

/* Words in a text query: runs of letters, digits and '_' (inside phrases
 * too), not counting the operators AND, OR, NOT, a field name before ':',
 * or the number after '^' (boost) or '~' (slop, edits).  An upper bound on
 * the terms the engine will look up, cheap to take before parsing. */
int http_query_terms(const char *q)
{
    static const char *const OPS[] = {"AND", "OR", "NOT", NULL};
    int n = 0;
    const char *p = q;
    while (*p) {
        unsigned char c = (unsigned char)*p;
        if (!(isalnum(c) || c == '_' || c >= 0x80)) {
            bool num = c == '^' || c == '~';
            p++;
            if (num)
                while (isdigit((unsigned char)*p) || *p == '.')
                    p++;
            continue;
        }
        const char *b = p;
        while (isalnum((unsigned char)*p) || *p == '_' || (unsigned char)*p >= 0x80)
            p++;
        size_t len = (size_t)(p - b);
        bool op = false;
        for (int i = 0; OPS[i]; i++)
            if (strlen(OPS[i]) == len && !memcmp(OPS[i], b, len))
                op = true;
        if (!op && *p != ':')
            n++;
    }
    return n;
}

/* Search and delete-by-query routes: refuse a text query of more than
 * max_query_terms words before the engine parses it. */
static void query_size_check(HttpReq *r)
{
    const HttpRoute *rt = &HTTP_ROUTES[r->route];
    if (rt->handle != http_search_get && rt->handle != http_search_post &&
        rt->handle != http_docs_delete_by_query)
        return;
    cJSON *root = NULL;
    const char *q;
    if (rt->body == HB_JSON) {
        root = cJSON_ParseWithLength(r->body.data ? (const char *)r->body.data : "", r->body.len);
        const cJSON *v = root ? cJSON_GetObjectItemCaseSensitive(root, "q") : NULL;
        q = cJSON_IsString(v) ? v->valuestring : NULL;
    } else {
        q = http_arg(r, "q");
    }
    http_query_terms_check(r, q);
    cJSON_Delete(root);
}

int http_query_terms_check(HttpReq *r, const char *q)
{
    int n = q ? http_query_terms(q) : 0;
    if (n > r->srv->cfg.max_query_terms) {
        http_error(r, QR_ELIMIT, "text query has %d terms, more than the limit of %d", n,
                   r->srv->cfg.max_query_terms);
        http_error_hint(r, "shorten the query, or raise max_query_terms in the server config");
        return QR_ELIMIT;
    }
    return QR_OK;
}

/* ---- routing ---- */

/* Split the path of r->uri into decoded segments; false on a bad escape. */
static int split_path(HttpReq *r, char **segs, int *n_segs)
{
    *n_segs = 0;
    const char *p = r->uri;
    const char *end = strchr(p, '?');
    if (!end)
        end = p + strlen(p);
    if (*p != '/')
        return http_error(r, QR_EINVAL, "request target must start with \"/\"");
    p++;
    /* "/tables/" is "/tables" */
    if (end > p && end[-1] == '/')
        end--;
    while (p < end) {
        const char *sl = memchr(p, '/', (size_t)(end - p));
        const char *e = sl ? sl : end;
        if (*n_segs == MAX_SEGS)
            return QR_ENOTFOUND;
        bool oom = false;
        char *seg = pct_decode(p, (size_t)(e - p), false, &oom);
        if (!seg) {
            if (oom)
                return http_error(r, QR_ENOMEM, "out of memory");
            return http_error(r, QR_EINVAL, "bad percent-encoding in the request path");
        }
        segs[(*n_segs)++] = seg;
        p = sl ? sl + 1 : end;
    }
    return QR_OK;
}

/* Does pattern match segs?  Captures go to *t / *id (borrowed pointers). */
static bool route_match(const char *pat, char **segs, int n, char **t, char **id)
{
    *t = *id = NULL;
    const char *p = pat + 1;
    int i = 0;
    while (*p) {
        const char *sl = strchr(p, '/');
        size_t len = sl ? (size_t)(sl - p) : strlen(p);
        if (i >= n)
            return false;
        if (p[0] == '{') {
            if (!segs[i][0])
                return false;
            if (len == 3 && p[1] == 't')
                *t = segs[i];
            else
                *id = segs[i];
        } else if (strlen(segs[i]) != len || memcmp(segs[i], p, len) != 0) {
            return false;
        }
        i++;
        p = sl ? sl + 1 : p + len;
    }
    return i == n;
}

static HttpMethod method_of(const char *m)
{
    for (size_t i = 0; i < sizeof METHODS / sizeof METHODS[0]; i++)
        if (!strcmp(METHODS[i].name, m))
            return METHODS[i].m;
    return HM_OTHER;
}

/* Match r against the route table: sets r->route, r->t, r->id, or records
 * 404 / 405 (with Allow). */
static void route_request(HttpReq *r)
{
    char *segs[MAX_SEGS];
    int n = 0;
    int rc = split_path(r, segs, &n);
    if (rc == QR_ENOTFOUND && r->err.code == QR_OK) {
        http_error(r, QR_ENOTFOUND, "no such endpoint: %.100s", r->uri);
        http_error_hint(r, "see docs/http-api.md for the endpoints");
    }
    if (rc != QR_OK)
        goto out;
    HttpMethod want = r->method == HM_HEAD ? HM_GET : r->method;
    unsigned allow = 0;
    for (int i = 0; i < HTTP_N_ROUTES; i++) {
        char *t, *id;
        if (!route_match(HTTP_ROUTES[i].pattern, segs, n, &t, &id))
            continue;
        allow |= HTTP_ROUTES[i].method;
        if (HTTP_ROUTES[i].method != want || r->route >= 0)
            continue;
        r->route = i;
        r->t = t ? qr_strdup(t) : NULL;
        r->id = id ? qr_strdup(id) : NULL;
        if ((t && !r->t) || (id && !r->id))
            http_error(r, QR_ENOMEM, "out of memory");
    }
    if (r->route < 0 && want == HM_OPTIONS && allow) {
        r->preflight_allow = allow;
        goto out;
    }
    if (r->route < 0) {
        const char *path_end = strchr(r->uri, '?');
        int plen = path_end ? (int)(path_end - r->uri) : (int)strlen(r->uri);
        if (!allow) {
            http_error(r, QR_ENOTFOUND, "no such endpoint: %.*s", plen > 100 ? 100 : plen,
                       r->uri);
            http_error_hint(r, "see docs/http-api.md for the endpoints");
        } else {
            char list[96];
            http_methods_text(allow, list, sizeof list);
            http_header(r, MHD_HTTP_HEADER_ALLOW, list);
            http_error(r, HTTP_EMETHOD, "method %s is not allowed on %.*s",
                       r->method_name, plen > 100 ? 100 : plen, r->uri);
            http_error_detail(r, "allowed: %s", list);
        }
    }
out:
    for (int i = 0; i < n; i++)
        qr_free(segs[i]);
}

/* Media type without parameters, lowercased into out. */
static void media_type(const char *ct, char *out, size_t cap)
{
    size_t o = 0;
    while (*ct == ' ')
        ct++;
    for (; *ct && *ct != ';' && *ct != ' ' && o + 1 < cap; ct++)
        out[o++] = (char)(*ct >= 'A' && *ct <= 'Z' ? *ct + 32 : *ct);
    out[o] = 0;
}

/* /health, /metrics, /stats and the admin page: cheap, and what an
 * operator needs most when the server is full, so max_connections does
 * not turn them away. */
static bool route_light(const HttpRoute *rt)
{
    return rt->handle == http_health || rt->handle == http_admin_asset ||
           rt->handle == http_metrics_get || rt->handle == http_stats_get ||
           rt->handle == http_queries_get;
}

/* Headers are in: route, limits, media types.  May queue an error. */
static void first_call(HttpReq *r)
{
    HttpServer *s = r->srv;
    atomic_fetch_add(&s->inflight, 1);
    r->counted = true;
    r->method = method_of(r->method_name);
    if (atomic_load(&s->draining)) {
        http_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
        http_error(r, QR_EBUSY, "the server is shutting down");
        return;
    }
    int n_keys;
    bool keys_on = auth_on(s, &n_keys);
    http_cors_headers(r);
    route_request(r);
    if (r->err.code != QR_OK)
        return;
    if (r->preflight_allow) {
        http_cors_preflight(r, keys_on);
        return;
    }
    if (!keys_on)
        http_origin_check(r); /* no key protects it: browsers must not steer it */
    if (r->err.code != QR_OK)
        return;
    const HttpRoute *rt = &HTTP_ROUTES[r->route];
    auth_check(r, rt->scope);
    if (r->err.code == QR_OK)
        key_tables_check(r);
    if (r->err.code != QR_OK)
        return;
    if (atomic_load(&s->connections) > s->cfg.max_connections && !route_light(rt)) {
        http_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
        http_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
        http_error(r, QR_EBUSY, "too many connections (at most %d)", s->cfg.max_connections);
        http_error_hint(r, "retry later, or raise max_connections in the server config");
        return;
    }
    r->body_limit = rt->body == HB_STREAM ? s->cfg.max_ingest_bytes : s->cfg.max_body_bytes;
    const char *cl = http_req_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(cl, &end, 10);
        if (!errno && *end == 0 && v > r->body_limit) {
            http_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
            http_error(r, QR_ELIMIT, "request body of %llu bytes is larger than the limit of "
                                     "%llu bytes", v, (unsigned long long)r->body_limit);
            http_error_hint(r, "raise %s in the server config",
                            rt->body == HB_STREAM ? "max_ingest_bytes" : "max_body_bytes");
            return;
        }
    }
    if (rt->body == HB_STREAM)
        return; /* begin() checks its own media types */
    const char *ce = http_req_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING);
    if (ce && strcasecmp(ce, "identity") != 0) {
        http_error(r, HTTP_EMEDIA, "Content-Encoding \"%.40s\" is not accepted here", ce);
        http_error_hint(r, "only POST /tables/{t}/documents accepts gzip");
        return;
    }
    const char *ct = http_req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (rt->body == HB_JSON && ct) {
        char mt[64];
        media_type(ct, mt, sizeof mt);
        if (strcmp(mt, "application/json") != 0) {
            http_error(r, HTTP_EMEDIA, "Content-Type \"%.60s\" is not accepted here", ct);
            http_error_hint(r, "send the body as application/json (curl -d needs "
                               "-H 'Content-Type: application/json')");
        }
    }
}

/* ---- libmicrohttpd callbacks ---- */

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    HttpServer *s = cls;
    if (!http_conns_request(s, c))
        return NULL; /* refused or past its deadline: drop the connection */
    HttpReq *r = qr_calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->srv = s;
    r->conn = c;
    r->t0_ns = qr_now_ns();
    r->route = -1;
    r->uri = qr_strdup(uri ? uri : "/");
    qr_error_clear(&r->err);
    qr_buf_init(&r->body);
    if (!r->uri) {
        qr_free(r);
        return NULL;
    }
    return r;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version,
                                 const char *upload_data, size_t *upload_size, void **con_cls)
{
    (void)url;
    (void)version;
    (void)cls;
    HttpReq *r = *con_cls;
    if (!r)
        return MHD_NO; /* out of memory at uri_log: drop the connection */
    r->conn = c;
    if (!r->started) {
        if (!http_conns_busy(r->srv, c))
            return MHD_NO; /* closed at its header deadline or for room meanwhile */
        r->started = true;
        r->method_name = method;
        first_call(r);
        if (r->err.code == QR_OK && r->route >= 0 && HTTP_ROUTES[r->route].body == HB_STREAM &&
            HTTP_ROUTES[r->route].begin(r) != QR_OK && r->err.code == QR_OK)
            http_error(r, QR_EINTERNAL, "upload could not start");
        if (r->err.code != QR_OK)
            reply_error(r); /* before the body: no need to read it */
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        r->body_seen += n;
        if (r->queued)
            return MHD_YES;
        if (r->route >= 0 && HTTP_ROUTES[r->route].body == HB_STREAM && r->err.code == QR_OK) {
            /* the route counts its own limits (after gunzip) and keeps its
             * errors to answer with its counts at the end */
            if (r->stream_failed_at) {
                if (r->body_seen > r->stream_failed_at + (64u << 20))
                    return MHD_NO;
            } else if (HTTP_ROUTES[r->route].feed(r, upload_data, n) != QR_OK) {
                r->stream_failed_at = r->body_seen;
            }
            return MHD_YES;
        }
        if (r->err.code == QR_OK && r->body_seen > r->body_limit) {
            const HttpRoute *rt = &HTTP_ROUTES[r->route];
            http_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
            http_error(r, QR_ELIMIT, "request body is larger than the limit of %llu bytes",
                       (unsigned long long)r->body_limit);
            http_error_hint(r, "raise %s in the server config",
                            rt->body == HB_STREAM ? "max_ingest_bytes" : "max_body_bytes");
        }
        if (r->err.code != QR_OK) {
            /* libmicrohttpd 0.9.75 accepts a reply only before or after the
             * body: read on (discarding) and answer at the end, but close
             * the connection once the excess is large */
            if (r->body_seen > r->body_limit + (64u << 20))
                return MHD_NO;
            return MHD_YES;
        }
        const HttpRoute *rt = &HTTP_ROUTES[r->route];
        if (rt->body == HB_JSON) {
            qr_buf_append(&r->body, upload_data, n);
            if (!qr_buf_ok(&r->body))
                http_error(r, QR_ENOMEM, "out of memory reading the request body");
        }
        return MHD_YES;
    }
    /* the whole request is in */
    if (r->queued)
        return MHD_YES;
    if (r->err.code == QR_OK && r->route >= 0) {
        const HttpRoute *rt = &HTTP_ROUTES[r->route];
        bool guard = rt->guard_table && r->t;
        if (rt->handle == http_sql_query)
            auth_check_sql(r);
        if (r->err.code == QR_OK)
            query_size_check(r);
        if (r->err.code != QR_OK) {
            /* answered below */
        } else if (guard && http_table_enter(r->srv, r->t, false) != QR_OK) {
            http_error(r, QR_ENOMEM, "out of memory");
        } else {
            rt->handle(r);
            if (guard)
                http_table_leave(r->srv, r->t, false);
        }
    }
    if (!r->queued)
        reply_error(r);
    return MHD_YES;
}

/* The path part of the target, printable, for the log. */
static void log_path(const char *uri, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = uri; *p && *p != '?' && o + 1 < cap; p++)
        out[o++] = (*p > 0x20 && *p < 0x7f) ? *p : '?';
    out[o] = 0;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    HttpServer *s = cls;
    HttpReq *r = *con_cls;
    http_conns_idle(s, c);
    if (!r)
        return;
    *con_cls = NULL;
    if (r->route >= 0 && HTTP_ROUTES[r->route].cleanup)
        HTTP_ROUTES[r->route].cleanup(r);
    uint64_t ns = qr_now_ns() - r->t0_ns;
    if (r->started) {
        int status = r->queued ? r->status : 0;
        http_metrics_request(s, r->route, status, ns);
        if (s->cfg.log_requests || toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
            char path[208];
            log_path(r->uri, path, sizeof path);
            static const char *why[] = {"", " end=error", " end=timeout", " end=shutdown",
                                        " end=read_error", " end=client_abort"};
            qr_log(toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? QR_LOG_INFO : QR_LOG_WARN,
                   "http method=%s path=%s status=%d ms=%.3f bytes_in=%llu bytes_out=%zu%s",
                   r->method_name ? r->method_name : "?", path, status, (double)ns / 1e6,
                   (unsigned long long)r->body_seen, r->reply_len,
                   (unsigned)toe < sizeof why / sizeof why[0] ? why[toe] : " end=?");
        }
    }
    if (r->counted)
        atomic_fetch_sub(&s->inflight, 1);
    qr_free(r->uri);
    qr_free(r->t);
    qr_free(r->id);
    for (int i = 0; i < r->n_args; i++) {
        qr_free(r->arg_k[i]);
        qr_free(r->arg_v[i]);
    }
    for (int i = 0; i < r->n_hdr; i++)
        qr_free(r->hdr_v[i]);
    qr_buf_free(&r->body);
    qr_free(r);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = 0;
    qr_log(QR_LOG_DEBUG, "http libmicrohttpd: %s", msg);
}

/* ---- start / stop ---- */

/* Free what http_server_start made before the daemon ran. */
static void server_free(HttpServer *s)
{
    http_conns_free(s);
    http_history_free(s->history);
    http_metrics_free(s);
    apikey_free(s->keys);
    qr_free(s->tls_cert);
    qr_free(s->tls_key);
    qr_free(s->guards);
    pthread_mutex_destroy(&s->guard_lock);
    pthread_mutex_destroy(&s->patch_lock);
    pthread_cond_destroy(&s->guard_cond);
    qr_free(s);
}

/* GnuTLS priorities for HTTPS: its defaults, but TLS 1.2 and 1.3 only
 * (TLS 1.0 and 1.1 are deprecated, RFC 8996), as the PG port's OpenSSL
 * context (pgwire_tls.c). */
#define HTTP_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/* Read the PEM files of cfg into s (TLS on when tls_cert is set). */
static int tls_load(HttpServer *s, QrError *err)
{
    if (!s->cfg.tls_cert[0] && !s->cfg.tls_key[0])
        return QR_OK;
    if (!s->cfg.tls_cert[0] || !s->cfg.tls_key[0]) {
        qr_error_set(err, QR_EINVAL, "HTTPS needs both tls_cert and tls_key");
        qr_error_hint(err, "give --tls-cert CERT.pem and --tls-key KEY.pem together");
        return QR_EINVAL;
    }
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        qr_error_set(err, QR_EUNSUPPORTED, "this libmicrohttpd was built without TLS");
        qr_error_hint(err, "install a libmicrohttpd built with GnuTLS, or put a TLS proxy in "
                           "front");
        return QR_EUNSUPPORTED;
    }
    size_t n;
    if (qr_file_read_all(s->cfg.tls_cert, &s->tls_cert, &n, err) != QR_OK ||
        qr_file_read_all(s->cfg.tls_key, &s->tls_key, &n, err) != QR_OK) {
        qr_error_hint(err, "tls_cert and tls_key name PEM files readable by the server");
        return err->code;
    }
    return QR_OK;
}

int http_server_start(QrDb *db, const HttpConfig *cfg, HttpServer **out, QrError *err)
{
    *out = NULL;
    struct sockaddr_storage ss;
    socklen_t sl;
    bool loopback;
    int rc = netaddr_parse_listen(cfg->http, &ss, &sl, &loopback, err);
    if (rc != QR_OK)
        return rc;
    bool v6 = ss.ss_family == AF_INET6;
    HttpServer *s = qr_calloc(1, sizeof *s);
    if (!s)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    s->db = db;
    s->cfg = *cfg;
    s->remote = !loopback;
    s->listen_ss = ss;
    pthread_mutex_init(&s->guard_lock, NULL);
    pthread_mutex_init(&s->patch_lock, NULL);
    pthread_cond_init(&s->guard_cond, NULL);
    if (cfg->key_dir[0] && (rc = apikey_open(cfg->key_dir, &s->keys, err)) != QR_OK) {
        qr_error_hint(err, "fix or remove %s in the data directory (quarry key add NAME)",
                      APIKEY_FILE);
        server_free(s);
        return rc;
    }
    if (s->remote && !cfg->allow_remote && (!s->keys || apikey_count(s->keys) == 0)) {
        qr_error_set(err, QR_EPERM, "refusing to listen on %s without API keys", cfg->http);
        qr_error_detail(err, "anyone who can reach the address could read and change every "
                             "table");
        qr_error_hint(err, "make a key first (quarry key add NAME --scope admin --data DIR), "
                           "listen on 127.0.0.1, or set \"allow_remote\": true in the config "
                           "file if a proxy in front does authentication");
        server_free(s);
        return QR_EPERM;
    }
    if ((rc = tls_load(s, err)) != QR_OK) {
        server_free(s);
        return rc;
    }
    s->started_ns = qr_now_ns();
    s->started_wall_us = qr_wall_us();
    if (http_metrics_new(s) != QR_OK || !(s->history = http_history_new(s->cfg.history_size)) ||
        http_conns_new(s) != QR_OK) {
        server_free(s);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    /* one thread per connection: a request that runs long (a statement up
     * to query_timeout_ms, a merge, an upload) holds only its own
     * connection, and /health or the admin page never wait behind it */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG | MHD_USE_TURBO;
    if (v6)
        flags |= MHD_USE_IPv6;
    if (s->tls_cert)
        flags |= MHD_USE_TLS;
    /* beyond max_connections the guard closes waiting connections
     * (http_conn.c); the margin covers those still closing and busy ones */
    unsigned hard_limit = (unsigned)s->cfg.max_connections + 64u;
    s->mhd = MHD_start_daemon(
        flags, 0, NULL, NULL, on_access, s,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_CONNECTION_LIMIT, hard_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->cfg.idle_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(128u << 10),
        MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, http_conns_notify, s,
        /* after NOTIFY_CONNECTION so that without TLS the list ends here */
        s->tls_cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, (const char *)s->tls_cert,
        MHD_OPTION_HTTPS_MEM_KEY, (const char *)s->tls_key,
        MHD_OPTION_HTTPS_PRIORITIES, HTTP_TLS_PRIORITIES,
        MHD_OPTION_END);
    if (!s->mhd) {
        int e = errno;
        bool tls = s->tls_cert != NULL;
        server_free(s);
        qr_error_set(err, QR_EIO, "could not listen on %s: %s", cfg->http,
                     e ? strerror(e) : "libmicrohttpd could not start");
        qr_error_hint(err, tls ? "is another process using the port, or are tls_cert and "
                                 "tls_key not a matching PEM certificate and key?"
                               : "is another process using the port? pick another with --http");
        return QR_EIO;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    unsigned port = di ? di->port : 0;
    char host[INET6_ADDRSTRLEN] = "?";
    if (v6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof host);
    else
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof host);
    snprintf(s->addr, sizeof s->addr, v6 ? "[%s]:%u" : "%s:%u", host, port);
    *out = s;
    return QR_OK;
}

const char *http_server_addr(const HttpServer *s) { return s->addr; }

void http_server_stop(HttpServer *s)
{
    if (!s)
        return;
    atomic_store(&s->draining, true);
    MHD_socket ls = MHD_quiesce_daemon(s->mhd);
    if (ls != MHD_INVALID_SOCKET)
        close(ls);
    uint64_t deadline = qr_now_ns() + (uint64_t)s->cfg.shutdown_timeout_s * 1000000000ull;
    int last = -1;
    while (atomic_load(&s->inflight) > 0 && qr_now_ns() < deadline) {
        int n = atomic_load(&s->inflight);
        if (n != last)
            qr_log(QR_LOG_INFO, "http shutdown waiting_requests=%d", n);
        last = n;
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&s->inflight) > 0)
        qr_log(QR_LOG_WARN, "http shutdown timeout=%ds abandoned_requests=%d",
               s->cfg.shutdown_timeout_s, atomic_load(&s->inflight));
    MHD_stop_daemon(s->mhd);
    server_free(s);
}
