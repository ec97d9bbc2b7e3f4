/*
 * op_setop.c — INTERSECT and EXCEPT, with and without ALL, as
 * PostgreSQL's HashSetOp: the left child's rows are counted per distinct
 * row in a hash table (their first `width` values; NULLs equal each other),
 * then the right child's rows stream against it, counted where they find
 * their row (a row only the right side has is dropped at once).  Then each
 * distinct left row comes out, in the order first seen, as many times as
 * the operation says: INTERSECT once when both sides have it, INTERSECT
 * ALL min(l, r) times; EXCEPT once when only the left has it, EXCEPT ALL
 * max(l - r, 0) times.
 *
 * Memory: the distinct left rows and two counts each.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

#include <inttypes.h>
#include <string.h>

typedef struct SetOpOp {
    SqlOp op;
    bool except, all;
    SqlRowHash rows;          /* distinct left rows (arena) */
    uint64_t (*counts)[2];    /* arena: per row, left and right counts */
    uint64_t cap;
    uint64_t pos, rep;        /* emitting: row, copies of it given */
    SqlBatch *b;
} SetOpOp;

/* Count the rows of one kid: side 0 adds rows, side 1 only counts. */
static int count_side(SetOpOp *s, SqlCtx *cx, int side)
{
    SqlOp *kid = s->op.kids[side];
    int rc = sql_op_open(kid, cx);
    while (rc == QR_OK) {
        SqlBatch *b;
        if ((rc = sql_op_next(kid, cx, &b)) || !b || (rc = sql_batch_fill(cx, b)))
            break;
        for (int i = 0; i < b->n && rc == QR_OK; i++) {
            int64_t idx;
            bool fresh;
            if ((rc = sql_rowhash_put(cx, &s->rows, sql_batch_row(b, i), side == 0, &idx, &fresh)) ||
                idx < 0)
                continue;
            if ((uint64_t)idx >= s->cap) {
                uint64_t nc = s->cap ? s->cap * 2 : 256;
                uint64_t(*n)[2] = qr_arena_calloc(cx->arena, nc * sizeof *n);
                if (!n) {
                    rc = sql_nomem(cx);
                    break;
                }
                if (s->cap)
                    memcpy(n, s->counts, s->cap * sizeof *n);
                s->counts = n;
                s->cap = nc;
            }
            s->counts[idx][side]++;
        }
    }
    sql_op_close(kid, cx);
    return rc;
}

static int setop_open(SqlOp *op, SqlCtx *cx)
{
    SetOpOp *s = (SetOpOp *)op;
    s->pos = s->rep = 0;
    s->cap = 0;
    s->counts = NULL;
    if (!s->b && !(s->b = sql_batch_new(cx, op->width)))
        return cx->err->code;
    int rc = sql_rowhash_init(cx, &s->rows, op->width);
    if (rc == QR_OK)
        rc = count_side(s, cx, 0);
    if (rc == QR_OK)
        rc = count_side(s, cx, 1);
    return rc;
}

/* How many copies of row i the operation hands out. */
static uint64_t copies(const SetOpOp *s, uint64_t i)
{
    uint64_t l = s->counts[i][0], r = s->counts[i][1];
    if (s->except)
        return s->all ? (l > r ? l - r : 0) : (l > 0 && r == 0);
    return s->all ? (l < r ? l : r) : (l > 0 && r > 0);
}

static int setop_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    SetOpOp *s = (SetOpOp *)op;
    int W = op->width, k = 0;
    (void)cx;
    while (k < SQL_BATCH_ROWS && s->pos < s->rows.n) {
        if (s->rep >= copies(s, s->pos)) {
            s->pos++;
            s->rep = 0;
            continue;
        }
        memcpy(s->b->rows + (size_t)k * (size_t)W, s->rows.keys + s->pos * (uint64_t)W,
               (size_t)W * sizeof(SqlValue));
        s->rep++;
        k++;
    }
    *out = k ? sql_batch_dense(s->b, k) : NULL;
    return QR_OK;
}

static void setop_close(SqlOp *op, SqlCtx *cx)
{
    (void)op;
    (void)cx;
}

static void setop_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    const SetOpOp *s = (const SetOpOp *)op;
    static const char *const NAMES[2][2] = {{"HashSetOp Intersect", "HashSetOp Intersect All"},
                                            {"HashSetOp Except", "HashSetOp Except All"}};
    sql_explain_type(n, NAMES[s->except][s->all], NULL, NULL);
    sql_explain_actual(n, cx, "Distinct Left Rows", "%" PRIu64, s->rows.n);
}

static const SqlOpVt SETOP_VT = {"setop", setop_open, setop_next, setop_close, setop_explain};

SqlOp *sql_op_setop(SqlCtx *cx, SqlOp *left, SqlOp *right, int width, bool except, bool all)
{
    SetOpOp *s = sql_op_new(cx, sizeof *s, &SETOP_VT, left, right, width);
    if (!s)
        return NULL;
    s->except = except;
    s->all = all;
    double r = right->est_rows;
    s->op.est_rows = except ? left->est_rows : (left->est_rows < r ? left->est_rows : r);
    s->op.startup_cost = left->total_cost + right->total_cost + (left->est_rows + r) * 0.05;
    s->op.total_cost = s->op.startup_cost + s->op.est_rows * 0.01;
    return &s->op;
}
