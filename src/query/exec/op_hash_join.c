/*
 * op_hash_join.c — joins: the inner child's rows are read (and hashed on
 * their keys) first, then each outer row probes them and is joined to
 * every inner row whose keys are equal (sqlv_cmp) and for which the join's
 * other conditions hold.  A NULL key never matches.  Without keys the join
 * is a nested loop: every inner row is a candidate, and the pairs tested
 * are bounded (54000 past SQL_NL_PAIRS_MAX) so that a mistaken cross join
 * fails clearly instead of running for hours.
 *
 * Join types (exec.h SqlJoinType): LEFT hands out an outer row without a
 * match once, its inner columns NULL; RIGHT marks the inner rows that found
 * a partner and, once the outer side is exhausted, hands out the others
 * with every other column NULL; FULL does both.  SEMI and ANTI hand out the
 * outer rows themselves (the outer batch, narrowed by its selection
 * vector, so columns not read yet stay late): those with a match (SEMI) or
 * without one (ANTI).
 *
 * Rows are scope-wide (exec.h): an output row is the outer row with the
 * inner side's column range copied in, then the merged columns of
 * JOIN ... USING computed.
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

#include <inttypes.h>
#include <string.h>

#define SQL_NL_PAIRS_MAX 50000000ull

typedef struct HashJoinOp {
    SqlOp op;
    SqlJoinSpec js;
    bool nested;              /* no keys: every inner row is a candidate */
    SqlRowSink inner;         /* the inner rows (kids[1]'s width), owned */
    SqlValue *ikeys;          /* arena: their key values, n_keys per row */
    int64_t *slots, *chain;   /* arena: bucket -> first row, row -> next (-1 ends) */
    uint64_t *hashes;
    uint64_t cap;
    uint8_t *matched;         /* RIGHT / FULL: inner rows that found a partner */
    QrArena *scratch;         /* owns: the probing outer row's key values */
    SqlValue okeys[SQL_JOIN_MAX_KEYS];
    int *ocols;               /* SEMI / ANTI: outer columns the keys and conditions read */
    int n_ocols;
    /* probing, resumable when the output batch fills */
    SqlBatch *in;             /* the outer batch (borrowed until its next) */
    int in_pos;
    bool probing;             /* the probe of outer row in_pos is under way */
    int64_t cand;             /* next candidate inner row, -1 none */
    uint64_t h;
    bool row_matched;
    bool outer_done;
    uint64_t tail;            /* RIGHT / FULL: next inner row of the unmatched pass */
    SqlBatch *b;
    SqlValue *tmp;            /* SEMI / ANTI: the joined row the conditions read */
    uint16_t *sel;
    uint64_t n_pairs;         /* pairs tested (EXPLAIN ANALYZE) */
} HashJoinOp;

static bool keeps_outer(SqlJoinType t) { return t == SQL_JOIN_LEFT || t == SQL_JOIN_FULL; }
static bool keeps_inner(SqlJoinType t) { return t == SQL_JOIN_RIGHT || t == SQL_JOIN_FULL; }
static bool filters_outer(SqlJoinType t) { return t == SQL_JOIN_SEMI || t == SQL_JOIN_ANTI; }

/* Evaluate key expressions over a row into v; *h their hash, *null_key
 * whether one is NULL. */
static int eval_keys(SqlCtx *cx, SqlExpr *const *k, int n, const SqlValue *row, SqlValue *v,
                     uint64_t *h, bool *null_key)
{
    SqlEvalRow er = {.row = row, .doc = -1};
    *h = 0;
    *null_key = false;
    for (int i = 0; i < n; i++) {
        int rc = sql_expr_eval(cx, k[i], &er, &v[i]);
        if (rc)
            return rc;
        *null_key |= v[i].is_null;
        *h = *h * 31 + sqlv_hash(&v[i]);
    }
    return QR_OK;
}

