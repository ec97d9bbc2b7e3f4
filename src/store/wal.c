/*
 * wal.c — write-ahead log: writer (buffer, commit, fsync modes, rotation,
 * dropping old files) and replay with torn-tail recovery and salvage.
 *
 * Layer: store/.  Calls the base kit, sfile.h (common header), POSIX, pthreads.
 *
 * Format (little-endian; docs/format.md has the long form):
 *
 *   directory:  wal-<first lsn, 16 lowercase hex digits>.log  ...
 *   file:       header (16 bytes, sfile.h: magic, kind 'WALF', version 1, crc)
 *               record*
 *   record:     0  u32 len     payload bytes, <= WAL_MAX_PAYLOAD
 *               4  u32 crc     CRC32C over bytes 8 .. 17+len (type, lsn, payload)
 *               8  u8  type    the caller's record type
 *               9  u64 lsn
 *              17  payload
 *
 * Invariants of an intact log:
 *   - the first record of a file has the lsn in the file's name; each next
 *     record's lsn is the previous one + 1 (a record with any other lsn is
 *     damage, which catches stale or misplaced bytes that happen to checksum);
 *   - file names increase, and each file's name is above every lsn in the
 *     files before it (gaps are allowed: wal_open may skip lsns);
 *   - only the last file is ever appended to; it is the only one that can
 *     have a torn tail, because wal_rotate syncs a file before starting the
 *     next (except in OFF mode, where an OS crash can damage any file).
 *
 * Recovery (wal_replay): a crash during a write can only damage the end of
 * the last file, and leaves no intact record after the damage (the torn
 * bytes are the end of the file).  So damage in the last file is a torn tail
 * only when no intact record follows it; the search for one (wal_find_intact)
 * checks every offset after the damage for a record whose lsn the log could
 * hold there and whose CRC matches.  A torn tail is cut (ftruncate +
 * fdatasync; not in READ mode): it was never acknowledged in COMMIT mode,
 * since an fdatasync covering it never returned.  Damage with an intact
 * record after it, damage in an older file, and records missing between
 * files are corruption: reported, never cut, unless the caller asks to
 * salvage (the log is kept up to the damage, the rest set aside as
 * "<file>.damaged").  A last file whose header is short or fails its
 * checksum, with no intact record after it, is cut to zero bytes; an empty
 * (zero-byte) file holds no records wherever it is.
 *
 * Durability per mode: COMMIT: wal_write puts the records in the file and
 * wal_sync_to waits for an fdatasync that covers them; concurrent callers
 * share one (group commit: one leader syncs whatever was written when it
 * started, the others wait on cv, and those it did not cover elect the
 * next leader).  BATCHED marks the writer dirty and a thread fdatasyncs at
 * most every batch_ms.  Either way the thread in fdatasync holds `syncing`
 * (under mu), so that rotate/close never close the fd it is syncing, and
 * durable_lsn only moves up to what was written when that sync started.
 * New files are synced along with their directory entry at
 * creation (COMMIT, BATCHED) so that a synced record is never in a file
 * whose name is lost.
 */
#include "store/wal.h"

#include "store/buf.h"
#include "store/crc32c.h"
#include "store/mem.h"
#include "store/sfile.h"
#include "store/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WAL_VERSION 1
#define WAL_NAME_LEN 24 /* "wal-" + 16 hex + ".log" */
#define WAL_BUF_KEEP (4u << 20) /* a commit keeps a record buffer up to this size */

typedef struct WalFile {
    uint64_t first_lsn; /* from the name */
    uint64_t bytes;     /* size on disk */
} WalFile;

/* Invariants: files[n_files - 1] is the current file (fd); its bytes equal
 * what was written to it; atomic `bytes` is the sum of files[].bytes.
 * Records [pending_lsn, next_lsn) are in buf and nowhere else. */
struct WalWriter {
    char *dir;             /* owns */
    char *cur_path;        /* owns: path of the current file */
    char *tmp_path;        /* owns: scratch for other files' paths */
    QrFsyncMode mode;
    uint32_t batch_ms;
    int fd;                /* current file; lifetime guarded by mu vs the thread */
    uint64_t next_lsn;     /* lsn the next append gets */
    uint64_t pending_lsn;  /* lsn of the first record in buf */
    QrBuf buf;             /* owns: appended, not yet written records */
    WalFile *files;        /* owns: live files, oldest first */
    size_t n_files;
    size_t cap_files;
    _Atomic uint64_t bytes;
    pthread_mutex_t mu;    /* guards the fields below */
    pthread_cond_t cv;     /* wakes the thread (stop) and waiters on syncing */
    pthread_t thread;
    bool has_thread;
    bool stop;             /* the thread should exit */
    bool dirty;            /* written since the last sync started */
    bool syncing;          /* a thread (the BATCHED thread, or a group commit's
                              leader) is in fdatasync(fd) */
    uint64_t written_lsn;  /* records below it are in the file */
    uint64_t written_bytes; /* ... which is this long */
    uint64_t durable_lsn;  /* records below it are synced (COMMIT, BATCHED) */
    uint64_t n_syncs;      /* fdatasyncs of record data done */
    QrError broken;        /* sticky failure; code QR_OK while healthy */
};

