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

#include "query/colwalk.h"
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
    QrSqlAccess access_max;   /* qr_sql_session_limit_access (SCHEMA: no limit) */
    const char *access_hint;  /* borrows: the hint of an access error, or NULL */
    char txn_status;          /* 'I', 'T', 'E' (sql_txn.c moves it) */
    SqlSetting *settings;     /* owns */
    int n_settings, cap_settings;
    QrSqlStmt **cache;        /* owns one reference each: prepared statements by text */
    int n_cache, cap_cache;
    void *u_state;            /* owned by the utility side (transaction, COPY);
                                 freed by sqlu_session_free */
    struct SqlCursor *cursors; /* owns: DECLAREd cursors (sql_cursor.c) */
    struct SqlNamed *named;   /* owns: named prepared statements, SQL PREPARE and the
                                 protocol's Parse alike (sql_cursor.c) */
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
    QrSqlAccess access;       /* what running it needs (sql_access_of) */
    const char *access_what;  /* the command that needs it ("DELETE" in a WITH) */
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
    QrArena *arena;           /* where values go now: the statement's or result's arena,
                                 or an operator's per-batch scratch while it evaluates */
    QrArena *root_arena;      /* the statement's or result's arena, never a scratch:
                                 what must last the whole execution */
    const char *sql;          /* statement text (error positions) */
    size_t sql_len;
    const SqlParams *params;  /* NULL while only analyzing */
    QrSqlType *param_types;   /* inferred parameter types (analysis writes) */
    int n_params;             /* highest $n seen */
    bool analyze_only;        /* prepare: bind, no execution */
    uint64_t t0_ns;
    uint64_t deadline_ns;     /* 0 = none */
    SqlAccessPath path;       /* quarry.access_path */
    int typo;                 /* quarry.typo_tolerance: QrTypo, OFF unless set */
    bool prefix_last;         /* quarry.prefix_search: complete the query's last word */
    QrSqlResult *res;         /* notices go here (may be NULL) */
    uint64_t ticks;           /* rows since the last deadline check */
    struct SqlExplain *ex;    /* EXPLAIN: plan nodes are recorded here (NULL otherwise) */
    int depth;                /* nesting of sub-selects (CTEs, subqueries) */
    int nest;                 /* expression levels being bound now (sql_expr_bind) */
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

/* The snapshot a read of table t sees (sql_isolation.c): the table's
 * current one, or in a REPEATABLE READ block the one pinned at the block's
 * first read of t, with the block's own buffered writes to t overlaid
 * (sql_own_writes.c).  The caller owns one reference (snapshot_release).
 * NULL with cx->err set when the overlay could not be built. */
Snapshot *sql_snapshot(SqlCtx *cx, QrTable *t);

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
/* Read libpg_query's JSON output into a cJSON tree without recursion (the
 * tree of a long operator chain nests deeper than cJSON_Parse accepts).
 * QR_ELIMIT when containers nest deeper than max_depth (*depth_seen is then
 * over it) or the tree would take more than max_bytes (0: no limit; about
 * 80 bytes a node plus its strings), QR_ENOMEM, QR_EINTERNAL for malformed
 * JSON; no error is set and *out is NULL on failure.  Free with sqlj_delete. */
int sqlj_parse(const char *json, int max_depth, size_t max_bytes, cJSON **out, int *depth_seen);
/* Free a tree (its root has no siblings) without recursion.  NULL is a no-op. */
void sqlj_delete(cJSON *root);
/* Visit root and every item below it, parents before children, without
 * recursion; a visit returning non-zero stops the walk with that value.
 * The visitor may add members to the node it visits. */
int sqlj_walk(cJSON *root, int (*visit)(cJSON *node, void *arg), void *arg);

/* ======================================================================== */
/* sql_guard.c — nesting, stack and access guards; parsing                   */
/* ======================================================================== */

/* About how many levels a statement may nest (a chain of that many
 * operators, brackets, subqueries): beyond, 54001 "statement too complex"
 * before libpg_query sees it.  Normalizing (query history) recurses more
 * per level and takes less. */
#define SQL_MAX_NESTING 5000
#define SQL_NORMALIZE_NESTING 1500
/* Containers the parse tree's JSON may nest (a level of SQL is at most 4). */
#define SQL_MAX_JSON_DEPTH (4 * SQL_MAX_NESTING + 64)
/* The parse tree of a query string checked without a session (its
 * statements' own trees are held to the session's quarry.mem_cap). */
#define SQL_PARSE_MAX_BYTES ((size_t)512 << 20)
/* Stack the binder and executor leave free for the calls they make. */
#define SQL_STACK_MARGIN ((size_t)256 << 10)

/* Set err to 54001 "statement too complex" (limit named in the detail);
 * returns QR_ELIMIT. */
int sql_too_complex(QrError *err, int limit);
/* QR_OK when the statement sql[0, len) (NUL-terminated at len) surely
 * nests at most about `limit` levels; 54001 otherwise.  Cheap for short
 * statements and for long ones of few operators (IN lists, VALUES). */
