/*
 * test_sql_grouping.c — GROUPING SETS / ROLLUP / CUBE and GROUPING() in
 * the hash aggregate (exec/op_hash_agg.c, plan/bind_group.c), DISTINCT ON
 * (op_unique.c over a sort) and the aggregates with DISTINCT, ORDER BY and
 * FILTER (stddev / variance, array_agg, string_agg; exec/agg.c), each
 * against a brute-force model of tables of 0, 1, 1025 and 3000 rows with
 * NULL keys; then PostgreSQL's errors and EXPLAIN.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "sql_test_env.h"
#include "query/sql.h"
#include "store/util.h"

#define N_SIZES 4
#define MAXROWS 3000

static const int NS[N_SIZES] = {0, 1, 1025, MAXROWS};
static const char *const SV[] = {"ant", "bee", "cat", "dog", "eel"};

typedef struct Doc {
    int id;
    int g;          /* -1: NULL */
    int s;          /* index into SV, -1: NULL */
    int k;          /* -1000: NULL */
    double v;       /* NAN: NULL */
} Doc;

static Env env;
static Doc docs[N_SIZES][MAXROWS];

static QrSqlResult *q_ok(const char *sql)
{
    QrError err;
    qr_error_clear(&err);
    QrSqlResult *r = NULL;
    int rc = qr_sql_exec(env.s, sql, strlen(sql), &r, &err);
    cr_assert_eq(rc, QR_OK, "%s: %s (%s)", sql, err.message, qr_error_sqlstate(&err));
    return r;
}

static void q_fails(const char *sql, const char *sqlstate)
{
    QrError err;
    qr_error_clear(&err);
    QrSqlResult *r = NULL;
    cr_assert_neq(qr_sql_exec(env.s, sql, strlen(sql), &r, &err), QR_OK, "%s should fail", sql);
    cr_assert_str_eq(qr_error_sqlstate(&err), sqlstate, "%s: %s", sql, err.message);
}

/* The text form of a result cell ("N" for NULL). */
static void cell_text(const QrSqlValue *v, char *out, size_t n)
{
    if (v->is_null) {
        snprintf(out, n, "N");
        return;
    }
    QrBuf b;
    qr_buf_init(&b);
    qr_sql_value_text(v, &b);
    snprintf(out, n, "%.*s", (int)b.len, b.data ? (char *)b.data : "");
    qr_buf_free(&b);
}

static void setup(void)
{
    qr_log_set_level(QR_LOG_ERROR);
    env_open(&env);
    QrError err;
    qr_error_clear(&err);
    const char *sj = "{\"primary_key\":\"id\",\"fields\":[{\"name\":\"g\",\"type\":\"int\"},"
                     "{\"name\":\"s\",\"type\":\"keyword\"},{\"name\":\"k\",\"type\":\"int\"},"
                     "{\"name\":\"v\",\"type\":\"float\"}]}";
    for (int t = 0; t < N_SIZES; t++) {
        QrSchema sc;
        cr_assert_eq(schema_from_json(sj, strlen(sj), &sc, &err), QR_OK, "%s", err.message);
        char name[32];
        snprintf(name, sizeof name, "t%d", NS[t]);
        QrTable *tb;
        cr_assert_eq(qr_table_create(env.db, name, &sc, &tb, &err), QR_OK, "%s", err.message);
        uint64_t rng = 77 + (uint64_t)t;
        QrBatch *b;
        cr_assert_eq(qr_batch_begin(tb, &b, &err), QR_OK, "%s", err.message);
        for (int i = 0; i < NS[t]; i++) {
            Doc *d = &docs[t][i];
            d->id = i + 1;
            d->g = eu_below(&rng, 9) == 0 ? -1 : (int)eu_below(&rng, 5);
            d->s = eu_below(&rng, 8) == 0 ? -1 : (int)eu_below(&rng, 5);
            d->k = eu_below(&rng, 10) == 0 ? -1000 : (int)eu_below(&rng, 21) - 10;
            d->v = eu_below(&rng, 10) == 0 ? NAN : ((double)eu_below(&rng, 801) - 400) / 8;
            char buf[256], part[64];
            int n = snprintf(buf, sizeof buf, "{\"id\":%d", d->id);
            if (d->g >= 0)
                n += snprintf(buf + n, sizeof buf - (size_t)n, ",\"g\":%d", d->g);
            if (d->s >= 0)
                n += snprintf(buf + n, sizeof buf - (size_t)n, ",\"s\":\"%s\"", SV[d->s]);
            if (d->k != -1000)
                n += snprintf(buf + n, sizeof buf - (size_t)n, ",\"k\":%d", d->k);
            if (!isnan(d->v)) {
                snprintf(part, sizeof part, ",\"v\":%.3f", d->v);
                n += snprintf(buf + n, sizeof buf - (size_t)n, "%s", part);
            }
            snprintf(buf + n, sizeof buf - (size_t)n, "}");
            cr_assert_eq(qr_batch_put(b, buf, strlen(buf), NULL, &err), QR_OK, "%s", err.message);
            if (i == NS[t] / 2)
                cr_assert_eq(qr_batch_commit(b, &err), QR_OK); /* two segments */
        }
        cr_assert_eq(qr_batch_commit(b, &err), QR_OK, "%s", err.message);
        qr_batch_free(b);
    }
}

