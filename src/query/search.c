/*
 * search.c — text search over a table snapshot: query compilation (parse,
 * analyze, expand, collection statistics), per-segment iterator trees,
 * counting, top-k with dynamic pruning, hit materialization and snippets.
 *
 * Layer: query/.  Calls qparse, iter_ops, topk (query/), table, segment,
 * analyzer, postings, termdict, iter_bitmap (index/).
 *
 * Scoring (docs/query-language.md): a term scores the weighted sum over the
 * searched fields of BM25(tf, field length) with per-field statistics:
 *   idf   = ln((N - df + 0.5) / (df + 0.5)), floored at 1e-6 (schema bm25.idf
 *           "robertson", the default) or ln(1 + (N - df + 0.5) / (df + 0.5))
 *           ("lucene"); N and df over every doc of the snapshot's segments
 *           (deleted docs count until a merge drops them, as in Lucene)
 *   avgdl = field tokens / docs having the field
 * Without an explicit field list, a table with schema all_field searches the
 * combined "_all" field (term-key byte QR_ALL_FIELD): every text field's
 * words in one field, so BM25 sees the whole document (BM25F with unit
 * weights), which ranks better than a sum of per-field scores.  A field list
 * ("title^2,body") or field:term scores per field instead.
 * Boosts multiply.  A clause's score is the sum of its parts, summed in
 * clause order, so pruned and exhaustive top-k give identical floats.
 * Prefix and fuzzy terms expand to at most max_expansions dictionary terms
 * scored individually (fuzzy ones scaled by 1 - edits / (len + 1)); a larger
 * expansion switches to a constant-score bitmap so counts stay exact.
 */
#include "index/iter_bitmap.h"
#include "index/postings.h"
#include "index/termdict.h"
#include "query/filter.h"
#include "query/iter_ops.h"
#include "query/qparse.h"
#include "query/query_int.h"
#include "query/search_int.h"
#include "query/topk.h"
#include "store/util.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MEM_CAP (256u << 20)
#define SEARCH_WINDOW_MAX 100000000
#define MAX_PHRASE_TERMS 64

void qr_search_req_init(QrSearchReq *r)
{
    memset(r, 0, sizeof *r);
    r->limit = 10;
    r->max_expansions = 128;
}

/* ---- analyzers pool ---- */

int qsearch_analyzers_new(const QrSchema *s, QsAnalyzers **out, QrError *err)
{
    QsAnalyzers *a = qr_calloc(1, sizeof *a);
    if (!a)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    a->n_fields = s->n_fields;
    for (int f = 0; f < s->n_fields; f++) {
        const QrField *fd = &s->fields[f];
        if (fd->type != QR_FT_TEXT || !fd->indexed)
            continue;
        AnalyzerOpts o = {
            .language = fd->language, .stopwords = fd->stopwords, .accent_fold = fd->accent_fold};
        int rc = analyzer_new(&o, &a->an[f], err);
        if (rc != QR_OK) {
            qsearch_analyzers_free(a);
            return rc;
        }
    }
    *out = a;
    return QR_OK;
}

void qsearch_analyzers_free(QsAnalyzers *a)
{
    if (!a)
        return;
    for (int f = 0; f < QR_MAX_FIELDS; f++)
        analyzer_free(a->an[f]);
    qr_free(a);
}

static QsAnalyzers *an_acquire(QrTable *t, QrError *err)
{
    pthread_mutex_lock(&t->an_lock);
    QsAnalyzers *a = NULL;
    /* a set built for an older schema (fewer fields) is dropped */
    while (t->n_an_free > 0) {
        a = t->an_free[--t->n_an_free];
        if (a->n_fields == qr_table_schema(t)->n_fields)
            break;
        qsearch_analyzers_free(a);
        a = NULL;
    }
    pthread_mutex_unlock(&t->an_lock);
    if (a)
        return a;
    if (qsearch_analyzers_new(qr_table_schema(t), &a, err) != QR_OK)
        return NULL;
    return a;
}

static void an_release(QrTable *t, QsAnalyzers *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&t->an_lock);
    if (t->n_an_free < 16) {
        if (t->n_an_free == t->cap_an_free) {
            int nc = t->cap_an_free ? t->cap_an_free * 2 : 4;
            QsAnalyzers **n = qr_realloc(t->an_free, (size_t)nc * sizeof *n);
            if (n) {
                t->an_free = n;
                t->cap_an_free = nc;
            }
        }
        if (t->n_an_free < t->cap_an_free) {
            t->an_free[t->n_an_free++] = a;
            a = NULL;
        }
    }
    pthread_mutex_unlock(&t->an_lock);
    qsearch_analyzers_free(a);
}

/* ---- compiled query ---- */

typedef struct CTerm {
    int field;
    const char *text; /* arena */
    uint32_t len;
    float weight;     /* field weight * boost (* fuzzy factor) */
    PostScorer sc;    /* idf etc. filled per snapshot; norms per segment */
} CTerm;

typedef enum { CK_TERMS, CK_PHRASE, CK_BITMAP, CK_ALL, CK_BOOL, CK_NONE } CKind;

typedef struct CNode CNode;
struct CNode {
    CKind kind;
    QOccur occur;
    float boost;
    /* CK_TERMS: OR of terms (one term in several fields, or expansions) */
    CTerm *terms;
    int n_terms;
    /* CK_PHRASE: per field group of n_phrase terms */
    int n_phrase;        /* terms per phrase */
    int n_pfields;       /* fields */
    uint32_t *offsets;   /* n_phrase */
    int slop;
    /* CK_BITMAP: expansion too large; per-segment bitmaps built on demand */
    const QNode *src;    /* for re-expansion per segment */
    int *bm_fields;
    int n_bm_fields;
    const char *bm_text;
    uint32_t bm_len;
    int bm_edits;        /* -1 = prefix */
    /* CK_BOOL */
    CNode **kids;
    int n_kids;
    int min_should;
};

/* Sort keys: a column, the score, or the primary key. */
#define MAX_SORT_KEYS 4
enum { SK_SCORE = -1, SK_ID = -2 };
typedef struct SortKey {
    int field;      /* schema field index, SK_SCORE or SK_ID */
    int ct;         /* column type (QrColType) for fields */
    bool desc;
} SortKey;

/* One sort value.  NULL sorts after every value ascending (before it
 * descending), as PostgreSQL's default NULLS LAST / NULLS FIRST. */
typedef struct SVal {
    bool null;
    int64_t i;      /* int64, timestamp, bool */
    double f;       /* float64, _score */
    const char *s;  /* keyword, _id key bytes: borrow the segment (or the cursor) */
    size_t n;
} SVal;

struct Search {
    QrTable *t;
    const QrSchema *schema;
    const QrSearchReq *req;     /* borrows (qr_search's caller) or req_copy */
    QrSearchReq req_copy;       /* search_open's copy of its request */
    QrArena *arena;
    IterCtx ctx;
    Snapshot *snap;             /* owns one reference when snap_owned (qr_search) */
    bool snap_owned;
    QsAnalyzers *an;
    /* the compiled query */
    CNode *root;
    const CTerm **flat;         /* a disjunction of terms (the WAND path), or NULL */
    int n_flat;
    int fields[QR_MAX_FIELDS];  /* searched text fields (QR_ALL_FIELD = "_all") */
    float fweights[QR_MAX_FIELDS];
    int n_fields;
    uint64_t N;                 /* docs in the snapshot */
    double avgdl[256];          /* by term-key byte */
    /* highlight terms: (field, term) */
    CTerm *hl;
    int n_hl, cap_hl;
    /* postings iterators opened (for stats) */
    Iter **opened;
    int n_opened, cap_opened;
    uint64_t docs_scored;
    roaring_bitmap_t **bms;     /* owns: expansion bitmaps, freed at the end */
    int n_bms, cap_bms;
    /* structured filter (query/filter.h) */
    QrFilter *filter_owned;     /* owns: parsed from req->filter */
    const QrFilter *filter;     /* borrows filter_owned; NULL = none */
    roaring_bitmap_t **fbm;     /* owns: per segment, live docs matching the filter
                                   (restricted to text matches when those went first) */
    QrFilterStats fst;
    /* order (explicit sort or search_after) */
    SortKey keys[MAX_SORT_KEYS];
    int n_keys;
    bool sorted;                /* path B: explicit sort or a cursor */
    bool need_score;
    bool has_cursor;
    bool sort_has_id;           /* a sort key is _id (the primary key is read first) */
    SVal cursor[MAX_SORT_KEYS];
    uint8_t cursor_pk[PK_KEY_MAX];
    size_t cursor_pk_len;
};

static void *aalloc(Search *s, size_t n)
{
    void *p = qr_arena_calloc(s->arena, n);
    if (!p)
        iter_ctx_fail(&s->ctx, qr_arena_over_cap(s->arena) ? QR_ELIMIT : QR_ENOMEM,
                      "query exceeded its memory limit");
    return p;
}

static void hl_add(Search *s, int field, const char *text, uint32_t len)
{
    if (s->n_hl == s->cap_hl) {
        int nc = s->cap_hl ? s->cap_hl * 2 : 32;
        CTerm *n = aalloc(s, (size_t)nc * sizeof *n);
        if (!n)
            return;
        if (s->hl)
            memcpy(n, s->hl, (size_t)s->n_hl * sizeof *n);
        s->hl = n;
        s->cap_hl = nc;
    }
    s->hl[s->n_hl++] = (CTerm){.field = field, .text = text, .len = len};
}

/* Sum of df of key over the snapshot's segments. */
static uint64_t global_df(Search *s, int field, const char *text, uint32_t len)
{
    uint64_t df = 0;
    for (int i = 0; i < s->snap->n_segs; i++) {
        TermPostings tp;
        if (seg_term(s->snap->segs[i], field, text, len, &tp))
            df += tp.df;
    }
    return df;
}

static void fill_scorer(Search *s, CTerm *ct)
{
    uint64_t df = global_df(s, ct->field, ct->text, ct->len);
    double N = (double)s->N;
    double idf;
    if (s->schema->idf == QR_IDF_LUCENE) {
        idf = log(1.0 + (N - (double)df + 0.5) / ((double)df + 0.5));
    } else {
        idf = log((N - (double)df + 0.5) / ((double)df + 0.5));
        if (idf < 1e-6)
            idf = 1e-6; /* a word in most documents still counts, a little */
    }
    ct->sc.idf = (float)idf;
    ct->sc.k1 = s->schema->k1;
    ct->sc.b = s->schema->b;
    ct->sc.avgdl = (float)(s->avgdl[ct->field] > 0 ? s->avgdl[ct->field] : 1.0);
    ct->sc.weight = ct->weight;
    ct->sc.norms = NULL;
    ct->sc.n_docs = 0;
}

/* analysis of one text into tokens */
typedef struct TokList {
    Search *s;
    char **text;
    uint32_t *len, *pos;
    int n, cap;
} TokList;

static int tok_sink(void *arg, const Token *tok)
{
    TokList *tl = arg;
    if (tl->n == tl->cap) {
        int nc = tl->cap ? tl->cap * 2 : 8;
        char **nt = aalloc(tl->s, (size_t)nc * sizeof *nt);
        uint32_t *nl = aalloc(tl->s, (size_t)nc * sizeof *nl);
        uint32_t *np = aalloc(tl->s, (size_t)nc * sizeof *np);
        if (!nt || !nl || !np)
            return QR_ENOMEM;
        if (tl->n) {
            memcpy(nt, tl->text, (size_t)tl->n * sizeof *nt);
            memcpy(nl, tl->len, (size_t)tl->n * sizeof *nl);
            memcpy(np, tl->pos, (size_t)tl->n * sizeof *np);
        }
        tl->text = nt;
        tl->len = nl;
        tl->pos = np;
        tl->cap = nc;
    }
    char *c = qr_arena_strndup(tl->s->arena, tok->text, tok->len);
    if (!c)
        return QR_ENOMEM;
    tl->text[tl->n] = c;
    tl->len[tl->n] = tok->len;
    tl->pos[tl->n] = tok->pos;
    tl->n++;
    return 0;
}

/* The analyzer of a field; "_all" uses the first full-text field's. */
static Analyzer *field_analyzer(Search *s, int field)
{
    if (field != QR_ALL_FIELD)
        return field < QR_MAX_FIELDS ? s->an->an[field] : NULL;
    for (int f = 0; f < s->schema->n_fields; f++)
        if (s->an->an[f])
            return s->an->an[f];
    return NULL;
}

static int analyze(Search *s, int field, const char *text, size_t len, unsigned flags,
                   TokList *out)
{
    memset(out, 0, sizeof *out);
    out->s = s;
    Analyzer *an = field_analyzer(s, field);
    if (!an)
        return QR_OK;
    return analyzer_run(an, text, len, 0, flags, tok_sink, out, &s->ctx.err);
}

