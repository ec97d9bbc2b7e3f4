/*
 * sfile.h — the checksummed "section file" container, the small sealed file,
 * and the one versioned header every Quarry file starts with.
 *
 * Layer: store/.  Calls the base kit (error, mem, buf, util, crc32c) only.
 * The byte layout and the recovery rules are in docs/format.md; the short
 * form is in sfile.c's header comment.
 *
 * A section file holds numbered, independently checksummed byte blobs
 * ("sections"), each starting at a 64-byte aligned offset so that readers can
 * use them in place from an mmap.  Segments are written as section files; the
 * sections' contents (postings, columns, docs) are the callers' formats.
 *
 *   writer:  w = sfw_new(kind, version); sfw_add(w, id, ...)...;
 *            sfw_finish(w, path, do_fsync)      -> tmp + rename, atomic
 *   reader:  sf_open(path, kind, &f)           -> header/footer checked
 *            sf_section(f, id, &p, &n)         -> borrowed view, O(sections)
 *            sf_verify(f)                      -> every section's CRC
 *            sf_ref / sf_unref                 -> last unref unmaps
 *
 * Small files (manifest, deletes) use qr_sealed_write/qr_sealed_read: the
 * same container with one section (id 0), read whole and checked whole.
 *
 * Kinds are four-character codes (QR_FOURCC) chosen by the caller; they only
 * guard against opening the wrong kind of file.  `version` is the caller's
 * format version of the contents (>= 1).
 */
#ifndef QR_SFILE_H
#define QR_SFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/buf.h"
#include "store/error.h"

/* 'a','b','c','d' read in that order in a hex dump of the file. */
#define QR_FOURCC(a, b, c, d)                                                  \
    ((uint32_t)(uint8_t)(a) | (uint32_t)(uint8_t)(b) << 8 |                    \
     (uint32_t)(uint8_t)(c) << 16 | (uint32_t)(uint8_t)(d) << 24)

/* Kinds of the files store/ itself writes. */
#define QR_KIND_WAL QR_FOURCC('W', 'A', 'L', 'F')
#define QR_KIND_MANIFEST QR_FOURCC('M', 'N', 'F', 'T')
#define QR_KIND_DELETES QR_FOURCC('D', 'E', 'L', 'S')

/* Sections start at multiples of this (from the file start). */
#define SF_ALIGN 64

/* ---- the common 16-byte file header ------------------------------------ */

#define SF_HEADER_LEN 16

/* Fill out[0..15]: magic, kind, version, CRC32C of the first 12 bytes. */
void sf_header_encode(uint8_t out[SF_HEADER_LEN], uint32_t kind, uint32_t version);

/* Check a header read from `path` (len = bytes available at p).
 *   QR_ECORRUPT      short, bad magic, bad checksum, wrong kind, version 0
 *   QR_EUNSUPPORTED  intact but version > max_version (a newer Quarry wrote it)
 * On success *version (may be NULL) gets the file's version. */
int sf_header_check(const uint8_t *p, size_t len, const char *path, uint32_t kind,
                    uint32_t max_version, uint32_t *version, QrError *err);

/* ---- writer -------------------------------------------------------------- */

typedef struct SfileWriter SfileWriter;
typedef struct Sfile Sfile; /* an opened file (reader, below) */

/* New writer for a file of `kind` and content `version` (>= 1).  NULL on OOM. */
SfileWriter *sfw_new(uint32_t kind, uint32_t version);

/* Add section `section_id` (unique within the file, else QR_EINVAL), copying
 * `len` bytes of `data`.  QR_ENOMEM on OOM; the writer stays usable. */
int sfw_add(SfileWriter *w, uint32_t section_id, const void *data, size_t len, QrError *err);

/* Same, but takes ownership of buf's bytes without copying: on success *buf is
 * left empty (initialized); on failure *buf is untouched and still the
 * caller's.  A buffer whose `oom` flag is set is refused (QR_ENOMEM), since
 * its contents are incomplete. */
int sfw_add_buf(SfileWriter *w, uint32_t section_id, QrBuf *buf, QrError *err);

/* A section too large to build in memory: its bytes go, as they are
 * produced, to an unlinked temporary file in the directory of the file being
 * written (so a merge's memory stays bounded by what it buffers, not by the
 * segment it writes).  Start with SF_SPILL_INIT; sf_spill_put opens the file
 * on first use; sfw_add_spill makes the spilled bytes (then a tail kept in
 * memory) one section and takes the file over; sf_spill_close discards one
 * not handed over (a no-op after sfw_add_spill). */
typedef struct SfSpill {
    int fd;       /* -1 until the first sf_spill_put */
    uint64_t len; /* bytes written to it */
} SfSpill;
#define SF_SPILL_INIT {-1, 0}