int sql_guard_nesting(const char *sql, size_t len, int limit, QrError *err);
/* Guard, parse with libpg_query and read the tree (sqlj_delete it):
 * 42601 with the position for syntax errors, 54001 when too deep, 54000
 * when the tree would take more than max_bytes (0: no limit; a million-item
 * IN list is 800 MB of tree). */
int sql_parse(const char *sql, size_t len, size_t max_bytes, cJSON **tree, QrError *err);
/* The access a statement node ({"Tag": {...}}) needs, and the command that
 * needs it (static text: "DELETE", "SELECT INTO", "CREATE TABLE"...). */
int sql_access_of(const cJSON *stmt, QrSqlAccess *need, const char **what);
/* Bytes of stack left below the caller's frame (SIZE_MAX when unknown).
 * The first call on a thread finds its stack; statements make it before
 * anything recurses, so sql_stack_low is then exact. */
size_t sql_stack_left(void);
extern __thread uintptr_t sql_stack_lo; /* this thread's lowest usable stack address, 0 unknown */
/* Cheap test for hot recursion (evaluation): less than the margin left? */
static inline bool sql_stack_low(void)
{
    return (uintptr_t)__builtin_frame_address(0) < sql_stack_lo + SQL_STACK_MARGIN;
}
/* QR_OK, or 54001 set in cx->err when less than SQL_STACK_MARGIN is left:
 * called by every recursion over statements (binding, evaluation,
 * subqueries). */
int sql_check_stack(SqlCtx *cx);

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
/* ======================================================================== */
/* sql_types.c — the type registry                                           */
/* ======================================================================== */

/* A scalar type's PostgreSQL identity (an array type's is its element's). */
typedef struct SqlTypeInfo {
    uint32_t oid;
    const char *name;      /* pg_type.typname */
    int16_t len;           /* typlen, -1 varlena */
    uint32_t array_oid;    /* typarray: the OID of its array type */
    char category;         /* typcategory */
    const char *sql;       /* format_type's spelling ("integer") */
} SqlTypeInfo;
const SqlTypeInfo *sqlt_info(QrSqlType t);
/* pg_type's name ("_int4" for int4[]). */
const char *sqlt_typname(QrSqlType t);
/* Classes of types for operators. */
bool sqlt_is_int(QrSqlType t);    /* int2/4/8, oid */
bool sqlt_is_float(QrSqlType t);  /* float4/8, numeric */
/* The type two numbers of types a and b resolve to (CASE, UNION, COALESCE),
 * as PostgreSQL: float8 beside a float, else numeric beside a numeric, else
 * int8. */
QrSqlType sqlt_num_common(QrSqlType a, QrSqlType b);
bool sqlt_is_num(QrSqlType t);
bool sqlt_is_str(QrSqlType t);    /* text, varchar, name, char, unknown */
bool sqlt_is_ts(QrSqlType t);
bool sqlt_is_datetime(QrSqlType t); /* timestamp, timestamptz, date (all microseconds) */
/* Does the value keep its bytes in u.s (strings, numeric, bytea, json,
 * arrays)?  Such values are copied with their bytes (sqlv_own). */
bool sqlt_has_bytes(QrSqlType t);
/* A type name from the parse tree ("int4", "varchar", "timestamptz",
 * "double precision" as "float8", "_int4" as int4[]) — false if unknown. */
bool sqlt_from_name(const char *name, QrSqlType *out);
/* The pg_type rows of every type Quarry has (scalars, then their arrays):
 * i in [0, sqlt_catalog_n()). */
typedef struct SqlTypeRow {
    QrSqlType type;
    uint32_t oid;
    const char *name, *sql;
    int16_t len;
    char category;
    uint32_t elem, array;  /* typelem, typarray */
} SqlTypeRow;
int sqlt_catalog_n(void);
bool sqlt_catalog_row(int i, SqlTypeRow *out);
/* typarray of a scalar type's OID (0: none known). */
uint32_t sqlt_array_oid(uint32_t elem_oid);
/* How a column declared `name` (`array`: name[]) that sql_ddl.c's own
 * table does not list is stored: its field type, pg_type name for sql.json
 * and whether it lives in the document only (no index, no column).  false
 * when Quarry cannot store the type. */
bool sqlt_storage(const char *name, bool array, QrFieldType *ft, const char **pg, bool *doc_only);

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
/* PostgreSQL's binary numeric (numeric_send) to its decimal text; 22P03
 * when the bytes are not one. */
int sqlv_numeric_recv(SqlCtx *cx, const uint8_t *p, size_t n, SqlValue *out);
/* The buffer's bytes as a text value in cx->arena; frees the buffer (54000
 * when it ran out of memory). */
int sqlv_buf_text(SqlCtx *cx, QrBuf *b, SqlValue *out);
/* Copy a value's string bytes into the arena (values that outlive a scan). */
int sqlv_own(SqlCtx *cx, SqlValue *v);
/* date_trunc(unit, ts) and extract(field from ts) on microseconds (UTC);
 * -1 for an unknown unit / field. */
int sqlv_date_trunc(const char *unit, int64_t us, int64_t *out);
int sqlv_extract(const char *field, int64_t us, double *out);
/* Catalog arrays are carried as their PostgreSQL text form ('{a,"b c",NULL}',
 * or an int2vector / oidvector's '1 2'): the elements (text values, NULL
 * for an unquoted NULL) into an arena array.  Malformed text: 22P02. */
