/*
 * test_iter_ops.c — the combinators against brute-force models.
 *
 * Random expression trees (AND, OR, at-least-k, AND-NOT, req+opt, boost,
 * constant score) over mock posting lists of random density are walked with
 * random next/advance sequences; every doc, score (to the bit), cost,
 * block_max bound and stats counter is checked against a dense model of the
 * same tree.  Phrases are checked against a brute-force positional matcher
 * that enumerates every assignment of positions.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "mock_iter.h"
#include "query/iter_ops.h"

TestSuite(iter_ops, .init = mock_setup, .fini = mock_teardown);

/* ---- dense models ---- */

typedef struct Model {
    bool *has;    /* per doc of the universe */
    float *sc;    /* score per doc (valid where has) */
    bool scoring; /* the iterator is a scoring one */
} Model;

#define MAX_LEAVES 64

typedef struct Gen {
    uint64_t rng;
    DocId U;
    Iter *leaves[MAX_LEAVES];
    int n_leaves;
} Gen;

static Model model_new(DocId U)
{
    Model m = {.has = qr_arena_calloc(mock_arena, (size_t)U + 1),
               .sc = qr_arena_calloc(mock_arena, sizeof(float) * ((size_t)U + 1))};
    cr_assert(m.has && m.sc);
    return m;
}

static Iter *gen_leaf(Gen *g, Model *m)
{
    static const double dens[] = {0.0, 0.002, 0.02, 0.1, 0.3, 0.6, 0.95, 1.0};
    static const int bss[] = {1, 3, 8, 128};
    double d = dens[mock_rand_below(&g->rng, 8)];
    MockList l = mock_list_random(mock_arena, &g->rng, g->U, d, (MockScores)mock_rand_below(&g->rng, 3));
    bool scoring = mock_rand_below(&g->rng, 5) != 0;
    float slack = mock_rand_below(&g->rng, 3) == 0 ? 0.25f : 0.0f;
    Iter *it = mock_iter_from_list(&mock_ctx, &l, bss[mock_rand_below(&g->rng, 4)], slack, scoring);
    cr_assert(it);
    *m = model_new(g->U);
    m->scoring = scoring;
    for (size_t i = 0; i < l.n; i++) {
        m->has[l.docs[i]] = true;
        m->sc[l.docs[i]] = scoring ? l.scores[i] : 0.0f;
    }
    if (g->n_leaves < MAX_LEAVES)
        g->leaves[g->n_leaves++] = it;
    return it;
}

/* AND (conj) or at-least-mm OR of the children's models: docs, and scores
 * summed in child order over the children on the doc. */
static void model_bool(Model *m, const Model *km, int n, bool conj, int mm, DocId U)
{
    if (mm < 1)
        mm = 1;
    for (int i = 0; i < n && (conj || mm <= n); i++) /* mm > n: the (non-scoring) empty iterator */
        m->scoring |= km[i].scoring;
    for (DocId d = 0; d < U; d++) {
        int c = 0;
        float s = 0.0f;
        for (int i = 0; i < n; i++) {
            if (!km[i].has[d])
                continue;
            c++;
            if (km[i].scoring)
                s += km[i].sc[d];
        }
        m->has[d] = conj ? (n > 0 && c == n) : c >= mm;
        m->sc[d] = s;
    }
}

enum { OP_AND, OP_OR, OP_ATLEAST, OP_NOT, OP_REQOPT, OP_BOOST, OP_CONST, OP_COUNT };

