/*
 * loader.c — bulk loading with a pool of indexing threads (quarry.h
 * "bulk loading" has the contract).
 *
 * Layer: query/.  Calls index/table.h, cJSON and the base kit.
 *
 * Pipeline: the caller's thread fills the current chunk (documents copied
 * into one buffer) and queues it; a worker takes the oldest queued chunk,
 * builds its batch -- parse, checks, analysis, inversion, columns, stored
 * documents -- and seals it (table_batch_seal: the segment file written in
 * the worker); the caller's thread commits the oldest chunk once it is
 * built, in input order, and delivers its outcomes.  Invariants (under
 * mu): chunks[0 .. n_chunks) are in input order, and a chunk leaves only
 * from the front, after its commit (or when the load stopped).
 *
 * Counting "replaced" without asking the table per document: a chunk's
 * puts that replaced a document of the same chunk are its puts minus its
 * distinct keys (table_batch_keys); those that replaced a committed one
 * are what its commit found (TableCommit.n_replaced), against every
 * earlier chunk's commit -- what a sequential load counts.
 */
#include "query/query_int.h"
#include "store/mem.h"
#include "store/util.h"

#include <cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define LOAD_CHUNK_DOCS 10000
#define LOAD_CHUNK_BYTES (32u << 20)
#define LOAD_CHUNK_MIN_BYTES (1u << 20)
#define LOAD_MEM_PER_BYTE 3     /* memory a chunk holds per JSON byte, about */
#define LOAD_MEMORY_MIN (64u << 20)

static _Atomic int load_threads_set;
static _Atomic size_t load_memory_set;
/* The budget is the process's: what every load's chunks in flight hold. */
static _Atomic size_t load_memory_used;

int qr_load_threads_default(void)
{
    int n = atomic_load(&load_threads_set);
    return n > 0 ? n : qr_cpu_count();
}

size_t qr_load_memory_default(void)
{
    size_t m = atomic_load(&load_memory_set);
    if (m)
        return m;
    uint64_t phys = qr_mem_physical();
    m = phys ? (size_t)(phys / 8) : (size_t)1 << 30;
    return m < LOAD_MEMORY_MIN ? LOAD_MEMORY_MIN : m;
}

void qr_load_set_defaults(int threads, size_t memory_bytes)
{
    if (threads > 0)
        atomic_store(&load_threads_set, threads);
    if (memory_bytes)
        atomic_store(&load_memory_set, memory_bytes);
}

typedef struct LoadDoc {
    uint64_t tag;
    size_t off, len;  /* in the chunk's text */
} LoadDoc;

typedef struct LoadReject {
    uint64_t tag;
    QrError err;
} LoadReject;

typedef enum { CH_FILLING, CH_QUEUED, CH_BUILDING, CH_BUILT } ChunkState;

typedef struct Chunk {
    ChunkState state;
    QrBuf text;           /* owns: the documents' bytes */
    LoadDoc *docs;        /* owns */
    size_t n_docs, cap_docs;
    /* what the build found (the worker's, read after CH_BUILT) */
    TableBatch *b;        /* owns: the built, sealed batch */
    LoadReject *rej;      /* owns: rejected documents in order */
    size_t n_rej, cap_rej;
    uint64_t n_put;       /* documents put into the batch */
    uint64_t last_tag;    /* of the last document the build went through */
    bool stopped;         /* strict: the build stopped at its last rejection */
    int fatal;            /* the build failed (its error in fatal_err) */
    QrError fatal_err;
    size_t charge;        /* bytes counted against the budget */
} Chunk;

struct QrLoader {
    QrTable *t;           /* borrows */
    QrLoadOpts o;
    size_t chunk_bytes;   /* effective */
    size_t max_inflight;  /* chunks queued, building or built */
    pthread_mutex_t mu;
    pthread_cond_t work_cv;   /* a chunk was queued, or stop */
    pthread_cond_t done_cv;   /* a chunk was built */
    Chunk **chunks;       /* owns: in input order, chunks[n_chunks-1] may be filling */
    size_t n_chunks, cap_chunks;
    bool stop;
    pthread_t *thr;
    int n_thr;
    /* the load's outcome (caller's thread) */
    int rc;
    QrError err;
    Chunk *held;          /* owns: strict stop: the stopped chunk's batch, uncommitted */
};

