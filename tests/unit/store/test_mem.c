/*
 * test_mem.c — the process-wide memory budget of capped arenas
 * (store/mem.h): what counts, that the sum of the arenas never exceeds the
 * limit, that every block given back is counted back (a random walk of
 * allocations, marks, releases, resets and frees over several arenas, with
 * failed mallocs injected), and how a budget failure differs from a cap.
 *
 * Criterion runs each test in its own process, so the budget starts at 0.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "store/mem.h"

Test(mem, take_and_give_respect_the_limit)
{
    cr_assert_eq(qr_mem_budget_used(), 0);
    cr_assert(qr_mem_budget_take(1000), "no limit: anything fits");
    qr_mem_budget_give(1000);
    qr_mem_budget_set(100);
    cr_assert(qr_mem_budget_take(60));
    cr_assert_not(qr_mem_budget_take(50), "60 + 50 > 100");
    cr_assert_eq(qr_mem_budget_used(), 60, "a refused take takes nothing");
    cr_assert(qr_mem_budget_take(40), "60 + 40 = 100 fits");
    cr_assert_not(qr_mem_budget_take(1));
    cr_assert_not(qr_mem_budget_take(SIZE_MAX), "no wrap-around");
    qr_mem_budget_give(100);
    cr_assert_eq(qr_mem_budget_used(), 0);
    cr_assert_eq(qr_mem_budget_limit(), 100);
}

Test(mem, only_capped_arenas_count)
{
    QrArena *free_a = qr_arena_new(0), *capped = qr_arena_new(1u << 20);
    cr_assert(qr_arena_alloc(free_a, 100000));
    cr_assert_eq(qr_mem_budget_used(), 0, "an arena without a cap is outside the budget");
    cr_assert(qr_arena_alloc(capped, 100));
    size_t one = qr_mem_budget_used();
    cr_assert(one >= 32 * 1024 && one < 33 * 1024, "the first block (32 KiB + header): %zu", one);
    cr_assert(qr_arena_alloc(capped, 100), "fits the same block");
    cr_assert_eq(qr_mem_budget_used(), one);
    qr_arena_free(capped);
    qr_arena_free(free_a);
    cr_assert_eq(qr_mem_budget_used(), 0);
}

Test(mem, budget_failure_is_not_the_cap)
{
    qr_mem_budget_set(256u << 10);
    QrArena *a = qr_arena_new(64u << 20), *b = qr_arena_new(64u << 20);
    cr_assert(qr_arena_alloc(a, 200u << 10), "200 KiB of 256 KiB");
    cr_assert_null(qr_arena_alloc(b, 100u << 10), "the sum would pass the budget");
    cr_assert(qr_arena_over_cap(b), "callers that only know the cap still stop");
    cr_assert(qr_arena_over_budget(b), "and can tell it was the budget");
    cr_assert_not(qr_arena_over_budget(a));
    qr_arena_free(a);
    qr_arena_reset(b); /* a reset forgets the failure */
    cr_assert_not(qr_arena_over_cap(b));
    cr_assert(qr_arena_alloc(b, 100u << 10), "fits once the other arena is gone");
    /* the arena's own cap stays a cap */
    QrArena *c = qr_arena_new(64u << 10);
    cr_assert_null(qr_arena_alloc(c, 100u << 10));
    cr_assert(qr_arena_over_cap(c));
    cr_assert_not(qr_arena_over_budget(c));
    qr_arena_free(b);
    qr_arena_free(c);
    cr_assert_eq(qr_mem_budget_used(), 0);
}

#define N_ARENAS 4

/* A random walk over a few capped arenas under a small budget.  After every
 * step the budget holds no more than its limit; a failed allocation under
 * the arena's cap is the budget's (or an injected malloc failure, which
 * must give back what it took); at the end, with every arena freed, the
 * budget is back at zero. */
