/*
 * pgwire_query.c — the PostgreSQL query protocols over one connection:
 * simple Query (many statements per message), the extended protocol
 * (Parse, Bind, Describe, Execute with row limits, Close, Sync, Flush;
 * named and unnamed statements and portals), COPY FROM STDIN and COPY TO
 * STDOUT and notices.
 *
 * Layer: server/.  Calls query/sql.h and the base kit.
 *
 * Error flow, as PostgreSQL: in a simple Query an error ends the message
 * (the statements after it do not run) and ReadyForQuery follows; in the
 * extended protocol an error makes the connection skip every message up to
 * the next Sync, which answers ReadyForQuery.  The SQL session tracks the
 * transaction ('E' after an error inside BEGIN ... until ROLLBACK).
 *
 * Portals run at their first Execute: the statement executes and its
 * materialized result is then sent max_rows rows at a time
 * (PortalSuspended between batches).  Portals end with their transaction:
 * a Sync outside a transaction block closes them all.
 */
#include "server/pgwire_int.h"
#include "store/mem.h"
#include "store/util.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---- statements and portals ---- */

PgwNamed *pgw_named_find(PgwNamed *head, const char *name)
{
    for (; head; head = head->next)
        if (!strcmp(head->name, name))
            return head;
    return NULL;
}

void pgw_named_unlink(PgwNamed **head, PgwNamed *n)
{
    for (PgwNamed **pp = head; *pp; pp = &(*pp)->next)
        if (*pp == n) {
            *pp = n->next;
            return;
        }
}

/* A statement by name: the unnamed one is the connection's, named ones
 * live in the SQL session (one namespace with SQL PREPARE). */
static QrSqlStmt *stmt_get(PgConn *c, const char *name)
{
    return name[0] ? qr_sql_named_get(c->sess, name) : c->unnamed;
}

static PgwPortal *portal_find(PgConn *c, const char *name)
{
    return (PgwPortal *)pgw_named_find(c->portals, name);
}

static void portal_free(PgwPortal *p)
{
    qr_sql_result_free(p->res);
    pgw_bind_free(&p->bind);
    qr_free(p->raw);
    qr_sql_stmt_unref(p->st);
    qr_free(p->link.name);
    qr_free(p);
}

static void portal_drop(PgConn *c, PgwPortal *p)
{
    pgw_named_unlink(&c->portals, &p->link);
    portal_free(p);
}

static void portals_close_all(PgConn *c)
{
    while (c->portals)
        portal_drop(c, (PgwPortal *)c->portals);
}

void pgw_query_reset(PgConn *c)
{
    portals_close_all(c);
    qr_sql_stmt_unref(c->unnamed);
    c->unnamed = NULL;
}

/* ---- small senders ---- */

static void send_simple(PgConn *c, char type)
{
    size_t m = pgw_begin(&c->out, type);
    pgw_end(&c->out, m);
}

static void send_complete(PgConn *c, const char *tag)
{
    size_t m = pgw_begin(&c->out, 'C');
    pgw_put_cstr(&c->out, tag);
    pgw_end(&c->out, m);
}

static void send_notices(PgConn *c, const QrSqlResult *r)
{
    for (int i = 0; i < r->n_notices; i++) {
        const QrSqlNotice *n = &r->notices[i];
        size_t m = pgw_begin(&c->out, 'N');
        const char *sev = n->severity ? n->severity : "NOTICE";
        qr_buf_putc(&c->out, 'S');
        pgw_put_cstr(&c->out, sev);
        qr_buf_putc(&c->out, 'V');
        pgw_put_cstr(&c->out, sev);
        qr_buf_putc(&c->out, 'C');
        pgw_put_cstr(&c->out, n->sqlstate[0] ? n->sqlstate : "00000");
        qr_buf_putc(&c->out, 'M');
        pgw_put_cstr(&c->out, n->message ? n->message : "");
        if (n->detail && n->detail[0]) {
            qr_buf_putc(&c->out, 'D');
            pgw_put_cstr(&c->out, n->detail);
        }
        qr_buf_putc(&c->out, 0);
        pgw_end(&c->out, m);
    }
}

