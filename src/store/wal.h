/*
 * wal.h — the write-ahead log: append, commit with a chosen durability,
 * rotate, drop after checkpoint, and crash-recovering replay.
 *
 * Layer: store/.  Calls the base kit and sfile.h (the common file header).
 * Byte layout and recovery rules: wal.c's header comment and docs/format.md.
 *
 * A log is a directory of files "wal-<16 lowercase hex digits>.log", each
 * named after the first lsn it may hold, each a 16-byte header followed by
 * records  [u32 payload length][u32 crc32c(type, lsn, payload)][u8 type]
 * [u64 lsn][payload].  LSNs start at 1 and go up by one per record; a file's
 * records are the lsns from its name up to (not including) the next file's.
 *
 * Use (checkpoint_lsn = the first lsn not yet reflected in durable segments):
 *   wal_replay(dir, checkpoint_lsn, WAL_REPLAY_RECOVER, cb, arg, &st, err);
 *                                                  cuts a torn tail
 *   next = max(st.last_lsn + 1, checkpoint_lsn);
 *   wal_open(dir, mode, batch_ms, next, &w, err);
 *   wal_append(w, type, p, n, &lsn, err) ... wal_commit(w, err);
 *   after a durable checkpoint at L = wal_next_lsn(w): wal_rotate(w),
 *   wal_drop_before(w, L).
 *
 * Threads: one thread at a time appends and writes (wal_append,
 * wal_write, wal_commit, wal_rotate, ...: the caller serializes them, one
 * writer per table).  wal_sync_to, wal_acked_lsn, wal_syncs and wal_bytes
 * may be called from any thread, concurrently with the writer: that is how
 * group commit works -- a commit writes its records under the caller's
 * lock, releases it, then waits in wal_sync_to for an fdatasync that
 * covers them, which it shares with the commits written meanwhile (as
 * PostgreSQL's commits wait for the WAL flush that covers their record).
 * In BATCHED mode a private thread fsyncs behind the writer.  They
 * cooperate under the writer's own mutex.
 *
 * Failure: a write error (disk full, EIO) in wal_commit cuts the file back to
 * its last committed byte, forgets the uncommitted records (their lsns are
 * handed out again) and returns QR_EIO: nothing of that commit is
 * acknowledged and the writer stays usable.  A failed fsync, or a failed
 * cut-back, poisons the writer: every later call returns that QR_EIO (the
 * page cache can no longer be trusted); close it and recover with replay.
 */
#ifndef QR_WAL_H
#define QR_WAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/error.h"

typedef enum {
    QR_FSYNC_COMMIT,  /* fdatasync in every wal_commit: durable on return */
    QR_FSYNC_BATCHED, /* a background thread fdatasyncs at most every batch_ms */
    QR_FSYNC_OFF      /* never fsync; the OS decides (a process crash loses
                         nothing, an OS crash may lose or damage the tail) */
} QrFsyncMode;

/* Largest record payload (QR_ELIMIT beyond). */
#define WAL_MAX_PAYLOAD (1u << 30)
/* Bytes a record takes on disk besides its payload. */
#define WAL_RECORD_OVERHEAD 17
/* batch_ms used when BATCHED is asked for with batch_ms = 0. */
#define WAL_DEFAULT_BATCH_MS 10

typedef struct WalWriter WalWriter;

/* Create `dir` if needed and start a new file at next_lsn (>= 1).  (When
 * dir is new, making its own entry in its parent durable is the caller's
 * part of creating the table directory.)  The
 * caller must have replayed the log first and pass an lsn above every lsn in
 * it (see the Use block).  A file already named next_lsn that holds no
 * record (a crash right after a rotation) is reused.
 *   QR_EINVAL  next_lsn is 0, or a log file at or beyond next_lsn has records
 *   QR_EIO     directory or file could not be created / synced
 *   QR_ENOMEM
 * In COMMIT and BATCHED modes the new file and its directory entry are synced
 * before returning.  BATCHED starts the sync thread. */
int wal_open(const char *dir, QrFsyncMode mode, uint32_t batch_ms, uint64_t next_lsn,
             WalWriter **out, QrError *err);

/* Buffer one record in memory and hand out its lsn (*lsn_out may be NULL).
 * Nothing reaches the file until wal_commit.  QR_ELIMIT if len >
 * WAL_MAX_PAYLOAD, QR_ENOMEM (the record is not appended, the lsn not used),
 * or the writer's sticky QR_EIO. */
int wal_append(WalWriter *w, uint8_t type, const void *payload, size_t len, uint64_t *lsn_out,
               QrError *err);

/* Write the buffered records to the current file, without syncing them
 * (BATCHED: the sync thread will, within about batch_ms).  *end_lsn (may
 * be NULL) gets the lsn after the last record written: pass it to
 * wal_sync_to.  QR_EIO as described in the file comment (the file is cut
 * back: nothing of these records is in it). */
int wal_write(WalWriter *w, uint64_t *end_lsn, QrError *err);

/* Wait until every record below `lsn` keeps the mode's promise.  COMMIT:
 * an fdatasync that started after they were written has returned
 * (concurrent callers share it: group commit).  BATCHED, OFF: at once.
 * Any thread; must not be called with the lock that serializes the writer
 * held if other threads need it to write (it would only delay them).
 * QR_EIO: the writer is poisoned (a failed fdatasync: whether the records
 * are durable is unknown). */
int wal_sync_to(WalWriter *w, uint64_t lsn, QrError *err);

/* Make everything written durable now, whatever the mode (OFF: nothing):
 * for a caller about to write files that must not get ahead of the log (a
 * checkpoint).  The writer's thread.  QR_EIO as wal_sync_to. */
int wal_sync(WalWriter *w, QrError *err);

