/*
 * iter_bitmap.h — iterators over roaring bitmaps: a materialized doc set
 * (B-tree ranges, column scans, expanded prefixes) and "every doc except the
 * deleted ones".
 *
 * Layer: index/.  Calls iter.h and CRoaring.
 */
#ifndef QR_ITER_BITMAP_H
#define QR_ITER_BITMAP_H

#include <roaring/roaring.h>

#include "index/iter.h"

/* Docs of `bm` (borrowed: must outlive the iterator).  Arena-allocated.
 * cost = cardinality. */
Iter *iter_bitmap_new(IterCtx *ctx, const roaring_bitmap_t *bm);
/* Docs in [0, n_docs) not in `dels` (borrowed, may be NULL). */
Iter *iter_live_new(IterCtx *ctx, DocId n_docs, const roaring_bitmap_t *dels);

#endif
