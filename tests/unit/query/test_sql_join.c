/*
 * test_sql_join.c — joins as operators (plan/join.c, exec/op_hash_join.c,
 * exec/op_lateral.c, exec/op_subquery.c) against a brute-force model:
 * INNER, LEFT, RIGHT and FULL joins by hash and by nested loop, USING and
 * NATURAL with their merged column, semi and anti joins (IN, EXISTS,
 * NOT EXISTS) and NOT IN with NULLs, LATERAL, FROM subqueries that stream,
 * and the binder's errors.  Both sides come in the batch sizes that matter
 * (no row, one row, exactly a batch, a batch and one), with NULL keys and
 * many duplicates, so output batches fill and resume mid-probe.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql_lr_env.h"

TestSuite(sql_join, .init = lr_setup, .fini = lr_teardown, .timeout = 600);

/* ---- rows as sorted tuples of integers (NULL as 0) ---- */

typedef struct Tuples {
    int64_t *v;               /* n * w */
    size_t n, cap;
    int w;
} Tuples;

static void tup_add(Tuples *t, const int64_t *row)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 256;
        t->v = realloc(t->v, t->cap * (size_t)t->w * sizeof *t->v);
        cr_assert_not_null(t->v);
    }
    memcpy(t->v + t->n * (size_t)t->w, row, (size_t)t->w * sizeof *row);
    t->n++;
}

