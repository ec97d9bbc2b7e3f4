/*
 * util.c — log, clock, files, mmap.
 * Layer: store/ (base kit).
 */
#include "store/util.h"
#include "store/mem.h"

#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static QrLogLevel log_level = QR_LOG_INFO;
static int log_level_env_read;

void qr_log_set_level(QrLogLevel lvl)
{
    log_level = lvl;
    log_level_env_read = 1;
}

void qr_log(QrLogLevel lvl, const char *fmt, ...)
{
    if (!log_level_env_read) {
        const char *e = getenv("QUARRY_LOG");
        if (e) {
            if (!strcmp(e, "debug")) log_level = QR_LOG_DEBUG;
            else if (!strcmp(e, "warn")) log_level = QR_LOG_WARN;
            else if (!strcmp(e, "error")) log_level = QR_LOG_ERROR;
        }
        log_level_env_read = 1;
    }
    if (lvl < log_level)
        return;
    static const char *names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    char line[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, names[lvl]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t l = strlen(line);
    line[l++] = '\n';
    /* one write call so concurrent lines do not interleave */
    ssize_t w = write(2, line, l);
    (void)w;
}

/* the test clock of qr_clock_set_source (NULL: CLOCK_MONOTONIC) */
static _Atomic(uint64_t (*)(void)) clock_source;

void qr_clock_set_source(uint64_t (*now_ns)(void))
{
    atomic_store(&clock_source, now_ns);
}

uint64_t qr_now_ns(void)
{
    uint64_t (*src)(void) = atomic_load_explicit(&clock_source, memory_order_relaxed);
    if (src)
        return src();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int64_t qr_wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static _Atomic int64_t io_fail_after = -1; /* <0: never fail */
static _Atomic int io_fail_errno = 0;
static _Atomic int64_t io_writes = 0;

void qr_io_fail_after(int64_t n, int e)
{
    atomic_store(&io_fail_errno, e);
    atomic_store(&io_writes, 0);
    atomic_store(&io_fail_after, n);
}

int64_t qr_io_write_count(void) { return atomic_load(&io_writes); }

int qr_io_fault(void)
{
    atomic_fetch_add_explicit(&io_writes, 1, memory_order_relaxed);
    int64_t f = atomic_load_explicit(&io_fail_after, memory_order_relaxed);
    if (f < 0)
        return 0;
    if (f == 0)
        return atomic_load(&io_fail_errno);
    atomic_fetch_sub_explicit(&io_fail_after, 1, memory_order_relaxed);
    return 0;
}

int qr_cpu_count(void)
{
    int n = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        n = CPU_COUNT(&set);
    if (n <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
    if (f) {
        long long quota, period;
        /* "max 100000" (no quota) does not scan as two numbers */
        if (fscanf(f, "%lld %lld", &quota, &period) == 2 && quota > 0 && period > 0) {
            long long q = (quota + period - 1) / period;
            if (q < n)
                n = (int)q;
        }
        fclose(f);
    }
    return n < 1 ? 1 : n;
}

static QrSyncHook sync_hook;
static void *sync_hook_arg;

void qr_io_sync_hook_set(QrSyncHook hook, void *arg)
{
    sync_hook_arg = arg;
    sync_hook = hook;
}

bool qr_io_sync_hooked(void) { return sync_hook != NULL; }

void qr_io_sync_notify(const char *path, uint64_t bytes, bool done)
{
    if (sync_hook)
        sync_hook(sync_hook_arg, path, bytes, done);
}

static int io_error(QrError *err, const char *what, const char *path)
{
    int e = errno;
    qr_error_set(err, QR_EIO, "could not %s file \"%s\": %s", what, path, strerror(e));
    if (e == ENOSPC || e == EDQUOT) {
        qr_error_hint(err, "free disk space and retry; nothing was acknowledged");
        qr_error_set_sqlstate(err, "53100"); /* disk_full */
    }
    return QR_EIO;
}

int qr_fsync_dir(const char *dir, QrError *err)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return io_error(err, "open directory", dir);
    if (fsync(fd) != 0 && errno != EINVAL) {
        close(fd);
        return io_error(err, "fsync directory", dir);
    }
    close(fd);
    return QR_OK;
}

int qr_file_write_atomic(const char *path, const void *data, size_t len, bool do_fsync,
                         QrError *err)
{
    return qr_file_write_atomic_mode(path, data, len, do_fsync, 0600, err);
}

int qr_file_write_atomic_mode(const char *path, const void *data, size_t len, bool do_fsync,
                              unsigned mode, QrError *err)
{
    size_t pl = strlen(path);
    char *tmp = qr_malloc(pl + 8);
    if (!tmp)
        return qr_error_set(err, QR_ENOMEM, "out of memory writing \"%s\"", path);
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp", 5);
    /* created with `mode` (no umask dance: that is process-wide), and a
     * leftover temporary file gets the mode too before any byte lands */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
    if (fd < 0 || fchmod(fd, (mode_t)mode) != 0) {
        int rc = io_error(err, "create", tmp);
        if (fd >= 0)
            close(fd);
        qr_free(tmp);
        return rc;
    }
    const uint8_t *p = data;
    size_t left = len;
    while (left) {
        int fault = qr_io_fault();
        if (fault)
            errno = fault;
        ssize_t w = fault ? -1 : write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int rc = io_error(err, "write", tmp);
            close(fd);
            unlink(tmp);
            qr_free(tmp);
            return rc;
        }
        p += w;
        left -= (size_t)w;
    }
    if (do_fsync && fsync(fd) != 0) {
        int rc = io_error(err, "fsync", tmp);
        close(fd);
        unlink(tmp);
        qr_free(tmp);
        return rc;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        int rc = io_error(err, "rename", tmp);
        unlink(tmp);
        qr_free(tmp);
        return rc;
    }
    qr_free(tmp);
    if (do_fsync) {
        char *dir = qr_strdup(path);
        if (!dir)
            return qr_error_set(err, QR_ENOMEM, "out of memory");
        char *slash = strrchr(dir, '/');
        int rc = QR_OK;
        if (slash) {
            *slash = '\0';
            rc = qr_fsync_dir(slash == dir ? "/" : dir, err);
        } else {
            rc = qr_fsync_dir(".", err);
        }
        qr_free(dir);
        return rc;
    }
    return QR_OK;
}

int qr_file_read_all(const char *path, uint8_t **out, size_t *len, QrError *err)
{
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return qr_error_set(err, QR_ENOTFOUND, "file \"%s\" does not exist", path);
        return io_error(err, "open", path);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return io_error(err, "stat", path);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = qr_malloc(n + 1);
    if (!buf) {
        close(fd);
        return qr_error_set(err, QR_ENOMEM, "out of memory reading \"%s\"", path);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int rc = r < 0 ? io_error(err, "read", path)
                           : qr_error_set(err, QR_EIO, "file \"%s\" shrank while reading", path);
            close(fd);
            qr_free(buf);
            return rc;
        }
        got += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return QR_OK;
}

int qr_mkdir_p(const char *path, QrError *err)
{
    char *p = qr_strdup(path);
    if (!p)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    for (char *s = p + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0700) != 0 && errno != EEXIST) {
                int rc = io_error(err, "create directory", p);
                qr_free(p);
                return rc;
            }
            *s = '/';
        }
    }
    if (mkdir(p, 0700) != 0 && errno != EEXIST) {
        int rc = io_error(err, "create directory", p);
        qr_free(p);
        return rc;
    }
    qr_free(p);
    return QR_OK;
}

