/*
 * sql_shell.c — `quarry sql`: run SQL against a data directory, from -c
 * arguments or from stdin, and print results as an aligned table (psql's
 * look), CSV or JSON lines.
 *
 * Layer: server/.  Calls query/sql.h, query/quarry.h, server/cli.h and the
 * base kit.
 *
 * Input: statements end with ';' at the end of a line (psql's rule); a
 * COPY ... FROM STDIN statement reads its data from the following stdin
 * lines up to a line "\." (or the end of input).  With -c the statements
 * come from the argument and COPY data from stdin.  Errors print in
 * PostgreSQL's layout with a caret and the shell goes on with the next
 * statement; the exit status is 1 if any statement failed.
 */
#include "server/sql_shell.h"
#include "query/sql.h"
#include "server/cli.h"
#include "server/http_int.h"
#include "store/mem.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum { FMT_TABLE, FMT_CSV, FMT_JSON } OutFmt;

typedef struct Shell {
    QrDb *db;
    QrSqlSession *sess;
    OutFmt fmt;
    FILE *in;        /* COPY data source */
    int failures;
} Shell;

/* ---- output ---- */

static bool type_is_num(QrSqlType t)
{
    switch (t) {
    case QR_SQL_INT2:
    case QR_SQL_INT4:
    case QR_SQL_INT8:
    case QR_SQL_FLOAT4:
    case QR_SQL_FLOAT8:
    case QR_SQL_NUMERIC:
    case QR_SQL_OID:
        return true;
    default:
        return false;
    }
}

/* One value as JSON: numbers and booleans native, the rest as strings. */
void sql_shell_json_value(QrBuf *b, const QrSqlSession *sess, const QrSqlValue *v)
{
    if (v->is_null) {
        qr_buf_append(b, "null", 4);
        return;
    }
    if (v->type == QR_SQL_BOOL) {
        qr_buf_printf(b, "%s", v->u.b ? "true" : "false");
        return;
    }
    QrBuf t;
    qr_buf_init(&t);
    qr_sql_session_value_text(sess, v, &t);
    bool num = type_is_num(v->type) && t.len > 0 && (isdigit(t.data[0]) || t.data[0] == '-') &&
               memchr(t.data, 'n', t.len) == NULL && memchr(t.data, 'N', t.len) == NULL;
    if (num)
        qr_buf_append(b, t.data, t.len);
    else
        jw_str(b, (const char *)t.data, t.len);
    qr_buf_free(&t);
}

static void print_json(const QrSqlSession *sess, const QrSqlResult *r)
{
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_append(&b, "{\"columns\":[", 12);
    for (int c = 0; c < r->n_cols; c++) {
        if (c)
            qr_buf_putc(&b, ',');
        qr_buf_append(&b, "{\"name\":", 8);
        jw_str(&b, r->cols[c].name, strlen(r->cols[c].name));
        qr_buf_printf(&b, ",\"type\":\"%s\"}", qr_sql_type_name(r->cols[c].type));
    }
    qr_buf_append(&b, "],\"rows\":[", 10);
    for (uint64_t i = 0; i < r->n_rows; i++) {
        qr_buf_append(&b, i ? ",[" : "[", i ? 2 : 1);
        for (int c = 0; c < r->n_cols; c++) {
            if (c)
                qr_buf_putc(&b, ',');
            sql_shell_json_value(&b, sess, &r->vals[i * (uint64_t)r->n_cols + c]);
        }
        qr_buf_putc(&b, ']');
    }
    qr_buf_append(&b, "],\"command\":", 12);
    jw_str(&b, r->tag, strlen(r->tag));
    qr_buf_append(&b, "}\n", 2);
    fwrite(b.data, 1, b.len, stdout);
    qr_buf_free(&b);
}

