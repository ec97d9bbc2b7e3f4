/*
 * analyzer.c — the Analyzer object: run loop, ICU path, folding, stop
 * words, stemming with a per-analyzer stem cache, and token emission.
 *
 * Layer: index/.  Calls the store/ base kit (error, mem, buf), ICU
 * (ubrk, utext, unorm2, u_strFoldCase), libstemmer, analyzer_fast.c and
 * analyzer_stopwords.c.  See analyzer.h for the pipeline and analyzer_fast.c
 * for why both paths yield the same tokens.
 *
 * Both paths end in az_emit, so stop words, stemming, positions and the
 * sink contract are shared; they differ only in where word boundaries and
 * folded forms come from.
 */
#include "index/analyzer_int.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <libstemmer.h>
#include <unicode/uchar.h>
#include <unicode/ustring.h>
#include <unicode/utext.h>
#include <unicode/utf16.h>

#include "store/buf.h"
#include "store/mem.h"
#include "store/util.h"

#define AZ_TOK_INIT 256
#define AZ_U16_INIT 256

/* FNV-1a: tokens are short, and the value only picks a slot. */
static uint32_t az_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static int az_fail(AzRun *r, int code, const char *msg)
{
    if (!r->fail_code)
        r->fail_code = code;
    qr_error_set(r->err, code, "%s", msg);
    return r->fail_code;
}

static int az_oom(AzRun *r) { return az_fail(r, QR_ENOMEM, "out of memory in the text analyzer"); }

static int az_icu_fail(AzRun *r, const char *what, UErrorCode st)
{
    char msg[128];
    if (st == U_MEMORY_ALLOCATION_ERROR) {
        snprintf(msg, sizeof msg, "out of memory in ICU %s", what);
        return az_fail(r, QR_ENOMEM, msg);
    }
    snprintf(msg, sizeof msg, "ICU %s failed: %s", what, u_errorName(st));
    return az_fail(r, QR_EINTERNAL, msg);
}

bool az_tok_reserve(AzRun *r, size_t n)
{
    Analyzer *a = r->a;
    if (n <= a->tok_cap)
        return true;
    size_t cap = a->tok_cap * 2 > n ? a->tok_cap * 2 : n;
    char *p = qr_realloc(a->tok, cap);
    if (!p) {
        az_oom(r);
        return false;
    }
    a->tok = p;
    a->tok_cap = cap;
    return true;
}

static bool az_u16_reserve(AzRun *r, int which, int64_t n)
{
    Analyzer *a = r->a;
    if (n <= a->u16_cap[which])
        return true;
    if (n > INT32_MAX / 2) {
        az_fail(r, QR_ELIMIT, "word too long to normalize");
        return false;
    }
    int32_t cap = a->u16_cap[which] * 2 > n ? a->u16_cap[which] * 2 : (int32_t)n;
    UChar *p = qr_realloc(a->u16[which], (size_t)cap * sizeof(UChar));
    if (!p) {
        az_oom(r);
        return false;
    }
    a->u16[which] = p;
    a->u16_cap[which] = cap;
    return true;
}

/* ---- ICU folding ------------------------------------------------------ */

/* u16[from][0..n) into u16[to], normalized by nz, or case-folded when nz
 * is NULL; grows u16[to] as needed.  Returns the length, or -1 (r->err). */
static int32_t az_transform(AzRun *r, const UNormalizer2 *nz, int from, int32_t n, int to)
{
    Analyzer *a = r->a;
    for (;;) {
        UErrorCode st = U_ZERO_ERROR;
        int32_t m = nz ? unorm2_normalize(nz, a->u16[from], n, a->u16[to], a->u16_cap[to], &st)
                       : u_strFoldCase(a->u16[to], a->u16_cap[to], a->u16[from], n,
                                       U_FOLD_CASE_DEFAULT, &st);
        if (st == U_BUFFER_OVERFLOW_ERROR) {
            if (!az_u16_reserve(r, to, m))
                return -1;
            continue;
        }
        if (U_FAILURE(st)) {
            az_icu_fail(r, nz ? "normalization" : "case folding", st);
            return -1;
        }
        return m;
    }
}

