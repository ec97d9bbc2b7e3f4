/*
 * test_facets.c — facets of qr_search (query/facets.c) and multi-valued
 * keyword fields, against brute force over the stored JSON.
 *
 * A random table (several segments, deletes pending, NULLs and missing
 * fields; "tags" a keyword list: arrays with repeated elements, empty
 * arrays, a lone string, absent) is searched with every facet kind over
 * three match sets (every document, a word with a numeric filter, a filter
 * on a list element).  The brute force reads the live documents' JSON:
 * terms counts by count then value and the rest as "other", histogram
 * buckets, stats, percentile_cont of the sorted values, distinct counts,
 * range counts, and the documents each list filter keeps.
 */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "query/query_int.h"
#include "query/quarry.h"
#include "store/docstore.h"
#include "store/util.h"

TestSuite(facets, .init = eu_quiet, .fini = eu_tmpdirs_cleanup);

static const char *words[] = {"river", "stone", "hydro", "power"};
static const char *cats[] = {"alpha", "beta", "gamma", "delta", ""};
static const char *tagv[] = {"a", "b", "c", "d e", "x,y", "NULL", ""};
#define N_TAGS 7

typedef struct Env {
    QrDb *db;
    QrTable *t;
    cJSON **live;             /* the live documents (brute force) */
    int n_live;
} Env;

static char *random_doc(uint64_t *rng, int64_t id)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)id);
    char body[64] = "";
    for (int i = 0, n = 1 + (int)eu_below(rng, 3); i < n; i++) {
        strcat(body, words[eu_below(rng, 4)]);
        strcat(body, " ");
    }
    cJSON_AddStringToObject(o, "body", body);
    if (!eu_chance(rng, 0.1))
        cJSON_AddNumberToObject(o, "n", (double)((int64_t)eu_below(rng, 400) - 100));
    if (!eu_chance(rng, 0.1))
        cJSON_AddNumberToObject(o, "price", (double)eu_below(rng, 4000) / 8.0 - 50);
    if (!eu_chance(rng, 0.1)) {
        char ts[40];
        qr_format_timestamp((int64_t)(1735689600 + (int64_t)eu_below(rng, 30 * 86400)) * 1000000,
                            ts, sizeof ts);
        cJSON_AddStringToObject(o, "ts", ts);
    }
    if (!eu_chance(rng, 0.1))
        cJSON_AddStringToObject(o, "cat", cats[eu_below(rng, 5)]);
    int r = (int)eu_below(rng, 10);
    if (r == 0) {
        /* absent */
    } else if (r == 1) {
        cJSON_AddStringToObject(o, "tags", tagv[eu_below(rng, N_TAGS)]);
    } else if (r == 2) {
        cJSON_AddItemToObject(o, "tags", cJSON_CreateArray());
    } else {
        cJSON *a = cJSON_CreateArray();
        for (int i = 0, n = 1 + (int)eu_below(rng, 4); i < n; i++)
            cJSON_AddItemToArray(a, cJSON_CreateString(tagv[eu_below(rng, N_TAGS)]));
        cJSON_AddItemToObject(o, "tags", a);
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static void env_open(Env *e)
{
    memset(e, 0, sizeof *e);
    char *dir = eu_tmpdir_tracked("facets");
    QrDbOpts o;
    qr_db_opts_default(&o);
    o.background_merge = false;
    o.fsync = QR_FSYNC_OFF;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_db_open(dir, &o, &e->db, &err), QR_OK, "%s", err.message);
    const char *schema = "{\"primary_key\":\"id\",\"fields\":["
                         "{\"name\":\"body\",\"type\":\"text\",\"language\":\"none\"},"
                         "{\"name\":\"n\",\"type\":\"int\"},{\"name\":\"price\",\"type\":\"float\"},"
                         "{\"name\":\"ts\",\"type\":\"timestamp\"},"
                         "{\"name\":\"cat\",\"type\":\"keyword\"},"
                         "{\"name\":\"tags\",\"type\":\"keyword\",\"multi\":true}]}";
    QrSchema s;
    cr_assert_eq(schema_from_json(schema, strlen(schema), &s, &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_table_create(e->db, "t", &s, &e->t, &err), QR_OK, "%s", err.message);
    uint64_t rng = 424242;
    int64_t space = 6000;
    for (int round = 0; round < 4; round++) {
        char *d[2500];
        for (int i = 0; i < 2500; i++)
            d[i] = random_doc(&rng, (int64_t)eu_below(&rng, (uint64_t)space));
        eu_put_docs(e->t, d, 2500);
        if (round % 2)
            eu_delete_random(e->t, &rng, 300, space);
    }
    /* the live documents, read back from the snapshot */
    Snapshot *snap = table_snapshot(e->t->table);
    cr_assert_geq(snap->n_segs, 2);
    e->live = calloc(snap->n_live + 1, sizeof *e->live);
    for (int si = 0; si < snap->n_segs; si++) {
        DocStoreCursor *c = ds_cursor_new(seg_docs(snap->segs[si]));
        for (uint32_t d = 0; d < seg_n_docs(snap->segs[si]); d++) {
            if (snapshot_deleted(snap, si, d))
                continue;
            const uint8_t *p;
            size_t len;
            cr_assert_eq(ds_get(c, d, &p, &len, &err), QR_OK);
            e->live[e->n_live++] = cJSON_ParseWithLength((const char *)p, len);
        }
        ds_cursor_free(c);
    }
    snapshot_release(snap);
}

static void env_close(Env *e)
{
    for (int i = 0; i < e->n_live; i++)
        cJSON_Delete(e->live[i]);
    free(e->live);
    qr_db_close(e->db);
}

/* ---- brute force ---- */

static bool has_word(const cJSON *d, const char *w)
{
    const char *b = cJSON_GetObjectItemCaseSensitive(d, "body")->valuestring;
    size_t n = strlen(w);
    for (const char *p = strstr(b, w); p; p = strstr(p + 1, w))
        if ((p == b || p[-1] == ' ') && (p[n] == ' ' || !p[n]))
            return true;
    return false;
}

/* The document's distinct list elements (a lone string is a list of one). */
static int tags_of(const cJSON *d, const char **out)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(d, "tags");
    int n = 0;
    if (cJSON_IsString(t)) {
        out[n++] = t->valuestring;
        return n;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, t)
    {
        bool dup = false;
        for (int i = 0; i < n; i++)
            dup |= !strcmp(out[i], e->valuestring);
        if (!dup)
            out[n++] = e->valuestring;
    }
    return n;
}

