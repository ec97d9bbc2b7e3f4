/*
 * table.h — one table's write path, recovery, merges and snapshots.
 *
 * Layer: index/.  Calls segment (index/) and wal, manifest, sfile, schema
 * (store/).
 *
 * Write path: every writer has its own batch (TableBatch).  table_batch_put
 * and table_batch_delete change only the batch: its private segment
 * builder (spilled to private segment files when large) and its list of
 * WAL records, which stays in memory.  Nothing of a batch is visible,
 * and nothing of it is in the WAL, before its commit:
 *   0. outside any lock: the batch's last documents become a segment -- an
 *      in-memory one for a small commit (below), else a file (named by no
 *      manifest yet, so a crash leaves a stray file that open removes);
 *   then under the table's write lock
 *   1. the batch's file segments get the B-trees the schema asks for,
 *   2. the committed copies of every key the batch put or deleted are
 *      found,
 *   3. the batch's records and a COMMIT record are appended to the WAL and
 *      written -- one unit: a failure cuts the WAL back and the commit
 *      wrote nothing,
 *   4. the deletes are applied, the batch's segments added and a snapshot
 *      built;
 *   and after the lock is released
 *   5. the commit waits for the WAL to keep its promise (COMMIT mode: an
 *      fdatasync covering its records, shared with every commit written
 *      meanwhile -- group commit), and the snapshot is installed.
 * Only then is the change acknowledged and visible: a snapshot waits in a
 * queue until the WAL promises every commit in it, so a reader never sees
 * a commit that a power loss could take back.  (table_batch_commit_start
 * and table_commit_wait are steps 0-4 and 5, for callers that order their
 * commits under a lock of their own.)  A commit is therefore one
 * contiguous run of records ending in COMMIT in the WAL, never interleaved
 * with another writer's; recovery replays the WAL from the manifest's
 * checkpoint and applies only runs that end in a COMMIT, so a batch is all
 * or nothing; puts are upserts, so a replayed document is present once.
 * Writers whose commits touch the same key: the later commit wins.
 *
 * Near-real-time segments: a commit of at most nrt_commit_docs documents
 * (and nrt_commit_bytes) that is not a bulk batch becomes an in-memory
 * segment -- the same format, built in memory (segb_finish_mem), read by
 * the same code, searchable by every access path but B-trees (column scans
 * serve its few rows) -- and costs no file at all: its durability is the
 * WAL's.  The in-memory segments are merged among themselves in memory
 * and written to one segment file when they hold nrt_flush_bytes or their
 * oldest commit is nrt_flush_ms old (table_merge.c), so the segment count
 * stays bounded under a write storm.  A checkpoint names only files: its
 * LSN is the lowest LSN of an in-memory segment's commits, so recovery
 * replays those commits.
 *
 * Failures: a commit that fails before its records are written changes
 * nothing and the table keeps taking writes (a full disk: writes work again
 * once space is freed).  Only a failure that leaves the outcome unknown (the
 * WAL could not be synced or cut back) or an allocation failure after the
 * records are written makes the table refuse writes until it is reopened.
 *
 * Checkpoint: sync the WAL (deletes files must never get ahead of the
 * commits that made them), fsync new segment files, write deletes files,
 * write the manifest (fsync), then drop WAL files before the checkpoint
 * LSN.  Taken when the WAL since the last checkpoint exceeds
 * opts.checkpoint_wal_bytes, after a merge or flush to a file, on
 * table_flush and on close (which first write the in-memory segments to a
 * file).  A checkpoint that fails after a commit does not fail the commit
 * (its records are in the WAL); it is tried again at the next one.
 *
 * Merges run in two background threads per table (tiered policies, see
 * table_merge.c): one for the segment files, one for the in-memory tier;
 * readers never wait for them: a snapshot pins its segments.
 *
 * Thread safety: any number of threads may take snapshots and read
 * concurrently with one another and with writers.  A batch is used by one
 * thread at a time; any number of batches may be filled concurrently, and
 * their commits serialize on the table's write lock for steps 1-4 only.
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
    uint32_t nrt_commit_docs;      /* a commit whose last builder holds at most this many
                                      documents ... (default 1024; 0 = never) */
    size_t nrt_commit_bytes;       /* ... and bytes goes to an in-memory segment (1 MiB);
                                      larger ones write a segment file with its B-trees */
    size_t nrt_flush_bytes;        /* in-memory segments are written to a file past this
                                      (default 64 MiB) ... */
    uint32_t nrt_flush_ms;         /* ... or when their oldest commit is this old (5000) */
    int nrt_merge_factor;          /* in-memory segments per tier before merging (8; each
                                      level rewrites every document once, so fewer levels
                                      cost less CPU per write at more segments) */
    int nrt_max_segments;          /* a commit finding more in memory merges some itself (32) */
    bool salvage;                  /* open with damaged segments left out (reported) */
    bool read_only;                /* no WAL writer, no merges, no checkpoints (replay only):
                                      nothing on disk changes, a torn WAL tail included */
    bool check;                    /* with read_only (quarry check): B-tree side files are
                                      verified in full, and a damaged one is an error
                                      instead of being left out */
} TableOpts;

