/*
 * backup.c — qr_backup: copy a data directory table by table, then prove the
 * copy opens and verifies, then give it its name.
 *
 * Layer: query/.  Calls index/table_backup.h, quarry.h and the base kit.
 *
 * Completion protocol (a backup killed at any point must not look whole):
 *   1. mkdir "<DEST>.incomplete" and create in it, before anything else,
 *      the marker file BACKUP_INCOMPLETE, held under flock(LOCK_EX) while
 *      the backup runs; qr_db_open refuses a directory that has it, so
 *      neither `quarry check` nor a restore (--data) accepts the copy.
 *   2. Copy the directory's own files and every table (table_backup_dir).
 *   3. Open the copy read-only with QrDbOpts.check: every table verified.
 *   4. Remove the marker, sync, rename "<DEST>.incomplete" to DEST (never
 *      replacing anything), sync DEST's parent directory.
 * A later backup to the same DEST finds a leftover "<DEST>.incomplete"
 * whose marker nobody holds locked and removes it.
 */
#include "query/backup.h"

#include "index/table_backup.h"
#include "query/quarry.h"
#include "store/mem.h"
#include "store/util.h"

#include "query/query_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_CAP 4096

/* Copy a small file keeping its permission bits (credential files such as
 * api_keys.json and pg_users.json are 0600 and must stay so). */
static int copy_small_file(const char *src, const char *dst, QrError *err)
{
    struct stat sb;
    if (stat(src, &sb) != 0)
        return qr_error_set(err, QR_EIO, "could not stat \"%s\": %s", src, strerror(errno));
    uint8_t *data;
    size_t len;
    int rc = qr_file_read_all(src, &data, &len, err);
    if (rc != QR_OK)
        return rc;
    rc = qr_file_write_atomic_mode(dst, data, len, true, sb.st_mode & 0777, err);
    qr_free(data);
    return rc;
}

/* Test hook (tests/e2e/test_backup.py only): with
 * QUARRY_TEST_BACKUP_KILL_AFTER_TABLES=N in the environment, the process
 * kills itself (SIGKILL, as kill -9 would) when N tables have been copied,
 * before the next one or, N being the number of tables, before the copy is
 * verified and renamed. */
static void backup_test_kill_point(size_t tables_done)
{
    const char *v = getenv("QUARRY_TEST_BACKUP_KILL_AFTER_TABLES");
    if (v && *v && strtoull(v, NULL, 10) == tables_done)
        raise(SIGKILL);
}

