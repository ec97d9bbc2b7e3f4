/*
 * exec.c — the operator driver (timing and counters around every open /
 * next / close, for EXPLAIN ANALYZE) and the batch helpers of exec.h.
 *
 * Layer: query/ (SQL execution).  Calls the operators through their vtables
 * and the SQL engine's expressions and values.
 */
#include "query/exec/exec.h"

#include <string.h>

#include "store/util.h"

/* ---- operators ---- */

int sql_nomem(SqlCtx *cx)
{
    sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    if (cx->err->hint[0] == 0)
        qr_error_hint(cx->err, "raise quarry.mem_cap or narrow the query");
    return cx->err->code;
}

void *sql_op_new(SqlCtx *cx, size_t size, const SqlOpVt *vt, SqlOp *kid0, SqlOp *kid1, int width)
{
    SqlOp *op = qr_arena_calloc(cx->arena, size);
    if (!op) {
        sql_nomem(cx);
        return NULL;
    }
    op->vt = vt;
    op->kids[0] = kid0;
    op->kids[1] = kid1;
    op->n_kids = kid1 ? 2 : kid0 ? 1 : 0;
    op->width = width;
    if (kid0) {
        op->est_rows = kid0->est_rows;
        op->startup_cost = kid0->startup_cost;
        op->total_cost = kid0->total_cost;
    }
    return op;
}

int sql_conj_test(SqlCtx *cx, SqlExpr *const *conj, int n, const SqlEvalRow *er, bool *pass)
{
    int rc = QR_OK;
    *pass = true;
    QrArenaMark m = qr_arena_mark(cx->arena);
    for (int i = 0; i < n && *pass && rc == QR_OK; i++)
        rc = sql_expr_test(cx, conj[i], er, pass);
    if (rc == QR_OK)
        qr_arena_release(cx->arena, m);
    return rc;
}

SqlBatch *sql_batch_dense(SqlBatch *b, int k)
{
    b->n = b->n_phys = k;
    b->sel = NULL;
    b->src = NULL;
    b->stable = false;
    return b;
}

QrArena *sql_op_scratch(SqlCtx *cx, QrArena **slot)
{
    if (!*slot && !(*slot = qr_arena_new_child(cx->arena)))
        sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    return *slot;
}

int sql_batch_keep(SqlCtx *cx, SqlBatch *b, int k, SqlExpr *const *conj, int n_conj, uint16_t *sel)
{
    int n = 0, rc = QR_OK;
    for (int i = 0; i < k && rc == QR_OK; i++) {
        bool pass = true;
        if (n_conj == 0) {
            sel[n++] = (uint16_t)i;
            continue;
        }
        SqlEvalRow er = {.row = b->rows + (size_t)i * (size_t)b->width, .doc = -1};
        rc = sql_conj_test(cx, conj, n_conj, &er, &pass);
        if (pass)
            sel[n++] = (uint16_t)i;
    }
    if (rc)
        return -1;
    sql_batch_dense(b, k);
    b->n = n;
    b->sel = n == k ? NULL : sel;
    return n;
}

int sql_batch_narrow(SqlCtx *cx, SqlBatch *b, uint16_t *sel, int k, SqlBatch **out)
{
    *out = NULL;
    if (k == 0)
        return sql_check_now(cx);
    b->sel = sel;
    b->n = k;
    *out = b;
    return QR_OK;
}

void sql_batch_place(SqlBatch *b, int i, const SqlValue *vals, int n_cols, int first)
{
    SqlValue *row = b->rows + (size_t)i * (size_t)b->width;
    for (int c = 0; c < b->width; c++)
        row[c] = sqlv_null();
    memcpy(row + first, vals, (size_t)n_cols * sizeof *row);
}

/* ---- row hash sets ---- */

static int rowhash_grow(SqlCtx *cx, SqlRowHash *h)
{
    uint64_t nc = h->cap ? h->cap * 2 : 256;
    int64_t *ns = qr_arena_alloc(cx->arena, nc * sizeof *ns);
    if (!ns)
        return sql_nomem(cx);
    memset(ns, 0xff, nc * sizeof *ns);
    for (uint64_t i = 0; i < h->n; i++) {
        uint64_t p = h->hashes[i] & (nc - 1);
        while (ns[p] >= 0)
            p = (p + 1) & (nc - 1);
        ns[p] = (int64_t)i;
    }
    h->slots = ns;
    h->cap = nc;
    return QR_OK;
}

int sql_rowhash_init(SqlCtx *cx, SqlRowHash *h, int width)
{
    memset(h, 0, sizeof *h);
    h->width = width;
    return rowhash_grow(cx, h);
}

