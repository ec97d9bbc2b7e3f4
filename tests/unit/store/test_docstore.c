/*
 * test_docstore.c — document store: random documents (empty ones, ones
 * larger than a block) fetched back in order and at random, several block
 * sizes, merge copies with and without deletes, every byte of a blob
 * changed (caught, never a crash or a wrong document), threads, limits, and
 * an allocation-failure sweep.
 */
#include <criterion/criterion.h>

#include "store/docstore.h"
#include "store/mem.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LEAK_CHECK() cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "leak")
#else
#define LEAK_CHECK() ((void)0)
#endif

#define BIG_DOC 100000

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* Document `id` of family `seed`: JSON-ish text, sometimes empty, sometimes
 * larger than any block.  out holds BIG_DOC bytes. */
static size_t gen_doc(uint32_t seed, uint32_t id, uint8_t *out)
{
    uint64_t h = mix((uint64_t)seed << 32 | id);
    size_t len = id % 13 == 0 ? 0 : id % 97 == 5 ? 20000 + h % 50000 : h % 400;
    int n = snprintf((char *)out, BIG_DOC, "{\"id\":%u,\"body\":\"", id);
    if ((size_t)n > len)
        return len ? (memset(out, 'x', len), len) : 0;
    for (size_t i = (size_t)n; i < len; i++)
        out[i] = (uint8_t)("abcdefgh ijklmnop"[mix(h + i / 8) % 17]);
    return len;
}

static uint8_t docbuf[BIG_DOC];

static void add_docs(DocStoreWriter *w, uint32_t seed, uint32_t n)
{
    QrError err;
    qr_error_clear(&err);
    for (uint32_t i = 0; i < n; i++)
        cr_assert_eq(dsw_add(w, docbuf, gen_doc(seed, i, docbuf), &err), QR_OK, "%s",
                     err.message);
}

static QrBuf build(uint32_t seed, uint32_t n, size_t block_bytes)
{
    DocStoreWriter *w = dsw_new(block_bytes);
    cr_assert_not_null(w);
    add_docs(w, seed, n);
    QrBuf out;
    qr_buf_init(&out);
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(dsw_finish(w, &out, &err), QR_OK, "%s", err.message);
    dsw_free(w);
    return out;
}

/* Fetch doc `id` and compare it with document `want` of family `seed`. */
static void expect_doc(DocStoreCursor *c, uint32_t id, uint32_t seed, uint32_t want)
{
    uint8_t exp[BIG_DOC]; /* not static: reader threads share this */
    const uint8_t *p;
    size_t n;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(ds_get(c, id, &p, &n, &err), QR_OK, "doc %u: %s", id, err.message);
    size_t el = gen_doc(seed, want, exp);
    cr_assert_eq(n, el, "doc %u length", id);
    cr_assert_eq(memcmp(p, exp, n), 0, "doc %u bytes", id);
}

Test(docstore, round_trip_block_sizes)
{
    static const size_t blocks[] = {0, 1, 700, 100000};
    for (size_t b = 0; b < 4; b++) {
        uint32_t n = 3000;
        QrBuf blob = build((uint32_t)b, n, blocks[b]);
        DocStore *ds;
        QrError err;
        qr_error_clear(&err);
        cr_assert_eq(ds_open(blob.data, blob.len, &ds, &err), QR_OK, "%s", err.message);
        cr_assert_eq(ds_count(ds), n);
        DocStoreCursor *c = ds_cursor_new(ds);
        for (uint32_t i = 0; i < n; i++)
            expect_doc(c, i, (uint32_t)b, i);
        for (uint32_t k = 0; k < 2000; k++) {
            uint32_t i = (uint32_t)(mix(k) % n);
            expect_doc(c, i, (uint32_t)b, i);
        }
        const uint8_t *p = NULL;
        size_t len = 7;
        cr_assert_eq(ds_get(c, n, &p, &len, &err), QR_ENOTFOUND);
        cr_assert_null(p);
        cr_assert_eq(len, 7);
        ds_cursor_free(c);
        ds_close(ds);
        qr_buf_free(&blob);
    }
}

