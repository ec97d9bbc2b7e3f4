/*
 * table_backup.c — online copy of a table directory (see table_backup.h).
 *
 * Layer: index/.  Calls store/ (manifest, util).
 *
 * Why it is consistent without talking to the writer:
 *   1. Read MANIFEST as M.  Everything M names is immutable: segment files
 *      and "<seg>.del.<gen>" files are never rewritten, only deleted once a
 *      later manifest no longer names them.  Link (or copy) each; if one has
 *      vanished, a merge or a new deletes generation replaced it: start over.
 *      Each file taken is verified at once (every checksum), because a hard
 *      link is the source's own bytes: damage there must stop the backup,
 *      naming the source file, not ride along into a copy that looks good.
 *      A damaged B-tree side file (derived data) is left out instead; the
 *      copy's first writable open rebuilds it from its column.
 *   2. Copy the WAL files in lsn order.  Records with lsn >= M.checkpoint_lsn
 *      are all in the log (files are dropped only after a LATER checkpoint
 *      is durable), and replaying them on top of M's segments rebuilds every
 *      batch committed after M was written; recovery skips what the segments
 *      already hold, cuts a torn tail and discards an uncommitted batch.
 *      Then the segment files that WAL_SEGMENT records of the copied log
 *      name (bulk commits add their fsynced segments by id): a vanished one
 *      was merged away after a checkpoint past its record, which 3 sees.
 *   3. Read MANIFEST again: if the checkpoint moved, WAL files the copy
 *      needed may have been dropped between 1 and 2: start over.  (Commits
 *      alone do not restart the copy, so it converges under steady ingest.)
 *   4. Write M into the copy, fsync everything.
 */
#include "index/table_backup.h"

#include "index/btree.h"
#include "index/segment.h"
#include "index/table.h"
#include "store/manifest.h"
#include "store/mem.h"
#include "store/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BACKUP_ATTEMPTS 50
#define PATH_CAP 4096

/* Copy src to dst (created exclusively), fsync it.  ENOENT on src is
 * returned as QR_ENOTFOUND without an error message so callers can retry. */
static int copy_file(const char *src, const char *dst, uint64_t *bytes, QrError *err)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        if (errno == ENOENT)
            return QR_ENOTFOUND;
        return qr_error_set(err, QR_EIO, "could not open \"%s\": %s", src, strerror(errno));
    }
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0) {
        int e = errno;
        close(in);
        return qr_error_set(err, QR_EIO, "could not create \"%s\": %s", dst, strerror(e));
    }
    int rc = QR_OK;
    char *buf = qr_malloc(1 << 20);
    if (!buf)
        rc = qr_error_set(err, QR_ENOMEM, "out of memory copying \"%s\"", src);
    while (rc == QR_OK) {
        ssize_t n = read(in, buf, 1 << 20);
        if (n == 0)
            break;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = qr_error_set(err, QR_EIO, "could not read \"%s\": %s", src, strerror(errno));
            break;
        }
        for (ssize_t off = 0; off < n && rc == QR_OK;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                rc = qr_error_set(err, QR_EIO, "could not write \"%s\": %s", dst,
                                  strerror(errno));
            else
                off += w;
        }
        *bytes += (uint64_t)n;
    }
    if (rc == QR_OK && fsync(out) != 0)
        rc = qr_error_set(err, QR_EIO, "could not fsync \"%s\": %s", dst, strerror(errno));
    qr_free(buf);
    close(in);
    close(out);
    return rc;
}

/* Take an immutable file: a hard link when the file systems allow, else a
 * copy.  QR_ENOTFOUND (no message) when src has vanished. */
