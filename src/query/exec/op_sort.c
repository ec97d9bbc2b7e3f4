/*
 * op_sort.c — ORDER BY without a LIMIT to bound it: every row of the
 * child is kept (strings owned), then handed out in key order.  Ties keep
 * their input order, as the keys compare with sqlv_key_cmp and the index
 * breaks ties.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

#include <stdlib.h>
#include <string.h>

typedef struct SortOp {
    SqlOp op;
    const SqlSortKey *keys;   /* borrows */
    int n_keys;
    SqlRowSink rows;
    uint64_t *idx;            /* arena: the rows in order */
    uint64_t pos;
    SqlBatch *b;
} SortOp;

typedef struct SortCmp {
    const SqlSortKey *keys;
    int n_keys, width;
    const SqlValue *vals;
} SortCmp;

/* Integers and timestamps compare here, without the general comparison's
 * type dispatch (the common key); everything else through sqlv_key_cmp. */
static inline bool plain_int(QrSqlType t)
{
    return t == QR_SQL_INT8 || t == QR_SQL_INT4 || t == QR_SQL_INT2 || t == QR_SQL_TIMESTAMPTZ ||
           t == QR_SQL_TIMESTAMP;
}

static int row_cmp(const void *a, const void *b, void *arg)
{
    const SortCmp *sc = arg;
    uint64_t ia = *(const uint64_t *)a, ib = *(const uint64_t *)b;
    const SqlValue *ra = sc->vals + ia * (uint64_t)sc->width, *rb = sc->vals + ib * (uint64_t)sc->width;
    for (int k = 0; k < sc->n_keys; k++) {
        const SqlValue *x = &ra[sc->keys[k].col], *y = &rb[sc->keys[k].col];
        int c;
        if (!x->is_null && !y->is_null && plain_int(x->type) && plain_int(y->type)) {
            c = (x->u.i > y->u.i) - (x->u.i < y->u.i);
            c = sc->keys[k].desc ? -c : c;
        } else {
            c = sqlv_key_cmp(x, y, sc->keys[k].desc, sc->keys[k].nulls_first);
        }
        if (c)
            return c;
    }
    return ia < ib ? -1 : ia > ib; /* stable */
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int sql_first_index(SqlCtx *cx, const SqlValue *vals, uint64_t n, int width, const SqlSortKey *keys,
                    int n_keys, uint64_t k, uint64_t **out)
{
    uint64_t *idx = qr_arena_alloc(cx->arena, (n + 1) * sizeof *idx);
    if (!idx)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    for (uint64_t i = 0; i < n; i++)
        idx[i] = i;
    *out = idx;
    if (k >= n)
        return QR_OK;
    /* quickselect on (keys, arrival): a total order, so the first k are
     * exactly those a stable sort would put first */
    SortCmp sc = {keys, n_keys, width, vals};
    uint64_t lo = 0, hi = n - 1, t;
#define SWAPI(a, b) (t = idx[a], idx[a] = idx[b], idx[b] = t)
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (row_cmp(&idx[mid], &idx[lo], &sc) < 0)
            SWAPI(mid, lo);
        if (row_cmp(&idx[hi], &idx[lo], &sc) < 0)
            SWAPI(hi, lo);
        if (row_cmp(&idx[hi], &idx[mid], &sc) < 0)
            SWAPI(hi, mid);
        uint64_t pivot = idx[mid];
        int64_t i = (int64_t)lo, j = (int64_t)hi;
        while (i <= j) {
            while (row_cmp(&idx[i], &pivot, &sc) < 0)
                i++;
            while (row_cmp(&idx[j], &pivot, &sc) > 0)
                j--;
            if (i <= j) {
                SWAPI(i, j);
                i++;
                j--;
            }
        }
        if ((int64_t)k - 1 <= j)
            hi = (uint64_t)j;
        else if ((int64_t)k - 1 >= i)
            lo = (uint64_t)i;
        else
            break;
    }
#undef SWAPI
    qsort(idx, k, sizeof *idx, u64_cmp); /* the k, in arrival order */
    return QR_OK;
}

