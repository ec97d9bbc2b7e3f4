/*
 * op_hash_join.c — equality joins: the inner child's rows are read and
 * hashed on their keys first, then each outer row probes the table and is
 * joined to every inner row whose keys (and the join's other conditions)
 * match.  LEFT: an outer row without a match comes out once, its inner
 * columns NULL.  A NULL key never matches.
 *
 * Rows are scope-wide (exec.h): an output row is the outer row with the
 * inner side's column range copied in.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

#include <inttypes.h>
#include <string.h>

typedef struct HashJoinOp {
    SqlOp op;
    SqlJoinSpec js;
    SqlRowSink inner;         /* the inner rows, owned */
    int64_t *slots, *chain;   /* arena */
    uint64_t *hashes;
    uint64_t cap;
    /* probing, resumable when the output batch fills */
    SqlBatch *in;             /* the outer batch (borrowed until its next) */
    int in_pos;
    bool probing;             /* a probe of outer row in_pos is under way */
    int64_t cand;             /* next candidate in the chain, -1 none */
    uint64_t h;
    bool matched;
    SqlBatch *b;
    uint64_t n_pairs;         /* pairs tested (EXPLAIN ANALYZE) */
} HashJoinOp;

static int key_hash(SqlCtx *cx, SqlExpr *const *k, int n, const SqlValue *row, uint64_t *h,
                    bool *null_key)
{
    SqlEvalRow er = {.row = row, .doc = -1};
    *h = 0;
    *null_key = false;
    for (int i = 0; i < n; i++) {
        SqlValue v;
        int rc = sql_expr_eval(cx, k[i], &er, &v);
        if (rc)
            return rc;
        *null_key |= v.is_null;
        *h = *h * 31 + sqlv_hash(&v);
    }
    return QR_OK;
}

static int hj_open(SqlOp *op, SqlCtx *cx)
{
    HashJoinOp *j = (HashJoinOp *)op;
    int W = op->width, rc;
    memset(&j->inner, 0, sizeof j->inner);
    j->inner.width = W;
    j->in = NULL;
    j->probing = false;
    j->n_pairs = 0;
    if (!j->b && !(j->b = sql_batch_new(cx, W)))
        return cx->err->code;
    if ((rc = sql_op_drain(op->kids[1], cx, &j->inner)))
        return rc;
    uint64_t rn = j->inner.n;
    j->cap = 16;
    while (j->cap < rn * 2)
        j->cap <<= 1;
    j->slots = qr_arena_alloc(cx->arena, j->cap * sizeof *j->slots);
    j->chain = qr_arena_alloc(cx->arena, (rn + 1) * sizeof *j->chain);
    j->hashes = qr_arena_alloc(cx->arena, (rn + 1) * sizeof *j->hashes);
    if (!j->slots || !j->chain || !j->hashes)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    memset(j->slots, 0xff, j->cap * sizeof *j->slots);
    for (uint64_t r = 0; r < rn; r++) {
        uint64_t h;
        bool null_key;
        QrArenaMark m = qr_arena_mark(cx->arena);
        if ((rc = key_hash(cx, j->js.rk, j->js.n_keys, j->inner.rows + r * (uint64_t)W, &h, &null_key)))
            return rc;
        qr_arena_release(cx->arena, m);
        j->hashes[r] = h;
        j->chain[r] = -1;
        if (null_key)
            continue; /* NULL never equals: the row can only be unmatched */
        uint64_t p = h & (j->cap - 1);
        j->chain[r] = j->slots[p];
        j->slots[p] = (int64_t)r;
    }
    return sql_op_open(op->kids[0], cx);
}

/* Test candidate inner row c against the output row o (the outer row). */
static int hj_pair(HashJoinOp *j, SqlCtx *cx, SqlValue *o, uint64_t c, bool *pass)
{
    const SqlJoinSpec *js = &j->js;
    j->n_pairs++;
    return sql_join_pair(cx, js, o, j->inner.rows + c * (uint64_t)j->op.width, pass);
}

