/*
 * sql.h — the SQL front door: sessions, statement splitting, prepare
 * (parse + analyze), execute with parameters, typed results, notices and the
 * COPY handshake.  server/ (PostgreSQL port, HTTP /sql, `quarry sql`) calls
 * SQL only through this header, quarry.h and the store/ base kit.
 *
 * Layer: query/.  Dialect: PostgreSQL 15's grammar (libpg_query); the
 * surface is described in docs/sql.md, the planner in docs/planner.md.
 *
 * Model.  A QrSqlSession is one client connection: settings (SET/SHOW),
 * the transaction state, prepared statements cached by their text, an
 * in-progress COPY FROM STDIN, and a cancel flag.  A session is used by one
 * thread at a time, except qr_sql_session_cancel which any thread may call.
 *
 *   split   -> spans of single statements (simple protocol: many per query)
 *   prepare -> QrSqlStmt: parameter type OIDs and result columns (Describe)
 *   execute -> QrSqlResult: command tag, columns, materialized rows that the
 *              port may fetch N at a time (Execute row limits), notices
 *
 * Errors.  QrError with a code (SQLSTATE derived from it) and, where known,
 * a specific SQLSTATE (qr_error_sqlstate): 42601 syntax error, 42703
 * undefined column, 42P01 undefined table, 42883 undefined function, 22012
 * division by zero, 22003 numeric out of range, 25P02 in failed transaction,
 * 23505 unique violation, 0A000 unsupported construct (the message names
 * it), 57014 canceled / statement timeout, 54000 memory cap.  For syntax
 * errors and unknown names QrError.offset is the 1-based CHARACTER position
 * in the text given to prepare (PostgreSQL's "position" field), -1 if none;
 * a caller that prepared statement k of a split query string adds
 * qr_sql_utf8_chars(query, span.offset) to map it onto the whole string.
 *
 * Ownership.  Results and statements own all their memory (one arena each);
 * strings and values they hand out are valid until the matching _free /
 * _unref.  Parameter values are borrowed for the duration of the call.
 */
#ifndef QR_SQL_H
#define QR_SQL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/quarry.h"
#include "store/buf.h"
#include "store/error.h"

/* ---- types ---------------------------------------------------------------- */

/* SQL value types.  The PostgreSQL type OID of each is qr_sql_type_oid(). */
typedef enum QrSqlType {
    QR_SQL_UNKNOWN = 0, /* an untyped NULL or literal (reported as text, oid 25) */
    QR_SQL_BOOL,        /* 16   u.b */
    QR_SQL_INT2,        /* 21   u.i */
    QR_SQL_INT4,        /* 23   u.i */
    QR_SQL_INT8,        /* 20   u.i */
    QR_SQL_FLOAT4,      /* 700  u.f */
    QR_SQL_FLOAT8,      /* 701  u.f */
    QR_SQL_NUMERIC,     /* 1700 u.s: decimal text ("12.50"), exact (sql_numeric.c) */
    QR_SQL_TEXT,        /* 25   u.s */
    QR_SQL_VARCHAR,     /* 1043 u.s */
    QR_SQL_NAME,        /* 19   u.s (catalogs) */
    QR_SQL_CHAR,        /* 18   u.s, one byte ("char" in catalogs) */
    QR_SQL_OID,         /* 26   u.i */
    QR_SQL_TIMESTAMP,   /* 1114 u.i microseconds since 1970-01-01 00:00:00 */
    QR_SQL_TIMESTAMPTZ, /* 1184 u.i microseconds since the epoch, UTC */
    QR_SQL_DATE,        /* 1082 u.i microseconds since the epoch of the day's midnight */
    QR_SQL_TIME,        /* 1083 u.i microseconds since midnight */
    QR_SQL_INTERVAL,    /* 1186 u.iv months, days, microseconds */
    QR_SQL_UUID,        /* 2950 u.uuid, 16 bytes */
    QR_SQL_BYTEA,       /* 17   u.s raw bytes */
    QR_SQL_JSON,        /* 114  u.s the JSON text as given */
    QR_SQL_JSONB,       /* 3802 u.s the JSON text normalized (sql_json.c) */
    QR_SQL_TYPE_COUNT,
    /* An array of the scalar type t is QR_SQL_ARRAY | t (int4[] is oid 1007):
     * u.s holds its elements in sql_array.c's layout, never its text. */
    QR_SQL_ARRAY = 0x40
} QrSqlType;

