/*
 * segment.h — immutable segments: building one from documents, merging
 * several, and reading one.
 *
 * Layer: index/.  Calls store/ (sfile, docstore, column, schema, base kit)
 * and index/ (analyzer, postings, termdict, iter).
 *
 * A segment holds docs 0..n_docs-1 of one table in one section file
 * "seg-<id>.qseg" (store/sfile.h).  Sections (ids fixed, see docs/format.md):
 *
 *   SEC_META        n_docs, per-field token totals and doc counts, lsn range
 *   SEC_TERMS       term dictionary; key = [field index byte][term bytes]
 *   SEC_POSTINGS    doc/freq blocks with skip data (index/postings.h)
 *   SEC_POSITIONS   position blocks
 *   SEC_DOCS        stored JSON documents (store/docstore.h)
 *   SEC_PK          primary keys: per-doc key offsets + docs sorted by key
 *   SEC_SURFACES    (optional) the words as written, folded but not stemmed,
 *                   of stemmed fields and "_all": key = [field byte][form],
 *                   and the term each one was indexed as (SEC_SURFACE_TERMS),
 *                   so typo-tolerant and prefix matching see the words users
 *                   type, not their stems
 *   SEC_NORMS+f     u32 token count of text field f for every doc
 *   SEC_COLUMN+f    the typed column of field f (store/column.h)
 *
 * Primary keys are stored as typed key bytes: 's' + UTF-8 for strings,
 * 'i' + 8 bytes big-endian (sign bit flipped) for integers, so memcmp order
 * is string order / numeric order.
 *
 * Lifetime: a Segment is refcounted (seg_ref/seg_unref); everything it hands
 * out (term dict, norms, postings bytes, column readers) is borrowed and
 * valid while the caller holds a reference — in practice while the query's
 * snapshot is pinned.
 */
#ifndef QR_SEGMENT_H
#define QR_SEGMENT_H

#include <roaring/roaring.h>
#include <stdbool.h>
#include <stdint.h>

#include "index/iter.h"
#include "index/postings.h"
#include "index/termdict.h"
#include "store/buf.h"
#include "store/column.h"
#include "store/docstore.h"
#include "store/error.h"
#include "store/schema.h"

enum {
    SEC_META = 1,
    SEC_TERMS = 2,
    SEC_POSTINGS = 3,
    SEC_POSITIONS = 4,
    SEC_DOCS = 5,
    SEC_PK = 6,
    SEC_SURFACES = 7,      /* folded word forms -> indexed terms (a term dictionary) */
    SEC_SURFACE_TERMS = 8, /* the terms SEC_SURFACES entries name */
    SEC_NORMS = 0x100,  /* + field index */
    SEC_COLUMN = 0x200, /* + field index */
};
#define SEG_FILE_KIND 0x47455351u /* "QSEG" */
#define SEG_FORMAT_VERSION 1

/* ---- primary keys ---- */

#define PK_KEY_MAX 520
/* Encode a JSON scalar primary key (string or integer) as key bytes.
 * Returns the length, or 0 when `v` is not a usable key (sets err). */
struct cJSON;
size_t pk_encode(const struct cJSON *v, uint8_t *out, QrError *err);
/* Render key bytes as JSON text ("abc" quoted and escaped, or 123). */
void pk_to_json(const uint8_t *key, size_t len, QrBuf *out);

/* ---- building ---- */

typedef struct SegBuilder SegBuilder;
typedef struct Segment Segment; /* an opened segment (reading, below) */

/* A builder for the given schema (borrowed; must outlive the builder). */
int segb_new(const QrSchema *schema, SegBuilder **out, QrError *err);
void segb_free(SegBuilder *b);
/* Add one document: `json` is the original object text (stored as is),
 * `root` its parse.  Validates field types (QR_ETYPE naming the field) and
 * the primary key (QR_ECONSTRAINT when missing).  On error nothing is
 * added (segb_poisoned tells the rare failures that leave the builder
 * unusable).  If the key is already in this builder the older copy is marked
 * deleted here.  *doc_out gets the new local doc id. */
