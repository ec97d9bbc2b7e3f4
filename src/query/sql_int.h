/*
 * sql_int.h — private to the SQL engine (query/sql_*.c): the session and
 * statement records, the execution context, the parse-tree helpers, values
 * and expressions, row sources, the planner's records, and the hooks by
 * which utility statements (DDL, DML, COPY, transactions, SET/SHOW,
 * catalogs) reach sql_utility.c and friends.  Sectioned per file.
 *
 * Layer: query/.  Parse trees are libpg_query's JSON output read with cJSON
 * (node = {"Tag": {fields}}; "location" fields are byte offsets into the
 * statement text).
 */
#ifndef QR_SQL_INT_H
#define QR_SQL_INT_H

#include <cJSON.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "query/query_int.h"
#include "query/sql.h"
#include "store/mem.h"

typedef QrSqlValue SqlValue;

/* ======================================================================== */
/* sql_session.c — sessions, settings, statements, execute                   */
/* ======================================================================== */

typedef enum SqlAccessPath {
    SQL_PATH_AUTO,  /* the cost planner chooses */
    SQL_PATH_TEXT,  /* text index first, check the other conditions per candidate */
    SQL_PATH_BTREE, /* B-tree lookups (CREATE INDEX) for the column predicates that have one */
    SQL_PATH_SCAN,  /* zone-map column scan to a bitmap, then text / check */
    SQL_PATH_CHECK, /* text index first, every structured condition checked per row */
    SQL_PATH_FULL,  /* every live document, every condition per row */
    SQL_PATH_PK,    /* primary-key lookups (pk = v, pk IN (...)) in every segment */
} SqlAccessPath;

typedef struct SqlSetting {
    char name[64];   /* lowercased */
    char *value;     /* owns (qr_malloc) */
} SqlSetting;

struct QrSqlSession {
    QrDb *db;                 /* borrows */
    atomic_bool cancel;       /* set from any thread; cleared per statement */
    uint64_t timeout_cap_ms;  /* qr_sql_session_limit_timeout; 0 = none */
    char txn_status;          /* 'I', 'T', 'E' (sql_txn.c moves it) */
    SqlSetting *settings;     /* owns */
    int n_settings, cap_settings;
    QrSqlStmt **cache;        /* owns one reference each: prepared statements by text */
    int n_cache, cap_cache;
    void *u_state;            /* owned by the utility side (transaction, COPY);
                                 freed by sqlu_session_free */
};

/* Decoded parameter values ($1 is v[0]). */
typedef struct SqlParams {
    int n;
    SqlValue *v;
} SqlParams;

struct QrSqlStmt {
    int refs;
    QrArena *arena;           /* owns what follows (except tree) */
    char *sql;                /* the statement text, NUL-terminated */
    size_t len;
    cJSON *tree;              /* owns: libpg_query's JSON parse */
    const cJSON *stmt;        /* borrows tree: {"SelectStmt": {...}} */
    const char *node_tag;     /* "SelectStmt", "InsertStmt", ... */
    const char *kind;         /* "SELECT", "INSERT", ... */
    int n_params;
    uint32_t *param_oids;     /* n_params */
    QrSqlType *param_types;
    int n_cols;
    QrSqlColumn *cols;
    uint32_t *declared;       /* declared oids at prepare (cache key) */
    int n_declared;
    struct SqlQuery *query;   /* SELECT: bound once (plan/plan.h), in arena */
    uint64_t bound_gen;       /* the database's DDL generation it was bound at */
};

/* Everything one statement's execution (or analysis) sees. */
typedef struct SqlCtx {
    QrSqlSession *sess;       /* borrows */
    QrArena *arena;           /* the statement's or result's arena */
    const char *sql;          /* statement text (error positions) */
    size_t sql_len;
    const SqlParams *params;  /* NULL while only analyzing */
    QrSqlType *param_types;   /* inferred parameter types (analysis writes) */
    int n_params;             /* highest $n seen */
    bool analyze_only;        /* prepare: bind, no execution */
    uint64_t t0_ns;
    uint64_t deadline_ns;     /* 0 = none */
    SqlAccessPath path;       /* quarry.access_path */
    QrSqlResult *res;         /* notices go here (may be NULL) */
    uint64_t ticks;           /* rows since the last deadline check */
    struct SqlExplain *ex;    /* EXPLAIN: plan nodes are recorded here (NULL otherwise) */
    int depth;                /* nesting of sub-selects (CTEs, subqueries) */
    void *ctes;               /* WITH queries in scope (sql_select.c) */
    bool scores;              /* EXPLAIN (SCORES): keep the docs of the first text access */
    struct SqlTableScan *scores_scan; /* ... that access (set by the outermost SELECT) */
    /* correlated subqueries (sql_expr.c): */
    const struct SqlScope *outer_scope; /* the scope a query bound now sees as its outer
                                           query's (NULL at the top level) */
    struct SqlFrame *frames;  /* the outer rows of the subqueries running now, innermost first */
    int sub_level;            /* subquery nesting of the query being bound / run (0: top) */
    struct SqlCorrRef *refs;  /* outer references met while binding (arena array, grows) */
    int n_refs, cap_refs;
    struct SqlRegexCache *regex; /* compiled patterns of ~ (sql_expr.c), freed by sql_ctx_done */
    QrError *err;             /* the statement's error (first wins) */
} SqlCtx;

