/*
 * sfile.c — section files, sealed small files, the common file header.
 *
 * Layer: store/.  Calls the base kit (error, mem, buf, util, crc32c), POSIX.
 *
 * Format (all integers little-endian; docs/format.md has the long form):
 *
 *   offset 0          header, 16 bytes (shared by every Quarry file)
 *     0  u32 magic    bytes 89 'Q' 'R' 'Y'
 *     4  u32 kind     four-character code, e.g. 'W' 'A' 'L' 'F'
 *     8  u32 version  content format version, >= 1
 *    12  u32 crc      CRC32C of bytes 0..11
 *   16                zero padding up to 64
 *   64                section 0 bytes, zero padding up to a multiple of 64
 *   ...               section k bytes (no padding after the last one)
 *   T                 section table, n entries of 24 bytes, in file order:
 *     0  u32 id       caller's section id, unique in the file
 *     4  u64 offset   from the start of the file, multiple of 64
 *    12  u64 length   bytes
 *    20  u32 crc      CRC32C of the section's bytes
 *   T + 24n           tail, 16 bytes:
 *     0  u32 n        number of sections
 *     4  u32 layout   container layout, 1
 *     8  u32 crc      CRC32C of the table and the tail's first 8 bytes
 *    12  u32 magic    bytes 'Q' 'E' 'N' 'D'
 *   EOF
 *
 * Invariants checked at open (any violation is QR_ECORRUPT naming the file):
 * the layout is canonical — offset_0 = 64, offset_i+1 = align64(offset_i +
 * length_i), T = offset_last + length_last (16 with no sections), the tail
 * ends the file — and ids are unique.  Because the layout is canonical every
 * byte of the file is covered: header and table by their CRCs at open,
 * section bytes by theirs and padding by the must-be-zero rule in sf_verify.
 *
 * The tail (its 16 bytes and the meaning of `layout`) is frozen: a reader
 * that finds layout > 1 reports QR_EUNSUPPORTED instead of guessing.
 */
#include "store/sfile.h"

#include "store/crc32c.h"
#include "store/mem.h"
#include "store/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SF_MAGIC 0x59525189u     /* 89 'Q' 'R' 'Y' */
#define SF_END_MAGIC 0x444e4551u /* 'Q' 'E' 'N' 'D' */
#define SF_LAYOUT 1u
#define SF_ENTRY_LEN 24
#define SF_TAIL_LEN 16

static const uint8_t zeros[SF_ALIGN];

static uint64_t align_up(uint64_t x) { return (x + SF_ALIGN - 1) & ~(uint64_t)(SF_ALIGN - 1); }

/* "'WALF'" when printable, else hex: for messages. */
static const char *kind_str(char buf[16], uint32_t kind)
{
    char c[4];
    for (int i = 0; i < 4; i++) {
        c[i] = (char)(kind >> (8 * i));
        if (c[i] < 0x20 || c[i] > 0x7e) {
            snprintf(buf, 16, "0x%08x", kind);
            return buf;
        }
    }
    snprintf(buf, 16, "'%c%c%c%c'", c[0], c[1], c[2], c[3]);
    return buf;
}

static int corrupt(QrError *err, const char *path, uint64_t off, const char *what)
{
    qr_error_set(err, QR_ECORRUPT, "corrupt file \"%s\": %s", path, what);
    qr_error_pos(err, (int64_t)off, -1, -1);
    qr_error_hint(err, "restore the file from a backup or rebuild the table");
    return QR_ECORRUPT;
}

/* ---- header -------------------------------------------------------------- */

void sf_header_encode(uint8_t out[SF_HEADER_LEN], uint32_t kind, uint32_t version)
{
    qr_put_u32le(out, SF_MAGIC);
    qr_put_u32le(out + 4, kind);
    qr_put_u32le(out + 8, version);
    qr_put_u32le(out + 12, qr_crc32c(0, out, 12));
}

