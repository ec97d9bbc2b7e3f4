/*
 * pgwire.c — the PostgreSQL port: listener, one thread per connection,
 * framing with length limits, the startup phase (SSLRequest/GSSENCRequest
 * answered 'N', StartupMessage, authentication, ParameterStatus,
 * BackendKeyData), CancelRequest, the connection limit and graceful stop.
 * The query protocols are in pgwire_query.c, the codec in pgwire_msg.c.
 *
 * Layer: server/.  Calls query/sql.h, query/quarry.h, server/scram.h and
 * the base kit.
 *
 * Threads.  The accept thread polls the listening socket and a stop pipe;
 * each accepted socket gets a detached-in-spirit thread (joined at stop)
 * with a 4 MB stack reserve, of which an idle connection touches a few
 * pages.  Every connection waits for input with poll() on its socket and
 * the stop pipe, so stop reaches idle connections at once.  The registry
 * (a list under srv->mu) serves CancelRequest and stop.
 *
 * Limits.  A ConnGuard (conn_guard.h) admits connections at accept: a
 * client address beyond max_connections_per_ip gets FATAL 53300 at once
 * (PGW_CANCEL_EXTRA more are let in to send a CancelRequest, and only
 * that); when max_connections + PGW_EXTRA_THREADS connections are open, the
 * one longest in its startup phase is closed (FATAL 53300) to make room.
 * Startup and authentication must finish auth_timeout_s after the accept:
 * the accept thread kicks late ones (FATAL 57014), however slowly their
 * bytes came.  The guard wakes a connection's thread by shutting down the
 * socket's read side, so the thread can still write why.  Sessions beyond
 * max_connections get FATAL 53300 after the startup packet (so
 * CancelRequests still get through).  Every statement is bounded by
 * statement_timeout_ms (SET statement_timeout lowers it).  A message longer than
 * max_message_bytes is a FATAL 08P01 and the connection closes; buffers
 * grow with the bytes that actually arrive, never with the length a client
 * claims.
 */
#include "server/pgwire.h"
#include "server/pgwire_int.h"
#include "server/netaddr.h"
#include "store/mem.h"
#include "store/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PGW_EXTRA_THREADS 64          /* startup-phase connections beyond the limit */
#define PGW_HARD_EXTRA 128            /* threads beyond that (kicked ones still closing) */
#define PGW_CANCEL_EXTRA 2            /* per client beyond its limit, for CancelRequest */
#define PGW_RBUF_INIT 8192
#define PGW_FLUSH_AT (64 * 1024)
#define PGW_STACK_BYTES (8u << 20)    /* as a main thread: SQL nests to its limit, not the stack's */

struct PgServer {
    QrDb *db;                /* borrows */
    PgConfig cfg;
    int lfd;                 /* owns: listening socket */
    void *tls_ctx;           /* owns: SSL_CTX when TLS is configured, else NULL */
    int stop_pipe[2];        /* owns: readable once stopping */
    char addr[160];
    bool need_auth_remote;   /* listening beyond loopback */
    ConnGuard guard;         /* per-client and global admission, startup deadlines */
    pthread_t accept_thr;
    pthread_mutex_t mu;      /* guards everything below */
    pthread_cond_t cv;
    PgConn *conns;           /* registry: every live connection thread */
    int n_threads;           /* connection threads alive */
    int n_sessions;          /* connections past the limit check */
    int32_t next_pid;
    bool stopping;
    /* finished threads to join (a thread cannot join itself) */
    pthread_t *zombies;
    int n_zombies, cap_zombies;
};

const PgConfig *pgw_config(const PgServer *s) { return &s->cfg; }

void pg_config_default(PgConfig *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->listen, sizeof c->listen, "127.0.0.1:5433");
    c->max_connections = 100;
    c->max_connections_per_ip = 50;
    c->max_message_bytes = 64u << 20;
    c->auth_timeout_s = 10;
    c->statement_timeout_ms = 10000;
    c->shutdown_timeout_s = 10;
}

const char *pg_server_addr(const PgServer *s) { return s->addr; }

int pg_server_connections(PgServer *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->n_sessions;
    pthread_mutex_unlock(&s->mu);
    return n;
}

uint64_t pgw_max_message(const PgConn *c) { return c->srv->cfg.max_message_bytes; }

/* ---- output ---- */

bool pgw_flush(PgConn *c)
{
    if (c->dead) {
        c->out.len = 0;
        return false;
    }
    if (!qr_buf_ok(&c->out)) {
        /* an append failed: the stream is no longer well formed */
        qr_log(QR_LOG_WARN, "pg: out of memory building a reply pid=%d", c->pid);
        c->dead = true;
        qr_buf_free(&c->out);
        qr_buf_init(&c->out);
        return false;
    }
    size_t off = 0;
    while (off < c->out.len) {
        ssize_t n = pgw_conn_send(c, c->out.data + off, c->out.len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            c->dead = true;
            break;
        }
        off += (size_t)n;
    }
    c->out.len = 0;
    if (c->out.cap > (1u << 20)) { /* give back what a large result took */
        qr_buf_free(&c->out);
        qr_buf_init(&c->out);
    }
    return !c->dead;
}

