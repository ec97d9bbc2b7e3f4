/*
 * test_termdict.c — term dictionary: lookups, cursor seek semantics, prefix
 * and fuzzy enumeration against brute-force scans over random and real word
 * lists, writer contract, and damaged bytes (run under ASan too).
 */
#include <criterion/criterion.h>

#include "engine_util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index/termdict.h"
#include "store/mem.h"

/* ---- deterministic random numbers ---- */

static uint64_t rng_state;
static void rng_seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ull + 7; }
static uint64_t rng_u64(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint32_t rng_below(uint32_t n) { return n ? (uint32_t)(rng_u64() % n) : 0; }

/* ---- key sets ---- */

typedef struct Key {
    uint8_t *b;
    size_t n;
    TermPostings tp;
} Key;

typedef struct KeySet {
    Key *k;
    size_t n, cap;
} KeySet;

static int key_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
    size_t n = an < bn ? an : bn;
    int c = n ? memcmp(a, b, n) : 0;
    return c ? c : (an > bn) - (an < bn);
}

static int key_qcmp(const void *x, const void *y)
{
    const Key *a = x, *b = y;
    return key_cmp(a->b, a->n, b->b, b->n);
}

static void ks_add(KeySet *s, const uint8_t *b, size_t n)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->k = realloc(s->k, s->cap * sizeof *s->k);
    }
    Key *k = &s->k[s->n++];
    k->b = malloc(n ? n : 1);
    memcpy(k->b, b, n);
    k->n = n;
}

/* Sort, dedupe, and give every key plausible postings info. */
static void ks_finish(KeySet *s)
{
    qsort(s->k, s->n, sizeof *s->k, key_qcmp);
    size_t j = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (j && key_cmp(s->k[j - 1].b, s->k[j - 1].n, s->k[i].b, s->k[i].n) == 0) {
            free(s->k[i].b);
            continue;
        }
        s->k[j++] = s->k[i];
    }
    s->n = j;
    uint64_t doff = 0, poff = 0;
    for (size_t i = 0; i < s->n; i++) {
        TermPostings *tp = &s->k[i].tp;
        tp->df = rng_below(4) ? 1 + rng_below(100) : (uint32_t)rng_u64();
        tp->total_tf = tp->df + (rng_below(2) ? rng_below(50) : rng_u64() >> 20);
        if (rng_below(10) == 0)
            doff += rng_below(1000); /* mostly back to back, sometimes not */
        tp->docs_off = doff;
        tp->docs_len = 1 + rng_below(rng_below(3) ? 100 : 1u << 30);
        doff += tp->docs_len;
        if (rng_below(5)) {
            tp->pos_off = poff;
            tp->pos_len = 1 + rng_below(5000);
            poff += tp->pos_len;
        } else {
            tp->pos_off = tp->pos_len = 0;
        }
        if (i % 97 == 5) /* backwards offsets must survive the zigzag */
            tp->docs_off = rng_below(50);
    }
}

static void ks_free(KeySet *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->k[i].b);
    free(s->k);
    memset(s, 0, sizeof *s);
}

static void build(const KeySet *s, QrBuf *out)
{
    QrError err;
    qr_error_clear(&err);
    TermDictWriter *w = tdw_new();
    cr_assert(w);
    qr_buf_init(out);
    for (size_t i = 0; i < s->n; i++)
        cr_assert_eq(tdw_add(w, s->k[i].b, s->k[i].n, &s->k[i].tp, &err), 0, "key %zu: %s", i,
                     err.message);
    cr_assert_eq(tdw_finish(w, out, &err), 0);
    tdw_free(w);
}

/* Exactly sized copy so ASan sees any stray read. */
static uint8_t *exact_copy(const uint8_t *src, size_t len)
{
    uint8_t *c = malloc(len ? len : 1);
    if (len)
        memcpy(c, src, len);
    return c;
}

static TermDict *open_ok(const uint8_t *d, size_t n)
{
    TermDict *td = NULL;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(td_open(d, n, &td, &err), 0, "%s: %s", err.message, err.detail);
    return td;
}