static int take_immutable(const char *src, const char *dst, TableBackupStats *st, QrError *err)
{
    struct stat sb;
    if (stat(src, &sb) != 0)
        return errno == ENOENT ? QR_ENOTFOUND
                               : qr_error_set(err, QR_EIO, "could not stat \"%s\": %s", src,
                                              strerror(errno));
    if (link(src, dst) == 0) {
        st->linked++;
        st->bytes += (uint64_t)sb.st_size;
        return QR_OK;
    }
    if (errno == ENOENT)
        return QR_ENOTFOUND;
    if (errno != EXDEV && errno != EPERM && errno != EMLINK)
        return qr_error_set(err, QR_EIO, "could not link \"%s\": %s", src, strerror(errno));
    int rc = copy_file(src, dst, &st->bytes, err);
    if (rc == QR_OK)
        st->copied++;
    return rc;
}

typedef enum { TAKEN_SEGMENT, TAKEN_DELETES, TAKEN_BTREE } TakenKind;

/* Every checksum of a file just taken into the copy (for a hard link, the
 * source's own bytes). */
static int verify_taken(const char *dst, TakenKind kind, uint64_t seg_id, QrError *err)
{
    int rc;
    if (kind == TAKEN_SEGMENT) {
        Segment *s;
        if ((rc = seg_open(dst, seg_id, &s, err)) == QR_OK) {
            rc = seg_verify(s, err);
            seg_unref(s);
        }
    } else if (kind == TAKEN_DELETES) {
        roaring_bitmap_t *bm;
        if ((rc = deletes_read(dst, &bm, err)) == QR_OK)
            roaring_bitmap_free(bm);
    } else {
        BTree *bt;
        if ((rc = bt_open(dst, dst, &bt, err)) == QR_OK)
            bt_close(bt);
    }
    return rc;
}

/* Take an immutable file and verify it.  Damage in a segment or deletes
 * file is QR_ECORRUPT naming the source; a damaged B-tree side file is
 * removed from the copy and counted (the copy rebuilds it).  QR_ENOTFOUND
 * (no message) when src has vanished. */
static int take_verified(const char *src, const char *dst, TakenKind kind, uint64_t seg_id,
                         TableBackupStats *st, QrError *err)
{
    int rc = take_immutable(src, dst, st, err);
    if (rc != QR_OK)
        return rc;
    QrError e;
    qr_error_clear(&e);
    rc = verify_taken(dst, kind, seg_id, &e);
    if (rc == QR_ECORRUPT && kind == TAKEN_BTREE) {
        qr_log(QR_LOG_WARN, "backup: left out the damaged B-tree side file \"%s\" (%s); the "
                            "copy rebuilds it from its column",
               src, e.message);
        st->btrees_left_out++;
        return unlink(dst) == 0 ? QR_OK
                                : qr_error_set(err, QR_EIO, "could not remove \"%s\": %s", dst,
                                               strerror(errno));
    }
    if (rc == QR_ECORRUPT) {
        qr_error_set(err, QR_ECORRUPT, "backup source file \"%s\" is damaged", src);
        qr_error_detail(err, "%s", e.message);
        qr_error_hint(err, "stop the server, run quarry check on the source, then restore the "
                           "table or salvage it (quarry check --salvage); no backup was taken");
    } else if (rc != QR_OK) {
        qr_error_copy(err, &e);
    }
    return rc;
}

typedef struct NameList {
    char **v;
    size_t n, cap;
} NameList;

static void names_free(NameList *l)
{
    for (size_t i = 0; i < l->n; i++)
        qr_free(l->v[i]);
    qr_free(l->v);
    memset(l, 0, sizeof *l);
}

static int names_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names in dir accepted by keep(name, arg), sorted.  A missing dir is empty. */
static int list_names(const char *dir, bool (*keep)(const char *, void *), void *arg,
                      NameList *out, QrError *err)
{
    memset(out, 0, sizeof *out);
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? QR_OK
                               : qr_error_set(err, QR_EIO, "could not list \"%s\": %s", dir,
                                              strerror(errno));
    struct dirent *e;
    int rc = QR_OK;
    while (rc == QR_OK && (e = readdir(d))) {
        if (!keep(e->d_name, arg))
            continue;
        if (out->n == out->cap) {
            size_t cap = out->cap ? out->cap * 2 : 16;
            char **v = qr_realloc(out->v, cap * sizeof *v);
            if (!v) {
                rc = qr_error_set(err, QR_ENOMEM, "out of memory listing \"%s\"", dir);
                break;
            }
            out->v = v;
            out->cap = cap;
        }
        if (!(out->v[out->n] = qr_strdup(e->d_name)))
            rc = qr_error_set(err, QR_ENOMEM, "out of memory listing \"%s\"", dir);
        else
            out->n++;
    }
    closedir(d);
    if (rc != QR_OK)
        names_free(out);
    else if (out->n)
        qsort(out->v, out->n, sizeof *out->v, names_cmp);
    return rc;
}