int sqlv_array_parse(SqlCtx *cx, const SqlValue *arr, SqlValue **elems, uint64_t *n);
/* The text form of elements (quoted where PostgreSQL's array_out quotes),
 * into the arena. */
int sqlv_array_text(SqlCtx *cx, const SqlValue *elems, uint64_t n, SqlValue *out);

/* ======================================================================== */
/* sql_datetime.c — date, time, interval                                     */
/* ======================================================================== */

#define SQL_US_PER_DAY 86400000000LL
/* Broken-down UTC time of microseconds since the epoch (dow 0 = Sunday). */
typedef struct SqlTm {
    int64_t year;
    unsigned mon, day, hour, min, sec, usec, dow, doy;
} SqlTm;
void sqld_split(int64_t us, SqlTm *tm);
int64_t sqld_join(const SqlTm *tm);
int64_t sqld_days_from_civil(int64_t y, unsigned m, unsigned d);
/* "2024-01-15[ T]10:00[:00[.f]][ ][zone][ BC]", now / today / tomorrow /
 * yesterday / epoch: microseconds (without the zone applied), the zone's
 * seconds east of UTC.  0, -1 bad syntax (22007), -2 out of range (22008). */
int sqld_parse_datetime(const char *s, size_t n, int64_t *us, int64_t *zone, bool *has_zone);
/* Text input of each type (PostgreSQL's forms; intervals also ISO 8601
 * "P1DT2H" and "@ 1 hour ago"); errors 22007 / 22008 / 22015. */
int sqld_date_in(SqlCtx *cx, const char *s, size_t n, int loc, SqlValue *out);
int sqld_time_in(SqlCtx *cx, const char *s, size_t n, int loc, SqlValue *out);
int sqld_interval_in(SqlCtx *cx, const char *s, size_t n, int loc, SqlValue *out);
/* Text output: "2024-01-15" ("... BC"), "10:00:00[.ffffff]", intervals in
 * IntervalStyle postgres ("1 year 2 mons 3 days 04:05:06"). */
void sqld_date_out(int64_t us, QrBuf *out);
void sqld_time_out(int64_t us, QrBuf *out);
void sqld_interval_out(const SqlValue *v, QrBuf *out);
/* Casts from text, between date and timestamps, timestamp -> time,
 * time <-> interval; 42846 otherwise. */
int sqld_cast(SqlCtx *cx, const SqlValue *in, QrSqlType to, int loc, SqlValue *out);
/* Interval order (a month is 30 days, a day 24 hours) and a hash that
 * agrees with it. */
int sqld_interval_cmp(const SqlValue *a, const SqlValue *b);
uint64_t sqld_interval_hash(const SqlValue *v);
/* The result type of a date/time operator ('+', '-', '*', '/') on these
 * operand types: 0 and *ret; 1 when the types take part but no such
 * operator exists (42883); -1 when neither is a date/time type. */
int sqld_arith_type(int op, QrSqlType l, QrSqlType r, QrSqlType *ret);
/* Apply it (non-NULL operands): timestamp +- interval, date +- int, date -
 * date, timestamp - timestamp, interval arithmetic, time +- interval... */
int sqld_arith(SqlCtx *cx, int op, const SqlValue *a, const SqlValue *b, QrSqlType ret, int loc,
               SqlValue *out);
int sqld_negate(SqlCtx *cx, const SqlValue *iv, SqlValue *out);
/* extract(field from v) of an interval, a time, a date or a timestamp. */
int sqld_extract(SqlCtx *cx, const char *field, const SqlValue *v, double *out);
/* Binary forms (date: int32 days from 2000-01-01; time: int64 us;
 * interval: int64 us, int32 days, int32 months); 22P03 on a bad length. */
void sqld_send(const SqlValue *v, QrBuf *b);
int sqld_recv(SqlCtx *cx, QrSqlType t, const uint8_t *p, size_t n, SqlValue *out);

/* ======================================================================== */
/* sql_bytes.c — uuid and bytea                                              */
/* ======================================================================== */

/* Text input: uuid in PostgreSQL's spellings (hyphens after groups of four
 * digits, braces, upper case), bytea in hex ("\x0a0b") or escape form;
 * 22P02 on bad input. */
int sqlb_uuid_in(SqlCtx *cx, const char *s, size_t n, int loc, SqlValue *out);
int sqlb_bytea_in(SqlCtx *cx, const char *s, size_t n, int loc, SqlValue *out);
/* Text output: 8-4-4-4-12 lower case; "\x" and hex digits. */
void sqlb_uuid_out(const uint8_t *u, QrBuf *out);
void sqlb_bytea_out(const SqlValue *v, QrBuf *out);
/* Casts from text (42846 otherwise) and binary receive (16 bytes / any). */
int sqlb_cast(SqlCtx *cx, const SqlValue *in, QrSqlType to, int loc, SqlValue *out);
int sqlb_recv(SqlCtx *cx, QrSqlType t, const uint8_t *p, size_t n, SqlValue *out);

/* ======================================================================== */
/* sql_json.c — json and jsonb                                               */
/* ======================================================================== */

