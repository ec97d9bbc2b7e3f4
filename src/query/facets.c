/*
 * facets.c — facets of a search (facets.h): terms, histogram, stats,
 * percentiles, cardinality and range summaries of every match.
 *
 * Layer: query/.  Calls colwalk.h (grouping by dictionary codes, column
 * blocks), index/segment.h, the base kit, cJSON (keyword keys as JSON).
 *
 * Per segment, keyword terms and cardinality group the matches by the
 * column's dictionary codes (colwalk_group, as SQL's GROUP BY over a
 * keyword), so each distinct value costs one lookup however many rows hold
 * it; a multi-valued keyword's lists are parsed once per distinct list and
 * each element counted once per document.  Stats aggregate column blocks
 * the same way (one group).  Numeric terms, histograms, percentiles,
 * numeric cardinality and ranges read the matching rows' values a block at
 * a time (colwalk_blocks, one pass for all of them).  Keys from several
 * segments meet in a sorted merge; percentiles sort the values
 * (percentile_cont, as PostgreSQL's).
 */
#include "query/facets.h"
#include "query/colwalk.h"
#include "query/filter.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index/segment.h"
#include "store/mem.h"

typedef struct FacetKey {
    double num;       /* numeric value or bucket start */
    const char *str;  /* keyword value: borrows the segment or the run's arena */
    size_t len;
    uint64_t count;
} FacetKey;

/* Counts per numeric value (open addressing on the value's bits): what
 * histograms, numeric terms and numeric cardinality add to, row by row. */
typedef struct NumSlot {
    uint64_t bits;            /* the double's bits (-0 as 0) */
    uint64_t count;           /* 0: empty slot */
} NumSlot;

typedef struct NumMap {
    NumSlot *slots;           /* owns */
    size_t n, cap;            /* cap a power of two */
} NumMap;

typedef struct FacetAcc {
    const QrFacetReq *req;
    int field;
    QrColType ct;
    bool multi;               /* a multi-valued keyword */
    bool by_code;             /* keyword terms / cardinality: grouped by codes */
    FacetKey *v;              /* owns (qr_malloc) */
    size_t n, cap, merged;    /* v[0..merged) is sorted and distinct */
    double *vals;             /* owns: PERCENTILES */
    size_t n_vals, cap_vals;
    uint64_t *in_range;       /* owns: RANGE counts per range */
    NumMap map;               /* numeric TERMS, HISTOGRAM, CARDINALITY */
    ColWalkAgg agg;           /* STATS, merged over segments */
    uint64_t missing;
} FacetAcc;

struct FacetRun {
    const QrSchema *schema;   /* borrows */
    QrArena *arena;           /* borrows: copies of list elements, results */
    int n;
    FacetAcc *acc;            /* owns */
    char *elem;               /* owns: one list element */
    size_t elem_cap;
};

static bool numeric(QrColType ct)
{
    return ct == QR_COL_INT64 || ct == QR_COL_FLOAT64 || ct == QR_COL_TIMESTAMP;
}

static const char *kind_name(QrFacetKind k)
{
    static const char *N[] = {"terms", "histogram", "stats", "percentiles", "cardinality",
                              "range"};
    return (unsigned)k < sizeof N / sizeof N[0] ? N[k] : "?";
}

