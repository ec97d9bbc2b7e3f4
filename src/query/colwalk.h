/*
 * colwalk.h — the column work both front doors share: predicate bitmaps of
 * a segment, the walk of a column's blocks best zone-map bound first (a
 * sort or ORDER BY with a limit), candidate rows read a block at a time,
 * and grouping by keyword dictionary codes with partial aggregates.
 *
 * Layer: query/.  Calls the filter engine (filter.h), index/segment.h
 * (columns of a segment) and store/column.h.  Used by qr_search (search.c:
 * filters, sort, facets) and by SQL's table scan (sql_scan.c: the scan
 * path's bitmaps, the ordered walk, aggregates from column blocks), so an
 * HTTP search and a SQL query over the same columns run the same code.
 *
 * Lifetimes: everything here borrows the segments, which must stay pinned
 * (the caller's snapshot); keyword strings handed out borrow the segment's
 * column.  Errors: QrError through err, first one wins; nothing is left
 * allocated on failure.  One thread at a time per object.
 */
#ifndef QR_COLWALK_H
#define QR_COLWALK_H

#include <math.h>
#include <roaring/roaring.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "query/filter.h"
#include "store/column.h"
#include "store/error.h"

struct Segment;

/* ---- predicate bitmaps ---- */

/* Candidates a filter may check row by row instead of scanning columns:
 * their estimated number (the text side's cost) and, when checking them is
 * chosen, a function that materializes them (live docs) into out. */
typedef struct ColWalkCands {
    uint64_t n;
    int (*fill)(void *arg, roaring_bitmap_t *out);
    void *arg;
} ColWalkCands;

/* ADD to out the rows of seg that pass f, are not in dels (may be NULL)
 * and, when `within` is not NULL, are in it.  path forces the access path
 * (filter.h); QR_ACCESS_AUTO chooses by cost with `within`'s cardinality or
 * cands->n as the candidates; when it chooses CHECK without `within`,
 * cands->fill (if any) gives the rows to check.  Adds to *st (may be
 * NULL).  Errors: QR_ETYPE (this segment's column cannot compare an
 * operand: a field retyped since), QR_ENOMEM. */
int colwalk_filter(const QrFilter *f, const struct Segment *seg, const roaring_bitmap_t *dels,
                   QrAccessPath path, const roaring_bitmap_t *within, const ColWalkCands *cands,
                   roaring_bitmap_t *out, QrFilterStats *st, QrError *err);

/* ---- keys of a column in order ---- */

/* One value of an ordering column. */
typedef struct ColWalkKey {
    bool null;
    int64_t i;        /* int64, timestamp (µs) */
    double f;         /* float64 */
    const char *s;    /* keyword: borrows the segment's column */
    size_t n;
} ColWalkKey;

/* Order of two keys of a column of type ct, ascending (desc reverses the
 * values); NULL goes after every value, or before with nulls_first (as
 * SQL's NULLS FIRST / LAST, whatever the direction).  Floats: NaN above
 * every number.  Keywords: bytes (COLLATE "C"). */
static inline int colwalk_key_cmp(QrColType ct, const ColWalkKey *a, const ColWalkKey *b,
                                  bool desc, bool nulls_first)
{
    if (a->null || b->null) {
        if (a->null && b->null)
            return 0;
        int c = a->null ? 1 : -1;
        return nulls_first ? -c : c;
    }
    int c;
    switch (ct) {
    case QR_COL_FLOAT64:
        if (isnan(a->f) || isnan(b->f))
            c = isnan(a->f) - isnan(b->f);
        else
            c = a->f < b->f ? -1 : a->f > b->f;
        break;
    case QR_COL_KEYWORD: {
        size_t m = a->n < b->n ? a->n : b->n;
        c = memcmp(a->s, b->s, m);
        c = c ? (c < 0 ? -1 : 1) : (a->n < b->n ? -1 : a->n > b->n);
        break;
    }
    default: c = a->i < b->i ? -1 : a->i > b->i;
    }
    return desc ? -c : c;
}

/* ---- the walk by zone-map bound ---- */

