/*
 * test_btree.c — B+tree side files (index/btree.h) against brute force.
 *
 *   - Differential: random columns of every type (NULLs, duplicates, skewed
 *     and extreme values: INT64_MIN/MAX, 2^53+1, NaN, +-inf, -0, empty and
 *     0x00/0xFF-laden keywords, keywords longer than a page) and random
 *     predicates of every operator with operands of every kind.  bt_lookup,
 *     bt_count, bt_estimate and bt_iter_open must equal a brute-force
 *     evaluation (long double comparisons, written independently of the
 *     key encoding) and col_scan on the same column; type errors must agree.
 *   - Segments: trees built for a segment's fields (segb_add + segb_finish,
 *     seg_sync_btrees) and for the result of seg_merge answer like col_scan.
 *   - Tables: table_create_index on a table that already holds data, the
 *     schema persisted across reopen, missing and damaged side files rebuilt
 *     at open, merges build trees and remove the sources' files, drop.
 *   - Damage: every flipped byte and every truncation of a side file is
 *     reported by bt_open (never a crash under ASan); damage after open is
 *     reported by seg_verify; a read-only sync leaves missing files out.
 *   - The front door: qr_table_create_index / qr_table_drop_index by name.
 */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_util.h"
#include "index/btree.h"
#include "index/seg_int.h"
#include "query/iter_ops.h"
#include "query/quarry.h"
#include "store/util.h"

static char *dir;

static void setup(void)
{
    qr_log_set_level(QR_LOG_ERROR);
    dir = eu_tmpdir("btree");
}

static void teardown(void)
{
    eu_rmtree(dir);
    free(dir);
}

TestSuite(btree, .init = setup, .fini = teardown);

/* ------------------------------------------------------------------------ */
/* The oracle                                                                */
/* ------------------------------------------------------------------------ */

/* One row: NULL or a typed value (strings borrowed). */
typedef struct Row {
    bool null;
    ColVal v;
} Row;

/* Compare two non-NULL values of compatible kinds the way PostgreSQL does
 * (NaN equal to NaN and above every number; -0 = 0); long double holds every
 * int64 and every double exactly, so int/float comparisons are exact. */
static int cmp_val(const ColVal *a, const ColVal *b)
{
    if (a->kind == CV_STR) {
        size_t m = a->u.str.n < b->u.str.n ? a->u.str.n : b->u.str.n;
        int r = m ? memcmp(a->u.str.s, b->u.str.s, m) : 0;
        if (r)
            return r < 0 ? -1 : 1;
        return (a->u.str.n > b->u.str.n) - (a->u.str.n < b->u.str.n);
    }
    if (a->kind == CV_BOOL)
        return (a->u.b > b->u.b) - (a->u.b < b->u.b);
    bool an = a->kind == CV_FLOAT && isnan(a->u.f), bn = b->kind == CV_FLOAT && isnan(b->u.f);
    if (an || bn)
        return an && bn ? 0 : an ? 1 : -1;
    long double x = a->kind == CV_INT ? (long double)a->u.i : (long double)a->u.f;
    long double y = b->kind == CV_INT ? (long double)b->u.i : (long double)b->u.f;
    return (x > y) - (x < y);
}

static bool kind_ok(QrColType t, const ColVal *v)
{
    switch (t) {
    case QR_COL_BOOL: return v->kind == CV_BOOL;
    case QR_COL_KEYWORD: return v->kind == CV_STR;
    default: return v->kind == CV_INT || v->kind == CV_FLOAT;
    }
}

/* -1 type error, else 0/1. */
static int oracle(QrColType t, const Row *r, const ColPred *p)
{
    switch (p->op) {
    case CP_IS_NULL: return r->null;
    case CP_IS_NOT_NULL: return !r->null;
    case CP_IN:
        for (size_t i = 0; i < p->n_set; i++)
            if (!kind_ok(t, &p->set[i]))
                return -1;
        if (r->null)
            return 0;
        for (size_t i = 0; i < p->n_set; i++)
            if (cmp_val(&r->v, &p->set[i]) == 0)
                return 1;
        return 0;
    case CP_PREFIX:
        if (t != QR_COL_KEYWORD || p->v.kind != CV_STR)
            return -1;
        return !r->null && r->v.u.str.n >= p->v.u.str.n &&
               (p->v.u.str.n == 0 || !memcmp(r->v.u.str.s, p->v.u.str.s, p->v.u.str.n));
    case CP_BETWEEN:
        if (!kind_ok(t, &p->v) || !kind_ok(t, &p->hi))
            return -1;
        return !r->null && cmp_val(&r->v, &p->v) >= 0 && cmp_val(&r->v, &p->hi) <= 0;
    default:
        break;
    }
    if (!kind_ok(t, &p->v))
        return -1;
    if (r->null)
        return 0;
    int c = cmp_val(&r->v, &p->v);
    switch (p->op) {
    case CP_EQ: return c == 0;
    case CP_NE: return c != 0;
    case CP_LT: return c < 0;
    case CP_LE: return c <= 0;
    case CP_GT: return c > 0;
    default: return c >= 0;
    }
}

/* The rows of a column, read back through col_get_* (keywords borrow it). */
static Row *rows_of(const Column *c)
{
    uint32_t n = col_rows(c);
    Row *rs = calloc(n ? n : 1, sizeof *rs);
    for (uint32_t i = 0; i < n; i++) {
        Row *r = &rs[i];
        int64_t x = 0;
        double d = 0;
        bool b = false;
        const char *s = "";
        size_t sn = 0;
        switch (col_type(c)) {
        case QR_COL_INT64:
        case QR_COL_TIMESTAMP:
            r->null = !col_get_int(c, i, &x);
            r->v = col_val_int(x);
            break;
        case QR_COL_FLOAT64:
            r->null = !col_get_float(c, i, &d);
            r->v = col_val_float(d);
            break;
        case QR_COL_BOOL:
            r->null = !col_get_bool(c, i, &b);
            r->v = col_val_bool(b);
            break;
        default:
            r->null = !col_get_str(c, i, &s, &sn);
            r->v = col_val_str(s, sn);
            break;
        }
    }
    return rs;
}

/* ------------------------------------------------------------------------ */
/* Random values and predicates                                              */
/* ------------------------------------------------------------------------ */

static const int64_t int_specials[] = {INT64_MIN, INT64_MIN + 1, -1000000, -3, -1, 0, 1, 2, 3,
                                       7, 100, 9007199254740992LL, 9007199254740993LL,
                                       INT64_MAX - 1, INT64_MAX};
