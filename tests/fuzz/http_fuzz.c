/*
 * http_fuzz.c — libFuzzer target for the HTTP request handlers
 * (src/server/http*.c behind libmicrohttpd), driven through a real server
 * started in-process on a loopback port.
 *
 * Byte 0 picks the mode:
 *   odd   the rest is sent as raw bytes (request line, headers, body);
 *   even  a well-formed request is built: byte 1 picks the method and route
 *         template, byte 2 the content type, and the rest is the body (and,
 *         up to the first newline, a path/query suffix).
 * Every request runs against a table "t" with typed columns and a few
 * documents (rebuilt if a request dropped it).  Promises checked beyond "no
 * crash, no leak, no hang": the server answers with an HTTP status line (or
 * closes a garbage connection), and every 4xx/5xx answer of a JSON route
 * carries a JSON error object.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "query/quarry.h"
#include "server/http.h"
#include "store/util.h"

static QrDb *db;
static HttpServer *srv;
static int port;

static const char *ROUTES[][2] = {
    {"GET", "/tables/t/search?q="},      {"POST", "/tables/t/search"},
    {"POST", "/tables/t/documents"},     {"PUT", "/tables/t/documents/"},
    {"GET", "/tables/t/documents/"},     {"DELETE", "/tables/t/documents/"},
    {"POST", "/sql"},                    {"GET", "/tables/t"},
    {"POST", "/tables"},                 {"POST", "/tables/t/delete_by_query"},
    {"GET", "/stats/queries"},           {"GET", "/metrics"},
    {"POST", "/tables/t/flush"},         {"GET", "/health"},
    {"DELETE", "/tables/"},              {"GET", "/tables/t/search?filter="},
    {"POST", "/tables/t/bm25_stats"},
};
#define N_ROUTES (sizeof ROUTES / sizeof ROUTES[0])
static const char *CTYPES[] = {"application/json", "application/x-ndjson", "text/plain", ""};

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* One request; the answer (NUL-terminated, truncated at cap) in out.  A
 * well-formed request (must_answer) must be answered within 20 s; after the
 * first bytes, a 1 s silence ends the read (a keep-alive connection). */
static size_t roundtrip(const char *req, size_t len, char *out, size_t cap, bool must_answer)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    size_t got = 0;
    if (send_all(fd, req, len) == 0) {
        shutdown(fd, SHUT_WR);
        for (;;) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            int pr = poll(&p, 1, got ? 1000 : must_answer ? 20000 : 3000);
            if (pr <= 0) {
                CHECK(got || !must_answer); /* a well-formed request is answered */
                break;
            }
            ssize_t r = recv(fd, out + got, cap - 1 - got, 0);
            if (r <= 0)
                break;
            got += (size_t)r;
            if (got == cap - 1)
                break;
        }
    }
    out[got] = '\0';
    close(fd);
    return got;
}

static void http_simple(const char *method, const char *path, const char *body)
{
    char req[4096], out[8192];
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     method, path, strlen(body), body);
    roundtrip(req, (size_t)n, out, sizeof out, true);
}

static void fixture(void)
{
    QrTable *t;
    QrError e;
    qr_error_clear(&e);
    if (qr_table_get(db, "t", &t, &e) == QR_OK)
        return;
    http_simple("POST", "/tables",
                "{\"name\":\"t\",\"schema\":{\"primary_key\":\"id\",\"fields\":["
                "{\"name\":\"body\",\"type\":\"text\"},{\"name\":\"tag\",\"type\":\"keyword\"},"
                "{\"name\":\"n\",\"type\":\"int\"},{\"name\":\"at\",\"type\":\"timestamp\"}]}}");
    char body[2048] = "";
    for (int i = 0; i < 20; i++) {
        char line[128];
        snprintf(line, sizeof line,
                 "{\"id\":%d,\"body\":\"river power %d bank\",\"tag\":\"g%d\",\"n\":%d,"
                 "\"at\":\"2025-01-%02dT00:00:00Z\"}\n", i, i, i % 3, i * 7, 1 + i);
        strcat(body, line);
    }
    char req[4096], out[8192];
    int n = snprintf(req, sizeof req,
                     "POST /tables/t/documents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     "application/x-ndjson\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     strlen(body), body);
    roundtrip(req, (size_t)n, out, sizeof out, true);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    db = fz_db_open();
    QrError e;
    qr_error_clear(&e);
    HttpConfig cfg;
    http_config_default(&cfg);
    CHECK(http_config_set(&cfg, "http", "127.0.0.1:0", &e) == QR_OK);
    CHECK(http_config_set(&cfg, "log_requests", "false", &e) == QR_OK);
    CHECK(http_config_set(&cfg, "max_body_bytes", "65536", &e) == QR_OK);
    CHECK(http_config_set(&cfg, "query_timeout_ms", "500", &e) == QR_OK);
    CHECK(http_server_start(db, &cfg, &srv, &e) == QR_OK);
    const char *addr = http_server_addr(srv);
    const char *colon = strrchr(addr, ':');
    CHECK(colon);
    port = atoi(colon + 1);
    fixture();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 16384)
        return 0;
    static char req[20000], out[65536];
    size_t len;
    bool raw = data[0] & 1;
    if (raw) {
        memcpy(req, data + 1, size - 1);
        len = size - 1;
    } else {
        FzIn in = {data + 1, size - 1, 0};
        const char *const *rt = ROUTES[fz_u8(&in) % N_ROUTES];
        const char *ct = CTYPES[fz_u8(&in) % 4];
        const uint8_t *rest = data + 1 + in.off;
        size_t n_rest = size - 1 - in.off;
        const uint8_t *nl = memchr(rest, '\n', n_rest < 200 ? n_rest : 200);
        size_t n_path = nl ? (size_t)(nl - rest) : 0;
        char path[512];
        size_t pl = 0;
        for (size_t i = 0; i < n_path && pl < sizeof path - 4; i++) {
            uint8_t c = rest[i];
            if (c > 32 && c < 127 && c != '%' && c != '#') {
                path[pl++] = (char)c;
            } else {
                pl += (size_t)snprintf(path + pl, sizeof path - pl, "%%%02X", c);
            }
        }
        path[pl] = '\0';
        const uint8_t *body = nl ? nl + 1 : rest;
        size_t n_body = nl ? n_rest - n_path - 1 : n_rest;
        int h = snprintf(req, sizeof req,
                         "%s %s%s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%sContent-Length: %zu\r\n"
                         "Connection: close\r\n\r\n",
                         rt[0], rt[1], path, *ct ? "Content-Type: " : "", ct, *ct ? "\r\n" : "",
                         n_body);
        memcpy(req + h, body, n_body);
        len = (size_t)h + n_body;
    }
    size_t got = roundtrip(req, len, out, sizeof out, !raw);
    if (got) {
        CHECK(!strncmp(out, "HTTP/1.", 7));
        int status = atoi(out + 9);
        CHECK(status >= 100 && status < 600);
        const char *hdr_end = strstr(out, "\r\n\r\n");
        bool json = hdr_end && strcasestr(out, "content-type: application/json") &&
                    strcasestr(out, "content-type: application/json") < hdr_end;
        if (!raw && status >= 400 && json)
            CHECK(strstr(hdr_end, "\"error\""));
    }
    fixture();
    return 0;
}
