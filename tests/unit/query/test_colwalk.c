/*
 * test_colwalk.c — the column work both front doors share (query/colwalk.h)
 * against brute force over the stored JSON: the ordered walk (every
 * candidate once with its key, blocks best bound first, a limit-k walk that
 * stops early giving the k best keys), candidate rows read a block at a
 * time (sparse and dense blocks), grouping by dictionary codes with sums,
 * counts, minima and maxima per group, and predicate bitmaps.
 *
 * The table: several segments larger than a column block, deletes pending,
 * NULLs and missing fields, a field added after the first segments (so
 * some segments lack its column), a skewed keyword and a sorted integer.
 */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "query/colwalk.h"
#include "query/filter.h"
#include "query/query_int.h"
#include "query/quarry.h"
#include "store/docstore.h"
#include "store/util.h"

TestSuite(colwalk, .init = eu_quiet, .fini = eu_tmpdirs_cleanup);

enum { F_BODY, F_N, F_SEQ, F_PRICE, F_TS, F_CAT, F_LATE, N_FIELDS };
static const char *fnames[] = {"body", "n", "seq", "price", "ts", "cat", "late"};
static const QrFieldType ftypes[] = {QR_FT_TEXT, QR_FT_INT, QR_FT_INT, QR_FT_FLOAT,
                                     QR_FT_TIMESTAMP, QR_FT_KEYWORD, QR_FT_INT};
static const char *cats[] = {"alpha", "beta", "gamma", "delta", "al", "", "zeta", "Alpha"};
#define N_CATS 8

typedef struct Env {
    QrDb *db;
    QrTable *t;
    int64_t seq;
    Snapshot *snap;
    cJSON **docs[16];          /* per segment, every stored doc */
} Env;

static char *random_doc(uint64_t *rng, int64_t id, int64_t seq, bool late)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)id);
    cJSON_AddStringToObject(o, "body", "river stone");
    if (!eu_chance(rng, 0.1))
        cJSON_AddNumberToObject(o, "n", (double)((int64_t)eu_below(rng, 5000) - 2500));
    cJSON_AddNumberToObject(o, "seq", (double)seq);
    if (!eu_chance(rng, 0.15))
        cJSON_AddNumberToObject(o, "price", (double)eu_below(rng, 40000) / 8.0 - 50);
    if (!eu_chance(rng, 0.1)) {
        char ts[40];
        qr_format_timestamp((int64_t)(1735689600 + (int64_t)eu_below(rng, 90 * 86400)) * 1000000,
                            ts, sizeof ts);
        cJSON_AddStringToObject(o, "ts", ts);
    }
    if (!eu_chance(rng, 0.1))
        cJSON_AddStringToObject(o, "cat", cats[eu_chance(rng, 0.5) ? 0 : eu_below(rng, N_CATS)]);
    if (late && !eu_chance(rng, 0.3))
        cJSON_AddNumberToObject(o, "late", (double)eu_below(rng, 100));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static void put_docs(Env *e, uint64_t *rng, int n, int64_t space, bool late)
{
    char **d = malloc(sizeof *d * (size_t)n);
    for (int i = 0; i < n; i++)
        d[i] = random_doc(rng, (int64_t)eu_below(rng, (uint64_t)space), e->seq++, late);
    eu_put_docs(e->t, d, n);
    free(d);
}

static void env_open(Env *e, uint64_t *rng)
{
    memset(e, 0, sizeof *e);
    char *dir = eu_tmpdir_tracked("colwalk");
    QrDbOpts o;
    qr_db_opts_default(&o);
    o.background_merge = false;
    o.fsync = QR_FSYNC_OFF;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_db_open(dir, &o, &e->db, &err), QR_OK, "%s", err.message);
    QrSchema s;
    schema_init(&s);
    for (int f = 0; f < F_LATE; f++) {
        QrField fd;
        schema_field_defaults(&fd, fnames[f], ftypes[f]);
        cr_assert_geq(schema_add_field(&s, &fd, &err), 0, "%s", err.message);
    }
    cr_assert_eq(qr_table_create(e->db, "t", &s, &e->t, &err), QR_OK, "%s", err.message);
    int64_t space = 40000;
    put_docs(e, rng, 9000, space, false);
    put_docs(e, rng, 5000, space, false);
    eu_delete_random(e->t, rng, 900, space);
    QrField late;
    schema_field_defaults(&late, "late", QR_FT_INT);
    cr_assert_eq(qr_table_add_field(e->t, &late, &err), QR_OK, "%s", err.message);
    put_docs(e, rng, 6000, space, true);
    eu_delete_random(e->t, rng, 400, space);
    e->snap = table_snapshot(e->t->table);
    cr_assert_geq(e->snap->n_segs, 3);
    cr_assert_leq(e->snap->n_segs, 16);
    for (int si = 0; si < e->snap->n_segs; si++) {
        Segment *seg = e->snap->segs[si];
        uint32_t n = seg_n_docs(seg);
        e->docs[si] = calloc(n + 1, sizeof **e->docs);
        DocStoreCursor *c = ds_cursor_new(seg_docs(seg));
        for (uint32_t d = 0; d < n; d++) {
            const uint8_t *p;
            size_t len;
            cr_assert_eq(ds_get(c, d, &p, &len, &err), QR_OK, "%s", err.message);
            e->docs[si][d] = cJSON_ParseWithLength((const char *)p, len);
        }
        ds_cursor_free(c);
    }
}

