/*
 * postings.c — postings writer, block codec, skip data, block-max impacts and
 * the posting iterator (index/postings.h).
 *
 * Layer: index/.  Calls store/ base kit (error, mem, buf) and index/iter.h.
 *
 * FORMAT (little-endian; "varint" is LEB128; full essay in
 * docs/postings-format.md).  One term's bytes in the DOCS stream:
 *
 *   term   := flags:u8  imp_len:u8  impacts[imp_len]  body
 *   flags  := version(4 bits, = 1) << 4 | has_positions << 2 | layout(2 bits)
 *   impacts:= tf0 len0 (dtf dlen)*      varints; tf and len strictly rising
 *
 *   layout 0 (compact, 1 <= df < 128):
 *     body := gap[df]:varint  freq_minus_1[df]:varint
 *   layout 1 (blocked, df >= 128; nb = ceil(df / 128) blocks, all full but
 *   the last):
 *     body := widths:u8  last_doc[nb]:u32  doc_off[nb]:dw  (pos_off[nb]:pw)?
 *             block[0] .. block[nb-1]
 *     widths := log2(dw) | log2(pw) << 2        (dw, pw in {1, 2, 4, 8})
 *     doc_off[i]: start of block i, relative to block[0]
 *     pos_off[i]: start of block i's positions, relative to tp->pos_off
 *     full block := imp_len:u8 impacts  bd:u8  bf:u8  g0:varint
 *                   packed(gap, bd)  packed(freq - 1, bf)
 *     tail block := imp_len:u8 impacts  gap[n]:varint  freq_minus_1[n]:varint
 *
 *   gap[i] = doc[i] - doc[i-1] - 1, with doc[-1] = last doc of the previous
 *   block (or -1).  In a full block the first gap lives in g0 and its packed
 *   slot holds 0, so one outlier does not widen all 128 slots.
 *   packed(v, b): 128 values of b bits (0..32) in 16*b bytes, vertical
 *   layout: value i sits in 32-bit lane i % 4 at bit (i / 4) * b of that
 *   lane's stream; lane word w is at byte 16 * w + 4 * lane.  SSE2 unpacks 4
 *   values per instruction and the gap prefix sum runs in the same pass.
 *
 * POSITIONS stream, per block (compact: one block): the positions of the
 * block's docs in doc order, the first of each doc absolute, the others as
 * gaps to the previous position, stored as a run:
 *     run := (b:u8 packed(v, b))*  varint*       full groups of 128, then the rest
 *
 * Invariants the reader checks (else QR_ECORRUPT): every offset and length
 * inside the term's bytes; doc ids strictly ascending across the whole list
 * (no 32-bit wrap); a block's last doc equals its skip entry; a full block
 * is consumed exactly; doc ids < scorer->n_docs when scoring.
 */
#include "index/postings.h"
#include "store/mem.h"

#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__) && !defined(QR_BP_SCALAR)
#include <emmintrin.h>
#define BP_SSE2 1
#endif

#define POST_VERSION 1
#define LAYOUT_COMPACT 0
#define LAYOUT_BLOCKED 1
#define FLAG_POSITIONS 0x04

#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ======================================================================
 * Bit packing: 128 values of b bits, vertical 4-lane layout.
 * ====================================================================== */

static unsigned bits_needed(uint32_t max) { return max ? 32 - (unsigned)__builtin_clz(max) : 0; }

static unsigned bits_of(const uint32_t *v, size_t n)
{
    uint32_t acc = 0;
    for (size_t i = 0; i < n; i++)
        acc |= v[i];
    return bits_needed(acc);
}

/* Pack 128 values (each < 2^b) into 16*b bytes at out. */
static void bp_pack(const uint32_t *in, unsigned b, uint8_t *out)
{
    if (b == 0)
        return;
    uint32_t words[4 * 32];
    memset(words, 0, 16 * b);
    for (unsigned k = 0; k < 32; k++) {
        unsigned bit = k * b, w = bit >> 5, s = bit & 31;
        for (unsigned l = 0; l < 4; l++) {
            uint32_t v = in[4 * k + l];
            words[4 * w + l] |= v << s;
            if (s + b > 32)
                words[4 * (w + 1) + l] |= v >> (32 - s);
        }
    }
    for (unsigned i = 0; i < 4 * b; i++)
        qr_put_u32le(out + 4 * i, words[i]);
}

#ifdef BP_SSE2
/* One specialisation per (b, delta): with b a constant the unrolled loop
 * folds every shift and branch away.  delta: out[i] = out[i-1] + 1 + v[i]
 * with out[-1] = add; else out[i] = v[i] + add.  Reads exactly 16*b bytes. */
static inline __attribute__((always_inline)) void bp_unpack_t(const uint8_t *in, uint32_t *out,
                                                              const unsigned b, const bool delta,
                                                              uint32_t add)
{
    __m128i acc = _mm_set1_epi32((int)add);
    const __m128i one = _mm_set1_epi32(1);
    if (b == 0) {
        if (delta) {
            __m128i v = _mm_add_epi32(_mm_setr_epi32(1, 2, 3, 4), acc);
            const __m128i four = _mm_set1_epi32(4);
            for (unsigned k = 0; k < 32; k++) {
                _mm_storeu_si128((__m128i *)(void *)(out + 4 * k), v);
                v = _mm_add_epi32(v, four);
            }
        } else {
            for (unsigned k = 0; k < 32; k++)
                _mm_storeu_si128((__m128i *)(void *)(out + 4 * k), acc);
        }
        return;
    }
    const __m128i mask = _mm_set1_epi32(b == 32 ? -1 : (int)((1u << (b & 31)) - 1));
    const __m128i *ip = (const __m128i *)(const void *)in;
    __m128i w = _mm_loadu_si128(ip);
    unsigned s = 0;
#pragma GCC unroll 32
    for (unsigned k = 0; k < 32; k++) {
        __m128i v = _mm_srli_epi32(w, (int)s);
        unsigned ns = s + b;
        if (ns > 32) {
            ++ip;
            w = _mm_loadu_si128(ip);
            v = _mm_or_si128(v, _mm_slli_epi32(w, (int)(32 - s)));
            ns -= 32;
        } else if (ns == 32) {
            if (k < 31) {
                ++ip;
                w = _mm_loadu_si128(ip);
            }
            ns = 0;
        }
        if (b < 32)
            v = _mm_and_si128(v, mask);
        s = ns;
        if (delta) {
            v = _mm_add_epi32(v, one);
            v = _mm_add_epi32(v, _mm_slli_si128(v, 4));
            v = _mm_add_epi32(v, _mm_slli_si128(v, 8));
            v = _mm_add_epi32(v, acc);
            acc = _mm_shuffle_epi32(v, 0xFF);
        } else {
            v = _mm_add_epi32(v, acc);
        }
        _mm_storeu_si128((__m128i *)(void *)(out + 4 * k), v);
    }
}

