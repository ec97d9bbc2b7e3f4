/*
 * test_loader.c — bulk loading on a pool of threads (quarry.h "bulk
 * loading", query/loader.c) and qr_batch_fill: whatever the thread count,
 * chunk size and memory budget, the table ends as a model of the input
 * says (the last good document of a key wins), outcomes arrive in input
 * order, "replaced" counts what a sequential load counts, and a strict
 * stop keeps exactly the documents before the bad one.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "query/query_int.h"
#include "store/mem.h"
#include "store/util.h"

#define N_WORDS 200

static char **words;
static EuZipf zipf;
static char *dir;
static QrDb *db;

static void setup(void)
{
    qr_log_set_level(QR_LOG_ERROR);
    words = eu_words(N_WORDS, 11);
    eu_zipf_init(&zipf, N_WORDS, 1.0);
    dir = eu_tmpdir("loader");
    QrDbOpts o;
    qr_db_opts_default(&o);
    o.fsync = QR_FSYNC_OFF;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(qr_db_open(dir, &o, &db, &e), QR_OK, "%s", e.message);
}

static void teardown(void)
{
    qr_db_close(db);
    eu_rmtree(dir);
    free(dir);
    eu_words_free(words, N_WORDS);
    eu_zipf_free(&zipf);
}

TestSuite(loader, .init = setup, .fini = teardown);

static QrTable *new_table(const char *name)
{
    QrSchema s;
    eu_random_schema(&s, true);
    QrTable *t;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(qr_table_create(db, name, &s, &t, &e), QR_OK, "%s", e.message);
    return t;
}

/* An input: documents (every 9th reuses an earlier key, in this chunk or
 * an earlier one) and bad ones, and its model. */
typedef struct Input {
    char **doc;
    bool *bad;
    int n;
    EuStore model;
    uint64_t want_replaced, want_added;
} Input;

static void input_make(Input *in, uint64_t seed, int n, int bad_from)
{
    uint64_t rng = seed;
    in->n = n;
    in->doc = calloc((size_t)n, sizeof *in->doc);
    in->bad = calloc((size_t)n, sizeof *in->bad);
    eu_store_init(&in->model);
    in->want_added = in->want_replaced = 0;
    int next = 0;
    for (int i = 0; i < n; i++) {
        uint64_t r = eu_below(&rng, 100);
        if (i < bad_from && r < 5)
            r = 50;
        if (r < 3) {
            in->doc[i] = strdup("{\"id\": 1, \"title\": ");  /* invalid JSON */
            in->bad[i] = true;
            continue;
        }
        if (r < 5) {
            in->doc[i] = strdup("{\"title\": \"no key\"}");
            in->bad[i] = true;
            continue;
        }
        char id[32];
        int k = r < 16 && next ? (int)eu_below(&rng, (uint64_t)next) : next++;
        snprintf(id, sizeof id, "%d", k);
        in->doc[i] = eu_random_doc(&rng, words, &zipf, id, NULL);
        uint8_t key[PK_KEY_MAX];
        size_t kl = eu_doc_key(in->doc[i], key);
        if (eu_store_get(&in->model, key, kl))
            in->want_replaced++;
        else
            in->want_added++;
        eu_store_put(&in->model, key, kl, in->doc[i]);
    }
}

static void input_free(Input *in)
{
    for (int i = 0; i < in->n; i++)
        free(in->doc[i]);
    free(in->doc);
    free(in->bad);
    eu_store_free(&in->model);
}

typedef struct Seen {
    uint64_t last_reject, last_commit;
    uint64_t rejected, added, replaced, commits;
    int disorder;
} Seen;

static void on_reject(void *arg, uint64_t tag, const QrError *e)
{
    Seen *s = arg;
    if (tag <= s->last_reject || tag <= s->last_commit || e->line != (int64_t)tag)
        s->disorder++;
    s->last_reject = tag;
    s->rejected++;
}

