/*
 * test_pgwire_msg.c — the PostgreSQL port's message codec (server/
 * pgwire_msg.c) and SCRAM-SHA-256 (server/scram.c).
 *
 * Decoders: valid messages decode to what was encoded; every strict prefix
 * of a valid message, a message with extra bytes, lying counts and lengths,
 * and many random byte strings are rejected with 08P01 (or 22023 for a bad
 * format code) and never read out of bounds (the ASan run checks that).
 * Encoders: lengths patch right, ErrorResponse fields parse back, binary
 * numeric decodes (by an independent decoder here) to the decimal it came
 * from.  SCRAM: the client side reproduces RFC 7677's example exchange; the
 * server accepts the right password and rejects a wrong one or an unknown
 * user; the user file round-trips with mode 0600.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/pgwire_int.h"
#include "server/scram.h"
#include "store/mem.h"
#include "store/util.h"

/* ---- helpers: build frontend message bodies ---- */

static void be16(QrBuf *b, int v) { pgw_put_i16(b, (int16_t)v); }
static void be32(QrBuf *b, int32_t v) { pgw_put_i32(b, v); }
static void cstr(QrBuf *b, const char *s) { pgw_put_cstr(b, s); }

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Decode a copy of exactly n bytes (so ASan sees any overread). */
typedef int (*DecodeFn)(const uint8_t *p, size_t n, QrError *err);

static int dec_startup(const uint8_t *p, size_t n, QrError *err)
{
    PgwStartup s;
    return pgw_decode_startup(p, n, &s, err);
}
static int dec_parse(const uint8_t *p, size_t n, QrError *err)
{
    PgwParse s;
    int rc = pgw_decode_parse(p, n, &s, err);
    if (rc == QR_OK)
        for (int i = 0; i < s.n_types; i++)
            (void)pgw_parse_type(&s, i);
    return rc;
}
static int dec_bind(const uint8_t *p, size_t n, QrError *err)
{
    PgwBind b;
    int rc = pgw_decode_bind(p, n, &b, err);
    if (rc == QR_OK) {
        size_t sum = 0;
        for (int i = 0; i < b.n_params; i++)
            if (b.values[i])
                for (int k = 0; k < b.lengths[i]; k++)
                    sum += (unsigned char)b.values[i][k];
        for (int i = 0; i < b.n_result_formats; i++)
            cr_assert(b.result_formats[i] == 0 || b.result_formats[i] == 1);
        (void)sum;
        pgw_bind_free(&b);
    }
    return rc;
}
static int dec_describe(const uint8_t *p, size_t n, QrError *err)
{
    PgwTarget t;
    return pgw_decode_target(p, n, "Describe", &t, err);
}
static int dec_execute(const uint8_t *p, size_t n, QrError *err)
{
    PgwExecute x;
    return pgw_decode_execute(p, n, &x, err);
}
static int dec_query(const uint8_t *p, size_t n, QrError *err)
{
    const char *q;
    return pgw_decode_string(p, n, "Query", &q, err);
}
static int dec_sasl(const uint8_t *p, size_t n, QrError *err)
{
    PgwSaslInit s;
    return pgw_decode_sasl_init(p, n, &s, err);
}

static int decode_exact(DecodeFn fn, const uint8_t *p, size_t n, QrError *err)
{
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, p, n);
    qr_error_clear(err);
    int rc = fn(copy, n, err);
    free(copy);
    return rc;
}

/* A decoder's failure is a clean protocol error. */
static void assert_clean_failure(int rc, const QrError *e)
{
    cr_assert_neq(rc, QR_OK);
    cr_assert(e->code != QR_OK && e->message[0], "an error without a message");
    const char *st = qr_error_sqlstate(e);
    cr_assert(!strcmp(st, "08P01") || !strcmp(st, "22023") || !strcmp(st, "0A000") ||
                  !strcmp(st, "53200"),
              "unexpected SQLSTATE %s (%s)", st, e->message);
}

