/*
 * test_wal.c — write-ahead log: round trips across rotations, torn tails cut
 * at every byte (and left by READ), every bit flipped in the last file
 * (torn tail or corruption, files untouched unless salvaging), damage in
 * older files and its salvage, drop_before, batched mode, disk full, and an
 * allocation-failure sweep.
 */
#include <criterion/criterion.h>

#include "store/crc32c.h"
#include "store/mem.h"
#include "store/sfile.h"
#include "store/util.h"
#include "store/wal.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LEAK_CHECK() cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "leak")
#else
#define LEAK_CHECK() ((void)0)
#endif

#define MAX_PAYLOAD 300

/* ---- helpers ------------------------------------------------------------- */

static void quiet(void) { qr_log_set_level(QR_LOG_ERROR); } /* cuts are logged as warnings */
TestSuite(wal, .init = quiet);

/* A fresh directory under $TMPDIR, else on tmpfs when there is one (the
 * torn-tail sweeps fsync thousands of times), else /tmp. */
static char *new_dir(void)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    char *p = malloc(512);
    snprintf(p, 512, "%s/qr-wal-XXXXXX", base);
    cr_assert_not_null(mkdtemp(p));
    return p;
}

static void drop_dir(char *dir)
{
    cr_assert_eq(qr_remove_tree(dir, NULL), QR_OK);
    free(dir);
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* The payload of record `lsn`, deterministic so replays can be checked
 * without keeping copies.  Every 9th record is empty. */
static size_t gen_payload(uint64_t lsn, uint8_t *out)
{
    uint64_t h = mix(lsn);
    size_t len = lsn % 9 == 0 ? 0 : (size_t)(h % MAX_PAYLOAD);
    for (size_t i = 0; i < len; i++)
        out[i] = (uint8_t)mix(h + i);
    return len;
}

static uint8_t gen_type(uint64_t lsn) { return (uint8_t)(lsn % 5 + 1); }

static size_t rec_bytes(uint64_t lsn)
{
    uint8_t tmp[MAX_PAYLOAD];
    return WAL_RECORD_OVERHEAD + gen_payload(lsn, tmp);
}

static void append_range(WalWriter *w, uint64_t from, uint64_t to, int commit_every,
                         int rotate_every)
{
    uint8_t p[MAX_PAYLOAD];
    QrError err;
    qr_error_clear(&err);
    for (uint64_t lsn = from; lsn <= to; lsn++) {
        uint64_t got = 0;
        size_t n = gen_payload(lsn, p);
        cr_assert_eq(wal_append(w, gen_type(lsn), p, n, &got, &err), QR_OK, "%s", err.message);
        cr_assert_eq(got, lsn);
        if (commit_every && lsn % (uint64_t)commit_every == 0)
            cr_assert_eq(wal_commit(w, &err), QR_OK, "%s", err.message);
        if (rotate_every && lsn % (uint64_t)rotate_every == 0)
            cr_assert_eq(wal_rotate(w, &err), QR_OK, "%s", err.message);
    }
    cr_assert_eq(wal_commit(w, &err), QR_OK, "%s", err.message);
}

typedef struct Seen {
    uint64_t n;     /* records seen */
    uint64_t first; /* lsn of the first */
    uint64_t next;  /* lsn expected next */
    int bad;        /* a record did not match its generator */
    uint64_t stop_at; /* return QR_ECANCELED at this lsn (0 = never) */
} Seen;

static int check_cb(void *arg, uint8_t type, uint64_t lsn, const uint8_t *p, size_t len)
{
    Seen *s = arg;
    if (s->stop_at && lsn == s->stop_at)
        return QR_ECANCELED;
    if (s->n == 0)
        s->first = lsn;
    else if (lsn != s->next)
        s->bad++;
    s->next = lsn + 1;
    s->n++;
    uint8_t exp[MAX_PAYLOAD];
    size_t el = gen_payload(lsn, exp);
    if (type != gen_type(lsn) || len != el || memcmp(p, exp, el) != 0)
        s->bad++;
    return 0;
}

static int replay_mode(const char *dir, uint64_t from, WalReplayMode mode, Seen *s,
                       WalReplayStats *st, QrError *err)
{
    memset(s, 0, sizeof *s);
    qr_error_clear(err);
    return wal_replay(dir, from, mode, check_cb, s, st, err);
}

static int replay(const char *dir, uint64_t from, Seen *s, WalReplayStats *st, QrError *err)
{
    return replay_mode(dir, from, WAL_REPLAY_RECOVER, s, st, err);
}

static void file_path(char *out, const char *dir, uint64_t lsn)
{
    snprintf(out, 600, "%s/wal-%016" PRIx64 ".log", dir, lsn);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    uint8_t *d;
    cr_assert_eq(qr_file_read_all(path, &d, len, NULL), QR_OK, "read %s", path);
    return d;
}

static void spit(const char *path, const uint8_t *d, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(d, 1, len, f), len);
    fclose(f);
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "stat %s", path);
    return (uint64_t)st.st_size;
}

