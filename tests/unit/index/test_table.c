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
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
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
            /* in-memory segments have none: column scans serve their few rows */
            cr_assert_eq(bt != NULL,
                         c != NULL && schema.fields[f].btree && !seg_in_memory(s->segs[i]),
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
    qr_io_fail_after(-1, 0);
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

/* Most tests have one writer per table: its batch, made on first use and
 * freed by close_table (tests of several writers make their own). */
static struct {
    Table *t;
    TableBatch *b;
} writers[16];

static TableBatch *wb(Table *t)
{
    int free_slot = -1;
    for (int i = 0; i < 16; i++) {
        if (writers[i].t == t)
            return writers[i].b;
        if (!writers[i].t && free_slot < 0)
            free_slot = i;
    }
    cr_assert_geq(free_slot, 0, "too many tables open");
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_batch_begin(t, &writers[free_slot].b, &e), QR_OK, "%s", e.message);
    writers[free_slot].t = t;
    return writers[free_slot].b;
}

static void close_table(Table *t)
{
    for (int i = 0; i < 16; i++)
        if (writers[i].t == t) {
            table_batch_free(writers[i].b);
            writers[i].t = NULL;
            writers[i].b = NULL;
        }
    table_close(t);
}

static void id_of(int k, char *out, size_t n)
{
    if (k % 3 == 0)
        snprintf(out, n, "\"k%d\"", k);
    else
        snprintf(out, n, "%d", k);
}

/* Upsert doc k (random text) into batch b; b or m may be NULL (batch only /
 * model only: both consume the random stream the same way).  m is what the
 * batch sees: the committed state plus its own writes. */
static void bput(TableBatch *b, EuStore *m, uint64_t *rng, int k)
{
    char id[32];
    id_of(k, id, sizeof id);
    char *d = eu_random_doc(rng, words, &zipf, id, NULL);
    uint8_t key[PK_KEY_MAX];
    size_t kl = eu_doc_key(d, key);
    if (b) {
        QrError e;
        qr_error_clear(&e);
        bool replaced;
        bool had = m && eu_store_get(m, key, kl) != NULL;
        cr_assert_eq(table_batch_put(b, d, strlen(d), NULL, &replaced, &e), QR_OK, "%s",
                     e.message);
        if (m)
            cr_assert_eq(replaced, had, "put of %s: replaced %d, model says %d", id, replaced,
                         had);
    }
    if (m)
        eu_store_put(m, key, kl, d);
    free(d);
}

static void put(Table *t, EuStore *m, uint64_t *rng, int k)
{
    bput(t ? wb(t) : NULL, m, rng, k);
}

static void bdel(TableBatch *b, EuStore *m, int k)
{
    char id[32];
    id_of(k, id, sizeof id);
    char doc[64];
    snprintf(doc, sizeof doc, "{\"id\":%s}", id);
    uint8_t key[PK_KEY_MAX];
    size_t kl = eu_doc_key(doc, key);
    if (b) {
        bool found;
        QrError e;
        qr_error_clear(&e);
        cr_assert_eq(table_batch_delete(b, key, kl, &found, &e), QR_OK, "%s", e.message);
        if (m)
            cr_assert_eq(found, eu_store_get(m, key, kl) != NULL, "delete of %s: found %d", id,
                         found);
    }
    if (m)
        eu_store_del(m, key, kl);
}

static void del(Table *t, EuStore *m, int k) { bdel(t ? wb(t) : NULL, m, k); }

static void bcommit(TableBatch *b)
{
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_batch_commit(b, &e), QR_OK, "%s", e.message);
}

static TableBatch *begin(Table *t)
{
    TableBatch *b;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_batch_begin(t, &b, &e), QR_OK, "%s", e.message);
    return b;
}

/* dst gets every live document of src (later writes win). */
static void store_apply(EuStore *dst, const EuStore *src)
{
    for (int i = 0; i < src->n; i++)
        if (src->ents[i].json)
            eu_store_put(dst, src->ents[i].key, src->ents[i].key_len, src->ents[i].json);
}

static void commit(Table *t)
{
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_batch_commit(wb(t), &e), QR_OK, "%s", e.message);
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
    close_table(t);
    t = reopen(dir, &o);
    check(t, &m, "reopened: uncommitted changes are discarded");
    /* the reopened table keeps working */
    eu_store_free(&pending);
    eu_store_copy(&pending, &m);
    batch(t, &pending, &rng, &next, 40);
    commit(t);
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_batch_commit(wb(t), &e), QR_OK, "an empty commit is fine");
    check(t, &pending, "after reopen and commit");
    cr_assert_eq(table_verify(t, &e), QR_OK, "%s", e.message);
    close_table(t);
    t = reopen(dir, &o);
    check(t, &pending, "reopened again");
    close_table(t);
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
            close_table(create(dir, &o));
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
                if (table_batch_commit(wb(t), NULL) != QR_OK)
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
        close_table(t);
        t = reopen(dir, &o);
        check(t, &m, what);
        close_table(t);
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
    close_table(t);
    t = reopen(img, &o);
    check(t, &m, "crash image after a merge checkpoint between put and commit");
    close_table(t);
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
    close_table(t);
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
        close_table(r);
        r = reopen(img, &o);
        check(r, &after, what);
        close_table(r);
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
        close_table(c);
        close_table(t);
        t = reopen(dir, &o);
        check(t, &m, "reopened");
    }
    close_table(t);
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
    TableBatch *b;
    if (table_batch_begin(r->t, &b, NULL) != QR_OK) {
        race_fail(r, "A: no batch");
        atomic_store(&r->a_done, true);
        return NULL;
    }
    for (int k = 0; k < r->n_a;) {
        int n = 5 + (int)eu_below(&rng, 10);
        for (int i = 0; i < n && k < r->n_a; i++, k++) {
            char id[32];
            snprintf(id, sizeof id, "%d", k);
            char *d = eu_random_doc(&rng, words, &zipf, id, NULL);
            if (table_batch_put(b, d, strlen(d), NULL, NULL, NULL) != QR_OK)
                race_fail(r, "A: put failed");
            free(d);
        }
        if (table_batch_commit(b, NULL) != QR_OK)
            race_fail(r, "A: commit failed");
        atomic_store(&r->a_committed, k);
    }
    table_batch_free(b);
    atomic_store(&r->a_done, true);
    return NULL;
}

