/*
 * column_read.c — open a column blob over borrowed bytes, validate it, and
 * serve random access, batch decode, zone maps, statistics and col_verify.
 *
 * Layer: store/.  Calls column_int.h, mem, crc32c.
 *
 * col_open does all the checking a reader's hot paths rely on, in
 * O(blocks + metadata): after it, every pointer in ColBlock is known to have
 * the bytes its encoding reads (payload + slack), so decoding never checks
 * bounds again.  What open cannot see without reading every payload (a
 * flipped bit inside packed values) can only produce wrong values inside the
 * blob; col_verify catches it with the per-block CRC-32C.
 */
#include "store/column_int.h"
#include "store/crc32c.h"
#include "store/mem.h"

#include <stdarg.h>
#include <stdio.h>

int col_corrupt(QrError *err, const Column *c, int64_t block, const char *fmt, ...)
{
    if (block >= 0)
        qr_error_set(err, QR_ECORRUPT, "corrupt column \"%s\" block %lld", c->name, (long long)block);
    else
        qr_error_set(err, QR_ECORRUPT, "corrupt column \"%s\"", c->name);
    if (err && err->code == QR_ECORRUPT && !err->detail[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->detail, sizeof err->detail, fmt, ap);
        va_end(ap);
    }
    qr_error_hint(err, "the segment file is damaged: restore it from a backup or rebuild the "
                       "segment by re-importing its documents");
    return QR_ECORRUPT;
}

/* off/len inside [lo, total), 8-aligned. */
static bool section_ok(uint64_t off, uint64_t len, uint64_t lo, uint64_t total)
{
    return off >= lo && off % 8 == 0 && off <= total && len <= total - off;
}

static int parse_stats(Column *c, const uint8_t *p, uint64_t len, QrError *err)
{
    if (len < COL_STATS_FIXED)
        return col_corrupt(err, c, -1, "statistics section is %llu bytes, expected at least %u",
                           (unsigned long long)len, COL_STATS_FIXED);
    uint32_t distinct = qr_get_u32le(p), nb = qr_get_u32le(p + 4);
    uint8_t bits = p[8], form = p[9];
    uint32_t hll_len = qr_get_u32le(p + 12);
    uint64_t nonnull = (uint64_t)c->n_rows - c->null_count;
    if (distinct > nonnull || nb > COL_HIST_MAX || bits != COL_HLL_BITS || form > COL_HLL_SPARSE ||
        (uint64_t)COL_STATS_FIXED + (uint64_t)nb * COL_BUCKET_LEN + hll_len != len ||
        (form == COL_HLL_DENSE && hll_len != COL_HLL_REGS) || (form == COL_HLL_SPARSE && hll_len % 3))
        return col_corrupt(err, c, -1,
                           "bad statistics header: distinct %u, %u buckets, hll %u/%u/%u bytes, "
                           "section %llu bytes",
                           distinct, nb, bits, form, hll_len, (unsigned long long)len);
    c->distinct = distinct;
    c->n_buckets = nb;
    c->buckets = p + COL_STATS_FIXED;
    uint64_t sum = 0, prev_hi = 0;
    for (uint32_t i = 0; i < nb; i++) {
        const uint8_t *e = c->buckets + (size_t)i * COL_BUCKET_LEN;
        uint64_t lo = qr_get_u64le(e), hi = qr_get_u64le(e + 8);
        uint32_t cnt = qr_get_u32le(e + 16), dis = qr_get_u32le(e + 20);
        if (lo > hi || (i && lo <= prev_hi) || lo < c->min_key || hi > c->max_key || cnt == 0 ||
            dis == 0 || dis > cnt)
            return col_corrupt(err, c, -1, "histogram bucket %u is inconsistent", i);
        prev_hi = hi;
        sum += cnt;
    }
    if (sum != nonnull || (nonnull && !nb))
        return col_corrupt(err, c, -1, "histogram counts %llu rows, column has %llu non-null rows",
                           (unsigned long long)sum, (unsigned long long)nonnull);
    const uint8_t *h = c->buckets + (size_t)nb * COL_BUCKET_LEN;
    if (form == COL_HLL_DENSE) {
        memcpy(c->hll, h, COL_HLL_REGS);
    } else {
        int64_t prev = -1;
        for (uint32_t i = 0; i < hll_len / 3; i++) {
            uint16_t idx = qr_get_u16le(h + 3 * i);
            if ((int64_t)idx <= prev || idx >= COL_HLL_REGS)
                return col_corrupt(err, c, -1, "sparse HyperLogLog register %u out of order", idx);
            c->hll[idx] = h[3 * i + 2];
            prev = idx;
        }
    }
    for (uint32_t i = 0; i < COL_HLL_REGS; i++)
        if (c->hll[i] > 64 - COL_HLL_BITS + 1)
            return col_corrupt(err, c, -1, "HyperLogLog register %u holds %u", i, c->hll[i]);
    return QR_OK;
}