void pgw_maybe_flush(PgConn *c)
{
    if (c->out.len >= PGW_FLUSH_AT)
        pgw_flush(c);
}

void pgw_send_error(PgConn *c, const char *severity, const QrError *e, int64_t position)
{
    pgw_put_error(&c->out, 'E', severity, e, position);
}

void pgw_send_ready(PgConn *c)
{
    size_t m = pgw_begin(&c->out, 'Z');
    qr_buf_putc(&c->out, (uint8_t)(c->sess ? qr_sql_session_txn_status(c->sess) : 'I'));
    pgw_end(&c->out, m);
    pgw_flush(c);
}

static void send_fatal(PgConn *c, QrCode code, const char *sqlstate, const char *msg,
                       const char *hint)
{
    QrError e;
    qr_error_clear(&e);
    qr_error_set(&e, code, "%s", msg);
    if (sqlstate)
        qr_error_set_sqlstate(&e, sqlstate);
    if (hint)
        qr_error_hint(&e, "%s", hint);
    pgw_send_error(c, "FATAL", &e, 0);
    pgw_flush(c);
}

/* ---- input ---- */

/* Wait until the socket is readable (or stop); false to end.  The startup
 * deadline arrives as the end of input (the guard shuts the read side). */
static bool wait_readable(PgConn *c)
{
    if (pgw_conn_pending(c))
        return true;
    struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN},
                          {.fd = c->srv->stop_pipe[0], .events = POLLIN}};
    for (;;) {
        int n = poll(p, 2, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        if (p[1].revents) {
            /* shutting down: tell an idle client why, as PostgreSQL does */
            send_fatal(c, QR_ECANCELED, "57P01",
                       "terminating connection due to administrator command", NULL);
            return false;
        }
        return true;
    }
}

/* Make at least `need` unread bytes available in rbuf. */
static bool fill(PgConn *c, size_t need)
{
    while (c->rlen - c->rpos < need) {
        if (c->rpos > 0 && c->rpos == c->rlen)
            c->rpos = c->rlen = 0;
        if (c->rpos + need > c->rcap) {
            if (c->rpos > 0) { /* slide the unread bytes down */
                memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
                c->rlen -= c->rpos;
                c->rpos = 0;
            }
            if (need > c->rcap) {
                /* grow with what arrives (at most 1 MB ahead of it), not
                 * with what the client claims */
                size_t nc = c->rcap * 2;
                if (nc < c->rlen + 65536)
                    nc = c->rlen + 65536;
                if (nc > c->rlen + (1u << 20))
                    nc = c->rlen + (1u << 20);
                if (nc > need)
                    nc = need;
                if (nc < PGW_RBUF_INIT)
                    nc = PGW_RBUF_INIT;
                uint8_t *nb = qr_realloc(c->rbuf, nc);
                if (!nb) {
                    qr_log(QR_LOG_WARN, "pg: out of memory reading a message pid=%d", c->pid);
                    return false;
                }
                c->rbuf = nb;
                c->rcap = nc;
            }
        }
        if (!wait_readable(c))
            return false;
        ssize_t n = pgw_conn_recv(c, c->rbuf + c->rlen, c->rcap - c->rlen);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            return false;
        c->rlen += (size_t)n;
    }
    return true;
}

