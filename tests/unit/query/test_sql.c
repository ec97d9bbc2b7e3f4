/*
 * test_sql.c — the SQL engine through sql.h: expressions and three-valued
 * logic, errors with SQLSTATE and position, prepared statements with typed
 * parameters, batched fetch, the access-path planner (data built so that
 * each path is cheapest; EXPLAIN names it; every forced path returns the
 * same rows, checked against a brute-force scan of the generated data),
 * statement timeout and the per-query memory cap; and (suite sql_text, at
 * the end) full-text predicates as a scan, against a model and qr_search.
 *
 * The table is built with the engine's API (qr_table_create + qr_batch_put), so
 * these tests depend on nothing but the query engine.
 */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "query/sql.h"
#include "store/mem.h"
#include "store/util.h"

#define N_DOCS 20000
#define N_CATS 100

static char *dir;
static QrDb *db;
static QrSqlSession *sess;

/* the generated rows, for brute-force answers */
static struct {
    int n, cat, has_rare;
    double f;
} model[N_DOCS];

/* A fresh database in a temporary directory (no background merges, so the
 * segments are the ones the test commits) with one table of schema sj. */
static QrTable *db_with_table(const char *name, const char *sj)
{
    qr_log_set_level(QR_LOG_ERROR);
    dir = eu_tmpdir("sql");
    QrError err;
    qr_error_clear(&err);
    QrDbOpts o;
    qr_db_opts_default(&o);
    o.background_merge = false;
    cr_assert_eq(qr_db_open(dir, &o, &db, &err), QR_OK, "%s", err.message);
    QrSchema s;
    cr_assert_eq(schema_from_json(sj, strlen(sj), &s, &err), QR_OK, "%s", err.message);
    QrTable *t;
    cr_assert_eq(qr_table_create(db, name, &s, &t, &err), QR_OK, "%s", err.message);
    return t;
}

static void setup(void)
{
    QrTable *t = db_with_table("docs", "{\"primary_key\":\"id\",\"fields\":["
                                       "{\"name\":\"title\",\"type\":\"text\",\"language\":\"english\"},"
                                       "{\"name\":\"cat\",\"type\":\"keyword\"},"
                                       "{\"name\":\"n\",\"type\":\"int\"},"
                                       "{\"name\":\"f\",\"type\":\"float\"}]}");
    QrError err;
    qr_error_clear(&err);
    uint64_t rng = 42;
    char buf[512];
    QrBatch *b;
    cr_assert_eq(qr_batch_begin(t, &b, &err), QR_OK, "%s", err.message);
    for (int i = 0; i < N_DOCS; i++) {
        /* n follows the id (sorted: zone maps prune ranges), cat is uniform
         * over 100 values, "common" is in every title, "rare" in 7 */
        model[i].n = i;
        model[i].cat = (int)eu_below(&rng, N_CATS);
        model[i].has_rare = i % 3331 == 7;
        model[i].f = (double)eu_below(&rng, 1000) / 10.0;
        snprintf(buf, sizeof buf,
                 "{\"id\":%d,\"title\":\"common words %s here\",\"cat\":\"c%d\",\"n\":%d,\"f\":%.1f}",
                 i, model[i].has_rare ? "rare" : "plain", model[i].cat, i, model[i].f);
        cr_assert_eq(qr_batch_put(b, buf, strlen(buf), NULL, &err), QR_OK, "%s", err.message);
        if (i == N_DOCS / 2)
            cr_assert_eq(qr_batch_commit(b, &err), QR_OK); /* two segments */
    }
    cr_assert_eq(qr_batch_commit(b, &err), QR_OK, "%s", err.message);
    qr_batch_free(b);
    cr_assert_eq(qr_sql_session_new(db, &sess, &err), QR_OK);
}

static void teardown(void)
{
    qr_sql_session_free(sess);
    qr_db_close(db);
    eu_rmtree(dir);
    free(dir);
}

TestSuite(sql, .init = setup, .fini = teardown);

static QrSqlResult *run(const char *sql)
{
    QrError err;
    qr_error_clear(&err);
    QrSqlResult *r = NULL;
    int rc = qr_sql_exec(sess, sql, strlen(sql), &r, &err);
    cr_assert_eq(rc, QR_OK, "%s: %s (%s)", sql, err.message, qr_error_sqlstate(&err));
    return r;
}

static void fails(const char *sql, const char *sqlstate, int64_t pos)
{
    QrError err;
    qr_error_clear(&err);
    QrSqlResult *r = NULL;
    int rc = qr_sql_exec(sess, sql, strlen(sql), &r, &err);
    cr_assert_neq(rc, QR_OK, "%s should fail", sql);
    cr_assert_null(r);
    cr_assert_str_eq(qr_error_sqlstate(&err), sqlstate, "%s: %s (%s)", sql, err.message,
                     qr_error_sqlstate(&err));
    if (pos > 0)
        cr_assert_eq(err.offset, pos, "%s: position %lld, want %lld", sql, (long long)err.offset,
                     (long long)pos);
}

/* The text form of row r, column c ("NULL" for NULL). */
static const char *cell(const QrSqlResult *r, uint64_t row, int col)
{
    static char out[8][256];
    static int k;
    const QrSqlValue *v = &r->vals[row * (uint64_t)r->n_cols + (uint64_t)col];
    char *o = out[k++ & 7];
    if (v->is_null)
        return strcpy(o, "NULL");
    QrBuf b;
    qr_buf_init(&b);
    qr_sql_value_text(v, &b);
    snprintf(o, 256, "%.*s", (int)b.len, b.data ? (char *)b.data : "");
    qr_buf_free(&b);
    return o;
}

Test(sql, three_valued_logic_and_expressions)
{
    QrSqlResult *r = run("SELECT NULL AND false, NULL OR true, NULL = NULL, 1 IN (2, NULL), "
                         "2 IN (2, NULL), NOT NULL::boolean, coalesce(NULL, 3), "
                         "CASE WHEN NULL THEN 1 ELSE 2 END, 7 / 2, 7 % 3, -7 / 2, 2.5 * 2, "
                         "'ab' || 'c', 'abc' LIKE 'a_c', 'ABC' ILIKE 'a%', 5 BETWEEN 1 AND 4, "
                         "nullif(3, 3), upper('x'), length('héllo'), "
                         "date_trunc('month', '2025-03-15 10:20:30'::timestamp), "
                         "extract(dow FROM '2025-03-15'::timestamp), NULL IS DISTINCT FROM 1");
    /* 2.5 * 2 is numeric, as in PostgreSQL: 5.0 */
    const char *want[] = {"f", "t", "NULL", "NULL", "t", "NULL", "3", "2", "3", "1", "-3", "5.0",
                          "abc", "t", "t", "f", "NULL", "X", "5", "2025-03-01 00:00:00", "6", "t"};
    cr_assert_eq(r->n_rows, 1);
    cr_assert_eq(r->n_cols, (int)(sizeof want / sizeof *want));
    for (int c = 0; c < r->n_cols; c++)
        cr_assert_str_eq(cell(r, 0, c), want[c], "column %d: %s, want %s", c + 1, cell(r, 0, c), want[c]);
    cr_assert_str_eq(r->tag, "SELECT 1");
    qr_sql_result_free(r);
}

Test(sql, errors_carry_sqlstate_and_position)
{
    fails("SELECT nosuch FROM docs", "42703", 8);
    fails("SELECT * FROM nosuch", "42P01", 15);
    fails("SELECT nofunc(1)", "42883", 8);
    fails("SELECT 1/0", "22012", -1);
    fails("SELECT 9223372036854775807 + 1", "22003", -1);
    fails("SELECT 2147483647::int4 + 1::int4", "22003", -1);
    fails("SELECT id FROM docs FOR UPDATE", "0A000", -1);
    fails("SELECT row_number() OVER () FROM docs WHERE rank() OVER () > 1", "42P20", -1);
    fails("SELEC 1", "42601", 1);
    fails("SELECT 'x'::int", "22P02", -1);
    fails("SELECT cat, count(*) FROM docs", "42803", -1);
    fails("SELECT id FROM docs WHERE n", "42804", -1);
}

Test(sql, prepared_statement_with_typed_parameters)
{
    QrError err;
    qr_error_clear(&err);
    const char *q = "SELECT id, f FROM docs WHERE n >= $1 AND cat = $2 ORDER BY id";
    QrSqlStmt *st;
    cr_assert_eq(qr_sql_prepare(sess, q, strlen(q), NULL, 0, &st, &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_sql_stmt_n_params(st), 2);
    cr_assert_eq(qr_sql_stmt_param_oid(st, 0), 20); /* int8: compared with n */
    cr_assert_eq(qr_sql_stmt_param_oid(st, 1), 25); /* text: compared with cat */
    const QrSqlColumn *cols;
    int nc;
    qr_sql_stmt_columns(st, &cols, &nc);
    cr_assert_eq(nc, 2);
    cr_assert_str_eq(cols[0].name, "id");
    cr_assert_eq(qr_sql_type_oid(cols[1].type), 701);
    /* $1 in binary (int8 big-endian), $2 as text */
    char be[8];
    uint64_t v = 15000;
    for (int i = 0; i < 8; i++)
        be[i] = (char)(v >> (56 - 8 * i));
    const char *vals[] = {be, "c3"};
    int lens[] = {8, 2};
    int16_t fmts[] = {1, 0};
    QrSqlParams p = {.n = 2, .values = vals, .lengths = lens, .formats = fmts, .n_formats = 2};
    QrSqlResult *r;
    cr_assert_eq(qr_sql_execute(sess, st, &p, &r, &err), QR_OK, "%s", err.message);
    uint64_t want = 0;
    for (int i = 15000; i < N_DOCS; i++)
        want += model[i].cat == 3;
    cr_assert_eq(r->n_rows, want);
    /* Execute with a row limit: batches of 7 */
    uint64_t seen = 0, n;
    const QrSqlValue *rows;
    bool more;
    do {
        more = qr_sql_result_fetch(r, 7, &rows, &n);
        cr_assert(n <= 7);
        for (uint64_t i = 0; i < n; i++)
            cr_assert_eq(model[rows[i * 2].u.i].cat, 3);
        seen += n;
    } while (more);
    cr_assert_eq(seen, want);
    qr_sql_result_free(r);
    /* a second prepare of the same text is the cached statement */
    QrSqlStmt *st2;
    cr_assert_eq(qr_sql_prepare(sess, q, strlen(q), NULL, 0, &st2, &err), QR_OK);
    cr_assert_eq(st, st2);
    qr_sql_stmt_unref(st2);
    qr_sql_stmt_unref(st);
}

/* The path EXPLAIN reports for a query under the current setting. */
static void explain_path(const char *q, char *path, size_t n)
{
    char sql[1024];
    snprintf(sql, sizeof sql, "EXPLAIN %s", q);
    QrSqlResult *r = run(sql);
    path[0] = 0;
    for (uint64_t i = 0; i < r->n_rows; i++) {
        const char *line = cell(r, i, 0);
        const char *p = strstr(line, "Access Path: ");
        if (p) {
            p += 13;
            size_t k = strcspn(p, " )");
            snprintf(path, n, "%.*s", (int)k, p);
            break;
        }
    }
    qr_sql_result_free(r);
}

static void set_path(const char *p)
{
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_set(sess, "quarry.access_path", p, &err), QR_OK, "%s", err.message);
}

/* Every forced path returns exactly the ids `want` selects (in id order). */
static void same_answer(const char *q, bool (*want)(int i))
{
    const char *paths[] = {"auto", "text", "scan", "check", "full", "btree", "pk"};
    for (size_t p = 0; p < sizeof paths / sizeof *paths; p++) {
        set_path(paths[p]);
        QrSqlResult *r = run(q);
        uint64_t k = 0;
        for (int i = 0; i < N_DOCS; i++)
            if (want(i)) {
                cr_assert(k < r->n_rows, "path %s: too few rows for %s", paths[p], q);
                cr_assert_eq(r->vals[k * (uint64_t)r->n_cols].u.i, i, "path %s: %s", paths[p], q);
                k++;
            }
        cr_assert_eq(r->n_rows, k, "path %s: %s gave %llu rows, want %llu", paths[p], q,
                     (unsigned long long)r->n_rows, (unsigned long long)k);
        qr_sql_result_free(r);
    }
    set_path("auto");
}

static bool w_rare_broad(int i) { return model[i].has_rare && model[i].n >= 10; }
static bool w_common_selective(int i) { return model[i].cat == 7 && model[i].f < 50; }
static bool w_range(int i) { return model[i].n < 300 && model[i].cat != 1; }
static bool w_expr(int i) { return model[i].cat == 11; }

Test(sql, planner_picks_the_cheapest_path_and_all_paths_agree)
{
    struct {
        const char *q, *path;
        bool (*want)(int);
    } cases[] = {
        /* rare word + broad filter: the postings are the fewest candidates */
        {"SELECT id FROM docs WHERE title @@ 'rare' AND n >= 10 ORDER BY id", "text", w_rare_broad},
        /* common word + selective filter: the column scan narrows first */
        {"SELECT id FROM docs WHERE title @@ 'common' AND cat = 'c7' AND f < 50 ORDER BY id", "scan",
         w_common_selective},
        /* no text, a range on a sorted column: zone maps skip most blocks */
        {"SELECT id FROM docs WHERE n < 300 AND cat <> 'c1' ORDER BY id", "scan", w_range},
        /* nothing a column scan can evaluate: every row */
        {"SELECT id FROM docs WHERE lower(cat) = 'c11' ORDER BY id", "full", w_expr},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[32];
        explain_path(cases[i].q, path, sizeof path);
        cr_assert_str_eq(path, cases[i].path, "%s: planner chose %s, want %s", cases[i].q, path,
                         cases[i].path);
        same_answer(cases[i].q, cases[i].want);
    }
    /* a forced path shows in EXPLAIN */
    set_path("full");
    char path[32];
    explain_path(cases[0].q, path, sizeof path);
    cr_assert_str_eq(path, "full");
    set_path("auto");
}

