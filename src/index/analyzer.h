/*
 * analyzer.h — text analysis: UTF-8 text in, a stream of search tokens out.
 *
 * Layer: index/.  Calls the store/ base kit (error, mem), ICU (word break,
 * normalization, case folding) and libstemmer.  Used by the write path
 * (indexing field text) and by query/ (analyzing query terms the same way).
 *
 * Pipeline, per word:
 *   1. Word breaking per Unicode UAX #29 (ICU ubrk, UBRK_WORD, root locale).
 *      Only segments ICU tags as words (letters, numbers, kana, ideographs:
 *      rule status >= UBRK_WORD_NONE_LIMIT) become tokens; CJK and Thai get
 *      ICU's dictionary segmentation.  Invalid UTF-8 never crashes: each bad
 *      byte sequence reads as U+FFFD, which separates words.
 *   2. Folding: NFKC, then full Unicode case folding (u_strFoldCase); with
 *      accent_fold also NFD, drop every Mn code point, NFC.
 *   3. Elision (french, italian): a leading article and its apostrophe are
 *      cut off ("l'homme" -> "homme", "dell'arte" -> "arte"), as Lucene's
 *      ElisionFilter does.
 *   4. Stop words (optional): dropped when the folded, unstemmed token is in
 *      the language's built-in list, or in the field's own list when one is
 *      given (AnalyzerOpts.stop_list).  Dropped words still use up a position.
 *   5. Stemming (optional): libstemmer on the folded token.
 *   6. CJK single characters (ANALYZE_CJK_GRAMS, the indexer's flag): a word
 *      of two or more Han, kana or Hangul characters is preceded by each of
 *      those characters as a token of its own at the word's position, marked
 *      Token.is_gram, so that one character typed alone finds the words
 *      holding it.  Grams are not words: they do not count in field lengths.
 *
 * What counts as one word (ICU 72 root rules, which the fast path copies):
 *   "don't" "o'neil" "don’t"   apostrophes between letters stay: one token
 *   "3.14" "1,000" "10,5;7"    '.', ',', ';', '\'' between digits: one token
 *   "U.S.A." "e.g." "x.org"    '.' between letters: "u.s.a" (final '.' dropped)
 *   "a_b" "_1" "__"            '_' joins anything; a lone "_" is no token
 *   "user@x.org" "@"           ICU treats '@' as a letter: one token, even alone
 *   "mp3" "3d"                 letters and digits join
 *   "12:30" "a:b" "e-mail"     ':' and '-' separate ("12" "30", "e" "mail")
 *   "a.1" "1.a"                '.' joins only letter-letter or digit-digit
 *
 * Two paths produce the SAME tokens (text, pos, start, end):
 *   - the fast path, a hand-written UAX #29 scanner for text made of ASCII,
 *     Latin-1, Latin Extended-A/B, IPA, Greek, Cyrillic (U+0000-U+04FF) and
 *     General Punctuation (U+2000-U+206F: smart quotes, dashes), minus the
 *     code points WB4 makes transparent (combining marks U+0300-U+036F and
 *     U+0483-U+0489, soft hyphen, ZW(N)J, bidi and invisible format
 *     controls).  Its character classes and per-code-point folded forms are
 *     computed from ICU itself once per process (~15 ms, first analyzer_new);
 *   - the ICU path, used for everything else.  On a code point it cannot
 *     handle, the fast path hands ICU the smallest span around it that
 *     starts and ends on a boundary no UAX #29 rule can see across (from
 *     the start of the current word to the next ASCII white space followed
 *     by printable ASCII), then resumes.  Invalid UTF-8 always goes this way.
 *   ANALYZE_FORCE_ICU sends the whole text through ICU (tests compare both).
 *   Measured on one core: fast path ~230-300 MB/s without stemming (~75-100
 *   MB/s with English stemming and stop words); ICU path ~30 MB/s.
 *
 * Stop-word lists exist for english (also "porter", "en", "eng"), german,
 * french and spanish (and their ISO 639 codes).  For any other language,
 * or language "none", AnalyzerOpts.stopwords is accepted and does nothing
 * (analyzer_has_stopwords tells which) unless the field brings its own list
 * (AnalyzerOpts.stop_list).
 *
 * Ownership: an Analyzer owns its stemmer, break iterator, stem cache and
 * scratch buffers.  It is NOT thread-safe: use one per thread / writer.
 */
#ifndef QR_ANALYZER_H
#define QR_ANALYZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/error.h"

typedef struct AnalyzerOpts {
    const char *language; /* libstemmer algorithm or ISO code ("english", "de", ...);
                             "none", "" or NULL = no stemming */
    bool stopwords;       /* drop stop words of the language (positions still
                             advance past them); no-op without a built-in list */
    bool accent_fold;     /* fold diacritics: "café" -> "cafe" */
    const char *stop_list; /* with stopwords: the field's own stop words, one per line
                              (replacing the built-in list; any language, "none"
                              too); NULL = the built-in list.  Read during the call */
    size_t stop_list_len;  /* bytes of stop_list */
} AnalyzerOpts;

typedef struct Analyzer Analyzer; /* NOT thread-safe: one per thread / writer */

/* Create an analyzer.  `opts` may be NULL (no stemming, no stop words, no
 * accent folding); opts->language is only read during the call.
 * Errors: QR_EINVAL naming the language when libstemmer has no such
 * algorithm (the hint lists the valid names); QR_ENOMEM; QR_EINTERNAL when
 * ICU's normalization data cannot be loaded.  *out is set only on success. */
