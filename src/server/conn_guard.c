/*
 * conn_guard.c — per-client and global connection limits and read
 * deadlines for one listener (see conn_guard.h).
 *
 * Layer: server/.  Calls server/netaddr.h and the base kit.
 *
 * A listener holds hundreds of connections at most (its own limits), so
 * the list is scanned: counting a client's connections, finding the one
 * that has waited longest and the expired ones are O(connections) under
 * the lock, cheap beside the accept and thread start they go with.
 */
#include "server/conn_guard.h"
#include "store/error.h"
#include "store/util.h"

#include <string.h>

#define LOG_EVERY_NS 1000000000ull

void conn_guard_init(ConnGuard *g, const char *what, int max_conns, int max_per_client,
                     int extra_per_client, ConnKickFn kick, void *kick_arg)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    g->what = what;
    g->max_conns = max_conns;
    g->max_per_client = max_per_client;
    g->extra_per_client = extra_per_client;
    g->kick = kick;
    g->kick_arg = kick_arg;
}

void conn_guard_destroy(ConnGuard *g)
{
    pthread_mutex_destroy(&g->mu);
}

/* Kick s (under the lock). */
static void kick(ConnGuard *g, ConnSlot *s, ConnKick why)
{
    s->kicked = why;
    g->n_live--;
    atomic_fetch_add(why == CONN_KICK_TIMEOUT ? &g->n_timed_out : &g->n_evicted, 1);
    g->kick(s, why, g->kick_arg);
}

/* One log line a second at most about refusals (under the lock). */
static void log_refusal(ConnGuard *g, uint64_t now_ns, const char *client, int n)
{
    if (g->log_ns && now_ns - g->log_ns < LOG_EVERY_NS) {
        g->log_skipped++;
        return;
    }
    qr_log(QR_LOG_WARN,
           "%s connection refused client=%s connections=%d max_per_client=%d "
           "refused_total=%llu not_logged=%llu",
           g->what, client, n, g->max_per_client,
           (unsigned long long)atomic_load(&g->n_refused), (unsigned long long)g->log_skipped);
    g->log_ns = now_ns;
    g->log_skipped = 0;
}

int conn_guard_add(ConnGuard *g, ConnSlot *s, int fd, const struct sockaddr_storage *peer,
                   uint64_t now_ns, uint64_t deadline_ns, char *client_name)
{
    char name[64];
    uint8_t key[NETADDR_KEY_MAX];
    int key_len = netaddr_client_key(peer, key, name, sizeof name);
    if (client_name)
        memcpy(client_name, name, sizeof name);
    bool over = false;
    pthread_mutex_lock(&g->mu);
    if (g->max_per_client > 0 && key_len > 0) {
        int n = 0;
        for (ConnSlot *o = g->head; o; o = o->next)
            n += !o->kicked && o->key_len == key_len && !memcmp(o->key, key, (size_t)key_len);
        over = n >= g->max_per_client;
        if (n >= g->max_per_client + g->extra_per_client) {
            atomic_fetch_add(&g->n_refused, 1);
            log_refusal(g, now_ns, name, n);
            pthread_mutex_unlock(&g->mu);
            return QR_EBUSY;
        }
    }
    if (g->n_live >= g->max_conns) {
        ConnSlot *victim = NULL;
        for (ConnSlot *o = g->head; o; o = o->next)
            if (!o->kicked && o->state == CONN_WAITING &&
                (!victim || o->since_ns < victim->since_ns))
                victim = o;
        if (victim)
            kick(g, victim, CONN_KICK_EVICTED);
    }
    s->fd = fd;
    memcpy(s->key, key, sizeof key);
    s->key_len = key_len;
    s->state = CONN_WAITING;
    s->kicked = CONN_KICK_NONE;
    s->over_client_limit = over;
    s->since_ns = now_ns;
    s->deadline_ns = deadline_ns;
    s->next = NULL;
    s->prev = g->tail;
    if (g->tail)
        g->tail->next = s;
    else
        g->head = s;
    g->tail = s;
    g->n_live++;
    pthread_mutex_unlock(&g->mu);
    return QR_OK;
}

void conn_guard_remove(ConnGuard *g, ConnSlot *s)
{
    pthread_mutex_lock(&g->mu);
    if (s->prev)
        s->prev->next = s->next;
    else
        g->head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        g->tail = s->prev;
    if (!s->kicked)
        g->n_live--;
    s->prev = s->next = NULL;
    pthread_mutex_unlock(&g->mu);
}

void conn_guard_wait(ConnGuard *g, ConnSlot *s, uint64_t now_ns, uint64_t deadline_ns)
{
    pthread_mutex_lock(&g->mu);
    if (s->state != CONN_WAITING) {
        s->state = CONN_WAITING;
        s->since_ns = now_ns;
        s->deadline_ns = deadline_ns;
    } else if (deadline_ns && (!s->deadline_ns || deadline_ns < s->deadline_ns)) {
        s->deadline_ns = deadline_ns;
    }
    pthread_mutex_unlock(&g->mu);
}

bool conn_guard_busy(ConnGuard *g, ConnSlot *s)
{
    pthread_mutex_lock(&g->mu);
    bool ok = !s->kicked;
    s->state = CONN_BUSY;
    s->deadline_ns = 0;
    pthread_mutex_unlock(&g->mu);
    return ok;
}

ConnKick conn_guard_kicked(ConnGuard *g, ConnSlot *s)
{
    pthread_mutex_lock(&g->mu);
    ConnKick k = s->kicked;
    pthread_mutex_unlock(&g->mu);
    return k;
}

uint64_t conn_guard_expire(ConnGuard *g, uint64_t now_ns)
{
    uint64_t next = 0;
    pthread_mutex_lock(&g->mu);
    for (ConnSlot *o = g->head; o; o = o->next) {
        if (o->kicked || o->state != CONN_WAITING || !o->deadline_ns)
            continue;
        if (o->deadline_ns <= now_ns)
            kick(g, o, CONN_KICK_TIMEOUT);
        else if (!next || o->deadline_ns < next)
            next = o->deadline_ns;
    }
    pthread_mutex_unlock(&g->mu);
    return next;
}

int conn_guard_live(ConnGuard *g)
{
    pthread_mutex_lock(&g->mu);
    int n = g->n_live;
    pthread_mutex_unlock(&g->mu);
    return n;
}
