/*
 * test_segment.c — segments built from random documents (segb_*), read back
 * (seg_open), merged (seg_merge) and damaged.
 *
 *   - Round trip: the term dictionary, postings (docs, freqs, positions),
 *     norms and field statistics of a built segment equal a brute-force
 *     re-analysis of its documents (engine_util.c); stored documents, primary
 *     keys, builder deletes and every typed column read back as written.
 *   - Merge: seg_merge of several segments with deletes equals, section by
 *     section, a segment built directly from the surviving documents; the
 *     remap arrays say where every doc went; a source written under an older
 *     schema (fewer fields) merges as if its docs lacked the new fields.
 *   - Damage: every flipped byte and every truncation of a segment file is
 *     reported as QR_ECORRUPT by seg_open or seg_verify, and reading or
 *     merging a damaged segment that opened never crashes (ASan build).
 */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_util.h"
#include "index/seg_int.h"
#include "store/sfile.h"
#include "store/util.h"

#define N_WORDS 300

static char **words;
static EuZipf zipf;
static char *dir;

static void setup(void)
{
    qr_log_set_level(QR_LOG_ERROR);
    words = eu_words(N_WORDS, 42);
    eu_zipf_init(&zipf, N_WORDS, 1.05);
    dir = eu_tmpdir("seg");
}

static void teardown(void)
{
    eu_rmtree(dir);
    free(dir);
    eu_words_free(words, N_WORDS);
    eu_zipf_free(&zipf);
}

TestSuite(segment, .init = setup, .fini = teardown);

static char *seg_path_of(const char *name)
{
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/%s.qseg", dir, name);
    return p;
}

/* Random docs with keys key_base .. key_base+n-1 (ints and strings mixed);
 * about 15% copy an earlier doc's text (ties). */
static char **random_docs(uint64_t *rng, int n, int key_base)
{
    char **v = calloc((size_t)n, sizeof *v);
    for (int i = 0; i < n; i++) {
        char id[64];
        if ((key_base + i) % 3 == 0)
            snprintf(id, sizeof id, "\"k%d\"", key_base + i);
        else
            snprintf(id, sizeof id, "%d", key_base + i);
        const char *dup = i > 0 && eu_chance(rng, 0.15) ? v[eu_below(rng, (uint64_t)i)] : NULL;
        v[i] = eu_random_doc(rng, words, &zipf, id, dup);
    }
    return v;
}

static void free_docs(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Build a segment of docs[0..n) at path; returns the builder's deletes. */
static roaring_bitmap_t *build(const QrSchema *sc, char *const *docs, int n, const char *path,
                               uint64_t min_lsn, uint64_t max_lsn)
{
    SegBuilder *b;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(segb_new(sc, &b, &e), QR_OK, "%s", e.message);
    for (int i = 0; i < n; i++) {
        cJSON *r = cJSON_Parse(docs[i]);
        cr_assert_not_null(r);
        uint32_t d;
        cr_assert_eq(segb_add(b, docs[i], strlen(docs[i]), r, &d, &e), QR_OK, "doc %d: %s", i,
                     e.message);
        cr_assert_eq(d, (uint32_t)i);
        cJSON_Delete(r);
    }
    segb_set_lsn_range(b, min_lsn, max_lsn);
    roaring_bitmap_t *del = NULL;
    cr_assert_eq(segb_finish(b, path, false, &del, &e), QR_OK, "%s", e.message);
    segb_free(b);
    return del;
}

static Segment *open_seg(const char *path)
{
    Segment *s;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(seg_open(path, 1, &s, &e), QR_OK, "seg_open %s: %s", path, e.message);
    cr_assert_eq(seg_verify(s, &e), QR_OK, "seg_verify %s: %s", path, e.message);
    return s;
}

/* The value a doc gives a column field, as the builder types it. */
static void check_column_row(const Column *c, uint32_t row, const QrField *f, const cJSON *root,
                             const char *what)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, f->name);
    if (f->type == QR_FT_TEXT && cJSON_IsArray(v))
        v = v->child && cJSON_IsString(v->child) ? v->child : NULL;
    bool null = !v || cJSON_IsNull(v);
    switch (f->type) {
    case QR_FT_INT: {
        int64_t x;
        bool has = col_get_int(c, row, &x);
        cr_assert_eq(has, !null, "%s: row %u of %s null-ness", what, row, f->name);
        if (has)
            cr_assert_eq(x, (int64_t)v->valuedouble, "%s: row %u of %s", what, row, f->name);
        break;
    }
    case QR_FT_TIMESTAMP: {
        int64_t x, want;
        bool has = col_get_int(c, row, &x);
        cr_assert_eq(has, !null, "%s: row %u of %s null-ness", what, row, f->name);
        if (has) {
            cr_assert(qr_parse_timestamp(v->valuestring, strlen(v->valuestring), &want));
            cr_assert_eq(x, want, "%s: row %u of %s", what, row, f->name);
        }
        break;
    }
    case QR_FT_FLOAT: {
        double x;
        bool has = col_get_float(c, row, &x);
        cr_assert_eq(has, !null, "%s: row %u of %s null-ness", what, row, f->name);
        if (has)
            cr_assert(x == v->valuedouble, "%s: row %u of %s: %.17g want %.17g", what, row,
                      f->name, x, v->valuedouble);
        break;
    }
    case QR_FT_BOOL: {
        bool x;
        bool has = col_get_bool(c, row, &x);
        cr_assert_eq(has, !null, "%s: row %u of %s null-ness", what, row, f->name);
        if (has)
            cr_assert_eq(x, cJSON_IsTrue(v), "%s: row %u of %s", what, row, f->name);
        break;
    }
    default: {
        const char *s;
        size_t n;
        bool has = col_get_str(c, row, &s, &n);
        cr_assert_eq(has, !null, "%s: row %u of %s null-ness", what, row, f->name);
        if (has)
            cr_assert(n == strlen(v->valuestring) && !memcmp(s, v->valuestring, n),
                      "%s: row %u of %s: \"%.*s\" want \"%s\"", what, row, f->name, (int)n, s,
                      v->valuestring);
        break;
    }
    }
}