#define BP_CASES(DELTA)                                                                       \
    BP_C(0, DELTA) BP_C(1, DELTA) BP_C(2, DELTA) BP_C(3, DELTA) BP_C(4, DELTA) BP_C(5, DELTA)  \
    BP_C(6, DELTA) BP_C(7, DELTA) BP_C(8, DELTA) BP_C(9, DELTA) BP_C(10, DELTA)                \
    BP_C(11, DELTA) BP_C(12, DELTA) BP_C(13, DELTA) BP_C(14, DELTA) BP_C(15, DELTA)            \
    BP_C(16, DELTA) BP_C(17, DELTA) BP_C(18, DELTA) BP_C(19, DELTA) BP_C(20, DELTA)            \
    BP_C(21, DELTA) BP_C(22, DELTA) BP_C(23, DELTA) BP_C(24, DELTA) BP_C(25, DELTA)            \
    BP_C(26, DELTA) BP_C(27, DELTA) BP_C(28, DELTA) BP_C(29, DELTA) BP_C(30, DELTA)            \
    BP_C(31, DELTA) BP_C(32, DELTA)
#define BP_C(B, DELTA)                                                                        \
    case B:                                                                                   \
        bp_unpack_t(in, out, B, DELTA, add);                                                  \
        break;

/* Doc ids: out[i] = out[i-1] + 1 + gap[i], out[-1] = add. */
static void bp_unpack_docs(const uint8_t *in, unsigned b, uint32_t add, uint32_t *out)
{
    switch (b) { BP_CASES(true) default: break; }
}

/* Plain values plus a constant (1 for frequencies, 0 for positions). */
static void bp_unpack_add(const uint8_t *in, unsigned b, uint32_t add, uint32_t *out)
{
    switch (b) { BP_CASES(false) default: break; }
}
#undef BP_C
#undef BP_CASES

#else /* portable scalar decoder, same results */

static void bp_unpack_scalar(const uint8_t *in, unsigned b, bool delta, uint32_t add,
                             uint32_t *out)
{
    uint32_t mask = b == 32 ? UINT32_MAX : (1u << b) - 1;
    for (unsigned k = 0; k < 32; k++) {
        unsigned bit = k * b, w = bit >> 5, s = bit & 31;
        for (unsigned l = 0; l < 4; l++) {
            uint32_t v = 0;
            if (b) {
                uint64_t x = qr_get_u32le(in + 16 * w + 4 * l) >> s;
                if (s + b > 32)
                    x |= (uint64_t)qr_get_u32le(in + 16 * (w + 1) + 4 * l) << (32 - s);
                v = (uint32_t)x & mask;
            }
            out[4 * k + l] = v;
        }
    }
    if (delta) {
        uint32_t prev = add;
        for (unsigned i = 0; i < 128; i++)
            out[i] = prev = prev + 1 + out[i];
    } else {
        for (unsigned i = 0; i < 128; i++)
            out[i] += add;
    }
}
static void bp_unpack_docs(const uint8_t *in, unsigned b, uint32_t add, uint32_t *out)
{
    bp_unpack_scalar(in, b, true, add, out);
}
static void bp_unpack_add(const uint8_t *in, unsigned b, uint32_t add, uint32_t *out)
{
    bp_unpack_scalar(in, b, false, add, out);
}
#endif

/* Bounds-checked varint of at most 32 bits; NULL when truncated or too big. */
static inline const uint8_t *vdec32(const uint8_t *p, const uint8_t *end, uint32_t *v)
{
    if (LIKELY(p < end && *p < 0x80)) {
        *v = *p;
        return p + 1;
    }
    uint64_t x;
    size_t n = qr_varint_decode(p, end, &x);
    if (!n || x > UINT32_MAX)
        return NULL;
    *v = (uint32_t)x;
    return p + n;
}

/* Append a run: full groups of 128 packed values, then varints. */
static void run_encode(QrBuf *out, const uint32_t *v, size_t n)
{
    size_t i = 0;
    for (; i + POST_BLOCK <= n; i += POST_BLOCK) {
        unsigned b = bits_of(v + i, POST_BLOCK);
        qr_buf_putc(out, (uint8_t)b);
        if (!qr_buf_reserve(out, 16 * b))
            return;
        bp_pack(v + i, b, out->data + out->len);
        out->len += 16 * b;
    }
    for (; i < n; i++)
        qr_buf_put_varint(out, v[i]);
}

/* Decode a run of n values from [p, end); false unless it ends exactly at end. */
static bool run_decode(const uint8_t *p, const uint8_t *end, uint32_t *out, size_t n)
{
    size_t i = 0;
    for (; i + POST_BLOCK <= n; i += POST_BLOCK) {
        if (p >= end || *p > 32 || (size_t)(end - p - 1) < 16u * *p)
            return false;
        unsigned b = *p++;
        bp_unpack_add(p, b, 0, out + i);
        p += 16 * b;
    }
    for (; i < n; i++)
        if (!(p = vdec32(p, end, &out[i])))
            return false;
    return p == end;
}

/* ======================================================================
 * Impacts: Pareto-optimal (tf, doc_len) pairs, capped conservatively.
 * ====================================================================== */

typedef PostImpact Impact;

static int imp_cmp_tf_desc(const void *a, const void *b)
{
    const Impact *x = a, *y = b;
    if (x->tf != y->tf)
        return x->tf > y->tf ? -1 : 1;
    return (x->len > y->len) - (x->len < y->len);
}

size_t post_impact_frontier(PostImpact *v, size_t n)
{
    /* Small term frequencies (nearly every block): the shortest length per
     * tf, then a sweep from the highest tf down keeps each tf whose shortest
     * length beats every higher tf's -- what the sort below keeps, without
     * the sort (a profiled share of a bulk load). */
    enum { SMALL_TF = 256 };
    uint32_t max_tf = 0;
    for (size_t i = 0; i < n; i++)
        max_tf = v[i].tf > max_tf ? v[i].tf : max_tf;
    if (max_tf < SMALL_TF) {
        uint32_t min_len_of[SMALL_TF];
        memset(min_len_of, 0xFF, (max_tf + 1) * sizeof *min_len_of);
        bool seen[SMALL_TF] = {0};
        for (size_t i = 0; i < n; i++) {
            seen[v[i].tf] = true;
            if (v[i].len < min_len_of[v[i].tf])
                min_len_of[v[i].tf] = v[i].len;
        }
        size_t k = 0;
        uint64_t min_len = UINT64_MAX;
        for (uint32_t tf = max_tf + 1; tf-- > 0;)
            if (seen[tf] && min_len_of[tf] < min_len) {
                min_len = min_len_of[tf];
                v[k++] = (Impact){tf, min_len_of[tf]};
            }
        for (size_t i = 0; i < k / 2; i++) {
            Impact t = v[i];
            v[i] = v[k - 1 - i];
            v[k - 1 - i] = t;
        }
        return k;
    }
    qsort(v, n, sizeof *v, imp_cmp_tf_desc);
    size_t k = 0;
    uint64_t min_len = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        if (v[i].len < min_len) {
            min_len = v[i].len;
            v[k++] = v[i];
        }
    }
    for (size_t i = 0; i < k / 2; i++) {
        Impact t = v[i];
        v[i] = v[k - 1 - i];
        v[k - 1 - i] = t;
    }
    return k;
}

