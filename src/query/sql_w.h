/*
 * sql_w.h — private to the SQL write side in query/ (sql_utility.c,
 * sql_ddl.c, sql_dml.c, sql_copy.c, sql_txn.c, sql_catalog.c): the COPY
 * text/CSV codec, value coercion from SQL text to a field's JSON form, and
 * the transaction write buffer.  Sections follow the files.
 *
 * Layer: query/.  Calls the base kit, schema.h and cJSON.
 */
#ifndef QR_SQL_W_H
#define QR_SQL_W_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/sql_int.h"
#include "store/buf.h"
#include "store/error.h"
#include "store/schema.h"

/* ---- sql_copy.c: the COPY text and CSV formats ---- */

/* Options of one COPY, PostgreSQL's defaults: text format with tab and
 * "\N", CSV with ',', '"', and NULL as an unquoted empty field. */
typedef struct CopyFmt {
    bool csv;
    bool binary;          /* FORMAT binary (the text options do not apply) */
    bool header;          /* CSV: first line is a header (skipped on input) */
    char delim;
    char quote;           /* CSV only */
    char escape;          /* CSV only (default: quote) */
    char null_str[64];    /* the NULL marker */
} CopyFmt;

void copy_fmt_init(CopyFmt *f, bool csv);

/* One input row: field i is vals[i] (NUL-terminated, len lens[i]) or NULL
 * for SQL NULL.  Borrowed for the duration of the callback.  `line` is the
 * 1-based input line the row starts on.  A non-zero return stops reading
 * and is returned by copy_reader_feed/finish. */
typedef int (*CopyRowFn)(void *ctx, int n, char **vals, size_t *lens, int64_t line,
                         QrError *err);

/* Incremental reader: bytes go in as they arrive (any split, e.g. CopyData
 * messages), complete rows come out through the callback.  The text
 * format's "\." end marker ends input; bytes after it are ignored. */
typedef struct CopyReader {
    CopyFmt fmt;
    CopyRowFn fn;
    void *ctx;            /* borrows */
    QrBuf rec;            /* owns: bytes of the record being assembled */
    bool in_quote;        /* CSV: the scan is inside a quoted field */
    bool escaped;         /* text: the last byte fed was an unpaired backslash */
    int64_t line;         /* 1-based line the current record starts on */
    int64_t lines_seen;   /* newlines consumed so far */
    bool header_done;
    bool ended;           /* "\." seen */
    int64_t rows;         /* rows delivered */
    QrBuf field;          /* owns: decoded fields of one record, NUL-separated */
    char **vals;          /* owns (array only) */
    size_t *lens;
    int cap_vals;
} CopyReader;

void copy_reader_init(CopyReader *r, const CopyFmt *fmt, CopyRowFn fn, void *ctx);
int copy_reader_feed(CopyReader *r, const char *data, size_t len, QrError *err);
/* End of input: a last record without a newline is delivered; an open CSV
 * quote is an error naming the line. */
int copy_reader_finish(CopyReader *r, QrError *err);
void copy_reader_free(CopyReader *r);

/* Append one output row (NULL entries are SQL NULL) in the format, with
 * the newline. */
void copy_write_row(QrBuf *out, const CopyFmt *fmt, int n, const char *const *vals,
                    const size_t *lens);

/* Parse COPY options from the CopyStmt's "options" list (cJSON array of
 * DefElem nodes): format, header, delimiter, null, quote, escape.
 * Unknown options are 0A000 / 42601 errors naming them. */
int copy_fmt_from_options(CopyFmt *f, const struct cJSON *options, QrError *err);

/* ---- sql_dml.c: values ---- */

/* Coerce an SQL value to the JSON stored for a field of type t, as
 * PostgreSQL's assignment casts do: numbers between int and float (floats
 * rounded to integers), text parsed by the target type (integers, floats,
 * booleans 't'/'yes'/'on'/'1'..., ISO 8601 timestamps), any value to text.
 * NULL gives a JSON null.  *out is a new cJSON node (caller frees).
 * Errors: 22P02 invalid_text_representation / 22003 out of range / 42804
 * datatype_mismatch, naming the column. */
int sqlw_value_to_cjson(QrFieldType t, const char *col, const QrSqlValue *v,
                        struct cJSON **out, QrError *err);

/* ---- sql_txn.c: the session's write buffer and transaction block ---- */

/* One buffered write.  Applied in order at COMMIT (or at the end of an
 * autocommit statement) under one process-wide lock, after every
 * must_be_new key was checked again, so two SQL sessions' commits never
 * interleave and a unique violation found late applies nothing. */
