/*
 * test_buf.c — the base kit's JSON string writer (qr_buf_json_str), which
 * every layer uses to put user bytes (keys, keyword values, SQL text) into
 * JSON: the output must be valid JSON whatever the bytes; and the UTF-8
 * scan that documents must pass (qr_utf8_invalid_at), against RFC 3629's
 * grammar; the shortest float8 text (qr_buf_double) against printf; varints
 * (the inline one-byte paths too) against a plain LEB128 model.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/buf.h"

static void json_is(const char *in, size_t n, const char *want)
{
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_json_str(&b, in, n);
    cr_assert(b.len == strlen(want) && !memcmp(b.data, want, b.len), "got [%.*s], want [%s]",
              (int)b.len, (const char *)b.data, want);
    qr_buf_free(&b);
}

#define FFFD "\xEF\xBF\xBD"

Test(buf, json_str_escapes_and_repairs)
{
    json_is("", 0, "\"\"");
    json_is("plain", 5, "\"plain\"");
    json_is("a\"b\\c", 5, "\"a\\\"b\\\\c\"");
    json_is("\n\r\t\x01\x1f", 5, "\"\\n\\r\\t\\u0001\\u001f\"");
    json_is("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", 14, "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"");
    /* not UTF-8: a lone continuation byte, an overlong form, a surrogate, a
     * truncated sequence at the end, a byte that starts nothing */
    json_is("\x80", 1, "\"" FFFD "\"");
    json_is("\xC0\xAF", 2, "\"" FFFD FFFD "\"");
    json_is("\xED\xA0\x80", 3, "\"" FFFD FFFD FFFD "\"");
    json_is("ab\xE2\x82", 4, "\"ab" FFFD FFFD "\"");
    json_is("\xFF" "x", 2, "\"" FFFD "x\"");
    /* embedded NUL is a control character */
    json_is("a\0b", 3, "\"a\\u0000b\"");
}

Test(buf, utf8_seq_len)
{
    cr_assert_eq(qr_utf8_seq_len((const unsigned char *)"a", 1), 1);
    cr_assert_eq(qr_utf8_seq_len((const unsigned char *)"\xC3\xA9", 2), 2);
    cr_assert_eq(qr_utf8_seq_len((const unsigned char *)"\xC3\xA9", 1), 0);
    cr_assert_eq(qr_utf8_seq_len((const unsigned char *)"\xF4\x90\x80\x80", 4), 0); /* > U+10FFFF */
    cr_assert_eq(qr_utf8_seq_len((const unsigned char *)"\xE0\x80\x80", 3), 0);     /* overlong */
}

/* RFC 3629's grammar, written out as byte ranges (independent of
 * qr_utf8_seq_len's code-point arithmetic): length of the well-formed
 * sequence at p, or 0. */
static size_t rfc3629_len(const unsigned char *p, size_t left)
{
    static const struct {
        unsigned char lead_lo, lead_hi, second_lo, second_hi;
        size_t n;
    } FORMS[] = {
        {0x00, 0x7F, 0, 0, 1},       {0xC2, 0xDF, 0x80, 0xBF, 2}, {0xE0, 0xE0, 0xA0, 0xBF, 3},
        {0xE1, 0xEC, 0x80, 0xBF, 3}, {0xED, 0xED, 0x80, 0x9F, 3}, {0xEE, 0xEF, 0x80, 0xBF, 3},
        {0xF0, 0xF0, 0x90, 0xBF, 4}, {0xF1, 0xF3, 0x80, 0xBF, 4}, {0xF4, 0xF4, 0x80, 0x8F, 4},
    };
    for (size_t f = 0; f < sizeof FORMS / sizeof FORMS[0]; f++) {
        if (p[0] < FORMS[f].lead_lo || p[0] > FORMS[f].lead_hi)
            continue;
        size_t n = FORMS[f].n;
        if (n > left)
            return 0;
        if (n > 1 && (p[1] < FORMS[f].second_lo || p[1] > FORMS[f].second_hi))
            return 0;
        for (size_t k = 2; k < n; k++)
            if (p[k] < 0x80 || p[k] > 0xBF)
                return 0;
        return n;
    }
    return 0;
}

