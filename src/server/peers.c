/*
 * peers.c — BM25 statistics from the other nodes of a split table
 * (peers.h): the QrStatsSource of `quarry serve --peers`, its per-peer
 * cache and the exchange with POST /tables/{t}/bm25_stats
 * (http_tables.c).
 *
 * Layer: server/.  Calls query/quarry.h, server/http_client.h, cJSON and
 * the base kit.
 *
 * Cache, per peer and table: the generation the peer last reported, its
 * totals (documents; tokens and documents per field, by field name) and
 * the document frequency of every term asked since, keyed by this node's
 * term-key byte and the term's bytes.  A request carries the cached
 * generation and only the uncached terms:
 *
 *   answer "unchanged"    the cached totals and counts still hold: add the
 *                         new counts to the cache
 *   a new generation      the totals and the counts sent are the new ones;
 *                         when the query also used cached counts, one more
 *                         request asks for every term with no generation,
 *                         whose answer is one snapshot's (so a query never
 *                         mixes two generations), and the cache restarts
 *                         from it
 *
 * The lock of a peer guards its cache only; requests run without it, one
 * thread per peer beyond the first.  At most DF_CACHE_MAX counts are kept
 * per table (the map restarts when full).
 */
#include "server/peers.h"
#include "server/http_client.h"
#include "store/mem.h"
#include "store/util.h"

#include <cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define PEERS_MAX 64
#define DF_CACHE_MAX 65536
#define ANSWER_MAX_BYTES (16u << 20)

typedef struct DfEnt {
    struct DfEnt *next;
    uint64_t df;
    uint32_t len;
    int field;                 /* this node's term-key byte */
    char text[];
} DfEnt;

typedef struct FieldTot {
    char name[QR_NAME_MAX + 1]; /* the peer's field name ("_all" for the combined one) */
    uint64_t tokens, docs;
} FieldTot;

/* What this node knows of one table on one peer. */
typedef struct TabCache {
    struct TabCache *next;
    char name[QR_NAME_MAX + 1];
    char gen[96];              /* "" = nothing cached */
    uint64_t docs;
    FieldTot *fields;          /* owns */
    int n_fields;
    DfEnt **slots;             /* owns: chained hash, DF_SLOTS buckets */
    uint32_t n_ents;
} TabCache;

#define DF_SLOTS 4096

typedef struct Peer {
    HcUrl url;
    pthread_mutex_t lock;      /* guards tabs */
    TabCache *tabs;            /* owns */
} Peer;

struct Peers {
    QrStatsSource src;
    Peer *peer;                /* owns, n_peers */
    int n_peers;
    HcClient *hc;              /* owns */
    char *key;                 /* owns: the bearer key, or NULL */
    bool warn;
    uint32_t timeout_ms;
    _Atomic uint64_t requests, unchanged;
};

static uint32_t df_hash(int field, const char *text, uint32_t len)
{
    uint32_t h = 2166136261u ^ (uint32_t)field;
    for (uint32_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)text[i]) * 16777619u;
    return h % DF_SLOTS;
}

static DfEnt *df_find(const TabCache *tc, int field, const char *text, uint32_t len)
{
    if (!tc->slots)
        return NULL;
    for (DfEnt *e = tc->slots[df_hash(field, text, len)]; e; e = e->next)
        if (e->field == field && e->len == len && !memcmp(e->text, text, len))
            return e;
    return NULL;
}

static void df_clear(TabCache *tc)
{
    for (int i = 0; tc->slots && i < DF_SLOTS; i++)
        for (DfEnt *e = tc->slots[i], *nx; e; e = nx) {
            nx = e->next;
            qr_free(e);
        }
    if (tc->slots)
        memset(tc->slots, 0, DF_SLOTS * sizeof *tc->slots);
    tc->n_ents = 0;
}

