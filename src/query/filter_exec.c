/*
 * filter_exec.c — evaluating a filter tree on one segment (query/filter.h):
 * compile to per-column ColFilters, estimate, choose an access path by
 * cost, and produce the matching doc ids as a roaring bitmap.
 *
 * Layer: query/.  Calls store/column.h, index/segment.h, index/btree.h.
 *
 * Normal form.  Compilation pushes NOT down to the leaves (De Morgan, TRUE
 * <-> FALSE, IS NULL <-> IS NOT NULL) so every node left is TRUE, FALSE,
 * AND, OR or a leaf that may be negated.  Under SQL's three-valued logic a
 * negated leaf on one column is "value not NULL and predicate false", so it
 * evaluates as  not_null(x) \ pred(x)  — never as a plain complement, which
 * would let NULL rows in.  A leaf on a column the segment lacks (a field
 * added later) reads NULL: it folds to TRUE/FALSE at compile time.
 *
 * Access paths (per segment, QrAccessPath):
 *   SCAN   leaves are zone-map-pruned column scans into bitmaps; AND passes
 *          its running result as the next child's candidates, so later
 *          children read only blocks that still hold a candidate; OR unions.
 *          Scans of large columns are split over threads by block ranges
 *          aligned to roaring containers.
 *   BTREE  as SCAN, but leaves whose field has a B-tree in this segment use
 *          bt_lookup (negated leaves: not_null minus lookup).
 *   CHECK  every candidate row (or every live row) is tested with
 *          filter_seg_match: random access into the columns, no bitmap per
 *          leaf.  Best when the text side leaves few candidates.
 *
 * Cost model (units: roughly nanoseconds on one core; what AUTO compares):
 *   scan   sum over leaves of 4096 * blocks_scanned * SCAN_ROW_NS
 *          + blocks_full * FULL_BLOCK_NS + LEAF_NS   (col_filter_zone_plan)
 *   btree  per leaf with a tree: bt_estimate rows * BT_ROW_NS + BT_LEAF_NS
 *          (leaves without one cost as scan)
 *   check  candidates * leaves * CHECK_NS
 */
#include "query/filter.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "index/btree.h"
#include "index/segment.h"
#include "store/mem.h"

#define SCAN_ROW_NS 0.35
#define FULL_BLOCK_NS 60.0
#define LEAF_NS 400.0
#define CHECK_NS 25.0
#define BT_ROW_NS 2.0
#define BT_LEAF_NS 1500.0
/* Split a leaf scan over threads from this many blocks on (~4M rows): below
 * that, thread start-up costs about as much as the scan (docs/columns.md). */
static _Atomic uint32_t par_min_blocks = 1024u;

void filter_set_parallel_min_blocks(uint32_t n_blocks) { par_min_blocks = n_blocks ? n_blocks : 1; }

typedef enum { FS_TRUE, FS_FALSE, FS_AND, FS_OR, FS_LEAF } FsKind;

typedef struct FsNode FsNode;
struct FsNode {
    FsKind kind;
    FsNode **kids;          /* owns (AND / OR) */
    int n_kids;
    bool neg;               /* leaf: NOT applied */
    const QrFilter *src;    /* borrows: the PRED / LIKE node */
    const Column *col;      /* borrows the segment's column */
    const BTree *bt;        /* borrows; NULL without a B-tree */
    ColPred pred;           /* the predicate as compiled (IS [NOT] NULL may be flipped
                               from the source's); operands borrow the source tree */
    ColFilter *cf;          /* owns: the predicate (NULL for LIKE) */
    ColVal *mset;           /* owns: a multi-valued leaf's IN set, the dictionary values
                               (borrowing the column) whose lists hold an operand */
    ColFilter *notnull;     /* owns: IS NOT NULL (negated leaves and LIKE) */
    double sel;             /* estimated fraction of rows */
};