int32_t az_drop_marks(UChar *u, int32_t n)
{
    int32_t m = 0;
    for (int32_t i = 0; i < n;) {
        int32_t from = i;
        UChar32 c;
        U16_NEXT(u, i, n, c);
        if (u_charType(c) != U_NON_SPACING_MARK)
            while (from < i)
                u[m++] = u[from++];
    }
    return m;
}

/* Fold the UTF-8 word s[0..n) the reference way: NFKC, case fold, and with
 * accent_fold NFD / drop Mn / NFC.  The result goes to a->tok, its length
 * to *out_len.  Bad UTF-8 reads as U+FFFD.  0 or a QrCode (r->err set). */
static int az_fold_icu(AzRun *r, const uint8_t *s, size_t n, size_t *out_len)
{
    Analyzer *a = r->a;
    if (!az_u16_reserve(r, 0, (int64_t)n + 1))
        return r->fail_code;
    UErrorCode st = U_ZERO_ERROR;
    int32_t n16 = 0;
    u_strFromUTF8WithSub(a->u16[0], a->u16_cap[0], &n16, (const char *)s, (int32_t)n, 0xFFFD,
                         NULL, &st);
    if (U_FAILURE(st))
        return az_icu_fail(r, "UTF-8 conversion", st);
    n16 = az_transform(r, a->nfkc, 0, n16, 1);
    if (n16 >= 0)
        n16 = az_transform(r, NULL, 1, n16, 0);
    if (n16 >= 0 && a->accent_fold) {
        n16 = az_transform(r, a->nfd, 0, n16, 1);
        if (n16 >= 0)
            n16 = az_transform(r, a->nfc, 1, az_drop_marks(a->u16[1], n16), 0);
    }
    if (n16 < 0)
        return r->fail_code;
    /* The result is in u16[0] on both branches. */
    if (!az_tok_reserve(r, (size_t)n16 * 3 + 1))
        return r->fail_code;
    int32_t n8 = 0;
    st = U_ZERO_ERROR;
    u_strToUTF8WithSub(a->tok, (int32_t)(a->tok_cap > INT32_MAX ? INT32_MAX : a->tok_cap), &n8,
                       a->u16[0], n16, 0xFFFD, NULL, &st);
    if (U_FAILURE(st))
        return az_icu_fail(r, "UTF-8 conversion", st);
    *out_len = (size_t)n8;
    return 0;
}

/* ---- stop words and stems --------------------------------------------- */

static bool az_stop_has(const Analyzer *a, uint32_t h, const char *t, size_t n)
{
    for (uint32_t i = h & a->stop_mask;; i = (i + 1) & a->stop_mask) {
        const AzStopEntry *e = &a->stop[i];
        if (e->len == 0)
            return false;
        if (e->hash == h && e->len == n && memcmp(e->word, t, n) == 0)
            return true;
    }
}

/* Replace the folded token (*t, *n) by its stem, via the cache.  *cid and
 * *cgen identify the cache slot the stem came from (0: none). */
static int az_stem(AzRun *r, uint32_t h, const char **t, size_t *n, uint32_t *cid, uint32_t *cgen)
{
    Analyzer *a = r->a;
    AzStemSlot *slot = NULL;
    uint32_t set = h & (AZ_STEM_SLOTS - 2), idx = set;
    *cid = *cgen = 0;
    if (*n <= AZ_STEM_MAX) {
        for (uint32_t w = 0; w < 2; w++) {
            slot = &a->stem_cache[set + w];
            if (slot->key_len == *n && slot->hash == h && memcmp(slot->key, *t, *n) == 0) {
                a->stats.stem_hits++;
                a->stem_mru[set / 2] = (uint8_t)w;
                *t = slot->stem;
                *n = slot->stem_len;
                *cid = set + w + 1;
                *cgen = slot->gen;
                return 0;
            }
        }
        /* a miss replaces an empty way, else the one used less recently */
        uint32_t w = a->stem_cache[set].key_len == 0       ? 0
                     : a->stem_cache[set + 1].key_len == 0 ? 1
                                                           : 1u - a->stem_mru[set / 2];
        idx = set + w;
        slot = &a->stem_cache[idx];
    }
    if (*n > INT_MAX)
        return 0; /* leave absurdly long tokens unstemmed */
    const sb_symbol *st = sb_stemmer_stem(a->stemmer, (const sb_symbol *)*t, (int)*n);
    if (!st)
        return az_oom(r);
    a->stats.stem_calls++;
    int sl = sb_stemmer_length(a->stemmer);
    if (sl <= 0)
        return 0; /* never emit an empty token: keep the unstemmed form */
    if (slot && sl <= AZ_STEM_MAX) {
        slot->hash = h;
        slot->key_len = (uint8_t)*n;
        memcpy(slot->key, *t, *n);
        slot->stem_len = (uint8_t)sl;
        memcpy(slot->stem, st, (size_t)sl);
        if (++a->stem_gen == 0)
            a->stem_gen = 1; /* wrapped after 4 billion fills: ids stay unique per fill window */
        slot->gen = a->stem_gen;
        a->stem_mru[set / 2] = (uint8_t)(idx - set);
        *cid = idx + 1;
        *cgen = slot->gen;
    }
    *t = (const char *)st;
    *n = (size_t)sl;
    return 0;
}

