/*
 * test_filter.c — structured filters (query/filter.h) and their use in
 * qr_search, checked against brute force over the stored JSON.
 *
 * Randomized differential tests: random tables (every column type, NULLs
 * and missing fields, skewed keywords, a sorted and an unsorted integer
 * column, several segments, deletes, a field added after some segments were
 * written) and random predicate trees (AND / OR / NOT / TRUE / FALSE over
 * every operator).  For each segment the doc ids produced by every forced
 * access path (scan, check with and without candidates, btree, auto) must
 * equal a three-valued-logic evaluation over the segment's stored JSON
 * documents; the text form of each tree must parse back to the same ids.
 * Zone-map counters are checked on sorted vs unsorted columns, and search
 * with filter and sort (counts, filter-only, ranked, by column, paging with
 * search_after) against brute force too.
 */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "query/filter.h"
#include "query/query_int.h"
#include "query/quarry.h"
#include "store/docstore.h"
#include "store/util.h"

TestSuite(filter, .init = eu_quiet, .fini = eu_tmpdirs_cleanup);

/* ---- the table ---- */

enum { F_BODY, F_N, F_SEQ, F_PRICE, F_FLAG, F_TS, F_CAT, F_LABEL, F_LATE, N_FIELDS };
static const char *fnames[] = {"body", "n", "seq", "price", "flag", "ts", "cat", "label", "late"};
static const QrFieldType ftypes[] = {QR_FT_TEXT, QR_FT_INT, QR_FT_INT, QR_FT_FLOAT, QR_FT_BOOL,
                                     QR_FT_TIMESTAMP, QR_FT_KEYWORD, QR_FT_TEXT, QR_FT_INT};
static const char *cats[] = {"alpha", "beta", "gamma", "delta", "al", "alp", "b%x", "", "zeta_q",
                             "Alpha"};
#define N_CATS 10
static const char *words[] = {"river", "stone", "hydro", "power", "bank", "market", "news",
                              "share"};

typedef struct Env {
    QrDb *db;
    QrTable *t;
    int64_t seq;
} Env;

static void env_open(Env *e, const char *tag)
{
    char *dir = eu_tmpdir_tracked(tag);
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
        if (f == F_LABEL) {
            fd.column = true;
            strcpy(fd.language, "none");
        }
        /* B-trees on some columns (every type), so the btree path is exercised */
        fd.btree = f == F_N || f == F_PRICE || f == F_TS || f == F_CAT || f == F_FLAG;
        cr_assert_geq(schema_add_field(&s, &fd, &err), 0, "%s", err.message);
    }
    cr_assert_eq(qr_table_create(e->db, "t", &s, &e->t, &err), QR_OK, "%s", err.message);
    e->seq = 0;
}

/* One random document; skewed categories, NULLs and missing fields. */
static char *random_doc(uint64_t *rng, int64_t id, int64_t seq, bool with_late)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)id);
    char body[128] = "";
    for (int i = 0, n = 1 + (int)eu_below(rng, 4); i < n; i++) {
        strcat(body, words[eu_below(rng, 8)]);
        strcat(body, " ");
    }
    cJSON_AddStringToObject(o, "body", body);
    int r = (int)eu_below(rng, 10);
    if (r == 0)
        cJSON_AddNullToObject(o, "n");
    else if (r > 1)
        cJSON_AddNumberToObject(o, "n", (double)((int64_t)eu_below(rng, 200) - 100));
    cJSON_AddNumberToObject(o, "seq", (double)seq);
    if (!eu_chance(rng, 0.15))
        cJSON_AddNumberToObject(o, "price", (double)eu_below(rng, 4000) / 8.0 - 50);
    if (!eu_chance(rng, 0.2))
        cJSON_AddBoolToObject(o, "flag", eu_chance(rng, 0.3));
    if (!eu_chance(rng, 0.1)) {
        char ts[40];
        qr_format_timestamp((int64_t)(1735689600 + (int64_t)eu_below(rng, 90 * 86400)) * 1000000,
                            ts, sizeof ts);
        cJSON_AddStringToObject(o, "ts", ts);
    }
    if (!eu_chance(rng, 0.1)) {
        int c = eu_chance(rng, 0.5) ? 0 : (int)eu_below(rng, N_CATS); /* skew to "alpha" */
        cJSON_AddStringToObject(o, "cat", cats[c]);
    }
    if (!eu_chance(rng, 0.3))
        cJSON_AddStringToObject(o, "label", words[eu_below(rng, 8)]);
    if (with_late && !eu_chance(rng, 0.3))
        cJSON_AddNumberToObject(o, "late", (double)eu_below(rng, 10));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static void put_docs(Env *e, uint64_t *rng, int n, int64_t id_space, bool with_late)
{
    QrError err;
    qr_error_clear(&err);
    QrBatch *b;
    cr_assert_eq(qr_batch_begin(e->t, &b, &err), QR_OK, "%s", err.message);
    for (int i = 0; i < n; i++) {
        char *d = random_doc(rng, (int64_t)eu_below(rng, (uint64_t)id_space), e->seq++, with_late);
        cr_assert_eq(qr_batch_put(b, d, strlen(d), NULL, &err), QR_OK, "%s", err.message);
        free(d);
    }
    cr_assert_eq(qr_batch_commit(b, &err), QR_OK, "%s", err.message);
    qr_batch_free(b);
}

/* Several segments with deletes, then a field added and more segments. */
static void build_table(Env *e, uint64_t *rng, int rows_per_seg)
{
    int64_t space = rows_per_seg * 4;
    put_docs(e, rng, rows_per_seg, space, false);
    put_docs(e, rng, rows_per_seg / 3, space, false);
    eu_delete_random(e->t, rng, rows_per_seg / 10, space);
    QrField late;
    schema_field_defaults(&late, "late", QR_FT_INT);
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_table_add_field(e->t, &late, &err), QR_OK, "%s", err.message);
    put_docs(e, rng, rows_per_seg, space, true);
    eu_delete_random(e->t, rng, rows_per_seg / 20, space);
}

