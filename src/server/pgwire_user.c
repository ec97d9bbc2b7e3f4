/*
 * pgwire_user.c — `quarry user add|remove|list`: the SCRAM-SHA-256 users of
 * the PostgreSQL port, kept in <data>/pg_users.json (server/scram.h).
 *
 * Layer: server/.  Calls server/scram.h and the base kit.
 *
 * The password is read from stdin (one line; the newline is dropped) so it
 * never shows in the process list or the shell history:
 *
 *   printf '%s\n' "$PW" | quarry user add alice --data ./data
 */
#include "server/scram.h"
#include "server/serve.h"
#include "store/util.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void user_usage(void)
{
    fprintf(stderr, "usage: quarry user add NAME [--role read-write|read-only] [--data DIR]\n"
                    "       quarry user remove NAME [--data DIR]\n"
                    "       quarry user list [--data DIR]\n"
                    "  add reads the password from stdin (one line)\n");
}

int cmd_user(int argc, char **argv)
{
    const char *verb = NULL, *name = NULL, *data = "./data", *role = "read-write";
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "--data") || !strcmp(a, "--role")) && i + 1 < argc) {
            if (a[2] == 'd')
                data = argv[++i];
            else
                role = argv[++i];
        } else if (!strncmp(a, "--data=", 7)) {
            data = a + 7;
        } else if (!strncmp(a, "--role=", 7)) {
            role = a + 7;
        } else if (a[0] == '-') {
            fprintf(stderr, "quarry user: unknown option %s\n", a);
            user_usage();
            return 2;
        } else if (!verb) {
            verb = a;
        } else if (!name) {
            name = a;
        } else {
            fprintf(stderr, "quarry user: unexpected argument \"%s\"\n", a);
            user_usage();
            return 2;
        }
    }
    if (!verb) {
        user_usage();
        return 2;
    }
    QrError err;
    qr_error_clear(&err);
    if (!strcmp(verb, "list")) {
        ScramUsers u;
        if (scram_users_load(data, &u, &err) != QR_OK) {
            fprintf(stderr, "quarry user: %s\n", err.message);
            return 1;
        }
        for (int i = 0; i < u.n; i++)
            printf("%s\t%s\n", u.users[i].name,
                   u.users[i].role == SCRAM_ROLE_READ_ONLY ? "read-only" : "read-write");
        scram_users_free(&u);
        return 0;
    }
    if (!name || (strcmp(verb, "add") != 0 && strcmp(verb, "remove") != 0)) {
        user_usage();
        return 2;
    }
    if (!strcmp(verb, "remove")) {
        if (scram_users_remove(data, name, &err) != QR_OK) {
            fprintf(stderr, "quarry user: %s\n", err.message);
            return 1;
        }
        printf("removed user %s\n", name);
        return 0;
    }
    ScramRole r;
    if (!strcmp(role, "read-write"))
        r = SCRAM_ROLE_READ_WRITE;
    else if (!strcmp(role, "read-only"))
        r = SCRAM_ROLE_READ_ONLY;
    else {
        fprintf(stderr, "quarry user: --role must be read-write or read-only\n");
        return 2;
    }
    if (isatty(STDIN_FILENO))
        fprintf(stderr, "password for %s: ", name);
    char pw[1024];
    if (!fgets(pw, sizeof pw, stdin)) {
        fprintf(stderr, "quarry user: no password on stdin\n");
        return 1;
    }
    pw[strcspn(pw, "\r\n")] = 0;
    if (qr_mkdir_p(data, &err) != QR_OK ||
        scram_users_put(data, name, pw, r, &err) != QR_OK) {
        memset(pw, 0, sizeof pw);
        fprintf(stderr, "quarry user: %s\n", err.message);
        if (err.hint[0])
            fprintf(stderr, "hint: %s\n", err.hint);
        return 1;
    }
    memset(pw, 0, sizeof pw);
    printf("user %s (%s) saved in %s/%s\n", name, role, data, SCRAM_USERS_FILE);
    return 0;
}
