/*
 * table.c — write path, commit, recovery, checkpoints, snapshots.
 *
 * Layer: index/.  Calls segment (index/), wal, manifest, sfile, util
 * (store/); merges are table_merge.c's.  The protocol is described in
 * table.h; the files:
 *
 *   <table>/MANIFEST                sealed: schema, segment files, checkpoint LSN
 *   <table>/seg-<id>.qseg           immutable segments (index/segment.h)
 *   <table>/seg-<id>.del.<gen>      roaring bitmap of deleted docs
 *   <table>/seg-<id>.f<k>.qbt       B-tree of field k (index/btree.h), for
 *                                   fields the schema indexes; derived data:
 *                                   built at spill/merge/CREATE INDEX and
 *                                   rebuilt at open when missing or damaged
 *   <table>/wal/wal-<lsn>.log       write-ahead log (store/wal.h)
 *
 * Invariants (under wlock):
 *   - segs/dels/meta describe the committed state (every commit written to
 *     the WAL); the installed snapshot is a copy of them as of a commit the
 *     WAL promises (segments referenced, bitmaps copied), and newer copies
 *     wait in `pending` (table_int.h).
 *   - Every change in the WAL at LSN >= checkpoint_lsn that is followed by a
 *     COMMIT record is either in segs/dels or will be replayed on open.
 *   - The WAL holds whole commits only: a batch's records reach it at its
 *     commit, all of them followed by the COMMIT record, written by one
 *     wal_write (which cuts the file back when it fails).  So no record of
 *     an uncommitted batch is ever in the WAL while the table runs, and the
 *     checkpoint LSN is the WAL's next LSN -- or the lowest LSN of an
 *     in-memory segment's commits, which no file holds yet.
 *   - A segment file is referenced by the durable MANIFEST, or by a
 *     committed WAL_SEGMENT record, only after it was fsynced; files named
 *     by neither are deleted on open.  A bulk commit logs its segments by
 *     id instead of its documents only while the in-memory tier is empty,
 *     so any manifest naming such a segment has a checkpoint LSN past its
 *     record: a replay never meets a commit older than a segment it holds.
 *     Batches write their segment files before they commit; those files are
 *     named by nothing until the commit, so only open (when no batch
 *     exists) removes unnamed segment files -- merges remove only stale
 *     deletes files.
 *
 * Batches (TableBatch, table.h): a writer's puts and deletes go to its own
 * SegBuilder (a copy of the schema, refreshed when a field is added) and to
 * its record buffer (the WAL records it will append at commit) and key
 * list.  The deletes a batch makes of committed documents are resolved at
 * its commit, under wlock, against the committed state of that moment, so
 * that a merge or another writer's commit in between cannot be missed.
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

#include "index/table_int.h"

void table_opts_default(TableOpts *o)
{
    memset(o, 0, sizeof *o);
    o->fsync = QR_FSYNC_COMMIT;
    o->fsync_batch_ms = 10;
    o->builder_bytes = 256u << 20;
    o->checkpoint_wal_bytes = 256u << 20;
    o->background_merge = true;
    o->merge_factor = 8;
    o->nrt_commit_docs = 1024;
    o->nrt_commit_bytes = 1u << 20;
    o->nrt_flush_bytes = 64u << 20;
    o->nrt_flush_ms = 5000;
    o->nrt_merge_factor = 8;
    o->nrt_max_segments = 32;
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

void table_seg_path(char *out, size_t n, const char *dir, uint64_t id)
{
    snprintf(out, n, "%s/seg-%016llx.qseg", dir, (unsigned long long)id);
}

void table_mem_seg_name(char *out, size_t n, const char *dir, uint64_t id)
{
    snprintf(out, n, "%s/in-memory segment %llu", dir, (unsigned long long)id);
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

/* Room for one more pending snapshot (wlock held; snap_lock taken). */
static bool pending_grow(Table *t)
{
    pthread_mutex_lock(&t->snap_lock);
    int nc = t->cap_pending ? t->cap_pending * 2 : 8;
    Snapshot **np = qr_realloc(t->pending, (size_t)nc * sizeof *np);
    if (np) {
        t->pending = np;
        t->cap_pending = nc;
    }
    pthread_mutex_unlock(&t->snap_lock);
    return np != NULL;
}

void table_install_acked(Table *t)
{
    uint64_t acked = t->wal ? wal_acked_lsn(t->wal) : UINT64_MAX;
    Snapshot *drop[64];
    int n_drop = 0;
    pthread_mutex_lock(&t->snap_lock);
    int k = -1;
    for (int i = 0; i < t->n_pending && t->pending[i]->lsn <= acked; i++)
        k = i;
    if (k >= 0) {
        /* the newest the WAL promises goes in; the older pending ones were
         * never shown and go (released outside the lock when few) */
        drop[n_drop++] = t->snap;
        t->snap = t->pending[k];
        for (int i = 0; i < k; i++) {
            if (n_drop < 64)
                drop[n_drop++] = t->pending[i];
            else
                snapshot_release(t->pending[i]);
        }
        t->n_pending -= k + 1;
        memmove(t->pending, t->pending + k + 1, (size_t)t->n_pending * sizeof *t->pending);
    }
    pthread_mutex_unlock(&t->snap_lock);
    for (int i = 0; i < n_drop; i++)
        snapshot_release(drop[i]);
}

