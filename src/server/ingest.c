/*
 * ingest.c — JSONL bulk ingest (see ingest.h).
 * Layer: server/.  Calls query/quarry.h and the base kit.
 */
#include "server/ingest.h"
#include "store/util.h"

#include <cJSON.h>
#include <stdio.h>
#include <string.h>

struct Ingest {
    QrDb *db;               /* borrows */
    IngestOpts opts;
    char table[QR_NAME_MAX + 1];
    QrTable *t;             /* borrows (db owns); NULL until known */
    QrLoader *ld;           /* owns: this ingest's load (its batches); NULL until t */
    IngestCounts c;
    /* inference: the first lines of a new table wait here */
    bool inferring;
    QrBuf infer_notes;      /* owns: why each field got its type (schema_infer_explain) */
    char **held;
    size_t *held_len;
    uint64_t *held_line;
    int n_held;
    size_t held_bytes;
    /* partial line across ingest_feed calls */
    QrBuf partial;
    bool partial_too_long;
    IngestError *errs;
    int n_errs;
    bool failed;
};

static void reject(Ingest *in, uint64_t line, const QrError *e);

static void on_reject(void *arg, uint64_t line, const QrError *e) { reject(arg, line, e); }

static void on_commit(void *arg, uint64_t last_line, uint64_t added, uint64_t replaced)
{
    Ingest *in = arg;
    in->c.imported += added;
    in->c.replaced += replaced;
    in->c.acked += added + replaced;
    if (in->opts.on_commit)
        in->opts.on_commit(in->opts.arg, last_line, in->c.acked);
}

/* The table is known: start this ingest's load (its batches: nothing of
 * them is visible or durable before their commits, whatever other writers
 * do; indexed by a pool of threads, committed in input order). */
static int start_batch(Ingest *in, QrError *err)
{
    QrLoadOpts lo = {.threads = in->opts.threads, .chunk_docs = (uint64_t)in->opts.batch,
                     .chunk_bytes = in->opts.batch_bytes, .memory_bytes = in->opts.memory_bytes,
                     .strict = in->opts.strict, .on_reject = on_reject,
                     .on_commit = on_commit, .arg = in};
    int rc = qr_loader_begin(in->t, &lo, &in->ld, err);
    if (rc != QR_OK)
        in->failed = true;
    return rc;
}

int ingest_begin(QrDb *db, const IngestOpts *opts, Ingest **out, QrError *err)
{
    *out = NULL;
    Ingest *in = qr_calloc(1, sizeof *in);
    if (!in)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    in->db = db;
    in->opts = *opts;
    if (in->opts.batch <= 0)
        in->opts.batch = 10000;
    if (!in->opts.batch_bytes)
        in->opts.batch_bytes = INGEST_BATCH_BYTES;
    if (in->opts.max_errors_kept <= 0)
        in->opts.max_errors_kept = 100;
    if (!in->opts.max_line_bytes)
        in->opts.max_line_bytes = 16u << 20;
    snprintf(in->table, sizeof in->table, "%s", opts->table ? opts->table : "");
    qr_buf_init(&in->partial);
    qr_buf_init(&in->infer_notes);
    QrError e;
    qr_error_clear(&e);
    int rc = qr_table_get(db, in->table, &in->t, &e);
    if (rc == QR_ENOTFOUND) {
        if (opts->schema) {
            rc = qr_table_create(db, in->table, opts->schema, &in->t, err);
            if (rc == QR_OK)
                rc = start_batch(in, err);
            if (rc != QR_OK) {
                ingest_free(in);
                return rc;
            }
            in->c.table_created = true;
        } else {
            in->inferring = true;
            in->held = qr_calloc(INGEST_INFER_LINES, sizeof *in->held);
            in->held_len = qr_calloc(INGEST_INFER_LINES, sizeof *in->held_len);
            in->held_line = qr_calloc(INGEST_INFER_LINES, sizeof *in->held_line);
            if (!in->held || !in->held_len || !in->held_line) {
                ingest_free(in);
                return qr_error_set(err, QR_ENOMEM, "out of memory");
            }
        }
    } else if (rc != QR_OK || (rc = start_batch(in, &e)) != QR_OK) {
        qr_error_copy(err, &e);
        ingest_free(in);
        return rc;
    }
    *out = in;
    return QR_OK;
}

