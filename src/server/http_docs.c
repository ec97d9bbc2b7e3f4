/*
 * http_docs.c — document endpoints: JSONL bulk ingest streamed through
 * ingest_feed as the body arrives (chunked or not, gzip inflated on the
 * fly), and get / replace / delete of one document by id, delete by query.
 *
 * Layer: server/.  Calls query/quarry.h, server/ingest.h, the base kit,
 * cJSON and zlib.
 *
 * Commit rule: a 2xx answer means every accepted document is committed
 * (durable per the fsync policy and visible to searches).  An upload writes
 * into a batch of its own, committed every `batch` documents: other
 * writers' commits never publish it.  When an upload fails part way (strict
 * mode, a limit, bad gzip, the client going away), the documents accepted
 * before the failure are committed and the answer counts them in "acked";
 * when a commit itself fails (a full disk), nothing of that batch was
 * written, and "acked" counts the documents of the commits before it.
 */
#include "server/cli.h"
#include "server/http_int.h"
#include "server/ingest.h"
#include "store/mem.h"
#include "store/util.h"

#include <cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

/* ---- JSONL ingest ---- */

#define HTTP_GZIP_FREE_BYTES (10u << 20) /* plain bytes not held to max_gzip_ratio */

typedef struct Upload {
    Ingest *in;             /* owns */
    bool gzip;
    bool z_live;            /* z initialized */
    bool z_member_done;     /* last gzip member ended cleanly */
    z_stream z;
    uint64_t plain_bytes;   /* after gunzip */
    uint64_t gz_bytes;      /* gzip bytes inflated so far */
    uint64_t t0_ns;
    bool ended;             /* ingest_end ran (or the failure path committed) */
    bool all_acked;         /* the failure path committed every accepted document */
    bool strict;
    bool guard;             /* holds the streaming guard on r->t */
    bool counted;           /* counted in srv->ingests */
    QrError fail;           /* the error that stopped the upload (QR_OK = none) */
    /* a body that is one JSON array, cut into one line per element */
    int form;               /* 0 = not known yet, 1 = JSON lines, 2 = a JSON array */
    int arr_depth;          /* nesting: 1 inside the array, more inside an element */
    bool arr_in_str, arr_esc, arr_closed;
    char out[64 << 10];     /* inflate output */
    char arr_out[16 << 10]; /* array elements as lines, before ingest_feed */
} Upload;

static const char *const JSONL_TYPES[] = {
    "application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonl",
    "application/json-lines", "application/x-jsonlines", "application/jsonlines",
    "application/json", "text/plain", "application/octet-stream", "text/jsonl",
};

static bool jsonl_type_ok(const char *ct)
{
    char mt[64];
    size_t o = 0;
    while (*ct == ' ')
        ct++;
    for (; *ct && *ct != ';' && *ct != ' ' && o + 1 < sizeof mt; ct++)
        mt[o++] = (char)(*ct >= 'A' && *ct <= 'Z' ? *ct + 32 : *ct);
    mt[o] = 0;
    for (size_t i = 0; i < sizeof JSONL_TYPES / sizeof JSONL_TYPES[0]; i++)
        if (!strcmp(mt, JSONL_TYPES[i]))
            return true;
    return false;
}

static bool parse_bool_arg(const char *v, bool *out)
{
    if (!strcmp(v, "true") || !strcmp(v, "1") || !v[0])
        *out = true;
    else if (!strcmp(v, "false") || !strcmp(v, "0"))
        *out = false;
    else
        return false;
    return true;
}

