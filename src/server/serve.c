/*
 * serve.c — `quarry serve --data DIR [--http HOST:PORT] [--pg HOST:PORT]
 * [--config FILE] [--peers URL,URL ...]`: open the data directory (with
 * the other nodes of split tables as its BM25 statistics source, when
 * --peers names them: server/peers.h), start the HTTP server and,
 * with --pg, the PostgreSQL port on the same QrDb, wait for SIGTERM or
 * SIGINT, then stop gracefully (no new connections, running requests
 * finish, connections close) and close the data directory.
 *
 * Layer: server/.  Calls query/quarry.h, server/http.h, server/pgwire.h and
 * the base kit.
 *
 * Signals are blocked in every thread before any is created and taken
 * synchronously with sigwait, so no handler runs inside the engine.
 */
#include "server/serve.h"
#include "query/quarry.h"
#include "server/http.h"
#include "server/peers.h"
#include "server/pgwire.h"
#include "store/mem.h"
#include "store/util.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SERVE_MEM_LIMIT_MIN (16u << 20)          /* smaller starves every query */
#define SERVE_MEM_LIMIT_UNKNOWN (1ull << 30)     /* when the machine's memory is unknown */

typedef struct ServeOpt {
    const char *name;       /* flag without "--" */
    const char *config_key; /* HttpConfig key it sets, or NULL */
    const char *value;      /* set when seen */
} ServeOpt;

static void usage(void)
{
    fprintf(stderr,
            "usage: quarry serve --data DIR [--http HOST:PORT] [--config FILE]\n"
            "                    [--fsync commit|batched|off] [--salvage]\n"
            "                    [--statement-timeout MS] [--header-timeout S]\n"
            "                    [--max-connections-per-ip N]\n"
            "                    [--pg HOST:PORT] [--pg-max-connections N]\n"
            "                    [--pg-max-connections-per-ip N] [--pg-auth-timeout S]\n"
            "                    [--pg-statement-timeout MS]\n"
            "                    [--pg-tls-cert CERT.pem --pg-tls-key KEY.pem]\n"
            "                    [--tls-cert CERT.pem --tls-key KEY.pem] [--mem-limit BYTES]\n"
            "                    [--peers URL,URL] [--peer-key-file FILE] [--peer-ca CA.pem]\n"
            "                    [--peer-unreachable error|warn] [--peer-timeout MS]\n"
            "                    [--threads N] [--memory BYTES]\n"
            "  --http      listen address (default 127.0.0.1:8080; port 0 picks a free one)\n"
            "  --pg        also serve the PostgreSQL wire protocol (e.g. 127.0.0.1:5433;\n"
            "              docs/pg-protocol.md); users: quarry user add NAME\n"
            "  --config    JSON file with server settings (docs/http-api.md, \"Configuration\")\n"
            "  --statement-timeout  ceiling on a search or SQL statement, both ports\n"
            "              (default 10000 ms; 0 = none; SET statement_timeout can lower it)\n"
            "  --header-timeout     seconds to send HTTP request headers (default 10)\n"
            "  --max-connections-per-ip, --pg-max-connections-per-ip  connections from\n"
            "              one client address (defaults 128 and 50; 0 = no limit)\n"
            "  --pg-auth-timeout    seconds for PG startup and authentication (default 10)\n"
            "  --pg-statement-timeout  the PG port's own ceiling (default: --statement-timeout)\n"
            "  --tls-cert, --tls-key  serve HTTPS from these PEM files (docs/security.md)\n"
            "  --mem-limit memory for all running queries together, in bytes (default: a\n"
            "              quarter of the machine's memory; docs/operations.md)\n"
            "  --peers     HTTP base URLs of the other nodes holding parts of the same tables:\n"
            "              BM25 then counts every node's documents (docs/scale-out.md)\n"
            "  --peer-key-file  a file with the API key (scope search) sent to the peers\n"
            "  --peer-ca   PEM certificate authorities for https:// peers (default: system)\n"
            "  --peer-unreachable  error (default): a ranked query fails when a peer does not\n"
            "              answer; warn: it answers from the others' statistics with a warning\n"
            "  --peer-timeout  ms for one peer's answer (default 5000)\n"
            "  --threads   indexing threads of uploads and COPY FROM (default: the cores)\n"
            "  --memory    their indexing memory, in bytes (default: an eighth of the\n"
            "              machine's memory; docs/operations.md)\n"
            "  limits and timeouts: docs/operations.md; API keys: quarry key add NAME\n");
}