/* Every strict prefix fails, and so does one extra byte. */
static void check_prefixes(DecodeFn fn, const QrBuf *b)
{
    QrError e;
    cr_assert_eq(decode_exact(fn, b->data, b->len, &e), QR_OK, "valid message: %s", e.message);
    for (size_t n = 0; n < b->len; n++)
        assert_clean_failure(decode_exact(fn, b->data, n, &e), &e);
    uint8_t *longer = malloc(b->len + 1);
    memcpy(longer, b->data, b->len);
    longer[b->len] = 'x';
    assert_clean_failure(decode_exact(fn, longer, b->len + 1, &e), &e);
    free(longer);
}

/* ---- startup ---- */

Test(pgwire_msg, startup_decodes_params)
{
    QrBuf b;
    qr_buf_init(&b);
    be32(&b, PGW_PROTO_30);
    cstr(&b, "user"), cstr(&b, "alice");
    cstr(&b, "database"), cstr(&b, "quarry");
    cstr(&b, "application_name"), cstr(&b, "psql");
    qr_buf_putc(&b, 0);
    PgwStartup s;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(pgw_decode_startup(b.data, b.len, &s, &e), QR_OK);
    cr_assert_eq(s.kind, PGW_START_NORMAL);
    cr_assert_eq(s.major, 3);
    cr_assert_eq(s.minor, 0);
    cr_assert_eq(s.n_params, 3);
    cr_assert_str_eq(pgw_startup_get(&s, "user"), "alice");
    cr_assert_str_eq(pgw_startup_get(&s, "database"), "quarry");
    cr_assert_null(pgw_startup_get(&s, "options"));
    check_prefixes(dec_startup, &b);
    qr_buf_free(&b);
}

Test(pgwire_msg, startup_special_codes)
{
    QrBuf b;
    qr_buf_init(&b);
    be32(&b, PGW_SSL_CODE);
    PgwStartup s;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(pgw_decode_startup(b.data, b.len, &s, &e), QR_OK);
    cr_assert_eq(s.kind, PGW_START_SSL);
    b.len = 0;
    be32(&b, PGW_GSSENC_CODE);
    cr_assert_eq(pgw_decode_startup(b.data, b.len, &s, &e), QR_OK);
    cr_assert_eq(s.kind, PGW_START_GSSENC);
    b.len = 0;
    be32(&b, PGW_CANCEL_CODE);
    be32(&b, 4242);
    be32(&b, -17);
    cr_assert_eq(pgw_decode_startup(b.data, b.len, &s, &e), QR_OK);
    cr_assert_eq(s.kind, PGW_START_CANCEL);
    cr_assert_eq(s.cancel_pid, 4242);
    cr_assert_eq(s.cancel_key, -17);
    check_prefixes(dec_startup, &b);
    /* protocol 2.0 is refused as unsupported */
    b.len = 0;
    be32(&b, 2 << 16);
    qr_buf_putc(&b, 0);
    cr_assert_eq(pgw_decode_startup(b.data, b.len, &s, &e), QR_EUNSUPPORTED);
    cr_assert_str_eq(qr_error_sqlstate(&e), "0A000");
    qr_buf_free(&b);
}

Test(pgwire_msg, startup_too_many_params)
{
    QrBuf b;
    qr_buf_init(&b);
    be32(&b, PGW_PROTO_30);
    for (int i = 0; i < PGW_MAX_STARTUP_PARAMS + 1; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        cstr(&b, k), cstr(&b, "v");
    }
    qr_buf_putc(&b, 0);
    QrError e;
    assert_clean_failure(decode_exact(dec_startup, b.data, b.len, &e), &e);
    qr_buf_free(&b);
}

/* ---- extended protocol messages ---- */

Test(pgwire_msg, parse_decodes_types)
{
    QrBuf b;
    qr_buf_init(&b);
    cstr(&b, "s1");
    cstr(&b, "SELECT $1::int8, $2");
    be16(&b, 2);
    be32(&b, 20);
    be32(&b, 0);
    PgwParse p;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(pgw_decode_parse(b.data, b.len, &p, &e), QR_OK);
    cr_assert_str_eq(p.name, "s1");
    cr_assert_str_eq(p.query, "SELECT $1::int8, $2");
    cr_assert_eq(p.n_types, 2);
    cr_assert_eq(pgw_parse_type(&p, 0), 20u);
    cr_assert_eq(pgw_parse_type(&p, 1), 0u);
    check_prefixes(dec_parse, &b);
    /* a negative count */
    b.len = 0;
    cstr(&b, ""), cstr(&b, "SELECT 1");
    be16(&b, -1);
    assert_clean_failure(decode_exact(dec_parse, b.data, b.len, &e), &e);
    qr_buf_free(&b);
}

