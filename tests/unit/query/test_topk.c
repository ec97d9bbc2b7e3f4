/*
 * test_topk.c — the top-k heap, and the pruned paths (topk_wand, topk_and)
 * against exhaustive collection over the OR / AND iterator trees.
 *
 * Thousands of random cases: 1-5 terms of random density over 1-3 segments
 * sharing one TopK (offsets, sometimes visited out of order), k in {1, 10,
 * 100}, tie-heavy scores (and whole cases of one constant score), loose and
 * tight bounds, block sizes 4..128, with and without a filter.  The pruned
 * hits must equal the exhaustive ones: same docs, same order, same float
 * bits.  Crafted skewed cases check that pruning really skips work.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "mock_iter.h"
#include "query/iter_ops.h"
#include "query/topk.h"
#include "store/util.h"

TestSuite(topk, .init = mock_setup, .fini = mock_teardown);

static void assert_same_hits(TopK *want, TopK *got, uint64_t seed)
{
    topk_sorted(want);
    topk_sorted(got);
    cr_assert_eq(got->n, want->n, "seed %lu: %d hits, want %d", (unsigned long)seed, got->n,
                 want->n);
    for (int i = 0; i < want->n; i++) {
        cr_assert_eq(got->hits[i].doc, want->hits[i].doc,
                     "seed %lu: hit %d is doc %ld (%.9g), want doc %ld (%.9g)",
                     (unsigned long)seed, i, (long)got->hits[i].doc, (double)got->hits[i].score,
                     (long)want->hits[i].doc, (double)want->hits[i].score);
        cr_assert(mock_same_bits(got->hits[i].score, want->hits[i].score),
                  "seed %lu: hit %d score %.9g want %.9g", (unsigned long)seed, i,
                  (double)got->hits[i].score, (double)want->hits[i].score);
    }
}

/* ---- the heap ---- */

static int cmp_hit(const void *a, const void *b)
{
    const TopHit *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return (x->doc > y->doc) - (x->doc < y->doc);
}

Test(topk, heap_matches_sorting)
{
    static const float pool[] = {0.5f, 1.0f, 1.0f, 2.0f, 3.25f};
    for (uint64_t seed = 1; seed <= 500; seed++) {
        qr_arena_reset(mock_arena);
        uint64_t rng = seed;
        int k = (int)mock_rand_below(&rng, 25);
        int m = (int)mock_rand_below(&rng, 200);
        TopHit *all = qr_arena_alloc(mock_arena, sizeof *all * (size_t)(m + 1));
        for (int i = 0; i < m; i++) /* distinct docs, shuffled */
            all[i] = (TopHit){.score = pool[mock_rand_below(&rng, 5)], .doc = i * 3};
        for (int i = m - 1; i > 0; i--) {
            int j = (int)mock_rand_below(&rng, (uint64_t)i + 1);
            TopHit t = all[i];
            all[i] = all[j];
            all[j] = t;
        }
        TopK *t = topk_new(&mock_ctx, k);
        cr_assert(t);
        for (int i = 0; i < m; i++) {
            topk_offer(t, all[i].doc, all[i].score);
            if (i == m / 2) { /* sorting mid-way must not break later offers */
                topk_sorted(t);
                float thr = topk_threshold(t);
                if (t->n == k && k > 0)
                    cr_assert_eq(thr, t->hits[t->n - 1].score);
            }
        }
        cr_assert_not(topk_offer(t, 99999, NAN));
        qsort(all, (size_t)m, sizeof *all, cmp_hit);
        topk_sorted(t);
        int want_n = m < k ? m : k;
        cr_assert_eq(t->n, want_n, "seed %lu", (unsigned long)seed);
        for (int i = 0; i < want_n; i++) {
            cr_assert_eq(t->hits[i].doc, all[i].doc, "seed %lu hit %d", (unsigned long)seed, i);
            cr_assert_eq(t->hits[i].score, all[i].score);
        }
        if (k == 0)
            cr_assert_eq(topk_threshold(t), INFINITY);
        else if (m < k)
            cr_assert_eq(topk_threshold(t), -INFINITY);
    }
    cr_assert_null(topk_new(&mock_ctx, -1));
    cr_assert_eq(mock_ctx.err.code, QR_EINVAL);
}

