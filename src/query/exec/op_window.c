/*
 * op_window.c — WindowAgg: window functions over the rows of the child
 * (after grouping and HAVING, before DISTINCT, ORDER BY and LIMIT), with
 * PostgreSQL's semantics.
 *
 * One node per distinct PARTITION BY + ORDER BY; nodes stack, each adding
 * its functions' columns.  A node keeps every input row (its partition
 * buffers, in the statement's arena: past quarry.mem_cap the statement
 * ends with 54000), evaluates the partition and order keys once per row,
 * sorts the rows by them (stable: peers keep their input order), then
 * walks each partition:
 *
 * - Peer groups are runs of rows equal in every ORDER BY key (without
 *   ORDER BY, the whole partition).  row_number, rank, dense_rank,
 *   percent_rank, cume_dist and ntile come from positions and groups;
 *   lag / lead read the row `offset` away in the partition (the default,
 *   or NULL, outside it).
 * - The frame of row p is [head, tail) in partition positions: ROWS counts
 *   rows, GROUPS peer groups, RANGE compares the one ORDER BY key with the
 *   current row's plus or minus the offset (numbers; timestamps with
 *   interval offsets in microseconds), NULL keys being peers of each other
 *   only (PostgreSQL's nodeWindowAgg.c rules).  EXCLUDE CURRENT ROW /
 *   GROUP / TIES drops rows from it.  first_value, last_value, nth_value
 *   and the aggregates read the frame.
 * - Aggregates over frames: a frame whose head stays at the partition's
 *   start only grows, so one running state is finalized per row; one whose
 *   tail stays at the partition's end grows from the last row back (for
 *   aggregates blind to the order: count, min, max, bool_and / bool_or,
 *   sum / avg of integers); a sliding frame of count, or sum / avg of
 *   integers, takes leaving rows back out (sql_agg_unstep); anything else
 *   aggregates its frame afresh per row (what that allocates is released
 *   per row).  A row whose frame equals the previous row's copies its
 *   value.
 *
 * The rows come out in the order of the node's sort (PostgreSQL's too).
 *
 * Layer: query/ (SQL execution).  Calls agg.c, op_sort.c's index sort and
 * the SQL engine's expressions and values.
 */
#include "query/exec/exec.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct WinOp {
    SqlOp op;
    SqlWinFunc **fns;         /* borrows: this node's functions */
    int n_fns;
    const SqlWinDef *w;       /* their PARTITION BY and ORDER BY (the first's window) */
    int in_width;             /* the child's row width */
    int agg_off;              /* aggregate values in the rows (grouped), -1 */
    SqlRowSink rows;          /* the input rows, op.width wide (arena) */
    uint64_t *idx;            /* the rows in partition, then ORDER BY order (arena) */
    uint64_t pos;             /* next row handed out */
    SqlBatch *b;
    uint64_t n_parts;         /* partitions seen (EXPLAIN ANALYZE) */
} WinOp;

/* A frame offset as evaluated for this execution. */
typedef struct FrameOff {
    bool is_f;                /* a float (RANGE over float keys) */
    int64_t i;
    double f;
} FrameOff;

/* One function's state for one execution. */
typedef struct FnRun {
    const SqlWinFunc *f;
    FrameOff start, end;
    /* aggregates: their arguments per row, evaluated once */
    SqlAgg plain;             /* the aggregate reading [arg, arg2] tuples, FILTER applied */
    SqlExpr colx, colx2;
    SqlValue *av;             /* per row: arg, arg2 */
    uint8_t *ok;              /* per row: FILTER passed */
    bool invertible;          /* leaving rows can be taken out of the state */
    bool order_free;          /* its value does not depend on the rows' order */
} FnRun;

/* One partition being computed. */
typedef struct Part {
    WinOp *o;
    const uint64_t *ix;       /* its rows in order (row numbers) */
    int64_t m;                /* rows */
    const SqlValue *keys;     /* every row's keys: KW per row, by row number */
    int kw, np;               /* key width, partition keys */
    int64_t *grp;             /* per position: its peer group */
    int64_t *gs, *ge;         /* per group: first position, end */
    int64_t n_grp;
    /* RANGE with offsets: the order key's NULLs (a run at one end) and
     * numeric values */
    int64_t nn;               /* NULL keys */
    bool nulls_first;
    const int64_t *ki;        /* per row number: the key as an integer / float */
    const double *kf;
    bool key_int;
} Part;

static SqlValue *row_at(const WinOp *o, uint64_t r)
{
    return o->rows.rows + r * (uint64_t)o->op.width;
}

static SqlEvalRow eval_row(const WinOp *o, uint64_t r)
{
    SqlValue *row = row_at(o, r);
    SqlEvalRow er = {.row = row, .aggv = o->agg_off >= 0 ? row + o->agg_off : NULL, .doc = -1};
    return er;
}

