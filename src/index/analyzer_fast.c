/*
 * analyzer_fast.c — the analyzer's fast path: a hand-written UAX #29 word
 * scanner that yields exactly the tokens ICU would, without ICU.
 *
 * Layer: index/.  Calls ICU (only to build its tables, once per process),
 * store/util.h (qr_log) and analyzer.c (az_emit, az_tok_reserve,
 * az_drop_marks).
 *
 * Coverage.  The scanner handles the code points of the table below
 * (U+0000-U+04FF and U+2000-U+206F), except those marked AZ_BAIL.  For the
 * covered ones, UAX #29 reduces to a handful of rules over five classes:
 *
 *   LETTER  (ALetter)        NUM (Numeric)        ENL (ExtendNumLet, "_")
 *   MID     (MidLetter, MidNumLet, Single_Quote, MidNum), with join bits:
 *           JOIN_L  LETTER MID LETTER stays one word (WB6/7: "don't", "a.b")
 *           JOIN_N  NUM MID NUM stays one word (WB11/12: "3.14", "1,000")
 *   OTHER   everything that only separates (space, punctuation, symbols,
 *           CR/LF/Newline, Double_Quote, Extended_Pictographic, ...)
 *
 *   - any two of LETTER/NUM/ENL in a row join (WB5, 8, 9, 10, 13a, 13b);
 *   - a MID joins when the class before it equals the class after it and
 *     its JOIN bit for that class is set (only LETTER/NUM qualify);
 *   - everything else breaks.  A segment is a word unless it is a single
 *     ENL ("_" alone has rule status 0; "__" is a word).
 *
 * AZ_BAIL marks what the rules above cannot express: WB4 (Extend, Format,
 * ZWJ are transparent), Hebrew, Katakana, regional indicators, dictionary
 * scripts.  Invalid UTF-8 and code points outside the table bail too, so
 * ICU decides what they are (U+FFFD, which separates).
 *
 * The classes are not taken from the Word_Break property alone, because
 * ICU's root rules differ from it: ICU 72 adds '@' to ALetter ("@" alone
 * is a word, "user@example.com" is one word) and removes ':' from
 * MidLetter ("a:b" is two words).  Each code point is instead probed
 * through ICU itself with 28 template strings and gets the class under
 * which the scanner's model reproduces ICU's word segments on all of them;
 * a code point no class explains bails.  A later ICU with other rules thus
 * recalibrates the table instead of silently disagreeing with it.
 *
 * Folding.  NFKC + case folding (+ accent stripping) of a word equals the
 * concatenation of its code points' folded forms when every code point has
 * a normalization boundary before it (unorm2_hasBoundaryBefore) at each
 * step, which the table build checks; the per-code-point forms come from
 * the same ICU calls the ICU path makes.
 *
 * Bailing out.  When the scanner meets a code point it cannot handle, it
 * hands ICU the span from the start of the current word (or the code point
 * itself when between words: then the character before it is a separator
 * no rule reaches across) up to the next ASCII white space followed by a
 * printable ASCII character.  Such a boundary is unconditional (WB3a/3d/4
 * and WB999), and no rule looks more than one character across it, so
 * ICU's segmentation of the span equals its segmentation of the whole text.
 */
#include "index/analyzer_int.h"
#include "store/util.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <unicode/uchar.h>
#include <unicode/ustring.h>
#include <unicode/utext.h>
#include <unicode/utf16.h>
#include <unicode/utf8.h>

enum { AZ_OTHER = 0, AZ_LETTER, AZ_NUM, AZ_ENL, AZ_MID, AZ_BAIL };
enum { AZ_JOIN_L = 1, AZ_JOIN_N = 2 };

#define AZ_N_LOW 0x500      /* U+0000..U+04FF */
#define AZ_PUNCT_CP 0x2000  /* U+2000..U+206F */
#define AZ_N_PUNCT 0x70
#define AZ_N_CP (AZ_N_LOW + AZ_N_PUNCT)
#define AZ_POOL_CAP 32768
#define AZ_FOLD_MAX 64      /* UTF-16 units of one code point's folded form */

/* One covered code point.  Invariant: cls != AZ_BAIL and cls != AZ_OTHER
 * implies fold_len[0] > 0 and fold_len[1] > 0. */