static int hj_build(HashJoinOp *j, SqlCtx *cx)
{
    const SqlJoinSpec *js = &j->js;
    int IW = j->inner.width, nk = js->n_keys, rc;
    uint64_t rn = j->inner.n;
    if (keeps_inner(js->type) && !(j->matched = qr_arena_calloc(cx->arena, rn + 1)))
        return sql_nomem(cx);
    if (j->nested)
        return QR_OK;
    j->cap = 16;
    while (j->cap < rn * 2)
        j->cap <<= 1;
    j->slots = qr_arena_alloc(cx->arena, j->cap * sizeof *j->slots);
    j->chain = qr_arena_alloc(cx->arena, (rn + 1) * sizeof *j->chain);
    j->hashes = qr_arena_alloc(cx->arena, (rn + 1) * sizeof *j->hashes);
    j->ikeys = qr_arena_alloc(cx->arena, (rn * (uint64_t)nk + 1) * sizeof *j->ikeys);
    if (!j->slots || !j->chain || !j->hashes || !j->ikeys)
        return sql_nomem(cx);
    memset(j->slots, 0xff, j->cap * sizeof *j->slots);
    for (uint64_t r = 0; r < rn; r++) {
        uint64_t h;
        bool null_key;
        /* key values stay: they are compared with every probe */
        if ((rc = eval_keys(cx, js->rk, nk, j->inner.rows + r * (uint64_t)IW, j->ikeys + r * (uint64_t)nk,
                            &h, &null_key)))
            return rc;
        j->hashes[r] = h;
        j->chain[r] = -1;
        if (null_key)
            continue; /* NULL never equals: the row can only be unmatched */
        uint64_t p = h & (j->cap - 1);
        j->chain[r] = j->slots[p];
        j->slots[p] = (int64_t)r;
        if ((r & 1023) == 1023 && (rc = sql_check_now(cx)))
            return rc;
    }
    return QR_OK;
}

static int hj_open(SqlOp *op, SqlCtx *cx)
{
    HashJoinOp *j = (HashJoinOp *)op;
    int W = op->width, rc;
    memset(&j->inner, 0, sizeof j->inner);
    j->inner.width = op->kids[1]->width;
    j->in = NULL;
    j->probing = j->outer_done = false;
    j->tail = 0;
    j->n_pairs = 0;
    j->matched = NULL;
    if (!j->b && !(j->b = sql_batch_new(cx, W)))
        return cx->err->code;
    if (!j->sel && !(j->sel = qr_arena_alloc(cx->arena, SQL_BATCH_ROWS * sizeof *j->sel)))
        return sql_nomem(cx);
    if (!j->tmp && !(j->tmp = qr_arena_alloc(cx->arena, ((size_t)W + 1) * sizeof *j->tmp)))
        return sql_nomem(cx);
    if (!j->nested && !j->scratch && !(j->scratch = qr_arena_new_child(cx->arena)))
        return sql_nomem(cx);
    if ((rc = sql_op_drain(op->kids[1], cx, &j->inner)) || (rc = hj_build(j, cx)))
        return rc;
    return sql_op_open(op->kids[0], cx);
}

/* Start probing with outer row `lrow`: its keys (in the scratch arena,
 * reset per row) and the first candidate. */
static int probe_start(HashJoinOp *j, SqlCtx *cx, const SqlValue *lrow)
{
    j->row_matched = false;
    if (j->nested) {
        j->cand = j->inner.n ? 0 : -1;
        return QR_OK;
    }
    bool null_key;
    qr_arena_reset(j->scratch);
    QrArena *saved = cx->arena;
    cx->arena = j->scratch;
    int rc = eval_keys(cx, j->js.lk, j->js.n_keys, lrow, j->okeys, &j->h, &null_key);
    cx->arena = saved;
    j->cand = rc || null_key ? -1 : j->slots[j->h & (j->cap - 1)];
    return rc;
}

/* The next candidate inner row whose keys equal the probing row's (-1:
 * none left); counts the pairs of a nested loop against its bound. */
