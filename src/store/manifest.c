/*
 * manifest.c — the table manifest and the segments' deletes files.
 *
 * Layer: store/.  Calls the base kit, sfile.h (qr_sealed_*) and roaring.
 *
 * Both are sealed files (sfile.h: versioned header, one checksummed section,
 * checksummed footer), so torn or damaged files are caught before decoding.
 * Payloads (little-endian; docs/format.md has the long form):
 *
 *   MANIFEST, kind 'MNFT', version 1:
 *      0 u64 generation
 *      8 u64 checkpoint_lsn
 *     16 u64 next_seg_id
 *     24 u32 n_segs
 *     28 u32 flags            bit 0: a schema follows; other bits 0
 *     32 n_segs x 48 bytes:   u64 id, u32 n_docs, u32 n_deleted, u64 del_gen,
 *                             u64 file_bytes, u64 min_lsn, u64 max_lsn
 *        [u32 schema_len, schema_len bytes of JSON text, no NUL]   if bit 0
 *     the payload ends exactly there.
 *
 *   <seg>.del.<gen>, kind 'DELS', version 1:
 *      0 u64 cardinality
 *      8 roaring portable serialization (RoaringFormatSpec), to the end
 *
 * Invariants (manifest_write refuses, manifest_read reports as corrupt):
 * segment ids distinct and < next_seg_id; n_deleted <= n_docs; min_lsn <=
 * max_lsn.  Deletes: the bitmap's cardinality equals the stored one and its
 * serialization spans the payload exactly.
 */
#include "store/manifest.h"

#include "store/buf.h"
#include "store/mem.h"
#include "store/sfile.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define MANIFEST_VERSION 1
#define DELETES_VERSION 1
#define MANIFEST_HEAD_LEN 32
#define MANIFEST_SEG_LEN 48
#define MANIFEST_HAS_SCHEMA 1u

void manifest_free(Manifest *m)
{
    if (!m)
        return;
    qr_free(m->segs);
    qr_free(m->schema_json);
    memset(m, 0, sizeof *m);
}

/* True (and `why` filled) if m breaks an invariant; used both ways. */
static bool manifest_bad(const Manifest *m, char *why, size_t cap)
{
    for (uint32_t i = 0; i < m->n_segs; i++) {
        const ManifestSeg *s = &m->segs[i];
        if (s->id >= m->next_seg_id) {
            snprintf(why, cap, "segment %" PRIu64 " is not below next_seg_id %" PRIu64, s->id,
                     m->next_seg_id);
            return true;
        }
        if (s->n_deleted > s->n_docs) {
            snprintf(why, cap, "segment %" PRIu64 " has %u deleted of %u documents", s->id,
                     s->n_deleted, s->n_docs);
            return true;
        }
        if (s->min_lsn > s->max_lsn) {
            snprintf(why, cap, "segment %" PRIu64 " has min_lsn %" PRIu64 " > max_lsn %" PRIu64,
                     s->id, s->min_lsn, s->max_lsn);
            return true;
        }
        for (uint32_t j = 0; j < i; j++) {
            if (m->segs[j].id == s->id) {
                snprintf(why, cap, "segment %" PRIu64 " is listed twice", s->id);
                return true;
            }
        }
    }
    return false;
}

static char *manifest_path(const char *table_dir)
{
    size_t n = strlen(table_dir) + sizeof MANIFEST_FILE + 1;
    char *p = qr_malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", table_dir, MANIFEST_FILE);
    return p;
}

