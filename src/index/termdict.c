/*
 * termdict.c — the term dictionary: writer, validating reader, lookup,
 * cursors, prefix and fuzzy enumeration (index/termdict.h).
 *
 * Layer: index/.  Calls store/ base kit (error, mem, buf).
 *
 * FORMAT (little-endian; varints are LEB128):
 *
 *   header  magic:u32 = "QTD1"   version:u32 = 1
 *   block[0] .. block[nb-1]       TD_BLOCK_KEYS entries each, the last fewer
 *   index   off:u64 [nb]          start of each block, from the header start
 *   footer  n_keys:u64  index_off:u64  n_blocks:u32  max_key_len:u32
 *           keys_per_block:u32  magic:u32 = "QTDE"                 (32 bytes)
 *
 *   block   keys_len:varint  key[cnt] (keys_len bytes)  value[cnt]
 *   key     shared:varint  suffix_len:varint  suffix[suffix_len]
 *   value   df:varint  tf_extra:varint (= total_tf - df)
 *           docs_delta:varint  docs_len:varint  pos_delta:varint  pos_len:varint
 *
 *   key = previous key[0..shared) + suffix.  The first key of a block has
 *   shared = 0, so it is readable in place: the index search compares
 *   against it (through an in-memory copy of its first 8 bytes, built at
 *   open).  shared is maximal (the suffix starts where the keys differ).
 *   Keys and values sit in separate areas so that scans (seek, lookup, the
 *   fuzzy walk) parse keys only; values decode on demand, in order.
 *   Offsets are delta-coded against where the previous term's data ended,
 *   zigzag-signed, so terms written back to back cost one byte each:
 *     docs_off = exp_docs + unzigzag(docs_delta)   exp_docs = prev docs_off + docs_len
 *     pos_off  = exp_pos  + unzigzag(pos_delta)    exp_pos  = prev pos end (terms with
 *                                                  pos_len 0 leave it unchanged)
 *   Both expectations restart at 0 in each block, so a block decodes alone.
 *
 *   Why not an FST: see docs/postings-format.md.  In short, front coding is
 *   a few hundred lines, writes in one streaming pass, reads in place from
 *   the mmap with one binary search, and its sorted walk is exactly what
 *   prefix and fuzzy enumeration need.
 *
 * Invariants td_open checks (else QR_ECORRUPT): magics, version, footer
 * arithmetic, block offsets ascending and inside the blocks area, each
 * block's key and value areas holding exactly its entries, every varint in
 * range, keys strictly ascending (across blocks too) with maximal shared
 * prefixes, key lengths <= max_key_len, total_tf >= df.
 */
#include "index/termdict.h"
#include "index/iter.h"

#include <string.h>

#define TD_MAGIC 0x31445451u     /* "QTD1" */
#define TD_END_MAGIC 0x45445451u /* "QTDE" */
#define TD_VERSION 1
#define TD_HEADER 8
#define TD_FOOTER 32

/* Invariant: after td_open, every block parses within its bounds. */
struct TermDict {
    const uint8_t *data;  /* borrows: the whole dictionary */
    size_t len;
    const uint8_t *index; /* borrows: u64 block offsets */
    size_t index_off;     /* end of the blocks area */
    uint64_t *first8;     /* owns: first 8 bytes of each block's first key, big-endian */
    uint64_t n_keys;
    uint32_t n_blocks;
    uint32_t max_key_len;
};

/* Decoding state inside one block: keys and values advance separately. */
typedef struct TdPos {
    uint32_t blk;      /* current block */
    uint32_t idx;      /* keys of blk decoded so far */
    size_t kpos;       /* offset of the next key */
    size_t kend;       /* end of the keys area = start of the values */
    uint32_t vidx;     /* values of blk decoded so far */
    size_t vpos;       /* offset of the next value */
    uint64_t exp_docs; /* delta bases for the next value */
    uint64_t exp_pos;
    TermPostings tp;   /* value vidx - 1 */
} TdPos;

/* States of a cursor. */
enum { CUR_BEFORE, CUR_ON, CUR_END };

/* The cursor caches decoded values (td_cursor_info decodes lazily). */
struct TermCursor {
    const TermDict *td; /* borrows */
    uint8_t *key;       /* arena or heap: max_key_len + KEY_SLACK bytes */
    size_t key_len;
    size_t stable;      /* leading bytes of key unchanged since a user reset it */
    TdPos pos;
    int state;
};

/* Key buffers have this much slack so short suffixes copy as one 16-byte
 * move.  The source side is safe too: a suffix lies in the blocks area,
 * which the index and the 32-byte footer follow. */
#define KEY_SLACK 16

static int key_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
    size_t n = an < bn ? an : bn;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c;
    return (an > bn) - (an < bn);
}

/* The first 8 bytes, big-endian, zero-padded: ordering two of these orders
 * the keys too unless they are equal. */
