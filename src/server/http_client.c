/*
 * http_client.c — one HTTP/1.1 POST per connection to another Quarry node
 * (http_client.h), plain or over TLS.
 *
 * Layer: server/.  Calls libc sockets, OpenSSL (libssl) and the base kit.
 *
 * The socket is non-blocking from the start and every step waits in
 * poll() for what remains of the one deadline, so a peer that accepts and
 * then says nothing costs at most timeout_ms.  With TLS, OpenSSL's
 * WANT_READ / WANT_WRITE say which way to wait.  The request says
 * "Connection: close"; the answer is read to its Content-Length, through
 * its chunks, or to the end of the stream, and never beyond max_bytes.
 */
#include "server/http_client.h"
#include "query/quarry.h"
#include "store/mem.h"
#include "store/util.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

struct HcClient {
    SSL_CTX *tls; /* owns: client context, certificates verified */
};

int hc_url_parse(const char *s, size_t n, HcUrl *u, QrError *err)
{
    memset(u, 0, sizeof *u);
    while (n > 0 && s[n - 1] == '/')
        n--;
    if (n >= sizeof u->text)
        return qr_error_set(err, QR_EINVAL, "peer URL is too long (at most %zu bytes)",
                            sizeof u->text - 1);
    memcpy(u->text, s, n);
    const char *p = u->text, *end = u->text + n;
    if (!strncasecmp(p, "http://", 7)) {
        p += 7;
    } else if (!strncasecmp(p, "https://", 8)) {
        p += 8;
        u->tls = true;
    } else {
        qr_error_set(err, QR_EINVAL, "peer URL \"%s\" is not an http:// or https:// URL", u->text);
        qr_error_hint(err, "give the HTTP base URL of the other node, as http://10.0.0.2:8080");
        return QR_EINVAL;
    }
    const char *auth_end = p;
    while (auth_end < end && *auth_end != '/')
        auth_end++;
    if (memchr(u->text, '?', n) || memchr(u->text, '#', n) || memchr(p, '@', (size_t)(auth_end - p)))
        return qr_error_set(err, QR_EINVAL,
                            "peer URL \"%s\" may not carry a query, a fragment or credentials",
                            u->text);
    const char *h = p, *he = auth_end, *port = NULL;
    if (*h == '[') { /* [v6]:port */
        const char *rb = memchr(h, ']', (size_t)(auth_end - h));
        if (!rb)
            return qr_error_set(err, QR_EINVAL, "peer URL \"%s\": unclosed '[' in the host",
                                u->text);
        if (rb + 1 < auth_end && rb[1] == ':')
            port = rb + 2;
        else if (rb + 1 != auth_end)
            return qr_error_set(err, QR_EINVAL, "peer URL \"%s\": bad host", u->text);
        h++;
        he = rb;
    } else {
        const char *colon = memchr(h, ':', (size_t)(auth_end - h));
        if (colon) {
            he = colon;
            port = colon + 1;
        }
    }
    if (he == h || (size_t)(he - h) >= sizeof u->host)
        return qr_error_set(err, QR_EINVAL, "peer URL \"%s\" has no host", u->text);
    memcpy(u->host, h, (size_t)(he - h));
    if (port) {
        size_t pl = (size_t)(auth_end - port);
        long v = 0;
        for (size_t i = 0; i < pl && v <= 65535; i++)
            v = port[i] >= '0' && port[i] <= '9' ? v * 10 + (port[i] - '0') : 70000;
        if (pl == 0 || v < 1 || v > 65535)
            return qr_error_set(err, QR_EINVAL, "peer URL \"%s\": the port must be 1 to 65535",
                                u->text);
        snprintf(u->port, sizeof u->port, "%ld", v);
    } else {
        snprintf(u->port, sizeof u->port, "%s", u->tls ? "443" : "80");
    }
    if ((size_t)(end - auth_end) >= sizeof u->prefix)
        return qr_error_set(err, QR_EINVAL, "peer URL \"%s\": path too long", u->text);
    memcpy(u->prefix, auth_end, (size_t)(end - auth_end));
    return QR_OK;
}