/* Stored docs, keys and columns of seg are docs[0..n) in order. */
static void check_docs_and_columns(const Segment *seg, const QrSchema *sc, char *const *docs,
                                   int n, const char *what)
{
    cr_assert_eq(seg_n_docs(seg), (uint32_t)n, "%s: %u docs, want %d", what, seg_n_docs(seg), n);
    DocStoreCursor *c = ds_cursor_new(seg_docs(seg));
    for (int i = 0; i < n; i++) {
        const uint8_t *d;
        size_t dl;
        cr_assert_eq(ds_get(c, (uint32_t)i, &d, &dl, NULL), QR_OK);
        cr_assert(dl == strlen(docs[i]) && !memcmp(d, docs[i], dl), "%s: stored doc %d", what,
                  i);
        uint8_t key[PK_KEY_MAX];
        size_t kl = eu_doc_key(docs[i], key);
        const uint8_t *k;
        size_t gotl;
        cr_assert(seg_pk(seg, (uint32_t)i, &k, &gotl));
        cr_assert(gotl == kl && !memcmp(k, key, kl), "%s: key of doc %d", what, i);
        cJSON *root = cJSON_Parse(docs[i]);
        for (int f = 0; f < sc->n_fields; f++) {
            const QrField *fd = &sc->fields[f];
            bool has_col = schema_column_type(fd) >= 0;
            const Column *col = seg_column(seg, f);
            cr_assert_eq(col != NULL, has_col, "%s: column of %s present", what, fd->name);
            if (col)
                check_column_row(col, (uint32_t)i, fd, root, what);
        }
        cJSON_Delete(root);
    }
    ds_cursor_free(c);
}

Test(segment, build_and_read_back)
{
    QrSchema sc;
    eu_random_schema(&sc, true);
    for (uint64_t seed = 1; seed <= 6; seed++) {
        sc.all_field = seed % 2 == 0; /* with and without the combined "_all" field */
        uint64_t rng = seed * 7919;
        int n = seed == 1 ? 1 : seed == 2 ? 5 : 150 + (int)eu_below(&rng, 250);
        char **docs = random_docs(&rng, n, (int)seed * 1000);
        /* re-put some keys (the builder keeps the newest) and delete others */
        int n_all = n + n / 5;
        char **all = calloc((size_t)n_all, sizeof *all);
        for (int i = 0; i < n; i++)
            all[i] = strdup(docs[i]);
        roaring_bitmap_t *want_del = roaring_bitmap_create();
        for (int i = n; i < n_all; i++) {
            int j = (int)eu_below(&rng, (uint64_t)n);
            char id[64];
            if (((int)seed * 1000 + j) % 3 == 0)
                snprintf(id, sizeof id, "\"k%d\"", (int)seed * 1000 + j);
            else
                snprintf(id, sizeof id, "%d", (int)seed * 1000 + j);
            all[i] = eu_random_doc(&rng, words, &zipf, id, NULL);
        }
        /* expected deletes: every doc whose key appears again later */
        for (int i = 0; i < n_all; i++) {
            uint8_t ki[PK_KEY_MAX], kj[PK_KEY_MAX];
            size_t li = eu_doc_key(all[i], ki);
            for (int j = i + 1; j < n_all; j++) {
                size_t lj = eu_doc_key(all[j], kj);
                if (li == lj && !memcmp(ki, kj, li)) {
                    roaring_bitmap_add(want_del, (uint32_t)i);
                    break;
                }
            }
        }
        SegBuilder *b;
        QrError e;
        qr_error_clear(&e);
        cr_assert_eq(segb_new(&sc, &b, &e), QR_OK);
        for (int i = 0; i < n_all; i++) {
            cJSON *r = cJSON_Parse(all[i]);
            uint32_t d;
            cr_assert_eq(segb_add(b, all[i], strlen(all[i]), r, &d, &e), QR_OK, "%s", e.message);
            cJSON_Delete(r);
        }
        /* explicit deletes by key: live ones report true, repeated ones false */
        for (int k = 0; k < 3 && n_all > 0; k++) {
            int i = (int)eu_below(&rng, (uint64_t)n_all);
            uint8_t key[PK_KEY_MAX];
            size_t kl = eu_doc_key(all[i], key);
            int last = -1;
            for (int j = 0; j < n_all; j++) {
                uint8_t kj[PK_KEY_MAX];
                size_t lj = eu_doc_key(all[j], kj);
                if (lj == kl && !memcmp(kj, key, kl))
                    last = j;
            }
            bool live = !roaring_bitmap_contains(want_del, (uint32_t)last);
            cr_assert_eq(segb_delete_key(b, key, kl), live, "seed %lu: delete of doc %d",
                         (unsigned long)seed, i);
            roaring_bitmap_add(want_del, (uint32_t)last);
        }
        uint8_t nokey[] = {'s', 'n', 'o', 'p', 'e'};
        cr_assert(!segb_delete_key(b, nokey, sizeof nokey));
        cr_assert_eq(segb_n_docs(b), (uint32_t)n_all);
        cr_assert_eq(segb_n_live(b), (uint32_t)n_all - roaring_bitmap_get_cardinality(want_del));
        segb_set_lsn_range(b, 17, 4242);
        char *path = seg_path_of("rt");
        roaring_bitmap_t *del = NULL;
        cr_assert_eq(segb_finish(b, path, true, &del, &e), QR_OK, "%s", e.message);
        segb_free(b);
        cr_assert(roaring_bitmap_equals(del, want_del), "seed %lu: builder deletes differ",
                  (unsigned long)seed);
        Segment *s = open_seg(path);
        uint64_t lo, hi;
        seg_lsn_range(s, &lo, &hi);
        cr_assert(lo == 17 && hi == 4242);
        cr_assert_gt(seg_file_bytes(s), 0);
        check_docs_and_columns(s, &sc, all, n_all, "round trip");
        eu_assert_segment_consistent(s, &sc, "round trip");
        /* term lookups and a miss */
        cr_assert(!seg_term(s, 0, "zzzzzz", 6, &(TermPostings){0}));
        cr_assert(!seg_term(s, 7, "x", 1, &(TermPostings){0}), "a field without terms");
        cr_assert_null(seg_norms(s, 2), "no norms for an int field");
        cr_assert_eq(seg_pk_lookup(s, nokey, sizeof nokey), -1);
        seg_unref(s);
        roaring_bitmap_free(del);
        roaring_bitmap_free(want_del);
        unlink(path);
        free(path);
        free_docs(all, n_all);
        free_docs(docs, n);
    }
}