void table_opts_default(TableOpts *o);

typedef struct Table Table;

/* A consistent, immutable view of a table.  Segments and delete bitmaps are
 * borrowed from the snapshot and valid until snapshot_release. */
typedef struct Snapshot {
    _Atomic int refs;
    uint64_t version;         /* increases with every publish */
    uint64_t lsn;             /* the WAL's next lsn when it was built: it holds every
                                 commit below (0: built without a WAL) */
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
    uint64_t mem_segments, mem_bytes; /* the in-memory tier now */
    uint64_t nrt_merges, nrt_flushes; /* its merges in memory, its writes to files */
    uint64_t peak_segments;    /* most segments after a commit since open */
    uint64_t wal_syncs;        /* fdatasyncs of the WAL since open (group commit shares them) */
} TableInfo;

/* Create a new table in `dir` (must not exist). */
int table_create(const char *dir, const QrSchema *schema, const TableOpts *opts, Table **out,
                 QrError *err);
/* Open and recover.  QR_ENOTFOUND when `dir` holds no table. */
int table_open(const char *dir, const TableOpts *opts, Table **out, QrError *err);
/* The ids of the segment files that committed bulk commits in the WAL
 * directory `wal_dir` add by reference (WAL_SEGMENT records from lsn
 * `from_lsn` on, followed by their COMMIT): recovery keeps them, a backup
 * copies them.  *ids is the caller's to qr_free.  *cut_short (may be NULL):
 * damage that is no torn tail ended the read, so records after it are not
 * in the list.  Errors: QR_ENOMEM. */
int table_wal_segments(const char *wal_dir, uint64_t from_lsn, uint64_t **ids, size_t *n,
                       bool *cut_short, QrError *err);
/* Stop merges, checkpoint, free.  Every batch must have been freed
 * (uncommitted batches are lost, as after a crash).  NULL is a no-op. */
void table_close(Table *t);

/* The schema (stable for the table's life except table_add_field). */
const QrSchema *table_schema(const Table *t);
/* Add a field (persisted in the manifest at once).  Batches filled before
 * index their documents again with the new schema at their commit. */
int table_add_field(Table *t, const QrField *f, QrError *err);
/* A number that moves with every commit (the WAL's next lsn; without a WAL
 * the commits since open), not with merges: a caller that read the table
 * at one mark and finds another later knows a commit came in between. */
uint64_t table_write_mark(Table *t);
/* Search settings kept in the schema that change while the table is open
 * (the synonyms): a counter bumped by every change, so that caches of them
 * (query/) know to rebuild. */
uint64_t table_settings_gen(Table *t);
/* A copy of the synonyms' JSON taken under the write lock: *out is
 * qr_malloc'd and NUL-terminated (NULL with *len 0 when there are none).
 * QR_ENOMEM. */
int table_synonyms_dup(Table *t, char **out, size_t *len, QrError *err);
/* Replace the synonyms (schema_set_synonyms: json[0, len), empty = none)
 * and persist the schema in the manifest.  Errors: those of
 * schema_set_synonyms, QR_EPERM (read-only), QR_EIO; on error nothing
 * changed. */
int table_set_synonyms(Table *t, const char *json, size_t len, QrError *err);
/* Create / drop the B-tree index (index/btree.h) of schema field `field`
 * (an index into the schema's fields).  Create
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

/* ---- batches: one writer's uncommitted changes ---- */

typedef struct TableBatch TableBatch;

/* A new, empty batch.  It borrows t: free every batch before table_close.
 * Errors: QR_ENOMEM. */
int table_batch_begin(Table *t, TableBatch **out, QrError *err);
/* Upsert one JSON document into the batch.  `root` is its parse (borrowed)
 * or NULL to parse `json` here.  *replaced (may be NULL) tells whether the
 * key had a live document -- in the batch or committed when the put was
 * made.  Errors leave the batch unchanged: QR_ESYNTAX, QR_ETYPE,
 * QR_ECONSTRAINT (no usable primary key), QR_ELIMIT, QR_ENOMEM; QR_EIO when
 * spilling the batch's builder to a file failed, after which the batch is
 * poisoned (every later put, delete and commit returns that error; free
 * it). */
struct cJSON;
int table_batch_put(TableBatch *b, const char *json, size_t len, const struct cJSON *root,
                    bool *replaced, QrError *err);
/* Delete by primary key bytes (pk_encode).  *found (may be NULL) tells
 * whether a live document had the key (in the batch or committed). */
int table_batch_delete(TableBatch *b, const uint8_t *key, size_t len, bool *found,
                       QrError *err);