/* Merge neighbours of a frontier until at most cap pairs remain.  Merging
 * (tf_i, len_i) with (tf_i+1, len_i+1) keeps (tf_i+1, len_i): it dominates
 * both, so the bound stays a true upper bound whatever the scorer.  The pair
 * to merge is the one inflating a typical BM25 (k1 1.2, b 0.75, the term's
 * mean length) the least. */
static size_t imp_cap(Impact *v, size_t n, size_t cap, float avgdl)
{
    PostScorer ref = {.idf = 1, .k1 = 1.2f, .b = 0.75f, .avgdl = avgdl > 0 ? avgdl : 1,
                      .weight = 1};
    while (n > cap) {
        size_t best = 0;
        float best_cost = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            float s1 = bm25_term_score(&ref, v[i].tf, v[i].len);
            float s2 = bm25_term_score(&ref, v[i + 1].tf, v[i + 1].len);
            float sm = bm25_term_score(&ref, v[i + 1].tf, v[i].len);
            float cost = sm - (s1 > s2 ? s1 : s2);
            if (i == 0 || cost < best_cost) {
                best = i;
                best_cost = cost;
            }
        }
        v[best].tf = v[best + 1].tf;
        memmove(v + best + 1, v + best + 2, (n - best - 2) * sizeof *v);
        n--;
    }
    return n;
}

/* imp_len:u8 then the pairs, delta-coded. */
static void imp_encode(QrBuf *out, const Impact *v, size_t n)
{
    uint8_t tmp[POST_TERM_IMPACTS * 20];
    size_t k = 0;
    uint32_t ptf = 0, plen = 0;
    for (size_t i = 0; i < n; i++) {
        k += qr_varint_encode(tmp + k, v[i].tf - ptf);
        k += qr_varint_encode(tmp + k, v[i].len - plen);
        ptf = v[i].tf;
        plen = v[i].len;
    }
    qr_buf_putc(out, (uint8_t)k);
    qr_buf_append(out, tmp, k);
}

/* Upper bound of the scorer over the encoded pairs [p, end).  Slightly
 * inflated: float rounding may make the quotient dip by an ulp or two when
 * tf grows, and a bound must never be below a real score.  false when the
 * bytes are damaged. */
static bool imp_bound(const PostScorer *sc, const uint8_t *p, const uint8_t *end, float *out)
{
    uint64_t tf = 0, len = 0;
    float best = 0;
    while (p < end) {
        uint32_t dtf, dlen;
        if (!(p = vdec32(p, end, &dtf)) || !(p = vdec32(p, end, &dlen)))
            return false;
        tf += dtf;
        len += dlen;
        if (tf > UINT32_MAX || len > UINT32_MAX)
            return false;
        float s = bm25_term_score(sc, (uint32_t)tf, (uint32_t)len);
        if (s > best)
            best = s;
    }
    *out = best * (1.0f + 4e-6f);
    return true;
}

/* ======================================================================
 * Writer
 * ====================================================================== */

struct PostingsWriter {
    bool with_positions;
    bool term_positional; /* decided by the term's first doc */
    bool failed;          /* an add failed: the term is abandoned */
    uint32_t *docs;       /* owns: current term, n entries each */
    uint32_t *freqs;      /* owns */
    uint32_t *lens;       /* owns */
    size_t n, cap;
    uint32_t *pos; /* owns: position values, first of each doc absolute, then gaps */
    size_t pos_n, pos_cap;
    uint64_t total_tf;
    uint64_t sum_len;
    Impact *imps; /* owns: scratch for frontiers */
    size_t imps_cap;
    Impact *term_imps; /* owns: union of block frontiers */
    size_t term_imps_n, term_imps_cap;
    QrBuf blocks; /* scratch: the blocks area of a blocked term */
};

PostingsWriter *postw_new(bool with_positions)
{
    PostingsWriter *w = qr_calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->with_positions = with_positions;
    qr_buf_init(&w->blocks);
    return w;
}

void postw_free(PostingsWriter *w)
{
    if (!w)
        return;
    qr_free(w->docs);
    qr_free(w->freqs);
    qr_free(w->lens);
    qr_free(w->pos);
    qr_free(w->imps);
    qr_free(w->term_imps);
    qr_buf_free(&w->blocks);
    qr_free(w);
}

void postw_begin_term(PostingsWriter *w)
{
    w->n = 0;
    w->pos_n = 0;
    w->total_tf = 0;
    w->sum_len = 0;
    w->failed = false;
    w->term_positional = false;
    w->term_imps_n = 0;
}

static bool grow_u32(uint32_t **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return true;
    size_t nc = *cap ? *cap : 256;
    while (nc < need)
        nc *= 2;
    uint32_t *np = qr_realloc(*p, nc * sizeof *np);
    if (!np)
        return false;
    *p = np;
    *cap = nc;
    return true;
}

static int postw_fail(PostingsWriter *w, QrError *err, QrCode code, const char *msg, uint32_t doc)
{
    w->failed = true;
    return qr_error_set(err, code, "%s (doc %u)", msg, doc);
}

int postw_add(PostingsWriter *w, uint32_t doc, uint32_t freq, const uint32_t *positions,
              uint32_t doc_len, QrError *err)
{
    if (w->failed)
        return qr_error_set(err, QR_EINVAL, "postings term abandoned after an earlier error");
    if (w->n && doc <= w->docs[w->n - 1])
        return postw_fail(w, err, QR_EINVAL, "postings doc ids not strictly ascending", doc);
    if (freq == 0)
        return postw_fail(w, err, QR_EINVAL, "postings term frequency of zero", doc);
    if (w->n >= UINT32_MAX)
        return postw_fail(w, err, QR_ELIMIT, "more than 2^32-1 docs for one term", doc);
    bool positional = w->with_positions && positions != NULL;
    if (w->n == 0)
        w->term_positional = positional;
    else if (positional != w->term_positional)
        return postw_fail(w, err, QR_EINVAL, "postings positions given for only some docs", doc);
    if (w->n == w->cap) { /* docs, freqs and lens share one capacity */
        size_t nc = w->cap ? w->cap * 2 : 256;
        uint32_t *nd = qr_realloc(w->docs, nc * sizeof *nd);
        if (!nd)
            goto oom;
        w->docs = nd;
        uint32_t *nf = qr_realloc(w->freqs, nc * sizeof *nf);
        if (!nf)
            goto oom;
        w->freqs = nf;
        uint32_t *nl = qr_realloc(w->lens, nc * sizeof *nl);
        if (!nl)
            goto oom;
        w->lens = nl;
        w->cap = nc;
    }
    if (positional) {
        for (uint32_t i = 1; i < freq; i++)
            if (positions[i] < positions[i - 1])
                return postw_fail(w, err, QR_EINVAL, "postings positions not ascending", doc);
        if (!grow_u32(&w->pos, &w->pos_cap, w->pos_n + freq))
            goto oom;
        uint32_t *o = w->pos + w->pos_n;
        o[0] = positions[0];
        for (uint32_t i = 1; i < freq; i++)
            o[i] = positions[i] - positions[i - 1];
        w->pos_n += freq;
    }
    w->docs[w->n] = doc;
    w->freqs[w->n] = freq;
    w->lens[w->n] = doc_len;
    w->n++;
    w->total_tf += freq;
    w->sum_len += doc_len;
    return QR_OK;
oom:
    return postw_fail(w, err, QR_ENOMEM, "out of memory buffering postings", doc);
}

