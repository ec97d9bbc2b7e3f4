/*
 * test_peers.c — the other nodes' BM25 statistics over HTTP (server/peers.c,
 * server/http_client.c, POST /tables/{t}/bm25_stats in http_tables.c): a
 * real HTTP server in this process holds the peer's table; the QrStatsSource
 * of peers_new is called as search.c calls it.
 *
 * Checked against qr_table_bm25_stats of the peer's table (what the peer
 * holds, exactly): the totals and counts added; the cache (a repeated query
 * is one request answered "unchanged", a new term one more request); a
 * write on the peer refreshes every cached count (one request finds the new
 * generation, one more asks for every term); an unreachable peer fails with
 * QR_EUNAVAILABLE naming it, or answers with a warning when configured; one
 * that accepts and never answers ends at the timeout the same way; a
 * peer without the table refuses with its 404; URLs are parsed strictly.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine_util.h"
#include "server/http.h"
#include "server/http_client.h"
#include "server/peers.h"
#include "store/util.h"

static char *pdir, *ldir;
static QrDb *pdb, *ldb;        /* the peer's database, this node's */
static QrTable *pt, *lt;
static HttpServer *srv;
static char url[200];

static const char *SCHEMA = "{\"primary_key\":\"id\",\"fields\":["
                            "{\"name\":\"title\",\"type\":\"text\",\"language\":\"english\"},"
                            "{\"name\":\"body\",\"type\":\"text\",\"language\":\"none\"}]}";

static QrTable *open_db(const char *tag, char **dir, QrDb **db)
{
    *dir = eu_tmpdir(tag);
    QrDbOpts o;
    qr_db_opts_default(&o);
    o.fsync = QR_FSYNC_OFF;
    o.background_merge = false;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_db_open(*dir, &o, db, &err), QR_OK, "%s", err.message);
    QrSchema s;
    cr_assert_eq(schema_from_json(SCHEMA, strlen(SCHEMA), &s, &err), QR_OK, "%s", err.message);
    QrTable *t;
    cr_assert_eq(qr_table_create(*db, "docs", &s, &t, &err), QR_OK, "%s", err.message);
    return t;
}

static void put_docs(QrTable *t, int from, int to)
{
    QrBatch *b;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_batch_begin(t, &b, &err), QR_OK);
    for (int i = from; i < to; i++) {
        char doc[256];
        snprintf(doc, sizeof doc, "{\"id\":%d,\"title\":\"title %d\",\"body\":\"alpha %s %s\"}", i,
                 i, i % 3 ? "beta" : "gamma", i % 5 ? "delta" : "epsilon zeta");
        cr_assert_eq(qr_batch_put(b, doc, strlen(doc), NULL, &err), QR_OK, "%s", err.message);
    }
    cr_assert_eq(qr_batch_commit(b, &err), QR_OK, "%s", err.message);
    qr_batch_free(b);
}

static void setup(void)
{
    qr_log_set_level(QR_LOG_ERROR);
    pt = open_db("peer", &pdir, &pdb);
    lt = open_db("local", &ldir, &ldb);
    put_docs(pt, 0, 120);
    put_docs(lt, 1000, 1010);
    HttpConfig cfg;
    http_config_default(&cfg);
    snprintf(cfg.http, sizeof cfg.http, "127.0.0.1:0");
    cfg.log_requests = false;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(http_server_start(pdb, &cfg, &srv, &err), QR_OK, "%s", err.message);
    snprintf(url, sizeof url, "http://%s", http_server_addr(srv));
}

static void teardown(void)
{
    http_server_stop(srv);
    qr_db_close(pdb);
    qr_db_close(ldb);
    eu_rmtree(pdir);
    eu_rmtree(ldir);
    free(pdir);
    free(ldir);
}

TestSuite(peers, .init = setup, .fini = teardown);

static Peers *peers_of(const char *urls, bool warn)
{
    PeerOpts o = {.urls = urls, .warn_unreachable = warn, .timeout_ms = 10000};
    Peers *p;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(peers_new(&o, &p, &err), QR_OK, "%s", err.message);
    return p;
}

/* One call as search.c makes it: *st and terms[].df start at zero. */
static int ask(Peers *p, QrBm25Stats *st, QrTermStat *terms, int n, const char **warning,
               QrError *err)
{
    memset(st, 0, sizeof *st);
    for (int i = 0; i < n; i++)
        terms[i].df = 0;
    *warning = NULL;
    qr_error_clear(err);
    QrArena *a = qr_arena_new(1 << 20);
    const QrStatsSource *src = peers_source(p);
    int rc = src->add(src->arg, lt, st, terms, n, a, warning, err);
    if (*warning) { /* arena text: keep a copy past the arena */
        static char w[1024];
        snprintf(w, sizeof w, "%s", *warning);
        *warning = w;
    }
    qr_arena_free(a);
    return rc;
}

