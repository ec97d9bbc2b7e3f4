/*
 * column_write.c — ColWriter: accumulate one segment's values of a column,
 * then encode blocks, dictionary and statistics into one blob.
 *
 * Layer: store/.  Calls column_int.h, buf, mem, crc32c.
 *
 * Values are kept as order-preserving keys (column_int.h) plus a null
 * bitmap until colw_finish; keywords are deduplicated on the fly through an
 * open-addressing hash table and get their final, sorted codes at finish.
 * Per block the writer picks the smallest of CONST, FOR (frame of reference
 * + bit packing) and DELTA (sorted blocks only, when it saves >= 25%).
 */
#include "store/column_int.h"
#include "store/crc32c.h"
#include "store/mem.h"

#include <stdio.h>
#include <stdlib.h>

struct ColWriter {
    QrColType type;
    uint32_t n_rows;
    uint32_t n_null;
    uint64_t *keys;    /* owns: key per row (KEYWORD: provisional id) */
    size_t keys_cap;
    uint64_t *nullw;   /* owns: bit set = NULL row */
    size_t nullw_cap;
    /* KEYWORD dedup: distinct values in insertion order */
    QrBuf sbytes;      /* owns: concatenated distinct values */
    uint64_t *soff;    /* owns: n_distinct + 1 offsets into sbytes */
    uint64_t *shash;   /* owns: hash per distinct value */
    size_t s_cap;
    uint32_t n_distinct;
    uint32_t *ht;      /* owns: slots, distinct id + 1, 0 = empty */
    uint32_t ht_cap;   /* power of two */
    int err_code;      /* first add failure */
    char err_msg[160];
    bool finished;
};

const char *col_type_name(QrColType t)
{
    static const char *const names[] = {"int64", "float64", "bool", "timestamp", "keyword"};
    return (unsigned)t < QR_COL_TYPE_COUNT ? names[t] : "?";
}

ColWriter *colw_new(QrColType t)
{
    if ((unsigned)t >= QR_COL_TYPE_COUNT)
        return NULL;
    ColWriter *w = qr_calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->type = t;
    qr_buf_init(&w->sbytes);
    return w;
}

void colw_free(ColWriter *w)
{
    if (!w)
        return;
    qr_free(w->keys);
    qr_free(w->nullw);
    qr_buf_free(&w->sbytes);
    qr_free(w->soff);
    qr_free(w->shash);
    qr_free(w->ht);
    qr_free(w);
}

uint32_t colw_rows(const ColWriter *w) { return w->n_rows; }

static int w_fail(ColWriter *w, int code, const char *msg)
{
    if (!w->err_code) {
        w->err_code = code;
        snprintf(w->err_msg, sizeof w->err_msg, "%s", msg);
    }
    return code;
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t nc = *cap ? *cap * 2 : 1024;
    while (nc < need)
        nc *= 2;
    void *np = qr_realloc(*p, nc * elem);
    if (!np)
        return false;
    *p = np;
    *cap = nc;
    return true;
}

/* Room for one more row; the null word of the new row is zeroed. */
static int w_reserve_row(ColWriter *w)
{
    if (w->finished)
        return w_fail(w, QR_EINVAL, "column writer already finished");
    if (w->n_rows >= COL_MAX_ROWS)
        return w_fail(w, QR_ELIMIT, "column has more than 4294967294 rows");
    size_t nw = ((size_t)w->n_rows + 64) / 64;
    size_t old = w->nullw_cap;
    if (!grow((void **)&w->keys, &w->keys_cap, (size_t)w->n_rows + 1, sizeof *w->keys) ||
        !grow((void **)&w->nullw, &w->nullw_cap, nw, sizeof *w->nullw))
        return w_fail(w, QR_ENOMEM, "out of memory while buffering a column");
    if (w->nullw_cap > old)
        memset(w->nullw + old, 0, (w->nullw_cap - old) * sizeof *w->nullw);
    return QR_OK;
}

static int w_put(ColWriter *w, QrColType want, QrColType want2, uint64_t key)
{
    if (w->type != want && w->type != want2) {
        char msg[160];
        snprintf(msg, sizeof msg, "cannot store a %s value in a %s column", col_type_name(want),
                 col_type_name(w->type));
        return w_fail(w, QR_ETYPE, msg);
    }
    int rc = w_reserve_row(w);
    if (rc)
        return rc;
    w->keys[w->n_rows++] = key;
    return QR_OK;
}