static bool tp_eq(const TermPostings *a, const TermPostings *b)
{
    return a->df == b->df && a->total_tf == b->total_tf && a->docs_off == b->docs_off &&
           a->docs_len == b->docs_len && a->pos_off == b->pos_off && a->pos_len == b->pos_len;
}

/* First index with key >= probe. */
static size_t ks_lower(const KeySet *s, const uint8_t *b, size_t n)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (key_cmp(s->k[mid].b, s->k[mid].n, b, n) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- random key sets ---- */

static const char *const pieces[] = {"a", "b", "c", "ab", "é", "ü", "ß", "日", "本", "\xF0\x9F\x98\x80",
                                     "z", "\xFF", "\xC3", "\x80", "\xE2\x82", "aa", "\x00", "x"};

static void ks_random(KeySet *s, size_t n, int max_pieces)
{
    uint8_t buf[256];
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        buf[len++] = (uint8_t)(rng_below(4) ? 1 : rng_below(3) ? 2 : 0xFF); /* field byte */
        int np = (int)rng_below((uint32_t)max_pieces + 1);
        for (int p = 0; p < np; p++) {
            const char *pc = pieces[rng_below(sizeof pieces / sizeof *pieces)];
            size_t pl = pc[0] ? strlen(pc) : 1;
            memcpy(buf + len, pc, pl);
            len += pl;
        }
        ks_add(s, buf, len);
    }
    ks_finish(s);
}

/* A seeded random key set and its encoding. */
static void random_dict(KeySet *s, QrBuf *b, uint64_t seed, size_t n, int max_pieces)
{
    rng_seed(seed);
    memset(s, 0, sizeof *s);
    ks_random(s, n, max_pieces);
    build(s, b);
}

/* Probes: the keys, their prefixes and extensions, neighbours, junk. */
static void probe(const KeySet *s, uint8_t *buf, size_t *n)
{
    const Key *k = s->n ? &s->k[rng_below((uint32_t)s->n)] : NULL;
    size_t len = 0;
    switch (k ? rng_below(6) : 5) {
    case 0: len = k->n; memcpy(buf, k->b, len); break;
    case 1: len = rng_below((uint32_t)k->n + 1); memcpy(buf, k->b, len); break;
    case 2:
        len = k->n;
        memcpy(buf, k->b, len);
        buf[len++] = (uint8_t)rng_below(256);
        break;
    case 3:
        len = k->n;
        memcpy(buf, k->b, len);
        if (len)
            buf[len - 1] += rng_below(2) ? 1 : 255;
        break;
    case 4:
        len = k->n;
        memcpy(buf, k->b, len);
        if (len > 1)
            buf[rng_below((uint32_t)len)] = (uint8_t)rng_below(256);
        break;
    default:
        len = rng_below(6);
        for (size_t i = 0; i < len; i++)
            buf[i] = (uint8_t)(rng_below(2) ? rng_below(256) : 'a' + rng_below(3));
    }
    *n = len;
}

static void check_lookups(const KeySet *s, const TermDict *td)
{
    cr_assert_eq(td_count(td), s->n);
    for (size_t i = 0; i < s->n; i++) {
        TermPostings tp;
        cr_assert(td_lookup(td, s->k[i].b, s->k[i].n, &tp), "key %zu missing", i);
        cr_assert(tp_eq(&tp, &s->k[i].tp), "key %zu info differs", i);
    }
    uint8_t buf[300];
    for (int r = 0; r < 3000; r++) {
        size_t n;
        probe(s, buf, &n);
        size_t i = ks_lower(s, buf, n);
        bool present = i < s->n && key_cmp(s->k[i].b, s->k[i].n, buf, n) == 0;
        TermPostings tp;
        cr_assert_eq(td_lookup(td, buf, n, &tp), present);
        if (present)
            cr_assert(tp_eq(&tp, &s->k[i].tp));
    }
}