Test(segment, empty_builder_and_add_errors)
{
    QrSchema sc;
    eu_random_schema(&sc, true);
    SegBuilder *b;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(segb_new(&sc, &b, &e), QR_OK);
    static const struct {
        const char *json;
        QrCode code;
    } bad[] = {
        {"{\"title\":\"no key\"}", QR_ECONSTRAINT},
        {"{\"id\":null,\"title\":\"x\"}", QR_ECONSTRAINT},
        {"{\"id\":1.5,\"title\":\"x\"}", QR_ECONSTRAINT},
        {"{\"id\":\"\",\"title\":\"x\"}", QR_ECONSTRAINT},
        {"{\"id\":[1],\"title\":\"x\"}", QR_ECONSTRAINT},
        {"{\"id\":1,\"title\":5}", QR_ETYPE},
        {"{\"id\":1,\"title\":\"ok\",\"body\":[\"a\",3]}", QR_ETYPE},
        {"{\"id\":1,\"title\":\"ok\",\"n\":\"five\"}", QR_ETYPE},
        {"{\"id\":1,\"title\":\"ok\",\"n\":2.5}", QR_ETYPE},
        {"{\"id\":1,\"title\":\"ok\",\"flag\":1}", QR_ETYPE},
        {"{\"id\":1,\"title\":\"ok\",\"ts\":\"yesterday\"}", QR_ETYPE},
        {"{\"id\":1,\"title\":\"ok\",\"cat\":7}", QR_ETYPE},
        {"[1,2]", QR_ETYPE},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *r = cJSON_Parse(bad[i].json);
        cr_assert_not_null(r);
        qr_error_clear(&e);
        uint32_t d;
        int rc = segb_add(b, bad[i].json, strlen(bad[i].json), r, &d, &e);
        cJSON_Delete(r);
        cr_assert_eq(rc, (int)bad[i].code, "%s: got %d (%s)", bad[i].json, rc, e.message);
        cr_assert_neq(e.message[0], 0);
        cr_assert_eq(segb_n_docs(b), 0, "%s: a rejected doc was added", bad[i].json);
    }
    /* the builder is unharmed: good docs after the rejected ones */
    const char *good[] = {"{\"id\":1,\"title\":\"alpha beta\",\"n\":3}",
                          "{\"id\":\"two\",\"body\":[\"gamma\",null,\"delta alpha\"]}"};
    for (int i = 0; i < 2; i++) {
        cJSON *r = cJSON_Parse(good[i]);
        uint32_t d;
        cr_assert_eq(segb_add(b, good[i], strlen(good[i]), r, &d, &e), QR_OK, "%s", e.message);
        cJSON_Delete(r);
    }
    char *path = seg_path_of("errs");
    roaring_bitmap_t *del;
    cr_assert_eq(segb_finish(b, path, false, &del, &e), QR_OK);
    segb_free(b);
    cr_assert(roaring_bitmap_is_empty(del));
    roaring_bitmap_free(del);
    Segment *s = open_seg(path);
    check_docs_and_columns(s, &sc, (char *const *)good, 2, "after errors");
    eu_assert_segment_consistent(s, &sc, "after errors");
    seg_unref(s);
    /* an empty segment */
    cr_assert_eq(segb_new(&sc, &b, &e), QR_OK);
    cr_assert_eq(segb_finish(b, path, false, NULL, &e), QR_OK, "%s", e.message);
    segb_free(b);
    s = open_seg(path);
    cr_assert_eq(seg_n_docs(s), 0);
    cr_assert_eq(td_count(seg_terms(s)), 0);
    eu_assert_segment_consistent(s, &sc, "empty");
    seg_unref(s);
    free(path);
}

/* ---- structural equality of two segments ---- */

static void assert_same_column(const Column *a, const Column *b, const QrField *f, uint32_t n,
                               const char *what)
{
    cr_assert_eq(a != NULL, b != NULL, "%s: column %s present in one only", what, f->name);
    if (!a)
        return;
    cr_assert_eq(col_rows(a), col_rows(b));
    for (uint32_t r = 0; r < n; r++) {
        switch (f->type) {
        case QR_FT_INT:
        case QR_FT_TIMESTAMP: {
            int64_t x = 0, y = 0;
            bool hx = col_get_int(a, r, &x), hy = col_get_int(b, r, &y);
            cr_assert(hx == hy && x == y, "%s: %s row %u", what, f->name, r);
            break;
        }
        case QR_FT_FLOAT: {
            double x = 0, y = 0;
            bool hx = col_get_float(a, r, &x), hy = col_get_float(b, r, &y);
            cr_assert(hx == hy && x == y, "%s: %s row %u", what, f->name, r);
            break;
        }
        case QR_FT_BOOL: {
            bool x = false, y = false;
            bool hx = col_get_bool(a, r, &x), hy = col_get_bool(b, r, &y);
            cr_assert(hx == hy && x == y, "%s: %s row %u", what, f->name, r);
            break;
        }
        default: {
            const char *x = "", *y = "";
            size_t nx = 0, ny = 0;
            bool hx = col_get_str(a, r, &x, &nx), hy = col_get_str(b, r, &y, &ny);
            cr_assert(hx == hy && nx == ny && !memcmp(x, y, nx), "%s: %s row %u", what, f->name,
                      r);
            break;
        }
        }
    }
}

