/*
 * test_table_ref.c — table handles (query/table_ref.c) and the canonical
 * query forms of query/canonical.c.
 *
 * Handles: a drop waits for the last reference and then removes the table;
 * it gives up with QR_EBUSY after its timeout, leaving the table usable;
 * an acquire that arrives during a drop waits for it and finds the table
 * gone; many threads acquiring, searching and releasing while another
 * drops and recreates never see a freed handle (run under ASan by
 * make asan-unit).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine_util.h"
#include "query/quarry.h"
#include "store/schema.h"
#include "store/util.h"

static char *dir;
static QrDb *db;

static void setup(void)
{
    qr_log_set_level(QR_LOG_ERROR);
    dir = eu_tmpdir("tref");
    QrDbOpts o;
    qr_db_opts_default(&o);
    o.background_merge = false;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(qr_db_open(dir, &o, &db, &e), QR_OK, "%s", e.message);
}

static void teardown(void)
{
    qr_db_close(db);
    eu_rmtree(dir);
    free(dir);
}

static void make_table(const char *name, int n_docs)
{
    static const char *S = "{\"primary_key\":\"id\",\"fields\":[{\"name\":\"title\",\"type\":\"text\"}]}";
    QrSchema sc;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(schema_from_json(S, strlen(S), &sc, &e), QR_OK, "%s", e.message);
    QrTable *t;
    cr_assert_eq(qr_table_create(db, name, &sc, &t, &e), QR_OK, "%s", e.message);
    QrBatch *b;
    cr_assert_eq(qr_batch_begin(t, &b, &e), QR_OK, "%s", e.message);
    for (int i = 0; i < n_docs; i++) {
        char doc[128];
        int len = snprintf(doc, sizeof doc, "{\"id\":%d,\"title\":\"alpha %s %d\"}", i,
                           i % 2 ? "beta" : "gamma", i);
        cr_assert_eq(qr_batch_put(b, doc, (size_t)len, NULL, &e), QR_OK, "%s", e.message);
    }
    cr_assert_eq(qr_batch_commit(b, &e), QR_OK, "%s", e.message);
    qr_batch_free(b);
}

static uint64_t ms_now(void) { return qr_now_ns() / 1000000; }

TestSuite(table_ref, .init = setup, .fini = teardown);

Test(table_ref, acquire_counts_and_missing_table)
{
    make_table("t", 10);
    QrError e;
    qr_error_clear(&e);
    QrTable *t = NULL;
    cr_assert_eq(qr_table_acquire(db, "t", &t, &e), QR_OK);
    cr_assert_not_null(t);
    cr_assert_eq(qr_table_acquire(db, "t", NULL, &e), QR_OK);
    cr_assert_eq(qr_table_refs(db, "t"), 2);
    qr_table_release(db, "t");
    qr_table_release(db, "t");
    cr_assert_eq(qr_table_refs(db, "t"), 0);
    qr_table_release(db, "t"); /* an extra release is harmless */
    cr_assert_eq(qr_table_refs(db, "t"), 0);
    cr_assert_eq(qr_table_acquire(db, "nosuch", &t, &e), QR_ENOTFOUND);
    cr_assert_eq(qr_table_refs(db, "nosuch"), 0, "a failed acquire keeps no reference");
}

/* A claim (a transaction block's DROP TABLE at COMMIT) waits for no one
 * here, keeps try_acquire out without waiting, and leaves the table as it
 * was when unclaimed without a drop. */
Test(table_ref, claim_keeps_try_acquire_out, .timeout = 60)
{
    make_table("t", 3);
    QrError e;
    qr_error_clear(&e);
    QrTable *t = NULL;
    cr_assert_eq(qr_table_claim(db, "t", 1000, &e), QR_OK, "%s", e.message);
    cr_assert_eq(qr_table_try_acquire(db, "t", &t, &e), QR_EBUSY);
    cr_assert_null(t);
    cr_assert_eq(qr_table_refs(db, "t"), 0, "a refused try keeps no reference");
    qr_table_unclaim(db, "t");
    qr_error_clear(&e);
    cr_assert_eq(qr_table_try_acquire(db, "t", &t, &e), QR_OK, "%s", e.message);
    cr_assert_not_null(t);
    QrTableStats st;
    qr_table_stats(t, &st);
    cr_assert_eq(st.docs_total, 3);
    /* a claim waits for the reference, then gives up */
    cr_assert_eq(qr_table_claim(db, "t", 50, &e), QR_EBUSY);
    qr_table_release(db, "t");
    cr_assert_eq(qr_table_try_acquire(db, "nosuch", &t, &e), QR_ENOTFOUND);
}

