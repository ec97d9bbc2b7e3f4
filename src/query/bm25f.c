/*
 * bm25f.c — the BM25F term iterator (bm25f.h): a union of one term's
 * postings in several fields, scored on the combined frequency and length.
 *
 * Layer: query/.  Calls index/iter.h and the base kit only.
 *
 * The kids are few (one per searched field), so the union is a linear scan
 * for the smallest current doc rather than a heap.
 */
#include "query/bm25f.h"

#include <string.h>

typedef struct BfIter {
    Iter base;
    Iter **kids;          /* borrows the kids, owns the array (arena) */
    int *kid_field;       /* arena copy */
    int n;
    bool scoring;
    Bm25fScorer sc;       /* copy; arrays borrowed */
} BfIter;

static DocId bf_min(BfIter *b)
{
    DocId m = ITER_END;
    for (int i = 0; i < b->n; i++)
        if (b->kids[i]->doc < m)
            m = b->kids[i]->doc;
    b->base.doc = m;
    if (m != ITER_END)
        b->base.stats.docs_returned++;
    return m;
}

static DocId bf_next(Iter *it)
{
    BfIter *b = (BfIter *)it;
    if (it->doc == ITER_END)
        return ITER_END;
    for (int i = 0; i < b->n; i++) {
        Iter *k = b->kids[i];
        if (k->doc == ITER_NONE || k->doc == it->doc)
            iter_next(k);
    }
    return bf_min(b);
}

static DocId bf_advance(Iter *it, DocId target)
{
    BfIter *b = (BfIter *)it;
    if (it->doc == ITER_END)
        return ITER_END;
    if (it->doc != ITER_NONE && target <= it->doc)
        return it->doc;
    for (int i = 0; i < b->n; i++) {
        Iter *k = b->kids[i];
        if (k->doc == ITER_NONE || k->doc < target)
            iter_advance(k, target);
    }
    return bf_min(b);
}

static uint64_t bf_cost(Iter *it)
{
    BfIter *b = (BfIter *)it;
    uint64_t c = 0;
    for (int i = 0; i < b->n; i++)
        c += iter_cost(b->kids[i]);
    return c;
}

static float bf_score(Iter *it)
{
    BfIter *b = (BfIter *)it;
    float tf = 0;
    for (int i = 0; i < b->n; i++)
        if (b->kids[i]->doc == it->doc)
            tf += b->sc.fw[b->kid_field[i]] * (float)b->kids[i]->vt->freq(b->kids[i]);
    return bm25f_score(&b->sc, tf, bm25f_doc_len(&b->sc, (uint32_t)it->doc));
}

static float bf_max_score(Iter *it)
{
    BfIter *b = (BfIter *)it;
    return b->sc.weight * b->sc.idf * (b->sc.k1 + 1);
}

static uint32_t bf_freq(Iter *it)
{
    BfIter *b = (BfIter *)it;
    uint32_t f = 0;
    for (int i = 0; i < b->n; i++)
        if (b->kids[i]->doc == it->doc)
            f += b->kids[i]->vt->freq(b->kids[i]);
    return f;
}

static const IterVT bf_vt = {.name = "bm25f", .next = bf_next, .advance = bf_advance,
                             .cost = bf_cost, .score = bf_score, .max_score = bf_max_score,
                             .freq = bf_freq};
static const IterVT bf_plain_vt = {.name = "bm25f union", .next = bf_next,
                                   .advance = bf_advance, .cost = bf_cost, .freq = bf_freq};

Iter *bm25f_iter_new(IterCtx *ctx, Iter **kids, const int *kid_field, int n,
                     const Bm25fScorer *scorer)
{
    if (n == 0)
        return iter_empty_new(ctx);
    for (int i = 0; i < n; i++)
        if (!kids[i] || !kids[i]->vt->freq ||
            (scorer && (kid_field[i] < 0 || kid_field[i] >= scorer->n_fields))) {
            iter_ctx_fail(ctx, QR_EINVAL, "bm25f: bad kid %d", i);
            return NULL;
        }
    BfIter *b = qr_arena_calloc(ctx->arena, sizeof *b);
    Iter **kv = b ? qr_arena_alloc(ctx->arena, (size_t)n * sizeof *kv) : NULL;
    int *kf = kv ? qr_arena_alloc(ctx->arena, (size_t)n * sizeof *kf) : NULL;
    if (!kf) {
        iter_ctx_fail(ctx, qr_arena_over_cap(ctx->arena) ? QR_ELIMIT : QR_ENOMEM,
                      "query exceeded its memory limit");
        return NULL;
    }
    memcpy(kv, kids, (size_t)n * sizeof *kv);
    memcpy(kf, kid_field, (size_t)n * sizeof *kf);
    iter_init(&b->base, scorer ? &bf_vt : &bf_plain_vt, ctx);
    b->kids = kv;
    b->kid_field = kf;
    b->n = n;
    if (scorer)
        b->sc = *scorer;
    return &b->base;
}
