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
    int absorbed;          /* 0, or n: the block's n-th rebuild copied it into its spare
                              (SqluState.rebuilds[n - 1]): no read, key lookup or COMMIT
                              applies it to the table again */
} TxnOp;

struct CopyIn;
struct Snapshot;

/* How long DROP waits for the statements using the table (then 53300-like
 * QR_EBUSY naming how many). */
#define SQLW_DROP_WAIT_MS 10000

/* Isolation levels (sql_isolation.c). */
enum { SQLI_READ_COMMITTED = 0, SQLI_REPEATABLE_READ = 1 };

/* A REPEATABLE READ block's snapshot of one table, pinned at its first read. */
typedef struct SqliPin {
    char table[QR_NAME_MAX + 1];
    const void *tab;       /* the index/ Table it was taken of (identity only) */
    uint64_t schema_fp;    /* fingerprint of the schema's first n_fields fields it was
                              taken under (fields added since keep the snapshot) */
    int n_fields;
    struct Snapshot *snap; /* owns one reference */
} SqliPin;

/* A block's overlay snapshot of one table (sql_own_writes.c), valid while
 * its base snapshot and the write buffer are the ones it was built from. */
typedef struct SqloCache {
    char table[QR_NAME_MAX + 1];
    const void *tab;       /* the index/ Table (identity only) */
    uint64_t base_version; /* version of the snapshot it overlays */
    uint64_t ops_gen;      /* SqluState.ops_gen it was built at */
    int lim;               /* ops[0, lim) it holds */
    struct Snapshot *snap; /* owns one reference */
} SqloCache;


/* A table a block dropped: its name, and which table it was (the identity
 * of its directory), so that COMMIT drops no other table made under the
 * name meanwhile. */
typedef struct SqldDrop {
    char name[QR_NAME_MAX + 1];
    uint64_t ident;
} SqldDrop;

/* A table a block rebuilt (ADD PRIMARY KEY, a full-text CREATE INDEX:
 * sql_rekey.c) or created again after dropping it: its copy (or new table),
 * a spare table the session reads and writes in the table's place until
 * COMMIT exchanges the two (sql_txn_rebuild.c).  A table rebuilt twice has
 * two entries, the newer one copied from the older's spare. */
typedef struct SqldRebuild {
    char table[QR_NAME_MAX + 1];
    char id[QR_NAME_MAX + 1];   /* the spare (quarry.h qr_spare_*) */
    QrTable *view;              /* owns: the spare's handle, named `table` */
    uint64_t base_ident;        /* the table's directory when its first copy was taken */
    uint64_t base_mark;         /* its write mark then: COMMIT finds another, 40001 */
    char *drop_seqs;            /* owns: sequences COMMIT drops ('\n'-separated: the row
                                   id's, the old table's), or NULL */
    char *new_seqs;             /* owns: sequences a rollback of the entry drops (those of
                                   the new table), or NULL */
    bool replaces;              /* CREATE TABLE of a name the block dropped: drop, below,
                                   was the block's drop of it, drops[drop_at] until then */
    SqldDrop drop;
    int drop_at;
    bool claimed;               /* COMMIT claimed the table (newest entry of each table) */
    bool done;                  /* COMMIT exchanged it */
} SqldRebuild;

