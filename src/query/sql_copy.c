/*
 * sql_copy.c — the COPY text and CSV formats: an incremental reader that
 * turns input bytes (as the PG port's CopyData messages or the shell's
 * stdin deliver them) into rows with their line numbers, a row writer for
 * COPY ... TO STDOUT, and the COPY options.
 *
 * Layer: query/.  Calls the base kit and cJSON.
 *
 * Formats (PostgreSQL's, docs/sql.md):
 *   text  one row per line, fields split by the delimiter (tab), "\N" is
 *         NULL, backslash escapes \b \f \n \r \t \v \\ \ooo \xhh and
 *         "\<char>" = char; a line "\." ends the data.
 *   csv   fields split by the delimiter (','), optionally quoted with '"'
 *         (a doubled quote, or the escape character, inside quotes is a
 *         literal quote); quoted fields may span lines; an unquoted field
 *         equal to the NULL string ('' by default) is NULL, a quoted one
 *         never is; HEADER skips the first line.
 * A trailing "\r" before "\n" is dropped in both.
 */
#include "query/sql_w.h"
#include "store/mem.h"

#include <cJSON.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

void copy_fmt_init(CopyFmt *f, bool csv)
{
    memset(f, 0, sizeof *f);
    f->csv = csv;
    f->delim = csv ? ',' : '\t';
    f->quote = '"';
    f->escape = '"';
    snprintf(f->null_str, sizeof f->null_str, "%s", csv ? "" : "\\N");
}

void copy_reader_init(CopyReader *r, const CopyFmt *fmt, CopyRowFn fn, void *ctx)
{
    memset(r, 0, sizeof *r);
    r->fmt = *fmt;
    r->fn = fn;
    r->ctx = ctx;
    r->line = 1;
    qr_buf_init(&r->rec);
    qr_buf_init(&r->field);
}

void copy_reader_free(CopyReader *r)
{
    qr_buf_free(&r->rec);
    qr_buf_free(&r->field);
    qr_free(r->vals);
    qr_free(r->lens);
    r->vals = NULL;
    r->lens = NULL;
    r->cap_vals = 0;
}

/* Field offsets are collected while `field` may still move; they become
 * pointers once the record is complete. */
typedef struct FieldList {
    size_t *off;     /* owns */
    size_t *len;     /* owns */
    bool *is_null;   /* owns */
    int n, cap;
} FieldList;

/* A COPY record holds at most this many fields (PostgreSQL's most columns)
 * and bytes: a line of a billion delimiters, or one never ended, is refused
 * with its line number instead of growing until memory runs out. */
#define COPY_MAX_FIELDS 1600
#define COPY_MAX_RECORD ((size_t)256 << 20)

static int fl_push(FieldList *fl, size_t off, size_t len, bool is_null, QrError *err)
{
    if (fl->n >= COPY_MAX_FIELDS) {
        qr_error_set(err, QR_EINVAL, "extra data after last expected column");
        qr_error_detail(err, "a row has at most %d fields", COPY_MAX_FIELDS);
        qr_error_set_sqlstate(err, "22P04");
        return QR_EINVAL;
    }
    if (fl->n == fl->cap) {
        int cap = fl->cap ? fl->cap * 2 : 16;
        size_t *o = qr_realloc(fl->off, (size_t)cap * sizeof *o);
        if (o)
            fl->off = o;
        size_t *l = o ? qr_realloc(fl->len, (size_t)cap * sizeof *l) : NULL;
        if (l)
            fl->len = l;
        bool *b = l ? qr_realloc(fl->is_null, (size_t)cap * sizeof *b) : NULL;
        if (!b)
            return qr_error_set(err, QR_ENOMEM, "out of memory reading COPY data");
        fl->is_null = b;
        fl->cap = cap;
    }
    fl->off[fl->n] = off;
    fl->len[fl->n] = len;
    fl->is_null[fl->n] = is_null;
    fl->n++;
    return QR_OK;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decode one text-format field [p, p+n) into r->field. */
static void text_unescape(QrBuf *out, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c != '\\' || i + 1 == n) {
            qr_buf_putc(out, (uint8_t)c);
            continue;
        }
        c = p[++i];
        switch (c) {
        case 'b': qr_buf_putc(out, '\b'); break;
        case 'f': qr_buf_putc(out, '\f'); break;
        case 'n': qr_buf_putc(out, '\n'); break;
        case 'r': qr_buf_putc(out, '\r'); break;
        case 't': qr_buf_putc(out, '\t'); break;
        case 'v': qr_buf_putc(out, '\v'); break;
        case 'x':
            if (i + 1 < n && hexval((unsigned char)p[i + 1]) >= 0) {
                int v = hexval((unsigned char)p[++i]);
                if (i + 1 < n && hexval((unsigned char)p[i + 1]) >= 0)
                    v = v * 16 + hexval((unsigned char)p[++i]);
                qr_buf_putc(out, (uint8_t)v);
            } else {
                qr_buf_putc(out, 'x');
            }
            break;
        default:
            if (c >= '0' && c <= '7') {
                int v = c - '0';
                for (int k = 0; k < 2 && i + 1 < n && p[i + 1] >= '0' && p[i + 1] <= '7'; k++)
                    v = v * 8 + (p[++i] - '0');
                qr_buf_putc(out, (uint8_t)v);
            } else {
                qr_buf_putc(out, (uint8_t)c);
            }
        }
    }
}

