/*
 * op_unique.c — DISTINCT: the first row of every set of rows equal in
 * their first `key_width` values (NULL equals NULL here, as DISTINCT
 * treats them), by a hash of those values; DISTINCT ON: in the columns
 * given, over rows sorted by ORDER BY, so the row kept is the first in that
 * order.  Rows pass through in input order; the seen set keeps owned copies
 * of the keys.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

#include <string.h>

typedef struct UniqueOp {
    SqlOp op;
    int key_width;
    const int *cols;          /* DISTINCT ON: the key columns (key_width); NULL: the first ones */
    int64_t *slots;           /* arena: index into keys, -1 empty */
    uint64_t cap, n;
    SqlValue *keys;           /* arena: n * key_width */
    uint64_t *hashes;
    uint64_t kcap;
    uint16_t *sel;
} UniqueOp;

static int grow(UniqueOp *u, SqlCtx *cx)
{
    uint64_t nc = u->cap ? u->cap * 2 : 256;
    int64_t *ns = qr_arena_alloc(cx->arena, nc * sizeof *ns);
    if (!ns)
        return sql_nomem(cx);
    memset(ns, 0xff, nc * sizeof *ns);
    for (uint64_t i = 0; i < u->n; i++) {
        uint64_t p = u->hashes[i] & (nc - 1);
        while (ns[p] >= 0)
            p = (p + 1) & (nc - 1);
        ns[p] = (int64_t)i;
    }
    u->slots = ns;
    u->cap = nc;
    return QR_OK;
}

/* Insert the row's key if new: *fresh tells. */
static int insert(UniqueOp *u, SqlCtx *cx, const SqlValue *row, bool *fresh)
{
    int K = u->key_width;
    SqlValue kv[64];
    if (u->cols) { /* the key columns side by side */
        for (int c = 0; c < K; c++)
            kv[c] = row[u->cols[c]];
        row = kv;
    }
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int c = 0; c < K; c++)
        h = h * 31 + sqlv_hash(&row[c]);
    uint64_t p = h & (u->cap - 1);
    for (; u->slots[p] >= 0; p = (p + 1) & (u->cap - 1)) {
        uint64_t i = (uint64_t)u->slots[p];
        if (u->hashes[i] != h)
            continue;
        bool same = true;
        for (int c = 0; c < K && same; c++)
            same = sqlv_same(&u->keys[i * (uint64_t)K + (uint64_t)c], &row[c]);
        if (same) {
            *fresh = false;
            return QR_OK;
        }
    }
    if (u->n == u->kcap) {
        uint64_t nc = u->kcap ? u->kcap * 2 : 256;
        SqlValue *nk = qr_arena_alloc(cx->arena, (nc * (uint64_t)K + 1) * sizeof *nk);
        uint64_t *nh = qr_arena_alloc(cx->arena, nc * sizeof *nh);
        if (!nk || !nh)
            return sql_nomem(cx);
        if (u->n) {
            memcpy(nk, u->keys, u->n * (uint64_t)K * sizeof *nk);
            memcpy(nh, u->hashes, u->n * sizeof *nh);
        }
        u->keys = nk;
        u->hashes = nh;
        u->kcap = nc;
    }
    SqlValue *k = u->keys + u->n * (uint64_t)K;
    memcpy(k, row, (size_t)K * sizeof *k);
    for (int c = 0; c < K; c++)
        if (sqlv_own(cx, &k[c]))
            return cx->err->code;
    u->hashes[u->n] = h;
    u->slots[p] = (int64_t)u->n++;
    *fresh = true;
    return u->n * 2 > u->cap ? grow(u, cx) : QR_OK;
}

static int unique_open(SqlOp *op, SqlCtx *cx)
{
    UniqueOp *u = (UniqueOp *)op;
    u->n = u->cap = u->kcap = 0;
    u->keys = NULL;
    u->hashes = NULL;
    int rc = grow(u, cx);
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
            if ((rc = insert(u, cx, sql_batch_row(b, i), &fresh)) == QR_OK && fresh)
                u->sel[k++] = (uint16_t)sql_batch_at(b, i);
        }
        if (rc)
            return rc;
        if (k == 0) {
            if ((rc = sql_check_now(cx)))
                return rc;
            continue;
        }
        b->sel = u->sel;
        b->n = k;
        *out = b;
        return QR_OK;
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
