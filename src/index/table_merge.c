/*
 * table_merge.c — a table's merges: the tiers of segment files, the
 * in-memory tier that small commits land in, and its flush to files.
 *
 * Layer: index/.  Calls segment (index/) and util (store/); the Table is
 * table_int.h's.
 *
 * Two kinds of segments (table.h "Near-real-time segments"):
 *   - files, written by large commits, spills, merges and flushes; merged
 *     by the merge thread under a tiered policy: a segment's tier is
 *     floor(log_F(live docs)) with F = merge_factor; when a tier holds F or
 *     more segments, F of it are merged into one; a segment with more than
 *     30% deleted docs is rewritten alone.  One such merge at a time
 *     (merge_lock); they can take minutes on a large table.
 *   - in memory, one per small commit: searchable at once, durable through
 *     the WAL only.  The memory tier's thread (nrt_lock) merges them in
 *     memory under the same tiered policy with F = nrt_merge_factor, and
 *     flushes the whole tier to one segment file when it holds more than
 *     nrt_flush_bytes or its oldest commit is older than nrt_flush_ms; the
 *     checkpoint after a flush lets the WAL go.  It never waits for a file
 *     merge, so a write storm during a long file merge still finds a
 *     bounded number of segments; and when it falls behind anyway (a busy
 *     machine, or recovery, which has no threads), a commit that finds more
 *     than nrt_max_segments in memory merges some of them itself before
 *     returning (table_merge_relieve).
 * The two picks never share a segment (`merging`), so a file merge and a
 * memory merge may finish in either order: each swaps its own sources for
 * its result under wlock.
 */
#include "index/table_int.h"
#include "store/mem.h"
#include "store/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef enum {
    PICK_FILES,   /* the file tiers, into a file */
    PICK_MEMORY,  /* the memory tier, into memory */
    PICK_FLUSH,   /* every in-memory segment, into a file */
    PICK_ALL      /* everything, into a file (table_force_merge) */
} PickKind;

typedef struct MergePick {
    PickKind kind;
    int n;
    Segment **segs;           /* references */
    roaring_bitmap_t **used;  /* copies of the deletes the merge saw */
    uint64_t *ids;
    bool *in_mem;             /* the source is an in-memory segment (no files) */
    uint64_t born_ns;         /* oldest born_ns of in-memory sources (0: none) */
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
    qr_free(p->in_mem);
    memset(p, 0, sizeof *p);
}

static uint64_t live_docs(Table *t, int i)
{
    uint64_t n = seg_n_docs(t->segs[i]);
    return n - (t->dels[i] ? roaring_bitmap_get_cardinality(t->dels[i]) : 0);
}

void table_merge_clear_wait_locked(Table *t)
{
    for (int i = 0; i < t->n_segs; i++)
        t->meta[i].merge_wait = false;
    t->merge_retry_at = 0;
}

/* Segment i can join a merge of this kind. */
static bool pickable(const Table *t, int i, PickKind kind)
{
    const SegMeta *m = &t->meta[i];
    if (m->merging || m->merge_failed || m->merge_wait)
        return false;
    switch (kind) {
    case PICK_FILES:
        return !m->in_mem;
    case PICK_MEMORY:
    case PICK_FLUSH:
        return m->in_mem;
    default:
        return true;
    }
}

/* The tiered policy over the segments pickable for `kind` (see the file
 * comment): indexes into chosen[], returns how many. */
static int choose_tiered(Table *t, PickKind kind, int f, int *chosen)
{
    int n = t->n_segs, nc = 0;
    double lf = log((double)f);
    /* deleted-heavy segment first */
    for (int i = 0; i < n && !nc; i++) {
        if (!pickable(t, i, kind) || !t->dels[i])
            continue;
        uint64_t d = roaring_bitmap_get_cardinality(t->dels[i]);
        if (d * 10 > (uint64_t)seg_n_docs(t->segs[i]) * 3)
            chosen[nc++] = i;
    }
    for (int tier = 0; tier < 12 && !nc; tier++) {
        int cnt = 0;
        for (int i = 0; i < n; i++)
            if (pickable(t, i, kind) &&
                (int)floor(log((double)live_docs(t, i) + 1) / lf) <= tier)
                cnt++;
        if (cnt < f)
            continue;
        for (int i = 0; i < n && nc < f; i++)
            if (pickable(t, i, kind) &&
                (int)floor(log((double)live_docs(t, i) + 1) / lf) <= tier)
                chosen[nc++] = i;
    }
    return nc;
}