typedef struct TxnOp {
    char table[QR_NAME_MAX + 1];
    bool is_delete;
    bool must_be_new;      /* plain INSERT: the key must not exist at apply time */
    char *key;             /* owns: primary key as JSON text */
    char *doc;             /* owns: the document (puts), NULL for deletes */
    size_t doc_len;
    uint64_t hash;         /* of (table, key) */
    bool first;            /* no earlier op of the batch has this (table, key) */
} TxnOp;

struct CopyIn;

/* The utility side's per-session state (QrSqlSession.u_state). */
typedef struct SqluState {
    bool in_block;         /* BEGIN seen (txn_status 'T' or 'E') */
    TxnOp *ops;            /* owns */
    int n_ops, cap_ops;
    int *slots;            /* owns: open addressing (table, key) -> index of its
                              last op, -1 empty; n_slots a power of two > 2 n_ops */
    int n_slots;
    int stmt_start;        /* ops of the running statement start here */
    struct CopyIn *copy;   /* owns: a COPY FROM STDIN in progress, or NULL */
    char (*held)[QR_NAME_MAX + 1]; /* owns: tables this statement holds a reference
                              on (qr_table_acquire), released when it ends */
    int n_held, cap_held;
} SqluState;

/* The session's state, created on first use (NULL on OOM, error set). */
SqluState *sqlu_state(QrSqlSession *s, QrError *err);
/* Buffer a put / delete (copies the strings). */
int txn_put(SqluState *st, const char *table, const char *key, const char *doc, size_t doc_len,
            bool must_be_new, QrError *err);
int txn_delete(SqluState *st, const char *table, const char *key, QrError *err);
/* The last buffered op for (table, key) or NULL: read-your-writes for key
 * lookups (a delete op means "gone"). */
const TxnOp *txn_find(const SqluState *st, const char *table, const char *key);
/* Statement boundaries: begin marks where its ops start; end applies them
 * when no block is open (autocommit) or keeps them; failure discards the
 * statement's ops (and, inside a block, the session turns 'E'). */
void txn_stmt_begin(SqluState *st);
int txn_stmt_end(QrSqlSession *s, SqluState *st, QrError *err);
void txn_stmt_fail(SqluState *st);
/* BEGIN / COMMIT / ROLLBACK statements: fill the tag. */
int txn_exec(SqlCtx *cx, SqluState *st, const char *kind, char *tag, size_t tag_len);
/* Drop every buffered op. */
void txn_discard(SqluState *st);

/* ---- sql_utility.c: shared helpers ---- */

/* Rows being collected for a result (arena memory). */
typedef struct SqlwRows {
    int n_cols;
    uint64_t n, cap;
    SqlValue *vals;        /* n * n_cols */
} SqlwRows;
/* A new row slot (zeroed) or NULL with err set. */
SqlValue *sqlw_rows_add(SqlCtx *cx, SqlwRows *rs);
/* Hand collected rows to a ROWS result with these columns. */
void sqlw_rows_result(QrSqlResult *res, SqlwRows *rs, QrSqlColumn *cols, int n_cols);
/* Columns in the arena: names and types. */
QrSqlColumn *sqlw_cols(SqlCtx *cx, int n, const char *const *names, const QrSqlType *types);
/* The table named by a RangeVar body ("relname", "schemaname" public or
 * absent); 42P01 at its location when missing.  The statement holds a
 * reference on it (a DROP elsewhere waits) until sqlw_release_all. */
int sqlw_table(SqlCtx *cx, const cJSON *rangevar, QrTable **out);
/* Take / give back a reference by name for the running statement. */
int sqlw_acquire(SqlCtx *cx, const char *name, QrTable **out, QrError *err);
void sqlw_release(QrSqlSession *s, const char *name);
void sqlw_release_all(QrSqlSession *s);
/* Text of an A_Const / String / Integer / Float / Boolean node into the
 * arena (NULL for a NULL constant or another node). */
const char *sqlw_const_text(SqlCtx *cx, const cJSON *n);

/* ---- sql_ddl.c: SQL metadata beside a table ----
 *
 * What the storage schema cannot say is kept in "sql.json" in the table's
 * directory, written atomically by DDL:
 *   {"pk_type": "int8",                       primary key type: int8 | text
 *    "columns": {"n": {"type": "int4",        declared type (pg_type name)
 *                      "typmod": -1,          varchar(n): n + 4, as PostgreSQL
 *                      "not_null": true,
 *                      "default": "0"}},      DEFAULT expression text
 *    "indexes": {"t_n_idx": "n"}}             B-tree index names -> column
 * Tables made by import or HTTP have none: their primary key type follows
 * the values given, and column types follow the storage types. */

/* Load a table's SQL metadata (an empty object when there is none);
 * caller cJSON_Deletes.  NULL only on OOM. */
