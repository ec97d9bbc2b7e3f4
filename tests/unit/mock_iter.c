/*
 * mock_iter.c — the array-backed scoring iterator of mock_iter.h.
 * Test-only; linked into every unit test binary.
 */
#include "mock_iter.h"

#include <string.h>

typedef struct MockIter {
    Iter base;
    size_t n, i;          /* i: index of the current doc when doc is real */
    size_t bs;            /* block size */
    size_t n_blocks;
    size_t cur_block;     /* SIZE_MAX before the first block */
    DocId *docs;          /* owns (arena) */
    uint32_t *tfs;        /* owns (arena) */
    float *scores;        /* owns (arena) */
    uint32_t *pos_start;  /* owns: n + 1 offsets into pos, NULL when not positional */
    uint32_t *pos;        /* owns */
    float *bmax;          /* owns: per-block bound */
    DocId *blast;         /* owns: per-block last doc */
    float gmax;
    MockCounters cnt;
} MockIter;

static DocId mock_goto(MockIter *m, size_t i)
{
    if (i >= m->n) {
        m->i = m->n;
        return m->base.doc = ITER_END;
    }
    size_t b = i / m->bs;
    if (b != m->cur_block) {
        if (iter_ctx_interrupted(m->base.ctx)) {
            m->i = m->n;
            return m->base.doc = ITER_END;
        }
        m->base.stats.blocks_decoded++;
        m->base.stats.blocks_skipped += m->cur_block == SIZE_MAX ? b : b - m->cur_block - 1;
        m->cur_block = b;
    }
    m->i = i;
    m->base.stats.docs_returned++;
    return m->base.doc = m->docs[i];
}

static DocId mock_next(Iter *it)
{
    MockIter *m = (MockIter *)it;
    if (it->doc == ITER_END)
        return ITER_END;
    return mock_goto(m, it->doc == ITER_NONE ? 0 : m->i + 1);
}