/* Text input: json kept as given, jsonb normalized (keys by length then
 * bytes, the last duplicate kept, numbers as numeric prints them); 22P02
 * "invalid input syntax for type json" with PostgreSQL's detail. */
int sqljs_in(SqlCtx *cx, const char *s, size_t n, QrSqlType t, int loc, SqlValue *out);
/* A SQL value as JSON of type t (to_json / to_jsonb). */
int sqljs_from_value(SqlCtx *cx, const SqlValue *v, QrSqlType t, SqlValue *out);
/* A JSON array of n values, vals[i * stride] (json_agg, json_build_array). */
int sqljs_agg(SqlCtx *cx, const SqlValue *vals, uint64_t n, uint64_t stride, QrSqlType t,
              SqlValue *out);
/* doc -> key, ->> key, #> path, #>> path: NULL when absent; ret is the
 * document's type or text. */
enum { SQLJS_GET, SQLJS_GET_TEXT, SQLJS_PATH, SQLJS_PATH_TEXT };
int sqljs_op(SqlCtx *cx, int op, const SqlValue *doc, const SqlValue *key, QrSqlType ret,
             SqlValue *out);
/* row_to_json's implementation (names and values alternately). */
extern const struct SqlFuncDef SQLJS_ROW_TO_JSON;

/* ======================================================================== */
/* sql_numeric.c — numeric as an exact decimal                               */
/* ======================================================================== */

/* Text input, normalized ("1e3" is 1000, " 12.50" is 12.50; NaN, Infinity);
 * 22P02 on bad input, 22003 past 20,000 digits. */
int sqln_in(SqlCtx *cx, const char *s, size_t n, int loc, SqlValue *out);
/* x op y ('+', '-', '*', '/', '%') of numerics (integers and floats are
 * converted first), with PostgreSQL's result scales; 22012. */
int sqln_arith(SqlCtx *cx, int op, const SqlValue *x, const SqlValue *y, SqlValue *out);
/* Order of two numeric texts (NaN above everything, equal to itself). */
int sqln_cmp(const SqlValue *x, const SqlValue *y);
int sqln_neg(SqlCtx *cx, const SqlValue *x, SqlValue *out);
/* round (half away from zero) / trunc to `scale` digits (negative: tens,
 * hundreds), ceil / floor. */
enum { SQLN_ROUND, SQLN_TRUNC, SQLN_CEIL, SQLN_FLOOR };
int sqln_round(SqlCtx *cx, const SqlValue *x, int64_t scale, int how, SqlValue *out);
/* numeric(p, s): rounded to s digits, 22003 "numeric field overflow" with
 * PostgreSQL's detail when more than p - s integer digits remain.  A
 * typmod below 4 changes nothing. */
int sqln_typmod(SqlCtx *cx, const SqlValue *x, int32_t typmod, int loc, SqlValue *out);
int32_t sqln_make_typmod(int prec, int scale);
/* The typmod of numeric(p [, s]) from a TypeName's "typmods" list (-1 when
 * absent); 22023 for a precision outside 1..1000 or a scale outside 0..p. */
int sqln_typmod_of(SqlCtx *cx, const cJSON *typmods, int loc, int32_t *out);
/* A float as numeric (15 significant digits, as float8_numeric). */
int sqln_from_double(SqlCtx *cx, double d, SqlValue *out);
/* to_char(number, format): PostgreSQL's 9 0 . D , G FM S MI SG PR V and
 * "text"; a number wider than the format prints as #; EEEE, RN, TH, PL and
 * L are 0A000. */
int sqln_to_char(SqlCtx *cx, const SqlValue *x, const char *fmt, size_t fmt_n, SqlValue *out);
/* avg(numeric): sum / count at the division's scale. */
int sqln_avg(SqlCtx *cx, const SqlValue *sum, int64_t count, SqlValue *out);

/* ======================================================================== */
/* sql_array.c — array values                                                */
/* ======================================================================== */

#define SQL_ARRAY_MAXDIM 6          /* PostgreSQL's MAXDIM */
#define SQL_ARRAY_MAX_ELEMS 100000000

/* A view of an array value's layout (sql_array.c), borrowing its bytes. */
typedef struct SqlArr {
    QrSqlType elem;
    int ndim;
    int dims[SQL_ARRAY_MAXDIM], lbound[SQL_ARRAY_MAXDIM];
    uint32_t n;               /* elements */
    const uint8_t *nulls;     /* NULL bitmap, NULL when no element is NULL */
    const uint8_t *slots;     /* fixed-width elements, `width` bytes each */
    const uint8_t *offs;      /* variable width: n + 1 offsets into bytes */
    const uint8_t *bytes;
    int width;
} SqlArr;
/* false when v is not a well-formed non-NULL array value. */
bool sqla_view(const SqlValue *v, SqlArr *a);
/* Element i (row-major, from 0) of type a->elem; strings borrow the array. */
void sqla_get(const SqlArr *a, uint32_t i, SqlValue *out);
/* A new array value (in cx->arena) of n elements already of type elem
 * (NULLs too); lbound NULL means 1 for every dimension.  54000 over
 * SQL_ARRAY_MAXDIM dimensions or SQL_ARRAY_MAX_ELEMS elements. */