Test(sql, counts_and_aggregates_match_the_model)
{
    QrSqlResult *r = run("SELECT count(*) FROM docs WHERE title @@ 'rare'");
    int64_t rare = 0;
    for (int i = 0; i < N_DOCS; i++)
        rare += model[i].has_rare;
    cr_assert_eq(r->vals[0].u.i, rare);
    qr_sql_result_free(r);
    r = run("SELECT count(*) FROM docs");
    cr_assert_eq(r->vals[0].u.i, N_DOCS);
    qr_sql_result_free(r);
    /* whole-table aggregates from column statistics, and after a delete
     * (statistics then include a deleted row: the rows are read instead) */
    for (int pass = 0; pass < 2; pass++) {
        r = run("SELECT count(*), count(f), min(n), max(n), min(f), max(f), min(cat), max(cat) FROM docs");
        double fmin = 1e9, fmax = -1e9;
        int lo = pass ? 1 : 0;
        for (int i = lo; i < N_DOCS; i++) {
            fmin = model[i].f < fmin ? model[i].f : fmin;
            fmax = model[i].f > fmax ? model[i].f : fmax;
        }
        cr_assert_eq(r->vals[0].u.i, N_DOCS - lo);
        cr_assert_eq(r->vals[1].u.i, N_DOCS - lo);
        cr_assert_eq(r->vals[2].u.i, lo);
        cr_assert_eq(r->vals[3].u.i, N_DOCS - 1);
        cr_assert_float_eq(r->vals[4].u.f, fmin, 1e-9);
        cr_assert_float_eq(r->vals[5].u.f, fmax, 1e-9);
        cr_assert_str_eq(cell(r, 0, 6), "c0");
        cr_assert_str_eq(cell(r, 0, 7), "c99");
        qr_sql_result_free(r);
        if (pass == 0) {
            QrTable *t;
            QrError err;
            qr_error_clear(&err);
            cr_assert_eq(qr_table_get(db, "docs", &t, &err), QR_OK);
            QrBatch *b;
            cr_assert_eq(qr_batch_begin(t, &b, &err), QR_OK, "%s", err.message);
            cr_assert_eq(qr_batch_delete(b, "0", 1, NULL, &err), QR_OK, "%s", err.message);
            cr_assert_eq(qr_batch_commit(b, &err), QR_OK);
            qr_batch_free(b);
        }
    }
    r = run("SELECT cat, count(*), sum(n), min(f), max(f) FROM docs WHERE n >= 1 AND n < 5000 "
            "GROUP BY cat HAVING count(*) > 40 ORDER BY cat");
    int64_t cnt[N_CATS] = {0}, sum[N_CATS] = {0};
    for (int i = 1; i < 5000; i++) {
        cnt[model[i].cat]++;
        sum[model[i].cat] += model[i].n;
    }
    uint64_t row = 0;
    char names[N_CATS][8];
    int order[N_CATS];
    for (int c = 0; c < N_CATS; c++) {
        snprintf(names[c], sizeof names[c], "c%d", c);
        order[c] = c;
    }
    /* output is ordered by cat text */
    for (int a = 0; a < N_CATS; a++)
        for (int b = a + 1; b < N_CATS; b++)
            if (strcmp(names[order[a]], names[order[b]]) > 0) {
                int t = order[a];
                order[a] = order[b];
                order[b] = t;
            }
    for (int k = 0; k < N_CATS; k++) {
        int c = order[k];
        if (cnt[c] <= 40)
            continue;
        cr_assert(row < r->n_rows);
        cr_assert_str_eq(cell(r, row, 0), names[c]);
        cr_assert_eq(r->vals[row * 5 + 1].u.i, cnt[c]);
        cr_assert_eq(r->vals[row * 5 + 2].u.i, sum[c]);
        row++;
    }
    cr_assert_eq(r->n_rows, row);
    qr_sql_result_free(r);
    /* top-k with a column filter inside the text engine = the first rows of
     * the full ranking (no limit: every match scored, sorted here) */
    QrSqlResult *all = run("SELECT id, score() FROM docs WHERE title @@ 'common plain' AND cat = 'c9' "
                           "ORDER BY score() DESC, id");
    QrSqlResult *top = run("SELECT id, score() FROM docs WHERE title @@ 'common plain' AND cat = 'c9' "
                           "ORDER BY score() DESC, id LIMIT 5");
    cr_assert_eq(top->n_rows, 5);
    for (uint64_t i = 0; i < 5; i++) {
        cr_assert_eq(model[top->vals[i * 2].u.i].cat, 9);
        cr_assert_eq(top->vals[i * 2 + 1].u.f, all->vals[i * 2 + 1].u.f, "score of hit %llu",
                     (unsigned long long)i);
    }
    qr_sql_result_free(all);
    qr_sql_result_free(top);
    /* count(*) of a word and a column predicate, counted by the text engine */
    r = run("SELECT count(*) FROM docs WHERE title @@ 'common' AND n < 777 AND cat = 'c2'");
    int64_t c2 = 0;
    for (int i = 0; i < 777; i++)
        c2 += model[i].cat == 2;
    cr_assert_eq(r->vals[0].u.i, c2);
    qr_sql_result_free(r);
    /* top-k by score with a limit: the best 3 of the "rare" docs */
    r = run("SELECT id, score() FROM docs WHERE title @@ 'rare' ORDER BY score() DESC, id LIMIT 3");
    cr_assert_eq(r->n_rows, 3);
    for (uint64_t i = 0; i < 3; i++)
        cr_assert(model[r->vals[i * 2].u.i].has_rare);
    qr_sql_result_free(r);
}

Test(sql, timeout_and_memory_cap_end_a_query_cleanly)
{
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_set(sess, "statement_timeout", "1ms", &err), QR_OK);
    /* the engine's clock moves 2 ms a read (eu_clock_virtual): the 1 ms
     * deadline has passed at the first check, on a fast or a busy machine */
    eu_clock_virtual(2000000);
    fails("SELECT count(*) FROM docs a JOIN docs b ON a.n = b.n WHERE a.title LIKE '%zzz%'", "57014", -1);
    fails("SELECT pg_sleep(30)", "57014", -1);   /* the sleep watches the deadline */
    eu_clock_real();
    cr_assert_eq(qr_sql_session_set(sess, "statement_timeout", "0", &err), QR_OK);
    QrSqlResult *slept = run("SELECT pg_sleep(0.01), pg_sleep(NULL) IS NULL");
    cr_assert(slept->vals[1].u.b);
    qr_sql_result_free(slept);
    cr_assert_eq(qr_sql_session_set(sess, "quarry.mem_cap", "1048576", &err), QR_OK);
    fails("SELECT title, cat, f FROM docs", "54000", -1);
    cr_assert_eq(qr_sql_session_set(sess, "quarry.mem_cap", "268435456", &err), QR_OK);
    QrSqlResult *r = run("SELECT count(*) FROM docs WHERE cat = 'c5'");
    qr_sql_result_free(r);
    /* settings are validated */
    cr_assert_neq(qr_sql_session_set(sess, "quarry.access_path", "sideways", &err), QR_OK);
    qr_error_clear(&err);
    cr_assert_neq(qr_sql_session_set(sess, "no_such_setting", "1", &err), QR_OK);
}

Test(sql, split_reports_statement_spans)
{
    const char *q = "SELECT 1; SELECT ';' ; -- comment\n SELECT 3";
    QrSqlSpan *sp;
    int n;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_split(q, strlen(q), &sp, &n, &err), QR_OK);
    cr_assert_eq(n, 3);
    cr_assert_eq(strncmp(q + sp[1].offset, "SELECT ';'", 10), 0);
    qr_free(sp);
}

Test(sql, explain_scores_sums_to_score)
{
    /* per (doc, term) BM25 rows; their sum per document is score() */
    const char *q = "SELECT id FROM docs WHERE title @@ 'rare^3 common' AND cat <> 'zz' "
                    "ORDER BY score() DESC, id LIMIT 4";
    char sql[512];
    snprintf(sql, sizeof sql, "EXPLAIN (SCORES) %s", q);
    QrSqlResult *ex = run(sql);
    QrSqlResult *sc = run("SELECT _id, score() FROM docs WHERE title @@ 'rare^3 common' AND cat <> 'zz' "
                          "ORDER BY score() DESC, id LIMIT 4");
    cr_assert_eq(ex->n_cols, 12);
    cr_assert_str_eq(ex->cols[10].name, "score");
    cr_assert_str_eq(ex->cols[11].name, "source");
    cr_assert_eq(sc->n_rows, 4);
    for (uint64_t d = 0; d < sc->n_rows; d++) {
        double sum = 0;
        int terms = 0;
        for (uint64_t i = 0; i < ex->n_rows; i++)
            if (ex->vals[i * 12].u.i == sc->vals[d * 2].u.i) {
                sum += ex->vals[i * 12 + 10].u.f;
                terms++;
                cr_assert(ex->vals[i * 12 + 4].u.i >= 1); /* tf */
                cr_assert_str_eq(ex->vals[i * 12 + 11].u.s.s, "query");
            }
        cr_assert_eq(terms, 2, "doc %lld has %d term rows", (long long)sc->vals[d * 2].u.i, terms);
        double want = sc->vals[d * 2 + 1].u.f;
        cr_assert(fabs(sum - want) <= 1e-4 * fabs(want), "sum %g, score %g", sum, want);
    }
    qr_sql_result_free(ex);
    qr_sql_result_free(sc);
    fails("EXPLAIN (SCORES) SELECT id FROM docs WHERE n < 3", "42809", -1);
}

/* `SELECT id, n FROM docs WHERE id = $1`, prepared once and executed `n`
 * times with random keys (some missing): every answer is checked against
 * the model, and every execution must have read the table by the access
 * `want_plan` (QrSqlResult.plan: "docs:pk", "docs:full").  Returns the
 * rows checked per lookup (EXPLAIN ANALYZE's "Candidates Checked" of the
 * same statement prepared with the same keys): the work the path did. */
static double pk_lookups(int n, const char *want_plan)
{
    QrError err;
    qr_error_clear(&err);
    const char *q = "SELECT id, n FROM docs WHERE id = $1";
    const char *xq = "EXPLAIN ANALYZE SELECT id, n FROM docs WHERE id = $1";
    QrSqlStmt *st, *xst;
    cr_assert_eq(qr_sql_prepare(sess, q, strlen(q), NULL, 0, &st, &err), QR_OK, "%s", err.message);
    const uint32_t int8_oid[] = {20}; /* EXPLAIN does not infer the parameter's type */
    cr_assert_eq(qr_sql_prepare(sess, xq, strlen(xq), int8_oid, 1, &xst, &err), QR_OK, "%s",
                 err.message);
    uint64_t rng = 7, checked = 0;
    for (int i = 0; i < n; i++) {
        int id = (int)eu_below(&rng, N_DOCS + 100); /* some miss */
        char txt[16];
        snprintf(txt, sizeof txt, "%d", id);
        const char *vals[] = {txt};
        int lens[] = {(int)strlen(txt)};
        QrSqlParams p = {.n = 1, .values = vals, .lengths = lens};
        QrSqlResult *r;
        cr_assert_eq(qr_sql_execute(sess, st, &p, &r, &err), QR_OK, "%s", err.message);
        cr_assert_eq(r->n_rows, id < N_DOCS ? 1u : 0u, "id %d", id);
        if (id < N_DOCS)
            cr_assert_eq(r->vals[1].u.i, model[id].n);
        cr_assert_str_eq(r->plan ? r->plan : "(none)", want_plan, "id %d", id);
        qr_sql_result_free(r);
        cr_assert_eq(qr_sql_execute(sess, xst, &p, &r, &err), QR_OK, "%s", err.message);
        bool seen = false;
        for (uint64_t k = 0; k < r->n_rows; k++) {
            const char *c = strstr(cell(r, k, 0), "Candidates Checked: ");
            if (c) {
                checked += strtoull(c + 20, NULL, 10);
                seen = true;
            }
        }
        cr_assert(seen, "EXPLAIN ANALYZE of the lookup shows no candidate count");
        qr_sql_result_free(r);
    }
    qr_sql_stmt_unref(xst);
    qr_sql_stmt_unref(st);
    return (double)checked / n;
}

static bool w_pk_in(int i) { return i == 5 || i == 9 || i == 10001 || i == N_DOCS - 1; }
static bool w_pk_eq_rare(int i) { return i == 7; }