Test(table_ref, drop_times_out_while_held_and_table_survives)
{
    make_table("t", 20);
    QrError e;
    qr_error_clear(&e);
    QrTable *t;
    cr_assert_eq(qr_table_acquire(db, "t", &t, &e), QR_OK);
    uint64_t t0 = ms_now();
    cr_assert_eq(qr_table_drop_wait(db, "t", 150, &e), QR_EBUSY);
    uint64_t waited = ms_now() - t0;
    /* a lower bound only: a busy machine makes the wait longer, never
     * shorter (the margin covers the milliseconds' truncation) */
    cr_assert(waited >= 140, "gave up after %llu ms", (unsigned long long)waited);
    cr_assert(strstr(e.message, "in use by 1 request"), "%s", e.message);
    /* the handle is still valid and searchable */
    QrSearchReq rq;
    qr_search_req_init(&rq);
    rq.q = "alpha";
    rq.q_len = 5;
    QrSearchRes *res;
    cr_assert_eq(qr_search(t, &rq, &res, &e), QR_OK, "%s", e.message);
    cr_assert_eq(res->total, 20);
    qr_search_res_free(res);
    qr_table_release(db, "t");
    qr_error_clear(&e);
    cr_assert_eq(qr_table_drop_wait(db, "t", 1000, &e), QR_OK, "%s", e.message);
    cr_assert_eq(qr_table_get(db, "t", &t, &e), QR_ENOTFOUND);
}

static uint64_t hits(const char *name, const char *q)
{
    QrError e;
    qr_error_clear(&e);
    QrTable *t;
    cr_assert_eq(qr_table_acquire(db, name, &t, &e), QR_OK, "%s", e.message);
    QrSearchReq rq;
    qr_search_req_init(&rq);
    rq.q = q;
    rq.q_len = strlen(q);
    QrSearchRes *res;
    cr_assert_eq(qr_search(t, &rq, &res, &e), QR_OK, "%s", e.message);
    uint64_t n = res->total;
    qr_search_res_free(res);
    qr_table_release(db, name);
    return n;
}

/* The swap (ALTER TABLE ADD PRIMARY KEY's last step) waits for references on
 * both names like a drop, gives up leaving both as they were, and then
 * exchanges the tables' contents whole. */
Test(table_ref, swap_waits_for_references_then_exchanges)
{
    make_table("a", 20);
    make_table("b", 7);
    QrError e;
    qr_error_clear(&e);
    QrTable *t;
    cr_assert_eq(qr_table_acquire(db, "b", &t, &e), QR_OK);
    cr_assert_eq(qr_table_swap_wait(db, "a", "b", 100, &e), QR_EBUSY);
    cr_assert(strstr(e.message, "\"b\" is in use by 1 request"), "%s", e.message);
    qr_table_release(db, "b");
    cr_assert_eq(hits("a", "alpha"), 20, "a untouched after the refused swap");
    cr_assert_eq(hits("b", "alpha"), 7);
    qr_error_clear(&e);
    cr_assert_eq(qr_table_swap_wait(db, "a", "b", 1000, &e), QR_OK, "%s", e.message);
    cr_assert_eq(hits("a", "alpha"), 7, "a holds b's documents");
    cr_assert_eq(hits("b", "alpha"), 20, "b holds a's documents");
    cr_assert_eq(qr_table_swap_wait(db, "a", "nosuch", 1000, &e), QR_ENOTFOUND);
    cr_assert_eq(hits("a", "alpha"), 7, "a failed swap changes nothing");
}

typedef struct Holder {
    int hold_ms;
    uint64_t released_at;
} Holder;

