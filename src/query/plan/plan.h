/*
 * plan.h — a SELECT bound once, then planned into an operator tree at each
 * execution.
 *
 * Layer: query/ (SQL).  bind.c reads libpg_query's tree (the only place a
 * query's JSON is read) into a SqlQuery: names, types, functions,
 * aggregates, subqueries resolved, nothing evaluated.  The bound query is
 * kept on the prepared statement (sql_session.c), so EXECUTE only supplies
 * parameter values, and a correlated subquery is bound once however often
 * it runs.  planner.c turns a bound query into a tree of exec/ operators
 * for one execution: it evaluates what depends on parameters (LIMIT, key
 * values, text queries), chooses each table's access path, orders joins,
 * applies the rules (top-k by score, counts from postings, aggregates from
 * column blocks, the ordered walk) and runs the tree.
 *
 * Lifetime.  A bound query lives in the arena it was bound in (the
 * statement's) and holds table handles that stay valid while the database's
 * DDL generation is unchanged (qr_db_ddl_generation); sql_session.c binds
 * again when it moved.  Run-time state that the planner writes into a bound
 * query (a table scan's plan and counters, a CTE's rows, subquery caches) is
 * reset at the start of every execution; a statement runs in one session,
 * one execution at a time.
 */
#ifndef QR_PLAN_H
#define QR_PLAN_H

#include "query/exec/exec.h"
#include "query/sql_int.h"

#define SQL_MAX_ITEMS 64

typedef struct SqlQuery SqlQuery;

/* A WITH query: bound once.  Referenced once (and not MATERIALIZED) it is
 * planned in place, streaming, wherever it is read; otherwise its rows are
 * materialized once per execution of the query that owns it, before the
 * body (PostgreSQL 12's rule). */
typedef struct SqlCteDef {
    const char *name;
    SqlQuery *q;              /* RECURSIVE: kind SQL_Q_RECURSIVE */
    int n_cols;
    QrSqlColumn *cols;        /* with the WITH's column aliases */
    int n_refs;               /* FROM items reading it (all levels) */
    int materialize;          /* 1 MATERIALIZED, -1 NOT MATERIALIZED, 0 default */
    bool recursive;           /* reads itself (WITH RECURSIVE) */
    /* binding a recursive query (bind_from.c): 1 the non-recursive term,
     * 2 the recursive term (a reference is allowed at rec_depth only, once) */
    int rec_state, rec_depth, rec_refs;
    /* run time (reset per execution) */
    bool ready;               /* rows materialized */
    QrSqlResult rows;
    SqlRowSet set;            /* rows as a row set (CTE Scan) */
    SqlRowSet *wt;            /* RECURSIVE: the working table while planned */
    struct SqlCteDef *next;   /* the next one visible (binding: innermost first) */
} SqlCteDef;

typedef enum SqlItemKind {
    SQL_ITEM_TABLE,           /* a table: scanned */
    SQL_ITEM_CTE,             /* a WITH query */
    SQL_ITEM_SUBQUERY,        /* (SELECT ...) AS x */
    SQL_ITEM_CATALOG,         /* pg_catalog / information_schema relation */
    SQL_ITEM_FUNCTION,        /* a set-returning function */
    SQL_ITEM_WORKTABLE,       /* a recursive query's reference to itself */
} SqlItemKind;

/* One FROM item: its columns are scope[first, first + n_cols). */
typedef struct SqlItem {
    SqlItemKind kind;
    const char *qual;         /* name or alias */
    int first, n_cols;
    QrTable *t;               /* TABLE: borrows (valid for the DDL generation) */
    SqlCteDef *cte;           /* CTE, WORKTABLE */
    SqlQuery *sub;            /* SUBQUERY */
    const char *schema, *relname; /* CATALOG */
    SqlExpr *srf;             /* FUNCTION: the SE_SRF call */
    QrSqlColumn *cols;        /* the item's own columns (n_cols) */
    const char *label;        /* EXPLAIN node label */
    uint64_t lateral;         /* LATERAL: the items it reads (0: none) */
    bool lateral_bound;       /* bound as LATERAL (its outer references count one level
                                 more: it runs under a frame for this query's row) */
    /* run time (planner) */
    SqlTableScan scan;
    QrSqlResult rows;         /* catalogs and functions: materialized */
    SqlRowSet set;
} SqlItem;