static bool has_tag(const cJSON *d, const char *v)
{
    const char *t[8];
    int n = tags_of(d, t);
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i], v))
            return true;
    return false;
}

static bool num(const cJSON *d, const char *f, double *x)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(d, f);
    if (!v || cJSON_IsNull(v))
        return false;
    if (cJSON_IsString(v)) { /* a timestamp */
        int64_t us;
        cr_assert(qr_parse_timestamp(v->valuestring, strlen(v->valuestring), &us));
        *x = (double)us;
    } else {
        *x = v->valuedouble;
    }
    return true;
}

typedef struct Bucket {
    char key[64];
    uint64_t count;
} Bucket;

static bool g_numeric; /* ties of numeric keys go by value, of strings by bytes */

static int bucket_cmp(const void *x, const void *y)
{
    const Bucket *a = x, *b = y;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    if (g_numeric) {
        double p = strtod(a->key, NULL), q = strtod(b->key, NULL);
        return p < q ? -1 : p > q;
    }
    return strcmp(a->key, b->key);
}

static void bucket_add(Bucket *b, int *n, const char *key)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(b[i].key, key)) {
            b[i].count++;
            return;
        }
    snprintf(b[*n].key, sizeof b[*n].key, "%s", key);
    b[(*n)++].count = 1;
}

static int dbl_cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* ---- the checks ---- */

