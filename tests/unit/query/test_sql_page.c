/*
 * test_sql_page.c — deep pages: ORDER BY <number column> [, more keys]
 * LIMIT n OFFSET k with a large k, where the scan keeps only the rows of
 * the page's ranks and their ties (sql_scan.c run_rank_window over
 * colwalk_rank_window) and the Limit skips the rest of the offset.  The
 * model is the same query without LIMIT / OFFSET (a full sort, another
 * operator), cut to the page in C.  The table spans three segments with
 * deleted rows, heavy ties (50 distinct values over 9,000 rows), NULLs
 * in every block of one column and none in another, a float and a
 * timestamp column; pages start on batch (1024) and block (4096) edges,
 * across the values' end into the NULLs, at the last row and past it.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql_test_env.h"
#include "store/buf.h"
#include "store/util.h"

TestSuite(sql_page, .timeout = 300);

static Env env;

static void exec(const char *sql) { qr_sql_result_free(env_run(&env, sql)); }

static char *text_of(const char *sql)
{
    QrSqlResult *r = env_run(&env, sql);
    char *t = env_result_text(r);
    qr_sql_result_free(r);
    return t;
}

static void flush_p(void)
{
    QrTable *t;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_table_get(env.db, "p", &t, &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_flush(t, &err), QR_OK, "%s", err.message);
}

static void setup(void)
{
    qr_log_set_level(QR_LOG_ERROR);
    env_open(&env);
    exec("CREATE TABLE p (id bigint PRIMARY KEY, v bigint, w bigint, x double precision, "
         "t timestamptz)");
    const char *ins[] = {
        "INSERT INTO p SELECT g, CASE WHEN g % 9 = 0 THEN NULL ELSE (g * 7919) % 50 END, "
        "(g * 31) % 50, CASE WHEN g % 23 = 0 THEN NULL ELSE ((g * 13) % 41) / 4.0 - 3 END, "
        "to_timestamp(1704067200 + (g * 17) % 300 * 60) FROM generate_series(1, 5000) g",
        "INSERT INTO p SELECT g, (g * 37) % 50, g % 50, (g % 17) * 0.5, NULL "
        "FROM generate_series(5001, 8200) g",
        "INSERT INTO p SELECT g, CASE WHEN g % 2 = 0 THEN NULL ELSE g % 5 END, g % 3, NULL, "
        "to_timestamp(1704067200 + g) FROM generate_series(8201, 9000) g",
    };
    for (int i = 0; i < 3; i++) {
        exec(ins[i]);
        flush_p();
    }
    exec("DELETE FROM p WHERE id % 97 = 0 OR id BETWEEN 4000 AND 4100");
}

static void teardown(void) { env_close(&env); }

/* Lines [from, from + count) of text (each ends in '\n'), as a new string. */
static char *lines(const char *text, uint64_t from, uint64_t count)
{
    const char *p = text;
    for (uint64_t i = 0; i < from && *p; i++)
        p = strchr(p, '\n') + 1;
    const char *q = p;
    for (uint64_t i = 0; i < count && *q; i++)
        q = strchr(q, '\n') + 1;
    char *s = malloc((size_t)(q - p) + 1);
    memcpy(s, p, (size_t)(q - p));
    s[q - p] = 0;
    return s;
}

/* Every page of `order` (and `where`) at the offsets asked for equals the
 * full sort cut to it; rank_window: the plan says the scan kept the rank
 * window (the pages deep enough). */
static void pages_equal_the_sort(const char *cols, const char *where, const char *order,
                                 bool rank_window)
{
    char q[1024];
    snprintf(q, sizeof q, "SELECT %s FROM p %s ORDER BY %s", cols, where, order);
    char *all = text_of(q);
    uint64_t n = 0;
    for (const char *c = all; *c; c++)
        n += *c == '\n';
    const uint64_t from[] = {1000, 1023, 1024, 4095, 4096, 4097, 5000, n / 2, n > 900 ? n - 900 : 0,
                             n > 10 ? n - 10 : 0, n ? n - 1 : 0, n, n + 1000};
    const uint64_t count[] = {10, 1, 10, 2, 50, 3, 1500, 10, 800, 25, 10, 10, 10};
    for (size_t i = 0; i < sizeof from / sizeof *from; i++) {
        if (from[i] < 1000)
            continue; /* not a deep page */
        snprintf(q, sizeof q, "SELECT %s FROM p %s ORDER BY %s LIMIT %llu OFFSET %llu", cols, where,
                 order, (unsigned long long)count[i], (unsigned long long)from[i]);
        char *got = text_of(q), *want = lines(all, from[i], count[i]);
        cr_assert_str_eq(got, want, "%s\n-- got:\n%s-- want:\n%s", q, got, want);
        free(got);
        free(want);
        char e[1100];
        snprintf(e, sizeof e, "EXPLAIN ANALYZE %s", q);
        char *plan = text_of(e);
        if (rank_window && from[i] < n)
            cr_assert(strstr(plan, "Rank Window"), "%s: no rank window\n%s", q, plan);
        if (!rank_window)
            cr_assert(!strstr(plan, "Rank Window"), "%s: a rank window\n%s", q, plan);
        free(plan);
    }
    free(all);
}

Test(sql_page, deep_pages_equal_the_full_sort, .init = setup, .fini = teardown)
{
    static const char *orders[] = {
        "v DESC, id", "v, id", "v NULLS FIRST, id DESC", "v DESC NULLS LAST, id",
        "w, id", "w DESC, id DESC", "x, id", "x DESC, v, id", "t DESC, id", "t NULLS FIRST, id",
    };
    for (size_t o = 0; o < sizeof orders / sizeof *orders; o++) {
        pages_equal_the_sort("id, v, w", "", orders[o], true);
        /* column predicates: the scan path's candidates, still exact */
        pages_equal_the_sort("id, v", "WHERE w < 40", orders[o], true);
        pages_equal_the_sort("id, x", "WHERE x >= 0 AND v <> 7", orders[o], true);
    }
    /* conditions no column predicate expresses: the rows are checked one
     * by one, so the window cannot be known first; the same pages */
    pages_equal_the_sort("id, v", "WHERE id + 0 = id", "v DESC, id", false);
    pages_equal_the_sort("id, x", "WHERE v IS NULL OR v > 10", "x DESC, id", false);
    /* an expression key is not a column: the ordinary top-N */
    pages_equal_the_sort("id, v", "", "v + 0, id", false);
    /* offsets and limits near int8's end: a plain sort, no overflow */
    char *t = text_of("SELECT id FROM p ORDER BY v, id LIMIT 5 OFFSET 9223372036854775000");
    cr_assert_str_eq(t, "");
    free(t);
    char *all = text_of("SELECT id FROM p ORDER BY v DESC, id");
    char *tail = text_of("SELECT id FROM p ORDER BY v DESC, id LIMIT 9223372036854775807 OFFSET 1000");
    char *want = lines(all, 1000, UINT64_MAX);
    cr_assert_str_eq(tail, want);
    free(all);
    free(tail);
    free(want);
}