static int split_text(CopyReader *r, const char *p, size_t n, FieldList *fl, QrError *err)
{
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] == '\\') {
            if (i + 1 < n)
                i++; /* the escaped byte is never a delimiter */
            continue;
        }
        if (i < n && p[i] != r->fmt.delim)
            continue;
        size_t flen = (i > n ? n : i) - start;
        const char *f = p + start;
        size_t nl = strlen(r->fmt.null_str);
        size_t off = r->field.len;
        int rc;
        if (flen == nl && memcmp(f, r->fmt.null_str, nl) == 0) {
            rc = fl_push(fl, off, 0, true, err);
        } else {
            text_unescape(&r->field, f, flen);
            rc = fl_push(fl, off, r->field.len - off, false, err);
        }
        qr_buf_putc(&r->field, 0);
        if (rc != QR_OK)
            return rc;
        start = i + 1;
    }
    return QR_OK;
}

static int split_csv(CopyReader *r, const char *p, size_t n, FieldList *fl, QrError *err)
{
    const CopyFmt *f = &r->fmt;
    size_t i = 0;
    for (;;) {
        size_t off = r->field.len;
        bool quoted = false;
        size_t raw_start = i;
        while (i < n && p[i] != f->delim) {
            if (p[i] == f->quote) {
                quoted = true;
                i++;
                for (;;) {
                    if (i >= n)
                        return qr_error_set(err, QR_ESYNTAX, "unterminated CSV quoted field");
                    if (p[i] == f->escape && i + 1 < n &&
                        (p[i + 1] == f->quote || (f->escape != f->quote && p[i + 1] == f->escape))) {
                        qr_buf_putc(&r->field, (uint8_t)p[i + 1]);
                        i += 2;
                        continue;
                    }
                    if (p[i] == f->quote) {
                        i++;
                        break;
                    }
                    qr_buf_putc(&r->field, (uint8_t)p[i++]);
                }
                continue;
            }
            qr_buf_putc(&r->field, (uint8_t)p[i++]);
        }
        size_t nl = strlen(f->null_str);
        bool is_null = !quoted && i - raw_start == nl &&
                       (nl == 0 || memcmp(p + raw_start, f->null_str, nl) == 0);
        if (is_null)
            r->field.len = off;
        int rc = fl_push(fl, off, r->field.len - off, is_null, err);
        qr_buf_putc(&r->field, 0);
        if (rc != QR_OK)
            return rc;
        if (i >= n)
            return QR_OK;
        i++; /* the delimiter: another field follows */
    }
}