/* Cut an elided article off the folded word (*t, *n): "l'homme" -> "homme".
 * Only the first apostrophe (' or U+2019) counts, and only when what is
 * before it is one of the language's articles. */
static void az_elide(const Analyzer *a, const char **t, size_t *n)
{
    const char *s = *t;
    for (size_t i = 1; i < *n && i <= 8; i++) {
        size_t al = s[i] == '\'' ? 1
                    : (i + 2 < *n && (uint8_t)s[i] == 0xE2 && (uint8_t)s[i + 1] == 0x80 &&
                       (uint8_t)s[i + 2] == 0x99)
                        ? 3
                        : 0;
        if (!al)
            continue;
        if (i + al >= *n)
            return; /* nothing after the apostrophe */
        for (const char *const *e = a->elision; *e; e++)
            if (strlen(*e) == i && memcmp(*e, s, i) == 0) {
                *t = s + i + al;
                *n -= i + al;
                return;
            }
        return;
    }
}

/* The code point at s[i..n) and its byte length (0 on a bad sequence). */
static uint32_t az_cp(const char *s, size_t i, size_t n, size_t *len)
{
    const uint8_t *u = (const uint8_t *)s + i;
    size_t left = n - i;
    if (u[0] < 0x80) {
        *len = 1;
        return u[0];
    }
    if ((u[0] & 0xE0) == 0xC0 && left >= 2) {
        *len = 2;
        return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    }
    if ((u[0] & 0xF0) == 0xE0 && left >= 3) {
        *len = 3;
        return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    }
    if ((u[0] & 0xF8) == 0xF0 && left >= 4) {
        *len = 4;
        return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
               ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
    }
    *len = 1;
    return 0xFFFD;
}

/* Han ideographs, kana and Hangul syllables: scripts written without
 * spaces (or, for Hangul, in syllable blocks) whose single characters are
 * searched for on their own. */
static bool az_is_cjk(uint32_t c)
{
    return (c >= 0x3040 && c <= 0x30FF) || (c >= 0x31F0 && c <= 0x31FF) ||
           (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x4E00 && c <= 0x9FFF) ||
           (c >= 0xAC00 && c <= 0xD7AF) || (c >= 0xF900 && c <= 0xFAFF) ||
           (c >= 0x20000 && c <= 0x3134F);
}

/* ANALYZE_CJK_GRAMS: each CJK character of a word of two or more
 * characters, as a gram token at the word's position.  Offsets are the
 * character's own when folding kept the word's length, else the word's. */
static int az_emit_grams(AzRun *r, const char *t, size_t n, uint32_t pos, size_t start,
                         size_t end)
{
    size_t chars = 0, cjk = 0;
    for (size_t i = 0, l; i < n; i += l) {
        cjk += az_is_cjk(az_cp(t, i, n, &l));
        chars++;
    }
    if (cjk == 0 || chars < 2)
        return 0;
    bool exact = end - start == n;
    for (size_t i = 0, l; i < n; i += l) {
        if (!az_is_cjk(az_cp(t, i, n, &l)))
            continue;
        Token g = {.text = t + i, .len = (uint32_t)l, .pos = pos,
                   .start = (uint32_t)(exact ? start + i : start),
                   .end = (uint32_t)(exact ? start + i + l : end), .surface = t + i,
                   .surface_len = (uint32_t)l, .is_gram = true};
        int rc = r->sink(r->ctx, &g);
        if (rc)
            return rc;
    }
    return 0;
}

