/*
 * test_schema_infer.c — schema inference (store/schema.h): a field's type
 * is the kind most of its sampled values have, short repeating strings
 * become text with a keyword column, and the explanation names each
 * field's decision with its counts.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "store/column.h"
#include "store/schema.h"

/* Infer from lines[0..n) (one JSON object each); the schema into *out and
 * the explanation, NUL-terminated, into notes. */
static void infer(const char *const *lines, int n, QrSchema *out, char *notes, size_t cap)
{
    SchemaInfer *si = schema_infer_new("id");
    cr_assert_not_null(si);
    QrError e;
    for (int i = 0; i < n; i++) {
        qr_error_clear(&e);
        schema_infer_add(si, lines[i], strlen(lines[i]), &e);
    }
    qr_error_clear(&e);
    cr_assert_eq(schema_infer_finish(si, out, &e), QR_OK, "%s", e.message);
    QrBuf b;
    qr_buf_init(&b);
    cr_assert_eq(schema_infer_explain(si, &b), QR_OK);
    snprintf(notes, cap, "%.*s", (int)b.len, b.data ? (const char *)b.data : "");
    qr_buf_free(&b);
    schema_infer_free(si);
}

static const QrField *field(const QrSchema *s, const char *name)
{
    int i = schema_field_index(s, name);
    return i < 0 ? NULL : &s->fields[i];
}

Test(schema_infer, one_string_among_numbers_keeps_the_field_numeric)
{
    const char *lines[] = {
        "{\"id\":1,\"price\":10,\"qty\":1}",    "{\"id\":2,\"price\":12,\"qty\":2}",
        "{\"id\":3,\"price\":\"n/a\",\"qty\":3}", "{\"id\":4,\"price\":13,\"qty\":4.5}",
        "{\"id\":5,\"price\":14,\"qty\":5}",    "{\"id\":6,\"price\":15,\"qty\":null}",
    };
    QrSchema s;
    char notes[2048];
    infer(lines, 6, &s, notes, sizeof notes);
    cr_assert_not_null(field(&s, "price"));
    cr_assert_eq(field(&s, "price")->type, QR_FT_INT);
    cr_assert_eq(field(&s, "qty")->type, QR_FT_FLOAT, "a fraction among integers: float");
    cr_assert_null(field(&s, "id"), "the primary key is not a field");
    cr_assert(strstr(notes, "price: int: 5 of 6 sampled values are integers; lines with the "
                            "other 1 are rejected"),
              "%s", notes);
    cr_assert(strstr(notes, "qty: float: 5 of 5"), "%s", notes);
}

Test(schema_infer, majorities_decide_bool_and_timestamp_and_ties_go_to_text)
{
    const char *lines[] = {
        "{\"ok\":true,\"at\":\"2025-01-02T03:04:05Z\",\"mix\":1}",
        "{\"ok\":false,\"at\":\"2025-01-03\",\"mix\":\"one\"}",
        "{\"ok\":\"yes\",\"at\":\"soon\",\"mix\":2}",
        "{\"ok\":true,\"at\":\"2025-02-01T00:00:00Z\",\"mix\":\"two\"}",
    };
    QrSchema s;
    char notes[2048];
    infer(lines, 4, &s, notes, sizeof notes);
    cr_assert_eq(field(&s, "ok")->type, QR_FT_BOOL);
    cr_assert_eq(field(&s, "at")->type, QR_FT_TIMESTAMP);
    /* two numbers, two strings: no majority, text (which rejects the numbers) */
    cr_assert_eq(field(&s, "mix")->type, QR_FT_TEXT);
    cr_assert(strstr(notes, "mix: text: 2 of 4 sampled values are strings"), "%s", notes);
    cr_assert(strstr(notes, "ok: bool: 3 of 4"), "%s", notes);
}

Test(schema_infer, short_repeating_strings_are_text_with_a_keyword_column)
{
    enum { N = 300 };
    static char buf[N][256];
    const char *lines[N];
    const char *cats[] = {"sports", "politics", "Local News", "science"};
    for (int i = 0; i < N; i++) {
        /* cat: 4 labels; title: unique; long: repeated but long; uniq: 300
         * short distinct values; tags: an array */
        snprintf(buf[i], sizeof buf[i],
                 "{\"id\":%d,\"cat\":\"%s\",\"title\":\"story number %d\",\"long\":\"%s\","
                 "\"uniq\":\"u%d\",\"tags\":[\"a\",\"b\"],\"none\":null,\"obj\":{\"x\":1}}",
                 i, cats[i % 4], i,
                 i % 2 ? "a long sentence that goes on and on past sixty-four bytes of text"
                       : "short",
                 i);
        lines[i] = buf[i];
    }
    QrSchema s;
    char notes[4096];
    infer(lines, N, &s, notes, sizeof notes);
    const QrField *cat = field(&s, "cat");
    cr_assert_eq(cat->type, QR_FT_TEXT);
    cr_assert(cat->column, "4 short labels: a keyword column too");
    cr_assert_eq(schema_column_type(cat), QR_COL_KEYWORD);
    cr_assert(!field(&s, "title")->column, "unique titles are prose");
    cr_assert(!field(&s, "long")->column, "a value over 64 bytes is prose");
    cr_assert(!field(&s, "uniq")->column, "more than 256 distinct values");
    cr_assert_eq(field(&s, "tags")->type, QR_FT_TEXT);
    cr_assert(!field(&s, "tags")->column, "arrays have no keyword column");
    cr_assert_null(field(&s, "none"));
    cr_assert_null(field(&s, "obj"));
    cr_assert(strstr(notes, "cat: text and keyword column: 300 of 300 sampled values are short "
                            "strings (at most 10 bytes) with 4 distinct values"),
              "%s", notes);
    cr_assert(strstr(notes, "uniq: text: 300 of 300 sampled values are strings (up to 4 bytes, "
                            "over 256 distinct)"),
              "%s", notes);
    cr_assert(strstr(notes, "none: not indexed: only null in 300 sampled lines"), "%s", notes);
    cr_assert(strstr(notes, "obj: not indexed (stored)"), "%s", notes);
}
