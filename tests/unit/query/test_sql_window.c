/*
 * test_sql_window.c — the window operator (exec/op_window.c) and its
 * binder (plan/bind_window.c) against a brute-force model: every window
 * function, ROWS / RANGE / GROUPS frames with offsets, EXCLUDE, NULL keys
 * and ties, over tables of 0, 1, 1024, 1025 and 2600 rows (partitions
 * spanning batches; rows deleted after they were written), then the
 * PostgreSQL rules for where windows may appear, parameters as frame
 * offsets across executions, the memory cap and EXPLAIN.
 *
 * The model computes each frame from its definition (a predicate per pair
 * of rows: PostgreSQL's documented semantics, nulls sorting last ascending
 * and first descending), not from positions as the operator does.
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

#define MAXN 2600
#define N_TABLES 5

static const int SIZES[N_TABLES] = {0, 1, 1024, 1025, MAXN};

typedef struct Row {
    int64_t id;
    bool g_null, k_null, v_null, t_null;
    int g, k;
    double v;       /* multiples of 0.25: sums are exact */
    int t_min;      /* ts: minutes after 2025-01-01 */
} Row;

static Env env;
static Row tabs[N_TABLES][MAXN];

static QrSqlResult *run_n(const char *sql, size_t len)
{
    QrError err;
    qr_error_clear(&err);
    QrSqlResult *r = NULL;
    int rc = qr_sql_exec(env.s, sql, len, &r, &err);
    cr_assert_eq(rc, QR_OK, "%.200s: %s (%s)", sql, err.message, qr_error_sqlstate(&err));
    return r;
}

static QrSqlResult *run(const char *sql) { return run_n(sql, strlen(sql)); }
static void exec_ok(const char *sql) { qr_sql_result_free(run(sql)); }

static void fails(const char *sql, const char *sqlstate)
{
    QrError err;
    qr_error_clear(&err);
    QrSqlResult *r = NULL;
    int rc = qr_sql_exec(env.s, sql, strlen(sql), &r, &err);
    cr_assert_neq(rc, QR_OK, "%s should fail", sql);
    cr_assert_str_eq(qr_error_sqlstate(&err), sqlstate, "%s: %s (%s)", sql, err.message,
                     qr_error_sqlstate(&err));
}

/* Rows with NULLs, ties (k has 11 values) and few partitions (g has 4). */
static void gen_rows(Row *rows, int n, uint64_t seed)
{
    uint64_t rng = seed;
    for (int i = 0; i < n; i++) {
        Row *r = &rows[i];
        r->id = i + 1;
        r->g_null = eu_below(&rng, 10) == 0;
        r->k_null = eu_below(&rng, 10) == 0;
        r->v_null = eu_below(&rng, 10) == 0;
        r->t_null = eu_below(&rng, 10) == 0;
        r->g = (int)eu_below(&rng, 4);
        r->k = (int)eu_below(&rng, 11) - 5;
        r->v = ((double)eu_below(&rng, 401) - 200) / 4;
        r->t_min = 15 * (int)eu_below(&rng, 400);
    }
}

static void load_table(int ti)
{
    int n = SIZES[ti];
    char sql[256];
    snprintf(sql, sizeof sql,
             "CREATE TABLE w%d (id bigint PRIMARY KEY, g integer, k integer, v double precision, "
             "ts timestamp)", n);
    exec_ok(sql);
    gen_rows(tabs[ti], n, 1000 + (uint64_t)ti);
    /* rows 1..n, and 40 more deleted again; two statements make two commits */
    QrBuf b;
    qr_buf_init(&b);
    for (int i = 0; i < n + 40; i++) {
        if (i % 300 == 0) {
            if (b.len)
                qr_sql_result_free(run_n((char *)b.data, b.len));
            b.len = 0;
            qr_buf_printf(&b, "INSERT INTO w%d VALUES ", n);
        } else {
            qr_buf_putc(&b, ',');
        }
        Row x;
        const Row *r = i < n ? &tabs[ti][i] : &x;
        if (i >= n) {
            gen_rows(&x, 1, (uint64_t)i);
            x.id = i + 1;
        }
        char g[16], k[16], v[32], t[48];
        snprintf(g, sizeof g, r->g_null ? "NULL" : "%d", r->g);
        snprintf(k, sizeof k, r->k_null ? "NULL" : "%d", r->k);
        snprintf(v, sizeof v, r->v_null ? "NULL" : "%.2f", r->v);
        if (r->t_null)
            snprintf(t, sizeof t, "NULL");
        else
            snprintf(t, sizeof t, "'2025-01-%02d %02d:%02d:00'", 1 + r->t_min / 1440, r->t_min / 60 % 24,
                     r->t_min % 60);
        qr_buf_printf(&b, "(%lld, %s, %s, %s, %s)", (long long)r->id, g, k, v, t);
    }
    if (b.len)
        qr_sql_result_free(run_n((char *)b.data, b.len));
    qr_buf_free(&b);
    snprintf(sql, sizeof sql, "DELETE FROM w%d WHERE id > %d", n, n);
    exec_ok(sql);
}