static void send_rows(PgConn *c, const QrSqlResult *r, const QrSqlValue *rows, uint64_t n,
                      const int16_t *formats, int n_formats)
{
    for (uint64_t i = 0; i < n && !c->dead; i++) {
        const QrSqlValue *row = rows + i * (uint64_t)r->n_cols;
        size_t m = pgw_begin(&c->out, 'D');
        pgw_put_i16(&c->out, (int16_t)r->n_cols);
        for (int k = 0; k < r->n_cols; k++)
            pgw_put_value(&c->out, &row[k], pgw_format_of(formats, n_formats, k), c->sess);
        pgw_end(&c->out, m);
        pgw_maybe_flush(c);
    }
}

/* CopyInResponse / CopyOutResponse: text (0) or binary (1), every column
 * alike. */
static void send_copy_response(PgConn *c, char type, const QrSqlResult *r)
{
    int16_t fmt = r->copy_format == QR_SQL_COPY_BINARY;
    size_t m = pgw_begin(&c->out, type);
    qr_buf_putc(&c->out, (uint8_t)fmt);
    pgw_put_i16(&c->out, (int16_t)r->n_cols);
    for (int i = 0; i < r->n_cols; i++)
        pgw_put_i16(&c->out, fmt);
    pgw_end(&c->out, m);
}

/* PostgreSQL's binary COPY stream: the signature with flags and an empty
 * header extension, then per row n_fields:i16 and each value with its
 * length word in its send format, then the trailer -1.  One CopyData per
 * row, the header inside the first one (or the trailer's), as PostgreSQL
 * sends it: psycopg reads the signature and the first row together. */
static void copy_out_binary(PgConn *c, const QrSqlResult *r)
{
    static const uint8_t SIG[11] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xFF, '\r', '\n', 0};
    size_t m = pgw_begin(&c->out, 'd');
    qr_buf_append(&c->out, SIG, sizeof SIG);
    pgw_put_i32(&c->out, 0);
    pgw_put_i32(&c->out, 0);
    for (uint64_t i = 0; i < r->n_rows && !c->dead; i++) {
        const QrSqlValue *row = r->vals + i * (uint64_t)r->n_cols;
        if (i > 0)
            m = pgw_begin(&c->out, 'd');
        pgw_put_i16(&c->out, (int16_t)r->n_cols);
        for (int k = 0; k < r->n_cols; k++)
            pgw_put_value(&c->out, &row[k], 1, c->sess);
        pgw_end(&c->out, m);
        pgw_maybe_flush(c);
    }
    if (r->n_rows > 0)
        m = pgw_begin(&c->out, 'd');
    pgw_put_i16(&c->out, -1);
    pgw_end(&c->out, m);
}

static void copy_out(PgConn *c, QrSqlResult *r)
{
    send_copy_response(c, 'H', r);
    if (r->copy_format == QR_SQL_COPY_BINARY) {
        copy_out_binary(c, r);
        send_simple(c, 'c');
        send_complete(c, r->tag);
        return;
    }
    QrBuf line;
    qr_buf_init(&line);
    qr_sql_copy_header(r, &line); /* CSV HEADER: the column names first */
    if (line.len) {
        size_t m = pgw_begin(&c->out, 'd');
        qr_buf_append(&c->out, line.data, line.len);
        pgw_end(&c->out, m);
    }
    for (uint64_t i = 0; i < r->n_rows && !c->dead; i++) {
        line.len = 0;
        qr_sql_copy_row(r, i, &line);
        size_t m = pgw_begin(&c->out, 'd');
        qr_buf_append(&c->out, line.data, line.len);
        pgw_end(&c->out, m);
        pgw_maybe_flush(c);
    }
    qr_buf_free(&line);
    send_simple(c, 'c');
    send_complete(c, r->tag);
}