int analyzer_new(const AnalyzerOpts *opts, Analyzer **out, QrError *err);

/* Release everything the analyzer owns.  NULL is a no-op. */
void analyzer_free(Analyzer *a);

/* For writers that come and go (a segment builder per commit): an idle
 * analyzer made with the same options, or a new one (errors as
 * analyzer_new); analyzer_release gives it back to a process-wide pool of
 * at most 64 idle analyzers, of which at most the stem bound (below) stem
 * (freeing it beyond), its break iterator, stem cache and buffers kept
 * warm.  Tokens do not depend on what an analyzer analyzed before.
 * Thread-safe; an acquired analyzer is the caller's alone until released.
 * Release NULL is a no-op. */
int analyzer_acquire(const AnalyzerOpts *opts, Analyzer **out, QrError *err);
void analyzer_release(Analyzer *a);

/* How many idle stemming analyzers (4 MiB of stem cache each) the pool
 * keeps: n clamped to 1..64, frees the idle ones over it; n <= 0 restores
 * the default, the cores this process may use (qr_cpu_count).  Thread-safe. */
void analyzer_pool_set_stem_max(int n);
/* Idle analyzers in the pool now, and how many of them stem. */
void analyzer_pool_idle(int *n_idle, int *n_idle_stem);

typedef struct Token {
    const char *text;    /* folded (+stemmed) UTF-8, not NUL-terminated; borrowed,
                            valid only during the sink call */
    uint32_t len;        /* bytes in text (> 0) */
    uint32_t pos;        /* pos_base + index of the word among ALL words of the
                            run (stop words included) */
    uint32_t start, end; /* byte offsets of the original word in the input,
                            start < end, for snippets/highlighting */
    uint32_t cache_id;   /* 1..AZ cache slots when the text came from the stem
                            cache, else 0; within one Analyzer, equal non-zero
                            (cache_id, cache_gen) mean equal text — callers may
                            memoize per pair instead of hashing the text */
    uint32_t cache_gen;
    const char *surface; /* the folded form before stemming (== text when nothing was
                            stemmed); borrowed like text */
    uint32_t surface_len;
    bool is_gram;        /* a CJK character of the word at pos (ANALYZE_CJK_GRAMS): not
                            a word of its own, so not counted in field lengths */
} Token;

/* Receives each token in text order.  A non-zero return stops the run and
 * analyzer_run returns that value. */
typedef int (*TokenSink)(void *ctx, const Token *tok);

enum {
    ANALYZE_NO_STEM = 1,        /* skip stemming (prefix or exact-form terms) */
    ANALYZE_FORCE_ICU = 2,      /* bypass the fast path (tests, debugging) */
    ANALYZE_KEEP_STOPWORDS = 4, /* emit stop words too (phrase queries) */
    ANALYZE_CJK_GRAMS = 8,      /* also emit each CJK character of a longer word (indexing,
                                   snippets) */
};

/* Break `text` (len bytes of UTF-8, need not be valid or NUL-terminated;
 * NULL allowed when len == 0) into tokens and call `sink` for each.
 * Returns 0 when the text was consumed; the sink's non-zero value when it
 * stopped the run (err untouched); or a QrCode with err set: QR_EINVAL for
 * a NULL analyzer or sink; QR_ELIMIT when len > UINT32_MAX, the positions
 * would pass UINT32_MAX, or ICU would get a span over 2 GiB; QR_ENOMEM;
 * QR_EINTERNAL on an ICU failure.  Tokens already delivered stay delivered.  Cost: O(len); the fast path runs at
 * hundreds of MB/s, ICU at a few tens, libstemmer dominates on cache misses. */
int analyzer_run(Analyzer *a, const char *text, size_t len, uint32_t pos_base,
                 unsigned flags, TokenSink sink, void *ctx, QrError *err);

/* analyzer_run that also stores in *n_pos (if non-NULL) the number of
 * positions consumed: index of the last word seen + 1 (stop words
 * included; 0 for no words), so the next value's pos_base can continue
 * after it.  When the sink stops the run, the count includes the word it
 * stopped on.  *n_pos is untouched when an error is returned. */
int analyzer_run_n(Analyzer *a, const char *text, size_t len, uint32_t pos_base,
                   unsigned flags, TokenSink sink, void *ctx, uint32_t *n_pos,
                   QrError *err);

/* libstemmer's canonical algorithm names, NULL-terminated, static. */
const char *const *analyzer_languages(void);

/* Slots of the stem cache: the range of Token.cache_id. */
uint32_t analyzer_cache_slots(void);

/* Whether `language` (as accepted by analyzer_new) has a built-in stop-word
 * list, i.e. whether AnalyzerOpts.stopwords does anything for it. */
bool analyzer_has_stopwords(const char *language);
/* Whether `language` cuts elided articles ("l'", "dell'") off words. */
bool analyzer_has_elision(const char *language);
/* Whether the analyzer stems (its language is not "none"). */
bool analyzer_stems(const Analyzer *a);

typedef struct AnalyzerStats {
    uint64_t fast_bytes; /* input bytes the fast path tokenized */
    uint64_t icu_bytes;  /* input bytes handed to ICU (forced or fallback) */
    uint64_t fallbacks;  /* spans the fast path handed to ICU */
    uint64_t stem_hits;  /* stem cache hits */
    uint64_t stem_calls; /* libstemmer calls (cache misses) */
} AnalyzerStats;

/* Counters accumulated since analyzer_new (for benches and tests). */
void analyzer_stats(const Analyzer *a, AnalyzerStats *out);

#endif
