/*
 * http.h — the HTTP JSON API and admin page of `quarry serve`.
 *
 * Layer: server/.  Calls query/quarry.h, server/ingest.h, the base kit,
 * libmicrohttpd, cJSON and zlib.
 *
 * One HttpServer serves one open QrDb over libmicrohttpd: one thread per
 * connection (keep-alive), so a long statement never holds up another
 * connection such as /health; connection limits and header deadlines in
 * http_conn.c; routes described as data
 * (http.c), every error as JSON {"error":{"code","message",...}} with the
 * status from one QrCode -> HTTP table.  docs/http-api.md is the manual;
 * docs/openapi.yaml the machine-readable form.
 *
 * Limits live in HttpConfig.  They come from defaults, then the JSON config
 * file (keys are the field names below, see HTTP_CONFIG_KEYS in
 * http_config.c), then command-line flags.
 */
#ifndef QR_HTTP_H
#define QR_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/quarry.h"

typedef struct HttpConfig {
    char http[128];              /* listen address "HOST:PORT" (port 0 = any free port) */
    int threads;                 /* indexing threads of uploads and COPY FROM (0 = the
                                    machine's cores; once ignored, so old files load) */
    uint64_t index_memory_bytes; /* their indexing memory budget (0 = an eighth of the
                                    machine's memory) */
    uint64_t max_body_bytes;     /* JSON request bodies (413 beyond) */
    uint64_t max_ingest_bytes;   /* one JSONL upload, counted after gunzip (413 beyond) */
    uint64_t max_line_bytes;     /* one JSONL line (that line is rejected beyond) */
    int max_gzip_ratio;          /* gunzipped bytes per gzip byte of an upload (413
                                    beyond, after the first 10 MiB; 0 = no limit) */
    int max_ingests;             /* uploads running at once (503 beyond) */
    uint64_t query_timeout_ms;   /* per search; a request may ask for less (0 = none) */
    uint64_t query_mem_bytes;    /* per search (0 = engine default) */
    uint64_t mem_limit_bytes;    /* working memory of all queries at once, SQL and
                                    search, HTTP and PG (store/mem.h budget; 0 = a
                                    quarter of the machine's memory) */
    int max_result_window;       /* offset + limit of one search (413 beyond) */
    int max_query_terms;         /* words in one text query (413 beyond; the engine's
                                    parser also stops at 1024 leaf clauses) */
    int max_connections;         /* live connections; beyond, the one waiting longest for
                                    a request is closed, and when all are busy requests
                                    but /health and the admin page get 503 */
    int max_connections_per_ip;  /* connections from one client address (IPv4, IPv6 /64)
                                    (refused with 503 beyond; 0 = no limit) */
    int header_timeout_s;        /* a request's line and headers must arrive within this
                                    (408 and close) */
    int idle_timeout_s;          /* close keep-alive connections idle this long */
    int shutdown_timeout_s;      /* wait this long for running requests on SIGTERM */
    int history_size;            /* recent queries kept for the admin page */
    bool log_requests;           /* one info line per request */
    bool allow_remote;           /* listen beyond loopback without API keys */
    char allowed_hosts[512];     /* without API keys: host names besides loopback ones
                                    and the listen address that Host and Origin may
                                    name, comma-separated (http_origin.c) */
    char cors_origins[1024];     /* origins whose pages may call the API from a browser
                                    (CORS), comma-separated ("https://app.example.com");
                                    "*" any origin, honoured only while API keys are in
                                    force; "" = CORS off (http_origin.c) */
    char tls_cert[512];          /* PEM certificate chain file: serve HTTPS ("" = plain HTTP) */
    char tls_key[512];           /* PEM private key file (with tls_cert) */
    char key_dir[512];           /* not a config key: the data directory holding
                                    api_keys.json (apikey.h); "" = no keys */
} HttpConfig;

void http_config_default(HttpConfig *c);

/* Read a JSON config file over *c.  Unknown keys and values out of range
 * are errors naming the key (QR_EINVAL), a bad file QR_EIO / QR_ESYNTAX. */
int http_config_load(const char *path, HttpConfig *c, QrError *err);
/* Set one key from text ("max_body_bytes", "1048576"): used by flags. */
int http_config_set(HttpConfig *c, const char *key, const char *value, QrError *err);

typedef struct HttpServer HttpServer;

/* Bind and start serving `db` (borrowed; it must outlive the server).
 * API keys come from cfg->key_dir (apikey.h): when any key exists, or the
 * address is not loopback, every route but /health and the admin page's
 * files needs a key with the route's scope.  A non-loopback address with
 * no key is refused (QR_EPERM) unless cfg->allow_remote.  With tls_cert and
 * tls_key the server speaks HTTPS only (QR_EUNSUPPORTED when this
 * libmicrohttpd has no TLS, QR_EIO when a file cannot be read). */
int http_server_start(QrDb *db, const HttpConfig *cfg, HttpServer **out, QrError *err);
/* The bound address, "127.0.0.1:8080" (the real port when 0 was asked). */
const char *http_server_addr(const HttpServer *s);
/* Graceful stop: close the listening socket, answer new requests on open
 * connections with 503, wait up to shutdown_timeout_s for running requests,
 * then close every connection and free the server.  The db stays open. */
void http_server_stop(HttpServer *s);

/* Record a statement run elsewhere (the PG port) in the server's query
 * history, as POST /sql records its own: code is QR_OK or the error's
 * QrCode, plan QrSqlResult.plan (may be NULL).  Thread-safe. */
void http_server_record_sql(HttpServer *s, const char *via, const char *sql, size_t len,
                            uint64_t rows, double took_ms, int code, const char *plan);

#endif