int http_docs_ingest_begin(HttpReq *r)
{
    HttpServer *s = r->srv;
    if (!qr_name_valid(r->t)) {
        http_error(r, QR_EINVAL, "invalid table name \"%.80s\"", r->t);
        http_error_hint(r, "table names are letters, digits and underscores, starting with a "
                           "letter, at most %d bytes",
                        QR_NAME_MAX);
        return QR_EINVAL;
    }
    const char *ct = http_req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ct && !jsonl_type_ok(ct)) {
        http_error(r, HTTP_EMEDIA, "Content-Type \"%.60s\" is not accepted for JSONL upload", ct);
        http_error_hint(r, "send one JSON document per line as application/x-ndjson (curl: "
                           "--data-binary @file -H 'Content-Type: application/x-ndjson')");
        return HTTP_EMEDIA;
    }
    const char *ce = http_req_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING);
    bool gzip = false;
    if (ce && (!strcasecmp(ce, "gzip") || !strcasecmp(ce, "x-gzip")))
        gzip = true;
    else if (ce && strcasecmp(ce, "identity") != 0) {
        http_error(r, HTTP_EMEDIA, "Content-Encoding \"%.40s\" is not supported", ce);
        http_error_hint(r, "send the body plain or with Content-Encoding: gzip");
        return HTTP_EMEDIA;
    }
    long batch = 10000;
    bool strict = false;
    if (!r->args_parsed)
        http_arg(r, "");
    if (r->args_bad)
        return r->err.code;
    for (int i = 0; i < r->n_args; i++) {
        const char *k = r->arg_k[i], *v = r->arg_v[i];
        if (!strcmp(k, "batch")) {
            char *end;
            errno = 0;
            batch = strtol(v, &end, 10);
            if (errno || !*v || *end || batch < 1 || batch > 1000000)
                return http_error(r, QR_EINVAL, "batch must be a number from 1 to 1000000");
        } else if (!strcmp(k, "strict")) {
            if (!parse_bool_arg(v, &strict))
                return http_error(r, QR_EINVAL, "strict must be true or false");
        } else {
            http_error(r, QR_EINVAL, "unknown query parameter \"%.60s\"", k);
            http_error_hint(r, "documents upload takes batch and strict");
            return QR_EINVAL;
        }
    }
    if (atomic_fetch_add(&s->ingests, 1) >= s->cfg.max_ingests) {
        atomic_fetch_sub(&s->ingests, 1);
        http_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
        http_error(r, QR_EBUSY, "too many uploads running (at most %d)", s->cfg.max_ingests);
        http_error_hint(r, "retry when one has finished, or raise max_ingests");
        return QR_EBUSY;
    }
    Upload *u = qr_calloc(1, sizeof *u);
    if (!u) {
        atomic_fetch_sub(&s->ingests, 1);
        return http_error(r, QR_ENOMEM, "out of memory");
    }
    r->state = u;
    u->counted = true;
    u->strict = strict;
    u->t0_ns = qr_now_ns();
    u->gzip = gzip;
    qr_error_clear(&u->fail);
    if (gzip) {
        if (inflateInit2(&u->z, 16 + MAX_WBITS) != Z_OK)
            return http_error(r, QR_ENOMEM, "out of memory (zlib)");
        u->z_live = true;
    }
    if (http_table_enter(s, r->t, true) != QR_OK)
        return http_error(r, QR_ENOMEM, "out of memory");
    u->guard = true;
    r->guard_streaming = true;
    IngestOpts io = {.table = r->t, .batch = (int)batch, .strict = strict,
                     .max_line_bytes = s->cfg.max_line_bytes};
    QrError e;
    qr_error_clear(&e);
    if (ingest_begin(s->db, &io, &u->in, &e) != QR_OK)
        return http_error_from(r, &e);
    return QR_OK;
}

/* A JSON array body as JSON lines: each element of the top array becomes a
 * line (the commas between elements newlines, newlines between tokens
 * spaces), so element k is "line" k of the report.  Strings are copied as
 * they are: a raw newline inside one (invalid JSON) splits its element into
 * lines that are rejected, never repaired. */
