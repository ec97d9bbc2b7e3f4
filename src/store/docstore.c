/*
 * docstore.c — compressed document store: block writer, merge copy, reader
 * with a per-cursor block cache.
 *
 * Layer: store/.  Calls the base kit (buf, mem, error, crc32c) and snappy.
 *
 * Format of the blob (little-endian; docs/format.md has the long form):
 *
 *   0            block 0 .. block B-1: snappy-compressed, back to back
 *   index_off    block index, B entries of 24 bytes:
 *                  0 u32 first_doc   id of the block's first document
 *                  4 u32 raw_len     uncompressed bytes
 *                  8 u64 off         of the compressed block in the blob
 *                 16 u32 comp_len    compressed bytes
 *                 20 u32 crc         CRC32C of the compressed bytes
 *   len - 24     trailer, 24 bytes:
 *                  0 u64 index_off
 *                  8 u32 n_docs
 *                 12 u32 n_blocks
 *                 16 u32 version     1
 *                 20 u32 crc         CRC32C of the index and trailer bytes 0..19
 *
 *   uncompressed block:  varint n, n varint document lengths, the n documents
 *
 * Invariants (checked by ds_open, except the last, checked per block by
 * ds_get): blocks are contiguous from 0 (off_0 = 0, off_i+1 = off_i +
 * comp_len_i, index_off = off_B-1 + comp_len_B-1); first_doc_0 = 0 and
 * first_doc strictly increases below n_docs; n_docs = 0 iff B = 0; a block's
 * n equals next first_doc (or n_docs) minus its first_doc and its lengths
 * add up to exactly the rest of the block.
 */
#include "store/docstore.h"

#include "store/crc32c.h"
#include "store/mem.h"

#include <snappy-c.h>
#include <stdio.h>
#include <string.h>

#define DS_VERSION 1
#define DS_ENTRY_LEN 24
#define DS_TRAILER_LEN 24
#define DS_MAX_BLOCK_BYTES (64u << 20)
#define DS_NO_BLOCK UINT32_MAX
/* Bound on a block's uncompressed size: a full block plus one largest
 * document plus the varints.  ds_open refuses more, so a damaged index
 * cannot ask for a huge allocation. */
#define DS_MAX_RAW_BLOCK (DS_MAX_DOC_BYTES + 2 * DS_MAX_BLOCK_BYTES)

/* ---- writer -------------------------------------------------------------- */

/* Invariant: the open block holds docs [blk_first, n_docs): their varint
 * lengths in `lens`, their bytes in `body`. */
struct DocStoreWriter {
    size_t block_bytes;
    QrBuf blob;          /* owns: closed, compressed blocks */
    QrBuf index;         /* owns: index entries of the closed blocks */
    QrBuf lens;          /* owns: open block's document lengths */
    QrBuf body;          /* owns: open block's documents */
    QrBuf raw;           /* owns: scratch for assembling a block */
    uint32_t n_docs;     /* documents added */
    uint32_t blk_first;  /* id of the open block's first document */
    uint32_t n_blocks;   /* closed blocks */
    SfSpill *spill;      /* borrows: where closed blocks go past spill_keep bytes, or NULL */
    const char *spill_near;
    size_t spill_keep;
    int failed;          /* sticky error code, QR_OK while healthy */
    bool finished;
};

DocStoreWriter *dsw_new(size_t block_bytes)
{
    DocStoreWriter *w = qr_calloc(1, sizeof *w);
    if (!w)
        return NULL;
    if (block_bytes == 0)
        block_bytes = DS_DEFAULT_BLOCK_BYTES;
    w->block_bytes = block_bytes < DS_MAX_BLOCK_BYTES ? block_bytes : DS_MAX_BLOCK_BYTES;
    qr_buf_init(&w->blob);
    qr_buf_init(&w->index);
    qr_buf_init(&w->lens);
    qr_buf_init(&w->body);
    qr_buf_init(&w->raw);
    return w;
}