/* ---- names and directory listing ----------------------------------------- */

static void wal_path(char *out, size_t cap, const char *dir, uint64_t lsn)
{
    snprintf(out, cap, "%s/wal-%016" PRIx64 ".log", dir, lsn);
}

static size_t wal_path_cap(const char *dir) { return strlen(dir) + WAL_NAME_LEN + 2; }

/* Parse "wal-<16 hex>.log"; false for any other name. */
static bool wal_parse_name(const char *name, uint64_t *lsn)
{
    if (strlen(name) != WAL_NAME_LEN || memcmp(name, "wal-", 4) != 0 ||
        memcmp(name + 20, ".log", 4) != 0)
        return false;
    uint64_t v = 0;
    for (int i = 4; i < 20; i++) {
        char c = name[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return false;
        v = v << 4 | (uint64_t)d;
    }
    *lsn = v;
    return true;
}

static int cmp_files(const void *a, const void *b)
{
    uint64_t x = ((const WalFile *)a)->first_lsn, y = ((const WalFile *)b)->first_lsn;
    return x < y ? -1 : x > y;
}

/* The log files in dir, sorted by first lsn (*files qr_malloc'd, may be NULL
 * when *n == 0).  A missing directory is an empty list. */
static int wal_list(const char *dir, WalFile **files, size_t *n, QrError *err)
{
    *files = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return QR_OK;
        return qr_error_set(err, QR_EIO, "could not open wal directory \"%s\": %s", dir,
                            strerror(errno));
    }
    WalFile *v = NULL;
    size_t cnt = 0, cap = 0;
    int rc = QR_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        uint64_t lsn;
        if (!wal_parse_name(e->d_name, &lsn))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, 0) != 0) {
            rc = qr_error_set(err, QR_EIO, "could not stat wal file \"%s/%s\": %s", dir,
                              e->d_name, strerror(errno));
            break;
        }
        if (cnt == cap) {
            size_t nc = cap ? cap * 2 : 16;
            WalFile *nv = qr_realloc(v, nc * sizeof *nv);
            if (!nv) {
                rc = qr_error_set(err, QR_ENOMEM, "out of memory listing wal directory \"%s\"",
                                  dir);
                break;
            }
            v = nv;
            cap = nc;
        }
        v[cnt].first_lsn = lsn;
        v[cnt].bytes = (uint64_t)st.st_size;
        cnt++;
    }
    closedir(d);
    if (rc != QR_OK) {
        qr_free(v);
        return rc;
    }
    if (cnt > 1)
        qsort(v, cnt, sizeof *v, cmp_files);
    *files = v;
    *n = cnt;
    return QR_OK;
}

/* ---- writer -------------------------------------------------------------- */

static int wal_io_error(QrError *err, const char *what, const char *path, int e)
{
    qr_error_set(err, QR_EIO, "could not %s wal file \"%s\": %s", what, path, strerror(e));
    if (e == ENOSPC || e == EDQUOT || e == EFBIG) {
        qr_error_hint(err, "free disk space and retry; the failed commit was not acknowledged");
        qr_error_set_sqlstate(err, "53100"); /* disk_full */
    }
    return QR_EIO;
}