static void *race_b(void *arg)
{
    Race *r = arg;
    uint64_t rng = 2;
    int since = 0;
    TableBatch *b;
    if (table_batch_begin(r->t, &b, NULL) != QR_OK) {
        race_fail(r, "B: no batch");
        return NULL;
    }
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
                if (table_batch_delete(b, key, kl, &found, NULL) != QR_OK)
                    race_fail(r, "B: delete failed");
                else if (!found)
                    race_fail(r, "B: a committed key was not found for deletion");
                r->deleted[k] = 1;
                if (++since >= 3) {
                    since = 0;
                    if (table_batch_commit(b, NULL) != QR_OK)
                        race_fail(r, "B: commit failed");
                }
            }
        }
        if (done)
            break;
        if (eu_chance(&rng, 0.3))
            usleep(100);
    }
    if (table_batch_commit(b, NULL) != QR_OK)
        race_fail(r, "B: final commit failed");
    table_batch_free(b);
    return NULL;
}

static void *race_c(void *arg)
{
    Race *r = arg;
    uint64_t rng = 3;
    char *pending[RACE_C_KEYS] = {0};
    TableBatch *b;
    if (table_batch_begin(r->t, &b, NULL) != QR_OK) {
        race_fail(r, "C: no batch");
        return NULL;
    }
    while (!atomic_load(&r->a_done)) {
        int k = (int)eu_below(&rng, RACE_C_KEYS);
        char id[32];
        snprintf(id, sizeof id, "%d", RACE_C_BASE + k);
        char *d = eu_random_doc(&rng, words, &zipf, id, NULL);
        if (table_batch_put(b, d, strlen(d), NULL, NULL, NULL) != QR_OK)
            race_fail(r, "C: put failed");
        free(pending[k]);
        pending[k] = d;
        if (eu_chance(&rng, 0.25)) {
            if (table_batch_commit(b, NULL) != QR_OK)
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
    if (table_batch_commit(b, NULL) != QR_OK)
        race_fail(r, "C: final commit failed");
    table_batch_free(b);
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
    cr_assert_gt(ti.merges_done + ti.nrt_merges + ti.nrt_flushes, 20,
                 "the background merges ran (%lu of files, %lu in memory, %lu flushes)",
                 (unsigned long)ti.merges_done, (unsigned long)ti.nrt_merges,
                 (unsigned long)ti.nrt_flushes);
    cr_assert_leq(ti.n_segments, 12, "%lu segments left after table_wait_merges",
                  (unsigned long)ti.n_segments);
    check(t, &m, "after the race");
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_force_merge(t, &e), QR_OK, "%s", e.message);
    check(t, &m, "after a force merge");
    close_table(t);
    t = reopen(dir, &o);
    check(t, &m, "reopened after the race");
    close_table(t);
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
    close_table(t);
    eu_store_free(&m);
    eu_store_free(&old_m);
    free(dir);
}

/* ---- allocation failures ---- */

typedef struct FaultRun {
    int rc_put1, rc_commit1, rc_commit2, rc_merge; /* last error of each step */
    bool unknown1, unknown2; /* the commit's error says its outcome is unknown */
} FaultRun;

/* table.h: a failed commit wrote nothing unless its error's detail says
 * the outcome is unknown (it then shows after a restart, or not). */
static bool outcome_unknown(int rc, const QrError *e)
{
    return rc != QR_OK && strstr(e->detail, "after a restart") != NULL;
}

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
 * state the answers allow -- each batch there if its commit succeeded,
 * absent if it failed, either only if the failure said the outcome is
 * unknown --, its index agrees with its documents, and it reopens. */
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
        TableBatch *w = wb(t);
        /* the two batches, as models: b1 = after batch 1, b2 = after both,
         * b2only = batch 2 without batch 1 */
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
        EuStore b1, b2, b2only;
        eu_store_copy(&b1, &base);
        qr_mem_fail_after(n);
        bool put1_ok[20];
        FaultRun fr = {0};
        for (int i = 0; i < 20; i++) {
            int rc =
                after_op(table_batch_put(w, docs1[i], strlen(docs1[i]), NULL, NULL, NULL), transient);
            put1_ok[i] = rc == QR_OK;
            if (rc != QR_OK)
                fr.rc_put1 = rc;
        }
        char dk[16];
        snprintf(dk, sizeof dk, "{\"id\":%d}", 4);
        uint8_t key[PK_KEY_MAX];
        size_t kl = eu_doc_key(dk, key);
        bool del_ok = after_op(table_batch_delete(w, key, kl, NULL, NULL), transient) == QR_OK;
        QrError e1, e2;
        qr_error_clear(&e1);
        qr_error_clear(&e2);
        fr.rc_commit1 = after_op(table_batch_commit(w, &e1), transient);
        fr.unknown1 = outcome_unknown(fr.rc_commit1, &e1);
        bool put2_ok[10];
        for (int i = 0; i < 10; i++)
            put2_ok[i] = after_op(table_batch_put(w, docs2[i], strlen(docs2[i]), NULL, NULL, NULL),
                                  transient) == QR_OK;
        fr.rc_commit2 = after_op(table_batch_commit(w, &e2), transient);
        fr.unknown2 = outcome_unknown(fr.rc_commit2, &e2);
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
        eu_store_copy(&b2only, &base);
        for (int i = 0; i < 10; i++)
            if (put2_ok[i]) {
                uint8_t k2[PK_KEY_MAX];
                size_t l2 = eu_doc_key(docs2[i], k2);
                eu_store_put(&b2, k2, l2, docs2[i]);
                eu_store_put(&b2only, k2, l2, docs2[i]);
            }
        /* a probe write tells whether the table still takes writes */
        const char *probe = "{\"id\":\"probe\",\"title\":\"probe doc\"}";
        if (table_batch_put(w, probe, strlen(probe), NULL, NULL, NULL) != QR_OK ||
            table_batch_commit(w, NULL) != QR_OK) {
            close_table(t);
            t = reopen(dir, &o);
            cr_assert_eq(table_batch_put(wb(t), probe, strlen(probe), NULL, NULL, NULL), QR_OK);
            commit(t);
        }
        uint8_t pk[PK_KEY_MAX];
        size_t pl = eu_doc_key(probe, pk);
        /* allowed outcomes: each batch all or nothing -- there when its
         * commit succeeded, absent when it failed, either when the failure
         * said the outcome is unknown */
        EuStore cands[4];
        bool allowed[4];
        eu_store_copy(&cands[0], &base);
        eu_store_copy(&cands[1], &b1);
        eu_store_copy(&cands[2], &b2only);
        eu_store_copy(&cands[3], &b2);
        for (int c = 0; c < 4; c++) {
            bool with1 = c & 1, with2 = c & 2;
            bool ok1 = fr.rc_commit1 == QR_OK ? with1 : (fr.unknown1 || !with1);
            bool ok2 = fr.rc_commit2 == QR_OK ? with2 : (fr.unknown2 || !with2);
            allowed[c] = ok1 && ok2;
        }
        Snapshot *s = table_snapshot(t);
        char why[1024] = "", w2[1024];
        bool ok = false;
        for (int c = 0; c < 4 && !ok; c++) {
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
        for (int c = 0; c < 4; c++)
            if (allowed[c] && eu_snapshot_equals(s, &cands[c], w2, sizeof w2)) {
                eu_store_free(&seen);
                eu_store_copy(&seen, &cands[c]);
                break;
            }
        snapshot_release(s);
        close_table(t);
        t = reopen(dir, &o);
        check(t, &seen, "reopened after the failures");
        close_table(t);
        eu_store_free(&seen);
        for (int c = 0; c < 4; c++)
            eu_store_free(&cands[c]);
        eu_store_free(&b1);
        eu_store_free(&b2);
        eu_store_free(&b2only);
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

/* table.h: "Errors leave the batch unchanged."  Fail each allocation of one
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
            int rc = kind == 3 ? table_batch_delete(wb(t), key, kl, NULL, &e)
                               : table_batch_put(wb(t), d, strlen(d), NULL, NULL, &e);
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
            /* a later successful write commits whatever the batch holds */
            qr_error_clear(&e);
            char *other = NULL;
            if (table_batch_put(wb(t), "{\"id\":\"other\",\"title\":\"other doc\"}", 34, NULL,
                                NULL, &e) == QR_OK)
                other = "{\"id\":\"other\",\"title\":\"other doc\"}";
            if (other) {
                uint8_t ok_key[PK_KEY_MAX];
                size_t okl = eu_doc_key(other, ok_key);
                eu_store_put(&model, ok_key, okl, other);
            }
            qr_error_clear(&e);
            if (table_batch_commit(wb(t), &e) != QR_OK) {
                /* the batch was poisoned: nothing of it was written */
                close_table(t);
                t = reopen(dir, &o);
                check(t, &committed, what);
            } else {
                check(t, &model, what);
            }
            close_table(t);
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
    close_table(t);
    char *img = path_in("img");
    eu_copy_tree(base, img);
    qr_mem_fail_after(INT64_MAX / 2); /* count the allocations of one open */
    t = reopen(img, &o);
    int64_t total = qr_mem_alloc_count();
    qr_mem_fail_after(-1);
    close_table(t);
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
            close_table(r);
        } else {
            cr_assert_neq(e.message[0], 0, "fail after %ld: rc %d without a message", (long)n,
                          rc);
            cr_assert_null(r);
        }
        r = reopen(img, &o);
        char what[64];
        snprintf(what, sizeof what, "reopen after failing at %ld (rc %d)", (long)n, rc);
        check(r, &m, what);
        close_table(r);
        tried++;
    }
    cr_assert_gt(tried, 10);
    eu_store_free(&m);
    free(img);
    free(base);
    free(dir);
}