/* Release what a statement's execution holds outside its arena (compiled
 * regular expressions). */
void sql_ctx_done(SqlCtx *cx);

/* Error helpers: set err with the 1-based character position of the byte
 * `loc` of the statement (loc < 0: no position).  Return the code. */
int sql_err_at(SqlCtx *cx, int loc, QrCode code, const char *sqlstate, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Cancellation / timeout / memory cap check for scan loops: QR_OK or the
 * error (also set in cx->err).  Cheap: looks at the clock every 1024 calls. */
int sql_check(SqlCtx *cx);
/* The same checks (cancel, deadline, memory cap) at once, for loops whose
 * iterations are long (pg_sleep's slices). */
int sql_check_now(SqlCtx *cx);
/* Add a notice to the result. */
void sql_notice(SqlCtx *cx, const char *severity, const char *sqlstate, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Statement timeout in ms from the session settings (0 = none). */
uint64_t sql_session_timeout_ms(const QrSqlSession *s);

/* ======================================================================== */
/* sql_node.c — reading libpg_query's JSON tree                              */
/* ======================================================================== */

/* The tag of a node {"Tag": {...}} (NULL if not a node). */
const char *sqlj_tag(const cJSON *n);
/* The body of a node if its tag is `tag` (NULL otherwise). */
const cJSON *sqlj_is(const cJSON *n, const char *tag);
/* The body of a node, whatever its tag. */
const cJSON *sqlj_body(const cJSON *n);
/* Fields of a body (NULL / default when absent). */
const cJSON *sqlj_get(const cJSON *body, const char *key);
const char *sqlj_str(const cJSON *body, const char *key);
int sqlj_int(const cJSON *body, const char *key, int dflt);
bool sqlj_bool(const cJSON *body, const char *key);
/* "location" of a node or body, -1 if none. */
int sqlj_loc(const cJSON *n);
/* The sval of a {"String": {"sval": ...}} node (NULL otherwise). */
const char *sqlj_sval(const cJSON *n);
/* The items of a {"List": {"items": [...]}} node (IN lists, BETWEEN
 * bounds), or n itself when it already is an array. */
const cJSON *sqlj_list(const cJSON *n);
/* The last name of a list of String nodes (funcname, typeName.names). */
const char *sqlj_last_name(const cJSON *list);

/* ======================================================================== */
/* sql_value.c — values, casts, comparison, text forms                       */
/* ======================================================================== */

static inline SqlValue sqlv_null(void) { SqlValue v = {.type = QR_SQL_UNKNOWN, .is_null = true}; return v; }
static inline SqlValue sqlv_int(int64_t i) { SqlValue v = {.type = QR_SQL_INT8, .u.i = i}; return v; }
static inline SqlValue sqlv_float(double f) { SqlValue v = {.type = QR_SQL_FLOAT8, .u.f = f}; return v; }
static inline SqlValue sqlv_bool(bool b) { SqlValue v = {.type = QR_SQL_BOOL, .u.b = b}; return v; }
static inline SqlValue sqlv_text(const char *s, size_t n)
{
    SqlValue v = {.type = QR_SQL_TEXT, .u.s = {s, n}};
    return v;
}
/* Classes of types for operators. */
bool sqlt_is_int(QrSqlType t);    /* int2/4/8, oid */
bool sqlt_is_float(QrSqlType t);  /* float4/8, numeric */
bool sqlt_is_num(QrSqlType t);
bool sqlt_is_str(QrSqlType t);    /* text, varchar, name, char, unknown */
bool sqlt_is_ts(QrSqlType t);
/* A type name from the parse tree ("int4", "varchar", "timestamptz",
 * "double precision" as "float8") — false if unknown. */
bool sqlt_from_name(const char *name, QrSqlType *out);
/* Cast (explicit CAST / ::, and implicit coercions).  Text parses with
 * PostgreSQL's input rules; errors are 22P02 invalid_text_representation /
 * 22003 out of range / 22007 bad datetime.  Strings go to the arena. */
int sqlv_cast(SqlCtx *cx, const SqlValue *in, QrSqlType to, int loc, SqlValue *out);
/* Total order used by ORDER BY / GROUP BY / DISTINCT (NULLs compare as
 * largest, as PostgreSQL's default ASC NULLS LAST); numbers compare across
 * int/float; strings by bytes (COLLATE "C"). */
int sqlv_cmp(const SqlValue *a, const SqlValue *b);
/* One ORDER BY key: negative when a comes first, as sqlv_cmp turned by
 * DESC and NULLS FIRST / LAST. */
int sqlv_key_cmp(const SqlValue *a, const SqlValue *b, bool desc, bool nulls_first);
/* Equality for grouping / hashing (NULL = NULL here). */
bool sqlv_same(const SqlValue *a, const SqlValue *b);
uint64_t sqlv_hash(const SqlValue *v);
/* JSON literal of a value (documents for INSERT / UPDATE). */
void sqlv_json(const SqlValue *v, QrBuf *out);
/* Parse a timestamp literal (ISO 8601, PostgreSQL's forms) to microseconds. */
bool sqlv_parse_ts(const char *s, size_t n, int64_t *us);
/* Copy a value's string bytes into the arena (values that outlive a scan). */
int sqlv_own(SqlCtx *cx, SqlValue *v);
/* date_trunc(unit, ts) and extract(field from ts) on microseconds (UTC);
 * -1 for an unknown unit / field. */
int sqlv_date_trunc(const char *unit, int64_t us, int64_t *out);
int sqlv_extract(const char *field, int64_t us, double *out);
/* Arrays are carried as their PostgreSQL text form ('{a,"b c",NULL}', or
 * an int2vector / oidvector's '1 2'): the elements (text values, NULL for
 * an unquoted NULL) into an arena array.  Malformed text: 22P02. */
int sqlv_array_parse(SqlCtx *cx, const SqlValue *arr, SqlValue **elems, uint64_t *n);
/* The text form of elements (quoted where PostgreSQL's array_out quotes),
 * into the arena. */
int sqlv_array_text(SqlCtx *cx, const SqlValue *elems, uint64_t n, SqlValue *out);

/* ======================================================================== */
/* sql_expr.c — expressions: binding and evaluation                          */
/* ======================================================================== */

/* A column visible to expressions: rows are arrays of SqlValue, one per
 * scope column, in scope order. */
typedef struct SqlCol {
    const char *name;
    const char *qual;      /* table name or alias (NULL for derived columns) */
    QrSqlType type;
    int field;             /* table field index, -1 primary key, -2 _id, -3 _score,
                              -4 not a table column */
    bool hidden;           /* _id, _score: not in SELECT * */
    bool used;             /* referenced (scans fetch only used columns) */
    uint32_t table_oid;
    int16_t attnum;
} SqlCol;

/* Scopes chain outward: a subquery's names that are not its own resolve in
 * `outer` (the enclosing query's scope), then outer->outer... */
typedef struct SqlScope {
    int n;
    SqlCol *cols;          /* arena */
    const struct SqlScope *outer; /* the enclosing query's scope, NULL at the top level */
} SqlScope;

/* The row of an outer query while one of its correlated subqueries runs
 * (SE_OUTER with depth d reads the d-th frame). */
typedef struct SqlFrame {
    const SqlValue *row;   /* borrows the outer query's row */
    struct SqlFrame *next; /* the frame one level further out */
} SqlFrame;

/* An outer reference met while binding: column `col` of the query at
 * subquery level `level` (the subquery binding it is correlated when the
 * level is outside it). */
typedef struct SqlCorrRef {
    int level;
    int col;
    QrSqlType type;
    const char *name;
} SqlCorrRef;

typedef enum SqlExprKind {
    SE_CONST, SE_COL, SE_PARAM, SE_ARITH, SE_NEG, SE_CMP, SE_AND, SE_OR, SE_NOT,
    SE_IS_NULL, SE_IS_NOT_NULL, SE_IS_TRUE, SE_IS_FALSE, SE_IN, SE_LIKE, SE_CASE,
    SE_COALESCE, SE_NULLIF, SE_GREATEST, SE_LEAST, SE_CAST, SE_FUNC, SE_AGG,
    SE_MATCH, SE_SCORE, SE_SNIPPET, SE_IN_SET, SE_CONCAT,
    SE_OUTER,              /* a column of an outer query: col, op = levels out (1 = enclosing) */
    SE_SUBQ,               /* a correlated subquery: subq; args = the outer values it reads
                              (its cache key), then for ANY the tested value */
    SE_ANY_ARRAY,          /* x op ANY (array text): args[0] x, args[1] the array; op SQL_CMP_* */
    SE_SRF,                /* unnest / generate_series / generate_subscripts in a target list */
} SqlExprKind;

typedef struct SqlExpr SqlExpr;
typedef struct SqlAgg SqlAgg;
typedef struct SqlTextPred SqlTextPred;
typedef struct SqlFuncDef SqlFuncDef;
typedef struct SqlValueSet SqlValueSet;
typedef struct SqlSubq SqlSubq;

struct SqlExpr {
    SqlExprKind kind;
    QrSqlType type;        /* result type */
    int loc;               /* byte offset in the statement, -1 */
    int op;                /* SE_ARITH '+','-','*','/','%'; SE_CMP: SQL_CMP_*;
                              SE_LIKE: 1 ILIKE | 2 NOT; SE_IN: 1 NOT */
    int col;               /* SE_COL: scope index; SE_PARAM: 0-based; SE_AGG: slot */
    SqlValue val;          /* SE_CONST */
    int n_args;
    SqlExpr **args;        /* operands (SE_CASE: [arg?] when/then pairs, else) */
    bool case_has_arg;     /* SE_CASE with CASE x WHEN ... */
    bool case_has_else;
    const SqlFuncDef *fn;  /* SE_FUNC */
    SqlTextPred *text;     /* SE_MATCH / SE_SCORE / SE_SNIPPET */
    SqlValueSet *set;      /* SE_IN_SET: materialized subquery */
    SqlSubq *subq;         /* SE_SUBQ */
    const char *name;      /* output name hint ("count", column name) */
};

enum { SQL_CMP_EQ, SQL_CMP_NE, SQL_CMP_LT, SQL_CMP_LE, SQL_CMP_GT, SQL_CMP_GE };

/* Aggregates referenced by a query (SE_AGG.col is the slot). */
typedef enum SqlAggKind {
    SA_COUNT_STAR, SA_COUNT, SA_SUM, SA_AVG, SA_MIN, SA_MAX, SA_PCT_CONT, SA_PCT_DISC,
    SA_BOOL_AND, SA_BOOL_OR, SA_STRING_AGG, SA_ARRAY_AGG,
} SqlAggKind;

struct SqlAgg {
    SqlAggKind kind;
    bool distinct;
    SqlExpr *arg;          /* NULL for count(*) */
    SqlExpr *arg2;         /* string_agg delimiter; percentile fraction; array_agg ORDER BY key */
    bool desc;             /* array_agg (... ORDER BY key DESC) */
    SqlExpr *filter;       /* FILTER (WHERE ...): rows it rejects are skipped; NULL = none */
    QrSqlType type;        /* result type */
};

/* Binding context: the scope, aggregates collected (NULL = aggregates not
 * allowed here), whether text predicates may appear. */
typedef struct SqlBind {
    SqlCtx *cx;
    const SqlScope *scope;
    SqlAgg **aggs;         /* arena array, grows */
    int n_aggs, cap_aggs;
    bool allow_aggs;
    bool in_agg;
    SqlTextPred **texts;   /* text predicates met (arena array, grows) */
    int n_texts, cap_texts;
    SqlSubq **live;        /* correlated subqueries bound here are listed on *live so their
                              caches can be freed (sql_subq_free_all); NULL: no caching */
} SqlBind;

/* A full-text predicate `col @@ 'q'` / matches(col, 'q') of one table. */
struct SqlTextPred {
    int id_col;            /* scope index of the table's _id column */
    int score_col;         /* scope index of the table's _score column */
    const char *qual;      /* the table's name or alias */
    const char *field;     /* searched field, NULL = the table's default fields */
    SqlExpr *query;        /* the query text: constant or parameter */
    int loc;
    bool want_snippets;
    struct SqlDocSet *set; /* run time: matching docs with scores (sql_scan.c) */
};

/* Docs matching a text predicate: open addressing doc -> index. */
typedef struct SqlDocSet {
    uint64_t n, cap;       /* entries, slots (power of two; 0 when sorted) */
    bool sorted;           /* no hash: docs ascending, found by binary search */
    int64_t *slot_doc;     /* -1 empty */
    uint32_t *slot_idx;
    int64_t *docs;         /* n, in the order the search gave them */
    float *scores;         /* n */
    const char **snippets; /* n or NULL */
} SqlDocSet;
/* A materialized IN (subquery) set, sorted by sqlv_cmp. */
struct SqlValueSet {
    uint64_t n;
    SqlValue *vals;
    bool has_null;
};
/* Sort values by sqlv_cmp (NULLs last). */
void sql_sort_values(SqlValue *v, uint64_t n);

/* Index of doc in the set, or -1. */
int64_t sql_docset_find(const SqlDocSet *s, int64_t doc);

/* Bind a parse-tree expression against a scope (NULL = no columns). */
int sql_expr_bind(SqlBind *b, const cJSON *node, SqlExpr **out);
/* Evaluate over one row of the scope (aggregate slots read `aggv`). */
typedef struct SqlEvalRow {
    const SqlValue *row;   /* scope values */
    const SqlValue *aggv;  /* aggregate results (post-aggregation expressions) */
    int64_t doc;           /* global doc id of the row's table (text predicates), -1 */
    float score;           /* BM25 score of the row (score()), 0 */
} SqlEvalRow;
int sql_expr_eval(SqlCtx *cx, const SqlExpr *e, const SqlEvalRow *r, SqlValue *out);
/* WHERE semantics: true only for a non-NULL true. */
int sql_expr_test(SqlCtx *cx, const SqlExpr *e, const SqlEvalRow *r, bool *pass);
/* Is the expression constant (no columns, aggregates, text predicates)? */
bool sql_expr_is_const(const SqlExpr *e);
/* Output name of an expression (PostgreSQL's rules: column name, function
 * name, "?column?"). */
const char *sql_expr_name(const SqlExpr *e);

/* Free the result caches of a list of correlated subqueries (SqlBind.live);
 * the subqueries themselves are arena memory.  NULL is a no-op. */
void sql_subq_free_all(SqlSubq *list);
/* Set-returning functions: the rows of unnest(array) / generate_series(a, b
 * [, step]) / generate_subscripts(array, dim) for already evaluated
 * arguments, into an arena array; QR_ENOTFOUND (no error set) for other
 * names.  *type is the element type. */
int sql_srf_rows(SqlCtx *cx, const char *name, int n, const SqlValue *args, QrSqlType elem,
                 SqlValue **out, uint64_t *n_out);
/* Is `name` a set-returning function sql_srf_rows knows? */
bool sql_srf_known(const char *name);

/* Simple convenience for the utility side (INSERT VALUES, UPDATE SET, COPY
 * defaults): bind against a scope (may be NULL) and keep the expression. */
int sql_expr_compile(SqlCtx *cx, const cJSON *node, const SqlScope *scope, SqlExpr **out);

/* ======================================================================== */
/* sql_func.c — scalar functions as data                                     */
/* ======================================================================== */

struct SqlFuncDef {
    const char *name;
    int min_args, max_args;
    QrSqlType ret;         /* QR_SQL_UNKNOWN: same as the first argument */
    int (*fn)(SqlCtx *cx, int n, const SqlValue *args, SqlValue *out);
    bool strict;           /* NULL in any argument -> NULL out */
    bool numeric_args;     /* untyped literal arguments are numbers (else text) */
};
const SqlFuncDef *sql_func_find(const char *name, int n_args);

/* ======================================================================== */
/* Row sources: base tables, catalogs (sql_catalog.c), materialized rows      */
/* ======================================================================== */

typedef struct SqlSource SqlSource;
typedef struct SqlSourceVt {
    /* Next row into row[0..n_cols) (strings in cx->arena or borrowed from
     * the source until close).  *has_row false at the end. */
    int (*next)(SqlSource *src, SqlCtx *cx, SqlValue *row, bool *has_row);
    void (*close)(SqlSource *src);
} SqlSourceVt;

struct SqlSource {
    const SqlSourceVt *vt;
    int n_cols;
    const char **col_names;
    QrSqlType *col_types;
};

/* ======================================================================== */
/* Hooks implemented by the utility side (sql_utility.c, sql_catalog.c ...)  */
/* ======================================================================== */

/* Execute a statement that is not SELECT / VALUES / EXPLAIN (`stmt` is the
 * {"Tag": {...}} node, `tag` its tag).  Fill res (kind, tag, cols, rows in
 * cx->arena == res->arena).  Errors in cx->err; return the code. */
int sqlu_exec(SqlCtx *cx, const cJSON *stmt, const char *tag, QrSqlResult *res);
/* At prepare: the result columns of such a statement (SHOW, ... RETURNING);
 * *n_cols 0 when it returns no rows.  Arrays in cx->arena. */
int sqlu_describe(SqlCtx *cx, const cJSON *stmt, const char *tag, QrSqlColumn **cols,
                  int *n_cols);
/* The command word for a tag ("CREATE TABLE"), NULL if unknown. */
const char *sqlu_kind(const cJSON *stmt, const char *tag);
/* COPY FROM STDIN in progress (see sql.h). */
int sqlu_copy_data(QrSqlSession *s, const char *data, size_t len, QrError *err);
int sqlu_copy_done(QrSqlSession *s, QrSqlResult *res, QrError *err);
void sqlu_copy_fail(QrSqlSession *s, const char *message);
bool sqlu_copy_active(const QrSqlSession *s);
/* Free u_state (rolls back an open transaction).  Called by session_free. */
void sqlu_session_free(QrSqlSession *s);

/* Catalog relations (pg_catalog.pg_class, information_schema.columns...).
 * schema may be NULL (search path: pg_catalog then public).  Returns QR_OK
 * with *out NULL when the name is not a catalog relation. */
int sqlcat_open(SqlCtx *cx, const char *schema, const char *name, SqlSource **out);
/* Catalog / session functions (version(), current_database(),
 * pg_get_userbyid()...).  Lookup at bind: QR_OK and *ret, or QR_ENOTFOUND
 * (no error set).  Call at run: out in cx->arena. */
/* ---- sql_zone.c: time zones of timestamptz output ----
 * A zone is UTC, an ISO offset ('+05:45') or an IANA name (ICU's data). */
bool sqlz_valid(const char *zone);
/* The zone's UTC offset in seconds at instant `us` (false: unknown zone). */
bool sqlz_offset(const char *zone, int64_t us, int32_t *off_s);
/* The display zone of this thread (qr_sql_execute sets the session's). */
void sqlz_display_set(const char *zone);
int32_t sqlz_display_offset(int64_t us);

/* A table's stable OID (pg_class.oid, RowDescription table_oid). */
uint32_t sqlcat_table_oid(const char *table);
/* Is `name` a sequence (sqlcat_open reads it as a one-row relation)? */
bool sqlcat_is_sequence(SqlCtx *cx, const char *name);
/* Is `name` a catalog function that returns rows (pg_options_to_table,
 * pg_get_keywords)?  Its rows come from sqlcat_open("pg_catalog", name). */
bool sqlcat_srf_known(const char *name);
int sqlcat_func_lookup(const char *schema, const char *name, int n_args, QrSqlType *ret);
int sqlcat_func_call(SqlCtx *cx, const char *schema, const char *name, int n_args,
                     const SqlValue *args, SqlValue *out);
/* The element type of a catalog array column by name (pg_index.indkey:
 * int2...), QR_SQL_UNKNOWN when not one. */
QrSqlType sqlcat_array_elem(const char *column);
/* reg* casts: text or oid to the object's oid (::regclass of a table or
 * index name, ::regtype of a type name, ::regnamespace of a schema) and
 * back to its name (::regclass::text).  kind is 'c', 't' or 'n'.  Unknown
 * names: 42P01 / 42704 / 3F000. */
int sqlcat_reg_oid(SqlCtx *cx, char kind, const SqlValue *in, int loc, SqlValue *out);
int sqlcat_reg_name(SqlCtx *cx, char kind, int64_t oid, SqlValue *out);

/* ======================================================================== */
/* sql_select.c / sql_scan.c — queries, offered to the utility side          */
/* ======================================================================== */

/* One table access of a query: what the planner chose and what happened
 * (EXPLAIN / EXPLAIN ANALYZE read it). */
typedef struct SqlScanAlt {
    SqlAccessPath path;
    double rows, cost;
} SqlScanAlt;

/* Aggregates read from column blocks instead of rows (sql_scan.c): per
 * value of a keyword column (or one group), for each aggregate over the
 * column of field[k] (-1: count(*)), a partial state per segment. */
typedef struct SqlColAggPart {
    int64_t rows;             /* rows of the group (count(*)): first part only */
    int64_t count;            /* non-NULL values */
    int64_t sum_i;            /* integers; on overflow the sum goes on in sum_f */
    double sum_f;
    bool sum_is_f;
    int64_t min_i, max_i;     /* int64 / timestamp */
    double min_f, max_f;      /* float64 */
} SqlColAggPart;

typedef struct SqlColAgg {
    int group_field;          /* keyword field grouped by, -1: one group */
    int n;                    /* aggregates */
    const int *field;         /* per aggregate: its column's field, -1 for count(*) */
    /* one group's partial states (n of them) from one segment; key NULL for
     * the NULL group and for the single group */
    int (*emit)(void *arg, const SqlValue *key, const SqlColAggPart *parts);
    void *arg;
} SqlColAgg;

typedef struct SqlScanRun SqlScanRun;

/* One table access of a query block: its pushed conditions, what the
 * planner chose and why, and what happened (EXPLAIN reads it).  The scan
 * runs as exec/op_scan.c's operator through sql_scan_open / _next / _close. */
typedef struct SqlTableScan {
    QrTable *t;               /* borrows */
    const char *qual;         /* table name or alias */
    SqlScope *scope;          /* the query's whole scope */
    int first, n_cols;        /* this table's columns: scope[first, first + n_cols) */
    SqlExpr **conj;           /* pushed conjuncts (bound in the whole scope) */
    int n_conj;
    SqlTextPred **texts;      /* every text predicate on this table */
    int n_texts;
    int drive;                /* texts[drive] is a top-level conjunct (-1: none) */
    int64_t topk;             /* rows wanted in score order (ORDER BY score DESC LIMIT), -1 */
    /* ORDER BY <column> ... LIMIT k (order_on): the full and column-scan
     * paths visit the column's blocks best zone-map bound first and skip
     * rows, then whole blocks, whose key cannot enter the first k.
     * order_may_enter(order_arg, key) is false when key sorts strictly after
     * the k-th row kept so far (a key of scope column order_col). */
    bool order_on, order_desc, order_nulls_first;
    int order_col;
    bool (*order_may_enter)(void *arg, const SqlValue *key);
    void *order_arg;
    /* when set and every condition is the driving text predicate or a
     * column predicate, the full / scan / text paths aggregate from column
     * blocks (colagg_used, sql_scan_colagg) instead of producing rows */
    const struct SqlColAgg *colagg;
    bool colagg_used;
    uint64_t colagg_rows;
    bool uncounted;           /* top-k by score alone: the matches were not counted
                                 (text_rows is the k asked for) */
    bool from_drive;          /* candidates come from the driving text set: its
                                 predicate is not checked again per row */
    void **text_cands;        /* the driving text set split by segment (roaring bitmaps) */
    int n_text_cands;
    bool pk_range;            /* the pk path reads a range of keys (pk > a, BETWEEN...) */
    uint64_t pk_range_keys;   /* keys in that range */
    bool ordered;             /* the ordered walk runs */
    uint64_t ord_blocks_read, ord_blocks_total, ord_rows_skipped;
    /* EXPLAIN (SCORES): global ids of the docs returned (at most 1000) */
    bool keep_docs;
    int64_t *kept_docs;
    uint64_t n_kept;
    /* planning */
    SqlAccessPath path;
    double est_rows, cost;
    SqlScanAlt alts[8];
    int n_alts;
    int n_colpreds;           /* conjuncts a column scan can evaluate */
    const char *note;         /* why a forced path was not possible, or NULL */
    /* actuals */
    uint64_t rows_out, candidates, text_rows;
    double ms;
    uint64_t zm_blocks_total, zm_blocks_skipped;
    uint64_t bt_pages;        /* B-tree pages read (btree path) */
    uint64_t post_blocks_decoded, post_blocks_skipped;
    const char *text_strategy;
    bool from_stats;          /* answered from column statistics (sql_scan_stats_aggs) */
    SqlScanRun *run;          /* sql_scan.c's state once planned (arena) */
} SqlTableScan;

/* Rows being collected (row-major, `width` values each), in cx->arena. */
typedef struct SqlRowSink {
    SqlValue *rows;
    uint64_t n, cap;
    int width;
} SqlRowSink;
/* Room for one more row at rows + n * width (n is not advanced), growing by
 * doubling; NULL (error set: memory cap) on failure. */
SqlValue *sql_sink_slot(SqlCtx *cx, SqlRowSink *s);

struct SqlBatch;
/* Choose the access path (costs, and the driving text predicate's count):
 * sc->path, est_rows, cost, alts.  Set order_* and topk before.  Pins a
 * snapshot only for the call; sql_scan_open plans again if the table
 * moved since. */
int sql_scan_plan(SqlCtx *cx, SqlTableScan *sc);
/* Start the scan: pins the table's snapshot until close, computes the text
 * predicates' sets.  Set colagg before when aggregates may come from
 * column blocks. */
int sql_scan_open(SqlCtx *cx, SqlTableScan *sc);
/* The next batch of rows passing every pushed conjunct (scope-wide, the
 * conjuncts' columns filled; exec.h), borrowed until the next call;
 * *out NULL at the end. */
int sql_scan_next(SqlCtx *cx, SqlTableScan *sc, struct SqlBatch **out);
/* After open: aggregate from column blocks through sc->colagg's emit, when
 * the scan can (*used); then it produces no rows. */
int sql_scan_colagg(SqlCtx *cx, SqlTableScan *sc, bool *used);
/* Release the snapshot and what open took; the plan stays (a rescan opens
 * again).  Safe when not open. */
void sql_scan_close(SqlCtx *cx, SqlTableScan *sc);
/* Add "qual:path" to the result's plan summary (QrSqlResult.plan) once the
 * scan was planned. */
void sql_scan_note(SqlCtx *cx, const SqlTableScan *sc);
/* Open, every row with every used column filled (rows in cx->arena),
 * close: UPDATE / DELETE. */
int sql_scan_table(SqlCtx *cx, SqlTableScan *sc, SqlValue **rows, uint64_t *n_rows);
/* Exact count of a table's rows when its conditions are one text predicate
 * and column predicates, without fetching a document (SELECT count(*) ...
 * WHERE col @@ 'q' AND x > 5): *done false when another condition needs
 * the rows. */
int sql_scan_count_text(SqlCtx *cx, SqlTableScan *sc, uint64_t *count, bool *done);
/* Whole-table count(*) / count(col) / min(col) / max(col) from column
 * statistics (out: one value per aggregate); *done false when they cannot
 * answer (deletes pending, another aggregate, a text column). */
int sql_scan_stats_aggs(SqlCtx *cx, SqlTableScan *sc, SqlAgg *const *aggs, int n, SqlValue *out,
                        bool *done);
/* EXPLAIN (SCORES) rows (11 columns: _id, key, term, field, tf, df, idf,
 * doc_len, avgdl, weight, score) for docs under text predicate tp
 * (sql_scores.c). */
int sql_scores_rows(SqlCtx *cx, QrTable *t, const SqlTextPred *tp, const int64_t *docs,
                    uint64_t n_docs, SqlRowSink *out);
/* Access path names for EXPLAIN and SET. */
const char *sql_path_name(SqlAccessPath p);

/* The SQL columns of a table: the primary key, the fields in schema order,
 * then hidden _id (global doc id) and _score.  Scope in cx->arena. */
int sql_table_scope(SqlCtx *cx, QrTable *t, const char *alias, SqlScope **out);
QrSqlType sql_field_type(QrFieldType t);

/* Rows of a table matching a WHERE (parse node, NULL = all), with every
 * scope column (sql_table_scope order) — UPDATE / DELETE with any WHERE.
 * vals: n * scope->n, in cx->arena. */
typedef struct SqlTableRows {
    const SqlScope *scope;
    uint64_t n;
    int64_t *docs;         /* global doc ids (snapshot of the scan) */
    SqlValue *vals;
} SqlTableRows;
int sql_table_rows(SqlCtx *cx, QrTable *t, const char *alias, const cJSON *where,
                   SqlTableRows *out);

struct SqlQuery;
/* Run a query node (SelectStmt body's parent node) into res (ROWS): bind,
 * plan and run (INSERT ... SELECT, CREATE TABLE AS, COPY (query) TO
 * STDOUT). */
int sql_query_run(SqlCtx *cx, const cJSON *select_node, QrSqlResult *res);
/* Bind a query once (plan/plan.h), in cx->arena: *q and its result
 * columns (names copied); nothing is evaluated. */
int sql_query_bind(SqlCtx *cx, const cJSON *select_node, struct SqlQuery **q, QrSqlColumn **cols,
                   int *n_cols);
/* Plan and run a bound query into res (ROWS). */
int sql_query_run_bound(SqlCtx *cx, struct SqlQuery *q, QrSqlResult *res);
/* EXPLAIN [ANALYZE] [(SCORES)] of an ExplainStmt node into res (ROWS). */
int sql_explain(SqlCtx *cx, const cJSON *explain_node, QrSqlResult *res);
/* Result columns of a query without running it (prepare). */
int sql_query_describe(SqlCtx *cx, const cJSON *select_node, QrSqlColumn **cols, int *n_cols);

#endif