void dsw_free(DocStoreWriter *w)
{
    if (!w)
        return;
    qr_buf_free(&w->blob);
    qr_buf_free(&w->index);
    qr_buf_free(&w->lens);
    qr_buf_free(&w->body);
    qr_buf_free(&w->raw);
    qr_free(w);
}

uint32_t dsw_count(const DocStoreWriter *w) { return w->n_docs; }

static int dsw_fail(DocStoreWriter *w, int code) { return w->failed = code; }

static int dsw_oom(DocStoreWriter *w, QrError *err)
{
    qr_error_set(err, QR_ENOMEM, "out of memory building a document store block");
    return dsw_fail(w, QR_ENOMEM);
}

static int dsw_check(DocStoreWriter *w, QrError *err)
{
    if (w->failed)
        return qr_error_set(err, w->failed, "document store writer failed earlier");
    if (w->finished)
        return qr_error_set(err, QR_EINVAL, "document store writer is already finished");
    return QR_OK;
}

static void dsw_put_entry(DocStoreWriter *w, uint32_t first, uint32_t raw_len, uint64_t off,
                          uint32_t comp_len, uint32_t crc)
{
    qr_buf_put_u32(&w->index, first);
    qr_buf_put_u32(&w->index, raw_len);
    qr_buf_put_u64(&w->index, off);
    qr_buf_put_u32(&w->index, comp_len);
    qr_buf_put_u32(&w->index, crc);
}

/* Offset in the finished blob of the next byte appended to w->blob. */
static uint64_t dsw_offset(const DocStoreWriter *w)
{
    return (w->spill ? w->spill->len : 0) + w->blob.len;
}

void dsw_spill_to(DocStoreWriter *w, SfSpill *sp, const char *near_path, size_t keep_bytes)
{
    w->spill = sp;
    w->spill_near = near_path;
    w->spill_keep = keep_bytes;
}

/* Move the closed blocks to the spill once they pass spill_keep bytes. */
static int dsw_maybe_spill(DocStoreWriter *w, QrError *err)
{
    if (!w->spill || w->blob.len < w->spill_keep)
        return QR_OK;
    int rc = sf_spill_put(w->spill, w->spill_near, &w->blob, err);
    return rc == QR_OK ? QR_OK : dsw_fail(w, rc);
}

/* Compress the open block (if it has documents) onto the blob. */
static int dsw_flush(DocStoreWriter *w, QrError *err)
{
    uint32_t cnt = w->n_docs - w->blk_first;
    if (cnt == 0)
        return QR_OK;
    w->raw.len = 0;
    qr_buf_put_varint(&w->raw, cnt);
    qr_buf_append(&w->raw, w->lens.data, w->lens.len);
    qr_buf_append(&w->raw, w->body.data, w->body.len);
    if (!qr_buf_ok(&w->raw))
        return dsw_oom(w, err);
    size_t maxc = snappy_max_compressed_length(w->raw.len);
    if (!qr_buf_reserve(&w->blob, maxc))
        return dsw_oom(w, err);
    size_t clen = maxc;
    uint8_t *dst = w->blob.data + w->blob.len;
    if (snappy_compress((const char *)w->raw.data, w->raw.len, (char *)dst, &clen) != SNAPPY_OK) {
        qr_error_set(err, QR_EINTERNAL, "snappy could not compress a document store block");
        return dsw_fail(w, QR_EINTERNAL);
    }
    dsw_put_entry(w, w->blk_first, (uint32_t)w->raw.len, dsw_offset(w), (uint32_t)clen,
                  qr_crc32c(0, dst, clen));
    if (!qr_buf_ok(&w->index))
        return dsw_oom(w, err);
    w->blob.len += clen;
    w->n_blocks++;
    w->blk_first = w->n_docs;
    w->lens.len = w->body.len = 0;
    return dsw_maybe_spill(w, err);
}