static void assert_same_segment(const Segment *a, const Segment *b, const QrSchema *sc,
                                const char *what)
{
    uint32_t n = seg_n_docs(a);
    cr_assert_eq(n, seg_n_docs(b), "%s: %u docs vs %u", what, n, seg_n_docs(b));
    for (int f = 0; f < sc->n_fields; f++) {
        SegFieldStats x = seg_field_stats(a, f), y = seg_field_stats(b, f);
        cr_assert(x.total_len == y.total_len && x.n_docs == y.n_docs,
                  "%s: field %d stats (%lu, %u) vs (%lu, %u)", what, f,
                  (unsigned long)x.total_len, x.n_docs, (unsigned long)y.total_len, y.n_docs);
        const uint32_t *na = seg_norms(a, f), *nb = seg_norms(b, f);
        cr_assert_eq(na != NULL, nb != NULL, "%s: norms of field %d", what, f);
        if (na)
            for (uint32_t d = 0; d < n; d++)
                cr_assert_eq(na[d], nb[d], "%s: norm of doc %u field %d", what, d, f);
        assert_same_column(seg_column(a, f), seg_column(b, f), &sc->fields[f], n, what);
    }
    /* the combined "_all" field */
    SegFieldStats sa = seg_field_stats(a, QR_ALL_FIELD), sb = seg_field_stats(b, QR_ALL_FIELD);
    cr_assert(sa.total_len == sb.total_len && sa.n_docs == sb.n_docs, "%s: _all stats", what);
    const uint32_t *naa = seg_norms(a, QR_ALL_FIELD), *nba = seg_norms(b, QR_ALL_FIELD);
    cr_assert_eq(naa != NULL, nba != NULL, "%s: _all norms in one segment only", what);
    cr_assert_eq(naa != NULL, sc->all_field, "%s: _all norms but all_field %d", what,
                 sc->all_field);
    if (naa)
        for (uint32_t d = 0; d < n; d++)
            cr_assert_eq(naa[d], nba[d], "%s: _all norm of doc %u", what, d);
    DocStoreCursor *ca = ds_cursor_new(seg_docs(a)), *cb = ds_cursor_new(seg_docs(b));
    for (uint32_t d = 0; d < n; d++) {
        const uint8_t *x, *y;
        size_t lx, ly;
        cr_assert_eq(ds_get(ca, d, &x, &lx, NULL), QR_OK);
        cr_assert_eq(ds_get(cb, d, &y, &ly, NULL), QR_OK);
        cr_assert(lx == ly && !memcmp(x, y, lx), "%s: stored doc %u", what, d);
        const uint8_t *kx, *ky;
        cr_assert(seg_pk(a, d, &kx, &lx) && seg_pk(b, d, &ky, &ly));
        cr_assert(lx == ly && !memcmp(kx, ky, lx), "%s: key of doc %u", what, d);
        cr_assert_eq(seg_pk_lookup(a, kx, lx), seg_pk_lookup(b, ky, ly));
    }
    ds_cursor_free(ca);
    ds_cursor_free(cb);
    const TermDict *ta = seg_terms(a), *tb = seg_terms(b);
    cr_assert_eq(td_count(ta), td_count(tb), "%s: %lu terms vs %lu", what,
                 (unsigned long)td_count(ta), (unsigned long)td_count(tb));
    QrArena *arena = qr_arena_new(0);
    TermCursor *ua = td_cursor_new(ta, arena), *ub = td_cursor_new(tb, arena);
    QrArena *ia = qr_arena_new(0);
    IterCtx ctx;
    for (;;) {
        bool ma = td_cursor_next(ua), mb = td_cursor_next(ub);
        cr_assert_eq(ma, mb, "%s: dictionaries end at different places", what);
        if (!ma)
            break;
        size_t la, lb;
        const uint8_t *ka = td_cursor_key(ua, &la), *kb = td_cursor_key(ub, &lb);
        cr_assert(la == lb && !memcmp(ka, kb, la), "%s: term \"%.*s\" vs \"%.*s\"", what,
                  (int)la - 1, ka + 1, (int)lb - 1, kb + 1);
        TermPostings pa, pb;
        td_cursor_info(ua, &pa);
        td_cursor_info(ub, &pb);
        cr_assert(pa.df == pb.df && pa.total_tf == pb.total_tf, "%s: df/total_tf of \"%.*s\"",
                  what, (int)la - 1, ka + 1);
        qr_arena_reset(ia);
        iter_ctx_init(&ctx, ia);
        Iter *xa = seg_postings(a, &ctx, &pa, NULL, true);
        Iter *xb = seg_postings(b, &ctx, &pb, NULL, true);
        for (;;) {
            DocId da = iter_next(xa), db = iter_next(xb);
            cr_assert_eq(da, db, "%s: postings of \"%.*s\": doc %ld vs %ld", what, (int)la - 1,
                         ka + 1, (long)da, (long)db);
            if (da == ITER_END)
                break;
            cr_assert_eq(xa->vt->freq(xa), xb->vt->freq(xb));
            uint32_t npa, npb;
            const uint32_t *qa = xa->vt->positions(xa, &npa);
            const uint32_t *qb = xb->vt->positions(xb, &npb);
            cr_assert(npa == npb && !memcmp(qa, qb, npa * sizeof *qa),
                      "%s: positions of \"%.*s\" in doc %ld", what, (int)la - 1, ka + 1,
                      (long)da);
        }
        cr_assert_eq(ctx.err.code, QR_OK, "%s", ctx.err.message);
    }
    qr_arena_free(ia);
    qr_arena_free(arena);
}

Test(segment, merge_equals_direct_build)
{
    QrSchema sc;
    eu_random_schema(&sc, true);
    for (uint64_t seed = 1; seed <= 8; seed++) {
        sc.all_field = seed % 2 == 1;
        uint64_t rng = seed * 104729;
        int n_src = 1 + (int)eu_below(&rng, 4);
        Segment *srcs[4];
        roaring_bitmap_t *dels[4];
        char **docs[4];
        int nd[4];
        char **surv = NULL;
        int n_surv = 0;
        uint64_t lo_want = UINT64_MAX, hi_want = 0;
        for (int i = 0; i < n_src; i++) {
            nd[i] = i == 1 && seed % 3 == 0 ? 0 : 20 + (int)eu_below(&rng, 300);
            docs[i] = random_docs(&rng, nd[i], (int)(seed * 10000 + (uint64_t)i * 1000));
            char name[32];
            snprintf(name, sizeof name, "src%d", i);
            char *p = seg_path_of(name);
            uint64_t lo = 1 + eu_below(&rng, 100), hi = lo + eu_below(&rng, 100);
            lo_want = lo < lo_want ? lo : lo_want;
            hi_want = hi > hi_want ? hi : hi_want;
            roaring_bitmap_t *bd = build(&sc, docs[i], nd[i], p, lo, hi);
            cr_assert(roaring_bitmap_is_empty(bd));
            roaring_bitmap_free(bd);
            srcs[i] = open_seg(p);
            free(p);
            /* deletes: none (NULL), a few, most, or all */
            int mode = (int)eu_below(&rng, 4);
            dels[i] = mode == 0 ? NULL : roaring_bitmap_create();
            for (int d = 0; d < nd[i] && dels[i]; d++)
                if ((mode == 1 && eu_chance(&rng, 0.1)) || (mode == 2 && eu_chance(&rng, 0.8)) ||
                    (mode == 3 && seed % 4 == 0))
                    roaring_bitmap_add(dels[i], (uint32_t)d);
            for (int d = 0; d < nd[i]; d++)
                if (!dels[i] || !roaring_bitmap_contains(dels[i], (uint32_t)d)) {
                    surv = realloc(surv, sizeof *surv * (size_t)(n_surv + 1));
                    surv[n_surv++] = docs[i][d];
                }
        }
        char *mp = seg_path_of("merged");
        uint32_t **remap = NULL;
        QrError e;
        qr_error_clear(&e);
        cr_assert_eq(seg_merge(srcs, (const roaring_bitmap_t *const *)dels, n_src, &sc, mp, true,
                               &remap, &e),
                     QR_OK, "seed %lu: %s", (unsigned long)seed, e.message);
        Segment *m = open_seg(mp);
        /* the same merge spilling its streams a few bytes at a time writes
         * the same file byte for byte (the offsets count the spilled bytes) */
        {
            char *sp = seg_path_of("spilled");
            size_t keep = seg_merge_spill_keep;
            seg_merge_spill_keep = 1 + (size_t)seed * 7;
            int src_rc = seg_merge(srcs, (const roaring_bitmap_t *const *)dels, n_src, &sc, sp,
                                   false, NULL, &e);
            seg_merge_spill_keep = keep;
            cr_assert_eq(src_rc, QR_OK, "seed %lu spilled: %s", (unsigned long)seed, e.message);
            uint8_t *a, *b;
            size_t al, bl;
            cr_assert_eq(qr_file_read_all(mp, &a, &al, NULL), QR_OK);
            cr_assert_eq(qr_file_read_all(sp, &b, &bl, NULL), QR_OK);
            cr_assert(al == bl && memcmp(a, b, al) == 0,
                      "seed %lu: a spilled merge wrote %zu bytes unlike the %zu in memory",
                      (unsigned long)seed, bl, al);
            qr_free(a);
            qr_free(b);
            free(sp);
        }
        char *dp = seg_path_of("direct");
        roaring_bitmap_t *bd = build(&sc, surv, n_surv, dp, 0, 0);
        roaring_bitmap_free(bd);
        Segment *direct = open_seg(dp);
        char what[64];
        snprintf(what, sizeof what, "seed %lu merge", (unsigned long)seed);
        assert_same_segment(m, direct, &sc, what);
        check_docs_and_columns(m, &sc, surv, n_surv, what);
        eu_assert_segment_consistent(m, &sc, what);
        uint64_t lo, hi;
        seg_lsn_range(m, &lo, &hi);
        cr_assert(lo == lo_want && hi == hi_want, "%s: lsn range %lu..%lu want %lu..%lu", what,
                  (unsigned long)lo, (unsigned long)hi, (unsigned long)lo_want,
                  (unsigned long)hi_want);
        /* remap: survivors numbered consecutively in source order */
        uint32_t next = 0;
        for (int i = 0; i < n_src; i++) {
            for (int d = 0; d < nd[i]; d++) {
                bool gone = dels[i] && roaring_bitmap_contains(dels[i], (uint32_t)d);
                cr_assert_eq(remap[i][d], gone ? UINT32_MAX : next, "%s: remap[%d][%d]", what,
                             i, d);
                if (!gone)
                    next++;
            }
            qr_free(remap[i]);
        }
        qr_free(remap);
        seg_unref(m);
        seg_unref(direct);
        for (int i = 0; i < n_src; i++) {
            seg_unref(srcs[i]);
            if (dels[i])
                roaring_bitmap_free(dels[i]);
            free_docs(docs[i], nd[i]);
        }
        free(surv);
        free(mp);
        free(dp);
    }
}

