/*
 * topk.c — bounded top-k heap, exhaustive collection, and block-max MaxScore
 * for disjunctions (topk_wand) and conjunctions (topk_and).
 *
 * Layer: query/.  Calls index/iter.h, query/iter_ops.h, the base kit.
 *
 * WHY MAXSCORE AND NOT BLOCK-MAX WAND
 *   Both skip what cannot enter the heap.  BMW picks a pivot per step by
 *   sorting the terms on their current doc and summing bounds in that order;
 *   MaxScore (Turtle & Flood; block-max variant as in Lucene 9.9's
 *   MaxScoreBulkScorer) partitions the terms once per window into
 *   "non-essential" ones, whose bounds together cannot lift a doc into the
 *   heap, and "essential" ones, and only the essential terms' docs become
 *   candidates.  We need every score summed in TERM order (to reproduce the
 *   OR iterator's floats), and MaxScore keeps a fixed per-term array for the
 *   window, so every bound it tests is the same kind of term-order sum as the
 *   score itself; BMW would re-sort per pivot and sum bounds in doc order.
 *   MaxScore also does less per candidate for long queries (no re-sort), and
 *   with one term it degenerates into plain block skipping, the common case.
 *
 * THE ALGORITHM (topk_wand)
 *   The doc space of the segment is cut into windows [target, win_end]: the
 *   smallest block_last of the "lead" terms (those not non-essential by their
 *   whole-list max_score), at least 32 docs per lead term.  No lead term
 *   left means no remaining doc can enter: the segment is done.  Per window:
 *     1. ub[i] = max of block_max over term i's blocks meeting the window
 *        (0 when the term has no doc there): shallow, nothing is decoded.
 *     2. Sort terms by ub ascending; the longest prefix whose ub sum cannot
 *        enter the heap is non-essential.  All non-essential: skip the window.
 *     3. Candidates are the docs of essential terms (and of the filter, when
 *        given, in leapfrog).  cur[i] holds per term its exact score (term on
 *        the doc), 0 (essential term not on it) or ub[i] (non-essential, not
 *        yet looked at); the term-order sum of cur[] bounds the doc's score.
 *        Non-essential terms are advanced to the doc in descending ub order,
 *        each replacing its ub by its exact score or 0, until the bound cannot
 *        enter (pruned) or all are exact (the sum IS the score): offer it.
 *     4. When an offer raises the threshold, the partition grows in place;
 *        when everything became non-essential, the rest of the window goes.
 *
 * WHY IT IS EXACT (same docs, same floats, same ties as the exhaustive OR)
 *   a. Scores: a hit's score is the term-order float sum of the matching
 *      terms' scores with +0 for the others, which is what iter_or_new
 *      computes (adding +0.0f to a sum >= 0 changes no bit).
 *   b. Bounds: float addition rounds monotonically, so replacing any summand
 *      by a larger one never lowers a sum taken in the same order.  Every
 *      bound here is the term-order sum of per-term values each >= the exact
 *      per-term score (scores >= 0, bounds from iter.h >= scores), hence >=
 *      the doc's exact float score.  No reordered or double-precision sum is
 *      ever compared, so no rounding slack is needed and equality is exact.
 *   c. Entering: the result is the k best (score, global doc) pairs in the
 *      strict order score desc, doc asc.  The heap's worst entry only gets
 *      better over time, so a doc that cannot beat it now never will.
 *      tk_can_enter(bound, gmin) asks whether ANY doc >= gmin scoring <=
 *      bound could beat the worst: bound > worst, or bound == worst and gmin
 *      < worst doc.  Docs skipped by a window or partition are >= gmin and
 *      score <= bound, so they would have lost; the final offer compares the
 *      exact (score, doc).  Equal scores are thus handled exactly, also when
 *      segments arrive out of doc_offset order.
 *
 * topk_and: windows are the blocks of the cheapest term; the window bound is
 * the term-order sum of every term's window max; a window that cannot enter
 * is skipped without moving any term.  Inside, the leapfrog lead (the
 * cheapest of terms and filter) proposes docs; when the lead is a term, its
 * exact score with the others' window bounds (term-order sum again) must be
 * able to enter before the others are advanced to the doc; candidates all
 * members agree on are scored exactly and offered.  Same argument (b, c).
 *
 * Per doc the pruned paths allocate nothing and touch the heap only for a
 * doc that beats its worst hit; interruption is checked per window and
 * every 4096 candidates.
 */
