/*
 * postings.h — the postings codec: doc ids, term frequencies and positions of
 * one term, with skip data and block-max impacts, and the posting iterator.
 *
 * Layer: index/.  Calls store/ base kit (error, mem, buf) and index/iter.h.
 *
 * The byte format is described in docs/postings-format.md and in the header
 * comment of postings.c.  In short: doc ids go in blocks of 128 (gap-coded,
 * SIMD bit-packed, vertical 4-lane layout), a varint tail block holds the
 * rest; each block carries its term frequencies and its block-max impacts
 * (the Pareto-optimal (tf, doc_len) pairs); per-block skip data (last doc,
 * byte offsets) lets advance() jump over blocks without decoding them.
 * Lists with df < 128 use a compact one-block form without skip data.
 * Positions live in their own stream, per block, decoded only on demand.
 *
 * Writers append to QrBufs and report offsets in a TermPostings; the segment
 * assembler stores the streams and the term dictionary stores the
 * TermPostings.  Readers work over borrowed memory (an mmap) and validate
 * every length and offset: damaged bytes end in QR_ECORRUPT recorded in the
 * IterCtx, never in a read outside the streams.
 */
#ifndef QR_POSTINGS_H
#define QR_POSTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index/iter.h"
#include "store/buf.h"
#include "store/error.h"

/* Docs per packed block; the last block of a term (its "tail") holds fewer. */
#define POST_BLOCK 128
/* At most this many (tf, doc_len) impact pairs per block and per term. */
#define POST_BLOCK_IMPACTS 4
#define POST_TERM_IMPACTS 8

/* What the term dictionary stores per term.  All zero for a term with no
 * docs.  Offsets are relative to the start of the docs / positions stream
 * handed to post_iter_open. */
typedef struct TermPostings {
    uint32_t df;       /* docs containing the term */
    uint64_t total_tf; /* sum of tf (>= df) */
    uint64_t docs_off; /* offset of this term's data in the docs stream */
    uint32_t docs_len; /* its length in bytes */
    uint64_t pos_off;  /* offset in the positions stream (0/0 when none) */
    uint64_t pos_len;
} TermPostings;

/* ---- writer ---- */

typedef struct PostingsWriter PostingsWriter;

/* New writer; with_positions = false ignores every positions argument.
 * NULL on OOM. */
PostingsWriter *postw_new(bool with_positions);
/* NULL is a no-op. */
void postw_free(PostingsWriter *w);
/* Start a term (forgets any unfinished one). */
void postw_begin_term(PostingsWriter *w);
/* Add one doc of the current term.  docs strictly ascending; freq >= 1;
 * positions: `freq` ascending values (equal neighbours allowed), or NULL for
 * a term stored without positions (a term is positional or not as decided by
 * its first doc; mixing is QR_EINVAL).  doc_len: the field length of doc, for
 * the block-max impacts.  QR_EINVAL on a contract breach, QR_ELIMIT past
 * 2^32-1 docs.  After an error the term is abandoned (postw_begin_term). */
int postw_add(PostingsWriter *w, uint32_t doc, uint32_t freq, const uint32_t *positions,
              uint32_t doc_len, QrError *err);
/* Encode the current term: append its docs data to docs_out and its
 * positions to pos_out (may be NULL for a writer without positions), fill
 * *tp with df, total_tf and the offsets (docs_off = docs_out->len before the
 * call).  A term with no docs writes nothing and yields an all-zero *tp.
 * QR_ENOMEM when a buffer ran out of memory, QR_ELIMIT when one term's docs
 * data passes 4 GiB.  The writer is ready for the next postw_begin_term. */
int postw_end_term(PostingsWriter *w, QrBuf *docs_out, QrBuf *pos_out, TermPostings *tp,
                   QrError *err);

/* One (term frequency, field length) pair of a doc: the block-max and
 * term-level bounds are built from them. */
typedef struct PostImpact {
    uint32_t tf;
    uint32_t len;
} PostImpact;

/* Reduce v[0..n) in place to its Pareto frontier (higher tf and shorter len
 * dominate; equal pairs count once), sorted by tf ascending (len then
 * strictly ascending too).  Returns the frontier's size.  O(n + max tf) when
 * every tf is below 256, else O(n log n).  The writer's helper, public for
 * the unit test's brute-force comparison. */
size_t post_impact_frontier(PostImpact *v, size_t n);

/* ---- scoring ---- */

/* BM25 for one (term, field); computed by the query layer.  idf and weight
 * are >= 0.  norms must hold n_docs entries: every doc of the segment. */
typedef struct PostScorer {
    float idf;             /* already includes nothing but idf */
    float k1, b, avgdl;
    float weight;          /* field weight * query boost */
    const uint32_t *norms; /* borrows: field length of every doc of the segment */
    uint32_t n_docs;       /* entries in norms */
} PostScorer;

/* score(tf, len) = weight * idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avgdl)),
 * in float, in exactly this order; the iterator and the brute-force oracles
 * share it.  Non-decreasing in tf (up to rounding, which the block bounds
 * absorb) and non-increasing in len. */
static inline float bm25_term_score(const PostScorer *s, uint32_t tf, uint32_t len)
{
    float ftf = (float)tf;
    return s->weight * s->idf * ftf * (s->k1 + 1) /
           (ftf + s->k1 * (1 - s->b + s->b * (float)len / s->avgdl));
}

/* ---- iterator ---- */

/* Open an iterator over one term of one segment.  The streams are borrowed
 * (valid while the segment is pinned); tp and scorer are copied.  The
 * iterator is arena-allocated from ctx->arena, and so is its positions
 * buffer.
 *   scorer NULL     non-scoring: vt->score, max_score and block_max are NULL.
 *   want_positions  positions() works (pos_stream is then required when the
 *                   term has positions; it returns NULL, n = 0, for a term
 *                   stored without them).
 * freq() is always available.  Decoding is lazy: doc ids per block when a
 * move reaches it, frequencies on the first freq()/score() in the block,
 * positions on the first positions() in the block.
 * Returns NULL only when out of memory (ctx->err says so).  Damaged input
 * records QR_ECORRUPT in ctx->err and yields an iterator that ends at once
 * or at the damaged block. */
Iter *post_iter_open(IterCtx *ctx, const uint8_t *docs_stream, size_t docs_stream_len,
                     const uint8_t *pos_stream, size_t pos_stream_len, const TermPostings *tp,
                     const PostScorer *scorer, bool want_positions);

/* Bound the doc ids the iterator may yield to [0, n_docs) (a scorer already
 * bounds them by its n_docs): a block holding a larger id is reported as
 * QR_ECORRUPT in the context, so damaged postings never hand out a doc id
 * outside the segment.  Call before the first next/advance/fill. */
void post_iter_set_doc_limit(Iter *it, uint32_t n_docs);

/* True when `it` is a posting iterator from post_iter_open. */
bool post_iter_is(const Iter *it);

/* Batch form: copy up to `cap` next doc ids (the docs next() would return, in
 * order) into out and return how many (at most to the end of one block, so
 * possibly fewer than cap); 0 only at the end.  The iterator is left on the
 * last doc copied, so freq()/score() refer to it.  Faster than a next() loop
 * for counting or bitmap building: it copies whole decoded blocks. */
size_t post_iter_fill(Iter *it, uint32_t *out, size_t cap);

#endif
