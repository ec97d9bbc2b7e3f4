/*
 * backup.h — `quarry backup`: a consistent online copy of a data directory.
 *
 * Layer: query/.  Calls index/table_backup.h and quarry.h.
 */
#ifndef QR_BACKUP_H
#define QR_BACKUP_H

#include <stdint.h>

#include "store/buf.h"
#include "store/error.h"

typedef struct QrBackupStats {
    uint32_t tables;
    uint64_t segments, linked, copied, bytes, wal_files;
    uint32_t max_attempts;   /* most attempts any table needed (races restart it) */
    uint64_t docs;           /* live documents the copy holds, counted when it was verified */
    double took_ms;
} QrBackupStats;

/* Copy data directory `data_dir` to `dest` (which must not exist), while a
 * server may be running on it: each table as table_backup_dir does it (every
 * batch committed before the backup started, whole batches after), plus the
 * data directory's own files (format marker, configuration, users; not the
 * LOCK).  Then the copy is opened like any data directory (its WAL
 * replayed), and every table's checksums verified; `report`, when not NULL,
 * receives one JSON object per table ({"table", "docs", "segments",
 * "attempts"}), comma-separated.  Restoring is using the copy as --data.
 * On failure `dest` is removed.  QR_EEXISTS, QR_ENOTFOUND (not a Quarry data
 * directory), QR_EBUSY (a table kept changing), QR_EIO, QR_ECORRUPT (the
 * copy failed verification: the source is damaged), QR_ENOMEM. */
int qr_backup(const char *data_dir, const char *dest, QrBackupStats *st, QrBuf *report,
              QrError *err);

#endif
