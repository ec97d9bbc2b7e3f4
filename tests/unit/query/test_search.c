/*
 * test_search.c — qr_search as integrated (parser, analysis, segments,
 * deletes, counting, top-k strategies), checked against a brute-force model.
 *
 * The model (engine_util.c) re-analyzes every stored document of the
 * table's snapshot with the schema's analyzers, deleted-but-not-merged ones
 * included, so it knows N, df, field lengths and positions exactly.  Queries
 * are generated as trees with an intended meaning, rendered to query text,
 * and evaluated here:
 *   - match sets from the generated tree (Lucene's MUST/SHOULD/MUST_NOT rules
 *     of docs/query-language.md, stop words dropping out of their group,
 *     phrases per iter_ops.h, prefix/fuzzy over the snapshot's dictionaries);
 *   - scores from the tree qparse() returns (its normalization decides how
 *     sums group), with the float arithmetic of search.c's header comment:
 *     idf = ln(1 + (N - df + 0.5) / (df + 0.5)) over every doc of the
 *     snapshot, avgdl = field tokens / docs having the field, per-field
 *     weights times boosts, bm25_term_score summed in clause order; a word
 *     searched in several fields is one BM25F term (bm25f.h: frequencies
 *     and lengths combined with the field weights, df the largest, avgdl
 *     the weighted tokens over the most docs of a field) unless the request
 *     asks for the weighted sum;
 *   - prefix and fuzzy terms expanded through the segments' word forms
 *     (folded, unstemmed words and the terms they were indexed as) in the
 *     stemmed fields, through the terms elsewhere.
 * Checks per query: exact total (count_only and ranked), exact id set in doc
 * order (unordered mode, with paging), exhaustive top-k equal to the model's
 * (same docs, same order, same float bits), and pruned top-k (wand / and
 * strategies) equal to the exhaustive one for k = 1, 10, 100 and offsets.
 *
 * Corpora: a seeded Zipf corpus written in several commits with upserts and
 * deletes (several segments, deletes pending), then force-merged; and real
 * text from ../shared/corpora (cranfield, debian-packages) when present.
 */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "index/postings.h"
#include "query/bm25f.h"
#include "query/qparse.h"
#include "query/query_int.h"
#include "query/quarry.h"
#include "store/mem.h"
#include "store/util.h"

/* Table directories of the running test, removed at the end even when an
 * assertion ends the test early. */
static char *test_dirs[8];
static int n_test_dirs;

static void quiet(void) { qr_log_set_level(QR_LOG_ERROR); }

static void cleanup_dirs(void)
{
    for (int i = 0; i < n_test_dirs; i++) {
        eu_rmtree(test_dirs[i]);
        free(test_dirs[i]);
    }
    n_test_dirs = 0;
}

TestSuite(search, .init = quiet, .fini = cleanup_dirs);

/* ======================================================================
 * The model
 * ====================================================================== */

typedef struct Model {
    EuIndex ix;
    const QrSchema *sc;
    uint32_t n;                     /* docs (deleted included) */
    double avgdl[256];              /* by term-key byte (QR_ALL_FIELD = "_all") */
    /* request */
    int fields[QR_MAX_FIELDS];
    float fweights[QR_MAX_FIELDS];
    int n_fields;
    int max_expansions;
    bool bf;                        /* several fields combine as BM25F */
    float bf_avgdl;
    bool error;                     /* the query should fail (non-text field) */
} Model;

static void model_build(Model *m, QrTable *t)
{
    memset(m, 0, sizeof *m);
    m->sc = qr_table_schema(t);
    Snapshot *snap = table_snapshot(t->table);
    eu_index_from_snapshot(&m->ix, snap, m->sc);
    eu_index_load_forms(&m->ix, snap); /* merges keep forms of deleted docs */
    snapshot_release(snap);
    m->n = m->ix.n_docs;
    for (int f = 0; f < 256; f++)
        m->avgdl[f] = m->ix.field_docs[f]
                          ? (double)m->ix.field_total[f] / (double)m->ix.field_docs[f]
                          : 1.0;
}

static void model_free(Model *m) { eu_index_free(&m->ix); }

/* Request fields ("title^3,body" or NULL) and scoring into the model. */
static void model_set_fields(Model *m, const char *spec, int max_expansions, int scoring)
{
    m->n_fields = 0;
    m->max_expansions = max_expansions > 0 ? max_expansions : 128;
    const QrSchema *sc = m->sc;
    bool unit = true;
    for (int f = 0; f < sc->n_fields; f++)
        if (sc->fields[f].type == QR_FT_TEXT && sc->fields[f].indexed)
            unit &= sc->fields[f].weight == 1.0f;
    m->bf = false;
    if (!spec && sc->all_field && unit) { /* the combined "_all" field, weight 1 */
        m->fields[0] = QR_ALL_FIELD;
        m->fweights[0] = 1.0f;
        m->n_fields = 1;
        return;
    }
    if (!spec) {
        for (int f = 0; f < sc->n_fields; f++)
            if (sc->fields[f].type == QR_FT_TEXT && sc->fields[f].indexed) {
                m->fields[m->n_fields] = f;
                m->fweights[m->n_fields++] = sc->fields[f].weight;
            }
    } else {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", spec);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            char *caret = strchr(tok, '^');
            float w = -1;
            if (caret) {
                *caret = 0;
                w = (float)strtod(caret + 1, NULL);
            }
            int f = schema_field_index(sc, tok);
            cr_assert_geq(f, 0);
            m->fields[m->n_fields] = f;
            m->fweights[m->n_fields++] = w > 0 ? w : sc->fields[f].weight;
        }
    }
    int mode = scoring ? scoring : (int)sc->scoring;
    m->bf = mode == QR_SCORING_BM25F && m->n_fields > 1;
    /* avgdl~ = sum of w * tokens over the most docs any field has */
    double tokens = 0;
    uint64_t most = 0;
    for (int i = 0; i < m->n_fields; i++) {
        tokens += (double)m->fweights[i] * (double)m->ix.field_total[m->fields[i]];
        if (m->ix.field_docs[m->fields[i]] > most)
            most = m->ix.field_docs[m->fields[i]];
    }
    m->bf_avgdl = most && tokens > 0 ? (float)(tokens / (double)most) : 1.0f;
}

typedef struct CT {
    int field;
    const EuTerm *t; /* NULL: in no document */
    PostScorer sc;
    bool bf;         /* BM25F over the request's fields: */
    const EuTerm *bt[QR_MAX_FIELDS]; /* the term in each of them, or NULL */
} CT;

static double model_idf(const Model *m, uint64_t df)
{
    double N = (double)m->n;
    double idf;
    if (m->sc->idf == QR_IDF_LUCENE) {
        idf = log(1.0 + (N - (double)df + 0.5) / ((double)df + 0.5));
    } else { /* Robertson, floored */
        idf = log((N - (double)df + 0.5) / ((double)df + 0.5));
        if (idf < 1e-6)
            idf = 1e-6;
    }
    return idf;
}

static void ct_init(Model *m, CT *ct, int field, const char *text, size_t len, float weight)
{
    memset(ct, 0, sizeof *ct);
    ct->field = field;
    ct->t = eu_index_term(&m->ix, field, text, len);
    uint64_t df = ct->t ? ct->t->n_occ : 0;
    ct->sc.idf = (float)model_idf(m, df);
    ct->sc.k1 = m->sc->k1;
    ct->sc.b = m->sc->b;
    ct->sc.avgdl = (float)(m->avgdl[field] > 0 ? m->avgdl[field] : 1.0);
    ct->sc.weight = weight;
}

/* A BM25F term over the request's fields: df the largest of theirs. */
static void ct_init_bf(Model *m, CT *ct, const char *text, size_t len, float weight)
{
    memset(ct, 0, sizeof *ct);
    ct->bf = true;
    ct->field = -2;
    uint64_t df = 0;
    for (int i = 0; i < m->n_fields; i++) {
        ct->bt[i] = eu_index_term(&m->ix, m->fields[i], text, len);
        if (ct->bt[i] && ct->bt[i]->n_occ > df)
            df = ct->bt[i]->n_occ;
    }
    ct->sc.idf = (float)model_idf(m, df);
    ct->sc.k1 = m->sc->k1;
    ct->sc.b = m->sc->b;
    ct->sc.avgdl = m->bf_avgdl;
    ct->sc.weight = weight;
}

/* Score of ct in doc d, or false when the term is not there. */
static bool ct_score(const Model *m, const CT *ct, uint32_t d, float *out)
{
    if (ct->bf) {
        float tf = 0, dl = 0;
        bool any = false;
        for (int i = 0; i < m->n_fields; i++) {
            const EuOcc *o = ct->bt[i] ? eu_term_occ(ct->bt[i], d) : NULL;
            if (o) {
                tf += m->fweights[i] * (float)o->tf;
                any = true;
            }
        }
        if (!any)
            return false;
        for (int i = 0; i < m->n_fields; i++)
            dl += m->fweights[i] * (float)eu_doc_norm(&m->ix, d, m->fields[i]);
        Bm25fScorer bs = {.idf = ct->sc.idf, .k1 = ct->sc.k1, .b = ct->sc.b,
                          .avgdl = ct->sc.avgdl, .weight = ct->sc.weight};
        *out = bm25f_score(&bs, tf, dl);
        return true;
    }
    if (!ct->t)
        return false;
    const EuOcc *o = eu_term_occ(ct->t, d);
    if (!o)
        return false;
    *out = bm25_term_score(&ct->sc, o->tf, eu_doc_norm(&m->ix, d, ct->field));
    return true;
}

typedef struct Res {
    bool none;      /* analyzed to nothing: drops out of its group */
    bool is_terms;  /* compiled to a disjunction of plain terms */
    CT *cts;        /* is_terms: the terms in scoring order */
    int n_cts;
    uint8_t *m;     /* match per doc */
    float *s;       /* score per doc */
} Res;

static Res res_new(const Model *m)
{
    Res r = {0};
    r.m = calloc(m->n + 1, 1);
    r.s = calloc(m->n + 1, sizeof *r.s);
    return r;
}

static void res_free(Res *r)
{
    free(r->m);
    free(r->s);
    free(r->cts);
    memset(r, 0, sizeof *r);
}

typedef struct Toks {
    char *text[128];
    uint32_t len[128], pos[128];
    int n;
} Toks;

static int toks_sink(void *arg, const Token *t)
{
    Toks *k = arg;
    if (k->n == 128)
        return 1;
    k->text[k->n] = strndup(t->text, t->len);
    k->len[k->n] = t->len;
    k->pos[k->n] = t->pos;
    k->n++;
    return 0;
}

static void analyze(Model *m, int field, const char *text, size_t len, unsigned flags, Toks *out)
{
    out->n = 0;
    Analyzer *an = eu_field_analyzer(&m->ix, field);
    if (!an)
        return;
    QrError e;
    qr_error_clear(&e);
    int rc = analyzer_run(an, text, len, 0, flags, toks_sink, out, &e);
    cr_assert(rc == QR_OK || rc == 1, "analyzer: %s", e.message);
}

static void toks_free(Toks *t)
{
    for (int i = 0; i < t->n; i++)
        free(t->text[i]);
    t->n = 0;
}

/* Fields a leaf applies to, with weights; -1 for a non-text field. */
static int leaf_fields(Model *m, const QNode *q, int *fl, float *fw)
{
    if (!q->field) {
        memcpy(fl, m->fields, sizeof(int) * (size_t)m->n_fields);
        memcpy(fw, m->fweights, sizeof(float) * (size_t)m->n_fields);
        return m->n_fields;
    }
    int f = schema_field_index(m->sc, q->field);
    if (f < 0 || m->sc->fields[f].type != QR_FT_TEXT || !m->sc->fields[f].indexed)
        return -1;
    fl[0] = f;
    fw[0] = m->sc->fields[f].weight;
    for (int i = 0; i < m->n_fields; i++)
        if (m->fields[i] == f)
            fw[0] = m->fweights[i];
    return 1;
}

/* Phrase match in one doc: an assignment p_k of positions with
 * max(p_k - off_k) - min(...) <= slop, same words on distinct positions. */
static bool assign_group(const EuIndex *ix, const EuOcc *const *occ, const uint32_t *off,
                         const int *grp_terms, int gi, int gn, int64_t w, int slop,
                         uint32_t *used, int n_used)
{
    if (gi == gn)
        return true;
    int k = grp_terms[gi];
    const EuOcc *o = occ[k];
    for (uint32_t q = 0; q < o->tf; q++) {
        int64_t p = ix->pos[o->pos_off + q];
        int64_t r = p - off[k];
        if (r < w || r > w + slop)
            continue;
        bool taken = false;
        for (int u = 0; u < n_used; u++)
            taken |= used[u] == (uint32_t)p;
        if (taken)
            continue;
        used[n_used] = (uint32_t)p;
        if (assign_group(ix, occ, off, grp_terms, gi + 1, gn, w, slop, used, n_used + 1))
            return true;
    }
    return false;
}

static bool phrase_match(const Model *m, const CT *cts, const uint32_t *off, int n, int slop,
                         uint32_t d)
{
    const EuOcc *occ[128];
    for (int k = 0; k < n; k++) {
        if (!cts[k].t || !(occ[k] = eu_term_occ(cts[k].t, d)))
            return false;
    }
    const EuIndex *ix = &m->ix;
    /* candidate window starts: every p - off_k */
    for (int a = 0; a < n; a++) {
        for (uint32_t q = 0; q < occ[a]->tf; q++) {
            int64_t w = (int64_t)ix->pos[occ[a]->pos_off + q] - off[a];
            bool ok = true;
            bool done[128] = {false};
            for (int k = 0; k < n && ok; k++) {
                if (done[k])
                    continue;
                int grp[128], gn = 0;
                for (int j = k; j < n; j++)
                    if (cts[j].t == cts[k].t) {
                        grp[gn++] = j;
                        done[j] = true;
                    }
                uint32_t used[128];
                ok = assign_group(ix, occ, off, grp, 0, gn, w, slop, used, 0);
            }
            if (ok)
                return true;
        }
    }
    return false;
}

/* Levenshtein distance in code points (invalid bytes count as one unit). */
static int cps(const uint8_t *s, size_t n, uint32_t *out)
{
    int k = 0;
    size_t i = 0;
    while (i < n && k < 1100) {
        uint8_t c = s[i];
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = len > 0 && i + (size_t)len <= n;
        for (int j = 1; ok && j < len; j++)
            ok = (s[i + (size_t)j] & 0xC0) == 0x80;
        if (!ok) {
            out[k++] = 0x110000u + c;
            i++;
            continue;
        }
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
        for (int j = 1; j < len; j++)
            cp = (cp << 6) | (s[i + (size_t)j] & 0x3F);
        out[k++] = cp;
        i += (size_t)len;
    }
    return k;
}

/* The distance td_fuzzy promises, over code points (engine_util.c). */
static int lev(const uint8_t *a, size_t an, const uint8_t *b, size_t bn, int max)
{
    static uint32_t x[1100], y[1100];
    int n = cps(a, an, x), mm = cps(b, bn, y);
    if (abs(n - mm) > max)
        return max + 1;
    return eu_osa(x, (size_t)n, y, (size_t)mm);
}

/* Does index term key (field byte + text) match the prefix / fuzzy leaf? */
static int expand_match(const EuTerm *t, int field, const char *text, uint32_t len, int edits)
{
    if (t->key[0] != (uint8_t)field)
        return -1;
    const uint8_t *k = t->key + 1;
    size_t kl = t->key_len - 1;
    if (edits < 0)
        return kl >= len && !memcmp(k, text, len) ? 0 : -1;
    int d = lev((const uint8_t *)text, len, k, kl, edits);
    return d <= edits ? d : -1;
}

