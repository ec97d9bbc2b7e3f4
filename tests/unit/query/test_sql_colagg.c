/*
 * test_sql_colagg.c — aggregates read from column blocks instead of rows
 * (sql_scan.c colagg_segment, exec/op_hash_agg.c, plan/planner.c): the
 * per-group sums of the dense accumulators (with 128-bit partials), the
 * percentiles, which take the values themselves as order keys, and the
 * aggregate through a join, whose partial states are taken once per key
 * and joined to the inner rows of that key.  Each query is compared with
 * the same query made to take the row path (a condition no column
 * predicate can express), which the SQL oracle checks against PostgreSQL;
 * EXPLAIN ANALYZE shows which path ran.  The fact table spans three
 * segments (one with a deleted row), with NULL keys and NULL values; the
 * dimension table has duplicate and NULL keys and a key no fact has.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql_test_env.h"
#include "store/buf.h"
#include "store/util.h"

TestSuite(sql_colagg, .timeout = 300);

static Env env;

static QrSqlResult *run(const char *sql)
{
    QrError err;
    qr_error_clear(&err);
    QrSqlResult *r = NULL;
    int rc = qr_sql_exec(env.s, sql, strlen(sql), &r, &err);
    cr_assert_eq(rc, QR_OK, "%s: %s (%s)", sql, err.message, qr_error_sqlstate(&err));
    return r;
}

static void exec(const char *sql) { qr_sql_result_free(run(sql)); }

/* The result as text, one line per row (values as psql prints them). */
static char *text_of(const char *sql)
{
    QrSqlResult *r = run(sql);
    QrBuf b;
    qr_buf_init(&b);
    for (uint64_t i = 0; i < r->n_rows; i++) {
        for (int c = 0; c < r->n_cols; c++) {
            const QrSqlValue *v = &r->vals[i * (uint64_t)r->n_cols + (uint64_t)c];
            if (c)
                qr_buf_putc(&b, '|');
            if (v->is_null)
                qr_buf_append(&b, "NULL", 4);
            else
                qr_sql_value_text(v, &b);
        }
        qr_buf_putc(&b, '\n');
    }
    qr_sql_result_free(r);
    qr_buf_putc(&b, 0);
    char *s = strdup(b.data ? (char *)b.data : "");
    qr_buf_free(&b);
    return s;
}

/* Does EXPLAIN ANALYZE of sql mention `what`? */
static bool plan_says(const char *sql, const char *what)
{
    char q[2048];
    snprintf(q, sizeof q, "EXPLAIN ANALYZE %s", sql);
    char *t = text_of(q);
    bool yes = strstr(t, what) != NULL;
    free(t);
    return yes;
}

/* sql takes the column-block path (its plan says `marker`), and gives the
 * rows of the same query on the row path: `rows_sql`, the query with a
 * condition the column blocks cannot take. */
static void same_as_rows(const char *sql, const char *rows_sql, const char *marker)
{
    cr_assert(plan_says(sql, marker), "%s: not from column blocks", sql);
    cr_assert(!plan_says(rows_sql, "partial states"), "%s: not on the row path", rows_sql);
    char *a = text_of(sql), *b = text_of(rows_sql);
    cr_assert_str_eq(a, b, "%s\n-- column blocks:\n%s-- rows:\n%s", sql, a, b);
    free(a);
    free(b);
}

static void flush_table(const char *name)
{
    QrTable *t;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_table_get(env.db, name, &t, &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_flush(t, &err), QR_OK, "%s", err.message);
}

static void setup(void)
{
    qr_log_set_level(QR_LOG_ERROR);
    env_open(&env);
    exec("CREATE TABLE f (id bigint PRIMARY KEY, k varchar(8), v bigint, x double precision, "
         "t timestamptz)");
    exec("CREATE TABLE d (id bigint PRIMARY KEY, k varchar(8), grp bigint)");
    /* three segments: the data directory is flushed after each insert */
    const char *ins[] = {
        "INSERT INTO f SELECT g, CASE WHEN g % 11 = 0 THEN NULL ELSE 'k' || (g % 7) END, "
        "CASE WHEN g % 13 = 0 THEN NULL ELSE (g * 37) % 1001 - 300 END, "
        "CASE WHEN g % 17 = 0 THEN NULL ELSE ((g * 53) % 997) / 7.0 - 40 END, "
        "to_timestamp(1704067200 + g * 3607) "
        "FROM generate_series(1, 3000) g",
        "INSERT INTO f SELECT g, 'k' || (g % 5), (g * 11) % 503, -(g % 29) * 1.5, NULL "
        "FROM generate_series(3001, 5100) g",
        "INSERT INTO f SELECT g, 'k' || (g % 9), g % 3, 0.25 * g, "
        "to_timestamp(1748736000 + g * 60) "
        "FROM generate_series(5101, 6200) g",
    };
    for (int i = 0; i < 3; i++) {
        exec(ins[i]);
        flush_table("f");
    }
    exec("DELETE FROM f WHERE id = 4242");
    /* k1 twice (in two groups), k8 in no fact, a NULL key */
    exec("INSERT INTO d VALUES (1, 'k0', 10), (2, 'k1', 10), (3, 'k1', 20), (4, 'k2', 20), "
         "(5, 'k3', 30), (6, 'k4', NULL), (7, 'k8', 30), (8, NULL, 10), (9, 'k6', 40)");
}

