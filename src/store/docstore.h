/*
 * docstore.h — stored documents: any bytes (raw JSON text) kept in
 * snappy-compressed blocks of about 16 KiB of input, fetched by doc id.
 *
 * Layer: store/.  Calls the base kit and snappy.  Format: docstore.c's header
 * comment and docs/format.md.  The blob dsw_finish produces is meant to be
 * one section of a segment's section file (sfile.h); it carries its own
 * per-block and index checksums, so readers need not sf_verify first.
 *
 *   writer:  w = dsw_new(0); dsw_add(w, doc, len)... (ids 0, 1, 2, ...);
 *            dsw_add_from(w, old, keep) when merging; dsw_finish(w, &blob);
 *            dsw_free(w)
 *   reader:  ds_open(bytes, len, &ds); c = ds_cursor_new(ds);
 *            ds_get(c, id, &p, &n) ...; ds_cursor_free(c); ds_close(ds)
 */
#ifndef QR_DOCSTORE_H
#define QR_DOCSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/buf.h"
#include "store/error.h"
#include "store/sfile.h"

/* Block size used when dsw_new is given 0 (bytes of uncompressed input). */
#define DS_DEFAULT_BLOCK_BYTES (16 * 1024)
/* Largest single document (QR_ELIMIT beyond). */
#define DS_MAX_DOC_BYTES (1u << 30)

typedef struct DocStore DocStore; /* reader, below */
typedef struct DocStoreWriter DocStoreWriter;

/* New writer closing a block once it holds >= block_bytes of documents
 * (0 = DS_DEFAULT_BLOCK_BYTES).  A document larger than a block gets a block
 * of its own.  NULL on OOM. */
DocStoreWriter *dsw_new(size_t block_bytes);

/* Append one document (copied); ids are assigned 0, 1, 2, ... in call order.
 * QR_ELIMIT (doc > DS_MAX_DOC_BYTES or 2^32 - 1 docs), QR_ENOMEM.  After any
 * error the writer is failed: later calls return the same code; only
 * dsw_free remains. */
int dsw_add(DocStoreWriter *w, const void *doc, size_t len, QrError *err);

/* Append the documents of `src` whose keep[i] is true (keep = NULL keeps
 * all; else keep has ds_count(src) entries), in id order, renumbered
 * consecutively after the writer's current documents.  A source block whose
 * documents are all kept is copied compressed, as is, after its checksum is
 * checked; other blocks are decompressed and their kept documents re-added.
 * src is only read; it may be shared with other threads.
 * Errors: QR_ECORRUPT (from src, naming the block), QR_ENOMEM, QR_ELIMIT;
 * the writer is then failed as for dsw_add. */
int dsw_add_from(DocStoreWriter *w, const DocStore *src, const bool *keep,
                 QrError *err);

/* Send closed blocks to `sp` (a spill of a section of the file at
 * `near_path`, sfile.h) whenever more than `keep_bytes` of them are held, so
 * the writer's memory stays bounded whatever the store's size.  Then
 * dsw_finish leaves in *out only what follows the spilled bytes, and the
 * caller adds the section with sfw_add_spill(w, id, sp, out).  Call before
 * the first document; sp and near_path must outlive the writer's use. */
void dsw_spill_to(DocStoreWriter *w, SfSpill *sp, const char *near_path, size_t keep_bytes);

/* Number of documents added so far. */
uint32_t dsw_count(const DocStoreWriter *w);

/* Close the last block and move the finished blob into *out, which must be
 * an empty (qr_buf_init) buffer the caller then owns (e.g. for sfw_add_buf).
 * The writer accepts nothing more; dsw_free it.  QR_ENOMEM. */
int dsw_finish(DocStoreWriter *w, QrBuf *out, QrError *err);

/* NULL is a no-op. */
void dsw_free(DocStoreWriter *w);

/* Open a blob in place; borrows data[0..len), which must outlive the store
 * (for a segment: while the Sfile reference is held).  Checks the trailer
 * and the block index (checksum, bounds, order), not the blocks.  The store
 * is immutable and may be shared by threads; each thread uses its own cursor.
 * QR_ECORRUPT, QR_EUNSUPPORTED (a newer docstore format), QR_ENOMEM. */
int ds_open(const uint8_t *data, size_t len, DocStore **out, QrError *err);

/* NULL is a no-op.  Cursors over ds must be freed first. */
void ds_close(DocStore *ds);

/* Number of documents (ids 0 .. ds_count - 1). */
uint32_t ds_count(const DocStore *ds);

typedef struct DocStoreCursor DocStoreCursor;

/* A per-thread reader that keeps the last decompressed block, so fetching
 * ids in ascending order decompresses each block once.  NULL on OOM. */
DocStoreCursor *ds_cursor_new(const DocStore *ds);
void ds_cursor_free(DocStoreCursor *c); /* NULL is a no-op */

/* Fetch document `doc`.  *doc_out is borrowed from the cursor and valid until
 * the next call on it (or its free).  A block is checksummed before it is
 * decompressed.  QR_ENOTFOUND (doc >= ds_count), QR_ECORRUPT naming the block
 * and its doc range, QR_ENOMEM.  Outputs untouched on failure. */
int ds_get(DocStoreCursor *c, uint32_t doc, const uint8_t **doc_out, size_t *len_out,
           QrError *err);

#endif
