/*
 * column_scan.c — zone-map-pruned filter scans: compare packed blocks in
 * their encoded domain into 64-row bit masks, and turn masks into roaring
 * containers without adding rows one by one.
 *
 * Layer: store/.  Calls column_int.h, mem, buf, CRoaring (public API and the
 * documented portable serialization format only).
 *
 * Per block (4096 rows = 64 mask words):
 *   1. the zone map decides NONE (skip), ALL (no decode: mask = not-NULL) or
 *      PARTIAL, and which of the filter's key ranges overlap the block;
 *   2. sorted blocks answer each range with two binary searches on the
 *      packed values (a selective range costs O(log n), not O(n));
 *   3. other blocks translate the ranges into the block's offset space
 *      (key - block min, the packed domain) and run a kernel per group of 64
 *      values: unpack (straight-line code per bit width) then compare
 *      branch-free into one uint64 word.  Kernels: one range (x - lo <= span,
 *      unsigned), up to 4 ranges (OR), a lookup bitmap (many IN values, AVX2
 *      gather), or a binary search over ranges (many far-apart IN values).
 *      AVX2 variants are picked at run time (__builtin_cpu_supports).
 *   4. NOT (for <>), AND not-NULL, AND the tail mask of a short last block.
 *
 * Output: 16 blocks = one 65,536-row roaring container.  Each chunk's words
 * become the smallest of an array, bitset or run container in CRoaring's
 * portable format (RoaringFormatSpec), which one deserialize turns into a
 * bitmap that is ANDed with the candidates and ORed into the caller's.
 */
#include "store/column_int.h"
#include "store/mem.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define COL_X86 1
#include <immintrin.h>
#endif

/* ---- kernels ------------------------------------------------------------ */

/* Up to this many ranges are tested by comparing every value against each
 * (branch-free, vectorized); more go to a key bitmap or a binary search. */
#define MULTI_MAX 16

typedef struct KArgs {
    uint32_t k;                 /* ranges in lo/span (1..MULTI_MAX) */
    uint64_t lo[MULTI_MAX], span[MULTI_MAX]; /* offset space: x matches iff x - lo <= span */
    const uint64_t *bm;         /* lookup bitmap; bit nbits is 0 */
    uint32_t nbits, delta;      /* bitmap index = min(x + delta, nbits) (mod 2^32) */
    const ColKeyRange *rs;      /* binary search: key = base + x in rs[0..nr) */
    uint32_t nr;
    uint64_t base;
} KArgs;

typedef uint64_t (*Kern32)(const uint32_t *x, const KArgs *a);
typedef uint64_t (*Kern64)(const uint64_t *x, const KArgs *a);

static uint64_t k32_range(const uint32_t *x, const KArgs *a)
{
    const uint32_t lo = (uint32_t)a->lo[0], sp = (uint32_t)a->span[0];
    uint64_t m = 0;
    for (unsigned i = 0; i < 64; i++)
        m |= (uint64_t)((uint32_t)(x[i] - lo) <= sp) << i;
    return m;
}

static uint64_t k32_multi(const uint32_t *x, const KArgs *a)
{
    uint64_t m = 0;
    for (uint32_t r = 0; r < a->k; r++) {
        const uint32_t lo = (uint32_t)a->lo[r], sp = (uint32_t)a->span[r];
        for (unsigned i = 0; i < 64; i++)
            m |= (uint64_t)((uint32_t)(x[i] - lo) <= sp) << i;
    }
    return m;
}

static uint64_t k32_bitmap(const uint32_t *x, const KArgs *a)
{
    uint64_t m = 0;
    for (unsigned i = 0; i < 64; i++) {
        uint32_t idx = x[i] + a->delta;
        idx = idx < a->nbits ? idx : a->nbits;
        m |= ((a->bm[idx >> 6] >> (idx & 63)) & 1) << i;
    }
    return m;
}

static bool rs_contain(const ColKeyRange *rs, uint32_t n, uint64_t key)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (rs[mid].hi < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && rs[lo].lo <= key;
}

