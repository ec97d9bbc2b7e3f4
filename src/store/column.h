/*
 * column.h — typed side columns of one immutable segment: writer, zero-copy
 * reader, zone-map-pruned filter scans, random access, batch decode and the
 * statistics a cost planner reads.
 *
 * Layer: store/.  Calls the base kit (error, mem, buf, crc32c) and CRoaring.
 * Knows nothing of iterators: scans produce roaring bitmaps or raw 64-row
 * bit masks that index/ and query/ wrap.  The byte format, encodings and
 * estimators are described in docs/columns.md; column_int.h has the layout.
 *
 * Model.  A column holds one value (or NULL) per document of a segment, rows
 * 0..n-1 in doc order.  Rows are cut into blocks of COL_BLOCK_ROWS; each
 * block carries a zone map (min, max, null count) and its own encoding.
 *
 *   QR_COL_INT64      int64
 *   QR_COL_TIMESTAMP  int64 microseconds since 1970-01-01 00:00:00 UTC
 *   QR_COL_FLOAT64    double; every NaN is stored as the one canonical NaN
 *                     (PostgreSQL order: NaN = NaN, NaN > everything, -0 = 0)
 *   QR_COL_BOOL       false < true
 *   QR_COL_KEYWORD    byte strings, ordered by memcmp (shorter prefix first,
 *                     i.e. COLLATE "C"); dictionary-coded per segment
 *
 * Lifetimes.  colw_finish appends a self-contained blob to a QrBuf; whoever
 * assembles the segment file stores it as a section.  col_open borrows those
 * bytes (typically an mmap view): the bytes must stay mapped and unchanged
 * until col_close, and every pointer a reader hands out (keyword strings,
 * statistics strings) borrows them too — valid only while the segment is
 * pinned.  A Column is immutable after col_open: every read function below
 * may be called from many threads at once.  A ColFilter is immutable after
 * col_filter_new and may likewise be shared by the threads of one scan.
 *
 * Errors.  col_open validates every offset, length and count it will later
 * use (QR_ECORRUPT naming the column and the block), so reads and scans never
 * touch memory outside the blob even on damaged input; damage inside block
 * payloads that open cannot see in O(blocks) yields wrong values, never a
 * crash, and col_verify finds it (per-block CRC-32C).
 */
#ifndef QR_COLUMN_H
#define QR_COLUMN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <roaring/roaring.h>

#include "store/buf.h"
#include "store/error.h"

/* Rows per block; block b holds rows [b*COL_BLOCK_ROWS, (b+1)*COL_BLOCK_ROWS). */
#define COL_BLOCK_ROWS 4096u
/* Blocks per 65,536-row roaring container: scan ranges aligned to this many
 * blocks produce disjoint containers (see col_filter_scan_range). */
#define COL_BLOCKS_PER_CHUNK 16u
/* HyperLogLog precision: 2^12 one-byte registers, ~1.6% standard error. */
#define COL_HLL_BITS 12u
#define COL_HLL_REGS (1u << COL_HLL_BITS)
/* Equi-depth histogram: target bucket count, and the most a column stores
 * (values more frequent than one bucket get singleton buckets). */
#define COL_HIST_TARGET 64u
#define COL_HIST_MAX 128u
/* At most this many rows per column (row ids are uint32). */
#define COL_MAX_ROWS 0xFFFFFFFEu

typedef enum QrColType {
    QR_COL_INT64,
    QR_COL_FLOAT64,
    QR_COL_BOOL,
    QR_COL_TIMESTAMP,
    QR_COL_KEYWORD,
    QR_COL_TYPE_COUNT
} QrColType;

/* "int64", "float64", "bool", "timestamp", "keyword" ("?" if out of range). */
const char *col_type_name(QrColType t);

/* ------------------------------------------------------------------------ */
/* Writer                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct ColWriter ColWriter;

/* New writer for one column of one segment.  NULL on OOM or a bad type. */
ColWriter *colw_new(QrColType t);
/* NULL is a no-op. */
void colw_free(ColWriter *w);

/* Append the next row (rows are appended in doc order: the k-th call makes
 * row k).  Typed: add_int for INT64 and TIMESTAMP, add_float for FLOAT64,
 * add_bool for BOOL, add_str for KEYWORD (bytes copied; any bytes, n may be
 * 0); add_null for any type.  Returns QR_OK, QR_ETYPE (wrong type), QR_ENOMEM
 * or QR_ELIMIT (more than COL_MAX_ROWS rows).  A failed call appends nothing;
 * the first failure is also remembered and reported, with a message, by
 * colw_finish.  Amortized O(1) (add_str: one hash lookup). */