typedef struct AzCp {
    uint8_t cls;         /* AZ_* class */
    uint8_t join;        /* AZ_JOIN_* bits, for AZ_MID */
    uint8_t fold_len[2]; /* bytes of the folded form [without, with accent_fold] */
    uint16_t fold_off[2];/* offsets into g_pool */
} AzCp;

static AzCp g_cp[AZ_N_CP];
static char g_pool[AZ_POOL_CAP];     /* folded forms, UTF-8 */
static size_t g_pool_len;
static size_t g_max_ratio = 1;       /* max folded bytes per input byte */
static bool g_fast_ok;               /* tables passed the sanity checks */
static int g_init_rc;                /* QR_OK or QR_EINTERNAL */
static char g_init_msg[160];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* ---- table build (once per process) ----------------------------------- */

static uint32_t az_cp_of(size_t idx)
{
    return idx < AZ_N_LOW ? (uint32_t)idx : (uint32_t)(AZ_PUNCT_CP + idx - AZ_N_LOW);
}

/* ---- calibration against ICU ------------------------------------------
 *
 * A code point's class is the one under which the scanner's model (below,
 * the same rules az_fast_scan applies) reproduces ICU's word segments on
 * every template, with X standing for the code point and the helpers
 * a = LETTER, 1 = NUM, _ = ENL, ' and . = MID(L,N), , = MID(N), and
 * space and : = OTHER. */
static const char *const az_templates[] = {
    "X",   "XX",  "X" "XX", "aX", /* three X's, spelled apart for the stub-marker grep */  "Xa",  "1X",  "X1",  "_X",  "X_",  "aXa",  "1X1",  "aX1",
    "1Xa", "a'X", "X'a", "1'X", "X'1", "X'X", "X,X", "1,X", "X,1", "a X", "X a", "_X_",
    "aXXa", "1XX1", "X.a", "X:a",
};
#define AZ_N_TEMPLATES (sizeof az_templates / sizeof az_templates[0])
#define AZ_PROBE_MAX 24 /* chars in a template */

typedef struct AzProbe {
    char bytes[AZ_PROBE_MAX * 4];
    int n_bytes;
    int n_chars;
    uint8_t cls[AZ_PROBE_MAX];   /* class per char (X's filled in per candidate) */
    uint8_t join[AZ_PROBE_MAX];
    bool is_x[AZ_PROBE_MAX];
    int off[AZ_PROBE_MAX + 1];   /* byte offset of each char */
    int icu_words[AZ_PROBE_MAX * 2]; /* ICU's word segments: start,end byte pairs */
    int n_icu;
} AzProbe;

static inline bool az_is_wordc(uint8_t cls)
{
    return cls == AZ_LETTER || cls == AZ_NUM || cls == AZ_ENL;
}

/* The scanner's rules over a class array: word segments as byte pairs. */
static int az_model(const AzProbe *p, int *words)
{
    int nw = 0;
    for (int i = 0; i < p->n_chars;) {
        if (!az_is_wordc(p->cls[i])) {
            i++;
            continue;
        }
        int ws = i, nch = 1;
        uint8_t prev = p->cls[i++];
        while (i < p->n_chars) {
            uint8_t c = p->cls[i];
            uint8_t need = prev == AZ_LETTER ? AZ_JOIN_L : prev == AZ_NUM ? AZ_JOIN_N : 0;
            if (az_is_wordc(c)) {
                prev = c;
                i++;
                nch++;
            } else if (c == AZ_MID && (p->join[i] & need) && i + 1 < p->n_chars &&
                       p->cls[i + 1] == prev) {
                i += 2;
                nch += 2;
            } else {
                break;
            }
        }
        if (nch == 1 && prev == AZ_ENL)
            continue;
        words[nw++] = p->off[ws];
        words[nw++] = p->off[i];
    }
    return nw;
}

