/*
 * test_buf.c — the base kit's JSON string writer (qr_buf_json_str), which
 * every layer uses to put user bytes (keys, keyword values, SQL text) into
 * JSON: the output must be valid JSON whatever the bytes.
 */
#include <criterion/criterion.h>
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
