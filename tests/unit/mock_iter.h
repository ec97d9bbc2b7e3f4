/*
 * mock_iter.h — a test-only scoring iterator over arrays, for property tests
 * of the combinators and of top-k pruning.  Linked into every unit test
 * binary; every symbol is prefixed mock_.
 *
 * It behaves like a block-compressed postings list: docs are cut into
 * blocks of `block_size`; a move that lands in a new block counts
 * stats.blocks_decoded (and checks iter_ctx_interrupted, ending the list when
 * it says so), an advance that jumps over whole blocks counts them in
 * stats.blocks_skipped.  max_score is the exact max of the scores and
 * block_max the exact max of each block (both times (1 + bound_slack)), so
 * bounds are tight and equal-score cases are as hard as they get.
 *
 * It also polices its callers: advance(t) with t <= doc, score/freq/
 * positions off a real doc, and block_max(t) with t < doc are counted in
 * mock_counters(it)->violations (the result is still the forgiving one).
 */
#ifndef QR_MOCK_ITER_H
#define QR_MOCK_ITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index/iter.h"

typedef float (*MockScoreFn)(DocId doc, uint32_t tf, void *arg);

typedef struct MockSpec {
    const DocId *docs;          /* n strictly ascending docs (copied) */
    const uint32_t *tfs;        /* n term frequencies, NULL = all 1 (copied) */
    const float *scores;        /* n scores, NULL = score_fn (copied) */
    MockScoreFn score_fn;       /* used when scores is NULL; NULL = tf as score */
    void *score_arg;
    const uint32_t *positions;  /* sum(tfs) ascending-per-doc positions, NULL = none (copied) */
    size_t n;
    int block_size;             /* docs per block, <= 0 = 128 */
    bool non_scoring;           /* vt->score/max_score/block_max == NULL: a filter */
    bool no_block_max;          /* vt->block_max == NULL (max_score is the bound) */
    float bound_slack;          /* bounds are max * (1 + slack): loose but valid */
} MockSpec;

typedef struct MockCounters {
    uint64_t score_calls;
    uint64_t block_max_calls;
    uint64_t violations;        /* contract breaches by the caller */
} MockCounters;

/* New iterator from ctx->arena (data copied there); NULL on OOM (ctx->err). */
Iter *mock_iter_new(IterCtx *ctx, const MockSpec *spec);
/* Counters of a mock iterator (NULL for anything else). */
const MockCounters *mock_counters(const Iter *it);
bool mock_iter_is(const Iter *it);

/* ---- helpers for property tests ---- */

/* A fresh arena and context per test: TestSuite(x, .init = mock_setup,
 * .fini = mock_teardown). */
extern QrArena *mock_arena;
extern IterCtx mock_ctx;
void mock_setup(void);
void mock_teardown(void);

/* Two floats with the same bits (exactness checks, not ==). */
bool mock_same_bits(float a, float b);

/* splitmix64: deterministic per seed. */
uint64_t mock_rand(uint64_t *state);
uint64_t mock_rand_below(uint64_t *state, uint64_t n); /* [0, n), n > 0 */
double mock_rand_unit(uint64_t *state);                /* [0, 1) */

/* Score distributions for random lists. */
typedef enum MockScores {
    MOCK_SCORES_TIES,   /* a few values per list (0.1f, 0.3f, 0.7f, ...): equal scores everywhere */
    MOCK_SCORES_SPREAD, /* continuous in (0, 4): sums sensitive to their order */
    MOCK_SCORES_SKEWED, /* mostly low, a few high: what pruning feeds on */
} MockScores;

/* A posting list model: docs ascending, tf >= 1, score per doc. */
typedef struct MockList {
    DocId *docs;    /* owns (arena) */
    uint32_t *tfs;  /* owns (arena) */
    float *scores;  /* owns (arena) */
    size_t n;
} MockList;

/* Random list over [0, universe), each doc present with probability
 * `density`, from arena `a`. */
MockList mock_list_random(QrArena *a, uint64_t *rng, DocId universe, double density,
                          MockScores kind);
/* Index of doc in l (binary search), -1 when absent. */
long mock_list_find(const MockList *l, DocId doc);
/* An iterator over l; NULL on OOM. */
Iter *mock_iter_from_list(IterCtx *ctx, const MockList *l, int block_size, float slack,
                          bool scoring);

#endif
