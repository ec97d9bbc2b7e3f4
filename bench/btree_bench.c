/*
 * btree_bench.c — B-tree lookups against column scans at 1M rows (not a
 * test: results are printed, never asserted).
 *
 * Build by hand with the Makefile's flags against the library, e.g.:
 *   make build/libquarry.a
 *   cc -std=c11 -D_GNU_SOURCE -O2 -g -Isrc -pthread bench/btree_bench.c \
 *      build/libquarry.a -lroaring -lsnappy -lm -o build/btree_bench
 *   build/btree_bench [rows] [dir]
 *
 * For each column (random int64 with ~rows distinct values, int64 with 1,000
 * distinct values, keywords with 10,000 distinct values, all unsorted so
 * zone maps cannot help) it prints the build time and side-file size, then
 * the median time of: a point query (=), a 0.1% range, an IN of 10 values
 * and (keywords) a prefix — each through bt_lookup, through bt_count (no row
 * list read) and through col_scan — after checking that all three agree.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "index/btree.h"
#include "store/column.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define REPS 41

typedef int (*RunFn)(const void *src, const ColPred *p, roaring_bitmap_t *out, uint64_t *count);

static int run_bt(const void *src, const ColPred *p, roaring_bitmap_t *out, uint64_t *count)
{
    QrError e;
    qr_error_clear(&e);
    int rc = bt_lookup(src, p, out, NULL, &e);
    *count = roaring_bitmap_get_cardinality(out);
    return rc;
}

static int run_count(const void *src, const ColPred *p, roaring_bitmap_t *out, uint64_t *count)
{
    QrError e;
    qr_error_clear(&e);
    return bt_count(src, p, count, NULL, &e);
}

static int run_scan(const void *src, const ColPred *p, roaring_bitmap_t *out, uint64_t *count)
{
    QrError e;
    qr_error_clear(&e);
    int rc = col_scan(src, p, NULL, out, NULL, &e);
    *count = roaring_bitmap_get_cardinality(out);
    return rc;
}

/* Median microseconds of REPS runs; *count gets the answer size. */
static double time_us(RunFn fn, const void *src, const ColPred *p, uint64_t *count)
{
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        roaring_bitmap_t *bm = roaring_bitmap_create();
        double t0 = now_s();
        if (fn(src, p, bm, count) != 0) {
            fprintf(stderr, "query failed\n");
            exit(1);
        }
        t[r] = (now_s() - t0) * 1e6;
        roaring_bitmap_free(bm);
    }
    qsort(t, REPS, sizeof t[0], cmp_d);
    return t[REPS / 2];
}

static void query(const char *what, const BTree *bt, const Column *c, const ColPred *p)
{
    uint64_t n1 = 0, n2 = 0, n3 = 0;
    double a = time_us(run_bt, bt, p, &n1);
    double b = time_us(run_count, bt, p, &n2);
    double s = time_us(run_scan, c, p, &n3);
    /* answers first: the same rows from the tree and the scan */
    roaring_bitmap_t *x = roaring_bitmap_create(), *y = roaring_bitmap_create();
    uint64_t d;
    run_bt(bt, p, x, &d);
    run_scan(c, p, y, &d);
    if (!roaring_bitmap_equals(x, y) || n1 != n2 || n1 != n3) {
        fprintf(stderr, "%s: answers differ (%llu %llu %llu)\n", what, (unsigned long long)n1,
                (unsigned long long)n2, (unsigned long long)n3);
        exit(1);
    }
    roaring_bitmap_free(x);
    roaring_bitmap_free(y);
    BtStats st = {0};
    QrError e;
    qr_error_clear(&e);
    roaring_bitmap_t *z = roaring_bitmap_create();
    bt_lookup(bt, p, z, &st, &e);
    roaring_bitmap_free(z);
    printf("  %-26s rows %8llu  btree %9.1f us (%3llu pages)  count %7.1f us  scan %9.1f us"
           "  scan/btree %7.1fx\n",
           what, (unsigned long long)n1, a, (unsigned long long)st.pages_read, b, s, s / a);
}

static Column *finish(ColWriter *w, QrBuf *blob, const char *name)
{
    QrError e;
    qr_error_clear(&e);
    qr_buf_init(blob);
    if (colw_finish(w, blob, &e) != 0) {
        fprintf(stderr, "%s\n", e.message);
        exit(1);
    }
    colw_free(w);
    Column *c = col_open(blob->data, blob->len, name, &e);
    if (!c) {
        fprintf(stderr, "%s\n", e.message);
        exit(1);
    }
    return c;
}