/* The blocks of one column over the segments of a snapshot that hold a
 * candidate, sorted by the best key any row of the block can have (its
 * zone map), best first: a walk with a limit reads them in order and stops
 * at the first block whose bound cannot enter, so a sorted column reads a
 * block or two.  Rows come out per block (not in key order inside it). */
typedef struct ColWalkOrder ColWalkOrder;

/* Set up the walk of `field` over segs[0..n_segs): candidates of segment si
 * are cands[si], live rows only, or when cands or cands[si] is NULL every
 * row but dels[si] (dels may be NULL); skip (may be NULL): skip[si] means
 * no candidate in segment si.  ct is the column type (int64, timestamp, float64 or
 * keyword); a segment whose column has another type makes the walk
 * impossible: QR_EUNSUPPORTED, and the caller walks rows instead.  A
 * segment without the column has NULL keys.  Errors: QR_ENOMEM. */
int colwalk_order_open(struct Segment *const *segs, const roaring_bitmap_t *const *dels,
                       int n_segs, int field, QrColType ct, bool desc, bool nulls_first,
                       roaring_bitmap_t *const *cands, const bool *skip, ColWalkOrder **out,
                       QrError *err);
/* NULL is a no-op. */
void colwalk_order_close(ColWalkOrder *w);
/* Blocks the walk holds (EXPLAIN). */
uint64_t colwalk_order_blocks(const ColWalkOrder *w);
/* The bound of the next block: false when none is left. */
bool colwalk_order_peek(const ColWalkOrder *w, const ColWalkKey **best);
/* The block read last: what colwalk_order_key reads (borrows the walk). */
typedef struct ColWalkView {
    const struct Column *col; /* NULL: every key NULL */
    QrColType ct;
    uint32_t first_row;
    const int64_t *vals;      /* codes (uint32), doubles or int64 by ct */
    const uint64_t *nulls;
} ColWalkView;

/* Read the next block: its candidate rows (segment-local ids, ascending),
 * valid until the next call, or *rows NULL when they are every row of the
 * block (view->first_row onwards); *view for their keys; *si the segment.
 * Returns the number of rows (0 when the walk is over, or on damage: a
 * block shorter than its segment, QR_ECORRUPT in err). */
uint32_t colwalk_order_read(ColWalkOrder *w, int *si, const uint32_t **rows,
                            const ColWalkView **view, QrError *err);

/* The key of a row of the block read last (fields set one by one: a
 * struct built and copied per row stalls the store buffer). */
static inline void colwalk_order_key(const ColWalkView *v, uint32_t row, ColWalkKey *key)
{
    uint32_t r = row - v->first_row;
    key->null = !v->col || (v->nulls[r / 64] >> (r % 64) & 1);
    key->i = 0;
    key->f = 0;
    key->s = NULL;
    key->n = 0;
    if (key->null)
        return;
    if (v->ct == QR_COL_KEYWORD) {
        if (!col_dict_get(v->col, ((const uint32_t *)v->vals)[r], &key->s, &key->n))
            key->null = true;
    } else if (v->ct == QR_COL_FLOAT64) {
        key->f = ((const double *)v->vals)[r];
    } else {
        key->i = v->vals[r];
    }
}

/* ---- rank windows: deep pages of an order by one column ---- */

/* The keys of ranks r0 <= r1 (0-based, ascending) among keys[0..n), r1 <
 * n, in O(n) without reordering them: rounds of a 4096-bucket histogram of
 * (key - min) >> shift, each keeping in scratch (room for 2n) the bucket
 * that holds the ranks, until one value is left.  Returns r0's key; *k1
 * (may be NULL: r1 is not looked for) gets r1's, *lt how many keys are
 * less than r0's. */
uint64_t colwalk_rank_keys(const uint64_t *keys, uint64_t n, uint64_t r0, uint64_t r1,
                           uint64_t *scratch, uint64_t *k1, uint64_t *lt);

/* The order key of a number: unsigned order is the numbers' order (a
 * double's bits flipped so that negatives come first, NaN, made one NaN,
 * last, as PostgreSQL orders floats). */