struct FilterSeg {
    FsNode *root;           /* owns */
    const Segment *seg;     /* borrows */
    uint32_t n_rows;
    int n_leaves;
    QrError *err;           /* scratch for compile */
};

static void node_free(FsNode *n)
{
    if (!n)
        return;
    for (int i = 0; i < n->n_kids; i++)
        node_free(n->kids[i]);
    qr_free(n->kids);
    col_filter_free(n->cf);
    col_filter_free(n->notnull);
    qr_free(n->mset);
    qr_free(n);
}

void filter_seg_free(FilterSeg *fs)
{
    if (!fs)
        return;
    node_free(fs->root);
    qr_free(fs);
}

static FsNode *fnode(FsKind k)
{
    FsNode *n = qr_calloc(1, sizeof *n);
    if (n)
        n->kind = k;
    return n;
}

/* ---- LIKE ---- */

/* SQL LIKE on bytes: % any run, _ one byte, no escape character.
 * Iterative with one backtrack point (the last %), O(n * m) worst case. */
static bool like_match(const char *p, size_t pn, const char *s, size_t sn)
{
    size_t pi = 0, si = 0, star_p = (size_t)-1, star_s = 0;
    while (si < sn) {
        if (pi < pn && (p[pi] == '_' || (p[pi] != '%' && p[pi] == s[si]))) {
            pi++;
            si++;
        } else if (pi < pn && p[pi] == '%') {
            star_p = pi++;
            star_s = si;
        } else if (star_p != (size_t)-1) {
            pi = star_p + 1;
            si = ++star_s;
        } else {
            return false;
        }
    }
    while (pi < pn && p[pi] == '%')
        pi++;
    return pi == pn;
}

static bool like_row(const FsNode *n, uint32_t row)
{
    const char *s;
    size_t len;
    if (!col_get_str(n->col, row, &s, &len))
        return false;
    return like_match(n->src->pattern, n->src->pattern_len, s, len);
}

/* ---- compile ---- */

static FsNode *compile(FilterSeg *fs, const QrFilter *f, bool neg);

/* Does the array text s[0..n) hold one of the operands of p (EQ, NE: v;
 * IN: set)? */
static bool multi_holds(const ColPred *p, const char *s, size_t n, char *buf)
{
    size_t pos = 0, len;
    bool null;
    while (qr_array_next(s, n, &pos, buf, &len, &null) > 0) {
        if (null)
            continue;
        size_t k = p->op == CP_IN ? p->n_set : 1;
        for (size_t i = 0; i < k; i++) {
            const ColVal *v = p->op == CP_IN ? &p->set[i] : &p->v;
            if (v->kind == CV_STR && v->u.str.n == len && !memcmp(v->u.str.s, buf, len))
                return true;
        }
    }
    return false;
}

/* A multi-valued leaf (=, <>, IN) as CP_IN over the dictionary values of
 * this segment whose lists hold an operand: n->pred / n->mset.  <> is the
 * negation of =.  The dictionary is read once per segment. */
static bool compile_multi(FilterSeg *fs, FsNode *n, const Column *col)
{
    uint32_t d = col_dict_size(col);
    size_t maxlen = 0;
    for (uint32_t c = 0; c < d; c++) {
        const char *s;
        size_t len;
        if (col_dict_get(col, c, &s, &len) && len > maxlen)
            maxlen = len;
    }
    char *buf = qr_malloc(maxlen + 1);
    n->mset = qr_malloc(((size_t)d + 1) * sizeof *n->mset);
    if (!buf || !n->mset) {
        qr_free(buf);
        qr_error_set(fs->err, QR_ENOMEM, "out of memory");
        return false;
    }
    size_t k = 0;
    for (uint32_t c = 0; c < d; c++) {
        const char *s;
        size_t len;
        if (col_dict_get(col, c, &s, &len) && multi_holds(&n->pred, s, len, buf))
            n->mset[k++] = col_val_str(s, len);
    }
    qr_free(buf);
    if (n->pred.op == CP_NE)
        n->neg = !n->neg;
    n->pred.op = CP_IN;
    n->pred.set = n->mset;
    n->pred.n_set = k;
    return true;
}

