/*
 * test_table.c — the write path of a table: commit and visibility, WAL
 * replay after a crash, torn WAL tails, damaged WAL records before
 * acknowledged commits (refused; salvaged on request), upserts and deletes through
 * recovery and merges, deletes racing background merges, snapshots pinned
 * across merges, force merges, and allocation failures.
 *
 * Every check compares the table with a model of its live documents
 * (engine_util.h EuStore: key -> stored JSON) and checks that each segment's
 * index agrees with a re-analysis of its stored documents, and that the
 * B-trees of the two indexed fields (n, cat) agree with column scans.  Crashes are
 * simulated two ways: a child process that writes and _exit()s without
 * closing, and a copy of the table directory taken while it is open (the
 * files as a crash would leave them).
 */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine_util.h"
#include "index/btree.h"
#include "store/mem.h"
#include "store/util.h"

#define N_WORDS 250

static char **words;
static EuZipf zipf;
static char *root;
static QrSchema schema;

static void setup(void)
{
    qr_log_set_level(QR_LOG_ERROR);
    words = eu_words(N_WORDS, 7);
    eu_zipf_init(&zipf, N_WORDS, 1.0);
    root = eu_tmpdir("table");
    eu_random_schema(&schema, true);
    schema.all_field = true; /* as tables created from JSON default: "_all" too */
    /* two B-tree indexes: every recovery, merge and fault sweep below also
     * builds, rebuilds and removes their side files */
    schema.fields[schema_field_index(&schema, "n")].btree = true;
    schema.fields[schema_field_index(&schema, "cat")].btree = true;
}

/* Every indexed field of every segment has a tree that agrees with a scan of
 * its column (IS NOT NULL, and = the value of a few rows). */
static void check_btrees(const Snapshot *s, const char *what)
{
    for (int i = 0; i < s->n_segs; i++) {
        for (int f = 0; f < schema.n_fields; f++) {
            const Column *c = seg_column(s->segs[i], f);
            const BTree *bt = seg_btree(s->segs[i], f);
            cr_assert_eq(bt != NULL, c != NULL && schema.fields[f].btree,
                         "%s: segment %d field %s tree present", what, i, schema.fields[f].name);
            if (!bt)
                continue;
            uint32_t rows = col_rows(c);
            for (uint32_t k = 0; k < 4 && rows; k++) {
                ColPred p = {.op = CP_IS_NOT_NULL};
                uint32_t row = (uint32_t)((uint64_t)rows * k / 4);
                int64_t x;
                const char *str;
                size_t sn;
                if (k && col_get_int(c, row, &x))
                    p = (ColPred){.op = CP_EQ, .v = col_val_int(x)};
                else if (k && col_get_str(c, row, &str, &sn))
                    p = (ColPred){.op = CP_EQ, .v = col_val_str(str, sn)};
                roaring_bitmap_t *a = roaring_bitmap_create(), *b = roaring_bitmap_create();
                QrError e;
                qr_error_clear(&e);
                cr_assert_eq(bt_lookup(bt, &p, a, NULL, &e), QR_OK, "%s: %s", what, e.message);
                cr_assert_eq(col_scan(c, &p, NULL, b, NULL, &e), QR_OK);
                cr_assert(roaring_bitmap_equals(a, b), "%s: segment %d field %s: tree != scan",
                          what, i, schema.fields[f].name);
                roaring_bitmap_free(a);
                roaring_bitmap_free(b);
            }
        }
    }
}

static void teardown(void)
{
    qr_mem_fail_after(-1);
    eu_rmtree(root);
    free(root);
    eu_words_free(words, N_WORDS);
    eu_zipf_free(&zipf);
}

TestSuite(table, .init = setup, .fini = teardown);

static char *path_in(const char *name)
{
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/%s", root, name);
    return p;
}

static TableOpts opts_for(bool bg_merge, int merge_factor)
{
    TableOpts o;
    table_opts_default(&o);
    o.fsync = QR_FSYNC_OFF;
    o.background_merge = bg_merge;
    o.merge_factor = merge_factor;
    return o;
}

static Table *create(const char *dir, const TableOpts *o)
{
    Table *t;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_create(dir, &schema, o, &t, &e), QR_OK, "%s", e.message);
    return t;
}

static Table *reopen(const char *dir, const TableOpts *o)
{
    Table *t;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_open(dir, o, &t, &e), QR_OK, "open %s: %s", dir, e.message);
    return t;
}

static void id_of(int k, char *out, size_t n)
{
    if (k % 3 == 0)
        snprintf(out, n, "\"k%d\"", k);
    else
        snprintf(out, n, "%d", k);
}

/* Upsert doc k (random text); t or m may be NULL (table only / model only:
 * both consume the random stream the same way). */
static void put(Table *t, EuStore *m, uint64_t *rng, int k)
{
    char id[32];
    id_of(k, id, sizeof id);
    char *d = eu_random_doc(rng, words, &zipf, id, NULL);
    uint8_t key[PK_KEY_MAX];
    size_t kl = eu_doc_key(d, key);
    if (t) {
        QrError e;
        qr_error_clear(&e);
        bool replaced;
        bool had = m && eu_store_get(m, key, kl) != NULL;
        cr_assert_eq(table_put(t, d, strlen(d), &replaced, &e), QR_OK, "%s", e.message);
        if (m)
            cr_assert_eq(replaced, had, "put of %s: replaced %d, model says %d", id, replaced,
                         had);
    }
    if (m)
        eu_store_put(m, key, kl, d);
    free(d);
}