static void csv_field(FILE *f, const char *s, size_t n)
{
    bool q = n == 0;
    for (size_t i = 0; i < n && !q; i++)
        q = s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r';
    if (!q) {
        fwrite(s, 1, n, f);
        return;
    }
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"')
            fputc('"', f);
        fputc(s[i], f);
    }
    fputc('"', f);
}

static void print_csv(const QrSqlSession *sess, const QrSqlResult *r)
{
    for (int c = 0; c < r->n_cols; c++) {
        if (c)
            fputc(',', stdout);
        csv_field(stdout, r->cols[c].name, strlen(r->cols[c].name));
    }
    fputc('\n', stdout);
    QrBuf t;
    qr_buf_init(&t);
    for (uint64_t i = 0; i < r->n_rows; i++) {
        for (int c = 0; c < r->n_cols; c++) {
            const QrSqlValue *v = &r->vals[i * (uint64_t)r->n_cols + c];
            if (c)
                fputc(',', stdout);
            if (v->is_null)
                continue; /* NULL is the empty unquoted field; '' is quoted */
            t.len = 0;
            qr_sql_session_value_text(sess, v, &t);
            csv_field(stdout, (const char *)t.data, t.len);
        }
        fputc('\n', stdout);
    }
    qr_buf_free(&t);
}

/* Display width of UTF-8 text (code points). */
static size_t width(const char *s, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        w += ((unsigned char)s[i] & 0xC0) != 0x80;
    return w;
}

static void pad(size_t n)
{
    for (size_t i = 0; i < n; i++)
        fputc(' ', stdout);
}

static void print_table(const QrSqlSession *sess, const QrSqlResult *r)
{
    int nc = r->n_cols;
    uint64_t nr = r->n_rows;
    char **txt = qr_calloc((size_t)(nr * (uint64_t)nc) + 1, sizeof *txt);
    size_t *w = qr_calloc((size_t)nc + 1, sizeof *w);
    if (!txt || !w) {
        qr_free(txt);
        qr_free(w);
        fprintf(stderr, "quarry: out of memory printing the result\n");
        return;
    }
    for (int c = 0; c < nc; c++)
        w[c] = width(r->cols[c].name, strlen(r->cols[c].name));
    for (uint64_t i = 0; i < nr; i++)
        for (int c = 0; c < nc; c++) {
            const QrSqlValue *v = &r->vals[i * (uint64_t)nc + c];
            QrBuf t;
            qr_buf_init(&t);
            if (!v->is_null)
                qr_sql_session_value_text(sess, v, &t);
            qr_buf_putc(&t, 0);
            txt[i * (uint64_t)nc + c] = (char *)qr_buf_steal(&t, NULL);
            const char *s = txt[i * (uint64_t)nc + c];
            size_t ww = s ? width(s, strlen(s)) : 0;
            if (ww > w[c])
                w[c] = ww;
        }
    for (int c = 0; c < nc; c++) {
        size_t nw = width(r->cols[c].name, strlen(r->cols[c].name));
        size_t left = (w[c] - nw) / 2;
        fputs(c ? "| " : " ", stdout);
        pad(left);
        fputs(r->cols[c].name, stdout);
        pad(w[c] - nw - left);
        fputs(c + 1 < nc ? " " : "\n", stdout);
    }
    for (int c = 0; c < nc; c++) {
        fputs(c ? "+" : "", stdout);
        for (size_t k = 0; k < w[c] + 2; k++)
            fputc('-', stdout);
    }
    fputc('\n', stdout);
    for (uint64_t i = 0; i < nr; i++) {
        for (int c = 0; c < nc; c++) {
            const char *s = txt[i * (uint64_t)nc + c] ? txt[i * (uint64_t)nc + c] : "";
            size_t sw = width(s, strlen(s));
            fputs(c ? "| " : " ", stdout);
            if (type_is_num(r->cols[c].type)) {
                pad(w[c] - sw);
                fputs(s, stdout);
            } else {
                fputs(s, stdout);
                if (c + 1 < nc)
                    pad(w[c] - sw);
            }
            fputs(c + 1 < nc ? " " : "\n", stdout);
        }
    }
    printf("(%llu row%s)\n\n", (unsigned long long)nr, nr == 1 ? "" : "s");
    for (uint64_t i = 0; i < nr * (uint64_t)nc; i++)
        qr_free(txt[i]);
    qr_free(txt);
    qr_free(w);
}

