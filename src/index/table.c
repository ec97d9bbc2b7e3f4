/*
 * table.c — write path, commit, recovery, checkpoints, merges, snapshots.
 *
 * Layer: index/.  Calls segment (index/), wal, manifest, sfile, util
 * (store/).  The protocol is described in table.h; the files:
 *
 *   <table>/MANIFEST                sealed: schema, segments, checkpoint LSN
 *   <table>/seg-<id>.qseg           immutable segments (index/segment.h)
 *   <table>/seg-<id>.del.<gen>      roaring bitmap of deleted docs
 *   <table>/seg-<id>.f<k>.qbt       B-tree of field k (index/btree.h), for
 *                                   fields the schema indexes; derived data:
 *                                   built at spill/merge/CREATE INDEX and
 *                                   rebuilt at open when missing or damaged
 *   <table>/wal/wal-<lsn>.log       write-ahead log (store/wal.h)
 *
 * Invariants (under wlock):
 *   - cur_segs/cur_dels/cur_meta describe the committed state; the published
 *     snapshot is a copy of them (segments referenced, bitmaps copied).
 *   - Every change in the WAL at LSN >= checkpoint_lsn that is followed by a
 *     COMMIT record is either in cur_* or will be replayed on open.
 *   - A segment file is referenced by the durable MANIFEST only after it was
 *     fsynced; files the manifest does not name are deleted on open.
 *
 * Merge policy (tiered): a segment's tier is floor(log_F(live docs)) with F
 * = merge_factor; when a tier holds F or more segments, the F smallest of it
 * are merged into one.  A segment with more than 30% deleted docs is
 * rewritten alone.  One merge runs at a time per table.
 */
#include "index/table.h"
#include "index/seg_int.h"
#include "store/manifest.h"
#include "store/mem.h"
#include "store/util.h"

#include <cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { WAL_PUT = 1, WAL_DELETE = 2, WAL_COMMIT = 3 };

struct Table;
static void remove_stale_del_files(struct Table *t);

typedef struct SegMeta {
    uint64_t id;
    bool synced;     /* file fsynced */
    uint64_t del_gen;  /* generation of the deletes file on disk (0 = none) */
    bool del_dirty;  /* deletes changed since the last checkpoint */
    bool merging;    /* picked by a running merge */
    bool merge_failed; /* a merge including it failed: left out of later picks */
    uint64_t pending_old_gen; /* deletes file to remove after the next manifest */
} SegMeta;

typedef struct PendDel {
    Segment *seg;          /* borrows (the table holds a reference) */
    roaring_bitmap_t *bm;  /* owns */
} PendDel;

struct Table {
    char *dir;                /* owns */
    TableOpts opts;
    QrSchema schema;
    pthread_mutex_t wlock;
    pthread_mutex_t snap_lock;
    pthread_mutex_t merge_lock; /* one merge at a time */
    Snapshot *snap;           /* owns one reference */
    uint64_t snap_version;
    WalWriter *wal;           /* owns; NULL while replaying */
    bool replaying;
    bool broken;              /* a WAL write failed: writes refused until reopen */
    QrError broken_err;
    /* committed state */
    int n_segs, cap_segs;
    Segment **segs;           /* owns references */
    roaring_bitmap_t **dels;  /* owns; NULL = none */
    SegMeta *meta;
    /* uncommitted state */
    SegBuilder *builder;      /* owns */
    uint64_t b_min_lsn, b_max_lsn;
    uint64_t first_open_lsn;  /* first WAL record not yet followed by a COMMIT, 0 = none */
    int n_pending;
    Segment **pending;        /* owns: spilled builders awaiting commit */
    roaring_bitmap_t **pending_bdels;
    uint64_t *pending_ids;
    int n_pdel;
    PendDel *pdel;
    bool dirty;               /* something to commit */
    bool ckpt_due;            /* committed state differs from the durable manifest */
    uint64_t cur_lsn_min, cur_lsn_max;
    /* durability */
    uint64_t next_seg_id;
    uint64_t manifest_gen;
    uint64_t checkpoint_lsn;
    uint64_t wal_at_ckpt;
    /* merges */
    pthread_t merge_thr;
    bool merge_thr_started;
    pthread_cond_t merge_cv;
    bool stop;
    bool merge_due;
    int merges_running;
    pthread_cond_t idle_cv;
    /* counters */
    uint64_t merges_done, merges_failed, commits, checkpoints, recovered, torn_cut;
};

void table_opts_default(TableOpts *o)
{
    memset(o, 0, sizeof *o);
    o->fsync = QR_FSYNC_COMMIT;
    o->fsync_batch_ms = 10;
    o->builder_bytes = 256u << 20;
    o->checkpoint_wal_bytes = 256u << 20;
    o->background_merge = true;
    o->merge_factor = 8;
}

const QrSchema *table_schema(const Table *t) { return &t->schema; }

static char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = qr_malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void seg_file_name(char *out, size_t n, const char *dir, uint64_t id)
{
    snprintf(out, n, "%s/seg-%016llx.qseg", dir, (unsigned long long)id);
}

static void del_file_name(char *out, size_t n, const char *dir, uint64_t id, uint64_t gen)
{
    snprintf(out, n, "%s/seg-%016llx.del.%llu", dir, (unsigned long long)id,
             (unsigned long long)gen);
}

/* ---- snapshots ---- */

static void snapshot_free(Snapshot *s)
{
    for (int i = 0; i < s->n_segs; i++) {
        seg_unref(s->segs[i]);
        if (s->dels[i])
            roaring_bitmap_free(s->dels[i]);
    }
    qr_free(s->segs);
    qr_free(s->dels);
    qr_free(s->base);
    qr_free(s);
}

void snapshot_release(Snapshot *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1)
        snapshot_free(s);
}

Snapshot *table_snapshot(Table *t)
{
    pthread_mutex_lock(&t->snap_lock);
    Snapshot *s = t->snap;
    atomic_fetch_add(&s->refs, 1);
    pthread_mutex_unlock(&t->snap_lock);
    return s;
}