/* Store a function's value for partition position p, as its type. */
static int put(SqlCtx *cx, const Part *P, const SqlWinFunc *f, int64_t p, SqlValue v)
{
    if (v.is_null || v.type == f->type || f->type == QR_SQL_UNKNOWN) {
        if (v.is_null)
            v.type = f->type;
        row_at(P->o, P->ix[p])[f->col] = v;
        return QR_OK;
    }
    SqlValue c;
    int rc = sqlv_cast(cx, &v, f->type, -1, &c);
    if (rc == QR_OK)
        row_at(P->o, P->ix[p])[f->col] = c;
    return rc;
}

/* ---- frames ---- */

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* RANGE: does key position q lie at or past the bound T (start) / past it
 * (end), in the sort's direction? */
static bool range_past(const Part *P, int64_t q, bool desc, bool start, const FrameOff *T)
{
    uint64_t r = P->ix[q];
    int c;
    if (P->key_int && !T->is_f)
        c = P->ki[r] < T->i ? -1 : P->ki[r] > T->i;
    else {
        double v = P->key_int ? (double)P->ki[r] : P->kf[r], t = T->is_f ? T->f : (double)T->i;
        c = v < t ? -1 : v > t;
    }
    if (desc)
        c = -c;
    return start ? c >= 0 : c > 0;
}

/* A bound with an offset (n PRECEDING / FOLLOWING) of position p: the
 * head's position, or the tail's (one past the frame). */
