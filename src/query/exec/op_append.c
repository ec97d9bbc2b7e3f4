/*
 * op_append.c — UNION ALL: every row of the first child, then every row
 * of the second.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

typedef struct AppendOp {
    SqlOp op;
    int cur;                  /* the child being read */
} AppendOp;

static int append_open(SqlOp *op, SqlCtx *cx)
{
    AppendOp *a = (AppendOp *)op;
    a->cur = 0;
    return sql_op_open(op->kids[0], cx);
}

static int append_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    AppendOp *a = (AppendOp *)op;
    *out = NULL;
    while (a->cur < op->n_kids) {
        int rc = sql_op_next(op->kids[a->cur], cx, out);
        if (rc || *out)
            return rc;
        sql_op_close(op->kids[a->cur], cx);
        if (++a->cur < op->n_kids && (rc = sql_op_open(op->kids[a->cur], cx)))
            return rc;
    }
    return QR_OK;
}

static void append_close(SqlOp *op, SqlCtx *cx)
{
    for (int i = 0; i < op->n_kids; i++)
        if (op->kids[i]->st.open)
            sql_op_close(op->kids[i], cx);
}

static void append_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    (void)op;
    (void)cx;
    sql_explain_type(n, "Append", NULL, NULL);
}

static const SqlOpVt APPEND_VT = {"append", append_open, append_next, append_close, append_explain};

SqlOp *sql_op_append(SqlCtx *cx, SqlOp *a, SqlOp *b, int width)
{
    AppendOp *p = sql_op_new(cx, sizeof *p, &APPEND_VT, a, b, width);
    if (!p)
        return NULL;
    p->op.est_rows = a->est_rows + b->est_rows;
    p->op.startup_cost = a->startup_cost;
    p->op.total_cost = a->total_cost + b->total_cost;
    return &p->op;
}