int segb_add(SegBuilder *b, const char *json, size_t len, const struct cJSON *root,
             uint32_t *doc_out, QrError *err);
/* True after a failure segb_add could not undo (the document store or a
 * column writer failed): the builder must be discarded. */
bool segb_poisoned(const SegBuilder *b);
/* Mark a doc of this builder deleted (by key); returns true if found. */
bool segb_delete_key(SegBuilder *b, const uint8_t *key, size_t len);
uint32_t segb_n_docs(const SegBuilder *b);
uint32_t segb_n_live(const SegBuilder *b);
size_t segb_mem_bytes(const SegBuilder *b);
void segb_set_lsn_range(SegBuilder *b, uint64_t min_lsn, uint64_t max_lsn);
/* Write the segment file (docs deleted inside the builder are written and
 * reported in *deleted_out, a new bitmap the caller owns, possibly empty). */
int segb_finish(SegBuilder *b, const char *path, bool do_fsync, roaring_bitmap_t **deleted_out,
                QrError *err);
/* The same segment kept in memory: *out (one reference, the caller's) reads
 * exactly like the opened file would, with id `id` and `name` in messages;
 * nothing touches the disk.  It has no B-trees (seg_sync_btrees leaves it
 * alone: its fields are served by column scans).  Errors: QR_ENOMEM. */
int segb_finish_mem(SegBuilder *b, const char *name, uint64_t id, Segment **out,
                    roaring_bitmap_t **deleted_out, QrError *err);

/* ---- reading ---- */

typedef struct SegFieldStats {
    uint64_t total_len; /* tokens of the field over all docs (deleted included) */
    uint32_t n_docs;    /* docs having the field */
} SegFieldStats;

int seg_open(const char *path, uint64_t id, Segment **out, QrError *err);
Segment *seg_ref(Segment *s);
void seg_unref(Segment *s);
uint64_t seg_id(const Segment *s);
uint32_t seg_n_docs(const Segment *s);
uint64_t seg_file_bytes(const Segment *s);
const char *seg_path(const Segment *s);
void seg_lsn_range(const Segment *s, uint64_t *min_lsn, uint64_t *max_lsn);
/* Set the lsn range a reader reports (and merges carry on): for segments
 * built before their commit knew its lsns.  Before the segment is shared. */
void seg_set_lsn_range(Segment *s, uint64_t min_lsn, uint64_t max_lsn);
/* True for a segment built in memory (segb_finish_mem, seg_merge_mem). */
bool seg_in_memory(const Segment *s);
const TermDict *seg_terms(const Segment *s);
SegFieldStats seg_field_stats(const Segment *s, int field);
/* u32 per doc, or NULL if the segment has no norms for the field. */
const uint32_t *seg_norms(const Segment *s, int field);
/* Term lookup in a field. */
bool seg_term(const Segment *s, int field, const char *term, size_t len, TermPostings *tp);
/* The surface-form dictionary (SEC_SURFACES), or NULL when the segment has
 * none (no stemmed field, or written before there were surfaces).  An
 * entry's key is [field byte][folded unstemmed word]; its info holds the
 * docs (df) and occurrences (total_tf) of that form when the segment was
 * written (deleted docs included; a merge sums them), and names its term. */
const TermDict *seg_surfaces(const Segment *s);
/* The term (without the field byte) surface entry (key, tp) was indexed as:
 * *term borrows the segment.  false when tp points outside the section
 * (damage: the entry is to be skipped). */
bool seg_surface_term(const Segment *s, const uint8_t *key, size_t key_len,
                      const TermPostings *tp, const char **term, size_t *len);
/* Open a postings iterator for a TermPostings of this segment. */
Iter *seg_postings(const Segment *s, IterCtx *ctx, const TermPostings *tp,
                   const PostScorer *scorer, bool want_positions);