int facets_check(const QrSchema *schema, const QrFacetReq *reqs, int n, QrError *err)
{
    for (int f = 0; f < n; f++) {
        const QrFacetReq *fr = &reqs[f];
        int field = fr->field ? schema_field_index(schema, fr->field) : -1;
        int ct = qr_filter_field_coltype(schema, field);
        if (field < 0)
            return qr_error_set(err, QR_ENOTFOUND, "facet column \"%s\" does not exist",
                                fr->field ? fr->field : "");
        if (ct < 0)
            return qr_error_set(err, QR_ETYPE, "cannot facet on %s field \"%s\"",
                                schema->fields[field].type == QR_FT_NUMERIC ? "numeric"
                                                                            : "full-text",
                                fr->field);
        bool needs_num = fr->kind != QR_FACET_TERMS && fr->kind != QR_FACET_CARDINALITY;
        if (needs_num && !numeric((QrColType)ct))
            return qr_error_set(err, QR_ETYPE,
                                "%s facet needs a numeric or timestamp column, \"%s\" is %s",
                                kind_name(fr->kind), fr->field,
                                schema->fields[field].multi ? "a keyword list"
                                                            : col_type_name((QrColType)ct));
        if (fr->kind == QR_FACET_HISTOGRAM && !(fr->interval > 0 && isfinite(fr->interval)))
            return qr_error_set(err, QR_EINVAL, "histogram facet on \"%s\" needs an interval > 0",
                                fr->field);
        if (fr->size < 0 || fr->size > 10000)
            return qr_error_set(err, QR_EINVAL, "facet size must be between 0 and 10000");
        if (fr->kind == QR_FACET_PERCENTILES) {
            if (fr->n_percents < 1 || fr->n_percents > QR_FACET_MAX_PERCENTS)
                return qr_error_set(err, QR_EINVAL, "percentiles facet on \"%s\" needs 1 to %d "
                                                    "percents", fr->field, QR_FACET_MAX_PERCENTS);
            for (int i = 0; i < fr->n_percents; i++)
                if (!(fr->percents[i] >= 0 && fr->percents[i] <= 100))
                    return qr_error_set(err, QR_EINVAL, "percent %g of facet \"%s\" is not "
                                                        "between 0 and 100",
                                        fr->percents[i], fr->field);
        }
        if (fr->kind == QR_FACET_RANGE) {
            if (fr->n_ranges < 1 || fr->n_ranges > QR_FACET_MAX_RANGES)
                return qr_error_set(err, QR_EINVAL, "range facet on \"%s\" needs 1 to %d ranges",
                                    fr->field, QR_FACET_MAX_RANGES);
            for (int i = 0; i < fr->n_ranges; i++) {
                const QrFacetRange *r = &fr->ranges[i];
                if ((r->has_from && !isfinite(r->from)) || (r->has_to && !isfinite(r->to)) ||
                    (r->has_from && r->has_to && !(r->from < r->to)))
                    return qr_error_set(err, QR_EINVAL, "range %d of facet \"%s\" needs from < to",
                                        i + 1, fr->field);
            }
        }
    }
    return QR_OK;
}

