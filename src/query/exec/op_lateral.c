/*
 * op_lateral.c — a LATERAL FROM item joined by a nested loop: for every
 * outer row the item's rows are computed afresh (a subquery run with the
 * outer row as its frame, or a set-returning function over the row's
 * values), then paired with the row and the join's conditions tested.
 * INNER or LEFT (an outer row without a partner kept once, the item's
 * columns NULL), as PostgreSQL allows for a lateral reference.
 *
 * Memory: a run's allocations (its plan, its rows) go to a scratch arena
 * reset at the next outer row; the item's strings in an output batch are
 * copied to a second scratch arena reset at the next batch, so a long
 * outer side runs in the memory of one run and one batch.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

#include <inttypes.h>
#include <string.h>

typedef struct LateralOp {
    SqlOp op;
    SqlJoinSpec js;
    SqlLateralFn rows;
    void *arg;
    const char *label;
    QrArena *run_arena;       /* owns: the current outer row's run */
    QrArena *batch_arena;     /* owns: strings of the batch handed out */
    SqlBatch *in;             /* the outer batch (borrowed until its next) */
    int in_pos;
    bool have;                /* cur holds the rows of outer row in_pos */
    SqlRowSet cur;
    uint64_t r;               /* next row of cur */
    bool row_matched;
    SqlValue *irow;           /* an item row placed at its scope columns */
    SqlBatch *b;
    uint64_t runs, n_pairs;
} LateralOp;

static int lat_open(SqlOp *op, SqlCtx *cx)
{
    LateralOp *l = (LateralOp *)op;
    l->in = NULL;
    l->have = false;
    l->runs = l->n_pairs = 0;
    if (!l->b && !(l->b = sql_batch_new(cx, op->width)))
        return cx->err->code;
    if (!l->irow && !(l->irow = qr_arena_calloc(cx->arena, ((size_t)op->width + 1) * sizeof *l->irow)))
        return sql_nomem(cx);
    if ((!l->run_arena && !(l->run_arena = qr_arena_new_child(cx->arena))) ||
        (!l->batch_arena && !(l->batch_arena = qr_arena_new_child(cx->arena))))
        return sql_nomem(cx);
    return sql_op_open(op->kids[0], cx);
}

/* The item's rows for outer row lrow, computed in the run arena. */
static int run_item(LateralOp *l, SqlCtx *cx, const SqlValue *lrow)
{
    qr_arena_reset(l->run_arena);
    QrArena *saved = cx->arena;
    cx->arena = l->run_arena;
    memset(&l->cur, 0, sizeof l->cur);
    int rc = l->rows(l->arg, cx, lrow, &l->cur);
    cx->arena = saved;
    l->runs++;
    l->r = 0;
    l->row_matched = false;
    l->have = rc == QR_OK;
    return rc;
}

/* The item's strings in output row x go to the batch arena. */
static int own_item(LateralOp *l, SqlCtx *cx, SqlValue *x)
{
    QrArena *saved = cx->arena;
    cx->arena = l->batch_arena;
    int rc = QR_OK;
    for (int c = l->js.first; c < l->js.first + l->js.n_cols && rc == QR_OK; c++)
        rc = sqlv_own(cx, &x[c]);
    cx->arena = saved;
    return rc;
}

static int lat_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    LateralOp *l = (LateralOp *)op;
    const SqlJoinSpec *js = &l->js;
    SqlBatch *o = l->b;
    int W = op->width, k = 0, rc = QR_OK;
    qr_arena_reset(l->batch_arena);
    while (k < SQL_BATCH_ROWS && rc == QR_OK) {
        if (!l->have) {
            if (!l->in || l->in_pos >= l->in->n) {
                if (k > 0)
                    break;
                if ((rc = sql_op_next(op->kids[0], cx, &l->in)) || !l->in)
                    break;
                l->in_pos = 0;
                if ((rc = sql_batch_fill(cx, l->in)))
                    break;
            }
            if ((rc = run_item(l, cx, sql_batch_row(l->in, l->in_pos))) || (rc = sql_check_now(cx)))
                break;
        }
        const SqlValue *lrow = sql_batch_row(l->in, l->in_pos);
        SqlValue *x = o->rows + (size_t)k * (size_t)W;
        if (l->r < l->cur.n) {
            memcpy(l->irow + js->first, l->cur.vals + l->r++ * (uint64_t)l->cur.n_cols,
                   (size_t)js->n_cols * sizeof *l->irow);
            memcpy(x, lrow, (size_t)W * sizeof *x);
            bool pass;
            l->n_pairs++;
            if ((rc = sql_join_pair(cx, js, x, l->irow, &pass)) || !pass)
                continue;
            l->row_matched = true;
            rc = own_item(l, cx, x);
            k++;
            continue;
        }
        l->have = false;
        l->in_pos++;
        if (js->type == SQL_JOIN_LEFT && !l->row_matched) {
            rc = sql_join_unmatched(cx, js, x, lrow, NULL, W);
            k++;
        }
    }
    *out = rc || k == 0 ? NULL : sql_batch_dense(o, k);
    return rc;
}

static void lat_close(SqlOp *op, SqlCtx *cx)
{
    LateralOp *l = (LateralOp *)op;
    l->in = NULL;
    l->have = false;
    qr_arena_free(l->run_arena);
    qr_arena_free(l->batch_arena);
    l->run_arena = l->batch_arena = NULL;
    sql_op_close(op->kids[0], cx);
}

static void lat_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    const LateralOp *l = (const LateralOp *)op;
    sql_explain_type(n, l->js.type == SQL_JOIN_LEFT ? "Nested Loop Left Join" : "Nested Loop", NULL,
                     NULL);
    sql_explain_prop(n, cx, "Lateral", "%s, computed per outer row", l->label);
    sql_join_explain(cx, n, &l->js, l->n_pairs);
    sql_explain_actual(n, cx, "Lateral Runs", "%" PRIu64, l->runs);
}

static const SqlOpVt LATERAL_VT = {"lateral", lat_open, lat_next, lat_close, lat_explain};

SqlOp *sql_op_lateral(SqlCtx *cx, SqlOp *outer, SqlLateralFn rows, void *arg,
                      const SqlJoinSpec *spec, const char *label)
{
    LateralOp *l = sql_op_new(cx, sizeof *l, &LATERAL_VT, outer, NULL, outer->width);
    if (!l)
        return NULL;
    l->js = *spec;
    l->rows = rows;
    l->arg = arg;
    l->label = label;
    l->op.total_cost = outer->total_cost + outer->est_rows * 10;
    return &l->op;
}