static uint64_t key8(const uint8_t *k, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < 8; i++)
        v = v << 8 | (i < n ? k[i] : 0);
    return v;
}

static uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static int64_t unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

static inline uint64_t td_block_off(const TermDict *td, uint32_t b)
{
    return qr_get_u64le(td->index + 8 * (size_t)b);
}

static inline size_t td_block_end(const TermDict *td, uint32_t b)
{
    return b + 1 < td->n_blocks ? (size_t)td_block_off(td, b + 1) : td->index_off;
}

static inline uint32_t td_block_count(const TermDict *td, uint32_t b)
{
    return b + 1 < td->n_blocks ? TD_BLOCK_KEYS
                                : (uint32_t)(td->n_keys - (uint64_t)b * TD_BLOCK_KEYS);
}

/* ======================================================================
 * Writer
 * ====================================================================== */

struct TermDictWriter {
    QrBuf data;       /* owns: header + finished blocks */
    QrBuf index;      /* owns: u64 block offsets */
    QrBuf keys;       /* owns: the open block's key area */
    QrBuf vals;       /* owns: the open block's value area */
    uint8_t *prev;    /* owns: previous key */
    size_t prev_len, prev_cap;
    uint64_t n_keys;
    uint32_t in_block; /* entries in the open block */
    uint32_t max_key_len;
    uint64_t exp_docs, exp_pos;
};

TermDictWriter *tdw_new(void)
{
    TermDictWriter *w = qr_calloc(1, sizeof *w);
    if (!w)
        return NULL;
    qr_buf_init(&w->data);
    qr_buf_init(&w->index);
    qr_buf_init(&w->keys);
    qr_buf_init(&w->vals);
    qr_buf_put_u32(&w->data, TD_MAGIC);
    qr_buf_put_u32(&w->data, TD_VERSION);
    return w;
}

void tdw_free(TermDictWriter *w)
{
    if (!w)
        return;
    qr_buf_free(&w->data);
    qr_buf_free(&w->index);
    qr_buf_free(&w->keys);
    qr_buf_free(&w->vals);
    qr_free(w->prev);
    qr_free(w);
}

/* Move the open block into data. */
static void tdw_flush_block(TermDictWriter *w)
{
    if (w->in_block == 0)
        return;
    qr_buf_put_u64(&w->index, w->data.len);
    qr_buf_put_varint(&w->data, w->keys.len);
    qr_buf_append(&w->data, w->keys.data, w->keys.len);
    qr_buf_append(&w->data, w->vals.data, w->vals.len);
    w->keys.len = w->vals.len = 0;
    w->in_block = 0;
    w->exp_docs = w->exp_pos = 0;
}

int tdw_add(TermDictWriter *w, const uint8_t *key, size_t key_len, const TermPostings *tp,
            QrError *err)
{
    if (key_len > TD_MAX_KEY_LEN)
        return qr_error_set(err, QR_ELIMIT, "term key of %zu bytes exceeds the limit of %d",
                            key_len, TD_MAX_KEY_LEN);
    if (w->n_keys && key_cmp(key, key_len, w->prev, w->prev_len) <= 0)
        return qr_error_set(err, QR_EINVAL, "term dictionary keys not strictly ascending");
    if (tp->total_tf < tp->df)
        return qr_error_set(err, QR_EINVAL, "term total frequency below its doc frequency");
    if (w->in_block == TD_BLOCK_KEYS)
        tdw_flush_block(w);
    size_t shared = 0;
    if (w->in_block) {
        size_t n = key_len < w->prev_len ? key_len : w->prev_len;
        while (shared < n && key[shared] == w->prev[shared])
            shared++;
    }
    qr_buf_put_varint(&w->keys, shared);
    qr_buf_put_varint(&w->keys, key_len - shared);
    qr_buf_append(&w->keys, key + shared, key_len - shared);
    QrBuf *v = &w->vals;
    qr_buf_put_varint(v, tp->df);
    qr_buf_put_varint(v, tp->total_tf - tp->df);
    qr_buf_put_varint(v, zigzag((int64_t)(tp->docs_off - w->exp_docs)));
    qr_buf_put_varint(v, tp->docs_len);
    qr_buf_put_varint(v, zigzag((int64_t)(tp->pos_off - w->exp_pos)));
    qr_buf_put_varint(v, tp->pos_len);
    w->exp_docs = tp->docs_off + tp->docs_len;
    if (tp->pos_len)
        w->exp_pos = tp->pos_off + tp->pos_len;
    if (key_len > w->prev_cap) {
        size_t nc = key_len < 64 ? 64 : key_len * 2;
        uint8_t *np = qr_realloc(w->prev, nc);
        if (!np)
            return qr_error_set(err, QR_ENOMEM, "out of memory writing the term dictionary");
        w->prev = np;
        w->prev_cap = nc;
    }
    if (key_len)
        memcpy(w->prev, key, key_len);
    w->prev_len = key_len;
    if (key_len > w->max_key_len)
        w->max_key_len = (uint32_t)key_len;
    w->n_keys++;
    w->in_block++;
    if (!qr_buf_ok(&w->keys) || !qr_buf_ok(v) || !qr_buf_ok(&w->data) || !qr_buf_ok(&w->index))
        return qr_error_set(err, QR_ENOMEM, "out of memory writing the term dictionary");
    return QR_OK;
}