int snapshot_base_find(const DocId *base, int n, DocId gdoc)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (base[mid] <= gdoc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

bool snapshot_locate(const Snapshot *s, DocId gdoc, int *seg, uint32_t *local)
{
    int i = snapshot_base_find(s->base, s->n_segs, gdoc);
    if (i < 0 || gdoc - s->base[i] >= seg_n_docs(s->segs[i]))
        return false;
    *seg = i;
    *local = (uint32_t)(gdoc - s->base[i]);
    return true;
}

bool snapshot_find_key(const Snapshot *s, const uint8_t *key, size_t len, int *seg,
                       uint32_t *local)
{
    for (int i = s->n_segs - 1; i >= 0; i--) {
        int64_t d = seg_pk_lookup(s->segs[i], key, len);
        if (d >= 0 && !snapshot_deleted(s, i, (uint32_t)d)) {
            *seg = i;
            *local = (uint32_t)d;
            return true;
        }
    }
    return false;
}

/* Build and swap in a snapshot of the committed state.  Called under wlock. */
static int publish(Table *t, QrError *err)
{
    Snapshot *s = qr_calloc(1, sizeof *s);
    if (!s)
        return qr_error_set(err, QR_ENOMEM, "out of memory publishing a snapshot");
    int n = t->n_segs;
    s->segs = qr_calloc((size_t)n + 1, sizeof *s->segs);
    s->dels = qr_calloc((size_t)n + 1, sizeof *s->dels);
    s->base = qr_calloc((size_t)n + 1, sizeof *s->base);
    if (!s->segs || !s->dels || !s->base) {
        qr_free(s->segs);
        qr_free(s->dels);
        qr_free(s->base);
        qr_free(s);
        return qr_error_set(err, QR_ENOMEM, "out of memory publishing a snapshot");
    }
    atomic_init(&s->refs, 1);
    DocId base = 0;
    uint64_t live = 0;
    for (int i = 0; i < n; i++) {
        if (t->dels[i] && !roaring_bitmap_is_empty(t->dels[i])) {
            s->dels[i] = roaring_bitmap_copy(t->dels[i]);
            if (!s->dels[i]) {
                s->n_segs = i;
                snapshot_free(s);
                return qr_error_set(err, QR_ENOMEM, "out of memory publishing a snapshot");
            }
        }
        s->segs[i] = seg_ref(t->segs[i]);
        s->base[i] = base;
        s->n_segs = i + 1;
        uint32_t nd = seg_n_docs(t->segs[i]);
        base += nd;
        live += nd - (s->dels[i] ? roaring_bitmap_get_cardinality(s->dels[i]) : 0);
    }
    s->n_docs = (uint64_t)base;
    s->n_live = live;
    s->version = ++t->snap_version;
    t->ckpt_due = true;
    pthread_mutex_lock(&t->snap_lock);
    Snapshot *old = t->snap;
    t->snap = s;
    pthread_mutex_unlock(&t->snap_lock);
    snapshot_release(old);
    return QR_OK;
}

/* ---- committed-state helpers (under wlock) ---- */

static int segs_reserve(Table *t, int extra)
{
    if (t->n_segs + extra <= t->cap_segs)
        return 0;
    int nc = t->cap_segs ? t->cap_segs * 2 : 16;
    while (nc < t->n_segs + extra)
        nc *= 2;
    Segment **s = qr_realloc(t->segs, (size_t)nc * sizeof *s);
    if (s)
        t->segs = s;
    roaring_bitmap_t **d = qr_realloc(t->dels, (size_t)nc * sizeof *d);
    if (d)
        t->dels = d;
    SegMeta *m = qr_realloc(t->meta, (size_t)nc * sizeof *m);
    if (m)
        t->meta = m;
    if (!s || !d || !m)
        return -1;
    t->cap_segs = nc;
    return 0;
}

static bool is_deleted_now(Table *t, int i, uint32_t d)
{
    if (t->dels[i] && roaring_bitmap_contains(t->dels[i], d))
        return true;
    for (int k = 0; k < t->n_pdel; k++)
        if (t->pdel[k].seg == t->segs[i])
            return roaring_bitmap_contains(t->pdel[k].bm, d);
    return false;
}

/* Where the live copy of a key is, outside the builder. */
typedef struct Older {
    int pending;       /* index in t->pending, or -1 */
    Segment *seg;      /* committed segment, or NULL */
    uint32_t doc;
} Older;

/* Find the live copy of `key` in spilled or committed segments (no change
 * made).  With `reserve`, make sure recording its delete cannot fail later
 * (the pending-deletes entry exists).  Returns false when there is none. */
static bool find_older(Table *t, const uint8_t *key, size_t len, Older *o, int *rc, QrError *err)
{
    *rc = QR_OK;
    o->pending = -1;
    o->seg = NULL;
    for (int k = t->n_pending - 1; k >= 0; k--) {
        int64_t d = seg_pk_lookup(t->pending[k], key, len);
        if (d >= 0 && !roaring_bitmap_contains(t->pending_bdels[k], (uint32_t)d)) {
            o->pending = k;
            o->doc = (uint32_t)d;
            return true;
        }
    }
    for (int i = t->n_segs - 1; i >= 0; i--) {
        int64_t d = seg_pk_lookup(t->segs[i], key, len);
        if (d >= 0 && !is_deleted_now(t, i, (uint32_t)d)) {
            o->seg = t->segs[i];
            o->doc = (uint32_t)d;
            for (int k = 0; k < t->n_pdel; k++)
                if (t->pdel[k].seg == o->seg)
                    return true;
            PendDel *np = qr_realloc(t->pdel, ((size_t)t->n_pdel + 1) * sizeof *np);
            roaring_bitmap_t *bm = np ? roaring_bitmap_create() : NULL;
            if (np)
                t->pdel = np;
            if (!bm) {
                *rc = qr_error_set(err, QR_ENOMEM, "out of memory recording a delete");
                return false;
            }
            t->pdel[t->n_pdel].seg = o->seg;
            t->pdel[t->n_pdel].bm = bm;
            t->n_pdel++;
            return true;
        }
    }
    return false;
}

/* Record the delete find_older prepared (cannot fail). */
static void apply_older(Table *t, const Older *o)
{
    if (o->pending >= 0) {
        roaring_bitmap_add(t->pending_bdels[o->pending], o->doc);
        return;
    }
    for (int k = 0; k < t->n_pdel; k++)
        if (t->pdel[k].seg == o->seg) {
            roaring_bitmap_add(t->pdel[k].bm, o->doc);
            return;
        }
}

static int fail_broken(Table *t, QrError *err)
{
    qr_error_copy(err, &t->broken_err);
    return t->broken_err.code ? t->broken_err.code : QR_EIO;
}

static int wal_log(Table *t, uint8_t type, const void *p, size_t n, QrError *err)
{
    if (t->replaying || !t->wal)
        return QR_OK;
    uint64_t lsn;
    QrError e;
    qr_error_clear(&e);
    int rc = wal_append(t->wal, type, p, n, &lsn, &e);
    if (rc != QR_OK) {
        t->broken = true;
        qr_error_copy(&t->broken_err, &e);
        qr_error_copy(err, &e);
        return rc;
    }
    if (!t->b_min_lsn)
        t->b_min_lsn = lsn;
    t->b_max_lsn = lsn;
    if (!t->first_open_lsn)
        t->first_open_lsn = lsn;
    return QR_OK;
}

/* Spill the builder to a pending segment file. Under wlock. */
static int spill_builder(Table *t, QrError *err)
{
    if (!t->builder || segb_n_docs(t->builder) == 0)
        return QR_OK;
    uint64_t id = t->next_seg_id++;
    char path[4096];
    seg_file_name(path, sizeof path, t->dir, id);
    segb_set_lsn_range(t->builder, t->b_min_lsn, t->b_max_lsn);
    roaring_bitmap_t *bdel = NULL;
    int rc = segb_finish(t->builder, path, false, &bdel, err);
    segb_free(t->builder);
    t->builder = NULL;
    t->b_min_lsn = t->b_max_lsn = 0;
    if (rc != QR_OK) {
        unlink(path);
        return rc;
    }
    Segment *seg;
    if ((rc = seg_open(path, id, &seg, err)) != QR_OK) {
        roaring_bitmap_free(bdel);
        unlink(path);
        return rc;
    }
    if ((rc = seg_sync_btrees(seg, &t->schema, true, false, err)) != QR_OK) {
        seg_unref(seg);
        roaring_bitmap_free(bdel);
        unlink(path);
        seg_remove_btree_files(path);
        return rc;
    }
    int n = t->n_pending + 1;
    Segment **p = qr_realloc(t->pending, (size_t)n * sizeof *p);
    if (p)
        t->pending = p;
    roaring_bitmap_t **b = qr_realloc(t->pending_bdels, (size_t)n * sizeof *b);
    if (b)
        t->pending_bdels = b;
    uint64_t *ids = qr_realloc(t->pending_ids, (size_t)n * sizeof *ids);
    if (ids)
        t->pending_ids = ids;
    if (!p || !b || !ids) {
        seg_unref(seg);
        roaring_bitmap_free(bdel);
        unlink(path);
        seg_remove_btree_files(path);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    t->pending[t->n_pending] = seg;
    t->pending_bdels[t->n_pending] = bdel;
    t->pending_ids[t->n_pending] = id;
    t->n_pending = n;
    return QR_OK;
}

static int ensure_builder(Table *t, QrError *err)
{
    if (t->builder)
        return QR_OK;
    return segb_new(&t->schema, &t->builder, err);
}

int table_put_parsed(Table *t, const char *json, size_t len, const cJSON *root, bool *replaced,
                     QrError *err)
{
    if (replaced)
        *replaced = false;
    if (!cJSON_IsObject(root))
        return qr_error_set(err, QR_ETYPE, "document is not a JSON object");
    const cJSON *pkv = cJSON_GetObjectItemCaseSensitive(root, t->schema.primary_key);
    if (!pkv || cJSON_IsNull(pkv)) {
        qr_error_set(err, QR_ECONSTRAINT, "document has no primary key \"%s\"",
                     t->schema.primary_key);
        qr_error_hint(err, "every document needs a \"%s\" field (a string or an integer)",
                      t->schema.primary_key);
        return QR_ECONSTRAINT;
    }
    uint8_t key[PK_KEY_MAX];
    size_t klen = pk_encode(pkv, key, err);
    if (!klen)
        return err ? err->code : QR_ECONSTRAINT;
    pthread_mutex_lock(&t->wlock);
    int rc;
    if (t->broken) {
        rc = fail_broken(t, err);
        goto out;
    }
    if ((rc = ensure_builder(t, err)) != QR_OK)
        goto out;
    /* find (and prepare the delete of) an older copy before touching the
     * builder, so a failure anywhere leaves the table as it was */
    Older older;
    bool found = find_older(t, key, klen, &older, &rc, err);
    if (rc != QR_OK)
        goto out;
    /* a key re-added inside the builder: segb_add marks the old copy */
    uint32_t before = segb_n_live(t->builder);
    uint32_t doc;
    if ((rc = segb_add(t->builder, json, len, root, &doc, err)) != QR_OK) {
        if (segb_poisoned(t->builder)) {
            /* the uncommitted batch cannot be trusted: refuse writes until
             * reopened (recovery replays only committed batches) */
            t->broken = true;
            qr_error_copy(&t->broken_err, err);
        }
        goto out;
    }
    bool in_builder = segb_n_live(t->builder) == before; /* the new doc replaced one */
    if (found && !in_builder)
        apply_older(t, &older);
    if ((rc = wal_log(t, WAL_PUT, json, len, err)) != QR_OK)
        goto out;
    if (replaced)
        *replaced = in_builder || found;
    t->dirty = true;
    if (segb_mem_bytes(t->builder) > t->opts.builder_bytes &&
        (rc = spill_builder(t, err)) != QR_OK) {
        /* the batch's documents are only in the WAL now: refuse writes until
         * reopened, so recovery decides (it replays committed batches) */
        t->broken = true;
        qr_error_copy(&t->broken_err, err);
    }
out:
    pthread_mutex_unlock(&t->wlock);
    return rc;
}

int table_put(Table *t, const char *json, size_t len, bool *replaced, QrError *err)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        qr_error_set(err, QR_ESYNTAX, "document is not valid JSON");
        const char *ep = cJSON_GetErrorPtr();
        if (ep && ep >= json && ep <= json + len)
            qr_error_pos(err, ep - json, -1, (int32_t)(ep - json) + 1);
        return QR_ESYNTAX;
    }
    int rc = table_put_parsed(t, json, len, root, replaced, err);
    cJSON_Delete(root);
    return rc;
}