static void setup(void)
{
    qr_log_set_level(QR_LOG_ERROR);
    env_open(&env);
    for (int ti = 0; ti < N_TABLES; ti++)
        load_table(ti);
}

static void teardown(void) { env_close(&env); }

TestSuite(window, .init = setup, .fini = teardown, .timeout = 600);

/* ---- the model ---- */

enum { O_K_ID, O_K, O_KDESC, O_KDESC_ID, O_KNF, O_TS, O_NONE };       /* window ORDER BY */
enum { M_ROWS, M_RANGE, M_GROUPS };
enum { B_UP, B_PREC, B_CUR, B_FOLL, B_UF };
enum { X_NONE, X_CUR, X_GROUP, X_TIES };
enum {
    F_ROWNUM, F_RANK, F_DRANK, F_PRANK, F_CUME, F_NTILE, F_LAG, F_LEAD, F_FIRST, F_LAST, F_NTH,
    F_SUM, F_SUMK, F_COUNT, F_COUNTSTAR, F_COUNTPOS, F_MIN, F_MAX, F_AVG,
};

typedef struct Frame {
    int mode, start, s_off, end, e_off, excl;
} Frame;

typedef struct WCase {
    const char *sql;          /* the call, OVER and all */
    int fn, arg;              /* ntile's buckets, lag / lead's offset, nth_value's n */
    bool part;                /* PARTITION BY g */
    int order;
    Frame fr;
} WCase;

#define DEF {M_RANGE, B_UP, 0, B_CUR, 0, X_NONE}

