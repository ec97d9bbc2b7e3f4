/*
 * agg.c — aggregate functions: the running state of one aggregate over the
 * rows of one group (count, sum, avg, min, max, bool_and / bool_or,
 * string_agg, percentile_cont / percentile_disc, DISTINCT and FILTER), its
 * final value, and merging partial states read from column blocks.
 *
 * Layer: query/ (SQL execution).  Used by op_hash_agg.c.
 */
#include "query/exec/exec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int value_cmp(const void *a, const void *b)
{
    return sqlv_cmp(a, b);
}

void sql_sort_values(SqlValue *v, uint64_t n)
{
    qsort(v, n, sizeof *v, value_cmp);
}

/* Reorder v so that v[k] holds the value a sort would put there, with
 * nothing larger before it and nothing smaller after it (quickselect,
 * Hoare partitions around a median of three): O(n) on average, where a
 * percentile used to sort all n values. */
static void select_kth(SqlValue *v, uint64_t n, uint64_t k)
{
    int64_t lo = 0, hi = (int64_t)n - 1, kk = (int64_t)k;
    SqlValue t;
#define SWAPV(a, b) (t = v[a], v[a] = v[b], v[b] = t)
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (sqlv_cmp(&v[mid], &v[lo]) < 0)
            SWAPV(mid, lo);
        if (sqlv_cmp(&v[hi], &v[lo]) < 0)
            SWAPV(hi, lo);
        if (sqlv_cmp(&v[hi], &v[mid]) < 0)
            SWAPV(hi, mid);
        SqlValue pivot = v[mid];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (sqlv_cmp(&v[i], &pivot) < 0)
                i++;
            while (sqlv_cmp(&v[j], &pivot) > 0)
                j--;
            if (i <= j) {
                SWAPV(i, j);
                i++;
                j--;
            }
        }
        /* [lo, j] <= pivot <= [i, hi]; between them, values equal to it */
        if (kk <= j)
            hi = j;
        else if (kk >= i)
            lo = i;
        else
            break;
    }
#undef SWAPV
}

static int agg_push_val(SqlCtx *cx, SqlAggState *st, const SqlValue *v)
{
    if (st->n_vals == st->cap_vals) {
        uint64_t nc = st->cap_vals ? st->cap_vals * 2 : 16;
        SqlValue *nv = qr_arena_alloc(cx->arena, nc * sizeof *nv);
        if (!nv)
            return sql_nomem(cx);
        if (st->n_vals)
            memcpy(nv, st->vals, st->n_vals * sizeof *nv);
        st->vals = nv;
        st->cap_vals = nc;
    }
    st->vals[st->n_vals++] = *v;
    return QR_OK;
}