int table_delete_key(Table *t, const uint8_t *key, size_t len, bool *found, QrError *err)
{
    bool f1 = false, f2 = false;
    pthread_mutex_lock(&t->wlock);
    int rc = QR_OK;
    if (t->broken) {
        rc = fail_broken(t, err);
        goto out;
    }
    Older older;
    f2 = find_older(t, key, len, &older, &rc, err);
    if (rc != QR_OK)
        goto out;
    if (t->builder)
        f1 = segb_delete_key(t->builder, key, len);
    if (f2)
        apply_older(t, &older);
    if ((rc = wal_log(t, WAL_DELETE, key, len, err)) != QR_OK)
        goto out;
    t->dirty = true;
out:
    pthread_mutex_unlock(&t->wlock);
    if (found)
        *found = f1 || f2;
    return rc;
}

/* ---- checkpoint ---- */

static int checkpoint_locked(Table *t, QrError *err)
{
    char path[4096];
    int rc;
    Manifest m;
    memset(&m, 0, sizeof m);
    /* 1. segment files and deletes on disk */
    for (int i = 0; i < t->n_segs; i++) {
        SegMeta *sm = &t->meta[i];
        if (!sm->synced) {
            seg_file_name(path, sizeof path, t->dir, sm->id);
            if (t->opts.fsync != QR_FSYNC_OFF) {
                int fd = open(path, O_RDONLY);
                if (fd < 0 || fsync(fd) != 0) {
                    if (fd >= 0)
                        close(fd);
                    return qr_error_set(err, QR_EIO, "could not fsync segment file \"%s\"", path);
                }
                close(fd);
            }
            sm->synced = true;
        }
        if (sm->del_dirty) {
            uint64_t gen = sm->del_gen + 1;
            if (t->dels[i] && !roaring_bitmap_is_empty(t->dels[i])) {
                del_file_name(path, sizeof path, t->dir, sm->id, gen);
                if ((rc = deletes_write(path, t->dels[i], t->opts.fsync != QR_FSYNC_OFF, err)) !=
                    QR_OK)
                    return rc;
            } else {
                gen = 0;
            }
            sm->pending_old_gen = sm->del_gen;
            sm->del_gen = gen;
            sm->del_dirty = false;
        }
    }
    if (t->opts.fsync != QR_FSYNC_OFF && (rc = qr_fsync_dir(t->dir, err)) != QR_OK)
        return rc;
    /* 2. manifest */
    m.generation = ++t->manifest_gen;
    /* changes not yet committed are in no segment: replay must start at them */
    m.checkpoint_lsn = t->wal ? wal_next_lsn(t->wal) : t->checkpoint_lsn;
    if (t->first_open_lsn && t->first_open_lsn < m.checkpoint_lsn)
        m.checkpoint_lsn = t->first_open_lsn;
    m.next_seg_id = t->next_seg_id;
    m.n_segs = (uint32_t)t->n_segs;
    m.segs = qr_calloc((size_t)t->n_segs + 1, sizeof *m.segs);
    QrBuf sj;
    qr_buf_init(&sj);
    if (!m.segs || schema_to_json(&t->schema, false, &sj, err) != QR_OK) {
        qr_free(m.segs);
        qr_buf_free(&sj);
        return qr_error_set(err, QR_ENOMEM, "out of memory writing the manifest");
    }
    for (int i = 0; i < t->n_segs; i++) {
        ManifestSeg *ms = &m.segs[i];
        ms->id = t->meta[i].id;
        ms->n_docs = seg_n_docs(t->segs[i]);
        ms->n_deleted = t->dels[i] ? (uint32_t)roaring_bitmap_get_cardinality(t->dels[i]) : 0;
        ms->del_gen = t->meta[i].del_gen;
        ms->file_bytes = seg_file_bytes(t->segs[i]);
        seg_lsn_range(t->segs[i], &ms->min_lsn, &ms->max_lsn);
    }
    m.schema_json = (char *)qr_buf_steal(&sj, NULL);
    rc = manifest_write(t->dir, &m, t->opts.fsync != QR_FSYNC_OFF, err);
    uint64_t ck = m.checkpoint_lsn;
    qr_free(m.segs);
    qr_free(m.schema_json);
    if (rc != QR_OK)
        return rc;
    t->checkpoint_lsn = ck;
    t->checkpoints++;
    t->ckpt_due = false;
    /* 3. old deletes files, WAL */
    for (int i = 0; i < t->n_segs; i++) {
        if (t->meta[i].pending_old_gen) {
            del_file_name(path, sizeof path, t->dir, t->meta[i].id, t->meta[i].pending_old_gen);
            unlink(path);
            t->meta[i].pending_old_gen = 0;
        }
    }
    if (t->wal) {
        if ((rc = wal_rotate(t->wal, err)) != QR_OK ||
            (rc = wal_drop_before(t->wal, ck, err)) != QR_OK)
            return rc;
        t->wal_at_ckpt = wal_bytes(t->wal);
    }
    return QR_OK;
}