/* ---- brute force: three-valued logic over a JSON document ---- */

typedef enum { TV_FALSE, TV_TRUE, TV_UNKNOWN } TV;

/* Exact comparison of an int64 with a double (NaN above everything). */
static int cmp_i_d(int64_t a, double b)
{
    if (isnan(b))
        return -1;
    if (b >= 9223372036854775808.0)
        return -1;
    if (b < -9223372036854775808.0)
        return 1;
    double fl = floor(b);
    int64_t bi = (int64_t)fl;
    if (a < bi)
        return -1;
    if (a > bi)
        return 1;
    return fl < b ? -1 : 0;
}

static int cmp_d_d(double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) - isnan(b);
    return a < b ? -1 : a > b;
}

/* Compare a JSON value of column type ct with an operand.  *ok false when the
 * JSON value is NULL/missing. */
static int cmp_val(const cJSON *j, int ct, const ColVal *v)
{
    switch (ct) {
    case QR_COL_INT64:
    case QR_COL_TIMESTAMP: {
        int64_t x;
        if (ct == QR_COL_TIMESTAMP)
            cr_assert(qr_parse_timestamp(j->valuestring, strlen(j->valuestring), &x));
        else
            x = (int64_t)j->valuedouble;
        if (v->kind == CV_INT)
            return x < v->u.i ? -1 : x > v->u.i;
        return cmp_i_d(x, v->u.f);
    }
    case QR_COL_FLOAT64:
        if (v->kind == CV_INT)
            return -cmp_i_d(v->u.i, j->valuedouble);
        return cmp_d_d(j->valuedouble, v->u.f);
    case QR_COL_BOOL: return (int)cJSON_IsTrue(j) - (int)v->u.b;
    default: {
        size_t n = strlen(j->valuestring), m = v->u.str.n;
        int c = memcmp(j->valuestring, v->u.str.s, n < m ? n : m);
        return c ? (c < 0 ? -1 : 1) : (n < m ? -1 : n > m);
    }
    }
}

static bool like_bf(const char *p, const char *s)
{
    if (!*p)
        return !*s;
    if (*p == '%')
        return like_bf(p + 1, s) || (*s && like_bf(p, s + 1));
    return *s && (*p == '_' || *p == *s) && like_bf(p + 1, s + 1);
}

static TV eval_bf(const QrFilter *f, const cJSON *doc, const QrSchema *sc)
{
    switch (f->kind) {
    case QF_TRUE: return TV_TRUE;
    case QF_FALSE: return TV_FALSE;
    case QF_NOT: {
        TV t = eval_bf(f->kids[0], doc, sc);
        return t == TV_UNKNOWN ? t : t == TV_TRUE ? TV_FALSE : TV_TRUE;
    }
    case QF_AND: {
        TV r = TV_TRUE;
        for (int i = 0; i < f->n_kids; i++) {
            TV t = eval_bf(f->kids[i], doc, sc);
            if (t == TV_FALSE)
                return TV_FALSE;
            if (t == TV_UNKNOWN)
                r = TV_UNKNOWN;
        }
        return r;
    }
    case QF_OR: {
        TV r = TV_FALSE;
        for (int i = 0; i < f->n_kids; i++) {
            TV t = eval_bf(f->kids[i], doc, sc);
            if (t == TV_TRUE)
                return TV_TRUE;
            if (t == TV_UNKNOWN)
                r = TV_UNKNOWN;
        }
        return r;
    }
    default: break;
    }
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(doc, sc->fields[f->field].name);
    bool null = !j || cJSON_IsNull(j);
    if (f->kind == QF_LIKE)
        return null ? TV_UNKNOWN : like_bf(f->pattern, j->valuestring) ? TV_TRUE : TV_FALSE;
    const ColPred *p = &f->pred;
    if (p->op == CP_IS_NULL)
        return null ? TV_TRUE : TV_FALSE;
    if (p->op == CP_IS_NOT_NULL)
        return null ? TV_FALSE : TV_TRUE;
    if (null)
        return TV_UNKNOWN;
    int ct = qr_filter_field_coltype(sc, f->field);
    bool m = false;
    switch (p->op) {
    case CP_EQ: m = cmp_val(j, ct, &p->v) == 0; break;
    case CP_NE: m = cmp_val(j, ct, &p->v) != 0; break;
    case CP_LT: m = cmp_val(j, ct, &p->v) < 0; break;
    case CP_LE: m = cmp_val(j, ct, &p->v) <= 0; break;
    case CP_GT: m = cmp_val(j, ct, &p->v) > 0; break;
    case CP_GE: m = cmp_val(j, ct, &p->v) >= 0; break;
    case CP_BETWEEN: m = cmp_val(j, ct, &p->v) >= 0 && cmp_val(j, ct, &p->hi) <= 0; break;
    case CP_IN:
        for (size_t i = 0; i < p->n_set && !m; i++)
            m = cmp_val(j, ct, &p->set[i]) == 0;
        break;
    case CP_PREFIX:
        m = strlen(j->valuestring) >= p->v.u.str.n &&
            memcmp(j->valuestring, p->v.u.str.s, p->v.u.str.n) == 0;
        break;
    default: cr_assert_fail("op");
    }
    return m ? TV_TRUE : TV_FALSE;
}

/* ---- random predicates ---- */

static ColVal rand_val(uint64_t *rng, int field)
{
    switch (field) {
    case F_N:
        return eu_chance(rng, 0.2) ? col_val_float((double)eu_below(rng, 400) / 2.0 - 100.25)
                                   : col_val_int((int64_t)eu_below(rng, 220) - 110);
    case F_LATE: return col_val_int((int64_t)eu_below(rng, 12) - 1);
    case F_SEQ: return col_val_int((int64_t)eu_below(rng, 3000));
    case F_PRICE:
        return eu_chance(rng, 0.3) ? col_val_int((int64_t)eu_below(rng, 600) - 60)
                                   : col_val_float((double)eu_below(rng, 4200) / 8.0 - 55);
    case F_FLAG: return col_val_bool(eu_chance(rng, 0.5));
    case F_TS:
        return col_val_int((int64_t)(1735689600 + (int64_t)eu_below(rng, 95 * 86400)) * 1000000 -
                           (int64_t)eu_below(rng, 3));
    case F_CAT: {
        const char *c = cats[eu_below(rng, N_CATS)];
        size_t n = strlen(c);
        if (n && eu_chance(rng, 0.2))
            n--; /* a value that may be absent */
        return col_val_str(c, n);
    }
    default: {
        const char *w = words[eu_below(rng, 8)];
        return col_val_str(w, strlen(w));
    }
    }
}