int dsw_add(DocStoreWriter *w, const void *doc, size_t len, QrError *err)
{
    int rc = dsw_check(w, err);
    if (rc != QR_OK)
        return rc;
    if (len > DS_MAX_DOC_BYTES) {
        qr_error_set(err, QR_ELIMIT, "document of %zu bytes is over the limit of %u bytes", len,
                     DS_MAX_DOC_BYTES);
        return dsw_fail(w, QR_ELIMIT);
    }
    if (w->n_docs == UINT32_MAX - 1) {
        qr_error_set(err, QR_ELIMIT, "too many documents in one document store");
        return dsw_fail(w, QR_ELIMIT);
    }
    /* A big document gets a block of its own. */
    if (len >= w->block_bytes && (rc = dsw_flush(w, err)) != QR_OK)
        return rc;
    qr_buf_put_varint(&w->lens, len);
    qr_buf_append(&w->body, doc, len);
    if (!qr_buf_ok(&w->lens) || !qr_buf_ok(&w->body))
        return dsw_oom(w, err);
    w->n_docs++;
    if (w->lens.len + w->body.len >= w->block_bytes)
        return dsw_flush(w, err);
    return QR_OK;
}

int dsw_finish(DocStoreWriter *w, QrBuf *out, QrError *err)
{
    int rc = dsw_check(w, err);
    if (rc == QR_OK)
        rc = dsw_flush(w, err);
    if (rc != QR_OK)
        return rc;
    uint64_t index_off = dsw_offset(w);
    qr_buf_append(&w->blob, w->index.data, w->index.len);
    size_t crc_from = w->blob.len - w->index.len;
    qr_buf_put_u64(&w->blob, index_off);
    qr_buf_put_u32(&w->blob, w->n_docs);
    qr_buf_put_u32(&w->blob, w->n_blocks);
    qr_buf_put_u32(&w->blob, DS_VERSION);
    if (!qr_buf_ok(&w->blob))
        return dsw_oom(w, err);
    qr_buf_put_u32(&w->blob, qr_crc32c(0, w->blob.data + crc_from, w->blob.len - crc_from));
    if (!qr_buf_ok(&w->blob))
        return dsw_oom(w, err);
    *out = w->blob;
    qr_buf_init(&w->blob);
    w->finished = true;
    return QR_OK;
}

/* ---- reader -------------------------------------------------------------- */

/* Invariant: everything ds_open checks (see the file comment) holds. */
struct DocStore {
    const uint8_t *data;  /* borrows: the blob */
    const uint8_t *index; /* borrows: data + index_off */
    uint32_t n_docs;
    uint32_t n_blocks;
    uint64_t *checked;    /* owns: bit b set once block b's checksum matched (atomic: cursors
                             of several threads load blocks; a race only checks twice) */
};

typedef struct DsEntry {
    uint32_t first;
    uint32_t raw_len;
    uint64_t off;
    uint32_t comp_len;
    uint32_t crc;
} DsEntry;

static DsEntry ds_entry(const DocStore *ds, uint32_t b)
{
    const uint8_t *q = ds->index + (size_t)b * DS_ENTRY_LEN;
    return (DsEntry){qr_get_u32le(q), qr_get_u32le(q + 4), qr_get_u64le(q + 8),
                     qr_get_u32le(q + 16), qr_get_u32le(q + 20)};
}

/* Number of documents in block b. */
static uint32_t ds_block_docs(const DocStore *ds, uint32_t b)
{
    uint32_t end = b + 1 < ds->n_blocks ? ds_entry(ds, b + 1).first : ds->n_docs;
    return end - ds_entry(ds, b).first;
}

static int ds_corrupt(QrError *err, const char *why)
{
    qr_error_set(err, QR_ECORRUPT, "corrupt document store: %s", why);
    qr_error_hint(err, "restore the segment from a backup or rebuild the table");
    return QR_ECORRUPT;
}