/* Choose segments to merge (under wlock).  False: nothing to do. */
static bool choose_merge(Table *t, PickKind kind, MergePick *p)
{
    int n = t->n_segs;
    int *chosen = qr_calloc((size_t)n + 1, sizeof *chosen);
    if (!chosen)
        return false;
    int nc = 0;
    if (kind == PICK_ALL || kind == PICK_FLUSH) {
        bool any_del = false, any_mem = false;
        for (int i = 0; i < n; i++) {
            if (kind == PICK_FLUSH && !t->meta[i].in_mem)
                continue;
            if (!pickable(t, i, kind)) {
                nc = 0; /* all or nothing */
                break;
            }
            chosen[nc++] = i;
            any_del |= t->dels[i] != NULL;
            any_mem |= t->meta[i].in_mem;
        }
        if (nc == 1 && !any_del && !any_mem)
            nc = 0;
    } else if (kind == PICK_MEMORY) {
        int f = t->opts.nrt_merge_factor < 2 ? 2 : t->opts.nrt_merge_factor;
        nc = choose_tiered(t, kind, f, chosen);
    } else {
        int f = t->opts.merge_factor < 2 ? 2 : t->opts.merge_factor;
        nc = choose_tiered(t, kind, f, chosen);
    }
    if (nc == 0) {
        qr_free(chosen);
        return false;
    }
    p->kind = kind;
    p->n = nc;
    p->segs = qr_calloc((size_t)nc, sizeof *p->segs);
    p->used = qr_calloc((size_t)nc, sizeof *p->used);
    p->ids = qr_calloc((size_t)nc, sizeof *p->ids);
    p->in_mem = qr_calloc((size_t)nc, sizeof *p->in_mem);
    if (!p->segs || !p->used || !p->ids || !p->in_mem) {
        qr_free(chosen);
        p->n = 0;
        pick_free(p);
        return false;
    }
    for (int k = 0; k < nc; k++) {
        int i = chosen[k];
        p->segs[k] = seg_ref(t->segs[i]);
        p->used[k] = t->dels[i] ? roaring_bitmap_copy(t->dels[i]) : NULL;
        p->ids[k] = t->meta[i].id;
        p->in_mem[k] = t->meta[i].in_mem;
        if (t->meta[i].in_mem && (!p->born_ns || t->meta[i].born_ns < p->born_ns))
            p->born_ns = t->meta[i].born_ns;
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

/* A merge failed (under wlock): its sources are candidates again, or left
 * out for a while (see run_merge). */
static void merge_failed_locked(Table *t, const MergePick *p, int rc)
{
    /* never retry the same failure in a loop.  Damage: its segments stay
     * as they are until the table is reopened (quarry check names it).
     * A full disk or a memory shortage passes: they are tried again
     * after some commits, twice as many after each failure in a row
     * (and at once by a forced merge) */
    bool transient = rc == QR_EIO || rc == QR_ENOMEM;
    for (int k = 0; k < p->n; k++) {
        int i = index_of_seg(t, p->segs[k]);
        if (i >= 0) {
            t->meta[i].merging = false;
            if (transient)
                t->meta[i].merge_wait = true;
            else
                t->meta[i].merge_failed = true;
        }
    }
    if (transient) {
        t->merge_retry_gap = t->merge_retry_gap ? t->merge_retry_gap * 2 : 1;
        if (t->merge_retry_gap > 1024)
            t->merge_retry_gap = 1024;
        t->merge_retry_at = t->commits + t->merge_retry_gap;
    }
    t->merges_failed++;
}

/* Swap the sources of p for ns (id `id`) in the committed state, carrying
 * over the deletes committed while the merge ran (under wlock).  *old gets
 * the sources' references to drop once the new state is published (may
 * be NULL on OOM: then they are dropped at once). */
static void merge_swap_locked(Table *t, const MergePick *p, Segment *ns, uint64_t id,
                              uint32_t **remap, Segment ***old_out, int *n_old)
{
    /* deletes committed while the merge ran follow the docs (batches
     * resolve their deletes at commit, so there are no others) */
    roaring_bitmap_t *nd = roaring_bitmap_create();
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
    }
    bool out_mem = seg_in_memory(ns);
    /* rebuild the committed list: sources out, merged segment at `first`
     * (read each slot before any write: the merged segment may land in a
     * source's slot) */
    int w = 0;
    Segment **old = qr_calloc((size_t)p->n, sizeof *old);
    *n_old = 0;
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
            t->meta[w] = (SegMeta){.id = id, .in_mem = out_mem,
                                   .del_dirty = !out_mem && !roaring_bitmap_is_empty(nd),
                                   .born_ns = out_mem ? p->born_ns : 0};
            if (!t->dels[w])
                roaring_bitmap_free(nd);
            nd = NULL;
            w++;
        }
        if (src) {
            if (cur_meta.in_mem) {
                t->n_mem--;
                atomic_fetch_sub(&t->mem_bytes, seg_file_bytes(cur));
            }
            if (old)
                old[(*n_old)++] = cur;
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
    if (out_mem) {
        t->n_mem++;
        atomic_fetch_add(&t->mem_bytes, seg_file_bytes(ns));
    }
    *old_out = old;
}

/* Run one merge end to end.  Called with the pick's lock held (merge_lock
 * or nrt_lock), wlock not held. */
static int run_merge(Table *t, MergePick *p, QrError *err)
{
    char path[4096];
    pthread_mutex_lock(&t->wlock);
    uint64_t id = t->next_seg_id++;
    t->merges_running++;
    QrSchema sc = t->schema; /* fields are only added: a copy reads every source */
    pthread_mutex_unlock(&t->wlock);
    bool to_mem = p->kind == PICK_MEMORY;
    uint32_t **remap = NULL;
    Segment *ns = NULL;
    int rc;
    if (to_mem) {
        table_mem_seg_name(path, sizeof path, t->dir, id);
        rc = seg_merge_mem(p->segs, (const roaring_bitmap_t *const *)p->used, p->n, &sc, path,
                           id, &ns, &remap, err);
    } else {
        table_seg_path(path, sizeof path, t->dir, id);
        rc = seg_merge(p->segs, (const roaring_bitmap_t *const *)p->used, p->n, &sc, path, false,
                       &remap, err);
        if (rc == QR_OK)
            rc = seg_open(path, id, &ns, err);
        /* built outside the write lock; re-synced under it below in case
         * an index was created or dropped meanwhile */
        if (rc == QR_OK)
            rc = seg_sync_btrees(ns, &sc, true, false, err);
    }
    pthread_mutex_lock(&t->wlock);
    t->merges_running--;
    if (rc == QR_OK)
        rc = seg_sync_btrees(ns, &t->schema, true, false, err);
    if (rc != QR_OK) {
        seg_unref(ns);
        if (!to_mem) {
            unlink(path);
            seg_remove_btree_files(path);
        }
        merge_failed_locked(t, p, rc);
        goto out;
    }
    Segment **old = NULL;
    int n_old = 0;
    merge_swap_locked(t, p, ns, id, remap, &old, &n_old);
    if (p->kind == PICK_MEMORY)
        t->nrt_merges++;
    else if (p->kind == PICK_FLUSH)
        t->nrt_flushes++;
    else
        t->merges_done++;
    t->merge_retry_gap = 0;
    rc = table_publish_locked(t, err);
    if (rc == QR_OK && !to_mem)
        rc = table_checkpoint_locked(t, err);
    if (rc == QR_OK && !to_mem) {
        /* the durable manifest no longer names the sources: remove them */
        for (int k = 0; k < p->n; k++) {
            if (p->in_mem[k])
                continue;
            table_seg_path(path, sizeof path, t->dir, p->ids[k]);
            unlink(path);
            seg_remove_btree_files(path);
        }
        table_remove_stale_files(t);
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

/* Choose (under wlock, taken here) and run one merge of `kind`; the
 * caller holds the kind's lock.  A background thread's merge is not
 * started once the table is closing.  False when there was nothing to do. */
static bool merge_once(Table *t, PickKind kind, bool background, int *rc, QrError *err)
{
    pthread_mutex_lock(&t->wlock);
    MergePick p = {0};
    bool have = !t->broken && !(background && t->stop) && choose_merge(t, kind, &p);
    pthread_mutex_unlock(&t->wlock);
    *rc = QR_OK;
    if (!have)
        return false;
    *rc = run_merge(t, &p, err);
    pick_free(&p);
    return true;
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
            QrError e;
            qr_error_clear(&e);
            int rc;
            pthread_mutex_lock(&t->merge_lock);
            bool did = merge_once(t, PICK_FILES, true, &rc, &e);
            pthread_mutex_unlock(&t->merge_lock);
            if (rc != QR_OK)
                qr_log(QR_LOG_WARN, "merge in table \"%s\" failed: %s", t->dir, e.message);
            if (!did)
                break;
        }
        pthread_mutex_lock(&t->wlock);
        pthread_cond_broadcast(&t->idle_cv);
        pthread_mutex_unlock(&t->wlock);
    }
    return NULL;
}

/* ---- the memory tier ---- */

/* Is a flush of the memory tier due (size or age)?  Under wlock.  *wait_ns
 * gets how long until the age rule makes one due (UINT64_MAX: never). */
static bool flush_due_locked(Table *t, uint64_t now, uint64_t *wait_ns)
{
    *wait_ns = UINT64_MAX;
    if (t->n_mem == 0)
        return false;
    if (atomic_load(&t->mem_bytes) > t->opts.nrt_flush_bytes)
        return true;
    uint64_t oldest = UINT64_MAX;
    for (int i = 0; i < t->n_segs; i++)
        if (t->meta[i].in_mem && !t->meta[i].merging && t->meta[i].born_ns < oldest)
            oldest = t->meta[i].born_ns;
    if (oldest == UINT64_MAX)
        return false;
    uint64_t age_ns = (uint64_t)t->opts.nrt_flush_ms * 1000000u;
    if (now - oldest >= age_ns)
        return true;
    *wait_ns = age_ns - (now - oldest);
    return false;
}

/* One step of the memory tier's policy, the caller holding nrt_lock: a
 * flush when due, else a merge when a tier is full.  False: nothing done. */
static bool nrt_step(Table *t, bool allow_flush, bool background)
{
    uint64_t wait_ns;
    pthread_mutex_lock(&t->wlock);
    bool flush = allow_flush && !t->opts.read_only && t->wal &&
                 flush_due_locked(t, qr_now_ns(), &wait_ns);
    pthread_mutex_unlock(&t->wlock);
    QrError e;
    qr_error_clear(&e);
    int rc;
    bool did = merge_once(t, flush ? PICK_FLUSH : PICK_MEMORY, background, &rc, &e);
    if (rc != QR_OK)
        qr_log(QR_LOG_WARN, "%s in table \"%s\" failed: %s",
               flush ? "writing the in-memory segments to a file" : "merging in-memory segments",
               t->dir, e.message);
    return did && rc == QR_OK;
}

static void *nrt_main(void *arg)
{
    Table *t = arg;
    pthread_mutex_lock(&t->wlock);
    while (!t->stop) {
        uint64_t wait_ns;
        bool due = t->nrt_due || flush_due_locked(t, qr_now_ns(), &wait_ns);
        if (!due) {
            struct timespec dl;
            clock_gettime(CLOCK_MONOTONIC, &dl);
            uint64_t w = wait_ns == UINT64_MAX ? 1000000000u : wait_ns + 1000000u;
            uint64_t ns = (uint64_t)dl.tv_nsec + w;
            dl.tv_sec += (time_t)(ns / 1000000000u);
            dl.tv_nsec = (long)(ns % 1000000000u);
            pthread_cond_timedwait(&t->nrt_cv, &t->wlock, &dl);
            continue;
        }
        t->nrt_due = false;
        pthread_mutex_unlock(&t->wlock);
        pthread_mutex_lock(&t->nrt_lock);
        while (nrt_step(t, true, true)) {
        }
        pthread_mutex_unlock(&t->nrt_lock);
        pthread_mutex_lock(&t->wlock);
    }
    pthread_mutex_unlock(&t->wlock);
    return NULL;
}

void table_merge_note_commit_locked(Table *t)
{
    if (t->merge_retry_at && t->commits >= t->merge_retry_at)
        table_merge_clear_wait_locked(t);
    if (t->merge_thr_started) {
        t->merge_due = true;
        pthread_cond_signal(&t->merge_cv);
    }
    if (t->nrt_thr_started && t->n_mem >= (t->opts.nrt_merge_factor < 2 ? 2 : t->opts.nrt_merge_factor)) {
        t->nrt_due = true;
        pthread_cond_signal(&t->nrt_cv);
    }
    if ((uint64_t)t->n_segs > t->peak_segments)
        t->peak_segments = (uint64_t)t->n_segs;
}

void table_merge_relieve(Table *t)
{
    pthread_mutex_lock(&t->wlock);
    bool over = t->n_mem > t->opts.nrt_max_segments;
    pthread_mutex_unlock(&t->wlock);
    if (!over)
        return;
    /* the tier's thread may be merging: then wait for it, and merge here
     * only what is still over the bound */
    pthread_mutex_lock(&t->nrt_lock);
    for (;;) {
        pthread_mutex_lock(&t->wlock);
        over = t->n_mem > t->opts.nrt_max_segments;
        pthread_mutex_unlock(&t->wlock);
        if (!over || !nrt_step(t, false, false))
            break;
    }
    pthread_mutex_unlock(&t->nrt_lock);
}

int table_merge_flush_memory(Table *t, QrError *err)
{
    pthread_mutex_lock(&t->nrt_lock);
    int rc;
    merge_once(t, PICK_FLUSH, false, &rc, err);
    pthread_mutex_unlock(&t->nrt_lock);
    return rc;
}

/* ---- threads and the public calls ---- */

int table_merge_start(Table *t, QrError *err)
{
    if (!t->opts.background_merge)
        return QR_OK;
    if (pthread_create(&t->merge_thr, NULL, merge_main, t) != 0)
        return qr_error_set(err, QR_EINTERNAL, "could not start the merge thread");
    t->merge_thr_started = true;
    if (pthread_create(&t->nrt_thr, NULL, nrt_main, t) != 0)
        return qr_error_set(err, QR_EINTERNAL, "could not start the in-memory merge thread");
    t->nrt_thr_started = true;
    return QR_OK;
}

void table_merge_stop(Table *t)
{
    pthread_mutex_lock(&t->wlock);
    t->stop = true;
    pthread_cond_signal(&t->merge_cv);
    pthread_cond_signal(&t->nrt_cv);
    pthread_mutex_unlock(&t->wlock);
    if (t->merge_thr_started)
        pthread_join(t->merge_thr, NULL);
    if (t->nrt_thr_started)
        pthread_join(t->nrt_thr, NULL);
    t->merge_thr_started = t->nrt_thr_started = false;
}

int table_force_merge(Table *t, QrError *err)
{
    /* both locks: no merge of either kind is running, so every segment can
     * join (the memory tier's included: the result is one file) */
    pthread_mutex_lock(&t->merge_lock);
    pthread_mutex_lock(&t->nrt_lock);
    pthread_mutex_lock(&t->wlock);
    table_merge_clear_wait_locked(t); /* asked for: space may be back */
    pthread_mutex_unlock(&t->wlock);
    int rc;
    merge_once(t, PICK_ALL, false, &rc, err);
    pthread_mutex_unlock(&t->nrt_lock);
    pthread_mutex_unlock(&t->merge_lock);
    return rc;
}

void table_wait_merges(Table *t)
{
    /* merge_lock is held by whoever merges files: taking it waits for a
     * running merge; then run whatever the policy still wants, here.  The
     * memory tier's merges are waited for too (not its flush: that is
     * table_flush's) */
    for (;;) {
        QrError e;
        qr_error_clear(&e);
        int rc;
        pthread_mutex_lock(&t->merge_lock);
        bool more = merge_once(t, PICK_FILES, false, &rc, &e) && rc == QR_OK;
        pthread_mutex_lock(&t->wlock);
        t->merge_due = false;
        pthread_mutex_unlock(&t->wlock);
        pthread_mutex_unlock(&t->merge_lock);
        if (!more)
            break;
    }
    pthread_mutex_lock(&t->nrt_lock);
    while (nrt_step(t, false, false)) {
    }
    pthread_mutex_unlock(&t->nrt_lock);
}