Test(mem, random_walk_never_exceeds_and_always_gives_back)
{
    const size_t limit = 3u << 20;
    qr_mem_budget_set(limit);
    uint64_t rng = 12345;
    QrArena *ar[N_ARENAS] = {0};
    QrArenaMark mk[N_ARENAS];
    bool has_mark[N_ARENAS] = {0};
    int budget_failures = 0, injected = 0;
    for (int step = 0; step < 20000; step++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)((rng >> 33) % N_ARENAS);
        int op = (int)((rng >> 40) % 100);
        size_t n = (size_t)((rng >> 20) % (96u << 10)) + 1;
        if (!ar[k]) {
            ar[k] = qr_arena_new(2u << 20);
            cr_assert(ar[k]);
            has_mark[k] = false;
        } else if (op < 60) {
            bool inject = op < 2;
            size_t before = qr_mem_budget_used();
            if (inject)
                qr_mem_fail_after(0);
            size_t handed = qr_arena_used(ar[k]);
            bool was_over = qr_arena_over_cap(ar[k]);
            void *p = qr_arena_alloc(ar[k], n);
            if (inject)
                qr_mem_fail_after(-1);
            if (p) {
                memset(p, 0xab, n);
            } else if (inject && !qr_arena_over_cap(ar[k])) {
                injected++;
                cr_assert_eq(qr_mem_budget_used(), before, "a failed malloc gives its bytes back");
            } else if (!was_over && handed + ((n + 15) & ~(size_t)15) <= (2u << 20)) {
                cr_assert(qr_arena_over_budget(ar[k]), "under the cap, only the budget refuses");
                budget_failures++;
            }
        } else if (op < 70) {
            mk[k] = qr_arena_mark(ar[k]);
            has_mark[k] = true;
        } else if (op < 85) {
            if (has_mark[k])
                qr_arena_release(ar[k], mk[k]);
            has_mark[k] = false;
        } else if (op < 93) {
            qr_arena_reset(ar[k]);
            has_mark[k] = false;
        } else {
            qr_arena_free(ar[k]);
            ar[k] = NULL;
        }
        cr_assert(qr_mem_budget_used() <= limit, "step %d: %zu held, limit %zu", step,
                  qr_mem_budget_used(), limit);
    }
    cr_assert(budget_failures > 0, "the walk reached the budget");
    cr_assert(injected > 0, "the walk injected malloc failures");
    for (int k = 0; k < N_ARENAS; k++)
        qr_arena_free(ar[k]);
    cr_assert_eq(qr_mem_budget_used(), 0, "every block was counted back");
}

Test(mem, physical_memory_is_known_and_trim_runs)
{
    uint64_t phys = qr_mem_physical();
    FILE *f = fopen("/proc/meminfo", "r");
    unsigned long long kb = 0;
    if (f) {
        cr_assert_eq(fscanf(f, "MemTotal: %llu kB", &kb), 1);
        fclose(f);
    }
    cr_assert(phys > 0);
    if (kb)
        cr_assert(phys <= kb * 1024ull, "%llu > MemTotal %llu kB", (unsigned long long)phys, kb);
    qr_mem_trim();
}

/* Grown blocks between 128 KiB and 1 MiB take the sizes the block cache
 * keeps (powers of two): after a first block of 40 KiB, the third is 256
 * KiB, not 160; a block sized for one large allocation keeps its size. */
Test(mem, grown_blocks_take_cached_sizes)
{
    qr_mem_budget_set(64u << 20);
    QrArena *a = qr_arena_new(32u << 20);
    cr_assert(qr_arena_alloc(a, 40u << 10));  /* a block of its own size: 40 KiB */
    cr_assert(qr_arena_alloc(a, 70u << 10));  /* doubled: 80 KiB */
    cr_assert(qr_arena_alloc(a, 150u << 10)); /* doubled, 160 KiB, rounded up */
    size_t used = qr_mem_budget_used();
    cr_assert(used >= (376u << 10) && used < (377u << 10), "40 + 80 + 256 KiB: %zu", used);
    qr_arena_free(a);
    cr_assert_eq(qr_mem_budget_used(), 0);
}
