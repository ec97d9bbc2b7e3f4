/*
 * test_analyzer.c — index/analyzer: folding, segmentation, stop words,
 * stemming, offsets, errors; and the differential test: the fast path and
 * ANALYZE_FORCE_ICU must produce identical token streams (text, pos,
 * start, end) on real text (the debian-packages corpus), random punctuation-
 * heavy ASCII, random strings over every code point the fast path covers
 * (mixed with ones it does not), and random bytes.
 */
#include <criterion/criterion.h>

#include <cjson/cJSON.h>
#include <libstemmer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "index/analyzer.h"
#include "store/mem.h"
#include "store/util.h"

#define CORPUS "../shared/corpora/debian-packages/docs.jsonl.gz"

/* ---- helpers ---------------------------------------------------------- */

typedef struct Rec {
    char *text;
    uint32_t len, pos, start, end;
    uint32_t cache_id, cache_gen;
} Rec;

typedef struct Toks {
    Rec *v;
    size_t n, cap;
    int stop_after; /* sink returns 42 after this many tokens (0 = never) */
} Toks;

static int collect(void *ctx, const Token *t)
{
    Toks *k = ctx;
    cr_assert(t->len > 0 && t->start < t->end, "empty token or span");
    if (k->n == k->cap) {
        k->cap = k->cap ? k->cap * 2 : 16;
        k->v = realloc(k->v, k->cap * sizeof *k->v);
    }
    Rec *r = &k->v[k->n++];
    r->text = malloc(t->len + 1);
    memcpy(r->text, t->text, t->len);
    r->text[t->len] = '\0';
    r->len = t->len;
    r->cache_id = t->cache_id;
    r->cache_gen = t->cache_gen;
    r->pos = t->pos;
    r->start = t->start;
    r->end = t->end;
    return k->stop_after && (int)k->n == k->stop_after ? 42 : 0;
}

static void toks_free(Toks *k)
{
    for (size_t i = 0; i < k->n; i++)
        free(k->v[i].text);
    free(k->v);
    memset(k, 0, sizeof *k);
}

static Analyzer *mk(const char *lang, bool stop, bool accent)
{
    AnalyzerOpts o = {.language = lang, .stopwords = stop, .accent_fold = accent};
    Analyzer *a = NULL;
    QrError err = {0};
    int rc = analyzer_new(&o, &a, &err);
    cr_assert_eq(rc, 0, "analyzer_new(%s): %s", lang ? lang : "NULL", err.message);
    return a;
}

static Toks run(Analyzer *a, const char *s, size_t n, unsigned flags)
{
    Toks k = {0};
    QrError err = {0};
    int rc = analyzer_run(a, s, n, 0, flags, collect, &k, &err);
    cr_assert_eq(rc, 0, "analyzer_run: %s", err.message);
    return k;
}

/* Token texts joined by single spaces. */
static char *joined(const Toks *k)
{
    size_t n = 1;
    for (size_t i = 0; i < k->n; i++)
        n += k->v[i].len + 1;
    char *s = calloc(1, n), *p = s;
    for (size_t i = 0; i < k->n; i++) {
        if (i)
            *p++ = ' ';
        memcpy(p, k->v[i].text, k->v[i].len);
        p += k->v[i].len;
    }
    return s;
}

/* Both paths must yield `want` (token texts joined by spaces). */
static void expect(Analyzer *a, const char *in, unsigned flags, const char *want)
{
    for (int forced = 0; forced < 2; forced++) {
        Toks k = run(a, in, strlen(in), flags | (forced ? ANALYZE_FORCE_ICU : 0));
        char *got = joined(&k);
        cr_expect_str_eq(got, want, "%s path, input \"%s\"", forced ? "ICU" : "fast", in);
        free(got);
        toks_free(&k);
    }
}