static Iter *gen_tree(Gen *g, int depth, Model *m)
{
    if (depth == 0 || mock_rand_below(&g->rng, 4) == 0 || g->n_leaves > MAX_LEAVES - 6)
        return gen_leaf(g, m);
    int op = (int)mock_rand_below(&g->rng, OP_COUNT);
    DocId U = g->U;
    *m = model_new(U);
    if (op == OP_AND || op == OP_OR || op == OP_ATLEAST) {
        int n = (int)mock_rand_below(&g->rng, 5); /* 0..4 children */
        Iter *kids[4];
        Model km[4];
        for (int i = 0; i < n; i++)
            kids[i] = gen_tree(g, depth - 1, &km[i]);
        int mm = op == OP_ATLEAST ? (int)mock_rand_below(&g->rng, 5) : 1;
        Iter *it = op == OP_AND ? iter_and_new(&mock_ctx, kids, n)
                                : iter_or_new(&mock_ctx, kids, n, mm);
        cr_assert(it);
        model_bool(m, km, n, op == OP_AND, mm, U);
        return it;
    }
    if (op == OP_NOT || op == OP_REQOPT) {
        Model a, b;
        Iter *x = gen_tree(g, depth - 1, &a);
        Iter *y = gen_tree(g, depth - 1, &b);
        Iter *it = op == OP_NOT ? iter_andnot_new(&mock_ctx, x, y) : iter_req_opt_new(&mock_ctx, x, y);
        cr_assert(it);
        m->scoring = op == OP_NOT ? a.scoring : (a.scoring || b.scoring);
        for (DocId d = 0; d < U; d++) {
            if (op == OP_NOT) {
                m->has[d] = a.has[d] && !b.has[d];
                m->sc[d] = a.sc[d];
            } else {
                m->has[d] = a.has[d];
                float s = a.scoring ? a.sc[d] : 0.0f;
                if (b.has[d] && b.scoring)
                    s += b.sc[d];
                m->sc[d] = s;
            }
        }
        return it;
    }
    Model a;
    Iter *x = gen_tree(g, depth - 1, &a);
    float f = op == OP_BOOST ? (float)mock_rand_below(&g->rng, 7) * 0.75f : 1.5f;
    Iter *it = op == OP_BOOST ? iter_boost_new(&mock_ctx, x, f) : iter_const_score_new(&mock_ctx, x, f);
    cr_assert(it);
    m->scoring = true;
    for (DocId d = 0; d < U; d++) {
        m->has[d] = a.has[d];
        m->sc[d] = op == OP_BOOST ? (a.scoring ? a.sc[d] : 0.0f) * f : f;
    }
    return it;
}

/* Walk `it` with random moves and check everything against the model. */
static void walk_check(Gen *g, Iter *it, const Model *m, uint64_t seed)
{
    DocId U = g->U;
    cr_assert_eq(it->doc, ITER_NONE, "seed %lu", (unsigned long)seed);
    cr_assert_eq(iter_scores(it), m->scoring, "seed %lu", (unsigned long)seed);
    DocId cur = ITER_NONE;
    uint64_t produced = 0;
    DocId jump = 1 + (DocId)mock_rand_below(&g->rng, 64);
    for (;;) {
        int op = (int)mock_rand_below(&g->rng, 8);
        DocId target, got;
        if (op == 0 && cur != ITER_NONE && !mock_iter_is(it)) { /* forgiving: target <= doc */
            got = iter_advance(it, cur - (DocId)mock_rand_below(&g->rng, 3));
            cr_assert_eq(got, cur, "seed %lu", (unsigned long)seed);
            continue;
        }
        if (op < 5) {
            target = cur + 1;
            got = iter_next(it);
        } else {
            target = cur + 1 + (DocId)mock_rand_below(&g->rng, (uint64_t)jump);
            got = iter_advance(it, target);
        }
        DocId want = target < 0 ? 0 : target;
        while (want < U && !m->has[want])
            want++;
        if (want >= U)
            want = ITER_END;
        cr_assert_eq(got, want, "seed %lu: target %ld got %ld want %ld", (unsigned long)seed,
                     (long)target, (long)got, (long)want);
        cr_assert_eq(it->doc, got);
        if (got == ITER_END)
            break;
        produced++;
        cur = got;
        uint64_t left = 0;
        for (DocId d = cur + 1; d < U; d++)
            left += m->has[d];
        cr_assert_geq(iter_cost(it), left, "seed %lu", (unsigned long)seed);
        if (m->scoring) {
            float s = iter_score(it);
            cr_assert(mock_same_bits(s, m->sc[cur]), "seed %lu doc %ld: score %.9g want %.9g",
                      (unsigned long)seed, (long)cur, (double)s, (double)m->sc[cur]);
            cr_assert_geq(iter_max_score(it), s, "seed %lu", (unsigned long)seed);
            if (mock_rand_below(&g->rng, 4) == 0) {
                DocId t = cur + (DocId)mock_rand_below(&g->rng, 40), last;
                float b = iter_block_max(it, t, &last);
                cr_assert_eq(it->doc, cur, "block_max moved the iterator");
                cr_assert_geq(last, t, "seed %lu", (unsigned long)seed);
                for (DocId d = t; d <= last && d < U; d++)
                    cr_assert(!m->has[d] || m->sc[d] <= b,
                              "seed %lu: block_max(%ld) = %g < score %g of doc %ld",
                              (unsigned long)seed, (long)t, (double)b, (double)m->sc[d], (long)d);
            }
        }
    }
    cr_assert_eq(it->stats.docs_returned, produced, "seed %lu", (unsigned long)seed);
    cr_assert_eq(iter_next(it), ITER_END);
    cr_assert_eq(iter_advance(it, 7), ITER_END);
    cr_assert_eq(iter_next(it), ITER_END);
    cr_assert_eq(iter_cost(it), 0, "seed %lu: %s", (unsigned long)seed, it->vt->name);
    for (int i = 0; i < g->n_leaves; i++)
        cr_assert_eq(mock_counters(g->leaves[i])->violations, 0,
                     "seed %lu: a combinator broke the iterator contract (root %s)",
                     (unsigned long)seed, it->vt->name);
    cr_assert_eq(mock_ctx.err.code, QR_OK);
}

