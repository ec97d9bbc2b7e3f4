/*
 * quarry.c — data directory and table handles behind quarry.h.
 *
 * Layer: query/.  Calls index/table.h, index/segment.h and the base kit.
 */
#include "query/quarry.h"
#include "query/query_int.h"
#include "query/synonyms.h"
#include "store/mem.h"
#include "store/util.h"

#include <cJSON.h>
#include <ctype.h>
#include <stdatomic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DB_MARKER "QUARRY"
#define DB_FORMAT 1

struct QrDb {
    char *dir;             /* owns */
    int lock_fd;           /* flock(LOCK_EX) on <data>/LOCK: one process per directory */
    QrDbOpts opts;
    pthread_mutex_t lock;  /* guards tables[] */
    QrTable **tables;      /* owns */
    int n_tables, cap_tables;
    _Atomic uint64_t ddl_gen; /* bumped by every change of tables, schemas, indexes */
};

uint64_t qr_db_ddl_generation(QrDb *db) { return atomic_load(&db->ddl_gen); }
void qr_db_ddl_bump(QrDb *db) { atomic_fetch_add(&db->ddl_gen, 1); }
const QrStatsSource *quarry_stats_source(const QrDb *db) { return db->opts.stats_source; }

void qr_db_opts_default(QrDbOpts *o)
{
    memset(o, 0, sizeof *o);
    o->fsync = QR_FSYNC_COMMIT;
    o->fsync_batch_ms = 10;
    o->background_merge = true;
}

/* A writable open keeps the data directory private to its owner, also when
 * an older version created it 0755 (the files in it were 0644 then). */
static void db_restrict_mode(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0 || (st.st_mode & 077) == 0)
        return;
    if (chmod(dir, st.st_mode & 0700) == 0)
        qr_log(QR_LOG_INFO, "data directory \"%s\": mode %o restricted to %o", dir,
               (unsigned)(st.st_mode & 0777), (unsigned)(st.st_mode & 0700));
    else
        qr_log(QR_LOG_WARN, "data directory \"%s\" is readable by other users (mode %o) and "
                            "could not be restricted: %s",
               dir, (unsigned)(st.st_mode & 0777), strerror(errno));
}

/* A writable open: the spares of rebuilds a crash or a stop interrupted
 * (their transactions never committed, or their journals were applied). */
static int spares_clear(QrDb *db, QrError *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/spares", db->dir);
    if (!qr_path_exists(path))
        return QR_OK;
    int rc = qr_remove_tree(path, err);
    if (rc == QR_OK)
        rc = qr_fsync_dir(db->dir, err);
    return rc;
}