static Res eval(Model *m, const QNode *q);

static Res eval_leaf(Model *m, const QNode *q)
{
    Res r = res_new(m);
    int fl[QR_MAX_FIELDS];
    float fw[QR_MAX_FIELDS];
    int nf = leaf_fields(m, q, fl, fw);
    if (nf < 0) {
        m->error = true;
        r.none = true;
        return r;
    }
    if (q->kind == QN_TERM || q->kind == QN_PHRASE) {
        Toks tl[QR_MAX_FIELDS];
        int n_tok = -1;
        bool same = true;
        for (int i = 0; i < nf; i++) {
            analyze(m, fl[i], q->text, q->text_len, 0, &tl[i]);
            if (n_tok >= 0 && tl[i].n != n_tok)
                same = false;
            if (tl[i].n > n_tok)
                n_tok = tl[i].n;
        }
        bool same_text = same && n_tok == 1;
        for (int i = 1; i < nf && same_text; i++)
            same_text = tl[i].len[0] == tl[0].len[0] && !memcmp(tl[i].text[0], tl[0].text[0],
                                                               tl[0].len[0]);
        if (n_tok <= 0) {
            r.none = true;
        } else if (n_tok == 1 && same && q->kind == QN_TERM && !q->field && m->bf && nf > 1 &&
                   same_text) {
            /* one word in several fields: one BM25F term */
            r.is_terms = true;
            r.cts = calloc(1, sizeof *r.cts);
            ct_init_bf(m, &r.cts[r.n_cts++], tl[0].text[0], tl[0].len[0], q->boost);
            for (uint32_t d = 0; d < m->n; d++) {
                float x;
                if (ct_score(m, &r.cts[0], d, &x)) {
                    r.m[d] = 1;
                    r.s[d] = x;
                }
            }
        } else if (n_tok == 1 && same) {
            r.is_terms = true;
            r.cts = calloc((size_t)nf, sizeof *r.cts);
            for (int i = 0; i < nf; i++)
                if (tl[i].n)
                    ct_init(m, &r.cts[r.n_cts++], fl[i], tl[i].text[0], tl[i].len[0],
                            fw[i] * q->boost);
            for (uint32_t d = 0; d < m->n; d++) {
                float s = 0;
                for (int k = 0; k < r.n_cts; k++) {
                    float x;
                    if (ct_score(m, &r.cts[k], d, &x)) {
                        r.m[d] = 1;
                        s += x;
                    }
                }
                r.s[d] = s;
            }
        } else {
            int slop = q->kind == QN_PHRASE ? q->slop : 0;
            CT *cts = calloc((size_t)n_tok, sizeof *cts);
            uint32_t off[128];
            for (int i = 0; i < nf; i++) {
                if (tl[i].n != n_tok)
                    continue;
                for (int k = 0; k < n_tok; k++) {
                    ct_init(m, &cts[k], fl[i], tl[i].text[k], tl[i].len[k], fw[i] * q->boost);
                    off[k] = tl[i].pos[k] - tl[i].pos[0];
                }
                for (uint32_t d = 0; d < m->n; d++) {
                    if (!phrase_match(m, cts, off, n_tok, slop, d))
                        continue;
                    float ps = 0;
                    for (int k = 0; k < n_tok; k++) {
                        float x = 0;
                        ct_score(m, &cts[k], d, &x);
                        ps += x;
                    }
                    r.m[d] = 1;
                    r.s[d] += ps;
                }
            }
            free(cts);
        }
        for (int i = 0; i < nf; i++)
            toks_free(&tl[i]);
        return r;
    }
    /* prefix / fuzzy */
    int edits = q->kind == QN_PREFIX ? -1 : q->edits;
    int cap = 16, n = 0;
    CT *cts = calloc((size_t)cap, sizeof *cts);
    int *dists = calloc((size_t)cap, sizeof *dists);
    bool overflow = false, has_words = false;
    char *bm_text = NULL;
    uint32_t bm_len = 0;
    for (int i = 0; i < nf && !overflow; i++) {
        Toks tl;
        analyze(m, fl[i], q->text, q->text_len, ANALYZE_NO_STEM | ANALYZE_KEEP_STOPWORDS, &tl);
        has_words |= tl.n > 0;
        if (tl.n != 1) {
            toks_free(&tl);
            continue;
        }
        int before = n;
        bool forms = eu_field_has_forms(&m->ix, fl[i]);
        for (int s = 0; s < m->ix.n_segs && !overflow; s++) {
            uint32_t nk = forms ? m->ix.seg_n_forms[s] : m->ix.seg_n_terms[s];
            for (uint32_t k = 0; k < nk && !overflow; k++) {
                /* a word form matches by its own text and stands for its term */
                const EuTerm *t;
                int dist;
                if (forms) {
                    const EuForm *fm = &m->ix.forms[m->ix.seg_forms[s][k]];
                    t = &m->ix.terms[fm->term];
                    EuTerm as = {.key = fm->key, .key_len = fm->key_len};
                    dist = expand_match(&as, fl[i], tl.text[0], tl.len[0], edits);
                } else {
                    t = &m->ix.terms[m->ix.seg_terms[s][k]];
                    dist = expand_match(t, fl[i], tl.text[0], tl.len[0], edits);
                }
                if (dist < 0)
                    continue;
                int have = -1;
                for (int j = 0; j < n && have < 0; j++)
                    if (cts[j].t == t)
                        have = j;
                if (have >= 0) { /* the fewest edits of its forms count */
                    if (dist < dists[have])
                        dists[have] = dist;
                    continue;
                }
                if (n >= m->max_expansions) {
                    overflow = true;
                    break;
                }
                if (n == cap) {
                    cap *= 2;
                    cts = realloc(cts, sizeof *cts * (size_t)cap);
                    dists = realloc(dists, sizeof *dists * (size_t)cap);
                }
                ct_init(m, &cts[n], fl[i], (const char *)t->key + 1, t->key_len - 1, 1.0f);
                dists[n] = dist;
                n++;
            }
        }
        for (int k = before; k < n; k++) {
            float f = dists[k] > 0 ? 1.0f - (float)dists[k] / (float)(tl.len[0] + 1) : 1.0f;
            cts[k].sc.weight = f * fw[i] * q->boost;
        }
        if (overflow) {
            bm_text = strndup(tl.text[0], tl.len[0]);
            bm_len = tl.len[0];
        }
        toks_free(&tl);
    }
    free(dists);
    if (overflow) {
        /* constant-score bitmap over every leaf field: in each segment, the
         * docs of the terms its matching words (forms) stand for */
        for (int i = 0; i < nf; i++) {
            if (!eu_field_has_forms(&m->ix, fl[i])) {
                for (uint32_t k = 0; k < m->ix.n_terms; k++) {
                    const EuTerm *t = &m->ix.terms[k];
                    if (expand_match(t, fl[i], bm_text, bm_len, edits) < 0)
                        continue;
                    for (uint32_t o = 0; o < t->n_occ; o++)
                        r.m[t->occ[o].doc] = 1;
                }
                continue;
            }
            for (uint32_t k = 0; k < m->ix.n_forms; k++) {
                const EuForm *fm = &m->ix.forms[k];
                EuTerm as = {.key = fm->key, .key_len = fm->key_len};
                if (expand_match(&as, fl[i], bm_text, bm_len, edits) < 0)
                    continue;
                const EuTerm *t = &m->ix.terms[fm->term];
                for (uint32_t o = 0; o < t->n_occ; o++)
                    if (m->ix.docs[t->occ[o].doc].seg == fm->seg)
                        r.m[t->occ[o].doc] = 1;
            }
        }
        for (uint32_t d = 0; d < m->n; d++)
            r.s[d] = r.m[d] ? q->boost : 0;
        free(bm_text);
        free(cts);
        return r;
    }
    /* a prefix or fuzzy term with no expansion matches nothing; only text
     * that analyzes to no word at all drops out of its group */
    if (!has_words) {
        free(cts);
        r.none = true;
        return r;
    }
    r.is_terms = true;
    r.cts = cts;
    r.n_cts = n;
    for (uint32_t d = 0; d < m->n; d++) {
        float s = 0;
        for (int k = 0; k < n; k++) {
            float x;
            if (ct_score(m, &cts[k], d, &x)) {
                r.m[d] = 1;
                s += x;
            }
        }
        r.s[d] = s;
    }
    return r;
}

static Res eval_bool(Model *m, const QNode *q)
{
    Res r = res_new(m);
    int n = q->n_kids;
    Res *kid = calloc((size_t)n, sizeof *kid);
    int n_must_total = 0, nm = 0, ns = 0, nn = 0;
    for (int i = 0; i < n; i++) {
        kid[i] = eval(m, q->kids[i]);
        if (q->kids[i]->occur == QO_MUST)
            n_must_total++;
        if (kid[i].none)
            continue;
        if (q->kids[i]->occur == QO_MUST)
            nm++;
        else if (q->kids[i]->occur == QO_SHOULD)
            ns++;
        else
            nn++;
    }
    bool all = false, empty = false;
    float all_score = 0;
    int ms = q->min_should > 1 ? q->min_should : 1;
    if (nm == 0 && ns == 0) {
        if (n_must_total == 0 && q->min_should == 0)
            all = true;
        else if (n_must_total > 0)
            all = true;
        else
            empty = true;
    } else if (nm == 0 && ms > ns) {
        empty = true;
    }
    for (uint32_t d = 0; d < m->n && !empty; d++) {
        bool match;
        float s = 0;
        if (all) {
            match = true;
            s = all_score;
        } else if (nm) {
            match = true;
            float ms_sum = 0;
            int seen = 0;
            for (int i = 0; i < n && match; i++) {
                if (kid[i].none || q->kids[i]->occur != QO_MUST)
                    continue;
                match = kid[i].m[d];
                ms_sum = seen++ ? ms_sum + kid[i].s[d] : kid[i].s[d];
            }
            s = ms_sum;
            if (match && ns) {
                float os = 0;
                bool any = false;
                for (int i = 0; i < n; i++)
                    if (!kid[i].none && q->kids[i]->occur == QO_SHOULD && kid[i].m[d]) {
                        os += kid[i].s[d];
                        any = true;
                    }
                if (any)
                    s += os;
            }
        } else {
            int hits = 0;
            for (int i = 0; i < n; i++)
                if (!kid[i].none && q->kids[i]->occur == QO_SHOULD && kid[i].m[d]) {
                    hits++;
                    s += kid[i].s[d];
                }
            match = hits >= ms;
        }
        for (int i = 0; i < n && match; i++)
            if (!kid[i].none && q->kids[i]->occur == QO_MUST_NOT && kid[i].m[d])
                match = false;
        if (!match)
            continue;
        if (q->boost != 1.0f)
            s = s * q->boost;
        r.m[d] = 1;
        r.s[d] = s;
    }
    for (int i = 0; i < n; i++)
        res_free(&kid[i]);
    free(kid);
    return r;
}

static Res eval(Model *m, const QNode *q)
{
    if (q->kind == QN_ALL) {
        Res r = res_new(m);
        for (uint32_t d = 0; d < m->n; d++) {
            r.m[d] = 1;
            r.s[d] = q->boost;
        }
        return r;
    }
    if (q->kind == QN_BOOL)
        return eval_bool(m, q);
    return eval_leaf(m, q);
}

/* Scores as ranked: a root that is a disjunction of plain-term clauses is
 * scored as one flat sum over all their terms in order (search.c's WAND
 * path, exhaustive or not); anything else as eval() sums it. */
static Res eval_root(Model *m, const QNode *q)
{
    Res r = eval(m, q);
    if (q->kind != QN_BOOL || q->boost != 1.0f || q->min_should > 1)
        return r;
    Res *kid = calloc((size_t)q->n_kids, sizeof *kid);
    bool flat = true;
    for (int i = 0; i < q->n_kids; i++) {
        kid[i] = eval(m, q->kids[i]);
        if (q->kids[i]->occur != QO_SHOULD || !(kid[i].is_terms || kid[i].none))
            flat = false;
    }
    if (flat)
        for (uint32_t d = 0; d < m->n; d++) {
            if (!r.m[d])
                continue;
            float s = 0;
            for (int i = 0; i < q->n_kids; i++)
                for (int k = 0; k < kid[i].n_cts; k++) {
                    float x;
                    if (ct_score(m, &kid[i].cts[k], d, &x))
                        s += x;
                }
            r.s[d] = s;
        }
    for (int i = 0; i < q->n_kids; i++)
        res_free(&kid[i]);
    free(kid);
    return r;
}

/* Live matching docs sorted by (score desc, global doc asc). */
typedef struct MHit {
    float score;
    int64_t gdoc;
    uint32_t d;
} MHit;

static int cmp_mhit(const void *a, const void *b)
{
    const MHit *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return (x->gdoc > y->gdoc) - (x->gdoc < y->gdoc);
}

static int cmp_mhit_doc(const void *a, const void *b)
{
    const MHit *x = a, *y = b;
    return (x->gdoc > y->gdoc) - (x->gdoc < y->gdoc);
}

static MHit *model_hits(const Model *m, const Res *r, int *n_out, bool by_doc)
{
    MHit *h = malloc(sizeof *h * (m->n + 1));
    int n = 0;
    for (uint32_t d = 0; d < m->n; d++)
        if (r->m[d] && m->ix.docs[d].live)
            h[n++] = (MHit){r->s[d], m->ix.docs[d].gdoc, d};
    qsort(h, (size_t)n, sizeof *h, by_doc ? cmp_mhit_doc : cmp_mhit);
    *n_out = n;
    return h;
}

/* ======================================================================
 * Query generation
 * ====================================================================== */

typedef struct Gen {
    uint64_t rng;
    QrArena *arena;
    char **words;         /* term pool (raw words) */
    int n_words;
    const EuZipf *zipf;   /* over words, or NULL = uniform */
    char **texts;         /* raw field texts to cut phrases from */
    int n_texts;
    const char *const *text_fields; /* names for field scopes */
    int n_text_fields;
    bool default_and;
} Gen;

static const char *pick_word(Gen *g)
{
    if (eu_chance(&g->rng, 0.05))
        return "zzqxv";
    int i = g->zipf ? eu_zipf_draw(g->zipf, &g->rng) : (int)eu_below(&g->rng, (uint64_t)g->n_words);
    return g->words[i];
}

static QNode *qn(Gen *g, QNodeKind k)
{
    QNode *n = qr_arena_calloc(g->arena, sizeof *n);
    n->kind = k;
    n->boost = 1.0f;
    return n;
}

static const char *astr(Gen *g, const char *s, size_t n)
{
    return qr_arena_strndup(g->arena, s, n);
}

static void put_boost(Gen *g, QrBuf *b, QNode *n)
{
    if (!eu_chance(&g->rng, 0.15))
        return;
    static const float bs[] = {2.0f, 0.5f, 3.0f, 0.0f, 1.5f};
    static const char *bt[] = {"2", "0.5", "3", "0", "1.5"};
    int i = (int)eu_below(&g->rng, 5);
    n->boost = bs[i];
    qr_buf_printf(b, "^%s", bt[i]);
}

/* words of a random text, stripped to [A-Za-z0-9] runs */
static int text_words(const char *t, char out[][48], int max)
{
    int n = 0;
    const char *p = t;
    while (*p && n < max) {
        while (*p && !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                       (*p >= '0' && *p <= '9')))
            p++;
        const char *s = p;
        while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'))
            p++;
        if (p > s && p - s < 40) {
            memcpy(out[n], s, (size_t)(p - s));
            out[n][p - s] = 0;
            n++;
        }
    }
    return n;
}