static void *hold_then_release(void *arg)
{
    Holder *h = arg;
    struct timespec ts = {h->hold_ms / 1000, (long)(h->hold_ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
    h->released_at = ms_now();
    qr_table_release(db, "t");
    return NULL;
}

Test(table_ref, drop_waits_for_the_last_release)
{
    make_table("t", 5);
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(qr_table_acquire(db, "t", NULL, &e), QR_OK);
    Holder h = {.hold_ms = 200};
    pthread_t th;
    pthread_create(&th, NULL, hold_then_release, &h);
    cr_assert_eq(qr_table_drop_wait(db, "t", 0, &e), QR_OK, "%s", e.message);
    uint64_t dropped_at = ms_now();
    pthread_join(th, NULL);
    cr_assert(dropped_at >= h.released_at, "the drop returned before the release");
    QrTable *t;
    cr_assert_eq(qr_table_acquire(db, "t", &t, &e), QR_ENOTFOUND);
}

typedef struct Churn {
    atomic_bool stop;
    atomic_int searches, missing, errors;
} Churn;

static void *searcher(void *arg)
{
    Churn *c = arg;
    while (!atomic_load(&c->stop)) {
        QrError e;
        qr_error_clear(&e);
        QrTable *t;
        int rc = qr_table_acquire(db, "t", &t, &e);
        if (rc == QR_ENOTFOUND) {
            atomic_fetch_add(&c->missing, 1);
            continue;
        }
        if (rc != QR_OK) {
            atomic_fetch_add(&c->errors, 1);
            continue;
        }
        QrSearchReq rq;
        qr_search_req_init(&rq);
        rq.q = "alpha beta";
        rq.q_len = 10;
        QrSearchRes *res;
        if (qr_search(t, &rq, &res, &e) == QR_OK) {
            /* 0: a table re-created by the test but not yet committed (its
             * 200 documents land in one commit, so nothing in between) */
            if (res->total != 200 && res->total != 0)
                atomic_fetch_add(&c->errors, 1);
            qr_search_res_free(res);
            atomic_fetch_add(&c->searches, 1);
        } else {
            atomic_fetch_add(&c->errors, 1);
        }
        qr_table_release(db, "t");
    }
    return NULL;
}

/* Wait until *counter exceeds `above`: the searchers' progress, not a
 * sleep, paces the test.  The 60 s bound only turns a hang into a failure. */
static bool wait_above(atomic_int *counter, int above)
{
    for (int i = 0; i < 60000 && atomic_load(counter) <= above; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(counter) > above;
}

Test(table_ref, drop_and_recreate_under_concurrent_searches)
{
    Churn c;
    memset(&c, 0, sizeof c);
    make_table("t", 200);
    pthread_t th[6];
    for (int i = 0; i < 6; i++)
        pthread_create(&th[i], NULL, searcher, &c);
    /* each round: searches find the table, it is dropped under them, a
     * search finds it gone, and it is made again */
    bool found = true, gone = true;
    for (int round = 0; round < 5 && found && gone; round++) {
        found = wait_above(&c.searches, atomic_load(&c.searches));
        QrError e;
        qr_error_clear(&e);
        cr_assert_eq(qr_table_drop_wait(db, "t", 60000, &e), QR_OK, "%s", e.message);
        gone = wait_above(&c.missing, atomic_load(&c.missing));
        make_table("t", 200);
    }
    atomic_store(&c.stop, true);
    for (int i = 0; i < 6; i++)
        pthread_join(th[i], NULL);
    cr_assert_eq(atomic_load(&c.errors), 0);
    cr_assert(found, "no search found the table (%d searches)", atomic_load(&c.searches));
    cr_assert(gone, "no search saw the table dropped");
}

Test(canonical, text_query_forms)
{
    const char *same[] = {"alpha beta", "alpha   beta", "(alpha beta)", "((alpha) beta)"};
    QrBuf first;
    qr_buf_init(&first);
    QrError e;
    for (int i = 0; i < 4; i++) {
        QrBuf b;
        qr_buf_init(&b);
        qr_error_clear(&e);
        cr_assert_eq(qr_query_canonical(same[i], strlen(same[i]), false, &b, &e), QR_OK);
        if (i == 0)
            qr_buf_append(&first, b.data, b.len);
        else
            cr_assert(b.len == first.len && !memcmp(b.data, first.data, b.len), "%s: %.*s", same[i],
                      (int)b.len, (char *)b.data);
        qr_buf_free(&b);
    }
    QrBuf a, o;
    qr_buf_init(&a);
    qr_buf_init(&o);
    cr_assert_eq(qr_query_canonical("alpha beta", 10, true, &a, &e), QR_OK);
    cr_assert(a.len != first.len || memcmp(a.data, first.data, a.len), "AND and OR differ");
    qr_error_clear(&e);
    cr_assert_eq(qr_query_canonical("alpha AND (", 11, false, &o, &e), QR_ESYNTAX);
    cr_assert_eq(o.len, 0);
    qr_buf_free(&a);
    qr_buf_free(&o);
    qr_buf_free(&first);
}

static void buf_is(const QrBuf *b, const char *want)
{
    cr_assert(b->len == strlen(want) && !memcmp(b->data, want, b->len), "got \"%.*s\", want \"%s\"",
              (int)b->len, b->data ? (const char *)b->data : "", want);
}

Test(canonical, sql_normalize_and_fingerprint)
{
    const char *x = "SELECT id FROM t WHERE n > 5 AND s = 'a b'";
    const char *y = "select id\n  from t where n>99 and s='zz'";
    const char *z = "SELECT id FROM t WHERE n < 5 AND s = 'a b'";
    uint64_t fx, fy, fz;
    QrBuf bx, by, bz;
    qr_buf_init(&bx);
    qr_buf_init(&by);
    qr_buf_init(&bz);
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(qr_sql_normalize(x, strlen(x), &bx, &fx, &e), QR_OK);
    cr_assert_eq(qr_sql_normalize(y, strlen(y), &by, &fy, &e), QR_OK);
    cr_assert_eq(qr_sql_normalize(z, strlen(z), &bz, &fz, &e), QR_OK);
    buf_is(&bx, "SELECT id FROM t WHERE n > $1 AND s = $2");
    buf_is(&by, "select id from t where n>$1 and s=$2");
    cr_assert(fx && fx == fy, "constants, case and spacing do not change the fingerprint");
    cr_assert_neq(fx, fz, "another operator is another shape");
    QrBuf bad;
    qr_buf_init(&bad);
    qr_error_clear(&e);
    cr_assert_eq(qr_sql_normalize("SELEC 1", 7, &bad, NULL, &e), QR_ESYNTAX);
    qr_buf_free(&bx);
    qr_buf_free(&by);
    qr_buf_free(&bz);
    qr_buf_free(&bad);
}