int sf_header_check(const uint8_t *p, size_t len, const char *path, uint32_t kind,
                    uint32_t max_version, uint32_t *version, QrError *err)
{
    if (len < SF_HEADER_LEN)
        return corrupt(err, path, 0, "file is shorter than its header");
    if (qr_get_u32le(p) != SF_MAGIC) {
        corrupt(err, path, 0, "bad magic number");
        qr_error_detail(err, "found 0x%08x, expected 0x%08x", qr_get_u32le(p), SF_MAGIC);
        return QR_ECORRUPT;
    }
    uint32_t stored = qr_get_u32le(p + 12), computed = qr_crc32c(0, p, 12);
    if (stored != computed) {
        corrupt(err, path, 12, "header checksum mismatch");
        qr_error_detail(err, "stored 0x%08x, computed 0x%08x", stored, computed);
        return QR_ECORRUPT;
    }
    uint32_t k = qr_get_u32le(p + 4), v = qr_get_u32le(p + 8);
    if (k != kind) {
        char a[16], b[16];
        corrupt(err, path, 4, "wrong kind of file");
        qr_error_detail(err, "found kind %s, expected %s", kind_str(a, k), kind_str(b, kind));
        return QR_ECORRUPT;
    }
    if (v == 0)
        return corrupt(err, path, 8, "format version 0");
    if (v > max_version) {
        qr_error_set(err, QR_EUNSUPPORTED,
                     "file \"%s\" has format version %u, newer than this build supports (%u)",
                     path, v, max_version);
        qr_error_hint(err, "open it with the newer Quarry release that wrote it");
        return QR_EUNSUPPORTED;
    }
    if (version)
        *version = v;
    return QR_OK;
}

/* ---- writer -------------------------------------------------------------- */

typedef struct SfSection {
    uint32_t id;
    const uint8_t *data; /* borrows: `owned` or the caller's bytes (sealed write) */
    uint8_t *owned;      /* owns: copy or adopted QrBuf bytes; NULL when borrowed */
    size_t len;          /* bytes of data: the section is spill_len + len bytes */
    int spill_fd;        /* owns: the section's first spill_len bytes, or -1 */
    uint64_t spill_len;
} SfSection;

/* Invariant: ids in secs[0..n) are distinct. */
struct SfileWriter {
    uint32_t kind;
    uint32_t version;
    SfSection *secs; /* owns: sections in file order */
    uint32_t n;
    uint32_t cap;
};

SfileWriter *sfw_new(uint32_t kind, uint32_t version)
{
    SfileWriter *w = qr_calloc(1, sizeof *w);
    if (w) {
        w->kind = kind;
        w->version = version;
    }
    return w;
}

void sfw_free(SfileWriter *w)
{
    if (!w)
        return;
    for (uint32_t i = 0; i < w->n; i++) {
        qr_free(w->secs[i].owned);
        if (w->secs[i].spill_fd >= 0)
            close(w->secs[i].spill_fd);
    }
    qr_free(w->secs);
    qr_free(w);
}

/* Reserve the slot for a new section; checks the id is new. */
static SfSection *sfw_slot(SfileWriter *w, uint32_t id, QrError *err)
{
    if (!w) {
        qr_error_set(err, QR_EINVAL, "no section file writer");
        return NULL;
    }
    for (uint32_t i = 0; i < w->n; i++) {
        if (w->secs[i].id == id) {
            qr_error_set(err, QR_EINVAL, "section %u added twice to a section file", id);
            return NULL;
        }
    }
    if (w->n == w->cap) {
        uint32_t nc = w->cap ? w->cap * 2 : 8;
        SfSection *ns = qr_realloc(w->secs, nc * sizeof *ns);
        if (!ns) {
            qr_error_set(err, QR_ENOMEM, "out of memory adding section %u", id);
            return NULL;
        }
        w->secs = ns;
        w->cap = nc;
    }
    SfSection *s = &w->secs[w->n];
    memset(s, 0, sizeof *s);
    s->id = id;
    s->spill_fd = -1;
    return s;
}

int sfw_add(SfileWriter *w, uint32_t section_id, const void *data, size_t len, QrError *err)
{
    SfSection *s = sfw_slot(w, section_id, err);
    if (!s)
        return err ? err->code : QR_EINVAL;
    s->owned = qr_malloc(len);
    if (!s->owned)
        return qr_error_set(err, QR_ENOMEM, "out of memory copying section %u (%zu bytes)",
                            section_id, len);
    if (len)
        memcpy(s->owned, data, len);
    s->data = s->owned;
    s->len = len;
    w->n++;
    return QR_OK;
}

int sfw_add_buf(SfileWriter *w, uint32_t section_id, QrBuf *buf, QrError *err)
{
    if (buf->oom)
        return qr_error_set(err, QR_ENOMEM,
                            "section %u is incomplete: its buffer ran out of memory", section_id);
    SfSection *s = sfw_slot(w, section_id, err);
    if (!s)
        return err ? err->code : QR_EINVAL;
    s->owned = buf->data; /* may be NULL for an empty buffer */
    s->data = buf->data ? buf->data : zeros;
    s->len = buf->len;
    qr_buf_init(buf);
    w->n++;
    return QR_OK;
}