static QrSearchRes *run(Env *e, const char *q, const char *filter, QrFacetReq *f, int nf)
{
    QrSearchReq r;
    qr_search_req_init(&r);
    r.q = q;
    r.q_len = strlen(q);
    r.filter = filter;
    r.limit = 0;
    r.facets = f;
    r.n_facets = nf;
    QrSearchRes *res;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_search(e->t, &r, &res, &err), QR_OK, "%s %s: %s", q, filter ? filter : "",
                 err.message);
    return res;
}

/* A bucket key as the engine prints it, for the brute force's strings. */
static void key_text(const char *json, char *out, size_t cap)
{
    cJSON *j = cJSON_Parse(json);
    cr_assert(j, "key %s is not JSON", json);
    if (cJSON_IsString(j))
        snprintf(out, cap, "%s", j->valuestring);
    else
        snprintf(out, cap, "%.0f", j->valuedouble);
    cJSON_Delete(j);
}

static void check_terms(const QrFacetRes *r, Bucket *b, int nb, uint64_t missing, int size,
                        const char *what)
{
    qsort(b, (size_t)nb, sizeof *b, bucket_cmp);
    int shown = nb < size ? nb : size;
    cr_assert_eq(r->n_buckets, shown, "%s: %d buckets, want %d", what, r->n_buckets, shown);
    uint64_t all = 0, top = 0;
    for (int i = 0; i < nb; i++)
        all += b[i].count;
    for (int i = 0; i < shown; i++) {
        char k[64];
        key_text(r->buckets[i].key_json, k, sizeof k);
        cr_assert_str_eq(k, b[i].key, "%s: bucket %d", what, i);
        cr_assert_eq(r->buckets[i].count, b[i].count, "%s: bucket %s", what, b[i].key);
        top += b[i].count;
    }
    cr_assert_eq(r->other, all - top, "%s: other", what);
    cr_assert_eq(r->missing, missing, "%s: missing", what);
}