/* ---- commit ---- */

static void clear_pending(Table *t)
{
    for (int k = 0; k < t->n_pdel; k++)
        roaring_bitmap_free(t->pdel[k].bm);
    t->n_pdel = 0;
    for (int k = 0; k < t->n_pending; k++) {
        char path[4096];
        seg_file_name(path, sizeof path, t->dir, t->pending_ids[k]);
        seg_unref(t->pending[k]);
        roaring_bitmap_free(t->pending_bdels[k]);
        unlink(path);
        seg_remove_btree_files(path);
    }
    t->n_pending = 0;
    segb_free(t->builder);
    t->builder = NULL;
    t->b_min_lsn = t->b_max_lsn = 0;
    t->first_open_lsn = 0;
    t->dirty = false;
}

static int commit_locked(Table *t, QrError *err)
{
    int rc;
    if (t->broken)
        return fail_broken(t, err);
    if (!t->dirty)
        return QR_OK;
    if ((rc = wal_log(t, WAL_COMMIT, "", 0, err)) != QR_OK)
        return rc;
    if (t->wal && !t->replaying) {
        QrError e;
        qr_error_clear(&e);
        if ((rc = wal_commit(t->wal, &e)) != QR_OK) {
            t->broken = true;
            qr_error_copy(&t->broken_err, &e);
            qr_error_copy(err, &e);
            return rc;
        }
    }
    /* From here the change is durable in the WAL: a failure below leaves it
     * to recovery (the table refuses writes until reopened). */
    if ((rc = spill_builder(t, err)) != QR_OK)
        goto broken;
    if (segs_reserve(t, t->n_pending) != 0) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory committing");
        goto broken;
    }
    for (int k = 0; k < t->n_pdel; k++) {
        for (int i = 0; i < t->n_segs; i++) {
            if (t->segs[i] != t->pdel[k].seg)
                continue;
            if (!t->dels[i]) {
                t->dels[i] = t->pdel[k].bm;
                t->pdel[k].bm = NULL;
            } else {
                roaring_bitmap_or_inplace(t->dels[i], t->pdel[k].bm);
            }
            t->meta[i].del_dirty = true;
        }
        if (t->pdel[k].bm)
            roaring_bitmap_free(t->pdel[k].bm);
    }
    t->n_pdel = 0;
    for (int k = 0; k < t->n_pending; k++) {
        int i = t->n_segs++;
        t->segs[i] = t->pending[k];
        bool has_del = !roaring_bitmap_is_empty(t->pending_bdels[k]);
        t->dels[i] = has_del ? t->pending_bdels[k] : NULL;
        if (!has_del)
            roaring_bitmap_free(t->pending_bdels[k]);
        t->meta[i] = (SegMeta){.id = t->pending_ids[k], .del_dirty = has_del};
    }
    t->n_pending = 0;
    t->dirty = false;
    t->commits++;
    if ((rc = publish(t, err)) != QR_OK)
        goto broken;
    t->first_open_lsn = 0; /* everything logged so far is in published segments */
    if (t->wal && wal_bytes(t->wal) - t->wal_at_ckpt > t->opts.checkpoint_wal_bytes &&
        (rc = checkpoint_locked(t, err)) != QR_OK)
        goto broken;
    if (t->merge_thr_started) {
        t->merge_due = true;
        pthread_cond_signal(&t->merge_cv);
    }
    return QR_OK;
broken:
    t->broken = true;
    qr_error_copy(&t->broken_err, err);
    return rc;
}

int table_commit(Table *t, QrError *err)
{
    pthread_mutex_lock(&t->wlock);
    int rc = commit_locked(t, err);
    pthread_mutex_unlock(&t->wlock);
    return rc;
}

int table_flush(Table *t, QrError *err)
{
    pthread_mutex_lock(&t->wlock);
    int rc = commit_locked(t, err);
    if (rc == QR_OK)
        rc = checkpoint_locked(t, err);
    pthread_mutex_unlock(&t->wlock);
    return rc;
}

/* ---- merges ---- */

typedef struct MergePick {
    int n;
    Segment **segs;           /* references */
    roaring_bitmap_t **used;  /* copies of the deletes the merge saw */
    uint64_t *ids;
} MergePick;

static void pick_free(MergePick *p)
{
    for (int i = 0; i < p->n; i++) {
        seg_unref(p->segs[i]);
        if (p->used[i])
            roaring_bitmap_free(p->used[i]);
    }
    qr_free(p->segs);
    qr_free(p->used);
    qr_free(p->ids);
    memset(p, 0, sizeof *p);
}

static uint64_t live_docs(Table *t, int i)
{
    uint64_t n = seg_n_docs(t->segs[i]);
    return n - (t->dels[i] ? roaring_bitmap_get_cardinality(t->dels[i]) : 0);
}

/* Choose segments to merge (under wlock).  all = merge everything. */
static bool choose_merge(Table *t, bool all, MergePick *p)
{
    int n = t->n_segs;
    int *chosen = qr_calloc((size_t)n + 1, sizeof *chosen);
    if (!chosen)
        return false;
    int nc = 0;
    if (all) {
        bool any_del = false;
        for (int i = 0; i < n; i++) {
            if (t->meta[i].merging || t->meta[i].merge_failed) {
                nc = 0;
                break;
            }
            chosen[nc++] = i;
            any_del |= t->dels[i] != NULL;
        }
        if (nc == 1 && !any_del)
            nc = 0;
    } else {
        int f = t->opts.merge_factor < 2 ? 2 : t->opts.merge_factor;
        double lf = log((double)f);
        /* deleted-heavy segment first */
        for (int i = 0; i < n && !nc; i++) {
            if (t->meta[i].merging || t->meta[i].merge_failed || !t->dels[i])
                continue;
            uint64_t d = roaring_bitmap_get_cardinality(t->dels[i]);
            if (d * 10 > (uint64_t)seg_n_docs(t->segs[i]) * 3)
                chosen[nc++] = i;
        }
        for (int tier = 0; tier < 12 && !nc; tier++) {
            int cnt = 0;
            for (int i = 0; i < n; i++) {
                if (t->meta[i].merging || t->meta[i].merge_failed)
                    continue;
                int ti = (int)floor(log((double)live_docs(t, i) + 1) / lf);
                if (ti <= tier)
                    cnt++;
            }
            if (cnt < f)
                continue;
            for (int i = 0; i < n && nc < f; i++) {
                if (t->meta[i].merging || t->meta[i].merge_failed)
                    continue;
                int ti = (int)floor(log((double)live_docs(t, i) + 1) / lf);
                if (ti <= tier)
                    chosen[nc++] = i;
            }
        }
    }
    if (nc == 0) {
        qr_free(chosen);
        return false;
    }
    p->n = nc;
    p->segs = qr_calloc((size_t)nc, sizeof *p->segs);
    p->used = qr_calloc((size_t)nc, sizeof *p->used);
    p->ids = qr_calloc((size_t)nc, sizeof *p->ids);
    if (!p->segs || !p->used || !p->ids) {
        qr_free(chosen);
        pick_free(p);
        return false;
    }
    for (int k = 0; k < nc; k++) {
        int i = chosen[k];
        p->segs[k] = seg_ref(t->segs[i]);
        p->used[k] = t->dels[i] ? roaring_bitmap_copy(t->dels[i]) : NULL;
        p->ids[k] = t->meta[i].id;
        t->meta[i].merging = true;
    }
    qr_free(chosen);
    return true;
}

