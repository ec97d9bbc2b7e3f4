/*
 * btree.c — per-segment B+tree side files: build from a column, open,
 * verify, lookups, exact range counts, and the Iter over a lookup.
 *
 * Layer: index/.  Calls store/ (column, sfile, buf, mem), index/iter and
 * CRoaring.  The contract is in btree.h; docs/format.md
 * ("B-tree side files") is the long form of the layout below.
 *
 * Keys.  Every value becomes a byte string whose memcmp order (a prefix
 * before its extensions) is the column's order:
 *   INT64, TIMESTAMP  8 bytes big-endian of (uint64)v ^ 2^63
 *   FLOAT64           8 bytes big-endian of the IEEE bits mapped to an
 *                     unsigned order (negative: ~bits, else bits | 2^63),
 *                     -0 stored as +0, every NaN as the canonical NaN
 *   BOOL              8 bytes big-endian of 0 / 1
 *   KEYWORD           the value's bytes
 * so one tree, one comparison and one search serve every type.  Predicates
 * become half-open byte ranges [lo, hi): "x <= s" is "x < s||0x00" (the
 * smallest key above s), a prefix p is [p, p with its last non-0xFF byte
 * incremented).  Numeric operands are first placed exactly in the key space
 * (an int between two floats, 2.5 between two ints), so no comparison goes
 * through a rounding cast — the semantics of store/column_filter.c.
 *
 * File: a section file (store/sfile.h) of kind "QBTR", version 1:
 *
 *   section 1 META   48 bytes: u32 col_type, u32 n_rows, u32 null_count,
 *                    u32 n_pages, u32 n_leaves, u32 root, u32 height,
 *                    u32 0, u64 n_keys, u64 n_nonnull
 *   section 2 DIR    n_pages x {u64 offset in PAGES, u32 length, u32 0}
 *   section 3 PAGES  the pages, leaves first (pages 0..n_leaves-1, in key
 *                    order), then each inner level bottom-up; root last
 *   section 4 ROWS   row lists, in key order
 *   section 5 NULLS  roaring portable bitmap of the NULL rows
 *
 *   page   u8 kind (0 leaf, 1 inner), u8 level (0 for leaves), u16 0,
 *          u32 n (>= 1 entries), u32 slot[n] (entry offsets from the page
 *          start, increasing), entries
 *   leaf entry   varint key_len, key, varint count (>= 1), u8 enc,
 *                varint rows_off, varint rows_len
 *   inner entry  varint key_len, key (= the first key below the child),
 *                varint child page, varint rows below the child
 *   row list     enc 0: `count` varints, the first row then gaps (> 0);
 *                enc 1: roaring portable bitmap (count >= BT_ROARING_MIN)
 *
 * Invariants (bt_verify checks all, bt_open the O(pages) ones): keys strictly
 * increasing over the leaf sequence; a child's level is its parent's - 1 and
 * its page number smaller; every page but the root has exactly one parent;
 * subtree counts are exact; rows ascending, < n_rows, in one key or NULLS.
 *
 * Counting.  rank(b) = rows whose key < b is one descent: at each inner page
 * the counts of the children left of the path are summed.  A range's count
 * is rank(hi) - rank(lo): exact, without reading a row list.
 */
#include "index/btree.h"
#include "store/buf.h"
#include "store/mem.h"
#include "store/sfile.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { BT_SEC_META = 1, BT_SEC_DIR = 2, BT_SEC_PAGES = 3, BT_SEC_ROWS = 4, BT_SEC_NULLS = 5 };
enum { BT_LEAF = 0, BT_INNER = 1 };
enum { BT_ROWS_DELTA = 0, BT_ROWS_ROARING = 1 };
#define BT_META_LEN 48u
#define BT_DIR_ENTRY 16u
#define BT_PAGE_HDR 8u
#define BT_NUM_KEY 8u
#define BT_ROARING_MIN 1024u /* row lists at least this long are roaring bitmaps */
#define BT_MAX_HEIGHT 40u
#define BT_SIGN 0x8000000000000000ull
#define BT_NAN_BITS 0x7FF8000000000000ull

struct BTree {
    Sfile *sf;                /* owns a reference: the mapping */
    char name[128];           /* for messages */
    QrColType type;
    uint32_t n_rows, null_count, n_pages, n_leaves, root, height;
    uint64_t n_keys, n_nonnull;
    const uint8_t *dir;       /* borrows from sf */
    const uint8_t *pages;     /* borrows */
    size_t pages_len;
    const uint8_t *rows;      /* borrows */
    size_t rows_len;
    roaring_bitmap_t *nulls;  /* owns */
    uint64_t file_bytes;
};

/* ------------------------------------------------------------------------ */
/* Keys                                                                      */
/* ------------------------------------------------------------------------ */

static uint64_t key_from_int(int64_t v) { return (uint64_t)v ^ BT_SIGN; }
static uint64_t key_from_double(double d)
{
    uint64_t b;
    if (d != d)
        b = BT_NAN_BITS;
    else if (d == 0)
        b = 0; /* -0 = +0 */
    else
        memcpy(&b, &d, 8);
    return (b & BT_SIGN) ? ~b : (b | BT_SIGN);
}
static void key_put(uint8_t out[BT_NUM_KEY], uint64_t k)
{
    for (int i = 7; i >= 0; i--, k >>= 8)
        out[i] = (uint8_t)k;
}

/* A range bound: the key p[0..n), or with succ the smallest key above it
 * (p followed by one 0 byte); inf is above every key. */
typedef struct BtBound {
    const uint8_t *p; /* borrows (the query's scratch or the operand) */
    size_t n;
    bool succ;
    bool inf;
} BtBound;

/* Order of key k against bound b: <0, 0, >0. */
static int key_vs_bound(const uint8_t *k, size_t kn, const BtBound *b)
{
    if (b->inf)
        return -1;
    size_t m = kn < b->n ? kn : b->n;
    int r = m ? memcmp(k, b->p, m) : 0;
    if (r)
        return r;
    if (kn == b->n)
        return b->succ ? -1 : 0;
    if (kn < b->n)
        return -1;
    if (!b->succ)
        return 1;
    /* kn > n and k starts with p: compare with p||0x00 */
    if (k[b->n] != 0)
        return 1;
    return kn == b->n + 1 ? 0 : 1;
}

/* ------------------------------------------------------------------------ */
/* Predicates -> key ranges                                                  */
/* ------------------------------------------------------------------------ */

typedef struct BtRange {
    BtBound lo, hi; /* [lo, hi) */
} BtRange;

enum { BQ_RANGES, BQ_NULL };

typedef struct BtQuery {
    int mode;
    uint32_t n;
    BtRange *r;      /* owns */
    uint8_t *bytes;  /* owns: numeric keys and the prefix successor */
} BtQuery;

static void query_free(BtQuery *q)
{
    qr_free(q->r);
    qr_free(q->bytes);
}

/* Where a numeric operand falls in the key space. */
enum { LOC_EXACT, LOC_GAP, LOC_BELOW, LOC_ABOVE };
typedef struct Loc {
    int kind;
    uint64_t k; /* EXACT: the key; GAP: strictly between k and k + 1 */
} Loc;

static int type_error(const BTree *t, const ColVal *v, QrError *err)
{
    qr_error_set(err, QR_ETYPE, "cannot compare %s column \"%s\" with a %s value",
                 col_type_name(t->type), t->name, col_val_kind_name(v->kind));
    qr_error_hint(err, "compare numbers with int64, float64 and timestamp columns, booleans "
                       "with bool columns and strings with keyword columns");
    return QR_ETYPE;
}