/* fields a leaf applies to */
static int leaf_fields(Search *s, const QNode *q, int *out, float *w)
{
    if (!q->field) {
        for (int i = 0; i < s->n_fields; i++) {
            out[i] = s->fields[i];
            w[i] = s->fweights[i];
        }
        return s->n_fields;
    }
    int f = schema_field_index(s->schema, q->field);
    if (f < 0 || s->schema->fields[f].type != QR_FT_TEXT || !s->schema->fields[f].indexed) {
        qr_error_set(&s->ctx.err, QR_EINVAL, "field \"%s\" is not a full-text field", q->field);
        qr_error_pos(&s->ctx.err, q->pos, -1, (int32_t)q->pos + 1);
        return -1;
    }
    out[0] = f;
    w[0] = s->schema->fields[f].weight;
    for (int i = 0; i < s->n_fields; i++)
        if (s->fields[i] == f)
            w[0] = s->fweights[i];
    return 1;
}

typedef struct ExpandCtx {
    Search *s;
    int field;
    int edits;        /* -1: prefix */
    uint32_t qlen;
    CTerm *terms;     /* collected, arena */
    int n, cap;
    int max;
    bool overflow;
} ExpandCtx;

static bool expand_has(ExpandCtx *e, const uint8_t *t, size_t n)
{
    for (int i = 0; i < e->n; i++)
        if (e->terms[i].field == e->field && e->terms[i].len == n && !memcmp(e->terms[i].text, t, n))
            return true;
    return false;
}

static int expand_add(ExpandCtx *e, const uint8_t *key, size_t key_len, int dist)
{
    const uint8_t *t = key + 1;
    size_t n = key_len - 1;
    if (expand_has(e, t, n))
        return 0;
    if (e->n >= e->max) {
        e->overflow = true;
        return 1; /* stop */
    }
    if (e->n == e->cap) {
        int nc = e->cap ? e->cap * 2 : 16;
        CTerm *nt = aalloc(e->s, (size_t)nc * sizeof *nt);
        if (!nt)
            return 1;
        if (e->n)
            memcpy(nt, e->terms, (size_t)e->n * sizeof *nt);
        e->terms = nt;
        e->cap = nc;
    }
    char *c = qr_arena_strndup(e->s->arena, (const char *)t, n);
    if (!c)
        return 1;
    float f = dist > 0 ? 1.0f - (float)dist / (float)(e->qlen + 1) : 1.0f;
    e->terms[e->n++] = (CTerm){.field = e->field, .text = c, .len = (uint32_t)n, .weight = f};
    return 0;
}

static int prefix_cb(void *arg, const uint8_t *key, size_t key_len, const TermPostings *tp)
{
    (void)tp;
    return expand_add(arg, key, key_len, 0);
}

static int fuzzy_cb(void *arg, const uint8_t *key, size_t key_len, const TermPostings *tp, int dist)
{
    (void)tp;
    return expand_add(arg, key, key_len, dist);
}

/* Run a prefix/fuzzy expansion of `text` in `field` over one segment. */
static int expand_segment(Search *s, Segment *seg, ExpandCtx *e, const char *text, uint32_t len,
                          size_t cap)
{
    uint8_t kb[1 + 1024];
    if (len > 1024)
        len = 1024;
    kb[0] = (uint8_t)e->field;
    memcpy(kb + 1, text, len);
    QrError lerr;
    qr_error_clear(&lerr);
    int rc;
    if (e->edits < 0)
        rc = td_prefix(seg_terms(seg), kb, len + 1, cap, prefix_cb, e, &lerr);
    else
        rc = td_fuzzy_ctx(seg_terms(seg), kb, 1, kb + 1, len, e->edits, cap, fuzzy_cb, e, &s->ctx,
                          &lerr);
    if (rc == QR_ELIMIT) {
        e->overflow = true;
        return QR_OK;
    }
    if (rc != QR_OK)
        qr_error_copy(&s->ctx.err, &lerr);
    return rc;
}

static CNode *compile(Search *s, const QNode *q);

static CNode *compile_terms_leaf(Search *s, const QNode *q, CNode *c)
{
    int fl[QR_MAX_FIELDS];
    float fw[QR_MAX_FIELDS];
    int nf = leaf_fields(s, q, fl, fw);
    if (nf < 0)
        return NULL;
    if (q->kind == QN_TERM || q->kind == QN_PHRASE) {
        /* analyze per field; phrases (or terms that split) become phrases */
        TokList tl[QR_MAX_FIELDS];
        int n_tok = -1;
        bool same = true;
        for (int i = 0; i < nf; i++) {
            if (analyze(s, fl[i], q->text, q->text_len, 0, &tl[i]) != QR_OK)
                return NULL;
            if (n_tok >= 0 && tl[i].n != n_tok)
                same = false;
            if (tl[i].n > n_tok)
                n_tok = tl[i].n;
            for (int k = 0; k < tl[i].n; k++)
                hl_add(s, fl[i], tl[i].text[k], tl[i].len[k]);
        }
        if (n_tok <= 0) {
            c->kind = CK_NONE; /* only stop words / punctuation */
            return c;
        }
        if (n_tok == 1 && same) {
            c->kind = CK_TERMS;
            c->terms = aalloc(s, (size_t)nf * sizeof *c->terms);
            if (!c->terms)
                return NULL;
            for (int i = 0; i < nf; i++) {
                if (tl[i].n == 0)
                    continue;
                CTerm *ct = &c->terms[c->n_terms++];
                *ct = (CTerm){.field = fl[i], .text = tl[i].text[0], .len = tl[i].len[0],
                              .weight = fw[i] * q->boost};
                fill_scorer(s, ct);
            }
            return c;
        }
        if (n_tok > MAX_PHRASE_TERMS) {
            qr_error_set(&s->ctx.err, QR_ELIMIT, "phrase has %d terms (at most %d)", n_tok,
                         MAX_PHRASE_TERMS);
            return NULL;
        }
        /* phrase: fields whose analysis has n_tok tokens (others cannot match) */
        c->kind = CK_PHRASE;
        c->n_phrase = n_tok;
        c->slop = q->kind == QN_PHRASE ? q->slop : 0;
        c->terms = aalloc(s, (size_t)nf * (size_t)n_tok * sizeof *c->terms);
        c->offsets = aalloc(s, (size_t)n_tok * sizeof *c->offsets);
        if (!c->terms || !c->offsets)
            return NULL;
        for (int i = 0; i < nf; i++) {
            if (tl[i].n != n_tok)
                continue;
            for (int k = 0; k < n_tok; k++) {
                CTerm *ct = &c->terms[c->n_pfields * n_tok + k];
                *ct = (CTerm){.field = fl[i], .text = tl[i].text[k], .len = tl[i].len[k],
                              .weight = fw[i] * q->boost};
                fill_scorer(s, ct);
                c->offsets[k] = tl[i].pos[k] - tl[i].pos[0];
            }
            c->n_pfields++;
        }
        return c;
    }
    /* prefix / fuzzy: fold without stemming, then expand over every segment */
    ExpandCtx e = {.s = s, .edits = q->kind == QN_PREFIX ? -1 : q->edits,
                   .max = s->req->max_expansions > 0 ? s->req->max_expansions : 128};
    bool has_words = false; /* some field's analysis gave a word */
    for (int i = 0; i < nf; i++) {
        TokList tl;
        if (analyze(s, fl[i], q->text, q->text_len, ANALYZE_NO_STEM | ANALYZE_KEEP_STOPWORDS,
                    &tl) != QR_OK)
            return NULL;
        has_words |= tl.n > 0;
        if (tl.n != 1)
            continue; /* "foo-bar*" folds to two words: nothing can match one term */
        e.field = fl[i];
        e.qlen = tl.len[0];
        int before = e.n;
        for (int k = 0; k < s->snap->n_segs && !e.overflow; k++)
            if (expand_segment(s, s->snap->segs[k], &e, tl.text[0], tl.len[0],
                               (size_t)e.max + 1) != QR_OK)
                return NULL;
        for (int k = before; k < e.n; k++) {
            e.terms[k].weight *= fw[i] * q->boost;
            fill_scorer(s, &e.terms[k]);
            hl_add(s, fl[i], e.terms[k].text, e.terms[k].len);
        }
        if (e.overflow) {
            c->kind = CK_BITMAP;
            c->bm_fields = aalloc(s, (size_t)nf * sizeof(int));
            if (!c->bm_fields)
                return NULL;
            for (int j = 0; j < nf; j++)
                c->bm_fields[j] = fl[j];
            c->n_bm_fields = nf;
            c->bm_text = tl.text[0];
            c->bm_len = tl.len[0];
            c->bm_edits = e.edits;
            c->boost = q->boost;
            return c;
        }
    }
    /* no expansion matches nothing (+zzz* must not drop out of its group);
     * only text that analyzes to no word drops out, as for terms */
    c->kind = has_words ? CK_TERMS : CK_NONE;
    c->terms = e.terms;
    c->n_terms = e.n;
    return c;
}

static CNode *compile(Search *s, const QNode *q)
{
    if (iter_ctx_interrupted(&s->ctx)) /* expansions run here, per leaf and segment */
        return NULL;
    CNode *c = aalloc(s, sizeof *c);
    if (!c)
        return NULL;
    c->occur = q->occur;
    c->boost = 1.0f;
    c->src = q;
    switch (q->kind) {
    case QN_ALL:
        c->kind = CK_ALL;
        c->boost = q->boost;
        return c;
    case QN_BOOL:
        c->kind = CK_BOOL;
        c->boost = q->boost;
        c->min_should = q->min_should;
        c->kids = aalloc(s, (size_t)q->n_kids * sizeof *c->kids);
        if (!c->kids)
            return NULL;
        for (int i = 0; i < q->n_kids; i++) {
            CNode *k = compile(s, q->kids[i]);
            if (!k)
                return NULL;
            c->kids[c->n_kids++] = k;
        }
        return c;
    default:
        return compile_terms_leaf(s, q, c);
    }
}

/* ---- per-segment iterator trees ---- */

static void note_opened(Search *s, Iter *it)
{
    if (s->n_opened == s->cap_opened) {
        int nc = s->cap_opened ? s->cap_opened * 2 : 32;
        Iter **n = aalloc(s, (size_t)nc * sizeof *n);
        if (!n)
            return;
        if (s->n_opened)
            memcpy(n, s->opened, (size_t)s->n_opened * sizeof *n);
        s->opened = n;
        s->cap_opened = nc;
    }
    s->opened[s->n_opened++] = it;
}

static Iter *term_iter(Search *s, Segment *seg, const CTerm *ct, bool scoring, bool positions)
{
    TermPostings tp;
    if (!seg_term(seg, ct->field, ct->text, ct->len, &tp))
        return NULL;
    PostScorer *sc = NULL;
    if (scoring) {
        sc = aalloc(s, sizeof *sc);
        if (!sc)
            return NULL;
        *sc = ct->sc;
        sc->norms = seg_norms(seg, ct->field);
        sc->n_docs = seg_n_docs(seg);
        if (!sc->norms)
            return NULL;
    }
    Iter *it = seg_postings(seg, &s->ctx, &tp, sc, positions);
    if (it)
        note_opened(s, it);
    return it;
}

typedef struct BmCtx {
    Search *s;
    Segment *seg;
    roaring_bitmap_t *bm;
} BmCtx;

static int bm_add_term(void *arg, const uint8_t *key, size_t key_len, const TermPostings *tp)
{
    (void)key;
    (void)key_len;
    BmCtx *b = arg;
    Iter *it = seg_postings(b->seg, &b->s->ctx, tp, NULL, false);
    if (!it)
        return 1;
    for (DocId d = iter_next(it); d != ITER_END; d = iter_next(it))
        roaring_bitmap_add(b->bm, (uint32_t)d);
    iter_close(it);
    return b->s->ctx.err.code != QR_OK;
}

static int bm_add_fuzzy(void *arg, const uint8_t *key, size_t key_len, const TermPostings *tp,
                        int dist)
{
    (void)dist;
    return bm_add_term(arg, key, key_len, tp);
}

static Iter *bitmap_leaf(Search *s, Segment *seg, const CNode *c, bool scoring)
{
    roaring_bitmap_t *bm = roaring_bitmap_create();
    if (!bm) {
        iter_ctx_fail(&s->ctx, QR_ENOMEM, "out of memory");
        return NULL;
    }
    BmCtx b = {s, seg, bm};
    for (int i = 0; i < c->n_bm_fields; i++) {
        uint8_t kb[1 + 1024];
        uint32_t len = c->bm_len > 1024 ? 1024 : c->bm_len;
        kb[0] = (uint8_t)c->bm_fields[i];
        memcpy(kb + 1, c->bm_text, len);
        QrError lerr;
        qr_error_clear(&lerr);
        int rc = c->bm_edits < 0
                     ? td_prefix(seg_terms(seg), kb, len + 1, SIZE_MAX, bm_add_term, &b, &lerr)
                     : td_fuzzy_ctx(seg_terms(seg), kb, 1, kb + 1, len, c->bm_edits, SIZE_MAX,
                                    bm_add_fuzzy, &b, &s->ctx, &lerr);
        if (rc != QR_OK) {
            qr_error_copy(&s->ctx.err, &lerr);
            break;
        }
    }
    /* the bitmap lives as long as the query: registered for cleanup */
    if (s->n_bms == s->cap_bms) {
        int nc = s->cap_bms ? s->cap_bms * 2 : 8;
        roaring_bitmap_t **n = aalloc(s, (size_t)nc * sizeof *n);
        if (!n) {
            roaring_bitmap_free(bm);
            return NULL;
        }
        if (s->n_bms)
            memcpy(n, s->bms, (size_t)s->n_bms * sizeof *n);
        s->bms = n;
        s->cap_bms = nc;
    }
    s->bms[s->n_bms++] = bm;
    Iter *it = iter_bitmap_new(&s->ctx, bm);
    if (it && scoring)
        it = iter_const_score_new(&s->ctx, it, c->boost);
    return it;
}

