/*
 * sql_scores.c — EXPLAIN (SCORES): the BM25 breakdown of every document a
 * full-text table access returned, one row per (document, query term,
 * field) with tf, df, idf, field length, average length, weight and the
 * term's contribution, so the explanation is joinable SQL, not a blob.
 *
 * Layer: query/.  Calls qparse (query/), the analyzer, segments, postings
 * and iterators (index/).
 *
 * The numbers follow search.c's scoring (docs/query-language.md): idf over
 * every doc of the snapshot's segments (robertson floored at 1e-6, or
 * lucene), avgdl = field tokens / docs having the field, weight = field
 * weight (1 for the combined _all field) times the boosts on the path to
 * the term, score = bm25_term_score(tf, field length).  Terms under NOT are
 * left out (they do not score); phrases, prefixes and fuzzy terms are
 * broken down word by word / by their written form.
 */
#include "index/analyzer.h"
#include "index/postings.h"
#include "query/qparse.h"
#include "query/sql_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "store/util.h"

#define SCORES_MAX_DOCS 1000
#define SCORES_MAX_TERMS 64

typedef struct ScoreTerm {
    int field;                 /* field index or QR_ALL_FIELD */
    char text[128];            /* analyzed term */
    uint32_t len;
    float weight;
} ScoreTerm;

typedef struct TermCollect {
    ScoreTerm *terms;
    int n;
    int field;
    float weight;
} TermCollect;

static int collect_tok(void *arg, const Token *tok)
{
    TermCollect *tc = arg;
    if (tc->n >= SCORES_MAX_TERMS || tok->len >= sizeof tc->terms[0].text)
        return 0;
    for (int i = 0; i < tc->n; i++) /* once per (field, term) */
        if (tc->terms[i].field == tc->field && tc->terms[i].len == tok->len &&
            !memcmp(tc->terms[i].text, tok->text, tok->len))
            return 0;
    ScoreTerm *t = &tc->terms[tc->n++];
    t->field = tc->field;
    memcpy(t->text, tok->text, tok->len);
    t->text[tok->len] = 0;
    t->len = tok->len;
    t->weight = tc->weight;
    return 0;
}

/* The analyzer options of a field (_all: the first full-text field's). */
static const QrField *analyzer_field(const QrSchema *s, int field)
{
    if (field != QR_ALL_FIELD)
        return &s->fields[field];
    for (int f = 0; f < s->n_fields; f++)
        if (s->fields[f].type == QR_FT_TEXT && s->fields[f].indexed)
            return &s->fields[f];
    return NULL;
}

static int leaf_terms(SqlCtx *cx, const QrSchema *s, const QNode *q, float boost,
                      const char *pred_field, TermCollect *tc)
{
    if (q->occur == QO_MUST_NOT)
        return QR_OK;
    boost *= q->boost;
    if (q->kind == QN_BOOL) {
        for (int i = 0; i < q->n_kids; i++) {
            int rc = leaf_terms(cx, s, q->kids[i], boost, pred_field, tc);
            if (rc)
                return rc;
        }
        return QR_OK;
    }
    if (q->kind == QN_ALL || !q->text)
        return QR_OK;
    /* the fields this leaf scores in, as search.c's leaf_fields */
    int fields[QR_MAX_FIELDS + 1];
    float w[QR_MAX_FIELDS + 1];
    int nf = 0;
    const char *fname = q->field ? q->field : pred_field;
    if (fname) {
        int f = schema_field_index(s, fname);
        if (f < 0)
            return QR_OK;
        fields[nf] = f;
        w[nf++] = s->fields[f].weight;
    } else if (s->all_field) {
        fields[nf] = QR_ALL_FIELD;
        w[nf++] = 1.0f;
    } else {
        for (int f = 0; f < s->n_fields; f++)
            if (s->fields[f].type == QR_FT_TEXT && s->fields[f].indexed) {
                fields[nf] = f;
                w[nf++] = s->fields[f].weight;
            }
    }
    for (int i = 0; i < nf; i++) {
        const QrField *af = analyzer_field(s, fields[i]);
        if (!af)
            continue;
        AnalyzerOpts ao = {.language = af->language, .stopwords = af->stopwords,
                           .accent_fold = af->accent_fold};
        Analyzer *an;
        if (analyzer_new(&ao, &an, cx->err) != QR_OK)
            return cx->err->code;
        tc->field = fields[i];
        tc->weight = w[i] * boost;
        unsigned flags = q->kind == QN_PREFIX || q->kind == QN_FUZZY ? ANALYZE_NO_STEM : 0;
        int rc = analyzer_run(an, q->text, q->text_len, 0, flags, collect_tok, tc, cx->err);
        analyzer_free(an);
        if (rc)
            return cx->err->code ? (int)cx->err->code : rc;
    }
    return QR_OK;
}

