/*
 * conn_guard.h — who may hold a connection of one listener (the HTTP or
 * the PostgreSQL port) and for how long it may keep the server waiting.
 *
 * Layer: server/.  Calls server/netaddr.h and the base kit.
 *
 * Three rules, the defence against clients that open many sockets and send
 * a byte now and then (slowloris):
 *
 *   per client   at most max_per_client live connections from one client
 *                address (an IPv4 address or an IPv6 /64; netaddr.h); a
 *                connection beyond is refused before it is served.  A port
 *                may allow extra_per_client more, marked over_client_limit,
 *                for requests that must get through anyway (a PG
 *                CancelRequest from a client whose sessions fill its share)
 *   global       at most max_conns live connections: a new one makes room
 *                by closing the connection that has been WAITING longest,
 *                so the newcomer (a health check, a login) gets in as long
 *                as any connection is only waiting; BUSY ones are never
 *                closed for room
 *   deadline     a WAITING connection must become BUSY by its deadline
 *                (request headers, startup and authentication), counted
 *                from when it started waiting however slowly bytes come
 *
 * WAITING means the server waits for the client: for a request's headers,
 * for the startup packet and the authentication exchange, or idle between
 * keep-alive requests.  BUSY means the server works for the client (a
 * request is read or run, a PG session is open).
 *
 * Closing is the port's kick callback: only the port knows whether it may
 * still write an error to the socket (plain HTTP before a reply, the PG
 * startup phase) and how to wake its thread.  The guard calls kick under
 * its lock, once per slot; a kicked slot no longer counts as live.  A slot
 * lives inside the port's connection record from conn_guard_add to
 * conn_guard_remove, and the port closes the socket only after
 * conn_guard_remove, so a kick never reaches a reused descriptor.
 */
#ifndef QR_CONN_GUARD_H
#define QR_CONN_GUARD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "server/netaddr.h"

typedef enum ConnState { CONN_WAITING, CONN_BUSY } ConnState;
typedef enum ConnKick { CONN_KICK_NONE, CONN_KICK_TIMEOUT, CONN_KICK_EVICTED } ConnKick;

/* One connection.  Fields below `fd` are the guard's (read them under its
 * lock or after conn_guard_remove). */
typedef struct ConnSlot {
    int fd;                           /* borrows the port's socket (kick shuts it down) */
    struct ConnSlot *prev, *next;     /* the guard's list, in order of arrival */
    uint8_t key[NETADDR_KEY_MAX];     /* client address key */
    int key_len;                      /* 0: not counted per client */
    ConnState state;
    ConnKick kicked;                  /* why kick() was called, or NONE */
    bool over_client_limit;           /* admitted into extra_per_client (set at add) */
    uint64_t since_ns;                /* WAITING: waiting since (eviction order) */
    uint64_t deadline_ns;             /* WAITING: kicked after this (0 = never) */
} ConnSlot;

/* Close a connection: called under the guard's lock, at most once per
 * slot; must not block nor call the guard. */
typedef void (*ConnKickFn)(ConnSlot *slot, ConnKick why, void *arg);

typedef struct ConnGuard {
    pthread_mutex_t mu;               /* guards the list, counts and log state */
    ConnSlot *head, *tail;            /* every added slot, oldest first */
    int n_live;                       /* added and not kicked */
    int max_conns;                    /* live connections before one is evicted */
    int max_per_client;               /* 0 = no per-client limit */
    int extra_per_client;             /* admitted beyond it, marked over_client_limit */
    const char *what;                 /* "http" / "pg": log lines */
    ConnKickFn kick;
    void *kick_arg;
    atomic_uint_fast64_t n_refused;   /* refused: over max_per_client */
    atomic_uint_fast64_t n_evicted;   /* kicked to make room */
    atomic_uint_fast64_t n_timed_out; /* kicked at their deadline */
    uint64_t log_ns;                  /* last refusal log line */
    uint64_t log_skipped;             /* refusals not logged since */
} ConnGuard;

void conn_guard_init(ConnGuard *g, const char *what, int max_conns, int max_per_client,
                     int extra_per_client, ConnKickFn kick, void *kick_arg);
/* Slots still added are forgotten, not kicked. */
void conn_guard_destroy(ConnGuard *g);

/* Admit a new connection from peer: QR_EBUSY (nothing added; counted and
 * logged at most once a second) when its client already has
 * max_per_client + extra_per_client live connections, with client_name
 * (may be NULL, 64 bytes) naming it; beyond max_per_client alone s is
 * admitted with over_client_limit set.  Otherwise, when max_conns connections are live, kick the
 * one WAITING longest (CONN_KICK_EVICTED; none when all are BUSY), then add
 * s as WAITING since now_ns until deadline_ns (0 = no deadline). */
int conn_guard_add(ConnGuard *g, ConnSlot *s, int fd, const struct sockaddr_storage *peer,
                   uint64_t now_ns, uint64_t deadline_ns, char *client_name);
void conn_guard_remove(ConnGuard *g, ConnSlot *s);

/* The server waits for the client again: WAITING since now_ns with
 * deadline_ns; when s already waits, its start stays and the earlier
 * deadline wins (0 counts as none). */
void conn_guard_wait(ConnGuard *g, ConnSlot *s, uint64_t now_ns, uint64_t deadline_ns);
/* The client is served: BUSY, no deadline.  false when s was kicked (the
 * port must then drop the connection, not serve it). */
bool conn_guard_busy(ConnGuard *g, ConnSlot *s);
/* Why s was kicked (CONN_KICK_NONE when not). */
ConnKick conn_guard_kicked(ConnGuard *g, ConnSlot *s);

/* Kick every WAITING slot whose deadline is <= now_ns (CONN_KICK_TIMEOUT).
 * Returns the earliest deadline still ahead, 0 when none. */
uint64_t conn_guard_expire(ConnGuard *g, uint64_t now_ns);
/* Live connections (added, not kicked). */
int conn_guard_live(ConnGuard *g);

#endif