int table_publish_locked(Table *t, QrError *err)
{
    Snapshot *s = qr_calloc(1, sizeof *s);
    if (!s)
        return qr_error_set(err, QR_ENOMEM, "out of memory publishing a snapshot");
    int n = t->n_segs;
    s->segs = qr_calloc((size_t)n + 1, sizeof *s->segs);
    s->dels = qr_calloc((size_t)n + 1, sizeof *s->dels);
    s->base = qr_calloc((size_t)n + 1, sizeof *s->base);
    if (!s->segs || !s->dels || !s->base ||
        (t->n_pending == t->cap_pending && !pending_grow(t))) {
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
    /* every commit whose records are in the WAL file is in it (wlock) */
    s->lsn = t->wal ? wal_next_lsn(t->wal) : 0;
    t->ckpt_due = true;
    pthread_mutex_lock(&t->snap_lock);
    t->pending[t->n_pending++] = s;
    pthread_mutex_unlock(&t->snap_lock);
    table_install_acked(t);
    return QR_OK;
}

/* ---- committed-state helpers (under wlock) ---- */

int table_segs_reserve(Table *t, int extra)
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

static int fail_broken(Table *t, QrError *err)
{
    qr_error_copy(err, &t->broken_err);
    return t->broken_err.code ? t->broken_err.code : QR_EIO;
}

/* Refuse writes from now on: a commit's outcome is unknown (its records
 * may or may not be durable) or its durable changes could not be applied.
 * Reopening recovers from the WAL.  Under wlock. */
static void set_broken(Table *t, const QrError *cause)
{
    if (t->broken)
        return;
    t->broken = true;
    qr_error_clear(&t->broken_err);
    qr_error_set(&t->broken_err, cause->code ? cause->code : QR_EIO, "%s", cause->message);
    qr_error_detail(&t->broken_err, "table \"%s\" refuses writes since a commit failed with an "
                                    "unknown outcome", t->dir);
    qr_error_hint(&t->broken_err, "restart the server: reopening the table recovers every "
                                  "commit from the write-ahead log");
}

/* ---- batches ---- */

/* A segment file written by a batch: spilled while it filled, or its last
 * builder at commit.  Named by no manifest until the commit. */
typedef struct BatchSeg {
    Segment *seg;           /* owns a reference */
    roaring_bitmap_t *bdel; /* owns: its docs deleted inside the batch (maybe empty) */
    uint64_t id;
    bool durable;           /* a file written for a bulk batch, fsynced unless --fsync off */
    bool logged;            /* recovery's: the file a committed WAL_SEGMENT record names,
                               which the WAL owns -- never removed with the batch */
} BatchSeg;

/* Encoding of TableBatch.recs: per put or delete the WAL record the commit
 * appends, [u8 type][u32 payload length][payload]; of TableBatch.keys: per
 * distinct key the batch put or deleted, [u16 length][primary key bytes]. */
#define BATCH_REC_HDR 5
#define BATCH_KEY_HDR 2

/* Invariants: the batch's live documents are the live docs of segs[] and of
 * the builder; a key has at most one live copy among them.  recs lists
 * every put and delete in order (n_ops; it stays empty in a replay batch),
 * keys every key they touched once (n_keys), and kslot indexes keys.  For
 * a key in keys the batch alone knows whether it is live; for any other
 * key the committed state does.  Nothing here is reachable by readers or
 * in the WAL. */
struct TableBatch {
    Table *t;                 /* borrows */
    QrSchema *schema;         /* owns: copy of the table's schema; builders borrow it */
    uint64_t fields_gen;      /* t->fields_gen when copied */
    SegBuilder *builder;      /* owns; NULL until the first put after a write-out */
    BatchSeg *segs;           /* owns: spilled segment files, oldest first */
    int n_segs, cap_segs;
    QrBuf recs;               /* owns */
    QrBuf keys;               /* owns */
    size_t *kslot;            /* owns: open addressing, offset + 1 of a key in keys, 0 = empty */
    size_t n_kslot;           /* 0 or a power of two > 2 * n_keys */
    uint64_t n_ops, n_keys;
    uint64_t n_dels;          /* deletes among the ops */
    bool replay;              /* recovery's batch: its records are in the WAL already */
    bool bulk;                /* commits write files, never the in-memory tier */
    uint64_t lsn_lo, lsn_hi;  /* replay: lsns of its first and last record */
    QrError poison;           /* set: the batch lost documents and can only fail */
};

/* Copy the table's schema into the batch.  Under wlock, builder-less. */
static void batch_copy_schema_locked(TableBatch *b)
{
    *b->schema = b->t->schema;
    b->fields_gen = atomic_load(&b->t->fields_gen);
}

static void batch_poison(TableBatch *b, const QrError *cause)
{
    if (b->poison.code == QR_OK) {
        if (cause && cause->code)
            qr_error_copy(&b->poison, cause);
        else
            qr_error_set(&b->poison, QR_EIO, "batch failed");
        qr_error_detail(&b->poison, "the batch lost documents it was setting aside: nothing "
                                    "of it is written, it can only be discarded");
    }
}

/* Drop a batch segment; with `remove` its files go too (it was never
 * committed). */
static void batch_seg_drop(BatchSeg *bs, bool remove)
{
    if (bs->logged)
        remove = false;
    if (bs->seg) {
        char path[4096];
        snprintf(path, sizeof path, "%s", seg_path(bs->seg));
        if (seg_in_memory(bs->seg))
            remove = false; /* no file */
        seg_unref(bs->seg);
        if (remove) {
            unlink(path);
            seg_remove_btree_files(path);
        }
    }
    if (bs->bdel)
        roaring_bitmap_free(bs->bdel);
    bs->seg = NULL;
    bs->bdel = NULL;
}

/* Empty the batch for reuse.  remove_files: its segment files were not
 * committed (after a commit the table owns them and their slots are empty). */
static void batch_reset(TableBatch *b, bool remove_files)
{
    segb_free(b->builder);
    b->builder = NULL;
    for (int k = 0; k < b->n_segs; k++)
        batch_seg_drop(&b->segs[k], remove_files);
    b->n_segs = 0;
    /* keep small buffers for the next round, give big ones back */
    if (b->recs.cap > (1u << 20))
        qr_buf_free(&b->recs);
    if (b->keys.cap > (1u << 20))
        qr_buf_free(&b->keys);
    b->recs.len = 0;
    b->keys.len = 0;
    b->recs.oom = b->keys.oom = false;
    if (b->n_kslot > 4096) {
        qr_free(b->kslot);
        b->kslot = NULL;
        b->n_kslot = 0;
    } else if (b->kslot) {
        memset(b->kslot, 0, b->n_kslot * sizeof *b->kslot);
    }
    b->n_ops = b->n_keys = b->n_dels = 0;
    b->lsn_lo = b->lsn_hi = 0;
    qr_error_clear(&b->poison);
}

int table_batch_begin(Table *t, TableBatch **out, QrError *err)
{
    *out = NULL;
    TableBatch *b = qr_calloc(1, sizeof *b);
    QrSchema *sc = b ? qr_malloc(sizeof *sc) : NULL;
    if (!sc) {
        qr_free(b);
        return qr_error_set(err, QR_ENOMEM, "out of memory starting a write batch");
    }
    b->t = t;
    b->schema = sc;
    qr_buf_init(&b->recs);
    qr_buf_init(&b->keys);
    qr_error_clear(&b->poison);
    pthread_mutex_lock(&t->wlock);
    batch_copy_schema_locked(b);
    pthread_mutex_unlock(&t->wlock);
    *out = b;
    return QR_OK;
}

void table_batch_free(TableBatch *b)
{
    if (!b)
        return;
    batch_reset(b, true);
    qr_buf_free(&b->recs);
    qr_buf_free(&b->keys);
    qr_free(b->kslot);
    qr_free(b->segs);
    qr_free(b->schema);
    qr_free(b);
}

uint64_t table_batch_ops(const TableBatch *b) { return b->n_ops; }
uint64_t table_batch_keys(const TableBatch *b) { return b->n_keys; }
void table_batch_set_bulk(TableBatch *b, bool bulk) { b->bulk = bulk; }

static int batch_ensure_builder(TableBatch *b, QrError *err)
{
    if (b->builder)
        return QR_OK;
    if (b->n_ops == 0 && atomic_load(&b->t->fields_gen) != b->fields_gen) {
        /* a fresh batch picks up fields added since its last commit */
        pthread_mutex_lock(&b->t->wlock);
        batch_copy_schema_locked(b);
        pthread_mutex_unlock(&b->t->wlock);
    }
    return segb_new(b->schema, &b->builder, err);
}

/* Write the batch's builder out as a segment of its own and add it to
 * segs[]: at a commit (`at_commit`), a small builder becomes an in-memory
 * segment (the NRT tier: table.h) unless that tier is far behind its
 * flushes; otherwise a segment file, with the B-trees of the batch's
 * schema (the commit re-syncs them with the table's under wlock).  Runs
 * outside wlock (the id is reserved under it).  On failure the builder's
 * documents are gone (the caller poisons the batch or fails the commit). */
static int batch_write_builder(TableBatch *b, bool at_commit, QrError *err)
{
    Table *t = b->t;
    if (!b->builder)
        return QR_OK;
    if (segb_n_docs(b->builder) == 0) {
        segb_free(b->builder);
        b->builder = NULL;
        return QR_OK;
    }
    if (b->n_segs == b->cap_segs) {
        int nc = b->cap_segs ? b->cap_segs * 2 : 4;
        BatchSeg *ns = qr_realloc(b->segs, (size_t)nc * sizeof *ns);
        if (!ns)
            return qr_error_set(err, QR_ENOMEM, "out of memory writing a batch segment");
        b->segs = ns;
        b->cap_segs = nc;
    }
    bool to_mem = at_commit && !b->bulk && segb_n_docs(b->builder) <= t->opts.nrt_commit_docs &&
                  segb_mem_bytes(b->builder) <= t->opts.nrt_commit_bytes &&
                  atomic_load(&t->mem_bytes) <= 2 * (uint64_t)t->opts.nrt_flush_bytes;
    bool durable = b->bulk && !b->replay && !to_mem;
    pthread_mutex_lock(&t->wlock);
    uint64_t id = t->next_seg_id++;
    pthread_mutex_unlock(&t->wlock);
    char path[4096];
    roaring_bitmap_t *bdel = NULL;
    Segment *seg = NULL;
    int rc;
    if (to_mem) {
        table_mem_seg_name(path, sizeof path, t->dir, id);
        rc = segb_finish_mem(b->builder, path, id, &seg, &bdel, err);
    } else {
        table_seg_path(path, sizeof path, t->dir, id);
        /* a bulk batch's file may be committed by id (WAL_SEGMENT): it
         * must be durable before the record is */
        rc = segb_finish(b->builder, path, durable && t->opts.fsync != QR_FSYNC_OFF, &bdel, err);
        if (rc == QR_OK)
            rc = seg_open(path, id, &seg, err);
        if (rc == QR_OK)
            rc = seg_sync_btrees(seg, b->schema, true, false, err);
    }
    segb_free(b->builder);
    b->builder = NULL;
    if (rc != QR_OK) {
        seg_unref(seg);
        if (bdel)
            roaring_bitmap_free(bdel);
        if (!to_mem) {
            unlink(path);
            seg_remove_btree_files(path);
        }
        return rc;
    }
    b->segs[b->n_segs++] = (BatchSeg){.seg = seg, .bdel = bdel, .id = id, .durable = durable};
    return QR_OK;
}

/* The live copy of `key` among the batch's spilled segments: its index in
 * segs[] (and *doc), or -1. */
static int batch_find_spilled(const TableBatch *b, const uint8_t *key, size_t len, uint32_t *doc)
{
    for (int k = b->n_segs - 1; k >= 0; k--) {
        int64_t d = seg_pk_lookup(b->segs[k].seg, key, len);
        if (d >= 0 && !roaring_bitmap_contains(b->segs[k].bdel, (uint32_t)d)) {
            *doc = (uint32_t)d;
            return k;
        }
    }
    return -1;
}

/* Does the published snapshot hold a live document with the key? */
static bool committed_has(Table *t, const uint8_t *key, size_t len)
{
    Snapshot *s = table_snapshot(t);
    int seg;
    uint32_t local;
    bool f = snapshot_find_key(s, key, len, &seg, &local);
    snapshot_release(s);
    return f;
}

static uint64_t key_hash(const uint8_t *key, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ key[i]) * 1099511628211ull;
    return h;
}

/* The slot of `key` in kslot: its entry, or the empty slot where it goes
 * (n_kslot > 0). */