int sqla_build(SqlCtx *cx, QrSqlType elem, int ndim, const int *dims, const int *lbound,
               const SqlValue *el, uint64_t n, SqlValue *out);
/* A one-dimensional array of n elements, cast to elem first when needed. */
int sqla_list(SqlCtx *cx, QrSqlType elem, const SqlValue *el, uint64_t n, SqlValue *out);
/* PostgreSQL's array input ('{1,2}', '{{"a b",NULL}}', '[0:1]={1,2}'),
 * each element parsed as elem.  22P02 "malformed array literal" with
 * PostgreSQL's detail; the elements' own input errors. */
int sqla_in(SqlCtx *cx, const char *s, size_t n, QrSqlType elem, int loc, SqlValue *out);
/* PostgreSQL's array output (elements quoted as array_out does). */
void sqla_out(const SqlValue *v, QrBuf *out);
/* Binary send / receive (PostgreSQL's array_send layout); receive checks
 * every length (22P03) and casts elements of another known type to elem. */
void sqla_send(const SqlValue *v, QrBuf *out);
int sqla_recv(SqlCtx *cx, const uint8_t *p, size_t n, QrSqlType elem, SqlValue *out);
/* Order as PostgreSQL's array comparison: elements, then length and
 * dimensions; hash consistent with it. */
int sqla_cmp(const SqlValue *a, const SqlValue *b);
uint64_t sqla_hash(const SqlValue *v);
/* Casts text -> array and array -> array (element by element). */
int sqla_cast(SqlCtx *cx, const SqlValue *in, QrSqlType to, int loc, SqlValue *out);
/* v as an array: arrays as they are, strings parsed as elem[] (catalog
 * columns in their text forms, int2vector's "1 2" too). */
int sqla_of(SqlCtx *cx, const SqlValue *v, QrSqlType elem, SqlValue *out);
/* arr[i][j] (hi only) or arr[lo:hi][...] (slice; an UNKNOWN-typed NULL bound
 * is an omitted one), as PostgreSQL: NULL outside, empty slices. */
int sqla_subscript(SqlCtx *cx, const SqlValue *arr, int n_subs, const SqlValue *lo,
                   const SqlValue *hi, bool slice, int loc, SqlValue *out);
/* Every element, flattened (arena array; NULL array: none). */
int sqla_elems(SqlCtx *cx, const SqlValue *arr, SqlValue **out, uint64_t *n);
/* @>, <@, && of two arrays of one element type (non-NULL). */
enum { SQLA_OP_CONTAINS, SQLA_OP_CONTAINED, SQLA_OP_OVERLAP };
int sqla_op(SqlCtx *cx, int op, const SqlValue *a, const SqlValue *b, SqlValue *out);

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
    bool no_bare;          /* merged into a JOIN ... USING column: reached only qualified */
    const char *jqual;     /* a join alias that names it instead of qual ("": none does) */
    uint32_t table_oid;
    int16_t attnum;
    int32_t typmod;        /* a numeric(p, s) column's (sql.json); below 4: none */
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
    SE_ANY_ARRAY,          /* x op ANY / ALL (array): args[0] x, args[1] the array (or a
                              catalog array's text); op SQL_CMP_*, + 8 for ALL */
    SE_SRF,                /* unnest / generate_series / generate_subscripts in a target list */
    SE_WIN,                /* a window function's value, computed by the window operator
                              into column `col` of the rows under the projection
                              (plan/bind_window.c); op = its argument count */
    SE_ARRAY,              /* ARRAY[a, b, ...]: args the elements (op 1: the elements are
                              themselves arrays, a multidimensional array is built) */
    SE_SUBSCRIPT,          /* args[0][...]: args[1 + 2k] / args[2 + 2k] the lower / upper
                              bound of subscript k (lower NULL for arr[i]); op 1 slice */
    SE_ARRAY_OP,           /* args[0] op args[1] on arrays: op SQLA_OP_*, or '|' for || */
    SE_JSON_OP,            /* args[0] -> / ->> / #> / #>> args[1]: op SQLJS_* */
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
    int col;               /* SE_COL: scope index; SE_PARAM: 0-based; SE_AGG: slot;
                              SE_ARITH: 1 for a date/time operator (sql_datetime.c) */
    int32_t typmod;        /* SE_CAST to numeric(p, s), SE_COL of a numeric(p, s)
                              column: its typmod; below 4 (0, -1): none */
    SqlValue val;          /* SE_CONST */
    int n_args;
    SqlExpr **args;        /* operands (SE_CASE: [arg?] when/then pairs, else) */
    bool case_has_arg;     /* SE_CASE with CASE x WHEN ... */
    bool case_has_else;
    const SqlFuncDef *fn;  /* SE_FUNC */
    SqlTextPred *text;     /* SE_MATCH / SE_SCORE / SE_SNIPPET */
    SqlValueSet *set;      /* SE_IN_SET: materialized subquery; SE_IN: its list of
                              SQL_IN_SET_MIN+ constants, sorted (NULL otherwise) */
    SqlSubq *subq;         /* SE_SUBQ */
    const char *name;      /* output name hint ("count", column name) */
};

