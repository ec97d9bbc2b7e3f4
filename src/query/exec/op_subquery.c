/*
 * op_subquery.c — Subquery Scan: a query block's tree (a FROM subquery,
 * a WITH query referenced once, a recursive query) as a FROM item of the
 * block above.  The child's output columns are placed at the item's scope
 * columns of the outer block's rows and the conditions pushed to the item
 * are applied; rows stream through, nothing is stored.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

typedef struct SubqueryOp {
    SqlOp op;
    int n_cols, first;
    SqlExpr **conj;           /* borrows */
    int n_conj;
    const char *label;
    SqlBatch *b;
    uint16_t *sel;
} SubqueryOp;

static int subquery_open(SqlOp *op, SqlCtx *cx)
{
    SubqueryOp *s = (SubqueryOp *)op;
    if (!s->b && !(s->b = sql_batch_new(cx, op->width)))
        return cx->err->code;
    if (!s->sel && !(s->sel = qr_arena_alloc(cx->arena, SQL_BATCH_ROWS * sizeof *s->sel)))
        return sql_nomem(cx);
    return sql_op_open(op->kids[0], cx);
}

static int subquery_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    SubqueryOp *s = (SubqueryOp *)op;
    *out = NULL;
    for (;;) {
        SqlBatch *in;
        int rc = sql_op_next(op->kids[0], cx, &in);
        if (rc || !in)
            return rc;
        if ((rc = sql_batch_fill(cx, in)))
            return rc;
        for (int i = 0; i < in->n; i++)
            sql_batch_place(s->b, i, sql_batch_row(in, i), s->n_cols, s->first);
        int n = sql_batch_keep(cx, s->b, in->n, s->conj, s->n_conj, s->sel);
        if (n < 0)
            return cx->err->code;
        if (n > 0) {
            *out = s->b;
            return QR_OK;
        }
    }
}

static void subquery_close(SqlOp *op, SqlCtx *cx)
{
    sql_op_close(op->kids[0], cx);
}

static void subquery_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    const SubqueryOp *s = (const SubqueryOp *)op;
    sql_explain_type(n, s->label, NULL, NULL);
    if (s->n_conj)
        sql_explain_prop(n, cx, "Filter", "%s", sql_conj_sql(cx, s->conj, s->n_conj, NULL, false));
}

static const SqlOpVt SUBQUERY_VT = {"subquery", subquery_open, subquery_next, subquery_close,
                                    subquery_explain};

SqlOp *sql_op_subquery(SqlCtx *cx, SqlOp *kid, int n_cols, int first, int width, SqlExpr **conj,
                       int n_conj, const char *label)
{
    SubqueryOp *s = sql_op_new(cx, sizeof *s, &SUBQUERY_VT, kid, NULL, width);
    if (!s)
        return NULL;
    s->n_cols = n_cols;
    s->first = first;
    s->conj = conj;
    s->n_conj = n_conj;
    s->label = label;
    s->op.total_cost = kid->total_cost + kid->est_rows * 0.01;
    if (n_conj)
        s->op.est_rows = kid->est_rows * 0.5;
    return &s->op;
}
