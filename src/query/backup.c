/*
 * backup.c — qr_backup: copy a data directory table by table, then prove the
 * copy opens and verifies.
 *
 * Layer: query/.
 */
#include "query/backup.h"

#include "index/table_backup.h"
#include "query/quarry.h"
#include "store/mem.h"
#include "store/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
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
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "LOCK") || stat(a, &sb) != 0 ||
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
        snprintf(a, PATH_CAP, "%s/tables/%s", src, names[i]);
        snprintf(b, PATH_CAP, "%s/tables/%s", dest, names[i]);
        TableBackupStats ts;
        rc = table_backup_dir(a, b, &ts, err);
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
        if (ts.attempts > st->max_attempts)
            st->max_attempts = ts.attempts;
    }
    for (size_t i = 0; i < n; i++)
        qr_free(names[i]);
    qr_free(names);
    snprintf(b, PATH_CAP, "%s/tables", dest);
    if (rc == QR_OK && (rc = qr_fsync_dir(b, err)) == QR_OK)
        rc = qr_fsync_dir(dest, err);
out:
    qr_free(a);
    qr_free(b);
    return rc;
}

/* Open the copy as a data directory: each table's WAL is replayed and every
 * segment's checksums are verified as it opens. */
static int verify_copy(const char *dest, QrBackupStats *st, QrBuf *report, QrError *err)
{
    QrDbOpts o;
    qr_db_opts_default(&o);
    o.background_merge = false;
    QrDb *db = NULL;
    int rc = qr_db_open(dest, &o, &db, err);
    if (rc != QR_OK)
        return rc;
    char **names = NULL;
    int n = 0;
    rc = qr_table_list(db, &names, &n, err);
    for (int i = 0; i < n && rc == QR_OK; i++) {
        QrTable *t;
        /* opening a table checks every segment's checksums (table.c) */
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
    if (qr_path_exists(dest))
        return qr_error_set(err, QR_EEXISTS, "backup destination \"%s\" already exists", dest);
    int rc = qr_mkdir_p(dest, err);
    if (rc == QR_OK)
        rc = backup_tables(data_dir, dest, st, err);
    if (rc == QR_OK)
        rc = verify_copy(dest, st, report, err);
    if (rc != QR_OK) {
        (void)qr_remove_tree(dest, NULL);
        return rc;
    }
    st->took_ms = (double)(qr_now_ns() - t0) / 1e6;
    return QR_OK;
}