static int next_cand(HashJoinOp *j, SqlCtx *cx, int64_t *out)
{
    *out = -1;
    if (j->nested) {
        if (j->cand < 0)
            return QR_OK;
        *out = j->cand;
        j->cand = (uint64_t)j->cand + 1 < j->inner.n ? j->cand + 1 : -1;
        if (++j->n_pairs > SQL_NL_PAIRS_MAX) {
            int rc = sql_err_at(cx, -1, QR_ELIMIT, "54000",
                                "join without an equality condition would compare more than %llu row pairs",
                                (unsigned long long)SQL_NL_PAIRS_MAX);
            qr_error_hint(cx->err, "add an equality condition between the joined tables");
            return rc;
        }
        return (j->n_pairs & 1023) == 0 ? sql_check_now(cx) : QR_OK;
    }
    int nk = j->js.n_keys;
    for (int64_t c = j->cand; c >= 0; c = j->chain[c]) {
        if (j->hashes[c] != j->h)
            continue;
        const SqlValue *ik = j->ikeys + (uint64_t)c * (uint64_t)nk;
        bool same = true;
        for (int i = 0; i < nk && same; i++)
            same = sqlv_cmp(&j->okeys[i], &ik[i]) == 0;
        if (same) {
            j->cand = j->chain[c];
            j->n_pairs++;
            *out = c;
            return QR_OK;
        }
    }
    j->cand = -1;
    return QR_OK;
}

static const SqlValue *inner_row(const HashJoinOp *j, int64_t c)
{
    return j->inner.rows + (uint64_t)c * (uint64_t)j->inner.width;
}

/* SEMI / ANTI: each outer batch narrowed to the rows with (without) a
 * match; at most one output row per input row, so no resumption. */
static int semi_next(HashJoinOp *j, SqlCtx *cx, SqlBatch **out)
{
    const SqlJoinSpec *js = &j->js;
    int W = j->op.width;
    for (;;) {
        SqlBatch *in;
        int rc = sql_op_next(j->op.kids[0], cx, &in);
        if (rc || !in)
            return rc;
        if ((rc = sql_batch_need(cx, in, j->ocols, j->n_ocols)))
            return rc;
        int k = 0;
        for (int i = 0; i < in->n && rc == QR_OK; i++) {
            const SqlValue *lrow = sql_batch_row(in, i);
            bool found = false;
            int64_t c;
            rc = probe_start(j, cx, lrow);
            while (rc == QR_OK && !found && (rc = next_cand(j, cx, &c)) == QR_OK && c >= 0) {
                if (js->n_cond == 0) {
                    found = true;
                    break;
                }
                memcpy(j->tmp, lrow, (size_t)W * sizeof *j->tmp);
                rc = sql_join_pair(cx, js, j->tmp, inner_row(j, c), &found);
            }
            if (found == (js->type == SQL_JOIN_SEMI))
                j->sel[k++] = (uint16_t)sql_batch_at(in, i);
        }
        if (rc || (rc = sql_batch_narrow(cx, in, j->sel, k, out)) || *out)
            return rc;
    }
}

