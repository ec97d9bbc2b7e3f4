/*
 * test_sql_setop.c — set operations and WITH RECURSIVE as operators
 * (exec/op_setop.c, op_append.c, op_unique.c, op_recursive.c, the working
 * table's op_rows.c) against brute-force models: UNION / INTERSECT /
 * EXCEPT with and without ALL over inputs of the batch sizes that matter,
 * NULLs equal to each other, duplicates counted; nesting and precedence;
 * recursive walks over a graph with cycles (UNION) and counted walks
 * (UNION ALL) against a breadth-first search; rounds larger than a batch;
 * the memory budget, the deadline and PostgreSQL's restrictions on the
 * recursive reference.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sql_lr_env.h"

#define N_NODES 60
#define N_EDGES 150

static int esrc[N_EDGES], edst[N_EDGES];

static void setup(void)
{
    lr_setup();
    /* a directed graph with cycles (and nodes no edge reaches) */
    qr_sql_result_free(run("CREATE TABLE edges (id integer PRIMARY KEY, src integer, dst integer)"));
    uint64_t rng = 7;
    char *ins = malloc(64 * N_EDGES + 64);
    int o = sprintf(ins, "INSERT INTO edges VALUES ");
    for (int i = 0; i < N_EDGES; i++) {
        esrc[i] = 1 + (int)eu_below(&rng, N_NODES);
        edst[i] = 1 + (int)eu_below(&rng, N_NODES);
        o += sprintf(ins + o, "%s(%d, %d, %d)", i ? "," : "", i + 1, esrc[i], edst[i]);
    }
    qr_sql_result_free(run(ins));
    free(ins);
}

static void teardown(void) { lr_teardown(); }

TestSuite(sql_setop, .init = setup, .fini = teardown, .timeout = 600);

/* ---- set operations ---- */

/* keys 0..40 and NULL (slot 41) */
#define K_SLOTS 42
static int slot(int k) { return k == NUL ? 41 : k; }

static void counts(const char *sql, int64_t *c)
{
    QrSqlResult *r = run(sql);
    memset(c, 0, K_SLOTS * sizeof *c);
    for (uint64_t i = 0; i < r->n_rows; i++)
        c[r->vals[i].is_null ? 41 : r->vals[i].u.i]++;
    qr_sql_result_free(r);
}

Test(sql_setop, set_operations_match_the_model)
{
    static const char *const OPS[] = {"UNION", "INTERSECT", "EXCEPT"};
    char q[512];
    for (int a = 0; a < N_SIZES; a++)
        for (int b = 0; b < N_SIZES; b++)
            for (int op = 0; op < 3; op++)
                for (int all = 0; all < 2; all++) {
                    int nl = SIZES[a], nr = SIZES[b];
                    int64_t cl[K_SLOTS] = {0}, cr_[K_SLOTS] = {0}, got[K_SLOTS];
                    for (int i = 1; i <= nl; i++)
                        cl[slot(lkey(i))]++;
                    for (int j = 1; j <= nr; j++)
                        cr_[slot(rkey(j))]++;
                    snprintf(q, sizeof q, "SELECT k FROM l%d %s %sSELECT k FROM r%d", nl, OPS[op],
                             all ? "ALL " : "", nr);
                    counts(q, got);
                    for (int s = 0; s < K_SLOTS; s++) {
                        int64_t l = cl[s], r = cr_[s], want;
                        if (op == 0)
                            want = all ? l + r : (l + r > 0);
                        else if (op == 1)
                            want = all ? (l < r ? l : r) : (l > 0 && r > 0);
                        else
                            want = all ? (l > r ? l - r : 0) : (l > 0 && r == 0);
                        cr_assert_eq(got[s], want, "%s: key slot %d: %" PRId64 " rows, want %" PRId64, q, s,
                                     got[s], want);
                    }
                }
    /* INTERSECT binds tighter than UNION / EXCEPT; parentheses regroup */
    int64_t c1[K_SLOTS], c2[K_SLOTS];
    counts("SELECT k FROM l1025 EXCEPT SELECT k FROM r1025 INTERSECT SELECT k FROM l1", c1);
    counts("SELECT k FROM l1025 EXCEPT (SELECT k FROM r1025 INTERSECT SELECT k FROM l1)", c2);
    cr_assert_eq(memcmp(c1, c2, sizeof c1), 0);
    counts("(SELECT k FROM l1025 EXCEPT SELECT k FROM r1025) INTERSECT SELECT k FROM l1", c2);
    int64_t n1 = 0, n2 = 0;
    for (int s = 0; s < K_SLOTS; s++) {
        n1 += c1[s];
        n2 += c2[s];
    }
    cr_assert(n1 > n2, "EXCEPT (x INTERSECT y) keeps more than (EXCEPT) INTERSECT: %" PRId64 " vs %" PRId64,
              n1, n2);
    /* ORDER BY / LIMIT over the result, branches of different types cast */
    QrSqlResult *r = run("SELECT k FROM l1025 UNION SELECT 2.5 ORDER BY 1 DESC NULLS LAST LIMIT 3 OFFSET 1");
    cr_assert_eq(r->n_rows, 3);
    cr_assert_eq(r->cols[0].type, QR_SQL_NUMERIC); /* int beside numeric 2.5: numeric */
    for (int i = 0; i < 3; i++) {
        QrBuf b;
        qr_buf_init(&b);
        qr_sql_value_text(&r->vals[i], &b);
        char want[8];
        snprintf(want, sizeof want, "%d", 35 - i);
        cr_assert(b.len == strlen(want) && !memcmp(b.data, want, b.len), "row %d: %.*s", i,
                  (int)b.len, (const char *)b.data);
        qr_buf_free(&b);
    }
    qr_sql_result_free(r);
    fails("SELECT k FROM l1 INTERSECT SELECT k, id FROM r1", "42601", "INTERSECT");
    fails("SELECT k FROM l1 EXCEPT SELECT 'x'::text", "42804", "EXCEPT types");
}