int qr_db_open(const char *dir, const QrDbOpts *opts, QrDb **out, QrError *err)
{
    *out = NULL;
    QrDbOpts o;
    if (opts)
        o = *opts;
    else
        qr_db_opts_default(&o);
    if (o.check)
        o.read_only = true;
    char path[4096];
    snprintf(path, sizeof path, "%s/" DB_MARKER, dir);
    if (o.check && !qr_path_exists(path))
        return qr_error_set(err, QR_ENOTFOUND, "\"%s\" is not a Quarry data directory", dir);
    snprintf(path, sizeof path, "%s/" QR_BACKUP_MARKER, dir);
    if (!o.open_unfinished_backup && qr_path_exists(path)) {
        qr_error_set(err, QR_ECORRUPT, "data directory \"%s\" is an incomplete backup", dir);
        qr_error_detail(err, "the backup that wrote it stopped before it had copied and "
                             "verified every table (it has the file %s)", QR_BACKUP_MARKER);
        qr_error_hint(err, "take the backup again: quarry backup removes an interrupted copy "
                           "of the same destination");
        return QR_ECORRUPT;
    }
    int rc = qr_mkdir_p(dir, err);
    if (rc != QR_OK)
        return rc;
    if (!o.read_only)
        db_restrict_mode(dir);
    snprintf(path, sizeof path, "%s/tables", dir);
    if ((rc = qr_mkdir_p(path, err)) != QR_OK)
        return rc;
    snprintf(path, sizeof path, "%s/" DB_MARKER, dir);
    if (!qr_path_exists(path)) {
        char txt[64];
        int n = snprintf(txt, sizeof txt, "quarry data directory format %d\n", DB_FORMAT);
        if ((rc = qr_file_write_atomic(path, txt, (size_t)n, true, err)) != QR_OK)
            return rc;
    } else {
        uint8_t *d;
        size_t n;
        if ((rc = qr_file_read_all(path, &d, &n, err)) != QR_OK)
            return rc;
        int fmt = 0;
        bool ok = sscanf((char *)d, "quarry data directory format %d", &fmt) == 1;
        qr_free(d);
        if (!ok)
            return qr_error_set(err, QR_ECORRUPT, "\"%s\" is not a Quarry data directory marker",
                                path);
        if (fmt > DB_FORMAT)
            return qr_error_set(err, QR_EUNSUPPORTED,
                                "data directory \"%s\" has format %d, this build reads up to %d",
                                dir, fmt, DB_FORMAT);
    }
    snprintf(path, sizeof path, "%s/LOCK", dir);
    int lfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lfd < 0)
        return qr_error_set(err, QR_EIO, "could not open lock file \"%s\"", path);
    if (flock(lfd, LOCK_EX | LOCK_NB) != 0) {
        close(lfd);
        qr_error_set(err, QR_EBUSY, "data directory \"%s\" is in use by another process", dir);
        qr_error_hint(err, "stop the other quarry process (quarry serve?) or use another --data "
                           "directory");
        return QR_EBUSY;
    }
    QrDb *db = qr_calloc(1, sizeof *db);
    if (!db || !(db->dir = qr_strdup(dir))) {
        close(lfd);
        qr_free(db);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    db->lock_fd = lfd;
    db->opts = o;
    pthread_mutex_init(&db->lock, NULL);
    int n_journals;
    if (!o.read_only && (rc = txnj_recover(db, &n_journals, err)) != QR_OK) {
        qr_db_close(db); /* a multi-table commit a crash cut short could not be completed */
        return rc;
    }
    if (!o.read_only && (rc = spares_clear(db, err)) != QR_OK) {
        qr_db_close(db);
        return rc;
    }
    *out = db;
    return QR_OK;
}

static void table_handle_free(QrTable *t)
{
    if (!t)
        return;
    table_close(t->table);
    for (int i = 0; i < t->n_an_free; i++)
        qsearch_analyzers_free(t->an_free[i]);
    qr_free(t->an_free);
    pthread_mutex_destroy(&t->an_lock);
    synmap_unref(t->syn);
    pthread_mutex_destroy(&t->syn_lock);
    qr_free(t);
}

void qr_db_close(QrDb *db)
{
    if (!db)
        return;
    for (int i = 0; i < db->n_tables; i++)
        table_handle_free(db->tables[i]);
    qr_free(db->tables);
    pthread_mutex_destroy(&db->lock);
    close(db->lock_fd); /* releases the flock */
    qr_free(db->dir);
    qr_free(db);
}

const char *qr_db_dir(const QrDb *db) { return db->dir; }

static void table_opts_from_db(const QrDb *db, TableOpts *o)
{
    table_opts_default(o);
    o->fsync = db->opts.fsync;
    o->fsync_batch_ms = db->opts.fsync_batch_ms;
    o->background_merge = db->opts.background_merge && !db->opts.read_only;
    o->salvage = db->opts.salvage;
    o->read_only = db->opts.read_only;
    o->check = db->opts.check;
}

static int check_name(const char *name, QrError *err)
{
    if (!qr_name_valid(name)) {
        qr_error_set(err, QR_EINVAL, "invalid table name \"%.80s\"", name);
        qr_error_hint(err, "table names are letters, digits and underscores, starting with a "
                           "letter, at most %d bytes",
                      QR_NAME_MAX);
        return QR_EINVAL;
    }
    return QR_OK;
}

static QrTable *find_open(QrDb *db, const char *name)
{
    for (int i = 0; i < db->n_tables; i++)
        if (!strcmp(db->tables[i]->name, name))
            return db->tables[i];
    return NULL;
}