/* A key added again after the builder's key table grew still has one live
 * doc: the table maps each key to its newest doc through every growth
 * (it once re-inserted every doc, older copies first, so a key put twice
 * before a growth and again after it kept two live docs).  And a segment
 * built in memory reads exactly like the same builder written to a file. */
Test(segment, key_added_again_across_growth_and_in_memory_build)
{
    QrSchema sc;
    eu_random_schema(&sc, true);
    uint64_t rng = 77;
    enum { FILL = 9000 };
    int n_all = FILL + 3;
    char **all = calloc((size_t)n_all, sizeof *all);
    all[0] = eu_random_doc(&rng, words, &zipf, "\"again\"", NULL);
    all[1] = eu_random_doc(&rng, words, &zipf, "\"again\"", NULL);
    for (int i = 0; i < FILL; i++) {
        char id[32];
        snprintf(id, sizeof id, "%d", i);
        all[2 + i] = eu_random_doc(&rng, words, &zipf, id, NULL);
    }
    all[n_all - 1] = eu_random_doc(&rng, words, &zipf, "\"again\"", NULL);
    Segment *segs[2];
    for (int mem = 0; mem < 2; mem++) {
        SegBuilder *b;
        QrError e;
        qr_error_clear(&e);
        cr_assert_eq(segb_new(&sc, &b, &e), QR_OK, "%s", e.message);
        for (int i = 0; i < n_all; i++) {
            cJSON *r = cJSON_Parse(all[i]);
            uint32_t d;
            cr_assert_eq(segb_add(b, all[i], strlen(all[i]), r, &d, &e), QR_OK, "%s", e.message);
            cJSON_Delete(r);
        }
        cr_assert_eq(segb_n_live(b), (uint32_t)FILL + 1, "one live copy of the repeated key");
        uint8_t key[PK_KEY_MAX];
        size_t kl = eu_doc_key(all[0], key);
        cr_assert(segb_delete_key(b, key, kl), "its newest copy is found and deleted");
        cr_assert(!segb_delete_key(b, key, kl), "and no other copy is live");
        roaring_bitmap_t *del = NULL;
        char *path = seg_path_of("again");
        if (mem) {
            cr_assert_eq(segb_finish_mem(b, path, 9, &segs[1], &del, &e), QR_OK, "%s",
                         e.message);
            cr_assert(seg_in_memory(segs[1]));
            cr_assert_eq(seg_verify(segs[1], &e), QR_OK, "%s", e.message);
        } else {
            cr_assert_eq(segb_finish(b, path, false, &del, &e), QR_OK, "%s", e.message);
            segs[0] = open_seg(path);
            cr_assert(!seg_in_memory(segs[0]));
        }
        segb_free(b);
        cr_assert_eq(roaring_bitmap_get_cardinality(del), 3, "the three copies are deleted");
        cr_assert(roaring_bitmap_contains(del, 0) && roaring_bitmap_contains(del, 1) &&
                  roaring_bitmap_contains(del, (uint32_t)n_all - 1));
        roaring_bitmap_free(del);
        free(path);
    }
    assert_same_segment(segs[0], segs[1], &sc, "file vs in-memory build");
    eu_assert_segment_consistent(segs[1], &sc, "in-memory build");
    seg_unref(segs[0]);
    seg_unref(segs[1]);
    free_docs(all, n_all);
}

/* Every doc of every source deleted: the merge writes an empty segment (a
 * table rewrites a segment whose docs were all deleted this way). */
Test(segment, merge_of_only_deleted_docs_is_empty)
{
    for (int all = 0; all < 2; all++) {
        QrSchema sc;
        eu_random_schema(&sc, true);
        sc.all_field = all;
        uint64_t rng = 21;
        char **docs = random_docs(&rng, 30, 0);
        char *p = seg_path_of("src");
        roaring_bitmap_free(build(&sc, docs, 30, p, 1, 9));
        Segment *src = open_seg(p);
        roaring_bitmap_t *d = roaring_bitmap_create();
        roaring_bitmap_add_range(d, 0, 30);
        const roaring_bitmap_t *dels[1] = {d};
        char *mp = seg_path_of("merged");
        QrError e;
        qr_error_clear(&e);
        uint32_t **remap = NULL;
        int rc = seg_merge(&src, dels, 1, &sc, mp, false, &remap, &e);
        cr_assert_eq(rc, QR_OK, "all_field %d: merging a segment whose docs are all deleted: %s",
                     all, e.message);
        Segment *m = open_seg(mp);
        cr_assert_eq(seg_n_docs(m), 0);
        cr_assert_eq(td_count(seg_terms(m)), 0);
        eu_assert_segment_consistent(m, &sc, "empty merge");
        for (int k = 0; k < 30; k++)
            cr_assert_eq(remap[0][k], UINT32_MAX);
        qr_free(remap[0]);
        qr_free(remap);
        seg_unref(m);
        seg_unref(src);
        roaring_bitmap_free(d);
        free_docs(docs, 30);
        free(p);
        free(mp);
    }
}