/* A savepoint: its name and the block's buffered ops when it was set. */
typedef struct SvpMark {
    char name[64];
    int n_ops;
    int n_undo;            /* undo statements of the block by then */
    int n_drops;           /* tables the block had dropped by then */
    int n_rebuilds;        /* tables the block had rebuilt by then */
    cJSON *meta;           /* owns: SqluState.meta by then (NULL: none) */
} SvpMark;

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
    int iso;               /* the block's isolation level (SQLI_*) */
    bool iso_used;         /* the block read or wrote: its level is fixed */
    SqliPin *pins;         /* owns: REPEATABLE READ snapshots of the block */
    int n_pins, cap_pins;
    SvpMark *svps;         /* owns: the block's savepoints, oldest first */
    int n_svps, cap_svps;
    uint64_t ops_gen;      /* bumped whenever ops change (pushed or discarded) */
    bool in_stmt;          /* a write-side statement runs: reads see ops[0, stmt_start) */
    char dml_target[QR_NAME_MAX + 1]; /* UPDATE/DELETE finding its rows: this table is
                              read without the overlay (dml_rows merges by key) */
    SqloCache *ovl;        /* owns: overlay snapshots of the block */
    int n_ovl, cap_ovl;
    char **undo;           /* owns: statements dropping what the block created, oldest
                              first (sql_txn_ddl.c) */
    int n_undo, cap_undo;
    bool undoing;          /* running undo statements: their DDL takes effect at once */
    char creating[QR_NAME_MAX + 1]; /* the table the running CREATE TABLE makes in the block,
                              or whose B-tree on creating_col the running CREATE INDEX makes */
    char creating_col[QR_NAME_MAX + 1];
    struct SqldDrop *drops; /* owns: tables the block dropped, dropped for real at
                              COMMIT and hidden from the session until then */
    int n_drops, cap_drops;
    cJSON *meta;           /* owns: metadata the block changed (ALTER TABLE, DROP INDEX),
                              published at COMMIT: {table: {"base": the committed one
                              when first staged, "meta": the block's, "drop_btrees":
                              [columns whose B-tree goes at COMMIT]}}, or NULL */
    SqldRebuild *rebuilds; /* owns: tables the block rebuilt, oldest first */
    int n_rebuilds, cap_rebuilds;
    uint64_t rr_start;     /* REPEATABLE READ: the SQL commit number at the block's start */
    bool rr_registered;    /* ... counted among the open blocks (sql_conflict.c) */
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
/* The process-wide lock SQL commits are ordered and published under
 * (REPEATABLE READ takes its snapshots of every table under it). */
void txn_lock(void);
void txn_unlock(void);
/* Drop the buffered ops of one table (a COMMIT that drops it). */
void txn_discard_table(SqluState *st, const char *table);
/* A rebuild (the block's by-th) copied the table with the block's writes to
 * it: mark them absorbed.  txn_unabsorb: those of rebuilds by and later are
 * the table's writes again (the rebuild was rolled back).  txn_drop_absorbed:
 * free them (COMMIT, where the spares carry them). */
void txn_absorb(SqluState *st, const char *table, int by);
void txn_unabsorb(SqluState *st, int by);
void txn_drop_absorbed(SqluState *st);

/* ---- sql_isolation.c: isolation levels ---- */

/* "read committed" / "repeatable read". */
const char *sqli_level_name(int level);
/* Parse a level named in SQL (any case); READ UNCOMMITTED is READ
 * COMMITTED.  SERIALIZABLE: 0A000 with a hint; other text: 22023 naming
 * `param`. */
int sqli_level_parse(const char *v, const char *param, int *level, QrError *err);
/* BEGIN [ISOLATION LEVEL ...]: the block's level from its options (a
 * TransactionStmt "options" list, may be NULL) or the session default. */
int sqli_begin(SqlCtx *cx, SqluState *st, const cJSON *options);
/* SET TRANSACTION / SET SESSION CHARACTERISTICS AS TRANSACTION (name as
 * libpg_query gives it, args the DefElem list) or SET transaction_isolation
 * / default_transaction_isolation = value (args NULL). */
int sqli_set(SqlCtx *cx, SqluState *st, const char *name, const cJSON *args, const char *value);
/* The block ended (COMMIT / ROLLBACK): release its snapshots. */
void sqli_end(QrSqlSession *s, SqluState *st);
/* Forget the block's snapshot of the table behind handle t (a rebuild's
 * spare about to be closed); its next read takes one anew. */
void sqli_unpin(SqluState *st, const QrTable *t);
/* A write in the block fixes its level too. */
void sqli_mark_used(QrSqlSession *s, SqluState *st);
void sqli_session_free(SqluState *st);

/* ---- sql_txn_ddl.c: CREATE TABLE / CREATE INDEX undone by ROLLBACK ---- */

