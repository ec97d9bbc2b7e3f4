/*
 * iter_bitmap.c — roaring-backed iterators (see iter_bitmap.h).
 * Layer: index/.
 */
#include "index/iter_bitmap.h"

typedef struct BitmapIter {
    Iter base;
    const roaring_bitmap_t *bm;      /* borrows */
    roaring_uint32_iterator_t it;    /* CRoaring's cursor, by value */
    uint64_t left;                   /* docs not yet returned */
} BitmapIter;

static DocId bm_next(Iter *it)
{
    BitmapIter *b = (BitmapIter *)it;
    if (it->doc == ITER_END)
        return ITER_END;
    if (it->doc != ITER_NONE)
        roaring_advance_uint32_iterator(&b->it);
    if (!b->it.has_value)
        return it->doc = ITER_END;
    if (b->left)
        b->left--;
    it->stats.docs_returned++;
    if ((it->stats.docs_returned & 4095) == 0 && iter_ctx_interrupted_now(it->ctx))
        return it->doc = ITER_END;
    return it->doc = b->it.current_value;
}

static DocId bm_advance(Iter *it, DocId target)
{
    BitmapIter *b = (BitmapIter *)it;
    if (it->doc == ITER_END)
        return ITER_END;
    if (it->doc != ITER_NONE && target <= it->doc)
        return it->doc;
    if (target > UINT32_MAX)
        return it->doc = ITER_END;
    if (!roaring_move_uint32_iterator_equalorlarger(&b->it, (uint32_t)(target < 0 ? 0 : target)))
        return it->doc = ITER_END;
    it->stats.docs_returned++;
    return it->doc = b->it.current_value;
}

static uint64_t bm_cost(Iter *it)
{
    BitmapIter *b = (BitmapIter *)it;
    return b->left;
}

static const IterVT bitmap_vt = {
    .name = "bitmap", .next = bm_next, .advance = bm_advance, .cost = bm_cost,
};

Iter *iter_bitmap_new(IterCtx *ctx, const roaring_bitmap_t *bm)
{
    BitmapIter *b = qr_arena_calloc(ctx->arena, sizeof *b);
    if (!b) {
        iter_ctx_fail(ctx, QR_ENOMEM, "out of memory building an iterator");
        return NULL;
    }
    iter_init(&b->base, &bitmap_vt, ctx);
    b->bm = bm;
    roaring_init_iterator(bm, &b->it);
    b->left = roaring_bitmap_get_cardinality(bm);
    return &b->base;
}

typedef struct LiveIter {
    Iter base;
    DocId n_docs;
    const roaring_bitmap_t *dels; /* borrows, may be NULL */
} LiveIter;

static DocId live_advance(Iter *it, DocId target)
{
    LiveIter *l = (LiveIter *)it;
    if (it->doc == ITER_END)
        return ITER_END;
    if (it->doc != ITER_NONE && target <= it->doc)
        return it->doc;
    if (target < 0)
        target = 0;
    while (target < l->n_docs && l->dels && roaring_bitmap_contains(l->dels, (uint32_t)target))
        target++;
    if (target >= l->n_docs)
        return it->doc = ITER_END;
    if ((++it->stats.docs_returned & 4095) == 0 && iter_ctx_interrupted_now(it->ctx))
        return it->doc = ITER_END;
    return it->doc = target;
}

static DocId live_next(Iter *it)
{
    if (it->doc == ITER_END)
        return ITER_END;
    return live_advance(it, it->doc == ITER_NONE ? 0 : it->doc + 1);
}

static uint64_t live_cost(Iter *it)
{
    LiveIter *l = (LiveIter *)it;
    DocId from = it->doc == ITER_NONE ? 0 : it->doc;
    return from >= l->n_docs ? 0 : (uint64_t)(l->n_docs - from);
}

static const IterVT live_vt = {
    .name = "live", .next = live_next, .advance = live_advance, .cost = live_cost,
};

Iter *iter_live_new(IterCtx *ctx, DocId n_docs, const roaring_bitmap_t *dels)
{
    LiveIter *l = qr_arena_calloc(ctx->arena, sizeof *l);
    if (!l) {
        iter_ctx_fail(ctx, QR_ENOMEM, "out of memory building an iterator");
        return NULL;
    }
    iter_init(&l->base, &live_vt, ctx);
    l->n_docs = n_docs;
    l->dels = dels;
    return &l->base;
}
