/*
 * quarry.h — the engine's front door.  server/ (CLI, HTTP, PG wire) calls
 * the engine only through this header and the store/ base kit.
 *
 * Layer: query/.
 *
 * A QrDb is one data directory holding many tables:
 *
 *   <data>/QUARRY            marker file with the format version
 *   <data>/tables/<name>/    one table (index/table.h)
 *   <data>/BACKUP_INCOMPLETE only in a backup that has not finished
 *                            (query/backup.h): such a directory is refused
 *
 * Files are created mode 0600 and directories 0700: documents are private
 * to the server's user.
 *
 * Thread safety: a QrDb and its tables may be used from many threads.
 * Tables are opened on first use and stay open until qr_db_close (or
 * qr_table_drop).  QrTable pointers stay valid until then.
 */
#ifndef QR_QUARRY_H
#define QR_QUARRY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/buf.h"
#include "store/error.h"
#include "store/mem.h"
#include "store/schema.h"
#include "store/wal.h"

#define QUARRY_VERSION "0.1.0"

typedef struct QrDb QrDb;
typedef struct QrTable QrTable;
typedef struct QrStatsSource QrStatsSource;

typedef struct QrDbOpts {
    QrFsyncMode fsync;       /* default: per commit */
    uint32_t fsync_batch_ms; /* batched mode interval */
    bool background_merge;   /* default true */
    bool salvage;            /* open tables with damaged segments left out */
    bool read_only;          /* never write (quarry search): no merges, no WAL */
    bool check;              /* quarry check: read_only, a missing directory is an error
                                (not created), and B-tree side files are verified too
                                (a damaged one is an error, not left out) */
    bool open_unfinished_backup; /* qr_backup's own verification only: open a copy that
                                    still has its BACKUP_INCOMPLETE marker */
    const QrStatsSource *stats_source; /* borrows (outlives the QrDb); NULL: BM25 counts
                                          this node's documents only (see below) */
} QrDbOpts;

void qr_db_opts_default(QrDbOpts *o);
/* Open (creating if missing, unless opts->check) a data directory.  A
 * writable open restricts the directory to its owner (mode 0700; older
 * versions made it 0755).  QR_ENOTFOUND (check: no data directory),
 * QR_ECORRUPT (an interrupted backup, a bad marker), QR_EUNSUPPORTED,
 * QR_EBUSY (another process has it), QR_EIO, QR_ENOMEM. */
int qr_db_open(const char *dir, const QrDbOpts *opts, QrDb **out, QrError *err);
void qr_db_close(QrDb *db);
const char *qr_db_dir(const QrDb *db);

/* Tables. Names: [A-Za-z_][A-Za-z0-9_]* (no path tricks). */
int qr_table_create(QrDb *db, const char *name, const QrSchema *schema, QrTable **out,
                    QrError *err);
/* Open an existing table; QR_ENOTFOUND naming it when absent. */
int qr_table_get(QrDb *db, const char *name, QrTable **out, QrError *err);
int qr_table_drop(QrDb *db, const char *name, QrError *err);
/* A counter that moves with every change of the database's tables, schemas,
 * indexes and SQL metadata (create, drop, add field, CREATE/DROP INDEX,
 * ALTER): what was bound against the tables (prepared SQL) is bound again
 * when it moved.  qr_db_ddl_bump is for the layers that change metadata
 * kept beside a table (query/sql_ddl.c). */
uint64_t qr_db_ddl_generation(QrDb *db);
void qr_db_ddl_bump(QrDb *db);
/* Sorted names; *names is qr_malloc'd (free each and the array). */
int qr_table_list(QrDb *db, char ***names, int *n, QrError *err);
const char *qr_table_name(const QrTable *t);
const QrSchema *qr_table_schema(const QrTable *t);
int qr_table_add_field(QrTable *t, const QrField *f, QrError *err);
/* Replace the table's synonyms with json[0, len) (store/schema.h
 * schema_set_synonyms: groups or one-way; empty removes them); durable on
 * return, applied by every search compiled afterwards.  Errors: QR_ESYNTAX,
 * QR_EINVAL, QR_ELIMIT (naming the problem), QR_EPERM, QR_EIO, QR_ENOMEM. */
int qr_table_set_synonyms(QrTable *t, const char *json, size_t len, QrError *err);
/* The table's synonyms as compact JSON: *out owns a copy (qr_free), NULL
 * with *len 0 when there are none.  Consistent with a concurrent
 * qr_table_set_synonyms.  Errors: QR_ENOMEM. */