/* Log with lsns 1..20 in the first file and 21..26 in the last. */
static char *two_file_log(void)
{
    char *dir = new_dir();
    WalWriter *w;
    cr_assert_eq(wal_open(dir, QR_FSYNC_OFF, 0, 1, &w, NULL), QR_OK);
    append_range(w, 1, 20, 4, 0);
    cr_assert_eq(wal_rotate(w, NULL), QR_OK);
    append_range(w, 21, 26, 2, 0);
    wal_close(w);
    return dir;
}

/* ---- tests --------------------------------------------------------------- */

Test(wal, round_trip_across_rotations)
{
    char *dir = new_dir();
    WalWriter *w;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(wal_open(dir, QR_FSYNC_COMMIT, 0, 1, &w, &err), QR_OK, "%s", err.message);
    append_range(w, 1, 1000, 7, 128);
    cr_assert_eq(wal_next_lsn(w), 1001);
    wal_close(w);

    Seen s;
    WalReplayStats st;
    cr_assert_eq(replay(dir, 1, &s, &st, &err), QR_OK, "%s", err.message);
    cr_assert_eq(s.n, 1000);
    cr_assert_eq(s.first, 1);
    cr_assert_eq(s.bad, 0);
    cr_assert_eq(st.records, 1000);
    cr_assert_eq(st.last_lsn, 1000);
    cr_assert_eq(st.torn_bytes, 0);
    cr_assert_str_empty(st.torn_file);

    cr_assert_eq(replay(dir, 500, &s, &st, &err), QR_OK, "%s", err.message);
    cr_assert_eq(s.n, 501);
    cr_assert_eq(s.first, 500);
    cr_assert_eq(s.bad, 0);
    cr_assert_eq(st.last_lsn, 1000);

    /* reopen after the last lsn and keep going */
    cr_assert_eq(wal_open(dir, QR_FSYNC_COMMIT, 0, st.last_lsn + 1, &w, &err), QR_OK, "%s",
                 err.message);
    append_range(w, 1001, 1100, 10, 0);
    wal_close(w);
    cr_assert_eq(replay(dir, 0, &s, &st, &err), QR_OK, "%s", err.message);
    cr_assert_eq(s.n, 1100);
    cr_assert_eq(s.bad, 0);
    drop_dir(dir);
}

Test(wal, empty_and_missing)
{
    char *dir = new_dir();
    Seen s;
    WalReplayStats st;
    QrError err;
    char sub[600];
    snprintf(sub, sizeof sub, "%s/nope", dir);
    cr_assert_eq(replay(sub, 1, &s, &st, &err), QR_OK);
    cr_assert_eq(s.n, 0);
    cr_assert_eq(st.last_lsn, 0);

    WalWriter *w;
    cr_assert_eq(wal_open(sub, QR_FSYNC_COMMIT, 0, 0, &w, &err), QR_EINVAL);
    cr_assert_eq(wal_open(sub, QR_FSYNC_COMMIT, 0, 42, &w, NULL), QR_OK);
    cr_assert_eq(wal_rotate(w, NULL), QR_OK); /* no record: no new file */
    wal_close(w);
    cr_assert_eq(replay(sub, 1, &s, &st, &err), QR_OK, "%s", err.message);
    cr_assert_eq(s.n, 0);
    cr_assert_eq(st.last_lsn, 41, "an empty file named 42 accounts for lsns < 42");
    /* the empty file is reused by an open at the same lsn */
    cr_assert_eq(wal_open(sub, QR_FSYNC_COMMIT, 0, 42, &w, &err), QR_OK, "%s", err.message);
    append_range(w, 42, 45, 1, 0);
    wal_close(w);
    /* opening below the log's end is refused */
    qr_error_clear(&err);
    cr_assert_eq(wal_open(sub, QR_FSYNC_COMMIT, 0, 42, &w, &err), QR_EINVAL);
    cr_assert_eq(wal_open(sub, QR_FSYNC_COMMIT, 0, 10, &w, NULL), QR_EINVAL);
    cr_assert_eq(replay(sub, 1, &s, &st, &err), QR_OK, "%s", err.message);
    cr_assert_eq(s.n, 4);
    cr_assert_eq(s.first, 42);
    cr_assert_eq(s.bad, 0);
    drop_dir(dir);
}

