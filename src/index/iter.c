/*
 * iter.c — IterCtx helpers and the three trivial iterators (array, all,
 * empty) that tests, bitmaps and the planner build on.
 * Layer: index/.
 */
#include "index/iter.h"
#include "store/util.h"

#include <stdarg.h>
#include <stdio.h>

void iter_ctx_init(IterCtx *ctx, QrArena *arena)
{
    ctx->arena = arena;
    qr_error_clear(&ctx->err);
    ctx->deadline_ns = 0;
    ctx->cancel = NULL;
    ctx->check_tick = 0;
    ctx->clock_reads = 0;
}

static bool ctx_interrupted(IterCtx *ctx, bool read_clock)
{
    if (ctx->err.code != QR_OK)
        return true;
    if (ctx->cancel && atomic_load_explicit(ctx->cancel, memory_order_relaxed)) {
        qr_error_set(&ctx->err, QR_ECANCELED, "canceling statement due to user request");
        return true;
    }
    if (ctx->deadline_ns && (read_clock || (++ctx->check_tick & 63) == 0) &&
        (ctx->clock_reads++, qr_now_ns() > ctx->deadline_ns)) {
        qr_error_set(&ctx->err, QR_ETIMEOUT, "canceling statement due to statement timeout");
        return true;
    }
    if (ctx->arena && qr_arena_over_cap(ctx->arena)) {
        qr_error_set(&ctx->err, QR_ELIMIT, "query exceeded its memory limit");
        qr_error_hint(&ctx->err, "narrow the query or raise the per-query memory limit");
        return true;
    }
    return false;
}

bool iter_ctx_interrupted(IterCtx *ctx) { return ctx_interrupted(ctx, false); }
bool iter_ctx_interrupted_now(IterCtx *ctx) { return ctx_interrupted(ctx, true); }

void iter_ctx_fail(IterCtx *ctx, QrCode code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    qr_error_setv(&ctx->err, code, fmt, ap);
    va_end(ap);
}

/* ---- array ---- */

typedef struct ArrayIter {
    Iter base;
    const DocId *docs; /* borrows */
    size_t n, i;       /* i: index of the next doc to return */
} ArrayIter;

static DocId array_next(Iter *it)
{
    ArrayIter *a = (ArrayIter *)it;
    if (a->i >= a->n)
        return it->doc = ITER_END;
    it->stats.docs_returned++;
    return it->doc = a->docs[a->i++];
}

static DocId array_advance(Iter *it, DocId target)
{
    ArrayIter *a = (ArrayIter *)it;
    if (it->doc != ITER_NONE && target <= it->doc)
        return it->doc;
    /* galloping search from i */
    size_t lo = a->i, step = 1, hi = lo;
    while (hi < a->n && a->docs[hi] < target) {
        lo = hi + 1;
        hi += step;
        step *= 2;
    }
    if (hi > a->n)
        hi = a->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->docs[mid] < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    a->i = lo;
    return array_next(it);
}

static uint64_t array_cost(Iter *it)
{
    ArrayIter *a = (ArrayIter *)it;
    return a->n - a->i;
}

static const IterVT array_vt = {
    .name = "array", .next = array_next, .advance = array_advance, .cost = array_cost,
};

Iter *iter_array_new(IterCtx *ctx, const DocId *docs, size_t n)
{
    ArrayIter *a = qr_arena_calloc(ctx->arena, sizeof *a);
    if (!a) {
        iter_ctx_fail(ctx, QR_ENOMEM, "out of memory building an iterator");
        return NULL;
    }
    iter_init(&a->base, &array_vt, ctx);
    a->docs = docs;
    a->n = n;
    return &a->base;
}

/* ---- all ---- */

typedef struct AllIter {
    Iter base;
    DocId n_docs;
} AllIter;

static DocId all_advance(Iter *it, DocId target)
{
    AllIter *a = (AllIter *)it;
    if (it->doc != ITER_NONE && target <= it->doc)
        return it->doc;
    if (target < 0)
        target = 0;
    if (target >= a->n_docs)
        return it->doc = ITER_END;
    if ((target & 4095) == 0 && iter_ctx_interrupted_now(it->ctx))
        return it->doc = ITER_END;
    it->stats.docs_returned++;
    return it->doc = target;
}

static DocId all_next(Iter *it)
{
    if (it->doc == ITER_END)
        return ITER_END;
    return all_advance(it, it->doc + 1);
}

static uint64_t all_cost(Iter *it)
{
    AllIter *a = (AllIter *)it;
    DocId from = it->doc == ITER_NONE ? 0 : it->doc;
    return from >= a->n_docs ? 0 : (uint64_t)(a->n_docs - from);
}

static const IterVT all_vt = {
    .name = "all", .next = all_next, .advance = all_advance, .cost = all_cost,
};

Iter *iter_all_new(IterCtx *ctx, DocId n_docs)
{
    AllIter *a = qr_arena_calloc(ctx->arena, sizeof *a);
    if (!a) {
        iter_ctx_fail(ctx, QR_ENOMEM, "out of memory building an iterator");
        return NULL;
    }
    iter_init(&a->base, &all_vt, ctx);
    a->n_docs = n_docs;
    return &a->base;
}

/* ---- empty ---- */

static DocId empty_move(Iter *it) { return it->doc = ITER_END; }
static DocId empty_advance(Iter *it, DocId t)
{
    (void)t;
    return it->doc = ITER_END;
}
static uint64_t empty_cost(Iter *it)
{
    (void)it;
    return 0;
}
static const IterVT empty_vt = {
    .name = "empty", .next = empty_move, .advance = empty_advance, .cost = empty_cost,
};

Iter *iter_empty_new(IterCtx *ctx)
{
    Iter *it = qr_arena_calloc(ctx->arena, sizeof *it);
    if (!it) {
        iter_ctx_fail(ctx, QR_ENOMEM, "out of memory building an iterator");
        return NULL;
    }
    iter_init(it, &empty_vt, ctx);
    return it;
}
