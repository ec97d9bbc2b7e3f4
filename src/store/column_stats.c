/*
 * column_stats.c — what the cost planner reads: HyperLogLog distinct
 * counts, equi-depth histograms, and predicate selectivity estimates.
 *
 * Layer: store/.  Calls column_int.h.
 *
 * HyperLogLog (Flajolet et al. 2007): 2^12 registers; a value's 64-bit hash
 * picks a register with its top 12 bits and stores the rank (leading zeros
 * + 1) of the remaining 52.  Estimate: alpha*m^2 / sum(2^-reg), with linear
 * counting below 2.5m when registers are still empty.  Standard error about
 * 1.04/sqrt(4096) = 1.6%.
 *
 * Histograms: keys sorted, cut into buckets of about n/64 rows; a cut never
 * splits a run of equal values, and a value at least one bucket deep gets a
 * bucket of its own (count exact, distinct 1), which makes equality on heavy
 * hitters exact.  Each bucket records [lo, hi], count and distinct.
 */
#include "store/column_int.h"

#include <math.h>

void col_hll_add(uint8_t *regs, uint64_t h)
{
    uint32_t idx = (uint32_t)(h >> (64 - COL_HLL_BITS));
    uint64_t rest = h << COL_HLL_BITS;
    uint8_t rank = rest ? (uint8_t)(__builtin_clzll(rest) + 1) : (uint8_t)(64 - COL_HLL_BITS + 1);
    if (rank > regs[idx])
        regs[idx] = rank;
}

void col_hll_merge(uint8_t dst[COL_HLL_REGS], const uint8_t src[COL_HLL_REGS])
{
    for (uint32_t i = 0; i < COL_HLL_REGS; i++)
        dst[i] = src[i] > dst[i] ? src[i] : dst[i];
}

double col_hll_estimate(const uint8_t regs[COL_HLL_REGS])
{
    const double m = COL_HLL_REGS;
    /* registers per rank first: every segment open estimates every column,
     * so 65 powers of two instead of one per register */
    uint32_t per_rank[256] = {0};
    for (uint32_t i = 0; i < COL_HLL_REGS; i++)
        per_rank[regs[i]]++;
    double sum = 0;
    for (int r = 0; r < 256; r++)
        if (per_rank[r])
            sum += ldexp((double)per_rank[r], -r);
    uint32_t zeros = per_rank[0];
    double e = 0.7213 / (1.0 + 1.079 / m) * m * m / sum;
    if (e <= 2.5 * m && zeros)
        e = m * log(m / zeros);
    return e;
}

void col_hll_registers(const Column *c, uint8_t regs[COL_HLL_REGS])
{
    memcpy(regs, c->hll, COL_HLL_REGS);
}

/* ---- histogram building ------------------------------------------------- */

typedef struct HistB {
    uint8_t *out;
    uint32_t nb;
    uint64_t depth;
    bool open;
    uint64_t lo, hi, count, distinct;
} HistB;

static void hb_emit(HistB *h, uint64_t lo, uint64_t hi, uint64_t count, uint64_t distinct)
{
    uint8_t *e = h->out + (size_t)h->nb * COL_BUCKET_LEN;
    if (h->nb == COL_HIST_MAX) { /* cannot happen (see header); merge into the last */
        e -= COL_BUCKET_LEN;
        qr_put_u64le(e + 8, hi);
        qr_put_u32le(e + 16, qr_get_u32le(e + 16) + (uint32_t)count);
        qr_put_u32le(e + 20, qr_get_u32le(e + 20) + (uint32_t)distinct);
        return;
    }
    qr_put_u64le(e, lo);
    qr_put_u64le(e + 8, hi);
    qr_put_u32le(e + 16, (uint32_t)count);
    qr_put_u32le(e + 20, (uint32_t)distinct);
    h->nb++;
}

static void hb_flush(HistB *h)
{
    if (h->open)
        hb_emit(h, h->lo, h->hi, h->count, h->distinct);
    h->open = false;
}

static void hb_run(HistB *h, uint64_t key, uint64_t len)
{
    if (len >= h->depth) {
        hb_flush(h);
        hb_emit(h, key, key, len, 1);
        return;
    }
    if (!h->open) {
        h->open = true;
        h->lo = key;
        h->count = h->distinct = 0;
    }
    h->hi = key;
    h->count += len;
    h->distinct++;
    if (h->count >= h->depth)
        hb_flush(h);
}

uint32_t col_hist_build(const uint64_t *s, size_t n, uint8_t *out)
{
    HistB h = {.out = out, .depth = (n + COL_HIST_TARGET - 1) / COL_HIST_TARGET};
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && s[j] == s[i])
            j++;
        hb_run(&h, s[i], j - i);
        i = j;
    }
    hb_flush(&h);
    return h.nb;
}