Test(wal, lsn_gap_between_files)
{
    char *dir = new_dir();
    WalWriter *w;
    cr_assert_eq(wal_open(dir, QR_FSYNC_OFF, 0, 1, &w, NULL), QR_OK);
    append_range(w, 1, 10, 3, 0);
    wal_close(w);
    cr_assert_eq(wal_open(dir, QR_FSYNC_OFF, 0, 100, &w, NULL), QR_OK);
    append_range(w, 100, 105, 3, 0);
    wal_close(w);
    Seen s;
    WalReplayStats st;
    QrError err;
    /* lsns 11..99 were never written: replaying them is asking for records
     * that are missing, which is damage (a truncated older file looks the
     * same) */
    cr_assert_eq(replay(dir, 1, &s, &st, &err), QR_ECORRUPT);
    cr_assert(strstr(err.message, "records 11 to 99 are missing"), "%s", err.message);
    /* from a checkpoint at or past the gap, the log is whole */
    cr_assert_eq(replay(dir, 100, &s, &st, &err), QR_OK, "%s", err.message);
    cr_assert_eq(s.n, 6);
    cr_assert_eq(s.bad, 0);
    cr_assert_eq(st.last_lsn, 105);
    cr_assert_eq(replay(dir, 50, &s, &st, &err), QR_ECORRUPT);
    /* salvage keeps lsns 1..10 and sets the file after the gap aside */
    cr_assert_eq(replay_mode(dir, 1, WAL_REPLAY_SALVAGE, &s, &st, &err), QR_OK, "%s",
                 err.message);
    cr_assert_eq(s.n, 10);
    cr_assert_eq(st.last_lsn, 10);
    char p[600];
    file_path(p, dir, 100);
    cr_assert(!qr_path_exists(p));
    cr_assert_eq(replay(dir, 1, &s, &st, &err), QR_OK, "%s", err.message);
    cr_assert_eq(s.n, 10);
    drop_dir(dir);
}

Test(wal, torn_tail_at_every_offset)
{
    char *dir = two_file_log();
    char last[600];
    file_path(last, dir, 21);
    size_t len;
    uint8_t *orig = slurp(last, &len);
    uint64_t bound[8]; /* bound[k] = end of the k-th record of the last file */
    bound[0] = SF_HEADER_LEN;
    for (int k = 0; k < 6; k++)
        bound[k + 1] = bound[k] + rec_bytes(21 + (uint64_t)k);
    cr_assert_eq(bound[6], len);

    for (size_t cut = 0; cut <= len; cut++) {
        spit(last, orig, cut);
        int m = 0; /* whole records before the cut */
        while (m < 6 && bound[m + 1] <= cut)
            m++;
        uint64_t keep = cut < SF_HEADER_LEN ? 0 : bound[m];
        Seen s;
        WalReplayStats st;
        QrError err;
        /* READ: the same records and the same tail reported, nothing cut */
        cr_assert_eq(replay_mode(dir, 1, WAL_REPLAY_READ, &s, &st, &err), QR_OK, "cut %zu: %s",
                     cut, err.message);
        cr_assert_eq(s.n, 20 + (uint64_t)m, "cut %zu", cut);
        cr_assert_eq(st.torn_bytes, cut - keep, "cut %zu", cut);
        cr_assert_eq(st.torn_off, cut != keep ? keep : 0, "cut %zu", cut);
        cr_assert_eq(file_size(last), cut, "cut %zu: READ left the file", cut);
        cr_assert_eq(replay(dir, 1, &s, &st, &err), QR_OK, "cut %zu: %s", cut, err.message);
        cr_assert_eq(s.n, 20 + (uint64_t)m, "cut %zu", cut);
        cr_assert_eq(s.bad, 0, "cut %zu", cut);
        cr_assert_eq(st.last_lsn, 20 + (uint64_t)m, "cut %zu", cut);
        cr_assert_eq(st.torn_bytes, cut - keep, "cut %zu", cut);
        if (cut != keep)
            cr_assert_str_eq(st.torn_file, last);
        else
            cr_assert_str_empty(st.torn_file);
        cr_assert_eq(file_size(last), keep, "cut %zu: file truncated", cut);
        /* stable: a second replay cuts nothing */
        cr_assert_eq(replay(dir, 1, &s, &st, &err), QR_OK);
        cr_assert_eq(s.n, 20 + (uint64_t)m);
        cr_assert_eq(st.torn_bytes, 0);

        if (cut % 11 == 0 || cut == len) { /* the log takes new records after the cut */
            WalWriter *w;
            uint64_t next = st.last_lsn + 1;
            cr_assert_eq(wal_open(dir, QR_FSYNC_OFF, 0, next, &w, &err), QR_OK, "cut %zu: %s",
                         cut, err.message);
            append_range(w, next, next + 2, 0, 0);
            wal_close(w);
            cr_assert_eq(replay(dir, 1, &s, &st, &err), QR_OK, "%s", err.message);
            cr_assert_eq(s.n, 23 + (uint64_t)m, "cut %zu", cut);
            cr_assert_eq(s.bad, 0);
            if (next != 21) {
                char extra[600];
                file_path(extra, dir, next);
                cr_assert_eq(unlink(extra), 0);
            }
        }
    }
    free(orig);
    drop_dir(dir);
}

