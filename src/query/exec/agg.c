/*
 * agg.c — aggregate functions: the running state of one aggregate over the
 * rows of one group (count, sum, avg, min, max, bool_and / bool_or,
 * string_agg, array_agg, stddev / variance, percentile_cont /
 * percentile_disc, DISTINCT, ORDER BY inside the call and FILTER), its
 * final value, taking a row back out (window frames), and merging partial
 * states read from column blocks.
 *
 * Layer: query/ (SQL execution).  Used by op_hash_agg.c and op_window.c.
 */
#include "query/exec/exec.h"
#include "store/decimal.h"

#include "query/colwalk.h"

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

/* Percentiles of integers, timestamps and floats keep order keys instead
 * of values: unsigned order of the keys is the numbers' order (a double's
 * bits flipped so that negatives come first and NaN, made one NaN, last,
 * as PostgreSQL orders it), and a selection over plain integers is several
 * times faster than over SqlValues. */
static char num_kind(const SqlAgg *a)
{
    if ((a->kind != SA_PCT_CONT && a->kind != SA_PCT_DISC) || a->distinct)
        return 0;
    QrSqlType t = a->arg->type;
    return sqlt_is_int(t) || sqlt_is_ts(t)           ? 'i'
           : sqlt_is_float(t) && t != QR_SQL_NUMERIC ? 'f'
                                                     : 0; /* (numeric: as SqlValues) */
}

/* An integer sum as a double (sum_i, or the 128-bit sum past int64). */
static double agg_int_sum(const SqlAggState *st)
{
    return st->sum_is_w ? (double)st->sum_w : (double)st->sum_i;
}

bool sql_agg_same_keys(const SqlAgg *a, const SqlAgg *b)
{
    return num_kind(a) && num_kind(a) == num_kind(b) && !a->filter && !b->filter &&
           !a->n_order && !b->n_order && a->arg->type == b->arg->type &&
           sql_expr_same(a->arg, b->arg);
}

static SqlValue value_of_key(const SqlAgg *a, uint64_t k)
{
    if (num_kind(a) == 'f') {
        uint64_t u = k >> 63 ? k & ~(1ull << 63) : ~k;
        double d;
        memcpy(&d, &u, sizeof d);
        return sqlv_float(d);
    }
    return sqlv_int((int64_t)(k ^ (1ull << 63)));
}

static int agg_push_key(SqlCtx *cx, SqlAggState *st, const uint64_t *k, uint64_t n)
{
    if (st->n_keys + n > st->cap_keys) {
        uint64_t nc = st->cap_keys ? st->cap_keys : 64;
        while (nc < st->n_keys + n)
            nc *= 2;
        uint64_t *nk = qr_arena_alloc(cx->arena, nc * sizeof *nk);
        if (!nk)
            return sql_nomem(cx);
        if (st->n_keys)
            memcpy(nk, st->keys, st->n_keys * sizeof *nk);
        st->keys = nk;
        st->cap_keys = nc;
    }
    if (n)
        memcpy(st->keys + st->n_keys, k, n * sizeof *k);
    st->n_keys += n;
    return QR_OK;
}

/* A state holding both keys and values (rows of other types than the
 * argument's): the keys become values. */
static int keys_to_vals(SqlCtx *cx, const SqlAgg *a, SqlAggState *st)
{
    for (uint64_t i = 0; i < st->n_keys; i++) {
        SqlValue v = value_of_key(a, st->keys[i]);
        v.type = a->arg->type;
        int rc = agg_push_val(cx, st, &v);
        if (rc)
            return rc;
    }
    st->n_keys = 0;
    return QR_OK;
}


/* ---- exact numeric sums ---- */

#define NUM128_DIGITS 36 /* digits a value may have to join the int128 sum */

static const __int128 *pow10_128(void)
{
    static __int128 p[39];
    static bool init;
    if (!init) { /* (idempotent: racing threads write the same values) */
        p[0] = 1;
        for (int i = 1; i < 39; i++)
            p[i] = p[i - 1] * 10;
        init = true;
    }
    return p;
}