static FsNode *compile_leaf(FilterSeg *fs, const QrFilter *f, bool neg)
{
    const Column *col = seg_column(fs->seg, f->field);
    ColPredOp op = f->kind == QF_PRED ? f->pred.op : CP_EQ;
    if (f->kind == QF_PRED && (op == CP_IS_NULL || op == CP_IS_NOT_NULL)) {
        if (neg) {
            op = op == CP_IS_NULL ? CP_IS_NOT_NULL : CP_IS_NULL;
            neg = false;
        }
        if (!col) /* every row NULL */
            return fnode(op == CP_IS_NULL ? FS_TRUE : FS_FALSE);
    } else if (!col) {
        return fnode(FS_FALSE); /* UNKNOWN either way */
    }
    FsNode *n = fnode(FS_LEAF);
    if (!n)
        return NULL;
    n->src = f;
    n->neg = neg;
    n->col = col;
    n->bt = seg_btree(fs->seg, f->field);
    fs->n_leaves++;
    if (f->kind == QF_PRED) {
        n->pred = f->pred;
        n->pred.op = op;
        if (f->multi && (op == CP_EQ || op == CP_NE || op == CP_IN) &&
            (col_type(col) != QR_COL_KEYWORD || !compile_multi(fs, n, col))) {
            if (col_type(col) != QR_COL_KEYWORD)
                qr_error_set(fs->err, QR_ETYPE, "column \"%s\" is not a keyword list here",
                             col_name(col));
            node_free(n);
            return NULL;
        }
        neg = n->neg;
        if (col_filter_new(col, &n->pred, &n->cf, fs->err) != QR_OK) {
            node_free(n);
            return NULL;
        }
    }
    if (neg || f->kind == QF_LIKE) {
        ColPred nn = {.op = CP_IS_NOT_NULL};
        if (col_filter_new(col, &nn, &n->notnull, fs->err) != QR_OK) {
            node_free(n);
            return NULL;
        }
    }
    double nonnull = col_rows(col) ? 1.0 - (double)col_stats(col).null_count / col_rows(col) : 0;
    double s = n->cf ? col_filter_selectivity(n->cf) : 0.1 * nonnull;
    if (neg)
        s = nonnull - s;
    n->sel = s < 0 ? 0 : s > 1 ? 1 : s;
    return n;
}

static FsNode *compile(FilterSeg *fs, const QrFilter *f, bool neg)
{
    switch (f->kind) {
    case QF_TRUE:
    case QF_FALSE: {
        FsNode *n = fnode((f->kind == QF_TRUE) != neg ? FS_TRUE : FS_FALSE);
        if (n)
            n->sel = n->kind == FS_TRUE;
        return n;
    }
    case QF_NOT: return compile(fs, f->kids[0], !neg);
    case QF_PRED:
    case QF_LIKE: return compile_leaf(fs, f, neg);
    case QF_AND:
    case QF_OR: break;
    }
    bool is_and = (f->kind == QF_AND) != neg;
    FsNode *n = fnode(is_and ? FS_AND : FS_OR);
    if (!n || !(n->kids = qr_calloc((size_t)f->n_kids, sizeof *n->kids))) {
        qr_free(n);
        return NULL;
    }
    double acc = 1.0;
    for (int i = 0; i < f->n_kids; i++) {
        FsNode *k = compile(fs, f->kids[i], neg);
        if (!k) {
            node_free(n);
            return NULL;
        }
        /* constant folding: AND drops TRUE and collapses on FALSE; OR dually */
        if ((is_and && k->kind == FS_TRUE) || (!is_and && k->kind == FS_FALSE)) {
            node_free(k);
            continue;
        }
        if ((is_and && k->kind == FS_FALSE) || (!is_and && k->kind == FS_TRUE)) {
            FsKind c = k->kind;
            node_free(k);
            node_free(n);
            FsNode *r = fnode(c);
            if (r)
                r->sel = c == FS_TRUE;
            return r;
        }
        /* children of AND sorted by selectivity (most selective first) */
        int j = n->n_kids++;
        if (is_and)
            while (j > 0 && n->kids[j - 1]->sel > k->sel) {
                n->kids[j] = n->kids[j - 1];
                j--;
            }
        n->kids[j] = k;
        acc *= is_and ? k->sel : 1.0 - k->sel;
    }
    if (n->n_kids == 0) {
        node_free(n);
        FsNode *r = fnode(is_and ? FS_TRUE : FS_FALSE);
        if (r)
            r->sel = is_and;
        return r;
    }
    if (n->n_kids == 1) {
        FsNode *k = n->kids[0];
        n->n_kids = 0;
        node_free(n);
        return k;
    }
    n->sel = is_and ? acc : 1.0 - acc;
    return n;
}

