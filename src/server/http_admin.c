/*
 * http_admin.c — serves the admin page and its assets (embedded in the
 * binary by http_assets.c, generated from src/server/admin/).
 *
 * Layer: server/.  Calls libmicrohttpd through http.c's reply helpers.
 *
 * The page is a static single-page app that talks only to the JSON API
 * (/stats, /stats/queries, /tables..., /metrics), so it needs no server
 * templating.  A Content-Security-Policy keeps it to its own origin: no
 * CDN, no inline script, works offline.
 */
#include "server/http_int.h"

#include <stdio.h>
#include <string.h>

#define CSP "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; " \
            "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

void http_admin_asset(HttpReq *r)
{
    char path[96] = "/";
    if (!strcmp(HTTP_ROUTES[r->route].pattern, "/openapi.yaml"))
        snprintf(path, sizeof path, "%s", "/openapi.yaml");
    else if (r->id && strlen(r->id) < sizeof path - 8)
        snprintf(path, sizeof path, "/admin/%s", r->id);
    for (int i = 0; i < HTTP_N_ASSETS; i++)
        if (!strcmp(HTTP_ASSETS[i].path, path)) {
            if (i == 0)
                http_header(r, "Content-Security-Policy", CSP);
            http_reply_static(r, HTTP_ASSETS[i].content_type, HTTP_ASSETS[i].data,
                              HTTP_ASSETS[i].len, HTTP_ASSETS[i].etag);
            return;
        }
    http_error(r, QR_ENOTFOUND, "no such admin asset: %.60s", path);
}
