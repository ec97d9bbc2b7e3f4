/*
 * op_unique.c — DISTINCT: the first row of every set of rows equal in
 * their first `key_width` values (NULL equals NULL here, as DISTINCT
 * treats them), by a hash of those values.  Rows pass through in input
 * order; the seen set keeps owned copies of the keys.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

#include <string.h>

typedef struct UniqueOp {
    SqlOp op;
    int key_width;
    SqlRowHash seen;          /* the keys seen (arena) */
    uint16_t *sel;
} UniqueOp;

static int unique_open(SqlOp *op, SqlCtx *cx)
{
    UniqueOp *u = (UniqueOp *)op;
    int rc = sql_rowhash_init(cx, &u->seen, u->key_width);
    return rc ? rc : sql_op_open(op->kids[0], cx);
}

static int unique_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    UniqueOp *u = (UniqueOp *)op;
    for (;;) {
        SqlBatch *b;
        int rc = sql_op_next(op->kids[0], cx, &b);
        if (rc || !b) {
            *out = NULL;
            return rc;
        }
        int k = 0;
        for (int i = 0; i < b->n && rc == QR_OK; i++) {
            bool fresh;
            int64_t idx;
            if ((rc = sql_rowhash_put(cx, &u->seen, sql_batch_row(b, i), true, &idx, &fresh)) == QR_OK &&
                fresh)
                u->sel[k++] = (uint16_t)sql_batch_at(b, i);
        }
        if (rc || (rc = sql_batch_narrow(cx, b, u->sel, k, out)) || *out)
            return rc;
    }
}

static void unique_close(SqlOp *op, SqlCtx *cx)
{
    sql_op_close(op->kids[0], cx);
}

static void unique_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    (void)op;
    (void)cx;
    sql_explain_type(n, "HashAggregate", NULL, NULL);
    sql_explain_prop(n, cx, "Strategy", "distinct rows");
}

static const SqlOpVt UNIQUE_VT = {"unique", unique_open, unique_next, unique_close, unique_explain};

SqlOp *sql_op_unique(SqlCtx *cx, SqlOp *kid, int key_width)
{
    UniqueOp *u = sql_op_new(cx, sizeof *u, &UNIQUE_VT, kid, NULL, kid->width);
    if (!u || !(u->sel = qr_arena_alloc(cx->arena, SQL_BATCH_ROWS * sizeof *u->sel))) {
        sql_nomem(cx);
        return NULL;
    }
    u->op.total_cost = kid->total_cost + kid->est_rows * 0.02;
    u->key_width = key_width;
    return &u->op;
}