static int array_feed(Upload *u, const char *p, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (o + 2 > sizeof u->arr_out) {
            if (ingest_feed(u->in, u->arr_out, o, &u->fail) != QR_OK)
                return u->fail.code;
            o = 0;
        }
        if (u->arr_closed) {
            if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
                continue;
            qr_error_set(&u->fail, QR_ESYNTAX, "text after the end of the JSON array");
            qr_error_hint(&u->fail, "send one JSON array of documents, or JSON lines");
            return QR_ESYNTAX;
        }
        if (u->arr_in_str) {
            u->arr_out[o++] = c;
            if (u->arr_esc)
                u->arr_esc = false;
            else if (c == '\\')
                u->arr_esc = true;
            else if (c == '"')
                u->arr_in_str = false;
            continue;
        }
        if (u->arr_depth == 0) { /* before the opening bracket: whitespace only */
            if (c == '[')
                u->arr_depth = 1;
            continue;
        }
        switch (c) {
        case '"':
            u->arr_in_str = true;
            u->arr_out[o++] = c;
            break;
        case '{':
        case '[':
            u->arr_depth++;
            u->arr_out[o++] = c;
            break;
        case ']':
            if (u->arr_depth == 1) {
                u->arr_closed = true;
                u->arr_out[o++] = '\n'; /* ends the last element */
                break;
            }
            /* fall through */
        case '}':
            if (u->arr_depth > 1)
                u->arr_depth--;
            u->arr_out[o++] = c;
            break;
        case ',':
            u->arr_out[o++] = u->arr_depth == 1 ? '\n' : c;
            break;
        case '\n':
        case '\r':
            u->arr_out[o++] = ' ';
            break;
        default:
            u->arr_out[o++] = c;
        }
    }
    return o ? ingest_feed(u->in, u->arr_out, o, &u->fail) : QR_OK;
}

/* The body's form is told by its first byte that is not whitespace: '['
 * is a JSON array of documents, anything else JSON lines. */
static int body_feed(Upload *u, const char *p, size_t n)
{
    if (!u->form) {
        size_t i = 0;
        while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
            i++;
        if (i < n)
            u->form = p[i] == '[' ? 2 : 1;
    }
    return u->form == 2 ? array_feed(u, p, n) : ingest_feed(u->in, p, n, &u->fail);
}

/* Feed plain bytes to the ingest, counting them against the limits: the
 * size after gunzip, and how much gunzip multiplied the bytes sent (a few
 * MB of gzip can hold gigabytes of one repeated line: the server would
 * spend its disk and CPU on what the client never paid to send).  The
 * first HTTP_GZIP_FREE_BYTES are not held to the ratio. */
static int feed_plain(HttpReq *r, Upload *u, const char *p, size_t n)
{
    u->plain_bytes += n;
    uint64_t ratio = (uint64_t)r->srv->cfg.max_gzip_ratio;
    if (u->gzip && u->plain_bytes > HTTP_GZIP_FREE_BYTES && ratio &&
        u->plain_bytes / ratio > u->gz_bytes) {
        qr_error_set(&u->fail, QR_ELIMIT, "gzip data expands more than %llu times",
                     (unsigned long long)ratio);
        qr_error_detail(&u->fail, "%llu bytes of gzip became %llu bytes",
                        (unsigned long long)u->gz_bytes, (unsigned long long)u->plain_bytes);
        qr_error_hint(&u->fail, "send the file uncompressed, or raise max_gzip_ratio in the "
                                "server config");
        return QR_ELIMIT;
    }
    if (u->plain_bytes > r->srv->cfg.max_ingest_bytes) {
        qr_error_set(&u->fail, QR_ELIMIT, "upload is larger than the limit of %llu bytes",
                     (unsigned long long)r->srv->cfg.max_ingest_bytes);
        qr_error_hint(&u->fail, "split the file, or raise max_ingest_bytes in the server config");
        return QR_ELIMIT;
    }
    return body_feed(u, p, n);
}

int http_docs_ingest_feed(HttpReq *r, const char *data, size_t len)
{
    Upload *u = r->state;
    if (!u || !u->in || u->fail.code != QR_OK)
        return QR_EINTERNAL;
    if (!u->gzip)
        return feed_plain(r, u, data, len);
    u->z.next_in = (Bytef *)data;
    u->z.avail_in = (uInt)len;
    while (u->z.avail_in > 0) {
        if (u->z_member_done) {
            /* another gzip member follows (concatenated files) */
            if (inflateReset(&u->z) != Z_OK)
                return qr_error_set(&u->fail, QR_EINTERNAL, "zlib reset failed");
            u->z_member_done = false;
        }
        u->z.next_out = (Bytef *)u->out;
        u->z.avail_out = sizeof u->out;
        uInt in_before = u->z.avail_in;
        int zr = inflate(&u->z, Z_NO_FLUSH);
        u->gz_bytes += in_before - u->z.avail_in;
        size_t got = sizeof u->out - u->z.avail_out;
        if (got) {
            int rc = feed_plain(r, u, u->out, got);
            if (rc != QR_OK)
                return rc;
        }
        if (zr == Z_STREAM_END) {
            u->z_member_done = true;
        } else if (zr == Z_BUF_ERROR && got == 0) {
            break; /* needs more input */
        } else if (zr != Z_OK && zr != Z_BUF_ERROR) {
            qr_error_set(&u->fail, zr == Z_MEM_ERROR ? QR_ENOMEM : QR_EINVAL,
                         "request body is not valid gzip data");
            if (u->z.msg)
                qr_error_detail(&u->fail, "zlib: %s, after %llu bytes of input", u->z.msg,
                                (unsigned long long)r->body_seen);
            return u->fail.code;
        }
    }
    return QR_OK;
}

