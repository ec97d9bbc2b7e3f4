/*
 * exec.h — the operator contract of SQL execution: a physical plan is a tree
 * of operators, each pulling batches of rows from its children.
 *
 * Layer: query/ (SQL).  Operators call the SQL engine's expressions and
 * values (sql_int.h), the table scans (sql_scan.c) and the store/index
 * floors below; they never read libpg_query's tree (the binder did that).
 * One operator per file in this folder (op_*.c); exec.c holds the driver and
 * the batch helpers, explain.c prints a tree as PostgreSQL's EXPLAIN does.
 *
 * Rows.  Below the projection, a query block's rows are as wide as its
 * whole scope (every FROM item's columns, sql_int.h SqlScope): a table scan
 * fills its own column range and leaves the others NULL, a join copies the
 * range of its inner side in.  Bound expressions index that layout
 * directly, so no column is ever renumbered.  An aggregate emits its input
 * layout's width plus one value per aggregate (a representative input row,
 * then the aggregate values, which SqlEvalRow.aggv reads); a projection
 * emits its targets then the extra ORDER BY keys.
 *
 * Batches.  `next` hands out at most SQL_BATCH_ROWS rows at a time, row
 * major, with a selection vector (the live rows) so that a filter narrows a
 * batch without moving rows.  A batch is borrowed from its producer and
 * valid until the producer's next call (or close); a consumer that keeps
 * values past that copies them (sqlv_own for strings).
 *
 * Late columns.  Rows that are one segment's documents (a table scan and
 * the filters and projections over it) carry their producer as `src`,
 * their local doc ids and scores; only the columns the scan's own
 * conditions read are filled when the batch is made.  An operator that
 * reads more columns asks for them with sql_batch_need, which fills them
 * for the live rows only.  Operators that keep rows (hash tables, sorts)
 * ask for every column they keep first; their output has no `src`.
 *
 * Errors go to cx->err (first wins) and every call returns the code; after
 * an error the tree is only closed.  Every operator checks cancel, the
 * deadline and the memory cap at least once per batch (sql_check).
 *
 * Memory.  Plans and operator state live in the statement's arena
 * (cx->arena), whose cap is the statement's memory budget; per-batch
 * scratch is released by the operator that made it.
 */
#ifndef QR_EXEC_H
#define QR_EXEC_H

#include <stdbool.h>
#include <stdint.h>

#include "query/sql_int.h"

#define SQL_BATCH_ROWS 1024

typedef struct SqlBatch SqlBatch;
typedef struct SqlDocSrc SqlDocSrc;
typedef struct SqlOp SqlOp;
typedef struct SqlExplainNode SqlExplainNode;

/* ---- batches ---------------------------------------------------------- */

/* A producer of document rows that fills columns on demand. */
struct SqlDocSrc {
    /* Fill scope column `col` of b's live rows (col in [first, first + n_cols)). */
    int (*fill)(SqlDocSrc *src, SqlCtx *cx, SqlBatch *b, int col);
    int first, n_cols;        /* the scope columns it can fill */
    const int *used;          /* the columns anything in the query reads */
    int n_used;
};

struct SqlBatch {
    int n;                    /* live rows (> 0 in every batch handed out) */
    const uint16_t *sel;      /* the live rows' indexes, ascending; NULL: 0 .. n-1 */
    int n_phys;               /* rows stored */
    int width;                /* values per row */
    SqlValue *rows;           /* n_phys * width, row major */
    bool stable;              /* the values (strings too) live in the statement's arena
                                 until it ends: a consumer keeps them without copying */
    /* document rows (NULL src otherwise) */
    SqlDocSrc *src;           /* fills columns not filled yet */
    uint8_t *filled;          /* width flags: column c holds values for every live row */
    int seg;                  /* segment of the rows in the scan's snapshot */
    int64_t base;             /* global doc id of the segment's local doc 0 */
    const uint32_t *docs;     /* n_phys local doc ids */
    const float *scores;      /* n_phys BM25 scores, or NULL */
};

