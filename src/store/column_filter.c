/*
 * column_filter.c — compile a ColPred against one column into ranges of the
 * column's keys; single-row matching; the zone-map decision per block.
 *
 * Layer: store/.  Calls column_int.h, mem.
 *
 * Every comparison becomes "key in a union of closed key ranges" (optionally
 * complemented, for <>), evaluated only on non-NULL rows.  An operand is
 * first located in the column's key space: EXACT (the keys [lo, hi] equal it:
 * one key, or the two keys of -0 and +0), GAP (it lies strictly between key
 * lo and key lo+1: 2.5 on an int column, an absent keyword), BELOW or ABOVE
 * every key.  The operators then follow by table; no float rounding is
 * involved anywhere, which is what makes int-vs-float comparisons exact.
 */
#include "store/column_int.h"
#include "store/mem.h"

#include <math.h>
#include <stdlib.h>

enum { LOC_EXACT, LOC_GAP, LOC_BELOW, LOC_ABOVE };

typedef struct KeyLoc {
    int kind;
    uint64_t lo, hi; /* EXACT: [lo, hi]; GAP: between lo and lo + 1 */
} KeyLoc;

const char *col_val_kind_name(ColValKind k)
{
    switch (k) {
    case CV_INT: return "integer";
    case CV_FLOAT: return "float";
    case CV_BOOL: return "boolean";
    default: return "string";
    }
}

int col_cmp_double_int(double d, int64_t i)
{
    if (d >= 9223372036854775808.0)
        return 1;
    if (d < -9223372036854775808.0)
        return -1;
    int64_t t = (int64_t)d; /* truncation is exact in this range */
    if (t != i)
        return t < i ? -1 : 1;
    double frac = d - (double)t; /* |d| < 2^53 here, or d is integral */
    return frac > 0 ? 1 : frac < 0 ? -1 : 0;
}

static KeyLoc loc_exact(uint64_t k) { return (KeyLoc){LOC_EXACT, k, k}; }

/* Compare dictionary entry `code` with s[0..n), at most `lim` bytes of the
 * entry (lim = SIZE_MAX: the whole entry). */
static int dict_cmp(const Column *c, uint32_t code, const char *s, size_t n, size_t lim)
{
    const uint8_t *p = (const uint8_t *)"";
    size_t pn = 0;
    col_dict_entry(c, code, &p, &pn);
    if (pn > lim)
        pn = lim;
    size_t m = pn < n ? pn : n;
    int r = m ? memcmp(p, s, m) : 0;
    if (r)
        return r;
    return (pn > n) - (pn < n);
}

/* First code whose entry (truncated to lim bytes) compares > s (strict) or
 * >= s (!strict). */