static void env_close(Env *e)
{
    for (int si = 0; si < e->snap->n_segs; si++) {
        for (uint32_t d = 0; d < seg_n_docs(e->snap->segs[si]); d++)
            cJSON_Delete(e->docs[si][d]);
        free(e->docs[si]);
    }
    snapshot_release(e->snap);
    qr_db_close(e->db);
}

static QrColType ct_of(int f)
{
    return f == F_PRICE ? QR_COL_FLOAT64 : f == F_TS ? QR_COL_TIMESTAMP
           : f == F_CAT ? QR_COL_KEYWORD : QR_COL_INT64;
}

/* The key brute force reads from a document's JSON. */
static ColWalkKey json_key(const cJSON *doc, int f)
{
    ColWalkKey k = {.null = true};
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, fnames[f]);
    if (!v || cJSON_IsNull(v))
        return k;
    k.null = false;
    if (f == F_CAT) {
        k.s = v->valuestring;
        k.n = strlen(v->valuestring);
    } else if (f == F_TS) {
        cr_assert(qr_parse_timestamp(v->valuestring, strlen(v->valuestring), &k.i));
    } else if (f == F_PRICE) {
        k.f = v->valuedouble;
    } else {
        k.i = (int64_t)v->valuedouble;
    }
    return k;
}

static bool keys_equal(int f, const ColWalkKey *a, const ColWalkKey *b)
{
    return colwalk_key_cmp(ct_of(f), a, b, false, false) == 0;
}

/* Random candidates per segment: live docs with probability p (NULL when
 * p >= 1: every live doc). */
static roaring_bitmap_t **random_cands(Env *e, uint64_t *rng, double p)
{
    roaring_bitmap_t **c = calloc((size_t)e->snap->n_segs, sizeof *c);
    if (p >= 1)
        return c;
    for (int si = 0; si < e->snap->n_segs; si++) {
        c[si] = roaring_bitmap_create();
        for (uint32_t d = 0; d < seg_n_docs(e->snap->segs[si]); d++)
            if (!snapshot_deleted(e->snap, si, d) && eu_chance(rng, p))
                roaring_bitmap_add(c[si], d);
    }
    return c;
}

static void free_cands(Env *e, roaring_bitmap_t **c)
{
    for (int si = 0; si < e->snap->n_segs; si++)
        if (c[si])
            roaring_bitmap_free(c[si]);
    free(c);
}

/* Segment si's candidates of c as a bitmap of their own (every live doc
 * when c[si] is NULL). */
static roaring_bitmap_t *cands_of(Env *e, roaring_bitmap_t **c, int si)
{
    roaring_bitmap_t *cand = c[si] ? roaring_bitmap_copy(c[si]) : roaring_bitmap_create();
    if (!c[si])
        for (uint32_t d = 0; d < seg_n_docs(e->snap->segs[si]); d++)
            if (!snapshot_deleted(e->snap, si, d))
                roaring_bitmap_add(cand, d);
    return cand;
}

static bool is_cand(Env *e, roaring_bitmap_t **c, int si, uint32_t d)
{
    return c[si] ? roaring_bitmap_contains(c[si], d) : !snapshot_deleted(e->snap, si, d);
}

/* A candidate of the brute-force order: (key, segment, row). */
typedef struct Item {
    ColWalkKey k;
    int si;
    uint32_t row;
} Item;

static int g_f;
static bool g_desc, g_nf;
static int item_cmp(const void *x, const void *y)
{
    const Item *a = x, *b = y;
    return colwalk_key_cmp(ct_of(g_f), &a->k, &b->k, g_desc, g_nf);
}