static BTree *build_tree(const Column *c, const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.qbt", dir, name);
    QrError e;
    qr_error_clear(&e);
    double t0 = now_s();
    if (bt_write(c, path, false, &e) != 0) {
        fprintf(stderr, "%s\n", e.message);
        exit(1);
    }
    double t1 = now_s();
    BTree *bt;
    if (bt_open(path, name, &bt, &e) != 0) {
        fprintf(stderr, "%s\n", e.message);
        exit(1);
    }
    double t2 = now_s();
    printf("%s: %u rows, %llu keys, height %u, %u pages, %.1f MB; build %.0f ms, open %.1f ms\n",
           name, bt_rows(bt), (unsigned long long)bt_n_keys(bt), bt_height(bt), bt_n_pages(bt),
           (double)bt_file_bytes(bt) / 1e6, (t1 - t0) * 1e3, (t2 - t1) * 1e3);
    unlink(path); /* the mapping stays valid */
    return bt;
}

int main(int argc, char **argv)
{
    uint32_t n = argc > 1 ? (uint32_t)atol(argv[1]) : 1000000u;
    const char *dir = argc > 2 ? argv[2] : ".";
    QrBuf b1, b2, b3;

    /* random int64, ~n distinct */
    ColWriter *w = colw_new(QR_COL_INT64);
    int64_t probe = 0;
    for (uint32_t i = 0; i < n; i++) {
        int64_t v = (int64_t)(rnd() % n);
        if (i == n / 2)
            probe = v;
        colw_add_int(w, v);
    }
    Column *c1 = finish(w, &b1, "uniq");
    BTree *t1 = build_tree(c1, dir, "int64_unique");
    query("point =", t1, c1, &(ColPred){.op = CP_EQ, .v = col_val_int(probe)});
    query("range 0.1%", t1, c1,
          &(ColPred){.op = CP_BETWEEN, .v = col_val_int(probe), .hi = col_val_int(probe + n / 1000)});
    ColVal set[10];
    for (int i = 0; i < 10; i++)
        set[i] = col_val_int((int64_t)(rnd() % n));
    query("IN (10 values)", t1, c1, &(ColPred){.op = CP_IN, .set = set, .n_set = 10});

    /* int64, 1,000 distinct values (~n/1000 rows each) */
    w = colw_new(QR_COL_INT64);
    for (uint32_t i = 0; i < n; i++)
        colw_add_int(w, (int64_t)(rnd() % 1000));
    Column *c2 = finish(w, &b2, "k1000");
    BTree *t2 = build_tree(c2, dir, "int64_1000_distinct");
    query("point =", t2, c2, &(ColPred){.op = CP_EQ, .v = col_val_int(500)});
    query("range 1%", t2, c2,
          &(ColPred){.op = CP_BETWEEN, .v = col_val_int(100), .hi = col_val_int(109)});

    /* keywords, 10,000 distinct */
    w = colw_new(QR_COL_KEYWORD);
    char buf[32];
    for (uint32_t i = 0; i < n; i++) {
        int len = snprintf(buf, sizeof buf, "sym%05u", (unsigned)(rnd() % 10000));
        colw_add_str(w, buf, (size_t)len);
    }
    Column *c3 = finish(w, &b3, "kw");
    BTree *t3 = build_tree(c3, dir, "keyword_10000_distinct");
    query("point =", t3, c3, &(ColPred){.op = CP_EQ, .v = col_val_str("sym04242", 8)});
    ColVal ks[10];
    char kb[10][16];
    for (int i = 0; i < 10; i++) {
        int len = snprintf(kb[i], sizeof kb[i], "sym%05u", (unsigned)(rnd() % 10000));
        ks[i] = col_val_str(kb[i], (size_t)len);
    }
    query("IN (10 values)", t3, c3, &(ColPred){.op = CP_IN, .set = ks, .n_set = 10});
    query("prefix 'sym042'", t3, c3, &(ColPred){.op = CP_PREFIX, .v = col_val_str("sym042", 6)});

    bt_close(t1), bt_close(t2), bt_close(t3);
    col_close(c1), col_close(c2), col_close(c3);
    qr_buf_free(&b1), qr_buf_free(&b2), qr_buf_free(&b3);
    return 0;
}