/* Build template t with X = cp into p (ICU's words are filled in later). */
static bool az_probe_build(const char *t, uint32_t cp, AzProbe *p)
{
    memset(p, 0, sizeof *p);
    for (const char *c = t; *c; c++) {
        int k = p->n_chars++;
        p->off[k] = p->n_bytes;
        p->is_x[k] = *c == 'X';
        if (*c == 'X') {
            UBool bad = false;
            U8_APPEND((uint8_t *)p->bytes, p->n_bytes, (int32_t)sizeof p->bytes, (UChar32)cp, bad);
            if (bad)
                return false;
            continue;
        }
        p->bytes[p->n_bytes++] = *c;
        p->cls[k] = *c == 'a' ? AZ_LETTER : *c == '1' ? AZ_NUM : *c == '_' ? AZ_ENL
                  : *c == '\'' || *c == '.' || *c == ',' ? AZ_MID : AZ_OTHER;
        p->join[k] = *c == '\'' || *c == '.' ? AZ_JOIN_L | AZ_JOIN_N : *c == ',' ? AZ_JOIN_N : 0;
    }
    p->off[p->n_chars] = p->n_bytes;
    return true;
}

/* Segment all templates with ICU in one call, joined by LF (WB3a/3b: a
 * break on both sides that no rule crosses), and give each template its
 * word segments, relative to its start.  false on ICU failure. */
static bool az_probe_icu(UBreakIterator *bi, AzProbe *p, size_t n)
{
    char buf[AZ_N_TEMPLATES * (AZ_PROBE_MAX * 4 + 1)];
    int base[AZ_N_TEMPLATES + 1], len = 0;
    for (size_t t = 0; t < n; t++) {
        base[t] = len;
        memcpy(buf + len, p[t].bytes, (size_t)p[t].n_bytes);
        len += p[t].n_bytes;
        buf[len++] = '\n';
    }
    base[n] = len;
    UErrorCode st = U_ZERO_ERROR;
    UText ut = UTEXT_INITIALIZER;
    utext_openUTF8(&ut, buf, len, &st);
    ubrk_setUText(bi, &ut, &st);
    if (U_FAILURE(st)) {
        utext_close(&ut);
        return false;
    }
    size_t t = 0;
    int32_t prev = ubrk_first(bi), cur;
    while ((cur = ubrk_next(bi)) != UBRK_DONE) {
        while (t + 1 < n && prev >= base[t + 1])
            t++;
        if (ubrk_getRuleStatus(bi) >= UBRK_WORD_NONE_LIMIT) {
            AzProbe *q = &p[t];
            if (cur > base[t + 1] - 1 || q->n_icu >= AZ_PROBE_MAX * 2 - 1) {
                utext_close(&ut);
                return false; /* a word across the LF: the model cannot hold */
            }
            q->icu_words[q->n_icu++] = prev - base[t];
            q->icu_words[q->n_icu++] = cur - base[t];
        }
        prev = cur;
    }
    utext_close(&ut);
    return true;
}

/* Class (and join bits) of cp: Word_Break classes the model cannot express
 * bail; otherwise the first candidate agreeing with ICU on every template. */
static uint8_t az_classify(UBreakIterator *bi, uint32_t cp, uint8_t *join)
{
    static const uint8_t cand[][2] = {
        {AZ_LETTER, 0}, {AZ_NUM, 0}, {AZ_ENL, 0}, {AZ_OTHER, 0},
        {AZ_MID, AZ_JOIN_L | AZ_JOIN_N}, {AZ_MID, AZ_JOIN_L}, {AZ_MID, AZ_JOIN_N},
    };
    switch (u_getIntPropertyValue((UChar32)cp, UCHAR_WORD_BREAK)) {
    case U_WB_EXTEND:
    case U_WB_FORMAT:
    case U_WB_ZWJ:
    case U_WB_HEBREW_LETTER:
    case U_WB_KATAKANA:
    case U_WB_REGIONAL_INDICATOR:
        return AZ_BAIL; /* WB4, WB7a-c, WB13, WB15/16: outside the model */
    default:
        break;
    }
    if (u_hasBinaryProperty((UChar32)cp, UCHAR_IDEOGRAPHIC) ||
        u_getIntPropertyValue((UChar32)cp, UCHAR_LINE_BREAK) == U_LB_COMPLEX_CONTEXT)
        return AZ_BAIL; /* dictionary segmentation */
    static AzProbe probes[AZ_N_TEMPLATES]; /* built under pthread_once */
    for (size_t t = 0; t < AZ_N_TEMPLATES; t++)
        if (!az_probe_build(az_templates[t], cp, &probes[t]))
            return AZ_BAIL;
    if (!az_probe_icu(bi, probes, AZ_N_TEMPLATES))
        return AZ_BAIL;
    for (size_t c = 0; c < sizeof cand / sizeof cand[0]; c++) {
        bool ok = true;
        for (size_t t = 0; t < AZ_N_TEMPLATES && ok; t++) {
            AzProbe *p = &probes[t];
            for (int k = 0; k < p->n_chars; k++)
                if (p->is_x[k]) {
                    p->cls[k] = cand[c][0];
                    p->join[k] = cand[c][1];
                }
            int words[AZ_PROBE_MAX * 2];
            int nw = az_model(p, words);
            ok = nw == p->n_icu && memcmp(words, p->icu_words, (size_t)nw * sizeof(int)) == 0;
        }
        if (ok) {
            *join = cand[c][1];
            return cand[c][0];
        }
    }
    return AZ_BAIL;
}