/* Physical index of live row i. */
static inline int sql_batch_at(const SqlBatch *b, int i) { return b->sel ? b->sel[i] : i; }
static inline SqlValue *sql_batch_row(const SqlBatch *b, int i)
{
    return b->rows + (size_t)sql_batch_at(b, i) * (size_t)b->width;
}

/* Make every column listed in cols[0..n) hold values for b's live rows
 * (a no-op for rows that are not documents, or columns already filled). */
int sql_batch_need(SqlCtx *cx, SqlBatch *b, const int *cols, int n);
/* Fill every column the query reads (before rows are kept or copied). */
int sql_batch_fill(SqlCtx *cx, SqlBatch *b);
/* The scope columns an expression reads (SE_COL, and the id / score columns
 * of text predicates), added to a set: marks[c] = 1; returns how many were
 * new.  Outer references and aggregate slots are not columns. */
int sql_expr_cols(const SqlExpr *e, uint8_t *marks);
/* The marked columns as a list in cx->arena (NULL, error set, on failure). */
int *sql_cols_list(SqlCtx *cx, const uint8_t *marks, int width, int *n);

/* A batch the operator owns: room for SQL_BATCH_ROWS rows of `width` (and
 * a selection vector), in cx->arena.  NULL (error set) over the cap. */
SqlBatch *sql_batch_new(SqlCtx *cx, int width);

/* Rows kept by operators that hold them (hash tables, sorts, results):
 * row-major, growing, in cx->arena (sql_int.h SqlRowSink, sql_sink_slot).
 * Copy b's live rows' first `width` values in (sql_batch_fill first),
 * strings owned by the arena. */
int sql_sink_batch(SqlCtx *cx, SqlRowSink *s, SqlBatch *b);

/* ---- operators -------------------------------------------------------- */

typedef struct SqlOpVt {
    const char *name;         /* short kind for debugging ("filter") */
    /* Prepare to produce rows (again, after close: a rescan). */
    int (*open)(SqlOp *op, SqlCtx *cx);
    /* The next batch into *out, or *out NULL at the end (calling again there
     * is legal and returns the end again). */
    int (*next)(SqlOp *op, SqlCtx *cx, SqlBatch **out);
    /* Release what open took (snapshots, heap memory); the plan stays and
     * may be opened again.  Must be safe after a failed or missing open. */
    void (*close)(SqlOp *op, SqlCtx *cx);
    /* Describe the node: its label and properties (explain.c prints them). */
    void (*explain)(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n);
} SqlOpVt;

/* What EXPLAIN ANALYZE reports of a node (summed over loops). */
typedef struct SqlOpStats {
    uint64_t rows;            /* live rows handed out */
    uint64_t loops;           /* opens */
    uint64_t ns_first;        /* until the first batch (or the end) of each loop */
    uint64_t ns_total;        /* in open + next calls */
    uint64_t ns_loop0;        /* ns_total when this loop began */
    bool first_seen;          /* this loop's first batch or end was seen */
    bool open;                /* between a successful open and close */
} SqlOpStats;

struct SqlOp {
    const SqlOpVt *vt;
    SqlOp *kids[2];           /* children (outer / left first); NULL when fewer */
    int n_kids;
    int width;                /* values per output row */
    /* planner's estimates (docs/planner.md: one unit, a row checked) */
    double startup_cost, total_cost;
    double est_rows;
    int est_width;            /* bytes per output row, roughly */
    const SqlScope *scope;    /* a query block's root: the columns its subtree's
                                 expressions read, for EXPLAIN (NULL: the parent's) */
    SqlOpStats st;
};

/* A new operator of `size` bytes (zeroed, its SqlOp first) with its vtable,
 * children (NULL for none) and output width, in cx->arena; NULL (54000 set)
 * over the cap.  Estimates start as the first child's. */