/* Exact frontier of docs [from, from+n) into w->imps; returns its size and
 * appends it to the term-level candidates. */
static size_t postw_block_frontier(PostingsWriter *w, size_t from, size_t n, bool *ok)
{
    if (n > w->imps_cap) {
        Impact *ni = qr_realloc(w->imps, n * sizeof *ni);
        if (!ni) {
            *ok = false;
            return 0;
        }
        w->imps = ni;
        w->imps_cap = n;
    }
    for (size_t i = 0; i < n; i++)
        w->imps[i] = (Impact){w->freqs[from + i], w->lens[from + i]};
    size_t k = post_impact_frontier(w->imps, n);
    if (w->term_imps_n + k > w->term_imps_cap) {
        size_t nc = w->term_imps_cap ? w->term_imps_cap * 2 : 64;
        while (nc < w->term_imps_n + k)
            nc *= 2;
        Impact *nt = qr_realloc(w->term_imps, nc * sizeof *nt);
        if (!nt) {
            *ok = false;
            return 0;
        }
        w->term_imps = nt;
        w->term_imps_cap = nc;
    }
    memcpy(w->term_imps + w->term_imps_n, w->imps, k * sizeof *w->imps);
    w->term_imps_n += k;
    return k;
}

static unsigned width_code(uint64_t max)
{
    return max <= UINT8_MAX ? 0 : max <= UINT16_MAX ? 1 : max <= UINT32_MAX ? 2 : 3;
}

static void put_width(QrBuf *b, uint64_t v, unsigned code)
{
    switch (code) {
    case 0: qr_buf_putc(b, (uint8_t)v); break;
    case 1: qr_buf_put_u16(b, (uint16_t)v); break;
    case 2: qr_buf_put_u32(b, (uint32_t)v); break;
    default: qr_buf_put_u64(b, v); break;
    }
}

/* Gaps (minus one) and freqs of docs [from, from+n) as varints. */
static void postw_put_varint_docs(PostingsWriter *w, QrBuf *out, size_t from, size_t n,
                                  int64_t base)
{
    int64_t prev = base;
    for (size_t i = from; i < from + n; i++) {
        qr_buf_put_varint(out, (uint64_t)((int64_t)w->docs[i] - prev - 1));
        prev = w->docs[i];
    }
    for (size_t i = from; i < from + n; i++)
        qr_buf_put_varint(out, w->freqs[i] - 1);
}

/* Encode the full block of docs [from, from+128) into w->blocks. */
static void postw_full_block(PostingsWriter *w, size_t from, int64_t base)
{
    uint32_t gaps[POST_BLOCK], fm1[POST_BLOCK];
    const uint32_t *d = w->docs + from;
    gaps[0] = 0;
    for (size_t i = 1; i < POST_BLOCK; i++)
        gaps[i] = d[i] - d[i - 1] - 1;
    for (size_t i = 0; i < POST_BLOCK; i++)
        fm1[i] = w->freqs[from + i] - 1;
    unsigned bd = bits_of(gaps, POST_BLOCK), bf = bits_of(fm1, POST_BLOCK);
    qr_buf_putc(&w->blocks, (uint8_t)bd);
    qr_buf_putc(&w->blocks, (uint8_t)bf);
    qr_buf_put_varint(&w->blocks, (uint64_t)((int64_t)d[0] - base - 1));
    if (!qr_buf_reserve(&w->blocks, 16 * (bd + bf)))
        return;
    bp_pack(gaps, bd, w->blocks.data + w->blocks.len);
    bp_pack(fm1, bf, w->blocks.data + w->blocks.len + 16 * bd);
    w->blocks.len += 16 * (bd + bf);
}

/* Positions of docs [from, from+n): a run over their values. */
static void postw_put_positions(PostingsWriter *w, QrBuf *out, size_t from, size_t n,
                                size_t *pos_i)
{
    size_t cnt = 0;
    for (size_t i = from; i < from + n; i++)
        cnt += w->freqs[i];
    run_encode(out, w->pos + *pos_i, cnt);
    *pos_i += cnt;
}

/* Compact layout (df < 128): header, term impacts, varint gaps and freqs.
 * false on OOM. */
static bool postw_compact(PostingsWriter *w, QrBuf *docs_out, QrBuf *pos_out, uint8_t flags,
                          float avgdl)
{
    bool ok = true;
    size_t k = postw_block_frontier(w, 0, w->n, &ok), pos_i = 0;
    if (!ok)
        return false;
    k = imp_cap(w->imps, k, POST_TERM_IMPACTS, avgdl);
    qr_buf_putc(docs_out, flags | LAYOUT_COMPACT);
    imp_encode(docs_out, w->imps, k);
    postw_put_varint_docs(w, docs_out, 0, w->n, -1);
    if (w->term_positional)
        postw_put_positions(w, pos_out, 0, w->n, &pos_i);
    return true;
}

/* Term-level impacts: the frontier of the exact block frontiers, capped. */
static size_t postw_term_impacts(PostingsWriter *w, float avgdl)
{
    size_t k = post_impact_frontier(w->term_imps, w->term_imps_n);
    while (k > 512) { /* keep the quadratic capping cheap on odd data */
        size_t j = 0;
        for (size_t i = 0; i < k; i += 2)
            w->term_imps[j++] = i + 1 < k ? (Impact){w->term_imps[i + 1].tf, w->term_imps[i].len}
                                          : w->term_imps[i];
        k = j;
    }
    return imp_cap(w->term_imps, k, POST_TERM_IMPACTS, avgdl);
}

/* Blocked layout (df >= 128): the blocks go to w->blocks first, since the
 * skip arrays that precede them need their offsets.  false on OOM. */
static bool postw_blocked(PostingsWriter *w, QrBuf *docs_out, QrBuf *pos_out, uint8_t flags,
                          float avgdl)
{
    size_t n = w->n, nb = (n + POST_BLOCK - 1) / POST_BLOCK, pos_i = 0;
    bool positional = w->term_positional, ok = true;
    size_t pos_start = positional ? pos_out->len : 0;
    uint64_t *doc_offs = qr_malloc(nb * 2 * sizeof *doc_offs);
    if (!doc_offs)
        return false;
    uint64_t *pos_offs = doc_offs + nb;
    w->blocks.len = 0;
    int64_t base = -1;
    for (size_t b = 0; b < nb && ok; b++) {
        size_t from = b * POST_BLOCK, cnt = n - from < POST_BLOCK ? n - from : POST_BLOCK;
        doc_offs[b] = w->blocks.len;
        pos_offs[b] = positional ? pos_out->len - pos_start : 0;
        size_t k = postw_block_frontier(w, from, cnt, &ok);
        k = imp_cap(w->imps, k, POST_BLOCK_IMPACTS, avgdl);
        imp_encode(&w->blocks, w->imps, k);
        if (cnt == POST_BLOCK)
            postw_full_block(w, from, base);
        else
            postw_put_varint_docs(w, &w->blocks, from, cnt, base);
        if (positional)
            postw_put_positions(w, pos_out, from, cnt, &pos_i);
        base = w->docs[from + cnt - 1];
    }
    if (ok) {
        unsigned dwc = width_code(doc_offs[nb - 1]), pwc = width_code(pos_offs[nb - 1]);
        qr_buf_putc(docs_out, flags | LAYOUT_BLOCKED);
        imp_encode(docs_out, w->term_imps, postw_term_impacts(w, avgdl));
        qr_buf_putc(docs_out, (uint8_t)(dwc | pwc << 2));
        for (size_t b = 0; b < nb; b++)
            qr_buf_put_u32(docs_out, w->docs[b + 1 < nb ? (b + 1) * POST_BLOCK - 1 : n - 1]);
        for (size_t b = 0; b < nb; b++)
            put_width(docs_out, doc_offs[b], dwc);
        for (size_t b = 0; positional && b < nb; b++)
            put_width(docs_out, pos_offs[b], pwc);
        qr_buf_append(docs_out, w->blocks.data, w->blocks.len);
    }
    qr_free(doc_offs);
    return ok && qr_buf_ok(&w->blocks);
}