int tdw_finish(TermDictWriter *w, QrBuf *out, QrError *err)
{
    tdw_flush_block(w);
    uint64_t index_off = w->data.len;
    uint64_t nb = (w->n_keys + TD_BLOCK_KEYS - 1) / TD_BLOCK_KEYS;
    if (nb > UINT32_MAX)
        return qr_error_set(err, QR_ELIMIT, "term dictionary too large");
    qr_buf_append(out, w->data.data, w->data.len);
    qr_buf_append(out, w->index.data, w->index.len);
    qr_buf_put_u64(out, w->n_keys);
    qr_buf_put_u64(out, index_off);
    qr_buf_put_u32(out, (uint32_t)nb);
    qr_buf_put_u32(out, w->max_key_len);
    qr_buf_put_u32(out, TD_BLOCK_KEYS);
    qr_buf_put_u32(out, TD_END_MAGIC);
    if (!qr_buf_ok(out) || !qr_buf_ok(&w->data) || !qr_buf_ok(&w->index))
        return qr_error_set(err, QR_ENOMEM, "out of memory writing the term dictionary");
    return QR_OK;
}

/* ======================================================================
 * Block decoding
 * ====================================================================== */

static inline const uint8_t *vdec(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    if (p < end && *p < 0x80) {
        *v = *p;
        return p + 1;
    }
    size_t n = qr_varint_decode(p, end, v);
    return n ? p + n : NULL;
}

/* Start decoding block b; false when its key area does not fit. */
static bool td_pos_block(const TermDict *td, TdPos *ps, uint32_t b)
{
    const uint8_t *p = td->data + td_block_off(td, b), *end = td->data + td_block_end(td, b);
    uint64_t klen;
    ps->blk = b;
    ps->idx = ps->vidx = 0;
    ps->exp_docs = ps->exp_pos = 0;
    memset(&ps->tp, 0, sizeof ps->tp);
    if (!(p = vdec(p, end, &klen)) || klen > (uint64_t)(end - p))
        return false;
    ps->kpos = (size_t)(p - td->data);
    ps->kend = ps->vpos = ps->kpos + (size_t)klen;
    return true;
}

/* Decode the next key of the block: shared length and borrowed suffix. */
static inline bool td_next_key(const TermDict *td, TdPos *ps, size_t *shared,
                               const uint8_t **suffix, size_t *suffix_len)
{
    const uint8_t *p = td->data + ps->kpos, *end = td->data + ps->kend;
    uint64_t sh, sl;
    if (p < end && p + 1 < end && p[0] < 0x80 && p[1] < 0x80) {
        sh = p[0]; /* the common case: two one-byte varints */
        sl = p[1];
        p += 2;
    } else if (!(p = vdec(p, end, &sh)) || !(p = vdec(p, end, &sl))) {
        return false;
    }
    if (sl > (uint64_t)(end - p) || sh > td->max_key_len || sl > td->max_key_len - sh)
        return false;
    *shared = (size_t)sh;
    *suffix = p;
    *suffix_len = (size_t)sl;
    ps->kpos = (size_t)(p - td->data) + (size_t)sl;
    ps->idx++;
    return true;
}

/* Decode values until value `count - 1` is in ps->tp (count <= idx). */
static bool td_value_upto(const TermDict *td, TdPos *ps, uint32_t count)
{
    const uint8_t *p = td->data + ps->vpos, *end = td->data + td_block_end(td, ps->blk);
    while (ps->vidx < count) {
        uint64_t v[6];
        for (int i = 0; i < 6; i++)
            if (!(p = vdec(p, end, &v[i])))
                return false;
        if (v[0] > UINT32_MAX || v[1] > UINT64_MAX - v[0] || v[3] > UINT32_MAX)
            return false;
        TermPostings *tp = &ps->tp;
        tp->df = (uint32_t)v[0];
        tp->total_tf = v[0] + v[1];
        tp->docs_off = ps->exp_docs + (uint64_t)unzigzag(v[2]);
        tp->docs_len = (uint32_t)v[3];
        tp->pos_off = ps->exp_pos + (uint64_t)unzigzag(v[4]);
        tp->pos_len = v[5];
        ps->exp_docs = tp->docs_off + tp->docs_len;
        if (tp->pos_len)
            ps->exp_pos = tp->pos_off + tp->pos_len;
        ps->vidx++;
    }
    ps->vpos = (size_t)(p - td->data);
    return true;
}

