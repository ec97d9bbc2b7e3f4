/*
 * http_config.c — HttpConfig defaults, the JSON config file and flag
 * overrides.  The keys are one table (HTTP_CONFIG_KEYS) that drives parsing,
 * range checks and the error messages; docs/http-api.md lists the same keys.
 *
 * Layer: server/.  Calls the base kit and cJSON.
 *
 * Config file (every key optional):
 *   {"http": "127.0.0.1:8080", "threads": 0, "max_body_bytes": 1048576,
 *    "max_ingest_bytes": 4294967296, "query_timeout_ms": 10000, ...}
 */
#include "server/http.h"
#include "store/mem.h"
#include "store/util.h"

#include <cJSON.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { CK_STR, CK_INT, CK_U64, CK_BOOL } ConfKind;

typedef struct ConfKey {
    const char *name;
    ConfKind kind;
    size_t off;          /* offsetof(HttpConfig, field) */
    double min, max;     /* numbers only */
    const char *what;    /* one line for messages */
    size_t cap;          /* strings only: the field's size */
} ConfKey;

#define OFF(f) offsetof(HttpConfig, f)
#define CAP(f) sizeof(((HttpConfig *)0)->f)
static const ConfKey HTTP_CONFIG_KEYS[] = {
    {"http", CK_STR, OFF(http), 0, 0, "listen address HOST:PORT", CAP(http)},
    {"threads", CK_INT, OFF(threads), 0, 256,
     "indexing threads of uploads and COPY (0 = the machine's cores)"},
    {"index_memory_bytes", CK_U64, OFF(index_memory_bytes), 0, 1e15,
     "indexing memory of uploads and COPY (0 = an eighth of the machine's)"},
    {"max_body_bytes", CK_U64, OFF(max_body_bytes), 1024, 1e12, "largest JSON request body"},
    {"max_ingest_bytes", CK_U64, OFF(max_ingest_bytes), 1024, 1e15,
     "largest JSONL upload (after gunzip)"},
    {"max_line_bytes", CK_U64, OFF(max_line_bytes), 1024, 1e10, "longest JSONL line"},
    {"max_gzip_ratio", CK_INT, OFF(max_gzip_ratio), 0, 100000,
     "how many times gunzip may multiply an upload (0 = no limit)"},
    {"max_ingests", CK_INT, OFF(max_ingests), 1, 10000, "uploads running at once"},
    {"query_timeout_ms", CK_U64, OFF(query_timeout_ms), 0, 864e5, "search time limit"},
    {"query_mem_bytes", CK_U64, OFF(query_mem_bytes), 0, 1e12, "search memory limit"},
    {"mem_limit_bytes", CK_U64, OFF(mem_limit_bytes), 0, 1e15,
     "memory of all running queries (0 = a quarter of the machine's)"},
    {"max_result_window", CK_INT, OFF(max_result_window), 1, 1000000000,
     "largest offset + limit"},
    {"max_query_terms", CK_INT, OFF(max_query_terms), 1, 100000, "words in a text query"},
    {"max_connections", CK_INT, OFF(max_connections), 1, 1000000, "open connections"},
    {"max_connections_per_ip", CK_INT, OFF(max_connections_per_ip), 0, 1000000,
     "connections from one client address (0 = no limit)"},
    {"header_timeout_s", CK_INT, OFF(header_timeout_s), 1, 3600,
     "time to send a request's headers"},
    {"idle_timeout_s", CK_INT, OFF(idle_timeout_s), 1, 86400, "keep-alive idle timeout"},
    {"shutdown_timeout_s", CK_INT, OFF(shutdown_timeout_s), 0, 3600,
     "wait for running requests on shutdown"},
    {"history_size", CK_INT, OFF(history_size), 1, 100000, "recent queries kept"},
    {"log_requests", CK_BOOL, OFF(log_requests), 0, 0, "one log line per request"},
    {"allow_remote", CK_BOOL, OFF(allow_remote), 0, 0,
     "listen beyond loopback without API keys"},
    {"allowed_hosts", CK_STR, OFF(allowed_hosts), 0, 0,
     "host names Host and Origin may name without API keys", CAP(allowed_hosts)},
    {"cors_origins", CK_STR, OFF(cors_origins), 0, 0,
     "origins whose pages may call the API (CORS), comma-separated", CAP(cors_origins)},
    {"tls_cert", CK_STR, OFF(tls_cert), 0, 0, "PEM certificate file for HTTPS", CAP(tls_cert)},
    {"tls_key", CK_STR, OFF(tls_key), 0, 0, "PEM private key file for HTTPS", CAP(tls_key)},
};
#define N_KEYS (int)(sizeof HTTP_CONFIG_KEYS / sizeof HTTP_CONFIG_KEYS[0])

void http_config_default(HttpConfig *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->http, sizeof c->http, "127.0.0.1:8080");
    c->threads = 0;
    c->max_body_bytes = 1u << 20;
    c->max_ingest_bytes = 4ull << 30;
    c->max_line_bytes = 16u << 20;
    c->max_gzip_ratio = 100;
    c->max_ingests = 4;
    c->query_timeout_ms = 10000;
    c->query_mem_bytes = 0;
    c->max_result_window = 10000;
    c->max_query_terms = 1024;
    c->max_connections = 512;
    c->max_connections_per_ip = 128;
    c->header_timeout_s = 10;
    c->idle_timeout_s = 60;
    c->shutdown_timeout_s = 30;
    c->history_size = 200;
    c->log_requests = true;
    c->allow_remote = false;
}