/* ---- random cases: pruned == exhaustive ---- */

#define MAX_TERMS 5
#define MAX_SEGS 3

typedef struct Seg {
    DocId U, off;
    MockList terms[MAX_TERMS];
    int bs[MAX_TERMS];
    float slack[MAX_TERMS];
    bool has_filter;
    MockList filter;
    int filter_bs;
} Seg;

static void gen_seg(Seg *s, uint64_t *rng, int n, bool one_score, float the_score)
{
    static const double dens[] = {0.003, 0.03, 0.15, 0.4, 0.8, 1.0};
    static const int bss[] = {4, 8, 16, 128};
    for (int i = 0; i < n; i++) {
        double d = dens[mock_rand_below(rng, 6)];
        MockScores kind = (MockScores)(mock_rand_below(rng, 4) % 3); /* ties twice as often */
        s->terms[i] = mock_list_random(mock_arena, rng, s->U, d, kind);
        if (one_score)
            for (size_t j = 0; j < s->terms[i].n; j++)
                s->terms[i].scores[j] = the_score;
        s->bs[i] = bss[mock_rand_below(rng, 4)];
        s->slack[i] = mock_rand_below(rng, 5) == 0 ? 0.3f : 0.0f;
    }
    s->has_filter = mock_rand_below(rng, 5) < 2;
    if (s->has_filter) {
        s->filter = mock_list_random(mock_arena, rng, s->U, dens[mock_rand_below(rng, 6)], 0);
        s->filter_bs = bss[mock_rand_below(rng, 4)];
    }
}

static void open_terms(Seg *s, int n, Iter **terms, Iter **filter)
{
    for (int i = 0; i < n; i++) {
        terms[i] = mock_iter_from_list(&mock_ctx, &s->terms[i], s->bs[i], s->slack[i], true);
        cr_assert(terms[i]);
    }
    *filter = s->has_filter ? mock_iter_from_list(&mock_ctx, &s->filter, s->filter_bs, 0.0f, false)
                            : NULL;
}

static void run_case(uint64_t seed, bool conj)
{
    static const int ks[] = {1, 10, 100};
    qr_arena_reset(mock_arena);
    uint64_t rng = seed * 0x9E3779B97F4A7C15ULL + (conj ? 17 : 0);
    int k = ks[mock_rand_below(&rng, 3)];
    int n = 1 + (int)mock_rand_below(&rng, conj ? 4 : MAX_TERMS);
    int n_segs = 1 + (int)mock_rand_below(&rng, MAX_SEGS);
    bool one_score = mock_rand_below(&rng, 8) == 0;
    Seg segs[MAX_SEGS];
    int order[MAX_SEGS];
    DocId off = 0;
    for (int s = 0; s < n_segs; s++) {
        segs[s].U = 1 + (DocId)mock_rand_below(&rng, seed % 10 == 0 ? 6000 : 1500);
        segs[s].off = off;
        off += segs[s].U;
        gen_seg(&segs[s], &rng, n, one_score, 1.25f);
        order[s] = s;
    }
    if (mock_rand_below(&rng, 4) == 0) /* segments out of offset order */
        for (int s = n_segs - 1; s > 0; s--) {
            int j = (int)mock_rand_below(&rng, (uint64_t)s + 1), t = order[s];
            order[s] = order[j];
            order[j] = t;
        }
    TopK *want = topk_new(&mock_ctx, k), *got = topk_new(&mock_ctx, k);
    cr_assert(want && got);

    /* Brute force, independent of topk.c: every matching doc, sorted. */
    size_t n_all = 0;
    for (int x = 0; x < n_segs; x++)
        n_all += (size_t)segs[x].U;
    TopHit *all = qr_arena_alloc(mock_arena, sizeof *all * (n_all + 1));
    size_t m = 0;
    for (int x = 0; x < n_segs; x++) {
        Seg *s = &segs[x];
        for (DocId d = 0; d < s->U; d++) {
            if (s->has_filter && mock_list_find(&s->filter, d) < 0)
                continue;
            int c = 0;
            float sc = 0.0f;
            for (int i = 0; i < n; i++) {
                long j = mock_list_find(&s->terms[i], d);
                if (j >= 0) {
                    c++;
                    sc += s->terms[i].scores[j];
                }
            }
            if (conj ? c == n : c > 0)
                all[m++] = (TopHit){.score = sc, .doc = d + s->off};
        }
    }
    qsort(all, m, sizeof *all, cmp_hit);
    TopK brute = {.hits = all, .k = k, .n = (int)(m < (size_t)k ? m : (size_t)k),
                  .is_sorted = true};

    for (int x = 0; x < n_segs; x++) {
        Seg *s = &segs[order[x]];
        Iter *terms[MAX_TERMS + 1], *filter;
        open_terms(s, n, terms, &filter);
        Iter *root;
        if (conj) {
            if (filter)
                terms[n] = filter;
            root = iter_and_new(&mock_ctx, terms, n + (filter != NULL));
        } else {
            root = iter_or_new(&mock_ctx, terms, n, 1);
            if (filter) {
                Iter *both[2] = {root, filter};
                root = iter_and_new(&mock_ctx, both, 2);
            }
        }
        cr_assert_eq(topk_collect_all(root, s->off, want), QR_OK);

        open_terms(s, n, terms, &filter);
        int rc = conj ? topk_and(&mock_ctx, terms, n, filter, s->off, got)
                      : topk_wand(&mock_ctx, terms, n, filter, s->off, got);
        cr_assert_eq(rc, QR_OK, "seed %lu", (unsigned long)seed);
        for (int i = 0; i < n; i++)
            cr_assert_eq(mock_counters(terms[i])->violations, 0,
                         "seed %lu: the pruned path broke the iterator contract",
                         (unsigned long)seed);
        if (filter)
            cr_assert_eq(mock_counters(filter)->violations, 0, "seed %lu", (unsigned long)seed);
    }
    assert_same_hits(&brute, want, seed);
    assert_same_hits(&brute, got, seed);
}