int filter_seg_compile(const QrFilter *f, const Segment *seg, FilterSeg **out, QrError *err)
{
    FilterSeg *fs = qr_calloc(1, sizeof *fs);
    if (!fs)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    QrError local;
    qr_error_clear(&local);
    fs->seg = seg;
    fs->n_rows = seg_n_docs(seg);
    fs->err = &local;
    fs->root = compile(fs, f, false);
    fs->err = NULL;
    if (!fs->root) {
        if (local.code == QR_OK)
            qr_error_set(&local, QR_ENOMEM, "out of memory");
        qr_error_copy(err, &local);
        filter_seg_free(fs);
        return local.code;
    }
    *out = fs;
    return QR_OK;
}

double filter_seg_selectivity(const FilterSeg *fs) { return fs->root->sel; }

/* ---- row by row ---- */

static bool match_node(const FsNode *n, uint32_t row)
{
    switch (n->kind) {
    case FS_TRUE: return true;
    case FS_FALSE: return false;
    case FS_AND:
        for (int i = 0; i < n->n_kids; i++)
            if (!match_node(n->kids[i], row))
                return false;
        return true;
    case FS_OR:
        for (int i = 0; i < n->n_kids; i++)
            if (match_node(n->kids[i], row))
                return true;
        return false;
    case FS_LEAF: break;
    }
    bool m = n->cf ? col_filter_match(n->cf, row) : like_row(n, row);
    if (!n->neg)
        return m;
    return !m && col_filter_match(n->notnull, row);
}

bool filter_seg_match(const FilterSeg *fs, uint32_t row)
{
    return row < fs->n_rows && match_node(fs->root, row);
}

/* ---- cost ---- */

static double scan_leaf_cost(const FsNode *n)
{
    ColScanStats z = {0};
    if (n->cf)
        col_filter_zone_plan(n->cf, &z);
    else
        z.blocks_scanned = col_n_blocks(n->col); /* LIKE reads every non-NULL row */
    double c = LEAF_NS + (double)z.blocks_scanned * COL_BLOCK_ROWS * SCAN_ROW_NS +
               (double)z.blocks_full * FULL_BLOCK_NS;
    if (n->neg) /* plus the not-NULL scan and a bitmap difference */
        c += LEAF_NS + (double)col_n_blocks(n->col) * FULL_BLOCK_NS;
    return n->cf ? c : c + (double)col_rows(n->col) * CHECK_NS;
}

static double tree_cost(const FsNode *n, bool btree)
{
    if (n->kind == FS_TRUE || n->kind == FS_FALSE)
        return 0;
    if (n->kind != FS_LEAF) {
        double c = 0;
        for (int i = 0; i < n->n_kids; i++)
            c += tree_cost(n->kids[i], btree);
        return c;
    }
    if (btree && n->bt && n->cf) {
        uint64_t rows = bt_estimate(n->bt, &n->pred);
        double c = BT_LEAF_NS + (double)rows * BT_ROW_NS;
        if (n->neg)
            c += LEAF_NS + (double)col_n_blocks(n->col) * FULL_BLOCK_NS;
        return c;
    }
    return scan_leaf_cost(n);
}

