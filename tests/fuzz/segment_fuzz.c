/*
 * segment_fuzz.c — libFuzzer target for the segment reader (src/index/segment.c
 * and everything under it: section file, term dictionary, postings, stored
 * documents, columns, primary keys) on damaged files.
 *
 * A valid segment of 200 documents (text, keyword, int, timestamp fields) is
 * built once at start-up.  Each input damages a copy: bytes 0..3 pick a
 * truncation length (0 = none), the rest are (u32 offset, u8 xor) pairs.
 * The copy is written to a file and opened; if it opens it is verified, then
 * read everywhere a query could read (every term's postings with positions,
 * every stored document, every column value, every primary key).
 * Promises checked beyond "no crash, no leak, no hang": any change to the
 * bytes is refused by seg_open or seg_verify (every byte is under a CRC);
 * the untouched file opens, verifies, and reads back its 200 documents.
 */
#include <cJSON.h>

#include "fuzz_util.h"
#include "index/segment.h"
#include "store/mem.h"
#include "store/util.h"

#define N_DOCS 200
static uint8_t *valid;
static size_t valid_len;
static QrSchema schema;
static int run_no;

static const char *SCHEMA =
    "{\"primary_key\":\"id\",\"fields\":["
    "{\"name\":\"title\",\"type\":\"text\"},{\"name\":\"body\",\"type\":\"text\"},"
    "{\"name\":\"sym\",\"type\":\"keyword\"},{\"name\":\"views\",\"type\":\"int\"},"
    "{\"name\":\"at\",\"type\":\"timestamp\"}]}";

static const char *WORDS[] = {"river", "power", "hydro", "bank", "market", "share", "price",
                              "nepal", "energy", "profit", "loss", "report", "annual", "quarter"};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    qr_log_set_level(QR_LOG_ERROR);
    QrError e;
    qr_error_clear(&e);
    CHECK(schema_from_json(SCHEMA, strlen(SCHEMA), &schema, &e) == QR_OK);
    SegBuilder *b = NULL;
    CHECK(segb_new(&schema, &b, &e) == QR_OK);
    uint32_t seed = 11;
    for (int i = 0; i < N_DOCS; i++) {
        char title[128] = "", body[512] = "", doc[1024];
        for (int w = 0; w < 3; w++) {
            seed = seed * 1103515245u + 12345u;
            strcat(title, WORDS[(seed >> 8) % 14]);
            strcat(title, " ");
        }
        for (int w = 0; w < 20; w++) {
            seed = seed * 1103515245u + 12345u;
            strcat(body, WORDS[(seed >> 8) % 14]);
            strcat(body, " ");
        }
        snprintf(doc, sizeof doc,
                 "{\"id\":\"d%d\",\"title\":\"%s\",\"body\":\"%s\",\"sym\":\"S%d\",\"views\":%d%s}",
                 i, title, body, i % 7, i * 13 % 101,
                 i % 5 ? ",\"at\":\"2025-03-01T10:00:00Z\"" : "");
        cJSON *root = cJSON_Parse(doc);
        CHECK(root);
        uint32_t d;
        CHECK(segb_add(b, doc, strlen(doc), root, &d, &e) == QR_OK);
        cJSON_Delete(root);
    }
    char path[700];
    snprintf(path, sizeof path, "%s/valid.qseg", fz_tmpdir());
    roaring_bitmap_t *del = NULL;
    CHECK(segb_finish(b, path, false, &del, &e) == QR_OK);
    roaring_bitmap_free(del);
    segb_free(b);
    FILE *f = fopen(path, "rb");
    CHECK(f);
    fseek(f, 0, SEEK_END);
    valid_len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    valid = malloc(valid_len);
    CHECK(valid && fread(valid, 1, valid_len, f) == valid_len);
    fclose(f);
    return 0;
}

static uint64_t read_everything(Segment *s)
{
    uint64_t touched = 0;
    QrArena *arena = qr_arena_new(0);
    CHECK(arena);
    IterCtx ctx;
    iter_ctx_init(&ctx, arena);
    const TermDict *td = seg_terms(s);
    TermCursor *cur = td ? td_cursor_new(td, arena) : NULL;
    while (cur && td_cursor_next(cur)) {
        TermPostings tp;
        td_cursor_info(cur, &tp);
        Iter *it = seg_postings(s, &ctx, &tp, NULL, true);
        if (!it)
            break;
        for (DocId d = iter_next(it); d != ITER_END; d = iter_next(it)) {
            CHECK(d >= 0 && d < (DocId)seg_n_docs(s));
            touched++;
        }
        iter_close(it);
        if (ctx.err.code != QR_OK)
            break;
    }
    const DocStore *ds = seg_docs(s);
    DocStoreCursor *dc = ds ? ds_cursor_new(ds) : NULL;
    for (uint32_t d = 0; dc && d < ds_count(ds); d++) {
        const uint8_t *p;
        size_t n;
        QrError e;
        qr_error_clear(&e);
        if (ds_get(dc, d, &p, &n, &e) == QR_OK)
            touched += n ? p[n - 1] != 0 : 0;
    }
    ds_cursor_free(dc);
    for (uint32_t d = 0; d < seg_n_docs(s); d++) {
        const uint8_t *k;
        size_t n;
        if (seg_pk(s, d, &k, &n))
            touched += (uint64_t)seg_pk_lookup(s, k, n) == d;
    }
    for (int f = 0; f < schema.n_fields; f++) {
        const Column *c = seg_column(s, f);
        for (uint32_t r = 0; c && r < col_rows(c); r++) {
            int64_t v;
            const char *str;
            size_t n;
            touched += col_get_int(c, r, &v) + col_get_str(c, r, &str, &n);
        }
    }
    qr_arena_free(arena);
    return touched;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(valid_len);
    CHECK(copy);
    memcpy(copy, valid, valid_len);
    FzIn in = {data, size, 0};
    size_t len = valid_len;
    uint32_t cut = fz_u32(&in);
    if (cut && cut % valid_len != 0)
        len = cut % valid_len;
    while (fz_left(&in) >= 5) {
        uint32_t off = fz_u32(&in);
        copy[off % len] ^= (uint8_t)fz_u8(&in);
    }
    bool changed = len != valid_len || memcmp(copy, valid, len) != 0;
    char path[700];
    snprintf(path, sizeof path, "%s/run%d.qseg", fz_tmpdir(), run_no++ % 4);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(copy, 1, len, f) == len);
    fclose(f);
    free(copy);
    QrError e;
    qr_error_clear(&e);
    Segment *s = NULL;
    int rc = seg_open(path, 1, &s, &e);
    if (rc != QR_OK) {
        CHECK(changed);
        CHECK(rc == QR_ECORRUPT || rc == QR_EUNSUPPORTED || rc == QR_EIO || rc == QR_ENOMEM);
        CHECK(e.message[0]);
        return 0;
    }
    qr_error_clear(&e);
    int vrc = seg_verify(s, &e);
    if (changed)
        CHECK(vrc == QR_ECORRUPT);
    else
        CHECK(vrc == QR_OK && seg_n_docs(s) == N_DOCS);
    uint64_t touched = read_everything(s);
    if (!changed)
        CHECK(touched > N_DOCS);
    seg_unref(s);
    return 0;
}