static QNode *gen_leaf(Gen *g, QrBuf *b, const char *scope)
{
    QNode *n;
    uint64_t r = eu_below(&g->rng, 100);
    const char *field = NULL;
    if (!scope && g->n_text_fields && eu_chance(&g->rng, 0.2)) {
        field = g->text_fields[eu_below(&g->rng, (uint64_t)g->n_text_fields)];
        qr_buf_printf(b, "%s:", field);
    }
    if (r < 3 && !field && !scope) {
        n = qn(g, QN_ALL);
        qr_buf_printf(b, "*:*");
    } else if (r < 50) {
        n = qn(g, QN_TERM);
        const char *w = pick_word(g);
        char buf[64];
        snprintf(buf, sizeof buf, "%s", w);
        if (eu_chance(&g->rng, 0.1))
            buf[0] = (char)(buf[0] >= 'a' && buf[0] <= 'z' ? buf[0] - 32 : buf[0]);
        n->text = astr(g, buf, strlen(buf));
        n->text_len = (uint32_t)strlen(buf);
        qr_buf_printf(b, "%s", buf);
    } else if (r < 70) {
        n = qn(g, QN_PHRASE);
        char w[64][48];
        int nw = 0;
        char phrase[256] = "";
        if (g->n_texts && eu_chance(&g->rng, 0.8)) {
            nw = text_words(g->texts[eu_below(&g->rng, (uint64_t)g->n_texts)], w, 64);
        }
        int len = 2 + (int)eu_below(&g->rng, 2);
        if (nw >= len) {
            int st = (int)eu_below(&g->rng, (uint64_t)(nw - len + 1));
            for (int i = 0; i < len; i++)
                snprintf(phrase + strlen(phrase), sizeof phrase - strlen(phrase), "%s%s",
                         i ? " " : "", w[st + i]);
        } else {
            for (int i = 0; i < len; i++)
                snprintf(phrase + strlen(phrase), sizeof phrase - strlen(phrase), "%s%s",
                         i ? " " : "", pick_word(g));
        }
        n->text = astr(g, phrase, strlen(phrase));
        n->text_len = (uint32_t)strlen(phrase);
        qr_buf_printf(b, "\"%s\"", phrase);
        if (eu_chance(&g->rng, 0.4)) {
            n->slop = (int)eu_below(&g->rng, 4);
            qr_buf_printf(b, "~%d", n->slop);
        }
    } else if (r < 85) {
        n = qn(g, QN_PREFIX);
        const char *w = pick_word(g);
        size_t wl = strlen(w);
        size_t pl = 1 + eu_below(&g->rng, wl < 4 ? wl : 4);
        n->text = astr(g, w, pl);
        n->text_len = (uint32_t)pl;
        qr_buf_printf(b, "%.*s*", (int)pl, w);
    } else {
        n = qn(g, QN_FUZZY);
        const char *w = pick_word(g);
        char buf[64];
        snprintf(buf, sizeof buf, "%s", w);
        size_t bl = strlen(buf);
        int ned = (int)eu_below(&g->rng, 3);
        for (int e = 0; e < ned && bl > 1; e++) {
            size_t at = eu_below(&g->rng, bl);
            switch (eu_below(&g->rng, 3)) {
            case 0: buf[at] = (char)('a' + eu_below(&g->rng, 26)); break;
            case 1: memmove(buf + at, buf + at + 1, bl - at); bl--; break;
            default:
                if (bl < 60) {
                    memmove(buf + at + 1, buf + at, bl - at + 1);
                    buf[at] = (char)('a' + eu_below(&g->rng, 26));
                    bl++;
                }
            }
        }
        n->text = astr(g, buf, bl);
        n->text_len = (uint32_t)bl;
        int mode = (int)eu_below(&g->rng, 3);
        n->edits = mode == 0 ? 1 : 2;
        qr_buf_printf(b, "%s~%s", buf, mode == 0 ? "1" : mode == 1 ? "2" : "");
    }
    if (n->kind != QN_ALL)
        n->field = field ? field : scope;
    put_boost(g, b, n);
    return n;
}

static void set_min_should(QNode *n)
{
    bool must = false, should = false;
    for (int i = 0; i < n->n_kids; i++) {
        must |= n->kids[i]->occur == QO_MUST;
        should |= n->kids[i]->occur == QO_SHOULD;
    }
    n->min_should = !must && should ? 1 : 0;
}

static QNode *gen_clause(Gen *g, QrBuf *b, int depth, const char *scope);

/* A group's clauses (without parentheses). */
static QNode *gen_group_body(Gen *g, QrBuf *b, int depth, const char *scope)
{
    QNode *n = qn(g, QN_BOOL);
    int k = 2 + (int)eu_below(&g->rng, 3);
    n->kids = qr_arena_calloc(g->arena, sizeof *n->kids * (size_t)k);
    n->n_kids = k;
    int style = (int)eu_below(&g->rng, 4); /* markers, AND, OR, NOT */
    QOccur bare = g->default_and ? QO_MUST : QO_SHOULD;
    for (int i = 0; i < k; i++) {
        QOccur oc = bare;
        if (i)
            qr_buf_printf(b, "%s", style == 1 ? " AND " : style == 2 ? " OR " : " ");
        if (style == 0) {
            uint64_t r = eu_below(&g->rng, 100);
            if (r < 25) {
                qr_buf_putc(b, '+');
                oc = QO_MUST;
            } else if (r < 45) {
                qr_buf_putc(b, '-');
                oc = QO_MUST_NOT;
            }
        } else if (style == 1) {
            oc = QO_MUST;
        } else if (style == 2) {
            oc = QO_SHOULD;
        } else if (i > 0) {
            qr_buf_printf(b, "NOT ");
            oc = QO_MUST_NOT;
        }
        n->kids[i] = gen_clause(g, b, depth - 1, scope);
        n->kids[i]->occur = oc;
    }
    set_min_should(n);
    return n;
}

static QNode *gen_clause(Gen *g, QrBuf *b, int depth, const char *scope)
{
    if (depth <= 0 || !eu_chance(&g->rng, 0.3))
        return gen_leaf(g, b, scope);
    const char *inner = scope;
    if (!scope && g->n_text_fields && eu_chance(&g->rng, 0.15)) {
        inner = g->text_fields[eu_below(&g->rng, (uint64_t)g->n_text_fields)];
        qr_buf_printf(b, "%s:", inner);
    }
    qr_buf_putc(b, '(');
    QNode *n = gen_group_body(g, b, depth, inner);
    qr_buf_putc(b, ')');
    put_boost(g, b, n);
    return n;
}

static QNode *gen_query(Gen *g, QrBuf *b)
{
    QNode *root;
    if (eu_chance(&g->rng, 0.25))
        root = gen_leaf(g, b, NULL);
    else
        root = gen_group_body(g, b, 2, NULL);
    root->occur = QO_MUST;
    qr_buf_putc(b, 0);
    return root;
}

/* A flat query: terms only, OR (default) or AND (default_and), no boosts. */
static QNode *gen_flat(Gen *g, QrBuf *b, bool and)
{
    QNode *n = qn(g, QN_BOOL);
    int k = 1 + (int)eu_below(&g->rng, 4);
    n->kids = qr_arena_calloc(g->arena, sizeof *n->kids * (size_t)k);
    n->n_kids = k;
    for (int i = 0; i < k; i++) {
        if (i)
            qr_buf_putc(b, ' ');
        QNode *t = qn(g, QN_TERM);
        const char *w = pick_word(g);
        t->text = astr(g, w, strlen(w));
        t->text_len = (uint32_t)strlen(w);
        if (g->n_text_fields && eu_chance(&g->rng, 0.15)) {
            t->field = g->text_fields[eu_below(&g->rng, (uint64_t)g->n_text_fields)];
            qr_buf_printf(b, "%s:", t->field);
        }
        qr_buf_printf(b, "%s", w);
        t->occur = and ? QO_MUST : QO_SHOULD;
        n->kids[i] = t;
    }
    set_min_should(n);
    qr_buf_putc(b, 0);
    if (k == 1) {
        n->kids[0]->occur = QO_MUST;
        return n->kids[0];
    }
    return n;
}

/* ======================================================================
 * Running and comparing
 * ====================================================================== */

typedef struct Stats {
    int queries, checked_scores, nonzero, errors;
    int wand, and_, ties; /* pruned runs by strategy; queries with tied scores */
    int mismatches;     /* queries with at least one mismatch */
    int q_notes;        /* notes for the current query */
    char first[12][1600];
} Stats;

static void note(Stats *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(Stats *st, const char *fmt, ...)
{
    if (st->q_notes++)
        return; /* the first mismatch of a query tells enough */
    if (st->mismatches < 12) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(st->first[st->mismatches], sizeof st->first[0], fmt, ap);
        va_end(ap);
    }
    st->mismatches++;
}

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

static QrSearchRes *run(QrTable *t, QrSearchReq *req, QrError *err)
{
    QrSearchRes *res = NULL;
    qr_error_clear(err);
    if (qr_search(t, req, &res, err) != QR_OK)
        return NULL;
    return res;
}

static void key_json(const Model *m, uint32_t d, char *out, size_t cap)
{
    QrBuf b;
    qr_buf_init(&b);
    pk_to_json(m->ix.docs[d].key, m->ix.docs[d].key_len, &b);
    snprintf(out, cap, "%.*s", (int)b.len, (char *)b.data);
    qr_buf_free(&b);
}

/* Hits of res equal model hits want[off .. off+n). */
static bool hits_equal(const Model *m, const QrSearchRes *res, const MHit *want, int n_want,
                       int off, int limit, bool scores, char *why, size_t why_len)
{
    int expect = n_want - off;
    if (expect < 0)
        expect = 0;
    if (expect > limit)
        expect = limit;
    if (res->n_hits != expect) {
        snprintf(why, why_len, "%d hits, want %d", res->n_hits, expect);
        return false;
    }
    for (int i = 0; i < expect; i++) {
        const MHit *w = &want[off + i];
        const QrHit *h = &res->hits[i];
        char kj[PK_KEY_MAX * 2 + 8];
        key_json(m, w->d, kj, sizeof kj);
        if (h->doc != w->gdoc || (scores && !same_bits(h->score, w->score)) || !h->id_json ||
            strcmp(h->id_json, kj)) {
            snprintf(why, why_len, "hit %d: doc %ld %s score %.9g, want doc %ld %s score %.9g",
                     off + i, (long)h->doc, h->id_json ? h->id_json : "(null)",
                     (double)h->score, (long)w->gdoc, kj, (double)w->score);
            return false;
        }
    }
    return true;
}

static bool res_equal(const QrSearchRes *a, const QrSearchRes *b, char *why, size_t why_len)
{
    if (a->n_hits != b->n_hits || a->total != b->total) {
        snprintf(why, why_len, "%d hits / total %lu vs %d hits / total %lu", a->n_hits,
                 (unsigned long)a->total, b->n_hits, (unsigned long)b->total);
        return false;
    }
    for (int i = 0; i < a->n_hits; i++)
        if (a->hits[i].doc != b->hits[i].doc || !same_bits(a->hits[i].score, b->hits[i].score)) {
            snprintf(why, why_len, "hit %d: doc %ld score %.9g vs doc %ld score %.9g", i,
                     (long)a->hits[i].doc, (double)a->hits[i].score, (long)b->hits[i].doc,
                     (double)b->hits[i].score);
            return false;
        }
    return true;
}

/* Run every check for one query.  `mine` is the generated tree (intended
 * meaning), NULL to skip the set check against it. */