static QrFilter *rand_pred(uint64_t *rng)
{
    static const int fields[] = {F_N, F_SEQ, F_PRICE, F_FLAG, F_TS, F_CAT, F_LABEL, F_LATE};
    int field = fields[eu_below(rng, 8)];
    bool kw = field == F_CAT || field == F_LABEL;
    int r = (int)eu_below(rng, kw ? 13 : 11);
    ColPred p;
    memset(&p, 0, sizeof p);
    ColVal set[6];
    if (r < 6) {
        p.op = (ColPredOp)r;
        p.v = rand_val(rng, field);
    } else if (r == 6) {
        p.op = CP_BETWEEN;
        p.v = rand_val(rng, field);
        p.hi = rand_val(rng, field);
    } else if (r == 7) {
        p.op = CP_IN;
        p.n_set = eu_below(rng, 6);
        for (size_t i = 0; i < p.n_set; i++)
            set[i] = rand_val(rng, field);
        p.set = set;
    } else if (r == 8) {
        p.op = CP_IS_NULL;
    } else if (r == 9) {
        p.op = CP_IS_NOT_NULL;
    } else if (r == 10) {
        p.op = CP_EQ;
        p.v = rand_val(rng, field);
    } else if (r == 11) {
        ColVal v = rand_val(rng, field);
        return qr_filter_like(field, v.u.str.s, eu_below(rng, v.u.str.n + 1)); /* prefix */
    } else {
        static const char *pats[] = {"%a", "a%a", "_l%", "%e_a%", "%", "b\%%", "%t%", "__"};
        const char *pt = pats[eu_below(rng, 8)];
        return qr_filter_like(field, pt, strlen(pt));
    }
    return qr_filter_pred(field, &p);
}

static QrFilter *rand_tree(uint64_t *rng, int depth)
{
    int r = (int)eu_below(rng, depth <= 0 ? 10 : 16);
    if (r < 9)
        return rand_pred(rng);
    if (r == 9)
        return eu_chance(rng, 0.5) ? qr_filter_true() : qr_filter_false();
    if (r < 12)
        return qr_filter_not(rand_tree(rng, depth - 1));
    QrFilter *k[4];
    int n = 1 + (int)eu_below(rng, 3);
    for (int i = 0; i < n; i++)
        k[i] = rand_tree(rng, depth - 1);
    return r < 14 ? qr_filter_and_n(k, n) : qr_filter_or_n(k, n);
}

/* ---- per-segment comparison ---- */

/* Expected ids of a segment: live docs whose stored JSON satisfies f. */
static roaring_bitmap_t *expected_ids(const Snapshot *snap, int si, const QrFilter *f,
                                      const QrSchema *sc, cJSON **docs)
{
    roaring_bitmap_t *bm = roaring_bitmap_create();
    Segment *seg = snap->segs[si];
    for (uint32_t d = 0; d < seg_n_docs(seg); d++) {
        if (snapshot_deleted(snap, si, d))
            continue;
        if (eval_bf(f, docs[d], sc) == TV_TRUE)
            roaring_bitmap_add(bm, d);
    }
    return bm;
}

static cJSON **load_docs(Segment *seg)
{
    uint32_t n = seg_n_docs(seg);
    cJSON **docs = calloc(n + 1, sizeof *docs);
    DocStoreCursor *c = ds_cursor_new(seg_docs(seg));
    for (uint32_t d = 0; d < n; d++) {
        const uint8_t *p;
        size_t len;
        QrError err;
        qr_error_clear(&err);
        cr_assert_eq(ds_get(c, d, &p, &len, &err), QR_OK, "%s", err.message);
        docs[d] = cJSON_ParseWithLength((const char *)p, len);
        cr_assert(docs[d]);
    }
    ds_cursor_free(c);
    return docs;
}

static void free_docs(cJSON **docs, uint32_t n)
{
    for (uint32_t d = 0; d < n; d++)
        cJSON_Delete(docs[d]);
    free(docs);
}

static void assert_same(const roaring_bitmap_t *got, const roaring_bitmap_t *want,
                        const char *what, const QrFilter *f, const QrSchema *sc)
{
    if (roaring_bitmap_equals(got, want))
        return;
    QrBuf b;
    qr_buf_init(&b);
    qr_filter_to_text(f, sc, &b);
    qr_buf_putc(&b, 0);
    cr_assert_fail("%s: %llu ids, want %llu, filter %s", what,
                   (unsigned long long)roaring_bitmap_get_cardinality(got),
                   (unsigned long long)roaring_bitmap_get_cardinality(want), (char *)b.data);
}

