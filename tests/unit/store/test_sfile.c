/*
 * test_sfile.c — section files and sealed files: round trips, alignment,
 * every single-byte change caught (header/footer/table at open, sections and
 * padding by sf_verify), truncation, kinds and versions, refcounts across
 * threads, atomic replacement on a full disk, and an allocation-failure sweep.
 */
#include <criterion/criterion.h>

#include "store/crc32c.h"
#include "store/mem.h"
#include "store/sfile.h"
#include "store/util.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LEAK_CHECK() cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "leak")
#else
#define LEAK_CHECK() ((void)0)
#endif

#define KIND QR_FOURCC('T', 'E', 'S', 'T')

static char *dir;
static char path[600];

static void setup(void)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    dir = malloc(512);
    snprintf(dir, 512, "%s/qr-sfile-XXXXXX", base);
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/test.sf", dir);
}

static void teardown(void)
{
    qr_remove_tree(dir, NULL);
    free(dir);
}

TestSuite(sfile, .init = setup, .fini = teardown);

/* Section i of the test files: deterministic bytes. */
static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
}

static void spit(const char *p, const uint8_t *d, size_t len)
{
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(d, 1, len, f), len);
    fclose(f);
}

static const size_t small_sizes[] = {0, 5, 64, 70, 130, 1};

/* A small file with the sections above (ids 10, 11, ...); returns its image. */
static uint8_t *small_file(size_t *len)
{
    SfileWriter *w = sfw_new(KIND, 3);
    uint8_t buf[256];
    for (uint32_t i = 0; i < sizeof small_sizes / sizeof *small_sizes; i++) {
        fill(buf, small_sizes[i], i);
        cr_assert_eq(sfw_add(w, 10 + i, buf, small_sizes[i], NULL), QR_OK);
    }
    cr_assert_eq(sfw_finish(w, path, false, NULL), QR_OK);
    uint8_t *img;
    cr_assert_eq(qr_file_read_all(path, &img, len, NULL), QR_OK);
    return img;
}

Test(sfile, round_trip_many_sections)
{
    enum { N = 60 };
    static const size_t edge[] = {0, 1, 63, 64, 65, 127, 128, 4095, 4096, 100000};
    size_t sizes[N];
    uint32_t ids[N];
    SfileWriter *w = sfw_new(KIND, 7);
    cr_assert_not_null(w);
    QrError err;
    qr_error_clear(&err);
    for (uint32_t i = 0; i < N; i++) {
        sizes[i] = i < 10 ? edge[i] : (size_t)(i * 7919u % 20000u);
        ids[i] = i * 37u + 1000u;
        uint8_t *d = malloc(sizes[i] + 1);
        fill(d, sizes[i], i);
        if (i % 3 == 0) {
            QrBuf b;
            qr_buf_init(&b);
            qr_buf_append(&b, d, sizes[i]);
            cr_assert_eq(sfw_add_buf(w, ids[i], &b, &err), QR_OK, "%s", err.message);
            cr_assert_null(b.data, "ownership moved");
            cr_assert_eq(b.len, 0);
        } else {
            cr_assert_eq(sfw_add(w, ids[i], d, sizes[i], &err), QR_OK, "%s", err.message);
        }
        free(d);
    }
    cr_assert_eq(sfw_add(w, ids[5], "x", 1, &err), QR_EINVAL, "duplicate id");
    qr_error_clear(&err);
    cr_assert_eq(sfw_finish(w, path, true, &err), QR_OK, "%s", err.message);

    Sfile *f;
    cr_assert_eq(sf_open(path, KIND, &f, &err), QR_OK, "%s", err.message);
    cr_assert_eq(sf_version(f), 7);
    cr_assert_eq(sf_section_count(f), N);
    cr_assert_str_eq(sf_path(f), path);
    for (uint32_t i = 0; i < N; i++) {
        const uint8_t *p;
        size_t n;
        cr_assert_eq(sf_section_id(f, i), ids[i]);
        cr_assert(sf_section(f, ids[i], &p, &n), "section %u", ids[i]);
        cr_assert_eq(n, sizes[i]);
        cr_assert_eq((uintptr_t)p % SF_ALIGN, 0, "section %u aligned", ids[i]);
        uint8_t *d = malloc(sizes[i] + 1);
        fill(d, sizes[i], i);
        cr_assert_eq(memcmp(p, d, n), 0, "section %u bytes", ids[i]);
        free(d);
    }
    const uint8_t *p = NULL;
    size_t n = 99;
    cr_assert(!sf_section(f, 999, &p, &n));
    cr_assert_null(p, "outputs untouched");
    cr_assert_eq(n, 99);
    cr_assert_eq(sf_verify(f, &err), QR_OK, "%s", err.message);
    sf_unref(f);
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    cr_assert(!qr_path_exists(tmp));
}