Test(sql, primary_key_lookups_use_the_key_index)
{
    const char *in = "SELECT id FROM docs WHERE id IN (9, 5, 10001, 5, 99999, 19999) ORDER BY id";
    char path[32];
    explain_path(in, path, sizeof path);
    cr_assert_str_eq(path, "pk");
    same_answer(in, w_pk_in);
    /* with a text predicate and a key given as a string literal */
    const char *eq = "SELECT id FROM docs WHERE id = '7' AND title @@ 'rare'";
    explain_path(eq, path, sizeof path);
    cr_assert_str_eq(path, "pk");
    same_answer(eq, w_pk_eq_rare);
    /* forced pk without a key condition: the cheapest possible path, noted */
    set_path("pk");
    explain_path("SELECT id FROM docs WHERE n < 10", path, sizeof path);
    cr_assert_str_neq(path, "pk");
    set_path("auto");
    /* parameters: the prepared point lookup takes the key index at every
     * execution and checks at most the one row, where a scan checks them all */
    double pk = pk_lookups(1000, "docs:pk");
    set_path("full");
    double full = pk_lookups(20, "docs:full");
    set_path("auto");
    fprintf(stderr, "pk point lookups: %.2f rows checked each (pk path), %.0f (full scan)\n", pk,
            full);
    cr_assert(pk <= 1.0, "the key index checks %.2f rows a lookup", pk);
    cr_assert(full >= N_DOCS / 2, "a full scan checks %.0f rows a lookup", full);
    /* one candidate read per key, not a scan */
    QrSqlResult *x = run("EXPLAIN ANALYZE SELECT id, n FROM docs WHERE id = 77");
    bool one = false;
    for (uint64_t i = 0; i < x->n_rows; i++)
        one |= strstr(cell(x, i, 0), "Candidates Checked: 1") != NULL &&
               strstr(cell(x, i, 0), "Candidates Checked: 10") == NULL;
    cr_assert(one, "EXPLAIN ANALYZE of a key lookup does not show 1 candidate");
    qr_sql_result_free(x);
    /* UPDATE / DELETE find their rows by key; the old version is not found again */
    QrSqlResult *r = run("UPDATE docs SET n = -5 WHERE id = 12");
    qr_sql_result_free(r);
    r = run("DELETE FROM docs WHERE id IN (10, 11)");
    qr_sql_result_free(r);
    r = run("SELECT id, n FROM docs WHERE id IN (10, 11, 12, 13) ORDER BY id");
    cr_assert_eq(r->n_rows, 2);
    cr_assert_eq(r->vals[0].u.i, 12);
    cr_assert_eq(r->vals[1].u.i, -5);
    cr_assert_eq(r->vals[2].u.i, 13);
    qr_sql_result_free(r);
    r = run("SELECT count(*) FROM docs WHERE id = 12 OR id = 10");
    cr_assert_eq(r->vals[0].u.i, 1);
    qr_sql_result_free(r);
}

Test(sql, result_outlives_the_statement_it_came_from)
{
    /* qr_sql_exec drops its statement before returning: the result's names
     * and values must not borrow freed memory (ASan reports any use) */
    QrSqlResult *r = run("SELECT 'a constant string of some length' AS first_output_column_name, "
                         "id AS second_alias, cat FROM docs WHERE id = 3");
    cr_assert_eq(r->n_cols, 3);
    cr_assert_str_eq(r->cols[0].name, "first_output_column_name");
    cr_assert_str_eq(r->cols[1].name, "second_alias");
    cr_assert_str_eq(r->cols[2].name, "cat");
    cr_assert_str_eq(cell(r, 0, 0), "a constant string of some length");
    cr_assert_eq(r->vals[1].u.i, 3);
    char want[8];
    snprintf(want, sizeof want, "c%d", model[3].cat);
    cr_assert_str_eq(cell(r, 0, 2), want);
    /* RETURNING names come from the parse tree of the (dropped) statement */
    QrSqlResult *u = run("UPDATE docs SET n = n WHERE id = 3 RETURNING id AS returned_id_alias, cat");
    cr_assert_eq(u->n_rows, 1);
    cr_assert_str_eq(u->cols[0].name, "returned_id_alias");
    cr_assert_str_eq(u->cols[1].name, "cat");
    cr_assert_eq(u->vals[0].u.i, 3);
    qr_sql_result_free(u);
    /* a prepared statement unreferenced before its result is freed */
    QrError err;
    qr_error_clear(&err);
    const char *q = "SELECT 'xyz' || $1 AS joined_value";
    QrSqlStmt *st;
    cr_assert_eq(qr_sql_prepare(sess, q, strlen(q), NULL, 0, &st, &err), QR_OK, "%s", err.message);
    const char *vals[] = {"123"};
    QrSqlParams p = {.n = 1, .values = vals};
    QrSqlResult *r2;
    cr_assert_eq(qr_sql_execute(sess, st, &p, &r2, &err), QR_OK, "%s", err.message);
    qr_sql_stmt_unref(st);
    /* push the statement out of the session's cache */
    for (int i = 0; i < 300; i++) {
        char sql[64];
        snprintf(sql, sizeof sql, "SELECT %d AS n%d", i, i);
        QrSqlStmt *o;
        cr_assert_eq(qr_sql_prepare(sess, sql, strlen(sql), NULL, 0, &o, &err), QR_OK);
        qr_sql_stmt_unref(o);
    }
    cr_assert_str_eq(r2->cols[0].name, "joined_value");
    cr_assert_str_eq(cell(r2, 0, 0), "xyz123");
    qr_sql_result_free(r2);
    qr_sql_result_free(r);
}

Test(sql, a_statement_failing_to_prepare_fails_the_transaction)
{
    QrError err;
    qr_error_clear(&err);
    const char *bad[] = {"SELEC 1", "SELECT nosuch FROM docs", "SELECT * FROM nosuch_table"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        qr_sql_result_free(run("BEGIN"));
        cr_assert_eq(qr_sql_session_txn_status(sess), 'T');
        QrSqlStmt *st = NULL;
        cr_assert_neq(qr_sql_prepare(sess, bad[i], strlen(bad[i]), NULL, 0, &st, &err), QR_OK);
        qr_error_clear(&err);
        cr_assert_eq(qr_sql_session_txn_status(sess), 'E', "%s left the block open", bad[i]);
        fails("SELECT 1", "25P02", -1);
        qr_sql_result_free(run("ROLLBACK"));
        cr_assert_eq(qr_sql_session_txn_status(sess), 'I');
    }
    /* errors found outside the engine (a split failure) fail it the same way */
    qr_sql_result_free(run("BEGIN"));
    qr_sql_session_fail(sess);
    fails("SELECT 1", "25P02", -1);
    qr_sql_result_free(run("ROLLBACK"));
    qr_sql_session_fail(sess); /* outside a block: nothing to fail */
    cr_assert_eq(qr_sql_session_txn_status(sess), 'I');
    qr_sql_result_free(run("SELECT 1"));
}

Test(sql, big_join_and_per_row_temporaries_run_in_bounded_memory)
{
    /* 2000 x 20000 rows joined on cat: about 400,000 pairs, each making a
     * concatenation in WHERE and another in an aggregate.  Under a 32 MiB
     * cap neither the join's output (over 100 MB if stored) nor the per-row
     * temporaries may accumulate; the answer is checked by brute force. */
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_set(sess, "quarry.mem_cap", "33554432", &err), QR_OK);
    QrSqlResult *r = run("SELECT count(*), sum(b.n), sum(length(a.title || b.cat)) "
                         "FROM docs a JOIN docs b ON a.cat = b.cat "
                         "WHERE a.n < 2000 AND (a.cat || '-' || b.n::text) LIKE '%7'");
    cr_assert_eq(qr_sql_session_set(sess, "quarry.mem_cap", "268435456", &err), QR_OK);
    int64_t cnt = 0, sum = 0, len = 0;
    for (int i = 0; i < 2000; i++)
        for (int j = 0; j < N_DOCS; j++)
            if (model[i].cat == model[j].cat && j % 10 == 7) {
                char cat[16];
                cnt++;
                sum += j;
                len += (model[i].has_rare ? 22 : 23) + snprintf(cat, sizeof cat, "c%d", model[j].cat);
            }
    cr_assert_eq(r->n_rows, 1);
    cr_assert_eq(r->vals[0].u.i, cnt);
    cr_assert_eq(r->vals[1].u.i, sum);
    cr_assert_eq(r->vals[2].u.i, len, "sum(length) %" PRId64 " want %" PRId64, r->vals[2].u.i, len);
    qr_sql_result_free(r);
}

Test(sql, aggregate_ended_by_timeout_or_cancel_frees_its_groups)
{
    /* grouping over a join whose probe outlives the timeout, and grouping
     * over one streamed table cancelled from another thread: the group
     * tables are freed (LeakSanitizer checks under the ASan build) */
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_set(sess, "statement_timeout", "1ms", &err), QR_OK);
    eu_clock_virtual(2000000); /* 2 ms a clock read: past the deadline at the first check */
    fails("SELECT a.cat, count(*) FROM docs a JOIN docs b ON a.n = b.n "
          "WHERE a.title || b.title LIKE '%zzz%' GROUP BY a.cat", "57014", -1);
    fails("SELECT cat, count(*), sum(n) FROM docs WHERE title LIKE '%zzz%' GROUP BY cat", "57014", -1);
    eu_clock_real();
    cr_assert_eq(qr_sql_session_set(sess, "statement_timeout", "0", &err), QR_OK);
    /* an error inside the join (too many row pairs) after grouping began */
    fails("SELECT a.cat, count(*) FROM docs a, docs b WHERE a.n + b.n < 0 GROUP BY a.cat", "54000", -1);
    qr_sql_session_cancel(sess); /* a cancel before the statement is cleared by it */
    QrSqlResult *r = run("SELECT cat, count(*) FROM docs WHERE n < 100 GROUP BY cat");
    uint64_t groups = r->n_rows;
    qr_sql_result_free(r);
    bool seen[N_CATS] = {false};
    uint64_t want = 0;
    for (int i = 0; i < 100; i++)
        if (!seen[model[i].cat]) {
            seen[model[i].cat] = true;
            want++;
        }
    cr_assert_eq(groups, want);
}

static bool w_f_eq(int i) { return model[i].f == 12.5; }
static bool w_cat_f(int i) { return model[i].cat == 7 && model[i].f < 50; }
static bool w_cat_range(int i) { return model[i].cat == 42 && model[i].n >= 3000; }

Test(sql, btree_path_after_create_index)
{
    const char *eq = "SELECT id FROM docs WHERE f = 12.5 ORDER BY id";
    char path[32];
    explain_path(eq, path, sizeof path);
    cr_assert_str_eq(path, "scan", "without an index: %s", path);
    /* forcing btree without a B-tree: the cheapest possible path, noted */
    set_path("btree");
    explain_path(eq, path, sizeof path);
    cr_assert_str_neq(path, "btree");
    set_path("auto");
    QrTable *t;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_table_get(db, "docs", &t, &err), QR_OK);
    cr_assert_eq(qr_table_create_index(t, "f", &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_table_create_index(t, "cat", &err), QR_OK, "%s", err.message);
    struct {
        const char *q;
        bool (*want)(int);
    } cases[] = {
        {eq, w_f_eq},
        {"SELECT id FROM docs WHERE title @@ 'common' AND cat = 'c7' AND f < 50 ORDER BY id", w_cat_f},
        {"SELECT id FROM docs WHERE cat = 'c42' AND n >= 3000 ORDER BY id", w_cat_range},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        explain_path(cases[i].q, path, sizeof path);
        /* a common word beside the filters: its postings are read whole on
         * the B-tree path, advanced into the column bitmap on the scan path */
        const char *want = strstr(cases[i].q, "@@") ? "scan" : "btree";
        cr_assert_str_eq(path, want, "%s: planner chose %s", cases[i].q, path);
        same_answer(cases[i].q, cases[i].want);
    }
    /* counts (B-tree subtree counts, or the filter's bitmap) agree with the
     * model under every forced path, before and after a delete */
    const char *paths[] = {"auto", "btree", "scan", "full"};
    for (int pass = 0; pass < 2; pass++) {
        for (size_t p = 0; p < sizeof paths / sizeof *paths; p++) {
            set_path(paths[p]);
            QrSqlResult *c = run("SELECT count(*), 7 FROM docs WHERE f = 12.5");
            QrSqlResult *c2 = run("SELECT count(*) FROM docs WHERE cat = 'c7' AND f < 50");
            int64_t want = 0, want2 = 0;
            for (int i = pass; i < N_DOCS; i++) {
                want += w_f_eq(i);
                want2 += w_cat_f(i);
            }
            cr_assert_eq(c->vals[0].u.i, want, "path %s pass %d", paths[p], pass);
            cr_assert_eq(c2->vals[0].u.i, want2, "path %s pass %d", paths[p], pass);
            qr_sql_result_free(c);
            qr_sql_result_free(c2);
        }
        set_path("auto");
        if (pass == 0) /* the counts must then leave row 0 out */
            qr_sql_result_free(run("DELETE FROM docs WHERE id = 0"));
    }
    QrSqlResult *r = run("EXPLAIN ANALYZE SELECT count(*) FROM docs WHERE f = 12.5");
    bool bt = false;
    for (uint64_t i = 0; i < r->n_rows; i++)
        bt |= strstr(cell(r, i, 0), "Access Path: btree") != NULL;
    cr_assert(bt, "count(*) over a B-tree'd column does not use it");
    qr_sql_result_free(r);
    r = run("EXPLAIN ANALYZE SELECT id FROM docs WHERE f = 12.5");
    bool pages = false;
    for (uint64_t i = 0; i < r->n_rows; i++)
        pages |= strstr(cell(r, i, 0), "B-tree Pages:") != NULL;
    cr_assert(pages, "EXPLAIN ANALYZE shows no B-tree pages");
    qr_sql_result_free(r);
}

Test(sql, group_by_over_a_common_word)
{
    QrSqlResult *r = run("SELECT cat, count(*), min(id) FROM docs WHERE title @@ 'common' GROUP BY cat");
    int64_t cnt[N_CATS] = {0}, mn[N_CATS];
    for (int c = 0; c < N_CATS; c++)
        mn[c] = -1;
    for (int i = 0; i < N_DOCS; i++) {
        cnt[model[i].cat]++;
        if (mn[model[i].cat] < 0)
            mn[model[i].cat] = i;
    }
    uint64_t groups = 0;
    for (int c = 0; c < N_CATS; c++)
        groups += cnt[c] > 0;
    cr_assert_eq(r->n_rows, groups);
    for (uint64_t k = 0; k < r->n_rows; k++) {
        int c = atoi(cell(r, k, 0) + 1);
        cr_assert_eq(r->vals[k * 3 + 1].u.i, cnt[c], "group c%d", c);
        cr_assert_eq(r->vals[k * 3 + 2].u.i, mn[c], "group c%d", c);
    }
    qr_sql_result_free(r);
}

/* The first node of a JSON plan tree (depth first) with an "Access Path". */
static const cJSON *json_scan(const cJSON *n)
{
    if (!n)
        return NULL;
    if (cJSON_GetObjectItemCaseSensitive(n, "Access Path"))
        return n;
    const cJSON *k;
    cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(n, "Plans"))
    {
        const cJSON *f = json_scan(k);
        if (f)
            return f;
    }
    return NULL;
}

