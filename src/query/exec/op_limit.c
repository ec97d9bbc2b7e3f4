/*
 * op_limit.c — OFFSET and LIMIT: skips the first `offset` rows, hands out
 * at most `limit`, and stops pulling from its child once it has them.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

#include <inttypes.h>

typedef struct LimitOp {
    SqlOp op;
    uint64_t limit, offset;   /* limit UINT64_MAX: all */
    uint64_t skipped, given;
    uint16_t *sel;
    const uint64_t *less;     /* borrows, may be NULL: rows of the offset the tree below
                                 dropped itself, known once it handed out its first batch */
} LimitOp;

static int limit_open(SqlOp *op, SqlCtx *cx)
{
    LimitOp *l = (LimitOp *)op;
    l->skipped = l->given = 0;
    return sql_op_open(op->kids[0], cx);
}

static int limit_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    LimitOp *l = (LimitOp *)op;
    *out = NULL;
    while (l->given < l->limit) {
        SqlBatch *b;
        int rc = sql_op_next(op->kids[0], cx, &b);
        if (rc || !b)
            return rc;
        int from = 0;
        if (l->less && l->skipped == 0 && l->given == 0) /* the first batch */
            l->skipped = *l->less < l->offset ? *l->less : l->offset;
        if (l->skipped < l->offset) {
            uint64_t skip = l->offset - l->skipped;
            if (skip >= (uint64_t)b->n) {
                l->skipped += (uint64_t)b->n;
                continue;
            }
            from = (int)skip;
            l->skipped = l->offset;
        }
        uint64_t room = l->limit - l->given;
        int to = (uint64_t)(b->n - from) > room ? from + (int)room : b->n;
        if (from > 0 || to < b->n) {
            int k = 0;
            for (int i = from; i < to; i++)
                l->sel[k++] = (uint16_t)sql_batch_at(b, i);
            b->sel = l->sel;
            b->n = k;
        }
        l->given += (uint64_t)b->n;
        *out = b;
        return QR_OK;
    }
    return QR_OK;
}

void sql_op_limit_less(SqlOp *op, const uint64_t *less)
{
    ((LimitOp *)op)->less = less;
}

static void limit_close(SqlOp *op, SqlCtx *cx)
{
    sql_op_close(op->kids[0], cx);
}

static void limit_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    const LimitOp *l = (const LimitOp *)op;
    sql_explain_type(n, "Limit", NULL, NULL);
    if (l->limit != UINT64_MAX)
        sql_explain_prop(n, cx, "Count", "%" PRIu64, l->limit);
    if (l->offset)
        sql_explain_prop(n, cx, "Offset", "%" PRIu64, l->offset);
}

static const SqlOpVt LIMIT_VT = {"limit", limit_open, limit_next, limit_close, limit_explain};

SqlOp *sql_op_limit(SqlCtx *cx, SqlOp *kid, uint64_t limit, uint64_t offset)
{
    LimitOp *l = sql_op_new(cx, sizeof *l, &LIMIT_VT, kid, NULL, kid->width);
    if (!l || !(l->sel = qr_arena_alloc(cx->arena, SQL_BATCH_ROWS * sizeof *l->sel))) {
        sql_nomem(cx);
        return NULL;
    }
    double want = limit == UINT64_MAX ? kid->est_rows : (double)limit + (double)offset;
    double frac = kid->est_rows > 0 && want < kid->est_rows ? want / kid->est_rows : 1;
    l->op.est_rows = limit == UINT64_MAX ? kid->est_rows - (double)offset : (double)limit;
    if (l->op.est_rows > kid->est_rows)
        l->op.est_rows = kid->est_rows;
    if (l->op.est_rows < 0)
        l->op.est_rows = 0;
    l->op.startup_cost = kid->startup_cost;
    l->op.total_cost = kid->startup_cost + (kid->total_cost - kid->startup_cost) * frac;
    l->limit = limit;
    l->offset = offset;
    return &l->op;
}