static void handle_init(QrTable *t, QrDb *db, const char *name, Table *tab)
{
    snprintf(t->name, sizeof t->name, "%s", name);
    t->db = db;
    t->table = tab;
    pthread_mutex_init(&t->an_lock, NULL);
    pthread_mutex_init(&t->syn_lock, NULL);
}

static int add_handle(QrDb *db, const char *name, Table *tab, QrTable **out, QrError *err)
{
    if (db->n_tables == db->cap_tables) {
        int nc = db->cap_tables ? db->cap_tables * 2 : 8;
        QrTable **nt = qr_realloc(db->tables, (size_t)nc * sizeof *nt);
        if (!nt) {
            table_close(tab);
            return qr_error_set(err, QR_ENOMEM, "out of memory");
        }
        db->tables = nt;
        db->cap_tables = nc;
    }
    QrTable *t = qr_calloc(1, sizeof *t);
    if (!t) {
        table_close(tab);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    handle_init(t, db, name, tab);
    db->tables[db->n_tables++] = t;
    *out = t;
    return QR_OK;
}

int qr_table_create(QrDb *db, const char *name, const QrSchema *schema, QrTable **out,
                    QrError *err)
{
    int rc = check_name(name, err);
    if (rc != QR_OK)
        return rc;
    if (db->opts.read_only)
        return qr_error_set(err, QR_EPERM, "data directory is open read-only");
    char path[4096];
    snprintf(path, sizeof path, "%s/tables/%s", db->dir, name);
    pthread_mutex_lock(&db->lock);
    if (find_open(db, name) || qr_path_exists(path)) {
        pthread_mutex_unlock(&db->lock);
        return qr_error_set(err, QR_EEXISTS, "table \"%s\" already exists", name);
    }
    for (int f = 0; f < schema->n_fields; f++)
        if (schema->fields[f].type == QR_FT_TEXT && schema->fields[f].indexed) {
            /* fail early on an unknown stemming language */
            QsAnalyzers *probe = NULL;
            rc = qsearch_analyzers_new(schema, &probe, err);
            qsearch_analyzers_free(probe);
            if (rc != QR_OK) {
                pthread_mutex_unlock(&db->lock);
                return rc;
            }
            break;
        }
    TableOpts o;
    table_opts_from_db(db, &o);
    Table *tab;
    /* made whole under a hidden name, then renamed into place, so a crash
     * mid-create never leaves a table directory without its MANIFEST (a
     * leftover ".new-" directory is not a table and is made again) */
    char tmp[4200], tables[4096];
    snprintf(tmp, sizeof tmp, "%s/tables/.new-%s", db->dir, name);
    snprintf(tables, sizeof tables, "%s/tables", db->dir);
    rc = qr_path_exists(tmp) ? qr_remove_tree(tmp, err) : QR_OK;
    if (rc == QR_OK && (rc = table_create(tmp, schema, &o, &tab, err)) == QR_OK) {
        table_close(tab);
        if (rename(tmp, path) != 0)
            rc = qr_error_set(err, QR_EIO, "could not create table \"%s\": renaming its directory "
                                           "failed", name);
        else if ((rc = qr_fsync_dir(tables, err)) == QR_OK)
            rc = table_open(path, &o, &tab, err);
    }
    if (rc == QR_OK)
        rc = add_handle(db, name, tab, out, err);
    qr_db_ddl_bump(db);
    pthread_mutex_unlock(&db->lock);
    return rc;
}

int qr_table_get(QrDb *db, const char *name, QrTable **out, QrError *err)
{
    int rc = check_name(name, err);
    if (rc != QR_OK)
        return rc;
    pthread_mutex_lock(&db->lock);
    QrTable *t = find_open(db, name);
    if (t) {
        pthread_mutex_unlock(&db->lock);
        *out = t;
        return QR_OK;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/tables/%s", db->dir, name);
    if (!qr_path_exists(path)) {
        pthread_mutex_unlock(&db->lock);
        return qr_error_set(err, QR_ENOTFOUND, "table \"%s\" does not exist", name);
    }
    TableOpts o;
    table_opts_from_db(db, &o);
    Table *tab;
    rc = table_open(path, &o, &tab, err);
    if (rc == QR_OK)
        rc = add_handle(db, name, tab, out, err);
    pthread_mutex_unlock(&db->lock);
    return rc;
}

int qr_table_drop(QrDb *db, const char *name, QrError *err)
{
    int rc = check_name(name, err);
    if (rc != QR_OK)
        return rc;
    char path[4096];
    snprintf(path, sizeof path, "%s/tables/%s", db->dir, name);
    pthread_mutex_lock(&db->lock);
    qr_db_ddl_bump(db); /* before the handle goes: bound queries rebind */
    for (int i = 0; i < db->n_tables; i++)
        if (!strcmp(db->tables[i]->name, name)) {
            /* callers must not use the handle after drop */
            table_handle_free(db->tables[i]);
            db->tables[i] = db->tables[--db->n_tables];
            break;
        }
    if (!qr_path_exists(path)) {
        pthread_mutex_unlock(&db->lock);
        return qr_error_set(err, QR_ENOTFOUND, "table \"%s\" does not exist", name);
    }
    /* rename first so a crash mid-removal never leaves a half table */
    char trash[4200];
    snprintf(trash, sizeof trash, "%s/tables/.drop-%s", db->dir, name);
    if (rename(path, trash) != 0)
        rc = qr_error_set(err, QR_EIO, "could not drop table \"%s\"", name);
    else
        rc = qr_remove_tree(trash, err);
    pthread_mutex_unlock(&db->lock);
    return rc;
}

int qr_table_swap(QrDb *db, const char *a, const char *b, QrError *err)
{
    int rc = check_name(a, err);
    if (rc == QR_OK)
        rc = check_name(b, err);
    if (rc != QR_OK)
        return rc;
    char pa[4096], pb[4096], dir[4096];
    snprintf(pa, sizeof pa, "%s/tables/%s", db->dir, a);
    snprintf(pb, sizeof pb, "%s/tables/%s", db->dir, b);
    snprintf(dir, sizeof dir, "%s/tables", db->dir);
    pthread_mutex_lock(&db->lock);
    qr_db_ddl_bump(db); /* bound queries rebind */
    for (int i = 0; i < db->n_tables; i++)
        if (!strcmp(db->tables[i]->name, a) || !strcmp(db->tables[i]->name, b)) {
            /* callers must not use the handles after the swap: reopened on demand */
            table_handle_free(db->tables[i]);
            db->tables[i--] = db->tables[--db->n_tables];
        }
    if (renameat2(AT_FDCWD, pa, AT_FDCWD, pb, RENAME_EXCHANGE) != 0)
        rc = qr_error_set(err, errno == ENOENT ? QR_ENOTFOUND : QR_EIO,
                          "could not exchange tables \"%s\" and \"%s\": %s", a, b,
                          strerror(errno));
    else
        rc = qr_fsync_dir(dir, err);
    pthread_mutex_unlock(&db->lock);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int qr_table_list(QrDb *db, char ***names, int *n, QrError *err)
{
    *names = NULL;
    *n = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/tables", db->dir);
    DIR *d = opendir(path);
    if (!d)
        return qr_error_set(err, QR_EIO, "could not list \"%s\"", path);
    struct dirent *e;
    int cap = 0;
    char **v = NULL;
    while ((e = readdir(d))) {
        if (!qr_name_valid(e->d_name))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nv = qr_realloc(v, (size_t)cap * sizeof *nv);
            if (!nv)
                goto oom;
            v = nv;
        }
        if (!(v[*n] = qr_strdup(e->d_name)))
            goto oom;
        (*n)++;
    }
    closedir(d);
    if (v)
        qsort(v, (size_t)*n, sizeof *v, cmp_str);
    *names = v;
    return QR_OK;
oom:
    closedir(d);
    for (int i = 0; i < *n; i++)
        qr_free(v[i]);
    qr_free(v);
    *n = 0;
    return qr_error_set(err, QR_ENOMEM, "out of memory");
}

/* ---- spare tables ---- */

static bool spare_id_ok(const char *id, QrError *err)
{
    size_t n = strlen(id);
    bool ok = n > 0 && n <= QR_NAME_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)id[i]) || id[i] == '_' || id[i] == '-';
    if (!ok)
        qr_error_set(err, QR_EINVAL, "invalid spare table id \"%.80s\"", id);
    return ok;
}