/* Borrowing add for qr_sealed_write: `data` must outlive sfw_finish. */
static int sfw_add_borrowed(SfileWriter *w, uint32_t id, const void *data, size_t len,
                            QrError *err)
{
    SfSection *s = sfw_slot(w, id, err);
    if (!s)
        return err ? err->code : QR_EINVAL;
    s->data = len ? data : zeros;
    s->len = len;
    w->n++;
    return QR_OK;
}

static int io_error(QrError *err, const char *what, const char *path, int e)
{
    qr_error_set(err, QR_EIO, "could not %s file \"%s\": %s", what, path, strerror(e));
    if (e == ENOSPC || e == EDQUOT || e == EFBIG) {
        qr_error_hint(err, "free disk space and retry; nothing was written");
        qr_error_set_sqlstate(err, "53100"); /* disk_full */
    }
    return QR_EIO;
}

static int write_all(int fd, const void *data, size_t len, const char *path, QrError *err)
{
    const uint8_t *p = data;
    while (len) {
        int fault = qr_io_fault();
        if (fault)
            return io_error(err, "write", path, fault);
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return io_error(err, "write", path, errno);
        }
        if (n == 0)
            return io_error(err, "write", path, ENOSPC);
        p += n;
        len -= (size_t)n;
    }
    return QR_OK;
}

/* fsync the directory holding `path`. */
static int fsync_parent(const char *path, QrError *err)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return qr_fsync_dir(".", err);
    if (slash == path)
        return qr_fsync_dir("/", err);
    char *dir = qr_strndup(path, (size_t)(slash - path));
    if (!dir)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    int rc = qr_fsync_dir(dir, err);
    qr_free(dir);
    return rc;
}

/* Where sfw_emit_image sends the bytes: a file descriptor or a buffer. */
typedef struct SfSink {
    int fd;              /* >= 0: write here */
    const char *path;    /* for messages */
    uint8_t *mem;        /* fd < 0: the image goes here, mem_len bytes */
    size_t mem_len, mem_off;
} SfSink;

static int sink_put(SfSink *k, const void *p, size_t n, QrError *err)
{
    if (k->fd >= 0)
        return write_all(k->fd, p, n, k->path, err);
    if (n > k->mem_len - k->mem_off)
        return qr_error_set(err, QR_EINTERNAL, "section file image of \"%s\" overflows", k->path);
    if (n)
        memcpy(k->mem + k->mem_off, p, n);
    k->mem_off += n;
    return QR_OK;
}

/* Copy a section's spilled bytes to the sink, adding them to *crc. */
static int sink_put_spill(SfSink *k, const SfSection *s, uint32_t *crc, QrError *err)
{
    enum { CHUNK = 1 << 20 };
    uint8_t *b = qr_malloc(CHUNK);
    if (!b)
        return qr_error_set(err, QR_ENOMEM, "out of memory writing \"%s\"", k->path);
    int rc = QR_OK;
    for (uint64_t at = 0; at < s->spill_len && rc == QR_OK;) {
        size_t want = s->spill_len - at < CHUNK ? (size_t)(s->spill_len - at) : CHUNK;
        ssize_t got = pread(s->spill_fd, b, want, (off_t)at);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            rc = io_error(err, "read back the spilled section of", k->path,
                          got < 0 ? errno : EIO);
            break;
        }
        *crc = qr_crc32c(*crc, b, (size_t)got);
        rc = sink_put(k, b, (size_t)got, err);
        at += (uint64_t)got;
    }
    qr_free(b);
    return rc;
}

/* An unlinked file in the directory of `near` (O_TMPFILE where the file
 * system has it, else a named file removed at once). */
static int spill_open(const char *near, QrError *err)
{
    const char *slash = strrchr(near, '/');
    char dir[4096];
    size_t dl = slash ? (size_t)(slash - near) : 1;
    if (dl == 0)
        dl = 1; /* "/name" */
    if (dl + 32 > sizeof dir)
        return qr_error_set(err, QR_EINVAL, "path too long: \"%s\"", near);
    memcpy(dir, slash ? near : ".", dl);
    dir[dl] = 0;
    int fd = -1;
#ifdef O_TMPFILE
    fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
    if (fd < 0) {
        char tmpl[4096 + 32];
        snprintf(tmpl, sizeof tmpl, "%s/.spill-XXXXXX", dir);
        fd = mkostemp(tmpl, O_CLOEXEC);
        if (fd >= 0)
            unlink(tmpl);
    }
    if (fd < 0)
        io_error(err, "create a spill file beside", near, errno);
    return fd;
}

