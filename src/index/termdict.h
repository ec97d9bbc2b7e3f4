/*
 * termdict.h — the term dictionary of a segment: sorted byte-string keys
 * (field id byte + UTF-8 term) mapped to their TermPostings, with exact
 * lookup, cursors, prefix enumeration and Levenshtein (fuzzy) enumeration.
 *
 * Layer: index/.  Calls store/ base kit (error, mem, buf) and
 * index/postings.h (for TermPostings).
 *
 * Format (docs/postings-format.md, termdict.c): front-coded blocks of 32
 * keys (shared-prefix length + suffix + varint TermPostings), a sparse index
 * of block offsets binary-searched in place over each block's first key, and
 * a fixed footer.  td_open validates every byte once, so later reads over the
 * borrowed bytes cannot go wrong; the reader keeps its bounds checks anyway.
 */
#ifndef QR_TERMDICT_H
#define QR_TERMDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index/postings.h"
#include "store/buf.h"
#include "store/error.h"
#include "store/mem.h"

/* Longest key accepted (bytes). */
#define TD_MAX_KEY_LEN 65535
/* Keys per front-coded block. */
#define TD_BLOCK_KEYS 32

/* ---- writer ---- */

typedef struct TermDictWriter TermDictWriter;

/* NULL on OOM. */
TermDictWriter *tdw_new(void);
/* NULL is a no-op. */
void tdw_free(TermDictWriter *w);
/* Add a key (copied) and its postings info.  Keys must come strictly
 * ascending in memcmp order (shorter first on a tie): QR_EINVAL otherwise,
 * or when tp->total_tf < tp->df.  QR_ELIMIT past TD_MAX_KEY_LEN. */
int tdw_add(TermDictWriter *w, const uint8_t *key, size_t key_len, const TermPostings *tp,
            QrError *err);
/* Append the finished dictionary to out (QR_ENOMEM on OOM).  Call once. */
int tdw_finish(TermDictWriter *w, QrBuf *out, QrError *err);

/* ---- reader ---- */

/* A reader over borrowed bytes (valid while the segment is pinned).
 * Immutable after td_open: concurrent lookups, cursors and enumerations from
 * any number of threads are safe. */
typedef struct TermDict TermDict;

/* Validate the whole structure (O(size), one pass) and open.  QR_ECORRUPT
 * with a detail naming the block when damaged; QR_ENOMEM.  *out is set only
 * on success. */
int td_open(const uint8_t *data, size_t len, TermDict **out, QrError *err);
/* NULL is a no-op. */
void td_close(TermDict *td);
uint64_t td_count(const TermDict *td);
/* Exact lookup; copies the info to *out when found.  O(log(n/32)) first-key
 * probes plus a scan of one block that never materializes a key. */
bool td_lookup(const TermDict *td, const uint8_t *key, size_t key_len, TermPostings *out);

/* A position in the dictionary.  New cursors sit before the first key:
 * td_cursor_next moves to it. */
typedef struct TermCursor TermCursor;

/* Allocated from arena (with a key buffer of the longest key); NULL on OOM. */
TermCursor *td_cursor_new(const TermDict *td, QrArena *arena);
/* Move to the first key >= key; false (and no current key) at the end.
 * A forward seek inside the current block scans from the cursor instead of
 * searching the index. */
bool td_cursor_seek(TermCursor *c, const uint8_t *key, size_t key_len);
/* Move to the next key; false at the end (repeatable). */
bool td_cursor_next(TermCursor *c);
/* The current key (borrowed from the cursor, valid until it moves); NULL
 * when the cursor is not on a key. */
const uint8_t *td_cursor_key(const TermCursor *c, size_t *len);
/* The current key's info (all zero when not on a key). */
void td_cursor_info(const TermCursor *c, TermPostings *out);

/* Call cb for every key that starts with prefix, ascending; cb returns
 * non-zero to stop (then td_prefix returns QR_OK).  max_terms caps the
 * expansion (0 = no cap): when a (max_terms+1)-th key matches, td_prefix
 * stops and returns QR_ELIMIT (the first max_terms keys were delivered).
 * Cost: one seek plus one step per key delivered. */
int td_prefix(const TermDict *td, const uint8_t *prefix, size_t len, size_t max_terms,
              int (*cb)(void *arg, const uint8_t *key, size_t key_len, const TermPostings *tp),
              void *arg, QrError *err);

/* Call cb, ascending, for every key that starts with `scope` (the field
 * byte) and whose remainder is within Levenshtein distance max_edits (0..2;
 * insertions, deletions and substitutions, no transpositions) of `term`,
 * counted in Unicode code points (a byte that starts no valid UTF-8
 * sequence counts as one unit of its own).  cb gets the key and the
 * distance.  Walks the sorted keys sharing DP rows across common prefixes
 * and seeks past a whole prefix range as soon as a row's minimum exceeds
 * max_edits.  max_terms and cb's stop work as for td_prefix.  QR_EINVAL for
 * max_edits outside 0..2, QR_ENOMEM. */
int td_fuzzy(const TermDict *td, const uint8_t *scope, size_t scope_len, const uint8_t *term,
             size_t term_len, int max_edits, size_t max_terms,
             int (*cb)(void *arg, const uint8_t *key, size_t key_len, const TermPostings *tp,
                       int dist),
             void *arg, QrError *err);
/* td_fuzzy that also stops when `ictx` (may be NULL) is cancelled, past its
 * deadline or over its memory cap: checked every 256 keys walked, so an
 * expansion over a huge dictionary ends within a timeout; the error is in
 * both `err` and ictx->err. */
struct IterCtx;
int td_fuzzy_ctx(const TermDict *td, const uint8_t *scope, size_t scope_len, const uint8_t *term,
                 size_t term_len, int max_edits, size_t max_terms,
                 int (*cb)(void *arg, const uint8_t *key, size_t key_len, const TermPostings *tp,
                           int dist),
                 void *arg, struct IterCtx *ictx, QrError *err);

#endif