Test(docstore, empty_store)
{
    QrBuf blob = build(0, 0, 0);
    DocStore *ds;
    cr_assert_eq(ds_open(blob.data, blob.len, &ds, NULL), QR_OK);
    cr_assert_eq(ds_count(ds), 0);
    DocStoreCursor *c = ds_cursor_new(ds);
    const uint8_t *p;
    size_t n;
    cr_assert_eq(ds_get(c, 0, &p, &n, NULL), QR_ENOTFOUND);
    ds_cursor_free(c);
    ds_close(ds);
    qr_buf_free(&blob);
    ds_cursor_free(NULL);
    ds_close(NULL);
    dsw_free(NULL);
}

Test(docstore, every_byte_change_is_caught)
{
    /* documents 6..95 of family 7: empty ones, and many over the 200-byte
     * block size, but none of the huge ones (a small blob keeps this fast) */
    enum { N = 90 };
    static uint8_t exp[N][BIG_DOC];
    size_t el[N];
    DocStoreWriter *w = dsw_new(200);
    for (uint32_t i = 0; i < N; i++) {
        el[i] = gen_doc(7, i + 6, exp[i]);
        cr_assert_eq(dsw_add(w, exp[i], el[i], NULL), QR_OK);
    }
    QrBuf blob;
    qr_buf_init(&blob);
    cr_assert_eq(dsw_finish(w, &blob, NULL), QR_OK);
    dsw_free(w);
    uint8_t *bad = malloc(blob.len);
    for (size_t pos = 0; pos < blob.len; pos++) {
        memcpy(bad, blob.data, blob.len);
        bad[pos] ^= (uint8_t)(1u << (pos % 8));
        DocStore *ds;
        QrError err;
        qr_error_clear(&err);
        int rc = ds_open(bad, blob.len, &ds, &err);
        if (rc != QR_OK) {
            cr_assert(rc == QR_ECORRUPT || rc == QR_EUNSUPPORTED, "pos %zu: %d", pos, rc);
            continue;
        }
        DocStoreCursor *c = ds_cursor_new(ds);
        int failures = 0;
        for (uint32_t i = 0; i < N; i++) {
            const uint8_t *p;
            size_t n;
            qr_error_clear(&err);
            rc = ds_get(c, i, &p, &n, &err);
            if (rc != QR_OK) {
                cr_assert_eq(rc, QR_ECORRUPT, "pos %zu doc %u", pos, i);
                cr_assert_not_null(strstr(err.message, "block"), "%s", err.message);
                failures++;
                continue;
            }
            cr_assert(n == el[i] && memcmp(p, exp[i], n) == 0, "pos %zu: doc %u silently wrong",
                      pos, i);
        }
        cr_assert_gt(failures, 0, "pos %zu: a changed byte went unnoticed", pos);
        ds_cursor_free(c);
        ds_close(ds);
    }
    /* truncations never open */
    for (size_t cut = 0; cut < blob.len; cut++) {
        DocStore *ds;
        cr_assert_neq(ds_open(blob.data, cut, &ds, NULL), QR_OK, "cut %zu", cut);
    }
    free(bad);
    qr_buf_free(&blob);
}

static QrBuf merge(const DocStore *a, const bool *keep_a, const DocStore *b, const bool *keep_b,
                   uint32_t extra)
{
    DocStoreWriter *w = dsw_new(0);
    QrError err;
    qr_error_clear(&err);
    add_docs(w, 100, extra);
    cr_assert_eq(dsw_add_from(w, a, keep_a, &err), QR_OK, "%s", err.message);
    add_docs(w, 100, extra);
    cr_assert_eq(dsw_add_from(w, b, keep_b, &err), QR_OK, "%s", err.message);
    QrBuf out;
    qr_buf_init(&out);
    cr_assert_eq(dsw_finish(w, &out, &err), QR_OK, "%s", err.message);
    cr_assert_eq(dsw_add(w, "x", 1, &err), QR_EINVAL, "finished");
    dsw_free(w);
    return out;
}