static const WCase CASES[] = {
    {"row_number() OVER (PARTITION BY g ORDER BY k, id)", F_ROWNUM, 0, true, O_K_ID, DEF},
    {"rank() OVER (PARTITION BY g ORDER BY k)", F_RANK, 0, true, O_K, DEF},
    {"dense_rank() OVER (ORDER BY k DESC)", F_DRANK, 0, false, O_KDESC, DEF},
    {"percent_rank() OVER (PARTITION BY g ORDER BY k)", F_PRANK, 0, true, O_K, DEF},
    {"cume_dist() OVER (ORDER BY k NULLS FIRST)", F_CUME, 0, false, O_KNF, DEF},
    {"ntile(7) OVER (PARTITION BY g ORDER BY k, id)", F_NTILE, 7, true, O_K_ID, DEF},
    {"ntile(3) OVER (ORDER BY k DESC, id)", F_NTILE, 3, false, O_KDESC_ID, DEF},
    {"lag(v, 2, -1) OVER (PARTITION BY g ORDER BY k, id)", F_LAG, 2, true, O_K_ID, DEF},
    {"lead(v) OVER (ORDER BY k, id)", F_LEAD, 1, false, O_K_ID, DEF},
    {"first_value(v) OVER (PARTITION BY g ORDER BY k, id ROWS BETWEEN 2 PRECEDING AND 3 FOLLOWING)",
     F_FIRST, 0, true, O_K_ID, {M_ROWS, B_PREC, 2, B_FOLL, 3, X_NONE}},
    {"last_value(v) OVER (PARTITION BY g ORDER BY k, id ROWS BETWEEN 2 PRECEDING AND 3 FOLLOWING "
     "EXCLUDE CURRENT ROW)", F_LAST, 0, true, O_K_ID, {M_ROWS, B_PREC, 2, B_FOLL, 3, X_CUR}},
    {"nth_value(v, 3) OVER (ORDER BY k, id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)", F_NTH, 3,
     false, O_K_ID, {M_ROWS, B_UP, 0, B_CUR, 0, X_NONE}},
    {"last_value(v) OVER (ORDER BY k DESC, id RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)",
     F_LAST, 0, false, O_KDESC_ID, {M_RANGE, B_CUR, 0, B_UF, 0, X_NONE}},
    {"sum(v) OVER (PARTITION BY g ORDER BY k)", F_SUM, 0, true, O_K, DEF},
    {"count(v) OVER (PARTITION BY g ORDER BY k, id ROWS BETWEEN 3 PRECEDING AND 1 FOLLOWING)", F_COUNT,
     0, true, O_K_ID, {M_ROWS, B_PREC, 3, B_FOLL, 1, X_NONE}},
    {"sum(v) OVER (PARTITION BY g ORDER BY k, id ROWS BETWEEN 3 PRECEDING AND 1 FOLLOWING)", F_SUM, 0,
     true, O_K_ID, {M_ROWS, B_PREC, 3, B_FOLL, 1, X_NONE}},
    {"sum(k) OVER (ORDER BY k, id ROWS BETWEEN 5 PRECEDING AND CURRENT ROW)", F_SUMK, 0, false, O_K_ID,
     {M_ROWS, B_PREC, 5, B_CUR, 0, X_NONE}},
    {"min(v) OVER (PARTITION BY g ORDER BY k, id ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)",
     F_MIN, 0, true, O_K_ID, {M_ROWS, B_CUR, 0, B_UF, 0, X_NONE}},
    {"max(v) OVER (PARTITION BY g ORDER BY k GROUPS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)", F_MAX,
     0, true, O_K, {M_GROUPS, B_FOLL, 1, B_UF, 0, X_NONE}},
    {"sum(k) OVER (ORDER BY k DESC RANGE BETWEEN 2 PRECEDING AND UNBOUNDED FOLLOWING)", F_SUMK, 0, false,
     O_KDESC, {M_RANGE, B_PREC, 2, B_UF, 0, X_NONE}},
    {"max(v) OVER (ORDER BY k RANGE BETWEEN 2 PRECEDING AND 1 FOLLOWING)", F_MAX, 0, false, O_K,
     {M_RANGE, B_PREC, 2, B_FOLL, 1, X_NONE}},
    {"count(*) OVER (PARTITION BY g ORDER BY k DESC RANGE BETWEEN 1 PRECEDING AND 3 FOLLOWING)",
     F_COUNTSTAR, 0, true, O_KDESC, {M_RANGE, B_PREC, 1, B_FOLL, 3, X_NONE}},
    {"sum(k) OVER (ORDER BY k NULLS FIRST RANGE BETWEEN CURRENT ROW AND 2 FOLLOWING)", F_SUMK, 0, false,
     O_KNF, {M_RANGE, B_CUR, 0, B_FOLL, 2, X_NONE}},
    {"count(*) OVER (PARTITION BY g ORDER BY k RANGE BETWEEN 3 FOLLOWING AND 5 FOLLOWING)", F_COUNTSTAR,
     0, true, O_K, {M_RANGE, B_FOLL, 3, B_FOLL, 5, X_NONE}},
    {"sum(v) OVER (PARTITION BY g ORDER BY k GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE GROUP)",
     F_SUM, 0, true, O_K, {M_GROUPS, B_PREC, 1, B_FOLL, 1, X_GROUP}},
    {"avg(v) OVER (PARTITION BY g ORDER BY k RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING "
     "EXCLUDE TIES)", F_AVG, 0, true, O_K, {M_RANGE, B_UP, 0, B_UF, 0, X_TIES}},
    {"count(*) OVER (PARTITION BY g)", F_COUNTSTAR, 0, true, O_NONE, DEF},
    {"count(*) OVER (ORDER BY k, id ROWS BETWEEN 2 FOLLOWING AND 1 FOLLOWING)", F_COUNTSTAR, 0, false,
     O_K_ID, {M_ROWS, B_FOLL, 2, B_FOLL, 1, X_NONE}},
    {"sum(k) OVER (ORDER BY k, id GROUPS BETWEEN 2 PRECEDING AND 1 PRECEDING)", F_SUMK, 0, false, O_K_ID,
     {M_GROUPS, B_PREC, 2, B_PREC, 1, X_NONE}},
    {"count(*) FILTER (WHERE v > 0) OVER (PARTITION BY g ORDER BY k)", F_COUNTPOS, 0, true, O_K, DEF},
    {"count(*) OVER (ORDER BY ts RANGE BETWEEN '3 hours' PRECEDING AND '90 minutes' FOLLOWING)",
     F_COUNTSTAR, 0, false, O_TS, {M_RANGE, B_PREC, 180, B_FOLL, 90, X_NONE}},
    {"sum(v) OVER (PARTITION BY g ORDER BY ts DESC RANGE BETWEEN interval '1 day' PRECEDING AND "
     "CURRENT ROW EXCLUDE CURRENT ROW)", F_SUM, 0, true, -O_TS, {M_RANGE, B_PREC, 1440, B_CUR, 0, X_CUR}},
};