enum { SQL_CMP_EQ, SQL_CMP_NE, SQL_CMP_LT, SQL_CMP_LE, SQL_CMP_GT, SQL_CMP_GE };
#define SQL_IN_SET_MIN 16  /* IN lists of this many constants are searched, not scanned */

/* Aggregates referenced by a query (SE_AGG.col is the slot). */
typedef enum SqlAggKind {
    SA_COUNT_STAR, SA_COUNT, SA_SUM, SA_AVG, SA_MIN, SA_MAX, SA_PCT_CONT, SA_PCT_DISC,
    SA_BOOL_AND, SA_BOOL_OR, SA_STRING_AGG, SA_JSON_AGG, SA_JSONB_AGG,
    SA_STDDEV_SAMP, SA_STDDEV_POP, SA_VAR_SAMP, SA_VAR_POP, SA_ARRAY_AGG,
    SA_GROUP_KEY,          /* grouping sets: the value of group key keys[0], NULL in a
                              grouping set without it (plan/bind_group.c) */
    SA_GROUPING,           /* GROUPING(a, b, ...): bit per argument (first = highest),
                              set when its key keys[i] is not in the row's grouping set */
} SqlAggKind;

struct SqlAgg {
    SqlAggKind kind;
    bool distinct;
    SqlExpr *arg;          /* NULL for count(*) */
    SqlExpr *arg2;         /* string_agg delimiter; percentile fraction; array_agg ORDER BY key */
    bool desc;             /* array_agg (... ORDER BY key DESC) */
    SqlExpr *filter;       /* FILTER (WHERE ...): rows it rejects are skipped; NULL = none */
    QrSqlType type;        /* result type */
    /* ORDER BY inside the aggregate (string_agg(x, ',' ORDER BY y)): the
     * rows' values are collected, sorted, then aggregated in that order */
    SqlExpr **order;       /* n_order sort expressions */
    bool *order_desc, *order_nulls_first;
    int n_order;
    int *keys;             /* SA_GROUP_KEY, SA_GROUPING: group key indexes (n_keys) */
    int n_keys;
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
    /* the query binder's hooks (plan/bind_window.c, plan/bind_group.c): a
     * call with OVER, and GROUPING(...); NULL where a query's clauses are
     * not being bound (42P20 / 42803) */
    int (*bind_window)(struct SqlBind *b, const cJSON *fc, const char *lname, int loc,
                       SqlExpr **out);
    int (*bind_grouping)(struct SqlBind *b, const cJSON *gf, int loc, SqlExpr **out);
    void *hook_arg;        /* the query being bound */
    bool in_win;           /* binding a window function's arguments */
} SqlBind;

/* A full-text predicate `col @@ 'q'` / matches(col, 'q') of one table. */
struct SqlTextPred {
    int id_col;            /* scope index of the table's _id column */
    int score_col;         /* scope index of the table's _score column */
    const char *qual;      /* the table's name or alias */
    const char *field;     /* searched field, NULL = the table's default fields */
    SqlExpr *query;        /* the query text: constant or parameter */
    int loc;
    struct SqlTextRun *run; /* run time (sql_text.c), set when its scan opens */
    SqlTextPred *next;     /* the next predicate on the same table in this query block
                              (binding order): snippet(col) under OR takes the first one
                              a row matches */
};
/* A materialized IN (subquery) set, sorted by sqlv_cmp. */
struct SqlValueSet {
    uint64_t n;
    SqlValue *vals;
    bool has_null;
};
/* Sort values by sqlv_cmp (NULLs last). */
void sql_sort_values(SqlValue *v, uint64_t n);

/* Bind a parse-tree expression against a scope (NULL = no columns). */
int sql_expr_bind(SqlBind *b, const cJSON *node, SqlExpr **out);
/* Is lname (lowercase) an aggregate function? */
bool sql_agg_known(const char *lname);
/* Bind the aggregate call fc (a FuncCall of an aggregate named lname)
 * into *out without adding it to b->aggs: a window function's aggregate
 * (`window`: its arguments may hold the query's own aggregates; DISTINCT,
 * ORDER BY and ordered-set aggregates are 0A000). */
int sql_agg_bind(SqlBind *b, const cJSON *fc, const char *lname, int loc, bool window,
                 SqlAgg **out);
/* Add an aggregate to b->aggs: *out is the SE_AGG expression reading it
 * (named `name`). */
int sql_bind_add_agg(SqlBind *b, SqlAgg *a, int loc, const char *name, SqlExpr **out);
/* plan/bind_window.c: is lname a window function (row_number, rank, lag...)? */
bool sql_win_known(const char *lname);
/* plan/bind.c: do two bound expressions compute the same thing? */
bool sql_expr_same(const SqlExpr *a, const SqlExpr *b);
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

/* What a subquery expression (SE_SUBQ, SE_IN_SET) holds, for the planner's
 * semi joins: its bound query; its kind ('e' EXISTS, 'a' = ANY / IN, 'x' a
 * scalar, 'r' ARRAY); how many references to columns of the query it sits
 * in it makes (every occurrence, nested subqueries' included) and whether
 * it reads columns of queries further out. */
