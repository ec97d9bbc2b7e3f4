/*
 * op_rows.c — rows the plan holds, as a leaf: VALUES, a materialized
 * CTE's result, a catalog relation, a set-returning function in FROM, a
 * recursive query's working table.  Each row's values are placed at their
 * scope columns; conditions pushed to the item are applied here.  The row
 * set is read when the node is opened, so a working table refilled between
 * two opens is read afresh.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

#include <string.h>

typedef struct RowsOp {
    SqlOp op;
    const SqlRowSet *set;     /* borrows */
    const SqlValue *vals;     /* the set's rows when opened */
    uint64_t n, pos;
    int first;
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
    r->vals = r->set->vals;
    r->n = r->set->n;
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
    int nc = r->set->n_cols;
    *out = NULL;
    while (r->pos < r->n) {
        int k = 0;
        for (; k < SQL_BATCH_ROWS && r->pos < r->n; k++, r->pos++)
            sql_batch_place(b, k, r->vals + r->pos * (uint64_t)nc, nc, r->first);
        int n = sql_batch_keep(cx, b, k, r->conj, r->n_conj, r->sel);
        if (n < 0)
            return cx->err->code;
        if (n > 0) {
            *out = b;
            return QR_OK;
        }
        int rc = sql_check_now(cx);
        if (rc)
            return rc;
    }
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

SqlOp *sql_op_rows(SqlCtx *cx, const SqlRowSet *set, int first, int width, SqlExpr **conj,
                   int n_conj, const char *label)
{
    RowsOp *r = sql_op_new(cx, sizeof *r, &ROWS_VT, NULL, NULL, width);
    if (!r)
        return NULL;
    r->op.est_rows = (double)set->n;
    r->op.total_cost = (double)set->n * 0.01;
    r->set = set;
    r->first = first;
    r->conj = conj;
    r->n_conj = n_conj;
    r->label = label;
    return &r->op;
}