Test(facets, every_kind_equals_brute_force)
{
    Env e;
    env_open(&e);
    static const double pcts[] = {0, 25, 50, 99, 100};
    static const double pts[] = {50};
    QrFacetRange pr[] = {{.has_to = true, .to = 0},
                         {.has_from = true, .from = 0, .has_to = true, .to = 100},
                         {.has_from = true, .from = 50, .key = "fifty up"}};
    QrFacetRange tr[] = {{.has_to = true, .to = 1735689600.0e6 + 10 * 86400e6},
                         {.has_from = true, .from = 1735689600.0e6 + 10 * 86400e6}};
    QrFacetReq f[] = {
        {.kind = QR_FACET_TERMS, .field = "cat", .size = 3},
        {.kind = QR_FACET_TERMS, .field = "tags", .size = 100},
        {.kind = QR_FACET_TERMS, .field = "n", .size = 5},
        {.kind = QR_FACET_HISTOGRAM, .field = "price", .interval = 100},
        {.kind = QR_FACET_STATS, .field = "n"},
        {.kind = QR_FACET_STATS, .field = "price"},
        {.kind = QR_FACET_PERCENTILES, .field = "n", .percents = pcts, .n_percents = 5},
        {.kind = QR_FACET_PERCENTILES, .field = "ts", .percents = pts, .n_percents = 1},
        {.kind = QR_FACET_CARDINALITY, .field = "cat"},
        {.kind = QR_FACET_CARDINALITY, .field = "tags"},
        {.kind = QR_FACET_CARDINALITY, .field = "n"},
        {.kind = QR_FACET_RANGE, .field = "price", .ranges = pr, .n_ranges = 3},
        {.kind = QR_FACET_RANGE, .field = "ts", .ranges = tr, .n_ranges = 2},
    };
    const int NF = (int)(sizeof f / sizeof f[0]);
    const char *qs[] = {"*", "river", "*"};
    const char *fs[] = {NULL, "n > 0", "tags = 'b'"};
    for (int qi = 0; qi < 3; qi++) {
        QrSearchRes *res = run(&e, qs[qi], fs[qi], f, NF);
        cr_assert_eq(res->n_facets, NF);
        /* the match set */
        cJSON **m = calloc((size_t)e.n_live + 1, sizeof *m);
        int nm = 0;
        for (int i = 0; i < e.n_live; i++) {
            const cJSON *d = e.live[i];
            double x;
            bool ok = (qi != 1 || (has_word(d, "river") && num(d, "n", &x) && x > 0)) &&
                      (qi != 2 || has_tag(d, "b"));
            if (ok)
                m[nm++] = e.live[i];
        }
        cr_assert_eq(res->total, (uint64_t)nm, "query %d total", qi);
        Bucket *b = calloc(e.n_live * 4 + 16, sizeof *b);
        double *v = calloc((size_t)e.n_live + 1, sizeof *v);
        int nb;
        uint64_t missing;
        /* terms cat */
        nb = 0, missing = 0;
        for (int i = 0; i < nm; i++) {
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(m[i], "cat");
            if (c)
                bucket_add(b, &nb, c->valuestring);
            else
                missing++;
        }
        g_numeric = false;
        check_terms(&res->facets[0], b, nb, missing, 3, "terms cat");
        cr_assert_eq(res->facets[8].count, (uint64_t)nb, "cardinality cat");
        /* terms tags: each document once per distinct element */
        nb = 0, missing = 0;
        for (int i = 0; i < nm; i++) {
            const char *t[8];
            int n = tags_of(m[i], t);
            for (int k = 0; k < n; k++)
                bucket_add(b, &nb, t[k]);
            missing += n == 0;
        }
        check_terms(&res->facets[1], b, nb, missing, 100, "terms tags");
        cr_assert_eq(res->facets[9].count, (uint64_t)nb, "cardinality tags");
        /* terms n, cardinality n, stats n, percentiles n */
        nb = 0, missing = 0;
        int nv = 0;
        double sum = 0;
        for (int i = 0; i < nm; i++) {
            double x;
            if (!num(m[i], "n", &x)) {
                missing++;
                continue;
            }
            char k[32];
            snprintf(k, sizeof k, "%.0f", x);
            bucket_add(b, &nb, k);
            v[nv++] = x;
            sum += x;
        }
        g_numeric = true;
        check_terms(&res->facets[2], b, nb, missing, 5, "terms n");
        g_numeric = false;
        cr_assert_eq(res->facets[10].count, (uint64_t)nb, "cardinality n");
        qsort(v, (size_t)nv, sizeof *v, dbl_cmp);
        const QrFacetRes *st = &res->facets[4];
        cr_assert_eq(st->count, (uint64_t)nv);
        cr_assert_eq(st->missing, missing);
        if (nv) {
            cr_assert_eq(st->min, v[0]);
            cr_assert_eq(st->max, v[nv - 1]);
            cr_assert_eq(st->sum, sum);
        }
        cJSON *pj = cJSON_Parse(res->facets[6].values_json);
        cr_assert(pj, "%s", res->facets[6].values_json);
        for (int p = 0; p < 5; p++) {
            char key[16];
            snprintf(key, sizeof key, "%g", pcts[p]);
            const cJSON *got = cJSON_GetObjectItemCaseSensitive(pj, key);
            cr_assert(got, "percentile %s missing in %s", key, res->facets[6].values_json);
            double pos = pcts[p] / 100 * (nv - 1);
            double lo = v[(int)floor(pos)], hi = v[(int)ceil(pos)];
            double want = lo + (hi - lo) * (pos - floor(pos));
            cr_assert(fabs(got->valuedouble - want) <= 1e-9 * (1 + fabs(want)),
                      "percentile %s: %g, want %g", key, got->valuedouble, want);
        }
        cJSON_Delete(pj);
        /* histogram price, stats price, range price */
        nb = 0, missing = 0, nv = 0, sum = 0;
        uint64_t in_r[3] = {0};
        for (int i = 0; i < nm; i++) {
            double x;
            if (!num(m[i], "price", &x)) {
                missing++;
                continue;
            }
            char k[32];
            snprintf(k, sizeof k, "%.0f", floor(x / 100) * 100);
            bucket_add(b, &nb, k);
            sum += x;
            v[nv++] = x;
            for (int r = 0; r < 3; r++)
                in_r[r] += (!pr[r].has_from || x >= pr[r].from) && (!pr[r].has_to || x < pr[r].to);
        }
        const QrFacetRes *h = &res->facets[3];
        cr_assert_eq(h->n_buckets, nb, "histogram buckets");
        for (int i = 0; i < h->n_buckets; i++) {
            char k[64];
            key_text(h->buckets[i].key_json, k, sizeof k);
            bool found = false;
            for (int j = 0; j < nb; j++)
                if (!strcmp(b[j].key, k)) {
                    cr_assert_eq(h->buckets[i].count, b[j].count, "histogram %s", k);
                    found = true;
                }
            cr_assert(found, "histogram bucket %s", k);
            if (i)
                cr_assert_lt(strtod(h->buckets[i - 1].key_json, NULL),
                             strtod(h->buckets[i].key_json, NULL), "histogram order");
        }
        const QrFacetRes *sp = &res->facets[5];
        cr_assert_eq(sp->count, (uint64_t)nv);
        cr_assert(fabs(sp->sum - sum) <= 1e-9 * (1 + fabs(sum)));
        for (int r = 0; r < 3; r++)
            cr_assert_eq(res->facets[11].buckets[r].count, in_r[r], "range %d", r);
        cr_assert_str_eq(res->facets[11].buckets[0].key_json, "\"*-0\"");
        cr_assert_str_eq(res->facets[11].buckets[1].key_json, "\"0-100\"");
        cr_assert_str_eq(res->facets[11].buckets[2].key_json, "\"fifty up\"");
        cr_assert_null(res->facets[11].buckets[0].from_json);
        cr_assert_str_eq(res->facets[11].buckets[1].to_json, "100");
        /* timestamps: range and percentile */
        nv = 0;
        uint64_t in_t[2] = {0};
        for (int i = 0; i < nm; i++) {
            double x;
            if (!num(m[i], "ts", &x))
                continue;
            v[nv++] = x;
            in_t[x >= tr[0].to]++;
        }
        qsort(v, (size_t)nv, sizeof *v, dbl_cmp);
        cr_assert_eq(res->facets[12].buckets[0].count, in_t[0]);
        cr_assert_eq(res->facets[12].buckets[1].count, in_t[1]);
        cr_assert_str_eq(res->facets[12].buckets[0].to_json, "\"2025-01-11T00:00:00Z\"");
        cJSON *tj = cJSON_Parse(res->facets[7].values_json);
        const cJSON *med = cJSON_GetObjectItemCaseSensitive(tj, "50");
        cr_assert(cJSON_IsString(med), "%s", res->facets[7].values_json);
        double pos = 0.5 * (nv - 1);
        double want = v[(int)floor(pos)] + (v[(int)ceil(pos)] - v[(int)floor(pos)]) * (pos - floor(pos));
        int64_t got;
        cr_assert(qr_parse_timestamp(med->valuestring, strlen(med->valuestring), &got));
        cr_assert_eq(got, (int64_t)llround(want), "median timestamp");
        cJSON_Delete(tj);
        free(b);
        free(v);
        free(m);
        qr_search_res_free(res);
    }
    env_close(&e);
}

