/*
 * column_fuzz.c — libFuzzer target for the column reader (src/store/column*.c)
 * on damaged bytes.
 *
 * Byte 0 of the input picks the mode:
 *   even  the rest of the input is a column blob, opened as is;
 *   odd   one of four valid blobs (int64, float64, keyword, timestamp with
 *         nulls, built once at start-up) is damaged by the input, read as
 *         (u32 offset, u8 xor) pairs.
 * Every blob that opens is verified, read row by row and in blocks, and
 * scanned with a few predicates.  Promises checked beyond "no crash, no
 * leak": a damaged valid blob is refused by col_open or col_verify (every
 * byte is under a CRC); for a blob that passes col_verify, the scan of each
 * predicate equals col_filter_match row by row and every value lies inside
 * its block's zone map.
 */
#include <math.h>

#include "fuzz_util.h"
#include "store/column.h"
#include "store/mem.h"

#define N_VALID 4
static QrBuf valid[N_VALID];

static void build_valid(void)
{
    static const QrColType types[N_VALID] = {QR_COL_INT64, QR_COL_FLOAT64, QR_COL_KEYWORD,
                                             QR_COL_TIMESTAMP};
    uint32_t seed = 7;
    for (int k = 0; k < N_VALID; k++) {
        ColWriter *w = colw_new(types[k]);
        CHECK(w);
        uint32_t rows = 9000; /* three blocks, the last one partial */
        for (uint32_t r = 0; r < rows; r++) {
            seed = seed * 1103515245u + 12345u;
            uint32_t x = seed >> 8;
            if (x % 17 == 0) {
                CHECK(colw_add_null(w) == QR_OK);
                continue;
            }
            switch (types[k]) {
            case QR_COL_INT64: CHECK(colw_add_int(w, (int64_t)(x % 1000) - 300) == QR_OK); break;
            case QR_COL_TIMESTAMP: CHECK(colw_add_int(w, 1700000000000000LL + (int64_t)r * 1000) == QR_OK); break;
            case QR_COL_FLOAT64: CHECK(colw_add_float(w, (double)(x % 5000) / 7.0) == QR_OK); break;
            default: {
                char s[16];
                int n = snprintf(s, sizeof s, "k%u", x % 300);
                CHECK(colw_add_str(w, s, (size_t)n) == QR_OK);
            }
            }
        }
        qr_buf_init(&valid[k]);
        QrError e;
        qr_error_clear(&e);
        CHECK(colw_finish(w, &valid[k], &e) == QR_OK);
        colw_free(w);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    build_valid();
    return 0;
}

static ColPred pred_for(QrColType t, int which, ColVal *set)
{
    ColPred p = {0};
    switch (t) {
    case QR_COL_KEYWORD:
        set[0] = col_val_str("k17", 3);
        set[1] = col_val_str("k2", 2);
        if (which == 0) { p.op = CP_EQ; p.v = set[0]; }
        else if (which == 1) { p.op = CP_PREFIX; p.v = col_val_str("k1", 2); }
        else if (which == 2) { p.op = CP_IN; p.set = set; p.n_set = 2; }
        else { p.op = CP_IS_NULL; }
        break;
    case QR_COL_FLOAT64:
        if (which == 0) { p.op = CP_GT; p.v = col_val_float(100.5); }
        else if (which == 1) { p.op = CP_BETWEEN; p.v = col_val_int(3); p.hi = col_val_float(50.0); }
        else if (which == 2) { p.op = CP_NE; p.v = col_val_float(NAN); }
        else { p.op = CP_IS_NOT_NULL; }
        break;
    default:
        set[0] = col_val_int(5);
        set[1] = col_val_int(1700000000500000LL);
        if (which == 0) { p.op = CP_LE; p.v = col_val_int(10); }
        else if (which == 1) { p.op = CP_BETWEEN; p.v = col_val_int(-100); p.hi = col_val_int(1700000001000000LL); }
        else if (which == 2) { p.op = CP_IN; p.set = set; p.n_set = 2; }
        else { p.op = CP_IS_NULL; }
    }
    return p;
}

static void exercise(const uint8_t *data, size_t len, bool must_fail)
{
    QrError e;
    qr_error_clear(&e);
    Column *c = col_open(data, len, "fuzz", &e);
    if (!c) {
        CHECK(e.code == QR_ECORRUPT || e.code == QR_ENOMEM);
        return;
    }
    bool verified = col_verify(c, &e) == QR_OK;
    if (must_fail)
        CHECK(!verified);
    ColStats st = col_stats(c);
    uint32_t rows = col_rows(c);
    CHECK(st.rows == rows);
    /* row reads: must stay in bounds whatever the bytes say */
    for (uint32_t r = 0; r < rows && r < 20000; r += 1 + r / 512) {
        int64_t i;
        double f;
        bool b;
        const char *s;
        size_t n;
        (void)col_get_int(c, r, &i);
        (void)col_get_float(c, r, &f);
        (void)col_get_bool(c, r, &b);
        if (col_get_str(c, r, &s, &n) && n)
            CHECK(s[0] == s[0]); /* touch the bytes for ASan */
    }
    /* zone maps must hold for verified blobs */
    for (uint32_t b = 0; verified && b < col_n_blocks(c); b++) {
        ColZone z;
        CHECK(col_block_zone(c, b, &z));
        if (z.has_range && (st.type == QR_COL_INT64 || st.type == QR_COL_TIMESTAMP)) {
            for (uint32_t r = z.first_row; r < z.first_row + z.n_rows; r++) {
                int64_t v;
                if (col_get_int(c, r, &v))
                    CHECK(v >= z.min.u.i && v <= z.max.u.i);
            }
        }
    }
    for (int which = 0; which < 4; which++) {
        ColVal set[2];
        ColPred p = pred_for(st.type, which, set);
        ColFilter *f = NULL;
        qr_error_clear(&e);
        if (col_filter_new(c, &p, &f, &e) != QR_OK)
            continue;
        roaring_bitmap_t *out = roaring_bitmap_create();
        CHECK(out);
        ColScanStats ss = {0};
        qr_error_clear(&e);
        if (col_filter_scan(f, NULL, out, &ss, &e) == QR_OK && verified) {
            for (uint32_t r = 0; r < rows; r++)
                CHECK(col_filter_match(f, r) == roaring_bitmap_contains(out, r));
        }
        (void)col_filter_selectivity(f);
        roaring_bitmap_free(out);
        col_filter_free(f);
    }
    col_close(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if ((data[0] & 1) == 0) {
        /* copy so reads past the end are caught exactly at len */
        uint8_t *copy = malloc(size - 1 ? size - 1 : 1);
        CHECK(copy);
        memcpy(copy, data + 1, size - 1);
        exercise(copy, size - 1, false);
        free(copy);
        return 0;
    }
    const QrBuf *v = &valid[(data[0] >> 1) % N_VALID];
    uint8_t *copy = malloc(v->len);
    CHECK(copy);
    memcpy(copy, v->data, v->len);
    FzIn in = {data + 1, size - 1, 0};
    bool changed = false;
    while (fz_left(&in) >= 5) {
        uint32_t off = fz_u32(&in) % (uint32_t)v->len;
        uint8_t x = (uint8_t)fz_u8(&in);
        copy[off] ^= x;
    }
    changed = memcmp(copy, v->data, v->len) != 0;
    exercise(copy, v->len, changed);
    free(copy);
    return 0;
}