static void check_query(QrTable *t, Model *m, Stats *st, const char *q, const QNode *mine,
                        bool default_and, const char *fields, int max_exp, uint64_t *rng)
{
    st->queries++;
    st->q_notes = 0;
    char why[4096];
    char tag[1600];
    /* the table's scoring (BM25F) mostly, the weighted sum a third of the time */
    int scoring = eu_below(rng, 3) == 0 ? QR_SCORING_SUM : QR_SCORING_TABLE;
    snprintf(tag, sizeof tag, "[%s]%s%s%s max_exp=%d%s", q, default_and ? " AND" : "",
             fields ? " fields=" : "", fields ? fields : "", max_exp,
             scoring == QR_SCORING_SUM ? " scoring=sum" : "");
    QrArena *pa = qr_arena_new(0);
    const char *names[QR_MAX_FIELDS + 1];
    for (int f = 0; f < m->sc->n_fields; f++)
        names[f] = m->sc->fields[f].name;
    names[m->sc->n_fields] = NULL;
    QParseOpts po = {.default_and = default_and, .fields = names};
    QNode *parsed = NULL;
    QrError perr;
    qr_error_clear(&perr);
    int prc = qparse(pa, q, strlen(q), &po, &parsed, &perr);
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = q;
    req.q_len = strlen(q);
    req.default_and = default_and;
    req.fields = fields;
    req.max_expansions = max_exp;
    req.scoring = scoring;
    req.count_only = true;
    QrError err;
    QrSearchRes *res = run(t, &req, &err);
    if (prc != QR_OK) {
        if (res || err.code != perr.code)
            note(st, "%s parse error %d (%s) but qr_search gave %d", tag, prc, perr.message,
                 res ? 0 : err.code);
        qr_search_res_free(res);
        qr_arena_free(pa);
        st->errors++;
        return;
    }
    model_set_fields(m, fields, max_exp, scoring);
    m->error = false;
    Res want_sc = eval_root(m, parsed);
    bool want_err = m->error;
    Res want_set = {0};
    if (mine) {
        m->error = false;
        want_set = eval(m, mine);
    }
    if (want_err) {
        if (res || err.code != QR_EINVAL)
            note(st, "%s a non-text field should fail with QR_EINVAL, got %d", tag,
                 res ? 0 : err.code);
        st->errors++;
        goto done;
    }
    if (!res) {
        note(st, "%s count failed: %d %s", tag, err.code, err.message);
        goto done;
    }
    int n_hits_sc, n_hits_set = 0;
    MHit *hs = model_hits(m, &want_sc, &n_hits_sc, false);
    MHit *hd = model_hits(m, &want_sc, &n_hits_sc, true);
    if (mine) {
        MHit *hm = model_hits(m, &want_set, &n_hits_set, true);
        bool same = n_hits_set == n_hits_sc;
        for (int i = 0; same && i < n_hits_set; i++)
            same = hm[i].gdoc == hd[i].gdoc;
        if (!same) {
            QrBuf cb;
            qr_buf_init(&cb);
            qnode_format(parsed, &cb);
            qr_buf_putc(&cb, 0);
            note(st, "%s intended meaning has %d matches, the parsed tree %s has %d", tag,
                 n_hits_set, (char *)cb.data, n_hits_sc);
            qr_buf_free(&cb);
        }
        free(hm);
    }
    if (n_hits_sc)
        st->nonzero++;
    for (int i = 1; i < n_hits_sc && i < 100; i++)
        if (hs[i].score == hs[i - 1].score) {
            st->ties++;
            break;
        }
    if (res->total != (uint64_t)n_hits_sc)
        note(st, "%s%s count_only total %lu, model %d", tag, default_and ? " (AND)" : "",
             (unsigned long)res->total, n_hits_sc);
    if (res->n_hits != 0)
        note(st, "%s count_only returned hits", tag);
    qr_search_res_free(res);

    /* unordered: every id in doc order (sometimes through a window far
     * above the matches: SQL asks for all of a word's matches, millions at
     * scale), then a page */
    req.count_only = false;
    req.unordered = true;
    req.limit = eu_below(rng, 4) == 0 ? 5000000 : n_hits_sc + 5;
    req.offset = 0;
    res = run(t, &req, &err);
    if (!res)
        note(st, "%s unordered failed: %s", tag, err.message);
    else {
        if (res->total != (uint64_t)n_hits_sc ||
            !hits_equal(m, res, hd, n_hits_sc, 0, req.limit, false, why, sizeof why))
            note(st, "%s unordered: total %lu want %d; %s", tag, (unsigned long)res->total,
                 n_hits_sc, res->total == (uint64_t)n_hits_sc ? why : "");
        qr_search_res_free(res);
    }
    if (n_hits_sc > 3) {
        req.offset = (int)eu_below(rng, (uint64_t)n_hits_sc);
        req.limit = 1 + (int)eu_below(rng, 7);
        res = run(t, &req, &err);
        if (!res || !hits_equal(m, res, hd, n_hits_sc, req.offset, req.limit, false, why,
                                sizeof why))
            note(st, "%s unordered page %d+%d: %s", tag, req.offset, req.limit,
                 res ? why : err.message);
        qr_search_res_free(res);
    }
    req.unordered = false;

    /* exhaustive top-k against the model */
    static const int ks[] = {1, 10, 100};
    QrSearchRes *ex[3] = {0};
    for (int i = 0; i < 3; i++) {
        req.exhaustive = true;
        req.limit = ks[i];
        req.offset = 0;
        ex[i] = run(t, &req, &err);
        if (!ex[i]) {
            note(st, "%s exhaustive k=%d failed: %s", tag, ks[i], err.message);
            continue;
        }
        if (ex[i]->total != (uint64_t)n_hits_sc)
            note(st, "%s ranked total %lu, model %d", tag, (unsigned long)ex[i]->total,
                 n_hits_sc);
        if (!hits_equal(m, ex[i], hs, n_hits_sc, 0, ks[i], true, why, sizeof why)) {
            QrBuf cb;
            qr_buf_init(&cb);
            qnode_format(parsed, &cb);
            qr_buf_putc(&cb, 0);
            note(st, "%s = %s exhaustive top-%d (%s): %s", tag, (char *)cb.data, ks[i],
                 ex[i]->stats.strategy, why);
            qr_buf_free(&cb);
        } else {
            st->checked_scores++;
        }
        /* pruned: identical to exhaustive */
        req.exhaustive = false;
        QrSearchRes *pr = run(t, &req, &err);
        if (pr && pr->stats.strategy) {
            st->wand += !strcmp(pr->stats.strategy, "wand");
            st->and_ += !strcmp(pr->stats.strategy, "and");
        }
        if (!pr)
            note(st, "%s pruned k=%d failed: %s", tag, ks[i], err.message);
        else if (!res_equal(pr, ex[i], why, sizeof why))
            note(st, "%s pruned (%s) top-%d differs from exhaustive: %s", tag, pr->stats.strategy,
                 ks[i], why);
        qr_search_res_free(pr);
    }
    /* offsets: pages of the exhaustive order, pruned and exhaustive */
    if (n_hits_sc > 2) {
        for (int rep = 0; rep < 2; rep++) {
            req.offset = (int)eu_below(rng, (uint64_t)n_hits_sc + 2);
            req.limit = (int)eu_below(rng, 12);
            req.exhaustive = rep == 1;
            res = run(t, &req, &err);
            if (!res || !hits_equal(m, res, hs, n_hits_sc, req.offset, req.limit, true, why,
                                    sizeof why))
                note(st, "%s %s page offset %d limit %d: %s", tag,
                     rep ? "exhaustive" : "pruned", req.offset, req.limit,
                     res ? why : err.message);
            qr_search_res_free(res);
        }
        req.exhaustive = false;
    }
    /* skip_total keeps the hits */
    req.offset = 0;
    req.limit = 10;
    req.skip_total = true;
    res = run(t, &req, &err);
    if (!res || res->total != 0 || !ex[1] || !res_equal(res, ex[1], why, sizeof why)) {
        if (res && ex[1] && res->total == 0) {
            /* compare hits only */
            bool ok = res->n_hits == ex[1]->n_hits;
            for (int i = 0; ok && i < res->n_hits; i++)
                ok = res->hits[i].doc == ex[1]->hits[i].doc;
            if (!ok)
                note(st, "%s skip_total hits differ", tag);
        } else {
            note(st, "%s skip_total: %s", tag, res ? "total not 0" : err.message);
        }
    }
    qr_search_res_free(res);
    for (int i = 0; i < 3; i++)
        qr_search_res_free(ex[i]);
    free(hs);
    free(hd);
done:
    res_free(&want_sc);
    if (mine)
        res_free(&want_set);
    qr_arena_free(pa);
}

static void report(Stats *st, const char *what)
{
    for (int i = 0; i < st->mismatches && i < 12; i++)
        cr_log_error("%s: %s", what, st->first[i]);
    cr_assert_eq(st->mismatches, 0, "%s: %d mismatches in %d queries (first: %s)", what,
                 st->mismatches, st->queries, st->first[0]);
}

/* ======================================================================
 * Tables
 * ====================================================================== */

typedef struct Env {
    char *dir;
    QrDb *db;
    QrTable *t;
    QrBatch *b;   /* the test's writer */
    EuStore live; /* what the table should hold */
} Env;

static void env_open(Env *e, const QrSchema *sc)
{
    memset(e, 0, sizeof *e);
    e->dir = eu_tmpdir("search");
    if (n_test_dirs < 8)
        test_dirs[n_test_dirs++] = strdup(e->dir);
    QrDbOpts o;
    qr_db_opts_default(&o);
    o.fsync = QR_FSYNC_OFF;
    o.background_merge = false; /* the model's snapshot is the search's */
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_db_open(e->dir, &o, &e->db, &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_table_create(e->db, "t", sc, &e->t, &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_batch_begin(e->t, &e->b, &err), QR_OK, "%s", err.message);
    eu_store_init(&e->live);
}

/* env_open on a table whose schema is the JSON text schema_json. */
static void env_open_json(Env *e, const char *schema_json)
{
    QrSchema sc;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(schema_from_json(schema_json, strlen(schema_json), &sc, &err), QR_OK, "%s",
                 err.message);
    env_open(e, &sc);
}

static void env_close(Env *e)
{
    qr_batch_free(e->b);
    qr_db_close(e->db);
    eu_rmtree(e->dir);
    free(e->dir);
    eu_store_free(&e->live);
}

static void env_put(Env *e, const char *json)
{
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_batch_put(e->b, json, strlen(json), NULL, &err), QR_OK, "%s: %s", json,
                 err.message);
    uint8_t key[PK_KEY_MAX];
    size_t kl = eu_doc_key(json, key);
    eu_store_put(&e->live, key, kl, json);
}

static void env_del(Env *e, const char *json_doc)
{
    uint8_t key[PK_KEY_MAX];
    size_t kl = eu_doc_key(json_doc, key);
    QrBuf b;
    qr_buf_init(&b);
    pk_to_json(key, kl, &b);
    bool found;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_batch_delete(e->b, (char *)b.data, b.len, &found, &err), QR_OK, "%s",
                 err.message);
    cr_assert_eq(found, eu_store_get(&e->live, key, kl) != NULL);
    qr_buf_free(&b);
    eu_store_del(&e->live, key, kl);
}

static void env_commit(Env *e)
{
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_batch_commit(e->b, &err), QR_OK, "%s", err.message);
    Snapshot *s = table_snapshot(e->t->table);
    eu_assert_snapshot_is(s, &e->live, "after commit");
    snapshot_release(s);
}

/* ---- the random corpus ---- */

#define RW 400

typedef struct Corpus {
    char **words;
    EuZipf zipf;
    char **docs; /* every version ever put (phrase sources) */
    int n_docs, cap;
} Corpus;

static void corpus_add(Corpus *c, char *doc)
{
    if (c->n_docs == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 1024;
        c->docs = realloc(c->docs, sizeof *c->docs * (size_t)c->cap);
    }
    c->docs[c->n_docs++] = doc;
}

static void corpus_free(Corpus *c)
{
    for (int i = 0; i < c->n_docs; i++)
        free(c->docs[i]);
    free(c->docs);
    eu_words_free(c->words, RW);
    eu_zipf_free(&c->zipf);
}

static void id_json(int i, char *out, size_t n)
{
    if (i % 4 == 1)
        snprintf(out, n, "\"doc-%d\"", i);
    else
        snprintf(out, n, "%d", i * 7 - 300); /* negative ints too */
}

/* n_commits commits of new docs, upserts and deletes. */
static void fill_random(Env *e, Corpus *c, uint64_t seed, int n_commits, int per_commit)
{
    uint64_t rng = seed;
    c->words = eu_words(RW, seed);
    eu_zipf_init(&c->zipf, RW, 1.0);
    int next_id = 0;
    for (int k = 0; k < n_commits; k++) {
        for (int i = 0; i < per_commit; i++) {
            char id[48];
            id_json(next_id++, id, sizeof id);
            const char *dup = c->n_docs && eu_chance(&rng, 0.15)
                                  ? c->docs[eu_below(&rng, (uint64_t)c->n_docs)]
                                  : NULL;
            char *d = eu_random_doc(&rng, c->words, &c->zipf, id, dup);
            env_put(e, d);
            corpus_add(c, d);
        }
        if (k > 0) {
            for (int i = 0; i < per_commit / 8; i++) { /* upserts of older docs */
                char id[48];
                id_json((int)eu_below(&rng, (uint64_t)next_id), id, sizeof id);
                char *d = eu_random_doc(&rng, c->words, &c->zipf, id, NULL);
                env_put(e, d);
                corpus_add(c, d);
            }
            for (int i = 0; i < per_commit / 10; i++) { /* deletes, some of absent keys */
                char id[48], doc[96];
                id_json((int)eu_below(&rng, (uint64_t)next_id), id, sizeof id);
                snprintf(doc, sizeof doc, "{\"id\":%s}", id);
                env_del(e, doc);
            }
        }
        env_commit(e);
    }
}

static void run_random_queries(Env *e, Corpus *c, uint64_t seed, int n_queries, const char *what)
{
    Model m;
    model_build(&m, e->t);
    static const char *tf[] = {"title", "body"};
    Gen g = {.rng = seed, .words = c->words, .n_words = RW, .zipf = &c->zipf, .texts = NULL,
             .text_fields = tf, .n_text_fields = 2};
    /* phrase sources: raw titles and bodies */
    char **texts = malloc(sizeof *texts * (size_t)c->n_docs * 2);
    int nt = 0;
    for (int i = 0; i < c->n_docs; i++) {
        cJSON *r = cJSON_Parse(c->docs[i]);
        const char *fs[] = {"title", "body"};
        for (int f = 0; f < 2; f++) {
            cJSON *v = cJSON_GetObjectItem(r, fs[f]);
            if (cJSON_IsArray(v))
                v = v->child;
            if (cJSON_IsString(v))
                texts[nt++] = strdup(v->valuestring);
        }
        cJSON_Delete(r);
    }
    g.texts = texts;
    g.n_texts = nt;
    Stats st = {0};
    static const char *field_specs[] = {NULL, NULL, NULL, "body", "title^3,body", "body,title^0.5"};
    for (int i = 0; i < n_queries; i++) {
        g.arena = qr_arena_new(0);
        QrBuf b;
        qr_buf_init(&b);
        g.default_and = eu_chance(&g.rng, 0.2);
        QNode *mine = i % 4 == 3 ? gen_flat(&g, &b, g.default_and) : gen_query(&g, &b);
        const char *fields = field_specs[eu_below(&g.rng, 6)];
        int max_exp = eu_chance(&g.rng, 0.2) ? 1 + (int)eu_below(&g.rng, 6) : 0;
        check_query(e->t, &m, &st, (const char *)b.data, mine, g.default_and, fields, max_exp,
                    &g.rng);
        qr_buf_free(&b);
        qr_arena_free(g.arena);
    }
    cr_log_info("%s: %d queries, %d with matches, %d score checks, %d expected errors, "
                "pruned runs: %d wand, %d and; %d queries with tied scores",
                what, st.queries, st.nonzero, st.checked_scores, st.errors, st.wand, st.and_,
                st.ties);
    cr_expect_gt(st.nonzero, st.queries / 3, "%s: too few queries match anything", what);
    cr_expect_gt(st.wand, 30, "%s: the WAND path was hardly exercised", what);
    cr_expect_gt(st.and_, 10, "%s: the AND path was hardly exercised", what);
    cr_expect_gt(st.ties, 20, "%s: too few ties in the top scores", what);
    for (int i = 0; i < nt; i++)
        free(texts[i]);
    free(texts);
    model_free(&m);
    report(&st, what);
}

Test(search, random_corpus_segments_and_deletes)
{
    QrSchema sc;
    eu_random_schema(&sc, true);
    sc.idf = QR_IDF_LUCENE;
    sc.all_field = false; /* per-field BM25 for every default field */
    Env e;
    env_open(&e, &sc);
    Corpus c = {0};
    fill_random(&e, &c, 1234, 6, 220);
    QrTableStats ts;
    qr_table_stats(e.t, &ts);
    cr_assert_geq(ts.segments, 5, "want several segments, have %lu", (unsigned long)ts.segments);
    cr_assert_gt(ts.docs_total, ts.docs, "want deletes pending");
    run_random_queries(&e, &c, 77, 260, "random corpus, 6 segments");
    corpus_free(&c);
    env_close(&e);
}

Test(search, random_corpus_after_force_merge)
{
    QrSchema sc;
    eu_random_schema(&sc, false);
    sc.all_field = true; /* default queries search "_all"; Robertson idf */
    Env e;
    env_open(&e, &sc);
    Corpus c = {0};
    fill_random(&e, &c, 99, 5, 200);
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_merge(e.t, &err), QR_OK, "%s", err.message);
    QrTableStats ts;
    qr_table_stats(e.t, &ts);
    cr_assert_eq(ts.segments, 1);
    cr_assert_eq(ts.docs_total, ts.docs, "a force merge drops deleted docs");
    Snapshot *s = table_snapshot(e.t->table);
    eu_assert_snapshot_is(s, &e.live, "after force merge");
    snapshot_release(s);
    run_random_queries(&e, &c, 4242, 220, "random corpus, merged");
    corpus_free(&c);
    env_close(&e);
}

/* ---- real text ---- */

static char *corpus_path(const char *name)
{
    static const char *cands[] = {"../shared/corpora/%s/docs.jsonl",
                                  "../shared/corpora/%s/docs.jsonl.gz",
                                  "corpora/%s/docs.jsonl", "corpora/%s/docs.jsonl.gz"};
    char *p = malloc(512);
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
        snprintf(p, 512, cands[i], name);
        if (qr_path_exists(p))
            return p;
    }
    free(p);
    return NULL;
}