static int num_locate(const BTree *t, const ColVal *v, Loc *out, QrError *err)
{
    switch (t->type) {
    case QR_COL_INT64:
    case QR_COL_TIMESTAMP:
        if (v->kind == CV_INT) {
            *out = (Loc){LOC_EXACT, key_from_int(v->u.i)};
        } else if (v->kind == CV_FLOAT) {
            double d = v->u.f;
            if (d != d || d >= 9223372036854775808.0)
                *out = (Loc){LOC_ABOVE, 0}; /* NaN is above every number */
            else if (d < -9223372036854775808.0)
                *out = (Loc){LOC_BELOW, 0};
            else if (floor(d) == d)
                *out = (Loc){LOC_EXACT, key_from_int((int64_t)d)};
            else
                *out = (Loc){LOC_GAP, key_from_int((int64_t)floor(d))};
        } else {
            return type_error(t, v, err);
        }
        return QR_OK;
    case QR_COL_FLOAT64:
        if (v->kind == CV_FLOAT) {
            *out = (Loc){LOC_EXACT, key_from_double(v->u.f)};
        } else if (v->kind == CV_INT) {
            double d = (double)v->u.i;
            int cmp = col_cmp_double_int(d, v->u.i);
            if (cmp == 0)
                *out = (Loc){LOC_EXACT, key_from_double(d)};
            else if (cmp > 0) /* the int lies just below d */
                *out = (Loc){LOC_GAP, key_from_double(d) - 1};
            else
                *out = (Loc){LOC_GAP, key_from_double(d)};
        } else {
            return type_error(t, v, err);
        }
        return QR_OK;
    case QR_COL_BOOL:
        if (v->kind != CV_BOOL)
            return type_error(t, v, err);
        *out = (Loc){LOC_EXACT, v->u.b ? 1u : 0u};
        return QR_OK;
    default:
        return type_error(t, v, err);
    }
}

