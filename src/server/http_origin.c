/*
 * http_origin.c — what a browser may make the server do when no API key
 * protects it (the default on loopback): DNS rebinding and cross-site
 * request forgery.
 *
 * Layer: server/.  Calls server/netaddr.h, libc and the base kit.
 *
 * A page from any web site can make the user's browser send requests to
 * 127.0.0.1.  Without keys nothing would tell them from the user's own:
 *
 * - DNS rebinding: the attacker's name resolves first to their server,
 *   then to 127.0.0.1, so their page reads our answers as same-origin.
 *   The request still carries their name in Host.  So Host must be a
 *   loopback name (localhost, *.localhost, 127.0.0.0/8, [::1]), the
 *   listen address (any IP literal when listening on a wildcard address:
 *   a literal cannot be rebound), or a name in allowed_hosts ("*" = any).
 * - Cross-site writes: a page cannot read our answers, but its form posts
 *   and no-cors fetches are sent.  Browsers name the page's origin in
 *   Origin on every POST/PUT/DELETE, and without a preflight they may only
 *   send text/plain, application/x-www-form-urlencoded or
 *   multipart/form-data bodies.  So a write (any method but GET and HEAD)
 *   is refused when Origin is not the server's own (the admin page) or a
 *   name in allowed_hosts, when its Content-Type is one of those three, and
 *   when a route that takes a body gets no Content-Type.  Body-less
 *   writes (flush, merge, DELETE) may come without one: a browser's carry
 *   Origin.
 *
 * With API keys in force none of this applies: a page cannot attach the
 * key (it is not a cookie), and remote clients use their own names.
 *
 * CORS (cors_origins, off by default): pages of the origins named there
 * may read answers (Access-Control-Allow-Origin on every answer, errors
 * included) and send preflighted requests (JSON bodies, Authorization).
 * Without keys a named origin also counts as the server's own for writes;
 * "*" is honoured only while keys are in force, since without them it
 * would let every web site read the data through the user's browser.
 */
#include "server/http_int.h"
#include "server/netaddr.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define HOST_MAX 256

/* what a page may send without a preflight (CORS-safelisted), and <a ping> */
static const char *const SIMPLE_TYPES[] = {"text/plain", "application/x-www-form-urlencoded",
                                           "multipart/form-data", "text/ping"};

/* Is w[0..wl) one of the comma- or space-separated entries of `list`
 * (case-insensitive, an entry's trailing '/' ignored)?  "*" matches
 * anything when star_ok. */
static bool in_list(const char *list, const char *w, size_t wl, bool star_ok)
{
    const char *p = list;
    while (*p) {
        while (*p == ',' || *p == ' ')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        size_t n = (size_t)(e - p);
        while (n > 1 && p[n - 1] == '/')
            n--;
        if ((n == 1 && *p == '*' && star_ok) || (n && n == wl && !strncasecmp(p, w, n)))
            return true;
        p = e;
    }
    return false;
}

/* Is `host` one of the names of allowed_hosts ("*" is any)? */
static bool allowed_name(const HttpServer *s, const char *host)
{
    return in_list(s->cfg.allowed_hosts, host, strlen(host), true);
}

/* The host of an authority, lowercased, without brackets, port or a
 * trailing dot ("LocalHost.:80" -> "localhost").  False when malformed. */
static bool authority_host(const char *a, size_t n, char *host)
{
    const char *port;
    if (!netaddr_split(a, n, host, HOST_MAX, &port) || !host[0])
        return false;
    for (char *c = host; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    size_t l = strlen(host);
    if (l > 1 && host[l - 1] == '.')
        host[l - 1] = 0;
    return true;
}

/* May a request name `host` (lowercase, from authority_host)? */
static bool host_ok(const HttpServer *s, const char *host)
{
    size_t l = strlen(host);
    if (!strcmp(host, "localhost") || (l > 10 && !strcmp(host + l - 10, ".localhost")))
        return true;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    const struct sockaddr_storage *ls = &s->listen_ss;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        ss.ss_family = AF_INET;
        if (netaddr_is_loopback(&ss))
            return true;
        if (ls->ss_family == AF_INET) {
            const struct sockaddr_in *l4 = (const struct sockaddr_in *)ls;
            if (l4->sin_addr.s_addr == INADDR_ANY || l4->sin_addr.s_addr == v4->sin_addr.s_addr)
                return true;
        }
        if (ls->ss_family == AF_INET6 &&
            IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)ls)->sin6_addr))
            return true;
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        ss.ss_family = AF_INET6;
        if (netaddr_is_loopback(&ss))
            return true;
        if (ls->ss_family == AF_INET6) {
            const struct in6_addr *l6 = &((const struct sockaddr_in6 *)ls)->sin6_addr;
            if (IN6_IS_ADDR_UNSPECIFIED(l6) || !memcmp(l6, &v6->sin6_addr, sizeof *l6))
                return true;
        }
    } else {
        /* a name: the one the server was told to listen on */
        char lh[HOST_MAX];
        if (authority_host(s->cfg.http, strlen(s->cfg.http), lh) && !strcmp(lh, host))
            return true;
    }
    return allowed_name(s, host);
}

