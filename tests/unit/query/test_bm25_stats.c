/*
 * test_bm25_stats.c — BM25 statistics across nodes (quarry.h QrStatsSource,
 * query/bm25_stats.c, search.c's peer_stats_ready): a table split over two
 * databases "a" and "b", each given a stats source that adds the other's
 * qr_table_bm25_stats, must score every document exactly as a third
 * database "all" holding every document does -- same float bits, through
 * qr_search and through SQL's text scan -- for terms, conjunctions,
 * phrases, prefixes, field lists and the combined _all field.
 *
 * The oracle is the engine itself on one node (its own scoring is checked
 * against a brute-force model in test_search.c); the nodes hold the same
 * writes in the same commits (upserts and deletes included, merges off),
 * so deleted documents count alike on both sides.  Also: counts never ask
 * the source, a ranked query asks once, a failing source fails a ranked
 * query with its error and leaves counts alone, and a warning reaches the
 * HTTP result and SQL's notices.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "query/quarry.h"
#include "query/sql.h"
#include "store/util.h"

#define N_DOCS 900

/* An in-process peer: the other database's statistics, as `quarry serve
 * --peers` would fetch them over HTTP. */
typedef struct Peer {
    QrDb *db;          /* the other node */
    int calls;
    bool fail;         /* answer QR_EUNAVAILABLE */
    const char *warn;  /* answer with this warning and no statistics */
} Peer;

static int peer_add(void *arg, QrTable *t, QrBm25Stats *st, QrTermStat *terms, int n,
                    QrArena *arena, const char **warning, QrError *err)
{
    Peer *p = arg;
    p->calls++;
    if (p->fail)
        return qr_error_set(err, QR_EUNAVAILABLE, "could not reach the peer of table \"%s\"",
                            qr_table_name(t));
    if (p->warn) {
        *warning = p->warn;
        return QR_OK;
    }
    QrTable *pt;
    int rc = qr_table_get(p->db, qr_table_name(t), &pt, err);
    if (rc != QR_OK)
        return rc;
    QrTermStat *mine = qr_arena_alloc(arena, (size_t)n * sizeof *mine);
    QrBm25Stats *ps = qr_arena_alloc(arena, sizeof *ps);
    if (!mine || !ps)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    memcpy(mine, terms, (size_t)n * sizeof *mine);
    if ((rc = qr_table_bm25_stats(pt, ps, mine, n, err)) != QR_OK)
        return rc;
    st->n_docs += ps->n_docs;
    for (int f = 0; f <= QR_ALL_FIELD; f++) {
        st->field_tokens[f] += ps->field_tokens[f];
        st->field_docs[f] += ps->field_docs[f];
    }
    for (int i = 0; i < n; i++)
        terms[i].df += mine[i].df;
    return QR_OK;
}

typedef struct Node {
    char *dir;
    QrDb *db;
    QrTable *t;
    Peer peer;          /* the other shard ("a" and "b" only) */
    QrStatsSource src;
} Node;

static Node all, a, b;
static char **words;
static const int n_words = 300;

static void node_open(Node *n, const char *tag, Node *other, const QrSchema *sc)
{
    memset(n, 0, sizeof *n);
    n->dir = eu_tmpdir(tag);
    QrDbOpts o;
    qr_db_opts_default(&o);
    o.fsync = QR_FSYNC_OFF;
    o.background_merge = false;
    if (other) {
        n->src = (QrStatsSource){.add = peer_add, .arg = &n->peer};
        o.stats_source = &n->src;
    }
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_db_open(n->dir, &o, &n->db, &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_table_create(n->db, "docs", sc, &n->t, &err), QR_OK, "%s", err.message);
}

static void node_close(Node *n)
{
    qr_db_close(n->db);
    eu_rmtree(n->dir);
    free(n->dir);
}

static void put(QrBatch *bt, const char *json)
{
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_batch_put(bt, json, strlen(json), NULL, &err), QR_OK, "%s", err.message);
}

static void commit(QrBatch *bt)
{
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_batch_commit(bt, &err), QR_OK, "%s", err.message);
}

/* The same writes on "all" and on the shard of each id (odd ids on "a"):
 * several commits (segments), upserts and deletes pending. */
