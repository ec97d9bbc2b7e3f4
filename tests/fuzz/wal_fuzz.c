/*
 * wal_fuzz.c — libFuzzer target for WAL recovery (src/store/wal.c) on damaged
 * log files.
 *
 * Byte 0 picks the mode:
 *   even  the rest of the input is written as the only log file;
 *   odd   a valid two-file log (written once at start-up with wal_open /
 *         wal_append / wal_commit / wal_rotate) is copied, then the input
 *         damages it: byte 1 picks the file, byte 2..5 a truncation length
 *         (0 = none), and the rest are (u32 offset, u8 xor) pairs.
 * Promises checked beyond "no crash, no leak, no hang":
 *   - records come out with strictly increasing lsns, none below from_lsn;
 *   - a READ replay changes no byte of any file;
 *   - damage in the last file is a torn tail that is cut, or (an intact
 *     record follows it) QR_ECORRUPT with the file untouched; a SALVAGE
 *     replay then succeeds; after either, replaying again returns the same
 *     records and cuts nothing (recovery is idempotent);
 *   - damage to the first of two files is QR_ECORRUPT, or replays every
 *     record unchanged when the bytes were not really changed;
 *   - an untouched valid log replays every record with its payload intact.
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "store/util.h"
#include "store/wal.h"

#define N_REC 40
static char valid_dir[600];
static char *valid_name[2];
static uint8_t *valid_bytes[2];
static size_t valid_len[2];
static int run_no;

static void payload_of(uint64_t i, uint8_t *out, size_t *n)
{
    *n = (size_t)(i * 7 % 61);
    for (size_t k = 0; k < *n; k++)
        out[k] = (uint8_t)(i * 31 + k);
}

static void read_file(const char *path, uint8_t **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    CHECK(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc((size_t)n + 1);
    CHECK(*data && fread(*data, 1, (size_t)n, f) == (size_t)n);
    *len = (size_t)n;
    fclose(f);
}

static void write_file(const char *dir, const char *name, const uint8_t *data, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f);
    CHECK(len == 0 || fwrite(data, 1, len, f) == len);
    fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    qr_log_set_level(QR_LOG_ERROR);
    snprintf(valid_dir, sizeof valid_dir, "%s/valid", fz_tmpdir());
    QrError e;
    qr_error_clear(&e);
    WalWriter *w = NULL;
    CHECK(wal_open(valid_dir, QR_FSYNC_OFF, 0, 1, &w, &e) == QR_OK);
    for (uint64_t i = 1; i <= N_REC; i++) {
        uint8_t p[64];
        size_t n;
        payload_of(i, p, &n);
        uint64_t lsn;
        CHECK(wal_append(w, (uint8_t)(i % 5), p, n, &lsn, &e) == QR_OK && lsn == i);
        if (i % 8 == 0)
            CHECK(wal_commit(w, &e) == QR_OK);
        if (i == N_REC / 2)
            CHECK(wal_rotate(w, &e) == QR_OK);
    }
    CHECK(wal_commit(w, &e) == QR_OK);
    wal_close(w);
    DIR *d = opendir(valid_dir);
    CHECK(d);
    struct dirent *de;
    int k = 0;
    char *names[8];
    while ((de = readdir(d)) != NULL)
        if (!strncmp(de->d_name, "wal-", 4) && k < 8)
            names[k++] = strdup(de->d_name);
    closedir(d);
    CHECK(k == 2);
    if (strcmp(names[0], names[1]) > 0) {
        char *t = names[0];
        names[0] = names[1];
        names[1] = t;
    }
    for (int i = 0; i < 2; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", valid_dir, names[i]);
        valid_name[i] = names[i];
        read_file(path, &valid_bytes[i], &valid_len[i]);
    }
    return 0;
}

typedef struct Seen {
    uint64_t n, last_lsn, from;
    uint64_t lsns[4096];
    uint32_t sums[4096];
    bool check_payload;
} Seen;

static int on_rec(void *arg, uint8_t type, uint64_t lsn, const uint8_t *p, size_t len)
{
    Seen *s = arg;
    CHECK(lsn > s->last_lsn || s->n == 0);
    CHECK(lsn >= s->from);
    s->last_lsn = lsn;
    uint32_t sum = type;
    for (size_t i = 0; i < len; i++)
        sum = sum * 31 + p[i];
    if (s->check_payload) {
        uint8_t want[64];
        size_t n;
        payload_of(lsn, want, &n);
        CHECK(type == lsn % 5 && len == n && memcmp(p, want, n) == 0);
    }
    if (s->n < 4096) {
        s->lsns[s->n] = lsn;
        s->sums[s->n] = sum;
    }
    s->n++;
    return 0;
}

static void clear_dir(const char *dir)
{
    QrError e;
    qr_error_clear(&e);
    (void)qr_remove_tree(dir, &e);
    CHECK(mkdir(dir, 0700) == 0);
}

/* Do the files hold exactly what was written? */
static bool files_are(const char *dir, const char *const *names, uint8_t *const *bytes,
                      const size_t *lens, int n)
{
    bool same = true;
    for (int i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        uint8_t *now;
        size_t now_len;
        read_file(path, &now, &now_len);
        same = same && now_len == lens[i] && (now_len == 0 || !memcmp(now, bytes[i], now_len));
        free(now);
    }
    return same;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char dir[700];
    snprintf(dir, sizeof dir, "%s/run%d", fz_tmpdir(), run_no++ % 4);
    clear_dir(dir);
    uint64_t from = 0;
    int damaged_file = -1;
    bool changed = false;
    static uint8_t *wrote[2]; /* what each file holds before any replay */
    static size_t wrote_len[2];
    const char *names[2] = {"wal-0000000000000001.log", NULL};
    int n_files = 1;
    for (int i = 0; i < 2; i++) {
        free(wrote[i]);
        wrote[i] = NULL;
    }
    if ((data[0] & 1) == 0) {
        wrote[0] = malloc(size);
        CHECK(wrote[0]);
        memcpy(wrote[0], data + 1, size - 1);
        wrote_len[0] = size - 1;
        from = data[0] >> 5;
    } else {
        FzIn in = {data + 1, size - 1, 0};
        damaged_file = (int)(fz_u8(&in) & 1);
        uint32_t cut = fz_u32(&in);
        n_files = 2;
        for (int i = 0; i < 2; i++) {
            size_t len = valid_len[i];
            uint8_t *copy = malloc(len + 1);
            CHECK(copy);
            memcpy(copy, valid_bytes[i], len);
            if (i == damaged_file) {
                if (cut && cut % (len + 1) < len) {
                    len = cut % (len + 1);
                    changed = true;
                }
                while (fz_left(&in) >= 5) {
                    uint32_t off = fz_u32(&in);
                    uint8_t x = (uint8_t)fz_u8(&in);
                    if (len)
                        copy[off % len] ^= x;
                }
                changed = changed || memcmp(copy, valid_bytes[i], len) != 0;
            }
            names[i] = valid_name[i];
            wrote[i] = copy;
            wrote_len[i] = len;
        }
    }
    for (int i = 0; i < n_files; i++)
        write_file(dir, names[i], wrote[i], wrote_len[i]);
    static Seen s0, s1, s2;
    QrError e;
    /* READ changes nothing, whatever it finds */
    memset(&s0, 0, sizeof s0);
    s0.from = from;
    s0.check_payload = damaged_file >= 0;
    qr_error_clear(&e);
    int rc0 = wal_replay(dir, from, WAL_REPLAY_READ, on_rec, &s0, NULL, &e);
    CHECK(files_are(dir, names, wrote, wrote_len, n_files));
    memset(&s1, 0, sizeof s1);
    s1.from = from;
    s1.check_payload = damaged_file >= 0;
    WalReplayStats st1 = {0};
    qr_error_clear(&e);
    int rc = wal_replay(dir, from, WAL_REPLAY_RECOVER, on_rec, &s1, &st1, &e);
    CHECK(rc == rc0 && s1.n == s0.n);
    if (damaged_file == 0 && !changed)
        CHECK(rc == QR_OK);
    if (damaged_file >= 0 && !changed)
        CHECK(s1.n == N_REC && st1.torn_bytes == 0);
    /* damage to an earlier file is reported, never silently skipped */
    if (damaged_file == 0 && rc == QR_OK)
        CHECK(s1.n == N_REC);
    if (rc != QR_OK) {
        CHECK(rc == QR_ECORRUPT || rc == QR_EUNSUPPORTED || rc == QR_ENOMEM);
        CHECK(e.message[0]);
        /* refused: RECOVER cut nothing */
        CHECK(files_are(dir, names, wrote, wrote_len, n_files));
        if (rc != QR_ECORRUPT)
            return 0;
        /* salvage keeps the log up to the damage */
        memset(&s1, 0, sizeof s1);
        s1.from = from;
        s1.check_payload = damaged_file >= 0;
        qr_error_clear(&e);
        rc = wal_replay(dir, from, WAL_REPLAY_SALVAGE, on_rec, &s1, &st1, &e);
        if (rc != QR_OK) {
            CHECK(rc == QR_ENOMEM);
            return 0;
        }
    }
    /* damage to the last file loses at most records of that file */
    if (damaged_file == 1)
        CHECK(s1.n >= N_REC / 2);
    /* replay again: the tail was cut or set aside, so the log is now clean */
    memset(&s2, 0, sizeof s2);
    s2.from = from;
    WalReplayStats st2 = {0};
    qr_error_clear(&e);
    CHECK(wal_replay(dir, from, WAL_REPLAY_RECOVER, on_rec, &s2, &st2, &e) == QR_OK);
    CHECK(st2.torn_bytes == 0 && st2.salvaged_bytes == 0);
    CHECK(s2.n == s1.n);
    for (uint64_t i = 0; i < s1.n && i < 4096; i++)
        CHECK(s1.lsns[i] == s2.lsns[i] && s1.sums[i] == s2.sums[i]);
    return 0;
}
