/*
 * sequence.h — durable sequences: the counters behind SERIAL, identity
 * columns, CREATE SEQUENCE and the hidden row id of tables without a
 * declared primary key.
 *
 * Layer: query/.  Calls the base kit (files, errors) and cJSON.
 *
 * A value handed out is never handed out again, kill -9 included: before a
 * value beyond the durable high-water mark is returned, the mark moves
 * SEQ_LOG_AHEAD steps past it in the sequence's file (written atomically,
 * fsynced), so a restart resumes after the mark.  As in PostgreSQL a crash
 * skips at most that many values, and nextval is never rolled back.
 *
 * Format: one file per sequence, <data>/sequences/<name>.json, replaced
 * atomically:
 *   {"v":1,"type":"int8","start":"1","increment":"1","min":"1",
 *    "max":"9223372036854775807","cache":"1","cycle":false,
 *    "last":"32","is_called":true,"owned_by":"table.column","internal":false}
 * Integers are strings (cJSON numbers are doubles).  "last" is the mark:
 * the highest value that may have been handed out (or setval's value).
 */
#ifndef QR_SEQUENCE_H
#define QR_SEQUENCE_H

#include <stdbool.h>
#include <stdint.h>

#include "store/error.h"

/* Values reserved per durable write (user sequences; hidden row ids reserve
 * SEQ_LOG_AHEAD_ROWID: bulk loads would otherwise fsync every 32 rows). */
#define SEQ_LOG_AHEAD 32
#define SEQ_LOG_AHEAD_ROWID 4096

#define SEQ_NAME_MAX 63

typedef struct SeqDef {
    char type[8];          /* "int2", "int4", "int8" */
    int64_t start, increment, min, max, cache;
    bool cycle;
    char owned_by[2 * SEQ_NAME_MAX + 2]; /* "table.column" or "" */
    bool internal;         /* a hidden row id: not listed in the catalog */
} SeqDef;

/* A definition with PostgreSQL's defaults for `type` ("int8" if NULL) and
 * the increment's sign (ascending: min 1, max the type's largest). */
void seq_def_init(SeqDef *d, const char *type, int64_t increment);

/* Check a definition (min < max, start within, increment not 0); 0 or
 * QR_EINVAL with a PostgreSQL-style message (SQLSTATE 22023). */
int seq_def_check(const SeqDef *d, const char *name, QrError *err);

/* Create sequence `name` under data directory `dir`: QR_EEXISTS if it
 * exists.  Durable when it returns 0. */
int seq_create(const char *dir, const char *name, const SeqDef *d, QrError *err);

/* Drop it (QR_ENOTFOUND if absent). */
int seq_drop(const char *dir, const char *name, QrError *err);

bool seq_exists(const char *dir, const char *name);

/* The next value (QR_ENOTFOUND if no such sequence, QR_ELIMIT "reached
 * maximum value" without CYCLE); durable before it returns. */
int seq_next(const char *dir, const char *name, int64_t *out, QrError *err);

/* setval: the next nextval returns v (is_called false) or the value after v. */
int seq_set(const char *dir, const char *name, int64_t v, bool is_called, QrError *err);

/* Definition and state: *last is the last value handed out (or set), and
 * *called whether nextval has been called since (last_value, is_called of
 * PostgreSQL's sequence relation). */
int seq_get(const char *dir, const char *name, SeqDef *d, int64_t *last, bool *called,
            QrError *err);

/* Names of every sequence, sorted; *names and each name are qr_malloc'd
 * (the caller frees them). */
int seq_list(const char *dir, char ***names, int *n, QrError *err);

/* Forget every loaded sequence (their in-memory positions), as a restart
 * does: the next use reads each file again.  For tests of crash recovery. */
void seq_forget_all(void);

/* Drop every sequence owned by a column of `table` (DROP TABLE). */
int seq_drop_owned(const char *dir, const char *table, QrError *err);
/* The names of the sequences owned by a column of `table`, each followed
 * by '\n' (*out qr_malloc'd, "" when none). */
int seq_owned_names(const char *dir, const char *table, char **out, QrError *err);
/* Drop the sequences named in names ('\n'-separated, may be NULL); absent
 * ones are fine. */
int seq_drop_names(const char *dir, const char *names, QrError *err);

#endif