/* Commit what was accepted before a failure (see the file comment). */
static void commit_after_failure(Upload *u)
{
    if (u->ended || !u->in)
        return;
    u->ended = true;
    QrTable *t = ingest_table(u->in);
    if (!t || u->fail.code == QR_EIO || u->fail.code == QR_ECORRUPT ||
        u->fail.code == QR_EINTERNAL || u->fail.code == QR_ENOMEM)
        return;
    QrError e;
    qr_error_clear(&e);
    if (ingest_commit(u->in, &e) != QR_OK)
        qr_log(QR_LOG_ERROR, "http upload commit after failure table=%s: %s",
               qr_table_name(t), e.message);
    else
        u->all_acked = true;
}

static void counts_json(QrBuf *b, Upload *u)
{
    IngestCounts c;
    ingest_counts(u->in, &c);
    if (u->all_acked)
        c.acked = c.imported + c.replaced;
    qr_buf_printf(b,
                  "\"imported\":%llu,\"replaced\":%llu,\"rejected\":%llu,\"lines\":%llu,"
                  "\"acked\":%llu,\"bytes\":%llu,\"table_created\":%s,\"schema_inferred\":%s,"
                  "\"took_ms\":%.3f,\"errors\":[",
                  (unsigned long long)c.imported, (unsigned long long)c.replaced,
                  (unsigned long long)c.rejected, (unsigned long long)c.lines,
                  (unsigned long long)c.acked, (unsigned long long)c.bytes,
                  c.table_created ? "true" : "false", c.schema_inferred ? "true" : "false",
                  (double)(qr_now_ns() - u->t0_ns) / 1e6);
    int n;
    const IngestError *errs = ingest_errors(u->in, &n);
    for (int i = 0; i < n; i++) {
        if (i)
            qr_buf_putc(b, ',');
        qr_buf_printf(b, "{\"line\":%llu,\"code\":", (unsigned long long)errs[i].line);
        jw_cstr(b, http_code_name(errs[i].err.code));
        qr_buf_append(b, ",\"message\":", 11);
        jw_cstr(b, errs[i].err.message);
        if (errs[i].err.detail[0]) {
            qr_buf_append(b, ",\"detail\":", 10);
            jw_cstr(b, errs[i].err.detail);
        }
        if (errs[i].err.column >= 0)
            qr_buf_printf(b, ",\"column\":%d", errs[i].err.column);
        qr_buf_putc(b, '}');
    }
    qr_buf_printf(b, "],\"errors_truncated\":%s", (uint64_t)n < c.rejected ? "true" : "false");
    /* an inferred schema: why each field got its type, a line each */
    size_t notes_len;
    const char *notes = ingest_inference_notes(u->in, &notes_len);
    if (!notes)
        return;
    static const char key[] = ",\"schema_notes\":[";
    qr_buf_append(b, key, sizeof key - 1);
    const char *p = notes, *end = notes + notes_len;
    for (bool first = true; p < end; first = false) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char line[512];
        /* lines are "  name: reason" */
        size_t skip = len >= 2 && p[0] == ' ' && p[1] == ' ' ? 2 : 0;
        snprintf(line, sizeof line, "%.*s", (int)(len - skip), p + skip);
        if (!first)
            qr_buf_putc(b, ',');
        jw_cstr(b, line);
        p += len + 1;
    }
    qr_buf_putc(b, ']');
}

/* The upload's ingest (its indexing threads, what it did not commit), its
 * streaming guard on the table and its place among the running uploads go
 * back; idempotent. */
static void upload_release(HttpReq *r, Upload *u)
{
    ingest_free(u->in);
    u->in = NULL;
    if (u->guard)
        http_table_leave(r->srv, r->t, true);
    u->guard = false;
    if (u->counted)
        atomic_fetch_sub(&r->srv->ingests, 1);
    u->counted = false;
}