bool qr_path_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int qr_remove_tree(const char *path, QrError *err)
{
    DIR *d = opendir(path);
    if (!d) {
        if (errno == ENOENT)
            return QR_OK;
        if (errno == ENOTDIR)
            return unlink(path) == 0 ? QR_OK : io_error(err, "remove", path);
        return io_error(err, "open directory", path);
    }
    struct dirent *e;
    int rc = QR_OK;
    while ((e = readdir(d)) && rc == QR_OK) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        size_t n = strlen(path) + strlen(e->d_name) + 2;
        char *child = qr_malloc(n);
        if (!child) {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory");
            break;
        }
        snprintf(child, n, "%s/%s", path, e->d_name);
        struct stat st;
        if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode))
            rc = qr_remove_tree(child, err);
        else if (unlink(child) != 0)
            rc = io_error(err, "remove", child);
        qr_free(child);
    }
    closedir(d);
    if (rc == QR_OK && rmdir(path) != 0)
        rc = io_error(err, "remove directory", path);
    return rc;
}

int qr_map_open(const char *path, QrMap *map, QrError *err)
{
    map->data = NULL;
    map->len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return qr_error_set(err, QR_ENOTFOUND, "file \"%s\" does not exist", path);
        return io_error(err, "open", path);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return io_error(err, "stat", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return QR_OK;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return io_error(err, "map", path);
    map->data = p;
    map->len = (size_t)st.st_size;
    return QR_OK;
}

void qr_map_close(QrMap *map)
{
    if (map->data)
        munmap((void *)map->data, map->len);
    map->data = NULL;
    map->len = 0;
}