static void load(bool all_field)
{
    QrSchema sc;
    eu_random_schema(&sc, true);
    sc.all_field = all_field;
    node_open(&all, "bm25all", NULL, &sc);
    node_open(&a, "bm25a", &b, &sc);
    node_open(&b, "bm25b", &a, &sc);
    a.peer.db = b.db;
    b.peer.db = a.db;
    words = eu_words(n_words, 7);
    EuZipf z;
    eu_zipf_init(&z, n_words, 1.0);
    uint64_t rng = 42;
    QrBatch *ball, *ba, *bb;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_batch_begin(all.t, &ball, &err), QR_OK);
    cr_assert_eq(qr_batch_begin(a.t, &ba, &err), QR_OK);
    cr_assert_eq(qr_batch_begin(b.t, &bb, &err), QR_OK);
    for (int i = 1; i <= N_DOCS; i++) {
        /* ids up to N_DOCS, some written twice (an upsert), some deleted */
        int id = i <= N_DOCS - 60 ? i : (int)eu_below(&rng, N_DOCS - 60) + 1;
        char key[32];
        snprintf(key, sizeof key, "%d", id);
        QrBatch *shard = id % 2 ? ba : bb;
        if (i > N_DOCS - 20) {
            cr_assert_eq(qr_batch_delete(ball, key, strlen(key), NULL, &err), QR_OK);
            cr_assert_eq(qr_batch_delete(shard, key, strlen(key), NULL, &err), QR_OK);
        } else {
            char *doc = eu_random_doc(&rng, words, &z, key, NULL);
            put(ball, doc);
            put(shard, doc);
            free(doc);
        }
        if (i % 250 == 0) {
            commit(ball);
            commit(ba);
            commit(bb);
        }
    }
    commit(ball);
    commit(ba);
    commit(bb);
    qr_batch_free(ball);
    qr_batch_free(ba);
    qr_batch_free(bb);
    eu_zipf_free(&z);
}

static void unload(void)
{
    node_close(&all);
    node_close(&a);
    node_close(&b);
    eu_words_free(words, n_words);
}

static void quiet(void) { qr_log_set_level(QR_LOG_ERROR); }

TestSuite(bm25_stats, .init = quiet);

/* Every hit of q (all of them: limit covers the table) as id -> score. */
typedef struct Hits {
    int n;
    char ids[N_DOCS][24];
    float score[N_DOCS];
} Hits;

static void ranked(QrTable *t, const char *q, const char *fields, bool exhaustive, Hits *h,
                   const char **warning)
{
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = q;
    req.q_len = strlen(q);
    req.fields = fields;
    req.limit = N_DOCS;
    req.exhaustive = exhaustive;
    QrSearchRes *res;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_search(t, &req, &res, &err), QR_OK, "%s: %s", q, err.message);
    h->n = res->n_hits;
    for (int i = 0; i < res->n_hits; i++) {
        snprintf(h->ids[i], sizeof h->ids[i], "%s", res->hits[i].id_json);
        h->score[i] = res->hits[i].score;
    }
    if (warning)
        *warning = res->warning ? strdup(res->warning) : NULL;
    qr_search_res_free(res);
}

static int find(const Hits *h, const char *id)
{
    for (int i = 0; i < h->n; i++)
        if (!strcmp(h->ids[i], id))
            return i;
    return -1;
}

/* Each shard's hits are exactly "all"'s hits of its ids, with the same
 * float bits; together they are all of "all"'s hits. */
static void check_query(const char *q, const char *fields)
{
    for (int ex = 0; ex < 2; ex++) {
        static Hits ha, hb, hall;
        ranked(all.t, q, fields, ex, &hall, NULL);
        ranked(a.t, q, fields, ex, &ha, NULL);
        ranked(b.t, q, fields, ex, &hb, NULL);
        cr_assert_eq(ha.n + hb.n, hall.n, "%s: %d + %d hits, one node %d", q, ha.n, hb.n, hall.n);
        const Hits *shards[2] = {&ha, &hb};
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < shards[s]->n; i++) {
                int j = find(&hall, shards[s]->ids[i]);
                cr_assert_geq(j, 0, "%s: id %s not a hit of one node", q, shards[s]->ids[i]);
                cr_assert(memcmp(&hall.score[j], &shards[s]->score[i], sizeof(float)) == 0,
                          "%s (%s): id %s scores %.9g on its shard, %.9g on one node", q,
                          ex ? "exhaustive" : "pruned", shards[s]->ids[i],
                          (double)shards[s]->score[i], (double)hall.score[j]);
            }
    }
}