Test(sfile, no_sections)
{
    SfileWriter *w = sfw_new(KIND, 1);
    cr_assert_eq(sfw_finish(w, path, false, NULL), QR_OK);
    Sfile *f;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(sf_open(path, KIND, &f, &err), QR_OK, "%s", err.message);
    cr_assert_eq(sf_section_count(f), 0);
    cr_assert_eq(sf_verify(f, NULL), QR_OK);
    sf_unref(f);
}

Test(sfile, every_byte_change_is_caught)
{
    size_t len;
    uint8_t *orig = small_file(&len);
    size_t tab = len - 16 - 6 * 24; /* start of the section table */
    uint8_t *bad = malloc(len);
    static const uint8_t masks[] = {0x01, 0x80, 0xff};
    for (size_t pos = 0; pos < len; pos++) {
        for (int m = 0; m < 3; m++) {
            memcpy(bad, orig, len);
            bad[pos] ^= masks[m];
            spit(path, bad, len);
            Sfile *f = NULL;
            QrError err;
            qr_error_clear(&err);
            int rc = sf_open(path, KIND, &f, &err);
            bool layout_field = pos >= len - 12 && pos < len - 8;
            if (pos < SF_HEADER_LEN || pos >= tab) {
                cr_assert_neq(rc, QR_OK, "pos %zu mask %x: caught at open", pos, masks[m]);
                /* the layout field reads as "newer" unless it became 0 */
                cr_assert_eq(rc, layout_field && bad[pos] ? QR_EUNSUPPORTED : QR_ECORRUPT,
                             "pos %zu", pos);
                cr_assert_not_null(strstr(err.message, "test.sf"), "names the file: %s",
                                   err.message);
                continue;
            }
            cr_assert_eq(rc, QR_OK, "pos %zu: a section byte does not stop open: %s", pos,
                         err.message);
            cr_assert_eq(sf_verify(f, &err), QR_ECORRUPT, "pos %zu mask %x", pos, masks[m]);
            cr_assert_not_null(strstr(err.message, "test.sf"), "%s", err.message);
            sf_unref(f);
        }
    }
    free(bad);
    free(orig);
}

Test(sfile, sealed_every_byte_change_is_caught)
{
    const char msg[] = "{\"schema\": 1}";
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sealed_write(path, KIND, 2, msg, strlen(msg), false, &err), QR_OK);
    uint8_t *orig;
    size_t len;
    cr_assert_eq(qr_file_read_all(path, &orig, &len, NULL), QR_OK);
    uint8_t *bad = malloc(len);
    for (size_t pos = 0; pos < len; pos++) {
        memcpy(bad, orig, len);
        bad[pos] ^= 0x20;
        spit(path, bad, len);
        uint8_t *d = NULL;
        size_t n = 0;
        int rc = qr_sealed_read(path, KIND, 5, &d, &n, NULL, &err);
        cr_assert_neq(rc, QR_OK, "pos %zu", pos);
        cr_assert_null(d);
    }
    free(bad);
    free(orig);
}

Test(sfile, truncated_files)
{
    size_t len;
    uint8_t *orig = small_file(&len);
    for (size_t cut = 0; cut < len; cut++) {
        spit(path, orig, cut);
        Sfile *f = NULL;
        QrError err;
        qr_error_clear(&err);
        cr_assert_eq(sf_open(path, KIND, &f, &err), QR_ECORRUPT, "cut %zu", cut);
        cr_assert_null(f);
    }
    /* appended garbage is caught too */
    uint8_t *longer = calloc(1, len + 7);
    memcpy(longer, orig, len);
    spit(path, longer, len + 7);
    Sfile *f;
    cr_assert_eq(sf_open(path, KIND, &f, NULL), QR_ECORRUPT);
    free(longer);
    free(orig);
}