int colw_add_int(ColWriter *w, int64_t v)
{
    return w_put(w, QR_COL_INT64, QR_COL_TIMESTAMP, col_key_from_int(v));
}

int colw_add_float(ColWriter *w, double v)
{
    return w_put(w, QR_COL_FLOAT64, QR_COL_FLOAT64, col_key_from_double(v));
}

int colw_add_bool(ColWriter *w, bool v) { return w_put(w, QR_COL_BOOL, QR_COL_BOOL, v ? 1 : 0); }

int colw_add_null(ColWriter *w)
{
    int rc = w_reserve_row(w);
    if (rc)
        return rc;
    w->nullw[w->n_rows / 64] |= 1ull << (w->n_rows % 64);
    w->keys[w->n_rows++] = 0;
    w->n_null++;
    return QR_OK;
}

static bool ht_rehash(ColWriter *w, uint32_t ncap)
{
    uint32_t *nt = qr_calloc(ncap, sizeof *nt);
    if (!nt)
        return false;
    for (uint32_t id = 0; id < w->n_distinct; id++) {
        uint32_t i = (uint32_t)w->shash[id] & (ncap - 1);
        while (nt[i])
            i = (i + 1) & (ncap - 1);
        nt[i] = id + 1;
    }
    qr_free(w->ht);
    w->ht = nt;
    w->ht_cap = ncap;
    return true;
}

int colw_add_str(ColWriter *w, const char *s, size_t n)
{
    if (w->type != QR_COL_KEYWORD) {
        char msg[160];
        snprintf(msg, sizeof msg, "cannot store a keyword value in a %s column", col_type_name(w->type));
        return w_fail(w, QR_ETYPE, msg);
    }
    int rc = w_reserve_row(w);
    if (rc)
        return rc;
    if ((w->n_distinct + 1) * 2 > w->ht_cap && !ht_rehash(w, w->ht_cap ? w->ht_cap * 2 : 1024))
        return w_fail(w, QR_ENOMEM, "out of memory while buffering a column");
    uint64_t h = col_hash_bytes(s, n);
    uint32_t i = (uint32_t)h & (w->ht_cap - 1);
    for (; w->ht[i]; i = (i + 1) & (w->ht_cap - 1)) {
        uint32_t id = w->ht[i] - 1;
        if (w->shash[id] == h && w->soff[id + 1] - w->soff[id] == n &&
            (n == 0 || memcmp(w->sbytes.data + w->soff[id], s, n) == 0)) {
            w->keys[w->n_rows++] = id;
            return QR_OK;
        }
    }
    if ((size_t)w->n_distinct + 2 > w->s_cap) {
        size_t nc = w->s_cap ? w->s_cap * 2 : 1024;
        uint64_t *a = qr_realloc(w->soff, nc * sizeof *a);
        if (!a)
            return w_fail(w, QR_ENOMEM, "out of memory while buffering a column");
        w->soff = a;
        uint64_t *b = qr_realloc(w->shash, nc * sizeof *b);
        if (!b)
            return w_fail(w, QR_ENOMEM, "out of memory while buffering a column");
        w->shash = b;
        w->s_cap = nc;
    }
    if (n)
        qr_buf_append(&w->sbytes, s, n);
    if (!qr_buf_ok(&w->sbytes))
        return w_fail(w, QR_ENOMEM, "out of memory while buffering a column");
    uint32_t id = w->n_distinct++;
    w->soff[id] = w->sbytes.len - n;
    w->soff[id + 1] = w->sbytes.len;
    w->shash[id] = h;
    w->ht[i] = id + 1;
    w->keys[w->n_rows++] = id;
    return QR_OK;
}

/* ---- finish ------------------------------------------------------------ */

typedef struct StrRef {
    const uint8_t *p;
    uint64_t n;
    uint32_t id;
} StrRef;

static int strref_cmp(const void *a, const void *b)
{
    const StrRef *x = a, *y = b;
    uint64_t n = x->n < y->n ? x->n : y->n;
    int c = n ? memcmp(x->p, y->p, n) : 0;
    if (c)
        return c;
    return (x->n > y->n) - (x->n < y->n);
}