int manifest_write(const char *table_dir, const Manifest *m, bool do_fsync, QrError *err)
{
    char why[160];
    if (manifest_bad(m, why, sizeof why))
        return qr_error_set(err, QR_EINVAL, "invalid manifest for \"%s\": %s", table_dir, why);
    size_t schema_len = m->schema_json ? strlen(m->schema_json) : 0;
    if (schema_len > UINT32_MAX)
        return qr_error_set(err, QR_ELIMIT, "table schema of %zu bytes is too large", schema_len);
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_reserve(&b, MANIFEST_HEAD_LEN + (size_t)m->n_segs * MANIFEST_SEG_LEN + 4 + schema_len);
    qr_buf_put_u64(&b, m->generation);
    qr_buf_put_u64(&b, m->checkpoint_lsn);
    qr_buf_put_u64(&b, m->next_seg_id);
    qr_buf_put_u32(&b, m->n_segs);
    qr_buf_put_u32(&b, m->schema_json ? MANIFEST_HAS_SCHEMA : 0);
    for (uint32_t i = 0; i < m->n_segs; i++) {
        const ManifestSeg *s = &m->segs[i];
        qr_buf_put_u64(&b, s->id);
        qr_buf_put_u32(&b, s->n_docs);
        qr_buf_put_u32(&b, s->n_deleted);
        qr_buf_put_u64(&b, s->del_gen);
        qr_buf_put_u64(&b, s->file_bytes);
        qr_buf_put_u64(&b, s->min_lsn);
        qr_buf_put_u64(&b, s->max_lsn);
    }
    if (m->schema_json) {
        qr_buf_put_u32(&b, (uint32_t)schema_len);
        qr_buf_append(&b, m->schema_json, schema_len);
    }
    int rc;
    char *path = manifest_path(table_dir);
    if (!qr_buf_ok(&b) || !path)
        rc = qr_error_set(err, QR_ENOMEM, "out of memory writing the manifest of \"%s\"",
                          table_dir);
    else
        rc = qr_sealed_write(path, QR_KIND_MANIFEST, MANIFEST_VERSION, b.data, b.len, do_fsync,
                             err);
    qr_free(path);
    qr_buf_free(&b);
    return rc;
}

static int manifest_corrupt(QrError *err, const char *path, const char *why)
{
    qr_error_set(err, QR_ECORRUPT, "corrupt manifest \"%s\": %s", path, why);
    qr_error_hint(err, "restore the table directory from a backup");
    return QR_ECORRUPT;
}

static int manifest_decode(const uint8_t *p, size_t n, const char *path, Manifest *out,
                           QrError *err)
{
    QrReader r;
    qr_rd_init(&r, p, n);
    Manifest m = {0};
    m.generation = qr_rd_u64(&r);
    m.checkpoint_lsn = qr_rd_u64(&r);
    m.next_seg_id = qr_rd_u64(&r);
    m.n_segs = qr_rd_u32(&r);
    uint32_t flags = qr_rd_u32(&r);
    if (r.bad)
        return manifest_corrupt(err, path, "shorter than its fixed fields");
    if (flags & ~MANIFEST_HAS_SCHEMA)
        return manifest_corrupt(err, path, "unknown flags");
    if ((uint64_t)m.n_segs * MANIFEST_SEG_LEN > qr_rd_left(&r))
        return manifest_corrupt(err, path, "segment count does not fit");
    m.segs = qr_malloc((size_t)m.n_segs * sizeof *m.segs);
    if (!m.segs)
        return qr_error_set(err, QR_ENOMEM, "out of memory reading \"%s\"", path);
    for (uint32_t i = 0; i < m.n_segs; i++) {
        ManifestSeg *s = &m.segs[i];
        s->id = qr_rd_u64(&r);
        s->n_docs = qr_rd_u32(&r);
        s->n_deleted = qr_rd_u32(&r);
        s->del_gen = qr_rd_u64(&r);
        s->file_bytes = qr_rd_u64(&r);
        s->min_lsn = qr_rd_u64(&r);
        s->max_lsn = qr_rd_u64(&r);
    }
    int rc = QR_OK;
    if (flags & MANIFEST_HAS_SCHEMA) {
        uint32_t sl = qr_rd_u32(&r);
        const uint8_t *s = qr_rd_bytes(&r, sl);
        if (!s || r.bad)
            rc = manifest_corrupt(err, path, "schema runs past the end");
        else if (memchr(s, '\0', sl))
            rc = manifest_corrupt(err, path, "NUL byte in the schema");
        else if (!(m.schema_json = qr_strndup((const char *)s, sl)))
            rc = qr_error_set(err, QR_ENOMEM, "out of memory reading \"%s\"", path);
    }
    char why[160];
    if (rc == QR_OK && !qr_rd_done(&r))
        rc = manifest_corrupt(err, path, "trailing bytes after the last field");
    if (rc == QR_OK && manifest_bad(&m, why, sizeof why))
        rc = manifest_corrupt(err, path, why);
    if (rc != QR_OK) {
        manifest_free(&m);
        return rc;
    }
    *out = m;
    return QR_OK;
}

