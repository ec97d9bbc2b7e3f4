/*
 * plan_int.h — private to src/query/plan/: what the binder's files
 * (bind.c, bind_from.c, bind_semi.c) and the planner's (planner.c,
 * join.c) share.  Sectioned per file.
 *
 * Layer: query/ (SQL).
 */
#ifndef QR_PLAN_INT_H
#define QR_PLAN_INT_H

#include "query/plan/plan.h"

/* ======================================================================== */
/* bind.c                                                                    */
/* ======================================================================== */

/* Bind a subquery of the query being bound (FROM, WITH, a set operation's
 * branch): one EXPLAIN level deeper. */
int sql_bind_sub(SqlCtx *cx, const cJSON *body, SqlQuery **out);
/* A boolean condition (WHERE, ON, HAVING) bound in s's scope. */
int sql_bind_bool(SqlQuery *s, const cJSON *node, const char *what, SqlExpr **out);
/* Split e on AND into the growing array *v (n of cap). */
int sql_add_conj(SqlCtx *cx, SqlExpr *e, SqlExpr ***v, int *n, int *cap);
/* The common type of two branches of UNION / VALUES / USING (PostgreSQL's
 * resolution, narrowed to Quarry's types); QR_SQL_TYPE_COUNT when none. */
QrSqlType sql_union_type(QrSqlType a, QrSqlType b);

/* ======================================================================== */
/* bind_from.c                                                               */
/* ======================================================================== */

/* The FROM clause (a list of items, joins, subqueries, functions) into
 * s->items and s->from, its ON / USING conditions bound.  Errors: unknown
 * relations (42P01), columns (42703), ambiguous USING columns (42702),
 * LATERAL misuse (42P10), PostgreSQL's restrictions on a recursive
 * query's reference to itself (42P19). */
int sql_bind_from(SqlQuery *s, const cJSON *from_clause);
/* A WITH clause into q->ctes, each query visible to those after it (and,
 * WITH RECURSIVE, to itself) through cx->ctes; the caller restores
 * cx->ctes when q is bound. */
int sql_bind_with(SqlCtx *cx, const cJSON *with, SqlQuery *q);
/* PostgreSQL's outer-join reduction: an outer join whose null-extended rows
 * a WHERE condition always rejects (`a LEFT JOIN b ... WHERE b.x = 1`) is
 * planned as the inner (or one-sided) join it amounts to, so conditions on
 * its nullable side reach that side's scan.  After WHERE is bound. */
void sql_reduce_outer_joins(SqlQuery *s);
/* The columns `*` (qual NULL) or `qual.*` stands for, in order (scope
 * indexes, in cx->arena).  42P01 when qual names nothing visible. */
int sql_star_cols(SqlQuery *s, const char *qual, int loc, int **cols, int *n);

/* ======================================================================== */
/* bind_semi.c                                                               */
/* ======================================================================== */

/* Move the WHERE conjuncts that PostgreSQL would plan as semi / anti
 * joins (x IN (SELECT ...), EXISTS / NOT EXISTS correlated on equalities
 * only) from s->conj to s->semis.  Changes nothing it cannot keep exact. */
int sql_bind_semis(SqlQuery *s);

/* ======================================================================== */
/* planner.c                                                                 */
/* ======================================================================== */

/* One execution's planning: the query blocks planned into the tree, whose
 * run-time state (subquery caches, materialized WITH queries) is released
 * after the run. */
typedef struct SqlPlanRun {
    SqlQuery **blocks;        /* cx->arena */
    int n, cap;
} SqlPlanRun;

/* Plan a query block into a tree whose rows are its output columns first
 * (then its extra ORDER BY keys), cast to `want` (n_cols types; NULL: its
 * own).  Resets the block's run-time state and materializes the WITH
 * queries it owns that are read more than once. */
int sql_plan_query(SqlPlanRun *pr, SqlCtx *cx, SqlQuery *q, const QrSqlType *want, SqlOp **out);

/* Is a WITH query planned in place (read once, not MATERIALIZED)?  Read
 * more often, it is materialized once per execution of its owner. */
static inline bool sql_cte_inline(const SqlCteDef *d) { return d->n_refs == 1 && d->materialize != 1; }

/* ======================================================================== */
/* join.c                                                                    */
/* ======================================================================== */

/* Before the tree: reset the FROM items' run-time state, test the
 * constant WHERE conjuncts (*const_false), and push every other condition
 * as deep as it may go (a table's scan, an item's filter, a join's pair
 * conditions, a filter over a node): SqlTableScan.conj, SqlFromNode.filt
 * and .cond. */
int sql_from_prepare(SqlQuery *s, bool *const_false);
/* The FROM tree's operators: leaves (scans planned now), joins (hash on
 * the equalities, the smaller side built when the order is free, nested
 * loops otherwise, LATERAL per row), the semi / anti joins. */
int sql_from_build(SqlPlanRun *pr, SqlQuery *s, SqlOp **out);

#endif