/* Sort the distinct keyword values, rewrite row ids as codes, write the
 * dictionary section into `dict`, count rows per code and fill the HLL. */
static int finish_dict(ColWriter *w, QrBuf *dict, uint32_t **counts_out, uint8_t *hll)
{
    uint32_t nd = w->n_distinct;
    StrRef *refs = qr_malloc((size_t)nd * sizeof *refs + 1);
    uint32_t *remap = qr_malloc((size_t)nd * sizeof *remap + 1);
    uint32_t *counts = qr_calloc((size_t)nd + 1, sizeof *counts);
    uint64_t *offs = qr_malloc(((size_t)nd + 1) * sizeof *offs);
    if (!refs || !remap || !counts || !offs) {
        qr_free(refs), qr_free(remap), qr_free(counts), qr_free(offs);
        return QR_ENOMEM;
    }
    for (uint32_t i = 0; i < nd; i++) {
        /* only empty strings seen: no bytes buffered, and NULL + 0 is undefined */
        refs[i].p = w->sbytes.data ? w->sbytes.data + w->soff[i] : (const uint8_t *)"";
        refs[i].n = w->soff[i + 1] - w->soff[i];
        refs[i].id = i;
        col_hll_add(hll, w->shash[i]);
    }
    qsort(refs, nd, sizeof *refs, strref_cmp);
    uint64_t total = 0;
    for (uint32_t c = 0; c < nd; c++) {
        remap[refs[c].id] = c;
        offs[c] = total;
        total += refs[c].n;
    }
    offs[nd] = total;
    for (uint32_t r = 0; r < w->n_rows; r++) {
        if (w->nullw[r / 64] >> (r % 64) & 1)
            continue;
        uint32_t code = remap[w->keys[r]];
        w->keys[r] = code;
        counts[code]++;
    }
    unsigned ob = col_bits(total);
    size_t packed = (size_t)(((uint64_t)(nd + 1) * ob + 7) / 8) + COL_SLACK;
    qr_buf_put_u32(dict, nd);
    qr_buf_putc(dict, (uint8_t)ob);
    qr_buf_append(dict, "\0\0\0", 3);
    qr_buf_put_u64(dict, total);
    if (qr_buf_reserve(dict, packed)) {
        memset(dict->data + dict->len, 0, packed);
        col_bp_pack(offs, (size_t)nd + 1, ob, dict->data + dict->len);
        dict->len += packed;
    }
    for (uint32_t c = 0; c < nd; c++)
        qr_buf_append(dict, refs[c].p, refs[c].n);
    qr_free(refs), qr_free(remap), qr_free(offs);
    *counts_out = counts;
    return qr_buf_ok(dict) ? QR_OK : QR_ENOMEM;
}

