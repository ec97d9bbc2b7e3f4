/*
 * column_pack.c — bit packing for column blocks, the radix sort the writer's
 * statistics use, and the value hashes behind HyperLogLog.
 *
 * Layer: store/.  Calls column_int.h only.
 *
 * Packed streams are LSB-first: value i occupies bits [i*w, (i+1)*w) of the
 * little-endian byte stream, and 8 zero slack bytes follow the last value so
 * that every value can be read with one unaligned 64-bit load (plus one byte
 * for w > 57).  Groups of 64 values start on byte 8*w*g, which is what lets
 * the unpackers below be straight-line code: with w and the value index both
 * compile-time constants every load has a fixed displacement and shift.
 */
#include "store/column_int.h"

void col_bp_pack(const uint64_t *vals, size_t n, unsigned w, uint8_t *out)
{
    if (w == 0)
        return;
    uint64_t o = 0;
    for (size_t i = 0; i < n; i++, o += w) {
        uint64_t v = vals[i];
        unsigned s = (unsigned)(o & 7);
        uint8_t *p = out + (o >> 3);
        uint64_t cur = col_ld64(p) | (v << s);
        memcpy(p, &cur, 8);
        if (s && w + s > 64)
            p[8] |= (uint8_t)(v >> (64 - s));
    }
}

/* One value of a group; w and i are constants after inlining/unrolling. */
static inline __attribute__((always_inline)) uint64_t up_one(const uint8_t *in, unsigned w, unsigned i)
{
    if (w == 0)
        return 0;
    const unsigned o = i * w;
    const unsigned s = o & 7;
    uint64_t x = col_ld64(in + (o >> 3)) >> s;
    if (w + s > 64)
        x |= (uint64_t)in[(o >> 3) + 8] << (64 - s);
    return w == 64 ? x : (x & ((1ull << w) - 1));
}

#define COL_UP32(W)                                                           \
    static void up32_##W(const uint8_t *in, uint32_t *out)                    \
    {                                                                         \
        _Pragma("GCC unroll 64") for (unsigned i = 0; i < 64; i++) out[i] =   \
            (uint32_t)up_one(in, W, i);                                       \
    }
#define COL_UP64(W)                                                           \
    static void up64_##W(const uint8_t *in, uint64_t *out)                    \
    {                                                                         \
        _Pragma("GCC unroll 64") for (unsigned i = 0; i < 64; i++) out[i] =   \
            up_one(in, W, i);                                                 \
    }
#define COL_X10(M, a) M(a##0) M(a##1) M(a##2) M(a##3) M(a##4) M(a##5) M(a##6) M(a##7) M(a##8) M(a##9)

COL_UP32(0) COL_UP32(1) COL_UP32(2) COL_UP32(3) COL_UP32(4) COL_UP32(5) COL_UP32(6)
COL_UP32(7) COL_UP32(8) COL_UP32(9) COL_X10(COL_UP32, 1) COL_X10(COL_UP32, 2)
COL_UP32(30) COL_UP32(31) COL_UP32(32)

COL_UP64(0) COL_UP64(1) COL_UP64(2) COL_UP64(3) COL_UP64(4) COL_UP64(5) COL_UP64(6)
COL_UP64(7) COL_UP64(8) COL_UP64(9) COL_X10(COL_UP64, 1) COL_X10(COL_UP64, 2)
COL_X10(COL_UP64, 3) COL_X10(COL_UP64, 4) COL_X10(COL_UP64, 5) COL_UP64(60) COL_UP64(61)
COL_UP64(62) COL_UP64(63) COL_UP64(64)

#define COL_R10(p, a) p##a##0, p##a##1, p##a##2, p##a##3, p##a##4, p##a##5, p##a##6, p##a##7, p##a##8, p##a##9

const ColUnpack32 col_unpack32[33] = {
    up32_0, up32_1, up32_2, up32_3, up32_4, up32_5, up32_6, up32_7, up32_8, up32_9,
    COL_R10(up32_, 1), COL_R10(up32_, 2), up32_30, up32_31, up32_32,
};

const ColUnpack64 col_unpack64[65] = {
    up64_0, up64_1, up64_2, up64_3, up64_4, up64_5, up64_6, up64_7, up64_8, up64_9,
    COL_R10(up64_, 1), COL_R10(up64_, 2), COL_R10(up64_, 3), COL_R10(up64_, 4),
    COL_R10(up64_, 5), up64_60, up64_61, up64_62, up64_63, up64_64,
};

void col_sort_u64(uint64_t *a, uint64_t *tmp, size_t n)
{
    if (n < 2)
        return;
    uint64_t *src = a, *dst = tmp;
    for (unsigned shift = 0; shift < 64; shift += 8) {
        size_t count[256] = {0};
        for (size_t i = 0; i < n; i++)
            count[(src[i] >> shift) & 0xFF]++;
        if (count[(src[0] >> shift) & 0xFF] == n)
            continue; /* every key has this byte: the pass would be a copy */
        size_t pos = 0;
        for (unsigned b = 0; b < 256; b++) {
            size_t c = count[b];
            count[b] = pos;
            pos += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[count[(src[i] >> shift) & 0xFF]++] = src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, n * sizeof *a);
}

/* MurmurHash64A (Austin Appleby, public domain), seed fixed: on-disk HLL
 * registers depend on it, so it never changes within a format version. */
uint64_t col_hash_bytes(const void *p, size_t n)
{
    const uint64_t m = 0xc6a4a7935bd1e995ull;
    const unsigned r = 47;
    const uint8_t *d = p;
    uint64_t h = 0x5175617272794331ull ^ (n * m);
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t k = col_ld64(d + i);
        k *= m;
        k ^= k >> r;
        k *= m;
        h ^= k;
        h *= m;
    }
    const uint8_t *t = d + (n & ~(size_t)7);
    switch (n & 7) {
    case 7: h ^= (uint64_t)t[6] << 48; /* fall through */
    case 6: h ^= (uint64_t)t[5] << 40; /* fall through */
    case 5: h ^= (uint64_t)t[4] << 32; /* fall through */
    case 4: h ^= (uint64_t)t[3] << 24; /* fall through */
    case 3: h ^= (uint64_t)t[2] << 16; /* fall through */
    case 2: h ^= (uint64_t)t[1] << 8;  /* fall through */
    case 1: h ^= (uint64_t)t[0]; h *= m;
    }
    h ^= h >> r;
    h *= m;
    h ^= h >> r;
    return h;
}

/* splitmix64 finalizer (the increment keeps key 0 from hashing to 0). */
uint64_t col_hash_u64(uint64_t v)
{
    v += 0x9E3779B97F4A7C15ull;
    v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ull;
    v = (v ^ (v >> 27)) * 0x94D049BB133111EBull;
    return v ^ (v >> 31);
}