static uint64_t k32_bsearch(const uint32_t *x, const KArgs *a)
{
    uint64_t m = 0;
    for (unsigned i = 0; i < 64; i++)
        m |= (uint64_t)rs_contain(a->rs, a->nr, a->base + x[i]) << i;
    return m;
}

static uint64_t k64_range(const uint64_t *x, const KArgs *a)
{
    const uint64_t lo = a->lo[0], sp = a->span[0];
    uint64_t m = 0;
    for (unsigned i = 0; i < 64; i++)
        m |= (uint64_t)(x[i] - lo <= sp) << i;
    return m;
}

static uint64_t k64_multi(const uint64_t *x, const KArgs *a)
{
    uint64_t m = 0;
    for (uint32_t r = 0; r < a->k; r++)
        for (unsigned i = 0; i < 64; i++)
            m |= (uint64_t)(x[i] - a->lo[r] <= a->span[r]) << i;
    return m;
}

static uint64_t k64_bsearch(const uint64_t *x, const KArgs *a)
{
    uint64_t m = 0;
    for (unsigned i = 0; i < 64; i++)
        m |= (uint64_t)rs_contain(a->rs, a->nr, a->base + x[i]) << i;
    return m;
}

#ifdef COL_X86
__attribute__((target("avx2"))) static uint64_t k32_range_avx2(const uint32_t *x, const KArgs *a)
{
    const __m256i lo = _mm256_set1_epi32((int)(uint32_t)a->lo[0]);
    const __m256i sp = _mm256_set1_epi32((int)(uint32_t)a->span[0]);
    uint64_t m = 0;
    for (unsigned j = 0; j < 8; j++) {
        __m256i d = _mm256_sub_epi32(_mm256_loadu_si256((const __m256i *)(x + 8 * j)), lo);
        __m256i ok = _mm256_cmpeq_epi32(_mm256_min_epu32(d, sp), d);
        m |= (uint64_t)(uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(ok)) << (8 * j);
    }
    return m;
}

__attribute__((target("avx2"))) static uint64_t k32_multi_avx2(const uint32_t *x, const KArgs *a)
{
    __m256i lo[MULTI_MAX], sp[MULTI_MAX];
    for (uint32_t r = 0; r < a->k; r++) {
        lo[r] = _mm256_set1_epi32((int)(uint32_t)a->lo[r]);
        sp[r] = _mm256_set1_epi32((int)(uint32_t)a->span[r]);
    }
    uint64_t m = 0;
    for (unsigned j = 0; j < 8; j++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(x + 8 * j)), acc = _mm256_setzero_si256();
        for (uint32_t r = 0; r < a->k; r++) {
            __m256i d = _mm256_sub_epi32(v, lo[r]);
            acc = _mm256_or_si256(acc, _mm256_cmpeq_epi32(_mm256_min_epu32(d, sp[r]), d));
        }
        m |= (uint64_t)(uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(acc)) << (8 * j);
    }
    return m;
}

__attribute__((target("avx2"))) static uint64_t k32_bitmap_avx2(const uint32_t *x, const KArgs *a)
{
    const __m256i delta = _mm256_set1_epi32((int)a->delta), nb = _mm256_set1_epi32((int)a->nbits);
    const __m256i m31 = _mm256_set1_epi32(31), one = _mm256_set1_epi32(1);
    const int *bm = (const int *)a->bm; /* little-endian: bit i is bit i%32 of int i/32 */
    uint64_t m = 0;
    for (unsigned j = 0; j < 8; j++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(x + 8 * j));
        __m256i idx = _mm256_min_epu32(_mm256_add_epi32(v, delta), nb);
        __m256i g = _mm256_i32gather_epi32(bm, _mm256_srli_epi32(idx, 5), 4);
        __m256i bit = _mm256_and_si256(_mm256_srlv_epi32(g, _mm256_and_si256(idx, m31)), one);
        __m256i ok = _mm256_cmpeq_epi32(bit, one);
        m |= (uint64_t)(uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(ok)) << (8 * j);
    }
    return m;
}