static int pwrite_all(int fd, const uint8_t *p, size_t n, uint64_t off)
{
    while (n) {
        int fault = qr_io_fault();
        if (fault)
            return fault;
        ssize_t r = pwrite(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno;
        if (r == 0)
            return ENOSPC;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

/* Record a sticky failure (mu held). */
static void wal_poison_locked(WalWriter *w, const char *what, int e)
{
    if (w->broken.code == QR_OK)
        wal_io_error(&w->broken, what, w->cur_path, e);
}

static void wal_poison(WalWriter *w, const char *what, int e)
{
    pthread_mutex_lock(&w->mu);
    wal_poison_locked(w, what, e);
    pthread_mutex_unlock(&w->mu);
}

/* QR_EIO (copied into err) if the writer is poisoned. */
static int wal_check_broken(WalWriter *w, QrError *err)
{
    pthread_mutex_lock(&w->mu);
    int rc = w->broken.code;
    if (rc != QR_OK)
        qr_error_copy(err, &w->broken);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* fdatasync the current file, whose first `bytes` bytes hold the records
 * the sync is for; the test hook (store/util.h) sees it.  0 or errno. */
static int wal_fdatasync(int fd, const char *path, uint64_t bytes)
{
    qr_io_sync_notify(path, bytes, false);
    int r = fdatasync(fd), e = errno;
    if (r != 0)
        return e;
    qr_io_sync_notify(path, bytes, true);
    return 0;
}

/* One sync of everything written so far, by the thread that found none
 * running (mu held, released during the fdatasync; `syncing` keeps
 * rotate/close from closing the fd meanwhile).  durable_lsn moves up to
 * what was written when it started; a failure poisons the writer.  Wakes
 * every waiter. */
static void wal_sync_round_locked(WalWriter *w)
{
    int fd = w->fd;
    uint64_t target = w->written_lsn, bytes = w->written_bytes;
    w->syncing = true;
    pthread_mutex_unlock(&w->mu);
    int e = wal_fdatasync(fd, w->cur_path, bytes);
    pthread_mutex_lock(&w->mu);
    w->syncing = false;
    w->n_syncs++;
    if (e != 0)
        wal_poison_locked(w, "fdatasync", e);
    else if (target > w->durable_lsn)
        w->durable_lsn = target;
    pthread_cond_broadcast(&w->cv);
}

static void *wal_sync_main(void *arg)
{
    WalWriter *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        uint64_t ns = (uint64_t)dl.tv_nsec + (uint64_t)w->batch_ms * 1000000u;
        dl.tv_sec += (time_t)(ns / 1000000000u);
        dl.tv_nsec = (long)(ns % 1000000000u);
        while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &dl) != ETIMEDOUT) {
        }
        if (w->stop || !w->dirty || w->broken.code != QR_OK)
            continue;
        w->dirty = false;
        wal_sync_round_locked(w);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Wait until the sync thread is not inside fdatasync (mu held). */
static void wal_wait_idle_locked(WalWriter *w)
{
    while (w->syncing)
        pthread_cond_wait(&w->cv, &w->mu);
}

int wal_sync(WalWriter *w, QrError *err)
{
    if (w->mode == QR_FSYNC_OFF)
        return QR_OK;
    pthread_mutex_lock(&w->mu);
    wal_wait_idle_locked(w);
    w->dirty = false;
    int e = wal_fdatasync(w->fd, w->cur_path, w->written_bytes);
    w->n_syncs++;
    if (e != 0)
        wal_poison_locked(w, "fdatasync", e);
    else
        w->durable_lsn = w->written_lsn;
    pthread_cond_broadcast(&w->cv);
    int rc = w->broken.code;
    if (rc != QR_OK)
        qr_error_copy(err, &w->broken);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* Create the file for `lsn`, write its header, sync it and the directory
 * (unless OFF).  `reuse` allows replacing an existing file of that name.
 * The caller has reserved room in files[]. */
static int wal_create_file(WalWriter *w, uint64_t lsn, bool reuse, int *fd_out, QrError *err)
{
    wal_path(w->tmp_path, wal_path_cap(w->dir), w->dir, lsn);
    const char *path = w->tmp_path;
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (reuse ? O_TRUNC : O_EXCL);
    int fd = open(path, flags, 0600); /* table data: owner only */
    if (fd < 0)
        return wal_io_error(err, "create", path, errno);
    uint8_t hdr[SF_HEADER_LEN];
    sf_header_encode(hdr, QR_KIND_WAL, WAL_VERSION);
    int e = pwrite_all(fd, hdr, sizeof hdr, 0);
    const char *what = "write";
    if (!e && w->mode != QR_FSYNC_OFF && fdatasync(fd) != 0) {
        e = errno;
        what = "fdatasync";
    }
    if (e) {
        wal_io_error(err, what, path, e);
        close(fd);
        unlink(path);
        return QR_EIO;
    }
    if (w->mode != QR_FSYNC_OFF && qr_fsync_dir(w->dir, err) != QR_OK) {
        close(fd);
        unlink(path);
        return QR_EIO;
    }
    *fd_out = fd;
    return QR_OK;
}

static bool wal_reserve_files(WalWriter *w)
{
    if (w->n_files < w->cap_files)
        return true;
    size_t nc = w->cap_files ? w->cap_files * 2 : 8;
    WalFile *nf = qr_realloc(w->files, nc * sizeof *nf);
    if (!nf)
        return false;
    w->files = nf;
    w->cap_files = nc;
    return true;
}

static void wal_free_struct(WalWriter *w)
{
    qr_buf_free(&w->buf);
    qr_free(w->files);
    qr_free(w->dir);
    qr_free(w->cur_path);
    qr_free(w->tmp_path);
    qr_free(w);
}

int wal_open(const char *dir, QrFsyncMode mode, uint32_t batch_ms, uint64_t next_lsn,
             WalWriter **out, QrError *err)
{
    if (next_lsn == 0)
        return qr_error_set(err, QR_EINVAL, "wal lsns start at 1, got 0 for \"%s\"", dir);
    if (mode != QR_FSYNC_COMMIT && mode != QR_FSYNC_BATCHED && mode != QR_FSYNC_OFF)
        return qr_error_set(err, QR_EINVAL, "unknown wal fsync mode %d", (int)mode);
    int rc = qr_mkdir_p(dir, err);
    if (rc != QR_OK)
        return rc;
    WalWriter *w = qr_calloc(1, sizeof *w);
    if (!w)
        return qr_error_set(err, QR_ENOMEM, "out of memory opening wal \"%s\"", dir);
    w->fd = -1;
    w->mode = mode;
    w->batch_ms = batch_ms ? batch_ms : WAL_DEFAULT_BATCH_MS;
    w->next_lsn = w->pending_lsn = next_lsn;
    w->written_lsn = w->durable_lsn = next_lsn; /* what is below was replayed: on disk */
    qr_buf_init(&w->buf);
    qr_error_clear(&w->broken);
    w->dir = qr_strdup(dir);
    w->cur_path = qr_malloc(wal_path_cap(dir));
    w->tmp_path = qr_malloc(wal_path_cap(dir));
    if (!w->dir || !w->cur_path || !w->tmp_path) {
        wal_free_struct(w);
        return qr_error_set(err, QR_ENOMEM, "out of memory opening wal \"%s\"", dir);
    }
    rc = wal_list(dir, &w->files, &w->n_files, err);
    w->cap_files = w->n_files;
    bool reuse = false;
    if (rc == QR_OK && w->n_files) {
        WalFile *last = &w->files[w->n_files - 1];
        if (last->first_lsn == next_lsn && last->bytes <= SF_HEADER_LEN) {
            reuse = true; /* no record: a crash right after creating it */
            w->n_files--;
        } else if (last->first_lsn >= next_lsn) {
            rc = qr_error_set(err, QR_EINVAL,
                              "wal \"%s\" already has a file for lsn %" PRIu64
                              ", cannot start at lsn %" PRIu64,
                              dir, last->first_lsn, next_lsn);
            qr_error_hint(err, "replay the wal and open it after its last lsn");
        }
    }
    if (rc == QR_OK && !wal_reserve_files(w))
        rc = qr_error_set(err, QR_ENOMEM, "out of memory opening wal \"%s\"", dir);
    if (rc == QR_OK)
        rc = wal_create_file(w, next_lsn, reuse, &w->fd, err);
    if (rc != QR_OK) {
        wal_free_struct(w);
        return rc;
    }
    wal_path(w->cur_path, wal_path_cap(dir), dir, next_lsn);
    w->files[w->n_files++] = (WalFile){next_lsn, SF_HEADER_LEN};
    w->written_bytes = SF_HEADER_LEN;
    uint64_t total = 0;
    for (size_t i = 0; i < w->n_files; i++)
        total += w->files[i].bytes;
    atomic_init(&w->bytes, total);

    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&w->mu, NULL);
    if (mode == QR_FSYNC_BATCHED) {
        int e = pthread_create(&w->thread, NULL, wal_sync_main, w);
        if (e != 0) {
            qr_error_set(err, QR_ENOMEM, "could not start the wal sync thread for \"%s\": %s",
                         dir, strerror(e));
            close(w->fd);
            unlink(w->cur_path);
            pthread_cond_destroy(&w->cv);
            pthread_mutex_destroy(&w->mu);
            wal_free_struct(w);
            return QR_ENOMEM;
        }
        w->has_thread = true;
    }
    *out = w;
    return QR_OK;
}

int wal_append(WalWriter *w, uint8_t type, const void *payload, size_t len, uint64_t *lsn_out,
               QrError *err)
{
    if (wal_check_broken(w, err))
        return QR_EIO;
    if (len > WAL_MAX_PAYLOAD)
        return qr_error_set(err, QR_ELIMIT,
                            "wal record of %zu bytes is over the limit of %u bytes", len,
                            WAL_MAX_PAYLOAD);
    if (!qr_buf_reserve(&w->buf, WAL_RECORD_OVERHEAD + len)) {
        w->buf.oom = false; /* contents intact; this record is simply not added */
        return qr_error_set(err, QR_ENOMEM, "out of memory buffering a wal record of %zu bytes",
                            len);
    }
    uint8_t *p = w->buf.data + w->buf.len;
    uint64_t lsn = w->next_lsn;
    qr_put_u32le(p, (uint32_t)len);
    p[8] = type;
    qr_put_u64le(p + 9, lsn);
    if (len)
        memcpy(p + WAL_RECORD_OVERHEAD, payload, len);
    qr_put_u32le(p + 4, qr_crc32c(0, p + 8, 9 + len));
    w->buf.len += WAL_RECORD_OVERHEAD + len;
    w->next_lsn++;
    if (lsn_out)
        *lsn_out = lsn;
    return QR_OK;
}

int wal_write(WalWriter *w, uint64_t *end_lsn, QrError *err)
{
    if (end_lsn)
        *end_lsn = w->pending_lsn;
    if (wal_check_broken(w, err))
        return QR_EIO;
    if (w->buf.len == 0)
        return QR_OK;
    WalFile *cur = &w->files[w->n_files - 1];
    int e = pwrite_all(w->fd, w->buf.data, w->buf.len, cur->bytes);
    if (e) {
        wal_io_error(err, "write", w->cur_path, e);
        /* Forget the commit: cut off whatever part of it reached the file so
         * the next commit does not land behind garbage. */
        if (ftruncate(w->fd, (off_t)cur->bytes) != 0)
            wal_poison(w, "truncate", errno);
        w->buf.len = 0;
        w->next_lsn = w->pending_lsn;
        return QR_EIO;
    }
    cur->bytes += w->buf.len;
    atomic_fetch_add(&w->bytes, (uint64_t)w->buf.len);
    w->buf.len = 0;
    if (w->buf.cap > WAL_BUF_KEEP)
        qr_buf_free(&w->buf); /* a big batch's buffer goes back, not kept for the next */
    w->pending_lsn = w->next_lsn;
    if (end_lsn)
        *end_lsn = w->next_lsn;
    pthread_mutex_lock(&w->mu);
    w->written_lsn = w->next_lsn;
    w->written_bytes = cur->bytes;
    if (w->mode == QR_FSYNC_BATCHED)
        w->dirty = true;
    pthread_mutex_unlock(&w->mu);
    return QR_OK;
}

/* Group commit: the first caller that finds no sync running leads -- it
 * syncs everything written so far -- and callers that arrive meanwhile wait
 * for it; when it is done, those its sync did not cover elect the next
 * leader among themselves, whose sync covers all of them.  So concurrent
 * commits share fdatasyncs, and none returns before one that started after
 * its records were written has returned. */
int wal_sync_to(WalWriter *w, uint64_t lsn, QrError *err)
{
    pthread_mutex_lock(&w->mu);
    int rc = QR_OK;
    for (;;) {
        if ((rc = w->broken.code) != QR_OK) {
            qr_error_copy(err, &w->broken);
            break;
        }
        if (w->mode != QR_FSYNC_COMMIT || w->durable_lsn >= lsn)
            break;
        if (w->syncing) {
            pthread_cond_wait(&w->cv, &w->mu);
            continue;
        }
        wal_sync_round_locked(w);
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int wal_commit(WalWriter *w, QrError *err)
{
    uint64_t end;
    int rc = wal_write(w, &end, err);
    if (rc == QR_OK)
        rc = wal_sync_to(w, end, err);
    return rc;
}

uint64_t wal_acked_lsn(WalWriter *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t d = w->mode == QR_FSYNC_COMMIT ? w->durable_lsn : w->written_lsn;
    pthread_mutex_unlock(&w->mu);
    return d;
}

uint64_t wal_syncs(WalWriter *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t n = w->n_syncs;
    pthread_mutex_unlock(&w->mu);
    return n;
}

void wal_discard(WalWriter *w)
{
    w->buf.len = 0;
    w->next_lsn = w->pending_lsn;
}

int wal_rotate(WalWriter *w, QrError *err)
{
    int rc = wal_commit(w, err);
    if (rc != QR_OK)
        return rc;
    if (w->files[w->n_files - 1].bytes <= SF_HEADER_LEN)
        return QR_OK; /* nothing in it: a new file would get the same name */
    if (!wal_reserve_files(w))
        return qr_error_set(err, QR_ENOMEM, "out of memory rotating wal \"%s\"", w->dir);
    rc = wal_sync(w, err);
    int fd = -1;
    if (rc == QR_OK)
        rc = wal_create_file(w, w->next_lsn, false, &fd, err);
    if (rc != QR_OK)
        return rc;
    pthread_mutex_lock(&w->mu);
    wal_wait_idle_locked(w);
    int old = w->fd;
    w->fd = fd;
    w->dirty = false;
    w->written_bytes = SF_HEADER_LEN;
    wal_path(w->cur_path, wal_path_cap(w->dir), w->dir, w->next_lsn);
    pthread_mutex_unlock(&w->mu);
    close(old);
    w->files[w->n_files++] = (WalFile){w->next_lsn, SF_HEADER_LEN};
    atomic_fetch_add(&w->bytes, (uint64_t)SF_HEADER_LEN);
    return QR_OK;
}

int wal_drop_before(WalWriter *w, uint64_t lsn, QrError *err)
{
    size_t k = 0;
    int rc = QR_OK;
    while (k + 1 < w->n_files && w->files[k + 1].first_lsn <= lsn) {
        wal_path(w->tmp_path, wal_path_cap(w->dir), w->dir, w->files[k].first_lsn);
        if (unlink(w->tmp_path) != 0 && errno != ENOENT) {
            rc = wal_io_error(err, "remove", w->tmp_path, errno);
            break;
        }
        atomic_fetch_sub(&w->bytes, w->files[k].bytes);
        k++;
    }
    if (k) {
        memmove(w->files, w->files + k, (w->n_files - k) * sizeof *w->files);
        w->n_files -= k;
        if (rc == QR_OK && w->mode != QR_FSYNC_OFF)
            rc = qr_fsync_dir(w->dir, err);
    }
    return rc;
}

uint64_t wal_next_lsn(const WalWriter *w) { return w->next_lsn; }

uint64_t wal_bytes(const WalWriter *w)
{
    return atomic_load(&((WalWriter *)w)->bytes);
}

void wal_close(WalWriter *w)
{
    if (!w)
        return;
    QrError e;
    qr_error_clear(&e);
    int rc = wal_commit(w, &e);
    if (w->has_thread) {
        pthread_mutex_lock(&w->mu);
        w->stop = true;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
    }
    if (rc == QR_OK && w->mode == QR_FSYNC_BATCHED && w->dirty)
        rc = wal_sync(w, &e);
    if (rc != QR_OK)
        qr_log(QR_LOG_ERROR, "closing wal \"%s\": %s", w->dir, e.message);
    close(w->fd);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    wal_free_struct(w);
}

/* ---- replay -------------------------------------------------------------- */

typedef int (*WalReplayFn)(void *arg, uint8_t type, uint64_t lsn, const uint8_t *payload,
                           size_t len);

/* Where and why a file stops being intact. */
typedef struct WalDamage {
    uint64_t off;       /* first byte not part of an intact record */
    const char *why;    /* NULL when the file is intact to its end */
    QrError header;     /* an intact header that is not a WAL v1 header */
} WalDamage;

/* Cut a damaged last file to `off` bytes and make the cut durable. */
static int wal_cut(const char *path, uint64_t off, QrError *err)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return wal_io_error(err, "open", path, errno);
    int rc = QR_OK;
    if (ftruncate(fd, (off_t)off) != 0)
        rc = wal_io_error(err, "truncate", path, errno);
    else if (fdatasync(fd) != 0)
        rc = wal_io_error(err, "fdatasync", path, errno);
    close(fd);
    return rc;
}

/* Scan one mapped file, passing records >= from_lsn to cb.  *last is the
 * highest lsn seen so far in the log (updated); *end_lsn the lsn after the
 * file's last intact record (name_lsn when it holds none), which is the lsn
 * the record at the damage should have had.  Sets *dmg. */
static int wal_scan(const uint8_t *p, size_t n, const char *path, uint64_t name_lsn,
                    uint64_t from_lsn, WalReplayFn cb, void *arg, uint64_t *last,
                    uint64_t *end_lsn, WalReplayStats *st, WalDamage *dmg, QrError *err)
{
    dmg->off = 0;
    dmg->why = NULL;
    qr_error_clear(&dmg->header);
    *end_lsn = name_lsn;
    if (n == 0)
        return QR_OK;
    if (n < SF_HEADER_LEN || qr_get_u32le(p + 12) != qr_crc32c(0, p, 12)) {
        dmg->why = "torn or damaged file header";
        return QR_OK;
    }
    /* An intact header of another kind or a newer version is no torn
     * write: the caller reports it (or a salvage sets the file aside). */
    int rc = sf_header_check(p, n, path, QR_KIND_WAL, WAL_VERSION, NULL, &dmg->header);
    if (rc != QR_OK)
        return QR_OK;
    size_t off = SF_HEADER_LEN;
    uint64_t expect = name_lsn;
    while (off < n) {
        dmg->off = off;
        if (n - off < WAL_RECORD_OVERHEAD) {
            dmg->why = "short record header";
            return QR_OK;
        }
        const uint8_t *r = p + off;
        uint32_t len = qr_get_u32le(r);
        if (len > WAL_MAX_PAYLOAD || len > n - off - WAL_RECORD_OVERHEAD) {
            dmg->why = "record runs past the end of the file";
            return QR_OK;
        }
        if (qr_get_u32le(r + 4) != qr_crc32c(0, r + 8, 9 + (size_t)len)) {
            dmg->why = "record checksum mismatch";
            return QR_OK;
        }
        uint64_t lsn = qr_get_u64le(r + 9);
        if (lsn != expect) {
            dmg->why = "record lsn out of sequence";
            return QR_OK;
        }
        if (lsn >= from_lsn) {
            rc = cb(arg, r[8], lsn, r + WAL_RECORD_OVERHEAD, len);
            if (rc != 0) {
                if (rc > 0 && rc < QR_CODE_COUNT)
                    qr_error_set(err, (QrCode)rc,
                                 "wal replay stopped by its callback at lsn %" PRIu64, lsn);
                return rc;
            }
            if (st) {
                st->records++;
                st->bytes += WAL_RECORD_OVERHEAD + (uint64_t)len;
            }
        }
        *last = lsn;
        expect = lsn + 1;
        *end_lsn = expect;
        off += WAL_RECORD_OVERHEAD + (size_t)len;
    }
    dmg->off = off;
    return QR_OK;
}

/* Find an intact record at or after `from` (the damage) in p[0..n): a
 * length that fits the file, a matching CRC, and an lsn the log could have
 * written there: from `expect` (the lsn due at the damage) up to one more
 * per WAL_RECORD_OVERHEAD bytes left.  The lsn window keeps the CRC work to
 * a few candidates even over megabytes of garbage.  A torn write leaves none
 * (its bytes end the file); finding one means the damage is followed by
 * records that were written, and so maybe acknowledged, after it. */
static bool wal_find_intact(const uint8_t *p, size_t n, size_t from, uint64_t expect,
                            size_t *at, uint64_t *lsn_at)
{
    if (from >= n)
        return false;
    uint64_t max_lsn = expect + (n - from) / WAL_RECORD_OVERHEAD;
    for (size_t q = from; n - q >= WAL_RECORD_OVERHEAD; q++) {
        const uint8_t *r = p + q;
        uint64_t lsn = qr_get_u64le(r + 9);
        if (lsn < expect || lsn > max_lsn)
            continue;
        uint32_t len = qr_get_u32le(r);
        if (len > WAL_MAX_PAYLOAD || len > n - q - WAL_RECORD_OVERHEAD)
            continue;
        if (qr_get_u32le(r + 4) == qr_crc32c(0, r + 8, 9 + (size_t)len)) {
            *at = q;
            *lsn_at = lsn;
            return true;
        }
    }
    return false;
}

/* "<path>.damaged", or ".damaged.N" for the first N that is free. */
static void wal_aside_name(char *out, size_t cap, const char *path)
{
    snprintf(out, cap, "%s.damaged", path);
    for (int k = 2; qr_path_exists(out) && k < 1000; k++)
        snprintf(out, cap, "%s.damaged.%d", path, k);
}

/* SALVAGE: keep the log up to `off` of files[i] (mapped at p, n bytes) and
 * set aside the rest: the file is copied whole to its aside name, then cut
 * at `off` (p == NULL: the whole file is renamed aside instead); every later
 * file is renamed aside.  The directory is synced. */
static int wal_set_aside(const char *dir, const WalFile *files, size_t n_files, size_t i,
                         const uint8_t *p, uint64_t off, WalReplayStats *st, QrError *err)
{
    size_t cap = wal_path_cap(dir) + 16;
    char *path = qr_malloc(cap), *aside = qr_malloc(cap);
    int rc = QR_OK;
    if (!path || !aside) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory salvaging wal \"%s\"", dir);
        goto out;
    }
    uint64_t total = 0;
    for (size_t k = i; k < n_files && rc == QR_OK; k++) {
        wal_path(path, cap, dir, files[k].first_lsn);
        wal_aside_name(aside, cap, path);
        if (k == i && p) {
            rc = qr_file_write_atomic_mode(aside, p, files[k].bytes, true, 0600, err);
            if (rc == QR_OK)
                rc = wal_cut(path, off, err);
            total += files[k].bytes - off;
        } else {
            if (rename(path, aside) != 0)
                rc = wal_io_error(err, "set aside", path, errno);
            total += files[k].bytes;
        }
        if (rc == QR_OK)
            qr_log(QR_LOG_WARN, "wal salvage: kept \"%s\" as \"%s\"%s", path, aside,
                   k == i && p ? " and cut the file at the damage" : "");
    }
    if (rc == QR_OK)
        rc = qr_fsync_dir(dir, err);
    if (rc == QR_OK && st) {
        wal_path(path, cap, dir, files[i].first_lsn);
        st->salvaged_bytes = total;
        st->salvage_off = off;
        snprintf(st->salvage_file, sizeof st->salvage_file, "%s", path);
    }
out:
    qr_free(path);
    qr_free(aside);
    return rc;
}

/* The error for damage that is not a torn tail (the caller sets detail). */
static int wal_corrupt(QrError *err, const char *path, uint64_t off, const char *why)
{
    qr_error_set(err, QR_ECORRUPT, "corrupt wal file \"%s\" at offset %" PRIu64 ": %s", path,
                 off, why);
    qr_error_pos(err, (int64_t)off, -1, -1);
    qr_error_hint(err, "restore the table from a backup, or salvage it (quarry check "
                       "--salvage): the log is kept up to the damage and the rest is set "
                       "aside as \"<file>.damaged\"");
    return QR_ECORRUPT;
}

int wal_replay(const char *dir, uint64_t from_lsn, WalReplayMode mode, WalReplayFn cb, void *arg,
               WalReplayStats *stats, QrError *err)
{
    if (stats)
        memset(stats, 0, sizeof *stats);
    WalFile *files;
    size_t n;
    int rc = wal_list(dir, &files, &n, err);
    if (rc != QR_OK)
        return rc;
    char *path = qr_malloc(wal_path_cap(dir));
    if (!path) {
        qr_free(files);
        return qr_error_set(err, QR_ENOMEM, "out of memory replaying wal \"%s\"", dir);
    }
    bool salvage = mode == WAL_REPLAY_SALVAGE;
    uint64_t last = 0; /* highest intact lsn of the files scanned so far */
    size_t kept = n;   /* files left in the log (SALVAGE sets the others aside) */
    for (size_t i = 0; i < kept && rc == QR_OK; i++) {
        bool is_last = i + 1 == n;
        if (!is_last && files[i + 1].first_lsn <= from_lsn)
            continue; /* every record is below from_lsn */
        wal_path(path, wal_path_cap(dir), dir, files[i].first_lsn);
        if (last && files[i].first_lsn <= last) {
            if (salvage) {
                rc = wal_set_aside(dir, files, n, i, NULL, 0, stats, err);
                kept = i;
                break;
            }
            rc = qr_error_set(err, QR_ECORRUPT,
                              "corrupt wal file \"%s\": it starts at lsn %" PRIu64
                              " but the file before it reaches lsn %" PRIu64,
                              path, files[i].first_lsn, last);
            qr_error_hint(err, "restore the table from a backup, or salvage it (quarry check "
                               "--salvage)");
            break;
        }
        QrMap map;
        rc = qr_map_open(path, &map, err);
        if (rc != QR_OK)
            break;
        files[i].bytes = map.len; /* as mapped (the listing's size may be older) */
        WalDamage dmg;
        uint64_t end = 0;
        rc = wal_scan(map.data, map.len, path, files[i].first_lsn, from_lsn, cb, arg, &last,
                      &end, stats, &dmg, err);
        if (rc == QR_OK && dmg.header.code != QR_OK) {
            if (salvage && dmg.header.code == QR_ECORRUPT) {
                rc = wal_set_aside(dir, files, n, i, NULL, 0, stats, err);
                kept = i;
            } else {
                qr_error_copy(err, &dmg.header);
                rc = dmg.header.code;
            }
            qr_map_close(&map);
            break;
        }
        if (rc == QR_OK && !dmg.why && !is_last) {
            /* Records are numbered without gaps across files (a rotation
             * starts the next file at the next lsn), so an older file that
             * ends before its successor starts lost records: a truncation at
             * a record boundary, which no record checksum can see. */
            uint64_t next = files[i + 1].first_lsn;
            if ((end > from_lsn ? end : from_lsn) < next) {
                if (salvage) {
                    rc = wal_set_aside(dir, files, n, i + 1, NULL, 0, stats, err);
                    kept = i + 1;
                } else {
                    rc = qr_error_set(err, QR_ECORRUPT,
                                      "corrupt wal file \"%s\": records %" PRIu64 " to %" PRIu64
                                      " are missing (the next file starts at lsn %" PRIu64 ")",
                                      path, end, next - 1, next);
                    qr_error_detail(err, "an older wal file was truncated or emptied");
                    qr_error_hint(err, "restore the table from a backup, or salvage it "
                                       "(quarry check --salvage)");
                }
            }
        }
        size_t at = 0;
        uint64_t at_lsn = 0;
        bool torn = rc == QR_OK && dmg.why && is_last &&
                    !wal_find_intact(map.data, map.len, dmg.off, end, &at, &at_lsn);
        if (rc != QR_OK || !dmg.why) {
            /* intact to its end (or already failed) */
        } else if (torn) {
            if (mode != WAL_REPLAY_READ && (rc = wal_cut(path, dmg.off, err)) == QR_OK)
                qr_log(QR_LOG_WARN, "wal \"%s\": cut a torn tail of %" PRIu64
                                    " bytes at offset %" PRIu64 ": %s",
                       path, (uint64_t)map.len - dmg.off, dmg.off, dmg.why);
            if (rc == QR_OK && stats) {
                stats->torn_bytes = (uint64_t)map.len - dmg.off;
                stats->torn_off = dmg.off;
                snprintf(stats->torn_file, sizeof stats->torn_file, "%s", path);
                snprintf(stats->torn_why, sizeof stats->torn_why, "%s", dmg.why);
            }
        } else if (salvage) {
            rc = wal_set_aside(dir, files, n, i, map.data, dmg.off, stats, err);
            kept = i + 1;
        } else {
            rc = wal_corrupt(err, path, dmg.off, dmg.why);
            if (is_last)
                qr_error_detail(err, "an intact record (lsn %" PRIu64 ") follows at offset %zu, "
                                     "so this is not a torn write: cutting the log here "
                                     "would lose the changes after it", at_lsn, at);
            else
                qr_error_detail(err, "only the last wal file may have a torn tail");
        }
        qr_map_close(&map);
    }
    if (rc == QR_OK && stats) {
        stats->last_lsn = last;
        if (kept && files[kept - 1].first_lsn > 0 && files[kept - 1].first_lsn - 1 > last)
            stats->last_lsn = files[kept - 1].first_lsn - 1;
    }
    qr_free(path);
    qr_free(files);
    return rc;
}
