/*
 * cli.c — terminal output helpers (see cli.h).
 * Layer: server/.
 */
#include "server/cli.h"

#include <cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int cli_key_json(const char *id, QrBuf *out, QrError *err)
{
    size_t n = strlen(id);
    size_t i = id[0] == '-' ? 1 : 0;
    bool digits = n > i;
    for (size_t k = i; k < n; k++)
        if (id[k] < '0' || id[k] > '9')
            digits = false;
    if (digits) {
        errno = 0;
        long long v = strtoll(id, NULL, 10);
        if (errno == ERANGE) {
            qr_error_set(err, QR_EINVAL, "document id %.40s is out of the integer range", id);
            qr_error_hint(err, "a string key made of digits is written in quotes: \"%.40s\"", id);
            return QR_EINVAL;
        }
        qr_buf_printf(out, "%lld", v);
        return QR_OK;
    }
    cJSON *v = NULL;
    if (id[0] == '"') {
        v = cJSON_ParseWithLength(id, n);
        if (!cJSON_IsString(v)) {
            cJSON_Delete(v);
            qr_error_set(err, QR_EINVAL, "document id %.60s is not a valid JSON string", id);
            qr_error_hint(err, "quote a string id only to keep digits a string: \"0042\"");
            return QR_EINVAL;
        }
    } else {
        v = cJSON_CreateString(id);
    }
    char *text = v ? cJSON_PrintUnformatted(v) : NULL;
    cJSON_Delete(v);
    if (!text)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    qr_buf_append(out, text, strlen(text));
    cJSON_free(text);
    return qr_buf_ok(out) ? QR_OK : qr_error_set(err, QR_ENOMEM, "out of memory");
}

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
