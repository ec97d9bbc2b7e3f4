/*
 * http_metrics.c — request counters and latency histograms per route,
 * per-table activity, and the endpoints that read them: GET /health,
 * GET /metrics (Prometheus text format 0.0.4) and GET /stats (JSON for the
 * admin page's overview and live chart).
 *
 * Layer: server/.  Calls query/quarry.h and the base kit.
 *
 * Counters are relaxed atomics bumped once per request on the completion
 * path; the per-table map is small and takes a mutex.
 */
#include "server/http_int.h"
#include "store/mem.h"
#include "store/util.h"

#include <stdio.h>
#include <string.h>

#define MAX_ROUTES 32  /* >= HTTP_N_ROUTES; row MAX_ROUTES counts unmatched requests */
#define MAX_TABLES 1024

static const int STATUSES[] = {200, 201, 204, 304, 400, 401, 403, 404, 405, 409,
                               413, 415, 422, 499, 500, 503, 504, 0};
#define N_STATUS (int)(sizeof STATUSES / sizeof STATUSES[0]) /* last: none/other */

static const double BUCKETS[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                 0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5,
                                 5,      10};
#define N_BUCKETS (int)(sizeof BUCKETS / sizeof BUCKETS[0])

typedef struct TableCounters {
    char name[QR_NAME_MAX + 1];
    uint64_t searches;
    uint64_t search_ns;
    uint64_t docs_ingested;
} TableCounters;

struct HttpMetrics {
    _Atomic uint64_t count[MAX_ROUTES + 1][N_STATUS];
    _Atomic uint64_t hist[MAX_ROUTES + 1][N_BUCKETS + 1]; /* per bucket, not cumulative */
    _Atomic uint64_t sum_ns[MAX_ROUTES + 1];
    pthread_mutex_t lock;      /* guards tables[] */
    TableCounters *tables;     /* owns */
    int n_tables, cap_tables;
};

int http_metrics_new(HttpServer *s)
{
    if (HTTP_N_ROUTES > MAX_ROUTES)
        return QR_EINTERNAL;
    HttpMetrics *m = qr_calloc(1, sizeof *m);
    if (!m)
        return QR_ENOMEM;
    pthread_mutex_init(&m->lock, NULL);
    s->metrics = m;
    return QR_OK;
}

void http_metrics_free(HttpServer *s)
{
    HttpMetrics *m = s->metrics;
    if (!m)
        return;
    pthread_mutex_destroy(&m->lock);
    qr_free(m->tables);
    qr_free(m);
    s->metrics = NULL;
}

void http_metrics_request(HttpServer *s, int route, int status, uint64_t ns)
{
    HttpMetrics *m = s->metrics;
    int ri = route >= 0 && route < MAX_ROUTES ? route : MAX_ROUTES;
    int si = N_STATUS - 1;
    for (int i = 0; i < N_STATUS - 1; i++)
        if (STATUSES[i] == status) {
            si = i;
            break;
        }
    double secs = (double)ns / 1e9;
    int bi = N_BUCKETS;
    for (int i = 0; i < N_BUCKETS; i++)
        if (secs <= BUCKETS[i]) {
            bi = i;
            break;
        }
    atomic_fetch_add_explicit(&m->count[ri][si], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->hist[ri][bi], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->sum_ns[ri], ns, memory_order_relaxed);
}