static void del(Table *t, EuStore *m, int k)
{
    char id[32];
    id_of(k, id, sizeof id);
    char doc[64];
    snprintf(doc, sizeof doc, "{\"id\":%s}", id);
    uint8_t key[PK_KEY_MAX];
    size_t kl = eu_doc_key(doc, key);
    if (t) {
        bool found;
        QrError e;
        qr_error_clear(&e);
        cr_assert_eq(table_delete_key(t, key, kl, &found, &e), QR_OK, "%s", e.message);
        if (m)
            cr_assert_eq(found, eu_store_get(m, key, kl) != NULL, "delete of %s: found %d", id,
                         found);
    }
    if (m)
        eu_store_del(m, key, kl);
}

static void commit(Table *t)
{
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_commit(t, &e), QR_OK, "%s", e.message);
}

/* The table's snapshot holds exactly the model, and every segment's index
 * agrees with its stored documents. */
static void check(Table *t, const EuStore *m, const char *what)
{
    Snapshot *s = table_snapshot(t);
    eu_assert_snapshot_is(s, m, what);
    for (int i = 0; i < s->n_segs; i++)
        eu_assert_segment_consistent(s->segs[i], &schema, what);
    check_btrees(s, what);
    snapshot_release(s);
}

/* A batch: new keys, upserts of old ones, deletes (some of absent keys). */
static void batch(Table *t, EuStore *m, uint64_t *rng, int *next_key, int n)
{
    for (int i = 0; i < n; i++) {
        uint64_t r = eu_below(rng, 100);
        if (r < 65 || *next_key == 0)
            put(t, m, rng, (*next_key)++);
        else if (r < 85)
            put(t, m, rng, (int)eu_below(rng, (uint64_t)*next_key));
        else
            del(t, m, (int)eu_below(rng, (uint64_t)*next_key + 3));
    }
}

Test(table, commit_makes_visible_close_discards_uncommitted)
{
    char *dir = path_in("t");
    TableOpts o = opts_for(false, 8);
    Table *t = create(dir, &o);
    EuStore m, pending;
    eu_store_init(&m);
    uint64_t rng = 1;
    int next = 0;
    check(t, &m, "empty");
    eu_store_copy(&pending, &m);
    batch(t, &pending, &rng, &next, 60);
    check(t, &m, "before the first commit");
    commit(t);
    eu_store_free(&m);
    eu_store_copy(&m, &pending);
    check(t, &m, "after commit");
    /* a second batch, uncommitted: invisible, then gone after close */
    batch(t, &pending, &rng, &next, 40);
    check(t, &m, "uncommitted batch");
    TableInfo ti;
    table_info(t, &ti);
    cr_assert_eq(ti.n_live, (uint64_t)eu_store_live(&m));
    table_close(t);
    t = reopen(dir, &o);
    check(t, &m, "reopened: uncommitted changes are discarded");
    /* the reopened table keeps working */
    eu_store_free(&pending);
    eu_store_copy(&pending, &m);
    batch(t, &pending, &rng, &next, 40);
    commit(t);
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_commit(t, &e), QR_OK, "an empty commit is fine");
    check(t, &pending, "after reopen and commit");
    cr_assert_eq(table_verify(t, &e), QR_OK, "%s", e.message);
    table_close(t);
    t = reopen(dir, &o);
    check(t, &pending, "reopened again");
    table_close(t);
    /* a table directory cannot be created twice; a missing one is not found */
    Table *t2;
    cr_assert_eq(table_create(dir, &schema, &o, &t2, NULL), QR_EEXISTS);
    char *none = path_in("none");
    cr_assert_eq(table_open(none, &o, &t2, NULL), QR_ENOTFOUND);
    free(none);
    eu_store_free(&m);
    eu_store_free(&pending);
    free(dir);
}

/* A child writes and commits, leaves an uncommitted batch, and _exit()s
 * without closing (no checkpoint): reopening replays the WAL.  Round 1
 * fsyncs and checkpoints between commits; round 2 merges in the background
 * (merge factor 2) while the child writes. */
Test(table, crash_without_close_replays_the_wal)
{
    char *dir = path_in("t");
    EuStore m; /* committed state so far */
    eu_store_init(&m);
    int next = 0;
    for (int round = 0; round < 3; round++) {
        TableOpts o = opts_for(round == 2, round == 2 ? 2 : 8);
        if (round == 1) {
            o.fsync = QR_FSYNC_COMMIT;
            o.checkpoint_wal_bytes = 20000;
        }
        if (round == 0)
            table_close(create(dir, &o));
        uint64_t rng = 100 + (uint64_t)round;
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            Table *t;
            if (table_open(dir, &o, &t, NULL) != QR_OK)
                _exit(2);
            uint64_t r2 = rng;
            int n2 = next;
            for (int c = 0; c < 6; c++) {
                batch(t, NULL, &r2, &n2, 50);
                if (table_commit(t, NULL) != QR_OK)
                    _exit(3);
            }
            batch(t, NULL, &r2, &n2, 30); /* never committed */
            _exit(0);
        }
        int st;
        waitpid(pid, &st, 0);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed: %d", st);
        for (int c = 0; c < 6; c++)
            batch(NULL, &m, &rng, &next, 50); /* the same operations, on the model */
        Table *t = reopen(dir, &o);
        char what[64];
        snprintf(what, sizeof what, "round %d after the crash", round);
        check(t, &m, what);
        TableInfo ti;
        table_info(t, &ti);
        if (round == 0) /* later rounds may have checkpointed everything */
            cr_assert_gt(ti.recovered_records, 0, "%s: nothing was replayed", what);
        /* writes after recovery, a clean close, and the same state again */
        uint64_t r3 = 999 + (uint64_t)round;
        int n3 = 100000 * (round + 1);
        batch(t, &m, &r3, &n3, 20);
        commit(t);
        table_wait_merges(t);
        table_close(t);
        t = reopen(dir, &o);
        check(t, &m, what);
        table_close(t);
    }
    eu_store_free(&m);
    free(dir);
}

