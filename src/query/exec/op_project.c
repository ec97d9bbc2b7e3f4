/*
 * op_project.c — the select list: target expressions (and the extra
 * ORDER BY keys) evaluated per row into rows of their own, values cast to
 * the output columns' types.  Over an aggregate, a row is the group's
 * representative input row followed by its aggregate values.  A
 * set-returning target fans a row out: as many rows as the longest list,
 * the shorter padded with NULLs, the other targets repeated (PostgreSQL
 * 10's rule).
 *
 * Layer: query/ (SQL execution).
 */
#include "query/exec/exec.h"

#include <string.h>

typedef struct ProjectOp {
    SqlOp op;
    SqlExpr **exprs;          /* borrows: width of them */
    const QrSqlType *types;   /* borrows: output types, or NULL */
    int in_width;
    bool has_aggs, has_srf;
    int *cols;                /* input columns the expressions read */
    int n_cols;
    SqlBatch *b;              /* the output batch */
    QrArena *scratch;         /* owns: the output batch's values, reset per batch */
    /* a row being fanned out by set-returning targets */
    SqlBatch *in;             /* the input batch (borrowed until its next) */
    int in_pos;               /* next input row */
    SqlValue **lists;         /* per target: its list (SRF), or NULL */
    uint64_t *lens;
    uint64_t fan_n, fan_pos;  /* rows of the current fan-out, next one */
    SqlValue *fan_row;        /* the input row being fanned out */
} ProjectOp;

static int project_open(SqlOp *op, SqlCtx *cx)
{
    ProjectOp *p = (ProjectOp *)op;
    p->in = NULL;
    p->in_pos = 0;
    p->fan_n = p->fan_pos = 0;
    if (!p->b && !(p->b = sql_batch_new(cx, op->width)))
        return cx->err->code;
    return sql_op_open(op->kids[0], cx);
}

static int cast_out(ProjectOp *p, SqlCtx *cx, int i, SqlValue *v)
{
    if (!p->types)
        return QR_OK;
    QrSqlType t = p->types[i];
    if (v->is_null) {
        v->type = t;
        return QR_OK;
    }
    if (v->type == t)
        return QR_OK;
    SqlValue o;
    int rc = sqlv_cast(cx, v, t, -1, &o);
    if (rc == QR_OK)
        *v = o;
    return rc;
}

/* The set-returning targets' lists for input row `row`. */
static int fan_start(ProjectOp *p, SqlCtx *cx, const SqlEvalRow *er)
{
    p->fan_n = p->fan_pos = 0;
    for (int i = 0; i < p->op.width; i++) {
        const SqlExpr *e = p->exprs[i];
        p->lists[i] = NULL;
        p->lens[i] = 0;
        if (e->kind != SE_SRF)
            continue;
        SqlValue argv[3];
        int rc = QR_OK;
        for (int k = 0; k < e->n_args && rc == QR_OK; k++)
            rc = sql_expr_eval(cx, e->args[k], er, &argv[k]);
        if (rc || (rc = sql_srf_rows(cx, e->name, e->n_args, argv, e->type, &p->lists[i], &p->lens[i])))
            return rc;
        if (p->lens[i] > p->fan_n)
            p->fan_n = p->lens[i];
    }
    return QR_OK;
}