static TableCounters *counters_find(HttpMetrics *m, const char *table, bool create)
{
    for (int i = 0; i < m->n_tables; i++)
        if (!strcmp(m->tables[i].name, table))
            return &m->tables[i];
    if (!create || m->n_tables >= MAX_TABLES || !qr_name_valid(table))
        return NULL;
    if (m->n_tables == m->cap_tables) {
        int nc = m->cap_tables ? m->cap_tables * 2 : 16;
        TableCounters *nt = qr_realloc(m->tables, (size_t)nc * sizeof *nt);
        if (!nt)
            return NULL;
        m->tables = nt;
        m->cap_tables = nc;
    }
    TableCounters *c = &m->tables[m->n_tables++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", table);
    return c;
}

void http_metrics_table(HttpServer *s, const char *table, uint64_t searches, uint64_t search_ns,
                        uint64_t docs)
{
    if (!table)
        return;
    HttpMetrics *m = s->metrics;
    pthread_mutex_lock(&m->lock);
    TableCounters *c = counters_find(m, table, true);
    if (c) {
        c->searches += searches;
        c->search_ns += search_ns;
        c->docs_ingested += docs;
    }
    pthread_mutex_unlock(&m->lock);
}

void http_metrics_table_forget(HttpServer *s, const char *table)
{
    HttpMetrics *m = s->metrics;
    pthread_mutex_lock(&m->lock);
    TableCounters *c = counters_find(m, table, false);
    if (c)
        *c = m->tables[--m->n_tables];
    pthread_mutex_unlock(&m->lock);
}

static void counters_get(HttpServer *s, const char *table, TableCounters *out)
{
    HttpMetrics *m = s->metrics;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&m->lock);
    TableCounters *c = counters_find(m, table, false);
    if (c)
        *out = *c;
    pthread_mutex_unlock(&m->lock);
}

static double uptime_s(const HttpServer *s) { return (double)(qr_now_ns() - s->started_ns) / 1e9; }

/* GET /health: cheap, no table access. */
void http_health(HttpReq *r)
{
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_printf(&b, "{\"status\":\"ok\",\"version\":\"%s\",\"uptime_s\":%.3f}",
                  QUARRY_VERSION, uptime_s(r->srv));
    http_reply_json(r, 200, &b);
}

static const char *route_label(int ri)
{
    return ri < HTTP_N_ROUTES ? HTTP_ROUTES[ri].name : "unmatched";
}

typedef void (*TableFn)(HttpServer *s, const char *name, QrTable *t, void *arg);

/* Call fn for every table that opens (guarded against a concurrent drop). */
static void each_table(HttpServer *s, TableFn fn, void *arg)
{
    char **names = NULL;
    int n = 0;
    QrError e;
    qr_error_clear(&e);
    if (qr_table_list(s->db, &names, &n, &e) != QR_OK)
        return;
    for (int i = 0; i < n; i++) {
        if (http_table_enter(s, names[i], false) == QR_OK) {
            QrTable *t;
            qr_error_clear(&e);
            if (qr_table_get(s->db, names[i], &t, &e) == QR_OK)
                fn(s, names[i], t, arg);
            http_table_leave(s, names[i], false);
        }
        qr_free(names[i]);
    }
    qr_free(names);
}

typedef struct PromTables {
    QrBuf *b;
    int pass; /* which metric family is being written */
} PromTables;

static const struct {
    const char *name, *type, *help;
} TABLE_FAMILIES[] = {
    {"quarry_table_docs", "gauge", "Live documents."},
    {"quarry_table_docs_stored", "gauge", "Documents stored, deleted ones not yet merged away included."},
    {"quarry_table_segments", "gauge", "Segments."},
    {"quarry_table_disk_bytes", "gauge", "Bytes on disk."},
    {"quarry_table_wal_bytes", "gauge", "Write-ahead log bytes."},
    {"quarry_table_merges_total", "counter", "Merges finished since the table was opened."},
    {"quarry_table_merges_running", "gauge", "Merges running now."},
    {"quarry_table_commits_total", "counter", "Commits since the table was opened."},
    {"quarry_table_checkpoints_total", "counter", "Checkpoints since the table was opened."},
    {"quarry_table_searches_total", "counter", "Searches answered over HTTP."},
    {"quarry_table_search_seconds_total", "counter", "Time spent in those searches."},
    {"quarry_table_documents_ingested_total", "counter", "Documents written over HTTP."},
};
#define N_FAMILIES (int)(sizeof TABLE_FAMILIES / sizeof TABLE_FAMILIES[0])