static Iter *build(Search *s, Segment *seg, const CNode *c, bool scoring);

static Iter *or_of(Search *s, Iter **v, int n)
{
    if (n == 0)
        return NULL;
    if (n == 1)
        return v[0];
    return iter_or_new(&s->ctx, v, n, 1);
}

static Iter *build(Search *s, Segment *seg, const CNode *c, bool scoring)
{
    /* a tree of hundreds of expanded prefixes opens tens of thousands of
     * postings per segment: the deadline is watched while it is built */
    if (iter_ctx_interrupted(&s->ctx))
        return NULL;
    switch (c->kind) {
    case CK_NONE:
        return NULL;
    case CK_ALL: {
        Iter *it = iter_all_new(&s->ctx, seg_n_docs(seg));
        if (it && scoring)
            it = iter_const_score_new(&s->ctx, it, c->boost);
        return it;
    }
    case CK_TERMS: {
        Iter **v = aalloc(s, ((size_t)c->n_terms + 1) * sizeof *v);
        if (!v)
            return NULL;
        int n = 0;
        for (int i = 0; i < c->n_terms; i++) {
            Iter *it = term_iter(s, seg, &c->terms[i], scoring, false);
            if (it)
                v[n++] = it;
        }
        return or_of(s, v, n);
    }
    case CK_PHRASE: {
        Iter **v = aalloc(s, ((size_t)c->n_pfields + 1) * sizeof *v);
        Iter **pt = aalloc(s, (size_t)c->n_phrase * sizeof *pt);
        if (!v || !pt)
            return NULL;
        int n = 0;
        for (int f = 0; f < c->n_pfields; f++) {
            bool all = true;
            for (int k = 0; k < c->n_phrase && all; k++) {
                pt[k] = term_iter(s, seg, &c->terms[f * c->n_phrase + k], scoring, true);
                all = pt[k] != NULL;
            }
            if (!all)
                continue;
            Iter **copy = aalloc(s, (size_t)c->n_phrase * sizeof *copy);
            if (!copy)
                return NULL;
            memcpy(copy, pt, (size_t)c->n_phrase * sizeof *copy);
            Iter *ph = iter_phrase_new(&s->ctx, copy, c->offsets, c->n_phrase, c->slop);
            if (ph)
                v[n++] = ph;
        }
        return or_of(s, v, n);
    }
    case CK_BITMAP:
        return bitmap_leaf(s, seg, c, scoring);
    case CK_BOOL: {
        Iter **must = aalloc(s, (size_t)c->n_kids * sizeof *must);
        Iter **should = aalloc(s, (size_t)c->n_kids * sizeof *should);
        Iter **not = aalloc(s, (size_t)c->n_kids * sizeof *not);
        if (!must || !should || !not)
            return NULL;
        int nm = 0, ns = 0, nn = 0, n_must_total = 0;
        for (int i = 0; i < c->n_kids; i++) {
            const CNode *k = c->kids[i];
            Iter *it = build(s, seg, k, scoring && k->occur != QO_MUST_NOT);
            if (s->ctx.err.code != QR_OK)
                return NULL;
            if (k->occur == QO_MUST) {
                n_must_total++;
                if (!it && k->kind != CK_NONE)
                    return NULL; /* a required clause matches nothing here */
                if (it)
                    must[nm++] = it;
            } else if (k->occur == QO_SHOULD) {
                if (it)
                    should[ns++] = it;
            } else if (it) {
                not[nn++] = it;
            }
        }
        Iter *base = NULL;
        if (nm) {
            base = nm == 1 ? must[0] : iter_and_new(&s->ctx, must, nm);
            if (ns)
                base = iter_req_opt_new(&s->ctx, base, or_of(s, should, ns));
        } else if (ns) {
            int ms = c->min_should > 1 ? c->min_should : 1;
            if (ms > ns)
                return NULL;
            base = ms == 1 ? or_of(s, should, ns) : iter_or_new(&s->ctx, should, ns, ms);
        } else if (n_must_total == 0 && c->min_should == 0) {
            /* only negative clauses: everything minus them */
            base = iter_all_new(&s->ctx, seg_n_docs(seg));
            if (base && scoring)
                base = iter_const_score_new(&s->ctx, base, 0.0f);
        } else if (n_must_total > 0) {
            /* required clauses were all stop words: match everything they allow */
            base = iter_all_new(&s->ctx, seg_n_docs(seg));
            if (base && scoring)
                base = iter_const_score_new(&s->ctx, base, 0.0f);
        }
        if (!base)
            return NULL;
        if (nn)
            base = iter_andnot_new(&s->ctx, base, or_of(s, not, nn));
        if (base && scoring && c->boost != 1.0f)
            base = iter_boost_new(&s->ctx, base, c->boost);
        return base;
    }
    }
    return NULL;
}

/* ---- strategies ---- */

/* A disjunction of plain terms (possibly over several fields): the WAND
 * path.  Fills the flattened term list in scoring order. */
static bool flat_or_terms(Search *s, const CNode *c, const CTerm ***out, int *n)
{
    if (c->kind == CK_TERMS) {
        const CTerm **v = aalloc(s, ((size_t)c->n_terms + 1) * sizeof *v);
        if (!v)
            return false;
        for (int i = 0; i < c->n_terms; i++)
            v[i] = &c->terms[i];
        *out = v;
        *n = c->n_terms;
        return true;
    }
    if (c->kind != CK_BOOL || c->boost != 1.0f || c->min_should > 1)
        return false;
    int total = 0;
    for (int i = 0; i < c->n_kids; i++) {
        const CNode *k = c->kids[i];
        if (k->occur != QO_SHOULD || (k->kind != CK_TERMS && k->kind != CK_NONE))
            return false;
        total += k->kind == CK_TERMS ? k->n_terms : 0;
    }
    const CTerm **v = aalloc(s, ((size_t)total + 1) * sizeof *v);
    if (!v)
        return false;
    int m = 0;
    for (int i = 0; i < c->n_kids; i++)
        if (c->kids[i]->kind == CK_TERMS)
            for (int j = 0; j < c->kids[i]->n_terms; j++)
                v[m++] = &c->kids[i]->terms[j];
    *out = v;
    *n = m;
    return true;
}

static bool flat_and(const CNode *c)
{
    if (c->kind != CK_BOOL || c->boost != 1.0f || c->n_kids < 2)
        return false;
    for (int i = 0; i < c->n_kids; i++)
        if (c->kids[i]->occur != QO_MUST || c->kids[i]->kind != CK_TERMS)
            return false;
    return true;
}

static roaring_bitmap_t *seg_filter(Search *s, int i);

/* ---- per segment: the API of search_int.h ---- */

Iter *search_seg_iter(Search *s, int si, bool scoring)
{
    return build(s, s->snap->segs[si], s->root, scoring);
}

uint64_t search_seg_count(Search *s, int i, const roaring_bitmap_t *fb)
{
    Segment *seg = s->snap->segs[i];
    const CNode *root = s->root;
    if (fb) {
        /* the filter's live docs, intersected with the text */
        if (root->kind == CK_ALL)
            return roaring_bitmap_get_cardinality(fb);
        Iter *v[2] = {build(s, seg, root, false), iter_bitmap_new(&s->ctx, fb)};
        if (!v[0] || !v[1])
            return 0;
        Iter *both = iter_and_new(&s->ctx, v, 2);
        return both ? iter_count(both) : 0;
    }
    Iter *it = build(s, seg, root, false);
    if (!it)
        return 0;
    if (post_iter_is(it)) {
        /* one term: count whole decoded blocks, skipping deleted docs */
        const roaring_bitmap_t *dels = s->snap->dels[i];
        uint32_t buf[512];
        uint64_t n = 0;
        size_t k;
        while ((k = post_iter_fill(it, buf, 512)) > 0) {
            if (!dels) {
                n += k;
                continue;
            }
            for (size_t j = 0; j < k; j++)
                n += !roaring_bitmap_contains(dels, buf[j]);
        }
        return n;
    }
    if (s->snap->dels[i]) {
        Iter *d = iter_bitmap_new(&s->ctx, s->snap->dels[i]);
        if (!d)
            return 0;
        it = iter_andnot_new(&s->ctx, it, d);
        if (!it)
            return 0;
    }
    return iter_count(it);
}

/* qr_search's count of segment i: one B-tree'd filter predicate alone is
 * counted from subtree counts, anything else through search_seg_count. */
static uint64_t count_segment(Search *s, int i)
{
    Segment *seg = s->snap->segs[i];
    if (s->filter && s->root->kind == CK_ALL && !s->snap->dels[i] && !s->fbm[i] &&
        (s->req->access_path == QR_ACCESS_AUTO || s->req->access_path == QR_ACCESS_BTREE)) {
        FilterSeg *fs;
        QrError e;
        qr_error_clear(&e);
        if (filter_seg_compile(s->filter, seg, &fs, &e) == QR_OK) {
            uint64_t n;
            bool done = filter_seg_btree_count(fs, &n, &s->fst);
            filter_seg_free(fs);
            if (done)
                return n;
        }
    }
    roaring_bitmap_t *fb = NULL;
    if (s->filter && !(fb = seg_filter(s, i)))
        return 0;
    return search_seg_count(s, i, fb);
}

const char *search_strategy(const Search *s)
{
    return s->req->exhaustive ? "exhaustive"
           : s->flat          ? "wand"
           : flat_and(s->root) ? "and"
                               : "exhaustive";
}

int search_seg_topk(Search *s, int i, const roaring_bitmap_t *fb, TopK *tk)
{
    Segment *seg = s->snap->segs[i];
    const CNode *root = s->root;
    const roaring_bitmap_t *dels = s->snap->dels[i];
    DocId base = s->snap->base[i];
    if (s->ctx.err.code != QR_OK)
        return s->ctx.err.code;
    if (fb && roaring_bitmap_is_empty(fb))
        return QR_OK;
    /* the live docs a hit must be in: the filter's bitmap, or all but deletes */
#define LIVE_FILTER()                                                                          \
    (fb ? iter_bitmap_new(&s->ctx, fb) : dels ? iter_live_new(&s->ctx, seg_n_docs(seg), dels) \
                                              : NULL)
    if (s->flat) {
        Iter **v = aalloc(s, ((size_t)s->n_flat + 1) * sizeof *v);
        if (!v)
            return s->ctx.err.code;
        int n = 0;
        for (int k = 0; k < s->n_flat; k++) {
            Iter *it = term_iter(s, seg, s->flat[k], true, false);
            if (it)
                v[n++] = it;
        }
        if (n == 0)
            return s->ctx.err.code;
        Iter *filter = LIVE_FILTER();
        if (s->req->exhaustive) {
            Iter *root_it = n == 1 ? v[0] : iter_or_new(&s->ctx, v, n, 1);
            if (root_it && filter) {
                Iter **both = aalloc(s, 2 * sizeof *both);
                if (!both)
                    return s->ctx.err.code;
                both[0] = root_it;
                both[1] = filter;
                root_it = iter_and_new(&s->ctx, both, 2);
            }
            return root_it ? topk_collect_all(root_it, base, tk) : (int)s->ctx.err.code;
        }
        return topk_wand(&s->ctx, v, n, filter, base, tk);
    }
    if (flat_and(root) && !s->req->exhaustive) {
        Iter **v = aalloc(s, (size_t)root->n_kids * sizeof *v);
        if (!v)
            return s->ctx.err.code;
        for (int k = 0; k < root->n_kids; k++) {
            v[k] = build(s, seg, root->kids[k], true);
            if (!v[k])
                return s->ctx.err.code; /* a required term is absent here */
        }
        Iter *filter = LIVE_FILTER();
        return topk_and(&s->ctx, v, root->n_kids, filter, base, tk);
    }
#undef LIVE_FILTER
    SearchCursor c;
    search_seg_cursor(s, i, true, fb, &c);
    return c.it ? topk_collect_all(c.it, base, tk) : (int)s->ctx.err.code;
}

/* qr_search's ranking of segment i: its filter bitmap, then the shared path. */
static int rank_segment(Search *s, int i, TopK *tk)
{
    const roaring_bitmap_t *fb = seg_filter(s, i);
    if (s->ctx.err.code != QR_OK)
        return s->ctx.err.code;
    return search_seg_topk(s, i, fb, tk);
}