/* The end of the body: last partial line, last commit, the report. */
void http_docs_ingest_end(HttpReq *r)
{
    Upload *u = r->state;
    if (!u || !u->in) {
        http_error(r, QR_EINTERNAL, "upload state is missing");
        return;
    }
    if (u->fail.code == QR_OK && u->gzip && u->plain_bytes + r->body_seen > 0 &&
        !u->z_member_done)
        qr_error_set(&u->fail, QR_EINVAL, "gzip data is truncated");
    if (u->fail.code == QR_OK && u->form == 2 && !u->arr_closed) {
        qr_error_set(&u->fail, QR_ESYNTAX, "the JSON array of documents is not closed");
        qr_error_detail(&u->fail, "the body ended inside the array (after %llu bytes)",
                        (unsigned long long)u->plain_bytes);
        qr_error_hint(&u->fail, "end the array with \"]\"; the elements followed by a comma "
                                "were imported");
    }
    if (u->fail.code == QR_OK) {
        if (ingest_end(u->in, &u->fail) == QR_OK)
            u->ended = true;
    }
    if (u->fail.code != QR_OK)
        commit_after_failure(u);
    if (u->strict && u->fail.hint[0] && strstr(u->fail.hint, "--strict"))
        snprintf(u->fail.hint, sizeof u->fail.hint,
                 "without strict=true bad lines are skipped and reported");
    IngestCounts c;
    ingest_counts(u->in, &c);
    if (u->all_acked)
        c.acked = c.imported + c.replaced;
    http_metrics_table(r->srv, r->t, 0, 0, c.imported + c.replaced);
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_putc(&b, '{');
    int status = 200;
    if (u->fail.code != QR_OK) {
        status = http_status_of(u->fail.code);
        QrBuf eb;
        qr_buf_init(&eb);
        http_error_json(&eb, u->fail.code, &u->fail);
        if (eb.len > 2)
            qr_buf_append(&b, eb.data + 1, eb.len - 2); /* "error":{...} */
        qr_buf_free(&eb);
        qr_buf_putc(&b, ',');
        qr_log(QR_LOG_WARN, "http upload table=%s failed: %s (acked=%llu)", r->t,
               u->fail.message, (unsigned long long)c.acked);
    }
    counts_json(&b, u);
    qr_buf_putc(&b, '}');
    /* everything is committed or discarded: let go of the table before the
     * answer, so that a client's next request (a DROP) finds the upload
     * over -- not still stopping its indexing threads */
    upload_release(r, u);
    http_reply_json(r, status, &b);
}

void http_docs_ingest_cleanup(HttpReq *r)
{
    Upload *u = r->state;
    if (!u)
        return;
    if (u->in && !u->ended) {
        /* the client went away (or the answer came early): commit what was accepted */
        if (u->fail.code == QR_OK)
            qr_error_set(&u->fail, QR_ECANCELED, "upload ended early");
        commit_after_failure(u);
    }
    upload_release(r, u);
    if (u->z_live)
        inflateEnd(&u->z);
    qr_free(u);
    r->state = NULL;
    /* an upload's lines, batches and segment builds leave freed heap
     * behind in the worker thread's malloc arena: give it back */
    qr_mem_trim();
}

/* ---- one document by id ---- */

/* The primary key in the path as JSON text, by the rule `quarry get` and
 * `quarry delete` share (cli_key_json).  Returns false after recording a
 * 400. */
static bool id_json(HttpReq *r, QrBuf *out)
{
    QrError e;
    qr_error_clear(&e);
    if (cli_key_json(r->id ? r->id : "", out, &e) == QR_OK)
        return true;
    http_error(r, e.code, "%s", e.message);
    if (e.hint[0])
        http_error_hint(r, "%s", e.hint);
    return false;
}

/* GET /tables/{t}/documents/{id} */
void http_docs_get(HttpReq *r)
{
    QrTable *t = http_table_get(r);
    if (!t)
        return;
    QrBuf key, doc;
    qr_buf_init(&key);
    qr_buf_init(&doc);
    QrError e;
    qr_error_clear(&e);
    if (id_json(r, &key)) {
        if (qr_get(t, (const char *)key.data, key.len, &doc, &e) == QR_OK)
            http_reply_json(r, 200, &doc);
        else
            http_error_from(r, &e);
    }
    qr_buf_free(&key);
    qr_buf_free(&doc);
}

