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

#include "store/buf.h"
#include "store/error.h"

void cli_print_error(FILE *f, const QrError *e);
/* Like cli_print_error, plus the query with a caret under the position. */
void cli_print_query_error(FILE *f, const QrError *e, const char *query);
/* A document key as typed (a URL path segment or a command-line word) to
 * the JSON text the engine's documents are keyed by, one rule for HTTP and
 * the CLI: digits (with an optional minus) are an integer key, "quoted" is
 * a JSON string (to keep digits a string: "0042"), anything else is the
 * string itself ("0ad-data", "12abc").  A key is never a prefix of the
 * text.  QR_EINVAL for an integer out of range or bad quoting. */
int cli_key_json(const char *id, QrBuf *out, QrError *err);
/* A snippet with <b>...</b> markers: bold on a terminal, **...** otherwise. */
void cli_print_snippet(FILE *f, const char *snippet, bool tty);

#endif