/* After a large message, give the memory back. */
static void shrink_rbuf(PgConn *c)
{
    if (c->rcap > (1u << 20) && c->rlen - c->rpos < PGW_RBUF_INIT) {
        memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
        uint8_t *nb = qr_realloc(c->rbuf, PGW_RBUF_INIT);
        if (nb) {
            c->rbuf = nb;
            c->rcap = PGW_RBUF_INIT;
        }
    }
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

bool pgw_read_msg(PgConn *c, char *type, const uint8_t **body, size_t *len)
{
    if (c->dead)
        return false;
    shrink_rbuf(c);
    if (!fill(c, 5))
        return false;
    const uint8_t *h = c->rbuf + c->rpos;
    uint32_t l = be32(h + 1);
    if (l < 4 || (uint64_t)l - 4 > c->srv->cfg.max_message_bytes) {
        QrError e;
        qr_error_clear(&e);
        if (l < 4)
            qr_error_set(&e, QR_EINVAL, "invalid message length %u", l);
        else {
            qr_error_set(&e, QR_ELIMIT, "message of type '%c' is too large (%u bytes)",
                         h[0] >= 0x20 && h[0] < 0x7f ? h[0] : '?', l - 4);
            qr_error_hint(&e, "the limit is %llu bytes",
                          (unsigned long long)c->srv->cfg.max_message_bytes);
        }
        qr_error_set_sqlstate(&e, "08P01");
        pgw_send_error(c, "FATAL", &e, 0);
        pgw_flush(c);
        return false;
    }
    if (!fill(c, 1 + (size_t)l))
        return false;
    h = c->rbuf + c->rpos;
    *type = (char)h[0];
    *body = h + 5;
    *len = l - 4;
    c->rpos += 1 + (size_t)l;
    return true;
}

/* The startup packet: no type byte, a length limit of 10000. */
static bool read_startup(PgConn *c, const uint8_t **body, size_t *len)
{
    if (!fill(c, 4))
        return false;
    uint32_t l = be32(c->rbuf + c->rpos);
    if (l < 8 || l > PGW_MAX_STARTUP_LEN) {
        send_fatal(c, QR_EINVAL, "08P01", "invalid length of startup packet", NULL);
        return false;
    }
    if (!fill(c, l))
        return false;
    *body = c->rbuf + c->rpos + 4;
    *len = l - 4;
    c->rpos += l;
    return true;
}

/* ---- registry ---- */

static void registry_add(PgServer *s, PgConn *c)
{
    c->reg_prev = NULL;
    c->reg_next = s->conns;
    if (s->conns)
        s->conns->reg_prev = c;
    s->conns = c;
}

static void registry_remove(PgServer *s, PgConn *c)
{
    if (c->reg_prev)
        c->reg_prev->reg_next = c->reg_next;
    else
        s->conns = c->reg_next;
    if (c->reg_next)
        c->reg_next->reg_prev = c->reg_prev;
}

static void handle_cancel(PgServer *s, int32_t pid, int32_t key)
{
    pthread_mutex_lock(&s->mu);
    for (PgConn *c = s->conns; c; c = c->reg_next)
        if (c->pid == pid && c->key == key && c->sess) {
            qr_sql_session_cancel(c->sess);
            qr_log(QR_LOG_INFO, "pg cancel request pid=%d", pid);
        }
    pthread_mutex_unlock(&s->mu);
}

/* ---- authentication ---- */

static void send_auth(PgConn *c, int32_t code, const void *data, size_t n)
{
    size_t m = pgw_begin(&c->out, 'R');
    pgw_put_i32(&c->out, code);
    qr_buf_append(&c->out, data, n);
    pgw_end(&c->out, m);
}

/* SCRAM-SHA-256 against the user file; QR_OK when the client proved it
 * knows the password.  Errors were sent to the client already. */
static int auth_scram(PgConn *c, const ScramUser *u)
{
    QrError e;
    qr_error_clear(&e);
    ScramServer ss;
    if (scram_server_init(&ss, u ? u->verifier : NULL, &e) != QR_OK)
        goto fail;
    static const char mechs[] = "SCRAM-SHA-256\0"; /* list ends with an empty name */
    send_auth(c, 10, mechs, sizeof mechs);
    pgw_flush(c);
    char type;
    const uint8_t *body;
    size_t len;
    if (!pgw_read_msg(c, &type, &body, &len))
        return QR_EAUTH;
    PgwSaslInit si;
    if (type != 'p') {
        qr_error_set(&e, QR_EINVAL, "expected SASL response, got message type %d", type);
        qr_error_set_sqlstate(&e, "08P01");
        goto fail;
    }
    if (pgw_decode_sasl_init(body, len, &si, &e) != QR_OK)
        goto fail;
    if (strcmp(si.mechanism, "SCRAM-SHA-256") != 0) {
        qr_error_set(&e, QR_EAUTH, "client selected an invalid SASL authentication mechanism");
        qr_error_set_sqlstate(&e, "08P01");
        goto fail;
    }
    char reply[512];
    if (scram_server_first(&ss, (const char *)si.data, si.data_len > 0 ? (size_t)si.data_len : 0,
                           reply, sizeof reply, &e) != QR_OK)
        goto fail;
    send_auth(c, 11, reply, strlen(reply));
    pgw_flush(c);
    if (!pgw_read_msg(c, &type, &body, &len))
        return QR_EAUTH;
    if (type != 'p') {
        qr_error_set(&e, QR_EINVAL, "expected SASL response, got message type %d", type);
        qr_error_set_sqlstate(&e, "08P01");
        goto fail;
    }
    if (scram_server_final(&ss, (const char *)body, len, reply, sizeof reply, &e) != QR_OK)
        goto fail;
    send_auth(c, 12, reply, strlen(reply));
    return QR_OK;
fail:
    if (e.code == QR_EAUTH && !e.sqlstate[0]) {
        /* one message for unknown users and wrong passwords */
        qr_error_clear(&e);
        qr_error_set(&e, QR_EAUTH, "password authentication failed for user \"%s\"", c->user);
    }
    qr_log(QR_LOG_WARN, "pg authentication failed user=%s: %s", c->user, e.message);
    pgw_send_error(c, "FATAL", &e, 0);
    pgw_flush(c);
    return QR_EAUTH;
}

/* ---- startup ---- */

/* Settings reported with ParameterStatus, initially and when they change. */
static const char *const PGW_REPORTED[6] = {"application_name", "client_encoding", "DateStyle",
                                             "TimeZone", "IntervalStyle", "search_path"};

static void send_param(PgConn *c, const char *name, const char *value)
{
    size_t m = pgw_begin(&c->out, 'S');
    pgw_put_cstr(&c->out, name);
    pgw_put_cstr(&c->out, value);
    pgw_end(&c->out, m);
}

void pgw_report_changes(PgConn *c)
{
    for (int i = 0; i < 6; i++) {
        if (i == 5)
            continue; /* search_path is not GUC_REPORT in PostgreSQL 15 */
        const char *v = qr_sql_session_get(c->sess, PGW_REPORTED[i]);
        if (!v || !strcmp(v, c->reported[i]))
            continue;
        if (i == 1)
            v = "UTF8"; /* the only encoding spoken */
        if (strcmp(v, c->reported[i]) != 0) {
            snprintf(c->reported[i], sizeof c->reported[i], "%s", v);
            send_param(c, PGW_REPORTED[i], v);
        }
    }
}

static bool encoding_ok(const char *v)
{
    return !strcasecmp(v, "UTF8") || !strcasecmp(v, "UTF-8") || !strcasecmp(v, "UNICODE") ||
           !strcasecmp(v, "SQL_ASCII") || !strcasecmp(v, "auto");
}

/* Apply "-c name=value" / "--name=value" pairs of the options parameter. */
static int apply_options(PgConn *c, const char *opts, QrError *err)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", opts);
    char *save = NULL;
    bool want_c = false;
    for (char *tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        if (!strcmp(tok, "-c")) {
            want_c = true;
            continue;
        }
        if (!strncmp(tok, "--", 2))
            tok += 2;
        else if (!strncmp(tok, "-c", 2))
            tok += 2;
        else if (!want_c) {
            qr_error_set(err, QR_EINVAL, "invalid command-line argument for server process: %s",
                         tok);
            qr_error_set_sqlstate(err, "42601");
            return QR_EINVAL;
        }
        want_c = false;
        char *eq = strchr(tok, '=');
        if (!eq) {
            qr_error_set(err, QR_EINVAL, "-c %s requires a value", tok);
            return QR_EINVAL;
        }
        *eq = 0;
        for (char *p = tok; *p; p++)
            if (*p == '-')
                *p = '_';
        int rc = qr_sql_session_set(c->sess, tok, eq + 1, err);
        if (rc != QR_OK)
            return rc;
    }
    return QR_OK;
}