/* Before a CreateStmt or IndexStmt (tag) in a block: what drops what it
 * will create into undo (a DROP TABLE, or the B-tree's undo entry; empty
 * when it creates nothing: outside a block, IF NOT EXISTS of an existing
 * object, a B-tree that exists, full-text analysis). */
int sqld_before_create(SqlCtx *cx, SqluState *st, const char *tag, const cJSON *body,
                       char *undo, size_t undo_cap);
/* After the statement succeeded: remember undo (a no-op when empty). */
int sqld_created(SqlCtx *cx, SqluState *st, const char *undo);
/* Is `table` one the session's open block created, dropped again by every
 * rollback still possible (no savepoint set since its CREATE)?  ADD COLUMN
 * changes such a table's storage at once, and is staged on any other. */
bool sqld_goes_with_block(const QrSqlSession *s, const char *table);
/* Run the undo statements after the first `mark` ones, newest first. */
void sqld_undo_to(QrSqlSession *s, SqluState *st, int mark);
/* The block committed: forget them (other sessions see its new tables). */
void sqld_forget(QrSqlSession *s, SqluState *st);
/* DROP TABLE in a block: remember `table` to drop at COMMIT; from now on the
 * session sees it gone (sqld_hidden). */
int sqld_defer_drop(SqlCtx *cx, SqluState *st, const char *table);
/* Is the B-tree on table.col one another session's open block made (its
 * index is that block's until COMMIT: the catalog does not show it)? */
bool sqld_btree_of_other(const QrSqlSession *s, const char *table, const char *col);
/* Is `table` hidden from the session: dropped by its open block, or created
 * by another session's open block?  (false for s NULL) */
bool sqld_hidden(const QrSqlSession *s, const char *table);
/* Is `table` dropped by the session's open block? */
bool sqld_dropped(const QrSqlSession *s, const char *table);
/* Double the room for drops; false without memory. */
bool sqld_drops_grow(SqluState *st);
/* Forget the block's drops after the first `mark` (ROLLBACK [TO]). */
void sqld_drops_to(QrSqlSession *s, SqluState *st, int mark);
/* The table's metadata as the open block staged it, or NULL. */
const cJSON *sqld_meta_staged(const QrSqlSession *s, const char *table);
/* Stage meta (copied) as the block's metadata of table (sqlw_meta_save in
 * a block). */
int sqld_meta_stage(SqlCtx *cx, SqluState *st, const char *table, const cJSON *meta);
/* A change of table's metadata that takes effect now (its storage changed
 * with it: ADD COLUMN, a B-tree CREATE INDEX outside a block): edit applied to the
 * committed sql.json, saved, and to the block's staged copy and its base. */
int sqld_meta_now(SqlCtx *cx, const char *table, void (*edit)(cJSON *meta, const void *arg),
                  const void *arg);
/* ADD COLUMN in a block on a table older than it: the storage field f is
 * added now (or, adopt, an unshown one of a rolled back ADD COLUMN is taken
 * over) but listed as pending in the committed sql.json, so only the block
 * sees it (edit puts its entry into the block's staged metadata); COMMIT
 * publishes the entry with the block's rows, a rollback forgets it. */
int sqld_add_column(SqlCtx *cx, SqluState *st, QrTable *t, const QrField *f, bool adopt,
                    void (*edit)(cJSON *meta, const void *arg), const void *arg);
/* ADD COLUMN ... DEFAULT / NOT NULL: every row the statement sees gets the
 * column's default, dflt (a parse tree; NULL: none), evaluated per row (an
 * UPDATE t SET col = dflt into the statement's writes, which commit with
 * the column; NOT NULL checked as for any UPDATE). */
int sqld_fill_column(SqlCtx *cx, SqluState *st, const char *table, const char *col,
                     const cJSON *dflt);
/* Is table.col a column another session's open block is adding? */
bool sqld_column_of_other(const QrSqlSession *s, const char *table, const char *col);
/* DROP INDEX in a block: the B-tree on col goes at COMMIT (if no index
 * names col then), after sqld_meta_stage of the table. */