/* Keywords around the edges of memcmp order: prefixes, 0x00 right after a
 * prefix (the successor of "a" is "a\0"), 0xFF runs (prefix successors). */
static const struct {
    const char *s;
    size_t n;
} str_specials[] = {{"", 0},      {"a", 1},        {"ab", 2},       {"abc", 3},
                    {"abd", 3},   {"b", 1},        {"ba", 2},       {"z", 1},
                    {"\xff", 1},  {"\xff\xff", 2},  {"a\xff", 2},     {"a\xff\xff", 3},
                    {"a\0", 2},   {"a\0\0", 3},    {"\0", 1},       {"ab\0", 3},
                    {"a\0b", 3},  {"\0\0", 2}};

/* Pools of values a column draws from (so duplicates are frequent). */
typedef struct Pool {
    ColVal v[600];
    int n;
    char *bufs[600]; /* owned strings */
    int n_bufs;
} Pool;

static void pool_free(Pool *p)
{
    for (int i = 0; i < p->n_bufs; i++)
        free(p->bufs[i]);
}

static ColVal rand_str(uint64_t *rng, Pool *p, size_t max_len)
{
    static const char alpha[] = {'a', 'b', 'c', 0, (char)0xff};
    size_t n = eu_below(rng, max_len + 1);
    char *s = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        s[i] = alpha[eu_below(rng, sizeof alpha)];
    p->bufs[p->n_bufs++] = s;
    return col_val_str(s, n);
}

static double rand_double(uint64_t *rng)
{
    static const double sp[] = {-1.5, -0.0, 0.0, 0.5, 1.0, 2.5, 3.0, -3.0, 1e300, -1e300,
                                9007199254740992.0, 9007199254740994.0, 1e-300};
    uint64_t r = eu_below(rng, 10);
    if (r < 5)
        return sp[eu_below(rng, sizeof sp / sizeof sp[0])];
    if (r == 5)
        return NAN;
    if (r == 6)
        return eu_chance(rng, 0.5) ? INFINITY : -INFINITY;
    return ((double)(int64_t)eu_below(rng, 2000) - 1000) / 8.0;
}

static int64_t rand_int(uint64_t *rng)
{
    uint64_t r = eu_below(rng, 10);
    if (r < 3)
        return int_specials[eu_below(rng, sizeof int_specials / sizeof int_specials[0])];
    if (r < 4)
        return (int64_t)eu_rand(rng);
    return (int64_t)eu_below(rng, 60) - 30;
}

/* A pool of `n` values for type t. */
static void pool_fill(Pool *p, QrColType t, int n, uint64_t *rng, bool long_strs)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < n && p->n < 600; i++) {
        ColVal v;
        switch (t) {
        case QR_COL_INT64:
        case QR_COL_TIMESTAMP: v = col_val_int(rand_int(rng)); break;
        case QR_COL_FLOAT64: v = col_val_float(rand_double(rng)); break;
        case QR_COL_BOOL: v = col_val_bool(eu_chance(rng, 0.5)); break;
        default:
            if (long_strs && eu_chance(rng, 0.05)) {
                /* longer than a page: a leaf (and its separators) of one key */
                size_t len = 4000 + eu_below(rng, 6000);
                char *s = malloc(len);
                memset(s, 'a' + (int)eu_below(rng, 3), len);
                s[len - 1] = (char)('a' + eu_below(rng, 26));
                p->bufs[p->n_bufs++] = s;
                v = col_val_str(s, len);
            } else if (eu_chance(rng, 0.3)) {
                size_t k = eu_below(rng, sizeof str_specials / sizeof str_specials[0]);
                v = col_val_str(str_specials[k].s, str_specials[k].n);
            } else {
                v = rand_str(rng, p, 6);
            }
            break;
        }
        p->v[p->n++] = v;
    }
}

/* An operand for type t: usually a pool value (hits), sometimes a value of
 * another numeric kind or a fresh value (gaps), rarely a wrong kind. */
static ColVal rand_operand(uint64_t *rng, QrColType t, Pool *pool, Pool *scratch)
{
    uint64_t r = eu_below(rng, 100);
    if (r < 2) { /* wrong kind */
        switch (t) {
        case QR_COL_KEYWORD: return col_val_int(1);
        case QR_COL_BOOL: return col_val_str("x", 1);
        default: return eu_chance(rng, 0.5) ? col_val_bool(true) : col_val_str("1", 1);
        }
    }
    if (r < 50 && pool->n)
        return pool->v[eu_below(rng, (uint64_t)pool->n)];
    switch (t) {
    case QR_COL_INT64:
    case QR_COL_TIMESTAMP:
        return eu_chance(rng, 0.5) ? col_val_float(rand_double(rng)) : col_val_int(rand_int(rng));
    case QR_COL_FLOAT64:
        return eu_chance(rng, 0.5) ? col_val_int(rand_int(rng)) : col_val_float(rand_double(rng));
    case QR_COL_BOOL: return col_val_bool(eu_chance(rng, 0.5));
    default: return rand_str(rng, scratch, 4);
    }
}

static ColPred rand_pred(uint64_t *rng, QrColType t, Pool *pool, Pool *scratch, ColVal *set,
                         size_t set_cap)
{
    ColPred p;
    memset(&p, 0, sizeof p);
    p.op = (ColPredOp)eu_below(rng, CP_PREFIX + 1);
    if (p.op == CP_PREFIX && t != QR_COL_KEYWORD && eu_chance(rng, 0.8))
        p.op = CP_EQ;
    p.v = rand_operand(rng, t, pool, scratch);
    p.hi = rand_operand(rng, t, pool, scratch);
    if (p.op == CP_PREFIX && t == QR_COL_KEYWORD && p.v.kind == CV_STR && eu_chance(rng, 0.5) &&
        p.v.u.str.n > 0) /* a real prefix of a value */
        p.v.u.str.n = eu_below(rng, p.v.u.str.n + 1);
    if (p.op == CP_IN) {
        p.n_set = eu_below(rng, set_cap + 1);
        for (size_t i = 0; i < p.n_set; i++)
            set[i] = rand_operand(rng, t, pool, scratch);
        p.set = set;
    }
    return p;
}

/* ------------------------------------------------------------------------ */
/* Checking one tree                                                         */
/* ------------------------------------------------------------------------ */

/* bt_lookup / bt_count / bt_estimate / bt_iter_open and col_scan against the
 * oracle for `n_preds` random predicates. */