Test(colwalk, ordered_walk_yields_every_candidate_best_blocks_first)
{
    uint64_t rng = 20261203;
    Env e;
    env_open(&e, &rng);
    const int fields[] = {F_N, F_SEQ, F_PRICE, F_TS, F_CAT, F_LATE};
    for (int fi = 0; fi < 6; fi++)
        for (int mode = 0; mode < 8; mode++) {
            int f = fields[fi];
            bool desc = mode & 1, nf = mode & 2;
            roaring_bitmap_t **c = random_cands(&e, &rng, (mode & 4) ? 0.3 : 1.0);
            ColWalkOrder *w;
            QrError err;
            qr_error_clear(&err);
            cr_assert_eq(colwalk_order_open(e.snap->segs, (const roaring_bitmap_t *const *)e.snap->dels,
                                            e.snap->n_segs, f, ct_of(f), desc, nf, c, NULL, &w, &err),
                         QR_OK, "%s", err.message);
            /* every block in order: bounds best first, every key no better
             * than its block's bound, each candidate once with its key */
            uint64_t seen = 0, want = 0;
            roaring_bitmap_t *got[16] = {0};
            for (int si = 0; si < e.snap->n_segs; si++) {
                got[si] = roaring_bitmap_create();
                for (uint32_t d = 0; d < seg_n_docs(e.snap->segs[si]); d++)
                    want += is_cand(&e, c, si, d);
            }
            ColWalkKey prev = {.null = true};
            bool first = true;
            const ColWalkKey *best;
            while (colwalk_order_peek(w, &best)) {
                ColWalkKey b = *best;
                if (!first)
                    cr_assert_leq(colwalk_key_cmp(ct_of(f), &prev, &b, desc, nf), 0,
                                  "field %s mode %d: blocks out of order", fnames[f], mode);
                first = false;
                prev = b;
                int si;
                const uint32_t *rows;
                const ColWalkView *view;
                uint32_t n = colwalk_order_read(w, &si, &rows, &view, &err);
                cr_assert_eq(err.code, QR_OK, "%s", err.message);
                for (uint32_t r = 0; r < n; r++) {
                    uint32_t row = rows ? rows[r] : view->first_row + r;
                    cr_assert(is_cand(&e, c, si, row), "a row that is no candidate");
                    cr_assert(!roaring_bitmap_contains(got[si], row), "a row twice");
                    roaring_bitmap_add(got[si], row);
                    ColWalkKey k, j = json_key(e.docs[si][row], f);
                    colwalk_order_key(view, row, &k);
                    cr_assert(keys_equal(f, &k, &j), "field %s seg %d row %u: key differs",
                              fnames[f], si, row);
                    cr_assert_geq(colwalk_key_cmp(ct_of(f), &k, &b, desc, nf), 0,
                                  "field %s: a key better than its block's bound", fnames[f]);
                    seen++;
                }
            }
            cr_assert_eq(seen, want, "field %s mode %d: %llu rows walked, %llu candidates",
                         fnames[f], mode, (unsigned long long)seen, (unsigned long long)want);
            colwalk_order_close(w);
            for (int si = 0; si < e.snap->n_segs; si++)
                roaring_bitmap_free(got[si]);
            free_cands(&e, c);
        }
    env_close(&e);
}