void search_seg_cursor(Search *s, int i, bool scoring, const roaring_bitmap_t *fb, SearchCursor *c)
{
    const roaring_bitmap_t *dels = s->snap->dels[i];
    memset(c, 0, sizeof *c);
    c->scoring = scoring;
    if (fb && roaring_bitmap_is_empty(fb))
        return;
    Iter *it = build(s, s->snap->segs[i], s->root, scoring);
    if (!it)
        return;
    if (fb) {
        Iter **v = aalloc(s, 2 * sizeof *v);
        if (!v || !(v[1] = iter_bitmap_new(&s->ctx, fb)))
            return;
        v[0] = it;
        it = iter_and_new(&s->ctx, v, 2);
    } else if (post_iter_is(it) && !scoring) {
        c->batch = true; /* whole decoded blocks; deletes skipped on the way */
        c->dels = dels;
    } else if (dels) {
        Iter *d = iter_bitmap_new(&s->ctx, dels);
        it = d ? iter_andnot_new(&s->ctx, it, d) : NULL;
    }
    c->it = it;
}

size_t search_cursor_next(SearchCursor *c, uint32_t *docs, float *scores, size_t cap)
{
    if (!c->it)
        return 0;
    size_t n = 0;
    if (c->batch) {
        while (n == 0) {
            size_t k = post_iter_fill(c->it, docs, cap);
            if (k == 0)
                return 0;
            if (!c->dels)
                return k;
            for (size_t j = 0; j < k; j++)
                if (!roaring_bitmap_contains(c->dels, docs[j]))
                    docs[n++] = docs[j];
        }
        return n;
    }
    while (n < cap) {
        DocId d = iter_next(c->it);
        if (d == ITER_END)
            break;
        docs[n] = (uint32_t)d;
        if (c->scoring)
            scores[n] = iter_score(c->it);
        n++;
    }
    return n;
}

IterCtx *search_ctx(Search *s) { return &s->ctx; }

void search_stats(const Search *s, uint64_t *decoded, uint64_t *skipped)
{
    *decoded = *skipped = 0;
    for (int i = 0; i < s->n_opened; i++) {
        *decoded += s->opened[i]->stats.blocks_decoded;
        *skipped += s->opened[i]->stats.blocks_skipped;
    }
}
/* ---- snippets ---- */

/* A compiled query's highlight terms (search_hl). */
struct SearchHl {
    const CTerm *terms;       /* (field, text) of every analyzed query term */
    int n;
};

typedef struct SnipTok {
    uint32_t start, end;
    int match; /* index of the matched highlight term + 1, 0 = none */
} SnipTok;

typedef struct SnipCtx {
    const SearchHl *hl;
    bool any_field;           /* a term matches whatever field it was searched in */
    int field;
    SnipTok *toks;            /* owns (qr_malloc) */
    int n, cap;
} SnipCtx;

static int snip_sink(void *arg, const Token *tok)
{
    SnipCtx *sc = arg;
    if (sc->n == sc->cap) {
        int nc = sc->cap ? sc->cap * 2 : 256;
        SnipTok *nt = qr_realloc(sc->toks, (size_t)nc * sizeof *nt);
        if (!nt)
            return QR_ENOMEM;
        sc->toks = nt;
        sc->cap = nc;
    }
    int m = 0;
    for (int i = 0; i < sc->hl->n; i++) {
        const CTerm *h = &sc->hl->terms[i];
        if ((sc->any_field || h->field == sc->field || h->field == QR_ALL_FIELD) &&
            h->len == tok->len && !memcmp(h->text, tok->text, tok->len)) {
            m = i + 1;
            break;
        }
    }
    sc->toks[sc->n++] = (SnipTok){tok->start, tok->end, m};
    return 0;
}

#define SNIP_WINDOW 32

/* The passage of one text of field sc->field around its best window (most
 * distinct matched terms, then most matches), or NULL without a match. */
static char *snippet_one(Analyzer *an, SnipCtx *sc, const char *text, size_t tlen,
                         const char *pre, const char *post, QrArena *arena)
{
    sc->n = 0;
    QrError e;
    qr_error_clear(&e);
    if (!an || analyzer_run(an, text, tlen, 0, 0, snip_sink, sc, &e) != QR_OK)
        return NULL;
    int best = -1, best_distinct = 0, best_hits = 0;
    for (int w = 0; w < sc->n; w++) {
        if (!sc->toks[w].match)
            continue;
        int distinct = 0, hits = 0;
        uint64_t seen = 0;
        for (int k = w; k < sc->n && k < w + SNIP_WINDOW; k++) {
            if (!sc->toks[k].match)
                continue;
            hits++;
            uint64_t bit = 1ull << ((sc->toks[k].match - 1) & 63);
            if (!(seen & bit)) {
                seen |= bit;
                distinct++;
            }
        }
        if (distinct > best_distinct || (distinct == best_distinct && hits > best_hits)) {
            best = w;
            best_distinct = distinct;
            best_hits = hits;
        }
    }
    if (best < 0)
        return NULL;
    /* start a few tokens before the first match for context */
    int from = best >= 4 ? best - 4 : 0;
    int to = from + SNIP_WINDOW < sc->n ? from + SNIP_WINDOW : sc->n;
    QrBuf b;
    qr_buf_init(&b);
    if (from > 0)
        qr_buf_append(&b, "…", strlen("…"));
    uint32_t cur = sc->toks[from].start;
    for (int k = from; k < to; k++) {
        SnipTok *t = &sc->toks[k];
        /* parts of one word ("aiohttp.web") share or overlap offsets:
         * a span already written is not written again */
        if (t->end <= cur || t->end > tlen)
            continue;
        uint32_t st = t->start > cur ? t->start : cur;
        qr_buf_append(&b, text + cur, st - cur);
        if (t->match)
            qr_buf_append(&b, pre, strlen(pre));
        qr_buf_append(&b, text + st, t->end - st);
        if (t->match)
            qr_buf_append(&b, post, strlen(post));
        cur = t->end;
    }
    if (to < sc->n)
        qr_buf_append(&b, "…", strlen("…"));
    char *out = NULL;
    size_t n = 0;
    char *txt = (char *)qr_buf_steal(&b, &n);
    if (txt) {
        out = qr_arena_strndup(arena, txt, n);
        qr_free(txt);
    }
    return out;
}

/* The snippet of texts[0..n) (search_int.h search_hl_snippet). */
static char *snippet_of(const QsAnalyzers *an, const SearchHl *hl, bool any_field,
                        const char *pre, const char *post, const int *fields,
                        const char *const *texts, const size_t *lens, int n, QrArena *arena)
{
    pre = pre ? pre : "<b>";
    post = post ? post : "</b>";
    SnipCtx sc = {.hl = hl, .any_field = any_field};
    char *out = NULL;
    int fallback = -1;
    for (int i = 0; i < n && !out; i++) {
        if (!texts[i])
            continue;
        if (fallback < 0)
            fallback = i;
        int f = fields[i];
        sc.field = f;
        out = snippet_one(f >= 0 && f < QR_MAX_FIELDS ? an->an[f] : NULL, &sc, texts[i], lens[i],
                          pre, post, arena);
    }
    if (!out && fallback >= 0) {
        const char *t = texts[fallback];
        size_t k = lens[fallback];
        if (k > 200) {
            k = 200;
            while (k > 0 && ((unsigned char)t[k] & 0xC0) == 0x80)
                k--; /* do not cut a UTF-8 sequence */
        }
        out = qr_arena_strndup(arena, t, k);
    }
    qr_free(sc.toks);
    return out;
}

/* A hit's snippet from its stored document: the searched fields' strings
 * (every value of an array field, in turn), every text field for "_all". */
static char *make_snippet(Search *s, const char *json, size_t len)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root)
        return NULL;
    int sfields[QR_MAX_FIELDS], n_sf = 0;
    for (int fi = 0; fi < s->n_fields; fi++) {
        if (s->fields[fi] != QR_ALL_FIELD) {
            sfields[n_sf++] = s->fields[fi];
            continue;
        }
        for (int f = 0; f < s->schema->n_fields; f++)
            if (s->an->an[f])
                sfields[n_sf++] = f;
    }
    int n = 0, cap = 0;
    int *fields = NULL;
    const char **texts = NULL;
    size_t *lens = NULL;
    bool ok = true;
    for (int fi = 0; fi < n_sf && ok; fi++) {
        const cJSON *fv = cJSON_GetObjectItemCaseSensitive(root, s->schema->fields[sfields[fi]].name);
        const cJSON *v = cJSON_IsArray(fv) ? fv->child : fv;
        for (; v && ok; v = cJSON_IsArray(fv) ? v->next : NULL) {
            if (!cJSON_IsString(v))
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                int *nf = qr_realloc(fields, (size_t)cap * sizeof *nf);
                fields = nf ? nf : fields;
                const char **nt = qr_realloc(texts, (size_t)cap * sizeof *nt);
                texts = nt ? nt : texts;
                size_t *nl = qr_realloc(lens, (size_t)cap * sizeof *nl);
                lens = nl ? nl : lens;
                if (!(ok = nf && nt && nl))
                    break;
            }
            fields[n] = sfields[fi];
            texts[n] = v->valuestring;
            lens[n++] = strlen(v->valuestring);
        }
    }
    SearchHl hl = {s->hl, s->n_hl};
    char *out = ok ? snippet_of(s->an, &hl, false, s->req->hl_pre, s->req->hl_post, fields, texts,
                                lens, n, s->arena)
                   : NULL;
    qr_free(fields);
    qr_free(texts);
    qr_free(lens);
    cJSON_Delete(root);
    return out;
}

SearchHl *search_hl(Search *s, QrArena *keep)
{
    SearchHl *h = qr_arena_calloc(keep, sizeof *h);
    CTerm *t = h ? qr_arena_alloc(keep, ((size_t)s->n_hl + 1) * sizeof *t) : NULL;
    for (int i = 0; t && i < s->n_hl; i++) {
        t[i] = (CTerm){.field = s->hl[i].field, .len = s->hl[i].len};
        if (!(t[i].text = qr_arena_strndup(keep, s->hl[i].text, s->hl[i].len)))
            t = NULL;
    }
    if (!t) {
        iter_ctx_fail(&s->ctx, QR_ELIMIT, "query exceeded its memory limit");
        return NULL;
    }
    h->terms = t;
    h->n = s->n_hl;
    return h;
}

int search_hl_snippet(QrTable *t, const SearchHl *hl, bool any_field, const char *pre,
                      const char *post, const int *fields, const char *const *texts,
                      const size_t *lens, int n, QrArena *arena, char **out, QrError *err)
{
    *out = NULL;
    bool any_text = false;
    for (int i = 0; i < n; i++)
        any_text |= texts[i] != NULL;
    if (!any_text)
        return QR_OK;
    QsAnalyzers *an = an_acquire(t, err);
    if (!an)
        return err ? err->code : QR_ENOMEM;
    *out = snippet_of(an, hl, any_field, pre, post, fields, texts, lens, n, arena);
    an_release(t, an);
    return *out ? QR_OK : qr_error_set(err, QR_ENOMEM, "out of memory");
}

/* Matching live docs in doc order, unscored: offset/limit applied, total
 * exact.  Hits get ids only (no scores). */
static int collect_unordered(Search *s, QrSearchRes *res)
{
    uint64_t from = (uint64_t)s->req->offset, want = from + (uint64_t)s->req->limit;
    size_t cap = 1024, n = 0;
    DocId *docs = qr_malloc(cap * sizeof *docs); /* heap: it may grow large */
    uint32_t buf[512];
    uint64_t seen = 0;
    if (!docs)
        return qr_error_set(&s->ctx.err, QR_ENOMEM, "out of memory");
    for (int i = 0; i < s->snap->n_segs && s->ctx.err.code == QR_OK; i++) {
        const roaring_bitmap_t *fb = NULL;
        if (s->filter) {
            /* no filter work where the text matches nothing */
            if (!build(s, s->snap->segs[i], s->root, false) || !(fb = seg_filter(s, i)))
                continue;
        }
        SearchCursor c;
        search_seg_cursor(s, i, false, fb, &c);
        size_t k;
        while ((k = search_cursor_next(&c, buf, NULL, 512)) > 0 &&
               !iter_ctx_interrupted_now(&s->ctx)) {
            for (size_t j = 0; j < k; j++) {
                if (seen >= from && seen < want) {
                    if (n == cap) {
                        DocId *nd = qr_realloc(docs, cap * 2 * sizeof *nd);
                        if (!nd) {
                            qr_free(docs);
                            return qr_error_set(&s->ctx.err, QR_ENOMEM, "out of memory");
                        }
                        docs = nd;
                        cap *= 2;
                    }
                    docs[n++] = s->snap->base[i] + buf[j];
                }
                seen++;
            }
            if ((seen >= want && s->req->skip_total) || iter_ctx_interrupted(&s->ctx))
                break;
        }
    }
    res->total = seen;
    res->stats.strategy = "unordered";
    res->hits = aalloc(s, (n + 1) * sizeof *res->hits);
    QrBuf b;
    qr_buf_init(&b);
    for (size_t h = 0; res->hits && h < n; h++) {
        QrHit *hit = &res->hits[res->n_hits++];
        hit->doc = docs[h];
        int si;
        uint32_t local;
        const uint8_t *key;
        size_t kl;
        if (snapshot_locate(s->snap, docs[h], &si, &local) &&
            seg_pk(s->snap->segs[si], local, &key, &kl)) {
            b.len = 0;
            pk_to_json(key, kl, &b);
            hit->id_json = qr_arena_strndup(s->arena, (const char *)b.data, b.len);
        }
    }
    qr_buf_free(&b);
    qr_free(docs);
    return s->ctx.err.code;
}

