/*
 * sql_conflict.c — the conflict rule between SQL transactions that write
 * the same key: first committer wins.
 *
 * Layer: query/.  Calls the base kit.
 *
 * Every SQL commit (sql_txn.c apply_all, under its process-wide apply lock)
 * gets the next commit number.  A REPEATABLE READ block takes the current
 * number when it first reads or writes (its start).  At its COMMIT, still
 * under the apply lock, every key it wrote is looked up among the keys
 * that SQL commits wrote since: one committed after the block's start means
 * the block worked from a version of the row that is no longer current,
 * and its COMMIT fails with 40001 (could not serialize access due to
 * concurrent update) and applies nothing -- PostgreSQL's rule for
 * REPEATABLE READ, checked at COMMIT instead of at the UPDATE.
 *
 * The keys written are remembered only while a REPEATABLE READ block is
 * open, and only those committed after the oldest open block's start: the
 * table stays as small as the writes that could still conflict.  Writers
 * outside SQL (HTTP ingest, import) take no commit number and are not
 * seen.  READ COMMITTED blocks are not checked: the later commit wins.
 */
#include "query/sql_int.h"
#include "query/sql_w.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef struct KeySeq {
    uint64_t hash;   /* of (table, key); 0 = empty slot */
    uint64_t seq;    /* commit number of its last SQL commit */
    char *tk;        /* owns: "table\0key" */
} KeySeq;

static pthread_mutex_t cf_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t cf_seq;          /* last commit number handed out */
static KeySeq *cf_keys;          /* open addressing, cf_cap a power of two */
static size_t cf_n, cf_cap;
static uint64_t *cf_open;        /* starts of the open REPEATABLE READ blocks */
static int cf_n_open, cf_cap_open;

/* The op's hash of (table, key) (sql_txn.c), never 0 (the empty slot). */
static uint64_t tk_hash(const TxnOp *o) { return o->hash ? o->hash : 1; }

static bool tk_eq(const KeySeq *e, const char *table, const char *key)
{
    return !strcmp(e->tk, table) && !strcmp(e->tk + strlen(e->tk) + 1, key);
}

static KeySeq *slot(KeySeq *tab, size_t cap, uint64_t h, const char *table, const char *key)
{
    for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1))
        if (!tab[i].hash || (tab[i].hash == h && tk_eq(&tab[i], table, key)))
            return &tab[i];
}

/* Rebuild at `cap` keeping only entries newer than `keep_after`. */
static bool rebuild(size_t cap, uint64_t keep_after)
{
    KeySeq *n = qr_calloc(cap, sizeof *n);
    if (!n)
        return false;
    size_t kept = 0;
    for (size_t i = 0; i < cf_cap; i++) {
        KeySeq *e = &cf_keys[i];
        if (!e->hash)
            continue;
        if (e->seq <= keep_after) {
            qr_free(e->tk);
            continue;
        }
        const char *key = e->tk + strlen(e->tk) + 1;
        *slot(n, cap, e->hash, e->tk, key) = *e;
        kept++;
    }
    qr_free(cf_keys);
    cf_keys = n;
    cf_cap = cap;
    cf_n = kept;
    return true;
}

static uint64_t oldest_open(void)
{
    uint64_t m = UINT64_MAX;
    for (int i = 0; i < cf_n_open; i++)
        if (cf_open[i] < m)
            m = cf_open[i];
    return m;
}

void sqlx_block_start(SqluState *st)
{
    pthread_mutex_lock(&cf_lock);
    st->rr_start = cf_seq;
    st->rr_registered = false;
    if (cf_n_open == cf_cap_open) {
        int nc = cf_cap_open ? cf_cap_open * 2 : 16;
        uint64_t *n = qr_realloc(cf_open, (size_t)nc * sizeof *n);
        if (n) {
            cf_open = n;
            cf_cap_open = nc;
        }
    }
    if (cf_n_open < cf_cap_open) {
        cf_open[cf_n_open++] = st->rr_start;
        st->rr_registered = true;
    }
    pthread_mutex_unlock(&cf_lock);
}

void sqlx_block_end(SqluState *st)
{
    if (!st->rr_registered)
        return;
    pthread_mutex_lock(&cf_lock);
    for (int i = 0; i < cf_n_open; i++)
        if (cf_open[i] == st->rr_start) {
            cf_open[i] = cf_open[--cf_n_open];
            break;
        }
    if (cf_n_open == 0 && cf_n) { /* nobody can conflict with what is remembered */
        for (size_t i = 0; i < cf_cap; i++)
            qr_free(cf_keys[i].tk);
        qr_free(cf_keys);
        cf_keys = NULL;
        cf_n = cf_cap = 0;
    }
    pthread_mutex_unlock(&cf_lock);
    st->rr_registered = false;
}

int sqlx_check(const SqluState *st, QrError *err)
{
    if (st->iso != SQLI_REPEATABLE_READ || !st->rr_registered)
        return QR_OK;
    int rc = QR_OK;
    pthread_mutex_lock(&cf_lock);
    for (int i = 0; i < st->n_ops && cf_n && rc == QR_OK; i++) {
        const TxnOp *o = &st->ops[i];
        if (!o->first)
            continue;
        KeySeq *e = slot(cf_keys, cf_cap, tk_hash(o), o->table, o->key);
        if (e->hash && e->seq > st->rr_start) {
            rc = qr_error_set(err, QR_EBUSY, "could not serialize access due to concurrent "
                                                 "update");
            qr_error_detail(err, "Key %s of table \"%s\" was written by a transaction that "
                                 "committed after this one began.", o->key, o->table);
            qr_error_hint(err, "The transaction might succeed if retried.");
            qr_error_set_sqlstate(err, "40001");
        }
    }
    pthread_mutex_unlock(&cf_lock);
    return rc;
}

void sqlx_committed(const SqluState *st)
{
    pthread_mutex_lock(&cf_lock);
    uint64_t seq = ++cf_seq;
    if (cf_n_open > 0) {
        for (int i = 0; i < st->n_ops; i++) {
            const TxnOp *o = &st->ops[i];
            if (!o->first)
                continue;
            if (2 * (cf_n + 1) > cf_cap &&
                !rebuild(cf_cap ? cf_cap * 2 : 1024, oldest_open()))
                break; /* out of memory: a later conflict may go unseen */
            uint64_t h = tk_hash(o);
            KeySeq *e = slot(cf_keys, cf_cap, h, o->table, o->key);
            if (!e->hash) {
                size_t tl = strlen(o->table), kl = strlen(o->key);
                if (!(e->tk = qr_malloc(tl + kl + 2)))
                    break;
                memcpy(e->tk, o->table, tl + 1);
                memcpy(e->tk + tl + 1, o->key, kl + 1);
                e->hash = h;
                cf_n++;
            }
            e->seq = seq;
        }
    }
    pthread_mutex_unlock(&cf_lock);
}