Test(sfile, kinds_and_versions)
{
    size_t len;
    uint8_t *img = small_file(&len);
    Sfile *f;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(sf_open(path, QR_FOURCC('O', 'T', 'H', 'R'), &f, &err), QR_ECORRUPT);
    cr_assert_not_null(strstr(err.detail, "'TEST'"), "%s", err.detail);
    qr_error_clear(&err);
    cr_assert_eq(sf_open_max(path, KIND, 2, &f, &err), QR_EUNSUPPORTED);
    cr_assert_eq(sf_open_max(path, KIND, 3, &f, NULL), QR_OK);
    sf_unref(f);

    /* a newer container layout, with a valid checksum */
    size_t tail = len - 16;
    qr_put_u32le(img + tail + 4, 2);
    size_t tab = tail - 6 * 24;
    qr_put_u32le(img + tail + 8, qr_crc32c(0, img + tab, len - 8 - tab));
    spit(path, img, len);
    qr_error_clear(&err);
    cr_assert_eq(sf_open(path, KIND, &f, &err), QR_EUNSUPPORTED, "%s", err.message);

    /* version 0 and missing files */
    sf_header_encode(img, KIND, 0);
    spit(path, img, len);
    cr_assert_eq(sf_open(path, KIND, &f, NULL), QR_ECORRUPT);
    char missing[700];
    snprintf(missing, sizeof missing, "%s/none.sf", dir);
    cr_assert_eq(sf_open(missing, KIND, &f, NULL), QR_ENOTFOUND);
    free(img);
}

static void *ref_churn(void *arg)
{
    Sfile *f = arg;
    for (int i = 0; i < 10000; i++) {
        Sfile *r = sf_ref(f);
        const uint8_t *p;
        size_t n;
        cr_assert(sf_section(r, 12, &p, &n));
        sf_unref(r);
    }
    sf_unref(f); /* the reference the main thread took for us */
    return NULL;
}

Test(sfile, refcounts)
{
    size_t len;
    free(small_file(&len));
    Sfile *f;
    cr_assert_eq(sf_open(path, KIND, &f, NULL), QR_OK);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, ref_churn, sf_ref(f));
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    /* the file may be unlinked while mapped; views stay valid until the last unref */
    cr_assert_eq(unlink(path), 0);
    const uint8_t *p;
    size_t n;
    cr_assert(sf_section(f, 14, &p, &n));
    cr_assert_eq(n, 130);
    uint8_t want[130];
    fill(want, 130, 4);
    cr_assert_eq(memcmp(p, want, 130), 0);
    sf_unref(f);
    sf_unref(NULL);
    LEAK_CHECK();
}

Test(sfile, add_buf_ownership)
{
    SfileWriter *w = sfw_new(KIND, 1);
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_append(&b, "abc", 3);
    b.oom = true; /* as if an append had failed */
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(sfw_add_buf(w, 1, &b, &err), QR_ENOMEM);
    cr_assert_not_null(b.data, "untouched on failure");
    b.oom = false;
    cr_assert_eq(sfw_add_buf(w, 1, &b, NULL), QR_OK);
    cr_assert_null(b.data);
    QrBuf empty;
    qr_buf_init(&empty);
    cr_assert_eq(sfw_add_buf(w, 2, &empty, NULL), QR_OK);
    cr_assert_eq(sfw_finish(w, path, false, NULL), QR_OK);
    Sfile *f;
    cr_assert_eq(sf_open(path, KIND, &f, NULL), QR_OK);
    const uint8_t *p;
    size_t n;
    cr_assert(sf_section(f, 1, &p, &n));
    cr_assert_eq(n, 3);
    cr_assert_eq(memcmp(p, "abc", 3), 0);
    cr_assert(sf_section(f, 2, &p, &n));
    cr_assert_eq(n, 0);
    cr_assert_eq(sf_verify(f, NULL), QR_OK);
    sf_unref(f);
    sfw_free(NULL);
}