/* Stored document by local id. */
const DocStore *seg_docs(const Segment *s);
/* Primary key of a doc, and the doc of a key (-1 when absent). */
bool seg_pk(const Segment *s, uint32_t doc, const uint8_t **key, size_t *len);
int64_t seg_pk_lookup(const Segment *s, const uint8_t *key, size_t len);
/* Key order: positions [*from, *to) of the segment's sorted keys hold the
 * keys k with lo <= k <= hi (byte order; a NULL bound is open), and
 * seg_pk_at gives the doc at a position.  A re-added key has its older
 * docs in the segment's deletes. */
void seg_pk_range(const Segment *s, const uint8_t *lo, size_t lo_len, const uint8_t *hi,
                  size_t hi_len, uint32_t *from, uint32_t *to);
uint32_t seg_pk_at(const Segment *s, uint32_t pos);
/* The typed column of field f, or NULL if the segment has none. */
const Column *seg_column(const Segment *s, int field);
/* The B-tree index (index/btree.h) of field f, or NULL when the field has
 * none in this segment.  Borrowed: valid while the caller holds a reference
 * to the segment (a dropped index stays readable until then). */
struct BTree;
const struct BTree *seg_btree(const Segment *s, int field);
/* Side-file path of field f's B-tree for the segment file `seg_path`:
 * "seg-<id>.f<f>.qbt" beside "seg-<id>.qseg". */
void seg_btree_path(char *out, size_t n, const char *seg_path, int field);
/* Make the segment's B-trees follow the schema: every field with
 * btree == true that has a column in this segment gets its side file opened
 * — built from the column (bt_write) when it is missing, and rebuilt with a
 * warning when it is damaged or does not match the column (a side file is
 * derived data: the checksummed column is the truth).  Trees of fields no
 * longer indexed are detached (kept alive until the segment is freed).
 * build = false (read-only tables): absent or damaged files are left out and
 * the field is served by column scans.  Fields without a column in this
 * segment (added after it was written: all NULL) get no tree.  Call under the
 * table's write lock; readers may run concurrently.  Errors: QR_EIO,
 * QR_ENOMEM from building. */
int seg_sync_btrees(Segment *s, const QrSchema *schema, bool build, bool do_fsync, QrError *err);
/* Unlink every B-tree side file of the segment file `seg_path`. */
void seg_remove_btree_files(const char *seg_path);
/* quarry check: every B-tree the schema wants for this segment is verified
 * in full (bt_verify), an attached one or else its side file, so a damaged
 * side file that a read-only seg_sync_btrees left out is reported
 * (QR_ECORRUPT naming it, with a hint) instead of skipped.  A missing side
 * file is not damage: the next writable open builds it. */
int seg_check_btrees(const Segment *s, const QrSchema *schema, QrError *err);
/* bt_verify of every attached tree (seg_verify calls it). */
int seg_verify_btrees(const Segment *s, QrError *err);
/* Check every section's checksum and every attached B-tree (quarry check). */
int seg_verify(const Segment *s, QrError *err);

/* ---- merging ---- */

/* A merge written to a file keeps at most this many bytes of its postings,
 * of its positions and of its stored documents in memory (each); the rest
 * waits in unlinked spill files beside the new segment (sfile.h) until the
 * file is written, so a merge's memory does not grow with the segment it
 * writes.  8 MiB; tests lower it. */
extern size_t seg_merge_spill_keep;

/* Write one segment holding the live docs of srcs[0..n) in order (docs in
 * dels[i] dropped; dels[i] may be NULL).  Postings are merged term by term
 * without re-analysis; stored docs and columns are copied.  *remap_out (may
 * be NULL) receives, per source, a qr_malloc'd array old doc -> new doc
 * (UINT32_MAX for dropped docs) so deletes that raced the merge can be
 * carried over. */
int seg_merge(Segment *const *srcs, const roaring_bitmap_t *const *dels, int n,
              const QrSchema *schema, const char *path, bool do_fsync, uint32_t ***remap_out,
              QrError *err);
/* The same, into an in-memory segment (*out, as segb_finish_mem). */
int seg_merge_mem(Segment *const *srcs, const roaring_bitmap_t *const *dels, int n,
                  const QrSchema *schema, const char *name, uint64_t id, Segment **out,
                  uint32_t ***remap_out, QrError *err);

#endif