/* Run the startup phase.  Returns true when the session is ready. */
static bool startup_run(PgConn *c)
{
    PgServer *s = c->srv;
    const uint8_t *body;
    size_t len;
    PgwStartup st;
    QrError e;
    /* the parameters borrow this copy: authentication reads more messages
     * into rbuf, which may move */
    uint8_t pkt[PGW_MAX_STARTUP_LEN];
    for (;;) {
        if (!read_startup(c, &body, &len))
            return false;
        memcpy(pkt, body, len);
        qr_error_clear(&e);
        if (pgw_decode_startup(pkt, len, &st, &e) != QR_OK) {
            pgw_send_error(c, "FATAL", &e, 0);
            pgw_flush(c);
            return false;
        }
        if (st.kind == PGW_START_CANCEL) {
            handle_cancel(s, st.cancel_pid, st.cancel_key);
            return false; /* the cancel connection closes without a reply */
        }
        if (c->slot.over_client_limit) {
            /* let in for a CancelRequest only */
            char msg[160], hint[160];
            snprintf(msg, sizeof msg, "too many connections from this client address "
                                      "(at most %d)", s->cfg.max_connections_per_ip);
            snprintf(hint, sizeof hint, "close idle connections, or raise "
                                        "--pg-max-connections-per-ip");
            send_fatal(c, QR_EBUSY, "53300", msg, hint);
            return false;
        }
        if (st.kind == PGW_START_NORMAL)
            break;
        if (st.kind == PGW_START_SSL && s->tls_ctx && !c->ssl) {
            qr_buf_putc(&c->out, 'S');
            if (!pgw_flush(c))
                return false;
            if (c->rlen != c->rpos) {
                /* bytes sent in the clear after SSLRequest could be injected */
                send_fatal(c, QR_EINVAL, "08P01",
                           "received unencrypted data after SSL request", NULL);
                return false;
            }
            /* a stalled handshake ends at the startup deadline too */
            if (!pgw_tls_accept(c, s->tls_ctx, s->cfg.auth_timeout_s * 1000))
                return false;
            continue;
        }
        /* GSSENCRequest, or SSLRequest without a certificate: in the clear */
        qr_buf_putc(&c->out, 'N');
        if (!pgw_flush(c))
            return false;
    }
    if (st.minor > 0) {
        /* NegotiateProtocolVersion: we speak 3.0 */
        size_t m = pgw_begin(&c->out, 'v');
        pgw_put_i32(&c->out, PGW_PROTO_30);
        int n_unknown = 0;
        for (int i = 0; i < st.n_params; i++)
            n_unknown += !strncmp(st.keys[i], "_pq_.", 5);
        pgw_put_i32(&c->out, n_unknown);
        for (int i = 0; i < st.n_params; i++)
            if (!strncmp(st.keys[i], "_pq_.", 5))
                pgw_put_cstr(&c->out, st.keys[i]);
        pgw_end(&c->out, m);
    }
    const char *user = pgw_startup_get(&st, "user");
    if (!user || !user[0]) {
        send_fatal(c, QR_EAUTH, "28000", "no PostgreSQL user name specified in startup packet",
                   NULL);
        return false;
    }
    snprintf(c->user, sizeof c->user, "%s", user);
    const char *dbname = pgw_startup_get(&st, "database");
    if (!dbname || !dbname[0])
        dbname = user;
    /* postgres and template1 name the same database: tools connect there first */
    if (strcmp(dbname, "quarry") != 0 && strcmp(dbname, "postgres") != 0 &&
        strcmp(dbname, "template1") != 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "database \"%.100s\" does not exist", dbname);
        send_fatal(c, QR_ENOTFOUND, "3D000", msg,
                   "the database of a Quarry server is named quarry (dbname=quarry)");
        return false;
    }
    /* the connection limit, counted once the client said who it is */
    pthread_mutex_lock(&s->mu);
    bool full = s->n_sessions >= s->cfg.max_connections;
    if (!full)
        s->n_sessions++;
    pthread_mutex_unlock(&s->mu);
    if (full) {
        send_fatal(c, QR_EBUSY, "53300", "sorry, too many clients already",
                   "raise max_connections (quarry serve --pg-max-connections N)");
        return false;
    }
    c->counted = true;

    /* authentication */
    ScramUsers users;
    qr_error_clear(&e);
    if (scram_users_load(qr_db_dir(s->db), &users, &e) != QR_OK) {
        qr_log(QR_LOG_ERROR, "pg: %s", e.message);
        send_fatal(c, QR_EINTERNAL, "XX000", "cannot read the user file", NULL);
        return false;
    }
    int auth_rc = QR_OK;
    if (users.n > 0) {
        const ScramUser *u = scram_users_find(&users, user);
        if (u)
            c->role = u->role;
        auth_rc = auth_scram(c, u);
    } else if (!c->peer_loopback) {
        char msg[200];
        snprintf(msg, sizeof msg, "no user is configured, so user \"%.64s\" may connect only "
                                  "from loopback", user);
        send_fatal(c, QR_EAUTH, "28000", msg, "create one with: quarry user add NAME");
        auth_rc = QR_EAUTH;
    }
    scram_users_free(&users);
    if (auth_rc != QR_OK)
        return false;
    /* authenticated: no longer subject to the startup deadline nor evicted
     * for room (false: kicked just now, startup() says why) */
    if (!conn_guard_busy(&s->guard, &c->slot))
        return false;
    send_auth(c, 0, NULL, 0); /* AuthenticationOk */

    /* the session and its startup settings */
    qr_error_clear(&e);
    QrSqlSession *sess = NULL;
    if (qr_sql_session_new(s->db, &sess, &e) != QR_OK) {
        pgw_send_error(c, "FATAL", &e, 0);
        pgw_flush(c);
        return false;
    }
    /* a read-only user's session runs reads only: the engine checks every
     * statement's parse as it executes (SQL, cursors, COPY alike) */
    if (c->role == SCRAM_ROLE_READ_ONLY)
        qr_sql_session_limit_access(sess, QR_SQL_ACCESS_READ,
                                    "connect as a read-write user (quarry user add NAME --role "
                                    "read-write)");
    pthread_mutex_lock(&s->mu); /* published for CancelRequest and stop */
    c->sess = sess;
    pthread_mutex_unlock(&s->mu);
    /* SET statement_timeout may lower this, not raise it */
    qr_sql_session_limit_timeout(sess, s->cfg.statement_timeout_ms);
    qr_sql_session_set(sess, "session_authorization", c->user, &e); /* current_user */
    for (int i = 0; i < st.n_params && e.code == QR_OK; i++) {
        const char *k = st.keys[i], *v = st.vals[i];
        if (!strcmp(k, "user") || !strcmp(k, "database") || !strcmp(k, "replication") ||
            !strncmp(k, "_pq_.", 5))
            continue;
        if (!strcmp(k, "options")) {
            apply_options(c, v, &e);
            continue;
        }
        if (!strcasecmp(k, "client_encoding") && !encoding_ok(v)) {
            qr_error_set(&e, QR_EUNSUPPORTED, "client encoding \"%s\" is not supported", v);
            qr_error_hint(&e, "Quarry speaks UTF8 only");
            qr_error_set_sqlstate(&e, "22023");
            break;
        }
        if (!strcasecmp(k, "client_encoding"))
            continue;
        qr_sql_session_set(c->sess, k, v, &e);
    }
    if (e.code != QR_OK) {
        pgw_send_error(c, "FATAL", &e, 0);
        pgw_flush(c);
        return false;
    }
    const char *app = qr_sql_session_get(c->sess, "application_name");
    const char *ds = qr_sql_session_get(c->sess, "DateStyle");
    const char *tz = qr_sql_session_get(c->sess, "TimeZone");
    const char *is = qr_sql_session_get(c->sess, "IntervalStyle");
    const char *init[6] = {app ? app : "", "UTF8", ds ? ds : "ISO, MDY", tz ? tz : "UTC",
                           is ? is : "postgres", ""};
    for (int i = 0; i < 5; i++) {
        snprintf(c->reported[i], sizeof c->reported[i], "%s", init[i]);
        send_param(c, PGW_REPORTED[i], init[i]);
    }
    send_param(c, "server_version", "15.0 (Quarry " QUARRY_VERSION ")");
    send_param(c, "server_encoding", "UTF8");
    send_param(c, "integer_datetimes", "on");
    send_param(c, "standard_conforming_strings", "on");
    send_param(c, "is_superuser", c->role == SCRAM_ROLE_READ_ONLY ? "off" : "on");
    send_param(c, "session_authorization", c->user);
    send_param(c, "default_transaction_read_only",
               c->role == SCRAM_ROLE_READ_ONLY ? "on" : "off");
    send_param(c, "in_hot_standby", "off");
    size_t m = pgw_begin(&c->out, 'K');
    pgw_put_i32(&c->out, c->pid);
    pgw_put_i32(&c->out, c->key);
    pgw_end(&c->out, m);
    pgw_send_ready(c); /* from now on a connection may idle as long as it likes */
    return !c->dead;
}