static int agg_step_keep(SqlCtx *cx, const SqlAgg *a, SqlAggState *st, const SqlEvalRow *r,
                         bool *keep)
{
    if (a->filter) {
        bool pass;
        int frc = sql_expr_test(cx, a->filter, r, &pass);
        if (frc || !pass)
            return frc;
    }
    if (a->kind == SA_COUNT_STAR) {
        st->count++;
        return QR_OK;
    }
    SqlValue v;
    int rc = sql_expr_eval(cx, a->arg, r, &v);
    if (rc)
        return rc;
    if (a->kind == SA_ARRAY_AGG) {
        /* NULLs are elements too; kept as (order key, value) pairs */
        SqlValue k = sqlv_null();
        *keep = true;
        if ((a->arg2 && (rc = sql_expr_eval(cx, a->arg2, r, &k))) || (rc = sqlv_own(cx, &k)) ||
            (rc = agg_push_val(cx, st, &k)) || (rc = sqlv_own(cx, &v)))
            return rc;
        return agg_push_val(cx, st, &v);
    }
    if (v.is_null)
        return QR_OK;
    if (a->distinct || a->kind == SA_PCT_CONT || a->kind == SA_PCT_DISC || a->kind == SA_STRING_AGG) {
        /* kept past the row: strings are copied */
        if (a->kind == SA_STRING_AGG) {
            /* keep value and delimiter pairs */
            SqlValue d;
            if ((rc = sql_expr_eval(cx, a->arg2, r, &d)) || (rc = sqlv_own(cx, &d)) ||
                (rc = agg_push_val(cx, st, &d)))
                return rc;
        }
        *keep = true;
        if ((rc = sqlv_own(cx, &v)))
            return rc;
        return agg_push_val(cx, st, &v);
    }
    st->count++;
    switch (a->kind) {
    case SA_SUM:
    case SA_AVG:
        if (sqlt_is_int(v.type) && !st->sum_is_f) {
            if (__builtin_add_overflow(st->sum_i, v.u.i, &st->sum_i)) {
                if (a->kind == SA_SUM)
                    return sql_err_at(cx, -1, QR_EINVAL, "22003", "bigint out of range");
                st->sum_is_f = true;
                st->sum_f = (double)st->sum_i + (double)v.u.i;
            }
        } else {
            if (!st->sum_is_f) {
                st->sum_is_f = true;
                st->sum_f = (double)st->sum_i;
            }
            double d = v.u.f;
            if (v.type == QR_SQL_NUMERIC || sqlt_is_int(v.type)) {
                SqlValue f;
                if ((rc = sqlv_cast(cx, &v, QR_SQL_FLOAT8, -1, &f)))
                    return rc;
                d = f.u.f;
            }
            st->sum_f += d;
        }
        break;
    case SA_MIN:
    case SA_MAX: {
        int c = st->has ? sqlv_cmp(&v, &st->best) : 0;
        if (!st->has || (a->kind == SA_MIN ? c < 0 : c > 0)) {
            *keep = true;
            if ((rc = sqlv_own(cx, &v)))
                return rc;
            st->best = v;
            st->has = true;
        }
        break;
    }
    case SA_BOOL_AND:
        st->bool_acc = st->has ? st->bool_acc && v.u.b : v.u.b;
        st->has = true;
        break;
    case SA_BOOL_OR:
        st->bool_acc = st->has ? st->bool_acc || v.u.b : v.u.b;
        st->has = true;
        break;
    default:
        break;
    }
    return QR_OK;
}

/* One row into one aggregate.  What the argument's evaluation allocated is
 * given back unless the state kept it (a new min/max, a distinct value). */
int sql_agg_step(SqlCtx *cx, const SqlAgg *a, SqlAggState *st, const SqlEvalRow *r)
{
    QrArenaMark m = qr_arena_mark(cx->arena);
    bool keep = false;
    int rc = agg_step_keep(cx, a, st, r, &keep);
    if (rc == QR_OK && !keep)
        qr_arena_release(cx->arena, m);
    return rc;
}

/* array_agg: the (key, value) pairs in key order (stable: input order for
 * equal keys, NULL keys last), printed as an array's text form. */
static int array_agg_final(SqlCtx *cx, const SqlAgg *a, SqlAggState *st, SqlValue *out)
{
    uint64_t n = st->n_vals / 2;
    if (!n)
        return QR_OK;
    SqlValue *el = qr_arena_alloc(cx->arena, n * sizeof *el);
    uint64_t *ix = qr_arena_alloc(cx->arena, n * sizeof *ix);
    if (!el || !ix)
        return sql_nomem(cx);
    for (uint64_t i = 0; i < n; i++)
        ix[i] = i;
    for (uint64_t i = 1; a->arg2 && i < n; i++) { /* insertion sort: groups are small */
        uint64_t x = ix[i], j = i;
        const SqlValue *kx = &st->vals[2 * x];
        while (j > 0) {
            const SqlValue *kp = &st->vals[2 * ix[j - 1]];
            int c = kp->is_null ? (kx->is_null ? 0 : 1) : kx->is_null ? -1 : sqlv_cmp(kp, kx);
            if (a->desc && !kp->is_null && !kx->is_null)
                c = -c;
            if (c <= 0)
                break;
            ix[j] = ix[j - 1];
            j--;
        }
        ix[j] = x;
    }
    for (uint64_t i = 0; i < n; i++)
        el[i] = st->vals[2 * ix[i] + 1];
    return sqlv_array_text(cx, el, n, out);
}