static void check_cursor(const KeySet *s, const TermDict *td)
{
    QrArena *a = qr_arena_new(0);
    TermCursor *c = td_cursor_new(td, a);
    cr_assert(c);
    size_t kl;
    cr_assert_null(td_cursor_key(c, &kl));
    for (size_t i = 0; i < s->n; i++) {
        cr_assert(td_cursor_next(c), "next at %zu", i);
        const uint8_t *k = td_cursor_key(c, &kl);
        cr_assert_eq(key_cmp(k, kl, s->k[i].b, s->k[i].n), 0, "key %zu", i);
        TermPostings tp;
        td_cursor_info(c, &tp);
        cr_assert(tp_eq(&tp, &s->k[i].tp));
    }
    cr_assert_not(td_cursor_next(c));
    cr_assert_not(td_cursor_next(c));
    cr_assert_null(td_cursor_key(c, &kl));
    /* random seeks, forward runs (the in-block fast path) and jumps back */
    uint8_t buf[300];
    for (int r = 0; r < 3000; r++) {
        size_t n;
        probe(s, buf, &n);
        size_t i = ks_lower(s, buf, n);
        bool on = td_cursor_seek(c, buf, n);
        cr_assert_eq(on, i < s->n);
        if (!on) {
            cr_assert_null(td_cursor_key(c, &kl));
            continue;
        }
        const uint8_t *k = td_cursor_key(c, &kl);
        cr_assert_eq(key_cmp(k, kl, s->k[i].b, s->k[i].n), 0);
        /* a few short forward seeks from here */
        for (int f = 0; f < 3 && i + 1 < s->n; f++) {
            size_t j = i + 1 + rng_below(40);
            if (j >= s->n)
                break;
            const Key *t = &s->k[j];
            cr_assert(td_cursor_seek(c, t->b, t->n));
            k = td_cursor_key(c, &kl);
            cr_assert_eq(key_cmp(k, kl, t->b, t->n), 0);
            i = j;
        }
        if (rng_below(2) && i + 1 < s->n) {
            cr_assert(td_cursor_next(c));
            k = td_cursor_key(c, &kl);
            cr_assert_eq(key_cmp(k, kl, s->k[i + 1].b, s->k[i + 1].n), 0);
        }
    }
    cr_assert_eq(td_cursor_seek(c, (const uint8_t *)"", 0), s->n > 0);
    qr_arena_free(a);
}

/* ---- prefix ---- */

typedef struct Collect {
    size_t n, stop_after;
    size_t *idx; /* filled with matched positions in the key set */
    int *dist;
    const KeySet *s;
    const uint8_t *last;
    size_t last_len;
    bool ordered;
} Collect;

static void collect_key(Collect *c, const uint8_t *key, size_t kl)
{
    if (c->last && key_cmp(c->last, c->last_len, key, kl) >= 0)
        c->ordered = false;
    c->last = c->s->k[ks_lower(c->s, key, kl)].b;
    c->last_len = kl;
    c->idx[c->n] = ks_lower(c->s, key, kl);
    cr_assert_eq(key_cmp(c->s->k[c->idx[c->n]].b, c->s->k[c->idx[c->n]].n, key, kl), 0);
}

static int prefix_cb(void *arg, const uint8_t *key, size_t kl, const TermPostings *tp)
{
    Collect *c = arg;
    collect_key(c, key, kl);
    cr_assert(tp_eq(tp, &c->s->k[c->idx[c->n]].tp));
    c->n++;
    return c->stop_after && c->n >= c->stop_after;
}