static void teardown(void) { env_close(&env); }

Test(sql_colagg, percentiles_from_column_blocks_match_the_rows, .init = setup, .fini = teardown)
{
    static const char *aggs[] = {
        "percentile_disc(0.5) WITHIN GROUP (ORDER BY v), percentile_disc(0.9) WITHIN GROUP "
        "(ORDER BY v), percentile_disc(0) WITHIN GROUP (ORDER BY v), percentile_disc(1) WITHIN "
        "GROUP (ORDER BY v)",
        "percentile_cont(0.5) WITHIN GROUP (ORDER BY v), percentile_cont(0.37) WITHIN GROUP "
        "(ORDER BY x), percentile_cont(0.99) WITHIN GROUP (ORDER BY x)",
        "percentile_disc(0.25) WITHIN GROUP (ORDER BY x), percentile_disc(0.75) WITHIN GROUP "
        "(ORDER BY t), percentile_cont(0.5) WITHIN GROUP (ORDER BY t), count(*), sum(v)",
    };
    static const char *wheres[] = {"", "WHERE v > 100", "WHERE k = 'k3'", "WHERE v < -1000"};
    char q[1024], r[1024];
    for (size_t a = 0; a < sizeof aggs / sizeof *aggs; a++)
        for (size_t w = 0; w < sizeof wheres / sizeof *wheres; w++) {
            /* the row path: a condition on an expression, true for every row */
            const char *cond = "(id + 0 = id)";
            snprintf(q, sizeof q, "SELECT %s FROM f %s", aggs[a], wheres[w]);
            snprintf(r, sizeof r, "SELECT %s FROM f %s %s %s", aggs[a], wheres[w],
                     wheres[w][0] ? "AND" : "WHERE", cond);
            same_as_rows(q, r, "partial states");
            snprintf(q, sizeof q, "SELECT k, %s FROM f %s GROUP BY k ORDER BY k", aggs[a], wheres[w]);
            snprintf(r, sizeof r, "SELECT k, %s FROM f %s %s %s GROUP BY k ORDER BY k", aggs[a],
                     wheres[w], wheres[w][0] ? "AND" : "WHERE", cond);
            same_as_rows(q, r, "partial states");
        }
    /* a known value: the median of 1..6200 but id 4242 */
    char *m = text_of("SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY id), "
                      "percentile_cont(0.5) WITHIN GROUP (ORDER BY id) FROM f");
    cr_assert_str_eq(m, "3100|3100\n");
    free(m);
}

Test(sql_colagg, aggregates_through_a_join_match_the_rows, .init = setup, .fini = teardown)
{
    static const char *q[] = {
        "SELECT d.grp, count(*), sum(f.v), avg(f.v), min(f.t), max(f.x), count(f.x) "
        "FROM f JOIN d ON f.k = d.k %s GROUP BY d.grp ORDER BY d.grp",
        "SELECT d.k, count(*), sum(f.v) FROM d JOIN f ON d.k = f.k %s GROUP BY d.k ORDER BY d.k",
        "SELECT f.k, d.grp, count(*), percentile_disc(0.5) WITHIN GROUP (ORDER BY f.v) "
        "FROM f JOIN d USING (k) %s GROUP BY f.k, d.grp ORDER BY 1, 2",
        "SELECT count(*), sum(f.v) FROM f, d WHERE f.k = d.k %s",
        "SELECT d.grp, count(*) FROM f JOIN d ON f.k = d.k %s GROUP BY d.grp "
        "HAVING count(*) > 1000 ORDER BY d.grp",
    };
    static const char *extra[] = {"", "AND f.v > 100", "AND d.grp >= 20", "AND f.k <> 'k1'"};
    char a[1024], b[1024], w[256], wr[256];
    for (size_t i = 0; i < sizeof q / sizeof *q; i++)
        for (size_t e = 0; e < sizeof extra / sizeof *extra; e++) {
            bool has_where = strstr(q[i], "WHERE") != NULL;
            snprintf(w, sizeof w, "%s%s", has_where || !extra[e][0] ? "" : "WHERE TRUE ", extra[e]);
            snprintf(wr, sizeof wr, "%s%s AND f.id + 0 = f.id", has_where ? "" : "WHERE TRUE ", extra[e]);
            snprintf(a, sizeof a, q[i], w);
            snprintf(b, sizeof b, q[i], wr);
            same_as_rows(a, b, "joined per key");
        }
    /* what does not qualify stays on the row path, with the same answer */
    cr_assert(!plan_says("SELECT d.grp, sum(f.id) FROM f LEFT JOIN d ON f.k = d.k GROUP BY d.grp",
                         "partial states"));
    cr_assert(!plan_says("SELECT d.grp, f.v, count(*) FROM f JOIN d ON f.k = d.k GROUP BY d.grp, f.v",
                         "partial states"));
    /* a known total: k1 matches two dimension rows, so its facts count twice */
    char *t = text_of("SELECT count(*) FROM f JOIN d ON f.k = d.k");
    char *u = text_of("SELECT sum(n) FROM (SELECT f.k, count(*) * (SELECT count(*) FROM d "
                      "WHERE d.k = f.k) AS n FROM f GROUP BY f.k) s");
    cr_assert_str_eq(t, u);
    free(t);
    free(u);
}