static int g_w;
static int tup_cmp(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    for (int i = 0; i < g_w; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

static void tup_sort(Tuples *t)
{
    if (t->n == 0)
        return;
    g_w = t->w;
    qsort(t->v, t->n, (size_t)t->w * sizeof *t->v, tup_cmp);
}

static Tuples result_tuples(const char *sql, int w)
{
    QrSqlResult *r = run(sql);
    cr_assert_eq(r->n_cols, w, "%s: %d columns", sql, r->n_cols);
    Tuples t = {.w = w};
    for (uint64_t i = 0; i < r->n_rows; i++) {
        int64_t row[4];
        for (int c = 0; c < w; c++) {
            const QrSqlValue *v = &r->vals[i * (uint64_t)w + (uint64_t)c];
            row[c] = v->is_null ? 0 : v->u.i;
        }
        tup_add(&t, row);
    }
    qr_sql_result_free(r);
    tup_sort(&t);
    return t;
}

static void same_tuples(const char *sql, Tuples *got, Tuples *want)
{
    tup_sort(want);
    cr_assert_eq(got->n, want->n, "%s: %zu rows, want %zu", sql, got->n, want->n);
    for (size_t i = 0; i < got->n * (size_t)got->w; i++)
        cr_assert_eq(got->v[i], want->v[i], "%s: row %zu differs", sql, i / (size_t)got->w);
    free(got->v);
    free(want->v);
}

static bool plan_has(const char *sql, const char *node)
{
    char q[1024];
    snprintf(q, sizeof q, "EXPLAIN %s", sql);
    QrSqlResult *r = run(q);
    bool found = false;
    for (uint64_t i = 0; i < r->n_rows && !found; i++)
        found = memmem(r->vals[i].u.s.s, r->vals[i].u.s.n, node, strlen(node)) != NULL;
    qr_sql_result_free(r);
    return found;
}

/* ---- outer joins ---- */

/* The model's join of l<nl> and r<nr>: keep_l / keep_r add the rows of one
 * side without a partner; with_k adds the merged USING column. */
static Tuples model_join(int nl, int nr, bool keep_l, bool keep_r, bool with_k)
{
    Tuples t = {.w = with_k ? 3 : 2};
    bool *rseen = calloc((size_t)nr + 1, 1);
    for (int i = 1; i <= nl; i++) {
        bool any = false;
        for (int j = 1; j <= nr; j++)
            if (lkey(i) != NUL && lkey(i) == rkey(j)) {
                int64_t row[3] = {i, j, lkey(i)};
                tup_add(&t, row);
                any = rseen[j] = true;
            }
        if (!any && keep_l) {
            int64_t row[3] = {i, 0, lkey(i) == NUL ? 0 : lkey(i)};
            tup_add(&t, row);
        }
    }
    for (int j = 1; j <= nr && keep_r; j++)
        if (!rseen[j]) {
            int64_t row[3] = {0, j, rkey(j) == NUL ? 0 : rkey(j)};
            tup_add(&t, row);
        }
    free(rseen);
    return t;
}

Test(sql_join, outer_joins_by_hash_and_nested_loop_match_the_model)
{
    static const char *const TYPES[] = {"JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"};
    char q[512];
    for (int a = 0; a < N_SIZES; a++)
        for (int b = 0; b < N_SIZES; b++)
            for (int t = 0; t < 4; t++)
                for (int nested = 0; nested < 2; nested++) {
                    int nl = SIZES[a], nr = SIZES[b];
                    snprintf(q, sizeof q, "SELECT l.id, r.id FROM l%d l %s r%d r ON %s", nl, TYPES[t], nr,
                             nested ? "l.k <= r.k AND l.k >= r.k" : "l.k = r.k");
                    Tuples got = result_tuples(q, 2);
                    Tuples want = model_join(nl, nr, t == 1 || t == 3, t == 2 || t == 3, false);
                    same_tuples(q, &got, &want);
                }
    /* a WHERE condition that rejects a side's NULL row makes the join inner
     * on that side (PostgreSQL's outer-join reduction): same rows */
    for (int t = 1; t < 4; t++)
        for (int side = 0; side < 2; side++) {
            snprintf(q, sizeof q, "SELECT l.id, r.id FROM l1025 l %s r1024 r ON l.k = r.k WHERE %s.id %% 2 = 0",
                     TYPES[t], side ? "r" : "l");
            Tuples got = result_tuples(q, 2);
            Tuples all = model_join(1025, 1024, t == 1 || t == 3, t == 2 || t == 3, false), want = {.w = 2};
            for (size_t i = 0; i < all.n; i++)
                if (all.v[2 * i + side] != 0 && all.v[2 * i + side] % 2 == 0)
                    tup_add(&want, &all.v[2 * i]);
            free(all.v);
            same_tuples(q, &got, &want);
        }
    cr_assert(plan_has("SELECT l.id FROM l1 l LEFT JOIN r1025 r ON l.k = r.k WHERE r.id > 5", "Hash Join"));
    cr_assert(plan_has("SELECT l.id FROM l1 l FULL JOIN r1025 r ON l.k = r.k WHERE r.id > 5", "Hash Left Join"));
    cr_assert(plan_has("SELECT l.id FROM l1 l LEFT JOIN r1025 r ON l.k = r.k WHERE r.id IS NULL",
                       "Hash Right Join"));
    /* the operator each form runs as, and the side hashed: the smaller */
    cr_assert(plan_has("SELECT l.id FROM l1 l LEFT JOIN r1025 r ON l.k = r.k", "Hash Right Join"));
    cr_assert(plan_has("SELECT l.id FROM l1025 l LEFT JOIN r1 r ON l.k = r.k", "Hash Left Join"));
    cr_assert(plan_has("SELECT l.id FROM l1025 l RIGHT JOIN r1 r ON l.k = r.k", "Hash Right Join"));
    cr_assert(plan_has("SELECT l.id FROM l1 l FULL JOIN r1024 r ON l.k = r.k", "Hash Full Join"));
    cr_assert(plan_has("SELECT l.id FROM l1 l FULL JOIN r1024 r ON l.k < r.k", "Nested Loop Full Join"));
    cr_assert(plan_has("SELECT l.id FROM l1024 l JOIN r1 r ON l.k = r.k", "Hash Join"));
}

Test(sql_join, using_and_natural_merge_their_columns)
{
    char q[512];
    for (int a = 1; a < N_SIZES; a++) {
        int n = SIZES[a];
        /* FULL: the merged k is COALESCE(l.k, r.k), shown once, first */
        snprintf(q, sizeof q, "SELECT l.id, r.id, k FROM l%d l FULL JOIN r%d r USING (k)", n, 1024);
        Tuples got = result_tuples(q, 3);
        Tuples want = model_join(n, 1024, true, true, true);
        same_tuples(q, &got, &want);
        snprintf(q, sizeof q, "SELECT l.id, r.id, k FROM l%d l RIGHT JOIN r%d r USING (k)", n, 1);
        got = result_tuples(q, 3);
        want = model_join(n, 1, false, true, true);
        same_tuples(q, &got, &want);
    }
    /* SELECT * lists k once, then each side's other columns */
    QrSqlResult *r = run("SELECT * FROM l1 JOIN (SELECT k, id AS rid FROM r1024) s USING (k)");
    cr_assert_eq(r->n_cols, 3);
    cr_assert_str_eq(r->cols[0].name, "k");
    cr_assert_str_eq(r->cols[1].name, "id");
    cr_assert_str_eq(r->cols[2].name, "rid");
    qr_sql_result_free(r);
    /* NATURAL joins on every common name: (id, k) here */
    Tuples got = result_tuples("SELECT id, k FROM l1025 NATURAL JOIN r1024", 2);
    Tuples want = {.w = 2};
    for (int i = 1; i <= 1024; i++)
        if (lkey(i) != NUL && lkey(i) == rkey(i)) {
            int64_t row[2] = {i, lkey(i)};
            tup_add(&want, row);
        }
    same_tuples("NATURAL", &got, &want);
    /* the inputs stay reachable qualified; a join alias hides them */
    qr_sql_result_free(run("SELECT l.k, r.k FROM l1 l JOIN r1 r USING (k)"));
    qr_sql_result_free(run("SELECT j.k, j.id FROM (l1 JOIN (SELECT k FROM r1) s USING (k)) AS j"));
    fails("SELECT l1.id FROM (l1 JOIN r1 USING (k)) AS j", "42703", NULL);
    fails("SELECT l1.* FROM (l1 JOIN r1 USING (k)) AS j", "42P01", "invalid reference");
    fails("SELECT id FROM l1 JOIN r1 USING (k)", "42702", "ambiguous");
    fails("SELECT 1 FROM l1 JOIN r1 USING (nosuch)", "42703", "USING");
    fails("SELECT 1 FROM l1 JOIN r1 USING (k, k)", "42701", NULL);
    fails("SELECT 1 FROM l1 JOIN (SELECT 'x'::text AS k) s USING (k)", "42804", "JOIN/USING");
    /* ON reads only its own join's items */
    fails("SELECT 1 FROM l1 a, l1 b JOIN r1 c ON c.k = a.k", "42P01", "invalid reference");
}

/* ---- semi and anti joins ---- */

static bool r_has(int nr, int key, bool *any_null)
{
    bool found = false;
    *any_null = false;
    for (int j = 1; j <= nr; j++) {
        *any_null |= rkey(j) == NUL;
        found |= key != NUL && rkey(j) == key;
    }
    return found;
}

Test(sql_join, semi_and_anti_joins_keep_null_semantics)
{
    char q[512];
    for (int a = 0; a < N_SIZES; a++)
        for (int b = 0; b < N_SIZES; b++) {
            int nl = SIZES[a], nr = SIZES[b];
            static const char *const FORMS[] = {
                "SELECT id FROM l%d l WHERE EXISTS (SELECT 1 FROM r%d r WHERE r.k = l.k)",
                "SELECT id FROM l%d l WHERE NOT EXISTS (SELECT 1 FROM r%d r WHERE r.k = l.k)",
                "SELECT id FROM l%d l WHERE k IN (SELECT k FROM r%d)",
                "SELECT id FROM l%d l WHERE k NOT IN (SELECT k FROM r%d)",
                "SELECT id FROM l%d l WHERE k IN (SELECT r.k FROM r%d r WHERE r.id = l.id)",
            };
            for (int f = 0; f < 5; f++) {
                snprintf(q, sizeof q, FORMS[f], nl, nr);
                Tuples got = result_tuples(q, 1), want = {.w = 1};
                for (int i = 1; i <= nl; i++) {
                    bool any_null, has = r_has(nr, lkey(i), &any_null), keep;
                    if (f == 0 || f == 2)
                        keep = has;
                    else if (f == 1)
                        keep = !has;
                    else if (f == 3) /* NULL NOT IN (empty) is true; NOT IN with a NULL never is */
                        keep = nr == 0 || (lkey(i) != NUL && !has && !any_null);
                    else
                        keep = i <= nr && lkey(i) != NUL && lkey(i) == rkey(i);
                    int64_t row[1] = {i};
                    if (keep)
                        tup_add(&want, row);
                }
                same_tuples(q, &got, &want);
            }
        }
    /* counts and min / max over one table: the shortcuts that answer from
     * the scan alone (filters, column statistics) must not skip the join */
    for (int b = 0; b < N_SIZES; b++) {
        int nr = SIZES[b];
        int64_t cnt = 0, cnt_k = 0;
        for (int i = 1; i <= 1025; i++) {
            bool any_null;
            if (r_has(nr, lkey(i), &any_null)) {
                cnt++;
                cnt_k += lkey(i) >= 3;
            }
        }
        /* count(*) alone (column statistics), and with a column predicate
         * (counted by the column filters) */
        snprintf(q, sizeof q, "SELECT count(*) FROM l1025 l WHERE EXISTS (SELECT 1 FROM r%d r WHERE r.k = l.k)",
                 nr);
        QrSqlResult *r = run(q);
        cr_assert_eq(r->vals[0].u.i, cnt, "%s: %" PRId64 ", want %" PRId64, q, r->vals[0].u.i, cnt);
        qr_sql_result_free(r);
        snprintf(q, sizeof q, "SELECT count(*) FROM l1025 l WHERE k >= 3 AND k IN (SELECT k FROM r%d)", nr);
        r = run(q);
        cr_assert_eq(r->vals[0].u.i, cnt_k, "%s: %" PRId64 ", want %" PRId64, q, r->vals[0].u.i, cnt_k);
        qr_sql_result_free(r);
        snprintf(q, sizeof q, "SELECT count(*) FROM l1025 l WHERE id < 500 AND k NOT IN (SELECT k FROM r%d)", nr);
        r = run(q);
        cnt = 0;
        for (int i = 1; i < 500; i++) {
            bool any_null, has = r_has(nr, lkey(i), &any_null);
            cnt += nr == 0 || (lkey(i) != NUL && !has && !any_null);
        }
        cr_assert_eq(r->vals[0].u.i, cnt, "%s", q);
        qr_sql_result_free(r);
    }
    cr_assert(plan_has("SELECT id FROM l1024 l WHERE EXISTS (SELECT 1 FROM r1 r WHERE r.k = l.k)",
                       "Hash Semi Join"));
    cr_assert(plan_has("SELECT id FROM l1024 l WHERE NOT EXISTS (SELECT 1 FROM r1 r WHERE r.k = l.k)",
                       "Hash Anti Join"));
    cr_assert(plan_has("SELECT id FROM l1024 WHERE k IN (SELECT k FROM r1)", "Hash Semi Join"));
    /* NOT IN stays a subquery (an anti join cannot say NULL) */
    cr_assert(!plan_has("SELECT id FROM l1024 WHERE k NOT IN (SELECT k FROM r1)", "Anti Join"));
    /* a correlation that is not an equality stays a subquery too */
    cr_assert(!plan_has("SELECT id FROM l1024 l WHERE EXISTS (SELECT 1 FROM r1 r WHERE r.k < l.k)", "Semi Join"));
}

/* ---- LATERAL ---- */

Test(sql_join, lateral_items_run_per_row)
{
    char q[512];
    for (int a = 0; a < N_SIZES; a++) {
        int nl = SIZES[a];
        /* a set-returning function over the row: k % 3 rows each */
        snprintf(q, sizeof q, "SELECT l.id, g FROM l%d l, LATERAL generate_series(1, l.k %% 3) g", nl);
        Tuples got = result_tuples(q, 2), want = {.w = 2};
        for (int i = 1; i <= nl; i++)
            for (int g = 1; lkey(i) != NUL && g <= lkey(i) % 3; g++) {
                int64_t row[2] = {i, g};
                tup_add(&want, row);
            }
        same_tuples(q, &got, &want);
        /* a subquery with ORDER BY / LIMIT over the row, LEFT: a row without
         * partners kept once */
        snprintf(q, sizeof q,
                 "SELECT l.id, s.id FROM l%d l LEFT JOIN LATERAL (SELECT r.id FROM r1025 r "
                 "WHERE r.k = l.k ORDER BY r.id DESC LIMIT 2) s ON true", nl);
        got = result_tuples(q, 2);
        want = (Tuples){.w = 2};
        for (int i = 1; i <= nl; i++) {
            int n = 0;
            for (int j = 1025; j >= 1 && n < 2; j--)
                if (lkey(i) != NUL && rkey(j) == lkey(i)) {
                    int64_t row[2] = {i, j};
                    tup_add(&want, row);
                    n++;
                }
            if (n == 0) {
                int64_t row[2] = {i, 0};
                tup_add(&want, row);
            }
        }
        same_tuples(q, &got, &want);
    }
    cr_assert(plan_has("SELECT 1 FROM l1 l LEFT JOIN LATERAL (SELECT r.id FROM r1 r WHERE r.k = l.k) s ON true",
                       "Nested Loop Left Join"));
    /* PostgreSQL's rules for a lateral reference */
    fails("SELECT 1 FROM l1 l RIGHT JOIN LATERAL (SELECT r.id FROM r1 r WHERE r.k = l.k) s ON true", "42P10",
          "invalid reference");
    fails("SELECT 1 FROM l1 l, (SELECT r.id FROM r1 r WHERE r.k = l.k) s", "42703", NULL); /* not LATERAL */
    /* LATERAL reading no item before it, inside a correlated subquery: its
     * outer references still reach the enclosing query's row */
    Tuples got = result_tuples("SELECT l.id, (SELECT max(s.id) FROM LATERAL (SELECT r.id FROM r1025 r "
                               "WHERE r.k = l.k ORDER BY r.id LIMIT 3) s) FROM l1024 l", 2);
    Tuples want = {.w = 2};
    for (int i = 1; i <= 1024; i++) {
        int64_t row[2] = {i, 0};
        for (int j = 1, n = 0; j <= 1025 && n < 3; j++)
            if (lkey(i) != NUL && rkey(j) == lkey(i)) {
                row[1] = j;
                n++;
            }
        tup_add(&want, row);
    }
    same_tuples("LATERAL in a subquery", &got, &want);
}

/* ---- FROM subqueries stream ---- */

Test(sql_join, from_subqueries_and_ctes_read_once_stream)
{
    /* a million-row cross join counted through a subquery (and a WITH query
     * read once) under a 16 MiB budget: storing it would take ~100 MB */
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_set(env.s, "quarry.mem_cap", "16777216", &err), QR_OK);
    static const char *const Q[] = {
        "SELECT count(*), sum(s.a) FROM (SELECT a.id AS a, b.id AS b FROM l1024 a, r1024 b) s",
        "WITH x AS (SELECT a.id AS a, b.id AS b FROM l1024 a, r1024 b) SELECT count(*), sum(a) FROM x",
    };
    for (int i = 0; i < 2; i++) {
        QrSqlResult *r = run(Q[i]);
        cr_assert_eq(r->vals[0].u.i, 1024 * 1024, "%s", Q[i]);
        cr_assert_eq(r->vals[1].u.i, 1024 * (1024 * 1025 / 2), "%s", Q[i]);
        qr_sql_result_free(r);
    }
    /* MATERIALIZED keeps the rows: over the budget, a clear 54000 */
    fails("WITH x AS MATERIALIZED (SELECT a.id AS a, b.id AS b FROM l1024 a, r1024 b) "
          "SELECT count(*) FROM x", "54000", "memory");
    cr_assert_eq(qr_sql_session_set(env.s, "quarry.mem_cap", "268435456", &err), QR_OK);
    cr_assert(plan_has("SELECT * FROM (SELECT k FROM l1) s WHERE s.k > 0", "Subquery Scan on s"));
    cr_assert(plan_has("WITH x AS (SELECT k FROM l1) SELECT * FROM x a, x b", "CTE Scan on a"));
}

/* ---- prepared: planned again at every execution ---- */

static QrSqlResult *exec_p(QrSqlStmt *st, int v)
{
    char buf[16];
    snprintf(buf, sizeof buf, "%d", v);
    QrError err;
    qr_error_clear(&err);
    const char *vals[] = {buf};
    int lens[] = {(int)strlen(buf)};
    QrSqlParams p = {.n = 1, .values = vals, .lengths = lens};
    QrSqlResult *r = NULL;
    cr_assert_eq(qr_sql_execute(env.s, st, &p, &r, &err), QR_OK, "%s", err.message);
    return r;
}

Test(sql_join, prepared_joins_keep_no_state_between_runs)
{
    static const char *const Q[] = {
        "SELECT l.id, s.id FROM l1025 l FULL JOIN (SELECT id, k FROM r1024 WHERE id % $1 = 0) s ON l.k = s.k",
        "SELECT id, 0 FROM l1025 l WHERE NOT EXISTS (SELECT 1 FROM r1024 r WHERE r.k = l.k AND r.id < $1)",
        "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < $1) SELECT n, 0 FROM t",
    };
    for (int q = 0; q < 3; q++) {
        QrError err;
        qr_error_clear(&err);
        QrSqlStmt *st;
        cr_assert_eq(qr_sql_prepare(env.s, Q[q], strlen(Q[q]), NULL, 0, &st, &err), QR_OK, "%s", err.message);
        static const int V[] = {2, 7, 300, 3};
        for (int k = 0; k < 4; k++) {
            int v = V[k];
            QrSqlResult *r = exec_p(st, v);
            Tuples got = {.w = 2}, want = {.w = 2};
            for (uint64_t i = 0; i < r->n_rows; i++) {
                int64_t row[2] = {r->vals[2 * i].is_null ? 0 : r->vals[2 * i].u.i,
                                  r->vals[2 * i + 1].is_null ? 0 : r->vals[2 * i + 1].u.i};
                tup_add(&got, row);
            }
            qr_sql_result_free(r);
            tup_sort(&got);
            if (q == 0) {
                bool *rseen = calloc(1025, 1);
                for (int i = 1; i <= 1025; i++) {
                    bool any = false;
                    for (int j = v; j <= 1024; j += v)
                        if (lkey(i) != NUL && lkey(i) == rkey(j)) {
                            int64_t row[2] = {i, j};
                            tup_add(&want, row);
                            any = rseen[j] = true;
                        }
                    if (!any) {
                        int64_t row[2] = {i, 0};
                        tup_add(&want, row);
                    }
                }
                for (int j = v; j <= 1024; j += v)
                    if (!rseen[j]) {
                        int64_t row[2] = {0, j};
                        tup_add(&want, row);
                    }
                free(rseen);
            } else if (q == 1) {
                for (int i = 1; i <= 1025; i++) {
                    bool has = false;
                    for (int j = 1; j < v && j <= 1024; j++)
                        has |= lkey(i) != NUL && rkey(j) == lkey(i);
                    int64_t row[2] = {i, 0};
                    if (!has)
                        tup_add(&want, row);
                }
            } else {
                for (int n = 1; n <= (v > 1 ? v : 1); n++) {
                    int64_t row[2] = {n, 0};
                    tup_add(&want, row);
                }
            }
            same_tuples(Q[q], &got, &want);
        }
        qr_sql_stmt_unref(st);
    }
}
