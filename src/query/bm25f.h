/*
 * bm25f.h — BM25F: one term scored over several weighted fields at once,
 * its frequencies and the document's field lengths combined with the field
 * weights before saturation (Robertson & Zaragoza; Elasticsearch's
 * combined_fields, Lucene's CombinedFieldQuery):
 *
 *   tf~(d)  = sum over the fields f of w_f * tf_f(d)
 *   dl~(d)  = sum over the fields f of w_f * len_f(d)   (every field searched,
 *                                                        with the term or not)
 *   avgdl~  = sum over f of w_f * tokens_f / max over f of docs having f
 *   df~     = max over f of df_f                       (idf from it)
 *   score   = weight * idf * tf~ * (k1 + 1) / (tf~ + k1 * (1 - b + b * dl~ / avgdl~))
 *
 * So a term found in a boosted field counts more, but never more than the
 * saturation allows (a title match cannot double a body match's score), and
 * a document that lacks a field simply has no length in it: nothing is
 * added and nothing is taken away (docs/query-language.md "Scoring").
 *
 * Layer: query/.  Calls index/iter.h and the base kit only.
 */
#ifndef QR_BM25F_H
#define QR_BM25F_H

#include <stdint.h>

#include "index/iter.h"

typedef struct Bm25fScorer {
    float idf;             /* from df~ */
    float k1, b;
    float avgdl;           /* avgdl~ (> 0) */
    float weight;          /* query boosts (not the field weights) */
    int n_fields;          /* fields combined */
    const float *fw;       /* borrows: n_fields weights */
    const uint32_t *const *norms; /* borrows: per field, its lengths of every doc of the
                                     segment, or NULL (the field is absent there) */
} Bm25fScorer;

/* The score for combined tf~ and dl~, in float, in exactly this order (the
 * iterator and the oracles of the tests share it).  Non-decreasing in tf~,
 * non-increasing in dl~, below weight * idf * (k1 + 1). */
static inline float bm25f_score(const Bm25fScorer *s, float tf, float dl)
{
    return s->weight * s->idf * tf * (s->k1 + 1) / (tf + s->k1 * (1 - s->b + s->b * dl / s->avgdl));
}

/* dl~ of doc d: the weighted sum of its lengths in every combined field. */
static inline float bm25f_doc_len(const Bm25fScorer *s, uint32_t d)
{
    float dl = 0;
    for (int i = 0; i < s->n_fields; i++)
        if (s->norms[i])
            dl += s->fw[i] * (float)s->norms[i][d];
    return dl;
}

/* The union of one term's posting iterators in the combined fields:
 * kids[i] is the term's postings in field kid_field[i] (an index into the
 * scorer's fields; a field without the term has no kid).  Kids need freq().
 * scorer NULL: a plain union (non-scoring).  Otherwise score() is
 * bm25f_score(tf~, dl~) at the current doc, max_score the saturation bound
 * weight * idf * (k1 + 1), and there is no block_max (the bound serves).
 * The scorer is copied, its arrays borrowed.  Arena-allocated; NULL with
 * ctx->err set on failure.  n == 0 gives an empty iterator. */
Iter *bm25f_iter_new(IterCtx *ctx, Iter **kids, const int *kid_field, int n,
                     const Bm25fScorer *scorer);

#endif