/* ---- writers in isolation (one batch each) ---- */

/* The state a crash right now would leave: a copy of the open table's
 * files, opened. */
static void check_crash_image(const char *dir, const TableOpts *o, const EuStore *m,
                              const char *what)
{
    char *img = path_in("crash");
    eu_rmtree(img);
    eu_copy_tree(dir, img);
    Table *c = reopen(img, o);
    check(c, m, what);
    close_table(c);
    eu_rmtree(img);
    free(img);
}

/* Issue 13 item 5: a commit publishes -- and logs -- its own batch only.
 * Two batches fill side by side; each commit shows (and a crash image
 * keeps) exactly the committed batches, whatever the other holds.  Puts
 * and deletes of the same key by two writers: the later commit wins. */
Test(table, a_commit_publishes_and_logs_only_its_own_batch)
{
    char *dir = path_in("t");
    TableOpts o = opts_for(false, 8);
    Table *t = create(dir, &o);
    EuStore committed;
    eu_store_init(&committed);
    uint64_t rng = 21;
    for (int k = 0; k < 40; k++)
        put(t, &committed, &rng, k);
    commit(t);
    TableBatch *a = begin(t), *b = begin(t);
    /* A: new keys, an upsert and a delete of committed keys, a delete then
     * a re-put; B: other new keys, another upsert and delete (the models:
     * the state after B's commit, and after both) */
    EuStore after_b, after_ab;
    eu_store_copy(&after_b, &committed);
    for (int k = 1000; k < 1030; k++)
        bput(b, &after_b, &rng, k);
    bput(b, &after_b, &rng, 3);
    bdel(b, &after_b, 5);
    eu_store_copy(&after_ab, &after_b);
    for (int k = 2000; k < 2020; k++)
        bput(a, &after_ab, &rng, k);
    bput(a, &after_ab, &rng, 7);
    bdel(a, &after_ab, 9);
    bdel(a, &after_ab, 11);
    bput(a, &after_ab, &rng, 11);
    check(t, &committed, "two batches filled, none committed");
    check_crash_image(dir, &o, &committed, "crash image before any commit");
    bcommit(b);
    check(t, &after_b, "B committed, A still filling");
    check_crash_image(dir, &o, &after_b, "crash image after B's commit: nothing of A");
    /* A keeps filling after B's commit, and its found/replaced answers see
     * B's commit */
    bool replaced = false, found = true;
    char *d = eu_random_doc(&rng, words, &zipf, "1000", NULL);
    uint8_t key[PK_KEY_MAX];
    size_t kl = eu_doc_key(d, key);
    cr_assert_eq(table_batch_put(a, d, strlen(d), NULL, &replaced, NULL), QR_OK);
    cr_assert(replaced, "a key B committed is replaced");
    eu_store_put(&after_ab, key, kl, d);
    free(d);
    kl = eu_doc_key("{\"id\":5}", key);
    cr_assert_eq(table_batch_delete(a, key, kl, &found, NULL), QR_OK);
    cr_assert(!found, "the key B deleted is gone");
    bcommit(a);
    check(t, &after_ab, "both committed");
    check_crash_image(dir, &o, &after_ab, "crash image after both commits");
    /* the same keys from two writers: the later commit wins, for puts and
     * deletes alike, in either order */
    EuStore wins;
    eu_store_copy(&wins, &after_ab);
    bput(b, NULL, &rng, 0);  /* B's version of 0: loses to A's */
    bput(a, &wins, &rng, 0); /* A's version, committed last */
    bput(b, NULL, &rng, 1);  /* B upserts 1 ... */
    bdel(a, &wins, 1);       /* ... A deletes it later */
    bdel(b, NULL, 2);        /* B deletes 2 ... */
    bput(a, &wins, &rng, 2); /* ... A re-puts it later */
    bcommit(b);
    bcommit(a);
    check(t, &wins, "the later commit wins");
    check_crash_image(dir, &o, &wins, "crash image: the later commit wins");
    table_batch_free(a);
    table_batch_free(b);
    close_table(t);
    t = reopen(dir, &o);
    check(t, &wins, "reopened");
    close_table(t);
    eu_store_free(&committed);
    eu_store_free(&after_b);
    eu_store_free(&after_ab);
    eu_store_free(&wins);
    free(dir);
}