/* Emit one folded token t[0..n) at `pos`: elision, CJK grams, stop words,
 * stemming, sink. */
static int az_emit_one(AzRun *r, const char *t, size_t n, uint64_t pos, size_t start, size_t end)
{
    Analyzer *a = r->a;
    if (pos > UINT32_MAX) {
        az_fail(r, QR_ELIMIT, "word position is past the limit of 4294967295");
        qr_error_hint(r->err, "split the value or start it at a lower position");
        return r->fail_code;
    }
    if (n > UINT32_MAX)
        return az_fail(r, QR_ELIMIT, "a token is longer than 4 GiB");
    if (a->elision && n > 2)
        az_elide(a, &t, &n);
    if (r->cjk_grams && n > 3) {
        int rc = az_emit_grams(r, t, n, (uint32_t)pos, start, end);
        if (rc)
            return rc;
    }
    const char *surface = t;
    size_t surface_len = n;
    uint32_t cid = 0, cgen = 0;
    if (r->use_stop || r->use_stem) {
        uint32_t h = az_hash(t, n);
        if (r->use_stem && n <= AZ_STEM_MAX) {
            /* a set is two 64-byte lines, cold for most words of a large
             * vocabulary: fetch both at once, while the stop words are
             * checked, instead of one miss after the other in az_stem */
            const AzStemSlot *set = &a->stem_cache[h & (AZ_STEM_SLOTS - 2)];
            __builtin_prefetch(set);
            __builtin_prefetch(set + 1);
        }
        if (r->use_stop && az_stop_has(r->a, h, t, n))
            return 0;
        if (r->use_stem) {
            int rc = az_stem(r, h, &t, &n, &cid, &cgen);
            if (rc)
                return rc;
        }
    }
    Token tok = {.text = t, .len = (uint32_t)n, .pos = (uint32_t)pos,
                 .start = (uint32_t)start, .end = (uint32_t)end, .cache_id = cid,
                 .cache_gen = cgen, .surface = surface, .surface_len = (uint32_t)surface_len};
    return r->sink(r->ctx, &tok);
}

/* An abbreviation: dots only between two characters that are neither digits
 * nor dots ("u.s.a", "e.g"), so numbers like "3.14" stay whole. */
static bool az_is_abbrev(const char *t, size_t n)
{
    bool dot = false;
    for (size_t i = 0; i < n; i++) {
        if (t[i] != '.')
            continue;
        if (i == 0 || i + 1 == n)
            return false;
        unsigned char p = (unsigned char)t[i - 1], q = (unsigned char)t[i + 1];
        if ((p >= '0' && p <= '9') || (q >= '0' && q <= '9') || q == '.')
            return false;
        dot = true;
    }
    return dot;
}

int az_emit(AzRun *r, size_t folded_len, size_t start, size_t end)
{
    Analyzer *a = r->a;
    uint64_t pos = (uint64_t)r->pos_base + r->n_words++;
    if (folded_len == 0) {
        if (pos > UINT32_MAX) {
            az_fail(r, QR_ELIMIT, "word position is past the limit of 4294967295");
            return r->fail_code;
        }
        return 0; /* folds to nothing: keeps its position, yields no token */
    }
    const char *t = a->tok;
    size_t n = folded_len;
    if (n > 2 && memchr(t, '.', n) && az_is_abbrev(t, n)) {
        /* "U.S." is indexed as the words u, s: a query typed "US", "U S" or
         * "U.S." then finds it (as SQLite FTS5 and Xapian do), and phrases
         * over the parts work.  Each part takes its own position. */
        size_t i = 0;
        bool first = true;
        while (i < n) {
            size_t j = i;
            while (j < n && t[j] != '.')
                j++;
            if (!first)
                pos = (uint64_t)r->pos_base + r->n_words++;
            /* folding kept the length (ASCII): the part's own offsets */
            size_t ps = start, pe = end;
            if (end - start == n) {
                ps = start + i;
                pe = start + j;
            }
            int rc = az_emit_one(r, t + i, j - i, pos, ps, pe);
            if (rc)
                return rc;
            first = false;
            i = j + 1;
        }
        return 0;
    }
    return az_emit_one(r, t, n, pos, start, end);
}