static size_t *batch_key_slot(const TableBatch *b, const uint8_t *key, size_t len)
{
    size_t mask = b->n_kslot - 1;
    for (size_t i = (size_t)key_hash(key, len) & mask;; i = (i + 1) & mask) {
        size_t *sl = &b->kslot[i];
        if (!*sl)
            return sl;
        const uint8_t *e = b->keys.data + *sl - 1;
        if (qr_get_u16le(e) == len && !memcmp(e + BATCH_KEY_HDR, key, len))
            return sl;
    }
}

/* Did an earlier put or delete of the batch touch the key? */
static bool batch_key_known(const TableBatch *b, const uint8_t *key, size_t len)
{
    return b->n_kslot && *batch_key_slot(b, key, len) != 0;
}

/* Room for one more record of `n` payload bytes and, when `new_key`, one
 * more key of `klen` bytes, so that recording them cannot fail once the
 * builder was changed. */
static bool batch_reserve(TableBatch *b, size_t n, size_t klen, bool new_key)
{
    if (!b->replay && !qr_buf_try_reserve(&b->recs, BATCH_REC_HDR + n))
        return false;
    if (!new_key)
        return true;
    if (!qr_buf_try_reserve(&b->keys, BATCH_KEY_HDR + klen))
        return false;
    if (2 * (b->n_keys + 1) < b->n_kslot)
        return true;
    size_t ns = b->n_kslot ? b->n_kslot * 2 : 64;
    size_t *sl = qr_calloc(ns, sizeof *sl);
    if (!sl)
        return false;
    size_t *old = b->kslot, n_old = b->n_kslot;
    b->kslot = sl;
    b->n_kslot = ns;
    for (size_t i = 0; i < n_old; i++)
        if (old[i]) {
            const uint8_t *e = b->keys.data + old[i] - 1;
            *batch_key_slot(b, e + BATCH_KEY_HDR, qr_get_u16le(e)) = old[i];
        }
    qr_free(old);
    return true;
}

/* Record a put or delete (room reserved by batch_reserve). */
static void batch_record(TableBatch *b, uint8_t type, const void *p, size_t n,
                         const uint8_t *key, size_t klen, bool new_key)
{
    if (!b->replay) {
        uint8_t h[BATCH_REC_HDR];
        h[0] = type;
        qr_put_u32le(h + 1, (uint32_t)n);
        qr_buf_append(&b->recs, h, sizeof h);
        qr_buf_append(&b->recs, p, n);
    }
    b->n_ops++;
    if (!new_key)
        return;
    *batch_key_slot(b, key, klen) = b->keys.len + 1;
    uint8_t kh[BATCH_KEY_HDR] = {(uint8_t)(klen & 0xff), (uint8_t)(klen >> 8)};
    qr_buf_append(&b->keys, kh, sizeof kh);
    qr_buf_append(&b->keys, key, klen);
    b->n_keys++;
}

/* Add a document to the batch's builder, mark its older copy in a spilled
 * segment, record it when `record` (not when a rebuild replays the
 * records), and spill the builder when it is large.  *in_batch: the key had
 * a live copy in the batch; *known: the batch had touched the key before. */
static int batch_add(TableBatch *b, const char *json, size_t len, const cJSON *root,
                     const uint8_t *key, size_t klen, bool record, bool *in_batch, bool *known,
                     QrError *err)
{
    *in_batch = false;
    *known = batch_key_known(b, key, klen);
    if (record && !batch_reserve(b, len, klen, !*known))
        return qr_error_set(err, QR_ENOMEM, "out of memory buffering a document of %zu bytes",
                            len);
    int rc = batch_ensure_builder(b, err);
    if (rc != QR_OK)
        return rc;
    uint32_t sdoc = 0;
    int sk = batch_find_spilled(b, key, klen, &sdoc);
    uint32_t before = segb_n_live(b->builder), doc;
    if ((rc = segb_add(b->builder, json, len, root, &doc, err)) != QR_OK) {
        if (segb_poisoned(b->builder))
            batch_poison(b, err);
        return rc;
    }
    bool in_builder = segb_n_live(b->builder) == before; /* the new doc replaced one */
    if (sk >= 0 && !in_builder)
        roaring_bitmap_add(b->segs[sk].bdel, sdoc);
    if (record)
        batch_record(b, WAL_PUT, json, len, key, klen, !*known);
    *in_batch = in_builder || sk >= 0;
    if (segb_mem_bytes(b->builder) > b->t->opts.builder_bytes &&
        (rc = batch_write_builder(b, false, err)) != QR_OK)
        batch_poison(b, err); /* the builder's documents went with it */
    return rc;
}

/* Delete the batch's own live copy of a key (cannot fail). */
static bool batch_del(TableBatch *b, const uint8_t *key, size_t klen)
{
    bool f = b->builder && segb_delete_key(b->builder, key, klen);
    uint32_t sdoc = 0;
    int sk = batch_find_spilled(b, key, klen, &sdoc);
    if (sk >= 0)
        roaring_bitmap_add(b->segs[sk].bdel, sdoc);
    return f || sk >= 0;
}

int table_batch_put(TableBatch *b, const char *json, size_t len, const cJSON *root,
                    bool *replaced, QrError *err)
{
    if (replaced)
        *replaced = false;
    if (b->poison.code) {
        qr_error_copy(err, &b->poison);
        return b->poison.code;
    }
    cJSON *own = NULL;
    if (!root) {
        root = own = cJSON_ParseWithLength(json, len);
        if (!root) {
            qr_error_set(err, QR_ESYNTAX, "document is not valid JSON");
            const char *ep = cJSON_GetErrorPtr();
            if (ep && ep >= json && ep <= json + len)
                qr_error_pos(err, ep - json, -1, (int32_t)(ep - json) + 1);
            return QR_ESYNTAX;
        }
    }
    int rc = QR_OK;
    const char *pk = b->schema->primary_key;
    const cJSON *pkv = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, pk) : NULL;
    uint8_t key[PK_KEY_MAX];
    size_t klen = 0;
    bool in_batch = false, known = false;
    if (!cJSON_IsObject(root)) {
        rc = qr_error_set(err, QR_ETYPE, "document is not a JSON object");
    } else if (!pkv || cJSON_IsNull(pkv)) {
        rc = qr_error_set(err, QR_ECONSTRAINT, "document has no primary key \"%s\"", pk);
        qr_error_hint(err, "every document needs a \"%s\" field (a string or an integer)", pk);
    } else if (!(klen = pk_encode(pkv, key, err))) {
        rc = err && err->code ? err->code : QR_ECONSTRAINT;
    } else if (len > WAL_MAX_PAYLOAD) {
        rc = qr_error_set(err, QR_ELIMIT, "document of %zu bytes is over the limit of %u bytes",
                          len, WAL_MAX_PAYLOAD);
    } else {
        rc = batch_add(b, json, len, root, key, klen, true, &in_batch, &known, err);
    }
    if (rc == QR_OK && replaced)
        *replaced = known ? in_batch : committed_has(b->t, key, klen);
    cJSON_Delete(own);
    return rc;
}

int table_batch_delete(TableBatch *b, const uint8_t *key, size_t len, bool *found,
                       QrError *err)
{
    if (found)
        *found = false;
    if (b->poison.code) {
        qr_error_copy(err, &b->poison);
        return b->poison.code;
    }
    if (len == 0 || len > PK_KEY_MAX)
        return qr_error_set(err, QR_EINVAL, "primary key of %zu bytes is not a valid key", len);
    bool known = batch_key_known(b, key, len);
    if (!batch_reserve(b, len, len, !known))
        return qr_error_set(err, QR_ENOMEM, "out of memory buffering a delete");
    bool in_batch = batch_del(b, key, len);
    batch_record(b, WAL_DELETE, key, len, key, len, !known);
    b->n_dels++;
    if (found)
        *found = known ? in_batch : committed_has(b->t, key, len);
    return QR_OK;
}