static bool file_equals(const char *path, const uint8_t *want, size_t len)
{
    size_t n;
    uint8_t *d = slurp(path, &n);
    bool eq = n == len && memcmp(d, want, len) == 0;
    free(d);
    return eq;
}

/* Every bit of every byte of the last file flipped in turn.  In its final
 * record the flip is a torn tail: nothing intact follows, which is all a
 * torn write can leave (RECOVER cuts it, READ leaves it).  Anywhere before
 * (the header included) intact records follow, so cutting would drop
 * them: QR_ECORRUPT at the damaged record's offset, with the file's bytes
 * unchanged in READ and RECOVER modes.  SALVAGE keeps the records before
 * the damage and the whole damaged file as "<file>.damaged". */
Test(wal, bit_flips_in_last_file)
{
    char *dir = two_file_log();
    char last[600], aside[700];
    file_path(last, dir, 21);
    snprintf(aside, sizeof aside, "%s.damaged", last);
    size_t len;
    uint8_t *orig = slurp(last, &len);
    uint8_t *bad = malloc(len);
    uint64_t bound[7]; /* bound[k] = offset of the k-th record (lsn 21 + k); bound[6] = len */
    bound[0] = SF_HEADER_LEN;
    for (int k = 0; k < 6; k++)
        bound[k + 1] = bound[k] + rec_bytes(21 + (uint64_t)k);
    cr_assert_eq(bound[6], len);
    for (size_t pos = 0; pos < len; pos++) {
        int k = -1; /* record holding pos; -1: the file header */
        while (k < 5 && pos >= bound[k + 1])
            k++;
        uint64_t dmg = k < 0 ? 0 : bound[k]; /* where the log stops being intact */
        uint64_t good = 20 + (uint64_t)(k < 0 ? 0 : k); /* intact records before it */
        bool torn = k == 5;
        for (int bit = 0; bit < 8; bit++) {
            memcpy(bad, orig, len);
            bad[pos] ^= (uint8_t)(1u << bit);
            Seen s;
            WalReplayStats st;
            QrError err;
            for (int mode = WAL_REPLAY_RECOVER; mode <= WAL_REPLAY_SALVAGE; mode++) {
                spit(last, bad, len);
                int rc = replay_mode(dir, 1, (WalReplayMode)mode, &s, &st, &err);
                cr_assert_eq(s.n, good, "pos %zu bit %d mode %d: %" PRIu64 " records", pos, bit,
                             mode, s.n);
                cr_assert_eq(s.bad, 0);
                if (torn) {
                    cr_assert_eq(rc, QR_OK, "pos %zu bit %d: %s", pos, bit, err.message);
                    cr_assert_eq(st.torn_bytes, len - dmg, "pos %zu bit %d", pos, bit);
                    cr_assert_eq(st.torn_off, dmg);
                    cr_assert_eq(file_size(last), mode == WAL_REPLAY_READ ? len : dmg,
                                 "pos %zu bit %d mode %d", pos, bit, mode);
                    continue;
                }
                if (mode != WAL_REPLAY_SALVAGE) {
                    cr_assert_eq(rc, QR_ECORRUPT, "pos %zu bit %d mode %d: rc %d", pos, bit,
                                 mode, rc);
                    cr_assert_eq(err.offset, (int64_t)dmg, "pos %zu bit %d: offset %" PRId64,
                                 pos, bit, err.offset);
                    cr_assert(strstr(err.message, "wal-0000000000000015.log"), "%s",
                              err.message);
                    cr_assert(strstr(err.detail, "intact record"), "%s", err.detail);
                    cr_assert(file_equals(last, bad, len), "pos %zu bit %d mode %d: the file "
                              "was changed", pos, bit, mode);
                    continue;
                }
                cr_assert_eq(rc, QR_OK, "pos %zu bit %d salvage: %s", pos, bit, err.message);
                cr_assert_eq(st.salvaged_bytes, len - dmg);
                cr_assert_eq(st.salvage_off, dmg);
                cr_assert_str_eq(st.salvage_file, last);
                cr_assert_eq(st.last_lsn, good);
                cr_assert_eq(file_size(last), dmg, "salvage cut at the damage");
                cr_assert(file_equals(aside, bad, len), "the damaged file is kept whole");
                cr_assert_eq(unlink(aside), 0);
                /* what the salvage kept replays cleanly */
                cr_assert_eq(replay(dir, 1, &s, &st, &err), QR_OK, "%s", err.message);
                cr_assert_eq(s.n, good);
                cr_assert_eq(st.torn_bytes, 0);
            }
        }
    }
    free(bad);
    free(orig);
    drop_dir(dir);
}