Test(buf, utf8_invalid_at_agrees_with_rfc3629)
{
    /* random strings mixing long ASCII runs (the 8-byte fast path), valid
     * sequences of every length, and single random bytes */
    static const char *const good[] = {"\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
                                       "\xE0\xA0\x80", "\xED\x9F\xBF", "\xF4\x8F\xBF\xBF",
                                       "\xEF\xBF\xBD"};
    uint64_t rng = 7;
    unsigned char s[256];
    static const char *const edges[] = {"\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF",
                                        "\xF0\x8F\xBF\xBF", "\xED\xA0\x80", "\xED\xBF\xBF",
                                        "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\x80",
                                        "\xFE", "\xFF", "\xE2\x82", "\xF0\x9F\x98"};
    for (size_t k = 0; k < sizeof edges / sizeof edges[0]; k++) {
        char e[32];
        int len = snprintf(e, sizeof e, "abcdefghij%s", edges[k]);
        cr_assert_eq(qr_utf8_invalid_at(e, (size_t)len), 10, "edge %zu", k);
        cr_assert_eq(rfc3629_len((const unsigned char *)e + 10, (size_t)len - 10), 0);
    }
    for (int iter = 0; iter < 20000; iter++) {
        size_t n = 0;
        while (n < 200) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            unsigned pick = (unsigned)(rng >> 59);
            if (pick < 6) {
                size_t run = 1 + (size_t)((rng >> 20) % 23);
                for (size_t k = 0; k < run && n < 200; k++)
                    s[n++] = (unsigned char)('a' + k % 26);
            } else if (pick < 12) {
                const char *g = good[(rng >> 30) % 7];
                for (size_t k = 0; g[k] && n < 200; k++)
                    s[n++] = (unsigned char)g[k];
            } else if (pick < 20) {
                /* a lead byte and continuation bytes: overlongs, surrogates,
                 * beyond U+10FFFF, short sequences */
                s[n++] = (unsigned char)(0xC0 + (rng >> 32) % 0x38);
                for (unsigned k = 0; k < (unsigned)((rng >> 26) % 4) && n < 200; k++)
                    s[n++] = (unsigned char)(0x80 + (rng >> (8 + 6 * k)) % 0x40);
            } else if (pick < 21 || iter % 3 == 0) {
                s[n++] = (unsigned char)(rng >> 40);
            } else {
                s[n++] = (unsigned char)((rng >> 40) % 0x80);
            }
        }
        size_t want = 0;
        while (want < n) {
            size_t l = rfc3629_len(s + want, n - want);
            if (!l)
                break;
            want += l;
        }
        size_t got = qr_utf8_invalid_at((const char *)s, n);
        cr_assert_eq(got, want, "iteration %d: %zu, the grammar says %zu", iter, got, want);
    }
    cr_assert_eq(qr_utf8_invalid_at("", 0), 0);
    cr_assert_eq(qr_utf8_invalid_at("abcdefgh\xFF", 9), 8, "after a full 8-byte run");
    cr_assert_eq(qr_utf8_invalid_at("abcdefghijklmno\xC3", 16), 15, "truncated at the end");
    cr_assert_eq(qr_utf8_invalid_at("a\0b", 3), 3, "NUL is well-formed");
}

/* Array text: random element lists (quotes, backslashes, braces, commas,
 * white space, "NULL", empty strings) written element by element and read
 * back to the same bytes; PostgreSQL's own spellings parse too. */