/* The FROM clause as a tree (bind_from.c): a leaf is an item; a join node
 * joins two subtrees (comma lists are INNER joins without ON).  A subtree
 * covers the items [i0, i1) and the scope columns [c0, c1) (its items'
 * columns, then the merged columns of its USING joins), so a join copies
 * one contiguous range. */
typedef struct SqlFromNode {
    int item;                 /* leaf: the item; -1 for a join */
    SqlJoinType type;         /* INNER, LEFT, RIGHT, FULL */
    struct SqlFromNode *l, *r;
    SqlExpr **on;             /* ON conjuncts (USING / NATURAL: the equalities) */
    int n_on;
    int i0, i1, c0, c1;
    int *merged_col;          /* USING / NATURAL columns computed here: scope index */
    SqlExpr **merged;         /* ... and value (the left's, the right's, or COALESCE) */
    int n_merged;
    int *vis;                 /* the columns SELECT * shows, in order (scope indexes) */
    int n_vis;
    const char *alias;        /* (...) AS alias: names the columns */
    /* run time (planner, join.c) */
    SqlExpr **filt;           /* conditions applied on top of this node */
    int n_filt;
    SqlExpr **cond;           /* join: the conditions it applies per pair */
    int n_cond;
} SqlFromNode;

/* x IN (SELECT ...), EXISTS / NOT EXISTS (correlated on equalities) in
 * WHERE, as a semi / anti join: the subquery yields the inner side of each
 * key, uncorrelated; okeys are the outer sides over this query's scope. */
typedef struct SqlSemiJoin {
    bool anti;
    SqlQuery *sub;            /* n_keys output columns */
    SqlExpr **okeys;
    SqlExpr **ikeys;          /* the inner sides in sub's scope (EXPLAIN) */
    int n_keys;
} SqlSemiJoin;

typedef struct SqlTarget {
    SqlExpr *e;
    const char *name;
    int scope_col;            /* plain column: scope index, else -1 */
} SqlTarget;

typedef enum SqlQueryKind { SQL_Q_SELECT, SQL_Q_SETOP, SQL_Q_VALUES, SQL_Q_RECURSIVE } SqlQueryKind;

struct SqlQuery {
    SqlQueryKind kind;
    SqlCtx *cx;               /* the bind or the execution under way */
    int n_cols;               /* output columns */
    QrSqlColumn *cols;
    SqlCteDef **ctes;         /* this query's WITH list, in order */
    int n_ctes;
    /* ORDER BY over output columns, LIMIT / OFFSET (all kinds) */
    SqlSortKey *keys;
    int n_sort;
    SqlExpr *limit, *offset;  /* NULL: none */
    /* SQL_Q_SELECT */
    SqlItem items[SQL_MAX_ITEMS];
    int n_items;
    SqlFromNode *from;        /* the FROM tree (NULL: no FROM) */
    SqlScope scope;
    int cap_cols;
    SqlBind bind;             /* aggregates and text predicates */
    SqlExpr **conj;           /* WHERE conjuncts */
    int n_conj;
    SqlSemiJoin *semis;       /* WHERE conjuncts planned as semi / anti joins */
    int n_semis;
    SqlTarget *tg;
    int n_tg;
    SqlExpr **groups;
    int n_groups;
    SqlExpr *having;
    SqlExpr **extra;          /* ORDER BY expressions not in the select list */
    int n_extra;
    bool distinct, grouped, has_srf;
    SqlSubq *subqs;           /* subqueries bound in this block (caches reset per run) */
    /* DISTINCT ON: the output columns (targets or extras) whose equal
     * values keep only their first row, in ORDER BY order */
    int *distinct_on;
    int n_distinct_on;
    /* GROUPING SETS / ROLLUP / CUBE (bind_group.c): per grouping set, the
     * group keys in it (bit g: groups[g]); NULL without them */
    uint64_t *sets;
    int n_sets;
    struct SqlGroupingCall *groupings; /* GROUPING(...) calls, resolved at the end of binding */
    int n_groupings, cap_groupings;
    /* windows (bind_window.c): the window functions of the select list and
     * ORDER BY, and the WINDOW clause's named windows */
    SqlWinFunc **wins;
    int n_wins, cap_wins;
    SqlWinDef **windefs;
    int n_windefs;
    /* binding: the clause being bound ("WHERE"; NULL: the select list, ORDER
     * BY, DISTINCT ON), where window functions are allowed only when win_ok */
    const char *clause;
    bool win_ok;
    /* SQL_Q_SETOP: UNION / INTERSECT / EXCEPT; SQL_Q_RECURSIVE: the
     * non-recursive term (larg) UNION [ALL] the recursive term (rarg) */
    const char *setop;        /* "UNION", "INTERSECT", "EXCEPT" */
    bool all;
    SqlQuery *larg, *rarg;
    SqlCteDef *cte;           /* SQL_Q_RECURSIVE: the WITH query it is */
    /* SQL_Q_VALUES */
    SqlExpr **cells;          /* n_rows * n_cols */
    int n_rows;
    /* run time */
    SqlRowSet values;         /* VALUES: the evaluated rows */
    uint64_t *from_colmask;   /* per scope column: the FROM items it needs (join.c) */
};