Test(topk, wand_equals_exhaustive_or)
{
    for (uint64_t seed = 1; seed <= 4000; seed++)
        run_case(seed, false);
}

Test(topk, and_equals_exhaustive_and)
{
    for (uint64_t seed = 1; seed <= 3000; seed++)
        run_case(seed, true);
}

/* ---- pruning does skip work ---- */

static MockList list_of(DocId n_docs, DocId step, float low, float high, DocId n_high)
{
    MockList l = {.docs = qr_arena_alloc(mock_arena, sizeof(DocId) * (size_t)n_docs),
                  .scores = qr_arena_alloc(mock_arena, sizeof(float) * (size_t)n_docs)};
    cr_assert(l.docs && l.scores);
    for (DocId i = 0; i < n_docs; i++) {
        l.docs[i] = i * step;
        l.scores[i] = i < n_high ? high : low;
    }
    l.n = (size_t)n_docs;
    return l;
}

/* One common term: after the first block fills the heap, every later block's
 * bound is below the threshold (equal = 0) or equal to it, with larger docs,
 * which lose the tie (equal = 1: one doc of every block scores as high as the
 * heap's worst).  The last doc scores higher still, so the whole-list bound
 * alone cannot end the query: the blocks themselves must be skipped. */
Test(topk, single_term_skips_blocks)
{
    for (int equal = 0; equal <= 1; equal++) {
        qr_arena_reset(mock_arena);
        MockList l = list_of(100000, 1, 0.5f, 2.0f, 20);
        for (size_t i = 5; equal && i < l.n; i += 128)
            l.scores[i] = 2.0f;
        l.scores[l.n - 1] = 3.0f;
        Iter *t = mock_iter_from_list(&mock_ctx, &l, 128, 0.0f, true);
        TopK *got = topk_new(&mock_ctx, 10), *want = topk_new(&mock_ctx, 10);
        cr_assert_eq(topk_wand(&mock_ctx, &t, 1, NULL, 0, got), QR_OK);
        cr_assert_eq(topk_collect_all(mock_iter_from_list(&mock_ctx, &l, 128, 0.0f, true), 0, want),
                     QR_OK);
        assert_same_hits(want, got, (uint64_t)equal);
        cr_assert_eq(got->hits[0].doc, 99999);
        cr_assert_eq(want->stats.docs_scored, 100000);
        uint64_t blocks = (100000 + 127) / 128;
        cr_assert_leq(got->stats.docs_scored, 256, "scored %lu",
                      (unsigned long)got->stats.docs_scored);
        cr_assert_geq(got->stats.windows_skipped, blocks - 2, "skipped %lu of %lu windows",
                      (unsigned long)got->stats.windows_skipped,
                      (unsigned long)got->stats.windows);
        cr_assert_leq(mock_counters(t)->score_calls, 256);
        cr_assert_leq(t->stats.blocks_decoded, 2);
        cr_assert_geq(t->stats.blocks_skipped, blocks - 2);
    }
}

