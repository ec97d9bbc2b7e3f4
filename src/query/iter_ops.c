/*
 * iter_ops.c — the iterator combinators of query/iter_ops.h.
 *
 * Layer: query/.  Calls index/iter.h and the store/ base kit.
 *
 * Every combinator keeps the hot path free of scoring: next/advance only
 * position, and score() is computed on demand, so iter_count() and filters
 * never pay for BM25.  Floats are always summed in child order (see the
 * header) so that any two evaluation strategies agree to the bit.
 */
#include "query/iter_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared helpers ---- */

/* Arena allocation that records why it failed. */
static void *ops_alloc(IterCtx *ctx, size_t n)
{
    void *p = qr_arena_calloc(ctx->arena, n ? n : 1);
    if (!p) {
        if (ctx->arena && qr_arena_over_cap(ctx->arena))
            iter_ctx_fail(ctx, QR_ELIMIT, "query exceeded its memory limit");
        else
            iter_ctx_fail(ctx, QR_ENOMEM, "out of memory building an iterator");
    }
    return p;
}

/* Copy of a child array; NULL (error set) when the array, a child or the
 * arena fails.  A NULL child means its constructor already failed. */
static Iter **ops_copy_kids(IterCtx *ctx, Iter **kids, int n, const char *what)
{
    if (n < 0 || (n > 0 && !kids)) {
        iter_ctx_fail(ctx, QR_EINVAL, "%s iterator given %d children", what, n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!kids[i]) {
            iter_ctx_fail(ctx, QR_EINTERNAL, "%s iterator given a null child", what);
            return NULL;
        }
    }
    Iter **copy = ops_alloc(ctx, sizeof *copy * (size_t)(n ? n : 1));
    if (copy && n)
        memcpy(copy, kids, sizeof *copy * (size_t)n);
    return copy;
}

/* Set the current doc and count it (iter.h: docs produced by next/advance). */
static inline DocId ops_emit(Iter *it, DocId d)
{
    it->doc = d;
    if (d != ITER_END)
        it->stats.docs_returned++;
    return d;
}

/* The forgiving advance() preamble: true when the answer is it->doc as it
 * stands (at the end, or t not beyond doc); clamps negative targets. */
static inline bool ops_stay(const Iter *it, DocId *t)
{
    if (it->doc == ITER_END)
        return true;
    if (it->doc != ITER_NONE && *t <= it->doc)
        return true;
    if (*t < 0)
        *t = 0;
    return false;
}

/* Target for a child's block_max: never before the child's own position. */
static inline DocId ops_bm_target(const Iter *k, DocId t)
{
    return k->doc > t ? k->doc : t;
}

/* Sum of the scoring children's scores, in order; all sit on the doc. */
static inline float ops_sum_scores(Iter **kids, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        if (kids[i]->vt->score)
            s += kids[i]->vt->score(kids[i]);
    return s;
}

static float ops_sum_max(Iter **kids, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        if (kids[i]->vt->score)
            s += iter_max_score(kids[i]);
    return s;
}

/* block_max of a conjunction (conj) or a disjunction: the sum, in order, of
 * the scoring children's block maxima, up to the smallest block_last.  An
 * exhausted child adds nothing to a disjunction and ends a conjunction
 * (0 / ITER_END: nothing left). */
static float ops_sum_block_max(Iter **kids, int n, bool conj, DocId t, DocId *block_last)
{
    float s = 0.0f;
    DocId lo = ITER_END;
    for (int i = 0; i < n; i++) {
        Iter *k = kids[i];
        if (k->doc == ITER_END && conj) {
            *block_last = ITER_END;
            return 0.0f;
        }
        if (!k->vt->score || k->doc == ITER_END)
            continue;
        DocId l;
        s += iter_block_max(k, ops_bm_target(k, t), &l);
        if (l < lo)
            lo = l;
    }
    *block_last = lo;
    return s;
}

static uint64_t ops_min_cost(Iter **kids, int n)
{
    uint64_t c = UINT64_MAX;
    for (int i = 0; i < n; i++) {
        uint64_t k = iter_cost(kids[i]);
        if (k < c)
            c = k;
    }
    return n ? c : 0;
}

static bool ops_any_scoring(Iter **kids, int n)
{
    for (int i = 0; i < n; i++)
        if (kids[i]->vt->score)
            return true;
    return false;
}

