/*
 * test_column.c — column store: round trips, randomized differential tests
 * of scans/matches against a brute-force model, zone-map skipping,
 * statistics, and damaged input.
 *
 * The model keeps the original values and evaluates predicates with its own
 * arithmetic (long double, exact for int64 and double on x86-64), so it
 * shares nothing with the column's key mapping.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/column.h"
#include "store/column_int.h"
#include "store/crc32c.h"
#include "store/mem.h"

/* ---- rng ---------------------------------------------------------------- */

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static uint64_t rnd_below(uint64_t n) { return n ? rnd() % n : 0; }
static double rnd_unit(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

/* ---- model -------------------------------------------------------------- */

typedef struct Model {
    QrColType t;
    uint32_t n;
    bool *isnull;
    int64_t *iv;
    double *fv;
    bool *bv;
    char **sv;
    size_t *sn;
} Model;

static void model_free(Model *m)
{
    if (m->sv)
        for (uint32_t i = 0; i < m->n; i++)
            free(m->sv[i]);
    free(m->isnull), free(m->iv), free(m->fv), free(m->bv), free(m->sv), free(m->sn);
    memset(m, 0, sizeof *m);
}

enum { D_UNIFORM_SMALL, D_UNIFORM_WIDE, D_SKEWED, D_CONST, D_SPECIAL, D_COUNT };

static const double special_f[] = {0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 1e300, -1e300, 5e-324,
                                   -5e-324, INFINITY, -INFINITY, NAN, 9007199254740992.0,
                                   9007199254740993.0, 3.0};
static const int64_t special_i[] = {INT64_MIN, INT64_MIN + 1, -1, 0, 1, 2, 3, INT64_MAX - 1,
                                    INT64_MAX, 9007199254740992ll, 9007199254740993ll, -4096};
static const char *const word_pool[] = {"", "a", "ab", "abc", "abd", "b", "ba", "bab", "zz",
                                    "z", "\xff", "\xff\xff", "a\0b", "apple", "apricot", "banana"};

static int64_t gen_int(int dist)
{
    switch (dist) {
    case D_UNIFORM_SMALL: return (int64_t)rnd_below(100) - 50;
    case D_UNIFORM_WIDE: return (int64_t)rnd();
    case D_SKEWED: return (int64_t)floor(exp(rnd_unit() * 20)) - 3; /* heavy at small values */
    case D_CONST: return 42;
    default: return special_i[rnd_below(sizeof special_i / sizeof *special_i)];
    }
}

static double gen_float(int dist)
{
    switch (dist) {
    case D_UNIFORM_SMALL: return (double)((int)rnd_below(40) - 20) / 4.0;
    case D_UNIFORM_WIDE: return (rnd_unit() - 0.5) * 1e12;
    case D_SKEWED: return exp(rnd_unit() * 30) - 5;
    case D_CONST: return 1.5;
    default: return special_f[rnd_below(sizeof special_f / sizeof *special_f)];
    }
}

static void gen_str(int dist, char *buf, size_t *n)
{
    if (dist == D_CONST) {
        memcpy(buf, "const", 5);
        *n = 5;
    } else if (dist == D_SPECIAL || dist == D_SKEWED) {
        uint64_t k = dist == D_SKEWED ? (uint64_t)floor(exp(rnd_unit() * 2.7)) - 1 : rnd_below(16);
        const char *w = word_pool[k % 16];
        *n = (k % 16 == 12) ? 3 : strlen(w);
        memcpy(buf, w, *n);
    } else {
        size_t len = rnd_below(dist == D_UNIFORM_SMALL ? 3 : 12);
        for (size_t i = 0; i < len; i++)
            buf[i] = (char)(dist == D_UNIFORM_SMALL ? 'a' + rnd_below(3) : 'a' + rnd_below(26));
        *n = len;
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* PostgreSQL order for doubles: NaN last and equal to itself. */
static int cmp_pg_double(double x, double y)
{
    if (isnan(x) || isnan(y))
        return isnan(x) - isnan(y);
    return (x > y) - (x < y);
}
static int cmp_f64(const void *a, const void *b)
{
    return cmp_pg_double(*(const double *)a, *(const double *)b);
}

typedef struct SRef {
    char *s;
    size_t n;
} SRef;
static int cmp_bytes(const char *a, size_t an, const char *b, size_t bn)
{
    size_t m = an < bn ? an : bn;
    int c = m ? memcmp(a, b, m) : 0;
    return c ? c : (an > bn) - (an < bn);
}
static int cmp_sref(const void *a, const void *b)
{
    const SRef *x = a, *y = b;
    return cmp_bytes(x->s, x->n, y->s, y->n);
}

static void gen_model(Model *m, QrColType t, uint32_t n, int dist, double null_rate, bool sorted)
{
    memset(m, 0, sizeof *m);
    m->t = t;
    m->n = n;
    m->isnull = calloc(n + 1, sizeof *m->isnull);
    for (uint32_t i = 0; i < n; i++)
        m->isnull[i] = rnd_unit() < null_rate;
    switch (t) {
    case QR_COL_INT64:
    case QR_COL_TIMESTAMP:
        m->iv = calloc(n + 1, sizeof *m->iv);
        for (uint32_t i = 0; i < n; i++)
            m->iv[i] = gen_int(dist);
        if (t == QR_COL_TIMESTAMP && dist == D_UNIFORM_WIDE)
            for (uint32_t i = 0; i < n; i++)
                m->iv[i] = 1700000000000000ll + (int64_t)rnd_below(86400000000ull);
        if (sorted)
            qsort(m->iv, n, sizeof *m->iv, cmp_i64);
        break;
    case QR_COL_FLOAT64:
        m->fv = calloc(n + 1, sizeof *m->fv);
        for (uint32_t i = 0; i < n; i++)
            m->fv[i] = gen_float(dist);
        if (sorted)
            qsort(m->fv, n, sizeof *m->fv, cmp_f64);
        break;
    case QR_COL_BOOL:
        m->bv = calloc(n + 1, sizeof *m->bv);
        for (uint32_t i = 0; i < n; i++)
            m->bv[i] = dist == D_CONST ? true : dist == D_SKEWED ? rnd_below(20) == 0 : rnd() & 1;
        if (sorted) {
            uint32_t f = 0;
            for (uint32_t i = 0; i < n; i++)
                f += !m->bv[i];
            for (uint32_t i = 0; i < n; i++)
                m->bv[i] = i >= f;
        }
        break;
    case QR_COL_KEYWORD: {
        m->sv = calloc(n + 1, sizeof *m->sv);
        m->sn = calloc(n + 1, sizeof *m->sn);
        SRef *refs = calloc(n + 1, sizeof *refs);
        char buf[64];
        for (uint32_t i = 0; i < n; i++) {
            size_t len;
            gen_str(dist, buf, &len);
            refs[i].s = malloc(len + 1);
            memcpy(refs[i].s, buf, len);
            refs[i].n = len;
        }
        if (sorted)
            qsort(refs, n, sizeof *refs, cmp_sref);
        for (uint32_t i = 0; i < n; i++) {
            m->sv[i] = refs[i].s;
            m->sn[i] = refs[i].n;
        }
        free(refs);
        break;
    }
    default:
        break;
    }
}

static void model_write(const Model *m, QrBuf *out)
{
    ColWriter *w = colw_new(m->t);
    cr_assert_not_null(w);
    for (uint32_t i = 0; i < m->n; i++) {
        int rc;
        if (m->isnull[i])
            rc = colw_add_null(w);
        else if (m->t == QR_COL_INT64 || m->t == QR_COL_TIMESTAMP)
            rc = colw_add_int(w, m->iv[i]);
        else if (m->t == QR_COL_FLOAT64)
            rc = colw_add_float(w, m->fv[i]);
        else if (m->t == QR_COL_BOOL)
            rc = colw_add_bool(w, m->bv[i]);
        else
            rc = colw_add_str(w, m->sv[i], m->sn[i]);
        cr_assert_eq(rc, QR_OK);
    }
    cr_assert_eq(colw_rows(w), m->n);
    QrError err = {0};
    cr_assert_eq(colw_finish(w, out, &err), QR_OK, "%s", err.message);
    colw_free(w);
}

static Column *open_ok(const QrBuf *b, size_t start)
{
    QrError err = {0};
    Column *c = col_open(b->data + start, b->len - start, "t", &err);
    cr_assert_not_null(c, "open: %s (%s)", err.message, err.detail);
    cr_assert_eq(col_verify(c, &err), QR_OK, "verify: %s (%s)", err.message, err.detail);
    return c;
}

/* Model comparison of row with operand: -1, 0, 1 (exact, long double). */
static int model_cmp(const Model *m, uint32_t row, const ColVal *v)
{
    switch (m->t) {
    case QR_COL_INT64:
    case QR_COL_TIMESTAMP: {
        long double x = m->iv[row];
        if (v->kind == CV_INT)
            return (m->iv[row] > v->u.i) - (m->iv[row] < v->u.i);
        if (isnan(v->u.f))
            return -1;
        long double y = v->u.f;
        return (x > y) - (x < y);
    }
    case QR_COL_FLOAT64: {
        double x = m->fv[row];
        if (v->kind == CV_FLOAT)
            return cmp_pg_double(x, v->u.f);
        if (isnan(x))
            return 1;
        long double a = x, b = v->u.i;
        return (a > b) - (a < b);
    }
    case QR_COL_BOOL:
        return (int)m->bv[row] - (int)v->u.b;
    default:
        return cmp_bytes(m->sv[row], m->sn[row], v->u.str.s, v->u.str.n);
    }
}

static bool model_match(const Model *m, uint32_t row, const ColPred *p)
{
    if (p->op == CP_IS_NULL)
        return m->isnull[row];
    if (p->op == CP_IS_NOT_NULL)
        return !m->isnull[row];
    if (m->isnull[row])
        return false;
    switch (p->op) {
    case CP_EQ: return model_cmp(m, row, &p->v) == 0;
    case CP_NE: return model_cmp(m, row, &p->v) != 0;
    case CP_LT: return model_cmp(m, row, &p->v) < 0;
    case CP_LE: return model_cmp(m, row, &p->v) <= 0;
    case CP_GT: return model_cmp(m, row, &p->v) > 0;
    case CP_GE: return model_cmp(m, row, &p->v) >= 0;
    case CP_BETWEEN: return model_cmp(m, row, &p->v) >= 0 && model_cmp(m, row, &p->hi) <= 0;
    case CP_IN:
        for (size_t i = 0; i < p->n_set; i++)
            if (model_cmp(m, row, &p->set[i]) == 0)
                return true;
        return false;
    case CP_PREFIX:
        return m->sn[row] >= p->v.u.str.n && memcmp(m->sv[row], p->v.u.str.s, p->v.u.str.n) == 0;
    default: return false;
    }
}

/* ---- random operands ---------------------------------------------------- */

static char str_pool[64][64];
static int str_pool_i;

static ColVal rand_operand(const Model *m)
{
    uint32_t row = m->n ? (uint32_t)rnd_below(m->n) : 0;
    bool from_row = m->n && !m->isnull[row] && rnd_below(3) != 0;
    switch (m->t) {
    case QR_COL_INT64:
    case QR_COL_TIMESTAMP: {
        int64_t base = from_row ? m->iv[row] : gen_int((int)rnd_below(D_COUNT));
        switch (rnd_below(8)) {
        case 0: return col_val_float((double)base + 0.5);
        case 1: return col_val_float((double)base - 0.25);
        case 2: return col_val_float(special_f[rnd_below(sizeof special_f / sizeof *special_f)]);
        case 3: return col_val_int(base == INT64_MAX ? base : base + 1);
        case 4: return col_val_int(base == INT64_MIN ? base : base - 1);
        case 5: return col_val_float((double)base);
        default: return col_val_int(base);
        }
    }
    case QR_COL_FLOAT64: {
        double base = from_row ? m->fv[row] : gen_float((int)rnd_below(D_COUNT));
        switch (rnd_below(8)) {
        case 0: return col_val_int(special_i[rnd_below(sizeof special_i / sizeof *special_i)]);
        case 1: return col_val_int((int64_t)(isfinite(base) && fabs(base) < 9e18 ? base : 7));
        case 2: return col_val_float(nextafter(base, INFINITY));
        case 3: return col_val_float(nextafter(base, -INFINITY));
        case 4: return col_val_float(special_f[rnd_below(sizeof special_f / sizeof *special_f)]);
        default: return col_val_float(base);
        }
    }
    case QR_COL_BOOL:
        return col_val_bool(rnd() & 1);
    default: {
        char *buf = str_pool[str_pool_i++ % 64];
        size_t n;
        if (from_row) {
            n = m->sn[row] < 60 ? m->sn[row] : 60;
            memcpy(buf, m->sv[row], n);
            if (rnd_below(4) == 0 && n) /* a neighbour that is not in the column */
                buf[n - 1] = (char)(buf[n - 1] + 1);
        } else {
            gen_str((int)rnd_below(D_COUNT), buf, &n);
        }
        return col_val_str(buf, n);
    }
    }
}

static ColVal in_set[128];

static ColPred rand_pred(const Model *m)
{
    ColPred p = {0};
    int nops = m->t == QR_COL_KEYWORD ? CP_PREFIX + 1 : CP_PREFIX;
    p.op = (ColPredOp)rnd_below((uint64_t)nops);
    p.v = rand_operand(m);
    if (p.op == CP_BETWEEN) {
        p.hi = rand_operand(m); /* any order: hi < lo must match nothing */
    } else if (p.op == CP_IN) {
        size_t n = rnd_below(5) == 0 ? 0 : rnd_below(4) == 0 ? 40 + rnd_below(80) : 1 + rnd_below(8);
        for (size_t i = 0; i < n; i++)
            in_set[i] = rand_operand(m);
        p.set = in_set;
        p.n_set = n;
    } else if (p.op == CP_PREFIX) {
        size_t n = p.v.u.str.n;
        p.v.u.str.n = n ? rnd_below(n + 1) : 0;
    }
    return p;
}

static roaring_bitmap_t *rand_candidates(uint32_t n)
{
    roaring_bitmap_t *c = roaring_bitmap_create();
    switch (rnd_below(3)) {
    case 0: /* sparse random */
        for (uint32_t i = 0; i < n / 10 + 1; i++)
            roaring_bitmap_add(c, (uint32_t)rnd_below(n + 1));
        break;
    case 1: /* a few dense ranges */
        for (int k = 0; k < 3 && n; k++) {
            uint32_t a = (uint32_t)rnd_below(n), len = (uint32_t)rnd_below(5000) + 1;
            roaring_bitmap_add_range(c, a, (uint64_t)a + len);
        }
        break;
    default:
        break; /* empty */
    }
    return c;
}

/* Check every access path against the model for one predicate. */
static void check_pred(const Model *m, const Column *c, const ColPred *p)
{
    ColFilter *f;
    QrError err = {0};
    cr_assert_eq(col_filter_new(c, p, &f, &err), QR_OK, "compile: %s", err.message);
    roaring_bitmap_t *out = roaring_bitmap_create();
    ColScanStats st = {0};
    cr_assert_eq(col_filter_scan(f, NULL, out, &st, &err), QR_OK);
    uint64_t expect = 0;
    for (uint32_t r = 0; r < m->n; r++) {
        bool want = model_match(m, r, p);
        expect += want;
        if (roaring_bitmap_contains(out, r) != want || col_filter_match(f, r) != want)
            cr_assert_fail("type %s op %d row %u: model %d scan %d match %d (n=%u)",
                           col_type_name(m->t), p->op, r, want, roaring_bitmap_contains(out, r),
                           col_filter_match(f, r), m->n);
    }
    cr_assert_eq(roaring_bitmap_get_cardinality(out), expect);
    cr_assert_eq(st.rows_matched, expect);
    cr_assert_eq(st.blocks_total, col_n_blocks(c));
    cr_assert_eq(st.blocks_skipped + st.blocks_full + st.blocks_scanned, st.blocks_total);
    cr_assert(!col_filter_match(f, m->n));
    double sel = col_filter_selectivity(f);
    cr_assert(sel >= 0 && sel <= 1, "selectivity %f", sel);
    if (m->n) { /* the convenience form agrees */
        uint32_t r = (uint32_t)rnd_below(m->n);
        cr_assert_eq(col_match_row(c, p, r), col_filter_match(f, r));
    }

    /* candidates: result = scan AND candidates, added to what out held */
    roaring_bitmap_t *cand = rand_candidates(m->n);
    roaring_bitmap_t *o2 = roaring_bitmap_create();
    roaring_bitmap_add(o2, 0xFFFFFFF0u); /* pre-existing content survives */
    ColScanStats st2 = {0};
    cr_assert_eq(col_filter_scan(f, cand, o2, &st2, &err), QR_OK);
    roaring_bitmap_t *want2 = roaring_bitmap_and(out, cand);
    roaring_bitmap_add(want2, 0xFFFFFFF0u);
    cr_assert(roaring_bitmap_equals(o2, want2), "scan with candidates differs");
    cr_assert_eq(st2.rows_matched, roaring_bitmap_get_cardinality(want2) - 1);
    roaring_bitmap_free(cand), roaring_bitmap_free(o2), roaring_bitmap_free(want2);

    /* split scan over a random block boundary, and the words primitive */
    uint32_t nb = col_n_blocks(c);
    if (nb) {
        uint32_t cut = (uint32_t)rnd_below(nb + 1);
        roaring_bitmap_t *a = roaring_bitmap_create(), *b = roaring_bitmap_create();
        cr_assert_eq(col_filter_scan_range(f, 0, cut, NULL, a, NULL, &err), QR_OK);
        cr_assert_eq(col_filter_scan_range(f, cut, nb - cut, NULL, b, NULL, &err), QR_OK);
        roaring_bitmap_or_inplace(a, b);
        cr_assert(roaring_bitmap_equals(a, out), "split scan differs at block %u", cut);
        roaring_bitmap_free(a), roaring_bitmap_free(b);
        uint32_t fb = (uint32_t)rnd_below(nb), cnt = (uint32_t)rnd_below(nb - fb) + 1;
        uint64_t *w = calloc((size_t)cnt * 64 + 1, sizeof *w);
        uint32_t rows = col_filter_scan_words(f, fb, cnt, w, NULL);
        cr_assert_neq(rows, UINT32_MAX);
        for (uint32_t r = 0; r < rows; r++) {
            uint32_t row = fb * COL_BLOCK_ROWS + r;
            cr_assert_eq((bool)(w[r / 64] >> (r % 64) & 1), roaring_bitmap_contains(out, row));
        }
        free(w);
    }
    roaring_bitmap_free(out);
    col_filter_free(f);
}

static void check_values(const Model *m, const Column *c)
{
    cr_assert_eq(col_rows(c), m->n);
    uint32_t nb = col_n_blocks(c);
    int64_t *iv = malloc(((size_t)nb * COL_BLOCK_ROWS + 1) * 8);
    uint64_t *nw = malloc(((size_t)nb * 64 + 1) * 8);
    uint32_t got = 0;
    switch (m->t) {
    case QR_COL_INT64:
    case QR_COL_TIMESTAMP: got = col_read_int(c, 0, nb, iv, nw); break;
    case QR_COL_FLOAT64: got = col_read_float(c, 0, nb, (double *)iv, nw); break;
    case QR_COL_BOOL: got = col_read_bool(c, 0, nb, (uint8_t *)iv, nw); break;
    default: got = col_read_code(c, 0, nb, (uint32_t *)iv, nw); break;
    }
    cr_assert_eq(got, m->n);
    for (uint32_t r = 0; r < m->n; r++) {
        bool isnull = nw[r / 64] >> (r % 64) & 1;
        cr_assert_eq(isnull, m->isnull[r], "row %u null", r);
        int64_t i;
        double d;
        bool b;
        const char *s;
        size_t n;
        switch (m->t) {
        case QR_COL_INT64:
        case QR_COL_TIMESTAMP:
            cr_assert_eq(col_get_int(c, r, &i), !m->isnull[r]);
            if (!m->isnull[r]) {
                cr_assert_eq(i, m->iv[r], "row %u", r);
                cr_assert_eq(iv[r], m->iv[r]);
            }
            break;
        case QR_COL_FLOAT64:
            cr_assert_eq(col_get_float(c, r, &d), !m->isnull[r]);
            if (!m->isnull[r]) {
                if (isnan(m->fv[r]))
                    cr_assert(isnan(d) && isnan(((double *)iv)[r]));
                else
                    cr_assert(memcmp(&d, &m->fv[r], 8) == 0 && memcmp(&((double *)iv)[r], &d, 8) == 0,
                              "row %u: %g vs %g", r, d, m->fv[r]);
            }
            break;
        case QR_COL_BOOL:
            cr_assert_eq(col_get_bool(c, r, &b), !m->isnull[r]);
            if (!m->isnull[r])
                cr_assert(b == m->bv[r] && ((uint8_t *)iv)[r] == m->bv[r]);
            break;
        default:
            cr_assert_eq(col_get_str(c, r, &s, &n), !m->isnull[r]);
            if (!m->isnull[r]) {
                cr_assert(n == m->sn[r] && memcmp(s, m->sv[r], n) == 0, "row %u", r);
                uint32_t code = ((uint32_t *)iv)[r];
                const char *s2;
                size_t n2;
                cr_assert(col_dict_get(c, code, &s2, &n2) && s2 == s && n2 == n);
            }
        }
    }
    cr_assert(!col_get_int(c, m->n, &(int64_t){0}));
    free(iv), free(nw);

    /* statistics */
    ColStats st = col_stats(c);
    uint32_t nulls = 0;
    for (uint32_t r = 0; r < m->n; r++)
        nulls += m->isnull[r];
    cr_assert_eq(st.rows, m->n);
    cr_assert_eq(st.null_count, nulls);
    cr_assert_eq(st.has_range, nulls < m->n);
    uint64_t sum = 0;
    for (uint32_t i = 0; i < st.n_buckets; i++) {
        ColHistBucket hb;
        cr_assert(col_hist_bucket(c, i, &hb));
        cr_assert(hb.count >= hb.distinct && hb.distinct >= 1);
        sum += hb.count;
    }
    cr_assert_eq(sum, m->n - nulls, "histogram sums to %llu", (unsigned long long)sum);
    cr_assert(st.n_buckets <= COL_HIST_MAX);
    ColZone z;
    uint64_t zn = 0;
    for (uint32_t b = 0; b < nb; b++) {
        cr_assert(col_block_zone(c, b, &z));
        zn += z.null_count;
    }
    cr_assert_eq(zn, nulls);
    cr_assert(!col_block_zone(c, nb, &z));
}

static const uint32_t sizes[] = {0, 1, 2, 63, 64, 65, 4095, 4096, 4097, 8192 + 77, 20000};

static void differential(QrColType t, int preds_per_col)
{
    for (int simd = 0; simd < 2; simd++) {
        col_scan_set_simd(simd ? -1 : 0);
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
            for (int dist = 0; dist < D_COUNT; dist++) {
                static const double null_rates[] = {0, 0.1, 0.6, 1.0};
                double nr = null_rates[rnd_below(4)];
                bool sorted = rnd_below(3) == 0;
                Model m;
                gen_model(&m, t, sizes[si], dist, nr, sorted);
                QrBuf b;
                qr_buf_init(&b);
                size_t lead = rnd_below(5); /* blob need not start the buffer */
                for (size_t i = 0; i < lead; i++)
                    qr_buf_putc(&b, 0xAB);
                model_write(&m, &b);
                Column *c = open_ok(&b, lead);
                cr_assert_eq(col_type(c), t);
                if (simd == 0)
                    check_values(&m, c);
                for (int k = 0; k < preds_per_col; k++) {
                    ColPred p = rand_pred(&m);
                    check_pred(&m, c, &p);
                }
                col_close(c);
                qr_buf_free(&b);
                model_free(&m);
            }
    }
    col_scan_set_simd(-1);
}

Test(column, differential_int64) { rng_state = 1; differential(QR_COL_INT64, 25); }
Test(column, differential_timestamp) { rng_state = 2; differential(QR_COL_TIMESTAMP, 12); }
Test(column, differential_float64) { rng_state = 3; differential(QR_COL_FLOAT64, 25); }
Test(column, differential_bool) { rng_state = 4; differential(QR_COL_BOOL, 12); }
Test(column, differential_keyword) { rng_state = 5; differential(QR_COL_KEYWORD, 25); }

/* ---- semantics pinned by name ------------------------------------------- */

static Column *build_ints(QrBuf *b, const int64_t *v, uint32_t n)
{
    ColWriter *w = colw_new(QR_COL_INT64);
    for (uint32_t i = 0; i < n; i++)
        colw_add_int(w, v[i]);
    qr_buf_init(b);
    cr_assert_eq(colw_finish(w, b, NULL), QR_OK);
    colw_free(w);
    return open_ok(b, 0);
}

static uint64_t count(const Column *c, ColPred p)
{
    roaring_bitmap_t *o = roaring_bitmap_create();
    QrError err = {0};
    cr_assert_eq(col_scan(c, &p, NULL, o, NULL, &err), QR_OK, "%s", err.message);
    uint64_t n = roaring_bitmap_get_cardinality(o);
    roaring_bitmap_free(o);
    return n;
}

Test(column, int_vs_float_is_exact)
{
    int64_t v[] = {1, 2, 3, 4, 9007199254740993ll};
    QrBuf b;
    Column *c = build_ints(&b, v, 5);
    cr_assert_eq(count(c, (ColPred){.op = CP_GT, .v = col_val_float(2.5)}), 3);
    cr_assert_eq(count(c, (ColPred){.op = CP_LE, .v = col_val_float(2.5)}), 2);
    cr_assert_eq(count(c, (ColPred){.op = CP_EQ, .v = col_val_float(2.5)}), 0);
    cr_assert_eq(count(c, (ColPred){.op = CP_NE, .v = col_val_float(2.5)}), 5);
    cr_assert_eq(count(c, (ColPred){.op = CP_EQ, .v = col_val_float(3.0)}), 1);
    /* 2^53 as a double is not 2^53 + 1 */
    cr_assert_eq(count(c, (ColPred){.op = CP_EQ, .v = col_val_float(9007199254740992.0)}), 0);
    cr_assert_eq(count(c, (ColPred){.op = CP_GT, .v = col_val_float(9007199254740992.0)}), 1);
    cr_assert_eq(count(c, (ColPred){.op = CP_LT, .v = col_val_float(NAN)}), 5);
    cr_assert_eq(count(c, (ColPred){.op = CP_GT, .v = col_val_float(INFINITY)}), 0);
    cr_assert_eq(count(c, (ColPred){.op = CP_GT, .v = col_val_float(-INFINITY)}), 5);
    ColVal set[] = {col_val_float(1.5), col_val_float(4.0), col_val_int(2)};
    cr_assert_eq(count(c, (ColPred){.op = CP_IN, .set = set, .n_set = 3}), 2);
    cr_assert_eq(count(c, (ColPred){.op = CP_IN, .set = set, .n_set = 0}), 0);
    col_close(c);
    qr_buf_free(&b);
}

Test(column, float_nan_and_zero_follow_postgres)
{
    double v[] = {NAN, -0.0, 0.0, 1.0, INFINITY, -NAN, -INFINITY};
    ColWriter *w = colw_new(QR_COL_FLOAT64);
    for (int i = 0; i < 7; i++)
        colw_add_float(w, v[i]);
    colw_add_null(w);
    QrBuf b;
    qr_buf_init(&b);
    cr_assert_eq(colw_finish(w, &b, NULL), QR_OK);
    colw_free(w);
    Column *c = open_ok(&b, 0);
    cr_assert_eq(count(c, (ColPred){.op = CP_EQ, .v = col_val_float(NAN)}), 2);
    cr_assert_eq(count(c, (ColPred){.op = CP_GT, .v = col_val_float(INFINITY)}), 2);
    cr_assert_eq(count(c, (ColPred){.op = CP_EQ, .v = col_val_float(0.0)}), 2);
    cr_assert_eq(count(c, (ColPred){.op = CP_EQ, .v = col_val_int(0)}), 2);
    cr_assert_eq(count(c, (ColPred){.op = CP_LT, .v = col_val_float(-0.0)}), 1);
    cr_assert_eq(count(c, (ColPred){.op = CP_NE, .v = col_val_float(0.0)}), 5);
    cr_assert_eq(count(c, (ColPred){.op = CP_IS_NULL}), 1);
    cr_assert_eq(count(c, (ColPred){.op = CP_NE, .v = col_val_float(NAN)}), 5);
    ColStats st = col_stats(c);
    cr_assert_eq(st.distinct, 5); /* NaN, 0, 1, inf, -inf */
    cr_assert(isnan(st.max.u.f));
    double d;
    cr_assert(col_get_float(c, 1, &d) && d == 0 && signbit(d)); /* -0 kept for fetch */
    col_close(c);
    qr_buf_free(&b);
}

Test(column, keyword_ranges_and_prefixes)
{
    const char *v[] = {"apple", "apricot", "banana", "apple", "b", "", "ap"};
    ColWriter *w = colw_new(QR_COL_KEYWORD);
    for (int i = 0; i < 7; i++)
        colw_add_str(w, v[i], strlen(v[i]));
    QrBuf b;
    qr_buf_init(&b);
    cr_assert_eq(colw_finish(w, &b, NULL), QR_OK);
    colw_free(w);
    Column *c = open_ok(&b, 0);
    cr_assert_eq(col_dict_size(c), 6);
    cr_assert_eq(count(c, (ColPred){.op = CP_PREFIX, .v = col_val_str("ap", 2)}), 4);
    cr_assert_eq(count(c, (ColPred){.op = CP_PREFIX, .v = col_val_str("", 0)}), 7);
    cr_assert_eq(count(c, (ColPred){.op = CP_PREFIX, .v = col_val_str("c", 1)}), 0);
    cr_assert_eq(count(c, (ColPred){.op = CP_LT, .v = col_val_str("b", 1)}), 5);
    cr_assert_eq(count(c, (ColPred){.op = CP_GE, .v = col_val_str("apq", 3)}), 3);
    cr_assert_eq(count(c, (ColPred){.op = CP_EQ, .v = col_val_str("apple", 5)}), 2);
    cr_assert_eq(count(c, (ColPred){.op = CP_NE, .v = col_val_str("zzz", 3)}), 7);
    cr_assert_eq(count(c, (ColPred){.op = CP_BETWEEN, .v = col_val_str("ap", 2),
                                    .hi = col_val_str("apz", 3)}), 4);
    uint32_t c0, c1;
    cr_assert(col_get_code(c, 0, &c0) && col_get_code(c, 1, &c1) && c0 < c1);
    col_close(c);
    qr_buf_free(&b);
}

Test(column, keyword_column_of_empty_strings_only)
{
    /* no byte of keyword text is ever buffered: the dictionary is one empty
     * string (jsonl_fuzz found the writer offsetting a NULL buffer here) */
    ColWriter *w = colw_new(QR_COL_KEYWORD);
    for (int i = 0; i < 5; i++)
        colw_add_str(w, "", 0);
    QrBuf b;
    qr_buf_init(&b);
    cr_assert_eq(colw_finish(w, &b, NULL), QR_OK);
    colw_free(w);
    Column *c = open_ok(&b, 0);
    cr_assert_eq(col_dict_size(c), 1);
    cr_assert_eq(count(c, (ColPred){.op = CP_EQ, .v = col_val_str("", 0)}), 5);
    cr_assert_eq(count(c, (ColPred){.op = CP_EQ, .v = col_val_str("a", 1)}), 0);
    col_close(c);
    qr_buf_free(&b);
}

Test(column, type_errors)
{
    int64_t v[] = {1};
    QrBuf b;
    Column *c = build_ints(&b, v, 1);
    ColFilter *f = NULL;
    QrError err = {0};
    ColPred p = {.op = CP_EQ, .v = col_val_str("x", 1)};
    cr_assert_eq(col_filter_new(c, &p, &f, &err), QR_ETYPE);
    cr_assert_null(f);
    cr_assert(strstr(err.message, "\"t\"") != NULL, "%s", err.message);
    p = (ColPred){.op = CP_PREFIX, .v = col_val_str("x", 1)};
    qr_error_clear(&err);
    cr_assert_eq(col_filter_new(c, &p, &f, &err), QR_ETYPE);
    cr_assert(!col_match_row(c, &p, 0));
    cr_assert_eq(col_estimate_selectivity(c, &p), 1.0);
    ColWriter *w = colw_new(QR_COL_BOOL);
    cr_assert_eq(colw_add_int(w, 3), QR_ETYPE);
    cr_assert_eq(colw_add_bool(w, true), QR_OK);
    QrBuf o;
    qr_buf_init(&o);
    qr_error_clear(&err);
    cr_assert_eq(colw_finish(w, &o, &err), QR_ETYPE);
    cr_assert_eq(o.len, 0);
    colw_free(w);
    cr_assert_null(colw_new((QrColType)99));
    col_close(c);
    qr_buf_free(&b);
}

/* ---- zone maps ---------------------------------------------------------- */

Test(column, sorted_range_skips_blocks)
{
    uint32_t n = 300000;
    int64_t *v = malloc(n * sizeof *v);
    for (uint32_t i = 0; i < n; i++)
        v[i] = 1000000 + (int64_t)i * 3;
    QrBuf b;
    Column *c = build_ints(&b, v, n);
    ColStats cs = col_stats(c);
    cr_assert(cs.is_sorted);
    ColScanStats st = {0};
    ColPred p = {.op = CP_BETWEEN, .v = col_val_int(1000000 + 150000 * 3), .hi = col_val_int(1000000 + 150500 * 3)};
    roaring_bitmap_t *o = roaring_bitmap_create();
    cr_assert_eq(col_scan(c, &p, NULL, o, &st, NULL), QR_OK);
    cr_assert_eq(roaring_bitmap_get_cardinality(o), 501);
    cr_assert_leq(st.blocks_scanned + st.blocks_full, 2, "decoded %llu blocks",
                  (unsigned long long)(st.blocks_scanned + st.blocks_full));
    cr_assert_geq(st.blocks_skipped, col_n_blocks(c) - 2);
    ColScanStats plan = {0};
    ColFilter *f;
    cr_assert_eq(col_filter_new(c, &p, &f, NULL), QR_OK);
    col_filter_zone_plan(f, &plan);
    cr_assert_eq(plan.blocks_skipped, st.blocks_skipped);
    double sel = col_filter_selectivity(f);
    cr_assert(sel > 0 && sel < 0.01, "selectivity %f", sel);
    col_filter_free(f);

    /* candidates confine decoding to the blocks that hold them */
    roaring_bitmap_t *cand = roaring_bitmap_of(2, 5u, 200000u);
    ColScanStats st2 = {0};
    p = (ColPred){.op = CP_GE, .v = col_val_int(0)};
    roaring_bitmap_clear(o);
    cr_assert_eq(col_scan(c, &p, cand, o, &st2, NULL), QR_OK);
    cr_assert_eq(roaring_bitmap_get_cardinality(o), 2);
    cr_assert_eq(st2.blocks_full + st2.blocks_scanned, 2);
    roaring_bitmap_free(cand);

    /* unsorted data with the same predicate must decode every block */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = (uint32_t)rnd_below(i + 1);
        int64_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    QrBuf b2;
    Column *c2 = build_ints(&b2, v, n);
    ColScanStats st3 = {0};
    p = (ColPred){.op = CP_BETWEEN, .v = col_val_int(1000000 + 150000 * 3), .hi = col_val_int(1000000 + 150500 * 3)};
    roaring_bitmap_clear(o);
    cr_assert_eq(col_scan(c2, &p, NULL, o, &st3, NULL), QR_OK);
    cr_assert_eq(roaring_bitmap_get_cardinality(o), 501);
    cr_assert_eq(st3.blocks_scanned, col_n_blocks(c2));
    roaring_bitmap_free(o);
    col_close(c), col_close(c2);
    qr_buf_free(&b), qr_buf_free(&b2);
    free(v);
}

Test(column, encodings_are_chosen_to_fit)
{
    uint32_t n = 3 * COL_BLOCK_ROWS;
    ColWriter *w = colw_new(QR_COL_TIMESTAMP);
    for (uint32_t i = 0; i < n; i++) {
        if (i < COL_BLOCK_ROWS)
            colw_add_int(w, 7); /* const */
        else if (i < 2 * COL_BLOCK_ROWS)
            colw_add_int(w, 1700000000000000ll + (int64_t)i * 1000000 + (int64_t)(i % 7)); /* delta */
        else
            colw_add_int(w, (int64_t)(rnd() % 1000)); /* FOR, 10 bits */
    }
    QrBuf b;
    qr_buf_init(&b);
    cr_assert_eq(colw_finish(w, &b, NULL), QR_OK);
    colw_free(w);
    Column *c = open_ok(&b, 0);
    ColZone z;
    cr_assert(col_block_zone(c, 0, &z) && z.encoding == COL_ENC_CONST);
    cr_assert(col_block_zone(c, 1, &z) && z.encoding == COL_ENC_DELTA && z.sorted);
    cr_assert(col_block_zone(c, 2, &z) && z.encoding == COL_ENC_FOR && z.bit_width <= 10);
    cr_assert_lt(b.len, 4096 * 8, "blob is %zu bytes", b.len);
    col_close(c);
    qr_buf_free(&b);
}

/* ---- statistics --------------------------------------------------------- */

Test(column, hll_within_five_percent)
{
    uint32_t n = 100000;
    ColWriter *w = colw_new(QR_COL_INT64), *k = colw_new(QR_COL_KEYWORD);
    char buf[32];
    for (uint32_t i = 0; i < n; i++) {
        colw_add_int(w, (int64_t)i * 7919);
        int len = snprintf(buf, sizeof buf, "user-%u", i);
        colw_add_str(k, buf, (size_t)len);
    }
    for (uint32_t i = 0; i < n; i++) /* duplicates do not move the estimate */
        colw_add_int(w, (int64_t)(i % 1000) * 7919);
    QrBuf b, kb;
    qr_buf_init(&b), qr_buf_init(&kb);
    cr_assert_eq(colw_finish(w, &b, NULL), QR_OK);
    cr_assert_eq(colw_finish(k, &kb, NULL), QR_OK);
    colw_free(w), colw_free(k);
    Column *c = open_ok(&b, 0), *ck = open_ok(&kb, 0);
    ColStats s = col_stats(c), sk = col_stats(ck);
    cr_assert_eq(s.distinct, n);
    cr_assert_eq(sk.distinct, n);
    cr_assert(fabs(s.distinct_hll - n) / n < 0.05, "hll %f", s.distinct_hll);
    cr_assert(fabs(sk.distinct_hll - n) / n < 0.05, "hll %f", sk.distinct_hll);
    /* merging registers of the same values changes nothing; of new ones adds */
    uint8_t r1[COL_HLL_REGS], r2[COL_HLL_REGS];
    col_hll_registers(c, r1);
    col_hll_registers(c, r2);
    col_hll_merge(r1, r2);
    cr_assert_float_eq(col_hll_estimate(r1), s.distinct_hll, 1e-9);
    col_hll_registers(ck, r2);
    col_hll_merge(r1, r2);
    cr_assert(fabs(col_hll_estimate(r1) - 2.0 * n) / (2.0 * n) < 0.05);
    /* histogram: ~64 buckets of ~1/64 of the rows */
    cr_assert(s.n_buckets >= 32 && s.n_buckets <= COL_HIST_MAX, "%u buckets", s.n_buckets);
    col_close(c), col_close(ck);
    qr_buf_free(&b), qr_buf_free(&kb);
}

Test(column, selectivity_tracks_truth)
{
    uint32_t n = 50000;
    ColWriter *w = colw_new(QR_COL_INT64);
    int64_t *v = malloc(n * sizeof *v);
    for (uint32_t i = 0; i < n; i++) {
        v[i] = i % 10 == 0 ? 777 : (int64_t)(rnd() % 100000); /* 777 is a heavy hitter */
        if (i % 50 == 0)
            colw_add_null(w);
        else
            colw_add_int(w, v[i]);
    }
    QrBuf b;
    qr_buf_init(&b);
    cr_assert_eq(colw_finish(w, &b, NULL), QR_OK);
    colw_free(w);
    Column *c = open_ok(&b, 0);
    ColPred preds[] = {
        {.op = CP_LT, .v = col_val_int(25000)},
        {.op = CP_BETWEEN, .v = col_val_int(40000), .hi = col_val_int(60000)},
        {.op = CP_EQ, .v = col_val_int(777)},
        {.op = CP_NE, .v = col_val_int(777)},
        {.op = CP_GE, .v = col_val_float(99999.5)},
        {.op = CP_IS_NULL},
    };
    for (size_t i = 0; i < sizeof preds / sizeof *preds; i++) {
        double est = col_estimate_selectivity(c, &preds[i]);
        double truth = (double)count(c, preds[i]) / n;
        cr_assert(fabs(est - truth) < 0.03, "pred %zu: estimate %f, truth %f", i, est, truth);
    }
    col_close(c);
    qr_buf_free(&b);
    free(v);
}

Test(column, empty_and_all_null)
{
    for (int all_null = 0; all_null < 2; all_null++) {
        ColWriter *w = colw_new(QR_COL_KEYWORD);
        if (all_null)
            for (int i = 0; i < 5000; i++)
                colw_add_null(w);
        QrBuf b;
        qr_buf_init(&b);
        cr_assert_eq(colw_finish(w, &b, NULL), QR_OK);
        colw_free(w);
        Column *c = open_ok(&b, 0);
        ColStats s = col_stats(c);
        cr_assert(!s.has_range);
        cr_assert_eq(s.n_buckets, 0);
        cr_assert_eq(count(c, (ColPred){.op = CP_IS_NULL}), all_null ? 5000 : 0);
        cr_assert_eq(count(c, (ColPred){.op = CP_NE, .v = col_val_str("a", 1)}), 0);
        cr_assert_eq(col_estimate_selectivity(c, &(ColPred){.op = CP_IS_NULL}), all_null ? 1.0 : 0.0);
        col_close(c);
        qr_buf_free(&b);
    }
}

/* ---- damaged input ------------------------------------------------------ */

/* Exercise every read path; results are meaningless but must be safe. */
static void poke(const Column *c)
{
    QrError err = {0};
    col_verify(c, &err);
    ColStats s = col_stats(c);
    (void)s;
    for (uint32_t i = 0; i < s.n_buckets; i++) {
        ColHistBucket hb;
        col_hist_bucket(c, i, &hb);
    }
    uint32_t n = col_rows(c), nb = col_n_blocks(c);
    for (uint32_t r = 0; r < n; r += 97) {
        int64_t i;
        double d;
        bool b;
        const char *sp;
        size_t sn;
        col_get_int(c, r, &i), col_get_float(c, r, &d), col_get_bool(c, r, &b);
        col_get_str(c, r, &sp, &sn);
    }
    void *buf = malloc(((size_t)nb * COL_BLOCK_ROWS + 1) * 8);
    uint64_t *nw = malloc(((size_t)nb * 64 + 1) * 8);
    col_read_int(c, 0, nb, buf, nw), col_read_float(c, 0, nb, buf, nw);
    col_read_bool(c, 0, nb, buf, nw), col_read_code(c, 0, nb, buf, nw);
    free(buf), free(nw);
    ColVal set[8];
    for (int i = 0; i < 8; i++)
        set[i] = col_type(c) == QR_COL_KEYWORD ? col_val_str("ab", (size_t)(i % 3))
                                               : col_val_int((int64_t)rnd_below(1000));
    ColPred ps[] = {
        {.op = CP_LT, .v = set[0]}, {.op = CP_NE, .v = set[1]}, {.op = CP_IN, .set = set, .n_set = 8},
        {.op = CP_IS_NULL}, {.op = CP_BETWEEN, .v = set[2], .hi = set[3]},
    };
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        if (col_type(c) == QR_COL_BOOL)
            break;
        roaring_bitmap_t *o = roaring_bitmap_create();
        col_scan(c, &ps[i], NULL, o, NULL, &err);
        col_match_row(c, &ps[i], 0);
        col_estimate_selectivity(c, &ps[i]);
        roaring_bitmap_free(o);
    }
}

static void reseal(uint8_t *p, size_t len)
{
    if (len < COL_HDR_LEN)
        return;
    uint64_t so = qr_get_u64le(p + 40), sl = qr_get_u64le(p + 48), dco = qr_get_u64le(p + 56),
             dcl = qr_get_u64le(p + 64), dio = qr_get_u64le(p + 72), dil = qr_get_u64le(p + 80);
    if (so > len || sl > len - so || dco > len || dcl > len - dco || dio > len || dil > len - dio)
        return;
    uint32_t crc;
    crc = qr_crc32c(0, p, 104);
    crc = qr_crc32c(crc, p + so, sl);
    crc = qr_crc32c(crc, p + dco, dcl);
    crc = qr_crc32c(crc, p + dio, dil);
    qr_put_u32le(p + 104, crc);
}

static void damage_suite(QrColType t, int dist)
{
    Model m;
    gen_model(&m, t, 9000, dist, 0.2, rnd() & 1);
    QrBuf b;
    qr_buf_init(&b);
    model_write(&m, &b);
    uint8_t *copy = malloc(b.len);
    for (int iter = 0; iter < 300; iter++) {
        memcpy(copy, b.data, b.len);
        size_t len = b.len;
        int mode = (int)rnd_below(4);
        if (mode == 0) {
            len = rnd_below(b.len);
        } else {
            int flips = 1 + (int)rnd_below(4);
            /* mode 2, 3: damage the metadata and fix its CRC so the validators run */
            size_t limit = mode >= 2 ? qr_get_u64le(copy + 88) : b.len;
            for (int k = 0; k < flips; k++) {
                size_t at = rnd_below(limit);
                if (mode >= 2 && at >= 104 && at < 112)
                    continue;
                copy[at] ^= (uint8_t)(1u << rnd_below(8));
            }
            if (mode >= 2)
                reseal(copy, len);
        }
        /* an exact-size heap copy so ASan sees any over-read */
        uint8_t *exact = malloc(len ? len : 1);
        memcpy(exact, copy, len);
        QrError err = {0};
        Column *c = col_open(exact, len, "dmg", &err);
        if (!c) {
            cr_assert_eq(err.code, QR_ECORRUPT, "code %d: %s", err.code, err.message);
            cr_assert(strstr(err.message, "\"dmg\"") != NULL, "%s", err.message);
        } else {
            poke(c);
            col_close(c);
        }
        free(exact);
    }
    free(copy);
    qr_buf_free(&b);
    model_free(&m);
}

Test(column, damage_never_crashes)
{
    rng_state = 77;
    for (int t = 0; t < QR_COL_TYPE_COUNT; t++)
        for (int d = 0; d < D_COUNT; d += 2)
            damage_suite((QrColType)t, d);
}

Test(column, verify_names_the_block)
{
    Model m;
    rng_state = 9;
    gen_model(&m, QR_COL_INT64, 3 * COL_BLOCK_ROWS, D_UNIFORM_WIDE, 0, false);
    QrBuf b;
    qr_buf_init(&b);
    model_write(&m, &b);
    /* flip a bit inside block 1's payload: open still works, verify reports block 1 */
    uint64_t dir = qr_get_u64le(b.data + 72), data = qr_get_u64le(b.data + 88);
    uint64_t off1 = qr_get_u64le(b.data + dir + COL_DIR_ENTRY_LEN + 16);
    b.data[data + off1 + 100] ^= 4;
    QrError err = {0};
    Column *c = col_open(b.data, b.len, "price", &err);
    cr_assert_not_null(c);
    cr_assert_eq(col_verify(c, &err), QR_ECORRUPT);
    cr_assert(strstr(err.message, "\"price\" block 1") != NULL, "%s", err.message);
    col_close(c);
    /* a block that claims more bytes than the data section: open names it */
    qr_put_u32le(b.data + dir + 2 * COL_DIR_ENTRY_LEN + 24, 1u << 30);
    reseal(b.data, b.len);
    qr_error_clear(&err);
    cr_assert_null(col_open(b.data, b.len, "price", &err));
    cr_assert_eq(err.code, QR_ECORRUPT);
    cr_assert(strstr(err.message, "\"price\" block 2") != NULL, "%s", err.message);
    cr_assert(strcmp(qr_code_sqlstate(err.code), "XX001") == 0);
    qr_buf_free(&b);
    model_free(&m);
}

/* ---- allocation failures ------------------------------------------------ */

/* Write, open, compile and scan with the Nth allocation failing, for every
 * N until the pipeline completes: each step fails cleanly (QR_ENOMEM or
 * NULL) and nothing leaks (ASan). */
static bool oom_pipeline(QrColType t)
{
    bool done = false;
    QrBuf b;
    qr_buf_init(&b);
    ColWriter *w = colw_new(t);
    if (!w)
        return false;
    char s[16];
    for (uint32_t i = 0; i < 5000; i++) {
        if (i % 7 == 0)
            colw_add_null(w);
        else if (t == QR_COL_KEYWORD)
            colw_add_str(w, s, (size_t)snprintf(s, sizeof s, "k%u", i % 300));
        else
            colw_add_int(w, (int64_t)(i % 1000));
    }
    QrError err = {0};
    int rc = colw_finish(w, &b, &err);
    colw_free(w);
    if (rc) {
        cr_assert_eq(rc, QR_ENOMEM, "finish: %s", err.message);
        qr_buf_free(&b);
        return false;
    }
    Column *c = col_open(b.data, b.len, "oom", &err);
    if (!c) {
        cr_assert_eq(err.code, QR_ENOMEM, "%s", err.message);
        qr_buf_free(&b);
        return false;
    }
    ColVal set[6];
    for (int i = 0; i < 6; i++)
        set[i] = t == QR_COL_KEYWORD ? col_val_str(s, (size_t)snprintf(s, sizeof s, "k%d", i * 40))
                                     : col_val_int(i * 100);
    ColPred p = {.op = CP_IN, .set = set, .n_set = 6};
    ColFilter *f = NULL;
    if (col_filter_new(c, &p, &f, &err) == QR_OK) {
        roaring_bitmap_t *o = roaring_bitmap_create();
        uint64_t words[2 * 64];
        if (col_filter_scan(f, NULL, o, NULL, &err) == QR_OK &&
            col_filter_scan_words(f, 0, 2, words, NULL) != UINT32_MAX)
            done = true;
        roaring_bitmap_free(o);
        col_filter_free(f);
    }
    col_close(c);
    qr_buf_free(&b);
    return done;
}

Test(column, allocation_failures_are_clean)
{
    for (int t = 0; t < 2; t++) {
        QrColType ty = t ? QR_COL_KEYWORD : QR_COL_INT64;
        int64_t n = 0;
        for (;; n++) {
            qr_mem_fail_after(n);
            bool ok = oom_pipeline(ty);
            qr_mem_fail_after(-1);
            if (ok)
                break;
            cr_assert_lt(n, 100000);
        }
        cr_assert_gt(n, 3);
    }
}