static int index_of_seg(Table *t, Segment *s)
{
    for (int i = 0; i < t->n_segs; i++)
        if (t->segs[i] == s)
            return i;
    return -1;
}

/* Run one merge end to end.  Called with merge_lock held, wlock not held. */
static int run_merge(Table *t, MergePick *p, QrError *err)
{
    char path[4096];
    pthread_mutex_lock(&t->wlock);
    uint64_t id = t->next_seg_id++;
    t->merges_running++;
    pthread_mutex_unlock(&t->wlock);
    seg_file_name(path, sizeof path, t->dir, id);
    uint32_t **remap = NULL;
    int rc = seg_merge(p->segs, (const roaring_bitmap_t *const *)p->used, p->n, &t->schema, path,
                       false, &remap, err);
    Segment *ns = NULL;
    if (rc == QR_OK)
        rc = seg_open(path, id, &ns, err);
    if (rc == QR_OK) {
        /* built outside the write lock; re-synced under it below in case
         * an index was created or dropped meanwhile */
        pthread_mutex_lock(&t->wlock);
        QrSchema sc = t->schema;
        pthread_mutex_unlock(&t->wlock);
        rc = seg_sync_btrees(ns, &sc, true, false, err);
    }
    pthread_mutex_lock(&t->wlock);
    t->merges_running--;
    if (rc == QR_OK)
        rc = seg_sync_btrees(ns, &t->schema, true, false, err);
    if (rc != QR_OK) {
        seg_unref(ns);
        unlink(path);
        seg_remove_btree_files(path);
        /* never retry the same failure in a loop: its segments stay as they
         * are until the table is reopened (quarry check names damage) */
        for (int k = 0; k < p->n; k++) {
            int i = index_of_seg(t, p->segs[k]);
            if (i >= 0) {
                t->meta[i].merging = false;
                t->meta[i].merge_failed = true;
            }
        }
        t->merges_failed++;
        goto out;
    }
    /* deletes that raced the merge, committed and pending, follow the docs */
    roaring_bitmap_t *nd = roaring_bitmap_create();
    roaring_bitmap_t *npd = roaring_bitmap_create();
    int first = -1;
    for (int k = 0; k < p->n; k++) {
        int i = index_of_seg(t, p->segs[k]);
        if (first < 0 || (i >= 0 && i < first))
            first = i;
        if (i >= 0 && t->dels[i]) {
            roaring_uint32_iterator_t *it = roaring_create_iterator(t->dels[i]);
            for (; it->has_value; roaring_advance_uint32_iterator(it)) {
                uint32_t d = it->current_value;
                if ((!p->used[k] || !roaring_bitmap_contains(p->used[k], d)) &&
                    remap[k][d] != UINT32_MAX)
                    roaring_bitmap_add(nd, remap[k][d]);
            }
            roaring_free_uint32_iterator(it);
        }
        for (int q = 0; q < t->n_pdel; q++) {
            if (t->pdel[q].seg != p->segs[k])
                continue;
            roaring_uint32_iterator_t *it = roaring_create_iterator(t->pdel[q].bm);
            for (; it->has_value; roaring_advance_uint32_iterator(it))
                if (remap[k][it->current_value] != UINT32_MAX)
                    roaring_bitmap_add(npd, remap[k][it->current_value]);
            roaring_free_uint32_iterator(it);
            roaring_bitmap_clear(t->pdel[q].bm);
            t->pdel[q].seg = NULL; /* dead entry; replaced below */
        }
    }
    /* rebuild the committed list: sources out, merged segment at `first`
     * (read each slot before any write: the merged segment may land in a
     * source's slot) */
    int w = 0;
    Segment **old = qr_calloc((size_t)p->n, sizeof *old);
    int n_old = 0;
    for (int i = 0; i < t->n_segs; i++) {
        Segment *cur = t->segs[i];
        roaring_bitmap_t *cur_del = t->dels[i];
        SegMeta cur_meta = t->meta[i];
        bool src = false;
        for (int k = 0; k < p->n; k++)
            if (cur == p->segs[k])
                src = true;
        if (i == first) {
            t->segs[w] = ns;
            t->dels[w] = roaring_bitmap_is_empty(nd) ? NULL : nd;
            t->meta[w] = (SegMeta){.id = id, .del_dirty = !roaring_bitmap_is_empty(nd)};
            if (!t->dels[w])
                roaring_bitmap_free(nd);
            nd = NULL;
            w++;
        }
        if (src) {
            if (old)
                old[n_old++] = cur;
            else
                seg_unref(cur);
            if (cur_del)
                roaring_bitmap_free(cur_del);
            continue;
        }
        t->segs[w] = cur;
        t->dels[w] = cur_del;
        t->meta[w] = cur_meta;
        w++;
    }
    if (nd)
        roaring_bitmap_free(nd);
    t->n_segs = w;
    /* pending deletes of sources now point at the merged segment */
    int q2 = 0;
    for (int q = 0; q < t->n_pdel; q++) {
        if (!t->pdel[q].seg) {
            roaring_bitmap_free(t->pdel[q].bm);
            continue;
        }
        t->pdel[q2++] = t->pdel[q];
    }
    t->n_pdel = q2;
    if (!roaring_bitmap_is_empty(npd)) {
        PendDel *np = qr_realloc(t->pdel, ((size_t)t->n_pdel + 1) * sizeof *np);
        if (np) {
            t->pdel = np;
            t->pdel[t->n_pdel].seg = ns;
            t->pdel[t->n_pdel].bm = npd;
            t->n_pdel++;
            npd = NULL;
        }
    }
    if (npd)
        roaring_bitmap_free(npd);
    t->merges_done++;
    if ((rc = publish(t, err)) == QR_OK)
        rc = checkpoint_locked(t, err);
    if (rc == QR_OK) {
        /* the durable manifest no longer names the sources: remove them */
        for (int k = 0; k < p->n; k++) {
            seg_file_name(path, sizeof path, t->dir, p->ids[k]);
            unlink(path);
            seg_remove_btree_files(path);
        }
        remove_stale_del_files(t);
    }
    for (int k = 0; k < n_old; k++)
        seg_unref(old[k]);
    qr_free(old);
out:
    if (remap) {
        for (int k = 0; k < p->n; k++)
            qr_free(remap[k]);
        qr_free(remap);
    }
    pthread_cond_broadcast(&t->idle_cv);
    pthread_mutex_unlock(&t->wlock);
    return rc;
}