/* ---- filters ---- */

/* Materialize a (non-scoring) iterator into a bitmap, skipping deleted docs. */
static void iter_to_bitmap(Iter *it, const roaring_bitmap_t *dels, roaring_bitmap_t *bm)
{
    uint32_t buf[256];
    size_t k = 0;
    for (DocId d = iter_next(it); d != ITER_END; d = iter_next(it)) {
        if (dels && roaring_bitmap_contains(dels, (uint32_t)d))
            continue;
        buf[k++] = (uint32_t)d;
        if (k == 256) {
            roaring_bitmap_add_many(bm, k, buf);
            k = 0;
        }
    }
    roaring_bitmap_add_many(bm, k, buf);
}

int search_seg_filter(Search *s, int i, const QrFilter *f, int path, roaring_bitmap_t *bm,
                      QrFilterStats *st)
{
    if (s->ctx.err.code != QR_OK)
        return s->ctx.err.code;
    Segment *seg = s->snap->segs[i];
    const roaring_bitmap_t *dels = s->snap->dels[i];
    FilterSeg *fs;
    QrError e;
    qr_error_clear(&e);
    if (filter_seg_compile(f, seg, &fs, &e) != QR_OK) {
        qr_error_copy(&s->ctx.err, &e);
        return s->ctx.err.code;
    }
    roaring_bitmap_t *cand = NULL;
    if (s->root->kind != CK_ALL) {
        Iter *it = build(s, seg, s->root, false);
        uint64_t cost = it ? iter_cost(it) : 0;
        if (path == QR_ACCESS_AUTO)
            path = filter_seg_choose(fs, cost);
        if (path == QR_ACCESS_CHECK) {
            cand = roaring_bitmap_create();
            if (!cand)
                qr_error_set(&s->ctx.err, QR_ENOMEM, "out of memory");
            else if (it)
                iter_to_bitmap(it, dels, cand);
        }
    }
    if (s->ctx.err.code == QR_OK &&
        filter_seg_eval(fs, (QrAccessPath)path, dels, cand, bm, st, &e) != QR_OK)
        qr_error_copy(&s->ctx.err, &e);
    if (cand)
        roaring_bitmap_free(cand);
    filter_seg_free(fs);
    return s->ctx.err.code;
}

/* qr_search's filter of segment i (search_seg_filter), computed once.
 * NULL on error (in s->ctx.err) or when there is no filter. */
static roaring_bitmap_t *seg_filter(Search *s, int i)
{
    if (!s->filter || s->ctx.err.code != QR_OK)
        return NULL;
    if (s->fbm[i])
        return s->fbm[i];
    roaring_bitmap_t *bm = roaring_bitmap_create();
    if (!bm) {
        qr_error_set(&s->ctx.err, QR_ENOMEM, "out of memory");
        return NULL;
    }
    s->fbm[i] = bm;
    return search_seg_filter(s, i, s->filter, s->req->access_path, bm, &s->fst) == QR_OK ? bm : NULL;
}

/* ---- sort keys and cursors ---- */

static int parse_sort(Search *s, QrError *err)
{
    const char *p = s->req->sort;
    if (!p || !*p)
        return QR_OK;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        const char *colon = memchr(p, ':', (size_t)(e - p));
        size_t nl = (size_t)((colon ? colon : e) - p);
        while (nl && p[nl - 1] == ' ')
            nl--;
        char name[QR_NAME_MAX + 1];
        if (nl == 0 || nl > QR_NAME_MAX)
            return qr_error_set(err, QR_EINVAL, "bad sort \"%s\"", s->req->sort);
        memcpy(name, p, nl);
        name[nl] = 0;
        if (s->n_keys == MAX_SORT_KEYS)
            return qr_error_set(err, QR_ELIMIT, "at most %d sort keys", MAX_SORT_KEYS);
        SortKey *k = &s->keys[s->n_keys++];
        if (!strcmp(name, "_score")) {
            k->field = SK_SCORE;
            k->desc = true;
            s->need_score = true;
        } else if (!strcmp(name, "_id")) {
            k->field = SK_ID;
            s->sort_has_id = true;
        } else {
            k->field = schema_field_index(s->schema, name);
            k->ct = qr_filter_field_coltype(s->schema, k->field);
            if (k->field < 0 || k->ct < 0) {
                qr_error_set(err, k->field < 0 ? QR_ENOTFOUND : QR_ETYPE,
                             k->field < 0 ? "sort column \"%s\" does not exist"
                                          : "cannot sort by full-text field \"%s\"",
                             name);
                if (k->field >= 0)
                    qr_error_hint(err, "declare it with \"column\": true to sort by it");
                return err ? err->code : QR_EINVAL;
            }
        }
        if (colon) {
            const char *d = colon + 1;
            size_t dl = (size_t)(e - d);
            while (dl && d[dl - 1] == ' ')
                dl--;
            if (dl == 3 && !strncasecmp(d, "asc", 3))
                k->desc = false;
            else if (dl == 4 && !strncasecmp(d, "desc", 4))
                k->desc = true;
            else
                return qr_error_set(err, QR_EINVAL, "sort direction of \"%s\" must be asc or desc",
                                    name);
        }
        p = e;
    }
    s->sorted = true;
    return QR_OK;
}

/* The cursor: a JSON array of one value per sort key, then the id. */
static int parse_cursor(Search *s, QrError *err)
{
    const char *txt = s->req->search_after;
    if (!txt || !*txt)
        return QR_OK;
    if (!s->sorted) { /* the default order, made explicit */
        s->keys[0] = (SortKey){.field = SK_SCORE, .desc = true};
        s->n_keys = 1;
        s->sorted = s->need_score = true;
    }
    cJSON *a = cJSON_Parse(txt);
    int rc = QR_OK;
    if (!a || !cJSON_IsArray(a) || cJSON_GetArraySize(a) != s->n_keys + 1) {
        rc = qr_error_set(err, QR_EINVAL,
                          "search_after must be a JSON array of %d sort values and the id", s->n_keys);
        qr_error_hint(err, "pass the \"sort\" array of the previous page's last hit, with the same sort");
        cJSON_Delete(a);
        return rc;
    }
    for (int k = 0; k <= s->n_keys && rc == QR_OK; k++) {
        const cJSON *v = cJSON_GetArrayItem(a, k);
        if (k == s->n_keys || s->keys[k].field == SK_ID) {
            QrError e;
            qr_error_clear(&e);
            uint8_t key[PK_KEY_MAX];
            size_t n = pk_encode(v, key, &e);
            if (!n) {
                rc = qr_error_set(err, QR_EINVAL, "search_after: bad id value");
                break;
            }
            SVal *sv = &s->cursor[k < s->n_keys ? k : 0];
            if (k == s->n_keys) {
                memcpy(s->cursor_pk, key, n);
                s->cursor_pk_len = n;
            } else {
                char *c = aalloc(s, n + 1);
                if (!c)
                    return s->ctx.err.code;
                memcpy(c, key, n);
                sv->s = c;
                sv->n = n;
            }
            continue;
        }
        SVal *sv = &s->cursor[k];
        memset(sv, 0, sizeof *sv);
        if (cJSON_IsNull(v)) {
            sv->null = true;
            continue;
        }
        int ct = s->keys[k].field == SK_SCORE ? QR_COL_FLOAT64 : s->keys[k].ct;
        bool ok = false;
        if (s->keys[k].field == SK_SCORE) { /* printed with %.9g: back to the same float */
            ok = cJSON_IsNumber(v);
            sv->f = ok ? (double)(float)v->valuedouble : 0;
            if (!ok)
                rc = qr_error_set(err, QR_EINVAL, "search_after: value %d must be a score", k + 1);
            continue;
        }
        switch (ct) {
        case QR_COL_INT64:
            ok = cJSON_IsNumber(v);
            sv->i = ok ? (int64_t)v->valuedouble : 0;
            if (ok && fabs(v->valuedouble) >= 9007199254740992.0) {
                /* beyond 2^53 a double loses digits: read the text */
                char *t = cJSON_PrintUnformatted(v);
                sv->i = t ? strtoll(t, NULL, 10) : sv->i;
                cJSON_free(t);
            }
            break;
        case QR_COL_FLOAT64:
            ok = cJSON_IsNumber(v);
            sv->f = ok ? v->valuedouble : 0;
            break;
        case QR_COL_BOOL:
            ok = cJSON_IsBool(v);
            sv->i = cJSON_IsTrue(v);
            break;
        case QR_COL_TIMESTAMP:
            if (cJSON_IsString(v))
                ok = qr_parse_timestamp(v->valuestring, strlen(v->valuestring), &sv->i);
            else if ((ok = cJSON_IsNumber(v)))
                sv->i = (int64_t)v->valuedouble;
            break;
        case QR_COL_KEYWORD:
            if ((ok = cJSON_IsString(v))) {
                sv->n = strlen(v->valuestring);
                char *c = aalloc(s, sv->n + 1);
                if (!c) {
                    cJSON_Delete(a);
                    return s->ctx.err.code;
                }
                memcpy(c, v->valuestring, sv->n + 1);
                sv->s = c;
            }
            break;
        }
        if (!ok)
            rc = qr_error_set(err, QR_EINVAL, "search_after: value %d does not fit sort key %d", k + 1,
                              k + 1);
    }
    cJSON_Delete(a);
    s->has_cursor = rc == QR_OK;
    return rc;
}

static int cmp_bytes(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? (c < 0 ? -1 : 1) : (an < bn ? -1 : an > bn);
}

static int cmp_double(double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) - isnan(b); /* NaN above every number */
    return a < b ? -1 : a > b;
}

/* Order of two sort values of key k, ascending; NULL is the largest. */
static int sval_cmp(const SortKey *k, const SVal *a, const SVal *b)
{
    if (a->null || b->null)
        return (int)a->null - (int)b->null;
    int ct = k->field == SK_SCORE ? QR_COL_FLOAT64 : k->field == SK_ID ? QR_COL_KEYWORD : k->ct;
    switch (ct) {
    case QR_COL_FLOAT64: return cmp_double(a->f, b->f);
    case QR_COL_KEYWORD: return cmp_bytes(a->s, a->n, b->s, b->n);
    default: return a->i < b->i ? -1 : a->i > b->i;
    }
}

typedef struct SortHit {
    DocId doc;                /* global */
    float score;
    SVal v[MAX_SORT_KEYS];
    const char *pk;           /* borrows the segment */
    size_t pk_len;
} SortHit;

/* < 0 when a comes first in the requested order (keys, then the id). */
/* Order on the sort keys alone (0 when every key ties). */
static int keys_cmp(const Search *s, const SVal *av, const SVal *bv)
{
    for (int k = 0; k < s->n_keys; k++) {
        int c = sval_cmp(&s->keys[k], &av[k], &bv[k]);
        if (c)
            return s->keys[k].desc ? -c : c;
    }
    return 0;
}

static int hit_cmp(const Search *s, const SVal *av, const char *apk, size_t apl, const SVal *bv,
                   const char *bpk, size_t bpl)
{
    int c = keys_cmp(s, av, bv);
    return c ? c : cmp_bytes(apk, apl, bpk, bpl);
}

static int sorthit_cmp(const Search *s, const SortHit *a, const SortHit *b)
{
    int c = hit_cmp(s, a->v, a->pk, a->pk_len, b->v, b->pk, b->pk_len);
    return c ? c : (a->doc < b->doc ? -1 : a->doc > b->doc);
}

/* A bounded max-heap on the order: heap[0] is the worst hit kept. */
typedef struct SortHeap {
    SortHit *h;
    int n, k;
} SortHeap;

static void sheap_down(const Search *s, SortHeap *hp, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < hp->n && sorthit_cmp(s, &hp->h[l], &hp->h[m]) > 0)
            m = l;
        if (r < hp->n && sorthit_cmp(s, &hp->h[r], &hp->h[m]) > 0)
            m = r;
        if (m == i)
            return;
        SortHit t = hp->h[i];
        hp->h[i] = hp->h[m];
        hp->h[m] = t;
        i = m;
    }
}

static void sheap_offer(const Search *s, SortHeap *hp, const SortHit *x)
{
    if (hp->k == 0)
        return;
    if (hp->n < hp->k) {
        int i = hp->n++;
        hp->h[i] = *x;
        while (i > 0) {
            int p = (i - 1) / 2;
            if (sorthit_cmp(s, &hp->h[i], &hp->h[p]) <= 0)
                break;
            SortHit t = hp->h[i];
            hp->h[i] = hp->h[p];
            hp->h[p] = t;
            i = p;
        }
        return;
    }
    if (sorthit_cmp(s, x, &hp->h[0]) >= 0)
        return;
    hp->h[0] = *x;
    sheap_down(s, hp, 0);
}

