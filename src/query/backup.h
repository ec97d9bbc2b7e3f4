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
    uint64_t btrees_left_out; /* damaged B-tree side files not copied (the copy rebuilds them) */
    uint32_t max_attempts;   /* most attempts any table needed (races restart it) */
    uint64_t docs;           /* live documents the copy holds, counted when it was verified */
    double took_ms;
} QrBackupStats;

/* Copy data directory `data_dir` to `dest` (which must not exist), while a
 * server may be running on it: each table as table_backup_dir does it (every
 * batch committed before the backup started, whole batches after; every
 * segment and deletes file verified as it is taken, so damage in the source
 * is QR_ECORRUPT naming the source file), plus the data directory's own
 * files (format marker, configuration, users; not the LOCK).  The copy is
 * built in "<dest>.incomplete" under a BACKUP_INCOMPLETE marker that
 * qr_db_open refuses, opened read-only with every checksum verified, and
 * only then renamed to `dest` (backup.c has the protocol): a backup killed
 * at any point leaves no `dest` and a work directory nothing accepts as a
 * data directory; the next backup to `dest` removes it.  `report`, when not
 * NULL, receives one JSON object per table ({"table", "docs",
 * "segments"}), comma-separated.  Restoring is using the copy as --data.
 * On failure neither `dest` nor the work directory is left.  QR_EEXISTS
 * (dest, or a work directory that is not an interrupted backup's),
 * QR_ENOTFOUND (not a Quarry data directory), QR_EBUSY (a table kept
 * changing, or another backup to `dest` is running), QR_EIO, QR_ECORRUPT
 * (the source is damaged or is itself an incomplete backup), QR_ENOMEM. */
int qr_backup(const char *data_dir, const char *dest, QrBackupStats *st, QrBuf *report,
              QrError *err);

#endif