Test(iter_ops, random_trees_match_model)
{
    for (uint64_t seed = 1; seed <= 1500; seed++) {
        qr_arena_reset(mock_arena);
        Gen g = {.rng = seed * 7919};
        g.U = 1 + (DocId)mock_rand_below(&g.rng, seed % 10 == 0 ? 5000 : 600);
        Model m;
        Iter *it = gen_tree(&g, 1 + (int)(seed % 4), &m);
        walk_check(&g, it, &m, seed);
    }
}

/* Flat AND / OR / at-least-k with up to 24 children of very different sizes,
 * including empty ones and ones that end early. */
Test(iter_ops, flat_and_or_many_kids)
{
    for (uint64_t seed = 1; seed <= 400; seed++) {
        qr_arena_reset(mock_arena);
        Gen g = {.rng = seed * 104729};
        g.U = 1 + (DocId)mock_rand_below(&g.rng, 3000);
        int n = 1 + (int)mock_rand_below(&g.rng, 24); /* > 16: the heap-walk scorer */
        Iter *kids[24];
        Model km[24];
        for (int i = 0; i < n; i++) {
            kids[i] = gen_leaf(&g, &km[i]);
            if (mock_rand_below(&g.rng, 4) == 0) { /* ends early: drop the tail */
                DocId cut = (DocId)mock_rand_below(&g.rng, (uint64_t)g.U);
                for (DocId d = cut; d < g.U; d++)
                    km[i].has[d] = false;
            }
        }
        /* Rebuild the children whose model was cut, from the model. */
        for (int i = 0; i < n; i++) {
            MockList l = {.docs = qr_arena_alloc(mock_arena, sizeof(DocId) * (size_t)g.U),
                          .tfs = NULL,
                          .scores = qr_arena_alloc(mock_arena, sizeof(float) * (size_t)g.U)};
            for (DocId d = 0; d < g.U; d++)
                if (km[i].has[d]) {
                    l.docs[l.n] = d;
                    l.scores[l.n++] = km[i].sc[d];
                }
            kids[i] = mock_iter_from_list(&mock_ctx, &l, 8, 0.0f, km[i].scoring);
            g.leaves[i] = kids[i];
        }
        g.n_leaves = n;
        int op = (int)(seed % 3);
        int mm = op == 2 ? 1 + (int)mock_rand_below(&g.rng, (uint64_t)n + 1) : 1;
        Iter *it = op == 0 ? iter_and_new(&mock_ctx, kids, n)
                           : iter_or_new(&mock_ctx, kids, n, mm);
        Model m = model_new(g.U);
        model_bool(&m, km, n, op == 0, mm, g.U);
        walk_check(&g, it, &m, seed);
    }
}

