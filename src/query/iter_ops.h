/*
 * iter_ops.h — iterator combinators the planner composes: AND, OR (and
 * at-least-k), AND-NOT, required+optional, phrase, boost, constant score,
 * and a counting fast path.
 *
 * Layer: query/.  Calls index/iter.h and the store/ base kit only.
 *
 * Every combinator obeys index/iter.h exactly: it starts at ITER_NONE, yields
 * ascending docs, returns ITER_END at the end (again and again), forgives
 * advance(t) with t <= doc by returning doc, counts the docs it produces in
 * stats.docs_returned, and stops at ITER_END when a child records an error in
 * the IterCtx (the caller checks ctx->err once).
 *
 * Ownership: every combinator is allocated from ctx->arena.  It BORROWS its
 * children (they live in the same arena) and copies the `kids`/`terms`/
 * `offsets` arrays, so the caller's arrays may be temporary.  close() is not
 * forwarded: the caller closes the leaves it opened.
 *
 * Children must be fresh (doc == ITER_NONE) and distinct objects (an OR holding
 * the same Iter* twice would step it twice), except in AND and phrase, where
 * the same Iter* may appear more than once.
 *
 * Scoring: a combinator is a scoring iterator (vt->score != NULL) when at least
 * one child scores.  Scores must be finite and >= 0 (BM25 is), which is what
 * makes every bound below an upper bound in float arithmetic too: float
 * rounding is monotone, so summing bounds in the same order as the scores
 * (and treating an absent child as +0) never gives less than the score.
 * Sums are always taken in child order, so two evaluation strategies that both
 * follow this rule (an OR iterator and topk_wand, say) produce the same bits.
 *
 * Failure: constructors return NULL with ctx->err set (QR_ENOMEM / QR_ELIMIT
 * when the arena refuses, QR_EINVAL for bad arguments).  A NULL child makes the
 * constructor return NULL (its error is already in ctx->err).
 */
#ifndef QR_ITER_OPS_H
#define QR_ITER_OPS_H

#include <stdint.h>

#include "index/iter.h"

/* Intersection.  Leapfrog driven by the child with the lowest cost(); the
 * others are advanced to the lead's candidate.  score = sum of the scoring
 * children's scores in kid order; max_score = the same sum of max_scores;
 * block_max(t) = the same sum of block_max(t) with block_last = the min of the
 * children's block_last.  cost = min of the children's costs.
 * n == 0 gives an empty iterator; n == 1 returns kids[0] itself. */
Iter *iter_and_new(IterCtx *ctx, Iter **kids, int n);

/* Union (min_match <= 1) or at-least-min_match-of-n.  A binary heap of the
 * children keyed by their doc; a child is stepped only when it sits below the
 * target.  score = sum over the children ON the doc, in kid order (bit-for-bit
 * what topk_wand computes).  max_score / block_max: the sums over all scoring
 * children in kid order (block_last = the min).  cost = sum of the costs.
 * min_match > n gives an empty iterator; n == 1 with min_match <= 1 returns
 * kids[0] itself. */
Iter *iter_or_new(IterCtx *ctx, Iter **kids, int n, int min_match);

/* Docs of pos that neg does not have.  neg is advanced lazily, only to docs
 * of pos.  Scores, bounds and cost come from pos.  neg == NULL returns pos. */
Iter *iter_andnot_new(IterCtx *ctx, Iter *pos, Iter *neg);

/* Docs of req; score = req score + opt score when opt is on the doc (Lucene's
 * ReqOptSumScorer).  opt is advanced lazily from score(), so counting never
 * touches it.  max_score / block_max: req's + opt's. */
Iter *iter_req_opt_new(IterCtx *ctx, Iter *req, Iter *opt);

/* Phrase over positional iterators (vt->positions != NULL, else QR_EINVAL).
 * offsets[i] = position of term i within the phrase (gaps for stop words);
 * offsets == NULL means 0, 1, 2, ...
 *
 * A match is an assignment of one position p_i of term i to every term such
 * that, with r_i = p_i - offsets[i], max(r) - min(r) <= slop, where terms
 * that are the same word take distinct positions (Lucene's repeats: "to be
 * or not to be").  Two terms are the same word on a doc when they are the
 * same Iter* or their position lists there are equal (distinct words never
 * share a position), so a repeated word may come as one iterator or as two.
 * slop 0 is the exact phrase; slop N is Lucene's sloppy phrase (total
 * displacement <= N, any order within the slop).  A doc matches when a match
 * exists.  freq() = the number of distinct window starts min(r) over all
 * matches (for slop 0: the number of occurrences of the phrase).
 * score = sum of the terms' scores in term order; max_score / block_max: the
 * same sums of bounds.  n == 0 gives an empty iterator. */
Iter *iter_phrase_new(IterCtx *ctx, Iter **terms, const uint32_t *offsets, int n, int slop);

/* score, max_score and block_max multiplied by factor (finite, >= 0, else
 * QR_EINVAL).  freq and positions are forwarded. */
Iter *iter_boost_new(IterCtx *ctx, Iter *kid, float factor);

/* Docs of kid, every one scoring `score` (finite, >= 0, else QR_EINVAL): a
 * filter inside a scoring query.  The kid's own score is never computed. */
Iter *iter_const_score_new(IterCtx *ctx, Iter *kid, float score);

/* First doc >= target of `it`, which may already be there (then it does not
 * move): next() when target is the very next doc id, else advance().  The
 * "bring a lagging child up to the candidate" step every driver needs. */
static inline DocId iter_seek(Iter *it, DocId target)
{
    DocId d = it->doc;
    if (d >= target)
        return d;
    return d == target - 1 ? iter_next(it) : iter_advance(it, target);
}

/* Leapfrog intersection step: order[0] (the lead) sits on cand (or cand is
 * ITER_END); moves the others, and the lead when one overshoots, until all
 * n share a doc >= cand, and returns it (ITER_END when one runs out).  The
 * same Iter* may appear more than once.  Used by AND, phrase and topk_and. */
DocId iter_leapfrog(Iter **order, int n, DocId cand);

/* Number of docs from the current position on (the current doc, if it is a
 * real one, plus every later doc).  No scoring: a plain next loop, which the
 * combinators above keep free of score work.  Checks interruption every 4096
 * docs; on interruption or a child's error it stops early and the caller finds
 * the reason in it->ctx->err.  it == NULL counts 0. */
uint64_t iter_count(Iter *it);

#endif