int sql_sort_index(SqlCtx *cx, const SqlValue *vals, uint64_t n, int width, const SqlSortKey *keys,
                   int n_keys, uint64_t **out)
{
    uint64_t *idx = qr_arena_alloc(cx->arena, (n + 1) * sizeof *idx);
    if (!idx)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    for (uint64_t i = 0; i < n; i++)
        idx[i] = i;
    SortCmp sc = {keys, n_keys, width, vals};
    if (n_keys)
        qsort_r(idx, n, sizeof *idx, row_cmp, &sc);
    *out = idx;
    return QR_OK;
}

static int sort_open(SqlOp *op, SqlCtx *cx)
{
    SortOp *s = (SortOp *)op;
    memset(&s->rows, 0, sizeof s->rows);
    s->rows.width = op->width;
    s->pos = 0;
    s->idx = NULL;
    if (!s->b && !(s->b = sql_batch_new(cx, op->width)))
        return cx->err->code;
    int rc = sql_op_drain(op->kids[0], cx, &s->rows);
    if (rc == QR_OK)
        rc = sql_sort_index(cx, s->rows.rows, s->rows.n, op->width, s->keys, s->n_keys, &s->idx);
    return rc;
}

int sql_rows_batch(SqlBatch *b, const SqlValue *vals, const uint64_t *idx, uint64_t n, uint64_t *pos)
{
    int k = 0, W = b->width;
    for (; k < SQL_BATCH_ROWS && *pos < n; k++, (*pos)++)
        memcpy(b->rows + (size_t)k * (size_t)W, vals + idx[*pos] * (uint64_t)W, (size_t)W * sizeof *b->rows);
    b->n = b->n_phys = k;
    b->sel = NULL;
    b->src = NULL;
    b->stable = true; /* rows kept by the sort, strings owned */
    return k;
}

static int sort_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    SortOp *s = (SortOp *)op;
    (void)cx;
    *out = sql_rows_batch(s->b, s->rows.rows, s->idx, s->rows.n, &s->pos) ? s->b : NULL;
    return QR_OK;
}

static void sort_close(SqlOp *op, SqlCtx *cx)
{
    (void)op;
    (void)cx; /* the child was closed by its drain */
}

void sql_sort_keys_explain(SqlCtx *cx, SqlExplainNode *n, const SqlSortKey *keys, int n_keys)
{
    QrBuf b;
    qr_buf_init(&b);
    for (int k = 0; k < n_keys; k++) {
        const SqlSortKey *sk = &keys[k];
        qr_buf_printf(&b, "%s%s%s", k ? ", " : "", sk->label ? sk->label : "?", sk->desc ? " DESC" : "");
        if (sk->nulls_first != sk->desc)
            qr_buf_printf(&b, " NULLS %s", sk->nulls_first ? "FIRST" : "LAST");
    }
    sql_explain_prop(n, cx, "Sort Key", "%.*s", (int)b.len, b.data ? (char *)b.data : "");
    qr_buf_free(&b);
}

static void sort_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    const SortOp *s = (const SortOp *)op;
    sql_explain_type(n, "Sort", NULL, NULL);
    sql_sort_keys_explain(cx, n, s->keys, s->n_keys);
}

static const SqlOpVt SORT_VT = {"sort", sort_open, sort_next, sort_close, sort_explain};

SqlOp *sql_op_sort(SqlCtx *cx, SqlOp *kid, const SqlSortKey *keys, int n_keys)
{
    SortOp *s = sql_op_new(cx, sizeof *s, &SORT_VT, kid, NULL, kid->width);
    if (!s)
        return NULL;
    s->op.est_rows = kid->est_rows;
    /* PostgreSQL's cost_sort for a sort in memory (2 * cpu_operator_cost per
     * comparison, cpu_operator_cost per row out): a coordinator's
     * use_remote_estimate weighs this against fetching the rows unsorted
     * (docs/scale-out.md), so it must be in PostgreSQL's units */
    double n = kid->est_rows > 2 ? kid->est_rows : 2;
    s->op.startup_cost = kid->total_cost + n * 0.005 * __builtin_log2(n);
    s->op.total_cost = s->op.startup_cost + n * 0.0025;
    s->keys = keys;
    s->n_keys = n_keys;
    return &s->op;
}