int sql_agg_final(SqlCtx *cx, const SqlAgg *a, SqlAggState *st, SqlValue *out)
{
    *out = sqlv_null();
    out->type = a->type;
    int rc;
    if (a->distinct && a->kind != SA_STRING_AGG && st->n_vals) {
        sql_sort_values(st->vals, st->n_vals);
        uint64_t k = 0;
        for (uint64_t i = 0; i < st->n_vals; i++)
            if (k == 0 || sqlv_cmp(&st->vals[k - 1], &st->vals[i]) != 0)
                st->vals[k++] = st->vals[i];
        st->n_vals = k;
        if (a->kind != SA_PCT_CONT && a->kind != SA_PCT_DISC) {
            SqlAggState s2;
            memset(&s2, 0, sizeof s2);
            SqlAgg plain = *a;
            plain.distinct = false;
            plain.filter = NULL;   /* applied when the values were collected */
            SqlExpr colx = {.kind = SE_COL, .col = 0, .type = a->arg->type};
            plain.arg = &colx;
            for (uint64_t i = 0; i < k; i++) {
                SqlEvalRow r = {.row = &st->vals[i], .doc = -1};
                if ((rc = sql_agg_step(cx, &plain, &s2, &r)))
                    return rc;
            }
            return sql_agg_final(cx, &plain, &s2, out);
        }
    }
    switch (a->kind) {
    case SA_COUNT_STAR:
    case SA_COUNT:
        *out = sqlv_int(a->distinct ? (int64_t)st->n_vals : st->count);
        return QR_OK;
    case SA_SUM:
        if (!st->count)
            return QR_OK;
        if (st->sum_is_f)
            *out = sqlv_float(st->sum_f);
        else
            *out = sqlv_int(st->sum_i);
        out->type = a->type;
        if (a->type == QR_SQL_FLOAT8 && !st->sum_is_f)
            *out = sqlv_float((double)st->sum_i);
        return QR_OK;
    case SA_AVG:
        if (!st->count)
            return QR_OK;
        *out = sqlv_float((st->sum_is_f ? st->sum_f : (double)st->sum_i) / (double)st->count);
        return QR_OK;
    case SA_MIN:
    case SA_MAX:
        if (st->has) {
            *out = st->best;
            out->type = a->type;
        }
        return QR_OK;
    case SA_BOOL_AND:
    case SA_BOOL_OR:
        if (st->has)
            *out = sqlv_bool(st->bool_acc);
        return QR_OK;
    case SA_ARRAY_AGG:
        return array_agg_final(cx, a, st, out);
    case SA_STRING_AGG: {
        if (!st->n_vals)
            return QR_OK;
        QrBuf b;
        qr_buf_init(&b);
        for (uint64_t i = 0; i + 1 < st->n_vals; i += 2) {
            if (i && !st->vals[i].is_null)
                qr_buf_append(&b, st->vals[i].u.s.s, st->vals[i].u.s.n);
            SqlValue t;
            if (sqlv_cast(cx, &st->vals[i + 1], QR_SQL_TEXT, -1, &t) == QR_OK)
                qr_buf_append(&b, t.u.s.s, t.u.s.n);
        }
        char *s = qr_arena_strndup(cx->arena, b.data ? (char *)b.data : "", b.len);
        size_t n = b.len;
        qr_buf_free(&b);
        if (!s)
            return sql_nomem(cx);
        *out = sqlv_text(s, n);
        return QR_OK;
    }
    case SA_PCT_CONT:
    case SA_PCT_DISC: {
        if (!st->n_vals)
            return QR_OK;
        SqlValue fv;
        SqlEvalRow none = {.doc = -1};
        if ((rc = sql_expr_eval(cx, a->arg2, &none, &fv)))
            return rc;
        SqlValue ff;
        if ((rc = sqlv_cast(cx, &fv, QR_SQL_FLOAT8, a->arg2->loc, &ff)))
            return rc;
        double p = ff.u.f;
        if (fv.is_null)
            return QR_OK;
        if (p < 0 || p > 1 || isnan(p))
            return sql_err_at(cx, a->arg2->loc, QR_EINVAL, "22003",
                              "percentile value %g is not between 0 and 1", p);
        /* DISTINCT values arrive sorted; others are only partly ordered,
         * enough to put the one or two order statistics in place */
        uint64_t n = st->n_vals;
        if (a->kind == SA_PCT_DISC) {
            /* the first value whose position >= p * n */
            double pos = p * (double)n;
            uint64_t k = pos <= 0 ? 0 : (uint64_t)ceil(pos) - 1;
            if (k >= n)
                k = n - 1;
            if (!a->distinct)
                select_kth(st->vals, n, k);
            *out = st->vals[k];
            out->type = a->type;
            return QR_OK;
        }
        double pos = p * (double)(n - 1);
        uint64_t lo = (uint64_t)floor(pos), hi = (uint64_t)ceil(pos);
        if (!a->distinct) {
            select_kth(st->vals, n, lo);
            if (hi != lo) {
                /* the next order statistic: the least value after lo */
                uint64_t m = lo + 1;
                for (uint64_t i = lo + 2; i < n; i++)
                    if (sqlv_cmp(&st->vals[i], &st->vals[m]) < 0)
                        m = i;
                SqlValue t = st->vals[hi];
                st->vals[hi] = st->vals[m];
                st->vals[m] = t;
            }
        }
        SqlValue lv, hv;
        if ((rc = sqlv_cast(cx, &st->vals[lo], QR_SQL_FLOAT8, -1, &lv)) ||
            (rc = sqlv_cast(cx, &st->vals[hi], QR_SQL_FLOAT8, -1, &hv)))
            return rc;
        if (sqlt_is_ts(a->arg->type)) {
            double x = (double)st->vals[lo].u.i, y = (double)st->vals[hi].u.i;
            out->is_null = false;
            out->u.i = (int64_t)llround(x + (y - x) * (pos - (double)lo));
            return QR_OK;
        }
        *out = sqlv_float(lv.u.f + (hv.u.f - lv.u.f) * (pos - (double)lo));
        return QR_OK;
    }
    }
    return QR_OK;
}


