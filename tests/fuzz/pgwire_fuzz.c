/*
 * pgwire_fuzz.c — libFuzzer target for the PostgreSQL message decoders
 * (src/server/pgwire_msg.c): startup packet, Parse, Bind, Describe/Close,
 * Execute, Query/CopyFail and SASLInitialResponse, plus the SCRAM server's
 * message parsers (src/server/scram.c).
 *
 * Build: `make fuzz` / `make fuzz-smoke` (every tests/fuzz target).
 *
 * Input: byte 0 picks the decoder (mod 9), the rest is a message body
 * (exactly the bytes the decoder may read: ASan sees any overread).  Beyond
 * "no crash, no leak, no hang" it checks the decoders' promises:
 *   - success: every decoded string and parameter lies inside the body,
 *     strings are NUL-terminated inside it, counts are non-negative;
 *   - failure: QR_EINVAL/QR_EUNSUPPORTED/QR_ENOMEM with a message and a
 *     protocol SQLSTATE (08P01, 22023, 0A000) or out of memory (53200).
 * Every crash it finds becomes a case in tests/unit/server/test_pgwire_msg.c.
 */
#include "fuzz_util.h"
#include "server/pgwire_int.h"
#include "server/scram.h"

static const uint8_t *lo, *hi;

static void in_body(const void *p, size_t n)
{
    CHECK((const uint8_t *)p >= lo && (const uint8_t *)p + n <= hi);
}

static void in_body_str(const char *s)
{
    CHECK(s != NULL);
    size_t n = strnlen(s, (size_t)(hi - (const uint8_t *)s));
    in_body(s, n + 1); /* the NUL too */
}

static void check_failure(int rc, const QrError *e)
{
    CHECK(rc != QR_OK && e->code == rc && e->message[0]);
    const char *st = qr_error_sqlstate(e);
    CHECK(!strcmp(st, "08P01") || !strcmp(st, "22023") || !strcmp(st, "0A000") ||
          !strcmp(st, "53200"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int which = data[0] % 9;
    size_t n = size - 1;
    uint8_t *body = malloc(n ? n : 1);
    memcpy(body, data + 1, n);
    lo = body;
    hi = body + n;
    QrError e;
    qr_error_clear(&e);
    int rc = QR_OK;
    switch (which) {
    case 0: {
        PgwStartup s;
        rc = pgw_decode_startup(body, n, &s, &e);
        if (rc == QR_OK) {
            CHECK(s.n_params >= 0 && s.n_params <= PGW_MAX_STARTUP_PARAMS);
            for (int i = 0; i < s.n_params; i++)
                in_body_str(s.keys[i]), in_body_str(s.vals[i]);
        }
        break;
    }
    case 1: {
        PgwParse p;
        rc = pgw_decode_parse(body, n, &p, &e);
        if (rc == QR_OK) {
            in_body_str(p.name);
            in_body_str(p.query);
            CHECK(p.n_types >= 0);
            in_body(p.types, (size_t)p.n_types * 4);
            for (int i = 0; i < p.n_types; i++)
                (void)pgw_parse_type(&p, i);
        }
        break;
    }
    case 2: {
        PgwBind b;
        rc = pgw_decode_bind(body, n, &b, &e);
        if (rc == QR_OK) {
            in_body_str(b.portal);
            in_body_str(b.stmt);
            CHECK(b.n_params >= 0 && b.n_formats >= 0 && b.n_result_formats >= 0);
            CHECK(b.n_formats <= 1 || b.n_formats == b.n_params);
            for (int i = 0; i < b.n_params; i++)
                if (b.values[i])
                    in_body(b.values[i], (size_t)b.lengths[i]);
            for (int i = 0; i < b.n_formats; i++)
                CHECK(b.formats[i] == 0 || b.formats[i] == 1);
            for (int i = 0; i < b.n_result_formats; i++)
                CHECK(b.result_formats[i] == 0 || b.result_formats[i] == 1);
            pgw_bind_free(&b);
        }
        break;
    }
    case 3: {
        PgwTarget t;
        rc = pgw_decode_target(body, n, "Describe", &t, &e);
        if (rc == QR_OK) {
            CHECK(t.kind == 'S' || t.kind == 'P');
            in_body_str(t.name);
        }
        break;
    }
    case 4: {
        PgwExecute x;
        rc = pgw_decode_execute(body, n, &x, &e);
        if (rc == QR_OK) {
            in_body_str(x.portal);
            CHECK(x.max_rows >= 0);
        }
        break;
    }
    case 5: {
        const char *q = NULL;
        rc = pgw_decode_string(body, n, "Query", &q, &e);
        if (rc == QR_OK)
            in_body_str(q);
        break;
    }
    case 6: {
        PgwSaslInit s;
        rc = pgw_decode_sasl_init(body, n, &s, &e);
        if (rc == QR_OK) {
            in_body_str(s.mechanism);
            CHECK(s.data_len >= -1);
            if (s.data_len > 0)
                in_body(s.data, (size_t)s.data_len);
        }
        break;
    }
    case 7:
    case 8: {
        /* the SCRAM server on hostile client messages: first, then final */
        ScramServer ss;
        static char ver[256];
        if (!ver[0])
            CHECK(scram_make_verifier("pw", 2, 16, ver, sizeof ver, NULL) == QR_OK);
        CHECK(scram_server_init(&ss, which == 7 ? ver : NULL, &e) == QR_OK);
        char out[512];
        const char *nul = memchr(body, 0, n);
        size_t first_len = nul ? (size_t)(nul - (const char *)body) : n;
        rc = scram_server_first(&ss, (const char *)body, first_len, out, sizeof out, &e);
        if (rc == QR_OK) {
            CHECK(!strncmp(out, "r=", 2) && strlen(out) < sizeof out);
            size_t rest = nul ? n - first_len - 1 : 0;
            qr_error_clear(&e);
            rc = scram_server_final(&ss, nul ? nul + 1 : "", rest, out, sizeof out, &e);
            /* nobody but the password holder gets in */
            CHECK(rc != QR_OK);
        }
        free(body);
        return 0; /* SCRAM errors are 28P01 / 08P01 / internal: not checked above */
    }
    }
    if (rc != QR_OK)
        check_failure(rc, &e);
    free(body);
    return 0;
}