static bool is_wal_name(const char *name, void *arg)
{
    (void)arg;
    size_t n = strlen(name);
    return n == 24 && !strncmp(name, "wal-", 4) && !strcmp(name + 20, ".log");
}

/* "seg-<16 hex>.f<k>.qbt" of a segment the manifest names. */
static bool is_btree_of(const char *name, void *arg)
{
    const Manifest *m = arg;
    unsigned long long id;
    int field, end = 0;
    if (sscanf(name, "seg-%16llx.f%d.qbt%n", &id, &field, &end) != 2 || name[end] != '\0')
        return false;
    for (uint32_t i = 0; i < m->n_segs; i++)
        if (m->segs[i].id == id)
            return true;
    return false;
}

/* One attempt.  QR_ENOTFOUND (no message) means "raced: start over". */
static int backup_once(const char *src, const char *dst, TableBackupStats *st, QrError *err)
{
    Manifest m;
    memset(&m, 0, sizeof m);
    int rc = manifest_read(src, &m, err);
    if (rc != QR_OK)
        return rc == QR_ENOTFOUND ? qr_error_set(err, QR_ENOTFOUND, "\"%s\" has no MANIFEST: "
                                                 "not a table directory", src)
                                  : rc;
    if ((rc = qr_mkdir_p(dst, err)) != QR_OK)
        goto done;
    char *a = qr_malloc(PATH_CAP), *b = qr_malloc(PATH_CAP);
    if (!a || !b) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory");
        goto paths;
    }
    /* 1. the segments and deletes files M names */
    for (uint32_t i = 0; i < m.n_segs && rc == QR_OK; i++) {
        const ManifestSeg *s = &m.segs[i];
        snprintf(a, PATH_CAP, "%s/seg-%016llx.qseg", src, (unsigned long long)s->id);
        snprintf(b, PATH_CAP, "%s/seg-%016llx.qseg", dst, (unsigned long long)s->id);
        rc = take_verified(a, b, TAKEN_SEGMENT, s->id, st, err);
        if (rc == QR_OK && s->del_gen) {
            snprintf(a, PATH_CAP, "%s/seg-%016llx.del.%llu", src, (unsigned long long)s->id,
                     (unsigned long long)s->del_gen);
            snprintf(b, PATH_CAP, "%s/seg-%016llx.del.%llu", dst, (unsigned long long)s->id,
                     (unsigned long long)s->del_gen);
            rc = take_verified(a, b, TAKEN_DELETES, s->id, st, err);
        }
        st->segments += rc == QR_OK;
    }
    /* B-tree side files are derived data (rebuilt at open when missing):
     * take what is there, ignore what vanished */
    NameList bt;
    if (rc == QR_OK && (rc = list_names(src, is_btree_of, &m, &bt, err)) == QR_OK) {
        for (size_t i = 0; i < bt.n && rc == QR_OK; i++) {
            snprintf(a, PATH_CAP, "%s/%s", src, bt.v[i]);
            snprintf(b, PATH_CAP, "%s/%s", dst, bt.v[i]);
            rc = take_verified(a, b, TAKEN_BTREE, 0, st, err);
            if (rc == QR_ENOTFOUND)
                rc = QR_OK;
        }
        names_free(&bt);
    }
    /* 2. the WAL, oldest first */
    NameList wal;
    snprintf(a, PATH_CAP, "%s/wal", src);
    if (rc == QR_OK && (rc = list_names(a, is_wal_name, NULL, &wal, err)) == QR_OK) {
        snprintf(b, PATH_CAP, "%s/wal", dst);
        rc = qr_mkdir_p(b, err);
        for (size_t i = 0; i < wal.n && rc == QR_OK; i++) {
            snprintf(a, PATH_CAP, "%s/wal/%s", src, wal.v[i]);
            snprintf(b, PATH_CAP, "%s/wal/%s", dst, wal.v[i]);
            rc = copy_file(a, b, &st->bytes, err);
            if (rc == QR_OK) {
                st->copied++;
                st->wal_files++;
            }
        }
        names_free(&wal);
        snprintf(b, PATH_CAP, "%s/wal", dst);
        if (rc == QR_OK)
            rc = qr_fsync_dir(b, err);
    }
    /* 2b. segment files that bulk commits in the copied WAL added by
     * reference (WAL_SEGMENT): fsynced before their record, immutable, and
     * deleted only after a checkpoint past the record (caught by 3) */
    if (rc == QR_OK) {
        uint64_t *ids = NULL;
        size_t n_ids = 0;
        snprintf(b, PATH_CAP, "%s/wal", dst);
        rc = table_wal_segments(b, m.checkpoint_lsn, &ids, &n_ids, NULL, err);
        for (size_t i = 0; i < n_ids && rc == QR_OK; i++) {
            bool named = false;
            for (uint32_t k = 0; k < m.n_segs; k++)
                named |= m.segs[k].id == ids[i];
            if (named)
                continue;
            snprintf(a, PATH_CAP, "%s/seg-%016llx.qseg", src, (unsigned long long)ids[i]);
            snprintf(b, PATH_CAP, "%s/seg-%016llx.qseg", dst, (unsigned long long)ids[i]);
            rc = take_verified(a, b, TAKEN_SEGMENT, ids[i], st, err);
            st->segments += rc == QR_OK;
        }
        qr_free(ids);
    }
    /* 3. did a checkpoint drop WAL files the copy needs? */
    if (rc == QR_OK) {
        Manifest again;
        memset(&again, 0, sizeof again);
        QrError e2;
        qr_error_clear(&e2);
        if (manifest_read(src, &again, &e2) != QR_OK ||
            again.checkpoint_lsn != m.checkpoint_lsn)
            rc = QR_ENOTFOUND;
        manifest_free(&again);
    }
    /* 4. the manifest the copy was built from */
    if (rc == QR_OK && (rc = manifest_write(dst, &m, true, err)) == QR_OK)
        st->checkpoint_lsn = m.checkpoint_lsn;