int sqld_btree_drop_later(SqlCtx *cx, SqluState *st, const char *table, const char *col);
/* Is the B-tree on table.col dropped by the session's open block? */
bool sqld_btree_dropping(const QrSqlSession *s, const char *table, const char *col);
/* The schema of `table` rebuilt now (ADD PRIMARY KEY, a full-text index, on
 * a table the block created), taking its staged definition along
 * (sqld_meta_forget_table after): no B-tree a DROP INDEX of the block drops. */
void sqld_schema_settle(const QrSqlSession *s, const char *table, QrSchema *ns);
/* A sequence the block created (ADD GENERATED AS IDENTITY): dropped again
 * by ROLLBACK.  Outside a block a no-op. */
int sqld_seq_created(SqlCtx *cx, const char *seq);
/* Savepoints: a copy of the staged metadata (NULL when none), and going
 * back to one. */
cJSON *sqld_meta_mark(const SqluState *st);
void sqld_meta_restore(QrSqlSession *s, SqluState *st, const cJSON *mark);
/* The spare the session's open block reads and writes in place of
 * `table` (its newest rebuild), or NULL. */
QrTable *sqld_view(const QrSqlSession *s, const char *table);
/* ADD PRIMARY KEY / DROP CONSTRAINT <table>_pkey / a full-text CREATE
 * INDEX in a block: the documents of t (the session's view of the table,
 * the block's writes over it, which are absorbed) are copied into a new
 * spare with schema ns, rekeyed as how says (sqlw_rebuild), meta is staged
 * as the table's metadata, and the session sees the spare from now on;
 * other sessions see the table as it was.  COMMIT exchanges them (40001
 * when anything committed to the table since the copy) and drops
 * how->drop_seq; a rollback drops the spare and how->rowid_seq. */
struct SqlwRekey;
int sqld_rebuild(SqlCtx *cx, SqluState *st, QrTable *t, const QrSchema *ns,
                 const struct SqlwRekey *how, const cJSON *meta);
/* CREATE TABLE of a name the block dropped: the new table (schema s,
 * metadata meta, its sequences new_seqs already made) is a spare the block
 * reads and writes under the name, the block's drop of the old table is
 * taken back into the entry (a rollback of the entry restores it), the
 * block's writes to the old table are absorbed, and COMMIT exchanges the
 * two and drops the old table's sequences (old_seqs). */
int sqld_replace(SqlCtx *cx, SqluState *st, const char *table, const QrSchema *s,
                 const cJSON *meta, const char *old_seqs, const char *new_seqs);
/* Drop the block's rebuilds after the first `mark` (ROLLBACK [TO], the end
 * of the block). */
void sqld_rebuilds_to(QrSqlSession *s, SqluState *st, int mark);
/* COMMIT, before the apply lock: claim every rebuilt table (waiting for its
 * users; QR_EBUSY after a while, nothing claimed then). */
int sqld_rebuilds_claim(QrSqlSession *s, SqluState *st, QrError *err);
/* COMMIT, under the apply lock, before anything is applied: 40001 when a
 * rebuilt table had a commit (or was replaced) since the block copied it;
 * then the staged metadata is written into each copy (an I/O error fails
 * the COMMIT before its commit point). */
int sqld_rebuilds_check(QrSqlSession *s, const SqluState *st, QrError *err);
/* COMMIT, under the apply lock, after the writes (into the spares)
 * committed (ok) or failed: exchange each rebuilt table with its spare
 * (its staged metadata inside), unclaim, drop what the spares then hold. */
int sqld_rebuilds_finish(QrSqlSession *s, SqluState *st, bool ok, QrError *err);
/* COMMIT's journal: an exchange item (TXNJ_SWAP) per claimed rebuild and a
 * TXNJ_DROP_SEQS per entry of an exchanged table with sequences to drop,
 * appended at items[*n] (room for 2 * st->n_rebuilds more). */
struct TxnjItem;
int sqld_rebuild_journal(QrSqlSession *s, const SqluState *st, struct TxnjItem *items, int *n,
                         QrError *err);

/* The table's staged definition is committed as it is (ADD PRIMARY KEY
 * rebuilt the table with it): nothing left to publish for it. */