int facets_new(const QrSchema *schema, const QrFacetReq *reqs, int n, QrArena *arena,
               FacetRun **out, QrError *err)
{
    *out = NULL;
    FacetRun *r = qr_calloc(1, sizeof *r);
    if (!r || !(r->acc = qr_calloc((size_t)n + 1, sizeof *r->acc))) {
        qr_free(r);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    r->schema = schema;
    r->arena = arena;
    r->n = n;
    for (int f = 0; f < n; f++) {
        FacetAcc *a = &r->acc[f];
        a->req = &reqs[f];
        a->field = schema_field_index(schema, reqs[f].field);
        a->ct = (QrColType)qr_filter_field_coltype(schema, a->field);
        a->multi = schema->fields[a->field].multi;
        a->by_code = a->ct == QR_COL_KEYWORD &&
                     (reqs[f].kind == QR_FACET_TERMS || reqs[f].kind == QR_FACET_CARDINALITY);
        if (reqs[f].kind == QR_FACET_RANGE &&
            !(a->in_range = qr_calloc((size_t)reqs[f].n_ranges, sizeof *a->in_range))) {
            facets_free(r);
            return qr_error_set(err, QR_ENOMEM, "out of memory");
        }
    }
    *out = r;
    return QR_OK;
}

void facets_free(FacetRun *r)
{
    if (!r)
        return;
    for (int f = 0; f < r->n; f++) {
        qr_free(r->acc[f].v);
        qr_free(r->acc[f].vals);
        qr_free(r->acc[f].in_range);
        qr_free(r->acc[f].map.slots);
    }
    qr_free(r->acc);
    qr_free(r->elem);
    qr_free(r);
}

/* ---- keys ---- */

static int cmp_bytes(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? (c < 0 ? -1 : 1) : (an < bn ? -1 : an > bn);
}

static int key_cmp(const void *x, const void *y)
{
    const FacetKey *a = x, *b = y;
    if (a->str || b->str)
        return cmp_bytes(a->str ? a->str : "", a->len, b->str ? b->str : "", b->len);
    return a->num < b->num ? -1 : a->num > b->num;
}

static int count_cmp(const void *x, const void *y)
{
    const FacetKey *a = x, *b = y;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return key_cmp(x, y);
}

/* Sort by key and sum the counts of equal keys. */
static void merge(FacetAcc *a)
{
    if (a->n > 1) {
        qsort(a->v, a->n, sizeof *a->v, key_cmp);
        size_t m = 0;
        for (size_t i = 1; i < a->n; i++) {
            if (key_cmp(&a->v[m], &a->v[i]) == 0)
                a->v[m].count += a->v[i].count;
            else
                a->v[++m] = a->v[i];
        }
        a->n = m + 1;
    }
    a->merged = a->n;
}

/* Double *cap (from `first`) and resize *p to it. */
static bool grow(void **p, size_t *cap, size_t elem, size_t first)
{
    size_t nc = *cap ? *cap * 2 : first;
    void *np = qr_realloc(*p, nc * elem);
    if (!np)
        return false;
    *p = np;
    *cap = nc;
    return true;
}

static bool push(FacetAcc *a, double num, const char *str, size_t len, uint64_t count)
{
    if (a->n == a->cap && a->n - a->merged > 65536)
        merge(a); /* keep memory bounded: merge as we go */
    if (a->n == a->cap && !grow((void **)&a->v, &a->cap, sizeof *a->v, 256))
        return false;
    a->v[a->n++] = (FacetKey){.num = num, .str = str, .len = len, .count = count};
    return true;
}

static uint64_t num_hash(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static bool num_add(NumMap *m, double x, uint64_t count)
{
    if (x == 0)
        x = 0; /* -0 and 0 are one value */
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    if (2 * (m->n + 1) > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 1024;
        NumSlot *ns = qr_calloc(nc, sizeof *ns);
        if (!ns)
            return false;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->slots[i].count)
                continue;
            size_t j = num_hash(m->slots[i].bits) & (nc - 1);
            while (ns[j].count)
                j = (j + 1) & (nc - 1);
            ns[j] = m->slots[i];
        }
        qr_free(m->slots);
        m->slots = ns;
        m->cap = nc;
    }
    size_t j = num_hash(bits) & (m->cap - 1);
    while (m->slots[j].count && m->slots[j].bits != bits)
        j = (j + 1) & (m->cap - 1);
    if (!m->slots[j].count) {
        m->slots[j].bits = bits;
        m->n++;
    }
    m->slots[j].count += count;
    return true;
}

/* The map's values as keys (then merged like any others). */
static bool num_flush(FacetAcc *a)
{
    for (size_t i = 0; i < a->map.cap; i++) {
        if (!a->map.slots[i].count)
            continue;
        double x;
        memcpy(&x, &a->map.slots[i].bits, sizeof x);
        if (!push(a, x, NULL, 0, a->map.slots[i].count))
            return false;
    }
    qr_free(a->map.slots);
    memset(&a->map, 0, sizeof a->map);
    return true;
}

/* ---- one segment ---- */

/* The elements of one list (array text) each once, with the list's count. */
static bool push_list(FacetRun *r, FacetAcc *a, const char *s, size_t n, uint64_t count)
{
    if (r->elem_cap < n + 1) {
        char *e = qr_realloc(r->elem, n + 1);
        if (!e)
            return false;
        r->elem = e;
        r->elem_cap = n + 1;
    }
    /* room for every element first, so no merge moves this list's keys */
    size_t need = a->n + n / 2 + 2;
    if (need > a->cap) {
        FacetKey *nv = qr_realloc(a->v, need * 2 * sizeof *nv);
        if (!nv)
            return false;
        a->v = nv;
        a->cap = need * 2;
    }
    size_t pos = 0, len, first = a->n;
    bool null, any = false;
    while (qr_array_next(s, n, &pos, r->elem, &len, &null) > 0) {
        if (null)
            continue;
        bool dup = false; /* each document counts once per element */
        for (size_t i = first; i < a->n && !dup; i++)
            dup = a->v[i].len == len && !memcmp(a->v[i].str, r->elem, len);
        if (dup)
            continue;
        char *c = qr_arena_strndup(r->arena, r->elem, len);
        if (!c || !push(a, 0, c, len, count))
            return false;
        any = true;
    }
    if (!any)
        a->missing += count; /* an empty list holds no value */
    return true;
}