static int ds_block_corrupt(QrError *err, const DocStore *ds, uint32_t b, const char *why)
{
    uint32_t first = ds_entry(ds, b).first;
    qr_error_set(err, QR_ECORRUPT, "corrupt document store block %u (docs %u..%u): %s", b, first,
                 first + ds_block_docs(ds, b) - 1, why);
    qr_error_hint(err, "restore the segment from a backup or rebuild the table");
    return QR_ECORRUPT;
}

int ds_open(const uint8_t *data, size_t len, DocStore **out, QrError *err)
{
    if (len < DS_TRAILER_LEN)
        return ds_corrupt(err, "shorter than its trailer");
    const uint8_t *t = data + len - DS_TRAILER_LEN;
    uint64_t index_off = qr_get_u64le(t);
    uint32_t n_docs = qr_get_u32le(t + 8), n_blocks = qr_get_u32le(t + 12);
    uint32_t version = qr_get_u32le(t + 16);
    size_t body = len - DS_TRAILER_LEN;
    if (index_off > body || (body - index_off) / DS_ENTRY_LEN != n_blocks ||
        (body - index_off) % DS_ENTRY_LEN != 0) {
        ds_corrupt(err, "block index does not fit");
        qr_error_detail(err, "%u blocks at offset %llu in %zu bytes", n_blocks,
                        (unsigned long long)index_off, len);
        return QR_ECORRUPT;
    }
    uint32_t stored = qr_get_u32le(t + 20);
    uint32_t computed = qr_crc32c(0, data + index_off, len - 4 - (size_t)index_off);
    if (stored != computed) {
        ds_corrupt(err, "block index checksum mismatch");
        qr_error_detail(err, "stored 0x%08x, computed 0x%08x", stored, computed);
        return QR_ECORRUPT;
    }
    if (version == 0)
        return ds_corrupt(err, "format version 0");
    if (version > DS_VERSION)
        return qr_error_set(err, QR_EUNSUPPORTED,
                            "document store format version %u is newer than this build (%u)",
                            version, DS_VERSION);
    DocStore tmp = {data, data + index_off, n_docs, n_blocks, NULL};
    if ((n_docs == 0) != (n_blocks == 0))
        return ds_corrupt(err, "document and block counts disagree");
    uint64_t off = 0;
    for (uint32_t b = 0; b < n_blocks; b++) {
        DsEntry e = ds_entry(&tmp, b);
        const char *bad = NULL;
        if (b == 0 ? e.first != 0 : e.first <= ds_entry(&tmp, b - 1).first)
            bad = "first document ids out of order";
        else if (e.first >= n_docs)
            bad = "first document id beyond the document count";
        else if (e.off != off || e.comp_len == 0 || e.comp_len > index_off - off)
            bad = "block is not where the index says";
        else if (e.raw_len == 0 || e.raw_len > DS_MAX_RAW_BLOCK)
            bad = "impossible uncompressed block size";
        if (bad) {
            ds_corrupt(err, bad);
            qr_error_detail(err, "block %u: first doc %u, offset %llu, %u bytes", b, e.first,
                            (unsigned long long)e.off, e.comp_len);
            return QR_ECORRUPT;
        }
        off += e.comp_len;
    }
    if (off != index_off)
        return ds_corrupt(err, "bytes between the last block and the index");
    DocStore *ds = qr_malloc(sizeof *ds);
    uint64_t *checked = qr_calloc((size_t)n_blocks / 64 + 1, sizeof *checked);
    if (!ds || !checked) {
        qr_free(ds);
        qr_free(checked);
        return qr_error_set(err, QR_ENOMEM, "out of memory opening a document store");
    }
    *ds = tmp;
    ds->checked = checked;
    *out = ds;
    return QR_OK;
}

void ds_close(DocStore *ds)
{
    if (ds)
        qr_free(ds->checked);
    qr_free(ds);
}

uint32_t ds_count(const DocStore *ds) { return ds->n_docs; }