/* The first node of a type in a JSON plan tree (depth first). */
static const cJSON *json_node_of(const cJSON *n, const char *type)
{
    if (!n)
        return NULL;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(n, "Node Type");
    if (cJSON_IsString(t) && !strcmp(t->valuestring, type))
        return n;
    const cJSON *k;
    cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(n, "Plans"))
    {
        const cJSON *f = json_node_of(k, type);
        if (f)
            return f;
    }
    return NULL;
}

Test(sql, explain_format_json_is_the_text_plan_as_a_tree)
{
    QrSqlResult *r = run("EXPLAIN (ANALYZE, FORMAT JSON) SELECT cat, count(*) FROM docs "
                         "WHERE title @@ 'rare' AND n >= 10 AND cat IN (SELECT cat FROM docs WHERE n < 50) "
                         "GROUP BY cat ORDER BY cat");
    cr_assert_eq(r->n_rows, 1);
    const QrSqlValue *v = &r->vals[0];
    cJSON *j = cJSON_ParseWithLength(v->u.s.s, v->u.s.n);
    cr_assert(cJSON_IsArray(j), "not a JSON array: %.*s", (int)v->u.s.n, v->u.s.s);
    int n = cJSON_GetArraySize(j);
    cr_assert(n >= 1, "the query's plan: %d", n);
    cJSON *last = cJSON_GetArrayItem(j, n - 1);
    /* the IN (SELECT ...) is a semi join in the same tree, as in PostgreSQL */
    cr_assert_not_null(json_node_of(cJSON_GetObjectItemCaseSensitive(last, "Plan"), "Hash Semi Join"));
    cr_assert_not_null(cJSON_GetObjectItemCaseSensitive(last, "Execution Time"));
    /* the rows the query returns */
    QrSqlResult *q = run("SELECT cat, count(*) FROM docs WHERE title @@ 'rare' AND n >= 10 "
                         "AND cat IN (SELECT cat FROM docs WHERE n < 50) GROUP BY cat ORDER BY cat");
    cr_assert_eq(cJSON_GetObjectItemCaseSensitive(last, "Rows")->valuedouble, (double)q->n_rows);
    qr_sql_result_free(q);
    const cJSON *sc = json_scan(cJSON_GetObjectItemCaseSensitive(last, "Plan"));
    cr_assert_not_null(sc, "no scan node in the outer plan");
    cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(sc, "Node Type")->valuestring, "Text Scan");
    cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(sc, "Relation Name")->valuestring, "docs");
    cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(sc, "Access Path")->valuestring, "text");
    int64_t rare = 0;
    for (int i = 10; i < N_DOCS; i++)
        rare += model[i].has_rare;
    cr_assert(cJSON_GetObjectItemCaseSensitive(sc, "Actual Rows")->valuedouble <= (double)rare);
    cr_assert_not_null(cJSON_GetObjectItemCaseSensitive(sc, "Text Query"));
    cr_assert_not_null(cJSON_GetObjectItemCaseSensitive(sc, "Filter"));
    cJSON_Delete(j);
    qr_sql_result_free(r);
    /* the text form is unchanged; unknown formats are refused */
    r = run("EXPLAIN (FORMAT TEXT) SELECT id FROM docs WHERE n < 5");
    cr_assert(r->n_rows >= 2);
    qr_sql_result_free(r);
    fails("EXPLAIN (FORMAT YAML) SELECT id FROM docs", "0A000", -1);
    fails("EXPLAIN (FORMAT JSON, SCORES) SELECT id FROM docs WHERE title @@ 'rare'", "0A000", -1);
}