static bool has_btree(const FsNode *n)
{
    if (n->kind == FS_LEAF)
        return n->bt && n->cf;
    for (int i = 0; i < n->n_kids; i++)
        if (has_btree(n->kids[i]))
            return true;
    return false;
}

QrAccessPath filter_seg_choose(const FilterSeg *fs, uint64_t n_candidates)
{
    if (fs->root->kind == FS_TRUE || fs->root->kind == FS_FALSE)
        return QR_ACCESS_SCAN;
    double rows = n_candidates == UINT64_MAX ? (double)fs->n_rows : (double)n_candidates;
    double check = rows * fs->n_leaves * CHECK_NS;
    double scan = tree_cost(fs->root, false);
    if (n_candidates != UINT64_MAX) /* a scan with candidates skips blocks without them */
        scan = scan * (rows < fs->n_rows / 8.0 ? 0.5 : 1.0) + rows * 2.0;
    double bt = has_btree(fs->root) ? tree_cost(fs->root, true) : 1e300;
    if (check <= scan && check <= bt)
        return QR_ACCESS_CHECK;
    return bt < scan ? QR_ACCESS_BTREE : QR_ACCESS_SCAN;
}

/* ---- bitmap evaluation ---- */

/* roaring_bitmap_free(NULL) is not a no-op in every CRoaring version. */
static void bm_free(roaring_bitmap_t *b)
{
    if (b)
        roaring_bitmap_free(b);
}

typedef struct ScanJob {
    const ColFilter *cf;
    uint32_t first, n;
    const roaring_bitmap_t *cand;
    roaring_bitmap_t *out;
    ColScanStats st;
    QrError err;
    int rc;
} ScanJob;

static void *scan_job(void *arg)
{
    ScanJob *j = arg;
    qr_error_clear(&j->err);
    j->rc = col_filter_scan_range(j->cf, j->first, j->n, j->cand, j->out, &j->st, &j->err);
    return NULL;
}

static int n_cpus(void)
{
    static int n;
    if (!n) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c < 1 ? 1 : c > 16 ? 16 : (int)c;
    }
    return n;
}

/* col_filter_scan, split over threads for large columns. */
static int scan_cf(const ColFilter *cf, const Column *col, const roaring_bitmap_t *cand,
                   roaring_bitmap_t *out, QrFilterStats *st, QrError *err)
{
    ColScanStats cs = {0};
    uint32_t nb = col_n_blocks(col);
    int nt = n_cpus();
    int rc = QR_OK;
    if (nb < par_min_blocks || nt < 2) {
        rc = col_filter_scan(cf, cand, out, &cs, err);
    } else {
        ScanJob jobs[16];
        pthread_t th[16];
        bool started[16] = {0};
        uint32_t chunks = (nb + COL_BLOCKS_PER_CHUNK - 1) / COL_BLOCKS_PER_CHUNK;
        uint32_t per = (chunks + (uint32_t)nt - 1) / (uint32_t)nt;
        int nj = 0;
        for (uint32_t c = 0; c < chunks; c += per) {
            ScanJob *j = &jobs[nj];
            memset(j, 0, sizeof *j);
            j->cf = cf;
            j->first = c * COL_BLOCKS_PER_CHUNK;
            j->n = per * COL_BLOCKS_PER_CHUNK;
            j->cand = cand;
            j->out = roaring_bitmap_create();
            if (!j->out) {
                rc = qr_error_set(err, QR_ENOMEM, "out of memory");
                break;
            }
            nj++;
        }
        for (int i = 1; i < nj && rc == QR_OK; i++)
            started[i] = pthread_create(&th[i], NULL, scan_job, &jobs[i]) == 0;
        if (nj > 0)
            scan_job(&jobs[0]);
        for (int i = 0; i < nj; i++) {
            if (i > 0) {
                if (started[i])
                    pthread_join(th[i], NULL);
                else if (rc == QR_OK)
                    scan_job(&jobs[i]); /* no thread: run it here */
            }
            if (jobs[i].rc != QR_OK && rc == QR_OK) {
                qr_error_copy(err, &jobs[i].err);
                rc = jobs[i].rc;
            }
            cs.blocks_total += jobs[i].st.blocks_total;
            cs.blocks_skipped += jobs[i].st.blocks_skipped;
            cs.blocks_full += jobs[i].st.blocks_full;
            cs.blocks_scanned += jobs[i].st.blocks_scanned;
            if (rc == QR_OK)
                roaring_bitmap_or_inplace(out, jobs[i].out);
            bm_free(jobs[i].out);
        }
    }
    if (st) {
        st->blocks_total += cs.blocks_total;
        st->blocks_skipped += cs.blocks_skipped;
        st->blocks_full += cs.blocks_full;
        st->blocks_scanned += cs.blocks_scanned;
    }
    return rc;
}