static void teardown(void) { env_close(&env); }

TestSuite(grouping, .init = setup, .fini = teardown, .timeout = 600);

/* Rows as sorted lines, for comparing multisets. */
typedef struct Lines {
    char **v;
    int n, cap;
} Lines;

static void lines_add(Lines *l, const char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = realloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    l->v[l->n++] = strdup(s);
}

static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void lines_free(Lines *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* A result's rows as lines of cells joined by '|'. */
static void result_lines(const QrSqlResult *r, Lines *out)
{
    for (uint64_t i = 0; i < r->n_rows; i++) {
        static char line[16384], c[8192];
        line[0] = 0;
        for (int k = 0; k < r->n_cols; k++) {
            cell_text(&r->vals[i * (uint64_t)r->n_cols + (uint64_t)k], c, sizeof c);
            strncat(line, k ? "|" : "", sizeof line - strlen(line) - 1);
            strncat(line, c, sizeof line - strlen(line) - 1);
        }
        lines_add(out, line);
    }
}

static void assert_same_lines(Lines *got, Lines *want, bool sort, const char *sql)
{
    if (sort && got->n > 1)
        qsort(got->v, (size_t)got->n, sizeof *got->v, str_cmp);
    if (sort && want->n > 1)
        qsort(want->v, (size_t)want->n, sizeof *want->v, str_cmp);
    cr_assert_eq(got->n, want->n, "%s: %d rows, want %d", sql, got->n, want->n);
    for (int i = 0; i < got->n; i++) {
        cr_assert_str_eq(got->v[i], want->v[i], "%s: row %d: %s, want %s", sql, i, got->v[i], want->v[i]);
    }
}

/* ---- grouping sets ---- */

enum { KG = 1, KS = 2 }; /* the keys g and s as set bits */

typedef struct GCase {
    const char *group_by;
    int n_sets;
    int sets[8];
} GCase;

static const GCase GCASES[] = {
    {"ROLLUP(g, s)", 3, {KG | KS, KG, 0}},
    {"CUBE(g, s)", 4, {KG | KS, KG, KS, 0}},
    {"GROUPING SETS ((g), (s), ())", 3, {KG, KS, 0}},
    {"g, ROLLUP(s)", 2, {KG | KS, KG}},
    {"ROLLUP(g), ROLLUP(s)", 4, {KG | KS, KG, KS, 0}},
    {"ROLLUP(g), ROLLUP(g), s", 4, {KG | KS, KG | KS, KG | KS, KS}},
    {"DISTINCT ROLLUP(g), ROLLUP(g), s", 2, {KG | KS, KS}},
    {"GROUPING SETS (g, ROLLUP(s), ())", 4, {KG, KS, 0, 0}},
    {"ROLLUP((g, s))", 2, {KG | KS, 0}},
    {"GROUPING SETS ((), (g, s), ())", 3, {0, KG | KS, 0}},
    {"GROUPING SETS ((s, g), (1, s))", 2, {KG | KS, KG | KS}},
};

/* The model's rows of `SELECT g, s, g + 1, count(*), sum(k), GROUPING(g, s)`
 * under a case (`having`: only the sets where g is grouped). */
static void model_sets(int t, const GCase *c, bool having, Lines *out)
{
    for (int si = 0; si < c->n_sets; si++) {
        int set = c->sets[si];
        if (having && !(set & KG))
            continue;
        /* groups: (g, s) masked; 6 x 6 values with NULL as index 5 */
        long cnt[6][6] = {{0}}, sum[6][6] = {{0}}, nk[6][6] = {{0}};
        bool any[6][6] = {{false}};
        for (int i = 0; i < NS[t]; i++) {
            const Doc *d = &docs[t][i];
            int gi = set & KG && d->g >= 0 ? d->g : 5, sj = set & KS && d->s >= 0 ? d->s : 5;
            any[gi][sj] = true;
            cnt[gi][sj]++;
            if (d->k != -1000) {
                sum[gi][sj] += d->k;
                nk[gi][sj]++;
            }
        }
        if (set == 0)
            any[5][5] = true; /* the empty set: a row even over no rows */
        for (int gi = 0; gi < 6; gi++)
            for (int sj = 0; sj < 6; sj++) {
                if (!any[gi][sj])
                    continue;
                char line[256], gs[16], g1[16], ss[16], sm[32];
                snprintf(gs, sizeof gs, gi == 5 ? "N" : "%d", gi);
                snprintf(g1, sizeof g1, gi == 5 ? "N" : "%d", gi + 1);
                snprintf(ss, sizeof ss, "%s", sj == 5 ? "N" : SV[sj]);
                snprintf(sm, sizeof sm, nk[gi][sj] ? "%ld" : "N", sum[gi][sj]);
                snprintf(line, sizeof line, "%s|%s|%s|%ld|%s|%d", gs, ss, g1, cnt[gi][sj], sm,
                         (set & KG ? 0 : 2) | (set & KS ? 0 : 1));
                lines_add(out, line);
            }
    }
}

Test(grouping, grouping_sets_match_the_model)
{
    for (int t = 0; t < N_SIZES; t++)
        for (size_t ci = 0; ci < sizeof GCASES / sizeof *GCASES; ci++)
            for (int having = 0; having < 2; having++) {
                char sql[512];
                snprintf(sql, sizeof sql,
                         "SELECT g, s, g + 1, count(*), sum(k), GROUPING(g, s) FROM t%d GROUP BY %s%s",
                         NS[t], GCASES[ci].group_by, having ? " HAVING GROUPING(g) = 0" : "");
                QrSqlResult *r = q_ok(sql);
                Lines got = {0}, want = {0};
                result_lines(r, &got);
                model_sets(t, &GCASES[ci], having, &want);
                assert_same_lines(&got, &want, true, sql);
                lines_free(&got);
                lines_free(&want);
                qr_sql_result_free(r);
            }
}

/* Aggregates that keep their rows' values (string_agg, array_agg,
 * DISTINCT) give, per grouping set, what a plain GROUP BY by that set's
 * keys gives: the states survive the rows of every set. */
Test(grouping, collecting_aggregates_per_set_match_plain_group_by)
{
    const char *aggs = "count(*), string_agg(DISTINCT s, ',' ORDER BY s), array_agg(k ORDER BY id), "
                       "sum(DISTINCT k)";
    const char *plain[] = {"g, s", "g, NULL::integer", "NULL::integer, NULL::varchar"};
    const char *groups[] = {" GROUP BY g, s", " GROUP BY g", ""};
    for (int t = 0; t < N_SIZES; t++) {
        char sql[1024];
        Lines got = {0}, want = {0};
        snprintf(sql, sizeof sql, "SELECT g, s, %s FROM t%d GROUP BY ROLLUP(g, s)", aggs, NS[t]);
        QrSqlResult *r = q_ok(sql);
        result_lines(r, &got);
        qr_sql_result_free(r);
        for (int k = 0; k < 3; k++) {
            char q2[1024];
            snprintf(q2, sizeof q2, "SELECT %s, %s FROM t%d%s", plain[k], aggs, NS[t], groups[k]);
            r = q_ok(q2);
            result_lines(r, &want);
            qr_sql_result_free(r);
        }
        assert_same_lines(&got, &want, true, sql);
        lines_free(&got);
        lines_free(&want);
    }
}

/* ---- DISTINCT ON ---- */

static int don_cmp_g(const Doc *a, const Doc *b)
{
    /* ORDER BY g, v DESC NULLS LAST, id */
    if (a->g != b->g)
        return a->g < 0 ? 1 : b->g < 0 ? -1 : a->g - b->g;
    bool an = isnan(a->v), bn = isnan(b->v);
    if (an != bn)
        return an ? 1 : -1;
    if (!an && a->v != b->v)
        return a->v > b->v ? -1 : 1;
    return a->id - b->id;
}

static int qsort_don(const void *a, const void *b) { return don_cmp_g(*(const Doc *const *)a, *(const Doc *const *)b); }

Test(grouping, distinct_on_keeps_the_first_row_in_order)
{
    for (int t = 0; t < N_SIZES; t++) {
        int n = NS[t];
        const Doc **sorted = malloc(((size_t)n + 1) * sizeof *sorted);
        for (int i = 0; i < n; i++)
            sorted[i] = &docs[t][i];
        qsort(sorted, (size_t)n, sizeof *sorted, qsort_don);
        Lines want = {0}, want_lim = {0};
        for (int i = 0; i < n; i++)
            if (i == 0 || sorted[i]->g != sorted[i - 1]->g) {
                char line[64], gs[16];
                snprintf(gs, sizeof gs, sorted[i]->g < 0 ? "N" : "%d", sorted[i]->g);
                snprintf(line, sizeof line, "%d|%s", sorted[i]->id, gs);
                lines_add(&want, line);
            }
        for (int i = 1; i < want.n && i < 3; i++)
            lines_add(&want_lim, want.v[i]);
        char sql[256];
        snprintf(sql, sizeof sql, "SELECT DISTINCT ON (g) id, g FROM t%d ORDER BY g, v DESC NULLS LAST, id", n);
        QrSqlResult *r = q_ok(sql);
        Lines got = {0};
        result_lines(r, &got);
        assert_same_lines(&got, &want, false, sql);
        lines_free(&got);
        qr_sql_result_free(r);
        /* LIMIT / OFFSET count the distinct rows */
        snprintf(sql, sizeof sql, "SELECT DISTINCT ON (g) id, g FROM t%d ORDER BY g, v DESC NULLS LAST, id "
                 "LIMIT 2 OFFSET 1", n);
        r = q_ok(sql);
        result_lines(r, &got);
        assert_same_lines(&got, &want_lim, false, sql);
        lines_free(&got);
        qr_sql_result_free(r);
        lines_free(&want);
        lines_free(&want_lim);
        /* an expression outside the select list, no ORDER BY beyond it:
         * one row per value of k % 3, sorted by it */
        snprintf(sql, sizeof sql, "SELECT DISTINCT ON (k %% 3) k %% 3, id FROM t%d ORDER BY k %% 3, id DESC", n);
        r = q_ok(sql);
        int best[6];
        bool seen[6] = {false};
        for (int i = 0; i < n; i++) {
            const Doc *d = &docs[t][i];
            int key = d->k == -1000 ? 5 : d->k % 3 + 2; /* -2..2 -> 0..4, NULL last */
            if (!seen[key] || d->id > best[key])
                best[key] = d->id;
            seen[key] = true;
        }
        uint64_t row = 0;
        for (int key = 0; key < 6; key++) {
            if (!seen[key])
                continue;
            cr_assert(row < r->n_rows, "%s: too few rows", sql);
            cr_assert_eq(r->vals[row * 2].is_null, key == 5, "%s: row %llu", sql, (unsigned long long)row);
            if (key != 5)
                cr_assert_eq(r->vals[row * 2].u.i, key - 2);
            cr_assert_eq(r->vals[row * 2 + 1].u.i, best[key], "%s: key %d", sql, key - 2);
            row++;
        }
        cr_assert_eq(r->n_rows, row, "%s", sql);
        qr_sql_result_free(r);
        free(sorted);
    }
}

/* ---- aggregates ---- */

/* The model's line for group g (-1: NULL) of the aggregate query below. */
static void model_aggs(int t, int g, char *line, size_t n)
{
    static const Doc *in[MAXROWS];
    int m = 0;
    for (int i = 0; i < NS[t]; i++)
        if (docs[t][i].g == g)
            in[m++] = &docs[t][i];
    /* stddev / var_pop over v, two-pass (not the engine's running formula),
     * in millionths */
    double sum = 0, ss = 0;
    int nv = 0;
    for (int i = 0; i < m; i++)
        if (!isnan(in[i]->v)) {
            sum += in[i]->v;
            nv++;
        }
    double mean = nv ? sum / nv : 0;
    for (int i = 0; i < m; i++)
        if (!isnan(in[i]->v))
            ss += (in[i]->v - mean) * (in[i]->v - mean);
    char sd[32] = "N", vp[32] = "N";
    if (nv > 1)
        snprintf(sd, sizeof sd, "%lld", llround(sqrt(ss / (nv - 1)) * 1e6));
    if (nv > 0)
        snprintf(vp, sizeof vp, "%lld", llround(ss / nv * 1e6));
    /* array_agg(id ORDER BY v DESC NULLS LAST, id) */
    static const Doc *o[MAXROWS];
    memcpy(o, in, (size_t)m * sizeof *o);
    for (int i = 1; i < m; i++) /* insertion sort */
        for (int j = i; j > 0; j--) {
            const Doc *a = o[j - 1], *b = o[j];
            bool an = isnan(a->v), bn = isnan(b->v);
            bool swap = an != bn ? an : (!an && a->v != b->v) ? a->v < b->v : a->id > b->id;
            if (!swap)
                break;
            o[j - 1] = b;
            o[j] = a;
        }
    QrBuf arr, fa;
    qr_buf_init(&arr);
    qr_buf_init(&fa);
    for (int i = 0; i < m; i++)
        qr_buf_printf(&arr, "%s%d", i ? "," : "{", o[i]->id);
    qr_buf_printf(&arr, m ? "}" : "N");
    /* string_agg(DISTINCT s, ',' ORDER BY s DESC), count(DISTINCT s) */
    bool has[5] = {false};
    for (int i = 0; i < m; i++)
        if (in[i]->s >= 0)
            has[in[i]->s] = true;
    char sa[64] = "N";
    int nd = 0;
    for (int v = 4; v >= 0; v--)
        if (has[v]) {
            if (nd++ == 0)
                sa[0] = 0;
            else
                strcat(sa, ",");
            strcat(sa, SV[v]);
        }
    /* sum(DISTINCT k) */
    bool kseen[21] = {false};
    long sdk = 0;
    int nk = 0;
    for (int i = 0; i < m; i++)
        if (in[i]->k != -1000 && !kseen[in[i]->k + 10]) {
            kseen[in[i]->k + 10] = true;
            sdk += in[i]->k;
            nk++;
        }
    char sk[32] = "N";
    if (nk)
        snprintf(sk, sizeof sk, "%ld", sdk);
    /* array_agg(s ORDER BY id) FILTER (WHERE k > 0): NULL elements kept */
    int nf = 0;
    for (int i = 0; i < m; i++) /* (in is in id order) */
        if (in[i]->k != -1000 && in[i]->k > 0)
            qr_buf_printf(&fa, "%s%s", nf++ ? "," : "{", in[i]->s < 0 ? "NULL" : SV[in[i]->s]);
    qr_buf_printf(&fa, nf ? "}" : "N");
    char gs[8];
    snprintf(gs, sizeof gs, g < 0 ? "N" : "%d", g);
    snprintf(line, n, "%s|%d|%s|%s|%.*s|%s|%d|%s|%.*s", gs, m, sd, vp, (int)arr.len, (char *)arr.data, sa,
             nd, sk, (int)fa.len, (char *)fa.data);
    qr_buf_free(&arr);
    qr_buf_free(&fa);
}

Test(grouping, ordered_and_distinct_aggregates_match_the_model)
{
    for (int t = 0; t < N_SIZES; t++) {
        char sql[1024];
        snprintf(sql, sizeof sql,
                 "SELECT g, count(*), round(stddev(v) * 1000000), round(var_pop(v) * 1000000), "
                 "array_agg(id ORDER BY v DESC NULLS LAST, id), string_agg(DISTINCT s, ',' ORDER BY s DESC), "
                 "count(DISTINCT s), sum(DISTINCT k), array_agg(s ORDER BY id) FILTER (WHERE k > 0) "
                 "FROM t%d GROUP BY g", NS[t]);
        QrSqlResult *r = q_ok(sql);
        Lines got = {0}, want = {0};
        result_lines(r, &got);
        bool present[6] = {false};
        for (int i = 0; i < NS[t]; i++)
            present[docs[t][i].g < 0 ? 5 : docs[t][i].g] = true;
        for (int g = 0; g < 6; g++)
            if (present[g]) {
                char line[8192];
                model_aggs(t, g == 5 ? -1 : g, line, sizeof line);
                lines_add(&want, line);
            }
        assert_same_lines(&got, &want, true, sql);
        lines_free(&got);
        lines_free(&want);
        qr_sql_result_free(r);
    }
}

/* The empty grouping set has a row even over no rows, once per time it
 * is listed; GROUP BY with keys has none. */
Test(grouping, empty_sets_over_no_rows)
{
    QrSqlResult *r = q_ok("SELECT count(*), sum(k) FROM t0 GROUP BY ()");
    cr_assert_eq(r->n_rows, 1);
    cr_assert_eq(r->vals[0].u.i, 0);
    cr_assert(r->vals[1].is_null);
    qr_sql_result_free(r);
    r = q_ok("SELECT count(*) FROM t0 GROUP BY (), ()"); /* the product of {()} and {()} */
    cr_assert_eq(r->n_rows, 1);
    qr_sql_result_free(r);
    r = q_ok("SELECT count(*) FROM t0 GROUP BY GROUPING SETS ((), ())");
    cr_assert_eq(r->n_rows, 2);
    qr_sql_result_free(r);
    r = q_ok("SELECT g, count(*) FROM t0 GROUP BY ROLLUP(g)");
    cr_assert_eq(r->n_rows, 1);
    cr_assert(r->vals[0].is_null);
    qr_sql_result_free(r);
    r = q_ok("SELECT g, count(*) FROM t0 GROUP BY g");
    cr_assert_eq(r->n_rows, 0);
    qr_sql_result_free(r);
}

Test(grouping, postgresql_errors)
{
    q_fails("SELECT DISTINCT ON (g) g, id FROM t1 ORDER BY id", "42P10");
    q_fails("SELECT DISTINCT ON (g, s) g FROM t1 ORDER BY g, k, s", "42P10");
    q_fails("SELECT DISTINCT ON (9) g FROM t1", "42P10");
    q_fails("SELECT grouping(k) FROM t1 GROUP BY g", "42803");
    q_fails("SELECT grouping(g) FROM t1", "42803");
    q_fails("SELECT count(*) FROM t1 WHERE grouping(g) = 0 GROUP BY g", "42803");
    q_fails("SELECT count(*) FROM t1 GROUP BY CUBE(g, g, g, g, g, g, g, g, g, g, g, g, g)", "54011");
    q_fails("SELECT k, count(*) FROM t1 GROUP BY ROLLUP(g)", "42803");
    q_fails("SELECT string_agg(DISTINCT s, ',' ORDER BY k) FROM t1", "42P10");
    q_fails("SELECT stddev(s) FROM t1", "42883");
}

Test(grouping, explain_shows_the_sets_and_the_unique)
{
    QrSqlResult *r = q_ok("EXPLAIN SELECT g, s, count(*) FROM t1 GROUP BY CUBE(g, s)");
    QrBuf b;
    qr_buf_init(&b);
    for (uint64_t i = 0; i < r->n_rows; i++)
        qr_buf_printf(&b, "%.*s\n", (int)r->vals[i].u.s.n, r->vals[i].u.s.s);
    qr_buf_putc(&b, 0);
    const char *text = (const char *)b.data;
    cr_assert(strstr(text, "MixedAggregate") && strstr(text, "Hash Key: g, s\n") &&
              strstr(text, "Hash Key: g\n") && strstr(text, "Hash Key: s\n") && strstr(text, "Group Key: ()"),
              "%s", text);
    qr_sql_result_free(r);
    r = q_ok("EXPLAIN SELECT DISTINCT ON (g) g, id FROM t1 ORDER BY g, id");
    b.len = 0;
    for (uint64_t i = 0; i < r->n_rows; i++)
        qr_buf_printf(&b, "%.*s\n", (int)r->vals[i].u.s.n, r->vals[i].u.s.s);
    qr_buf_putc(&b, 0);
    text = (const char *)b.data;
    const char *u = strstr(text, "Unique"), *s = strstr(text, "Sort Key: g, id");
    cr_assert(u && s && u < s, "Unique over a sort by the keys:\n%s", text);
    qr_buf_free(&b);
    qr_sql_result_free(r);
}