/* Invariant: when blk != DS_NO_BLOCK, raw holds that block decompressed and
 * offs[0..cnt] the offsets of its documents in raw (doc first+i spans
 * offs[i]..offs[i+1]). */
struct DocStoreCursor {
    const DocStore *ds; /* borrows */
    uint32_t blk;       /* cached block or DS_NO_BLOCK */
    uint32_t first;     /* first doc of the cached block */
    uint32_t cnt;       /* docs in the cached block */
    uint8_t *raw;       /* owns */
    size_t raw_cap;
    size_t *offs;       /* owns */
    size_t offs_cap;    /* entries */
};

DocStoreCursor *ds_cursor_new(const DocStore *ds)
{
    DocStoreCursor *c = qr_calloc(1, sizeof *c);
    if (c) {
        c->ds = ds;
        c->blk = DS_NO_BLOCK;
    }
    return c;
}

void ds_cursor_free(DocStoreCursor *c)
{
    if (!c)
        return;
    qr_free(c->raw);
    qr_free(c->offs);
    qr_free(c);
}

/* Largest b with first_doc(b) <= doc (doc < n_docs, so b exists). */
static uint32_t ds_find_block(const DocStore *ds, uint32_t doc)
{
    uint32_t lo = 0, hi = ds->n_blocks; /* answer in [lo, hi) */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ds_entry(ds, mid).first <= doc)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Check, decompress and index block b into the cursor. */
static int ds_load(DocStoreCursor *c, uint32_t b, QrError *err)
{
    const DocStore *ds = c->ds;
    DsEntry e = ds_entry(ds, b);
    const char *src = (const char *)ds->data + e.off;
    c->blk = DS_NO_BLOCK;
    /* the checksum once per block and open store, not at every load: a
     * query reading documents loaded (and checked) each block it touched
     * again, a few percent of its time in crc32c */
    uint64_t bit = 1ull << (b % 64), *word = &ds->checked[b / 64];
    if (!(__atomic_load_n(word, __ATOMIC_ACQUIRE) & bit)) {
        uint32_t crc = qr_crc32c(0, src, e.comp_len);
        if (crc != e.crc) {
            ds_block_corrupt(err, ds, b, "checksum mismatch");
            qr_error_detail(err, "stored 0x%08x, computed 0x%08x", e.crc, crc);
            return QR_ECORRUPT;
        }
        __atomic_fetch_or(word, bit, __ATOMIC_RELEASE);
    }
    size_t ulen;
    if (snappy_uncompressed_length(src, e.comp_len, &ulen) != SNAPPY_OK || ulen != e.raw_len)
        return ds_block_corrupt(err, ds, b, "bad compressed length");
    if (c->raw_cap < ulen) {
        uint8_t *nr = qr_realloc(c->raw, ulen);
        if (!nr)
            return qr_error_set(err, QR_ENOMEM, "out of memory reading document store block %u",
                                b);
        c->raw = nr;
        c->raw_cap = ulen;
    }
    if (snappy_uncompress(src, e.comp_len, (char *)c->raw, &ulen) != SNAPPY_OK ||
        ulen != e.raw_len)
        return ds_block_corrupt(err, ds, b, "snappy could not decompress it");
    uint32_t cnt = ds_block_docs(ds, b);
    QrReader r;
    qr_rd_init(&r, c->raw, ulen);
    uint64_t n = qr_rd_varint(&r);
    if (r.bad || n != cnt)
        return ds_block_corrupt(err, ds, b, "document count disagrees with the index");
    if (c->offs_cap < (size_t)cnt + 1) {
        size_t *no = qr_realloc(c->offs, ((size_t)cnt + 1) * sizeof *no);
        if (!no)
            return qr_error_set(err, QR_ENOMEM, "out of memory reading document store block %u",
                                b);
        c->offs = no;
        c->offs_cap = (size_t)cnt + 1;
    }
    uint64_t sum = 0;
    for (uint32_t i = 0; i < cnt; i++) {
        uint64_t l = qr_rd_varint(&r);
        if (r.bad || l > ulen)
            return ds_block_corrupt(err, ds, b, "bad document length");
        c->offs[i] = (size_t)sum; /* relative for now */
        sum += l;
    }
    size_t base = ulen - qr_rd_left(&r);
    if (sum != qr_rd_left(&r))
        return ds_block_corrupt(err, ds, b, "document lengths do not add up to the block");
    for (uint32_t i = 0; i < cnt; i++)
        c->offs[i] += base;
    c->offs[cnt] = ulen;
    c->blk = b;
    c->first = e.first;
    c->cnt = cnt;
    return QR_OK;
}