Test(colwalk, limit_walk_stops_early_with_the_k_best_keys)
{
    uint64_t rng = 7;
    Env e;
    env_open(&e, &rng);
    const int fields[] = {F_N, F_SEQ, F_PRICE, F_TS, F_CAT};
    for (int fi = 0; fi < 5; fi++)
        for (int mode = 0; mode < 4; mode++) {
            int f = fields[fi], k = mode & 2 ? 1 : 50;
            g_f = f;
            g_desc = mode & 1;
            g_nf = g_desc; /* NULL largest: the search's order */
            roaring_bitmap_t **c = random_cands(&e, &rng, 1.0);
            /* brute force: every live key, sorted */
            size_t n_all = 0;
            Item *all = malloc(sizeof *all * (e.snap->n_docs + 1));
            for (int si = 0; si < e.snap->n_segs; si++)
                for (uint32_t d = 0; d < seg_n_docs(e.snap->segs[si]); d++)
                    if (is_cand(&e, c, si, d))
                        all[n_all++] = (Item){json_key(e.docs[si][d], f), si, d};
            qsort(all, n_all, sizeof *all, item_cmp);
            /* the walk with a limit: a k-slot "heap" kept sorted */
            ColWalkOrder *w;
            QrError err;
            qr_error_clear(&err);
            cr_assert_eq(colwalk_order_open(e.snap->segs, (const roaring_bitmap_t *const *)e.snap->dels,
                                            e.snap->n_segs, f, ct_of(f), g_desc, g_nf, c, NULL, &w,
                                            &err), QR_OK);
            Item *top = malloc(sizeof *top * (size_t)(k + 1));
            int n_top = 0;
            uint64_t blocks = 0;
            const ColWalkKey *best;
            while (colwalk_order_peek(w, &best)) {
                if (n_top == k && colwalk_key_cmp(ct_of(f), best, &top[k - 1].k, g_desc, g_nf) > 0)
                    break; /* no later block can enter */
                int si;
                const uint32_t *rows;
                const ColWalkView *view;
                uint32_t n = colwalk_order_read(w, &si, &rows, &view, &err);
                blocks++;
                for (uint32_t r = 0; r < n; r++) {
                    Item it = {.si = si, .row = rows ? rows[r] : view->first_row + r};
                    colwalk_order_key(view, it.row, &it.k);
                    int p = n_top;
                    while (p > 0 && item_cmp(&it, &top[p - 1]) < 0)
                        p--;
                    if (p >= k)
                        continue;
                    memmove(&top[p + 1], &top[p], sizeof *top * (size_t)(n_top - p - (n_top == k)));
                    top[p] = it;
                    if (n_top < k)
                        n_top++;
                }
            }
            cr_assert_eq(n_top, n_all < (size_t)k ? (int)n_all : k);
            for (int i = 0; i < n_top; i++)
                cr_assert_eq(item_cmp(&top[i], &all[i]), 0,
                             "field %s desc %d k %d: key %d differs from brute force", fnames[f],
                             g_desc, k, i);
            if (f == F_SEQ) /* a sorted column: the walk reads a block or two */
                cr_assert_leq(blocks, (uint64_t)e.snap->n_segs + 2, "%llu blocks read",
                              (unsigned long long)blocks);
            colwalk_order_close(w);
            free(top);
            free(all);
            free_cands(&e, c);
        }
    env_close(&e);
}