/* A source written before fields were added merges as docs without them. */
Test(segment, merge_across_added_fields)
{
    QrSchema old_sc, new_sc;
    eu_random_schema(&old_sc, false); /* title, body */
    eu_random_schema(&new_sc, true);  /* + columns + label */
    uint64_t rng = 99;
    /* old docs: only the old fields */
    int n_old = 120;
    char **old_docs = calloc((size_t)n_old, sizeof *old_docs);
    for (int i = 0; i < n_old; i++) {
        char id[32];
        snprintf(id, sizeof id, "%d", 500 + i);
        char *full = eu_random_doc(&rng, words, &zipf, id, NULL);
        cJSON *r = cJSON_Parse(full);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "id", cJSON_Duplicate(cJSON_GetObjectItem(r, "id"), 1));
        const char *keep[] = {"title", "body"};
        for (int k = 0; k < 2; k++) {
            cJSON *v = cJSON_GetObjectItem(r, keep[k]);
            if (v)
                cJSON_AddItemToObject(o, keep[k], cJSON_Duplicate(v, 1));
        }
        old_docs[i] = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        cJSON_Delete(r);
        free(full);
    }
    char **new_docs = random_docs(&rng, 150, 2000);
    char *p0 = seg_path_of("old"), *p1 = seg_path_of("new");
    roaring_bitmap_free(build(&old_sc, old_docs, n_old, p0, 1, 2));
    roaring_bitmap_free(build(&new_sc, new_docs, 150, p1, 3, 4));
    Segment *srcs[2] = {open_seg(p0), open_seg(p1)};
    roaring_bitmap_t *d0 = roaring_bitmap_create();
    for (uint32_t d = 0; d < (uint32_t)n_old; d += 3)
        roaring_bitmap_add(d0, d);
    const roaring_bitmap_t *dels[2] = {d0, NULL};
    char *mp = seg_path_of("m");
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(seg_merge(srcs, dels, 2, &new_sc, mp, false, NULL, &e), QR_OK, "%s", e.message);
    Segment *m = open_seg(mp);
    char **surv = calloc((size_t)(n_old + 150), sizeof *surv);
    int ns = 0;
    for (int i = 0; i < n_old; i++)
        if (i % 3)
            surv[ns++] = old_docs[i];
    for (int i = 0; i < 150; i++)
        surv[ns++] = new_docs[i];
    char *dp = seg_path_of("d");
    roaring_bitmap_free(build(&new_sc, surv, ns, dp, 0, 0));
    Segment *direct = open_seg(dp);
    assert_same_segment(m, direct, &new_sc, "added fields");
    check_docs_and_columns(m, &new_sc, surv, ns, "added fields");
    eu_assert_segment_consistent(m, &new_sc, "added fields");
    seg_unref(m);
    seg_unref(direct);
    seg_unref(srcs[0]);
    seg_unref(srcs[1]);
    roaring_bitmap_free(d0);
    for (int i = 0; i < n_old; i++)
        free(old_docs[i]);
    free(old_docs);
    free_docs(new_docs, 150);
    free(surv);
    free(p0);
    free(p1);
    free(mp);
    free(dp);
}

/* ---- damaged files ---- */

static uint8_t *read_file(const char *path, size_t *len)
{
    uint8_t *d;
    cr_assert_eq(qr_file_read_all(path, &d, len, NULL), QR_OK);
    return d;
}

static void write_file(const char *path, const uint8_t *d, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    if (len)
        cr_assert_eq(fwrite(d, 1, len, f), len);
    fclose(f);
}

/* Touch everything a reader can reach; errors are fine, crashes are not. */
static void read_everything(Segment *s, const QrSchema *sc)
{
    QrArena *arena = qr_arena_new(0);
    IterCtx ctx;
    iter_ctx_init(&ctx, arena);
    TermCursor *c = td_cursor_new(seg_terms(s), arena);
    uint32_t n = seg_n_docs(s);
    while (c && td_cursor_next(c)) {
        TermPostings tp;
        td_cursor_info(c, &tp);
        size_t kl;
        const uint8_t *k = td_cursor_key(c, &kl);
        const uint32_t *norms = kl ? seg_norms(s, k[0]) : NULL;
        PostScorer psc = {.idf = 1, .k1 = 1.2f, .b = 0.75f, .avgdl = 10, .weight = 1,
                          .norms = norms, .n_docs = n};
        Iter *it = seg_postings(s, &ctx, &tp, norms ? &psc : NULL, true);
        for (DocId d = it ? iter_next(it) : ITER_END; d != ITER_END; d = iter_next(it)) {
            uint32_t np;
            it->vt->positions(it, &np);
            if (norms && d < (DocId)n)
                iter_score(it);
        }
        if (it)
            iter_close(it);
        ctx.err.code = QR_OK;
    }
    DocStoreCursor *dc = ds_cursor_new(seg_docs(s));
    for (uint32_t d = 0; d < n && dc; d++) {
        const uint8_t *p;
        size_t l;
        ds_get(dc, d, &p, &l, NULL);
        const uint8_t *k;
        if (seg_pk(s, d, &k, &l))
            seg_pk_lookup(s, k, l);
        for (int f = 0; f < sc->n_fields; f++) {
            const Column *col = seg_column(s, f);
            if (!col)
                continue;
            int64_t i64;
            double dbl;
            bool b;
            const char *str;
            col_get_int(col, d, &i64);
            col_get_float(col, d, &dbl);
            col_get_bool(col, d, &b);
            col_get_str(col, d, &str, &l);
        }
    }
    ds_cursor_free(dc);
    qr_arena_free(arena);
}

/* File offset of each section (by locating its bytes). */
static void section_offsets(const char *path, const uint8_t *file, size_t flen, size_t *off,
                            size_t *len, int *n)
{
    Sfile *sf;
    cr_assert_eq(sf_open(path, SEG_FILE_KIND, &sf, NULL), QR_OK);
    *n = (int)sf_section_count(sf);
    for (int i = 0; i < *n; i++) {
        const uint8_t *p;
        size_t l;
        cr_assert(sf_section(sf, sf_section_id(sf, i), &p, &l));
        len[i] = l;
        off[i] = SIZE_MAX;
        for (size_t o = 0; o + l <= flen; o += SF_ALIGN)
            if (!memcmp(file + o, p, l)) {
                off[i] = o;
                break;
            }
        cr_assert_neq(off[i], SIZE_MAX);
    }
    sf_unref(sf);
}