static void real_corpus(const char *name, int max_docs, const QrSchema *sc, int n_queries,
                        uint64_t seed)
{
    char *path = corpus_path(name);
    if (!path) {
        cr_skip_test("corpus %s not found (../shared/corpora/%s/docs.jsonl*)", name, name);
        return;
    }
    char **lines;
    int n = eu_read_jsonl(path, max_docs, &lines);
    free(path);
    cr_assert_gt(n, 100);
    Env e;
    env_open(&e, sc);
    uint64_t rng = seed;
    /* words for queries: from titles and bodies */
    char **pool = NULL;
    int n_pool = 0, cap_pool = 0;
    char **texts = malloc(sizeof *texts * (size_t)n * 2);
    int nt = 0;
    int per = (n + 3) / 4;
    for (int i = 0; i < n; i++) {
        env_put(&e, lines[i]);
        cJSON *r = cJSON_Parse(lines[i]);
        const char *fs[] = {"title", "body"};
        for (int f = 0; f < 2; f++) {
            cJSON *v = cJSON_GetObjectItem(r, fs[f]);
            if (!cJSON_IsString(v))
                continue;
            texts[nt++] = strdup(v->valuestring);
            static char w[256][48];
            int nw = text_words(v->valuestring, w, 256);
            for (int k = 0; k < nw; k++) {
                if (!eu_chance(&rng, 0.1))
                    continue;
                if (n_pool == cap_pool) {
                    cap_pool = cap_pool ? cap_pool * 2 : 4096;
                    pool = realloc(pool, sizeof *pool * (size_t)cap_pool);
                }
                pool[n_pool++] = strdup(w[k]);
            }
        }
        cJSON_Delete(r);
        if ((i + 1) % per == 0 || i == n - 1) {
            /* before committing the later batches: deletes and upserts of
             * earlier docs, so deletes are pending in older segments */
            if (i + 1 > per) {
                for (int k = 0; k < per / 20; k++) {
                    int j = (int)eu_below(&rng, (uint64_t)i);
                    if (eu_chance(&rng, 0.5)) {
                        env_del(&e, lines[j]);
                    } else {
                        cJSON *d = cJSON_Parse(lines[j]);
                        cJSON *t = cJSON_GetObjectItem(d, "title");
                        if (cJSON_IsString(t)) {
                            char *nv = malloc(strlen(t->valuestring) + 32);
                            sprintf(nv, "%s revised edition", t->valuestring);
                            cJSON_SetValuestring(t, nv);
                            free(nv);
                        }
                        char *txt = cJSON_PrintUnformatted(d);
                        env_put(&e, txt);
                        free(txt);
                        cJSON_Delete(d);
                    }
                }
            }
            env_commit(&e);
        }
    }
    Model m;
    model_build(&m, e.t);
    static const char *tf[] = {"title", "body"};
    Stats st = {0};
    for (int pass = 0; pass < 2; pass++) {
        Gen g = {.rng = seed + (uint64_t)pass, .words = pool, .n_words = n_pool, .texts = texts,
                 .n_texts = nt, .text_fields = tf, .n_text_fields = 2};
        for (int i = 0; i < n_queries; i++) {
            g.arena = qr_arena_new(0);
            QrBuf b;
            qr_buf_init(&b);
            g.default_and = eu_chance(&g.rng, 0.2);
            QNode *mine = i % 3 == 2 ? gen_flat(&g, &b, g.default_and) : gen_query(&g, &b);
            int max_exp = eu_chance(&g.rng, 0.15) ? 1 + (int)eu_below(&g.rng, 4) : 0;
            const char *fields = eu_chance(&g.rng, 0.2) ? "body,title^1.5" : NULL;
            check_query(e.t, &m, &st, (const char *)b.data, mine, g.default_and, fields, max_exp,
                        &g.rng);
            qr_buf_free(&b);
            qr_arena_free(g.arena);
        }
        if (pass == 0) {
            /* again after a force merge: one segment, no deletes */
            QrError err;
            qr_error_clear(&err);
            cr_assert_eq(qr_merge(e.t, &err), QR_OK, "%s", err.message);
            Snapshot *s = table_snapshot(e.t->table);
            cr_assert_eq(s->n_segs, 1);
            eu_assert_snapshot_is(s, &e.live, "after force merge");
            snapshot_release(s);
            model_free(&m);
            model_build(&m, e.t);
        }
    }
    cr_log_info("%s: %d queries, %d with matches, %d score checks", name, st.queries, st.nonzero,
                st.checked_scores);
    model_free(&m);
    for (int i = 0; i < n_pool; i++)
        free(pool[i]);
    free(pool);
    for (int i = 0; i < nt; i++)
        free(texts[i]);
    free(texts);
    eu_lines_free(lines, n);
    env_close(&e);
    report(&st, name);
}

Test(search, cranfield)
{
    QrSchema sc;
    schema_init(&sc);
    QrField f;
    schema_field_defaults(&f, "title", QR_FT_TEXT);
    f.stopwords = true;
    f.weight = 2.0f;
    schema_add_field(&sc, &f, NULL);
    schema_field_defaults(&f, "body", QR_FT_TEXT);
    f.stopwords = true;
    schema_add_field(&sc, &f, NULL);
    sc.all_field = true; /* as a schema read from JSON defaults */
    real_corpus("cranfield", 1400, &sc, 120, 31);
}

Test(search, debian_packages)
{
    QrSchema sc;
    schema_init(&sc);
    QrField f;
    schema_field_defaults(&f, "title", QR_FT_TEXT);
    f.weight = 2.0f;
    schema_add_field(&sc, &f, NULL);
    schema_field_defaults(&f, "body", QR_FT_TEXT);
    schema_add_field(&sc, &f, NULL);
    schema_field_defaults(&f, "tags", QR_FT_TEXT);
    snprintf(f.language, sizeof f.language, "none");
    schema_add_field(&sc, &f, NULL);
    schema_field_defaults(&f, "section", QR_FT_KEYWORD);
    schema_add_field(&sc, &f, NULL);
    schema_field_defaults(&f, "installed_size_kb", QR_FT_INT);
    schema_add_field(&sc, &f, NULL);
    sc.idf = QR_IDF_LUCENE;
    sc.all_field = true;
    real_corpus("debian-packages", 1200, &sc, 100, 57);
}

/* ======================================================================
 * Focused cases
 * ====================================================================== */

static void small_schema(QrSchema *sc, bool stopwords)
{
    schema_init(sc);
    QrField f;
    schema_field_defaults(&f, "title", QR_FT_TEXT);
    snprintf(f.language, sizeof f.language, "%s", stopwords ? "english" : "none");
    f.stopwords = stopwords;
    f.weight = 2.0f;
    schema_add_field(sc, &f, NULL);
    schema_field_defaults(&f, "body", QR_FT_TEXT);
    snprintf(f.language, sizeof f.language, "%s", stopwords ? "english" : "none");
    f.stopwords = stopwords;
    schema_add_field(sc, &f, NULL);
    schema_field_defaults(&f, "n", QR_FT_INT);
    schema_add_field(sc, &f, NULL);
}

static QrSearchRes *search_ok(QrTable *t, const char *q, int limit)
{
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = q;
    req.q_len = strlen(q);
    req.limit = limit;
    QrError err;
    QrSearchRes *res = run(t, &req, &err);
    cr_assert_not_null(res, "[%s]: %s", q, err.message);
    return res;
}

static float hit_score(const QrSearchRes *r, const char *id)
{
    for (int i = 0; i < r->n_hits; i++)
        if (!strcmp(r->hits[i].id_json, id))
            return r->hits[i].score;
    cr_assert_fail("no hit %s", id);
    return 0;
}

/* The documented BM25, in double, with no help from bm25_term_score. */
static double bm25_doc(QrIdf variant, double N, double df, double tf, double len, double avgdl,
                       double w)
{
    double idf = variant == QR_IDF_LUCENE ? log(1.0 + (N - df + 0.5) / (df + 0.5))
                                          : fmax(log((N - df + 0.5) / (df + 0.5)), 1e-6);
    return w * idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len / avgdl));
}

static void assert_close(float got, double want, const char *what)
{
    cr_assert(fabs((double)got - want) <= 1e-5 * fabs(want) + 1e-12, "%s: %.9g, want %.9g",
              what, (double)got, want);
}

static QrSearchRes *search_sum(QrTable *t, const char *q)
{
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = q;
    req.q_len = strlen(q);
    req.scoring = QR_SCORING_SUM;
    QrError err;
    QrSearchRes *res = run(t, &req, &err);
    cr_assert_not_null(res, "[%s]: %s", q, err.message);
    return res;
}

Test(search, bm25_by_hand)
{
    for (int v = 0; v < 2; v++) {
        QrIdf variant = v ? QR_IDF_LUCENE : QR_IDF_ROBERTSON;
        QrSchema sc;
        small_schema(&sc, false);
        sc.idf = variant;
        Env e;
        env_open(&e, &sc);
        env_put(&e, "{\"id\":1,\"title\":\"alpha beta\",\"body\":\"alpha gamma gamma\"}");
        env_put(&e, "{\"id\":2,\"title\":\"beta\",\"body\":\"delta\"}");
        env_put(&e, "{\"id\":3,\"title\":\"alpha alpha alpha\"}");
        env_commit(&e);
        env_put(&e, "{\"id\":4,\"title\":\"alpha\",\"body\":\"x y z w\"}");
        env_commit(&e);
        env_del(&e, "{\"id\":4}");
        env_commit(&e);
        /* doc 4 is deleted but not merged away: it still counts in N, df, avgdl;
         * the weighted sum of per-field BM25 (scoring "sum") */
        QrSearchRes *r = search_sum(e.t, "alpha");
        cr_assert_eq(r->total, 2);
        double t_avg = (2 + 1 + 3 + 1) / 4.0, b_avg = (3 + 1 + 4) / 3.0;
        double d1 = bm25_doc(variant, 4, 3, 1, 2, t_avg, 2) + bm25_doc(variant, 4, 1, 1, 3, b_avg, 1);
        double d3 = bm25_doc(variant, 4, 3, 3, 3, t_avg, 2);
        assert_close(hit_score(r, "1"), d1, "alpha, doc 1");
        assert_close(hit_score(r, "3"), d3, "alpha, doc 3");
        qr_search_res_free(r);
        /* field scope, boost, and the request's field weights */
        QrSearchReq req;
        qr_search_req_init(&req);
        req.q = "body:gamma^3";
        req.q_len = strlen(req.q);
        req.fields = "title,body^0.5";
        QrError err;
        r = run(e.t, &req, &err);
        cr_assert_not_null(r, "%s", err.message);
        cr_assert_eq(r->total, 1);
        assert_close(r->hits[0].score, bm25_doc(variant, 4, 1, 2, 3, b_avg, 0.5 * 3), "gamma");
        qr_search_res_free(r);
        /* after a force merge the deleted doc is gone from the statistics */
        cr_assert_eq(qr_merge(e.t, &err), QR_OK, "%s", err.message);
        r = search_sum(e.t, "alpha");
        t_avg = (2 + 1 + 3) / 3.0;
        b_avg = (3 + 1) / 2.0;
        d1 = bm25_doc(variant, 3, 2, 1, 2, t_avg, 2) + bm25_doc(variant, 3, 1, 1, 3, b_avg, 1);
        d3 = bm25_doc(variant, 3, 2, 3, 3, t_avg, 2);
        assert_close(hit_score(r, "1"), d1, "alpha after merge, doc 1");
        assert_close(hit_score(r, "3"), d3, "alpha after merge, doc 3");
        qr_search_res_free(r);
        env_close(&e);
    }
}

/* BM25F, the default for a word searched in several weighted fields,
 * recomputed from its definition (bm25f.h) in double: frequencies and
 * lengths combined with the weights before saturation, df the largest of
 * the fields', avgdl the weighted tokens over the most docs of a field. */
static double bm25f_doc(double N, double df, double tf, double dl, double avgdl, double boost)
{
    double idf = fmax(log((N - df + 0.5) / (df + 0.5)), 1e-6);
    return boost * idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl));
}

Test(search, bm25f_by_hand)
{
    QrSchema sc;
    small_schema(&sc, false); /* title weight 2, body 1; no "_all" */
    Env e;
    env_open(&e, &sc);
    env_put(&e, "{\"id\":1,\"title\":\"alpha beta\",\"body\":\"alpha gamma gamma\"}");
    env_put(&e, "{\"id\":2,\"title\":\"beta\",\"body\":\"delta\"}");
    env_put(&e, "{\"id\":3,\"title\":\"alpha alpha alpha\"}");
    env_put(&e, "{\"id\":4,\"body\":\"alpha x y z w v\"}");
    env_put(&e, "{\"id\":5,\"title\":\"omega\",\"body\":\"alpha\"}");
    env_commit(&e);
    /* title: 2+1+3+1 tokens in 4 docs; body: 3+1+6+1 in 4 docs */
    double avgdl = (2.0 * 7 + 1.0 * 11) / 4.0;
    double df = 3; /* alpha: title 2 docs, body 3 docs -> the larger */
    QrSearchRes *r = search_ok(e.t, "alpha", 10);
    cr_assert_eq(r->total, 4);
    assert_close(hit_score(r, "1"), bm25f_doc(5, df, 2 * 1 + 1, 2 * 2 + 3, avgdl, 1), "doc 1");
    assert_close(hit_score(r, "3"), bm25f_doc(5, df, 2 * 3, 2 * 3, avgdl, 1), "doc 3");
    assert_close(hit_score(r, "4"), bm25f_doc(5, df, 1, 6, avgdl, 1), "doc 4");
    assert_close(hit_score(r, "5"), bm25f_doc(5, df, 1, 2 * 1 + 1, avgdl, 1), "doc 5");
    /* saturation: a word in both fields is bounded by idf * (k1 + 1), not
     * the sum of two fields' scores */
    double bound = fmax(log((5 - df + 0.5) / (df + 0.5)), 1e-6) * 2.2;
    for (int i = 0; i < r->n_hits; i++)
        cr_assert_lt(r->hits[i].score, bound + 1e-6);
    qr_search_res_free(r);
    /* a request's field weights, and a boost on the word */
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = "alpha^2";
    req.q_len = strlen(req.q);
    req.fields = "title^0.5,body^3";
    QrError err;
    r = run(e.t, &req, &err);
    cr_assert_not_null(r, "%s", err.message);
    double avg2 = (0.5 * 7 + 3.0 * 11) / 4.0;
    assert_close(hit_score(r, "1"), bm25f_doc(5, df, 0.5 * 1 + 3 * 1, 0.5 * 2 + 3 * 3, avg2, 2),
                 "doc 1, title^0.5 body^3");
    assert_close(hit_score(r, "3"), bm25f_doc(5, df, 0.5 * 3, 0.5 * 3, avg2, 2), "doc 3");
    qr_search_res_free(r);
    /* the title weighs 2: the word in a title alone outranks it in a body
     * alone of the same length (with "_all" both scored alike) */
    env_put(&e, "{\"id\":6,\"title\":\"kappa lambda\",\"body\":\"mu nu\"}");
    env_put(&e, "{\"id\":7,\"title\":\"mu nu\",\"body\":\"kappa lambda\"}");
    env_commit(&e);
    r = search_ok(e.t, "kappa", 10);
    cr_assert_eq(r->n_hits, 2);
    cr_assert_str_eq(r->hits[0].id_json, "6");
    cr_assert_gt(r->hits[0].score, r->hits[1].score);
    qr_search_res_free(r);
    env_close(&e);
}

/* "_all": one field holding every text field's words; BM25 over it (the
 * default search while every text field weighs 1). */
Test(search, bm25_all_field_by_hand)
{
    QrSchema sc;
    small_schema(&sc, false);
    sc.fields[0].weight = 1.0f;
    sc.all_field = true;
    Env e;
    env_open(&e, &sc);
    env_put(&e, "{\"id\":1,\"title\":\"alpha beta\",\"body\":\"alpha gamma gamma\"}");
    env_put(&e, "{\"id\":2,\"title\":\"beta\",\"body\":\"delta\"}");
    env_put(&e, "{\"id\":3,\"title\":\"alpha alpha alpha\"}");
    env_put(&e, "{\"id\":4,\"body\":\"epsilon zeta eta theta\"}");
    env_put(&e, "{\"id\":5,\"title\":\"iota\"}");
    env_commit(&e);
    double avg = (5 + 2 + 3 + 4 + 1) / 5.0;
    QrSearchRes *r = search_ok(e.t, "alpha", 10);
    cr_assert_eq(r->total, 2);
    assert_close(hit_score(r, "1"), bm25_doc(QR_IDF_ROBERTSON, 5, 2, 2, 5, avg, 1), "doc 1");
    assert_close(hit_score(r, "3"), bm25_doc(QR_IDF_ROBERTSON, 5, 2, 3, 3, avg, 1), "doc 3");
    qr_search_res_free(r);
    /* a phrase never spans two fields */
    r = search_ok(e.t, "\"beta alpha\"", 10);
    cr_assert_eq(r->total, 0, "\"beta alpha\" crosses from title into body");
    qr_search_res_free(r);
    r = search_ok(e.t, "\"alpha gamma\"", 10);
    cr_assert_eq(r->total, 1);
    qr_search_res_free(r);
    env_close(&e);
}