/* A checkpoint (here: one a merge takes) while puts and deletes are not yet
 * committed must keep them replayable: once the commit is acknowledged, a
 * crash before the next checkpoint must not lose them. */
Test(table, checkpoint_between_put_and_commit_loses_nothing)
{
    char *dir = path_in("t");
    TableOpts o = opts_for(false, 8);
    Table *t = create(dir, &o);
    EuStore m;
    eu_store_init(&m);
    uint64_t rng = 5;
    int next = 0;
    batch(t, &m, &rng, &next, 40);
    commit(t);
    batch(t, &m, &rng, &next, 40);
    commit(t);
    /* uncommitted: new docs, an upsert and a delete of committed docs */
    put(t, &m, &rng, next++);
    put(t, &m, &rng, next++);
    put(t, &m, &rng, 1);
    del(t, &m, 2);
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_force_merge(t, &e), QR_OK, "%s", e.message); /* checkpoints */
    commit(t);
    check(t, &m, "after commit");
    char *img = path_in("crash");
    eu_copy_tree(dir, img); /* the files a crash here would leave */
    table_close(t);
    t = reopen(img, &o);
    check(t, &m, "crash image after a merge checkpoint between put and commit");
    table_close(t);
    eu_store_free(&m);
    free(img);
    free(dir);
}

/* n commits of growing batches (commit c: 5 + c * grow changes), all in one
 * WAL file, whose path is returned (malloc'd): states[c] is the model after
 * commit c (states[0] empty; the caller frees them), ends[c] the file's size
 * after it. */
static char *commit_series(Table *t, const char *dir, int n, int grow, uint64_t *rng, int *next,
                           EuStore *states, off_t *ends)
{
    eu_store_init(&states[0]);
    char *wal = eu_newest_wal(dir);
    cr_assert_not_null(wal);
    ends[0] = eu_file_size(wal);
    for (int c = 1; c <= n; c++) {
        eu_store_copy(&states[c], &states[c - 1]);
        batch(t, &states[c], rng, next, 5 + c * grow);
        commit(t);
        char *w = eu_newest_wal(dir);
        cr_assert_str_eq(w, wal, "one WAL file for the whole test");
        free(w);
        ends[c] = eu_file_size(wal);
        cr_assert_gt(ends[c], ends[c - 1]);
    }
    return wal;
}

/* Truncate the newest WAL file anywhere: recovery keeps exactly the commits
 * whose records are whole. */
Test(table, torn_wal_tail_loses_only_the_torn_commit)
{
    char *dir = path_in("t");
    TableOpts o = opts_for(false, 8);
    o.checkpoint_wal_bytes = 1ull << 40;
    Table *t = create(dir, &o);
    enum { N_COMMITS = 8 };
    EuStore states[N_COMMITS + 1];
    off_t ends[N_COMMITS + 1];
    uint64_t rng = 77;
    int next = 0;
    char *wal = commit_series(t, dir, N_COMMITS, 3, &rng, &next, states, ends);
    batch(t, NULL, &rng, &next, 10); /* uncommitted: never reaches the file */
    char *base = path_in("base");
    eu_copy_tree(dir, base);
    table_close(t);
    const char *wal_name = strrchr(wal, '/') + 1;
    /* cut points: every commit boundary, just before and after, mid-record */
    off_t cuts[400];
    bool mid_record[400] = {false}; /* the cut surely splits a record */
    int nc = 0;
    for (int c = 0; c <= N_COMMITS; c++) {
        cuts[nc++] = ends[c];
        if (c > 0) {
            mid_record[nc] = true;
            cuts[nc++] = ends[c] - 1;                      /* inside the COMMIT record */
            cuts[nc++] = ends[c] - WAL_RECORD_OVERHEAD;    /* the COMMIT record gone */
            cuts[nc++] = ends[c] - WAL_RECORD_OVERHEAD - 1; /* and a byte of the last op */
            mid_record[nc] = true;
            cuts[nc++] = ends[c - 1] + 1; /* one byte of the batch's first record */
            cuts[nc++] = (ends[c - 1] + ends[c]) / 2;
        }
    }
    for (int k = 0; k < 16; k++)
        cuts[nc++] = 16 + (off_t)eu_below(&rng, (uint64_t)(ends[N_COMMITS] - 16));
    cuts[nc++] = 0;
    cuts[nc++] = 5;
    cuts[nc++] = 16;
    char *img = path_in("img");
    for (int k = 0; k < nc; k++) {
        eu_rmtree(img);
        eu_copy_tree(base, img);
        char wp[4096];
        snprintf(wp, sizeof wp, "%s/wal/%s", img, wal_name);
        cr_assert_eq(truncate(wp, cuts[k]), 0);
        int want = 0;
        for (int c = 1; c <= N_COMMITS; c++)
            if (ends[c] <= cuts[k])
                want = c;
        Table *r;
        QrError e;
        qr_error_clear(&e);
        int rc = table_open(img, &o, &r, &e);
        cr_assert_eq(rc, QR_OK, "cut at %ld: %s", (long)cuts[k], e.message);
        char what[96];
        snprintf(what, sizeof what, "WAL cut at %ld of %ld (commits 1..%d whole)", (long)cuts[k],
                 (long)ends[N_COMMITS], want);
        check(r, &states[want], what);
        TableInfo ti;
        table_info(r, &ti);
        if (mid_record[k])
            cr_assert_gt(ti.torn_bytes_cut, 0, "%s: no torn bytes reported", what);
        /* the recovered table takes writes and reopens */
        EuStore after;
        eu_store_copy(&after, &states[want]);
        uint64_t r2 = (uint64_t)k;
        int n2 = 50000;
        batch(r, &after, &r2, &n2, 5);
        commit(r);
        table_close(r);
        r = reopen(img, &o);
        check(r, &after, what);
        table_close(r);
        eu_store_free(&after);
    }
    for (int c = 0; c <= N_COMMITS; c++)
        eu_store_free(&states[c]);
    free(img);
    free(base);
    free(wal);
    free(dir);
}