/* One complete record in r->rec (without its newline). */
static int deliver(CopyReader *r, QrError *err)
{
    const char *p = r->rec.data ? (const char *)r->rec.data : ""; /* an empty first line */
    size_t n = r->rec.len;
    if (n && p[n - 1] == '\r')
        n--;
    if (n == 2 && p[0] == '\\' && p[1] == '.') {
        r->ended = true;
        return QR_OK;
    }
    if (r->fmt.header && !r->header_done) {
        r->header_done = true;
        return QR_OK;
    }
    FieldList fl = {0};
    r->field.len = 0;
    int rc = r->fmt.csv ? split_csv(r, p, n, &fl, err) : split_text(r, p, n, &fl, err);
    if (rc == QR_OK && !qr_buf_ok(&r->field))
        rc = qr_error_set(err, QR_ENOMEM, "out of memory reading COPY data");
    if (rc == QR_OK && fl.n > r->cap_vals) {
        char **v = qr_realloc(r->vals, (size_t)fl.n * sizeof *v);
        if (v)
            r->vals = v;
        size_t *l = v ? qr_realloc(r->lens, (size_t)fl.n * sizeof *l) : NULL;
        if (l) {
            r->lens = l;
            r->cap_vals = fl.n;
        } else {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory reading COPY data");
        }
    }
    if (rc == QR_OK) {
        for (int k = 0; k < fl.n; k++) {
            r->vals[k] = fl.is_null[k] ? NULL : (char *)r->field.data + fl.off[k];
            r->lens[k] = fl.len[k];
        }
        r->rows++;
        rc = r->fn(r->ctx, fl.n, r->vals, r->lens, r->line, err);
    }
    if (rc != QR_OK && err && err->line < 0)
        qr_error_pos(err, -1, r->line, -1);
    qr_free(fl.off);
    qr_free(fl.len);
    qr_free(fl.is_null);
    return rc;
}

int copy_reader_feed(CopyReader *r, const char *data, size_t len, QrError *err)
{
    size_t i = 0;
    while (i < len && !r->ended) {
        /* copy a run of bytes up to the next record end */
        size_t start = i;
        bool end = false;
        for (; i < len; i++) {
            char c = data[i];
            if (r->escaped) {
                /* the byte after a backslash (maybe in an earlier chunk) is data */
                r->escaped = false;
                if (c == '\n')
                    r->lines_seen++;
                continue;
            }
            if (c == '\n') {
                r->lines_seen++;
                if (!r->in_quote) {
                    end = true;
                    break;
                }
            } else if (r->fmt.csv && c == r->fmt.quote) {
                r->in_quote = !r->in_quote;
            } else if (!r->fmt.csv && c == '\\') {
                r->escaped = true; /* an escaped byte (even a newline) stays in the record */
            }
        }
        if (r->rec.len + (i - start) > COPY_MAX_RECORD) {
            qr_error_set(err, QR_ELIMIT, "COPY row is longer than %zu MB", COPY_MAX_RECORD >> 20);
            qr_error_set_sqlstate(err, "54000");
            qr_error_pos(err, -1, r->line, -1);
            return QR_ELIMIT;
        }
        qr_buf_append(&r->rec, data + start, i - start);
        if (!qr_buf_ok(&r->rec))
            return qr_error_set(err, QR_ENOMEM, "out of memory reading COPY data");
        if (!end)
            break;
        i++; /* the newline */
        int rc = deliver(r, err);
        r->rec.len = 0;
        r->line = r->lines_seen + 1;
        if (rc != QR_OK)
            return rc;
    }
    return QR_OK;
}

int copy_reader_finish(CopyReader *r, QrError *err)
{
    if (r->ended || r->rec.len == 0)
        return QR_OK;
    if (r->in_quote) {
        qr_error_set(err, QR_ESYNTAX, "unterminated CSV quoted field");
        qr_error_pos(err, -1, r->line, -1);
        qr_error_set_sqlstate(err, "22P04");
        return QR_ESYNTAX;
    }
    int rc = deliver(r, err);
    r->rec.len = 0;
    return rc;
}

/* ---- writing ---- */

static void write_text_field(QrBuf *out, const CopyFmt *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        const char *esc = NULL;
        switch (c) {
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\v': esc = "\\v"; break;
        default: break;
        }
        if (esc) {
            qr_buf_append(out, esc, 2);
        } else if (c == f->delim) {
            qr_buf_putc(out, '\\');
            qr_buf_putc(out, (uint8_t)c);
        } else {
            qr_buf_putc(out, (uint8_t)c);
        }
    }
}