int colw_add_int(ColWriter *w, int64_t v);
int colw_add_float(ColWriter *w, double v);
int colw_add_bool(ColWriter *w, bool v);
int colw_add_str(ColWriter *w, const char *s, size_t n);
int colw_add_null(ColWriter *w);
/* Rows appended so far. */
uint32_t colw_rows(const ColWriter *w);

/* Encode everything appended and APPEND the column blob to `out` (the blob
 * starts at out->len on entry; its internal offsets are relative to that
 * start, so the assembler may place it anywhere).  Cost: O(rows) plus an
 * O(rows) radix sort for the statistics (keyword: O(d log d) for the d
 * distinct values).  Call once; afterwards only colw_free.  Errors: the
 * first add failure, QR_ENOMEM (out->len is then restored). */
int colw_finish(ColWriter *w, QrBuf *out, QrError *err);

/* ------------------------------------------------------------------------ */
/* Reader                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct Column Column;

/* Open a column blob.  Borrows data[0..len) until col_close (see Lifetimes);
 * name_for_errors (e.g. "price" or "seg_0007/price") is copied and used in
 * every message.  O(blocks + metadata bytes): checks the header, the CRC of
 * all metadata, every block's bounds and the statistics.  Errors:
 * QR_ECORRUPT (names column and block), QR_ENOMEM.  NULL on failure. */
Column *col_open(const uint8_t *data, size_t len, const char *name_for_errors, QrError *err);
/* NULL is a no-op.  Does not touch the borrowed bytes. */
void col_close(Column *c);

/* Full integrity check, O(bytes): CRC of every block payload, decoded values
 * inside their zone maps, null counts, keyword codes inside the dictionary,
 * dictionary strictly sorted, sorted flags true.  QR_ECORRUPT names the
 * column and the block. */
int col_verify(const Column *c, QrError *err);

QrColType col_type(const Column *c);
uint32_t col_rows(const Column *c);
uint32_t col_n_blocks(const Column *c);
const char *col_name(const Column *c);

/* A typed value: predicate operands and statistics.  Strings are borrowed. */
typedef enum ColValKind { CV_INT, CV_FLOAT, CV_BOOL, CV_STR } ColValKind;
typedef struct ColVal {
    ColValKind kind;
    union {
        int64_t i;   /* CV_INT: int64, or timestamp microseconds */
        double f;    /* CV_FLOAT */
        bool b;      /* CV_BOOL */
        struct {
            const char *s; /* borrows; need not be NUL-terminated */
            size_t n;
        } str;       /* CV_STR */
    } u;
} ColVal;

static inline ColVal col_val_int(int64_t v) { ColVal x = {.kind = CV_INT, .u.i = v}; return x; }
static inline ColVal col_val_float(double v) { ColVal x = {.kind = CV_FLOAT, .u.f = v}; return x; }
static inline ColVal col_val_bool(bool v) { ColVal x = {.kind = CV_BOOL, .u.b = v}; return x; }
static inline ColVal col_val_str(const char *s, size_t n)
{
    ColVal x = {.kind = CV_STR, .u.str = {s, n}};
    return x;
}

/* "integer", "float", "boolean", "string": an operand kind in messages. */
const char *col_val_kind_name(ColValKind k);
/* Exact comparison of a double (not NaN) with an int64, never through a
 * rounding cast: -1, 0, 1.  Shared by scans and the B-tree. */
int col_cmp_double_int(double d, int64_t i);

/* Per-column statistics of this segment (what the planner reads). */
typedef struct ColStats {
    QrColType type;
    uint32_t rows;
    uint32_t null_count;
    uint32_t n_blocks;
    uint32_t distinct;     /* exact number of distinct non-NULL values
                              (the writer sorts; -0 and 0 count once) */
    double distinct_hll;   /* HyperLogLog estimate of the same number; its
                              registers merge across segments (col_hll_*) */
    bool has_range;        /* false when every row is NULL */
    ColVal min, max;       /* typed as the column (INT for TIMESTAMP); keyword
                              strings borrow the blob */
    bool is_sorted;        /* non-NULL values non-decreasing in row order */
    uint32_t n_buckets;    /* equi-depth histogram buckets (col_hist_bucket) */
} ColStats;
ColStats col_stats(const Column *c);

/* One equi-depth histogram bucket: `count` non-NULL rows whose values lie
 * in [lo, hi], `distinct` different values among them.  Buckets are ordered
 * and disjoint; their counts sum to rows - null_count.  Built for every type
 * (keywords: over dictionary order).  false if i >= n_buckets. */
typedef struct ColHistBucket {
    ColVal lo, hi;
    uint32_t count;
    uint32_t distinct;
} ColHistBucket;
bool col_hist_bucket(const Column *c, uint32_t i, ColHistBucket *b);