typedef struct EvalCtx {
    const FilterSeg *fs;
    bool use_btree;
    QrFilterStats *st;
    QrError *err;
    bool used_btree;
} EvalCtx;

/* Rows of a LIKE leaf (not negated) among cand (or all non-NULL rows). */
static int like_rows(EvalCtx *e, const FsNode *n, const roaring_bitmap_t *cand,
                     roaring_bitmap_t *out)
{
    roaring_bitmap_t *base = roaring_bitmap_create();
    if (!base)
        return qr_error_set(e->err, QR_ENOMEM, "out of memory");
    int rc = scan_cf(n->notnull, n->col, cand, base, e->st, e->err);
    roaring_uint32_iterator_t *it = rc == QR_OK ? roaring_create_iterator(base) : NULL;
    if (rc == QR_OK && !it)
        rc = qr_error_set(e->err, QR_ENOMEM, "out of memory");
    uint32_t buf[256];
    uint32_t k;
    while (it && (k = roaring_read_uint32_iterator(it, buf, 256)) > 0) {
        for (uint32_t i = 0; i < k; i++)
            if (like_row(n, buf[i]))
                roaring_bitmap_add(out, buf[i]);
        if (e->st)
            e->st->candidates_checked += k;
    }
    roaring_free_uint32_iterator(it);
    bm_free(base);
    return rc;
}

/* The rows of a leaf, not negated, restricted to cand when not NULL. */
static int leaf_pos(EvalCtx *e, const FsNode *n, const roaring_bitmap_t *cand,
                    roaring_bitmap_t *out)
{
    if (!n->cf)
        return like_rows(e, n, cand, out);
    if (e->use_btree && n->bt) {
        BtStats bs = {0};
        int rc;
        e->used_btree = true;
        if (!cand) {
            rc = bt_lookup(n->bt, &n->pred, out, &bs, e->err);
        } else {
            roaring_bitmap_t *tmp = roaring_bitmap_create();
            if (!tmp)
                return qr_error_set(e->err, QR_ENOMEM, "out of memory");
            rc = bt_lookup(n->bt, &n->pred, tmp, &bs, e->err);
            if (rc == QR_OK) {
                roaring_bitmap_and_inplace(tmp, cand);
                roaring_bitmap_or_inplace(out, tmp);
            }
            bm_free(tmp);
        }
        if (e->st)
            e->st->btree_pages += bs.pages_read;
        return rc;
    }
    return scan_cf(n->cf, n->col, cand, out, e->st, e->err);
}

static int eval_node(EvalCtx *e, const FsNode *n, const roaring_bitmap_t *cand,
                     roaring_bitmap_t *out);

