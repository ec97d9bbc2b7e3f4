/*
 * http_conn.c — the HTTP server's connections: the per-client and global
 * limits and the header and keep-alive deadlines of conn_guard.h, applied
 * through libmicrohttpd's callbacks, and the thread that enforces the
 * deadlines.
 *
 * Layer: server/.  Calls server/conn_guard.h, libmicrohttpd and the base
 * kit.
 *
 * The server runs one thread per connection (http.c), so a long statement
 * holds only its own connection; what is left to defend is the number of
 * connections and how long each may keep the server waiting:
 *
 *   accepted        NOTIFY_CONNECTION STARTED (the listening thread):
 *                   refused when its client is at max_connections_per_ip
 *                   (503 written, socket shut); else WAITING with a
 *                   deadline of header_timeout_s, possibly evicting the
 *                   connection WAITING longest when max_connections are live
 *   request line    uri_log: the deadline becomes at most header_timeout_s
 *                   from now (a keep-alive connection's next request)
 *   headers in      first access call: BUSY, no deadline (the body and the
 *                   handler are bounded by idle_timeout_s and the query
 *                   limits); a connection kicked meanwhile is dropped
 *   reply sent      request completed: WAITING for the next request, for
 *                   at most idle_timeout_s however slowly it trickles in
 *   closed          NOTIFY_CONNECTION CLOSED, before libmicrohttpd closes
 *                   the socket: the slot leaves the guard
 *
 * A kick writes a JSON error (408 at the deadline, 503 when evicted) to a
 * plain-HTTP socket that awaits a request, then shuts the socket down;
 * libmicrohttpd's connection thread sees the end of input and closes it.
 * With TLS, or between keep-alive requests, the socket is only shut down.
 */
#include "server/conn_guard.h"
#include "server/http_int.h"
#include "store/mem.h"
#include "store/util.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

struct HttpConns {
    HttpServer *srv;              /* borrows */
    ConnGuard guard;
    pthread_mutex_t mu;           /* guards stop */
    pthread_cond_t cv;            /* wakes the sweeper to stop */
    bool stop;
    bool sweeping;                /* the sweeper thread runs */
    pthread_t sweeper;
};

/* One connection: libmicrohttpd's socket context. */
typedef struct HttpConn {
    ConnSlot slot;
    atomic_bool awaits_request;   /* no reply started: an error may be written */
} HttpConn;

/* The socket context of a connection refused at accept. */
static char REFUSED;

#define NS_PER_S 1000000000ull

/* Write a JSON error reply straight to the socket, without blocking (the
 * connection is being closed; what does not fit is dropped). */
static void raw_reply(int fd, int code, const char *reason, QrError *e)
{
    QrBuf body, all;
    qr_buf_init(&body);
    qr_buf_init(&all);
    http_error_json(&body, code, e);
    qr_buf_printf(&all,
                  "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                  "Content-Length: %zu\r\nConnection: close\r\n"
                  "X-Content-Type-Options: nosniff\r\n%s\r\n",
                  http_status_of(code), reason, body.len,
                  code == QR_EBUSY ? "Retry-After: 1\r\n" : "");
    qr_buf_append(&all, body.data, body.len);
    if (qr_buf_ok(&all) && send(fd, all.data, all.len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
        qr_log(QR_LOG_DEBUG, "http error reply to a closing connection: %s", strerror(errno));
    qr_buf_free(&body);
    qr_buf_free(&all);
}

static void kick(ConnSlot *slot, ConnKick why, void *arg)
{
    HttpConns *hc = arg;
    HttpConn *hconn = (HttpConn *)slot;
    const HttpConfig *cfg = &hc->srv->cfg;
    if (atomic_load(&hconn->awaits_request) && !hc->srv->tls_cert) {
        QrError e;
        qr_error_clear(&e);
        if (why == CONN_KICK_TIMEOUT) {
            qr_error_set(&e, QR_ETIMEOUT, "request headers not received within %d seconds",
                         cfg->header_timeout_s);
            qr_error_hint(&e, "send the request line and headers without pauses (the limit "
                              "is header_timeout_s in the server config)");
            raw_reply(slot->fd, HTTP_EHEADER_TIMEOUT, "Request Timeout", &e);
        } else {
            qr_error_set(&e, QR_EBUSY, "connection closed to make room: %d connections are "
                                       "open", cfg->max_connections);
            qr_error_hint(&e, "retry; at max_connections the connection that has waited "
                              "longest for a request is closed first");
            raw_reply(slot->fd, QR_EBUSY, "Service Unavailable", &e);
        }
    }
    shutdown(slot->fd, SHUT_RDWR);
}

/* Kick connections at their deadlines until told to stop. */
static void *sweep_main(void *arg)
{
    HttpConns *hc = arg;
    pthread_mutex_lock(&hc->mu);
    while (!hc->stop) {
        uint64_t now = qr_now_ns();
        uint64_t next = conn_guard_expire(&hc->guard, now);
        uint64_t wait_ns = NS_PER_S;
        if (next && next - now < wait_ns)
            wait_ns = next - now;
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + wait_ns;
        until.tv_sec += (time_t)(ns / NS_PER_S);
        until.tv_nsec = (long)(ns % NS_PER_S);
        pthread_cond_timedwait(&hc->cv, &hc->mu, &until);
    }
    pthread_mutex_unlock(&hc->mu);
    return NULL;
}

int http_conns_new(HttpServer *s)
{
    HttpConns *hc = qr_calloc(1, sizeof *hc);
    if (!hc)
        return QR_ENOMEM;
    hc->srv = s;
    conn_guard_init(&hc->guard, "http", s->cfg.max_connections, s->cfg.max_connections_per_ip, 0,
                    kick, hc);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&hc->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&hc->mu, NULL);
    s->conns = hc;
    if (pthread_create(&hc->sweeper, NULL, sweep_main, hc) != 0) {
        http_conns_free(s);
        return QR_EIO;
    }
    hc->sweeping = true;
    return QR_OK;
}

void http_conns_free(HttpServer *s)
{
    HttpConns *hc = s->conns;
    if (!hc)
        return;
    if (hc->sweeping) {
        pthread_mutex_lock(&hc->mu);
        hc->stop = true;
        pthread_cond_signal(&hc->cv);
        pthread_mutex_unlock(&hc->mu);
        pthread_join(hc->sweeper, NULL);
    }
    conn_guard_destroy(&hc->guard);
    pthread_mutex_destroy(&hc->mu);
    pthread_cond_destroy(&hc->cv);
    qr_free(hc);
    s->conns = NULL;
}

/* The connection's record, NULL when refused (or unknown). */
static HttpConn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    void *ctx = ci ? ci->socket_context : NULL;
    return ctx == &REFUSED ? NULL : ctx;
}