/* The startup phase, and why it ended when the guard closed it. */
static bool startup(PgConn *c)
{
    if (startup_run(c))
        return true;
    PgServer *s = c->srv;
    ConnKick why = conn_guard_kicked(&s->guard, &c->slot);
    if (why == CONN_KICK_TIMEOUT) {
        char hint[120];
        snprintf(hint, sizeof hint, "startup and authentication must finish within %d "
                                    "seconds (--pg-auth-timeout)", s->cfg.auth_timeout_s);
        send_fatal(c, QR_ETIMEOUT, "57014", "canceling authentication due to timeout", hint);
    } else if (why == CONN_KICK_EVICTED) {
        send_fatal(c, QR_EBUSY, "53300", "sorry, too many clients already",
                   "the connection longest in startup was closed to make room; retry, or "
                   "raise --pg-max-connections");
    }
    return false;
}

/* ---- connection thread ---- */

static void *conn_main(void *arg)
{
    PgConn *c = arg;
    PgServer *s = c->srv;
    if (startup(c)) {
        qr_log(QR_LOG_DEBUG, "pg connection pid=%d user=%s", c->pid, c->user);
        char type;
        const uint8_t *body;
        size_t len;
        while (!c->dead && pgw_read_msg(c, &type, &body, &len)) {
            atomic_store(&c->busy, true);
            bool go_on = pgw_dispatch(c, type, body, len);
            atomic_store(&c->busy, false);
            if (!go_on)
                break;
        }
    }
    pgw_flush(c);
    pthread_mutex_lock(&s->mu);
    registry_remove(s, c);
    if (c->counted)
        s->n_sessions--;
    s->n_threads--;
    pthread_t self = pthread_self();
    if (s->n_zombies == s->cap_zombies) {
        int nc = s->cap_zombies ? s->cap_zombies * 2 : 16;
        pthread_t *z = qr_realloc(s->zombies, (size_t)nc * sizeof *z);
        if (z) {
            s->zombies = z;
            s->cap_zombies = nc;
        }
    }
    if (s->n_zombies < s->cap_zombies)
        s->zombies[s->n_zombies++] = self;
    else
        pthread_detach(self);
    pthread_cond_broadcast(&s->cv);
    QrSqlSession *sess = c->sess;
    c->sess = NULL;
    pthread_mutex_unlock(&s->mu);
    conn_guard_remove(&s->guard, &c->slot); /* before close: no kick reaches a reused fd */
    pgw_query_reset(c);
    qr_sql_session_free(sess);
    pgw_tls_close(c);
    close(c->fd);
    qr_free(c->rbuf);
    qr_buf_free(&c->out);
    qr_free(c);
    return NULL;
}