Test(sql_setop, explain_names_the_nodes_as_postgresql)
{
    static const struct {
        const char *q, *node;
    } CASES[] = {
        {"SELECT k FROM l1 INTERSECT SELECT k FROM r1", "HashSetOp Intersect"},
        {"SELECT k FROM l1 EXCEPT ALL SELECT k FROM r1", "HashSetOp Except All"},
        {"SELECT k FROM l1 UNION ALL SELECT k FROM r1", "Append"},
        {"WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 3) SELECT * FROM t",
         "Recursive Union"},
        {"WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 3) SELECT * FROM t",
         "WorkTable Scan on t"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        char q[512];
        snprintf(q, sizeof q, "EXPLAIN %s", CASES[i].q);
        QrSqlResult *r = run(q);
        bool found = false;
        for (uint64_t k = 0; k < r->n_rows && !found; k++)
            found = memmem(r->vals[k].u.s.s, r->vals[k].u.s.n, CASES[i].node, strlen(CASES[i].node)) != NULL;
        cr_assert(found, "%s: no %s node", CASES[i].q, CASES[i].node);
        qr_sql_result_free(r);
    }
}

/* ---- WITH RECURSIVE ---- */

Test(sql_setop, recursive_walks_match_a_breadth_first_search)
{
    char q[512];
    for (int start = 1; start <= N_NODES; start += 7) {
        /* UNION: every node reachable, once, though the graph has cycles */
        bool seen[N_NODES + 1] = {false};
        int queue[N_NODES + 1], head = 0, tail = 0, reach = 0;
        seen[start] = true;
        queue[tail++] = start;
        while (head < tail) {
            int u = queue[head++];
            reach++;
            for (int e = 0; e < N_EDGES; e++)
                if (esrc[e] == u && !seen[edst[e]]) {
                    seen[edst[e]] = true;
                    queue[tail++] = edst[e];
                }
        }
        snprintf(q, sizeof q,
                 "WITH RECURSIVE r(node) AS (SELECT %d UNION SELECT e.dst FROM edges e JOIN r "
                 "ON e.src = r.node) SELECT node FROM r", start);
        QrSqlResult *r = run(q);
        cr_assert_eq(r->n_rows, (uint64_t)reach, "%s: %" PRIu64 " rows, want %d", q, r->n_rows, reach);
        for (uint64_t i = 0; i < r->n_rows; i++)
            cr_assert(seen[r->vals[i].u.i], "%s: node %" PRId64 " is not reachable", q, r->vals[i].u.i);
        qr_sql_result_free(r);
        /* UNION ALL: every walk of up to 4 edges, counted per length */
        int64_t walks[5] = {1, 0, 0, 0, 0};
        int64_t at[N_NODES + 1] = {0}, nx[N_NODES + 1];
        at[start] = 1;
        for (int len = 1; len <= 4; len++) {
            memset(nx, 0, sizeof nx);
            for (int e = 0; e < N_EDGES; e++)
                nx[edst[e]] += at[esrc[e]];
            memcpy(at, nx, sizeof at);
            for (int v = 1; v <= N_NODES; v++)
                walks[len] += at[v];
        }
        snprintf(q, sizeof q,
                 "WITH RECURSIVE p(node, len) AS (SELECT %d, 0 UNION ALL SELECT e.dst, p.len + 1 FROM p, "
                 "edges e WHERE e.src = p.node AND p.len < 4) SELECT len, count(*) FROM p GROUP BY len "
                 "ORDER BY len", start);
        r = run(q);
        int64_t got[5] = {0};
        for (uint64_t i = 0; i < r->n_rows; i++)
            got[r->vals[2 * i].u.i] = r->vals[2 * i + 1].u.i;
        for (int len = 0; len <= 4; len++)
            cr_assert_eq(got[len], walks[len], "%s: %" PRId64 " walks of length %d, want %" PRId64, q, got[len],
                         len, walks[len]);
        qr_sql_result_free(r);
    }
    /* rounds of one row (3000 of them) and rounds of 1025 rows (a batch and one) */
    QrSqlResult *r = run("WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 3000) "
                         "SELECT count(*), sum(n) FROM t");
    cr_assert_eq(r->vals[0].u.i, 3000);
    cr_assert_eq(r->vals[1].u.i, 3000 * 3001 / 2);
    qr_sql_result_free(r);
    r = run("WITH RECURSIVE t(n, d) AS (SELECT id, 0 FROM l1025 UNION ALL SELECT n, d + 1 FROM t WHERE d < 2) "
            "SELECT count(*), count(DISTINCT n), max(d) FROM t");
    cr_assert_eq(r->vals[0].u.i, 3 * 1025);
    cr_assert_eq(r->vals[1].u.i, 1025);
    cr_assert_eq(r->vals[2].u.i, 2);
    qr_sql_result_free(r);
    /* UNION drops the repeats of the working table too: the keys of l1025 */
    r = run("WITH RECURSIVE t(k) AS (SELECT k FROM l1025 UNION SELECT k FROM t) SELECT count(*) FROM t");
    cr_assert_eq(r->vals[0].u.i, 38); /* 37 values and NULL */
    qr_sql_result_free(r);
    /* read twice: materialized once, the same rows each time */
    r = run("WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 50) "
            "SELECT count(*) FROM t a JOIN t b ON a.n = b.n + 1");
    cr_assert_eq(r->vals[0].u.i, 49);
    qr_sql_result_free(r);
}

Test(sql_setop, recursion_is_bounded_and_checked)
{
    /* no end: the memory budget stops it with the query's name; a LIMIT
     * above stops it early */
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_set(env.s, "quarry.mem_cap", "8388608", &err), QR_OK);
    fails("WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t", "54000",
          "recursive query \"t\"");
    cr_assert_eq(qr_sql_session_set(env.s, "quarry.mem_cap", "268435456", &err), QR_OK);
    QrSqlResult *r = run("WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT n FROM t LIMIT 10");
    cr_assert_eq(r->n_rows, 10);
    cr_assert_eq(r->vals[9].u.i, 10);
    qr_sql_result_free(r);
    /* the deadline is checked every round (a virtual clock: every read is
     * past it), so a slow recursion ends with 57014 */
    cr_assert_eq(qr_sql_session_set(env.s, "statement_timeout", "1ms", &err), QR_OK);
    eu_clock_virtual(2000000);
    fails("WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 100000) "
          "SELECT count(*) FROM t", "57014", NULL);
    eu_clock_real();
    cr_assert_eq(qr_sql_session_set(env.s, "statement_timeout", "0", &err), QR_OK);
    /* PostgreSQL's restrictions on the recursive reference */
    fails("WITH RECURSIVE t(n) AS (SELECT n FROM t UNION SELECT 1) SELECT * FROM t", "42P19",
          "non-recursive term");
    fails("WITH RECURSIVE t(n) AS (SELECT 1 UNION SELECT a.n FROM t a, t b) SELECT * FROM t", "42P19",
          "more than once");
    fails("WITH RECURSIVE t(n) AS (SELECT 1 UNION SELECT n FROM (SELECT n FROM t) s) SELECT * FROM t", "42P19",
          "within a subquery");
    fails("WITH RECURSIVE t(n) AS (SELECT 1 UNION SELECT 1 WHERE EXISTS (SELECT 1 FROM t)) SELECT * FROM t",
          "42P19", "within a subquery");
    fails("WITH RECURSIVE t(n) AS (SELECT 1 UNION SELECT l.k FROM l1 l LEFT JOIN t ON t.n = l.k) "
          "SELECT * FROM t", "42P19", "outer join");
    fails("WITH RECURSIVE t(n) AS (SELECT 1 INTERSECT SELECT n FROM t) SELECT * FROM t", "42P19",
          "does not have the form");
    fails("WITH RECURSIVE t(n) AS (SELECT 1 UNION SELECT count(*) FROM t) SELECT * FROM t", "42P19",
          "aggregate functions");
    fails("WITH RECURSIVE t(n) AS (SELECT 1 UNION SELECT n + 1 FROM t ORDER BY 1) SELECT * FROM t", "0A000",
          "ORDER BY");
    fails("WITH RECURSIVE t(n, m) AS (SELECT 1 UNION SELECT n + 1 FROM t) SELECT * FROM t", "42P10", NULL);
    /* not recursive after all: an ordinary WITH query */
    r = run("WITH RECURSIVE t(n) AS (SELECT 1 UNION SELECT 2) SELECT count(*) FROM t");
    cr_assert_eq(r->vals[0].u.i, 2);
    qr_sql_result_free(r);
    /* MATERIALIZED / NOT MATERIALIZED are accepted */
    r = run("WITH a AS MATERIALIZED (SELECT k FROM l1025), b AS NOT MATERIALIZED (SELECT k FROM r1025) "
            "SELECT count(*) FROM a JOIN b USING (k)");
    int64_t want = 0;
    for (int i = 1; i <= 1025; i++)
        for (int j = 1; j <= 1025; j++)
            want += lkey(i) != NUL && lkey(i) == rkey(j);
    cr_assert_eq(r->vals[0].u.i, want);
    qr_sql_result_free(r);
}