static const ConfKey *key_find(const char *name)
{
    for (int i = 0; i < N_KEYS; i++)
        if (!strcmp(HTTP_CONFIG_KEYS[i].name, name))
            return &HTTP_CONFIG_KEYS[i];
    return NULL;
}

static int unknown_key(const char *name, QrError *err)
{
    qr_error_set(err, QR_EINVAL, "unknown server setting \"%.80s\"", name);
    char list[512] = "";
    for (int i = 0; i < N_KEYS; i++) {
        if (i)
            strncat(list, ", ", sizeof list - strlen(list) - 1);
        strncat(list, HTTP_CONFIG_KEYS[i].name, sizeof list - strlen(list) - 1);
    }
    qr_error_hint(err, "settings: %s", list);
    return QR_EINVAL;
}

static int set_number(HttpConfig *c, const ConfKey *k, double v, QrError *err)
{
    if (v != (double)(long long)v || v < k->min || v > k->max) {
        qr_error_set(err, QR_EINVAL, "setting \"%s\" (%s) must be a whole number from %.0f to %.0f",
                     k->name, k->what, k->min, k->max);
        return QR_EINVAL;
    }
    char *p = (char *)c + k->off;
    if (k->kind == CK_INT)
        *(int *)p = (int)v;
    else
        *(uint64_t *)p = (uint64_t)v;
    return QR_OK;
}

int http_config_set(HttpConfig *c, const char *key, const char *value, QrError *err)
{
    const ConfKey *k = key_find(key);
    if (!k)
        return unknown_key(key, err);
    char *p = (char *)c + k->off;
    switch (k->kind) {
    case CK_STR:
        if (strlen(value) >= k->cap)
            return qr_error_set(err, QR_EINVAL, "setting \"%s\" is too long", key);
        snprintf(p, k->cap, "%s", value);
        return QR_OK;
    case CK_BOOL:
        if (!strcmp(value, "true") || !strcmp(value, "1"))
            *(bool *)p = true;
        else if (!strcmp(value, "false") || !strcmp(value, "0"))
            *(bool *)p = false;
        else
            return qr_error_set(err, QR_EINVAL, "setting \"%s\" must be true or false", key);
        return QR_OK;
    default: {
        char *end;
        errno = 0;
        double v = strtod(value, &end);
        if (errno || end == value || *end)
            return qr_error_set(err, QR_EINVAL, "setting \"%s\" must be a number, not \"%.40s\"",
                                key, value);
        return set_number(c, k, v, err);
    }
    }
}

int http_config_load(const char *path, HttpConfig *c, QrError *err)
{
    uint8_t *txt = NULL;
    size_t n = 0;
    int rc = qr_file_read_all(path, &txt, &n, err);
    if (rc != QR_OK)
        return rc;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts((const char *)txt, n, &end, false);
    if (root && end) {
        while (end < (const char *)txt + n && (*end == ' ' || *end == '\t' || *end == '\r' ||
                                              *end == '\n'))
            end++;
        if (end < (const char *)txt + n) {
            cJSON_Delete(root);
            root = NULL;
        }
    }
    if (!root || !cJSON_IsObject(root)) {
        qr_error_set(err, QR_ESYNTAX, "config file \"%s\" is not a JSON object", path);
        if (!root && end)
            qr_error_detail(err, "syntax error near byte %ld", (long)(end - (const char *)txt) + 1);
        cJSON_Delete(root);
        qr_free(txt);
        return QR_ESYNTAX;
    }
    rc = QR_OK;
    const cJSON *it;
    cJSON_ArrayForEach(it, root)
    {
        const ConfKey *k = key_find(it->string);
        if (!k) {
            rc = unknown_key(it->string, err);
            break;
        }
        char *p = (char *)c + k->off;
        if (k->kind == CK_STR) {
            if (!cJSON_IsString(it) || strlen(it->valuestring) >= k->cap) {
                rc = qr_error_set(err, QR_EINVAL, "setting \"%s\" must be a string (%s)",
                                  k->name, k->what);
                break;
            }
            snprintf(p, k->cap, "%s", it->valuestring);
        } else if (k->kind == CK_BOOL) {
            if (!cJSON_IsBool(it)) {
                rc = qr_error_set(err, QR_EINVAL, "setting \"%s\" must be true or false",
                                  k->name);
                break;
            }
            *(bool *)p = cJSON_IsTrue(it);
        } else {
            if (!cJSON_IsNumber(it)) {
                rc = qr_error_set(err, QR_EINVAL, "setting \"%s\" must be a number (%s)",
                                  k->name, k->what);
                break;
            }
            if ((rc = set_number(c, k, it->valuedouble, err)) != QR_OK)
                break;
        }
    }
    if (rc != QR_OK)
        qr_error_detail(err, "in config file \"%s\"", path);
    cJSON_Delete(root);
    qr_free(txt);
    return rc;
}