/* ---- ICU path --------------------------------------------------------- */

/* Tokenize text[b..e) with ICU; b must be a boundary no rule looks across
 * (0, or one az_fast_scan reported) and e one az_span_end returned. */
static int az_icu_span(AzRun *r, size_t b, size_t e)
{
    Analyzer *a = r->a;
    if (e <= b)
        return 0;
    if (e - b > INT32_MAX)
        return az_fail(r, QR_ELIMIT, "text span too long for ICU word breaking (2 GiB at most)");
    UErrorCode st = U_ZERO_ERROR;
    if (!a->bi) {
        a->bi = ubrk_open(UBRK_WORD, "", NULL, 0, &st);
        if (U_FAILURE(st)) {
            ubrk_close(a->bi);
            a->bi = NULL;
            return az_icu_fail(r, "word break iterator", st);
        }
    }
    a->stats.icu_bytes += e - b;
    const uint8_t *s = r->text + b;
    UText ut = UTEXT_INITIALIZER;
    utext_openUTF8(&ut, (const char *)s, (int64_t)(e - b), &st);
    ubrk_setUText(a->bi, &ut, &st);
    if (U_FAILURE(st)) {
        utext_close(&ut);
        return az_icu_fail(r, "word breaking", st);
    }
    int rc = 0;
    int32_t prev = ubrk_first(a->bi), cur;
    while ((cur = ubrk_next(a->bi)) != UBRK_DONE) {
        if (ubrk_getRuleStatus(a->bi) >= UBRK_WORD_NONE_LIMIT) {
            size_t fl = 0;
            rc = az_fold_icu(r, s + prev, (size_t)(cur - prev), &fl);
            if (!rc)
                rc = az_emit(r, fl, b + (size_t)prev, b + (size_t)cur);
            if (rc)
                break;
        }
        prev = cur;
    }
    utext_close(&ut);
    return rc;
}

/* ---- public API ------------------------------------------------------- */

/* Build the folded stop-word set from the language's list. */
static int az_stop_build(Analyzer *a, const char *const *list, QrError *err)
{
    AzRun r = {.a = a, .err = err};
    size_t n = 0;
    while (list[n])
        n++;
    uint32_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    QrBuf pool;
    qr_buf_init(&pool);
    size_t *offs = qr_calloc(n ? n : 1, sizeof *offs);
    size_t *lens = qr_calloc(n ? n : 1, sizeof *lens);
    a->stop = qr_calloc(cap, sizeof *a->stop);
    int rc = offs && lens && a->stop ? 0 : QR_ENOMEM;
    for (size_t i = 0; i < n && !rc; i++) {
        rc = az_fold_icu(&r, (const uint8_t *)list[i], strlen(list[i]), &lens[i]);
        offs[i] = pool.len;
        qr_buf_append(&pool, a->tok, lens[i]);
    }
    if (!rc && !qr_buf_ok(&pool))
        rc = QR_ENOMEM;
    if (!rc) {
        size_t pool_len = 0;
        a->stop_pool = (char *)qr_buf_steal(&pool, &pool_len);
        if (!a->stop_pool)
            rc = QR_ENOMEM;
    }
    if (!rc) {
        a->stop_mask = cap - 1;
        for (size_t i = 0; i < n; i++) {
            const char *w = a->stop_pool + offs[i];
            uint32_t h = az_hash(w, lens[i]);
            if (lens[i] == 0 || az_stop_has(a, h, w, lens[i]))
                continue;
            uint32_t j = h & a->stop_mask;
            while (a->stop[j].len)
                j = (j + 1) & a->stop_mask;
            a->stop[j] = (AzStopEntry){.hash = h, .len = (uint32_t)lens[i], .word = w};
        }
    }
    qr_buf_free(&pool);
    qr_free(offs);
    qr_free(lens);
    if (rc == QR_ENOMEM)
        qr_error_set(err, QR_ENOMEM, "out of memory building the stop-word set");
    return rc;
}