static void check_tree(const BTree *bt, const Column *c, uint64_t *rng, Pool *pool, int n_preds,
                       const char *what)
{
    QrColType t = col_type(c);
    uint32_t n = col_rows(c);
    cr_assert_eq(bt_rows(bt), n, "%s: rows", what);
    cr_assert_eq(bt_type(bt), t, "%s: type", what);
    Row *rows = rows_of(c);
    uint32_t nulls = 0;
    for (uint32_t i = 0; i < n; i++)
        nulls += rows[i].null;
    cr_assert_eq(bt_null_count(bt), nulls, "%s: null count", what);
    ColVal set[12];
    Pool scratch;
    memset(&scratch, 0, sizeof scratch);
    QrArena *arena = qr_arena_new(0);
    for (int k = 0; k < n_preds; k++) {
        if (scratch.n_bufs > 500) {
            pool_free(&scratch);
            memset(&scratch, 0, sizeof scratch);
        }
        ColPred p = rand_pred(rng, t, pool, &scratch, set, 12);
        Row probe = {.null = true}; /* the oracle checks kinds before NULL-ness */
        int want_err = oracle(t, &probe, &p) < 0;
        roaring_bitmap_t *want = roaring_bitmap_create();
        for (uint32_t i = 0; i < n && !want_err; i++)
            if (oracle(t, &rows[i], &p) == 1)
                roaring_bitmap_add(want, i);
        roaring_bitmap_t *got = roaring_bitmap_create(), *scan = roaring_bitmap_create();
        QrError e, e2;
        qr_error_clear(&e);
        qr_error_clear(&e2);
        BtStats st = {0};
        int rc = bt_lookup(bt, &p, got, &st, &e);
        int rc2 = col_scan(c, &p, NULL, scan, NULL, &e2);
        cr_assert_eq(rc != QR_OK, want_err, "%s: pred %d op %d: rc %d (%s), oracle error %d",
                     what, k, p.op, rc, e.message, want_err);
        cr_assert_eq(rc, rc2, "%s: pred %d op %d: btree rc %d, col_scan rc %d", what, k, p.op, rc,
                     rc2);
        if (rc == QR_OK) {
            uint64_t wc = roaring_bitmap_get_cardinality(want);
            cr_assert(roaring_bitmap_equals(got, want),
                      "%s: pred %d op %d kind %d: btree %llu rows, oracle %llu", what, k, p.op,
                      p.v.kind, (unsigned long long)roaring_bitmap_get_cardinality(got),
                      (unsigned long long)wc);
            cr_assert(roaring_bitmap_equals(scan, want), "%s: pred %d: col_scan disagrees", what,
                      k);
            cr_assert_eq(st.rows_matched, wc, "%s: pred %d: rows_matched", what, k);
            uint64_t cnt = UINT64_MAX;
            BtStats cs = {0};
            cr_assert_eq(bt_count(bt, &p, &cnt, &cs, &e), QR_OK, "%s: %s", what, e.message);
            cr_assert_eq(cnt, wc, "%s: pred %d op %d: count %llu want %llu", what, k, p.op,
                         (unsigned long long)cnt, (unsigned long long)wc);
            cr_assert_eq(bt_estimate(bt, &p), wc, "%s: pred %d: estimate", what, k);
            /* counting reads at most two descents per range */
            cr_assert_leq(cs.pages_read, (uint64_t)2 * bt_height(bt) * (p.op == CP_IN ? p.n_set + 1 : 2) + 2,
                          "%s: pred %d: count read %llu pages", what, k,
                          (unsigned long long)cs.pages_read);
            if (k % 8 == 0) { /* the iterator: next and advance */
                IterCtx ctx;
                iter_ctx_init(&ctx, arena);
                Iter *it = bt_iter_open(bt, &ctx, &p, NULL);
                cr_assert_eq(iter_cost(it), wc);
                roaring_uint32_iterator_t *ri = roaring_create_iterator(want);
                DocId d = iter_next(it);
                while (ri->has_value) {
                    cr_assert_eq(d, (DocId)ri->current_value, "%s: iter", what);
                    uint32_t skip = (uint32_t)eu_below(rng, 3);
                    roaring_advance_uint32_iterator(ri);
                    if (skip == 0 && ri->has_value) {
                        d = iter_advance(it, ri->current_value);
                    } else {
                        d = iter_next(it);
                    }
                }
                roaring_free_uint32_iterator(ri);
                cr_assert_eq(d, ITER_END);
                cr_assert_eq(iter_next(it), ITER_END);
                iter_close(it);
                cr_assert_eq(ctx.err.code, QR_OK);
            }
        } else {
            cr_assert_eq(bt_estimate(bt, &p), n, "%s: estimate of a bad predicate", what);
            IterCtx ctx;
            iter_ctx_init(&ctx, arena);
            Iter *it = bt_iter_open(bt, &ctx, &p, NULL);
            cr_assert_eq(iter_next(it), ITER_END);
            iter_close(it);
            cr_assert_eq(ctx.err.code, rc, "iterator error recorded");
        }
        roaring_bitmap_free(want);
        roaring_bitmap_free(got);
        roaring_bitmap_free(scan);
    }
    qr_arena_free(arena);
    pool_free(&scratch);
    free(rows);
}

/* A column of type t from n rows drawn from pool (Zipf-skewed) with NULLs. */
static Column *make_column(QrColType t, uint32_t n, Pool *pool, double null_p, bool sorted,
                           uint64_t *rng, QrBuf *blob)
{
    ColWriter *w = colw_new(t);
    cr_assert_not_null(w);
    EuZipf z;
    eu_zipf_init(&z, pool->n ? pool->n : 1, 1.1);
    int *idx = malloc((n ? n : 1) * sizeof *idx);
    for (uint32_t i = 0; i < n; i++)
        idx[i] = eu_chance(rng, null_p) ? -1 : eu_zipf_draw(&z, rng);
    if (sorted) { /* rows in pool order (NULLs first) */
        for (uint32_t i = 1; i < n; i++)
            for (uint32_t j = i; j > 0 && idx[j - 1] > idx[j]; j--) {
                int x = idx[j];
                idx[j] = idx[j - 1];
                idx[j - 1] = x;
            }
    }
    for (uint32_t i = 0; i < n; i++) {
        int rc;
        if (idx[i] < 0) {
            rc = colw_add_null(w);
        } else {
            const ColVal *v = &pool->v[idx[i]];
            switch (t) {
            case QR_COL_INT64:
            case QR_COL_TIMESTAMP: rc = colw_add_int(w, v->u.i); break;
            case QR_COL_FLOAT64: rc = colw_add_float(w, v->u.f); break;
            case QR_COL_BOOL: rc = colw_add_bool(w, v->u.b); break;
            default: rc = colw_add_str(w, v->u.str.s, v->u.str.n); break;
            }
        }
        cr_assert_eq(rc, QR_OK);
    }
    free(idx);
    eu_zipf_free(&z);
    QrError e;
    qr_error_clear(&e);
    qr_buf_init(blob);
    cr_assert_eq(colw_finish(w, blob, &e), QR_OK, "%s", e.message);
    colw_free(w);
    Column *c = col_open(blob->data, blob->len, "c", &e);
    cr_assert_not_null(c, "%s", e.message);
    return c;
}