/* A connection accepted: admit it or refuse it (the listening thread). */
static void conn_started(HttpServer *s, struct MHD_Connection *c, void **socket_context)
{
    HttpConns *hc = s->conns;
    const union MHD_ConnectionInfo *fi = MHD_get_connection_info(c,
                                                                 MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ai = MHD_get_connection_info(c,
                                                                 MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    struct sockaddr_storage peer;
    memset(&peer, 0, sizeof peer);
    if (ai && ai->client_addr)
        memcpy(&peer, ai->client_addr, ai->client_addr->sa_family == AF_INET6
                                           ? sizeof(struct sockaddr_in6)
                                           : sizeof(struct sockaddr_in));
    int fd = fi ? fi->connect_fd : -1;
    HttpConn *hconn = qr_calloc(1, sizeof *hconn);
    if (!hconn || fd < 0) {
        qr_free(hconn);
        *socket_context = &REFUSED;
        if (fd >= 0)
            shutdown(fd, SHUT_RDWR);
        return;
    }
    atomic_store(&hconn->awaits_request, true);
    uint64_t now = qr_now_ns();
    char client[64];
    if (conn_guard_add(&hc->guard, &hconn->slot, fd, &peer, now,
                       now + (uint64_t)s->cfg.header_timeout_s * NS_PER_S, client) != QR_OK) {
        qr_free(hconn);
        *socket_context = &REFUSED;
        if (!s->tls_cert) {
            QrError e;
            qr_error_clear(&e);
            qr_error_set(&e, QR_EBUSY, "too many connections from client %s (at most %d "
                                       "per client address)", client,
                         s->cfg.max_connections_per_ip);
            qr_error_hint(&e, "reuse connections (keep-alive), or raise max_connections_per_ip "
                              "in the server config");
            raw_reply(fd, QR_EBUSY, "Service Unavailable", &e);
        }
        shutdown(fd, SHUT_RDWR);
        return;
    }
    *socket_context = hconn;
}

void http_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode toe)
{
    HttpServer *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        atomic_fetch_add(&s->connections, 1);
        conn_started(s, c, socket_context);
        return;
    }
    atomic_fetch_sub(&s->connections, 1);
    HttpConn *hconn = *socket_context == &REFUSED ? NULL : *socket_context;
    *socket_context = NULL;
    if (!hconn)
        return;
    conn_guard_remove(&s->conns->guard, &hconn->slot);
    qr_free(hconn);
}

bool http_conns_request(HttpServer *s, struct MHD_Connection *c)
{
    HttpConn *hconn = conn_of(c);
    if (!hconn)
        return false;
    atomic_store(&hconn->awaits_request, true);
    uint64_t now = qr_now_ns();
    conn_guard_wait(&s->conns->guard, &hconn->slot, now,
                    now + (uint64_t)s->cfg.header_timeout_s * NS_PER_S);
    return conn_guard_kicked(&s->conns->guard, &hconn->slot) == CONN_KICK_NONE;
}

bool http_conns_busy(HttpServer *s, struct MHD_Connection *c)
{
    HttpConn *hconn = conn_of(c);
    return hconn && conn_guard_busy(&s->conns->guard, &hconn->slot);
}

void http_conns_idle(HttpServer *s, struct MHD_Connection *c)
{
    HttpConn *hconn = conn_of(c);
    if (!hconn)
        return;
    atomic_store(&hconn->awaits_request, false);
    uint64_t now = qr_now_ns();
    conn_guard_wait(&s->conns->guard, &hconn->slot, now,
                    now + (uint64_t)s->cfg.idle_timeout_s * NS_PER_S);
}

void http_conns_counts(HttpServer *s, uint64_t *refused, uint64_t *evicted, uint64_t *timed_out)
{
    ConnGuard *g = &s->conns->guard;
    *refused = atomic_load(&g->n_refused);
    *evicted = atomic_load(&g->n_evicted);
    *timed_out = atomic_load(&g->n_timed_out);
}