static void print_result(Shell *sh, const QrSqlResult *r)
{
    for (int i = 0; i < r->n_notices; i++)
        fprintf(stderr, "%s:  %s\n", r->notices[i].severity, r->notices[i].message);
    if (r->kind == QR_SQL_RES_COPY_OUT && r->copy_format == QR_SQL_COPY_BINARY) {
        fprintf(stderr, "ERROR:  COPY TO STDOUT (FORMAT binary) is available over the "
                        "PostgreSQL port only\nHINT:  use FORMAT text or csv here\n");
        return;
    }
    if (r->kind == QR_SQL_RES_COPY_OUT) {
        QrBuf b;
        qr_buf_init(&b);
        qr_sql_copy_header(r, &b);
        for (uint64_t i = 0; i < r->n_rows; i++)
            qr_sql_copy_row(r, i, &b);
        fwrite(b.data, 1, b.len, stdout);
        qr_buf_free(&b);
        if (sh->fmt == FMT_TABLE)
            fprintf(stderr, "%s\n", r->tag);
        return;
    }
    if (r->kind == QR_SQL_RES_ROWS) {
        if (sh->fmt == FMT_JSON)
            print_json(sh->sess, r);
        else if (sh->fmt == FMT_CSV)
            print_csv(sh->sess, r);
        else
            print_table(sh->sess, r);
        return;
    }
    if (r->kind == QR_SQL_RES_COMMAND) {
        if (sh->fmt == FMT_JSON)
            print_json(sh->sess, r);
        else if (sh->fmt == FMT_TABLE)
            printf("%s\n", r->tag);
    }
}

/* ---- running ---- */

/* Feed COPY data from the input up to "\." or EOF. */
static int run_copy_in(Shell *sh, QrSqlResult **res, QrError *err)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = QR_OK;
    while ((n = getline(&line, &cap, sh->in)) > 0) {
        if ((n == 3 && !memcmp(line, "\\.\n", 3)) || (n == 2 && !memcmp(line, "\\.", 2)) ||
            (n == 4 && !memcmp(line, "\\.\r\n", 4)))
            break;
        if (rc == QR_OK)
            rc = qr_sql_copy_data(sh->sess, line, (size_t)n, err);
        /* after an error the rest of the data is read and dropped */
    }
    free(line);
    if (rc != QR_OK)
        return rc;
    return qr_sql_copy_done(sh->sess, res, err);
}

/* Run every statement of text; errors are printed. */
static void run_text(Shell *sh, const char *text, size_t len)
{
    QrError err;
    qr_error_clear(&err);
    QrSqlSpan *spans = NULL;
    int n = 0;
    if (qr_sql_split(text, len, &spans, &n, &err) != QR_OK) {
        char *q = qr_strndup(text, len);
        if (err.offset > 0)
            err.offset -= 1; /* the caret printer counts from 0 */
        cli_print_query_error(stderr, &err, q ? q : "");
        qr_free(q);
        sh->failures++;
        return;
    }
    for (int i = 0; i < n; i++) {
        const char *s = text + spans[i].offset;
        QrSqlResult *res = NULL;
        qr_error_clear(&err);
        int rc = qr_sql_exec(sh->sess, s, spans[i].len, &res, &err);
        if (rc == QR_OK && res && res->kind == QR_SQL_RES_COPY_IN) {
            qr_sql_result_free(res);
            res = NULL;
            rc = run_copy_in(sh, &res, &err);
        }
        if (rc != QR_OK) {
            char *q = qr_strndup(s, spans[i].len);
            if (err.offset > 0)
                err.offset -= 1;
            cli_print_query_error(stderr, &err, q ? q : "");
            qr_free(q);
            sh->failures++;
        } else if (res) {
            print_result(sh, res);
        }
        qr_sql_result_free(res);
        fflush(stdout);
    }
    qr_free(spans);
}

