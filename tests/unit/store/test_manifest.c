/*
 * test_manifest.c — table manifest and deletes files: round trips, checks on
 * write, every byte changed on disk, well-checksummed but inconsistent
 * payloads, newer versions, and an allocation-failure sweep.
 */
#include <criterion/criterion.h>

#include "store/manifest.h"
#include "store/mem.h"
#include "store/sfile.h"
#include "store/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LEAK_CHECK() cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "leak")
#else
#define LEAK_CHECK() ((void)0)
#endif

static char *dir;
static char mpath[600];

static void setup(void)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    dir = malloc(512);
    snprintf(dir, 512, "%s/qr-manifest-XXXXXX", base);
    cr_assert_not_null(mkdtemp(dir));
    snprintf(mpath, sizeof mpath, "%s/%s", dir, MANIFEST_FILE);
}

static void teardown(void)
{
    qr_remove_tree(dir, NULL);
    free(dir);
}

TestSuite(manifest, .init = setup, .fini = teardown);

static ManifestSeg segs[] = {
    {3, 1000, 10, 2, 123456, 1, 500},
    {7, 0, 0, 0, 4096, 0, 0},
    {8, 4000000, 4000000, 9, 1ull << 40, 501, 9000},
};

static Manifest sample(char *schema)
{
    return (Manifest){.generation = 42,
                      .checkpoint_lsn = 9000,
                      .next_seg_id = 9,
                      .n_segs = 3,
                      .segs = segs,
                      .schema_json = schema};
}

static void expect_equal(const Manifest *a, const Manifest *b)
{
    cr_assert_eq(a->generation, b->generation);
    cr_assert_eq(a->checkpoint_lsn, b->checkpoint_lsn);
    cr_assert_eq(a->next_seg_id, b->next_seg_id);
    cr_assert_eq(a->n_segs, b->n_segs);
    for (uint32_t i = 0; i < a->n_segs; i++)
        cr_assert_eq(memcmp(&a->segs[i], &b->segs[i], sizeof *a->segs), 0, "seg %u", i);
    if (a->schema_json)
        cr_assert_str_eq(a->schema_json, b->schema_json);
    else
        cr_assert_null(b->schema_json);
}

Test(manifest, round_trip)
{
    char schema[] = "{\"fields\":[{\"name\":\"title\",\"type\":\"text\"}]}";
    Manifest want[] = {sample(schema), sample(NULL), sample(""),
                       {.generation = 1, .next_seg_id = 0}};
    QrError err;
    for (size_t i = 0; i < 4; i++) {
        qr_error_clear(&err);
        cr_assert_eq(manifest_write(dir, &want[i], i % 2 == 0, &err), QR_OK, "%s", err.message);
        Manifest got;
        cr_assert_eq(manifest_read(dir, &got, &err), QR_OK, "%s", err.message);
        expect_equal(&want[i], &got);
        manifest_free(&got);
        cr_assert_eq(got.segs, NULL, "manifest_free zeroes");
    }
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.tmp", mpath);
    cr_assert(!qr_path_exists(tmp));
    manifest_free(NULL);
}

Test(manifest, missing)
{
    Manifest m = {.generation = 77};
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(manifest_read(dir, &m, &err), QR_ENOTFOUND);
    cr_assert_eq(m.generation, 77, "untouched on failure");
}

Test(manifest, write_refuses_inconsistent)
{
    ManifestSeg bad[2] = {{1, 10, 0, 0, 0, 0, 0}, {1, 10, 0, 0, 0, 0, 0}};
    Manifest m = {.next_seg_id = 5, .n_segs = 2, .segs = bad};
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(manifest_write(dir, &m, false, &err), QR_EINVAL, "duplicate id");
    cr_assert_not_null(strstr(err.message, "twice"), "%s", err.message);
    bad[1].id = 5;
    cr_assert_eq(manifest_write(dir, &m, false, NULL), QR_EINVAL, "id >= next_seg_id");
    bad[1].id = 2;
    bad[1].n_deleted = 11;
    cr_assert_eq(manifest_write(dir, &m, false, NULL), QR_EINVAL, "n_deleted > n_docs");
    bad[1].n_deleted = 0;
    bad[1].min_lsn = 9;
    bad[1].max_lsn = 8;
    cr_assert_eq(manifest_write(dir, &m, false, NULL), QR_EINVAL, "min_lsn > max_lsn");
    bad[1].max_lsn = 9;
    cr_assert_eq(manifest_write(dir, &m, false, NULL), QR_OK);
    cr_assert(qr_path_exists(mpath));
}