static DocId mock_advance(Iter *it, DocId t)
{
    MockIter *m = (MockIter *)it;
    if (it->doc == ITER_END)
        return ITER_END;
    if (it->doc != ITER_NONE && t <= it->doc) {
        m->cnt.violations++;
        return it->doc;
    }
    size_t lo = it->doc == ITER_NONE ? 0 : m->i + 1, hi = lo, step = 1;
    while (hi < m->n && m->docs[hi] < t) { /* gallop, then bisect */
        lo = hi + 1;
        hi += step;
        step *= 2;
    }
    if (hi > m->n)
        hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->docs[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return mock_goto(m, lo);
}

static uint64_t mock_cost(Iter *it)
{
    MockIter *m = (MockIter *)it;
    if (it->doc == ITER_END)
        return 0;
    return it->doc == ITER_NONE ? m->n : m->n - m->i;
}

static bool mock_on_doc(MockIter *m)
{
    if (m->base.doc == ITER_NONE || m->base.doc == ITER_END) {
        m->cnt.violations++;
        return false;
    }
    return true;
}

static float mock_score(Iter *it)
{
    MockIter *m = (MockIter *)it;
    m->cnt.score_calls++;
    return mock_on_doc(m) ? m->scores[m->i] : 0.0f;
}

static float mock_max_score(Iter *it) { return ((MockIter *)it)->gmax; }

static float mock_block_max(Iter *it, DocId t, DocId *block_last)
{
    MockIter *m = (MockIter *)it;
    m->cnt.block_max_calls++;
    if (it->doc != ITER_NONE && t < it->doc)
        m->cnt.violations++;
    if (m->n == 0 || t > m->docs[m->n - 1]) {
        *block_last = ITER_END;
        return 0.0f;
    }
    size_t lo = 0, hi = m->n_blocks;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->blast[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    *block_last = m->blast[lo];
    return m->bmax[lo];
}

static uint32_t mock_freq(Iter *it)
{
    MockIter *m = (MockIter *)it;
    return mock_on_doc(m) ? m->tfs[m->i] : 0;
}

static const uint32_t *mock_positions(Iter *it, uint32_t *n)
{
    MockIter *m = (MockIter *)it;
    if (!mock_on_doc(m)) {
        *n = 0;
        return NULL;
    }
    *n = m->pos_start[m->i + 1] - m->pos_start[m->i];
    return m->pos + m->pos_start[m->i];
}

#define MOCK_VT(nm, sc, mx, bm, fr, ps)                                                  \
    {.name = nm, .next = mock_next, .advance = mock_advance, .cost = mock_cost,          \
     .score = sc, .max_score = mx, .block_max = bm, .freq = fr, .positions = ps}

/* [scoring][block_max][positions] */
static const IterVT mock_vts[2][2][2] = {
    {{MOCK_VT("mock", NULL, NULL, NULL, mock_freq, NULL),
      MOCK_VT("mock", NULL, NULL, NULL, mock_freq, mock_positions)},
     {MOCK_VT("mock", NULL, NULL, NULL, mock_freq, NULL),
      MOCK_VT("mock", NULL, NULL, NULL, mock_freq, mock_positions)}},
    {{MOCK_VT("mock", mock_score, mock_max_score, NULL, mock_freq, NULL),
      MOCK_VT("mock", mock_score, mock_max_score, NULL, mock_freq, mock_positions)},
     {MOCK_VT("mock", mock_score, mock_max_score, mock_block_max, mock_freq, NULL),
      MOCK_VT("mock", mock_score, mock_max_score, mock_block_max, mock_freq, mock_positions)}},
};

bool mock_iter_is(const Iter *it)
{
    return it && it->vt >= &mock_vts[0][0][0] && it->vt <= &mock_vts[1][1][1];
}

const MockCounters *mock_counters(const Iter *it)
{
    return mock_iter_is(it) ? &((const MockIter *)it)->cnt : NULL;
}

Iter *mock_iter_new(IterCtx *ctx, const MockSpec *s)
{
    MockIter *m = qr_arena_calloc(ctx->arena, sizeof *m);
    size_t n = s->n, nz = n ? n : 1;
    size_t bs = s->block_size > 0 ? (size_t)s->block_size : 128;
    size_t nb = (n + bs - 1) / bs;
    if (m) {
        m->docs = qr_arena_alloc(ctx->arena, sizeof *m->docs * nz);
        m->tfs = qr_arena_alloc(ctx->arena, sizeof *m->tfs * nz);
        m->scores = qr_arena_alloc(ctx->arena, sizeof *m->scores * nz);
        m->bmax = qr_arena_alloc(ctx->arena, sizeof *m->bmax * (nb ? nb : 1));
        m->blast = qr_arena_alloc(ctx->arena, sizeof *m->blast * (nb ? nb : 1));
        m->pos_start = qr_arena_alloc(ctx->arena, sizeof *m->pos_start * (n + 1));
    }
    if (!m || !m->docs || !m->tfs || !m->scores || !m->bmax || !m->blast || !m->pos_start) {
        iter_ctx_fail(ctx, QR_ENOMEM, "out of memory building a mock iterator");
        return NULL;
    }
    m->n = n;
    m->bs = bs;
    m->n_blocks = nb;
    m->cur_block = SIZE_MAX;
    if (n)
        memcpy(m->docs, s->docs, sizeof *m->docs * n);
    size_t total_pos = 0;
    for (size_t i = 0; i < n; i++) {
        m->tfs[i] = s->tfs ? s->tfs[i] : 1;
        m->pos_start[i] = (uint32_t)total_pos;
        total_pos += m->tfs[i];
        if (s->scores)
            m->scores[i] = s->scores[i];
        else if (s->score_fn)
            m->scores[i] = s->score_fn(m->docs[i], m->tfs[i], s->score_arg);
        else
            m->scores[i] = (float)m->tfs[i];
    }
    m->pos_start[n] = (uint32_t)total_pos;
    if (s->positions) {
        m->pos = qr_arena_alloc(ctx->arena, sizeof *m->pos * (total_pos ? total_pos : 1));
        if (!m->pos) {
            iter_ctx_fail(ctx, QR_ENOMEM, "out of memory building a mock iterator");
            return NULL;
        }
        if (total_pos)
            memcpy(m->pos, s->positions, sizeof *m->pos * total_pos);
    }
    float slack = 1.0f + s->bound_slack;
    m->gmax = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        float mx = 0.0f;
        size_t end = (b + 1) * bs < n ? (b + 1) * bs : n;
        for (size_t i = b * bs; i < end; i++)
            if (m->scores[i] > mx)
                mx = m->scores[i];
        m->bmax[b] = mx * slack;
        m->blast[b] = m->docs[end - 1];
        if (mx > m->gmax)
            m->gmax = mx;
    }
    m->gmax *= slack;
    const IterVT *vt = &mock_vts[!s->non_scoring][!s->no_block_max][s->positions != NULL];
    iter_init(&m->base, vt, ctx);
    return &m->base;
}

/* ---- helpers for property tests ---- */

QrArena *mock_arena;
IterCtx mock_ctx;

void mock_setup(void)
{
    mock_arena = qr_arena_new(0);
    iter_ctx_init(&mock_ctx, mock_arena);
}

void mock_teardown(void)
{
    qr_arena_free(mock_arena);
    mock_arena = NULL;
}

bool mock_same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

uint64_t mock_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t mock_rand_below(uint64_t *state, uint64_t n) { return mock_rand(state) % n; }

double mock_rand_unit(uint64_t *state) { return (double)(mock_rand(state) >> 11) / 9007199254740992.0; }

MockList mock_list_random(QrArena *a, uint64_t *rng, DocId universe, double density,
                          MockScores kind)
{
    static const float pool[] = {0.1f, 0.2f, 0.3f, 0.7f, 1.0f, 1.1f, 1.3f, 2.5f, 3.0f, 0.35f};
    float mine[4]; /* this list's few values */
    for (int i = 0; i < 4; i++)
        mine[i] = pool[mock_rand_below(rng, sizeof pool / sizeof *pool)];
    MockList l = {0};
    size_t cap = (size_t)universe + 1;
    l.docs = qr_arena_alloc(a, sizeof *l.docs * cap);
    l.tfs = qr_arena_alloc(a, sizeof *l.tfs * cap);
    l.scores = qr_arena_alloc(a, sizeof *l.scores * cap);
    if (!l.docs || !l.tfs || !l.scores)
        return (MockList){0};
    for (DocId d = 0; d < universe; d++) {
        if (mock_rand_unit(rng) >= density)
            continue;
        uint32_t tf = 1 + (uint32_t)mock_rand_below(rng, 4);
        float s;
        switch (kind) {
        case MOCK_SCORES_TIES:
            s = mine[mock_rand_below(rng, 4)];
            break;
        case MOCK_SCORES_SPREAD:
            s = (float)(mock_rand_unit(rng) * 4.0) + 1e-3f;
            break;
        default:
            s = mock_rand_below(rng, 100) == 0 ? 5.0f + (float)mock_rand_below(rng, 3)
                                                : 0.1f * (float)(1 + mock_rand_below(rng, 3));
            break;
        }
        l.docs[l.n] = d;
        l.tfs[l.n] = tf;
        l.scores[l.n] = s;
        l.n++;
    }
    return l;
}

long mock_list_find(const MockList *l, DocId doc)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->docs[mid] < doc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < l->n && l->docs[lo] == doc ? (long)lo : -1;
}

Iter *mock_iter_from_list(IterCtx *ctx, const MockList *l, int block_size, float slack,
                          bool scoring)
{
    MockSpec s = {.docs = l->docs, .tfs = l->tfs, .scores = l->scores, .n = l->n,
                  .block_size = block_size, .bound_slack = slack, .non_scoring = !scoring};
    return mock_iter_new(ctx, &s);
}