int table_batch_absorb(TableBatch *dst, TableBatch *src, QrError *err)
{
    if (dst->t != src->t || dst->replay || src->replay)
        return qr_error_set(err, QR_EINVAL, "batches of different tables cannot be joined");
    int rc = QR_OK;
    if (dst->poison.code || src->poison.code) {
        batch_poison(dst, dst->poison.code ? &dst->poison : &src->poison);
        qr_error_copy(err, &dst->poison);
        return dst->poison.code;
    }
    /* both as segments: src's documents go after dst's whatever their
     * builders held */
    if ((rc = table_batch_seal(dst, err)) != QR_OK || (rc = table_batch_seal(src, err)) != QR_OK) {
        if (src->poison.code)
            batch_poison(dst, &src->poison);
        return rc;
    }
    if (dst->n_segs + src->n_segs > dst->cap_segs) {
        int nc = dst->n_segs + src->n_segs + 4;
        BatchSeg *ns = qr_realloc(dst->segs, (size_t)nc * sizeof *ns);
        if (!ns)
            return qr_error_set(err, QR_ENOMEM, "out of memory joining batches");
        dst->segs = ns;
        dst->cap_segs = nc;
    }
    if (!qr_buf_try_reserve(&dst->recs, src->recs.len) ||
        !qr_buf_try_reserve(&dst->keys, src->keys.len))
        return qr_error_set(err, QR_ENOMEM, "out of memory joining batches");
    /* every key src touched: its copy in dst is superseded (src came
     * later), and dst learns the key.  Room for each key is taken before
     * anything changes; a failure after the first change poisons dst */
    const uint8_t *p = src->keys.data, *end = p + src->keys.len;
    while (p < end) {
        size_t klen = qr_get_u16le(p);
        const uint8_t *key = p + BATCH_KEY_HDR;
        p = key + klen;
        bool known = batch_key_known(dst, key, klen);
        if (!known && !batch_reserve(dst, 0, klen, true)) {
            qr_error_set(err, QR_ENOMEM, "out of memory joining batches");
            batch_poison(dst, err);
            return QR_ENOMEM;
        }
        if (known) {
            batch_del(dst, key, klen);
        } else {
            *batch_key_slot(dst, key, klen) = dst->keys.len + 1;
            uint8_t kh[BATCH_KEY_HDR] = {(uint8_t)(klen & 0xff), (uint8_t)(klen >> 8)};
            qr_buf_append(&dst->keys, kh, sizeof kh);
            qr_buf_append(&dst->keys, key, klen);
            dst->n_keys++;
        }
    }
    for (int k = 0; k < src->n_segs; k++) {
        dst->segs[dst->n_segs++] = src->segs[k];
        src->segs[k] = (BatchSeg){0};
    }
    src->n_segs = 0;
    qr_buf_append(&dst->recs, src->recs.data, src->recs.len);
    dst->n_ops += src->n_ops;
    dst->n_dels += src->n_dels;
    if (src->bulk)
        dst->bulk = true;
    batch_reset(src, false); /* its segments are dst's now */
    return QR_OK;
}

/* Fields were added since the batch copied the schema: index its documents
 * again, from its records, with the table's schema of now.  Outside wlock. */
static int batch_rebuild(TableBatch *b, QrError *err)
{
    segb_free(b->builder);
    b->builder = NULL;
    for (int k = 0; k < b->n_segs; k++)
        batch_seg_drop(&b->segs[k], true);
    b->n_segs = 0;
    pthread_mutex_lock(&b->t->wlock);
    batch_copy_schema_locked(b);
    pthread_mutex_unlock(&b->t->wlock);
    int rc = QR_OK;
    const uint8_t *p = b->recs.data, *end = p + b->recs.len;
    while (rc == QR_OK && p < end) {
        uint8_t type = p[0];
        size_t n = qr_get_u32le(p + 1);
        const uint8_t *pay = p + BATCH_REC_HDR;
        p = pay + n;
        if (type == WAL_DELETE) {
            batch_del(b, pay, n);
            continue;
        }
        cJSON *root = cJSON_ParseWithLength((const char *)pay, n);
        const cJSON *pkv = root ? cJSON_GetObjectItemCaseSensitive(root, b->schema->primary_key)
                                : NULL;
        uint8_t key[PK_KEY_MAX];
        size_t klen = pkv ? pk_encode(pkv, key, err) : 0;
        bool in_batch, known;
        if (!klen)
            rc = qr_error_set(err, QR_EINTERNAL, "a document of the batch no longer parses");
        else
            rc = batch_add(b, (const char *)pay, n, root, key, klen, false, &in_batch, &known,
                           err);
        cJSON_Delete(root);
    }
    return rc;
}

/* ---- checkpoint ---- */