/* Writers commit batches of CW_BATCH new documents concurrently (merges
 * running) while the main thread takes snapshots: every snapshot holds
 * whole batches only. */
#define CW_WRITERS 3
#define CW_BATCH 23
#define CW_ROUNDS 40

typedef struct CwArg {
    Table *t;
    int w;
    atomic_int *running;
    atomic_int *failures;
} CwArg;

static void *cw_writer(void *arg)
{
    CwArg *c = arg;
    TableBatch *b;
    uint64_t rng = 500 + (uint64_t)c->w;
    if (table_batch_begin(c->t, &b, NULL) != QR_OK) {
        atomic_fetch_add(c->failures, 1);
        atomic_fetch_sub(c->running, 1);
        return NULL;
    }
    for (int r = 0; r < CW_ROUNDS; r++) {
        for (int i = 0; i < CW_BATCH; i++) {
            char id[32];
            snprintf(id, sizeof id, "%d", c->w * 1000000 + r * CW_BATCH + i);
            char *d = eu_random_doc(&rng, words, &zipf, id, NULL);
            if (table_batch_put(b, d, strlen(d), NULL, NULL, NULL) != QR_OK)
                atomic_fetch_add(c->failures, 1);
            free(d);
            if (i % 7 == 0)
                sched_yield(); /* let the others interleave their puts */
        }
        if (table_batch_commit(b, NULL) != QR_OK)
            atomic_fetch_add(c->failures, 1);
    }
    table_batch_free(b);
    atomic_fetch_sub(c->running, 1);
    return NULL;
}

Test(table, concurrent_writers_are_seen_in_whole_batches)
{
    char *dir = path_in("t");
    TableOpts o = opts_for(true, 4);
    Table *t = create(dir, &o);
    atomic_int running = CW_WRITERS, failures = 0;
    pthread_t th[CW_WRITERS];
    CwArg args[CW_WRITERS];
    for (int w = 0; w < CW_WRITERS; w++) {
        args[w] = (CwArg){.t = t, .w = w, .running = &running, .failures = &failures};
        pthread_create(&th[w], NULL, cw_writer, &args[w]);
    }
    uint64_t snapshots = 0, partial = 0, last_partial = 0;
    while (atomic_load(&running) > 0) {
        Snapshot *s = table_snapshot(t);
        if (s->n_live % CW_BATCH) {
            partial++;
            last_partial = s->n_live;
        }
        snapshots++;
        snapshot_release(s);
        sched_yield();
    }
    for (int w = 0; w < CW_WRITERS; w++)
        pthread_join(th[w], NULL);
    cr_assert_eq(atomic_load(&failures), 0);
    cr_assert_eq(partial, 0, "%lu of %lu snapshots held part of a batch (e.g. %lu docs)",
                 (unsigned long)partial, (unsigned long)snapshots, (unsigned long)last_partial);
    TableInfo ti;
    table_info(t, &ti);
    cr_assert_eq(ti.n_live, (uint64_t)CW_WRITERS * CW_ROUNDS * CW_BATCH);
    close_table(t);
    t = reopen(dir, &o);
    table_info(t, &ti);
    cr_assert_eq(ti.n_live, (uint64_t)CW_WRITERS * CW_ROUNDS * CW_BATCH);
    close_table(t);
    free(dir);
}

