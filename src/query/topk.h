/*
 * topk.h — top-k retrieval: a bounded heap of hits, exhaustive collection,
 * and dynamic pruning (block-max MaxScore) for disjunctions and conjunctions
 * of scoring term iterators.
 *
 * Layer: query/.  Calls index/iter.h, query/iter_ops.h and the base kit.
 *
 * Order of hits: score descending, then doc ascending.  That is a strict
 * total order on distinct docs, so the k best hits are one well-defined set
 * whatever order docs are offered in; every function below computes exactly
 * that set with exactly the floats the iterator tree would compute.
 *
 * Exactness contract of the pruned paths (topk_wand, topk_and): the hits and
 * their scores are bit-for-bit those of topk_collect_all over
 * iter_or_new(terms) (resp. iter_and_new(terms)), intersected with `filter`.
 * It rests on iter.h's bounds being true upper bounds of score() as floats
 * and on scores being finite and >= 0 (see iter_ops.h).
 *
 * Segments: DocIds are per segment; the caller passes a TopK shared by every
 * segment of the query and each segment's doc_offset, and hits hold global
 * ids (doc + doc_offset).  The threshold the first segments reach prunes the
 * later ones.  Segments may come in any order.
 *
 * Errors: functions return QR_OK or the IterCtx's error code (interruption
 * is checked per window/block and every 4096 docs); the hits collected up to
 * an error stay in the TopK.  QR_EINVAL for bad arguments.
 */
#ifndef QR_TOPK_H
#define QR_TOPK_H

#include <stdbool.h>
#include <stdint.h>

#include "index/iter.h"

typedef struct TopHit {
    float score;
    DocId doc;
} TopHit; /* order: score desc, then doc asc */

/* Work counters for EXPLAIN ANALYZE and for tests that check pruning. */
typedef struct TopKStats {
    uint64_t docs_scored;     /* docs whose full score was computed */
    uint64_t docs_pruned;     /* candidates dropped on a partial score + bounds */
    uint64_t windows;         /* windows (runs of blocks) the pruned paths bounded */
    uint64_t windows_skipped; /* of those, skipped whole: their bound could not enter */
} TopKStats;

/* While collecting, hits[0..n) is a min-heap with the worst hit at hits[0];
 * after topk_sorted it is sorted best-first (a later offer re-heapifies). */
typedef struct TopK {
    TopHit *hits;     /* owns (arena): k slots */
    int k, n;         /* capacity and hits held */
    bool is_sorted;   /* hits are best-first, not a heap */
    TopKStats stats;
} TopK;

/* New empty TopK of capacity k >= 0 from ctx->arena; NULL with ctx->err set
 * (QR_EINVAL for k < 0, QR_ENOMEM / QR_ELIMIT). k == 0 accepts nothing. */
TopK *topk_new(IterCtx *ctx, int k);

/* The score a new doc must reach: -INFINITY until the heap is full, then the
 * worst held score.  A doc scoring exactly this enters only if its (global)
 * doc is smaller than the worst hit's doc. */
float topk_threshold(const TopK *t);

/* Offer a hit (global doc id).  True when it entered.  A full heap replaces
 * its worst hit when the new one is better in the order above (equal score:
 * the smaller doc wins, so with ascending docs a later equal score loses).
 * NaN scores never enter.  The same doc must not be offered twice. */
bool topk_offer(TopK *t, DocId doc, float score);

/* Sort hits best-first in place. */
void topk_sorted(TopK *t);

/* Exhaustive: offer every doc of root with its score (0 for a non-scoring
 * root), as doc + doc_offset.  root == NULL is QR_EINVAL. */
int topk_collect_all(Iter *root, DocId doc_offset, TopK *t);

/* Pruned top-k of the disjunction of terms (OR; score = sum, in term order,
 * of the matching terms' scores), restricted to docs of `filter` when it is
 * not NULL (a non-scoring iterator; its score is ignored).  Block-max
 * MaxScore; see topk.c for the algorithm and why it is exact.  Terms must be
 * fresh, distinct iterators of one segment (so must filter); they are left
 * wherever pruning stopped them. */
int topk_wand(IterCtx *ctx, Iter **terms, int n, Iter *filter, DocId doc_offset, TopK *t);

/* Pruned top-k of the conjunction of terms (every term required; score =
 * sum in term order), with the same filter, offset and exactness rules:
 * equal to topk_collect_all(iter_and_new(terms + filter)). */
int topk_and(IterCtx *ctx, Iter **terms, int n, Iter *filter, DocId doc_offset, TopK *t);

#endif