/* The copy-in sub-protocol after a COPY_IN result.  QR_OK with the
 * CommandComplete sent, or an error in *err (the COPY was abandoned) and,
 * for an error in the data, PostgreSQL's context line in where ("COPY t,
 * line 3"). */
static int copy_in(PgConn *c, const QrSqlResult *r, QrError *err, char *where, size_t where_len)
{
    where[0] = 0;
    send_copy_response(c, 'G', r);
    if (!pgw_flush(c)) {
        qr_sql_copy_fail(c->sess, "connection lost");
        return qr_error_set(err, QR_EIO, "connection lost during COPY");
    }
    char type;
    const uint8_t *body;
    size_t len;
    while (pgw_read_msg(c, &type, &body, &len)) {
        switch (type) {
        case 'd':
            if (qr_sql_copy_data(c->sess, (const char *)body, len, err) != QR_OK) {
                qr_sql_copy_fail(c->sess, err->message);
                if (err->line > 0)
                    snprintf(where, where_len, "COPY %s, line %lld",
                             r->copy_relation ? r->copy_relation : "", (long long)err->line);
                return err->code;
            }
            break;
        case 'c': {
            QrSqlResult *done = NULL;
            if (qr_sql_copy_done(c->sess, &done, err) != QR_OK) {
                if (err->line > 0)
                    snprintf(where, where_len, "COPY %s, line %lld",
                             r->copy_relation ? r->copy_relation : "", (long long)err->line);
                return err->code;
            }
            send_notices(c, done);
            send_complete(c, done->tag);
            qr_sql_result_free(done);
            return QR_OK;
        }
        case 'f': {
            const char *msg = NULL;
            if (pgw_decode_string(body, len, "CopyFail", &msg, NULL) != QR_OK)
                msg = "(malformed CopyFail message)";
            qr_sql_copy_fail(c->sess, msg);
            qr_error_set(err, QR_ECANCELED, "COPY from stdin failed: %s", msg);
            qr_error_set_sqlstate(err, "57014");
            return QR_ECANCELED;
        }
        case 'H':
        case 'S':
            break; /* ignored during copy-in, as the protocol says */
        default:
            qr_sql_copy_fail(c->sess, "unexpected message");
            qr_error_set(err, QR_EINVAL, "unexpected message type 0x%02X during COPY from stdin",
                         (unsigned char)type);
            qr_error_set_sqlstate(err, "08P01");
            return QR_EINVAL;
        }
    }
    qr_sql_copy_fail(c->sess, "connection lost");
    return qr_error_set(err, QR_EIO, "connection lost during COPY");
}

/* Tell the server's on_statement hook (the query history) about a run. */
static void report_statement(PgConn *c, const char *sql, size_t len, uint64_t t0, int rc,
                             const QrSqlResult *r, const QrError *err)
{
    const PgConfig *cfg = pgw_config(c->srv);
    if (!cfg->on_statement || !sql)
        return;
    cfg->on_statement(cfg->on_statement_arg, sql, len, rc == QR_OK && r ? r->n_rows : 0,
                      (double)(qr_now_ns() - t0) / 1e6, rc == QR_OK ? QR_OK : (int)err->code,
                      rc == QR_OK && r ? r->plan : NULL);
}

/* Execute a prepared statement (the session's access limit, set at login
 * for the read-only role, is enforced by the engine as it executes) and
 * report it to the query history. */
int pgw_run_stmt(PgConn *c, QrSqlStmt *st, const QrSqlParams *prm, QrSqlResult **out,
                 QrError *err)
{
    uint64_t t0 = qr_now_ns();
    int rc = qr_sql_execute(c->sess, st, prm, out, err);
    size_t len;
    const char *sql = qr_sql_stmt_text(st, &len);
    report_statement(c, sql, len, t0, rc, *out, err);
    return rc;
}

/* ---- simple query ---- */

static bool blank_query(const char *q)
{
    for (; *q; q++)
        if (!isspace((unsigned char)*q) && *q != ';')
            return false;
    return true;
}

/* Run one statement of a simple Query and send its results.  Returns false
 * on an error (already sent). */
