/*
 * test_rank.c — ranking expressions (query/rank.c) and qr_search's "rank"
 * (search.c), against brute force.
 *
 * The parser: values of hand-computed expressions, errors with their
 * positions.  The bound: for random intervals and random points inside
 * them, every value is at most the bound's upper end.  The search: a random
 * table (three segments, deletes, NULLs) searched with expressions that grow
 * with the score and ones that do not, for several queries and k; the
 * brute force ranks every match (BM25 scores from an unranked search of
 * every match, field values from the stored JSON) by (float)rank desc, doc
 * asc.  Expressions that grow with the score must rank fewer candidates
 * than there are matches, and exactly as well.
 */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "query/quarry.h"
#include "query/rank.h"
#include "store/util.h"

static char *dir;
static void quiet(void) { qr_log_set_level(QR_LOG_ERROR); }
static void cleanup(void)
{
    if (dir) {
        eu_rmtree(dir);
        free(dir);
        dir = NULL;
    }
}
TestSuite(rank, .init = quiet, .fini = cleanup);

static const char *SCHEMA = "{\"primary_key\":\"id\",\"fields\":["
                            "{\"name\":\"body\",\"type\":\"text\",\"language\":\"none\"},"
                            "{\"name\":\"views\",\"type\":\"int\"},"
                            "{\"name\":\"price\",\"type\":\"float\"},"
                            "{\"name\":\"hot\",\"type\":\"bool\"},"
                            "{\"name\":\"ts\",\"type\":\"timestamp\"},"
                            "{\"name\":\"cat\",\"type\":\"keyword\"}]}";

static void schema(QrSchema *s)
{
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(schema_from_json(SCHEMA, strlen(SCHEMA), s, &e), QR_OK, "%s", e.message);
}

Test(rank, parse_and_eval)
{
    QrSchema s;
    schema(&s);
    QrArena *a = qr_arena_new(0);
    static const struct {
        const char *text;
        double score, views, price;
        double want;
    } OK[] = {
        {"score * log(1 + views)", 2, 9, 0, 2 * log(10)},
        {"score*log1p(views)+price/2", 1.5, 3, 7, 1.5 * log1p(3) + 3.5},
        {"-score + max(views, price) - min(1, 2)", 4, 3, 8, -4 + 8 - 1},
        {"sqrt(abs(-views)) * (score)", 3, 16, 0, 12},
        {"exp(0) + log10(100) + 2 * -3", 0, 0, 0, 1 + 2 - 6},
        {"SCORE * views", 2, 5, 0, 10},
        {"log(views)", 1, 0, 0, -INFINITY},       /* log 0: ranks last */
        {"sqrt(price - 10)", 1, 0, 1, -INFINITY}, /* NaN: ranks last */
        {"min(sqrt(price - 10), 5)", 1, 0, 1, -INFINITY},
    };
    for (size_t i = 0; i < sizeof OK / sizeof OK[0]; i++) {
        QrError e;
        qr_error_clear(&e);
        RankExpr *x;
        cr_assert_eq(rank_parse(&s, OK[i].text, a, &x, &e), QR_OK, "%s: %s", OK[i].text, e.message);
        double vals[RANK_MAX_FIELDS] = {0};
        for (int f = 0; f < rank_n_fields(x); f++) {
            const char *name = s.fields[rank_field(x, f)].name;
            vals[f] = !strcmp(name, "views") ? OK[i].views : OK[i].price;
        }
        double got = rank_eval(x, OK[i].score, vals);
        cr_assert(got == OK[i].want || fabs(got - OK[i].want) < 1e-12, "%s = %g, want %g",
                  OK[i].text, got, OK[i].want);
    }
    static const struct {
        const char *text;
        int code, offset; /* 0-based */
    } BAD[] = {
        {"score +", QR_ESYNTAX, 7},        {"score * )", QR_ESYNTAX, 8},
        {"nope * 2", QR_ENOTFOUND, 0},     {"score * cat", QR_ETYPE, 8},
        {"body + 1", QR_ETYPE, 0},         {"frob(score)", QR_ESYNTAX, 0},
        {"max(score)", QR_ESYNTAX, 9},     {"score 2", QR_ESYNTAX, 6},
        {"(score", QR_ESYNTAX, 6},         {"", QR_ESYNTAX, 0},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        QrError e;
        qr_error_clear(&e);
        RankExpr *x = (RankExpr *)1;
        cr_assert_eq(rank_parse(&s, BAD[i].text, a, &x, &e), BAD[i].code, "%s: %s", BAD[i].text,
                     e.message);
        cr_assert_null(x);
        cr_assert_eq(e.offset, BAD[i].offset, "%s: offset %d", BAD[i].text, e.offset);
    }
    char deep[600];
    memset(deep, '(', 300);
    strcpy(deep + 300, "score");
    QrError e;
    qr_error_clear(&e);
    RankExpr *x;
    cr_assert_eq(rank_parse(&s, deep, a, &x, &e), QR_ELIMIT);
    qr_arena_free(a);
}