static void write_csv_field(QrBuf *out, const CopyFmt *f, const char *s, size_t n)
{
    size_t nl = strlen(f->null_str);
    bool need = n == nl && memcmp(s, f->null_str, nl) == 0; /* never read back as NULL */
    if (n == 2 && s[0] == '\\' && s[1] == '.')
        need = true;
    for (size_t i = 0; i < n && !need; i++)
        need = s[i] == f->delim || s[i] == f->quote || s[i] == '\n' || s[i] == '\r';
    if (!need) {
        qr_buf_append(out, s, n);
        return;
    }
    qr_buf_putc(out, (uint8_t)f->quote);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == f->quote || s[i] == f->escape)
            qr_buf_putc(out, (uint8_t)f->escape);
        qr_buf_putc(out, (uint8_t)s[i]);
    }
    qr_buf_putc(out, (uint8_t)f->quote);
}

void copy_write_row(QrBuf *out, const CopyFmt *fmt, int n, const char *const *vals,
                    const size_t *lens)
{
    for (int i = 0; i < n; i++) {
        if (i)
            qr_buf_putc(out, (uint8_t)fmt->delim);
        if (!vals[i])
            qr_buf_append(out, fmt->null_str, strlen(fmt->null_str));
        else if (fmt->csv)
            write_csv_field(out, fmt, vals[i], lens[i]);
        else
            write_text_field(out, fmt, vals[i], lens[i]);
    }
    qr_buf_putc(out, '\n');
}

/* ---- options ---- */

/* The value of a DefElem as text ("true" when absent, as for HEADER). */
static const char *defelem_text(const cJSON *arg, char *tmp, size_t tmp_len)
{
    if (!arg)
        return "true";
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(arg, "String")))
        return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "sval"));
    if ((v = cJSON_GetObjectItemCaseSensitive(arg, "Boolean")))
        return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "boolval")) ? "true" : "false";
    if ((v = cJSON_GetObjectItemCaseSensitive(arg, "Integer"))) {
        snprintf(tmp, tmp_len, "%d",
                 (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(v, "ival")));
        return tmp;
    }
    return NULL;
}

static int one_char(const char *name, const char *v, char *out, QrError *err)
{
    if (!v || strlen(v) != 1 || v[0] == '\n' || v[0] == '\r')
        return qr_error_set(err, QR_EINVAL, "COPY %s must be a single one-byte character", name);
    *out = v[0];
    return QR_OK;
}

int copy_fmt_from_options(CopyFmt *f, const cJSON *options, QrError *err)
{
    /* the format decides the defaults of the others: find it first */
    bool csv = false, binary = false;
    const cJSON *o;
    cJSON_ArrayForEach(o, options)
    {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "DefElem");
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "defname"));
        if (name && !strcmp(name, "format")) {
            char tmp[32];
            const char *v = defelem_text(cJSON_GetObjectItemCaseSensitive(d, "arg"), tmp, sizeof tmp);
            if (v && !strcasecmp(v, "csv"))
                csv = true;
            else if (v && !strcasecmp(v, "binary"))
                binary = true;
            else if (!v || strcasecmp(v, "text") != 0)
                return qr_error_set(err, QR_EUNSUPPORTED, "COPY format \"%s\" is not supported",
                                    v ? v : "?");
        }
    }
    copy_fmt_init(f, csv);
    f->binary = binary;
    bool escape_set = false;
    cJSON_ArrayForEach(o, options)
    {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "DefElem");
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "defname"));
        char tmp[32];
        const char *v = defelem_text(cJSON_GetObjectItemCaseSensitive(d, "arg"), tmp, sizeof tmp);
        int rc = QR_OK;
        if (!name)
            return qr_error_set(err, QR_ESYNTAX, "malformed COPY option");
        if (!strcmp(name, "format")) {
            continue;
        } else if (binary && strcmp(name, "freeze") != 0) {
            qr_error_set(err, QR_ESYNTAX, "cannot specify %s in BINARY mode", name);
            qr_error_set_sqlstate(err, "42601");
            return QR_ESYNTAX;
        } else if (!strcmp(name, "header")) {
            if (v && (!strcasecmp(v, "true") || !strcasecmp(v, "on") || !strcmp(v, "1")))
                f->header = true;
            else if (v && (!strcasecmp(v, "false") || !strcasecmp(v, "off") || !strcmp(v, "0")))
                f->header = false;
            else
                return qr_error_set(err, QR_EINVAL, "COPY header requires a Boolean value");
            if (f->header && !f->csv)
                return qr_error_set(err, QR_EUNSUPPORTED,
                                    "COPY HEADER is available only in CSV mode");
        } else if (!strcmp(name, "delimiter")) {
            rc = one_char("delimiter", v, &f->delim, err);
        } else if (!strcmp(name, "quote")) {
            rc = csv ? one_char("quote", v, &f->quote, err)
                     : qr_error_set(err, QR_EUNSUPPORTED, "COPY quote available only in CSV mode");
        } else if (!strcmp(name, "escape")) {
            rc = csv ? one_char("escape", v, &f->escape, err)
                     : qr_error_set(err, QR_EUNSUPPORTED, "COPY escape available only in CSV mode");
            escape_set = true;
        } else if (!strcmp(name, "null")) {
            if (!v || strlen(v) >= sizeof f->null_str)
                return qr_error_set(err, QR_EINVAL, "COPY null string is too long");
            snprintf(f->null_str, sizeof f->null_str, "%s", v);
        } else if (!strcmp(name, "encoding")) {
            if (!v || (strcasecmp(v, "utf8") != 0 && strcasecmp(v, "utf-8") != 0))
                return qr_error_set(err, QR_EUNSUPPORTED, "COPY encoding \"%s\" is not supported",
                                    v ? v : "?");
        } else if (!strcmp(name, "freeze")) {
            /* pgbench -i: rows are visible once committed either way */
        } else {
            rc = qr_error_set(err, QR_EUNSUPPORTED, "COPY option \"%s\" is not supported", name);
        }
        if (rc != QR_OK)
            return rc;
    }
    if (!escape_set)
        f->escape = f->quote;
    if (f->csv && f->delim == f->quote)
        return qr_error_set(err, QR_EINVAL, "COPY delimiter and quote must be different");
    return QR_OK;
}