Test(wal, damage_in_older_file_is_corrupt)
{
    char *dir = two_file_log();
    char first[600];
    file_path(first, dir, 1);
    size_t len;
    uint8_t *orig = slurp(first, &len);
    uint64_t off5 = SF_HEADER_LEN;
    for (uint64_t l = 1; l < 5; l++)
        off5 += rec_bytes(l);

    /* a flipped byte in record 5 */
    uint8_t *bad = malloc(len);
    memcpy(bad, orig, len);
    bad[off5 + 10] ^= 0x01;
    spit(first, bad, len);
    Seen s;
    WalReplayStats st;
    QrError err;
    cr_assert_eq(replay(dir, 1, &s, &st, &err), QR_ECORRUPT);
    cr_assert_not_null(strstr(err.message, "wal-0000000000000001.log"), "%s", err.message);
    cr_assert_eq(err.offset, (int64_t)off5);
    cr_assert_eq(s.n, 4, "records before the damage were delivered");
    cr_assert_eq(file_size(first), len, "an older file is never cut");

    cr_assert_eq(replay_mode(dir, 1, WAL_REPLAY_READ, &s, &st, &err), QR_ECORRUPT);
    cr_assert_eq(file_size(first), len);
    /* salvage: the first file cut at the damage (kept whole aside), the
     * last file set aside: the log is lsns 1..4 */
    char last[600], aside[700];
    file_path(last, dir, 21);
    size_t last_len;
    uint8_t *last_orig = slurp(last, &last_len);
    cr_assert_eq(replay_mode(dir, 1, WAL_REPLAY_SALVAGE, &s, &st, &err), QR_OK, "%s",
                 err.message);
    cr_assert_eq(s.n, 4);
    cr_assert_eq(st.last_lsn, 4);
    cr_assert_eq(st.salvage_off, off5);
    cr_assert_eq(st.salvaged_bytes, len - off5 + last_len);
    cr_assert_eq(file_size(first), off5);
    cr_assert(!qr_path_exists(last), "the later file is set aside");
    snprintf(aside, sizeof aside, "%s.damaged", last);
    cr_assert(file_equals(aside, last_orig, last_len));
    snprintf(aside, sizeof aside, "%s.damaged", first);
    cr_assert(file_equals(aside, bad, len));
    cr_assert_eq(replay(dir, 1, &s, &st, &err), QR_OK, "%s", err.message);
    cr_assert_eq(s.n, 4);
    spit(last, last_orig, last_len); /* back as it was, for the cases below */
    free(last_orig);

    /* a truncated older file */
    spit(first, orig, len - 3);
    cr_assert_eq(replay(dir, 1, &s, &st, &err), QR_ECORRUPT);
    /* a torn header in an older file */
    spit(first, orig, 9);
    cr_assert_eq(replay(dir, 1, &s, &st, &err), QR_ECORRUPT);
    /* replay from past the damaged file does not read it */
    cr_assert_eq(replay(dir, 21, &s, &st, &err), QR_OK, "%s", err.message);
    cr_assert_eq(s.n, 6);
    free(bad);
    free(orig);
    drop_dir(dir);
}