static uint8_t *read_whole(const char *path, size_t *len)
{
    uint8_t *d;
    cr_assert_eq(qr_file_read_all(path, &d, len, NULL), QR_OK, "read %s", path);
    return d;
}

/* One flipped byte in the WAL with acknowledged commits after it (the
 * damaged record is followed by intact ones): opening the table, writable
 * or read-only, is QR_ECORRUPT naming the WAL file, and no byte of it
 * changes; a salvage open keeps exactly the commits before the damaged one
 * and the whole damaged file as "<file>.damaged".  A flip in the final
 * COMMIT record is a torn tail: every commit but the last. */
Test(table, flipped_byte_before_acknowledged_commits_is_corruption)
{
    char *dir = path_in("t");
    TableOpts o = opts_for(false, 8);
    o.checkpoint_wal_bytes = 1ull << 40;
    Table *t = create(dir, &o);
    enum { N_COMMITS = 5 };
    EuStore states[N_COMMITS + 1];
    off_t ends[N_COMMITS + 1];
    uint64_t rng = 91;
    int next = 0;
    char *wal = commit_series(t, dir, N_COMMITS, 2, &rng, &next, states, ends);
    char *base = path_in("base");
    eu_copy_tree(dir, base);
    table_close(t);
    const char *wal_name = strrchr(wal, '/') + 1;
    char *img = path_in("img");
    TableOpts ro = o, sv = o;
    ro.read_only = true;
    sv.salvage = true;
    for (int c = 1; c <= N_COMMITS; c++) {
        /* the commit's first byte (a length), an lsn byte, a payload byte,
         * the last byte of its COMMIT record */
        off_t at[4] = {ends[c - 1], ends[c - 1] + 10, (ends[c - 1] + ends[c]) / 2, ends[c] - 1};
        for (int k = 0; k < 4; k++) {
            eu_rmtree(img);
            eu_copy_tree(base, img);
            char wp[4096], aside[4200];
            snprintf(wp, sizeof wp, "%s/wal/%s", img, wal_name);
            snprintf(aside, sizeof aside, "%s.damaged", wp);
            size_t len;
            uint8_t *bytes = read_whole(wp, &len);
            bytes[at[k]] ^= 0x08;
            cr_assert_eq(qr_file_write_atomic(wp, bytes, len, false, NULL), QR_OK);
            char what[96];
            snprintf(what, sizeof what, "commit %d, byte %ld flipped", c, (long)at[k]);
            Table *r;
            QrError e;
            if (c == N_COMMITS && at[k] >= ends[c] - WAL_RECORD_OVERHEAD) {
                r = reopen(img, &o); /* torn tail: only the last commit goes */
                check(r, &states[N_COMMITS - 1], what);
                table_close(r);
                free(bytes);
                continue;
            }
            for (int m = 0; m < 2; m++) {
                qr_error_clear(&e);
                cr_assert_eq(table_open(img, m ? &ro : &o, &r, &e), QR_ECORRUPT, "%s: %s", what,
                             e.message);
                cr_assert(strstr(e.message, wal_name), "%s: %s", what, e.message);
                size_t now_len;
                uint8_t *now = read_whole(wp, &now_len);
                cr_assert(now_len == len && !memcmp(now, bytes, len), "%s: WAL changed", what);
                free(now);
            }
            r = reopen(img, &sv);
            check(r, &states[c - 1], what);
            table_close(r);
            size_t kept_len;
            uint8_t *kept = read_whole(aside, &kept_len);
            cr_assert(kept_len == len && !memcmp(kept, bytes, len), "%s: aside copy", what);
            free(kept);
            r = reopen(img, &o); /* salvaged for good */
            check(r, &states[c - 1], what);
            table_close(r);
            free(bytes);
        }
    }
    for (int c = 0; c <= N_COMMITS; c++)
        eu_store_free(&states[c]);
    free(img);
    free(base);
    free(wal);
    free(dir);
}

