/*
 * http_int.h — private to src/server/http*.c: the request record, the route
 * table's row type, reply and error helpers, table guards, metrics and the
 * query history.  Sections follow the files.
 *
 * Layer: server/.
 *
 * Request lifecycle (libmicrohttpd calls the access handler several times
 * per request):
 *
 *   uri_log      HttpReq allocated, clock started, raw URI kept      (http.c)
 *   first call   route matched (404/405), API key against the route's
 *                scope (401/403), limits and media types checked
 *                (413/415/503), HB_STREAM routes' begin()
 *   body calls   HB_JSON: bytes appended up to the route's limit;
 *                HB_STREAM: feed() per chunk as it arrives
 *   final call   POST /sql's scope from its statements (403), the
 *                max_query_terms check (413), then handle(): builds the
 *                reply or records an error
 *   completed    cleanup(), metrics, one log line, HttpReq freed
 *
 * A handler either queues a reply (http_reply*) or records an error
 * (http_error*); the core answers a recorded error as JSON.  The first
 * error recorded wins, like QrError.
 */
#ifndef QR_HTTP_INT_H
#define QR_HTTP_INT_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "query/quarry.h"
#include "query/sql.h"
#include "server/apikey.h"
#include "server/http.h"
#include "store/buf.h"
#include "store/error.h"

struct cJSON;

/* ---- http.c: server core, routing, replies ---- */

typedef enum HttpMethod {
    HM_GET = 1,
    HM_POST = 2,
    HM_PUT = 4,
    HM_DELETE = 8,
    HM_HEAD = 16,
    HM_PATCH = 32,
    HM_OPTIONS = 64,
    HM_OTHER = 128,
} HttpMethod;

typedef enum HttpBodyKind {
    HB_NONE,   /* a body is read and ignored (bounded by max_body_bytes) */
    HB_JSON,   /* buffered up to max_body_bytes, then handle() */
    HB_STREAM, /* begin() after the headers, feed() per chunk, handle() at the end */
} HttpBodyKind;

/* Error codes beyond QrCode for failures that only HTTP has. */
enum { HTTP_EMETHOD = QR_CODE_COUNT, HTTP_EMEDIA, HTTP_EHEADER_TIMEOUT, HTTP_ECODE_END };

typedef struct HttpReq HttpReq;

/* One row of the route table (http.c ROUTES).  The same rows drive
 * dispatch, the 404/405 answers (with Allow), the metric labels and the
 * route list in docs/http-api.md. */
typedef struct HttpRoute {
    HttpMethod method;
    const char *pattern;  /* "/tables/{t}/documents/{id}": literal or {name} segments */
    const char *name;     /* metric label, unique per row */
    ApiScope scope;       /* API key scope needed (when keys are in use) */
    HttpBodyKind body;
    bool guard_table;     /* hold the {t} guard around handle() (drop waits) */
    void (*handle)(HttpReq *r);
    int (*begin)(HttpReq *r);                                /* HB_STREAM only */
    int (*feed)(HttpReq *r, const char *data, size_t len);   /* HB_STREAM only */
    void (*cleanup)(HttpReq *r);                             /* may be NULL */
} HttpRoute;

#define HTTP_MAX_ARGS 32
#define HTTP_MAX_HEADERS 12

/* One request.  Invariants: `uri` is set from uri_log on; `route` is -1
 * until the first call matched one; a reply is queued at most once. */
struct HttpReq {
    HttpServer *srv;               /* borrows */
    struct MHD_Connection *conn;   /* borrows (libmicrohttpd owns) */
    uint64_t t0_ns;                /* clock at uri_log */
    char *uri;                     /* owns: raw request target "/p?q" */
    const char *method_name;       /* borrows libmicrohttpd's string */
    HttpMethod method;
    int route;                     /* index into ROUTES, -1 none */
    char *t;                       /* owns: decoded {t}, NULL if none */
    char *id;                      /* owns: decoded {id}, NULL if none */
    int n_args;                    /* decoded query arguments (owned) */
    char *arg_k[HTTP_MAX_ARGS], *arg_v[HTTP_MAX_ARGS];
    bool args_parsed, args_bad;
    QrBuf body;                    /* owns: HB_JSON body */
    uint64_t body_seen;            /* bytes received (any kind) */
    uint64_t body_limit;           /* 413 beyond */
    uint64_t stream_failed_at;     /* body_seen when an HB_STREAM feed() failed, 0 = not */
    bool started;                  /* first call done */
    bool queued;                   /* a reply was queued */
    bool counted;                  /* counted in srv->inflight */
    bool guard_streaming;          /* a streaming guard on `t` is held */
    int status;                    /* reply status for the log and metrics */
    size_t reply_len;
    QrError err;                   /* recorded error (code QR_OK = none) */
    int xcode;                     /* HTTP_EMETHOD/HTTP_EMEDIA, or 0 */
    const char *hdr_k[HTTP_MAX_HEADERS]; /* extra reply headers (static names) */
    char *hdr_v[HTTP_MAX_HEADERS];       /* owns the values */
    int n_hdr;
    void *state;                   /* owns: the route's state (cleanup frees) */
    ApiScope granted;              /* scope of the request's key (ADMIN when keys are off) */
    unsigned preflight_allow;      /* OPTIONS: the methods the path takes (HttpMethod bits) */
    char key_name[APIKEY_NAME_MAX + 1];  /* the request's API key, "" = none */
    char key_tables[APIKEY_TABLES_MAX];  /* the tables that key is limited to, "" = all */
    QrBuf *capture;                /* borrows: a sub-request (multi-search) whose reply body
                                      is appended here instead of being sent */
};