int sql_rowhash_put(SqlCtx *cx, SqlRowHash *h, const SqlValue *row, bool add, int64_t *idx,
                    bool *fresh)
{
    int K = h->width;
    uint64_t hv = 0x9e3779b97f4a7c15ull;
    for (int c = 0; c < K; c++)
        hv = hv * 31 + sqlv_hash(&row[c]);
    uint64_t p = hv & (h->cap - 1);
    *fresh = false;
    for (; h->slots[p] >= 0; p = (p + 1) & (h->cap - 1)) {
        uint64_t i = (uint64_t)h->slots[p];
        if (h->hashes[i] != hv)
            continue;
        bool same = true;
        for (int c = 0; c < K && same; c++)
            same = sqlv_same(&h->keys[i * (uint64_t)K + (uint64_t)c], &row[c]);
        if (same) {
            *idx = (int64_t)i;
            return QR_OK;
        }
    }
    *idx = -1;
    if (!add)
        return QR_OK;
    if (h->n == h->kcap) {
        uint64_t nc = h->kcap ? h->kcap * 2 : 256;
        SqlValue *nk = qr_arena_alloc(cx->arena, (nc * (uint64_t)K + 1) * sizeof *nk);
        uint64_t *nh = qr_arena_alloc(cx->arena, nc * sizeof *nh);
        if (!nk || !nh)
            return sql_nomem(cx);
        if (h->n) {
            memcpy(nk, h->keys, h->n * (uint64_t)K * sizeof *nk);
            memcpy(nh, h->hashes, h->n * sizeof *nh);
        }
        h->keys = nk;
        h->hashes = nh;
        h->kcap = nc;
    }
    SqlValue *k = h->keys + h->n * (uint64_t)K;
    memcpy(k, row, (size_t)K * sizeof *k);
    for (int c = 0; c < K; c++)
        if (sqlv_own(cx, &k[c]))
            return cx->err->code;
    h->hashes[h->n] = hv;
    h->slots[p] = (int64_t)h->n;
    *idx = (int64_t)h->n++;
    *fresh = true;
    return h->n * 2 > h->cap ? rowhash_grow(cx, h) : QR_OK;
}

/* ---- driver ---- */

int sql_op_open(SqlOp *op, SqlCtx *cx)
{
    uint64_t t0 = qr_now_ns();
    op->st.loops++;
    op->st.first_seen = false;
    op->st.ns_loop0 = op->st.ns_total;
    int rc = sql_check_now(cx);
    if (rc == QR_OK)
        rc = op->vt->open(op, cx);
    op->st.open = rc == QR_OK;
    op->st.ns_total += qr_now_ns() - t0;
    return rc;
}

int sql_op_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    *out = NULL;
    uint64_t t0 = qr_now_ns();
    int rc = sql_check_now(cx); /* a batch is long enough to look at the clock */
    if (rc == QR_OK)
        rc = op->vt->next(op, cx, out);
    if (rc != QR_OK)
        *out = NULL;
    uint64_t dt = qr_now_ns() - t0;
    op->st.ns_total += dt;
    if (!op->st.first_seen) {
        op->st.first_seen = true;
        op->st.ns_first += op->st.ns_total - op->st.ns_loop0;
    }
    if (*out)
        op->st.rows += (uint64_t)(*out)->n;
    return rc;
}

void sql_op_close(SqlOp *op, SqlCtx *cx)
{
    if (!op)
        return;
    op->vt->close(op, cx);
    op->st.open = false;
}

int sql_op_drain(SqlOp *root, SqlCtx *cx, SqlRowSink *s)
{
    int rc = sql_op_open(root, cx);
    while (rc == QR_OK) {
        SqlBatch *b;
        if ((rc = sql_op_next(root, cx, &b)) || !b)
            break;
        rc = sql_sink_batch(cx, s, b);
    }
    sql_op_close(root, cx);
    return rc;
}

/* ---- batches ---- */

SqlBatch *sql_batch_new(SqlCtx *cx, int width)
{
    SqlBatch *b = qr_arena_calloc(cx->arena, sizeof *b);
    if (b) {
        b->width = width;
        b->rows = qr_arena_alloc(cx->arena, ((size_t)SQL_BATCH_ROWS * (size_t)width + 1) * sizeof *b->rows);
    }
    if (!b || !b->rows) {
        sql_nomem(cx);
        return NULL;
    }
    return b;
}

int sql_batch_need(SqlCtx *cx, SqlBatch *b, const int *cols, int n)
{
    if (!b->src)
        return QR_OK;
    for (int i = 0; i < n; i++) {
        int c = cols[i];
        if (b->filled[c] || c < b->src->first || c >= b->src->first + b->src->n_cols)
            continue;
        int rc = b->src->fill(b->src, cx, b, c);
        if (rc)
            return rc;
        b->filled[c] = 1;
    }
    return QR_OK;
}

int sql_batch_fill(SqlCtx *cx, SqlBatch *b)
{
    return b->src ? sql_batch_need(cx, b, b->src->used, b->src->n_used) : QR_OK;
}

int sql_expr_cols(const SqlExpr *e, uint8_t *marks)
{
    if (!e)
        return 0;
    int n = 0;
    switch (e->kind) {
    case SE_COL:
    case SE_SCORE:
    case SE_SNIPPET:
        n += !marks[e->col];
        marks[e->col] = 1;
        break;
    case SE_MATCH:
        n += !marks[e->text->id_col];
        marks[e->text->id_col] = 1;
        break;
    default:
        break;
    }
    for (int i = 0; i < e->n_args; i++)
        n += sql_expr_cols(e->args[i], marks);
    return n;
}

int *sql_cols_list(SqlCtx *cx, const uint8_t *marks, int width, int *n)
{
    int k = 0;
    for (int c = 0; c < width; c++)
        k += marks[c] != 0;
    int *v = qr_arena_alloc(cx->arena, ((size_t)k + 1) * sizeof *v);
    if (!v) {
        sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
        return NULL;
    }
    k = 0;
    for (int c = 0; c < width; c++)
        if (marks[c])
            v[k++] = c;
    *n = k;
    return v;
}

int sql_sink_batch(SqlCtx *cx, SqlRowSink *s, SqlBatch *b)
{
    int rc = sql_batch_fill(cx, b);
    if (rc)
        return rc;
    for (int i = 0; i < b->n; i++) {
        SqlValue *o = sql_sink_slot(cx, s);
        if (!o)
            return cx->err->code;
        memcpy(o, sql_batch_row(b, i), (size_t)s->width * sizeof *o);
        for (int c = 0; c < s->width && !b->stable; c++)
            if (sqlv_own(cx, &o[c]))
                return cx->err->code;
        s->n++;
    }
    return QR_OK;
}