int qr_table_synonyms(QrTable *t, char **out, size_t *len, QrError *err);

typedef struct QrTableStats {
    uint64_t docs;        /* live documents */
    uint64_t docs_total;  /* including deleted ones not yet merged away */
    uint64_t segments, disk_bytes, wal_bytes;
    uint64_t merges_done, merges_running, commits, checkpoints;
    uint64_t mem_segments, mem_bytes; /* the in-memory tier (near-real-time segments) */
    uint64_t peak_segments;           /* most segments after a commit since the open */
    uint64_t wal_syncs;               /* WAL fdatasyncs since the open: with group commit,
                                         fewer than commits under concurrent writers */
} QrTableStats;
void qr_table_stats(QrTable *t, QrTableStats *st);

/* What opening a table found and did: a torn WAL tail (cut, or left by a
 * read-only open), what a salvage set aside (store/wal.h WalReplayStats),
 * the intact records of a last batch whose COMMIT record never made it
 * (discarded: never acknowledged), and how many damaged segments a salvage
 * left out.  quarry check prints it. */
typedef struct QrOpenReport {
    WalReplayStats wal;
    uint64_t uncommitted_bytes;
    int segments_salvaged;
} QrOpenReport;
void qr_table_open_report(QrTable *t, QrOpenReport *out);

/* Statistics of one column over the live snapshot's segments (what the
 * planner costs with; quarry stats TABLE prints them).  Rows and nulls
 * count deleted docs not yet merged away; segments written before the field
 * existed count their rows as NULL. */
typedef struct QrColumnStats {
    char name[QR_NAME_MAX + 1];
    int field;                /* schema field index */
    QrFieldType ftype;
    const char *col_type;     /* "int64", "float64", "bool", "timestamp", "keyword", "numeric"
                                 (min / max: a numeric(p, s) field's decimals, else null) */
    uint64_t rows, nulls;
    bool has_range;           /* false when every row is NULL */
    char min_json[96], max_json[96]; /* JSON values (long strings cut, marked "...") */
    double min_num, max_num;  /* numeric, bool and timestamp (µs) columns */
    uint64_t distinct_max;    /* largest exact per-segment distinct count (a lower bound) */
    uint64_t distinct_sum;    /* sum of per-segment distinct counts (an upper bound) */
    double distinct_hll;      /* HyperLogLog registers merged over segments */
    uint32_t segments;        /* segments having the column */
    uint32_t segments_sorted; /* of those, sorted in doc order */
    uint32_t hist_buckets;    /* equi-depth histogram buckets, summed over segments */
    uint32_t blocks;          /* column blocks (zone maps), summed */
    uint32_t segments_btree;  /* segments carrying a B-tree on the column */
    bool btree;               /* the schema asks for a B-tree */
} QrColumnStats;
/* One entry per field that has a column, in schema order.  *out is
 * qr_malloc'd (qr_free it).  Errors: QR_ENOMEM. */
int qr_table_column_stats(QrTable *t, QrColumnStats **out, int *n, QrError *err);

/* Writes.  Each writer fills its own batch and commits it: a commit makes
 * that batch -- and nothing of any other writer's -- durable (per the fsync
 * policy) and visible, as one unit (index/table.h has the protocol and
 * docs/format.md the WAL layout).  Puts are upserts by primary key; when
 * two batches write the same key, the later commit wins.  A batch is used
 * by one thread at a time and borrows its table: free it before the table
 * is dropped or the QrDb closed.  A document must be UTF-8 text: one with
 * a byte sequence that is not well-formed UTF-8 is refused with QR_EINVAL,
 * SQLSTATE 22021 (character_not_in_repertoire) and the byte's 1-based
 * column, and the batch is unchanged; stored documents are therefore
 * always valid JSON for clients (docs/http-api.md, "Documents"). */
typedef struct QrBatch QrBatch;
/* A new empty batch for table t.  Errors: QR_EPERM (read-only), QR_ENOMEM. */
int qr_batch_begin(QrTable *t, QrBatch **out, QrError *err);
/* Upsert one JSON object.  *replaced (may be NULL): the key had a live
 * document, in this batch or committed.  Errors leave the batch as it was
 * (QR_ESYNTAX, QR_ETYPE, QR_ECONSTRAINT, QR_ELIMIT, QR_ENOMEM), except
 * QR_EIO: the batch could not set documents aside on disk and can now only
 * be freed (its later calls fail the same way). */