Test(sql, results_summarize_their_plan)
{
    struct {
        const char *q, *plan;
    } cases[] = {
        {"SELECT n FROM docs WHERE id = 5", "docs:pk"},
        {"SELECT count(*) FROM docs", "docs:stats"},
        {"SELECT id FROM docs WHERE lower(cat) = 'c3'", "docs:full"},
        {"SELECT count(*) FROM docs WHERE title @@ 'rare'", "docs:text"},
        {"SELECT a.n FROM docs a JOIN docs b ON a.n = b.n WHERE a.id IN (1, 2) AND b.n < 100",
         "a:pk, b:scan"},
        {"SELECT 1", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        QrSqlResult *r = run(cases[i].q);
        if (cases[i].plan)
            cr_assert(r->plan && !strcmp(r->plan, cases[i].plan), "%s: plan %s, want %s", cases[i].q,
                      r->plan ? r->plan : "NULL", cases[i].plan);
        else
            cr_assert_null(r->plan, "%s: plan %s", cases[i].q, r->plan);
        qr_sql_result_free(r);
    }
}

/* The regular-expression operators and COLLATE that psql's \dt, \dn and \di
 * send (OPERATOR(pg_catalog.~) ... COLLATE pg_catalog.default). */
Test(sql, regex_operators_and_default_collation)
{
    QrSqlResult *r = run("SELECT 'news' ~ '^(news)$', 'news' !~ '^pg_', 'NEWS' ~* 'ew', "
                         "'NEWS' ~ 'ew', 'abc' !~* 'B', NULL ~ 'a', "
                         "'news' OPERATOR(pg_catalog.~) '^(news)$' COLLATE pg_catalog.default, "
                         "'b' COLLATE \"C\" < 'a'");
    const char *want[] = {"t", "t", "t", "f", "f", "NULL", "t", "f"};
    cr_assert_eq(r->n_cols, (int)(sizeof want / sizeof *want));
    for (int c = 0; c < r->n_cols; c++)
        cr_assert_str_eq(cell(r, 0, c), want[c], "column %d: %s, want %s", c + 1, cell(r, 0, c),
                         want[c]);
    qr_sql_result_free(r);
    fails("SELECT 'abc' ~ '('", "2201B", 0);
    fails("SELECT 'a' COLLATE \"de_DE\" < 'b'", "0A000", 0);
    /* compiled patterns are cached per statement: a pattern that changes per
     * row (13 of them, more than the cache holds) and the same text under ~
     * and ~* must each be matched as written; checked against the model */
    int64_t want_rot = 0, want_ci = 0;
    for (int i = 0; i < N_DOCS; i++) {
        want_rot += model[i].cat == i % 13;
        want_ci += model[i].cat == 1;
    }
    r = run("SELECT count(*) FROM docs WHERE cat ~ ('^c' || (n % 13)::text || '$')");
    cr_assert_eq(r->vals[0].u.i, want_rot);
    qr_sql_result_free(r);
    r = run("SELECT count(*) FILTER (WHERE cat ~ '^C1$'), count(*) FILTER (WHERE cat ~* '^C1$'), "
            "count(*) FILTER (WHERE cat ~ '^C1$') FROM docs");
    cr_assert_eq(r->vals[0].u.i, 0);
    cr_assert_eq(r->vals[1].u.i, want_ci);
    cr_assert_eq(r->vals[2].u.i, 0);
    qr_sql_result_free(r);
    /* against the catalog, as psql's \dt does */
    r = run("SELECT c.relname FROM pg_catalog.pg_class c "
            "WHERE c.relname OPERATOR(pg_catalog.~) '^(docs)$' COLLATE pg_catalog.default");
    cr_assert_eq(r->n_rows, 1);
    cr_assert_str_eq(cell(r, 0, 0), "docs");
    qr_sql_result_free(r);
}

/* ---- correlated subqueries, against SQLite on the same rows ---- */

#include "sql_lite_oracle.h"

Test(sql, correlated_subqueries_agree_with_sqlite)
{
    sqlite3 *lite;
    cr_assert_eq(sqlite3_open(":memory:", &lite), SQLITE_OK);
    const char *ddl = "create table cs (id bigint primary key, g integer, v integer, s text)";
    qr_sql_result_free(run(ddl));
    cr_assert_eq(sqlite3_exec(lite, ddl, NULL, NULL, NULL), SQLITE_OK);
    uint64_t rng = 7;
    char buf[256];
    for (int i = 1; i <= 400; i++) {
        int g = (int)eu_below(&rng, 25), v = (int)eu_below(&rng, 100);
        bool null_v = eu_below(&rng, 10) == 0;
        char vs[16];
        snprintf(vs, sizeof vs, "%d", v);
        snprintf(buf, sizeof buf, "insert into cs values (%d, %d, %s, 's%d')", i, g,
                 null_v ? "NULL" : vs, (i * 7) % 13);
        qr_sql_result_free(run(buf));
        cr_assert_eq(sqlite3_exec(lite, buf, NULL, NULL, NULL), SQLITE_OK);
    }
    static const char *const queries[] = {
        /* scalar in the select list, keyed by one outer column (cached per g) */
        "select id, (select max(v) from cs b where b.g = a.g) from cs a order by id",
        /* a range condition on the outer value, NULLs included */
        "select id, (select count(*) from cs b where b.v > a.v) from cs a order by id",
        /* EXISTS / NOT EXISTS in WHERE */
        "select id from cs a where exists (select 1 from cs b where b.g = a.g and b.v > a.v + 50) "
        "order by id",
        "select id from cs a where not exists (select 1 from cs b where b.g = a.g and b.id < a.id) "
        "order by id",
        /* IN (correlated subquery) with three-valued logic */
        "select id, a.v in (select b.v from cs b where b.g = a.g + 1) from cs a order by id",
        "select id from cs a where a.v = (select min(v) from cs b where b.g = a.g) order by id",
        /* two levels: the innermost reads both outer queries */
        "select id, (select count(*) from cs b where b.g = a.g and exists "
        "(select 1 from cs c where c.g = b.g + 1 and c.v = a.v)) from cs a order by id",
        /* over a grouped outer query, and in ORDER BY */
        "select g, (select count(*) from cs b where b.g = a.g and b.v is null) from cs a "
        "group by g order by g",
        "select id from cs a order by (select count(*) from cs b where b.v < a.v), id",
        /* the primary key of the inner table from the outer row, text results */
        "select id, (select s from cs b where b.id = a.id + 1) from cs a order by id",
        /* in a join's output and in a derived table */
        "select a.id, b.id, (select count(*) from cs c where c.g = a.g and c.v < b.v) from cs a "
        "join cs b on b.id = a.id + 100 order by a.id",
        "select x.id, (select max(c.id) from cs c where c.g = x.g) from "
        "(select id, g from cs where v > 90) x order by x.id",
    };
    for (size_t i = 0; i < sizeof queries / sizeof *queries; i++) {
        QrSqlResult *r = run(queries[i]);
        char *got = rows_text(r), *want = sqlite_text(lite, queries[i]);
        cr_assert(strlen(want) > 0, "%s: SQLite returned nothing", queries[i]);
        cr_assert_str_eq(got, want, "%s", queries[i]);
        free(got);
        free(want);
        qr_sql_result_free(r);
    }
    sqlite3_close(lite);
    /* ARRAY(subquery) and = ANY over it, checked by brute force on the same rows */
    QrSqlResult *r = run("select a.id, array(select b.id from cs b where b.g = a.g order by b.id), "
                         "a.id = any (array(select b.id from cs b where b.g = a.g)) from cs a "
                         "order by a.id");
    cr_assert_eq(r->n_rows, 400);
    QrSqlResult *all = run("select id, g from cs order by id");
    for (uint64_t i = 0; i < r->n_rows; i++) {
        char want[4096] = "{";
        for (uint64_t k = 0; k < all->n_rows; k++)
            if (all->vals[k * 2 + 1].u.i == all->vals[i * 2 + 1].u.i)
                snprintf(want + strlen(want), sizeof want - strlen(want), "%s%" PRId64,
                         want[1] ? "," : "", all->vals[k * 2].u.i);
        strcat(want, "}");
        cr_assert_str_eq(cell(r, i, 1), want, "array for id %s", cell(r, i, 0));
        cr_assert_str_eq(cell(r, i, 2), "t");
    }
    qr_sql_result_free(all);
    qr_sql_result_free(r);
    /* errors stay SQLSTATEs */
    fails("select id, (select v from cs b where b.g = a.g) from cs a", "21000", 0);
    fails("select id from cs a where a.v < any (select v from cs b where b.g = a.g)", "0A000", 0);
    fails("select id, (select a.v, b.v from cs b where b.id = a.id) from cs a", "42601", 0);
    fails("select id from cs a where (select nope from cs b where b.id = a.id) > 1", "42703", 0);
    fails("select (select unnest('{1,2}')::int4 + 1)", "0A000", 0);
    /* the uncorrelated forms still run once */
    r = run("select count(*) from cs where v in (select v from cs where g = 3)");
    cr_assert_eq(r->n_rows, 1);
    qr_sql_result_free(r);
}

Test(sql, set_returning_functions_and_array_text)
{
    QrSqlResult *r = run("select n, n * 2 from generate_series(1, 5) g(n) where n <> 3 order by n");
    cr_assert_eq(r->n_rows, 4);
    cr_assert_str_eq(cell(r, 3, 0), "5");
    cr_assert_str_eq(cell(r, 3, 1), "10");
    qr_sql_result_free(r);
    r = run("select unnest('{a,\"b c\",NULL}'), generate_subscripts('{x,y}', 1)");
    cr_assert_eq(r->n_rows, 3);
    cr_assert_str_eq(cell(r, 1, 0), "b c");
    cr_assert_str_eq(cell(r, 2, 0), "NULL");
    cr_assert_str_eq(cell(r, 2, 1), "NULL");
    qr_sql_result_free(r);
    r = run("select array_to_string('{a,NULL,c}', '-', '*'), array_upper('{4,5,6}', 1), "
            "('{4,5,6}'::int4[])[2], 5 = any ('{4,5}'), 7 = any ('4 5'::text)");
    cr_assert_str_eq(cell(r, 0, 0), "a-*-c");
    cr_assert_str_eq(cell(r, 0, 1), "3");
    cr_assert_str_eq(cell(r, 0, 2), "5");
    cr_assert_str_eq(cell(r, 0, 3), "t");
    cr_assert_str_eq(cell(r, 0, 4), "f");
    qr_sql_result_free(r);
    fails("select * from generate_series(1, 10, 0)", "22023", 0);
    fails("select * from lower('x')", "0A000", 0);
    fails("select count(*), unnest('{1}')", "0A000", 0);
    fails("select '{1,2'::int4[]", "22P02", 0);
    /* an untyped literal is an array literal, as PostgreSQL reads it (a
     * catalog column's int2vector text, "4 5", still reads as an array) */
    fails("select 7 = any ('4 5')", "22P02", 0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

Test(sql, percentiles_agree_with_a_sorted_brute_force)
{
    /* percentile_cont / percentile_disc per group, over floats with many
     * ties (f has 1,000 distinct values over 20,000 rows) and over ints,
     * including the ends 0 and 1: each against the sorted model */
    const double ps[] = {0, 0.37, 0.5, 0.999, 1};
    for (size_t pi = 0; pi < sizeof ps / sizeof *ps; pi++) {
        char q[512];
        snprintf(q, sizeof q,
                 "SELECT cat, percentile_cont(%g) WITHIN GROUP (ORDER BY f), "
                 "percentile_disc(%g) WITHIN GROUP (ORDER BY f), "
                 "percentile_cont(%g) WITHIN GROUP (ORDER BY n), count(*) "
                 "FROM docs WHERE n %% 3 = 0 GROUP BY cat",
                 ps[pi], ps[pi], ps[pi]);
        QrSqlResult *r = run(q);
        cr_assert_gt(r->n_rows, 50);
        for (uint64_t row = 0; row < r->n_rows; row++) {
            const QrSqlValue *v = &r->vals[row * 5];
            int cat = atoi(v[0].u.s.s + 1);
            double fs[N_DOCS], ns[N_DOCS];
            int k = 0;
            for (int i = 0; i < N_DOCS; i++)
                if (model[i].cat == cat && i % 3 == 0) {
                    fs[k] = model[i].f;
                    ns[k++] = (double)i;
                }
            cr_assert_eq(v[4].u.i, k);
            qsort(fs, (size_t)k, sizeof *fs, cmp_double);
            qsort(ns, (size_t)k, sizeof *ns, cmp_double);
            double pos = ps[pi] * (k - 1);
            int lo = (int)floor(pos), hi = (int)ceil(pos);
            double fc = fs[lo] + (fs[hi] - fs[lo]) * (pos - lo);
            double nc = ns[lo] + (ns[hi] - ns[lo]) * (pos - lo);
            double dpos = ps[pi] * k;
            int dk = dpos <= 0 ? 0 : (int)ceil(dpos) - 1;
            if (dk >= k)
                dk = k - 1;
            cr_assert(fabs(v[1].u.f - fc) < 1e-9, "p %g cat %d: cont(f) %g want %g", ps[pi], cat,
                      v[1].u.f, fc);
            cr_assert(fabs(v[2].u.f - fs[dk]) < 1e-9, "p %g cat %d: disc(f) %g want %g", ps[pi],
                      cat, v[2].u.f, fs[dk]);
            cr_assert(fabs(v[3].u.f - nc) < 1e-9, "p %g cat %d: cont(n) %g want %g", ps[pi], cat,
                      v[3].u.f, nc);
        }
        qr_sql_result_free(r);
    }
}

/* INSERT n rows (fn writes each one's values) in one statement. */
typedef void (*RowFn)(char *out, size_t cap, int id, bool with_c, uint64_t *rng);
static void insert_rows(const char *table, int first, int n, bool with_c, RowFn fn, uint64_t *rng)
{
    static char q[600000];
    size_t at = (size_t)snprintf(q, sizeof q, "INSERT INTO %s VALUES ", table);
    for (int i = 0; i < n && at < sizeof q; i++) {
        char row[256];
        fn(row, sizeof row, first + i, with_c, rng);
        at += (size_t)snprintf(q + at, sizeof q - at, "%s(%s)", i ? ", " : "", row);
    }
    cr_assert_lt(at, sizeof q - 1);
    qr_sql_result_free(run(q));
}

/* ow: a clustered on id, b random, k keyword, ts random, c (later) */
static void ow_row(char *out, size_t cap, int id, bool with_c, uint64_t *rng)
{
    char a[24], b[24], k[24], c[24];
    snprintf(a, sizeof a, id % 17 == 0 ? "NULL" : "%d", id / 3);
    snprintf(b, sizeof b, id % 11 == 0 ? "NULL" : "%d", (int)eu_below(rng, 700));
    snprintf(k, sizeof k, id % 13 == 0 ? "NULL" : "'k%d'", (int)eu_below(rng, 97));
    snprintf(c, sizeof c, id % 5 == 0 ? "NULL" : "%d", (int)eu_below(rng, 50));
    char f[32];
    snprintf(f, sizeof f, id % 7 == 0 ? "NULL" : "%.3f", (double)eu_below(rng, 100000) / 7.0 - 7000);
    snprintf(out, cap, "%d, %s, %s, %s, '2025-%02d-%02d %02d:00:00', %s%s%s", id, a, b, k,
             1 + (int)eu_below(rng, 12), 1 + (int)eu_below(rng, 28), (int)eu_below(rng, 24), f,
             with_c ? ", " : "", with_c ? c : "");
}

/* ORDER BY <column> LIMIT k walks blocks best zone-map bound first and
 * skips rows whose key cannot enter.  Every ordering (ASC / DESC, NULLS
 * FIRST / LAST, keyword, timestamp, a column older segments lack, deleted
 * rows, a column predicate or not, OFFSET) must give the rows of the same
 * query ordered by an expression of the column, which the walk does not
 * serve (the ordinary sort, checked against SQLite and PostgreSQL by the
 * oracle test); and on a clustered column the walk must read few blocks. */
Test(sql, ordered_walk_matches_the_plain_sort)
{
    qr_sql_result_free(run("CREATE TABLE ow (id int8 PRIMARY KEY, a int8, b int8, k varchar(8), "
                           "ts timestamp, f float8)"));
    uint64_t rng = 7;
    for (int batch = 0; batch < 4; batch++) {
        if (batch == 3)
            qr_sql_result_free(run("ALTER TABLE ow ADD COLUMN c int8"));
        for (int part = 0; part < 6; part++)
            insert_rows("ow", (batch * 6 + part) * 1000, 1000, batch == 3, ow_row, &rng);
    }
    qr_sql_result_free(run("DELETE FROM ow WHERE id % 10 = 3 OR id BETWEEN 20000 AND 20999"));
    const char *cols[] = {"a", "b", "k", "ts", "c", "f"};
    const char *plain[] = {"a + 0", "b + 0", "k || ''", "ts::text", "c + 0", "f + 0"};
    const char *dirs[] = {"", " DESC", " NULLS FIRST", " DESC NULLS LAST"};
    const char *wheres[] = {"", "WHERE b > 350", "WHERE a % 4 = 1", "WHERE k IN ('k3', 'k5')"};
    const int lims[][2] = {{1, 0}, {10, 0}, {10, 95}, {300, 7}, {5, 23990}};
    int walked = 0, compared = 0;
    for (int ci = 0; ci < 6; ci++)
        for (int di = 0; di < 4; di++)
            for (int wi = 0; wi < 4; wi++)
                for (int li = 0; li < 5; li++) {
                    if (eu_below(&rng, 3) != 0 && !(li == 1 && wi == 0))
                        continue;
                    char q1[512], q2[512];
                    const char *tail = "%s ORDER BY %s%s, id LIMIT %d OFFSET %d";
                    char t1[256], t2[256];
                    snprintf(t1, sizeof t1, tail, wheres[wi], cols[ci], dirs[di], lims[li][0],
                             lims[li][1]);
                    snprintf(t2, sizeof t2, tail, wheres[wi], plain[ci], dirs[di], lims[li][0],
                             lims[li][1]);
                    snprintf(q1, sizeof q1, "SELECT id, %s FROM ow %s", cols[ci], t1);
                    snprintf(q2, sizeof q2, "SELECT id, %s FROM ow %s", cols[ci], t2);
                    QrSqlResult *r1 = run(q1), *r2 = run(q2);
                    cr_assert_eq(r1->n_rows, r2->n_rows, "%s: %" PRIu64 " rows, plain sort %" PRIu64,
                                 q1, r1->n_rows, r2->n_rows);
                    for (uint64_t i = 0; i < r1->n_rows; i++) {
                        cr_assert_str_eq(cell(r1, i, 0), cell(r2, i, 0), "%s: row %" PRIu64, q1, i);
                        cr_assert_str_eq(cell(r1, i, 1), cell(r2, i, 1), "%s: row %" PRIu64, q1, i);
                    }
                    qr_sql_result_free(r1);
                    qr_sql_result_free(r2);
                    compared++;
                    /* the walk served it (EXPLAIN names it) */
                    snprintf(q1, sizeof q1, "EXPLAIN ANALYZE SELECT id FROM ow %s", t1);
                    QrSqlResult *x = run(q1);
                    for (uint64_t i = 0; i < x->n_rows; i++)
                        walked += strstr(cell(x, i, 0), "Ordered Walk:") != NULL;
                    qr_sql_result_free(x);
                }
    cr_assert_gt(compared, 60);
    cr_assert_eq(walked, compared, "the ordered walk served %d of %d queries", walked, compared);
    /* a clustered column: the top 10 come from a block or two */
    QrSqlResult *x = run("EXPLAIN ANALYZE SELECT id, a FROM ow ORDER BY a DESC NULLS LAST LIMIT 10");
    bool few = false;
    for (uint64_t i = 0; i < x->n_rows; i++) {
        const char *p = strstr(cell(x, i, 0), "Ordered Walk: ");
        unsigned rd, tot;
        if (p && sscanf(p, "Ordered Walk: %u of %u", &rd, &tot) == 2)
            few = rd <= 2 && tot >= 6;
    }
    cr_assert(few, "ORDER BY a clustered column read more than two blocks");
    qr_sql_result_free(x);
    /* expressions keep the ordinary sort */
    x = run("EXPLAIN ANALYZE SELECT id FROM ow ORDER BY b + 1 LIMIT 3");
    for (uint64_t i = 0; i < x->n_rows; i++)
        cr_assert_null(strstr(cell(x, i, 0), "Ordered Walk"));
    qr_sql_result_free(x);
}

/* The rows of q (text form, in order), for comparing two runs. */
static char *query_rows(const char *q)
{
    QrError err;
    qr_error_clear(&err);
    QrSqlResult *r = NULL;
    if (qr_sql_exec(sess, q, strlen(q), &r, &err) != QR_OK) { /* the error is the answer */
        char *t = malloc(64);
        snprintf(t, 64, "error %s", qr_error_sqlstate(&err));
        return t;
    }
    char *t = rows_text(r);
    qr_sql_result_free(r);
    return t;
}

/* Ranges of the primary key (pk > a, a < pk, BETWEEN, float and NULL
 * bounds, strings) read the keys in range through each segment's sorted
 * key index: the answers equal a brute force over the model and the forced
 * full scan, also for string keys and for a table mixing both key kinds;
 * and EXPLAIN shows the pk path reading only the range. */
Test(sql, primary_key_ranges)
{
    uint64_t rng = 99;
    const char *ops[] = {">", ">=", "<", "<="};
    qr_sql_result_free(run("DELETE FROM docs WHERE id % 7 = 2"));
    for (int t = 0; t < 60; t++) {
        int a = (int)eu_below(&rng, N_DOCS + 200) - 100, b = a + (int)eu_below(&rng, 3000);
        char q[256];
        int form = t % 4;
        if (form == 0)
            snprintf(q, sizeof q, "id BETWEEN %d AND %d", a, b);
        else if (form == 1)
            snprintf(q, sizeof q, "id %s %d AND %d %s id", ops[t / 4 % 4], a, b, ops[t / 16 % 4]);
        else if (form == 2)
            snprintf(q, sizeof q, "id %s %d.5 AND n < %d", ops[t / 4 % 4], a, b);
        else
            snprintf(q, sizeof q, "id >= %d AND id < %d AND id > %d", a, b, a + 10);
        char sql[512];
        snprintf(sql, sizeof sql, "SELECT count(*), sum(n), min(id), max(id) FROM docs WHERE %s", q);
        /* brute force over the model (n = id; deleted: id % 7 == 2) */
        int64_t cnt = 0, sum = 0;
        for (int i = 0; i < N_DOCS; i++) {
            if (i % 7 == 2)
                continue;
            bool in;
            double x = i;
            if (form == 0)
                in = i >= a && i <= b;
            else if (form == 3)
                in = i >= a && i < b && i > a + 10;
            else {
                double lo = form == 2 ? a + 0.5 : a;
                const char *op = ops[t / 4 % 4];
                in = op[0] == '>' ? (op[1] ? x >= lo : x > lo) : (op[1] ? x <= lo : x < lo);
                if (form == 1) { /* b op2 id */
                    const char *op2 = ops[t / 16 % 4];
                    in &= op2[0] == '>' ? (op2[1] ? b >= x : b > x) : (op2[1] ? b <= x : b < x);
                } else {
                    in &= i < b;
                }
            }
            if (in) {
                cnt++;
                sum += i;
            }
        }
        QrSqlResult *r = run(sql);
        cr_assert_eq(r->vals[0].u.i, cnt, "%s: count %lld, want %lld", sql, (long long)r->vals[0].u.i,
                     (long long)cnt);
        if (cnt)
            cr_assert_eq(r->vals[1].u.i, sum, "%s: sum", sql);
        qr_sql_result_free(r);
        char *auto_rows = query_rows(sql);
        set_path("full");
        char *full_rows = query_rows(sql);
        set_path("auto");
        cr_assert_str_eq(auto_rows, full_rows, "%s", sql);
        free(auto_rows);
        free(full_rows);
    }
    /* a narrow range reads its keys only */
    QrSqlResult *x = run("EXPLAIN ANALYZE SELECT id FROM docs WHERE id BETWEEN 100 AND 199");
    bool pk = false, few = false;
    for (uint64_t i = 0; i < x->n_rows; i++) {
        pk |= strstr(cell(x, i, 0), "Access Path: pk") != NULL;
        const char *c = strstr(cell(x, i, 0), "Candidates Checked: ");
        few |= c && atoi(c + 20) == 85; /* 100 keys, 15 of them deleted */
    }
    cr_assert(pk && few, "a pk range is not read through the key index");
    qr_sql_result_free(x);
    /* NULL and non-numeric bounds: no rows, or the full scan's error */
    x = run("SELECT count(*) FROM docs WHERE id > NULL");
    cr_assert_eq(x->vals[0].u.i, 0);
    qr_sql_result_free(x);

    /* string keys, and a table holding both kinds of key */
    QrError err;
    qr_error_clear(&err);
    const char *sj = "{\"primary_key\":\"id\",\"fields\":[{\"name\":\"v\",\"type\":\"int\"}]}";
    const char *names[] = {"sk", "mk"};
    for (int ti = 0; ti < 2; ti++) {
        QrSchema s;
        cr_assert_eq(schema_from_json(sj, strlen(sj), &s, &err), QR_OK, "%s", err.message);
        QrTable *tb;
        cr_assert_eq(qr_table_create(db, names[ti], &s, &tb, &err), QR_OK, "%s", err.message);
        QrBatch *b;
        cr_assert_eq(qr_batch_begin(tb, &b, &err), QR_OK, "%s", err.message);
        for (int i = 0; i < 3000; i++) {
            char doc[128];
            if (ti == 1 && i % 3 == 0)
                snprintf(doc, sizeof doc, "{\"id\":%d,\"v\":%d}", i, i);
            else
                snprintf(doc, sizeof doc, "{\"id\":\"%c%c%d\",\"v\":%d}", 'a' + (int)eu_below(&rng, 26),
                         'a' + (int)eu_below(&rng, 26), i, i);
            cr_assert_eq(qr_batch_put(b, doc, strlen(doc), NULL, &err), QR_OK, "%s", err.message);
            if (i % 1000 == 999)
                cr_assert_eq(qr_batch_commit(b, &err), QR_OK, "%s", err.message);
        }
        qr_batch_free(b);
        /* mk's first key is an integer, so its id column is int8 */
        const char *conds[2][6] = {
            {"id BETWEEN 'c' AND 'f'", "id > 'x'", "id <= 'b'", "'m5' < id AND id < 'p'",
             "id BETWEEN 'q' AND 'qz'", "id BETWEEN 'q' AND 'q'"},
            {"id BETWEEN 100 AND 900", "id > 2500", "id <= 30", "1200 < id AND id < 1500.5",
             "id >= 2990", "id BETWEEN 7 AND 8"}};
        for (int c = 0; c < 6; c++) {
            char sql[256];
            snprintf(sql, sizeof sql, "SELECT id, v FROM %s WHERE %s ORDER BY v", names[ti],
                     conds[ti][c]);
            char *auto_rows = query_rows(sql);
            set_path("full");
            char *full_rows = query_rows(sql);
            set_path("auto");
            cr_assert_str_eq(auto_rows, full_rows, "%s", sql);
            if (ti == 0 && c < 5) /* the last range holds no key */
                cr_assert_gt(strlen(auto_rows), 10, "%s: no rows", sql);
            free(auto_rows);
            free(full_rows);
        }
    }
}

/* Two rows_text answers equal, floating-point fields to 1e-9 relative
 * (sums added in another order differ in the last bits). */
static bool same_rows_approx(const char *a, const char *b)
{
    while (*a && *b) {
        size_t la = strcspn(a, "|\n"), lb = strcspn(b, "|\n");
        if (la != lb || memcmp(a, b, la) != 0) {
            char *ea, *eb;
            double x = strtod(a, &ea), y = strtod(b, &eb);
            if (ea != a + la || eb != b + lb || fabs(x - y) > 1e-9 * fmax(1.0, fabs(x)))
                return false;
        }
        a += la;
        b += lb;
        if (*a != *b)
            return false;
        if (*a) {
            a++;
            b++;
        }
    }
    return *a == *b;
}

/* ca: a word in body, k keyword, a int, f float, ts, c (later) */
static void ca_row(char *out, size_t cap, int id, bool with_c, uint64_t *rng)
{
    char k[24], a[24], f[32], c[24];
    snprintf(k, sizeof k, id % 13 == 0 ? "NULL" : "'k%d'", (int)eu_below(rng, 40));
    snprintf(a, sizeof a, id % 11 == 0 ? "NULL" : "%d", (int)eu_below(rng, 2000) - 1000);
    snprintf(f, sizeof f, id % 9 == 0 ? "NULL" : "%.2f", (double)eu_below(rng, 100000) / 100.0 - 500.0);
    snprintf(c, sizeof c, id % 5 == 0 ? "NULL" : "%d", (int)eu_below(rng, 50));
    snprintf(out, cap, "%d, '%s words', %s, %s, %s, '2025-%02d-%02d 10:00:00'%s%s", id,
             id % 3 ? "alpha" : "beta", k, a, f, 1 + (int)eu_below(rng, 12),
             1 + (int)eu_below(rng, 28), with_c ? ", " : "", with_c ? c : "");
}

/* GROUP BY a keyword column (or nothing) with count / sum / avg / min /
 * max of columns reads column blocks per segment instead of rows.  Each
 * answer must equal the row-at-a-time aggregation of the same query with
 * the columns wrapped in expressions (which that path does not serve):
 * NULL groups and values, deleted rows, a column older segments lack,
 * word and column conditions, HAVING; and SUM overflow stays 22003. */
Test(sql, column_block_aggregates_match_the_row_path)
{
    qr_sql_result_free(run("CREATE TABLE ca (id int8 PRIMARY KEY, body text, k varchar(8), a int8, "
                           "f float8, ts timestamp)"));
    uint64_t rng = 11;
    for (int batch = 0; batch < 4; batch++) {
        if (batch == 2)
            qr_sql_result_free(run("ALTER TABLE ca ADD COLUMN c int8"));
        insert_rows("ca", batch * 5000, 5000, batch >= 2, ca_row, &rng);
    }
    qr_sql_result_free(run("DELETE FROM ca WHERE id % 10 = 4 OR id BETWEEN 9000 AND 9999"));
    const char *conds[] = {"true", "body @@ 'beta'", "a > 100", "body @@ 'alpha' AND f < 0",
                           "k IN ('k1', 'k2', 'k3') AND a BETWEEN -500 AND 500", "c IS NULL",
                           "ts >= '2025-06-01'", "k IS NULL"};
    const char *tails[] = {"", " HAVING count(*) > 100", " HAVING sum(a) < 0"};
    int fast = 0, total = 0;
    for (int ci = 0; ci < 8; ci++)
        for (int g = 0; g < 2; g++)
            for (int ti = 0; ti < (g ? 3 : 1); ti++) {
                char q1[1024], q2[1024];
                const char *sel1 = "count(*), count(a), sum(a), avg(a), min(a), max(a), sum(c), "
                                   "min(c), count(f), sum(f), avg(f), min(f), max(f), min(ts), max(ts)";
                const char *sel2 = "count(*), count(a+0), sum(a+0), avg(a+0), min(a+0), max(a+0), "
                                   "sum(c+0), min(c+0), count(f+0), sum(f+0), avg(f+0), min(f+0), "
                                   "max(f+0), min(coalesce(ts, ts)), max(coalesce(ts, ts))";
                if (g) {
                    snprintf(q1, sizeof q1, "SELECT k, %s FROM ca WHERE %s GROUP BY k%s ORDER BY k",
                             sel1, conds[ci], tails[ti]);
                    snprintf(q2, sizeof q2,
                             "SELECT k, %s FROM ca WHERE %s GROUP BY k || '', k%s ORDER BY k", sel2,
                             conds[ci], tails[ti]);
                } else {
                    snprintf(q1, sizeof q1, "SELECT %s FROM ca WHERE %s", sel1, conds[ci]);
                    snprintf(q2, sizeof q2, "SELECT %s FROM ca WHERE %s", sel2, conds[ci]);
                }
                char *r1 = query_rows(q1), *r2 = query_rows(q2);
                cr_assert(same_rows_approx(r1, r2), "%s\n%s\n%s", q1, r1, r2);
                if (ti == 0)
                    cr_assert_gt(strlen(r1), 20, "%s: %s", q1, r1);
                free(r1);
                free(r2);
                char qx[1100];
                snprintf(qx, sizeof qx, "EXPLAIN ANALYZE %s", q1);
                QrSqlResult *x = run(qx);
                for (uint64_t i = 0; i < x->n_rows; i++)
                    fast += strstr(cell(x, i, 0), "Aggregated from Column Blocks") != NULL;
                qr_sql_result_free(x);
                snprintf(qx, sizeof qx, "EXPLAIN ANALYZE %s", q2);
                x = run(qx);
                for (uint64_t i = 0; i < x->n_rows; i++)
                    cr_assert_null(strstr(cell(x, i, 0), "Aggregated from Column Blocks"), "%s", q2);
                qr_sql_result_free(x);
                total++;
            }
    cr_assert_eq(fast, total, "column blocks served %d of %d queries", fast, total);
    /* sum over int8 overflowing: 22003 on both paths; avg goes on in floating point */
    qr_sql_result_free(run("INSERT INTO ca (id, k, a) SELECT 200000 + g, 'big', 9007199254740000 "
                           "FROM generate_series(1, 1100) g")); /* 2^53 at most per value */
    fails("SELECT k, sum(a) FROM ca WHERE k = 'big' GROUP BY k", "22003", 0);
    fails("SELECT k, sum(a + 0) FROM ca WHERE k = 'big' GROUP BY k", "22003", 0);
    char *r1 = query_rows("SELECT k, avg(a) FROM ca WHERE k = 'big' GROUP BY k");
    char *r2 = query_rows("SELECT k, avg(a + 0) FROM ca WHERE k = 'big' GROUP BY k");
    cr_assert_str_eq(r1, r2);
    free(r1);
    free(r2);
}

/* One prepared statement executed many times: bound once, planned and run
 * per execution with its parameter values; bound again after DDL. */
static QrSqlResult *exec_p(QrSqlStmt *st, const char *v1)
{
    QrError err;
    qr_error_clear(&err);
    const char *vals[] = {v1};
    int lens[] = {v1 ? (int)strlen(v1) : 0};
    QrSqlParams p = {.n = v1 ? 1 : 0, .values = vals, .lengths = lens};
    QrSqlResult *r = NULL;
    cr_assert_eq(qr_sql_execute(sess, st, &p, &r, &err), QR_OK, "%s", err.message);
    return r;
}

static QrSqlStmt *prep(const char *q)
{
    QrError err;
    qr_error_clear(&err);
    QrSqlStmt *st;
    cr_assert_eq(qr_sql_prepare(sess, q, strlen(q), NULL, 0, &st, &err), QR_OK, "%s: %s", q, err.message);
    return st;
}

Test(sql, bound_once_run_many_times)
{
    /* parameters change the answer (and the path) between executions */
    QrSqlStmt *st = prep("SELECT count(*), min(id), max(id) FROM docs WHERE n < $1 AND cat <> 'c1' "
                         "AND id IN (SELECT id FROM docs WHERE n >= $1 - 500)");
    const char *lims[] = {"10", "600", "3000", "10"};
    for (int k = 0; k < 4; k++) {
        int lim = atoi(lims[k]);
        int64_t cnt = 0, lo = -1, hi = -1;
        for (int i = 0; i < N_DOCS; i++)
            if (model[i].n < lim && model[i].cat != 1 && model[i].n >= lim - 500) {
                cnt++;
                if (lo < 0)
                    lo = i;
                hi = i;
            }
        QrSqlResult *r = exec_p(st, lims[k]);
        cr_assert_eq(r->vals[0].u.i, cnt, "n < %d: count %lld, want %lld", lim,
                     (long long)r->vals[0].u.i, (long long)cnt);
        cr_assert_eq(r->vals[1].u.i, lo);
        cr_assert_eq(r->vals[2].u.i, hi);
        qr_sql_result_free(r);
    }
    qr_sql_stmt_unref(st);
    /* a catalog join and a WITH query keep their column names across runs */
    st = prep("WITH t AS (SELECT relname AS r FROM pg_class c JOIN pg_namespace n "
              "ON n.oid = c.relnamespace WHERE n.nspname = 'public') SELECT r FROM t ORDER BY r");
    for (int k = 0; k < 3; k++) {
        QrSqlResult *r = exec_p(st, NULL);
        cr_assert_str_eq(r->cols[0].name, "r");
        bool docs = false;
        for (uint64_t i = 0; i < r->n_rows; i++)
            docs |= !strcmp(cell(r, i, 0), "docs");
        cr_assert(docs, "run %d: pg_class lists no docs", k);
        qr_sql_result_free(r);
    }
    qr_sql_stmt_unref(st);
    /* DDL between executions: the statement binds again */
    qr_sql_result_free(run("CREATE TABLE bo (id bigint PRIMARY KEY, a int)"));
    qr_sql_result_free(run("INSERT INTO bo VALUES (1, 10), (2, 20)"));
    st = prep("SELECT * FROM bo ORDER BY id");
    QrSqlResult *r = exec_p(st, NULL);
    cr_assert_eq(r->n_cols, 2);
    qr_sql_result_free(r);
    qr_sql_result_free(run("ALTER TABLE bo ADD COLUMN b text"));
    qr_sql_result_free(run("UPDATE bo SET b = 'x' || a"));
    r = exec_p(st, NULL);
    cr_assert_eq(r->n_cols, 3, "the new column after ALTER TABLE: %d columns", r->n_cols);
    cr_assert_str_eq(cell(r, 1, 2), "x20");
    qr_sql_result_free(r);
    qr_sql_result_free(run("DROP TABLE bo"));
    QrError err;
    qr_error_clear(&err);
    cr_assert_neq(qr_sql_execute(sess, st, &(QrSqlParams){0}, &r, &err), QR_OK);
    cr_assert_str_eq(qr_error_sqlstate(&err), "42P01", "%s", err.message);
    qr_sql_result_free(run("CREATE TABLE bo (id bigint PRIMARY KEY, a int)"));
    qr_sql_result_free(run("INSERT INTO bo VALUES (7, 70)"));
    r = exec_p(st, NULL);
    cr_assert_eq(r->n_rows, 1);
    cr_assert_eq(r->vals[0].u.i, 7);
    qr_sql_result_free(r);
    qr_sql_stmt_unref(st);
}

Test(sql, mem_cap_cannot_exceed_the_server_budget)
{
    /* the server's limit is the ceiling of every session's cap: asking for
     * more is 22023 (naming the range), asking for less or RESET is fine */
    QrError err;
    qr_error_clear(&err);
    qr_mem_budget_set(64u << 20);
    cr_assert_eq(qr_sql_session_set(sess, "quarry.mem_cap", "134217728", &err), QR_EINVAL);
    cr_assert_str_eq(qr_error_sqlstate(&err), "22023");
    cr_assert(strstr(err.message, "(1048576 .. 67108864)"), "%s", err.message);
    fails("SET quarry.mem_cap = 67108865", "22023", -1);
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_set(sess, "quarry.mem_cap", "67108864", &err), QR_OK, "%s",
                 err.message);
    qr_sql_result_free(run("SET quarry.mem_cap = 33554432"));
    qr_sql_result_free(run("RESET quarry.mem_cap")); /* the default (512 MiB) is lowered, not refused */
    QrSqlResult *r = run("SELECT count(*) FROM docs WHERE cat = 'c5'");
    int64_t want = 0;
    for (int i = 0; i < N_DOCS; i++)
        want += model[i].cat == 5;
    cr_assert_eq(r->vals[0].u.i, want);
    qr_sql_result_free(r);
    qr_mem_budget_set(0);
}

Test(sql, running_statements_share_the_server_budget)
{
    /* A result holds its statement's memory until it is freed (a cursor, a
     * client reading slowly).  While one such result holds most of the
     * budget, the same statement in another session fails as out of memory
     * (53200, not its own cap's 54000), the server stays usable, and once
     * the first result is freed the second runs and gives the same rows. */
    const char *big = "SELECT title, cat, f FROM docs ORDER BY f, n";
    QrSqlResult *a = run(big);
    size_t held = qr_mem_budget_used();
    cr_assert(held > (4u << 20), "the result holds its arena: %zu bytes", held);
    qr_mem_budget_set(held + held / 2);
    QrSqlSession *other;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_new(db, &other, &err), QR_OK);
    QrSqlResult *b = NULL;
    cr_assert_eq(qr_sql_exec(other, big, strlen(big), &b, &err), QR_ENOMEM, "%s", err.message);
    cr_assert_null(b);
    cr_assert_str_eq(qr_error_sqlstate(&err), "53200", "%s", err.message);
    cr_assert(strstr(err.hint, "mem_limit"), "hint: %s", err.hint);
    cr_assert(qr_mem_budget_used() <= held + held / 2);
    /* small statements still run beside it */
    QrSqlResult *c = NULL;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_exec(other, "SELECT 1", 8, &c, &err), QR_OK, "%s", err.message);
    qr_sql_result_free(c);
    qr_sql_result_free(a);
    cr_assert_eq(qr_mem_budget_used(), 0, "a freed result gives all its memory back");
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_exec(other, big, strlen(big), &b, &err), QR_OK, "%s", err.message);
    cr_assert_eq(b->n_rows, N_DOCS);
    double last = -1;
    for (uint64_t i = 0; i < b->n_rows; i++) {
        cr_assert(b->vals[i * 3 + 2].u.f >= last);
        last = b->vals[i * 3 + 2].u.f;
    }
    qr_sql_result_free(b);
    qr_sql_session_free(other);
    cr_assert_eq(qr_mem_budget_used(), 0);
    qr_mem_budget_set(0);
}