void hc_tls_error_text(char *out, size_t cap)
{
    unsigned long e = ERR_get_error();
    if (e)
        ERR_error_string_n(e, out, cap);
    else
        snprintf(out, cap, "unknown TLS error");
    ERR_clear_error();
}

int hc_client_new(const char *ca_file, HcClient **out, QrError *err)
{
    *out = NULL;
    HcClient *c = qr_calloc(1, sizeof *c);
    if (!c)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    if (!(c->tls = SSL_CTX_new(TLS_client_method()))) {
        qr_free(c);
        return qr_error_set(err, QR_EINTERNAL, "cannot create a TLS context");
    }
    SSL_CTX_set_min_proto_version(c->tls, TLS1_2_VERSION);
    SSL_CTX_set_verify(c->tls, SSL_VERIFY_PEER, NULL);
    int ok = ca_file ? SSL_CTX_load_verify_locations(c->tls, ca_file, NULL)
                     : SSL_CTX_set_default_verify_paths(c->tls);
    if (ok != 1) {
        char why[256];
        hc_tls_error_text(why, sizeof why);
        hc_client_free(c);
        qr_error_set(err, QR_EINVAL, "cannot load the certificate authorities \"%s\"",
                     ca_file ? ca_file : "(system default)");
        qr_error_detail(err, "%s", why);
        return QR_EINVAL;
    }
    *out = c;
    return QR_OK;
}

void hc_client_free(HcClient *c)
{
    if (!c)
        return;
    SSL_CTX_free(c->tls);
    qr_free(c);
}

/* One connection: the socket, TLS when asked, and the deadline. */
typedef struct Conn {
    int fd;
    SSL *ssl;             /* owns, NULL for plain HTTP */
    uint64_t deadline_ns;
    QrError *err;
    const HcUrl *u;
} Conn;

static int unavailable(Conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int unavailable(Conn *c, const char *fmt, ...)
{
    qr_error_set(c->err, QR_EUNAVAILABLE, "could not reach \"%s\"", c->u->text);
    va_list ap;
    va_start(ap, fmt);
    char d[256];
    vsnprintf(d, sizeof d, fmt, ap);
    va_end(ap);
    qr_error_detail(c->err, "%s", d);
    return QR_EUNAVAILABLE;
}

/* Wait until fd is ready for events or the deadline passed. */
static int wait_fd(Conn *c, short events, const char *what)
{
    for (;;) {
        uint64_t now = qr_now_ns();
        if (now >= c->deadline_ns)
            return unavailable(c, "no answer in time (%s)", what);
        uint64_t ms = (c->deadline_ns - now + 999999) / 1000000;
        struct pollfd p = {.fd = c->fd, .events = events};
        int n = poll(&p, 1, ms > 60000 ? 60000 : (int)ms);
        if (n > 0)
            return QR_OK;
        if (n < 0 && errno != EINTR)
            return unavailable(c, "poll: %s", strerror(errno));
    }
}

static int conn_open(Conn *c, HcClient *cl)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(c->u->host, c->u->port, &hints, &ai);
    if (g != 0)
        return unavailable(c, "cannot resolve \"%s\": %s", c->u->host, gai_strerror(g));
    int last = 0;
    for (struct addrinfo *a = ai; a && c->fd < 0; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            last = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
            last = errno;
            close(fd);
            continue;
        }
        c->fd = fd;
        if (wait_fd(c, POLLOUT, "connect") != QR_OK) {
            close(fd);
            c->fd = -1;
            freeaddrinfo(ai);
            return QR_EUNAVAILABLE;
        }
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
            last = soerr ? soerr : errno;
            close(fd);
            c->fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (c->fd < 0)
        return unavailable(c, "connect: %s", strerror(last ? last : ECONNREFUSED));
    if (!c->u->tls)
        return QR_OK;
    if (!(c->ssl = SSL_new(cl->tls)) || SSL_set_fd(c->ssl, c->fd) != 1 ||
        SSL_set_tlsext_host_name(c->ssl, c->u->host) != 1 || SSL_set1_host(c->ssl, c->u->host) != 1)
        return unavailable(c, "cannot set up TLS");
    for (;;) {
        int r = SSL_connect(c->ssl);
        if (r == 1)
            return QR_OK;
        int e = SSL_get_error(c->ssl, r);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            if (wait_fd(c, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, "TLS handshake"))
                return QR_EUNAVAILABLE;
            continue;
        }
        char why[256];
        long v = SSL_get_verify_result(c->ssl);
        if (v != X509_V_OK)
            snprintf(why, sizeof why, "%s", X509_verify_cert_error_string(v));
        else
            hc_tls_error_text(why, sizeof why);
        return unavailable(c, "TLS handshake: %s", why);
    }
}