static void df_put(TabCache *tc, int field, const char *text, uint32_t len, uint64_t df)
{
    if (!tc->slots && !(tc->slots = qr_calloc(DF_SLOTS, sizeof *tc->slots)))
        return; /* a cache that cannot grow only costs requests */
    DfEnt *e = df_find(tc, field, text, len);
    if (e) {
        e->df = df;
        return;
    }
    if (tc->n_ents >= DF_CACHE_MAX)
        df_clear(tc);
    if (!(e = qr_malloc(sizeof *e + len)))
        return;
    uint32_t h = df_hash(field, text, len);
    *e = (DfEnt){.next = tc->slots[h], .df = df, .len = len, .field = field};
    memcpy(e->text, text, len);
    tc->slots[h] = e;
    tc->n_ents++;
}

static TabCache *tab_cache(Peer *p, const char *name)
{
    for (TabCache *tc = p->tabs; tc; tc = tc->next)
        if (!strcmp(tc->name, name))
            return tc;
    TabCache *tc = qr_calloc(1, sizeof *tc);
    if (!tc)
        return NULL;
    snprintf(tc->name, sizeof tc->name, "%s", name);
    tc->next = p->tabs;
    p->tabs = tc;
    return tc;
}

static void tab_cache_free(TabCache *tc)
{
    df_clear(tc);
    qr_free(tc->slots);
    qr_free(tc->fields);
    qr_free(tc);
}

/* ---- one peer's part of one query ---- */

typedef struct Job {
    Peers *ps;
    Peer *peer;
    const char *table;
    const QrSchema *schema;
    const QrTermStat *terms;   /* borrows the query's */
    int n;
    /* out */
    uint64_t *df;              /* owns, n */
    bool *have;                /* owns, n: df[i] is known */
    uint64_t docs;
    FieldTot *fields;          /* owns */
    int n_fields;
    char gen[96];
    int rc;
    bool refused;              /* the peer answered 4xx: its configuration, not its
                                  availability (warn_unreachable does not cover it) */
    QrError err;
} Job;

static const char *field_name(const QrSchema *sc, int f)
{
    return f == QR_ALL_FIELD ? "_all" : f >= 0 && f < sc->n_fields ? sc->fields[f].name : NULL;
}

static bool json_count(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > 9007199254740992.0 ||
        floor(v->valuedouble) != v->valuedouble)
        return false;
    *out = (uint64_t)v->valuedouble;
    return true;
}

static int bad_answer(Job *j, const char *what)
{
    qr_error_set(&j->err, QR_EUNAVAILABLE,
                 "peer \"%s\" answered the BM25 statistics of table \"%s\" malformed",
                 j->peer->url.text, j->table);
    qr_error_detail(&j->err, "%s", what);
    qr_error_hint(&j->err, "every node must run the same Quarry version");
    return QR_EUNAVAILABLE;
}

/* One request: the terms with !have[i] (all when gen is NULL), gen sent
 * when not NULL.  Sets *unchanged; on a new generation, j's totals and gen. */