static int eval_leaf(EvalCtx *e, const FsNode *n, const roaring_bitmap_t *cand,
                     roaring_bitmap_t *out)
{
    if (!n->neg)
        return leaf_pos(e, n, cand, out);
    roaring_bitmap_t *nn = roaring_bitmap_create(), *pos = roaring_bitmap_create();
    int rc = nn && pos ? QR_OK : qr_error_set(e->err, QR_ENOMEM, "out of memory");
    if (rc == QR_OK)
        rc = scan_cf(n->notnull, n->col, cand, nn, e->st, e->err);
    if (rc == QR_OK)
        rc = leaf_pos(e, n, nn, pos);
    if (rc == QR_OK) {
        roaring_bitmap_andnot_inplace(nn, pos);
        roaring_bitmap_or_inplace(out, nn);
    }
    bm_free(nn);
    bm_free(pos);
    return rc;
}

static int eval_node(EvalCtx *e, const FsNode *n, const roaring_bitmap_t *cand,
                     roaring_bitmap_t *out)
{
    switch (n->kind) {
    case FS_FALSE: return QR_OK;
    case FS_TRUE:
        if (cand)
            roaring_bitmap_or_inplace(out, cand);
        else
            roaring_bitmap_add_range(out, 0, e->fs->n_rows);
        return QR_OK;
    case FS_LEAF: return eval_leaf(e, n, cand, out);
    case FS_OR:
        for (int i = 0; i < n->n_kids; i++) {
            int rc = eval_node(e, n->kids[i], cand, out);
            if (rc != QR_OK)
                return rc;
        }
        return QR_OK;
    case FS_AND: break;
    }
    /* AND: each child reads only the rows the previous ones kept */
    roaring_bitmap_t *cur = NULL;
    const roaring_bitmap_t *in = cand;
    for (int i = 0; i < n->n_kids; i++) {
        roaring_bitmap_t *next = roaring_bitmap_create();
        if (!next) {
            bm_free(cur);
            return qr_error_set(e->err, QR_ENOMEM, "out of memory");
        }
        int rc = eval_node(e, n->kids[i], in, next);
        bm_free(cur);
        cur = next;
        in = cur;
        if (rc != QR_OK) {
            bm_free(cur);
            return rc;
        }
        if (roaring_bitmap_is_empty(cur))
            break;
    }
    roaring_bitmap_or_inplace(out, cur);
    bm_free(cur);
    return QR_OK;
}

int filter_seg_eval(const FilterSeg *fs, QrAccessPath path, const roaring_bitmap_t *dels,
                    const roaring_bitmap_t *candidates, roaring_bitmap_t *out,
                    QrFilterStats *st, QrError *err)
{
    if (path == QR_ACCESS_AUTO)
        path = filter_seg_choose(fs, candidates ? roaring_bitmap_get_cardinality(candidates)
                                                : UINT64_MAX);
    if (fs->root->kind == FS_FALSE) {
        if (st)
            st->segs_pruned++;
        return QR_OK;
    }
    int rc = QR_OK;
    roaring_bitmap_t *res = roaring_bitmap_create();
    if (!res)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    if (path == QR_ACCESS_CHECK) {
        uint64_t checked = 0;
        if (candidates) {
            roaring_uint32_iterator_t *it = roaring_create_iterator(candidates);
            if (!it) {
                bm_free(res);
                return qr_error_set(err, QR_ENOMEM, "out of memory");
            }
            uint32_t buf[256], k;
            while ((k = roaring_read_uint32_iterator(it, buf, 256)) > 0) {
                for (uint32_t i = 0; i < k; i++) {
                    if (dels && roaring_bitmap_contains(dels, buf[i]))
                        continue;
                    checked++;
                    if (filter_seg_match(fs, buf[i]))
                        roaring_bitmap_add(res, buf[i]);
                }
            }
            roaring_free_uint32_iterator(it);
        } else {
            for (uint32_t r = 0; r < fs->n_rows; r++) {
                if (dels && roaring_bitmap_contains(dels, r))
                    continue;
                checked++;
                if (match_node(fs->root, r))
                    roaring_bitmap_add(res, r);
            }
        }
        if (st) {
            st->candidates_checked += checked;
            st->segs_check++;
        }
    } else {
        EvalCtx e = {.fs = fs, .use_btree = path == QR_ACCESS_BTREE, .st = st, .err = err};
        rc = eval_node(&e, fs->root, candidates, res);
        if (dels)
            roaring_bitmap_andnot_inplace(res, dels);
        if (st) {
            if (e.used_btree)
                st->segs_btree++;
            else
                st->segs_scan++;
        }
    }
    if (rc == QR_OK) {
        if (st)
            st->rows_matched += roaring_bitmap_get_cardinality(res);
        roaring_bitmap_or_inplace(out, res);
    }
    bm_free(res);
    return rc;
}