/* A numeric's canonical text as m * 10^-scale; false for NaN, the
 * infinities and values of more than NUM128_DIGITS digits. */
static bool num_parse128(const char *s, size_t n, __int128 *m, int *scale)
{
    size_t i = 0;
    bool neg = n && s[0] == '-';
    i += neg;
    __int128 v = 0;
    int nd = 0, sc = -1;
    for (; i < n; i++) {
        if (s[i] == '.' && sc < 0) {
            sc = 0;
            continue;
        }
        if (s[i] < '0' || s[i] > '9' || ++nd > NUM128_DIGITS)
            return false;
        v = v * 10 + (s[i] - '0');
        sc += sc >= 0;
    }
    if (nd == 0)
        return false;
    *m = neg ? -v : v;
    *scale = sc < 0 ? 0 : sc;
    return true;
}

/* m * 10^-scale as numeric text in the arena. */
static int num_of128(SqlCtx *cx, __int128 m, int scale, SqlValue *out)
{
    char dig[48], buf[96];
    unsigned __int128 u = m < 0 ? -(unsigned __int128)m : (unsigned __int128)m;
    int nd = 0;
    do {
        dig[nd++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    while (nd <= scale)
        dig[nd++] = '0';
    int o = 0;
    if (m < 0)
        buf[o++] = '-';
    for (int k = nd - 1; k >= 0; k--) {
        buf[o++] = dig[k];
        if (k == scale && scale > 0)
            buf[o++] = '.';
    }
    char *p = qr_arena_strndup(cx->arena, buf, (size_t)o);
    if (!p)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    *out = sqlv_text(p, (size_t)o);
    out->type = QR_SQL_NUMERIC;
    return QR_OK;
}

/* The int128 sum moved into sum_big (exact decimal), which the state keeps. */
static int num_spill(SqlCtx *cx, SqlAggState *st, const SqlValue *v, bool *keep)
{
    SqlValue acc;
    int rc;
    if (st->sum_big.is_null)
        st->sum_big.type = QR_SQL_NUMERIC;
    if ((rc = num_of128(cx, st->sum_n, st->sum_scale, &acc)) ||
        (rc = st->sum_big.is_null ? (st->sum_big = acc, QR_OK)
                                  : sqln_arith(cx, '+', &st->sum_big, &acc, &st->sum_big)) ||
        (v && (rc = sqln_arith(cx, '+', &st->sum_big, v, &st->sum_big))) ||
        (rc = sqlv_own(cx, &st->sum_big)))
        return rc;
    st->sum_n = 0;
    *keep = true;
    return QR_OK;
}

/* One numeric into an exact sum: int128 at the largest scale seen, the
 * decimal code past it; NaN and infinities as PostgreSQL adds them. */
/* m * 10^-sc into the exact sum (int128 at the largest scale, the decimal
 * code past it); v is the same value as numeric text, or NULL (made when
 * needed). */
static int num_add128(SqlCtx *cx, SqlAggState *st, __int128 m, int sc, const SqlValue *v,
                      bool *keep)
{
    SqlValue made;
    const __int128 *P = pow10_128();
    __int128 r;
    if (sc > st->sum_scale) {
        if (sc - st->sum_scale > 38 || __builtin_mul_overflow(st->sum_n, P[sc - st->sum_scale], &r))
            goto spill;
        st->sum_n = r;
        st->sum_scale = sc;
    } else if (sc < st->sum_scale) {
        if (st->sum_scale - sc > 38 || __builtin_mul_overflow(m, P[st->sum_scale - sc], &r))
            goto spill;
        m = r;
        sc = st->sum_scale;
    }
    if (__builtin_add_overflow(st->sum_n, m, &r))
        goto spill;
    st->sum_n = r;
    return QR_OK;
spill:
    if (!v) {
        int rc = num_of128(cx, m, sc, &made);
        if (rc)
            return rc;
        v = &made;
    }
    return num_spill(cx, st, v, keep);
}

static void num_begin(SqlAggState *st)
{
    if (!st->sum_has_n) {
        st->sum_has_n = true;
        st->sum_big = sqlv_null();
    }
}

/* NaN ('n') or an infinity into the sum, as PostgreSQL adds them. */
static void num_special(SqlAggState *st, char sp)
{
    if (st->sum_special != 'n')
        st->sum_special = !st->sum_special || st->sum_special == sp ? sp : 'n';
}

/* One numeric into an exact sum; NaN and infinities as PostgreSQL adds them. */
static int num_add(SqlCtx *cx, SqlAggState *st, const SqlValue *v, bool *keep)
{
    num_begin(st);
    const char *s = v->u.s.s;
    size_t n = v->u.s.n;
    char sp = n && (s[0] == 'N') ? 'n' : n && s[0] == 'I' ? 'p' : n > 1 && s[1] == 'I' ? 'm' : 0;
    if (sp)
        num_special(st, sp);
    if (sp || st->sum_special)
        return QR_OK;
    __int128 m;
    int sc;
    if (!num_parse128(s, n, &m, &sc))
        return num_spill(cx, st, v, keep);
    return num_add128(cx, st, m, sc, v, keep);
}

/* Aggregates whose rows' values are kept until the end: DISTINCT, ORDER
 * BY inside the call, string_agg and array_agg.  Each row is a tuple of
 * COLLECT_WIDTH(a) values: [argument, second argument (string_agg's
 * delimiter) or NULL, ORDER BY keys...].  (Percentiles keep bare values.) */
static bool collects(const SqlAgg *a)
{
    return a->kind != SA_PCT_CONT && a->kind != SA_PCT_DISC &&
           (a->distinct || a->n_order || a->kind == SA_STRING_AGG || a->kind == SA_ARRAY_AGG ||
            a->kind == SA_JSON_AGG || a->kind == SA_JSONB_AGG);
}
#define COLLECT_WIDTH(a) (2 + (a)->n_order)

static int collect_row(SqlCtx *cx, const SqlAgg *a, SqlAggState *st, const SqlEvalRow *r,
                       const SqlValue *v)
{
    SqlValue t[2];
    int rc;
    t[0] = *v;
    t[1] = sqlv_null();
    if (a->arg2 && (rc = sql_expr_eval(cx, a->arg2, r, &t[1])))
        return rc;
    for (int k = 0; k < 2; k++)
        if ((rc = sqlv_own(cx, &t[k])) || (rc = agg_push_val(cx, st, &t[k])))
            return rc;
    for (int k = 0; k < a->n_order; k++) {
        SqlValue o;
        if ((rc = sql_expr_eval(cx, a->order[k], r, &o)) || (rc = sqlv_own(cx, &o)) ||
            (rc = agg_push_val(cx, st, &o)))
            return rc;
    }
    return QR_OK;
}

static int agg_step_keep(SqlCtx *cx, const SqlAgg *a, SqlAggState *st, const SqlEvalRow *r,
                         bool *keep)
{
    if (a->kind == SA_GROUP_KEY || a->kind == SA_GROUPING)
        return QR_OK; /* the hash aggregate knows them from the group itself */
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
    if (v.is_null && a->kind != SA_ARRAY_AGG && a->kind != SA_JSON_AGG &&
        a->kind != SA_JSONB_AGG) /* array_agg and json_agg keep NULLs */
        return QR_OK;
    if (collects(a)) {
        *keep = true; /* kept past the row: strings are copied */
        return collect_row(cx, a, st, r, &v);
    }
    char nk = num_kind(a);
    if ((nk == 'i' && (sqlt_is_int(v.type) || sqlt_is_ts(v.type))) || (nk == 'f' && sqlt_is_float(v.type))) {
        uint64_t k = nk == 'f' ? colwalk_okey_double(v.u.f) : colwalk_okey_int(v.u.i);
        *keep = true; /* the keys' array may have grown in the arena */
        return agg_push_key(cx, st, &k, 1);
    }
    if (a->distinct || a->kind == SA_PCT_CONT || a->kind == SA_PCT_DISC) {
        *keep = true;
        if ((rc = sqlv_own(cx, &v)))
            return rc;
        return agg_push_val(cx, st, &v);
    }
    st->count++;
    switch (a->kind) {
    case SA_SUM:
    case SA_AVG:
        if (v.type == QR_SQL_NUMERIC)
            return num_add(cx, st, &v, keep);
        if (sqlt_is_int(v.type) && !st->sum_is_f) {
            int64_t t; /* past int64: avg goes on exactly in 128 bits */
            if (st->sum_is_w) {
                st->sum_w += v.u.i;
            } else if (__builtin_add_overflow(st->sum_i, v.u.i, &t)) {
                if (a->kind == SA_SUM)
                    return sql_err_at(cx, -1, QR_EINVAL, "22003", "bigint out of range");
                st->sum_is_w = true;
                st->sum_w = (__int128)st->sum_i + v.u.i;
            } else {
                st->sum_i = t;
            }
        } else {
            if (!st->sum_is_f) {
                st->sum_is_f = true;
                st->sum_f = agg_int_sum(st);
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
    case SA_STDDEV_SAMP:
    case SA_STDDEV_POP:
    case SA_VAR_SAMP:
    case SA_VAR_POP: {
        /* PostgreSQL's float8_accum (Youngs-Cramer): no cancellation as a
         * sum of squares minus the squared sum would suffer */
        double x = v.u.f, n = (double)st->count;
        if (v.type != QR_SQL_FLOAT8 && v.type != QR_SQL_FLOAT4) {
            SqlValue f;
            if ((rc = sqlv_cast(cx, &v, QR_SQL_FLOAT8, -1, &f)))
                return rc;
            x = f.u.f;
        }
        st->sum_f += x;
        if (st->count > 1) {
            double t = x * n - st->sum_f;
            st->sxx += t * t / (n * (n - 1));
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

/* The final value of a collecting aggregate: its tuples in ORDER BY order
 * (DISTINCT: by the arguments, each distinct once), then string_agg and
 * array_agg read them in that order and the others aggregate them as plain
 * rows.  The state is left as it was. */
static int final_collected(SqlCtx *cx, const SqlAgg *a, SqlAggState *st, SqlValue *out)
{
    int W = COLLECT_WIDTH(a), rc;
    uint64_t n = st->n_vals / (uint64_t)W;
    const SqlValue *t = st->vals;
    if (n && (a->distinct || a->n_order)) {
        /* the ORDER BY keys, then the arguments: equal arguments are
         * neighbours (with DISTINCT the keys are among the arguments) */
        SqlSortKey sk[2 + 64];
        int nk = 0;
        for (int k = 0; k < a->n_order && nk < 64; k++)
            sk[nk++] = (SqlSortKey){2 + k, a->order_desc[k], a->order_nulls_first[k], NULL};
        if (a->distinct) {
            sk[nk++] = (SqlSortKey){0, false, false, NULL};
            sk[nk++] = (SqlSortKey){1, false, false, NULL};
        }
        uint64_t *idx;
        if ((rc = sql_sort_index(cx, t, n, W, sk, nk, &idx)))
            return rc;
        SqlValue *o = qr_arena_alloc(cx->arena, (n * (uint64_t)W + 1) * sizeof *o);
        if (!o)
            return sql_nomem(cx);
        uint64_t k = 0;
        for (uint64_t i = 0; i < n; i++) {
            const SqlValue *row = t + idx[i] * (uint64_t)W;
            const SqlValue *prev = k ? o + (k - 1) * (uint64_t)W : NULL;
            if (a->distinct && prev && sqlv_same(&prev[0], &row[0]) && sqlv_same(&prev[1], &row[1]))
                continue;
            memcpy(o + k++ * (uint64_t)W, row, (size_t)W * sizeof *o);
        }
        t = o;
        n = k;
    }
    if (n == 0 && a->kind != SA_COUNT)
        return QR_OK; /* NULL */
    if (a->kind == SA_STRING_AGG) {
        QrBuf b;
        qr_buf_init(&b);
        for (uint64_t i = 0; i < n; i++) {
            const SqlValue *row = t + i * (uint64_t)W;
            if (i && !row[1].is_null) /* the delimiter before a value is its own */
                qr_buf_append(&b, row[1].u.s.s, row[1].u.s.n);
            SqlValue x;
            if (sqlv_cast(cx, &row[0], QR_SQL_TEXT, -1, &x) == QR_OK)
                qr_buf_append(&b, x.u.s.s, x.u.s.n);
        }
        char *s = qr_buf_ok(&b) ? qr_arena_strndup(cx->arena, b.data ? (char *)b.data : "", b.len) : NULL;
        size_t len = b.len;
        qr_buf_free(&b);
        if (!s)
            return sql_nomem(cx);
        *out = sqlv_text(s, len);
        return QR_OK;
    }
    if (a->kind == SA_JSON_AGG || a->kind == SA_JSONB_AGG)
        return sqljs_agg(cx, t, n, (uint64_t)W, a->type, out);
    if (a->kind == SA_ARRAY_AGG) {
        SqlValue *el = qr_arena_alloc(cx->arena, (n + 1) * sizeof *el);
        if (!el)
            return sql_nomem(cx);
        for (uint64_t i = 0; i < n; i++)
            el[i] = t[i * (uint64_t)W];
        return sqla_list(cx, QR_SQL_ELEM(a->type), el, n, out);
    }
    SqlAggState s2;
    memset(&s2, 0, sizeof s2);
    SqlAgg plain = *a;
    plain.distinct = false;
    plain.n_order = 0;
    plain.filter = NULL; /* applied when the values were collected */
    SqlExpr colx = {.kind = SE_COL, .col = 0, .type = a->arg->type};
    SqlExpr colx2 = {.kind = SE_COL, .col = 1, .type = a->arg2 ? a->arg2->type : QR_SQL_UNKNOWN};
    plain.arg = &colx;
    plain.arg2 = a->arg2 ? &colx2 : NULL;
    for (uint64_t i = 0; i < n; i++) {
        SqlEvalRow r = {.row = t + i * (uint64_t)W, .doc = -1};
        if ((rc = sql_agg_step(cx, &plain, &s2, &r)))
            return rc;
    }
    return sql_agg_final(cx, &plain, &s2, out);
}

/* percentile_disc / percentile_cont at fraction p of a state's keys: the
 * one or two order statistics selected by rank (colwalk_rank_keys: a few
 * passes, the keys left as they are, so percentiles sharing them take
 * turns), with scratch from the arena given back after. */
static int pct_keys(SqlCtx *cx, const SqlAgg *a, SqlAggState *st, double p, SqlValue *out)
{
    uint64_t n = st->n_keys, *v = st->keys, lt;
    QrArenaMark mark = qr_arena_mark(cx->arena);
    uint64_t *scratch = qr_arena_alloc(cx->arena, (2 * n + 1) * sizeof *scratch);
    if (!scratch)
        return sql_nomem(cx);
    if (a->kind == SA_PCT_DISC) {
        /* the first value whose position >= p * n */
        double pos = p * (double)n;
        uint64_t k = pos <= 0 ? 0 : (uint64_t)ceil(pos) - 1;
        if (k >= n)
            k = n - 1;
        *out = value_of_key(a, colwalk_rank_keys(v, n, k, k, scratch, NULL, &lt));
        out->type = a->type;
        qr_arena_release(cx->arena, mark);
        return QR_OK;
    }
    double pos = p * (double)(n - 1);
    uint64_t lo = (uint64_t)floor(pos), hi = (uint64_t)ceil(pos), hk;
    uint64_t lk = colwalk_rank_keys(v, n, lo, hi, scratch, &hk, &lt);
    qr_arena_release(cx->arena, mark);
    SqlValue lv = value_of_key(a, lk), hv = value_of_key(a, hk);
    if (sqlt_is_ts(a->arg->type)) {
        double x = (double)lv.u.i, y = (double)hv.u.i;
        out->is_null = false;
        out->u.i = (int64_t)llround(x + (y - x) * (pos - (double)lo));
        out->type = a->type;
        return QR_OK;
    }
    double x = num_kind(a) == 'f' ? lv.u.f : (double)lv.u.i, y = num_kind(a) == 'f' ? hv.u.f : (double)hv.u.i;
    *out = sqlv_float(x + (y - x) * (pos - (double)lo));
    return QR_OK;
}

/* sum(numeric): the exact sum at the largest scale added (PostgreSQL's), or
 * NaN / an infinity.  Column-block partial sums of an old float8 numeric
 * column (sum_f) come in as float8's 15 significant digits, at the scale of
 * a numeric(p, s) argument. */
static int num_sum(SqlCtx *cx, const SqlAgg *a, const SqlAggState *st, SqlValue *out)
{
    if (st->sum_special) {
        const char *t = st->sum_special == 'n' ? "NaN" : st->sum_special == 'p' ? "Infinity"
                                                                                 : "-Infinity";
        *out = sqlv_text(t, strlen(t));
        out->type = QR_SQL_NUMERIC;
        return QR_OK;
    }
    int rc;
    if (st->sum_has_n) {
        if ((rc = num_of128(cx, st->sum_n, st->sum_scale, out)))
            return rc;
        if (!st->sum_big.is_null && (rc = sqln_arith(cx, '+', out, &st->sum_big, out)))
            return rc;
        if (!st->sum_is_f && !st->sum_is_w && st->sum_i == 0)
            return QR_OK;
        SqlValue rest; /* (float partials of old float8 segments beside exact values) */
        if ((rc = sqln_from_double(cx, st->sum_is_f ? st->sum_f : agg_int_sum(st), &rest)))
            return rc;
        return sqln_arith(cx, '+', out, &rest, out);
    }
    rc = sqln_from_double(cx, st->sum_is_f ? st->sum_f : agg_int_sum(st), out);
    if (rc || a->arg->typmod < 4)
        return rc;
    return sqln_round(cx, out, (a->arg->typmod - 4) & 0xffff, SQLN_ROUND, out);
}

int sql_agg_final(SqlCtx *cx, const SqlAgg *a, SqlAggState *st, SqlValue *out)
{
    *out = sqlv_null();
    out->type = a->type;
    int rc;
    if (collects(a))
        return final_collected(cx, a, st, out);
    if (a->distinct && st->n_vals) { /* percentiles over distinct values */
        sql_sort_values(st->vals, st->n_vals);
        uint64_t k = 0;
        for (uint64_t i = 0; i < st->n_vals; i++)
            if (k == 0 || sqlv_cmp(&st->vals[k - 1], &st->vals[i]) != 0)
                st->vals[k++] = st->vals[i];
        st->n_vals = k;
    }
    switch (a->kind) {
    case SA_COUNT_STAR:
    case SA_COUNT:
        *out = sqlv_int(a->distinct ? (int64_t)st->n_vals : st->count);
        return QR_OK;
    case SA_SUM:
        if (!st->count)
            return QR_OK;
        if (st->sum_is_w) /* (step and merge refuse it first) */
            return sql_err_at(cx, -1, QR_EINVAL, "22003", "bigint out of range");
        if (st->sum_is_f)
            *out = sqlv_float(st->sum_f);
        else
            *out = sqlv_int(st->sum_i);
        out->type = a->type;
        if (a->type == QR_SQL_FLOAT8 && !st->sum_is_f)
            *out = sqlv_float((double)st->sum_i);
        if (a->type == QR_SQL_NUMERIC)
            return num_sum(cx, a, st, out);
        return QR_OK;
    case SA_AVG:
        if (!st->count)
            return QR_OK;
        if (a->type == QR_SQL_NUMERIC) { /* at the division's scale, as PostgreSQL */
            SqlValue sum;
            int nrc = num_sum(cx, a, st, &sum);
            return nrc ? nrc : sqln_avg(cx, &sum, st->count, out);
        }
        *out = sqlv_float((st->sum_is_f ? st->sum_f : agg_int_sum(st)) / (double)st->count);
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
    case SA_STDDEV_SAMP:
    case SA_STDDEV_POP:
    case SA_VAR_SAMP:
    case SA_VAR_POP: {
        bool pop = a->kind == SA_STDDEV_POP || a->kind == SA_VAR_POP;
        if (st->count < (pop ? 1 : 2))
            return QR_OK;
        double var = st->sxx <= 0 ? 0 : st->sxx / (double)(pop ? st->count : st->count - 1);
        *out = sqlv_float(a->kind == SA_STDDEV_SAMP || a->kind == SA_STDDEV_POP ? sqrt(var) : var);
        return QR_OK;
    }
    case SA_STRING_AGG:
    case SA_ARRAY_AGG:     /* (collected) */
    case SA_JSON_AGG:
    case SA_JSONB_AGG:
    case SA_GROUP_KEY:
    case SA_GROUPING:      /* (the hash aggregate's) */
        return QR_OK;
    case SA_PCT_CONT:
    case SA_PCT_DISC: {
        if (st->n_keys && st->n_vals && (rc = keys_to_vals(cx, a, st)))
            return rc;
        if (!st->n_vals && !st->n_keys)
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
        if (st->n_keys)
            return pct_keys(cx, a, st, p, out);
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


/* A scaled numeric column's partial state (its int64s are value * 10^s, s
 * the column's numeric(p, s) scale; NaN is DEC_SCALED_NAN, the maximum):
 * sums exactly, min / max as numerics. */
static int num_merge_part(SqlCtx *cx, const SqlAgg *A, SqlAggState *st, const SqlColAggPart *P)
{
    int scale = A->arg->typmod >= 4 ? (A->arg->typmod - 4) & 0xffff : 0;
    bool nan = P->max_i == DEC_SCALED_NAN;
    st->count += P->count;
    switch (A->kind) {
    case SA_SUM:
    case SA_AVG: {
        num_begin(st);
        if (nan)
            num_special(st, 'n');
        if (st->sum_special)
            return QR_OK;
        bool keep = false;
        __int128 m = P->sum_is_w ? P->sum_w : (__int128)P->sum_i;
        return num_add128(cx, st, m, scale, NULL, &keep);
    }
    case SA_MIN:
    case SA_MAX: {
        bool mn = A->kind == SA_MIN;
        char buf[48];
        SqlValue v;
        if (P->is_int) {
            int n = dec_from_scaled(mn ? P->min_i : P->max_i, scale, buf);
            v = sqlv_text(buf, (size_t)n);
            v.type = QR_SQL_NUMERIC;
        } else { /* a float8 column of a table made before numerics were exact */
            int rc = sqln_from_double(cx, mn ? P->min_f : P->max_f, &v);
            if (rc || (A->arg->typmod >= 4 && (rc = sqln_typmod(cx, &v, A->arg->typmod, -1, &v))))
                return rc;
        }
        int c = st->has ? sqlv_cmp(&v, &st->best) : 0;
        if (!st->has || (mn ? c < 0 : c > 0)) {
            int rc = sqlv_own(cx, &v);
            if (rc)
                return rc;
            st->best = v;
        }
        st->has = true;
        return QR_OK;
    }
    case SA_COUNT:
        return QR_OK;
    default:
        return sql_err_at(cx, -1, QR_EINTERNAL, "XX000", "%s of a numeric column from column blocks",
                          sql_agg_name(A));
    }
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
    if (A->arg->type == QR_SQL_NUMERIC &&
        (P->is_int || A->kind == SA_MIN || A->kind == SA_MAX)) /* value * 10^scale, or old float8 */
        return num_merge_part(cx, A, st, P);
    switch (A->kind) {
    case SA_SUM:
    case SA_AVG:
        if (!fl && P->sum_is_w && A->kind == SA_SUM)
            return sql_err_at(cx, -1, QR_EINVAL, "22003", "bigint out of range");
        if (!P->sum_is_f && !st->sum_is_f) { /* integers: exact, in 128 bits past int64 */
            __int128 t = (st->sum_is_w ? st->sum_w : (__int128)st->sum_i) +
                         (P->sum_is_w ? P->sum_w : (__int128)P->sum_i);
            if (!st->sum_is_w && t >= INT64_MIN && t <= INT64_MAX) {
                st->sum_i = (int64_t)t;
                break;
            }
            if (A->kind == SA_SUM)
                return sql_err_at(cx, -1, QR_EINVAL, "22003", "bigint out of range");
            st->sum_is_w = true;
            st->sum_w = t;
            break;
        }
        if (!st->sum_is_f) {
            st->sum_is_f = true;
            st->sum_f = agg_int_sum(st);
        }
        st->sum_f += P->sum_is_f ? P->sum_f : P->sum_is_w ? (double)P->sum_w : (double)P->sum_i;
        break;
    case SA_PCT_CONT:
    case SA_PCT_DISC:
    {
        if (num_kind(A) != (P->vals_f ? 'f' : 'i'))
            return sql_err_at(cx, -1, QR_EINTERNAL, "XX000", "percentile of a column of another type");
        uint64_t base = st->n_keys;
        int rc = agg_push_key(cx, st, P->vals ? (const uint64_t *)P->vals : NULL, P->n_vals);
        if (rc)
            return rc;
        for (uint64_t i = base; i < st->n_keys; i++) { /* values to keys, in place */
            double d;
            memcpy(&d, &st->keys[i], sizeof d);
            st->keys[i] = P->vals_f ? colwalk_okey_double(d) : colwalk_okey_int((int64_t)st->keys[i]);
        }
        break;
    }
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

int sql_agg_unstep(SqlCtx *cx, const SqlAgg *a, SqlAggState *st, const SqlEvalRow *r, bool *done)
{
    *done = false;
    if (a->distinct || a->n_order ||
        (a->kind != SA_COUNT_STAR && a->kind != SA_COUNT && a->kind != SA_SUM && a->kind != SA_AVG))
        return QR_OK;
    if (a->filter) {
        bool pass;
        int rc = sql_expr_test(cx, a->filter, r, &pass);
        if (rc || !pass) {
            *done = rc == QR_OK; /* the row was never counted */
            return rc;
        }
    }
    if (a->kind == SA_COUNT_STAR) {
        st->count--;
        *done = true;
        return QR_OK;
    }
    SqlValue v;
    int rc = sql_expr_eval(cx, a->arg, r, &v);
    if (rc || v.is_null) {
        *done = rc == QR_OK;
        return rc;
    }
    if (a->kind != SA_COUNT) {
        /* exact only while the sum is an integer */
        if (!sqlt_is_int(v.type) || st->sum_is_f || st->sum_is_w ||
            __builtin_sub_overflow(st->sum_i, v.u.i, &st->sum_i))
            return QR_OK;
    }
    st->count--;
    *done = true;
    return QR_OK;
}

const char *sql_agg_name(const SqlAgg *a)
{
    static const char *N[] = {"count", "count", "sum", "avg", "min", "max", "percentile_cont",
                              "percentile_disc", "bool_and", "bool_or", "string_agg",
                              "stddev_samp", "stddev_pop", "var_samp", "var_pop", "array_agg",
                              "(grouping key)", "grouping"};
    return (unsigned)a->kind < sizeof N / sizeof *N ? N[a->kind] : "?";
}