int qr_batch_put(QrBatch *b, const char *json, size_t len, bool *replaced, QrError *err);
struct cJSON;
/* The same for a document already parsed (root is borrowed). */
int qr_batch_put_parsed(QrBatch *b, const char *json, size_t len, const struct cJSON *root,
                        bool *replaced, QrError *err);
/* Delete by primary key given as JSON text ("abc" or 42).  *found (may be
 * NULL): a live document had the key, in this batch or committed. */
int qr_batch_delete(QrBatch *b, const char *pk_json, size_t len, bool *found, QrError *err);
/* Puts and deletes waiting in the batch. */
uint64_t qr_batch_ops(const QrBatch *b);
/* Mark a batch as bulk loading (imports): its commits write segment files
 * directly instead of going through the in-memory tier of small commits. */
void qr_batch_set_bulk(QrBatch *b, bool bulk);
/* Move src's puts and deletes to the end of dst (index/table.h
 * table_batch_absorb): batches filled by several threads, committed as one.
 * src is left empty.  Errors: QR_EINVAL, QR_EIO, QR_ENOMEM. */
int qr_batch_absorb(QrBatch *dst, QrBatch *src, QrError *err);
/* Write the batch's documents so far as its segment now, in this thread
 * (index/table.h table_batch_seal).  Errors: QR_EIO, QR_ENOMEM (the batch
 * can then only be freed). */
int qr_batch_seal(QrBatch *b, QrError *err);
/* The batch's table. */
QrTable *qr_batch_table(const QrBatch *b);
/* One put or delete for qr_batch_fill: a JSON document, or a primary key
 * as JSON text. */
typedef struct QrLoadOp {
    bool is_delete;
    const char *text;  /* borrows */
    size_t len;
} QrLoadOp;
/* Apply ops[0..n) to b in order -- the same batch as qr_batch_put and
 * qr_batch_delete one by one would make -- with up to `threads` threads
 * (0: qr_load_threads_default; few ops: the caller's thread alone):
 * contiguous slices are indexed in parallel batches that are sealed and
 * absorbed into b in order.  On an error, the one of the first failing op
 * in op order is returned with its index in *failed_at (may be NULL); b
 * then holds only part of the ops and is for discarding. */
int qr_batch_fill(QrBatch *b, const QrLoadOp *ops, size_t n, int threads, size_t *failed_at,
                  QrError *err);
/* Commit the batch and leave it empty for more.  0: every change in it is
 * durable and visible.  An error means nothing of it was written -- unless
 * the error's detail says the outcome is unknown (the log could not be
 * synced), in which case the table refuses writes until the server
 * restarts.  The batch is empty afterwards either way.  A full disk fails a
 * commit with QR_EIO; commits work again once space is freed. */
int qr_batch_commit(QrBatch *b, QrError *err);
/* The same commit in two steps (index/table.h table_batch_commit_start):
 * for a caller that orders commits under a lock of its own and must not
 * hold it while the log syncs, so that concurrent commits share syncs.
 * qr_batch_commit_start: the commit is ordered and written to the log but
 * not acknowledged (errors as qr_batch_commit: nothing was written);
 * qr_commit_wait: durable per the fsync policy and visible on return (an
 * error means the outcome is unknown).  Wait exactly once per successful
 * start, before the batch's table is dropped or the QrDb closed. */
typedef struct QrCommit {
    void *t;           /* borrows the table's write path */
    uint64_t end_lsn;
    uint64_t n_ops;
    uint64_t n_replaced; /* keys of the batch that had a live committed document */
    bool started;
} QrCommit;
int qr_batch_commit_start(QrBatch *b, QrCommit *c, QrError *err);
int qr_commit_wait(const QrCommit *c, QrError *err);
/* Discard what the batch holds and free it.  NULL is a no-op. */
void qr_batch_free(QrBatch *b);
/* Checkpoint: segments and manifest on disk, the WAL trimmed. */
int qr_flush(QrTable *t, QrError *err);
int qr_merge(QrTable *t, QrError *err);
void qr_wait_merges(QrTable *t);
/* Fetch the stored JSON of a document by primary key (JSON text). */
int qr_get(QrTable *t, const char *pk_json, size_t len, QrBuf *out, QrError *err);
/* The same, seeing also the commits started (qr_batch_commit_start) and
 * not yet acknowledged: for a key check made under the lock that orders
 * the caller's commits. */
