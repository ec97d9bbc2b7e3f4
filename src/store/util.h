/*
 * util.h — log, clock and file helpers of the base kit.
 *
 * Layer: store/ (base kit). Calls error.h, mem.h, libc, POSIX.
 *
 * Files: every durable file Quarry writes goes through qr_file_write_atomic
 * (write to "<path>.tmp", fsync, rename, fsync the directory) so a reader
 * sees the old file or the new one, never half of one.  qr_map_open maps a
 * whole file read-only; the mapping is refcounted by its owner (segments).
 */
#ifndef QR_UTIL_H
#define QR_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/error.h"

typedef enum { QR_LOG_DEBUG, QR_LOG_INFO, QR_LOG_WARN, QR_LOG_ERROR } QrLogLevel;
/* Minimum level printed (default INFO; QUARRY_LOG=debug|info|warn|error). */
void qr_log_set_level(QrLogLevel lvl);
/* One line to stderr: "2026-11-29T20:11:22.123Z INFO message". */
void qr_log(QrLogLevel lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Monotonic nanoseconds; wall-clock microseconds since the epoch. */
uint64_t qr_now_ns(void);
int64_t qr_wall_us(void);
/* Test hook: while `now_ns` is set, qr_now_ns() returns now_ns() instead of
 * reading CLOCK_MONOTONIC, so a test decides exactly when a query's deadline
 * passes (a busy machine cannot move it).  NULL restores the real clock.
 * Deadlines, timings and timeouts read through qr_now_ns(); real waits
 * (condition variables, nanosleep) keep the system clocks.  Set it before the
 * threads that read it start: the swap is atomic, the installed function's
 * own state is the test's business.  Never set outside tests. */
void qr_clock_set_source(uint64_t (*now_ns)(void));

/* Write `len` bytes to `path` atomically (tmp + rename), mode 0600 (data
 * files are private to the server's user); with do_fsync the data and the
 * directory entry are on disk when it returns 0. */
int qr_file_write_atomic(const char *path, const void *data, size_t len, bool do_fsync,
                         QrError *err);
/* The same with the file's permission bits; qr_file_write_atomic is this
 * with 0600. */
int qr_file_write_atomic_mode(const char *path, const void *data, size_t len, bool do_fsync,
                              unsigned mode, QrError *err);
/* Read a whole file into a qr_malloc'd buffer (NUL-terminated). */
int qr_file_read_all(const char *path, uint8_t **out, size_t *len, QrError *err);
/* fsync a directory so renames/creates in it are durable. */
int qr_fsync_dir(const char *dir, QrError *err);
/* mkdir -p (mode 0700 for each directory it creates; existing ones are
 * left as they are). */
int qr_mkdir_p(const char *path, QrError *err);
bool qr_path_exists(const char *path);
/* rm -rf of a directory tree Quarry created. */
int qr_remove_tree(const char *path, QrError *err);

/* Fault injection for tests (STYLE.md §8): after `n` more data writes
 * succeed, every write to a file Quarry makes durable (WAL, segments,
 * B-trees, deletes, manifests and other qr_file_write_atomic files) fails
 * with errno `e` -- ENOSPC is a full disk -- until called again with n < 0
 * ("space is back").  qr_io_write_count() is the number of writes checked
 * since the last qr_io_fail_after.  Thread-safe (atomic counters). */
void qr_io_fail_after(int64_t n, int e);
int64_t qr_io_write_count(void);
/* Called by the writers before each write(2)/pwrite(2): 0, or the errno
 * that write must fail with. */
int qr_io_fault(void);

/* Cores this process may run on: the CPUs of its affinity mask, lowered
 * to the cgroup's cpu.max quota (rounded up) when one is set; at least 1.
 * What thread pools are sized from. */
int qr_cpu_count(void);

/* Test hook on the WAL's syncs of record data (STYLE.md §8): `hook` is
 * called right before each fdatasync (done = false; it may block, holding
 * the sync back) and after each that succeeded (done = true), with the
 * file's path and the bytes of it the sync covers (what was written when it
 * started).  A test keeps the last `done` size per file as what a power
 * loss would leave.  NULL removes it.  Set it while no WAL is open. */
typedef void (*QrSyncHook)(void *arg, const char *path, uint64_t bytes, bool done);
void qr_io_sync_hook_set(QrSyncHook hook, void *arg);
/* Called by the WAL around its syncs (a no-op without a hook). */
void qr_io_sync_notify(const char *path, uint64_t bytes, bool done);
bool qr_io_sync_hooked(void);

typedef struct QrMap {
    const uint8_t *data; /* owns the mapping (NULL when len == 0) */
    size_t len;
} QrMap;
int qr_map_open(const char *path, QrMap *map, QrError *err);
void qr_map_close(QrMap *map);

#endif
