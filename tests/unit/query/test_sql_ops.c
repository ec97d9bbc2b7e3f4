/*
 * test_sql_ops.c — the single-input operators (scan, filter, project, hash
 * aggregate, sort, top-N, limit / offset, distinct, set operations, window)
 * against SQLite on the same rows, at every batch edge: tables of no row,
 * one row, a batch less one, exactly a batch, a batch and one, and two
 * batches and one, each written as two segments of different schemas (a
 * column added between them) with rows deleted from both, NULLs in every
 * column.  The joins have their own model test (test_sql_join.c), and so
 * do the window frames (test_sql_window.c).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql_lite_oracle.h"
#include "sql_test_env.h"

static const int SIZES[] = {0, 1, 1023, 1024, 1025, 2049};
#define N_SIZES (int)(sizeof SIZES / sizeof *SIZES)

static Env env;
static sqlite3 *lite;

static QrSqlResult *run(const char *sql) { return env_run(&env, sql); }

/* The same statement on both sides. */
static void both(const char *sql)
{
    qr_sql_result_free(run(sql));
    char *msg = NULL;
    cr_assert_eq(sqlite3_exec(lite, sql, NULL, NULL, &msg), SQLITE_OK, "%s: %s", sql, msg);
}

/* Row i's values: v and s are NULL now and then, g repeats. */
static void row_sql(QrBuf *b, int id, bool with_w)
{
    char t[160];
    int g = (id * 7) % 13, v = (id * 37) % 101;
    bool null_v = id % 9 == 4, null_s = id % 11 == 6;
    char vs[16], ss[16];
    snprintf(vs, sizeof vs, "%d", v);
    snprintf(ss, sizeof ss, "'s%d'", (id * 5) % 17);
    snprintf(t, sizeof t, "(%d, %d, %s, %s", id, g, null_v ? "NULL" : vs, null_s ? "NULL" : ss);
    qr_buf_append(b, t, strlen(t));
    if (with_w) {
        snprintf(t, sizeof t, ", %s", id % 2 ? "NULL" : vs);
        qr_buf_append(b, t, strlen(t));
    }
    qr_buf_putc(b, ')');
}

static void insert_rows(const char *table, int from, int to, bool with_w)
{
    if (from > to)
        return;
    QrBuf b;
    qr_buf_init(&b);
    char head[64];
    snprintf(head, sizeof head, "INSERT INTO %s VALUES ", table);
    qr_buf_append(&b, head, strlen(head));
    for (int id = from; id <= to; id++) {
        if (id > from)
            qr_buf_putc(&b, ',');
        row_sql(&b, id, with_w);
    }
    qr_buf_putc(&b, 0);
    both((const char *)b.data);
    qr_buf_free(&b);
}

/* t<n>: n rows in the first segment, then a column w, three more rows
 * in a second segment, then every seventh row deleted. */
static void setup(void)
{
    qr_log_set_level(QR_LOG_ERROR);
    env_open(&env);
    cr_assert_eq(sqlite3_open(":memory:", &lite), SQLITE_OK);
    char q[256], t[16];
    for (int i = 0; i < N_SIZES; i++) {
        int n = SIZES[i];
        snprintf(t, sizeof t, "t%d", n);
        snprintf(q, sizeof q, "CREATE TABLE %s (id bigint PRIMARY KEY, g integer, v integer, s text)", t);
        both(q);
        insert_rows(t, 1, n, false);
        snprintf(q, sizeof q, "ALTER TABLE %s ADD COLUMN w integer", t);
        both(q);
        insert_rows(t, n + 1, n + 3, true);
        snprintf(q, sizeof q, "DELETE FROM %s WHERE id %% 7 = 3", t);
        both(q);
    }
}

static void teardown(void)
{
    sqlite3_close(lite);
    env_close(&env);
}

TestSuite(sql_ops, .init = setup, .fini = teardown, .timeout = 600);

/* Every query, with T replaced by each table, gives SQLite's rows. */
static void agree(const char *const *queries, size_t n_queries)
{
    char sql[1024];
    for (int i = 0; i < N_SIZES; i++) {
        for (size_t k = 0; k < n_queries; k++) {
            /* T -> t<n> */
            const char *p = queries[k];
            size_t o = 0;
            for (; *p && o + 16 < sizeof sql; p++) {
                if (*p == 'T' && (p == queries[k] || p[-1] == ' ') && (p[1] == ' ' || !p[1] || p[1] == ')'))
                    o += (size_t)snprintf(sql + o, sizeof sql - o, "t%d", SIZES[i]);
                else
                    sql[o++] = *p;
            }
            sql[o] = 0;
            QrSqlResult *r = run(sql);
            char *got = rows_text(r), *want = sqlite_text(lite, sql);
            cr_assert_str_eq(got, want, "%s", sql);
            free(got);
            free(want);
            qr_sql_result_free(r);
        }
    }
}