Test(colwalk, blocks_and_groups_equal_brute_force)
{
    uint64_t rng = 99;
    Env e;
    env_open(&e, &rng);
    const double dens[] = {0.002, 0.05, 0.7, 1.0}; /* sparse blocks are read row by row */
    for (int di = 0; di < 4; di++) {
        roaring_bitmap_t **c = random_cands(&e, &rng, dens[di]);
        for (int si = 0; si < e.snap->n_segs; si++) {
            Segment *seg = e.snap->segs[si];
            roaring_bitmap_t *cand = cands_of(&e, c, si);
            /* rows a block at a time: every column's value per candidate */
            ColWalkCol cols[4] = {{.field = F_N, .type = QR_COL_INT64},
                                  {.field = F_PRICE, .type = QR_COL_FLOAT64},
                                  {.field = F_CAT, .type = QR_COL_KEYWORD},
                                  {.field = F_LATE, .type = QR_COL_INT64}};
            const int cf[4] = {F_N, F_PRICE, F_CAT, F_LATE};
            ColWalkBlocks b;
            QrError err;
            qr_error_clear(&err);
            cr_assert_eq(colwalk_blocks_open(&b, seg, cand, cols, 4, &err), QR_OK);
            uint64_t rows = 0;
            while (colwalk_blocks_next(&b)) {
                for (uint32_t j = 0; j < b.n; j++) {
                    uint32_t row = b.rows[j];
                    cr_assert(roaring_bitmap_contains(cand, row));
                    cr_assert_eq(row / COL_BLOCK_ROWS, b.first_row / COL_BLOCK_ROWS);
                    for (int k = 0; k < 4; k++) {
                        ColWalkKey want = json_key(e.docs[si][row], cf[k]);
                        cr_assert_eq(colwalk_null(&cols[k], row), want.null, "seg %d row %u %s", si,
                                     row, fnames[cf[k]]);
                        if (want.null)
                            continue;
                        if (cf[k] == F_CAT) {
                            const char *s;
                            size_t n;
                            cr_assert(col_dict_get(cols[k].col, cols[k].code[row % COL_BLOCK_ROWS],
                                                   &s, &n));
                            cr_assert(n == want.n && !memcmp(s, want.s, n));
                        } else {
                            cr_assert_eq(colwalk_num(&cols[k], row),
                                         cf[k] == F_PRICE ? want.f : (double)want.i);
                        }
                    }
                    rows++;
                }
            }
            colwalk_blocks_close(&b);
            cr_assert_eq(rows, roaring_bitmap_get_cardinality(cand));
            /* groups by cat: rows, and count / sum / min / max of n and price */
            ColWalkCol vals[2] = {{.field = F_N, .type = QR_COL_INT64},
                                  {.field = F_PRICE, .type = QR_COL_FLOAT64}};
            ColWalkGroup g;
            cr_assert_eq(colwalk_group(seg, cand, F_CAT, vals, 2, &g, &err), QR_OK);
            cr_assert_eq(g.stride, 2);
            for (uint32_t gi = 0; gi <= g.n_codes; gi++) {
                const char *gs = NULL;
                size_t gn = 0;
                if (gi < g.n_codes)
                    cr_assert(col_dict_get(g.key, gi, &gs, &gn));
                int64_t brows = 0, bcnt = 0, bsum = 0, bmin = 0, bmax = 0, pcnt = 0;
                double psum = 0, pmin = 0, pmax = 0;
                roaring_uint32_iterator_t *it = roaring_create_iterator(cand);
                for (; it->has_value; roaring_advance_uint32_iterator(it)) {
                    const cJSON *d = e.docs[si][it->current_value];
                    ColWalkKey ck = json_key(d, F_CAT);
                    bool in = gi == g.n_codes ? ck.null
                                              : !ck.null && ck.n == gn && !memcmp(ck.s, gs, gn);
                    if (!in)
                        continue;
                    brows++;
                    ColWalkKey nk = json_key(d, F_N), pk = json_key(d, F_PRICE);
                    if (!nk.null) {
                        bmin = bcnt == 0 || nk.i < bmin ? nk.i : bmin;
                        bmax = bcnt == 0 || nk.i > bmax ? nk.i : bmax;
                        bsum += nk.i;
                        bcnt++;
                    }
                    if (!pk.null) {
                        pmin = pcnt == 0 || pk.f < pmin ? pk.f : pmin;
                        pmax = pcnt == 0 || pk.f > pmax ? pk.f : pmax;
                        psum += pk.f;
                        pcnt++;
                    }
                }
                roaring_free_uint32_iterator(it);
                const ColWalkAgg *P = &g.parts[(size_t)gi * 2];
                cr_assert_eq(P[0].rows, brows, "group %u rows", gi);
                cr_assert_eq(P[0].count, bcnt);
                cr_assert_eq(P[0].sum_i, bsum);
                if (bcnt) {
                    cr_assert_eq(P[0].min_i, bmin);
                    cr_assert_eq(P[0].max_i, bmax);
                }
                cr_assert_eq(P[1].count, pcnt);
                cr_assert(fabs(P[1].sum_f - psum) <= 1e-9 * (1 + fabs(psum)));
                if (pcnt) {
                    cr_assert_eq(P[1].min_f, pmin);
                    cr_assert_eq(P[1].max_f, pmax);
                }
            }
            colwalk_group_free(&g);
            roaring_bitmap_free(cand);
        }
        free_cands(&e, c);
    }
    env_close(&e);
}

static int i64_cmp(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* colwalk_group's dense path (integer blocks without NULLs: seq never is
 * NULL, n is in every block) and its column sharing: the same field asked
 * for three times (kept values once, vals_shared), min / max skipped where
 * not wanted, with and without a key, over every candidate (contiguous
 * blocks), most (gaps) and a few (read row by row); each group's rows,
 * count, sum, min / max and kept values against brute force. */