/* A stop-word set from a list of words one per line (a field's own list). */
static int az_stop_build_text(Analyzer *a, const char *text, size_t len, QrError *err)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += text[i] == '\n';
    char *copy = qr_malloc(len + 1);
    const char **list = qr_calloc(n + 2, sizeof *list);
    if (!copy || !list) {
        qr_free(copy);
        qr_free(list);
        return qr_error_set(err, QR_ENOMEM, "out of memory building the stop-word set");
    }
    memcpy(copy, text, len);
    copy[len] = 0;
    size_t k = 0;
    for (char *p = copy; *p && k <= n;) {
        char *e = strchr(p, '\n');
        if (e)
            *e = 0;
        if (*p)
            list[k++] = p;
        if (!e)
            break;
        p = e + 1;
    }
    list[k] = NULL;
    int rc = az_stop_build(a, list, err);
    qr_free(list);
    qr_free(copy);
    return rc;
}

static bool az_is_none(const char *lang) { return !lang || !*lang || strcmp(lang, "none") == 0; }

static int az_bad_language(const char *lang, QrError *err)
{
    for (const char **l = sb_stemmer_list(); *l; l++)
        if (strcmp(*l, lang) == 0)
            return qr_error_set(err, QR_ENOMEM, "out of memory creating the %s stemmer", lang);
    qr_error_set(err, QR_EINVAL, "unknown analyzer language \"%s\"", lang);
    qr_error_detail(err, "libstemmer has no stemming algorithm of that name");
    char list[256];
    size_t o = 0;
    for (const char **l = sb_stemmer_list(); *l && o < sizeof list; l++) {
        int w = snprintf(list + o, sizeof list - o, "%s%s", o ? " " : "", *l);
        if (w < 0)
            break;
        o += (size_t)w;
    }
    qr_error_hint(err, "use \"none\" or one of: %s", list);
    return QR_EINVAL;
}

int analyzer_new(const AnalyzerOpts *opts, Analyzer **out, QrError *err)
{
    if (!out)
        return qr_error_set(err, QR_EINVAL, "analyzer_new needs an output pointer");
    int rc = az_tables_init(err);
    if (rc)
        return rc;
    const char *lang = opts ? opts->language : NULL;
    Analyzer *a = qr_calloc(1, sizeof *a);
    if (!a)
        return qr_error_set(err, QR_ENOMEM, "out of memory creating an analyzer");
    a->accent_fold = opts && opts->accent_fold;
    a->opt_stopwords = opts && opts->stopwords;
    size_t ll = lang ? strlen(lang) : 0;
    /* a field's own stop words make an analyzer of its own: never pooled */
    a->opt_poolable = ll < sizeof a->opt_lang && !(opts && opts->stop_list_len);
    if (a->opt_poolable && ll)
        memcpy(a->opt_lang, lang, ll);
    UErrorCode st = U_ZERO_ERROR;
    a->nfkc = unorm2_getNFKCInstance(&st);
    a->nfd = unorm2_getNFDInstance(&st);
    a->nfc = unorm2_getNFCInstance(&st);
    if (U_FAILURE(st)) {
        rc = qr_error_set(err, QR_EINTERNAL, "ICU normalization data unavailable: %s",
                          u_errorName(st));
        goto fail;
    }
    a->tok = qr_malloc(AZ_TOK_INIT);
    a->u16[0] = qr_malloc(AZ_U16_INIT * sizeof(UChar));
    a->u16[1] = qr_malloc(AZ_U16_INIT * sizeof(UChar));
    if (!a->tok || !a->u16[0] || !a->u16[1]) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory creating an analyzer");
        goto fail;
    }
    a->tok_cap = AZ_TOK_INIT;
    a->u16_cap[0] = a->u16_cap[1] = AZ_U16_INIT;
    if (!az_is_none(lang)) {
        a->stemmer = sb_stemmer_new(lang, "UTF_8");
        if (!a->stemmer) {
            rc = az_bad_language(lang, err);
            goto fail;
        }
        a->stem_cache = qr_calloc(AZ_STEM_SLOTS, sizeof *a->stem_cache);
        a->stem_mru = qr_calloc(AZ_STEM_SLOTS / 2, 1);
        if (!a->stem_cache || !a->stem_mru) {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory creating the stem cache");
            goto fail;
        }
    }
    a->elision = az_elisions_for(lang);
    if (opts && opts->stopwords && opts->stop_list) {
        if ((rc = az_stop_build_text(a, opts->stop_list, opts->stop_list_len, err)) != 0)
            goto fail;
    } else {
        const char *const *list = opts && opts->stopwords && !az_is_none(lang)
                                      ? az_stopwords_for(lang) : NULL;
        if (list && (rc = az_stop_build(a, list, err)) != 0)
            goto fail;
    }
    *out = a;
    return QR_OK;
