/*
 * peers.h — the other nodes of a split table (`quarry serve --peers
 * URL,URL`): the QrStatsSource that asks each of them for its part of
 * BM25's statistics over HTTP (POST /tables/{t}/bm25_stats), so that every
 * node scores as one index holding all the documents (docs/scale-out.md).
 *
 * Layer: server/.  Calls query/quarry.h, server/http_client.h, cJSON and
 * the base kit.
 *
 * Per ranked text query, one request per peer, all peers at once, each
 * carrying the generation of what this node cached of that peer's table
 * and only the terms it has no count for: a peer whose table did not
 * change answers just those counts; one that changed answers its new
 * totals, and the counts cached before are asked again.  Exact by
 * construction (never sampled, never a stale generation), cached between
 * writes.  A peer that cannot be reached (or answers 5xx, or nonsense)
 * fails the query with QR_EUNAVAILABLE naming it -- or, with
 * warn_unreachable, the query goes on with the other nodes' statistics and
 * a warning saying which were left out.  A peer that refuses (4xx: no such
 * table, no key) fails the query either way: that is configuration.
 */
#ifndef QR_PEERS_H
#define QR_PEERS_H

#include <stdbool.h>
#include <stdint.h>

#include "query/quarry.h"

typedef struct PeerOpts {
    const char *urls;        /* "http://10.0.0.2:8080,https://10.0.0.3:8443" */
    const char *key_file;    /* a file holding the API key sent to the peers, or NULL */
    const char *ca_file;     /* PEM certificate authorities for https peers, NULL: system */
    bool warn_unreachable;   /* answer with a warning instead of failing */
    uint32_t timeout_ms;     /* one peer's request, connect to answer */
} PeerOpts;

typedef struct Peers Peers;

/* Parse the URLs (at least one, at most 64, no duplicates), read the key
 * file.  QR_EINVAL naming what is wrong, QR_EIO for the key file,
 * QR_ENOMEM. */
int peers_new(const PeerOpts *o, Peers **out, QrError *err);
void peers_free(Peers *p); /* NULL is a no-op; after the QrDb using it closed */
/* The source to put in QrDbOpts.stats_source (borrowed from p). */
const QrStatsSource *peers_source(Peers *p);
int peers_count(const Peers *p);
/* Requests sent to peers so far, and answers that found the cached
 * totals still true (for /stats and tests). */
void peers_counters(const Peers *p, uint64_t *requests, uint64_t *unchanged);

#endif
