/*
 * fuzz_util.h — shared by the libFuzzer targets in tests/fuzz/: a CHECK that
 * aborts (libFuzzer reports an abort as a crash, with the input saved), a
 * byte reader over the fuzz input, a private scratch directory, and a
 * database in it.
 */
#ifndef QR_FUZZ_UTIL_H
#define QR_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/quarry.h"
#include "store/util.h"

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s: check failed: %s (line %d)\n", __FILE__, #cond,     \
                    __LINE__);                                                       \
            abort();                                                                 \
        }                                                                            \
    } while (0)

/* Consume the fuzz input a few bytes at a time; reads past the end give 0. */
typedef struct FzIn {
    const uint8_t *p;
    size_t n, off;
} FzIn;

static inline uint32_t fz_u8(FzIn *in) { return in->off < in->n ? in->p[in->off++] : 0; }
static inline uint32_t fz_u32(FzIn *in)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | fz_u8(in);
    return v;
}
static inline size_t fz_left(const FzIn *in) { return in->n - in->off; }

/* A scratch directory for this process, made once ("$TMPDIR/qfuzz-XXXXXX"). */
static inline const char *fz_tmpdir(void)
{
    static char dir[512];
    if (!dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/qfuzz-XXXXXX", t && *t ? t : "/tmp");
        CHECK(mkdtemp(dir) != NULL);
    }
    return dir;
}

/* A database in the scratch directory, quiet, without fsync or background
 * merges. */
static inline QrDb *fz_db_open(void)
{
    qr_log_set_level(QR_LOG_ERROR);
    char dir[700];
    snprintf(dir, sizeof dir, "%s/db", fz_tmpdir());
    QrDbOpts o;
    qr_db_opts_default(&o);
    o.fsync = QR_FSYNC_OFF;
    o.background_merge = false;
    QrError e;
    qr_error_clear(&e);
    QrDb *db = NULL;
    CHECK(qr_db_open(dir, &o, &db, &e) == QR_OK);
    return db;
}

#endif