void sqld_meta_forget_table(SqluState *st, const char *table);
/* The block ended (ROLLBACK, or COMMIT after sqld_meta_publish). */
void sqld_meta_forget(QrSqlSession *s, SqluState *st);
/* Does COMMIT have DDL to publish (dropped tables, staged metadata)? */
bool sqld_pending(const SqluState *st);
/* COMMIT, under the apply lock, before anything is applied: 40001 when
 * another transaction changed the metadata of a table since this block
 * staged its own. */
int sqld_meta_check(QrSqlSession *s, const SqluState *st, QrError *err);
/* Set err to 40001: another transaction `did` (e.g. "wrote to") table after
 * this one `we_did` it; returns QR_EBUSY. */
int sqld_conflict(QrError *err, const char *did, const char *table, const char *we_did);
/* COMMIT, under the apply lock: the journal's DDL items (sql.json texts,
 * B-trees and tables to drop); free with sqld_journal_free. */
struct TxnjItem;
int sqld_journal_items(QrSqlSession *s, const SqluState *st, struct TxnjItem **items, int *n,
                       QrError *err);
void sqld_journal_free(struct TxnjItem *items, int n);
/* COMMIT, under the apply lock, after the writes committed: the staged
 * metadata saved and the B-trees it no longer names dropped. */
int sqld_meta_publish(QrSqlSession *s, SqluState *st, QrError *err);
/* COMMIT, before the apply lock: claim every dropped table (waiting for its
 * users, QR_EBUSY after a while, nothing claimed then) and discard the
 * block's writes to them. */
int sqld_drops_claim(QrSqlSession *s, SqluState *st, QrError *err);
/* COMMIT, under the apply lock, after the writes committed (ok) or failed:
 * drop the claimed tables (when ok) and unclaim them all. */
void sqld_drops_finish(QrSqlSession *s, SqluState *st, bool ok, QrError *err);

/* ---- txn_journal.c: atomic commit across tables ---- */

/* A journaled DDL change of a block (txn_journal.c kinds 3-5). */
enum { TXNJ_DROP_TABLE = 3, TXNJ_META = 4, TXNJ_DROP_BTREE = 5, TXNJ_SWAP = 6,
       TXNJ_DROP_SEQS = 7 };
typedef struct TxnjItem {
    uint8_t kind;          /* TXNJ_* */
    const char *table;     /* borrows */
    const char *key;       /* borrows: the column of TXNJ_DROP_BTREE, the spare of
                              TXNJ_SWAP, else NULL */
    char *doc;             /* owns: the sql.json text of TXNJ_META, the spare's identity
                              (decimal) of TXNJ_SWAP, the '\n'-separated sequence names
                              of TXNJ_DROP_SEQS, else NULL */
    size_t doc_len;
} TxnjItem;

/* Write the transaction's ops, and its DDL (applied after them), as one
 * durable journal file (its path into path): from then on it is
 * committed; call before the first table commit, under the apply lock.
 * Errors: QR_EIO, QR_ENOMEM (nothing written). */
int txnj_write(QrDb *db, const TxnOp *ops, int n_ops, const TxnjItem *ddl, int n_ddl,
               char *path, size_t path_cap, QrError *err);
/* Every table's commit is done (or failed): remove the journal, durably,
 * before the apply lock is released. */
void txnj_done(QrDb *db, const char *path);

/* ---- sql_conflict.c: first committer wins ---- */

/* A REPEATABLE READ block starts (its first read or write) / ends. */
void sqlx_block_start(SqluState *st);
void sqlx_block_end(SqluState *st);
/* Under the apply lock, before anything is applied: 40001 when a key the
 * REPEATABLE READ block wrote was committed by SQL after the block began. */
int sqlx_check(const SqluState *st, QrError *err);
/* Under the apply lock, after every table's commit succeeded: the next
 * commit number, remembered for the keys written. */
void sqlx_committed(const SqluState *st);

/* ---- sql_own_writes.c: read your own writes ---- */

/* The snapshot a read of t in the block sees: base (whose reference this
 * takes over) with the block's buffered writes to t overlaid, or base itself
 * when there are none.  The caller owns one reference of the result.  NULL
 * with cx->err set when the overlay could not be built (I/O, memory). */