static void *merge_main(void *arg)
{
    Table *t = arg;
    for (;;) {
        pthread_mutex_lock(&t->wlock);
        while (!t->stop && !t->merge_due)
            pthread_cond_wait(&t->merge_cv, &t->wlock);
        if (t->stop) {
            pthread_mutex_unlock(&t->wlock);
            break;
        }
        t->merge_due = false;
        pthread_mutex_unlock(&t->wlock);
        for (;;) {
            pthread_mutex_lock(&t->merge_lock);
            pthread_mutex_lock(&t->wlock);
            MergePick p = {0};
            bool have = !t->stop && !t->broken && choose_merge(t, false, &p);
            pthread_mutex_unlock(&t->wlock);
            if (!have) {
                pthread_mutex_unlock(&t->merge_lock);
                break;
            }
            QrError e;
            qr_error_clear(&e);
            if (run_merge(t, &p, &e) != QR_OK)
                qr_log(QR_LOG_WARN, "merge in table \"%s\" failed: %s", t->dir, e.message);
            pick_free(&p);
            pthread_mutex_unlock(&t->merge_lock);
        }
        pthread_mutex_lock(&t->wlock);
        pthread_cond_broadcast(&t->idle_cv);
        pthread_mutex_unlock(&t->wlock);
    }
    return NULL;
}

int table_force_merge(Table *t, QrError *err)
{
    pthread_mutex_lock(&t->merge_lock);
    pthread_mutex_lock(&t->wlock);
    MergePick p = {0};
    bool have = !t->broken && choose_merge(t, true, &p);
    pthread_mutex_unlock(&t->wlock);
    int rc = QR_OK;
    if (have) {
        rc = run_merge(t, &p, err);
        pick_free(&p);
    }
    pthread_mutex_unlock(&t->merge_lock);
    return rc;
}

void table_wait_merges(Table *t)
{
    /* merge_lock is held by whoever merges: taking it waits for a running
     * merge; then run whatever the policy still wants, here. */
    for (;;) {
        pthread_mutex_lock(&t->merge_lock);
        pthread_mutex_lock(&t->wlock);
        MergePick p = {0};
        bool more = !t->broken && choose_merge(t, false, &p);
        t->merge_due = false;
        pthread_mutex_unlock(&t->wlock);
        if (more) {
            QrError e;
            qr_error_clear(&e);
            if (run_merge(t, &p, &e) != QR_OK)
                more = false;
            pick_free(&p);
        }
        pthread_mutex_unlock(&t->merge_lock);
        if (!more)
            return;
    }
}

/* ---- open / create / close ---- */

static Table *table_alloc(const char *dir, const TableOpts *opts)
{
    Table *t = qr_calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->dir = qr_strdup(dir);
    if (!t->dir) {
        qr_free(t);
        return NULL;
    }
    if (opts)
        t->opts = *opts;
    else
        table_opts_default(&t->opts);
    pthread_mutex_init(&t->wlock, NULL);
    pthread_mutex_init(&t->snap_lock, NULL);
    pthread_mutex_init(&t->merge_lock, NULL);
    pthread_cond_init(&t->merge_cv, NULL);
    pthread_cond_init(&t->idle_cv, NULL);
    t->next_seg_id = 1;
    qr_error_clear(&t->broken_err);
    return t;
}

static void table_release(Table *t)
{
    if (!t)
        return;
    clear_pending(t);
    for (int i = 0; i < t->n_segs; i++) {
        seg_unref(t->segs[i]);
        if (t->dels[i])
            roaring_bitmap_free(t->dels[i]);
    }
    qr_free(t->segs);
    qr_free(t->dels);
    qr_free(t->meta);
    qr_free(t->pending);
    qr_free(t->pending_bdels);
    qr_free(t->pending_ids);
    qr_free(t->pdel);
    if (t->snap)
        snapshot_release(t->snap);
    if (t->wal)
        wal_close(t->wal);
    pthread_mutex_destroy(&t->wlock);
    pthread_mutex_destroy(&t->snap_lock);
    pthread_mutex_destroy(&t->merge_lock);
    pthread_cond_destroy(&t->merge_cv);
    pthread_cond_destroy(&t->idle_cv);
    qr_free(t->dir);
    qr_free(t);
}

static int start_wal_and_merges(Table *t, uint64_t next_lsn, QrError *err)
{
    if (t->opts.read_only)
        return QR_OK;
    char *wdir = path_join(t->dir, "wal");
    if (!wdir)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    int rc = qr_mkdir_p(wdir, err);
    if (rc == QR_OK)
        rc = wal_open(wdir, t->opts.fsync, t->opts.fsync_batch_ms, next_lsn, &t->wal, err);
    qr_free(wdir);
    if (rc != QR_OK)
        return rc;
    t->wal_at_ckpt = wal_bytes(t->wal);
    if (t->opts.background_merge) {
        if (pthread_create(&t->merge_thr, NULL, merge_main, t) != 0)
            return qr_error_set(err, QR_EINTERNAL, "could not start the merge thread");
        t->merge_thr_started = true;
    }
    return QR_OK;
}

int table_create(const char *dir, const QrSchema *schema, const TableOpts *opts, Table **out,
                 QrError *err)
{
    *out = NULL;
    if (qr_path_exists(dir)) {
        char *mf = path_join(dir, "MANIFEST");
        bool exists = mf && qr_path_exists(mf);
        qr_free(mf);
        if (exists)
            return qr_error_set(err, QR_EEXISTS, "table directory \"%s\" already holds a table",
                                dir);
    }
    int rc = qr_mkdir_p(dir, err);
    if (rc != QR_OK)
        return rc;
    Table *t = table_alloc(dir, opts);
    if (!t)
        return qr_error_set(err, QR_ENOMEM, "out of memory opening a table");
    t->schema = *schema;
    t->checkpoint_lsn = 1;
    if ((rc = publish(t, err)) != QR_OK || (rc = checkpoint_locked(t, err)) != QR_OK ||
        (rc = start_wal_and_merges(t, 1, err)) != QR_OK) {
        table_close(t);
        return rc;
    }
    *out = t;
    return QR_OK;
}

typedef struct ReplayOp {
    uint8_t type;
    uint8_t *data; /* owns */
    size_t len;
} ReplayOp;

typedef struct ReplayCtx {
    Table *t;
    ReplayOp *ops;
    size_t n, cap;
    uint64_t open_bytes;  /* WAL bytes of the ops waiting for a COMMIT */
    uint64_t last_lsn;
    uint64_t applied, skipped;
    QrError *err;
    int rc;
} ReplayCtx;

static void replay_drop(ReplayCtx *rc)
{
    for (size_t i = 0; i < rc->n; i++)
        qr_free(rc->ops[i].data);
    rc->n = 0;
    rc->open_bytes = 0;
}