int sf_spill_put(SfSpill *sp, const char *near_path, QrBuf *buf, QrError *err)
{
    if (buf->oom)
        return qr_error_set(err, QR_ENOMEM, "out of memory building \"%s\"", near_path);
    if (buf->len == 0)
        return QR_OK;
    if (sp->fd < 0 && (sp->fd = spill_open(near_path, err)) < 0)
        return err ? err->code : QR_EIO;
    int rc = write_all(sp->fd, buf->data, buf->len, near_path, err);
    if (rc != QR_OK)
        return rc;
    sp->len += buf->len;
    buf->len = 0;
    return QR_OK;
}

void sf_spill_close(SfSpill *sp)
{
    if (sp->fd >= 0)
        close(sp->fd);
    sp->fd = -1;
    sp->len = 0;
}

int sfw_add_spill(SfileWriter *w, uint32_t section_id, SfSpill *sp, QrBuf *tail,
                  QrError *err)
{
    int rc = sfw_add_buf(w, section_id, tail, err);
    if (rc != QR_OK) {
        sf_spill_close(sp);
        return rc;
    }
    SfSection *s = &w->secs[w->n - 1];
    s->spill_fd = sp->fd;
    s->spill_len = sp->fd >= 0 ? sp->len : 0;
    sp->fd = -1;
    sp->len = 0;
    return QR_OK;
}

/* Bytes of the whole file sfw_emit_image produces. */
static uint64_t sfw_image_len(const SfileWriter *w)
{
    uint64_t off = SF_HEADER_LEN;
    for (uint32_t i = 0; i < w->n; i++)
        off = align_up(off) + w->secs[i].spill_len + w->secs[i].len;
    return off + (uint64_t)w->n * SF_ENTRY_LEN + SF_TAIL_LEN;
}

/* Stream header, sections and footer to the sink. */
static int sfw_emit_image(const SfileWriter *w, SfSink *k, QrError *err)
{
    QrBuf tab;
    qr_buf_init(&tab);
    if (!qr_buf_reserve(&tab, (size_t)w->n * SF_ENTRY_LEN + SF_TAIL_LEN))
        return qr_error_set(err, QR_ENOMEM, "out of memory writing \"%s\"", k->path);
    uint8_t hdr[SF_HEADER_LEN];
    sf_header_encode(hdr, w->kind, w->version);
    int rc = sink_put(k, hdr, sizeof hdr, err);
    uint64_t off = SF_HEADER_LEN;
    for (uint32_t i = 0; i < w->n && rc == QR_OK; i++) {
        const SfSection *s = &w->secs[i];
        uint64_t start = align_up(off);
        uint32_t crc = 0;
        rc = sink_put(k, zeros, (size_t)(start - off), err);
        if (rc == QR_OK && s->spill_fd >= 0)
            rc = sink_put_spill(k, s, &crc, err);
        if (rc == QR_OK)
            rc = sink_put(k, s->data, s->len, err);
        crc = qr_crc32c(crc, s->data, s->len);
        qr_buf_put_u32(&tab, s->id);
        qr_buf_put_u64(&tab, start);
        qr_buf_put_u64(&tab, s->spill_len + s->len);
        qr_buf_put_u32(&tab, crc);
        off = start + s->spill_len + s->len;
    }
    if (rc == QR_OK) {
        qr_buf_put_u32(&tab, w->n);
        qr_buf_put_u32(&tab, SF_LAYOUT);
        qr_buf_put_u32(&tab, qr_crc32c(0, tab.data, tab.len));
        qr_buf_put_u32(&tab, SF_END_MAGIC);
        rc = sink_put(k, tab.data, tab.len, err);
    }
    qr_buf_free(&tab);
    return rc;
}