struct Snapshot *sqlo_overlay(SqlCtx *cx, SqluState *st, QrTable *t, struct Snapshot *base);
/* The block ended: drop its overlays. */
void sqlo_clear(SqluState *st);
void sqlo_session_free(SqluState *st);

/* ---- sql_savepoint.c ---- */

/* SAVEPOINT / RELEASE / ROLLBACK TO (kind as libpg_query names it:
 * TRANS_STMT_SAVEPOINT ...) of savepoint `name`: fills the tag.  Outside a
 * block 25P01; an unknown name 3B001 (the block is aborted, as after any
 * error in it). */
int svp_exec(SqlCtx *cx, SqluState *st, const char *kind, const char *name, char *tag,
             size_t tag_len);
/* The block ended: forget its savepoints. */
void svp_clear(SqluState *st);
void svp_session_free(SqluState *st);

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
 *    "indexes": {"t_n_idx": "n"},             B-tree index names -> column
 *    "pending_columns": ["c"]}                storage fields an ADD COLUMN of a
 *                                             block added: shown only once
 *                                             "columns" lists them (its COMMIT)
 * Tables made by import or HTTP have none: their primary key type follows
 * the values given, and column types follow the storage types. */

/* Load a table's SQL metadata (an empty object when there is none) as the
 * session sees it: its open block's staged copy when the block changed it
 * (sql_txn_ddl.c), else the committed sql.json; caller cJSON_Deletes.
 * NULL only on OOM.  _db: the committed one. */
cJSON *sqlw_meta_load(SqlCtx *cx, const char *table);
cJSON *sqlw_meta_load_db(QrDb *db, const char *table);
/* Save it: inside a transaction block staged until COMMIT (other sessions
 * keep seeing the committed one; ROLLBACK forgets it), otherwise written
 * now (_db: always written now, durably, by an atomic replace). */
int sqlw_meta_save(SqlCtx *cx, const char *table, const cJSON *meta);
int sqlw_meta_save_db(QrDb *db, const char *table, const cJSON *meta, QrError *err);
/* The column's entry or NULL. */
const cJSON *sqlw_meta_col(const cJSON *meta, const char *col);
/* Is the storage field col a column SQL does not show: one an ADD COLUMN
 * in a block added (listed in "pending_columns") that the metadata does
 * not list among its columns (the block has not committed, or rolled back,
 * or the server stopped first)? */
bool sqlw_col_pending(const cJSON *meta, const char *col);
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
/* Rebuild table t (the session's view of it) with schema ns and metadata
 * meta: its documents copied (how, may be NULL: keyed as they are; see
 * SqlwRekey; a new key that is NULL or repeats is 23502 / 23505 as in
 * PostgreSQL) into a spare that takes the table's place now, or, in a
 * block, at COMMIT (sqld_rebuild).  Outside a block releases the
 * statement's reference on t, which must not be used afterwards. */
typedef struct SqlwRekey {
    const char *key_col;   /* the new key, instead of the hidden row id (ADD PRIMARY KEY) */
    const char *rowid_seq; /* number the rows as a new hidden row id from this sequence
                              (DROP CONSTRAINT <table>_pkey) */
    const char *drop_seq;  /* a sequence that goes with the old table, or NULL */
    const char *drop_col;  /* a column taken out of every row (DROP COLUMN), or NULL */
    const char *rename_from, *rename_to; /* a column renamed in every row, or NULL */
} SqlwRekey;
int sqlw_rebuild(SqlCtx *cx, QrTable *t, const QrSchema *ns, const SqlwRekey *how,
                 const cJSON *meta);
/* Copy every document of from into to (one commit), rekeyed as above. */
int sqlw_rebuild_copy(SqlCtx *cx, QrTable *from, QrTable *to, const SqlwRekey *how);
/* A new spare id for a rebuild of table. */
void sqlw_spare_id(const char *table, char *out, size_t cap);
/* Write meta as the sql.json of spare id (exchanged with its documents). */
int sqlw_spare_meta(QrDb *db, const char *id, const cJSON *meta, QrError *err);
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