/* Every value at points inside the intervals is at most the bound. */
Test(rank, bound_holds)
{
    QrSchema s;
    schema(&s);
    QrArena *a = qr_arena_new(0);
    static const char *EX[] = {
        "score * log(1 + views)", "score + price", "score * price - views / 3",
        "views - score",          "log(price) * score", "max(score, views) * min(price, 2)",
        "sqrt(views) + exp(score / 10)", "abs(price - score) * -1", "score / (price + 100)",
        "log1p(price) * log10(views + 1) * score"};
    uint64_t rng = 99;
    for (size_t i = 0; i < sizeof EX / sizeof EX[0]; i++) {
        QrError e;
        qr_error_clear(&e);
        RankExpr *x;
        cr_assert_eq(rank_parse(&s, EX[i], a, &x, &e), QR_OK, "%s", e.message);
        for (int trial = 0; trial < 2000; trial++) {
            double lo[RANK_MAX_FIELDS], hi[RANK_MAX_FIELDS], v[RANK_MAX_FIELDS];
            for (int f = 0; f < rank_n_fields(x); f++) {
                double p = (double)eu_below(&rng, 2000) / 10 - 50;
                double q = (double)eu_below(&rng, 2000) / 10 - 50;
                lo[f] = p < q ? p : q;
                hi[f] = p < q ? q : p;
            }
            double s_hi = (double)eu_below(&rng, 300) / 10, b_lo, b_hi;
            rank_bound(x, 0, s_hi, lo, hi, &b_lo, &b_hi);
            for (int pt = 0; pt < 20; pt++) {
                for (int f = 0; f < rank_n_fields(x); f++)
                    v[f] = fmin(hi[f], lo[f] + (hi[f] - lo[f]) * (double)eu_below(&rng, 1001) / 1000);
                double sc = fmin(s_hi, s_hi * (double)eu_below(&rng, 1001) / 1000);
                double r = rank_eval(x, sc, v);
                cr_assert(r <= b_hi, "%s at score %g: %g above the bound %g", EX[i], sc, r, b_hi);
                cr_assert(r == -INFINITY || r >= b_lo, "%s: %g below the lower bound %g", EX[i],
                          r, b_lo);
            }
        }
    }
    qr_arena_free(a);
}

/* ---- the search against brute force ---- */

static const char *WORDS[] = {"red", "green", "blue", "apple", "pear"};