/* A healthy segment of n random docs, its bytes and its sections' places. */
typedef struct Damage {
    QrSchema sc;
    char **docs;
    int n;
    char *good;   /* path */
    uint8_t *orig;
    size_t flen;
    size_t off[64], len[64];
    int n_sec;
} Damage;

static void damage_setup(Damage *d, int n, uint64_t *rng)
{
    memset(d, 0, sizeof *d);
    eu_random_schema(&d->sc, true);
    d->n = n;
    d->docs = random_docs(rng, n, 0);
    d->good = seg_path_of("good");
    roaring_bitmap_free(build(&d->sc, d->docs, n, d->good, 1, 2));
    d->orig = read_file(d->good, &d->flen);
    section_offsets(d->good, d->orig, d->flen, d->off, d->len, &d->n_sec);
}

static void damage_free(Damage *d)
{
    free(d->orig);
    free(d->good);
    free_docs(d->docs, d->n);
}

Test(segment, damaged_files_are_reported_never_crash)
{
    uint64_t rng = 5;
    Damage dm;
    damage_setup(&dm, 300, &rng);
    const QrSchema sc = dm.sc;
    const uint8_t *orig = dm.orig;
    size_t flen = dm.flen;
    const size_t *off = dm.off, *len = dm.len;
    int n_sec = dm.n_sec;
    /* positions: the whole header and tail, a few in every section, random */
    size_t *pos = malloc(sizeof *pos * 4096);
    int np = 0;
    for (size_t p = 0; p < 64 && p < flen; p++)
        pos[np++] = p;
    for (size_t p = flen > 256 ? flen - 256 : 0; p < flen; p++)
        pos[np++] = p;
    for (int i = 0; i < n_sec; i++)
        for (int k = 0; k < 6 && len[i]; k++)
            pos[np++] = off[i] + (k == 0 ? 0 : k == 1 ? len[i] - 1 : eu_below(&rng, len[i]));
    for (int k = 0; k < 150; k++)
        pos[np++] = eu_below(&rng, flen);
    char *bad = seg_path_of("bad");
    char *mp = seg_path_of("bad-merged");
    uint8_t *buf = malloc(flen);
    int opened = 0, open_failed = 0;
    for (int i = 0; i < np; i++) {
        memcpy(buf, orig, flen);
        buf[pos[i]] ^= (uint8_t)(1u << eu_below(&rng, 8));
        write_file(bad, buf, flen);
        Segment *s = NULL;
        QrError e;
        qr_error_clear(&e);
        int rc = seg_open(bad, 9, &s, &e);
        if (rc != QR_OK) {
            cr_assert(rc == QR_ECORRUPT || rc == QR_EUNSUPPORTED,
                      "flip at %zu: seg_open returned %d (%s)", pos[i], rc, e.message);
            cr_assert_neq(e.message[0], 0);
            open_failed++;
            continue;
        }
        opened++;
        qr_error_clear(&e);
        rc = seg_verify(s, &e);
        cr_assert_eq(rc, QR_ECORRUPT, "flip at %zu (of %zu bytes) is not detected by seg_verify",
                     pos[i], flen);
        read_everything(s, &sc);
        /* merging a damaged segment must fail cleanly or succeed: never crash */
        qr_error_clear(&e);
        Segment *one[1] = {s};
        seg_merge(one, NULL, 1, &sc, mp, false, NULL, &e);
        unlink(mp);
        seg_unref(s);
    }
    cr_assert_gt(opened, 0);
    cr_assert_gt(open_failed, 0);
    /* truncations */
    for (int k = 0; k < 60; k++) {
        size_t cut = k < 20 ? (size_t)k * 7 : eu_below(&rng, flen);
        write_file(bad, orig, cut);
        Segment *s = NULL;
        QrError e;
        qr_error_clear(&e);
        int rc = seg_open(bad, 9, &s, &e);
        cr_assert_eq(rc, QR_ECORRUPT, "truncated to %zu of %zu bytes: seg_open returned %d",
                     cut, flen, rc);
    }
    /* a missing file */
    unlink(bad);
    Segment *s = NULL;
    cr_assert_eq(seg_open(bad, 9, &s, NULL), QR_ENOTFOUND);
    free(buf);
    free(pos);
    free(bad);
    free(mp);
    damage_free(&dm);
}

/* A merge re-encodes its sources with fresh checksums, so damage a merge
 * reads without noticing would be laundered into a "healthy" segment.  A
 * source whose content fails seg_verify must make seg_merge fail. */
Test(segment, merge_does_not_launder_damage)
{
    uint64_t rng = 11;
    Damage dm;
    damage_setup(&dm, 200, &rng);
    const QrSchema sc = dm.sc;
    const uint8_t *orig = dm.orig;
    size_t flen = dm.flen;
    const size_t *off = dm.off, *len = dm.len;
    int n_sec = dm.n_sec;
    Sfile *sf;
    cr_assert_eq(sf_open(dm.good, SEG_FILE_KIND, &sf, NULL), QR_OK);
    int sec_pos = -1;
    for (int i = 0; i < n_sec; i++)
        if (sf_section_id(sf, i) == SEC_POSITIONS)
            sec_pos = i;
    sf_unref(sf);
    cr_assert_geq(sec_pos, 0);
    char *bad = seg_path_of("bad");
    char *mp = seg_path_of("laundered");
    int laundered = 0, tried = 0;
    for (int k = 0; k < 40; k++) {
        uint8_t *buf = malloc(flen);
        memcpy(buf, orig, flen);
        buf[off[sec_pos] + eu_below(&rng, len[sec_pos])] ^= 0x01;
        write_file(bad, buf, flen);
        free(buf);
        Segment *s;
        if (seg_open(bad, 3, &s, NULL) != QR_OK)
            continue;
        cr_assert_eq(seg_verify(s, NULL), QR_ECORRUPT);
        tried++;
        Segment *one[1] = {s};
        QrError e;
        qr_error_clear(&e);
        if (seg_merge(one, NULL, 1, &sc, mp, false, NULL, &e) == QR_OK) {
            Segment *m;
            if (seg_open(mp, 4, &m, NULL) == QR_OK) {
                if (seg_verify(m, NULL) == QR_OK)
                    laundered++;
                seg_unref(m);
            }
        }
        unlink(mp);
        seg_unref(s);
    }
    cr_assert_gt(tried, 0);
    cr_expect_eq(laundered, 0,
                 "%d of %d merges of a segment with a damaged positions section succeeded and "
                 "wrote a segment that passes seg_verify",
                 laundered, tried);
    free(bad);
    free(mp);
    damage_free(&dm);
}

/* ---- word forms past the stem cache ---- */

typedef struct FormCount {
    char *form, *stem;
    uint32_t df, tf, last_doc1;
} FormCount;

