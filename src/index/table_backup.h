/*
 * table_backup.h — a consistent copy of one table directory, taken while the
 * table may be open and written by another process.
 *
 * Layer: index/.  Calls store/ (manifest, util).  The table's file layout is
 * table.c's (its header comment); the protocol is described in
 * table_backup.c and docs/operations.md ("Backups").
 */
#ifndef QR_TABLE_BACKUP_H
#define QR_TABLE_BACKUP_H

#include <stdint.h>

#include "store/error.h"

typedef struct TableBackupStats {
    uint64_t segments;     /* segment files taken */
    uint64_t linked;       /* files hard-linked (immutable files on the same file system) */
    uint64_t copied;       /* files copied (WAL files, and everything across file systems) */
    uint64_t bytes;        /* bytes of every file taken */
    uint64_t wal_files;
    uint64_t btrees_left_out; /* damaged B-tree side files not taken (rebuilt by the copy) */
    uint32_t attempts;     /* 1 unless a merge or checkpoint raced the copy */
    uint64_t checkpoint_lsn;
} TableBackupStats;

/* Copy the durable state of the table in src_dir into dst_dir (created; it
 * must not exist yet): the segments and deletes files the MANIFEST names
 * (hard links where possible: they are immutable; each verified as it is
 * taken, QR_ECORRUPT naming the source file when damaged), their B-tree
 * side files (a damaged one is left out and counted),
 * the WAL files (copied; a half-written last record is a torn tail that
 * recovery cuts, and an uncommitted batch is discarded by recovery), and the
 * MANIFEST that was read first.  Opening dst_dir replays the copied WAL on
 * top of the copied segments, so the copy holds every batch committed before
 * the backup started and possibly some committed during it — always whole
 * batches.  A merge or checkpoint racing the copy (a named file vanishes,
 * the checkpoint moves) restarts it; QR_EBUSY after 50 attempts.  QR_EEXISTS
 * when dst_dir exists, QR_ENOTFOUND when src_dir has no MANIFEST, QR_EIO,
 * QR_ECORRUPT (the MANIFEST), QR_ENOMEM. */
int table_backup_dir(const char *src_dir, const char *dst_dir, TableBackupStats *st,
                     QrError *err);

#endif