Test(table, upserts_and_deletes_survive_recovery_and_merges)
{
    char *dir = path_in("t");
    TableOpts o = opts_for(false, 3);
    Table *t = create(dir, &o);
    EuStore m;
    eu_store_init(&m);
    uint64_t rng = 31;
    int next = 0;
    char *img = path_in("img");
    for (int round = 0; round < 6; round++) {
        for (int c = 0; c < 4; c++) {
            batch(t, &m, &rng, &next, 40);
            commit(t);
        }
        /* re-put and delete keys spread over every segment */
        for (int i = 0; i < 30; i++)
            put(t, &m, &rng, (int)eu_below(&rng, (uint64_t)next));
        for (int i = 0; i < 15; i++)
            del(t, &m, (int)eu_below(&rng, (uint64_t)next));
        commit(t);
        check(t, &m, "before merging");
        switch (round % 3) {
        case 0: {
            QrError e;
            qr_error_clear(&e);
            cr_assert_eq(table_force_merge(t, &e), QR_OK, "%s", e.message);
            Snapshot *s = table_snapshot(t);
            cr_assert_eq(s->n_segs, 1, "force merge leaves one segment");
            cr_assert_eq(s->n_docs, s->n_live, "and no deleted docs");
            snapshot_release(s);
            check(t, &m, "after force merge");
            break;
        }
        case 1:
            table_wait_merges(t); /* the tiered policy */
            check(t, &m, "after tiered merges");
            break;
        default:
            break;
        }
        /* crash image, and a clean reopen */
        eu_rmtree(img);
        eu_copy_tree(dir, img);
        Table *c = reopen(img, &o);
        check(c, &m, "crash image");
        table_close(c);
        table_close(t);
        t = reopen(dir, &o);
        check(t, &m, "reopened");
    }
    table_close(t);
    eu_store_free(&m);
    free(img);
    free(dir);
}

/* ---- deletes racing background merges ---- */

typedef struct Race {
    Table *t;
    atomic_int a_committed; /* keys 0..a_committed-1 are committed */
    atomic_bool a_done;
    int n_a;
    uint8_t *deleted;       /* by B, per A key */
    char **c_docs;          /* C's last committed version per key */
    atomic_int failures;
    char failure[256];
} Race;

#define RACE_C_BASE 1000000
#define RACE_C_KEYS 40

static void race_fail(Race *r, const char *what)
{
    if (atomic_fetch_add(&r->failures, 1) == 0)
        snprintf(r->failure, sizeof r->failure, "%s", what);
}

static void *race_a(void *arg)
{
    Race *r = arg;
    uint64_t rng = 1;
    for (int k = 0; k < r->n_a;) {
        int n = 5 + (int)eu_below(&rng, 10);
        for (int i = 0; i < n && k < r->n_a; i++, k++) {
            char id[32];
            snprintf(id, sizeof id, "%d", k);
            char *d = eu_random_doc(&rng, words, &zipf, id, NULL);
            if (table_put(r->t, d, strlen(d), NULL, NULL) != QR_OK)
                race_fail(r, "A: put failed");
            free(d);
        }
        if (table_commit(r->t, NULL) != QR_OK)
            race_fail(r, "A: commit failed");
        atomic_store(&r->a_committed, k);
    }
    atomic_store(&r->a_done, true);
    return NULL;
}

static void *race_b(void *arg)
{
    Race *r = arg;
    uint64_t rng = 2;
    int since = 0;
    for (;;) {
        int n = atomic_load(&r->a_committed);
        bool done = atomic_load(&r->a_done);
        if (n > 0) {
            int k = (int)eu_below(&rng, (uint64_t)n);
            if (!r->deleted[k] && eu_chance(&rng, 0.5)) {
                char doc[48];
                snprintf(doc, sizeof doc, "{\"id\":%d}", k);
                uint8_t key[PK_KEY_MAX];
                size_t kl = eu_doc_key(doc, key);
                bool found;
                if (table_delete_key(r->t, key, kl, &found, NULL) != QR_OK)
                    race_fail(r, "B: delete failed");
                else if (!found)
                    race_fail(r, "B: a committed key was not found for deletion");
                r->deleted[k] = 1;
                if (++since >= 3) {
                    since = 0;
                    if (table_commit(r->t, NULL) != QR_OK)
                        race_fail(r, "B: commit failed");
                }
            }
        }
        if (done)
            break;
        if (eu_chance(&rng, 0.3))
            usleep(100);
    }
    if (table_commit(r->t, NULL) != QR_OK)
        race_fail(r, "B: final commit failed");
    return NULL;
}

static void *race_c(void *arg)
{
    Race *r = arg;
    uint64_t rng = 3;
    char *pending[RACE_C_KEYS] = {0};
    while (!atomic_load(&r->a_done)) {
        int k = (int)eu_below(&rng, RACE_C_KEYS);
        char id[32];
        snprintf(id, sizeof id, "%d", RACE_C_BASE + k);
        char *d = eu_random_doc(&rng, words, &zipf, id, NULL);
        if (table_put(r->t, d, strlen(d), NULL, NULL) != QR_OK)
            race_fail(r, "C: put failed");
        free(pending[k]);
        pending[k] = d;
        if (eu_chance(&rng, 0.25)) {
            if (table_commit(r->t, NULL) != QR_OK)
                race_fail(r, "C: commit failed");
            for (int i = 0; i < RACE_C_KEYS; i++)
                if (pending[i]) {
                    free(r->c_docs[i]);
                    r->c_docs[i] = pending[i];
                    pending[i] = NULL;
                }
        }
        usleep(200);
    }
    if (table_commit(r->t, NULL) != QR_OK)
        race_fail(r, "C: final commit failed");
    for (int i = 0; i < RACE_C_KEYS; i++)
        if (pending[i]) {
            free(r->c_docs[i]);
            r->c_docs[i] = pending[i];
        }
    return NULL;
}

