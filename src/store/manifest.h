/*
 * manifest.h — a table directory's list of live segments ("MANIFEST"), and
 * the per-segment deletes files ("<seg>.del.<gen>").
 *
 * Layer: store/.  Calls the base kit, sfile.h (sealed files) and roaring.
 * Format: manifest.c's header comment and docs/format.md.
 *
 * The MANIFEST is the commit point of every change to a table's segment set
 * (flush, merge, new deletes generation, checkpoint): a writer first makes
 * the new segment / deletes files durable, then writes the manifest (tmp +
 * rename + fsync of the directory).  A reader sees the old manifest or the
 * new one, never a mix.  Files the manifest does not name are garbage once
 * no snapshot holds them.
 */
#ifndef QR_MANIFEST_H
#define QR_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <roaring/roaring.h>

#include "store/error.h"

#define MANIFEST_FILE "MANIFEST"

typedef struct ManifestSeg {
    uint64_t id;         /* segment id, unique, < Manifest.next_seg_id */
    uint32_t n_docs;     /* documents in the segment, deleted ones included */
    uint32_t n_deleted;  /* <= n_docs; bits set in the current deletes file */
    uint64_t del_gen;    /* generation of "<seg>.del.<gen>"; 0 = no deletes file */
    uint64_t file_bytes; /* size of the segment file(s), for metrics and merge policy */
    uint64_t min_lsn;    /* wal lsns whose effects the segment holds: */
    uint64_t max_lsn;    /*   min_lsn <= max_lsn (both 0 for none) */
} ManifestSeg;

typedef struct Manifest {
    uint64_t generation;     /* bumped by the caller on every write */
    uint64_t checkpoint_lsn; /* wal records with lsn < this are all in the
                                segments: replay starts here */
    uint64_t next_seg_id;    /* the id the next new segment gets */
    uint32_t n_segs;
    ManifestSeg *segs;       /* owns: n_segs entries (qr_malloc), oldest first */
    char *schema_json;       /* owns: NUL-terminated (qr_malloc), may be NULL */
} Manifest;

/* Write m to "<table_dir>/MANIFEST" atomically (qr_sealed_write; with
 * do_fsync the file and the directory are durable on return).  m is checked
 * first: QR_EINVAL if segment ids repeat or reach next_seg_id, n_deleted >
 * n_docs, or min_lsn > max_lsn.  Else QR_EIO, QR_ENOMEM. */
int manifest_write(const char *table_dir, const Manifest *m, bool do_fsync, QrError *err);

/* Read and check "<table_dir>/MANIFEST" into *m (overwritten; free with
 * manifest_free).  QR_ENOTFOUND if there is none, QR_ECORRUPT (names the
 * file), QR_EUNSUPPORTED (written by a newer Quarry), QR_EIO, QR_ENOMEM.
 * *m is untouched on failure. */
int manifest_read(const char *table_dir, Manifest *m, QrError *err);

/* Free segs and schema_json and zero *m.  NULL is a no-op. */
void manifest_free(Manifest *m);

/* "<seg>.del.<gen>" naming, for callers building paths: writes
 * "<table_dir>/<seg_id>.del.<gen>" (decimal) into out; false if it does not
 * fit in cap. */
bool deletes_path(char *out, size_t cap, const char *table_dir, uint64_t seg_id, uint64_t gen);

/* Write the deleted doc ids of a segment as a sealed file (atomic, like the
 * manifest).  QR_EIO, QR_ENOMEM. */
int deletes_write(const char *path, const roaring_bitmap_t *bm, bool do_fsync, QrError *err);

/* Read a deletes file into a new bitmap (*bm, owned by the caller: free with
 * roaring_bitmap_free).  QR_ENOTFOUND, QR_ECORRUPT, QR_EUNSUPPORTED, QR_EIO,
 * QR_ENOMEM.  *bm untouched on failure.  (roaring allocates with malloc, not
 * qr_malloc.) */
int deletes_read(const char *path, roaring_bitmap_t **bm, QrError *err);

#endif
