/*
 * http_history.c — the query history behind the admin page's Queries tab:
 * a bounded ring of recent searches and SQL statements, and per query
 * shape a count, errors, rows, the latencies of its last SAMPLES runs for
 * p50/p99, and the plan it used with when that plan last changed (so an
 * operator sees a regression and why).  GET /stats/queries reads both.
 *
 * Shapes: a search is grouped by table, the canonical form of its query
 * (qr_query_canonical: the parsed tree printed back), fields, operator,
 * filter and sort; an SQL statement by libpg_query's fingerprint, shown as
 * its normalized text (constants as $n, qr_sql_normalize).
 *
 * Layer: server/.  Calls query/quarry.h and the base kit.
 *
 * Memory is fixed at creation: `size` recent entries and MAX_SHAPES
 * shapes; a new shape evicts the one seen least recently.
 */
#include "server/http_int.h"
#include "store/mem.h"
#include "store/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define Q_MAX 400      /* bytes of query text kept */
#define F_MAX 120      /* bytes of the field list, filter or sort kept */
#define PLAN_MAX 96    /* bytes of the plan summary */
#define MAX_SHAPES 256
#define SAMPLES 128

typedef enum { QK_SEARCH, QK_SQL } QueryKind;

typedef struct Recent {
    int64_t at_ms;             /* wall clock */
    QueryKind kind;
    char table[QR_NAME_MAX + 1];
    char q[Q_MAX + 1];
    char fields[F_MAX + 1];
    char filter[F_MAX + 1];
    bool default_and;
    double took_ms;
    uint64_t total, rows;
    int status;
    char plan[PLAN_MAX + 1];
    char via[8];               /* "http" or "pg" (SQL); "" for searches */
} Recent;

typedef struct Shape {
    uint64_t hash;
    QueryKind kind;
    char table[QR_NAME_MAX + 1];
    char norm[Q_MAX + 1];      /* canonical / normalized text */
    char last_q[Q_MAX + 1];    /* the last run's text and filter as sent (to rerun it) */
    char last_filter[F_MAX + 1];
    char fields[F_MAX + 1];
    char filter[F_MAX + 1];
    char sort[F_MAX + 1];
    bool default_and;
    uint64_t count, errors;
    uint64_t rows_sum, last_rows;
    char plan[PLAN_MAX + 1];       /* the plan of the last successful run */
    char prev_plan[PLAN_MAX + 1];  /* the plan before it changed ("" never) */
    int64_t plan_since_ms;         /* when `plan` was first seen in a row */
    uint64_t plan_changes;
    double sum_ms, max_ms;
    float samples[SAMPLES];    /* ring of the last latencies */
    int n_samples, next_sample;
    uint64_t last_total;
    int64_t last_ms;
} Shape;

struct HttpHistory {
    pthread_mutex_t lock;      /* guards everything below */
    Recent *ring;              /* owns `size` entries */
    int size, next, n;
    Shape *shapes;             /* owns MAX_SHAPES entries */
    int n_shapes;
};

HttpHistory *http_history_new(int size)
{
    if (size < 1)
        size = 1;
    HttpHistory *h = qr_calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->ring = qr_calloc((size_t)size, sizeof *h->ring);
    h->shapes = qr_calloc(MAX_SHAPES, sizeof *h->shapes);
    if (!h->ring || !h->shapes) {
        qr_free(h->ring);
        qr_free(h->shapes);
        qr_free(h);
        return NULL;
    }
    h->size = size;
    pthread_mutex_init(&h->lock, NULL);
    return h;
}

void http_history_free(HttpHistory *h)
{
    if (!h)
        return;
    pthread_mutex_destroy(&h->lock);
    qr_free(h->ring);
    qr_free(h->shapes);
    qr_free(h);
}