int manifest_read(const char *table_dir, Manifest *m, QrError *err)
{
    char *path = manifest_path(table_dir);
    if (!path)
        return qr_error_set(err, QR_ENOMEM, "out of memory reading the manifest of \"%s\"",
                            table_dir);
    uint8_t *data;
    size_t len;
    int rc = qr_sealed_read(path, QR_KIND_MANIFEST, MANIFEST_VERSION, &data, &len, NULL, err);
    if (rc == QR_OK) {
        rc = manifest_decode(data, len, path, m, err);
        qr_free(data);
    }
    qr_free(path);
    return rc;
}

/* ---- deletes ------------------------------------------------------------- */

bool deletes_path(char *out, size_t cap, const char *table_dir, uint64_t seg_id, uint64_t gen)
{
    int n = snprintf(out, cap, "%s/%" PRIu64 ".del.%" PRIu64, table_dir, seg_id, gen);
    return n >= 0 && (size_t)n < cap;
}

int deletes_write(const char *path, const roaring_bitmap_t *bm, bool do_fsync, QrError *err)
{
    size_t n = roaring_bitmap_portable_size_in_bytes(bm);
    uint8_t *buf = qr_malloc(8 + n);
    if (!buf)
        return qr_error_set(err, QR_ENOMEM, "out of memory writing deletes \"%s\"", path);
    qr_put_u64le(buf, roaring_bitmap_get_cardinality(bm));
    size_t w = roaring_bitmap_portable_serialize(bm, (char *)buf + 8);
    int rc = w == n ? qr_sealed_write(path, QR_KIND_DELETES, DELETES_VERSION, buf, 8 + n,
                                      do_fsync, err)
                    : qr_error_set(err, QR_EINTERNAL,
                                   "roaring serialized %zu bytes, announced %zu", w, n);
    qr_free(buf);
    return rc;
}

int deletes_read(const char *path, roaring_bitmap_t **bm, QrError *err)
{
    uint8_t *data;
    size_t len;
    int rc = qr_sealed_read(path, QR_KIND_DELETES, DELETES_VERSION, &data, &len, NULL, err);
    if (rc != QR_OK)
        return rc;
    roaring_bitmap_t *b = NULL;
    if (len < 8 || roaring_bitmap_portable_deserialize_size((const char *)data + 8, len - 8) !=
                       len - 8) {
        rc = qr_error_set(err, QR_ECORRUPT, "corrupt deletes file \"%s\": bad bitmap", path);
    } else if (!(b = roaring_bitmap_portable_deserialize_safe((const char *)data + 8, len - 8))) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory reading deletes \"%s\"", path);
    } else if (roaring_bitmap_get_cardinality(b) != qr_get_u64le(data)) {
        rc = qr_error_set(err, QR_ECORRUPT,
                          "corrupt deletes file \"%s\": bitmap holds %" PRIu64 " ids, header %" PRIu64,
                          path, (uint64_t)roaring_bitmap_get_cardinality(b), qr_get_u64le(data));
        roaring_bitmap_free(b);
    }
    qr_free(data);
    if (rc == QR_OK)
        *bm = b;
    return rc;
}