/* Append the breakdown rows of `docs` under text predicate tp of table t. */
int sql_scores_rows(SqlCtx *cx, QrTable *t, const SqlTextPred *tp, const int64_t *docs,
                    uint64_t n_docs, SqlRowSink *out)
{
    const QrSchema *s = qr_table_schema(t);
    SqlValue qv;
    SqlEvalRow none = {.doc = -1};
    int rc = sql_expr_eval(cx, tp->query, &none, &qv);
    if (rc || qv.is_null)
        return rc;
    const char *names[QR_MAX_FIELDS + 1];
    int nn = 0;
    for (int f = 0; f < s->n_fields; f++)
        names[nn++] = s->fields[f].name;
    names[nn] = NULL;
    QParseOpts po = {.fields = names};
    QNode *root;
    if (qparse(cx->arena, qv.u.s.s, qv.u.s.n, &po, &root, cx->err) != QR_OK)
        return cx->err->code;
    ScoreTerm terms[SCORES_MAX_TERMS];
    TermCollect tc = {.terms = terms};
    if ((rc = leaf_terms(cx, s, root, 1.0f, tp->field, &tc)))
        return rc;
    Snapshot *snap = sql_snapshot(cx, t);
    if (!snap)
        return cx->err->code;
    IterCtx ictx;
    iter_ctx_init(&ictx, cx->arena);
    for (int k = 0; k < tc.n && rc == QR_OK; k++) {
        ScoreTerm *st = &terms[k];
        uint64_t df = 0, tot = 0, nd = 0;
        for (int i = 0; i < snap->n_segs; i++) {
            TermPostings tpp;
            if (seg_term(snap->segs[i], st->field, st->text, st->len, &tpp))
                df += tpp.df;
            SegFieldStats fs = seg_field_stats(snap->segs[i], st->field);
            tot += fs.total_len;
            nd += fs.n_docs;
        }
        double N = (double)snap->n_docs, idf;
        if (s->idf == QR_IDF_LUCENE) {
            idf = log(1.0 + (N - (double)df + 0.5) / ((double)df + 0.5));
        } else {
            idf = log((N - (double)df + 0.5) / ((double)df + 0.5));
            if (idf < 1e-6)
                idf = 1e-6;
        }
        PostScorer sc = {.idf = (float)idf, .k1 = s->k1, .b = s->b,
                         .avgdl = (float)(nd ? (double)tot / (double)nd : 1.0),
                         .weight = st->weight};
        for (uint64_t d = 0; d < n_docs && rc == QR_OK; d++) {
            int si;
            uint32_t local;
            TermPostings tpp;
            if (!snapshot_locate(snap, (DocId)docs[d], &si, &local))
                continue;
            Segment *seg = snap->segs[si];
            uint32_t tf = 0;
            if (seg_term(seg, st->field, st->text, st->len, &tpp)) {
                Iter *it = seg_postings(seg, &ictx, &tpp, NULL, false);
                if (it && iter_advance(it, local) == local && it->vt->freq)
                    tf = it->vt->freq(it);
                iter_close(it);
            }
            if (tf == 0)
                continue; /* the term is not in this document's field */
            const uint32_t *norms = seg_norms(seg, st->field);
            uint32_t len = norms ? norms[local] : 0;
            SqlValue *row = sql_sink_slot(cx, out);
            if (!row) {
                rc = cx->err->code;
                break;
            }
            const uint8_t *key;
            size_t kl;
            QrBuf kb;
            qr_buf_init(&kb);
            if (seg_pk(seg, local, &key, &kl))
                pk_to_json(key, kl, &kb);
            const char *fname = st->field == QR_ALL_FIELD ? "_all" : s->fields[st->field].name;
            row[0] = sqlv_int(docs[d]);
            row[1] = sqlv_text(qr_arena_strndup(cx->arena, kb.data ? (char *)kb.data : "", kb.len), kb.len);
            row[2] = sqlv_text(qr_arena_strndup(cx->arena, st->text, st->len), st->len);
            row[3] = sqlv_text(fname, strlen(fname));
            row[4] = sqlv_int(tf);
            row[5] = sqlv_int((int64_t)df);
            row[6] = sqlv_float((float)idf);
            row[7] = sqlv_int(len);
            row[8] = sqlv_float(sc.avgdl);
            row[9] = sqlv_float(sc.weight);
            row[10] = sqlv_float(bm25_term_score(&sc, tf, len));
            qr_buf_free(&kb);
            if (!row[1].u.s.s || !row[2].u.s.s) {
                rc = sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
                break;
            }
            out->n++;
        }
    }
    snapshot_release(snap);
    if (rc == QR_OK && ictx.err.code)
        qr_error_copy(cx->err, &ictx.err);
    return cx->err->code;
}