static void chunk_free(Chunk *c)
{
    if (!c)
        return;
    if (c->charge)
        atomic_fetch_sub(&load_memory_used, c->charge);
    table_batch_free(c->b);
    qr_buf_free(&c->text);
    qr_free(c->docs);
    qr_free(c->rej);
    qr_free(c);
}

/* A load stops at the first fatal or strict error, which is kept and
 * returned from then on. */
static int load_fail(QrLoader *l, int rc, const QrError *e, QrError *err)
{
    if (l->rc == QR_OK) {
        l->rc = rc;
        qr_error_copy(&l->err, e);
    }
    qr_error_copy(err, &l->err);
    return l->rc;
}

static bool is_fatal(int rc)
{
    return rc == QR_EIO || rc == QR_ENOMEM || rc == QR_EINTERNAL || rc == QR_ECORRUPT ||
           rc == QR_EPERM;
}

static void chunk_reject(Chunk *c, uint64_t tag, const QrError *e)
{
    if (c->n_rej == c->cap_rej) {
        size_t nc = c->cap_rej ? c->cap_rej * 2 : 16;
        LoadReject *nr = qr_realloc(c->rej, nc * sizeof *nr);
        if (!nr) {
            c->fatal = QR_ENOMEM;
            qr_error_set(&c->fatal_err, QR_ENOMEM, "out of memory keeping rejected lines");
            return;
        }
        c->rej = nr;
        c->cap_rej = nc;
    }
    c->rej[c->n_rej].tag = tag;
    c->rej[c->n_rej].err = *e;
    c->n_rej++;
}

/* Build a chunk's batch (a worker, or the caller when threads = 1). */
static void chunk_build(QrLoader *l, Chunk *c)
{
    QrError e;
    qr_error_clear(&e);
    int rc = table_batch_begin(l->t->table, &c->b, &e);
    if (rc == QR_OK)
        table_batch_set_bulk(c->b, true);
    for (size_t i = 0; rc == QR_OK && i < c->n_docs && !c->fatal; i++) {
        const LoadDoc *d = &c->docs[i];
        const char *s = (const char *)c->text.data + d->off;
        const char *end = NULL;
        qr_error_clear(&e);
        /* the parse end, not cJSON_GetErrorPtr: that is one global for
         * every thread */
        cJSON *root = cJSON_ParseWithLengthOpts(s, d->len, &end, false);
        int prc;
        if (!root) {
            qr_error_set(&e, QR_ESYNTAX, "invalid JSON");
            if (end && end >= s && end <= s + d->len) {
                qr_error_detail(&e, "error near byte %ld", (long)(end - s) + 1);
                qr_error_pos(&e, end - s, (int64_t)d->tag, (int32_t)(end - s) + 1);
            }
            prc = QR_ESYNTAX;
        } else {
            prc = quarry_doc_check(s, d->len, &e);
            if (prc == QR_OK)
                prc = table_batch_put(c->b, s, d->len, root, NULL, &e);
            cJSON_Delete(root);
        }
        if (prc == QR_OK) {
            c->n_put++;
            c->last_tag = d->tag;
            continue;
        }
        qr_error_pos(&e, -1, (int64_t)d->tag, -1);
        if (is_fatal(prc)) {
            c->fatal = prc;
            c->fatal_err = e;
            break;
        }
        chunk_reject(c, d->tag, &e);
        c->last_tag = d->tag;
        if (l->o.strict) {
            c->stopped = true;
            break;
        }
    }
    if (rc != QR_OK) {
        c->fatal = rc;
        c->fatal_err = e;
    }
    /* the segment file, here in parallel: the commit only orders and logs */
    if (!c->fatal && (rc = table_batch_seal(c->b, &e)) != QR_OK) {
        c->fatal = rc;
        c->fatal_err = e;
    }
    /* the text stays: the batch's records are copies of it */
    qr_buf_free(&c->text);
}