Test(sfile, sealed_round_trip)
{
    static const size_t sizes[] = {0, 1, 100, 70000};
    for (size_t i = 0; i < 4; i++) {
        uint8_t *d = malloc(sizes[i] + 1);
        fill(d, sizes[i], (uint32_t)i);
        QrError err;
        qr_error_clear(&err);
        cr_assert_eq(qr_sealed_write(path, KIND, 4, d, sizes[i], true, &err), QR_OK);
        uint8_t *got;
        size_t n;
        uint32_t v;
        cr_assert_eq(qr_sealed_read(path, KIND, 4, &got, &n, &v, &err), QR_OK, "%s",
                     err.message);
        cr_assert_eq(n, sizes[i]);
        cr_assert_eq(v, 4);
        cr_assert_eq(memcmp(got, d, n), 0);
        cr_assert_eq(got[n], 0, "NUL-terminated");
        qr_free(got);
        cr_assert_eq(qr_sealed_read(path, KIND, 3, &got, &n, &v, &err), QR_EUNSUPPORTED);
        free(d);
    }
    char missing[700];
    snprintf(missing, sizeof missing, "%s/none", dir);
    uint8_t *got;
    size_t n;
    cr_assert_eq(qr_sealed_read(missing, KIND, 1, &got, &n, NULL, NULL), QR_ENOTFOUND);
}

Test(sfile, disk_full_keeps_the_old_file)
{
    size_t len;
    free(small_file(&len));
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 4096;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    SfileWriter *w = sfw_new(KIND, 3);
    static uint8_t big[10000];
    cr_assert_eq(sfw_add(w, 1, big, sizeof big, NULL), QR_OK);
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(sfw_finish(w, path, true, &err), QR_EIO);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    cr_assert_not_null(strstr(err.message, "test.sf.tmp"), "%s", err.message);
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    cr_assert(!qr_path_exists(tmp), "tmp file removed");
    Sfile *f;
    cr_assert_eq(sf_open(path, KIND, &f, NULL), QR_OK, "the old file is intact");
    cr_assert_eq(sf_section_count(f), 6);
    sf_unref(f);
}

/* Write, open, verify, sealed write + read; returns the first error. */
static int sfile_scenario(QrError *err)
{
    SfileWriter *w = sfw_new(KIND, 1);
    if (!w)
        return qr_error_set(err, QR_ENOMEM, "sfw_new");
    uint8_t buf[3000];
    fill(buf, sizeof buf, 9);
    int rc = QR_OK;
    for (uint32_t i = 0; i < 20 && rc == QR_OK; i++)
        rc = sfw_add(w, i, buf, i * 100u, err);
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_append(&b, buf, 2000);
    if (rc == QR_OK)
        rc = sfw_add_buf(w, 99, &b, err);
    qr_buf_free(&b);
    if (rc != QR_OK) {
        sfw_free(w);
        return rc;
    }
    rc = sfw_finish(w, path, false, err);
    Sfile *f = NULL;
    if (rc == QR_OK)
        rc = sf_open(path, KIND, &f, err);
    if (rc == QR_OK)
        rc = sf_verify(f, err);
    sf_unref(f);
    if (rc == QR_OK)
        rc = qr_sealed_write(path, KIND, 1, buf, 500, false, err);
    uint8_t *d = NULL;
    size_t n;
    if (rc == QR_OK)
        rc = qr_sealed_read(path, KIND, 1, &d, &n, NULL, err);
    qr_free(d);
    return rc;
}

Test(sfile, allocation_failure_sweep)
{
    int64_t n;
    for (n = 0; n < 10000; n++) {
        unlink(path);
        QrError err;
        qr_error_clear(&err);
        qr_mem_fail_after(n);
        int rc = sfile_scenario(&err);
        qr_mem_fail_after(-1);
        if (rc == QR_OK)
            break;
        cr_assert_eq(rc, QR_ENOMEM, "n=%ld: %s", (long)n, err.message);
        /* a file at `path`, if any, is whole: the old one or the new one */
        Sfile *f;
        if (qr_path_exists(path)) {
            cr_assert_eq(sf_open(path, KIND, &f, &err), QR_OK, "n=%ld: %s", (long)n,
                         err.message);
            sf_unref(f);
        }
        char tmp[700];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        cr_assert(!qr_path_exists(tmp), "n=%ld: no tmp file left", (long)n);
    }
    cr_assert_gt(n, 10, "the sweep reached the allocations");
    cr_assert_lt(n, 10000);
    LEAK_CHECK();
}