static int replay_cb(void *arg, uint8_t type, uint64_t lsn, const uint8_t *payload, size_t len)
{
    ReplayCtx *rc = arg;
    rc->last_lsn = lsn;
    if (type == WAL_COMMIT) {
        Table *t = rc->t;
        for (size_t i = 0; i < rc->n; i++) {
            ReplayOp *op = &rc->ops[i];
            QrError e;
            qr_error_clear(&e);
            int r;
            if (op->type == WAL_PUT)
                r = table_put(t, (const char *)op->data, op->len, NULL, &e);
            else
                r = table_delete_key(t, op->data, op->len, NULL, &e);
            if (r == QR_OK)
                rc->applied++;
            else if (r == QR_ENOMEM || r == QR_EIO) {
                qr_error_copy(rc->err, &e);
                return rc->rc = r;
            } else
                rc->skipped++; /* rejected the first time too: not acknowledged */
        }
        replay_drop(rc);
        QrError e;
        qr_error_clear(&e);
        pthread_mutex_lock(&t->wlock);
        int r = commit_locked(t, &e);
        pthread_mutex_unlock(&t->wlock);
        if (r != QR_OK) {
            qr_error_copy(rc->err, &e);
            return rc->rc = r;
        }
        return 0;
    }
    if (type != WAL_PUT && type != WAL_DELETE)
        return 0; /* unknown record types from a newer minor version are ignored */
    if (rc->n == rc->cap) {
        size_t nc = rc->cap ? rc->cap * 2 : 256;
        ReplayOp *no = qr_realloc(rc->ops, nc * sizeof *no);
        if (!no)
            return rc->rc = qr_error_set(rc->err, QR_ENOMEM, "out of memory replaying the WAL");
        rc->ops = no;
        rc->cap = nc;
    }
    uint8_t *d = qr_malloc(len + 1);
    if (!d)
        return rc->rc = qr_error_set(rc->err, QR_ENOMEM, "out of memory replaying the WAL");
    memcpy(d, payload, len);
    d[len] = 0;
    rc->ops[rc->n++] = (ReplayOp){type, d, len};
    rc->open_bytes += len + WAL_RECORD_OVERHEAD;
    return 0;
}

