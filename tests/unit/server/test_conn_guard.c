/*
 * test_conn_guard.c — connection admission and deadlines (server/conn_guard.c)
 * and client address keys (server/netaddr.c).
 *
 * A brute-force model replays random sequences of accepts from a few
 * clients (IPv4, the same address v4-mapped in IPv6, hosts of one IPv6 /64
 * and of another), waits, busy marks, deadline sweeps at an injected clock
 * and closes, and checks every admission answer, every kick (which slot,
 * why, in which order), the live count and the next deadline against the
 * guard.  Hand-written cases pin the client keys and names and the rules
 * the model relies on.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/conn_guard.h"
#include "store/error.h"

/* ---- peers ---- */

static struct sockaddr_storage peer(const char *ip)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    if (strchr(ip, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        cr_assert_eq(inet_pton(AF_INET6, ip, &a->sin6_addr), 1, "%s", ip);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        cr_assert_eq(inet_pton(AF_INET, ip, &a->sin_addr), 1, "%s", ip);
    }
    return ss;
}

/* Addresses and the client each belongs to (the oracle for per-client
 * counting). */
static const struct {
    const char *ip;
    int client;
} PEERS[] = {
    {"10.0.0.1", 0},        {"::ffff:10.0.0.1", 0},     {"10.0.0.2", 1},
    {"2001:db8:1:2::5", 2}, {"2001:db8:1:2:ffff::6", 2}, {"2001:db8:1:3::5", 3},
};
#define N_PEERS (int)(sizeof PEERS / sizeof PEERS[0])

Test(netaddr, client_keys_and_names)
{
    uint8_t k[NETADDR_KEY_MAX], k2[NETADDR_KEY_MAX];
    char name[64];
    struct sockaddr_storage a = peer("10.0.0.1"), b = peer("::ffff:10.0.0.1");
    cr_assert_eq(netaddr_client_key(&a, k, name, sizeof name), 4);
    cr_assert_str_eq(name, "10.0.0.1");
    cr_assert_eq(netaddr_client_key(&b, k2, name, sizeof name), 4);
    cr_assert_str_eq(name, "10.0.0.1");
    cr_assert_eq(memcmp(k, k2, 4), 0);
    a = peer("2001:db8:1:2:aaaa::1");
    b = peer("2001:db8:1:2:bbbb::2");
    cr_assert_eq(netaddr_client_key(&a, k, name, sizeof name), 8);
    cr_assert_str_eq(name, "2001:db8:1:2::/64");
    cr_assert_eq(netaddr_client_key(&b, k2, NULL, 0), 8);
    cr_assert_eq(memcmp(k, k2, 8), 0);
    b = peer("2001:db8:1:3::1");
    netaddr_client_key(&b, k2, NULL, 0);
    cr_assert_neq(memcmp(k, k2, 8), 0);
    struct sockaddr_storage u;
    memset(&u, 0, sizeof u);
    u.ss_family = AF_UNIX;
    cr_assert_eq(netaddr_client_key(&u, k, name, sizeof name), 0);
}

/* ---- kicks are recorded in order ---- */

typedef struct Kick {
    ConnSlot *slot;
    ConnKick why;
} Kick;

static Kick kicks[4096];
static int n_kicks;

static void record_kick(ConnSlot *slot, ConnKick why, void *arg)
{
    (void)arg;
    cr_assert_lt(n_kicks, 4096);
    kicks[n_kicks++] = (Kick){slot, why};
}

/* A guard that records its kicks in kicks[] (from 0). */
static void guard_open(ConnGuard *g, int max_conns, int max_per_client, int extra)
{
    n_kicks = 0;
    conn_guard_init(g, "test", max_conns, max_per_client, extra, record_kick, NULL);
}

Test(conn_guard, per_client_limit_with_extra_allowance)
{
    ConnGuard g;
    guard_open(&g, 100, 2, 1);
    ConnSlot s[6];
    struct sockaddr_storage a = peer("10.0.0.1"), m = peer("::ffff:10.0.0.1"),
                            b = peer("10.0.0.2");
    char name[64];
    cr_assert_eq(conn_guard_add(&g, &s[0], -1, &a, 1, 0, name), QR_OK);
    cr_assert(!s[0].over_client_limit);
    cr_assert_eq(conn_guard_add(&g, &s[1], -1, &m, 2, 0, name), QR_OK);
    cr_assert(!s[1].over_client_limit);
    /* the third from the same client: the extra allowance, marked */
    cr_assert_eq(conn_guard_add(&g, &s[2], -1, &a, 3, 0, name), QR_OK);
    cr_assert(s[2].over_client_limit);
    cr_assert_eq(conn_guard_add(&g, &s[3], -1, &a, 4, 0, name), QR_EBUSY);
    cr_assert_str_eq(name, "10.0.0.1");
    cr_assert_eq(atomic_load(&g.n_refused), 1);
    /* another client is not affected */
    cr_assert_eq(conn_guard_add(&g, &s[4], -1, &b, 5, 0, name), QR_OK);
    cr_assert(!s[4].over_client_limit);
    /* a closed connection frees its client's place */
    conn_guard_remove(&g, &s[0]);
    cr_assert_eq(conn_guard_add(&g, &s[5], -1, &a, 6, 0, name), QR_OK);
    cr_assert(s[5].over_client_limit); /* s1, s2 still count */
    cr_assert_eq(conn_guard_live(&g), 4);
    cr_assert_eq(n_kicks, 0);
    conn_guard_destroy(&g);
}