/* Puts and deletes in the batch. */
uint64_t table_batch_ops(const TableBatch *b);
/* Distinct keys the batch put or deleted. */
uint64_t table_batch_keys(const TableBatch *b);
/* Step 0 of the commit now, in the caller's thread and outside any lock:
 * the batch's last documents become its segment (a file for a bulk batch),
 * so that batches filled by several threads are encoded in parallel and
 * their commits only order and log them.  More puts may follow (a new
 * builder).  Errors: QR_EIO, QR_ENOMEM -- the batch is poisoned then (its
 * commit fails the same way: free it). */
int table_batch_seal(TableBatch *b, QrError *err);
/* Move everything src holds (sealed first: its segments, records and keys)
 * to the end of dst, as if src's puts and deletes had been made in dst
 * after dst's own: a key both touched keeps src's outcome.  src is left
 * empty.  For batches filled in parallel (by slices of one statement) and
 * committed as one.  Errors: QR_EINVAL (another table's batch), QR_EIO and
 * QR_ENOMEM from sealing, QR_ENOMEM (dst is poisoned when it had changed);
 * a poisoned src poisons dst. */
int table_batch_absorb(TableBatch *dst, TableBatch *src, QrError *err);
/* A bulk batch (an import) writes segment files at its commits, never the
 * in-memory tier: its commits are large and throughput counts more than
 * the few milliseconds the tier saves. */
void table_batch_set_bulk(TableBatch *b, bool bulk);
/* Make the batch durable and visible as one unit (the protocol above), then
 * leave it empty for more.  An empty batch commits nothing.  On error the
 * batch is emptied too and nothing of it was written, unless the error's
 * detail says the outcome is unknown (the table then refuses writes until
 * reopened).  Errors: QR_EIO (disk full, I/O), QR_ENOMEM, QR_EPERM
 * (read-only table), the poisoning error of table_batch_put. */
int table_batch_commit(TableBatch *b, QrError *err);
/* The same commit in two steps, for a caller that orders its commits
 * under a lock of its own (SQL checks keys under one) and should not hold
 * it while the WAL syncs.  table_batch_commit_start runs the protocol up
 * to the WAL write: the commit is ordered -- later commits, and
 * table_snapshot_latest, see its effects -- but not acknowledged, not
 * visible to table_snapshot, and, in COMMIT mode, not yet durable; *c
 * records it.  Its errors are table_batch_commit's (nothing was written).
 * table_commit_wait then waits for the WAL sync that covers it (shared
 * with the commits written meanwhile) and installs a snapshot that shows
 * it: only then is it acknowledged.  An error from the wait means the
 * outcome is unknown (the table refuses writes until reopened).  Call the
 * wait exactly once per started commit, from any thread, without the
 * table's locks; c borrows the table.  table_batch_commit is the two in a
 * row. */
typedef struct TableCommit {
    Table *t;          /* borrows */
    uint64_t end_lsn;  /* the WAL must be synced below this (0: nothing to wait for) */
    uint64_t n_ops;
    uint64_t n_replaced; /* keys the batch put or deleted that had a live committed
                            document (which the commit deleted) */
    bool started;      /* the start succeeded */
} TableCommit;
int table_batch_commit_start(TableBatch *b, TableCommit *c, QrError *err);
int table_commit_wait(const TableCommit *c, QrError *err);
/* Discard whatever the batch holds and free it.  NULL is a no-op. */
void table_batch_free(TableBatch *b);

/* Checkpoint: segments + manifest on disk, WAL trimmed. */
int table_flush(Table *t, QrError *err);
/* Merge all segments into one (waits). */
int table_force_merge(Table *t, QrError *err);
/* Wait until no merge is running or due. */
void table_wait_merges(Table *t);

/* Pin the current snapshot / release it. */
Snapshot *table_snapshot(Table *t);
void snapshot_release(Snapshot *s);
/* The newest snapshot, commits started but not yet acknowledged included
 * (they may still fail to become durable): for checks that must see every
 * commit ordered before the caller's (a key that must be new).  Release
 * it with snapshot_release. */
Snapshot *table_snapshot_latest(Table *t);
/* Wait until the commits s shows (a table_snapshot_latest) are durable as
 * the fsync policy promises -- syncing the WAL to it, sharing the flush
 * with their committers -- so that s may be shown as committed.  QR_OK at
 * once when they are; the WAL's QR_EIO otherwise (their committers get it
 * too). */
int table_snapshot_wait_acked(Table *t, const Snapshot *s, QrError *err);
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
/* What the open found in the WAL (a torn tail: cut, or left by a read-only
 * open; what a salvage set aside; the bytes of intact records of a last
 * batch whose COMMIT record never made it, discarded) and how many damaged
 * segments a salvage left out. */
void table_open_report(Table *t, WalReplayStats *wal, uint64_t *uncommitted_bytes,
                       int *segments_salvaged);

#endif
