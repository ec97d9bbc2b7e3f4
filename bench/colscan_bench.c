/*
 * colscan_bench.c — throughput of column filter scans (not a test).
 *
 * Build by hand with the Makefile's flags against the library, e.g.:
 *   make build/libquarry.a
 *   cc -std=c11 -D_GNU_SOURCE -O2 -g -Isrc -pthread bench/colscan_bench.c \
 *      build/libquarry.a -lroaring -lm -o build/colscan_bench
 *   build/colscan_bench [rows]
 *
 * Prints values/s (rows of the column divided by the best of several runs)
 * for: a full scan of random int64 (no block can be skipped) at two bit
 * widths, a selective range on sorted data (zone maps skip) next to the same
 * range on shuffled data, a keyword IN, the raw 64-row mask primitive
 * without roaring, and a two-thread split scan.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/column.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

static Column *build(QrColType t, uint32_t n, int64_t (*gen)(uint32_t), QrBuf *b)
{
    ColWriter *w = colw_new(t);
    char s[32];
    for (uint32_t i = 0; i < n; i++) {
        int64_t v = gen(i);
        if (t == QR_COL_KEYWORD) {
            int len = snprintf(s, sizeof s, "kw-%05lld", (long long)v);
            colw_add_str(w, s, (size_t)len);
        } else {
            colw_add_int(w, v);
        }
    }
    qr_buf_init(b);
    QrError err = {0};
    if (colw_finish(w, b, &err)) {
        fprintf(stderr, "finish: %s\n", err.message);
        exit(1);
    }
    colw_free(w);
    Column *c = col_open(b->data, b->len, "bench", &err);
    if (!c) {
        fprintf(stderr, "open: %s\n", err.message);
        exit(1);
    }
    return c;
}

static int64_t gen_rand30(uint32_t i) { (void)i; return (int64_t)(rnd() % 1000000000u); }
static int64_t gen_rand64(uint32_t i) { (void)i; return (int64_t)rnd(); }
static int64_t gen_sorted(uint32_t i) { return 1000000 + (int64_t)i * 3; }
static uint32_t g_n;
static int64_t gen_shuffled(uint32_t i) { (void)i; return 1000000 + (int64_t)(rnd() % g_n) * 3; }
static int64_t gen_kw(uint32_t i) { (void)i; return (int64_t)(rnd() % 1000); }

/* Best time of `reps` scans; prints and returns seconds. */
static double bench_scan(const char *label, const Column *c, const ColPred *p, int reps)
{
    ColFilter *f;
    QrError err = {0};
    if (col_filter_new(c, p, &f, &err)) {
        fprintf(stderr, "%s: %s\n", label, err.message);
        exit(1);
    }
    double best = 1e9;
    uint64_t card = 0;
    ColScanStats st = {0};
    for (int r = 0; r < reps; r++) {
        roaring_bitmap_t *o = roaring_bitmap_create();
        memset(&st, 0, sizeof st);
        double t0 = now_s();
        col_filter_scan(f, NULL, o, &st, &err);
        double t = now_s() - t0;
        best = t < best ? t : best;
        card = roaring_bitmap_get_cardinality(o);
        roaring_bitmap_free(o);
    }
    printf("%-44s %9.3f ms  %8.0f M values/s  (%llu rows match; blocks: %llu scanned, %llu full, "
           "%llu skipped)\n",
           label, best * 1e3, col_rows(c) / best / 1e6, (unsigned long long)card,
           (unsigned long long)st.blocks_scanned, (unsigned long long)st.blocks_full,
           (unsigned long long)st.blocks_skipped);
    col_filter_free(f);
    return best;
}

typedef struct Job {
    const ColFilter *f;
    uint32_t first, n;
    roaring_bitmap_t *out;
} Job;

static void *job_run(void *arg)
{
    Job *j = arg;
    col_filter_scan_range(j->f, j->first, j->n, NULL, j->out, NULL, NULL);
    return NULL;
}