static BTree *write_open(const Column *c, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.qbt", dir, name);
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(bt_write(c, path, false, &e), QR_OK, "bt_write: %s", e.message);
    BTree *bt = NULL;
    cr_assert_eq(bt_open(path, name, &bt, &e), QR_OK, "bt_open: %s", e.message);
    cr_assert_eq(bt_verify(bt, &e), QR_OK, "bt_verify: %s", e.message);
    return bt;
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */

Test(btree, differential_every_type)
{
    uint64_t rng = 0xb7ee;
    static const QrColType types[] = {QR_COL_INT64, QR_COL_TIMESTAMP, QR_COL_FLOAT64, QR_COL_BOOL,
                                      QR_COL_KEYWORD};
    /* (rows, pool size, null fraction, sorted) */
    static const struct {
        uint32_t rows;
        int pool;
        double nulls;
        bool sorted;
    } shapes[] = {{0, 10, 0, false},    {1, 1, 0, false},     {5, 3, 0.5, false},
                  {700, 40, 0.1, false}, {3000, 400, 0.05, false}, {20000, 600, 0.2, false},
                  {9000, 200, 0.0, true}, {500, 5, 1.0, false}};
    char name[64];
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            QrColType t = types[ti];
            Pool pool;
            pool_fill(&pool, t, shapes[si].pool, &rng, si == 5);
            QrBuf blob;
            Column *c = make_column(t, shapes[si].rows, &pool, shapes[si].nulls, shapes[si].sorted,
                                    &rng, &blob);
            snprintf(name, sizeof name, "%s-%zu", col_type_name(t), si);
            BTree *bt = write_open(c, name);
            if (bt_n_keys(bt) > 400) /* more than one leaf holds */
                cr_assert_geq(bt_height(bt), 2, "%s: height %u", name, bt_height(bt));
            check_tree(bt, c, &rng, &pool, shapes[si].rows > 5000 ? 150 : 400, name);
            bt_close(bt);
            col_close(c);
            qr_buf_free(&blob);
            pool_free(&pool);
        }
    }
}

/* Many distinct keys: a three-level tree; counts and lookups near every
 * page boundary. */
Test(btree, deep_tree)
{
    uint64_t rng = 77;
    QrBuf blob;
    qr_buf_init(&blob);
    ColWriter *w = colw_new(QR_COL_INT64);
    uint32_t n = 120000;
    int64_t *vals = malloc(n * sizeof *vals);
    for (uint32_t i = 0; i < n; i++) {
        vals[i] = (int64_t)eu_below(&rng, 200000) * 3 - 300000;
        cr_assert_eq(colw_add_int(w, vals[i]), QR_OK);
    }
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(colw_finish(w, &blob, &e), QR_OK);
    colw_free(w);
    Column *c = col_open(blob.data, blob.len, "deep", &e);
    cr_assert_not_null(c);
    BTree *bt = write_open(c, "deep");
    cr_assert_geq(bt_height(bt), 3, "height %u", bt_height(bt));
    Pool pool;
    memset(&pool, 0, sizeof pool);
    for (int i = 0; i < 600; i++)
        pool.v[pool.n++] = col_val_int(vals[eu_below(&rng, n)] + (int64_t)eu_below(&rng, 3) - 1);
    check_tree(bt, c, &rng, &pool, 300, "deep");
    /* a point lookup touches one root-to-leaf path */
    BtStats st = {0};
    ColPred p = {.op = CP_EQ, .v = col_val_int(vals[17])};
    roaring_bitmap_t *bm = roaring_bitmap_create();
    cr_assert_eq(bt_lookup(bt, &p, bm, &st, &e), QR_OK);
    cr_assert_leq(st.pages_read, bt_height(bt) + 1);
    cr_assert_eq(st.keys_visited, 1);
    roaring_bitmap_free(bm);
    bt_close(bt);
    col_close(c);
    qr_buf_free(&blob);
    free(vals);
}

/* Every flipped byte and every truncation is reported at open. */
Test(btree, damage_detected)
{
    uint64_t rng = 5;
    Pool pool;
    pool_fill(&pool, QR_COL_KEYWORD, 80, &rng, false);
    QrBuf blob;
    Column *c = make_column(QR_COL_KEYWORD, 900, &pool, 0.1, false, &rng, &blob);
    char path[4096], bad[4096];
    snprintf(path, sizeof path, "%s/good.qbt", dir);
    snprintf(bad, sizeof bad, "%s/bad.qbt", dir);
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(bt_write(c, path, false, &e), QR_OK);
    uint8_t *data;
    size_t len;
    cr_assert_eq(qr_file_read_all(path, &data, &len, &e), QR_OK);
    cr_assert_gt(len, 200);
    for (size_t i = 0; i < len; i++) {
        data[i] ^= (uint8_t)(1u << (i % 8));
        cr_assert_eq(qr_file_write_atomic(bad, data, len, false, &e), QR_OK);
        data[i] ^= (uint8_t)(1u << (i % 8));
        BTree *bt = NULL;
        qr_error_clear(&e);
        int rc = bt_open(bad, "bad", &bt, &e);
        cr_assert(rc == QR_ECORRUPT || rc == QR_EUNSUPPORTED, "flip at byte %zu of %zu: rc %d",
                  i, len, rc);
        cr_assert_null(bt);
    }
    for (size_t cut = 0; cut < len; cut += 1 + cut / 16) {
        cr_assert_eq(qr_file_write_atomic(bad, data, cut, false, &e), QR_OK);
        BTree *bt = NULL;
        qr_error_clear(&e);
        cr_assert_neq(bt_open(bad, "bad", &bt, &e), QR_OK, "truncated to %zu", cut);
        cr_assert(strstr(e.message, "bad") != NULL, "message names the file: %s", e.message);
    }
    BTree *bt = NULL;
    cr_assert_eq(bt_open(path, "good", &bt, &e), QR_OK);
    bt_close(bt);
    free(data);
    col_close(c);
    qr_buf_free(&blob);
    pool_free(&pool);
}

