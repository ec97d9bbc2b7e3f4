/*
 * netaddr.c — listen addresses shared by the HTTP and PostgreSQL servers
 * (see netaddr.h).
 *
 * Layer: server/.  Calls libc and the base kit.
 */
#include "server/netaddr.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool netaddr_is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return true;
        if (IN6_IS_ADDR_V4MAPPED(a))
            return a->s6_addr[12] == 127;
    }
    return ss->ss_family == AF_UNIX;
}

bool netaddr_split(const char *s, size_t n, char *host, size_t cap, const char **port)
{
    const char *end = s + n, *h = s, *he;
    *port = NULL;
    if (n && s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        if (!rb || (rb + 1 < end && rb[1] != ':'))
            return false;
        h = s + 1;
        he = rb;
        if (rb + 1 < end)
            *port = rb + 2;
    } else {
        const char *colon = NULL;
        for (const char *p = s; p < end; p++)
            if (*p == ':')
                colon = p;
        he = colon ? colon : end;
        if (colon)
            *port = colon + 1;
    }
    if ((size_t)(he - h) >= cap)
        return false;
    memcpy(host, h, (size_t)(he - h));
    host[he - h] = 0;
    return true;
}

/* "host:port", "[v6]:port" or ":port" into a socket address. */
int netaddr_parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *sl,
                         bool *loopback, QrError *err)
{
    char host[128];
    const char *port;
    if (!netaddr_split(spec, strlen(spec), host, sizeof host, &port) || !port)
        goto bad;
    if (!host[0])
        strcpy(host, "127.0.0.1");
    char *end;
    long p = strtol(port, &end, 10);
    if (!*port || *end || p < 0 || p > 65535)
        goto bad;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai) {
        qr_error_set(err, QR_EINVAL, "cannot resolve listen address \"%s\"", spec);
        return QR_EINVAL;
    }
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *sl = ai->ai_addrlen;
    freeaddrinfo(ai);
    *loopback = netaddr_is_loopback(ss);
    return QR_OK;
bad:
    qr_error_set(err, QR_EINVAL, "bad listen address \"%s\"", spec);
    qr_error_hint(err, "use HOST:PORT, e.g. 127.0.0.1:5433 or [::1]:5433");
    return QR_EINVAL;
}

void netaddr_format(const struct sockaddr_storage *ss, char *out, size_t cap)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        snprintf(out, cap, "[%s]:%d", host, ntohs(a->sin6_port));
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        snprintf(out, cap, "%s:%d", host, ntohs(a->sin_port));
    }
}

int netaddr_client_key(const struct sockaddr_storage *ss, uint8_t *key, char *name,
                       size_t name_cap)
{
    const uint8_t *a;
    int n;
    if (ss->ss_family == AF_INET) {
        a = (const uint8_t *)&((const struct sockaddr_in *)ss)->sin_addr;
        n = 4;
    } else if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        bool mapped = IN6_IS_ADDR_V4MAPPED(a6);
        a = a6->s6_addr + (mapped ? 12 : 0);
        n = mapped ? 4 : 8;
    } else {
        if (name && name_cap)
            snprintf(name, name_cap, "local");
        return 0;
    }
    memcpy(key, a, (size_t)n);
    if (name && name_cap) {
        char host[INET6_ADDRSTRLEN] = "?";
        if (n == 4) {
            inet_ntop(AF_INET, a, host, sizeof host);
            snprintf(name, name_cap, "%s", host);
        } else {
            uint8_t net[16] = {0};
            memcpy(net, a, 8);
            inet_ntop(AF_INET6, net, host, sizeof host);
            snprintf(name, name_cap, "%s/64", host);
        }
    }
    return n;
}