void *sql_op_new(SqlCtx *cx, size_t size, const SqlOpVt *vt, SqlOp *kid0, SqlOp *kid1, int width);
/* 54000 "query memory limit exceeded" with its hint; returns the code. */
int sql_nomem(SqlCtx *cx);
/* WHERE semantics over conjuncts (all must be true); what their evaluation
 * allocated is given back (a test keeps nothing). */
int sql_conj_test(SqlCtx *cx, SqlExpr *const *conj, int n, const SqlEvalRow *er, bool *pass);
/* Hand out the first k rows of an operator's own batch (dense, no source). */
SqlBatch *sql_batch_dense(SqlBatch *b, int k);
/* A per-batch arena for an operator's values (a child of the statement's:
 * one budget), made on first use; NULL (error set) on failure. */
QrArena *sql_op_scratch(SqlCtx *cx, QrArena **slot);

/* Keep the rows of b's first k (dense, no source) for which every
 * conjunct is true: b->n and b->sel (sel, SQL_BATCH_ROWS entries) set;
 * returns how many passed (or -1, error set). */
int sql_batch_keep(SqlCtx *cx, SqlBatch *b, int k, SqlExpr *const *conj, int n_conj, uint16_t *sel);
/* Hand out b narrowed to its k live rows listed in sel (physical
 * indexes): *out = b; with none left, *out NULL after a check of cancel,
 * the deadline and the memory cap (the caller pulls the next batch). */
int sql_batch_narrow(SqlCtx *cx, SqlBatch *b, uint16_t *sel, int k, SqlBatch **out);
/* Row i of b (room for `width` values) = NULLs, with vals[0..n_cols) at
 * columns [first, first + n_cols). */
void sql_batch_place(SqlBatch *b, int i, const SqlValue *vals, int n_cols, int first);

/* A hash set of rows (their first `width` values; NULLs equal each other),
 * kept as owned copies in insertion order, in cx->arena (DISTINCT, set
 * operations, the recursive union). */
typedef struct SqlRowHash {
    int width;
    int64_t *slots;           /* index into keys, -1 empty */
    uint64_t cap, n, kcap;
    SqlValue *keys;           /* n * width */
    uint64_t *hashes;
} SqlRowHash;
int sql_rowhash_init(SqlCtx *cx, SqlRowHash *h, int width);
/* Find row; add it when absent and `add` (*fresh true).  *idx: its entry,
 * or -1 when absent and not added. */
int sql_rowhash_put(SqlCtx *cx, SqlRowHash *h, const SqlValue *row, bool add, int64_t *idx,
                    bool *fresh);

/* The driver: every call goes through these (timing, counters, checks). */
int sql_op_open(SqlOp *op, SqlCtx *cx);
int sql_op_next(SqlOp *op, SqlCtx *cx, SqlBatch **out);
void sql_op_close(SqlOp *op, SqlCtx *cx);
/* Open, pull every batch into s (the first `s->width` values of each live
 * row, strings owned), close.  The tree is closed even on error. */
int sql_op_drain(SqlOp *root, SqlCtx *cx, SqlRowSink *s);

/* ---- the operators (one file each) ------------------------------------ */

struct SqlTableScan;
struct SqlAggSpec;

/* op_scan.c: one table access of sql_scan.c (the access path its planner
 * chose), its pushed conditions applied; document rows, scope-wide. */
SqlOp *sql_op_scan(SqlCtx *cx, struct SqlTableScan *sc, int width);
/* After a run: the plan summary of every table scan in the tree
 * (sql_scan_note), in tree order. */
void sql_op_scan_notes(SqlCtx *cx, const SqlOp *root);
/* The table scan an operator is, or NULL. */
struct SqlTableScan *sql_op_scan_of(const SqlOp *op);
/* Rows held by the plan (a CTE's result, a VALUES list, a catalog
 * relation, a recursive query's working table): row major, n_cols values
 * each.  A reader takes vals and n when it is opened, so the producer may
 * refill the set between two opens (the working table does). */