/* Change each byte of the file at `path` in turn (xor mask) and check that
 * `try_read` fails with ECORRUPT (or EUNSUPPORTED: a version field). */
static void flip_every_byte(const char *path, uint8_t mask, int (*try_read)(const char *path))
{
    uint8_t *orig;
    size_t len;
    cr_assert_eq(qr_file_read_all(path, &orig, &len, NULL), QR_OK);
    uint8_t *bad = malloc(len);
    for (size_t pos = 0; pos < len; pos++) {
        memcpy(bad, orig, len);
        bad[pos] ^= mask;
        cr_assert_eq(qr_file_write_atomic(path, bad, len, false, NULL), QR_OK);
        int rc = try_read(path);
        cr_assert(rc == QR_ECORRUPT || rc == QR_EUNSUPPORTED, "pos %zu: rc %d", pos, rc);
    }
    cr_assert_eq(qr_file_write_atomic(path, orig, len, false, NULL), QR_OK);
    free(bad);
    qr_free(orig);
}

static int try_manifest(const char *path)
{
    Manifest got = {.generation = 5};
    QrError err;
    qr_error_clear(&err);
    int rc = manifest_read(dir, &got, &err);
    cr_assert_not_null(strstr(err.message, MANIFEST_FILE), "%s", err.message);
    cr_assert_eq(got.generation, 5, "untouched on failure");
    return rc;
}

Test(manifest, every_byte_change_is_caught)
{
    char schema[] = "{\"a\":1}";
    Manifest m = sample(schema);
    cr_assert_eq(manifest_write(dir, &m, false, NULL), QR_OK);
    flip_every_byte(mpath, 0x08, try_manifest);
    flip_every_byte(mpath, 0xff, try_manifest);
}

/* Seal `payload` as a manifest of `version` and read it back. */
static int read_crafted(const QrBuf *payload, uint32_t version, QrError *err)
{
    cr_assert_eq(qr_sealed_write(mpath, QR_KIND_MANIFEST, version, payload->data, payload->len,
                                 false, NULL),
                 QR_OK);
    Manifest got;
    qr_error_clear(err);
    int rc = manifest_read(dir, &got, err);
    if (rc == QR_OK)
        manifest_free(&got);
    return rc;
}

static void put_head(QrBuf *b, uint32_t n_segs, uint32_t flags)
{
    b->len = 0;
    qr_buf_put_u64(b, 1);  /* generation */
    qr_buf_put_u64(b, 0);  /* checkpoint_lsn */
    qr_buf_put_u64(b, 10); /* next_seg_id */
    qr_buf_put_u32(b, n_segs);
    qr_buf_put_u32(b, flags);
}

static void put_seg(QrBuf *b, uint64_t id, uint32_t n_docs, uint32_t n_deleted)
{
    qr_buf_put_u64(b, id);
    qr_buf_put_u32(b, n_docs);
    qr_buf_put_u32(b, n_deleted);
    for (int i = 0; i < 4; i++)
        qr_buf_put_u64(b, 0);
}

