/*
 * facets.h — private to query/: facets of a search (QrSearchReq.facets),
 * summaries of every match computed from the columns a segment at a time.
 * Terms of keywords group by dictionary codes and stats aggregate column
 * blocks through colwalk.h, the code SQL's GROUP BY over a keyword and its
 * sums use; the other kinds read candidate rows a block at a time there.
 *
 * Layer: query/.  Calls colwalk.h, index/segment.h, the base kit.
 *
 * Lifetime: a FacetRun borrows the requests and the schema; keyword strings
 * it keeps borrow the segments added (the caller's pinned snapshot) or the
 * arena.  Results live in the arena.  Errors through err (QR_EINVAL /
 * QR_ETYPE / QR_ENOTFOUND from facets_check, QR_ENOMEM).
 */
#ifndef QR_FACETS_H
#define QR_FACETS_H

#include <roaring/roaring.h>

#include "query/quarry.h"

struct Segment;
typedef struct FacetRun FacetRun;

/* Check requests against the schema: the field exists and has a column of a
 * type the kind takes, sizes, intervals, percents and ranges in bounds. */
int facets_check(const QrSchema *schema, const QrFacetReq *reqs, int n, QrError *err);
/* A run over reqs[0..n) (checked).  Errors: QR_ENOMEM. */
int facets_new(const QrSchema *schema, const QrFacetReq *reqs, int n, QrArena *arena,
               FacetRun **out, QrError *err);
/* Count the rows of bm (live matches of seg). */
int facets_add(FacetRun *r, const struct Segment *seg, const roaring_bitmap_t *bm, QrError *err);
/* The results, one per request in order, into the arena. */
int facets_finish(FacetRun *r, QrFacetRes **out, QrError *err);
/* NULL is a no-op. */
void facets_free(FacetRun *r);

#endif