Test(wal, wrong_kind_and_newer_version)
{
    char *dir = two_file_log();
    char last[600];
    file_path(last, dir, 21);
    size_t len;
    uint8_t *orig = slurp(last, &len);
    sf_header_encode(orig, QR_KIND_WAL, 2);
    spit(last, orig, len);
    Seen s;
    WalReplayStats st;
    QrError err;
    cr_assert_eq(replay(dir, 1, &s, &st, &err), QR_EUNSUPPORTED);
    sf_header_encode(orig, QR_KIND_MANIFEST, 1);
    spit(last, orig, len);
    cr_assert_eq(replay(dir, 1, &s, &st, &err), QR_ECORRUPT);
    cr_assert_eq(file_size(last), len, "an intact header of another kind is not cut");
    free(orig);
    drop_dir(dir);
}

Test(wal, callback_abort)
{
    char *dir = two_file_log();
    Seen s;
    memset(&s, 0, sizeof s);
    s.stop_at = 10;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(wal_replay(dir, 1, WAL_REPLAY_RECOVER, check_cb, &s, NULL, &err), QR_ECANCELED);
    cr_assert_eq(err.code, QR_ECANCELED);
    cr_assert_eq(s.n, 9);
    drop_dir(dir);
}

Test(wal, drop_before)
{
    char *dir = new_dir();
    WalWriter *w;
    cr_assert_eq(wal_open(dir, QR_FSYNC_OFF, 0, 1, &w, NULL), QR_OK);
    append_range(w, 1, 40, 5, 10); /* files 1, 11, 21, 31, 41 (empty, current) */
    char p[600];
    uint64_t total = 0;
    for (uint64_t f = 1; f <= 41; f += 10) {
        file_path(p, dir, f);
        total += file_size(p);
    }
    cr_assert_eq(wal_bytes(w), total);

    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(wal_drop_before(w, 20, &err), QR_OK, "%s", err.message);
    file_path(p, dir, 1);
    cr_assert(!qr_path_exists(p));
    file_path(p, dir, 11);
    cr_assert(qr_path_exists(p), "file 11 holds lsn 20, which is not below 20");
    uint64_t left = 0;
    for (uint64_t f = 11; f <= 41; f += 10) {
        file_path(p, dir, f);
        left += file_size(p);
    }
    cr_assert_eq(wal_bytes(w), left);

    Seen s;
    WalReplayStats st;
    cr_assert_eq(replay(dir, 20, &s, &st, &err), QR_OK, "%s", err.message);
    cr_assert_eq(s.first, 20);
    cr_assert_eq(s.n, 21);

    /* everything but the current file */
    cr_assert_eq(wal_drop_before(w, UINT64_MAX, &err), QR_OK);
    for (uint64_t f = 11; f <= 31; f += 10) {
        file_path(p, dir, f);
        cr_assert(!qr_path_exists(p));
    }
    file_path(p, dir, 41);
    cr_assert(qr_path_exists(p));
    cr_assert_eq(wal_bytes(w), SF_HEADER_LEN);
    append_range(w, 41, 45, 0, 0);
    wal_close(w);
    cr_assert_eq(replay(dir, 1, &s, &st, &err), QR_OK, "%s", err.message);
    cr_assert_eq(s.n, 5);
    cr_assert_eq(s.first, 41);
    drop_dir(dir);
}

Test(wal, batched_mode)
{
    char *dir = new_dir();
    WalWriter *w;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(wal_open(dir, QR_FSYNC_BATCHED, 2, 1, &w, &err), QR_OK, "%s", err.message);
    uint8_t p[MAX_PAYLOAD];
    for (uint64_t lsn = 1; lsn <= 3000; lsn++) {
        size_t n = gen_payload(lsn, p);
        cr_assert_eq(wal_append(w, gen_type(lsn), p, n, NULL, &err), QR_OK);
        cr_assert_eq(wal_commit(w, &err), QR_OK, "%s", err.message);
        if (lsn % 250 == 0)
            cr_assert_eq(wal_rotate(w, &err), QR_OK, "%s", err.message);
        if (lsn % 500 == 0)
            usleep(5000); /* let the sync thread run */
        if (lsn % 1000 == 0)
            cr_assert_eq(wal_drop_before(w, lsn - 500, &err), QR_OK, "%s", err.message);
    }
    wal_close(w);
    Seen s;
    WalReplayStats st;
    cr_assert_eq(replay(dir, 2501, &s, &st, &err), QR_OK, "%s", err.message);
    cr_assert_eq(s.n, 500);
    cr_assert_eq(s.bad, 0);
    cr_assert_eq(st.last_lsn, 3000);
    drop_dir(dir);
}