Test(manifest, checksummed_but_inconsistent)
{
    QrBuf b;
    qr_buf_init(&b);
    QrError err;

    put_head(&b, 1, 0);
    put_seg(&b, 3, 5, 1);
    cr_assert_eq(read_crafted(&b, 1, &err), QR_OK, "%s", err.message);
    cr_assert_eq(read_crafted(&b, 2, &err), QR_EUNSUPPORTED, "newer version");

    qr_buf_putc(&b, 0);
    cr_assert_eq(read_crafted(&b, 1, &err), QR_ECORRUPT, "trailing byte");
    cr_assert_not_null(strstr(err.message, "trailing"), "%s", err.message);

    put_head(&b, 1000000, 0); /* more segments than bytes */
    put_seg(&b, 3, 5, 1);
    cr_assert_eq(read_crafted(&b, 1, &err), QR_ECORRUPT);

    put_head(&b, 1, 4); /* unknown flag */
    put_seg(&b, 3, 5, 1);
    cr_assert_eq(read_crafted(&b, 1, &err), QR_ECORRUPT);

    put_head(&b, 2, 0);
    put_seg(&b, 3, 5, 1);
    put_seg(&b, 3, 5, 1);
    cr_assert_eq(read_crafted(&b, 1, &err), QR_ECORRUPT, "duplicate id");

    put_head(&b, 1, 0);
    put_seg(&b, 3, 5, 6);
    cr_assert_eq(read_crafted(&b, 1, &err), QR_ECORRUPT, "n_deleted > n_docs");

    put_head(&b, 0, 1); /* schema with a NUL, then one running past the end */
    qr_buf_put_u32(&b, 3);
    qr_buf_append(&b, "a\0b", 3);
    cr_assert_eq(read_crafted(&b, 1, &err), QR_ECORRUPT);
    put_head(&b, 0, 1);
    qr_buf_put_u32(&b, 30);
    qr_buf_append(&b, "abc", 3);
    cr_assert_eq(read_crafted(&b, 1, &err), QR_ECORRUPT);

    b.len = 10; /* shorter than the fixed fields */
    cr_assert_eq(read_crafted(&b, 1, &err), QR_ECORRUPT);

    /* a deletes file is not a manifest */
    roaring_bitmap_t *bm = roaring_bitmap_create();
    cr_assert_eq(deletes_write(mpath, bm, false, NULL), QR_OK);
    Manifest got;
    cr_assert_eq(manifest_read(dir, &got, NULL), QR_ECORRUPT);
    roaring_bitmap_free(bm);
    qr_buf_free(&b);
}

static roaring_bitmap_t *sample_bitmap(int which)
{
    roaring_bitmap_t *bm = roaring_bitmap_create();
    if (which == 1) {
        roaring_bitmap_add(bm, 0);
        roaring_bitmap_add(bm, 7);
        roaring_bitmap_add(bm, UINT32_MAX - 1);
    } else if (which == 2) {
        roaring_bitmap_add_range(bm, 1000, 900000); /* runs */
        for (uint32_t i = 0; i < 20000; i++)
            roaring_bitmap_add(bm, (uint32_t)((i * 2654435761u) % 4000000u));
        roaring_bitmap_run_optimize(bm);
    }
    return bm;
}

Test(manifest, deletes_round_trip)
{
    char path[700];
    cr_assert(deletes_path(path, sizeof path, dir, 12, 3));
    cr_assert_not_null(strstr(path, "/12.del.3"), "%s", path);
    char small[8];
    cr_assert(!deletes_path(small, sizeof small, dir, 12, 3), "does not fit");
    for (int which = 0; which < 3; which++) {
        roaring_bitmap_t *bm = sample_bitmap(which);
        QrError err;
        qr_error_clear(&err);
        cr_assert_eq(deletes_write(path, bm, which == 1, &err), QR_OK, "%s", err.message);
        roaring_bitmap_t *got = NULL;
        cr_assert_eq(deletes_read(path, &got, &err), QR_OK, "%s", err.message);
        cr_assert(roaring_bitmap_equals(bm, got), "bitmap %d", which);
        roaring_bitmap_free(got);
        roaring_bitmap_free(bm);
    }
    roaring_bitmap_t *got = NULL;
    char missing[700];
    snprintf(missing, sizeof missing, "%s/1.del.1", dir);
    cr_assert_eq(deletes_read(missing, &got, NULL), QR_ENOTFOUND);
    cr_assert_null(got);
}

