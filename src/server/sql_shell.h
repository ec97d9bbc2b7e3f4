/*
 * sql_shell.h — `quarry sql`: SQL from the command line or stdin.
 *
 * Layer: server/.
 */
#ifndef QR_SQL_SHELL_H
#define QR_SQL_SHELL_H

/* quarry sql [--data DIR] [-c SQL]... [--format table|csv|json]
 * Exit status: 0 ok, 1 some statement failed, 2 usage. */
int sql_shell_main(int argc, char **argv);

struct QrSqlValue;
struct QrBuf;
struct QrSqlSession;
/* One SQL value as JSON (shared with POST /sql): NULL null, booleans and
 * finite numbers native, everything else its PostgreSQL text as a string,
 * under the session's output settings (bytea_output); sess may be NULL. */
void sql_shell_json_value(struct QrBuf *b, const struct QrSqlSession *sess,
                          const struct QrSqlValue *v);

#endif