int main(int argc, char **argv)
{
    uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1000000;
    g_n = n;
    const int reps = 30;
    QrBuf b1, b2, b3, b4, b5;
    printf("rows per column: %u, block rows: %u, best of %d runs\n", n, COL_BLOCK_ROWS, reps);

    Column *c30 = build(QR_COL_INT64, n, gen_rand30, &b1);
    ColPred half = {.op = CP_LT, .v = col_val_int(500000000)};
    double full = bench_scan("int64 full scan, 30-bit, x < 5e8 (50%)", c30, &half, reps);
    ColPred pct1 = {.op = CP_BETWEEN, .v = col_val_int(1000), .hi = col_val_int(10001000)};
    bench_scan("int64 full scan, 30-bit, 1% range", c30, &pct1, reps);
    ColPred ne = {.op = CP_NE, .v = col_val_int(12345)};
    bench_scan("int64 full scan, 30-bit, x <> c", c30, &ne, reps);
    ColPred fl = {.op = CP_GT, .v = col_val_float(499999999.5)};
    bench_scan("int64 full scan, 30-bit, x > 499999999.5", c30, &fl, reps);

    /* a short IN list over wide random values (neither a key bitmap nor an
     * offset bitmap applies) */
    ColVal iset[10];
    for (int i = 0; i < 10; i++)
        iset[i] = col_val_int((int64_t)i * 99991 * 997);
    ColPred in30 = {.op = CP_IN, .set = iset, .n_set = 10};
    bench_scan("int64 full scan, 30-bit, IN (10 values)", c30, &in30, reps);

    Column *c64 = build(QR_COL_INT64, n, gen_rand64, &b2);
    ColPred neg = {.op = CP_LT, .v = col_val_int(0)};
    bench_scan("int64 full scan, 64-bit, x < 0 (50%)", c64, &neg, reps);

    /* raw mask primitive (no roaring) */
    {
        ColFilter *f;
        col_filter_new(c30, &half, &f, NULL);
        uint64_t *w = malloc(((size_t)col_n_blocks(c30) * 64 + 1) * 8);
        double best = 1e9;
        for (int r = 0; r < reps; r++) {
            double t0 = now_s();
            col_filter_scan_words(f, 0, col_n_blocks(c30), w, NULL);
            double t = now_s() - t0;
            best = t < best ? t : best;
        }
        printf("%-44s %9.3f ms  %8.0f M values/s\n", "int64 30-bit x < 5e8, mask words only", best * 1e3,
               n / best / 1e6);
        free(w);
        col_filter_free(f);
    }

    Column *cs = build(QR_COL_INT64, n, gen_sorted, &b3);
    Column *cu = build(QR_COL_INT64, n, gen_shuffled, &b4);
    int64_t lo = 1000000 + (int64_t)(n / 2) * 3;
    ColPred sel = {.op = CP_BETWEEN, .v = col_val_int(lo), .hi = col_val_int(lo + 3000)};
    double ts = bench_scan("sorted int64, 0.1% range (zone maps skip)", cs, &sel, reps);
    double tu = bench_scan("shuffled int64, same range (no skipping)", cu, &sel, reps);
    printf("%-44s %9.1fx (vs shuffled), %.1fx (vs full scan)\n", "  skip speedup", tu / ts, full / ts);

    Column *ck = build(QR_COL_KEYWORD, n, gen_kw, &b5);
    ColVal set[10];
    char names[10][16];
    for (int i = 0; i < 10; i++) {
        int len = snprintf(names[i], sizeof names[i], "kw-%05d", i * 97);
        set[i] = col_val_str(names[i], (size_t)len);
    }
    ColPred in10 = {.op = CP_IN, .set = set, .n_set = 10};
    bench_scan("keyword IN (10 of 1000 values)", ck, &in10, reps);
    ColPred in3 = {.op = CP_IN, .set = set, .n_set = 3};
    bench_scan("keyword IN (3 of 1000 values)", ck, &in3, reps);
    ColPred pre = {.op = CP_PREFIX, .v = col_val_str("kw-001", 6)};
    bench_scan("keyword PREFIX 'kw-001' (10%)", ck, &pre, reps);

    /* two threads over halves aligned to 16-block chunks */
    {
        ColFilter *f;
        col_filter_new(c30, &half, &f, NULL);
        uint32_t nb = col_n_blocks(c30), mid = (nb / 2 + 15) / 16 * 16;
        double best = 1e9;
        for (int r = 0; r < reps; r++) {
            Job j[2] = {{f, 0, mid, roaring_bitmap_create()}, {f, mid, nb - mid, roaring_bitmap_create()}};
            pthread_t th;
            double t0 = now_s();
            pthread_create(&th, NULL, job_run, &j[1]);
            job_run(&j[0]);
            pthread_join(th, NULL);
            roaring_bitmap_or_inplace(j[0].out, j[1].out);
            double t = now_s() - t0;
            best = t < best ? t : best;
            roaring_bitmap_free(j[0].out), roaring_bitmap_free(j[1].out);
        }
        printf("%-44s %9.3f ms  %8.0f M values/s\n", "int64 30-bit x < 5e8, 2 threads", best * 1e3,
               n / best / 1e6);
        col_filter_free(f);
    }

    col_close(c30), col_close(c64), col_close(cs), col_close(cu), col_close(ck);
    qr_buf_free(&b1), qr_buf_free(&b2), qr_buf_free(&b3), qr_buf_free(&b4), qr_buf_free(&b5);
    return 0;
}