int table_checkpoint_locked(Table *t, QrError *err)
{
    char path[4096];
    int rc;
    Manifest m;
    memset(&m, 0, sizeof m);
    /* 0. every commit written so far durable in the WAL first (rotation
     * syncs the file): the deletes files below may hold deletes of commits
     * whose sync is still running (group commit), and they must never be on
     * disk without their commit */
    if (t->wal && (rc = wal_sync(t->wal, err)) != QR_OK)
        return rc;
    table_install_acked(t);
    /* 1. segment files and deletes on disk (in-memory segments have
     * neither: their commits are in the WAL from the checkpoint lsn on) */
    uint64_t mem_lsn = UINT64_MAX; /* lowest lsn of an in-memory segment's commits */
    int n_files = 0;
    for (int i = 0; i < t->n_segs; i++) {
        SegMeta *sm = &t->meta[i];
        if (sm->in_mem) {
            uint64_t lo, hi;
            seg_lsn_range(t->segs[i], &lo, &hi);
            if (lo < mem_lsn)
                mem_lsn = lo;
            continue;
        }
        n_files++;
        if (!sm->synced) {
            table_seg_path(path, sizeof path, t->dir, sm->id);
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
    /* the WAL holds whole commits only (uncommitted batches are not in it),
     * and every commit so far is in the segment files -- but those of the
     * in-memory segments, which the WAL keeps from the lowest of their lsns
     * on.  (A commit above that lsn may already be in the files, a large one
     * or a delete: replaying it again is harmless, puts being upserts.) */
    m.checkpoint_lsn = t->wal ? wal_next_lsn(t->wal) : t->checkpoint_lsn;
    if (mem_lsn < m.checkpoint_lsn)
        m.checkpoint_lsn = mem_lsn > t->checkpoint_lsn ? mem_lsn : t->checkpoint_lsn;
    m.next_seg_id = t->next_seg_id;
    m.n_segs = (uint32_t)n_files;
    m.segs = qr_calloc((size_t)n_files + 1, sizeof *m.segs);
    QrBuf sj;
    qr_buf_init(&sj);
    if (!m.segs || schema_to_json(&t->schema, false, &sj, err) != QR_OK) {
        qr_free(m.segs);
        qr_buf_free(&sj);
        return qr_error_set(err, QR_ENOMEM, "out of memory writing the manifest");
    }
    for (int i = 0, k = 0; i < t->n_segs; i++) {
        if (t->meta[i].in_mem)
            continue;
        ManifestSeg *ms = &m.segs[k++];
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

/* Find the live committed copy of every key the batch put or deleted and
 * mark it in nd[i] (new deletes of committed segment i, created on demand).
 * Under wlock; changes nothing of the table.  Errors: QR_ENOMEM. */
static int batch_resolve_deletes(Table *t, const TableBatch *b, roaring_bitmap_t **nd,
                                 uint64_t *n_found, QrError *err)
{
    *n_found = 0;
    const uint8_t *p = b->keys.data, *end = p + b->keys.len;
    while (p < end) {
        size_t klen = qr_get_u16le(p);
        const uint8_t *key = p + BATCH_KEY_HDR;
        p = key + klen;
        for (int i = t->n_segs - 1; i >= 0; i--) {
            int64_t d = seg_pk_lookup(t->segs[i], key, klen);
            if (d < 0 || (t->dels[i] && roaring_bitmap_contains(t->dels[i], (uint32_t)d)) ||
                (nd[i] && roaring_bitmap_contains(nd[i], (uint32_t)d)))
                continue; /* a dead copy: an older one cannot be live either, but look on */
            if (!nd[i] && !(nd[i] = roaring_bitmap_create()))
                return qr_error_set(err, QR_ENOMEM, "out of memory committing");
            roaring_bitmap_add(nd[i], (uint32_t)d);
            (*n_found)++;
            break;
        }
    }
    return QR_OK;
}

/* Can the commit log the batch's segments by id (WAL_SEGMENT) instead of
 * its documents?  A bulk batch of puts only, every segment a durable file
 * whose documents are all live, and -- so that no manifest can name one of
 * them below its record's lsn (see the invariants at the top) -- an empty
 * in-memory tier.  Under wlock. */
static bool batch_logs_segments(const Table *t, const TableBatch *b)
{
    /* with fsync off an OS crash may lose a named file while its record
     * survives: such a table keeps journaling documents, whose loss is only
     * a shorter WAL */
    if (!b->bulk || b->replay || b->n_dels || b->n_segs == 0 || t->n_mem ||
        t->opts.fsync == QR_FSYNC_OFF)
        return false;
    for (int k = 0; k < b->n_segs; k++)
        if (!b->segs[k].durable || seg_in_memory(b->segs[k].seg) ||
            !roaring_bitmap_is_empty(b->segs[k].bdel))
            return false;
    return true;
}

/* Append the batch's records (by_segment: one WAL_SEGMENT record per
 * segment) and a COMMIT record and write them to the WAL
 * file as one wal_write (*end_lsn: the lsn after them, to sync to).  On
 * failure the WAL is as before (the write is cut back) and nothing was
 * written; when it could not be cut back the writer is poisoned and the
 * table refuses writes from then on.  Under wlock. */
static int batch_write_wal(Table *t, const TableBatch *b, bool by_segment, uint64_t *end_lsn,
                           QrError *err)
{
    QrError e;
    qr_error_clear(&e);
    int rc = QR_OK;
    const uint8_t *p = b->recs.data, *end = p + b->recs.len;
    for (int k = 0; by_segment && rc == QR_OK && k < b->n_segs; k++) {
        uint8_t rec[WAL_SEGMENT_PAYLOAD];
        qr_put_u64le(rec, b->segs[k].id);
        qr_put_u32le(rec + 8, seg_n_docs(b->segs[k].seg));
        rc = wal_append(t->wal, WAL_SEGMENT, rec, sizeof rec, NULL, &e);
    }
    while (!by_segment && rc == QR_OK && p < end) {
        size_t n = qr_get_u32le(p + 1);
        rc = wal_append(t->wal, p[0], p + BATCH_REC_HDR, n, NULL, &e);
        p += BATCH_REC_HDR + n;
    }
    if (rc == QR_OK)
        rc = wal_append(t->wal, WAL_COMMIT, "", 0, NULL, &e);
    if (rc == QR_OK)
        rc = wal_write(t->wal, end_lsn, &e);
    else
        wal_discard(t->wal);
    if (rc == QR_OK)
        return QR_OK;
    qr_error_copy(err, &e);
    QrError e2;
    qr_error_clear(&e2);
    if (wal_commit(t->wal, &e2) != QR_OK) {
        /* the writer is poisoned: the records may be in the file */
        set_broken(t, &e);
        qr_error_detail(err, "the commit's %llu changes reached the write-ahead log but could "
                             "not be made durable: after a restart they may or may not be there",
                        (unsigned long long)b->n_ops);
        qr_error_hint(err, "restart the server: the table refuses writes until it is reopened");
    }
    return rc;
}

/* Step 0 of a commit, outside wlock: the batch's last documents become a
 * segment (in memory when small), indexed with the table's current fields;
 * on return *gen is the fields generation they were indexed with. */
static int batch_prepare(TableBatch *b, uint64_t *gen, QrError *err)
{
    Table *t = b->t;
    int rc = QR_OK;
    if (!b->replay && b->fields_gen != atomic_load(&t->fields_gen))
        rc = batch_rebuild(b, err); /* fields were added: index everything again */
    *gen = b->fields_gen;
    if (rc == QR_OK)
        rc = batch_write_builder(b, true, err);
    return rc;
}

int table_batch_seal(TableBatch *b, QrError *err)
{
    if (b->poison.code) {
        qr_error_copy(err, &b->poison);
        return b->poison.code;
    }
    uint64_t gen;
    int rc = batch_prepare(b, &gen, err);
    if (rc != QR_OK)
        batch_poison(b, err); /* the builder's documents went with it */
    return rc;
}

int table_batch_commit_start(TableBatch *b, TableCommit *c, QrError *err)
{
    Table *t = b->t;
    int rc = QR_OK;
    memset(c, 0, sizeof *c);
    if (b->poison.code) {
        qr_error_copy(err, &b->poison);
        rc = b->poison.code;
        batch_reset(b, true);
        return rc;
    }
    if (b->n_ops == 0)
        return QR_OK;
    if (t->opts.read_only && !b->replay) {
        batch_reset(b, true);
        return qr_error_set(err, QR_EPERM, "table \"%s\" is open read-only", t->dir);
    }
    roaring_bitmap_t **nd = NULL;
    int n_nd = 0;
    /* 0. outside the lock: the last builder as a segment (a field added
     * meanwhile sends the batch round again) */
    uint64_t gen = 0;
    for (;;) {
        if ((rc = batch_prepare(b, &gen, err)) != QR_OK)
            goto fail_unlocked;
        pthread_mutex_lock(&t->wlock);
        if (b->replay || gen == atomic_load(&t->fields_gen))
            break;
        pthread_mutex_unlock(&t->wlock);
    }
    if (t->broken) {
        rc = fail_broken(t, err);
        goto fail;
    }
    bool log = t->wal && !b->replay;
    bool by_segment = log && batch_logs_segments(t, b);
    /* 1. every file segment of the batch gets the B-trees the schema asks
     * for now; every segment its commit's lsns */
    uint64_t lo = log ? wal_next_lsn(t->wal) : b->lsn_lo;
    uint64_t hi = log ? lo + (by_segment ? (uint64_t)b->n_segs : b->n_ops) : b->lsn_hi;
    for (int k = 0; k < b->n_segs; k++) {
        seg_set_lsn_range(b->segs[k].seg, lo, hi);
        /* a read-only open writes no side file beside a logged segment */
        bool build = !(t->opts.read_only && b->segs[k].logged);
        if ((rc = seg_sync_btrees(b->segs[k].seg, &t->schema, build, false, err)) != QR_OK)
            goto fail;
    }
    /* 2. the committed copies the batch replaces or deletes */
    n_nd = t->n_segs;
    nd = qr_calloc((size_t)n_nd + 1, sizeof *nd);
    if (!nd || table_segs_reserve(t, b->n_segs) != 0) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory committing");
        goto fail;
    }
    uint64_t n_found = 0;
    if ((rc = batch_resolve_deletes(t, b, nd, &n_found, err)) != QR_OK)
        goto fail;
    /* 3. the WAL: written here, made durable below, outside the lock */
    uint64_t end_lsn = 0;
    /* the segment files were fsynced when written; their names too before
     * a record names them */
    if (by_segment && t->opts.fsync != QR_FSYNC_OFF && (rc = qr_fsync_dir(t->dir, err)) != QR_OK)
        goto fail;
    if (log && (rc = batch_write_wal(t, b, by_segment, &end_lsn, err)) != QR_OK)
        goto fail;
    /* 4. apply; the snapshot is installed once the WAL promises the commit */
    for (int i = 0; i < n_nd; i++) {
        if (!nd[i])
            continue;
        if (!t->dels[i]) {
            t->dels[i] = nd[i];
        } else {
            roaring_bitmap_or_inplace(t->dels[i], nd[i]);
            roaring_bitmap_free(nd[i]);
        }
        nd[i] = NULL;
        t->meta[i].del_dirty = true;
    }
    uint64_t now = qr_now_ns();
    for (int k = 0; k < b->n_segs; k++) {
        BatchSeg *bs = &b->segs[k];
        int i = t->n_segs++;
        bool has_del = !roaring_bitmap_is_empty(bs->bdel);
        bool in_mem = seg_in_memory(bs->seg);
        t->segs[i] = bs->seg;
        t->dels[i] = has_del ? bs->bdel : NULL;
        if (!has_del)
            roaring_bitmap_free(bs->bdel);
        t->meta[i] = (SegMeta){.id = bs->id, .in_mem = in_mem, .del_dirty = has_del && !in_mem,
                               .synced = bs->durable,
                               .born_ns = in_mem ? now : 0};
        if (in_mem) {
            t->n_mem++;
            atomic_fetch_add(&t->mem_bytes, seg_file_bytes(bs->seg));
        }
        bs->seg = NULL;
        bs->bdel = NULL;
    }
    t->commits++;
    if ((rc = table_publish_locked(t, err)) != QR_OK) {
        /* durable (or about to be) and applied, but readers cannot be shown it */
        set_broken(t, err);
        qr_error_detail(err, "the commit is durable but could not be made visible: it "
                             "appears after a restart");
    }
    if (rc == QR_OK && t->wal &&
        wal_bytes(t->wal) - t->wal_at_ckpt > t->opts.checkpoint_wal_bytes) {
        QrError e;
        qr_error_clear(&e);
        if (table_checkpoint_locked(t, &e) != QR_OK) /* the WAL still has it all: try again later */
            qr_log(QR_LOG_WARN, "checkpoint of table \"%s\" failed (retried at the next "
                                "commit): %s", t->dir, e.message);
    }
    table_merge_note_commit_locked(t);
    pthread_mutex_unlock(&t->wlock);
    qr_free(nd);
    c->t = t;
    c->end_lsn = log ? end_lsn : 0;
    c->n_ops = b->n_ops;
    c->n_replaced = n_found;
    c->started = rc == QR_OK;
    batch_reset(b, false);
    return rc;
fail:
    pthread_mutex_unlock(&t->wlock);
fail_unlocked:
    /* (batch_write_wal says it first when the outcome is unknown) */
    qr_error_detail(err, "nothing of this commit (%llu change%s) was written",
                    (unsigned long long)b->n_ops, b->n_ops == 1 ? "" : "s");
    for (int i = 0; nd && i < n_nd; i++)
        if (nd[i])
            roaring_bitmap_free(nd[i]);
    qr_free(nd);
    batch_reset(b, true);
    return rc;
}

int table_commit_wait(const TableCommit *c, QrError *err)
{
    if (!c->started)
        return QR_OK;
    Table *t = c->t;
    /* 5. group commit: wait for the sync that covers the records, shared
     * with the commits written meanwhile; then the commit is shown */
    if (c->end_lsn && t->wal) {
        QrError e;
        qr_error_clear(&e);
        if (wal_sync_to(t->wal, c->end_lsn, &e) != QR_OK) {
            qr_error_copy(err, &e);
            pthread_mutex_lock(&t->wlock);
            set_broken(t, &e);
            pthread_mutex_unlock(&t->wlock);
            qr_error_detail(err, "the commit's %llu changes reached the write-ahead log but "
                                 "could not be made durable: after a restart they may or may "
                                 "not be there",
                            (unsigned long long)c->n_ops);
            qr_error_hint(err, "restart the server: the table refuses writes until it is "
                               "reopened");
            return e.code ? e.code : QR_EIO;
        }
        table_install_acked(t);
    }
    table_merge_relieve(t);
    return QR_OK;
}

int table_batch_commit(TableBatch *b, QrError *err)
{
    TableCommit c;
    int rc = table_batch_commit_start(b, &c, err);
    return rc == QR_OK ? table_commit_wait(&c, err) : rc;
}

Snapshot *table_snapshot_latest(Table *t)
{
    pthread_mutex_lock(&t->snap_lock);
    Snapshot *s = t->n_pending ? t->pending[t->n_pending - 1] : t->snap;
    atomic_fetch_add(&s->refs, 1);
    pthread_mutex_unlock(&t->snap_lock);
    return s;
}

int table_snapshot_wait_acked(Table *t, const Snapshot *s, QrError *err)
{
    if (!t->wal || !s->lsn || s->lsn <= wal_acked_lsn(t->wal))
        return QR_OK;
    int rc = wal_sync_to(t->wal, s->lsn, err);
    if (rc == QR_OK)
        table_install_acked(t);
    return rc;
}

int table_flush(Table *t, QrError *err)
{
    pthread_mutex_lock(&t->wlock);
    int rc = t->broken ? fail_broken(t, err) : QR_OK;
    bool mem = t->n_mem > 0 && !t->opts.read_only;
    pthread_mutex_unlock(&t->wlock);
    /* the in-memory segments to a file first, so that the WAL can go */
    if (rc == QR_OK && mem)
        rc = table_merge_flush_memory(t, err);
    if (rc == QR_OK) {
        pthread_mutex_lock(&t->wlock);
        rc = t->broken ? fail_broken(t, err) : table_checkpoint_locked(t, err);
        pthread_mutex_unlock(&t->wlock);
    }
    return rc;
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
    pthread_mutex_init(&t->nrt_lock, NULL);
    pthread_cond_init(&t->merge_cv, NULL);
    pthread_cond_init(&t->idle_cv, NULL);
    /* the memory tier's thread waits with timeouts on the monotonic clock */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->nrt_cv, &ca);
    pthread_condattr_destroy(&ca);
    t->next_seg_id = 1;
    qr_error_clear(&t->broken_err);
    return t;
}

static void table_release(Table *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n_segs; i++) {
        seg_unref(t->segs[i]);
        if (t->dels[i])
            roaring_bitmap_free(t->dels[i]);
    }
    qr_free(t->segs);
    qr_free(t->dels);
    qr_free(t->meta);
    if (t->snap)
        snapshot_release(t->snap);
    for (int i = 0; i < t->n_pending; i++)
        snapshot_release(t->pending[i]);
    qr_free(t->pending);
    if (t->wal)
        wal_close(t->wal);
    pthread_mutex_destroy(&t->wlock);
    pthread_mutex_destroy(&t->snap_lock);
    pthread_mutex_destroy(&t->merge_lock);
    pthread_mutex_destroy(&t->nrt_lock);
    pthread_cond_destroy(&t->merge_cv);
    pthread_cond_destroy(&t->nrt_cv);
    pthread_cond_destroy(&t->idle_cv);
    qr_free(t->dir);
    qr_free(t);
}

static int start_wal(Table *t, uint64_t next_lsn, QrError *err)
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
    if ((rc = table_publish_locked(t, err)) != QR_OK || (rc = table_checkpoint_locked(t, err)) != QR_OK ||
        (rc = start_wal(t, 1, err)) != QR_OK ||
        (!t->opts.read_only && (rc = table_merge_start(t, err)) != QR_OK)) {
        table_close(t);
        return rc;
    }
    *out = t;
    return QR_OK;
}