/* Queue `body` (taken over, may be NULL for an empty body) with status and
 * content type.  Extra headers recorded by http_header() go along. */
void http_reply(HttpReq *r, int status, const char *content_type, QrBuf *body);
void http_reply_json(HttpReq *r, int status, QrBuf *body);
/* A static asset (not copied); 304 when If-None-Match equals etag. */
void http_reply_static(HttpReq *r, const char *content_type, const void *data, size_t len,
                       const char *etag);
/* Add a reply header (value copied). */
void http_header(HttpReq *r, const char *name, const char *value);
/* Record an error (first wins); returns its code.  xcode values beyond
 * QrCode select HTTP-only rows of the status table. */
int http_error(HttpReq *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int http_error_from(HttpReq *r, const QrError *e);
void http_error_detail(HttpReq *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void http_error_hint(HttpReq *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The HTTP status and code name of an error code (the one table). */
int http_status_of(int code);
const char *http_code_name(int code);
/* Append {"error":{...}} for e to b. */
void http_error_json(QrBuf *b, int code, const QrError *e);

/* Decoded query argument or NULL; the n-th argument for iteration. */
const char *http_arg(HttpReq *r, const char *name);
/* A request header or NULL. */
const char *http_req_header(HttpReq *r, const char *name);
/* Parse the HB_JSON body as one JSON value; NULL after recording a 400
 * with the position of the syntax error.  Caller frees with cJSON_Delete. */
struct cJSON *http_body_json(HttpReq *r);

/* May the request's key use `table`?  Records 403 naming the key's tables
 * when not. */
bool http_key_table_ok(HttpReq *r, const char *table);
/* Record 413 when the text query q has more words than max_query_terms. */
int http_query_terms_check(HttpReq *r, const char *q);

/* The SQL access (query/sql.h) a key of scope s may use (http.c): search
 * reads, write also changes rows, admin everything.  POST /sql checks its
 * statements' parse against it before running any, and limits its session
 * to it. */
QrSqlAccess http_scope_access(ApiScope s);
/* Words in a text query, as max_query_terms counts them (not AND/OR/NOT,
 * field names before ':', numbers after '^' or '~'). */
int http_query_terms(const char *q);

/* "GET, HEAD, POST": the methods of a mask of HttpMethod bits (GET adds HEAD). */
void http_methods_text(unsigned mask, char *out, size_t cap);

/* The route table, for metrics labels. */
extern const HttpRoute HTTP_ROUTES[];
extern const int HTTP_N_ROUTES;

/* ---- JSON writing (http.c) ---- */

/* A JSON string with quotes; invalid UTF-8 becomes U+FFFD. */
void jw_str(QrBuf *b, const char *s, size_t n);
static inline void jw_cstr(QrBuf *b, const char *s) { jw_str(b, s, strlen(s)); }
/* "key": */
void jw_key(QrBuf *b, const char *k);
/* cJSON value printed compactly (NULL prints null). */
void jw_cjson(QrBuf *b, const struct cJSON *v);

/* ---- table guards (http.c) ----
 * qr_table_drop frees the table handle, so no request may hold it then.
 * Every request that uses table T holds an engine reference on T
 * (qr_table_acquire, quarry.h "table handles") from before handle() to
 * after it, or for an upload's whole body.  A drop waits for the short
 * users and refuses (QR_EBUSY) while an upload streams into T: a drop
 * waiting on an upload could block the worker thread that upload needs. */
#define HTTP_DROP_WAIT_MS 30000
int http_table_enter(HttpServer *s, const char *name, bool streaming);
void http_table_leave(HttpServer *s, const char *name, bool streaming);
/* Drop `name` (qr_table_drop_wait): QR_EBUSY while an upload streams into
 * it or when users outlast HTTP_DROP_WAIT_MS; the engine's errors else. */
int http_table_drop(HttpServer *s, const char *name, QrError *err);

/* ---- the server record (http.c) ---- */

typedef struct HttpMetrics HttpMetrics;
typedef struct HttpHistory HttpHistory;
typedef struct TableGuard TableGuard;
typedef struct HttpConns HttpConns;

struct HttpServer {
    QrDb *db;                      /* borrows */
    HttpConfig cfg;
    struct MHD_Daemon *mhd;        /* owns */
    char addr[160];
    uint64_t started_ns;
    int64_t started_wall_us;
    atomic_int connections;        /* open TCP connections */
    atomic_int inflight;           /* requests between first call and completion */
    atomic_int ingests;            /* uploads streaming now */
    atomic_bool draining;          /* shutting down: 503 to new requests */
    HttpMetrics *metrics;          /* owns */
    HttpHistory *history;          /* owns */
    pthread_mutex_t guard_lock;    /* guards guards[] */
    pthread_cond_t guard_cond;     /* unused */
    pthread_mutex_t patch_lock;    /* PATCHes read, merge and write one at a time */
    TableGuard *guards;            /* owns: tables with uploads streaming */
    int n_guards, cap_guards;
    ApiKeys *keys;                 /* owns, NULL without cfg.key_dir */
    bool remote;                   /* listening beyond loopback */
    struct sockaddr_storage listen_ss; /* the listen address asked for (port aside) */
    uint8_t *tls_cert, *tls_key;   /* owns: PEM text given to libmicrohttpd */
    HttpConns *conns;              /* owns: connection limits and deadlines (http_conn.c) */
};

/* ---- http_conn.c: per-client and global connection limits, header and
 * keep-alive deadlines (conn_guard.h) ---- */
/* Start the deadline thread; QR_ENOMEM / QR_EIO. */
int http_conns_new(HttpServer *s);
/* After the daemon stopped (every connection closed). NULL-safe. */
void http_conns_free(HttpServer *s);
/* MHD_OPTION_NOTIFY_CONNECTION: admit or refuse, count, forget. */
void http_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode toe);
/* A request line arrived (uri_log); false: the connection was refused or
 * kicked and must be dropped. */
bool http_conns_request(HttpServer *s, struct MHD_Connection *c);
/* The headers are in (first access call); false: drop the connection. */
bool http_conns_busy(HttpServer *s, struct MHD_Connection *c);
/* The request completed: wait for the next one up to idle_timeout_s. */
void http_conns_idle(HttpServer *s, struct MHD_Connection *c);
/* Connections refused per client, evicted for room, closed at a deadline. */
void http_conns_counts(HttpServer *s, uint64_t *refused, uint64_t *evicted, uint64_t *timed_out);
/* ---- http_origin.c ---- */
/* Without API keys: refuse (403) a request whose Host is not a loopback
 * name, the listen address or in allowed_hosts (DNS rebinding), and a write
 * with a foreign Origin (403) or a Content-Type a page of any site may send
 * (415: text/plain, forms, multipart, or none where the route takes a
 * body).  Needs r->route.  Records the error on r. */
void http_origin_check(HttpReq *r);
/* CORS (cors_origins): a request whose Origin is allowed gets
 * Access-Control-Allow-Origin (and Vary: Origin) on whatever it is
 * answered, errors included, so a page can read them.  Call once the
 * method is known. */
void http_cors_headers(HttpReq *r);
/* Is `origin` (the Origin header's text) one of cors_origins?  "*" counts
 * only while API keys are in force (keys_on). */
bool http_cors_allowed(const HttpServer *s, const char *origin, bool keys_on);
/* OPTIONS on a path that exists (r->preflight_allow): 204 with Allow; a CORS
 * preflight from an allowed origin also gets the Access-Control-Allow-*
 * headers, one from another origin 403. */
void http_cors_preflight(HttpReq *r, bool keys_on);

/* ---- http_tables.c ---- */
void http_tables_list(HttpReq *r);
void http_tables_create(HttpReq *r);
void http_tables_describe(HttpReq *r);
void http_synonyms_get(HttpReq *r);
void http_synonyms_put(HttpReq *r);
void http_tables_drop(HttpReq *r);
void http_tables_flush(HttpReq *r);
void http_tables_merge(HttpReq *r);
void http_tables_bm25_stats(HttpReq *r);
/* Open {t} or record 404. */
QrTable *http_table_get(HttpReq *r);
/* {"docs":..,"segments":..} fields of st, without braces. */
void http_stats_fields(QrBuf *b, const QrTableStats *st);

/* ---- http_docs.c ---- */
int http_docs_ingest_begin(HttpReq *r);
int http_docs_ingest_feed(HttpReq *r, const char *data, size_t len);
void http_docs_ingest_end(HttpReq *r);
void http_docs_ingest_cleanup(HttpReq *r);
void http_docs_get(HttpReq *r);
void http_docs_put(HttpReq *r);
void http_docs_patch(HttpReq *r);
void http_docs_delete(HttpReq *r);
void http_docs_delete_by_query(HttpReq *r);

/* ---- http_search.c ---- */
void http_search_get(HttpReq *r);
void http_search_post(HttpReq *r);
/* POST /multi_search {"queries": [{"table": T, <search parameters>}, ...]}:
 * each search as POST /tables/T/search would answer it, or its error, in
 * order; at most HTTP_MAX_MULTI queries. */
#define HTTP_MAX_MULTI 64
void http_search_multi(HttpReq *r);

/* ---- http_facets.c: the "facets" parameter ---- */
#define HTTP_MAX_FACETS 16
/* Facet requests of one search and the strings and arrays they point to
 * (all owned). */
typedef struct HttpFacets {
    int n;
    QrFacetReq reqs[HTTP_MAX_FACETS];
    char *names[HTTP_MAX_FACETS];      /* the answer's key of each facet */
    char *fields[HTTP_MAX_FACETS];     /* reqs[i].field points here */
    double *pcts[HTTP_MAX_FACETS];     /* reqs[i].percents */
    QrFacetRange *ranges[HTTP_MAX_FACETS]; /* reqs[i].ranges (keys owned) */
} HttpFacets;
/* Add the facets of the JSON value v (a list, an object of named specs, or
 * the GET text as a string) / of the GET text; record 400 on a bad spec. */
int http_facets_json(HttpReq *r, HttpFacets *fs, const struct cJSON *v);
int http_facets_text(HttpReq *r, HttpFacets *fs, const char *v);
/* Append ,"facets":{...} for res (in fs's order). */
void http_facets_write(QrBuf *b, const HttpFacets *fs, const QrSearchRes *res);
void http_facets_free(HttpFacets *fs);

/* ---- http_sql.c ---- */
void http_sql_query(HttpReq *r);

/* ---- http_metrics.c ---- */
int http_metrics_new(HttpServer *s);
void http_metrics_free(HttpServer *s);
/* One finished request. */
void http_metrics_request(HttpServer *s, int route, int status, uint64_t ns);
/* Per-table activity: searches (with their time) and documents ingested. */
void http_metrics_table(HttpServer *s, const char *table, uint64_t searches, uint64_t search_ns,
                        uint64_t docs);
void http_metrics_table_forget(HttpServer *s, const char *table);
void http_health(HttpReq *r);
void http_metrics_get(HttpReq *r);
void http_stats_get(HttpReq *r);

/* ---- http_history.c ---- */
typedef struct HttpQueryRec {
    const char *table;
    const char *q;
    size_t q_len;
    const char *fields;     /* may be NULL */
    bool default_and;
    double took_ms;
    uint64_t total;
    int status;             /* HTTP status of the answer */
    /* optional (zero when the caller does not know them) */
    const char *filter;     /* filter text, may be NULL */
    const char *sort;       /* sort text, may be NULL */
    const QrSearchStats *stats; /* the plan the engine used (strategy, filter paths) */
    uint64_t rows;          /* hits returned */
} HttpQueryRec;
HttpHistory *http_history_new(int size);
void http_history_free(HttpHistory *h);
/* A search: grouped by table, canonical query text (qr_query_canonical),
 * fields, operator, filter and sort. */
void http_history_add(HttpHistory *h, const HttpQueryRec *rec);
/* One SQL statement that came by `via` ("http": POST /sql, "pg": the PG
 * port): grouped by its normalized text (qr_sql_normalize); plan (the
 * table accesses run, QrSqlResult.plan) may be NULL. */
void http_history_sql(HttpHistory *h, const char *via, const char *sql, size_t len, uint64_t rows,
                      double took_ms, int status, const char *plan);
void http_history_forget(HttpHistory *h, const char *table);
void http_queries_get(HttpReq *r);

/* ---- http_admin.c; the assets are in http_assets.c, generated from
 * src/server/admin/ by src/server/admin/embed.py ---- */
typedef struct HttpAsset {
    const char *path;          /* "/", "/admin/app.js" */
    const char *content_type;
    const char *etag;          /* quoted hash of the content */
    const char *data;
    size_t len;
} HttpAsset;
extern const HttpAsset HTTP_ASSETS[];
extern const int HTTP_N_ASSETS;
void http_admin_asset(HttpReq *r);

#endif