__attribute__((target("avx2"))) static uint64_t k64_range_avx2(const uint64_t *x, const KArgs *a)
{
    const __m256i lo = _mm256_set1_epi64x((long long)a->lo[0]);
    const __m256i bias = _mm256_set1_epi64x((long long)COL_SIGN);
    const __m256i spb = _mm256_set1_epi64x((long long)(a->span[0] ^ COL_SIGN));
    uint64_t m = 0;
    for (unsigned j = 0; j < 16; j++) {
        __m256i d = _mm256_sub_epi64(_mm256_loadu_si256((const __m256i *)(x + 4 * j)), lo);
        __m256i gt = _mm256_cmpgt_epi64(_mm256_xor_si256(d, bias), spb);
        m |= (uint64_t)(~(unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(gt)) & 0xFu) << (4 * j);
    }
    return m;
}

__attribute__((target("avx2"))) static uint64_t k64_multi_avx2(const uint64_t *x, const KArgs *a)
{
    const __m256i bias = _mm256_set1_epi64x((long long)COL_SIGN);
    __m256i lo[MULTI_MAX], spb[MULTI_MAX];
    for (uint32_t r = 0; r < a->k; r++) {
        lo[r] = _mm256_set1_epi64x((long long)a->lo[r]);
        spb[r] = _mm256_set1_epi64x((long long)(a->span[r] ^ COL_SIGN));
    }
    uint64_t m = 0;
    for (unsigned j = 0; j < 16; j++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(x + 4 * j));
        __m256i out = _mm256_set1_epi64x(-1); /* "outside every range so far" */
        for (uint32_t r = 0; r < a->k; r++) {
            __m256i d = _mm256_xor_si256(_mm256_sub_epi64(v, lo[r]), bias);
            out = _mm256_and_si256(out, _mm256_cmpgt_epi64(d, spb[r]));
        }
        m |= (uint64_t)(~(unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(out)) & 0xFu) << (4 * j);
    }
    return m;
}
#endif

typedef struct Kernels {
    Kern32 range32, multi32, bitmap32;
    Kern64 range64, multi64;
    bool hw_popcnt;
} Kernels;

static const Kernels kern_scalar = {k32_range, k32_multi, k32_bitmap, k64_range, k64_multi, false};
#ifdef COL_X86
static const Kernels kern_avx2 = {k32_range_avx2, k32_multi_avx2, k32_bitmap_avx2,
                                  k64_range_avx2, k64_multi_avx2, true};
#endif

static int simd_override = -1;

void col_scan_set_simd(int level) { __atomic_store_n(&simd_override, level, __ATOMIC_RELAXED); }

static const Kernels *pick_kernels(void)
{
#ifdef COL_X86
    static int have = -1; /* benign race: every thread computes the same */
    int h = __atomic_load_n(&have, __ATOMIC_RELAXED);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
        __atomic_store_n(&have, h, __ATOMIC_RELAXED);
    }
    int o = __atomic_load_n(&simd_override, __ATOMIC_RELAXED);
    if (h && o != 0)
        return &kern_avx2;
#endif
    return &kern_scalar;
}

/* ---- block scan --------------------------------------------------------- */

#define COL_BM_WORDS (65536 / 64 + 1)

typedef struct ScanCtx {
    const ColFilter *f;
    const Kernels *K;
    bool key_bm;              /* kbm covers every range (span < 65536 keys) */
    uint64_t kb_lo;           /* key of kbm bit 0 */
    uint32_t kb_nbits;
    uint64_t kbm[COL_BM_WORDS]; /* key-space lookup bitmap, built once per scan */
    uint64_t obm[COL_BM_WORDS]; /* offset-space bitmap, built per block */
} ScanCtx;

/* Set bits [from, to] (inclusive). */
static void set_bits(uint64_t *w, uint64_t from, uint64_t to)
{
    uint64_t a = from >> 6, b = to >> 6;
    uint64_t ma = ~0ull << (from & 63), mb = ~0ull >> (63 - (to & 63));
    if (a == b) {
        w[a] |= ma & mb;
        return;
    }
    w[a] |= ma;
    for (uint64_t i = a + 1; i < b; i++)
        w[i] = ~0ull;
    w[b] |= mb;
}