/* An AND of ranges on one integer/timestamp column with a B-tree (e.g.
 * published >= X AND published < Y) as one inclusive BETWEEN; false for any
 * other shape.  *empty when the ranges cannot meet. */
static bool and_as_between(const FsNode *n, ColPred *out, const BTree **bt, bool *empty)
{
    int64_t lo = INT64_MIN, hi = INT64_MAX;
    *empty = false;
    for (int i = 0; i < n->n_kids; i++) {
        const FsNode *k = n->kids[i];
        if (k->kind != FS_LEAF || k->neg || !k->cf || !k->bt || k->src->field != n->kids[0]->src->field)
            return false;
        QrColType ct = col_type(k->col);
        if (ct != QR_COL_INT64 && ct != QR_COL_TIMESTAMP)
            return false;
        const ColPred *p = &k->pred;
        if (p->v.kind != CV_INT || (p->op == CP_BETWEEN && p->hi.kind != CV_INT))
            return false;
        int64_t v = p->v.u.i;
        switch (p->op) {
        case CP_EQ: lo = v > lo ? v : lo; hi = v < hi ? v : hi; break;
        case CP_GE: lo = v > lo ? v : lo; break;
        case CP_GT:
            if (v == INT64_MAX)
                *empty = true;
            else
                lo = v + 1 > lo ? v + 1 : lo;
            break;
        case CP_LE: hi = v < hi ? v : hi; break;
        case CP_LT:
            if (v == INT64_MIN)
                *empty = true;
            else
                hi = v - 1 < hi ? v - 1 : hi;
            break;
        case CP_BETWEEN:
            lo = v > lo ? v : lo;
            hi = p->hi.u.i < hi ? p->hi.u.i : hi;
            break;
        default: return false;
        }
    }
    *empty = *empty || lo > hi;
    *out = (ColPred){.op = CP_BETWEEN, .v = col_val_int(lo), .hi = col_val_int(hi)};
    *bt = n->kids[0]->bt;
    return true;
}

bool filter_seg_btree_count(const FilterSeg *fs, uint64_t *count, QrFilterStats *st)
{
    const FsNode *n = fs->root;
    if (n->kind == FS_FALSE) {
        *count = 0;
        return true;
    }
    ColPred range;
    const ColPred *pred = &n->pred;
    const BTree *bt = n->bt;
    if (n->kind == FS_AND) {
        bool empty;
        if (!and_as_between(n, &range, &bt, &empty))
            return false;
        if (empty) {
            *count = 0;
            return true;
        }
        pred = &range;
    } else if (n->kind != FS_LEAF || n->neg || !n->cf || !n->bt) {
        return false;
    }
    BtStats bs = {0};
    QrError e;
    qr_error_clear(&e);
    if (bt_count(bt, pred, count, &bs, &e) != QR_OK)
        return false; /* the caller falls back to producing the rows */
    if (st) {
        st->btree_pages += bs.pages_read;
        st->rows_matched += *count;
        st->segs_btree++;
    }
    return true;
}