static void differential(Env *e, uint64_t *rng, int n_trees)
{
    Snapshot *snap = table_snapshot(e->t->table);
    const QrSchema *sc = qr_table_schema(e->t);
    cr_assert_geq(snap->n_segs, 3);
    cJSON **docs[16];
    for (int i = 0; i < snap->n_segs; i++)
        docs[i] = load_docs(snap->segs[i]);
    QrFilterStats st = {0};
    for (int t = 0; t < n_trees; t++) {
        QrFilter *f = rand_tree(rng, 3);
        cr_assert(f);
        QrError err;
        qr_error_clear(&err);
        cr_assert_eq(qr_filter_check(f, sc, &err), QR_OK, "%s", err.message);
        /* the text form parses back to a tree with the same meaning */
        QrBuf txt;
        qr_buf_init(&txt);
        qr_filter_to_text(f, sc, &txt);
        QrFilter *g = NULL;
        cr_assert_eq(qr_filter_parse(sc, (const char *)txt.data, txt.len, &g, &err), QR_OK,
                     "%s at %lld in %.*s", err.message, (long long)err.offset, (int)txt.len,
                     (char *)txt.data);
        QrFilter *h = qr_filter_clone(f);
        for (int si = 0; si < snap->n_segs; si++) {
            Segment *seg = snap->segs[si];
            roaring_bitmap_t *want = expected_ids(snap, si, f, sc, docs[si]);
            FilterSeg *fs;
            cr_assert_eq(filter_seg_compile(f, seg, &fs, &err), QR_OK, "%s", err.message);
            static const QrAccessPath paths[] = {QR_ACCESS_SCAN, QR_ACCESS_CHECK, QR_ACCESS_BTREE,
                                                 QR_ACCESS_AUTO};
            for (int pi = 0; pi < 4; pi++) {
                roaring_bitmap_t *got = roaring_bitmap_create();
                cr_assert_eq(filter_seg_eval(fs, paths[pi], snap->dels[si], NULL, got, &st, &err),
                             QR_OK, "%s", err.message);
                assert_same(got, want, qr_access_path_name(paths[pi]), f, sc);
                roaring_bitmap_free(got);
            }
            /* candidates: a random subset; result = want ∩ candidates */
            roaring_bitmap_t *cand = roaring_bitmap_create();
            for (uint32_t d = 0; d < seg_n_docs(seg); d++)
                if (eu_chance(rng, 0.1))
                    roaring_bitmap_add(cand, d);
            roaring_bitmap_t *want_c = roaring_bitmap_and(want, cand);
            for (int pi = 0; pi < 4; pi++) {
                roaring_bitmap_t *got = roaring_bitmap_create();
                cr_assert_eq(filter_seg_eval(fs, paths[pi], snap->dels[si], cand, got, &st, &err),
                             QR_OK, "%s", err.message);
                assert_same(got, want_c, "with candidates", f, sc);
                roaring_bitmap_free(got);
            }
            /* row by row agrees too (deletes aside) */
            for (uint32_t d = 0; d < seg_n_docs(seg); d += 7)
                if (!snapshot_deleted(snap, si, d))
                    cr_assert_eq(filter_seg_match(fs, d), roaring_bitmap_contains(want, d));
            filter_seg_free(fs);
            /* the reparsed and the cloned trees */
            const QrFilter *alt[2] = {g, h};
            for (int a = 0; a < 2; a++) {
                cr_assert_eq(filter_seg_compile(alt[a], seg, &fs, &err), QR_OK, "%s", err.message);
                roaring_bitmap_t *got = roaring_bitmap_create();
                cr_assert_eq(filter_seg_eval(fs, QR_ACCESS_AUTO, snap->dels[si], NULL, got, &st,
                                             &err),
                             QR_OK, "%s", err.message);
                assert_same(got, want, a ? "clone" : "reparsed text", f, sc);
                roaring_bitmap_free(got);
                filter_seg_free(fs);
            }
            roaring_bitmap_free(cand);
            roaring_bitmap_free(want_c);
            roaring_bitmap_free(want);
        }
        qr_buf_free(&txt);
        qr_filter_free(f);
        qr_filter_free(g);
        qr_filter_free(h);
    }
    cr_assert_gt(st.candidates_checked, 0);
    cr_assert_gt(st.blocks_scanned + st.blocks_full, 0);
    cr_assert_gt(st.segs_btree, 0, "the btree path was taken");
    cr_assert_gt(st.btree_pages, 0);
    for (int i = 0; i < snap->n_segs; i++)
        free_docs(docs[i], seg_n_docs(snap->segs[i]));
    snapshot_release(snap);
}

Test(filter, random_trees_every_path_equals_brute_force)
{
    Env e;
    env_open(&e, "filter");
    uint64_t rng = 0x5eed;
    build_table(&e, &rng, 3000);
    differential(&e, &rng, 300);
    qr_db_close(e.db);
}

Test(filter, parallel_block_range_scans_agree)
{
    Env e;
    env_open(&e, "filterpar");
    uint64_t rng = 0xfeed;
    put_docs(&e, &rng, 135000, 1 << 30, false); /* 33 blocks: three 16-block chunks */
    QrField late;
    schema_field_defaults(&late, "late", QR_FT_INT);
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_table_add_field(e.t, &late, &err), QR_OK, "%s", err.message);
    put_docs(&e, &rng, 3000, 1 << 30, true);
    put_docs(&e, &rng, 3000, 1 << 30, true);
    filter_set_parallel_min_blocks(1);
    differential(&e, &rng, 25);
    filter_set_parallel_min_blocks(1024);
    qr_db_close(e.db);
}

Test(filter, random_trees_after_merge)
{
    Env e;
    env_open(&e, "filterm");
    uint64_t rng = 0xbeef;
    build_table(&e, &rng, 2500);
    QrError err;
    qr_error_clear(&err);
    put_docs(&e, &rng, 500, 10000, true); /* keep >= 3 segments after a merge */
    cr_assert_eq(qr_merge(e.t, &err), QR_OK, "%s", err.message);
    put_docs(&e, &rng, 700, 10000, true);
    put_docs(&e, &rng, 300, 10000, true);
    eu_delete_random(e.t, &rng, 200, 10000);
    differential(&e, &rng, 150);
    qr_db_close(e.db);
}

/* ---- zone maps ---- */