typedef struct SqlSubqInfo {
    struct SqlQuery *query;
    char kind;
    int refs_here;
    bool refs_far;
} SqlSubqInfo;
void sql_subq_info(const SqlSubq *q, SqlSubqInfo *out);
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

/* Make an untyped literal or parameter e of type `to` (the resolution
 * PostgreSQL does from context); other expressions are left alone. */
int sql_coerce_unknown(SqlBind *b, SqlExpr *e, QrSqlType to);
/* e cast to `to` (constants folded at once); NULL with the error set. */
SqlExpr *sql_bind_cast(SqlBind *b, SqlExpr *e, QrSqlType to);

/* Simple convenience for the utility side (INSERT VALUES, UPDATE SET, COPY
 * defaults): bind against a scope (may be NULL) and keep the expression. */
int sql_expr_compile(SqlCtx *cx, const cJSON *node, const SqlScope *scope, SqlExpr **out);
/* The same where a value of type `want` is expected (an INSERT value, an
 * UPDATE SET target): an untyped parameter or literal takes that type, as
 * PostgreSQL resolves them from their context. */
int sql_expr_compile_as(SqlCtx *cx, const cJSON *node, const SqlScope *scope, QrSqlType want,
                        SqlExpr **out);

/* ======================================================================== */
/* sql_func.c — scalar functions as data                                     */
/* ======================================================================== */

/* The longest text a string function builds (repeat, replace): longer
 * results fail with 54000 "requested length too large" before any memory
 * is taken. */
#define SQL_TEXT_MAX ((size_t)64 << 20)
/* Arguments of one function call, as PostgreSQL (54023 beyond). */
#define SQL_FUNC_MAX_ARGS 100

struct SqlFuncDef {
    const char *name;
    int min_args, max_args;
    QrSqlType ret;         /* QR_SQL_UNKNOWN: same as the first argument */
    int (*fn)(SqlCtx *cx, int n, const SqlValue *args, SqlValue *out);
    bool strict;           /* NULL in any argument -> NULL out */
    bool numeric_args;     /* untyped literal arguments are numbers (else text) */
    /* polymorphic and overloaded functions: check and coerce the bound
     * arguments and set e->type (NULL: the rules above) */
    int (*check)(SqlBind *b, SqlExpr *e);
};
const SqlFuncDef *sql_func_find(const char *name, int n_args);
/* The function tables of the type files, searched by sql_func_find. */
extern const SqlFuncDef SQL_ARRAY_FUNCS[];
extern const int SQL_N_ARRAY_FUNCS;
extern const SqlFuncDef SQL_DATETIME_FUNCS[];
extern const int SQL_N_DATETIME_FUNCS;
extern const SqlFuncDef SQL_BYTES_FUNCS[];
extern const int SQL_N_BYTES_FUNCS;
extern const SqlFuncDef SQL_JSON_FUNCS[];
extern const int SQL_N_JSON_FUNCS;

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
/* RESET ALL: every setting the session changed back to its default. */
void sqlu_reset_all(QrSqlSession *s);

/* ======================================================================== */
/* sql_cursor.c — cursors, named prepared statements, DISCARD               */
/* ======================================================================== */

/* DECLARE / FETCH / MOVE / CLOSE / PREPARE / EXECUTE / DEALLOCATE /
 * DISCARD: is the statement tag one of sql_cursor.c's, and its kind. */
bool sqlc_handles(const char *tag);
const char *sqlc_kind(const cJSON *stmt, const char *tag);
/* Prepare time: result columns (FETCH: its cursor's now; EXECUTE: its
 * statement's) and the types of EXECUTE's and DECLARE's parameters. */
int sqlc_describe(SqlCtx *cx, const QrSqlStmt *st, QrSqlColumn **cols, int *n_cols);
/* Run one; EXECUTE sets *instead to the executed statement's own result
 * (res is then unused). */
int sqlc_exec(SqlCtx *cx, QrSqlStmt *st, QrSqlResult *res, QrSqlResult **instead);
/* The transaction block ended: close the cursors without HOLD. */
void sqlc_end_txn(QrSqlSession *s);
/* Close every cursor and drop every named statement. */
void sqlc_session_free(QrSqlSession *s);
/* A statement from a subtree of another's parse (PREPARE name AS query):
 * `sql` is the whole text (locations point into it), the node is copied. */
int sql_stmt_from_node(QrSqlSession *s, const char *sql, size_t len, const cJSON *node,
                       const uint32_t *oids, int n_oids, QrSqlStmt **out, QrError *err);
/* A bound parameter or binary COPY field of type t: text (fmt 0) or
 * PostgreSQL's binary send format (fmt 1); v NULL is SQL NULL.  22P03 for
 * binary data of the wrong length. */
int sql_param_decode(SqlCtx *cx, QrSqlType t, const char *v, int len, int fmt, SqlValue *out);
/* The per-query memory cap in force (quarry.mem_cap). */
size_t sql_session_mem_cap(const QrSqlSession *s);

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
/* ::regproc: a function's name (text; schema dropped): a catalog function,
 * or a type's input / output function as pg_type.typinput names it; an oid
 * becomes the catalog function's name.  Unknown: 42883. */
