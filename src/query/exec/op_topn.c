/*
 * op_topn.c — ORDER BY ... LIMIT k: the first k rows by keys while
 * holding at most 2k (once 2k are held they are sorted and the first k
 * kept).  After the first compaction the k-th row's first key is a bar: a
 * row whose first key sorts after it cannot enter, and a table scan below
 * walking a column's blocks best bound first asks sql_topn_may_enter to
 * stop early (the ordered walk).
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

#include <string.h>

typedef struct TopNOp {
    SqlOp op;
    const SqlSortKey *keys;   /* borrows */
    int n_keys;
    uint64_t keep;
    SqlRowSink rows;          /* at most 2 * keep, owned strings */
    SqlValue bar;             /* after a compaction: the keep-th row's first key */
    bool have_bar;
    uint64_t *idx;
    uint64_t n_out, pos;
    SqlBatch *b;
} TopNOp;

bool sql_topn_may_enter(void *arg, const SqlValue *key)
{
    const TopNOp *t = arg;
    return !t->have_bar || sqlv_key_cmp(key, &t->bar, t->keys[0].desc, t->keys[0].nulls_first) <= 0;
}

/* Keep the first `keep` rows of what is held, in their arrival order
 * (ties are broken by it, as the final sort does), without sorting them. */
static int compact(TopNOp *t, SqlCtx *cx)
{
    uint64_t *idx;
    QrArenaMark m = qr_arena_mark(cx->arena);
    int W = t->op.width;
    int rc = sql_first_index(cx, t->rows.rows, t->rows.n, W, t->keys, t->n_keys, t->keep, &idx);
    if (rc)
        return rc;
    SqlValue *tmp = qr_malloc(t->keep * (uint64_t)W * sizeof *tmp + 1);
    if (!tmp)
        return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    for (uint64_t i = 0; i < t->keep; i++)
        memcpy(tmp + i * (uint64_t)W, t->rows.rows + idx[i] * (uint64_t)W, (size_t)W * sizeof *tmp);
    memcpy(t->rows.rows, tmp, t->keep * (uint64_t)W * sizeof *tmp);
    qr_free(tmp);
    qr_arena_release(cx->arena, m);
    t->rows.n = t->keep;
    /* the bar: the greatest first key among those kept */
    const SqlSortKey *k0 = &t->keys[0];
    const SqlValue *bar = &t->rows.rows[k0->col];
    for (uint64_t i = 1; i < t->keep; i++) {
        const SqlValue *v = &t->rows.rows[i * (uint64_t)W + (uint64_t)k0->col];
        if (sqlv_key_cmp(v, bar, k0->desc, k0->nulls_first) > 0)
            bar = v;
    }
    t->bar = *bar;
    t->have_bar = true;
    return QR_OK;
}

static int topn_open(SqlOp *op, SqlCtx *cx)
{
    TopNOp *t = (TopNOp *)op;
    int W = op->width;
    memset(&t->rows, 0, sizeof t->rows);
    t->rows.width = W;
    t->have_bar = false;
    t->pos = t->n_out = 0;
    if (!t->b && !(t->b = sql_batch_new(cx, W)))
        return cx->err->code;
    int rc = sql_op_open(op->kids[0], cx);
    while (rc == QR_OK) {
        SqlBatch *b;
        if ((rc = sql_op_next(op->kids[0], cx, &b)) || !b)
            break;
        for (int i = 0; i < b->n && rc == QR_OK; i++) {
            const SqlValue *row = sql_batch_row(b, i);
            if (t->have_bar && !sql_topn_may_enter(t, &row[t->keys[0].col]))
                continue;
            SqlValue *o = sql_sink_slot(cx, &t->rows);
            if (!o) {
                rc = cx->err->code;
                break;
            }
            memcpy(o, row, (size_t)W * sizeof *o);
            for (int c = 0; c < W && rc == QR_OK; c++)
                rc = sqlv_own(cx, &o[c]);
            t->rows.n++;
            if (rc == QR_OK && t->rows.n >= 2 * t->keep)
                rc = compact(t, cx);
        }
    }
    sql_op_close(op->kids[0], cx);
    if (rc == QR_OK)
        rc = sql_sort_index(cx, t->rows.rows, t->rows.n, W, t->keys, t->n_keys, &t->idx);
    t->n_out = t->rows.n < t->keep ? t->rows.n : t->keep;
    return rc;
}

static int topn_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    TopNOp *t = (TopNOp *)op;
    (void)cx;
    *out = sql_rows_batch(t->b, t->rows.rows, t->idx, t->n_out, &t->pos) ? t->b : NULL;
    return QR_OK;
}

static void topn_close(SqlOp *op, SqlCtx *cx)
{
    sql_op_close(op->kids[0], cx);
}

static void topn_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    const TopNOp *t = (const TopNOp *)op;
    sql_explain_type(n, "Sort", NULL, NULL);
    sql_sort_keys_explain(cx, n, t->keys, t->n_keys);
    sql_explain_prop(n, cx, "Sort Method", "top-N (%llu rows kept)", (unsigned long long)t->keep);
}

static const SqlOpVt TOPN_VT = {"topn", topn_open, topn_next, topn_close, topn_explain};

SqlOp *sql_op_topn(SqlCtx *cx, SqlOp *kid, const SqlSortKey *keys, int n_keys, uint64_t keep)
{
    TopNOp *t = sql_op_new(cx, sizeof *t, &TOPN_VT, kid, NULL, kid->width);
    if (!t)
        return NULL;
    t->op.est_rows = kid->est_rows < (double)keep ? kid->est_rows : (double)keep;
    t->op.startup_cost = kid->total_cost + kid->est_rows * 0.02;
    t->op.total_cost = t->op.startup_cost + t->op.est_rows * 0.01;
    t->keys = keys;
    t->n_keys = n_keys;
    t->keep = keep;
    return &t->op;
}
