/*
 * iter.h — the doc-id iterator contract every access path implements and the
 * planner composes (STYLE.md §3).
 *
 * Layer: index/.  Calls store/ base kit only.
 *
 * An Iter yields the doc ids of ONE segment in strictly ascending order.
 *
 *   doc        ITER_NONE before the first step, ITER_END after the end,
 *              otherwise the current doc.
 *   next       moves to the next doc and returns it (ITER_END at the end).
 *   advance(t) moves to the first doc >= t and returns it.  Precondition:
 *              t > doc (callers never move backwards; implementations may
 *              simply return doc when t <= doc — the forgiving DocSet rule).
 *              At ITER_END, next/advance return ITER_END again: legal.
 *   cost       O(1) upper bound on the docs still to come (planner input).
 *   score      BM25 contribution of the current doc (scoring iterators only;
 *              vt->score == NULL otherwise).  Valid only when doc is a real doc.
 *   max_score  upper bound of score() over every doc of the iterator.
 *   block_max  shallow look-ahead: the upper bound of score() over the docs
 *              in the block containing `target` (docs >= target up to and
 *              including *block_last).  Does NOT move `doc`.  Returns 0 and
 *              *block_last = ITER_END when no doc >= target remains.  May be
 *              NULL (then max_score is the bound and *block_last = ITER_END).
 *   freq       term frequency in the current doc (postings only, else NULL).
 *   positions  positions of the current doc, ascending, valid until the next
 *              move (postings only, else NULL).
 *   close      release pins; memory itself belongs to the query arena.
 *
 * Errors never travel through the hot loop: on I/O failure, corruption,
 * cancellation, deadline or memory cap an iterator records the error in its
 * IterCtx (first wins) and returns ITER_END.  The caller checks ctx->err once
 * after the loop.  Implementations check iter_ctx_interrupted() once per block.
 */
#ifndef QR_ITER_H
#define QR_ITER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/error.h"
#include "store/mem.h"

typedef int64_t DocId;
#define ITER_NONE ((DocId)-1)
#define ITER_END ((DocId)INT64_MAX)

/* Per-query context shared by every iterator of one query. */
typedef struct IterCtx {
    QrArena *arena;        /* borrows: the query's arena */
    QrError err;           /* first error wins */
    uint64_t deadline_ns;  /* qr_now_ns() deadline, 0 = none */
    atomic_bool *cancel;   /* borrows: set by another thread to cancel; may be NULL */
    uint32_t check_tick;   /* internal: amortizes clock reads */
    uint64_t clock_reads;  /* deadline checks that read the clock (tests, stats) */
} IterCtx;

/* Counters for EXPLAIN ANALYZE. */
typedef struct IterStats {
    uint64_t docs_returned;   /* docs produced by next/advance */
    uint64_t blocks_decoded;  /* postings / column blocks decoded */
    uint64_t blocks_skipped;  /* blocks skipped via skip data / zone maps */
} IterStats;

typedef struct Iter Iter;

typedef struct IterVT {
    const char *name; /* "postings", "and", "or", "not", "phrase", "btree", ... */
    DocId (*next)(Iter *it);
    DocId (*advance)(Iter *it, DocId target);
    uint64_t (*cost)(Iter *it);
    float (*score)(Iter *it);
    float (*max_score)(Iter *it);
    float (*block_max)(Iter *it, DocId target, DocId *block_last);
    uint32_t (*freq)(Iter *it);
    const uint32_t *(*positions)(Iter *it, uint32_t *n);
    void (*close)(Iter *it);
} IterVT;

/* Base struct; implementations embed it first. */
struct Iter {
    const IterVT *vt; /* borrows: static table */
    DocId doc;        /* current doc (see contract) */
    IterCtx *ctx;     /* borrows */
    IterStats stats;
};

static inline DocId iter_next(Iter *it) { return it->vt->next(it); }
static inline DocId iter_advance(Iter *it, DocId t) { return it->vt->advance(it, t); }
static inline uint64_t iter_cost(Iter *it) { return it->vt->cost(it); }
static inline bool iter_scores(const Iter *it) { return it->vt->score != NULL; }
static inline float iter_score(Iter *it) { return it->vt->score ? it->vt->score(it) : 0.0f; }
static inline float iter_max_score(Iter *it)
{
    return it->vt->max_score ? it->vt->max_score(it) : 0.0f;
}
/* block_max with the documented fallback when the vt lacks it. */
static inline float iter_block_max(Iter *it, DocId target, DocId *block_last)
{
    if (it->vt->block_max)
        return it->vt->block_max(it, target, block_last);
    *block_last = ITER_END;
    return iter_max_score(it);
}
static inline void iter_close(Iter *it)
{
    if (it && it->vt->close)
        it->vt->close(it);
}

/* Initialise the base part. */
static inline void iter_init(Iter *it, const IterVT *vt, IterCtx *ctx)
{
    it->vt = vt;
    it->doc = ITER_NONE;
    it->ctx = ctx;
    it->stats = (IterStats){0};
}

/* Context helpers (iter.c). */
void iter_ctx_init(IterCtx *ctx, QrArena *arena);
/* True when the query must stop (error already set, cancel flag, deadline
 * passed); records QR_ECANCELED / QR_ETIMEOUT in ctx->err the first time.
 * Cheap: reads the clock only every 64 calls (for checks once per block). */
bool iter_ctx_interrupted(IterCtx *ctx);
/* The same, reading the clock at every call: for loops that check once per
 * 4096 docs or per batch, whose 64 calls can be seconds apart (a doc of an
 * OR over hundreds of prefixes costs microseconds). */
bool iter_ctx_interrupted_now(IterCtx *ctx);
/* Record an error (first wins) — for iterator implementations. */
void iter_ctx_fail(IterCtx *ctx, QrCode code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* An iterator over a sorted array of doc ids (borrowed); used for tests, for
 * materialized bitmaps and for B-tree ranges.  Arena-allocated. */
Iter *iter_array_new(IterCtx *ctx, const DocId *docs, size_t n);
/* Every doc in [0, n_docs). */
Iter *iter_all_new(IterCtx *ctx, DocId n_docs);
/* Nothing. */
Iter *iter_empty_new(IterCtx *ctx);

#endif
