/*
 * op_unique.c — DISTINCT: the first row of every set of rows equal in
 * their first `key_width` values (NULL equals NULL here, as DISTINCT
 * treats them), by a hash of those values; DISTINCT ON: in the columns
 * `cols` instead (the rows come sorted, as PostgreSQL's Unique over a
 * Sort).  Rows pass through in input order; the seen set keeps owned
 * copies of the keys.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

#include <string.h>

typedef struct UniqueOp {
    SqlOp op;
    int key_width;
    const int *cols;          /* DISTINCT ON: the key columns (key_width); NULL: the first ones */
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
            const SqlValue *row = sql_batch_row(b, i);
            SqlValue kv[64];
            if (u->cols) { /* the key columns side by side */
                for (int c = 0; c < u->key_width; c++)
                    kv[c] = row[u->cols[c]];
                row = kv;
            }
            if ((rc = sql_rowhash_put(cx, &u->seen, row, true, &idx, &fresh)) == QR_OK && fresh)
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
    const UniqueOp *u = (const UniqueOp *)op;
    if (u->cols) { /* DISTINCT ON over sorted rows, as PostgreSQL's Unique */
        sql_explain_type(n, "Unique", NULL, NULL);
        return;
    }
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

SqlOp *sql_op_unique_on(SqlCtx *cx, SqlOp *kid, const int *cols, int n)
{
    if (n > 64) {
        sql_err_at(cx, -1, QR_ELIMIT, "54000", "too many DISTINCT ON expressions (at most 64)");
        return NULL;
    }
    UniqueOp *u = (UniqueOp *)sql_op_unique(cx, kid, n);
    if (!u)
        return NULL;
    u->cols = cols;
    return &u->op;
}