#define QR_SQL_ARRAY_OF(t) ((QrSqlType)((t) | QR_SQL_ARRAY))
#define QR_SQL_IS_ARRAY(t) (((t) & QR_SQL_ARRAY) != 0)
#define QR_SQL_ELEM(t) ((QrSqlType)((t) & ~QR_SQL_ARRAY))

/* PostgreSQL type OID (25 for UNKNOWN), the type's name as PostgreSQL
 * spells it ("int8", "timestamptz", "_int4" for int4[]), and its
 * pg_type.typlen (-1 varlena). */
uint32_t qr_sql_type_oid(QrSqlType t);
const char *qr_sql_type_name(QrSqlType t);
int16_t qr_sql_type_len(QrSqlType t);
/* The type of an OID; false when Quarry does not know it. */
bool qr_sql_type_from_oid(uint32_t oid, QrSqlType *out);

/* One value.  When is_null the union is unused.  Strings are NOT
 * NUL-terminated necessarily (use n) and borrow the result's arena. */
typedef struct QrSqlValue {
    QrSqlType type;
    bool is_null;
    union {
        bool b;
        int64_t i; /* int2/4/8, oid, timestamp(tz), date, time microseconds */
        double f;  /* float4/8 */
        struct {
            const char *s;
            size_t n;
        } s;       /* text, varchar, name, char, numeric, bytea, json(b), arrays */
        struct {
            int64_t us;
            int32_t days, months;
        } iv;      /* interval: its three fields, kept apart as PostgreSQL does */
        uint8_t uuid[16];
    } u;
} QrSqlValue;

/* Append the PostgreSQL text form of v (NULL appends nothing: the caller
 * sends the NULL marker): bools "t"/"f", floats with the shortest
 * round-trip digits ("Infinity", "NaN"), timestamps "2025-01-15 10:00:00[.ffffff]"
 * (timestamptz with "+00"), dates "2025-01-15", intervals "1 day 02:00:00",
 * bytea "\\x0a0b", arrays "{1,2,NULL}" (elements quoted as array_out does). */
void qr_sql_value_text(const QrSqlValue *v, QrBuf *out);
/* Append PostgreSQL's binary send form of v (the bytes of a DataRow field
 * or binary COPY field, without the length; NULL appends nothing):
 * integers and floats big-endian, timestamps and dates from 2000-01-01,
 * numeric in base-10000 digits, arrays with their dimensions and element
 * OID; text-like types as their text. */
void qr_sql_value_send(const QrSqlValue *v, QrBuf *out);

/* ---- sessions ------------------------------------------------------------- */

typedef struct QrSqlSession QrSqlSession;

/* A new session on an open database (borrowed; must outlive the session). */
int qr_sql_session_new(QrDb *db, QrSqlSession **out, QrError *err);
/* Rolls back an open transaction, aborts a COPY, frees every prepared
 * statement the session caches.  NULL is a no-op. */
void qr_sql_session_free(QrSqlSession *s);
QrDb *qr_sql_session_db(const QrSqlSession *s);

/* Transaction status for ReadyForQuery: 'I' idle, 'T' in a transaction
 * block, 'E' in a failed block (every statement but ROLLBACK/COMMIT then
 * fails with 25P02 until the block ends). */
char qr_sql_session_txn_status(const QrSqlSession *s);

/* Ask the statement running in this session to stop: it fails with
 * QR_ECANCELED (57014) at its next check (every scan loop checks).  Safe
 * from any thread; the flag is cleared when the next statement starts. */
void qr_sql_session_cancel(QrSqlSession *s);

/* A ceiling on statement time that SET statement_timeout cannot raise (the
 * HTTP server's query_timeout_ms); 0 removes it.  A statement over it fails
 * with QR_ETIMEOUT (57014). */
void qr_sql_session_limit_timeout(QrSqlSession *s, uint64_t max_ms);

/* What a statement may do.  A statement needs the most that any node of its
 * parse tree needs (a data-modifying WITH, EXPLAIN ANALYZE of a write and
 * SELECT ... FOR UPDATE are writes; SELECT INTO creates a table). */