/* Cancel the statements of clients that went away while they ran (the
 * socket reports the peer's shutdown), as PostgreSQL's
 * client_connection_check_interval does.  Called about once a second. */
static void check_gone_clients(PgServer *s)
{
    pthread_mutex_lock(&s->mu);
    for (PgConn *c = s->conns; c; c = c->reg_next) {
        if (!atomic_load(&c->busy) || !c->sess)
            continue;
        struct pollfd p = {.fd = c->fd, .events = POLLRDHUP};
        if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
            qr_sql_session_cancel(c->sess);
            qr_log(QR_LOG_INFO, "pg client gone, statement cancelled pid=%d", c->pid);
        }
    }
    pthread_mutex_unlock(&s->mu);
}

/* Join threads that finished (called by the accept thread). */
static void reap(PgServer *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->n_zombies;
    pthread_t tmp[64];
    if (n > 64)
        n = 64;
    for (int i = 0; i < n; i++)
        tmp[i] = s->zombies[s->n_zombies - n + i];
    s->n_zombies -= n;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < n; i++)
        pthread_join(tmp[i], NULL);
}

static uint32_t random_u32(void)
{
    uint32_t v = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(&v, sizeof v, 1, f) != 1)
            v = 0;
        fclose(f);
    }
    if (!v)
        v = (uint32_t)qr_now_ns() ^ (uint32_t)getpid() * 2654435761u;
    return v;
}