/* A rare high-scoring term and a common low-scoring one: once the heap holds
 * rare-term docs, the common term becomes non-essential and is only probed. */
Test(topk, common_term_becomes_non_essential)
{
    MockList common = list_of(200000, 1, 0.5f, 0.5f, 0);
    MockList rare = list_of(2000, 97, 4.0f, 4.0f, 0);
    Iter *t[2] = {mock_iter_from_list(&mock_ctx, &common, 128, 0.0f, true),
                  mock_iter_from_list(&mock_ctx, &rare, 128, 0.0f, true)};
    TopK *got = topk_new(&mock_ctx, 10), *want = topk_new(&mock_ctx, 10);
    cr_assert_eq(topk_wand(&mock_ctx, t, 2, NULL, 0, got), QR_OK);
    Iter *r[2] = {mock_iter_from_list(&mock_ctx, &common, 128, 0.0f, true),
                  mock_iter_from_list(&mock_ctx, &rare, 128, 0.0f, true)};
    cr_assert_eq(topk_collect_all(iter_or_new(&mock_ctx, r, 2, 1), 0, want), QR_OK);
    assert_same_hits(want, got, 0);
    cr_assert_lt(got->stats.docs_scored, 200, "scored %lu", (unsigned long)got->stats.docs_scored);
    cr_assert_lt(mock_counters(t[0])->score_calls, 200);
    cr_assert_lt(t[0]->stats.docs_returned, 4000, "common term moved to %lu docs",
                 (unsigned long)t[0]->stats.docs_returned);
}

Test(topk, conjunction_skips_windows)
{
    MockList a = list_of(100000, 1, 1.0f, 5.0f, 30);
    MockList b = list_of(50000, 2, 1.0f, 1.0f, 0);
    a.scores[99998] = 5.5f; /* the whole-list bound alone cannot end the query */
    Iter *t[2] = {mock_iter_from_list(&mock_ctx, &a, 128, 0.0f, true),
                  mock_iter_from_list(&mock_ctx, &b, 128, 0.0f, true)};
    TopK *got = topk_new(&mock_ctx, 10), *want = topk_new(&mock_ctx, 10);
    cr_assert_eq(topk_and(&mock_ctx, t, 2, NULL, 0, got), QR_OK);
    Iter *r[2] = {mock_iter_from_list(&mock_ctx, &a, 128, 0.0f, true),
                  mock_iter_from_list(&mock_ctx, &b, 128, 0.0f, true)};
    cr_assert_eq(topk_collect_all(iter_and_new(&mock_ctx, r, 2), 0, want), QR_OK);
    assert_same_hits(want, got, 0);
    cr_assert_eq(want->stats.docs_scored, 50000);
    cr_assert_lt(got->stats.docs_scored, 200, "scored %lu", (unsigned long)got->stats.docs_scored);
    cr_assert_gt(got->stats.windows_skipped, 300, "skipped %lu of %lu windows",
                 (unsigned long)got->stats.windows_skipped, (unsigned long)got->stats.windows);
}

