/*
 * filter.h — structured filters over a table's typed columns: the
 * expression tree, constructors (for the SQL binder, which never goes
 * through text), the SQL-WHERE text parser, and evaluation per segment by
 * one of three access paths chosen by cost.
 *
 * Layer: query/.  Calls store/column.h (ColPred, ColFilter, statistics),
 * index/segment.h (columns of a segment) and, once present, the B-tree of
 * index/.  Used by search.c, the SQL planner and, through QrSearchReq text,
 * the server.
 *
 * Tree.  A QrFilter node is TRUE, FALSE, AND/OR of n >= 1 children, NOT of
 * one child, a column predicate (field index + ColPred, operands OWNED by
 * the node: strings and IN sets are copied at construction), or a LIKE with
 * a general pattern (evaluated row by row; 'abc%' becomes CP_PREFIX).
 * Nodes are qr_malloc'd and owned by their parent; qr_filter_free(root)
 * frees the tree.  A tree is immutable once built and may be shared by the
 * threads of one query.
 *
 * Semantics: SQL three-valued logic.  A predicate on a NULL value is
 * UNKNOWN; a row matches when the whole expression is TRUE, so NOT (x = 1)
 * matches neither x = 1 nor x IS NULL.  A field that a segment has no
 * column for (added after the segment was written) reads as NULL there.
 * Deleted documents never match.
 *
 * Multi-valued keyword fields (schema "multi": true) hold a list per row:
 * `tags = 'x'` and `tags IN (...)` match a row whose list holds one of the
 * values, `tags <> 'x'` one whose list does not (an empty list included),
 * IS NULL a row without a list; other operators and LIKE are refused.
 *
 * Operand kinds per column type are those of ColPred (store/column.h):
 * int64/timestamp take CV_INT or CV_FLOAT, float64 CV_INT or CV_FLOAT, bool
 * CV_BOOL, keyword CV_STR.  qr_filter_check validates a tree against a
 * schema; the text parser coerces literals by the column type (an ISO 8601
 * string against a timestamp column becomes microseconds; a number against a
 * timestamp column is microseconds since the epoch).
 *
 * Text syntax (docs/query-language.md, "Filters"):
 *   expr   := or ; or := and (OR and)* ; and := not (AND not)*
 *   not    := NOT not | '(' expr ')' | TRUE | FALSE | pred | field
 *   pred   := field (= | != | <> | < | <= | > | >=) lit
 *           | field [NOT] BETWEEN lit AND lit | field [NOT] IN '(' lit, ... ')'
 *           | field IS [NOT] NULL | field [NOT] LIKE 'pattern'
 *   lit    := number | 'string' (doubled '' escapes a quote) | TRUE | FALSE
 * A bare boolean field means field = TRUE.  Keywords are case-insensitive;
 * field names may be "double quoted".  Errors: QR_ESYNTAX with the byte
 * offset (QrError.offset) of the offending token, QR_ENOTFOUND for an
 * unknown field, QR_ETYPE for a field without a column or a literal of the
 * wrong kind (both with the offset too).
 */
#ifndef QR_FILTER_H
#define QR_FILTER_H

#include <roaring/roaring.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/buf.h"
#include "store/column.h"
#include "store/error.h"
#include "store/schema.h"

/* ------------------------------------------------------------------------ */
/* Tree and constructors                                                     */
/* ------------------------------------------------------------------------ */

typedef enum QrFilterKind {
    QF_TRUE,
    QF_FALSE,
    QF_AND,  /* kids[0..n_kids), n_kids >= 1 */
    QF_OR,   /* kids[0..n_kids), n_kids >= 1 */
    QF_NOT,  /* kids[0] */
    QF_PRED, /* field op operand(s) */
    QF_LIKE  /* field LIKE pattern (% any run, _ one byte), row by row */
} QrFilterKind;

typedef struct QrFilter QrFilter;
struct QrFilter {
    QrFilterKind kind;
    QrFilter **kids;  /* owns each child and the array (AND, OR, NOT) */
    int n_kids;
    int field;        /* QF_PRED, QF_LIKE: schema field index */
    ColPred pred;     /* QF_PRED: operands owned (pred.set and CV_STR bytes) */
    char *pattern;    /* QF_LIKE: owns, NUL-terminated; pattern_len bytes */
    size_t pattern_len;
    int32_t pos;      /* byte offset in the source text, -1 when built by API */
    bool multi;       /* QF_PRED on a multi-valued keyword field (schema "multi"): =, <>
                         and IN match when an element of the list does (set by the
                         parser from the schema) */
};

/* Leaves.  Each returns a new node or NULL on OOM. */
QrFilter *qr_filter_true(void);
QrFilter *qr_filter_false(void);
/* Copies pred, its string bytes and its IN set (the caller keeps its own). */
QrFilter *qr_filter_pred(int field, const ColPred *pred);
/* `field LIKE pattern`: 'abc%' (no other wildcard, no escape) becomes a
 * CP_PREFIX predicate, a pattern without wildcards CP_EQ; anything else a
 * QF_LIKE node.  Pattern bytes are copied. */
QrFilter *qr_filter_like(int field, const char *pattern, size_t len);

/* Combinators TAKE ownership of their arguments, also on failure (then they
 * free them and return NULL), so calls may nest:
 * qr_filter_and(qr_filter_pred(...), qr_filter_not(qr_filter_pred(...))).
 * A NULL argument (an inner failure) makes the result NULL. */