Test(iter_ops, count_matches_model_and_stops_on_cancel)
{
    for (uint64_t seed = 1; seed <= 300; seed++) {
        qr_arena_reset(mock_arena);
        Gen g = {.rng = seed * 31337};
        g.U = 1 + (DocId)mock_rand_below(&g.rng, 20000);
        Model m;
        Iter *it = gen_tree(&g, 3, &m);
        uint64_t want = 0;
        for (DocId d = 0; d < g.U; d++)
            want += m.has[d];
        cr_assert_eq(iter_count(it), want, "seed %lu", (unsigned long)seed);
        cr_assert_eq(iter_count(it), 0);
    }
    /* A cancel flag stops a long count, and the reason is in the context. */
    qr_arena_reset(mock_arena);
    atomic_bool cancel = true;
    mock_ctx.cancel = &cancel;
    Iter *all = iter_all_new(&mock_ctx, 10000000);
    Iter *kids[2] = {all, iter_all_new(&mock_ctx, 5000000)};
    Iter *or = iter_or_new(&mock_ctx, kids, 2, 1);
    uint64_t n = iter_count(or);
    cr_assert_lt(n, 10000);
    cr_assert_eq(mock_ctx.err.code, QR_ECANCELED);
    mock_ctx.cancel = NULL;
}

Test(iter_ops, edge_cases)
{
    cr_assert_eq(iter_next(iter_and_new(&mock_ctx, NULL, 0)), ITER_END);
    cr_assert_eq(iter_next(iter_or_new(&mock_ctx, NULL, 0, 1)), ITER_END);
    DocId a[] = {1, 5, 9}, b[] = {5};
    Iter *x = iter_array_new(&mock_ctx, a, 3), *y = iter_array_new(&mock_ctx, b, 1);
    Iter *kids[2] = {x, y};
    cr_assert_eq(iter_next(iter_or_new(&mock_ctx, kids, 2, 3)), ITER_END); /* min_match > n */
    cr_assert_eq(iter_and_new(&mock_ctx, kids, 1), x);                      /* one child: itself */
    cr_assert_eq(iter_andnot_new(&mock_ctx, x, NULL), x);
    Iter *not = iter_andnot_new(&mock_ctx, x, y);
    cr_assert_not(iter_scores(not));
    cr_assert_eq(iter_next(not), 1);
    cr_assert_eq(iter_next(not), 9);
    cr_assert_eq(iter_next(not), ITER_END);
    cr_assert_eq(not->stats.docs_returned, 2);
    /* bad arguments */
    cr_assert_null(iter_boost_new(&mock_ctx, x, -1.0f));
    cr_assert_eq(mock_ctx.err.code, QR_EINVAL);
    qr_error_clear(&mock_ctx.err);
    cr_assert_null(iter_const_score_new(&mock_ctx, x, NAN));
    cr_assert_eq(mock_ctx.err.code, QR_EINVAL);
    qr_error_clear(&mock_ctx.err);
    Iter *nul[2] = {x, NULL};
    cr_assert_null(iter_and_new(&mock_ctx, nul, 2));
    cr_assert_neq(mock_ctx.err.code, QR_OK);
    qr_error_clear(&mock_ctx.err);
    /* a phrase over a list without positions */
    uint32_t offs[2] = {0, 1};
    cr_assert_null(iter_phrase_new(&mock_ctx, kids, offs, 2, 0));
    cr_assert_eq(mock_ctx.err.code, QR_EINVAL);
    qr_error_clear(&mock_ctx.err);
    /* an arena over its cap */
    QrArena *tiny = qr_arena_new(64);
    IterCtx c2;
    iter_ctx_init(&c2, tiny);
    Iter *big[64];
    for (int i = 0; i < 64; i++)
        big[i] = x;
    cr_assert_null(iter_or_new(&c2, big, 64, 1));
    cr_assert(c2.err.code == QR_ELIMIT || c2.err.code == QR_ENOMEM);
    qr_arena_free(tiny);
}