/* ======================================================================== */
/* The text scan: full-text predicates as a scan (sql_scan.c, sql_text.c
 * over search_int.h).  Every forced access path returns the rows of a
 * brute-force model of generated documents (text predicates with column
 * predicates, under OR and NOT, two predicates, above a join, counts),
 * score() is bit for bit qr_search's score for the same query and the
 * top-k is qr_search's top-k, snippet(col) is cut from col, and the driving
 * predicate hands out batches of every edge size (0, 1, 1024 and 1025
 * matches) over several segments, one of them a single document, with
 * deleted documents among the matches.  Its own table, built with the
 * engine's API.                                                            */
/* ======================================================================== */

#define NT 6000
/* segments: [0, 2500), [2500] alone, [2501, 4000), [4000, NT) */
#define SEG1 2500
#define SEG3 4000

static QrTable *tab;

static struct {
    int n, cat;
    bool del;                 /* deleted after the segments were written */
    bool common, kilo, kiloplus, one, ghost, beta, tiling_title, tiling_body;
    int alpha;                /* occurrences of "alpha" in the body */
} m[NT];

static bool is_del(int i) { return i % 17 == 5 && i != SEG1; }

static void model_build(void)
{
    /* kilo: the docs below the point where 1024 live ones are reached (the
     * deleted ones among them carry it too); kiloplus: 1025 */
    int live = 0, kilo_end = -1, plus_end = -1;
    for (int i = 0; i < SEG1; i++) {
        live += !is_del(i);
        if (live == 1024 && kilo_end < 0)
            kilo_end = i + 1;
        if (live == 1025 && plus_end < 0)
            plus_end = i + 1;
    }
    for (int i = 0; i < NT; i++) {
        m[i].n = i;
        m[i].cat = (i * 7) % 13;
        m[i].del = is_del(i);
        m[i].common = i % 10 != 0;
        m[i].kilo = i < kilo_end;
        m[i].kiloplus = i < plus_end;
        m[i].one = i == SEG1;
        m[i].ghost = m[i].del && i < 3000;
        m[i].beta = i % 3 == 0;
        m[i].tiling_title = i % 50 == 0;
        m[i].tiling_body = i % 100 == 0;
        m[i].alpha = i % 12 < 2 ? 1 + (i / 12) % 5 : 0; /* in 1 doc of 6, 1..5 times */
    }
}