/* Group commit.  Eight committers write under one lock and wait for their
 * sync outside it.  The sync hook holds the first sync back until every
 * committer has written, so the others must queue behind it and share the
 * next sync: two syncs for eight commits (one when they all wrote before
 * the first sync started).  And each committer, once wal_sync_to returns,
 * finds its last byte inside what a finished sync covered: what a power
 * loss keeps. */
#define GC_THREADS 8
typedef struct GroupCommit {
    WalWriter *w;
    pthread_mutex_t lock;       /* serializes append + write, as a table does */
    pthread_mutex_t mu;         /* guards the fields below */
    pthread_cond_t cv;
    int written;                /* committers that wrote */
    bool first_held;            /* the first sync was held back */
    uint64_t synced;            /* bytes covered by the last finished sync */
    char path[600];
    int bad;
} GroupCommit;

static GroupCommit gc;

static void gc_hook(void *arg, const char *path, uint64_t bytes, bool done)
{
    (void)arg;
    pthread_mutex_lock(&gc.mu);
    if (strcmp(path, gc.path) != 0)
        gc.bad++;
    if (!done && !gc.first_held) {
        gc.first_held = true;
        while (gc.written < GC_THREADS)
            pthread_cond_wait(&gc.cv, &gc.mu);
    }
    if (done && bytes > gc.synced)
        gc.synced = bytes;
    pthread_mutex_unlock(&gc.mu);
}

static void *gc_committer(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint8_t p[64];
    memset(p, id, sizeof p);
    QrError err;
    qr_error_clear(&err);
    pthread_mutex_lock(&gc.lock);
    uint64_t end = 0;
    int rc = wal_append(gc.w, 1, p, sizeof p, NULL, &err);
    if (rc == QR_OK)
        rc = wal_write(gc.w, &end, &err);
    uint64_t my_bytes = file_size(gc.path);
    pthread_mutex_unlock(&gc.lock);
    pthread_mutex_lock(&gc.mu);
    gc.written++;
    pthread_cond_broadcast(&gc.cv);
    pthread_mutex_unlock(&gc.mu);
    if (rc == QR_OK)
        rc = wal_sync_to(gc.w, end, &err);
    pthread_mutex_lock(&gc.mu);
    if (rc != QR_OK || wal_acked_lsn(gc.w) < end || gc.synced < my_bytes)
        gc.bad++;
    pthread_mutex_unlock(&gc.mu);
    return NULL;
}

Test(wal, group_commit_shares_syncs_and_keeps_the_promise)
{
    char *dir = new_dir();
    QrError err;
    qr_error_clear(&err);
    memset(&gc, 0, sizeof gc);
    pthread_mutex_init(&gc.lock, NULL);
    pthread_mutex_init(&gc.mu, NULL);
    pthread_cond_init(&gc.cv, NULL);
    file_path(gc.path, dir, 1);
    cr_assert_eq(wal_open(dir, QR_FSYNC_COMMIT, 0, 1, &gc.w, &err), QR_OK, "%s", err.message);
    uint64_t syncs0 = wal_syncs(gc.w);
    qr_io_sync_hook_set(gc_hook, NULL);
    pthread_t th[GC_THREADS];
    for (int i = 0; i < GC_THREADS; i++)
        pthread_create(&th[i], NULL, gc_committer, (void *)(intptr_t)i);
    for (int i = 0; i < GC_THREADS; i++)
        pthread_join(th[i], NULL);
    qr_io_sync_hook_set(NULL, NULL);
    cr_assert_eq(gc.bad, 0, "a commit returned before a sync covered it");
    uint64_t syncs = wal_syncs(gc.w) - syncs0;
    cr_assert(syncs >= 1 && syncs <= 2, "%d commits took %" PRIu64 " syncs", GC_THREADS, syncs);
    cr_assert_eq(wal_acked_lsn(gc.w), GC_THREADS + 1);
    wal_close(gc.w);
    Seen s;
    WalReplayStats st;
    cr_assert_eq(replay(dir, 1, &s, &st, &err), QR_OK, "%s", err.message);
    cr_assert_eq(s.n, GC_THREADS);
    drop_dir(dir);
}