typedef enum QrSqlAccess {
    QR_SQL_ACCESS_READ = 1,   /* SELECT, VALUES, EXPLAIN, SHOW, SET, transactions, COPY TO */
    QR_SQL_ACCESS_WRITE = 2,  /* + INSERT, UPDATE, DELETE, MERGE, COPY FROM */
    QR_SQL_ACCESS_SCHEMA = 3, /* + anything else: CREATE, DROP, ALTER, TRUNCATE, SELECT INTO */
} QrSqlAccess;

/* Let the session run only statements needing at most `max` (new sessions
 * may do everything).  The engine checks every statement when it executes,
 * before it touches anything: over READ fails with 25006
 * read_only_sql_transaction ("cannot execute DELETE in a read-only
 * transaction"), over WRITE with 42501 insufficient_privilege.  `hint`
 * (borrowed, must outlive the session; may be NULL) is those errors' hint:
 * how to get more. */
void qr_sql_session_limit_access(QrSqlSession *s, QrSqlAccess max, const char *hint);

/* The access the statements of a query string need, together (the most of
 * them), from libpg_query's parse of each: to refuse a query string before
 * any of it runs.  Errors: those of parsing (42601 with the position,
 * 54001); *need is then untouched. */
int qr_sql_access_needed(const char *sql, size_t len, QrSqlAccess *need, QrError *err);

/* Settings (SET / SHOW; names are case-insensitive).  Known ones are
 * validated: statement_timeout (ms or '5s'), quarry.access_path
 * (auto|text|btree|scan|check|full), quarry.mem_cap (bytes per query),
 * plus client_encoding, DateStyle, TimeZone, search_path,
 * application_name, extra_float_digits... kept as text.  Unknown names
 * without a dot are QR_EINVAL (42704); "ext.name" custom settings are
 * accepted as PostgreSQL does.  qr_sql_session_get returns NULL for an unset
 * unknown name; the string is valid until the next set. */
int qr_sql_session_set(QrSqlSession *s, const char *name, const char *value, QrError *err);
const char *qr_sql_session_get(const QrSqlSession *s, const char *name);
/* qr_sql_value_text under the session's output settings: with
 * bytea_output = escape a bytea prints in escape form ("ab\\\001"), as
 * PostgreSQL's byteaout; every other value as qr_sql_value_text.  s may be
 * NULL (the defaults). */
void qr_sql_session_value_text(const QrSqlSession *s, const QrSqlValue *v, QrBuf *out);

/* ---- statements ----------------------------------------------------------- */

/* A statement's span inside a query string (bytes). */
typedef struct QrSqlSpan {
    size_t offset, len;
} QrSqlSpan;

/* Split a query string into statements (libpg_query's parser-based split,
 * so strings, comments and dollar quotes are handled).  Empty statements are
 * dropped; *n may be 0.  *spans is qr_malloc'd (qr_free it).  Syntax errors
 * are reported here with their position. */
int qr_sql_split(const char *sql, size_t len, QrSqlSpan **spans, int *n, QrError *err);
/* Mark a statement failed outside the engine (a qr_sql_split syntax error,
 * a protocol error): inside a transaction block the session turns 'E'
 * (25P02 until ROLLBACK), as when execution fails.  NULL is a no-op. */
void qr_sql_session_fail(QrSqlSession *s);

/* Characters (UTF-8 code points) in the first n bytes of text. */
int64_t qr_sql_utf8_chars(const char *text, size_t n);

/* A result column (RowDescription). */
typedef struct QrSqlColumn {
    const char *name;   /* output name ("count", "?column?" as PostgreSQL) */
    QrSqlType type;
    uint32_t table_oid; /* 0 unless a plain table column */
    int16_t attnum;     /* 0 unless a plain table column */
    int32_t typmod;     /* -1 */
} QrSqlColumn;

typedef struct QrSqlStmt QrSqlStmt;

/* Parse and analyze ONE statement (text need not be NUL-terminated).
 * param_oids[0..n_param_oids) are the types the client declared (0 =
 * infer); other $n are inferred from their context (compared with a
 * column: its type; otherwise text).  Statements are cached per session by
 * text and declared types, so preparing the same text again is cheap and
 * returns the same statement with one more reference.  Errors: syntax
 * (42601), unknown table / column / function, unsupported constructs. */