/* Encode block b: directory entry into dir, data into data. */
static void encode_block(ColWriter *w, uint32_t b, QrBuf *dir, QrBuf *data, uint64_t *vals,
                         uint64_t *offs, bool *col_sorted, uint64_t *prev_key, bool *have_prev)
{
    uint32_t r0 = b * COL_BLOCK_ROWS;
    uint32_t rows = w->n_rows - r0 < COL_BLOCK_ROWS ? w->n_rows - r0 : COL_BLOCK_ROWS;
    uint32_t ng = col_groups(rows);
    const uint64_t *nullw = w->nullw + (size_t)r0 / 64;
    uint32_t nc = 0;
    for (uint32_t g = 0; g < ng; g++)
        nc += (uint32_t)__builtin_popcountll(nullw[g]);

    uint64_t mn = 0, mx = 0, dbase = 0;
    uint8_t enc = COL_ENC_CONST, width = 0, dwidth = 0, flags = 0;
    if (nc < rows) {
        /* fill NULL slots with the previous non-NULL key (leading: first) */
        uint64_t fill = 0;
        for (uint32_t i = 0; i < rows; i++)
            if (!(nullw[i / 64] >> (i % 64) & 1)) {
                fill = w->keys[r0 + i];
                break;
            }
        mn = mx = fill;
        bool sorted = true;
        for (uint32_t i = 0; i < rows; i++) {
            uint64_t k = (nullw[i / 64] >> (i % 64) & 1) ? fill : w->keys[r0 + i];
            if (k < fill)
                sorted = false;
            fill = k;
            vals[i] = k;
            mn = k < mn ? k : mn;
            mx = k > mx ? k : mx;
            if (!(nullw[i / 64] >> (i % 64) & 1)) {
                if (*have_prev && k < *prev_key)
                    *col_sorted = false;
                *prev_key = k;
                *have_prev = true;
            }
        }
        for (uint32_t i = rows; i < ng * 64; i++)
            vals[i] = mn;
        if (mn != mx) {
            width = (uint8_t)col_bits(mx - mn);
            enc = COL_ENC_FOR;
            size_t for_len = (size_t)8 * width * ng + COL_SLACK;
            if (sorted) {
                flags |= COL_BLK_SORTED;
                uint64_t dmin = UINT64_MAX, dmax = 0;
                for (uint32_t i = 1; i < rows; i++) {
                    if (i % 64 == 0)
                        continue;
                    uint64_t d = vals[i] - vals[i - 1];
                    dmin = d < dmin ? d : dmin;
                    dmax = d > dmax ? d : dmax;
                }
                if (dmin > dmax)
                    dmin = dmax = 0; /* every group has one row */
                unsigned dw = col_bits(dmax - dmin);
                size_t delta_len = 8 + (size_t)8 * width + (size_t)8 * dw * ng + COL_SLACK;
                if (delta_len * 4 < for_len * 3) {
                    enc = COL_ENC_DELTA;
                    dwidth = (uint8_t)dw;
                    dbase = dmin;
                }
            }
        }
    }

    size_t nb_len = (nc > 0 && nc < rows) ? (size_t)8 * ng : 0;
    size_t pay_len = 0;
    if (enc == COL_ENC_FOR)
        pay_len = (size_t)8 * width * ng + COL_SLACK;
    else if (enc == COL_ENC_DELTA)
        pay_len = 8 + (size_t)8 * width + (size_t)8 * dwidth * ng + COL_SLACK;
    uint64_t off = data->len;
    size_t len = nb_len + pay_len;
    if (qr_buf_reserve(data, len)) {
        uint8_t *p = data->data + data->len;
        memset(p, 0, len);
        if (nb_len)
            memcpy(p, nullw, nb_len);
        uint8_t *pay = p + nb_len;
        if (enc == COL_ENC_FOR) {
            for (uint32_t i = 0; i < ng * 64; i++)
                offs[i] = vals[i] - mn;
            col_bp_pack(offs, (size_t)ng * 64, width, pay);
        } else if (enc == COL_ENC_DELTA) {
            qr_put_u64le(pay, dbase);
            uint64_t cps[64] = {0};
            for (uint32_t g = 0; g < ng; g++)
                cps[g] = vals[g * 64] - mn;
            col_bp_pack(cps, 64, width, pay + 8);
            for (uint32_t i = 0; i < ng * 64; i++)
                offs[i] = (i % 64 == 0 || i >= rows) ? 0 : vals[i] - vals[i - 1] - dbase;
            col_bp_pack(offs, (size_t)ng * 64, dwidth, pay + 8 + (size_t)8 * width);
        }
        data->len += len;
    }
    uint8_t e[COL_DIR_ENTRY_LEN] = {0};
    qr_put_u64le(e + 0, mn);
    qr_put_u64le(e + 8, mx);
    qr_put_u64le(e + 16, off);
    qr_put_u32le(e + 24, (uint32_t)len);
    uint16_t nc16 = (uint16_t)nc;
    memcpy(e + 28, &nc16, 2);
    e[30] = enc;
    e[31] = width;
    e[32] = flags;
    e[33] = dwidth;
    uint32_t crc = qr_buf_ok(data) ? qr_crc32c(0, data->data + off, len) : 0;
    qr_put_u32le(e + 36, crc);
    qr_buf_append(dir, e, sizeof e);
}

/* Statistics of a non-keyword column: sort the non-NULL keys, count
 * distinct values (-0 and +0 once), histogram, HLL over distinct values. */