void http_origin_check(HttpReq *r)
{
    const HttpServer *s = r->srv;
    char host[HOST_MAX];
    const char *h = http_req_header(r, MHD_HTTP_HEADER_HOST);
    if (h && !(authority_host(h, strlen(h), host) && host_ok(s, host))) {
        http_error(r, QR_EPERM, "requests for host \"%.80s\" are not served", h);
        http_error_detail(r, "a page of another site can point its own name at this address "
                             "(DNS rebinding)");
        http_error_hint(r, "without API keys the server answers requests for localhost, its "
                           "loopback or listen address and the names in allowed_hosts; add "
                           "the name there, or make a key (quarry key add NAME)");
        return;
    }
    if (r->method == HM_GET || r->method == HM_HEAD)
        return;
    const char *o = http_req_header(r, "Origin");
    if (o) {
        const char *a = strstr(o, "://");
        bool same = (a && h && !strcasecmp(a + 3, h)) || http_cors_allowed(s, o, false);
        if (!same && !(a && authority_host(a + 3, strlen(a + 3), host) && allowed_name(s, host))) {
            http_error(r, QR_EPERM, "%s from origin \"%.80s\" is refused", r->method_name, o);
            http_error_detail(r, "without API keys, writes are taken from the server's own "
                                 "pages and from clients that send no Origin");
            http_error_hint(r, "add the page's host to allowed_hosts, or make a key (quarry "
                               "key add NAME)");
            return;
        }
    }
    const char *ct = http_req_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
    char mt[64] = "";
    if (ct) {
        size_t k = 0;
        while (*ct == ' ')
            ct++;
        for (; *ct && *ct != ';' && *ct != ' ' && k + 1 < sizeof mt; ct++)
            mt[k++] = (char)tolower((unsigned char)*ct);
        mt[k] = 0;
    }
    bool simple = false;
    for (size_t i = 0; i < sizeof SIMPLE_TYPES / sizeof SIMPLE_TYPES[0]; i++)
        simple |= !strcmp(mt, SIMPLE_TYPES[i]);
    if (simple || (!ct && HTTP_ROUTES[r->route].body != HB_NONE)) {
        if (simple)
            http_error(r, HTTP_EMEDIA, "Content-Type \"%s\" is not accepted for %s without API "
                                       "keys", mt, r->method_name);
        else
            http_error(r, HTTP_EMEDIA, "%s needs a Content-Type", r->method_name);
        http_error_detail(r, "any web page can make a browser send text/plain, form and "
                             "multipart bodies here");
        http_error_hint(r, "send JSON as application/json and JSON lines as "
                           "application/x-ndjson (curl: -H 'Content-Type: application/json')");
    }
}

/* ---- CORS ---- */

bool http_cors_allowed(const HttpServer *s, const char *origin, bool keys_on)
{
    size_t ol = strlen(origin);
    while (ol && origin[ol - 1] == '/')
        ol--;
    return in_list(s->cfg.cors_origins, origin, ol, keys_on);
}

/* The allowed Origin of r, or NULL. */
static const char *cors_origin(HttpReq *r, bool keys_on)
{
    const char *o = http_req_header(r, "Origin");
    return o && r->srv->cfg.cors_origins[0] && http_cors_allowed(r->srv, o, keys_on) ? o : NULL;
}

void http_cors_headers(HttpReq *r)
{
    if (!r->srv->cfg.cors_origins[0])
        return;
    int n_keys = r->srv->keys ? apikey_count(r->srv->keys) : 0;
    const char *o = cors_origin(r, n_keys > 0 || (r->srv->remote && !r->srv->cfg.allow_remote));
    http_header(r, "Vary", "Origin");
    if (!o)
        return;
    http_header(r, "Access-Control-Allow-Origin", o);
    http_header(r, "Access-Control-Expose-Headers", "Location, Retry-After, WWW-Authenticate");
}

void http_cors_preflight(HttpReq *r, bool keys_on)
{
    char allow[96];
    http_methods_text(r->preflight_allow | HM_OPTIONS, allow, sizeof allow);
    const char *o = http_req_header(r, "Origin");
    const char *want = http_req_header(r, "Access-Control-Request-Method");
    if (o && want) {
        if (!cors_origin(r, keys_on)) {
            http_error(r, QR_EPERM, "cross-origin requests from \"%.80s\" are not allowed", o);
            if (r->srv->cfg.cors_origins[0])
                http_error_detail(r, "cors_origins is \"%.200s\"%s", r->srv->cfg.cors_origins,
                                  keys_on ? "" : " (\"*\" counts only while API keys exist)");
            else
                http_error_detail(r, "CORS is off (cors_origins is empty)");
            http_error_hint(r, "add the page's origin (scheme://host:port) to cors_origins in "
                               "the server config");
            return;
        }
        http_header(r, "Access-Control-Allow-Methods", allow);
        http_header(r, "Access-Control-Allow-Headers",
                    "Authorization, Content-Type, Content-Encoding");
        http_header(r, "Access-Control-Max-Age", "600");
    }
    http_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    http_reply(r, 204, NULL, NULL);
}