static void on_commit(void *arg, uint64_t last, uint64_t added, uint64_t replaced)
{
    Seen *s = arg;
    if (last < s->last_commit || last < s->last_reject)
        s->disorder++;
    s->last_commit = last;
    s->added += added;
    s->replaced += replaced;
    s->commits++;
}

static void check_table(QrTable *t, const EuStore *m, const char *what)
{
    Snapshot *s = table_snapshot(t->table);
    eu_assert_snapshot_is(s, m, what);
    snapshot_release(s);
}

/* Every thread count, tiny chunks and budgets: the same table and counts. */
Test(loader, any_threads_any_chunks_same_table_and_counts)
{
    Input in;
    input_make(&in, 5, 3000, 0);
    struct {
        int threads;
        uint64_t chunk_docs;
        size_t memory;
    } runs[] = {{1, 97, 0}, {2, 97, 0}, {3, 50, 0}, {4, 211, 0}, {3, 64, 64u << 20},
                {2, 10000, 0}};
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        char name[32], what[96];
        snprintf(name, sizeof name, "t%zu", r);
        snprintf(what, sizeof what, "threads %d, chunks of %lu", runs[r].threads,
                 (unsigned long)runs[r].chunk_docs);
        QrTable *t = new_table(name);
        Seen seen = {0};
        QrLoadOpts o = {.threads = runs[r].threads, .chunk_docs = runs[r].chunk_docs,
                        .memory_bytes = runs[r].memory, .on_reject = on_reject,
                        .on_commit = on_commit, .arg = &seen};
        QrLoader *l;
        QrError e;
        qr_error_clear(&e);
        cr_assert_eq(qr_loader_begin(t, &o, &l, &e), QR_OK, "%s", e.message);
        for (int i = 0; i < in.n; i++)
            cr_assert_eq(qr_loader_add(l, (uint64_t)i + 1, in.doc[i], strlen(in.doc[i]), &e),
                         QR_OK, "%s: %s", what, e.message);
        cr_assert_eq(qr_loader_finish(l, true, &e), QR_OK, "%s: %s", what, e.message);
        qr_loader_free(l);
        cr_assert_eq(seen.disorder, 0, "%s: outcomes out of input order", what);
        uint64_t bad = 0;
        for (int i = 0; i < in.n; i++)
            bad += in.bad[i];
        cr_assert_eq(seen.rejected, bad, "%s: rejected", what);
        cr_assert_eq(seen.added, in.want_added, "%s: added %lu", what, (unsigned long)seen.added);
        cr_assert_eq(seen.replaced, in.want_replaced, "%s: replaced %lu", what,
                     (unsigned long)seen.replaced);
        cr_assert_eq(seen.last_commit, (uint64_t)in.n,
                     "%s: the last commit covers the last line", what);
        check_table(t, &in.model, what);
    }
    input_free(&in);
}

/* Strict: the first bad document stops the load; the chunks before it are
 * committed, its own chunk's documents before it only when finish is
 * asked to commit. */
Test(loader, strict_stops_at_the_first_bad_document)
{
    Input in;
    input_make(&in, 9, 1500, 330);
    int first_bad = -1;
    for (int i = 0; i < in.n && first_bad < 0; i++)
        if (in.bad[i])
            first_bad = i;
    cr_assert_gt(first_bad, 200, "the input has good lines first");
    for (int commit = 0; commit < 2; commit++) {
        for (int threads = 1; threads <= 3; threads += 2) {
            char name[32];
            snprintf(name, sizeof name, "s%d%d", commit, threads);
            QrTable *t = new_table(name);
            Seen seen = {0};
            QrLoadOpts o = {.threads = threads, .chunk_docs = 64, .strict = true,
                            .on_reject = on_reject, .on_commit = on_commit, .arg = &seen};
            QrLoader *l;
            QrError e;
            qr_error_clear(&e);
            cr_assert_eq(qr_loader_begin(t, &o, &l, &e), QR_OK, "%s", e.message);
            int rc = QR_OK, i = 0;
            for (; i < in.n && rc == QR_OK; i++)
                rc = qr_loader_add(l, (uint64_t)i + 1, in.doc[i], strlen(in.doc[i]), &e);
            int frc = qr_loader_finish(l, commit, &e);
            cr_assert_neq(frc, QR_OK, "the load reports the bad line");
            cr_assert_eq(e.line, first_bad + 1, "the error names line %d: %ld", first_bad + 1,
                         (long)e.line);
            qr_loader_free(l);
            cr_assert_eq(seen.rejected, 1, "only the first bad line is reported");
            cr_assert_eq(seen.disorder, 0);
            /* the model: every good document before the bad one (commit), or
             * those of the chunks before its chunk */
            int upto = commit ? first_bad : first_bad / 64 * 64;
            EuStore m;
            eu_store_init(&m);
            for (int k = 0; k < upto; k++) {
                uint8_t key[PK_KEY_MAX];
                size_t kl = eu_doc_key(in.doc[k], key);
                eu_store_put(&m, key, kl, in.doc[k]);
            }
            check_table(t, &m, commit ? "strict, committed" : "strict, discarded");
            eu_store_free(&m);
        }
    }
    input_free(&in);
}