static int try_deletes(const char *path)
{
    roaring_bitmap_t *got = NULL;
    int rc = deletes_read(path, &got, NULL);
    cr_assert_null(got, "untouched on failure");
    return rc;
}

Test(manifest, deletes_damage)
{
    char path[700];
    cr_assert(deletes_path(path, sizeof path, dir, 1, 1));
    roaring_bitmap_t *bm = sample_bitmap(1);
    cr_assert_eq(deletes_write(path, bm, false, NULL), QR_OK);
    flip_every_byte(path, 0x40, try_deletes);

    /* checksummed but inconsistent payloads */
    size_t n = roaring_bitmap_portable_size_in_bytes(bm);
    uint8_t *p = malloc(8 + n + 1);
    qr_put_u64le(p, 99); /* wrong cardinality */
    roaring_bitmap_portable_serialize(bm, (char *)p + 8);
    cr_assert_eq(qr_sealed_write(path, QR_KIND_DELETES, 1, p, 8 + n, false, NULL), QR_OK);
    roaring_bitmap_t *got = NULL;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(deletes_read(path, &got, &err), QR_ECORRUPT);
    cr_assert_not_null(strstr(err.message, "holds 3 ids"), "%s", err.message);
    qr_put_u64le(p, 3);
    p[8 + n] = 0; /* a trailing byte */
    cr_assert_eq(qr_sealed_write(path, QR_KIND_DELETES, 1, p, 9 + n, false, NULL), QR_OK);
    cr_assert_eq(deletes_read(path, &got, NULL), QR_ECORRUPT);
    memset(p + 8, 0xee, n); /* garbage bitmap */
    cr_assert_eq(qr_sealed_write(path, QR_KIND_DELETES, 1, p, 8 + n, false, NULL), QR_OK);
    cr_assert_eq(deletes_read(path, &got, NULL), QR_ECORRUPT);
    cr_assert_eq(qr_sealed_write(path, QR_KIND_DELETES, 1, p, 5, false, NULL), QR_OK);
    cr_assert_eq(deletes_read(path, &got, NULL), QR_ECORRUPT, "shorter than the cardinality");
    cr_assert_null(got);
    free(p);
    roaring_bitmap_free(bm);
}

static int manifest_scenario(QrError *err)
{
    char schema[] = "{\"x\":true}";
    Manifest m = sample(schema), got;
    int rc = manifest_write(dir, &m, false, err);
    if (rc == QR_OK)
        rc = manifest_read(dir, &got, err);
    if (rc == QR_OK)
        manifest_free(&got);
    char path[700];
    deletes_path(path, sizeof path, dir, 3, 2);
    roaring_bitmap_t *bm = sample_bitmap(2), *back = NULL;
    if (rc == QR_OK)
        rc = deletes_write(path, bm, false, err);
    if (rc == QR_OK)
        rc = deletes_read(path, &back, err);
    roaring_bitmap_free(bm);
    if (back)
        roaring_bitmap_free(back);
    return rc;
}

Test(manifest, allocation_failure_sweep)
{
    int64_t n;
    for (n = 0; n < 10000; n++) {
        QrError err;
        qr_error_clear(&err);
        qr_mem_fail_after(n);
        int rc = manifest_scenario(&err);
        qr_mem_fail_after(-1);
        if (rc == QR_OK)
            break;
        cr_assert_eq(rc, QR_ENOMEM, "n=%ld: %s", (long)n, err.message);
        Manifest m;
        if (qr_path_exists(mpath)) { /* whatever is there is whole */
            cr_assert_eq(manifest_read(dir, &m, &err), QR_OK, "n=%ld: %s", (long)n, err.message);
            manifest_free(&m);
        }
    }
    cr_assert_gt(n, 5);
    cr_assert_lt(n, 10000);
    LEAK_CHECK();
}