static void *worker_main(void *arg)
{
    QrLoader *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        Chunk *c = NULL;
        for (size_t i = 0; i < l->n_chunks && !c; i++)
            if (l->chunks[i]->state == CH_QUEUED)
                c = l->chunks[i];
        if (!c) {
            if (l->stop)
                break;
            pthread_cond_wait(&l->work_cv, &l->mu);
            continue;
        }
        c->state = CH_BUILDING;
        pthread_mutex_unlock(&l->mu);
        chunk_build(l, c);
        pthread_mutex_lock(&l->mu);
        c->state = CH_BUILT;
        pthread_cond_broadcast(&l->done_cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

int qr_loader_begin(QrTable *t, const QrLoadOpts *opts, QrLoader **out, QrError *err)
{
    *out = NULL;
    QrLoader *l = qr_calloc(1, sizeof *l);
    if (!l)
        return qr_error_set(err, QR_ENOMEM, "out of memory starting a load");
    l->t = t;
    l->o = *opts;
    if (l->o.threads <= 0)
        l->o.threads = qr_load_threads_default();
    if (l->o.threads > 256)
        l->o.threads = 256;
    if (!l->o.chunk_docs)
        l->o.chunk_docs = LOAD_CHUNK_DOCS;
    if (!l->o.chunk_bytes)
        l->o.chunk_bytes = LOAD_CHUNK_BYTES;
    if (!l->o.memory_bytes)
        l->o.memory_bytes = qr_load_memory_default();
    /* every thread gets a chunk, and one more waits for its commit, within
     * the budget: smaller chunks when the budget is small.  One thread
     * builds each chunk when it is full, in the caller's thread */
    size_t want = l->o.threads > 1 ? (size_t)l->o.threads + 1 : 1;
    l->chunk_bytes = l->o.chunk_bytes;
    size_t fit = l->o.memory_bytes / (LOAD_MEM_PER_BYTE * want);
    if (l->chunk_bytes > fit)
        l->chunk_bytes = fit < LOAD_CHUNK_MIN_BYTES ? LOAD_CHUNK_MIN_BYTES : fit;
    l->max_inflight = want;
    qr_error_clear(&l->err);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work_cv, NULL);
    pthread_cond_init(&l->done_cv, NULL);
    if (l->o.threads > 1) {
        l->thr = qr_calloc((size_t)l->o.threads, sizeof *l->thr);
        if (!l->thr) {
            qr_loader_free(l);
            return qr_error_set(err, QR_ENOMEM, "out of memory starting a load");
        }
        for (int i = 0; i < l->o.threads; i++) {
            if (pthread_create(&l->thr[i], NULL, worker_main, l) != 0) {
                qr_loader_free(l);
                return qr_error_set(err, QR_EINTERNAL, "could not start indexing thread %d",
                                    i + 1);
            }
            l->n_thr++;
        }
    }
    *out = l;
    return QR_OK;
}

/* Commit a built chunk's batch and report the commit: its documents that
 * replaced one of the same chunk are its puts minus its distinct keys,
 * those that replaced a committed one what the commit found.  Caller's
 * thread.  Errors: the commit's (nothing of the chunk was written). */
static int chunk_commit(QrLoader *l, Chunk *c, QrError *err)
{
    uint64_t ops = table_batch_ops(c->b), keys = table_batch_keys(c->b);
    TableCommit tc;
    int rc = table_batch_commit_start(c->b, &tc, err);
    if (rc == QR_OK)
        rc = table_commit_wait(&tc, err);
    if (rc == QR_OK && ops && l->o.on_commit) {
        uint64_t replaced = ops - keys + tc.n_replaced;
        l->o.on_commit(l->o.arg, c->last_tag, ops - replaced, replaced);
    }
    return rc;
}

/* Commit the front chunk (built) and deliver its outcomes; it leaves the
 * queue.  A strict stop keeps its batch uncommitted in l->held.  Caller's
 * thread, mu not held. */
static int commit_front(QrLoader *l, QrError *err)
{
    pthread_mutex_lock(&l->mu);
    Chunk *c = l->chunks[0];
    l->n_chunks--;
    memmove(l->chunks, l->chunks + 1, l->n_chunks * sizeof *l->chunks);
    pthread_mutex_unlock(&l->mu);
    int rc = QR_OK;
    /* outcomes first, in input order (all of them come before its commit
     * point's, as in a sequential load where a bad line is reported when
     * read) */
    for (size_t i = 0; i < c->n_rej; i++)
        if (l->o.on_reject)
            l->o.on_reject(l->o.arg, c->rej[i].tag, &c->rej[i].err);
    if (c->fatal) {
        rc = load_fail(l, c->fatal, &c->fatal_err, err);
        chunk_free(c);
        return rc;
    }
    if (c->stopped) {
        /* a strict rejection: what the chunk accepted waits for finish */
        l->held = c;
        return load_fail(l, c->rej[c->n_rej - 1].err.code, &c->rej[c->n_rej - 1].err, err);
    }
    QrError e;
    qr_error_clear(&e);
    rc = chunk_commit(l, c, &e);
    if (rc != QR_OK)
        rc = load_fail(l, rc, &e, err);
    chunk_free(c);
    return rc;
}

/* May another chunk go in flight?  Its own limit, and the process's
 * budget -- which a load with nothing in flight may always pass by one
 * chunk, so that every load makes progress.  mu held. */
static bool room_for(QrLoader *l, size_t inflight, size_t charge)
{
    if (inflight == 0)
        return true;
    return inflight < l->max_inflight &&
           atomic_load(&load_memory_used) + charge <= l->o.memory_bytes;
}

/* Commit every built chunk at the front.  DRAIN_ROOM: wait (building in
 * this thread when there are no workers) until room_for the filling
 * chunk; DRAIN_ALL: until nothing is in flight.  After a failure the rest
 * is discarded. */
enum { DRAIN_BUILT, DRAIN_ROOM, DRAIN_ALL };

static int drain(QrLoader *l, int mode, QrError *err)
{
    for (;;) {
        if (l->rc != QR_OK) {
            pthread_mutex_lock(&l->mu);
            /* the later chunks die with the load (workers finish theirs) */
            for (size_t i = 0; i < l->n_chunks; i++)
                if (l->chunks[i]->state == CH_QUEUED)
                    l->chunks[i]->state = CH_BUILT, l->chunks[i]->fatal = QR_ECANCELED;
            while (l->n_chunks) {
                Chunk *c = l->chunks[0];
                while (c->state == CH_BUILDING)
                    pthread_cond_wait(&l->done_cv, &l->mu);
                l->n_chunks--;
                memmove(l->chunks, l->chunks + 1, l->n_chunks * sizeof *l->chunks);
                chunk_free(c);
            }
            pthread_mutex_unlock(&l->mu);
            qr_error_copy(err, &l->err);
            return l->rc;
        }
        pthread_mutex_lock(&l->mu);
        size_t inflight = l->n_chunks;
        Chunk *filling = inflight ? l->chunks[inflight - 1] : NULL;
        if (filling && filling->state == CH_FILLING)
            inflight--;
        else
            filling = NULL;
        Chunk *front = inflight ? l->chunks[0] : NULL;
        bool built = front && front->state == CH_BUILT;
        bool done = mode == DRAIN_BUILT ||
                    (mode == DRAIN_ROOM &&
                     room_for(l, inflight, filling ? LOAD_MEM_PER_BYTE * filling->text.len : 0)) ||
                    (mode == DRAIN_ALL && inflight == 0);
        if (!built && done) {
            pthread_mutex_unlock(&l->mu);
            return QR_OK;
        }
        if (!built && l->n_thr == 0 && front->state == CH_QUEUED) {
            front->state = CH_BUILDING;
            pthread_mutex_unlock(&l->mu);
            chunk_build(l, front);
            pthread_mutex_lock(&l->mu);
            front->state = CH_BUILT;
            built = true;
        }
        while (!built) {
            pthread_cond_wait(&l->done_cv, &l->mu);
            built = front->state == CH_BUILT;
        }
        pthread_mutex_unlock(&l->mu);
        int rc = commit_front(l, err);
        if (rc != QR_OK)
            continue; /* discards the rest above */
    }
}

/* Queue the filling chunk (if it has documents), charging its memory to
 * the budget: first wait for room (commits of this load's oldest chunks). */
static int submit(QrLoader *l, QrError *err)
{
    int rc = drain(l, DRAIN_ROOM, err);
    if (rc != QR_OK)
        return rc;
    pthread_mutex_lock(&l->mu);
    Chunk *c = l->n_chunks ? l->chunks[l->n_chunks - 1] : NULL;
    if (c && c->state == CH_FILLING && c->n_docs) {
        c->charge = LOAD_MEM_PER_BYTE * c->text.len;
        atomic_fetch_add(&load_memory_used, c->charge);
        c->state = CH_QUEUED;
        pthread_cond_signal(&l->work_cv);
    }
    pthread_mutex_unlock(&l->mu);
    return QR_OK;
}

int qr_loader_add(QrLoader *l, uint64_t tag, const char *json, size_t len, QrError *err)
{
    if (l->rc != QR_OK) {
        qr_error_copy(err, &l->err);
        return l->rc;
    }
    pthread_mutex_lock(&l->mu);
    Chunk *c = l->n_chunks ? l->chunks[l->n_chunks - 1] : NULL;
    if (!c || c->state != CH_FILLING) {
        c = NULL;
        if (l->n_chunks == l->cap_chunks) {
            size_t nc = l->cap_chunks ? l->cap_chunks * 2 : 8;
            Chunk **nv = qr_realloc(l->chunks, nc * sizeof *nv);
            if (nv) {
                l->chunks = nv;
                l->cap_chunks = nc;
            }
        }
        if (l->n_chunks < l->cap_chunks && (c = qr_calloc(1, sizeof *c))) {
            qr_buf_init(&c->text);
            qr_error_clear(&c->fatal_err);
            l->chunks[l->n_chunks++] = c;
        }
    }
    pthread_mutex_unlock(&l->mu);
    QrError e;
    qr_error_clear(&e);
    if (!c) {
        qr_error_set(&e, QR_ENOMEM, "out of memory queueing a document");
        return load_fail(l, QR_ENOMEM, &e, err);
    }
    if (c->n_docs == c->cap_docs) {
        size_t nc = c->cap_docs ? c->cap_docs * 2 : 256;
        LoadDoc *nd = qr_realloc(c->docs, nc * sizeof *nd);
        if (!nd) {
            qr_error_set(&e, QR_ENOMEM, "out of memory queueing a document");
            return load_fail(l, QR_ENOMEM, &e, err);
        }
        c->docs = nd;
        c->cap_docs = nc;
    }
    c->docs[c->n_docs] = (LoadDoc){.tag = tag, .off = c->text.len, .len = len};
    qr_buf_append(&c->text, json, len);
    if (!qr_buf_ok(&c->text)) {
        qr_error_set(&e, QR_ENOMEM, "out of memory queueing a document of %zu bytes", len);
        return load_fail(l, QR_ENOMEM, &e, err);
    }
    c->n_docs++;
    if (c->n_docs < l->o.chunk_docs && c->text.len < l->chunk_bytes)
        return drain(l, DRAIN_BUILT, err); /* commits whatever is built, without waiting */
    int rc = submit(l, err);
    /* one thread: build and commit it now, as a sequential load does */
    return rc == QR_OK && l->n_thr == 0 ? drain(l, DRAIN_ALL, err) : rc;
}

int qr_loader_finish(QrLoader *l, bool commit, QrError *err)
{
    if (l->rc == QR_OK && submit(l, err) == QR_OK)
        drain(l, DRAIN_ALL, err);
    if (commit && l->held) {
        /* a strict stop: commit what its chunk accepted (an upload keeps it) */
        Chunk *c = l->held;
        l->held = NULL;
        QrError e;
        qr_error_clear(&e);
        /* every line up to the rejected one is now committed or rejected */
        int rc = chunk_commit(l, c, &e);
        chunk_free(c);
        if (rc != QR_OK) {
            qr_error_copy(err, &e);
            return rc;
        }
    }
    if (l->rc != QR_OK)
        qr_error_copy(err, &l->err);
    return l->rc;
}

void qr_loader_free(QrLoader *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    for (size_t i = 0; i < l->n_chunks; i++)
        if (l->chunks[i]->state == CH_QUEUED || l->chunks[i]->state == CH_FILLING)
            l->chunks[i]->state = CH_BUILT; /* not built: dropped below */
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->n_thr; i++)
        pthread_join(l->thr[i], NULL);
    for (size_t i = 0; i < l->n_chunks; i++)
        chunk_free(l->chunks[i]);
    chunk_free(l->held);
    qr_free(l->chunks);
    qr_free(l->thr);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->work_cv);
    pthread_cond_destroy(&l->done_cv);
    qr_free(l);
}