Test(docstore, merge_copies)
{
    enum { NA = 2500, NB = 1700 };
    QrBuf ba = build(1, NA, 0), bb = build(2, NB, 0);
    DocStore *a, *b;
    cr_assert_eq(ds_open(ba.data, ba.len, &a, NULL), QR_OK);
    cr_assert_eq(ds_open(bb.data, bb.len, &b, NULL), QR_OK);

    /* one source, everything kept: the blob comes out byte for byte */
    DocStoreWriter *w = dsw_new(0);
    cr_assert_eq(dsw_add_from(w, a, NULL, NULL), QR_OK);
    QrBuf same;
    qr_buf_init(&same);
    cr_assert_eq(dsw_finish(w, &same, NULL), QR_OK);
    dsw_free(w);
    cr_assert_eq(same.len, ba.len);
    cr_assert_eq(memcmp(same.data, ba.data, ba.len), 0, "whole blocks copied as is");
    qr_buf_free(&same);

    static bool ka[NA], kb[NB];
    for (int pattern = 0; pattern < 4; pattern++) {
        for (uint32_t i = 0; i < NA; i++)
            ka[i] = pattern == 0 ? true : pattern == 1 ? false : pattern == 2 ? i % 7 != 3 : i > 1200;
        for (uint32_t i = 0; i < NB; i++)
            kb[i] = pattern == 3 ? i < 400 : mix(i) % 5 != 0;
        uint32_t extra = (uint32_t)pattern * 3;
        QrBuf out = merge(a, ka, b, kb, extra);
        DocStore *m;
        QrError err;
        qr_error_clear(&err);
        cr_assert_eq(ds_open(out.data, out.len, &m, &err), QR_OK, "%s", err.message);
        DocStoreCursor *c = ds_cursor_new(m);
        uint32_t id = 0;
        for (uint32_t i = 0; i < extra; i++)
            expect_doc(c, id++, 100, i);
        for (uint32_t i = 0; i < NA; i++)
            if (ka[i])
                expect_doc(c, id++, 1, i);
        for (uint32_t i = 0; i < extra; i++)
            expect_doc(c, id++, 100, i);
        for (uint32_t i = 0; i < NB; i++)
            if (kb[i])
                expect_doc(c, id++, 2, i);
        cr_assert_eq(ds_count(m), id, "pattern %d", pattern);
        ds_cursor_free(c);
        ds_close(m);
        qr_buf_free(&out);
    }
    ds_close(a);
    ds_close(b);
    qr_buf_free(&ba);
    qr_buf_free(&bb);
}

Test(docstore, merge_from_a_corrupt_source)
{
    QrBuf blob = build(3, 500, 0);
    blob.data[40] ^= 0x04; /* inside block 0 */
    DocStore *src;
    cr_assert_eq(ds_open(blob.data, blob.len, &src, NULL), QR_OK);
    static bool keep[500];
    for (int fast = 0; fast < 2; fast++) {
        for (int i = 0; i < 500; i++)
            keep[i] = fast || i != 2;
        DocStoreWriter *w = dsw_new(0);
        QrError err;
        qr_error_clear(&err);
        cr_assert_eq(dsw_add_from(w, src, keep, &err), QR_ECORRUPT, "fast=%d", fast);
        cr_assert_not_null(strstr(err.message, "block 0"), "%s", err.message);
        cr_assert_eq(dsw_add(w, "x", 1, NULL), QR_ECORRUPT, "the writer stays failed");
        dsw_free(w);
    }
    ds_close(src);
    qr_buf_free(&blob);
}

Test(docstore, limits)
{
    DocStoreWriter *w = dsw_new(0);
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(dsw_add(w, NULL, (size_t)DS_MAX_DOC_BYTES + 1, &err), QR_ELIMIT);
    cr_assert_eq(dsw_count(w), 0);
    dsw_free(w);
    DocStore *ds;
    uint8_t junk[24] = {0};
    junk[16] = 9; /* version 9, but the checksum is wrong */
    cr_assert_eq(ds_open(junk, sizeof junk, &ds, NULL), QR_ECORRUPT);
}

typedef struct Reader {
    const DocStore *ds;
    uint32_t n;
    uint32_t seed;
} Reader;

static void *read_all(void *arg)
{
    Reader *r = arg;
    DocStoreCursor *c = ds_cursor_new(r->ds);
    for (uint32_t k = 0; k < 3000; k++) {
        uint32_t i = (uint32_t)(mix(k * 31 + r->seed) % r->n);
        expect_doc(c, i, 5, i);
    }
    ds_cursor_free(c);
    return NULL;
}

