/*
 * ingest.h — JSONL bulk ingest shared by `quarry import` and the HTTP
 * documents endpoint: line splitting, per-line errors with line numbers,
 * schema inference for new tables, batching and commits, counts.
 *
 * Layer: server/.  Calls query/quarry.h and the base kit.
 *
 * Nothing is silently lost: every line is imported (new or replacing a
 * document with the same key), rejected (reported with its line number and
 * reason), or — only after a fatal error such as a full disk — left
 * unprocessed, which the summary states.  An ingest is a load (QrLoader,
 * quarry.h): batches of `batch` documents, indexed by a pool of threads and
 * committed in line order; a batch becomes durable and visible at its
 * commit, and only then -- other writers' commits never publish it; `acked`
 * counts documents whose commit succeeded.  Rejected lines are reported,
 * and counts move, in line order whatever the thread count.
 */
#ifndef QR_INGEST_H
#define QR_INGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/quarry.h"

#define INGEST_INFER_LINES 1000
#define INGEST_BATCH_BYTES (32u << 20)
#define INGEST_BYTES_PER_VALUE 16

typedef struct IngestOpts {
    const char *table;          /* table name */
    const QrSchema *schema;     /* for a new table; NULL = infer */
    int batch;                  /* docs per commit (default 10000) */
    size_t batch_bytes;         /* ... or line bytes per commit, whichever comes
                                   first (default INGEST_BATCH_BYTES): what a
                                   batch holds in memory until its commit */
    bool strict;                /* first bad line aborts */
    int threads;                /* indexing threads (0 = the machine's cores) */
    size_t memory_bytes;        /* indexing memory budget (0 = the default: an eighth of
                                   the machine's memory) */
    int max_errors_kept;        /* error lines kept for the report (default 100) */
    size_t max_line_bytes;      /* longest accepted line (default 16 MiB); a line
                                   may also hold at most max_line_bytes /
                                   INGEST_BYTES_PER_VALUE JSON values */
    /* called for each rejected line (may be NULL) */
    void (*on_error)(void *arg, uint64_t line, const QrError *e);
    /* called after each successful commit: lines consumed so far (every
     * document on them is durable and visible) and documents acknowledged */
    void (*on_commit)(void *arg, uint64_t lines, uint64_t acked);
    void *arg;
} IngestOpts;

typedef struct IngestError {
    uint64_t line;
    QrError err;
} IngestError;

typedef struct Ingest Ingest;

int ingest_begin(QrDb *db, const IngestOpts *opts, Ingest **out, QrError *err);
/* One line (without its newline).  Blank lines are skipped.  Returns QR_OK
 * for a rejected line (it is counted); a fatal error (I/O, a strict-mode
 * rejection, OOM) returns its code and the ingest must be ended. */
int ingest_line(Ingest *in, const char *line, size_t len, QrError *err);
/* Feed raw bytes (any chunking); complete lines are ingested. */
int ingest_feed(Ingest *in, const char *data, size_t len, QrError *err);
/* Final partial line, last commit.  The Ingest stays readable until free. */
int ingest_end(Ingest *in, QrError *err);
/* Commit the documents accepted since the last commit now (an upload that
 * stopped part way keeps what it accepted).  Errors as qr_batch_commit. */
int ingest_commit(Ingest *in, QrError *err);
/* Free; documents not committed yet are discarded (they were never in the
 * WAL, so a crash could not have kept them either). */
void ingest_free(Ingest *in);

typedef struct IngestCounts {
    uint64_t lines, imported, replaced, rejected, acked, bytes;
    bool schema_inferred;
    bool table_created;
} IngestCounts;
void ingest_counts(const Ingest *in, IngestCounts *c);
/* Rejected lines kept for reports (at most max_errors_kept). */
const IngestError *ingest_errors(const Ingest *in, int *n);
/* After a schema was inferred: a line per field saying what it became and
 * why (borrowed, valid until ingest_free); NULL otherwise. */
const char *ingest_inference_notes(const Ingest *in, size_t *len);
/* The table (after the first document or at begin when it existed). */
QrTable *ingest_table(const Ingest *in);

#endif