static const char *queries(int i, char *buf, size_t cap)
{
    const char *w1 = words[i % 40], *w2 = words[(i * 7 + 3) % 120], *w3 = words[(i * 13) % 250];
    switch (i % 6) {
    case 0: snprintf(buf, cap, "%s", w1); break;
    case 1: snprintf(buf, cap, "%s %s %s", w1, w2, w3); break;
    case 2: snprintf(buf, cap, "%s AND %s", w1, w2); break;
    case 3: snprintf(buf, cap, "\"%s %s\" OR %s", w1, w2, w3); break;
    case 4: snprintf(buf, cap, "%.2s* %s", w2, w3); break;
    default: snprintf(buf, cap, "title:%s^2 OR %s -%s", w2, w1, w3); break;
    }
    return buf;
}

static void check_all_queries(void)
{
    char q[256];
    for (int i = 0; i < 36; i++) {
        check_query(queries(i, q, sizeof q), NULL);
        check_query(queries(i, q, sizeof q), "title^2,body");
    }
}

Test(bm25_stats, shards_score_as_one_node)
{
    load(false);
    check_all_queries();
    unload();
}

Test(bm25_stats, shards_score_as_one_node_all_field)
{
    load(true);
    check_all_queries();
    unload();
}

/* SQL's text scan (sql_text.c over the same Search) scores the same. */
static void sql_scores(QrDb *db, const char *sql, Hits *h, int *warnings)
{
    QrSqlSession *s;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_new(db, &s, &err), QR_OK, "%s", err.message);
    QrSqlResult *r;
    cr_assert_eq(qr_sql_exec(s, sql, strlen(sql), &r, &err), QR_OK, "%s: %s", sql, err.message);
    h->n = (int)r->n_rows;
    QrBuf buf;
    qr_buf_init(&buf);
    for (uint64_t i = 0; i < r->n_rows; i++) {
        buf.len = 0;
        qr_sql_value_text(&r->vals[i * 2], &buf);
        snprintf(h->ids[i], sizeof h->ids[i], "%.*s", (int)buf.len, (const char *)buf.data);
        h->score[i] = (float)r->vals[i * 2 + 1].u.f;
    }
    qr_buf_free(&buf);
    if (warnings) {
        *warnings = 0;
        for (int i = 0; i < r->n_notices; i++)
            *warnings += !strcmp(r->notices[i].severity, "WARNING") &&
                         !strcmp(r->notices[i].sqlstate, "01000");
    }
    qr_sql_result_free(r);
    qr_sql_session_free(s);
}

Test(bm25_stats, sql_scores_as_one_node)
{
    load(true);
    char q[256], sql[512];
    static Hits ha, hall;
    for (int i = 0; i < 12; i++) {
        snprintf(sql, sizeof sql,
                 "SELECT id, score() FROM docs WHERE docs @@ '%s' ORDER BY score() DESC, id",
                 queries(i, q, sizeof q));
        sql_scores(all.db, sql, &hall, NULL);
        sql_scores(a.db, sql, &ha, NULL);
        cr_assert_gt(ha.n, 0, "%s: no rows on shard a", sql);
        for (int k = 0; k < ha.n; k++) {
            int j = find(&hall, ha.ids[k]);
            cr_assert_geq(j, 0, "%s: id %s", sql, ha.ids[k]);
            cr_assert(memcmp(&hall.score[j], &ha.score[k], sizeof(float)) == 0,
                      "%s: id %s scores %.9g on shard a, %.9g on one node", sql, ha.ids[k],
                      (double)ha.score[k], (double)hall.score[j]);
        }
    }
    unload();
}

static uint64_t count(QrTable *t, const char *q, QrError *err)
{
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = q;
    req.q_len = strlen(q);
    req.count_only = true;
    QrSearchRes *res;
    if (qr_search(t, &req, &res, err) != QR_OK)
        return UINT64_MAX;
    uint64_t n = res->total;
    qr_search_res_free(res);
    return n;
}

Test(bm25_stats, counts_never_ask_ranking_asks_once)
{
    load(false);
    QrError err;
    qr_error_clear(&err);
    const char *q = words[0];
    uint64_t n = count(a.t, q, &err);
    cr_assert_neq(n, UINT64_MAX, "%s", err.message);
    cr_assert_eq(a.peer.calls, 0, "a count asked the peers %d time(s)", a.peer.calls);
    static Hits h;
    ranked(a.t, q, NULL, false, &h, NULL);
    cr_assert_eq(a.peer.calls, 1, "a ranked query asked %d time(s)", a.peer.calls);
    cr_assert_eq((uint64_t)h.n, n);
    unload();
}