static int finish_numeric_stats(ColWriter *w, uint32_t *distinct, uint8_t *hist, uint32_t *n_buckets,
                                uint8_t *hll)
{
    size_t n = (size_t)w->n_rows - w->n_null;
    *distinct = 0;
    *n_buckets = 0;
    if (n == 0)
        return QR_OK;
    uint64_t *a = qr_malloc(n * sizeof *a), *tmp = qr_malloc(n * sizeof *tmp);
    if (!a || !tmp) {
        qr_free(a), qr_free(tmp);
        return QR_ENOMEM;
    }
    size_t j = 0;
    for (uint32_t r = 0; r < w->n_rows; r++)
        if (!(w->nullw[r / 64] >> (r % 64) & 1))
            a[j++] = w->keys[r];
    col_sort_u64(a, tmp, n);
    *n_buckets = col_hist_build(a, n, hist);
    const uint64_t neg0 = col_key_from_double(-0.0), pos0 = col_key_from_double(0.0);
    uint32_t d = 0;
    for (size_t i = 0; i < n; i++) {
        if (i && a[i] == a[i - 1])
            continue;
        uint64_t k = a[i];
        if (w->type == QR_COL_FLOAT64 && k == pos0 && i && a[i - 1] == neg0)
            continue; /* -0 already counted */
        if (w->type == QR_COL_FLOAT64 && k == neg0)
            k = pos0;
        d++;
        col_hll_add(hll, col_hash_u64(k));
    }
    *distinct = d;
    qr_free(a), qr_free(tmp);
    return QR_OK;
}

/* Zero bytes up to absolute length `len` (sections are 8-aligned relative
 * to the blob start, wherever the blob lands in `out`). */
static void pad_to(QrBuf *b, size_t len)
{
    static const uint8_t z[8] = {0};
    if (b->len < len)
        qr_buf_append(b, z, len - b->len);
}