/* Boost and const score forward positions and bounds. */
Test(iter_ops, boost_and_const_score)
{
    DocId docs[] = {2, 4, 6};
    uint32_t tfs[] = {1, 2, 1}, pos[] = {7, 1, 3, 0};
    float sc[] = {1.0f, 3.0f, 2.0f};
    MockSpec s = {.docs = docs, .tfs = tfs, .scores = sc, .positions = pos, .n = 3, .block_size = 2};
    Iter *b = iter_boost_new(&mock_ctx, mock_iter_new(&mock_ctx, &s), 2.0f);
    cr_assert_eq(iter_max_score(b), 6.0f);
    cr_assert_eq(iter_advance(b, 3), 4);
    cr_assert_eq(iter_score(b), 6.0f);
    uint32_t n;
    const uint32_t *p = b->vt->positions(b, &n);
    cr_assert_eq(n, 2);
    cr_assert_eq(p[0], 1);
    cr_assert_eq(b->vt->freq(b), 2);
    DocId last;
    cr_assert_eq(iter_block_max(b, 5, &last), 4.0f);
    cr_assert_eq(last, 6);
    Iter *kid = mock_iter_new(&mock_ctx, &s);
    Iter *c = iter_const_score_new(&mock_ctx, kid, 0.5f);
    cr_assert_eq(iter_next(c), 2);
    cr_assert_eq(iter_score(c), 0.5f);
    cr_assert_eq(mock_counters(kid)->score_calls, 0); /* the kid is never scored */
    cr_assert_eq(iter_advance(c, 100), ITER_END);
    cr_assert_eq(iter_block_max(c, 100, &last), 0.0f);
    cr_assert_eq(last, ITER_END);
}

/* ---- phrases ---- */

#define PH_MAX_TERMS 8

typedef struct PhDoc {
    int len;
    int tok[16];
} PhDoc;

/* Brute force: the set of window starts min(r) over every assignment of
 * positions (distinct for terms of the same word) with span <= slop. */
typedef struct PhBrute {
    const PhDoc *doc;
    const int *word;
    const int64_t *off;
    const int *grp; /* same group = same word */
    int n, slop;
    int choice[PH_MAX_TERMS];
    bool start[64]; /* min(r) + 32 */
} PhBrute;

static void ph_brute_dfs(PhBrute *b, int i, int64_t lo, int64_t hi)
{
    if (i == b->n) {
        b->start[lo + 32] = true;
        return;
    }
    for (int p = 0; p < b->doc->len; p++) {
        if (b->doc->tok[p] != b->word[i])
            continue;
        bool clash = false;
        for (int j = 0; j < i; j++)
            clash |= b->grp[j] == b->grp[i] && b->choice[j] == p;
        if (clash)
            continue;
        int64_t r = p - b->off[i];
        int64_t nlo = i == 0 || r < lo ? r : lo, nhi = i == 0 || r > hi ? r : hi;
        if (nhi - nlo > b->slop)
            continue;
        b->choice[i] = p;
        ph_brute_dfs(b, i + 1, nlo, nhi);
    }
}

static uint32_t ph_brute(PhBrute *b)
{
    memset(b->start, 0, sizeof b->start);
    ph_brute_dfs(b, 0, 0, 0);
    uint32_t f = 0;
    for (int i = 0; i < 64; i++)
        f += b->start[i];
    return f;
}