int sfw_finish(SfileWriter *w, const char *path, bool do_fsync, QrError *err)
{
    if (!w)
        return qr_error_set(err, QR_EINVAL, "no section file writer for \"%s\"", path);
    if (w->version == 0) {
        sfw_free(w);
        return qr_error_set(err, QR_EINVAL, "format version 0 for file \"%s\"", path);
    }
    size_t pl = strlen(path);
    char *tmp = qr_malloc(pl + 5);
    if (!tmp) {
        sfw_free(w);
        return qr_error_set(err, QR_ENOMEM, "out of memory writing \"%s\"", path);
    }
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp", 5);
    int rc = QR_OK;
    /* private to the server's user; fchmod for a leftover tmp file */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || fchmod(fd, 0600) != 0) {
        rc = io_error(err, "create", tmp, errno);
        if (fd >= 0)
            close(fd);
        goto out;
    }
    SfSink k = {.fd = fd, .path = tmp};
    rc = sfw_emit_image(w, &k, err);
    if (rc == QR_OK && do_fsync && fsync(fd) != 0)
        rc = io_error(err, "fsync", tmp, errno);
    if (close(fd) != 0 && rc == QR_OK)
        rc = io_error(err, "close", tmp, errno);
    if (rc == QR_OK && rename(tmp, path) != 0)
        rc = io_error(err, "rename", tmp, errno);
    if (rc != QR_OK)
        unlink(tmp);
    else if (do_fsync)
        rc = fsync_parent(path, err);
out:
    qr_free(tmp);
    sfw_free(w);
    return rc;
}

/* ---- parsing (shared by sf_open and qr_sealed_read) ---------------------- */

typedef struct SfEnt {
    uint32_t id;
    uint32_t crc;
    uint64_t off;
    uint64_t len;
} SfEnt;

/* Check header and footer of the file image p[0..len) and decode the table
 * into *ents (qr_malloc'd, *n entries).  Section bytes are not read. */
static int sf_parse(const uint8_t *p, size_t len, const char *path, uint32_t kind,
                    uint32_t max_version, uint32_t *version, SfEnt **ents, uint32_t *n,
                    QrError *err)
{
    int rc = sf_header_check(p, len, path, kind, max_version, version, err);
    if (rc != QR_OK)
        return rc;
    if (len < SF_HEADER_LEN + SF_TAIL_LEN)
        return corrupt(err, path, len, "file is too short to hold a footer");
    const uint8_t *tail = p + len - SF_TAIL_LEN;
    if (qr_get_u32le(tail + 12) != SF_END_MAGIC)
        return corrupt(err, path, len - 4, "bad footer magic number (truncated file?)");
    uint32_t layout = qr_get_u32le(tail + 4);
    if (layout == 0)
        return corrupt(err, path, len - 12, "container layout 0");
    if (layout > SF_LAYOUT) {
        qr_error_set(err, QR_EUNSUPPORTED,
                     "file \"%s\" uses section file layout %u, newer than this build (%u)",
                     path, layout, SF_LAYOUT);
        return QR_EUNSUPPORTED;
    }
    uint32_t cnt = qr_get_u32le(tail);
    if ((uint64_t)cnt > (len - SF_HEADER_LEN - SF_TAIL_LEN) / SF_ENTRY_LEN) {
        corrupt(err, path, len - 16, "section count does not fit in the file");
        qr_error_detail(err, "%u sections in %zu bytes", cnt, len);
        return QR_ECORRUPT;
    }
    size_t tab_off = len - SF_TAIL_LEN - (size_t)cnt * SF_ENTRY_LEN;
    uint32_t stored = qr_get_u32le(tail + 8);
    uint32_t computed = qr_crc32c(0, p + tab_off, (size_t)cnt * SF_ENTRY_LEN + 8);
    if (stored != computed) {
        corrupt(err, path, tab_off, "section table checksum mismatch");
        qr_error_detail(err, "stored 0x%08x, computed 0x%08x", stored, computed);
        return QR_ECORRUPT;
    }
    SfEnt *e = qr_malloc((size_t)cnt * sizeof *e);
    if (!e)
        return qr_error_set(err, QR_ENOMEM, "out of memory opening \"%s\"", path);
    uint64_t end = SF_HEADER_LEN; /* end of the previous section */
    for (uint32_t i = 0; i < cnt; i++) {
        const uint8_t *q = p + tab_off + (size_t)i * SF_ENTRY_LEN;
        e[i].id = qr_get_u32le(q);
        e[i].off = qr_get_u64le(q + 4);
        e[i].len = qr_get_u64le(q + 12);
        e[i].crc = qr_get_u32le(q + 20);
        const char *bad = NULL;
        if (e[i].off != align_up(end))
            bad = "section is not where the layout puts it";
        else if (e[i].off > tab_off || e[i].len > tab_off - e[i].off)
            bad = "section runs past the section table";
        for (uint32_t j = 0; j < i && !bad; j++)
            if (e[j].id == e[i].id)
                bad = "section id appears twice";
        if (bad) {
            corrupt(err, path, tab_off + (size_t)i * SF_ENTRY_LEN, bad);
            qr_error_detail(err, "section %u: offset %llu, length %llu", e[i].id,
                            (unsigned long long)e[i].off, (unsigned long long)e[i].len);
            qr_free(e);
            return QR_ECORRUPT;
        }
        end = e[i].off + e[i].len;
    }
    if (end != tab_off) {
        corrupt(err, path, end, "unexpected bytes before the section table");
        qr_error_detail(err, "sections end at %llu, table starts at %zu",
                        (unsigned long long)end, tab_off);
        qr_free(e);
        return QR_ECORRUPT;
    }
    *ents = e;
    *n = cnt;
    return QR_OK;
}