static void check_prefix(const KeySet *s, const TermDict *td, const uint8_t *p, size_t pl)
{
    size_t want = 0, first = ks_lower(s, p, pl);
    for (size_t i = first; i < s->n && s->k[i].n >= pl && (!pl || memcmp(s->k[i].b, p, pl) == 0);
         i++)
        want++;
    Collect c = {.s = s, .ordered = true, .idx = malloc((s->n + 1) * sizeof(size_t))};
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(td_prefix(td, p, pl, 0, prefix_cb, &c, &err), 0);
    cr_assert_eq(c.n, want, "prefix of %zu bytes: %zu terms, want %zu", pl, c.n, want);
    cr_assert(c.ordered);
    for (size_t i = 0; i < c.n; i++)
        cr_assert_eq(c.idx[i], first + i);
    if (want > 1) {
        /* the cap: exactly max_terms delivered, then QR_ELIMIT */
        size_t cap = 1 + rng_below((uint32_t)want - 1);
        free(c.idx);
        memset(&c, 0, sizeof c);
        c.s = s;
        c.ordered = true;
        c.idx = malloc((s->n + 1) * sizeof(size_t));
        cr_assert_eq(td_prefix(td, p, pl, cap, prefix_cb, &c, &err), QR_ELIMIT);
        cr_assert_eq(c.n, cap);
        qr_error_clear(&err);
        free(c.idx);
        /* exactly want is fine */
        memset(&c, 0, sizeof c);
        c.s = s;
        c.idx = malloc((s->n + 1) * sizeof(size_t));
        cr_assert_eq(td_prefix(td, p, pl, want, prefix_cb, &c, &err), 0);
        cr_assert_eq(c.n, want);
        /* stopping early */
        free(c.idx);
        memset(&c, 0, sizeof c);
        c.s = s;
        c.idx = malloc((s->n + 1) * sizeof(size_t));
        c.stop_after = 1;
        cr_assert_eq(td_prefix(td, p, pl, 0, prefix_cb, &c, &err), 0);
        cr_assert_eq(c.n, 1);
    }
    free(c.idx);
}

/* ---- fuzzy: an independent oracle ---- */

/* Units of s: valid UTF-8 sequences (RFC 3629) are code points; any other
 * byte is a unit 0x110000 + byte of its own. */
static size_t units(const uint8_t *s, size_t n, uint32_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                                 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1Fu : len == 3 ? c & 0x0Fu : c & 0x07u;
        bool ok = len > 0 && i + len <= n;
        for (size_t j = 1; ok && j < len; j++) {
            ok = (s[i + j] & 0xC0) == 0x80;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : len == 4 ? 0x10000 : 0;
        if (ok && (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)))
            ok = false;
        if (ok) {
            out[k++] = cp;
            i += len;
        } else {
            out[k++] = 0x110000u + c;
            i++;
        }
    }
    return k;
}

/* The distance td_fuzzy promises (engine_util.c). */
static int levenshtein(const uint32_t *a, size_t an, const uint32_t *b, size_t bn)
{
    return eu_osa(a, an, b, bn);
}

static int fuzzy_cb(void *arg, const uint8_t *key, size_t kl, const TermPostings *tp, int dist)
{
    Collect *c = arg;
    collect_key(c, key, kl);
    cr_assert(tp_eq(tp, &c->s->k[c->idx[c->n]].tp));
    c->dist[c->n] = dist;
    c->n++;
    return c->stop_after && c->n >= c->stop_after;
}

static void check_fuzzy(const KeySet *s, const TermDict *td, const uint8_t *scope, size_t sl,
                        const uint8_t *term, size_t tl, int k)
{
    uint32_t *tu = malloc((tl + 1) * sizeof *tu), *ku = malloc(70000 * sizeof *ku);
    size_t tn = units(term, tl, tu);
    Collect c = {.s = s, .ordered = true, .idx = malloc((s->n + 1) * sizeof(size_t)),
                 .dist = malloc((s->n + 1) * sizeof(int))};
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(td_fuzzy(td, scope, sl, term, tl, k, 0, fuzzy_cb, &c, &err), 0, "%s",
                 err.message);
    cr_assert(c.ordered);
    size_t got = 0;
    for (size_t i = 0; i < s->n; i++) {
        const Key *key = &s->k[i];
        if (key->n < sl || (sl && memcmp(key->b, scope, sl) != 0))
            continue;
        size_t kn = units(key->b + sl, key->n - sl, ku);
        int d = levenshtein(ku, kn, tu, tn);
        if (d > k)
            continue;
        cr_assert_lt(got, c.n, "fuzzy missed key %zu (distance %d, %d edits)", i, d, k);
        cr_assert_eq(c.idx[got], i, "fuzzy result %zu is key %zu, want key %zu (%d edits)", got,
                     c.idx[got], i, k);
        cr_assert_eq(c.dist[got], d);
        got++;
    }
    cr_assert_eq(got, c.n, "fuzzy returned %zu keys, brute force %zu", c.n, got);
    if (got > 1) {
        size_t cap = got - 1;
        Collect c2 = {.s = s, .idx = malloc((s->n + 1) * sizeof(size_t)),
                      .dist = malloc((s->n + 1) * sizeof(int))};
        cr_assert_eq(td_fuzzy(td, scope, sl, term, tl, k, cap, fuzzy_cb, &c2, &err), QR_ELIMIT);
        cr_assert_eq(c2.n, cap);
        free(c2.idx);
        free(c2.dist);
    }
    free(c.idx);
    free(c.dist);
    free(tu);
    free(ku);
}

