/*
 * copy_fuzz.c — libFuzzer target for the COPY text and CSV reader
 * (src/query/sql_copy.c), the bytes a client streams after COPY FROM STDIN.
 *
 * Byte 0 picks the format (bit 0: CSV, bit 1: HEADER), byte 1 the delimiter
 * (tab or one of ",;|"), byte 2 the chunk size (1..64); the rest is the data,
 * fed in chunks of that size.
 * Promises checked beyond "no crash, no leak, no hang":
 *   - rows come out with line numbers that never decrease and lie within
 *     the input's line count;
 *   - every field the reader hands out is NUL-terminated at its length;
 *   - re-encoding the rows with copy_write_row and reading them back (in
 *     one chunk) gives the same rows (the writer and reader agree).
 */
#include "fuzz_util.h"
#include "query/sql_w.h"

typedef struct Got {
    int n_rows;
    int64_t last_line, max_line;
    QrBuf enc;          /* the rows re-encoded */
    const CopyFmt *fmt;
    /* second pass: compare against the first */
    QrBuf first;        /* fields of pass one, each as u32 len (or ~0 for NULL) + bytes */
    size_t cmp_off;
    bool compare;
} Got;

static void put_field(QrBuf *b, const char *v, size_t n)
{
    uint32_t len = v ? (uint32_t)n : 0xFFFFFFFFu;
    qr_buf_append(b, &len, 4);
    if (v)
        qr_buf_append(b, v, n);
}

static int on_row(void *ctx, int n, char **vals, size_t *lens, int64_t line, QrError *err)
{
    (void)err;
    Got *g = ctx;
    CHECK(line >= g->last_line && line >= 1 && line <= g->max_line);
    g->last_line = line;
    g->n_rows++;
    for (int i = 0; i < n; i++)
        CHECK(!vals[i] || vals[i][lens[i]] == 0);
    if (!g->compare) {
        copy_write_row(&g->enc, g->fmt, n, (const char *const *)vals, lens);
        uint32_t nf = (uint32_t)n;
        qr_buf_append(&g->first, &nf, 4);
        for (int i = 0; i < n; i++)
            put_field(&g->first, vals[i], lens[i]);
        return QR_OK;
    }
    QrBuf row;
    qr_buf_init(&row);
    uint32_t nf = (uint32_t)n;
    qr_buf_append(&row, &nf, 4);
    for (int i = 0; i < n; i++)
        put_field(&row, vals[i], lens[i]);
    CHECK(g->cmp_off + row.len <= g->first.len);
    CHECK(memcmp(g->first.data + g->cmp_off, row.data, row.len) == 0);
    g->cmp_off += row.len;
    qr_buf_free(&row);
    return QR_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FzIn in = {data, size, 0};
    uint32_t mode = fz_u8(&in), dsel = fz_u8(&in), chunk = 1 + fz_u8(&in) % 64;
    CopyFmt fmt;
    copy_fmt_init(&fmt, mode & 1);
    fmt.header = (mode & 2) && fmt.csv;
    static const char delims[] = "\t,;|";
    fmt.delim = delims[dsel % 4];
    if (fmt.csv && fmt.delim == '\t')
        fmt.delim = ',';
    const char *body = (const char *)data + in.off;
    size_t n = fz_left(&in);
    Got g = {.fmt = &fmt, .max_line = 1};
    for (size_t i = 0; i < n; i++)
        g.max_line += body[i] == '\n';
    qr_buf_init(&g.enc);
    qr_buf_init(&g.first);
    CopyReader rd;
    copy_reader_init(&rd, &fmt, on_row, &g);
    QrError err;
    qr_error_clear(&err);
    int rc = QR_OK;
    for (size_t off = 0; off < n && rc == QR_OK; off += chunk)
        rc = copy_reader_feed(&rd, body + off, n - off < chunk ? n - off : chunk, &err);
    if (rc == QR_OK)
        rc = copy_reader_finish(&rd, &err);
    copy_reader_free(&rd);
    if (rc != QR_OK) {
        CHECK(err.code != QR_OK && err.message[0]);
    } else if (g.n_rows) {
        /* the writer's output reads back as the same rows (no header now) */
        int rows = g.n_rows;
        CopyFmt f2 = fmt;
        f2.header = false;
        g.compare = true;
        g.n_rows = 0;
        g.last_line = 0;
        g.max_line = INT64_MAX;
        copy_reader_init(&rd, &f2, on_row, &g);
        qr_error_clear(&err);
        CHECK(copy_reader_feed(&rd, (const char *)g.enc.data, g.enc.len, &err) == QR_OK);
        CHECK(copy_reader_finish(&rd, &err) == QR_OK);
        copy_reader_free(&rd);
        CHECK(g.n_rows == rows && g.cmp_off == g.first.len);
    }
    qr_buf_free(&g.enc);
    qr_buf_free(&g.first);
    return 0;
}
