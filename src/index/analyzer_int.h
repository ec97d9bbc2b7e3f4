/*
 * analyzer_int.h — private to the analyzer files of index/.
 *
 * Layer: index/.  Sections per file:
 *   analyzer.c            the Analyzer object, run loop, ICU path, token emit
 *   analyzer_fast.c       code point tables and the fast UAX #29 scanner
 *   analyzer_stopwords.c  built-in stop-word lists
 */
#ifndef QR_ANALYZER_INT_H
#define QR_ANALYZER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <unicode/ubrk.h>
#include <unicode/unorm2.h>

#include "index/analyzer.h"
#include "store/error.h"

/* ---- analyzer.c ------------------------------------------------------- */

/* One stem cache slot; key_len == 0 means empty.  Only tokens and stems of
 * at most AZ_STEM_MAX bytes are cached. */
#define AZ_STEM_MAX 27 /* makes a slot exactly 64 bytes */
/* Power of two; 65536 * 64 bytes = 4 MiB per stemming analyzer, calloc'd:
 * only the slots used are touched.  Sized, and made 2-way set associative
 * (a miss replaces the way used less recently), for a news vocabulary --
 * some 64,000 distinct words: direct-mapped, 8% of a bulk load's words
 * missed, 5% with 2 ways (3% with 131072 slots), each miss paying libstemmer and,
 * in the segment builder, the term and surface-form hash lookups that the
 * cache's ids otherwise memoize. */
#define AZ_STEM_SLOTS 65536
typedef struct AzStemSlot {
    uint32_t hash;
    uint32_t gen;           /* changes whenever the slot is rewritten (Token.cache_gen) */
    uint8_t key_len;
    uint8_t stem_len;
    char key[AZ_STEM_MAX];  /* folded token */
    char stem[AZ_STEM_MAX]; /* its stem */
} AzStemSlot;

/* Open-addressing set of folded stop words (empty: cap == 0). */
typedef struct AzStopEntry {
    uint32_t hash;
    uint32_t len;     /* 0 = empty entry */
    const char *word; /* borrows Analyzer.stop_pool */
} AzStopEntry;

struct Analyzer {
    struct sb_stemmer *stemmer; /* owns; NULL = no stemming */
    bool accent_fold;
    const UNormalizer2 *nfkc;   /* ICU singletons (not owned) */
    const UNormalizer2 *nfd;
    const UNormalizer2 *nfc;
    UBreakIterator *bi;         /* owns; opened on first ICU use */

    AzStopEntry *stop;          /* owns; NULL = no stop words */
    uint32_t stop_mask;         /* capacity - 1 */
    char *stop_pool;            /* owns the folded stop words */

    const char *const *elision; /* static: articles cut before an apostrophe, NULL = none */

    AzStemSlot *stem_cache;     /* owns AZ_STEM_SLOTS slots (NULL = no stemming):
                                   2-way set associative, a set = slots 2k, 2k + 1 */
    uint8_t *stem_mru;          /* owns: per set, the way hit or filled last */
    uint32_t stem_gen;          /* last generation handed to a slot */

    char *tok;                  /* owns: folded UTF-8 of the current word */
    size_t tok_cap;
    UChar *u16[2];              /* owns: UTF-16 scratch for ICU folding */
    int32_t u16_cap[2];

    AnalyzerStats stats;

    /* the options it was made with, for the pool (analyzer_acquire) */
    char opt_lang[32];
    bool opt_stopwords;
    bool opt_poolable;          /* language fit opt_lang */
    struct Analyzer *pool_next; /* idle in the pool: the next idle one */
};

/* State of one analyzer_run call, shared by both paths. */
typedef struct AzRun {
    Analyzer *a;
    const uint8_t *text;  /* borrows the caller's input */
    size_t len;
    uint32_t pos_base;
    unsigned flags;
    bool use_stop;        /* stop words active for this run */
    bool use_stem;        /* stemming active for this run */
    bool cjk_grams;       /* ANALYZE_CJK_GRAMS */
    TokenSink sink;
    void *ctx;
    uint64_t n_words;     /* words seen so far, stop words included */
    int fail_code;        /* QrCode of the error that ended the run, 0 if none
                             (a sink stop is not an error) */
    QrError *err;
} AzRun;

/* Make a->tok hold at least n bytes.  false on OOM (err set). */
bool az_tok_reserve(AzRun *r, size_t n);

/* Remove every Mn (non-spacing mark) code point from u[0..n) in place;
 * returns the new length.  The accent-folding step of both paths. */
int32_t az_drop_marks(UChar *u, int32_t n);

/* Account one word whose folded form is a->tok[0..folded_len) and whose
 * original bytes are text[start..end): stop-word filter, stem, sink.
 * Returns 0, the sink's non-zero value, or a QrCode with r->err set. */
int az_emit(AzRun *r, size_t folded_len, size_t start, size_t end);

/* ---- analyzer_fast.c -------------------------------------------------- */

/* Build the process-wide code point tables (once; thread-safe).  They are
 * derived from ICU: Word_Break classes, which mid-word punctuation ICU's
 * root rules really join (calibrated by probing ICU), and each code
 * point's folded forms.  QR_EINTERNAL if ICU data is missing. */
int az_tables_init(QrError *err);

/* false when the tables contradicted the scanner's ASCII assumptions (a
 * future ICU, say): every run then takes the ICU path.  After init only. */
bool az_fast_available(void);

/* Run the fast scanner over text[from..len).  Emits every word it can
 * prove ICU would produce.  On return 0:
 *   *bail == false: the text was consumed;
 *   *bail == true:  text[*span_start..) needs ICU, starting at a boundary
 *                   no UAX #29 rule looks across; *bad_at (>= *span_start)
 *                   is the first code point the scanner cannot handle.
 * Non-zero: the sink's value or an error from az_emit. */
int az_fast_scan(AzRun *r, size_t from, bool *bail, size_t *span_start, size_t *bad_at);

/* End of the ICU span that contains the code point at bad_at: the first
 * offset e > bad_at where text[e-1] is ASCII white space and text[e] is a
 * printable ASCII non-space (a boundary no rule sees across), else len. */
size_t az_span_end(const uint8_t *text, size_t len, size_t bad_at);

/* ---- analyzer_stopwords.c --------------------------------------------- */

/* The built-in stop-word list (UTF-8, unfolded, NULL-terminated) for a
 * language name or ISO 639 code, or NULL if there is none. */
const char *const *az_stopwords_for(const char *language);
/* The elided articles (folded ASCII, NULL-terminated) of a language whose
 * words take them ("l'homme"), or NULL. */
const char *const *az_elisions_for(const char *language);

#endif