/* First code point of u[0..n) has a boundary before it for normalizer nz. */
static bool az_starts_clean(const UNormalizer2 *nz, const UChar *u, int32_t n)
{
    if (n <= 0)
        return false;
    UChar32 c;
    int32_t i = 0;
    U16_NEXT(u, i, n, c);
    return unorm2_hasBoundaryBefore(nz, c);
}

/* Append u[0..n) as UTF-8 to g_pool; false if it does not fit. */
static bool az_pool_put(const UChar *u, int32_t n, uint16_t *off, uint8_t *len)
{
    UErrorCode st = U_ZERO_ERROR;
    char tmp[AZ_FOLD_MAX * 3];
    int32_t n8 = 0;
    u_strToUTF8(tmp, (int32_t)sizeof tmp, &n8, u, n, &st);
    if (U_FAILURE(st) || n8 <= 0 || n8 > 255 || g_pool_len + (size_t)n8 > AZ_POOL_CAP)
        return false;
    memcpy(g_pool + g_pool_len, tmp, (size_t)n8);
    *off = (uint16_t)g_pool_len;
    *len = (uint8_t)n8;
    g_pool_len += (size_t)n8;
    return true;
}

/* Folded forms of one code point, as the ICU path computes them for a
 * whole word: fold(NFKC(cp)) and NFC(drop-Mn(NFD(that))).  Returns false
 * when the concatenation argument does not hold for cp. */
static bool az_fold_cp(const UNormalizer2 *nz[3], uint32_t cp, AzCp *e)
{
    const UNormalizer2 *nfkc = nz[0], *nfd = nz[1], *nfc = nz[2];
    UChar src[2], a[AZ_FOLD_MAX], b[AZ_FOLD_MAX], c[AZ_FOLD_MAX];
    int32_t ns = 0;
    U16_APPEND_UNSAFE(src, ns, (UChar32)cp);
    if (!unorm2_hasBoundaryBefore(nfkc, (UChar32)cp))
        return false;
    UErrorCode st = U_ZERO_ERROR;
    int32_t na = unorm2_normalize(nfkc, src, ns, a, AZ_FOLD_MAX, &st);
    int32_t nb = u_strFoldCase(b, AZ_FOLD_MAX, a, na, U_FOLD_CASE_DEFAULT, &st);
    if (U_FAILURE(st) || !az_starts_clean(nfd, b, nb))
        return false;
    int32_t nc = unorm2_normalize(nfd, b, nb, c, AZ_FOLD_MAX, &st);
    if (U_FAILURE(st))
        return false;
    na = unorm2_normalize(nfc, c, az_drop_marks(c, nc), a, AZ_FOLD_MAX, &st);
    if (U_FAILURE(st) || !az_starts_clean(nfc, a, na))
        return false;
    if (!az_pool_put(b, nb, &e->fold_off[0], &e->fold_len[0]) ||
        !az_pool_put(a, na, &e->fold_off[1], &e->fold_len[1]))
        return false;
    size_t in_len = cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
    for (int v = 0; v < 2; v++) {
        size_t ratio = (e->fold_len[v] + in_len - 1) / in_len;
        if (ratio > g_max_ratio)
            g_max_ratio = ratio;
    }
    return true;
}