/* ---- through segments ---- */

static void random_docs_schema(QrSchema *sc)
{
    eu_random_schema(sc, true);
    for (int f = 0; f < sc->n_fields; f++)
        if (schema_column_type(&sc->fields[f]) >= 0)
            sc->fields[f].btree = true;
}

static char **make_docs(uint64_t *rng, int n, int base, char **words, EuZipf *z)
{
    char **v = calloc((size_t)n, sizeof *v);
    for (int i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof id, "%d", base + i);
        v[i] = eu_random_doc(rng, words, z, id, NULL);
    }
    return v;
}

static Segment *build_seg(const QrSchema *sc, char **docs, int n, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.qseg", dir, name);
    SegBuilder *b;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(segb_new(sc, &b, &e), QR_OK);
    for (int i = 0; i < n; i++) {
        cJSON *r = cJSON_Parse(docs[i]);
        uint32_t d;
        cr_assert_eq(segb_add(b, docs[i], strlen(docs[i]), r, &d, &e), QR_OK, "%s", e.message);
        cJSON_Delete(r);
    }
    roaring_bitmap_t *del = NULL;
    cr_assert_eq(segb_finish(b, path, false, &del, &e), QR_OK, "%s", e.message);
    roaring_bitmap_free(del);
    segb_free(b);
    Segment *s;
    cr_assert_eq(seg_open(path, 1, &s, &e), QR_OK, "%s", e.message);
    cr_assert_eq(seg_sync_btrees(s, sc, true, false, &e), QR_OK, "%s", e.message);
    cr_assert_eq(seg_verify(s, &e), QR_OK, "%s", e.message);
    return s;
}

/* Every indexed field of seg has a tree answering like the oracle. */
static void check_seg(const Segment *s, const QrSchema *sc, uint64_t *rng, int n_preds,
                      const char *what)
{
    char w[128];
    for (int f = 0; f < sc->n_fields; f++) {
        const Column *c = seg_column(s, f);
        const BTree *bt = seg_btree(s, f);
        if (!c || !sc->fields[f].btree) {
            cr_assert_null(bt, "%s: field %s has a tree", what, sc->fields[f].name);
            continue;
        }
        cr_assert_not_null(bt, "%s: field %s has no tree", what, sc->fields[f].name);
        /* operands: values of the column itself (hits) and random ones */
        Row *rows = rows_of(c);
        Pool pool;
        memset(&pool, 0, sizeof pool);
        for (uint32_t i = 0; i < col_rows(c) && pool.n < 300; i += 1 + (uint32_t)eu_below(rng, 4))
            if (!rows[i].null)
                pool.v[pool.n++] = rows[i].v;
        snprintf(w, sizeof w, "%s/%s", what, sc->fields[f].name);
        check_tree(bt, c, rng, &pool, n_preds, w);
        free(rows);
    }
}

Test(btree, segments_and_merge)
{
    uint64_t rng = 99;
    char **words = eu_words(200, 3);
    EuZipf z;
    eu_zipf_init(&z, 200, 1.05);
    QrSchema sc;
    random_docs_schema(&sc);
    int ns[3] = {900, 1300, 400};
    char **docs[3];
    Segment *segs[3];
    for (int k = 0; k < 3; k++) {
        char name[16];
        snprintf(name, sizeof name, "s%d", k);
        docs[k] = make_docs(&rng, ns[k], k * 10000, words, &z);
        segs[k] = build_seg(&sc, docs[k], ns[k], name);
        check_seg(segs[k], &sc, &rng, 60, name);
        char bp[4096];
        seg_btree_path(bp, sizeof bp, seg_path(segs[k]), 2);
        cr_assert(qr_path_exists(bp), "side file %s", bp);
    }
    /* merge with deletes */
    roaring_bitmap_t *dels[3];
    for (int k = 0; k < 3; k++) {
        dels[k] = roaring_bitmap_create();
        for (int i = 0; i < ns[k]; i++)
            if (eu_chance(&rng, 0.2))
                roaring_bitmap_add(dels[k], (uint32_t)i);
    }
    char mpath[4096];
    snprintf(mpath, sizeof mpath, "%s/merged.qseg", dir);
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(seg_merge(segs, (const roaring_bitmap_t *const *)dels, 3, &sc, mpath, false,
                           NULL, &e),
                 QR_OK, "%s", e.message);
    Segment *m;
    cr_assert_eq(seg_open(mpath, 9, &m, &e), QR_OK);
    cr_assert_eq(seg_sync_btrees(m, &sc, true, false, &e), QR_OK, "%s", e.message);
    cr_assert_eq(seg_verify(m, &e), QR_OK, "%s", e.message);
    check_seg(m, &sc, &rng, 80, "merged");
    /* detaching follows the schema; the tree stays readable until unref */
    QrSchema sc2 = sc;
    sc2.fields[2].btree = false;
    const BTree *held = seg_btree(m, 2);
    cr_assert_eq(seg_sync_btrees(m, &sc2, true, false, &e), QR_OK);
    cr_assert_null(seg_btree(m, 2));
    cr_assert_eq(bt_estimate(held, &(ColPred){.op = CP_IS_NULL}), bt_null_count(held));
    seg_remove_btree_files(mpath);
    char bp[4096];
    seg_btree_path(bp, sizeof bp, mpath, 3);
    cr_assert(!qr_path_exists(bp));
    seg_unref(m);
    for (int k = 0; k < 3; k++) {
        roaring_bitmap_free(dels[k]);
        seg_unref(segs[k]);
        for (int i = 0; i < ns[k]; i++)
            free(docs[k][i]);
        free(docs[k]);
    }
    eu_zipf_free(&z);
    eu_words_free(words, 200);
}

/* ---- through a table ---- */

static int field_index(const QrSchema *sc, const char *name)
{
    for (int f = 0; f < sc->n_fields; f++)
        if (!strcmp(sc->fields[f].name, name))
            return f;
    return -1;
}

