/*
 * http_history.c — the query history behind the admin page's Queries tab:
 * a bounded ring of recent searches, and per query shape (table, normalized
 * text, fields, operator) a count, errors and the latencies of its last
 * SAMPLES runs for p50/p99.  GET /stats/queries reads both.
 *
 * Layer: server/.  Calls the base kit.
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

#define Q_MAX 240      /* bytes of query text kept */
#define F_MAX 120      /* bytes of the field list kept */
#define MAX_SHAPES 256
#define SAMPLES 128

typedef struct Recent {
    int64_t at_ms;             /* wall clock */
    char table[QR_NAME_MAX + 1];
    char q[Q_MAX + 1];
    char fields[F_MAX + 1];
    bool default_and;
    double took_ms;
    uint64_t total;
    int status;
} Recent;

typedef struct Shape {
    uint64_t hash;
    char table[QR_NAME_MAX + 1];
    char norm[Q_MAX + 1];      /* normalized text */
    char fields[F_MAX + 1];
    bool default_and;
    uint64_t count, errors;
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

void http_history_add(HttpHistory *h, const HttpQueryRec *rec)
{
    char norm[Q_MAX + 1];
    normalize(rec->q, rec->q_len, norm, sizeof norm);
    const char *fields = rec->fields ? rec->fields : "";
    uint64_t hash = fnv(norm, fnv(fields, fnv(rec->table, 14695981039346656037ull)));
    hash ^= rec->default_and;
    int64_t now = qr_wall_us() / 1000;
    pthread_mutex_lock(&h->lock);
    Recent *r = &h->ring[h->next];
    h->next = (h->next + 1) % h->size;
    if (h->n < h->size)
        h->n++;
    r->at_ms = now;
    snprintf(r->table, sizeof r->table, "%s", rec->table);
    size_t ql = rec->q_len < Q_MAX ? rec->q_len : Q_MAX;
    memcpy(r->q, rec->q, ql);
    r->q[ql] = 0;
    snprintf(r->fields, sizeof r->fields, "%s", fields);
    r->default_and = rec->default_and;
    r->took_ms = rec->took_ms;
    r->total = rec->total;
    r->status = rec->status;

    Shape *s = NULL;
    for (int i = 0; i < h->n_shapes; i++)
        if (h->shapes[i].hash == hash && !strcmp(h->shapes[i].norm, norm) &&
            !strcmp(h->shapes[i].table, rec->table) && !strcmp(h->shapes[i].fields, fields) &&
            h->shapes[i].default_and == rec->default_and) {
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
        s->hash = hash;
        snprintf(s->table, sizeof s->table, "%s", rec->table);
        snprintf(s->norm, sizeof s->norm, "%s", norm);
        snprintf(s->fields, sizeof s->fields, "%s", fields);
        s->default_and = rec->default_and;
    }
    s->count++;
    if (rec->status >= 400)
        s->errors++;
    s->sum_ms += rec->took_ms;
    if (rec->took_ms > s->max_ms)
        s->max_ms = rec->took_ms;
    s->samples[s->next_sample] = (float)rec->took_ms;
    s->next_sample = (s->next_sample + 1) % SAMPLES;
    if (s->n_samples < SAMPLES)
        s->n_samples++;
    s->last_total = rec->total;
    s->last_ms = now;
    pthread_mutex_unlock(&h->lock);
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
        qr_buf_printf(&b, "{\"at_ms\":%lld,\"table\":", (long long)e->at_ms);
        jw_cstr(&b, e->table);
        qr_buf_append(&b, ",\"q\":", 5);
        jw_cstr(&b, e->q);
        qr_buf_append(&b, ",\"fields\":", 10);
        jw_cstr(&b, e->fields);
        qr_buf_printf(&b, ",\"default_operator\":\"%s\",\"took_ms\":%.3f,\"total\":%llu,"
                          "\"status\":%d}",
                      e->default_and ? "and" : "or", e->took_ms, (unsigned long long)e->total,
                      e->status);
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
        qr_buf_append(&b, "{\"table\":", 9);
        jw_cstr(&b, s->table);
        qr_buf_append(&b, ",\"query\":", 9);
        jw_cstr(&b, s->norm);
        qr_buf_append(&b, ",\"fields\":", 10);
        jw_cstr(&b, s->fields);
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