typedef struct FormModel {
    FormCount *v;
    size_t n, cap;
    size_t *slots; /* open addressing: index + 1 */
    size_t n_slots;
    uint32_t doc;
} FormModel;

static uint64_t form_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static int form_sink(void *ctx, const Token *t)
{
    FormModel *m = ctx;
    if (t->is_gram)
        return 0;
    size_t j = form_hash(t->surface, t->surface_len) & (m->n_slots - 1);
    for (; m->slots[j]; j = (j + 1) & (m->n_slots - 1)) {
        FormCount *f = &m->v[m->slots[j] - 1];
        if (strlen(f->form) == t->surface_len && !memcmp(f->form, t->surface, t->surface_len))
            break;
    }
    if (!m->slots[j]) {
        cr_assert_lt(m->n * 2, m->n_slots, "form model full");
        if (m->n == m->cap) {
            m->cap = m->cap ? m->cap * 2 : 1024;
            m->v = realloc(m->v, m->cap * sizeof *m->v);
        }
        m->v[m->n] = (FormCount){.form = strndup(t->surface, t->surface_len),
                                 .stem = strndup(t->text, t->len)};
        m->slots[j] = ++m->n;
    }
    FormCount *f = &m->v[m->slots[j] - 1];
    cr_assert(strlen(f->stem) == t->len && !memcmp(f->stem, t->text, t->len),
              "a form stems one way");
    if (f->last_doc1 != m->doc + 1) {
        f->df++;
        f->last_doc1 = m->doc + 1;
    }
    f->tf++;
    return 0;
}

/* A bulk-sized segment over a vocabulary larger than the analyzer's stem
 * cache, whose slots are then reused for other words while the builder
 * memoizes term ids and word forms by slot: every form written as
 * SEC_SURFACES names its own stem, with the df and total_tf a re-analysis
 * counts, and every stem's postings have the df the forms add up to. */
Test(segment, word_forms_past_the_stem_cache)
{
    const char *sj = "{\"primary_key\":\"id\",\"fields\":[{\"name\":\"body\",\"type\":\"text\","
                     "\"language\":\"english\"}]}";
    QrSchema sc;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(schema_from_json(sj, strlen(sj), &sc, &e), QR_OK, "%s", e.message);
    int nw = (int)analyzer_cache_slots() * 2, n_docs = 2000;
    /* distinct words: i + 20 written in base 20 over letters, every other
     * one after a long common prefix (forms whose first 7 bytes and length
     * agree: the writer's sort and merge of forms must look past those) */
    char **vocab = calloc((size_t)nw, sizeof *vocab);
    for (int i = 0; i < nw; i++) {
        char w[32];
        int n = 0;
        if (i % 2)
            for (const char *p = "interconnect"; *p; p++)
                w[n++] = *p;
        for (unsigned v = (unsigned)i + 20; v; v /= 20)
            w[n++] = "etaoinshrdlucmfgypwb"[v % 20];
        w[n] = '\0';
        vocab[i] = strdup(w);
    }
    EuZipf z;
    eu_zipf_init(&z, nw, 0.8);
    uint64_t rng = 5;
    char **docs = calloc((size_t)n_docs, sizeof *docs);
    QrBuf b;
    qr_buf_init(&b);
    for (int i = 0; i < n_docs; i++) {
        b.len = 0;
        qr_buf_printf(&b, "{\"id\":%d,\"body\":\"", i);
        for (int k = 0; k < 120; k++)
            qr_buf_printf(&b, "%s%s", k ? " " : "", vocab[eu_zipf_draw(&z, &rng)]);
        qr_buf_append(&b, "\"}", 3);
        docs[i] = strdup((const char *)b.data);
    }
    qr_buf_free(&b);
    char *path = seg_path_of("forms");
    roaring_bitmap_t *del = build(&sc, docs, n_docs, path, 1, 1);
    roaring_bitmap_free(del);
    Segment *s = open_seg(path);
    /* the model: a fresh analyzer of the field's options over every doc */
    const QrField *fd = &sc.fields[schema_field_index(&sc, "body")];
    AnalyzerOpts o = {.language = fd->language, .stopwords = fd->stopwords,
                      .accent_fold = fd->accent_fold};
    o.stop_list = schema_stop_list(&sc, schema_field_index(&sc, "body"), &o.stop_list_len);
    Analyzer *a = NULL;
    cr_assert_eq(analyzer_new(&o, &a, &e), QR_OK, "%s", e.message);
    FormModel m = {.n_slots = 1u << 20};
    m.slots = calloc(m.n_slots, sizeof *m.slots);
    for (int i = 0; i < n_docs; i++) {
        cJSON *r = cJSON_Parse(docs[i]);
        const char *body = cJSON_GetObjectItem(r, "body")->valuestring;
        m.doc = (uint32_t)i;
        uint32_t np;
        cr_assert_eq(analyzer_run_n(a, body, strlen(body), 0, ANALYZE_CJK_GRAMS, form_sink, &m,
                                    &np, &e),
                     QR_OK);
        cJSON_Delete(r);
    }
    cr_assert_gt(m.n, analyzer_cache_slots(), "more forms than stem cache slots");
    const TermDict *td = seg_surfaces(s);
    cr_assert_not_null(td);
    uint8_t key[1100];
    uint8_t field = (uint8_t)schema_field_index(&sc, "body");
    for (size_t i = 0; i < m.n; i++) {
        FormCount *f = &m.v[i];
        size_t fl = strlen(f->form);
        key[0] = field;
        memcpy(key + 1, f->form, fl);
        TermPostings tp;
        cr_assert(td_lookup(td, key, fl + 1, &tp), "form %s missing", f->form);
        cr_assert(tp.df == f->df && tp.total_tf == f->tf, "form %s: df %u tf %llu, want %u %u",
                  f->form, tp.df, (unsigned long long)tp.total_tf, f->df, f->tf);
        const char *t;
        size_t tl;
        cr_assert(seg_surface_term(s, key, fl + 1, &tp, &t, &tl));
        cr_assert(tl == strlen(f->stem) && !memcmp(t, f->stem, tl), "form %s indexed as %.*s, "
                  "want %s", f->form, (int)tl, t, f->stem);
        TermPostings sp;
        cr_assert(seg_term(s, field, f->stem, strlen(f->stem), &sp), "stem %s", f->stem);
        cr_assert_geq(sp.df, f->df, "stem %s", f->stem);
        free(f->form);
        free(f->stem);
    }
    free(m.v);
    free(m.slots);
    analyzer_free(a);
    seg_unref(s);
    unlink(path);
    free(path);
    free_docs(docs, n_docs);
    eu_zipf_free(&z);
    for (int i = 0; i < nw; i++)
        free(vocab[i]);
    free(vocab);
}