void qr_spare_path(const QrDb *db, const char *id, char *out, size_t cap)
{
    snprintf(out, cap, "%s/spares/%s", db->dir, id);
}

static uint64_t dir_ident(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return 0;
    return ((uint64_t)sb.st_dev << 40) ^ (uint64_t)sb.st_ino ^ 1;
}

uint64_t qr_table_ident(const QrDb *db, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tables/%s", db->dir, name);
    return dir_ident(path);
}

uint64_t qr_spare_ident(const QrDb *db, const char *id)
{
    char path[4200];
    qr_spare_path(db, id, path, sizeof path);
    return dir_ident(path);
}

int qr_spare_create(QrDb *db, const char *id, const char *shown, const QrSchema *schema,
                    QrTable **out, QrError *err)
{
    *out = NULL;
    if (!spare_id_ok(id, err))
        return QR_EINVAL;
    int rc = check_name(shown, err);
    if (rc != QR_OK)
        return rc;
    char dir[4096], path[4200], tmp[4200];
    snprintf(dir, sizeof dir, "%s/spares", db->dir);
    qr_spare_path(db, id, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s/.new-%s", dir, id);
    if ((rc = qr_mkdir_p(dir, err)) != QR_OK)
        return rc;
    if (qr_path_exists(path))
        return qr_error_set(err, QR_EEXISTS, "spare table \"%s\" exists", id);
    TableOpts o;
    table_opts_from_db(db, &o);
    Table *tab = NULL;
    rc = qr_path_exists(tmp) ? qr_remove_tree(tmp, err) : QR_OK;
    if (rc == QR_OK && (rc = table_create(tmp, schema, &o, &tab, err)) == QR_OK) {
        table_close(tab);
        tab = NULL;
        if (rename(tmp, path) != 0)
            rc = qr_error_set(err, QR_EIO, "could not create spare table \"%s\": %s", id,
                              strerror(errno));
        else if ((rc = qr_fsync_dir(dir, err)) == QR_OK)
            rc = table_open(path, &o, &tab, err);
    }
    if (rc != QR_OK)
        return rc;
    QrTable *t = qr_calloc(1, sizeof *t);
    if (!t) {
        table_close(tab);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    handle_init(t, db, shown, tab);
    *out = t;
    return QR_OK;
}

void qr_spare_close(QrTable *t) { table_handle_free(t); }

int qr_spare_drop(QrDb *db, const char *id, QrError *err)
{
    if (!spare_id_ok(id, err))
        return QR_EINVAL;
    char path[4200];
    qr_spare_path(db, id, path, sizeof path);
    return qr_path_exists(path) ? qr_remove_tree(path, err) : QR_OK;
}

int qr_spare_swap(QrDb *db, const char *name, const char *id, QrError *err)
{
    int rc = check_name(name, err);
    if (rc != QR_OK)
        return rc;
    if (!spare_id_ok(id, err))
        return QR_EINVAL;
    char pa[4200], pb[4200], tables[4096], spares[4096];
    snprintf(pa, sizeof pa, "%s/tables/%s", db->dir, name);
    qr_spare_path(db, id, pb, sizeof pb);
    snprintf(tables, sizeof tables, "%s/tables", db->dir);
    snprintf(spares, sizeof spares, "%s/spares", db->dir);
    pthread_mutex_lock(&db->lock);
    qr_db_ddl_bump(db); /* bound queries rebind */
    for (int i = 0; i < db->n_tables; i++)
        if (!strcmp(db->tables[i]->name, name)) {
            table_handle_free(db->tables[i]); /* reopened on demand */
            db->tables[i--] = db->tables[--db->n_tables];
        }
    if (renameat2(AT_FDCWD, pa, AT_FDCWD, pb, RENAME_EXCHANGE) != 0)
        rc = qr_error_set(err, errno == ENOENT ? QR_ENOTFOUND : QR_EIO,
                          "could not exchange table \"%s\" with its rebuilt copy: %s", name,
                          strerror(errno));
    else if ((rc = qr_fsync_dir(tables, err)) == QR_OK)
        rc = qr_fsync_dir(spares, err);
    pthread_mutex_unlock(&db->lock);
    return rc;
}

uint64_t qr_table_write_mark(QrTable *t) { return table_write_mark(t->table); }

int snapshot_each_doc(Snapshot *s, int (*fn)(void *arg, const char *doc, size_t len, QrError *err),
                      void *arg, QrError *err)
{
    int rc = QR_OK;
    for (int i = 0; rc == QR_OK && i < s->n_segs; i++) {
        DocStoreCursor *c = ds_cursor_new(seg_docs(s->segs[i]));
        if (!c) {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory");
            break;
        }
        uint32_t n = seg_n_docs(s->segs[i]);
        for (uint32_t local = 0; rc == QR_OK && local < n; local++) {
            if (snapshot_deleted(s, i, local))
                continue;
            const uint8_t *d;
            size_t dl;
            if ((rc = ds_get(c, local, &d, &dl, err)) == QR_OK)
                rc = fn(arg, (const char *)d, dl, err);
        }
        ds_cursor_free(c);
    }
    return rc;
}

const char *qr_table_name(const QrTable *t) { return t->name; }
const QrSchema *qr_table_schema(const QrTable *t) { return table_schema(t->table); }

int qr_table_set_synonyms(QrTable *t, const char *json, size_t len, QrError *err)
{
    return table_set_synonyms(t->table, json, len, err);
}

int qr_table_synonyms(QrTable *t, char **out, size_t *len, QrError *err)
{
    return table_synonyms_dup(t->table, out, len, err);
}

int qr_table_add_field(QrTable *t, const QrField *f, QrError *err)
{
    int rc = table_add_field(t->table, f, err);
    qr_db_ddl_bump(t->db);
    return rc;
}

void qr_table_stats(QrTable *t, QrTableStats *st)
{
    TableInfo ti;
    table_info(t->table, &ti);
    memset(st, 0, sizeof *st);
    st->docs = ti.n_live;
    st->docs_total = ti.n_docs;
    st->segments = ti.n_segments;
    st->disk_bytes = ti.disk_bytes;
    st->wal_bytes = ti.wal_bytes;
    st->merges_done = ti.merges_done;
    st->merges_running = ti.merges_running;
    st->commits = ti.commits;
    st->checkpoints = ti.checkpoints;
    st->mem_segments = ti.mem_segments;
    st->mem_bytes = ti.mem_bytes;
    st->peak_segments = ti.peak_segments;
    st->wal_syncs = ti.wal_syncs;
}

void qr_table_open_report(QrTable *t, QrOpenReport *out)
{
    memset(out, 0, sizeof *out);
    table_open_report(t->table, &out->wal, &out->uncommitted_bytes, &out->segments_salvaged);
}

static int ro_check(QrTable *t, QrError *err)
{
    if (t->db->opts.read_only)
        return qr_error_set(err, QR_EPERM, "data directory is open read-only");
    return QR_OK;
}

static int set_index(QrTable *t, const char *field, bool on, QrError *err)
{
    int rc = ro_check(t, err);
    if (rc)
        return rc;
    int f = schema_field_index(table_schema(t->table), field);
    if (f < 0) {
        qr_error_set(err, QR_ENOTFOUND, "table \"%s\" has no field \"%s\"", qr_table_name(t),
                     field);
        qr_error_set_sqlstate(err, "42703"); /* undefined_column */
        return QR_ENOTFOUND;
    }
    if (on && table_schema(t->table)->fields[f].multi) {
        qr_error_set(err, QR_EINVAL, "cannot index multi-valued keyword field \"%s\" with a "
                                     "B-tree", field);
        qr_error_detail(err, "a B-tree orders whole values; filters on the field match its "
                             "elements");
        return QR_EINVAL;
    }
    rc = on ? table_create_index(t->table, f, err) : table_drop_index(t->table, f, err);
    qr_db_ddl_bump(t->db);
    return rc;
}

int qr_table_create_index(QrTable *t, const char *field, QrError *err)
{
    return set_index(t, field, true, err);
}

int qr_table_drop_index(QrTable *t, const char *field, QrError *err)
{
    return set_index(t, field, false, err);
}

int quarry_doc_check(const char *json, size_t len, QrError *err)
{
    size_t bad = qr_utf8_invalid_at(json, len);
    if (bad == len)
        return QR_OK;
    /* the bytes of the sequence the lead byte announces, as PostgreSQL shows them */
    unsigned char c = (unsigned char)json[bad];
    size_t want = c >= 0xF8 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    char hex[24] = "";
    for (size_t i = 0; i < want && bad + i < len; i++)
        snprintf(hex + strlen(hex), sizeof hex - strlen(hex), "%s0x%02x", i ? " " : "",
                 (unsigned char)json[bad + i]);
    qr_error_set(err, QR_EINVAL, "invalid byte sequence for encoding \"UTF8\": %s", hex);
    qr_error_set_sqlstate(err, "22021");
    qr_error_detail(err, "the document has bytes that are not UTF-8 at byte %zu", bad + 1);
    qr_error_hint(err, "documents are UTF-8 text: convert the input (for example iconv -f "
                       "LATIN1 -t UTF-8) or remove the bytes");
    qr_error_pos(err, -1, -1, (int32_t)(bad < INT32_MAX ? bad + 1 : INT32_MAX));
    return QR_EINVAL;
}

int quarry_budget_error(QrError *err)
{
    if (!err)
        return QR_ENOMEM;
    qr_error_clear(err);
    size_t lim = qr_mem_budget_limit(), used = qr_mem_budget_used();
    qr_error_set(err, QR_ENOMEM, "out of memory for queries: the server's memory limit is "
                                 "reached");
    qr_error_detail(err, "queries running now hold %zu MiB of the limit of %zu MiB",
                    used >> 20, lim >> 20);
    qr_error_hint(err, "retry when fewer queries run, or narrow the query; the server's "
                       "limit is mem_limit_bytes (quarry serve --mem-limit)");
    return QR_ENOMEM;
}

struct QrBatch {
    QrTable *t;       /* borrows */
    TableBatch *tb;   /* owns */
};

int qr_batch_begin(QrTable *t, QrBatch **out, QrError *err)
{
    *out = NULL;
    int rc = ro_check(t, err);
    if (rc)
        return rc;
    QrBatch *b = qr_calloc(1, sizeof *b);
    if (!b)
        return qr_error_set(err, QR_ENOMEM, "out of memory starting a write batch");
    if ((rc = table_batch_begin(t->table, &b->tb, err)) != QR_OK) {
        qr_free(b);
        return rc;
    }
    b->t = t;
    *out = b;
    return QR_OK;
}

int qr_batch_put(QrBatch *b, const char *json, size_t len, bool *replaced, QrError *err)
{
    int rc = quarry_doc_check(json, len, err);
    return rc ? rc : table_batch_put(b->tb, json, len, NULL, replaced, err);
}

int qr_batch_put_parsed(QrBatch *b, const char *json, size_t len, const cJSON *root,
                        bool *replaced, QrError *err)
{
    int rc = quarry_doc_check(json, len, err);
    return rc ? rc : table_batch_put(b->tb, json, len, root, replaced, err);
}

uint64_t qr_batch_ops(const QrBatch *b) { return table_batch_ops(b->tb); }

int qr_batch_commit(QrBatch *b, QrError *err) { return table_batch_commit(b->tb, err); }
void qr_batch_set_bulk(QrBatch *b, bool bulk) { table_batch_set_bulk(b->tb, bulk); }

int qr_batch_absorb(QrBatch *dst, QrBatch *src, QrError *err)
{
    return table_batch_absorb(dst->tb, src->tb, err);
}

int qr_batch_seal(QrBatch *b, QrError *err) { return table_batch_seal(b->tb, err); }
QrTable *qr_batch_table(const QrBatch *b) { return b->t; }

int qr_batch_commit_start(QrBatch *b, QrCommit *c, QrError *err)
{
    TableCommit tc;
    int rc = table_batch_commit_start(b->tb, &tc, err);
    *c = (QrCommit){.t = tc.t, .end_lsn = tc.end_lsn, .n_ops = tc.n_ops,
                    .n_replaced = tc.n_replaced, .started = tc.started};
    return rc;
}

int qr_commit_wait(const QrCommit *c, QrError *err)
{
    TableCommit tc = {.t = c->t, .end_lsn = c->end_lsn, .n_ops = c->n_ops,
                      .n_replaced = c->n_replaced, .started = c->started};
    return table_commit_wait(&tc, err);
}

void qr_batch_free(QrBatch *b)
{
    if (!b)
        return;
    table_batch_free(b->tb);
    qr_free(b);
}

static size_t pk_from_json_text(const char *pk_json, size_t len, uint8_t *key, QrError *err)
{
    cJSON *v = cJSON_ParseWithLength(pk_json, len);
    if (!v) {
        /* a bare word is taken as a string key */
        cJSON *s = cJSON_CreateString("");
        if (!s) {
            qr_error_set(err, QR_ENOMEM, "out of memory");
            return 0;
        }
        char *txt = qr_strndup(pk_json, len);
        if (!txt) {
            cJSON_Delete(s);
            qr_error_set(err, QR_ENOMEM, "out of memory");
            return 0;
        }
        cJSON_SetValuestring(s, txt);
        qr_free(txt);
        v = s;
    }
    size_t n = pk_encode(v, key, err);
    cJSON_Delete(v);
    return n;
}

int qr_batch_delete(QrBatch *b, const char *pk_json, size_t len, bool *found, QrError *err)
{
    uint8_t key[PK_KEY_MAX];
    size_t kl = pk_from_json_text(pk_json, len, key, err);
    if (!kl)
        return err && err->code ? err->code : QR_EINVAL;
    return table_batch_delete(b->tb, key, kl, found, err);
}

int qr_flush(QrTable *t, QrError *err) { return table_flush(t->table, err); }
int qr_merge(QrTable *t, QrError *err) { return table_force_merge(t->table, err); }
void qr_wait_merges(QrTable *t) { table_wait_merges(t->table); }
int qr_verify(QrTable *t, QrError *err) { return table_verify(t->table, err); }

static int get_doc(QrTable *t, bool latest, const char *pk_json, size_t len, QrBuf *out,
                   QrError *err)
{
    uint8_t key[PK_KEY_MAX];
    size_t kl = pk_from_json_text(pk_json, len, key, err);
    if (!kl)
        return err ? err->code : QR_EINVAL;
    Snapshot *s = latest ? table_snapshot_latest(t->table) : table_snapshot(t->table);
    int seg;
    uint32_t local;
    int rc;
    if (!snapshot_find_key(s, key, kl, &seg, &local)) {
        rc = qr_error_set(err, QR_ENOTFOUND, "document %.*s does not exist in table \"%s\"",
                          (int)(len > 100 ? 100 : len), pk_json, t->name);
    } else {
        DocStoreCursor *c = ds_cursor_new(seg_docs(s->segs[seg]));
        const uint8_t *d;
        size_t dl;
        if (!c)
            rc = qr_error_set(err, QR_ENOMEM, "out of memory");
        else if ((rc = ds_get(c, local, &d, &dl, err)) == QR_OK)
            qr_buf_append(out, d, dl);
        ds_cursor_free(c);
    }
    snapshot_release(s);
    return rc;
}

int qr_get(QrTable *t, const char *pk_json, size_t len, QrBuf *out, QrError *err)
{
    return get_doc(t, false, pk_json, len, out, err);
}

int qr_get_latest(QrTable *t, const char *pk_json, size_t len, QrBuf *out, QrError *err)
{
    return get_doc(t, true, pk_json, len, out, err);
}
