/*
 * op_recursive.c — Recursive Union, the loop of WITH RECURSIVE: the rows
 * of the non-recursive term (kids[0]) come out first and become the
 * working table; then the recursive term (kids[1], whose WorkTable Scan
 * reads `wt`) is opened again for each round, over the rows the round
 * before produced, and its rows come out and make the next working table,
 * until a round produces none.  With UNION (distinct) a row seen before is
 * dropped before it comes out or enters a working table, so a walk over a
 * graph with cycles ends; with UNION ALL every row counts.
 *
 * Bounds: every round checks cancel and the deadline (sql_check_now); the
 * working tables are kept in the statement's arena, so a recursion that
 * does not end runs into the memory budget (54000, naming the query and
 * the rounds run) instead of running forever.  A consumer that stops
 * early (LIMIT) ends the loop with it.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

#include <inttypes.h>
#include <string.h>

typedef struct RecursiveOp {
    SqlOp op;
    SqlRowSet *wt;            /* borrows: the working table the WorkTable Scan reads */
    bool distinct;
    const char *name;         /* the WITH query's name */
    SqlRowHash seen;          /* distinct: every row handed out (arena) */
    SqlRowSink next;          /* this round's rows: the next working table */
    int cur;                  /* the kid being read (0, then 1) */
    bool done;
    uint64_t rounds;
    uint16_t *sel;
} RecursiveOp;

static int rec_open(SqlOp *op, SqlCtx *cx)
{
    RecursiveOp *r = (RecursiveOp *)op;
    r->cur = 0;
    r->done = false;
    r->rounds = 0;
    memset(&r->next, 0, sizeof r->next);
    r->next.width = op->width;
    r->wt->vals = NULL;
    r->wt->n = 0;
    r->wt->n_cols = op->width;
    if (!r->sel && !(r->sel = qr_arena_alloc(cx->arena, SQL_BATCH_ROWS * sizeof *r->sel)))
        return sql_nomem(cx);
    int rc = r->distinct ? sql_rowhash_init(cx, &r->seen, op->width) : QR_OK;
    return rc ? rc : sql_op_open(op->kids[0], cx);
}

/* 54000 naming the query, when keeping a row went over the budget. */
static int over_budget(RecursiveOp *r, SqlCtx *cx)
{
    qr_error_clear(cx->err);
    sql_err_at(cx, -1, QR_ELIMIT, "54000",
               "recursive query \"%s\" exceeded the memory limit after %" PRIu64 " rounds", r->name,
               r->rounds);
    qr_error_hint(cx->err, "make the recursive term stop (a condition on the working table), use "
                           "UNION instead of UNION ALL to drop repeated rows, or raise quarry.mem_cap");
    return cx->err->code;
}

/* Keep the live rows of b that are new (all of them for UNION ALL) in the
 * next working table; b's selection narrows to them.  How many. */
static int keep_rows(RecursiveOp *r, SqlCtx *cx, SqlBatch *b, int *kept)
{
    int k = 0, rc = sql_batch_fill(cx, b);
    for (int i = 0; i < b->n && rc == QR_OK; i++) {
        const SqlValue *row = sql_batch_row(b, i);
        if (r->distinct) {
            int64_t idx;
            bool fresh;
            if ((rc = sql_rowhash_put(cx, &r->seen, row, true, &idx, &fresh)) || !fresh)
                continue;
        }
        SqlValue *o = sql_sink_slot(cx, &r->next);
        if (!o) {
            rc = cx->err->code;
            break;
        }
        memcpy(o, row, (size_t)r->op.width * sizeof *o);
        for (int c = 0; c < r->op.width && rc == QR_OK; c++)
            rc = sqlv_own(cx, &o[c]);
        r->next.n++;
        r->sel[k++] = (uint16_t)sql_batch_at(b, i);
    }
    if (rc == QR_ELIMIT && qr_arena_over_cap(cx->arena))
        return over_budget(r, cx);
    *kept = k;
    return rc;
}

static int rec_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    RecursiveOp *r = (RecursiveOp *)op;
    *out = NULL;
    while (!r->done) {
        SqlBatch *b;
        int rc = sql_op_next(op->kids[r->cur], cx, &b), k = 0;
        if (rc)
            return rc;
        if (b) {
            if ((rc = keep_rows(r, cx, b, &k)) || (rc = sql_batch_narrow(cx, b, r->sel, k, out)) || *out)
                return rc;
            continue;
        }
        /* the term is exhausted: the next round reads what this one made */
        sql_op_close(op->kids[r->cur], cx);
        if (r->next.n == 0) {
            r->done = true;
            break;
        }
        r->wt->vals = r->next.rows;
        r->wt->n = r->next.n;
        memset(&r->next, 0, sizeof r->next);
        r->next.width = op->width;
        r->rounds++;
        r->cur = 1;
        if ((rc = sql_check_now(cx)) || (rc = sql_op_open(op->kids[1], cx)))
            return rc;
    }
    return QR_OK;
}

static void rec_close(SqlOp *op, SqlCtx *cx)
{
    for (int i = 0; i < 2; i++)
        if (op->kids[i]->st.open)
            sql_op_close(op->kids[i], cx);
}

static void rec_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    const RecursiveOp *r = (const RecursiveOp *)op;
    sql_explain_type(n, "Recursive Union", NULL, NULL);
    sql_explain_actual(n, cx, "Rounds", "%" PRIu64, r->rounds);
}

static const SqlOpVt REC_VT = {"recursive", rec_open, rec_next, rec_close, rec_explain};

SqlOp *sql_op_recursive(SqlCtx *cx, SqlOp *init, SqlOp *step, SqlRowSet *wt, int width,
                        bool distinct, const char *name)
{
    RecursiveOp *r = sql_op_new(cx, sizeof *r, &REC_VT, init, step, width);
    if (!r)
        return NULL;
    r->wt = wt;
    r->distinct = distinct;
    r->name = name;
    r->op.est_rows = init->est_rows * 10 + 1;
    r->op.total_cost = init->total_cost + step->total_cost * 10;
    return &r->op;
}
