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
#include "query/bm25f.h"
#include "query/colwalk.h"
#include "query/facets.h"
#include "query/filter.h"
#include "query/iter_ops.h"
#include "query/qparse.h"
#include "query/query_int.h"
#include "query/rank.h"
#include "query/search_int.h"
#include "query/synonyms.h"
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
        o.stop_list = schema_stop_list(s, f, &o.stop_list_len);
        int rc = analyzer_new(&o, &a->an[f], err);
        if (rc != QR_OK) {
            qsearch_analyzers_free(a);
            return rc;
        }
    }
    AnalyzerOpts fo = {.language = "none", .accent_fold = true};
    int rc = analyzer_new(&fo, &a->fold, err);
    if (rc != QR_OK) {
        qsearch_analyzers_free(a);
        return rc;
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
    analyzer_free(a->fold);
    qr_free(a);
}

/* The table's synonyms (a reference, NULL when it has none), rebuilt when
 * they changed since the map was made.  QR_OK or the build's error. */
static int syn_acquire(QrTable *t, Analyzer *fold, SynMap **out, QrError *err)
{
    *out = NULL;
    uint64_t gen = table_settings_gen(t->table);
    int rc = QR_OK;
    pthread_mutex_lock(&t->syn_lock);
    if (!t->syn_built || t->syn_gen != gen) {
        char *json = NULL;
        size_t len = 0;
        SynMap *m = NULL;
        rc = table_synonyms_dup(t->table, &json, &len, err);
        if (rc == QR_OK && json)
            rc = synmap_build(json, len, fold, &m, err);
        qr_free(json);
        if (rc == QR_OK) {
            synmap_unref(t->syn);
            t->syn = m;
            t->syn_gen = gen;
            t->syn_built = true;
        }
    }
    if (rc == QR_OK && synmap_count(t->syn))
        *out = synmap_ref(t->syn);
    pthread_mutex_unlock(&t->syn_lock);
    return rc;
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

/* Where a scored term came from (EXPLAIN (SCORES) shows it). */
typedef enum TermOrigin { TO_QUERY, TO_SYNONYM, TO_TYPO, TO_PREFIX } TermOrigin;

#define CT_BM25F (-2) /* CTerm.field: the term over the BM25F fields (Search.bf_*) */

typedef struct CTerm {
    int field;        /* field index, QR_ALL_FIELD, or CT_BM25F */
    const char *text; /* arena */
    uint32_t len;
    float weight;     /* field weight (not for CT_BM25F) * boost (* variant factor) */
    uint8_t origin;   /* TermOrigin */
    PostScorer sc;    /* idf etc. filled per snapshot; norms per segment (CT_BM25F: idf,
                         k1, b, the combined avgdl and weight; no norms) */
    uint64_t df_peers; /* documents holding it on the other nodes (peer_stats_ready) */
    uint64_t *df_peers_f; /* CT_BM25F: the same per combined field (Search.fields order) */
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

/* One sort value (colwalk.h's key: the ordered column walk hands them out).
 * NULL sorts after every value ascending (before it descending), as
 * PostgreSQL's default NULLS LAST / NULLS FIRST. */
typedef ColWalkKey SVal;

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
    bool bf;                    /* unfielded words score BM25F over fields[0..n_fields) */
    float bf_avgdl;             /* the combined average length (bm25f.h) */
    int typo;                   /* QrTypo resolved: OFF, ONE, TWO or AUTO */
    const QNode *last_word;     /* prefix_last: the leaf typed last, or NULL */
    SynMap *syn;                /* owns a reference: the table's synonyms, or NULL */
    const QNode **syn_nodes;    /* leaves put in by synonyms (their terms' origin) */
    int n_syn_nodes, cap_syn_nodes;
    int hl_fields[QR_MAX_FIELDS]; /* req->hl_fields: text fields highlighted per hit */
    int n_hl_fields;
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
    bool peers_asked;           /* peer_stats_ready ran */
    const char *stats_warning;  /* the stats source's warning, or NULL */
    RankExpr *rank;             /* arena: req->rank compiled, or NULL */
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
    uint64_t df = global_df(s, ct->field, ct->text, ct->len) + ct->df_peers;
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

/* ---- expansions: prefixes, fuzzy terms, typos ----
 *
 * A word expands through a segment's word forms (SEC_SURFACES: the words as
 * written, folded but not stemmed, each naming the term it was indexed as)
 * when its field stems and the segment has them, else through the terms
 * themselves.  So "databse~1" and a typo-tolerant "databse" reach
 * "database" and then its stem "databas", and "termina*" reaches
 * "terminal" whose stem "termin" is shorter than the prefix. */

/* One term an expansion reached. */
typedef struct Cand {
    int field;
    const char *text;  /* arena */
    uint32_t len;
    int dist;          /* edits (0 for prefixes) */
    uint64_t df;       /* docs of the forms that reached it, summed */
} Cand;

typedef struct CandSet {
    Search *s;
    Segment *seg;      /* the segment being walked */
    int field;
    bool surf;         /* walking word forms (resolve their terms) */
    Cand *v;
    int n, cap;
    int *slots;        /* open addressing over v: index + 1 */
    int n_slots;
    int max;           /* distinct terms kept at most; one more sets overflow */
    bool overflow;
} CandSet;

static uint32_t cand_hash(int field, const char *t, size_t n)
{
    uint32_t h = 2166136261u ^ (uint32_t)field;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)t[i]) * 16777619u;
    return h;
}

static bool cand_grow(CandSet *cs)
{
    int ns = cs->n_slots ? cs->n_slots * 2 : 64;
    int *sl = aalloc(cs->s, (size_t)ns * sizeof *sl);
    Cand *nv = aalloc(cs->s, (size_t)ns / 2 * sizeof *nv);
    if (!sl || !nv)
        return false;
    if (cs->n)
        memcpy(nv, cs->v, (size_t)cs->n * sizeof *nv);
    for (int i = 0; i < cs->n; i++) {
        uint32_t j = cand_hash(nv[i].field, nv[i].text, nv[i].len) & (uint32_t)(ns - 1);
        while (sl[j])
            j = (j + 1) & (uint32_t)(ns - 1);
        sl[j] = i + 1;
    }
    cs->slots = sl;
    cs->v = nv;
    cs->n_slots = ns;
    cs->cap = ns / 2;
    return true;
}

/* Note term (cs->field, t[0, n)) reached at distance dist by a form of df
 * docs.  Non-zero stops the walk (out of memory, or one term past max). */
static int cand_add(CandSet *cs, const char *t, size_t n, int dist, uint64_t df)
{
    if (cs->n_slots) {
        uint32_t j = cand_hash(cs->field, t, n) & (uint32_t)(cs->n_slots - 1);
        for (; cs->slots[j]; j = (j + 1) & (uint32_t)(cs->n_slots - 1)) {
            Cand *c = &cs->v[cs->slots[j] - 1];
            if (c->field == cs->field && c->len == n && !memcmp(c->text, t, n)) {
                c->df += df;
                if (dist < c->dist)
                    c->dist = dist;
                return 0;
            }
        }
    }
    if (cs->n >= cs->max) {
        cs->overflow = true;
        return 1;
    }
    if (cs->n == cs->cap && !cand_grow(cs))
        return 1;
    char *c = qr_arena_strndup(cs->s->arena, t, n);
    if (!c)
        return 1;
    cs->v[cs->n] = (Cand){cs->field, c, (uint32_t)n, dist, df};
    uint32_t j = cand_hash(cs->field, t, n) & (uint32_t)(cs->n_slots - 1);
    while (cs->slots[j])
        j = (j + 1) & (uint32_t)(cs->n_slots - 1);
    cs->slots[j] = ++cs->n;
    return 0;
}

static int cand_key(CandSet *cs, const uint8_t *key, size_t key_len, const TermPostings *tp,
                    int dist)
{
    const char *t = (const char *)key + 1;
    size_t n = key_len - 1;
    if (cs->surf && !seg_surface_term(cs->seg, key, key_len, tp, &t, &n))
        return 0; /* a damaged entry: its word is left out */
    return cand_add(cs, t, n, dist, tp->df);
}

static int cand_prefix_cb(void *arg, const uint8_t *key, size_t key_len, const TermPostings *tp)
{
    return cand_key(arg, key, key_len, tp, 0);
}

static int cand_fuzzy_cb(void *arg, const uint8_t *key, size_t key_len, const TermPostings *tp,
                         int dist)
{
    return cand_key(arg, key, key_len, tp, dist);
}

/* Whether words of `field` are matched through word forms (it stems). */
static bool field_has_forms(Search *s, int field)
{
    if (field != QR_ALL_FIELD)
        return field < QR_MAX_FIELDS && analyzer_stems(s->an->an[field]);
    for (int f = 0; f < s->schema->n_fields; f++)
        if (analyzer_stems(s->an->an[f]))
            return true;
    return false;
}

/* The dictionary a word of `field` expands through in seg, *surf telling
 * whether it holds word forms. */
static const TermDict *expand_dict(Search *s, Segment *seg, int field, bool *surf)
{
    *surf = field_has_forms(s, field) && seg_surfaces(seg);
    return *surf ? seg_surfaces(seg) : seg_terms(seg);
}

/* Walk segment seg for the words within `edits` of form (edits < 0: that
 * start with it) in cs->field, the first `keep` bytes of form matching
 * exactly (a typo's first letter: the walk stays under one first letter
 * instead of trying every one, which is most of its cost).  walk_cap
 * bounds the entries delivered (0 = none; QR_ELIMIT from it is not an
 * error: what was found is kept). */