/* Postings of `word` over docs, as a mock with positions. */
static Iter *ph_word_iter(const PhDoc *docs, int n_docs, int word, int bs, float *score_of)
{
    DocId *d = qr_arena_alloc(mock_arena, sizeof *d * (size_t)n_docs);
    uint32_t *tf = qr_arena_alloc(mock_arena, sizeof *tf * (size_t)n_docs);
    uint32_t *pos = qr_arena_alloc(mock_arena, sizeof *pos * (size_t)n_docs * 16);
    float *sc = qr_arena_alloc(mock_arena, sizeof *sc * (size_t)n_docs);
    size_t n = 0, np = 0;
    for (int i = 0; i < n_docs; i++) {
        uint32_t c = 0;
        for (int p = 0; p < docs[i].len; p++)
            if (docs[i].tok[p] == word) {
                pos[np++] = (uint32_t)p;
                c++;
            }
        if (!c)
            continue;
        d[n] = i;
        tf[n] = c;
        sc[n] = score_of[i] = 0.1f * (float)c + 0.01f * (float)word;
        n++;
    }
    MockSpec s = {.docs = d, .tfs = tf, .scores = sc, .positions = pos, .n = n, .block_size = bs};
    return mock_iter_new(&mock_ctx, &s);
}

Test(iter_ops, phrase_matches_brute_force)
{
    for (uint64_t seed = 1; seed <= 600; seed++) {
        qr_arena_reset(mock_arena);
        uint64_t rng = seed * 2654435761u;
        int vocab = 2 + (int)mock_rand_below(&rng, 3);
        int n_docs = 1 + (int)mock_rand_below(&rng, 120);
        PhDoc *docs = qr_arena_alloc(mock_arena, sizeof *docs * (size_t)n_docs);
        for (int i = 0; i < n_docs; i++) {
            docs[i].len = (int)mock_rand_below(&rng, 11);
            for (int p = 0; p < docs[i].len; p++)
                docs[i].tok[p] = (int)mock_rand_below(&rng, (uint64_t)vocab);
        }
        int n = 1 + (int)mock_rand_below(&rng, 4);
        int slop = (int)mock_rand_below(&rng, 4);
        if (seed % 3 == 0)
            slop = 0;
        bool shared = seed % 2 == 0; /* repeated words share one Iter*, or not */
        int word[PH_MAX_TERMS], grp[PH_MAX_TERMS];
        int64_t off[PH_MAX_TERMS];
        uint32_t uoff[PH_MAX_TERMS];
        uint32_t o = 0;
        for (int i = 0; i < n; i++) {
            word[i] = (int)mock_rand_below(&rng, (uint64_t)vocab);
            uoff[i] = o;
            off[i] = o;
            o += 1 + (mock_rand_below(&rng, 4) == 0); /* stop-word gaps */
        }
        if (seed % 7 == 0 && n > 1) { /* two terms at one offset */
            uoff[1] = uoff[0];
            off[1] = off[0];
        }
        if (seed % 4 == 1) /* offsets need not ascend with the term order */
            for (int i = n - 1; i > 0; i--) {
                int j = (int)mock_rand_below(&rng, (uint64_t)i + 1);
                uint32_t t = uoff[i];
                uoff[i] = uoff[j];
                uoff[j] = t;
                off[i] = uoff[i];
                off[j] = uoff[j];
            }
        int bs = 1 + (int)mock_rand_below(&rng, 8);
        Iter *word_it[8] = {0}, *terms[PH_MAX_TERMS];
        float *score_of = qr_arena_calloc(mock_arena, sizeof(float) * (size_t)n_docs * 8);
        for (int i = 0; i < n; i++) {
            if (shared) {
                if (!word_it[word[i]])
                    word_it[word[i]] = ph_word_iter(docs, n_docs, word[i], bs,
                                                    score_of + word[i] * n_docs);
                terms[i] = word_it[word[i]];
                grp[i] = word[i];
            } else {
                terms[i] = ph_word_iter(docs, n_docs, word[i], bs, score_of + word[i] * n_docs);
                grp[i] = word[i]; /* one iterator per occurrence: still one word */
            }
        }
        Iter *ph = iter_phrase_new(&mock_ctx, terms, uoff, n, slop);
        cr_assert(ph);
        PhBrute b = {.word = word, .off = off, .grp = grp, .n = n, .slop = slop};
        DocId cur = ITER_NONE;
        for (;;) {
            bool adv = mock_rand_below(&rng, 3) == 0;
            DocId target = cur + 1 + (adv ? (DocId)mock_rand_below(&rng, 5) : 0);
            DocId got = adv ? iter_advance(ph, target) : iter_next(ph);
            DocId want = ITER_END;
            uint32_t want_f = 0;
            for (DocId d = target; d < n_docs; d++) {
                b.doc = &docs[d];
                if ((want_f = ph_brute(&b)) > 0) {
                    want = d;
                    break;
                }
            }
            cr_assert_eq(got, want, "seed %lu: target %ld got %ld want %ld", (unsigned long)seed,
                         (long)target, (long)got, (long)want);
            if (got == ITER_END)
                break;
            cur = got;
            cr_assert_eq(ph->vt->freq(ph), want_f, "seed %lu doc %ld: freq %u want %u",
                         (unsigned long)seed, (long)cur, ph->vt->freq(ph), want_f);
            float s = 0.0f;
            for (int i = 0; i < n; i++)
                s += score_of[word[i] * n_docs + cur];
            cr_assert(mock_same_bits(iter_score(ph), s), "seed %lu", (unsigned long)seed);
        }
        cr_assert_eq(iter_next(ph), ITER_END);
        for (int i = 0; i < n; i++)
            cr_assert_eq(mock_counters(terms[i])->violations, 0, "seed %lu", (unsigned long)seed);
    }
}