/* bind.c: a GROUP BY item (an expression, an output ordinal or name) of
 * query s, whose select list is bound (s->tg). */
int sql_bind_group_item(SqlQuery *s, const cJSON *node, SqlExpr **out);
/* bind.c: the first column of e outside aggregates that is not one of the
 * groups (or within a grouped expression), else NULL. */
const SqlExpr *sql_bind_ungrouped(const SqlExpr *e, SqlExpr **groups, int n_groups);

/* bind_group.c: does a GROUP BY clause hold GROUPING SETS, ROLLUP, CUBE
 * or ()? */
bool sql_group_has_sets(const cJSON *group_clause);
/* bind_group.c: GROUP BY with grouping sets into s->groups (each distinct
 * key once) and s->sets (their cross product, PostgreSQL's expansion;
 * GROUP BY DISTINCT drops repeated sets).  54000 past 4096 sets or 64
 * keys. */
int sql_bind_grouping_sets(SqlQuery *s, const cJSON *group_clause, bool distinct);
/* bind_group.c: SqlBind hook for GROUPING(...) */
int sql_bind_grouping_call(SqlBind *b, const cJSON *gf, int loc, SqlExpr **out);
/* bind_group.c: at the end of binding, GROUPING's arguments to group keys
 * (42803 when one is not), and with grouping sets every grouped expression
 * above the aggregate read as its key (NULL where the set lacks it). */
int sql_bind_grouping_finish(SqlQuery *s);

/* bind_window.c: the WINDOW clause's named windows (before the select
 * list). */
int sql_bind_window_clause(SqlQuery *s, const cJSON *window_clause);
/* bind_window.c: SqlBind hook for a call with OVER */
int sql_bind_window_call(SqlBind *b, const cJSON *fc, const char *lname, int loc, SqlExpr **out);
/* bind_window.c: at the end of binding, a grouped query's windows read
 * only groups and aggregates (42803); each function gets its column. */
int sql_bind_windows_check(SqlQuery *s);
void sql_bind_windows_place(SqlQuery *s);

/* bind.c: bind a SelectStmt (node or body) against the enclosing query's
 * scope (cx->outer_scope) into cx->arena.  Errors: unknown names (42P01,
 * 42703), types, unsupported constructs (0A000), with positions. */
int sql_bind_query(SqlCtx *cx, const cJSON *select, SqlQuery **out);

/* planner.c: plan and run a bound query into out (ROWS: columns and rows in
 * cx->arena); under EXPLAIN (cx->ex) its tree is printed, and without
 * ANALYZE nothing runs.  Resets the query's run-time state first.  FROM
 * subqueries, set operations' branches and WITH queries read once are
 * planned into the same tree. */
int sql_query_exec(SqlCtx *cx, SqlQuery *q, QrSqlResult *out);

#endif