static void scan_prepare(ScanCtx *sc, const ColFilter *f)
{
    sc->f = f;
    sc->K = pick_kernels();
    sc->key_bm = false;
    if (f->mode != CF_RANGES || f->n_ranges <= 4)
        return;
    uint64_t lo = f->ranges[0].lo, span = f->ranges[f->n_ranges - 1].hi - lo;
    if (span >= 65536)
        return;
    sc->key_bm = true;
    sc->kb_lo = lo;
    sc->kb_nbits = (uint32_t)span + 1;
    memset(sc->kbm, 0, (sc->kb_nbits / 64 + 1) * sizeof *sc->kbm);
    for (uint32_t i = 0; i < f->n_ranges; i++)
        set_bits(sc->kbm, f->ranges[i].lo - lo, f->ranges[i].hi - lo);
}

/* Clip range r to block bk and translate to offset space. */
static void clip(const ColKeyRange *r, const ColBlock *bk, uint64_t *lo, uint64_t *span)
{
    uint64_t a = r->lo > bk->min ? r->lo : bk->min, b = r->hi < bk->max ? r->hi : bk->max;
    *lo = a - bk->min;
    *span = b - a;
}

/* First index in [0, rows) whose key is > key (strict) or >= key. */
static uint32_t block_bound(const ColBlock *bk, uint64_t key, bool strict)
{
    uint32_t lo = 0, hi = bk->rows;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        uint64_t k = col_block_key(bk, mid);
        if (strict ? k <= key : k < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void scan_sorted(const ScanCtx *sc, const ColBlock *bk, uint32_t r0, uint32_t r1, uint64_t *words)
{
    memset(words, 0, col_groups(bk->rows) * sizeof *words);
    for (uint32_t i = r0; i < r1; i++) {
        const ColKeyRange *r = &sc->f->ranges[i];
        uint64_t a = r->lo > bk->min ? r->lo : bk->min, b = r->hi < bk->max ? r->hi : bk->max;
        uint32_t s = block_bound(bk, a, false), e = block_bound(bk, b, true);
        if (s < e)
            set_bits(words, s, e - 1);
    }
}

static void scan_values(ScanCtx *sc, const ColBlock *bk, uint32_t r0, uint32_t r1, uint64_t *words)
{
    const ColFilter *f = sc->f;
    const Kernels *K = sc->K;
    uint32_t nloc = r1 - r0, ng = col_groups(bk->rows);
    bool narrow = bk->width <= 32;
    KArgs a = {0};
    Kern32 k32 = NULL;
    Kern64 k64 = NULL;
    if (nloc <= 4) {
        a.k = nloc;
        for (uint32_t i = 0; i < nloc; i++)
            clip(&f->ranges[r0 + i], bk, &a.lo[i], &a.span[i]);
        if (narrow)
            k32 = nloc == 1 ? K->range32 : K->multi32;
        else
            k64 = nloc == 1 ? K->range64 : K->multi64;
    } else if (narrow && sc->key_bm && bk->min + (1ull << 31) > sc->kb_lo &&
               bk->max - sc->kb_lo < (1ull << 31)) {
        /* both bounds within 2^31 keys of kb_lo: x + delta (mod 2^32) is the
         * bit index for every key in the bitmap and >= nbits for the rest */
        a.bm = sc->kbm;
        a.nbits = sc->kb_nbits;
        a.delta = (uint32_t)(bk->min - sc->kb_lo);
        k32 = K->bitmap32;
    } else if (bk->width <= 16) {
        uint32_t nbits = 1u << bk->width;
        memset(sc->obm, 0, (nbits / 64 + 1) * sizeof *sc->obm);
        for (uint32_t i = r0; i < r1; i++) {
            uint64_t lo, span;
            clip(&f->ranges[i], bk, &lo, &span);
            set_bits(sc->obm, lo, lo + span);
        }
        a.bm = sc->obm;
        a.nbits = nbits;
        k32 = K->bitmap32;
    } else if (nloc <= MULTI_MAX) {
        /* a short IN list over wide values: every value against each range
         * beats a branchy binary search per value several times over */
        a.k = nloc;
        for (uint32_t i = 0; i < nloc; i++)
            clip(&f->ranges[r0 + i], bk, &a.lo[i], &a.span[i]);
        if (narrow)
            k32 = K->multi32;
        else
            k64 = K->multi64;
    } else {
        a.rs = f->ranges + r0;
        a.nr = nloc;
        a.base = bk->min;
        if (narrow)
            k32 = k32_bsearch;
        else
            k64 = k64_bsearch;
    }
    uint32_t x32[64];
    uint64_t x64[64];
    unsigned w = bk->width;
    if (bk->enc == COL_ENC_FOR && k32) {
        ColUnpack32 up = col_unpack32[w];
        for (uint32_t g = 0; g < ng; g++) {
            up(bk->payload + 8ull * w * g, x32);
            words[g] = k32(x32, &a);
        }
    } else if (bk->enc == COL_ENC_FOR) {
        ColUnpack64 up = col_unpack64[w];
        for (uint32_t g = 0; g < ng; g++) {
            up(bk->payload + 8ull * w * g, x64);
            words[g] = k64(x64, &a);
        }
    } else {
        for (uint32_t g = 0; g < ng; g++) {
            col_block_group_offsets(bk, g, x64);
            if (k32) {
                for (unsigned i = 0; i < 64; i++)
                    x32[i] = (uint32_t)x64[i];
                words[g] = k32(x32, &a);
            } else {
                words[g] = k64(x64, &a);
            }
        }
    }
}

/* Mask words of one block into words[0..ceil(rows/64)).  Returns false
 * (words untouched) when the zone map rules the block out. */
static bool scan_block(ScanCtx *sc, const ColBlock *bk, uint64_t *words, ColScanStats *st)
{
    const ColFilter *f = sc->f;
    uint32_t ng = col_groups(bk->rows), r0 = 0, r1 = 0;
    uint64_t tail = bk->rows % 64 ? (1ull << (bk->rows % 64)) - 1 : ~0ull;
    int z = col_zone_classify(f, bk, &r0, &r1);
    if (z == CZ_NONE) {
        st->blocks_skipped++;
        return false;
    }
    if (z == CZ_ALL) {
        st->blocks_full++;
        for (uint32_t g = 0; g < ng; g++)
            words[g] = f->mode == CF_NULL ? ~0ull : ~col_block_null_word(bk, g);
        words[ng - 1] &= tail;
        return true;
    }
    st->blocks_scanned++;
    if (f->mode == CF_NULL) {
        for (uint32_t g = 0; g < ng; g++)
            words[g] = col_block_null_word(bk, g);
        words[ng - 1] &= tail;
        return true;
    }
    if ((bk->flags & COL_BLK_SORTED) && r1 - r0 <= 16)
        scan_sorted(sc, bk, r0, r1, words);
    else
        scan_values(sc, bk, r0, r1, words);
    uint64_t inv = f->invert ? ~0ull : 0;
    if (bk->null_count)
        for (uint32_t g = 0; g < ng; g++)
            words[g] = (words[g] ^ inv) & ~col_block_null_word(bk, g);
    else if (inv)
        for (uint32_t g = 0; g < ng; g++)
            words[g] = ~words[g];
    words[ng - 1] &= tail;
    return true;
}

static inline __attribute__((always_inline)) uint64_t popcount_body(const uint64_t *w, size_t n)
{
    uint64_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += (uint64_t)__builtin_popcountll(w[i]);
    return c;
}
static uint64_t popcount_sw(const uint64_t *w, size_t n) { return popcount_body(w, n); }
#ifdef COL_X86
__attribute__((target("popcnt"))) static uint64_t popcount_hw(const uint64_t *w, size_t n)
{
    return popcount_body(w, n);
}
#endif
static uint64_t popcount_words(const Kernels *K, const uint64_t *w, size_t n)
{
#ifdef COL_X86
    if (K->hw_popcnt)
        return popcount_hw(w, n);
#endif
    return popcount_sw(w, n);
}

/* Add one scan's counters to the caller's (which may be NULL). */
static void stats_add(ColScanStats *dst, const ColScanStats *st)
{
    if (!dst)
        return;
    dst->blocks_total += st->blocks_total;
    dst->blocks_skipped += st->blocks_skipped;
    dst->blocks_full += st->blocks_full;
    dst->blocks_scanned += st->blocks_scanned;
    dst->rows_matched += st->rows_matched;
}

uint32_t col_filter_scan_words(const ColFilter *f, uint32_t first_block, uint32_t n_blocks,
                               uint64_t *words, ColScanStats *stats)
{
    const Column *c = f->col;
    if (first_block >= c->n_blocks)
        return 0;
    if (n_blocks > c->n_blocks - first_block)
        n_blocks = c->n_blocks - first_block;
    ScanCtx *sc = qr_malloc(sizeof *sc);
    if (!sc)
        return UINT32_MAX;
    ColScanStats st = {0};
    scan_prepare(sc, f);
    uint32_t rows = 0;
    for (uint32_t b = first_block; b < first_block + n_blocks; b++) {
        const ColBlock *bk = &c->blocks[b];
        uint64_t *w = words + rows / 64;
        if (scan_block(sc, bk, w, &st))
            st.rows_matched += popcount_words(sc->K, w, col_groups(bk->rows));
        else
            memset(w, 0, col_groups(bk->rows) * sizeof *w);
        rows += bk->rows;
    }
    qr_free(sc);
    st.blocks_total = n_blocks;
    stats_add(stats, &st);
    return rows;
}

void col_filter_zone_plan(const ColFilter *f, ColScanStats *st)
{
    const Column *c = f->col;
    st->blocks_total += c->n_blocks;
    for (uint32_t b = 0; b < c->n_blocks; b++) {
        uint32_t r0, r1;
        int z = col_zone_classify(f, &c->blocks[b], &r0, &r1);
        if (z == CZ_NONE)
            st->blocks_skipped++;
        else if (z == CZ_ALL)
            st->blocks_full++;
        else
            st->blocks_scanned++;
    }
}

/* ---- roaring output ----------------------------------------------------- */

/* CRoaring portable format (RoaringFormatSpec): cookie 12347 | (n-1) << 16,
 * run-flag bitset, n x {u16 key, u16 card-1}, offsets when n >= 4, then the
 * containers (array: u16 values; bitset: 1024 u64; run: u16 n, {start, len-1}). */
#define RB_COOKIE 12347u
#define RB_NO_OFFSET_THRESHOLD 4u

typedef struct RbCont {
    uint32_t off, len; /* in body */
    uint16_t key, card_m1;
    uint8_t is_run;
} RbCont;

typedef struct RbBuild {
    QrBuf body;
    QrBuf conts; /* RbCont[] */
    uint32_t n;
} RbBuild;

/* Cardinality and run count of a chunk's touched blocks (bit b of touched:
 * block b's 64 words are valid; the others are zero). */
static inline __attribute__((always_inline)) void chunk_count_body(const uint64_t *w, uint32_t touched,
                                                                    uint32_t *card, uint32_t *runs)
{
    uint32_t cd = 0, rn = 0;
    for (uint32_t b = 0; b < COL_BLOCKS_PER_CHUNK; b++) {
        if (!(touched >> b & 1))
            continue;
        uint64_t prev = (b && (touched >> (b - 1) & 1)) ? w[b * 64 - 1] : 0;
        for (uint32_t i = b * 64; i < b * 64 + 64; i++) {
            uint64_t x = w[i];
            cd += (uint32_t)__builtin_popcountll(x);
            rn += (uint32_t)__builtin_popcountll(x & ~((x << 1) | (prev >> 63)));
            prev = x;
        }
    }
    *card = cd;
    *runs = rn;
}

static void chunk_count(const uint64_t *w, uint32_t touched, uint32_t *card, uint32_t *runs)
{
    chunk_count_body(w, touched, card, runs);
}

#ifdef COL_X86
__attribute__((target("popcnt"))) static void chunk_count_hw(const uint64_t *w, uint32_t touched,
                                                              uint32_t *card, uint32_t *runs)
{
    chunk_count_body(w, touched, card, runs);
}
#endif

/* Next set (want=1) or clear (want=0) bit at or after pos, 65536 if none. */
static uint32_t next_bit(const uint64_t *w, uint32_t pos, bool want)
{
    while (pos < 65536) {
        uint64_t x = want ? w[pos >> 6] : ~w[pos >> 6];
        x &= ~0ull << (pos & 63);
        if (x)
            return (pos & ~63u) + (uint32_t)__builtin_ctzll(x);
        pos = (pos & ~63u) + 64;
    }
    return 65536;
}

static void rb_add(RbBuild *rb, const Kernels *K, uint32_t key, uint64_t *w, uint32_t touched)
{
    uint32_t card, runs;
#ifdef COL_X86
    if (K->hw_popcnt)
        chunk_count_hw(w, touched, &card, &runs);
    else
#endif
        chunk_count(w, touched, &card, &runs);
    if (!card)
        return;
    for (uint32_t b = 0; b < COL_BLOCKS_PER_CHUNK; b++) /* zero untouched blocks */
        if (!(touched >> b & 1))
            memset(w + b * 64, 0, 64 * sizeof *w);
    size_t run_len = 2 + 4 * (size_t)runs, arr_len = card <= 4096 ? 2 * (size_t)card : SIZE_MAX;
    RbCont ct = {.off = (uint32_t)rb->body.len, .key = (uint16_t)key, .card_m1 = (uint16_t)(card - 1)};
    if (run_len < arr_len && run_len < 8192) {
        ct.is_run = 1;
        ct.len = (uint32_t)run_len;
        if (qr_buf_reserve(&rb->body, run_len)) {
            uint8_t *p = rb->body.data + rb->body.len;
            uint16_t nr = (uint16_t)runs;
            memcpy(p, &nr, 2);
            p += 2;
            for (uint32_t pos = next_bit(w, 0, true); pos < 65536;) {
                uint32_t end = next_bit(w, pos, false);
                uint16_t v[2] = {(uint16_t)pos, (uint16_t)(end - pos - 1)};
                memcpy(p, v, 4);
                p += 4;
                pos = end < 65536 ? next_bit(w, end, true) : 65536;
            }
            rb->body.len += run_len;
        }
    } else if (arr_len != SIZE_MAX) {
        ct.len = (uint32_t)arr_len;
        if (qr_buf_reserve(&rb->body, arr_len)) {
            uint8_t *pb = rb->body.data + rb->body.len;
            for (uint32_t i = 0; i < 1024; i++)
                for (uint64_t x = w[i]; x; x &= x - 1) {
                    uint16_t v = (uint16_t)(i * 64 + (uint32_t)__builtin_ctzll(x));
                    memcpy(pb, &v, 2);
                    pb += 2;
                }
            rb->body.len += arr_len;
        }
    } else {
        ct.len = 8192;
        qr_buf_append(&rb->body, w, 8192);
    }
    qr_buf_append(&rb->conts, &ct, sizeof ct);
    rb->n++;
}

/* The bitmap of everything added (NULL with *rc = 0 when empty). */
static roaring_bitmap_t *rb_finish(RbBuild *rb, int *rc)
{
    *rc = QR_OK;
    if (!qr_buf_ok(&rb->body) || !qr_buf_ok(&rb->conts)) {
        *rc = QR_ENOMEM;
        return NULL;
    }
    uint32_t n = rb->n;
    if (!n)
        return NULL;
    size_t flags_len = (n + 7) / 8;
    size_t hdr = 4 + flags_len + 4 * (size_t)n + (n >= RB_NO_OFFSET_THRESHOLD ? 4 * (size_t)n : 0);
    QrBuf s;
    qr_buf_init(&s);
    if (!qr_buf_reserve(&s, hdr + rb->body.len)) {
        *rc = QR_ENOMEM;
        return NULL;
    }
    uint8_t *p = s.data;
    memset(p, 0, hdr);
    qr_put_u32le(p, RB_COOKIE | ((n - 1) << 16));
    const RbCont *cs = (const RbCont *)(const void *)rb->conts.data;
    for (uint32_t i = 0; i < n; i++) {
        RbCont ct;
        memcpy(&ct, &cs[i], sizeof ct);
        if (ct.is_run)
            p[4 + i / 8] |= (uint8_t)(1u << (i % 8));
        uint16_t d[2] = {ct.key, ct.card_m1};
        memcpy(p + 4 + flags_len + 4 * (size_t)i, d, 4);
        if (n >= RB_NO_OFFSET_THRESHOLD)
            qr_put_u32le(p + 4 + flags_len + 4 * (size_t)n + 4 * (size_t)i, (uint32_t)(hdr + ct.off));
    }
    memcpy(p + hdr, rb->body.data, rb->body.len);
    s.len = hdr + rb->body.len;
    roaring_bitmap_t *bm = roaring_bitmap_portable_deserialize_safe((const char *)s.data, s.len);
    qr_buf_free(&s);
    if (!bm)
        *rc = QR_ENOMEM;
    return bm;
}

int col_filter_scan_range(const ColFilter *f, uint32_t first_block, uint32_t n_blocks,
                          const roaring_bitmap_t *candidates, roaring_bitmap_t *out,
                          ColScanStats *stats, QrError *err)
{
    const Column *c = f->col;
    ColScanStats st = {0};
    if (first_block >= c->n_blocks || n_blocks == 0)
        return QR_OK;
    if (n_blocks > c->n_blocks - first_block)
        n_blocks = c->n_blocks - first_block;
    uint32_t end = first_block + n_blocks;
    st.blocks_total = n_blocks;
    if (f->mode == CF_NONE || (candidates && roaring_bitmap_is_empty(candidates))) {
        st.blocks_skipped = n_blocks;
        goto done;
    }
    ScanCtx *sc = qr_malloc(sizeof *sc);
    uint64_t *words = qr_malloc(1024 * sizeof *words);
    if (!sc || !words) {
        qr_free(sc), qr_free(words);
        return qr_error_set(err, QR_ENOMEM, "out of memory scanning column \"%s\"", c->name);
    }
    scan_prepare(sc, f);
    RbBuild rb = {.n = 0};
    qr_buf_init(&rb.body);
    qr_buf_init(&rb.conts);
    roaring_uint32_iterator_t it;
    if (candidates)
        roaring_init_iterator(candidates, &it);
    for (uint32_t chunk = first_block / COL_BLOCKS_PER_CHUNK; chunk * COL_BLOCKS_PER_CHUNK < end; chunk++) {
        uint32_t cb = chunk * COL_BLOCKS_PER_CHUNK, touched = 0;
        uint32_t b0 = cb > first_block ? cb : first_block;
        uint32_t b1 = cb + COL_BLOCKS_PER_CHUNK < end ? cb + COL_BLOCKS_PER_CHUNK : end;
        for (uint32_t b = b0; b < b1; b++) {
            const ColBlock *bk = &c->blocks[b];
            if (candidates) {
                uint32_t start = b * COL_BLOCK_ROWS;
                if (it.has_value && it.current_value < start)
                    roaring_move_uint32_iterator_equalorlarger(&it, start);
                if (!it.has_value || it.current_value >= start + bk->rows) {
                    st.blocks_skipped++;
                    continue;
                }
            }
            uint64_t *w = words + (b - cb) * 64;
            if (!scan_block(sc, bk, w, &st))
                continue;
            if (bk->rows < COL_BLOCK_ROWS)
                memset(w + col_groups(bk->rows), 0, (64 - col_groups(bk->rows)) * sizeof *w);
            touched |= 1u << (b - cb);
        }
        if (touched)
            rb_add(&rb, sc->K, chunk, words, touched);
    }
    int rc;
    roaring_bitmap_t *bm = rb_finish(&rb, &rc);
    qr_buf_free(&rb.body);
    qr_buf_free(&rb.conts);
    qr_free(sc);
    qr_free(words);
    if (rc)
        return qr_error_set(err, rc, "out of memory scanning column \"%s\"", c->name);
    if (bm) {
        if (candidates)
            roaring_bitmap_and_inplace(bm, candidates);
        st.rows_matched = roaring_bitmap_get_cardinality(bm);
        roaring_bitmap_or_inplace(out, bm);
        roaring_bitmap_free(bm);
    }
done:
    stats_add(stats, &st);
    return QR_OK;
}

int col_filter_scan(const ColFilter *f, const roaring_bitmap_t *candidates, roaring_bitmap_t *out,
                    ColScanStats *stats, QrError *err)
{
    return col_filter_scan_range(f, 0, f->col->n_blocks, candidates, out, stats, err);
}