static int count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    size_t sl = strlen(suffix);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        n += l >= sl && !strcmp(e->d_name + l - sl, suffix);
    }
    closedir(d);
    return n;
}

/* A large batch spills its builder to segment files of its own.  They are
 * invisible, survive merges and checkpoints of the table meanwhile (which
 * must not take them for strays), join the table at the commit, and go
 * away when a batch is discarded. */
Test(table, a_spilled_batch_is_private_until_its_commit)
{
    char *dir = path_in("t");
    TableOpts o = opts_for(false, 2);
    o.builder_bytes = 24 << 10;
    Table *t = create(dir, &o);
    EuStore m;
    eu_store_init(&m);
    uint64_t rng = 33;
    int next = 0;
    for (int c = 0; c < 4; c++) {
        batch(t, &m, &rng, &next, 30);
        commit(t);
    }
    int files0 = count_files(dir, ".qseg");
    TableBatch *a = begin(t);
    EuStore ma;
    eu_store_copy(&ma, &m);
    for (int i = 0; i < 250; i++) /* new keys, upserts and deletes of committed ones */
        if (i % 10 == 9)
            bdel(a, &ma, (int)eu_below(&rng, (uint64_t)next));
        else
            bput(a, &ma, &rng, i % 5 == 4 ? (int)eu_below(&rng, (uint64_t)next) : next + i);
    int spilled = count_files(dir, ".qseg") - files0;
    cr_assert_gt(spilled, 2, "the batch spilled (%d files)", spilled);
    check(t, &m, "spilled, not committed");
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_force_merge(t, &e), QR_OK, "%s", e.message);
    cr_assert_eq(table_flush(t, &e), QR_OK, "%s", e.message);
    check(t, &m, "merged and flushed meanwhile");
    check_crash_image(dir, &o, &m, "crash image with a spilled batch: nothing of it");
    bcommit(a);
    check(t, &ma, "the spilled batch committed");
    check_crash_image(dir, &o, &ma, "crash image after the commit");
    /* a discarded batch takes its files with it */
    int files1 = count_files(dir, ".qseg");
    TableBatch *b = begin(t);
    for (int i = 0; i < 200; i++)
        bput(b, NULL, &rng, 500000 + i);
    cr_assert_gt(count_files(dir, ".qseg"), files1);
    table_batch_free(b);
    cr_assert_eq(count_files(dir, ".qseg"), files1, "the discarded batch's files are gone");
    check(t, &ma, "after discarding a batch");
    table_batch_free(a);
    close_table(t);
    t = reopen(dir, &o);
    check(t, &ma, "reopened");
    close_table(t);
    eu_store_free(&m);
    eu_store_free(&ma);
    free(dir);
}

/* A field added while a batch fills: the batch's documents are indexed
 * with it at the commit (the column holds their values), even those
 * spilled before the field existed. */
Test(table, a_field_added_while_a_batch_fills_is_indexed_at_its_commit)
{
    char *dir = path_in("t");
    TableOpts o = opts_for(false, 8);
    o.builder_bytes = 16 << 10;
    Table *t = create(dir, &o);
    TableBatch *a = begin(t);
    enum { N = 120 };
    for (int i = 0; i < N; i++) {
        char d[128];
        snprintf(d, sizeof d, "{\"id\":%d,\"title\":\"late field %d\",\"late\":%d}", i, i,
                 i * 3);
        cr_assert_eq(table_batch_put(a, d, strlen(d), NULL, NULL, NULL), QR_OK);
    }
    cr_assert_gt(count_files(dir, ".qseg"), 0, "part of the batch spilled");
    QrField f;
    schema_field_defaults(&f, "late", QR_FT_INT);
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_add_field(t, &f, &e), QR_OK, "%s", e.message);
    int fi = schema_field_index(table_schema(t), "late");
    cr_assert_geq(fi, 0);
    bcommit(a);
    for (int round = 0; round < 2; round++) {
        Snapshot *s = table_snapshot(t);
        cr_assert_eq(s->n_live, N);
        int seen = 0;
        for (int k = 0; k < s->n_segs; k++) {
            const Column *c = seg_column(s->segs[k], fi);
            cr_assert_not_null(c, "segment %d has the new field's column", k);
            for (uint32_t d = 0; d < seg_n_docs(s->segs[k]); d++) {
                if (snapshot_deleted(s, k, d))
                    continue;
                const uint8_t *key;
                size_t kl;
                cr_assert(seg_pk(s->segs[k], d, &key, &kl));
                QrBuf kb;
                qr_buf_init(&kb);
                pk_to_json(key, kl, &kb);
                qr_buf_putc(&kb, 0);
                int id = atoi((const char *)kb.data);
                qr_buf_free(&kb);
                int64_t v;
                cr_assert(col_get_int(c, d, &v), "doc %d has a value", id);
                cr_assert_eq(v, id * 3);
                seen++;
            }
        }
        cr_assert_eq(seen, N);
        snapshot_release(s);
        table_batch_free(a);
        a = NULL;
        close_table(t);
        if (round == 0)
            t = reopen(dir, &o);
    }
    free(dir);
}

/* ---- a full disk (issue 13 item 8) ---- */

/* Every write to a file fails with ENOSPC from the n-th on, during two
 * commits (each followed by a checkpoint), a merge and a flush; then space
 * comes back.  Each answer tells the truth -- a commit that failed wrote
 * nothing, one that succeeded is there (also when the checkpoint after it
 * failed) --, and the same table, not reopened, takes writes, merges and
 * checkpoints again.  Crash images and a reopen find the same state.  Then
 * a batch that cannot spill its builder to disk fails whole. */
