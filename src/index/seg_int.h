/*
 * seg_int.h — private to index/segment*.c: shared helpers of the segment
 * builder, reader and merger.
 */
#ifndef QR_SEG_INT_H
#define QR_SEG_INT_H

#include <cJSON.h>
#include <pthread.h>

#include "index/segment.h"

/* docs per segment: doc ids must stay below 2^31 for iterators and bitmaps */
#define SEG_MAX_DOCS (1u << 30)

/* One field value of a document after type checking (borrowed strings). */
typedef struct SegValue {
    bool is_null;
    bool b;
    int64_t i;   /* int, timestamp (µs) */
    double d;
    const char *s; /* keyword / text (first element for arrays) */
    size_t n;
} SegValue;

/* ---- segbuild.c ---- */
uint64_t seg_hash_bytes(const void *p, size_t n);
/* Type-check a JSON value against a field (NULL or JSON null => is_null). */
int seg_value_check(const QrField *f, const cJSON *v, SegValue *out, QrError *err);
int seg_write_pk_section(const uint8_t *bytes, const uint32_t *offs, uint32_t n_docs, QrBuf *out,
                         QrError *err);

/* ---- segment.c ---- */
/* memcmp order, a prefix before its extensions: the order of term keys and
 * primary keys. */
int seg_key_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn);
void seg_meta_write(QrBuf *out, uint32_t n_docs, int n_fields, const uint64_t *field_total,
                    const uint32_t *field_docs, uint64_t min_lsn, uint64_t max_lsn, bool has_all,
                    uint64_t all_total, uint32_t all_docs);
/* Append row `row` of column c (NULL: the segment lacks it) to w. */
int seg_column_copy_row(const Column *c, uint32_t row, ColWriter *w, const QrField *f,
                        QrError *err);
/* Add one surface entry (SEC_SURFACES; keys ascending): form key -> term,
 * the term's bytes appended to blob unless they equal the form's. */
int seg_surf_add(TermDictWriter *tw, QrBuf *blob, const uint8_t *key, size_t key_len,
                 const uint8_t *term, size_t term_len, uint64_t df, uint64_t tf, QrError *err);
/* Finish sw: the file `path` (sfw_finish), or with mem_out an in-memory
 * segment named `path` with id `id` (sfw_finish_mem + open).  Frees sw. */
struct SfileWriter;
int seg_write_out(struct SfileWriter *sw, const char *path, bool do_fsync, uint64_t id,
                  Segment **mem_out, QrError *err);
/* Sort doc ids by their key bytes (offs[d]..offs[d+1] in bytes). */
void seg_sort_docs_by_key(uint32_t *docs, uint32_t n, const uint8_t *bytes, const uint32_t *offs);

#endif