int qr_sql_prepare(QrSqlSession *s, const char *sql, size_t len, const uint32_t *param_oids,
                   int n_param_oids, QrSqlStmt **out, QrError *err);
void qr_sql_stmt_unref(QrSqlStmt *st); /* NULL is a no-op */
/* One more reference (a portal keeps its statement while it runs). */
void qr_sql_stmt_ref(QrSqlStmt *st);

/* Number of $n parameters and the OID of parameter i (0-based). */
int qr_sql_stmt_n_params(const QrSqlStmt *st);
uint32_t qr_sql_stmt_param_oid(const QrSqlStmt *st, int i);
/* Result columns (NoData when *n_cols == 0: the statement returns no rows). */
void qr_sql_stmt_columns(const QrSqlStmt *st, const QrSqlColumn **cols, int *n_cols);
/* "SELECT", "INSERT", "BEGIN"... (the command tag's first word(s)). */
const char *qr_sql_stmt_kind(const QrSqlStmt *st);
/* The statement's text (borrowed, valid while st is referenced), *len bytes. */
const char *qr_sql_stmt_text(const QrSqlStmt *st, size_t *len);
/* The kind of what a statement runs when executed now: as qr_sql_stmt_kind,
 * except that EXECUTE name is the named statement's kind ("INSERT"...), so a
 * role check sees the write behind it. */
const char *qr_sql_stmt_kind_in(QrSqlSession *s, const QrSqlStmt *st);
/* The columns a statement returns when executed now: as
 * qr_sql_stmt_columns, except that FETCH returns its cursor's current
 * columns (a cursor of that name may have been declared since prepare). */
void qr_sql_stmt_columns_in(QrSqlSession *s, const QrSqlStmt *st, const QrSqlColumn **cols,
                            int *n_cols);

/* ---- named statements and cursors ------------------------------------------
 * One namespace per session for SQL PREPARE and the protocol's named Parse,
 * as in PostgreSQL (EXECUTE runs a Parse'd statement, Bind a PREPAREd one,
 * DEALLOCATE and Close drop either).  SQL cursors (DECLARE) are portals the
 * protocol can Describe and Close by name. */

/* Register st under name (the session takes its own reference); 42P05 when
 * the name is taken. */
int qr_sql_named_add(QrSqlSession *s, const char *name, QrSqlStmt *st, QrError *err);
/* The statement of a name (borrowed until it is dropped), NULL if none. */
QrSqlStmt *qr_sql_named_get(QrSqlSession *s, const char *name);
/* Drop a name; false when there was none. */
bool qr_sql_named_drop(QrSqlSession *s, const char *name);
/* A declared cursor's columns (borrowed until it closes) and whether it is
 * BINARY; false when no cursor has the name. */
bool qr_sql_cursor_columns(QrSqlSession *s, const char *name, const QrSqlColumn **cols,
                           int *n_cols, bool *binary);
/* Close a cursor; false when there was none. */
bool qr_sql_cursor_close(QrSqlSession *s, const char *name);

/* Bound parameter values (Bind).  values[i] NULL = SQL NULL.  formats: NULL
 * = all text; n_formats 1 = one code for all; else one per parameter
 * (0 text, 1 binary: PostgreSQL's send formats for int2/4/8, float4/8, bool,
 * text/varchar, timestamp(tz) int64 microseconds since 2000-01-01). */
typedef struct QrSqlParams {
    int n;
    const char *const *values;
    const int *lengths;
    const int16_t *formats;
    int n_formats;
} QrSqlParams;

/* ---- results -------------------------------------------------------------- */

typedef enum QrSqlResultKind {
    QR_SQL_RES_COMMAND, /* no rows: tag only ("CREATE TABLE", "INSERT 0 3") */
    QR_SQL_RES_ROWS,    /* rows: RowDescription + DataRows + tag ("SELECT 5") */
    QR_SQL_RES_COPY_IN, /* COPY FROM STDIN started: send CopyInResponse, then feed
                           qr_sql_copy_data / _done / _fail */
    QR_SQL_RES_COPY_OUT,/* COPY TO STDOUT: rows to send as CopyData lines
                           (qr_sql_copy_row), then the tag "COPY n" */
    QR_SQL_RES_EMPTY,   /* an empty query (EmptyQueryResponse) */
} QrSqlResultKind;