typedef struct SqlRowSet {
    const SqlValue *vals;     /* borrows: n * n_cols */
    uint64_t n;
    int n_cols;
} SqlRowSet;
/* op_rows.c: materialized rows (VALUES, a CTE, a catalog relation, a
 * set-returning function in FROM, a working table): the set's rows placed
 * at scope columns [first, first + set->n_cols) of rows `width` wide (the
 * rest NULL); `conj` (may be NULL) filters them.  The set is borrowed.
 * `label` names the node ("Values Scan", "CTE Scan on x"...). */
SqlOp *sql_op_rows(SqlCtx *cx, const SqlRowSet *set, int first, int width, SqlExpr **conj,
                   int n_conj, const char *label);
/* op_subquery.c: a query block's tree as a FROM item: the first `n_cols`
 * values of the child's rows placed at scope columns [first, first +
 * n_cols) of rows `width` wide, `conj` applied; streams. */
SqlOp *sql_op_subquery(SqlCtx *cx, SqlOp *kid, int n_cols, int first, int width, SqlExpr **conj,
                       int n_conj, const char *label);
/* op_filter.c: rows for which every conjunct is true. */
SqlOp *sql_op_filter(SqlCtx *cx, SqlOp *kid, SqlExpr **conj, int n_conj);
/* op_project.c: targets (and extra sort keys) evaluated per row, output
 * types cast to `types` (n_out of them; NULL: as evaluated).  With
 * aggregates, rows are [input row..., aggregate values...] of an aggregate
 * below: in_width is the input row's width.  Set-returning targets fan out
 * (PostgreSQL 10's rule: as many rows as the longest, others padded). */
SqlOp *sql_op_project(SqlCtx *cx, SqlOp *kid, SqlExpr **exprs, int n_out, const QrSqlType *types,
                      int in_width, bool has_aggs, bool has_srf);
/* op_hash_agg.c: grouping by keys with aggregates and HAVING; see SqlAggSpec. */
SqlOp *sql_op_hash_agg(SqlCtx *cx, SqlOp *kid, const struct SqlAggSpec *spec);
/* op_sort.c: every row, ordered by keys (sql_int.h sqlv_key_cmp per key;
 * ties keep their input order). */
typedef struct SqlSortKey {
    int col;                  /* column of the input row */
    bool desc, nulls_first;
    const char *label;        /* for EXPLAIN ("n DESC") */
} SqlSortKey;
SqlOp *sql_op_sort(SqlCtx *cx, SqlOp *kid, const SqlSortKey *keys, int n_keys);
/* op_topn.c: the first `keep` rows by keys, holding at most 2 * keep.
 * sql_topn_may_enter tells a scan below whether a row whose first key is
 * `key` can still be among them (the ordered walk's stop rule). */
SqlOp *sql_op_topn(SqlCtx *cx, SqlOp *kid, const SqlSortKey *keys, int n_keys, uint64_t keep);
/* (shared by the sorts) The order of n rows by keys, in cx->arena. */
int sql_sort_index(SqlCtx *cx, const SqlValue *vals, uint64_t n, int width, const SqlSortKey *keys,
                   int n_keys, uint64_t **out);
/* The first k rows that sql_sort_index would give, found in O(n) on
 * average: idx[0, k) holds them in arrival order (not sorted). */
int sql_first_index(SqlCtx *cx, const SqlValue *vals, uint64_t n, int width, const SqlSortKey *keys,
                    int n_keys, uint64_t k, uint64_t **out);
/* Copy the next rows vals[idx[*pos...]] into b (dense); how many. */
int sql_rows_batch(SqlBatch *b, const SqlValue *vals, const uint64_t *idx, uint64_t n, uint64_t *pos);
void sql_sort_keys_explain(SqlCtx *cx, SqlExplainNode *n, const SqlSortKey *keys, int n_keys);
bool sql_topn_may_enter(void *topn, const SqlValue *key);
/* op_unique.c (DISTINCT ON): the first of every run of rows equal in the
 * columns cols[0..n) (the input is sorted so that equal ones follow each
 * other; NULLs equal each other). */
