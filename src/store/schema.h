/*
 * schema.h — a table's schema: fields, types, analyzer options, primary key.
 *
 * Layer: store/.  Calls the base kit and cJSON.
 *
 * The schema is stored as JSON inside the table's manifest, so its text form
 * is the durable one.  Field order is stable: a field's index (0..n_fields-1)
 * names its term-key byte, norms section and column section inside every
 * segment, so fields are only ever appended (ALTER TABLE ADD COLUMN); older
 * segments read a field they never saw as all NULL / absent.
 *
 * JSON form:
 *   {"primary_key": "id",
 *    "bm25": {"k1": 1.2, "b": 0.75, "idf": "robertson"},
 *    "all_field": true,
 *    "fields": [
 *      {"name": "title", "type": "text", "language": "english",
 *       "weight": 2.0, "stopwords": false, "accent_fold": true,
 *       "column": false},
 *      {"name": "symbol", "type": "keyword", "index": "btree"},
 *      {"name": "published", "type": "timestamp"},
 *      {"name": "views", "type": "int"}]}
 *
 * The primary key field is implicit (any JSON scalar: string or integer) and
 * is not listed among the fields unless the user wants it indexed as well.
 */
#ifndef QR_SCHEMA_H
#define QR_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/buf.h"
#include "store/error.h"

#define QR_NAME_MAX 63        /* bytes in a table / field name */
#define QR_MAX_FIELDS 250     /* a field index must fit the term-key byte */
#define QR_ALL_FIELD 255      /* term-key byte of the combined "_all" text field */

typedef enum QrFieldType {
    QR_FT_TEXT,      /* analyzed full text (inverted index) */
    QR_FT_KEYWORD,   /* exact string (column, dictionary-encoded) */
    QR_FT_INT,       /* int64 */
    QR_FT_FLOAT,     /* float64 */
    QR_FT_BOOL,
    QR_FT_TIMESTAMP, /* int64 microseconds since the epoch, UTC */
} QrFieldType;

typedef struct QrField {
    char name[QR_NAME_MAX + 1];
    QrFieldType type;
    /* text fields */
    bool indexed;          /* in the inverted index (default true) */
    char language[24];     /* libstemmer language or "none" */
    bool stopwords;
    bool accent_fold;
    float weight;          /* weight in multi-field ranking (default 1) */
    bool column;           /* text also kept as a keyword column (sorting) */
    /* column fields */
    bool btree;            /* a B-tree index was asked for */
} QrField;

typedef enum QrIdf {
    QR_IDF_ROBERTSON, /* ln((N - df + 0.5) / (df + 0.5)), floored at 1e-6 (classic BM25) */
    QR_IDF_LUCENE,    /* ln(1 + (N - df + 0.5) / (df + 0.5)) */
} QrIdf;

typedef struct QrSchema {
    char primary_key[QR_NAME_MAX + 1];
    float k1, b;           /* BM25 parameters */
    QrIdf idf;             /* idf variant (default robertson) */
    bool all_field;        /* index every text field also into "_all" (BM25 over the
                              whole document, the default search field); default: on
                              when the table has two or more full-text fields */
    int n_fields;
    QrField fields[QR_MAX_FIELDS];
} QrSchema;

/* Defaults: primary key "id", k1 1.2, b 0.75, no fields. */
void schema_init(QrSchema *s);
/* Parse / print the JSON form.  Errors name the field and the problem. */
int schema_from_json(const char *json, size_t len, QrSchema *out, QrError *err);
int schema_to_json(const QrSchema *s, bool pretty, QrBuf *out, QrError *err);
/* Index of a field or -1. */
int schema_field_index(const QrSchema *s, const char *name);
/* Append a field (validated name, unique); returns its index or -1. */
int schema_add_field(QrSchema *s, const QrField *f, QrError *err);
/* Defaults for a new field of type t. */
void schema_field_defaults(QrField *f, const char *name, QrFieldType t);
const char *schema_type_name(QrFieldType t);
/* The column type (a QrColType of store/column.h) that holds field f in
 * every segment, or -1 when the field has no column (full text without
 * "column": true). */
int schema_column_type(const QrField *f);
int schema_type_parse(const char *name, QrFieldType *t);
/* A name safe to use on disk and in SQL: [A-Za-z_][A-Za-z0-9_]*, <= 63 bytes. */
bool qr_name_valid(const char *name);

/* Schema inference from sample documents (cJSON objects, as text).  Feed
 * each sample with schema_infer_add; schema_infer_finish writes the schema.
 * A field's type is the kind most of its sampled non-null values have
 * (more than half): integers -> int, numbers with a fraction among them ->
 * float, booleans -> bool, ISO-8601 strings -> timestamp; otherwise text
 * (english), which also keeps a keyword column (filters, facets, sorting)
 * when its strings are short (<= 64 bytes) and repeat (distinct values at
 * most half the values, and at most 256).  Values of another kind are not
 * widened to: their documents are rejected by the type checks, naming the
 * field.  Fields that are only null, or mostly objects, are stored and not
 * indexed.  schema_infer_explain (after finish) writes a line per field:
 * what was decided and why.  _free(NULL) is a no-op. */
typedef struct SchemaInfer SchemaInfer;
SchemaInfer *schema_infer_new(const char *primary_key);
int schema_infer_add(SchemaInfer *si, const char *json, size_t len, QrError *err);
int schema_infer_finish(SchemaInfer *si, QrSchema *out, QrError *err);
/* Appends "  name: decision and reason\n" per field.  Errors: QR_ENOMEM. */
int schema_infer_explain(const SchemaInfer *si, QrBuf *out);
void schema_infer_free(SchemaInfer *si);

/* ISO 8601 ("2025-01-15", "2025-01-15T10:00:00Z", "...10:00:00.123+02:00",
 * space instead of T) to microseconds since the epoch UTC.  Returns false
 * when `s` is not such a date. */
bool qr_parse_timestamp(const char *s, size_t n, int64_t *us_out);
/* Format microseconds as "2025-01-15T10:00:00Z" (with .ffffff if any). */
void qr_format_timestamp(int64_t us, char *out, size_t out_len);

#endif
