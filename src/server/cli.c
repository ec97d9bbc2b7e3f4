/*
 * cli.c — terminal output helpers (see cli.h).
 * Layer: server/.
 */
#include "server/cli.h"

#include <string.h>

void cli_print_error(FILE *f, const QrError *e)
{
    fprintf(f, "ERROR:  %s\n", e->message[0] ? e->message : qr_code_name(e->code));
    if (e->line > 0 && !strstr(e->message, "line "))
        fprintf(f, "LINE %lld\n", (long long)e->line);
    if (e->detail[0])
        fprintf(f, "DETAIL:  %s\n", e->detail);
    if (e->hint[0])
        fprintf(f, "HINT:  %s\n", e->hint);
}

void cli_print_query_error(FILE *f, const QrError *e, const char *query)
{
    cli_print_error(f, e);
    if (e->offset < 0 || !query)
        return;
    size_t n = strlen(query);
    if ((size_t)e->offset > n)
        return;
    fprintf(f, "QUERY:  %s\n", query);
    fprintf(f, "        ");
    /* count display columns: one per UTF-8 lead byte */
    for (int64_t i = 0; i < e->offset; i++)
        if (((unsigned char)query[i] & 0xC0) != 0x80)
            fputc(' ', f);
    fputs("^\n", f);
}

void cli_print_snippet(FILE *f, const char *s, bool tty)
{
    fputs("      ", f);
    while (*s) {
        if (!strncmp(s, "<b>", 3)) {
            fputs(tty ? "\033[1m" : "**", f);
            s += 3;
        } else if (!strncmp(s, "</b>", 4)) {
            fputs(tty ? "\033[0m" : "**", f);
            s += 4;
        } else if (*s == '\n') {
            fputc(' ', f);
            s++;
        } else {
            fputc(*s++, f);
        }
    }
    fputc('\n', f);
}
