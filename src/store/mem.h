/*
 * mem.h — the one allocation hook (qr_malloc & co) and the per-query arena.
 *
 * Layer: store/ (base kit). Calls libc only.
 *
 * Every heap allocation in Quarry goes through qr_malloc/qr_calloc/
 * qr_realloc so that tests/fault can fail the Nth allocation
 * (qr_mem_fail_after).  They return NULL on failure like malloc; callers turn
 * that into QR_ENOMEM.  qr_free(NULL) is a no-op.
 *
 * QrArena: a bump allocator for one query or request (STYLE.md §6).  Parse
 * trees, plans, iterators and scratch buffers come from it and are released
 * together by qr_arena_free/qr_arena_reset.  Bytes handed out count against
 * `cap_bytes` (0 = unlimited); going over makes qr_arena_alloc return NULL
 * and sets `over_cap`, which the query layer reports as QR_ELIMIT.
 *
 * The memory budget: one process-wide limit on the blocks of every capped
 * arena (the working memory of the queries running at once).  A capped
 * arena takes each block it mallocs from the budget and gives it back when
 * the block is freed; when the budget cannot cover a new block the
 * allocation fails as at the cap (NULL, over_cap) and
 * qr_arena_over_budget() tells the two apart (the query layer reports it
 * as QR_ENOMEM, SQLSTATE 53200).  Arenas without a cap (statement caches,
 * COPY buffers) stay outside.  The budget is off (0) until a server sets it.
 */
#ifndef QR_MEM_H
#define QR_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

void *qr_malloc(size_t n);
void *qr_calloc(size_t count, size_t size);
void *qr_realloc(void *p, size_t n);
void qr_free(void *p);
char *qr_strdup(const char *s);
char *qr_strndup(const char *s, size_t n);

/* Fault injection: after `n` more successful allocations, every allocation
 * fails (n < 0 disables).  Returns the number of allocations made since the
 * last call (for tests that sweep N). Thread-safe (atomic counter). */
void qr_mem_fail_after(int64_t n);
int64_t qr_mem_alloc_count(void);

typedef struct QrArena QrArena;

/* New arena; cap_bytes = 0 means no cap.  NULL on OOM. */
QrArena *qr_arena_new(size_t cap_bytes);
/* An arena whose allocations also count against `parent`'s cap (or its
 * parent's, for a child of a child): per-batch scratch that is reset on
 * its own while the statement's budget stays one.  Free it before its
 * parent.  NULL on OOM. */
QrArena *qr_arena_new_child(QrArena *parent);
/* Release every block.  NULL is a no-op. */
void qr_arena_free(QrArena *a);
/* Forget all allocations but keep the first block for reuse. */
void qr_arena_reset(QrArena *a);
/* 16-byte aligned memory valid until reset/free.  NULL on OOM or cap. */
void *qr_arena_alloc(QrArena *a, size_t n);
void *qr_arena_calloc(QrArena *a, size_t n);
char *qr_arena_strndup(QrArena *a, const char *s, size_t n);
/* A position in the arena.  qr_arena_release() forgets everything allocated
 * after qr_arena_mark() returned it, so per-row temporaries (a WHERE clause's
 * concatenations, an aggregate argument) do not accumulate over a long scan.
 * Marks nest like a stack; releasing an older mark invalidates newer ones. */
typedef struct QrArenaMark {
    void *block;      /* the newest block when marked (NULL: none yet) */
    size_t used;      /* its fill then */
    size_t handed;
} QrArenaMark;
QrArenaMark qr_arena_mark(const QrArena *a);
void qr_arena_release(QrArena *a, QrArenaMark m);
/* Bytes handed out so far, and whether the cap (or the budget) was hit. */
size_t qr_arena_used(const QrArena *a);
bool qr_arena_over_cap(const QrArena *a);
/* The allocation that failed was refused by the process-wide budget, not
 * by the arena's own cap. */
bool qr_arena_over_budget(const QrArena *a);

/* The process-wide budget of capped arenas, in bytes (0 = no limit; the
 * bytes are counted either way).  Set it before queries run; lowering it
 * does not take memory back from running queries, it only refuses new
 * blocks. */
void qr_mem_budget_set(size_t limit_bytes);
size_t qr_mem_budget_limit(void);
/* Bytes the capped arenas hold now (blocks, including spares). */
size_t qr_mem_budget_used(void);
/* Take n bytes from the budget (false, nothing taken, when they do not
 * fit) / give them back.  For memory outside arenas that a query holds. */
bool qr_mem_budget_take(size_t n);
void qr_mem_budget_give(size_t n);

/* For processes whose threads allocate and free large buffers (indexing
 * threads: chunks, builders, segment images): buffers of 1 MiB and more
 * are mapped and unmapped on their own, so that what they held goes back
 * to the system when they are freed, whichever thread freed them.  Call
 * once at startup. */
void qr_mem_tune_for_threads(void);

/* Hand freed heap memory back to the operating system (glibc malloc_trim;
 * a no-op elsewhere).  Costs a walk of the malloc arenas: call it after a
 * request that used much memory, not per row. */
void qr_mem_trim(void);
/* Physical memory of this machine in bytes, lowered to the cgroup's
 * memory.max when a cgroup (v2) limit is set; 0 when unknown. */
uint64_t qr_mem_physical(void);

#endif