/* Fast path and ICU path agree exactly on s[0..n); returns tokens seen. */
static size_t same_both(Analyzer *a, const char *s, size_t n, unsigned flags)
{
    Toks f = run(a, s, n, flags), i = run(a, s, n, flags | ANALYZE_FORCE_ICU);
    bool ok = f.n == i.n;
    size_t bad = 0;
    for (size_t j = 0; ok && j < f.n; j++) {
        const Rec *x = &f.v[j], *y = &i.v[j];
        ok = x->len == y->len && memcmp(x->text, y->text, x->len) == 0 && x->pos == y->pos &&
             x->start == y->start && x->end == y->end;
        bad = j;
    }
    if (!ok) {
        char *fj = joined(&f), *ij = joined(&i);
        cr_log_error("input (%zu bytes): %.*s", n, (int)(n > 400 ? 400 : n), s);
        cr_log_error("first difference near token %zu", bad);
        if (bad < f.n && bad < i.n)
            cr_log_error("fast [%s] %u %u-%u / icu [%s] %u %u-%u", f.v[bad].text, f.v[bad].pos,
                         f.v[bad].start, f.v[bad].end, i.v[bad].text, i.v[bad].pos,
                         i.v[bad].start, i.v[bad].end);
        cr_assert_fail("fast path differs from ICU:\n fast: %.300s\n icu:  %.300s", fj, ij);
    }
    size_t nt = f.n;
    toks_free(&f);
    toks_free(&i);
    return nt;
}