/* qr_batch_fill: puts and deletes over slices on several threads make the
 * batch that one thread makes, keys crossing slices included. */
Test(loader, batch_fill_on_threads_equals_one_thread)
{
    uint64_t rng = 3;
    int n = 9000;
    char **txt = calloc((size_t)n, sizeof *txt);
    QrLoadOp *ops = calloc((size_t)n, sizeof *ops);
    EuStore m;
    eu_store_init(&m);
    for (int i = 0; i < n; i++) {
        char id[32];
        int k = (int)eu_below(&rng, 3000); /* keys repeat across the slices */
        snprintf(id, sizeof id, "%d", k);
        if (eu_chance(&rng, 0.2)) {
            txt[i] = strdup(id);
            ops[i] = (QrLoadOp){true, txt[i], strlen(txt[i])};
            char doc[64];
            snprintf(doc, sizeof doc, "{\"id\":%s}", id);
            uint8_t key[PK_KEY_MAX];
            size_t kl = eu_doc_key(doc, key);
            eu_store_del(&m, key, kl);
        } else {
            txt[i] = eu_random_doc(&rng, words, &zipf, id, NULL);
            ops[i] = (QrLoadOp){false, txt[i], strlen(txt[i])};
            uint8_t key[PK_KEY_MAX];
            size_t kl = eu_doc_key(txt[i], key);
            eu_store_put(&m, key, kl, txt[i]);
        }
    }
    for (int threads = 1; threads <= 4; threads++) {
        char name[32];
        snprintf(name, sizeof name, "f%d", threads);
        QrTable *t = new_table(name);
        QrBatch *b;
        QrError e;
        qr_error_clear(&e);
        cr_assert_eq(qr_batch_begin(t, &b, &e), QR_OK);
        cr_assert_eq(qr_batch_fill(b, ops, (size_t)n, threads, NULL, &e), QR_OK, "%s",
                     e.message);
        cr_assert_eq(qr_batch_ops(b), (uint64_t)n);
        cr_assert_eq(qr_batch_commit(b, &e), QR_OK, "%s", e.message);
        qr_batch_free(b);
        char what[32];
        snprintf(what, sizeof what, "%d threads", threads);
        check_table(t, &m, what);
    }
    /* a bad document in a late slice: its error, at its index */
    free(txt[7000]);
    txt[7000] = strdup("{\"id\": 5, \"title\": [");
    ops[7000] = (QrLoadOp){false, txt[7000], strlen(txt[7000])};
    QrTable *t = new_table("fbad");
    QrBatch *b;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(qr_batch_begin(t, &b, &e), QR_OK);
    size_t at = 0;
    cr_assert_eq(qr_batch_fill(b, ops, (size_t)n, 3, &at, &e), QR_ESYNTAX, "%s", e.message);
    cr_assert_eq(at, 7000);
    qr_batch_free(b);
    for (int i = 0; i < n; i++)
        free(txt[i]);
    free(txt);
    free(ops);
    eu_store_free(&m);
}