static void prom_table(HttpServer *s, const char *name, QrTable *t, void *arg)
{
    PromTables *pt = arg;
    QrTableStats st;
    qr_table_stats(t, &st);
    TableCounters c;
    counters_get(s, name, &c);
    double v;
    switch (pt->pass) {
    case 0: v = (double)st.docs; break;
    case 1: v = (double)st.docs_total; break;
    case 2: v = (double)st.segments; break;
    case 3: v = (double)st.disk_bytes; break;
    case 4: v = (double)st.wal_bytes; break;
    case 5: v = (double)st.merges_done; break;
    case 6: v = (double)st.merges_running; break;
    case 7: v = (double)st.commits; break;
    case 8: v = (double)st.checkpoints; break;
    case 9: v = (double)c.searches; break;
    case 10: v = (double)c.search_ns / 1e9; break;
    default: v = (double)c.docs_ingested; break;
    }
    /* table names are [A-Za-z0-9_]: no label escaping needed */
    qr_buf_printf(pt->b, "%s{table=\"%s\"} %.17g\n", TABLE_FAMILIES[pt->pass].name, name, v);
}

/* GET /metrics */
void http_metrics_get(HttpReq *r)
{
    HttpServer *s = r->srv;
    HttpMetrics *m = s->metrics;
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_printf(&b, "# HELP quarry_http_requests_total HTTP requests by route and status.\n"
                      "# TYPE quarry_http_requests_total counter\n");
    for (int ri = 0; ri <= MAX_ROUTES; ri++) {
        if (ri >= HTTP_N_ROUTES && ri != MAX_ROUTES)
            continue;
        for (int si = 0; si < N_STATUS; si++) {
            uint64_t n = atomic_load_explicit(&m->count[ri][si], memory_order_relaxed);
            if (!n)
                continue;
            if (STATUSES[si])
                qr_buf_printf(&b, "quarry_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
                              route_label(ri), STATUSES[si], (unsigned long long)n);
            else
                qr_buf_printf(&b, "quarry_http_requests_total{route=\"%s\",status=\"other\"} "
                                  "%llu\n",
                              route_label(ri), (unsigned long long)n);
        }
    }
    qr_buf_printf(&b, "# HELP quarry_http_request_duration_seconds Time from the request line "
                      "to the end of the answer.\n"
                      "# TYPE quarry_http_request_duration_seconds histogram\n");
    for (int ri = 0; ri <= MAX_ROUTES; ri++) {
        if (ri >= HTTP_N_ROUTES && ri != MAX_ROUTES)
            continue;
        uint64_t cum = 0, h[N_BUCKETS + 1];
        for (int i = 0; i <= N_BUCKETS; i++)
            cum += h[i] = atomic_load_explicit(&m->hist[ri][i], memory_order_relaxed);
        if (!cum)
            continue;
        const char *lbl = route_label(ri);
        uint64_t acc = 0;
        for (int i = 0; i < N_BUCKETS; i++) {
            acc += h[i];
            qr_buf_printf(&b, "quarry_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} "
                              "%llu\n",
                          lbl, BUCKETS[i], (unsigned long long)acc);
        }
        qr_buf_printf(&b,
                      "quarry_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} "
                      "%llu\n"
                      "quarry_http_request_duration_seconds_sum{route=\"%s\"} %.9f\n"
                      "quarry_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
                      lbl, (unsigned long long)cum, lbl,
                      (double)atomic_load(&m->sum_ns[ri]) / 1e9, lbl, (unsigned long long)cum);
    }
    uint64_t refused, evicted, timed_out;
    http_conns_counts(s, &refused, &evicted, &timed_out);
    qr_buf_printf(&b,
                  "# HELP quarry_http_connections Open HTTP connections.\n"
                  "# TYPE quarry_http_connections gauge\nquarry_http_connections %d\n"
                  "# HELP quarry_http_connections_closed_total Connections refused or closed "
                  "by the server's connection limits and deadlines.\n"
                  "# TYPE quarry_http_connections_closed_total counter\n"
                  "quarry_http_connections_closed_total{reason=\"per_client_limit\"} %llu\n"
                  "quarry_http_connections_closed_total{reason=\"evicted\"} %llu\n"
                  "quarry_http_connections_closed_total{reason=\"deadline\"} %llu\n"
                  "# HELP quarry_http_requests_in_flight Requests being answered.\n"
                  "# TYPE quarry_http_requests_in_flight gauge\n"
                  "quarry_http_requests_in_flight %d\n"
                  "# HELP quarry_uploads_running JSONL uploads streaming now.\n"
                  "# TYPE quarry_uploads_running gauge\nquarry_uploads_running %d\n"
                  "# HELP quarry_uptime_seconds Seconds since the server started.\n"
                  "# TYPE quarry_uptime_seconds gauge\nquarry_uptime_seconds %.3f\n"
                  "# HELP quarry_build_info Build version.\n# TYPE quarry_build_info gauge\n"
                  "quarry_build_info{version=\"%s\"} 1\n",
                  atomic_load(&s->connections), (unsigned long long)refused,
                  (unsigned long long)evicted, (unsigned long long)timed_out,
                  atomic_load(&s->inflight), atomic_load(&s->ingests), uptime_s(s),
                  QUARRY_VERSION);
    PromTables pt = {&b, 0};
    for (pt.pass = 0; pt.pass < N_FAMILIES; pt.pass++) {
        qr_buf_printf(&b, "# HELP %s %s\n# TYPE %s %s\n", TABLE_FAMILIES[pt.pass].name,
                      TABLE_FAMILIES[pt.pass].help, TABLE_FAMILIES[pt.pass].name,
                      TABLE_FAMILIES[pt.pass].type);
        each_table(s, prom_table, &pt);
    }
    http_reply(r, 200, "text/plain; version=0.0.4; charset=utf-8", &b);
}