static int expand_seg(Search *s, CandSet *cs, Segment *seg, const char *form, uint32_t len,
                      int edits, size_t walk_cap, uint32_t keep)
{
    uint8_t kb[1 + 1024];
    if (len > 1024)
        len = 1024;
    kb[0] = (uint8_t)cs->field;
    memcpy(kb + 1, form, len);
    cs->seg = seg;
    const TermDict *td = expand_dict(s, seg, cs->field, &cs->surf);
    QrError lerr;
    qr_error_clear(&lerr);
    int rc = edits < 0 ? td_prefix(td, kb, len + 1, walk_cap, cand_prefix_cb, cs, &lerr)
                       : td_fuzzy_ctx(td, kb, 1 + keep, kb + 1 + keep, len - keep, edits, walk_cap,
                                      cand_fuzzy_cb, cs, &s->ctx, &lerr);
    if (rc == QR_ELIMIT && !iter_ctx_interrupted(&s->ctx))
        return QR_OK;
    if (rc != QR_OK)
        qr_error_copy(&s->ctx.err, &lerr);
    return rc;
}

/* Best first: fewer edits, then more documents, then the text. */
static int cand_cmp(const void *x, const void *y)
{
    const Cand *a = x, *b = y;
    if (a->dist != b->dist)
        return a->dist - b->dist;
    if (a->df != b->df)
        return a->df > b->df ? -1 : 1;
    int c = memcmp(a->text, b->text, a->len < b->len ? a->len : b->len);
    return c ? c : (int)a->len - (int)b->len;
}

/* ---- compiling leaves ---- */

/* The terms of one leaf being gathered (deduplicated by field and text). */
typedef struct TermAcc {
    CTerm *v;
    int n, cap;
} TermAcc;

static CTerm *acc_add(Search *s, TermAcc *a, int field, const char *text, uint32_t len,
                      float weight, TermOrigin origin)
{
    for (int i = 0; i < a->n; i++)
        if (a->v[i].field == field && a->v[i].len == len && !memcmp(a->v[i].text, text, len)) {
            if (weight > a->v[i].weight) {
                a->v[i].weight = weight;
                a->v[i].origin = (uint8_t)origin;
            }
            return &a->v[i];
        }
    if (a->n == a->cap) {
        int nc = a->cap ? a->cap * 2 : 8;
        CTerm *nv = aalloc(s, (size_t)nc * sizeof *nv);
        if (!nv)
            return NULL;
        if (a->n)
            memcpy(nv, a->v, (size_t)a->n * sizeof *nv);
        a->v = nv;
        a->cap = nc;
    }
    a->v[a->n] = (CTerm){.field = field, .text = text, .len = len, .weight = weight,
                         .origin = (uint8_t)origin};
    return &a->v[a->n++];
}

/* BM25F terms: df~ is the largest df over the fields, so idf~ is the least
 * of the fields' idfs (fill_scorer's, field by field). */
static void fill_scorer_bf(Search *s, CTerm *ct)
{
    float idf = -1;
    for (int i = 0; i < s->n_fields; i++) {
        CTerm one = {.field = s->fields[i], .text = ct->text, .len = ct->len, .weight = 1,
                     .df_peers = ct->df_peers_f ? ct->df_peers_f[i] : 0};
        fill_scorer(s, &one);
        if (idf < 0 || one.sc.idf < idf)
            idf = one.sc.idf;
    }
    ct->sc = (PostScorer){.idf = idf, .k1 = s->schema->k1, .b = s->schema->b,
                          .avgdl = s->bf_avgdl > 0 ? s->bf_avgdl : 1.0f, .weight = ct->weight};
}

static void fill_any(Search *s, CTerm *ct)
{
    if (ct->field == CT_BM25F)
        fill_scorer_bf(s, ct);
    else
        fill_scorer(s, ct);
}

/* Highlight terms of a compiled term: every field it is searched in. */
static void hl_term(Search *s, const CTerm *ct)
{
    if (ct->field != CT_BM25F) {
        hl_add(s, ct->field, ct->text, ct->len);
        return;
    }
    for (int i = 0; i < s->n_fields; i++)
        hl_add(s, s->fields[i], ct->text, ct->len);
}

/* Edits a typo-tolerant word of `chars` characters may have. */
static int typo_edits(int mode, int chars)
{
    switch (mode) {
    case QR_TYPO_AUTO: return chars >= 9 ? 2 : chars >= 5 ? 1 : 0;
    case QR_TYPO_ONE: return chars >= 3 ? 1 : 0;
    case QR_TYPO_TWO: return chars >= 5 ? 2 : chars >= 3 ? 1 : 0;
    default: return 0;
    }
}

/* Bytes of the first character of t[0, n) (0 for an empty text). */
static uint32_t utf8_lead_len(const char *t, size_t n)
{
    uint32_t k = n ? 1 : 0;
    while (k < n && ((uint8_t)t[k] & 0xC0) == 0x80)
        k++;
    return k;
}

static int utf8_chars(const char *t, size_t n)
{
    int c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((uint8_t)t[i] & 0xC0) != 0x80;
    return c;
}

/* Variant weights.  When the word typed is in the index, a word a typo
 * away counts TYPO_WEIGHT of it (less per edit) and a completion of the
 * word being typed PREFIX_WEIGHT, neither with a higher idf than the word
 * itself: for equal documents, exact matches rank first.  When the word
 * typed is in no document (a typo, or a word half typed), its variants
 * stand in for it at full weight, less per edit.  The weights are what the
 * judged collections rank best with (bench/relevance.py). */
#define TYPO_WEIGHT 0.2f
#define PREFIX_WEIGHT 0.25f
/* Word forms an as-you-type prefix walks per segment, and distinct terms a
 * typo or prefix expansion gathers before picking the best max_expansions. */
#define PREFIX_WALK_MAX 8192
#define VARIANT_KEEP_MAX 8192

/* Add the implicit variants of one word (typos, or the completions of the
 * word typed last) to acc: every term reached from `forms` (the word
 * folded per field, NULL where it folds to more or less than one word),
 * best max_expansions first, none equal to an exact term of the leaf. */
static bool add_variants(Search *s, TermAcc *acc, int n_exact, bool exact_found, const int *fl,
                         const float *fw, int nf, const char *const *forms,
                         const uint32_t *flens, int edits, float boost)
{
    int max = s->req->max_expansions > 0 ? s->req->max_expansions : 128;
    CandSet cs = {.s = s, .max = VARIANT_KEEP_MAX};
    for (int i = 0; i < nf; i++) {
        if (!forms[i])
            continue;
        int e = edits;
        if (e > 0 && (e = typo_edits(s->typo, utf8_chars(forms[i], flens[i]))) > edits)
            e = edits;
        if (edits > 0 && e == 0)
            continue;
        cs.field = fl[i];
        for (int k = 0; k < s->snap->n_segs && !cs.overflow; k++)
            if (expand_seg(s, &cs, s->snap->segs[k], forms[i], flens[i], edits < 0 ? -1 : e,
                           edits < 0 ? PREFIX_WALK_MAX : 0,
                           edits < 0 ? 0 : utf8_lead_len(forms[i], flens[i])) != QR_OK)
                return false;
    }
    if (cs.n)
        qsort(cs.v, (size_t)cs.n, sizeof *cs.v, cand_cmp);
    int added = 0;
    for (int i = 0; i < cs.n && added < max; i++) {
        const Cand *c = &cs.v[i];
        int fi = 0;
        while (fi < nf && fl[fi] != c->field)
            fi++;
        int field = s->bf && nf > 1 && acc->n && acc->v[0].field == CT_BM25F ? CT_BM25F : c->field;
        bool exact = false;
        for (int k = 0; k < n_exact && !exact; k++)
            exact = acc->v[k].len == c->len && !memcmp(acc->v[k].text, c->text, c->len);
        if (exact)
            continue;
        float w = boost * (field == CT_BM25F || fi >= nf ? 1.0f : fw[fi]);
        if (edits > 0)
            w *= (exact_found ? TYPO_WEIGHT : 1.0f) *
                 (1.0f - (float)c->dist / (float)(flens[fi < nf ? fi : 0] + 1));
        else if (exact_found)
            w *= PREFIX_WEIGHT;
        if (!acc_add(s, acc, field, c->text, c->len, w, edits > 0 ? TO_TYPO : TO_PREFIX))
            return false;
        added++;
    }
    return true;
}

/* The synonyms standing for a leaf's word (folded), or NULL. */
static const char *const *leaf_synonyms(Search *s, const QNode *q, int *n)
{
    *n = 0;
    if (!s->syn || !s->an->fold)
        return NULL;
    QrBuf b;
    qr_buf_init(&b);
    QrError e;
    qr_error_clear(&e);
    const char *const *alts = NULL;
    if (synmap_fold(s->an->fold, q->text, q->text_len, &b, &e) > 0)
        alts = synmap_get(s->syn, (const char *)b.data, b.len, n);
    qr_buf_free(&b);
    return alts;
}

static bool is_syn_node(const Search *s, const QNode *q)
{
    for (int i = 0; i < s->n_syn_nodes; i++)
        if (s->syn_nodes[i] == q)
            return true;
    return false;
}

/* A node standing for `text` (a synonym) in the place of `like`: a phrase
 * (one word reads as a term), SHOULD, with `boost`, recorded as a
 * synonym's. */
static QNode *syn_node(Search *s, const QNode *like, const char *text, float boost)
{
    QNode *n = aalloc(s, sizeof *n);
    if (!n)
        return NULL;
    *n = (QNode){.kind = QN_PHRASE, .occur = QO_SHOULD, .field = like->field, .text = text,
                 .text_len = (uint32_t)strlen(text), .boost = boost, .pos = like->pos};
    if (s->n_syn_nodes == s->cap_syn_nodes) {
        int nc = s->cap_syn_nodes ? s->cap_syn_nodes * 2 : 8;
        const QNode **nn = aalloc(s, (size_t)nc * sizeof *nn);
        if (!nn)
            return NULL;
        if (s->n_syn_nodes)
            memcpy(nn, s->syn_nodes, (size_t)s->n_syn_nodes * sizeof *nn);
        s->syn_nodes = nn;
        s->cap_syn_nodes = nc;
    }
    s->syn_nodes[s->n_syn_nodes++] = n;
    return n;
}