int colw_finish(ColWriter *w, QrBuf *out, QrError *err)
{
    if (w->err_code)
        return qr_error_set(err, w->err_code, "%s", w->err_msg);
    if (w->finished)
        return qr_error_set(err, QR_EINVAL, "column writer already finished");
    w->finished = true;
    int rc = QR_OK;
    size_t start = out->len;
    uint32_t n_blocks = (uint32_t)(((uint64_t)w->n_rows + COL_BLOCK_ROWS - 1) / COL_BLOCK_ROWS);
    QrBuf dict, dir, data, stats;
    qr_buf_init(&dict), qr_buf_init(&dir), qr_buf_init(&data), qr_buf_init(&stats);
    uint8_t *hll = qr_calloc(COL_HLL_REGS, 1);
    uint8_t *hist = qr_calloc(COL_HIST_MAX, COL_BUCKET_LEN);
    uint64_t *vals = qr_malloc(COL_BLOCK_ROWS * sizeof *vals);
    uint64_t *offs = qr_malloc(COL_BLOCK_ROWS * sizeof *offs);
    uint32_t *counts = NULL;
    uint32_t distinct = 0, n_buckets = 0;
    if (!hll || !hist || !vals || !offs) {
        rc = QR_ENOMEM;
        goto done;
    }
    if (w->type == QR_COL_KEYWORD) {
        rc = finish_dict(w, &dict, &counts, hll);
        if (rc)
            goto done;
        distinct = w->n_distinct;
        n_buckets = col_hist_build_counts(counts, w->n_distinct, hist);
    } else {
        rc = finish_numeric_stats(w, &distinct, hist, &n_buckets, hll);
        if (rc)
            goto done;
    }

    bool col_sorted = true, have_prev = false;
    uint64_t prev = 0, mn = UINT64_MAX, mx = 0;
    for (uint32_t b = 0; b < n_blocks; b++) {
        encode_block(w, b, &dir, &data, vals, offs, &col_sorted, &prev, &have_prev);
        const uint8_t *e = dir.len >= COL_DIR_ENTRY_LEN ? dir.data + dir.len - COL_DIR_ENTRY_LEN : NULL;
        uint16_t nc;
        if (!e || !qr_buf_ok(&dir))
            continue;
        memcpy(&nc, e + 28, 2);
        uint32_t rows = w->n_rows - b * COL_BLOCK_ROWS;
        rows = rows < COL_BLOCK_ROWS ? rows : COL_BLOCK_ROWS;
        if (nc < rows) {
            uint64_t bmn = qr_get_u64le(e), bmx = qr_get_u64le(e + 8);
            mn = bmn < mn ? bmn : mn;
            mx = bmx > mx ? bmx : mx;
        }
    }
    if (w->n_null == w->n_rows)
        mn = mx = 0;

    /* statistics section */
    qr_buf_put_u32(&stats, distinct);
    qr_buf_put_u32(&stats, n_buckets);
    uint32_t nz = 0;
    for (uint32_t i = 0; i < COL_HLL_REGS; i++)
        nz += hll[i] != 0;
    bool sparse = nz * 3 < COL_HLL_REGS;
    qr_buf_putc(&stats, COL_HLL_BITS);
    qr_buf_putc(&stats, sparse ? COL_HLL_SPARSE : COL_HLL_DENSE);
    qr_buf_put_u16(&stats, 0);
    qr_buf_put_u32(&stats, sparse ? nz * 3 : COL_HLL_REGS);
    qr_buf_append(&stats, hist, (size_t)n_buckets * COL_BUCKET_LEN);
    if (sparse) {
        for (uint32_t i = 0; i < COL_HLL_REGS; i++)
            if (hll[i]) {
                qr_buf_put_u16(&stats, (uint16_t)i);
                qr_buf_putc(&stats, hll[i]);
            }
    } else {
        qr_buf_append(&stats, hll, COL_HLL_REGS);
    }
    if (!qr_buf_ok(&stats) || !qr_buf_ok(&dict) || !qr_buf_ok(&dir) || !qr_buf_ok(&data)) {
        rc = QR_ENOMEM;
        goto done;
    }

    /* assemble: header, stats, dict, dir, data (8-aligned sections) */
    uint64_t stats_off = COL_HDR_LEN;
    uint64_t dict_off = (stats_off + stats.len + 7) & ~7ull;
    uint64_t dir_off = (dict_off + dict.len + 7) & ~7ull;
    uint64_t data_off = (dir_off + dir.len + 7) & ~7ull;
    uint8_t h[COL_HDR_LEN] = {0};
    qr_put_u32le(h + 0, COL_MAGIC);
    uint16_t ver = COL_VERSION;
    memcpy(h + 4, &ver, 2);
    h[6] = (uint8_t)w->type;
    h[7] = (col_sorted && w->n_null < w->n_rows) ? COL_HDR_SORTED : 0;
    qr_put_u32le(h + 8, w->n_rows);
    qr_put_u32le(h + 12, n_blocks);
    qr_put_u32le(h + 16, w->n_null);
    qr_put_u32le(h + 20, COL_BLOCK_ROWS);
    qr_put_u64le(h + 24, mn);
    qr_put_u64le(h + 32, mx);
    qr_put_u64le(h + 40, stats_off);
    qr_put_u64le(h + 48, stats.len);
    qr_put_u64le(h + 56, dict_off);
    qr_put_u64le(h + 64, dict.len);
    qr_put_u64le(h + 72, dir_off);
    qr_put_u64le(h + 80, dir.len);
    qr_put_u64le(h + 88, data_off);
    qr_put_u64le(h + 96, data.len);
    uint32_t crc = qr_crc32c(0, h, 104);
    crc = qr_crc32c(crc, stats.data, stats.len);
    crc = qr_crc32c(crc, dict.data, dict.len);
    crc = qr_crc32c(crc, dir.data, dir.len);
    qr_put_u32le(h + 104, crc);
    qr_buf_append(out, h, sizeof h);
    qr_buf_append(out, stats.data, stats.len);
    pad_to(out, start + dict_off);
    qr_buf_append(out, dict.data, dict.len);
    pad_to(out, start + dir_off);
    qr_buf_append(out, dir.data, dir.len);
    pad_to(out, start + data_off);
    qr_buf_append(out, data.data, data.len);
    if (!qr_buf_ok(out)) {
        rc = QR_ENOMEM;
        out->len = start;
    }
done:
    qr_buf_free(&dict), qr_buf_free(&dir), qr_buf_free(&data), qr_buf_free(&stats);
    qr_free(hll), qr_free(hist), qr_free(vals), qr_free(offs), qr_free(counts);
    if (rc)
        return qr_error_set(err, rc, "out of memory while encoding a %s column", col_type_name(w->type));
    return QR_OK;
}