static int64_t offset_bound(const Part *P, const SqlWinDef *w, const FrameOff *off, int64_t p,
                            bool start, bool preceding)
{
    int64_t m = P->m;
    if (w->mode == SQL_FRAME_ROWS) {
        int64_t k = off->i > m + 1 ? m + 1 : off->i;
        int64_t b = preceding ? p - k : p + k;
        return start ? b : b + 1;
    }
    if (w->mode == SQL_FRAME_GROUPS) {
        int64_t k = off->i > P->n_grp + 1 ? P->n_grp + 1 : off->i;
        int64_t g = preceding ? P->grp[p] - k : P->grp[p] + k;
        if (g < 0)
            return 0;
        if (g >= P->n_grp)
            return m;
        return start ? P->gs[g] : P->ge[g];
    }
    /* RANGE: the current key plus or minus the offset; NULL keys frame
     * their own peers */
    uint64_t r = P->ix[p];
    if (P->keys[r * (uint64_t)P->kw + (uint64_t)P->np].is_null)
        return start ? (P->nulls_first ? 0 : m - P->nn) : (P->nulls_first ? P->nn : m);
    bool desc = w->desc[0];
    int64_t lo = P->nulls_first ? P->nn : 0, hi = P->nulls_first ? m : m - P->nn;
    FrameOff T;
    bool minus = preceding != desc;
    if (P->key_int && !off->is_f) {
        T.is_f = false;
        if (minus ? __builtin_sub_overflow(P->ki[r], off->i, &T.i) : __builtin_add_overflow(P->ki[r], off->i, &T.i))
            T.i = minus ? INT64_MIN : INT64_MAX;
    } else {
        double v = P->key_int ? (double)P->ki[r] : P->kf[r], k = off->is_f ? off->f : (double)off->i;
        T.is_f = true;
        T.f = minus ? v - k : v + k;
    }
    /* the first position in [lo, hi) past the bound (binary search: the
     * keys are sorted) */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (range_past(P, mid, desc, start, &T))
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Row p's frame [*h, *t) (empty when *t == *h). */
static void frame_of(const Part *P, const FnRun *fr, int64_t p, int64_t *h, int64_t *t)
{
    const SqlWinDef *w = fr->f->win;
    int64_t m = P->m, g = P->grp[p], hs, te;
    switch (w->start) {
    case SQL_FB_UNBOUNDED_PRECEDING:
        hs = 0;
        break;
    case SQL_FB_CURRENT:
        hs = w->mode == SQL_FRAME_ROWS ? p : P->gs[g];
        break;
    case SQL_FB_PRECEDING:
    case SQL_FB_FOLLOWING:
        hs = offset_bound(P, w, &fr->start, p, true, w->start == SQL_FB_PRECEDING);
        break;
    default:
        hs = m;
        break;
    }
    switch (w->end) {
    case SQL_FB_UNBOUNDED_FOLLOWING:
        te = m;
        break;
    case SQL_FB_CURRENT:
        te = w->mode == SQL_FRAME_ROWS ? p + 1 : P->ge[g];
        break;
    case SQL_FB_PRECEDING:
    case SQL_FB_FOLLOWING:
        te = offset_bound(P, w, &fr->end, p, false, w->end == SQL_FB_PRECEDING);
        break;
    default:
        te = 0;
        break;
    }
    *h = clamp(hs, 0, m);
    *t = clamp(te, *h, m);
}

/* Is position q left out of row p's frame by EXCLUDE? */
static bool excluded(const Part *P, const SqlWinDef *w, int64_t p, int64_t q)
{
    switch (w->exclude) {
    case SQL_EXCLUDE_CURRENT:
        return q == p;
    case SQL_EXCLUDE_GROUP:
        return P->grp[q] == P->grp[p];
    case SQL_EXCLUDE_TIES:
        return q != p && P->grp[q] == P->grp[p];
    default:
        return false;
    }
}

/* ---- functions ---- */

static int eval_at(SqlCtx *cx, const WinOp *o, const SqlExpr *e, uint64_t r, SqlValue *out)
{
    SqlEvalRow er = eval_row(o, r);
    return sql_expr_eval(cx, e, &er, out);
}

/* A count argument (ntile's buckets, nth_value's n) read at position p:
 * *null when NULL (the value is NULL), else > 0 or the error. */
static int count_arg(SqlCtx *cx, const Part *P, const SqlExpr *e, int64_t p, const char *sqlstate,
                     const char *fname, bool *null, int64_t *out)
{
    SqlValue nv;
    int rc = eval_at(cx, P->o, e, P->ix[p], &nv);
    if (rc)
        return rc;
    *null = nv.is_null;
    *out = nv.u.i;
    if (!nv.is_null && nv.u.i <= 0)
        return sql_err_at(cx, e->loc, QR_EINVAL, sqlstate, "argument of %s must be greater than zero",
                          fname);
    return QR_OK;
}

/* ntile, as PostgreSQL's window_ntile: the bucket count read at the
 * partition's first row (again while it is NULL); the first total % n
 * buckets hold one row more. */
static int ntile(SqlCtx *cx, const Part *P, const SqlWinFunc *f)
{
    int64_t bucket = 0, in_bucket = 0, boundary = 0, rem = 0;
    for (int64_t p = 0; p < P->m; p++) {
        if (bucket == 0) {
            bool null;
            int64_t nb;
            int rc = count_arg(cx, P, f->args[0], p, "22014", "ntile", &null, &nb);
            if (rc == QR_OK && null)
                rc = put(cx, P, f, p, sqlv_null());
            if (rc)
                return rc;
            if (null)
                continue;
            bucket = 1;
            in_bucket = 0;
            boundary = P->m / nb;
            rem = 0;
            if (boundary <= 0)
                boundary = 1;
            else if ((rem = P->m % nb) != 0)
                boundary++;
        }
        if (++in_bucket > boundary) {
            if (rem != 0 && bucket == rem) {
                rem = 0;
                boundary--;
            }
            bucket++;
            in_bucket = 1;
        }
        SqlValue v = sqlv_int(bucket);
        v.type = QR_SQL_INT4;
        int rc = put(cx, P, f, p, v);
        if (rc)
            return rc;
    }
    return QR_OK;
}

/* lag / lead: the value `offset` rows back / ahead in the partition. */
static int lag_lead(SqlCtx *cx, const Part *P, const SqlWinFunc *f)
{
    int rc;
    for (int64_t p = 0; p < P->m; p++) {
        uint64_t r = P->ix[p];
        int64_t off = 1;
        SqlValue v = sqlv_null();
        if (f->n_args > 1) {
            SqlValue ov;
            if ((rc = eval_at(cx, P->o, f->args[1], r, &ov)))
                return rc;
            if (ov.is_null) {
                if ((rc = put(cx, P, f, p, v)))
                    return rc;
                continue;
            }
            off = ov.u.i;
        }
        int64_t q;
        bool in = !(f->kind == SW_LAG ? __builtin_sub_overflow(p, off, &q) : __builtin_add_overflow(p, off, &q)) &&
                  q >= 0 && q < P->m;
        if (in)
            rc = eval_at(cx, P->o, f->args[0], P->ix[q], &v);
        else if (f->n_args > 2)
            rc = eval_at(cx, P->o, f->args[2], r, &v);
        else
            rc = QR_OK;
        if (rc || (rc = put(cx, P, f, p, v)))
            return rc;
    }
    return QR_OK;
}

/* first_value / last_value / nth_value over the frame. */
static int frame_value(SqlCtx *cx, const Part *P, const FnRun *fr)
{
    const SqlWinFunc *f = fr->f;
    const SqlWinDef *w = f->win;
    int rc;
    for (int64_t p = 0; p < P->m; p++) {
        int64_t h, t, want = 1, pick = -1;
        frame_of(P, fr, p, &h, &t);
        if (f->kind == SW_NTH_VALUE) {
            bool null;
            if ((rc = count_arg(cx, P, f->args[1], p, "22016", "nth_value", &null, &want)) ||
                (null && (rc = put(cx, P, f, p, sqlv_null()))))
                return rc;
            if (null)
                continue;
        }
        if (f->kind == SW_LAST_VALUE) {
            for (int64_t q = t - 1; q >= h && pick < 0; q--)
                if (!excluded(P, w, p, q))
                    pick = q;
        } else if (w->exclude == SQL_EXCLUDE_NONE) {
            pick = want <= t - h ? h + want - 1 : -1;
        } else {
            for (int64_t q = h; q < t && pick < 0; q++)
                if (!excluded(P, w, p, q) && --want == 0)
                    pick = q;
        }
        SqlValue v = sqlv_null();
        if (pick >= 0 && (rc = eval_at(cx, P->o, f->args[0], P->ix[pick], &v)))
            return rc;
        if ((rc = put(cx, P, f, p, v)))
            return rc;
    }
    return QR_OK;
}

static int agg_add(SqlCtx *cx, const Part *P, const FnRun *fr, SqlAggState *st, int64_t q)
{
    uint64_t r = P->ix[q];
    if (!fr->ok[r])
        return QR_OK;
    SqlEvalRow er = {.row = fr->av + 2 * r, .doc = -1};
    return sql_agg_step(cx, &fr->plain, st, &er);
}

/* The aggregate of frame [h, t) of row p from scratch, what it allocated
 * given back (its value copied out first). */
static int agg_fresh(SqlCtx *cx, const Part *P, const FnRun *fr, int64_t p, int64_t h, int64_t t,
                     SqlValue *out)
{
    QrArenaMark mark = qr_arena_mark(cx->arena);
    SqlAggState st;
    memset(&st, 0, sizeof st);
    int rc = QR_OK;
    for (int64_t q = h; q < t && rc == QR_OK; q++)
        if (!excluded(P, fr->f->win, p, q))
            rc = agg_add(cx, P, fr, &st, q);
    if (rc == QR_OK)
        rc = sql_agg_final(cx, &fr->plain, &st, out);
    if (rc)
        return rc;
    if (out->is_null || (!sqlt_is_str(out->type) && out->type != QR_SQL_NUMERIC)) {
        qr_arena_release(cx->arena, mark);
        return QR_OK;
    }
    char *tmp = qr_malloc(out->u.s.n + 1);
    if (!tmp)
        return sql_nomem(cx);
    memcpy(tmp, out->u.s.s, out->u.s.n);
    qr_arena_release(cx->arena, mark);
    out->u.s.s = tmp;
    rc = sqlv_own(cx, out);
    qr_free(tmp);
    return rc;
}

/* Frames that end at the partition's end (n PRECEDING / CURRENT ROW ...
 * AND UNBOUNDED FOLLOWING) grow towards the start from the last row back:
 * for aggregates whose value does not depend on the order they see rows
 * in, one running state serves, rows added at the front. */
static int agg_suffixes(SqlCtx *cx, const Part *P, const FnRun *fr)
{
    SqlAggState st;
    memset(&st, 0, sizeof st);
    int64_t sh = P->m, ph = -1;
    SqlValue v = sqlv_null();
    int rc = QR_OK;
    for (int64_t p = P->m - 1; p >= 0 && rc == QR_OK; p--) {
        int64_t h, t;
        frame_of(P, fr, p, &h, &t);
        if (h != ph) {
            if (h > sh) { /* (heads only move back here) start over */
                memset(&st, 0, sizeof st);
                sh = P->m;
            }
            for (; sh > h && rc == QR_OK; sh--)
                rc = agg_add(cx, P, fr, &st, sh - 1);
            if (rc == QR_OK)
                rc = sql_agg_final(cx, &fr->plain, &st, &v);
        }
        if (rc == QR_OK)
            rc = put(cx, P, fr->f, p, v);
        ph = h;
        if (rc == QR_OK)
            rc = sql_check(cx);
    }
    return rc;
}

/* An aggregate over every row's frame (see the header for the ways). */
static int agg_frames(SqlCtx *cx, const Part *P, const FnRun *fr)
{
    const SqlWinDef *w = fr->f->win;
    bool plain_frames = w->exclude == SQL_EXCLUDE_NONE;
    bool growing = plain_frames && w->start == SQL_FB_UNBOUNDED_PRECEDING;
    if (plain_frames && !growing && w->end == SQL_FB_UNBOUNDED_FOLLOWING && fr->order_free)
        return agg_suffixes(cx, P, fr);
    bool sliding = plain_frames && !growing && fr->invertible;
    SqlAggState st;
    memset(&st, 0, sizeof st);
    int64_t sh = 0, se = 0, ph = -1, pt = -1;
    SqlValue prev = sqlv_null();
    int rc = QR_OK;
    for (int64_t p = 0; p < P->m && rc == QR_OK; p++) {
        int64_t h, t;
        frame_of(P, fr, p, &h, &t);
        SqlValue v;
        if (plain_frames && h == ph && t == pt) {
            v = prev;
        } else if (growing || sliding) {
            if (t < se || h < sh || h >= se) { /* (frames only move forward) start over */
                memset(&st, 0, sizeof st);
                sh = se = h;
            }
            for (; se < t && rc == QR_OK; se++)
                rc = agg_add(cx, P, fr, &st, se);
            for (; sh < h && rc == QR_OK; sh++) {
                uint64_t r = P->ix[sh];
                bool done = true;
                SqlEvalRow er = {.row = fr->av + 2 * r, .doc = -1};
                if (fr->ok[r] && (rc = sql_agg_unstep(cx, &fr->plain, &st, &er, &done)) == QR_OK && !done) {
                    /* the state cannot give it back: the frame afresh */
                    memset(&st, 0, sizeof st);
                    for (sh = se = h; se < t && rc == QR_OK; se++)
                        rc = agg_add(cx, P, fr, &st, se);
                    break;
                }
            }
            if (rc == QR_OK)
                rc = sql_agg_final(cx, &fr->plain, &st, &v);
        } else {
            rc = agg_fresh(cx, P, fr, p, h, t, &v);
        }
        if (rc == QR_OK)
            rc = put(cx, P, fr->f, p, v);
        prev = v;
        ph = h;
        pt = t;
        if (rc == QR_OK)
            rc = sql_check(cx);
    }
    return rc;
}

static int compute(SqlCtx *cx, const Part *P, const FnRun *fr)
{
    const SqlWinFunc *f = fr->f;
    int rc = QR_OK;
    switch (f->kind) {
    case SW_NTILE:
        return ntile(cx, P, f);
    case SW_LAG:
    case SW_LEAD:
        return lag_lead(cx, P, f);
    case SW_FIRST_VALUE:
    case SW_LAST_VALUE:
    case SW_NTH_VALUE:
        return frame_value(cx, P, fr);
    case SW_AGG:
        return agg_frames(cx, P, fr);
    default:
        break;
    }
    for (int64_t p = 0; p < P->m && rc == QR_OK; p++) {
        int64_t g = P->grp[p];
        SqlValue v;
        switch (f->kind) {
        case SW_ROW_NUMBER:
            v = sqlv_int(p + 1);
            break;
        case SW_RANK:
            v = sqlv_int(P->gs[g] + 1);
            break;
        case SW_DENSE_RANK:
            v = sqlv_int(g + 1);
            break;
        case SW_PERCENT_RANK:
            v = sqlv_float(P->m > 1 ? (double)P->gs[g] / (double)(P->m - 1) : 0);
            break;
        default: /* SW_CUME_DIST */
            v = sqlv_float((double)P->ge[g] / (double)P->m);
            break;
        }
        rc = put(cx, P, f, p, v);
    }
    return rc;
}

/* ---- the node ---- */

static int eval_offset(SqlCtx *cx, const SqlWinFunc *f, const SqlExpr *e, bool start, FrameOff *out)
{
    memset(out, 0, sizeof *out);
    if (!e)
        return QR_OK;
    SqlEvalRow none = {.doc = -1};
    SqlValue v;
    int rc = sql_expr_eval(cx, e, &none, &v);
    if (rc)
        return rc;
    if (v.is_null)
        return sql_err_at(cx, e->loc, QR_EINVAL, "22004", "frame %s offset must not be null",
                          start ? "starting" : "ending");
    if (v.type == QR_SQL_NUMERIC || sqlt_is_float(v.type)) {
        SqlValue fv;
        if ((rc = sqlv_cast(cx, &v, QR_SQL_FLOAT8, e->loc, &fv)))
            return rc;
        out->is_f = true;
        out->f = fv.u.f;
        if (!(fv.u.f >= 0)) /* (NaN too) */
            return sql_err_at(cx, e->loc, QR_EINVAL, "22013",
                              "invalid preceding or following size in window function");
        if (fv.u.f == (double)(int64_t)fv.u.f && fabs(fv.u.f) < 9e18) {
            out->is_f = false;
            out->i = (int64_t)fv.u.f;
        }
        return QR_OK;
    }
    out->i = v.u.i;
    if (v.u.i < 0)
        return f->win->mode == SQL_FRAME_RANGE
                   ? sql_err_at(cx, e->loc, QR_EINVAL, "22013",
                                "invalid preceding or following size in window function")
                   : sql_err_at(cx, e->loc, QR_EINVAL, "22013", "frame %s offset must not be negative",
                                start ? "starting" : "ending");
    return QR_OK;
}

/* Per function: frame offsets, and an aggregate's arguments per row. */
static int fn_setup(WinOp *o, SqlCtx *cx, FnRun *fr, uint64_t n)
{
    const SqlWinFunc *f = fr->f;
    int rc;
    if ((rc = eval_offset(cx, f, f->win->start_off, true, &fr->start)) ||
        (rc = eval_offset(cx, f, f->win->end_off, false, &fr->end)))
        return rc;
    if (f->kind != SW_AGG)
        return QR_OK;
    const SqlAgg *a = f->agg;
    fr->plain = *a;
    fr->plain.filter = NULL; /* applied to fr->ok */
    fr->colx = (SqlExpr){.kind = SE_COL, .col = 0, .type = a->arg ? a->arg->type : QR_SQL_UNKNOWN};
    fr->colx2 = (SqlExpr){.kind = SE_COL, .col = 1, .type = a->arg2 ? a->arg2->type : QR_SQL_UNKNOWN};
    fr->plain.arg = a->arg ? &fr->colx : NULL;
    fr->plain.arg2 = a->arg2 ? &fr->colx2 : NULL;
    fr->invertible = a->kind == SA_COUNT_STAR || a->kind == SA_COUNT ||
                     ((a->kind == SA_SUM || a->kind == SA_AVG) && sqlt_is_int(a->arg->type));
    fr->order_free = fr->invertible || a->kind == SA_MIN || a->kind == SA_MAX ||
                     a->kind == SA_BOOL_AND || a->kind == SA_BOOL_OR;
    fr->av = qr_arena_alloc(cx->arena, (2 * n + 1) * sizeof *fr->av);
    fr->ok = qr_arena_alloc(cx->arena, n + 1);
    if (!fr->av || !fr->ok)
        return sql_nomem(cx);
    for (uint64_t r = 0; r < n; r++) {
        SqlEvalRow er = eval_row(o, r);
        bool pass = true;
        fr->av[2 * r] = fr->av[2 * r + 1] = sqlv_null();
        if (a->filter && (rc = sql_expr_test(cx, a->filter, &er, &pass)))
            return rc;
        fr->ok[r] = pass;
        if (pass && a->arg && (rc = sql_expr_eval(cx, a->arg, &er, &fr->av[2 * r])))
            return rc;
        if (pass && a->arg2 && (rc = sql_expr_eval(cx, a->arg2, &er, &fr->av[2 * r + 1])))
            return rc;
        if ((rc = sql_check(cx)))
            return rc;
    }
    return QR_OK;
}

/* Every input row, window columns NULL, strings owned. */
static int take_rows(WinOp *o, SqlCtx *cx)
{
    SqlOp *kid = o->op.kids[0];
    int W = o->op.width, rc = sql_op_open(kid, cx);
    while (rc == QR_OK) {
        SqlBatch *b;
        if ((rc = sql_op_next(kid, cx, &b)) || !b)
            break;
        if ((rc = sql_batch_fill(cx, b)))
            break;
        for (int i = 0; i < b->n && rc == QR_OK; i++) {
            SqlValue *x = sql_sink_slot(cx, &o->rows);
            if (!x) {
                rc = cx->err->code;
                break;
            }
            memcpy(x, sql_batch_row(b, i), (size_t)o->in_width * sizeof *x);
            for (int c = 0; c < o->in_width && rc == QR_OK; c++)
                rc = sqlv_own(cx, &x[c]);
            for (int c = o->in_width; c < W; c++)
                x[c] = sqlv_null();
            o->rows.n++;
        }
    }
    sql_op_close(kid, cx);
    return rc;
}

static int win_open(SqlOp *op, SqlCtx *cx)
{
    WinOp *o = (WinOp *)op;
    const SqlWinDef *w = o->w;
    memset(&o->rows, 0, sizeof o->rows);
    o->rows.width = op->width;
    o->pos = 0;
    o->idx = NULL;
    o->n_parts = 0;
    if (!o->b && !(o->b = sql_batch_new(cx, op->width)))
        return cx->err->code;
    int rc = take_rows(o, cx);
    if (rc)
        return rc;
    uint64_t n = o->rows.n;
    int np = w->n_part, kw = np + w->n_order;
    /* the keys, once per row, and the order */
    SqlValue *keys = qr_arena_alloc(cx->arena, (n * (uint64_t)kw + 1) * sizeof *keys);
    SqlSortKey *sk = qr_arena_calloc(cx->arena, ((size_t)kw + 1) * sizeof *sk);
    FnRun *fr = qr_arena_calloc(cx->arena, ((size_t)o->n_fns + 1) * sizeof *fr);
    if (!keys || !sk || !fr)
        return sql_nomem(cx);
    for (uint64_t r = 0; r < n && rc == QR_OK; r++)
        for (int k = 0; k < kw && rc == QR_OK; k++)
            rc = eval_at(cx, o, k < np ? w->part[k] : w->order[k - np], r, &keys[r * (uint64_t)kw + (uint64_t)k]);
    for (int k = 0; k < kw; k++)
        sk[k] = (SqlSortKey){k, k >= np && w->desc[k - np], k >= np && w->nulls_first[k - np], NULL};
    if (rc || (rc = sql_sort_index(cx, keys, n, kw, sk, kw, &o->idx)))
        return rc;
    bool range_off = false;
    for (int i = 0; i < o->n_fns && rc == QR_OK; i++) {
        fr[i].f = o->fns[i];
        const SqlWinDef *fw = o->fns[i]->win;
        range_off |= fw->mode == SQL_FRAME_RANGE && (fw->start_off || fw->end_off);
        rc = fn_setup(o, cx, &fr[i], n);
    }
    if (rc)
        return rc;
    Part P = {.o = o, .keys = keys, .kw = kw, .np = np};
    P.grp = qr_arena_alloc(cx->arena, (n + 1) * sizeof *P.grp);
    P.gs = qr_arena_alloc(cx->arena, (n + 1) * sizeof *P.gs);
    P.ge = qr_arena_alloc(cx->arena, (n + 1) * sizeof *P.ge);
    if (!P.grp || !P.gs || !P.ge)
        return sql_nomem(cx);
    if (range_off) { /* the RANGE key as a number per row */
        int64_t *ki = qr_arena_alloc(cx->arena, (n + 1) * sizeof *ki);
        double *kf = qr_arena_alloc(cx->arena, (n + 1) * sizeof *kf);
        if (!ki || !kf)
            return sql_nomem(cx);
        QrSqlType kt = w->order[0]->type;
        P.key_int = sqlt_is_int(kt) || sqlt_is_ts(kt);
        for (uint64_t r = 0; r < n && rc == QR_OK; r++) {
            SqlValue *v = &keys[r * (uint64_t)kw + (uint64_t)np], fv;
            ki[r] = v->is_null ? 0 : v->u.i;
            kf[r] = v->is_null || P.key_int ? 0 : v->u.f;
            if (!v->is_null && !P.key_int && v->type != QR_SQL_FLOAT8 && v->type != QR_SQL_FLOAT4 &&
                (rc = sqlv_cast(cx, v, QR_SQL_FLOAT8, -1, &fv)) == QR_OK)
                kf[r] = fv.u.f;
        }
        if (rc)
            return rc;
        P.ki = ki;
        P.kf = kf;
    }
    /* the partitions */
    for (uint64_t ps = 0; ps < n && rc == QR_OK;) {
        uint64_t pe = ps + 1;
        const SqlValue *k0 = keys + o->idx[ps] * (uint64_t)kw;
        for (; pe < n; pe++) {
            const SqlValue *k1 = keys + o->idx[pe] * (uint64_t)kw;
            bool same = true;
            for (int k = 0; k < np && same; k++)
                same = sqlv_same(&k0[k], &k1[k]);
            if (!same)
                break;
        }
        P.ix = o->idx + ps;
        P.m = (int64_t)(pe - ps);
        /* peer groups */
        P.n_grp = 0;
        for (int64_t p = 0; p < P.m; p++) {
            bool peer = p > 0;
            const SqlValue *a = keys + P.ix[p] * (uint64_t)kw, *b = p ? keys + P.ix[p - 1] * (uint64_t)kw : NULL;
            for (int k = np; k < kw && peer; k++)
                peer = sqlv_key_cmp(&a[k], &b[k], false, false) == 0;
            if (!peer) {
                P.gs[P.n_grp] = p;
                P.n_grp++;
            }
            P.grp[p] = P.n_grp - 1;
            P.ge[P.n_grp - 1] = p + 1;
        }
        if (range_off) { /* the NULL keys: a run at one end */
            P.nulls_first = w->nulls_first[0];
            P.nn = 0;
            for (int64_t p = 0; p < P.m; p++)
                P.nn += keys[P.ix[p] * (uint64_t)kw + (uint64_t)np].is_null;
        }
        for (int i = 0; i < o->n_fns && rc == QR_OK; i++)
            rc = compute(cx, &P, &fr[i]);
        if (rc == QR_OK)
            rc = sql_check(cx);
        o->n_parts++;
        ps = pe;
    }
    return rc;
}

static int win_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    WinOp *o = (WinOp *)op;
    (void)cx;
    *out = sql_rows_batch(o->b, o->rows.rows, o->idx, o->rows.n, &o->pos) ? o->b : NULL;
    return QR_OK;
}