/* wal_write then wal_sync_to its end: COMMIT: durable when 0 is returned.
 * BATCHED: the sync thread makes them durable within about batch_ms; a
 * failure it meets is returned by the next call.  OFF: no sync.  QR_EIO as
 * described in the file comment. */
int wal_commit(WalWriter *w, QrError *err);

/* The lsn below which records may be acknowledged: synced (COMMIT), or
 * written (BATCHED and OFF, whose promise is the page cache's).  Any
 * thread. */
uint64_t wal_acked_lsn(WalWriter *w);

/* fdatasyncs of records made so far (by group-commit leaders, the BATCHED
 * thread, rotations).  Any thread. */
uint64_t wal_syncs(WalWriter *w);

/* Forget the records appended since the last wal_commit: nothing of them
 * reaches the file and their lsns are handed out again.  For a caller whose
 * unit of commit failed half way through its appends (QR_ENOMEM), so that
 * the next commit does not carry them. */
void wal_discard(WalWriter *w);

/* Commit what is buffered, make the current file durable (COMMIT, BATCHED),
 * and start a new file at wal_next_lsn().  A no-op when the current file
 * holds no record yet.  If the new file cannot be created the writer keeps
 * appending to the current one and QR_EIO/QR_ENOMEM is returned. */
int wal_rotate(WalWriter *w, QrError *err);

/* Delete the files whose records all have lsn < `lsn`, i.e. every file
 * whose successor starts at or below `lsn`; the current file is never
 * deleted (rotate first to drop everything).  Call after a checkpoint that
 * covers those lsns is durable.  QR_EIO if a file cannot be removed. */
int wal_drop_before(WalWriter *w, uint64_t lsn, QrError *err);

/* The lsn the next wal_append will return. */
uint64_t wal_next_lsn(const WalWriter *w);

/* Bytes of live log files on disk (excludes buffered, uncommitted records).
 * Any thread. */
uint64_t wal_bytes(const WalWriter *w);

/* Commit pending bytes, sync them (COMMIT, BATCHED), stop the sync thread,
 * close the file and free w.  Errors are logged, not returned: call
 * wal_commit first when the outcome matters.  NULL is a no-op. */
void wal_close(WalWriter *w);

/* What wal_replay may change on disk. */
typedef enum {
    WAL_REPLAY_RECOVER, /* before writing: cut a torn tail of the last file */
    WAL_REPLAY_READ,    /* change nothing: a torn tail is reported and left */
    WAL_REPLAY_SALVAGE  /* RECOVER, and damage that is not a torn tail is set
                           aside (below) instead of being an error */
} WalReplayMode;

typedef struct WalReplayStats {
    uint64_t records;        /* records passed to cb */
    uint64_t bytes;          /* on-disk bytes of those records */
    uint64_t last_lsn;       /* highest lsn the log accounts for: the last
                                intact record's, or (file name lsn - 1) of
                                the last file if that is higher; 0 if none */
    uint64_t torn_bytes;     /* bytes of the last file's torn tail: cut
                                (RECOVER, SALVAGE) or left in place (READ) */
    uint64_t torn_off;       /* where the torn tail starts in torn_file */
    char torn_file[256];     /* path of the file with the torn tail, "" if none */
    char torn_why[64];       /* what is wrong at torn_off, "" if none */
    uint64_t salvaged_bytes; /* SALVAGE: bytes set aside from the first damage
                                to the end of the log; 0 if nothing was */
    uint64_t salvage_off;    /* offset of that damage in salvage_file */
    char salvage_file[256];  /* the file it is in, "" if none */
} WalReplayStats;

/* Pass every intact record with lsn >= from_lsn to cb, in lsn order.  cb's
 * payload is borrowed for the duration of the call only.
 *   - A torn tail ends the log: damage in the LAST file (short record, bad
 *     CRC, out-of-order lsn, garbage, torn or damaged header) with no intact
 *     record after it.  That is what a crash during a write leaves, and
 *     those bytes were never acknowledged (their fdatasync never returned).
 *     RECOVER and SALVAGE truncate the file to its last intact record and
 *     sync it; READ leaves it.  Either way it is reported in *stats, not as
 *     an error.
 *   - Damage followed by an intact record (one with a matching CRC and an
 *     lsn the log could hold there), damage in any file but the last, and a
 *     gap at or above from_lsn (an older file ends before its successor's
 *     first lsn: records lost at a record boundary) are corruption: cutting
 *     there would drop acknowledged records.  QR_ECORRUPT naming the file
 *     and the offset (err->offset), files untouched; records before the
 *     damage have already been passed to cb.  SALVAGE instead keeps the log
 *     up to the damage: the damaged file is copied whole to
 *     "<file>.damaged" (".damaged.N" when taken) and truncated at the
 *     damage, and every later file is renamed to "<file>.damaged"; what
 *     was set aside is reported in *stats and logged.
 *   - Gaps wholly below from_lsn (a writer reopened at a checkpoint past the
 *     log's end) are not damage.  Files wholly below from_lsn (their
 *     successor starts <= from_lsn) are skipped unread.  A missing directory
 *     is an empty log.
 *   - cb returning non-zero stops the replay and returns that code (err is
 *     set to a generic message unless cb set it).
 *   - QR_EUNSUPPORTED for a file written by a newer format; QR_EIO, QR_ENOMEM.
 * stats may be NULL.  Not to be run while a WalWriter has the dir open. */
int wal_replay(const char *dir, uint64_t from_lsn, WalReplayMode mode,
               int (*cb)(void *arg, uint8_t type, uint64_t lsn, const uint8_t *payload,
                         size_t len),
               void *arg, WalReplayStats *stats, QrError *err);

#endif