/* Recovery feeds the WAL to one replay batch: the records of a run go into
 * it, a COMMIT record commits it (nothing is logged again), and a run
 * without its COMMIT -- a crash or a failed commit -- is discarded.  A
 * run's WAL_SEGMENT records wait in `logged` for their COMMIT: only then is
 * the file they name opened (docs/format.md, "Bulk commits by reference"),
 * so a record no COMMIT covers names nothing, whether its file is there or
 * not. */
typedef struct LoggedSeg {
    uint64_t id, lsn;
    uint32_t n_docs;
} LoggedSeg;

typedef struct ReplayCtx {
    Table *t;
    TableBatch *b;        /* owns: the run waiting for its COMMIT */
    LoggedSeg *logged;    /* owns: that run's WAL_SEGMENT records */
    size_t n_logged, cap_logged;
    uint64_t open_bytes;  /* WAL bytes of that run */
    uint64_t n_open;      /* its records applied to the batch */
    uint64_t last_lsn;
    uint64_t applied, skipped;
    QrError *err;
    int rc;
} ReplayCtx;

/* Does a segment of the table -- as the manifest lists them: a merge's
 * output carries its sources' lsns -- hold the commit at `lsn`? */
static bool lsn_in_table(const Table *t, uint64_t lsn)
{
    for (int i = 0; i < t->n_segs; i++) {
        uint64_t lo, hi;
        seg_lsn_range(t->segs[i], &lo, &hi);
        if (!t->meta[i].in_mem && hi && lo <= lsn && lsn <= hi)
            return true;
    }
    return false;
}

/* A committed WAL_SEGMENT record, replayed at its COMMIT: the bulk commit's
 * segment file joins the replay batch with its keys, so the commit replaces
 * their older copies as it did.  Already applied, and skipped: a segment the
 * table names, or a missing file whose commit a named segment holds (a merge
 * absorbed it; its manifest has a checkpoint past the record, so this is
 * defensive).  Any other missing or damaged file is corruption -- it was
 * fsynced before its record was written -- unless salvaging, which leaves
 * the commit's documents out. */
static int replay_segment(ReplayCtx *rc, const LoggedSeg *ls, QrError *err)
{
    Table *t = rc->t;
    TableBatch *b = rc->b;
    uint64_t id = ls->id;
    uint32_t n_docs = ls->n_docs;
    for (int i = 0; i < t->n_segs; i++)
        if (t->meta[i].id == id && !t->meta[i].in_mem)
            return QR_OK;
    char path[4096];
    table_seg_path(path, sizeof path, t->dir, id);
    if (!qr_path_exists(path) && lsn_in_table(t, ls->lsn)) {
        qr_log(QR_LOG_INFO, "table \"%s\": segment %llu of the commit at lsn %llu was merged "
                            "away; a listed segment holds it",
               t->dir, (unsigned long long)id, (unsigned long long)ls->lsn);
        return QR_OK;
    }
    Segment *s = NULL;
    QrError e;
    qr_error_clear(&e);
    int r = seg_open(path, id, &s, &e);
    if (r == QR_OK && seg_n_docs(s) != n_docs)
        r = qr_error_set(&e, QR_ECORRUPT, "segment file \"%s\" has %u docs, the write-ahead log "
                                          "says %u", path, seg_n_docs(s), n_docs);
    if (r == QR_OK)
        r = seg_verify(s, &e);
    if (r != QR_OK) {
        seg_unref(s);
        if (r == QR_ENOMEM) {
            qr_error_copy(err, &e);
            return r;
        }
        if (t->opts.salvage) {
            qr_log(QR_LOG_WARN, "salvage: leaving out the %u documents of segment %llu, which "
                                "a bulk commit added: %s",
                   n_docs, (unsigned long long)id, e.message);
            return QR_OK;
        }
        qr_error_set(err, QR_ECORRUPT, "segment %llu of table \"%s\", committed by the "
                                       "write-ahead log, cannot be read: %s",
                     (unsigned long long)id, t->dir, e.message);
        qr_error_hint(err, "restore the table from a backup, or salvage it (quarry check "
                           "--salvage)");
        return QR_ECORRUPT;
    }
    if (b->n_segs == b->cap_segs) {
        int nc = b->cap_segs ? b->cap_segs * 2 : 4;
        BatchSeg *ns = qr_realloc(b->segs, (size_t)nc * sizeof *ns);
        if (!ns) {
            seg_unref(s);
            return qr_error_set(err, QR_ENOMEM, "out of memory replaying a segment record");
        }
        b->segs = ns;
        b->cap_segs = nc;
    }
    roaring_bitmap_t *bdel = roaring_bitmap_create();
    if (!bdel) {
        seg_unref(s);
        return qr_error_set(err, QR_ENOMEM, "out of memory replaying a segment record");
    }
    b->segs[b->n_segs++] =
        (BatchSeg){.seg = s, .bdel = bdel, .id = id, .durable = true, .logged = true};
    for (uint32_t d = 0; d < n_docs; d++) {
        const uint8_t *key;
        size_t klen;
        if (!seg_pk(s, d, &key, &klen))
            continue;
        bool known = batch_key_known(b, key, klen);
        if (!batch_reserve(b, 0, klen, !known))
            return qr_error_set(err, QR_ENOMEM, "out of memory replaying a segment record");
        batch_record(b, WAL_PUT, NULL, 0, key, klen, !known);
    }
    return QR_OK;
}

