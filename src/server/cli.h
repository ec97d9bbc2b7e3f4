/*
 * cli.h — terminal output helpers of the `quarry` command: errors in
 * PostgreSQL's layout (ERROR / DETAIL / HINT, a caret under the query
 * position) and snippets with terminal highlighting.
 *
 * Layer: server/.  Calls the base kit.
 */
#ifndef QR_CLI_H
#define QR_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "store/error.h"

void cli_print_error(FILE *f, const QrError *e);
/* Like cli_print_error, plus the query with a caret under the position. */
void cli_print_query_error(FILE *f, const QrError *e, const char *query);
/* A snippet with <b>...</b> markers: bold on a terminal, **...** otherwise. */
void cli_print_snippet(FILE *f, const char *snippet, bool tty);

#endif