/* ConnGuard kick: wake the connection's thread with the end of input;
 * it can still write why (startup()). */
static void kick(ConnSlot *slot, ConnKick why, void *arg)
{
    (void)why;
    (void)arg;
    shutdown(slot->fd, SHUT_RD);
}

/* A client over its connection limit, at accept: FATAL 53300 without
 * reading its startup packet (libpq reports an ErrorResponse in place of
 * the first reply), then close. */
static void refuse_client(PgServer *s, int fd, const char *client)
{
    QrError e;
    qr_error_clear(&e);
    qr_error_set(&e, QR_EBUSY, "too many connections from client %s", client);
    qr_error_set_sqlstate(&e, "53300");
    qr_error_hint(&e, "at most %d connections per client address (--pg-max-connections-per-ip)",
                  s->cfg.max_connections_per_ip);
    QrBuf b;
    qr_buf_init(&b);
    pgw_put_error(&b, 'E', "FATAL", &e, 0);
    if (qr_buf_ok(&b) && send(fd, b.data, b.len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
        qr_log(QR_LOG_DEBUG, "pg: refusal not sent: %s", strerror(errno));
    qr_buf_free(&b);
    /* read what already came (a startup packet, at most 10000 bytes) so
     * that close sends FIN, not RST, which could discard the error before
     * the client reads it */
    shutdown(fd, SHUT_WR);
    char junk[4096];
    for (int i = 0; i < 4 && recv(fd, junk, sizeof junk, MSG_DONTWAIT) > 0; i++)
        ;
    close(fd);
}

static void *accept_main(void *arg)
{
    PgServer *s = arg;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, PGW_STACK_BYTES);
    struct pollfd p[2] = {{.fd = s->lfd, .events = POLLIN},
                          {.fd = s->stop_pipe[0], .events = POLLIN}};
    for (;;) {
        /* startup deadlines: kick the late, sleep until the next one */
        uint64_t now = qr_now_ns();
        uint64_t next = conn_guard_expire(&s->guard, now);
        int wait_ms = 1000;
        if (next && (next - now) / 1000000 + 1 < (uint64_t)wait_ms)
            wait_ms = (int)((next - now) / 1000000 + 1);
        int n = poll(p, 2, wait_ms);
        reap(s);
        check_gone_clients(s);
        if (n < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (n <= 0 || !(p[0].revents & POLLIN))
            continue;
        struct sockaddr_storage peer;
        socklen_t pl = sizeof peer;
        int fd = accept4(s->lfd, (struct sockaddr *)&peer, &pl, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE)
                usleep(10000); /* out of descriptors: back off, do not spin */
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
        /* the guard keeps live connections within max_connections +
         * PGW_EXTRA_THREADS; this bounds threads that are still closing */
        pthread_mutex_lock(&s->mu);
        bool over = s->n_threads >= s->cfg.max_connections + PGW_EXTRA_THREADS + PGW_HARD_EXTRA ||
                    s->stopping;
        pthread_mutex_unlock(&s->mu);
        if (over) {
            close(fd);
            continue;
        }
        PgConn *c = qr_calloc(1, sizeof *c);
        uint8_t *rb = qr_malloc(PGW_RBUF_INIT);
        if (!c || !rb) {
            qr_free(c);
            qr_free(rb);
            close(fd);
            continue;
        }
        char client[64];
        uint64_t t_acc = qr_now_ns();
        if (conn_guard_add(&s->guard, &c->slot, fd, &peer, t_acc,
                           t_acc + (uint64_t)s->cfg.auth_timeout_s * 1000000000ull,
                           client) != QR_OK) {
            qr_free(c);
            qr_free(rb);
            refuse_client(s, fd, client);
            continue;
        }
        c->srv = s;
        c->fd = fd;
        c->rbuf = rb;
        c->rcap = PGW_RBUF_INIT;
        c->peer_loopback = netaddr_is_loopback(&peer);
        qr_buf_init(&c->out);
        c->key = (int32_t)random_u32();
        pthread_mutex_lock(&s->mu);
        c->pid = ++s->next_pid;
        if (s->next_pid >= 0x3fffffff)
            s->next_pid = 0;
        registry_add(s, c);
        s->n_threads++;
        pthread_t t;
        int rc = pthread_create(&t, &attr, conn_main, c);
        if (rc != 0) {
            registry_remove(s, c);
            s->n_threads--;
        }
        pthread_mutex_unlock(&s->mu);
        if (rc != 0) {
            qr_log(QR_LOG_WARN, "pg: cannot start a connection thread: %s", strerror(rc));
            conn_guard_remove(&s->guard, &c->slot);
            close(fd);
            qr_free(c->rbuf);
            qr_free(c);
        }
    }
    pthread_attr_destroy(&attr);
    return NULL;
}

int pg_server_start(QrDb *db, const PgConfig *cfg, PgServer **out, QrError *err)
{
    *out = NULL;
    struct sockaddr_storage ss;
    socklen_t sl;
    bool loopback;
    int rc = netaddr_parse_listen(cfg->listen, &ss, &sl, &loopback, err);
    if (rc != QR_OK)
        return rc;
    if (!loopback) {
        ScramUsers users;
        rc = scram_users_load(qr_db_dir(db), &users, err);
        if (rc != QR_OK)
            return rc;
        int n = users.n;
        scram_users_free(&users);
        if (n == 0) {
            qr_error_set(err, QR_EPERM,
                         "refusing to listen on %s for PostgreSQL clients without a user",
                         cfg->listen);
            qr_error_detail(err, "with no user configured, anyone who can reach the address "
                                 "could read and change every table");
            qr_error_hint(err, "create a user first (quarry user add NAME --data DIR reads "
                               "the password from stdin), or listen on 127.0.0.1");
            return QR_EPERM;
        }
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return qr_error_set(err, QR_EIO, "cannot create a socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 512) != 0) {
        int e = errno;
        close(fd);
        qr_error_set(err, QR_EIO, "cannot listen on %s: %s", cfg->listen, strerror(e));
        if (e == EADDRINUSE)
            qr_error_hint(err, "another server uses the port; pick another with --pg");
        return QR_EIO;
    }
    PgServer *s = qr_calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    s->db = db;
    s->cfg = *cfg;
    s->lfd = fd;
    s->need_auth_remote = !loopback;
    if (cfg->tls_cert[0] &&
        pgw_tls_ctx_new(cfg->tls_cert, cfg->tls_key[0] ? cfg->tls_key : cfg->tls_cert,
                        &s->tls_ctx, err) != QR_OK) {
        close(fd);
        qr_free(s);
        return err ? err->code : QR_EINVAL;
    }
    if (pipe2(s->stop_pipe, O_CLOEXEC) != 0) {
        close(fd);
        pgw_tls_ctx_free(s->tls_ctx);
        qr_free(s);
        return qr_error_set(err, QR_EIO, "cannot create a pipe: %s", strerror(errno));
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    conn_guard_init(&s->guard, "pg", cfg->max_connections + PGW_EXTRA_THREADS,
                    cfg->max_connections_per_ip, PGW_CANCEL_EXTRA, kick, s);
    struct sockaddr_storage bound;
    socklen_t bl = sizeof bound;
    getsockname(fd, (struct sockaddr *)&bound, &bl);
    netaddr_format(&bound, s->addr, sizeof s->addr);
    rc = pthread_create(&s->accept_thr, NULL, accept_main, s);
    if (rc != 0) {
        close(fd);
        close(s->stop_pipe[0]);
        close(s->stop_pipe[1]);
        pgw_tls_ctx_free(s->tls_ctx);
        conn_guard_destroy(&s->guard);
        qr_free(s);
        return qr_error_set(err, QR_EIO, "cannot start the accept thread: %s", strerror(rc));
    }
    *out = s;
    return QR_OK;
}

void pg_server_stop(PgServer *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_mutex_unlock(&s->mu);
    /* wakes the accept thread and every connection waiting for input */
    if (write(s->stop_pipe[1], "x", 1) < 0)
        qr_log(QR_LOG_WARN, "pg: stop pipe: %s", strerror(errno));
    pthread_join(s->accept_thr, NULL);
    close(s->lfd);
    /* running statements: ask them to stop, then wait */
    pthread_mutex_lock(&s->mu);
    for (PgConn *c = s->conns; c; c = c->reg_next)
        if (c->sess)
            qr_sql_session_cancel(c->sess);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += s->cfg.shutdown_timeout_s;
    while (s->n_threads > 0)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &until) != 0)
            break;
    /* still there (a client not reading its results): cut the sockets */
    for (PgConn *c = s->conns; c; c = c->reg_next)
        shutdown(c->fd, SHUT_RDWR);
    while (s->n_threads > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->n_zombies; i++)
        pthread_join(s->zombies[i], NULL);
    qr_free(s->zombies);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    pgw_tls_ctx_free(s->tls_ctx);
    conn_guard_destroy(&s->guard);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    qr_free(s);
}