static void build_bind(QrBuf *b, int n_fmt, int n_res)
{
    cstr(b, "p1");
    cstr(b, "s1");
    be16(b, n_fmt);
    for (int i = 0; i < n_fmt; i++)
        be16(b, i % 2);
    be16(b, 3);
    be32(b, 5);
    qr_buf_append(b, "hello", 5);
    be32(b, -1); /* NULL */
    be32(b, 8);
    pgw_put_i64(b, 1234567890123LL);
    be16(b, n_res);
    for (int i = 0; i < n_res; i++)
        be16(b, 1);
}

Test(pgwire_msg, bind_decodes_params)
{
    QrBuf b;
    qr_buf_init(&b);
    build_bind(&b, 3, 2);
    PgwBind d;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(pgw_decode_bind(b.data, b.len, &d, &e), QR_OK, "%s", e.message);
    cr_assert_str_eq(d.portal, "p1");
    cr_assert_str_eq(d.stmt, "s1");
    cr_assert_eq(d.n_formats, 3);
    cr_assert_eq(d.formats[0], 0);
    cr_assert_eq(d.formats[1], 1);
    cr_assert_eq(d.n_params, 3);
    cr_assert_eq(d.lengths[0], 5);
    cr_assert(!memcmp(d.values[0], "hello", 5));
    cr_assert_null(d.values[1]);
    cr_assert_eq(d.lengths[2], 8);
    cr_assert_eq(d.n_result_formats, 2);
    cr_assert_eq(d.result_formats[1], 1);
    pgw_bind_free(&d);
    check_prefixes(dec_bind, &b);
    /* zero formats and zero result formats */
    b.len = 0;
    build_bind(&b, 0, 0);
    check_prefixes(dec_bind, &b);
    /* two format codes for three parameters */
    b.len = 0;
    build_bind(&b, 2, 0);
    assert_clean_failure(decode_exact(dec_bind, b.data, b.len, &e), &e);
    qr_buf_free(&b);
}

Test(pgwire_msg, bind_rejects_lies)
{
    QrError e;
    QrBuf b;
    qr_buf_init(&b);
    /* 30000 parameters claimed, 4 bytes present: no huge allocation, an error */
    cstr(&b, ""), cstr(&b, "");
    be16(&b, 0);
    be16(&b, 30000);
    be32(&b, 1);
    assert_clean_failure(decode_exact(dec_bind, b.data, b.len, &e), &e);
    /* a parameter longer than the message */
    b.len = 0;
    cstr(&b, ""), cstr(&b, "");
    be16(&b, 0);
    be16(&b, 1);
    be32(&b, 1000000);
    qr_buf_append(&b, "abc", 3);
    be16(&b, 0);
    assert_clean_failure(decode_exact(dec_bind, b.data, b.len, &e), &e);
    /* a length below -1 */
    b.len = 0;
    cstr(&b, ""), cstr(&b, "");
    be16(&b, 0);
    be16(&b, 1);
    be32(&b, -2);
    be16(&b, 0);
    assert_clean_failure(decode_exact(dec_bind, b.data, b.len, &e), &e);
    /* format code 7 */
    b.len = 0;
    cstr(&b, ""), cstr(&b, "");
    be16(&b, 1);
    be16(&b, 7);
    be16(&b, 0);
    be16(&b, 0);
    cr_assert_neq(decode_exact(dec_bind, b.data, b.len, &e), QR_OK);
    cr_assert_str_eq(qr_error_sqlstate(&e), "22023");
    qr_buf_free(&b);
}

