/*
 * test_postings.c — postings codec round-trips, iterator conformance against a
 * brute-force model, block-max bounds, and damaged input (run under ASan too).
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index/postings.h"
#include "store/mem.h"

/* ---- deterministic random numbers ---- */

static uint64_t rng_state;
static void rng_seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ull + 1; }
static uint64_t rng_u64(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint32_t rng_below(uint32_t n) { return n ? (uint32_t)(rng_u64() % n) : 0; }

/* ---- the model: what a term holds ---- */

typedef struct Model {
    uint32_t n;
    uint32_t *docs, *freqs, *lens;
    uint32_t *pos_start; /* index into pos per doc */
    uint32_t *pos;
    size_t pos_n;
} Model;

typedef enum { GAPS_DENSE, GAPS_RANDOM, GAPS_SPARSE, GAPS_HUGE, GAPS_TOP } GapKind;
typedef enum { TF_ONE, TF_SMALL, TF_HUGE } TfKind;

static void model_free(Model *m)
{
    free(m->docs);
    free(m->freqs);
    free(m->lens);
    free(m->pos_start);
    free(m->pos);
    memset(m, 0, sizeof *m);
}

/* n docs; positions only when tf stays small enough to hold them. */
static void model_make(Model *m, uint32_t n, GapKind gk, TfKind tk, bool positions)
{
    memset(m, 0, sizeof *m);
    m->n = n;
    m->docs = malloc(n * sizeof *m->docs + 4);
    m->freqs = malloc(n * sizeof *m->freqs + 4);
    m->lens = malloc(n * sizeof *m->lens + 4);
    m->pos_start = malloc(n * sizeof *m->pos_start + 4);
    uint64_t d = 0;
    if (gk == GAPS_TOP)
        d = (uint64_t)UINT32_MAX - (uint64_t)n * 3; /* ends near the largest doc id */
    else if (gk == GAPS_HUGE)
        d = rng_below(1000);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t gap;
        switch (gk) {
        case GAPS_DENSE: gap = rng_below(10) == 0 ? 2 : 1; break;
        case GAPS_RANDOM: gap = 1 + rng_below(20); break;
        case GAPS_SPARSE: gap = 1 + rng_below(5000); break;
        case GAPS_HUGE: gap = 1 + rng_u64() % ((UINT32_MAX - 2000) / (n + 1)); break;
        default: gap = 1 + rng_below(3); break;
        }
        if (i == 0)
            gap = gk == GAPS_RANDOM ? rng_below(50) : 0;
        d += gap;
        if (gk == GAPS_TOP && i == n - 1)
            d = UINT32_MAX;
        m->docs[i] = (uint32_t)d;
        switch (tk) {
        case TF_ONE: m->freqs[i] = 1; break;
        case TF_SMALL: m->freqs[i] = 1 + (rng_below(4) ? rng_below(3) : rng_below(40)); break;
        default: m->freqs[i] = rng_below(3) ? 1 + rng_below(5) : 1 + (uint32_t)(rng_u64() >> 33);
        }
        if (tk == TF_HUGE && i == n / 2)
            m->freqs[i] = UINT32_MAX;
        m->lens[i] = 1 + rng_below(rng_below(8) ? 30 : 3000);
    }
    if (positions) {
        size_t total = 0;
        for (uint32_t i = 0; i < n; i++)
            total += m->freqs[i];
        m->pos = malloc(total * sizeof *m->pos + 4);
        size_t k = 0;
        for (uint32_t i = 0; i < n; i++) {
            m->pos_start[i] = (uint32_t)k;
            uint32_t p = rng_below(rng_below(10) ? 50 : 100000);
            for (uint32_t j = 0; j < m->freqs[i]; j++) {
                m->pos[k++] = p;
                p += rng_below(6) ? 1 + rng_below(8) : rng_below(2) ? 0 : rng_below(70000);
            }
        }
        m->pos_n = total;
    }
}

/* ---- encoding helpers ---- */

typedef struct Enc {
    QrBuf docs, pos;
    TermPostings tp;
} Enc;

/* Encode m after a decoy term, so offsets are not zero. */
static void enc_model(Enc *e, const Model *m, bool positions)
{
    QrError err;
    qr_error_clear(&err);
    qr_buf_init(&e->docs);
    qr_buf_init(&e->pos);
    PostingsWriter *w = postw_new(positions);
    cr_assert(w);
    TermPostings decoy;
    postw_begin_term(w);
    uint32_t dp[2] = {3, 9};
    cr_assert_eq(postw_add(w, 7, 2, dp, 5, &err), 0);
    cr_assert_eq(postw_end_term(w, &e->docs, &e->pos, &decoy, &err), 0);
    postw_begin_term(w);
    for (uint32_t i = 0; i < m->n; i++)
        cr_assert_eq(postw_add(w, m->docs[i], m->freqs[i], m->pos ? m->pos + m->pos_start[i] : NULL,
                               m->lens[i], &err),
                     0, "add doc %u: %s", i, err.message);
    cr_assert_eq(postw_end_term(w, &e->docs, &e->pos, &e->tp, &err), 0, "%s", err.message);
    postw_free(w);
    cr_assert_eq(e->tp.df, m->n);
    uint64_t ttf = 0;
    for (uint32_t i = 0; i < m->n; i++)
        ttf += m->freqs[i];
    cr_assert_eq(e->tp.total_tf, ttf);
    cr_assert_eq(e->tp.docs_off + e->tp.docs_len, e->docs.len);
}