Test(conn_guard, room_is_made_from_the_longest_waiting)
{
    ConnGuard g;
    guard_open(&g, 3, 0, 0);
    ConnSlot s[6];
    struct sockaddr_storage a = peer("10.0.0.1");
    for (int i = 0; i < 3; i++)
        cr_assert_eq(conn_guard_add(&g, &s[i], -1, &a, 10 + (uint64_t)i, 0, NULL), QR_OK);
    /* s0 is served, s1 waits again later than s2 */
    cr_assert(conn_guard_busy(&g, &s[0]));
    cr_assert(conn_guard_busy(&g, &s[1]));
    conn_guard_wait(&g, &s[1], 20, 0);
    cr_assert_eq(conn_guard_add(&g, &s[3], -1, &a, 21, 0, NULL), QR_OK);
    cr_assert_eq(n_kicks, 1);
    cr_assert_eq(kicks[0].slot, &s[2]);
    cr_assert_eq(kicks[0].why, CONN_KICK_EVICTED);
    cr_assert(!conn_guard_busy(&g, &s[2]), "a kicked connection must not be served");
    cr_assert_eq(conn_guard_kicked(&g, &s[2]), CONN_KICK_EVICTED);
    /* all busy: admitted beyond the limit, nobody kicked */
    cr_assert(conn_guard_busy(&g, &s[1]));
    cr_assert(conn_guard_busy(&g, &s[3]));
    cr_assert_eq(conn_guard_add(&g, &s[4], -1, &a, 22, 0, NULL), QR_OK);
    cr_assert_eq(n_kicks, 1);
    cr_assert_eq(conn_guard_live(&g), 4);
    cr_assert_eq(atomic_load(&g.n_evicted), 1);
    conn_guard_destroy(&g);
}

Test(conn_guard, deadlines_count_from_the_start_of_waiting)
{
    ConnGuard g;
    guard_open(&g, 10, 0, 0);
    ConnSlot s[3];
    struct sockaddr_storage a = peer("10.0.0.1");
    cr_assert_eq(conn_guard_add(&g, &s[0], -1, &a, 0, 100, NULL), QR_OK);
    cr_assert_eq(conn_guard_add(&g, &s[1], -1, &a, 0, 50, NULL), QR_OK);
    cr_assert_eq(conn_guard_add(&g, &s[2], -1, &a, 0, 0, NULL), QR_OK);
    /* waiting again while waiting: the earlier deadline stays (a request
     * line trickling in does not buy time) */
    conn_guard_wait(&g, &s[0], 90, 150);
    cr_assert_eq(conn_guard_expire(&g, 49), 50);
    cr_assert_eq(n_kicks, 0);
    cr_assert_eq(conn_guard_expire(&g, 50), 100);
    cr_assert_eq(n_kicks, 1);
    cr_assert_eq(kicks[0].slot, &s[1]);
    cr_assert_eq(kicks[0].why, CONN_KICK_TIMEOUT);
    /* busy: no deadline; waiting again after being served starts anew */
    cr_assert(conn_guard_busy(&g, &s[0]));
    cr_assert_eq(conn_guard_expire(&g, 1000), 0);
    conn_guard_wait(&g, &s[0], 1000, 1200);
    cr_assert_eq(conn_guard_expire(&g, 1100), 1200);
    cr_assert_eq(conn_guard_expire(&g, 1200), 0);
    cr_assert_eq(n_kicks, 2);
    cr_assert_eq(kicks[1].slot, &s[0]);
    cr_assert_eq(atomic_load(&g.n_timed_out), 2);
    cr_assert_eq(conn_guard_live(&g), 1); /* s2 never expires */
    conn_guard_destroy(&g);
}

/* ---- the model ---- */

typedef struct Model {
    bool present;     /* added and not removed */
    int client;
    bool busy;
    ConnKick kicked;
    bool over;
    uint64_t since, deadline;
} Model;