/* HyperLogLog registers (COL_HLL_REGS bytes) of the column's distinct
 * values; hashes depend on the value only (never the code or segment), so
 * registers of several segments merge into a table-wide estimate. */
void col_hll_registers(const Column *c, uint8_t regs[COL_HLL_REGS]);
void col_hll_merge(uint8_t dst[COL_HLL_REGS], const uint8_t src[COL_HLL_REGS]);
double col_hll_estimate(const uint8_t regs[COL_HLL_REGS]);

/* Zone map of one block.  false if block >= n_blocks. */
typedef struct ColZone {
    uint32_t first_row, n_rows, null_count;
    bool has_range;            /* false when every row of the block is NULL */
    ColVal min, max;           /* as in ColStats */
    uint32_t min_code, max_code; /* KEYWORD: the dictionary code range */
    uint8_t encoding;          /* 0 const, 1 frame-of-reference, 2 delta */
    uint8_t bit_width;         /* bits per packed offset (0 for const) */
    bool sorted;               /* non-NULL values non-decreasing */
} ColZone;
bool col_block_zone(const Column *c, uint32_t block, ColZone *z);

/* ---- random access (fetch, sort keys, per-row aggregation) -------------- */
/* Each returns false for NULL, for row >= rows, and for a column of another
 * type (get_int serves INT64 and TIMESTAMP).  O(1); a delta-coded block costs
 * up to 63 extra unpacks.  get_str: *s borrows the blob (not NUL-terminated). */
bool col_get_int(const Column *c, uint32_t row, int64_t *v);
bool col_get_float(const Column *c, uint32_t row, double *v);
bool col_get_bool(const Column *c, uint32_t row, bool *v);
bool col_get_str(const Column *c, uint32_t row, const char **s, size_t *n);
/* KEYWORD: the row's dictionary code (codes follow value order, so GROUP BY
 * and ORDER BY may work on codes and look strings up once). */
bool col_get_code(const Column *c, uint32_t row, uint32_t *code);
/* KEYWORD dictionary: number of distinct values, and the value of a code. */
uint32_t col_dict_size(const Column *c);
bool col_dict_get(const Column *c, uint32_t code, const char **s, size_t *n);

/* ---- batch decode (vectorized aggregation reads whole blocks) ----------- */
/* Decode blocks [first_block, first_block + n_blocks) (clamped to the
 * column) into caller arrays: range row r (= row - first_block *
 * COL_BLOCK_ROWS) goes to vals[r], NULL rows get 0 / 0.0 / false / 0 and
 * bit r%64 of null_words[r/64] set.  null_words may be NULL; otherwise all
 * ceil(rows/64) words are written.  Returns the rows written, 0 for an empty
 * range or a column of another type.  Cost O(rows), no allocation. */
uint32_t col_read_int(const Column *c, uint32_t first_block, uint32_t n_blocks,
                      int64_t *vals, uint64_t *null_words);
uint32_t col_read_float(const Column *c, uint32_t first_block, uint32_t n_blocks,
                        double *vals, uint64_t *null_words);
uint32_t col_read_bool(const Column *c, uint32_t first_block, uint32_t n_blocks,
                       uint8_t *vals, uint64_t *null_words);
uint32_t col_read_code(const Column *c, uint32_t first_block, uint32_t n_blocks,
                       uint32_t *codes, uint64_t *null_words);

/* ------------------------------------------------------------------------ */
/* Predicates, scans, selectivity                                            */
/* ------------------------------------------------------------------------ */

typedef enum ColPredOp {
    CP_EQ, CP_NE, CP_LT, CP_LE, CP_GT, CP_GE,
    CP_BETWEEN,     /* lo <= x AND x <= hi (empty when hi < lo) */
    CP_IN,          /* x equals one of set[0..n_set); empty set matches nothing */
    CP_IS_NULL, CP_IS_NOT_NULL,
    CP_PREFIX       /* KEYWORD only: x starts with the bytes of v */
} ColPredOp;

/* `x op v`.  SQL semantics: a NULL row matches only IS NULL (CP_NE and every
 * comparison exclude NULLs).  Operand kinds per column type: INT64 and
 * TIMESTAMP take CV_INT or CV_FLOAT, FLOAT64 takes CV_INT or CV_FLOAT (int vs
 * float comparisons are exact, never through a rounding cast: x > 2.5 on an
 * int column is x >= 3, and 2^53+1 on a float column matches nothing), BOOL
 * takes CV_BOOL, KEYWORD takes CV_STR; anything else is QR_ETYPE.  NaN
 * operands follow PostgreSQL: NaN equals NaN and is above every number. */