Test(facets, list_filters_match_elements)
{
    Env e;
    env_open(&e);
    const char *fs[] = {"tags = 'b'", "tags <> 'b'", "tags IN ('a', 'x,y')", "tags IS NULL",
                        "NOT (tags = 'd e')", "tags = 'NULL'", "tags = ''"};
    for (int k = 0; k < 7; k++) {
        QrSearchRes *res = run(&e, "*", fs[k], NULL, 0);
        uint64_t want = 0;
        for (int i = 0; i < e.n_live; i++) {
            const cJSON *d = e.live[i];
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(d, "tags");
            bool isnull = !t;
            switch (k) {
            case 0: want += has_tag(d, "b"); break;
            case 1: want += !isnull && !has_tag(d, "b"); break;
            case 2: want += has_tag(d, "a") || has_tag(d, "x,y"); break;
            case 3: want += isnull; break;
            case 4: want += !isnull && !has_tag(d, "d e"); break;
            case 5: want += has_tag(d, "NULL"); break;
            case 6: want += has_tag(d, ""); break;
            }
        }
        cr_assert_eq(res->total, want, "%s: %llu, want %llu", fs[k],
                     (unsigned long long)res->total, (unsigned long long)want);
        qr_search_res_free(res);
    }
    /* what a list does not take */
    const char *bad[] = {"tags > 'a'", "tags LIKE 'a%'", "tags BETWEEN 'a' AND 'b'"};
    for (int k = 0; k < 3; k++) {
        QrSearchReq r;
        qr_search_req_init(&r);
        r.q = "*";
        r.q_len = 1;
        r.filter = bad[k];
        QrSearchRes *res = NULL;
        QrError err;
        qr_error_clear(&err);
        cr_assert_eq(qr_search(e.t, &r, &res, &err), QR_ETYPE, "%s", bad[k]);
        cr_assert(strstr(err.message, "multi-valued keyword field \"tags\""), "%s", err.message);
        cr_assert_eq(err.offset, 0);
    }
    /* a stats facet on a list is refused */
    QrFacetReq sf = {.kind = QR_FACET_STATS, .field = "tags"};
    QrSearchReq r;
    qr_search_req_init(&r);
    r.q = "*";
    r.q_len = 1;
    r.facets = &sf;
    r.n_facets = 1;
    QrSearchRes *res = NULL;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_search(e.t, &r, &res, &err), QR_ETYPE);
    cr_assert(strstr(err.message, "keyword list"), "%s", err.message);
    env_close(&e);
}