/* Inclusive key range of `x op v` (op one of LT LE GT GE); false if empty. */
static bool num_side(ColPredOp op, const Loc *l, uint64_t *lo, uint64_t *hi)
{
    *lo = 0;
    *hi = UINT64_MAX;
    switch (op) {
    case CP_LT:
    case CP_LE:
        if (l->kind == LOC_BELOW)
            return false;
        if (l->kind == LOC_GAP || (l->kind == LOC_EXACT && op == CP_LE))
            *hi = l->k;
        else if (l->kind == LOC_EXACT) {
            if (l->k == 0)
                return false;
            *hi = l->k - 1;
        }
        return true;
    default: /* GT, GE */
        if (l->kind == LOC_ABOVE)
            return false;
        if (l->kind == LOC_GAP || (l->kind == LOC_EXACT && op == CP_GT)) {
            if (l->k == UINT64_MAX)
                return false;
            *lo = l->k + 1;
        } else if (l->kind == LOC_EXACT) {
            *lo = l->k;
        }
        return true;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_str_val(const void *a, const void *b)
{
    const ColVal *x = a, *y = b;
    size_t m = x->u.str.n < y->u.str.n ? x->u.str.n : y->u.str.n;
    int r = m ? memcmp(x->u.str.s, y->u.str.s, m) : 0;
    return r ? r : (x->u.str.n > y->u.str.n) - (x->u.str.n < y->u.str.n);
}

/* Add the inclusive numeric range [lo, hi] as a byte range. */
static void q_add_num(BtQuery *q, uint64_t lo, uint64_t hi)
{
    uint8_t *b = q->bytes + (size_t)q->n * 2 * BT_NUM_KEY;
    key_put(b, lo);
    key_put(b + BT_NUM_KEY, hi);
    q->r[q->n++] = (BtRange){{b, BT_NUM_KEY, false, false}, {b + BT_NUM_KEY, BT_NUM_KEY, true, false}};
}

static void q_add_str(BtQuery *q, const char *lo, size_t lo_n, bool lo_succ, const char *hi,
                      size_t hi_n, bool hi_succ, bool hi_inf)
{
    q->r[q->n++] = (BtRange){{(const uint8_t *)lo, lo_n, lo_succ, false},
                             {(const uint8_t *)hi, hi_n, hi_succ, hi_inf}};
}

static void str_of(const ColVal *v, const char **s, size_t *n)
{
    *s = v->u.str.s ? v->u.str.s : "";
    *n = v->u.str.s ? v->u.str.n : 0;
}

static int compile_num(const BTree *t, const ColPred *pred, BtQuery *q, QrError *err)
{
    Loc l, l2;
    uint64_t a, b, c, d;
    int rc;
    switch (pred->op) {
    case CP_EQ:
    case CP_NE:
        if ((rc = num_locate(t, &pred->v, &l, err)))
            return rc;
        if (pred->op == CP_EQ) {
            if (l.kind == LOC_EXACT)
                q_add_num(q, l.k, l.k);
        } else if (l.kind != LOC_EXACT) {
            q_add_num(q, 0, UINT64_MAX);
        } else {
            if (l.k > 0)
                q_add_num(q, 0, l.k - 1);
            if (l.k < UINT64_MAX)
                q_add_num(q, l.k + 1, UINT64_MAX);
        }
        return QR_OK;
    case CP_LT: case CP_LE: case CP_GT: case CP_GE:
        if ((rc = num_locate(t, &pred->v, &l, err)))
            return rc;
        if (num_side(pred->op, &l, &a, &b))
            q_add_num(q, a, b);
        return QR_OK;
    case CP_BETWEEN:
        if ((rc = num_locate(t, &pred->v, &l, err)) || (rc = num_locate(t, &pred->hi, &l2, err)))
            return rc;
        if (num_side(CP_GE, &l, &a, &b) && num_side(CP_LE, &l2, &c, &d) && a <= d)
            q_add_num(q, a, d);
        return QR_OK;
    case CP_IN: {
        uint64_t *keys = qr_malloc((pred->n_set ? pred->n_set : 1) * sizeof *keys);
        if (!keys)
            return qr_error_set(err, QR_ENOMEM, "out of memory compiling IN on \"%s\"", t->name);
        size_t k = 0;
        for (size_t i = 0; i < pred->n_set; i++) {
            if ((rc = num_locate(t, &pred->set[i], &l, err))) {
                qr_free(keys);
                return rc;
            }
            if (l.kind == LOC_EXACT)
                keys[k++] = l.k;
        }
        qsort(keys, k, sizeof *keys, cmp_u64);
        for (size_t i = 0; i < k; i++)
            if (i == 0 || keys[i] != keys[i - 1])
                q_add_num(q, keys[i], keys[i]);
        qr_free(keys);
        return QR_OK;
    }
    default:
        return qr_error_set(err, QR_EINVAL, "unknown predicate operator %d on column \"%s\"",
                            (int)pred->op, t->name);
    }
}

static int compile_str(const BTree *t, const ColPred *pred, BtQuery *q, QrError *err)
{
    const char *s, *h;
    size_t n, hn;
    const ColVal *bad = NULL;
    if (pred->op == CP_IN) {
        for (size_t i = 0; i < pred->n_set && !bad; i++)
            if (pred->set[i].kind != CV_STR)
                bad = &pred->set[i];
    } else if (pred->v.kind != CV_STR || (pred->op == CP_BETWEEN && pred->hi.kind != CV_STR)) {
        bad = pred->v.kind != CV_STR ? &pred->v : &pred->hi;
    }
    if (bad)
        return type_error(t, bad, err);
    str_of(&pred->v, &s, &n);
    switch (pred->op) {
    case CP_EQ: q_add_str(q, s, n, false, s, n, true, false); break;
    case CP_NE:
        q_add_str(q, "", 0, false, s, n, false, false);
        q_add_str(q, s, n, true, NULL, 0, false, true);
        break;
    case CP_LT: q_add_str(q, "", 0, false, s, n, false, false); break;
    case CP_LE: q_add_str(q, "", 0, false, s, n, true, false); break;
    case CP_GT: q_add_str(q, s, n, true, NULL, 0, false, true); break;
    case CP_GE: q_add_str(q, s, n, false, NULL, 0, false, true); break;
    case CP_BETWEEN:
        str_of(&pred->hi, &h, &hn);
        q_add_str(q, s, n, false, h, hn, true, false); /* empty when hi < lo */
        break;
    case CP_PREFIX: {
        /* successor of the prefix: drop trailing 0xFF bytes, bump the last */
        size_t k = n;
        while (k > 0 && (uint8_t)s[k - 1] == 0xFF)
            k--;
        if (k == 0) {
            q_add_str(q, s, n, false, NULL, 0, false, true);
        } else {
            memcpy(q->bytes, s, k);
            q->bytes[k - 1]++;
            q_add_str(q, s, n, false, (const char *)q->bytes, k, false, false);
        }
        break;
    }
    case CP_IN: {
        ColVal *v = qr_malloc((pred->n_set ? pred->n_set : 1) * sizeof *v);
        if (!v)
            return qr_error_set(err, QR_ENOMEM, "out of memory compiling IN on \"%s\"", t->name);
        for (size_t i = 0; i < pred->n_set; i++) {
            str_of(&pred->set[i], &h, &hn);
            v[i] = col_val_str(h, hn);
        }
        qsort(v, pred->n_set, sizeof *v, cmp_str_val);
        for (size_t i = 0; i < pred->n_set; i++)
            if (i == 0 || cmp_str_val(&v[i], &v[i - 1]) != 0)
                q_add_str(q, v[i].u.str.s, v[i].u.str.n, false, v[i].u.str.s, v[i].u.str.n, true,
                          false);
        qr_free(v);
        break;
    }
    default:
        return qr_error_set(err, QR_EINVAL, "unknown predicate operator %d on column \"%s\"",
                            (int)pred->op, t->name);
    }
    return QR_OK;
}

/* Compile pred for tree t into q (ranges sorted and disjoint).  Errors:
 * QR_ETYPE, QR_EINVAL, QR_ENOMEM; q is then empty. */
static int compile(const BTree *t, const ColPred *pred, BtQuery *q, QrError *err)
{
    memset(q, 0, sizeof *q);
    if (pred->op == CP_IS_NULL) {
        q->mode = BQ_NULL;
        return QR_OK;
    }
    if ((unsigned)pred->op > CP_PREFIX)
        return qr_error_set(err, QR_EINVAL, "unknown predicate operator %d on column \"%s\"",
                            (int)pred->op, t->name);
    if (pred->op == CP_PREFIX && (t->type != QR_COL_KEYWORD || pred->v.kind != CV_STR))
        return qr_error_set(err, QR_ETYPE, "prefix match needs a keyword column and a string; "
                            "column \"%s\" is %s", t->name, col_type_name(t->type));
    size_t cap = pred->op == CP_IN ? pred->n_set : 2;
    size_t bytes = cap * 2 * BT_NUM_KEY;
    if (pred->op == CP_PREFIX && pred->v.u.str.s)
        bytes += pred->v.u.str.n;
    q->r = qr_malloc((cap ? cap : 1) * sizeof *q->r);
    q->bytes = qr_malloc(bytes ? bytes : 1);
    if (!q->r || !q->bytes) {
        query_free(q);
        memset(q, 0, sizeof *q);
        return qr_error_set(err, QR_ENOMEM, "out of memory compiling a predicate on \"%s\"",
                            t->name);
    }
    q->mode = BQ_RANGES;
    int rc;
    if (pred->op == CP_IS_NOT_NULL) {
        q->r[q->n++] = (BtRange){{(const uint8_t *)"", 0, false, false}, {NULL, 0, false, true}};
        rc = QR_OK;
    } else if (t->type == QR_COL_KEYWORD) {
        rc = compile_str(t, pred, q, err);
    } else {
        rc = compile_num(t, pred, q, err);
    }
    if (rc) {
        query_free(q);
        memset(q, 0, sizeof *q);
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Pages                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct Page {
    const uint8_t *p; /* borrows */
    uint32_t len;
    uint8_t kind, level;
    uint32_t n;
} Page;

typedef struct Ent {
    const uint8_t *key;
    size_t key_n;
    uint64_t a; /* leaf: row count; inner: child page */
    uint64_t b; /* leaf: rows_off; inner: rows below the child */
    uint64_t c; /* leaf: rows_len */
    uint8_t enc;
} Ent;

static int bt_corrupt(const BTree *t, QrError *err, int64_t page, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bt_corrupt(const BTree *t, QrError *err, int64_t page, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (page >= 0)
        qr_error_set(err, QR_ECORRUPT, "corrupt B-tree index %s (file \"%s\") page %lld: %s",
                     t->name, t->sf ? sf_path(t->sf) : "?", (long long)page, what);
    else
        qr_error_set(err, QR_ECORRUPT, "corrupt B-tree index %s (file \"%s\"): %s", t->name,
                     t->sf ? sf_path(t->sf) : "?", what);
    qr_error_hint(err, "drop and recreate the index, or delete the file: it is rebuilt from the "
                       "segment's column when the table is opened");
    return QR_ECORRUPT;
}

/* Page `no` (its header was checked by bt_open). */
static void page_get(const BTree *t, uint32_t no, Page *pg)
{
    const uint8_t *d = t->dir + (size_t)no * BT_DIR_ENTRY;
    uint64_t off = qr_get_u64le(d);
    pg->p = t->pages + off;
    pg->len = qr_get_u32le(d + 8);
    pg->kind = pg->p[0];
    pg->level = pg->p[1];
    pg->n = qr_get_u32le(pg->p + 4);
}

static bool ent_read(const Page *pg, uint32_t i, Ent *e)
{
    uint32_t off = qr_get_u32le(pg->p + BT_PAGE_HDR + 4 * (size_t)i);
    if (off >= pg->len)
        return false;
    QrReader r;
    qr_rd_init(&r, pg->p + off, pg->len - off);
    e->key = qr_rd_str(&r, &e->key_n);
    e->a = qr_rd_varint(&r);
    if (pg->kind == BT_LEAF) {
        e->enc = qr_rd_u8(&r);
        e->b = qr_rd_varint(&r);
        e->c = qr_rd_varint(&r);
    } else {
        e->b = qr_rd_varint(&r);
        e->c = 0;
        e->enc = 0;
    }
    return !r.bad && e->key;
}

/* First entry of pg with key >= b (n when none), by binary search. */
static int page_lower_bound(const BTree *t, const Page *pg, uint32_t no, const BtBound *b,
                            uint32_t *out, QrError *err)
{
    uint32_t lo = 0, hi = pg->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        Ent e;
        if (!ent_read(pg, mid, &e))
            return bt_corrupt(t, err, no, "entry %u does not decode", mid);
        if (key_vs_bound(e.key, e.key_n, b) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *out = lo;
    return QR_OK;
}

/* Descend to the first key >= b: its leaf page and entry index (the index
 * may be n of that leaf: the key is then the next leaf's first), and with
 * rank != NULL the number of rows whose key < b. */
static int seek(const BTree *t, const BtBound *b, uint32_t *leaf, uint32_t *idx, uint64_t *rank,
                BtStats *st, QrError *err)
{
    uint64_t below = 0;
    uint32_t no = t->root;
    int rc;
    if (t->n_pages == 0) {
        *leaf = 0;
        *idx = 0;
        if (rank)
            *rank = 0;
        return QR_OK;
    }
    if (b->inf && rank) {
        *rank = t->n_nonnull;
        *leaf = t->n_leaves;
        *idx = 0;
        return QR_OK;
    }
    Page pg;
    page_get(t, no, &pg);
    for (;;) {
        if (st)
            st->pages_read++;
        uint32_t j = 0;
        if ((rc = page_lower_bound(t, &pg, no, b, &j, err)))
            return rc;
        if (pg.kind == BT_LEAF) {
            if (rank)
                for (uint32_t k = 0; k < j; k++) {
                    Ent e;
                    if (!ent_read(&pg, k, &e))
                        return bt_corrupt(t, err, no, "entry %u does not decode", k);
                    below += e.a;
                }
            *leaf = no;
            *idx = j;
            if (rank)
                *rank = below;
            return QR_OK;
        }
        /* inner: the child whose first key is b, else the last whose first
         * key is < b (its keys may all be < b: the answer is then the first
         * key of the next leaf, which bt_lookup steps to) */
        uint32_t c = j ? j - 1 : 0;
        Ent e;
        if (j < pg.n) {
            if (!ent_read(&pg, j, &e))
                return bt_corrupt(t, err, no, "entry %u does not decode", j);
            if (key_vs_bound(e.key, e.key_n, b) == 0)
                c = j;
        }
        if (rank)
            for (uint32_t k = 0; k < c; k++) {
                if (!ent_read(&pg, k, &e))
                    return bt_corrupt(t, err, no, "entry %u does not decode", k);
                below += e.b;
            }
        if (!ent_read(&pg, c, &e))
            return bt_corrupt(t, err, no, "entry %u does not decode", c);
        if (e.a >= no) /* children are written before their parent */
            return bt_corrupt(t, err, no, "child page %llu out of order", (unsigned long long)e.a);
        Page ch;
        page_get(t, (uint32_t)e.a, &ch);
        if (ch.level + 1 != pg.level)
            return bt_corrupt(t, err, no, "child page %llu has level %u under level %u",
                              (unsigned long long)e.a, ch.level, pg.level);
        no = (uint32_t)e.a;
        pg = ch;
    }
}

/* Rows below bound b. */
static int rank_of(const BTree *t, const BtBound *b, uint64_t *rank, BtStats *st, QrError *err)
{
    uint32_t leaf, idx;
    return seek(t, b, &leaf, &idx, rank, st, err);
}

/* ------------------------------------------------------------------------ */
/* Row lists                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct RowVec {
    uint32_t *v; /* owns */
    size_t n, cap;
    bool sorted; /* ascending so far */
} RowVec;

/* Sort the (distinct) rows of a multi-key lookup through a bit per row of
 * the column: O(rows of the column / 64 + k), which beats inserting k rows
 * in value order into roaring's sorted containers. */
static bool sort_rows(RowVec *rv, uint32_t n_rows)
{
    size_t n_words = ((size_t)n_rows + 63) / 64;
    uint64_t *w = qr_calloc(n_words ? n_words : 1, sizeof *w);
    if (!w)
        return false;
    for (size_t i = 0; i < rv->n; i++)
        w[rv->v[i] >> 6] |= 1ull << (rv->v[i] & 63);
    size_t k = 0;
    for (size_t i = 0; i < n_words; i++)
        for (uint64_t x = w[i]; x; x &= x - 1)
            rv->v[k++] = (uint32_t)(i * 64 + (unsigned)__builtin_ctzll(x));
    rv->n = k;
    rv->sorted = true;
    qr_free(w);
    return true;
}

/* Read the row list of leaf entry e: delta lists go to rv, roaring lists are
 * ORed into out.  Checks the list against count and n_rows. */
static int read_rows(const BTree *t, uint32_t page, const Ent *e, RowVec *rv,
                     roaring_bitmap_t *out, QrError *err)
{
    if (e->b > t->rows_len || e->c > t->rows_len - e->b || e->a == 0)
        return bt_corrupt(t, err, page, "row list out of bounds");
    const uint8_t *p = t->rows + e->b;
    if (e->enc == BT_ROWS_ROARING) {
        size_t sz = roaring_bitmap_portable_deserialize_size((const char *)p, (size_t)e->c);
        roaring_bitmap_t *bm =
            sz == e->c ? roaring_bitmap_portable_deserialize_safe((const char *)p, (size_t)e->c)
                       : NULL;
        if (!bm)
            return bt_corrupt(t, err, page, "bad roaring row list");
        if (roaring_bitmap_get_cardinality(bm) != e->a ||
            roaring_bitmap_maximum(bm) >= t->n_rows) {
            roaring_bitmap_free(bm);
            return bt_corrupt(t, err, page, "roaring row list does not match its count");
        }
        roaring_bitmap_or_inplace(out, bm);
        roaring_bitmap_free(bm);
        return QR_OK;
    }
    if (e->enc != BT_ROWS_DELTA)
        return bt_corrupt(t, err, page, "unknown row list encoding %u", e->enc);
    /* inline LEB128: this loop is the cost of every multi-row lookup */
    if (rv->cap - rv->n < e->a) {
        size_t nc = rv->n + (size_t)e->a;
        if (nc < rv->cap * 2)
            nc = rv->cap * 2;
        uint32_t *nv = e->a <= t->n_rows ? qr_realloc(rv->v, nc * sizeof *nv) : NULL;
        if (!nv)
            return e->a > t->n_rows ? bt_corrupt(t, err, page, "row count above the column's")
                                    : qr_error_set(err, QR_ENOMEM, "out of memory reading %s",
                                                   t->name);
        rv->v = nv;
        rv->cap = nc;
    }
    const uint8_t *q = p, *end = p + e->c;
    uint64_t row = 0;
    uint32_t *dst = rv->v + rv->n;
    for (uint64_t i = 0; i < e->a; i++) {
        uint64_t g = 0;
        unsigned sh = 0;
        for (;;) {
            if (q == end || sh > 35)
                return bt_corrupt(t, err, page, "bad row list");
            uint8_t b = *q++;
            g |= (uint64_t)(b & 0x7F) << sh;
            if (!(b & 0x80))
                break;
            sh += 7;
        }
        if (i > 0 && g == 0)
            return bt_corrupt(t, err, page, "row list not ascending");
        row = i ? row + g : g;
        if (row >= t->n_rows)
            return bt_corrupt(t, err, page, "row %llu beyond the column's %u rows",
                              (unsigned long long)row, t->n_rows);
        dst[i] = (uint32_t)row;
    }
    if (q != end)
        return bt_corrupt(t, err, page, "row list longer than its count");
    if (rv->n && e->a && dst[0] < rv->v[rv->n - 1])
        rv->sorted = false;
    rv->n += (size_t)e->a;
    return QR_OK;
}

/* Walk [r->lo, r->hi) from its seek position, adding rows. */
static int lookup_range(const BTree *t, const BtRange *r, RowVec *rv, roaring_bitmap_t *out,
                        BtStats *st, QrError *err)
{
    uint32_t leaf, idx;
    int rc = seek(t, &r->lo, &leaf, &idx, NULL, st, err);
    if (rc || t->n_pages == 0)
        return rc;
    Page pg;
    page_get(t, leaf, &pg);
    bool fresh = false; /* the seek already counted this page */
    for (;;) {
        if (idx >= pg.n) {
            if (++leaf >= t->n_leaves)
                return QR_OK;
            page_get(t, leaf, &pg);
            idx = 0;
            fresh = true;
        }
        if (fresh && st)
            st->pages_read++;
        fresh = false;
        Ent e;
        if (!ent_read(&pg, idx, &e))
            return bt_corrupt(t, err, leaf, "entry %u does not decode", idx);
        if (key_vs_bound(e.key, e.key_n, &r->hi) >= 0)
            return QR_OK;
        if (st) {
            st->keys_visited++;
            st->rows_matched += e.a;
        }
        if ((rc = read_rows(t, leaf, &e, rv, out, err)))
            return rc;
        idx++;
    }
}

int bt_lookup(const BTree *t, const ColPred *pred, roaring_bitmap_t *out, BtStats *stats,
              QrError *err)
{
    BtQuery q;
    int rc = compile(t, pred, &q, err);
    if (rc)
        return rc;
    if (q.mode == BQ_NULL) {
        if (stats)
            stats->rows_matched += t->null_count;
        roaring_bitmap_or_inplace(out, t->nulls);
        return QR_OK;
    }
    RowVec rv = {.sorted = true};
    for (uint32_t i = 0; i < q.n && !rc; i++)
        rc = lookup_range(t, &q.r[i], &rv, out, stats, err);
    if (!rc && rv.n && !rv.sorted && rv.n > 64 && !sort_rows(&rv, t->n_rows))
        rc = qr_error_set(err, QR_ENOMEM, "out of memory sorting rows of index %s", t->name);
    if (!rc && rv.n) {
        /* ascending into an empty bitmap appends to containers instead of
         * inserting into them; one OR merges it with what out holds */
        roaring_bitmap_t *tmp = roaring_bitmap_create();
        if (!tmp) {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory reading index %s", t->name);
        } else {
            roaring_bitmap_add_many(tmp, rv.n, rv.v);
            roaring_bitmap_or_inplace(out, tmp);
            roaring_bitmap_free(tmp);
        }
    }
    qr_free(rv.v);
    query_free(&q);
    return rc;
}

/* Count of one range: one descent for a point, two otherwise. */
static int count_range(const BTree *t, const BtRange *r, uint64_t *count, BtStats *st,
                       QrError *err)
{
    bool point = !r->hi.inf && r->hi.succ && !r->lo.succ && r->lo.n == r->hi.n &&
                 (r->lo.n == 0 || memcmp(r->lo.p, r->hi.p, r->lo.n) == 0);
    int rc;
    if (point) {
        uint32_t leaf, idx;
        *count = 0;
        if ((rc = seek(t, &r->lo, &leaf, &idx, NULL, st, err)) || t->n_pages == 0)
            return rc;
        Page pg;
        page_get(t, leaf, &pg);
        if (idx >= pg.n) {
            if (leaf + 1 >= t->n_leaves)
                return QR_OK;
            page_get(t, ++leaf, &pg);
            idx = 0;
            if (st)
                st->pages_read++;
        }
        Ent e;
        if (!ent_read(&pg, idx, &e))
            return bt_corrupt(t, err, leaf, "entry %u does not decode", idx);
        if (key_vs_bound(e.key, e.key_n, &r->lo) == 0)
            *count = e.a;
        return QR_OK;
    }
    uint64_t a, b;
    if ((rc = rank_of(t, &r->lo, &a, st, err)) || (rc = rank_of(t, &r->hi, &b, st, err)))
        return rc;
    *count = b > a ? b - a : 0;
    return QR_OK;
}

int bt_count(const BTree *t, const ColPred *pred, uint64_t *count, BtStats *stats, QrError *err)
{
    BtQuery q;
    int rc = compile(t, pred, &q, err);
    if (rc)
        return rc;
    uint64_t total = 0;
    if (q.mode == BQ_NULL) {
        total = t->null_count;
    } else {
        for (uint32_t i = 0; i < q.n && !rc; i++) {
            uint64_t c = 0;
            rc = count_range(t, &q.r[i], &c, stats, err);
            total += c;
        }
    }
    query_free(&q);
    if (!rc)
        *count = total;
    return rc;
}

uint64_t bt_estimate(const BTree *t, const ColPred *pred)
{
    QrError e;
    qr_error_clear(&e);
    uint64_t c;
    if (bt_count(t, pred, &c, NULL, &e) != QR_OK)
        return t->n_rows;
    return c;
}

/* ------------------------------------------------------------------------ */
/* Iterator                                                                  */
/* ------------------------------------------------------------------------ */

/* The rows of a lookup, ascending, copied into the query arena (4 bytes a
 * row): combinators never close their children, so an iterator must own no
 * memory outside the arena (iter.h). */
typedef struct BtIter {
    Iter base;
    const uint32_t *rows; /* arena */
    size_t n, pos;        /* rows[pos] is the next to return */
} BtIter;

static DocId bti_next(Iter *it)
{
    BtIter *b = (BtIter *)it;
    if (it->doc == ITER_END || b->pos >= b->n)
        return it->doc = ITER_END;
    it->stats.docs_returned++;
    if ((it->stats.docs_returned & 4095) == 0 && iter_ctx_interrupted_now(it->ctx))
        return it->doc = ITER_END;
    return it->doc = b->rows[b->pos++];
}

/* First row >= target: gallop from pos, then binary search. */
static DocId bti_advance(Iter *it, DocId target)
{
    BtIter *b = (BtIter *)it;
    if (it->doc == ITER_END)
        return ITER_END;
    if (it->doc != ITER_NONE && target <= it->doc)
        return it->doc;
    if (target > UINT32_MAX) {
        b->pos = b->n;
        return it->doc = ITER_END;
    }
    size_t lo = b->pos, step = 1, hi = lo;
    while (hi < b->n && (DocId)b->rows[hi] < target) {
        lo = hi + 1;
        hi += step;
        step *= 2;
    }
    if (hi > b->n)
        hi = b->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((DocId)b->rows[mid] < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    b->pos = lo;
    return bti_next(it);
}

static uint64_t bti_cost(Iter *it)
{
    BtIter *b = (BtIter *)it;
    return b->n - b->pos;
}

static const IterVT bt_iter_vt = {
    .name = "btree", .next = bti_next, .advance = bti_advance, .cost = bti_cost,
};

Iter *bt_iter_open(const BTree *t, IterCtx *ctx, const ColPred *pred, BtStats *stats)
{
    roaring_bitmap_t *bm = roaring_bitmap_create();
    if (!bm) {
        iter_ctx_fail(ctx, QR_ENOMEM, "out of memory opening a B-tree lookup on %s", t->name);
        return iter_empty_new(ctx);
    }
    QrError e;
    qr_error_clear(&e);
    BtStats st = {0};
    int rc = bt_lookup(t, pred, bm, &st, &e);
    uint64_t n = roaring_bitmap_get_cardinality(bm);
    BtIter *b = rc ? NULL : qr_arena_calloc(ctx->arena, sizeof *b);
    uint32_t *rows = b ? qr_arena_alloc(ctx->arena, (n ? n : 1) * sizeof *rows) : NULL;
    if (rows)
        roaring_bitmap_to_uint32_array(bm, rows);
    roaring_bitmap_free(bm);
    if (rc) {
        if (!ctx->err.code)
            qr_error_copy(&ctx->err, &e);
        return iter_empty_new(ctx);
    }
    if (!rows) {
        iter_ctx_fail(ctx, QR_ENOMEM, "out of memory opening a B-tree lookup on %s", t->name);
        return iter_empty_new(ctx);
    }
    if (stats) {
        stats->pages_read += st.pages_read;
        stats->keys_visited += st.keys_visited;
        stats->rows_matched += st.rows_matched;
    }
    iter_init(&b->base, &bt_iter_vt, ctx);
    b->rows = rows;
    b->n = (size_t)n;
    b->base.stats.blocks_decoded = st.pages_read;
    return &b->base;
}

/* ------------------------------------------------------------------------ */
/* Open, close, accessors                                                    */
/* ------------------------------------------------------------------------ */

QrColType bt_type(const BTree *t) { return t->type; }
uint32_t bt_rows(const BTree *t) { return t->n_rows; }
uint32_t bt_null_count(const BTree *t) { return t->null_count; }
uint64_t bt_n_keys(const BTree *t) { return t->n_keys; }
uint32_t bt_height(const BTree *t) { return t->height; }
uint32_t bt_n_pages(const BTree *t) { return t->n_pages; }
uint64_t bt_file_bytes(const BTree *t) { return t->file_bytes; }

void bt_close(BTree *t)
{
    if (!t)
        return;
    if (t->nulls)
        roaring_bitmap_free(t->nulls);
    sf_unref(t->sf);
    qr_free(t);
}

/* The O(pages) checks: section sizes, counts, every page's header and slot
 * table inside its bounds. */
static int open_check(BTree *t, QrError *err)
{
    const uint8_t *m, *nulls;
    size_t mn, dn, nn;
    if (!sf_section(t->sf, BT_SEC_META, &m, &mn) || mn != BT_META_LEN ||
        !sf_section(t->sf, BT_SEC_DIR, &t->dir, &dn) ||
        !sf_section(t->sf, BT_SEC_PAGES, &t->pages, &t->pages_len) ||
        !sf_section(t->sf, BT_SEC_ROWS, &t->rows, &t->rows_len) ||
        !sf_section(t->sf, BT_SEC_NULLS, &nulls, &nn))
        return bt_corrupt(t, err, -1, "missing or short section");
    uint32_t type = qr_get_u32le(m);
    t->n_rows = qr_get_u32le(m + 4);
    t->null_count = qr_get_u32le(m + 8);
    t->n_pages = qr_get_u32le(m + 12);
    t->n_leaves = qr_get_u32le(m + 16);
    t->root = qr_get_u32le(m + 20);
    t->height = qr_get_u32le(m + 24);
    t->n_keys = qr_get_u64le(m + 32);
    t->n_nonnull = qr_get_u64le(m + 40);
    if (type >= QR_COL_TYPE_COUNT)
        return bt_corrupt(t, err, -1, "unknown column type %u", type);
    t->type = (QrColType)type;
    if (dn != (size_t)t->n_pages * BT_DIR_ENTRY || t->n_leaves > t->n_pages ||
        t->null_count > t->n_rows || t->n_nonnull + t->null_count != t->n_rows ||
        t->height > BT_MAX_HEIGHT || t->n_keys > t->n_nonnull)
        return bt_corrupt(t, err, -1, "inconsistent counts in the meta section");
    if (t->n_pages == 0 ? (t->height != 0 || t->n_keys != 0)
                        : (t->root != t->n_pages - 1 || t->height == 0 || t->n_leaves == 0 ||
                           t->n_keys == 0))
        return bt_corrupt(t, err, -1, "inconsistent tree shape in the meta section");
    for (uint32_t i = 0; i < t->n_pages; i++) {
        const uint8_t *d = t->dir + (size_t)i * BT_DIR_ENTRY;
        uint64_t off = qr_get_u64le(d);
        uint32_t len = qr_get_u32le(d + 8);
        if (off > t->pages_len || len > t->pages_len - off || len < BT_PAGE_HDR)
            return bt_corrupt(t, err, i, "outside the pages section");
        const uint8_t *p = t->pages + off;
        uint32_t n = qr_get_u32le(p + 4);
        bool leaf = i < t->n_leaves;
        if (p[0] != (leaf ? BT_LEAF : BT_INNER) || (leaf != (p[1] == 0)) || n == 0 ||
            n > (len - BT_PAGE_HDR) / 4)
            return bt_corrupt(t, err, i, "bad page header");
        if (i == t->root && p[1] + 1u != t->height)
            return bt_corrupt(t, err, i, "root level %u does not match height %u", p[1],
                              t->height);
        uint32_t prev = BT_PAGE_HDR + 4 * n - 1;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t o = qr_get_u32le(p + BT_PAGE_HDR + 4 * (size_t)k);
            if (o <= prev || o >= len)
                return bt_corrupt(t, err, i, "slot %u out of order or bounds", k);
            prev = o;
        }
    }
    size_t sz = roaring_bitmap_portable_deserialize_size((const char *)nulls, nn);
    t->nulls = sz == nn ? roaring_bitmap_portable_deserialize_safe((const char *)nulls, nn) : NULL;
    if (!t->nulls || roaring_bitmap_get_cardinality(t->nulls) != t->null_count ||
        (t->null_count && roaring_bitmap_maximum(t->nulls) >= t->n_rows))
        return bt_corrupt(t, err, -1, "bad NULL row set");
    return QR_OK;
}

int bt_open(const char *path, const char *name_for_errors, BTree **out, QrError *err)
{
    BTree *t = qr_calloc(1, sizeof *t);
    if (!t)
        return qr_error_set(err, QR_ENOMEM, "out of memory opening B-tree index \"%s\"", path);
    snprintf(t->name, sizeof t->name, "\"%s\"", name_for_errors ? name_for_errors : path);
    int rc = sf_open_max(path, BT_FILE_KIND, BT_FORMAT_VERSION, &t->sf, err);
    if (rc == QR_OK)
        rc = sf_verify(t->sf, err);
    if (rc == QR_OK)
        rc = open_check(t, err);
    if (rc != QR_OK) {
        bt_close(t);
        return rc;
    }
    struct stat st;
    if (stat(path, &st) == 0)
        t->file_bytes = (uint64_t)st.st_size;
    *out = t;
    return QR_OK;
}

/* ------------------------------------------------------------------------ */
/* Verify                                                                    */
/* ------------------------------------------------------------------------ */

int bt_verify(const BTree *t, QrError *err)
{
    int rc = sf_verify(t->sf, err);
    if (rc || t->n_pages == 0)
        return rc;
    uint64_t *count = qr_calloc(t->n_pages, sizeof *count);
    uint8_t *parents = qr_calloc(t->n_pages, 1);
    roaring_bitmap_t *seen = roaring_bitmap_create();
    RowVec rv = {.sorted = true};
    if (!count || !parents || !seen) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory verifying index %s", t->name);
        goto out;
    }
    /* leaves: key order, row lists, counts */
    const uint8_t *prev = NULL;
    size_t prev_n = 0;
    uint64_t keys = 0, rows = 0;
    for (uint32_t no = 0; no < t->n_leaves && !rc; no++) {
        Page pg;
        page_get(t, no, &pg);
        for (uint32_t i = 0; i < pg.n; i++) {
            Ent e;
            if (!ent_read(&pg, i, &e)) {
                rc = bt_corrupt(t, err, no, "entry %u does not decode", i);
                break;
            }
            BtBound pb = {prev, prev_n, false, false};
            if (prev && key_vs_bound(e.key, e.key_n, &pb) <= 0) {
                rc = bt_corrupt(t, err, no, "entry %u: keys not strictly increasing", i);
                break;
            }
            if (t->type != QR_COL_KEYWORD && e.key_n != BT_NUM_KEY) {
                rc = bt_corrupt(t, err, no, "entry %u: numeric key of %zu bytes", i, e.key_n);
                break;
            }
            prev = e.key;
            prev_n = e.key_n;
            roaring_bitmap_t *bm = roaring_bitmap_create();
            rv.n = 0;
            rv.sorted = true;
            if (!bm) {
                rc = qr_error_set(err, QR_ENOMEM, "out of memory verifying index %s", t->name);
                break;
            }
            if ((rc = read_rows(t, no, &e, &rv, bm, err))) {
                roaring_bitmap_free(bm);
                break;
            }
            for (size_t k = 1; k < rv.n; k++)
                if (rv.v[k] <= rv.v[k - 1])
                    rc = bt_corrupt(t, err, no, "entry %u: rows not ascending", i);
            roaring_bitmap_add_many(bm, rv.n, rv.v);
            uint64_t before = roaring_bitmap_get_cardinality(seen);
            roaring_bitmap_or_inplace(seen, bm);
            if (!rc && roaring_bitmap_get_cardinality(seen) != before + e.a)
                rc = bt_corrupt(t, err, no, "entry %u: a row appears under two keys", i);
            if (!rc && roaring_bitmap_intersect(bm, t->nulls))
                rc = bt_corrupt(t, err, no, "entry %u: a NULL row has a key", i);
            roaring_bitmap_free(bm);
            if (rc)
                break;
            count[no] += e.a;
            keys++;
            rows += e.a;
        }
    }
    if (!rc && (keys != t->n_keys || rows != t->n_nonnull))
        rc = bt_corrupt(t, err, -1, "%llu keys and %llu rows, meta says %llu and %llu",
                        (unsigned long long)keys, (unsigned long long)rows,
                        (unsigned long long)t->n_keys, (unsigned long long)t->n_nonnull);
    /* inner pages: children, separators, counts (children precede parents) */
    for (uint32_t no = t->n_leaves; no < t->n_pages && !rc; no++) {
        Page pg;
        page_get(t, no, &pg);
        for (uint32_t i = 0; i < pg.n && !rc; i++) {
            Ent e, f;
            if (!ent_read(&pg, i, &e)) {
                rc = bt_corrupt(t, err, no, "entry %u does not decode", i);
                break;
            }
            if (e.a >= no) {
                rc = bt_corrupt(t, err, no, "entry %u: child page %llu out of order", i,
                                (unsigned long long)e.a);
                break;
            }
            Page ch;
            page_get(t, (uint32_t)e.a, &ch);
            if (ch.level + 1 != pg.level || parents[e.a]++) {
                rc = bt_corrupt(t, err, no, "entry %u: child page %llu misplaced", i,
                                (unsigned long long)e.a);
                break;
            }
            if (!ent_read(&ch, 0, &f)) {
                rc = bt_corrupt(t, err, (int64_t)e.a, "entry 0 does not decode");
                break;
            }
            if (f.key_n != e.key_n || (e.key_n && memcmp(f.key, e.key, e.key_n)))
                rc = bt_corrupt(t, err, no, "entry %u: separator is not the child's first key",
                                i);
            else if (e.b != count[e.a])
                rc = bt_corrupt(t, err, no, "entry %u: count %llu, the child holds %llu rows", i,
                                (unsigned long long)e.b, (unsigned long long)count[e.a]);
            count[no] += e.b;
        }
    }
    for (uint32_t no = 0; no + 1 < t->n_pages && !rc; no++)
        if (parents[no] != 1)
            rc = bt_corrupt(t, err, no, "page has no parent");
out:
    qr_free(count);
    qr_free(parents);
    qr_free(rv.v);
    if (seen)
        roaring_bitmap_free(seen);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Build                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct BtPair {
    uint64_t key;
    uint32_t row;
} BtPair;

/* Stable LSD radix sort by key, 8-bit digits (256 buckets stay in cache);
 * passes where every key has the same byte are skipped (small ranges,
 * bools, dictionary codes). */
static bool sort_pairs(BtPair *a, size_t n)
{
    if (n < 2)
        return true;
    uint64_t all_or = 0, all_and = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        all_or |= a[i].key;
        all_and &= a[i].key;
    }
    uint64_t varies = all_or ^ all_and;
    BtPair *tmp = qr_malloc(n * sizeof *tmp);
    if (!tmp)
        return false;
    BtPair *src = a, *dst = tmp;
    for (unsigned shift = 0; shift < 64; shift += 8) {
        if (!((varies >> shift) & 0xFF))
            continue;
        size_t cnt[256] = {0};
        for (size_t i = 0; i < n; i++)
            cnt[(src[i].key >> shift) & 0xFF]++;
        size_t sum = 0;
        for (size_t d = 0; d < 256; d++) {
            size_t c = cnt[d];
            cnt[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[cnt[(src[i].key >> shift) & 0xFF]++] = src[i];
        BtPair *x = src;
        src = dst;
        dst = x;
    }
    if (src != a)
        memcpy(a, src, n * sizeof *a);
    qr_free(tmp);
    return true;
}

/* Pages are written level by level, bottom-up: all leaves (so that they are
 * pages 0..n_leaves-1 in key order), then each inner level from the entries
 * the level below passed up, until a level fits in one page: the root. */
typedef struct TreeWriter {
    QrBuf pages, dir, rows;
    /* the page being filled */
    QrBuf ents;        /* entry bytes */
    uint32_t *offs;    /* owns: entry offsets in ents */
    uint32_t n, cap;
    uint64_t page_rows; /* rows below the page */
    QrBuf first;       /* first key of the page */
    uint32_t level;
    /* parent entries of the pages written at this level:
     * varint key_n, key, varint child, varint rows */
    QrBuf up;
    uint32_t n_up;
    uint32_t n_pages, n_leaves;
    bool oom;
} TreeWriter;

/* Write the page being filled and pass its entry up. */
static void tw_flush(TreeWriter *w)
{
    if (w->n == 0)
        return;
    uint32_t no = w->n_pages++;
    if (w->level == 0)
        w->n_leaves++;
    size_t start = w->pages.len;
    uint32_t hdr = BT_PAGE_HDR + 4 * w->n;
    qr_buf_putc(&w->pages, w->level == 0 ? BT_LEAF : BT_INNER);
    qr_buf_putc(&w->pages, (uint8_t)w->level);
    qr_buf_put_u16(&w->pages, 0);
    qr_buf_put_u32(&w->pages, w->n);
    for (uint32_t i = 0; i < w->n; i++)
        qr_buf_put_u32(&w->pages, hdr + w->offs[i]);
    qr_buf_append(&w->pages, w->ents.data, w->ents.len);
    qr_buf_put_u64(&w->dir, start);
    qr_buf_put_u32(&w->dir, (uint32_t)(w->pages.len - start));
    qr_buf_put_u32(&w->dir, 0);
    qr_buf_put_str(&w->up, (const char *)(w->first.data ? w->first.data : (const uint8_t *)""),
                   w->first.len);
    qr_buf_put_varint(&w->up, no);
    qr_buf_put_varint(&w->up, w->page_rows);
    w->n_up++;
    w->first.len = 0;
    w->ents.len = 0;
    w->n = 0;
    w->page_rows = 0;
    if (!qr_buf_ok(&w->pages) || !qr_buf_ok(&w->dir) || !qr_buf_ok(&w->up))
        w->oom = true;
}

/* Append an entry (key + encoded tail) to the current level, cutting the
 * page first when it would pass BT_PAGE_TARGET (leaves keep >= 1 entry,
 * inner pages >= 2, so every level has fewer pages than the one below). */
static void tw_add(TreeWriter *w, const uint8_t *key, size_t key_n, const uint8_t *tail,
                   size_t tail_n, uint64_t rows)
{
    uint8_t vb[10];
    size_t vn = qr_varint_encode(vb, key_n);
    size_t ent = vn + key_n + tail_n;
    uint32_t min_n = w->level == 0 ? 1 : 2;
    if (w->n >= min_n &&
        BT_PAGE_HDR + 4 * ((size_t)w->n + 1) + w->ents.len + ent > BT_PAGE_TARGET)
        tw_flush(w);
    if (w->n == w->cap) {
        uint32_t nc = w->cap ? w->cap * 2 : 64;
        uint32_t *no = qr_realloc(w->offs, nc * sizeof *no);
        if (!no) {
            w->oom = true;
            return;
        }
        w->offs = no;
        w->cap = nc;
    }
    if (w->n == 0)
        qr_buf_append(&w->first, key, key_n);
    w->offs[w->n++] = (uint32_t)w->ents.len;
    qr_buf_append(&w->ents, vb, vn);
    qr_buf_append(&w->ents, key, key_n);
    qr_buf_append(&w->ents, tail, tail_n);
    w->page_rows += rows;
    if (!qr_buf_ok(&w->ents) || !qr_buf_ok(&w->first))
        w->oom = true;
}

/* After the last leaf entry: flush, then build inner levels from the
 * entries passed up until one page remains.  Returns the height. */
static uint32_t tw_finish(TreeWriter *w)
{
    tw_flush(w);
    while (w->n_up > 1 && !w->oom) {
        if (w->level + 1 >= BT_MAX_HEIGHT) {
            w->oom = true;
            break;
        }
        QrBuf below = w->up;
        uint32_t n_below = w->n_up;
        qr_buf_init(&w->up);
        w->n_up = 0;
        w->level++;
        QrReader r;
        qr_rd_init(&r, below.data, below.len);
        for (uint32_t i = 0; i < n_below && !w->oom; i++) {
            size_t kn;
            const uint8_t *k = qr_rd_str(&r, &kn);
            uint64_t child = qr_rd_varint(&r), rows = qr_rd_varint(&r);
            uint8_t tail[20];
            size_t tn = qr_varint_encode(tail, child);
            tn += qr_varint_encode(tail + tn, rows);
            tw_add(w, k ? k : (const uint8_t *)"", kn, tail, tn, rows);
        }
        tw_flush(w);
        qr_buf_free(&below);
    }
    return w->level + 1;
}

static void tw_free(TreeWriter *w)
{
    qr_buf_free(&w->pages);
    qr_buf_free(&w->dir);
    qr_buf_free(&w->rows);
    qr_buf_free(&w->ents);
    qr_buf_free(&w->first);
    qr_buf_free(&w->up);
    qr_free(w->offs);
}

/* Encode the rows of one key into w->rows and add its leaf entry. */
static void tw_key(TreeWriter *w, const uint8_t *key, size_t key_n, const BtPair *ps, size_t n)
{
    uint64_t off = w->rows.len;
    uint8_t enc = BT_ROWS_DELTA;
    if (n >= BT_ROARING_MIN) {
        roaring_bitmap_t *bm = roaring_bitmap_create();
        if (!bm) {
            w->oom = true;
            return;
        }
        for (size_t i = 0; i < n; i++)
            roaring_bitmap_add(bm, ps[i].row);
        roaring_bitmap_run_optimize(bm);
        size_t sz = roaring_bitmap_portable_size_in_bytes(bm);
        if (qr_buf_reserve(&w->rows, sz)) {
            roaring_bitmap_portable_serialize(bm, (char *)w->rows.data + w->rows.len);
            w->rows.len += sz;
        }
        roaring_bitmap_free(bm);
        enc = BT_ROWS_ROARING;
    } else {
        for (size_t i = 0; i < n; i++)
            qr_buf_put_varint(&w->rows, i ? ps[i].row - ps[i - 1].row : ps[i].row);
    }
    uint8_t tail[40];
    size_t tn = qr_varint_encode(tail, n);
    tail[tn++] = enc;
    tn += qr_varint_encode(tail + tn, off);
    tn += qr_varint_encode(tail + tn, w->rows.len - off);
    tw_add(w, key, key_n, tail, tn, n);
}

/* The non-NULL (key, row) pairs of column c, in row order; NULL rows to nulls. */
static int collect(const Column *c, BtPair **out, size_t *n_out, roaring_bitmap_t *nulls,
                   QrError *err)
{
    uint32_t rows = col_rows(c), nb = col_n_blocks(c);
    QrColType type = col_type(c);
    BtPair *ps = qr_malloc((rows ? rows : 1) * sizeof *ps);
    void *vals = qr_malloc(COL_BLOCK_ROWS * 8);
    uint64_t nw[COL_BLOCK_ROWS / 64];
    if (!ps || !vals) {
        qr_free(ps), qr_free(vals);
        return qr_error_set(err, QR_ENOMEM, "out of memory building a B-tree over \"%s\"",
                            col_name(c));
    }
    size_t n = 0;
    for (uint32_t b = 0; b < nb; b++) {
        uint32_t got;
        switch (type) {
        case QR_COL_INT64:
        case QR_COL_TIMESTAMP: got = col_read_int(c, b, 1, vals, nw); break;
        case QR_COL_FLOAT64: got = col_read_float(c, b, 1, vals, nw); break;
        case QR_COL_BOOL: got = col_read_bool(c, b, 1, vals, nw); break;
        default: got = col_read_code(c, b, 1, vals, nw); break;
        }
        uint32_t base = b * COL_BLOCK_ROWS;
        for (uint32_t i = 0; i < got; i++) {
            if ((nw[i / 64] >> (i % 64)) & 1) {
                roaring_bitmap_add(nulls, base + i);
                continue;
            }
            uint64_t k;
            switch (type) {
            case QR_COL_INT64:
            case QR_COL_TIMESTAMP: k = key_from_int(((int64_t *)vals)[i]); break;
            case QR_COL_FLOAT64: k = key_from_double(((double *)vals)[i]); break;
            case QR_COL_BOOL: k = ((uint8_t *)vals)[i] ? 1 : 0; break;
            default: k = ((uint32_t *)vals)[i]; break;
            }
            ps[n++] = (BtPair){k, base + i};
        }
    }
    qr_free(vals);
    *out = ps;
    *n_out = n;
    return QR_OK;
}

int bt_write(const Column *c, const char *path, bool do_fsync, QrError *err)
{
    BtPair *ps = NULL;
    size_t n = 0;
    roaring_bitmap_t *nulls = roaring_bitmap_create();
    if (!nulls)
        return qr_error_set(err, QR_ENOMEM, "out of memory building a B-tree");
    int rc = collect(c, &ps, &n, nulls, err);
    if (rc) {
        roaring_bitmap_free(nulls);
        return rc;
    }
    TreeWriter w;
    memset(&w, 0, sizeof w);
    qr_buf_init(&w.pages);
    qr_buf_init(&w.dir);
    qr_buf_init(&w.rows);
    qr_buf_init(&w.ents);
    qr_buf_init(&w.first);
    qr_buf_init(&w.up);
    uint32_t height = 0;
    bool keyword = col_type(c) == QR_COL_KEYWORD;
    uint64_t n_keys = 0;
    if (!sort_pairs(ps, n))
        w.oom = true;
    for (size_t i = 0; i < n && !w.oom;) {
        size_t j = i + 1;
        while (j < n && ps[j].key == ps[i].key)
            j++;
        uint8_t kb[BT_NUM_KEY];
        const uint8_t *key = kb;
        size_t key_n = BT_NUM_KEY;
        if (keyword) {
            const char *s;
            if (!col_dict_get(c, (uint32_t)ps[i].key, &s, &key_n)) {
                rc = qr_error_set(err, QR_ECORRUPT, "column \"%s\": keyword code %llu has no "
                                  "dictionary entry", col_name(c), (unsigned long long)ps[i].key);
                break;
            }
            key = (const uint8_t *)s;
        } else {
            key_put(kb, ps[i].key);
        }
        tw_key(&w, key, key_n, ps + i, j - i);
        n_keys++;
        i = j;
    }
    if (!rc && n)
        height = tw_finish(&w);
    qr_free(ps);
    if (!rc && w.oom)
        rc = qr_error_set(err, QR_ENOMEM, "out of memory building a B-tree over \"%s\"",
                          col_name(c));
    if (!rc) {
        roaring_bitmap_run_optimize(nulls);
        size_t nsz = roaring_bitmap_portable_size_in_bytes(nulls);
        uint8_t meta[BT_META_LEN] = {0};
        qr_put_u32le(meta, (uint32_t)col_type(c));
        qr_put_u32le(meta + 4, col_rows(c));
        qr_put_u32le(meta + 8, (uint32_t)roaring_bitmap_get_cardinality(nulls));
        qr_put_u32le(meta + 12, w.n_pages);
        qr_put_u32le(meta + 16, w.n_leaves);
        qr_put_u32le(meta + 20, w.n_pages ? w.n_pages - 1 : 0);
        qr_put_u32le(meta + 24, height);
        qr_put_u64le(meta + 32, n_keys);
        qr_put_u64le(meta + 40, n);
        char *nb = qr_malloc(nsz);
        SfileWriter *sw = nb ? sfw_new(BT_FILE_KIND, BT_FORMAT_VERSION) : NULL;
        if (!sw) {
            qr_free(nb);
            rc = qr_error_set(err, QR_ENOMEM, "out of memory writing \"%s\"", path);
        } else {
            roaring_bitmap_portable_serialize(nulls, nb);
            if ((rc = sfw_add(sw, BT_SEC_META, meta, sizeof meta, err)) ||
                (rc = sfw_add_buf(sw, BT_SEC_DIR, &w.dir, err)) ||
                (rc = sfw_add_buf(sw, BT_SEC_PAGES, &w.pages, err)) ||
                (rc = sfw_add_buf(sw, BT_SEC_ROWS, &w.rows, err)) ||
                (rc = sfw_add(sw, BT_SEC_NULLS, nb, nsz, err)))
                sfw_free(sw);
            else
                rc = sfw_finish(sw, path, do_fsync, err);
            qr_free(nb);
        }
    }
    tw_free(&w);
    roaring_bitmap_free(nulls);
    return rc;
}