static void check_table(Table *t, uint64_t *rng, const char *what)
{
    Snapshot *s = table_snapshot(t);
    for (int i = 0; i < s->n_segs; i++)
        check_seg(s->segs[i], table_schema(t), rng, 25, what);
    snapshot_release(s);
}

static int count_qbt(const char *d)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '\\.qbt$'", d);
    FILE *p = popen(cmd, "r");
    int n = 0;
    if (fscanf(p, "%d", &n) != 1)
        n = 0;
    pclose(p);
    return n;
}

/* A new table in tdir (options in *o: no background merges, no fsync) with
 * n_commits commits of n docs each, keys from k * step for commit k
 * (step < n: later commits replace earlier docs). */
static Table *fill_table(const char *tdir, const QrSchema *sc, TableOpts *o, uint64_t *rng,
                         char **words, EuZipf *z, int n_commits, int n, int step)
{
    table_opts_default(o);
    o->background_merge = false;
    o->fsync = QR_FSYNC_OFF;
    o->nrt_commit_docs = 0; /* every commit a segment file with its side files */
    Table *t;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_create(tdir, sc, o, &t, &e), QR_OK, "%s", e.message);
    TableBatch *tb;
    cr_assert_eq(table_batch_begin(t, &tb, &e), QR_OK, "%s", e.message);
    for (int k = 0; k < n_commits; k++) {
        char **docs = make_docs(rng, n, k * step, words, z);
        for (int i = 0; i < n; i++) {
            cr_assert_eq(table_batch_put(tb, docs[i], strlen(docs[i]), NULL, NULL, &e), QR_OK,
                         "%s", e.message);
            free(docs[i]);
        }
        free(docs);
        cr_assert_eq(table_batch_commit(tb, &e), QR_OK, "%s", e.message);
    }
    table_batch_free(tb);
    return t;
}

Test(btree, table_create_index)
{
    uint64_t rng = 1234;
    char **words = eu_words(200, 5);
    EuZipf z;
    eu_zipf_init(&z, 200, 1.05);
    QrSchema sc;
    eu_random_schema(&sc, true);
    char tdir[4096];
    snprintf(tdir, sizeof tdir, "%s/t", dir);
    TableOpts o;
    QrError e;
    qr_error_clear(&e);
    /* three segments of data before any index (overlapping keys: deletes) */
    Table *t = fill_table(tdir, &sc, &o, &rng, words, &z, 3, 700, 500);
    TableBatch *tb;
    cr_assert_eq(table_batch_begin(t, &tb, &e), QR_OK, "%s", e.message);
    cr_assert_eq(count_qbt(tdir), 0);
    int f_n = field_index(&sc, "n"), f_cat = field_index(&sc, "cat"),
        f_price = field_index(&sc, "price"), f_title = field_index(&sc, "title");
    /* errors */
    cr_assert_eq(table_create_index(t, f_title, &e), QR_EINVAL);
    qr_error_clear(&e);
    cr_assert_eq(table_create_index(t, 99, &e), QR_ENOTFOUND);
    qr_error_clear(&e);
    cr_assert_eq(table_drop_index(t, f_n, &e), QR_ENOTFOUND);
    qr_error_clear(&e);
    /* create on existing data */
    cr_assert_eq(table_create_index(t, f_n, &e), QR_OK, "%s", e.message);
    cr_assert_eq(table_create_index(t, f_cat, &e), QR_OK, "%s", e.message);
    cr_assert_eq(table_create_index(t, f_price, &e), QR_OK, "%s", e.message);
    cr_assert_eq(table_create_index(t, f_cat, &e), QR_EEXISTS);
    qr_error_clear(&e);
    cr_assert(table_schema(t)->fields[f_n].btree);
    cr_assert_eq(count_qbt(tdir), 9);
    check_table(t, &rng, "created");
    /* new data gets trees at commit */
    char **docs = make_docs(&rng, 300, 5000, words, &z);
    for (int i = 0; i < 300; i++) {
        cr_assert_eq(table_batch_put(tb, docs[i], strlen(docs[i]), NULL, NULL, &e), QR_OK);
        free(docs[i]);
    }
    free(docs);
    cr_assert_eq(table_batch_commit(tb, &e), QR_OK);
    cr_assert_eq(count_qbt(tdir), 12);
    check_table(t, &rng, "after commit");
    cr_assert_eq(table_verify(t, &e), QR_OK, "%s", e.message);
    table_batch_free(tb);
    table_close(t);
    /* reopen: schema persisted; a missing file is rebuilt, a damaged one too */
    Snapshot *s0;
    cr_assert_eq(table_open(tdir, &o, &t, &e), QR_OK, "%s", e.message);
    cr_assert(table_schema(t)->fields[f_cat].btree);
    s0 = table_snapshot(t);
    char p0[4096], b0[4096], b1[4096];
    snprintf(p0, sizeof p0, "%s", seg_path(s0->segs[0]));
    seg_btree_path(b0, sizeof b0, p0, f_n);
    seg_btree_path(b1, sizeof b1, p0, f_cat);
    snapshot_release(s0);
    table_close(t);
    cr_assert_eq(unlink(b0), 0);
    uint8_t *data;
    size_t len;
    cr_assert_eq(qr_file_read_all(b1, &data, &len, &e), QR_OK);
    data[len / 2] ^= 0x40;
    cr_assert_eq(qr_file_write_atomic(b1, data, len, false, &e), QR_OK);
    BTree *bad = NULL;
    cr_assert_eq(bt_open(b1, "damaged", &bad, &e), QR_ECORRUPT);
    qr_error_clear(&e);
    free(data);
    cr_assert_eq(table_open(tdir, &o, &t, &e), QR_OK, "%s", e.message);
    cr_assert(qr_path_exists(b0), "missing side file rebuilt");
    BTree *good = NULL;
    cr_assert_eq(bt_open(b1, "rebuilt", &good, &e), QR_OK, "damaged side file rebuilt: %s",
                 e.message);
    bt_close(good);
    check_table(t, &rng, "reopened");
    /* merge: one segment with trees, the sources' files gone */
    cr_assert_eq(table_force_merge(t, &e), QR_OK, "%s", e.message);
    cr_assert(!qr_path_exists(b0));
    cr_assert_eq(count_qbt(tdir), 3);
    check_table(t, &rng, "merged");
    /* drop */
    cr_assert_eq(table_drop_index(t, f_price, &e), QR_OK, "%s", e.message);
    cr_assert_eq(count_qbt(tdir), 2);
    cr_assert(!table_schema(t)->fields[f_price].btree);
    check_table(t, &rng, "dropped");
    table_close(t);
    cr_assert_eq(table_open(tdir, &o, &t, &e), QR_OK, "%s", e.message);
    cr_assert(!table_schema(t)->fields[f_price].btree);
    cr_assert(table_schema(t)->fields[f_n].btree);
    cr_assert_eq(count_qbt(tdir), 2);
    check_table(t, &rng, "reopened after drop");
    table_close(t);
    /* a stray side file of a non-indexed field is removed at open */
    Snapshot *s1;
    cr_assert_eq(table_open(tdir, &o, &t, &e), QR_OK);
    s1 = table_snapshot(t);
    char stray[4096];
    seg_btree_path(stray, sizeof stray, seg_path(s1->segs[0]), f_price);
    snapshot_release(s1);
    table_close(t);
    cr_assert_eq(qr_file_write_atomic(stray, "x", 1, false, &e), QR_OK);
    cr_assert_eq(table_open(tdir, &o, &t, &e), QR_OK);
    cr_assert(!qr_path_exists(stray));
    table_close(t);
    eu_zipf_free(&z);
    eu_words_free(words, 200);
}