Test(conn_guard, random_sequences_match_a_model)
{
    enum { SLOTS = 40, OPS = 4000 };
    srand(20261203);
    for (int round = 0; round < 30; round++) {
        int max_conns = 1 + rand() % 12, max_pc = rand() % 5, extra = rand() % 3;
        ConnGuard g;
        guard_open(&g, max_conns, max_pc, extra);
        ConnSlot slots[SLOTS];
        Model m[SLOTS];
        memset(m, 0, sizeof m);
        uint64_t now = 1;
        for (int op = 0; op < OPS; op++) {
            now += 1 + (uint64_t)(rand() % 3);
            int i = rand() % SLOTS;
            int what = rand() % 6;
            if (!m[i].present) {
                /* accept */
                int p = rand() % N_PEERS;
                uint64_t dl = rand() % 4 ? now + 1 + (uint64_t)(rand() % 40) : 0;
                struct sockaddr_storage ss = peer(PEERS[p].ip);
                int n_client = 0, n_live = 0;
                for (int k = 0; k < SLOTS; k++)
                    if (m[k].present && !m[k].kicked) {
                        n_live++;
                        n_client += m[k].client == PEERS[p].client;
                    }
                bool refuse = max_pc > 0 && n_client >= max_pc + extra;
                int victim = -1;
                if (!refuse && n_live >= max_conns)
                    for (int k = 0; k < SLOTS; k++)
                        if (m[k].present && !m[k].kicked && !m[k].busy &&
                            (victim < 0 || m[k].since < m[victim].since))
                            victim = k;
                int before = n_kicks;
                int rc = conn_guard_add(&g, &slots[i], -1, &ss, now, dl, NULL);
                cr_assert_eq(rc, refuse ? QR_EBUSY : QR_OK, "round %d op %d", round, op);
                if (refuse)
                    continue;
                if (victim >= 0) {
                    cr_assert_eq(n_kicks, before + 1, "round %d op %d: one eviction", round, op);
                    cr_assert_eq(kicks[before].slot, &slots[victim]);
                    cr_assert_eq(kicks[before].why, CONN_KICK_EVICTED);
                    m[victim].kicked = CONN_KICK_EVICTED;
                } else {
                    cr_assert_eq(n_kicks, before, "round %d op %d: no eviction", round, op);
                }
                m[i] = (Model){true, PEERS[p].client, false, CONN_KICK_NONE,
                               max_pc > 0 && n_client >= max_pc, now, dl};
                cr_assert_eq(slots[i].over_client_limit, m[i].over);
            } else if (what == 0) {
                conn_guard_remove(&g, &slots[i]);
                m[i].present = false;
            } else if (what == 1) {
                cr_assert_eq(conn_guard_busy(&g, &slots[i]), !m[i].kicked);
                m[i].busy = true;
                m[i].deadline = 0;
            } else if (what == 2) {
                uint64_t dl = rand() % 4 ? now + 1 + (uint64_t)(rand() % 40) : 0;
                conn_guard_wait(&g, &slots[i], now, dl);
                if (m[i].busy) {
                    m[i].busy = false;
                    m[i].since = now;
                    m[i].deadline = dl;
                } else if (dl && (!m[i].deadline || dl < m[i].deadline)) {
                    m[i].deadline = dl;
                }
            } else if (what == 3) {
                int before = n_kicks, expect = 0;
                uint64_t next = 0;
                bool due[SLOTS] = {false};
                for (int k = 0; k < SLOTS; k++) {
                    if (!m[k].present || m[k].kicked || m[k].busy || !m[k].deadline)
                        continue;
                    if (m[k].deadline <= now) {
                        due[k] = true;
                        expect++;
                    } else if (!next || m[k].deadline < next) {
                        next = m[k].deadline;
                    }
                }
                cr_assert_eq(conn_guard_expire(&g, now), next, "round %d op %d", round, op);
                cr_assert_eq(n_kicks - before, expect, "round %d op %d: timeouts", round, op);
                for (int j = before; j < n_kicks; j++) {
                    int k = (int)(kicks[j].slot - slots);
                    cr_assert_eq(kicks[j].why, CONN_KICK_TIMEOUT);
                    cr_assert(due[k], "round %d op %d: slot %d kicked early", round, op, k);
                    due[k] = false;
                    m[k].kicked = CONN_KICK_TIMEOUT;
                }
            } else {
                cr_assert_eq(conn_guard_kicked(&g, &slots[i]), m[i].kicked);
            }
            int live = 0;
            for (int k = 0; k < SLOTS; k++)
                live += m[k].present && !m[k].kicked;
            cr_assert_eq(conn_guard_live(&g), live, "round %d op %d", round, op);
            if (n_kicks > 3000)
                n_kicks = 0; /* only the kicks of the current op are compared */
        }
        conn_guard_destroy(&g);
    }
}