/* count / sum / avg / min / max per group from column blocks (the dense
 * per-code accumulators over blocks without NULLs, row by row over blocks
 * with them, the same column asked for by several aggregates) equal the
 * row path: over f (NULL keys and values, three segments, a deleted row),
 * and over integers near 2^62 whose sums leave int64 part way but end
 * inside it (128-bit partials), or end outside it (22003 on both paths). */
Test(sql_colagg, group_sums_from_column_blocks_match_the_rows, .init = setup, .fini = teardown)
{
    static const char *aggs[] = {
        "count(*), sum(v), avg(v), count(v)",
        "sum(v), min(v), max(v), sum(v), min(x), max(x), count(x), min(t), max(t), count(t)",
        "count(*), min(t), max(v), avg(v), sum(v), count(t)",
    };
    static const char *wheres[] = {"", "WHERE v > 100", "WHERE v BETWEEN -100 AND 300",
                                   "WHERE x < 0"};
    char q[1024], r[1024];
    for (size_t a = 0; a < sizeof aggs / sizeof *aggs; a++)
        for (size_t w = 0; w < sizeof wheres / sizeof *wheres; w++) {
            const char *cond = "(id + 0 = id)";
            snprintf(q, sizeof q, "SELECT k, %s FROM f %s GROUP BY k ORDER BY k", aggs[a], wheres[w]);
            snprintf(r, sizeof r, "SELECT k, %s FROM f %s %s %s GROUP BY k ORDER BY k", aggs[a],
                     wheres[w], wheres[w][0] ? "AND" : "WHERE", cond);
            same_as_rows(q, r, "partial states");
            snprintf(q, sizeof q, "SELECT %s FROM f %s", aggs[a], wheres[w]);
            snprintf(r, sizeof r, "SELECT %s FROM f %s %s %s", aggs[a], wheres[w],
                     wheres[w][0] ? "AND" : "WHERE", cond);
            same_as_rows(q, r, "partial states");
        }
    /* 2^62 and 2^10 - 2^62 in turn (exact as doubles, which documents'
     * numbers go through): every prefix of a group's sum fits, but the
     * column's range times its rows does not */
    exec("CREATE TABLE big (id bigint PRIMARY KEY, k varchar(8), v bigint)");
    exec("INSERT INTO big SELECT g, 'b' || (g % 3), CASE WHEN g % 2 = 0 THEN 4611686018427387904 "
         "ELSE -4611686018427386880 END FROM generate_series(1, 9000) g");
    flush_table("big");
    same_as_rows("SELECT k, count(*), sum(v), min(v), max(v) FROM big GROUP BY k ORDER BY k",
                 "SELECT k, count(*), sum(v), min(v), max(v) FROM big WHERE id + 0 = id GROUP BY k "
                 "ORDER BY k",
                 "partial states");
    char *t = text_of("SELECT sum(v) FROM big");
    cr_assert_str_eq(t, "4608000\n"); /* 4500 pairs of 2^62 + 2^10 - 2^62 */
    free(t);
    /* a sum past int64: the error the row path gives */
    exec("INSERT INTO big SELECT g, 'c', 4611686018427387904 FROM generate_series(9001, 9004) g");
    flush_table("big");
    const char *over = "SELECT k, sum(v) FROM big GROUP BY k";
    QrError err;
    qr_error_clear(&err);
    QrSqlResult *res = NULL;
    cr_assert_neq(qr_sql_exec(env.s, over, strlen(over), &res, &err), QR_OK);
    cr_assert_str_eq(qr_error_sqlstate(&err), "22003", "%s", err.message);
    /* ... while avg goes on exactly past int64 (4 x 2^62 / 4), on both paths */
    same_as_rows("SELECT k, avg(v), count(v) FROM big WHERE k = 'c' GROUP BY k",
                 "SELECT k, avg(v), count(v) FROM big WHERE k = 'c' AND id + 0 = id GROUP BY k",
                 "partial states");
    t = text_of("SELECT avg(v) = 4611686018427387904::float8, avg(v + 0) = 4611686018427387904::float8 "
                "FROM big WHERE k = 'c'");
    cr_assert_str_eq(t, "t|t\n");
    free(t);
}
