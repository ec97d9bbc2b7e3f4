/*
 * serve.h — `quarry serve`: run the HTTP API and admin page over one data
 * directory until SIGTERM / SIGINT.
 *
 * Layer: server/.
 */
#ifndef QR_SERVE_H
#define QR_SERVE_H

/* argv holds the arguments after "serve".  Exit status: 0 after a clean
 * shutdown, 1 on an error (logged), 2 on a usage error. */
int cmd_serve(int argc, char **argv);

/* `quarry user add NAME [--role read-write|read-only] --data DIR` (the
 * password is read from stdin, one line), `quarry user remove NAME`,
 * `quarry user list`: the PostgreSQL port's SCRAM users (pgwire_user.c).
 * Exit status as cmd_serve. */
int cmd_user(int argc, char **argv);

#endif
