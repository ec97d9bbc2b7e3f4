/*
 * mem.c — allocation hook with fault injection, and QrArena.
 * Layer: store/ (base kit).
 */
#include "store/mem.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- arena ---- */

typedef struct ArenaBlock {
    struct ArenaBlock *next; /* owns: older block */
    size_t size;             /* usable bytes after the header */
    size_t used;
    /* data follows, 16-aligned */
} ArenaBlock;

struct QrArena {
    ArenaBlock *head; /* owns: newest block first */
    ArenaBlock *spare; /* owns: one block a release gave back, reused first */
    size_t cap;       /* 0 = unlimited */
    size_t handed;    /* bytes handed out */
    bool over_cap;
};

#define ARENA_HDR ((sizeof(ArenaBlock) + 15) & ~(size_t)15)
#define ARENA_MIN_BLOCK (32 * 1024)

QrArena *qr_arena_new(size_t cap_bytes)
{
    QrArena *a = qr_calloc(1, sizeof *a);
    if (a)
        a->cap = cap_bytes;
    return a;
}

void qr_arena_free(QrArena *a)
{
    if (!a)
        return;
    ArenaBlock *b = a->head;
    while (b) {
        ArenaBlock *n = b->next;
        qr_free(b);
        b = n;
    }
    qr_free(a->spare);
    qr_free(a);
}

void qr_arena_reset(QrArena *a)
{
    if (!a || !a->head)
        return;
    ArenaBlock *b = a->head->next;
    while (b) {
        ArenaBlock *n = b->next;
        qr_free(b);
        b = n;
    }
    /* keep the newest (largest) block */
    a->head->next = NULL;
    a->head->used = 0;
    a->handed = 0;
    a->over_cap = false;
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
    if (a->cap && a->handed + n > a->cap) {
        a->over_cap = true;
        return NULL;
    }
    ArenaBlock *b = a->head;
    if (!b || b->size - b->used < n) {
        size_t sz = ARENA_MIN_BLOCK;
        if (b && b->size * 2 > sz && b->size < (64u << 20))
            sz = b->size * 2;
        if (sz < n)
            sz = n;
        ArenaBlock *nb;
        if (a->spare && a->spare->size >= n) {
            nb = a->spare;     /* a released block: no malloc per row */
            a->spare = NULL;
        } else {
            nb = qr_malloc(ARENA_HDR + sz);
            if (!nb)
                return NULL;
            nb->size = sz;
        }
        nb->used = 0;
        nb->next = b;
        a->head = b = nb;
    }
    void *p = (char *)b + ARENA_HDR + b->used;
    b->used += n;
    a->handed += n;
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
            qr_free(a->spare);
            a->spare = b;
        } else {
            qr_free(b);
        }
    }
    if (a->head)
        a->head->used = m.used;
    a->handed = m.handed;
}

size_t qr_arena_used(const QrArena *a) { return a->handed; }
bool qr_arena_over_cap(const QrArena *a) { return a->over_cap; }