/* The sweep of the test below.  in_memory: small commits go to in-memory
 * segments (the default), so a commit writes only its WAL records and the
 * flushes and merges write the files; otherwise every commit writes its
 * segment file too. */
static void disk_full_sweep(const char *dir, bool in_memory)
{
    TableOpts o = opts_for(false, 8);
    o.checkpoint_wal_bytes = 1; /* a checkpoint after every commit */
    if (!in_memory)
        o.nrt_commit_docs = 0;
    int64_t total = 0;
    int tried = 0, failed1 = 0, failed2 = 0, ok_both = 0;
    for (int64_t n = -1; n < 0 || n <= total + 2; n += n < 60 ? 1 : 3) {
        eu_rmtree(dir);
        Table *t = create(dir, &o);
        EuStore base;
        eu_store_init(&base);
        uint64_t rng = 71;
        int next = 0;
        batch(t, &base, &rng, &next, 30);
        commit(t);
        TableBatch *w = wb(t);
        /* batch 1: new keys, upserts and deletes of committed ones;
         * batch 2: new keys only (its outcome does not depend on batch 1's) */
        EuStore m1, m2;
        eu_store_copy(&m1, &base);
        eu_store_init(&m2);
        batch(t, &m1, &rng, &next, 25);
        qr_io_fail_after(n, ENOSPC);
        QrError e1, e2, em, ef;
        qr_error_clear(&e1);
        qr_error_clear(&e2);
        qr_error_clear(&em);
        qr_error_clear(&ef);
        int rc1 = table_batch_commit(w, &e1);
        for (int i = 0; i < 12; i++)
            bput(w, &m2, &rng, 700000 + i);
        int rc2 = table_batch_commit(w, &e2);
        int rcm = table_force_merge(t, &em);
        int rcf = table_flush(t, &ef);
        int64_t used = qr_io_write_count();
        qr_io_fail_after(-1, 0); /* space is back */
        char what[160];
        snprintf(what, sizeof what, "disk full from write %ld (commit %d, commit %d, merge %d, "
                 "flush %d)", (long)n, rc1, rc2, rcm, rcf);
        if (n < 0) {
            total = used;
            cr_assert(rc1 == QR_OK && rc2 == QR_OK && rcm == QR_OK && rcf == QR_OK, "%s", what);
        }
        const QrError *es[] = {&e1, &e2, &em, &ef};
        const int rcs[] = {rc1, rc2, rcm, rcf};
        for (int k = 0; k < 4; k++) {
            if (rcs[k] == QR_OK)
                continue;
            cr_assert_eq(rcs[k], QR_EIO, "%s: step %d: %s", what, k, es[k]->message);
            cr_assert(strstr(es[k]->message, "No space left on device"), "%s: %s", what,
                      es[k]->message);
            cr_assert_str_eq(qr_error_sqlstate(es[k]), "53100", "%s: disk_full", what);
            if (k < 2)
                cr_assert(strstr(es[k]->detail, "nothing of this commit"),
                          "%s: a failed commit says it wrote nothing: %s", what, es[k]->detail);
        }
        failed1 += rc1 != QR_OK;
        failed2 += rc2 != QR_OK;
        ok_both += rc1 == QR_OK && rc2 == QR_OK;
        EuStore want;
        eu_store_copy(&want, rc1 == QR_OK ? &m1 : &base);
        if (rc2 == QR_OK)
            store_apply(&want, &m2);
        check(t, &want, what);
        check_crash_image(dir, &o, &want, what);
        /* writes, merges and checkpoints work again, no reopen needed */
        bput(w, &want, &rng, 800000);
        QrError e;
        qr_error_clear(&e);
        cr_assert_eq(table_batch_commit(w, &e), QR_OK, "%s: a write once space is back: %s",
                     what, e.message);
        cr_assert_eq(table_force_merge(t, &e), QR_OK, "%s: a merge once space is back: %s",
                     what, e.message);
        Snapshot *s = table_snapshot(t);
        cr_assert_eq(s->n_segs, 1, "%s: the merge ran", what);
        snapshot_release(s);
        cr_assert_eq(table_flush(t, &e), QR_OK, "%s: %s", what, e.message);
        check(t, &want, what);
        check_crash_image(dir, &o, &want, what);
        close_table(t);
        t = reopen(dir, &o);
        check(t, &want, what);
        close_table(t);
        eu_store_free(&want);
        eu_store_free(&m1);
        eu_store_free(&m2);
        eu_store_free(&base);
        tried++;
    }
    /* a commit to memory writes once (its WAL records): one n fails it */
    int min_fail = in_memory ? 1 : 6;
    cr_assert_geq(failed1, min_fail, "the sweep failed the first commit (%d)", failed1);
    cr_assert_geq(failed2, min_fail, "and the second alone (%d)", failed2);
    cr_assert_gt(ok_both, 5, "and only what followed both (%d of %d)", ok_both, tried);
}