int qr_get_latest(QrTable *t, const char *pk_json, size_t len, QrBuf *out, QrError *err);
/* Verify checksums of every segment. */
int qr_verify(QrTable *t, QrError *err);
/* CREATE INDEX / DROP INDEX: a B-tree on a column field, built for every
 * existing segment (writers wait meanwhile) and for every later one; the
 * schema change is durable on return (index/table.h table_create_index).
 * Errors: QR_ENOTFOUND (no such field; drop: not indexed), QR_EEXISTS
 * (already indexed), QR_EINVAL (field has no column), QR_EPERM (read-only). */
int qr_table_create_index(QrTable *t, const char *field, QrError *err);
int qr_table_drop_index(QrTable *t, const char *field, QrError *err);

/* ---- bulk loading (query/loader.c) ----
 *
 * A load takes JSON documents in input order and hands back per-document
 * outcomes and commits in the same order, indexing with a pool of threads.
 *
 * The input is cut into chunks of consecutive documents (chunk_docs or
 * chunk_bytes, whichever comes first).  Each chunk is one batch, built by
 * one of `threads` workers: JSON parsing, type checks, analysis,
 * inversion, columns, document store and the segment file, all in
 * parallel.  Chunks are committed strictly in input order by the caller's
 * thread, so when two documents share a key the later one wins as in a
 * sequential load, and "replaced" is counted against what the earlier
 * chunks committed.  Outcomes are delivered in input order too: the
 * rejected documents of a chunk (with their tags, e.g. line numbers) and
 * then its commit, from the caller's thread inside qr_loader_add /
 * qr_loader_finish, never from a worker.  So a progress bar and an error
 * report see exactly what a single-threaded load would, whatever the
 * thread count; threads = 1 builds each chunk in the caller's thread.
 *
 * Memory: a chunk in flight (queued, being built, built and waiting for
 * its commit) holds about three times its JSON bytes (the records for the
 * WAL, the builder's postings, columns and stored documents), and that is
 * what the indexing memory budget counts -- one budget for the process,
 * shared by every load at once (qr_load_set_defaults: `--memory`).  A load
 * keeps at most threads + 1 chunks in flight, and puts one more in only
 * when the budget has room for it, or when it has none in flight (so that
 * every load moves); otherwise qr_loader_add commits its oldest chunks
 * first.  chunk_bytes shrinks so that threads + 1 chunks fit the budget.
 *
 * Strict mode: the first rejected document stops the load.  Chunks before
 * its chunk are committed; its chunk's documents before it stay in a
 * batch that qr_loader_finish(commit = true) commits (an upload keeps what
 * it accepted) and qr_loader_free discards; later chunks are discarded.
 * Fatal errors (a commit that failed, a full disk, memory) stop the load
 * the same way; nothing of a failed commit was written.
 */
typedef struct QrLoadOpts {
    int threads;            /* indexing threads; 0 = qr_load_threads_default() */
    uint64_t chunk_docs;    /* documents per commit (default 10000) */
    size_t chunk_bytes;     /* ... or JSON bytes per commit (default 32 MiB) */
    size_t memory_bytes;    /* the process's indexing memory budget this load respects;
                               0 = qr_load_memory_default() */
    bool strict;            /* the first rejected document stops the load */
    /* a rejected document: its tag and why (input order) */
    void (*on_reject)(void *arg, uint64_t tag, const QrError *e);
    /* a commit: the tag of its last document, and the documents it added
     * (new keys) and replaced (keys that had a live document) */
    void (*on_commit)(void *arg, uint64_t last_tag, uint64_t added, uint64_t replaced);
    void *arg;
} QrLoadOpts;

typedef struct QrLoader QrLoader;

/* The machine's indexing threads (qr_cpu_count) unless set by
 * qr_load_set_defaults; the memory budget: an eighth of the machine's
 * memory (qr_mem_physical), at least 64 MiB, unless set. */
int qr_load_threads_default(void);
size_t qr_load_memory_default(void);
/* `quarry import --threads --memory` and `quarry serve`: process-wide
 * defaults (0 keeps the current one). */
void qr_load_set_defaults(int threads, size_t memory_bytes);

/* Start loading into table t (borrowed: the loader must be freed before
 * the table is closed or dropped).  Errors: QR_ENOMEM, QR_EINTERNAL (a
 * thread could not start), QR_EPERM (read-only table). */
int qr_loader_begin(QrTable *t, const QrLoadOpts *opts, QrLoader **out, QrError *err);
/* Queue one JSON document (copied) with the caller's tag (tags increase).
 * May wait for commits (the memory budget) and deliver outcomes through
 * the callbacks.  A fatal error or a strict rejection is returned once
 * delivered (everything before it delivered too); after it only
 * qr_loader_finish and qr_loader_free are useful (more adds return it
 * again). */
