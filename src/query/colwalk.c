/*
 * colwalk.c — the column work both front doors share (colwalk.h):
 * predicate bitmaps through the filter engine, the walk of a column's
 * blocks best zone-map bound first, candidate rows read a block at a time,
 * grouping by keyword dictionary codes.
 *
 * Layer: query/.  Calls query/filter.h, index/segment.h, store/column.h.
 *
 * Reading a block: a block holding many candidates is decoded whole
 * (col_read_*: one pass over the packed values); one holding few is read
 * row by row (col_get_*: O(1) each, up to 63 unpacks in a delta block),
 * which is cheaper below COLWALK_SPARSE candidates.
 */
#include "query/colwalk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "index/segment.h"
#include "store/mem.h"

#define COLWALK_SPARSE 64

/* ---- predicate bitmaps ---- */

int colwalk_filter(const QrFilter *f, const Segment *seg, const roaring_bitmap_t *dels,
                   QrAccessPath path, const roaring_bitmap_t *within, const ColWalkCands *cands,
                   roaring_bitmap_t *out, QrFilterStats *st, QrError *err)
{
    FilterSeg *fs;
    int rc = filter_seg_compile(f, seg, &fs, err);
    if (rc != QR_OK)
        return rc;
    roaring_bitmap_t *cand = NULL;
    if (path == QR_ACCESS_AUTO)
        path = filter_seg_choose(fs, within ? roaring_bitmap_get_cardinality(within)
                                     : cands ? cands->n
                                             : UINT64_MAX);
    if (path == QR_ACCESS_CHECK && !within && cands && cands->fill) {
        if (!(cand = roaring_bitmap_create()))
            rc = qr_error_set(err, QR_ENOMEM, "out of memory");
        else
            rc = cands->fill(cands->arg, cand);
        within = cand;
    }
    if (rc == QR_OK)
        rc = filter_seg_eval(fs, path, dels, within, out, st, err);
    if (cand)
        roaring_bitmap_free(cand);
    filter_seg_free(fs);
    return rc;
}

/* ---- keys ---- */

/* ---- the walk by zone-map bound ---- */

typedef struct OrdBlock {
    int si;
    uint32_t block;
    ColWalkKey best;          /* the best key a row of the block can have */
} OrdBlock;

struct ColWalkOrder {
    Segment *const *segs;     /* borrows */
    const roaring_bitmap_t *const *dels; /* borrows, may be NULL */
    roaring_bitmap_t *const *cands;      /* borrows, may be NULL */
    int field;
    QrColType ct;
    bool desc, nulls_first;
    OrdBlock *ob;             /* owns: best first */
    uint64_t n_ob, next;
    int64_t *vals;            /* owns: the block read last (codes, doubles, ints) */
    uint64_t nulls[COL_BLOCK_ROWS / 64];
    ColWalkView view;         /* of the block read last */
    uint32_t rows[COL_BLOCK_ROWS];
};

static int ordblock_cmp(const void *x, const void *y, void *arg)
{
    const ColWalkOrder *w = arg;
    const OrdBlock *a = x, *b = y;
    int c = colwalk_key_cmp(w->ct, &a->best, &b->best, w->desc, w->nulls_first);
    if (c)
        return c;
    if (a->si != b->si)
        return a->si < b->si ? -1 : 1;
    return a->block < b->block ? -1 : a->block > b->block;
}