/* A section whose bytes were spilled in pieces, then a tail kept in memory,
 * reads back as one section with one checksum, in a file and in an image
 * built in memory; the spill files leave nothing in the directory; a full
 * disk while spilling is QR_EIO with disk_full's SQLSTATE. */
Test(sfile, spilled_sections_read_back_whole)
{
    static uint8_t want[3][70000];
    for (int mem = 0; mem < 2; mem++) {
        SfileWriter *w = sfw_new(KIND, 2);
        cr_assert_not_null(w);
        size_t lens[3] = {0, 1, 0};
        for (uint32_t s = 0; s < 3; s++) {
            size_t len = s == 0 ? 70000 : s == 1 ? 5000 : 64; /* 0: many pieces, 2: tail only */
            fill(want[s], len, 40 + s);
            lens[s] = len;
            SfSpill sp = SF_SPILL_INIT;
            size_t at = 0, piece = 1 + s * 977;
            QrBuf b;
            qr_buf_init(&b);
            while (s != 2 && at + piece < len - 100) {
                qr_buf_append(&b, want[s] + at, piece);
                cr_assert_eq(sf_spill_put(&sp, path, &b, NULL), QR_OK);
                cr_assert_eq(b.len, 0);
                at += piece;
                piece = piece * 3 % 4099 + 1;
            }
            cr_assert_eq(sp.len, at);
            qr_buf_append(&b, want[s] + at, len - at);
            cr_assert_eq(sfw_add_spill(w, 10 + s, &sp, &b, NULL), QR_OK);
            cr_assert_eq(sp.fd, -1, "the writer took the spill over");
            qr_buf_free(&b);
            if (s == 0)
                cr_assert_eq(sfw_add(w, 5, want[1], 10, NULL), QR_OK); /* a plain one between */
        }
        Sfile *f;
        QrError err;
        qr_error_clear(&err);
        if (mem) {
            cr_assert_eq(sfw_finish_mem(w, "image", &f, &err), QR_OK, "%s", err.message);
        } else {
            cr_assert_eq(sfw_finish(w, path, true, &err), QR_OK, "%s", err.message);
            cr_assert_eq(sf_open(path, KIND, &f, &err), QR_OK, "%s", err.message);
        }
        cr_assert_eq(sf_verify(f, &err), QR_OK, "%s", err.message);
        cr_assert_eq(sf_section_count(f), 4);
        for (uint32_t s = 0; s < 3; s++) {
            const uint8_t *p;
            size_t n;
            cr_assert(sf_section(f, 10 + s, &p, &n));
            cr_assert(n == lens[s] && memcmp(p, want[s], n) == 0, "section %u (mem %d)", s, mem);
        }
        sf_unref(f);
    }
    /* nothing but the file itself is left in the directory */
    char cmd[700];
    snprintf(cmd, sizeof cmd, "test \"$(ls -A '%s')\" = test.sf", dir);
    cr_assert_eq(system(cmd), 0, "spill files are unlinked");

    /* a full disk while spilling */
    SfSpill sp = SF_SPILL_INIT;
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_append(&b, want[0], 1000);
    qr_io_fail_after(0, ENOSPC);
    QrError err;
    qr_error_clear(&err);
    int rc = sf_spill_put(&sp, path, &b, &err);
    qr_io_fail_after(-1, 0);
    cr_assert_eq(rc, QR_EIO);
    cr_assert_str_eq(err.sqlstate, "53100", "%s", err.message);
    cr_assert_eq(b.len, 1000, "the buffer is untouched");
    sf_spill_close(&sp);
    cr_assert_eq(sp.fd, -1);
    qr_buf_free(&b);
}