SqlOp *sql_op_unique_on(SqlCtx *cx, SqlOp *kid, const int *cols, int n);
/* op_limit.c: skip `offset` rows, then hand out at most `limit`. */
SqlOp *sql_op_limit(SqlCtx *cx, SqlOp *kid, uint64_t limit, uint64_t offset);
/* ... of which *less (read when the first batch arrives: a scan's
 * rank_before) the tree below has dropped already. */
void sql_op_limit_less(SqlOp *limit, const uint64_t *less);
/* op_unique.c: the first of every set of equal rows (first `key_width`
 * values compared; NULLs equal each other). */
SqlOp *sql_op_unique(SqlCtx *cx, SqlOp *kid, int key_width);
/* op_hash_join.c: the outer kid's (kids[0]) rows, each joined to the
 * matching rows of the inner kid (kids[1], read and hashed first).  The
 * join types are PostgreSQL's executor's: LEFT keeps an outer row without
 * a match (inner columns NULL), RIGHT an inner row without a match (outer
 * columns NULL), FULL both; SEMI hands out an outer row that has a match,
 * once, ANTI one that has none.  Without keys it is a nested loop: every
 * inner row is a candidate, and the pairs are bounded (54000). */
typedef enum SqlJoinType {
    SQL_JOIN_INNER, SQL_JOIN_LEFT, SQL_JOIN_RIGHT, SQL_JOIN_FULL, SQL_JOIN_SEMI, SQL_JOIN_ANTI,
} SqlJoinType;
#define SQL_JOIN_MAX_KEYS 16
/* `lk`/`rk` are equality keys, evaluated over outer / inner rows (equal by
 * sqlv_cmp; a NULL key never matches); `cond` the other conditions, over
 * the joined row.  Output rows are the outer row with the inner side's
 * scope columns [first, first + n_cols) copied in (none for SEMI / ANTI),
 * then the merged columns of JOIN ... USING computed: calc_col[i] =
 * calc[i].  Inner rows of a SEMI / ANTI join may be laid out as their own
 * producer's (a subquery's key columns): rk reads them so. */
typedef struct SqlJoinSpec {
    SqlJoinType type;
    SqlExpr **lk, **rk;
    int n_keys;
    SqlExpr **cond;
    int n_cond;
    int first, n_cols;        /* the inner side's scope columns */
    const int *calc_col;      /* merged USING columns computed per output row */
    SqlExpr **calc;
    int n_calc;
    const char *cond_label;   /* EXPLAIN's "Hash Cond" when set (keys over two scopes) */
} SqlJoinSpec;
SqlOp *sql_op_hash_join(SqlCtx *cx, SqlOp *outer, SqlOp *inner, const SqlJoinSpec *spec);
/* A keyed hash join's spec, or NULL for any other operator. */
const SqlJoinSpec *sql_op_hash_join_spec(const SqlOp *op);
/* An open hash join: fn(arg, joined row) for every inner row matching
 * outer row `orow` (keys equal, conditions pass); the joined row is the
 * join's own, valid during the call. */
int sql_hash_join_each(SqlOp *op, SqlCtx *cx, const SqlValue *orow,
                       int (*fn)(void *arg, const SqlValue *row), void *arg);
SqlOp *sql_op_nl_join(SqlCtx *cx, SqlOp *outer, SqlOp *inner, const SqlJoinSpec *spec);
/* (shared by the joins) Copy an inner row's columns into o, which holds
 * the outer row, compute the merged columns and test the join's
 * conditions. */
int sql_join_pair(SqlCtx *cx, const SqlJoinSpec *js, SqlValue *o, const SqlValue *inner, bool *pass);
/* o = the outer row with the inner columns NULL (no match), merged columns
 * computed; with outer NULL, o = the inner row's columns alone. */
int sql_join_unmatched(SqlCtx *cx, const SqlJoinSpec *js, SqlValue *o, const SqlValue *outer,
                       const SqlValue *inner, int width);
