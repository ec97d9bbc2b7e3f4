/*
 * op_result.c — one row computed when the node opens: the row of a
 * SELECT without FROM, or aggregates answered without reading rows (a
 * count from the postings alone, count / min / max from column
 * statistics).  A constant-false WHERE makes it give no row.  When the
 * function cannot answer (deletes pending, a condition that needs the
 * rows), the fallback child (the ordinary plan) gives the rows instead.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

typedef struct ResultOp {
    SqlOp op;
    SqlResultFn fn;
    void *arg;
    bool none;
    bool done;
    bool answered;            /* fn answered (else the fallback runs) */
    const char *label, *detail;
    SqlBatch *b;
} ResultOp;

static int result_open(SqlOp *op, SqlCtx *cx)
{
    ResultOp *r = (ResultOp *)op;
    r->done = r->none;
    if (!r->b && !(r->b = sql_batch_new(cx, op->width)))
        return cx->err->code;
    for (int c = 0; c < op->width; c++)
        r->b->rows[c] = sqlv_null();
    r->answered = true;
    int rc = !r->none && r->fn ? r->fn(r->arg, cx, r->b->rows, &r->answered) : QR_OK;
    if (rc == QR_OK && !r->answered)
        rc = op->n_kids ? sql_op_open(op->kids[0], cx)
                        : sql_err_at(cx, -1, QR_EINTERNAL, "XX000", "no plan to fall back on");
    return rc;
}

static int result_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    ResultOp *r = (ResultOp *)op;
    *out = NULL;
    if (!r->answered)
        return sql_op_next(op->kids[0], cx, out);
    if (r->done)
        return QR_OK;
    r->done = true;
    r->b->n = r->b->n_phys = 1;
    r->b->sel = NULL;
    r->b->src = NULL;
    *out = r->b;
    return QR_OK;
}

static void result_close(SqlOp *op, SqlCtx *cx)
{
    if (op->n_kids && op->kids[0]->st.open)
        sql_op_close(op->kids[0], cx);
}

static void result_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    const ResultOp *r = (const ResultOp *)op;
    sql_explain_type(n, r->label, NULL, NULL);
    if (r->detail)
        sql_explain_prop(n, cx, "Source", "%s", r->detail);
    if (r->none)
        sql_explain_prop(n, cx, "One-Time Filter", "false");
}

static const SqlOpVt RESULT_VT = {"result", result_open, result_next, result_close, result_explain};

SqlOp *sql_op_result(SqlCtx *cx, int width, SqlResultFn fn, void *arg, bool none,
                     const char *label, const char *detail, SqlOp *fallback)
{
    ResultOp *r = sql_op_new(cx, sizeof *r, &RESULT_VT, NULL, NULL, width);
    if (!r)
        return NULL;
    r->op.est_rows = none ? 0 : 1;
    r->op.total_cost = 0.01;
    if (fallback) {
        r->op.kids[0] = fallback;
        r->op.n_kids = 1;
        r->op.est_rows = fallback->est_rows;
    }
    r->fn = fn;
    r->arg = arg;
    r->none = none;
    r->label = label;
    r->detail = detail;
    return &r->op;
}
