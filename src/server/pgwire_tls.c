/*
 * pgwire_tls.c — TLS for the PostgreSQL port: an SSLRequest is answered
 * 'S' when the server has a certificate and key (--pg-tls-cert,
 * --pg-tls-key), then the handshake runs and every byte of the connection
 * goes through OpenSSL.  Without them SSLRequest gets 'N' as before.
 *
 * Layer: server/.  Calls OpenSSL (libssl), the base kit and http_client.h
 * (hc_tls_error_text).
 *
 * Sockets stay blocking: the connection waits with poll() as for plain TCP
 * and asks SSL_pending first, since OpenSSL may hold decrypted bytes the
 * socket no longer shows.  TLS 1.2 is the minimum.  The handshake must
 * finish within the startup timeout (SO_RCVTIMEO / SO_SNDTIMEO meanwhile).
 */
#include "server/http_client.h"
#include "server/pgwire_int.h"
#include "store/util.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>


int pgw_tls_ctx_new(const char *cert, const char *key, void **out, QrError *err)
{
    *out = NULL;
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        return qr_error_set(err, QR_EINTERNAL, "cannot create a TLS context");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    char why[256];
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        hc_tls_error_text(why, sizeof why);
        SSL_CTX_free(ctx);
        qr_error_set(err, QR_EINVAL, "cannot load the TLS certificate \"%s\"", cert);
        qr_error_detail(err, "%s", why);
        return QR_EINVAL;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        hc_tls_error_text(why, sizeof why);
        SSL_CTX_free(ctx);
        qr_error_set(err, QR_EINVAL, "cannot load the TLS key \"%s\"", key);
        qr_error_detail(err, "%s", why);
        qr_error_hint(err, "the key must be PEM and match the certificate");
        return QR_EINVAL;
    }
    *out = ctx;
    return QR_OK;
}

void pgw_tls_ctx_free(void *ctx) { SSL_CTX_free(ctx); }

static void set_timeouts(int fd, int timeout_ms)
{
    struct timeval tv = {.tv_sec = timeout_ms > 0 ? timeout_ms / 1000 : 0,
                         .tv_usec = timeout_ms > 0 ? (timeout_ms % 1000) * 1000 : 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

bool pgw_tls_accept(PgConn *c, void *ctx, int timeout_ms)
{
    SSL *ssl = SSL_new(ctx);
    if (!ssl)
        return false;
    SSL_set_fd(ssl, c->fd);
    set_timeouts(c->fd, timeout_ms);
    int rc = SSL_accept(ssl);
    set_timeouts(c->fd, 0);
    if (rc != 1) {
        char why[256];
        hc_tls_error_text(why, sizeof why);
        qr_log(QR_LOG_INFO, "pg TLS handshake failed: %s", why);
        SSL_free(ssl);
        return false;
    }
    c->ssl = ssl;
    return true;
}

ssize_t pgw_conn_recv(PgConn *c, void *buf, size_t n)
{
    if (!c->ssl)
        return recv(c->fd, buf, n, 0);
    int rc = SSL_read(c->ssl, buf, n > INT32_MAX ? INT32_MAX : (int)n);
    if (rc > 0)
        return rc;
    int e = SSL_get_error(c->ssl, rc);
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        errno = EAGAIN;
        return -1;
    }
    return e == SSL_ERROR_ZERO_RETURN ? 0 : -1;
}

ssize_t pgw_conn_send(PgConn *c, const void *buf, size_t n)
{
    if (!c->ssl)
        return send(c->fd, buf, n, MSG_NOSIGNAL);
    int rc = SSL_write(c->ssl, buf, n > INT32_MAX ? INT32_MAX : (int)n);
    if (rc > 0)
        return rc;
    ERR_clear_error();
    return -1;
}

bool pgw_conn_pending(const PgConn *c) { return c->ssl && SSL_pending(c->ssl) > 0; }

void pgw_tls_close(PgConn *c)
{
    if (!c->ssl)
        return;
    SSL_shutdown(c->ssl);
    SSL_free(c->ssl);
    c->ssl = NULL;
    ERR_clear_error();
}