/* A WAL_SEGMENT record of the open run, kept until its COMMIT. */
static int replay_note_segment(ReplayCtx *rc, uint64_t lsn, const uint8_t *payload, size_t len,
                               QrError *err)
{
    if (len != WAL_SEGMENT_PAYLOAD)
        return qr_error_set(err, QR_ECORRUPT, "write-ahead log of table \"%s\" has a segment "
                                              "record of %zu bytes at lsn %llu (expected %d)",
                            rc->t->dir, len, (unsigned long long)lsn, WAL_SEGMENT_PAYLOAD);
    if (rc->n_logged == rc->cap_logged) {
        size_t nc = rc->cap_logged ? rc->cap_logged * 2 : 8;
        LoggedSeg *nl = qr_realloc(rc->logged, nc * sizeof *nl);
        if (!nl)
            return qr_error_set(err, QR_ENOMEM, "out of memory replaying a segment record");
        rc->logged = nl;
        rc->cap_logged = nc;
    }
    rc->logged[rc->n_logged++] =
        (LoggedSeg){.id = qr_get_u64le(payload), .lsn = lsn, .n_docs = qr_get_u32le(payload + 8)};
    return QR_OK;
}

static int replay_cb(void *arg, uint8_t type, uint64_t lsn, const uint8_t *payload, size_t len)
{
    ReplayCtx *rc = arg;
    rc->last_lsn = lsn;
    QrError e;
    qr_error_clear(&e);
    if (type == WAL_COMMIT) {
        int r = QR_OK;
        for (size_t i = 0; r == QR_OK && i < rc->n_logged; i++)
            r = replay_segment(rc, &rc->logged[i], &e);
        rc->n_logged = 0;
        if (r == QR_OK)
            r = table_batch_commit(rc->b, &e);
        if (r != QR_OK) {
            qr_error_copy(rc->err, &e);
            return rc->rc = r;
        }
        rc->applied += rc->n_open;
        rc->n_open = 0;
        rc->open_bytes = 0;
        rc->b->lsn_lo = rc->b->lsn_hi = 0; /* (a run found applied left them) */
        return 0;
    }
    if (type != WAL_PUT && type != WAL_DELETE && type != WAL_SEGMENT)
        return 0; /* unknown record types from a newer minor version are ignored */
    rc->open_bytes += len + WAL_RECORD_OVERHEAD;
    if (!rc->b->lsn_lo)
        rc->b->lsn_lo = lsn;
    rc->b->lsn_hi = lsn;
    if (type == WAL_SEGMENT) {
        int r = replay_note_segment(rc, lsn, payload, len, &e);
        if (r != QR_OK) {
            qr_error_copy(rc->err, &e);
            return rc->rc = r;
        }
        rc->n_open++;
        return 0;
    }
    int r = type == WAL_PUT
                ? table_batch_put(rc->b, (const char *)payload, len, NULL, NULL, &e)
                : table_batch_delete(rc->b, payload, len, NULL, &e);
    if (r == QR_OK)
        rc->n_open++;
    else if (r == QR_ENOMEM || r == QR_EIO) {
        qr_error_copy(rc->err, &e);
        return rc->rc = r;
    } else
        rc->skipped++; /* rejected the first time too: not acknowledged */
    return 0;
}

/* Remove files of this table that the manifest does not name.  At open
 * (`all`) every unnamed file goes: segments of batches and merges a crash
 * interrupted, B-trees of fields no longer indexed, temporary files.  While
 * the table runs only stale deletes files: a batch's segment files are
 * named by nothing until it commits. */
static bool id_listed(const uint64_t *ids, size_t n, uint64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

static void remove_stray_files(Table *t, bool all, const uint64_t *logged, size_t n_logged)
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
            /* a B-tree side file: kept for a live segment whose field the
             * schema indexes */
            keep = !all || id_listed(logged, n_logged, id);
            if (fld >= 0 && fld < t->schema.n_fields && t->schema.fields[fld].btree) {
                for (int i = 0; i < t->n_segs; i++)
                    if (t->meta[i].id == id)
                        keep = true;
            }
        } else if (sscanf(e->d_name, "seg-%16llx.del.%llu", &id, &gen) == 2) {
            keep = false;
            for (int i = 0; i < t->n_segs; i++)
                if (t->meta[i].id == id && t->meta[i].del_gen == gen)
                    keep = true;
        } else if (sscanf(e->d_name, "seg-%16llx.qseg", &id) == 1 && nl == 4 + 16 + 5) {
            keep = !all || id_listed(logged, n_logged, id);
            for (int i = 0; i < t->n_segs; i++)
                if (t->meta[i].id == id)
                    keep = true;
        } else if (nl > 4 && !strcmp(e->d_name + nl - 4, ".tmp")) {
            keep = !all;
        }
        if (!keep) {
            snprintf(path, sizeof path, "%s/%s", t->dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
}

void table_remove_stale_files(Table *t) { remove_stray_files(t, false, NULL, 0); }

/* ---- segments committed by WAL_SEGMENT records ---- */

typedef struct LoggedSegs {
    uint64_t *ids;
    size_t n, n_committed, cap;
    bool oom;
} LoggedSegs;

static int logged_cb(void *arg, uint8_t type, uint64_t lsn, const uint8_t *payload, size_t len)
{
    LoggedSegs *ls = arg;
    (void)lsn;
    if (type == WAL_COMMIT) {
        ls->n_committed = ls->n;
    } else if (type == WAL_SEGMENT && len == WAL_SEGMENT_PAYLOAD) {
        if (ls->n == ls->cap) {
            size_t nc = ls->cap ? ls->cap * 2 : 16;
            uint64_t *ni = qr_realloc(ls->ids, nc * sizeof *ni);
            if (!ni) {
                ls->oom = true;
                return QR_ENOMEM;
            }
            ls->ids = ni;
            ls->cap = nc;
        }
        ls->ids[ls->n++] = qr_get_u64le(payload);
    }
    return 0;
}

int table_wal_segments(const char *wal_dir, uint64_t from_lsn, uint64_t **ids, size_t *n,
                       bool *cut_short, QrError *err)
{
    *ids = NULL;
    *n = 0;
    if (cut_short)
        *cut_short = false;
    if (!qr_path_exists(wal_dir))
        return QR_OK;
    LoggedSegs ls = {0};
    QrError e;
    qr_error_clear(&e);
    /* READ changes nothing; damage ends the list (the replay proper decides
     * what it means), and what was read before it counts */
    int rc = wal_replay(wal_dir, from_lsn, WAL_REPLAY_READ, logged_cb, &ls, NULL, &e);
    if (cut_short)
        *cut_short = rc != QR_OK && !ls.oom;
    if (ls.oom) {
        qr_free(ls.ids);
        return qr_error_set(err, QR_ENOMEM, "out of memory reading the write-ahead log");
    }
    *ids = ls.ids;
    *n = ls.n_committed;
    return QR_OK;
}

/* A read-only open changes nothing on disk, but replaying the WAL spills
 * its batches into segment files.  They get ids above every "seg-*" file
 * in the directory (strays of a crash included, which are not ours to
 * touch), and their names go as soon as they are mapped (unlink_replayed).
 * A crash in between leaves strays that the next writable open removes. */
static uint64_t first_free_seg_id(const Table *t)
{
    uint64_t next = t->next_seg_id;
    DIR *d = opendir(t->dir);
    if (!d)
        return next;
    struct dirent *e;
    while ((e = readdir(d))) {
        unsigned long long id;
        if (sscanf(e->d_name, "seg-%16llx.", &id) == 1 && id >= next && id < UINT64_MAX)
            next = id + 1;
    }
    closedir(d);
    return next;
}

static void unlink_replayed(Table *t, uint64_t first_id)
{
    char path[4096];
    for (int i = 0; i < t->n_segs; i++) {
        if (t->meta[i].id < first_id || t->meta[i].in_mem)
            continue;
        table_seg_path(path, sizeof path, t->dir, t->meta[i].id);
        unlink(path);
        for (int f = 0; f < t->schema.n_fields; f++) {
            char bpath[4096 + 16];
            if (!t->schema.fields[f].btree)
                continue;
            seg_btree_path(bpath, sizeof bpath, path, f);
            unlink(bpath);
        }
    }
}

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
    if (table_segs_reserve(t, (int)m.n_segs) != 0) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory opening a table");
        goto fail;
    }
    char path[4096];
    int salvaged = 0; /* segments left out by --salvage */
    for (uint32_t i = 0; i < m.n_segs; i++) {
        ManifestSeg *ms = &m.segs[i];
        table_seg_path(path, sizeof path, dir, ms->id);
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
        if (rc == QR_OK && t->opts.check && (rc = seg_check_btrees(s, &t->schema, &e)) != QR_OK)
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
        /* the commits it holds, as the manifest recorded them (a bulk
         * commit's file was written before its lsns were known) */
        if (ms->max_lsn)
            seg_set_lsn_range(s, ms->min_lsn, ms->max_lsn);
        t->segs[k] = s;
        t->dels[k] = del;
        t->meta[k] = (SegMeta){.id = ms->id, .synced = true, .del_gen = ms->del_gen};
    }
    /* segment files that committed WAL_SEGMENT records name are kept, and
     * new ids go above them */
    {
        char *wdir = path_join(dir, "wal");
        uint64_t *logged = NULL;
        size_t n_logged = 0;
        bool cut_short = false;
        rc = wdir ? table_wal_segments(wdir, t->checkpoint_lsn, &logged, &n_logged, &cut_short,
                                       err)
                  : qr_error_set(err, QR_ENOMEM, "out of memory");
        qr_free(wdir);
        if (rc != QR_OK)
            goto fail;
        for (size_t i = 0; i < n_logged; i++)
            if (logged[i] >= t->next_seg_id && logged[i] < UINT64_MAX)
                t->next_seg_id = logged[i] + 1;
        /* damage that is no torn tail hid the records after it: files
         * they name must not go as strays (the replay refuses the damage,
         * and an open that fails removes nothing; a salvage's next open
         * removes what the salvage left unnamed) */
        if (!t->opts.read_only && !cut_short)
            remove_stray_files(t, true, logged, n_logged);
        qr_free(logged);
    }
    if ((rc = table_publish_locked(t, err)) != QR_OK)
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
        uint64_t first_replay_id = t->next_seg_id;
        if (t->opts.read_only)
            t->next_seg_id = first_replay_id = first_free_seg_id(t);
        /* a torn tail is cut before writing; damage followed by intact
         * records is refused unless salvaging (store/wal.h) */
        WalReplayMode mode = t->opts.read_only ? WAL_REPLAY_READ
                             : t->opts.salvage ? WAL_REPLAY_SALVAGE
                                               : WAL_REPLAY_RECOVER;
        rc = table_batch_begin(t, &rcx.b, err);
        if (rc == QR_OK) {
            rcx.b->replay = true;
            if (qr_path_exists(wdir))
                rc = wal_replay(wdir, t->checkpoint_lsn, mode, replay_cb, &rcx, &st, err);
        }
        uint64_t unapplied = rcx.open_bytes; /* records of a batch that never committed */
        /* uncommitted tail: discarded like after a crash (a file its
         * WAL_SEGMENT records name was never opened: an orphan, which the
         * next writable open removes) */
        table_batch_free(rcx.b);
        qr_free(rcx.logged);
        qr_free(wdir);
        if (rc != QR_OK)
            goto fail;
        if (t->opts.read_only)
            unlink_replayed(t, first_replay_id);
        t->open_wal = st;
        t->open_salvaged = salvaged;
        t->open_uncommitted = unapplied;
        t->recovered = rcx.applied;
        t->torn_cut = st.torn_bytes + unapplied;
        if (st.torn_bytes)
            qr_log(QR_LOG_WARN, "table \"%s\": %s a torn WAL tail of %llu bytes in %s", dir,
                   t->opts.read_only ? "left (read-only)" : "cut",
                   (unsigned long long)st.torn_bytes, st.torn_file);
        if (st.salvaged_bytes)
            qr_log(QR_LOG_WARN, "table \"%s\": salvage set aside %llu WAL bytes from offset "
                                "%llu of %s",
                   dir, (unsigned long long)st.salvaged_bytes,
                   (unsigned long long)st.salvage_off, st.salvage_file);
        if (unapplied)
            qr_log(QR_LOG_INFO, "table \"%s\": %llu WAL bytes of an uncommitted batch discarded",
                   dir, (unsigned long long)unapplied);
        uint64_t next = (st.last_lsn >= rcx.last_lsn ? st.last_lsn : rcx.last_lsn) + 1;
        if (next < t->checkpoint_lsn)
            next = t->checkpoint_lsn;
        if ((rc = start_wal(t, next, err)) != QR_OK)
            goto fail;
        /* a writable salvage open records the smaller segment set at once,
         * so the next plain open finds a manifest naming only good files;
         * what the replay left in memory goes to a file first, so that the
         * WAL behind it can go */
        bool changed = rcx.applied || st.records || salvaged;
        if (!changed)
            t->ckpt_due = false; /* nothing new since the manifest */
        if (changed && !t->opts.read_only) {
            if (t->n_mem)
                rc = table_merge_flush_memory(t, err);
            if (rc == QR_OK) {
                pthread_mutex_lock(&t->wlock);
                rc = table_checkpoint_locked(t, err);
                pthread_mutex_unlock(&t->wlock);
            }
            if (rc != QR_OK)
                goto fail;
        }
        if (!t->opts.read_only && (rc = table_merge_start(t, err)) != QR_OK)
            goto fail;
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
    table_merge_stop(t);
    QrError e;
    qr_error_clear(&e);
    /* the in-memory segments to a file, so that reopening need not replay
     * their commits (if this fails, it will) */
    if (!t->broken && t->wal && t->n_mem && table_merge_flush_memory(t, &e) != QR_OK)
        qr_log(QR_LOG_WARN, "writing the in-memory segments of \"%s\" at close failed: %s",
               t->dir, e.message);
    pthread_mutex_lock(&t->wlock);
    if (!t->broken && t->wal && t->ckpt_due) {
        qr_error_clear(&e);
        if (table_checkpoint_locked(t, &e) != QR_OK)
            qr_log(QR_LOG_WARN, "checkpoint at close of \"%s\" failed: %s", t->dir, e.message);
    }
    pthread_mutex_unlock(&t->wlock);
    table_release(t);
}

