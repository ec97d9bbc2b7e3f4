/*
 * synonyms.h — private to query/: a table's synonyms (schema "synonyms",
 * PUT /tables/{t}/synonyms) as a lookup from a folded word sequence to the
 * texts that stand for it, applied when a query is compiled (search.c).
 *
 * Layer: query/.  Calls the analyzer (index/), cJSON and the base kit.
 *
 * Keys and query words are compared folded (NFKC, case and accents folded,
 * not stemmed, no stop words dropped), words joined by one space: "TTY" and
 * "tty" are the same key, "terminals" is not "terminal" (stemming happens
 * later, to the synonym's text as to any query text).  Groups
 * [["a", "b", "c"]] make every member stand for the others; one-way
 * {"a": ["b"]} makes "a" also find "b", not the reverse.  A key met in
 * several rules gets the union of their texts.
 *
 * A SynMap is immutable and reference-counted: the table keeps the current
 * one (quarry.c), queries hold a reference while compiling.
 */
#ifndef QR_SYNONYMS_H
#define QR_SYNONYMS_H

#include <stddef.h>

#include "index/analyzer.h"
#include "store/buf.h"
#include "store/error.h"

typedef struct SynMap SynMap;

/* Build from the synonyms' JSON json[0, len) (as the schema stores it),
 * folding keys with `fold` (an analyzer with no stemming and no stop
 * words).  One reference.  Errors: QR_EINVAL (not synonyms JSON), QR_ENOMEM,
 * the analyzer's. */
int synmap_build(const char *json, size_t len, Analyzer *fold, SynMap **out, QrError *err);
SynMap *synmap_ref(SynMap *m);
/* Drop a reference; NULL is a no-op. */
void synmap_unref(SynMap *m);
/* Rules held. */
int synmap_count(const SynMap *m);
/* Most words in a key (0 for an empty map). */
int synmap_max_words(const SynMap *m);
/* The texts standing for folded key[0, len), *n of them (borrowed from the
 * map), or NULL. */
const char *const *synmap_get(const SynMap *m, const char *key, size_t len, int *n);
/* Append the folded words of text[0, len) to out, joined by one space;
 * returns the number of words, or -1 with err set. */
int synmap_fold(Analyzer *fold, const char *text, size_t len, QrBuf *out, QrError *err);

#endif