static void enc_free(Enc *e)
{
    qr_buf_free(&e->docs);
    qr_buf_free(&e->pos);
}

/* A model and its encoding: what most tests start from. */
typedef struct Fixture {
    Model m;
    Enc e;
} Fixture;

static void fx_make(Fixture *f, uint64_t seed, uint32_t df, GapKind gk, TfKind tk, bool pos)
{
    rng_seed(seed);
    model_make(&f->m, df, gk, tk, pos);
    enc_model(&f->e, &f->m, pos);
}

static void fx_free(Fixture *f)
{
    enc_free(&f->e);
    model_free(&f->m);
}

static PostScorer test_scorer(const uint32_t *norms, uint32_t n_docs)
{
    return (PostScorer){.idf = 2.25f, .k1 = 1.2f, .b = 0.75f, .avgdl = 12.5f, .weight = 1.5f,
                        .norms = norms, .n_docs = n_docs};
}

/* norms for every doc id up to the model's last (scoring tests only use
 * small ids); docs of the model get their lens, the others random. */
static uint32_t *model_norms(const Model *m, uint32_t *n_docs)
{
    uint32_t n = m->n ? m->docs[m->n - 1] + 1 : 1;
    uint32_t *norms = malloc(n * sizeof *norms);
    for (uint32_t i = 0; i < n; i++)
        norms[i] = 1 + rng_below(100);
    for (uint32_t i = 0; i < m->n; i++)
        norms[m->docs[i]] = m->lens[i];
    *n_docs = n;
    return norms;
}

static Iter *open_it(IterCtx *ctx, const Enc *e, const PostScorer *sc, bool want_pos)
{
    Iter *it = post_iter_open(ctx, e->docs.data, e->docs.len, e->pos.data, e->pos.len, &e->tp,
                              sc, want_pos);
    cr_assert(it);
    return it;
}

/* A fresh arena (caller frees it) and context, and an iterator over f. */
static Iter *fx_open(const Fixture *f, QrArena **a, IterCtx *ctx, const PostScorer *sc, bool pos)
{
    *a = qr_arena_new(0);
    iter_ctx_init(ctx, *a);
    return open_it(ctx, &f->e, sc, pos);
}

/* Check the iterator's current doc against model index i. */
static void check_at(Iter *it, const Model *m, uint32_t i, bool want_pos)
{
    cr_assert_eq(it->doc, (DocId)m->docs[i], "doc %lld want %u (index %u)", (long long)it->doc,
                 m->docs[i], i);
    cr_assert_eq(it->vt->freq(it), m->freqs[i], "freq at index %u", i);
    if (want_pos && m->pos) {
        uint32_t n;
        const uint32_t *p = it->vt->positions(it, &n);
        cr_assert_eq(n, m->freqs[i]);
        cr_assert(p);
        cr_assert(memcmp(p, m->pos + m->pos_start[i], n * sizeof *p) == 0, "positions at %u", i);
    }
}