static int by_codes(FacetRun *r, FacetAcc *a, const Segment *seg, const roaring_bitmap_t *bm,
                    QrError *err)
{
    ColWalkGroup g;
    int rc = colwalk_group(seg, bm, a->field, NULL, 0, &g, err);
    if (rc != QR_OK)
        return rc;
    bool ok = true;
    for (uint32_t c = 0; ok && c < g.n_codes; c++) {
        uint64_t cnt = (uint64_t)g.parts[c].rows;
        const char *s;
        size_t len;
        if (!cnt || !col_dict_get(g.key, c, &s, &len))
            continue;
        ok = a->multi ? push_list(r, a, s, len, cnt) : push(a, 0, s, len, cnt);
    }
    a->missing += (uint64_t)g.parts[g.n_codes].rows;
    colwalk_group_free(&g);
    return ok ? QR_OK : qr_error_set(err, QR_ENOMEM, "out of memory computing facets");
}

static int stats(FacetAcc *a, const Segment *seg, const roaring_bitmap_t *bm, QrError *err)
{
    ColWalkGroup g;
    ColWalkCol vc = {.field = a->field, .type = a->ct};
    int rc = colwalk_group(seg, bm, -1, &vc, 1, &g, err);
    if (rc != QR_OK)
        return rc;
    const ColWalkAgg *p = &g.parts[0];
    a->missing += (uint64_t)(p->rows - p->count);
    if (p->count) {
        ColWalkAgg *s = &a->agg;
        bool fl = a->ct == QR_COL_FLOAT64;
        if (s->count == 0 || (fl ? p->min_f < s->min_f : p->min_i < s->min_i)) {
            s->min_f = p->min_f;
            s->min_i = p->min_i;
        }
        if (s->count == 0 || (fl ? p->max_f > s->max_f : p->max_i > s->max_i)) {
            s->max_f = p->max_f;
            s->max_i = p->max_i;
        }
        int64_t t; /* on overflow sum_i stays the sum so far (not the wrapped one) */
        if (!s->sum_is_f && !p->sum_is_f && !p->sum_is_w &&
            !__builtin_add_overflow(s->sum_i, p->sum_i, &t)) {
            s->sum_i = t;
        } else {
            s->sum_f = (s->sum_is_f ? s->sum_f : (double)s->sum_i) +
                       (p->sum_is_f ? p->sum_f : p->sum_is_w ? (double)p->sum_w : (double)p->sum_i);
            s->sum_is_f = true;
        }
        s->count += p->count;
    }
    colwalk_group_free(&g);
    return QR_OK;
}

/* One value of a row-read facet. */
static bool row_value(FacetAcc *a, double x)
{
    const QrFacetReq *q = a->req;
    switch (q->kind) {
    case QR_FACET_HISTOGRAM: return num_add(&a->map, floor(x / q->interval) * q->interval, 1);
    case QR_FACET_TERMS:
    case QR_FACET_CARDINALITY: return num_add(&a->map, x, 1);
    case QR_FACET_PERCENTILES:
        if (a->n_vals == a->cap_vals &&
            !grow((void **)&a->vals, &a->cap_vals, sizeof *a->vals, 1024))
            return false;
        a->vals[a->n_vals++] = x;
        return true;
    case QR_FACET_RANGE:
        for (int i = 0; i < q->n_ranges; i++) {
            const QrFacetRange *rg = &q->ranges[i];
            if ((!rg->has_from || x >= rg->from) && (!rg->has_to || x < rg->to))
                a->in_range[i]++;
        }
        return true;
    case QR_FACET_STATS: return true;
    }
    return true;
}