/* Does the body's primary key value equal the path's key? */
static bool same_key(const cJSON *v, const char *key_json, size_t key_len)
{
    cJSON *k = cJSON_ParseWithLength(key_json, key_len);
    bool same = false;
    if (cJSON_IsNumber(k) && cJSON_IsNumber(v))
        same = k->valuedouble == v->valuedouble;
    else if (cJSON_IsString(k) && cJSON_IsString(v))
        same = !strcmp(k->valuestring, v->valuestring);
    cJSON_Delete(k);
    return same;
}

/* Write `root` (a JSON object; its text is `text` when the caller has it,
 * else NULL) as the document with the path's key and commit: the key in
 * the path fills the primary key field when the object has none, a
 * different one is 400.  Errors are recorded on r. */
static int store_doc(HttpReq *r, QrTable *t, const QrBuf *key, cJSON *root, const char *text,
                     size_t text_len, bool *replaced)
{
    const char *pk = qr_table_schema(t)->primary_key;
    cJSON *have = cJSON_GetObjectItemCaseSensitive(root, pk);
    char *printed = NULL;
    if (have) {
        if (!same_key(have, (const char *)key->data, key->len)) {
            char *hv = cJSON_PrintUnformatted(have);
            http_error(r, QR_EINVAL, "primary key \"%s\" in the body (%.60s) differs from the "
                                     "id in the path (%.*s)",
                       pk, hv ? hv : "?", (int)(key->len > 60 ? 60 : key->len),
                       (const char *)key->data);
            http_error_hint(r, "to change a document's key, DELETE the old id and PUT the new");
            cJSON_free(hv);
            return QR_EINVAL;
        }
    } else {
        cJSON *kv = cJSON_ParseWithLength((const char *)key->data, key->len);
        if (!kv || !cJSON_AddItemToObject(root, pk, kv)) {
            cJSON_Delete(kv);
            return http_error(r, QR_ENOMEM, "out of memory");
        }
        text = NULL;
    }
    if (!text) {
        if (!(printed = cJSON_PrintUnformatted(root)))
            return http_error(r, QR_ENOMEM, "out of memory");
        text = printed;
        text_len = strlen(printed);
    }
    QrError e;
    qr_error_clear(&e);
    QrBatch *batch = NULL;
    int rc = qr_batch_begin(t, &batch, &e);
    if (rc == QR_OK)
        rc = qr_batch_put_parsed(batch, text, text_len, root, replaced, &e);
    if (rc == QR_OK)
        rc = qr_batch_commit(batch, &e);
    qr_batch_free(batch);
    cJSON_free(printed);
    if (rc != QR_OK) {
        e.offset = -1; /* positions refer to the engine's view, not the body */
        return http_error_from(r, &e);
    }
    http_metrics_table(r->srv, r->t, 0, 0, 1);
    return QR_OK;
}

/* {"id": key, "<what>": true|false} */
static void reply_id(HttpReq *r, int status, const QrBuf *key, const char *what, bool v)
{
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_append(&b, "{\"id\":", 6);
    qr_buf_append(&b, key->data, key->len);
    qr_buf_printf(&b, ",\"%s\":%s}", what, v ? "true" : "false");
    http_reply_json(r, status, &b);
}

/* PUT /tables/{t}/documents/{id}: replace (or create) one document. */
void http_docs_put(HttpReq *r)
{
    QrTable *t = http_table_get(r);
    if (!t)
        return;
    QrBuf key;
    qr_buf_init(&key);
    cJSON *root = NULL;
    bool replaced = false;
    if (!id_json(r, &key) || !(root = http_body_json(r)))
        goto out;
    if (!cJSON_IsObject(root)) {
        http_error(r, QR_EINVAL, "a document must be a JSON object");
        goto out;
    }
    if (store_doc(r, t, &key, root, (const char *)r->body.data, r->body.len, &replaced) == QR_OK)
        reply_id(r, replaced ? 200 : 201, &key, "replaced", replaced);
out:
    cJSON_Delete(root);
    qr_buf_free(&key);
}