void sql_join_explain(SqlCtx *cx, SqlExplainNode *n, const SqlJoinSpec *js, uint64_t pairs);
/* op_lateral.c: a LATERAL item (a subquery or a set-returning function
 * reading columns of the items before it): for every outer row, `rows`
 * computes the item's rows (n_cols values each), which are joined as by a
 * nested loop (INNER or LEFT; spec's inner range is the item's). */
typedef int (*SqlLateralFn)(void *arg, SqlCtx *cx, const SqlValue *outer_row, SqlRowSet *out);
SqlOp *sql_op_lateral(SqlCtx *cx, SqlOp *outer, SqlLateralFn rows, void *arg,
                      const SqlJoinSpec *spec, const char *label);
/* op_append.c: every row of the first kid, then of the second (UNION ALL);
 * the first `width` values of each row are the output. */
SqlOp *sql_op_append(SqlCtx *cx, SqlOp *a, SqlOp *b, int width);
/* op_setop.c: INTERSECT / EXCEPT [ALL] over the first `width` values of
 * the kids' rows (NULLs equal each other): the left rows counted in a hash
 * table, the right ones streamed against it. */
SqlOp *sql_op_setop(SqlCtx *cx, SqlOp *left, SqlOp *right, int width, bool except, bool all);
/* op_recursive.c: WITH RECURSIVE's loop: the non-recursive term's rows
 * (kids[0]), then the recursive term (kids[1]) run again and again over the
 * rows the last round produced, which `wt` holds for its WorkTable Scan,
 * until a round produces none.  distinct (UNION): a row seen before is
 * dropped.  Every round checks cancel and the deadline; the rows kept
 * count against the statement's memory budget (54000 past it). */
SqlOp *sql_op_recursive(SqlCtx *cx, SqlOp *init, SqlOp *step, SqlRowSet *wt, int width,
                        bool distinct, const char *name);
/* op_result.c: one row computed when opened by `fn` into row[0..width)
 * (a FROM-less SELECT's row, aggregates answered from postings or column
 * statistics); fn NULL: one row of NULLs; `none` true: no row (a
 * constant-false WHERE).  When fn sets *answered false, the rows come from
 * `fallback` (the ordinary plan; may be NULL when fn always answers). */
typedef int (*SqlResultFn)(void *arg, SqlCtx *cx, SqlValue *row, bool *answered);
SqlOp *sql_op_result(SqlCtx *cx, int width, SqlResultFn fn, void *arg, bool none,
                     const char *label, const char *detail, SqlOp *fallback);

/* ---- windows (op_window.c; bound by plan/bind_window.c) ---------------- */

typedef enum SqlWinKind {
    SW_ROW_NUMBER, SW_RANK, SW_DENSE_RANK, SW_PERCENT_RANK, SW_CUME_DIST, SW_NTILE,
    SW_LAG, SW_LEAD, SW_FIRST_VALUE, SW_LAST_VALUE, SW_NTH_VALUE,
    SW_AGG,                   /* an aggregate over the frame */
} SqlWinKind;

typedef enum SqlFrameMode { SQL_FRAME_RANGE, SQL_FRAME_ROWS, SQL_FRAME_GROUPS } SqlFrameMode;
typedef enum SqlFrameBound {
    SQL_FB_UNBOUNDED_PRECEDING, SQL_FB_PRECEDING, SQL_FB_CURRENT, SQL_FB_FOLLOWING,
    SQL_FB_UNBOUNDED_FOLLOWING,
} SqlFrameBound;
typedef enum SqlFrameExclude {
    SQL_EXCLUDE_NONE, SQL_EXCLUDE_CURRENT, SQL_EXCLUDE_GROUP, SQL_EXCLUDE_TIES,
} SqlFrameExclude;

/* A window: PARTITION BY, ORDER BY and the frame.  Expressions read the
 * rows the window operator gets (the aggregate's when grouped). */