/* BINARY is PostgreSQL's binary COPY format (signature, tuples of length-prefixed
 * send-format values); the PG port encodes it, COPY FROM parses it in the engine. */
typedef enum QrSqlCopyFormat { QR_SQL_COPY_TEXT, QR_SQL_COPY_CSV, QR_SQL_COPY_BINARY } QrSqlCopyFormat;

typedef struct QrSqlNotice {
    const char *severity; /* "NOTICE", "WARNING", "INFO" */
    char sqlstate[6];
    const char *message;
    const char *detail;   /* may be NULL */
} QrSqlNotice;

typedef struct QrSqlResult {
    QrSqlResultKind kind;
    char tag[64];            /* command tag, e.g. "SELECT 5", "INSERT 0 3", "COPY 10" */
    int n_cols;
    QrSqlColumn *cols;       /* ROWS, COPY_IN (target columns), COPY_OUT */
    uint64_t n_rows;
    QrSqlValue *vals;        /* n_rows * n_cols, row-major */
    uint64_t pos;            /* next row qr_sql_result_fetch returns */
    QrSqlCopyFormat copy_format;
    char copy_delim;         /* '\t' text, ',' csv */
    bool copy_header;        /* CSV HEADER */
    const char *copy_null;   /* NULL marker ("\\N" text, "" csv) */
    const char *copy_relation; /* COPY_IN / COPY_OUT of a table: its name (error context) */
    int n_notices;
    QrSqlNotice *notices;
    double took_ms;
    struct QrArena *arena;   /* owns everything above */
    const char *plan;        /* SELECT / EXPLAIN / UPDATE / DELETE: the table accesses run,
                                "docs:pk, companies:full" ("stats": column statistics),
                                for query histories; NULL when no table was read */
    QrSqlStmt *stmt;         /* holds one reference (values and names may borrow the
                                statement's text and parse tree); NULL for COPY results */
    bool binary;             /* FETCH from a BINARY cursor: without a client's choice of
                                formats (the simple protocol) values go out in binary */
} QrSqlResult;

/* Execute a prepared statement (its parameters bound).  *out gets a result
 * on success (kind as above); on error *out is NULL, and a session in a
 * transaction block turns 'E'.  Cancellation, statement_timeout and the
 * memory cap apply. */
int qr_sql_execute(QrSqlSession *s, QrSqlStmt *st, const QrSqlParams *params,
                   QrSqlResult **out, QrError *err);
/* Prepare (uncached) and execute one statement without parameters: the
 * simple protocol's per-statement step.  An empty text gives RES_EMPTY. */
int qr_sql_exec(QrSqlSession *s, const char *sql, size_t len, QrSqlResult **out, QrError *err);
void qr_sql_result_free(QrSqlResult *r); /* NULL is a no-op */

/* Next rows for an Execute with a row limit: *rows points at up to `max`
 * rows (max 0 = all remaining) from r->pos, *n how many; r->pos advances.
 * Returns true while rows remain after this batch (PortalSuspended). */
bool qr_sql_result_fetch(QrSqlResult *r, uint64_t max, const QrSqlValue **rows, uint64_t *n);

/* ---- COPY ----------------------------------------------------------------- */

/* After a COPY_IN result: feed data in any chunking (lines may span chunks),
 * then done (returns the "COPY n" result; the rows are committed, or joined
 * to the open transaction) or fail (discards everything, with the client's
 * message).  Bad rows fail with the line number in QrError.line. */
int qr_sql_copy_data(QrSqlSession *s, const char *data, size_t len, QrError *err);
int qr_sql_copy_done(QrSqlSession *s, QrSqlResult **out, QrError *err);
void qr_sql_copy_fail(QrSqlSession *s, const char *message);
bool qr_sql_copy_active(const QrSqlSession *s);

/* One row of a COPY_OUT (or any ROWS) result in the result's text or CSV
 * format, with the trailing newline (BINARY results are the caller's to
 * encode: the PG port does). */
void qr_sql_copy_row(const QrSqlResult *r, uint64_t row, QrBuf *out);
/* The header line of a COPY_OUT result with HEADER in CSV (the column
 * names, quoted where CSV needs it, with the newline); appends nothing
 * otherwise. */
void qr_sql_copy_header(const QrSqlResult *r, QrBuf *out);

#endif