/* "to be or not to be" (to=0 be=1 or=2 not=3), exact and sloppy. */
Test(iter_ops, phrase_to_be_or_not_to_be)
{
    static const PhDoc docs[] = {
        {6, {0, 1, 2, 3, 0, 1}},          /* the phrase */
        {6, {0, 1, 2, 3, 1, 0}},          /* last two swapped */
        {4, {0, 1, 2, 3}},                /* truncated: one "to be" only */
        {12, {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}}, /* overlapping: twice */
        {7, {0, 1, 2, 3, 3, 0, 1}},       /* one extra word inside */
    };
    int words[6] = {0, 1, 2, 3, 0, 1};
    uint32_t offs[6] = {0, 1, 2, 3, 4, 5};
    static const uint32_t want_exact[] = {1, 0, 0, 2, 0};
    for (int run = 0; run < 12; run++) {
        int slop = run / 2;
        bool shared = run % 2; /* repeated words as one iterator, or one each */
        qr_arena_reset(mock_arena);
        float score_of[4 * 5];
        Iter *w[4], *terms[6];
        for (int i = 0; i < 4; i++)
            w[i] = ph_word_iter(docs, 5, i, 2, score_of + i * 5);
        for (int i = 0; i < 6; i++)
            terms[i] = shared ? w[words[i]] : ph_word_iter(docs, 5, words[i], 2, score_of + words[i] * 5);
        Iter *ph = iter_phrase_new(&mock_ctx, terms, offs, 6, slop);
        int grp[6] = {0, 1, 2, 3, 0, 1};
        int64_t off[6] = {0, 1, 2, 3, 4, 5};
        PhBrute b = {.word = words, .off = off, .grp = grp, .n = 6, .slop = slop};
        DocId d;
        int seen = 0;
        while ((d = iter_next(ph)) != ITER_END) {
            b.doc = &docs[d];
            cr_assert_eq(ph->vt->freq(ph), ph_brute(&b), "slop %d doc %ld: %u vs %u", slop, (long)d,
                         ph->vt->freq(ph), ph_brute(&b));
            if (slop == 0)
                cr_assert_eq(ph->vt->freq(ph), want_exact[d]);
            seen |= 1 << d;
        }
        if (slop == 0)
            cr_assert_eq(seen, (1 << 0) | (1 << 3));
        if (slop >= 2) /* swapped "be to" is 2 moves away; the inserted word 1 */
            cr_assert_eq(seen & 0x13, 0x13);
        /* One "to" and one "be" cannot serve twice, whatever the slop. */
        cr_assert_eq(seen & (1 << 2), 0, "slop %d shared %d", slop, shared);
    }
}