Test(filter, zone_maps_skip_on_sorted_not_on_random)
{
    Env e;
    env_open(&e, "filterz");
    uint64_t rng = 7;
    QrError err;
    qr_error_clear(&err);
    put_docs(&e, &rng, 40000, 1 << 30, false); /* seq is sorted, n is random */
    Snapshot *snap = table_snapshot(e.t->table);
    const QrSchema *sc = qr_table_schema(e.t);
    cr_assert_eq(snap->n_segs, 1);
    struct {
        const char *text;
        bool expect_skips;
    } cases[] = {{"seq BETWEEN 20000 AND 20100", true}, {"n BETWEEN 3 AND 4", false}};
    for (int c = 0; c < 2; c++) {
        QrFilter *f;
        cr_assert_eq(qr_filter_parse(sc, cases[c].text, strlen(cases[c].text), &f, &err), QR_OK);
        FilterSeg *fs;
        cr_assert_eq(filter_seg_compile(f, snap->segs[0], &fs, &err), QR_OK);
        QrFilterStats st = {0};
        roaring_bitmap_t *got = roaring_bitmap_create();
        cr_assert_eq(filter_seg_eval(fs, QR_ACCESS_SCAN, snap->dels[0], NULL, got, &st, &err),
                     QR_OK);
        cr_assert_eq(st.blocks_total, 10); /* 40,000 rows / 4096 */
        if (cases[c].expect_skips) {
            cr_assert_eq(st.blocks_skipped, 9, "sorted: one block of ten read");
            cr_assert_eq(roaring_bitmap_get_cardinality(got), 101);
            cr_assert_eq(filter_seg_choose(fs, UINT64_MAX), QR_ACCESS_SCAN);
        } else {
            cr_assert_eq(st.blocks_skipped, 0, "random: every block read");
            cr_assert_eq(st.blocks_scanned, 10);
        }
        /* with few candidates, checking them one by one is the cheaper path */
        cr_assert_eq(filter_seg_choose(fs, 5), QR_ACCESS_CHECK);
        roaring_bitmap_free(got);
        filter_seg_free(fs);
        qr_filter_free(f);
    }
    snapshot_release(snap);
    qr_db_close(e.db);
}

/* ---- parser errors ---- */

Test(filter, parse_errors_carry_positions)
{
    Env e;
    env_open(&e, "filterp");
    const QrSchema *sc = qr_table_schema(e.t);
    struct {
        const char *text;
        QrCode code;
        int64_t offset;
    } cases[] = {
        {"cat = 'x' AND", QR_ESYNTAX, 13},
        {"cat = 'x' AND nope = 3", QR_ENOTFOUND, 14},
        {"n >= 'abc'", QR_ETYPE, 5},
        {"ts > 'yesterday'", QR_ETYPE, 5},
        {"body = 'x'", QR_ETYPE, 0},
        {"cat = 'unterminated", QR_ESYNTAX, 6},
        {"(n = 1", QR_ESYNTAX, 6},
        {"n = 1)", QR_ESYNTAX, 5},
        {"n IN (1, 2", QR_ESYNTAX, 10},
        {"n BETWEEN 1 3", QR_ESYNTAX, 12},
        {"n LIKE 'a%'", QR_ETYPE, 2},
        {"cat = 5", QR_ETYPE, 6},
        {"n = NULL", QR_ESYNTAX, 4},
        {"   ", QR_ESYNTAX, 0},
        {"n ~ 3", QR_ESYNTAX, 2},
        {"flag IS MAYBE", QR_ESYNTAX, 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        QrError err;
        qr_error_clear(&err);
        QrFilter *f = NULL;
        int rc = qr_filter_parse(sc, cases[i].text, strlen(cases[i].text), &f, &err);
        cr_assert_eq(rc, cases[i].code, "%s: got %d (%s)", cases[i].text, rc, err.message);
        cr_assert_null(f);
        cr_assert_eq(err.offset, cases[i].offset, "%s: offset %lld (%s)", cases[i].text,
                     (long long)err.offset, err.message);
    }
    /* accepted forms */
    const char *ok[] = {"cat = 'NABIL' AND ts >= '2025-01-01'", "NOT (n <> 3 OR n IS NULL)",
                        "flag", "NOT flag AND \"cat\" NOT IN ('a', 'b')",
                        "n NOT BETWEEN -5 AND 5.5", "label LIKE 'riv%' OR cat LIKE '%a_'",
                        "TRUE", "ts < 1735689600000000 and price > 1e2", "cat = 'it''s'",
                        "flag = 'true' AND n = '3'"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        QrError err;
        qr_error_clear(&err);
        QrFilter *f = NULL;
        cr_assert_eq(qr_filter_parse(sc, ok[i], strlen(ok[i]), &f, &err), QR_OK, "%s: %s", ok[i],
                     err.message);
        qr_filter_free(f);
    }
    qr_db_close(e.db);
}

/* ---- search with filters and sorts ---- */

/* A live document of the snapshot, by global doc id. */
typedef struct LiveDoc {
    int64_t id;
    cJSON *doc; /* borrows the loaded docs */
} LiveDoc;

typedef struct Corpus {
    Snapshot *snap;
    cJSON **docs[16];
    LiveDoc *live;
    int n_live;
} Corpus;

static void corpus_load(Corpus *c, Env *e)
{
    c->snap = table_snapshot(e->t->table);
    c->live = calloc(c->snap->n_live + 1, sizeof *c->live);
    c->n_live = 0;
    for (int i = 0; i < c->snap->n_segs; i++) {
        c->docs[i] = load_docs(c->snap->segs[i]);
        for (uint32_t d = 0; d < seg_n_docs(c->snap->segs[i]); d++)
            if (!snapshot_deleted(c->snap, i, d)) {
                cJSON *id = cJSON_GetObjectItemCaseSensitive(c->docs[i][d], "id");
                c->live[c->n_live++] = (LiveDoc){(int64_t)id->valuedouble, c->docs[i][d]};
            }
    }
    cr_assert_eq((uint64_t)c->n_live, c->snap->n_live);
}

static void corpus_free(Corpus *c)
{
    for (int i = 0; i < c->snap->n_segs; i++)
        free_docs(c->docs[i], seg_n_docs(c->snap->segs[i]));
    free(c->live);
    snapshot_release(c->snap);
}

/* Does the doc's body or label hold word w (the searched text fields)? */
static bool has_word(const cJSON *doc, const char *w)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(doc, "body");
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(doc, "label");
    char pat[32];
    snprintf(pat, sizeof pat, "%s ", w);
    if (cJSON_IsString(b) && (strncmp(b->valuestring, pat, strlen(pat)) == 0 ||
                              (snprintf(pat, sizeof pat, " %s ", w), strstr(b->valuestring, pat))))
        return true;
    return cJSON_IsString(l) && strcmp(l->valuestring, w) == 0;
}