int qr_loader_add(QrLoader *l, uint64_t tag, const char *json, size_t len, QrError *err);
/* Build and commit everything queued, delivering every outcome.  After a
 * strict rejection, `commit` commits what its chunk accepted before it
 * (else it stays uncommitted and free discards it).  Returns the load's
 * error, if any (then the error of the final commit, if that failed). */
int qr_loader_finish(QrLoader *l, bool commit, QrError *err);
/* Stop the workers and discard whatever is not committed.  NULL is a no-op. */
void qr_loader_free(QrLoader *l);


/* ---- search ---- */

typedef struct QrSearchReq {
    const char *q;            /* query text (docs/query-language.md); "*" matches every
                                 document, and so does an empty q when a filter or a sort is
                                 given (filter-only search) */
    size_t q_len;
    const char *fields;       /* "title^2,body" or NULL: the combined "_all" field when the
                                 schema has one and every text field weighs 1, else every
                                 indexed text field with its schema weight; several fields
                                 score as `scoring` says */
    int scoring;              /* QrScoring (store/schema.h): TABLE (0, the table's), BM25F,
                                 or SUM (the weighted sum of per-field BM25) */
    int typo;                 /* QrTypo: OFF (0: exact words, SQL's and the default here),
                                 ONE, TWO, AUTO, or TABLE (the table's typo_tolerance: what
                                 the HTTP API and the CLI send) */
    bool prefix_last;         /* as you type: the query's last word also finds the words it
                                 begins, unless the query ends in a space */
    bool no_synonyms;         /* leave the table's synonyms out */
    bool default_and;         /* implicit operator AND instead of OR */
    int limit;                /* hits to return (default 10) */
    int offset;               /* hits to skip */
    bool count_only;          /* total only, no hits, no scoring */
    bool unordered;           /* hits in doc order, unscored ("all ids"); total exact */
    bool skip_total;          /* ranked hits only: total stays 0 (saves a counting pass) */
    bool snippets;            /* compute a snippet per hit */
    bool fetch_docs;          /* include the stored document per hit */
    const char *hl_pre, *hl_post; /* highlight markers (default <b> </b>) */
    const char *hl_fields;    /* "title,body": a highlight per hit for each of these text
                                 fields (QrHit.highlights), or NULL */
    int fragment_words;       /* words in a snippet's fragment (0 = 32) */
    int fragments;            /* fragments per snippet, best first, joined by " … " (0 = 1) */
    uint64_t timeout_ms;      /* 0 = none */
    size_t mem_cap;           /* per-query memory cap in bytes, 0 = default */
    atomic_bool *cancel;      /* may be NULL */
    bool exhaustive;          /* disable dynamic pruning (tests, EXPLAIN) */
    int max_expansions;       /* prefix/fuzzy terms scored individually (default 128) */
    /* structured filter and order (docs/query-language.md "Filters", "Sorting") */
    const char *filter;       /* SQL-WHERE filter text, or NULL */
    size_t filter_len;        /* bytes of filter (0 = strlen) */
    const char *sort;         /* "published:desc,symbol" (default asc; _score, _id too), or
                                 NULL = _score:desc.  An explicit sort breaks ties by _id */
    const char *search_after; /* cursor: the JSON array a previous page's last hit carried in
                                 sort_json (same q, filter and sort), or NULL */
    int access_path;          /* QrAccessPath of query/filter.h: 0 = chosen by cost; forces
                                 how filters read columns (tests, SET quarry.access_path) */
    const struct QrFacetReq *facets; /* borrowed: n_facets summaries over all matches */
    int n_facets;
    const char *rank;         /* order by this expression of score and numeric fields
                                 ("score * log(1 + views)", query/rank.h; hits' score is its
                                 value), or NULL = BM25.  Not with sort / search_after */
} QrSearchReq;

/* Facets: summaries over every match of q + filter (not only the hits),
 * computed from the columns (query/facets.c on query/colwalk.h, the
 * grouping SQL's aggregates use). */