#define PICK(lit) ((lit)[rnd(sizeof(lit) - 1)])

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static size_t put_utf8(char *p, uint32_t cp)
{
    if (cp < 0x80) {
        p[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        p[0] = (char)(0xC0 | (cp >> 6));
        p[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        p[0] = (char)(0xE0 | (cp >> 12));
        p[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        p[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    p[0] = (char)(0xF0 | (cp >> 18));
    p[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    p[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    p[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- fixed examples --------------------------------------------------- */

Test(analyzer, case_folding)
{
    Analyzer *a = mk("none", false, false);
    expect(a, "Hello WORLD MiXeD", 0, "hello world mixed");
    expect(a, "ÀÉÎÕÜ ΣΟΦΊΑ ПРИВЕТ", 0, "àéîõü σοφία привет");
    expect(a, "Straße STRASSE \xE1\xBA\x9E", 0, "strasse strasse ss"); /* U+1E9E */
    analyzer_free(a);
}

Test(analyzer, nfkc)
{
    Analyzer *a = mk(NULL, false, false);
    expect(a, "\xEF\xAC\x81le \xEF\xAC\x82ow", 0, "file flow");     /* U+FB01, U+FB02 */
    expect(a, "\xEF\xBC\xA6\xEF\xBD\x95\xEF\xBD\x8C\xEF\xBD\x8C", 0, "full"); /* fullwidth */
    expect(a, "\xC2\xB5s \xC2\xAA" "b", 0, "\xCE\xBCs ab"); /* micro sign, ordinal */
    analyzer_free(a);
}

Test(analyzer, accents)
{
    Analyzer *plain = mk(NULL, false, false), *fold = mk(NULL, false, true);
    expect(plain, "Café Naïve Ångström", 0, "café naïve ångström");
    expect(fold, "Café Naïve Ångström Øre", 0, "cafe naive angstrom øre");
    /* decomposed input (e + U+0301) folds like the precomposed form */
    expect(plain, "cafe\xCC\x81", 0, "café");
    expect(fold, "cafe\xCC\x81", 0, "cafe");
    analyzer_free(plain);
    analyzer_free(fold);
}

Test(analyzer, cjk_and_thai_segmentation)
{
    Analyzer *a = mk(NULL, false, false);
    const char *ja = "日本語のテキストを分割します";
    Toks k = run(a, ja, strlen(ja), 0);
    cr_expect_geq(k.n, 3, "Japanese gave %zu tokens", k.n);
    for (size_t i = 0; i < k.n; i++) {
        cr_expect_eq(k.v[i].pos, i);
        cr_expect(memcmp(ja + k.v[i].start, k.v[i].text, k.v[i].len) == 0);
    }
    toks_free(&k);
    const char *th = "สวัสดีครับภาษาไทย";
    k = run(a, th, strlen(th), 0);
    cr_expect_geq(k.n, 2, "Thai gave %zu tokens", k.n);
    toks_free(&k);
    same_both(a, ja, strlen(ja), 0);
    analyzer_free(a);
}

Test(analyzer, stemming)
{
    Analyzer *a = mk("english", false, false);
    expect(a, "running Runs CONNECTIONS ponies", 0, "run run connect poni");
    expect(a, "running", ANALYZE_NO_STEM, "running");
    analyzer_free(a);
    a = mk("german", false, false);
    expect(a, "Häuser", 0, "haus");
    analyzer_free(a);
}

/* Stems from the cache are libstemmer's, and equal (cache_id, cache_gen)
 * name equal text (the segment builder memoizes term ids by them), with
 * far more distinct words than the cache has slots, so sets overflow and
 * ways are replaced. */
Test(analyzer, stem_cache_matches_libstemmer)
{
    Analyzer *a = mk("english", false, false);
    struct sb_stemmer *ref = sb_stemmer_new("english", "UTF_8");
    size_t cap = 4u << 20, n = 0;
    char *text = malloc(cap);
    for (int w = 0; w < 300000; w++) {
        /* a skewed mix: a few hundred frequent words among many rare ones */
        int len = w % 3 ? 1 + (int)rnd(3) : 4 + (int)rnd(8);
        for (int i = 0; i < len; i++)
            text[n++] = PICK("etaoinshrdlucmfgy");
        text[n++] = ' ';
    }
    uint32_t slots = analyzer_cache_slots();
    uint32_t *seen_gen = calloc((size_t)slots + 1, sizeof *seen_gen);
    char **seen_text = calloc((size_t)slots + 1, sizeof *seen_text);
    for (int round = 0; round < 2; round++) {
        Toks raw = run(a, text, n, ANALYZE_NO_STEM), st = run(a, text, n, 0);
        cr_assert_eq(raw.n, st.n);
        for (size_t i = 0; i < raw.n; i++) {
            const sb_symbol *s = sb_stemmer_stem(ref, (const sb_symbol *)raw.v[i].text,
                                                 (int)raw.v[i].len);
            int sl = sb_stemmer_length(ref);
            cr_assert(sl == (int)st.v[i].len && memcmp(s, st.v[i].text, (size_t)sl) == 0,
                      "stem of %s: %.*s vs %s", raw.v[i].text, sl, s, st.v[i].text);
            uint32_t id = st.v[i].cache_id, gen = st.v[i].cache_gen;
            if (!id)
                continue;
            cr_assert_leq(id, slots);
            if (seen_gen[id] == gen && seen_text[id]) {
                cr_assert_str_eq(seen_text[id], st.v[i].text, "cache id %u gen %u", id, gen);
            } else {
                free(seen_text[id]);
                seen_text[id] = strdup(st.v[i].text);
                seen_gen[id] = gen;
            }
        }
        toks_free(&raw);
        toks_free(&st);
    }
    AnalyzerStats stats;
    analyzer_stats(a, &stats);
    cr_expect_gt(stats.stem_hits, 0);
    cr_expect_gt(stats.stem_calls, slots, "the words overflow the cache");
    for (uint32_t i = 0; i <= slots; i++)
        free(seen_text[i]);
    free(seen_text);
    free(seen_gen);
    free(text);
    sb_stemmer_delete(ref);
    analyzer_free(a);
}

Test(analyzer, stopwords_keep_positions)
{
    Analyzer *a = mk("english", true, false);
    const char *s = "The quick brown fox jumps over the lazy dog";
    Toks k = {0};
    uint32_t n_pos = 0;
    QrError err = {0};
    cr_assert_eq(analyzer_run_n(a, s, strlen(s), 0, 0, collect, &k, &n_pos, &err), 0);
    const char *want[] = {"quick", "brown", "fox", "jump", "lazi", "dog"};
    const uint32_t want_pos[] = {1, 2, 3, 4, 7, 8};
    cr_assert_eq(k.n, 6);
    for (size_t i = 0; i < 6; i++) {
        cr_expect_str_eq(k.v[i].text, want[i]);
        cr_expect_eq(k.v[i].pos, want_pos[i], "%s at %u", want[i], k.v[i].pos);
    }
    cr_expect_eq(n_pos, 9);
    toks_free(&k);
    cr_assert_eq(analyzer_run_n(a, s, strlen(s), 0, ANALYZE_KEEP_STOPWORDS, collect, &k,
                                &n_pos, &err), 0);
    cr_expect_eq(k.n, 9);
    cr_expect_str_eq(k.v[0].text, "the");
    cr_expect_eq(n_pos, 9);
    toks_free(&k);
    /* a trailing stop word still consumes its position */
    cr_assert_eq(analyzer_run_n(a, "fox and the", 11, 10, 0, collect, &k, &n_pos, &err), 0);
    cr_expect_eq(k.n, 1);
    cr_expect_eq(k.v[0].pos, 10);
    cr_expect_eq(n_pos, 3);
    toks_free(&k);
    analyzer_free(a);
}

Test(analyzer, stopwords_other_languages)
{
    Analyzer *de = mk("german", true, true);
    expect(de, "Über den Fluss für dich, daß", ANALYZE_NO_STEM, "fluss");
    analyzer_free(de);
    Analyzer *fr = mk("fr", true, false);
    expect(fr, "le chat et la souris", ANALYZE_NO_STEM, "chat souris");
    analyzer_free(fr);
    Analyzer *es = mk("spanish", true, false);
    expect(es, "el perro y el gato también", ANALYZE_NO_STEM, "perro gato");
    analyzer_free(es);
    cr_expect(analyzer_has_stopwords("english"));
    cr_expect(analyzer_has_stopwords("porter"));
    cr_expect(!analyzer_has_stopwords("italian"));
    cr_expect(!analyzer_has_stopwords("none"));
    cr_expect(!analyzer_has_stopwords(NULL));
    /* no list: the option is accepted and does nothing */
    Analyzer *it = mk("italian", true, false);
    expect(it, "il gatto", ANALYZE_NO_STEM, "il gatto");
    analyzer_free(it);
    Analyzer *none = mk("none", true, false);
    expect(none, "the cat", 0, "the cat");
    analyzer_free(none);
}

Test(analyzer, offsets_point_at_original_bytes)
{
    Analyzer *a = mk("english", false, true);
    const char *s = "  Héllo, wörld!\t\xEF\xAC\x81les  don\xE2\x80\x99t";
    const char *orig[] = {"Héllo", "wörld", "\xEF\xAC\x81les", "don\xE2\x80\x99t"};
    for (int forced = 0; forced < 2; forced++) {
        Toks k = run(a, s, strlen(s), forced ? ANALYZE_FORCE_ICU : 0);
        cr_assert_eq(k.n, 4);
        for (size_t i = 0; i < 4; i++) {
            cr_expect_eq(k.v[i].end - k.v[i].start, strlen(orig[i]));
            cr_expect(memcmp(s + k.v[i].start, orig[i], strlen(orig[i])) == 0, "token %zu", i);
            cr_expect_eq(k.v[i].pos, i);
        }
        cr_expect_str_eq(k.v[2].text, "file");
        toks_free(&k);
    }
    analyzer_free(a);
}

Test(analyzer, uax29_details)
{
    Analyzer *a = mk(NULL, false, false);
    expect(a, "don't can't O'Neil 'quoted'", 0, "don't can't o'neil quoted");
    expect(a, "3.14 1,000 1.2.3 10,5;7", 0, "3.14 1,000 1.2.3 10,5;7");
    expect(a, "a_b _ __ ___ _1 x_", 0, "a_b __ ___ _1 x_");
    expect(a, "mp3 3d 1st", 0, "mp3 3d 1st");
    expect(a, "U.S.A. e.g. a..b a.1 1.a", 0, "u s a e g a b a 1 1 a");
    expect(a, "12:30 a:b http://x.org/p", 0, "12 30 a b http x org p");
    expect(a, "user@example.com @ @home", 0, "user@example com @ @home");
    expect(a, "e-mail C++ C# x/y", 0, "e mail c c x y");
    expect(a, "l·l a’b a‧b 1⁄2", 0, "l·l a’b a‧b 1⁄2");
    expect(a, "\"quoted\" (paren) [x] {y} <z>", 0, "quoted paren x y z");
    analyzer_free(a);
}

Test(analyzer, invalid_utf8_is_a_separator)
{
    Analyzer *a = mk("english", true, true);
    const char s[] = "abc\xFF\xFE" "def \xC3 x\xE2\x82y \xED\xA0\x80z \xF4\x90\x80\x80w \xC0\xAFv caf\xC3";
    expect(a, s, 0, "abc def x y z w v caf");
    for (int i = 0; i < 3000; i++) {
        char buf[48];
        size_t n = rnd(sizeof buf);
        for (size_t j = 0; j < n; j++)
            buf[j] = (char)(rnd(3) ? PICK("ab1 .'_\xC3\xA9\x80\xE2\xFF") : (int)rnd(256));
        same_both(a, buf, n, 0);
    }
    analyzer_free(a);
}

Test(analyzer, empty_input)
{
    Analyzer *a = mk("english", true, false);
    for (int forced = 0; forced < 2; forced++) {
        unsigned fl = forced ? ANALYZE_FORCE_ICU : 0;
        Toks k = {0};
        uint32_t n_pos = 7;
        QrError err = {0};
        cr_expect_eq(analyzer_run_n(a, "", 0, 5, fl, collect, &k, &n_pos, &err), 0);
        cr_expect_eq(n_pos, 0);
        n_pos = 7;
        cr_expect_eq(analyzer_run_n(a, NULL, 0, 5, fl, collect, &k, &n_pos, &err), 0);
        cr_expect_eq(n_pos, 0);
        cr_expect_eq(analyzer_run_n(a, " ,.;- \n", 7, 5, fl, collect, &k, &n_pos, &err), 0);
        cr_expect_eq(n_pos, 0);
        cr_expect_eq(k.n, 0);
    }
    analyzer_free(a);
}

Test(analyzer, unknown_language)
{
    AnalyzerOpts o = {.language = "klingon"};
    Analyzer *a = NULL;
    QrError err = {0};
    cr_assert_eq(analyzer_new(&o, &a, &err), QR_EINVAL);
    cr_expect_null(a);
    cr_expect_eq(err.code, QR_EINVAL);
    cr_expect(strstr(err.message, "klingon") != NULL, "message: %s", err.message);
    cr_expect(strstr(err.hint, "english") != NULL, "hint: %s", err.hint);
    cr_expect(strstr(err.hint, "none") != NULL, "hint: %s", err.hint);
}

Test(analyzer, languages_and_defaults)
{
    const char *const *l = analyzer_languages();
    bool en = false;
    size_t n = 0;
    for (; l[n]; n++)
        en |= strcmp(l[n], "english") == 0;
    cr_expect(en && n > 10);
    for (size_t i = 0; i < n; i++) {
        Analyzer *a = mk(l[i], true, true);
        same_both(a, "Running tests in many languages, quickly!", 41, 0);
        analyzer_free(a);
    }
    Analyzer *a = NULL;
    QrError err = {0};
    cr_assert_eq(analyzer_new(NULL, &a, &err), 0);
    expect(a, "Running", 0, "running");
    analyzer_free(a);
    analyzer_free(NULL);
}

/* The pool keeps at most the stem bound of idle stemming analyzers (4 MiB of
 * stem cache each) -- by default the cores this process may use -- and up to
 * 64 idle ones without a stem cache; an acquired analyzer is a pooled one. */
Test(analyzer, pool_bounds_idle_stem_caches)
{
    enum { N = 70 };
    static Analyzer *held[N];
    QrError err = {0};
    AnalyzerOpts en = {.language = "english"}, none = {.language = "none"};
    int idle, idle_stem;
    for (int round = 0; round < 2; round++) {
        int bound = round == 0 ? 3 : qr_cpu_count() < 64 ? qr_cpu_count() : 64;
        analyzer_pool_set_stem_max(round == 0 ? 3 : 0);
        for (int i = 0; i < N; i++)
            cr_assert_eq(analyzer_acquire(&en, &held[i], &err), QR_OK);
        for (int i = 0; i < N; i++)
            analyzer_release(held[i]);
        analyzer_pool_idle(&idle, &idle_stem);
        cr_expect_eq(idle_stem, bound, "round %d: %d idle stemming analyzers, bound %d", round,
                     idle_stem, bound);
        cr_expect_eq(idle, idle_stem);
        /* the idle ones are handed out again before new ones are made */
        Analyzer *a = NULL;
        cr_assert_eq(analyzer_acquire(&en, &a, &err), QR_OK);
        bool pooled = false;
        for (int i = 0; i < N; i++)
            pooled |= held[i] == a;
        cr_expect(pooled, "acquire made a new analyzer with idle ones in the pool");
        expect(a, "Running", 0, "run");
        analyzer_release(a);
    }
    /* lowering the bound frees the idle ones over it */
    analyzer_pool_set_stem_max(1);
    analyzer_pool_idle(&idle, &idle_stem);
    cr_expect_eq(idle_stem, 1);
    /* analyzers without a stem cache are not held to the stem bound */
    for (int i = 0; i < 10; i++)
        cr_assert_eq(analyzer_acquire(&none, &held[i], &err), QR_OK);
    for (int i = 0; i < 10; i++)
        analyzer_release(held[i]);
    analyzer_pool_idle(&idle, &idle_stem);
    cr_expect_eq(idle_stem, 1);
    cr_expect_eq(idle, 11);
    analyzer_pool_set_stem_max(0);
}

Test(analyzer, pos_base_sink_stop_and_limits)
{
    Analyzer *a = mk(NULL, false, false);
    for (int forced = 0; forced < 2; forced++) {
        unsigned fl = forced ? ANALYZE_FORCE_ICU : 0;
        Toks k = {.stop_after = 2};
        uint32_t n_pos = 0;
        QrError err = {0};
        int rc = analyzer_run_n(a, "one two three four", 18, 100, fl, collect, &k, &n_pos, &err);
        cr_expect_eq(rc, 42);
        cr_expect_eq(err.code, QR_OK);
        cr_expect_eq(k.n, 2);
        cr_expect_eq(k.v[1].pos, 101);
        cr_expect_eq(n_pos, 2);
        toks_free(&k);
        /* the last position is UINT32_MAX; one more word is an error */
        n_pos = 77;
        rc = analyzer_run_n(a, "x y", 3, UINT32_MAX - 1, fl, collect, &k, &n_pos, &err);
        cr_expect_eq(rc, 0);
        cr_expect_eq(k.v[1].pos, UINT32_MAX);
        toks_free(&k);
        rc = analyzer_run_n(a, "x y z", 5, UINT32_MAX - 1, fl, collect, &k, &n_pos, &err);
        cr_expect_eq(rc, QR_ELIMIT);
        cr_expect_eq(err.code, QR_ELIMIT);
        cr_expect_eq(n_pos, 2, "n_pos untouched on error");
        toks_free(&k);
    }
    analyzer_free(a);
}

Test(analyzer, ascii_stays_on_the_fast_path)
{
    Analyzer *a = mk("english", true, false);
    const char *s = "Plain ASCII text, with punctuation: (1.5%) & \"quotes\" -- e-mail@x.org!";
    Toks k = run(a, s, strlen(s), 0);
    toks_free(&k);
    const char *l1 = "Latin-1, Greek, Cyrillic and smart quotes: “naïve” café — Ωμέγα «Москва» don’t";
    k = run(a, l1, strlen(l1), 0);
    toks_free(&k);
    AnalyzerStats st;
    analyzer_stats(a, &st);
    cr_expect_eq(st.icu_bytes, 0);
    cr_expect_eq(st.fallbacks, 0);
    cr_expect_eq(st.fast_bytes, strlen(s) + strlen(l1));
    /* a code point outside the table sends only its neighbourhood to ICU */
    const char *mix = "alpha beta \xEF\xAC\x81le gamma delta";
    same_both(a, mix, strlen(mix), 0);
    analyzer_stats(a, &st);
    cr_expect_eq(st.fallbacks, 1);
    cr_expect_lt(st.icu_bytes, strlen(mix) * 2);
    analyzer_free(a);
}

Test(analyzer, out_of_memory_is_clean)
{
    const char *s = "The running dogs — naïve ﬁle 日本語 don’t";
    bool reached_success = false;
    for (int64_t n = 0; n < 200; n++) {
        qr_mem_fail_after(n);
        AnalyzerOpts o = {.language = "english", .stopwords = true, .accent_fold = true};
        Analyzer *a = NULL;
        QrError err = {0};
        int rc = analyzer_new(&o, &a, &err);
        if (rc == 0) {
            Toks k = {0};
            char big[2048];
            memset(big, 'x', sizeof big); /* a long word forces buffer growth */
            for (int forced = 0; forced < 2 && rc == 0; forced++) {
                rc = analyzer_run(a, s, strlen(s), 0, forced ? ANALYZE_FORCE_ICU : 0, collect,
                                  &k, &err);
                if (rc == 0)
                    rc = analyzer_run(a, big, sizeof big, 0, forced ? ANALYZE_FORCE_ICU : 0,
                                      collect, &k, &err);
            }
            toks_free(&k);
            analyzer_free(a);
        }
        qr_mem_fail_after(-1);
        cr_expect(rc == 0 || rc == QR_ENOMEM, "n=%lld rc=%d (%s)", (long long)n, rc,
                  err.message);
        if (rc == QR_ENOMEM)
            cr_expect_eq(err.code, QR_ENOMEM);
        reached_success |= rc == 0;
    }
    cr_expect(reached_success, "200 allocations were not enough for one clean run");
}

/* ---- differential: fast path == ICU ----------------------------------- */

/* Every code point the fast path covers, in contexts that exercise each
 * rule, plus code points it must hand to ICU. */
Test(analyzer, differential_code_points)
{
    Analyzer *plain = mk(NULL, false, false), *fold = mk(NULL, false, true);
    static const char *const ctx[] = {"X", "aXb", "1X2", "aX", "Xa", "X1", "_X_", "XX", "a'X",
                                      "X.a", "1,X", "aXX", "éXé", "X X", "aX1"};
    for (uint32_t cp = 1; cp < 0x2070; cp++) {
        if (cp == 0x500)
            cp = 0x2000;
        char x[4];
        size_t xl = put_utf8(x, cp);
        for (size_t c = 0; c < sizeof ctx / sizeof ctx[0]; c++) {
            char buf[64];
            size_t n = 0;
            for (const char *t = ctx[c]; *t; t++) {
                if (*t == 'X') {
                    memcpy(buf + n, x, xl);
                    n += xl;
                } else {
                    buf[n++] = *t;
                }
            }
            same_both(plain, buf, n, 0);
            same_both(fold, buf, n, 0);
        }
    }
    analyzer_free(plain);
    analyzer_free(fold);
}

static uint32_t random_cp(void)
{
    static const uint32_t outside[] = {0x301, 0x308, 0xAD, 0x200D, 0x200B, 0x2060, 0xFB01,
                                       0x65E5, 0x3042, 0x30AB, 0x05D0, 0x0E01, 0x1F600, 0xFF1A,
                                       0x2070, 0x1E9E, 0xFE0F, 0x20E3, 0x1F1E6, 0xFFFD};
    switch (rnd(8)) {
    case 0: return rnd(0x500);
    case 1: return 0x2000 + rnd(0x70);
    case 2: return outside[rnd(sizeof outside / sizeof outside[0])];
    case 3: return 0x80 + rnd(0x180);
    default: return (uint32_t)PICK("aeiouxyzAEZ0159_.',:;@ -\"\n");
    }
}

Test(analyzer, differential_random_text)
{
    Analyzer *cfg[3] = {mk(NULL, false, false), mk(NULL, false, true),
                        mk("english", true, true)};
    char buf[512];
    for (int i = 0; i < 20000; i++) {
        size_t n = 0, want = rnd(80);
        bool ascii = i % 2 == 0;
        while (n < want) {
            uint32_t cp = ascii ? (uint32_t)PICK("abcXYZ0189_.',:;@!?-/\"()[]# \t\n\r\x01")
                                : random_cp();
            n += put_utf8(buf + n, cp);
        }
        for (int c = 0; c < 3; c++)
            same_both(cfg[c], buf, n, 0);
    }
    for (int c = 0; c < 3; c++)
        analyzer_free(cfg[c]);
}

/* One line of a gz file, grown as needed; NULL at the end. */
static char *gz_line(gzFile f, char **buf, size_t *cap)
{
    size_t n = 0;
    for (;;) {
        if (*cap - n < 2) {
            *cap = *cap ? *cap * 2 : 1 << 16;
            *buf = realloc(*buf, *cap);
        }
        if (!gzgets(f, *buf + n, (int)(*cap - n)))
            return n ? *buf : NULL;
        n += strlen(*buf + n);
        if (n && (*buf)[n - 1] == '\n')
            return *buf;
    }
}

Test(analyzer, differential_corpus)
{
    gzFile f = gzopen(CORPUS, "rb");
    if (!f)
        cr_skip_test("corpus %s not found (run from the repo root with ../shared present)",
                     CORPUS);
    Analyzer *cfg[2] = {mk(NULL, false, false), mk("english", true, true)};
    char *line = NULL;
    size_t cap = 0, docs = 0, fields = 0, non_ascii = 0, tokens = 0, bytes = 0;
    while (gz_line(f, &line, &cap)) {
        docs++;
        cJSON *doc = cJSON_Parse(line);
        cr_assert_not_null(doc, "bad JSON on line %zu", docs);
        static const char *const keys[] = {"title", "body"};
        for (int k = 0; k < 2; k++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, keys[k]);
            if (!cJSON_IsString(v))
                continue;
            const char *s = v->valuestring;
            size_t n = strlen(s);
            bool has_high = false;
            for (size_t j = 0; j < n && !has_high; j++)
                has_high = (unsigned char)s[j] >= 0x80;
            /* every field of the first 3000 docs, and all non-ASCII ones */
            if (docs > 3000 && !has_high)
                continue;
            fields++;
            non_ascii += has_high;
            bytes += n;
            for (int c = 0; c < 2; c++)
                tokens += same_both(cfg[c], s, n, 0);
        }
        cJSON_Delete(doc);
    }
    gzclose(f);
    free(line);
    AnalyzerStats st;
    analyzer_stats(cfg[0], &st);
    cr_log_info("corpus: %zu docs, %zu fields (%zu non-ASCII), %zu bytes, %zu tokens; "
                "fast path %llu bytes, ICU fallback %llu bytes in %llu spans",
                docs, fields, non_ascii, bytes, tokens, (unsigned long long)st.fast_bytes,
                (unsigned long long)(st.icu_bytes - bytes), (unsigned long long)st.fallbacks);
    cr_expect_gt(fields, 1000);
    for (int c = 0; c < 2; c++)
        analyzer_free(cfg[c]);
}