static QrSearchRes *search(QrTable *t, const char *q, const char *filter, const char *sort,
                           int limit, int offset, const char *after, int path, bool count_only)
{
    QrSearchReq r;
    qr_search_req_init(&r);
    r.q = q;
    r.q_len = strlen(q);
    r.filter = filter;
    r.sort = sort;
    r.limit = limit;
    r.offset = offset;
    r.search_after = after;
    r.access_path = path;
    r.count_only = count_only;
    QrSearchRes *res = NULL;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_search(t, &r, &res, &err), QR_OK, "q=%s filter=%s sort=%s: %s", q,
                 filter ? filter : "", sort ? sort : "", err.message);
    return res;
}

static int64_t hit_id(const QrHit *h) { return strtoll(h->id_json, NULL, 10); }

Test(filter, search_counts_and_ranking_with_filters)
{
    Env e;
    env_open(&e, "filters");
    uint64_t rng = 99;
    build_table(&e, &rng, 2000);
    Corpus c;
    corpus_load(&c, &e);
    const QrSchema *sc = qr_table_schema(e.t);
    const char *queries[] = {"", "river", "hydro OR power", "+river +stone", "*"};
    /* ranges on one B-tree column, counted from the tree alone, then random trees */
    const char *fixed[] = {"n >= -20 AND n < 30", "ts >= '2025-01-10' AND ts < '2025-02-01'",
                           "n > 5 AND n < 3", "n BETWEEN 1 AND 50 AND n <= 20 AND n >= 20",
                           "n = 7", "n > 9223372036854775807", "price >= 10 AND price < 20"};
    int n_fixed = (int)(sizeof fixed / sizeof fixed[0]);
    for (int round = 0; round < 40 + n_fixed; round++) {
        QrFilter *f = NULL;
        if (round < n_fixed) {
            QrError perr;
            qr_error_clear(&perr);
            cr_assert_eq(qr_filter_parse(sc, fixed[round], strlen(fixed[round]), &f, &perr), QR_OK,
                         "%s", perr.message);
        } else {
            f = rand_tree(&rng, 2);
        }
        QrBuf txt;
        qr_buf_init(&txt);
        qr_filter_to_text(f, sc, &txt);
        qr_buf_putc(&txt, 0);
        const char *ft = (const char *)txt.data;
        for (int qi = 0; qi < 5; qi++) {
            const char *q = queries[qi];
            /* brute force: text match and filter */
            bool *want = calloc((size_t)c.n_live + 1, 1);
            uint64_t n_want = 0;
            for (int d = 0; d < c.n_live; d++) {
                const cJSON *doc = c.live[d].doc;
                bool tm = qi == 0 || qi == 4 || (qi == 1 && has_word(doc, "river")) ||
                          (qi == 2 && (has_word(doc, "hydro") || has_word(doc, "power"))) ||
                          (qi == 3 && has_word(doc, "river") && has_word(doc, "stone"));
                want[d] = tm && eval_bf(f, doc, sc) == TV_TRUE;
                n_want += want[d];
            }
            for (int path = 0; path <= QR_ACCESS_BTREE; path++) {
                QrSearchRes *r = search(e.t, q, ft, NULL, 0, 0, NULL, path, true);
                cr_assert_eq(r->total, n_want, "count q=%s filter=%s path=%d: %llu want %llu", q, ft,
                             path, (unsigned long long)r->total, (unsigned long long)n_want);
                qr_search_res_free(r);
            }
            /* ranked with the filter = ranked without it, restricted to the filter */
            if (qi == 1 || qi == 2) {
                QrSearchRes *all = search(e.t, q, NULL, NULL, 100000, 0, NULL, 0, false);
                QrSearchRes *r = search(e.t, q, ft, NULL, 15, 0, NULL, 0, false);
                cr_assert_eq(r->total, n_want);
                int j = 0;
                for (int h = 0; h < all->n_hits && j < r->n_hits; h++) {
                    int64_t id = hit_id(&all->hits[h]);
                    bool in = false;
                    for (int d = 0; d < c.n_live; d++)
                        if (c.live[d].id == id) {
                            in = want[d];
                            break;
                        }
                    if (!in)
                        continue;
                    cr_assert_eq(hit_id(&r->hits[j]), id, "ranked hit %d q=%s filter=%s", j, q, ft);
                    cr_assert_eq(r->hits[j].score, all->hits[h].score);
                    j++;
                }
                cr_assert_eq(j, r->n_hits);
                cr_assert_eq(r->n_hits, n_want < 15 ? (int)n_want : 15);
                qr_search_res_free(r);
                qr_search_res_free(all);
            }
            free(want);
        }
        qr_buf_free(&txt);
        qr_filter_free(f);
    }
    corpus_free(&c);
    qr_db_close(e.db);
}

/* Brute-force order of the sort "price:desc,n,_id": NULL price first (desc),
 * NULL n last (asc), then id. */