/* Every facet that reads row values, in one pass over the blocks. */
static int by_rows(FacetRun *r, const Segment *seg, const roaring_bitmap_t *bm, QrError *err)
{
    ColWalkCol *cols = qr_calloc((size_t)r->n + 1, sizeof *cols);
    FacetAcc **who = qr_calloc((size_t)r->n + 1, sizeof *who);
    if (!cols || !who) {
        qr_free(cols);
        qr_free(who);
        return qr_error_set(err, QR_ENOMEM, "out of memory computing facets");
    }
    int nc = 0;
    for (int f = 0; f < r->n; f++) {
        FacetAcc *a = &r->acc[f];
        if (a->by_code || a->req->kind == QR_FACET_STATS)
            continue;
        cols[nc] = (ColWalkCol){.field = a->field, .type = a->ct};
        who[nc++] = a;
    }
    int rc = QR_OK;
    ColWalkBlocks w;
    if (nc && (rc = colwalk_blocks_open(&w, seg, bm, cols, nc, err)) == QR_OK) {
        bool ok = true;
        while (ok && colwalk_blocks_next(&w))
            for (int k = 0; ok && k < nc; k++)
                for (uint32_t j = 0; ok && j < w.n; j++) {
                    uint32_t row = w.rows[j];
                    if (colwalk_null(&cols[k], row))
                        who[k]->missing++;
                    else
                        ok = row_value(who[k], colwalk_num(&cols[k], row));
                }
        colwalk_blocks_close(&w);
        if (!ok)
            rc = qr_error_set(err, QR_ENOMEM, "out of memory computing facets");
    }
    qr_free(cols);
    qr_free(who);
    return rc;
}

int facets_add(FacetRun *r, const Segment *seg, const roaring_bitmap_t *bm, QrError *err)
{
    if (roaring_bitmap_is_empty(bm))
        return QR_OK;
    int rc = QR_OK;
    for (int f = 0; f < r->n && rc == QR_OK; f++) {
        FacetAcc *a = &r->acc[f];
        if (a->by_code)
            rc = by_codes(r, a, seg, bm, err);
        else if (a->req->kind == QR_FACET_STATS)
            rc = stats(a, seg, bm, err);
    }
    return rc == QR_OK ? by_rows(r, seg, bm, err) : rc;
}

/* ---- results ---- */

/* A value of column type ct as JSON (timestamps as text). */
static void num_json(QrBuf *b, QrColType ct, double x)
{
    if (!isfinite(x)) {
        qr_buf_append(b, "null", 4);
    } else if (ct == QR_COL_BOOL) {
        qr_buf_printf(b, "%s", x != 0 ? "true" : "false");
    } else if (ct == QR_COL_TIMESTAMP) {
        char ts[48];
        qr_format_timestamp((int64_t)llround(x), ts, sizeof ts);
        qr_buf_printf(b, "\"%s\"", ts);
    } else if (x == floor(x) && fabs(x) < 9e15) {
        qr_buf_printf(b, "%.0f", x);
    } else {
        qr_buf_double(b, x, false);
    }
}

static char *buf_dup(FacetRun *r, QrBuf *b)
{
    char *out = qr_buf_ok(b) ? qr_arena_strndup(r->arena, b->data ? (const char *)b->data : "",
                                                 b->len)
                             : NULL;
    qr_buf_free(b);
    return out;
}

static char *key_json(FacetRun *r, const FacetAcc *a, const FacetKey *k)
{
    QrBuf b;
    qr_buf_init(&b);
    if (k->str)
        qr_buf_json_str(&b, k->str, k->len);
    else
        num_json(&b, a->ct, k->num);
    return buf_dup(r, &b);
}

static int dbl_cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* percentile_cont(p) of sorted v[0..n): linear between the two nearest
 * order statistics, as PostgreSQL. */
static double pct_cont(const double *v, size_t n, double p)
{
    double pos = p * (double)(n - 1);
    size_t lo = (size_t)floor(pos), hi = (size_t)ceil(pos);
    return v[lo] + (v[hi] - v[lo]) * (pos - (double)lo);
}