/* The peer's own numbers for the same terms. */
static void truth(QrBm25Stats *st, QrTermStat *terms, int n)
{
    QrTermStat *t = calloc((size_t)n, sizeof *t);
    memcpy(t, terms, (size_t)n * sizeof *t);
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_table_bm25_stats(pt, st, t, n, &err), QR_OK);
    for (int i = 0; i < n; i++)
        terms[i].df = t[i].df;
    free(t);
}

static void same(const QrBm25Stats *got, QrTermStat *gt, QrTermStat *want_terms, int n)
{
    QrBm25Stats want;
    truth(&want, want_terms, n);
    cr_assert_eq(got->n_docs, want.n_docs, "docs %llu, the peer holds %llu",
                 (unsigned long long)got->n_docs, (unsigned long long)want.n_docs);
    for (int f = 0; f <= QR_ALL_FIELD; f++) {
        cr_assert_eq(got->field_tokens[f], want.field_tokens[f], "tokens of field %d", f);
        cr_assert_eq(got->field_docs[f], want.field_docs[f], "docs of field %d", f);
    }
    for (int i = 0; i < n; i++)
        cr_assert_eq(gt[i].df, want_terms[i].df, "df of %s: %llu, the peer %llu", gt[i].text,
                     (unsigned long long)gt[i].df, (unsigned long long)want_terms[i].df);
}

#define TERM(f, w) {.field = (f), .text = (w), .len = sizeof(w) - 1}

Test(peers, statistics_cached_and_refreshed_on_writes)
{
    Peers *p = peers_of(url, false);
    QrTermStat t[4] = {TERM(1, "beta"), TERM(1, "epsilon"), TERM(QR_ALL_FIELD, "alpha"),
                       TERM(1, "nowhere")};
    QrTermStat w[4];
    memcpy(w, t, sizeof t);
    QrBm25Stats st;
    const char *warning;
    QrError err;
    uint64_t req, unch;
    cr_assert_eq(ask(p, &st, t, 4, &warning, &err), QR_OK, "%s: %s", err.message, err.detail);
    cr_assert_null(warning);
    same(&st, t, w, 4);
    cr_assert_gt(t[0].df, 0);
    cr_assert_eq(t[3].df, 0);
    peers_counters(p, &req, &unch);
    cr_assert_eq(req, 1);
    cr_assert_eq(unch, 0);
    /* the same query again: every count cached, one request says nothing changed */
    cr_assert_eq(ask(p, &st, t, 4, &warning, &err), QR_OK, "%s", err.message);
    same(&st, t, w, 4);
    peers_counters(p, &req, &unch);
    cr_assert_eq(req, 2);
    cr_assert_eq(unch, 1);
    /* a new term: still one request */
    QrTermStat t2[2] = {TERM(1, "beta"), TERM(1, "zeta")}, w2[2];
    memcpy(w2, t2, sizeof t2);
    cr_assert_eq(ask(p, &st, t2, 2, &warning, &err), QR_OK, "%s", err.message);
    same(&st, t2, w2, 2);
    peers_counters(p, &req, &unch);
    cr_assert_eq(req, 3);
    cr_assert_eq(unch, 2);
    /* a write on the peer: a new generation, and the cached counts are asked again */
    put_docs(pt, 500, 560);
    cr_assert_eq(ask(p, &st, t, 4, &warning, &err), QR_OK, "%s", err.message);
    same(&st, t, w, 4);
    peers_counters(p, &req, &unch);
    cr_assert_eq(req, 5, "%llu requests", (unsigned long long)req);
    cr_assert_eq(unch, 2);
    peers_free(p);
}

