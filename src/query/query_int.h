/*
 * query_int.h — private to query/: the table handle behind QrTable and the
 * search internals shared by quarry.c and search.c.
 */
#ifndef QR_QUERY_INT_H
#define QR_QUERY_INT_H

#include <pthread.h>

#include "index/analyzer.h"
#include "index/table.h"
#include "query/quarry.h"

/* Query-time analyzers, one per indexed text field; pooled per table
 * because creating ICU break iterators and stemmers per query costs more
 * than many queries. */
typedef struct QsAnalyzers {
    Analyzer *an[QR_MAX_FIELDS]; /* owns; NULL for non-text fields */
    Analyzer *fold;              /* owns: no stemming, no stop words (synonym keys) */
    int n_fields;
} QsAnalyzers;

int qsearch_analyzers_new(const QrSchema *s, QsAnalyzers **out, QrError *err);
void qsearch_analyzers_free(QsAnalyzers *a);

/* Call fn with every live stored document of snapshot s (borrowed), in
 * storage order; a non-zero return stops and is returned.  Errors: those
 * of the document store, QR_ENOMEM. */
int snapshot_each_doc(Snapshot *s, int (*fn)(void *arg, const char *doc, size_t len, QrError *err),
                      void *arg, QrError *err);

/* The file qr_backup writes first into a copy and removes once the copy is
 * complete and verified; qr_db_open refuses a directory that has it. */
#define QR_BACKUP_MARKER "BACKUP_INCOMPLETE"

struct QrTable {
    char name[QR_NAME_MAX + 1];
    QrDb *db;                 /* borrows */
    Table *table;             /* owns */
    pthread_mutex_t an_lock;  /* guards an_free */
    QsAnalyzers **an_free;    /* owns: idle analyzer sets */
    int n_an_free, cap_an_free;
    pthread_mutex_t syn_lock; /* guards the four below */
    struct SynMap *syn;       /* owns a reference: the synonyms (query/synonyms.h) */
    uint64_t syn_gen;         /* table_settings_gen they were built at */
    bool syn_built;
};

/* txn_journal.c: apply the journals of multi-table SQL commits a crash
 * interrupted (qr_db_open, writable opens), so recovery applies whole
 * transactions only.  *n_applied counts them.  QR_ECORRUPT names a damaged
 * journal. */
int txnj_recover(QrDb *db, int *n_applied, QrError *err);

/* The one rule for document text (quarry.c): QR_OK when json[0..len) is
 * well-formed UTF-8, else QR_EINVAL with SQLSTATE 22021 naming the bad
 * bytes and their 1-based column (qr_batch_put, qr_batch_put_parsed and SQL writes all
 * call it, so every way in refuses the same documents). */
int quarry_doc_check(const char *json, size_t len, QrError *err);

/* Rewrite a query's memory failure as the process-wide budget's
 * (store/mem.h): QR_ENOMEM, SQLSTATE 53200, with what the running queries
 * hold and a hint.  Returns QR_ENOMEM. */
int quarry_budget_error(QrError *err);

/* ---- BM25 statistics (bm25_stats.c) ---- */

/* The stats source of db (QrDbOpts.stats_source), or NULL: statistics are
 * this node's alone. */
const QrStatsSource *quarry_stats_source(const QrDb *db);
/* The collection totals of snap into *st, set whole (version, n_docs,
 * field_tokens, field_docs for every term-key byte): the one definition of
 * what this node contributes, for its own queries and for its peers. */
void bm25_snapshot_totals(const Snapshot *snap, QrBm25Stats *st);

#endif