paths:
    qr_free(a);
    qr_free(b);
done:
    manifest_free(&m);
    return rc;
}

int table_backup_dir(const char *src_dir, const char *dst_dir, TableBackupStats *st,
                     QrError *err)
{
    TableBackupStats local;
    if (!st)
        st = &local;
    memset(st, 0, sizeof *st);
    if (qr_path_exists(dst_dir))
        return qr_error_set(err, QR_EEXISTS, "backup destination \"%s\" already exists",
                            dst_dir);
    for (uint32_t attempt = 1; attempt <= BACKUP_ATTEMPTS; attempt++) {
        memset(st, 0, sizeof *st);
        st->attempts = attempt;
        QrError e;
        qr_error_clear(&e);
        int rc = backup_once(src_dir, dst_dir, st, &e);
        if (rc != QR_ENOTFOUND || e.code != QR_OK) {
            if (rc != QR_OK) {
                (void)qr_remove_tree(dst_dir, NULL);
                qr_error_copy(err, &e);
            }
            return rc;
        }
        /* raced a merge or a checkpoint: clear the partial copy, go again */
        int rr = qr_remove_tree(dst_dir, err);
        if (rr != QR_OK)
            return rr;
        usleep(1000u * attempt);
    }
    return qr_error_set(err, QR_EBUSY,
                        "table \"%s\" changed under %d backup attempts in a row", src_dir,
                        BACKUP_ATTEMPTS);
}
