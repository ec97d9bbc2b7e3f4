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
    /* candidate rows are live already; without them, every row but deletes */
    const roaring_bitmap_t *cs = w->cands ? w->cands[o->si] : NULL;
    const roaring_bitmap_t *ds = cs || !w->dels ? NULL : w->dels[o->si];
    uint32_t k = 0;
    if (cs) {
        for (uint32_t r = 0; r < n; r++)
            if (roaring_bitmap_contains(cs, first + r))
                w->rows[k++] = first + r;
    } else if (ds) {
        for (uint32_t r = 0; r < n; r++)
            if (!roaring_bitmap_contains(ds, first + r))
                w->rows[k++] = first + r;
    } else {
        *rows = NULL; /* every row of the block */
        k = n;
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
    uint64_t n = roaring_bitmap_get_cardinality(cand);
    bool ok = (w->ids = qr_malloc((n + 1) * sizeof *w->ids)) != NULL;
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
    roaring_bitmap_to_uint32_array(cand, w->ids);
    w->n_ids = n;
    return QR_OK;
}

/* One value of candidate row `row` of column c (row by row). */
static void read_row(ColWalkBlocks *w, ColWalkCol *c, uint32_t row)
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
    (void)w;
    if (has)
        c->nulls[r / 64] &= ~bit;
    else
        c->nulls[r / 64] |= bit;
}

bool colwalk_blocks_next(ColWalkBlocks *w)
{
    if (w->pos >= w->n_ids)
        return false;
    uint32_t block = w->ids[w->pos] / COL_BLOCK_ROWS;
    uint64_t end = w->pos;
    while (end < w->n_ids && w->ids[end] / COL_BLOCK_ROWS == block)
        end++;
    w->rows = w->ids + w->pos;
    w->n = (uint32_t)(end - w->pos);
    w->pos = end;
    w->first_row = block * COL_BLOCK_ROWS;
    for (int k = 0; k < w->n_cols; k++) {
        ColWalkCol *c = &w->cols[k];
        if (!c->col) {
            memset(c->nulls, 0xff, sizeof c->nulls);
            continue;
        }
        if (w->n < COLWALK_SPARSE) {
            for (uint32_t j = 0; j < w->n; j++)
                read_row(w, c, w->rows[j]);
            continue;
        }
        switch (c->type) {
        case QR_COL_FLOAT64: col_read_float(c->col, block, 1, c->f, c->nulls); break;
        case QR_COL_KEYWORD: col_read_code(c->col, block, 1, c->code, c->nulls); break;
        case QR_COL_BOOL: {
            uint32_t got = col_read_bool(c->col, block, 1, w->b8, c->nulls);
            for (uint32_t r = 0; r < got; r++)
                c->i[r] = w->b8[r];
            break;
        }
        default: col_read_int(c->col, block, 1, c->i, c->nulls);
        }
    }
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
    w->n_ids = w->pos = 0;
}

/* ---- grouping by dictionary codes ---- */

/* Append row offset r's value of c to p's kept values. */
static bool keep_value(ColWalkAgg *p, const ColWalkCol *c, uint32_t r)
{
    if (p->n_vals == p->cap_vals) {
        uint64_t grown = p->cap_vals ? p->cap_vals * 2 : 256;
        int64_t *nv = qr_realloc(p->vals, grown * sizeof *nv);
        if (!nv)
            return false;
        p->vals = nv;
        p->cap_vals = grown;
    }
    int64_t v;
    if (c->type == QR_COL_FLOAT64)
        memcpy(&v, &c->f[r], sizeof v);
    else
        v = c->i[r];
    p->vals[p->n_vals++] = v;
    p->vals_f = c->type == QR_COL_FLOAT64;
    return true;
}

int colwalk_group(const Segment *seg, const roaring_bitmap_t *cand, int key_field,
                  const ColWalkCol *vals, int n_vals, ColWalkGroup *out, QrError *err)
{
    memset(out, 0, sizeof *out);
    ColWalkCol *cols = qr_calloc((size_t)n_vals + 2, sizeof *cols);
    if (!cols)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    int nc = 0;
    if (key_field >= 0)
        cols[nc++] = (ColWalkCol){.field = key_field, .type = QR_COL_KEYWORD};
    for (int k = 0; k < n_vals; k++)
        cols[nc++] = (ColWalkCol){.field = vals[k].field, .type = vals[k].type, .keep = vals[k].keep};
    ColWalkBlocks w;
    int rc = colwalk_blocks_open(&w, seg, cand, cols, nc, err);
    if (rc != QR_OK) {
        qr_free(cols);
        return rc;
    }
    const ColWalkCol *kc = key_field >= 0 ? &cols[0] : NULL;
    ColWalkCol *vc = cols + (key_field >= 0);
    out->key = kc ? kc->col : NULL;
    out->n_codes = out->key ? col_dict_size(out->key) : 0;
    out->n_vals = n_vals;
    out->stride = n_vals > 0 ? n_vals : 1;
    out->parts = qr_calloc(((size_t)out->n_codes + 1) * (size_t)out->stride, sizeof *out->parts);
    if (!out->parts) {
        colwalk_blocks_close(&w);
        qr_free(cols);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    for (size_t x = 0; x < ((size_t)out->n_codes + 1) * (size_t)out->stride; x++)
        out->parts[x].is_int = x % (size_t)out->stride < (size_t)n_vals &&
                               vc[x % (size_t)out->stride].type != QR_COL_FLOAT64;
    while (colwalk_blocks_next(&w)) {
        for (uint32_t j = 0; j < w.n; j++) {
            uint32_t row = w.rows[j], r = row % COL_BLOCK_ROWS;
            uint32_t g = kc && kc->col && !colwalk_null(kc, row) ? kc->code[r] : out->n_codes;
            if (g > out->n_codes)
                g = out->n_codes; /* a code past the dictionary: damage reads as NULL */
            ColWalkAgg *P = &out->parts[(size_t)g * (size_t)out->stride];
            P->rows++;
            for (int k = 0; k < n_vals; k++) {
                const ColWalkCol *c = &vc[k];
                if (colwalk_null(c, row))
                    continue;
                if (c->type == QR_COL_FLOAT64)
                    colwalk_agg_float(&P[k], c->f[r]);
                else
                    colwalk_agg_int(&P[k], c->i[r]);
                if (c->keep && !keep_value(&P[k], c, r)) {
                    colwalk_blocks_close(&w);
                    qr_free(cols);
                    colwalk_group_free(out);
                    return qr_error_set(err, QR_ENOMEM, "out of memory");
                }
            }
        }
        out->rows += w.n;
    }
    colwalk_blocks_close(&w);
    qr_free(cols);
    return QR_OK;
}

void colwalk_group_free(ColWalkGroup *g)
{
    if (!g)
        return;
    for (size_t x = 0; g->parts && x < ((size_t)g->n_codes + 1) * (size_t)g->stride; x++)
        qr_free(g->parts[x].vals);
    qr_free(g->parts);
    g->parts = NULL;
}