/* A whole-number option value in lo..hi, or -1 after saying what is wrong. */
static long opt_long(const char *name, const char *value, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (errno || end == value || *end || v < lo || v > hi) {
        fprintf(stderr, "quarry serve: --%s must be a whole number from %ld to %ld\n", name, lo,
                hi);
        return -1;
    }
    return v;
}

/* The PG port's statements go to the HTTP server's query history, so the
 * admin page shows what psql and drivers ran beside POST /sql. */
static void pg_statement_to_history(void *arg, const char *sql, size_t len, uint64_t rows,
                                    double took_ms, int code, const char *plan)
{
    http_server_record_sql(arg, "pg", sql, len, rows, took_ms, code, plan);
}

int cmd_serve(int argc, char **argv)
{
    ServeOpt opts[] = {{"data", NULL, NULL},   {"http", "http", NULL},
                       {"config", NULL, NULL}, {"threads", "threads", NULL},
                       {"fsync", NULL, NULL},  {"salvage", NULL, NULL},
                       {"pg", NULL, NULL},     {"pg-max-connections", NULL, NULL},
                       {"pg-tls-cert", NULL, NULL}, {"pg-tls-key", NULL, NULL},
                       {"tls-cert", "tls_cert", NULL}, {"tls-key", "tls_key", NULL},
                       {"statement-timeout", "query_timeout_ms", NULL},
                       {"header-timeout", "header_timeout_s", NULL},
                       {"max-connections-per-ip", "max_connections_per_ip", NULL},
                       {"pg-max-connections-per-ip", NULL, NULL},
                       {"pg-auth-timeout", NULL, NULL},
                       {"pg-statement-timeout", NULL, NULL},
                       {"mem-limit", "mem_limit_bytes", NULL},
                       {"peers", NULL, NULL},           /* 19 */
                       {"peer-key-file", NULL, NULL},   /* 20 */
                       {"peer-ca", NULL, NULL},         /* 21 */
                       {"peer-unreachable", NULL, NULL}, /* 22 */
                       {"peer-timeout", NULL, NULL},   /* 23 */
                       {"memory", "index_memory_bytes", NULL}};

    int n_opts = (int)(sizeof opts / sizeof opts[0]);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "quarry serve: unexpected argument \"%s\"\n", a);
            usage();
            return 2;
        }
        const char *eq = strchr(a + 2, '=');
        size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        ServeOpt *o = NULL;
        for (int k = 0; k < n_opts; k++)
            if (strlen(opts[k].name) == nl && !strncmp(opts[k].name, a + 2, nl))
                o = &opts[k];
        if (!o) {
            fprintf(stderr, "quarry serve: unknown option %.*s\n", (int)nl + 2, a);
            usage();
            return 2;
        }
        if (!strcmp(o->name, "salvage")) {
            o->value = "true";
            continue;
        }
        if (eq)
            o->value = eq + 1;
        else if (i + 1 < argc)
            o->value = argv[++i];
        else {
            fprintf(stderr, "quarry serve: option --%s needs a value\n", o->name);
            return 2;
        }
    }
    QrError err;
    qr_error_clear(&err);
    HttpConfig cfg;
    http_config_default(&cfg);
    if (opts[2].value && http_config_load(opts[2].value, &cfg, &err) != QR_OK) {
        qr_log(QR_LOG_ERROR, "serve: %s%s%s%s%s", err.message, err.detail[0] ? " (" : "",
               err.detail, err.detail[0] ? ")" : "", "");
        if (err.hint[0])
            qr_log(QR_LOG_ERROR, "serve: hint: %s", err.hint);
        return 1;
    }
    for (int k = 0; k < n_opts; k++)
        if (opts[k].config_key && opts[k].value &&
            http_config_set(&cfg, opts[k].config_key, opts[k].value, &err) != QR_OK) {
            fprintf(stderr, "quarry serve: --%s: %s\n", opts[k].name, err.message);
            return 2;
        }
    uint64_t mem_limit = cfg.mem_limit_bytes ? cfg.mem_limit_bytes : qr_mem_physical() / 4;
    if (mem_limit == 0)
        mem_limit = SERVE_MEM_LIMIT_UNKNOWN;
    if (mem_limit < SERVE_MEM_LIMIT_MIN) {
        fprintf(stderr, "quarry serve: --mem-limit (mem_limit_bytes) must be at least %u bytes\n",
                SERVE_MEM_LIMIT_MIN);
        return 2;
    }
    /* every query arena of the process, HTTP and PG, draws on it */
    qr_mem_budget_set((size_t)mem_limit);
    /* Query arenas grow in blocks of up to 1 MiB: map each one of 256 KiB
     * or more on its own, so that a large statement's memory goes back to
     * the system when it ends (glibc's threshold would otherwise rise past
     * the block size after the first free, and the blocks stay in the heap) */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    /* ... while a few MiB freed at the top of a thread's heap stay there:
     * trimmed after every statement, each next one faulted its pages in
     * again (a quarter of a GROUP BY of a few hundred groups) */
    mallopt(M_TRIM_THRESHOLD, 4 * 1024 * 1024);
    /* uploads and COPY FROM: their indexing threads and memory (the
     * threshold above also hands their big buffers back when freed) */
    qr_load_set_defaults(cfg.threads, (size_t)cfg.index_memory_bytes);
    QrDbOpts dbo;
    qr_db_opts_default(&dbo);
    dbo.salvage = opts[5].value != NULL;
    if (opts[4].value) {
        if (!strcmp(opts[4].value, "commit"))
            dbo.fsync = QR_FSYNC_COMMIT;
        else if (!strcmp(opts[4].value, "batched"))
            dbo.fsync = QR_FSYNC_BATCHED;
        else if (!strcmp(opts[4].value, "off"))
            dbo.fsync = QR_FSYNC_OFF;
        else {
            fprintf(stderr, "quarry serve: --fsync must be commit, batched or off\n");
            return 2;
        }
    }
    PeerOpts po = {.urls = opts[19].value, .key_file = opts[20].value, .ca_file = opts[21].value};
    if (opts[22].value && strcmp(opts[22].value, "error") != 0) {
        if (strcmp(opts[22].value, "warn") != 0) {
            fprintf(stderr, "quarry serve: --peer-unreachable must be error or warn\n");
            return 2;
        }
        po.warn_unreachable = true;
    }
    if (opts[23].value) {
        long v = opt_long("peer-timeout", opts[23].value, 1, 3600000);
        if (v < 0)
            return 2;
        po.timeout_ms = (uint32_t)v;
    }
    if (!po.urls && (po.key_file || po.ca_file || opts[22].value || opts[23].value)) {
        fprintf(stderr, "quarry serve: the --peer-* options need --peers\n");
        return 2;
    }
    const char *data = opts[0].value ? opts[0].value : "./data";
    if (strlen(data) >= sizeof cfg.key_dir) {
        fprintf(stderr, "quarry serve: --data path is too long\n");
        return 2;
    }
    snprintf(cfg.key_dir, sizeof cfg.key_dir, "%s", data);
    PgConfig pgc;
    pg_config_default(&pgc);
    if (opts[6].value)
        snprintf(pgc.listen, sizeof pgc.listen, "%s", opts[6].value);
    if (opts[8].value)
        snprintf(pgc.tls_cert, sizeof pgc.tls_cert, "%s", opts[8].value);
    if (opts[9].value)
        snprintf(pgc.tls_key, sizeof pgc.tls_key, "%s", opts[9].value);
    /* one statement ceiling for both ports unless the PG port has its own */
    pgc.statement_timeout_ms = cfg.query_timeout_ms;
    const struct {
        int opt; /* index in opts */
        long lo, hi;
        int *to_int;
        uint64_t *to_u64;
    } pg_num[] = {{7, 1, 100000, &pgc.max_connections, NULL},
                  {15, 0, 100000, &pgc.max_connections_per_ip, NULL},
                  {16, 1, 3600, &pgc.auth_timeout_s, NULL},
                  {17, 0, 86400000, NULL, &pgc.statement_timeout_ms}};
    for (size_t k = 0; k < sizeof pg_num / sizeof pg_num[0]; k++) {
        const ServeOpt *o = &opts[pg_num[k].opt];
        if (!o->value)
            continue;
        long v = opt_long(o->name, o->value, pg_num[k].lo, pg_num[k].hi);
        if (v < 0)
            return 2;
        if (pg_num[k].to_int)
            *pg_num[k].to_int = (int)v;
        else
            *pg_num[k].to_u64 = (uint64_t)v;
    }

    /* block the stop signals in this thread before any other thread exists */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    Peers *peers = NULL; /* outlives db, its statistics source */
    if (po.urls && peers_new(&po, &peers, &err) != QR_OK) {
        fprintf(stderr, "quarry serve: --peers: %s%s%s\n", err.message, err.detail[0] ? ": " : "",
                err.detail);
        if (err.hint[0])
            fprintf(stderr, "hint: %s\n", err.hint);
        return 2;
    }
    if (peers)
        dbo.stats_source = peers_source(peers);
    QrDb *db = NULL;
    if (qr_db_open(data, &dbo, &db, &err) != QR_OK) {
        qr_log(QR_LOG_ERROR, "serve: %s", err.message);
        if (err.hint[0])
            qr_log(QR_LOG_ERROR, "serve: hint: %s", err.hint);
        peers_free(peers);
        return 1;
    }
    HttpServer *srv = NULL;
    if (http_server_start(db, &cfg, &srv, &err) != QR_OK) {
        qr_log(QR_LOG_ERROR, "serve: %s", err.message);
        if (err.detail[0])
            qr_log(QR_LOG_ERROR, "serve: detail: %s", err.detail);
        if (err.hint[0])
            qr_log(QR_LOG_ERROR, "serve: hint: %s", err.hint);
        qr_db_close(db);
        peers_free(peers);
        return 1;
    }
    PgServer *pg = NULL;
    pgc.on_statement = pg_statement_to_history;
    pgc.on_statement_arg = srv;
    if (opts[6].value && pg_server_start(db, &pgc, &pg, &err) != QR_OK) {
        qr_log(QR_LOG_ERROR, "serve: %s", err.message);
        if (err.detail[0])
            qr_log(QR_LOG_ERROR, "serve: detail: %s", err.detail);
        if (err.hint[0])
            qr_log(QR_LOG_ERROR, "serve: hint: %s", err.hint);
        http_server_stop(srv);
        qr_db_close(db);
        peers_free(peers);
        return 1;
    }
    if (pg)
        qr_log(QR_LOG_INFO,
               "serve pg=%s max_connections=%d max_connections_per_ip=%d auth_timeout_s=%d "
               "statement_timeout_ms=%llu tls=%s",
               pg_server_addr(pg), pgc.max_connections, pgc.max_connections_per_ip,
               pgc.auth_timeout_s, (unsigned long long)pgc.statement_timeout_ms,
               pgc.tls_cert[0] ? "on" : "off");
    if (peers)
        qr_log(QR_LOG_INFO, "serve peers=%s count=%d on_unreachable=%s timeout_ms=%u",
               po.urls, peers_count(peers), po.warn_unreachable ? "warn" : "error",
               po.timeout_ms ? po.timeout_ms : 5000);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    qr_log(QR_LOG_INFO,
           "serve started version=%s http=%s://%s/ admin=%s://%s/ data=%s cores=%ld "
           "max_connections=%d max_connections_per_ip=%d header_timeout_s=%d "
           "query_timeout_ms=%llu mem_limit_mib=%llu index_threads=%d index_memory_mib=%llu "
           "pid=%ld",
           QUARRY_VERSION, cfg.tls_cert[0] ? "https" : "http", http_server_addr(srv),
           cfg.tls_cert[0] ? "https" : "http", http_server_addr(srv), data, cores,
           cfg.max_connections, cfg.max_connections_per_ip, cfg.header_timeout_s,
           (unsigned long long)cfg.query_timeout_ms, (unsigned long long)(mem_limit >> 20),
           qr_load_threads_default(), (unsigned long long)(qr_load_memory_default() >> 20),
           (long)getpid());
    int sig = 0;
    while (sigwait(&stop, &sig) != 0)
        ;
    qr_log(QR_LOG_INFO, "serve stopping signal=%s", sig == SIGINT ? "SIGINT" : "SIGTERM");
    pg_server_stop(pg);
    http_server_stop(srv);
    qr_db_close(db);
    peers_free(peers);
    qr_log(QR_LOG_INFO, "serve stopped data=%s", data);
    return 0;
}
