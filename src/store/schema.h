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
 *    "scoring": "bm25f",              (or "sum": per-field BM25, weighted sum)
 *    "typo_tolerance": "auto",        (or "off", 1, 2: the search box's default)
 *    "synonyms": [["tty", "terminal"], ["nyc", "new york"]],
 *                                     (groups; or {"tty": ["terminal"]}: one-way)
 *    "fields": [
 *      {"name": "title", "type": "text", "language": "english",
 *       "weight": 2.0, "stopwords": false, "accent_fold": true,
 *       "column": false},
 *      {"name": "body", "type": "text", "stopwords": ["the", "a"]},
 *      {"name": "symbol", "type": "keyword", "index": "btree"},
 *      {"name": "tags", "type": "keyword", "multi": true},
 *      {"name": "published", "type": "timestamp"},
 *      {"name": "views", "type": "int"},
 *      {"name": "price", "type": "numeric", "scale": 2},  (exact: value * 100 in int64)
 *      {"name": "ratio", "type": "numeric"}]}  (exact: the canonical decimal text)
 *
 * A numeric value in a document is a JSON string holding the decimal
 * ("12.50", kept exactly) or a JSON number (its shortest double text).
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
#define QR_SCHEMA_POOL_MAX (64 * 1024) /* bytes of synonyms and custom stop-word lists */
#define QR_SYNONYM_WORDS_MAX 16        /* words in one synonym */

typedef enum QrFieldType {
    QR_FT_TEXT,      /* analyzed full text (inverted index) */
    QR_FT_KEYWORD,   /* exact string (column, dictionary-encoded) */
    QR_FT_INT,       /* int64 */
    QR_FT_FLOAT,     /* float64 */
    QR_FT_BOOL,
    QR_FT_TIMESTAMP, /* int64 microseconds since the epoch, UTC */
    QR_FT_NUMERIC,   /* exact decimal (store/decimal.h): with a scale s, value * 10^s in
                        an int64 column; without, its canonical text in a keyword column */
} QrFieldType;

typedef struct QrField {
    char name[QR_NAME_MAX + 1];
    QrFieldType type;
    /* text fields */
    bool indexed;          /* in the inverted index (default true) */
    char language[24];     /* libstemmer language or "none" */
    bool stopwords;
    uint32_t stop_off, stop_len; /* stopwords with the field's own list: its words, one per
                                    line, at QrSchema.pool[stop_off..+stop_len); len 0 =
                                    the language's built-in list */
    bool accent_fold;
    float weight;          /* weight in multi-field ranking (default 1) */
    bool column;           /* text also kept as a keyword column (sorting) */
    /* column fields */
    bool btree;            /* a B-tree index was asked for */
    bool multi;            /* keyword: a list of values per document (a string alone is a
                              list of one); the column holds PostgreSQL's array text
                              ("{a,b}"), filters and facets see the elements */
    int8_t scale;          /* numeric: digits after the point of a scaled int64 column
                              (0..DEC_SCALED_MAX_PREC), or -1: canonical text */
} QrField;

typedef enum QrIdf {
    QR_IDF_ROBERTSON, /* ln((N - df + 0.5) / (df + 0.5)), floored at 1e-6 (classic BM25) */
    QR_IDF_LUCENE,    /* ln(1 + (N - df + 0.5) / (df + 0.5)) */
} QrIdf;

/* Typo tolerance of a search (docs/query-language.md "Typo tolerance"):
 * how many edits a query word may be from an indexed word. */
typedef enum QrTypo {
    QR_TYPO_OFF = 0,   /* exact words only (the engine's default, and SQL's) */
    QR_TYPO_ONE = 1,   /* one edit for every word of 5 letters or more ... */
    QR_TYPO_TWO = 2,   /* ... up to two edits from 9 letters */
    QR_TYPO_AUTO = 3,  /* one edit from 5 letters, two from 9 (Meilisearch's) */
    QR_TYPO_TABLE = 4, /* requests only: the table's typo_tolerance */
} QrTypo;

/* How a term searched in several weighted fields scores. */
typedef enum QrScoring {
    QR_SCORING_TABLE = 0, /* requests only: the table's scoring */
    QR_SCORING_BM25F = 1, /* term frequencies and lengths combined across the fields, with
                             their weights, before saturation (Elasticsearch's
                             combined_fields): the default */
    QR_SCORING_SUM = 2,   /* the weighted sum of per-field BM25 scores */
} QrScoring;

/* Invariants: pool holds pool_len bytes; every stop list and the synonyms
 * lie inside it.  The pool is part of the value: copies are deep. */
typedef struct QrSchema {
    char primary_key[QR_NAME_MAX + 1];
    float k1, b;           /* BM25 parameters */
    QrIdf idf;             /* idf variant (default robertson) */
    QrScoring scoring;     /* BM25F (default) or SUM; never QR_SCORING_TABLE */
    QrTypo typo;           /* the search box's typo tolerance: AUTO by default */
    uint32_t syn_off, syn_len; /* synonyms: their JSON (compact) in pool; len 0 = none */
    bool all_field;        /* index every text field also into "_all" (BM25 over the
                              whole document, the default search field); default: on
                              when the table has two or more full-text fields */
    int n_fields;
    QrField fields[QR_MAX_FIELDS];
    uint32_t pool_len;
    char pool[QR_SCHEMA_POOL_MAX]; /* stop-word lists and synonyms */
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

/* Replace the synonyms with json[0, len): groups [["a", "b"], ...] (every
 * word of a group stands for the others) or one-way {"a": ["b", ...]}; a
 * synonym may have several words ("new york").  Empty (0 bytes, "[]",
 * "{}" or "null") removes them.  QR_EINVAL naming the problem (not an array
 * or object, an empty or non-string entry, a group of one, more than
 * QR_SYNONYM_WORDS_MAX words), QR_ELIMIT past QR_SCHEMA_POOL_MAX; s is
 * unchanged then. */
int schema_set_synonyms(QrSchema *s, const char *json, size_t len, QrError *err);
/* The synonyms' JSON text (not NUL-terminated), or NULL with *len 0. */
const char *schema_synonyms(const QrSchema *s, size_t *len);
/* Field f's own stop words, one per line, or NULL (the built-in list). */
const char *schema_stop_list(const QrSchema *s, int f, size_t *len);
/* "auto", "off", "1", "2" (and 0) -> QrTypo; -1 when unknown. */
int schema_typo_parse(const char *name);
const char *schema_typo_name(QrTypo t);

/* ISO 8601 ("2025-01-15", "2025-01-15T10:00:00Z", "...10:00:00.123+02:00",
 * space instead of T) to microseconds since the epoch UTC.  Returns false
 * when `s` is not such a date. */
bool qr_parse_timestamp(const char *s, size_t n, int64_t *us_out);
/* Format microseconds as "2025-01-15T10:00:00Z" (with .ffffff if any). */
void qr_format_timestamp(int64_t us, char *out, size_t out_len);

#endif