static inline uint64_t colwalk_okey_int(int64_t v) { return (uint64_t)v ^ (1ull << 63); }
static inline uint64_t colwalk_okey_double(double d)
{
    uint64_t u;
    if (isnan(d))
        d = NAN;
    memcpy(&u, &d, sizeof u);
    return u >> 63 ? ~u : u | (1ull << 63);
}

/* The rows at ranks [from, from + count) of the candidates ordered by one
 * number column (int64, timestamp or float64; ties and NULLs as
 * colwalk_key_cmp orders them, desc and nulls_first as there), found
 * without sorting: the keys of ranks from and from + count - 1 are
 * selected (colwalk_rank_keys), and out[si] gets every candidate of segment
 * si whose key lies between them (with the NULLs when the window reaches
 * them): the rows of the window and those tied with its ends, which an
 * ORDER BY that breaks the ties then ranks.  *before: the candidates that
 * rank before every row of out (strictly before the first key).
 * Candidates as for colwalk_order_open (cands, dels, skip).  out[si] are
 * new bitmaps (NULL for a skipped segment), the caller's to free.
 * Errors: QR_EUNSUPPORTED (another column type in a segment), QR_ENOMEM. */
int colwalk_rank_window(struct Segment *const *segs, const roaring_bitmap_t *const *dels,
                        int n_segs, int field, QrColType ct, bool desc, bool nulls_first,
                        roaring_bitmap_t *const *cands, const bool *skip, uint64_t from,
                        uint64_t count, roaring_bitmap_t **out, uint64_t *before, QrError *err);

/* ---- candidate rows a block at a time ---- */

/* One column to read: field and type in; per block the values out. */
typedef struct ColWalkCol {
    int field;                /* in: schema field index */
    QrColType type;           /* in: int64, timestamp, float64, bool or keyword; a segment
                                 whose column has another type reads NULL */
    const struct Column *col; /* the segment's column, NULL when absent (every row NULL) */
    int64_t *i;               /* int64, timestamp, bool (0 / 1): by row offset in the block */
    double *f;                /* float64 */
    uint32_t *code;           /* keyword: dictionary codes */
    bool keep;                /* in (colwalk_group): keep every value per group (percentiles) */
    bool skip_minmax;         /* in (colwalk_group): min / max not wanted (left unset) */
    bool no_nulls;            /* out: no candidate row of the current block is NULL */
    uint64_t nulls[COL_BLOCK_ROWS / 64]; /* bit r: row offset r is NULL */
} ColWalkCol;

/* Candidate rows of one segment, block by block, with every requested
 * column decoded once per block (or read row by row when the block holds
 * few candidates).  Values are valid for the candidate rows only.  The
 * candidates are read from their bitmap a block at a time (no array of
 * every candidate). */
typedef struct ColWalkBlocks {
    ColWalkCol *cols;         /* borrows */
    int n_cols;
    const roaring_bitmap_t *cand; /* borrows: the candidates */
    roaring_uint32_iterator_t it; /* the first candidate of the next block */
    uint32_t *ids;            /* owns: the current block's candidates, ascending */
    uint32_t first_row;       /* the current block's first row */
    const uint32_t *rows;     /* the current block's candidates (segment-local ids) */
    uint32_t n;               /* how many */
    bool contiguous;          /* rows[j] == first_row + j for every j (no gap) */
    uint8_t *b8;              /* owns: bool scratch */
} ColWalkBlocks;

/* Set up over the rows of cand in seg (live rows: deletes are the
 * caller's); cand is borrowed until close.  Errors: QR_ENOMEM. */
int colwalk_blocks_open(ColWalkBlocks *w, const struct Segment *seg, const roaring_bitmap_t *cand,
                        ColWalkCol *cols, int n_cols, QrError *err);
/* Decode the next block holding candidates: false when none is left. */
bool colwalk_blocks_next(ColWalkBlocks *w);
/* Free what open made (the columns' arrays too). */
void colwalk_blocks_close(ColWalkBlocks *w);