typedef struct SqlWinDef {
    const char *name;         /* WINDOW w: its name (NULL inline) */
    SqlExpr **part;           /* n_part */
    int n_part;
    SqlExpr **order;          /* n_order, with their directions */
    bool *desc, *nulls_first;
    int n_order;
    bool has_frame;           /* written (not the default) */
    SqlFrameMode mode;
    SqlFrameBound start, end;
    SqlExpr *start_off, *end_off; /* n PRECEDING / FOLLOWING: constants or parameters */
    bool off_us;              /* RANGE over a timestamp: the offsets are microseconds */
    SqlFrameExclude exclude;
} SqlWinDef;

/* One window function call. */
typedef struct SqlWinFunc {
    SqlWinKind kind;
    const char *name;         /* "rank", "sum" */
    SqlExpr **args;           /* n_args (lag: value, offset, default) */
    int n_args;
    SqlAgg *agg;              /* SW_AGG: the aggregate (its arg / arg2 / filter) */
    SqlWinDef *win;           /* borrows (shared by calls over the same window) */
    QrSqlType type;           /* result type */
    int col;                  /* its column in the rows (SE_WIN.col) */
    SqlExpr *ref;             /* the SE_WIN expression reading it */
} SqlWinFunc;

/* op_window.c: window functions over the rows of kid (`width` - n values
 * each, [row..., aggregate values at agg_off...] when grouped, agg_off -1
 * otherwise), each into its column; rows come out `width` wide, in the
 * order of the last window's sort.  One WindowAgg node per distinct
 * PARTITION BY + ORDER BY, stacked. */
SqlOp *sql_op_window(SqlCtx *cx, SqlOp *kid, SqlWinFunc *const *fns, int n, int width, int agg_off);

/* ---- aggregation spec (op_hash_agg.c, agg.c) -------------------------- */

struct SqlColAgg;

typedef struct SqlAggSpec {
    SqlExpr **groups;         /* group keys over the input rows */
    int n_groups;
    SqlAgg **aggs;            /* aggregates over the input rows */
    int n_aggs;
    SqlExpr *having;          /* over [row..., aggregate values...] (may be NULL) */
    int in_width;             /* input row width; output is in_width + n_aggs */
    const uint8_t *need;      /* input columns read above outside aggregates (in_width
                                 flags; NULL: all) */
    /* aggregates read from column blocks instead of rows (a scan below
     * offers them; when it declines at run time, rows are pulled) */
    struct SqlTableScan *colagg_scan;
    int colagg_col;           /* scope column of the grouped keyword column, -1 */
    const int *colagg_field;  /* per aggregate: its column's field, -1 count(*) */
    const bool *colagg_keep;  /* per aggregate: the values too (percentiles), or NULL */
    /* ... through a join: colagg_join is the hash join (the tree's child)
     * whose outer side is colagg_scan and whose one key is colagg_col; each
     * key's partial states are joined to the inner rows with that key and
     * grouped as those joined rows would be */
    SqlOp *colagg_join;
    const char *const *key_labels;
    /* GROUPING SETS / ROLLUP / CUBE: the keys in each set (bit g for
     * groups[g]); every row goes into one group per set, the keys outside
     * it NULL.  NULL: one set of every key */
    const uint64_t *sets;
    int n_sets;
} SqlAggSpec;

/* Aggregate states (agg.c), one per (group, aggregate). */
typedef struct SqlAggState {
    int64_t count;
    int64_t sum_i;
    double sum_f;
    bool sum_is_f;
    __int128 sum_w;           /* avg of integers past int64: the exact sum (sum_is_w) */
    bool sum_is_w;
    /* sum / avg of numeric, exactly: sum_n * 10^-sum_scale, plus sum_big (a
     * numeric, or NULL) where int128 would overflow; sum_special 'n' NaN, 'p'
     * +Infinity, 'm' -Infinity, or 0 */
    __int128 sum_n;
    int32_t sum_scale;
    bool sum_has_n;
    char sum_special;
    SqlValue sum_big;
    SqlValue best;            /* min / max */
    bool has;
    bool bool_acc;
    double sxx;               /* stddev / variance: sum of squared deviations (Youngs-Cramer) */
    SqlValue *vals;           /* DISTINCT, ORDER BY, percentiles, string_agg, array_agg */
    uint64_t n_vals, cap_vals;
    uint64_t *keys;           /* percentiles of numbers: order keys (agg.c), not values */
    uint64_t n_keys, cap_keys;
} SqlAggState;