/* Remove files of this table that the manifest does not name. */
static void remove_stray_files(Table *t)
{
    DIR *d = opendir(t->dir);
    if (!d)
        return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        unsigned long long id, gen;
        int fld, end = 0;
        bool keep = true;
        size_t nl = strlen(e->d_name);
        if (sscanf(e->d_name, "seg-%16llx.f%d.qbt%n", &id, &fld, &end) == 2 &&
            (size_t)end == nl) {
            /* a B-tree side file: kept for a live (or pending) segment whose
             * field the schema indexes */
            keep = false;
            if (fld >= 0 && fld < t->schema.n_fields && t->schema.fields[fld].btree) {
                for (int i = 0; i < t->n_segs; i++)
                    if (t->meta[i].id == id)
                        keep = true;
                for (int k = 0; k < t->n_pending; k++)
                    if (t->pending_ids[k] == id)
                        keep = true;
            }
        } else if (sscanf(e->d_name, "seg-%16llx.del.%llu", &id, &gen) == 2) {
            keep = false;
            for (int i = 0; i < t->n_segs; i++)
                if (t->meta[i].id == id && t->meta[i].del_gen == gen)
                    keep = true;
        } else if (sscanf(e->d_name, "seg-%16llx.qseg", &id) == 1 && nl == 4 + 16 + 5) {
            keep = false;
            for (int i = 0; i < t->n_segs; i++)
                if (t->meta[i].id == id)
                    keep = true;
            for (int k = 0; k < t->n_pending; k++) /* spilled, not yet committed */
                if (t->pending_ids[k] == id)
                    keep = true;
        } else if (nl > 4 && !strcmp(e->d_name + nl - 4, ".tmp")) {
            keep = false;
        }
        if (!keep) {
            snprintf(path, sizeof path, "%s/%s", t->dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
}

static void remove_stale_del_files(Table *t) { remove_stray_files(t); }

int table_open(const char *dir, const TableOpts *opts, Table **out, QrError *err)
{
    *out = NULL;
    Manifest m;
    memset(&m, 0, sizeof m);
    int rc = manifest_read(dir, &m, err);
    if (rc != QR_OK)
        return rc;
    Table *t = table_alloc(dir, opts);
    if (!t) {
        manifest_free(&m);
        return qr_error_set(err, QR_ENOMEM, "out of memory opening a table");
    }
    if (!m.schema_json) {
        rc = qr_error_set(err, QR_ECORRUPT, "manifest of table \"%s\" has no schema", dir);
        goto fail;
    }
    if ((rc = schema_from_json(m.schema_json, strlen(m.schema_json), &t->schema, err)) != QR_OK)
        goto fail;
    t->manifest_gen = m.generation;
    t->checkpoint_lsn = m.checkpoint_lsn;
    t->next_seg_id = m.next_seg_id ? m.next_seg_id : 1;
    if (segs_reserve(t, (int)m.n_segs) != 0) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory opening a table");
        goto fail;
    }
    char path[4096];
    int salvaged = 0; /* segments left out by --salvage */
    for (uint32_t i = 0; i < m.n_segs; i++) {
        ManifestSeg *ms = &m.segs[i];
        seg_file_name(path, sizeof path, dir, ms->id);
        Segment *s;
        QrError e;
        qr_error_clear(&e);
        rc = seg_open(path, ms->id, &s, &e);
        if (rc == QR_OK && seg_n_docs(s) != ms->n_docs) {
            rc = qr_error_set(&e, QR_ECORRUPT, "segment file \"%s\" has %u docs, manifest says %u",
                              path, seg_n_docs(s), ms->n_docs);
            seg_unref(s);
        }
        /* Every byte of every segment is checked once at open (CRC-32C of
         * each section, at memory speed), so damage inside a postings or
         * column block that reads cannot see is reported here instead of
         * being served. */
        if (rc == QR_OK && (rc = seg_verify(s, &e)) != QR_OK)
            seg_unref(s);
        if (rc == QR_OK &&
            (rc = seg_sync_btrees(s, &t->schema, !t->opts.read_only, false, &e)) != QR_OK)
            seg_unref(s);
        if (rc != QR_OK) {
            if (t->opts.salvage) {
                qr_log(QR_LOG_WARN, "salvage: leaving out segment %llu: %s",
                       (unsigned long long)ms->id, e.message);
                salvaged++;
                /* Kept for inspection as "<file>.damaged" (never deleted as
                 * a stray): the next manifest this process writes no longer
                 * names it.  A read-only open changes nothing. */
                if (!t->opts.read_only) {
                    char aside[4096 + 16];
                    snprintf(aside, sizeof aside, "%s.damaged", path);
                    if (rename(path, aside) == 0)
                        qr_log(QR_LOG_WARN, "salvage: moved \"%s\" to \"%s\"", path, aside);
                }
                rc = QR_OK;
                continue;
            }
            qr_error_copy(err, &e);
            goto fail;
        }
        roaring_bitmap_t *del = NULL;
        if (ms->del_gen) {
            del_file_name(path, sizeof path, dir, ms->id, ms->del_gen);
            if ((rc = deletes_read(path, &del, err)) != QR_OK) {
                seg_unref(s);
                goto fail;
            }
        }
        int k = t->n_segs++;
        t->segs[k] = s;
        t->dels[k] = del;
        t->meta[k] = (SegMeta){.id = ms->id, .synced = true, .del_gen = ms->del_gen};
    }
    if (!t->opts.read_only)
        remove_stray_files(t);
    if ((rc = publish(t, err)) != QR_OK)
        goto fail;
    /* replay */
    {
        char *wdir = path_join(dir, "wal");
        if (!wdir) {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory");
            goto fail;
        }
        ReplayCtx rcx = {.t = t, .err = err, .last_lsn = t->checkpoint_lsn - 1};
        WalReplayStats st;
        memset(&st, 0, sizeof st);
        t->replaying = true;
        if (qr_path_exists(wdir))
            rc = wal_replay(wdir, t->checkpoint_lsn, replay_cb, &rcx, &st, err);
        t->replaying = false;
        uint64_t unapplied = rcx.open_bytes; /* records of a batch that never committed */
        replay_drop(&rcx);
        qr_free(rcx.ops);
        qr_free(wdir);
        /* uncommitted tail: discarded like after a crash */
        clear_pending(t);
        if (rc != QR_OK)
            goto fail;
        t->recovered = rcx.applied;
        t->torn_cut = st.torn_bytes_cut + unapplied;
        if (st.torn_bytes_cut)
            qr_log(QR_LOG_WARN, "table \"%s\": cut a torn WAL tail of %llu bytes in %s", dir,
                   (unsigned long long)st.torn_bytes_cut, st.torn_file);
        if (unapplied)
            qr_log(QR_LOG_INFO, "table \"%s\": %llu WAL bytes of an uncommitted batch discarded",
                   dir, (unsigned long long)unapplied);
        uint64_t next = (st.last_lsn >= rcx.last_lsn ? st.last_lsn : rcx.last_lsn) + 1;
        if (next < t->checkpoint_lsn)
            next = t->checkpoint_lsn;
        if ((rc = start_wal_and_merges(t, next, err)) != QR_OK)
            goto fail;
        /* a writable salvage open records the smaller segment set at once,
         * so the next plain open finds a manifest naming only good files */
        bool changed = rcx.applied || st.records || salvaged;
        if (!changed)
            t->ckpt_due = false; /* nothing new since the manifest */
        if (changed && !t->opts.read_only) {
            pthread_mutex_lock(&t->wlock);
            rc = checkpoint_locked(t, err);
            pthread_mutex_unlock(&t->wlock);
            if (rc != QR_OK)
                goto fail;
        }
    }
    manifest_free(&m);
    *out = t;
    return QR_OK;
fail:
    manifest_free(&m);
    table_close(t);
    return rc;
}

void table_close(Table *t)
{
    if (!t)
        return;
    if (t->merge_thr_started) {
        pthread_mutex_lock(&t->wlock);
        t->stop = true;
        pthread_cond_signal(&t->merge_cv);
        pthread_mutex_unlock(&t->wlock);
        pthread_join(t->merge_thr, NULL);
        t->merge_thr_started = false;
    }
    pthread_mutex_lock(&t->wlock);
    clear_pending(t);
    if (!t->broken && t->wal && t->ckpt_due) {
        QrError e;
        qr_error_clear(&e);
        if (checkpoint_locked(t, &e) != QR_OK)
            qr_log(QR_LOG_WARN, "checkpoint at close of \"%s\" failed: %s", t->dir, e.message);
    }
    pthread_mutex_unlock(&t->wlock);
    table_release(t);
}

int table_add_field(Table *t, const QrField *f, QrError *err)
{
    pthread_mutex_lock(&t->wlock);
    int rc = QR_OK;
    if (t->dirty || t->builder) {
        rc = commit_locked(t, err);
        if (rc != QR_OK)
            goto out;
    }
    QrSchema ns = t->schema;
    if (schema_add_field(&ns, f, err) < 0) {
        rc = err ? err->code : QR_EINVAL;
        goto out;
    }
    t->schema = ns;
    rc = checkpoint_locked(t, err);
out:
    pthread_mutex_unlock(&t->wlock);
    return rc;
}

/* Set field `field`'s btree flag to `on` and make every segment follow:
 * trees built (or detached) under the write lock, then the schema persisted
 * in the manifest.  A failure restores the old schema and trees. */
static int set_index(Table *t, int field, bool on, QrError *err)
{
    pthread_mutex_lock(&t->wlock);
    int rc = QR_OK;
    QrSchema old = t->schema;
    if (field < 0 || field >= t->schema.n_fields) {
        rc = qr_error_set(err, QR_ENOTFOUND, "table \"%s\" has no field %d", t->dir, field);
        goto out;
    }
    const QrField *f = &t->schema.fields[field];
    if (on && schema_column_type(f) < 0) {
        rc = qr_error_set(err, QR_EINVAL, "field \"%s\" has no column to index", f->name);
        qr_error_hint(err, "B-tree indexes cover keyword, int, float, bool and timestamp fields, "
                           "and text fields kept as columns");
        goto out;
    }
    if (on && f->btree) {
        rc = qr_error_set(err, QR_EEXISTS, "field \"%s\" already has a B-tree index", f->name);
        goto out;
    }
    if (!on && !f->btree) {
        rc = qr_error_set(err, QR_ENOTFOUND, "field \"%s\" has no B-tree index", f->name);
        goto out;
    }
    if (t->dirty || t->builder) {
        if ((rc = commit_locked(t, err)) != QR_OK)
            goto out;
    }
    t->schema.fields[field].btree = on;
    bool do_fsync = t->opts.fsync != QR_FSYNC_OFF;
    for (int i = 0; i < t->n_segs && rc == QR_OK; i++)
        rc = seg_sync_btrees(t->segs[i], &t->schema, true, do_fsync, err);
    if (rc == QR_OK && do_fsync && on)
        rc = qr_fsync_dir(t->dir, err);
    if (rc == QR_OK)
        rc = checkpoint_locked(t, err);
    if (rc != QR_OK) {
        t->schema = old;
        QrError e2;
        qr_error_clear(&e2);
        for (int i = 0; i < t->n_segs; i++)
            seg_sync_btrees(t->segs[i], &t->schema, false, false, &e2);
    }
    if (rc != QR_OK ? on : !on) {
        /* files of trees no segment uses any more */
        char path[4096], bpath[4096];
        for (int i = 0; i < t->n_segs; i++) {
            seg_file_name(path, sizeof path, t->dir, t->meta[i].id);
            seg_btree_path(bpath, sizeof bpath, path, field);
            unlink(bpath);
        }
    }
out:
    pthread_mutex_unlock(&t->wlock);
    return rc;
}

int table_create_index(Table *t, int field, QrError *err) { return set_index(t, field, true, err); }
int table_drop_index(Table *t, int field, QrError *err) { return set_index(t, field, false, err); }

void table_info(Table *t, TableInfo *info)
{
    memset(info, 0, sizeof *info);
    Snapshot *s = table_snapshot(t);
    info->n_live = s->n_live;
    info->n_docs = s->n_docs;
    info->n_segments = (uint64_t)s->n_segs;
    for (int i = 0; i < s->n_segs; i++)
        info->disk_bytes += seg_file_bytes(s->segs[i]);
    snapshot_release(s);
    pthread_mutex_lock(&t->wlock);
    info->wal_bytes = t->wal ? wal_bytes(t->wal) : 0;
    info->merges_done = t->merges_done;
    info->merges_running = (uint64_t)t->merges_running;
    info->merges_failed = t->merges_failed;
    info->commits = t->commits;
    info->checkpoints = t->checkpoints;
    info->recovered_records = t->recovered;
    info->torn_bytes_cut = t->torn_cut;
    pthread_mutex_unlock(&t->wlock);
}

int table_verify(Table *t, QrError *err)
{
    Snapshot *s = table_snapshot(t);
    int rc = QR_OK;
    for (int i = 0; i < s->n_segs && rc == QR_OK; i++)
        rc = seg_verify(s->segs[i], err);
    snapshot_release(s);
    return rc;
}