int table_add_field(Table *t, const QrField *f, QrError *err)
{
    pthread_mutex_lock(&t->wlock);
    int rc = QR_OK;
    QrSchema ns = t->schema;
    if (schema_add_field(&ns, f, err) < 0) {
        rc = err ? err->code : QR_EINVAL;
        goto out;
    }
    t->schema = ns;
    atomic_fetch_add(&t->fields_gen, 1); /* open batches index their documents again */
    rc = table_checkpoint_locked(t, err);
out:
    pthread_mutex_unlock(&t->wlock);
    return rc;
}

uint64_t table_settings_gen(Table *t) { return atomic_load(&t->settings_gen); }

uint64_t table_write_mark(Table *t)
{
    pthread_mutex_lock(&t->wlock);
    uint64_t m = t->wal ? wal_next_lsn(t->wal) : t->commits;
    pthread_mutex_unlock(&t->wlock);
    return m;
}

int table_synonyms_dup(Table *t, char **out, size_t *len, QrError *err)
{
    pthread_mutex_lock(&t->wlock);
    const char *syn = schema_synonyms(&t->schema, len);
    *out = syn ? qr_strndup(syn, *len) : NULL;
    pthread_mutex_unlock(&t->wlock);
    if (syn && !*out)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    if (!syn)
        *len = 0;
    return QR_OK;
}

int table_set_synonyms(Table *t, const char *json, size_t len, QrError *err)
{
    if (t->opts.read_only)
        return qr_error_set(err, QR_EPERM, "table \"%s\" is open read-only", t->dir);
    QrSchema *ns = qr_malloc(sizeof *ns), *old = qr_malloc(sizeof *old);
    if (!ns || !old) {
        qr_free(ns);
        qr_free(old);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    pthread_mutex_lock(&t->wlock);
    *ns = t->schema;
    *old = t->schema;
    int rc = schema_set_synonyms(ns, json, len, err);
    if (rc == QR_OK && t->broken)
        rc = fail_broken(t, err);
    if (rc == QR_OK) {
        t->schema = *ns;
        if ((rc = table_checkpoint_locked(t, err)) != QR_OK)
            t->schema = *old;
        else
            atomic_fetch_add(&t->settings_gen, 1);
    }
    pthread_mutex_unlock(&t->wlock);
    qr_free(ns);
    qr_free(old);
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
    t->schema.fields[field].btree = on;
    bool do_fsync = t->opts.fsync != QR_FSYNC_OFF;
    for (int i = 0; i < t->n_segs && rc == QR_OK; i++)
        rc = seg_sync_btrees(t->segs[i], &t->schema, true, do_fsync, err);
    if (rc == QR_OK && do_fsync && on)
        rc = qr_fsync_dir(t->dir, err);
    if (rc == QR_OK)
        rc = table_checkpoint_locked(t, err);
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
            table_seg_path(path, sizeof path, t->dir, t->meta[i].id);
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
        if (!seg_in_memory(s->segs[i]))
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
    info->mem_segments = (uint64_t)t->n_mem;
    info->mem_bytes = atomic_load(&t->mem_bytes);
    info->nrt_merges = t->nrt_merges;
    info->nrt_flushes = t->nrt_flushes;
    info->peak_segments = t->peak_segments;
    info->wal_syncs = t->wal ? wal_syncs(t->wal) : 0;
    pthread_mutex_unlock(&t->wlock);
}

void table_open_report(Table *t, WalReplayStats *wal, uint64_t *uncommitted_bytes,
                       int *segments_salvaged)
{
    pthread_mutex_lock(&t->wlock);
    *wal = t->open_wal;
    *uncommitted_bytes = t->open_uncommitted;
    *segments_salvaged = t->open_salvaged;
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