typedef struct StatsTables {
    QrBuf *b;
    int n;
} StatsTables;

static void stats_table(HttpServer *s, const char *name, QrTable *t, void *arg)
{
    StatsTables *st = arg;
    QrTableStats ts;
    qr_table_stats(t, &ts);
    TableCounters c;
    counters_get(s, name, &c);
    if (st->n++)
        qr_buf_putc(st->b, ',');
    qr_buf_putc(st->b, '{');
    jw_key(st->b, "name");
    jw_cstr(st->b, name);
    qr_buf_putc(st->b, ',');
    http_stats_fields(st->b, &ts);
    qr_buf_printf(st->b, ",\"searches\":%llu,\"search_ms_total\":%.3f,\"ingested\":%llu}",
                  (unsigned long long)c.searches, (double)c.search_ns / 1e6,
                  (unsigned long long)c.docs_ingested);
}

/* GET /stats: one JSON snapshot for the admin page (rates are computed by
 * the page from two snapshots). */
void http_stats_get(HttpReq *r)
{
    HttpServer *s = r->srv;
    HttpMetrics *m = s->metrics;
    uint64_t reqs = 0, errs = 0;
    for (int ri = 0; ri <= MAX_ROUTES; ri++)
        for (int si = 0; si < N_STATUS; si++) {
            uint64_t n = atomic_load_explicit(&m->count[ri][si], memory_order_relaxed);
            reqs += n;
            if (STATUSES[si] >= 500 || STATUSES[si] == 0)
                errs += n;
        }
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_printf(&b,
                  "{\"version\":\"%s\",\"uptime_s\":%.3f,\"started_at_ms\":%lld,"
                  "\"connections\":%d,\"in_flight\":%d,\"uploads\":%d,\"requests\":%llu,"
                  "\"server_errors\":%llu,\"threads\":%d,\"address\":",
                  QUARRY_VERSION, uptime_s(s), (long long)(s->started_wall_us / 1000),
                  atomic_load(&s->connections), atomic_load(&s->inflight),
                  atomic_load(&s->ingests), (unsigned long long)reqs, (unsigned long long)errs,
                  atomic_load(&s->connections)); /* a thread per connection */
    jw_cstr(&b, s->addr);
    qr_buf_printf(&b, ",\"limits\":{\"max_body_bytes\":%llu,\"max_ingest_bytes\":%llu,"
                      "\"query_timeout_ms\":%llu,\"max_result_window\":%d,"
                      "\"max_connections\":%d},\"tables\":[",
                  (unsigned long long)s->cfg.max_body_bytes,
                  (unsigned long long)s->cfg.max_ingest_bytes,
                  (unsigned long long)s->cfg.query_timeout_ms, s->cfg.max_result_window,
                  s->cfg.max_connections);
    StatsTables st = {&b, 0};
    each_table(s, stats_table, &st);
    qr_buf_append(&b, "]}", 2);
    http_reply_json(r, 200, &b);
}