Test(sql_ops, scan_filter_and_project)
{
    static const char *const q[] = {
        "SELECT id, g, v, s, w FROM T ORDER BY id",
        "SELECT id, v FROM T WHERE v > 50 ORDER BY id",
        "SELECT id FROM T WHERE v IS NULL OR s IS NULL ORDER BY id",
        "SELECT id FROM T WHERE w IS NULL AND v IS NOT NULL AND g BETWEEN 3 AND 9 ORDER BY id",
        "SELECT id, v * 2 + g, s || 'x', coalesce(w, -1), CASE WHEN v > 50 THEN 'hi' ELSE 'lo' END "
        "FROM T ORDER BY id",
        "SELECT id FROM T WHERE s IN ('s1', 's4', 's16') AND NOT (g = 2) ORDER BY id",
        "SELECT count(*) FROM T WHERE id % 2 = 0",
    };
    agree(q, sizeof q / sizeof *q);
}

Test(sql_ops, hash_aggregate)
{
    static const char *const q[] = {
        "SELECT count(*), count(v), sum(v), min(v), max(v), min(s), max(s), count(w) FROM T",
        "SELECT g, count(*), count(v), sum(v), min(v), max(v), count(DISTINCT v) FROM T GROUP BY g ORDER BY g",
        "SELECT s, count(*), sum(g) FROM T GROUP BY s ORDER BY s NULLS FIRST",
        "SELECT w, count(*) FROM T GROUP BY w ORDER BY w NULLS FIRST",
        "SELECT g, v % 3, count(*) FROM T GROUP BY g, v % 3 ORDER BY 1, 2 NULLS LAST",
        "SELECT g, sum(v) FROM T GROUP BY g HAVING count(*) > 3 ORDER BY g",
        "SELECT g, count(*) FILTER (WHERE v > 50), sum(v) FILTER (WHERE s IS NOT NULL) FROM T GROUP BY g "
        "ORDER BY g",
        "SELECT count(*) FROM (SELECT g FROM T GROUP BY g) x",
    };
    agree(q, sizeof q / sizeof *q);
}

Test(sql_ops, sort_top_n_and_limit)
{
    static const char *const q[] = {
        "SELECT id, v FROM T ORDER BY v DESC NULLS LAST, id",
        "SELECT id, s FROM T ORDER BY s NULLS FIRST, id DESC",
        "SELECT id, v FROM T ORDER BY v NULLS FIRST, id LIMIT 10",
        "SELECT id FROM T ORDER BY g DESC, v NULLS LAST, id LIMIT 5 OFFSET 1000",
        "SELECT id FROM T ORDER BY v DESC NULLS LAST, id LIMIT 1024",
        "SELECT id FROM T ORDER BY id LIMIT 3 OFFSET 1024",
        "SELECT id, g FROM T ORDER BY g DESC, s NULLS FIRST, id LIMIT 10",
        "SELECT id FROM T ORDER BY g, v DESC NULLS FIRST, id DESC LIMIT 7 OFFSET 3",
        "SELECT id FROM T ORDER BY id LIMIT 0",
        "SELECT id FROM T ORDER BY id LIMIT 100000 OFFSET 2048",
        "SELECT id, w FROM T ORDER BY w DESC NULLS LAST, id LIMIT 4",
    };
    agree(q, sizeof q / sizeof *q);
}

Test(sql_ops, distinct_and_set_operations)
{
    static const char *const q[] = {
        "SELECT DISTINCT g FROM T ORDER BY g",
        "SELECT DISTINCT v % 5, s FROM T ORDER BY 1 NULLS FIRST, 2 NULLS FIRST",
        "SELECT g FROM T WHERE v > 30 UNION SELECT v FROM T WHERE g < 3 ORDER BY 1 NULLS FIRST",
        "SELECT g FROM T INTERSECT SELECT v FROM T ORDER BY 1",
        "SELECT v FROM T EXCEPT SELECT g FROM T ORDER BY 1 NULLS FIRST",
        "SELECT count(*) FROM (SELECT g FROM T UNION ALL SELECT v FROM T) x",
        "SELECT s FROM T WHERE g = 1 UNION SELECT s FROM T WHERE g = 2 ORDER BY 1 NULLS LAST",
    };
    agree(q, sizeof q / sizeof *q);
}

Test(sql_ops, windows_across_segments)
{
    static const char *const q[] = {
        "SELECT id, row_number() OVER (PARTITION BY g ORDER BY id) FROM T ORDER BY id",
        "SELECT id, sum(v) OVER (PARTITION BY g ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) "
        "FROM T ORDER BY id",
        "SELECT id, count(w) OVER (), max(v) OVER (ORDER BY id) FROM T ORDER BY id",
        "SELECT id, lag(v, 1) OVER (ORDER BY id), lead(s) OVER (ORDER BY id) FROM T ORDER BY id",
    };
    agree(q, sizeof q / sizeof *q);
}
