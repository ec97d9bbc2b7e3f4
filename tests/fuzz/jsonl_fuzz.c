/*
 * jsonl_fuzz.c — libFuzzer target for JSONL bulk ingest (src/server/ingest.c
 * over the engine's write path: cJSON, schema inference and validation, the
 * document builder, WAL, commit).
 *
 * Byte 0 picks the options: bit 0 an explicit schema instead of inference,
 * bit 1 strict mode, bits 2..3 the batch size, bits 4..7 the chunking of
 * the feed.  The rest is the JSONL stream, fed in chunks, into a fresh table
 * of one long-lived data directory (fsync off).
 * Promises checked beyond "no crash, no leak, no hang":
 *   - every line is accounted for: imported + replaced + rejected equals the
 *     non-blank lines seen (unless a strict-mode rejection stopped the feed);
 *   - every kept error names a line inside the input;
 *   - the table's live document count equals the distinct keys imported.
 */
#include "fuzz_util.h"
#include "query/quarry.h"
#include "server/ingest.h"
#include "store/util.h"

static QrDb *db;
static int run_no;
static QrSchema fixed;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    db = fz_db_open();
    QrError e;
    qr_error_clear(&e);
    const char *sj = "{\"primary_key\":\"id\",\"fields\":[{\"name\":\"t\",\"type\":\"text\"},"
                     "{\"name\":\"k\",\"type\":\"keyword\"},{\"name\":\"n\",\"type\":\"int\"},"
                     "{\"name\":\"f\",\"type\":\"float\"},{\"name\":\"b\",\"type\":\"bool\"},"
                     "{\"name\":\"ts\",\"type\":\"timestamp\"}]}";
    CHECK(schema_from_json(sj, strlen(sj), &fixed, &e) == QR_OK);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    uint8_t opt = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char name[32];
    snprintf(name, sizeof name, "t%d", run_no++);
    IngestOpts io = {.table = name,
                     .schema = (opt & 1) ? &fixed : NULL,
                     .batch = (opt >> 2 & 3) == 0 ? 1 : (opt >> 2 & 3) * 7,
                     .strict = (opt & 2) != 0,
                     .max_errors_kept = 100,
                     .max_line_bytes = 4096};
    QrError e;
    qr_error_clear(&e);
    Ingest *in = NULL;
    CHECK(ingest_begin(db, &io, &in, &e) == QR_OK);
    size_t chunk = (size_t)(opt >> 4) + 1;
    int rc = QR_OK;
    for (size_t off = 0; off < len && rc == QR_OK; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        rc = ingest_feed(in, text + off, n, &e);
    }
    if (rc == QR_OK)
        rc = ingest_end(in, &e);
    IngestCounts c;
    ingest_counts(in, &c);
    if (rc == QR_OK) {
        /* non-blank lines of the input */
        uint64_t lines = 0;
        size_t start = 0;
        for (size_t i = 0; i <= len; i++) {
            if (i == len || text[i] == '\n') {
                bool blank = true;
                for (size_t j = start; j < i; j++)
                    if (text[j] != ' ' && text[j] != '\t' && text[j] != '\r')
                        blank = false;
                lines += !blank;
                start = i + 1;
            }
        }
        CHECK(c.imported + c.replaced + c.rejected == lines);
    } else {
        CHECK(e.message[0]);
    }
    int n_err = 0;
    const IngestError *errs = ingest_errors(in, &n_err);
    for (int i = 0; i < n_err; i++)
        CHECK(errs[i].line >= 1 && errs[i].line <= c.lines + 1 && errs[i].err.message[0]);
    QrTable *t = ingest_table(in);
    if (t && rc == QR_OK) {
        QrTableStats st;
        qr_table_stats(t, &st);
        CHECK(st.docs == c.imported);
    }
    ingest_free(in);
    if (t) {
        qr_error_clear(&e);
        CHECK(qr_table_drop(db, name, &e) == QR_OK);
    }
    return 0;
}