Test(peers, unreachable_peer_fails_or_warns)
{
    /* a port nobody listens on: this server's, once stopped */
    HttpServer *gone;
    HttpConfig cfg;
    http_config_default(&cfg);
    snprintf(cfg.http, sizeof cfg.http, "127.0.0.1:0");
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(http_server_start(ldb, &cfg, &gone, &err), QR_OK);
    char dead[200], both[420];
    snprintf(dead, sizeof dead, "http://%s", http_server_addr(gone));
    http_server_stop(gone);
    snprintf(both, sizeof both, "%s,%s", url, dead);
    QrTermStat t[1] = {TERM(1, "beta")}, w[1];
    memcpy(w, t, sizeof t);
    QrBm25Stats st;
    const char *warning;
    Peers *p = peers_of(both, false);
    cr_assert_eq(ask(p, &st, t, 1, &warning, &err), QR_EUNAVAILABLE);
    char want[300];
    snprintf(want, sizeof want, "could not reach peer \"%s\" for the BM25 statistics of table "
             "\"docs\"", dead);
    cr_assert_str_eq(err.message, want);
    cr_assert(strstr(err.detail, "connect"), "detail: %s", err.detail);
    cr_assert(strstr(err.hint, "--peer-unreachable warn"), "hint: %s", err.hint);
    peers_free(p);
    /* warn: the reachable peer's statistics, and a warning naming the other */
    p = peers_of(both, true);
    cr_assert_eq(ask(p, &st, t, 1, &warning, &err), QR_OK, "%s", err.message);
    same(&st, t, w, 1);
    cr_assert_not_null(warning);
    cr_assert(strstr(warning, "leave out 1 of 2 peers") && strstr(warning, dead), "%s", warning);
    peers_free(p);
}

Test(peers, peer_without_the_table_refuses)
{
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_table_drop(pdb, "docs", &err), QR_OK);
    Peers *p = peers_of(url, true); /* not unreachable: refused, which warn does not cover */
    QrTermStat t[1] = {TERM(1, "beta")};
    QrBm25Stats st;
    const char *warning;
    cr_assert_eq(ask(p, &st, t, 1, &warning, &err), QR_EUNAVAILABLE);
    cr_assert(strstr(err.message, "refused the BM25 statistics of table \"docs\""), "%s",
              err.message);
    cr_assert(strstr(err.detail, "HTTP 404"), "%s", err.detail);
    peers_free(p);
}

Test(peers, urls_are_parsed_strictly)
{
    HcUrl u;
    QrError err;
    static const char *bad[] = {"ftp://h", "http://", "http://h:0", "http://h:70000",
                                "http://h:8a", "http://user@h", "http://h/?q=1", "http://h/#f",
                                "http://[::1", "h:8080"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        qr_error_clear(&err);
        cr_assert_eq(hc_url_parse(bad[i], strlen(bad[i]), &u, &err), QR_EINVAL, "%s", bad[i]);
    }
    qr_error_clear(&err);
    const char *ok = "https://[::1]:8443/quarry/";
    cr_assert_eq(hc_url_parse(ok, strlen(ok), &u, &err), QR_OK, "%s", err.message);
    cr_assert(u.tls);
    cr_assert_str_eq(u.host, "::1");
    cr_assert_str_eq(u.port, "8443");
    cr_assert_str_eq(u.prefix, "/quarry");
    cr_assert_str_eq(u.text, "https://[::1]:8443/quarry");
    ok = "HTTP://node-2.example";
    cr_assert_eq(hc_url_parse(ok, strlen(ok), &u, &err), QR_OK);
    cr_assert_str_eq(u.port, "80");
    cr_assert_str_eq(u.prefix, "");
    PeerOpts o = {.urls = "http://a:1,http://a:1/"};
    Peers *p = NULL;
    cr_assert_eq(peers_new(&o, &p, &err), QR_EINVAL);
    cr_assert(strstr(err.message, "twice"), "%s", err.message);
    o.urls = " ,";
    qr_error_clear(&err);
    cr_assert_eq(peers_new(&o, &p, &err), QR_EINVAL);
    o.urls = "http://a:1";
    o.key_file = "/nonexistent/key";
    qr_error_clear(&err);
    cr_assert_neq(peers_new(&o, &p, &err), QR_OK);
    cr_assert_null(p);
}

/* A peer that accepts the connection and never answers (a listening socket
 * nobody accepts from: the kernel completes the handshake): the request
 * ends at --peer-timeout with QR_EUNAVAILABLE naming the peer, in warn mode
 * with a warning, instead of holding the query. */
Test(peers, silent_peer_ends_at_the_timeout, .timeout = 60) /* a bound for a hang only */
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(fd, 4), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    char silent[64];
    snprintf(silent, sizeof silent, "http://127.0.0.1:%d", ntohs(a.sin_port));
    QrTermStat t[1] = {TERM(1, "beta")};
    QrBm25Stats st;
    const char *warning;
    QrError err;
    for (int warn = 0; warn < 2; warn++) {
        PeerOpts o = {.urls = silent, .warn_unreachable = warn, .timeout_ms = 200};
        Peers *p;
        qr_error_clear(&err);
        cr_assert_eq(peers_new(&o, &p, &err), QR_OK, "%s", err.message);
        int rc = ask(p, &st, t, 1, &warning, &err);
        if (!warn) {
            cr_assert_eq(rc, QR_EUNAVAILABLE);
            cr_assert(strstr(err.message, silent), "names the peer: %s", err.message);
            cr_assert(strstr(err.detail, "no answer in time"), "detail: %s", err.detail);
        } else {
            cr_assert_eq(rc, QR_OK, "%s", err.message);
            cr_assert(warning && strstr(warning, "leave out 1 of 1 peers"), "%s", warning);
            cr_assert_eq(st.n_docs, 0, "nothing counted from the silent peer");
        }
        peers_free(p);
    }
    close(fd);
}