static char *random_doc(uint64_t *rng, int64_t id)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)id);
    char body[128] = "";
    for (int i = 0, n = 1 + (int)eu_below(rng, 6); i < n; i++) {
        strcat(body, WORDS[eu_chance(rng, 0.5) ? 0 : eu_below(rng, 5)]);
        strcat(body, " ");
    }
    cJSON_AddStringToObject(o, "body", body);
    if (!eu_chance(rng, 0.1))
        cJSON_AddNumberToObject(o, "views", (double)eu_below(rng, 5000));
    if (!eu_chance(rng, 0.1))
        cJSON_AddNumberToObject(o, "price", (double)eu_below(rng, 4000) / 8.0 - 50);
    if (!eu_chance(rng, 0.2))
        cJSON_AddBoolToObject(o, "hot", eu_chance(rng, 0.3));
    if (!eu_chance(rng, 0.1)) {
        char ts[40];
        qr_format_timestamp((int64_t)(1735689600 + (int64_t)eu_below(rng, 30 * 86400)) * 1000000,
                            ts, sizeof ts);
        cJSON_AddStringToObject(o, "ts", ts);
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* The test's own evaluation of expression `which` (the EXPRS below). */
static double brute(int which, double score, const cJSON *d)
{
    double v[4] = {0, 0, 0, 0}; /* views, price, hot, ts (seconds) */
    static const char *F[] = {"views", "price", "hot", "ts"};
    for (int f = 0; f < 4; f++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(d, F[f]);
        if (cJSON_IsNumber(x))
            v[f] = x->valuedouble;
        else if (cJSON_IsBool(x))
            v[f] = cJSON_IsTrue(x);
        else if (cJSON_IsString(x)) {
            int64_t us;
            cr_assert(qr_parse_timestamp(x->valuestring, strlen(x->valuestring), &us));
            v[f] = (double)us / 1e6;
        }
    }
    double r;
    switch (which) {
    case 0: r = score * log(1 + v[0]); break;
    case 1: r = score + v[2] * 3; break;
    case 2: r = score * (1 + v[2]) + (v[3] - 1735689600) / 86400 / 10; break;
    case 3: r = v[0] - score * 100; break;
    case 4: r = v[1]; break;
    default: r = sqrt(v[1]) * score; break;
    }
    return isnan(r) || r == -INFINITY ? -INFINITY : r;
}
static const char *EXPRS[] = {
    "score * log(1 + views)", "score + hot * 3", "score * (1 + hot) + (ts - 1735689600) / 86400 / 10",
    "views - score * 100",    "price",           "sqrt(price) * score"};
#define N_EXPRS 6
/* expressions whose field part is small beside BM25's spread, so a few
 * rounds must settle them (the ts term of the third spans 3 points: it may
 * need every match) */
static const bool GROWS[N_EXPRS] = {true, true, false, false, false, false};

typedef struct Hit {
    float rank;
    int64_t doc;
} Hit;

static int hit_cmp(const void *x, const void *y)
{
    const Hit *a = x, *b = y;
    if (a->rank != b->rank)
        return a->rank > b->rank ? -1 : 1;
    return a->doc < b->doc ? -1 : a->doc > b->doc;
}

Test(rank, search_matches_brute_force)
{
    dir = eu_tmpdir("rank");
    QrDbOpts o;
    qr_db_opts_default(&o);
    o.background_merge = false;
    o.fsync = QR_FSYNC_OFF;
    QrError err;
    qr_error_clear(&err);
    QrDb *db;
    QrTable *t;
    cr_assert_eq(qr_db_open(dir, &o, &db, &err), QR_OK, "%s", err.message);
    QrSchema s;
    schema(&s);
    cr_assert_eq(qr_table_create(db, "t", &s, &t, &err), QR_OK, "%s", err.message);
    uint64_t rng = 7;
    for (int round = 0; round < 3; round++) {
        char *d[1500];
        for (int i = 0; i < 1500; i++)
            d[i] = random_doc(&rng, (int64_t)eu_below(&rng, 5000));
        eu_put_docs(t, d, 1500);
        eu_delete_random(t, &rng, 200, 5000);
    }
    static const char *QS[] = {"red", "apple OR pear", "green blue", "red AND apple"};
    static const int KS[] = {1, 7, 40};
    for (size_t qi = 0; qi < sizeof QS / sizeof QS[0]; qi++) {
        /* every match with its BM25 score and stored document */
        QrSearchReq all;
        qr_search_req_init(&all);
        all.q = QS[qi];
        all.q_len = strlen(QS[qi]);
        all.limit = 100000;
        all.fetch_docs = true;
        QrSearchRes *ra;
        cr_assert_eq(qr_search(t, &all, &ra, &err), QR_OK, "%s", err.message);
        cr_assert_gt(ra->n_hits, 100);
        Hit *want = calloc((size_t)ra->n_hits, sizeof *want);
        for (int w = 0; w < N_EXPRS; w++) {
            for (int h = 0; h < ra->n_hits; h++) {
                cJSON *d = cJSON_Parse(ra->hits[h].doc_json);
                want[h] = (Hit){(float)brute(w, ra->hits[h].score, d), ra->hits[h].doc};
                cJSON_Delete(d);
            }
            qsort(want, (size_t)ra->n_hits, sizeof *want, hit_cmp);
            for (size_t ki = 0; ki < sizeof KS / sizeof KS[0]; ki++) {
                QrSearchReq rq;
                qr_search_req_init(&rq);
                rq.q = QS[qi];
                rq.q_len = strlen(QS[qi]);
                rq.limit = KS[ki];
                rq.rank = EXPRS[w];
                QrSearchRes *rr;
                cr_assert_eq(qr_search(t, &rq, &rr, &err), QR_OK, "%s", err.message);
                cr_assert_eq(rr->n_hits, KS[ki]);
                cr_assert_eq(rr->total, (uint64_t)ra->n_hits);
                for (int h = 0; h < rr->n_hits; h++)
                    cr_assert(rr->hits[h].doc == want[h].doc && rr->hits[h].score == want[h].rank,
                              "q=%s rank=%s k=%d hit %d: doc %lld rank %.9g, brute force doc "
                              "%lld rank %.9g",
                              QS[qi], EXPRS[w], KS[ki], h, (long long)rr->hits[h].doc,
                              rr->hits[h].score, (long long)want[h].doc, want[h].rank);
                const QrSearchStats *st = &rr->stats;
                cr_assert_str_eq(st->strategy, "rank");
                if (GROWS[w] && KS[ki] < 10)
                    cr_assert(!st->rank_exhaustive && st->rank_candidates < (uint64_t)ra->n_hits,
                              "q=%s rank=%s k=%d: %llu candidates of %d matches (pruning)",
                              QS[qi], EXPRS[w], KS[ki], (unsigned long long)st->rank_candidates,
                              ra->n_hits);
                qr_search_res_free(rr);
            }
        }
        free(want);
        qr_search_res_free(ra);
    }
    /* refusals */
    QrSearchReq rq;
    qr_search_req_init(&rq);
    rq.q = "red";
    rq.q_len = 3;
    rq.limit = 3;
    rq.rank = "score * nope";
    QrSearchRes *rr = NULL;
    qr_error_clear(&err);
    cr_assert_eq(qr_search(t, &rq, &rr, &err), QR_ENOTFOUND);
    cr_assert_str_eq(err.detail, QR_RANK_ERROR_DETAIL);
    cr_assert_eq(err.offset, 8); /* 0-based: "nope" */
    rq.rank = "score";
    rq.sort = "views:desc";
    qr_error_clear(&err);
    cr_assert_eq(qr_search(t, &rq, &rr, &err), QR_EINVAL);
    qr_db_close(db);
}