int postw_end_term(PostingsWriter *w, QrBuf *docs_out, QrBuf *pos_out, TermPostings *tp,
                   QrError *err)
{
    if (w->failed)
        return qr_error_set(err, QR_EINVAL, "postings term abandoned after an earlier error");
    memset(tp, 0, sizeof *tp);
    if (w->n == 0)
        return QR_OK;
    bool positional = w->term_positional;
    if (positional && !pos_out)
        return qr_error_set(err, QR_EINVAL, "positions stream missing for a positional term");
    size_t start = docs_out->len, pos_start = positional ? pos_out->len : 0;
    float avgdl = (float)((double)w->sum_len / (double)w->n);
    uint8_t flags = POST_VERSION << 4 | (positional ? FLAG_POSITIONS : 0);
    w->term_imps_n = 0;
    bool ok = w->n < POST_BLOCK ? postw_compact(w, docs_out, pos_out, flags, avgdl)
                                : postw_blocked(w, docs_out, pos_out, flags, avgdl);
    if (!ok || !qr_buf_ok(docs_out) || (positional && !qr_buf_ok(pos_out)))
        return qr_error_set(err, QR_ENOMEM, "out of memory encoding postings");
    if (docs_out->len - start > UINT32_MAX)
        return qr_error_set(err, QR_ELIMIT, "postings of one term exceed 4 GiB");
    tp->df = (uint32_t)w->n;
    tp->total_tf = w->total_tf;
    tp->docs_off = start;
    tp->docs_len = (uint32_t)(docs_out->len - start);
    tp->pos_off = positional ? pos_start : 0;
    tp->pos_len = positional ? pos_out->len - pos_start : 0;
    w->n = 0;
    w->pos_n = 0;
    return QR_OK;
}

/* ======================================================================
 * Iterator
 * ====================================================================== */

/* Invariants: blk is the loaded block (BLK_NONE before the first load);
 * docs[0..n) are its doc ids; cur indexes the current doc (-1 before the
 * block's first, n == 0 and doc == ITER_END at the end).  freqs[] is valid
 * when freqs_ready, posbuf/posoff when pos_ready.  After an error the
 * iterator sits at ITER_END with `dead` set.  The three per-block arrays
 * hold min(df, 128) entries and follow the struct in the same arena block,
 * so a rare term's iterator stays small (prefix and fuzzy queries open
 * thousands of them). */
typedef struct PostIter {
    Iter base;
    uint32_t *docs;             /* arena: current block's doc ids */
    uint32_t *freqs;            /* arena: its tfs, when freqs_ready */
    uint32_t *posoff;           /* arena: start of each doc's positions in posbuf */
    int32_t cur;                /* index of doc in docs[] */
    int32_t n;                  /* docs in the loaded block */
    uint32_t blk;               /* loaded block, BLK_NONE if none */
    uint32_t n_blocks;          /* 1 for the compact layout */
    uint32_t df;
    bool compact;               /* layout 0 */
    bool has_pos;               /* the term stores positions */
    bool dead;                  /* an error was recorded: stay at the end */
    bool freqs_ready, pos_ready;
    uint8_t dw, pw;             /* skip offset widths in bytes */
    uint8_t freq_bits;          /* full block: bits of freq - 1 */
    const uint8_t *term;        /* borrows: the term's docs bytes */
    size_t term_len;
    const uint8_t *skip_last;   /* borrows: u32 last doc per block */
    const uint8_t *skip_doc;    /* borrows: dw-byte block offsets */
    const uint8_t *skip_pos;    /* borrows: pw-byte positions offsets (has_pos) */
    const uint8_t *blocks;      /* borrows: block[0] (compact: the body) */
    size_t blocks_len;
    const uint8_t *freq_p;      /* borrows: the loaded block's frequencies */
    const uint8_t *freq_end;
    const uint8_t *pos;         /* borrows: the term's positions bytes (NULL if unwanted) */
    size_t pos_len;
    uint64_t docs_off;          /* for messages */
    uint32_t *posbuf;           /* arena: positions of the loaded block */
    size_t pos_cap;
    PostScorer sc;              /* copy; norms borrowed */
    uint64_t doc_limit;         /* doc ids must be below this (UINT64_MAX: unchecked) */
    float max_score;
    uint32_t bm_blk;            /* block_max cache */
    float bm_val;
} PostIter;

#define BLK_NONE UINT32_MAX

static DocId pi_finish(PostIter *p)
{
    p->n = 0;
    p->cur = 0;
    p->blk = p->n_blocks;
    return p->base.doc = ITER_END;
}

static bool pi_corrupt(PostIter *p, uint32_t blk, const char *what)
{
    QrError *e = &p->base.ctx->err;
    if (!p->dead && e->code == QR_OK) {
        qr_error_set(e, QR_ECORRUPT, "corrupt postings block %u of term at offset %llu", blk,
                     (unsigned long long)p->docs_off);
        qr_error_detail(e, "%s", what);
        qr_error_hint(e, "rebuild or restore the segment");
    }
    p->dead = true;
    pi_finish(p);
    return false;
}

static inline uint32_t sk_last(const PostIter *p, uint32_t b)
{
    return qr_get_u32le(p->skip_last + 4 * (size_t)b);
}

static inline uint64_t ld_width(const uint8_t *q, unsigned w)
{
    switch (w) {
    case 1: return q[0];
    case 2: return qr_get_u16le(q);
    case 4: return qr_get_u32le(q);
    default: return qr_get_u64le(q);
    }
}

/* First block >= from whose last doc is >= t; n_blocks if none.  Galloping
 * then binary search over the skip array, keeping last(lo) < t <= last(hi)
 * so the answer's skip entry is >= t even over damaged (unsorted) bytes. */