static uint32_t dict_bound(const Column *c, const char *s, size_t n, size_t lim, bool strict)
{
    uint32_t lo = 0, hi = c->n_dict;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int r = dict_cmp(c, mid, s, n, lim);
        if (strict ? r <= 0 : r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int locate(const Column *c, const ColVal *v, KeyLoc *out, QrError *err)
{
    QrColType t = c->type;
    bool ok = false;
    switch (t) {
    case QR_COL_INT64:
    case QR_COL_TIMESTAMP:
        if (v->kind == CV_INT) {
            *out = loc_exact(col_key_from_int(v->u.i));
            ok = true;
        } else if (v->kind == CV_FLOAT) {
            double d = v->u.f;
            ok = true;
            if (d != d || d >= 9223372036854775808.0)
                *out = (KeyLoc){LOC_ABOVE, 0, 0}; /* NaN is above every number */
            else if (d < -9223372036854775808.0)
                *out = (KeyLoc){LOC_BELOW, 0, 0};
            else if (floor(d) == d)
                *out = loc_exact(col_key_from_int((int64_t)d));
            else
                *out = (KeyLoc){LOC_GAP, col_key_from_int((int64_t)floor(d)), 0};
        }
        break;
    case QR_COL_FLOAT64:
        if (v->kind == CV_FLOAT || v->kind == CV_INT) {
            ok = true;
            double d = v->kind == CV_FLOAT ? v->u.f : (double)v->u.i;
            int cmp = v->kind == CV_INT ? col_cmp_double_int(d, v->u.i) : 0;
            if (d == 0 && cmp == 0)
                *out = (KeyLoc){LOC_EXACT, col_key_from_double(-0.0), col_key_from_double(0.0)};
            else if (cmp == 0)
                *out = loc_exact(col_key_from_double(d));
            else if (cmp > 0) /* the int lies between nextafter(d, -inf) and d */
                *out = (KeyLoc){LOC_GAP, col_key_from_double(d) - 1, 0};
            else
                *out = (KeyLoc){LOC_GAP, col_key_from_double(d), 0};
        }
        break;
    case QR_COL_BOOL:
        if (v->kind == CV_BOOL) {
            *out = loc_exact(v->u.b ? 1 : 0);
            ok = true;
        }
        break;
    case QR_COL_KEYWORD:
        if (v->kind == CV_STR) {
            ok = true;
            const char *s = v->u.str.s ? v->u.str.s : "";
            size_t n = v->u.str.s ? v->u.str.n : 0;
            uint32_t p = dict_bound(c, s, n, SIZE_MAX, false);
            if (p < c->n_dict && dict_cmp(c, p, s, n, SIZE_MAX) == 0)
                *out = loc_exact(p);
            else if (p == 0)
                *out = (KeyLoc){LOC_BELOW, 0, 0};
            else if (p == c->n_dict)
                *out = (KeyLoc){LOC_ABOVE, 0, 0};
            else
                *out = (KeyLoc){LOC_GAP, p - 1, 0};
        }
        break;
    default:
        break;
    }
    if (!ok) {
        qr_error_set(err, QR_ETYPE, "cannot compare %s column \"%s\" with a %s value",
                     col_type_name(t), c->name, col_val_kind_name(v->kind));
        qr_error_hint(err, "compare numbers with int64, float64 and timestamp columns, booleans "
                           "with bool columns and strings with keyword columns");
        return QR_ETYPE;
    }
    return QR_OK;
}

/* Key ranges of `x op v` for a located operand: 0 or 1 range, *inv for NE. */
static int op_range(ColPredOp op, const KeyLoc *l, ColKeyRange *r, bool *inv)
{
    *inv = false;
    switch (op) {
    case CP_EQ:
    case CP_NE:
        *inv = op == CP_NE;
        if (l->kind != LOC_EXACT)
            return 0;
        *r = (ColKeyRange){l->lo, l->hi};
        return 1;
    case CP_LT:
    case CP_LE: {
        if (l->kind == LOC_BELOW)
            return 0;
        uint64_t end = UINT64_MAX;
        if (l->kind == LOC_GAP)
            end = l->lo;
        else if (l->kind == LOC_EXACT && op == CP_LE)
            end = l->hi;
        else if (l->kind == LOC_EXACT) {
            if (l->lo == 0)
                return 0;
            end = l->lo - 1;
        }
        *r = (ColKeyRange){0, end};
        return 1;
    }
    case CP_GT:
    case CP_GE: {
        if (l->kind == LOC_ABOVE)
            return 0;
        uint64_t start = 0;
        if (l->kind == LOC_GAP) {
            if (l->lo == UINT64_MAX)
                return 0;
            start = l->lo + 1;
        } else if (l->kind == LOC_EXACT && op == CP_GT) {
            if (l->hi == UINT64_MAX)
                return 0;
            start = l->hi + 1;
        } else if (l->kind == LOC_EXACT) {
            start = l->lo;
        }
        *r = (ColKeyRange){start, UINT64_MAX};
        return 1;
    }
    default:
        return 0;
    }
}

static int range_cmp(const void *a, const void *b)
{
    const ColKeyRange *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Sort and merge overlapping or adjacent ranges in place. */
static uint32_t merge_ranges(ColKeyRange *r, uint32_t n)
{
    if (n < 2)
        return n;
    qsort(r, n, sizeof *r, range_cmp);
    uint32_t k = 0;
    for (uint32_t i = 1; i < n; i++) {
        if (r[k].hi == UINT64_MAX || r[i].lo <= r[k].hi + 1) {
            if (r[i].hi > r[k].hi)
                r[k].hi = r[i].hi;
        } else {
            r[++k] = r[i];
        }
    }
    return k + 1;
}

int col_filter_new(const Column *c, const ColPred *pred, ColFilter **out, QrError *err)
{
    ColFilter *f = qr_calloc(1, sizeof *f);
    size_t cap = pred->op == CP_IN ? pred->n_set : 1;
    ColKeyRange *rs = qr_malloc((cap ? cap : 1) * sizeof *rs);
    if (!f || !rs) {
        qr_free(f), qr_free(rs);
        return qr_error_set(err, QR_ENOMEM, "out of memory compiling a filter on column \"%s\"",
                            c->name);
    }
    f->col = c;
    f->ranges = rs;
    uint32_t n = 0;
    KeyLoc l, l2;
    ColKeyRange a, b;
    bool inv = false, inv2;
    int rc = QR_OK;
    switch (pred->op) {
    case CP_IS_NULL:
        f->mode = CF_NULL;
        break;
    case CP_IS_NOT_NULL:
        f->mode = CF_NOTNULL;
        break;
    case CP_EQ: case CP_NE: case CP_LT: case CP_LE: case CP_GT: case CP_GE:
        if ((rc = locate(c, &pred->v, &l, err)))
            break;
        n = (uint32_t)op_range(pred->op, &l, &rs[0], &inv);
        break;
    case CP_BETWEEN:
        if ((rc = locate(c, &pred->v, &l, err)) || (rc = locate(c, &pred->hi, &l2, err)))
            break;
        if (op_range(CP_GE, &l, &a, &inv2) && op_range(CP_LE, &l2, &b, &inv2) && a.lo <= b.hi) {
            rs[0] = (ColKeyRange){a.lo, b.hi};
            n = 1;
        }
        break;
    case CP_IN:
        for (size_t i = 0; i < pred->n_set && !rc; i++) {
            rc = locate(c, &pred->set[i], &l, err);
            if (!rc && l.kind == LOC_EXACT)
                rs[n++] = (ColKeyRange){l.lo, l.hi};
        }
        n = merge_ranges(rs, n);
        break;
    case CP_PREFIX:
        if (c->type != QR_COL_KEYWORD || pred->v.kind != CV_STR) {
            rc = qr_error_set(err, QR_ETYPE, "prefix match needs a keyword column and a string; "
                              "column \"%s\" is %s", c->name, col_type_name(c->type));
            break;
        } else {
            const char *s = pred->v.u.str.s ? pred->v.u.str.s : "";
            size_t pn = pred->v.u.str.s ? pred->v.u.str.n : 0;
            uint32_t lo = dict_bound(c, s, pn, pn, false), hi = dict_bound(c, s, pn, pn, true);
            if (lo < hi) {
                rs[0] = (ColKeyRange){lo, hi - 1};
                n = 1;
            }
        }
        break;
    default:
        rc = qr_error_set(err, QR_EINVAL, "unknown predicate operator %d on column \"%s\"",
                          (int)pred->op, c->name);
    }
    if (rc) {
        col_filter_free(f);
        return rc;
    }
    if (pred->op != CP_IS_NULL && pred->op != CP_IS_NOT_NULL) {
        f->invert = inv;
        f->n_ranges = n;
        bool full = n == 1 && rs[0].lo == 0 && rs[0].hi == UINT64_MAX;
        if (n == 0)
            f->mode = inv ? CF_NOTNULL : CF_NONE;
        else if (full)
            f->mode = inv ? CF_NONE : CF_NOTNULL;
        else
            f->mode = CF_RANGES;
    }
    *out = f;
    return QR_OK;
}

void col_filter_free(ColFilter *f)
{
    if (!f)
        return;
    qr_free(f->ranges);
    qr_free(f);
}

/* Index of the first range with hi >= key (n_ranges if none). */
static uint32_t first_range_hi_ge(const ColFilter *f, uint64_t key)
{
    uint32_t lo = 0, hi = f->n_ranges;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (f->ranges[mid].hi < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

bool col_ranges_contain(const ColFilter *f, uint64_t key)
{
    uint32_t i = first_range_hi_ge(f, key);
    return i < f->n_ranges && f->ranges[i].lo <= key;
}

bool col_filter_match(const ColFilter *f, uint32_t row)
{
    const Column *c = f->col;
    if (row >= c->n_rows)
        return false;
    uint64_t key;
    bool present = col_row_key(c, row, &key);
    switch (f->mode) {
    case CF_NULL:
        return !present;
    case CF_NOTNULL:
        return present;
    case CF_RANGES:
        return present && col_ranges_contain(f, key) != f->invert;
    default:
        return false;
    }
}

int col_zone_classify(const ColFilter *f, const ColBlock *bk, uint32_t *r0, uint32_t *r1)
{
    bool all_null = bk->null_count == bk->rows;
    switch (f->mode) {
    case CF_NULL:
        return bk->null_count == 0 ? CZ_NONE : all_null ? CZ_ALL : CZ_PARTIAL;
    case CF_NOTNULL:
        return all_null ? CZ_NONE : CZ_ALL;
    case CF_RANGES:
        break;
    default:
        return CZ_NONE;
    }
    if (all_null)
        return CZ_NONE;
    uint32_t a = first_range_hi_ge(f, bk->min), b = a;
    while (b < f->n_ranges && f->ranges[b].lo <= bk->max)
        b++;
    *r0 = a;
    *r1 = b;
    int in;
    if (a == b)
        in = CZ_NONE;
    else if (b - a == 1 && f->ranges[a].lo <= bk->min && f->ranges[a].hi >= bk->max)
        in = CZ_ALL;
    else
        in = CZ_PARTIAL;
    if (f->invert && in != CZ_PARTIAL)
        in = in == CZ_ALL ? CZ_NONE : CZ_ALL;
    return in;
}

/* ---- convenience forms -------------------------------------------------- */

int col_scan(const Column *c, const ColPred *pred, const roaring_bitmap_t *candidates,
             roaring_bitmap_t *out, ColScanStats *stats, QrError *err)
{
    ColFilter *f;
    int rc = col_filter_new(c, pred, &f, err);
    if (rc)
        return rc;
    rc = col_filter_scan(f, candidates, out, stats, err);
    col_filter_free(f);
    return rc;
}

bool col_match_row(const Column *c, const ColPred *pred, uint32_t row)
{
    ColFilter *f;
    if (col_filter_new(c, pred, &f, NULL))
        return false;
    bool m = col_filter_match(f, row);
    col_filter_free(f);
    return m;
}

double col_estimate_selectivity(const Column *c, const ColPred *pred)
{
    ColFilter *f;
    if (col_filter_new(c, pred, &f, NULL))
        return 1.0;
    double s = col_filter_selectivity(f);
    col_filter_free(f);
    return s;
}