Test(table, deletes_racing_background_merges_are_kept)
{
    char *dir = path_in("t");
    TableOpts o = opts_for(true, 2);
    Table *t = create(dir, &o);
    Race r = {.t = t, .n_a = 1500};
    r.deleted = calloc((size_t)r.n_a, 1);
    r.c_docs = calloc(RACE_C_KEYS, sizeof *r.c_docs);
    pthread_t ta, tb, tc;
    pthread_create(&ta, NULL, race_a, &r);
    pthread_create(&tb, NULL, race_b, &r);
    pthread_create(&tc, NULL, race_c, &r);
    /* readers take snapshots meanwhile */
    while (!atomic_load(&r.a_done)) {
        Snapshot *s = table_snapshot(t);
        uint64_t live = 0;
        for (int i = 0; i < s->n_segs; i++)
            live += seg_n_docs(s->segs[i]) -
                    (s->dels[i] ? roaring_bitmap_get_cardinality(s->dels[i]) : 0);
        cr_assert_eq(live, s->n_live);
        snapshot_release(s);
        usleep(1000);
    }
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_join(tc, NULL);
    cr_assert_eq(atomic_load(&r.failures), 0, "%s", r.failure);
    EuStore m;
    eu_store_init(&m);
    /* A's documents are deterministic: replay its random stream */
    {
        uint64_t rng = 1;
        for (int k = 0; k < r.n_a;) {
            int n = 5 + (int)eu_below(&rng, 10);
            for (int i = 0; i < n && k < r.n_a; i++, k++) {
                char id[32];
                snprintf(id, sizeof id, "%d", k);
                char *d = eu_random_doc(&rng, words, &zipf, id, NULL);
                if (!r.deleted[k]) {
                    uint8_t key[PK_KEY_MAX];
                    size_t kl = eu_doc_key(d, key);
                    eu_store_put(&m, key, kl, d);
                }
                free(d);
            }
        }
    }
    for (int i = 0; i < RACE_C_KEYS; i++)
        if (r.c_docs[i]) {
            uint8_t key[PK_KEY_MAX];
            size_t kl = eu_doc_key(r.c_docs[i], key);
            eu_store_put(&m, key, kl, r.c_docs[i]);
        }
    table_wait_merges(t);
    TableInfo ti;
    table_info(t, &ti);
    /* the tiered policy has converged: with merge factor 2 every segment is
     * in its own tier, and no segment is mostly deleted */
    cr_assert_gt(ti.merges_done, 20, "the background merges ran (%lu)",
                 (unsigned long)ti.merges_done);
    cr_assert_leq(ti.n_segments, 12, "%lu segments left after table_wait_merges",
                  (unsigned long)ti.n_segments);
    check(t, &m, "after the race");
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_force_merge(t, &e), QR_OK, "%s", e.message);
    check(t, &m, "after a force merge");
    table_close(t);
    t = reopen(dir, &o);
    check(t, &m, "reopened after the race");
    table_close(t);
    for (int i = 0; i < RACE_C_KEYS; i++)
        free(r.c_docs[i]);
    free(r.c_docs);
    free(r.deleted);
    eu_store_free(&m);
    free(dir);
}

/* A snapshot pinned before merges keeps answering with the old state, its
 * segment files long deleted. */
Test(table, snapshot_outlives_merges)
{
    char *dir = path_in("t");
    TableOpts o = opts_for(false, 8);
    Table *t = create(dir, &o);
    EuStore m;
    eu_store_init(&m);
    uint64_t rng = 8;
    int next = 0;
    for (int c = 0; c < 5; c++) {
        batch(t, &m, &rng, &next, 50);
        commit(t);
    }
    Snapshot *old = table_snapshot(t);
    EuStore old_m;
    eu_store_copy(&old_m, &m);
    cr_assert_geq(old->n_segs, 4);
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_force_merge(t, &e), QR_OK, "%s", e.message);
    batch(t, &m, &rng, &next, 60);
    commit(t);
    cr_assert_eq(table_force_merge(t, &e), QR_OK, "%s", e.message);
    check(t, &m, "new state");
    eu_assert_snapshot_is(old, &old_m, "the pinned snapshot after two merges");
    for (int i = 0; i < old->n_segs; i++) {
        cr_assert(!qr_path_exists(seg_path(old->segs[i])), "merged-away file %s still exists",
                  seg_path(old->segs[i]));
        eu_assert_segment_consistent(old->segs[i], &schema, "pinned segment");
    }
    snapshot_release(old);
    table_close(t);
    eu_store_free(&m);
    eu_store_free(&old_m);
    free(dir);
}

/* ---- allocation failures ---- */

typedef struct FaultRun {
    int rc_put1, rc_commit1, rc_commit2, rc_merge; /* last error of each step */
} FaultRun;

/* After an operation failed in transient mode, allocations work again (a
 * passing memory shortage); in persistent mode they keep failing. */
static int after_op(int rc, bool transient)
{
    if (rc != QR_OK && transient)
        qr_mem_fail_after(-1);
    return rc;
}

/* Fail the allocations after the n-th during two batches, two commits and a
 * merge: every one after it (persistent), or until the first operation
 * reports an error (transient).  Each call must end in QR_OK or a clean
 * error; afterwards the table (reopened when it refuses writes) holds a
 * state the acknowledgements allow, its index agrees with its documents,
 * and it reopens. */