/* POST body to the peer's bm25_stats route of table tab: the status, the
 * answer in *out (freed by the caller). */
static int post_stats(const char *tab, const char *body, QrBuf *out)
{
    HcClient *hc;
    HcUrl u;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(hc_client_new(NULL, &hc, &err), QR_OK, "%s", err.message);
    cr_assert_eq(hc_url_parse(url, strlen(url), &u, &err), QR_OK, "%s", err.message);
    char path[128];
    snprintf(path, sizeof path, "/tables/%s/bm25_stats", tab);
    int status = 0;
    qr_buf_init(out);
    cr_assert_eq(hc_post_json(hc, &u, path, NULL, body, strlen(body), 30000, 1 << 20, &status,
                              out, &err),
                 QR_OK, "%s", err.message);
    qr_buf_putc(out, 0);
    hc_client_free(hc);
    return status;
}

/* The route a peer asks (http_tables.c): bad bodies are 400 with what is
 * wrong, more than 4,096 terms 413, an unknown table 404, and a field the
 * table lacks counts 0 beside the others' true counts. */
Test(peers, bm25_stats_route_refuses_bad_input)
{
    static const struct {
        const char *body;
        int status;
        const char *says;
    } bad[] = {
        {"not json", 400, "error"},
        {"{\"terms\": \"alpha\"}", 400, "an array of [field, term] pairs"},
        {"{\"generation\": \"x\"}", 400, "an array of [field, term] pairs"},
        {"{\"terms\": [], \"generation\": 7}", 400, "an array of [field, term] pairs"},
        {"{\"terms\": [[\"body\", \"alpha\"], [\"body\"]]}", 400, "term 2 is not a [field, term]"},
        {"{\"terms\": [[\"body\", 5]]}", 400, "term 1 is not a [field, term]"},
        {"{\"terms\": [[\"body\", \"a\", \"b\"]]}", 400, "term 1 is not a [field, term]"},
        {"{\"terms\": [\"body\"]}", 400, "term 1 is not a [field, term]"},
    };
    QrBuf b;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int st = post_stats("docs", bad[i].body, &b);
        cr_assert_eq(st, bad[i].status, "%s: HTTP %d %s", bad[i].body, st, (char *)b.data);
        cr_assert(strstr((char *)b.data, bad[i].says), "%s: %s", bad[i].body, (char *)b.data);
        qr_buf_free(&b);
    }
    cr_assert_eq(post_stats("nosuch", "{\"terms\": []}", &b), 404, "%s", (char *)b.data);
    qr_buf_free(&b);
    /* 4,096 terms answer, 4,097 are refused */
    for (int n = 4096; n <= 4097; n++) {
        QrBuf body;
        qr_buf_init(&body);
        qr_buf_append(&body, "{\"terms\": [", 11);
        for (int k = 0; k < n; k++)
            qr_buf_printf(&body, "%s[\"body\", \"w%d\"]", k ? "," : "", k);
        qr_buf_append(&body, "]}", 3); /* with the NUL */
        int st = post_stats("docs", (char *)body.data, &b);
        cr_assert_eq(st, n == 4096 ? 200 : 413, "%d terms: HTTP %d %.200s", n, st, (char *)b.data);
        qr_buf_free(&b);
        qr_buf_free(&body);
    }
    /* a field the table lacks: 0; the others as the peer counts them */
    int st = post_stats("docs", "{\"terms\": [[\"nosuch\", \"alpha\"], [\"body\", \"beta\"], "
                                "[\"body\", \"epsilon\"]]}", &b);
    cr_assert_eq(st, 200, "%s", (char *)b.data);
    QrTermStat t[2] = {TERM(1, "beta"), TERM(1, "epsilon")};
    QrBm25Stats want;
    truth(&want, t, 2);
    char df[64];
    snprintf(df, sizeof df, "\"df\":[0,%llu,%llu]", (unsigned long long)t[0].df,
             (unsigned long long)t[1].df);
    cr_assert(t[0].df > 0 && t[1].df > 0 && strstr((char *)b.data, df), "want %s: %s", df,
              (char *)b.data);
    qr_buf_free(&b);
}