fail:
    analyzer_free(a);
    return rc;
}

/* ---- the pool (analyzer_acquire) ---- */

/* Idle analyzers, most recently released first; at most AZ_POOL_MAX, and
 * of those at most az_pool_stem_max with a stem cache (4 MiB each): the
 * cores this process may use -- the default indexing thread count, each
 * thread's builder holding one stemming analyzer per language while it
 * indexes -- so idle stem caches stay at cores x 4 MiB instead of 256 MiB. */
#define AZ_POOL_MAX 64
static pthread_mutex_t az_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static Analyzer *az_pool;
static int az_pool_n;
static int az_pool_n_stem;    /* idle ones with a stem cache */
static int az_pool_stem_max;  /* 0 until first needed: qr_cpu_count() */

static int az_clamp_pool(int n)
{
    return n < 1 ? 1 : n > AZ_POOL_MAX ? AZ_POOL_MAX : n;
}

static bool az_same_opts(const Analyzer *a, const AnalyzerOpts *o)
{
    const char *lang = o && o->language ? o->language : "";
    return a->opt_poolable && !(o && o->stop_list_len) && strcmp(a->opt_lang, lang) == 0 &&
           a->opt_stopwords == (o && o->stopwords) && a->accent_fold == (o && o->accent_fold);
}

int analyzer_acquire(const AnalyzerOpts *opts, Analyzer **out, QrError *err)
{
    pthread_mutex_lock(&az_pool_mu);
    for (Analyzer **pp = &az_pool; *pp; pp = &(*pp)->pool_next) {
        if (az_same_opts(*pp, opts)) {
            Analyzer *a = *pp;
            *pp = a->pool_next;
            a->pool_next = NULL;
            az_pool_n--;
            az_pool_n_stem -= a->stem_cache != NULL;
            pthread_mutex_unlock(&az_pool_mu);
            *out = a;
            return QR_OK;
        }
    }
    pthread_mutex_unlock(&az_pool_mu);
    return analyzer_new(opts, out, err);
}

/* Scratch buffers past this go back when an analyzer returns to the pool:
 * one long word must not pin megabytes in every idle analyzer. */
#define AZ_POOL_KEEP_BYTES (64u << 10)

void analyzer_release(Analyzer *a)
{
    if (!a)
        return;
    if (a->tok_cap > AZ_POOL_KEEP_BYTES ||
        (size_t)a->u16_cap[0] * sizeof(UChar) > AZ_POOL_KEEP_BYTES ||
        (size_t)a->u16_cap[1] * sizeof(UChar) > AZ_POOL_KEEP_BYTES) {
        analyzer_free(a); /* a fresh one costs less than what it holds */
        return;
    }
    if (a->opt_poolable) {
        pthread_mutex_lock(&az_pool_mu);
        if (!az_pool_stem_max)
            az_pool_stem_max = az_clamp_pool(qr_cpu_count());
        bool stem = a->stem_cache != NULL;
        if (az_pool_n < AZ_POOL_MAX && (!stem || az_pool_n_stem < az_pool_stem_max)) {
            a->pool_next = az_pool;
            az_pool = a;
            az_pool_n++;
            az_pool_n_stem += stem;
            a = NULL;
        }
        pthread_mutex_unlock(&az_pool_mu);
    }
    analyzer_free(a);
}