/* RFC 7396 JSON merge patch of target by patch (an object): null removes a
 * member, an object merges into an object member, anything else replaces.
 * False on OOM. */
static bool merge_patch(cJSON *target, const cJSON *patch)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, patch)
    {
        cJSON *cur = cJSON_GetObjectItemCaseSensitive(target, m->string);
        if (cJSON_IsNull(m)) {
            cJSON_DeleteItemFromObjectCaseSensitive(target, m->string);
        } else if (cJSON_IsObject(m) && cJSON_IsObject(cur)) {
            if (!merge_patch(cur, m))
                return false;
        } else {
            cJSON *v = cJSON_Duplicate(m, true);
            if (cJSON_IsObject(v)) { /* a new object member loses its null members too */
                cJSON *clean = cJSON_CreateObject();
                if (!clean || !merge_patch(clean, v)) {
                    cJSON_Delete(clean);
                    cJSON_Delete(v);
                    return false;
                }
                cJSON_Delete(v);
                v = clean;
            }
            if (!v)
                return false;
            if (cur ? !cJSON_ReplaceItemInObjectCaseSensitive(target, m->string, v)
                    : !cJSON_AddItemToObject(target, m->string, v)) {
                cJSON_Delete(v);
                return false;
            }
        }
    }
    return true;
}

/* PATCH /tables/{t}/documents/{id}: a JSON merge patch (RFC 7396) applied
 * to the stored document, which must exist (404), then stored and
 * committed as PUT does.  PATCHes run one at a time (patch_lock), so two
 * patches of one document never lose either's change; a PUT or an upload
 * racing a PATCH of the same document is last-writer-wins. */
void http_docs_patch(HttpReq *r)
{
    QrTable *t = http_table_get(r);
    if (!t)
        return;
    QrBuf key, cur;
    qr_buf_init(&key);
    qr_buf_init(&cur);
    cJSON *patch = NULL, *doc = NULL;
    bool locked = false, replaced = false;
    if (!id_json(r, &key) || !(patch = http_body_json(r)))
        goto out;
    if (!cJSON_IsObject(patch)) {
        http_error(r, QR_EINVAL, "a PATCH body must be a JSON object (a JSON merge patch)");
        http_error_hint(r, "{\"field\": value} sets a field, {\"field\": null} removes it");
        goto out;
    }
    const char *pk = qr_table_schema(t)->primary_key;
    const cJSON *pkv = cJSON_GetObjectItemCaseSensitive(patch, pk);
    if (pkv && cJSON_IsNull(pkv)) {
        http_error(r, QR_EINVAL, "a PATCH cannot remove the primary key \"%s\"", pk);
        goto out;
    }
    pthread_mutex_lock(&r->srv->patch_lock);
    locked = true;
    QrError e;
    qr_error_clear(&e);
    if (qr_get(t, (const char *)key.data, key.len, &cur, &e) != QR_OK) {
        http_error_from(r, &e);
        if (e.code == QR_ENOTFOUND)
            http_error_hint(r, "PATCH changes a stored document; PUT creates one");
        goto out;
    }
    doc = cJSON_ParseWithLength((const char *)cur.data, cur.len);
    if (!doc || !merge_patch(doc, patch)) {
        http_error(r, QR_ENOMEM, "out of memory");
        goto out;
    }
    if (store_doc(r, t, &key, doc, NULL, 0, &replaced) == QR_OK)
        reply_id(r, 200, &key, "patched", true);
out:
    if (locked)
        pthread_mutex_unlock(&r->srv->patch_lock);
    cJSON_Delete(doc);
    cJSON_Delete(patch);
    qr_buf_free(&cur);
    qr_buf_free(&key);
}