static void expect_error(QrTable *t, const char *q, const char *fields, QrCode code,
                         int64_t offset, const char *msg_part)
{
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = q;
    req.q_len = q ? strlen(q) : 0;
    req.fields = fields;
    QrSearchRes *res = (QrSearchRes *)1;
    QrError err;
    qr_error_clear(&err);
    int rc = qr_search(t, &req, &res, &err);
    cr_assert_eq(rc, (int)code, "[%s]: rc %d (%s), want %d", q ? q : "(null)", rc, err.message,
                 code);
    cr_assert_null(res, "[%s]: output set on failure", q ? q : "(null)");
    cr_assert_eq(err.code, code);
    if (offset >= 0)
        cr_assert_eq(err.offset, offset, "[%s]: error at %ld, want %ld (%s)", q, (long)err.offset,
                     (long)offset, err.message);
    if (msg_part)
        cr_assert(strstr(err.message, msg_part), "[%s]: message \"%s\" lacks \"%s\"", q,
                  err.message, msg_part);
}

Test(search, errors_carry_codes_and_positions)
{
    QrSchema sc;
    small_schema(&sc, true);
    Env e;
    env_open(&e, &sc);
    env_put(&e, "{\"id\":1,\"title\":\"the hydro power\",\"body\":\"of rust\",\"n\":3}");
    env_commit(&e);
    expect_error(e.t, "a (b c", NULL, QR_ESYNTAX, 2, "not closed");
    expect_error(e.t, "a b)", NULL, QR_ESYNTAX, 3, "unexpected");
    expect_error(e.t, "hydro AND", NULL, QR_ESYNTAX, 6, "dangling");
    expect_error(e.t, "x \"hydro power", NULL, QR_ESYNTAX, 2, "unterminated");
    expect_error(e.t, "titel:rust", NULL, QR_ESYNTAX, 0, "unknown field");
    expect_error(e.t, "rust OR body:x titel:rust", NULL, QR_ESYNTAX, 15, "unknown field");
    expect_error(e.t, "rust n:3", NULL, QR_EINVAL, 5, "not a full-text field");
    expect_error(e.t, "fo*o", NULL, QR_ESYNTAX, 2, NULL);
    expect_error(e.t, "a~3", NULL, QR_ESYNTAX, 2, NULL);
    expect_error(e.t, "", NULL, QR_ESYNTAX, 0, "empty query");
    expect_error(e.t, "   ", NULL, QR_ESYNTAX, 0, "empty query");
    expect_error(e.t, NULL, NULL, QR_ESYNTAX, 0, "empty query");
    expect_error(e.t, "rust", "nosuch", QR_ENOTFOUND, -1, "nosuch");
    expect_error(e.t, "rust", "n", QR_EINVAL, -1, "not a full-text field");
    expect_error(e.t, "rust", "title^x", QR_EINVAL, -1, "weight");
    expect_error(e.t, "rust", ",", QR_EINVAL, -1, NULL);
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = "rust";
    req.q_len = 4;
    QrSearchRes *res;
    QrError err;
    req.limit = -1;
    cr_assert_eq(qr_search(e.t, &req, &res, &err), QR_EINVAL);
    req.limit = 10;
    req.offset = 99999995; /* the window: at most 10^8 */
    cr_assert_eq(qr_search(e.t, &req, &res, &err), QR_ELIMIT);
    req.offset = 0;
    req.mem_cap = 512; /* far too small for any query */
    qr_error_clear(&err);
    cr_assert_eq(qr_search(e.t, &req, &res, &err), QR_ELIMIT, "tiny mem_cap: %s", err.message);
    /* the server's budget, held by other queries: out of memory (53200),
     * not this query's cap, and nothing of the budget kept after */
    req.mem_cap = 0;
    qr_mem_budget_set(64u << 20);
    cr_assert(qr_mem_budget_take((64u << 20) - 4096));
    qr_error_clear(&err);
    cr_assert_eq(qr_search(e.t, &req, &res, &err), QR_ENOMEM, "budget: %s", err.message);
    cr_assert_str_eq(qr_error_sqlstate(&err), "53200");
    cr_assert(strstr(err.hint, "mem_limit"), "%s", err.hint);
    qr_mem_budget_give((64u << 20) - 4096);
    cr_assert_eq(qr_mem_budget_used(), 0);
    qr_error_clear(&err);
    cr_assert_eq(qr_search(e.t, &req, &res, &err), QR_OK, "%s", err.message);
    cr_assert(qr_mem_budget_used() > 0, "the result holds its arena");
    qr_search_res_free(res);
    cr_assert_eq(qr_mem_budget_used(), 0);
    qr_mem_budget_set(0);
    env_close(&e);
}

Test(search, stop_words_and_empty_matches)
{
    QrSchema sc;
    small_schema(&sc, true);
    Env e;
    env_open(&e, &sc);
    env_put(&e, "{\"id\":1,\"title\":\"the hydro power\",\"body\":\"of rust\"}");
    env_put(&e, "{\"id\":2,\"title\":\"power of the sun\"}");
    env_put(&e, "{\"id\":\"x\",\"body\":\"nothing here\"}");
    env_commit(&e);
    static const struct {
        const char *q;
        uint64_t total;
    } cases[] = {
        {"the", 0},           {"the of and", 0},    {"\"the of\"", 0},  {"+the power", 2},
        {"power -the", 2},    {"zzz", 0},           {"+zzz power", 0},  {"+zzz* power", 0},
        {"zzz* power", 2},    {"-zzz*", 3},         {"power -zzz~1", 2}, {"*:*", 3},
        {"*:* -power", 1},
        /* stop words keep their positions: phrases need the same gaps */
        {"\"hydro the power\"", 0}, {"\"the hydro power\"", 1}, {"\"the hydro\"", 1},
        {"\"power of the sun\"", 1}, {"\"power a an sun\"", 1}, {"\"power the sun\"", 0},
        {"\"power sun\"", 0},       {"\"power sun\"~1", 0},     {"\"power sun\"~2", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        QrSearchReq req;
        qr_search_req_init(&req);
        req.q = cases[i].q;
        req.q_len = strlen(req.q);
        for (int mode = 0; mode < 3; mode++) {
            req.count_only = mode == 0;
            req.unordered = mode == 1;
            req.limit = mode == 2 ? 0 : 10;
            QrError err;
            QrSearchRes *r = run(e.t, &req, &err);
            cr_assert_not_null(r, "[%s]: %s", req.q, err.message);
            cr_assert_eq(r->total, cases[i].total, "[%s] mode %d: total %lu, want %lu", req.q,
                         mode, (unsigned long)r->total, (unsigned long)cases[i].total);
            cr_assert_eq(r->n_hits, mode == 1 ? (int)cases[i].total : 0, "[%s] mode %d hits",
                         req.q, mode);
            qr_search_res_free(r);
        }
    }
    env_close(&e);
}

/* More expansions than max_expansions: a constant-score bitmap, counts and
 * sets stay exact, every hit scores the clause boost. */
Test(search, expansion_overflow_keeps_counts_exact)
{
    QrSchema sc;
    small_schema(&sc, false);
    Env e;
    env_open(&e, &sc);
    char doc[256];
    int with_k = 0;
    for (int i = 0; i < 300; i++) {
        bool k = i % 3 != 0;
        with_k += k;
        snprintf(doc, sizeof doc, "{\"id\":%d,\"title\":\"%s%d common\",\"body\":\"w%d\"}", i,
                 k ? "ka" : "zo", i, i % 7);
        env_put(&e, doc);
        if (i % 100 == 99)
            env_commit(&e);
    }
    env_del(&e, "{\"id\":1}");
    env_del(&e, "{\"id\":2}");
    env_commit(&e);
    with_k -= 2;
    for (int max = 1; max <= 300; max = max * 3 + 1) {
        for (int b = 0; b < 2; b++) {
            QrSearchReq req;
            qr_search_req_init(&req);
            req.q = b ? "ka*^2" : "ka*";
            req.q_len = strlen(req.q);
            req.max_expansions = max;
            req.limit = 500;
            QrError err;
            QrSearchRes *r = run(e.t, &req, &err);
            cr_assert_not_null(r, "%s", err.message);
            cr_assert_eq(r->total, (uint64_t)with_k, "max %d: total %lu want %d", max,
                         (unsigned long)r->total, with_k);
            cr_assert_eq(r->n_hits, with_k);
            if (max < with_k)
                for (int i = 0; i < r->n_hits; i++)
                    cr_assert_float_eq(r->hits[i].score, b ? 2.0f : 1.0f, 0,
                                       "max %d: constant score", max);
            qr_search_res_free(r);
            req.count_only = true;
            r = run(e.t, &req, &err);
            cr_assert_eq(r->total, (uint64_t)with_k);
            qr_search_res_free(r);
            /* combined with other clauses */
            req.count_only = false;
            req.q = "+ka* w3";
            req.q_len = strlen(req.q);
            r = run(e.t, &req, &err);
            cr_assert_not_null(r, "%s", err.message);
            int want = 0;
            for (int i = 0; i < 300; i++)
                want += i % 3 != 0 && i > 2;
            cr_assert_eq(r->total, (uint64_t)want);
            qr_search_res_free(r);
        }
    }
    env_close(&e);
}

Test(search, snippets_and_stored_docs)
{
    QrSchema sc;
    small_schema(&sc, true);
    Env e;
    env_open(&e, &sc);
    env_put(&e, "{\"id\":1,\"title\":\"Hydro Power plants\",\"body\":\"Running water turns "
                "turbines; hydro power is renewable.\"}");
    env_put(&e, "{\"id\":2,\"title\":\"Solar\",\"body\":[\"no match here\",\"hydro dams\"]}");
    env_commit(&e);
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = "hydro running";
    req.q_len = strlen(req.q);
    req.snippets = true;
    req.fetch_docs = true;
    req.hl_pre = "[";
    req.hl_post = "]";
    QrError err;
    QrSearchRes *r = run(e.t, &req, &err);
    cr_assert_not_null(r, "%s", err.message);
    cr_assert_eq(r->n_hits, 2);
    for (int i = 0; i < r->n_hits; i++) {
        const QrHit *h = &r->hits[i];
        cr_assert_not_null(h->snippet);
        cr_assert_not_null(h->doc_json);
        cr_assert(strstr(h->snippet, "[Hydro]") || strstr(h->snippet, "[hydro]"),
                  "doc %s: snippet \"%s\" does not highlight the match (make_snippet reads "
                  "only the first value of an array field)",
                  h->id_json, h->snippet);
        uint8_t key[PK_KEY_MAX];
        size_t kl = eu_doc_key(h->doc_json, key);
        cr_assert_str_eq(h->doc_json, eu_store_get(&e.live, key, kl));
    }
    qr_search_res_free(r);
    env_close(&e);
}

/* docs/query-language.md: "databse~1 | words within 1 edit (insert, delete,
 * substitute, transpose)". */
Test(search, fuzzy_transposition_is_one_edit)
{
    QrSchema sc;
    small_schema(&sc, false);
    Env e;
    env_open(&e, &sc);
    env_put(&e, "{\"id\":1,\"title\":\"database\"}");
    env_commit(&e);
    QrSearchRes *r = search_ok(e.t, "databse~1", 10);
    cr_assert_eq(r->total, 1, "a deletion is one edit");
    qr_search_res_free(r);
    r = search_ok(e.t, "dtaabase~1", 10);
    cr_expect_eq(r->total, 1,
                 "\"dtaabase~1\" should find \"database\": the query language documents a "
                 "transposition as one edit, td_fuzzy counts it as two");
    qr_search_res_free(r);
    env_close(&e);
}

/* docs/query-language.md, Scoring: "Phrases score as the sum of their
 * words' BM25 scores in the documents where the phrase matches (within its
 * slop) ... an exact and a sloppy match of the same words score alike". */
Test(search, sloppy_phrase_matches_score_as_their_words)
{
    QrSchema sc;
    small_schema(&sc, false);
    sc.idf = QR_IDF_LUCENE; /* Robertson's floor would make every score tiny here */
    Env e;
    env_open(&e, &sc);
    env_put(&e, "{\"id\":1,\"body\":\"hydro power aa bb cc dd\"}");
    env_put(&e, "{\"id\":2,\"body\":\"hydro aa bb power cc dd\"}");
    env_put(&e, "{\"id\":3,\"body\":\"ee ff gg hh ii jj\"}");
    env_commit(&e);
    QrSearchRes *r = search_ok(e.t, "\"hydro power\"~3", 10);
    cr_assert_eq(r->total, 2);
    QrSearchRes *w = search_ok(e.t, "+hydro +power", 10);
    cr_assert_eq(w->total, 2);
    for (int d = 1; d <= 2; d++) {
        char id[4];
        snprintf(id, sizeof id, "%d", d);
        cr_expect_eq(hit_score(r, id), hit_score(w, id),
                     "doc %d: the phrase scores its words' sum (%.9g vs %.9g)", d,
                     (double)hit_score(r, id), (double)hit_score(w, id));
    }
    QrSearchRes *x = search_ok(e.t, "\"hydro power\"~1", 10);
    cr_assert_eq(x->total, 1, "slop 1 does not reach the match 2 positions apart");
    qr_search_res_free(x);
    qr_search_res_free(w);
    qr_search_res_free(r);
    env_close(&e);
}

Test(search, fuzzy_expansion_stops_at_the_deadline)
{
    /* 150 two-edit fuzzy clauses over a dictionary of tens of thousands of
     * made-up words, with a 1 ms limit.  Time is the virtual clock of
     * eu_clock_virtual, 2 ms a read, so the deadline has passed at the first
     * check after the query starts, however busy the machine.  Work is
     * counted in allocations: each clause's dictionary walk allocates its
     * edit-distance rows, and so do the postings it opens.  Before the walk
     * watched the deadline, the first check came once matching began, after
     * every expansion had run: the cut-off query did nearly all the full
     * query's work. */
    QrSchema sc;
    small_schema(&sc, false);
    Env e;
    env_open(&e, &sc);
    static const char *syl[] = {"ka", "lo", "mi", "ter", "sun", "ra", "ven", "do", "pix", "quo",
                                "zel", "an"};
    uint64_t rng = 7;
    char doc[2048], q[8192];
    for (int i = 0; i < 6000; i++) {
        int n = snprintf(doc, sizeof doc, "{\"id\":%d,\"title\":\"t\",\"body\":\"", i);
        for (int w = 0; w < 30; w++) {
            int k = 2 + (int)eu_below(&rng, 3);
            for (int j = 0; j < k; j++)
                n += snprintf(doc + n, sizeof doc - (size_t)n, "%s", syl[eu_below(&rng, 12)]);
            doc[n++] = ' ';
        }
        snprintf(doc + n, sizeof doc - (size_t)n, "\"}");
        env_put(&e, doc);
    }
    env_commit(&e);
    int n = 0;
    for (int c = 0; c < 150; c++) {
        n += snprintf(q + n, sizeof q - (size_t)n, "%s", c ? " OR " : "");
        int k = 2 + (int)eu_below(&rng, 3);
        for (int j = 0; j < k; j++)
            n += snprintf(q + n, sizeof q - (size_t)n, "%s", syl[eu_below(&rng, 12)]);
        n += snprintf(q + n, sizeof q - (size_t)n, "~2");
    }
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = q;
    req.q_len = strlen(q);
    req.count_only = true;
    QrError err;
    qr_error_clear(&err);
    QrSearchRes *r = NULL;
    eu_clock_virtual(2000000);
    int64_t a0 = qr_mem_alloc_count();
    cr_assert_eq(qr_search(e.t, &req, &r, &err), QR_OK, "%s", err.message);
    int64_t full = qr_mem_alloc_count() - a0;
    cr_assert_gt(r->total, 0);
    qr_search_res_free(r);
    req.timeout_ms = 1;
    r = NULL;
    a0 = qr_mem_alloc_count();
    cr_assert_eq(qr_search(e.t, &req, &r, &err), QR_ETIMEOUT, "%s", err.message);
    int64_t cut = qr_mem_alloc_count() - a0;
    cr_assert_null(r);
    cr_assert(strstr(err.message, "statement timeout"), "%s", err.message);
    eu_clock_real();
    /* the cut-off query stops within its first clauses (the clock is read at
     * every 64th check, one per 256 keys walked): under a third of the full
     * run's allocations, where a walk blind to the deadline makes them all */
    cr_assert(cut * 3 < full, "the query stopped at its deadline after %lld allocations; "
              "the whole query makes %lld", (long long)cut, (long long)full);
    env_close(&e);
}

/* ======================================================================
 * The search box: typos, completions, synonyms, languages, snippets
 * ====================================================================== */

static void one_field_schema(QrSchema *sc, const char *language)
{
    schema_init(sc);
    QrField f;
    schema_field_defaults(&f, "body", QR_FT_TEXT);
    snprintf(f.language, sizeof f.language, "%s", language);
    schema_add_field(sc, &f, NULL);
}

static QrSearchRes *search_req(QrTable *t, const char *q, int typo, bool prefix, bool count)
{
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = q;
    req.q_len = strlen(q);
    req.typo = typo;
    req.prefix_last = prefix;
    req.count_only = count;
    req.limit = 1000;
    QrError err;
    QrSearchRes *res = run(t, &req, &err);
    cr_assert_not_null(res, "[%s]: %s", q, err.message);
    return res;
}

/* The words of `text` folded but not stemmed (one-word texts in tests). */
static int fold_word(Analyzer *an, const char *text, char *out, size_t cap)
{
    Toks t;
    t.n = 0;
    QrError e;
    qr_error_clear(&e);
    analyzer_run(an, text, strlen(text), 0, ANALYZE_NO_STEM | ANALYZE_KEEP_STOPWORDS, toks_sink,
                 &t, &e);
    int n = t.n;
    if (n == 1)
        snprintf(out, cap, "%.*s", (int)t.len[0], t.text[0]);
    toks_free(&t);
    return n;
}

/* A word with `k` random edits (insert, delete, substitute, swap). */
static void garble(uint64_t *rng, const char *w, int k, char *out, size_t cap)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", w);
    for (int i = 0; i < k; i++) {
        size_t n = strlen(buf);
        size_t at = (size_t)eu_below(rng, n ? n : 1);
        char c = (char)('a' + eu_below(rng, 26));
        switch (eu_below(rng, 4)) {
        case 0:
            if (n + 1 < sizeof buf) {
                memmove(buf + at + 1, buf + at, n - at + 1);
                buf[at] = c;
            }
            break;
        case 1:
            if (n > 2)
                memmove(buf + at, buf + at + 1, n - at);
            break;
        case 2: buf[at] = c; break;
        default:
            if (at + 1 < n) {
                char x = buf[at];
                buf[at] = buf[at + 1];
                buf[at + 1] = x;
            }
        }
    }
    snprintf(out, cap, "%s", buf);
}