/* One row into one aggregate; what the argument's evaluation allocated is
 * given back unless the state kept it. */
int sql_agg_step(SqlCtx *cx, const SqlAgg *a, SqlAggState *st, const SqlEvalRow *r);
/* The aggregate's value.  Without DISTINCT or ORDER BY it leaves the state
 * as it was (a window's frame goes on growing after it). */
int sql_agg_final(SqlCtx *cx, const SqlAgg *a, SqlAggState *st, SqlValue *out);
/* Take one row out of a state (a window frame's head moving on): count,
 * and sum / avg of integers; *done false when the state cannot (the
 * caller aggregates the frame again). */
int sql_agg_unstep(SqlCtx *cx, const SqlAgg *a, SqlAggState *st, const SqlEvalRow *r, bool *done);
/* Merge one segment's column-block partial state into st. */
int sql_agg_merge_part(SqlCtx *cx, const SqlAgg *a, SqlAggState *st,
                       const SqlColAggPart *part, int64_t group_rows);
/* Do percentiles a and b keep the same order keys (numbers of one
 * argument, no FILTER)?  Then one state can serve both: their finals only
 * select from the keys, which they leave as a multiset. */
bool sql_agg_same_keys(const SqlAgg *a, const SqlAgg *b);
/* EXPLAIN label of an aggregate ("count(*)", "sum(n)"). */
const char *sql_agg_name(const SqlAgg *a);

/* ---- EXPLAIN (explain.c) ---------------------------------------------- */

#define SQL_EXPLAIN_MAX_PROPS 24

struct SqlExplainNode {
    const char *type;         /* "Seq Scan", "Hash Join", "Sort" ... */
    const char *relation;     /* "on t" part: table name (NULL if none) */
    const char *alias;        /* shown when it differs from the relation */
    const char *extra;        /* appended to the label ("using ..."), may be NULL */
    int n_props;
    struct {
        const char *key;      /* "Filter", "Sort Key", "Rows Removed by Filter" */
        const char *val;
        bool analyze_only;    /* shown only under ANALYZE */
    } props[SQL_EXPLAIN_MAX_PROPS];
};

void sql_explain_type(SqlExplainNode *n, const char *type, const char *relation,
                      const char *alias);
void sql_explain_prop(SqlExplainNode *n, SqlCtx *cx, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void sql_explain_actual(SqlExplainNode *n, SqlCtx *cx, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* An expression as SQL text (column names qualified when `qualify`), in
 * cx->arena; "?" when out of memory. */
const char *sql_expr_sql(SqlCtx *cx, const SqlExpr *e, const SqlScope *scope, bool qualify);
/* Conjuncts joined by AND, each parenthesized as PostgreSQL prints them. */
const char *sql_conj_sql(SqlCtx *cx, SqlExpr *const *conj, int n, const SqlScope *scope,
                         bool qualify);

/* A statement's EXPLAIN output (SqlCtx.ex): text lines, or with FORMAT
 * JSON the plans printed so far (subqueries' first, the statement's last). */
struct SqlExplain {
    QrBuf lines;              /* '\n'-separated */
    bool analyze;
    bool costs;               /* COSTS (on by default) */
    cJSON *json;              /* FORMAT JSON: an array of {"Plan": ...} */
    const SqlScope *scope;    /* while a tree prints: its query block's columns */
};

/* Print a tree into the statement's EXPLAIN output; `level` > 0 for a
 * subquery's tree (printed before the statement's, labelled). */
void sql_explain_tree(SqlCtx *cx, const SqlOp *root, const SqlScope *scope, int level);

#endif