static void fault_sweep(bool transient)
{
    char *dir = path_in("t");
    TableOpts o = opts_for(false, 8);
    /* how many allocations the whole sequence makes */
    int64_t total = 0;
    for (int64_t n = -1; n < 0 || n <= total + 5;) {
        eu_rmtree(dir);
        Table *t = create(dir, &o);
        EuStore base;
        eu_store_init(&base);
        uint64_t rng = 3;
        int next = 0;
        batch(t, &base, &rng, &next, 25);
        commit(t);
        /* the two batches, as models: b1 = after batch 1, b2 = after both */
        char *docs1[20], *docs2[10];
        for (int i = 0; i < 20; i++) {
            char id[32];
            id_of(i < 15 ? next + i : i * 2, id, sizeof id);
            docs1[i] = eu_random_doc(&rng, words, &zipf, id, NULL);
        }
        for (int i = 0; i < 10; i++) {
            char id[32];
            id_of(next + 100 + i, id, sizeof id);
            docs2[i] = eu_random_doc(&rng, words, &zipf, id, NULL);
        }
        EuStore b1, b2;
        eu_store_copy(&b1, &base);
        qr_mem_fail_after(n);
        bool put1_ok[20];
        FaultRun fr = {0};
        for (int i = 0; i < 20; i++) {
            int rc = after_op(table_put(t, docs1[i], strlen(docs1[i]), NULL, NULL), transient);
            put1_ok[i] = rc == QR_OK;
            if (rc != QR_OK)
                fr.rc_put1 = rc;
        }
        char dk[16];
        snprintf(dk, sizeof dk, "{\"id\":%d}", 4);
        uint8_t key[PK_KEY_MAX];
        size_t kl = eu_doc_key(dk, key);
        bool del_ok = after_op(table_delete_key(t, key, kl, NULL, NULL), transient) == QR_OK;
        fr.rc_commit1 = after_op(table_commit(t, NULL), transient);
        bool put2_ok[10];
        for (int i = 0; i < 10; i++)
            put2_ok[i] =
                after_op(table_put(t, docs2[i], strlen(docs2[i]), NULL, NULL), transient) == QR_OK;
        fr.rc_commit2 = after_op(table_commit(t, NULL), transient);
        fr.rc_merge = after_op(table_force_merge(t, NULL), transient);
        int64_t used = qr_mem_alloc_count();
        qr_mem_fail_after(-1);
        if (n < 0)
            total = used;
        for (int i = 0; i < 20; i++)
            if (put1_ok[i]) {
                uint8_t k2[PK_KEY_MAX];
                size_t l2 = eu_doc_key(docs1[i], k2);
                eu_store_put(&b1, k2, l2, docs1[i]);
            }
        if (del_ok)
            eu_store_del(&b1, key, kl);
        eu_store_copy(&b2, &b1);
        for (int i = 0; i < 10; i++)
            if (put2_ok[i]) {
                uint8_t k2[PK_KEY_MAX];
                size_t l2 = eu_doc_key(docs2[i], k2);
                eu_store_put(&b2, k2, l2, docs2[i]);
            }
        /* a probe write tells whether the table still takes writes */
        const char *probe = "{\"id\":\"probe\",\"title\":\"probe doc\"}";
        if (table_put(t, probe, strlen(probe), NULL, NULL) != QR_OK ||
            table_commit(t, NULL) != QR_OK) {
            table_close(t);
            t = reopen(dir, &o);
            cr_assert_eq(table_put(t, probe, strlen(probe), NULL, NULL), QR_OK);
            commit(t);
        }
        uint8_t pk[PK_KEY_MAX];
        size_t pl = eu_doc_key(probe, pk);
        /* allowed outcomes: batch 1 all or nothing, then batch 2 all or nothing;
         * a batch whose commit was acknowledged must be there */
        EuStore cands[3];
        bool allowed[3];
        eu_store_copy(&cands[0], &base);
        eu_store_copy(&cands[1], &b1);
        eu_store_copy(&cands[2], &b2);
        allowed[0] = fr.rc_commit1 != QR_OK && fr.rc_commit2 != QR_OK;
        allowed[1] = fr.rc_commit2 != QR_OK;
        allowed[2] = true;
        Snapshot *s = table_snapshot(t);
        char why[1024] = "", w2[1024];
        bool ok = false;
        for (int c = 0; c < 3 && !ok; c++) {
            eu_store_put(&cands[c], pk, pl, probe);
            if (!allowed[c])
                continue;
            ok = eu_snapshot_equals(s, &cands[c], w2, sizeof w2);
            if (!ok && !*why)
                snprintf(why, sizeof why, "%s", w2);
        }
        cr_assert(ok,
                  "%s failure after %ld allocations (put %d, commit %d, commit %d, merge %d): "
                  "no allowed state: %s",
                  transient ? "transient" : "persistent", (long)n, fr.rc_put1, fr.rc_commit1,
                  fr.rc_commit2, fr.rc_merge, why);
        for (int i = 0; i < s->n_segs; i++) {
            char what[128];
            snprintf(what, sizeof what, "%s failure after %ld allocations (put %d, commit %d/%d)",
                     transient ? "transient" : "persistent", (long)n, fr.rc_put1, fr.rc_commit1,
                     fr.rc_commit2);
            eu_assert_segment_consistent(s->segs[i], &schema, what);
        }
        /* the state we saw is the one a reopen finds */
        EuStore seen;
        eu_store_init(&seen);
        for (int c = 0; c < 3; c++)
            if (allowed[c] && eu_snapshot_equals(s, &cands[c], w2, sizeof w2)) {
                eu_store_free(&seen);
                eu_store_copy(&seen, &cands[c]);
                break;
            }
        snapshot_release(s);
        table_close(t);
        t = reopen(dir, &o);
        check(t, &seen, "reopened after the failures");
        table_close(t);
        eu_store_free(&seen);
        for (int c = 0; c < 3; c++)
            eu_store_free(&cands[c]);
        eu_store_free(&b1);
        eu_store_free(&b2);
        eu_store_free(&base);
        for (int i = 0; i < 20; i++)
            free(docs1[i]);
        for (int i = 0; i < 10; i++)
            free(docs2[i]);
        /* sweep: every n early on (builder and first document), then spread
         * out over commits and the merge */
        if (n < 0)
            n = 0;
        else if (n < 150)
            n += 1;
        else
            n += 1 + n / 20;
    }
    free(dir);
}

