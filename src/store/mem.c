/*
 * mem.c — allocation hook with fault injection, QrArena, and the
 * process-wide memory budget of capped arenas.
 * Layer: store/ (base kit).
 */
#include "store/mem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

static _Atomic int64_t fail_after = -1; /* <0: never fail */
static _Atomic int64_t alloc_count = 0;

static bool should_fail(void)
{
    atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed);
    int64_t f = atomic_load_explicit(&fail_after, memory_order_relaxed);
    if (f < 0)
        return false;
    if (f == 0)
        return true;
    atomic_fetch_sub_explicit(&fail_after, 1, memory_order_relaxed);
    return false;
}

void qr_mem_fail_after(int64_t n)
{
    atomic_store(&fail_after, n);
    atomic_store(&alloc_count, 0);
}

int64_t qr_mem_alloc_count(void) { return atomic_load(&alloc_count); }

void *qr_malloc(size_t n)
{
    if (should_fail())
        return NULL;
    return malloc(n ? n : 1);
}

void *qr_calloc(size_t count, size_t size)
{
    if (should_fail())
        return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *qr_realloc(void *p, size_t n)
{
    if (should_fail())
        return NULL;
    return realloc(p, n ? n : 1);
}

void qr_free(void *p) { free(p); }

char *qr_strndup(const char *s, size_t n)
{
    char *d = qr_malloc(n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *qr_strdup(const char *s) { return qr_strndup(s, strlen(s)); }

/* ---- the budget ---- */

static _Atomic size_t budget_limit = 0; /* 0: none */
static _Atomic size_t budget_used = 0;

void qr_mem_budget_set(size_t limit_bytes) { atomic_store(&budget_limit, limit_bytes); }
size_t qr_mem_budget_limit(void) { return atomic_load(&budget_limit); }
size_t qr_mem_budget_used(void) { return atomic_load(&budget_used); }

bool qr_mem_budget_take(size_t n)
{
    size_t lim = atomic_load(&budget_limit);
    size_t cur = atomic_load(&budget_used);
    do {
        if (lim && (n > lim || cur > lim - n))
            return false;
    } while (!atomic_compare_exchange_weak(&budget_used, &cur, cur + n));
    return true;
}

void qr_mem_budget_give(size_t n) { atomic_fetch_sub(&budget_used, n); }

void qr_mem_tune_for_threads(void)
{
#ifdef __GLIBC__
    /* A fixed threshold turns off glibc's dynamic one, which rises to 32 MiB
     * after the first big free and lets every thread's arena keep tens of
     * megabytes at its top that malloc_trim does not return */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
}

void qr_mem_trim(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

uint64_t qr_mem_physical(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t phys = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
    if (f) {
        unsigned long long cg;
        if (fscanf(f, "%llu", &cg) == 1 && cg > 0 && (phys == 0 || cg < phys))
            phys = cg; /* "max" (no limit) does not scan as a number */
        fclose(f);
    }
    return phys;
}

/* ---- arena ---- */

typedef struct ArenaBlock {
    struct ArenaBlock *next; /* owns: older block */
    size_t size;             /* usable bytes after the header */
    size_t used;
    /* data follows, 16-aligned */
} ArenaBlock;

/* Invariant: a capped arena has taken from the budget exactly the bytes
 * (headers included) of the blocks in head's chain and of spare. */
struct QrArena {
    ArenaBlock *head; /* owns: newest block first */
    ArenaBlock *spare; /* owns: one block a release gave back, reused first */
    size_t cap;       /* 0 = unlimited (and outside the budget) */
    size_t handed;    /* bytes handed out */
    bool over_cap;    /* an allocation failed at the cap or the budget */
    bool over_budget; /* the first such failure was the budget's */
    QrArena *budget;  /* borrows: the arena whose cap this one shares, NULL */
    size_t children;  /* bytes its children (qr_arena_new_child) hand out now */
};

/* Does the arena draw its blocks from the server-wide budget?  Capped
 * arenas do, and the children of one. */
static bool budgeted(const QrArena *a) { return a->cap || (a->budget && a->budget->cap); }

#define ARENA_HDR ((sizeof(ArenaBlock) + 15) & ~(size_t)15)
#define ARENA_MIN_BLOCK (32 * 1024)
/* Blocks double up to this size, then stay there (a larger allocation gets
 * a block of its own size): every byte of a block counts against the
 * budget, so a block far larger than what is left to hand out would refuse
 * a statement that fits. */
#define ARENA_MAX_GROWN (1u << 20)

/* Blocks of the sizes mapped on their own (256 KiB, the server's mmap
 * threshold, up to the grown size) that statements gave back, kept for the
 * next one (a few per size, process-wide): each fresh block is a mapping
 * whose pages fault in one by one, and a statement collecting many rows
 * took a fifth of its time in the kernel mapping and unmapping them (a
 * GROUP BY of a few hundred groups, whose arena grows through 256 and 512
 * KiB, a quarter).  Bounded, so the memory of a large statement still goes
 * back to the system. */
#define ARENA_CACHE_MAX 8
#define ARENA_CACHE_CLASSES 3 /* 256 KiB, 512 KiB, ARENA_MAX_GROWN */
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static ArenaBlock *cache_head[ARENA_CACHE_CLASSES];
static int cache_n[ARENA_CACHE_CLASSES];

/* The cache's list for blocks of sz bytes, or -1. */
static int cache_class(size_t sz)
{
    for (int c = 0; c < ARENA_CACHE_CLASSES; c++)
        if (sz == (size_t)ARENA_MAX_GROWN >> (ARENA_CACHE_CLASSES - 1 - c))
            return c;
    return -1;
}

static ArenaBlock *cache_pop(size_t sz)
{
    int c = cache_class(sz);
    if (c < 0)
        return NULL;
    pthread_mutex_lock(&cache_mu);
    ArenaBlock *b = cache_head[c];
    if (b) {
        cache_head[c] = b->next;
        cache_n[c]--;
    }
    pthread_mutex_unlock(&cache_mu);
    return b;
}

/* Free one block, giving its bytes back to the budget. */
static void block_free(QrArena *a, ArenaBlock *b)
{
    if (!b)
        return;
    if (budgeted(a))
        qr_mem_budget_give(ARENA_HDR + b->size);
    int c = cache_class(b->size);
    if (c >= 0) {
        pthread_mutex_lock(&cache_mu);
        bool kept = cache_n[c] < ARENA_CACHE_MAX;
        if (kept) {
            b->next = cache_head[c];
            cache_head[c] = b;
            cache_n[c]++;
        }
        pthread_mutex_unlock(&cache_mu);
        if (kept)
            return;
    }
    qr_free(b);
}

QrArena *qr_arena_new(size_t cap_bytes)
{
    QrArena *a = qr_calloc(1, sizeof *a);
    if (a)
        a->cap = cap_bytes;
    return a;
}

QrArena *qr_arena_new_child(QrArena *parent)
{
    QrArena *a = qr_calloc(1, sizeof *a);
    if (a)
        a->budget = parent->budget ? parent->budget : parent;
    return a;
}

/* A child gives `n` bytes back to its budget. */
static void arena_uncharge(QrArena *a, size_t n)
{
    if (a->budget)
        a->budget->children -= n < a->budget->children ? n : a->budget->children;
}

void qr_arena_free(QrArena *a)
{
    if (!a)
        return;
    arena_uncharge(a, a->handed);
    ArenaBlock *b = a->head;
    while (b) {
        ArenaBlock *n = b->next;
        block_free(a, b);
        b = n;
    }
    block_free(a, a->spare);
    qr_free(a);
}

void qr_arena_reset(QrArena *a)
{
    if (!a)
        return;
    a->over_cap = false;
    a->over_budget = false;
    if (!a->head)
        return;
    ArenaBlock *b = a->head->next;
    while (b) {
        ArenaBlock *n = b->next;
        block_free(a, b);
        b = n;
    }
    /* keep the newest (largest) block */
    a->head->next = NULL;
    a->head->used = 0;
    arena_uncharge(a, a->handed);
    a->handed = 0;
}

void *qr_arena_alloc(QrArena *a, size_t n)
{
    /* a size computed from input may be huge: rounding it up, or adding the
     * block header, must not wrap to a small block */
    if (n > SIZE_MAX / 4) {
        a->over_cap = a->cap != 0;
        return NULL;
    }
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    if (a->cap && a->handed + a->children + n > a->cap) {
        a->over_cap = true;
        return NULL;
    }
    QrArena *root = a->budget;
    if (root && root->cap && root->handed + root->children + n > root->cap) {
        a->over_cap = root->over_cap = true;
        return NULL;
    }
    ArenaBlock *b = a->head;
    if (!b || b->size - b->used < n) {
        size_t sz = ARENA_MIN_BLOCK;
        if (b && b->size >= ARENA_MAX_GROWN)
            sz = ARENA_MAX_GROWN; /* grown: stay there */
        else if (b && b->size * 2 > sz)
            sz = b->size * 2;
        /* the sizes the cache keeps: a grown block between the mmap
         * threshold and the grown size takes the next power of two (after a
         * first block of 40 KiB, the blocks would grow 80, 160, 320, 640 KiB,
         * none cached); a block sized for one large allocation stays its size */
        if (sz > (size_t)ARENA_MAX_GROWN >> ARENA_CACHE_CLASSES && sz < ARENA_MAX_GROWN)
            sz = (size_t)1 << (64 - __builtin_clzll((unsigned long long)sz - 1));
        if (sz < n)
            sz = n;
        ArenaBlock *nb;
        if (a->spare && a->spare->size >= n) {
            nb = a->spare;     /* a released block: no malloc per row */
            a->spare = NULL;
        } else {
            bool bud = budgeted(a);
            if (bud && !qr_mem_budget_take(ARENA_HDR + sz)) {
                a->over_budget |= !a->over_cap;
                a->over_cap = true;
                if (root) {
                    root->over_budget |= !root->over_cap;
                    root->over_cap = true;
                }
                return NULL;
            }
            nb = cache_pop(sz);
            if (!nb)
                nb = qr_malloc(ARENA_HDR + sz);
            if (!nb) {
                if (bud)
                    qr_mem_budget_give(ARENA_HDR + sz);
                return NULL;
            }
            nb->size = sz;
        }
        nb->used = 0;
        nb->next = b;
        a->head = b = nb;
    }
    void *p = (char *)b + ARENA_HDR + b->used;
    b->used += n;
    a->handed += n;
    if (root)
        root->children += n;
    return p;
}

void *qr_arena_calloc(QrArena *a, size_t n)
{
    void *p = qr_arena_alloc(a, n);
    if (p)
        memset(p, 0, n);
    return p;
}

char *qr_arena_strndup(QrArena *a, const char *s, size_t n)
{
    char *d = qr_arena_alloc(a, n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

QrArenaMark qr_arena_mark(const QrArena *a)
{
    QrArenaMark m = {a->head, a->head ? a->head->used : 0, a->handed};
    return m;
}

void qr_arena_release(QrArena *a, QrArenaMark m)
{
    /* blocks opened since the mark go; the largest is kept as the spare */
    while (a->head && a->head != (ArenaBlock *)m.block) {
        ArenaBlock *b = a->head;
        a->head = b->next;
        if (!a->spare || a->spare->size < b->size) {
            block_free(a, a->spare);
            a->spare = b;
        } else {
            block_free(a, b);
        }
    }
    if (a->head)
        a->head->used = m.used;
    if (a->handed > m.handed)
        arena_uncharge(a, a->handed - m.handed);
    a->handed = m.handed;
}

size_t qr_arena_used(const QrArena *a) { return a->handed; }
bool qr_arena_over_cap(const QrArena *a) { return a->over_cap; }
bool qr_arena_over_budget(const QrArena *a) { return a->over_budget; }