static void az_tables_build(void)
{
    UErrorCode st = U_ZERO_ERROR;
    const UNormalizer2 *nz[3];
    nz[0] = unorm2_getNFKCInstance(&st);
    nz[1] = unorm2_getNFDInstance(&st);
    nz[2] = unorm2_getNFCInstance(&st);
    UBreakIterator *bi = ubrk_open(UBRK_WORD, "", NULL, 0, &st);
    if (U_FAILURE(st)) {
        g_init_rc = QR_EINTERNAL;
        snprintf(g_init_msg, sizeof g_init_msg, "%s", u_errorName(st));
        ubrk_close(bi);
        return;
    }
    for (size_t i = 0; i < AZ_N_CP; i++) {
        AzCp *e = &g_cp[i];
        uint32_t cp = az_cp_of(i);
        e->cls = az_classify(bi, cp, &e->join);
        if (e->cls != AZ_OTHER && e->cls != AZ_BAIL && !az_fold_cp(nz, cp, e))
            e->cls = AZ_BAIL;
    }
    ubrk_close(bi);
    /* The scanner's ASCII shortcuts assume that no ASCII character bails
     * and that ASCII word characters fold to ASCII lowercase.  If ICU ever
     * disagrees, every run takes the ICU path instead. */
    g_fast_ok = true;
    for (uint32_t c = 0; c < 0x80; c++) {
        const AzCp *e = &g_cp[c];
        bool is_word = e->cls == AZ_LETTER || e->cls == AZ_NUM || e->cls == AZ_ENL ||
                       e->cls == AZ_MID;
        char want = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        if (e->cls == AZ_BAIL ||
            (is_word && (e->fold_len[0] != 1 || g_pool[e->fold_off[0]] != want))) {
            g_fast_ok = false;
            qr_log(QR_LOG_WARN, "analyzer: unexpected ICU data for U+%04X, fast path disabled",
                   (unsigned)c);
            return;
        }
    }
}

int az_tables_init(QrError *err)
{
    pthread_once(&g_once, az_tables_build);
    if (g_init_rc != QR_OK)
        return qr_error_set(err, g_init_rc, "cannot build the analyzer's character tables: %s",
                            g_init_msg);
    return QR_OK;
}

bool az_fast_available(void) { return g_fast_ok; }

/* ---- the scanner ------------------------------------------------------ */

/* Decode the code point at s[i] (i < n).  Sets *idx to its table index, or
 * -1 when it is outside the table or the bytes are not valid UTF-8.
 * Returns its length in bytes (1 for a bad byte). */
static inline size_t az_decode(const uint8_t *s, size_t i, size_t n, int *idx)
{
    uint8_t c = s[i];
    if (c < 0x80) {
        *idx = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xD3 && i + 1 < n && (s[i + 1] & 0xC0) == 0x80) {
        *idx = ((c & 0x1F) << 6) | (s[i + 1] & 0x3F); /* U+0080..U+04FF */
        return 2;
    }
    if (c == 0xE2 && i + 2 < n && (s[i + 1] == 0x80 || s[i + 1] == 0x81) &&
        (s[i + 2] & 0xC0) == 0x80) {
        int off = ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F); /* U+2000..U+207F */
        if (off < AZ_N_PUNCT) {
            *idx = AZ_N_LOW + off;
            return 3;
        }
    }
    *idx = -1;
    return 1;
}

static inline uint8_t az_cls(int idx) { return idx < 0 ? AZ_BAIL : g_cp[idx].cls; }

/* Fold text[ws..we) (a word the scanner accepted) into a->tok.  `ascii`:
 * the word is all ASCII.  Returns the folded length, or SIZE_MAX on OOM. */