/* Fill the sort values of local doc d of segment seg. */
static void sort_values(Search *s, Segment *seg, uint32_t d, float score, const SVal *v0,
                        SortHit *h)
{
    for (int k = 0; k < s->n_keys; k++) {
        SVal *v = &h->v[k];
        if (k == 0 && v0) { /* decoded by the caller a block at a time */
            *v = *v0;
            continue;
        }
        memset(v, 0, sizeof *v);
        const SortKey *sk = &s->keys[k];
        if (sk->field == SK_SCORE) {
            v->f = score;
            continue;
        }
        if (sk->field == SK_ID) {
            v->s = h->pk;
            v->n = h->pk_len;
            continue;
        }
        const Column *c = seg_column(seg, sk->field);
        bool b = false;
        switch (sk->ct) {
        case QR_COL_FLOAT64: v->null = !c || !col_get_float(c, d, &v->f); break;
        case QR_COL_KEYWORD: v->null = !c || !col_get_str(c, d, &v->s, &v->n); break;
        case QR_COL_BOOL:
            v->null = !c || !col_get_bool(c, d, &b);
            v->i = b;
            break;
        default: v->null = !c || !col_get_int(c, d, &v->i);
        }
    }
}

/* Print a hit's sort values and id as the JSON cursor. */
static char *sort_json(Search *s, const SortHit *h)
{
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_putc(&b, '[');
    for (int k = 0; k <= s->n_keys; k++) {
        if (k)
            qr_buf_putc(&b, ',');
        if (k == s->n_keys || s->keys[k].field == SK_ID) {
            pk_to_json((const uint8_t *)h->pk, h->pk_len, &b);
            continue;
        }
        const SVal *v = &h->v[k];
        int ct = s->keys[k].field == SK_SCORE ? -1 : s->keys[k].ct;
        if (v->null) {
            qr_buf_printf(&b, "null");
        } else if (ct == -1) {
            qr_buf_printf(&b, "%.9g", v->f);
        } else if (ct == QR_COL_FLOAT64) {
            if (isnan(v->f) || isinf(v->f))
                qr_buf_printf(&b, "null");
            else
                qr_buf_printf(&b, "%.17g", v->f);
        } else if (ct == QR_COL_BOOL) {
            qr_buf_printf(&b, v->i ? "true" : "false");
        } else if (ct == QR_COL_TIMESTAMP) {
            char t[48];
            qr_format_timestamp(v->i, t, sizeof t);
            qr_buf_printf(&b, "\"%s\"", t);
        } else if (ct == QR_COL_KEYWORD) {
            char *z = qr_strndup(v->s, v->n);
            cJSON *str = z ? cJSON_CreateString(z) : NULL;
            char *j = str ? cJSON_PrintUnformatted(str) : NULL;
            if (j)
                qr_buf_append(&b, j, strlen(j));
            cJSON_free(j);
            cJSON_Delete(str);
            qr_free(z);
        } else {
            qr_buf_printf(&b, "%lld", (long long)v->i);
        }
    }
    qr_buf_putc(&b, ']');
    char *out = qr_buf_ok(&b) ? qr_arena_strndup(s->arena, (const char *)b.data, b.len) : NULL;
    qr_buf_free(&b);
    return out;
}

/* Offer local doc d of segment i (already known to match and be live).
 * v0, when not NULL, is the doc's value of the first sort key.  The primary
 * key is read only for docs that can still enter the heap. */
static void sorted_offer(Search *s, int i, uint32_t d, float score, const SVal *v0, SortHeap *hp)
{
    if (hp->k == 0)
        return;
    Segment *seg = s->snap->segs[i];
    SortHit h;
    h.doc = s->snap->base[i] + d;
    h.score = score;
    h.pk = "";
    h.pk_len = 0;
    const uint8_t *key;
    size_t kl;
    bool have_pk = false;
    if (s->sort_has_id) {
        have_pk = seg_pk(seg, d, &key, &kl);
        if (have_pk) {
            h.pk = (const char *)key;
            h.pk_len = kl;
        }
    }
    sort_values(s, seg, d, score, v0, &h);
    if (hp->n == hp->k && keys_cmp(s, h.v, hp->h[0].v) > 0)
        return; /* worse than every hit kept on the keys alone */
    if (!have_pk && seg_pk(seg, d, &key, &kl)) {
        h.pk = (const char *)key;
        h.pk_len = kl;
    }
    if (s->has_cursor && hit_cmp(s, h.v, h.pk, h.pk_len, s->cursor, (const char *)s->cursor_pk,
                                 s->cursor_pk_len) <= 0)
        return;
    sheap_offer(s, hp, &h);
}

/* Can a value v of the first sort key still enter a full heap?  Only when
 * it is not strictly worse than the worst hit's first key. */
static bool first_key_may_enter(const Search *s, const SortHeap *hp, const SVal *v)
{
    if (hp->n < hp->k)
        return true;
    int c = sval_cmp(&s->keys[0], v, &hp->h[0].v[0]);
    return (s->keys[0].desc ? -c : c) <= 0;
}

typedef struct BlockOrder {
    uint32_t block;
    SVal best;        /* the block's best possible first-key value */
} BlockOrder;

static int block_order_cmp(const void *x, const void *y, void *arg)
{
    const Search *s = arg;
    const BlockOrder *a = x, *b = y;
    int c = sval_cmp(&s->keys[0], &a->best, &b->best);
    c = s->keys[0].desc ? -c : c;
    return c ? c : (a->block < b->block ? -1 : a->block > b->block);
}

/* Top-k of one segment by a column, without scoring: blocks are visited
 * best zone-map bound first and the walk stops at the first block whose
 * bound cannot beat the k-th hit, so a sorted column reads a block or two.
 * Only the first key's column is decoded a block at a time (later keys and
 * the primary key are read per candidate).  docs = live matches (NULL: every
 * live doc).  Returns false when this shape is not handled (the caller then
 * walks every match). */
static bool sorted_segment_by_column(Search *s, int i, const roaring_bitmap_t *docs,
                                     SortHeap *hp)
{
    const SortKey *sk = &s->keys[0];
    Segment *seg = s->snap->segs[i];
    const Column *c = seg_column(seg, sk->field);
    const roaring_bitmap_t *dels = s->snap->dels[i];
    if (!c || sk->ct == QR_COL_BOOL)
        return false;
    uint32_t nb = col_n_blocks(c);
    BlockOrder *ord = qr_malloc(((size_t)nb + 1) * sizeof *ord);
    int64_t *iv = qr_malloc(COL_BLOCK_ROWS * sizeof *iv);
    uint64_t nulls[COL_BLOCK_ROWS / 64];
    if (!ord || !iv) {
        qr_free(ord);
        qr_free(iv);
        return false;
    }
    double *fv = (double *)iv;
    uint32_t *cv = (uint32_t *)iv;
    for (uint32_t b = 0; b < nb; b++) {
        ColZone z;
        col_block_zone(c, b, &z);
        ord[b].block = b;
        SVal *v = &ord[b].best;
        memset(v, 0, sizeof *v);
        /* NULL sorts as the largest value: first descending, last ascending */
        if (!z.has_range || (sk->desc && z.null_count > 0)) {
            v->null = true;
            continue;
        }
        const ColVal *bound = sk->desc ? &z.max : &z.min;
        if (sk->ct == QR_COL_FLOAT64)
            v->f = bound->u.f;
        else if (sk->ct == QR_COL_KEYWORD) {
            v->s = bound->u.str.s;
            v->n = bound->u.str.n;
        } else
            v->i = bound->u.i;
    }
    qsort_r(ord, nb, sizeof *ord, block_order_cmp, s);
    for (uint32_t oi = 0; oi < nb && s->ctx.err.code == QR_OK; oi++) {
        if (!first_key_may_enter(s, hp, &ord[oi].best))
            break; /* every later block is worse still */
        uint32_t b = ord[oi].block;
        uint32_t first = b * COL_BLOCK_ROWS;
        uint32_t n;
        switch (sk->ct) {
        case QR_COL_FLOAT64: n = col_read_float(c, b, 1, fv, nulls); break;
        case QR_COL_KEYWORD: n = col_read_code(c, b, 1, cv, nulls); break;
        default: n = col_read_int(c, b, 1, iv, nulls);
        }
        for (uint32_t r = 0; r < n; r++) {
            uint32_t d = first + r;
            if (docs ? !roaring_bitmap_contains(docs, d)
                     : (dels && roaring_bitmap_contains(dels, d)))
                continue;
            SVal v;
            memset(&v, 0, sizeof v);
            if (nulls[r / 64] >> (r % 64) & 1) {
                v.null = true;
            } else if (sk->ct == QR_COL_FLOAT64) {
                v.f = fv[r];
            } else if (sk->ct == QR_COL_KEYWORD) {
                if (!col_dict_get(c, cv[r], &v.s, &v.n))
                    v.null = true;
            } else {
                v.i = iv[r];
            }
            if (first_key_may_enter(s, hp, &v))
                sorted_offer(s, i, d, 0.0f, &v, hp);
        }
        if (iter_ctx_interrupted(&s->ctx))
            break;
    }
    qr_free(ord);
    qr_free(iv);
    return true;
}

/* Path B: every match, in the requested order (with the cursor applied);
 * total counts every match.  Hits go to *out (sorted best first). */
static int collect_sorted(Search *s, const CNode *root, int k, QrSearchRes *res, SortHeap *hp)
{
    hp->k = k;
    hp->n = 0;
    hp->h = aalloc(s, ((size_t)k + 1) * sizeof *hp->h);
    if (!hp->h)
        return s->ctx.err.code;
    uint64_t total = 0;
    float all_score = root->kind == CK_ALL ? root->boost : 0.0f;
    for (int i = 0; i < s->snap->n_segs && s->ctx.err.code == QR_OK; i++) {
        Segment *seg = s->snap->segs[i];
        const roaring_bitmap_t *dels = s->snap->dels[i];
        const roaring_bitmap_t *fb = seg_filter(s, i);
        if (s->ctx.err.code != QR_OK)
            break;
        if (root->kind == CK_ALL && s->keys[0].field >= 0) {
            total += fb ? roaring_bitmap_get_cardinality(fb)
                        : seg_n_docs(seg) - (dels ? roaring_bitmap_get_cardinality(dels) : 0);
            if (sorted_segment_by_column(s, i, fb, hp))
                continue;
            total -= fb ? roaring_bitmap_get_cardinality(fb)
                        : seg_n_docs(seg) - (dels ? roaring_bitmap_get_cardinality(dels) : 0);
        }
        if (root->kind == CK_ALL) {
            if (fb) {
                roaring_uint32_iterator_t *it = roaring_create_iterator(fb);
                if (!it)
                    return qr_error_set(&s->ctx.err, QR_ENOMEM, "out of memory");
                uint32_t buf[256], n;
                while ((n = roaring_read_uint32_iterator(it, buf, 256)) > 0) {
                    for (uint32_t j = 0; j < n; j++)
                        sorted_offer(s, i, buf[j], all_score, NULL, hp);
                    total += n;
                }
                roaring_free_uint32_iterator(it);
            } else {
                for (uint32_t d = 0; d < seg_n_docs(seg); d++) {
                    if (dels && roaring_bitmap_contains(dels, d))
                        continue;
                    sorted_offer(s, i, d, all_score, NULL, hp);
                    total++;
                }
            }
            if (iter_ctx_interrupted(&s->ctx))
                break;
            continue;
        }
        Iter *it = build(s, seg, root, s->need_score);
        if (!it)
            continue;
        for (DocId d = iter_next(it); d != ITER_END; d = iter_next(it)) {
            if (fb ? !roaring_bitmap_contains(fb, (uint32_t)d)
                   : (dels && roaring_bitmap_contains(dels, (uint32_t)d)))
                continue;
            total++;
            sorted_offer(s, i, (uint32_t)d, s->need_score ? iter_score(it) : 0.0f, NULL, hp);
        }
    }
    res->total = total;
    res->stats.strategy = "sort";
    /* heap -> best first (heapsort: the worst moves to the end) */
    int cnt = hp->n;
    for (int n = cnt; n > 1; n--) {
        SortHit t = hp->h[0];
        hp->h[0] = hp->h[n - 1];
        hp->h[n - 1] = t;
        hp->n = n - 1;
        sheap_down(s, hp, 0);
    }
    hp->n = cnt;
    return s->ctx.err.code;
}

/* ---- facets ---- */