static void win_close(SqlOp *op, SqlCtx *cx)
{
    (void)op;
    (void)cx; /* the child was closed once its rows were taken */
}

static void frame_sql(QrBuf *b, SqlCtx *cx, const SqlWinDef *w)
{
    static const char *MODE[] = {"RANGE", "ROWS", "GROUPS"};
    const SqlFrameBound bounds[2] = {w->start, w->end};
    const SqlExpr *offs[2] = {w->start_off, w->end_off};
    qr_buf_printf(b, "%s BETWEEN ", MODE[w->mode]);
    for (int i = 0; i < 2; i++) {
        if (i)
            qr_buf_append(b, " AND ", 5);
        switch (bounds[i]) {
        case SQL_FB_UNBOUNDED_PRECEDING:
            qr_buf_printf(b, "UNBOUNDED PRECEDING");
            break;
        case SQL_FB_UNBOUNDED_FOLLOWING:
            qr_buf_printf(b, "UNBOUNDED FOLLOWING");
            break;
        case SQL_FB_CURRENT:
            qr_buf_printf(b, "CURRENT ROW");
            break;
        default:
            if (w->off_us && offs[i]->kind == SE_CONST)
                qr_buf_printf(b, "'%" PRId64 " microseconds'", offs[i]->val.u.i);
            else
                qr_buf_printf(b, "%s", sql_expr_sql(cx, offs[i], NULL, false));
            qr_buf_printf(b, " %s", bounds[i] == SQL_FB_PRECEDING ? "PRECEDING" : "FOLLOWING");
            break;
        }
    }
    static const char *EXCL[] = {"", " EXCLUDE CURRENT ROW", " EXCLUDE GROUP", " EXCLUDE TIES"};
    qr_buf_printf(b, "%s", EXCL[w->exclude]);
}