Test(docstore, shared_by_threads)
{
    QrBuf blob = build(5, 2000, 0);
    DocStore *ds;
    cr_assert_eq(ds_open(blob.data, blob.len, &ds, NULL), QR_OK);
    pthread_t t[4];
    Reader r[4];
    for (int i = 0; i < 4; i++) {
        r[i] = (Reader){ds, 2000, (uint32_t)i};
        pthread_create(&t[i], NULL, read_all, &r[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    ds_close(ds);
    qr_buf_free(&blob);
}

/* Build, merge with deletes, read back; returns the first error. */
static int ds_scenario(const DocStore *src, QrError *err)
{
    static bool keep[300];
    for (int i = 0; i < 300; i++)
        keep[i] = i % 50 != 0;
    DocStoreWriter *w = dsw_new(2000);
    if (!w)
        return qr_error_set(err, QR_ENOMEM, "dsw_new");
    int rc = QR_OK;
    for (uint32_t i = 0; i < 100 && rc == QR_OK; i++)
        rc = dsw_add(w, docbuf, gen_doc(9, i, docbuf), err);
    if (rc == QR_OK)
        rc = dsw_add_from(w, src, keep, err);
    QrBuf out;
    qr_buf_init(&out);
    if (rc == QR_OK)
        rc = dsw_finish(w, &out, err);
    dsw_free(w);
    DocStore *ds = NULL;
    if (rc == QR_OK)
        rc = ds_open(out.data, out.len, &ds, err);
    DocStoreCursor *c = NULL;
    if (rc == QR_OK && !(c = ds_cursor_new(ds)))
        rc = qr_error_set(err, QR_ENOMEM, "ds_cursor_new");
    for (uint32_t i = 0; rc == QR_OK && i < ds_count(ds); i += 7) {
        const uint8_t *p;
        size_t n;
        rc = ds_get(c, i, &p, &n, err);
    }
    ds_cursor_free(c);
    ds_close(ds);
    qr_buf_free(&out);
    return rc;
}

Test(docstore, allocation_failure_sweep)
{
    QrBuf blob = build(4, 300, 3000);
    DocStore *src;
    cr_assert_eq(ds_open(blob.data, blob.len, &src, NULL), QR_OK);
    int64_t n;
    for (n = 0; n < 10000; n++) {
        QrError err;
        qr_error_clear(&err);
        qr_mem_fail_after(n);
        int rc = ds_scenario(src, &err);
        qr_mem_fail_after(-1);
        if (rc == QR_OK)
            break;
        cr_assert_eq(rc, QR_ENOMEM, "n=%ld: %s", (long)n, err.message);
    }
    cr_assert_gt(n, 5);
    cr_assert_lt(n, 10000);
    ds_close(src);
    qr_buf_free(&blob);
    LEAK_CHECK();
}

/* A block's checksum is checked when it is first loaded, by any cursor of
 * the open store, and not again after: blocks already read by one cursor
 * load in another, and a block no cursor read yet is checked on its first
 * load (a byte changed in it since the store opened is found). */
Test(docstore, blocks_checked_on_first_load)
{
    enum { N = 3000 };
    QrBuf blob = build(11, N, 4096);
    DocStore *ds;
    cr_assert_eq(ds_open(blob.data, blob.len, &ds, NULL), QR_OK);
    DocStoreCursor *a = ds_cursor_new(ds), *b = ds_cursor_new(ds);
    for (uint32_t i = 0; i < N / 2; i++)
        expect_doc(a, i, 11, i);
    /* the last byte of the last block (the one before the index, whose
     * offset the trailer's first 8 bytes give): no cursor read it yet */
    uint64_t index_off = 0;
    for (int k = 7; k >= 0; k--)
        index_off = index_off << 8 | blob.data[blob.len - 24 + (size_t)k];
    cr_assert_gt(index_off, 0);
    blob.data[index_off - 1] ^= 0x10;
    const uint8_t *p;
    size_t n;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(ds_get(b, N - 1, &p, &n, &err), QR_ECORRUPT,
                 "a block changed since open loaded without its check");
    cr_assert_not_null(strstr(err.message, "block"), "%s", err.message);
    for (uint32_t i = 0; i < 100; i++) /* checked before, by the other cursor */
        expect_doc(b, i, 11, i);
    ds_cursor_free(a);
    ds_cursor_free(b);
    ds_close(ds);
    qr_buf_free(&blob);
}