int ds_get(DocStoreCursor *c, uint32_t doc, const uint8_t **doc_out, size_t *len_out,
           QrError *err)
{
    if (doc >= c->ds->n_docs)
        return qr_error_set(err, QR_ENOTFOUND, "document %u not found (the store holds %u)", doc,
                            c->ds->n_docs);
    if (c->blk == DS_NO_BLOCK || doc < c->first || doc - c->first >= c->cnt) {
        int rc = ds_load(c, ds_find_block(c->ds, doc), err);
        if (rc != QR_OK)
            return rc;
    }
    uint32_t i = doc - c->first;
    *doc_out = c->raw + c->offs[i];
    *len_out = c->offs[i + 1] - c->offs[i];
    return QR_OK;
}

/* ---- merge copy ---------------------------------------------------------- */

int dsw_add_from(DocStoreWriter *w, const DocStore *src, const bool *keep, QrError *err)
{
    int rc = dsw_check(w, err);
    if (rc != QR_OK)
        return rc;
    DocStoreCursor *cur = NULL;
    for (uint32_t b = 0; b < src->n_blocks && rc == QR_OK; b++) {
        DsEntry e = ds_entry(src, b);
        uint32_t cnt = ds_block_docs(src, b), kept = 0;
        for (uint32_t i = 0; i < cnt; i++)
            kept += !keep || keep[e.first + i];
        if (kept == 0)
            continue;
        if (kept < cnt) { /* slow path: re-add the kept documents */
            if (!cur && !(cur = ds_cursor_new(src))) {
                rc = dsw_oom(w, err);
                break;
            }
            for (uint32_t i = 0; i < cnt && rc == QR_OK; i++) {
                const uint8_t *d;
                size_t dl;
                if (!keep[e.first + i])
                    continue;
                rc = ds_get(cur, e.first + i, &d, &dl, err);
                rc = rc != QR_OK ? dsw_fail(w, rc) : dsw_add(w, d, dl, err);
            }
            continue;
        }
        /* fast path: copy the compressed block as is */
        const uint8_t *p = src->data + e.off;
        uint32_t crc = qr_crc32c(0, p, e.comp_len);
        if (crc != e.crc) {
            ds_block_corrupt(err, src, b, "checksum mismatch");
            qr_error_detail(err, "stored 0x%08x, computed 0x%08x", e.crc, crc);
            rc = dsw_fail(w, QR_ECORRUPT);
            break;
        }
        if ((uint64_t)w->n_docs + cnt >= UINT32_MAX) {
            qr_error_set(err, QR_ELIMIT, "too many documents in one document store");
            rc = dsw_fail(w, QR_ELIMIT);
            break;
        }
        if ((rc = dsw_flush(w, err)) != QR_OK)
            break;
        dsw_put_entry(w, w->n_docs, e.raw_len, dsw_offset(w), e.comp_len, e.crc);
        qr_buf_append(&w->blob, p, e.comp_len);
        if (!qr_buf_ok(&w->index) || !qr_buf_ok(&w->blob)) {
            rc = dsw_oom(w, err);
            break;
        }
        w->n_docs += cnt;
        w->blk_first = w->n_docs;
        w->n_blocks++;
        if ((rc = dsw_maybe_spill(w, err)) != QR_OK)
            break;
    }
    ds_cursor_free(cur);
    return rc;
}
