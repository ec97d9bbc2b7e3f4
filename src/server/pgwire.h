/*
 * pgwire.h — the PostgreSQL wire protocol port of `quarry serve --pg`.
 *
 * Layer: server/.  Calls query/sql.h, query/quarry.h, server/scram.h and the
 * base kit.  docs/pg-protocol.md is the manual.
 *
 * One PgServer serves one open QrDb (shared with the HTTP server) on one
 * TCP address: an accept thread and one thread per connection (blocking
 * I/O).  Connections are admitted by a conn_guard.h: per client address,
 * and when max_connections sessions plus 64 starting ones are open, the
 * connection longest in its startup phase is closed for a new one.  Each connection owns one SQL session (query/sql.h).  Idle
 * connections cost their thread's touched stack pages, an 8 KB read buffer
 * and the session.
 *
 * Authentication: when <data>/pg_users.json names at least one user
 * (`quarry user add NAME`), every connection must pass SCRAM-SHA-256;
 * with no users, connections from loopback are trusted (any user name) and
 * others are refused.  Listening on a non-loopback address with no user
 * configured refuses to start (QR_EPERM, with a hint).
 */
#ifndef QR_PGWIRE_H
#define QR_PGWIRE_H

#include <stdbool.h>
#include <stdint.h>

#include "query/quarry.h"

typedef struct PgConfig {
    char listen[128];           /* "HOST:PORT" (port 0 = any free port) */
    int max_connections;        /* client sessions (53300 beyond) */
    int max_connections_per_ip; /* connections from one client address, IPv4 or IPv6 /64
                                   (53300 beyond; 0 = no limit) */
    uint64_t max_message_bytes; /* largest frontend message (08P01 + close beyond) */
    int auth_timeout_s;         /* startup + authentication must finish this long after
                                   the accept, however slowly bytes come (57014 + close) */
    uint64_t statement_timeout_ms; /* ceiling on every statement: SET statement_timeout
                                   can lower it, not raise it (57014; 0 = none) */
    int shutdown_timeout_s;     /* wait for running queries on stop, then close */
    char tls_cert[512];         /* PEM certificate chain: SSLRequest gets 'S' ("" = 'N') */
    char tls_key[512];          /* PEM private key of tls_cert */
    /* called after each statement runs (simple query, or an extended
     * protocol Execute's first run), from the connection's thread: its
     * text, rows, time, QR_OK or the error's code, and the table accesses
     * run (QrSqlResult.plan, may be NULL).  NULL = none.  The query history
     * of `quarry serve` (the admin page) is fed this way. */
    void (*on_statement)(void *arg, const char *sql, size_t len, uint64_t rows, double took_ms,
                         int code, const char *plan);
    void *on_statement_arg;
} PgConfig;

void pg_config_default(PgConfig *c);

typedef struct PgServer PgServer;

/* Bind and start serving `db` (borrowed; it must outlive the server).
 * QR_EINVAL for a bad address, QR_EIO when the bind fails, QR_EPERM for a
 * non-loopback address without any configured user, QR_EINVAL when the
 * TLS certificate or key cannot be loaded. */
int pg_server_start(QrDb *db, const PgConfig *cfg, PgServer **out, QrError *err);
/* The bound address, "127.0.0.1:5433" (the real port when 0 was asked). */
const char *pg_server_addr(const PgServer *s);
/* Open client sessions right now. */
int pg_server_connections(PgServer *s);
/* Graceful stop: close the listener, end idle connections with FATAL
 * 57P01, cancel running queries and wait up to shutdown_timeout_s for them,
 * then close every socket, join every thread and free the server. */
void pg_server_stop(PgServer *s);

#endif
