/*
 * qparse_fuzz.c — libFuzzer target for the text query parser (src/query/qparse.c).
 *
 * Build (what `make fuzz` does, plus the base kit):
 *   clang -fsanitize=fuzzer,address,undefined -Isrc -std=c11 -D_GNU_SOURCE \
 *     tests/fuzz/qparse_fuzz.c src/query/qparse.c \
 *     src/store/error.c src/store/mem.c src/store/buf.c -o qparse_fuzz
 *   ./qparse_fuzz -dict=tests/fuzz/qparse.dict tests/fuzz/corpus/qparse
 *
 * Input: byte 0 picks the options (default operator, known-field list,
 * small limits, a memory cap), the rest is the query.  Beyond "no crash, no
 * leak, no hang" it checks what the parser promises on every input:
 *   - an error has a code, a message and an offset inside the query;
 *   - a tree is well formed (bools have >= 2 kids and a positive kid,
 *     min_should agrees with the kids, leaves carry NUL-terminated text);
 *   - the canonical form parses again and formats to the same text.
 * A broken promise aborts, which libFuzzer reports as a crash.  Every crash
 * it finds becomes a case in tests/unit/query/test_qparse.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/qparse.h"

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "qparse_fuzz: check failed: %s (line %d)\n", #cond,      \
                    __LINE__);                                                       \
            abort();                                                                 \
        }                                                                            \
    } while (0)

static void check_tree(const QNode *n, int depth)
{
    CHECK(n && depth <= 4 * QPARSE_MAX_DEPTH_LIMIT);
    CHECK(n->boost == 0.0f ||
          (n->boost >= (float)QPARSE_MIN_BOOST && n->boost <= (float)QPARSE_MAX_BOOST));
    if (n->kind == QN_BOOL) {
        CHECK(n->n_kids >= 2 && !n->field && !n->text);
        int must = 0, should = 0;
        for (int i = 0; i < n->n_kids; i++) {
            must += n->kids[i]->occur == QO_MUST;
            should += n->kids[i]->occur == QO_SHOULD;
            check_tree(n->kids[i], depth + 1);
        }
        CHECK(must + should > 0);
        CHECK(n->min_should == (must ? 0 : 1));
    } else if (n->kind == QN_ALL) {
        CHECK(!n->text && !n->field && n->n_kids == 0);
    } else {
        CHECK(n->text && strlen(n->text) == n->text_len && n->n_kids == 0);
        CHECK(n->kind != QN_FUZZY || (n->edits >= 0 && n->edits <= QPARSE_MAX_EDITS));
        CHECK(n->kind != QN_PHRASE || (n->slop >= 0 && n->slop <= QPARSE_MAX_SLOP));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const fields[] = {"title", "body", "a", NULL};
    if (size == 0)
        return 0;
    uint8_t sel = data[0];
    const char *q = (const char *)data + 1;
    size_t len = size - 1;
    QParseOpts o = {
        .default_and = sel & 1,
        .fields = (sel & 2) ? fields : NULL,
        .max_clauses = (sel & 4) ? 8 : 0,
        .max_depth = (sel & 8) ? 3 : 0,
    };
    QrArena *arena = qr_arena_new((sel & 16) ? 4096 : 0);
    if (!arena)
        return 0;
    QNode *n = NULL;
    QrError err;
    qr_error_clear(&err);
    int rc = qparse(arena, q, len, &o, &n, &err);
    if (rc != QR_OK) {
        CHECK(rc == QR_ESYNTAX || rc == QR_EINVAL || rc == QR_ELIMIT || rc == QR_ENOMEM);
        CHECK((int)err.code == rc && err.message[0]);
        CHECK(err.offset >= 0 && (size_t)err.offset <= len);
        CHECK(err.line >= 1 && err.column >= 1);
        qr_arena_free(arena);
        return 0;
    }
    CHECK(n && n->occur == QO_MUST);
    check_tree(n, 0);

    QrBuf f1, f2;
    qr_buf_init(&f1);
    qr_buf_init(&f2);
    CHECK(qnode_format(n, &f1) == QR_OK);
    QParseOpts again = {.fields = o.fields, .max_clauses = 1 << 30,
                        .max_depth = QPARSE_MAX_DEPTH_LIMIT};
    QrArena *arena2 = qr_arena_new(0);
    CHECK(arena2);
    QNode *n2 = NULL;
    qr_error_clear(&err);
    rc = qparse(arena2, (const char *)f1.data, f1.len, &again, &n2, &err);
    if (rc != QR_OK) {
        fprintf(stderr, "canonical form does not parse: [%.*s]: %s\n", (int)f1.len,
                (const char *)f1.data, err.message);
        abort();
    }
    check_tree(n2, 0);
    CHECK(qnode_format(n2, &f2) == QR_OK);
    if (f1.len != f2.len || memcmp(f1.data, f2.data, f1.len) != 0) {
        fprintf(stderr, "not a fixpoint: [%.*s] -> [%.*s]\n", (int)f1.len,
                (const char *)f1.data, (int)f2.len, (const char *)f2.data);
        abort();
    }
    qr_buf_free(&f1);
    qr_buf_free(&f2);
    qr_arena_free(arena2);
    qr_arena_free(arena);
    return 0;
}
