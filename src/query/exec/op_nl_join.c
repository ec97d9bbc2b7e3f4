/*
 * op_nl_join.c — joins without an equality key: the inner child's rows
 * are read first, then every outer row is paired with each of them and the
 * join's conditions tested.  The pairs are bounded (54000 past
 * SQL_NL_PAIRS_MAX) so a mistaken cross join fails clearly instead of
 * running for hours.  LEFT as op_hash_join.c.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

#include <inttypes.h>
#include <string.h>

#define SQL_NL_PAIRS_MAX 50000000ull


typedef struct NlJoinOp {
    SqlOp op;
    SqlJoinSpec js;
    SqlRowSink inner;
    SqlBatch *in;
    int in_pos;
    uint64_t r;               /* next inner row for outer row in_pos */
    bool matched;
    SqlBatch *b;
    uint64_t n_pairs;
} NlJoinOp;

static int nl_open(SqlOp *op, SqlCtx *cx)
{
    NlJoinOp *j = (NlJoinOp *)op;
    memset(&j->inner, 0, sizeof j->inner);
    j->inner.width = op->width;
    j->in = NULL;
    j->r = 0;
    j->matched = false;
    j->n_pairs = 0;
    if (!j->b && !(j->b = sql_batch_new(cx, op->width)))
        return cx->err->code;
    int rc = sql_op_drain(op->kids[1], cx, &j->inner);
    return rc ? rc : sql_op_open(op->kids[0], cx);
}

static int nl_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    NlJoinOp *j = (NlJoinOp *)op;
    const SqlJoinSpec *js = &j->js;
    SqlBatch *o = j->b;
    int W = op->width, k = 0, rc = QR_OK;
    while (k < SQL_BATCH_ROWS && rc == QR_OK) {
        if (!j->in || j->in_pos >= j->in->n) {
            if (k > 0)
                break;
            if ((rc = sql_op_next(op->kids[0], cx, &j->in)) || !j->in)
                break;
            j->in_pos = 0;
            j->r = 0;
            j->matched = false;
            if ((rc = sql_batch_fill(cx, j->in)))
                break;
        }
        const SqlValue *lrow = sql_batch_row(j->in, j->in_pos);
        SqlValue *x = o->rows + (size_t)k * (size_t)W;
        if (j->r < j->inner.n) {
            if (++j->n_pairs > SQL_NL_PAIRS_MAX) {
                rc = sql_err_at(cx, -1, QR_ELIMIT, "54000",
                                "join without an equality condition would compare more than %llu row pairs",
                                (unsigned long long)SQL_NL_PAIRS_MAX);
                qr_error_hint(cx->err, "add an equality condition between the joined tables");
                break;
            }
            memcpy(x, lrow, (size_t)W * sizeof *x);
            bool pass;
            rc = sql_join_pair(cx, js, x, j->inner.rows + j->r++ * (uint64_t)W, &pass);
            if (pass && rc == QR_OK) {
                j->matched = true;
                k++;
            }
            if ((j->n_pairs & 1023) == 0 && rc == QR_OK)
                rc = sql_check_now(cx);
            continue;
        }
        if (js->left && !j->matched) {
            sql_join_unmatched(js, x, lrow, W);
            k++;
        }
        j->in_pos++;
        j->r = 0;
        j->matched = false;
    }
    *out = rc || k == 0 ? NULL : sql_batch_dense(o, k);
    return rc;
}

static void nl_close(SqlOp *op, SqlCtx *cx)
{
    NlJoinOp *j = (NlJoinOp *)op;
    j->in = NULL;
    sql_op_close(op->kids[0], cx);
}

static void nl_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    const NlJoinOp *j = (const NlJoinOp *)op;
    sql_explain_type(n, j->js.left ? "Nested Loop Left Join" : "Nested Loop", NULL, NULL);
    sql_join_explain(cx, n, &j->js, j->n_pairs);
}

static const SqlOpVt NL_VT = {"nl_join", nl_open, nl_next, nl_close, nl_explain};

SqlOp *sql_op_nl_join(SqlCtx *cx, SqlOp *outer, SqlOp *inner, const SqlJoinSpec *spec)
{
    NlJoinOp *j = sql_op_new(cx, sizeof *j, &NL_VT, outer, inner, outer->width);
    if (!j)
        return NULL;
    j->js = *spec;
    j->op.est_rows = outer->est_rows * (inner->est_rows > 1 ? inner->est_rows : 1) * 0.1;
    j->op.startup_cost = inner->total_cost;
    j->op.total_cost = j->op.startup_cost + outer->total_cost + outer->est_rows * inner->est_rows * 0.01;
    return &j->op;
}