typedef enum QrFacetKind {
    QR_FACET_TERMS,       /* value counts of a keyword/bool/int/timestamp column, top `size`;
                             a multi-valued keyword counts each document once per element */
    QR_FACET_HISTOGRAM,   /* counts per bucket floor(v / interval) * interval (numeric,
                             timestamp: interval in the column's unit, µs for timestamps) */
    QR_FACET_STATS,       /* count, min, max, sum, avg of a numeric/timestamp column */
    QR_FACET_PERCENTILES, /* percentile_cont of each of `percents` (0-100) over the values of a
                             numeric/timestamp column (exact: every value is read) */
    QR_FACET_CARDINALITY, /* the number of distinct values (exact); a multi-valued keyword
                             counts distinct elements */
    QR_FACET_RANGE        /* counts per range [from, to) of a numeric/timestamp column (ranges
                             may overlap; an unbounded end is open) */
} QrFacetKind;

#define QR_FACET_MAX_PERCENTS 32
#define QR_FACET_MAX_RANGES 64

typedef struct QrFacetRange {
    bool has_from, has_to;    /* an absent end is unbounded */
    double from, to;          /* in the column's unit (µs for timestamps) */
    const char *key;          /* borrowed, NULL: "from-to" ("*" for an open end) */
} QrFacetRange;

typedef struct QrFacetReq {
    QrFacetKind kind;
    const char *field;        /* borrowed */
    int size;                 /* TERMS: buckets returned (default 10); HISTOGRAM: cap */
    double interval;          /* HISTOGRAM: bucket width > 0 */
    const double *percents;   /* PERCENTILES: borrowed, n_percents in [1, 32], each 0-100 */
    int n_percents;
    const QrFacetRange *ranges; /* RANGE: borrowed, n_ranges in [1, 64] */
    int n_ranges;
} QrFacetReq;

typedef struct QrFacetBucket {
    char *key_json;           /* the value (TERMS), bucket start (HISTOGRAM) or the range's
                                 key (RANGE) as JSON */
    uint64_t count;
    char *from_json, *to_json; /* RANGE: the ends as JSON (timestamps as text), NULL if open */
} QrFacetBucket;

typedef struct QrFacetRes {
    QrFacetKind kind;
    const char *field;        /* arena copy */
    int n_buckets;            /* TERMS: by count desc, then value; HISTOGRAM: by key;
                                 RANGE: in request order */
    QrFacetBucket *buckets;
    uint64_t other;           /* TERMS: matches whose value is not in the buckets shown */
    uint64_t missing;         /* matches where the field is NULL (or an empty list) */
    uint64_t count;           /* STATS, PERCENTILES: non-NULL values; CARDINALITY: distinct
                                 values */
    double min, max, sum, avg; /* STATS (timestamps in µs); valid when count > 0 */
    char *values_json;        /* PERCENTILES: {"50": v, ...} in request order (null without
                                 values; timestamps as text) */
} QrFacetRes;

void qr_search_req_init(QrSearchReq *r);
/* "auto", "scan", "check", "btree" -> QrSearchReq.access_path; -1 when unknown. */
int qr_access_path_parse(const char *name);
/* The QrError detail of an error in QrSearchReq.filter (its offset points
 * into the filter text, not the query). */
#define QR_FILTER_ERROR_DETAIL "in the filter"
/* ... and of an error in QrSearchReq.rank (offset into the rank text). */
#define QR_RANK_ERROR_DETAIL "in the rank expression"


/* One field's highlighted fragments of a hit (QrSearchReq.hl_fields). */
typedef struct QrHighlight {
    const char *field;        /* the field's name */
    int n;                    /* fragments, best first (the field's first words when it
                                 has no match); 0 when the document lacks the field */
    char **fragments;
} QrHighlight;

typedef struct QrHit {
    float score;
    int64_t doc;              /* global doc id in the snapshot */
    char *id_json;            /* the primary key as JSON text */
    char *snippet;            /* NULL unless requested */
    QrHighlight *highlights;  /* with hl_fields: one per field asked for, in that order */
    int n_highlights;
    char *doc_json;           /* NULL unless requested */
    char *sort_json;          /* with an explicit sort or search_after: the JSON array of the
                                 hit's sort values then its id (a search_after cursor) */
} QrHit;

typedef struct QrSearchStats {
    uint64_t postings_blocks_decoded, postings_blocks_skipped;
    uint64_t docs_scored;
    uint32_t segments;
    const char *strategy;     /* "wand", "and", "exhaustive", "count", "filter", "sort",
                                 "rank" */
    /* filters (QrFilterStats of query/filter.h, summed over segments) */
    uint64_t filter_blocks_total, filter_blocks_skipped, filter_blocks_scanned;
    uint64_t filter_btree_pages, filter_candidates_checked, filter_rows;
    uint32_t filter_segs_scan, filter_segs_check, filter_segs_btree;
    /* rank: BM25 top-k' rounds run (k' growing until the expression's bound
     * over the docs left out cannot reach the k-th rank), the candidates
     * whose rank was computed, and whether every match had to be ranked */
    uint32_t rank_rounds;
    uint64_t rank_candidates;
    bool rank_exhaustive;
} QrSearchStats;

