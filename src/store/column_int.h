/*
 * column_int.h — private to the column_*.c files: the blob layout, the
 * in-memory reader structs and the helpers the files share.  Sectioned per
 * file.  docs/columns.md is the long form of the format below.
 *
 * Layer: store/.
 *
 * Keys.  Every value is mapped to an order-preserving uint64 "key" so that
 * zone maps, encodings, scans and histograms work on one unsigned domain:
 *   INT64, TIMESTAMP   key = (uint64)v ^ 2^63
 *   FLOAT64            bits with NaN canonical (0x7ff8000000000000);
 *                      key = sign ? ~bits : bits | 2^63  (-0 and +0 are two
 *                      adjacent keys; NaN is the largest key ever stored)
 *   BOOL               0 / 1
 *   KEYWORD            dictionary code (dictionary sorted by memcmp)
 *
 * Blob (all integers little-endian, sections 8-byte aligned, in this order):
 *
 *   +0    header, COL_HDR_LEN bytes
 *          0 u32 magic "QCOL"      4 u16 version (1)   6 u8 type   7 u8 flags
 *          8 u32 n_rows           12 u32 n_blocks     16 u32 null_count
 *         20 u32 block_rows (4096) 24 u64 min_key     32 u64 max_key
 *         40 u64 stats_off  48 u64 stats_len  56 u64 dict_off  64 u64 dict_len
 *         72 u64 dir_off    80 u64 dir_len    88 u64 data_off  96 u64 data_len
 *        104 u32 meta_crc (CRC-32C of header bytes [0,104), then the stats,
 *            dict and dir sections)        108 u32 reserved (0)
 *   stats  0 u32 distinct  4 u32 n_buckets  8 u8 hll_bits  9 u8 hll_form
 *         10 u16 0  12 u32 hll_len  16 buckets n x {u64 lo_key, u64 hi_key,
 *            u32 count, u32 distinct}, then HLL: dense (4096 bytes) or sparse
 *            (n x {u16 register, u8 value}, registers ascending)
 *   dict   (KEYWORD only, else empty) 0 u32 n_values  4 u8 offset_bits
 *          5..7 0  8 u64 bytes_len  16 packed offsets (n_values + 1 entries of
 *          offset_bits, + 8 slack bytes)  then the concatenated value bytes
 *   dir    n_blocks x 40-byte entries:
 *          0 u64 min_key  8 u64 max_key  16 u64 data_off (in data section)
 *         24 u32 data_len 28 u16 null_count 30 u8 enc 31 u8 width
 *         32 u8 flags (bit0 sorted) 33 u8 delta_width 34 u16 0
 *         36 u32 CRC-32C of the block data
 *   data   per block: [null bitmap, 8*ceil(rows/64) bytes, iff 0 < nulls <
 *          rows][payload]
 *          CONST  nothing (value = min_key; an all-NULL block is CONST 0)
 *          FOR    offsets key-min_key, bit-packed at `width` bits, LSB-first,
 *                 ceil(rows/64)*64 entries, + 8 slack bytes
 *          DELTA  u64 delta_base; 64 checkpoint offsets (key-min_key of rows
 *                 0,64,128,..) at `width` bits; ceil(rows/64)*64 entries of
 *                 (key[i]-key[i-1]-delta_base) at delta_width bits (0 at
 *                 i%64 == 0); + 8 slack bytes
 *          NULL rows hold the previous non-NULL key of the block (the first
 *          non-NULL one for leading NULLs), so sorted blocks stay sorted.
 *
 * Invariants col_open checks: exact section bounds and order, data section
 * ends the blob, dir_len = 40*n_blocks, n_blocks = ceil(n_rows/4096), each
 * block's data inside the data section with exactly the length its encoding
 * implies, widths <= 64 and width = bits(max-min), min <= max inside the
 * column range, null counts summing to the header's, histogram ordered with
 * counts summing to the non-NULL rows.
 */
#ifndef QR_COLUMN_INT_H
#define QR_COLUMN_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "store/column.h"

#define COL_MAGIC 0x4C4F4351u /* "QCOL" little-endian */
#define COL_VERSION 1u
#define COL_HDR_LEN 112u
#define COL_DIR_ENTRY_LEN 40u
#define COL_STATS_FIXED 16u
#define COL_BUCKET_LEN 24u
#define COL_DICT_FIXED 16u
#define COL_SLACK 8u
#define COL_GROUPS_PER_BLOCK (COL_BLOCK_ROWS / 64u)
#define COL_SIGN 0x8000000000000000ull
#define COL_NAN_BITS 0x7FF8000000000000ull