/* First model index with doc >= t, or n. */
static uint32_t model_lower(const Model *m, uint64_t t)
{
    uint32_t lo = 0, hi = m->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (m->docs[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void full_scan(const Enc *e, const Model *m, bool want_pos)
{
    QrArena *a = qr_arena_new(0);
    IterCtx ctx;
    iter_ctx_init(&ctx, a);
    Iter *it = open_it(&ctx, e, NULL, want_pos);
    cr_assert_eq(it->doc, ITER_NONE);
    cr_assert_eq(iter_cost(it), m->n);
    for (uint32_t i = 0; i < m->n; i++) {
        cr_assert_eq(iter_next(it), (DocId)m->docs[i], "index %u of %u", i, m->n);
        check_at(it, m, i, want_pos);
        cr_assert_geq(iter_cost(it), m->n - i - 1);
    }
    cr_assert_eq(iter_next(it), ITER_END);
    cr_assert_eq(iter_next(it), ITER_END);
    cr_assert_eq(iter_advance(it, 5), ITER_END);
    cr_assert_eq(it->doc, ITER_END);
    cr_assert_eq(iter_cost(it), 0);
    cr_assert_eq(ctx.err.code, QR_OK, "%s", ctx.err.message);
    cr_assert_eq(it->stats.docs_returned, m->n);
    iter_close(it);
    qr_arena_free(a);
}

/* ---- round trips ---- */

Test(postings, roundtrip_edges)
{
    static const uint32_t dfs[] = {1, 2, 3, 127, 128, 129, 255, 256, 257, 383, 384, 1000, 4099};
    for (size_t di = 0; di < sizeof dfs / sizeof *dfs; di++)
        for (int gk = GAPS_DENSE; gk <= GAPS_TOP; gk++)
            for (int tk = TF_ONE; tk <= TF_HUGE; tk++)
                for (int wp = 0; wp < 2; wp++) {
                    bool pos = wp && tk != TF_HUGE;
                    Fixture f;
                    fx_make(&f, di * 1000 + gk * 100 + tk * 10 + wp, dfs[di], gk, tk, pos);
                    full_scan(&f.e, &f.m, pos);
                    full_scan(&f.e, &f.m, false);
                    fx_free(&f);
                }
}

Test(postings, many_positions)
{
    rng_seed(77);
    Model m;
    model_make(&m, 300, GAPS_RANDOM, TF_SMALL, false);
    for (uint32_t i = 0; i < m.n; i++)
        m.freqs[i] = i == 150 ? 70000 : 1 + rng_below(300);
    size_t total = 0;
    for (uint32_t i = 0; i < m.n; i++)
        total += m.freqs[i];
    m.pos = malloc(total * sizeof *m.pos);
    size_t k = 0;
    for (uint32_t i = 0; i < m.n; i++) {
        m.pos_start[i] = (uint32_t)k;
        uint32_t p = 0;
        for (uint32_t j = 0; j < m.freqs[i]; j++)
            m.pos[k++] = p += rng_below(3);
    }
    m.pos_n = total;
    Enc e;
    enc_model(&e, &m, true);
    full_scan(&e, &m, true);
    enc_free(&e);
    model_free(&m);
}

Test(postings, empty_term_and_writer_errors)
{
    QrError err;
    qr_error_clear(&err);
    PostingsWriter *w = postw_new(true);
    QrBuf d, p;
    qr_buf_init(&d);
    qr_buf_init(&p);
    TermPostings tp;
    postw_begin_term(w);
    cr_assert_eq(postw_end_term(w, &d, &p, &tp, &err), 0);
    cr_assert_eq(tp.df, 0);
    cr_assert_eq(d.len, 0);

    QrArena *a = qr_arena_new(0);
    IterCtx ctx;
    iter_ctx_init(&ctx, a);
    uint32_t norms[4] = {1, 2, 3, 4};
    PostScorer sc = test_scorer(norms, 4);
    Iter *it = post_iter_open(&ctx, d.data, d.len, p.data, p.len, &tp, &sc, true);
    cr_assert(it);
    DocId last;
    cr_assert_eq(iter_block_max(it, 0, &last), 0);
    cr_assert_eq(last, ITER_END);
    cr_assert_eq(iter_cost(it), 0);
    cr_assert_eq(iter_next(it), ITER_END);
    cr_assert_eq(iter_advance(it, 3), ITER_END);
    cr_assert_eq(ctx.err.code, QR_OK);

    uint32_t pos[3] = {1, 2, 3};
    postw_begin_term(w);
    cr_assert_eq(postw_add(w, 5, 1, pos, 1, &err), 0);
    cr_assert_eq(postw_add(w, 5, 1, pos, 1, &err), QR_EINVAL);
    postw_begin_term(w);
    qr_error_clear(&err);
    cr_assert_eq(postw_add(w, 5, 0, pos, 1, &err), QR_EINVAL);
    postw_begin_term(w);
    qr_error_clear(&err);
    uint32_t bad[2] = {5, 4};
    cr_assert_eq(postw_add(w, 5, 2, bad, 1, &err), QR_EINVAL);
    postw_begin_term(w);
    qr_error_clear(&err);
    cr_assert_eq(postw_add(w, 5, 1, pos, 1, &err), 0);
    cr_assert_eq(postw_add(w, 6, 1, NULL, 1, &err), QR_EINVAL);
    qr_error_clear(&err);
    cr_assert_eq(postw_end_term(w, &d, &p, &tp, &err), QR_EINVAL);

    /* a term stored without positions in a positional writer */
    postw_begin_term(w);
    qr_error_clear(&err);
    cr_assert_eq(postw_add(w, 2, 3, NULL, 1, &err), 0);
    cr_assert_eq(postw_end_term(w, &d, &p, &tp, &err), 0);
    cr_assert_eq(tp.pos_len, 0);
    it = post_iter_open(&ctx, d.data, d.len, p.data, p.len, &tp, NULL, true);
    cr_assert_eq(iter_next(it), 2);
    cr_assert_eq(it->vt->freq(it), 3);
    uint32_t n = 9;
    cr_assert_null(it->vt->positions(it, &n));
    cr_assert_eq(n, 0);
    cr_assert_eq(ctx.err.code, QR_OK);
    qr_arena_free(a);
    postw_free(w);
    postw_free(NULL);
    qr_buf_free(&d);
    qr_buf_free(&p);
}

/* ---- conformance against the model ---- */

static void advance_every_target(const Model *m, const Enc *e, bool want_pos)
{
    QrArena *a = qr_arena_new(0);
    IterCtx ctx;
    iter_ctx_init(&ctx, a);
    uint64_t last = m->docs[m->n - 1];
    for (uint64_t t = 0; t <= last + 2; t++) {
        Iter *it = open_it(&ctx, e, NULL, want_pos);
        uint32_t i = model_lower(m, t);
        DocId got = iter_advance(it, (DocId)t);
        if (i == m->n) {
            cr_assert_eq(got, ITER_END, "target %llu", (unsigned long long)t);
        } else {
            cr_assert_eq(got, (DocId)m->docs[i], "target %llu", (unsigned long long)t);
            check_at(it, m, i, want_pos);
            /* next after advance continues in order */
            if (i + 1 < m->n) {
                cr_assert_eq(iter_next(it), (DocId)m->docs[i + 1]);
                check_at(it, m, i + 1, want_pos);
            }
        }
        qr_arena_reset(a);
    }
    cr_assert_eq(ctx.err.code, QR_OK);
    qr_arena_free(a);
}

Test(postings, advance_every_target)
{
    static const uint32_t dfs[] = {1, 5, 127, 128, 129, 300, 700};
    for (size_t di = 0; di < sizeof dfs / sizeof *dfs; di++)
        for (int gk = GAPS_DENSE; gk <= GAPS_RANDOM; gk++) {
            Fixture f;
            fx_make(&f, di * 31 + gk, dfs[di], gk, TF_SMALL, true);
            advance_every_target(&f.m, &f.e, di % 2 == 0);
            fx_free(&f);
        }
}

/* Random next/advance sequences; checks against the model each step. */
static void random_ops(const Model *m, const Enc *e, int rounds, bool scoring)
{
    QrArena *a = qr_arena_new(0);
    IterCtx ctx;
    iter_ctx_init(&ctx, a);
    uint32_t n_docs = 0, *norms = scoring ? model_norms(m, &n_docs) : NULL;
    PostScorer sc = test_scorer(norms, n_docs);
    uint64_t last = m->docs[m->n - 1];
    for (int r = 0; r < rounds; r++) {
        Iter *it = open_it(&ctx, e, scoring ? &sc : NULL, true);
        int64_t i = -1; /* model index of doc */
        uint64_t span = (last + 1) / (1 + rng_below(64)) + 1;
        for (int step = 0; step < 400; step++) {
            int op = (int)rng_below(10);
            DocId got, want;
            if (op < 4) {
                got = iter_next(it);
                if (i < (int64_t)m->n)
                    i++;
            } else {
                uint64_t base = it->doc == ITER_NONE ? 0 : (uint64_t)it->doc;
                uint64_t t = op < 7 ? base + 1 + rng_below(4) : base + 1 + rng_u64() % span;
                if (op == 9)
                    t = base > 3 ? base - rng_below(3) : base; /* t <= doc: forgiving */
                if (it->doc == ITER_END)
                    t = last + 5;
                got = iter_advance(it, (DocId)t);
                if (!(it->doc != ITER_NONE && op == 9 && i >= 0 && i < (int64_t)m->n &&
                      t <= m->docs[i])) {
                    uint32_t k = model_lower(m, t);
                    if (i < (int64_t)m->n)
                        i = k;
                }
            }
            want = i >= (int64_t)m->n ? ITER_END : (DocId)m->docs[i];
            cr_assert_eq(got, want, "round %d step %d op %d", r, step, op);
            cr_assert_eq(it->doc, want);
            if (want == ITER_END) {
                cr_assert_eq(iter_next(it), ITER_END);
                cr_assert_eq(iter_cost(it), 0);
                break;
            }
            cr_assert_geq(iter_cost(it), m->n - (uint32_t)i - 1);
            if (rng_below(3) == 0)
                check_at(it, m, (uint32_t)i, true);
            if (scoring) {
                float s = iter_score(it);
                float exact = bm25_term_score(&sc, m->freqs[i], m->lens[i]);
                cr_assert_eq(s, exact);
                cr_assert_geq(iter_max_score(it), s);
            }
        }
        qr_arena_reset(a);
    }
    cr_assert_eq(ctx.err.code, QR_OK, "%s", ctx.err.message);
    free(norms);
    qr_arena_free(a);
}

Test(postings, random_next_advance)
{
    for (int s = 0; s < 24; s++) {
        rng_seed(500 + s);
        uint32_t df = s % 3 == 0 ? 1 + rng_below(200) : 100 + rng_below(3000);
        Fixture f;
        fx_make(&f, 600 + s, df, s % 4 == 3 ? GAPS_SPARSE : (GapKind)(s % 2), TF_SMALL, true);
        random_ops(&f.m, &f.e, 30, true);
        random_ops(&f.m, &f.e, 10, false);
        fx_free(&f);
    }
}

Test(postings, skips_blocks_on_sparse_advance)
{
    Fixture f;
    fx_make(&f, 9, 20000, GAPS_DENSE, TF_ONE, false);
    QrArena *a;
    IterCtx ctx;
    Iter *it = fx_open(&f, &a, &ctx, NULL, false);
    uint32_t nb = (f.m.n + 127) / 128;
    for (uint32_t i = 0; i < f.m.n; i += 1000) {
        cr_assert_eq(iter_advance(it, f.m.docs[i]), (DocId)f.m.docs[i]);
        cr_assert_eq(it->vt->freq(it), 1);
    }
    cr_assert_gt(it->stats.blocks_skipped, 0);
    cr_assert_lt(it->stats.blocks_decoded, nb / 2);
    qr_arena_free(a);
    fx_free(&f);
}

/* ---- block-max bounds ---- */

static void check_bounds(const Model *m, const Enc *e)
{
    QrArena *a = qr_arena_new(0);
    IterCtx ctx;
    iter_ctx_init(&ctx, a);
    uint32_t n_docs, *norms = model_norms(m, &n_docs);
    PostScorer sc = test_scorer(norms, n_docs);
    Iter *it = open_it(&ctx, e, &sc, false);
    float ms = iter_max_score(it);
    /* walk the blocks as BMW does: block_max(t) then check every doc in [t, last] */
    DocId t = 0;
    uint32_t i = 0;
    while (i < m->n) {
        DocId before = it->doc, last;
        float bound = iter_block_max(it, t, &last);
        cr_assert_eq(it->doc, before, "block_max moved doc");
        cr_assert_geq(last, (DocId)m->docs[i]);
        cr_assert_leq(bound, ms * 1.0001f + 1e-6f);
        for (; i < m->n && (DocId)m->docs[i] <= last; i++) {
            float s = bm25_term_score(&sc, m->freqs[i], m->lens[i]);
            cr_assert_geq(bound, s, "doc %u score %g above its block bound %g", m->docs[i], s,
                          bound);
            cr_assert_geq(ms, s);
        }
        if (last == ITER_END)
            break;
        t = last + 1;
        /* move the iterator sometimes, as a real query would */
        if (rng_below(2) && i < m->n) {
            cr_assert_eq(iter_advance(it, m->docs[i]), (DocId)m->docs[i]);
            cr_assert_eq(iter_score(it), bm25_term_score(&sc, m->freqs[i], m->lens[i]));
        }
    }
    cr_assert_eq(i, m->n);
    DocId last;
    cr_assert_eq(iter_block_max(it, (DocId)m->docs[m->n - 1] + 1, &last), 0);
    cr_assert_eq(last, ITER_END);
    /* per-doc check from a fresh iterator: every doc's block bound covers it */
    qr_arena_reset(a);
    it = open_it(&ctx, e, &sc, false);
    for (uint32_t k = 0; k < m->n; k++) {
        cr_assert_eq(iter_next(it), (DocId)m->docs[k]);
        float bound = iter_block_max(it, it->doc, &last);
        cr_assert_geq(last, it->doc);
        cr_assert_geq(bound, iter_score(it));
    }
    cr_assert_eq(ctx.err.code, QR_OK, "%s", ctx.err.message);
    free(norms);
    qr_arena_free(a);
}

Test(postings, block_max_bounds)
{
    static const uint32_t dfs[] = {1, 60, 127, 128, 129, 1000, 5000};
    for (size_t di = 0; di < sizeof dfs / sizeof *dfs; di++)
        for (int tk = TF_ONE; tk <= TF_SMALL; tk++) {
            Fixture f;
            fx_make(&f, di * 7 + tk, dfs[di], GAPS_RANDOM, tk, false);
            check_bounds(&f.m, &f.e);
            fx_free(&f);
        }
    Fixture f; /* huge tfs: the float bound must still cover them */
    fx_make(&f, 4242, 2000, GAPS_RANDOM, TF_HUGE, false);
    check_bounds(&f.m, &f.e);
    fx_free(&f);
}

/* With at most three distinct tfs a block's Pareto frontier of (tf, len)
 * has at most three pairs, under the cap of POST_BLOCK_IMPACTS, so nothing
 * is rounded up: each block's bound is its best doc's score, and the
 * term's bound the best score of all.  Tfs above 255 take the frontier's
 * sorting path, the others its counting path. */
static void check_tight(uint64_t seed, uint32_t df, uint32_t tf_base)
{
    Fixture f;
    rng_seed(seed);
    model_make(&f.m, df, GAPS_RANDOM, TF_ONE, false);
    for (uint32_t i = 0; i < df; i++)
        f.m.freqs[i] = tf_base + rng_below(3);
    enc_model(&f.e, &f.m, false);
    QrArena *a = qr_arena_new(0);
    IterCtx ctx;
    iter_ctx_init(&ctx, a);
    uint32_t n_docs, *norms = model_norms(&f.m, &n_docs);
    PostScorer sc = test_scorer(norms, n_docs);
    Iter *it = open_it(&ctx, &f.e, &sc, false);
    float best_all = 0;
    DocId t = 0;
    uint32_t i = 0;
    while (i < f.m.n) {
        DocId last;
        float bound = iter_block_max(it, t, &last), best = 0;
        for (; i < f.m.n && (DocId)f.m.docs[i] <= last; i++) {
            float s = bm25_term_score(&sc, f.m.freqs[i], f.m.lens[i]);
            best = s > best ? s : best;
        }
        best_all = best > best_all ? best : best_all;
        cr_assert_leq(bound, best * 1.00001f + 1e-6f, "block ending at %u: bound %g, best %g",
                      last, bound, best);
        cr_assert_geq(bound, best);
        if (last == ITER_END)
            break;
        t = last + 1;
    }
    float ms = iter_max_score(it);
    cr_assert_leq(ms, best_all * 1.00001f + 1e-6f, "term bound %g, best %g", ms, best_all);
    cr_assert_geq(ms, best_all);
    free(norms);
    qr_arena_free(a);
    fx_free(&f);
}

Test(postings, block_max_bounds_are_tight)
{
    static const uint32_t dfs[] = {1, 100, 128, 1000, 5000};
    for (size_t di = 0; di < sizeof dfs / sizeof *dfs; di++) {
        check_tight(di + 1, dfs[di], 1);
        check_tight(di + 100, dfs[di], 254);
        check_tight(di + 200, dfs[di], 1000);
    }
}

/* ---- batch fill and cancellation ---- */

Test(postings, fill_matches_next)
{
    Fixture f;
    fx_make(&f, 11, 3000, GAPS_RANDOM, TF_SMALL, false);
    QrArena *a;
    IterCtx ctx;
    Iter *it = fx_open(&f, &a, &ctx, NULL, false);
    uint32_t *out = malloc(f.m.n * sizeof *out), k = 0;
    cr_assert_eq(iter_next(it), (DocId)f.m.docs[0]);
    out[k++] = f.m.docs[0];
    size_t got;
    while ((got = post_iter_fill(it, out + k, 1 + rng_below(300))) > 0) {
        k += (uint32_t)got;
        cr_assert_eq(it->doc, (DocId)f.m.docs[k - 1]);
        cr_assert_eq(it->vt->freq(it), f.m.freqs[k - 1]);
    }
    cr_assert_eq(k, f.m.n);
    cr_assert(memcmp(out, f.m.docs, f.m.n * sizeof *out) == 0);
    cr_assert_eq(it->stats.docs_returned, f.m.n);
    cr_assert(post_iter_is(it));
    free(out);
    qr_arena_free(a);
    fx_free(&f);
}

Test(postings, cancel_stops_per_block)
{
    Fixture f;
    fx_make(&f, 12, 5000, GAPS_DENSE, TF_ONE, false);
    QrArena *a;
    IterCtx ctx;
    Iter *it = fx_open(&f, &a, &ctx, NULL, false);
    atomic_bool cancel = false;
    ctx.cancel = &cancel;
    uint32_t n = 0;
    while (iter_next(it) != ITER_END)
        if (++n == 300)
            atomic_store(&cancel, true);
    cr_assert_lt(n, 300 + 128 + 1);
    cr_assert_eq(ctx.err.code, QR_ECANCELED);
    cr_assert_eq(iter_next(it), ITER_END);
    qr_arena_free(a);
    fx_free(&f);
}

/* ---- damaged input ---- */

/* Drive an iterator over damaged bytes in every way a query might; it must
 * not crash, must keep doc ids ascending, and must end. */
static int torture(const uint8_t *d, size_t dl, const uint8_t *p, size_t pl, const TermPostings *tp,
                   uint32_t n_docs, const uint32_t *norms)
{
    int errors = 0;
    QrArena *a = qr_arena_new(64 << 20);
    IterCtx ctx;
    iter_ctx_init(&ctx, a);
    PostScorer sc = test_scorer(norms, n_docs);
    for (int mode = 0; mode < 3; mode++) {
        Iter *it = post_iter_open(&ctx, d, dl, p, pl, tp, mode ? &sc : NULL, true);
        if (!it)
            break;
        DocId prev = -1;
        for (int step = 0; step < 100000; step++) {
            DocId got;
            if (mode == 2) {
                DocId last;
                iter_block_max(it, prev + 1, &last);
            }
            if (mode == 1 || rng_below(3))
                got = iter_next(it);
            else
                got = iter_advance(it, prev + 1 + rng_below(300));
            if (got == ITER_END)
                break;
            cr_assert_gt(got, prev, "doc ids must ascend even over damaged bytes");
            prev = got;
            (void)it->vt->freq(it);
            uint32_t n;
            const uint32_t *ps = it->vt->positions(it, &n);
            for (uint32_t k = 0; k < n; k++)
                (void)*(volatile const uint32_t *)&ps[k];
            if (mode)
                (void)iter_score(it);
        }
        cr_assert_eq(iter_next(it), ITER_END);
        cr_assert(ctx.err.code == QR_OK || ctx.err.code == QR_ECORRUPT, "%s", ctx.err.message);
        errors += ctx.err.code != QR_OK;
        qr_error_clear(&ctx.err);
        qr_arena_reset(a);
    }
    qr_arena_free(a);
    return errors;
}

/* Copy [off, off+len) into an exactly sized heap block so ASan sees every
 * stray read. */
static uint8_t *exact_copy(const uint8_t *src, size_t len)
{
    uint8_t *c = malloc(len ? len : 1);
    if (len)
        memcpy(c, src, len);
    return c;
}

Test(postings, corrupt_bytes_never_crash)
{
    static const uint32_t dfs[] = {3, 100, 128, 300, 2000};
    int errors = 0;
    for (size_t di = 0; di < sizeof dfs / sizeof *dfs; di++) {
        Fixture f;
        fx_make(&f, 900 + di, dfs[di], di % 2 ? GAPS_RANDOM : GAPS_DENSE, TF_SMALL, true);
        uint32_t n_docs, *norms = model_norms(&f.m, &n_docs);
        /* the term alone, exactly sized */
        TermPostings tp = f.e.tp;
        uint8_t *base_d = f.e.docs.data + tp.docs_off, *base_p = f.e.pos.data + tp.pos_off;
        size_t dl = tp.docs_len, pl = tp.pos_len;
        tp.docs_off = tp.pos_off = 0;
        for (int trial = 0; trial < 400; trial++) {
            uint8_t *d = exact_copy(base_d, dl), *p = exact_copy(base_p, pl);
            TermPostings t2 = tp;
            int kind = (int)rng_below(6);
            int flips = 1 + (int)rng_below(4);
            for (int fl = 0; fl < flips; fl++) {
                if (kind <= 2 && dl)
                    d[rng_below((uint32_t)dl)] ^= (uint8_t)(1u << rng_below(8));
                else if (kind == 3 && pl)
                    p[rng_below((uint32_t)pl)] = (uint8_t)rng_u64();
            }
            if (kind == 4)
                t2.docs_len = rng_below(t2.docs_len + 1);
            if (kind == 5) {
                switch (rng_below(4)) {
                case 0: t2.df = (uint32_t)rng_u64(); break;
                case 1: t2.df = rng_below(t2.df * 2 + 2); break;
                case 2: t2.pos_len = rng_below((uint32_t)pl + 1); break;
                default: t2.docs_off = rng_below(3); break;
                }
            }
            size_t dlen = kind == 4 ? t2.docs_len : dl;
            uint8_t *d2 = exact_copy(d, dlen);
            errors += torture(d2, dlen, p, pl, &t2, n_docs, norms);
            free(d2);
            free(d);
            free(p);
        }
        free(norms);
        fx_free(&f);
    }
    cr_assert_gt(errors, 1000, "damage went unnoticed too often (%d errors)", errors);
}

Test(postings, random_garbage_streams)
{
    rng_seed(31337);
    uint32_t norms[4096];
    for (int i = 0; i < 4096; i++)
        norms[i] = 1 + (uint32_t)i % 50;
    int errors = 0;
    for (int trial = 0; trial < 3000; trial++) {
        size_t dl = rng_below(600), pl = rng_below(600);
        uint8_t *d = malloc(dl ? dl : 1), *p = malloc(pl ? pl : 1);
        for (size_t i = 0; i < dl; i++)
            d[i] = (uint8_t)rng_u64();
        for (size_t i = 0; i < pl; i++)
            p[i] = (uint8_t)rng_u64();
        if (dl)
            d[0] = (uint8_t)(0x10 | rng_below(2) | (rng_below(2) << 2)); /* plausible flags */
        TermPostings tp = {.df = 1 + rng_below(rng_below(2) ? 127 : 2000), .total_tf = 0,
                           .docs_off = 0, .docs_len = (uint32_t)dl, .pos_off = 0, .pos_len = pl};
        errors += torture(d, dl, p, pl, &tp, 4096, norms);
        free(d);
        free(p);
    }
    cr_assert_gt(errors, 3000, "garbage went unnoticed too often (%d errors)", errors);
}

/* Found by tests/fuzz/segment_fuzz.c: damaged postings read without a scorer
 * (counting, bitmap leaves) handed out doc ids beyond the segment.  With a
 * doc limit, a block holding such an id is QR_ECORRUPT and the iterator
 * ends; without one (the raw codec) the ids come out as stored. */
Test(postings, doc_limit_reports_ids_beyond_the_segment)
{
    QrError err;
    qr_error_clear(&err);
    PostingsWriter *w = postw_new(false);
    QrBuf d, p;
    qr_buf_init(&d);
    qr_buf_init(&p);
    TermPostings tp;
    postw_begin_term(w);
    for (uint32_t doc = 0; doc < 300; doc += 3)
        cr_assert_eq(postw_add(w, doc, 1, NULL, 0, &err), 0);
    cr_assert_eq(postw_end_term(w, &d, &p, &tp, &err), 0);

    for (int limit = 0; limit < 2; limit++) {
        QrArena *a = qr_arena_new(0);
        IterCtx ctx;
        iter_ctx_init(&ctx, a);
        Iter *it = post_iter_open(&ctx, d.data, d.len, p.data, p.len, &tp, NULL, false);
        cr_assert(it);
        if (limit)
            post_iter_set_doc_limit(it, 200); /* the segment holds docs 0..199 */
        uint32_t seen = 0;
        DocId last = -1;
        for (DocId doc = iter_next(it); doc != ITER_END; doc = iter_next(it)) {
            last = doc;
            seen++;
        }
        if (limit) {
            cr_assert_eq(ctx.err.code, QR_ECORRUPT);
            cr_assert(strstr(ctx.err.message, "postings"), "%s", ctx.err.message);
            cr_assert_lt(last, 200);
            cr_assert_lt(seen, 100);
        } else {
            cr_assert_eq(ctx.err.code, QR_OK);
            cr_assert_eq(seen, 100);
            cr_assert_eq(last, 297);
        }
        qr_arena_free(a);
    }
    postw_free(w);
    qr_buf_free(&d);
    qr_buf_free(&p);
}

/* ---- impact frontiers against a brute-force model ---- */

/* Whether (tf, len) is on the frontier of v[0..n): no other distinct pair
 * has a tf at least as high and a len at least as short. */
static bool on_frontier(const PostImpact *v, size_t n, PostImpact p)
{
    for (size_t i = 0; i < n; i++)
        if ((v[i].tf != p.tf || v[i].len != p.len) && v[i].tf >= p.tf && v[i].len <= p.len)
            return false;
    return true;
}

Test(postings, impact_frontier_matches_brute_force)
{
    /* tf ranges on both sides of the small-tf path's limit (256), with
     * repeated pairs, ties in tf and in len, and a tf of 0 */
    static const uint32_t tf_max[] = {1, 2, 8, 255, 256, 300, 100000};
    static const uint32_t len_max[] = {1, 4, 50, 1u << 31};
    rng_seed(77);
    for (int round = 0; round < 3000; round++) {
        size_t n = 1 + rng_below(round % 10 == 0 ? 2000 : 140);
        uint32_t tm = tf_max[rng_below(7)], lm = len_max[rng_below(4)];
        PostImpact *v = malloc(n * sizeof *v), *orig = malloc(n * sizeof *orig);
        for (size_t i = 0; i < n; i++) {
            orig[i].tf = rng_below(tm) + (rng_below(20) != 0);
            orig[i].len = rng_below(lm);
            if (rng_below(50) == 0)
                orig[i].tf = tm; /* the largest tf, 256 included */
        }
        memcpy(v, orig, n * sizeof *v);
        size_t k = post_impact_frontier(v, n);
        size_t expect = 0;
        for (size_t i = 0; i < n; i++) {
            bool first = true; /* count each distinct frontier pair once */
            for (size_t j = 0; j < i; j++)
                if (orig[j].tf == orig[i].tf && orig[j].len == orig[i].len)
                    first = false;
            expect += first && on_frontier(orig, n, orig[i]);
        }
        cr_assert_eq(k, expect, "round %d: frontier of %zu pairs has %zu, expected %zu", round,
                     n, k, expect);
        for (size_t i = 0; i < k; i++) {
            cr_assert(on_frontier(orig, n, v[i]), "round %d: (%u, %u) is dominated", round,
                      v[i].tf, v[i].len);
            if (i)
                cr_assert(v[i].tf > v[i - 1].tf && v[i].len > v[i - 1].len,
                          "round %d: frontier not ascending at %zu", round, i);
        }
        free(v);
        free(orig);
    }
}