/* Check every section's CRC and that all alignment padding is zero. */
static int sf_check_sections(const uint8_t *p, const SfEnt *e, uint32_t n, const char *path,
                             QrError *err)
{
    uint64_t end = SF_HEADER_LEN;
    for (uint32_t i = 0; i < n; i++) {
        if (memcmp(p + end, zeros, (size_t)(e[i].off - end)) != 0) {
            corrupt(err, path, end, "non-zero bytes in alignment padding");
            qr_error_detail(err, "padding before section %u", e[i].id);
            return QR_ECORRUPT;
        }
        uint32_t crc = qr_crc32c(0, p + e[i].off, (size_t)e[i].len);
        if (crc != e[i].crc) {
            char what[64];
            snprintf(what, sizeof what, "section %u checksum mismatch", e[i].id);
            corrupt(err, path, e[i].off, what);
            qr_error_detail(err, "stored 0x%08x, computed 0x%08x over %llu bytes at offset %llu",
                            e[i].crc, crc, (unsigned long long)e[i].len,
                            (unsigned long long)e[i].off);
            return QR_ECORRUPT;
        }
        end = e[i].off + e[i].len;
    }
    return QR_OK;
}

/* ---- reader -------------------------------------------------------------- */

/* Invariant: map.data[ents[i].off .. +len) lies inside the mapping (checked
 * by sf_parse); the mapping lives until refs drops to zero. */
struct Sfile {
    _Atomic uint32_t refs;
    QrMap map;       /* owns the mapping; for an in-memory file a view of mem */
    uint8_t *mem;    /* owns: the allocation behind an in-memory file, else NULL */
    char *path;      /* owns */
    uint32_t version;
    uint32_t n;
    SfEnt *ents;     /* owns: n entries in file order */
};

int sf_open_max(const char *path, uint32_t kind, uint32_t max_version, Sfile **out,
                QrError *err)
{
    Sfile *f = qr_calloc(1, sizeof *f);
    if (!f)
        return qr_error_set(err, QR_ENOMEM, "out of memory opening \"%s\"", path);
    f->path = qr_strdup(path);
    if (!f->path) {
        qr_free(f);
        return qr_error_set(err, QR_ENOMEM, "out of memory opening \"%s\"", path);
    }
    int rc = qr_map_open(path, &f->map, err);
    if (rc == QR_OK)
        rc = sf_parse(f->map.data, f->map.len, path, kind, max_version, &f->version, &f->ents,
                      &f->n, err);
    if (rc != QR_OK) {
        qr_map_close(&f->map);
        qr_free(f->path);
        qr_free(f);
        return rc;
    }
    atomic_init(&f->refs, 1);
    *out = f;
    return QR_OK;
}

int sf_open(const char *path, uint32_t kind, Sfile **out, QrError *err)
{
    return sf_open_max(path, kind, UINT32_MAX, out, err);
}