/* The order key of a row for a window order (NULL: *null). */
static int okey(const Row *r, int order, bool *null)
{
    if (order == O_TS || order == -O_TS) {
        *null = r->t_null;
        return r->t_min;
    }
    *null = r->k_null;
    return r->k;
}

static bool order_desc(int order) { return order == O_KDESC || order == O_KDESC_ID || order == -O_TS; }
static bool order_nulls_first(int order) { return order_desc(order) || order == O_KNF; }

/* Sort order of two rows: the key (nulls as the order says), then id. */
static int order_cmp(const Row *a, const Row *b, int order)
{
    if (order != O_NONE) {
        bool an, bn;
        int x = okey(a, order, &an), y = okey(b, order, &bn);
        if (an != bn)
            return an == order_nulls_first(order) ? -1 : 1;
        if (!an && x != y)
            return (x < y) == !order_desc(order) ? -1 : 1;
    }
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Peers: equal in every ORDER BY key (ids too when they are a key). */
static bool peer(const Row *a, const Row *b, int order)
{
    if (order == O_NONE)
        return true;
    if (order == O_K_ID || order == O_KDESC_ID)
        return a->id == b->id;
    bool an, bn;
    int x = okey(a, order, &an), y = okey(b, order, &bn);
    return an == bn && (an || x == y);
}

static int sort_order;
static int qcmp(const void *a, const void *b)
{
    return order_cmp(*(const Row *const *)a, *(const Row *const *)b, sort_order);
}

/* Is q (position in the sorted partition P) in row p's frame? */
static bool in_frame(const WCase *c, const Row *const *P, const int *grp, int p, int q)
{
    const Frame *f = &c->fr;
    int order = c->order;
    const Row *cur = P[p], *x = P[q];
    bool cn, xn;
    int cv = okey(cur, order, &cn), xv = okey(x, order, &xn);
    bool desc = order_desc(order), nf = order_nulls_first(order);
    /* start */
    bool ok = true;
    switch (f->start) {
    case B_UP:
        break;
    case B_CUR:
        ok = f->mode == M_ROWS ? q >= p : grp[q] >= grp[p];
        break;
    default: {
        int a = f->start == B_PREC ? -f->s_off : f->s_off;
        if (f->mode == M_ROWS)
            ok = q >= p + a;
        else if (f->mode == M_GROUPS)
            ok = grp[q] >= grp[p] + a;
        else if (cn) /* a NULL key: not before its null peers */
            ok = nf || xn;
        else if (xn)
            ok = !nf;
        else
            ok = desc ? xv <= cv - a : xv >= cv + a;
    }
    }
    /* end */
    switch (f->end) {
    case B_UF:
        break;
    case B_CUR:
        ok = ok && (f->mode == M_ROWS ? q <= p : grp[q] <= grp[p]);
        break;
    default: {
        int a = f->end == B_PREC ? -f->e_off : f->e_off;
        if (f->mode == M_ROWS)
            ok = ok && q <= p + a;
        else if (f->mode == M_GROUPS)
            ok = ok && grp[q] <= grp[p] + a;
        else if (cn)
            ok = ok && (!nf || xn);
        else if (xn)
            ok = ok && nf;
        else
            ok = ok && (desc ? xv >= cv - a : xv <= cv + a);
    }
    }
    switch (f->excl) {
    case X_CUR:
        return ok && q != p;
    case X_GROUP:
        return ok && grp[q] != grp[p];
    case X_TIES:
        return ok && (q == p || grp[q] != grp[p]);
    default:
        return ok;
    }
}

typedef struct MV {
    bool null;
    double x;
} MV;

static MV mv_null(void) { return (MV){true, 0}; }
static MV mv(double x) { return (MV){false, x}; }
static MV mv_v(const Row *r) { return r->v_null ? mv_null() : mv(r->v); }

/* Row p's value of case c within its sorted partition P (m rows). */
static MV model_value(const WCase *c, const Row *const *P, const int *grp, int m, int p)
{
    int first_peer = p, last_peer = p;
    while (first_peer > 0 && grp[first_peer - 1] == grp[p])
        first_peer--;
    while (last_peer + 1 < m && grp[last_peer + 1] == grp[p])
        last_peer++;
    switch (c->fn) {
    case F_ROWNUM:
        return mv(p + 1);
    case F_RANK:
        return mv(first_peer + 1);
    case F_DRANK:
        return mv(grp[p] + 1);
    case F_PRANK:
        return mv(m > 1 ? (double)first_peer / (m - 1) : 0);
    case F_CUME:
        return mv((double)(last_peer + 1) / m);
    case F_NTILE: { /* bucket sizes: the first m % n one larger */
        int n = c->arg, base = m / n, extra = m % n, pos = 0;
        for (int b = 0; b < n; b++) {
            int size = base + (b < extra);
            if (p < pos + size)
                return mv(b + 1);
            pos += size;
        }
        return mv(n);
    }
    case F_LAG:
    case F_LEAD: {
        int q = c->fn == F_LAG ? p - c->arg : p + c->arg;
        if (q >= 0 && q < m)
            return mv_v(P[q]);
        return c->fn == F_LAG ? mv(-1) : mv_null();
    }
    default:
        break;
    }
    /* the frame's rows */
    MV acc = mv_null();
    int n = 0, nth = 0;
    double sum = 0;
    for (int q = 0; q < m; q++) {
        if (!in_frame(c, P, grp, p, q))
            continue;
        const Row *x = P[q];
        switch (c->fn) {
        case F_FIRST:
            if (n++ == 0)
                acc = mv_v(x);
            break;
        case F_LAST:
            acc = mv_v(x);
            break;
        case F_NTH:
            if (++nth == c->arg)
                acc = mv_v(x);
            break;
        case F_COUNTSTAR:
            n++;
            break;
        case F_COUNTPOS:
            n += !x->v_null && x->v > 0;
            break;
        case F_SUMK:
            if (!x->k_null) {
                n++;
                sum += x->k;
            }
            break;
        default: /* over v */
            if (x->v_null)
                break;
            n++;
            sum += x->v;
            if (c->fn == F_MIN && (acc.null || x->v < acc.x))
                acc = mv(x->v);
            if (c->fn == F_MAX && (acc.null || x->v > acc.x))
                acc = mv(x->v);
            break;
        }
    }
    switch (c->fn) {
    case F_COUNT:
    case F_COUNTSTAR:
    case F_COUNTPOS:
        return mv(n);
    case F_SUM:
    case F_SUMK:
        return n ? mv(sum) : mv_null();
    case F_AVG:
        return n ? mv(sum / n) : mv_null();
    default:
        return acc;
    }
}

/* want[id - 1] for every row of table ti under case c. */
static void model_case(int ti, const WCase *c, MV *want)
{
    int n = SIZES[ti];
    const Row **P = malloc(((size_t)n + 1) * sizeof *P);
    int *grp = malloc(((size_t)n + 1) * sizeof *grp);
    bool *done = calloc((size_t)n + 1, 1);
    for (int i = 0; i < n; i++) {
        if (done[i])
            continue;
        const Row *r = &tabs[ti][i];
        int m = 0;
        for (int j = i; j < n; j++) {
            const Row *s = &tabs[ti][j];
            if (!done[j] && (!c->part || (r->g_null == s->g_null && (r->g_null || r->g == s->g)))) {
                P[m++] = s;
                done[j] = true;
            }
        }
        sort_order = c->order;
        qsort(P, (size_t)m, sizeof *P, qcmp);
        for (int p = 0; p < m; p++)
            grp[p] = p == 0 ? 0 : grp[p - 1] + !peer(P[p - 1], P[p], c->order);
        for (int p = 0; p < m; p++)
            want[P[p]->id - 1] = model_value(c, P, grp, m, p);
    }
    free(P);
    free(grp);
    free(done);
}

static MV got_value(const QrSqlValue *v)
{
    if (v->is_null)
        return mv_null();
    switch (v->type) {
    case QR_SQL_FLOAT4:
    case QR_SQL_FLOAT8:
        return mv(v->u.f);
    default:
        return mv((double)v->u.i);
    }
}

static bool same_mv(MV a, MV b)
{
    if (a.null || b.null)
        return a.null == b.null;
    return fabs(a.x - b.x) <= 1e-9 * fmax(1, fabs(b.x));
}

/* ---- tests ---- */

Test(window, every_function_and_frame_matches_the_model)
{
    MV *want = malloc((MAXN + 1) * sizeof *want);
    for (int ti = 0; ti < N_TABLES; ti++) {
        int n = SIZES[ti];
        for (size_t ci = 0; ci < sizeof CASES / sizeof *CASES; ci++) {
            const WCase *c = &CASES[ci];
            char sql[512];
            snprintf(sql, sizeof sql, "SELECT id, %s FROM w%d ORDER BY id", c->sql, n);
            QrSqlResult *r = run(sql);
            cr_assert_eq(r->n_rows, (uint64_t)n, "%s: %llu rows", sql, (unsigned long long)r->n_rows);
            model_case(ti, c, want);
            for (int i = 0; i < n; i++) {
                cr_assert_eq(r->vals[2 * i].u.i, i + 1, "%s: row %d", sql, i);
                MV got = got_value(&r->vals[2 * i + 1]);
                cr_assert(same_mv(got, want[i]), "%s: id %d: got %s%g, want %s%g", sql, i + 1,
                          got.null ? "NULL " : "", got.x, want[i].null ? "NULL " : "", want[i].x);
            }
            qr_sql_result_free(r);
        }
    }
    free(want);
}

/* Several windows in one query, over groups: each WindowAgg adds its
 * columns, the rows come out as the last window sorted them. */
Test(window, windows_over_groups_and_stacked_windows)
{
    QrSqlResult *r = run("SELECT g, count(*), sum(count(*)) OVER (), rank() OVER (ORDER BY count(*) DESC, g), "
                         "lag(g) OVER (ORDER BY g NULLS FIRST) FROM w2600 GROUP BY g ORDER BY g NULLS FIRST");
    int cnt[5] = {0}; /* g 0..3, NULL at 4 */
    for (int i = 0; i < MAXN; i++)
        cnt[tabs[4][i].g_null ? 4 : tabs[4][i].g]++;
    cr_assert_eq(r->n_rows, 5);
    int order[5] = {4, 0, 1, 2, 3};
    /* rank by count DESC, g (NULL last): the number of groups before + 1 */
    int rank[5];
    for (int gi = 0; gi < 5; gi++) {
        rank[gi] = 1;
        for (int o = 0; o < 5; o++)
            rank[gi] += cnt[o] > cnt[gi] || (cnt[o] == cnt[gi] && o < gi);
    }
    for (int i = 0; i < 5; i++) {
        int gi = order[i];
        const QrSqlValue *v = &r->vals[i * 5];
        cr_assert_eq(v[0].is_null, gi == 4);
        cr_assert_eq(v[1].u.i, cnt[gi]);
        cr_assert_eq(v[2].u.i, MAXN, "the sum of the groups' counts is every row");
        cr_assert_eq(v[3].u.i, rank[gi], "g %d: rank %lld, want %d", gi, (long long)v[3].u.i, rank[gi]);
        cr_assert_eq(v[4].is_null, i <= 1, "lag over g NULLS FIRST");
    }
    qr_sql_result_free(r);
    /* the same call twice shares its column; DISTINCT over a window */
    r = run("SELECT DISTINCT dense_rank() OVER (ORDER BY k) FROM w1025 ORDER BY dense_rank() OVER (ORDER BY k)");
    bool seen[12] = {0};
    int distinct_k = 0;
    for (int i = 0; i < 1025; i++) {
        int slot = tabs[3][i].k_null ? 11 : tabs[3][i].k + 5;
        distinct_k += !seen[slot];
        seen[slot] = true;
    }
    cr_assert_eq(r->n_rows, (uint64_t)distinct_k);
    for (uint64_t i = 0; i < r->n_rows; i++)
        cr_assert_eq(r->vals[i].u.i, (int64_t)i + 1);
    qr_sql_result_free(r);
}

Test(window, named_windows_parameters_and_reexecution)
{
    /* WINDOW w, OVER w and OVER (w ...) agree with the inline window */
    QrSqlResult *a = run("SELECT id, sum(v) OVER w, rank() OVER (w ORDER BY k), count(*) OVER w2 FROM w1024 "
                         "WINDOW w AS (PARTITION BY g), w2 AS (w ORDER BY k ROWS 2 PRECEDING) ORDER BY id");
    QrSqlResult *b = run("SELECT id, sum(v) OVER (PARTITION BY g), rank() OVER (PARTITION BY g ORDER BY k), "
                         "count(*) OVER (PARTITION BY g ORDER BY k ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) "
                         "FROM w1024 ORDER BY id");
    cr_assert_eq(a->n_rows, 1024);
    for (uint64_t i = 0; i < 1024 * 4; i++)
        if (i % 4 != 3) /* (ROWS over ties: which peers precede is the sort's choice) */
            cr_assert(same_mv(got_value(&a->vals[i]), got_value(&b->vals[i])), "value %llu", (unsigned long long)i);
    qr_sql_result_free(a);
    qr_sql_result_free(b);
    /* a frame offset as a parameter: one bound statement, run with 0, 3, 1 */
    QrError err;
    qr_error_clear(&err);
    const char *q = "SELECT id, count(*) OVER (ORDER BY k, id ROWS BETWEEN $1 PRECEDING AND CURRENT ROW) "
                    "FROM w1025 ORDER BY id";
    QrSqlStmt *st;
    cr_assert_eq(qr_sql_prepare(env.s, q, strlen(q), NULL, 0, &st, &err), QR_OK, "%s", err.message);
    const char *offs[] = {"0", "3", "1", "-1"};
    for (int k = 0; k < 4; k++) {
        const char *vals[] = {offs[k]};
        int lens[] = {(int)strlen(offs[k])};
        QrSqlParams p = {.n = 1, .values = vals, .lengths = lens};
        QrSqlResult *r = NULL;
        int rc = qr_sql_execute(env.s, st, &p, &r, &err);
        if (k == 3) {
            cr_assert_neq(rc, QR_OK);
            cr_assert_str_eq(qr_error_sqlstate(&err), "22013");
            qr_error_clear(&err);
            continue;
        }
        cr_assert_eq(rc, QR_OK, "%s", err.message);
        WCase c = {"", F_COUNTSTAR, 0, false, O_K_ID, {M_ROWS, B_PREC, atoi(offs[k]), B_CUR, 0, X_NONE}};
        MV want[1025];
        model_case(3, &c, want);
        for (int i = 0; i < 1025; i++)
            cr_assert(same_mv(got_value(&r->vals[2 * i + 1]), want[i]), "offset %s, id %d", offs[k], i + 1);
        qr_sql_result_free(r);
    }
    qr_sql_stmt_unref(st);
}

Test(window, where_windows_may_not_appear)
{
    fails("SELECT id FROM w1 WHERE rank() OVER () > 1", "42P20");
    fails("SELECT count(*) FROM w1 GROUP BY rank() OVER ()", "42P20");
    fails("SELECT count(*) FROM w1 HAVING rank() OVER () > 1", "42P20");
    fails("SELECT rank() OVER (PARTITION BY rank() OVER ()) FROM w1", "42P20");
    fails("SELECT sum(rank() OVER ()) FROM w1", "42803");
    fails("SELECT lag(lag(v) OVER ()) OVER () FROM w1", "42P20");
    fails("SELECT row_number() FROM w1", "42809");
    fails("SELECT lower('x') OVER () FROM w1", "42809");
    fails("SELECT rank() OVER nosuch FROM w1", "42704");
    fails("SELECT rank() OVER (w ORDER BY id) FROM w1 WINDOW w AS (ORDER BY k)", "42P20");
    fails("SELECT rank() OVER (w) FROM w1 WINDOW w AS (ORDER BY k ROWS 1 PRECEDING)", "42P20");
    fails("SELECT 1 FROM w1 WINDOW w AS (), w AS ()", "42P20");
    fails("SELECT sum(v) OVER (ORDER BY k, id RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM w1", "42P20");
    fails("SELECT sum(v) OVER (GROUPS 1 PRECEDING) FROM w1", "42P20");
    fails("SELECT sum(v) OVER (ORDER BY ts RANGE 1 PRECEDING) FROM w1", "0A000");
    fails("SELECT sum(v) OVER (ORDER BY k ROWS id PRECEDING) FROM w1", "42P10");
    fails("SELECT sum(v) OVER (ORDER BY k ROWS -1 PRECEDING) FROM w1", "22013");
    fails("SELECT sum(v) OVER (ORDER BY k RANGE -1 PRECEDING) FROM w1", "22013");
    fails("SELECT sum(v) OVER (ORDER BY k ROWS NULL PRECEDING) FROM w1", "22004");
    fails("SELECT ntile(0) OVER () FROM w1", "22014");
    fails("SELECT nth_value(v, 0) OVER () FROM w1", "22016");
    fails("SELECT count(DISTINCT v) OVER () FROM w1", "0A000");
    fails("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY v) OVER () FROM w1", "0A000");
    fails("SELECT row_number() FILTER (WHERE true) OVER () FROM w1", "0A000");
    fails("SELECT id, rank() OVER (ORDER BY k) FROM w1 GROUP BY g", "42803");
}

Test(window, partition_buffers_count_against_the_memory_cap)
{
    QrError err;
    qr_error_clear(&err);
    /* three sorts: three nodes keeping 2,600 rows each, past 1 MB */
    cr_assert_eq(qr_sql_session_set(env.s, "quarry.mem_cap", "1048576", &err), QR_OK);
    QrSqlResult *r = NULL;
    const char *q = "SELECT id, sum(v) OVER (ORDER BY k, id), rank() OVER (PARTITION BY g ORDER BY v), "
                    "lag(ts) OVER (ORDER BY ts, id) FROM w2600";
    cr_assert_neq(qr_sql_exec(env.s, q, strlen(q), &r, &err), QR_OK);
    cr_assert_str_eq(qr_error_sqlstate(&err), "54000", "%s", err.message);
    cr_assert(err.hint[0] != 0, "the error says what to do");
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_set(env.s, "quarry.mem_cap", "268435456", &err), QR_OK);
    r = run(q);
    cr_assert_eq(r->n_rows, MAXN);
    qr_sql_result_free(r);
}