static int parse_dict(Column *c, const uint8_t *p, uint64_t len, QrError *err)
{
    if (c->type != QR_COL_KEYWORD) {
        if (len)
            return col_corrupt(err, c, -1, "a %s column has a %llu-byte dictionary",
                               col_type_name(c->type), (unsigned long long)len);
        return QR_OK;
    }
    if (len < COL_DICT_FIXED)
        return col_corrupt(err, c, -1, "dictionary section is %llu bytes", (unsigned long long)len);
    uint32_t n = qr_get_u32le(p);
    uint8_t bits = p[4];
    uint64_t bytes_len = qr_get_u64le(p + 8);
    uint64_t packed = (((uint64_t)n + 1) * bits + 7) / 8 + COL_SLACK;
    if (bits > 64 || packed > len - COL_DICT_FIXED || bytes_len != len - COL_DICT_FIXED - packed)
        return col_corrupt(err, c, -1, "dictionary of %u values at %u bits with %llu bytes does not fit "
                           "its %llu-byte section", n, bits, (unsigned long long)bytes_len,
                           (unsigned long long)len);
    c->n_dict = n;
    c->dict_bits = bits;
    c->dict_offs = p + COL_DICT_FIXED;
    c->dict_bytes = c->dict_offs + packed;
    c->dict_bytes_len = bytes_len;
    if (col_bp_get(c->dict_offs, bits, 0) != 0 || col_bp_get(c->dict_offs, bits, n) != bytes_len)
        return col_corrupt(err, c, -1, "dictionary offsets do not span its %llu value bytes",
                           (unsigned long long)bytes_len);
    uint64_t nonnull = (uint64_t)c->n_rows - c->null_count;
    if ((nonnull == 0) != (n == 0) || n > nonnull || c->distinct != n || (n && c->max_key >= n))
        return col_corrupt(err, c, -1, "dictionary holds %u values for %llu non-null rows, "
                           "codes up to %llu", n, (unsigned long long)nonnull,
                           (unsigned long long)c->max_key);
    return QR_OK;
}