typedef struct ColPred {
    ColPredOp op;
    ColVal v;            /* operand; BETWEEN: lo; PREFIX: the prefix */
    ColVal hi;           /* BETWEEN: hi (inclusive) */
    const ColVal *set;   /* IN: borrows n_set values (any order, duplicates ok) */
    size_t n_set;
} ColPred;

/* Counters of one or more scans (every field is ADDED to). */
typedef struct ColScanStats {
    uint64_t blocks_total;   /* blocks in the scanned range */
    uint64_t blocks_skipped; /* not read: zone map proved no row matches, or
                                no candidate falls in the block */
    uint64_t blocks_full;    /* not decoded: zone map proved that every
                                non-NULL row matches (only the null bitmap read) */
    uint64_t blocks_scanned; /* values compared in the encoded domain, or
                                binary-searched when the block is sorted */
    uint64_t rows_matched;   /* bits this scan produced (after `candidates`) */
} ColScanStats;

/* A predicate compiled for one column: operands translated to ranges of the
 * column's order-preserving keys (keyword strings to dictionary codes), so
 * match/scan/estimate never look at strings again.  Borrows the Column. */
typedef struct ColFilter ColFilter;

/* Compile.  O(k log k) for k IN values (keywords: + k log d dictionary
 * searches).  Errors: QR_ETYPE (operand kind or PREFIX on a non-keyword
 * column), QR_EINVAL (bad op), QR_ENOMEM.  *out untouched on failure. */
int col_filter_new(const Column *c, const ColPred *pred, ColFilter **out, QrError *err);
void col_filter_free(ColFilter *f); /* NULL is a no-op */

/* Does row match?  false for row >= rows.  O(1) + O(log k). */
bool col_filter_match(const ColFilter *f, uint32_t row);

/* Scan blocks [first_block, first_block + n_blocks) (clamped): every
 * matching row — restricted to `candidates` when that is not NULL — is
 * ADDED to *out.  Blocks the zone maps rule out are never read; with
 * candidates, blocks holding no candidate are not read either.  Errors:
 * QR_ENOMEM (out may then hold part of the result).  stats may be NULL.
 *
 * Parallelism: the caller splits.  A ColFilter and a Column are read-only,
 * so threads may scan disjoint block ranges into their own bitmaps and OR
 * them; ranges that start at multiples of COL_BLOCKS_PER_CHUNK give disjoint
 * roaring containers (cheapest OR).  No threads are created here. */
int col_filter_scan_range(const ColFilter *f, uint32_t first_block, uint32_t n_blocks,
                          const roaring_bitmap_t *candidates, roaring_bitmap_t *out,
                          ColScanStats *stats, QrError *err);
/* The whole column. */
int col_filter_scan(const ColFilter *f, const roaring_bitmap_t *candidates,
                    roaring_bitmap_t *out, ColScanStats *stats, QrError *err);

/* The scan primitive without roaring: bit r%64 of words[r/64] is set iff
 * range row r (relative to first_block * COL_BLOCK_ROWS) matches.  Writes all
 * ceil(rows/64) words; returns the rows covered (0 if first_block is out of
 * range).  Its only allocation is one ~16 KiB scratch; if that fails it
 * returns UINT32_MAX (out of memory) and writes nothing. */
uint32_t col_filter_scan_words(const ColFilter *f, uint32_t first_block, uint32_t n_blocks,
                               uint64_t *words, ColScanStats *stats);

/* What a scan would do, from the zone maps alone (no block read): fills
 * blocks_total / skipped / full / scanned.  O(blocks log k). For EXPLAIN and
 * the cost model. */
void col_filter_zone_plan(const ColFilter *f, ColScanStats *stats);

/* Estimated fraction of ALL rows (NULLs included) that match, in [0, 1]:
 * histogram buckets (uniform within a bucket, count/distinct for points),
 * null count, capped by the rows of blocks the zone maps keep. O(buckets*k +
 * blocks log k). */
double col_filter_selectivity(const ColFilter *f);

/* Convenience forms that compile, run and free a filter.  col_match_row
 * compiles per call (string searches, allocation): loops should keep a
 * ColFilter instead.  col_match_row and col_estimate_selectivity cannot
 * report errors: a predicate that does not compile matches nothing and
 * estimates 1.0. */
int col_scan(const Column *c, const ColPred *pred, const roaring_bitmap_t *candidates,
             roaring_bitmap_t *out, ColScanStats *stats, QrError *err);
bool col_match_row(const Column *c, const ColPred *pred, uint32_t row);
double col_estimate_selectivity(const Column *c, const ColPred *pred);

#endif