static void win_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    const WinOp *o = (const WinOp *)op;
    const SqlWinDef *w = o->w;
    sql_explain_type(n, "WindowAgg", NULL, NULL);
    QrBuf b;
    qr_buf_init(&b);
    for (int k = 0; k < w->n_part; k++)
        qr_buf_printf(&b, "%s%s", k ? ", " : "", sql_expr_sql(cx, w->part[k], NULL, false));
    if (w->n_part)
        sql_explain_prop(n, cx, "Partition By", "%.*s", (int)b.len, (char *)b.data);
    b.len = 0;
    for (int k = 0; k < w->n_order; k++) {
        qr_buf_printf(&b, "%s%s%s", k ? ", " : "", sql_expr_sql(cx, w->order[k], NULL, false),
                      w->desc[k] ? " DESC" : "");
        if (w->nulls_first[k] != w->desc[k])
            qr_buf_printf(&b, " NULLS %s", w->nulls_first[k] ? "FIRST" : "LAST");
    }
    if (w->n_order)
        sql_explain_prop(n, cx, "Order By", "%.*s", (int)b.len, (char *)b.data);
    b.len = 0;
    for (int i = 0; i < o->n_fns; i++) {
        const SqlWinFunc *f = o->fns[i];
        qr_buf_printf(&b, "%s%s(", i ? ", " : "", f->name);
        if (f->agg && f->agg->arg)
            qr_buf_printf(&b, "%s", sql_expr_sql(cx, f->agg->arg, NULL, false));
        else if (f->agg)
            qr_buf_putc(&b, '*');
        for (int k = 0; k < f->n_args; k++)
            qr_buf_printf(&b, "%s%s", k ? ", " : "", sql_expr_sql(cx, f->args[k], NULL, false));
        qr_buf_putc(&b, ')');
        if (f->win->has_frame) {
            qr_buf_append(&b, " OVER (", 7);
            frame_sql(&b, cx, f->win);
            qr_buf_putc(&b, ')');
        }
    }
    sql_explain_prop(n, cx, "Functions", "%.*s", (int)b.len, b.data ? (char *)b.data : "");
    qr_buf_free(&b);
    sql_explain_actual(n, cx, "Partitions", "%" PRIu64, o->n_parts);
}