int colwalk_order_open(Segment *const *segs, const roaring_bitmap_t *const *dels, int n_segs,
                       int field, QrColType ct, bool desc, bool nulls_first,
                       roaring_bitmap_t *const *cands, const bool *skip, ColWalkOrder **out,
                       QrError *err)
{
    *out = NULL;
    if (ct != QR_COL_INT64 && ct != QR_COL_TIMESTAMP && ct != QR_COL_FLOAT64 &&
        ct != QR_COL_KEYWORD)
        return qr_error_set(err, QR_EUNSUPPORTED, "no ordered walk over a %s column",
                            col_type_name(ct));
    uint64_t nb_all = 0;
    for (int si = 0; si < n_segs; si++) {
        const Column *c = seg_column(segs[si], field);
        if (c && col_type(c) != ct)
            return qr_error_set(err, QR_EUNSUPPORTED, "column \"%s\" has another type in a "
                                                      "segment", col_name(c));
        nb_all += (seg_n_docs(segs[si]) + COL_BLOCK_ROWS - 1) / COL_BLOCK_ROWS;
    }
    ColWalkOrder *w = qr_calloc(1, sizeof *w);
    if (w) {
        w->ob = qr_malloc((nb_all + 1) * sizeof *w->ob);
        w->vals = qr_malloc(COL_BLOCK_ROWS * sizeof *w->vals);
    }
    if (!w || !w->ob || !w->vals) {
        colwalk_order_close(w);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    w->segs = segs;
    w->dels = dels;
    w->cands = cands;
    w->field = field;
    w->ct = ct;
    w->desc = desc;
    w->nulls_first = nulls_first;
    for (int si = 0; si < n_segs; si++) {
        if (skip && skip[si])
            continue;
        uint32_t nd = seg_n_docs(segs[si]);
        const Column *c = seg_column(segs[si], field);
        const roaring_bitmap_t *cs = cands ? cands[si] : NULL;
        const roaring_bitmap_t *ds = dels ? dels[si] : NULL;
        for (uint32_t b = 0; b * (uint64_t)COL_BLOCK_ROWS < nd; b++) {
            uint32_t first = b * COL_BLOCK_ROWS;
            uint32_t last = nd - first < COL_BLOCK_ROWS ? nd : first + COL_BLOCK_ROWS;
            if (cs && roaring_bitmap_range_cardinality(cs, first, last) == 0)
                continue;
            if (!cs && ds && roaring_bitmap_range_cardinality(ds, first, last) == last - first)
                continue; /* every row deleted */
            OrdBlock *o = &w->ob[w->n_ob++];
            o->si = si;
            o->block = b;
            memset(&o->best, 0, sizeof o->best);
            o->best.null = true;
            ColZone z;
            /* NULL is the best key when NULLs sort first, and the only one
             * of a block without values */
            if (!c || !col_block_zone(c, b, &z) || !z.has_range || (nulls_first && z.null_count > 0))
                continue;
            const ColVal *bound = desc ? &z.max : &z.min;
            o->best.null = false;
            if (ct == QR_COL_KEYWORD) {
                o->best.s = bound->u.str.s;
                o->best.n = bound->u.str.n;
            } else if (ct == QR_COL_FLOAT64) {
                o->best.f = bound->u.f;
            } else {
                o->best.i = bound->u.i;
            }
        }
    }
    qsort_r(w->ob, w->n_ob, sizeof *w->ob, ordblock_cmp, w);
    *out = w;
    return QR_OK;
}

void colwalk_order_close(ColWalkOrder *w)
{
    if (!w)
        return;
    qr_free(w->ob);
    qr_free(w->vals);
    qr_free(w);
}

uint64_t colwalk_order_blocks(const ColWalkOrder *w) { return w ? w->n_ob : 0; }

bool colwalk_order_peek(const ColWalkOrder *w, const ColWalkKey **best)
{
    if (w->next >= w->n_ob)
        return false;
    *best = &w->ob[w->next].best;
    return true;
}

uint32_t colwalk_order_read(ColWalkOrder *w, int *si, const uint32_t **rows,
                            const ColWalkView **view, QrError *err)
{
    *rows = w->rows;
    *view = &w->view;
    if (w->next >= w->n_ob)
        return 0;
    const OrdBlock *o = &w->ob[w->next++];
    Segment *seg = w->segs[o->si];
    *si = o->si;
    uint32_t nd = seg_n_docs(seg), first = o->block * COL_BLOCK_ROWS;
    uint32_t n = nd - first < COL_BLOCK_ROWS ? nd - first : COL_BLOCK_ROWS;
    const Column *c = seg_column(seg, w->field);
    w->view = (ColWalkView){.col = c, .ct = w->ct, .first_row = first, .vals = w->vals,
                            .nulls = w->nulls};
    /* candidate rows are live already; without them, every row but deletes */
    const roaring_bitmap_t *cs = w->cands ? w->cands[o->si] : NULL;
    const roaring_bitmap_t *ds = cs || !w->dels ? NULL : w->dels[o->si];
    uint32_t k = n;
    if (cs) { /* the block's candidates, in order */
        k = (uint32_t)roaring_bitmap_range_cardinality(cs, first, (uint64_t)first + n);
        roaring_uint32_iterator_t it;
        roaring_init_iterator(cs, &it);
        roaring_move_uint32_iterator_equalorlarger(&it, first);
        k = roaring_read_uint32_iterator(&it, w->rows, k);
    }
    if (c && cs && k < COLWALK_SPARSE) { /* a few rows: read them one by one */
        for (uint32_t j = 0; j < k; j++) {
            uint32_t r = w->rows[j] - first;
            bool has = w->ct == QR_COL_KEYWORD   ? col_get_code(c, w->rows[j], (uint32_t *)w->vals + r)
                       : w->ct == QR_COL_FLOAT64 ? col_get_float(c, w->rows[j], (double *)w->vals + r)
                                                 : col_get_int(c, w->rows[j], w->vals + r);
            if (has)
                w->nulls[r / 64] &= ~(1ull << (r % 64));
            else
                w->nulls[r / 64] |= 1ull << (r % 64);
        }
        return k;
    }
    if (c) {
        uint32_t got = w->ct == QR_COL_KEYWORD   ? col_read_code(c, o->block, 1, (uint32_t *)w->vals, w->nulls)
                       : w->ct == QR_COL_FLOAT64 ? col_read_float(c, o->block, 1, (double *)w->vals, w->nulls)
                                                 : col_read_int(c, o->block, 1, w->vals, w->nulls);
        if (got != n) {
            qr_error_set(err, QR_ECORRUPT, "column \"%s\": block %u is shorter than its segment",
                         col_name(c), o->block);
            return 0;
        }
    }
    if (ds) {
        k = 0;
        for (uint32_t r = 0; r < n; r++)
            if (!roaring_bitmap_contains(ds, first + r))
                w->rows[k++] = first + r;
    } else if (!cs) {
        *rows = NULL; /* every row of the block */
    }
    return k;
}

/* ---- candidate rows a block at a time ---- */

int colwalk_blocks_open(ColWalkBlocks *w, const Segment *seg, const roaring_bitmap_t *cand,
                        ColWalkCol *cols, int n_cols, QrError *err)
{
    memset(w, 0, sizeof *w);
    w->cols = cols;
    w->n_cols = n_cols;
    w->cand = cand;
    bool ok = (w->ids = qr_malloc(COL_BLOCK_ROWS * sizeof *w->ids)) != NULL;
    for (int k = 0; ok && k < n_cols; k++) {
        ColWalkCol *c = &cols[k];
        c->i = NULL;
        c->f = NULL;
        c->code = NULL;
        c->col = seg_column(seg, c->field);
        if (c->col && col_type(c->col) != c->type)
            c->col = NULL; /* retyped since: NULL here */
        if (c->type == QR_COL_FLOAT64)
            ok = (c->f = qr_malloc(COL_BLOCK_ROWS * sizeof *c->f)) != NULL;
        else if (c->type == QR_COL_KEYWORD)
            ok = (c->code = qr_malloc(COL_BLOCK_ROWS * sizeof *c->code)) != NULL;
        else
            ok = (c->i = qr_malloc(COL_BLOCK_ROWS * sizeof *c->i)) != NULL;
        if (ok && c->type == QR_COL_BOOL && !w->b8)
            ok = (w->b8 = qr_malloc(COL_BLOCK_ROWS)) != NULL;
    }
    if (!ok) {
        colwalk_blocks_close(w);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    roaring_init_iterator(cand, &w->it);
    return QR_OK;
}

/* One value of candidate row `row` of column c (row by row); false when
 * it is NULL. */
static bool read_row(ColWalkCol *c, uint32_t row)
{
    uint32_t r = row % COL_BLOCK_ROWS;
    uint64_t bit = 1ull << (r % 64);
    bool has = false, b = false;
    switch (c->type) {
    case QR_COL_FLOAT64: has = col_get_float(c->col, row, &c->f[r]); break;
    case QR_COL_KEYWORD: has = col_get_code(c->col, row, &c->code[r]); break;
    case QR_COL_BOOL:
        has = col_get_bool(c->col, row, &b);
        c->i[r] = b;
        break;
    default: has = col_get_int(c->col, row, &c->i[r]);
    }
    if (has)
        c->nulls[r / 64] &= ~bit;
    else
        c->nulls[r / 64] |= bit;
    return has;
}

bool colwalk_blocks_next(ColWalkBlocks *w)
{
    if (!w->it.has_value)
        return false;
    uint32_t block = w->it.current_value / COL_BLOCK_ROWS;
    w->first_row = block * COL_BLOCK_ROWS;
    uint64_t end = (uint64_t)w->first_row + COL_BLOCK_ROWS;
    uint32_t want = (uint32_t)roaring_bitmap_range_cardinality(w->cand, w->first_row, end);
    if (want == COL_BLOCK_ROWS) { /* every row of the block: no need to read them one by one */
        for (uint32_t j = 0; j < want; j++)
            w->ids[j] = w->first_row + j;
        w->n = want;
        if (end > UINT32_MAX || !roaring_move_uint32_iterator_equalorlarger(&w->it, (uint32_t)end))
            w->it.has_value = false;
    } else {
        w->n = roaring_read_uint32_iterator(&w->it, w->ids, want);
    }
    w->rows = w->ids;
    for (int k = 0; k < w->n_cols; k++) {
        ColWalkCol *c = &w->cols[k];
        c->no_nulls = false;
        if (!c->col) {
            memset(c->nulls, 0xff, sizeof c->nulls);
            continue;
        }
        if (w->n < COLWALK_SPARSE) {
            bool all = true;
            for (uint32_t j = 0; j < w->n; j++)
                all &= read_row(c, w->rows[j]);
            c->no_nulls = all;
            continue;
        }
        uint32_t got;
        switch (c->type) {
        case QR_COL_FLOAT64: got = col_read_float(c->col, block, 1, c->f, c->nulls); break;
        case QR_COL_KEYWORD: got = col_read_code(c->col, block, 1, c->code, c->nulls); break;
        case QR_COL_BOOL: {
            got = col_read_bool(c->col, block, 1, w->b8, c->nulls);
            for (uint32_t r = 0; r < got; r++)
                c->i[r] = w->b8[r];
            break;
        }
        default: got = col_read_int(c->col, block, 1, c->i, c->nulls);
        }
        uint64_t any = 0;
        for (uint32_t g = 0; g < (got + 63) / 64; g++)
            any |= c->nulls[g];
        c->no_nulls = got > 0 && any == 0;
    }
    /* candidates of one block are ascending and unique: rows[j] is
     * first_row + j when they run from its first row without a gap */
    w->contiguous = w->n && w->rows[0] == w->first_row && w->rows[w->n - 1] - w->rows[0] == w->n - 1;
    return true;
}

void colwalk_blocks_close(ColWalkBlocks *w)
{
    for (int k = 0; w->cols && k < w->n_cols; k++) {
        qr_free(w->cols[k].i);
        qr_free(w->cols[k].f);
        qr_free(w->cols[k].code);
        w->cols[k].i = NULL;
        w->cols[k].f = NULL;
        w->cols[k].code = NULL;
    }
    qr_free(w->ids);
    qr_free(w->b8);
    w->ids = NULL;
    w->b8 = NULL;
}

/* ---- rank windows ---- */

/* One round of the rank selection over src[0..n): the bucket of rank
 * (lo: the least key, shift: bits below a bucket), how many keys are in
 * lower buckets (*below) and in it (*in). */
enum { RANK_BITS = 12, RANK_BUCKETS = 1 << RANK_BITS };

static uint64_t rank_min(const uint64_t *src, uint64_t n, uint64_t *hi)
{
    uint64_t lo = UINT64_MAX, h = 0;
    for (uint64_t i = 0; i < n; i++) {
        lo = src[i] < lo ? src[i] : lo;
        h = src[i] > h ? src[i] : h;
    }
    *hi = h;
    return lo;
}

static int rank_shift(uint64_t span)
{
    int width = 64 - __builtin_clzll(span);
    return width > RANK_BITS ? width - RANK_BITS : 0;
}

static uint32_t rank_bucket(const uint32_t *hist, uint64_t rank, uint64_t *below)
{
    uint32_t b = 0;
    *below = 0;
    while (*below + hist[b] <= rank)
        *below += hist[b++];
    return b;
}

/* The keys of src[0..n) in bucket b (in place when dst is src). */
static uint64_t rank_gather(const uint64_t *src, uint64_t n, uint64_t lo, int shift, uint32_t b,
                            uint64_t *dst)
{
    uint64_t m = 0;
    for (uint64_t i = 0; i < n; i++) {
        dst[m] = src[i];
        m += ((src[i] - lo) >> shift) == b;
    }
    return m;
}

uint64_t colwalk_rank_keys(const uint64_t *keys, uint64_t n, uint64_t r0, uint64_t r1,
                           uint64_t *scratch, uint64_t *k1, uint64_t *lt)
{
    uint32_t hist[RANK_BUCKETS];
    const uint64_t *src = keys;
    *lt = 0;
    for (;;) {
        uint64_t hi, lo = rank_min(src, n, &hi);
        if (lo == hi) {
            if (k1)
                *k1 = lo;
            return lo;
        }
        int shift = rank_shift(hi - lo);
        memset(hist, 0, sizeof hist);
        for (uint64_t i = 0; i < n; i++)
            hist[(src[i] - lo) >> shift]++;
        uint64_t below0, below1;
        uint32_t b0 = rank_bucket(hist, r0, &below0), b1 = rank_bucket(hist, r1, &below1);
        *lt += below0; /* every key of a lower bucket is less than the rank's */
        if (b0 != b1 && k1) {
            /* the ranks part: each bucket on its own, r1's past the n keys
             * (which may be scratch's own), then r0's in place */
            uint64_t *s1 = scratch + n;
            uint64_t m1 = rank_gather(src, n, lo, shift, b1, s1);
            uint64_t m0 = rank_gather(src, n, lo, shift, b0, scratch);
            uint64_t lt1;
            *k1 = colwalk_rank_keys(s1, m1, r1 - below1, r1 - below1, s1, NULL, &lt1);
            uint64_t lt0;
            uint64_t k0 = colwalk_rank_keys(scratch, m0, r0 - below0, r0 - below0, scratch, NULL, &lt0);
            *lt += lt0;
            return k0;
        }
        n = rank_gather(src, n, lo, shift, b0, scratch);
        src = scratch;
        r0 -= below0;
        r1 -= below0;
    }
}

/* Segment si's candidates as a bitmap of their own (cands[si], or every
 * row but the deleted ones). */
static roaring_bitmap_t *seg_cands(Segment *const *segs, const roaring_bitmap_t *const *dels,
                                   roaring_bitmap_t *const *cands, int si)
{
    if (cands && cands[si])
        return roaring_bitmap_copy(cands[si]);
    roaring_bitmap_t *b = roaring_bitmap_create();
    if (!b)
        return NULL;
    roaring_bitmap_add_range(b, 0, seg_n_docs(segs[si]));
    if (dels && dels[si])
        roaring_bitmap_andnot_inplace(b, dels[si]);
    return b;
}

typedef struct RankRun {
    Segment *const *segs;
    const roaring_bitmap_t *const *dels;
    roaring_bitmap_t *const *cands;
    const bool *skip;
    int n_segs, field;
    QrColType ct;
    uint64_t flip;            /* desc: every key's bits flipped (the order reversed) */
} RankRun;

/* The order key of row offset r of a decoded block (not NULL). */
static inline uint64_t block_okey(const ColWalkCol *c, uint32_t r, uint64_t flip)
{
    return (c->type == QR_COL_FLOAT64 ? colwalk_okey_double(c->f[r]) : colwalk_okey_int(c->i[r])) ^ flip;
}

/* One block's keys: the non-NULL ones appended to vals, the NULLs counted. */
static void rank_keys_of(const RankRun *rr, const ColWalkBlocks *w, const ColWalkCol *c,
                         uint64_t *vals, uint64_t *n_vals, uint64_t *n_null)
{
    uint64_t m = *n_vals;
    if (!c->col) {
        *n_null += w->n;
        return;
    }
    if (c->no_nulls && w->contiguous && c->type != QR_COL_FLOAT64) { /* the common block */
        for (uint32_t j = 0; j < w->n; j++)
            vals[m + j] = colwalk_okey_int(c->i[j]) ^ rr->flip;
        *n_vals = m + w->n;
        return;
    }
    for (uint32_t j = 0; j < w->n; j++) {
        uint32_t r = w->rows[j] - w->first_row;
        if (c->nulls[r / 64] >> (r % 64) & 1)
            (*n_null)++;
        else
            vals[m++] = block_okey(c, r, rr->flip);
    }
    *n_vals = m;
}

/* One block's rows whose key is in [lo, hi] (or NULL, when nulls_in) into
 * sel; how many. */
static uint32_t rank_sel_of(const RankRun *rr, const ColWalkBlocks *w, const ColWalkCol *c,
                            uint64_t lo, uint64_t hi, bool nulls_in, uint32_t *sel)
{
    uint32_t k = 0;
    uint64_t span = hi - lo; /* lo <= hi: a key k is in when k - lo <= span */
    bool none = lo > hi;
    if (!c->col) {
        if (nulls_in)
            memcpy(sel, w->rows, w->n * sizeof *sel);
        return nulls_in ? w->n : 0;
    }
    if (c->no_nulls && w->contiguous && c->type != QR_COL_FLOAT64) {
        if (none)
            return 0;
        for (uint32_t j = 0; j < w->n; j++) { /* branch-free: every row written, kept ones counted */
            sel[k] = w->first_row + j;
            k += (colwalk_okey_int(c->i[j]) ^ rr->flip) - lo <= span;
        }
        return k;
    }
    for (uint32_t j = 0; j < w->n; j++) {
        uint32_t r = w->rows[j] - w->first_row;
        bool in = c->nulls[r / 64] >> (r % 64) & 1 ? nulls_in
                                                   : !none && block_okey(c, r, rr->flip) - lo <= span;
        if (in)
            sel[k++] = w->rows[j];
    }
    return k;
}

/* Pass over every candidate's key: with range NULL, the non-NULL keys into
 * vals (*n_vals of them) and the NULLs counted; with a range, the rows
 * whose key is in [range[0], range[1]] (or NULL and nulls_in) into out[si]. */
static int rank_pass(const RankRun *rr, uint64_t *vals, uint64_t *n_vals, uint64_t *n_null,
                     const uint64_t *range, bool nulls_in, roaring_bitmap_t **out, QrError *err)
{
    uint32_t *sel = range ? qr_malloc(COL_BLOCK_ROWS * sizeof *sel) : NULL;
    if (range && !sel)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    int rc = QR_OK;
    for (int si = 0; si < rr->n_segs && rc == QR_OK; si++) {
        if (rr->skip && rr->skip[si])
            continue;
        roaring_bitmap_t *cand = seg_cands(rr->segs, rr->dels, rr->cands, si);
        roaring_bitmap_t *win = range ? roaring_bitmap_create() : NULL;
        ColWalkCol col = {.field = rr->field, .type = rr->ct};
        ColWalkBlocks w;
        if (!cand || (range && !win) || colwalk_blocks_open(&w, rr->segs[si], cand, &col, 1, err)) {
            if (cand)
                roaring_bitmap_free(cand);
            if (win)
                roaring_bitmap_free(win);
            rc = qr_error_set(err, QR_ENOMEM, "out of memory");
            break;
        }
        while (colwalk_blocks_next(&w)) {
            if (!range) {
                rank_keys_of(rr, &w, &col, vals, n_vals, n_null);
                continue;
            }
            uint32_t k = rank_sel_of(rr, &w, &col, range[0], range[1], nulls_in, sel);
            if (k)
                roaring_bitmap_add_many(win, k, sel);
        }
        colwalk_blocks_close(&w);
        roaring_bitmap_free(cand);
        if (range)
            out[si] = win;
    }
    qr_free(sel);
    return rc;
}

int colwalk_rank_window(Segment *const *segs, const roaring_bitmap_t *const *dels, int n_segs,
                        int field, QrColType ct, bool desc, bool nulls_first,
                        roaring_bitmap_t *const *cands, const bool *skip, uint64_t from,
                        uint64_t count, roaring_bitmap_t **out, uint64_t *before, QrError *err)
{
    for (int si = 0; si < n_segs; si++)
        out[si] = NULL;
    *before = 0;
    if (ct != QR_COL_INT64 && ct != QR_COL_TIMESTAMP && ct != QR_COL_FLOAT64)
        return qr_error_set(err, QR_EUNSUPPORTED, "no rank window over a %s column",
                            col_type_name(ct));
    uint64_t n_cand = 0;
    for (int si = 0; si < n_segs; si++) {
        const Column *c = seg_column(segs[si], field);
        if (c && col_type(c) != ct)
            return qr_error_set(err, QR_EUNSUPPORTED, "column \"%s\" has another type in a "
                                                      "segment", col_name(c));
        if (skip && skip[si])
            continue;
        n_cand += cands && cands[si] ? roaring_bitmap_get_cardinality(cands[si])
                                     : seg_n_docs(segs[si]) - (dels && dels[si]
                                                                   ? roaring_bitmap_get_cardinality(dels[si])
                                                                   : 0);
    }
    RankRun rr = {segs, dels, cands, skip, n_segs, field, ct, desc ? UINT64_MAX : 0};
    uint64_t *vals = qr_malloc((n_cand + 1) * sizeof *vals);
    uint64_t *scratch = qr_malloc((2 * n_cand + 1) * sizeof *scratch);
    uint64_t n_vals = 0, n_null = 0;
    int rc = !vals || !scratch ? qr_error_set(err, QR_ENOMEM, "out of memory")
                               : rank_pass(&rr, vals, &n_vals, &n_null, NULL, false, NULL, err);
    /* ranks: the NULLs first or last, the values in key order */
    uint64_t n = n_vals + n_null, v0 = nulls_first ? n_null : 0;
    uint64_t last = count && from < n ? (n - from < count ? n - 1 : from + count - 1) : 0;
    bool any = rc == QR_OK && count && from < n;
    bool nulls_in = any && n_null && (nulls_first ? from < n_null : last >= n_vals);
    uint64_t range[2] = {1, 0}; /* empty */
    uint64_t lt = 0;
    if (any && from <= v0 + n_vals - 1 && last >= v0 && n_vals) {
        uint64_t a = from > v0 ? from - v0 : 0, b = last - v0 < n_vals - 1 ? last - v0 : n_vals - 1;
        range[0] = colwalk_rank_keys(vals, n_vals, a, b, scratch, &range[1], &lt);
    }
    if (!any) {
        *before = n; /* the window is past every row */
    } else if (from >= v0 && from < v0 + n_vals) {
        *before = (nulls_first ? n_null : 0) + lt;
    } else {
        *before = nulls_first ? 0 : n_vals; /* it starts among the NULLs */
    }
    qr_free(vals);
    qr_free(scratch);
    if (rc == QR_OK && (rc = rank_pass(&rr, NULL, NULL, NULL, range, nulls_in, out, err)) != QR_OK)
        for (int si = 0; si < n_segs; si++) {
            if (out[si])
                roaring_bitmap_free(out[si]);
            out[si] = NULL;
        }
    return rc;
}

/* ---- grouping by dictionary codes ---- */

/* Room for `more` kept values in p. */
static bool keep_room(ColWalkAgg *p, uint64_t more)
{
    if (p->n_vals + more <= p->cap_vals)
        return true;
    uint64_t grown = p->cap_vals ? p->cap_vals * 2 : 256;
    while (grown < p->n_vals + more)
        grown *= 2;
    int64_t *nv = qr_realloc(p->vals, grown * sizeof *nv);
    if (!nv)
        return false;
    p->vals = nv;
    p->cap_vals = grown;
    return true;
}

/* Append row offset r's value of c to p's kept values. */
static bool keep_value(ColWalkAgg *p, const ColWalkCol *c, uint32_t r)
{
    if (!keep_room(p, 1))
        return false;
    int64_t v;
    if (c->type == QR_COL_FLOAT64)
        memcpy(&v, &c->f[r], sizeof v);
    else
        v = c->i[r];
    p->vals[p->n_vals++] = v;
    p->vals_f = c->type == QR_COL_FLOAT64;
    return true;
}

/* Per-group partials of one integer value column over the blocks without
 * NULLs, one dense array per statistic indexed by group: the per-row step
 * is loads, adds and conditional moves, no branch.  Sums are 64-bit when
 * the column's range times its rows cannot overflow (the column's
 * statistics say so), 128-bit otherwise: no overflow check per row either.
 * Counts are kept only for blocks where another value column has NULLs
 * (elsewhere a group's rows are its count); min / max only when asked. */
typedef struct DenseAcc {
    void *mem;                /* owns every array below */
    int64_t *cnt, *mn, *mx, *sum64;
    __int128 *sum128;
    bool wide, minmax;
} DenseAcc;

static bool dense_new(DenseAcc *a, uint32_t n_groups, const Column *c, bool minmax)
{
    size_t n = n_groups;
    ColStats st = col_stats(c);
    uint64_t lo = st.min.u.i < 0 ? 0 - (uint64_t)st.min.u.i : (uint64_t)st.min.u.i;
    uint64_t hi = st.max.u.i < 0 ? 0 - (uint64_t)st.max.u.i : (uint64_t)st.max.u.i;
    uint64_t bound = lo > hi ? lo : hi;
    a->wide = st.rows && bound > (uint64_t)INT64_MAX / st.rows;
    a->minmax = minmax;
    char *m = qr_malloc(n * (4 * sizeof(int64_t) + (a->wide ? sizeof(__int128) : 0)));
    if (!(a->mem = m))
        return false;
    a->sum128 = a->wide ? (__int128 *)m : NULL; /* first: malloc's 16-byte alignment */
    a->cnt = (int64_t *)(m + (a->wide ? n * sizeof(__int128) : 0));
    a->mn = a->cnt + n;
    a->mx = a->mn + n;
    a->sum64 = a->wide ? NULL : a->mx + n;
    memset(a->cnt, 0, n * sizeof *a->cnt);
    if (a->wide)
        memset(a->sum128, 0, n * sizeof *a->sum128);
    else
        memset(a->sum64, 0, n * sizeof *a->sum64);
    for (size_t g = 0; g < n; g++) {
        a->mn[g] = INT64_MAX;
        a->mx[g] = INT64_MIN;
    }
    return true;
}

/* Fold group g's dense partial, with `more` rows counted outside cnt,
 * into p (which the row-by-row step may have begun on blocks with
 * NULLs). */
static void dense_fold(const DenseAcc *a, uint32_t g, int64_t more, ColWalkAgg *p)
{
    int64_t cnt = a->cnt[g] + more;
    if (!cnt)
        return;
    if (a->minmax) {
        if (p->count == 0 || a->mn[g] < p->min_i)
            p->min_i = a->mn[g];
        if (p->count == 0 || a->mx[g] > p->max_i)
            p->max_i = a->mx[g];
    }
    p->count += cnt;
    __int128 t = (p->sum_is_w ? p->sum_w : (__int128)p->sum_i) + (a->wide ? a->sum128[g] : a->sum64[g]);
    if (!p->sum_is_w && t >= INT64_MIN && t <= INT64_MAX) {
        p->sum_i = (int64_t)t;
    } else {
        p->sum_is_w = true;
        p->sum_w = t;
    }
}

/* The rows of one block into the dense partials: gid[j] is candidate j's
 * group, its value v[j] (contiguous) or v[off[j]].  Called with constant
 * flags, so each combination compiles to its own loop. */
static inline __attribute__((always_inline)) void
dense_add_t(DenseAcc *a, const uint32_t *gid, const int64_t *v, const uint32_t *off, uint32_t n,
            bool cnt, bool minmax, bool wide)
{
    int64_t *c = a->cnt, *mn = a->mn, *mx = a->mx, *s64 = a->sum64;
    __int128 *s128 = a->sum128;
    for (uint32_t j = 0; j < n; j++) {
        uint32_t g = gid[j];
        int64_t x = off ? v[off[j]] : v[j];
        if (cnt)
            c[g]++;
        if (wide)
            s128[g] += x;
        else
            s64[g] += x;
        if (minmax) {
            mn[g] = x < mn[g] ? x : mn[g];
            mx[g] = x > mx[g] ? x : mx[g];
        }
    }
}

static void dense_add(DenseAcc *a, const uint32_t *gid, const int64_t *v, const uint32_t *off,
                      uint32_t n, bool cnt)
{
    if (off || a->wide || a->minmax)
        dense_add_t(a, gid, v, off, n, cnt, a->minmax, a->wide);
    else if (cnt)
        dense_add_t(a, gid, v, NULL, n, true, false, false);
    else
        dense_add_t(a, gid, v, NULL, n, false, false, false);
}

typedef struct GroupRun {
    ColWalkCol *cols;         /* owns: the key (when grouped), then each field once */
    int *at;                  /* owns: value column k's index in cols */
    int *rep;                 /* owns: the first value column over k's field */
    DenseAcc *acc;            /* owns: per value column read (integers), or zeroed */
    uint32_t *gid, *off;      /* owns: per candidate of a block */
    int64_t *rows;            /* owns: rows per group in blocks where some integer column has
                                 NULLs (dense, folded into the parts at the end) */
    int64_t *drows;           /* owns: rows per group in the other blocks: also the count of
                                 every integer column there */
} GroupRun;

static void group_run_free(GroupRun *r, int n_vals)
{
    for (int k = 0; r->acc && k < n_vals; k++)
        qr_free(r->acc[k].mem);
    qr_free(r->acc);
    qr_free(r->cols);
    qr_free(r->at);
    qr_free(r->rep);
    qr_free(r->gid);
    qr_free(r->off);
    qr_free(r->rows);
    qr_free(r->drows);
}

/* One block's values of value column k (read as c) into the groups'
 * parts: dense partials for integers without NULLs (counted there unless
 * the block's rows count them: all_dense), row by row otherwise; kept
 * values appended.  False when out of memory. */
static bool group_block_col(ColWalkGroup *out, GroupRun *R, const ColWalkBlocks *w, int k,
                            const ColWalkCol *c, bool one_group, bool all_dense)
{
    const uint32_t *gid = R->gid, *off = w->contiguous ? NULL : R->off;
    uint32_t n = w->n;
    size_t stride = (size_t)out->stride;
    bool fl = c->type == QR_COL_FLOAT64;
    if (!fl && c->no_nulls) {
        dense_add(&R->acc[k], gid, c->i, off, n, !all_dense);
    } else {
        for (uint32_t j = 0; j < n; j++) {
            uint32_t r = off ? off[j] : j;
            if (c->nulls[r / 64] >> (r % 64) & 1)
                continue;
            ColWalkAgg *p = &out->parts[gid[j] * stride + (size_t)k];
            if (fl)
                colwalk_agg_float(p, c->f[r]);
            else
                colwalk_agg_int(p, c->i[r]);
        }
    }
    if (!c->keep)
        return true;
    if (one_group && c->no_nulls && !off) { /* the block's values as they are */
        ColWalkAgg *p = &out->parts[(size_t)k];
        if (!keep_room(p, n))
            return false;
        memcpy(p->vals + p->n_vals, fl ? (const void *)c->f : (const void *)c->i, n * sizeof *p->vals);
        p->n_vals += n;
        p->vals_f = fl;
        return true;
    }
    for (uint32_t j = 0; j < n; j++) {
        uint32_t r = off ? off[j] : j;
        if (!(c->nulls[r / 64] >> (r % 64) & 1) &&
            !keep_value(&out->parts[gid[j] * stride + (size_t)k], c, r))
            return false;
    }
    return true;
}

/* gid[j] = candidate j's group (NULL keys, and codes past the dictionary,
 * which only damage makes, in the last one), and the groups' rows counted. */
static void group_ids(GroupRun *R, const ColWalkCol *kc, uint32_t n_codes, const uint32_t *off,
                      uint32_t n, int64_t *rows)
{
    uint32_t *gid = R->gid;
    if (!kc) {
        memset(gid, 0, n * sizeof *gid); /* group 0: n_codes is 0 */
        rows[0] += n;
        return;
    }
    const uint32_t *code = kc->code;
    if (!off && kc->no_nulls) {
        for (uint32_t j = 0; j < n; j++) {
            uint32_t g = code[j] < n_codes ? code[j] : n_codes;
            gid[j] = g;
            rows[g]++;
        }
        return;
    }
    for (uint32_t j = 0; j < n; j++) {
        uint32_t r = off ? off[j] : j, g = code[r];
        g = g < n_codes ? g : n_codes;
        g = kc->nulls[r / 64] >> (r % 64) & 1 ? n_codes : g;
        gid[j] = g;
        rows[g]++;
    }
}

int colwalk_group(const Segment *seg, const roaring_bitmap_t *cand, int key_field,
                  const ColWalkCol *vals, int n_vals, ColWalkGroup *out, QrError *err)
{
    memset(out, 0, sizeof *out);
    GroupRun R = {0};
    R.cols = qr_calloc((size_t)n_vals + 2, sizeof *R.cols);
    R.at = qr_calloc((size_t)n_vals + 1, sizeof *R.at);
    R.rep = qr_calloc((size_t)n_vals + 1, sizeof *R.rep);
    R.acc = qr_calloc((size_t)n_vals + 1, sizeof *R.acc);
    R.gid = qr_malloc(COL_BLOCK_ROWS * sizeof *R.gid);
    R.off = qr_malloc(COL_BLOCK_ROWS * sizeof *R.off);
    if (!R.cols || !R.at || !R.rep || !R.acc || !R.gid || !R.off) {
        group_run_free(&R, n_vals);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    int nc = 0;
    if (key_field >= 0)
        R.cols[nc++] = (ColWalkCol){.field = key_field, .type = QR_COL_KEYWORD};
    for (int k = 0; k < n_vals; k++) {
        R.rep[k] = k;
        for (int j = 0; j < k; j++)
            if (vals[j].field == vals[k].field && vals[j].type == vals[k].type) {
                R.rep[k] = R.rep[j];
                break;
            }
        if (R.rep[k] == k)
            R.cols[R.at[k] = nc++] = (ColWalkCol){.field = vals[k].field, .type = vals[k].type,
                                                  .skip_minmax = true};
        else
            R.at[k] = R.at[R.rep[k]];
        R.cols[R.at[k]].keep |= vals[k].keep;
        R.cols[R.at[k]].skip_minmax &= vals[k].skip_minmax;
    }
    ColWalkBlocks w;
    int rc = colwalk_blocks_open(&w, seg, cand, R.cols, nc, err);
    if (rc != QR_OK) {
        group_run_free(&R, n_vals);
        return rc;
    }
    const ColWalkCol *kc = key_field >= 0 && R.cols[0].col ? &R.cols[0] : NULL;
    out->key = kc ? kc->col : NULL;
    out->n_codes = out->key ? col_dict_size(out->key) : 0;
    out->n_vals = n_vals;
    out->stride = n_vals > 0 ? n_vals : 1;
    uint32_t n_groups = out->n_codes + 1;
    bool ok = (out->parts = qr_calloc((size_t)n_groups * (size_t)out->stride, sizeof *out->parts)) &&
              (R.rows = qr_calloc(n_groups, sizeof *R.rows)) &&
              (R.drows = qr_calloc(n_groups, sizeof *R.drows));
    for (int k = 0; ok && k < n_vals; k++) {
        const ColWalkCol *c = &R.cols[R.at[k]];
        if (R.rep[k] == k && c->col && c->type != QR_COL_FLOAT64)
            ok = dense_new(&R.acc[k], n_groups, c->col, !c->skip_minmax);
    }
    if (ok && !kc) /* one group: its kept values are every candidate's at most */
        for (int k = 0; ok && k < n_vals; k++)
            if (R.rep[k] == k && R.cols[R.at[k]].keep)
                ok = keep_room(&out->parts[k], roaring_bitmap_get_cardinality(cand));
    while (ok && colwalk_blocks_next(&w)) {
        uint32_t n = w.n;
        if (!w.contiguous)
            for (uint32_t j = 0; j < n; j++)
                R.off[j] = w.rows[j] - w.first_row;
        /* every integer column without NULLs here: the rows are their count */
        bool all_dense = true;
        for (int k = 0; k < n_vals; k++)
            all_dense &= !R.acc[k].mem || R.cols[R.at[k]].no_nulls;
        group_ids(&R, kc, out->n_codes, w.contiguous ? NULL : R.off, n, all_dense ? R.drows : R.rows);
        for (int k = 0; ok && k < n_vals; k++)
            if (R.rep[k] == k && R.cols[R.at[k]].col)
                ok = group_block_col(out, &R, &w, k, &R.cols[R.at[k]], !kc, all_dense);
        out->rows += n;
    }
    colwalk_blocks_close(&w);
    if (!ok) {
        group_run_free(&R, n_vals);
        colwalk_group_free(out);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    size_t stride = (size_t)out->stride;
    for (uint32_t g = 0; g < n_groups; g++) {
        ColWalkAgg *P = &out->parts[(size_t)g * stride];
        P->rows += R.rows[g] + R.drows[g];
        for (int k = 0; k < n_vals; k++) {
            P[k].is_int = R.cols[R.at[k]].type != QR_COL_FLOAT64;
            if (R.acc[k].mem)
                dense_fold(&R.acc[k], g, R.drows[g], &P[k]);
        }
        for (int k = 0; k < n_vals; k++) /* the same field: the same part */
            if (R.rep[k] != k) {
                int64_t rows = P[k].rows;
                P[k] = P[R.rep[k]];
                P[k].rows = rows;
                P[k].vals_shared = P[k].vals != NULL;
            }
    }
    group_run_free(&R, n_vals);
    return QR_OK;
}

void colwalk_group_free(ColWalkGroup *g)
{
    if (!g)
        return;
    for (size_t x = 0; g->parts && x < ((size_t)g->n_codes + 1) * (size_t)g->stride; x++)
        if (!g->parts[x].vals_shared)
            qr_free(g->parts[x].vals);
    qr_free(g->parts);
    g->parts = NULL;
}