static int conn_write(Conn *c, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w;
        if (c->ssl) {
            int r = SSL_write(c->ssl, p, n > (1u << 30) ? 1 << 30 : (int)n);
            if (r <= 0) {
                int e = SSL_get_error(c->ssl, r);
                if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                    return unavailable(c, "TLS write failed");
                if (wait_fd(c, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, "send"))
                    return QR_EUNAVAILABLE;
                continue;
            }
            w = r;
        } else {
            w = send(c->fd, p, n, MSG_NOSIGNAL);
            if (w < 0) {
                if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                    return unavailable(c, "send: %s", strerror(errno));
                if (wait_fd(c, POLLOUT, "send"))
                    return QR_EUNAVAILABLE;
                continue;
            }
        }
        p += w;
        n -= (size_t)w;
    }
    return QR_OK;
}

/* Up to cap bytes into buf; *got 0 at the end of the stream. */
static int conn_read(Conn *c, char *buf, size_t cap, size_t *got)
{
    for (;;) {
        if (c->ssl) {
            int r = SSL_read(c->ssl, buf, cap > (1u << 30) ? 1 << 30 : (int)cap);
            if (r > 0) {
                *got = (size_t)r;
                return QR_OK;
            }
            int e = SSL_get_error(c->ssl, r);
            if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && r == 0)) {
                *got = 0;
                return QR_OK;
            }
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                return unavailable(c, "TLS read failed");
            if (wait_fd(c, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, "answer"))
                return QR_EUNAVAILABLE;
            continue;
        }
        ssize_t r = recv(c->fd, buf, cap, 0);
        if (r >= 0) {
            *got = (size_t)r;
            return QR_OK;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return unavailable(c, "recv: %s", strerror(errno));
        if (wait_fd(c, POLLIN, "answer"))
            return QR_EUNAVAILABLE;
    }
}

static void conn_close(Conn *c)
{
    if (c->ssl) {
        SSL_shutdown(c->ssl);
        SSL_free(c->ssl);
    }
    if (c->fd >= 0)
        close(c->fd);
}

/* The value of header `name` in the head [h, e), or NULL; *vl its length. */
static const char *head_value(const char *h, const char *e, const char *name, size_t *vl)
{
    size_t nl = strlen(name);
    for (const char *p = h; p < e;) {
        const char *eol = memchr(p, '\n', (size_t)(e - p));
        if (!eol)
            eol = e;
        if ((size_t)(eol - p) > nl && !strncasecmp(p, name, nl) && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = eol;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' '))
                ve--;
            *vl = (size_t)(ve - v);
            return v;
        }
        p = eol + 1;
    }
    return NULL;
}