cJSON *sqlw_meta_load(QrDb *db, const char *table);
int sqlw_meta_save(QrDb *db, const char *table, const cJSON *meta, QrError *err);
/* The column's entry or NULL. */
const cJSON *sqlw_meta_col(const cJSON *meta, const char *col);
/* The declared primary key type: QR_SQL_INT8, QR_SQL_TEXT, or
 * QR_SQL_UNKNOWN (no metadata: follow the value). */
QrSqlType sqlw_pk_type(const cJSON *meta);

/* Fill in the integer constants libpg_query 15-4.0.0 leaves out of its JSON
 * (zero and negative "ival"), from the statement text at each A_Const's
 * location.  Idempotent; every parse tree should pass through it once. */
void sqlw_fix_ints(cJSON *n, const char *sql, size_t len);

/* ---- entry points per statement family ---- */
int sqlw_ddl_exec(SqlCtx *cx, const cJSON *body, const char *tag, QrSqlResult *res);
int sqlw_insert(SqlCtx *cx, SqluState *st, const cJSON *body, QrSqlResult *res);
int sqlw_update(SqlCtx *cx, SqluState *st, const cJSON *body, QrSqlResult *res);
int sqlw_delete(SqlCtx *cx, SqluState *st, const cJSON *body, QrSqlResult *res);
int sqlw_truncate(SqlCtx *cx, SqluState *st, const cJSON *body, QrSqlResult *res);
int sqlw_copy_exec(SqlCtx *cx, SqluState *st, const cJSON *body, QrSqlResult *res);
/* INSERT as COPY uses it: `b` holds "relation" (RangeVar body) and
 * "cols" (String or ResTarget nodes); rows of src[n_target] values.
 * The InsertCx lives in cx->arena; close frees what it owns. */
typedef struct InsertCx InsertCx;
int sqlw_insert_open(SqlCtx *cx, const cJSON *b, InsertCx **out);
int sqlw_insert_values(SqlCtx *cx, SqluState *st, InsertCx *ic, const SqlValue *src);
int sqlw_insert_n_target(const InsertCx *ic);
/* The SQL type of target column k. */
QrSqlType sqlw_insert_target_type(const InsertCx *ic, int k);
uint64_t sqlw_insert_count(const InsertCx *ic);
void sqlw_insert_close(InsertCx *ic);
/* RETURNING columns of INSERT / UPDATE / DELETE (prepare). */
int sqlw_dml_describe(SqlCtx *cx, const cJSON *body, QrSqlColumn **cols, int *n_cols);
/* Free a COPY in progress. */
void sqlw_copy_free(SqluState *st);

/* ---- sql_catalog.c ---- */
/* The settings Quarry knows, with PostgreSQL-like defaults (SHOW ALL,
 * pg_settings, RESET). */
typedef struct SqlwSettingDef {
    const char *name;
    const char *dflt;
    const char *desc;
} SqlwSettingDef;
extern const SqlwSettingDef SQLW_SETTINGS[];
extern const int SQLW_N_SETTINGS;
/* A setting's current value in the session (its default when unset). */
const char *sqlw_setting(const QrSqlSession *s, const char *name);

/* ---- sql_seq.c: sequences ---- */
/* The hidden primary key of a table made without one (metadata
 * "hidden_pk": true): int8 values of the table's own internal sequence,
 * not in SELECT *, the catalog or INSERT's column list. */
#define SQLW_ROWID "_rowid"
/* sql_rekey.c: ALTER TABLE ADD PRIMARY KEY (col) on a table with a hidden
 * row id: its documents are rekeyed by col (23502 on a NULL, 23505 on a
 * duplicate, the table untouched then).  Releases the statement's
 * reference on t, which must not be used afterwards. */
int sqlw_add_primary_key(SqlCtx *cx, QrTable *t, const char *col, int loc);
/* True when the metadata says the primary key is a hidden row id. */
bool sqlw_hidden_pk(const cJSON *meta);
int sqlseq_create(SqlCtx *cx, const cJSON *body, QrSqlResult *res);
int sqlseq_alter(SqlCtx *cx, const cJSON *body, QrSqlResult *res);
int sqlseq_drop(SqlCtx *cx, const cJSON *body, QrSqlResult *res);
/* Create the sequence of a SERIAL / identity column (or of a hidden row id:
 * internal) of `table`, with identity options (DefElem list, may be NULL);
 * its name ("<table>_<col>_seq") into seq_out. */
int sqlseq_for_column(SqlCtx *cx, const char *table, const char *col, const char *pg_type,
                      const cJSON *options, bool internal, char *seq_out, size_t seq_len);
/* The parse tree of nextval('<seq>'::regclass) (caller cJSON_Deletes). */
cJSON *sqlseq_default_tree(const char *seq);
/* nextval, currval, setval, lastval (called by the catalog's function hook). */
bool sqlseq_func_known(const char *name);
int sqlseq_func_call(SqlCtx *cx, const char *name, int n_args, const SqlValue *args,
                     SqlValue *out);

#endif