static bool zeros(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

static int parse_block(Column *c, uint32_t b, const uint8_t *e, const uint8_t *data,
                       uint64_t data_len, QrError *err)
{
    ColBlock *bk = &c->blocks[b];
    uint32_t rows = c->n_rows - b * COL_BLOCK_ROWS;
    rows = rows < COL_BLOCK_ROWS ? rows : COL_BLOCK_ROWS;
    uint32_t ng = col_groups(rows);
    uint64_t mn = qr_get_u64le(e), mx = qr_get_u64le(e + 8), off = qr_get_u64le(e + 16);
    uint32_t len = qr_get_u32le(e + 24);
    uint16_t nc = qr_get_u16le(e + 28);
    uint8_t enc = e[30], w = e[31], flags = e[32], dw = e[33];
    bk->rows = (uint16_t)rows;
    bk->null_count = nc;
    bk->min = mn;
    bk->max = mx;
    bk->enc = enc;
    bk->width = w;
    bk->dwidth = dw;
    bk->flags = flags;
    bk->crc = qr_get_u32le(e + 36);
    bk->data_len = len;
    if (nc > rows || enc > COL_ENC_DELTA || flags > COL_BLK_SORTED || w > 64 || dw > 64 ||
        qr_get_u16le(e + 34) != 0)
        return col_corrupt(err, c, b, "bad directory entry: %u nulls in %u rows, encoding %u, "
                           "widths %u/%u, flags %u", nc, rows, enc, w, dw, flags);
    if (nc == rows) {
        if (enc != COL_ENC_CONST || mn || mx)
            return col_corrupt(err, c, b, "all-null block with encoding %u and range [%llu, %llu]",
                               enc, (unsigned long long)mn, (unsigned long long)mx);
    } else {
        if (mn > mx || mn < c->min_key || mx > c->max_key)
            return col_corrupt(err, c, b, "zone map [%llu, %llu] outside the column range [%llu, %llu]",
                               (unsigned long long)mn, (unsigned long long)mx,
                               (unsigned long long)c->min_key, (unsigned long long)c->max_key);
        bool ok = enc == COL_ENC_CONST ? (mn == mx && w == 0)
                                       : (w == col_bits(mx - mn) && w >= 1 &&
                                          (enc == COL_ENC_FOR || (flags & COL_BLK_SORTED)));
        if (!ok)
            return col_corrupt(err, c, b, "encoding %u with width %u does not match the zone map "
                               "range [%llu, %llu]", enc, w, (unsigned long long)mn,
                               (unsigned long long)mx);
    }
    uint64_t nb_len = (nc > 0 && nc < rows) ? 8ull * ng : 0;
    uint64_t pay = enc == COL_ENC_FOR     ? 8ull * w * ng + COL_SLACK
                   : enc == COL_ENC_DELTA ? 8 + 8ull * w + 8ull * dw * ng + COL_SLACK
                                          : 0;
    if (len != nb_len + pay || off > data_len || len > data_len - off)
        return col_corrupt(err, c, b, "block data at offset %llu is %u bytes, encoding needs %llu, "
                           "data section is %llu bytes", (unsigned long long)off, len,
                           (unsigned long long)(nb_len + pay), (unsigned long long)data_len);
    bk->data = data + off;
    bk->nulls = nb_len ? bk->data : NULL;
    bk->payload = bk->data + nb_len;
    bk->dbase = 0;
    bk->deltas = NULL;
    if (enc == COL_ENC_DELTA) {
        bk->dbase = qr_get_u64le(bk->payload);
        bk->deltas = bk->payload + 8 + 8ull * w;
    }
    return QR_OK;
}

Column *col_open(const uint8_t *data, size_t len, const char *name, QrError *err)
{
    Column tmp = {0};
    snprintf(tmp.name, sizeof tmp.name, "%s", name ? name : "?");
    if (!data || len < COL_HDR_LEN) {
        col_corrupt(err, &tmp, -1, "column is %zu bytes, shorter than its %u-byte header", len,
                    COL_HDR_LEN);
        return NULL;
    }
    const uint8_t *h = data;
    uint32_t magic = qr_get_u32le(h);
    uint16_t ver = qr_get_u16le(h + 4);
    if (magic != COL_MAGIC || ver != COL_VERSION) {
        col_corrupt(err, &tmp, -1, "bad magic 0x%08x or version %u", magic, ver);
        return NULL;
    }
    uint32_t crc = qr_crc32c(0, h, 104);
    uint64_t so = qr_get_u64le(h + 40), sl = qr_get_u64le(h + 48), dco = qr_get_u64le(h + 56),
             dcl = qr_get_u64le(h + 64), dio = qr_get_u64le(h + 72), dil = qr_get_u64le(h + 80),
             dao = qr_get_u64le(h + 88), dal = qr_get_u64le(h + 96);
    tmp.type = h[6];
    tmp.flags = h[7];
    tmp.n_rows = qr_get_u32le(h + 8);
    tmp.n_blocks = qr_get_u32le(h + 12);
    tmp.null_count = qr_get_u32le(h + 16);
    tmp.min_key = qr_get_u64le(h + 24);
    tmp.max_key = qr_get_u64le(h + 32);
    uint64_t want_blocks = ((uint64_t)tmp.n_rows + COL_BLOCK_ROWS - 1) / COL_BLOCK_ROWS;
    if (tmp.type >= QR_COL_TYPE_COUNT || tmp.flags > COL_HDR_SORTED || tmp.n_rows > COL_MAX_ROWS ||
        tmp.n_blocks != want_blocks || tmp.null_count > tmp.n_rows ||
        qr_get_u32le(h + 20) != COL_BLOCK_ROWS || qr_get_u32le(h + 108) != 0) {
        col_corrupt(err, &tmp, -1, "bad header: type %u, %u rows, %u blocks, %u nulls, block rows %u",
                    tmp.type, tmp.n_rows, tmp.n_blocks, tmp.null_count, qr_get_u32le(h + 20));
        return NULL;
    }
    bool all_null = tmp.null_count == tmp.n_rows;
    if ((all_null && (tmp.min_key || tmp.max_key)) || tmp.min_key > tmp.max_key ||
        (tmp.type == QR_COL_BOOL && tmp.max_key > 1)) {
        col_corrupt(err, &tmp, -1, "bad column range [%llu, %llu]", (unsigned long long)tmp.min_key,
                    (unsigned long long)tmp.max_key);
        return NULL;
    }
    if (!section_ok(so, sl, COL_HDR_LEN, len) || !section_ok(dco, dcl, so + sl, len) ||
        !section_ok(dio, dil, dco + dcl, len) || !section_ok(dao, dal, dio + dil, len) ||
        dao + dal != len || dil != (uint64_t)tmp.n_blocks * COL_DIR_ENTRY_LEN) {
        col_corrupt(err, &tmp, -1, "sections (stats %llu+%llu, dict %llu+%llu, dir %llu+%llu, "
                    "data %llu+%llu) do not fit a %zu-byte column",
                    (unsigned long long)so, (unsigned long long)sl, (unsigned long long)dco,
                    (unsigned long long)dcl, (unsigned long long)dio, (unsigned long long)dil,
                    (unsigned long long)dao, (unsigned long long)dal, len);
        return NULL;
    }
    /* the padding between sections is zero: no byte goes unchecked */
    if (!zeros(data + so + sl, dco - (so + sl)) || !zeros(data + dco + dcl, dio - (dco + dcl)) ||
        !zeros(data + dio + dil, dao - (dio + dil))) {
        col_corrupt(err, &tmp, -1, "non-zero bytes between sections");
        return NULL;
    }
    crc = qr_crc32c(crc, data + so, sl);
    crc = qr_crc32c(crc, data + dco, dcl);
    crc = qr_crc32c(crc, data + dio, dil);
    if (crc != qr_get_u32le(h + 104)) {
        col_corrupt(err, &tmp, -1, "metadata checksum 0x%08x, expected 0x%08x", crc,
                    qr_get_u32le(h + 104));
        return NULL;
    }

    Column *c = qr_malloc(sizeof *c);
    if (!c) {
        qr_error_set(err, QR_ENOMEM, "out of memory opening column \"%s\"", tmp.name);
        return NULL;
    }
    *c = tmp;
    c->data = data;
    c->len = len;
    c->data_off = dao;
    c->hll = qr_calloc(COL_HLL_REGS, 1);
    c->blocks = qr_calloc(c->n_blocks ? c->n_blocks : 1, sizeof *c->blocks);
    if (!c->hll || !c->blocks) {
        qr_error_set(err, QR_ENOMEM, "out of memory opening column \"%s\"", tmp.name);
        col_close(c);
        return NULL;
    }
    if (parse_stats(c, data + so, sl, err) || parse_dict(c, data + dco, dcl, err))
        goto fail;
    c->hll_estimate = col_hll_estimate(c->hll);
    uint64_t nulls = 0, mn = UINT64_MAX, mx = 0;
    for (uint32_t b = 0; b < c->n_blocks; b++) {
        if (parse_block(c, b, data + dio + (uint64_t)b * COL_DIR_ENTRY_LEN, data + dao, dal, err))
            goto fail;
        const ColBlock *bk = &c->blocks[b];
        nulls += bk->null_count;
        if (bk->null_count < bk->rows) {
            mn = bk->min < mn ? bk->min : mn;
            mx = bk->max > mx ? bk->max : mx;
        }
    }
    if (nulls != c->null_count || (!all_null && (mn != c->min_key || mx != c->max_key))) {
        col_corrupt(err, c, -1, "blocks hold %llu nulls and range [%llu, %llu], header says %u "
                    "and [%llu, %llu]", (unsigned long long)nulls, (unsigned long long)mn,
                    (unsigned long long)mx, c->null_count, (unsigned long long)c->min_key,
                    (unsigned long long)c->max_key);
        goto fail;
    }
    return c;
fail:
    col_close(c);
    return NULL;
}

void col_close(Column *c)
{
    if (!c)
        return;
    qr_free(c->blocks);
    qr_free(c->hll);
    qr_free(c);
}

QrColType col_type(const Column *c) { return c->type; }
uint32_t col_rows(const Column *c) { return c->n_rows; }
uint32_t col_n_blocks(const Column *c) { return c->n_blocks; }
const char *col_name(const Column *c) { return c->name; }
uint32_t col_dict_size(const Column *c) { return c->n_dict; }

/* ---- decoding ----------------------------------------------------------- */

uint64_t col_block_key(const ColBlock *bk, uint32_t i)
{
    switch (bk->enc) {
    case COL_ENC_FOR:
        return bk->min + col_bp_get(bk->payload, bk->width, i);
    case COL_ENC_DELTA: {
        uint32_t g0 = i & ~63u;
        uint64_t v = col_bp_get(bk->payload + 8, bk->width, i >> 6);
        for (uint32_t j = g0 + 1; j <= i; j++)
            v += col_bp_get(bk->deltas, bk->dwidth, j) + bk->dbase;
        return bk->min + v;
    }
    default:
        return bk->min;
    }
}

void col_block_group_offsets(const ColBlock *bk, uint32_t g, uint64_t out[64])
{
    if (bk->enc == COL_ENC_FOR) {
        col_unpack64[bk->width](bk->payload + 8ull * bk->width * g, out);
    } else if (bk->enc == COL_ENC_DELTA) {
        col_unpack64[bk->dwidth](bk->deltas + 8ull * bk->dwidth * g, out);
        uint64_t v = col_bp_get(bk->payload + 8, bk->width, g), db = bk->dbase;
        out[0] = v;
        for (unsigned j = 1; j < 64; j++) {
            v += out[j] + db;
            out[j] = v;
        }
    } else {
        memset(out, 0, 64 * sizeof *out);
    }
}

uint64_t col_block_null_word(const ColBlock *bk, uint32_t g)
{
    if (bk->null_count == 0)
        return 0;
    if (bk->null_count == bk->rows) {
        uint32_t left = bk->rows - g * 64;
        return left >= 64 ? ~0ull : (1ull << left) - 1;
    }
    return col_ld64(bk->nulls + 8ull * g);
}

bool col_row_key(const Column *c, uint32_t row, uint64_t *key)
{
    const ColBlock *bk = &c->blocks[row / COL_BLOCK_ROWS];
    uint32_t i = row % COL_BLOCK_ROWS;
    if (col_block_is_null(bk, i))
        return false;
    *key = col_block_key(bk, i);
    return true;
}

bool col_dict_entry(const Column *c, uint32_t code, const uint8_t **s, size_t *n)
{
    if (code >= c->n_dict)
        return false;
    uint64_t a = col_bp_get(c->dict_offs, c->dict_bits, code);
    uint64_t b = col_bp_get(c->dict_offs, c->dict_bits, (uint64_t)code + 1);
    if (a > b || b > c->dict_bytes_len)
        return false;
    *s = c->dict_bytes + a;
    *n = (size_t)(b - a);
    return true;
}

ColVal col_val_from_key(const Column *c, uint64_t key)
{
    switch (c->type) {
    case QR_COL_FLOAT64:
        return col_val_float(col_double_from_key(key));
    case QR_COL_BOOL:
        return col_val_bool(key != 0);
    case QR_COL_KEYWORD: {
        const uint8_t *s = (const uint8_t *)"";
        size_t n = 0;
        col_dict_entry(c, (uint32_t)key, &s, &n);
        return col_val_str((const char *)s, n);
    }
    default:
        return col_val_int(col_int_from_key(key));
    }
}

/* Key of a valid, non-NULL row of a column of type t (or t2). */
static bool get_key(const Column *c, uint32_t row, QrColType t, QrColType t2, uint64_t *key)
{
    if ((c->type != t && c->type != t2) || row >= c->n_rows)
        return false;
    return col_row_key(c, row, key);
}

bool col_get_int(const Column *c, uint32_t row, int64_t *v)
{
    uint64_t k;
    if (!get_key(c, row, QR_COL_INT64, QR_COL_TIMESTAMP, &k))
        return false;
    *v = col_int_from_key(k);
    return true;
}

bool col_get_float(const Column *c, uint32_t row, double *v)
{
    uint64_t k;
    if (!get_key(c, row, QR_COL_FLOAT64, QR_COL_FLOAT64, &k))
        return false;
    *v = col_double_from_key(k);
    return true;
}

bool col_get_bool(const Column *c, uint32_t row, bool *v)
{
    uint64_t k;
    if (!get_key(c, row, QR_COL_BOOL, QR_COL_BOOL, &k))
        return false;
    *v = k != 0;
    return true;
}

bool col_get_code(const Column *c, uint32_t row, uint32_t *code)
{
    uint64_t k;
    if (!get_key(c, row, QR_COL_KEYWORD, QR_COL_KEYWORD, &k) || k >= c->n_dict)
        return false;
    *code = (uint32_t)k;
    return true;
}

bool col_get_str(const Column *c, uint32_t row, const char **s, size_t *n)
{
    uint32_t code;
    const uint8_t *p;
    if (!col_get_code(c, row, &code) || !col_dict_entry(c, code, &p, n))
        return false;
    *s = (const char *)p;
    return true;
}

bool col_dict_get(const Column *c, uint32_t code, const char **s, size_t *n)
{
    const uint8_t *p;
    if (!col_dict_entry(c, code, &p, n))
        return false;
    *s = (const char *)p;
    return true;
}

/* ---- batch decode ------------------------------------------------------- */

/* Decode blocks [first, first+n) as keys, then convert group by group into
 * the caller's array of the column's type (NULL rows zeroed). */
static uint32_t read_blocks(const Column *c, uint32_t first, uint32_t n, void *vals,
                            uint64_t *null_words)
{
    if (first >= c->n_blocks)
        return 0;
    if (n > c->n_blocks - first)
        n = c->n_blocks - first;
    uint32_t r = 0;
    uint64_t offs[64];
    for (uint32_t b = first; b < first + n; b++) {
        const ColBlock *bk = &c->blocks[b];
        uint32_t ng = col_groups(bk->rows);
        for (uint32_t g = 0; g < ng; g++) {
            uint64_t nw = col_block_null_word(bk, g), mn = bk->min;
            uint32_t cnt = bk->rows - g * 64 < 64 ? bk->rows - g * 64 : 64, at = r + g * 64;
            if (null_words)
                null_words[at / 64] = nw;
            col_block_group_offsets(bk, g, offs);
            switch (c->type) {
            case QR_COL_FLOAT64: {
                double *o = (double *)vals + at;
                for (uint32_t j = 0; j < cnt; j++)
                    o[j] = col_double_from_key(mn + offs[j]);
                for (uint64_t m = nw; m; m &= m - 1)
                    o[__builtin_ctzll(m)] = 0.0;
                break;
            }
            case QR_COL_BOOL: {
                uint8_t *o = (uint8_t *)vals + at;
                for (uint32_t j = 0; j < cnt; j++)
                    o[j] = (mn + offs[j]) != 0;
                for (uint64_t m = nw; m; m &= m - 1)
                    o[__builtin_ctzll(m)] = 0;
                break;
            }
            case QR_COL_KEYWORD: {
                uint32_t *o = (uint32_t *)vals + at;
                for (uint32_t j = 0; j < cnt; j++)
                    o[j] = (uint32_t)(mn + offs[j]);
                for (uint64_t m = nw; m; m &= m - 1)
                    o[__builtin_ctzll(m)] = 0;
                break;
            }
            default: {
                int64_t *o = (int64_t *)vals + at;
                for (uint32_t j = 0; j < cnt; j++)
                    o[j] = col_int_from_key(mn + offs[j]);
                for (uint64_t m = nw; m; m &= m - 1)
                    o[__builtin_ctzll(m)] = 0;
                break;
            }
            }
        }
        r += bk->rows;
    }
    return r;
}

uint32_t col_read_int(const Column *c, uint32_t first, uint32_t n, int64_t *vals, uint64_t *nw)
{
    if (c->type != QR_COL_INT64 && c->type != QR_COL_TIMESTAMP)
        return 0;
    return read_blocks(c, first, n, vals, nw);
}

uint32_t col_read_float(const Column *c, uint32_t first, uint32_t n, double *vals, uint64_t *nw)
{
    return c->type == QR_COL_FLOAT64 ? read_blocks(c, first, n, vals, nw) : 0;
}

uint32_t col_read_bool(const Column *c, uint32_t first, uint32_t n, uint8_t *vals, uint64_t *nw)
{
    return c->type == QR_COL_BOOL ? read_blocks(c, first, n, vals, nw) : 0;
}

/* Codes of a damaged block may exceed the dictionary; callers index with
 * them, so they are clamped here (col_verify reports the damage). */
uint32_t col_read_code(const Column *c, uint32_t first, uint32_t n, uint32_t *codes, uint64_t *nw)
{
    if (c->type != QR_COL_KEYWORD)
        return 0;
    uint32_t r = read_blocks(c, first, n, codes, nw);
    for (uint32_t i = 0; i < r; i++)
        codes[i] = codes[i] < c->n_dict ? codes[i] : 0;
    return r;
}

/* ---- zone maps and statistics ------------------------------------------- */

bool col_block_zone(const Column *c, uint32_t block, ColZone *z)
{
    if (block >= c->n_blocks)
        return false;
    const ColBlock *bk = &c->blocks[block];
    memset(z, 0, sizeof *z);
    z->first_row = block * COL_BLOCK_ROWS;
    z->n_rows = bk->rows;
    z->null_count = bk->null_count;
    z->has_range = bk->null_count < bk->rows;
    z->min = col_val_from_key(c, bk->min);
    z->max = col_val_from_key(c, bk->max);
    if (c->type == QR_COL_KEYWORD) {
        z->min_code = (uint32_t)bk->min;
        z->max_code = (uint32_t)bk->max;
    }
    z->encoding = bk->enc;
    z->bit_width = bk->width;
    z->sorted = bk->enc == COL_ENC_CONST || (bk->flags & COL_BLK_SORTED);
    return true;
}

ColStats col_stats(const Column *c)
{
    ColStats s = {0};
    s.type = c->type;
    s.rows = c->n_rows;
    s.null_count = c->null_count;
    s.n_blocks = c->n_blocks;
    s.distinct = c->distinct;
    s.distinct_hll = c->hll_estimate;
    s.has_range = c->null_count < c->n_rows;
    s.min = col_val_from_key(c, c->min_key);
    s.max = col_val_from_key(c, c->max_key);
    s.is_sorted = (c->flags & COL_HDR_SORTED) != 0;
    s.n_buckets = c->n_buckets;
    return s;
}

/* ---- verification ------------------------------------------------------- */

static int verify_block(const Column *c, uint32_t b, uint64_t *prev, bool *have_prev, QrError *err)
{
    const ColBlock *bk = &c->blocks[b];
    uint32_t crc = qr_crc32c(0, bk->data, bk->data_len);
    if (crc != bk->crc)
        return col_corrupt(err, c, b, "block checksum 0x%08x, expected 0x%08x", crc, bk->crc);
    uint32_t ng = col_groups(bk->rows), nulls = 0;
    uint64_t offs[64], lo = UINT64_MAX, hi = 0, last = 0;
    bool sorted = true, first = true;
    for (uint32_t g = 0; g < ng; g++) {
        uint64_t nw = col_block_null_word(bk, g);
        uint32_t cnt = bk->rows - g * 64 < 64 ? bk->rows - g * 64 : 64;
        if (cnt < 64 && (nw >> cnt))
            return col_corrupt(err, c, b, "null bitmap has bits past the last row");
        nulls += (uint32_t)__builtin_popcountll(nw);
        col_block_group_offsets(bk, g, offs);
        for (uint32_t j = 0; j < cnt; j++) {
            uint64_t k = bk->min + offs[j];
            if (!first && k < last)
                sorted = false;
            first = false;
            last = k;
            if (nw >> j & 1)
                continue;
            lo = k < lo ? k : lo;
            hi = k > hi ? k : hi;
            if (*have_prev && k < *prev && (c->flags & COL_HDR_SORTED))
                return col_corrupt(err, c, b, "column is flagged sorted but row %u decreases",
                                   b * COL_BLOCK_ROWS + g * 64 + j);
            *prev = k;
            *have_prev = true;
        }
    }
    if (nulls != bk->null_count)
        return col_corrupt(err, c, b, "null bitmap has %u bits, zone map says %u nulls", nulls,
                           bk->null_count);
    if (nulls < bk->rows && (lo != bk->min || hi != bk->max))
        return col_corrupt(err, c, b, "values span [%llu, %llu], zone map says [%llu, %llu]",
                           (unsigned long long)lo, (unsigned long long)hi,
                           (unsigned long long)bk->min, (unsigned long long)bk->max);
    if ((bk->flags & COL_BLK_SORTED) && !sorted)
        return col_corrupt(err, c, b, "block is flagged sorted but its values decrease");
    return QR_OK;
}

int col_verify(const Column *c, QrError *err)
{
    uint64_t prev = 0;
    bool have_prev = false;
    for (uint32_t b = 0; b < c->n_blocks; b++)
        if (verify_block(c, b, &prev, &have_prev, err))
            return QR_ECORRUPT;
    /* the data section's bytes outside every block (alignment) are zero,
     * when the blocks lie in order as the writer puts them */
    const uint8_t *at = c->data + c->data_off;
    bool in_order = true;
    for (uint32_t b = 0; b < c->n_blocks && in_order; b++) {
        const ColBlock *bk = &c->blocks[b];
        if (!bk->data_len)
            continue;
        in_order = bk->data >= at;
        if (in_order && !zeros(at, (size_t)(bk->data - at)))
            return col_corrupt(err, c, b, "non-zero bytes before the block's data");
        if (in_order)
            at = bk->data + bk->data_len;
    }
    if (in_order && !zeros(at, (size_t)(c->data + c->len - at)))
        return col_corrupt(err, c, -1, "non-zero bytes after the last block");
    const uint8_t *ps = NULL;
    size_t pn = 0;
    for (uint32_t code = 0; code < c->n_dict; code++) {
        const uint8_t *s;
        size_t n;
        if (!col_dict_entry(c, code, &s, &n))
            return col_corrupt(err, c, -1, "dictionary offsets of code %u are out of order", code);
        if (code) {
            size_t m = pn < n ? pn : n;
            int cmp = m ? memcmp(ps, s, m) : 0;
            if (cmp > 0 || (cmp == 0 && pn >= n))
                return col_corrupt(err, c, -1, "dictionary is not strictly sorted at code %u", code);
        }
        ps = s;
        pn = n;
    }
    return QR_OK;
}