Test(colwalk, dense_groups_and_shared_columns_equal_brute_force)
{
    uint64_t rng = 7;
    Env e;
    env_open(&e, &rng);
    const double dens[] = {0.01, 0.6, 1.0};
    for (int di = 0; di < 3; di++) {
        roaring_bitmap_t **c = random_cands(&e, &rng, dens[di]);
        for (int si = 0; si < e.snap->n_segs; si++) {
            Segment *seg = e.snap->segs[si];
            roaring_bitmap_t *cand = cands_of(&e, c, si);
            enum { NV = 5 };
            const int vf[NV] = {F_SEQ, F_N, F_SEQ, F_SEQ, F_N};
            ColWalkCol vals[NV] = {
                {.field = F_SEQ, .type = QR_COL_INT64, .skip_minmax = true},
                {.field = F_N, .type = QR_COL_INT64, .keep = true},
                {.field = F_SEQ, .type = QR_COL_INT64, .keep = true},
                {.field = F_SEQ, .type = QR_COL_INT64},
                {.field = F_N, .type = QR_COL_INT64, .skip_minmax = true},
            };
            for (int keyed = 0; keyed < 2; keyed++) {
                ColWalkGroup g;
                QrError err;
                qr_error_clear(&err);
                cr_assert_eq(colwalk_group(seg, cand, keyed ? F_CAT : -1, vals, NV, &g, &err), QR_OK);
                cr_assert_eq(g.stride, NV);
                uint64_t total = 0;
                for (uint32_t gi = 0; gi <= g.n_codes; gi++) {
                    const char *gs = NULL;
                    size_t gn = 0;
                    if (gi < g.n_codes)
                        cr_assert(col_dict_get(g.key, gi, &gs, &gn));
                    int64_t brows = 0, cnt[NV] = {0}, sum[NV] = {0}, mn[NV] = {0}, mx[NV] = {0};
                    int64_t *kept[NV] = {0};
                    for (int k = 0; k < NV; k++)
                        kept[k] = malloc(sizeof(int64_t) * (roaring_bitmap_get_cardinality(cand) + 1));
                    roaring_uint32_iterator_t *it = roaring_create_iterator(cand);
                    for (; it->has_value; roaring_advance_uint32_iterator(it)) {
                        const cJSON *d = e.docs[si][it->current_value];
                        ColWalkKey ck = json_key(d, F_CAT);
                        bool in = !keyed || (gi == g.n_codes ? ck.null
                                                             : !ck.null && ck.n == gn && !memcmp(ck.s, gs, gn));
                        if (!in)
                            continue;
                        brows++;
                        for (int k = 0; k < NV; k++) {
                            ColWalkKey vk = json_key(d, vf[k]);
                            if (vk.null)
                                continue;
                            mn[k] = cnt[k] == 0 || vk.i < mn[k] ? vk.i : mn[k];
                            mx[k] = cnt[k] == 0 || vk.i > mx[k] ? vk.i : mx[k];
                            sum[k] += vk.i;
                            kept[k][cnt[k]++] = vk.i;
                        }
                    }
                    roaring_free_uint32_iterator(it);
                    const ColWalkAgg *P = &g.parts[(size_t)gi * NV];
                    cr_assert_eq(P[0].rows, brows, "group %u rows", gi);
                    total += (uint64_t)P[0].rows;
                    for (int k = 0; k < NV; k++) {
                        cr_assert_eq(P[k].count, cnt[k], "dens %g keyed %d group %u col %d count", dens[di],
                                     keyed, gi, k);
                        cr_assert(!P[k].sum_is_f);
                        cr_assert_eq(P[k].sum_i, sum[k], "group %u col %d sum", gi, k);
                        if (cnt[k] && !vals[k].skip_minmax) {
                            cr_assert_eq(P[k].min_i, mn[k], "group %u col %d min", gi, k);
                            cr_assert_eq(P[k].max_i, mx[k], "group %u col %d max", gi, k);
                        }
                        /* a field with a column that keeps: every column over it has the
                         * values, held by its first (seq: 0, n: 1), shared by the others */
                        int kk = vf[k] == F_SEQ ? 0 : 1;
                        {
                            cr_assert_eq(P[k].n_vals, (uint64_t)cnt[k]);
                            cr_assert_eq(P[k].vals_shared, k != kk && P[k].vals != NULL);
                            cr_assert(P[k].vals == P[kk].vals);
                            int64_t *got = malloc(sizeof(int64_t) * (P[k].n_vals + 1));
                            if (P[k].n_vals)
                                memcpy(got, P[k].vals, sizeof(int64_t) * P[k].n_vals);
                            qsort(got, P[k].n_vals, sizeof *got, i64_cmp);
                            qsort(kept[k], (size_t)cnt[k], sizeof *kept[k], i64_cmp);
                            cr_assert(!cnt[k] || !memcmp(got, kept[k], sizeof(int64_t) * (size_t)cnt[k]),
                                      "group %u col %d kept values", gi, k);
                            free(got);
                        }
                    }
                    for (int k = 0; k < NV; k++)
                        free(kept[k]);
                }
                cr_assert_eq(total, roaring_bitmap_get_cardinality(cand));
                cr_assert_eq(g.rows, total);
                colwalk_group_free(&g);
            }
            roaring_bitmap_free(cand);
        }
        free_cands(&e, c);
    }
    env_close(&e);
}