static void doc_json(int i, char *out, size_t cap)
{
    char body[1024];
    size_t at = 0;
#define PUT(...) at += (size_t)snprintf(body + at, sizeof body - at, __VA_ARGS__)
    PUT("bodyword%d%s lorem ipsum", i % 97, m[i].tiling_body ? " sit amet tiling" : "");
    if (m[i].common)
        PUT(" common");
    for (int k = 0; k < m[i].alpha; k++)
        PUT(" alpha dolor");
    if (m[i].beta)
        PUT(" beta");
    if (m[i].kilo)
        PUT(" kilo");
    if (m[i].kiloplus)
        PUT(" kiloplus");
    if (m[i].one)
        PUT(" solo");
    if (m[i].ghost)
        PUT(" ghost");
    PUT(" end of the body");
#undef PUT
    snprintf(out, cap,
             "{\"id\":%d,\"title\":\"title %d%s\",\"body\":\"%s\",\"cat\":\"c%d\",\"n\":%d}", i,
             i % 89, m[i].tiling_title ? " tiling window manager" : " plain", body, m[i].cat,
             m[i].n);
}

static void tx_setup(void)
{
    model_build();
    tab = db_with_table("tx", "{\"primary_key\":\"id\",\"fields\":["
                              "{\"name\":\"title\",\"type\":\"text\",\"language\":\"english\"},"
                              "{\"name\":\"body\",\"type\":\"text\",\"language\":\"english\"},"
                              "{\"name\":\"cat\",\"type\":\"keyword\"},"
                              "{\"name\":\"n\",\"type\":\"int\"}]}");
    QrError err;
    qr_error_clear(&err);
    char buf[2048];
    QrBatch *b;
    cr_assert_eq(qr_batch_begin(tab, &b, &err), QR_OK, "%s", err.message);
    for (int i = 0; i < NT; i++) {
        doc_json(i, buf, sizeof buf);
        cr_assert_eq(qr_batch_put(b, buf, strlen(buf), NULL, &err), QR_OK, "%s", err.message);
        if (i == SEG1 - 1 || i == SEG1 || i == SEG3 - 1)
            cr_assert_eq(qr_batch_commit(b, &err), QR_OK, "%s", err.message);
    }
    cr_assert_eq(qr_batch_commit(b, &err), QR_OK, "%s", err.message);
    for (int i = 0; i < NT; i++)
        if (m[i].del) {
            snprintf(buf, sizeof buf, "%d", i);
            cr_assert_eq(qr_batch_delete(b, buf, strlen(buf), NULL, &err), QR_OK, "%s", err.message);
        }
    cr_assert_eq(qr_batch_commit(b, &err), QR_OK, "%s", err.message);
    qr_batch_free(b);
    cr_assert_eq(qr_sql_session_new(db, &sess, &err), QR_OK);
}

TestSuite(sql_text, .init = tx_setup, .fini = teardown);

static const char *PATHS[] = {"auto", "text", "scan", "check", "full", "btree", "pk"};
#define N_PATHS (int)(sizeof PATHS / sizeof *PATHS)

/* The first ORDER BY id rows of q are exactly the live docs `want` picks,
 * under every forced path; returns how many. */
static uint64_t same_rows(const char *q, bool (*want)(int i))
{
    uint64_t k = 0;
    for (int p = 0; p < N_PATHS; p++) {
        set_path(PATHS[p]);
        QrSqlResult *r = run(q);
        k = 0;
        for (int i = 0; i < NT; i++)
            if (!m[i].del && want(i)) {
                cr_assert(k < r->n_rows, "path %s: too few rows (%" PRIu64 ") for %s", PATHS[p],
                          r->n_rows, q);
                cr_assert_eq(r->vals[k * (uint64_t)r->n_cols].u.i, i, "path %s row %" PRIu64 ": %s",
                             PATHS[p], k, q);
                k++;
            }
        cr_assert_eq(r->n_rows, k, "path %s: %s gave %" PRIu64 " rows, want %" PRIu64, PATHS[p], q,
                     r->n_rows, k);
        qr_sql_result_free(r);
    }
    set_path("auto");
    return k;
}

static bool w_zero(int i) { (void)i; return false; }
static bool w_ghost(int i) { return m[i].ghost; }
static bool w_one(int i) { return m[i].one; }
static bool w_kilo(int i) { return m[i].kilo; }
static bool w_kiloplus(int i) { return m[i].kiloplus; }
static bool w_common(int i) { return m[i].common; }
static bool w_plus_n(int i) { return m[i].kiloplus && m[i].n < 700; }
static bool w_plus_cat(int i) { return m[i].kiloplus && m[i].cat == 3; }
static bool w_common_range(int i) { return m[i].common && m[i].n >= 1000 && m[i].n <= 4500 && m[i].cat != 1; }
static bool w_alpha_or(int i) { return m[i].alpha > 0 || m[i].n < 10; }
static bool w_two(int i) { return m[i].kiloplus && m[i].tiling_title; }
static bool w_not(int i) { return !m[i].common && m[i].n < 3000; }
static bool w_keys(int i) { return (i == 1 || i == 2 || i == SEG1 || i == SEG3 || i == 5) && m[i].common; }
static bool w_beta_one(int i) { return m[i].beta && m[i].n >= SEG1 - 3 && m[i].n <= SEG1 + 3; }
static bool w_alpha_k(int i) { return m[i].alpha > 0 && m[i].cat == 4; }

Test(sql_text, every_path_returns_the_model_s_rows)
{
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_table_create_index(tab, "n", &err), QR_OK, "%s", err.message);
    struct {
        const char *q;
        bool (*want)(int);
        uint64_t rows; /* 0: not checked */
    } cases[] = {
        /* batches of every edge size: no match, matches only in deleted
         * docs, one (in a segment of one doc), exactly a batch, a batch + 1 */
        {"SELECT id FROM tx WHERE body @@ 'zero' ORDER BY id", w_zero, 0},
        {"SELECT id FROM tx WHERE body @@ 'ghost' ORDER BY id", w_ghost, 0},
        {"SELECT id FROM tx WHERE tx @@ 'solo' ORDER BY id", w_one, 1},
        {"SELECT id FROM tx WHERE body @@ 'kilo' ORDER BY id", w_kilo, 1024},
        {"SELECT id FROM tx WHERE body @@ 'kiloplus' ORDER BY id", w_kiloplus, 1025},
        {"SELECT id FROM tx WHERE body @@ 'common' ORDER BY id", w_common, 0},
        /* with column predicates */
        {"SELECT id FROM tx WHERE body @@ 'kiloplus' AND n < 700 ORDER BY id", w_plus_n, 0},
        {"SELECT id FROM tx WHERE body @@ 'kiloplus' AND cat = 'c3' ORDER BY id", w_plus_cat, 0},
        {"SELECT id FROM tx WHERE body @@ 'common' AND n BETWEEN 1000 AND 4500 AND cat <> 'c1' "
         "ORDER BY id", w_common_range, 0},
        {"SELECT id FROM tx WHERE body @@ 'beta' AND n >= 2497 AND n <= 2503 ORDER BY id",
         w_beta_one, 0},
        /* a predicate that does not drive: under OR, NOT, a second one */
        {"SELECT id FROM tx WHERE body @@ 'alpha' OR n < 10 ORDER BY id", w_alpha_or, 0},
        {"SELECT id FROM tx WHERE NOT (body @@ 'common') AND n < 3000 ORDER BY id", w_not, 0},
        {"SELECT id FROM tx WHERE body @@ 'kiloplus' AND title @@ 'tiling' ORDER BY id", w_two, 0},
        /* key lookups with the text predicate checked per row */
        {"SELECT id FROM tx WHERE id IN (1, 2, 5, 2500, 4000) AND body @@ 'common' ORDER BY id",
         w_keys, 0},
        /* the top-k and the ordered walk leave the same rows */
        {"SELECT id FROM (SELECT id, score() AS s FROM tx WHERE body @@ 'alpha' AND cat = 'c4' "
         "ORDER BY score() DESC, id LIMIT 100000) x WHERE s > 0 ORDER BY id", w_alpha_k, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        uint64_t n = same_rows(cases[c].q, cases[c].want);
        if (cases[c].rows)
            cr_assert_eq(n, cases[c].rows, "%s: the model has %" PRIu64 " rows", cases[c].q, n);
    }
    /* count(*) from postings (and the column predicates' bitmaps) */
    for (int p = 0; p < N_PATHS; p++) {
        set_path(PATHS[p]);
        QrSqlResult *r = run("SELECT count(*) FROM tx WHERE body @@ 'kiloplus' AND n < 700");
        QrSqlResult *r2 = run("SELECT count(*) FROM tx WHERE body @@ 'kilo'");
        int64_t want = 0;
        for (int i = 0; i < NT; i++)
            want += !m[i].del && w_plus_n(i);
        cr_assert_eq(r->vals[0].u.i, want, "path %s", PATHS[p]);
        cr_assert_eq(r2->vals[0].u.i, 1024, "path %s", PATHS[p]);
        qr_sql_result_free(r);
        qr_sql_result_free(r2);
    }
    set_path("auto");
}