/* The first key of block b, read in place (validated at open). */
static const uint8_t *td_first_key(const TermDict *td, uint32_t b, size_t *len)
{
    TdPos ps;
    size_t sh;
    const uint8_t *k;
    if (!td_pos_block(td, &ps, b) || !td_next_key(td, &ps, &sh, &k, len)) {
        *len = 0;
        return td->data;
    }
    return k;
}

/* Last block whose first key is <= key (0 when key precedes them all).
 * Binary search over first8 in memory; the blocks are read only on ties. */
static uint32_t td_find_block(const TermDict *td, const uint8_t *key, size_t key_len)
{
    uint64_t k8 = key8(key, key_len);
    uint32_t lo = 0, hi = td->n_blocks; /* answer in [lo, hi) */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        bool le;
        if (td->first8[mid] != k8) {
            le = td->first8[mid] < k8;
        } else {
            size_t fl;
            const uint8_t *f = td_first_key(td, mid, &fl);
            le = key_cmp(f, fl, key, key_len) <= 0;
        }
        if (le)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* ======================================================================
 * Open / validate
 * ====================================================================== */

static int td_corrupt(QrError *err, const char *what, uint64_t blk)
{
    qr_error_set(err, QR_ECORRUPT, "corrupt term dictionary");
    if (blk != UINT64_MAX)
        qr_error_detail(err, "%s in block %llu", what, (unsigned long long)blk);
    else
        qr_error_detail(err, "%s", what);
    qr_error_hint(err, "rebuild or restore the segment");
    return QR_ECORRUPT;
}

/* One pass over every key and value: later reads need no further care.
 * Fills first8 on the way. */
static int td_validate(TermDict *td, QrError *err)
{
    uint8_t *prev = qr_malloc(td->max_key_len ? td->max_key_len : 1);
    if (!prev)
        return qr_error_set(err, QR_ENOMEM, "out of memory opening the term dictionary");
    size_t prev_len = 0;
    for (uint32_t b = 0; b < td->n_blocks; b++) {
        uint64_t off = td_block_off(td, b);
        const char *why = NULL;
        TdPos ps;
        if (off < TD_HEADER || off >= td->index_off ||
            (b + 1 < td->n_blocks &&
             (td_block_off(td, b + 1) <= off || td_block_off(td, b + 1) > td->index_off)))
            why = "block offset out of order or range";
        else if (b == 0 && off != TD_HEADER)
            why = "gap before the first block";
        else if (!td_pos_block(td, &ps, b))
            why = "key area runs past the block";
        uint32_t cnt = td_block_count(td, b);
        for (uint32_t i = 0; !why && i < cnt; i++) {
            size_t s, sl;
            const uint8_t *suf;
            if (!td_next_key(td, &ps, &s, &suf, &sl)) {
                why = "damaged key";
                break;
            }
            if ((i == 0 && s != 0) || s > prev_len) {
                why = "shared prefix longer than the previous key";
                break;
            }
            if (!(b == 0 && i == 0)) {
                /* ascending, with shared maximal within a block */
                int c = i == 0 ? key_cmp(suf, sl, prev, prev_len)
                        : s == prev_len ? (sl > 0 ? 1 : 0)
                        : sl == 0 ? -1
                                  : (int)suf[0] - (int)prev[s];
                if (c <= 0) {
                    why = "keys not strictly ascending";
                    break;
                }
            }
            if (sl)
                memcpy(prev + s, suf, sl);
            prev_len = s + sl;
            if (i == 0)
                td->first8[b] = key8(prev, prev_len);
        }
        if (!why && ps.kpos != ps.kend)
            why = "key area longer than its keys";
        if (!why && (!td_value_upto(td, &ps, cnt) || ps.vpos != td_block_end(td, b)))
            why = "damaged values";
        if (why) {
            qr_free(prev);
            return td_corrupt(err, why, b);
        }
    }
    qr_free(prev);
    return QR_OK;
}

int td_open(const uint8_t *data, size_t len, TermDict **out, QrError *err)
{
    if (len < TD_HEADER + TD_FOOTER || !data)
        return td_corrupt(err, "shorter than header and footer", UINT64_MAX);
    if (qr_get_u32le(data) != TD_MAGIC || qr_get_u32le(data + len - 4) != TD_END_MAGIC)
        return td_corrupt(err, "bad magic", UINT64_MAX);
    if (qr_get_u32le(data + 4) != TD_VERSION) {
        qr_error_set(err, QR_EUNSUPPORTED, "term dictionary format version %u not supported",
                     qr_get_u32le(data + 4));
        return QR_EUNSUPPORTED;
    }
    const uint8_t *f = data + len - TD_FOOTER;
    uint64_t n_keys = qr_get_u64le(f), index_off = qr_get_u64le(f + 8);
    uint32_t nb = qr_get_u32le(f + 16), max_key = qr_get_u32le(f + 20);
    uint32_t per = qr_get_u32le(f + 24);
    if (per != TD_BLOCK_KEYS || nb != (n_keys + TD_BLOCK_KEYS - 1) / TD_BLOCK_KEYS ||
        max_key > TD_MAX_KEY_LEN || index_off < TD_HEADER || index_off > len - TD_FOOTER ||
        (len - TD_FOOTER - index_off) != (uint64_t)nb * 8)
        return td_corrupt(err, "footer does not describe the bytes", UINT64_MAX);
    if (nb == 0 && index_off != TD_HEADER)
        return td_corrupt(err, "blocks area without keys", UINT64_MAX);
    TermDict *td = qr_calloc(1, sizeof *td);
    uint64_t *first8 = qr_malloc((nb ? nb : 1) * sizeof *first8);
    if (!td || !first8) {
        qr_free(td);
        qr_free(first8);
        return qr_error_set(err, QR_ENOMEM, "out of memory opening the term dictionary");
    }
    td->data = data;
    td->len = len;
    td->index = data + index_off;
    td->index_off = (size_t)index_off;
    td->first8 = first8;
    td->n_keys = n_keys;
    td->n_blocks = nb;
    td->max_key_len = max_key;
    int rc = td_validate(td, err);
    if (rc != QR_OK) {
        td_close(td);
        return rc;
    }
    *out = td;
    return QR_OK;
}

void td_close(TermDict *td)
{
    if (!td)
        return;
    qr_free(td->first8);
    qr_free(td);
}

uint64_t td_count(const TermDict *td) { return td->n_keys; }

/* ======================================================================
 * Lookup
 * ====================================================================== */

bool td_lookup(const TermDict *td, const uint8_t *key, size_t key_len, TermPostings *out)
{
    if (td->n_blocks == 0)
        return false;
    TdPos ps;
    if (!td_pos_block(td, &ps, td_find_block(td, key, key_len)))
        return false;
    uint32_t cnt = td_block_count(td, ps.blk);
    /* L: common prefix length of key and the previous key, which is known
     * to be < key.  Keys ascend with maximal shared prefixes, so a key
     * sharing more than L with its predecessor is still < key and one sharing
     * less is already > key: only shared == L needs a compare. */
    size_t L = 0;
    for (uint32_t i = 0; i < cnt; i++) {
        size_t sh, sl;
        const uint8_t *s;
        if (!td_next_key(td, &ps, &sh, &s, &sl))
            return false;
        if (sh > L)
            continue;
        if (sh < L)
            return false;
        size_t rest = key_len - L, n = sl < rest ? sl : rest, j = 0;
        while (j < n && s[j] == key[L + j])
            j++;
        if (j == n) {
            if (sl == rest) {
                if (!td_value_upto(td, &ps, i + 1))
                    return false;
                *out = ps.tp;
                return true;
            }
            if (sl > rest)
                return false; /* key is a proper prefix of this one: it is > key */
        } else if (s[j] > key[L + j]) {
            return false;
        }
        L += j;
    }
    return false;
}

/* ======================================================================
 * Cursors
 * ====================================================================== */

TermCursor *td_cursor_new(const TermDict *td, QrArena *arena)
{
    TermCursor *c = qr_arena_calloc(arena, sizeof *c);
    if (!c)
        return NULL;
    c->key = qr_arena_alloc(arena, (size_t)td->max_key_len + KEY_SLACK);
    if (!c->key)
        return NULL;
    c->td = td;
    c->state = CUR_BEFORE;
    return c;
}

static bool cur_end(TermCursor *c)
{
    c->state = CUR_END;
    c->key_len = 0;
    c->stable = 0;
    return false;
}

/* Make the key just decoded (shared sh, suffix s[0..sl)) current. */
static inline bool cur_set(TermCursor *c, size_t sh, const uint8_t *s, size_t sl)
{
    if (sl <= KEY_SLACK)
        memcpy(c->key + sh, s, KEY_SLACK);
    else
        memcpy(c->key + sh, s, sl);
    c->key_len = sh + sl;
    if (sh < c->stable)
        c->stable = sh;
    c->state = CUR_ON;
    return true;
}

/* Decode the next key of the block into the key buffer. */
static bool cur_decode(TermCursor *c)
{
    size_t sh, sl;
    const uint8_t *s;
    if (!td_next_key(c->td, &c->pos, &sh, &s, &sl) || sh > c->key_len)
        return cur_end(c); /* cannot happen after td_open's validation */
    return cur_set(c, sh, s, sl);
}

/* Position on the first key of block b. */
static bool cur_block(TermCursor *c, uint32_t b)
{
    if (b >= c->td->n_blocks || !td_pos_block(c->td, &c->pos, b))
        return cur_end(c);
    c->key_len = 0;
    c->stable = 0;
    return cur_decode(c);
}

bool td_cursor_next(TermCursor *c)
{
    if (c->state == CUR_END)
        return false;
    if (c->state == CUR_BEFORE)
        return cur_block(c, 0);
    if (c->pos.idx < td_block_count(c->td, c->pos.blk))
        return cur_decode(c);
    return cur_block(c, c->pos.blk + 1);
}

bool td_cursor_seek(TermCursor *c, const uint8_t *key, size_t key_len)
{
    const TermDict *td = c->td;
    if (td->n_blocks == 0)
        return cur_end(c);
    bool scan_here = false;
    if (c->state == CUR_ON && key_cmp(c->key, c->key_len, key, key_len) < 0) {
        /* forward seek: stay in this block if the key sorts before the next one */
        uint32_t nb = c->pos.blk + 1;
        if (nb >= td->n_blocks) {
            scan_here = true;
        } else {
            uint64_t k8 = key8(key, key_len);
            if (k8 != td->first8[nb]) {
                scan_here = k8 < td->first8[nb];
            } else {
                size_t fl;
                const uint8_t *f = td_first_key(td, nb, &fl);
                scan_here = key_cmp(key, key_len, f, fl) < 0;
            }
        }
    }
    if (!scan_here && !cur_block(c, td_find_block(td, key, key_len)))
        return false;
    while (key_cmp(c->key, c->key_len, key, key_len) < 0)
        if (!td_cursor_next(c))
            return false;
    return true;
}

const uint8_t *td_cursor_key(const TermCursor *c, size_t *len)
{
    if (c->state != CUR_ON) {
        *len = 0;
        return NULL;
    }
    *len = c->key_len;
    return c->key;
}

/* Decode the current key's value (values trail the keys lazily). */
static const TermPostings *cur_value(TermCursor *c)
{
    if (!td_value_upto(c->td, &c->pos, c->pos.idx))
        memset(&c->pos.tp, 0, sizeof c->pos.tp); /* cannot happen after validation */
    return &c->pos.tp;
}

void td_cursor_info(const TermCursor *c, TermPostings *out)
{
    if (c->state != CUR_ON) {
        memset(out, 0, sizeof *out);
        return;
    }
    /* the cursor's value cache is not part of its observable state */
    *out = *cur_value((TermCursor *)(uintptr_t)c);
}

/* The smallest key above every key that starts with p[0..n): p without its
 * trailing 0xFF bytes, last byte plus one, into out.  0 when there is none. */
static size_t key_successor(const uint8_t *p, size_t n, uint8_t *out)
{
    while (n > 0 && p[n - 1] == 0xFF)
        n--;
    if (n == 0)
        return 0;
    memcpy(out, p, n);
    out[n - 1]++;
    return n;
}

/* Move past every key that starts with the current key's first pl bytes
 * and stop on the first one after them.  Inside a block this needs no key
 * compare: keys ascend with maximal shared prefixes, so a key sharing >= pl
 * bytes with its predecessor still has the prefix and the first one sharing
 * fewer is past it; skipped keys are not even copied.  Only when the range
 * runs into the next block does it seek through the index (scratch: a
 * buffer of max_key_len bytes).  false at the end. */
static bool cur_skip_prefix(TermCursor *c, size_t pl, uint8_t *scratch)
{
    const TermDict *td = c->td;
    uint32_t cnt = td_block_count(td, c->pos.blk);
    while (c->pos.idx < cnt) {
        size_t sh, sl;
        const uint8_t *s;
        if (!td_next_key(td, &c->pos, &sh, &s, &sl))
            return cur_end(c);
        if (sh < pl)
            return cur_set(c, sh, s, sl);
    }
    uint32_t nb = c->pos.blk + 1;
    if (nb >= td->n_blocks)
        return cur_end(c);
    size_t fl;
    const uint8_t *f = td_first_key(td, nb, &fl);
    if (fl < pl || memcmp(f, c->key, pl) != 0)
        return cur_block(c, nb);
    size_t n = key_successor(c->key, pl, scratch);
    return n ? td_cursor_seek(c, scratch, n) : cur_end(c);
}

/* ======================================================================
 * Prefix enumeration
 * ====================================================================== */

/* A cursor on the heap, for enumerations that get no arena. */
static TermCursor *cur_heap_new(const TermDict *td, QrError *err)
{
    TermCursor *c = qr_calloc(1, sizeof *c);
    uint8_t *k = qr_malloc((size_t)td->max_key_len + KEY_SLACK);
    if (!c || !k) {
        qr_free(c);
        qr_free(k);
        qr_error_set(err, QR_ENOMEM, "out of memory enumerating terms");
        return NULL;
    }
    c->td = td;
    c->key = k;
    c->state = CUR_BEFORE;
    return c;
}

static void cur_heap_free(TermCursor *c)
{
    if (c) {
        qr_free(c->key);
        qr_free(c);
    }
}

static int td_limit(QrError *err, size_t max_terms)
{
    qr_error_set(err, QR_ELIMIT, "term expansion matches more than %zu terms", max_terms);
    qr_error_hint(err, "use a longer prefix or raise the expansion limit");
    return QR_ELIMIT;
}

int td_prefix(const TermDict *td, const uint8_t *prefix, size_t len, size_t max_terms,
              int (*cb)(void *arg, const uint8_t *key, size_t key_len, const TermPostings *tp),
              void *arg, QrError *err)
{
    TermCursor *c = cur_heap_new(td, err);
    if (!c)
        return QR_ENOMEM;
    int rc = QR_OK;
    size_t n = 0;
    for (bool on = td_cursor_seek(c, prefix, len); on; on = td_cursor_next(c)) {
        if (c->key_len < len || (len && memcmp(c->key, prefix, len) != 0))
            break;
        if (max_terms && ++n > max_terms) {
            rc = td_limit(err, max_terms);
            break;
        }
        if (cb(arg, c->key, c->key_len, cur_value(c)))
            break;
    }
    cur_heap_free(c);
    return rc;
}

/* ======================================================================
 * Fuzzy enumeration
 * ====================================================================== */

/* One unit of s[0..n) (n >= 1): a code point, or 0x110000 + byte for a
 * byte that starts no valid UTF-8 sequence (then one byte is consumed).
 * *dep: how many bytes the decision looked at; n + 1 when it depended on
 * where the string ends (a longer string could decode differently). */
static uint32_t u8_unit(const uint8_t *s, size_t n, size_t *used, size_t *dep)
{
    uint8_t c = s[0];
    *used = *dep = 1;
    if (c < 0x80)
        return c;
    size_t len;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, cp = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0x110000u + c;
    for (size_t i = 1; i < len; i++) {
        if (i >= n) {
            *dep = n + 1;
            return 0x110000u + c;
        }
        if ((s[i] & 0xC0) != 0x80) {
            *dep = i + 1;
            return 0x110000u + c;
        }
        cp = cp << 6 | (s[i] & 0x3F);
    }
    *dep = len;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0x110000u + c;
    *used = len;
    return cp;
}

typedef struct Fuzzy {
    const uint32_t *t; /* the term's units */
    size_t m;
    int k;             /* max edits */
    uint8_t *rows;     /* (maxd + 1) rows of m + 1 cells, capped at k + 1 */
    uint8_t *rowmin;   /* min of each row */
    size_t *kend;      /* byte end of the key's unit d (in the remainder) */
    size_t *kdep;      /* bytes units 0..d depend on (running max) */
    size_t maxd;       /* deepest row: m + k + 1 */
    uint32_t *ku;      /* key unit under each row (for transpositions) */
} Fuzzy;

/* Row d + 1 from row d for key unit u: optimal string alignment distance
 * (Levenshtein plus the transposition of two adjacent units, "teh" ->
 * "the" is one edit, as users of typo-tolerant search expect). */
static void fz_row(Fuzzy *f, size_t d, uint32_t u)
{
    const uint8_t *prev = f->rows + d * (f->m + 1);
    const uint8_t *pp = d >= 1 ? f->rows + (d - 1) * (f->m + 1) : NULL;
    uint8_t *row = f->rows + (d + 1) * (f->m + 1);
    uint8_t cap = (uint8_t)(f->k + 1), mn;
    f->ku[d] = u;
    row[0] = mn = (uint8_t)(d + 1 < cap ? d + 1 : cap);
    for (size_t j = 1; j <= f->m; j++) {
        unsigned v = prev[j - 1] + (f->t[j - 1] != u);
        if (prev[j] + 1u < v)
            v = prev[j] + 1u;
        if (row[j - 1] + 1u < v)
            v = row[j - 1] + 1u;
        if (pp && j >= 2 && u == f->t[j - 2] && f->ku[d - 1] == f->t[j - 1] && pp[j - 2] + 1u < v)
            v = pp[j - 2] + 1u;
        if (v > cap)
            v = cap;
        row[j] = (uint8_t)v;
        if (v < mn)
            mn = (uint8_t)v;
    }
    f->rowmin[d + 1] = mn;
}

int td_fuzzy(const TermDict *td, const uint8_t *scope, size_t scope_len, const uint8_t *term,
             size_t term_len, int max_edits, size_t max_terms,
             int (*cb)(void *arg, const uint8_t *key, size_t key_len, const TermPostings *tp,
                       int dist),
             void *arg, QrError *err)
{
    return td_fuzzy_ctx(td, scope, scope_len, term, term_len, max_edits, max_terms, cb, arg, NULL,
                        err);
}

int td_fuzzy_ctx(const TermDict *td, const uint8_t *scope, size_t scope_len, const uint8_t *term,
                 size_t term_len, int max_edits, size_t max_terms,
                 int (*cb)(void *arg, const uint8_t *key, size_t key_len, const TermPostings *tp,
                           int dist),
                 void *arg, struct IterCtx *ictx, QrError *err)
{
    if (max_edits < 0 || max_edits > 2)
        return qr_error_set(err, QR_EINVAL, "fuzzy edit distance must be 0, 1 or 2, not %d",
                            max_edits);
    if (td->n_blocks == 0)
        return QR_OK;
    Fuzzy f = {.k = max_edits};
    uint32_t *t = qr_malloc((term_len + 1) * sizeof *t);
    TermCursor *c = cur_heap_new(td, err);
    size_t m = 0;
    for (size_t i = 0; t && i < term_len;) {
        size_t used, dep;
        t[m++] = u8_unit(term + i, term_len - i, &used, &dep);
        i += used;
    }
    f.t = t;
    f.m = m;
    f.maxd = m + (size_t)max_edits + 1;
    size_t maxd = f.maxd, key_cap = (size_t)td->max_key_len + 1;
    f.rows = qr_malloc((maxd + 1) * (m + 1));
    f.rowmin = qr_malloc(maxd + 1);
    f.kend = qr_malloc((maxd + 1) * sizeof *f.kend);
    f.kdep = qr_malloc((maxd + 1) * sizeof *f.kdep);
    f.ku = qr_malloc((maxd + 1) * sizeof *f.ku);
    uint8_t *succ = qr_malloc(key_cap);
    int rc = QR_OK;
    if (!t || !c || !f.rows || !f.rowmin || !f.kend || !f.kdep || !f.ku || !succ) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory enumerating fuzzy terms");
        goto done;
    }
    for (size_t j = 0; j <= m; j++)
        f.rows[j] = (uint8_t)(j < (size_t)max_edits + 1 ? j : (size_t)max_edits + 1);
    f.rowmin[0] = 0;
    size_t nvalid = 0, found = 0;
    uint32_t walked = 0;
    bool on = td_cursor_seek(c, scope, scope_len);
    while (on) {
        if (ictx && (++walked & 255) == 0 && iter_ctx_interrupted(ictx)) {
            rc = (int)ictx->err.code;
            qr_error_copy(err, &ictx->err);
            break;
        }
        if (c->key_len < scope_len || (c->stable < scope_len && scope_len &&
                                       memcmp(c->key, scope, scope_len) != 0))
            break;
        const uint8_t *rem = c->key + scope_len;
        size_t rlen = c->key_len - scope_len;
        /* bytes of the remainder unchanged since the last key walked */
        size_t sh = c->stable > scope_len ? c->stable - scope_len : 0;
        c->stable = SIZE_MAX;
        /* rows 1..d stay valid while the units they rest on are unchanged */
        size_t d = nvalid;
        while (d > 0 && f.kdep[d - 1] > sh)
            d--;
        size_t bpos = d ? f.kend[d - 1] : 0;
        /* no completion can come back within k: row d is past k, and row
         * d - 1 cannot reach past row d by a transposition (+1) either */
#define FZ_PRUNED(d) (f.rowmin[d] > f.k && ((d) == 0 || f.rowmin[(d) - 1] >= f.k))
        bool pruned = FZ_PRUNED(d);
        while (!pruned && bpos < rlen && d < maxd) {
            size_t used, dep;
            uint32_t u = u8_unit(rem + bpos, rlen - bpos, &used, &dep);
            fz_row(&f, d, u);
            f.kend[d] = bpos + used;
            f.kdep[d] = bpos + dep > (d ? f.kdep[d - 1] : 0) ? bpos + dep : f.kdep[d - 1];
            bpos += used;
            d++;
            pruned = FZ_PRUNED(d);
        }
#undef FZ_PRUNED
        nvalid = d;
        if (pruned) {
            /* nothing that shares the units 1..d can match: skip them all */
            size_t plen = d ? f.kdep[d - 1] : 0;
            if (plen > rlen) /* the decode leaned on the key's end: step */
                on = td_cursor_next(c);
            else
                on = cur_skip_prefix(c, scope_len + plen, succ);
            continue;
        }
        uint8_t dist = f.rows[d * (m + 1) + m];
        if (bpos >= rlen && dist <= f.k) {
            if (max_terms && ++found > max_terms) {
                rc = td_limit(err, max_terms);
                break;
            }
            if (cb(arg, c->key, c->key_len, cur_value(c), dist))
                break;
        }
        on = td_cursor_next(c);
    }
done:
    qr_free(t);
    qr_free(f.rows);
    qr_free(f.rowmin);
    qr_free(f.kend);
    qr_free(f.kdep);
    qr_free(f.ku);
    qr_free(succ);
    cur_heap_free(c);
    return rc;
}