static bool simple_one(PgConn *c, const char *q, QrSqlSpan sp)
{
    QrError e;
    qr_error_clear(&e);
    QrSqlResult *r = NULL;
    /* prepared then executed (not qr_sql_exec): the statement is released
     * after the result, which may borrow its text */
    QrSqlStmt *st = NULL;
    uint64_t t0 = qr_now_ns();
    int rc = qr_sql_prepare(c->sess, q + sp.offset, sp.len, NULL, 0, &st, &e);
    if (rc == QR_OK)
        rc = pgw_run_stmt(c, st, NULL, &r, &e);
    else
        report_statement(c, q + sp.offset, sp.len, t0, rc, NULL, &e);
    if (rc != QR_OK) {
        int64_t pos = e.offset > 0 ? e.offset + qr_sql_utf8_chars(q, sp.offset) : 0;
        pgw_send_error(c, "ERROR", &e, pos);
        qr_sql_stmt_unref(st);
        return false;
    }
    send_notices(c, r);
    bool ok = true;
    switch (r->kind) {
    case QR_SQL_RES_ROWS: {
        int16_t fmt = r->binary; /* FETCH from a BINARY cursor */
        pgw_put_row_description(&c->out, r->cols, r->n_cols, &fmt, 1);
        send_rows(c, r, r->vals, r->n_rows, &fmt, 1);
        send_complete(c, r->tag);
        break;
    }
    case QR_SQL_RES_COMMAND:
        send_complete(c, r->tag);
        break;
    case QR_SQL_RES_EMPTY:
        send_simple(c, 'I');
        break;
    case QR_SQL_RES_COPY_OUT:
        copy_out(c, r);
        break;
    case QR_SQL_RES_COPY_IN: {
        char where[160];
        if (copy_in(c, r, &e, where, sizeof where) != QR_OK) {
            pgw_put_error_where(&c->out, 'E', "ERROR", &e, 0, where);
            ok = false;
        }
        break;
    }
    }
    qr_sql_result_free(r);
    qr_sql_stmt_unref(st);
    return ok;
}

static void simple_query(PgConn *c, const uint8_t *body, size_t len)
{
    QrError e;
    qr_error_clear(&e);
    const char *q = NULL;
    /* a simple Query ends the unnamed portal, as in PostgreSQL */
    PgwPortal *un = portal_find(c, "");
    if (un)
        portal_drop(c, un);
    if (pgw_decode_string(body, len, "Query", &q, &e) != QR_OK) {
        pgw_send_error(c, "ERROR", &e, 0);
        pgw_send_ready(c);
        return;
    }
    size_t qlen = strlen(q);
    QrSqlSpan *spans = NULL, one = {0, qlen};
    int n = 0;
    int rc = QR_OK;
    if (!memchr(q, ';', qlen) && !blank_query(q)) {
        spans = &one; /* one statement: no second parse to split it */
        n = 1;
    } else {
        rc = qr_sql_split(q, qlen, &spans, &n, &e);
    }
    if (rc != QR_OK) {
        qr_sql_session_fail(c->sess); /* as PostgreSQL: a bad query aborts the block */
        pgw_send_error(c, "ERROR", &e, e.offset > 0 ? e.offset : 0);
    } else if (n == 0) {
        send_simple(c, 'I');
    } else {
        for (int i = 0; i < n && !c->dead; i++) {
            bool ok = simple_one(c, q, spans[i]);
            if (!ok)
                break;
        }
    }
    if (spans != &one)
        qr_free(spans);
    pgw_report_changes(c);
    pgw_send_ready(c);
}

/* ---- extended protocol ---- */

static void ext_error(PgConn *c, const QrError *e, int64_t position)
{
    pgw_send_error(c, "ERROR", e, position);
    c->skip_to_sync = true;
}

