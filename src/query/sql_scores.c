/*
 * sql_scores.c — EXPLAIN (SCORES): the BM25 breakdown of every document a
 * full-text table access returned, one row per (document, query term,
 * field) with tf, df, idf, field length, average length, weight, the
 * term's contribution and where the term came from, so the explanation is
 * joinable SQL, not a blob.
 *
 * Layer: query/.  Calls search_int.h (the text engine) and the snapshot of
 * index/.
 *
 * The terms are the compiled query's (search_terms): analyzed, expanded
 * (prefixes, fuzzy terms, typo variants, synonyms: the `source` column says
 * which) and weighted exactly as ranking weighs them, so a document's rows
 * add up to its score().  A word searched in several weighted fields is one
 * BM25F term: its row names the fields ("title^2 + body"), its tf is summed
 * over them, its doc_len the weighted combined length.  Terms under NOT
 * are left out (they do not score), and so are constant-score expansions.
 */
#include "query/search_int.h"
#include "query/sql_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "store/util.h"

/* "title^2 + body": the fields a BM25F term combines. */
static const char *bf_label(SqlCtx *cx, Search *srch, const QrSchema *s)
{
    const int *fl;
    const float *fw;
    int n = search_fields(srch, &fl, &fw);
    QrBuf b;
    qr_buf_init(&b);
    for (int i = 0; i < n; i++) {
        qr_buf_printf(&b, "%s%s", i ? " + " : "",
                      fl[i] == QR_ALL_FIELD ? "_all" : s->fields[fl[i]].name);
        if (fw[i] != 1.0f)
            qr_buf_printf(&b, "^%g", (double)fw[i]);
    }
    const char *out = qr_buf_ok(&b) ? qr_arena_strndup(cx->arena, (const char *)b.data, b.len)
                                    : NULL;
    qr_buf_free(&b);
    return out ? out : "";
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
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = qv.u.s.s;
    req.q_len = qv.u.s.n;
    req.fields = tp->field;
    req.typo = cx->typo;
    req.prefix_last = cx->prefix_last;
    Snapshot *snap = sql_snapshot(cx, t); /* a transaction block's view: its own writes */
    if (!snap)
        return cx->err->code;
    Search *srch = NULL;
    QrError e;
    qr_error_clear(&e);
    if (search_open(t, snap, cx->arena, &req, &srch, &e) != QR_OK) {
        snapshot_release(snap);
        qr_error_copy(cx->err, &e);
        return e.code;
    }
    const SearchTerm *terms;
    int n_terms;
    rc = search_terms(srch, &terms, &n_terms);
    const char *bf = NULL;
    for (int k = 0; k < n_terms && rc == QR_OK; k++) {
        const SearchTerm *st = &terms[k];
        const char *fname = st->field < 0 ? (bf ? bf : (bf = bf_label(cx, srch, s)))
                            : st->field == QR_ALL_FIELD ? "_all"
                                                        : s->fields[st->field].name;
        for (uint64_t d = 0; d < n_docs && rc == QR_OK; d++) {
            int si;
            uint32_t local, tf, len;
            float score;
            if (!snapshot_locate(snap, (DocId)docs[d], &si, &local) ||
                !search_term_doc(srch, st, si, local, &tf, &len, &score))
                continue; /* the term is not in this document */
            SqlValue *row = sql_sink_slot(cx, out);
            if (!row) {
                rc = cx->err->code;
                break;
            }
            const uint8_t *key;
            size_t kl;
            QrBuf kb;
            qr_buf_init(&kb);
            if (seg_pk(snap->segs[si], local, &key, &kl))
                pk_to_json(key, kl, &kb);
            row[0] = sqlv_int(docs[d]);
            row[1] = sqlv_text(qr_arena_strndup(cx->arena, kb.data ? (char *)kb.data : "", kb.len), kb.len);
            row[2] = sqlv_text(qr_arena_strndup(cx->arena, st->text, st->len), st->len);
            row[3] = sqlv_text(fname, strlen(fname));
            row[4] = sqlv_int(tf);
            row[5] = sqlv_int((int64_t)st->df);
            row[6] = sqlv_float(st->idf);
            row[7] = sqlv_int(len);
            row[8] = sqlv_float(st->avgdl);
            row[9] = sqlv_float(st->weight);
            row[10] = sqlv_float(score);
            row[11] = sqlv_text(st->source, strlen(st->source));
            qr_buf_free(&kb);
            if (!row[1].u.s.s || !row[2].u.s.s) {
                rc = sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
                break;
            }
            out->n++;
        }
    }
    IterCtx *ic = search_ctx(srch);
    if (rc == QR_OK && ic->err.code)
        qr_error_copy(cx->err, &ic->err), rc = ic->err.code;
    search_close(srch);
    snapshot_release(snap);
    return rc ? rc : (int)cx->err->code;
}