static CNode *compile(Search *s, const QNode *q);

/* A one-word leaf (QN_TERM whose text analyzes to one token in every field
 * it is searched in): the word in those fields (one BM25F term when they
 * combine), its one-word synonyms, its typo variants and, typed last, its
 * completions -- all one OR of terms, so the WAND path still applies.
 * Synonyms of several words become phrases beside it. */
static CNode *compile_word(Search *s, const QNode *q, CNode *c, const int *fl, const float *fw,
                           int nf, TokList *tl)
{
    TermAcc acc = {0};
    bool same = true;
    for (int i = 1; i < nf; i++)
        same &= tl[i].len[0] == tl[0].len[0] && !memcmp(tl[i].text[0], tl[0].text[0], tl[0].len[0]);
    bool bf = s->bf && !q->field && nf > 1 && same;
    TermOrigin origin = is_syn_node(s, q) ? TO_SYNONYM : TO_QUERY;
    if (bf) {
        if (!acc_add(s, &acc, CT_BM25F, tl[0].text[0], tl[0].len[0], q->boost, origin))
            return NULL;
    } else {
        for (int i = 0; i < nf; i++)
            if (!acc_add(s, &acc, fl[i], tl[i].text[0], tl[i].len[0], fw[i] * q->boost, origin))
                return NULL;
    }
    int n_exact = acc.n;
    /* synonyms: one word joins the OR, several make a phrase */
    int n_syn = 0;
    const char *const *syn = origin == TO_QUERY ? leaf_synonyms(s, q, &n_syn) : NULL;
    CNode **phr = n_syn ? aalloc(s, (size_t)n_syn * sizeof *phr) : NULL;
    int n_phr = 0;
    for (int k = 0; k < n_syn; k++) {
        QNode *alt = syn_node(s, q, syn[k], q->boost);
        if (!alt)
            return NULL;
        TokList at[QR_MAX_FIELDS];
        int most = 0;
        for (int i = 0; i < nf; i++) {
            if (analyze(s, fl[i], alt->text, alt->text_len, 0, &at[i]) != QR_OK)
                return NULL;
            if (at[i].n > most)
                most = at[i].n;
        }
        if (most == 1) {
            for (int i = 0; i < nf; i++) {
                if (at[i].n != 1)
                    continue;
                CTerm *ct = bf ? acc_add(s, &acc, CT_BM25F, at[i].text[0], at[i].len[0], q->boost,
                                         TO_SYNONYM)
                               : acc_add(s, &acc, fl[i], at[i].text[0], at[i].len[0],
                                         fw[i] * q->boost, TO_SYNONYM);
                if (!ct)
                    return NULL;
            }
        } else if (most > 1) {
            if (!(phr[n_phr++] = compile(s, alt)))
                return NULL;
        }
    }
    /* typos and completions, through the word folded but not stemmed */
    bool typing = q == s->last_word;
    if ((s->typo != QR_TYPO_OFF || typing) && origin == TO_QUERY) {
        const char *forms[QR_MAX_FIELDS];
        uint32_t flens[QR_MAX_FIELDS];
        int edits = 0;
        for (int i = 0; i < nf; i++) {
            TokList f;
            if (analyze(s, fl[i], q->text, q->text_len, ANALYZE_NO_STEM | ANALYZE_KEEP_STOPWORDS,
                        &f) != QR_OK)
                return NULL;
            forms[i] = f.n == 1 ? f.text[0] : NULL;
            flens[i] = f.n == 1 ? f.len[0] : 0;
            int e = f.n == 1 ? typo_edits(s->typo, utf8_chars(f.text[0], f.len[0])) : 0;
            if (e > edits)
                edits = e;
        }
        bool found = false; /* the word typed is in some document */
        for (int i = 0; i < n_exact && !found; i++)
            if (acc.v[i].field != CT_BM25F)
                found = global_df(s, acc.v[i].field, acc.v[i].text, acc.v[i].len) > 0;
            else
                for (int k = 0; k < s->n_fields && !found; k++)
                    found = global_df(s, s->fields[k], acc.v[i].text, acc.v[i].len) > 0;
        if (edits > 0 &&
            !add_variants(s, &acc, n_exact, found, fl, fw, nf, forms, flens, edits, q->boost))
            return NULL;
        if (typing && !add_variants(s, &acc, n_exact, found, fl, fw, nf, forms, flens, -1, q->boost))
            return NULL;
    }
    /* statistics; a variant never outweighs the word it stands in for */
    float exact_idf = 0;
    for (int i = 0; i < acc.n; i++) {
        fill_any(s, &acc.v[i]);
        if (i < n_exact) {
            uint64_t df = 0;
            if (acc.v[i].field != CT_BM25F)
                df = global_df(s, acc.v[i].field, acc.v[i].text, acc.v[i].len);
            else
                for (int k = 0; k < s->n_fields && !df; k++)
                    df = global_df(s, s->fields[k], acc.v[i].text, acc.v[i].len);
            if (df && acc.v[i].sc.idf > exact_idf)
                exact_idf = acc.v[i].sc.idf;
        } else if ((acc.v[i].origin == TO_TYPO || acc.v[i].origin == TO_PREFIX) && exact_idf > 0 &&
                   acc.v[i].sc.idf > exact_idf) {
            acc.v[i].sc.idf = exact_idf;
        }
        hl_term(s, &acc.v[i]);
    }
    c->kind = CK_TERMS;
    c->terms = acc.v;
    c->n_terms = acc.n;
    if (n_phr == 0)
        return c;
    /* the word's terms OR the phrases of its longer synonyms */
    CNode *terms = aalloc(s, sizeof *terms);
    CNode **kids = aalloc(s, ((size_t)n_phr + 1) * sizeof *kids);
    if (!terms || !kids)
        return NULL;
    *terms = *c;
    terms->occur = QO_SHOULD;
    kids[0] = terms;
    for (int k = 0; k < n_phr; k++) {
        phr[k]->occur = QO_SHOULD;
        kids[k + 1] = phr[k];
    }
    *c = (CNode){.kind = CK_BOOL, .occur = c->occur, .boost = 1.0f, .src = c->src, .kids = kids,
                 .n_kids = n_phr + 1, .min_should = 1};
    return c;
}

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
        }
        if (n_tok <= 0) {
            c->kind = CK_NONE; /* only stop words / punctuation */
            return c;
        }
        if (n_tok == 1 && same && q->kind == QN_TERM)
            return compile_word(s, q, c, fl, fw, nf, tl);
        for (int i = 0; i < nf; i++)
            for (int k = 0; k < tl[i].n; k++)
                hl_add(s, fl[i], tl[i].text[k], tl[i].len[k]);
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
                              .weight = fw[i] * q->boost,
                              .origin = is_syn_node(s, q) ? TO_SYNONYM : TO_QUERY};
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
        TermOrigin origin = is_syn_node(s, q) ? TO_SYNONYM : TO_QUERY;
        for (int i = 0; i < nf; i++) {
            if (tl[i].n != n_tok)
                continue;
            for (int k = 0; k < n_tok; k++) {
                CTerm *ct = &c->terms[c->n_pfields * n_tok + k];
                *ct = (CTerm){.field = fl[i], .text = tl[i].text[k], .len = tl[i].len[k],
                              .weight = fw[i] * q->boost, .origin = (uint8_t)origin};
                fill_scorer(s, ct);
                c->offsets[k] = tl[i].pos[k] - tl[i].pos[0];
            }
            c->n_pfields++;
        }
        return c;
    }
    /* prefix / fuzzy: fold without stemming, then expand over every segment
     * (its word forms where the field stems); more than max_expansions terms
     * switch to a constant-score bitmap so that counts stay exact */
    int max = s->req->max_expansions > 0 ? s->req->max_expansions : 128;
    CandSet cs = {.s = s, .max = max};
    int edits = q->kind == QN_PREFIX ? -1 : q->edits;
    uint32_t qlen[QR_MAX_FIELDS]; /* the folded word's bytes per field */
    bool has_words = false;       /* some field's analysis gave a word */
    for (int i = 0; i < nf; i++) {
        TokList tl;
        qlen[i] = 0;
        if (analyze(s, fl[i], q->text, q->text_len, ANALYZE_NO_STEM | ANALYZE_KEEP_STOPWORDS,
                    &tl) != QR_OK)
            return NULL;
        has_words |= tl.n > 0;
        if (tl.n != 1)
            continue; /* "foo-bar*" folds to two words: nothing can match one term */
        qlen[i] = tl.len[0];
        cs.field = fl[i];
        for (int k = 0; k < s->snap->n_segs && !cs.overflow; k++)
            if (expand_seg(s, &cs, s->snap->segs[k], tl.text[0], tl.len[0], edits, 0, 0) != QR_OK)
                return NULL;
        if (s->ctx.err.code != QR_OK)
            return NULL;
        if (cs.overflow) {
            c->kind = CK_BITMAP;
            c->bm_fields = aalloc(s, (size_t)nf * sizeof(int));
            if (!c->bm_fields)
                return NULL;
            for (int j = 0; j < nf; j++)
                c->bm_fields[j] = fl[j];
            c->n_bm_fields = nf;
            c->bm_text = tl.text[0];
            c->bm_len = tl.len[0];
            c->bm_edits = edits;
            c->boost = q->boost;
            return c;
        }
    }
    /* no expansion matches nothing (+zzz* must not drop out of its group);
     * only text that analyzes to no word drops out, as for terms */
    c->kind = has_words ? CK_TERMS : CK_NONE;
    c->terms = aalloc(s, ((size_t)cs.n + 1) * sizeof *c->terms);
    if (!c->terms)
        return NULL;
    for (int k = 0; k < cs.n; k++) {
        const Cand *cd = &cs.v[k];
        int fi = 0;
        while (fi < nf - 1 && fl[fi] != cd->field)
            fi++;
        float f = cd->dist > 0 ? 1.0f - (float)cd->dist / (float)(qlen[fi] + 1) : 1.0f;
        CTerm *ct = &c->terms[c->n_terms++];
        *ct = (CTerm){.field = cd->field, .text = cd->text, .len = cd->len,
                      .weight = f * fw[fi] * q->boost};
        fill_scorer(s, ct);
        hl_add(s, ct->field, ct->text, ct->len);
    }
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