Test(pgwire_msg, small_messages)
{
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_putc(&b, 'P');
    cstr(&b, "c1");
    check_prefixes(dec_describe, &b);
    b.len = 0;
    qr_buf_putc(&b, 'X'); /* neither S nor P */
    cstr(&b, "c1");
    QrError e;
    assert_clean_failure(decode_exact(dec_describe, b.data, b.len, &e), &e);
    b.len = 0;
    cstr(&b, "portal");
    be32(&b, 100);
    check_prefixes(dec_execute, &b);
    b.len = 0;
    cstr(&b, "SELECT 1; SELECT 2");
    check_prefixes(dec_query, &b);
    b.len = 0;
    cstr(&b, "SCRAM-SHA-256");
    be32(&b, 4);
    qr_buf_append(&b, "n,,x", 4);
    check_prefixes(dec_sasl, &b);
    b.len = 0;
    cstr(&b, "SCRAM-SHA-256");
    be32(&b, -1);
    check_prefixes(dec_sasl, &b);
    qr_buf_free(&b);
}

Test(pgwire_msg, random_garbage_never_crashes)
{
    DecodeFn fns[] = {dec_startup, dec_parse, dec_bind, dec_describe,
                      dec_execute, dec_query, dec_sasl};
    int n_ok = 0;
    for (int iter = 0; iter < 20000; iter++) {
        size_t n = rnd() % 64;
        uint8_t buf[64];
        for (size_t i = 0; i < n; i++) {
            uint64_t r = rnd();
            /* mostly small values and NULs, so structure appears sometimes */
            buf[i] = (uint8_t)(r % 4 == 0 ? 0 : r % 4 == 1 ? (r >> 8) % 4 : r >> 16);
        }
        for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
            QrError e;
            int rc = decode_exact(fns[f], buf, n, &e);
            if (rc == QR_OK)
                n_ok++;
            else
                assert_clean_failure(rc, &e);
        }
    }
    cr_assert_gt(n_ok, 0, "random input never decoded: the generator is too weak");
}

/* ---- encoders ---- */

Test(pgwire_msg, error_response_fields)
{
    QrError e;
    qr_error_clear(&e);
    qr_error_set(&e, QR_ENOTFOUND, "column \"nope\" does not exist");
    qr_error_set_sqlstate(&e, "42703");
    qr_error_hint(&e, "check the name");
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_append(&b, "junk", 4);
    size_t start = b.len;
    pgw_put_error(&b, 'E', "ERROR", &e, 8);
    cr_assert_eq(b.data[start], 'E');
    PgwRd r;
    pgw_rd_init(&r, b.data + start + 1, b.len - start - 1);
    int32_t len = pgw_rd_i32(&r);
    cr_assert_eq((size_t)len, b.len - start - 1);
    char seen[128] = "";
    for (;;) {
        uint8_t code = pgw_rd_u8(&r);
        if (r.bad || code == 0)
            break;
        const char *v = pgw_rd_cstr(&r);
        cr_assert_not_null(v);
        char one[96];
        snprintf(one, sizeof one, "%c=%s;", code, v);
        if (code != 'M' && code != 'H')
            strcat(seen, one);
        if (code == 'M')
            cr_assert_str_eq(v, "column \"nope\" does not exist");
        if (code == 'H')
            cr_assert_str_eq(v, "check the name");
    }
    cr_assert(!r.bad && r.p == r.end);
    cr_assert_str_eq(seen, "S=ERROR;V=ERROR;C=42703;P=8;");
    qr_buf_free(&b);
}

/* An independent decoder of PostgreSQL's binary numeric, to decimal text
 * with dscale fraction digits. */
static void numeric_to_text(const uint8_t *p, size_t n, char *out, size_t cap)
{
    PgwRd r;
    pgw_rd_init(&r, p, n);
    int nd = pgw_rd_i16(&r), weight = pgw_rd_i16(&r);
    uint16_t sign = (uint16_t)pgw_rd_i16(&r);
    int dscale = pgw_rd_i16(&r);
    int digits[256];
    cr_assert(nd >= 0 && nd < 256);
    for (int i = 0; i < nd; i++) {
        digits[i] = pgw_rd_i16(&r);
        cr_assert(digits[i] >= 0 && digits[i] < 10000);
    }
    cr_assert(!r.bad && r.p == r.end, "numeric has the wrong length");
    if (sign == 0xC000) {
        snprintf(out, cap, "NaN");
        return;
    }
    /* integer part: groups with weight >= 0 */
    char ip[600] = "", fp[600] = "";
    for (int w = weight; w >= 0; w--) {
        int idx = weight - w;
        int g = idx < nd ? digits[idx] : 0;
        char t[8];
        snprintf(t, sizeof t, ip[0] ? "%04d" : "%d", g);
        strcat(ip, t);
    }
    if (!ip[0])
        strcpy(ip, "0");
    for (int w = -1; (int)strlen(fp) < dscale; w--) {
        int idx = weight - w;
        int g = idx >= 0 && idx < nd ? digits[idx] : 0;
        char t[8];
        snprintf(t, sizeof t, "%04d", g);
        strcat(fp, t);
    }
    fp[dscale] = 0;
    snprintf(out, cap, "%s%s%s%s", sign == 0x4000 ? "-" : "", ip, dscale ? "." : "", fp);
}