static const Corpus *sort_corpus;
static int cmp_price_n(const void *x, const void *y)
{
    const LiveDoc *a = x, *b = y;
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(a->doc, "price");
    const cJSON *pb = cJSON_GetObjectItemCaseSensitive(b->doc, "price");
    bool na = !cJSON_IsNumber(pa), nb = !cJSON_IsNumber(pb);
    if (na != nb)
        return na ? -1 : 1;
    if (!na && pa->valuedouble != pb->valuedouble)
        return pa->valuedouble > pb->valuedouble ? -1 : 1;
    const cJSON *ia = cJSON_GetObjectItemCaseSensitive(a->doc, "n");
    const cJSON *ib = cJSON_GetObjectItemCaseSensitive(b->doc, "n");
    na = !cJSON_IsNumber(ia);
    nb = !cJSON_IsNumber(ib);
    if (na != nb)
        return na ? 1 : -1;
    if (!na && ia->valuedouble != ib->valuedouble)
        return ia->valuedouble < ib->valuedouble ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

Test(filter, sort_by_columns_and_search_after_pages)
{
    Env e;
    env_open(&e, "filtersort");
    uint64_t rng = 1234;
    build_table(&e, &rng, 1500);
    Corpus c;
    corpus_load(&c, &e);
    sort_corpus = &c;
    const QrSchema *sc = qr_table_schema(e.t);
    const char *filters[] = {"cat IN ('alpha', 'beta') OR n > 50", "TRUE", "flag"};
    const char *queries[] = {"", "river OR bank"};
    for (int fi = 0; fi < 3; fi++) {
        for (int qi = 0; qi < 2; qi++) {
            QrFilter *f;
            QrError err;
            qr_error_clear(&err);
            cr_assert_eq(qr_filter_parse(sc, filters[fi], strlen(filters[fi]), &f, &err), QR_OK);
            LiveDoc *want = calloc((size_t)c.n_live + 1, sizeof *want);
            int nw = 0;
            for (int d = 0; d < c.n_live; d++) {
                bool tm = qi == 0 || has_word(c.live[d].doc, "river") || has_word(c.live[d].doc, "bank");
                if (tm && eval_bf(f, c.live[d].doc, sc) == TV_TRUE)
                    want[nw++] = c.live[d];
            }
            qsort(want, (size_t)nw, sizeof *want, cmp_price_n);
            /* one page with an offset */
            QrSearchRes *r = search(e.t, queries[qi], filters[fi], "price:desc, n:asc", 25, 5, NULL, 0,
                                    false);
            cr_assert_eq(r->total, (uint64_t)nw);
            for (int h = 0; h < r->n_hits; h++)
                cr_assert_eq(hit_id(&r->hits[h]), want[5 + h].id, "hit %d", h);
            cr_assert_eq(r->n_hits, nw - 5 < 25 ? (nw > 5 ? nw - 5 : 0) : 25);
            qr_search_res_free(r);
            /* every page through search_after */
            char *after = NULL;
            int seen = 0;
            for (;;) {
                r = search(e.t, queries[qi], filters[fi], "price:desc,n", 37, 0, after, 0, false);
                free(after);
                after = NULL;
                cr_assert_eq(r->total, (uint64_t)nw);
                for (int h = 0; h < r->n_hits; h++) {
                    cr_assert_lt(seen, nw);
                    cr_assert_eq(hit_id(&r->hits[h]), want[seen].id, "page hit %d", seen);
                    cr_assert_not_null(r->hits[h].sort_json);
                    seen++;
                }
                if (r->n_hits)
                    after = strdup(r->hits[r->n_hits - 1].sort_json);
                int n = r->n_hits;
                qr_search_res_free(r);
                if (n == 0)
                    break;
            }
            cr_assert_eq(seen, nw);
            free(want);
            qr_filter_free(f);
        }
    }
    /* score order with a cursor pages through the ranked list */
    QrSearchRes *all = search(e.t, "river OR bank", "n > 0", "_score", 100000, 0, NULL, 0, false);
    QrSearchRes *plain = search(e.t, "river OR bank", "n > 0", NULL, 100000, 0, NULL, 0, false);
    cr_assert_eq(all->n_hits, plain->n_hits);
    for (int h = 0; h < all->n_hits; h++)
        cr_assert_eq(all->hits[h].score, plain->hits[h].score);
    char *after = NULL;
    int seen = 0;
    for (;;) {
        QrSearchRes *r = search(e.t, "river OR bank", "n > 0", "_score", 50, 0, after, 0, false);
        free(after);
        after = NULL;
        for (int h = 0; h < r->n_hits; h++, seen++)
            cr_assert_str_eq(r->hits[h].id_json, all->hits[seen].id_json);
        int n = r->n_hits;
        if (n)
            after = strdup(r->hits[n - 1].sort_json);
        qr_search_res_free(r);
        if (!n)
            break;
    }
    cr_assert_eq(seen, all->n_hits);
    qr_search_res_free(all);
    qr_search_res_free(plain);
    corpus_free(&c);
    qr_db_close(e.db);
}

Test(filter, facets_match_brute_force)
{
    Env e;
    env_open(&e, "filterf");
    uint64_t rng = 4321;
    build_table(&e, &rng, 1500);
    Corpus c;
    corpus_load(&c, &e);
    QrFacetReq fr[3] = {{.kind = QR_FACET_TERMS, .field = "cat", .size = 3},
                        {.kind = QR_FACET_HISTOGRAM, .field = "price", .interval = 100},
                        {.kind = QR_FACET_STATS, .field = "n"}};
    QrSearchReq r;
    qr_search_req_init(&r);
    r.q = "river";
    r.q_len = 5;
    r.filter = "seq < 3000";
    r.facets = fr;
    r.n_facets = 3;
    QrSearchRes *res;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_search(e.t, &r, &res, &err), QR_OK, "%s", err.message);
    cr_assert_eq(res->n_facets, 3);
    /* brute force */
    uint64_t cat_count[N_CATS] = {0}, cat_missing = 0, hist[64] = {0}, price_missing = 0;
    uint64_t n_count = 0, n_missing = 0, total = 0;
    double n_sum = 0, n_min = 1e300, n_max = -1e300;
    for (int d = 0; d < c.n_live; d++) {
        const cJSON *doc = c.live[d].doc;
        if (!has_word(doc, "river") ||
            cJSON_GetObjectItemCaseSensitive(doc, "seq")->valuedouble >= 3000)
            continue;
        total++;
        const cJSON *cat = cJSON_GetObjectItemCaseSensitive(doc, "cat");
        if (cJSON_IsString(cat)) {
            for (int k = 0; k < N_CATS; k++)
                if (!strcmp(cats[k], cat->valuestring))
                    cat_count[k]++;
        } else {
            cat_missing++;
        }
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(doc, "price");
        if (cJSON_IsNumber(p))
            hist[(int)floor(p->valuedouble / 100) + 1]++;
        else
            price_missing++;
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(doc, "n");
        if (cJSON_IsNumber(n)) {
            n_count++;
            n_sum += n->valuedouble;
            n_min = fmin(n_min, n->valuedouble);
            n_max = fmax(n_max, n->valuedouble);
        } else {
            n_missing++;
        }
    }
    cr_assert_eq(res->total, total);
    const QrFacetRes *ft = &res->facets[0];
    cr_assert_eq(ft->missing, cat_missing);
    cr_assert_eq(ft->n_buckets, 3);
    uint64_t shown = 0;
    for (int b = 0; b < ft->n_buckets; b++) {
        int k;
        for (k = 0; k < N_CATS; k++) {
            char q[32];
            snprintf(q, sizeof q, "\"%s\"", cats[k]);
            if (!strcmp(q, ft->buckets[b].key_json))
                break;
        }
        cr_assert_lt(k, N_CATS, "%s", ft->buckets[b].key_json);
        cr_assert_eq(ft->buckets[b].count, cat_count[k]);
        for (int o = 0; o < N_CATS; o++) /* nothing unshown is more frequent */
            if (o != k && cat_count[o] > cat_count[k]) {
                bool listed = false;
                for (int b2 = 0; b2 < b; b2++)
                    listed |= strstr(ft->buckets[b2].key_json, cats[o]) &&
                              strlen(ft->buckets[b2].key_json) == strlen(cats[o]) + 2;
                cr_assert(listed, "%s more frequent than %s", cats[o], cats[k]);
            }
        shown += ft->buckets[b].count;
    }
    cr_assert_eq(ft->other + shown + ft->missing, total);
    const QrFacetRes *fh = &res->facets[1];
    cr_assert_eq(fh->missing, price_missing);
    int nb = 0;
    for (int k = 0; k < 64; k++)
        if (hist[k]) {
            cr_assert_lt(nb, fh->n_buckets);
            cr_assert_eq(strtod(fh->buckets[nb].key_json, NULL), (k - 1) * 100.0);
            cr_assert_eq(fh->buckets[nb].count, hist[k]);
            nb++;
        }
    cr_assert_eq(nb, fh->n_buckets);
    const QrFacetRes *fs = &res->facets[2];
    cr_assert_eq(fs->count, n_count);
    cr_assert_eq(fs->missing, n_missing);
    cr_assert_eq(fs->sum, n_sum);
    cr_assert_eq(fs->min, n_min);
    cr_assert_eq(fs->max, n_max);
    qr_search_res_free(res);
    /* errors */
    QrFacetReq bad = {.kind = QR_FACET_STATS, .field = "cat"};
    r.facets = &bad;
    r.n_facets = 1;
    qr_error_clear(&err);
    cr_assert_eq(qr_search(e.t, &r, &res, &err), QR_ETYPE);
    r.n_facets = 0;
    r.filter = "seq <";
    qr_error_clear(&err);
    cr_assert_eq(qr_search(e.t, &r, &res, &err), QR_ESYNTAX);
    cr_assert_eq(err.offset, 5);
    r.filter = NULL;
    r.sort = "body:desc";
    qr_error_clear(&err);
    cr_assert_eq(qr_search(e.t, &r, &res, &err), QR_ETYPE);
    corpus_free(&c);
    qr_db_close(e.db);
}