static int ask(Job *j, const char *gen, bool *unchanged)
{
    *unchanged = false;
    QrBuf body, ans;
    qr_buf_init(&body);
    qr_buf_init(&ans);
    cJSON *root = NULL;
    int *sent = qr_malloc(((size_t)j->n + 1) * sizeof *sent);
    int n_sent = 0;
    qr_buf_append(&body, "{\"terms\":[", 10);
    for (int i = 0; sent && i < j->n; i++) {
        const char *fname = field_name(j->schema, j->terms[i].field);
        if ((gen && j->have[i]) || !fname)
            continue;
        if (n_sent)
            qr_buf_putc(&body, ',');
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, cJSON_CreateString(fname));
        char *txt = qr_malloc(j->terms[i].len + 1);
        if (txt) {
            memcpy(txt, j->terms[i].text, j->terms[i].len);
            txt[j->terms[i].len] = 0;
            cJSON_AddItemToArray(pair, cJSON_CreateString(txt));
            qr_free(txt);
        }
        char *pr = cJSON_PrintUnformatted(pair);
        if (pr)
            qr_buf_append(&body, pr, strlen(pr));
        else
            body.oom = true;
        cJSON_free(pr);
        cJSON_Delete(pair);
        sent[n_sent++] = i;
    }
    qr_buf_putc(&body, ']');
    if (gen) {
        qr_buf_append(&body, ",\"generation\":", 14);
        cJSON *g = cJSON_CreateString(gen);
        char *pr = g ? cJSON_PrintUnformatted(g) : NULL;
        if (pr)
            qr_buf_append(&body, pr, strlen(pr));
        else
            body.oom = true;
        cJSON_free(pr);
        cJSON_Delete(g);
    }
    qr_buf_putc(&body, '}');
    int rc, status = 0;
    if (!sent || !qr_buf_ok(&body)) {
        rc = qr_error_set(&j->err, QR_ENOMEM, "out of memory");
        goto out;
    }
    char path[QR_NAME_MAX + 32];
    snprintf(path, sizeof path, "/tables/%s/bm25_stats", j->table);
    atomic_fetch_add(&j->ps->requests, 1);
    rc = hc_post_json(j->ps->hc, &j->peer->url, path, j->ps->key, (const char *)body.data,
                      body.len, j->ps->timeout_ms, ANSWER_MAX_BYTES, &status, &ans, &j->err);
    if (rc == QR_EUNAVAILABLE) { /* say what for; the detail says what happened */
        QrError e = j->err;
        qr_error_clear(&j->err);
        qr_error_set(&j->err, QR_EUNAVAILABLE,
                     "could not reach peer \"%s\" for the BM25 statistics of table \"%s\"",
                     j->peer->url.text, j->table);
        qr_error_detail(&j->err, "%s", e.detail);
    }
    if (rc != QR_OK)
        goto out;
    root = cJSON_ParseWithLength(ans.data ? (const char *)ans.data : "", ans.len);
    if (status != 200) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
        qr_error_set(&j->err, QR_EUNAVAILABLE,
                     "peer \"%s\" refused the BM25 statistics of table \"%s\"",
                     j->peer->url.text, j->table);
        qr_error_detail(&j->err, "HTTP %d: %s", status,
                        cJSON_IsString(m) ? m->valuestring : "no error message");
        if (status == 401 || status == 403)
            qr_error_hint(&j->err, "give this node an API key of scope search on the peers "
                                   "(quarry serve --peer-key-file)");
        else if (status == 404)
            qr_error_hint(&j->err, "every node of --peers must hold the table");
        j->refused = status < 500;
        rc = QR_EUNAVAILABLE;
        goto out;
    }
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(root, "generation");
    const cJSON *df = cJSON_GetObjectItemCaseSensitive(root, "df");
    if (!cJSON_IsString(g) || strlen(g->valuestring) >= sizeof j->gen || !cJSON_IsArray(df) ||
        cJSON_GetArraySize(df) != n_sent) {
        rc = bad_answer(j, "no generation, or not one count per term");
        goto out;
    }
    for (int k = 0; k < n_sent; k++) {
        if (!json_count(cJSON_GetArrayItem(df, k), &j->df[sent[k]])) {
            rc = bad_answer(j, "a document frequency that is not a count");
            goto out;
        }
        j->have[sent[k]] = true;
    }
    *unchanged = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "unchanged"));
    if (*unchanged) {
        if (!gen || strcmp(gen, g->valuestring) != 0)
            rc = bad_answer(j, "\"unchanged\" for another generation");
        else
            atomic_fetch_add(&j->ps->unchanged, 1);
        goto out;
    }
    const cJSON *fields = cJSON_GetObjectItemCaseSensitive(root, "fields");
    if (!json_count(cJSON_GetObjectItemCaseSensitive(root, "docs"), &j->docs) ||
        !cJSON_IsObject(fields)) {
        rc = bad_answer(j, "no document count or field totals");
        goto out;
    }
    qr_free(j->fields);
    j->n_fields = 0;
    j->fields = qr_calloc((size_t)cJSON_GetArraySize(fields) + 1, sizeof *j->fields);
    if (!j->fields) {
        rc = qr_error_set(&j->err, QR_ENOMEM, "out of memory");
        goto out;
    }
    const cJSON *f;
    cJSON_ArrayForEach(f, fields)
    {
        FieldTot *ft = &j->fields[j->n_fields];
        if (!f->string || strlen(f->string) > QR_NAME_MAX || cJSON_GetArraySize(f) != 2 ||
            !json_count(cJSON_GetArrayItem(f, 0), &ft->tokens) ||
            !json_count(cJSON_GetArrayItem(f, 1), &ft->docs)) {
            rc = bad_answer(j, "a field total that is not [tokens, documents]");
            goto out;
        }
        snprintf(ft->name, sizeof ft->name, "%s", f->string);
        j->n_fields++;
    }
    snprintf(j->gen, sizeof j->gen, "%s", g->valuestring);