Test(table, disk_full_fails_cleanly_and_writes_resume)
{
    char *dir = path_in("t");
    disk_full_sweep(dir, false);
    disk_full_sweep(dir, true);
    TableOpts o = opts_for(false, 8);

    /* a batch that cannot spill: the put says so, the batch is poisoned,
     * its commit writes nothing, and a new batch works once space is back */
    eu_rmtree(dir);
    o.builder_bytes = 16 << 10;
    Table *t = create(dir, &o);
    EuStore m;
    eu_store_init(&m);
    uint64_t rng = 5;
    for (int k = 0; k < 10; k++)
        put(t, &m, &rng, k);
    commit(t);
    TableBatch *b = begin(t);
    qr_io_fail_after(0, ENOSPC);
    int rc = QR_OK, puts = 0;
    QrError e;
    qr_error_clear(&e);
    while (rc == QR_OK && puts < 10000) {
        char id[32];
        snprintf(id, sizeof id, "%d", 100 + puts++);
        char *d = eu_random_doc(&rng, words, &zipf, id, NULL);
        rc = table_batch_put(b, d, strlen(d), NULL, NULL, &e);
        free(d);
    }
    qr_io_fail_after(-1, 0);
    cr_assert_eq(rc, QR_EIO, "the spill failed (after %d puts): %s", puts, e.message);
    cr_assert_eq(table_batch_put(b, "{\"id\":1}", 8, NULL, NULL, NULL), QR_EIO, "poisoned");
    qr_error_clear(&e);
    cr_assert_eq(table_batch_commit(b, &e), QR_EIO, "a poisoned batch does not commit");
    check(t, &m, "after a batch that could not spill");
    bput(b, &m, &rng, 9999); /* the emptied batch works again */
    bcommit(b);
    check(t, &m, "space back");
    table_batch_free(b);
    close_table(t);
    t = reopen(dir, &o);
    check(t, &m, "reopened");
    close_table(t);
    eu_store_free(&m);
    free(dir);
}

/* ---- group commit and the in-memory tier (issue 16) ---- */

/* Close t, reopen dir: the same documents. */
static void close_reopen_check(Table *t, const char *dir, const TableOpts *o, const EuStore *m,
                               const char *what)
{
    close_table(t);
    t = reopen(dir, o);
    check(t, m, what);
    close_table(t);
}

/* What the WAL's syncs covered, per file (the sync hook of store/util.h):
 * a power loss keeps exactly that of each WAL file.  `hold` holds the next
 * sync back until released, to look at the table in between. */
#define SYNCED_FILES 64
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char path[SYNCED_FILES][4096];
    uint64_t bytes[SYNCED_FILES];
    int n;
    bool hold, holding;
} synced = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void synced_hook(void *arg, const char *path, uint64_t bytes, bool done)
{
    (void)arg;
    pthread_mutex_lock(&synced.mu);
    if (!done && synced.hold) {
        synced.holding = true;
        pthread_cond_broadcast(&synced.cv);
        while (synced.hold)
            pthread_cond_wait(&synced.cv, &synced.mu);
        synced.holding = false;
    }
    if (done) {
        int i = 0;
        while (i < synced.n && strcmp(synced.path[i], path) != 0)
            i++;
        if (i == synced.n && synced.n < SYNCED_FILES)
            snprintf(synced.path[synced.n++], sizeof synced.path[0], "%s", path);
        if (i < SYNCED_FILES && bytes > synced.bytes[i])
            synced.bytes[i] = bytes;
    }
    pthread_mutex_unlock(&synced.mu);
}

/* A copy of table `dir` as a power loss would leave it while the table is
 * open: every WAL file cut to what a finished sync covered (its header
 * alone when none did: headers are synced at creation); segment files and
 * manifests as they are (a manifest names only fsynced files). */
static void power_loss_image(const char *dir, const char *img)
{
    eu_rmtree(img);
    eu_copy_tree(dir, img);
    char wdir[4096];
    snprintf(wdir, sizeof wdir, "%s/wal", img);
    DIR *d = opendir(wdir);
    cr_assert_not_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "wal-", 4) != 0)
            continue;
        uint64_t keep = 16;
        pthread_mutex_lock(&synced.mu);
        for (int i = 0; i < synced.n; i++) {
            const char *base = strrchr(synced.path[i], '/');
            if (base && !strcmp(base + 1, e->d_name))
                keep = synced.bytes[i];
        }
        pthread_mutex_unlock(&synced.mu);
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", wdir, e->d_name);
        cr_assert_eq(truncate(p, (off_t)keep), 0, "%s", p);
    }
    closedir(d);
}

typedef struct StormArg {
    Table *t;
    int id, n;
    EuStore acked;       /* this writer's acknowledged documents */
    _Atomic int *failures;
    int max_segs;        /* most segments seen right after a commit returned */
} StormArg;

/* One writer: n single-document commits of new keys; each acknowledged
 * one goes into its model. */
static void *storm_writer(void *arg)
{
    StormArg *a = arg;
    uint64_t rng = 900 + (uint64_t)a->id;
    TableBatch *b;
    if (table_batch_begin(a->t, &b, NULL) != QR_OK) {
        atomic_fetch_add(a->failures, 1);
        return NULL;
    }
    for (int i = 0; i < a->n; i++) {
        char id[32];
        snprintf(id, sizeof id, "%d", 1000000 * (a->id + 1) + i);
        char *d = eu_random_doc(&rng, words, &zipf, id, NULL);
        QrError e;
        qr_error_clear(&e);
        if (table_batch_put(b, d, strlen(d), NULL, NULL, &e) != QR_OK ||
            table_batch_commit(b, &e) != QR_OK) {
            atomic_fetch_add(a->failures, 1);
        } else {
            uint8_t key[PK_KEY_MAX];
            size_t kl = eu_doc_key(d, key);
            eu_store_put(&a->acked, key, kl, d);
            /* searchable at acknowledgement */
            Snapshot *s = table_snapshot(a->t);
            int seg;
            uint32_t local;
            if (!snapshot_find_key(s, key, kl, &seg, &local))
                atomic_fetch_add(a->failures, 1);
            if (s->n_segs > a->max_segs)
                a->max_segs = s->n_segs;
            snapshot_release(s);
        }
        free(d);
    }
    table_batch_free(b);
    return NULL;
}

/* Run `nw` storm writers of `n` commits each; m gets every acknowledged
 * document; returns the most segments any writer saw. */