static int hj_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    HashJoinOp *j = (HashJoinOp *)op;
    const SqlJoinSpec *js = &j->js;
    SqlBatch *o = j->b;
    int W = op->width, k = 0, rc = QR_OK;
    while (k < SQL_BATCH_ROWS && rc == QR_OK) {
        if (!j->probing) {
            if (!j->in || j->in_pos >= j->in->n) {
                if (k > 0)
                    break;
                if ((rc = sql_op_next(op->kids[0], cx, &j->in)) || !j->in)
                    break;
                j->in_pos = 0;
                if ((rc = sql_batch_fill(cx, j->in)))
                    break;
            }
            const SqlValue *lrow = sql_batch_row(j->in, j->in_pos);
            bool null_key;
            j->cand = -1;
            j->matched = false;
            j->probing = true;
            QrArenaMark m = qr_arena_mark(cx->arena);
            if ((rc = key_hash(cx, js->lk, js->n_keys, lrow, &j->h, &null_key)))
                break;
            qr_arena_release(cx->arena, m);
            if (!null_key)
                j->cand = j->slots[j->h & (j->cap - 1)];
        }
        const SqlValue *lrow = sql_batch_row(j->in, j->in_pos);
        SqlValue *x = o->rows + (size_t)k * (size_t)W;
        while (j->cand >= 0 && j->hashes[j->cand] != j->h)
            j->cand = j->chain[j->cand];
        if (j->cand >= 0) {
            uint64_t c = (uint64_t)j->cand;
            j->cand = j->chain[c];
            memcpy(x, lrow, (size_t)W * sizeof *x);
            bool pass;
            if ((rc = hj_pair(j, cx, x, c, &pass)))
                break;
            if (pass) {
                j->matched = true;
                k++;
            }
            continue;
        }
        /* the probe of this outer row is over */
        j->probing = false;
        j->in_pos++;
        if (js->left && !j->matched) {
            sql_join_unmatched(js, x, lrow, W);
            k++;
        }
    }
    *out = rc || k == 0 ? NULL : sql_batch_dense(o, k);
    return rc;
}

static void hj_close(SqlOp *op, SqlCtx *cx)
{
    HashJoinOp *j = (HashJoinOp *)op;
    j->in = NULL;
    sql_op_close(op->kids[0], cx);
}

int sql_join_pair(SqlCtx *cx, const SqlJoinSpec *js, SqlValue *o, const SqlValue *inner, bool *pass)
{
    memcpy(o + js->first, inner + js->first, (size_t)js->n_cols * sizeof *o);
    SqlEvalRow er = {.row = o, .doc = -1};
    return sql_conj_test(cx, js->cond, js->n_cond, &er, pass);
}

void sql_join_unmatched(const SqlJoinSpec *js, SqlValue *o, const SqlValue *outer, int width)
{
    memcpy(o, outer, (size_t)width * sizeof *o);
    for (int c = js->first; c < js->first + js->n_cols; c++)
        o[c] = sqlv_null();
}

void sql_join_explain(SqlCtx *cx, SqlExplainNode *n, const SqlJoinSpec *js, uint64_t pairs)
{
    if (js->n_keys) {
        QrBuf b;
        qr_buf_init(&b);
        for (int i = 0; i < js->n_keys; i++)
            qr_buf_printf(&b, "%s(%s = %s)", i ? " AND " : "", sql_expr_sql(cx, js->lk[i], NULL, true),
                          sql_expr_sql(cx, js->rk[i], NULL, true));
        sql_explain_prop(n, cx, "Hash Cond", "%.*s", (int)b.len, (char *)b.data);
        qr_buf_free(&b);
    }
    SqlExpr *rest[64];
    int n_rest = 0;
    for (int i = 0; i < js->n_cond && n_rest < 64; i++) {
        const SqlExpr *e = js->cond[i];
        bool key = false;
        for (int k = 0; k < js->n_keys && !key; k++)
            key = e->kind == SE_CMP && e->n_args == 2 &&
                  ((e->args[0] == js->lk[k] && e->args[1] == js->rk[k]) ||
                   (e->args[1] == js->lk[k] && e->args[0] == js->rk[k]));
        if (!key)
            rest[n_rest++] = js->cond[i];
    }
    if (n_rest)
        sql_explain_prop(n, cx, "Join Filter", "%s", sql_conj_sql(cx, rest, n_rest, NULL, true));
    sql_explain_actual(n, cx, "Pairs Tested", "%" PRIu64, pairs);
}

static void hj_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    const HashJoinOp *j = (const HashJoinOp *)op;
    sql_explain_type(n, j->js.left ? "Hash Left Join" : "Hash Join", NULL, NULL);
    sql_join_explain(cx, n, &j->js, j->n_pairs);
}

static const SqlOpVt HJ_VT = {"hash_join", hj_open, hj_next, hj_close, hj_explain};

SqlOp *sql_op_hash_join(SqlCtx *cx, SqlOp *outer, SqlOp *inner, const SqlJoinSpec *spec)
{
    HashJoinOp *j = sql_op_new(cx, sizeof *j, &HJ_VT, outer, inner, outer->width);
    if (!j)
        return NULL;
    j->js = *spec;
    double out = outer->est_rows > inner->est_rows ? outer->est_rows : inner->est_rows;
    j->op.est_rows = out;
    j->op.startup_cost = inner->total_cost + inner->est_rows * 0.05;
    j->op.total_cost = j->op.startup_cost + outer->total_cost + outer->est_rows * 0.05 + out * 0.01;
    return &j->op;
}