static int hj_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    HashJoinOp *j = (HashJoinOp *)op;
    const SqlJoinSpec *js = &j->js;
    *out = NULL;
    if (filters_outer(js->type))
        return semi_next(j, cx, out);
    SqlBatch *o = j->b;
    int W = op->width, k = 0, rc = QR_OK;
    while (k < SQL_BATCH_ROWS && rc == QR_OK) {
        SqlValue *x = o->rows + (size_t)k * (size_t)W;
        if (j->outer_done) {
            /* RIGHT / FULL: the inner rows nothing matched */
            if (!keeps_inner(js->type) || j->tail >= j->inner.n)
                break;
            uint64_t t = j->tail++;
            if (!j->matched[t]) {
                rc = sql_join_unmatched(cx, js, x, NULL, inner_row(j, (int64_t)t), W);
                k++;
            }
            continue;
        }
        if (!j->probing) {
            if (!j->in || j->in_pos >= j->in->n) {
                if (k > 0)
                    break;
                if ((rc = sql_op_next(op->kids[0], cx, &j->in)))
                    break;
                if (!j->in) {
                    j->outer_done = true;
                    continue;
                }
                j->in_pos = 0;
                if ((rc = sql_batch_fill(cx, j->in)))
                    break;
            }
            if ((rc = probe_start(j, cx, sql_batch_row(j->in, j->in_pos))))
                break;
            j->probing = true;
        }
        const SqlValue *lrow = sql_batch_row(j->in, j->in_pos);
        int64_t c;
        if ((rc = next_cand(j, cx, &c)))
            break;
        if (c >= 0) {
            memcpy(x, lrow, (size_t)W * sizeof *x);
            bool pass;
            if ((rc = sql_join_pair(cx, js, x, inner_row(j, c), &pass)))
                break;
            if (pass) {
                j->row_matched = true;
                if (j->matched)
                    j->matched[c] = 1;
                k++;
            }
            continue;
        }
        /* the probe of this outer row is over */
        j->probing = false;
        j->in_pos++;
        if (keeps_outer(js->type) && !j->row_matched) {
            rc = sql_join_unmatched(cx, js, x, lrow, NULL, W);
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
    qr_arena_free(j->scratch);
    j->scratch = NULL;
    sql_op_close(op->kids[0], cx);
}

/* ---- shared by the joins ---- */

static int join_calc(SqlCtx *cx, const SqlJoinSpec *js, SqlValue *o)
{
    SqlEvalRow er = {.row = o, .doc = -1};
    for (int i = 0; i < js->n_calc; i++) {
        int rc = sql_expr_eval(cx, js->calc[i], &er, &o[js->calc_col[i]]);
        if (rc)
            return rc;
    }
    return QR_OK;
}

int sql_join_pair(SqlCtx *cx, const SqlJoinSpec *js, SqlValue *o, const SqlValue *inner, bool *pass)
{
    memcpy(o + js->first, inner + js->first, (size_t)js->n_cols * sizeof *o);
    int rc = join_calc(cx, js, o);
    if (rc)
        return rc;
    SqlEvalRow er = {.row = o, .doc = -1};
    return sql_conj_test(cx, js->cond, js->n_cond, &er, pass);
}

int sql_join_unmatched(SqlCtx *cx, const SqlJoinSpec *js, SqlValue *o, const SqlValue *outer,
                       const SqlValue *inner, int width)
{
    if (outer) {
        memcpy(o, outer, (size_t)width * sizeof *o);
        for (int c = js->first; c < js->first + js->n_cols; c++)
            o[c] = sqlv_null();
    } else {
        for (int c = 0; c < width; c++)
            o[c] = sqlv_null();
        memcpy(o + js->first, inner + js->first, (size_t)js->n_cols * sizeof *o);
    }
    return join_calc(cx, js, o);
}

void sql_join_explain(SqlCtx *cx, SqlExplainNode *n, const SqlJoinSpec *js, uint64_t pairs)
{
    if (js->cond_label) {
        sql_explain_prop(n, cx, "Hash Cond", "%s", js->cond_label);
    } else if (js->n_keys) {
        QrBuf b;
        qr_buf_init(&b);
        if (js->n_keys > 1)
            qr_buf_putc(&b, '(');
        for (int i = 0; i < js->n_keys; i++)
            qr_buf_printf(&b, "%s(%s = %s)", i ? " AND " : "", sql_expr_sql(cx, js->lk[i], NULL, true),
                          sql_expr_sql(cx, js->rk[i], NULL, true));
        if (js->n_keys > 1)
            qr_buf_putc(&b, ')');
        sql_explain_prop(n, cx, "Hash Cond", "%.*s", (int)b.len, b.data ? (char *)b.data : "");
        qr_buf_free(&b);
    }
    if (js->n_cond)
        sql_explain_prop(n, cx, "Join Filter", "%s", sql_conj_sql(cx, js->cond, js->n_cond, NULL, true));
    sql_explain_actual(n, cx, "Pairs Tested", "%" PRIu64, pairs);
}

static void hj_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    static const char *const HASH[] = {"Hash Join", "Hash Left Join", "Hash Right Join",
                                       "Hash Full Join", "Hash Semi Join", "Hash Anti Join"};
    static const char *const NL[] = {"Nested Loop", "Nested Loop Left Join", "Nested Loop Right Join",
                                     "Nested Loop Full Join", "Nested Loop Semi Join",
                                     "Nested Loop Anti Join"};
    const HashJoinOp *j = (const HashJoinOp *)op;
    sql_explain_type(n, (j->nested ? NL : HASH)[j->js.type], NULL, NULL);
    sql_join_explain(cx, n, &j->js, j->n_pairs);
}