static void reject(Ingest *in, uint64_t line, const QrError *e)
{
    in->c.rejected++;
    if (in->n_errs < in->opts.max_errors_kept) {
        if (!in->errs)
            in->errs = qr_calloc((size_t)in->opts.max_errors_kept, sizeof *in->errs);
        if (in->errs) {
            in->errs[in->n_errs].line = line;
            in->errs[in->n_errs].err = *e;
            in->n_errs++;
        }
    }
    if (in->opts.on_error)
        in->opts.on_error(in->opts.arg, line, e);
}

/* Everything queued built and committed (the outcomes delivered); after a
 * strict stop, what its batch accepted before the bad line too. */
static int commit_batch(Ingest *in, QrError *err)
{
    if (!in->ld)
        return QR_OK;
    int rc = qr_loader_finish(in->ld, true, err);
    if (rc != QR_OK)
        in->failed = true;
    return rc;
}

/* An upper bound on the JSON values of s[0..len): every value but the
 * first follows a ',' or opens with '[' or '{' outside strings.  Stops
 * counting past `max`. */
static size_t json_values_bound(const char *s, size_t len, size_t max)
{
    size_t n = 1;
    bool in_str = false;
    for (size_t i = 0; i < len && n <= max; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c == ',' || c == '[' || c == '{') {
            n++;
        }
    }
    return n;
}

/* Queue one line for the table.  Rejections are counted when the load
 * reports them (in line order); a fatal error, or a strict rejection, is
 * returned. */
static int put_line(Ingest *in, uint64_t line, const char *s, size_t len, QrError *err)
{
    int rc = qr_loader_add(in->ld, line, s, len, err);
    if (rc != QR_OK) {
        in->failed = true;
        if (in->opts.strict && err && !err->hint[0] && rc != QR_EIO && rc != QR_ENOMEM &&
            rc != QR_EINTERNAL && rc != QR_ECORRUPT && rc != QR_EPERM)
            qr_error_hint(err, "without --strict bad lines are skipped and reported");
    }
    return rc;
}

/* Line ln breaks a limit (e): rejected and reported, or fatal in strict mode. */
static int reject_over_limit(Ingest *in, uint64_t ln, QrError *e, QrError *err)
{
    qr_error_pos(e, -1, (int64_t)ln, -1);
    reject(in, ln, e);
    if (in->opts.strict) {
        in->failed = true;
        qr_error_copy(err, e);
        return e->code;
    }
    return QR_OK;
}

static int finish_inference(Ingest *in, QrError *err)
{
    in->inferring = false;
    SchemaInfer *si = schema_infer_new("id");
    if (!si)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    for (int i = 0; i < in->n_held; i++) {
        QrError e;
        qr_error_clear(&e);
        schema_infer_add(si, in->held[i], in->held_len[i], &e); /* bad lines: reported later */
    }
    QrSchema *sc = qr_malloc(sizeof *sc);
    int rc = sc ? schema_infer_finish(si, sc, err) : qr_error_set(err, QR_ENOMEM, "out of memory");
    if (rc == QR_OK && schema_infer_explain(si, &in->infer_notes) != QR_OK)
        rc = qr_error_set(err, QR_ENOMEM, "out of memory");
    schema_infer_free(si);
    if (rc == QR_OK)
        rc = qr_table_create(in->db, in->table, sc, &in->t, err);
    if (rc == QR_OK)
        rc = start_batch(in, err);
    qr_free(sc);
    if (rc != QR_OK) {
        in->failed = true;
        return rc;
    }
    in->c.schema_inferred = true;
    in->c.table_created = true;
    for (int i = 0; i < in->n_held && rc == QR_OK; i++)
        rc = put_line(in, in->held_line[i], in->held[i], in->held_len[i], err);
    for (int i = 0; i < in->n_held; i++)
        qr_free(in->held[i]);
    in->n_held = 0;
    in->held_bytes = 0;
    return rc;
}