static uint32_t pi_find_block(const PostIter *p, uint32_t from, uint32_t t)
{
    uint32_t nb = p->n_blocks;
    if (from >= nb)
        return nb;
    if (sk_last(p, from) >= t)
        return from;
    uint32_t lo = from, step = 1;
    while (lo + step < nb && sk_last(p, lo + step) < t) {
        lo += step;
        step <<= 1;
    }
    uint32_t hi = lo + step < nb ? lo + step : nb - 1;
    if (sk_last(p, hi) < t)
        return nb;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (sk_last(p, mid) < t)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

/* Varint gaps of a tail/compact block: n docs after base; sets freq_p. */
static bool pi_decode_varint_docs(PostIter *p, const uint8_t *q, const uint8_t *end, int64_t base,
                                  uint32_t blk)
{
    int64_t d = base;
    for (int32_t i = 0; i < p->n; i++) {
        uint32_t g;
        if (!(q = vdec32(q, end, &g)))
            return pi_corrupt(p, blk, "doc gap runs past the block");
        d += (int64_t)g + 1;
        if (d > UINT32_MAX)
            return pi_corrupt(p, blk, "doc id beyond 2^32-1");
        p->docs[i] = (uint32_t)d;
    }
    p->freq_p = q;
    p->freq_end = end;
    return true;
}

/* Load block b: decode its doc ids (not its freqs).  Checks the deadline
 * once per block.  false at an error (recorded, iterator at the end). */
static bool pi_load(PostIter *p, uint32_t b)
{
    Iter *it = &p->base;
    if (iter_ctx_interrupted(it->ctx)) {
        p->dead = true;
        pi_finish(p);
        return false;
    }
    it->stats.blocks_decoded++;
    if (p->compact) {
        p->n = (int32_t)p->df;
        if (!pi_decode_varint_docs(p, p->blocks, p->blocks + p->blocks_len, -1, 0))
            return false;
    } else {
        uint64_t s = ld_width(p->skip_doc + (size_t)b * p->dw, p->dw);
        uint64_t e = b + 1 < p->n_blocks ? ld_width(p->skip_doc + (size_t)(b + 1) * p->dw, p->dw)
                                         : p->blocks_len;
        if (s > e || e > p->blocks_len)
            return pi_corrupt(p, b, "block offset outside the term");
        const uint8_t *q = p->blocks + s, *end = p->blocks + e;
        if (q >= end || (size_t)(end - q) <= *q)
            return pi_corrupt(p, b, "impacts run past the block");
        q += 1 + *q;
        int64_t base = b ? (int64_t)sk_last(p, b - 1) : -1;
        p->n = b + 1 < p->n_blocks ? POST_BLOCK : (int32_t)(p->df - (uint64_t)b * POST_BLOCK);
        if (p->n == POST_BLOCK) {
            if (end - q < 2 || q[0] > 32 || q[1] > 32)
                return pi_corrupt(p, b, "bad bit widths");
            unsigned bd = q[0], bf = q[1];
            uint32_t g0;
            if (!(q = vdec32(q + 2, end, &g0)))
                return pi_corrupt(p, b, "bad first gap");
            if ((size_t)(end - q) != 16u * (bd + bf))
                return pi_corrupt(p, b, "packed block length mismatch");
            uint64_t maxgap = bd == 32 ? UINT32_MAX : (1ull << bd) - 1;
            bp_unpack_docs(q, bd, (uint32_t)(base + (int64_t)g0), p->docs);
            if ((uint64_t)(base + 1 + g0) + (POST_BLOCK - 1) * (maxgap + 1) > UINT32_MAX) {
                /* a wrap is possible: check the order by hand */
                if (base >= 0 && p->docs[0] <= (uint64_t)base)
                    return pi_corrupt(p, b, "doc ids wrap");
                for (int i = 1; i < POST_BLOCK; i++)
                    if (p->docs[i] <= p->docs[i - 1])
                        return pi_corrupt(p, b, "doc ids wrap");
            }
            p->freq_p = q + 16 * bd;
            p->freq_end = end;
            p->freq_bits = (uint8_t)bf;
        } else {
            if (!pi_decode_varint_docs(p, q, end, base, b))
                return false;
        }
        if (p->docs[p->n - 1] != sk_last(p, b))
            return pi_corrupt(p, b, "last doc differs from the skip entry");
    }
    if (it->doc != ITER_NONE && (DocId)p->docs[0] <= it->doc)
        return pi_corrupt(p, b, "doc ids not ascending across blocks");
    if (p->docs[p->n - 1] >= p->doc_limit)
        return pi_corrupt(p, b, "doc id beyond the segment's doc count");
    p->blk = b;
    p->cur = -1;
    p->freqs_ready = false;
    p->pos_ready = false;
    return true;
}

static bool pi_decode_freqs(PostIter *p)
{
    if (p->n == POST_BLOCK) { /* a full block (compact lists are shorter) */
        bp_unpack_add(p->freq_p, p->freq_bits, 1, p->freqs);
    } else {
        const uint8_t *q = p->freq_p;
        for (int32_t i = 0; i < p->n; i++) {
            uint32_t f;
            if (!(q = vdec32(q, p->freq_end, &f)) || f == UINT32_MAX)
                goto bad;
            p->freqs[i] = f + 1;
        }
        if (q != p->freq_end)
            goto bad;
    }
    p->freqs_ready = true;
    return true;
bad:
    for (int32_t i = 0; i < p->n; i++)
        p->freqs[i] = 1;
    p->freqs_ready = true;
    uint32_t blk = p->blk;
    DocId keep = p->base.doc;
    pi_corrupt(p, blk, "bad term frequencies");
    p->base.doc = keep; /* the current doc stays readable; the next move ends */
    return false;
}

static bool pi_decode_positions(PostIter *p)
{
    uint32_t b = p->blk;
    if (!p->freqs_ready && !pi_decode_freqs(p))
        return false;
    uint64_t s = 0, e = p->pos_len;
    if (!p->compact) {
        s = ld_width(p->skip_pos + (size_t)b * p->pw, p->pw);
        if (b + 1 < p->n_blocks)
            e = ld_width(p->skip_pos + (size_t)(b + 1) * p->pw, p->pw);
    }
    DocId keep = p->base.doc;
    uint64_t total = 0;
    for (int32_t i = 0; i < p->n; i++) {
        p->posoff[i] = (uint32_t)total;
        total += p->freqs[i];
    }
    const char *why = NULL;
    if (s > e || e > p->pos_len)
        why = "positions offset outside the term";
    else if (total > (e - s) * POST_BLOCK || total > UINT32_MAX / 8)
        why = "more positions than the positions bytes can hold";
    if (!why && (total > p->pos_cap || !p->posbuf)) {
        size_t nc = p->pos_cap * 2 > total ? p->pos_cap * 2 : (size_t)total;
        if (nc < 256)
            nc = 256;
        uint32_t *nb = qr_arena_alloc(p->base.ctx->arena, nc * sizeof *nb);
        if (!nb) {
            if (qr_arena_over_cap(p->base.ctx->arena))
                iter_ctx_fail(p->base.ctx, QR_ELIMIT, "query exceeded its memory limit");
            else
                iter_ctx_fail(p->base.ctx, QR_ENOMEM, "out of memory decoding positions");
            p->dead = true;
            pi_finish(p);
            p->base.doc = keep;
            return false;
        }
        p->posbuf = nb;
        p->pos_cap = nc;
    }
    if (!why && !run_decode(p->pos + s, p->pos + e, p->posbuf, (size_t)total))
        why = "bad positions block";
    if (why) {
        pi_corrupt(p, b, why);
        p->base.doc = keep;
        return false;
    }
    for (int32_t i = 0; i < p->n; i++) {
        uint32_t *v = p->posbuf + p->posoff[i];
        for (uint32_t k = 1; k < p->freqs[i]; k++)
            v[k] += v[k - 1];
    }
    p->pos_ready = true;
    return true;
}

/* Slow half of next(): move to the next block. */
static DocId pi_next_block(PostIter *p)
{
    Iter *it = &p->base;
    if (it->doc == ITER_END)
        return ITER_END;
    uint32_t b = p->blk + 1; /* BLK_NONE + 1 == 0 */
    if (b >= p->n_blocks || p->dead)
        return pi_finish(p);
    if (!pi_load(p, b))
        return ITER_END;
    p->cur = 0;
    it->stats.docs_returned++;
    return it->doc = p->docs[0];
}

static DocId pi_next(Iter *it)
{
    PostIter *p = (PostIter *)it;
    int32_t c = p->cur + 1;
    if (LIKELY(c < p->n)) {
        p->cur = c;
        it->stats.docs_returned++;
        return it->doc = p->docs[c];
    }
    return pi_next_block(p);
}

static DocId pi_advance(Iter *it, DocId target)
{
    PostIter *p = (PostIter *)it;
    if (it->doc != ITER_NONE && target <= it->doc)
        return it->doc;
    if (target < 0)
        target = 0;
    if (target > (DocId)UINT32_MAX || p->dead)
        return pi_finish(p);
    uint32_t t = (uint32_t)target;
    if (p->n == 0 || t > p->docs[p->n - 1]) {
        uint32_t from = p->blk == BLK_NONE ? 0 : p->blk + 1;
        uint32_t b = p->compact ? (from == 0 ? 0 : 1) : pi_find_block(p, from, t);
        if (b >= p->n_blocks)
            return pi_finish(p);
        it->stats.blocks_skipped += b - from;
        if (!pi_load(p, b))
            return ITER_END;
        if (t > p->docs[p->n - 1]) {
            if (p->compact)
                return pi_finish(p);
            pi_corrupt(p, b, "skip entry below the target");
            return ITER_END;
        }
    }
    /* gallop from cur + 1; docs[n - 1] >= t holds */
    const uint32_t *d = p->docs;
    uint32_t lo = (uint32_t)(p->cur + 1), n = (uint32_t)p->n;
    if (d[lo] < t) {
        uint32_t step = 1;
        while (lo + step < n && d[lo + step] < t) {
            lo += step;
            step <<= 1;
        }
        uint32_t hi = lo + step < n ? lo + step : n - 1; /* d[lo] < t <= d[hi] */
        while (hi - lo > 1) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (d[mid] < t)
                lo = mid;
            else
                hi = mid;
        }
        lo = hi;
    }
    p->cur = (int32_t)lo;
    it->stats.docs_returned++;
    return it->doc = d[lo];
}