/* DELETE /tables/{t}/documents/{id} */
void http_docs_delete(HttpReq *r)
{
    QrTable *t = http_table_get(r);
    if (!t)
        return;
    QrBuf key;
    qr_buf_init(&key);
    if (!id_json(r, &key))
        goto out;
    QrError e;
    qr_error_clear(&e);
    bool found = false;
    QrBatch *batch = NULL;
    int rc = qr_batch_begin(t, &batch, &e);
    if (rc == QR_OK)
        rc = qr_batch_delete(batch, (const char *)key.data, key.len, &found, &e);
    if (rc == QR_OK && found)
        rc = qr_batch_commit(batch, &e);
    qr_batch_free(batch);
    if (rc != QR_OK) {
        http_error_from(r, &e);
        goto out;
    }
    if (!found) {
        http_error(r, QR_ENOTFOUND, "document %.*s does not exist in table \"%s\"",
                   (int)(key.len > 100 ? 100 : key.len), (const char *)key.data, r->t);
        goto out;
    }
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_append(&b, "{\"id\":", 6);
    qr_buf_append(&b, key.data, key.len);
    qr_buf_append(&b, ",\"deleted\":true}", 16);
    http_reply_json(r, 200, &b);
out:
    qr_buf_free(&key);
}

/* POST /tables/{t}/delete_by_query {"q", "fields"?, "default_operator"?}:
 * every matching document is deleted and committed, in rounds of at most
 * max_result_window ids. */
void http_docs_delete_by_query(HttpReq *r)
{
    QrTable *t = http_table_get(r);
    if (!t)
        return;
    cJSON *root = http_body_json(r);
    if (!root)
        return;
    char *fields = NULL;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, "q");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "fields");
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(root, "default_operator");
    const cJSON *it;
    if (!cJSON_IsObject(root)) {
        http_error(r, QR_EINVAL, "request body must be a JSON object");
        goto out;
    }
    cJSON_ArrayForEach(it, root)
    {
        if (strcmp(it->string, "q") && strcmp(it->string, "fields") &&
            strcmp(it->string, "default_operator")) {
            http_error(r, QR_EINVAL, "unknown key \"%.60s\"", it->string);
            http_error_hint(r, "delete_by_query takes q, fields and default_operator");
            goto out;
        }
    }
    if (!cJSON_IsString(q) || !q->valuestring[0]) {
        http_error(r, QR_EINVAL, "\"q\" (a non-empty string) is required");
        goto out;
    }
    if (f && !cJSON_IsString(f)) {
        http_error(r, QR_EINVAL, "\"fields\" must be a string like \"title,body\"");
        goto out;
    }
    if (op && (!cJSON_IsString(op) || (strcasecmp(op->valuestring, "and") &&
                                        strcasecmp(op->valuestring, "or")))) {
        http_error(r, QR_EINVAL, "\"default_operator\" must be \"and\" or \"or\"");
        goto out;
    }
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = q->valuestring;
    req.q_len = strlen(q->valuestring);
    req.fields = f ? f->valuestring : NULL;
    req.default_and = op && !strcasecmp(op->valuestring, "and");
    req.unordered = true;
    req.limit = r->srv->cfg.max_result_window;
    req.timeout_ms = r->srv->cfg.query_timeout_ms;
    uint64_t deleted = 0, t0 = qr_now_ns();
    for (int round = 0; round < 1000000; round++) {
        QrError e;
        qr_error_clear(&e);
        QrSearchRes *res = NULL;
        if (qr_search(t, &req, &res, &e) != QR_OK) {
            http_error_from(r, &e);
            goto out;
        }
        uint64_t found = 0;
        QrBatch *batch = NULL;
        int rc = qr_batch_begin(t, &batch, &e);
        for (int h = 0; h < res->n_hits && rc == QR_OK; h++) {
            bool fnd = false;
            if (!res->hits[h].id_json)
                continue;
            rc = qr_batch_delete(batch, res->hits[h].id_json, strlen(res->hits[h].id_json),
                                 &fnd, &e);
            found += fnd;
        }
        int n_hits = res->n_hits;
        qr_search_res_free(res);
        if (rc == QR_OK && found)
            rc = qr_batch_commit(batch, &e);
        qr_batch_free(batch);
        if (rc != QR_OK) {
            http_error_from(r, &e);
            http_error_detail(r, "%llu documents were deleted before the error",
                              (unsigned long long)deleted);
            goto out;
        }
        deleted += found;
        if (n_hits < req.limit || found == 0)
            break;
    }
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_printf(&b, "{\"deleted\":%llu,\"took_ms\":%.3f}", (unsigned long long)deleted,
                  (double)(qr_now_ns() - t0) / 1e6);
    http_reply_json(r, 200, &b);
out:
    qr_free(fields);
    cJSON_Delete(root);
}