static bool finish_one(FacetRun *r, FacetAcc *a, QrFacetRes *res)
{
    const QrFacetReq *q = a->req;
    res->kind = q->kind;
    res->missing = a->missing;
    if (!num_flush(a))
        return false;
    QrBuf b;
    switch (q->kind) {
    case QR_FACET_STATS: {
        const ColWalkAgg *s = &a->agg;
        bool fl = a->ct == QR_COL_FLOAT64;
        res->count = (uint64_t)s->count;
        res->min = fl ? s->min_f : (double)s->min_i;
        res->max = fl ? s->max_f : (double)s->max_i;
        res->sum = s->sum_is_f ? s->sum_f : (double)s->sum_i;
        res->avg = s->count ? res->sum / (double)s->count : 0;
        return true;
    }
    case QR_FACET_PERCENTILES:
        qsort(a->vals, a->n_vals, sizeof *a->vals, dbl_cmp);
        res->count = a->n_vals;
        qr_buf_init(&b);
        qr_buf_putc(&b, '{');
        for (int i = 0; i < q->n_percents; i++) {
            if (i)
                qr_buf_putc(&b, ',');
            qr_buf_putc(&b, '"');
            qr_buf_double(&b, q->percents[i], false);
            qr_buf_append(&b, "\":", 2);
            if (a->n_vals)
                num_json(&b, a->ct == QR_COL_TIMESTAMP ? QR_COL_TIMESTAMP : QR_COL_FLOAT64,
                         pct_cont(a->vals, a->n_vals, q->percents[i] / 100.0));
            else
                qr_buf_append(&b, "null", 4);
        }
        qr_buf_putc(&b, '}');
        return (res->values_json = buf_dup(r, &b)) != NULL;
    case QR_FACET_CARDINALITY:
        merge(a);
        res->count = a->n;
        return true;
    case QR_FACET_RANGE:
        res->n_buckets = q->n_ranges;
        if (!(res->buckets = qr_arena_calloc(r->arena, (size_t)q->n_ranges * sizeof *res->buckets)))
            return false;
        for (int i = 0; i < q->n_ranges; i++) {
            const QrFacetRange *rg = &q->ranges[i];
            QrFacetBucket *bk = &res->buckets[i];
            bk->count = a->in_range[i];
            if (rg->has_from) {
                qr_buf_init(&b);
                num_json(&b, a->ct, rg->from);
                if (!(bk->from_json = buf_dup(r, &b)))
                    return false;
            }
            if (rg->has_to) {
                qr_buf_init(&b);
                num_json(&b, a->ct, rg->to);
                if (!(bk->to_json = buf_dup(r, &b)))
                    return false;
            }
            qr_buf_init(&b);
            if (rg->key) {
                qr_buf_json_str(&b, rg->key, strlen(rg->key));
            } else { /* "from-to", "*" for an open end, timestamps unquoted */
                QrBuf k;
                qr_buf_init(&k);
                for (int e = 0; e < 2; e++) {
                    const char *j = e ? bk->to_json : bk->from_json;
                    if (e)
                        qr_buf_putc(&k, '-');
                    if (!j)
                        qr_buf_putc(&k, '*');
                    else if (*j == '"')
                        qr_buf_append(&k, j + 1, strlen(j) - 2);
                    else
                        qr_buf_append(&k, j, strlen(j));
                }
                qr_buf_json_str(&b, k.data ? (const char *)k.data : "", k.len);
                qr_buf_free(&k);
            }
            if (!(bk->key_json = buf_dup(r, &b)))
                return false;
        }
        return true;
    case QR_FACET_TERMS:
    case QR_FACET_HISTOGRAM: break;
    }
    merge(a);
    uint64_t all = 0;
    for (size_t j = 0; j < a->n; j++)
        all += a->v[j].count;
    if (q->kind == QR_FACET_TERMS && a->n > 1)
        qsort(a->v, a->n, sizeof *a->v, count_cmp);
    int size = q->size > 0 ? q->size : q->kind == QR_FACET_TERMS ? 10 : 1000;
    int nb = (int)(a->n < (size_t)size ? a->n : (size_t)size);
    if (!(res->buckets = qr_arena_calloc(r->arena, ((size_t)nb + 1) * sizeof *res->buckets)))
        return false;
    uint64_t shown = 0;
    for (int j = 0; j < nb; j++) {
        if (!(res->buckets[j].key_json = key_json(r, a, &a->v[j])))
            return false;
        res->buckets[j].count = a->v[j].count;
        shown += a->v[j].count;
    }
    res->n_buckets = nb;
    res->other = all - shown;
    return true;
}

int facets_finish(FacetRun *r, QrFacetRes **out, QrError *err)
{
    QrFacetRes *res = qr_arena_calloc(r->arena, ((size_t)r->n + 1) * sizeof *res);
    bool ok = res != NULL;
    for (int f = 0; ok && f < r->n; f++) {
        res[f].field = qr_arena_strndup(r->arena, r->acc[f].req->field,
                                        strlen(r->acc[f].req->field));
        ok = res[f].field && finish_one(r, &r->acc[f], &res[f]);
    }
    if (!ok)
        return qr_error_set(err, qr_arena_over_cap(r->arena) ? QR_ELIMIT : QR_ENOMEM,
                            "out of memory computing facets");
    *out = res;
    return QR_OK;
}