/* Segments share the threshold: the second segment is pruned by the first. */
Test(topk, threshold_carries_across_segments)
{
    MockList hi = list_of(1000, 1, 8.0f, 8.0f, 0);
    MockList lo = list_of(100000, 1, 1.0f, 1.0f, 0);
    TopK *got = topk_new(&mock_ctx, 10);
    Iter *a = mock_iter_from_list(&mock_ctx, &hi, 128, 0.0f, true);
    cr_assert_eq(topk_wand(&mock_ctx, &a, 1, NULL, 0, got), QR_OK);
    Iter *b = mock_iter_from_list(&mock_ctx, &lo, 128, 0.0f, true);
    cr_assert_eq(topk_wand(&mock_ctx, &b, 1, NULL, 1000, got), QR_OK);
    cr_assert_eq(mock_counters(b)->score_calls, 0);
    cr_assert_eq(b->stats.blocks_decoded, 0);
    topk_sorted(got);
    cr_assert_eq(got->hits[9].doc, 9);
}

Test(topk, cancel_and_bad_arguments)
{
    MockList l = list_of(100000, 1, 1.0f, 1.0f, 0);
    atomic_bool cancel = true;
    mock_ctx.cancel = &cancel;
    Iter *t = mock_iter_from_list(&mock_ctx, &l, 128, 0.0f, true);
    TopK *got = topk_new(&mock_ctx, 10);
    cr_assert_eq(topk_wand(&mock_ctx, &t, 1, NULL, 0, got), QR_ECANCELED);
    cr_assert_eq(topk_and(&mock_ctx, &t, 1, NULL, 0, got), QR_ECANCELED);
    cr_assert_eq(topk_collect_all(t, 0, got), QR_ECANCELED);
    mock_ctx.cancel = NULL;
    qr_error_clear(&mock_ctx.err);
    cr_assert_eq(topk_wand(&mock_ctx, NULL, 2, NULL, 0, got), QR_EINVAL);
    qr_error_clear(&mock_ctx.err);
    cr_assert_eq(topk_wand(&mock_ctx, &t, 1, NULL, 0, NULL), QR_EINVAL);
    qr_error_clear(&mock_ctx.err);
    cr_assert_eq(topk_collect_all(NULL, 0, got), QR_EINVAL);
    /* k == 0 and no terms: nothing, and fine */
    TopK *none = topk_new(&mock_ctx, 0);
    Iter *u = mock_iter_from_list(&mock_ctx, &l, 128, 0.0f, true);
    cr_assert_eq(topk_wand(&mock_ctx, &u, 1, NULL, 0, none), QR_OK);
    cr_assert_eq(none->n, 0);
    cr_assert_eq(topk_wand(&mock_ctx, NULL, 0, NULL, 0, got), QR_OK);
    cr_assert_eq(topk_and(&mock_ctx, NULL, 0, NULL, 0, got), QR_OK);
}

Test(topk, a_passed_deadline_stops_within_4096_docs)
{
    /* one block (no per-block checks): only the loop's own check every
     * 4096 docs sees the clock.  It read it one call in 64, so a query whose
     * docs are slow (an OR of 676 prefixes) ran 262,144 docs, seconds, past
     * its deadline; now every such check reads it */
    MockList l = list_of(100000, 1, 1.0f, 1.0f, 0);
    mock_ctx.deadline_ns = 1; /* long passed */
    Iter *t = mock_iter_from_list(&mock_ctx, &l, 1 << 20, 0.0f, true);
    TopK *got = topk_new(&mock_ctx, 10);
    cr_assert_eq(topk_collect_all(t, 0, got), QR_ETIMEOUT);
    cr_assert_leq(got->stats.docs_scored, 4096, "%llu docs scored past the deadline",
                  (unsigned long long)got->stats.docs_scored);
    /* a deadline ahead: the clock is read once per 4096 docs, not less */
    qr_error_clear(&mock_ctx.err);
    mock_ctx.deadline_ns = qr_now_ns() + 3600 * 1000000000ull;
    mock_ctx.clock_reads = 0;
    Iter *u = mock_iter_from_list(&mock_ctx, &l, 1 << 20, 0.0f, true);
    TopK *all = topk_new(&mock_ctx, 10);
    cr_assert_eq(topk_collect_all(u, 0, all), QR_OK);
    cr_assert_geq(mock_ctx.clock_reads, 100000 / 4096);
    mock_ctx.deadline_ns = 0;
}