Test(bm25_stats, unreachable_peer_fails_ranking_not_counts)
{
    load(false);
    a.peer.fail = true;
    QrError err;
    qr_error_clear(&err);
    const char *q = words[1];
    cr_assert_neq(count(a.t, q, &err), UINT64_MAX, "a count needs no peer: %s", err.message);
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = q;
    req.q_len = strlen(q);
    QrSearchRes *res = NULL;
    cr_assert_eq(qr_search(a.t, &req, &res, &err), QR_EUNAVAILABLE, "ranked: %d %s", err.code,
                 err.message);
    cr_assert_null(res);
    cr_assert(strstr(err.message, "could not reach the peer of table \"docs\""), "%s",
              err.message);
    cr_assert_str_eq(qr_error_sqlstate(&err), "08006");
    /* SQL: the same error, as the statement's */
    QrSqlSession *s;
    cr_assert_eq(qr_sql_session_new(a.db, &s, &err), QR_OK);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT id, score() FROM docs WHERE body @@ '%s' ORDER BY 2 DESC LIMIT 3", q);
    QrSqlResult *r = NULL;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_exec(s, sql, strlen(sql), &r, &err), QR_EUNAVAILABLE, "%s", err.message);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM docs WHERE body @@ '%s'", q);
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_exec(s, sql, strlen(sql), &r, &err), QR_OK, "%s", err.message);
    qr_sql_result_free(r);
    qr_sql_session_free(s);
    unload();
}

Test(bm25_stats, warning_reaches_http_result_and_sql_notices)
{
    load(false);
    a.peer.warn = "peer \"b\" is unreachable: scores use this node's statistics";
    static Hits h;
    const char *w = NULL;
    ranked(a.t, words[2], NULL, false, &h, &w);
    cr_assert_not_null(w, "no warning in the search result");
    cr_assert_str_eq(w, a.peer.warn);
    free((char *)w);
    int warnings;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT id, score() FROM docs WHERE body @@ '%s' ORDER BY 2 DESC",
             words[2]);
    sql_scores(a.db, sql, &h, &warnings);
    cr_assert_eq(warnings, 1, "%d WARNING notices", warnings);
    unload();
}

/* What a node answers its peers: plain sums over its snapshot. */
Test(bm25_stats, local_statistics_add_up)
{
    load(true);
    QrTermStat ta[3], tb[3], tall[3];
    const char *w[3] = {words[0], words[5], "zzzznotaword"};
    for (int i = 0; i < 3; i++) {
        ta[i] = (QrTermStat){.field = 1, .text = w[i], .len = (uint32_t)strlen(w[i])};
        tb[i] = tall[i] = ta[i];
    }
    QrBm25Stats sa, sb, sall;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_table_bm25_stats(a.t, &sa, ta, 3, &err), QR_OK);
    cr_assert_eq(qr_table_bm25_stats(b.t, &sb, tb, 3, &err), QR_OK);
    cr_assert_eq(qr_table_bm25_stats(all.t, &sall, tall, 3, &err), QR_OK);
    cr_assert_eq(sa.n_docs + sb.n_docs, sall.n_docs);
    cr_assert_gt(sall.n_docs, N_DOCS - 60, "deleted documents count until merged");
    for (int f = 0; f <= QR_ALL_FIELD; f++) {
        cr_assert_eq(sa.field_tokens[f] + sb.field_tokens[f], sall.field_tokens[f], "field %d", f);
        cr_assert_eq(sa.field_docs[f] + sb.field_docs[f], sall.field_docs[f], "field %d", f);
    }
    cr_assert_gt(sall.field_tokens[QR_ALL_FIELD], 0, "_all is counted");
    for (int i = 0; i < 3; i++)
        cr_assert_eq(ta[i].df + tb[i].df, tall[i].df, "df of %s", w[i]);
    cr_assert_gt(tall[0].df, 0);
    cr_assert_eq(tall[2].df, 0);
    cr_assert_eq(qr_table_bm25_stats(a.t, &sa, ta, -1, &err), QR_EINVAL);
    unload();
}