/* ---- qr_batch_fill: one statement's writes on several threads ---- */

#define FILL_MIN_OPS_PER_THREAD 2048

typedef struct FillSlice {
    QrTable *t;
    const QrLoadOp *ops;
    size_t lo, hi;       /* ops[lo, hi) */
    QrBatch *b;          /* owns */
    int rc;
    size_t fail_at;
    QrError err;
} FillSlice;

static int fill_apply(QrBatch *b, const QrLoadOp *ops, size_t lo, size_t hi, size_t *fail_at,
                      QrError *err)
{
    for (size_t i = lo; i < hi; i++) {
        int rc = ops[i].is_delete ? qr_batch_delete(b, ops[i].text, ops[i].len, NULL, err)
                                  : qr_batch_put(b, ops[i].text, ops[i].len, NULL, err);
        if (rc != QR_OK) {
            *fail_at = i;
            return rc;
        }
    }
    return QR_OK;
}

static void *fill_main(void *arg)
{
    FillSlice *f = arg;
    qr_error_clear(&f->err);
    f->rc = qr_batch_begin(f->t, &f->b, &f->err);
    if (f->rc == QR_OK)
        f->rc = fill_apply(f->b, f->ops, f->lo, f->hi, &f->fail_at, &f->err);
    /* the slice's segment, here: the joining and the commit only move it */
    if (f->rc == QR_OK)
        f->rc = qr_batch_seal(f->b, &f->err);
    return NULL;
}