/* Every live match of segment i (text ∩ filter) into a new bitmap. */
static roaring_bitmap_t *seg_matches(Search *s, int i, const CNode *root)
{
    Segment *seg = s->snap->segs[i];
    const roaring_bitmap_t *dels = s->snap->dels[i];
    roaring_bitmap_t *fb = seg_filter(s, i);
    if (s->ctx.err.code != QR_OK)
        return NULL;
    roaring_bitmap_t *bm = NULL;
    if (root->kind == CK_ALL) {
        bm = fb ? roaring_bitmap_copy(fb) : roaring_bitmap_create();
        if (bm && !fb) {
            roaring_bitmap_add_range(bm, 0, seg_n_docs(seg));
            if (dels)
                roaring_bitmap_andnot_inplace(bm, dels);
        }
    } else {
        bm = roaring_bitmap_create();
        Iter *it = bm ? build(s, seg, root, false) : NULL;
        if (it)
            iter_to_bitmap(it, dels, bm);
        if (bm && fb)
            roaring_bitmap_and_inplace(bm, fb);
    }
    if (!bm)
        qr_error_set(&s->ctx.err, QR_ENOMEM, "out of memory");
    return bm;
}

typedef struct FacetKey {
    double num;       /* numeric value or bucket start */
    const char *str;  /* keyword value: borrows the segment */
    size_t len;
    uint64_t count;
} FacetKey;

typedef struct FacetAcc {
    const QrFacetReq *req;
    int field, ct;
    FacetKey *v;      /* owns (qr_malloc) */
    size_t n, cap;
    uint64_t missing, count;
    double min, max, sum;
} FacetAcc;

static bool facet_push(FacetAcc *a, double num, const char *str, size_t len, uint64_t count)
{
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 256;
        FacetKey *nv = qr_realloc(a->v, nc * sizeof *nv);
        if (!nv)
            return false;
        a->v = nv;
        a->cap = nc;
    }
    a->v[a->n++] = (FacetKey){.num = num, .str = str, .len = len, .count = count};
    return true;
}

static int facet_key_cmp(const void *x, const void *y)
{
    const FacetKey *a = x, *b = y;
    if (a->str || b->str)
        return cmp_bytes(a->str ? a->str : "", a->len, b->str ? b->str : "", b->len);
    return cmp_double(a->num, b->num);
}

static int facet_count_cmp(const void *x, const void *y)
{
    const FacetKey *a = x, *b = y;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return facet_key_cmp(x, y);
}

/* Merge equal keys (sorted by key first), summing counts. */
static void facet_merge(FacetAcc *a)
{
    if (a->n == 0)
        return;
    qsort(a->v, a->n, sizeof *a->v, facet_key_cmp);
    size_t m = 0;
    for (size_t i = 1; i < a->n; i++) {
        if (facet_key_cmp(&a->v[m], &a->v[i]) == 0)
            a->v[m].count += a->v[i].count;
        else
            a->v[++m] = a->v[i];
    }
    a->n = m + 1;
}

static bool facet_numeric(int ct)
{
    return ct == QR_COL_INT64 || ct == QR_COL_FLOAT64 || ct == QR_COL_TIMESTAMP ||
           ct == QR_COL_BOOL;
}

/* Add the docs of bm (segment seg) to the facet. */
static bool facet_segment(FacetAcc *a, Segment *seg, const roaring_bitmap_t *bm)
{
    const Column *c = seg_column(seg, a->field);
    uint64_t n = roaring_bitmap_get_cardinality(bm);
    if (!c) {
        a->missing += n;
        return true;
    }
    size_t first = a->n;
    uint32_t *codes = NULL;
    if (a->req->kind == QR_FACET_TERMS && a->ct == QR_COL_KEYWORD) {
        codes = qr_calloc(col_dict_size(c) + 1, sizeof *codes);
        if (!codes)
            return false;
    }
    roaring_uint32_iterator_t *it = roaring_create_iterator(bm);
    if (!it) {
        qr_free(codes);
        return false;
    }
    bool ok = true;
    uint32_t buf[256], k;
    while (ok && (k = roaring_read_uint32_iterator(it, buf, 256)) > 0) {
        for (uint32_t j = 0; j < k && ok; j++) {
            uint32_t d = buf[j];
            if (codes) {
                uint32_t code;
                if (col_get_code(c, d, &code))
                    codes[code]++;
                else
                    a->missing++;
                continue;
            }
            double x;
            int64_t iv;
            bool bv;
            bool has;
            switch (a->ct) {
            case QR_COL_FLOAT64: has = col_get_float(c, d, &x); break;
            case QR_COL_BOOL:
                has = col_get_bool(c, d, &bv);
                x = bv;
                break;
            case QR_COL_KEYWORD: has = false; break;
            default:
                has = col_get_int(c, d, &iv);
                x = (double)iv;
            }
            if (!has) {
                a->missing++;
                continue;
            }
            switch (a->req->kind) {
            case QR_FACET_STATS:
                if (a->count == 0 || x < a->min)
                    a->min = x;
                if (a->count == 0 || x > a->max)
                    a->max = x;
                a->sum += x;
                a->count++;
                break;
            case QR_FACET_HISTOGRAM:
                ok = facet_push(a, floor(x / a->req->interval) * a->req->interval, NULL, 0, 1);
                break;
            case QR_FACET_TERMS: ok = facet_push(a, x, NULL, 0, 1); break;
            }
        }
        /* keep memory bounded: merge the keys of this batch as we go */
        if (ok && a->n - first > 65536) {
            facet_merge(a);
            first = a->n;
        }
    }
    roaring_free_uint32_iterator(it);
    if (codes) {
        for (uint32_t code = 0; ok && code < col_dict_size(c); code++) {
            const char *str;
            size_t len;
            if (codes[code] && col_dict_get(c, code, &str, &len))
                ok = facet_push(a, 0, str, len, codes[code]);
        }
        qr_free(codes);
    }
    return ok;
}

static char *facet_key_json(Search *s, const FacetAcc *a, const FacetKey *fk)
{
    char tmp[64];
    if (fk->str) {
        char *z = qr_strndup(fk->str, fk->len);
        cJSON *js = z ? cJSON_CreateString(z) : NULL;
        char *j = js ? cJSON_PrintUnformatted(js) : NULL;
        char *out = j ? qr_arena_strndup(s->arena, j, strlen(j)) : NULL;
        cJSON_free(j);
        cJSON_Delete(js);
        qr_free(z);
        return out;
    }
    if (a->ct == QR_COL_BOOL)
        snprintf(tmp, sizeof tmp, "%s", fk->num != 0 ? "true" : "false");
    else if (a->ct == QR_COL_TIMESTAMP) {
        char ts[48];
        qr_format_timestamp((int64_t)fk->num, ts, sizeof ts);
        snprintf(tmp, sizeof tmp, "\"%s\"", ts);
    } else if (fk->num == floor(fk->num) && fabs(fk->num) < 9e15)
        snprintf(tmp, sizeof tmp, "%.0f", fk->num);
    else
        snprintf(tmp, sizeof tmp, "%.17g", fk->num);
    return qr_arena_strndup(s->arena, tmp, strlen(tmp));
}

static int check_facets(Search *s, QrError *err)
{
    for (int f = 0; f < s->req->n_facets; f++) {
        const QrFacetReq *fr = &s->req->facets[f];
        int field = fr->field ? schema_field_index(s->schema, fr->field) : -1;
        int ct = qr_filter_field_coltype(s->schema, field);
        if (field < 0)
            return qr_error_set(err, QR_ENOTFOUND, "facet column \"%s\" does not exist",
                                fr->field ? fr->field : "");
        if (ct < 0)
            return qr_error_set(err, QR_ETYPE, "cannot facet on full-text field \"%s\"",
                                fr->field);
        if (fr->kind != QR_FACET_TERMS && (!facet_numeric(ct) || ct == QR_COL_BOOL))
            return qr_error_set(err, QR_ETYPE, "%s facet needs a numeric or timestamp column, \"%s\" is %s",
                                fr->kind == QR_FACET_STATS ? "stats" : "histogram", fr->field,
                                col_type_name((QrColType)ct));
        if (fr->kind == QR_FACET_HISTOGRAM && !(fr->interval > 0 && isfinite(fr->interval)))
            return qr_error_set(err, QR_EINVAL, "histogram facet on \"%s\" needs an interval > 0",
                                fr->field);
        if (fr->size < 0 || fr->size > 10000)
            return qr_error_set(err, QR_EINVAL, "facet size must be between 0 and 10000");
    }
    return QR_OK;
}

static int compute_facets(Search *s, const CNode *root, QrSearchRes *res)
{
    int nf = s->req->n_facets;
    res->facets = aalloc(s, ((size_t)nf + 1) * sizeof *res->facets);
    FacetAcc *acc = qr_calloc((size_t)nf + 1, sizeof *acc);
    if (!res->facets || !acc) {
        qr_free(acc);
        return qr_error_set(&s->ctx.err, QR_ENOMEM, "out of memory");
    }
    for (int f = 0; f < nf; f++) {
        acc[f].req = &s->req->facets[f];
        acc[f].field = schema_field_index(s->schema, acc[f].req->field);
        acc[f].ct = qr_filter_field_coltype(s->schema, acc[f].field);
    }
    bool ok = true;
    for (int i = 0; ok && i < s->snap->n_segs && s->ctx.err.code == QR_OK; i++) {
        roaring_bitmap_t *bm = seg_matches(s, i, root);
        if (!bm)
            break;
        for (int f = 0; ok && f < nf; f++)
            ok = facet_segment(&acc[f], s->snap->segs[i], bm);
        roaring_bitmap_free(bm);
    }
    if (!ok)
        qr_error_set(&s->ctx.err, QR_ENOMEM, "out of memory computing facets");
    for (int f = 0; f < nf && s->ctx.err.code == QR_OK; f++) {
        FacetAcc *a = &acc[f];
        QrFacetRes *r = &res->facets[f];
        r->kind = a->req->kind;
        r->field = qr_arena_strndup(s->arena, a->req->field, strlen(a->req->field));
        r->missing = a->missing;
        r->count = a->count;
        r->min = a->min;
        r->max = a->max;
        r->sum = a->sum;
        r->avg = a->count ? a->sum / (double)a->count : 0;
        facet_merge(a);
        uint64_t all = 0;
        for (size_t j = 0; j < a->n; j++)
            all += a->v[j].count;
        if (r->kind == QR_FACET_TERMS && a->n > 1) /* a->v is NULL when nothing matched */
            qsort(a->v, a->n, sizeof *a->v, facet_count_cmp);
        int size = a->req->size > 0 ? a->req->size : r->kind == QR_FACET_TERMS ? 10 : 1000;
        int nb = r->kind == QR_FACET_STATS ? 0 : (int)(a->n < (size_t)size ? a->n : (size_t)size);
        r->buckets = aalloc(s, ((size_t)nb + 1) * sizeof *r->buckets);
        if (!r->buckets)
            break;
        uint64_t shown = 0;
        for (int j = 0; j < nb; j++) {
            r->buckets[j].key_json = facet_key_json(s, a, &a->v[j]);
            r->buckets[j].count = a->v[j].count;
            shown += a->v[j].count;
        }
        r->n_buckets = nb;
        r->other = all - shown;
    }
    res->n_facets = s->ctx.err.code == QR_OK ? nf : 0;
    for (int f = 0; f < nf; f++)
        qr_free(acc[f].v);
    qr_free(acc);
    return s->ctx.err.code;
}

/* ---- entry point ---- */

static int setup_fields(Search *s, QrError *err)
{
    const QrSchema *sc = s->schema;
    if ((!s->req->fields || !*s->req->fields) && sc->all_field) {
        s->fields[0] = QR_ALL_FIELD;
        s->fweights[0] = 1.0f;
        s->n_fields = 1;
        return QR_OK;
    }
    if (!s->req->fields || !*s->req->fields) {
        for (int f = 0; f < sc->n_fields; f++)
            if (sc->fields[f].type == QR_FT_TEXT && sc->fields[f].indexed) {
                s->fields[s->n_fields] = f;
                s->fweights[s->n_fields++] = sc->fields[f].weight;
            }
        return QR_OK;
    }
    const char *p = s->req->fields;
    while (*p) {
        const char *e = p;
        while (*e && *e != ',')
            e++;
        char name[QR_NAME_MAX + 1];
        const char *caret = memchr(p, '^', (size_t)(e - p));
        size_t nl = (size_t)((caret ? caret : e) - p);
        while (nl && p[nl - 1] == ' ')
            nl--;
        while (nl && *p == ' ') {
            p++;
            nl--;
        }
        if (nl == 0 || nl > QR_NAME_MAX)
            return qr_error_set(err, QR_EINVAL, "bad field list \"%s\"", s->req->fields);
        memcpy(name, p, nl);
        name[nl] = 0;
        int f = schema_field_index(sc, name);
        if (f < 0 || sc->fields[f].type != QR_FT_TEXT || !sc->fields[f].indexed) {
            qr_error_set(err, f < 0 ? QR_ENOTFOUND : QR_EINVAL,
                         "field \"%s\" is not a full-text field of table \"%s\"", name,
                         s->t->name);
            return err ? err->code : QR_EINVAL;
        }
        float w = sc->fields[f].weight;
        if (caret) {
            char *end;
            double d = strtod(caret + 1, &end);
            if (end != e || !(d > 0) || d > 1e6)
                return qr_error_set(err, QR_EINVAL, "bad weight for field \"%s\"", name);
            w = (float)d;
        }
        if (s->n_fields < QR_MAX_FIELDS) {
            s->fields[s->n_fields] = f;
            s->fweights[s->n_fields++] = w;
        }
        p = *e ? e + 1 : e;
    }
    return QR_OK;
}

