/*
 * netaddr.h — listen addresses for the servers of `quarry serve` (HTTP,
 * PostgreSQL): "HOST:PORT", "[v6]:PORT" or ":PORT", and whether an address
 * is loopback (the servers refuse non-loopback without authentication).
 *
 * Layer: server/.  Calls libc and the base kit.
 */
#ifndef QR_NETADDR_H
#define QR_NETADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "store/error.h"

/* Split an authority "host", "host:port", "[v6]" or "[v6]:port" (the
 * first n bytes of s): the host without brackets into host[cap] and the
 * port text (*port, NULL when none).  False when malformed or too long. */
bool netaddr_split(const char *s, size_t n, char *host, size_t cap, const char **port);
/* Resolve a listen spec (numeric port 0..65535; an empty host is
 * 127.0.0.1).  QR_EINVAL with a hint on a malformed or unresolvable spec. */
int netaddr_parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *sl,
                         bool *loopback, QrError *err);
/* 127.0.0.0/8, ::1, ::ffff:127.x.y.z, or a Unix socket. */
bool netaddr_is_loopback(const struct sockaddr_storage *ss);
/* "127.0.0.1:5433" / "[::1]:5433" for a bound socket address. */
void netaddr_format(const struct sockaddr_storage *ss, char *out, size_t cap);

/* The client a peer address belongs to, for per-client connection limits:
 * an IPv4 address (also when v4-mapped in IPv6), or an IPv6 /64 (one
 * host commonly holds a whole /64).  Writes up to NETADDR_KEY_MAX bytes
 * to key and returns their count; 0 for other families (no client key).
 * name (may be NULL) gets "127.0.0.2" or "2001:db8:1:2::/64". */
#define NETADDR_KEY_MAX 8
int netaddr_client_key(const struct sockaddr_storage *ss, uint8_t *key, char *name,
                       size_t name_cap);

#endif
