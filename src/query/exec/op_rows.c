/*
 * op_rows.c — materialized rows as a leaf: VALUES, a CTE's result, a
 * catalog relation, a subquery's rows, a set-returning function in FROM.
 * Each row's values are placed at their scope columns; conditions pushed to
 * the item are applied here.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

#include <string.h>

typedef struct RowsOp {
    SqlOp op;
    const SqlValue *vals;     /* borrows: n * n_cols */
    uint64_t n, pos;
    int n_cols, first;
    SqlExpr **conj;           /* borrows */
    int n_conj;
    const char *label;
    SqlBatch *b;
    uint16_t *sel;
} RowsOp;

static int rows_open(SqlOp *op, SqlCtx *cx)
{
    RowsOp *r = (RowsOp *)op;
    r->pos = 0;
    if (!r->b && !(r->b = sql_batch_new(cx, op->width)))
        return cx->err->code;
    if (!r->sel && !(r->sel = qr_arena_alloc(cx->arena, SQL_BATCH_ROWS * sizeof *r->sel)))
        return sql_nomem(cx);
    return QR_OK;
}

static int rows_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    RowsOp *r = (RowsOp *)op;
    SqlBatch *b = r->b;
    int W = op->width;
    while (r->pos < r->n) {
        int k = 0, n = 0, rc = QR_OK;
        for (; k < SQL_BATCH_ROWS && r->pos < r->n; k++, r->pos++) {
            SqlValue *row = b->rows + (size_t)k * (size_t)W;
            for (int c = 0; c < W; c++)
                row[c] = sqlv_null();
            memcpy(row + r->first, r->vals + r->pos * (uint64_t)r->n_cols,
                   (size_t)r->n_cols * sizeof *row);
        }
        for (int i = 0; i < k && rc == QR_OK; i++) {
            bool pass;
            SqlEvalRow er = {.row = b->rows + (size_t)i * (size_t)W, .doc = -1};
            rc = sql_conj_test(cx, r->conj, r->n_conj, &er, &pass);
            if (pass)
                r->sel[n++] = (uint16_t)i;
        }
        if (rc)
            return rc;
        if (n == 0) {
            if ((rc = sql_check_now(cx)))
                return rc;
            continue;
        }
        b->n = n;
        b->n_phys = k;
        b->sel = n == k ? NULL : r->sel;
        *out = b;
        return QR_OK;
    }
    *out = NULL;
    return QR_OK;
}

static void rows_close(SqlOp *op, SqlCtx *cx)
{
    (void)op;
    (void)cx;
}

static void rows_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    const RowsOp *r = (const RowsOp *)op;
    sql_explain_type(n, r->label, NULL, NULL);
    if (r->n_conj)
        sql_explain_prop(n, cx, "Filter", "%s", sql_conj_sql(cx, r->conj, r->n_conj, NULL, false));
}

static const SqlOpVt ROWS_VT = {"rows", rows_open, rows_next, rows_close, rows_explain};

SqlOp *sql_op_rows(SqlCtx *cx, const SqlValue *vals, uint64_t n, int n_cols, int first, int width,
                   SqlExpr **conj, int n_conj, const char *label)
{
    RowsOp *r = sql_op_new(cx, sizeof *r, &ROWS_VT, NULL, NULL, width);
    if (!r)
        return NULL;
    r->op.est_rows = (double)n;
    r->op.total_cost = (double)n * 0.01;
    r->vals = vals;
    r->n = n;
    r->n_cols = n_cols;
    r->first = first;
    r->conj = conj;
    r->n_conj = n_conj;
    r->label = label;
    return &r->op;
}