void analyzer_pool_set_stem_max(int n)
{
    pthread_mutex_lock(&az_pool_mu);
    az_pool_stem_max = n > 0 ? az_clamp_pool(n) : 0;
    /* idle ones over a lowered bound go now, the least recently released first */
    Analyzer *drop = NULL;
    int seen = 0;
    for (Analyzer **pp = &az_pool; *pp;) {
        Analyzer *a = *pp;
        if (a->stem_cache && az_pool_stem_max && ++seen > az_pool_stem_max) {
            *pp = a->pool_next;
            a->pool_next = drop;
            drop = a;
            az_pool_n--;
            az_pool_n_stem--;
        } else {
            pp = &a->pool_next;
        }
    }
    pthread_mutex_unlock(&az_pool_mu);
    while (drop) {
        Analyzer *next = drop->pool_next;
        analyzer_free(drop);
        drop = next;
    }
}

void analyzer_pool_idle(int *n_idle, int *n_idle_stem)
{
    pthread_mutex_lock(&az_pool_mu);
    *n_idle = az_pool_n;
    *n_idle_stem = az_pool_n_stem;
    pthread_mutex_unlock(&az_pool_mu);
}

void analyzer_free(Analyzer *a)
{
    if (!a)
        return;
    sb_stemmer_delete(a->stemmer);
    ubrk_close(a->bi);
    qr_free(a->stop);
    qr_free(a->stop_pool);
    qr_free(a->stem_cache);
    qr_free(a->stem_mru);
    qr_free(a->tok);
    qr_free(a->u16[0]);
    qr_free(a->u16[1]);
    qr_free(a);
}

int analyzer_run_n(Analyzer *a, const char *text, size_t len, uint32_t pos_base,
                   unsigned flags, TokenSink sink, void *ctx, uint32_t *n_pos, QrError *err)
{
    if (!a || !sink || (!text && len))
        return qr_error_set(err, QR_EINVAL, "analyzer_run needs an analyzer, a sink and text");
    if (len > UINT32_MAX) {
        qr_error_set(err, QR_ELIMIT, "text of %zu bytes is too long to analyze", len);
        qr_error_hint(err, "the limit is 4 GiB per value");
        return QR_ELIMIT;
    }
    AzRun r = {.a = a, .text = (const uint8_t *)text, .len = len, .pos_base = pos_base,
               .flags = flags, .sink = sink, .ctx = ctx, .err = err};
    r.use_stop = a->stop && !(flags & ANALYZE_KEEP_STOPWORDS);
    r.use_stem = a->stemmer && !(flags & ANALYZE_NO_STEM);
    r.cjk_grams = (flags & ANALYZE_CJK_GRAMS) != 0;
    int rc = 0;
    if ((flags & ANALYZE_FORCE_ICU) || !az_fast_available()) {
        rc = az_icu_span(&r, 0, len);
    } else {
        for (size_t i = 0; i < len;) {
            bool bail = false;
            size_t b = 0, bad = 0;
            rc = az_fast_scan(&r, i, &bail, &b, &bad);
            if (rc || !bail)
                break;
            size_t e = az_span_end(r.text, len, bad);
            a->stats.fallbacks++;
            rc = az_icu_span(&r, b, e);
            if (rc)
                break;
            i = e;
        }
    }
    if (!r.fail_code && n_pos)
        *n_pos = (uint32_t)r.n_words;
    return rc;
}

int analyzer_run(Analyzer *a, const char *text, size_t len, uint32_t pos_base, unsigned flags,
                 TokenSink sink, void *ctx, QrError *err)
{
    return analyzer_run_n(a, text, len, pos_base, flags, sink, ctx, NULL, err);
}

const char *const *analyzer_languages(void) { return (const char *const *)sb_stemmer_list(); }

bool analyzer_has_stopwords(const char *language)
{
    return !az_is_none(language) && az_stopwords_for(language) != NULL;
}

bool analyzer_has_elision(const char *language) { return az_elisions_for(language) != NULL; }

bool analyzer_stems(const Analyzer *a) { return a && a->stemmer; }

void analyzer_stats(const Analyzer *a, AnalyzerStats *out)
{
    if (a && out)
        *out = a->stats;
}

uint32_t analyzer_cache_slots(void) { return AZ_STEM_SLOTS; }