int sql_agg_merge_part(SqlCtx *cx, const SqlAgg *A, SqlAggState *st, const SqlColAggPart *P,
                       int64_t group_rows)
{
    if (A->kind == SA_COUNT_STAR) {
        st->count += group_rows;
        return QR_OK;
    }
    if (!P->count)
        return QR_OK;
    bool fl = sqlt_is_float(A->arg->type);
    switch (A->kind) {
    case SA_SUM:
    case SA_AVG:
        if (!fl && P->sum_is_f && A->kind == SA_SUM)
            return sql_err_at(cx, -1, QR_EINVAL, "22003", "bigint out of range");
        if (!P->sum_is_f && !st->sum_is_f) {
            if (!__builtin_add_overflow(st->sum_i, P->sum_i, &st->sum_i))
                break;
            if (A->kind == SA_SUM)
                return sql_err_at(cx, -1, QR_EINVAL, "22003", "bigint out of range");
            st->sum_is_f = true;
            st->sum_f = (double)st->sum_i + (double)P->sum_i;
            break;
        }
        if (!st->sum_is_f) {
            st->sum_is_f = true;
            st->sum_f = (double)st->sum_i;
        }
        st->sum_f += P->sum_is_f ? P->sum_f : (double)P->sum_i;
        break;
    case SA_MIN:
    case SA_MAX: {
        bool mn = A->kind == SA_MIN;
        SqlValue v = fl ? sqlv_float(mn ? P->min_f : P->max_f) : sqlv_int(mn ? P->min_i : P->max_i);
        v.type = A->arg->type;
        int c = st->has ? sqlv_cmp(&v, &st->best) : 0;
        if (!st->has || (mn ? c < 0 : c > 0))
            st->best = v;
        st->has = true;
        break;
    }
    default:
        break;
    }
    st->count += P->count;
    return QR_OK;
}

const char *sql_agg_name(const SqlAgg *a)
{
    static const char *N[] = {"count", "count", "sum", "avg", "min", "max", "percentile_cont",
                              "percentile_disc", "bool_and", "bool_or", "string_agg",
                              "array_agg"};
    return (unsigned)a->kind < sizeof N / sizeof *N ? N[a->kind] : "?";
}
