/*
 * table.h — one table's write path, recovery, merges and snapshots.
 *
 * Layer: index/.  Calls segment (index/) and wal, manifest, sfile, schema
 * (store/).
 *
 * Write path: table_put / table_delete append a WAL record and apply the
 * change to the in-memory segment builder (and to pending deletes of older
 * segments).  table_commit appends a COMMIT record, makes the WAL durable
 * per the fsync policy, turns the builder into an immutable segment file
 * and publishes a new snapshot: only then is the change acknowledged and
 * visible.  Recovery replays the WAL from the manifest's checkpoint and
 * applies only changes followed by a COMMIT record, so a batch is all or
 * nothing; puts are upserts, so a replayed document is present once.
 *
 * Checkpoint: fsync new segment files, write deletes files, write the
 * manifest (fsync), then drop WAL files before the checkpoint LSN.  Taken
 * when the WAL since the last checkpoint exceeds opts.checkpoint_wal_bytes,
 * after a merge, on table_flush and on close.
 *
 * Merges run in a background thread per table (tiered policy, see
 * table.c); readers never wait for them: a snapshot pins its segments.
 *
 * Thread safety: any number of threads may take snapshots and read
 * concurrently with one another and with writers; writers serialize on the
 * table's write lock (table_put/delete/commit may be called from several
 * threads; a commit covers every put made before it by any thread).
 */
#ifndef QR_TABLE_H
#define QR_TABLE_H

#include <roaring/roaring.h>
#include <stdbool.h>
#include <stdint.h>

#include "index/segment.h"
#include "store/error.h"
#include "store/schema.h"
#include "store/wal.h"

typedef struct TableOpts {
    QrFsyncMode fsync;             /* default QR_FSYNC_COMMIT */
    uint32_t fsync_batch_ms;       /* for QR_FSYNC_BATCHED (default 10) */
    size_t builder_bytes;          /* spill the builder to a segment past this (256 MiB) */
    uint64_t checkpoint_wal_bytes; /* checkpoint when the WAL grows past this (256 MiB) */
    bool background_merge;         /* run the merge thread (default true) */
    int merge_factor;              /* segments per tier before merging (default 8) */
    bool salvage;                  /* open with damaged segments left out (reported) */
    bool read_only;                /* no WAL writer, no merges, no checkpoints (replay only) */
} TableOpts;

void table_opts_default(TableOpts *o);

typedef struct Table Table;

/* A consistent, immutable view of a table.  Segments and delete bitmaps are
 * borrowed from the snapshot and valid until snapshot_release. */
typedef struct Snapshot {
    _Atomic int refs;
    uint64_t version;         /* increases with every publish */
    int n_segs;
    Segment **segs;           /* owns a reference to each */
    roaring_bitmap_t **dels;  /* owns; NULL entry = no deletes */
    DocId *base;              /* global doc id of each segment's doc 0 */
    uint64_t n_docs;          /* sum of segment docs, deleted included */
    uint64_t n_live;          /* live documents */
} Snapshot;

typedef struct TableInfo {
    uint64_t n_live, n_docs, n_segments, disk_bytes, wal_bytes;
    uint64_t merges_done, merges_running, merges_failed, commits, checkpoints;
    uint64_t recovered_records;
    uint64_t torn_bytes_cut;   /* WAL tail cut at open, or not applied (no COMMIT) */
} TableInfo;

/* Create a new table in `dir` (must not exist). */
int table_create(const char *dir, const QrSchema *schema, const TableOpts *opts, Table **out,
                 QrError *err);
/* Open and recover.  QR_ENOTFOUND when `dir` holds no table. */
int table_open(const char *dir, const TableOpts *opts, Table **out, QrError *err);
/* Commit nothing pending (uncommitted changes are discarded, as after a
 * crash), stop merges, checkpoint, free.  NULL is a no-op. */
void table_close(Table *t);

/* The schema (stable for the table's life except table_add_field). */
const QrSchema *table_schema(const Table *t);
int table_add_field(Table *t, const QrField *f, QrError *err);
/* Create / drop the B-tree index (index/btree.h) of schema field `field`
 * (an index into the schema's fields).  Create commits what is pending,
 * builds a side file for every segment from its column (under the write
 * lock: writers wait, readers do not), attaches the trees, and persists the
 * schema's "index": "btree" in the manifest; from then on every flushed or
 * merged segment gets its tree.  Drop persists the schema, detaches the
 * trees (readers holding a snapshot keep using theirs) and unlinks the
 * files.  Errors: QR_ENOTFOUND (no such field; drop: no index), QR_EEXISTS
 * (create: already indexed), QR_EINVAL (the field has no column), QR_EIO,
 * QR_ENOMEM; on error the table is as before. */
int table_create_index(Table *t, int field, QrError *err);
int table_drop_index(Table *t, int field, QrError *err);

/* Upsert one JSON document.  *replaced (may be NULL) tells whether a live
 * document with the same key existed.  Errors leave the table unchanged. */
int table_put(Table *t, const char *json, size_t len, bool *replaced, QrError *err);
/* Same, for a document already parsed (root is borrowed). */
struct cJSON;
int table_put_parsed(Table *t, const char *json, size_t len, const struct cJSON *root,
                     bool *replaced, QrError *err);
/* Delete by primary key bytes (pk_encode).  *found tells whether it existed. */
int table_delete_key(Table *t, const uint8_t *key, size_t len, bool *found, QrError *err);
/* Make everything put/deleted so far durable and visible. */
int table_commit(Table *t, QrError *err);
/* Commit, then checkpoint (segments + manifest on disk, WAL trimmed). */
int table_flush(Table *t, QrError *err);
/* Merge all segments into one (waits). */
int table_force_merge(Table *t, QrError *err);
/* Wait until no merge is running or due. */
void table_wait_merges(Table *t);

/* Pin the current snapshot / release it. */
Snapshot *table_snapshot(Table *t);
void snapshot_release(Snapshot *s);
/* Locate a global doc id: segment index and local doc.  False if out of range. */
bool snapshot_locate(const Snapshot *s, DocId gdoc, int *seg, uint32_t *local);
/* The last of n ascending segment bases that is <= gdoc, or -1 (the
 * segment gdoc falls in when it is below that segment's end). */
int snapshot_base_find(const DocId *base, int n, DocId gdoc);
/* True when the doc is deleted in the snapshot. */
static inline bool snapshot_deleted(const Snapshot *s, int seg, uint32_t local)
{
    return s->dels[seg] && roaring_bitmap_contains(s->dels[seg], local);
}
/* Find the live doc with a key: returns true and fills seg/local. */
bool snapshot_find_key(const Snapshot *s, const uint8_t *key, size_t len, int *seg,
                       uint32_t *local);

void table_info(Table *t, TableInfo *info);
/* Verify every segment file's checksums. */
int table_verify(Table *t, QrError *err);

#endif