static void do_parse(PgConn *c, const uint8_t *body, size_t len)
{
    QrError e;
    qr_error_clear(&e);
    PgwParse p;
    if (pgw_decode_parse(body, len, &p, &e) != QR_OK) {
        ext_error(c, &e, 0);
        return;
    }
    if (p.name[0] && qr_sql_named_get(c->sess, p.name)) {
        qr_error_set(&e, QR_EEXISTS, "prepared statement \"%s\" already exists", p.name);
        qr_error_set_sqlstate(&e, "42P05");
        ext_error(c, &e, 0);
        return;
    }
    uint32_t *oids = NULL;
    if (p.n_types > 0) {
        oids = qr_malloc((size_t)p.n_types * sizeof *oids);
        if (!oids) {
            qr_error_set(&e, QR_ENOMEM, "out of memory");
            ext_error(c, &e, 0);
            return;
        }
        for (int i = 0; i < p.n_types; i++)
            oids[i] = pgw_parse_type(&p, i);
    }
    /* an empty query string prepares too: it executes as EmptyQueryResponse */
    QrSqlStmt *st = NULL;
    int rc = qr_sql_prepare(c->sess, p.query, strlen(p.query), oids, p.n_types, &st, &e);
    qr_free(oids);
    if (rc == QR_OK && p.name[0]) {
        rc = qr_sql_named_add(c->sess, p.name, st, &e);
        qr_sql_stmt_unref(st);
    } else if (rc == QR_OK) {
        qr_sql_stmt_unref(c->unnamed); /* the unnamed statement is replaced */
        c->unnamed = st;
    }
    if (rc != QR_OK) {
        ext_error(c, &e, e.offset > 0 ? e.offset : 0);
        return;
    }
    send_simple(c, '1');
}

static void do_bind(PgConn *c, const uint8_t *body, size_t len)
{
    QrError e;
    qr_error_clear(&e);
    PgwPortal *p = qr_calloc(1, sizeof *p);
    uint8_t *raw = qr_malloc(len ? len : 1);
    if (!p || !raw) {
        qr_free(p);
        qr_free(raw);
        qr_error_set(&e, QR_ENOMEM, "out of memory");
        ext_error(c, &e, 0);
        return;
    }
    memcpy(raw, body, len);
    p->raw = raw;
    if (pgw_decode_bind(raw, len, &p->bind, &e) != QR_OK)
        goto fail;
    QrSqlStmt *s = stmt_get(c, p->bind.stmt);
    if (!s) {
        qr_error_set(&e, QR_ENOTFOUND, "prepared statement \"%s\" does not exist", p->bind.stmt);
        qr_error_set_sqlstate(&e, "26000");
        goto fail;
    }
    int want = qr_sql_stmt_n_params(s);
    if (p->bind.n_params != want) {
        qr_error_set(&e, QR_EINVAL,
                     "bind message supplies %d parameters, but prepared statement \"%s\" "
                     "requires %d",
                     p->bind.n_params, p->bind.stmt, want);
        qr_error_set_sqlstate(&e, "08P01");
        goto fail;
    }
    int n_cols = 0;
    const QrSqlColumn *cols = NULL;
    qr_sql_stmt_columns_in(c->sess, s, &cols, &n_cols);
    if (p->bind.n_result_formats > 1 && p->bind.n_result_formats != n_cols) {
        qr_error_set(&e, QR_EINVAL, "bind message has %d result formats but query has %d "
                                    "columns",
                     p->bind.n_result_formats, n_cols);
        qr_error_set_sqlstate(&e, "08P01");
        goto fail;
    }
    PgwPortal *old = portal_find(c, p->bind.portal);
    if (old && p->bind.portal[0]) {
        qr_error_set(&e, QR_EEXISTS, "portal \"%s\" already exists", p->bind.portal);
        qr_error_set_sqlstate(&e, "42P03");
        goto fail;
    }
    p->link.name = qr_strdup(p->bind.portal);
    if (!p->link.name) {
        qr_error_set(&e, QR_ENOMEM, "out of memory");
        goto fail;
    }
    if (old)
        portal_drop(c, old);
    p->st = s;
    qr_sql_stmt_ref(s);
    p->link.next = c->portals;
    c->portals = &p->link;
    send_simple(c, '2');
    return;
fail:
    portal_free(p);
    ext_error(c, &e, 0);
}

