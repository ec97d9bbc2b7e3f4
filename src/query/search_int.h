/*
 * search_int.h — private to query/: a text query compiled against a
 * snapshot the caller pinned, handed out per segment.  qr_search (search.c)
 * and SQL's text scan (sql_scan.c, sql_text.c) are both built on it, so the
 * analysis, expansion, BM25 statistics, strategies and snippets of the two
 * front doors are one code.
 *
 * Lifetime and ownership: a Search borrows the table, the snapshot and the
 * arena it was opened with; iterators, hits and strings come from that
 * arena and are valid while the snapshot stays pinned and the arena lives.
 * search_close gives back what lives outside the arena (the pooled
 * analyzers, expansion bitmaps).  One thread at a time.
 *
 * Errors: search_open reports through err.  Per-segment calls record the
 * first error (I/O, corruption, cancellation, deadline, memory cap) in the
 * Search's IterCtx (search_ctx) and return nothing more for it; callers
 * check the context once per segment.
 */
#ifndef QR_SEARCH_INT_H
#define QR_SEARCH_INT_H

#include <roaring/roaring.h>
#include <stdbool.h>
#include <stdint.h>

#include "index/iter.h"
#include "query/filter.h"
#include "query/query_int.h"
#include "query/topk.h"

typedef struct Search Search;

/* Compile req->q[0, q_len) against snap (segments, deletes and the BM25
 * statistics of that snapshot): parsed once with qparse, analyzed, prefix
 * and fuzzy terms expanded, the strategy chosen (search_strategy).  Read of
 * req: q, fields, default_and, max_expansions, exhaustive, hl_pre / hl_post,
 * cancel; it is copied.  The deadline is set on search_ctx(s) afterwards.
 * Errors: QR_ESYNTAX (with the position), QR_EINVAL (an unknown field, no
 * full-text field), QR_ELIMIT (arena cap, a phrase too long), QR_ENOMEM. */
int search_open(QrTable *t, Snapshot *snap, QrArena *arena, const QrSearchReq *req, Search **out,
                QrError *err);
/* Give back the analyzers and expansion bitmaps; NULL is a no-op.  The
 * arena's memory stays the caller's. */
void search_close(Search *s);
/* The query context: first error, deadline, cancel flag. */
IterCtx *search_ctx(Search *s);
/* "wand", "and" or "exhaustive": how search_seg_topk ranks. */
const char *search_strategy(const Search *s);
/* The warning of the database's stats source when it answered with some
 * nodes' statistics missing (as configured), else NULL; set once scoring
 * began (quarry.h QrStatsSource). */
const char *search_stats_warning(const Search *s);
/* Posting blocks decoded and skipped so far by every iterator opened. */
void search_stats(const Search *s, uint64_t *decoded, uint64_t *skipped);

/* The iterator tree of segment si (deleted docs included), scoring or not;
 * NULL when nothing can match there (or on error). */
Iter *search_seg_iter(Search *s, int si, bool scoring);

/* Live matches of one segment in doc order, a run at a time. */
typedef struct SearchCursor {
    Iter *it;                     /* NULL: no match in the segment */
    const roaring_bitmap_t *dels; /* batch form: deleted docs still to skip */
    bool batch;                   /* one plain posting list, unscored: whole blocks */
    bool scoring;
} SearchCursor;
/* Position c before the first live match of segment si; with filter (live
 * docs only, deletes removed), only docs of the filter. */
void search_seg_cursor(Search *s, int si, bool scoring, const roaring_bitmap_t *filter,
                       SearchCursor *c);
/* The next live matches (at most cap) into docs and, when scoring, their
 * BM25 scores (bit for bit search_seg_topk's) into scores; 0 at the end. */
size_t search_cursor_next(SearchCursor *c, uint32_t *docs, float *scores, size_t cap);

/* Exact count of segment si's live matches (within filter when not NULL:
 * live docs only).  Postings only, no scoring. */
uint64_t search_seg_count(Search *s, int si, const roaring_bitmap_t *filter);
/* Offer segment si's best live matches (within filter, when not NULL) to
 * tk, shared by every segment so the threshold prunes later ones: block-max
 * WAND for a disjunction of terms, block-max conjunction for a conjunction
 * of terms, else every match scored (search_strategy).  Returns the
 * context's code. */
int search_seg_topk(Search *s, int si, const roaring_bitmap_t *filter, TopK *tk);
/* The live docs of segment si that pass filter f, into out (empty on
 * entry).  path (QrAccessPath) QR_ACCESS_AUTO lets the filter engine choose
 * per segment; when checking the text matches is cheapest they are
 * materialized first and out is then text ∩ filter.  Adds to *st. */
int search_seg_filter(Search *s, int si, const QrFilter *f, int path, roaring_bitmap_t *out,
                      QrFilterStats *st);

/* One scored term of a compiled query (EXPLAIN (SCORES)). */
typedef struct SearchTerm {
    const char *text;         /* the analyzed term (arena) */
    uint32_t len;
    int field;                /* field index, QR_ALL_FIELD, or -1: BM25F over the search's
                                 fields (search_fields) */
    const char *source;       /* why it is in the query: "query", "synonym", "typo",
                                 "prefix" */
    float weight;             /* field weight (not for BM25F) times every boost above it */
    float idf, avgdl;
    uint64_t df;              /* BM25F: the largest of the fields' */
} SearchTerm;
/* The terms that score, each (field, text) once, in query order: terms
 * under NOT and constant-score expansions are left out.  Arena memory. */
int search_terms(Search *s, const SearchTerm **out, int *n);
/* The fields words without a field are searched in, with their weights
 * (the BM25F fields when a term's field is -1). */
int search_fields(const Search *s, const int **fields, const float **weights);
/* Term t in doc `local` of segment si: false when the doc lacks it; else
 * its tf (BM25F: summed over the fields), the doc's length (BM25F: the
 * weighted combined length, rounded) and its score, as ranking computes
 * it. */
bool search_term_doc(Search *s, const SearchTerm *t, int si, uint32_t local, uint32_t *tf,
                     uint32_t *len, float *score);

/* Snippets after the Search is closed: its highlight terms, copied. */
typedef struct SearchHl SearchHl;
/* The highlight terms into `keep` (an arena outliving the Search); NULL
 * with the context's error set when over its cap. */
SearchHl *search_hl(Search *s, QrArena *keep);
/* A passage of texts[0..n) (values of fields[0..n), analyzed as each
 * field is) around the most matched query terms, terms marked with
 * pre / post (NULL: <b> </b>); any_field: a term matches in whatever field
 * it was searched in.  The first text with a match gives it; without one,
 * the first 200 bytes of the first text; NULL when n is 0.  Into arena.
 * Analyzers come from t's pool for the call.  Errors: QR_ENOMEM. */
int search_hl_snippet(QrTable *t, const SearchHl *hl, bool any_field, const char *pre,
                      const char *post, const int *fields, const char *const *texts,
                      const size_t *lens, int n, QrArena *arena, char **out, QrError *err);

#endif
