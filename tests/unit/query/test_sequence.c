/*
 * test_sequence.c — durable sequences (query/sequence.h): values against a
 * model (ascending, descending, CYCLE, bounds), setval, and kill -9: a child
 * process draws values and reports each one through a pipe the moment it has
 * it; the parent kills it at a random point, then a fresh process (the
 * registry is per process) must hand out only values above every reported
 * one, and never one twice.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine_util.h"
#include "query/sequence.h"
#include "store/util.h"

static int64_t next(const char *dir, const char *name)
{
    QrError err;
    qr_error_clear(&err);
    int64_t v = 0;
    cr_assert_eq(seq_next(dir, name, &v, &err), QR_OK, "%s", err.message);
    return v;
}

Test(sequence, values_follow_the_definition)
{
    char *dir = eu_tmpdir("seq");
    QrError err;
    qr_error_clear(&err);
    SeqDef d;
    seq_def_init(&d, "int8", 1);
    cr_assert_eq(seq_create(dir, "up", &d, &err), QR_OK, "%s", err.message);
    for (int64_t i = 1; i <= 100; i++)
        cr_assert_eq(next(dir, "up"), i);
    seq_def_init(&d, "int4", -3);
    d.start = 10;
    d.min = -5;
    d.max = 10;
    d.cycle = true;
    cr_assert_eq(seq_create(dir, "down", &d, &err), QR_OK, "%s", err.message);
    /* the model: 10, 7, 4, 1, -2, -5, then wrap to max */
    int64_t model = 10;
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(next(dir, "down"), model, "step %d", i);
        model = model - 3 < -5 ? 10 : model - 3;
    }
    seq_def_init(&d, "int2", 1);
    d.max = 3;
    cr_assert_eq(seq_create(dir, "small", &d, &err), QR_OK, "%s", err.message);
    for (int64_t i = 1; i <= 3; i++)
        cr_assert_eq(next(dir, "small"), i);
    int64_t v;
    cr_assert_eq(seq_next(dir, "small", &v, &err), QR_ELIMIT, "past MAXVALUE without CYCLE");
    cr_assert_str_eq(qr_error_sqlstate(&err), "2200H");
    /* setval: is_called false returns the value itself next */
    qr_error_clear(&err);
    cr_assert_eq(seq_set(dir, "up", 500, false, &err), QR_OK, "%s", err.message);
    cr_assert_eq(next(dir, "up"), 500);
    cr_assert_eq(seq_set(dir, "up", 900, true, &err), QR_OK, "%s", err.message);
    cr_assert_eq(next(dir, "up"), 901);
    cr_assert_eq(seq_set(dir, "small", 99, true, &err), QR_EINVAL, "setval out of bounds");
    qr_error_clear(&err);
    cr_assert_eq(seq_create(dir, "up", &d, &err), QR_EEXISTS);
    qr_error_clear(&err);
    seq_def_init(&d, "int8", 1);
    d.start = 0;
    cr_assert_eq(seq_create(dir, "bad", &d, &err), QR_EINVAL, "START below MINVALUE");
    qr_error_clear(&err);
    char **names;
    int n;
    cr_assert_eq(seq_list(dir, &names, &n, &err), QR_OK);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(names[0], "down");
    cr_assert_str_eq(names[1], "small");
    cr_assert_str_eq(names[2], "up");
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    cr_assert_eq(seq_drop(dir, "up", &err), QR_OK);
    cr_assert_eq(seq_next(dir, "up", &v, &err), QR_ENOTFOUND);
    eu_rmtree(dir);
    free(dir);
}

/* Draw values in a child until killed, writing each to `fd` as it comes. */
static void child_draw(const char *dir, const char *name, int fd)
{
    for (;;) {
        QrError err;
        qr_error_clear(&err);
        int64_t v;
        if (seq_next(dir, name, &v, &err) != QR_OK)
            _exit(2);
        if (write(fd, &v, sizeof v) != (ssize_t)sizeof v)
            _exit(3);
    }
}

/* The values a killed child reported (the last one may be cut short). */
static int64_t drain(int fd, int64_t *count)
{
    int64_t v, top = 0;
    *count = 0;
    while (read(fd, &v, sizeof v) == (ssize_t)sizeof v) {
        if (v > top)
            top = v;
        (*count)++;
    }
    return top;
}

Test(sequence, kill_9_never_hands_a_value_out_twice)
{
    qr_log_set_level(QR_LOG_ERROR);
    char *dir = eu_tmpdir("seqcrash");
    QrError err;
    qr_error_clear(&err);
    SeqDef d;
    seq_def_init(&d, "int8", 1);
    cr_assert_eq(seq_create(dir, "s", &d, &err), QR_OK, "%s", err.message);
    d.internal = true; /* a row id's sequence reserves more per write */
    cr_assert_eq(seq_create(dir, "rowid", &d, &err), QR_OK, "%s", err.message);
    uint64_t rng = 7;
    for (int round = 0; round < 6; round++) {
        const char *name = round % 2 ? "rowid" : "s";
        int p[2];
        cr_assert_eq(pipe(p), 0);
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            child_draw(dir, name, p[1]);
        }
        close(p[1]);
        /* let it hand out some values, then kill -9 at a random moment */
        int64_t first;
        cr_assert_eq(read(p[0], &first, sizeof first), (ssize_t)sizeof first, "child drew nothing");
        usleep((useconds_t)(eu_below(&rng, 20000) + 1000));
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        cr_assert(WIFSIGNALED(status), "the child died of the kill, not by itself (%d)", status);
        int64_t count;
        int64_t top = drain(p[0], &count);
        close(p[0]);
        if (first > top)
            top = first;
        /* what a restart sees: nothing in memory, the file alone */
        seq_forget_all();
        int64_t v = next(dir, name);
        cr_assert_gt(v, top, "round %d (%s): after kill -9 the next value (%lld) must exceed %lld "
                     "(the child reported %lld values)",
                     round, name, (long long)v, (long long)top, (long long)count);
    }
    eu_rmtree(dir);
    free(dir);
}