uint32_t col_hist_build_counts(const uint32_t *counts, uint32_t n_codes, uint8_t *out)
{
    uint64_t n = 0;
    for (uint32_t c = 0; c < n_codes; c++)
        n += counts[c];
    HistB h = {.out = out, .depth = (n + COL_HIST_TARGET - 1) / COL_HIST_TARGET};
    for (uint32_t c = 0; c < n_codes; c++)
        if (counts[c])
            hb_run(&h, c, counts[c]);
    hb_flush(&h);
    return h.nb;
}

bool col_hist_bucket(const Column *c, uint32_t i, ColHistBucket *b)
{
    if (i >= c->n_buckets)
        return false;
    const uint8_t *e = c->buckets + (size_t)i * COL_BUCKET_LEN;
    b->lo = col_val_from_key(c, qr_get_u64le(e));
    b->hi = col_val_from_key(c, qr_get_u64le(e + 8));
    b->count = qr_get_u32le(e + 16);
    b->distinct = qr_get_u32le(e + 20);
    return true;
}

/* ---- selectivity -------------------------------------------------------- */

/* Is [lo, hi] one value (the float range [-0, +0] is)? */
static bool is_point(const Column *c, uint64_t lo, uint64_t hi)
{
    if (lo == hi)
        return true;
    return c->type == QR_COL_FLOAT64 && col_double_from_key(lo) == col_double_from_key(hi);
}

/* Fraction of bucket [blo, bhi] covered by [a, b] (already clipped to it),
 * assuming values spread uniformly over the bucket's span. */
static double span_frac(const Column *c, uint64_t blo, uint64_t bhi, uint64_t a, uint64_t b)
{
    if (c->type == QR_COL_FLOAT64) {
        double x0 = col_double_from_key(blo), x1 = col_double_from_key(bhi);
        double y0 = col_double_from_key(a), y1 = col_double_from_key(b);
        double den = x1 - x0;
        if (isfinite(x0) && isfinite(x1) && isfinite(y0) && isfinite(y1) && den > 0 && isfinite(den))
            return (y1 - y0) / den;
        return ((double)(b - a) + 1.0) / ((double)(bhi - blo) + 1.0);
    }
    return ((double)(b - a) + 1.0) / ((double)(bhi - blo) + 1.0);
}

/* Estimated non-NULL rows whose key falls in the filter's ranges. */
static double hist_rows_in_ranges(const ColFilter *f)
{
    const Column *c = f->col;
    double rows = 0;
    uint32_t bi = 0;
    for (uint32_t r = 0; r < f->n_ranges; r++) {
        uint64_t lo = f->ranges[r].lo, hi = f->ranges[r].hi;
        while (bi < c->n_buckets && qr_get_u64le(c->buckets + (size_t)bi * COL_BUCKET_LEN + 8) < lo)
            bi++;
        for (uint32_t k = bi; k < c->n_buckets; k++) {
            const uint8_t *e = c->buckets + (size_t)k * COL_BUCKET_LEN;
            uint64_t blo = qr_get_u64le(e), bhi = qr_get_u64le(e + 8);
            if (blo > hi)
                break;
            double cnt = qr_get_u32le(e + 16), dis = qr_get_u32le(e + 20);
            uint64_t a = lo > blo ? lo : blo, b = hi < bhi ? hi : bhi;
            if (a == blo && b == bhi)
                rows += cnt;
            else if (is_point(c, lo, hi))
                rows += cnt / (dis > 0 ? dis : 1);
            else {
                double est = span_frac(c, blo, bhi, a, b) * cnt;
                rows += est > cnt ? cnt : est;
            }
        }
    }
    return rows;
}

double col_filter_selectivity(const ColFilter *f)
{
    const Column *c = f->col;
    if (c->n_rows == 0)
        return 0;
    double rows = c->n_rows, nonnull = (double)c->n_rows - c->null_count, m;
    switch (f->mode) {
    case CF_NONE:
        return 0;
    case CF_NULL:
        return c->null_count / rows;
    case CF_NOTNULL:
        return nonnull / rows;
    default:
        break;
    }
    m = hist_rows_in_ranges(f);
    if (m > nonnull)
        m = nonnull;
    if (f->invert)
        m = nonnull - m;
    /* zone maps: only rows of blocks a scan would read can match */
    double bound = 0;
    for (uint32_t b = 0; b < c->n_blocks; b++) {
        uint32_t r0, r1;
        const ColBlock *bk = &c->blocks[b];
        if (col_zone_classify(f, bk, &r0, &r1) != CZ_NONE)
            bound += (double)bk->rows - bk->null_count;
    }
    if (m > bound)
        m = bound;
    if (m < 0)
        m = 0;
    return m / rows;
}