/* quarry check sees damage done to a side file after it was opened (the
 * mapping shows the bytes on disk), and a read-only sync leaves a missing
 * side file out instead of writing it. */
Test(btree, verify_and_read_only)
{
    uint64_t rng = 4321;
    char **words = eu_words(100, 9);
    EuZipf z;
    eu_zipf_init(&z, 100, 1.05);
    QrSchema sc;
    random_docs_schema(&sc);
    char **docs = make_docs(&rng, 600, 0, words, &z);
    Segment *s = build_seg(&sc, docs, 600, "v");
    int f = field_index(&sc, "cat");
    char bp[4096];
    seg_btree_path(bp, sizeof bp, seg_path(s), f);
    QrError e;
    qr_error_clear(&e);
    /* flip a byte in place, in the middle of the pages */
    FILE *fp = fopen(bp, "r+b");
    cr_assert_not_null(fp);
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, len / 2, SEEK_SET);
    int ch = fgetc(fp);
    fseek(fp, len / 2, SEEK_SET);
    fputc(ch ^ 0x5a, fp);
    fclose(fp);
    cr_assert_eq(seg_verify(s, &e), QR_ECORRUPT, "seg_verify: %s", e.message);
    cr_assert(strstr(e.message, ".qbt") != NULL, "names the side file: %s", e.message);
    seg_unref(s);
    /* reopen read-only with the side file gone: no tree, no file written */
    cr_assert_eq(unlink(bp), 0);
    char path[4096];
    snprintf(path, sizeof path, "%s/v.qseg", dir);
    qr_error_clear(&e);
    cr_assert_eq(seg_open(path, 1, &s, &e), QR_OK);
    cr_assert_eq(seg_sync_btrees(s, &sc, false, false, &e), QR_OK);
    cr_assert_null(seg_btree(s, f));
    cr_assert_not_null(seg_btree(s, field_index(&sc, "n")));
    cr_assert(!qr_path_exists(bp));
    cr_assert_eq(seg_sync_btrees(s, &sc, true, false, &e), QR_OK);
    cr_assert_not_null(seg_btree(s, f));
    cr_assert_eq(seg_verify(s, &e), QR_OK, "%s", e.message);
    seg_unref(s);
    for (int i = 0; i < 600; i++)
        free(docs[i]);
    free(docs);
    eu_zipf_free(&z);
    eu_words_free(words, 100);
}

/* quarry check's open (TableOpts.check, read-only) reports a damaged side
 * file, naming it, where a plain read-only open leaves the tree out and a
 * writable open rebuilds it; a missing side file is not damage (the next
 * writable open builds it); an intact table passes with every tree
 * verified. */
Test(btree, check_open_reports_damaged_side_file)
{
    uint64_t rng = 77;
    char **words = eu_words(100, 3);
    EuZipf z;
    eu_zipf_init(&z, 100, 1.05);
    QrSchema sc;
    eu_random_schema(&sc, true);
    int f_cat = field_index(&sc, "cat"), f_n = field_index(&sc, "n");
    sc.fields[f_cat].btree = true;
    sc.fields[f_n].btree = true;
    char tdir[4096];
    snprintf(tdir, sizeof tdir, "%s/t", dir);
    TableOpts o;
    QrError e;
    qr_error_clear(&e);
    Table *t = fill_table(tdir, &sc, &o, &rng, words, &z, 2, 400, 400);
    Snapshot *s0 = table_snapshot(t);
    char bp[4096], bn[4096];
    seg_btree_path(bp, sizeof bp, seg_path(s0->segs[1]), f_cat);
    seg_btree_path(bn, sizeof bn, seg_path(s0->segs[0]), f_n);
    snapshot_release(s0);
    table_close(t);
    TableOpts ro = o, ck = o;
    ro.read_only = true;
    ck.read_only = ck.check = true;
    cr_assert_eq(table_open(tdir, &ck, &t, &e), QR_OK, "intact: %s", e.message);
    table_close(t);
    /* flip one byte of one side file */
    uint8_t *data;
    size_t len;
    cr_assert_eq(qr_file_read_all(bp, &data, &len, &e), QR_OK);
    data[len / 2] ^= 0x20;
    cr_assert_eq(qr_file_write_atomic(bp, data, len, false, &e), QR_OK);
    cr_assert_eq(table_open(tdir, &ro, &t, &e), QR_OK, "read-only leaves it out: %s", e.message);
    table_close(t);
    cr_assert_eq(table_open(tdir, &ck, &t, &e), QR_ECORRUPT, "check reports it");
    cr_assert(strstr(e.message, strrchr(bp, '/') + 1), "names the file: %s", e.message);
    cr_assert(strstr(e.hint, "rebuilds"), "hint: %s", e.hint);
    uint8_t *after;
    size_t after_len;
    cr_assert_eq(qr_file_read_all(bp, &after, &after_len, NULL), QR_OK);
    cr_assert(after_len == len && !memcmp(after, data, len), "check changed the side file");
    free(after);
    free(data);
    /* a missing side file: not damage */
    qr_error_clear(&e);
    cr_assert_eq(unlink(bn), 0);
    cr_assert_eq(table_open(tdir, &ck, &t, &e), QR_ECORRUPT, "the damaged one still counts");
    qr_error_clear(&e);
    cr_assert_eq(table_open(tdir, &o, &t, &e), QR_OK, "a writable open rebuilds: %s", e.message);
    table_close(t);
    cr_assert(qr_path_exists(bn), "the missing side file was built");
    cr_assert_eq(unlink(bn), 0);
    cr_assert_eq(table_open(tdir, &ck, &t, &e), QR_OK, "missing is not damage: %s", e.message);
    table_close(t);
    eu_zipf_free(&z);
    eu_words_free(words, 100);
}