static uint64_t pi_cost(Iter *it)
{
    PostIter *p = (PostIter *)it;
    if (it->doc == ITER_END)
        return 0;
    if (p->blk == BLK_NONE)
        return p->df;
    uint64_t before = (uint64_t)p->blk * POST_BLOCK + (uint64_t)(p->cur + 1);
    return before >= p->df ? 0 : p->df - before;
}

static inline bool pi_on_doc(const PostIter *p)
{
    return p->cur >= 0 && p->cur < p->n && p->base.doc != ITER_END && p->base.doc != ITER_NONE;
}

static uint32_t pi_freq(Iter *it)
{
    PostIter *p = (PostIter *)it;
    if (!pi_on_doc(p))
        return 0;
    if (UNLIKELY(!p->freqs_ready))
        pi_decode_freqs(p);
    return p->freqs[p->cur];
}

static float pi_score(Iter *it)
{
    PostIter *p = (PostIter *)it;
    if (!pi_on_doc(p))
        return 0;
    if (UNLIKELY(!p->freqs_ready))
        pi_decode_freqs(p);
    uint32_t d = p->docs[p->cur]; /* < n_docs: checked when the block was loaded */
    return bm25_term_score(&p->sc, p->freqs[p->cur], p->sc.norms[d]);
}

static float pi_max_score(Iter *it) { return ((PostIter *)it)->max_score; }

static float pi_block_max(Iter *it, DocId target, DocId *block_last)
{
    PostIter *p = (PostIter *)it;
    *block_last = ITER_END;
    if (it->doc == ITER_END || p->dead)
        return 0;
    if (it->doc != ITER_NONE && target < it->doc)
        target = it->doc;
    if (target < 0)
        target = 0;
    if (target > (DocId)UINT32_MAX)
        return 0;
    uint32_t t = (uint32_t)target;
    if (p->compact) {
        if (p->blk == BLK_NONE && !pi_load(p, 0)) /* doc is ITER_NONE: it stays so */
            return 0;
        if (p->n == 0 || t > p->docs[p->n - 1])
            return 0;
        *block_last = p->docs[p->n - 1];
        return p->max_score;
    }
    uint32_t from = p->blk == BLK_NONE ? 0 : p->blk;
    uint32_t b = pi_find_block(p, from, t);
    if (b >= p->n_blocks)
        return 0;
    *block_last = sk_last(p, b);
    if (b == p->bm_blk)
        return p->bm_val;
    uint64_t s = ld_width(p->skip_doc + (size_t)b * p->dw, p->dw);
    float v;
    if (s >= p->blocks_len || p->blocks_len - s - 1 < p->blocks[s] ||
        !imp_bound(&p->sc, p->blocks + s + 1, p->blocks + s + 1 + p->blocks[s], &v)) {
        DocId keep = it->doc;
        pi_corrupt(p, b, "bad block impacts");
        it->doc = keep; /* block_max never moves doc; the next move ends */
        *block_last = ITER_END;
        return 0;
    }
    if (v > p->max_score) /* both bound the block; keep the tighter */
        v = p->max_score;
    p->bm_blk = b;
    p->bm_val = v;
    return v;
}

static const uint32_t *pi_positions(Iter *it, uint32_t *n)
{
    PostIter *p = (PostIter *)it;
    *n = 0;
    if (!p->has_pos || !pi_on_doc(p))
        return NULL;
    if (!p->pos_ready && !pi_decode_positions(p))
        return NULL;
    *n = p->freqs[p->cur];
    return p->posbuf + p->posoff[p->cur];
}

static const IterVT pi_vt_plain = {
    .name = "postings", .next = pi_next, .advance = pi_advance, .cost = pi_cost,
    .freq = pi_freq,
};
static const IterVT pi_vt_pos = {
    .name = "postings", .next = pi_next, .advance = pi_advance, .cost = pi_cost,
    .freq = pi_freq, .positions = pi_positions,
};
static const IterVT pi_vt_score = {
    .name = "postings", .next = pi_next, .advance = pi_advance, .cost = pi_cost,
    .score = pi_score, .max_score = pi_max_score, .block_max = pi_block_max, .freq = pi_freq,
};
static const IterVT pi_vt_score_pos = {
    .name = "postings", .next = pi_next, .advance = pi_advance, .cost = pi_cost,
    .score = pi_score, .max_score = pi_max_score, .block_max = pi_block_max, .freq = pi_freq,
    .positions = pi_positions,
};