/* ======================================================================== */
/* COPY statements                                                           */
/* ======================================================================== */

#include <pg_query.h>

/* A COPY FROM STDIN in progress (SqluState.copy). */
struct CopyIn {
    QrArena *arena;       /* owns: the statement's lasting state */
    QrArena *row_arena;   /* owns: reset after every row */
    cJSON *body;          /* owns: {"relation", "cols"} for the insert */
    InsertCx *ic;         /* in arena */
    CopyReader rd;
    QrSqlSession *sess;   /* borrows */
    SqluState *st;        /* borrows */
    SqlValue *src;        /* n_target values (arena) */
    char rel[QR_NAME_MAX + 1];
    /* FORMAT binary (copy_binary_feed): */
    bool binary;
    QrBuf pend;           /* owns: bytes not yet parsed (a tuple may span chunks) */
    bool bin_started;     /* the signature and header were read */
    bool bin_ended;       /* the trailer (-1) was read */
    int64_t tuples;       /* tuples read: the "line" of an error */
};

void sqlw_copy_free(SqluState *st)
{
    struct CopyIn *c = st ? st->copy : NULL;
    if (!c)
        return;
    sqlw_release_all(c->sess);
    sqlw_insert_close(c->ic);
    copy_reader_free(&c->rd);
    qr_buf_free(&c->pend);
    cJSON_Delete(c->body);
    qr_arena_free(c->row_arena);
    qr_arena_free(c->arena);
    qr_free(c);
    st->copy = NULL;
}

/* One input row: text values into the insert. */
static int copy_row(void *ctx, int n, char **vals, size_t *lens, int64_t line, QrError *err)
{
    struct CopyIn *c = ctx;
    int want = sqlw_insert_n_target(c->ic);
    if (n != want) {
        qr_error_set(err, QR_ETYPE, "%s data for table \"%s\"",
                     n < want ? "missing" : "extra", c->rel);
        qr_error_detail(err, "line %lld has %d columns, %d expected", (long long)line, n, want);
        qr_error_set_sqlstate(err, "22P04");
        return QR_ETYPE;
    }
    for (int i = 0; i < n; i++) {
        c->src[i] = vals[i] ? (SqlValue){.type = QR_SQL_UNKNOWN, .u.s = {vals[i], lens[i]}}
                            : sqlv_null();
    }
    SqlCtx cx = {.sess = c->sess, .arena = c->row_arena, .err = err, .t0_ns = 0};
    int rc = sqlw_insert_values(&cx, c->st, c->ic, c->src);
    sql_ctx_done(&cx);
    qr_arena_reset(c->row_arena);
    if (rc != QR_OK && err && err->detail[0] == 0)
        qr_error_detail(err, "COPY %s, line %lld", c->rel, (long long)line);
    return rc;
}

