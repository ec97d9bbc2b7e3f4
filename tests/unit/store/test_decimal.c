/*
 * test_decimal.c — exact decimals at rest (store/decimal.h): canonical text
 * as PostgreSQL's numeric_in / numeric_out print it, scaled int64 with
 * rounding half away from zero and the 18-digit bound, and a round trip of
 * random scaled values against a brute-force model (printf of the parts).
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/decimal.h"

static void canon_is(const char *in, const char *want)
{
    char out[DEC_TEXT_MAX];
    int n = dec_canon(in, strlen(in), out, sizeof out);
    cr_expect(n >= 0 && !strcmp(out, want), "dec_canon(\"%s\") = %d \"%s\", want \"%s\"", in, n,
              n >= 0 ? out : "", want);
}

Test(decimal, canonical_text_as_postgresql_prints_it)
{
    static const char *const cases[][2] = {
        {"12.50", "12.50"}, {" 12.50 ", "12.50"}, {"+007", "7"},     {"-0.00", "0.00"},
        {".5", "0.5"},      {"5.", "5"},          {"1e3", "1000"},   {"1.5e-2", "0.015"},
        {"-1.50E+1", "-15.0"}, {"0001.0100", "1.0100"}, {"-0", "0"},  {"nan", "NaN"},
        {"-inf", "-Infinity"}, {"Infinity", "Infinity"},
        {"123456789012345678901234567890.123456789", "123456789012345678901234567890.123456789"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        canon_is(cases[i][0], cases[i][1]);
    static const char *const bad[] = {"", " ", "abc", "1.2.3", "1e", "--1", "1e5000", "-nan", "1 2"};
    char out[DEC_TEXT_MAX];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_expect_eq(dec_canon(bad[i], strlen(bad[i]), out, sizeof out), -1, "\"%s\"", bad[i]);
    cr_expect_eq(dec_canon("123456", 6, out, 6), -1); /* no room: refused, not cut */
}

Test(decimal, scaled_rounds_half_away_from_zero_within_18_digits)
{
    int64_t v;
    cr_expect(dec_to_scaled("12.5", 4, 2, &v) == 0 && v == 1250);
    cr_expect(dec_to_scaled("1.005", 5, 2, &v) == 0 && v == 101);
    cr_expect(dec_to_scaled("-1.005", 6, 2, &v) == 0 && v == -101);
    cr_expect(dec_to_scaled("-1.004", 6, 2, &v) == 0 && v == -100);
    cr_expect(dec_to_scaled("1e2", 3, 0, &v) == 0 && v == 100);
    cr_expect(dec_to_scaled("NaN", 3, 2, &v) == 0 && v == DEC_SCALED_NAN);
    cr_expect(dec_to_scaled("9999999999999999.99", 19, 2, &v) == 0 && v == 999999999999999999);
    cr_expect_eq(dec_to_scaled("10000000000000000", 17, 2, &v), -2);  /* 19 digits */
    cr_expect_eq(dec_to_scaled("9999999999999999.995", 20, 2, &v), -2); /* rounds up past */
    cr_expect_eq(dec_to_scaled("Infinity", 8, 2, &v), -2);
    cr_expect_eq(dec_to_scaled("x", 1, 2, &v), -1);
    char buf[48];
    cr_expect(dec_from_scaled(1250, 2, buf) == 5 && !strcmp(buf, "12.50"));
    cr_expect(dec_from_scaled(-5, 3, buf) == 6 && !strcmp(buf, "-0.005"));
    cr_expect(dec_from_scaled(0, 2, buf) == 4 && !strcmp(buf, "0.00"));
    cr_expect(dec_from_scaled(42, 0, buf) == 2 && !strcmp(buf, "42"));
    cr_expect(!strcmp((dec_from_scaled(DEC_SCALED_NAN, 2, buf), buf), "NaN"));
    cr_expect(dec_from_double(0.1, buf) == 3 && !strcmp(buf, "0.1"));
    cr_expect(dec_from_double(-2.5e-7, buf) > 0 && !strcmp(buf, "-0.00000025"));
}

/* Random scaled values at every scale: text from the model (integer and
 * fraction parts printed apart) parses to the value, prints back to that
 * text, and order of the int64 is the order of the numbers. */
Test(decimal, scaled_round_trip_against_a_model)
{
    srand(7);
    for (int i = 0; i < 20000; i++) {
        int scale = rand() % (DEC_SCALED_MAX_PREC + 1);
        uint64_t m = ((uint64_t)rand() << 31 ^ (uint64_t)rand()) % 1000000000000000000ull;
        bool neg = rand() & 1;
        uint64_t p = 1;
        for (int k = 0; k < scale; k++)
            p *= 10;
        char text[64];
        if (scale)
            snprintf(text, sizeof text, "%s%" PRIu64 ".%0*" PRIu64, neg && m ? "-" : "", m / p,
                     scale, m % p);
        else
            snprintf(text, sizeof text, "%s%" PRIu64, neg && m ? "-" : "", m);
        int64_t v;
        cr_assert_eq(dec_to_scaled(text, strlen(text), scale, &v), 0, "%s", text);
        cr_assert_eq(v, neg ? -(int64_t)m : (int64_t)m, "%s", text);
        char back[48];
        dec_from_scaled(v, scale, back);
        cr_assert_str_eq(back, text);
        char canon[DEC_TEXT_MAX];
        cr_assert(dec_canon(text, strlen(text), canon, sizeof canon) >= 0);
        cr_assert_str_eq(canon, text);
    }
}