#include "query/topk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "query/iter_ops.h"

/* ---- the heap ---- */

/* a is a worse hit than b (lower score, or equal score and larger doc). */
static inline bool tk_worse(const TopHit *a, const TopHit *b)
{
    return a->score < b->score || (a->score == b->score && a->doc > b->doc);
}

/* (score, doc) beats the worst hit w. */
static inline bool tk_beats(const TopHit *w, float score, DocId doc)
{
    return score > w->score || (score == w->score && doc < w->doc);
}

/* Could some doc >= gmin (global) scoring at most `bound` still enter? */
static inline bool tk_can_enter(const TopK *t, float bound, DocId gmin)
{
    if (t->n < t->k)
        return true;
    return t->k > 0 && tk_beats(&t->hits[0], bound, gmin);
}

static void tk_sift_down(TopHit *h, int n, int i)
{
    TopHit e = h[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && tk_worse(&h[c + 1], &h[c]))
            c++;
        if (!tk_worse(&h[c], &e))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = e;
}

static void tk_sift_up(TopHit *h, int i)
{
    TopHit e = h[i];
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!tk_worse(&e, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static void tk_heapify(TopK *t)
{
    for (int i = t->n / 2 - 1; i >= 0; i--)
        tk_sift_down(t->hits, t->n, i);
    t->is_sorted = false;
}

TopK *topk_new(IterCtx *ctx, int k)
{
    if (k < 0) {
        iter_ctx_fail(ctx, QR_EINVAL, "top-k size must be >= 0");
        qr_error_detail(&ctx->err, "found %d", k);
        return NULL;
    }
    TopK *t = qr_arena_calloc(ctx->arena, sizeof *t);
    TopHit *hits = t ? qr_arena_alloc(ctx->arena, sizeof *hits * (size_t)(k ? k : 1)) : NULL;
    if (!hits) {
        if (ctx->arena && qr_arena_over_cap(ctx->arena))
            iter_ctx_fail(ctx, QR_ELIMIT, "query exceeded its memory limit");
        else
            iter_ctx_fail(ctx, QR_ENOMEM, "out of memory allocating %d top hits", k);
        return NULL;
    }
    t->hits = hits;
    t->k = k;
    return t;
}

float topk_threshold(const TopK *t)
{
    if (t->k == 0)
        return INFINITY;
    if (t->n < t->k)
        return -INFINITY;
    return t->is_sorted ? t->hits[t->n - 1].score : t->hits[0].score;
}

bool topk_offer(TopK *t, DocId doc, float score)
{
    if (score != score) /* NaN */
        return false;
    if (t->is_sorted)
        tk_heapify(t);
    if (t->n < t->k) {
        t->hits[t->n] = (TopHit){.score = score, .doc = doc};
        tk_sift_up(t->hits, t->n++);
        return true;
    }
    if (t->k == 0 || !tk_beats(&t->hits[0], score, doc))
        return false;
    t->hits[0] = (TopHit){.score = score, .doc = doc};
    tk_sift_down(t->hits, t->n, 0);
    return true;
}

static int tk_cmp_best_first(const void *a, const void *b)
{
    const TopHit *x = a, *y = b;
    if (tk_worse(y, x))
        return -1;
    if (tk_worse(x, y))
        return 1;
    return 0;
}

void topk_sorted(TopK *t)
{
    qsort(t->hits, (size_t)t->n, sizeof *t->hits, tk_cmp_best_first);
    t->is_sorted = true;
}

/* ---- exhaustive ---- */

int topk_collect_all(Iter *root, DocId doc_offset, TopK *t)
{
    if (!root || !t)
        return QR_EINVAL;
    IterCtx *ctx = root->ctx;
    if (ctx->err.code != QR_OK)
        return ctx->err.code;
    if (t->is_sorted)
        tk_heapify(t);
    float (*score)(Iter *) = root->vt->score;
    uint64_t n = 0;
    for (DocId d = iter_next(root); d != ITER_END; d = iter_next(root)) {
        float s = score ? score(root) : 0.0f;
        DocId gd = d + doc_offset;
        if (tk_can_enter(t, s, gd))
            topk_offer(t, gd, s);
        if ((++n & 4095) == 0 && iter_ctx_interrupted_now(ctx))
            break;
    }
    t->stats.docs_scored += n;
    return ctx->err.code;
}

/* ---- shared by the pruned paths ---- */

/* Term-order float sum: THE order every score and bound is summed in. */
static inline float tk_sum(const float *v, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += v[i];
    return s;
}

/* Max of term k's block maxima over the blocks meeting [from, to] (from >=
 * k->doc).  `b0`/`l0`: block_max(from) when the caller already asked. */
static float tk_window_bound(Iter *k, DocId from, DocId to, float b0, DocId l0, float gmax)
{
    float m = b0;
    DocId last = l0, p = from;
    for (;;) {
        if (last >= to)
            return m;
        if (last < p) /* a broken block_last: fall back to the whole-list bound */
            return gmax;
        p = last + 1;
        float b = iter_block_max(k, p, &last);
        if (b > m)
            m = b;
    }
}

/* Common prologue of the pruned paths: argument checks, a heap again if the
 * TopK was sorted.  *idle: nothing to collect (no terms, k == 0). */
/* Bound of term k over [max(target, k->doc), to]: 0 when it has no doc
 * there.  b0 / l0: block_max at that start when the caller already asked
 * (l0 == ITER_NONE: not). */
static float tk_term_bound(Iter *k, DocId target, DocId to, float gmax, float b0, DocId l0)
{
    DocId from = k->doc > target ? k->doc : target;
    if (from > to || k->doc == ITER_END)
        return 0.0f;
    if (l0 == ITER_NONE)
        b0 = iter_block_max(k, from, &l0);
    return tk_window_bound(k, from, to, b0, l0, gmax);
}

static int tk_begin(IterCtx *ctx, Iter **terms, int n, TopK *t, const char *what, bool *idle)
{
    *idle = true;
    if (!ctx)
        return QR_EINVAL;
    if (ctx->err.code != QR_OK)
        return ctx->err.code;
    if (!t || n < 0 || (n > 0 && !terms)) {
        iter_ctx_fail(ctx, QR_EINVAL, "%s given %d terms", what, n);
        return QR_EINVAL;
    }
    for (int i = 0; i < n; i++) {
        if (!terms[i]) {
            iter_ctx_fail(ctx, QR_EINTERNAL, "%s given a null term iterator", what);
            return QR_EINTERNAL;
        }
    }
    if (t->is_sorted)
        tk_heapify(t);
    *idle = n == 0 || t->k == 0;
    return QR_OK;
}

static void *tk_scratch(IterCtx *ctx, size_t n)
{
    void *p = qr_arena_calloc(ctx->arena, n ? n : 1);
    if (!p) {
        if (ctx->arena && qr_arena_over_cap(ctx->arena))
            iter_ctx_fail(ctx, QR_ELIMIT, "query exceeded its memory limit");
        else
            iter_ctx_fail(ctx, QR_ENOMEM, "out of memory for top-k scratch");
    }
    return p;
}

/* Sort idx[0..n) by key ascending, ties by index (insertion sort: n is the
 * number of query terms). */
static void tk_sort_by(int *idx, int n, const float *key)
{
    for (int i = 1; i < n; i++) {
        int v = idx[i], j = i;
        for (; j > 0 && (key[idx[j - 1]] > key[v] || (key[idx[j - 1]] == key[v] && idx[j - 1] > v));
             j--)
            idx[j] = idx[j - 1];
        idx[j] = v;
    }
}

/* ---- block-max MaxScore ---- */

typedef struct MaxScore {
    IterCtx *ctx;
    TopK *t;
    DocId off;     /* doc_offset */
    Iter *filter;  /* borrows, may be NULL */
    int n;
    Iter **it;     /* borrows: terms in term order */
    float *gmax;   /* owns: whole-list bound per term (0 once exhausted) */
    float *ub;     /* owns: bound per term over the current window */
    float *cur;    /* owns: per term exact score, 0, or ub (see header) */
    float *tmp;    /* owns: scratch for prefix sums */
    float *bm0;    /* owns: block_max(target) of lead terms, this window */
    DocId *last0;  /* owns: its block_last, or ITER_NONE when not asked */
    int *by_g;     /* owns: terms by ascending gmax */
    int *by_ub;    /* owns: terms by ascending ub */
    int n_gness;   /* by_g[0..n_gness) never lead a window */
    int n_ness;    /* by_ub[0..n_ness) non-essential in this window */
    uint64_t tick; /* candidates, for the interruption check */
} MaxScore;

/* Term-order sum of bound[] over the first j terms of `by` (others 0). */
static float ms_prefix_sum(MaxScore *w, const int *by, const float *bound, int j)
{
    memset(w->tmp, 0, sizeof *w->tmp * (size_t)w->n);
    for (int x = 0; x < j; x++)
        w->tmp[by[x]] = bound[by[x]];
    return tk_sum(w->tmp, w->n);
}

/* Longest prefix of `by` (at least lo, known safe) whose bounds together
 * cannot lift a doc >= gmin into the heap.  Prefix sums grow with the prefix
 * (monotone rounding), so a binary search finds it. */
static int ms_partition(MaxScore *w, const int *by, const float *bound, int lo, DocId gmin)
{
    if (w->t->n < w->t->k)
        return lo;
    int hi = w->n;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (!tk_can_enter(w->t, ms_prefix_sum(w, by, bound, mid), gmin))
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Score the candidates of window [target, win_end].  Returns false when the
 * query must stop (interrupted). */
static bool ms_window(MaxScore *w, DocId target, DocId win_end)
{
    TopK *t = w->t;
    Iter **it = w->it;
    const int *by = w->by_ub;
    int n = w->n, ness = w->n_ness;
    float *cur = w->cur;

    for (int x = 0; x < n; x++)
        cur[by[x]] = x < ness ? w->ub[by[x]] : 0.0f;
    for (int x = ness; x < n; x++)
        iter_seek(it[by[x]], target);

    for (;;) {
        if ((++w->tick & 4095) == 0 && iter_ctx_interrupted_now(w->ctx))
            return false;
        DocId d = ITER_END;
        for (int x = ness; x < n; x++)
            if (it[by[x]]->doc < d)
                d = it[by[x]]->doc;
        if (d > win_end || d == ITER_END)
            return true;
        if (w->filter) {
            DocId f = iter_seek(w->filter, d);
            if (f != d) { /* leapfrog: no candidate before the filter's doc */
                for (int x = ness; x < n; x++)
                    if (it[by[x]]->doc < f)
                        iter_advance(it[by[x]], f);
                continue;
            }
        }
        DocId gd = d + w->off;
        for (int x = ness; x < n; x++) {
            Iter *k = it[by[x]];
            if (k->doc == d)
                cur[by[x]] = iter_score(k);
        }
        /* Non-essential terms, largest bound first, while the doc may enter. */
        float s = tk_sum(cur, n);
        int x = ness;
        while (x > 0 && tk_can_enter(t, s, gd)) {
            Iter *k = it[by[--x]];
            cur[by[x]] = iter_seek(k, d) == d ? iter_score(k) : 0.0f;
            s = tk_sum(cur, n);
        }
        if (x > 0) {
            t->stats.docs_pruned++;
        } else { /* every term exact: s is the doc's score */
            t->stats.docs_scored++;
            if (tk_can_enter(t, s, gd) && topk_offer(t, gd, s) && t->n == t->k) {
                int grown = ms_partition(w, by, w->ub, ness, gd + 1);
                if (grown == n)
                    return true; /* nothing left in the window can enter */
                ness = w->n_ness = grown;
            }
        }
        for (x = 0; x < n; x++) {
            int i = by[x];
            if (x < ness) {
                cur[i] = w->ub[i];
            } else {
                cur[i] = 0.0f;
                if (it[i]->doc == d)
                    iter_next(it[i]);
            }
        }
    }
}

int topk_wand(IterCtx *ctx, Iter **terms, int n, Iter *filter, DocId doc_offset, TopK *t)
{
    bool idle;
    int rc = tk_begin(ctx, terms, n, t, "top-k disjunction", &idle);
    if (rc != QR_OK || idle)
        return rc;
    size_t nn = (size_t)n;
    MaxScore w = {.ctx = ctx, .t = t, .off = doc_offset, .filter = filter, .n = n, .it = terms};
    w.gmax = tk_scratch(ctx, sizeof *w.gmax * nn);
    w.ub = tk_scratch(ctx, sizeof *w.ub * nn);
    w.cur = tk_scratch(ctx, sizeof *w.cur * nn);
    w.tmp = tk_scratch(ctx, sizeof *w.tmp * nn);
    w.bm0 = tk_scratch(ctx, sizeof *w.bm0 * nn);
    w.last0 = tk_scratch(ctx, sizeof *w.last0 * nn);
    w.by_g = tk_scratch(ctx, sizeof *w.by_g * nn);
    w.by_ub = tk_scratch(ctx, sizeof *w.by_ub * nn);
    if (!w.gmax || !w.ub || !w.cur || !w.tmp || !w.bm0 || !w.last0 || !w.by_g || !w.by_ub)
        return ctx->err.code;
    for (int i = 0; i < n; i++) {
        w.gmax[i] = iter_max_score(terms[i]);
        w.by_g[i] = w.by_ub[i] = i;
    }
    tk_sort_by(w.by_g, n, w.gmax);

    DocId target = 0;
    while (target != ITER_END) {
        if (iter_ctx_interrupted(ctx))
            break;
        if (filter && filter->doc == ITER_END)
            break;
        DocId gmin = target + doc_offset;
        for (int i = 0; i < n; i++)
            if (terms[i]->doc == ITER_END)
                w.gmax[i] = 0.0f; /* exhausted: a smaller bound stays a bound */
        w.n_gness = ms_partition(&w, w.by_g, w.gmax, w.n_gness, gmin);

        /* Window: up to the first block end among the lead terms. */
        DocId win_end = ITER_END;
        int n_lead = 0;
        for (int i = 0; i < n; i++)
            w.last0[i] = ITER_NONE;
        for (int x = w.n_gness; x < n; x++) {
            Iter *k = terms[w.by_g[x]];
            if (k->doc == ITER_END)
                continue;
            int i = w.by_g[x];
            w.bm0[i] = iter_block_max(k, k->doc > target ? k->doc : target, &w.last0[i]);
            if (w.last0[i] < win_end)
                win_end = w.last0[i];
            n_lead++;
        }
        if (n_lead == 0)
            break; /* what is left matches only terms that cannot lift a doc in */
        if (n_lead > 1 && win_end - target < 32 * (DocId)n_lead)
            win_end = target + 32 * (DocId)n_lead - 1;

        /* Bound every term over the window and partition. */
        for (int i = 0; i < n; i++)
            w.ub[i] = tk_term_bound(terms[i], target, win_end, w.gmax[i], w.bm0[i], w.last0[i]);
        tk_sort_by(w.by_ub, n, w.ub);
        t->stats.windows++;
        w.n_ness = ms_partition(&w, w.by_ub, w.ub, 0, gmin);
        if (w.n_ness == n)
            t->stats.windows_skipped++;
        else if (!ms_window(&w, target, win_end))
            break;
        target = win_end == ITER_END ? ITER_END : win_end + 1;
    }
    return ctx->err.code;
}

/* ---- block-max conjunction ---- */

/* Term-order sum of every term's bound over [from, to] (0 for a term with no
 * doc there, which makes the sum a bound on the empty window too). */
static float and_window_bound(Iter **terms, int n, const float *gmax, float *ub, DocId from,
                              DocId to)
{
    for (int i = 0; i < n; i++)
        ub[i] = tk_term_bound(terms[i], from, to, gmax[i], 0.0f, ITER_NONE);
    return tk_sum(ub, n);
}

int topk_and(IterCtx *ctx, Iter **terms, int n, Iter *filter, DocId doc_offset, TopK *t)
{
    bool idle;
    int rc = tk_begin(ctx, terms, n, t, "top-k conjunction", &idle);
    if (rc != QR_OK || idle)
        return rc;
    size_t nn = (size_t)n;
    float *gmax = tk_scratch(ctx, sizeof *gmax * nn);
    float *ub = tk_scratch(ctx, sizeof *ub * nn);
    float *sc = tk_scratch(ctx, sizeof *sc * nn);
    Iter **order = tk_scratch(ctx, sizeof *order * (nn + 1));
    if (!gmax || !ub || !sc || !order)
        return ctx->err.code;

    /* Leapfrog order: terms and filter by ascending cost.  Windows follow the
     * blocks of the cheapest term `wl`. */
    int m = 0, wl = 0;
    for (int i = 0; i < n; i++) {
        gmax[i] = iter_max_score(terms[i]);
        if (iter_cost(terms[i]) < iter_cost(terms[wl]))
            wl = i;
        order[m++] = terms[i];
    }
    if (filter)
        order[m++] = filter;
    for (int i = 1; i < m; i++) {
        Iter *v = order[i];
        uint64_t c = iter_cost(v);
        int j = i;
        for (; j > 0 && iter_cost(order[j - 1]) > c; j--)
            order[j] = order[j - 1];
        order[j] = v;
    }
    float gsum = tk_sum(gmax, n);
    int lead = -1; /* index of order[0] among the terms (-1: the filter leads) */
    for (int i = 0; i < n; i++)
        if (terms[i] == order[0])
            lead = i;

    uint64_t tick = 0;
    DocId target = 0;
    while (target != ITER_END) {
        if (iter_ctx_interrupted(ctx))
            break;
        if (!tk_can_enter(t, gsum, target + doc_offset))
            break;
        Iter *L = terms[wl];
        if (L->doc == ITER_END)
            break;
        DocId win_end;
        iter_block_max(L, L->doc > target ? L->doc : target, &win_end);
        if (win_end < target)
            win_end = target;
        float bound = INFINITY; /* bounds only pay off once the heap can reject */
        if (t->n == t->k) {
            bound = and_window_bound(terms, n, gmax, ub, target, win_end);
            t->stats.windows++;
            if (!tk_can_enter(t, bound, target + doc_offset)) {
                t->stats.windows_skipped++;
                target = win_end == ITER_END ? ITER_END : win_end + 1;
                continue;
            }
        }
        DocId d = iter_seek(order[0], target);
        bool cut = false;
        while (d <= win_end && d != ITER_END) {
            if ((++tick & 4095) == 0 && iter_ctx_interrupted_now(ctx))
                return ctx->err.code;
            DocId gd = d + doc_offset;
            if (lead >= 0 && bound != INFINITY) {
                /* The lead's score and the others' window bounds first: most
                 * lead docs die here, before the others are advanced. */
                float keep = ub[lead];
                ub[lead] = iter_score(terms[lead]);
                float partial = tk_sum(ub, n);
                ub[lead] = keep;
                if (!tk_can_enter(t, partial, gd)) {
                    t->stats.docs_pruned++;
                    d = iter_next(order[0]);
                    continue;
                }
            }
            DocId c = iter_leapfrog(order, m, d);
            if (c != d) { /* all sit on c now: look at it from the top */
                d = c;
                continue;
            }
            for (int i = 0; i < n; i++)
                sc[i] = iter_score(terms[i]);
            float s = tk_sum(sc, n);
            t->stats.docs_scored++;
            if (tk_can_enter(t, s, gd) && topk_offer(t, gd, s) && t->n == t->k) {
                if (bound == INFINITY) /* the heap just filled up: bound the rest */
                    bound = and_window_bound(terms, n, gmax, ub, d + 1, win_end);
                if (!tk_can_enter(t, bound, gd + 1)) {
                    cut = true; /* the rest of the window cannot enter */
                    break;
                }
            }
            d = iter_next(order[0]);
        }
        if (cut || d <= win_end)
            target = win_end == ITER_END ? ITER_END : win_end + 1;
        else
            target = d; /* the lead has no doc before d (ITER_END: done) */
    }
    return ctx->err.code;
}