/* ---- tests ---- */

Test(termdict, random_keys_lookup_cursor_prefix_fuzzy)
{
    for (int round = 0; round < 6; round++) {
        static const size_t sizes[] = {1, 31, 33, 700, 2100, 3400};
        KeySet s;
        QrBuf b;
        random_dict(&s, &b, 100 + round, sizes[round], round < 4 ? 4 : 7);
        uint8_t *d = exact_copy(b.data, b.len);
        TermDict *td = open_ok(d, b.len);
        check_lookups(&s, td);
        check_cursor(&s, td);
        uint8_t buf[300];
        for (int r = 0; r < 60; r++) {
            size_t pl;
            probe(&s, buf, &pl);
            check_prefix(&s, td, buf, pl);
        }
        check_prefix(&s, td, (const uint8_t *)"", 0);
        for (int r = 0; r < 60; r++) {
            size_t tl;
            probe(&s, buf, &tl);
            uint8_t scope = tl ? buf[0] : 1;
            int k = (int)rng_below(3);
            check_fuzzy(&s, td, &scope, 1, tl ? buf + 1 : buf, tl ? tl - 1 : 0, k);
            if (r % 10 == 0) /* no scope at all: the whole dictionary */
                check_fuzzy(&s, td, NULL, 0, buf, tl, k);
        }
        td_close(td);
        free(d);
        qr_buf_free(&b);
        ks_free(&s);
    }
}

Test(termdict, empty_dictionary)
{
    KeySet s = {0};
    QrBuf b;
    build(&s, &b);
    TermDict *td = open_ok(b.data, b.len);
    cr_assert_eq(td_count(td), 0);
    TermPostings tp;
    cr_assert_not(td_lookup(td, (const uint8_t *)"a", 1, &tp));
    QrArena *a = qr_arena_new(0);
    TermCursor *c = td_cursor_new(td, a);
    cr_assert_not(td_cursor_next(c));
    cr_assert_not(td_cursor_seek(c, (const uint8_t *)"", 0));
    Collect col = {.s = &s, .idx = malloc(sizeof(size_t)), .dist = malloc(sizeof(int))};
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(td_prefix(td, (const uint8_t *)"", 0, 0, prefix_cb, &col, &err), 0);
    cr_assert_eq(td_fuzzy(td, NULL, 0, (const uint8_t *)"ab", 2, 2, 0, fuzzy_cb, &col, &err), 0);
    cr_assert_eq(col.n, 0);
    free(col.idx);
    free(col.dist);
    qr_arena_free(a);
    td_close(td);
    td_close(NULL);
    qr_buf_free(&b);
}