static void search_cleanup(Search *s)
{
    for (int i = 0; s->fbm && s->snap && i < s->snap->n_segs; i++)
        if (s->fbm[i])
            roaring_bitmap_free(s->fbm[i]);
    s->fbm = NULL;
    qr_filter_free(s->filter_owned);
    s->filter_owned = NULL;
    for (int i = 0; i < s->n_bms; i++)
        roaring_bitmap_free(s->bms[i]);
    s->n_bms = 0;
    if (s->snap && s->snap_owned)
        snapshot_release(s->snap);
    s->snap = NULL;
    an_release(s->t, s->an);
    s->an = NULL;
}

/* Opening shared by qr_search and search_open (s->t, schema, req, arena
 * and ctx set): the searched fields, the analyzers, the parse, the
 * snapshot's statistics, the compiled tree and its strategy. */
static int search_begin(Search *s, Snapshot *snap, QrError *err)
{
    const QrSearchReq *req = s->req;
    /* an empty query (or "*") matches every document: filter-only search */
    const char *qtext = req->q ? req->q : "";
    size_t qlen = req->q ? req->q_len : 0;
    size_t lead = 0;
    while (lead < qlen && (qtext[lead] == ' ' || qtext[lead] == '\t' || qtext[lead] == '\n'))
        lead++;
    /* (an empty query alone stays a syntax error: it is usually a mistake) */
    bool filtering = req->filter || (req->sort && *req->sort);
    bool match_all = (lead == qlen && filtering) || (qlen - lead == 1 && qtext[lead] == '*');
    if (match_all) {
        qtext = "*:*";
        qlen = 3;
    }
    int rc = setup_fields(s, err);
    if (rc != QR_OK)
        return rc;
    if (s->n_fields == 0 && !match_all)
        return qr_error_set(err, QR_EINVAL, "table \"%s\" has no full-text fields", s->t->name);
    if (s->n_fields == 0) { /* "*:*" needs no field, but the parser wants one */
        s->fields[0] = QR_ALL_FIELD;
        s->fweights[0] = 1.0f;
        s->n_fields = 1;
    }
    if (!(s->an = an_acquire(s->t, err)))
        return err ? err->code : QR_ENOMEM;
    /* parse */
    const char *names[QR_MAX_FIELDS + 1];
    int nn = 0;
    for (int f = 0; f < s->schema->n_fields; f++)
        names[nn++] = s->schema->fields[f].name;
    names[nn] = NULL;
    QParseOpts po = {.default_and = req->default_and, .fields = names};
    QNode *q;
    if ((rc = qparse(s->arena, qtext, qlen, &po, &q, err)) != QR_OK)
        return rc;
    /* statistics of the snapshot */
    s->snap = snap;
    s->N = snap->n_docs;
    for (int fi = 0; fi <= s->schema->n_fields; fi++) { /* field:term may name any text field */
        int f = fi < s->schema->n_fields ? fi : QR_ALL_FIELD;
        uint64_t tot = 0, nd = 0;
        for (int i = 0; i < snap->n_segs; i++) {
            SegFieldStats st = seg_field_stats(snap->segs[i], f);
            tot += st.total_len;
            nd += st.n_docs;
        }
        s->avgdl[f] = nd ? (double)tot / (double)nd : 1.0;
    }
    if (!(s->root = compile(s, q))) {
        if (s->ctx.err.code == QR_OK)
            qr_error_set(&s->ctx.err, QR_ENOMEM, "out of memory");
        qr_error_copy(err, &s->ctx.err);
        return s->ctx.err.code;
    }
    if (!flat_or_terms(s, s->root, &s->flat, &s->n_flat))
        s->flat = NULL;
    if (s->ctx.err.code != QR_OK) {
        qr_error_copy(err, &s->ctx.err);
        return s->ctx.err.code;
    }
    return QR_OK;
}

int search_open(QrTable *t, Snapshot *snap, QrArena *arena, const QrSearchReq *req, Search **out,
                QrError *err)
{
    *out = NULL;
    Search *s = qr_arena_calloc(arena, sizeof *s);
    if (!s)
        return qr_error_set(err, QR_ELIMIT, "query exceeded its memory limit");
    s->t = t;
    s->req_copy = *req;
    s->req = &s->req_copy;
    s->arena = arena;
    s->schema = qr_table_schema(t);
    iter_ctx_init(&s->ctx, arena);
    s->ctx.cancel = req->cancel;
    int rc = search_begin(s, snap, err);
    if (rc != QR_OK) {
        search_cleanup(s);
        return rc;
    }
    *out = s;
    return QR_OK;
}

void search_close(Search *s)
{
    if (s)
        search_cleanup(s);
}

int qr_search(QrTable *t, const QrSearchReq *req, QrSearchRes **out, QrError *err)
{
    *out = NULL;
    uint64_t t0 = qr_now_ns();
    if (req->limit < 0 || req->offset < 0)
        return qr_error_set(err, QR_EINVAL, "limit and offset must not be negative");
    /* the hits live in the query's arena, whose cap binds first for
     * ranked windows; unordered "every match" requests (an HTTP
     * max_result_window raised by the operator) may be large */
    if ((int64_t)req->limit + req->offset > SEARCH_WINDOW_MAX) {
        qr_error_set(err, QR_ELIMIT, "result window offset + limit is too large (at most %d)",
                     SEARCH_WINDOW_MAX);
        qr_error_hint(err, "page with search_after / keyset paging on (score, id) instead");
        return QR_ELIMIT;
    }
    QrArena *arena = qr_arena_new(req->mem_cap ? req->mem_cap : DEFAULT_MEM_CAP);
    if (!arena)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    Search S;
    memset(&S, 0, sizeof S);
    Search *s = &S;
    s->t = t;
    s->req = req;
    s->arena = arena;
    s->schema = qr_table_schema(t);
    iter_ctx_init(&s->ctx, arena);
    s->ctx.cancel = req->cancel;
    if (req->timeout_ms)
        s->ctx.deadline_ns = t0 + req->timeout_ms * 1000000ull;
    int rc = QR_OK;
    if (req->filter) {
        size_t fl = req->filter_len ? req->filter_len : strlen(req->filter);
        rc = qr_filter_parse(s->schema, req->filter, fl, &s->filter_owned, err);
        s->filter = s->filter_owned;
    }
    if (rc != QR_OK)
        qr_error_detail(err, QR_FILTER_ERROR_DETAIL);
    if (rc == QR_OK && (req->access_path < 0 || req->access_path > QR_ACCESS_BTREE))
        rc = qr_error_set(err, QR_EINVAL, "unknown access path %d", req->access_path);
    if (rc == QR_OK)
        rc = parse_sort(s, err);
    if (rc == QR_OK)
        rc = parse_cursor(s, err);
    if (rc == QR_OK)
        rc = check_facets(s, err);
    if (rc == QR_OK) {
        s->snap = table_snapshot(t->table);
        s->snap_owned = true;
        rc = search_begin(s, s->snap, err);
    }
    if (rc != QR_OK) {
        if (rc == QR_ELIMIT && qr_arena_over_budget(arena))
            rc = quarry_budget_error(err);
        search_cleanup(s);
        qr_arena_free(arena);
        return rc;
    }
    QrSearchRes *res = aalloc(s, sizeof *res);
    if (!res)
        goto fail;
    res->arena = arena;
    res->stats.segments = (uint32_t)s->snap->n_segs;
    if (s->filter &&
        !(s->fbm = aalloc(s, ((size_t)s->snap->n_segs + 1) * sizeof *s->fbm)))
        goto fail;
    int k = req->count_only ? 0 : req->offset + req->limit;
    SortHeap sh = {0};
    if (s->sorted && !req->count_only && !req->unordered) {
        if (collect_sorted(s, s->root, k, res, &sh) != QR_OK)
            goto fail;
        k = 0;
    } else if (req->unordered && !req->count_only) {
        if (collect_unordered(s, res) != QR_OK)
            goto fail;
        k = 0;
    } else if (req->count_only || !req->skip_total) {
        for (int i = 0; i < s->snap->n_segs && s->ctx.err.code == QR_OK; i++)
            res->total += count_segment(s, i);
        res->stats.strategy = "count";
    }
    TopK *tk = NULL;
    if (k > 0 && s->ctx.err.code == QR_OK) {
        tk = topk_new(&s->ctx, k);
        if (!tk)
            goto fail;
        res->stats.strategy = search_strategy(s);
        for (int i = 0; i < s->snap->n_segs && s->ctx.err.code == QR_OK; i++)
            rank_segment(s, i, tk);
        if (s->ctx.err.code != QR_OK)
            goto fail;
        topk_sorted(tk);
    } else if (s->sorted && sh.n > 0 && s->ctx.err.code == QR_OK) {
        /* path B's hits as a TopK so one loop below materializes both */
        tk = topk_new(&s->ctx, sh.n);
        if (!tk)
            goto fail;
        for (int h = 0; h < sh.n; h++)
            tk->hits[h] = (TopHit){.score = sh.h[h].score, .doc = sh.h[h].doc};
        tk->n = sh.n;
        tk->is_sorted = true;
    }
    if (tk && s->ctx.err.code == QR_OK) {
        int from = req->offset < tk->n ? req->offset : tk->n;
        res->n_hits = tk->n - from;
        res->hits = qr_arena_calloc(arena, ((size_t)res->n_hits + 1) * sizeof *res->hits);
        if (!res->hits)
            goto fail;
        DocStoreCursor *dc = NULL;
        int dc_seg = -1;
        QrBuf b;
        qr_buf_init(&b);
        for (int h = 0; h < res->n_hits; h++) {
            QrHit *hit = &res->hits[h];
            const TopHit *th = &tk->hits[from + h];
            hit->score = th->score;
            hit->doc = th->doc;
            if (s->sorted)
                hit->sort_json = sort_json(s, &sh.h[from + h]);
            int si;
            uint32_t local;
            if (!snapshot_locate(s->snap, th->doc, &si, &local))
                continue;
            Segment *seg = s->snap->segs[si];
            const uint8_t *key;
            size_t kl;
            if (seg_pk(seg, local, &key, &kl)) {
                b.len = 0;
                pk_to_json(key, kl, &b);
                hit->id_json = qr_arena_strndup(arena, (const char *)b.data, b.len);
            }
            if (req->fetch_docs || req->snippets) {
                if (si != dc_seg) {
                    ds_cursor_free(dc);
                    dc = ds_cursor_new(seg_docs(seg));
                    dc_seg = si;
                }
                const uint8_t *d;
                size_t dl;
                QrError e;
                qr_error_clear(&e);
                if (dc && ds_get(dc, local, &d, &dl, &e) == QR_OK) {
                    if (req->fetch_docs)
                        hit->doc_json = qr_arena_strndup(arena, (const char *)d, dl);
                    if (req->snippets)
                        hit->snippet = make_snippet(s, (const char *)d, dl);
                } else if (e.code != QR_OK) {
                    qr_error_copy(&s->ctx.err, &e);
                }
            }
        }
        qr_buf_free(&b);
        ds_cursor_free(dc);
        if (s->ctx.err.code != QR_OK)
            goto fail;
    }
    if (s->ctx.err.code == QR_OK && req->n_facets > 0)
        compute_facets(s, s->root, res);
    if (s->ctx.err.code != QR_OK)
        goto fail;
    res->stats.filter_blocks_total = s->fst.blocks_total;
    res->stats.filter_blocks_skipped = s->fst.blocks_skipped;
    res->stats.filter_blocks_scanned = s->fst.blocks_scanned;
    res->stats.filter_btree_pages = s->fst.btree_pages;
    res->stats.filter_candidates_checked = s->fst.candidates_checked;
    res->stats.filter_rows = s->fst.rows_matched;
    res->stats.filter_segs_scan = s->fst.segs_scan;
    res->stats.filter_segs_check = s->fst.segs_check;
    res->stats.filter_segs_btree = s->fst.segs_btree;
    search_stats(s, &res->stats.postings_blocks_decoded, &res->stats.postings_blocks_skipped);
    res->took_ms = (double)(qr_now_ns() - t0) / 1e6;
    search_cleanup(s);
    *out = res;
    return QR_OK;
fail:
    qr_error_copy(err, &s->ctx.err);
    rc = s->ctx.err.code != QR_OK ? (int)s->ctx.err.code : (int)QR_ENOMEM;
    if ((rc == QR_ELIMIT || rc == QR_ENOMEM) && qr_arena_over_budget(arena))
        rc = quarry_budget_error(err); /* the server's limit, not this query's cap */
    search_cleanup(s);
    qr_arena_free(arena);
    return rc;
}

void qr_search_res_free(QrSearchRes *r)
{
    if (!r)
        return;
    qr_arena_free(r->arena);
}