out:
    cJSON_Delete(root);
    qr_free(sent);
    qr_buf_free(&body);
    qr_buf_free(&ans);
    return rc;
}

static void *job_run(void *arg)
{
    Job *j = arg;
    Peer *p = j->peer;
    char gen[96] = "";
    bool any_cached = false;
    pthread_mutex_lock(&p->lock);
    TabCache *tc = tab_cache(p, j->table);
    if (tc && tc->gen[0]) {
        snprintf(gen, sizeof gen, "%s", tc->gen);
        j->docs = tc->docs;
        j->fields = qr_calloc((size_t)tc->n_fields + 1, sizeof *j->fields);
        if (j->fields) {
            memcpy(j->fields, tc->fields, (size_t)tc->n_fields * sizeof *j->fields);
            j->n_fields = tc->n_fields;
        } else {
            gen[0] = 0; /* ask for everything */
        }
        for (int i = 0; gen[0] && i < j->n; i++) {
            const DfEnt *e = df_find(tc, j->terms[i].field, j->terms[i].text, j->terms[i].len);
            if (e) {
                j->df[i] = e->df;
                j->have[i] = any_cached = true;
            }
        }
    }
    pthread_mutex_unlock(&p->lock);
    bool unchanged;
    j->rc = ask(j, gen[0] ? gen : NULL, &unchanged);
    if (j->rc == QR_OK && !unchanged && any_cached) {
        /* a new generation: the counts cached before are stale; one
         * answer for every term, from one snapshot */
        memset(j->have, 0, (size_t)j->n * sizeof *j->have);
        j->rc = ask(j, NULL, &unchanged);
    }
    if (j->rc != QR_OK)
        return NULL;
    if (unchanged)
        snprintf(j->gen, sizeof j->gen, "%s", gen);
    pthread_mutex_lock(&p->lock);
    if ((tc = tab_cache(p, j->table))) {
        if (!unchanged) { /* a new generation: the cache restarts from this answer */
            FieldTot *nf = qr_calloc((size_t)j->n_fields + 1, sizeof *nf);
            df_clear(tc);
            qr_free(tc->fields);
            tc->fields = nf;
            tc->n_fields = nf ? j->n_fields : 0;
            if (nf)
                memcpy(nf, j->fields, (size_t)j->n_fields * sizeof *nf);
            tc->docs = j->docs;
            snprintf(tc->gen, sizeof tc->gen, "%s", nf ? j->gen : "");
        }
        for (int i = 0; !strcmp(tc->gen, j->gen) && i < j->n; i++) /* (not if another
                                                                       query moved it on) */
            if (j->have[i])
                df_put(tc, j->terms[i].field, j->terms[i].text, j->terms[i].len, j->df[i]);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static int peers_add(void *arg, QrTable *t, QrBm25Stats *st, QrTermStat *terms, int n,
                     QrArena *arena, const char **warning, QrError *err)
{
    Peers *ps = arg;
    Job *jobs = qr_calloc((size_t)ps->n_peers, sizeof *jobs);
    pthread_t *th = qr_calloc((size_t)ps->n_peers, sizeof *th);
    bool *started = qr_calloc((size_t)ps->n_peers, sizeof *started);
    int rc = QR_OK;
    if (!jobs || !th || !started) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory");
        goto out;
    }
    const QrSchema *sc = qr_table_schema(t);
    for (int k = 0; k < ps->n_peers; k++) {
        Job *j = &jobs[k];
        *j = (Job){.ps = ps, .peer = &ps->peer[k], .table = qr_table_name(t), .schema = sc,
                   .terms = terms, .n = n};
        qr_error_clear(&j->err);
        j->df = qr_calloc((size_t)n + 1, sizeof *j->df);
        j->have = qr_calloc((size_t)n + 1, sizeof *j->have);
        if (!j->df || !j->have) {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory");
            goto out;
        }
    }
    /* every peer at once: the first in this thread */
    for (int k = 1; k < ps->n_peers; k++)
        started[k] = pthread_create(&th[k], NULL, job_run, &jobs[k]) == 0;
    job_run(&jobs[0]);
    for (int k = 1; k < ps->n_peers; k++) {
        if (started[k])
            pthread_join(th[k], NULL);
        else
            job_run(&jobs[k]);
    }
    QrBuf left;
    qr_buf_init(&left);
    int n_left = 0;
    for (int k = 0; k < ps->n_peers; k++) {
        Job *j = &jobs[k];
        if (j->rc != QR_OK) {
            if (!ps->warn || j->rc != QR_EUNAVAILABLE || j->refused) {
                qr_error_copy(err, &j->err);
                if (j->rc == QR_EUNAVAILABLE && !err->hint[0])
                    qr_error_hint(err, "start the peer or take it out of --peers; with "
                                       "--peer-unreachable warn a query answers from the "
                                       "reachable nodes' statistics, with a warning");
                rc = j->rc;
                break;
            }
            qr_buf_printf(&left, "%s\"%s\" (%s)", n_left ? ", " : "", j->peer->url.text,
                          j->err.detail[0] ? j->err.detail : j->err.message);
            n_left++;
            continue;
        }
        st->n_docs += j->docs;
        for (int f = 0; f < j->n_fields; f++) {
            const char *fname = j->fields[f].name;
            int fi = strcmp(fname, "_all") == 0 ? QR_ALL_FIELD : -1;
            for (int x = 0; fi < 0 && x < sc->n_fields; x++)
                if (!strcmp(sc->fields[x].name, fname))
                    fi = x;
            if (fi < 0)
                continue; /* a field this node lacks: no query term is in it */
            st->field_tokens[fi] += j->fields[f].tokens;
            st->field_docs[fi] += j->fields[f].docs;
        }
        for (int i = 0; i < n; i++)
            terms[i].df += j->df[i];
    }
    if (rc == QR_OK && n_left > 0) {
        char *w = qr_arena_alloc(arena, left.len + 200);
        if (w) {
            snprintf(w, left.len + 200,
                     "BM25 statistics of table \"%s\" leave out %d of %d peers: %.*s; scores "
                     "differ from one index over all the documents",
                     qr_table_name(t), n_left, ps->n_peers, (int)left.len,
                     left.data ? (const char *)left.data : "");
            *warning = w;
        } else {
            *warning = "BM25 statistics leave out unreachable peers";
        }
    }
    qr_buf_free(&left);
out:
    for (int k = 0; jobs && k < ps->n_peers; k++) {
        qr_free(jobs[k].df);
        qr_free(jobs[k].have);
        qr_free(jobs[k].fields);
    }
    qr_free(jobs);
    qr_free(th);
    qr_free(started);
    return rc;
}

/* ---- setup ---- */

static int read_key(const char *path, char **out, QrError *err)
{
    uint8_t *d = NULL;
    size_t n = 0;
    int rc = qr_file_read_all(path, &d, &n, err);
    if (rc != QR_OK)
        return rc;
    while (n > 0 && (d[n - 1] == '\n' || d[n - 1] == '\r' || d[n - 1] == ' '))
        d[--n] = 0;
    bool ok = n > 0 && n < 512;
    for (size_t i = 0; ok && i < n; i++)
        ok = d[i] > ' ' && d[i] < 0x7f;
    if (!ok) {
        qr_free(d);
        qr_error_set(err, QR_EINVAL, "peer key file \"%s\" does not hold one API key", path);
        qr_error_hint(err, "write the key quarry key add printed on the peers, alone on a line");
        return QR_EINVAL;
    }
    *out = (char *)d;
    return QR_OK;
}

int peers_new(const PeerOpts *o, Peers **out, QrError *err)
{
    *out = NULL;
    Peers *ps = qr_calloc(1, sizeof *ps);
    if (!ps)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    ps->src = (QrStatsSource){.add = peers_add, .arg = ps};
    ps->warn = o->warn_unreachable;
    ps->timeout_ms = o->timeout_ms ? o->timeout_ms : 5000;
    int rc = QR_OK;
    if (!(ps->peer = qr_calloc(PEERS_MAX, sizeof *ps->peer))) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory");
        goto fail;
    }
    for (const char *p = o->urls ? o->urls : ""; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0) {
            if (ps->n_peers == PEERS_MAX) {
                rc = qr_error_set(err, QR_EINVAL, "--peers names more than %d nodes", PEERS_MAX);
                goto fail;
            }
            Peer *pe = &ps->peer[ps->n_peers];
            if ((rc = hc_url_parse(p, len, &pe->url, err)) != QR_OK)
                goto fail;
            for (int k = 0; k < ps->n_peers; k++)
                if (!strcmp(ps->peer[k].url.text, pe->url.text)) {
                    rc = qr_error_set(err, QR_EINVAL, "--peers names \"%s\" twice", pe->url.text);
                    goto fail;
                }
            pthread_mutex_init(&pe->lock, NULL);
            ps->n_peers++;
        }
        p += len + (e ? 1 : 0);
    }
    if (ps->n_peers == 0) {
        rc = qr_error_set(err, QR_EINVAL, "--peers names no node");
        qr_error_hint(err, "give the HTTP base URLs of the other nodes, comma-separated");
        goto fail;
    }
    if (o->key_file && (rc = read_key(o->key_file, &ps->key, err)) != QR_OK)
        goto fail;
    if ((rc = hc_client_new(o->ca_file, &ps->hc, err)) != QR_OK)
        goto fail;
    *out = ps;
    return QR_OK;
fail:
    peers_free(ps);
    return rc;
}

void peers_free(Peers *ps)
{
    if (!ps)
        return;
    for (int k = 0; k < ps->n_peers; k++) {
        for (TabCache *tc = ps->peer[k].tabs, *nx; tc; tc = nx) {
            nx = tc->next;
            tab_cache_free(tc);
        }
        pthread_mutex_destroy(&ps->peer[k].lock);
    }
    qr_free(ps->peer);
    hc_client_free(ps->hc);
    if (ps->key) {
        memset(ps->key, 0, strlen(ps->key));
        qr_free(ps->key);
    }
    qr_free(ps);
}

const QrStatsSource *peers_source(Peers *ps) { return &ps->src; }
int peers_count(const Peers *ps) { return ps->n_peers; }

void peers_counters(const Peers *ps, uint64_t *requests, uint64_t *unchanged)
{
    *requests = atomic_load(&((Peers *)ps)->requests);
    *unchanged = atomic_load(&((Peers *)ps)->unchanged);
}