int sfw_finish_mem(SfileWriter *w, const char *name, Sfile **out, QrError *err)
{
    *out = NULL;
    if (!w)
        return qr_error_set(err, QR_EINVAL, "no section file writer for \"%s\"", name);
    int rc = QR_OK;
    Sfile *f = qr_calloc(1, sizeof *f);
    uint64_t len = sfw_image_len(w);
    if (!f || w->version == 0 || len > SIZE_MAX - SF_ALIGN ||
        !(f->path = qr_strdup(name)) || !(f->mem = qr_malloc((size_t)len + SF_ALIGN))) {
        rc = w->version == 0 ? qr_error_set(err, QR_EINVAL, "format version 0 for \"%s\"", name)
                             : qr_error_set(err, QR_ENOMEM, "out of memory building \"%s\"",
                                            name);
        goto fail;
    }
    /* sections are 64-byte aligned from the image start, as in a mapping */
    uint8_t *img = f->mem + ((SF_ALIGN - ((uintptr_t)f->mem & (SF_ALIGN - 1))) & (SF_ALIGN - 1));
    SfSink k = {.fd = -1, .path = name, .mem = img, .mem_len = (size_t)len};
    if ((rc = sfw_emit_image(w, &k, err)) != QR_OK)
        goto fail;
    f->map.data = img;
    f->map.len = (size_t)len;
    if ((rc = sf_parse(img, (size_t)len, name, w->kind, UINT32_MAX, &f->version, &f->ents, &f->n,
                       err)) != QR_OK)
        goto fail;
    atomic_init(&f->refs, 1);
    sfw_free(w);
    *out = f;
    return QR_OK;
fail:
    if (f) {
        qr_free(f->mem);
        qr_free(f->path);
        qr_free(f);
    }
    sfw_free(w);
    return rc;
}

bool sf_in_memory(const Sfile *f) { return f->mem != NULL; }
size_t sf_bytes(const Sfile *f) { return f->map.len; }

uint32_t sf_version(const Sfile *f) { return f->version; }
const char *sf_path(const Sfile *f) { return f->path; }
uint32_t sf_section_count(const Sfile *f) { return f->n; }
uint32_t sf_section_id(const Sfile *f, uint32_t i) { return i < f->n ? f->ents[i].id : 0; }

bool sf_section(const Sfile *f, uint32_t id, const uint8_t **data, size_t *len)
{
    for (uint32_t i = 0; i < f->n; i++) {
        if (f->ents[i].id == id) {
            *data = f->map.data + f->ents[i].off;
            *len = (size_t)f->ents[i].len;
            return true;
        }
    }
    return false;
}

int sf_verify(const Sfile *f, QrError *err)
{
    return sf_check_sections(f->map.data, f->ents, f->n, f->path, err);
}

Sfile *sf_ref(Sfile *f)
{
    atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
    return f;
}

void sf_unref(Sfile *f)
{
    if (!f || atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (f->mem)
        qr_free(f->mem);
    else
        qr_map_close(&f->map);
    qr_free(f->ents);
    qr_free(f->path);
    qr_free(f);
}

/* ---- sealed small files -------------------------------------------------- */

int qr_sealed_write(const char *path, uint32_t kind, uint32_t version, const void *data,
                    size_t len, bool do_fsync, QrError *err)
{
    SfileWriter *w = sfw_new(kind, version);
    if (!w)
        return qr_error_set(err, QR_ENOMEM, "out of memory writing \"%s\"", path);
    int rc = sfw_add_borrowed(w, 0, data, len, err);
    if (rc != QR_OK) {
        sfw_free(w);
        return rc;
    }
    return sfw_finish(w, path, do_fsync, err);
}

int qr_sealed_read(const char *path, uint32_t kind, uint32_t max_version, uint8_t **data,
                   size_t *len, uint32_t *version, QrError *err)
{
    uint8_t *img;
    size_t n;
    int rc = qr_file_read_all(path, &img, &n, err);
    if (rc != QR_OK)
        return rc;
    SfEnt *e = NULL;
    uint32_t cnt = 0, v = 0;
    rc = sf_parse(img, n, path, kind, max_version, &v, &e, &cnt, err);
    if (rc == QR_OK)
        rc = sf_check_sections(img, e, cnt, path, err);
    uint32_t i = 0;
    while (rc == QR_OK && i < cnt && e[i].id != 0)
        i++;
    if (rc == QR_OK && i == cnt)
        rc = corrupt(err, path, 0, "sealed file has no section 0");
    if (rc != QR_OK) {
        qr_free(e);
        qr_free(img);
        return rc;
    }
    size_t dl = (size_t)e[i].len;
    memmove(img, img + e[i].off, dl);
    img[dl] = '\0'; /* dl < n: the file is longer than its contents */
    qr_free(e);
    *data = img;
    *len = dl;
    if (version)
        *version = v;
    return QR_OK;
}