/* Random token soup and random bytes: the parser answers OK or an error with
 * an offset inside the text, never crashes (run under ASan too); what it
 * accepts prints back to text that parses again. */
Test(filter, parser_survives_random_input)
{
    Env e;
    env_open(&e, "filterfz");
    const QrSchema *sc = qr_table_schema(e.t);
    static const char *toks[] = {"n", "cat", "ts", "flag", "price", "label", "body", "nope",
                                 "\"cat\"", "=", "!=", "<>", "<", "<=", ">", ">=", "AND", "OR",
                                 "NOT", "(", ")", ",", "IN", "BETWEEN", "IS", "NULL", "LIKE",
                                 "TRUE", "false", "1", "-2.5", "1e400", "'a'", "'2025-01-01'",
                                 "'it''s'", "'%a_'", "'", "\"", "99999999999999999999", "."};
    uint64_t rng = 42;
    int accepted = 0;
    for (int i = 0; i < 20000; i++) {
        char buf[256];
        size_t n = 0;
        int k = 1 + (int)eu_below(&rng, 12);
        for (int j = 0; j < k; j++) {
            if (eu_chance(&rng, 0.05)) {
                buf[n++] = (char)eu_below(&rng, 256);
            } else {
                const char *t = toks[eu_below(&rng, sizeof toks / sizeof toks[0])];
                size_t tl = strlen(t);
                if (n + tl + 1 >= sizeof buf)
                    break;
                memcpy(buf + n, t, tl);
                n += tl;
                buf[n++] = ' ';
            }
        }
        QrError err;
        qr_error_clear(&err);
        QrFilter *f = NULL;
        int rc = qr_filter_parse(sc, buf, n, &f, &err);
        if (rc != QR_OK) {
            cr_assert_null(f);
            cr_assert(err.offset >= -1 && err.offset <= (int64_t)n, "offset %lld of %zu",
                      (long long)err.offset, n);
            continue;
        }
        accepted++;
        QrBuf txt;
        qr_buf_init(&txt);
        qr_filter_to_text(f, sc, &txt);
        QrFilter *g = NULL;
        cr_assert_eq(qr_filter_parse(sc, (const char *)txt.data, txt.len, &g, &err), QR_OK,
                     "%.*s -> %.*s: %s", (int)n, buf, (int)txt.len, (char *)txt.data, err.message);
        qr_filter_free(g);
        qr_buf_free(&txt);
        qr_filter_free(f);
    }
    cr_assert_gt(accepted, 100);
    qr_db_close(e.db);
}