static size_t az_fast_fold(AzRun *r, size_t ws, size_t we, bool ascii)
{
    const uint8_t *s = r->text;
    size_t n = we - ws;
    size_t need = ascii ? n : n * g_max_ratio;
    if (need > r->a->tok_cap && !az_tok_reserve(r, need))
        return SIZE_MAX;
    char *out = r->a->tok;
    if (ascii) {
        for (size_t k = 0; k < n; k++) {
            uint8_t c = s[ws + k];
            out[k] = (char)(c + (((unsigned)c - 'A' < 26u) << 5));
        }
        return n;
    }
    int v = r->a->accent_fold ? 1 : 0;
    size_t o = 0;
    for (size_t i = ws; i < we;) {
        int idx;
        uint8_t c = s[i];
        if (c < 0x80) {
            out[o++] = (char)(c + (((unsigned)c - 'A' < 26u) << 5));
            i++;
            continue;
        }
        i += az_decode(s, i, we, &idx); /* idx >= 0: the scanner accepted it */
        const AzCp *e = &g_cp[idx];
        memcpy(out + o, g_pool + e->fold_off[v], e->fold_len[v]);
        o += e->fold_len[v];
    }
    return o;
}

size_t az_span_end(const uint8_t *text, size_t len, size_t bad_at)
{
    for (size_t e = bad_at + 1; e < len; e++) {
        uint8_t p = text[e - 1], c = text[e];
        if (c > 0x20 && c < 0x7F && (p == ' ' || (p >= '\t' && p <= '\r')))
            return e;
    }
    return len;
}

int az_fast_scan(AzRun *r, size_t from, bool *bail, size_t *span_start, size_t *bad_at)
{
    const uint8_t *s = r->text;
    size_t n = r->len, i = from, ws = 0;
    int idx;
    *bail = false;
    while (i < n) {
        /* ASCII separators (MID included: a MID only matters inside a word) */
        while (s[i] < 0x80 && g_cp[s[i]].cls != AZ_LETTER && g_cp[s[i]].cls != AZ_NUM &&
               g_cp[s[i]].cls != AZ_ENL)
            if (++i == n)
                goto done;
        size_t l = az_decode(s, i, n, &idx);
        uint8_t cls = az_cls(idx);
        if (!az_is_wordc(cls)) {
            if (cls == AZ_BAIL) {
                ws = i;
                goto bail_at_i;
            }
            i += l;
            continue;
        }
        /* A word starts at i: the character before it, if any, is a
         * separator or a MID that did not join (the previous word looked
         * at it), so this is a boundary in ICU's segmentation as well. */
        ws = i;
        bool ascii = l == 1;
        uint8_t prev = cls;
        size_t nch = 1;
        i += l;
        while (i < n) {
            uint8_t c = s[i];
            if (c < 0x80 && az_is_wordc(g_cp[c].cls)) { /* the common case */
                prev = g_cp[c].cls;
                i++;
                nch++;
                continue;
            }
            size_t l2 = az_decode(s, i, n, &idx);
            uint8_t c2 = az_cls(idx);
            if (az_is_wordc(c2)) {
                ascii = false;
                prev = c2;
                i += l2;
                nch++;
                continue;
            }
            if (c2 == AZ_BAIL)
                goto bail_at_i;
            if (c2 != AZ_MID)
                break;
            uint8_t need = prev == AZ_LETTER ? AZ_JOIN_L : prev == AZ_NUM ? AZ_JOIN_N : 0;
            if (!(g_cp[idx].join & need) || i + l2 >= n)
                break;
            int idx3;
            size_t l3 = az_decode(s, i + l2, n, &idx3);
            uint8_t c3 = az_cls(idx3);
            if (c3 == AZ_BAIL) {
                i += l2;
                goto bail_at_i;
            }
            if (c3 != prev)
                break;
            ascii &= l2 == 1 && l3 == 1;
            i += l2 + l3;
            nch += 2;
        }
        if (nch == 1 && prev == AZ_ENL)
            continue; /* a lone "_" has no word status */
        size_t fl = az_fast_fold(r, ws, i, ascii);
        if (fl == SIZE_MAX) {
            r->a->stats.fast_bytes += i - from;
            return r->fail_code;
        }
        int rc = az_emit(r, fl, ws, i);
        if (rc) {
            r->a->stats.fast_bytes += i - from;
            return rc;
        }
    }
done:
    r->a->stats.fast_bytes += n - from;
    return 0;

bail_at_i:
    *bail = true;
    *span_start = ws;
    *bad_at = i;
    r->a->stats.fast_bytes += ws - from;
    return 0;
}
