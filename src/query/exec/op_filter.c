/*
 * op_filter.c — rows for which every conjunct is true (WHERE conditions
 * that no scan or join could take, HAVING-like checks over joined rows).
 * Narrows the child's batch through its selection vector: no row moves.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

#include <string.h>

typedef struct FilterOp {
    SqlOp op;
    SqlExpr **conj;           /* borrows */
    int n_conj;
    int *cols;                /* the columns the conjuncts read */
    int n_cols;
    uint16_t *sel;            /* the narrowed selection (arena) */
    const SqlScope *scope;    /* for EXPLAIN (may be NULL) */
} FilterOp;

static int filter_open(SqlOp *op, SqlCtx *cx)
{
    return sql_op_open(op->kids[0], cx);
}

static int filter_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    FilterOp *f = (FilterOp *)op;
    for (;;) {
        SqlBatch *b;
        int rc = sql_op_next(op->kids[0], cx, &b);
        if (rc || !b) {
            *out = NULL;
            return rc;
        }
        if ((rc = sql_batch_need(cx, b, f->cols, f->n_cols)))
            return rc;
        int n = 0;
        for (int i = 0; i < b->n && rc == QR_OK; i++) {
            int p = sql_batch_at(b, i);
            SqlEvalRow er = {.row = b->rows + (size_t)p * (size_t)b->width,
                             .doc = b->src ? b->base + b->docs[p] : -1};
            bool pass;
            rc = sql_conj_test(cx, f->conj, f->n_conj, &er, &pass);
            if (pass)
                f->sel[n++] = (uint16_t)p;
        }
        if (rc || (rc = sql_batch_narrow(cx, b, f->sel, n, out)) || *out)
            return rc;
    }
}

static void filter_close(SqlOp *op, SqlCtx *cx)
{
    sql_op_close(op->kids[0], cx);
}

static void filter_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    const FilterOp *f = (const FilterOp *)op;
    sql_explain_type(n, "Filter", NULL, NULL);
    sql_explain_prop(n, cx, "Filter", "%s", sql_conj_sql(cx, f->conj, f->n_conj, NULL, false));
}

static const SqlOpVt FILTER_VT = {"filter", filter_open, filter_next, filter_close, filter_explain};

SqlOp *sql_op_filter(SqlCtx *cx, SqlOp *kid, SqlExpr **conj, int n_conj)
{
    FilterOp *f = sql_op_new(cx, sizeof *f, &FILTER_VT, kid, NULL, kid->width);
    uint8_t *marks = qr_arena_calloc(cx->arena, (size_t)kid->width + 1);
    if (!f || !marks || !(f->sel = qr_arena_alloc(cx->arena, SQL_BATCH_ROWS * sizeof *f->sel))) {
        sql_nomem(cx);
        return NULL;
    }
    for (int i = 0; i < n_conj; i++)
        sql_expr_cols(conj[i], marks);
    if (!(f->cols = sql_cols_list(cx, marks, kid->width, &f->n_cols)))
        return NULL;
    f->op.est_rows = kid->est_rows * 0.5;
    f->op.total_cost = kid->total_cost + kid->est_rows * 0.1 * n_conj;
    f->conj = conj;
    f->n_conj = n_conj;
    return &f->op;
}