Test(window, explain_shows_each_window)
{
    QrSqlResult *r = run("EXPLAIN SELECT id, rank() OVER (PARTITION BY g ORDER BY k DESC), "
                         "sum(v) OVER (PARTITION BY g ORDER BY k DESC ROWS 2 PRECEDING), "
                         "row_number() OVER (ORDER BY id) FROM w1 ORDER BY id");
    QrBuf b;
    qr_buf_init(&b);
    for (uint64_t i = 0; i < r->n_rows; i++)
        qr_buf_printf(&b, "%.*s\n", (int)r->vals[i].u.s.n, r->vals[i].u.s.s);
    qr_buf_putc(&b, 0);
    const char *text = (const char *)b.data;
    const char *w1 = strstr(text, "WindowAgg"), *w2 = w1 ? strstr(w1 + 1, "WindowAgg") : NULL;
    cr_assert(w1 && w2 && !strstr(w2 + 1, "WindowAgg"), "two WindowAgg nodes (one per sort):\n%s", text);
    cr_assert(strstr(text, "Partition By: g") && strstr(text, "Order By: k DESC") &&
              strstr(text, "Order By: id"), "%s", text);
    cr_assert(strstr(text, "Functions: rank(), sum(v) OVER (ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)"),
              "%s", text);
    qr_buf_free(&b);
    qr_sql_result_free(r);
}