int sqlcat_reg_proc(SqlCtx *cx, const SqlValue *in, int loc, SqlValue *out);

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
 * column of field[k] (-1: count(*)), a partial state per segment
 * (colwalk.h's grouping, shared with the HTTP search's facets). */
typedef ColWalkAgg SqlColAggPart;

typedef struct SqlColAgg {
    int group_field;          /* keyword field grouped by, -1: one group */
    int n;                    /* aggregates */
    const int *field;         /* per aggregate: its column's field, -1 for count(*) */
    const bool *keep;         /* per aggregate: hand the values over too (NULL: none) */
    const bool *minmax;       /* per aggregate: its min / max are read (NULL: all are) */
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
    bool topk_ties;           /* ORDER BY score DESC, <more keys>: every match tied with the
                                 k-th score is a candidate too (the top-N above ranks them) */
    /* ORDER BY <column> ... LIMIT k (order_on): the full and column-scan
     * paths visit the column's blocks best zone-map bound first and skip
     * rows, then whole blocks, whose key cannot enter the first k.
     * order_may_enter(order_arg, key) is false when key sorts strictly after
     * the k-th row kept so far (a key of scope column order_col). */
    bool order_on, order_desc, order_nulls_first;
    int order_col;
    bool (*order_may_enter)(void *arg, const SqlValue *key);
    void *order_arg;
    /* ... LIMIT n OFFSET k with a deep k (rank_on, with order_on): the walk
     * keeps only the rows of ranks [rank_from, rank_from + rank_count) and
     * those tied with them (sql_scan.c run_rank_window); when it could
     * (rank_used), rank_before rows rank before all of them, which the
     * Limit above no longer skips (rank_rows: the rows kept) */
    bool rank_on, rank_used;
    uint64_t rank_from, rank_count, rank_before, rank_rows;
    /* when set and every condition is the driving text predicate or a
     * column predicate, the full / scan / text paths aggregate from column
     * blocks (colagg_used, sql_scan_colagg) instead of producing rows */
    const struct SqlColAgg *colagg;
    bool colagg_used;
    uint64_t colagg_rows;
    bool uncounted;           /* top-k by score alone: the matches were not counted
                                 (text_rows is the k asked for) */
    bool from_drive;          /* candidates come from the driving predicate's iterators:
                                 it is not checked again per row */
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
/* EXPLAIN (SCORES) rows (12 columns: _id, key, term, field, tf, df, idf,
 * doc_len, avgdl, weight, score, source) for docs under text predicate tp
 * (sql_scores.c). */
int sql_scores_rows(SqlCtx *cx, QrTable *t, const SqlTextPred *tp, const int64_t *docs,
                    uint64_t n_docs, SqlRowSink *out);
/* Access path names for EXPLAIN and SET. */
const char *sql_path_name(SqlAccessPath p);

/* sql_text.c — a full-text predicate at run time: compiled against the
 * snapshot of the scan that opened it (query/search_int.h), per-segment
 * match sets for rows that ask after the fact, snippets. */
typedef struct SqlTextRun SqlTextRun;
struct Search;
struct QrFilter;
/* A closed run of tp over table t (scope: the query's, for snippet
 * columns), in cx->arena; NULL (54000 set) over the cap. */
SqlTextRun *sql_text_run_new(SqlCtx *cx, const SqlTextPred *tp, QrTable *t, const SqlScope *scope);
/* Evaluate the query text and compile it against snap (pinned by the
 * caller until sql_text_close).  A NULL query matches nothing.  Errors:
 * 42601 / 22023 at the predicate for a bad query, 54000. */
int sql_text_open(SqlCtx *cx, SqlTextRun *r, Snapshot *snap);
/* Release the compiled query (the sets and highlight terms stay). */
void sql_text_close(SqlTextRun *r);
/* The compiled query while open (NULL: closed, or a NULL query). */
struct Search *sql_text_search(SqlTextRun *r);
/* The compiled query's first error, as the statement's (QR_OK: none). */
int sql_text_check(SqlCtx *cx, SqlTextRun *r);
/* Posting blocks decoded / skipped so far, added to sc's counters. */
void sql_text_stats(SqlTextRun *r, SqlTableScan *sc);
/* Exact count of the live matches over snap (within `filter`, the column
 * predicates, when not NULL); adds the work to sc's counters. */
int sql_text_count(SqlCtx *cx, SqlTextRun *r, Snapshot *snap, const struct QrFilter *filter,
                   SqlTableScan *sc, uint64_t *count);
/* Build (once per snapshot version) the per-segment match sets rows are
 * answered from, with scores when `scored`.  Open runs only. */
int sql_text_sets(SqlCtx *cx, SqlTextRun *r, Snapshot *snap, bool scored);
/* Does global doc `doc` match (and its score, 0 unless the sets are
 * scored)?  XX000 when the sets were never built. */
int sql_text_has(SqlCtx *cx, SqlTextRun *r, int64_t doc, bool *match, float *score);
/* snippet(...) of a row: e is SE_SNIPPET, its args the text columns. */
int sql_text_snippet(SqlCtx *cx, const SqlExpr *e, const SqlEvalRow *row, SqlValue *out);

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