QrFilter *qr_filter_and(QrFilter *a, QrFilter *b);
QrFilter *qr_filter_or(QrFilter *a, QrFilter *b);
QrFilter *qr_filter_not(QrFilter *a);
/* n-ary: takes ownership of kids[0..n) (the array itself stays the
 * caller's); n == 0 gives TRUE for AND and FALSE for OR. */
QrFilter *qr_filter_and_n(QrFilter **kids, int n);
QrFilter *qr_filter_or_n(QrFilter **kids, int n);

/* NULL is a no-op. */
void qr_filter_free(QrFilter *f);
/* Deep copy; NULL on OOM. */
QrFilter *qr_filter_clone(const QrFilter *f);

/* Check a tree against a schema: every field exists and has a column,
 * every operand kind fits its column type, PREFIX/LIKE only on keyword
 * columns.  Errors: QR_ENOTFOUND / QR_ETYPE naming the field (with the
 * node's pos as offset when it has one). */
int qr_filter_check(const QrFilter *f, const QrSchema *schema, QrError *err);

/* Column type of a field, or -1 when the field has no column (text fields
 * without "column": true). */
int qr_filter_field_coltype(const QrSchema *schema, int field);

/* Parse the SQL-WHERE subset above into a checked tree.  `text` need not be
 * NUL-terminated.  An empty text (or only spaces) is QR_ESYNTAX.  *out
 * untouched on failure. */
int qr_filter_parse(const QrSchema *schema, const char *text, size_t len, QrFilter **out,
                    QrError *err);

/* Print a tree back as filter text (parseable again; used by EXPLAIN and in
 * tests).  Appends to out.  QR_ENOMEM only. */
int qr_filter_to_text(const QrFilter *f, const QrSchema *schema, QrBuf *out);

/* ------------------------------------------------------------------------ */
/* Evaluation per segment                                                    */
/* ------------------------------------------------------------------------ */

/* How a segment's matching doc ids are produced.  AUTO picks by cost. */
typedef enum QrAccessPath {
    QR_ACCESS_AUTO = 0,
    QR_ACCESS_SCAN,  /* zone-map-pruned column scans into bitmaps (parallel
                        over block ranges on large segments) */
    QR_ACCESS_CHECK, /* test candidate rows one by one (needs candidates;
                        without them it checks every live row) */
    QR_ACCESS_BTREE  /* B-tree lookups for the predicates that have one
                        (scan for the others) */
} QrAccessPath;

/* "auto", "scan", "check", "btree" <-> enum; parse returns -1 when unknown. */
const char *qr_access_path_name(QrAccessPath p);
int qr_access_path_parse(const char *name);

/* Counters for EXPLAIN (every field is ADDED to). */
typedef struct QrFilterStats {
    uint64_t blocks_total, blocks_skipped, blocks_full, blocks_scanned; /* column scans */
    uint64_t btree_pages;        /* B-tree pages read */
    uint64_t candidates_checked; /* rows tested one by one */
    uint64_t rows_matched;       /* doc ids produced (deleted excluded) */
    uint32_t segs_scan, segs_check, segs_btree; /* path chosen, per segment */
    uint32_t segs_pruned;        /* segments ruled out without reading a block */
} QrFilterStats;

struct Segment;

/* A filter compiled for one segment: ColFilters per predicate (keyword
 * operands resolved to dictionary codes), statistics read.  Borrows the
 * tree and the segment (which must stay pinned).  Immutable after compile:
 * filter_seg_match may be called from many threads. */
typedef struct FilterSeg FilterSeg;

/* Compile.  Errors: QR_ETYPE (operand kind vs this segment's column),
 * QR_ENOMEM.  O(predicates * (log dictionary + IN size)). */
int filter_seg_compile(const QrFilter *f, const struct Segment *seg, FilterSeg **out,
                       QrError *err);
void filter_seg_free(FilterSeg *fs); /* NULL is a no-op */

/* Estimated fraction of the segment's rows that match, in [0, 1] (column
 * statistics and zone maps; independence between predicates). */
double filter_seg_selectivity(const FilterSeg *fs);

/* Does row match?  (Deletes are not looked at.)  O(predicates). */
bool filter_seg_match(const FilterSeg *fs, uint32_t row);

/* The path AUTO would take for this segment given `n_candidates` candidate
 * rows (UINT64_MAX = no candidates, i.e. every row). */
QrAccessPath filter_seg_choose(const FilterSeg *fs, uint64_t n_candidates);

/* ADD to *out every row of the segment that matches, is not in `dels` (may
 * be NULL) and, when `candidates` is not NULL, is in candidates.  `path`
 * forces the access path (AUTO chooses; BTREE falls back to SCAN for
 * predicates without a B-tree).  Errors: QR_ENOMEM. */
int filter_seg_eval(const FilterSeg *fs, QrAccessPath path, const roaring_bitmap_t *dels,
                    const roaring_bitmap_t *candidates, roaring_bitmap_t *out,
                    QrFilterStats *st, QrError *err);

/* When the filter is (after compilation) one predicate whose column has a
 * B-tree in this segment, or an AND of ranges on one such integer or
 * timestamp column, count its rows from the tree's subtree counts
 * alone (no row list is read): true and *count set.  Deletes are NOT
 * subtracted (callers use it on segments without deletes).  false: this
 * shape cannot be counted so (the caller evaluates the rows instead). */
bool filter_seg_btree_count(const FilterSeg *fs, uint64_t *count, QrFilterStats *st);

/* Column scans of at least this many blocks are split over the cores
 * (default 1024 blocks, ~4M rows).  For tests and benchmarks; 0 means 1. */
void filter_set_parallel_min_blocks(uint32_t n_blocks);

#endif