Test(termdict, writer_contract)
{
    QrError err;
    qr_error_clear(&err);
    TermDictWriter *w = tdw_new();
    TermPostings tp = {.df = 2, .total_tf = 3};
    cr_assert_eq(tdw_add(w, (const uint8_t *)"\x01" "b", 2, &tp, &err), 0);
    cr_assert_eq(tdw_add(w, (const uint8_t *)"\x01" "b", 2, &tp, &err), QR_EINVAL);
    qr_error_clear(&err);
    cr_assert_eq(tdw_add(w, (const uint8_t *)"\x01" "a", 2, &tp, &err), QR_EINVAL);
    qr_error_clear(&err);
    cr_assert_eq(tdw_add(w, (const uint8_t *)"\x01", 1, &tp, &err), QR_EINVAL);
    qr_error_clear(&err);
    TermPostings bad = {.df = 5, .total_tf = 4};
    cr_assert_eq(tdw_add(w, (const uint8_t *)"\x01" "c", 2, &bad, &err), QR_EINVAL);
    qr_error_clear(&err);
    uint8_t *big = calloc(TD_MAX_KEY_LEN + 2, 1);
    memset(big, 'z', TD_MAX_KEY_LEN + 1);
    cr_assert_eq(tdw_add(w, big, TD_MAX_KEY_LEN + 1, &tp, &err), QR_ELIMIT);
    qr_error_clear(&err);
    cr_assert_eq(tdw_add(w, big, TD_MAX_KEY_LEN, &tp, &err), 0);
    QrBuf b;
    qr_buf_init(&b);
    cr_assert_eq(tdw_finish(w, &b, &err), 0);
    tdw_free(w);
    tdw_free(NULL);
    TermDict *td = open_ok(b.data, b.len);
    TermPostings got;
    cr_assert(td_lookup(td, big, TD_MAX_KEY_LEN, &got));
    cr_assert(td_lookup(td, (const uint8_t *)"\x01" "b", 2, &got));
    cr_assert_eq(got.df, 2);
    td_close(td);
    free(big);
    qr_buf_free(&b);
}

/* ---- real words ---- */

static bool load_words(KeySet *s)
{
    FILE *f = fopen("/usr/share/dict/words", "r");
    if (!f)
        return false;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, "\r\n");
        uint8_t key[520];
        key[0] = 1;
        memcpy(key + 1, line, n);
        ks_add(s, key, n + 1);
        if (s->n % 3 == 0) { /* a second field with a subset */
            key[0] = 2;
            ks_add(s, key, n + 1);
        }
    }
    fclose(f);
    ks_finish(s);
    return true;
}

Test(termdict, real_words)
{
    KeySet s = {0};
    rng_seed(2024);
    if (!load_words(&s)) {
        cr_log_warn("/usr/share/dict/words missing (Debian package wamerican): test skipped");
        cr_skip_test("no word list");
    }
    QrBuf b;
    build(&s, &b);
    uint8_t *d = exact_copy(b.data, b.len);
    TermDict *td = open_ok(d, b.len);
    check_lookups(&s, td);
    check_cursor(&s, td);
    static const char *const prefixes[] = {"", "a", "un", "qu", "ze", "Z", "re", "cou", "ö", "\x7f"};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
        uint8_t p[32];
        p[0] = 1;
        size_t pl = strlen(prefixes[i]);
        memcpy(p + 1, prefixes[i], pl);
        check_prefix(&s, td, p, pl + 1);
    }
    static const char *const terms[] = {"hello", "wrold", "cafe", "emigre", "naive", "zebra", "a",
                                        "xylophone", "quarry", "resume", "ångström", ""};
    uint8_t scope = 1;
    for (size_t i = 0; i < sizeof terms / sizeof *terms; i++)
        for (int k = 0; k <= 2; k++)
            check_fuzzy(&s, td, &scope, 1, (const uint8_t *)terms[i], strlen(terms[i]), k);
    for (int r = 0; r < 20; r++) { /* words of the list, slightly damaged */
        const Key *key = &s.k[rng_below((uint32_t)s.n)];
        uint8_t t[600];
        size_t tl = key->n - 1;
        memcpy(t, key->b + 1, tl);
        if (tl > 1)
            t[rng_below((uint32_t)tl)] = (uint8_t)('a' + rng_below(26));
        check_fuzzy(&s, td, key->b, 1, t, tl, 1 + (r & 1));
    }
    td_close(td);
    free(d);
    qr_buf_free(&b);
    ks_free(&s);
}

/* ---- concurrency ---- */

typedef struct Shared {
    const KeySet *s;
    const TermDict *td;
    int seed;
    int bad;
} Shared;