int ingest_line(Ingest *in, const char *line, size_t len, QrError *err)
{
    if (in->failed)
        return qr_error_set(err, QR_EINTERNAL, "ingest already failed");
    uint64_t ln = ++in->c.lines;
    in->c.bytes += len + 1;
    while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
        len--;
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t'))
        i++;
    if (i == len)
        return QR_OK; /* blank */
    /* a parsed value costs ~64 bytes however short its text: "[0,0,...]"
     * would grow 32 times in memory, so a line's values are bounded too */
    size_t max_values = in->opts.max_line_bytes / INGEST_BYTES_PER_VALUE;
    if (json_values_bound(line, len, max_values) > max_values) {
        QrError e;
        qr_error_clear(&e);
        qr_error_set(&e, QR_ELIMIT, "line has more than %zu JSON values", max_values);
        qr_error_hint(&e, "a line may hold one value per %d bytes of max_line_bytes: split "
                          "the document",
                      INGEST_BYTES_PER_VALUE);
        return reject_over_limit(in, ln, &e, err);
    }
    if (in->inferring) {
        char *copy = qr_strndup(line, len);
        if (!copy)
            return qr_error_set(err, QR_ENOMEM, "out of memory");
        in->held[in->n_held] = copy;
        in->held_len[in->n_held] = len;
        in->held_line[in->n_held] = ln;
        in->n_held++;
        in->held_bytes += len;
        /* held lines are memory too: infer from fewer when they are big */
        if (in->n_held == INGEST_INFER_LINES || in->held_bytes >= in->opts.batch_bytes)
            return finish_inference(in, err);
        return QR_OK;
    }
    return put_line(in, ln, line, len, err);
}

static int reject_long_line(Ingest *in, QrError *err)
{
    QrError e;
    qr_error_clear(&e);
    qr_error_set(&e, QR_ELIMIT, "line is longer than %zu bytes", in->opts.max_line_bytes);
    in->partial_too_long = false;
    in->partial.len = 0;
    return reject_over_limit(in, ++in->c.lines, &e, err);
}

int ingest_feed(Ingest *in, const char *data, size_t len, QrError *err)
{
    const char *p = data, *end = data + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = (size_t)((nl ? nl : end) - p);
        bool too_long = in->partial_too_long || in->partial.len + n > in->opts.max_line_bytes;
        if (!nl) {
            /* incomplete line: keep it for the next chunk */
            if (too_long) {
                in->partial_too_long = true;
                in->partial.len = 0;
            } else {
                qr_buf_append(&in->partial, p, n);
                if (!qr_buf_ok(&in->partial))
                    return qr_error_set(err, QR_ENOMEM, "out of memory");
            }
            break;
        }
        int rc;
        if (too_long) {
            rc = reject_long_line(in, err);
        } else if (in->partial.len) {
            qr_buf_append(&in->partial, p, n);
            if (!qr_buf_ok(&in->partial))
                return qr_error_set(err, QR_ENOMEM, "out of memory");
            rc = ingest_line(in, (const char *)in->partial.data, in->partial.len, err);
            in->partial.len = 0;
        } else {
            rc = ingest_line(in, p, n, err);
        }
        if (rc != QR_OK)
            return rc;
        p = nl + 1;
    }
    return QR_OK;
}

int ingest_end(Ingest *in, QrError *err)
{
    int rc = QR_OK;
    if (in->failed)
        return QR_OK;
    if (in->partial.len || in->partial_too_long) {
        if (in->partial_too_long) {
            rc = reject_long_line(in, err);
        } else {
            rc = ingest_line(in, (const char *)in->partial.data, in->partial.len, err);
        }
        in->partial.len = 0;
        if (rc != QR_OK)
            return rc;
    }
    if (in->inferring && in->n_held > 0 && (rc = finish_inference(in, err)) != QR_OK)
        return rc;
    return commit_batch(in, err);
}

void ingest_free(Ingest *in)
{
    if (!in)
        return;
    qr_loader_free(in->ld); /* uncommitted documents are discarded */
    qr_buf_free(&in->infer_notes);
    for (int i = 0; i < in->n_held; i++)
        qr_free(in->held[i]);
    qr_free(in->held);
    qr_free(in->held_len);
    qr_free(in->held_line);
    qr_buf_free(&in->partial);
    qr_free(in->errs);
    qr_free(in);
}

void ingest_counts(const Ingest *in, IngestCounts *c) { *c = in->c; }

const IngestError *ingest_errors(const Ingest *in, int *n)
{
    *n = in->n_errs;
    return in->errs;
}

QrTable *ingest_table(const Ingest *in) { return in->t; }

int ingest_commit(Ingest *in, QrError *err) { return commit_batch(in, err); }

const char *ingest_inference_notes(const Ingest *in, size_t *len)
{
    *len = in->infer_notes.len;
    return in->infer_notes.len ? (const char *)in->infer_notes.data : NULL;
}