/* Is candidate row `row` (segment-local) NULL in c? */
static inline bool colwalk_null(const ColWalkCol *c, uint32_t row)
{
    uint32_t r = row % COL_BLOCK_ROWS;
    return c->nulls[r / 64] >> (r % 64) & 1;
}
/* The row's value as a double (int64, timestamp, bool, float64). */
static inline double colwalk_num(const ColWalkCol *c, uint32_t row)
{
    uint32_t r = row % COL_BLOCK_ROWS;
    return c->type == QR_COL_FLOAT64 ? c->f[r] : (double)c->i[r];
}

/* ---- grouping by dictionary codes ---- */

/* A partial aggregate of one value column over one group's rows. */
typedef struct ColWalkAgg {
    int64_t rows;             /* rows of the group (count(*)): first part of a group only */
    int64_t count;            /* non-NULL values */
    int64_t sum_i;            /* integers; past int64 the sum goes on, exact, in sum_w */
    __int128 sum_w;
    bool sum_is_w;
    double sum_f;             /* float64 */
    bool sum_is_f;
    bool is_int;              /* an int64 / timestamp column's (else float64) */
    int64_t min_i, max_i;     /* int64 / timestamp */
    double min_f, max_f;      /* float64 (NaN above every number, as PostgreSQL) */
    /* with ColWalkCol.keep: the group's non-NULL values (int64 / timestamp,
     * or a float64's bits when vals_f), owned by the ColWalkGroup */
    int64_t *vals;
    uint64_t n_vals, cap_vals;
    bool vals_f;
    bool vals_shared;         /* vals borrows the part of an earlier value column over the
                                 same field (same values: kept once) */
} ColWalkAgg;

/* Add one value (the per-row step of a group's aggregate). */
static inline void colwalk_agg_int(ColWalkAgg *p, int64_t v)
{
    if (p->count == 0 || v < p->min_i)
        p->min_i = v;
    if (p->count == 0 || v > p->max_i)
        p->max_i = v;
    p->count++;
    int64_t t;
    if (p->sum_is_w) {
        p->sum_w += v;
    } else if (__builtin_add_overflow(p->sum_i, v, &t)) {
        p->sum_is_w = true;
        p->sum_w = (__int128)p->sum_i + v;
    } else {
        p->sum_i = t;
    }
}

static inline void colwalk_agg_float(ColWalkAgg *p, double v)
{
    /* PostgreSQL: NaN is above every number */
    if (p->count == 0 || (!isnan(v) && (isnan(p->min_f) || v < p->min_f)))
        p->min_f = v;
    if (p->count == 0 || isnan(v) || (!isnan(p->max_f) && v > p->max_f))
        p->max_f = v;
    p->count++;
    p->sum_is_f = true;
    p->sum_f += v;
}


/* Candidate rows of a segment grouped by a keyword column's dictionary
 * codes: group g < n_codes is code g, group n_codes the rows whose key is
 * NULL (or, without a key, every row).  parts[g * stride + k] is value
 * column k's aggregate in group g (stride = max(n_vals, 1)); the first
 * part of a group counts its rows. */
typedef struct ColWalkGroup {
    const struct Column *key; /* the segment's key column, NULL without one */
    uint32_t n_codes;
    int n_vals, stride;
    ColWalkAgg *parts;        /* owns */
    uint64_t rows;            /* candidate rows read */
} ColWalkGroup;

/* Group cand's rows of seg by keyword field key_field (-1: one group),
 * aggregating vals[0..n_vals) (int64, timestamp or float64 columns; a
 * segment lacking one reads NULL; a column with keep set also hands each
 * group's values in ColWalkAgg.vals).  Value columns over the same field
 * are read once and get equal parts (kept values shared, vals_shared).
 * Blocks of integers without NULLs go through dense per-code
 * accumulators, without a branch per row.  Errors: QR_ENOMEM; deadline checks are
 * the caller's (one call is one segment). */
int colwalk_group(const struct Segment *seg, const roaring_bitmap_t *cand, int key_field,
                  const ColWalkCol *vals, int n_vals, ColWalkGroup *out, QrError *err);
void colwalk_group_free(ColWalkGroup *g);

#endif