static int project_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    ProjectOp *p = (ProjectOp *)op;
    SqlBatch *o = p->b;
    int W = op->width, k = 0, rc = QR_OK;
    /* the last batch's values are dead: evaluate into a fresh scratch (what
     * a consumer keeps, it copies) */
    QrArena *scratch = sql_op_scratch(cx, &p->scratch), *stmt = cx->arena;
    if (!scratch)
        return cx->err->code;
    qr_arena_reset(scratch);
    while (k < SQL_BATCH_ROWS) {
        if (!p->in || p->in_pos >= p->in->n) {
            if (p->fan_pos < p->fan_n) /* (cannot happen: a fan-out ends with its row) */
                break;
            if (k > 0)
                break; /* hand out what we have before pulling again */
            if ((rc = sql_op_next(op->kids[0], cx, &p->in)) || !p->in)
                break;
            p->in_pos = 0;
            if ((rc = sql_batch_need(cx, p->in, p->cols, p->n_cols)))
                break;
        }
        SqlBatch *in = p->in;
        int ph = sql_batch_at(in, p->in_pos);
        SqlValue *row = in->rows + (size_t)ph * (size_t)in->width;
        SqlEvalRow er = {.row = row, .aggv = p->has_aggs ? row + p->in_width : NULL,
                         .doc = in->src ? in->base + in->docs[ph] : -1};
        if (in->scores)
            er.score = in->scores[ph];
        if (p->has_srf) {
            if (p->fan_pos == 0 && p->fan_n == 0 && (rc = fan_start(p, cx, &er)))
                break;
            if (p->fan_pos >= p->fan_n) { /* an empty fan-out: no row */
                p->fan_n = p->fan_pos = 0;
                p->in_pos++;
                continue;
            }
        }
        SqlValue *x = o->rows + (size_t)k * (size_t)W;
        cx->arena = scratch;
        for (int i = 0; i < W && rc == QR_OK; i++) {
            if (p->has_srf && p->exprs[i]->kind == SE_SRF) {
                x[i] = p->fan_pos < p->lens[i] ? p->lists[i][p->fan_pos] : sqlv_null();
                x[i].type = p->exprs[i]->type;
            } else {
                rc = sql_expr_eval(cx, p->exprs[i], &er, &x[i]);
            }
            if (rc == QR_OK)
                rc = cast_out(p, cx, i, &x[i]);
        }
        cx->arena = stmt;
        if (rc)
            break;
        k++;
        if (p->has_srf && ++p->fan_pos < p->fan_n)
            continue;
        p->fan_n = p->fan_pos = 0;
        p->in_pos++;
    }
    *out = rc || k == 0 ? NULL : sql_batch_dense(o, k);
    return rc;
}

static void project_close(SqlOp *op, SqlCtx *cx)
{
    ProjectOp *p = (ProjectOp *)op;
    p->in = NULL;
    sql_op_close(op->kids[0], cx);
    qr_arena_free(p->scratch);
    p->scratch = NULL;
}

static void project_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    const ProjectOp *p = (const ProjectOp *)op;
    if (!p->has_srf)
        return; /* shown as its child, as PostgreSQL folds projections into nodes */
    sql_explain_type(n, "ProjectSet", NULL, NULL);
    QrBuf b;
    qr_buf_init(&b);
    for (int i = 0; i < op->width; i++)
        qr_buf_printf(&b, "%s%s", i ? ", " : "", sql_expr_sql(cx, p->exprs[i], NULL, false));
    sql_explain_prop(n, cx, "Output", "%.*s", (int)b.len, b.data ? (char *)b.data : "");
    qr_buf_free(&b);
}

static const SqlOpVt PROJECT_VT = {"project", project_open, project_next, project_close,
                                   project_explain};

SqlOp *sql_op_project(SqlCtx *cx, SqlOp *kid, SqlExpr **exprs, int n_out, const QrSqlType *types,
                      int in_width, bool has_aggs, bool has_srf)
{
    ProjectOp *p = sql_op_new(cx, sizeof *p, &PROJECT_VT, kid, NULL, n_out);
    uint8_t *marks = qr_arena_calloc(cx->arena, (size_t)kid->width + 1);
    if (!p || !marks ||
        (has_srf && (!(p->lists = qr_arena_calloc(cx->arena, ((size_t)n_out + 1) * sizeof *p->lists)) ||
                     !(p->lens = qr_arena_calloc(cx->arena, ((size_t)n_out + 1) * sizeof *p->lens))))) {
        sql_nomem(cx);
        return NULL;
    }
    for (int i = 0; i < n_out; i++)
        sql_expr_cols(exprs[i], marks);
    if (has_aggs) /* grouped rows are complete; only the input row's columns count */
        memset(marks + in_width, 0, (size_t)(kid->width - in_width));
    if (!(p->cols = sql_cols_list(cx, marks, kid->width, &p->n_cols)))
        return NULL;
    p->op.total_cost = kid->total_cost + kid->est_rows * 0.01 * n_out;
    p->exprs = exprs;
    p->types = types;
    p->in_width = in_width;
    p->has_aggs = has_aggs;
    p->has_srf = has_srf;
    return &p->op;
}