static void check_numeric(const char *text, const char *want)
{
    QrSqlValue v = {.type = QR_SQL_NUMERIC, .is_null = false};
    v.u.s.s = text;
    v.u.s.n = strlen(text);
    QrBuf b;
    qr_buf_init(&b);
    pgw_put_value(&b, &v, 1, NULL);
    PgwRd r;
    pgw_rd_init(&r, b.data, b.len);
    int32_t len = pgw_rd_i32(&r);
    cr_assert_eq((size_t)len + 4, b.len);
    char got[700];
    numeric_to_text(b.data + 4, (size_t)len, got, sizeof got);
    cr_assert_str_eq(got, want, "numeric %s", text);
    qr_buf_free(&b);
}

Test(pgwire_msg, binary_numeric)
{
    check_numeric("12.50", "12.50");
    check_numeric("-0.001", "-0.001");
    check_numeric("10000", "10000");
    check_numeric("0", "0");
    check_numeric("0.00", "0.00");
    check_numeric("-0", "0");
    check_numeric("NaN", "NaN");
    check_numeric("123456789.000000001", "123456789.000000001");
    /* random decimals: decode(encode(x)) == x, with leading zeros removed */
    for (int i = 0; i < 2000; i++) {
        char t[80], want[80];
        int il = (int)(rnd() % 20), fl = (int)(rnd() % 12);
        size_t o = 0;
        bool neg = rnd() % 2;
        if (neg)
            t[o++] = '-';
        for (int k = 0; k < il; k++)
            t[o++] = (char)('0' + rnd() % 10);
        if (il == 0)
            t[o++] = '0';
        if (fl) {
            t[o++] = '.';
            for (int k = 0; k < fl; k++)
                t[o++] = (char)('0' + rnd() % 10);
        }
        t[o] = 0;
        /* expected: no leading zeros in the integer part, "-" only if nonzero */
        const char *digits = t + (neg ? 1 : 0);
        while (digits[0] == '0' && digits[1] && digits[1] != '.')
            digits++;
        bool zero = true;
        for (const char *q = digits; *q; q++)
            if (*q >= '1' && *q <= '9')
                zero = false;
        snprintf(want, sizeof want, "%s%s", neg && !zero ? "-" : "", digits);
        check_numeric(t, want);
    }
}

Test(pgwire_msg, binary_scalars)
{
    QrBuf b;
    qr_buf_init(&b);
    QrSqlValue v = {.type = QR_SQL_INT8};
    v.u.i = -2;
    pgw_put_value(&b, &v, 1, NULL);
    const uint8_t want8[] = {0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe};
    cr_assert_eq(b.len, sizeof want8);
    cr_assert(!memcmp(b.data, want8, sizeof want8));
    b.len = 0;
    v.type = QR_SQL_TIMESTAMPTZ;
    v.u.i = 946684800000000LL + 1; /* 2000-01-01 00:00:00.000001 UTC */
    pgw_put_value(&b, &v, 1, NULL);
    const uint8_t want_ts[] = {0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1};
    cr_assert(!memcmp(b.data, want_ts, sizeof want_ts));
    b.len = 0;
    v.type = QR_SQL_FLOAT8;
    v.u.f = 1.5; /* 0x3FF8000000000000 */
    pgw_put_value(&b, &v, 1, NULL);
    const uint8_t want_f[] = {0, 0, 0, 8, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0};
    cr_assert(!memcmp(b.data, want_f, sizeof want_f));
    b.len = 0;
    v.type = QR_SQL_BOOL;
    v.u.b = true;
    pgw_put_value(&b, &v, 1, NULL);
    const uint8_t want_b[] = {0, 0, 0, 1, 1};
    cr_assert(!memcmp(b.data, want_b, sizeof want_b));
    b.len = 0;
    v.is_null = true;
    pgw_put_value(&b, &v, 1, NULL);
    const uint8_t want_null[] = {0xff, 0xff, 0xff, 0xff};
    cr_assert(!memcmp(b.data, want_null, sizeof want_null));
    qr_buf_free(&b);
}