/* "SELECT cols FROM table" as a parse node for COPY table TO STDOUT. */
static int table_query(SqlCtx *cx, const cJSON *b, cJSON **root, const cJSON **node)
{
    const cJSON *rv = sqlj_get(b, "relation");
    QrBuf q;
    qr_buf_init(&q);
    qr_buf_printf(&q, "SELECT ");
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, sqlj_get(b, "attlist"))
    {
        const char *c = sqlj_sval(it);
        if (!c || !qr_name_valid(c)) {
            qr_buf_free(&q);
            return sql_err_at(cx, -1, QR_ENOTFOUND, "42703", "column \"%s\" does not exist",
                              c ? c : "");
        }
        qr_buf_printf(&q, "%s\"%s\"", i++ ? ", " : "", c);
    }
    const char *rel = sqlj_str(rv, "relname");
    if (!rel || !qr_name_valid(rel)) {
        qr_buf_free(&q);
        return sql_err_at(cx, -1, QR_ENOTFOUND, "42P01", "relation \"%s\" does not exist",
                          rel ? rel : "");
    }
    qr_buf_printf(&q, "%s FROM \"%s\"", i ? "" : "*", rel);
    qr_buf_putc(&q, 0);
    if (!qr_buf_ok(&q))
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    int rc = sql_parse((const char *)q.data, q.len - 1, 0, root, cx->err);
    qr_buf_free(&q);
    if (rc)
        return rc;
    const cJSON *stmts = cJSON_GetObjectItemCaseSensitive(*root, "stmts");
    *node = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(stmts, 0), "stmt");
    return *node ? QR_OK : qr_error_set(cx->err, QR_ENOMEM, "out of memory");
}

static int copy_to(SqlCtx *cx, const cJSON *b, const CopyFmt *fmt, QrSqlResult *res)
{
    cJSON *root = NULL;
    const cJSON *node = sqlj_get(b, "query");
    int rc = QR_OK;
    if (!node)
        rc = table_query(cx, b, &root, &node);
    if (rc == QR_OK)
        rc = sql_query_run(cx, node, res);
    sqlj_delete(root);
    if (rc)
        return rc;
    res->kind = QR_SQL_RES_COPY_OUT;
    res->copy_format = fmt->binary ? QR_SQL_COPY_BINARY
                       : fmt->csv  ? QR_SQL_COPY_CSV
                                   : QR_SQL_COPY_TEXT;
    res->copy_delim = fmt->delim;
    res->copy_header = fmt->header;
    res->copy_null = qr_arena_strndup(cx->arena, fmt->null_str, strlen(fmt->null_str));
    res->copy_relation = sqlj_str(sqlj_get(b, "relation"), "relname");
    snprintf(res->tag, sizeof res->tag, "COPY %llu", (unsigned long long)res->n_rows);
    return QR_OK;
}

