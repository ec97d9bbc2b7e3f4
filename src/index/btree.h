/*
 * btree.h — per-segment B+tree indexes over one typed column: value -> rows.
 *
 * Layer: index/.  Calls store/ (column, sfile, base kit), index/iter and
 * CRoaring.  Knows nothing of SQL: query/filter.c turns WHERE clauses into
 * ColPred operands and calls bt_lookup / bt_estimate / bt_iter_open.
 *
 * Model.  A BTree indexes the typed column of one field of one immutable
 * segment (rows 0..n-1 = the segment's local doc ids, deleted docs
 * included: callers mask deletes as they do for postings).  It is built once
 * from the column (bt_write) into a side file "seg-<id>.f<k>.qbt" next to the
 * segment and never changes; the byte format is in docs/format.md
 * ("B-tree side files") and in btree.c's header comment.  Keys are the
 * column's values in the column's order (store/column.h):
 *
 *   INT64, TIMESTAMP  numeric order
 *   FLOAT64           numeric order, -0 = 0, NaN = NaN above every number
 *   BOOL              false < true
 *   KEYWORD           memcmp order of the bytes (COLLATE "C")
 *
 * NULL rows are not keys; they are kept as a separate row set (IS NULL).
 *
 * Predicates are the column store's ColPred with exactly the semantics of
 * col_filter_* (a NULL row matches only IS NULL; int vs float operands are
 * compared exactly; NaN as PostgreSQL; CP_PREFIX on keywords only; operand
 * kinds per column type as in column.h, anything else QR_ETYPE).  So for
 * every predicate p and column c of a segment:
 *
 *   bt_lookup(bt, p) == col_scan(c, p) == brute force over the values.
 *
 * Lifetimes.  bt_open maps the file and holds the mapping until bt_close.
 * A BTree is immutable after bt_open: every function below may be called
 * from many threads at once.  Segments own their BTrees (seg_btree borrows
 * one: valid while the segment is referenced).
 *
 * Errors.  bt_open checks the container (header, section table, every
 * section's CRC-32C: side files are small next to their segment, so one
 * pass at open buys lookups that never see damaged bytes) and the tree's
 * shape (page directory, root, counts); QR_ECORRUPT names the file and the
 * page.  Lookups still bounds-check what they decode and report QR_ECORRUPT
 * rather than read outside the file.
 */
#ifndef QR_BTREE_H
#define QR_BTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <roaring/roaring.h>

#include "index/iter.h"
#include "store/column.h"
#include "store/error.h"

#define BT_FILE_KIND 0x52544251u /* "QBTR" (QR_FOURCC('Q','B','T','R')) */
#define BT_FORMAT_VERSION 1
/* Pages are cut when they reach this many bytes (a page holding one very
 * long keyword may be larger: pages are located through a directory). */
#define BT_PAGE_TARGET 4096u
/* Side-file name suffix: "seg-<id>.f<field>" BT_FILE_SUFFIX. */
#define BT_FILE_SUFFIX ".qbt"

typedef struct BTree BTree;

/* Counters of one or more lookups (every field is ADDED to). */
typedef struct BtStats {
    uint64_t pages_read;   /* inner + leaf pages visited (descents and leaf walks) */
    uint64_t keys_visited; /* leaf entries (distinct values) whose rows were read */
    uint64_t rows_matched; /* rows the lookup produced (before OR into out) */
} BtStats;

/* ---- building ------------------------------------------------------------ */

/* Build the B+tree of column `c` (borrowed; any type) and write it
 * atomically to `path` (tmp + rename; with do_fsync the file and its
 * directory entry are durable on return).  O(rows log rows) time, O(rows)
 * memory.  Errors: QR_EIO, QR_ENOMEM, QR_ELIMIT; `path` is then untouched. */
int bt_write(const Column *c, const char *path, bool do_fsync, QrError *err);

/* ---- reading ------------------------------------------------------------- */

/* Open a side file; name_for_errors (e.g. "seg 7 field price") is copied
 * and used in messages.  Checks everything listed under Errors above:
 * QR_ENOTFOUND (no file), QR_ECORRUPT, QR_EUNSUPPORTED (newer format),
 * QR_ENOMEM.  *out untouched on failure. */
int bt_open(const char *path, const char *name_for_errors, BTree **out, QrError *err);
/* NULL is a no-op. */
void bt_close(BTree *t);

/* Structural check, O(bytes): keys strictly increasing within and across
 * pages, separators equal to their child's first key, subtree counts equal
 * to the rows below, row lists ascending and below bt_rows, every row in at
 * most one key or the NULL set.  QR_ECORRUPT names file and page. */
int bt_verify(const BTree *t, QrError *err);

QrColType bt_type(const BTree *t);
uint32_t bt_rows(const BTree *t);       /* rows of the indexed column (= segment docs) */
uint32_t bt_null_count(const BTree *t); /* NULL rows */
uint64_t bt_n_keys(const BTree *t);     /* distinct non-NULL values */
uint32_t bt_height(const BTree *t);     /* levels, leaves included (1 = root is a leaf; 0 = no keys) */
uint32_t bt_n_pages(const BTree *t);
uint64_t bt_file_bytes(const BTree *t);

/* Every row matching `pred` is ADDED to *out (ascending by nature of the
 * bitmap; ranges are read in value order and materialized, as PostgreSQL's
 * bitmap index scan does).  Cost: one root-to-leaf descent per bound or IN
 * value (height pages) plus the leaf pages and row lists of the matching
 * keys.  stats may be NULL.  Errors: QR_ETYPE (operand kind, PREFIX on a
 * non-keyword column), QR_EINVAL (bad op), QR_ECORRUPT, QR_ENOMEM (out may
 * then hold part of the result). */
int bt_lookup(const BTree *t, const ColPred *pred, roaring_bitmap_t *out, BtStats *stats,
              QrError *err);

/* Exact number of rows matching `pred`, from subtree counts alone: no row
 * list is read (two descents per range, one per IN value).  stats gets the
 * pages touched.  Errors as bt_lookup (*count untouched on failure). */
int bt_count(const BTree *t, const ColPred *pred, uint64_t *count, BtStats *stats, QrError *err);

/* The planner's form of bt_count: the row count, or bt_rows(t) (an upper
 * bound) when the predicate cannot be evaluated (type error, damage). */
uint64_t bt_estimate(const BTree *t, const ColPred *pred);

/* An Iter (index/iter.h) over the rows matching `pred`, for intersecting
 * with text postings: the rows are looked up at open and copied into the
 * query arena (4 bytes a row; the iterator owns nothing else, so close is
 * optional, as combinators never call it); cost() is the exact remaining
 * count, advance gallops.  On error the error is recorded in ctx->err (first
 * wins: over the arena's cap it is the arena's failure) and an empty
 * iterator is returned. */
Iter *bt_iter_open(const BTree *t, IterCtx *ctx, const ColPred *pred, BtStats *stats);

#endif