/* ---- SCRAM ---- */

Test(scram, rfc7677_client_example)
{
    char out[512];
    uint8_t sig[SCRAM_KEY_LEN];
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(scram_client_final("pencil", "n=user,r=rOprNGfwEbeRWgbNEkqO",
                                    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                                    "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
                                    "n,,", out, sizeof out, sig, &e),
                 QR_OK);
    cr_assert_str_eq(out, "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                          "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
    char sig64[64];
    scram_b64_encode(sig, SCRAM_KEY_LEN, sig64, sizeof sig64);
    cr_assert_str_eq(sig64, "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
}

/* One exchange against a verifier; returns the server's verdict. */
static int exchange(const char *verifier, const char *password, bool *sig_ok)
{
    ScramServer s;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(scram_server_init(&s, verifier, &e), QR_OK);
    const char *first = "n,,n=,r=abcdefghijklmnop";
    char sf[512], cf[512], fin[512];
    cr_assert_eq(scram_server_first(&s, first, strlen(first), sf, sizeof sf, &e), QR_OK);
    cr_assert(!strncmp(sf, "r=abcdefghijklmnop", 18), "server nonce extends the client's");
    uint8_t sig[SCRAM_KEY_LEN];
    cr_assert_eq(scram_client_final(password, "n=,r=abcdefghijklmnop", sf, "n,,", cf, sizeof cf,
                                    sig, &e),
                 QR_OK);
    int rc = scram_server_final(&s, cf, strlen(cf), fin, sizeof fin, &e);
    if (rc == QR_OK) {
        char want[64] = "v=";
        scram_b64_encode(sig, SCRAM_KEY_LEN, want + 2, sizeof want - 2);
        *sig_ok = !strcmp(fin, want);
    } else {
        cr_assert_str_eq(qr_error_sqlstate(&e), "28P01");
    }
    return rc;
}

Test(scram, server_accepts_right_password_only)
{
    char ver[256];
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(scram_make_verifier("s3cret", 6, 4096, ver, sizeof ver, &e), QR_OK);
    cr_assert(!strncmp(ver, "SCRAM-SHA-256$4096:", 19));
    ScramVerifier v;
    cr_assert_eq(scram_parse_verifier(ver, &v, &e), QR_OK);
    cr_assert_eq(v.iterations, 4096);
    cr_assert_eq(v.salt_len, (size_t)SCRAM_SALT_LEN);
    bool sig_ok = false;
    cr_assert_eq(exchange(ver, "s3cret", &sig_ok), QR_OK);
    cr_assert(sig_ok, "server signature verifies on the client");
    cr_assert_eq(exchange(ver, "s3cret!", &sig_ok), QR_EAUTH);
    cr_assert_eq(exchange(ver, "", &sig_ok), QR_EAUTH);
    cr_assert_eq(exchange(NULL, "s3cret", &sig_ok), QR_EAUTH); /* unknown user */
}

Test(scram, server_rejects_malformed_messages)
{
    const char *bad_first[] = {"", "n", "x,,n=,r=a", "p=tls-unique,,n=,r=a", "n,a=me,n=,r=a",
                               "n,,r=a", "n,,n=", "n,,n=,r=", "n,,n=,r=a\x01"};
    for (size_t i = 0; i < sizeof bad_first / sizeof bad_first[0]; i++) {
        ScramServer s;
        QrError e;
        qr_error_clear(&e);
        scram_server_init(&s, NULL, &e);
        char out[512];
        cr_assert_neq(scram_server_first(&s, bad_first[i], strlen(bad_first[i]), out, sizeof out,
                                         &e),
                      QR_OK, "accepted %s", bad_first[i]);
    }
    char ver[256];
    QrError e;
    qr_error_clear(&e);
    scram_make_verifier("pw", 2, 4096, ver, sizeof ver, &e);
    const char *bad_final[] = {"", "c=biws", "c=biws,r=wrong,p=AAAA", "c=eSws,r=%s,p=AAAA",
                               "c=biws,r=%s", "c=biws,r=%s,p=!!!!"};
    for (size_t i = 0; i < sizeof bad_final / sizeof bad_final[0]; i++) {
        ScramServer s;
        qr_error_clear(&e);
        scram_server_init(&s, ver, &e);
        char sf[512], msg[600], out[512];
        cr_assert_eq(scram_server_first(&s, "n,,n=,r=xyz", 11, sf, sizeof sf, &e), QR_OK);
        snprintf(msg, sizeof msg, bad_final[i], s.nonce);
        cr_assert_neq(scram_server_final(&s, msg, strlen(msg), out, sizeof out, &e), QR_OK,
                      "accepted %s", msg);
    }
}

Test(scram, base64)
{
    for (int n = 0; n < 40; n++) {
        uint8_t in[40], back[40];
        for (int i = 0; i < n; i++)
            in[i] = (uint8_t)rnd();
        char enc[80];
        size_t el = scram_b64_encode(in, (size_t)n, enc, sizeof enc);
        cr_assert_eq(el, (size_t)(n + 2) / 3 * 4);
        cr_assert_eq(scram_b64_decode(enc, el, back, sizeof back), n);
        cr_assert(!memcmp(in, back, (size_t)n));
    }
    uint8_t out[16];
    cr_assert_eq(scram_b64_decode("abc", 3, out, sizeof out), -1);
    cr_assert_eq(scram_b64_decode("ab=c", 4, out, sizeof out), -1);
    cr_assert_eq(scram_b64_decode("a*cd", 4, out, sizeof out), -1);
    cr_assert_eq(scram_b64_decode("AAAAAAAAAAAAAAAAAAAAAAAA", 24, out, sizeof out), -1);
}

Test(scram, user_file)
{
    char dir[] = "/tmp/qr-scram-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    QrError e;
    qr_error_clear(&e);
    ScramUsers u;
    cr_assert_eq(scram_users_load(dir, &u, &e), QR_OK);
    cr_assert_eq(u.n, 0);
    cr_assert_eq(scram_users_put(dir, "alice", "pw1", SCRAM_ROLE_READ_WRITE, &e), QR_OK);
    cr_assert_eq(scram_users_put(dir, "bob", "pw2", SCRAM_ROLE_READ_ONLY, &e), QR_OK);
    cr_assert_eq(scram_users_put(dir, "alice", "pw3", SCRAM_ROLE_READ_WRITE, &e), QR_OK);
    cr_assert_eq(scram_users_put(dir, "../x", "pw", SCRAM_ROLE_READ_WRITE, &e), QR_EINVAL);
    qr_error_clear(&e);
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, SCRAM_USERS_FILE);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600);
    cr_assert_eq(scram_users_load(dir, &u, &e), QR_OK);
    cr_assert_eq(u.n, 2);
    const ScramUser *a = scram_users_find(&u, "alice"), *b = scram_users_find(&u, "bob");
    cr_assert(a && b);
    cr_assert_eq(b->role, SCRAM_ROLE_READ_ONLY);
    bool sig_ok;
    cr_assert_eq(exchange(a->verifier, "pw3", &sig_ok), QR_OK, "the new password works");
    cr_assert_eq(exchange(a->verifier, "pw1", &sig_ok), QR_EAUTH, "the old one does not");
    scram_users_free(&u);
    cr_assert_eq(scram_users_remove(dir, "bob", &e), QR_OK);
    cr_assert_eq(scram_users_remove(dir, "bob", &e), QR_ENOTFOUND);
    qr_error_clear(&e);
    cr_assert_eq(scram_users_load(dir, &u, &e), QR_OK);
    cr_assert_eq(u.n, 1);
    scram_users_free(&u);
    /* a damaged file is an error, not zero users */
    FILE *f = fopen(path, "w");
    fputs("{\"users\": [{\"name\": \"x\"}]}", f);
    fclose(f);
    cr_assert_neq(scram_users_load(dir, &u, &e), QR_OK);
    unlink(path);
    rmdir(dir);
}