void post_iter_set_doc_limit(Iter *it, uint32_t n_docs)
{
    if (post_iter_is(it)) {
        PostIter *p = (PostIter *)it;
        if (n_docs < p->doc_limit)
            p->doc_limit = n_docs;
    }
}

bool post_iter_is(const Iter *it)
{
    return it && (it->vt == &pi_vt_plain || it->vt == &pi_vt_pos || it->vt == &pi_vt_score ||
                  it->vt == &pi_vt_score_pos);
}

/* Parse the term header; false (error recorded) when damaged. */
static bool pi_open_term(PostIter *p, const uint8_t *docs_stream, size_t docs_stream_len,
                         const uint8_t *pos_stream, size_t pos_stream_len, const TermPostings *tp,
                         bool want_positions)
{
    if (tp->docs_off > docs_stream_len || tp->docs_len > docs_stream_len - tp->docs_off)
        return pi_corrupt(p, 0, "term data outside the postings stream");
    const uint8_t *q = docs_stream + tp->docs_off, *end = q + tp->docs_len;
    p->term = q;
    p->term_len = tp->docs_len;
    if (end - q < 2)
        return pi_corrupt(p, 0, "term header truncated");
    uint8_t flags = q[0];
    if (flags >> 4 != POST_VERSION || (flags & 0x0b) > LAYOUT_BLOCKED)
        return pi_corrupt(p, 0, "unknown postings format version or layout");
    p->compact = (flags & 3) == LAYOUT_COMPACT;
    p->has_pos = (flags & FLAG_POSITIONS) != 0;
    size_t imp_len = q[1];
    if ((size_t)(end - q - 2) < imp_len)
        return pi_corrupt(p, 0, "term impacts truncated");
    const uint8_t *imp = q + 2;
    q += 2 + imp_len;
    if (p->sc.norms) {
        float v;
        if (!imp_bound(&p->sc, imp, imp + imp_len, &v))
            return pi_corrupt(p, 0, "bad term impacts");
        p->max_score = v;
    }
    if (p->compact) {
        if (tp->df >= POST_BLOCK)
            return pi_corrupt(p, 0, "compact layout with a long list");
        p->n_blocks = 1;
    } else {
        if (tp->df < POST_BLOCK)
            return pi_corrupt(p, 0, "blocked layout with a short list");
        uint64_t nb = ((uint64_t)tp->df + POST_BLOCK - 1) / POST_BLOCK;
        if (q >= end)
            return pi_corrupt(p, 0, "skip data truncated");
        p->dw = (uint8_t)(1u << (*q & 3));
        p->pw = (uint8_t)(1u << (*q >> 2 & 3));
        q++;
        uint64_t need = nb * (4 + p->dw + (p->has_pos ? p->pw : 0));
        if (need > (uint64_t)(end - q))
            return pi_corrupt(p, 0, "skip data truncated");
        p->n_blocks = (uint32_t)nb;
        p->skip_last = q;
        p->skip_doc = q + nb * 4;
        p->skip_pos = p->has_pos ? p->skip_doc + nb * p->dw : NULL;
        q += need;
    }
    p->blocks = q;
    p->blocks_len = (size_t)(end - q);
    if (want_positions && p->has_pos) {
        if (!pos_stream || tp->pos_off > pos_stream_len ||
            tp->pos_len > pos_stream_len - tp->pos_off)
            return pi_corrupt(p, 0, "term positions outside the positions stream");
        p->pos = pos_stream + tp->pos_off;
        p->pos_len = tp->pos_len;
    } else {
        p->has_pos = false; /* positions() answers NULL */
    }
    p->df = tp->df;
    return true;
}

Iter *post_iter_open(IterCtx *ctx, const uint8_t *docs_stream, size_t docs_stream_len,
                     const uint8_t *pos_stream, size_t pos_stream_len, const TermPostings *tp,
                     const PostScorer *scorer, bool want_positions)
{
    size_t cap = tp->df < POST_BLOCK ? tp->df : POST_BLOCK;
    size_t head = (sizeof(PostIter) + 15) & ~(size_t)15;
    PostIter *p = qr_arena_alloc(ctx->arena, head + 3 * ((cap * 4 + 15) & ~(size_t)15));
    if (!p) {
        if (qr_arena_over_cap(ctx->arena))
            iter_ctx_fail(ctx, QR_ELIMIT, "query exceeded its memory limit");
        else
            iter_ctx_fail(ctx, QR_ENOMEM, "out of memory building a postings iterator");
        return NULL;
    }
    memset(p, 0, sizeof *p);
    p->docs = (uint32_t *)(void *)((uint8_t *)p + head);
    p->freqs = p->docs + ((cap + 3) & ~(size_t)3);
    p->posoff = p->freqs + ((cap + 3) & ~(size_t)3);
    const IterVT *vt = scorer ? (want_positions ? &pi_vt_score_pos : &pi_vt_score)
                              : (want_positions ? &pi_vt_pos : &pi_vt_plain);
    iter_init(&p->base, vt, ctx);
    p->blk = BLK_NONE;
    p->bm_blk = BLK_NONE;
    p->cur = -1;
    p->docs_off = tp->docs_off;
    p->doc_limit = UINT64_MAX;
    if (scorer) {
        p->sc = *scorer;
        p->doc_limit = scorer->n_docs;
        if (!scorer->norms && scorer->n_docs) {
            iter_ctx_fail(ctx, QR_EINVAL, "postings scorer without field lengths");
            p->dead = true;
        }
        if (!p->sc.norms) /* n_docs == 0: every doc id fails the range check */
            p->sc.norms = (const uint32_t *)&p->sc.n_docs;
    }
    if (!p->dead && tp->df == 0) {
        p->n_blocks = 0; /* an empty term */
    } else if (!p->dead && !pi_open_term(p, docs_stream, docs_stream_len, pos_stream,
                                         pos_stream_len, tp, want_positions)) {
        p->n_blocks = 0;
    }
    if (p->dead)
        p->n_blocks = 0;
    p->base.doc = ITER_NONE; /* an early error leaves the contract's start state */
    p->blk = BLK_NONE;
    p->cur = -1;
    p->n = 0;
    return &p->base;
}

size_t post_iter_fill(Iter *it, uint32_t *out, size_t cap)
{
    PostIter *p = (PostIter *)it;
    size_t k = 0;
    while (k < cap) {
        int32_t c = p->cur + 1;
        if (c >= p->n) {
            /* stop at a block boundary once something was copied, so the
             * iterator never passes to ITER_END with docs handed out */
            if (k > 0 || pi_next_block(p) == ITER_END)
                break;
            it->stats.docs_returned--; /* counted below with the rest */
            c = 0;
        }
        size_t m = (size_t)(p->n - c);
        if (m > cap - k)
            m = cap - k;
        memcpy(out + k, p->docs + c, m * sizeof *out);
        k += m;
        p->cur = c + (int32_t)m - 1;
        it->doc = p->docs[p->cur];
        it->stats.docs_returned += m;
    }
    return k;
}