static int storm(Table *t, int nw, int n, EuStore *m)
{
    StormArg a[8];
    pthread_t th[8];
    _Atomic int failures = 0;
    for (int w = 0; w < nw; w++) {
        a[w] = (StormArg){.t = t, .id = w, .n = n, .failures = &failures};
        eu_store_init(&a[w].acked);
        pthread_create(&th[w], NULL, storm_writer, &a[w]);
    }
    int max_segs = 0;
    for (int w = 0; w < nw; w++) {
        pthread_join(th[w], NULL);
        store_apply(m, &a[w].acked);
        eu_store_free(&a[w].acked);
        if (a[w].max_segs > max_segs)
            max_segs = a[w].max_segs;
    }
    cr_assert_eq(atomic_load(&failures), 0, "a commit failed or was not visible at once");
    return max_segs;
}

static void *commit_waiter(void *arg)
{
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_commit_wait(arg, &e), QR_OK, "%s", e.message);
    return NULL;
}

/* COMMIT mode: a commit is not visible before its sync, is visible when
 * acknowledged, and concurrent commits share syncs; a power loss right
 * after the writers return keeps every acknowledged document. */
Test(table, group_commit_is_durable_and_visible_at_acknowledgement)
{
    char *dir = path_in("t");
    char *img = path_in("img");
    TableOpts o = opts_for(false, 8);
    o.fsync = QR_FSYNC_COMMIT;
    Table *t = create(dir, &o);
    synced.n = 0;
    memset(synced.bytes, 0, sizeof synced.bytes);
    qr_io_sync_hook_set(synced_hook, NULL);
    /* 1. a commit held in its sync: ordered (the latest snapshot has it),
     * not shown (readers' snapshots do not), then acknowledged and shown */
    EuStore m;
    eu_store_init(&m);
    uint64_t rng = 3;
    put(t, &m, &rng, 1);
    pthread_mutex_lock(&synced.mu);
    synced.hold = true;
    pthread_mutex_unlock(&synced.mu);
    TableBatch *b = wb(t);
    TableCommit c;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(table_batch_commit_start(b, &c, &e), QR_OK, "%s", e.message);
    uint8_t key[PK_KEY_MAX];
    size_t kl = eu_doc_key("{\"id\":1}", key);
    int seg;
    uint32_t local;
    Snapshot *s = table_snapshot(t);
    cr_assert(!snapshot_find_key(s, key, kl, &seg, &local), "shown before it was durable");
    snapshot_release(s);
    s = table_snapshot_latest(t);
    cr_assert(snapshot_find_key(s, key, kl, &seg, &local), "the latest snapshot has it");
    snapshot_release(s);
    pthread_t waiter;
    pthread_create(&waiter, NULL, commit_waiter, &c);
    pthread_mutex_lock(&synced.mu);
    while (!synced.holding)
        pthread_cond_wait(&synced.cv, &synced.mu);
    s = table_snapshot(t);
    cr_assert(!snapshot_find_key(s, key, kl, &seg, &local), "shown while its sync runs");
    snapshot_release(s);
    synced.hold = false;
    pthread_cond_broadcast(&synced.cv);
    pthread_mutex_unlock(&synced.mu);
    pthread_join(waiter, NULL);
    check(t, &m, "acknowledged");
    /* 2. eight writers: every acknowledged document survives a power loss
     * taken right after they return, and they shared syncs */
    TableInfo t0, t1;
    table_info(t, &t0);
    storm(t, 8, 40, &m);
    table_info(t, &t1);
    uint64_t commits = t1.commits - t0.commits, syncs = t1.wal_syncs - t0.wal_syncs;
    cr_assert_eq(commits, 8 * 40);
    cr_assert_leq(syncs, commits, "one sync per commit at most (%lu for %lu)",
                  (unsigned long)syncs, (unsigned long)commits);
    power_loss_image(dir, img);
    Table *c2 = reopen(img, &o);
    check(c2, &m, "power loss after the storm");
    close_table(c2);
    qr_io_sync_hook_set(NULL, NULL);
    close_reopen_check(t, dir, &o, &m, "reopened");
    eu_store_free(&m);
    free(img);
    free(dir);
}

/* The in-memory tier under a write storm: every commit is searchable when
 * it returns, the segment count stays bounded, the tier is merged in
 * memory and flushed to files by size and by age, and crash images and a
 * reopen hold exactly the acknowledged documents. */
Test(table, in_memory_tier_stays_bounded_and_flushes)
{
    char *dir = path_in("t");
    TableOpts o = opts_for(true, 4);
    o.nrt_flush_bytes = 256 << 10; /* a flush by size every few hundred commits */
    o.nrt_flush_ms = 3600 * 1000;
    o.nrt_max_segments = 12;
    Table *t = create(dir, &o);
    EuStore m;
    eu_store_init(&m);
    int max_segs = storm(t, 4, 150, &m);
    TableInfo ti;
    table_info(t, &ti);
    /* the bound: the memory tier's (plus a commit per writer racing it) and
     * the file tiers' (merge factor 4: 3 per tier) */
    cr_assert_leq(max_segs, 40, "%d segments at a commit", max_segs);
    cr_assert_gt(ti.nrt_merges, 0, "merged in memory");
    cr_assert_gt(ti.nrt_flushes, 0, "flushed by size");
    check(t, &m, "after the storm");
    check_crash_image(dir, &o, &m, "crash image after the storm");
    close_table(t);
    /* by age: a short age flushes what is left without a size reason */
    o.nrt_flush_ms = 50;
    o.nrt_flush_bytes = 64u << 20;
    t = reopen(dir, &o);
    storm(t, 2, 20, &m);
    table_info(t, &ti);
    uint64_t flushes = ti.nrt_flushes;
    for (int i = 0; i < 2000 && ti.mem_segments; i++) { /* a bound against a hang only */
        usleep(10000);
        table_info(t, &ti);
    }
    cr_assert_eq(ti.mem_segments, 0, "the in-memory segments were flushed by age");
    cr_assert_gt(ti.nrt_flushes + ti.merges_done, flushes, "a flush ran");
    check(t, &m, "after the age flush");
    close_reopen_check(t, dir, &o, &m, "reopened");
    eu_store_free(&m);
    free(dir);
}