/* Decode a chunked body b[0, n) into out; false when malformed. */
static bool dechunk(const char *b, size_t n, QrBuf *out)
{
    size_t i = 0;
    for (;;) {
        char *end;
        if (i >= n)
            return false;
        unsigned long long sz = strtoull(b + i, &end, 16);
        if (end == b + i)
            return false;
        const char *crlf = memchr(end, '\n', n - (size_t)(end - b));
        if (!crlf)
            return false;
        i = (size_t)(crlf - b) + 1;
        if (sz == 0)
            return true;
        if (sz > n - i)
            return false;
        qr_buf_append(out, b + i, (size_t)sz);
        i += (size_t)sz;
        if (i + 2 > n || b[i] != '\r' || b[i + 1] != '\n')
            return false;
        i += 2;
    }
}

int hc_post_json(HcClient *cl, const HcUrl *u, const char *path, const char *bearer,
                 const char *body, size_t len, uint32_t timeout_ms, size_t max_bytes,
                 int *status, QrBuf *resp, QrError *err)
{
    Conn c = {.fd = -1, .deadline_ns = qr_now_ns() + (uint64_t)timeout_ms * 1000000ull,
              .err = err, .u = u};
    *status = 0;
    QrBuf req, in;
    qr_buf_init(&req);
    qr_buf_init(&in);
    bool v6 = strchr(u->host, ':') != NULL;
    qr_buf_printf(&req,
                  "POST %s%s HTTP/1.1\r\nHost: %s%s%s:%s\r\nContent-Type: application/json\r\n"
                  "Content-Length: %zu\r\nConnection: close\r\nUser-Agent: quarry/%s\r\n",
                  u->prefix, path, v6 ? "[" : "", u->host, v6 ? "]" : "", u->port, len,
                  QUARRY_VERSION);
    if (bearer)
        qr_buf_printf(&req, "Authorization: Bearer %s\r\n", bearer);
    qr_buf_append(&req, "\r\n", 2);
    qr_buf_append(&req, body, len);
    int rc = conn_open(&c, cl);
    if (rc == QR_OK)
        rc = conn_write(&c, (const char *)req.data, req.len);
    size_t head_len = 0, want = SIZE_MAX;
    bool chunked = false;
    while (rc == QR_OK) {
        char buf[16384];
        size_t got;
        if ((rc = conn_read(&c, buf, sizeof buf, &got)) != QR_OK)
            break;
        if (got == 0)
            break;
        qr_buf_append(&in, buf, got);
        if (in.len > max_bytes + 65536) {
            rc = unavailable(&c, "answer larger than %zu bytes", max_bytes);
            break;
        }
        if (!head_len) {
            const char *d = memmem(in.data, in.len, "\r\n\r\n", 4);
            if (!d)
                continue;
            head_len = (size_t)(d - (const char *)in.data) + 4;
            size_t vl;
            const char *h = (const char *)in.data, *he = h + head_len;
            const char *te = head_value(h, he, "Transfer-Encoding", &vl);
            chunked = te && vl >= 7 && !strncasecmp(te + vl - 7, "chunked", 7);
            const char *cl_v = head_value(h, he, "Content-Length", &vl);
            if (cl_v && !chunked)
                want = (size_t)strtoull(cl_v, NULL, 10);
        }
        if (head_len && want != SIZE_MAX && in.len - head_len >= want)
            break;
    }
    if (rc == QR_OK) {
        const char *h = (const char *)in.data;
        int major, minor, st;
        if (!head_len || sscanf(h, "HTTP/%d.%d %d", &major, &minor, &st) != 3 || st < 100 ||
            st > 599)
            rc = unavailable(&c, "not an HTTP answer");
        else if (want != SIZE_MAX && in.len - head_len < want)
            rc = unavailable(&c, "the answer ended early");
        else if (chunked && !dechunk(h + head_len, in.len - head_len, resp))
            rc = unavailable(&c, "malformed chunked answer");
        else {
            if (!chunked)
                qr_buf_append(resp, h + head_len, want != SIZE_MAX ? want : in.len - head_len);
            *status = st;
        }
    }
    conn_close(&c);
    qr_buf_free(&req);
    qr_buf_free(&in);
    return rc;
}