enum { COL_ENC_CONST = 0, COL_ENC_FOR = 1, COL_ENC_DELTA = 2 };
enum { COL_BLK_SORTED = 1 };
enum { COL_HDR_SORTED = 1 };
enum { COL_HLL_DENSE = 0, COL_HLL_SPARSE = 1 };

/* One block as col_open decoded it.  Every pointer borrows the blob and was
 * bounds-checked against the lengths its encoding implies. */
typedef struct ColBlock {
    uint64_t min, max;      /* zone map keys (0,0 when all NULL) */
    uint64_t dbase;         /* DELTA: added to every packed delta */
    const uint8_t *nulls;   /* borrows: null bitmap, NULL when no bitmap */
    const uint8_t *payload; /* borrows: encoding payload */
    const uint8_t *deltas;  /* borrows: DELTA packed deltas */
    const uint8_t *data;    /* borrows: whole block data (for the CRC) */
    uint32_t data_len;
    uint32_t crc;
    uint16_t rows;          /* 1..COL_BLOCK_ROWS */
    uint16_t null_count;
    uint8_t enc, width, dwidth, flags;
} ColBlock;

struct Column {
    const uint8_t *data;  /* borrows the blob */
    size_t len;
    uint64_t data_off;    /* where the block data section starts */
    char name[96];        /* for messages */
    QrColType type;
    uint8_t flags;        /* COL_HDR_* */
    uint32_t n_rows, n_blocks, null_count;
    uint64_t min_key, max_key;
    ColBlock *blocks;     /* owns: n_blocks entries */
    uint32_t distinct;
    uint32_t n_buckets;
    const uint8_t *buckets; /* borrows: n_buckets x COL_BUCKET_LEN */
    uint8_t *hll;         /* owns: COL_HLL_REGS registers */
    double hll_estimate;  /* col_hll_estimate(hll), computed once at open:
                             col_stats runs per filter leaf per query */
    uint32_t n_dict;      /* KEYWORD */
    uint8_t dict_bits;
    const uint8_t *dict_offs;  /* borrows: packed offsets */
    const uint8_t *dict_bytes; /* borrows */
    uint64_t dict_bytes_len;
};

/* ---- keys (all files) --------------------------------------------------- */

static inline uint64_t col_key_from_int(int64_t v) { return (uint64_t)v ^ COL_SIGN; }
static inline int64_t col_int_from_key(uint64_t k) { return (int64_t)(k ^ COL_SIGN); }
static inline uint64_t col_key_from_double(double d)
{
    uint64_t b;
    if (d != d)
        b = COL_NAN_BITS;
    else
        memcpy(&b, &d, 8);
    return (b & COL_SIGN) ? ~b : (b | COL_SIGN);
}
static inline double col_double_from_key(uint64_t k)
{
    uint64_t b = (k & COL_SIGN) ? (k ^ COL_SIGN) : ~k;
    double d;
    memcpy(&d, &b, 8);
    return d;
}
/* Bits needed for values 0..range (0 for range 0). */
static inline unsigned col_bits(uint64_t range) { return range ? 64u - (unsigned)__builtin_clzll(range) : 0u; }
static inline uint64_t col_ld64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t col_groups(uint32_t rows) { return (rows + 63u) / 64u; }
/* Key of a typed value stored in a column of type t (stats, zones). */
ColVal col_val_from_key(const Column *c, uint64_t key);

/* ---- column_pack.c: bit packing, sorting, hashing ----------------------- */

/* Pack n values of w bits (each < 2^w) LSB-first into out, which must hold
 * ceil(n*w/8) + COL_SLACK zeroed bytes. */
void col_bp_pack(const uint64_t *vals, size_t n, unsigned w, uint8_t *out);
/* Value i of a packed stream of w-bit values (needs the 8 slack bytes). */
static inline uint64_t col_bp_get(const uint8_t *in, unsigned w, uint64_t i)
{
    if (w == 0)
        return 0;
    uint64_t o = i * w;
    unsigned s = (unsigned)(o & 7);
    uint64_t x = col_ld64(in + (o >> 3)) >> s;
    if (w + s > 64)
        x |= (uint64_t)in[(o >> 3) + 8] << (64 - s);
    return w == 64 ? x : (x & ((1ull << w) - 1));
}
/* Unpack the 64 values of group g (at byte 8*w*g) of a packed stream.
 * col_unpack32 for w <= 32, col_unpack64 for any w <= 64.  Straight-line
 * code per width (no loop, no branch). */