int sqlw_copy_exec(SqlCtx *cx, SqluState *st, const cJSON *b, QrSqlResult *res)
{
    CopyFmt fmt;
    int rc = copy_fmt_from_options(&fmt, sqlj_get(b, "options"), cx->err);
    if (rc)
        return rc;
    if (sqlj_get(b, "filename") || sqlj_bool(b, "is_program"))
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                          "COPY to or from a file is not supported: use STDIN / STDOUT (psql's "
                          "\\copy reads the file on the client)");
    if (!sqlj_bool(b, "is_from"))
        return copy_to(cx, b, &fmt, res);
    if (sqlj_get(b, "whereClause"))
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000", "COPY FROM ... WHERE is not supported");
    struct CopyIn *c = qr_calloc(1, sizeof *c);
    if (!c)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    st->copy = c;
    c->sess = cx->sess;
    c->st = st;
    c->arena = qr_arena_new(0);
    c->row_arena = qr_arena_new(0);
    c->body = cJSON_CreateObject();
    snprintf(c->rel, sizeof c->rel, "%s", sqlj_str(sqlj_get(b, "relation"), "relname") ?: "");
    if (!c->arena || !c->row_arena || !c->body ||
        !cJSON_AddItemToObject(c->body, "relation",
                               cJSON_Duplicate(sqlj_get(b, "relation"), true))) {
        sqlw_copy_free(st);
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    }
    if (sqlj_get(b, "attlist"))
        cJSON_AddItemToObject(c->body, "cols", cJSON_Duplicate(sqlj_get(b, "attlist"), true));
    /* the insert state outlives this statement's arena */
    SqlCtx cc = *cx;
    cc.arena = c->arena;
    rc = sqlw_insert_open(&cc, c->body, &c->ic);
    sql_ctx_done(&cc);
    if (rc == QR_OK) {
        c->src = qr_arena_calloc(c->arena, (size_t)(sqlw_insert_n_target(c->ic) + 1) *
                                               sizeof *c->src);
        if (!c->src)
            rc = qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    }
    if (rc) {
        sqlw_copy_free(st);
        return rc;
    }
    copy_reader_init(&c->rd, &fmt, copy_row, c);
    /* describe the target columns for CopyInResponse */
    SqlScope *sc;
    QrTable *t;
    if (sqlw_table(cx, sqlj_get(b, "relation"), &t) == QR_OK &&
        sql_table_scope(cx, t, NULL, &sc) == QR_OK) {
        int n = sqlw_insert_n_target(c->ic);
        res->cols = qr_arena_calloc(cx->arena, (size_t)(n + 1) * sizeof *res->cols);
        res->n_cols = res->cols ? n : 0;
    }
    res->kind = QR_SQL_RES_COPY_IN;
    c->binary = fmt.binary;
    res->copy_format = fmt.binary ? QR_SQL_COPY_BINARY
                       : fmt.csv  ? QR_SQL_COPY_CSV
                                  : QR_SQL_COPY_TEXT;
    res->copy_delim = fmt.delim;
    res->copy_header = fmt.header;
    res->copy_null = qr_arena_strndup(cx->arena, fmt.null_str, strlen(fmt.null_str));
    res->copy_relation = qr_arena_strndup(cx->arena, c->rel, strlen(c->rel));
    snprintf(res->tag, sizeof res->tag, "COPY");
    return QR_OK;
}

bool sqlu_copy_active(const QrSqlSession *s)
{
    const SqluState *st = s->u_state;
    return st && st->copy;
}

/* End the COPY with an error: the statement's rows are dropped and a
 * transaction block turns failed. */
static void copy_abort(QrSqlSession *s, SqluState *st)
{
    sqlw_copy_free(st);
    txn_stmt_fail(st);
    if (st->in_block)
        s->txn_status = 'E';
}

/* ---- FORMAT binary input ----
 *
 * PostgreSQL's binary COPY format: the 11-byte signature "PGCOPY\n\377\r\n\0",
 * flags:i32 (bit 16 = OIDs, refused), extension length:i32 and that many
 * bytes; then tuples of  n_fields:i16  (len:i32 bytes | -1 for NULL)*, each
 * value in its type's send format (the target column's type); the trailer
 * is n_fields = -1.  Integers are big-endian.  Input ending on a tuple
 * boundary without the trailer is accepted, as PostgreSQL does. */

static const uint8_t COPY_SIG[11] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xFF, '\r', '\n', 0};

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int bin_bad(struct CopyIn *c, QrError *err, const char *what)
{
    qr_error_set(err, QR_EINVAL, "%s", what);
    qr_error_set_sqlstate(err, "22P04");
    qr_error_pos(err, -1, c->tuples + 1, -1);
    return QR_EINVAL;
}