/* The front door: qr_table_create_index / qr_table_drop_index by name. */
Test(btree, front_door)
{
    char ddir[4096];
    snprintf(ddir, sizeof ddir, "%s/db", dir);
    QrDbOpts o;
    qr_db_opts_default(&o);
    o.fsync = QR_FSYNC_OFF;
    o.background_merge = false;
    QrDb *db;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(qr_db_open(ddir, &o, &db, &e), QR_OK, "%s", e.message);
    QrSchema sc;
    eu_random_schema(&sc, true);
    QrTable *t;
    cr_assert_eq(qr_table_create(db, "docs", &sc, &t, &e), QR_OK, "%s", e.message);
    uint64_t rng = 8;
    char **words = eu_words(100, 2);
    EuZipf z;
    eu_zipf_init(&z, 100, 1.05);
    char **docs = make_docs(&rng, 500, 0, words, &z);
    QrBatch *qb;
    cr_assert_eq(qr_batch_begin(t, &qb, &e), QR_OK, "%s", e.message);
    for (int i = 0; i < 500; i++)
        cr_assert_eq(qr_batch_put(qb, docs[i], strlen(docs[i]), NULL, &e), QR_OK, "%s",
                     e.message);
    cr_assert_eq(qr_batch_commit(qb, &e), QR_OK);
    qr_batch_free(qb);
    cr_assert_eq(qr_table_create_index(t, "nope", &e), QR_ENOTFOUND);
    cr_assert_str_eq(qr_error_sqlstate(&e), "42703");
    qr_error_clear(&e);
    cr_assert_eq(qr_table_create_index(t, "ts", &e), QR_OK, "%s", e.message);
    int f = field_index(qr_table_schema(t), "ts");
    cr_assert(qr_table_schema(t)->fields[f].btree);
    cr_assert_eq(qr_table_create_index(t, "ts", &e), QR_EEXISTS);
    qr_error_clear(&e);
    cr_assert_eq(qr_verify(t, &e), QR_OK, "%s", e.message);
    cr_assert_eq(qr_table_drop_index(t, "ts", &e), QR_OK, "%s", e.message);
    cr_assert(!qr_table_schema(t)->fields[f].btree);
    cr_assert_eq(qr_table_drop_index(t, "ts", &e), QR_ENOTFOUND);
    qr_db_close(db);
    for (int i = 0; i < 500; i++)
        free(docs[i]);
    free(docs);
    eu_zipf_free(&z);
    eu_words_free(words, 100);
}

/* A B-tree iterator intersected with text postings (what the planner
 * builds): AND of bt_iter_open and a posting list equals the intersection of
 * their doc sets, for frequent words and selective or broad predicates. */
Test(btree, intersect_with_postings)
{
    uint64_t rng = 606;
    char **words = eu_words(60, 4);
    EuZipf z;
    eu_zipf_init(&z, 60, 1.05);
    QrSchema sc;
    random_docs_schema(&sc);
    char **docs = make_docs(&rng, 3000, 0, words, &z);
    Segment *s = build_seg(&sc, docs, 3000, "x");
    int f_body = field_index(&sc, "body"), f_n = field_index(&sc, "n"),
        f_cat = field_index(&sc, "cat");
    QrArena *arena = qr_arena_new(0);
    int checked = 0;
    for (int w = 0; w < 8; w++) {
        TermPostings tp;
        if (!seg_term(s, f_body, words[w], strlen(words[w]), &tp))
            continue;
        IterCtx ctx;
        iter_ctx_init(&ctx, arena);
        roaring_bitmap_t *text = roaring_bitmap_create();
        Iter *pi = seg_postings(s, &ctx, &tp, NULL, false);
        for (DocId d = iter_next(pi); d != ITER_END; d = iter_next(pi))
            roaring_bitmap_add(text, (uint32_t)d);
        iter_close(pi);
        cr_assert_eq(roaring_bitmap_get_cardinality(text), tp.df);
        ColPred preds[3] = {
            {.op = CP_BETWEEN, .v = col_val_int(-5), .hi = col_val_int(40)},
            {.op = CP_NE, .v = col_val_int(3)},
            {.op = CP_IS_NULL},
        };
        for (int k = 0; k < 4; k++) {
            const BTree *bt = seg_btree(s, k < 3 ? f_n : f_cat);
            ColPred cat = {.op = CP_PREFIX, .v = col_val_str("c", 1)};
            const ColPred *p = k < 3 ? &preds[k] : &cat;
            roaring_bitmap_t *rows = roaring_bitmap_create();
            QrError e;
            qr_error_clear(&e);
            cr_assert_eq(bt_lookup(bt, p, rows, NULL, &e), QR_OK, "%s", e.message);
            roaring_bitmap_t *want = roaring_bitmap_and(text, rows);
            Iter *kids[2] = {seg_postings(s, &ctx, &tp, NULL, false),
                             bt_iter_open(bt, &ctx, p, NULL)};
            Iter *and = iter_and_new(&ctx, kids, 2);
            roaring_bitmap_t *got = roaring_bitmap_create();
            for (DocId d = iter_next(and); d != ITER_END; d = iter_next(and))
                roaring_bitmap_add(got, (uint32_t)d);
            iter_close(and);
            cr_assert_eq(ctx.err.code, QR_OK, "%s", ctx.err.message);
            cr_assert(roaring_bitmap_equals(got, want), "word %s pred %d: %llu docs, want %llu",
                      words[w], k, (unsigned long long)roaring_bitmap_get_cardinality(got),
                      (unsigned long long)roaring_bitmap_get_cardinality(want));
            checked += !roaring_bitmap_is_empty(want);
            roaring_bitmap_free(got);
            roaring_bitmap_free(want);
            roaring_bitmap_free(rows);
        }
        roaring_bitmap_free(text);
    }
    cr_assert_gt(checked, 5, "too few non-empty intersections (%d)", checked);
    qr_arena_free(arena);
    seg_unref(s);
    for (int i = 0; i < 3000; i++)
        free(docs[i]);
    free(docs);
    eu_zipf_free(&z);
    eu_words_free(words, 60);
}