typedef void (*ColUnpack32)(const uint8_t *in, uint32_t *out);
typedef void (*ColUnpack64)(const uint8_t *in, uint64_t *out);
extern const ColUnpack32 col_unpack32[33];
extern const ColUnpack64 col_unpack64[65];
/* Ascending LSD radix sort of a[0..n) (tmp: n scratch words); skips byte
 * positions where every key agrees. */
void col_sort_u64(uint64_t *a, uint64_t *tmp, size_t n);
/* 64-bit hashes (value-only: stable across segments and versions). */
uint64_t col_hash_bytes(const void *p, size_t n);
uint64_t col_hash_u64(uint64_t v);

/* ---- column_read.c ------------------------------------------------------ */

/* Key at index i of block bk (NULL rows give their fill key). */
uint64_t col_block_key(const ColBlock *bk, uint32_t i);
/* Offsets (key - bk->min) of group g of a FOR or DELTA block into out[64]. */
void col_block_group_offsets(const ColBlock *bk, uint32_t g, uint64_t out[64]);
/* Key of `row`; false for NULL (row < n_rows is the caller's job). */
bool col_row_key(const Column *c, uint32_t row, uint64_t *key);
static inline bool col_block_is_null(const ColBlock *bk, uint32_t i)
{
    if (bk->null_count == 0)
        return false;
    if (bk->null_count == bk->rows)
        return true;
    return (bk->nulls[i >> 3] >> (i & 7)) & 1;
}
/* Null-bitmap word g of a block (0 when no NULLs, all rows when all NULL). */
uint64_t col_block_null_word(const ColBlock *bk, uint32_t g);
/* Keyword dictionary entry with bounds checks (false on damage). */
bool col_dict_entry(const Column *c, uint32_t code, const uint8_t **s, size_t *n);
/* QR_ECORRUPT "corrupt column \"name\" block N" (block < 0: no block). */
int col_corrupt(QrError *err, const Column *c, int64_t block, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- column_scan.c ------------------------------------------------------ */

/* Kernel selection for tests and benches: -1 automatic (AVX2 when the CPU
 * has it), 0 portable scalar kernels only. */
void col_scan_set_simd(int level);

/* ---- column_stats.c ----------------------------------------------------- */

/* HyperLogLog register update for a 64-bit hash. */
void col_hll_add(uint8_t *regs, uint64_t h);
/* Equi-depth histogram of n sorted keys into `out` (COL_HIST_MAX buckets
 * of COL_BUCKET_LEN bytes). Returns the bucket count. */
uint32_t col_hist_build(const uint64_t *sorted, size_t n, uint8_t *out);
/* The same from per-key counts (keywords: counts[code], n_codes codes). */
uint32_t col_hist_build_counts(const uint32_t *counts, uint32_t n_codes, uint8_t *out);

/* ---- column_filter.c ---------------------------------------------------- */

typedef struct ColKeyRange {
    uint64_t lo, hi; /* inclusive */
} ColKeyRange;

enum { CF_NONE, CF_NULL, CF_NOTNULL, CF_RANGES };

/* Invariants: ranges sorted, disjoint and non-adjacent; CF_RANGES has at
 * least one range and is not the full key domain. */
struct ColFilter {
    const Column *col; /* borrows */
    int mode;          /* CF_* */
    bool invert;       /* CF_RANGES: non-NULL rows whose key is NOT in ranges */
    uint32_t n_ranges;
    ColKeyRange *ranges; /* owns */
};

/* Does key fall in the filter's ranges (ignoring invert)? O(log k). */
bool col_ranges_contain(const ColFilter *f, uint64_t key);

/* Zone decision for one block. */
enum { CZ_NONE, CZ_ALL, CZ_PARTIAL };
/* NONE / ALL (every non-NULL row; for CF_NULL every NULL row) / PARTIAL.
 * For CF_RANGES PARTIAL, [*r0, *r1) are the ranges overlapping the block. */
int col_zone_classify(const ColFilter *f, const ColBlock *bk, uint32_t *r0, uint32_t *r1);

#endif