/* Typo tolerance against a brute-force edit-distance matcher over the
 * vocabulary: a typo-tolerant word matches the docs of its own term and of
 * every word form (as written, folded, unstemmed) with the same first
 * letter and the rest within the edits its length allows -- auto: one from
 * 5 letters, two from 9; 1: one from 3; 2: one from 3, two from 5 --
 * through the stem each form was indexed as. */
Test(search, typo_tolerance_matches_brute_force)
{
    QrSchema sc;
    one_field_schema(&sc, "english");
    Env e;
    env_open(&e, &sc);
    uint64_t rng = 19;
    char **words = eu_words(300, 19);
    static const char *suffix[] = {"", "", "", "s", "ing", "ed", "ation", "ness"};
    int n_docs = 0;
    for (int c = 0; c < 3; c++) { /* three segments */
        for (int i = 0; i < 200; i++) {
            QrBuf b;
            qr_buf_init(&b);
            qr_buf_printf(&b, "{\"id\":%d,\"body\":\"", n_docs++);
            for (int k = 0; k < 6; k++)
                qr_buf_printf(&b, "%s%s%s", k ? " " : "", words[eu_below(&rng, 300)],
                              suffix[eu_below(&rng, 8)]);
            qr_buf_printf(&b, "\"}");
            qr_buf_putc(&b, 0);
            env_put(&e, (char *)b.data);
            qr_buf_free(&b);
        }
        env_commit(&e);
    }
    Snapshot *snap = table_snapshot(e.t->table);
    EuIndex ix;
    eu_index_from_snapshot(&ix, snap, qr_table_schema(e.t));
    snapshot_release(snap);
    Analyzer *an = eu_field_analyzer(&ix, 0);
    static const int modes[] = {QR_TYPO_AUTO, QR_TYPO_ONE, QR_TYPO_TWO};
    int checked = 0, with_variants = 0;
    uint8_t *hit = calloc(ix.n_docs + 1, 1);
    for (int qi = 0; qi < 240; qi++) {
        int mode = modes[qi % 3];
        char w[64], q[64], form[64];
        snprintf(w, sizeof w, "%s%s", words[eu_below(&rng, 300)], suffix[eu_below(&rng, 8)]);
        garble(&rng, w, (int)eu_below(&rng, 3), q, sizeof q);
        if (fold_word(an, q, form, sizeof form) != 1)
            continue;
        int chars = (int)strlen(form);
        int edits = mode == QR_TYPO_AUTO ? (chars >= 9 ? 2 : chars >= 5 ? 1 : 0)
                    : mode == QR_TYPO_ONE ? (chars >= 3 ? 1 : 0)
                                          : (chars >= 5 ? 2 : chars >= 3 ? 1 : 0);
        /* brute force: the word's own term, and the terms of close forms */
        memset(hit, 0, ix.n_docs + 1);
        Toks st;
        st.n = 0;
        QrError err;
        qr_error_clear(&err);
        analyzer_run(an, q, strlen(q), 0, 0, toks_sink, &st, &err);
        const EuTerm *own = st.n == 1 ? eu_index_term(&ix, 0, st.text[0], st.len[0]) : NULL;
        toks_free(&st);
        if (own)
            for (uint32_t o = 0; o < own->n_occ; o++)
                hit[own->occ[o].doc] = 1;
        const EuTerm *terms[4096];
        int n_terms = 0;
        /* the first letter is never a typo: the rest within the edits */
        size_t fl = strlen(form), lead = 1;
        while (lead < fl && ((uint8_t)form[lead] & 0xC0) == 0x80)
            lead++;
        for (uint32_t k = 0; k < ix.n_forms && edits > 0; k++) {
            const EuForm *f = &ix.forms[k];
            if (f->key[0] != 0 || f->key_len - 1 < lead || memcmp(f->key + 1, form, lead) != 0 ||
                (f->key_len - 1 > lead && ((uint8_t)f->key[1 + lead] & 0xC0) == 0x80) ||
                lev((const uint8_t *)form + lead, fl - lead, f->key + 1 + lead,
                    f->key_len - 1 - lead, edits) > edits)
                continue;
            const EuTerm *t = &ix.terms[f->term];
            bool dup = t == own;
            for (int j = 0; j < n_terms && !dup; j++)
                dup = terms[j] == t;
            if (!dup && n_terms < 4096)
                terms[n_terms++] = t;
        }
        if (n_terms > 128)
            continue; /* past max_expansions the best 128 are kept: not this test's */
        for (int j = 0; j < n_terms; j++)
            for (uint32_t o = 0; o < terms[j]->n_occ; o++)
                hit[terms[j]->occ[o].doc] = 1;
        uint64_t want = 0;
        for (uint32_t d = 0; d < ix.n_docs; d++)
            want += hit[d] && ix.docs[d].live;
        QrSearchRes *r = search_req(e.t, q, mode, false, true);
        cr_assert_eq(r->total, want, "[%s] typo %s (%d edits for \"%s\"): %lu matches, want %lu",
                     q, schema_typo_name((QrTypo)mode), edits, form, (unsigned long)r->total,
                     (unsigned long)want);
        qr_search_res_free(r);
        /* and without typo tolerance only the word's own term */
        r = search_req(e.t, q, QR_TYPO_OFF, false, true);
        cr_assert_eq(r->total, own ? (uint64_t)own->n_occ : 0, "[%s] typo off", q);
        qr_search_res_free(r);
        checked++;
        with_variants += n_terms > 0;
    }
    cr_log_info("typos: %d queries checked, %d with variants", checked, with_variants);
    cr_assert_gt(checked, 150);
    cr_assert_gt(with_variants, 60);
    free(hit);
    eu_index_free(&ix);
    eu_words_free(words, 300);
    env_close(&e);
}

/* "databse~1" is matched against the words as written, not their stems:
 * it finds "database" (stem "databas", two edits away from "databse"). */
Test(search, fuzzy_and_prefix_see_words_as_written)
{
    QrSchema sc;
    one_field_schema(&sc, "english");
    Env e;
    env_open(&e, &sc);
    env_put(&e, "{\"id\":1,\"body\":\"a database of databases\"}");
    env_commit(&e);
    env_put(&e, "{\"id\":2,\"body\":\"running terminals\"}");
    env_put(&e, "{\"id\":3,\"body\":\"the terminal\"}");
    env_commit(&e);
    QrSearchRes *r = search_ok(e.t, "databse~1", 10);
    cr_assert_eq(r->total, 1);
    qr_search_res_free(r);
    r = search_ok(e.t, "runn*", 10); /* "running" -> stem "run" */
    cr_assert_eq(r->total, 1);
    qr_search_res_free(r);
    r = search_ok(e.t, "termina*", 10); /* "terminal(s)" -> stem "termin" */
    cr_assert_eq(r->total, 2);
    qr_search_res_free(r);
    /* the same after a merge: the merged segment keeps the forms */
    QrError err;
    cr_assert_eq(qr_merge(e.t, &err), QR_OK, "%s", err.message);
    Snapshot *snap = table_snapshot(e.t->table);
    cr_assert_eq(snap->n_segs, 1);
    snapshot_release(snap);
    r = search_ok(e.t, "databse~1", 10);
    cr_assert_eq(r->total, 1);
    qr_search_res_free(r);
    r = search_ok(e.t, "termina*", 10);
    cr_assert_eq(r->total, 2);
    qr_search_res_free(r);
    env_close(&e);
}

/* The word forms a segment keeps (SEC_SURFACES) are exactly the forms of
 * its documents' words, each naming the term it was indexed as; a merge
 * keeps every source's form whose term lives on. */
Test(search, word_forms_of_segments_and_merges)
{
    QrSchema sc;
    small_schema(&sc, true); /* title and body english */
    sc.all_field = true;
    Env e;
    env_open(&e, &sc);
    env_put(&e, "{\"id\":1,\"title\":\"Running Dogs\",\"body\":\"dogs run; the runner ran\"}");
    env_put(&e, "{\"id\":2,\"title\":\"Cats\",\"body\":\"cat categories, catering\"}");
    env_commit(&e);
    env_put(&e, "{\"id\":3,\"title\":\"Runs\",\"body\":\"running catalogues\"}");
    env_put(&e, "{\"id\":4,\"body\":\"gone\"}");
    env_commit(&e);
    for (int phase = 0; phase < 2; phase++) {
        Snapshot *snap = table_snapshot(e.t->table);
        EuIndex ix;
        eu_index_from_snapshot(&ix, snap, qr_table_schema(e.t));
        int total = 0;
        for (int s = 0; s < snap->n_segs; s++) {
            const TermDict *td = seg_surfaces(snap->segs[s]);
            cr_assert_not_null(td, "segment %d has no word forms", s);
            /* every brute-force form of the segment is there, naming its term */
            for (uint32_t k = 0; k < ix.seg_n_forms[s]; k++) {
                const EuForm *f = &ix.forms[ix.seg_forms[s][k]];
                TermPostings tp;
                cr_assert(td_lookup(td, f->key, f->key_len, &tp), "form %.*s missing",
                          (int)f->key_len - 1, f->key + 1);
                const char *t;
                size_t tl;
                cr_assert(seg_surface_term(snap->segs[s], f->key, f->key_len, &tp, &t, &tl));
                const EuTerm *want = &ix.terms[f->term];
                cr_assert(tl == want->key_len - 1 && !memcmp(t, want->key + 1, tl),
                          "form %.*s names %.*s, want %.*s", (int)f->key_len - 1, f->key + 1,
                          (int)tl, t, (int)want->key_len - 1, want->key + 1);
            }
            /* and nothing else, unless a merge kept a deleted doc's form */
            if (phase == 0)
                cr_assert_eq(td_count(td), ix.seg_n_forms[s], "segment %d: %lu forms, want %u",
                             s, (unsigned long)td_count(td), ix.seg_n_forms[s]);
            total += (int)td_count(td);
        }
        cr_assert_gt(total, 10);
        eu_index_free(&ix);
        snapshot_release(snap);
        if (phase == 0) { /* delete doc 2 (its "categories" has no other doc), merge */
            env_del(&e, "{\"id\":2}");
            env_commit(&e);
            QrError err;
            cr_assert_eq(qr_merge(e.t, &err), QR_OK, "%s", err.message);
            snap = table_snapshot(e.t->table);
            const TermDict *td = seg_surfaces(snap->segs[0]);
            TermPostings tp;
            uint8_t k1[] = "\x01" "categories", k2[] = "\x01" "catalogues";
            cr_assert(!td_lookup(td, k1, sizeof k1 - 1, &tp), "a dead term's form survived");
            cr_assert(td_lookup(td, k2, sizeof k2 - 1, &tp));
            snapshot_release(snap);
        }
    }
    env_close(&e);
}

/* Exact matches rank above typo matches, and completions of the word being
 * typed below the word itself, for documents alike in everything else. */
