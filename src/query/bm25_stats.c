/*
 * bm25_stats.c — what one node contributes to BM25's collection statistics
 * (quarry.h "BM25 statistics across nodes"): document count, tokens and
 * documents per field, and the document frequency of analyzed terms, over
 * one snapshot.  search.c adds the other nodes' contributions, asked of
 * the database's QrStatsSource, before it scores (docs/scale-out.md).
 *
 * Layer: query/.  Calls index/table.h and index/segment.h.
 *
 * Every number is a plain sum over the snapshot's segments, deleted
 * documents included until a merge drops them (search.c's definition), so
 * the sums of several nodes equal the numbers of one node holding all their
 * segments: the scores then agree to the last bit.
 */
#include <string.h>

#include "query/query_int.h"

void bm25_snapshot_totals(const Snapshot *snap, QrBm25Stats *st)
{
    memset(st, 0, sizeof *st);
    st->version = snap->version;
    st->n_docs = snap->n_docs;
    for (int i = 0; i < snap->n_segs; i++)
        for (int f = 0; f <= QR_ALL_FIELD; f++) {
            if (f >= QR_MAX_FIELDS && f != QR_ALL_FIELD)
                continue;
            SegFieldStats fs = seg_field_stats(snap->segs[i], f);
            st->field_tokens[f] += fs.total_len;
            st->field_docs[f] += fs.n_docs;
        }
}

int qr_table_bm25_stats(QrTable *t, QrBm25Stats *st, QrTermStat *terms, int n_terms,
                        QrError *err)
{
    if (n_terms < 0)
        return qr_error_set(err, QR_EINVAL, "negative term count");
    Snapshot *snap = table_snapshot(t->table);
    bm25_snapshot_totals(snap, st);
    for (int k = 0; k < n_terms; k++) {
        QrTermStat *ts = &terms[k];
        ts->df = 0;
        if (ts->field < 0 || ts->field > QR_ALL_FIELD)
            continue;
        for (int i = 0; i < snap->n_segs; i++) {
            TermPostings tp;
            if (seg_term(snap->segs[i], ts->field, ts->text, ts->len, &tp))
                ts->df += tp.df;
        }
    }
    snapshot_release(snap);
    return QR_OK;
}