Test(table, allocation_failures_end_cleanly) { fault_sweep(false); }

Test(table, transient_allocation_failures_leave_the_table_intact)
{
    fault_sweep(true);
}

/* table.h: "Errors leave the table unchanged."  Fail each allocation of one
 * put or delete in turn (then allocations work again), commit, and check the
 * table holds exactly what it held plus the operation if it succeeded. */
Test(table, a_failed_put_or_delete_changes_nothing)
{
    char *dir = path_in("t");
    TableOpts o = opts_for(false, 8);
    static const char *kinds[] = {"put of a new key", "upsert of a committed key",
                                  "upsert of an uncommitted key", "delete of a committed key"};
    for (int kind = 0; kind < 4; kind++) {
        bool done = false;
        for (int64_t k = 0; !done; k++) {
            eu_rmtree(dir);
            Table *t = create(dir, &o);
            EuStore committed, model;
            eu_store_init(&committed);
            uint64_t rng = 11;
            for (int i = 0; i < 10; i++)
                put(t, &committed, &rng, i);
            commit(t);
            eu_store_copy(&model, &committed);
            if (kind == 2)
                put(t, &model, &rng, 5);
            int target = kind == 0 ? 50 : 5;
            char id[32];
            id_of(target, id, sizeof id);
            char *d = eu_random_doc(&rng, words, &zipf, id, NULL);
            uint8_t key[PK_KEY_MAX];
            size_t kl = eu_doc_key(d, key);
            qr_mem_fail_after(k);
            QrError e;
            qr_error_clear(&e);
            int rc = kind == 3 ? table_delete_key(t, key, kl, NULL, &e)
                               : table_put(t, d, strlen(d), NULL, &e);
            qr_mem_fail_after(-1);
            if (rc == QR_OK) {
                done = true;
                if (kind == 3)
                    eu_store_del(&model, key, kl);
                else
                    eu_store_put(&model, key, kl, d);
            } else {
                cr_assert_eq(rc, QR_ENOMEM, "%s failing at allocation %ld: rc %d (%s)",
                             kinds[kind], (long)k, rc, e.message);
            }
            char what[160];
            snprintf(what, sizeof what,
                     "%s, allocation %ld failed (rc %d), then another put and a commit",
                     kinds[kind], (long)k, rc);
            /* a later successful write commits whatever the builder holds */
            qr_error_clear(&e);
            char *other = NULL;
            if (table_put(t, "{\"id\":\"other\",\"title\":\"other doc\"}", 34, NULL, &e) ==
                QR_OK)
                other = "{\"id\":\"other\",\"title\":\"other doc\"}";
            if (other) {
                uint8_t ok_key[PK_KEY_MAX];
                size_t okl = eu_doc_key(other, ok_key);
                eu_store_put(&model, ok_key, okl, other);
            }
            qr_error_clear(&e);
            if (table_commit(t, &e) != QR_OK) {
                /* the table refused: reopening recovers what was committed */
                table_close(t);
                t = reopen(dir, &o);
                check(t, &committed, what);
            } else {
                check(t, &model, what);
            }
            table_close(t);
            free(d);
            eu_store_free(&committed);
            eu_store_free(&model);
        }
    }
    free(dir);
}

/* Allocation failures while opening (recovery replays a WAL): a clean error
 * or success, and a later open sees every commit. */
Test(table, allocation_failures_during_recovery)
{
    char *dir = path_in("t");
    TableOpts o = opts_for(false, 8);
    Table *t = create(dir, &o);
    EuStore m;
    eu_store_init(&m);
    uint64_t rng = 4;
    int next = 0;
    for (int c = 0; c < 3; c++) {
        batch(t, &m, &rng, &next, 30);
        commit(t);
    }
    char *base = path_in("base");
    eu_copy_tree(dir, base); /* a crash image with a WAL to replay */
    table_close(t);
    char *img = path_in("img");
    eu_copy_tree(base, img);
    qr_mem_fail_after(INT64_MAX / 2); /* count the allocations of one open */
    t = reopen(img, &o);
    int64_t total = qr_mem_alloc_count();
    qr_mem_fail_after(-1);
    table_close(t);
    int tried = 0;
    for (int64_t n = 0; n <= total + 10; n += n < 200 ? 3 : 1 + n / 12) {
        eu_rmtree(img);
        eu_copy_tree(base, img);
        qr_mem_fail_after(n);
        Table *r = NULL;
        QrError e;
        qr_error_clear(&e);
        int rc = table_open(img, &o, &r, &e);
        qr_mem_fail_after(-1);
        if (rc == QR_OK) {
            check(r, &m, "opened under allocation failures");
            table_close(r);
        } else {
            cr_assert_neq(e.message[0], 0, "fail after %ld: rc %d without a message", (long)n,
                          rc);
            cr_assert_null(r);
        }
        r = reopen(img, &o);
        char what[64];
        snprintf(what, sizeof what, "reopen after failing at %ld (rc %d)", (long)n, rc);
        check(r, &m, what);
        table_close(r);
        tried++;
    }
    cr_assert_gt(tried, 10);
    eu_store_free(&m);
    free(img);
    free(base);
    free(dir);
}