Test(search, exact_words_rank_above_variants)
{
    QrSchema sc;
    one_field_schema(&sc, "none");
    Env e;
    env_open(&e, &sc);
    env_put(&e, "{\"id\":1,\"body\":\"kestrel aa bb\"}");   /* exact */
    env_put(&e, "{\"id\":2,\"body\":\"kestrels aa bb\"}");  /* one edit, a completion */
    env_put(&e, "{\"id\":3,\"body\":\"kestral aa bb\"}");   /* one edit */
    env_put(&e, "{\"id\":4,\"body\":\"zz aa bb\"}");
    env_commit(&e);
    QrSearchRes *r = search_req(e.t, "kestrel", QR_TYPO_AUTO, true, false);
    cr_assert_eq(r->total, 3);
    cr_assert_str_eq(r->hits[0].id_json, "1");
    cr_assert_gt(r->hits[0].score, r->hits[1].score);
    qr_search_res_free(r);
    r = search_req(e.t, "kestrel", QR_TYPO_OFF, false, false);
    cr_assert_eq(r->total, 1);
    qr_search_res_free(r);
    /* a word in no document: its variants stand in for it */
    r = search_req(e.t, "kestril", QR_TYPO_AUTO, false, false);
    cr_assert_eq(r->total, 2, "kestrel and kestral are one edit from kestril");
    qr_search_res_free(r);
    /* as you type: "kest" completes; "kest " (a space typed) does not */
    r = search_req(e.t, "aa kest", QR_TYPO_OFF, true, true);
    cr_assert_eq(r->total, 4);
    qr_search_res_free(r);
    r = search_req(e.t, "zz kest", QR_TYPO_OFF, true, false);
    cr_assert_eq(r->total, 4);
    qr_search_res_free(r);
    r = search_req(e.t, "zz kest ", QR_TYPO_OFF, true, false);
    cr_assert_eq(r->total, 1, "a trailing space ends the word");
    qr_search_res_free(r);
    r = search_req(e.t, "kest zz", QR_TYPO_OFF, true, false);
    cr_assert_eq(r->total, 1, "only the last word completes");
    qr_search_res_free(r);
    env_close(&e);
}

static void set_synonyms(Env *e, const char *json)
{
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_table_set_synonyms(e->t, json, strlen(json), &err), QR_OK, "%s", err.message);
}

static uint64_t count_of(QrTable *t, const char *q)
{
    QrSearchRes *r = search_req(t, q, QR_TYPO_OFF, false, true);
    uint64_t n = r->total;
    qr_search_res_free(r);
    return n;
}

Test(search, synonyms_groups_one_way_and_several_words)
{
    QrSchema sc;
    one_field_schema(&sc, "english");
    Env e;
    env_open(&e, &sc);
    env_put(&e, "{\"id\":1,\"body\":\"a tty device\"}");
    env_put(&e, "{\"id\":2,\"body\":\"terminal emulators\"}");
    env_put(&e, "{\"id\":3,\"body\":\"television set\"}");
    env_put(&e, "{\"id\":4,\"body\":\"tv set\"}");
    env_put(&e, "{\"id\":5,\"body\":\"new york city\"}");
    env_put(&e, "{\"id\":6,\"body\":\"nyc city\"}");
    env_put(&e, "{\"id\":7,\"body\":\"york is new\"}");
    env_commit(&e);
    cr_assert_eq(count_of(e.t, "tty"), 1);
    set_synonyms(&e, "[[\"tty\",\"terminal\"],[\"nyc\",\"new york\"]]");
    cr_assert_eq(count_of(e.t, "tty"), 2, "a group: tty finds terminal");
    cr_assert_eq(count_of(e.t, "terminals"), 1, "terminals is not a key (keys are not stemmed)");
    cr_assert_eq(count_of(e.t, "TERMINAL"), 2, "keys are folded");
    cr_assert_eq(count_of(e.t, "+tty +device"), 1);
    cr_assert_eq(count_of(e.t, "nyc"), 2, "nyc finds the phrase new york, not york ... new");
    cr_assert_eq(count_of(e.t, "\"new york\""), 2, "the phrase finds nyc");
    cr_assert_eq(count_of(e.t, "+new +york"), 3, "required words or their synonym");
    cr_assert_eq(count_of(e.t, "new york"), 3);
    /* one-way: tv finds television, not the reverse */
    set_synonyms(&e, "{\"tv\": [\"television\"]}");
    cr_assert_eq(count_of(e.t, "tv"), 2);
    cr_assert_eq(count_of(e.t, "television"), 1);
    cr_assert_eq(count_of(e.t, "tty"), 1, "the groups were replaced");
    /* a request may leave them out */
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = "tv";
    req.q_len = 2;
    req.no_synonyms = true;
    req.count_only = true;
    QrError err;
    QrSearchRes *r = run(e.t, &req, &err);
    cr_assert_eq(r->total, 1);
    qr_search_res_free(r);
    /* durable: reopened, the synonyms are there; empty removes them */
    qr_batch_free(e.b);
    qr_db_close(e.db);
    QrDbOpts o;
    qr_db_opts_default(&o);
    o.fsync = QR_FSYNC_OFF;
    o.background_merge = false;
    cr_assert_eq(qr_db_open(e.dir, &o, &e.db, &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_table_get(e.db, "t", &e.t, &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_batch_begin(e.t, &e.b, &err), QR_OK, "%s", err.message);
    cr_assert_eq(count_of(e.t, "tv"), 2);
    set_synonyms(&e, "");
    cr_assert_eq(count_of(e.t, "tv"), 1);
    /* bad synonyms are refused and change nothing */
    set_synonyms(&e, "[[\"a\",\"b\"]]");
    static const char *bad[] = {"[[\"solo\"]]", "[[\"a\", 3]]", "{\"a\": []}", "\"x\"",
                                "[[\"\",\"b\"]]", "[[\"a b c d e f g h i j k l m n o p q\",\"b\"]]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        qr_error_clear(&err);
        cr_assert_eq(qr_table_set_synonyms(e.t, bad[i], strlen(bad[i]), &err), QR_EINVAL,
                     "%s accepted", bad[i]);
        cr_assert_gt(strlen(err.message), 0);
    }
    size_t len;
    const char *syn = schema_synonyms(qr_table_schema(e.t), &len);
    cr_assert(syn && len == strlen("[[\"a\",\"b\"]]") && !memcmp(syn, "[[\"a\",\"b\"]]", len));
    env_close(&e);
}

/* A segment builder gives text fields analyzed alike one analyzer (one stem
 * cache) and the others their own: two English fields, one German, one
 * English with its own stop words, 100 documents (past the builder's memo
 * threshold) each answer with their own language's stems and stop words. */
Test(search, fields_share_an_analyzer_only_when_analyzed_alike)
{
    const char *schema_json =
        "{\"fields\":[{\"name\":\"a\",\"type\":\"text\",\"language\":\"english\"},"
        "{\"name\":\"b\",\"type\":\"text\",\"language\":\"english\"},"
        "{\"name\":\"de\",\"type\":\"text\",\"language\":\"german\"},"
        "{\"name\":\"own\",\"type\":\"text\",\"language\":\"english\","
        "\"stopwords\":[\"houses\"]}],\"all_field\":false}";
    Env e;
    env_open_json(&e, schema_json);
    char doc[256];
    for (int i = 0; i < 100; i++) {
        snprintf(doc, sizeof doc,
                 "{\"id\":%d,\"a\":\"running houses\",\"b\":\"%s\",\"de\":\"Häuser laufen\","
                 "\"own\":\"houses running\"}",
                 i, i % 2 ? "houses" : "runs");
        env_put(&e, doc);
    }
    env_commit(&e);
    cr_assert_eq(count_of(e.t, "a:run"), 100);
    cr_assert_eq(count_of(e.t, "a:house"), 100);
    cr_assert_eq(count_of(e.t, "b:run"), 50);
    cr_assert_eq(count_of(e.t, "b:houses"), 50);
    cr_assert_eq(count_of(e.t, "de:haus"), 100, "German stems, not English");
    cr_assert_eq(count_of(e.t, "de:laufen"), 100);
    cr_assert_eq(count_of(e.t, "own:running"), 100);
    cr_assert_eq(count_of(e.t, "own:house"), 0, "the field's own stop word");
    cr_assert_eq(count_of(e.t, "a:houses own:running"), 100);
    env_close(&e);
}

/* French and Italian elision: "homme" finds "L'homme", "arte" finds
 * "dell'arte"; a single CJK character finds the words holding it, and does
 * not lengthen the field; a field's own stop words. */
Test(search, elision_cjk_characters_and_custom_stop_words)
{
    const char *schema_json =
        "{\"fields\":[{\"name\":\"fr\",\"type\":\"text\",\"language\":\"french\"},"
        "{\"name\":\"it\",\"type\":\"text\",\"language\":\"italian\"},"
        "{\"name\":\"zh\",\"type\":\"text\",\"language\":\"none\"},"
        "{\"name\":\"own\",\"type\":\"text\",\"language\":\"none\","
        "\"stopwords\":[\"Foo\",\"bar\"]}],\"all_field\":false}";
    QrError err;
    qr_error_clear(&err);
    Env e;
    env_open_json(&e, schema_json);
    env_put(&e, "{\"id\":1,\"fr\":\"L'homme et l’arbre\",\"it\":\"la storia dell'arte\","
                "\"zh\":\"我们学习中文\",\"own\":\"foo baz bar qux\"}");
    env_put(&e, "{\"id\":2,\"fr\":\"un homme\",\"it\":\"l'amico\",\"zh\":\"日本語\","
                "\"own\":\"baz\"}");
    env_commit(&e);
    cr_assert_eq(count_of(e.t, "fr:homme"), 2);
    cr_assert_eq(count_of(e.t, "fr:l'homme"), 2, "the query is elided too");
    cr_assert_eq(count_of(e.t, "fr:arbre"), 1, "a typographic apostrophe elides too");
    cr_assert_eq(count_of(e.t, "it:arte"), 1);
    cr_assert_eq(count_of(e.t, "it:amico"), 1);
    cr_assert_eq(count_of(e.t, "zh:学"), 1, "one character inside a word");
    cr_assert_eq(count_of(e.t, "zh:本"), 1);
    cr_assert_eq(count_of(e.t, "zh:日本語"), 1);
    cr_assert_eq(count_of(e.t, "zh:英"), 0);
    /* grams are not words: the field lengths count words only */
    Snapshot *snap = table_snapshot(e.t->table);
    const uint32_t *norms = seg_norms(snap->segs[0], 2);
    EuIndex ix;
    eu_index_from_snapshot(&ix, snap, qr_table_schema(e.t));
    cr_assert_eq(norms[0], eu_doc_norm(&ix, 0, 2));
    cr_assert_eq(norms[1], eu_doc_norm(&ix, 1, 2));
    cr_assert_lt(norms[1], 3, "日本語 is %u words", norms[1]);
    eu_index_free(&ix);
    snapshot_release(snap);
    /* custom stop words: dropped (matching nothing), positions kept */
    cr_assert_eq(count_of(e.t, "own:baz"), 2);
    cr_assert_eq(count_of(e.t, "own:foo"), 0, "a stop word alone matches nothing");
    cr_assert_eq(count_of(e.t, "own:qux own:Foo"), 1, "and drops out of its group");
    cr_assert_eq(count_of(e.t, "own:\"baz qux\"~1"), 1, "bar keeps its position");
    cr_assert_eq(count_of(e.t, "own:\"baz qux\""), 0);
    /* the list survives the schema's JSON */
    QrBuf b;
    qr_buf_init(&b);
    cr_assert_eq(schema_to_json(qr_table_schema(e.t), false, &b, &err), QR_OK);
    qr_buf_putc(&b, 0);
    cr_assert(strstr((char *)b.data, "\"stopwords\":[\"Foo\",\"bar\"]"), "%s", (char *)b.data);
    qr_buf_free(&b);
    env_close(&e);
}

/* Several fragments of a set size, and one highlight per field asked for. */
Test(search, snippet_fragments_and_fields)
{
    QrSchema sc;
    small_schema(&sc, false);
    Env e;
    env_open(&e, &sc);
    QrBuf body;
    qr_buf_init(&body);
    qr_buf_printf(&body, "{\"id\":1,\"title\":\"hydro dams\",\"body\":\"hydro");
    for (int i = 0; i < 60; i++)
        qr_buf_printf(&body, " w%d", i);
    qr_buf_printf(&body, " power");
    for (int i = 60; i < 120; i++)
        qr_buf_printf(&body, " w%d", i);
    qr_buf_printf(&body, "\"}");
    qr_buf_putc(&body, 0);
    env_put(&e, (char *)body.data);
    qr_buf_free(&body);
    env_commit(&e);
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = "hydro power";
    req.q_len = strlen(req.q);
    req.snippets = true;
    req.fragments = 2;
    req.fragment_words = 6;
    req.hl_fields = "title,body";
    req.hl_pre = "[";
    req.hl_post = "]";
    QrError err;
    QrSearchRes *r = run(e.t, &req, &err);
    cr_assert_not_null(r, "%s", err.message);
    cr_assert_eq(r->n_hits, 1);
    const QrHit *h = &r->hits[0];
    cr_assert_eq(h->n_highlights, 2);
    cr_assert_str_eq(h->highlights[0].field, "title");
    cr_assert_eq(h->highlights[0].n, 1);
    cr_assert_str_eq(h->highlights[0].fragments[0], "[hydro] dams");
    cr_assert_str_eq(h->highlights[1].field, "body");
    cr_assert_eq(h->highlights[1].n, 2, "two fragments: hydro and power are 61 words apart");
    for (int i = 0; i < 2; i++) {
        const char *f = h->highlights[1].fragments[i];
        int words = 1;
        for (const char *c = f; *c; c++)
            words += *c == ' ';
        cr_assert_leq(words, 6, "fragment \"%s\" is longer than 6 words", f);
        cr_assert(strstr(f, "[hydro]") || strstr(f, "[power]"), "%s", f);
    }
    cr_assert_str_eq(h->snippet, "[hydro] dams", "the first searched field with a match");
    qr_search_res_free(r);
    req.fields = "body";
    r = run(e.t, &req, &err);
    cr_assert_not_null(r, "%s", err.message);
    cr_assert(strstr(r->hits[0].snippet, " … "), "the snippet joins its fragments: %s",
              r->hits[0].snippet);
    qr_search_res_free(r);
    req.fields = NULL;
    req.hl_fields = "nope";
    cr_assert_null(run(e.t, &req, &err));
    cr_assert_eq(err.code, QR_EINVAL);
    env_close(&e);
}

/* A document without the boosted field is not pushed down by the boost:
 * one with the word three times in its body outranks one with the word
 * once in a title weighing 2, boosted or not (BM25F saturates the combined
 * frequency); the per-field sum ranks the title match first. */
Test(search, missing_field_not_penalized_by_boost)
{
    QrSchema sc;
    small_schema(&sc, false);
    Env e;
    env_open(&e, &sc);
    env_put(&e, "{\"id\":1,\"body\":\"alpha alpha alpha b c d e f g h\"}");
    env_put(&e, "{\"id\":2,\"title\":\"alpha\",\"body\":\"b c d e f g h i j\"}");
    for (int i = 3; i < 12; i++) {
        char d[96];
        snprintf(d, sizeof d, "{\"id\":%d,\"title\":\"t%d\",\"body\":\"b c d e f g h i j k\"}", i, i);
        env_put(&e, d);
    }
    env_commit(&e);
    static const char *specs[] = {"title^2,body", "title,body", NULL};
    for (int i = 0; i < 3; i++) {
        QrSearchReq req;
        qr_search_req_init(&req);
        req.q = "alpha";
        req.q_len = 5;
        req.fields = specs[i];
        QrError err;
        QrSearchRes *r = run(e.t, &req, &err);
        cr_assert_not_null(r, "%s", err.message);
        cr_assert_eq(r->n_hits, 2);
        cr_assert_str_eq(r->hits[0].id_json, "1", "fields %s: the title match ranks first",
                         specs[i] ? specs[i] : "(schema)");
        qr_search_res_free(r);
        req.scoring = QR_SCORING_SUM;
        r = run(e.t, &req, &err);
        if (specs[i] && !strcmp(specs[i], "title^2,body"))
            cr_assert_str_eq(r->hits[0].id_json, "2", "the weighted sum rewards the title");
        qr_search_res_free(r);
    }
    env_close(&e);
}