static void *lookup_thread(void *arg)
{
    Shared *sh = arg;
    uint64_t x = (uint64_t)sh->seed * 7919 + 1;
    QrArena *a = qr_arena_new(0);
    TermCursor *c = td_cursor_new(sh->td, a);
    for (int r = 0; r < 20000; r++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const Key *k = &sh->s->k[(x >> 33) % sh->s->n];
        TermPostings tp;
        if (!td_lookup(sh->td, k->b, k->n, &tp) || !tp_eq(&tp, &k->tp))
            sh->bad++;
        size_t kl = 0;
        const uint8_t *got = td_cursor_seek(c, k->b, k->n) ? td_cursor_key(c, &kl) : NULL;
        if (!got || key_cmp(got, kl, k->b, k->n) != 0)
            sh->bad++;
    }
    qr_arena_free(a);
    return NULL;
}

Test(termdict, concurrent_lookups)
{
    KeySet s;
    QrBuf b;
    random_dict(&s, &b, 5, 5000, 6);
    TermDict *td = open_ok(b.data, b.len);
    pthread_t th[4];
    Shared sh[4];
    for (int i = 0; i < 4; i++) {
        sh[i] = (Shared){.s = &s, .td = td, .seed = i};
        pthread_create(&th[i], NULL, lookup_thread, &sh[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(sh[i].bad, 0);
    }
    td_close(td);
    qr_buf_free(&b);
    ks_free(&s);
}

/* ---- damaged bytes ---- */

static int count_cb(void *arg, const uint8_t *key, size_t kl, const TermPostings *tp)
{
    (void)key;
    (void)kl;
    (void)tp;
    ++*(size_t *)arg;
    return 0;
}

static int count_fz(void *arg, const uint8_t *key, size_t kl, const TermPostings *tp, int d)
{
    (void)d;
    return count_cb(arg, key, kl, tp);
}

Test(termdict, corrupt_bytes_never_crash)
{
    KeySet s;
    QrBuf b;
    random_dict(&s, &b, 77, 700, 5);
    int opened = 0, refused = 0;
    for (int trial = 0; trial < 3000; trial++) {
        size_t len = b.len;
        int kind = (int)rng_below(4);
        if (kind == 0)
            len = rng_below((uint32_t)b.len + 1);
        uint8_t *d = exact_copy(b.data, len);
        if (kind >= 1 && len) {
            int flips = 1 + (int)rng_below(kind == 3 ? 40 : 3);
            for (int f = 0; f < flips; f++)
                d[rng_below((uint32_t)len)] ^= (uint8_t)(1u << rng_below(8));
        }
        TermDict *td = NULL;
        QrError err;
        qr_error_clear(&err);
        int rc = td_open(d, len, &td, &err);
        if (rc != QR_OK) {
            cr_assert(rc == QR_ECORRUPT || rc == QR_EUNSUPPORTED, "rc %d", rc);
            cr_assert_null(td);
            refused++;
            free(d);
            continue;
        }
        opened++;
        /* whatever opened must behave: every operation runs to completion */
        for (size_t i = 0; i < s.n; i += 7) {
            TermPostings tp;
            td_lookup(td, s.k[i].b, s.k[i].n, &tp);
        }
        QrArena *a = qr_arena_new(0);
        TermCursor *c = td_cursor_new(td, a);
        size_t n = 0, kl;
        const uint8_t *prev = NULL;
        uint8_t last[300];
        size_t last_len = 0;
        while (td_cursor_next(c)) {
            const uint8_t *k = td_cursor_key(c, &kl);
            if (prev)
                cr_assert_gt(key_cmp(k, kl, last, last_len), 0, "validated keys ascend");
            memcpy(last, k, kl < sizeof last ? kl : sizeof last);
            last_len = kl < sizeof last ? kl : sizeof last;
            prev = last;
            n++;
        }
        cr_assert_eq(n, td_count(td));
        size_t cnt = 0;
        td_prefix(td, (const uint8_t *)"\x01", 1, 0, count_cb, &cnt, &err);
        uint8_t scope = 1;
        td_fuzzy(td, &scope, 1, (const uint8_t *)"ab", 2, 2, 0, count_fz, &cnt, &err);
        qr_arena_free(a);
        td_close(td);
        free(d);
    }
    cr_assert_gt(refused, 1500, "damage went unnoticed too often (%d refused, %d opened)", refused,
                 opened);
    qr_buf_free(&b);
    ks_free(&s);
}