static int u64_cmp(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* colwalk_rank_keys against a sorted copy: two ranks (apart, equal,
 * adjacent, in one bucket or not) over uniform, narrow, skewed and
 * extreme keys (0 and UINT64_MAX), and the count of keys below the first;
 * the keys are left as they were. */
Test(colwalk, rank_keys_equal_a_sort)
{
    uint64_t x = 12345;
    for (int round = 0; round < 400; round++) {
        uint64_t n = 1 + (uint64_t)(round * 37 % 5000);
        uint64_t *k = malloc(n * sizeof *k), *sorted = malloc(n * sizeof *k), *copy = malloc(n * sizeof *k);
        uint64_t *scratch = malloc(2 * n * sizeof *k);
        for (uint64_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            switch (round % 5) {
            case 0: k[i] = x; break;                                    /* uniform */
            case 1: k[i] = (1ull << 63) + x % 50; break;                /* narrow, many ties */
            case 2: k[i] = x % 100 == 0 ? x : 1000 + x % 3; break;      /* skewed with outliers */
            case 3: k[i] = x % 2 ? UINT64_MAX : 0; break;               /* the extremes */
            default: k[i] = (x % 7) << (x % 60); break;                 /* spread over bit widths */
            }
        }
        memcpy(sorted, k, n * sizeof *k);
        memcpy(copy, k, n * sizeof *k);
        qsort(sorted, n, sizeof *sorted, u64_cmp);
        for (int t = 0; t < 6; t++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint64_t r0 = x % n, r1 = t % 2 ? r0 : r0 + (x >> 20) % 20;
            if (r1 >= n)
                r1 = n - 1;
            uint64_t k1, lt;
            uint64_t k0 = colwalk_rank_keys(k, n, r0, r1, scratch, &k1, &lt);
            cr_assert_eq(k0, sorted[r0], "round %d n %llu rank %llu", round, (unsigned long long)n,
                         (unsigned long long)r0);
            cr_assert_eq(k1, sorted[r1], "round %d rank %llu", round, (unsigned long long)r1);
            uint64_t want_lt = 0;
            while (want_lt < n && sorted[want_lt] < k0)
                want_lt++;
            cr_assert_eq(lt, want_lt, "round %d: keys below rank %llu", round, (unsigned long long)r0);
        }
        cr_assert(!memcmp(k, copy, n * sizeof *k));
        free(k);
        free(sorted);
        free(copy);
        free(scratch);
    }
}

static int g_rf;
static bool g_rdesc, g_rnf;
static int rkey_cmp(const void *x, const void *y)
{
    return colwalk_key_cmp(ct_of(g_rf), x, y, g_rdesc, g_rnf);
}

/* colwalk_rank_window against brute force: number columns with NULLs
 * (n, price, ts, late: absent from early segments) and without (seq),
 * every direction and NULL placement, candidates dense, gapped and sparse
 * over segments with deletes; windows at the start, inside, across the
 * values' end into the NULLs (and back), at the last rank and past it.
 * The rows kept are exactly those whose key lies between the keys of the
 * window's first and last ranks (ties with them included), and `before`
 * counts the candidates ordered strictly before the first. */
Test(colwalk, rank_window_equals_brute_force)
{
    uint64_t rng = 31;
    Env e;
    env_open(&e, &rng);
    const int fields[] = {F_N, F_PRICE, F_TS, F_SEQ, F_LATE};
    const double dens[] = {0.03, 0.5, 1.0};
    int n_segs = e.snap->n_segs;
    for (int di = 0; di < 3; di++) {
        roaring_bitmap_t **c = random_cands(&e, &rng, dens[di]);
        /* brute force's candidates: (key, segment, row) */
        for (size_t fi = 0; fi < sizeof fields / sizeof *fields; fi++) {
            int f = fields[fi];
            size_t cap = 0, n = 0;
            for (int si = 0; si < n_segs; si++)
                cap += seg_n_docs(e.snap->segs[si]);
            Item *all = malloc(sizeof *all * (cap + 1));
            for (int si = 0; si < n_segs; si++)
                for (uint32_t d = 0; d < seg_n_docs(e.snap->segs[si]); d++)
                    if (is_cand(&e, c, si, d))
                        all[n++] = (Item){json_key(e.docs[si][d], f), si, d};
            ColWalkKey *sorted = malloc(sizeof *sorted * (n + 1));
            for (int mode = 0; mode < 4; mode++) {
                g_rf = f;
                g_rdesc = mode & 1;
                g_rnf = mode >> 1;
                for (size_t i = 0; i < n; i++)
                    sorted[i] = all[i].k;
                qsort(sorted, n, sizeof *sorted, rkey_cmp);
                size_t n_null = 0;
                for (size_t i = 0; i < n; i++)
                    n_null += sorted[i].null;
                /* values then NULLs (or NULLs then values): windows ending on the
                 * first rank past the boundary, and starting on the last before it */
                uint64_t edge = g_rnf ? n_null : n - n_null;
                uint64_t froms[] = {0, 1, n / 2, n > n_null ? n - n_null - 3 : 0, n_null + 2,
                                    n > 5 ? n - 5 : 0, n ? n - 1 : 0, n, n + 10,
                                    edge ? edge - 1 : 0, edge ? edge - 1 : 0};
                uint64_t counts[] = {10, 1, 10, 7, 25, 10, 3, 5, 10, 2, 1};
                for (size_t wi = 0; wi < sizeof froms / sizeof *froms; wi++) {
                    uint64_t from = froms[wi], count = counts[wi];
                    roaring_bitmap_t *out[16];
                    uint64_t before;
                    QrError err;
                    qr_error_clear(&err);
                    cr_assert_eq(colwalk_rank_window(e.snap->segs,
                                                     (const roaring_bitmap_t *const *)e.snap->dels,
                                                     n_segs, f, ct_of(f), g_rdesc, g_rnf, c, NULL,
                                                     from, count, out, &before, &err),
                                 QR_OK, "%s", err.message);
                    uint64_t want_before = n, kept = 0;
                    const ColWalkKey *first = NULL, *last = NULL;
                    if (from < n) {
                        uint64_t l = from + count - 1 < n ? from + count - 1 : n - 1;
                        first = &sorted[from];
                        last = &sorted[l];
                        want_before = 0;
                        while (want_before < n && rkey_cmp(&sorted[want_before], first) < 0)
                            want_before++;
                    }
                    cr_assert_eq(before, want_before, "field %s mode %d from %llu: before",
                                 fnames[f], mode, (unsigned long long)from);
                    for (size_t i = 0; i < n; i++) {
                        bool want = first && rkey_cmp(&all[i].k, first) >= 0 &&
                                    rkey_cmp(&all[i].k, last) <= 0;
                        bool got = out[all[i].si] && roaring_bitmap_contains(out[all[i].si], all[i].row);
                        cr_assert_eq(got, want, "field %s mode %d from %llu count %llu: seg %d row %u",
                                     fnames[f], mode, (unsigned long long)from,
                                     (unsigned long long)count, all[i].si, all[i].row);
                        kept += want;
                    }
                    uint64_t got_n = 0;
                    for (int si = 0; si < n_segs; si++)
                        if (out[si]) {
                            got_n += roaring_bitmap_get_cardinality(out[si]);
                            roaring_bitmap_free(out[si]);
                        }
                    cr_assert_eq(got_n, kept, "no row outside the candidates");
                }
            }
            free(sorted);
            free(all);
        }
        free_cands(&e, c);
    }
    env_close(&e);
}

Test(colwalk, filter_bitmaps_equal_brute_force_within_candidates)
{
    uint64_t rng = 5;
    Env e;
    env_open(&e, &rng);
    const QrSchema *sc = qr_table_schema(e.t);
    const char *texts[] = {"n > 100 AND price < 2000", "cat IN ('alpha', 'gamma') OR late IS NULL",
                           "NOT (ts >= '2025-02-01') AND n IS NOT NULL", "late = 7"};
    for (int q = 0; q < 4; q++) {
        QrFilter *f;
        QrError err;
        qr_error_clear(&err);
        cr_assert_eq(qr_filter_parse(sc, texts[q], strlen(texts[q]), &f, &err), QR_OK, "%s",
                     err.message);
        roaring_bitmap_t **c = random_cands(&e, &rng, q % 2 ? 0.4 : 1.0);
        for (int si = 0; si < e.snap->n_segs; si++)
            for (int path = QR_ACCESS_AUTO; path <= QR_ACCESS_CHECK; path++) {
                roaring_bitmap_t *got = roaring_bitmap_create();
                QrFilterStats st = {0};
                cr_assert_eq(colwalk_filter(f, e.snap->segs[si], e.snap->dels[si],
                                            (QrAccessPath)path, c[si], NULL, got, &st, &err),
                             QR_OK, "%s", err.message);
                /* brute force through the engine's own row check */
                FilterSeg *fs;
                cr_assert_eq(filter_seg_compile(f, e.snap->segs[si], &fs, &err), QR_OK);
                roaring_bitmap_t *want = roaring_bitmap_create();
                for (uint32_t d = 0; d < seg_n_docs(e.snap->segs[si]); d++)
                    if (is_cand(&e, c, si, d) && filter_seg_match(fs, d))
                        roaring_bitmap_add(want, d);
                filter_seg_free(fs);
                cr_assert(roaring_bitmap_equals(got, want), "%s, segment %d, path %d: %llu vs %llu",
                          texts[q], si, path, (unsigned long long)roaring_bitmap_get_cardinality(got),
                          (unsigned long long)roaring_bitmap_get_cardinality(want));
                roaring_bitmap_free(got);
                roaring_bitmap_free(want);
            }
        free_cands(&e, c);
        qr_filter_free(f);
    }
    env_close(&e);
}