Test(buf, array_text_round_trips)
{
    static const char alphabet[] = "ab{},\"\\ \tNUL";
    uint64_t x = 12345;
    for (int round = 0; round < 2000; round++) {
        char el[6][8];
        size_t len[6];
        int n = (int)(round % 7 == 0 ? 0 : 1 + round % 6);
        QrBuf b;
        qr_buf_init(&b);
        qr_buf_putc(&b, '{');
        for (int i = 0; i < n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            len[i] = (size_t)(x >> 60) % 8;
            for (size_t k = 0; k < len[i]; k++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                el[i][k] = alphabet[(x >> 33) % (sizeof alphabet - 1)];
            }
            if (round % 11 == 0)
                memcpy(el[i], "NULL", len[i] = 4);
            if (i)
                qr_buf_putc(&b, ',');
            qr_buf_array_elem(&b, el[i], len[i]);
        }
        qr_buf_putc(&b, '}');
        char out[64];
        size_t pos = 0, ol;
        bool null;
        for (int i = 0; i < n; i++) {
            cr_assert_eq(qr_array_next((const char *)b.data, b.len, &pos, out, &ol, &null), 1,
                         "round %d: %.*s", round, (int)b.len, b.data);
            cr_assert(!null, "a quoted NULL is a string: %.*s", (int)b.len, b.data);
            cr_assert(ol == len[i] && !memcmp(out, el[i], ol), "round %d element %d of %.*s",
                      round, i, (int)b.len, b.data);
        }
        cr_assert_eq(qr_array_next((const char *)b.data, b.len, &pos, out, &ol, &null), 0);
        qr_buf_free(&b);
    }
    static const struct {
        const char *text;
        int n;          /* elements, -1 malformed */
        const char *second;
    } cases[] = {{" { a , \"b c\" } ", 2, "b c"}, {"{a,NULL}", 2, NULL}, {"{}", 0, NULL},
                 {"{a,,b}", -1, NULL}, {"{\"a}", -1, NULL}, {"{a} x", -1, NULL},
                 {"a,b", -1, NULL}, {"{a\\,b,c\\ }", 2, "c "}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *t = cases[c].text;
        char out[32];
        size_t pos = 0, ol;
        bool null;
        int got = 0, rc;
        while ((rc = qr_array_next(t, strlen(t), &pos, out, &ol, &null)) > 0) {
            got++;
            if (got == 2 && cases[c].second)
                cr_assert(ol == strlen(cases[c].second) && !memcmp(out, cases[c].second, ol),
                          "%s: \"%.*s\"", t, (int)ol, out);
            if (got == 2 && !cases[c].second && cases[c].n == 2)
                cr_assert(null, "%s: unquoted NULL", t);
        }
        if (cases[c].n < 0)
            cr_assert_eq(rc, -1, "%s is malformed", t);
        else
            cr_assert(rc == 0 && got == cases[c].n, "%s: %d elements, rc %d", t, got, rc);
    }
}

/* The model of qr_buf_double: the first of "%.15g", "%.16g", "%.17g" that
 * reads back as d (PostgreSQL's shortest float8 output, one printf per
 * try). */
static void double_model(double d, char *out, size_t cap)
{
    for (int p = 15; p <= 17; p++) {
        snprintf(out, cap, "%.*g", p, d);
        if (strtod(out, NULL) == d)
            return;
    }
}

static void double_is_model(double d)
{
    char want[40];
    double_model(d, want, sizeof want);
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_double(&b, d, false);
    cr_assert(b.len == strlen(want) && !memcmp(b.data, want, b.len), "%a: got [%.*s], want [%s]", d,
              (int)b.len, (const char *)b.data, want);
    qr_buf_free(&b);
}

/* qr_buf_double rounds 15 and 16 digits from one 17-digit conversion: the
 * same text as printing each, for random bit patterns (every exponent),
 * averages and ratios of small integers (16- and 17-digit values), short
 * decimals, values whose cut-off digits are a half (the rounding it cannot
 * decide and prints), carries through 9s, powers of ten and of two at the
 * edges of %g's fixed and exponent forms, and signed zeros. */