typedef struct QrSearchRes {
    uint64_t total;           /* exact number of matching live documents */
    int n_hits;
    QrHit *hits;              /* arena memory */
    double took_ms;
    QrSearchStats stats;
    int n_facets;             /* one per requested facet, in request order */
    QrFacetRes *facets;
    const char *warning;      /* scores used incomplete statistics (QrStatsSource), or NULL */
    QrArena *arena;           /* owns everything above */
} QrSearchRes;

int qr_search(QrTable *t, const QrSearchReq *req, QrSearchRes **out, QrError *err);
void qr_search_res_free(QrSearchRes *r);

/* ---- BM25 statistics across nodes (query/bm25_stats.c, docs/scale-out.md) ----
 * BM25 reads the number of documents N, the tokens and documents of each
 * field (avgdl) and each query term's document frequency.  When a table is
 * split over nodes (a PostgreSQL coordinator over postgres_fdw), every node
 * scores as one index holding all the documents would when it adds the
 * other nodes' statistics to its own: its own come from the snapshot the
 * query pinned, the others' from the QrStatsSource of QrDbOpts (quarry
 * serve --peers).  Only ranking asks: counts and filters never do. */

/* Collection statistics of one table on one node.  Arrays are indexed by
 * term-key byte: a schema field index, or QR_ALL_FIELD for "_all". */
typedef struct QrBm25Stats {
    uint64_t version;         /* the snapshot's version: moves with every published change */
    uint64_t n_docs;          /* documents, deleted ones counted until merged away (as BM25
                                 counts them) */
    uint64_t field_tokens[QR_ALL_FIELD + 1]; /* tokens indexed in the field */
    uint64_t field_docs[QR_ALL_FIELD + 1];   /* documents having the field */
} QrBm25Stats;

/* One query term as analyzed: field (term-key byte), bytes, and its
 * document frequency (filled or added to). */
typedef struct QrTermStat {
    int field;
    const char *text;         /* borrowed */
    uint32_t len;
    uint64_t df;
} QrTermStat;

struct QrStatsSource {
    /* Add the statistics of t's documents held elsewhere to *st (n_docs,
     * field_tokens, field_docs; version is left alone) and to each
     * terms[i].df.  Called from query threads, at most once per ranked
     * text query, with the table in use.  QR_OK: complete.  An error fails
     * the query (say which node could not answer, QR_EUNAVAILABLE).
     * *warning (static or arena text, may stay NULL): the statistics are
     * incomplete but the configuration allows answering; the query goes on
     * and its client is told (an HTTP "warnings" entry, a PG WARNING). */
    int (*add)(void *arg, QrTable *t, QrBm25Stats *st, QrTermStat *terms, int n_terms,
               QrArena *arena, const char **warning, QrError *err);
    void *arg;
};

/* This node's statistics of t over its current snapshot: *st set whole,
 * terms[i].df set (i < n_terms; fields out of range count 0).  What a peer
 * answers another node with.  Errors: none but QR_EINVAL for n_terms < 0. */
int qr_table_bm25_stats(QrTable *t, QrBm25Stats *st, QrTermStat *terms, int n_terms,
                        QrError *err);

/* ---- canonical query text (query/canonical.c) ---- */

/* Append the canonical form of text query q[0, len) (query/qparse.h
 * qnode_format: the normalized tree printed back, so that spacing, case of
 * operators and redundant groups do not tell two queries apart).  Errors:
 * those of parsing (QR_ESYNTAX with the position, QR_EINVAL, QR_ELIMIT) and
 * QR_ENOMEM; nothing is appended then. */
int qr_query_canonical(const char *q, size_t len, bool default_and, QrBuf *out, QrError *err);
/* Append SQL text with its constants replaced by $1, $2 ... and white space
 * squeezed (libpg_query's normalization); *fingerprint (may be NULL) gets
 * the statement's structural fingerprint, equal for statements that differ
 * only in constants, case and spacing.  Errors: QR_ESYNTAX (with the
 * position), QR_EINVAL (a NUL byte), QR_ELIMIT (54001: nested too deeply to
 * normalize, about 1,500 levels), QR_ENOMEM. */