int qr_batch_fill(QrBatch *b, const QrLoadOp *ops, size_t n, int threads, size_t *failed_at,
                  QrError *err)
{
    size_t fail_at = 0;
    if (threads <= 0)
        threads = qr_load_threads_default();
    size_t k = n / FILL_MIN_OPS_PER_THREAD;
    if (k > (size_t)threads)
        k = (size_t)threads;
    if (k < 2) {
        int rc = fill_apply(b, ops, 0, n, &fail_at, err);
        if (rc != QR_OK && failed_at)
            *failed_at = fail_at;
        return rc;
    }
    FillSlice *sl = qr_calloc(k, sizeof *sl);
    pthread_t *th = qr_calloc(k, sizeof *th);
    if (!sl || !th) {
        qr_free(sl);
        qr_free(th);
        return qr_error_set(err, QR_ENOMEM, "out of memory starting indexing threads");
    }
    size_t started = 0;
    for (size_t i = 0; i < k; i++) {
        sl[i] = (FillSlice){.t = qr_batch_table(b), .ops = ops, .lo = n * i / k,
                            .hi = n * (i + 1) / k};
        if (i > 0 && pthread_create(&th[i], NULL, fill_main, &sl[i]) == 0)
            started = i + 1;
        else if (i > 0)
            break;
    }
    /* the first slice in this thread, straight into b */
    sl[0].rc = fill_apply(b, ops, sl[0].lo, sl[0].hi, &sl[0].fail_at, &sl[0].err);
    for (size_t i = 1; i < started; i++)
        pthread_join(th[i], NULL);
    int rc = started == k ? QR_OK : QR_EINTERNAL;
    if (rc != QR_OK)
        qr_error_set(err, QR_EINTERNAL, "could not start indexing threads");
    /* in op order: the first slice that failed names the error; the ones
     * before it join b */
    for (size_t i = 0; i < k && rc == QR_OK; i++) {
        if (i > 0 && sl[i].rc == QR_OK)
            sl[i].rc = qr_batch_absorb(b, sl[i].b, &sl[i].err);
        if (sl[i].rc != QR_OK) {
            rc = sl[i].rc;
            qr_error_copy(err, &sl[i].err);
            fail_at = sl[i].fail_at;
        }
    }
    for (size_t i = 0; i < k; i++)
        qr_batch_free(sl[i].b);
    qr_free(sl);
    qr_free(th);
    if (rc != QR_OK && failed_at)
        *failed_at = fail_at;
    return rc;
}