/* A predicate evaluated above a join, after the side it belongs to was
 * read to its end (and its scan closed). */
Test(sql_text, predicate_above_a_join_after_its_scan_closed)
{
    for (int p = 0; p < N_PATHS; p++) {
        set_path(PATHS[p]);
        QrSqlResult *r = run("SELECT a.id FROM tx a JOIN tx b ON a.n = b.id "
                             "WHERE b.body @@ 'kilo' OR a.n < 5 ORDER BY a.id");
        uint64_t k = 0;
        for (int i = 0; i < NT; i++)
            if (!m[i].del && (m[i].kilo || m[i].n < 5)) {
                cr_assert(k < r->n_rows, "path %s", PATHS[p]);
                cr_assert_eq(r->vals[k].u.i, i, "path %s row %" PRIu64, PATHS[p], k);
                k++;
            }
        cr_assert_eq(r->n_rows, k, "path %s: %" PRIu64 " rows, want %" PRIu64, PATHS[p], r->n_rows, k);
        qr_sql_result_free(r);
    }
    set_path("auto");
}

/* qr_search's every match with its score: scores[global doc], NAN for none. */
static float *engine_scores(const char *q, const char *fields, const char *filter, uint64_t *total)
{
    QrSearchReq rq;
    qr_search_req_init(&rq);
    rq.q = q;
    rq.q_len = strlen(q);
    rq.fields = fields;
    rq.filter = filter;
    rq.limit = NT;
    QrSearchRes *res;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_search(tab, &rq, &res, &err), QR_OK, "%s: %s", q, err.message);
    float *s = malloc(NT * sizeof *s);
    for (int i = 0; i < NT; i++)
        s[i] = NAN;
    for (int h = 0; h < res->n_hits; h++) {
        cr_assert(res->hits[h].doc >= 0 && res->hits[h].doc < NT);
        s[res->hits[h].doc] = res->hits[h].score;
    }
    *total = res->total;
    cr_assert_eq((uint64_t)res->n_hits, res->total, "%s: every match is a hit", q);
    qr_search_res_free(res);
    return s;
}

Test(sql_text, scores_and_top_k_are_the_text_engine_s)
{
    struct {
        const char *sql_target, *q, *fields;
    } qs[] = {
        {"tx", "alpha", NULL},
        {"tx", "alpha beta", NULL},
        {"body", "alpha AND beta", "body"},
        {"body", "\"alpha dolor\" kilo", "body"},
        {"tx", "alph* title:tiling^2", NULL},
        {"title", "tiling window", "title"},
    };
    const char *wheres[] = {"", " AND n < 3000", " AND cat = 'c4'"};
    const char *filters[] = {NULL, "n < 3000", "cat = 'c4'"};
    for (size_t qi = 0; qi < sizeof qs / sizeof *qs; qi++)
        for (int wi = 0; wi < 3; wi++) {
            uint64_t total;
            float *want = engine_scores(qs[qi].q, qs[qi].fields, filters[wi], &total);
            char q[512];
            /* every match with its score, on every path */
            snprintf(q, sizeof q, "SELECT _id, score() FROM tx WHERE %s @@ '%s'%s ORDER BY _id",
                     qs[qi].sql_target, qs[qi].q, wheres[wi]);
            for (int p = 0; p < N_PATHS; p++) {
                set_path(PATHS[p]);
                QrSqlResult *r = run(q);
                cr_assert_eq(r->n_rows, total, "path %s: %s", PATHS[p], q);
                for (uint64_t k = 0; k < r->n_rows; k++) {
                    int64_t d = r->vals[k * 2].u.i;
                    cr_assert(d >= 0 && d < NT && !isnan(want[d]), "path %s: %s: doc %" PRId64,
                              PATHS[p], q, d);
                    cr_assert(r->vals[k * 2 + 1].u.f == (double)want[d],
                              "path %s: %s: doc %" PRId64 " scores %.9g, the engine %.9g", PATHS[p],
                              q, d, r->vals[k * 2 + 1].u.f, (double)want[d]);
                }
                qr_sql_result_free(r);
            }
            set_path("auto");
            /* the top 10: the engine's order is score desc, then doc */
            snprintf(q, sizeof q,
                     "SELECT _id, score() FROM tx WHERE %s @@ '%s'%s ORDER BY score() DESC, _id LIMIT 10",
                     qs[qi].sql_target, qs[qi].q, wheres[wi]);
            QrSqlResult *r = run(q);
            int seen[10], n_seen = 0;
            for (uint64_t k = 0; k < r->n_rows; k++) {
                /* the k-th best of the engine's scores, by brute force */
                int best = -1;
                for (int i = 0; i < NT; i++) {
                    bool taken = false;
                    for (int j = 0; j < n_seen; j++)
                        taken |= seen[j] == i;
                    if (!isnan(want[i]) && !taken && (best < 0 || want[i] > want[best]))
                        best = i;
                }
                cr_assert_eq(r->vals[k * 2].u.i, best, "%s: hit %" PRIu64, q, k);
                cr_assert(r->vals[k * 2 + 1].u.f == (double)want[best], "%s: hit %" PRIu64, q, k);
                seen[n_seen++] = best;
            }
            cr_assert_eq(r->n_rows, total < 10 ? total : 10, "%s", q);
            qr_sql_result_free(r);
            free(want);
        }
}

Test(sql_text, snippet_comes_from_the_column_named)
{
    /* the predicate searches the title; the passages come from the
     * columns snippet() names */
    QrSqlResult *r = run("SELECT id, snippet(body), snippet(title), highlight(body), snippet(tx) "
                         "FROM tx WHERE title @@ 'tiling' ORDER BY id LIMIT 6");
    cr_assert_eq(r->n_rows, 6);
    for (uint64_t k = 0; k < r->n_rows; k++) {
        int i = (int)r->vals[k * 5].u.i;
        const QrSqlValue *body = &r->vals[k * 5 + 1], *title = &r->vals[k * 5 + 2];
        const QrSqlValue *hl = &r->vals[k * 5 + 3], *whole = &r->vals[k * 5 + 4];
        char word[32];
        snprintf(word, sizeof word, "bodyword%d", i % 97);
        cr_assert(m[i].tiling_title);
        cr_assert(!body->is_null && !title->is_null && !hl->is_null && !whole->is_null);
        cr_assert(memmem(body->u.s.s, body->u.s.n, word, strlen(word)),
                  "doc %d: snippet(body) is \"%.*s\"", i, (int)body->u.s.n, body->u.s.s);
        cr_assert(!memmem(body->u.s.s, body->u.s.n, "window manager", 14),
                  "doc %d: snippet(body) holds the title", i);
        /* the query's words are marked where the body has them */
        bool marked = memmem(body->u.s.s, body->u.s.n, "<b>tiling</b>", 13) != NULL;
        cr_assert_eq(marked, m[i].tiling_body, "doc %d: \"%.*s\"", i, (int)body->u.s.n, body->u.s.s);
        cr_assert(memmem(title->u.s.s, title->u.s.n, "<b>tiling</b>", 13), "doc %d: \"%.*s\"", i,
                  (int)title->u.s.n, title->u.s.s);
        cr_assert(hl->u.s.n == body->u.s.n && !memcmp(hl->u.s.s, body->u.s.s, hl->u.s.n));
        /* snippet(t): the fields the predicate searched (the title) */
        cr_assert(whole->u.s.n == title->u.s.n && !memcmp(whole->u.s.s, title->u.s.s, whole->u.s.n));
    }
    qr_sql_result_free(r);
    /* a row the predicate does not match (under OR) has no passage */
    r = run("SELECT id, snippet(title) FROM tx WHERE title @@ 'tiling' OR id = 1 ORDER BY id LIMIT 2");
    cr_assert_eq(r->n_rows, 2);
    cr_assert_eq(r->vals[0].u.i, 0);
    cr_assert(!r->vals[1].is_null);
    cr_assert_eq(r->vals[2].u.i, 1);
    cr_assert(r->vals[3].is_null);
    qr_sql_result_free(r);
    /* under OR, snippet(col) is marked by the first predicate the row
     * matches: a row found only by the body's "alpha" shows "alpha", a row
     * the title's "tiling" found shows "tiling" where its body has it */
    r = run("SELECT id, snippet(body) FROM tx WHERE title @@ 'tiling' OR body @@ 'alpha' "
            "ORDER BY id LIMIT 60");
    cr_assert_eq(r->n_rows, 60);
    int by_alpha = 0, by_title = 0;
    for (uint64_t k = 0; k < r->n_rows; k++) {
        int i = (int)r->vals[k * 2].u.i;
        const QrSqlValue *s = &r->vals[k * 2 + 1];
        cr_assert(m[i].tiling_title || m[i].alpha, "doc %d does not match", i);
        cr_assert(!s->is_null, "doc %d: no snippet", i);
        bool alpha = memmem(s->u.s.s, s->u.s.n, "<b>alpha</b>", 12) != NULL;
        bool tiling = memmem(s->u.s.s, s->u.s.n, "<b>tiling</b>", 13) != NULL;
        if (m[i].tiling_title) {
            cr_assert(!alpha && tiling == m[i].tiling_body, "doc %d: \"%.*s\"", i,
                      (int)s->u.s.n, s->u.s.s);
            by_title++;
        } else {
            cr_assert(alpha && !tiling, "doc %d: \"%.*s\"", i, (int)s->u.s.n, s->u.s.s);
            by_alpha++;
        }
    }
    cr_assert(by_alpha > 10 && by_title > 1, "%d rows by alpha, %d by the title", by_alpha,
              by_title);
    qr_sql_result_free(r);
}

/* A text scan ended by the statement's deadline or memory cap (a driving
 * predicate, a per-row one, a top-k, a count) is 57014 / 54000, gives back
 * what it compiled (ASan's leak check), and the session answers the next
 * statement. */
Test(sql_text, deadline_and_memory_cap_end_a_text_scan)
{
    const char *qs[] = {
        "SELECT id FROM tx WHERE body @@ 'common'",
        "SELECT id FROM tx WHERE body @@ 'common' OR n < 3",
        "SELECT id FROM tx WHERE body @@ 'common' AND n < 5000 ORDER BY score() DESC LIMIT 3",
        "SELECT count(*) FROM tx WHERE body @@ 'common' AND n < 5000",
    };
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_set(sess, "statement_timeout", "1ms", &err), QR_OK);
    eu_clock_virtual(2000000); /* 2 ms a clock read: past the deadline at the first check */
    for (size_t i = 0; i < sizeof qs / sizeof *qs; i++)
        fails(qs[i], "57014", -1);
    eu_clock_real();
    cr_assert_eq(qr_sql_session_set(sess, "statement_timeout", "0", &err), QR_OK);
    cr_assert_eq(qr_sql_session_set(sess, "quarry.mem_cap", "1048576", &err), QR_OK);
    fails("SELECT id, body, snippet(body) FROM tx WHERE body @@ 'common'", "54000", -1);
    fails("SELECT id, body, score() FROM tx WHERE body @@ 'common' OR n < 3", "54000", -1);
    cr_assert_eq(qr_sql_session_set(sess, "quarry.mem_cap", "268435456", &err), QR_OK);
    QrSqlResult *r = run("SELECT count(*) FROM tx WHERE body @@ 'solo'");
    cr_assert_eq(r->vals[0].u.i, 1);
    qr_sql_result_free(r);
}

/* ORDER BY score() DESC, <key> LIMIT k: ties at the k-th score go by the
 * further key, not by the text engine's document order (every plain title
 * scores alike, so the top 5 by score, then id DESC, are the 5 largest
 * plain ids). */
Test(sql, top_k_ties_follow_the_further_sort_key)
{
    QrSqlResult *r = run("SELECT id, score() FROM docs WHERE title @@ 'plain' "
                         "ORDER BY score() DESC, id DESC LIMIT 5");
    cr_assert_eq(r->n_rows, 5);
    int want = N_DOCS - 1;
    for (uint64_t k = 0; k < 5; k++, want--) {
        while (model[want].has_rare)
            want--;
        cr_assert_eq(r->vals[k * 2].u.i, want, "row %llu: id %lld, want %d",
                     (unsigned long long)k, (long long)r->vals[k * 2].u.i, want);
        cr_assert_eq(r->vals[k * 2 + 1].u.f, r->vals[1].u.f, "plain titles tie");
    }
    qr_sql_result_free(r);
}