Test(facets, lists_reach_the_column_as_array_text)
{
    Env e;
    env_open(&e);
    QrError err;
    qr_error_clear(&err);
    QrBatch *b;
    cr_assert_eq(qr_batch_begin(e.t, &b, &err), QR_OK);
    const char *d = "{\"id\": 99999, \"body\": \"x\", \"tags\": [\"q r\", \"s\\\"t\", \"NULL\", \"\"]}";
    cr_assert_eq(qr_batch_put(b, d, strlen(d), NULL, &err), QR_OK, "%s", err.message);
    const char *bad = "{\"id\": 99998, \"body\": \"x\", \"tags\": [\"a\", 3]}";
    cr_assert_eq(qr_batch_put(b, bad, strlen(bad), NULL, &err), QR_ETYPE);
    cr_assert(strstr(err.message, "array of strings"), "%s", err.message);
    const char *bad2 = "{\"id\": 99997, \"body\": \"x\", \"cat\": [\"a\"]}";
    qr_error_clear(&err);
    cr_assert_eq(qr_batch_put(b, bad2, strlen(bad2), NULL, &err), QR_ETYPE);
    cr_assert(strstr(err.hint, "\"multi\": true"), "%s", err.hint);
    cr_assert_eq(qr_batch_commit(b, &err), QR_OK);
    qr_batch_free(b);
    Snapshot *snap = table_snapshot(e.t->table);
    int si = snap->n_segs - 1;
    const Column *c = seg_column(snap->segs[si], schema_field_index(qr_table_schema(e.t), "tags"));
    cr_assert(c);
    const char *s;
    size_t n;
    cr_assert(col_get_str(c, seg_n_docs(snap->segs[si]) - 1, &s, &n));
    const char *want = "{\"q r\",\"s\\\"t\",\"NULL\",\"\"}";
    cr_assert(n == strlen(want) && !memcmp(s, want, n), "%.*s", (int)n, s);
    snapshot_release(snap);
    env_close(&e);
}