int qr_sql_normalize(const char *sql, size_t len, QrBuf *out, uint64_t *fingerprint,
                     QrError *err);

/* ---- table handles (query/table_ref.c) ----
 * qr_table_drop frees the table's handle, so a drop must not overlap a
 * user of the table.  A user takes a reference on the table's name for as
 * long as it uses the handle; qr_table_drop_wait waits until the last
 * reference is released (new ones wait for the drop, then find the table
 * gone) or gives up after a timeout with QR_EBUSY, touching nothing. */

/* Take a reference on table `name` and, when out is not NULL, open it
 * (QR_ENOTFOUND, no reference kept, when it does not exist).  Waits while
 * the table is being dropped.  Pair with qr_table_release. */
int qr_table_acquire(QrDb *db, const char *name, QrTable **out, QrError *err);
/* The same without waiting: QR_EBUSY (no reference kept) while the table is
 * being dropped. */
int qr_table_try_acquire(QrDb *db, const char *name, QrTable **out, QrError *err);
void qr_table_release(QrDb *db, const char *name);
/* References held on `name` now (for tests and /stats). */
int qr_table_refs(QrDb *db, const char *name);
/* Drop `name` once no reference is held.  timeout_ms 0 waits forever;
 * QR_EBUSY naming the count of users when they outlast the timeout.  The
 * caller must not hold a reference itself. */
int qr_table_drop_wait(QrDb *db, const char *name, uint64_t timeout_ms, QrError *err);
/* qr_table_drop_wait in two steps, for a drop that must happen later under
 * another lock (a transaction block's DROP TABLE at COMMIT): claim waits as
 * it does and leaves the name claimed (new references wait); the caller
 * then calls qr_table_drop or not, and always qr_table_unclaim. */
int qr_table_claim(QrDb *db, const char *name, uint64_t timeout_ms, QrError *err);
void qr_table_unclaim(QrDb *db, const char *name);
/* Exchange the contents of tables a and b (their directories, metadata
 * included) once no reference is held on either: atomic (one rename), so
 * each name always holds one whole table.  Timeout as qr_table_drop_wait. */
int qr_table_swap_wait(QrDb *db, const char *a, const char *b, uint64_t timeout_ms, QrError *err);
/* The exchange itself; callers make sure nobody uses either handle. */
int qr_table_swap(QrDb *db, const char *a, const char *b, QrError *err);


/* ---- spare tables (query/quarry.c) ----
 * A spare is a table built in <data>/spares/<id>, beside the tables: no
 * listing shows it and no table name reaches it; its maker holds the only
 * handle, shown under the name of the table it is to replace.  A rebuild
 * (ALTER TABLE ... ADD PRIMARY KEY, a full-text CREATE INDEX on a table with
 * rows or inside a transaction block: query/sql_rekey.c) copies a table into
 * one and then exchanges the two directories.  A writable open removes
 * every spare left over, after the transaction journals (which may name
 * one) were applied.  `id` is letters, digits, '_' and '-'. */

/* Create spare `id` with the schema; *out is a handle of its own (no other
 * handle exists), named `shown`.  Errors: QR_EEXISTS, QR_EIO, QR_ENOMEM and
 * those of qr_table_create. */
int qr_spare_create(QrDb *db, const char *id, const char *shown, const QrSchema *schema,
                    QrTable **out, QrError *err);
/* Close a handle qr_spare_create gave (its files stay).  NULL is a no-op. */
void qr_spare_close(QrTable *t);
/* Remove spare `id` (no handle of it may be open); absent is fine. */
int qr_spare_drop(QrDb *db, const char *id, QrError *err);
/* The directory of spare `id` (whether or not it exists). */
void qr_spare_path(const QrDb *db, const char *id, char *out, size_t cap);
/* Which directory `name` / spare `id` is now: an identity that moves with
 * the directory through renames (0: there is none). */
uint64_t qr_table_ident(const QrDb *db, const char *name);
uint64_t qr_spare_ident(const QrDb *db, const char *id);
/* Exchange table `name` with spare `id` in one atomic rename (both made
 * durable): the table's open handle is freed (callers make sure nobody uses
 * it: a claim) and the spare's handle must be closed.  Errors: QR_ENOTFOUND,
 * QR_EIO; nothing changed then. */
int qr_spare_swap(QrDb *db, const char *name, const char *id, QrError *err);
/* A number that moves with every commit to the table and not with merges
 * (table_write_mark). */
uint64_t qr_table_write_mark(QrTable *t);

#endif