static void do_describe(PgConn *c, const uint8_t *body, size_t len)
{
    QrError e;
    qr_error_clear(&e);
    PgwTarget t;
    if (pgw_decode_target(body, len, "Describe", &t, &e) != QR_OK) {
        ext_error(c, &e, 0);
        return;
    }
    const QrSqlColumn *cols = NULL;
    int n_cols = 0;
    if (t.kind == 'S') {
        QrSqlStmt *s = stmt_get(c, t.name);
        if (!s) {
            qr_error_set(&e, QR_ENOTFOUND, "prepared statement \"%s\" does not exist", t.name);
            qr_error_set_sqlstate(&e, "26000");
            ext_error(c, &e, 0);
            return;
        }
        int np = qr_sql_stmt_n_params(s);
        size_t m = pgw_begin(&c->out, 't');
        pgw_put_i16(&c->out, (int16_t)np);
        for (int i = 0; i < np; i++)
            pgw_put_i32(&c->out, (int32_t)qr_sql_stmt_param_oid(s, i));
        pgw_end(&c->out, m);
        qr_sql_stmt_columns_in(c->sess, s, &cols, &n_cols);
        if (n_cols > 0)
            pgw_put_row_description(&c->out, cols, n_cols, NULL, 0);
        else
            send_simple(c, 'n');
        return;
    }
    PgwPortal *p = portal_find(c, t.name);
    bool binary = false;
    if (!p && qr_sql_cursor_columns(c->sess, t.name, &cols, &n_cols, &binary)) {
        /* a SQL cursor is a portal too (psycopg 3 describes its named cursors) */
        int16_t fmt = binary;
        pgw_put_row_description(&c->out, cols, n_cols, &fmt, 1);
        return;
    }
    if (!p) {
        qr_error_set(&e, QR_ENOTFOUND, "portal \"%s\" does not exist", t.name);
        qr_error_set_sqlstate(&e, "34000");
        ext_error(c, &e, 0);
        return;
    }
    if (p->res && p->res->kind == QR_SQL_RES_ROWS) {
        cols = p->res->cols;
        n_cols = p->res->n_cols;
    } else {
        qr_sql_stmt_columns_in(c->sess, p->st, &cols, &n_cols);
    }
    if (n_cols > 0)
        pgw_put_row_description(&c->out, cols, n_cols, p->bind.result_formats,
                                p->bind.n_result_formats);
    else
        send_simple(c, 'n');
}

static void do_execute(PgConn *c, const uint8_t *body, size_t len)
{
    QrError e;
    qr_error_clear(&e);
    PgwExecute x;
    if (pgw_decode_execute(body, len, &x, &e) != QR_OK) {
        ext_error(c, &e, 0);
        return;
    }
    PgwPortal *p = portal_find(c, x.portal);
    if (!p) {
        qr_error_set(&e, QR_ENOTFOUND, "portal \"%s\" does not exist", x.portal);
        qr_error_set_sqlstate(&e, "34000");
        ext_error(c, &e, 0);
        return;
    }
    if (!p->res) {
        QrSqlParams prm = {.n = p->bind.n_params,
                           .values = p->bind.values,
                           .lengths = p->bind.lengths,
                           .formats = p->bind.formats,
                           .n_formats = p->bind.n_formats};
        if (pgw_run_stmt(c, p->st, &prm, &p->res, &e) != QR_OK) {
            ext_error(c, &e, e.offset > 0 ? e.offset : 0);
            return;
        }
        send_notices(c, p->res);
    }
    QrSqlResult *r = p->res;
    switch (r->kind) {
    case QR_SQL_RES_ROWS: {
        bool from_start = r->pos == 0;
        const QrSqlValue *rows = NULL;
        uint64_t n = 0;
        bool more = false;
        if (!p->done)
            more = qr_sql_result_fetch(r, (uint64_t)x.max_rows, &rows, &n);
        send_rows(c, r, rows, n, p->bind.result_formats, p->bind.n_result_formats);
        if (more) {
            send_simple(c, 's');
        } else {
            char tag[64];
            if (from_start && !p->done)
                snprintf(tag, sizeof tag, "%s", r->tag);
            else
                snprintf(tag, sizeof tag, "SELECT %llu", (unsigned long long)n);
            p->done = true;
            send_complete(c, tag);
        }
        break;
    }
    case QR_SQL_RES_COMMAND:
        send_complete(c, r->tag);
        break;
    case QR_SQL_RES_EMPTY:
        send_simple(c, 'I');
        break;
    case QR_SQL_RES_COPY_OUT:
        if (!p->done)
            copy_out(c, r);
        p->done = true;
        break;
    case QR_SQL_RES_COPY_IN: {
        if (p->done)
            break;
        p->done = true;
        char where[160];
        if (copy_in(c, r, &e, where, sizeof where) != QR_OK) {
            pgw_put_error_where(&c->out, 'E', "ERROR", &e, 0, where);
            c->skip_to_sync = true;
        }
        break;
    }
    }
}