/* Children sorted by ascending cost (stable), for leapfrog leads. */
static Iter **ops_cost_order(IterCtx *ctx, Iter **kids, int n)
{
    Iter **o = ops_alloc(ctx, sizeof *o * (size_t)(n ? n : 1));
    uint64_t *c = ops_alloc(ctx, sizeof *c * (size_t)(n ? n : 1));
    if (!o || !c)
        return NULL;
    for (int i = 0; i < n; i++) {
        Iter *k = kids[i];
        uint64_t kc = iter_cost(k);
        int j = i;
        for (; j > 0 && c[j - 1] > kc; j--) {
            o[j] = o[j - 1];
            c[j] = c[j - 1];
        }
        o[j] = k;
        c[j] = kc;
    }
    return o;
}

DocId iter_leapfrog(Iter **order, int n, DocId cand)
{
    int i = 1;
    while (i < n && cand != ITER_END) {
        Iter *k = order[i];
        DocId d = k->doc;
        if (d < cand)
            d = iter_advance(k, cand);
        if (d == cand) {
            i++;
            continue;
        }
        cand = iter_advance(order[0], d);
        i = 1;
    }
    return cand;
}

/* ---- AND ---- */

/* Invariant: after a move every child sits on base.doc (or the AND is at
 * ITER_END and the children are wherever they stopped). */
typedef struct AndIter {
    Iter base;
    int n;
    Iter **kids;  /* owns (arena copy); borrows the children; kid = score order */
    Iter **order; /* owns (arena): children by ascending cost; order[0] leads */
    DocId (*seek)(Iter *it, DocId target); /* and_seek, or phrase_seek */
} AndIter;

static DocId and_seek(Iter *it, DocId target)
{
    AndIter *a = (AndIter *)it;
    DocId c = iter_seek(a->order[0], target);
    return ops_emit(it, iter_leapfrog(a->order, a->n, c));
}

static DocId and_next(Iter *it)
{
    if (it->doc == ITER_END)
        return ITER_END;
    return ((AndIter *)it)->seek(it, it->doc + 1);
}

static DocId and_advance(Iter *it, DocId t)
{
    if (ops_stay(it, &t))
        return it->doc;
    return ((AndIter *)it)->seek(it, t);
}

static uint64_t and_cost(Iter *it)
{
    AndIter *a = (AndIter *)it;
    return it->doc == ITER_END ? 0 : ops_min_cost(a->kids, a->n);
}

static float and_score(Iter *it)
{
    AndIter *a = (AndIter *)it;
    return ops_sum_scores(a->kids, a->n);
}

static float and_max_score(Iter *it)
{
    AndIter *a = (AndIter *)it;
    return ops_sum_max(a->kids, a->n);
}

static float and_block_max(Iter *it, DocId t, DocId *block_last)
{
    AndIter *a = (AndIter *)it;
    if (it->doc == ITER_END) {
        *block_last = ITER_END;
        return 0.0f;
    }
    return ops_sum_block_max(a->kids, a->n, true, t, block_last);
}

static const IterVT and_vt = {
    .name = "and", .next = and_next, .advance = and_advance, .cost = and_cost,
};
static const IterVT and_scoring_vt = {
    .name = "and", .next = and_next, .advance = and_advance, .cost = and_cost,
    .score = and_score, .max_score = and_max_score, .block_max = and_block_max,
};

Iter *iter_and_new(IterCtx *ctx, Iter **kids, int n)
{
    Iter **copy = ops_copy_kids(ctx, kids, n, "and");
    if (!copy)
        return NULL;
    if (n == 0)
        return iter_empty_new(ctx);
    if (n == 1)
        return kids[0];
    AndIter *a = ops_alloc(ctx, sizeof *a);
    Iter **order = ops_cost_order(ctx, kids, n);
    if (!a || !order)
        return NULL;
    iter_init(&a->base, ops_any_scoring(kids, n) ? &and_scoring_vt : &and_vt, ctx);
    a->n = n;
    a->kids = copy;
    a->order = order;
    a->seek = and_seek;
    return &a->base;
}

/* ---- OR / at-least-k ---- */

typedef struct OrEnt {
    DocId doc; /* cached kids[kid]->doc */
    int kid;
} OrEnt;

/* Invariant: heap[0..n_live) holds every child not yet at ITER_END, ordered
 * by (doc, kid); no child's doc is below base.doc. */