static const SqlOpVt HJ_VT = {"hash_join", hj_open, hj_next, hj_close, hj_explain};

const SqlJoinSpec *sql_op_hash_join_spec(const SqlOp *op)
{
    const HashJoinOp *j = (const HashJoinOp *)op;
    return op && op->vt == &HJ_VT && !j->nested ? &j->js : NULL;
}

int sql_hash_join_each(SqlOp *op, SqlCtx *cx, const SqlValue *orow,
                       int (*fn)(void *arg, const SqlValue *row), void *arg)
{
    HashJoinOp *j = (HashJoinOp *)op;
    int rc = probe_start(j, cx, orow);
    int64_t c;
    while (rc == QR_OK && (rc = next_cand(j, cx, &c)) == QR_OK && c >= 0) {
        bool pass;
        memcpy(j->tmp, orow, (size_t)op->width * sizeof *j->tmp);
        if ((rc = sql_join_pair(cx, &j->js, j->tmp, inner_row(j, c), &pass)) == QR_OK && pass)
            rc = fn(arg, j->tmp);
    }
    return rc;
}

static HashJoinOp *join_new(SqlCtx *cx, SqlOp *outer, SqlOp *inner, const SqlJoinSpec *spec)
{
    HashJoinOp *j = sql_op_new(cx, sizeof *j, &HJ_VT, outer, inner, outer->width);
    if (!j)
        return NULL;
    j->js = *spec;
    j->nested = spec->n_keys == 0;
    if (filters_outer(spec->type)) {
        uint8_t *marks = qr_arena_calloc(cx->arena, (size_t)outer->width + 1);
        if (!marks) {
            sql_nomem(cx);
            return NULL;
        }
        for (int i = 0; i < spec->n_keys; i++)
            sql_expr_cols(spec->lk[i], marks);
        for (int i = 0; i < spec->n_cond; i++)
            sql_expr_cols(spec->cond[i], marks);
        if (!(j->ocols = sql_cols_list(cx, marks, outer->width, &j->n_ocols)))
            return NULL;
    }
    return j;
}

SqlOp *sql_op_hash_join(SqlCtx *cx, SqlOp *outer, SqlOp *inner, const SqlJoinSpec *spec)
{
    if (spec->n_keys < 1 || spec->n_keys > SQL_JOIN_MAX_KEYS) {
        sql_err_at(cx, -1, QR_EINTERNAL, "XX000", "hash join with %d keys", spec->n_keys);
        return NULL;
    }
    HashJoinOp *j = join_new(cx, outer, inner, spec);
    if (!j)
        return NULL;
    double out = outer->est_rows > inner->est_rows ? outer->est_rows : inner->est_rows;
    if (filters_outer(spec->type))
        out = outer->est_rows * 0.5;
    j->op.est_rows = out;
    j->op.startup_cost = inner->total_cost + inner->est_rows * 0.05;
    j->op.total_cost = j->op.startup_cost + outer->total_cost + outer->est_rows * 0.05 + out * 0.01;
    return &j->op;
}

SqlOp *sql_op_nl_join(SqlCtx *cx, SqlOp *outer, SqlOp *inner, const SqlJoinSpec *spec)
{
    SqlJoinSpec s = *spec;
    s.n_keys = 0;
    HashJoinOp *j = join_new(cx, outer, inner, &s);
    if (!j)
        return NULL;
    j->op.est_rows = filters_outer(spec->type)
                         ? outer->est_rows * 0.5
                         : outer->est_rows * (inner->est_rows > 1 ? inner->est_rows : 1) * 0.1;
    j->op.startup_cost = inner->total_cost;
    j->op.total_cost = j->op.startup_cost + outer->total_cost + outer->est_rows * inner->est_rows * 0.01;
    return &j->op;
}