/* Does the buffer end a statement: last non-blank character ';' and the
 * text splits cleanly (not inside a string or comment)? */
static bool complete(const char *text, size_t len)
{
    while (len && isspace((unsigned char)text[len - 1]))
        len--;
    if (!len || text[len - 1] != ';')
        return false;
    QrSqlSpan *spans = NULL;
    int n = 0;
    QrError e;
    qr_error_clear(&e);
    int rc = qr_sql_split(text, len, &spans, &n, &e);
    qr_free(spans);
    /* an unterminated quote keeps reading; other syntax errors run now */
    return rc == QR_OK || !strstr(e.message, "unterminated");
}

static void run_stdin(Shell *sh)
{
    QrBuf buf;
    qr_buf_init(&buf);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        qr_buf_append(&buf, line, (size_t)n);
        if (complete((const char *)buf.data, buf.len)) {
            run_text(sh, (const char *)buf.data, buf.len);
            buf.len = 0;
        }
    }
    size_t k = 0;
    while (k < buf.len && isspace(buf.data[k]))
        k++;
    if (k < buf.len)
        run_text(sh, (const char *)buf.data, buf.len);
    free(line);
    qr_buf_free(&buf);
}

static int usage(void)
{
    fprintf(stderr, "usage: quarry sql [--data DIR] [-c 'SQL']... [--format table|csv|json]\n"
                    "  without -c, statements are read from stdin (end them with ';')\n");
    return 2;
}

int sql_shell_main(int argc, char **argv)
{
    const char *data = "./data";
    const char *cmds[64];
    int n_cmds = 0;
    Shell sh = {.fmt = FMT_TABLE, .in = stdin};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--data") && v) {
            data = v;
            i++;
        } else if (!strncmp(a, "--data=", 7)) {
            data = a + 7;
        } else if ((!strcmp(a, "-c") || !strcmp(a, "--command")) && v) {
            if (n_cmds == (int)(sizeof cmds / sizeof cmds[0]))
                return usage();
            cmds[n_cmds++] = v;
            i++;
        } else if (!strcmp(a, "--format") && v) {
            if (!strcmp(v, "table"))
                sh.fmt = FMT_TABLE;
            else if (!strcmp(v, "csv"))
                sh.fmt = FMT_CSV;
            else if (!strcmp(v, "json"))
                sh.fmt = FMT_JSON;
            else
                return usage();
            i++;
        } else {
            fprintf(stderr, "quarry sql: unexpected argument \"%s\"\n", a);
            return usage();
        }
    }
    QrError err;
    qr_error_clear(&err);
    QrDbOpts o;
    qr_db_opts_default(&o);
    if (qr_db_open(data, &o, &sh.db, &err) != QR_OK) {
        cli_print_error(stderr, &err);
        return 1;
    }
    if (qr_sql_session_new(sh.db, &sh.sess, &err) != QR_OK) {
        cli_print_error(stderr, &err);
        qr_db_close(sh.db);
        return 1;
    }
    if (n_cmds) {
        for (int i = 0; i < n_cmds; i++)
            run_text(&sh, cmds[i], strlen(cmds[i]));
    } else {
        run_stdin(&sh);
    }
    if (qr_sql_session_txn_status(sh.sess) != 'I')
        fprintf(stderr, "WARNING:  the open transaction block was rolled back at exit\n");
    qr_sql_session_free(sh.sess);
    qr_db_close(sh.db);
    return sh.failures ? 1 : 0;
}