/* Append buf's bytes to the spill file of a section of `near_path` (the
 * temporary file is made in near_path's directory) and empty buf, keeping
 * its capacity.  QR_EIO (disk full: SQLSTATE 53100) or QR_ENOMEM (buf's oom
 * flag); buf is untouched on failure. */
int sf_spill_put(SfSpill *sp, const char *near_path, QrBuf *buf, QrError *err);
void sf_spill_close(SfSpill *sp);

/* Add section `section_id` made of sp's bytes followed by tail's (tail is
 * taken over as by sfw_add_buf).  The spill file is read back when the file
 * is written; the writer owns it from here (sp is reset to SF_SPILL_INIT),
 * also on failure. */
int sfw_add_spill(SfileWriter *w, uint32_t section_id, SfSpill *sp, QrBuf *tail,
                  QrError *err);

/* Write the file to "<path>.tmp", section by section (no copy of the whole
 * file is made), then rename it to `path`.  With do_fsync the file and the
 * directory entry are durable on return.  Always frees w.  On failure the tmp
 * file is removed and `path` is untouched (old contents or absent).
 * Errors: QR_EIO (errno text; disk full), QR_ENOMEM. */
int sfw_finish(SfileWriter *w, const char *path, bool do_fsync, QrError *err);

/* Build the file's image in memory instead: *out is an Sfile over its own
 * copy of the bytes (64-byte aligned like a mapping), named `name` in
 * messages, read exactly as a file opened by sf_open (sf_verify included).
 * Nothing touches the disk; the last sf_unref frees the bytes.  Always
 * frees w.  Errors: QR_ENOMEM, QR_EINVAL (version 0). */
int sfw_finish_mem(SfileWriter *w, const char *name, Sfile **out, QrError *err);

/* Discard an unfinished writer.  NULL is a no-op. */
void sfw_free(SfileWriter *w);

/* ---- reader -------------------------------------------------------------- */

/* Map `path` and check its header, footer, section table (checksum, bounds,
 * alignment, overlaps, duplicate ids).  Section contents are not checksummed
 * here (see sf_verify), so opening is O(sections), not O(bytes).
 *   QR_ENOTFOUND     no such file
 *   QR_ECORRUPT      damaged or not a `kind` file; the message names the file
 *   QR_EUNSUPPORTED  the container layout is newer than this build
 * Any content version >= 1 is accepted; check sf_version() or use
 * sf_open_max().  The returned handle holds one reference. */
int sf_open(const char *path, uint32_t kind, Sfile **out, QrError *err);

/* sf_open, plus QR_EUNSUPPORTED when the content version > max_version. */
int sf_open_max(const char *path, uint32_t kind, uint32_t max_version, Sfile **out,
                QrError *err);

/* True for an image built by sfw_finish_mem; its size in bytes (for a
 * mapped file, the file's size). */
bool sf_in_memory(const Sfile *f);
size_t sf_bytes(const Sfile *f);

/* Content version written by sfw_new. */
uint32_t sf_version(const Sfile *f);
/* The path the file was opened with (for callers' error messages). */
const char *sf_path(const Sfile *f);
/* Number of sections, and the id of the i-th (file order), for listings. */
uint32_t sf_section_count(const Sfile *f);
uint32_t sf_section_id(const Sfile *f, uint32_t i);

/* Borrow section `id`: *data is 64-byte aligned and valid while a reference
 * to f is held (the mapping's lifetime).  false if there is no such section
 * (outputs untouched).  The bytes are as on disk: unverified until sf_verify. */
bool sf_section(const Sfile *f, uint32_t id, const uint8_t **data, size_t *len);

/* Checksum every section and check the alignment padding is zero.
 * QR_ECORRUPT naming the file and the section.  Cost: reads the whole file. */
int sf_verify(const Sfile *f, QrError *err);

/* Reference counting (atomic; any thread).  sf_ref returns f.  The last
 * sf_unref unmaps; sf_unref(NULL) is a no-op. */
Sfile *sf_ref(Sfile *f);
void sf_unref(Sfile *f);

/* ---- small sealed files -------------------------------------------------- */

/* Write `len` bytes as a one-section file atomically (tmp + rename; with
 * do_fsync also fsync of file and directory).  Errors as sfw_finish. */
int qr_sealed_write(const char *path, uint32_t kind, uint32_t version, const void *data,
                    size_t len, bool do_fsync, QrError *err);

/* Read a whole sealed file and check everything (header, footer, table,
 * section checksum, padding).  *data is qr_malloc'd, owned by the caller, and
 * NUL-terminated after *len bytes; *version (may be NULL) gets the version.
 * Outputs untouched on failure.
 *   QR_ENOTFOUND, QR_EIO, QR_ENOMEM, QR_ECORRUPT (names the file),
 *   QR_EUNSUPPORTED (version > max_version, or a newer container layout). */
int qr_sealed_read(const char *path, uint32_t kind, uint32_t max_version, uint8_t **data,
                   size_t *len, uint32_t *version, QrError *err);

#endif