static int backup_tables(const char *src, const char *dest, QrBackupStats *st, QrError *err)
{
    char *a = qr_malloc(PATH_CAP), *b = qr_malloc(PATH_CAP);
    if (!a || !b) {
        qr_free(a);
        qr_free(b);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    int rc = QR_OK;
    /* the directory's own files: marker, configuration, users (not LOCK) */
    DIR *d = opendir(src);
    if (!d) {
        rc = qr_error_set(err, QR_EIO, "could not list \"%s\": %s", src, strerror(errno));
        goto out;
    }
    struct dirent *e;
    while (rc == QR_OK && (e = readdir(d))) {
        struct stat sb;
        snprintf(a, PATH_CAP, "%s/%s", src, e->d_name);
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "LOCK") ||
            !strcmp(e->d_name, QR_BACKUP_MARKER) || stat(a, &sb) != 0 ||
            !S_ISREG(sb.st_mode) || strstr(e->d_name, ".tmp"))
            continue;
        snprintf(b, PATH_CAP, "%s/%s", dest, e->d_name);
        rc = copy_small_file(a, b, err);
    }
    closedir(d);
    /* the tables */
    snprintf(a, PATH_CAP, "%s/tables", src);
    snprintf(b, PATH_CAP, "%s/tables", dest);
    if (rc == QR_OK)
        rc = qr_mkdir_p(b, err);
    if (rc != QR_OK || !(d = opendir(a)))
        goto out;
    char **names = NULL;
    size_t n = 0, cap = 0;
    while (rc == QR_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.') /* ".", "..", and ".drop-*" of a table being dropped */
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **v = qr_realloc(names, cap * sizeof *v);
            if (!v) {
                rc = qr_error_set(err, QR_ENOMEM, "out of memory");
                break;
            }
            names = v;
        }
        if (!(names[n] = qr_strdup(e->d_name)))
            rc = qr_error_set(err, QR_ENOMEM, "out of memory");
        else
            n++;
    }
    closedir(d);
    for (size_t i = 0; i < n && rc == QR_OK; i++) {
        backup_test_kill_point(i);
        snprintf(a, PATH_CAP, "%s/tables/%s", src, names[i]);
        snprintf(b, PATH_CAP, "%s/tables/%s", dest, names[i]);
        TableBackupStats ts;
        rc = table_backup_dir(a, b, &ts, err);
        if (rc == QR_OK) {
            /* the SQL metadata beside the table (declared types, defaults, keys,
             * index names: sql_w.h), which the table's own copy leaves out */
            size_t al = strlen(a), bl = strlen(b);
            snprintf(a + al, PATH_CAP - al, "/sql.json");
            snprintf(b + bl, PATH_CAP - bl, "/sql.json");
            if (qr_path_exists(a))
                rc = copy_small_file(a, b, err);
            a[al] = 0;
            b[bl] = 0;
        }
        if (rc == QR_ENOTFOUND && !qr_path_exists(a)) {
            /* dropped while we were copying: not part of the copy */
            qr_error_clear(err);
            rc = QR_OK;
            continue;
        }
        if (rc != QR_OK)
            break;
        st->tables++;
        st->segments += ts.segments;
        st->linked += ts.linked;
        st->copied += ts.copied;
        st->bytes += ts.bytes;
        st->wal_files += ts.wal_files;
        st->btrees_left_out += ts.btrees_left_out;
        if (ts.attempts > st->max_attempts)
            st->max_attempts = ts.attempts;
    }
    if (rc == QR_OK)
        backup_test_kill_point(n);
    for (size_t i = 0; i < n; i++)
        qr_free(names[i]);
    qr_free(names);
    /* the sequences, after the tables: each mark then covers every key the
     * copied tables hold, so a restored copy never hands one out again */
    snprintf(a, PATH_CAP, "%s/sequences", src);
    snprintf(b, PATH_CAP, "%s/sequences", dest);
    if (rc == QR_OK && (d = opendir(a)) != NULL) {
        rc = qr_mkdir_p(b, err);
        while (rc == QR_OK && (e = readdir(d))) {
            size_t len = strlen(e->d_name);
            if (e->d_name[0] == '.' || len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
                continue;
            snprintf(a, PATH_CAP, "%s/sequences/%s", src, e->d_name);
            snprintf(b, PATH_CAP, "%s/sequences/%s", dest, e->d_name);
            rc = copy_small_file(a, b, err);
            if (rc != QR_OK && !qr_path_exists(a)) { /* dropped meanwhile */
                qr_error_clear(err);
                rc = QR_OK;
            }
        }
        closedir(d);
        snprintf(b, PATH_CAP, "%s/sequences", dest);
        if (rc == QR_OK)
            rc = qr_fsync_dir(b, err);
    }
    snprintf(b, PATH_CAP, "%s/tables", dest);
    if (rc == QR_OK && (rc = qr_fsync_dir(b, err)) == QR_OK)
        rc = qr_fsync_dir(dest, err);
out:
    qr_free(a);
    qr_free(b);
    return rc;
}

/* Open the copy as a data directory, read-only and with QrDbOpts.check:
 * each table's WAL is replayed in memory and every checksum (segments,
 * deletes, B-trees, manifest) verified; nothing in the copy changes. */
static int verify_copy(const char *dest, QrBackupStats *st, QrBuf *report, QrError *err)
{
    QrDbOpts o;
    qr_db_opts_default(&o);
    o.background_merge = false;
    o.check = true;
    o.open_unfinished_backup = true;
    QrDb *db = NULL;
    int rc = qr_db_open(dest, &o, &db, err);
    if (rc != QR_OK)
        return rc;
    char **names = NULL;
    int n = 0;
    rc = qr_table_list(db, &names, &n, err);
    for (int i = 0; i < n && rc == QR_OK; i++) {
        QrTable *t;
        if ((rc = qr_table_get(db, names[i], &t, err)) != QR_OK)
            break;
        QrTableStats ts;
        qr_table_stats(t, &ts);
        st->docs += ts.docs;
        if (report)
            qr_buf_printf(report, "%s{\"table\":\"%s\",\"docs\":%llu,\"segments\":%llu}",
                          i ? "," : "", names[i], (unsigned long long)ts.docs,
                          (unsigned long long)ts.segments);
    }
    for (int i = 0; i < n; i++)
        qr_free(names[i]);
    qr_free(names);
    qr_db_close(db);
    return rc;
}

/* Make room for `work` ("<DEST>.incomplete"): a leftover of an interrupted
 * backup (its marker exists and nobody holds it locked) is removed;
 * QR_EBUSY while another backup holds it; QR_EEXISTS for anything else. */
static int clear_leftover(const char *work, QrError *err)
{
    if (!qr_path_exists(work))
        return QR_OK;
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/%s", work, QR_BACKUP_MARKER);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        qr_error_set(err, QR_EEXISTS, "backup work directory \"%s\" already exists", work);
        qr_error_hint(err, "it is not an interrupted backup (no %s file in it): move it away",
                      QR_BACKUP_MARKER);
        return QR_EEXISTS;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return qr_error_set(err, QR_EBUSY, "another backup is writing \"%s\"", work);
    }
    qr_log(QR_LOG_WARN, "backup: removing \"%s\", left by an interrupted backup", work);
    int rc = qr_remove_tree(work, err);
    close(fd);
    return rc;
}