static void do_close(PgConn *c, const uint8_t *body, size_t len)
{
    QrError e;
    qr_error_clear(&e);
    PgwTarget t;
    if (pgw_decode_target(body, len, "Close", &t, &e) != QR_OK) {
        ext_error(c, &e, 0);
        return;
    }
    if (t.kind == 'S' && !t.name[0]) {
        qr_sql_stmt_unref(c->unnamed);
        c->unnamed = NULL;
    } else if (t.kind == 'S') {
        qr_sql_named_drop(c->sess, t.name);
    } else {
        PgwPortal *p = portal_find(c, t.name);
        if (p)
            portal_drop(c, p);
        else
            qr_sql_cursor_close(c->sess, t.name); /* a SQL cursor is a portal too */
    }
    send_simple(c, '3');
}

static void do_sync(PgConn *c)
{
    c->skip_to_sync = false;
    if (qr_sql_session_txn_status(c->sess) == 'I')
        portals_close_all(c);
    pgw_report_changes(c);
    pgw_send_ready(c);
}

/* Frontend messages with a body, and their handlers. */
typedef void (*PgwHandler)(PgConn *c, const uint8_t *body, size_t len);
static const struct {
    char type;
    PgwHandler fn;
} PGW_HANDLERS[] = {{'Q', simple_query}, {'P', do_parse},   {'B', do_bind},
                    {'D', do_describe},  {'E', do_execute}, {'C', do_close}};

bool pgw_dispatch(PgConn *c, char type, const uint8_t *body, size_t len)
{
    if (c->skip_to_sync && type != 'S' && type != 'X')
        return true;
    QrError e;
    qr_error_clear(&e);
    for (size_t i = 0; i < sizeof PGW_HANDLERS / sizeof PGW_HANDLERS[0]; i++)
        if (PGW_HANDLERS[i].type == type) {
            PGW_HANDLERS[i].fn(c, body, len);
            return !c->dead;
        }
    switch (type) {
    case 'S':
        do_sync(c);
        break;
    case 'H':
        pgw_flush(c);
        break;
    case 'X':
        return false;
    case 'd':
    case 'c':
    case 'f':
        break; /* leftovers of a failed COPY: dropped, as the protocol says */
    case 'F':
        qr_error_set(&e, QR_EUNSUPPORTED, "the function call protocol is not supported");
        qr_error_hint(&e, "call the function in a SELECT");
        pgw_send_error(c, "ERROR", &e, 0); /* FunctionCall is answered like a Query */
        pgw_send_ready(c);
        break;
    default:
        qr_error_set(&e, QR_EINVAL, "invalid frontend message type %d", (unsigned char)type);
        qr_error_set_sqlstate(&e, "08P01");
        pgw_send_error(c, "FATAL", &e, 0);
        pgw_flush(c);
        return false;
    }
    return !c->dead;
}