typedef struct OrIter {
    Iter base;
    int n, min_match;
    Iter **kids;  /* owns (arena copy); borrows the children; kid = score order */
    OrEnt *heap;  /* owns (arena) */
    int n_live;
    int *on;      /* owns: kids on on_doc, ascending kid index */
    int *stack;   /* owns: scratch for the heap walk */
    int n_on;
    DocId on_doc; /* doc that `on` describes (ITER_NONE: none) */
} OrIter;

static inline bool or_less(const OrEnt *a, const OrEnt *b)
{
    return a->doc < b->doc || (a->doc == b->doc && a->kid < b->kid);
}

static void or_sift_down(OrEnt *h, int n, int i)
{
    OrEnt e = h[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && or_less(&h[c + 1], &h[c]))
            c++;
        if (!or_less(&h[c], &e))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = e;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Collect the children on doc d (a walk of the heap's top, which holds
 * exactly them), ascending by kid index. */
static void or_collect_on(OrIter *o, DocId d)
{
    int n_on = 0, sp = 0;
    if (o->n_live && o->heap[0].doc == d)
        o->stack[sp++] = 0;
    while (sp) {
        int i = o->stack[--sp];
        o->on[n_on++] = o->heap[i].kid;
        for (int c = 2 * i + 1; c <= 2 * i + 2 && c < o->n_live; c++)
            if (o->heap[c].doc == d)
                o->stack[sp++] = c;
    }
    if (n_on <= 16) {
        for (int i = 1; i < n_on; i++) {
            int v = o->on[i], j = i;
            for (; j > 0 && o->on[j - 1] > v; j--)
                o->on[j] = o->on[j - 1];
            o->on[j] = v;
        }
    } else {
        qsort(o->on, (size_t)n_on, sizeof *o->on, cmp_int);
    }
    o->n_on = n_on;
    o->on_doc = d;
}

static DocId or_seek(Iter *it, DocId target)
{
    OrIter *o = (OrIter *)it;
    for (;;) {
        while (o->n_live > 0 && o->heap[0].doc < target) {
            DocId d = iter_seek(o->kids[o->heap[0].kid], target);
            if (d == ITER_END)
                o->heap[0] = o->heap[--o->n_live];
            else
                o->heap[0].doc = d;
            or_sift_down(o->heap, o->n_live, 0);
        }
        if (o->n_live == 0 || o->n_live < o->min_match)
            return ops_emit(it, ITER_END);
        DocId d = o->heap[0].doc;
        if (o->min_match <= 1)
            return ops_emit(it, d);
        or_collect_on(o, d);
        if (o->n_on >= o->min_match)
            return ops_emit(it, d);
        target = d + 1;
    }
}

static DocId or_next(Iter *it)
{
    if (it->doc == ITER_END)
        return ITER_END;
    return or_seek(it, it->doc + 1);
}

static DocId or_advance(Iter *it, DocId t)
{
    if (ops_stay(it, &t))
        return it->doc;
    return or_seek(it, t);
}

static uint64_t or_cost(Iter *it)
{
    OrIter *o = (OrIter *)it;
    uint64_t c = 0;
    if (it->doc == ITER_END)
        return 0;
    for (int i = 0; i < o->n_live; i++) {
        uint64_t k = iter_cost(o->kids[o->heap[i].kid]);
        c = c + k < c ? UINT64_MAX : c + k;
    }
    return c;
}

static float or_score(Iter *it)
{
    OrIter *o = (OrIter *)it;
    if (o->n <= 16) { /* few children: a scan in kid order beats walking the heap */
        float s = 0.0f;
        for (int i = 0; i < o->n; i++) {
            Iter *k = o->kids[i];
            if (k->doc == it->doc && k->vt->score)
                s += k->vt->score(k);
        }
        return s;
    }
    if (o->on_doc != it->doc)
        or_collect_on(o, it->doc);
    float s = 0.0f;
    for (int j = 0; j < o->n_on; j++) {
        Iter *k = o->kids[o->on[j]];
        if (k->vt->score)
            s += k->vt->score(k);
    }
    return s;
}

static float or_max_score(Iter *it)
{
    OrIter *o = (OrIter *)it;
    return ops_sum_max(o->kids, o->n);
}

static float or_block_max(Iter *it, DocId t, DocId *block_last)
{
    OrIter *o = (OrIter *)it;
    return ops_sum_block_max(o->kids, o->n, false, t, block_last);
}

static const IterVT or_vt = {
    .name = "or", .next = or_next, .advance = or_advance, .cost = or_cost,
};
static const IterVT or_scoring_vt = {
    .name = "or", .next = or_next, .advance = or_advance, .cost = or_cost,
    .score = or_score, .max_score = or_max_score, .block_max = or_block_max,
};

Iter *iter_or_new(IterCtx *ctx, Iter **kids, int n, int min_match)
{
    Iter **copy = ops_copy_kids(ctx, kids, n, "or");
    if (!copy)
        return NULL;
    if (min_match < 1)
        min_match = 1;
    if (n == 0 || min_match > n)
        return iter_empty_new(ctx);
    if (n == 1)
        return kids[0];
    OrIter *o = ops_alloc(ctx, sizeof *o);
    OrEnt *heap = ops_alloc(ctx, sizeof *heap * (size_t)n);
    int *on = ops_alloc(ctx, sizeof *on * (size_t)n);
    int *stack = ops_alloc(ctx, sizeof *stack * (size_t)n);
    if (!o || !heap || !on || !stack)
        return NULL;
    iter_init(&o->base, ops_any_scoring(kids, n) ? &or_scoring_vt : &or_vt, ctx);
    o->n = n;
    o->min_match = min_match;
    o->kids = copy;
    o->heap = heap;
    o->on = on;
    o->stack = stack;
    o->on_doc = ITER_NONE;
    for (int i = 0; i < n; i++)
        heap[i] = (OrEnt){.doc = kids[i]->doc, .kid = i};
    for (int i = n / 2 - 1; i >= 0; i--)
        or_sift_down(heap, n, i);
    o->n_live = n;
    return &o->base;
}

/* ---- one-child wrappers: the docs of `kid` ---- */

typedef struct WrapIter {
    Iter base;
    Iter *kid; /* borrows: drives the docs */
} WrapIter;

static DocId wrap_next(Iter *it)
{
    if (it->doc == ITER_END)
        return ITER_END;
    return ops_emit(it, iter_next(((WrapIter *)it)->kid));
}

static DocId wrap_advance(Iter *it, DocId t)
{
    if (ops_stay(it, &t))
        return it->doc;
    return ops_emit(it, iter_seek(((WrapIter *)it)->kid, t));
}

static uint64_t wrap_cost(Iter *it) { return iter_cost(((WrapIter *)it)->kid); }
static float wrap_score(Iter *it) { return iter_score(((WrapIter *)it)->kid); }
static float wrap_max_score(Iter *it) { return iter_max_score(((WrapIter *)it)->kid); }

static float wrap_block_max(Iter *it, DocId t, DocId *block_last)
{
    Iter *kid = ((WrapIter *)it)->kid;
    if (it->doc == ITER_END || kid->doc == ITER_END) {
        *block_last = ITER_END;
        return 0.0f;
    }
    return iter_block_max(kid, ops_bm_target(kid, t), block_last);
}

/* ---- AND-NOT ---- */

typedef struct AndNotIter {
    WrapIter pos; /* pos.kid: the positive child */
    Iter *neg;    /* borrows: advanced only to docs of pos */
} AndNotIter;

static DocId andnot_settle(AndNotIter *a, DocId d)
{
    while (d != ITER_END) {
        if (iter_seek(a->neg, d) != d)
            break;
        d = iter_next(a->pos.kid);
    }
    return ops_emit(&a->pos.base, d);
}

static DocId andnot_next(Iter *it)
{
    if (it->doc == ITER_END)
        return ITER_END;
    AndNotIter *a = (AndNotIter *)it;
    return andnot_settle(a, iter_next(a->pos.kid));
}

static DocId andnot_advance(Iter *it, DocId t)
{
    if (ops_stay(it, &t))
        return it->doc;
    AndNotIter *a = (AndNotIter *)it;
    return andnot_settle(a, iter_seek(a->pos.kid, t));
}

static const IterVT andnot_vt = {
    .name = "not", .next = andnot_next, .advance = andnot_advance, .cost = wrap_cost,
};
static const IterVT andnot_scoring_vt = {
    .name = "not", .next = andnot_next, .advance = andnot_advance, .cost = wrap_cost,
    .score = wrap_score, .max_score = wrap_max_score, .block_max = wrap_block_max,
};

Iter *iter_andnot_new(IterCtx *ctx, Iter *pos, Iter *neg)
{
    if (!pos) {
        iter_ctx_fail(ctx, QR_EINTERNAL, "not iterator given a null child");
        return NULL;
    }
    if (!neg)
        return pos;
    AndNotIter *a = ops_alloc(ctx, sizeof *a);
    if (!a)
        return NULL;
    iter_init(&a->pos.base, pos->vt->score ? &andnot_scoring_vt : &andnot_vt, ctx);
    a->pos.kid = pos;
    a->neg = neg;
    return &a->pos.base;
}

/* ---- required + optional ---- */

typedef struct ReqOptIter {
    WrapIter req; /* req.kid: the required child, drives the docs */
    Iter *opt;    /* borrows: advanced lazily from score() */
} ReqOptIter;

static float reqopt_score(Iter *it)
{
    ReqOptIter *r = (ReqOptIter *)it;
    DocId d = it->doc;
    float s = iter_score(r->req.kid);
    if (iter_seek(r->opt, d) == d)
        s += iter_score(r->opt);
    return s;
}

static float reqopt_max_score(Iter *it)
{
    ReqOptIter *r = (ReqOptIter *)it;
    return iter_max_score(r->req.kid) + iter_max_score(r->opt);
}

static float reqopt_block_max(Iter *it, DocId t, DocId *block_last)
{
    ReqOptIter *r = (ReqOptIter *)it;
    if (it->doc == ITER_END || r->req.kid->doc == ITER_END) {
        *block_last = ITER_END;
        return 0.0f;
    }
    DocId l1, l2 = ITER_END;
    float s = iter_block_max(r->req.kid, ops_bm_target(r->req.kid, t), &l1);
    float o = 0.0f;
    if (r->opt->doc != ITER_END)
        o = iter_block_max(r->opt, ops_bm_target(r->opt, t), &l2);
    *block_last = l1 < l2 ? l1 : l2;
    return s + o;
}

static const IterVT reqopt_vt = {
    .name = "req_opt", .next = wrap_next, .advance = wrap_advance, .cost = wrap_cost,
    .score = reqopt_score, .max_score = reqopt_max_score, .block_max = reqopt_block_max,
};

Iter *iter_req_opt_new(IterCtx *ctx, Iter *req, Iter *opt)
{
    if (!req || !opt) {
        iter_ctx_fail(ctx, QR_EINTERNAL, "req_opt iterator given a null child");
        return NULL;
    }
    if (!req->vt->score && !opt->vt->score)
        return req; /* nothing to add: the docs are req's */
    ReqOptIter *r = ops_alloc(ctx, sizeof *r);
    if (!r)
        return NULL;
    iter_init(&r->req.base, &reqopt_vt, ctx);
    r->req.kid = req;
    r->opt = opt;
    return &r->req.base;
}

/* ---- phrase ---- */

/* Invariant: on a real doc every term sits on it and `freq` > 0 counts the
 * matches there.  Scratch arrays are sized n (terms) and reused per doc. */
typedef struct PhraseIter {
    AndIter conj;         /* the terms' conjunction: kids in term order, cost order */
    int slop;
    bool exact;           /* slop 0 and every offset distinct: the anchor check */
    bool has_rpts;        /* on the current doc, some word occurs twice */
    int64_t *off;         /* owns: offsets[i] */
    int *grp;             /* owns: leader of i's group (same word) on the current doc */
    int *gnext;           /* owns: next member of i's group by offset, -1 at the end */
    int *first;           /* owns: scratch, first term with the same word */
    int *mem;             /* owns: scratch, one group's members */
    const uint32_t **pos; /* owns: positions of term i on the current doc (borrowed views) */
    uint32_t *npos;       /* owns */
    uint32_t *ptr;        /* owns: sweep cursor per term */
    uint32_t freq;        /* matches on base.doc */
} PhraseIter;

/* First index x >= from with P[x] >= v. */
static uint32_t ph_lower(const uint32_t *P, uint32_t from, uint32_t n, int64_t v)
{
    uint32_t lo = from, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((int64_t)P[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Can the group led by g (members by ascending offset through gnext) take
 * distinct positions with r = p - off in [m, m+slop]?  `pin` (or -1) is a
 * member fixed at position m + off[pin], which the others may not use.
 * Greedy by offset: equal-length windows sorted by left end, each member
 * takes the first free position, which is optimal. */
static bool ph_group_fits(const PhraseIter *p, int g, int64_t m, int pin)
{
    const uint32_t *P = p->pos[g];
    uint32_t np = p->npos[g], next_free = 0;
    int64_t q = pin >= 0 ? m + p->off[pin] : -1;
    for (int j = g; j >= 0; j = p->gnext[j]) {
        if (j == pin)
            continue;
        int64_t lo = m + p->off[j];
        uint32_t x = ph_lower(P, next_free, np, lo);
        if (x < np && (int64_t)P[x] == q)
            x++;
        if (x >= np || (int64_t)P[x] > lo + p->slop)
            return false;
        next_free = x + 1;
    }
    return true;
}

/* With repeated terms: does a match with window start exactly m exist?
 * Some term whose cursor sits on r == m must take it (pinned), and every
 * group must still find distinct positions. */
static bool ph_rpts_fit(const PhraseIter *p, int64_t m)
{
    bool free_pin = false; /* a singleton term sits on m: no pin needed */
    for (int i = 0; i < p->conj.n; i++) {
        if (p->grp[i] == i && p->gnext[i] < 0 && p->ptr[i] < p->npos[i] &&
            (int64_t)p->pos[i][p->ptr[i]] - p->off[i] == m) {
            free_pin = true;
            break;
        }
    }
    for (int g = 0; g < p->conj.n; g++) {
        if (p->grp[g] != g || p->gnext[g] < 0)
            continue;
        if (!ph_group_fits(p, g, m, -1))
            return false;
    }
    if (free_pin)
        return true;
    for (int i = 0; i < p->conj.n; i++) {
        int g = p->grp[i];
        if (p->ptr[i] >= p->npos[i] || (int64_t)p->pos[i][p->ptr[i]] - p->off[i] != m)
            continue;
        if (ph_group_fits(p, g, m, i))
            return true;
    }
    return false;
}

/* Exact phrase: anchors a = p - off[lead] of the rarest term, every other
 * term checked by a forward-only cursor. */
static uint32_t ph_count_exact(PhraseIter *p)
{
    int lead = 0;
    for (int i = 1; i < p->conj.n; i++)
        if (p->npos[i] < p->npos[lead])
            lead = i;
    uint32_t count = 0;
    for (uint32_t x = 0; x < p->npos[lead]; x++) {
        int64_t a = (int64_t)p->pos[lead][x] - p->off[lead];
        bool ok = true;
        for (int i = 0; i < p->conj.n && ok; i++) {
            if (i == lead)
                continue;
            int64_t want = a + p->off[i];
            uint32_t c = p->ptr[i];
            while (c < p->npos[i] && (int64_t)p->pos[i][c] < want)
                c++;
            p->ptr[i] = c;
            if (c == p->npos[i])
                return count; /* anchors only grow: nothing more */
            ok = (int64_t)p->pos[i][c] == want;
        }
        count += ok;
    }
    return count;
}

/* General (sloppy) count: sweep the candidate window starts m over the union
 * of r = p - off in ascending order; cursors only move forward. */
static uint32_t ph_count_sloppy(PhraseIter *p)
{
    uint32_t count = 0;
    for (;;) {
        int64_t m = INT64_MAX;
        for (int i = 0; i < p->conj.n; i++) {
            if (p->ptr[i] >= p->npos[i])
                return count; /* term i has no r >= m left: no window can hold it */
            int64_t r = (int64_t)p->pos[i][p->ptr[i]] - p->off[i];
            if (r < m)
                m = r;
        }
        bool ok = true;
        for (int i = 0; i < p->conj.n && ok; i++)
            ok = (int64_t)p->pos[i][p->ptr[i]] - p->off[i] <= m + p->slop;
        if (ok && p->has_rpts)
            ok = ph_rpts_fit(p, m);
        count += ok;
        for (int i = 0; i < p->conj.n; i++)
            if ((int64_t)p->pos[i][p->ptr[i]] - p->off[i] == m)
                p->ptr[i]++;
    }
}

/* Terms i and j are the same word on this doc: the same iterator, or equal
 * position lists (one token per position: distinct words never share one). */
static bool ph_same_word(const PhraseIter *p, int i, int j)
{
    if (p->conj.kids[i] == p->conj.kids[j] || p->pos[i] == p->pos[j])
        return true;
    return p->npos[i] == p->npos[j] &&
           memcmp(p->pos[i], p->pos[j], sizeof *p->pos[i] * p->npos[i]) == 0;
}

/* Group the terms by word for this doc and chain each group's members by
 * ascending offset; the first of a chain leads it (grp[] points at it). */
static void ph_group(PhraseIter *p)
{
    int n = p->conj.n;
    p->has_rpts = false;
    for (int i = 0; i < n; i++) {
        p->first[i] = i;
        p->grp[i] = i;
        p->gnext[i] = -1;
        for (int j = 0; j < i; j++) {
            if (p->first[j] == j && ph_same_word(p, i, j)) {
                p->first[i] = j;
                p->has_rpts = true;
                break;
            }
        }
    }
    for (int f = 0; f < n && p->has_rpts; f++) {
        if (p->first[f] != f)
            continue;
        int m = 0;
        for (int i = f; i < n; i++) {
            if (p->first[i] != f)
                continue;
            int j = m++;
            for (; j > 0 && p->off[p->mem[j - 1]] > p->off[i]; j--)
                p->mem[j] = p->mem[j - 1];
            p->mem[j] = i;
        }
        for (int j = 0; j < m; j++) {
            p->grp[p->mem[j]] = p->mem[0];
            p->gnext[p->mem[j]] = j + 1 < m ? p->mem[j + 1] : -1;
        }
    }
}

static uint32_t ph_count(PhraseIter *p)
{
    for (int i = 0; i < p->conj.n; i++) {
        Iter *t = p->conj.kids[i];
        p->pos[i] = t->vt->positions(t, &p->npos[i]);
        p->ptr[i] = 0;
        if (!p->pos[i] || p->npos[i] == 0)
            return 0;
    }
    if (p->exact)
        return ph_count_exact(p);
    ph_group(p);
    return ph_count_sloppy(p);
}

static DocId phrase_seek(Iter *it, DocId target)
{
    PhraseIter *p = (PhraseIter *)it;
    DocId c = iter_seek(p->conj.order[0], target);
    for (;;) {
        c = iter_leapfrog(p->conj.order, p->conj.n, c);
        if (c == ITER_END)
            break;
        uint32_t f = ph_count(p);
        if (f) {
            p->freq = f;
            break;
        }
        c = iter_next(p->conj.order[0]);
    }
    return ops_emit(it, c);
}

static uint32_t phrase_freq(Iter *it) { return ((PhraseIter *)it)->freq; }

static const IterVT phrase_vt = {
    .name = "phrase", .next = and_next, .advance = and_advance, .cost = and_cost,
    .freq = phrase_freq,
};
static const IterVT phrase_scoring_vt = {
    .name = "phrase", .next = and_next, .advance = and_advance, .cost = and_cost,
    .score = and_score, .max_score = and_max_score, .block_max = and_block_max,
    .freq = phrase_freq,
};

Iter *iter_phrase_new(IterCtx *ctx, Iter **terms, const uint32_t *offsets, int n, int slop)
{
    Iter **copy = ops_copy_kids(ctx, terms, n, "phrase");
    if (!copy)
        return NULL;
    for (int i = 0; i < n; i++) {
        if (!terms[i]->vt->positions) {
            iter_ctx_fail(ctx, QR_EINVAL, "phrase term %d has no positions", i + 1);
            qr_error_hint(&ctx->err, "index the field with positions to run phrase queries");
            return NULL;
        }
    }
    if (n == 0)
        return iter_empty_new(ctx);
    PhraseIter *p = ops_alloc(ctx, sizeof *p);
    Iter **order = ops_cost_order(ctx, terms, n);
    size_t nn = (size_t)n;
    int64_t *off = ops_alloc(ctx, sizeof *off * nn);
    int *grp = ops_alloc(ctx, sizeof *grp * nn);
    int *gnext = ops_alloc(ctx, sizeof *gnext * nn);
    int *first = ops_alloc(ctx, sizeof *first * nn);
    int *mem = ops_alloc(ctx, sizeof *mem * nn);
    const uint32_t **pos = ops_alloc(ctx, sizeof *pos * nn);
    uint32_t *npos = ops_alloc(ctx, sizeof *npos * nn);
    uint32_t *ptr = ops_alloc(ctx, sizeof *ptr * nn);
    if (!p || !order || !off || !grp || !gnext || !first || !mem || !pos || !npos || !ptr)
        return NULL;
    iter_init(&p->conj.base, ops_any_scoring(terms, n) ? &phrase_scoring_vt : &phrase_vt, ctx);
    p->conj.n = n;
    p->conj.kids = copy;
    p->conj.order = order;
    p->conj.seek = phrase_seek;
    p->slop = slop < 0 ? 0 : slop;
    p->off = off;
    p->grp = grp;
    p->gnext = gnext;
    p->first = first;
    p->mem = mem;
    p->pos = pos;
    p->npos = npos;
    p->ptr = ptr;
    bool shared_offset = false; /* two terms at one slot (synonyms, or nonsense) */
    for (int i = 0; i < n; i++) {
        off[i] = offsets ? (int64_t)offsets[i] : i;
        for (int j = 0; j < i; j++)
            shared_offset |= off[j] == off[i];
    }
    /* With distinct offsets an exact match puts every term on its own
     * position, so the anchor check needs no word grouping. */
    p->exact = p->slop == 0 && !shared_offset;
    return &p->conj.base;
}

/* ---- boost ---- */

typedef struct BoostIter {
    WrapIter w;
    float factor; /* finite, >= 0 */
    float score;  /* const_score: the constant */
} BoostIter;

static float boost_score(Iter *it)
{
    BoostIter *b = (BoostIter *)it;
    return iter_score(b->w.kid) * b->factor;
}

static float boost_max_score(Iter *it)
{
    BoostIter *b = (BoostIter *)it;
    return iter_max_score(b->w.kid) * b->factor;
}

static float boost_block_max(Iter *it, DocId t, DocId *block_last)
{
    return wrap_block_max(it, t, block_last) * ((BoostIter *)it)->factor;
}

static uint32_t boost_freq(Iter *it)
{
    Iter *k = ((WrapIter *)it)->kid;
    return k->vt->freq(k);
}

static const uint32_t *boost_positions(Iter *it, uint32_t *n)
{
    Iter *k = ((WrapIter *)it)->kid;
    return k->vt->positions(k, n);
}

static const IterVT boost_vt = {
    .name = "boost", .next = wrap_next, .advance = wrap_advance, .cost = wrap_cost,
    .score = boost_score, .max_score = boost_max_score, .block_max = boost_block_max,
};
static const IterVT boost_freq_vt = {
    .name = "boost", .next = wrap_next, .advance = wrap_advance, .cost = wrap_cost,
    .score = boost_score, .max_score = boost_max_score, .block_max = boost_block_max,
    .freq = boost_freq,
};
static const IterVT boost_pos_vt = {
    .name = "boost", .next = wrap_next, .advance = wrap_advance, .cost = wrap_cost,
    .score = boost_score, .max_score = boost_max_score, .block_max = boost_block_max,
    .freq = boost_freq, .positions = boost_positions,
};

static BoostIter *wrap_new(IterCtx *ctx, Iter *kid, float v, const char *what)
{
    if (!kid) {
        iter_ctx_fail(ctx, QR_EINTERNAL, "%s iterator given a null child", what);
        return NULL;
    }
    if (!isfinite(v) || v < 0.0f) {
        iter_ctx_fail(ctx, QR_EINVAL, "%s must be a finite number >= 0", what);
        qr_error_detail(&ctx->err, "found %g", (double)v);
        return NULL;
    }
    BoostIter *b = ops_alloc(ctx, sizeof *b);
    if (b)
        b->w.kid = kid;
    return b;
}

Iter *iter_boost_new(IterCtx *ctx, Iter *kid, float factor)
{
    BoostIter *b = wrap_new(ctx, kid, factor, "boost");
    if (!b)
        return NULL;
    const IterVT *vt = &boost_vt;
    if (kid->vt->freq)
        vt = kid->vt->positions ? &boost_pos_vt : &boost_freq_vt;
    iter_init(&b->w.base, vt, ctx);
    b->factor = factor;
    return &b->w.base;
}

/* ---- constant score ---- */

static float const_score(Iter *it) { return ((BoostIter *)it)->score; }

static float const_block_max(Iter *it, DocId t, DocId *block_last)
{
    BoostIter *b = (BoostIter *)it;
    *block_last = ITER_END;
    return b->w.kid->doc == ITER_END ? 0.0f : b->score;
}

static const IterVT const_vt = {
    .name = "const_score", .next = wrap_next, .advance = wrap_advance, .cost = wrap_cost,
    .score = const_score, .max_score = const_score, .block_max = const_block_max,
};

Iter *iter_const_score_new(IterCtx *ctx, Iter *kid, float score)
{
    BoostIter *b = wrap_new(ctx, kid, score, "constant score");
    if (!b)
        return NULL;
    iter_init(&b->w.base, &const_vt, ctx);
    b->score = score;
    return &b->w.base;
}

/* ---- count ---- */

uint64_t iter_count(Iter *it)
{
    if (!it || it->doc == ITER_END)
        return 0;
    uint64_t n = it->doc == ITER_NONE ? 0 : 1;
    while (iter_next(it) != ITER_END) {
        if ((++n & 4095) == 0 && iter_ctx_interrupted_now(it->ctx))
            break;
    }
    return n;
}