/* ---- statistics of the other nodes (bm25_stats.c, docs/scale-out.md) ---- */

/* The terms of the compiled tree c (scoring ones and more), from out[n]
 * on when out is not NULL; returns the new count. */
static int peer_terms(CNode *c, CTerm **out, int n)
{
    int own = c->kind == CK_TERMS ? c->n_terms : c->kind == CK_PHRASE ? c->n_pfields * c->n_phrase : 0;
    for (int i = 0; i < own; i++, n++)
        if (out)
            out[n] = &c->terms[i];
    for (int i = 0; c->kind == CK_BOOL && i < c->n_kids; i++)
        n = peer_terms(c->kids[i], out, n);
    return n;
}

/* With a stats source installed (other nodes hold the rest of the table),
 * the first scoring iterator waits here: N, the field lengths and every
 * term's df become sums over all the nodes and the scorers are filled
 * again, so a score equals one index's over all the documents.  Asked once
 * per Search, never for counts.  False, with the context's error set, when
 * a node could not answer. */
static bool peer_stats_ready(Search *s)
{
    if (s->peers_asked)
        return s->ctx.err.code == QR_OK;
    s->peers_asked = true;
    const QrStatsSource *src = quarry_stats_source(s->t->db);
    int n = src && s->root ? peer_terms(s->root, NULL, 0) : 0;
    if (n == 0)
        return true;
    CTerm **cts = aalloc(s, (size_t)n * sizeof *cts);
    if (!cts)
        return false;
    peer_terms(s->root, cts, 0);
    /* a BM25F term is asked once per combined field */
    int n_ts = 0;
    for (int i = 0; i < n; i++)
        n_ts += cts[i]->field == CT_BM25F ? s->n_fields : 1;
    QrTermStat *ts = aalloc(s, (size_t)n_ts * sizeof *ts);
    QrBm25Stats *sum = aalloc(s, 2 * sizeof *sum); /* [0] this node, [1] the others */
    if (!ts || !sum)
        return false;
    for (int i = 0, k = 0; i < n; i++) {
        if (cts[i]->field != CT_BM25F) {
            ts[k++] = (QrTermStat){.field = cts[i]->field, .text = cts[i]->text, .len = cts[i]->len};
            continue;
        }
        for (int f = 0; f < s->n_fields; f++)
            ts[k++] = (QrTermStat){.field = s->fields[f], .text = cts[i]->text, .len = cts[i]->len};
    }
    QrError e;
    qr_error_clear(&e);
    if (src->add(src->arg, s->t, &sum[1], ts, n_ts, s->arena, &s->stats_warning, &e) != QR_OK) {
        if (e.code == QR_OK)
            qr_error_set(&e, QR_EINTERNAL, "statistics source failed without an error");
        qr_error_copy(&s->ctx.err, &e);
        return false;
    }
    bm25_snapshot_totals(s->snap, &sum[0]);
    s->N = sum[0].n_docs + sum[1].n_docs;
    for (int f = 0; f <= QR_ALL_FIELD; f++) {
        uint64_t nd = sum[0].field_docs[f] + sum[1].field_docs[f];
        uint64_t tokens = sum[0].field_tokens[f] + sum[1].field_tokens[f];
        s->avgdl[f] = nd ? (double)tokens / (double)nd : 1.0;
    }
    if (s->bf) { /* the combined length over every node (bf_setup's rule) */
        double tokens = 0;
        uint64_t most = 0;
        for (int i = 0; i < s->n_fields; i++) {
            int f = s->fields[i];
            uint64_t nd = sum[0].field_docs[f] + sum[1].field_docs[f];
            tokens += (double)s->fweights[i] * (double)(sum[0].field_tokens[f] + sum[1].field_tokens[f]);
            if (nd > most)
                most = nd;
        }
        s->bf_avgdl = most && tokens > 0 ? (float)(tokens / (double)most) : 1.0f;
    }
    for (int i = 0, k = 0; i < n; i++) {
        if (cts[i]->field == CT_BM25F) {
            uint64_t *d = aalloc(s, (size_t)s->n_fields * sizeof *d);
            if (!d)
                return false;
            for (int f = 0; f < s->n_fields; f++)
                d[f] = ts[k++].df;
            cts[i]->df_peers_f = d;
        } else {
            cts[i]->df_peers = ts[k++].df;
        }
        fill_any(s, cts[i]);
    }
    return true;
}

const char *search_stats_warning(const Search *s) { return s->stats_warning; }

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

/* A BM25F term in segment seg: its postings in every combined field that
 * has it, scored together (bm25f.h); NULL when no field has it here. */
static Iter *bf_term_iter(Search *s, Segment *seg, const CTerm *ct, bool scoring)
{
    if (scoring && !peer_stats_ready(s))
        return NULL;
    Iter *kids[QR_MAX_FIELDS];
    int kf[QR_MAX_FIELDS], n = 0;
    for (int i = 0; i < s->n_fields; i++) {
        TermPostings tp;
        if (!seg_term(seg, s->fields[i], ct->text, ct->len, &tp))
            continue;
        Iter *it = seg_postings(seg, &s->ctx, &tp, NULL, false);
        if (!it)
            return NULL;
        note_opened(s, it);
        kids[n] = it;
        kf[n++] = i;
    }
    if (n == 0)
        return NULL;
    if (!scoring)
        return n == 1 ? kids[0] : bm25f_iter_new(&s->ctx, kids, kf, n, NULL);
    const uint32_t **norms = aalloc(s, (size_t)s->n_fields * sizeof *norms);
    if (!norms)
        return NULL;
    for (int i = 0; i < s->n_fields; i++)
        norms[i] = seg_norms(seg, s->fields[i]);
    Bm25fScorer sc = {.idf = ct->sc.idf, .k1 = ct->sc.k1, .b = ct->sc.b, .avgdl = ct->sc.avgdl,
                      .weight = ct->sc.weight, .n_fields = s->n_fields, .fw = s->fweights,
                      .norms = norms};
    return bm25f_iter_new(&s->ctx, kids, kf, n, &sc);
}

static Iter *term_iter(Search *s, Segment *seg, const CTerm *ct, bool scoring, bool positions)
{
    if (ct->field == CT_BM25F)
        return bf_term_iter(s, seg, ct, scoring);
    TermPostings tp;
    if (!seg_term(seg, ct->field, ct->text, ct->len, &tp))
        return NULL;
    if (scoring && !peer_stats_ready(s))
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
    bool surf;        /* keys are word forms: their terms' postings */
} BmCtx;