Test(wal, disk_full_acknowledges_nothing)
{
    char *dir = new_dir();
    WalWriter *w;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(wal_open(dir, QR_FSYNC_COMMIT, 0, 1, &w, &err), QR_OK);
    append_range(w, 1, 10, 3, 0);
    char p[600];
    file_path(p, dir, 1);
    uint64_t size = file_size(p);

    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = size + 100; /* the next commit gets half written */
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    static uint8_t big[4000];
    uint64_t lsn;
    cr_assert_eq(wal_append(w, 1, big, sizeof big, &lsn, &err), QR_OK);
    cr_assert_eq(lsn, 11);
    cr_assert_eq(wal_commit(w, &err), QR_EIO);
    cr_assert_not_null(strstr(err.message, "wal-0000000000000001.log"), "%s", err.message);
    cr_assert_eq(file_size(p), size, "the half-written commit is cut back");
    cr_assert_eq(wal_next_lsn(w), 11, "its lsns are handed out again");
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);

    append_range(w, 11, 12, 0, 0); /* the writer is still usable */
    wal_close(w);
    Seen s;
    WalReplayStats st;
    cr_assert_eq(replay(dir, 1, &s, &st, &err), QR_OK, "%s", err.message);
    cr_assert_eq(s.n, 12);
    cr_assert_eq(s.bad, 0);
    drop_dir(dir);
}

Test(wal, oversized_record)
{
    char *dir = new_dir();
    WalWriter *w;
    cr_assert_eq(wal_open(dir, QR_FSYNC_OFF, 0, 1, &w, NULL), QR_OK);
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(wal_append(w, 1, "", (size_t)WAL_MAX_PAYLOAD + 1, NULL, &err), QR_ELIMIT);
    cr_assert_eq(wal_next_lsn(w), 1);
    wal_close(w);
    drop_dir(dir);
}

/* One pass of open/append/rotate/drop/close/replay; returns the first error. */
static int wal_scenario(const char *dir, QrError *err)
{
    WalWriter *w;
    int rc = wal_open(dir, QR_FSYNC_OFF, 0, 1, &w, err);
    if (rc != QR_OK)
        return rc;
    uint8_t p[MAX_PAYLOAD];
    for (uint64_t lsn = 1; lsn <= 40 && rc == QR_OK; lsn++) {
        rc = wal_append(w, gen_type(lsn), p, gen_payload(lsn, p), NULL, err);
        if (rc == QR_OK && lsn % 4 == 0)
            rc = wal_commit(w, err);
        if (rc == QR_OK && lsn % 8 == 0)
            rc = wal_rotate(w, err);
    }
    if (rc == QR_OK)
        rc = wal_drop_before(w, 9, err);
    wal_close(w);
    if (rc != QR_OK)
        return rc;
    Seen s;
    memset(&s, 0, sizeof s);
    return wal_replay(dir, 1, WAL_REPLAY_RECOVER, check_cb, &s, NULL, err);
}

Test(wal, allocation_failure_sweep)
{
    int64_t n;
    for (n = 0; n < 10000; n++) {
        char *dir = new_dir();
        QrError err;
        qr_error_clear(&err);
        qr_mem_fail_after(n);
        int rc = wal_scenario(dir, &err);
        qr_mem_fail_after(-1);
        if (rc == QR_OK) {
            drop_dir(dir);
            break;
        }
        cr_assert_eq(rc, QR_ENOMEM, "n=%" PRId64 ": %s", n, err.message);
        cr_assert_eq(err.code, QR_ENOMEM);
        /* whatever is on disk replays */
        Seen s;
        WalReplayStats st;
        cr_assert_eq(replay(dir, 1, &s, &st, &err), QR_OK, "n=%" PRId64 ": %s", n, err.message);
        cr_assert_eq(s.bad, 0);
        drop_dir(dir);
    }
    cr_assert_gt(n, 5, "the sweep reached the allocations");
    cr_assert_lt(n, 10000);
    LEAK_CHECK();
}