/* Step 1 of the protocol: the work directory (*created once made) and its
 * locked marker (*marker_fd, -1 until open). */
static int begin_work(const char *src, const char *work, bool *created, int *marker_fd,
                      QrError *err)
{
    *created = false;
    *marker_fd = -1;
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s", work);
    char *slash = strrchr(path, '/');
    if (slash && slash != path) {
        *slash = '\0';
        int rc = qr_mkdir_p(path, err);
        if (rc != QR_OK)
            return rc;
    }
    if (mkdir(work, 0700) != 0)
        return qr_error_set(err, errno == EEXIST ? QR_EEXISTS : QR_EIO,
                            "could not create backup work directory \"%s\": %s", work,
                            strerror(errno));
    *created = true;
    snprintf(path, sizeof path, "%s/%s", work, QR_BACKUP_MARKER);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return qr_error_set(err, QR_EIO, "could not create \"%s\": %s", path, strerror(errno));
    *marker_fd = fd;
    char text[PATH_CAP + 96];
    int n = snprintf(text, sizeof text, "quarry backup of \"%s\" in progress (pid %ld)\n", src,
                     (long)getpid());
    if (flock(fd, LOCK_EX | LOCK_NB) != 0 || write(fd, text, (size_t)n) != n || fsync(fd) != 0)
        return qr_error_set(err, QR_EIO, "could not write \"%s\": %s", path, strerror(errno));
    return qr_fsync_dir(work, err);
}

/* Step 4: the copy is whole and verified; give it its name. */
static int finish_work(const char *work, const char *dest, QrError *err)
{
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/%s", work, QR_BACKUP_MARKER);
    if (unlink(path) != 0)
        return qr_error_set(err, QR_EIO, "could not remove \"%s\": %s", path, strerror(errno));
    int rc = qr_fsync_dir(work, err);
    if (rc != QR_OK)
        return rc;
    if (renameat2(AT_FDCWD, work, AT_FDCWD, dest, RENAME_NOREPLACE) != 0)
        return qr_error_set(err, errno == EEXIST ? QR_EEXISTS : QR_EIO,
                            "could not rename \"%s\" to \"%s\": %s", work, dest,
                            strerror(errno));
    snprintf(path, sizeof path, "%s", dest);
    char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(path, sizeof path, ".");
    else if (slash == path)
        path[1] = '\0';
    else
        *slash = '\0';
    return qr_fsync_dir(path, err);
}

int qr_backup(const char *data_dir, const char *dest, QrBackupStats *st, QrBuf *report,
              QrError *err)
{
    QrBackupStats local;
    if (!st)
        st = &local;
    memset(st, 0, sizeof *st);
    uint64_t t0 = qr_now_ns();
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s/QUARRY", data_dir);
    if (!qr_path_exists(path))
        return qr_error_set(err, QR_ENOTFOUND, "\"%s\" is not a Quarry data directory",
                            data_dir);
    snprintf(path, sizeof path, "%s/%s", data_dir, QR_BACKUP_MARKER);
    if (qr_path_exists(path))
        return qr_error_set(err, QR_ECORRUPT, "\"%s\" is an incomplete backup", data_dir);
    size_t dl = strlen(dest);
    while (dl > 1 && dest[dl - 1] == '/')
        dl--; /* "b/" names "b" */
    if (dl + sizeof ".incomplete" + sizeof QR_BACKUP_MARKER + 2 > PATH_CAP)
        return qr_error_set(err, QR_EINVAL, "backup destination name is too long");
    if (qr_path_exists(dest))
        return qr_error_set(err, QR_EEXISTS, "backup destination \"%s\" already exists", dest);
    char *work = qr_malloc(PATH_CAP);
    if (!work)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    snprintf(work, PATH_CAP, "%.*s.incomplete", (int)dl, dest);
    int rc = clear_leftover(work, err);
    if (rc != QR_OK) {
        qr_free(work);
        return rc;
    }
    int marker_fd;
    bool created;
    rc = begin_work(data_dir, work, &created, &marker_fd, err);
    if (rc == QR_OK)
        rc = backup_tables(data_dir, work, st, err);
    if (rc == QR_OK)
        rc = verify_copy(work, st, report, err);
    if (rc == QR_OK)
        rc = finish_work(work, dest, err);
    if (rc != QR_OK && created)
        (void)qr_remove_tree(work, NULL);
    if (marker_fd >= 0)
        close(marker_fd);
    qr_free(work);
    if (rc != QR_OK)
        return rc;
    st->took_ms = (double)(qr_now_ns() - t0) / 1e6;
    return QR_OK;
}