/* Parse every complete part of c->pend; keep the rest for the next chunk. */
static int copy_binary_feed(struct CopyIn *c, const char *data, size_t len, QrError *err)
{
    qr_buf_append(&c->pend, data, len);
    if (!qr_buf_ok(&c->pend))
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    const uint8_t *p = c->pend.data, *end = p + c->pend.len;
    int rc = QR_OK;
    if (!c->bin_started) {
        if (end - p < 19)
            return QR_OK;
        if (memcmp(p, COPY_SIG, sizeof COPY_SIG) != 0)
            return bin_bad(c, err, "COPY file signature not recognized");
        if (be32(p + 11) & (1u << 16))
            return bin_bad(c, err, "COPY with OIDs is not supported");
        uint32_t ext = be32(p + 15);
        if ((size_t)(end - p) < 19 + (size_t)ext)
            return QR_OK;
        p += 19 + ext;
        c->bin_started = true;
    }
    int want = sqlw_insert_n_target(c->ic);
    while (rc == QR_OK && p < end) {
        if (c->bin_ended)
            return bin_bad(c, err, "received copy data after EOF marker");
        if (end - p < 2)
            break;
        int16_t nf = (int16_t)(p[0] << 8 | p[1]);
        if (nf == -1) {
            c->bin_ended = true;
            p += 2;
            continue;
        }
        if (nf != want) {
            bin_bad(c, err, "row field count does not match the target columns");
            qr_error_detail(err, "tuple %lld has %d fields, %d expected", (long long)c->tuples + 1,
                            nf, want);
            return err->code;
        }
        /* is the whole tuple here? */
        const uint8_t *q = p + 2;
        bool whole = true;
        for (int i = 0; i < nf && whole; i++) {
            if (end - q < 4) {
                whole = false;
                break;
            }
            int32_t fl = (int32_t)be32(q);
            q += 4;
            if (fl < -1)
                return bin_bad(c, err, "invalid field size");
            if (fl > 0 && end - q < fl)
                whole = false;
            else if (fl > 0)
                q += fl;
        }
        if (!whole)
            break;
        c->tuples++;
        SqlCtx cx = {.sess = c->sess, .arena = c->row_arena, .err = err};
        q = p + 2;
        for (int i = 0; i < nf && rc == QR_OK; i++) {
            int32_t fl = (int32_t)be32(q);
            q += 4;
            rc = sql_param_decode(&cx, sqlw_insert_target_type(c->ic, i),
                                  fl < 0 ? NULL : (const char *)q, fl < 0 ? 0 : fl, 1, &c->src[i]);
            q += fl > 0 ? fl : 0;
        }
        if (rc == QR_OK)
            rc = sqlw_insert_values(&cx, c->st, c->ic, c->src);
        sql_ctx_done(&cx);
        qr_arena_reset(c->row_arena);
        if (rc != QR_OK && err->line < 0)
            qr_error_pos(err, -1, c->tuples, -1);
        p = q;
    }
    size_t used = (size_t)(p - (const uint8_t *)c->pend.data);
    memmove(c->pend.data, c->pend.data + used, c->pend.len - used);
    c->pend.len -= used;
    return rc;
}

int sqlu_copy_data(QrSqlSession *s, const char *data, size_t len, QrError *err)
{
    SqluState *st = s->u_state;
    if (!st || !st->copy)
        return qr_error_set(err, QR_EINVAL, "no COPY is in progress");
    int rc = st->copy->binary ? copy_binary_feed(st->copy, data, len, err)
                              : copy_reader_feed(&st->copy->rd, data, len, err);
    if (rc)
        copy_abort(s, st);
    return rc;
}

int sqlu_copy_done(QrSqlSession *s, QrSqlResult *res, QrError *err)
{
    SqluState *st = s->u_state;
    if (!st || !st->copy)
        return qr_error_set(err, QR_EINVAL, "no COPY is in progress");
    struct CopyIn *c = st->copy;
    int rc = !c->binary               ? copy_reader_finish(&c->rd, err)
             : c->pend.len > 0        ? bin_bad(c, err, "unexpected EOF in COPY data")
             : !c->bin_started        ? bin_bad(c, err, "COPY file signature not recognized")
                                      : QR_OK;
    uint64_t n = sqlw_insert_count(st->copy->ic);
    if (rc) {
        copy_abort(s, st);
        return rc;
    }
    sqlw_copy_free(st);
    rc = txn_stmt_end(s, st, err);
    if (rc) {
        txn_stmt_fail(st);
        if (st->in_block)
            s->txn_status = 'E';
        return rc;
    }
    res->kind = QR_SQL_RES_COMMAND;
    snprintf(res->tag, sizeof res->tag, "COPY %llu", (unsigned long long)n);
    return QR_OK;
}

void sqlu_copy_fail(QrSqlSession *s, const char *message)
{
    (void)message;
    SqluState *st = s->u_state;
    if (st && st->copy)
        copy_abort(s, st);
}