static const SqlOpVt WINDOW_VT = {"window", win_open, win_next, win_close, win_explain};

/* Same PARTITION BY and ORDER BY: one sort serves both. */
static bool same_sort(const SqlWinDef *a, const SqlWinDef *b)
{
    if (a == b)
        return true;
    if (a->n_part != b->n_part || a->n_order != b->n_order)
        return false;
    for (int k = 0; k < a->n_part; k++)
        if (!sql_expr_same(a->part[k], b->part[k]))
            return false;
    for (int k = 0; k < a->n_order; k++)
        if (!sql_expr_same(a->order[k], b->order[k]) || a->desc[k] != b->desc[k] ||
            a->nulls_first[k] != b->nulls_first[k])
            return false;
    return true;
}

SqlOp *sql_op_window(SqlCtx *cx, SqlOp *kid, SqlWinFunc *const *fns, int n, int width, int agg_off)
{
    bool *taken = qr_arena_calloc(cx->arena, (size_t)n + 1);
    if (!taken) {
        sql_nomem(cx);
        return NULL;
    }
    SqlOp *top = kid;
    for (int i = 0; i < n; i++) {
        if (taken[i])
            continue;
        WinOp *o = sql_op_new(cx, sizeof *o, &WINDOW_VT, top, NULL, width);
        if (!o || !(o->fns = qr_arena_calloc(cx->arena, ((size_t)n + 1) * sizeof *o->fns))) {
            sql_nomem(cx);
            return NULL;
        }
        o->w = fns[i]->win;
        for (int j = i; j < n; j++)
            if (!taken[j] && same_sort(o->w, fns[j]->win)) {
                taken[j] = true;
                o->fns[o->n_fns++] = fns[j];
            }
        o->in_width = top->width;
        o->agg_off = agg_off;
        double rows = top->est_rows > 2 ? top->est_rows : 2;
        o->op.startup_cost = top->total_cost + rows * 0.02 * __builtin_log2(rows);
        o->op.total_cost = o->op.startup_cost + rows * 0.01 * o->n_fns;
        top = &o->op;
    }
    return top;
}
