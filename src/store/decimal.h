/*
 * decimal.h — exact decimals at rest: the canonical text a numeric field
 * keeps, and the scaled int64 a numeric(p, s) field's column holds.
 *
 * Layer: store/ (base kit).  Calls nothing but libc.
 *
 * A numeric field (schema type "numeric") stores its values exactly.  Its
 * canonical text is PostgreSQL's numeric output: an optional '-', the
 * integer digits without leading zeros (at least "0"), then '.' and the
 * fraction digits when the scale is above 0 ("12.50" keeps its scale,
 * "-0.0" prints "0.0"), or "NaN", "Infinity", "-Infinity".  A field with a
 * scale s (numeric(p, s) with p <= 18) keeps value * 10^s in an int64
 * column; NaN is DEC_SCALED_NAN, above every number as PostgreSQL orders
 * it, and infinities do not fit (PostgreSQL refuses them in numeric(p, s)).
 */
#ifndef QR_DECIMAL_H
#define QR_DECIMAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DEC_SCALED_NAN INT64_MAX /* NaN in a scaled column: above every value */
#define DEC_SCALED_MAX_PREC 18   /* numeric(p, s) up to this p is a scaled int64 */
#define DEC_TEXT_MAX 1100        /* bytes of the longest canonical text a field keeps */

/* The pieces of a decimal as written (PostgreSQL's numeric_in syntax): blanks
 * around, a sign, digits with one optional '.', an exponent ("e-3", |e| <=
 * 1000); "NaN" (no sign), "Infinity" / "inf" with either sign.  The digits
 * point into the input. */
typedef struct DecLex {
    char special;       /* 0, 'n' NaN, 'p' +Infinity, 'm' -Infinity */
    bool neg;
    const char *ip;     /* integer digits, il of them (borrowed) */
    size_t il;
    const char *fp;     /* fraction digits, fl of them (borrowed) */
    size_t fl;
    long exp;           /* the exponent: the value is ip.fp * 10^exp */
} DecLex;

/* Split s[0, n) into *out; -1 when it is not a number. */
int dec_lex(const char *s, size_t n, DecLex *out);

/* The canonical text of s[0, n) (PostgreSQL's numeric input: blanks around,
 * a sign, digits with one optional '.', an exponent "e-3"; "NaN",
 * "Infinity", "inf") into out (NUL-terminated).  Returns its length, or -1
 * when s is not a number or its canonical text would pass out_cap bytes. */
int dec_canon(const char *s, size_t n, char *out, size_t out_cap);

/* The canonical text of a double's shortest round-tripping decimal (a JSON
 * number given for a numeric field) into out[DEC_TEXT_MAX]; its length. */
int dec_from_double(double d, char *out);

/* s[0, n) rounded half away from zero to `scale` digits, times 10^scale,
 * into *out ("NaN" gives DEC_SCALED_NAN).  Returns 0, -1 when s is not a
 * number, -2 when the result needs more than DEC_SCALED_MAX_PREC digits or
 * is an infinity. */
int dec_to_scaled(const char *s, size_t n, int scale, int64_t *out);

/* The canonical text of v / 10^scale (scale 0..DEC_SCALED_MAX_PREC) into
 * out, which has room for at least 48 bytes.  Returns the length. */
int dec_from_scaled(int64_t v, int scale, char *out);

#endif
