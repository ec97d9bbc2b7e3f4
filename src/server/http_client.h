/*
 * http_client.h — a small HTTP/1.1 client for the requests one Quarry node
 * makes of another (server/peers.c): one POST of a JSON body per
 * connection, plain or TLS, bounded in time and size.
 *
 * Layer: server/.  Calls libc sockets, OpenSSL (libssl) and the base kit.
 *
 * Errors: QR_EINVAL for a malformed URL or CA file; QR_EUNAVAILABLE when
 * the other side cannot be reached or answers nothing usable (the detail
 * says what happened: resolution, connect, TLS, timeout, a malformed or
 * oversized answer).  An HTTP error status is not an error here: the
 * caller reads *status and the body.
 */
#ifndef QR_HTTP_CLIENT_H
#define QR_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/buf.h"
#include "store/error.h"

/* A base URL "http[s]://host[:port][/prefix]" split up. */
typedef struct HcUrl {
    bool tls;
    char host[256];      /* without IPv6 brackets */
    char port[8];        /* "80" / "443" by default */
    char prefix[256];    /* "" or "/path" without a trailing '/' */
    char text[600];      /* the URL as given (trailing '/' dropped), for messages */
} HcUrl;

/* Parse s[0, n) into *u.  QR_EINVAL naming the URL when it is not an
 * http:// or https:// URL with a host, a numeric port, no query or
 * fragment and no credentials. */
int hc_url_parse(const char *s, size_t n, HcUrl *u, QrError *err);

typedef struct HcClient HcClient;
/* A client: TLS connections verify the server's certificate chain against
 * ca_file (PEM; NULL: the system's CAs) and its name against the URL's
 * host.  QR_EINVAL when ca_file cannot be loaded, QR_ENOMEM. */
int hc_client_new(const char *ca_file, HcClient **out, QrError *err);
void hc_client_free(HcClient *c); /* NULL is a no-op */

/* POST body[0, len) as application/json to u's prefix + path (path starts
 * with '/'), with "Authorization: Bearer <bearer>" when bearer is not NULL;
 * the whole exchange (resolve, connect, TLS, send, answer) within
 * timeout_ms.  *status gets the HTTP status and resp (appended to) the
 * answer's body, at most max_bytes.  Thread-safe. */
int hc_post_json(HcClient *c, const HcUrl *u, const char *path, const char *bearer,
                 const char *body, size_t len, uint32_t timeout_ms, size_t max_bytes,
                 int *status, QrBuf *resp, QrError *err);

/* OpenSSL's first queued error as text into out[cap] (or "unknown TLS
 * error"), the queue cleared: what a TLS failure's detail says. */
void hc_tls_error_text(char *out, size_t cap);

#endif