/* Lowercase ASCII, whitespace runs collapsed to one space, trimmed. */
static void normalize(const char *q, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    bool space = false;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        char c = q[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            space = o > 0;
            continue;
        }
        if (space && o + 2 < cap)
            out[o++] = ' ';
        space = false;
        out[o++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    /* do not end inside a UTF-8 sequence */
    while (o > 0 && ((unsigned char)out[o - 1] & 0xC0) == 0x80 && o == cap - 1)
        o--;
    out[o] = 0;
}

static uint64_t fnv(const char *s, uint64_t h)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Copy s (may be NULL) into out[cap], cut at a UTF-8 boundary. */
static void put(char *out, size_t cap, const char *s, size_t n)
{
    if (!s)
        n = 0;
    if (n > cap - 1) {
        n = cap - 1;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    }
    if (n)
        memcpy(out, s, n);
    out[n] = 0;
}

/* The plan of a search in a few words: the engine's strategy, and how the
 * filter read its columns (segments by access path). */
static void search_plan(const QrSearchStats *st, char *out, size_t cap)
{
    if (!st || !st->strategy) {
        out[0] = 0;
        return;
    }
    int n = snprintf(out, cap, "%s", st->strategy);
    if (st->filter_segs_scan + st->filter_segs_check + st->filter_segs_btree && n > 0 &&
        (size_t)n < cap) {
        n += snprintf(out + n, cap - (size_t)n, "; filter");
        if (st->filter_segs_btree && (size_t)n < cap)
            n += snprintf(out + n, cap - (size_t)n, " btree:%u", st->filter_segs_btree);
        if (st->filter_segs_scan && (size_t)n < cap)
            n += snprintf(out + n, cap - (size_t)n, " scan:%u", st->filter_segs_scan);
        if (st->filter_segs_check && (size_t)n < cap)
            snprintf(out + n, cap - (size_t)n, " check:%u", st->filter_segs_check);
    }
}

/* One run to record (both kinds); text fields already cut to size. */
typedef struct Run {
    QueryKind kind;
    uint64_t hash;
    const char *table, *raw, *norm, *fields, *filter, *sort, *plan;
    const char *raw_filter;   /* the filter as sent (recent runs show it) */
    const char *via;          /* SQL: the port it came by */
    size_t raw_len;
    bool default_and;
    double took_ms;
    uint64_t total, rows;
    int status;
} Run;

static void record(HttpHistory *h, const Run *u)
{
    int64_t now = qr_wall_us() / 1000;
    pthread_mutex_lock(&h->lock);
    Recent *r = &h->ring[h->next];
    h->next = (h->next + 1) % h->size;
    if (h->n < h->size)
        h->n++;
    r->at_ms = now;
    r->kind = u->kind;
    put(r->via, sizeof r->via, u->via ? u->via : "", u->via ? strlen(u->via) : 0);
    put(r->table, sizeof r->table, u->table, strlen(u->table));
    put(r->q, sizeof r->q, u->raw, u->raw_len);
    put(r->fields, sizeof r->fields, u->fields, strlen(u->fields));
    put(r->filter, sizeof r->filter, u->raw_filter, strlen(u->raw_filter));
    put(r->plan, sizeof r->plan, u->plan, strlen(u->plan));
    r->default_and = u->default_and;
    r->took_ms = u->took_ms;
    r->total = u->total;
    r->rows = u->rows;
    r->status = u->status;

    Shape *s = NULL;
    for (int i = 0; i < h->n_shapes; i++)
        if (h->shapes[i].hash == u->hash && h->shapes[i].kind == u->kind &&
            !strcmp(h->shapes[i].table, u->table) &&
            (u->kind == QK_SQL ||
             (!strncmp(h->shapes[i].norm, u->norm, Q_MAX) &&
              !strncmp(h->shapes[i].fields, u->fields, F_MAX) &&
              /* filters: by fingerprint, in the hash (spacing may differ) */
              !strncmp(h->shapes[i].sort, u->sort, F_MAX) &&
              h->shapes[i].default_and == u->default_and))) {
            s = &h->shapes[i];
            break;
        }
    if (!s) {
        if (h->n_shapes < MAX_SHAPES) {
            s = &h->shapes[h->n_shapes++];
        } else {
            s = &h->shapes[0];
            for (int i = 1; i < h->n_shapes; i++)
                if (h->shapes[i].last_ms < s->last_ms)
                    s = &h->shapes[i];
        }
        memset(s, 0, sizeof *s);
        s->hash = u->hash;
        s->kind = u->kind;
        put(s->table, sizeof s->table, u->table, strlen(u->table));
        put(s->norm, sizeof s->norm, u->norm, strlen(u->norm));
        put(s->fields, sizeof s->fields, u->fields, strlen(u->fields));
        put(s->filter, sizeof s->filter, u->filter, strlen(u->filter));
        put(s->sort, sizeof s->sort, u->sort, strlen(u->sort));
        s->default_and = u->default_and;
    }
    put(s->last_q, sizeof s->last_q, u->raw, u->raw_len);
    put(s->last_filter, sizeof s->last_filter, u->raw_filter, strlen(u->raw_filter));
    s->count++;
    if (u->status >= 400)
        s->errors++;
    s->sum_ms += u->took_ms;
    if (u->took_ms > s->max_ms)
        s->max_ms = u->took_ms;
    s->samples[s->next_sample] = (float)u->took_ms;
    s->next_sample = (s->next_sample + 1) % SAMPLES;
    if (s->n_samples < SAMPLES)
        s->n_samples++;
    if (u->status < 400) {
        s->last_total = u->total;
        s->last_rows = u->rows;
        s->rows_sum += u->rows;
        if (u->plan[0] && strncmp(s->plan, u->plan, PLAN_MAX)) {
            if (s->plan[0]) {
                memcpy(s->prev_plan, s->plan, sizeof s->prev_plan);
                s->plan_changes++;
            }
            put(s->plan, sizeof s->plan, u->plan, strlen(u->plan));
            s->plan_since_ms = now;
        }
    }
    s->last_ms = now;
    pthread_mutex_unlock(&h->lock);
}

/* A filter's shape: its SQL WHERE text with constants as $n (so n > 5 and
 * n>7 are one shape), keyed by libpg_query's fingerprint; the squeezed
 * text when it does not parse as SQL. */
static void filter_shape(const char *f, char *out, size_t cap, uint64_t *fp)
{
    static const char PRE[] = "SELECT WHERE ";
    out[0] = 0;
    *fp = 0;
    if (!f || !*f)
        return;
    QrBuf in, nb;
    qr_buf_init(&in);
    qr_buf_init(&nb);
    qr_buf_append(&in, PRE, sizeof PRE - 1);
    qr_buf_append(&in, f, strlen(f));
    QrError e;
    qr_error_clear(&e);
    if (qr_buf_ok(&in) && qr_sql_normalize((const char *)in.data, in.len, &nb, fp, &e) == QR_OK &&
        nb.len >= sizeof PRE - 1 && !memcmp(nb.data, PRE, sizeof PRE - 1)) {
        put(out, cap, (const char *)nb.data + sizeof PRE - 1, nb.len - (sizeof PRE - 1));
    } else {
        *fp = 0;
        normalize(f, strlen(f), out, cap);
    }
    qr_buf_free(&in);
    qr_buf_free(&nb);
}

void http_history_add(HttpHistory *h, const HttpQueryRec *rec)
{
    char norm[Q_MAX + 1];
    /* the canonical form groups spellings of one query; text that does not
     * parse (an error answer) is grouped by its squeezed text */
    QrBuf cb;
    qr_buf_init(&cb);
    QrError e;
    qr_error_clear(&e);
    if (rec->q_len && qr_query_canonical(rec->q, rec->q_len, rec->default_and, &cb, &e) == QR_OK &&
        qr_buf_ok(&cb))
        put(norm, sizeof norm, (const char *)cb.data, cb.len);
    else
        normalize(rec->q, rec->q_len, norm, sizeof norm);
    qr_buf_free(&cb);
    /* terms are matched case-folded by every analyzer: fold ASCII case */
    for (char *c = norm; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c + 32);
    char filter[F_MAX + 1], sort[F_MAX + 1], plan[PLAN_MAX + 1];
    uint64_t filter_fp = 0;
    filter_shape(rec->filter, filter, sizeof filter, &filter_fp);
    put(sort, sizeof sort, rec->sort, rec->sort ? strlen(rec->sort) : 0);
    search_plan(rec->stats, plan, sizeof plan);
    const char *fields = rec->fields ? rec->fields : "";
    uint64_t hash = fnv(norm, fnv(fields, fnv(rec->table, 14695981039346656037ull)));
    hash = (filter_fp ? filter_fp * 31 + hash : fnv(filter, hash));
    hash = fnv(sort, hash) ^ rec->default_and;
    Run u = {.kind = QK_SEARCH, .hash = hash, .table = rec->table, .raw = rec->q,
             .raw_len = rec->q_len, .norm = norm, .fields = fields, .filter = filter,
             .raw_filter = rec->filter ? rec->filter : "",
             .sort = sort, .plan = plan, .default_and = rec->default_and,
             .took_ms = rec->took_ms, .total = rec->total, .rows = rec->rows,
             .status = rec->status};
    record(h, &u);
}

void http_history_sql(HttpHistory *h, const char *via, const char *sql, size_t len, uint64_t rows,
                      double took_ms, int status, const char *plan)
{
    QrBuf nb;
    qr_buf_init(&nb);
    QrError e;
    qr_error_clear(&e);
    uint64_t fp = 0;
    char norm[Q_MAX + 1];
    if (qr_sql_normalize(sql, len, &nb, &fp, &e) == QR_OK && qr_buf_ok(&nb))
        put(norm, sizeof norm, (const char *)nb.data, nb.len);
    else
        normalize(sql, len, norm, sizeof norm);
    qr_buf_free(&nb);
    if (!fp)
        fp = fnv(norm, 14695981039346656037ull);
    Run u = {.kind = QK_SQL, .hash = fp, .table = "", .raw = sql, .raw_len = len,
             .norm = norm, .fields = "", .filter = "", .raw_filter = "", .sort = "", .plan = plan ? plan : "",
             .took_ms = took_ms, .total = rows, .rows = rows, .status = status, .via = via};
    record(h, &u);
}

void http_history_forget(HttpHistory *h, const char *table)
{
    pthread_mutex_lock(&h->lock);
    for (int i = 0; i < h->n_shapes;) {
        if (!strcmp(h->shapes[i].table, table))
            h->shapes[i] = h->shapes[--h->n_shapes];
        else
            i++;
    }
    pthread_mutex_unlock(&h->lock);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef struct ShapeOut {
    const Shape *s;
    double p50, p99;
} ShapeOut;

static int cmp_p99_desc(const void *a, const void *b)
{
    double x = ((const ShapeOut *)a)->p99, y = ((const ShapeOut *)b)->p99;
    return (x < y) - (x > y);
}

/* Nearest-rank percentile of sorted v[0..n). */
static double pct(const float *v, int n, double p)
{
    if (n == 0)
        return 0;
    int k = (int)(p * n + 0.999999);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return v[k - 1];
}

/* GET /stats/queries */
void http_server_record_sql(HttpServer *s, const char *via, const char *sql, size_t len,
                            uint64_t rows, double took_ms, int code, const char *plan)
{
    if (s && s->history)
        http_history_sql(s->history, via, sql, len, rows, took_ms,
                         code == QR_OK ? 200 : http_status_of(code), plan);
}

void http_queries_get(HttpReq *r)
{
    HttpHistory *h = r->srv->history;
    QrBuf b;
    qr_buf_init(&b);
    ShapeOut *outs = qr_calloc(MAX_SHAPES, sizeof *outs);
    if (!outs) {
        http_error(r, QR_ENOMEM, "out of memory");
        return;
    }
    pthread_mutex_lock(&h->lock);
    qr_buf_append(&b, "{\"recent\":[", 11);
    for (int i = 0; i < h->n; i++) {
        const Recent *e = &h->ring[(h->next - 1 - i + 2 * h->size) % h->size];
        if (i)
            qr_buf_putc(&b, ',');
        qr_buf_printf(&b, "{\"at_ms\":%lld,\"kind\":\"%s\",\"table\":", (long long)e->at_ms,
                      e->kind == QK_SQL ? "sql" : "search");
        jw_cstr(&b, e->table);
        qr_buf_append(&b, ",\"q\":", 5);
        jw_cstr(&b, e->q);
        qr_buf_append(&b, ",\"fields\":", 10);
        jw_cstr(&b, e->fields);
        qr_buf_append(&b, ",\"filter\":", 10);
        jw_cstr(&b, e->filter);
        qr_buf_append(&b, ",\"plan\":", 8);
        jw_cstr(&b, e->plan);
        if (e->via[0])
            qr_buf_printf(&b, ",\"via\":\"%s\"", e->via);
        qr_buf_printf(&b, ",\"default_operator\":\"%s\",\"took_ms\":%.3f,\"total\":%llu,"
                          "\"rows\":%llu,\"status\":%d}",
                      e->default_and ? "and" : "or", e->took_ms, (unsigned long long)e->total,
                      (unsigned long long)e->rows, e->status);
    }
    qr_buf_append(&b, "],\"shapes\":[", 12);
    for (int i = 0; i < h->n_shapes; i++) {
        Shape *s = &h->shapes[i];
        float sorted[SAMPLES];
        memcpy(sorted, s->samples, (size_t)s->n_samples * sizeof *sorted);
        qsort(sorted, (size_t)s->n_samples, sizeof *sorted, cmp_float);
        outs[i].s = s;
        outs[i].p50 = pct(sorted, s->n_samples, 0.50);
        outs[i].p99 = pct(sorted, s->n_samples, 0.99);
    }
    qsort(outs, (size_t)h->n_shapes, sizeof *outs, cmp_p99_desc);
    for (int i = 0; i < h->n_shapes; i++) {
        const Shape *s = outs[i].s;
        if (i)
            qr_buf_putc(&b, ',');
        qr_buf_printf(&b, "{\"kind\":\"%s\",\"table\":", s->kind == QK_SQL ? "sql" : "search");
        jw_cstr(&b, s->table);
        qr_buf_append(&b, ",\"query\":", 9);
        jw_cstr(&b, s->norm);
        qr_buf_append(&b, ",\"fields\":", 10);
        jw_cstr(&b, s->fields);
        qr_buf_append(&b, ",\"filter\":", 10);
        jw_cstr(&b, s->filter);
        qr_buf_append(&b, ",\"sort\":", 8);
        jw_cstr(&b, s->sort);
        qr_buf_append(&b, ",\"plan\":", 8);
        jw_cstr(&b, s->plan);
        qr_buf_append(&b, ",\"last_query\":", 14);
        jw_cstr(&b, s->last_q);
        qr_buf_append(&b, ",\"last_filter\":", 15);
        jw_cstr(&b, s->last_filter);
        qr_buf_append(&b, ",\"previous_plan\":", 17);
        jw_cstr(&b, s->prev_plan);
        qr_buf_printf(&b, ",\"plan_since_ms\":%lld,\"plan_changes\":%llu,\"last_rows\":%llu,"
                          "\"avg_rows\":%.1f",
                      (long long)s->plan_since_ms, (unsigned long long)s->plan_changes,
                      (unsigned long long)s->last_rows,
                      s->count > s->errors ? (double)s->rows_sum / (double)(s->count - s->errors)
                                           : 0.0);
        qr_buf_printf(&b,
                      ",\"default_operator\":\"%s\",\"count\":%llu,\"errors\":%llu,"
                      "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,\"avg_ms\":%.3f,"
                      "\"last_total\":%llu,\"last_at_ms\":%lld}",
                      s->default_and ? "and" : "or", (unsigned long long)s->count,
                      (unsigned long long)s->errors, outs[i].p50, outs[i].p99, s->max_ms,
                      s->count ? s->sum_ms / (double)s->count : 0.0,
                      (unsigned long long)s->last_total, (long long)s->last_ms);
    }
    pthread_mutex_unlock(&h->lock);
    qr_buf_append(&b, "]}", 2);
    qr_free(outs);
    http_reply_json(r, 200, &b);
}