Test(buf, double_shortest_matches_printf)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double d;
        memcpy(&d, &x, sizeof d);
        if (isfinite(d))
            double_is_model(d);
        double_is_model((double)(x % 10000000) / (double)(1 + x % 997));
        double_is_model((double)(int64_t)(x % 2000001) / 1000.0 - 1000.0);
        double_is_model(ldexp((double)(x % 1000), (int)(x % 200) - 100));
    }
    static const double edge[] = {
        0.0, -0.0, 1.0, -1.0, 0.1, 0.5, 1e-4, 1e-5, 9.9999e-5, 1e15, 1e16, 1e17, 1e22, 1e300,
        -1e-300, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 0.30000000000000004,
        123456789012345.6, 999999999999999.9, 9999999999999998.0, 0.9999999999999999,
        99999.99999999999, 1.0000000000000002, 4.35, 2.675, 1.005, 931.8621794871794,
        950.2395833333334, 9007199254740993.0, 4503599627370497.5, 0.000123456789012345678,
    };
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) {
        double_is_model(edge[i]);
        double_is_model(-edge[i]);
        double_is_model(nextafter(edge[i], INFINITY));
        double_is_model(nextafter(edge[i], -INFINITY));
    }
    for (int e = -30; e <= 30; e++) {
        double_is_model(pow(10, e));
        double_is_model(ldexp(1, e * 10));
        double_is_model(pow(10, e) * 0.99999999999999995);
    }
}

/* ---- varints ---- */

/* The LEB128 bytes of v, written the plain way. */
static size_t leb128(uint64_t v, uint8_t *out)
{
    size_t n = 0;
    do {
        out[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            out[n] |= 0x80;
        n++;
    } while (v);
    return n;
}

Test(buf, varints_round_trip_and_stay_bad)
{
    QrBuf b, model;
    qr_buf_init(&b);
    qr_buf_init(&model);
    uint64_t vals[4000];
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 4000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int bits = (int)(x % 65); /* 0..64 significant bits: 1 to 10 bytes */
        vals[i] = bits == 64 ? x : x & ((1ull << bits) - 1);
        if (i < 130)
            vals[i] = (uint64_t)i; /* every one-byte value and the first two-byte ones */
        qr_buf_put_varint(&b, vals[i]);
        uint8_t tmp[10];
        qr_buf_append(&model, tmp, leb128(vals[i], tmp));
        uint8_t enc[10];
        cr_assert_eq(qr_varint_encode(enc, vals[i]), leb128(vals[i], tmp));
    }
    cr_assert(qr_buf_ok(&b) && b.len == model.len && !memcmp(b.data, model.data, b.len));
    QrReader r;
    qr_rd_init(&r, b.data, b.len);
    for (int i = 0; i < 4000; i++)
        cr_assert_eq(qr_rd_varint(&r), vals[i], "value %d", i);
    cr_assert(!r.bad && r.p == r.end);
    /* a truncated varint makes the reader bad for good: later one-byte
     * varints read as 0 and the reader does not move */
    const uint8_t trunc[] = {0x05, 0x80};
    qr_rd_init(&r, trunc, 1);
    cr_assert_eq(qr_rd_varint(&r), 5);
    cr_assert_eq(qr_rd_varint(&r), 0);
    cr_assert(r.bad);
    const uint8_t bad_then_small[] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F,
                                      0x03};
    qr_rd_init(&r, bad_then_small, sizeof bad_then_small);
    cr_assert_eq(qr_rd_varint(&r), 0); /* overlong: more than 64 bits */
    cr_assert(r.bad);
    const uint8_t *at = r.p;
    cr_assert_eq(qr_rd_varint(&r), 0);
    cr_assert(r.bad && r.p == at);
    const uint8_t short_u32[] = {0x01, 0x02}; /* another getter ran past the end */
    qr_rd_init(&r, short_u32, sizeof short_u32);
    cr_assert_eq(qr_rd_u32(&r), 0);
    cr_assert(r.bad);
    cr_assert_eq(qr_rd_varint(&r), 0);
    qr_buf_free(&b);
    qr_buf_free(&model);
}