static int bm_add_term(void *arg, const uint8_t *key, size_t key_len, const TermPostings *tp)
{
    BmCtx *b = arg;
    TermPostings own;
    if (b->surf) {
        const char *t;
        size_t n;
        if (!seg_surface_term(b->seg, key, key_len, tp, &t, &n) ||
            !seg_term(b->seg, key[0], t, n, &own))
            return 0;
        tp = &own;
    }
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
    BmCtx b = {s, seg, bm, false};
    for (int i = 0; i < c->n_bm_fields; i++) {
        uint8_t kb[1 + 1024];
        uint32_t len = c->bm_len > 1024 ? 1024 : c->bm_len;
        kb[0] = (uint8_t)c->bm_fields[i];
        memcpy(kb + 1, c->bm_text, len);
        QrError lerr;
        qr_error_clear(&lerr);
        const TermDict *td = expand_dict(s, seg, c->bm_fields[i], &b.surf);
        int rc = c->bm_edits < 0
                     ? td_prefix(td, kb, len + 1, SIZE_MAX, bm_add_term, &b, &lerr)
                     : td_fuzzy_ctx(td, kb, 1, kb + 1, len, c->bm_edits, SIZE_MAX, bm_add_fuzzy,
                                    &b, &s->ctx, &lerr);
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

/* ---- ranking by an expression (req->rank, query/rank.h) ---- */

static int rank_segment(Search *s, int i, TopK *tk);

#define RANK_FIRST_CANDIDATES 64
#define RANK_MAX_CANDIDATES (1 << 16) /* beyond, every match is ranked */

/* The interval of each field of the expression over the snapshot (segment
 * column statistics; NULL reads as 0, so a column with NULLs includes 0).
 * Deleted rows are counted too: a wider interval is still a bound. */
static void rank_field_ranges(Search *s, double *lo, double *hi)
{
    for (int f = 0; f < rank_n_fields(s->rank); f++) {
        int fi = rank_field(s->rank, f);
        QrFieldType ft = s->schema->fields[fi].type;
        lo[f] = INFINITY;
        hi[f] = -INFINITY;
        for (int i = 0; i < s->snap->n_segs; i++) {
            const Column *c = seg_column(s->snap->segs[i], fi);
            ColStats st;
            if (c)
                st = col_stats(c);
            double v[3];
            int n = 0;
            if (!c || st.null_count > 0 || !st.has_range)
                v[n++] = 0;
            if (c && st.has_range) {
                const ColVal *mm[2] = {&st.min, &st.max};
                for (int m = 0; m < 2; m++)
                    v[n++] = mm[m]->kind == CV_FLOAT  ? mm[m]->u.f
                             : mm[m]->kind == CV_BOOL ? (double)mm[m]->u.b
                             : ft == QR_FT_TIMESTAMP  ? (double)mm[m]->u.i / 1e6
                                                      : (double)mm[m]->u.i;
            }
            for (int j = 0; j < n; j++) {
                lo[f] = v[j] < lo[f] ? v[j] : lo[f];
                hi[f] = v[j] > hi[f] ? v[j] : hi[f];
            }
        }
        if (lo[f] > hi[f])
            lo[f] = hi[f] = 0; /* no segments */
    }
}

/* The expression's value for local doc d of segment si with BM25 score. */
static double rank_of(Search *s, int si, uint32_t d, float score)
{
    double vals[RANK_MAX_FIELDS];
    Segment *seg = s->snap->segs[si];
    for (int f = 0; f < rank_n_fields(s->rank); f++) {
        int fi = rank_field(s->rank, f);
        const Column *c = seg_column(seg, fi);
        int64_t iv = 0;
        double dv = 0;
        bool bv = false;
        vals[f] = 0;
        switch (s->schema->fields[fi].type) {
        case QR_FT_FLOAT:
            if (c && col_get_float(c, d, &dv))
                vals[f] = dv;
            break;
        case QR_FT_BOOL:
            if (c && col_get_bool(c, d, &bv))
                vals[f] = bv;
            break;
        case QR_FT_TIMESTAMP:
            if (c && col_get_int(c, d, &iv))
                vals[f] = (double)iv / 1e6;
            break;
        default:
            if (c && col_get_int(c, d, &iv))
                vals[f] = (double)iv;
        }
    }
    return rank_eval(s->rank, score, vals);
}

/* Offer a (global) doc to tk at its rank. */
static void rank_offer(Search *s, TopK *tk, DocId doc, float score)
{
    int si;
    uint32_t local;
    if (snapshot_locate(s->snap, doc, &si, &local))
        topk_offer(tk, doc, (float)rank_of(s, si, local, score));
}

/* The k best hits by the rank expression, into *out (sorted; hits' score is
 * the rank as a float, ties by doc).  Exact, with pruning where the
 * expression allows it: the BM25 top-k' (block-max WAND) is ranked, and
 * every match left out scores at most the k'-th BM25 score s', so its rank
 * is at most the expression's bound with score in [0, s'] and each field in
 * its column range.  When that bound is below the k-th rank found, no match
 * left out can enter and the answer is final; else k' grows (x4).  An
 * expression that grows with the score (score * f(x) with f >= 0, score +
 * f(x), ...) stops after a round or two; others, or k' past
 * RANK_MAX_CANDIDATES, rank every match. */
static int rank_topk(Search *s, int k, QrSearchRes *res, TopK **out)
{
    double lo[RANK_MAX_FIELDS], hi[RANK_MAX_FIELDS];
    rank_field_ranges(s, lo, hi);
    QrSearchStats *st = &res->stats;
    st->strategy = "rank";
    TopK *best = NULL;
    bool done = false;
    int64_t kk = (int64_t)k * 4 > RANK_FIRST_CANDIDATES ? (int64_t)k * 4 : RANK_FIRST_CANDIDATES;
    /* with the total known, a round that would hold every match is no
     * cheaper than ranking every match directly */
    for (; rank_uses_score(s->rank) && !done && kk <= RANK_MAX_CANDIDATES &&
           (s->req->skip_total || (uint64_t)kk < res->total);
         kk *= 4) {
        TopK *cand = topk_new(&s->ctx, (int)kk);
        if (!cand)
            return s->ctx.err.code;
        for (int i = 0; i < s->snap->n_segs && s->ctx.err.code == QR_OK; i++)
            rank_segment(s, i, cand);
        if (s->ctx.err.code != QR_OK || !(best = topk_new(&s->ctx, k)))
            return s->ctx.err.code;
        for (int h = 0; h < cand->n; h++)
            rank_offer(s, best, cand->hits[h].doc, cand->hits[h].score);
        st->rank_rounds++;
        st->rank_candidates += (uint64_t)cand->n;
        if (cand->n < kk) {
            done = true; /* every match was a candidate */
            break;
        }
        double b_lo, b_hi;
        rank_bound(s->rank, 0, topk_threshold(cand), lo, hi, &b_lo, &b_hi);
        b_hi += fabs(b_hi) * 1e-9; /* room for libm's last-bit differences */
        done = best->n == k && isfinite(b_hi) && (float)b_hi < topk_threshold(best);
    }
    if (!done) {
        st->rank_exhaustive = true;
        if (!(best = topk_new(&s->ctx, k)))
            return s->ctx.err.code;
        uint32_t docs[256];
        float scores[256];
        for (int i = 0; i < s->snap->n_segs && s->ctx.err.code == QR_OK; i++) {
            const roaring_bitmap_t *fb = seg_filter(s, i);
            if (s->ctx.err.code != QR_OK)
                break;
            SearchCursor c;
            search_seg_cursor(s, i, true, fb, &c);
            size_t n;
            while ((n = search_cursor_next(&c, docs, scores, 256)) > 0) {
                for (size_t j = 0; j < n; j++)
                    topk_offer(best, s->snap->base[i] + docs[j],
                               (float)rank_of(s, i, docs[j], scores[j]));
                st->rank_candidates += n;
            }
        }
        if (s->ctx.err.code != QR_OK)
            return s->ctx.err.code;
    }
    topk_sorted(best);
    *out = best;
    return QR_OK;
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
/* ---- the compiled terms (EXPLAIN (SCORES)) ---- */

static const char *const ORIGIN_NAMES[] = {"query", "synonym", "typo", "prefix"};

typedef struct TermList {
    Search *s;
    SearchTerm *v;
    int n, cap;
} TermList;

static void terms_walk(TermList *tl, const CNode *c, float boost)
{
    if (!c || c->occur == QO_MUST_NOT)
        return;
    if (c->kind == CK_BOOL) {
        for (int i = 0; i < c->n_kids; i++)
            terms_walk(tl, c->kids[i], boost * c->boost);
        return;
    }
    int n = c->kind == CK_TERMS ? c->n_terms
            : c->kind == CK_PHRASE ? c->n_pfields * c->n_phrase
                                   : 0;
    for (int i = 0; i < n; i++) {
        const CTerm *ct = &c->terms[i];
        int field = ct->field == CT_BM25F ? -1 : ct->field;
        bool seen = false;
        for (int k = 0; k < tl->n && !seen; k++)
            seen = tl->v[k].field == field && tl->v[k].len == ct->len &&
                   !memcmp(tl->v[k].text, ct->text, ct->len);
        if (seen)
            continue;
        if (tl->n == tl->cap) {
            int nc = tl->cap ? tl->cap * 2 : 16;
            SearchTerm *nv = aalloc(tl->s, (size_t)nc * sizeof *nv);
            if (!nv)
                return;
            if (tl->n)
                memcpy(nv, tl->v, (size_t)tl->n * sizeof *nv);
            tl->v = nv;
            tl->cap = nc;
        }
        uint64_t df = 0;
        if (field < 0)
            for (int k = 0; k < tl->s->n_fields; k++) {
                uint64_t d = global_df(tl->s, tl->s->fields[k], ct->text, ct->len);
                df = d > df ? d : df;
            }
        else
            df = global_df(tl->s, field, ct->text, ct->len);
        tl->v[tl->n++] = (SearchTerm){.text = ct->text, .len = ct->len, .field = field,
                                      .source = ORIGIN_NAMES[ct->origin % 4],
                                      .weight = ct->sc.weight * boost, .idf = ct->sc.idf,
                                      .avgdl = ct->sc.avgdl, .df = df};
    }
}

int search_terms(Search *s, const SearchTerm **out, int *n)
{
    TermList tl = {.s = s};
    terms_walk(&tl, s->root, 1.0f);
    *out = tl.v;
    *n = tl.n;
    return s->ctx.err.code;
}

int search_fields(const Search *s, const int **fields, const float **weights)
{
    *fields = s->fields;
    *weights = s->fweights;
    return s->n_fields;
}

/* tf of (field, text) in doc `local` of seg (0 when absent). */
static uint32_t doc_tf(Search *s, Segment *seg, int field, const char *text, uint32_t len,
                       uint32_t local)
{
    TermPostings tp;
    if (!seg_term(seg, field, text, len, &tp))
        return 0;
    Iter *it = seg_postings(seg, &s->ctx, &tp, NULL, false);
    uint32_t tf = it && iter_advance(it, local) == local ? it->vt->freq(it) : 0;
    iter_close(it);
    return tf;
}

bool search_term_doc(Search *s, const SearchTerm *t, int si, uint32_t local, uint32_t *tf,
                     uint32_t *len, float *score)
{
    Segment *seg = s->snap->segs[si];
    if (t->field >= 0) {
        *tf = doc_tf(s, seg, t->field, t->text, t->len, local);
        if (!*tf)
            return false;
        const uint32_t *norms = seg_norms(seg, t->field);
        *len = norms ? norms[local] : 0;
        PostScorer sc = {.idf = t->idf, .k1 = s->schema->k1, .b = s->schema->b,
                         .avgdl = t->avgdl, .weight = t->weight};
        *score = bm25_term_score(&sc, *tf, *len);
        return true;
    }
    float ftf = 0;
    const uint32_t *norms[QR_MAX_FIELDS];
    *tf = 0;
    for (int i = 0; i < s->n_fields; i++) {
        uint32_t k = doc_tf(s, seg, s->fields[i], t->text, t->len, local);
        *tf += k;
        if (k)
            ftf += s->fweights[i] * (float)k;
        norms[i] = seg_norms(seg, s->fields[i]);
    }
    if (!*tf)
        return false;
    Bm25fScorer sc = {.idf = t->idf, .k1 = s->schema->k1, .b = s->schema->b, .avgdl = t->avgdl,
                      .weight = t->weight, .n_fields = s->n_fields, .fw = s->fweights,
                      .norms = norms};
    float dl = bm25f_doc_len(&sc, local);
    *len = (uint32_t)(dl + 0.5f);
    *score = bm25f_score(&sc, ftf, dl);
    return true;
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
    if (tok->is_gram && !m)
        return 0; /* a CJK character shows only when it is what matched */
    sc->toks[sc->n++] = (SnipTok){tok->start, tok->end, m};
    return 0;
}

#define SNIP_WINDOW 32     /* words in a fragment unless the request says */
#define SNIP_WINDOW_MAX 1000
#define SNIP_FRAGS_MAX 16
#define SNIP_SEP " … "

/* Snippet shape: words per fragment and fragments wanted. */
typedef struct SnipShape {
    int window;
    int frags;
} SnipShape;

static SnipShape snip_shape(const QrSearchReq *req)
{
    SnipShape sh = {req->fragment_words > 0 ? req->fragment_words : SNIP_WINDOW,
                    req->fragments > 0 ? req->fragments : 1};
    if (sh.window > SNIP_WINDOW_MAX)
        sh.window = SNIP_WINDOW_MAX;
    if (sh.frags > SNIP_FRAGS_MAX)
        sh.frags = SNIP_FRAGS_MAX;
    return sh;
}

/* The text of tokens [from, to) of sc with the matched ones marked. */
static char *snip_render(const SnipCtx *sc, const char *text, size_t tlen, int from, int to,
                         const char *pre, const char *post, QrArena *arena)
{
    QrBuf b;
    qr_buf_init(&b);
    if (from > 0)
        qr_buf_append(&b, "…", strlen("…"));
    uint32_t cur = sc->toks[from].start;
    for (int k = from; k < to; k++) {
        const SnipTok *t = &sc->toks[k];
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

/* The best fragments of one text of field sc->field, best first: windows
 * of sh.window words with the most distinct matched terms, then the most
 * matches, none overlapping another; 0 without a match. */
static int snippet_frags(Analyzer *an, SnipCtx *sc, const char *text, size_t tlen,
                         const char *pre, const char *post, SnipShape sh, QrArena *arena,
                         char **out)
{
    sc->n = 0;
    QrError e;
    qr_error_clear(&e);
    if (!an || analyzer_run(an, text, tlen, 0, ANALYZE_CJK_GRAMS, snip_sink, sc, &e) != QR_OK)
        return 0;
    int n_out = 0;
    int taken_from[SNIP_FRAGS_MAX], taken_to[SNIP_FRAGS_MAX];
    while (n_out < sh.frags) {
        int best = -1, best_distinct = 0, best_hits = 0;
        for (int w = 0; w < sc->n; w++) {
            if (!sc->toks[w].match)
                continue;
            bool free_span = true;
            for (int k = 0; k < n_out && free_span; k++)
                free_span = w + sh.window <= taken_from[k] || w >= taken_to[k];
            if (!free_span)
                continue;
            int distinct = 0, hits = 0;
            uint64_t seen = 0;
            for (int k = w; k < sc->n && k < w + sh.window; k++) {
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
            break;
        /* start a few words before the first match for context, within
         * the room the fragments already taken leave */
        int lead = sh.window >= 8 ? 4 : 0;
        int from = best >= lead ? best - lead : 0;
        for (int k = 0; k < n_out; k++)
            if (taken_to[k] > from && taken_to[k] <= best)
                from = taken_to[k];
        int to = from + sh.window < sc->n ? from + sh.window : sc->n;
        for (int k = 0; k < n_out; k++)
            if (taken_from[k] >= best && taken_from[k] < to)
                to = taken_from[k];
        if (to <= best)
            to = best + 1;
        taken_from[n_out] = from;
        taken_to[n_out] = to;
        if (!(out[n_out] = snip_render(sc, text, tlen, from, to, pre, post, arena)))
            break;
        n_out++;
    }
    return n_out;
}

/* The first words of a text (no match to show): a fragment of the
 * shape's length, cut at a character boundary. */
static char *snippet_head(const char *t, size_t n, QrArena *arena)
{
    size_t k = n;
    if (k > 200) {
        k = 200;
        while (k > 0 && ((unsigned char)t[k] & 0xC0) == 0x80)
            k--; /* do not cut a UTF-8 sequence */
    }
    return qr_arena_strndup(arena, t, k);
}

/* Join fragments with SNIP_SEP into one string (arena). */
static char *snip_join(char *const *frags, int n, QrArena *arena)
{
    if (n == 1)
        return frags[0];
    QrBuf b;
    qr_buf_init(&b);
    for (int i = 0; i < n; i++) {
        if (i)
            qr_buf_append(&b, SNIP_SEP, strlen(SNIP_SEP));
        qr_buf_append(&b, frags[i], strlen(frags[i]));
    }
    char *out = qr_buf_ok(&b) ? qr_arena_strndup(arena, (const char *)b.data, b.len) : NULL;
    qr_buf_free(&b);
    return out;
}

/* The fragments of texts[0..n) (values of fields[0..n)): the first text
 * with a match gives them; without one, the head of the first text.  0
 * when n is 0 or every text is NULL. */
static int snippet_texts(const QsAnalyzers *an, const SearchHl *hl, bool any_field,
                         const char *pre, const char *post, SnipShape sh, const int *fields,
                         const char *const *texts, const size_t *lens, int n, QrArena *arena,
                         char **out)
{
    pre = pre ? pre : "<b>";
    post = post ? post : "</b>";
    SnipCtx sc = {.hl = hl, .any_field = any_field};
    int got = 0, fallback = -1;
    for (int i = 0; i < n && !got; i++) {
        if (!texts[i])
            continue;
        if (fallback < 0)
            fallback = i;
        int f = fields[i];
        sc.field = f;
        got = snippet_frags(f >= 0 && f < QR_MAX_FIELDS ? an->an[f] : NULL, &sc, texts[i],
                            lens[i], pre, post, sh, arena, out);
    }
    if (!got && fallback >= 0 && (out[0] = snippet_head(texts[fallback], lens[fallback], arena)))
        got = 1;
    qr_free(sc.toks);
    return got;
}

/* The snippet of texts[0..n) (search_int.h search_hl_snippet). */
static char *snippet_of(const QsAnalyzers *an, const SearchHl *hl, bool any_field,
                        const char *pre, const char *post, SnipShape sh, const int *fields,
                        const char *const *texts, const size_t *lens, int n, QrArena *arena)
{
    char *frags[SNIP_FRAGS_MAX];
    int k = snippet_texts(an, hl, any_field, pre, post, sh, fields, texts, lens, n, arena, frags);
    return k ? snip_join(frags, k, arena) : NULL;
}

/* The string values of field f in a stored document (every value of an
 * array, in turn), appended to the parallel arrays; false on OOM. */
typedef struct DocTexts {
    int *fields;
    const char **texts;
    size_t *lens;
    int n, cap;
} DocTexts;

static bool doc_texts_add(DocTexts *dt, const cJSON *root, const QrSchema *sc, int f)
{
    const cJSON *fv = cJSON_GetObjectItemCaseSensitive(root, sc->fields[f].name);
    const cJSON *v = cJSON_IsArray(fv) ? fv->child : fv;
    for (; v; v = cJSON_IsArray(fv) ? v->next : NULL) {
        if (!cJSON_IsString(v))
            continue;
        if (dt->n == dt->cap) {
            int cap = dt->cap ? dt->cap * 2 : 8;
            int *nf = qr_realloc(dt->fields, (size_t)cap * sizeof *nf);
            dt->fields = nf ? nf : dt->fields;
            const char **nt = qr_realloc(dt->texts, (size_t)cap * sizeof *nt);
            dt->texts = nt ? nt : dt->texts;
            size_t *nl = qr_realloc(dt->lens, (size_t)cap * sizeof *nl);
            dt->lens = nl ? nl : dt->lens;
            if (!nf || !nt || !nl)
                return false;
            dt->cap = cap;
        }
        dt->fields[dt->n] = f;
        dt->texts[dt->n] = v->valuestring;
        dt->lens[dt->n++] = strlen(v->valuestring);
    }
    return true;
}

static void doc_texts_free(DocTexts *dt)
{
    qr_free(dt->fields);
    qr_free(dt->texts);
    qr_free(dt->lens);
}

/* A hit's snippet from its stored document: the searched fields' strings,
 * every text field for "_all"; with hl_fields also one highlight per field
 * named there (hit->highlights). */
static void make_snippets(Search *s, const char *json, size_t len, QrHit *hit)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root)
        return;
    SearchHl hl = {s->hl, s->n_hl};
    SnipShape sh = snip_shape(s->req);
    if (s->req->snippets) {
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
        DocTexts dt = {0};
        bool ok = true;
        for (int fi = 0; fi < n_sf && ok; fi++)
            ok = doc_texts_add(&dt, root, s->schema, sfields[fi]);
        if (ok)
            hit->snippet = snippet_of(s->an, &hl, false, s->req->hl_pre, s->req->hl_post, sh,
                                      dt.fields, dt.texts, dt.lens, dt.n, s->arena);
        doc_texts_free(&dt);
    }
    if (s->n_hl_fields) {
        hit->highlights = aalloc(s, (size_t)s->n_hl_fields * sizeof *hit->highlights);
        for (int i = 0; hit->highlights && i < s->n_hl_fields; i++) {
            int f = s->hl_fields[i];
            QrHighlight *h = &hit->highlights[hit->n_highlights++];
            h->field = s->schema->fields[f].name;
            DocTexts dt = {0};
            char *frags[SNIP_FRAGS_MAX];
            int k = doc_texts_add(&dt, root, s->schema, f)
                        ? snippet_texts(s->an, &hl, true, s->req->hl_pre, s->req->hl_post, sh,
                                        dt.fields, dt.texts, dt.lens, dt.n, s->arena, frags)
                        : 0;
            doc_texts_free(&dt);
            if (k && (h->fragments = aalloc(s, (size_t)k * sizeof *h->fragments))) {
                memcpy(h->fragments, frags, (size_t)k * sizeof *frags);
                h->n = k;
            }
        }
    }
    cJSON_Delete(root);
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
    SnipShape sh = {SNIP_WINDOW, 1};
    *out = snippet_of(an, hl, any_field, pre, post, sh, fields, texts, lens, n, arena);
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

/* ColWalkCands.fill: the text matches of a segment, when the filter
 * checks them row by row. */
typedef struct TextCands {
    Search *s;
    Iter *it;
    const roaring_bitmap_t *dels;
} TextCands;

static int text_cands_fill(void *arg, roaring_bitmap_t *out)
{
    TextCands *tc = arg;
    if (tc->it)
        iter_to_bitmap(tc->it, tc->dels, out);
    return tc->s->ctx.err.code;
}

int search_seg_filter(Search *s, int i, const QrFilter *f, int path, roaring_bitmap_t *bm,
                      QrFilterStats *st)
{
    if (s->ctx.err.code != QR_OK)
        return s->ctx.err.code;
    Segment *seg = s->snap->segs[i];
    const roaring_bitmap_t *dels = s->snap->dels[i];
    TextCands tc = {.s = s, .dels = dels};
    ColWalkCands cands = {.n = UINT64_MAX, .fill = text_cands_fill, .arg = &tc};
    if (s->root->kind != CK_ALL) {
        tc.it = build(s, seg, s->root, false);
        cands.n = tc.it ? iter_cost(tc.it) : 0;
    }
    QrError e;
    qr_error_clear(&e);
    if (s->ctx.err.code == QR_OK &&
        colwalk_filter(f, seg, dels, (QrAccessPath)path, NULL,
                       s->root->kind != CK_ALL ? &cands : NULL, bm, st, &e) != QR_OK)
        qr_error_copy(&s->ctx.err, &e);
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
                bool num = k->field >= 0 && s->schema->fields[k->field].type == QR_FT_NUMERIC;
                qr_error_set(err, k->field < 0 ? QR_ENOTFOUND : QR_ETYPE,
                             k->field < 0 ? "sort column \"%s\" does not exist"
                             : num        ? "cannot sort by numeric field \"%s\" here (use SQL)"
                                          : "cannot sort by full-text field \"%s\"",
                             name);
                if (k->field >= 0 && !num)
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

/* Order of two sort values of key k, ascending; NULL is the largest. */
static int sval_cmp(const SortKey *k, const SVal *a, const SVal *b)
{
    int ct = k->field == SK_SCORE ? QR_COL_FLOAT64 : k->field == SK_ID ? QR_COL_KEYWORD : k->ct;
    return colwalk_key_cmp((QrColType)ct, a, b, false, false);
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

/* Path B over every live doc (within the filter) by a column: the
 * column's blocks of every segment, best zone-map bound first (colwalk.h,
 * SQL's ORDER BY walk); the walk stops at the first block whose bound
 * cannot beat the k-th hit, so a sorted column reads a block or two.  Only
 * the first key's column is decoded a block at a time (later keys and the
 * primary key are read per candidate).  false when the walk cannot serve
 * this column (a segment holds it with another type): every match is then
 * walked instead. */
static bool sorted_by_column(Search *s, SortHeap *hp)
{
    const SortKey *sk = &s->keys[0];
    Snapshot *snap = s->snap;
    if (sk->ct == QR_COL_BOOL)
        return false;
    roaring_bitmap_t **fbs = NULL;
    if (s->filter) {
        fbs = aalloc(s, ((size_t)snap->n_segs + 1) * sizeof *fbs);
        for (int i = 0; fbs && i < snap->n_segs && s->ctx.err.code == QR_OK; i++)
            fbs[i] = seg_filter(s, i);
        if (s->ctx.err.code != QR_OK)
            return true;
    }
    ColWalkOrder *w;
    QrError e;
    qr_error_clear(&e);
    int rc = colwalk_order_open(snap->segs, (const roaring_bitmap_t *const *)snap->dels,
                                snap->n_segs, sk->field, (QrColType)sk->ct, sk->desc, sk->desc,
                                fbs, NULL, &w, &e);
    if (rc == QR_EUNSUPPORTED)
        return false;
    if (rc != QR_OK) {
        qr_error_copy(&s->ctx.err, &e);
        return true;
    }
    const SVal *best;
    while (s->ctx.err.code == QR_OK && colwalk_order_peek(w, &best)) {
        if (!first_key_may_enter(s, hp, best))
            break; /* every later block is worse still */
        int si;
        const uint32_t *rows;
        const ColWalkView *view;
        uint32_t n = colwalk_order_read(w, &si, &rows, &view, &e);
        if (e.code != QR_OK)
            qr_error_copy(&s->ctx.err, &e);
        for (uint32_t r = 0; r < n; r++) {
            uint32_t row = rows ? rows[r] : view->first_row + r;
            SVal key;
            colwalk_order_key(view, row, &key);
            if (first_key_may_enter(s, hp, &key))
                sorted_offer(s, si, row, 0.0f, &key, hp);
        }
        if (iter_ctx_interrupted(&s->ctx))
            break;
    }
    colwalk_order_close(w);
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
    if (root->kind == CK_ALL && s->keys[0].field >= 0 && sorted_by_column(s, hp)) {
        for (int i = 0; i < s->snap->n_segs && s->ctx.err.code == QR_OK; i++) {
            const roaring_bitmap_t *fb = seg_filter(s, i), *dels = s->snap->dels[i];
            total += fb ? roaring_bitmap_get_cardinality(fb)
                        : seg_n_docs(s->snap->segs[i]) -
                              (dels ? roaring_bitmap_get_cardinality(dels) : 0);
        }
        goto done;
    }
    for (int i = 0; i < s->snap->n_segs && s->ctx.err.code == QR_OK; i++) {
        Segment *seg = s->snap->segs[i];
        const roaring_bitmap_t *dels = s->snap->dels[i];
        const roaring_bitmap_t *fb = seg_filter(s, i);
        if (s->ctx.err.code != QR_OK)
            break;
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
done:
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

/* req->hl_fields ("title,body") into s->hl_fields: text fields only. */
static int parse_hl_fields(Search *s, QrError *err)
{
    const char *p = s->req->hl_fields;
    while (p && *p) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t n = strcspn(p, ",");
        while (n && p[n - 1] == ' ')
            n--;
        if (!n)
            break;
        char name[QR_NAME_MAX + 1];
        snprintf(name, sizeof name, "%.*s", (int)(n > QR_NAME_MAX ? QR_NAME_MAX : n), p);
        int f = schema_field_index(s->schema, name);
        if (n > QR_NAME_MAX || f < 0 || s->schema->fields[f].type != QR_FT_TEXT ||
            !s->schema->fields[f].indexed) {
            qr_error_set(err, QR_EINVAL, "highlight field \"%.*s\" is not a full-text field of "
                                         "table \"%s\"",
                         (int)(n > 64 ? 64 : n), p, s->t->name);
            return QR_EINVAL;
        }
        bool dup = false;
        for (int i = 0; i < s->n_hl_fields; i++)
            dup |= s->hl_fields[i] == f;
        if (!dup && s->n_hl_fields < QR_MAX_FIELDS)
            s->hl_fields[s->n_hl_fields++] = f;
        p += strcspn(p, ",");
    }
    return QR_OK;
}

static int compute_facets(Search *s, const CNode *root, QrSearchRes *res)
{
    FacetRun *fr;
    QrError e;
    qr_error_clear(&e);
    int rc = facets_new(s->schema, s->req->facets, s->req->n_facets, s->arena, &fr, &e);
    for (int i = 0; rc == QR_OK && i < s->snap->n_segs && s->ctx.err.code == QR_OK; i++) {
        roaring_bitmap_t *bm = seg_matches(s, i, root);
        if (!bm)
            break;
        rc = facets_add(fr, s->snap->segs[i], bm, &e);
        roaring_bitmap_free(bm);
    }
    if (rc == QR_OK && s->ctx.err.code == QR_OK && (rc = facets_finish(fr, &res->facets, &e)) == QR_OK)
        res->n_facets = s->req->n_facets;
    if (rc != QR_OK)
        qr_error_copy(&s->ctx.err, &e);
    facets_free(fr);
    return s->ctx.err.code;
}

/* ---- entry point ---- */

/* BM25F's combined average length: the weighted tokens of every combined
 * field over the most documents any of them has (Lucene's
 * CombinedFieldQuery), over the snapshot's segments. */
static void bf_setup(Search *s)
{
    if (!s->bf)
        return;
    double tokens = 0;
    uint64_t most = 0;
    for (int i = 0; i < s->n_fields; i++) {
        uint64_t nd = 0, tot = 0;
        for (int k = 0; k < s->snap->n_segs; k++) {
            SegFieldStats st = seg_field_stats(s->snap->segs[k], s->fields[i]);
            nd += st.n_docs;
            tot += st.total_len;
        }
        tokens += (double)s->fweights[i] * (double)tot;
        if (nd > most)
            most = nd;
    }
    s->bf_avgdl = most && tokens > 0 ? (float)(tokens / (double)most) : 1.0f;
}

/* The word being typed: the query's last plain word when the query ends
 * with it (no space, quote, bracket or suffix after it), not excluded. */
static const QNode *last_word(const QNode *q, const char *text, size_t len)
{
    const QNode *best = NULL;
    const QNode *stack[QPARSE_MAX_DEPTH_LIMIT * 2 + 8];
    int n = 0;
    stack[n++] = q;
    while (n) {
        const QNode *x = stack[--n];
        if (x->kind == QN_BOOL) {
            for (int i = 0; i < x->n_kids && n < (int)(sizeof stack / sizeof stack[0]); i++)
                if (x->kids[i]->occur != QO_MUST_NOT)
                    stack[n++] = x->kids[i];
        } else if (x->kind == QN_TERM && (!best || x->pos > best->pos)) {
            best = x;
        }
    }
    if (!best || best->text_len == 0 || best->text_len > len || best->boost != 1.0f)
        return NULL;
    if (memcmp(text + len - best->text_len, best->text, best->text_len) != 0)
        return NULL;
    return best;
}

/* A bool of kids[0..n) (copied) with the occur and min_should rules of
 * qparse.h. */
static QNode *syn_bool(Search *s, QOccur occur, QNode **kids, int n, uint32_t pos)
{
    QNode *b = aalloc(s, sizeof *b);
    QNode **k = aalloc(s, (size_t)n * sizeof *k);
    if (!b || !k)
        return NULL;
    memcpy(k, kids, (size_t)n * sizeof *k);
    bool must = false;
    for (int i = 0; i < n; i++)
        must |= k[i]->occur == QO_MUST;
    *b = (QNode){.kind = QN_BOOL, .occur = occur, .boost = 1.0f, .pos = pos, .kids = k,
                 .n_kids = n, .min_should = must ? 0 : 1};
    return b;
}

/* Multi-word synonyms, before compiling (one-word keys are compile_word's):
 * an exact phrase whose words are a key becomes (phrase OR its synonyms);
 * a run of plain words of one group whose words are a key gets the
 * synonyms beside it (as optional clauses), or, when the words are
 * required, is replaced by ((+w1 +w2 ...) OR its synonyms), required. */
static int syn_rewrite(Search *s, QNode **slot)
{
    QNode *q = *slot;
    QrBuf b;
    qr_buf_init(&b);
    QrError e;
    qr_error_clear(&e);
    int rc = QR_OK;
    if (q->kind == QN_PHRASE && q->slop == 0 && !is_syn_node(s, q)) {
        int n = 0;
        const char *const *alts = NULL;
        if (synmap_fold(s->an->fold, q->text, q->text_len, &b, &e) > 1)
            alts = synmap_get(s->syn, (const char *)b.data, b.len, &n);
        if (alts) {
            QNode *kids[1 + 64];
            QNode *self = aalloc(s, sizeof *self);
            if (!self)
                goto oom;
            *self = *q;
            self->occur = QO_SHOULD;
            kids[0] = self;
            int k = 1;
            for (int i = 0; i < n && k < 65; i++)
                if (!(kids[k++] = syn_node(s, q, alts[i], 1.0f)))
                    goto oom;
            if (!(*slot = syn_bool(s, q->occur, kids, k, q->pos)))
                goto oom;
        }
        qr_buf_free(&b);
        return QR_OK;
    }
    if (q->kind != QN_BOOL) {
        qr_buf_free(&b);
        return QR_OK;
    }
    for (int i = 0; i < q->n_kids && rc == QR_OK; i++)
        rc = syn_rewrite(s, &q->kids[i]);
    int maxw = synmap_max_words(s->syn);
    QNode **out = aalloc(s, ((size_t)q->n_kids * 2 + 64) * sizeof *out);
    int n_out = 0, cap_out = q->n_kids * 2 + 64;
    if (!out)
        goto oom;
    for (int i = 0; i < q->n_kids && rc == QR_OK;) {
        QNode *k0 = q->kids[i];
        int found_j = -1, n_alts = 0;
        const char *const *alts = NULL;
        if (k0->kind == QN_TERM && k0->occur != QO_MUST_NOT && k0->boost == 1.0f) {
            for (int j = i + maxw - 1; j > i && !alts; j--) {
                if (j >= q->n_kids)
                    continue;
                bool run = true;
                for (int x = i + 1; x <= j && run; x++) {
                    const QNode *kx = q->kids[x];
                    run = kx->kind == QN_TERM && kx->occur == k0->occur && kx->boost == 1.0f &&
                          (!kx->field) == (!k0->field) &&
                          (!kx->field || !strcmp(kx->field, k0->field));
                }
                if (!run)
                    continue;
                b.len = 0;
                int words = 0;
                for (int x = i; x <= j; x++) {
                    if (x > i)
                        qr_buf_putc(&b, ' ');
                    int w = synmap_fold(s->an->fold, q->kids[x]->text, q->kids[x]->text_len, &b,
                                        &e);
                    if (w < 0)
                        goto oom;
                    words += w;
                }
                if (words > 1 && (alts = synmap_get(s->syn, (const char *)b.data, b.len, &n_alts)))
                    found_j = j;
            }
        }
        if (!alts) {
            out[n_out++] = k0;
            i++;
            continue;
        }
        if (n_out + (found_j - i + 1) + n_alts + 1 > cap_out) {
            int nc = cap_out * 2 + n_alts + (found_j - i) + 2;
            QNode **no = aalloc(s, (size_t)nc * sizeof *no);
            if (!no)
                goto oom;
            memcpy(no, out, (size_t)n_out * sizeof *no);
            out = no;
            cap_out = nc;
        }
        if (k0->occur == QO_SHOULD) {
            for (int x = i; x <= found_j; x++)
                out[n_out++] = q->kids[x];
            for (int a = 0; a < n_alts; a++)
                if (!(out[n_out++] = syn_node(s, k0, alts[a], 1.0f)))
                    goto oom;
        } else { /* required words: (+w1 +w2) OR synonyms, required */
            QNode *words = syn_bool(s, QO_SHOULD, q->kids + i, found_j - i + 1, k0->pos);
            QNode **alt = aalloc(s, ((size_t)n_alts + 1) * sizeof *alt);
            if (!words || !alt)
                goto oom;
            alt[0] = words;
            for (int a = 0; a < n_alts; a++)
                if (!(alt[a + 1] = syn_node(s, k0, alts[a], 1.0f)))
                    goto oom;
            if (!(out[n_out++] = syn_bool(s, QO_MUST, alt, n_alts + 1, k0->pos)))
                goto oom;
        }
        i = found_j + 1;
    }
    if (rc == QR_OK) {
        q->kids = out;
        q->n_kids = n_out;
    }
    qr_buf_free(&b);
    return rc;
oom:
    qr_buf_free(&b);
    if (s->ctx.err.code == QR_OK)
        iter_ctx_fail(&s->ctx, e.code ? e.code : QR_ENOMEM, "%s",
                      e.code ? e.message : "out of memory");
    return s->ctx.err.code;
}

static int setup_fields(Search *s, QrError *err)
{
    const QrSchema *sc = s->schema;
    /* the combined "_all" field is BM25F with unit weights: it serves while
     * every text field weighs 1, and the schema's weights when one does not */
    bool unit = true;
    for (int f = 0; f < sc->n_fields; f++)
        if (sc->fields[f].type == QR_FT_TEXT && sc->fields[f].indexed)
            unit &= sc->fields[f].weight == 1.0f;
    if ((!s->req->fields || !*s->req->fields) && sc->all_field && unit) {
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
    synmap_unref(s->syn);
    s->syn = NULL;
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
    if (req->scoring < QR_SCORING_TABLE || req->scoring > QR_SCORING_SUM)
        return qr_error_set(err, QR_EINVAL, "unknown scoring %d", req->scoring);
    if (req->typo < QR_TYPO_OFF || req->typo > QR_TYPO_TABLE)
        return qr_error_set(err, QR_EINVAL, "unknown typo tolerance %d", req->typo);
    int scoring = req->scoring ? req->scoring : (int)s->schema->scoring;
    s->bf = scoring == QR_SCORING_BM25F && s->n_fields > 1;
    s->typo = req->typo == QR_TYPO_TABLE ? (int)s->schema->typo : req->typo;
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
    if (!match_all && !req->no_synonyms) {
        if ((rc = syn_acquire(s->t, s->an->fold, &s->syn, err)) != QR_OK)
            return rc;
        if (s->syn && synmap_max_words(s->syn) > 1 && (rc = syn_rewrite(s, &q)) != QR_OK) {
            qr_error_copy(err, &s->ctx.err);
            return rc;
        }
    }
    if (req->prefix_last && !match_all)
        s->last_word = last_word(q, qtext, qlen);
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
    bf_setup(s);
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
    if (rc == QR_OK && req->rank && *req->rank) {
        if (s->sorted)
            rc = qr_error_set(err, QR_EINVAL, "rank cannot be combined with sort or search_after");
        else if ((rc = rank_parse(s->schema, req->rank, arena, &s->rank, err)) != QR_OK)
            qr_error_detail(err, QR_RANK_ERROR_DETAIL);
    }
    if (rc == QR_OK)
        rc = facets_check(s->schema, req->facets, req->n_facets, err);
    if (rc == QR_OK && !req->count_only)
        rc = parse_hl_fields(s, err);
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
    if (k > 0 && s->rank && s->ctx.err.code == QR_OK) {
        if (rank_topk(s, k, res, &tk) != QR_OK)
            goto fail;
    } else if (k > 0 && s->ctx.err.code == QR_OK) {
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
            if (req->fetch_docs || req->snippets || s->n_hl_fields) {
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
                    if (req->snippets || s->n_hl_fields)
                        make_snippets(s, (const char *)d, dl, hit);
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
    res->warning = s->stats_warning;
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
