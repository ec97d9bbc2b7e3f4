/*
 * pgwire_cursor.c — SQL-level cursors of the simple query protocol:
 * DECLARE name [BINARY] [NO SCROLL] CURSOR [WITH[OUT] HOLD] FOR query,
 * FETCH / MOVE [FORWARD | NEXT] [count | ALL] [FROM | IN] name, CLOSE name
 * | ALL.  They are what drivers call server-side cursors (psycopg2's named
 * cursors, SQLAlchemy's stream_results).
 *
 * Layer: server/.  Calls query/sql.h and the base kit.
 *
 * A cursor lives in the port, not in the SQL engine: DECLARE runs its
 * query once (prepared and executed in the session, so its transaction
 * rules, errors and the read-only role apply), keeps the materialized result, and FETCH sends the next
 * rows of it.  Cursors are forward-only.  Without WITH HOLD, DECLARE needs
 * a transaction block (25P01) and the cursor ends with the block; a cursor
 * WITH HOLD lives until CLOSE or the end of the connection.  A failed FETCH
 * or CLOSE (an unknown cursor, 34000) does not abort the transaction block,
 * unlike PostgreSQL.
 */
#include "server/pgwire_int.h"
#include "store/mem.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct PgwCursor {
    PgwNamed link;        /* first: the connection's list */
    QrSqlResult *res;     /* owns: the rows, fetched from res->pos on */
    QrSqlStmt *st;        /* owns a reference: the result may borrow its text */
    bool hold;            /* WITH HOLD: survives the end of the transaction */
    int16_t format;       /* BINARY: 1 */
} PgwCursor;

/* ---- a tiny tokenizer: words, quoted identifiers, numbers ---- */

typedef struct Tok {
    const char *p, *end;
    char word[128];       /* the token (unquoted words lowercased) */
    bool quoted;
    bool ok;              /* a token was read */
} Tok;

static void skip_space(Tok *t)
{
    for (;;) {
        while (t->p < t->end && isspace((unsigned char)*t->p))
            t->p++;
        if (t->end - t->p >= 2 && t->p[0] == '-' && t->p[1] == '-') {
            while (t->p < t->end && *t->p != '\n')
                t->p++;
        } else if (t->end - t->p >= 2 && t->p[0] == '/' && t->p[1] == '*') {
            const char *q = t->p + 2;
            while (q + 1 < t->end && !(q[0] == '*' && q[1] == '/'))
                q++;
            t->p = q + 1 < t->end ? q + 2 : t->end;
        } else {
            return;
        }
    }
}

static bool next_tok(Tok *t)
{
    skip_space(t);
    t->ok = false;
    t->quoted = false;
    t->word[0] = 0;
    if (t->p >= t->end)
        return false;
    size_t n = 0;
    if (*t->p == '"') {
        t->quoted = true;
        const char *q = t->p + 1;
        while (q < t->end) {
            if (*q == '"') {
                if (q + 1 < t->end && q[1] == '"') {
                    if (n + 1 < sizeof t->word)
                        t->word[n++] = '"';
                    q += 2;
                    continue;
                }
                break;
            }
            if (n + 1 < sizeof t->word)
                t->word[n++] = *q;
            q++;
        }
        if (q >= t->end)
            return false; /* unterminated */
        t->p = q + 1;
    } else if (isalnum((unsigned char)*t->p) || *t->p == '_' || *t->p == '-' ||
               *t->p == '+') {
        const char *q = t->p;
        if (*q == '-' || *q == '+')
            t->word[n++] = *q++;
        while (q < t->end && (isalnum((unsigned char)*q) || *q == '_' || *q == '$')) {
            if (n + 1 < sizeof t->word)
                t->word[n++] = (char)tolower((unsigned char)*q);
            q++;
        }
        t->p = q;
    } else {
        t->word[n++] = *t->p++;
    }
    t->word[n] = 0;
    t->ok = true;
    return true;
}

static bool is_kw(const Tok *t, const char *kw) { return t->ok && !t->quoted && !strcmp(t->word, kw); }

static bool at_end(Tok *t)
{
    skip_space(t);
    while (t->p < t->end && *t->p == ';') {
        t->p++;
        skip_space(t);
    }
    return t->p >= t->end;
}

/* ---- the cursor list ---- */

static PgwCursor *cursor_find(PgConn *c, const char *name)
{
    return (PgwCursor *)pgw_named_find(c->cursors, name);
}

static void cursor_drop(PgConn *c, PgwCursor *k)
{
    pgw_named_unlink(&c->cursors, &k->link);
    qr_sql_result_free(k->res);
    qr_sql_stmt_unref(k->st);
    qr_free(k->link.name);
    qr_free(k);
}

void pgw_cursor_end_txn(PgConn *c)
{
    if (!c->cursors || qr_sql_session_txn_status(c->sess) != 'I')
        return;
    PgwNamed *n = c->cursors;
    while (n) {
        PgwNamed *next = n->next;
        if (!((PgwCursor *)n)->hold)
            cursor_drop(c, (PgwCursor *)n);
        n = next;
    }
}

void pgw_cursor_reset(PgConn *c)
{
    while (c->cursors)
        cursor_drop(c, (PgwCursor *)c->cursors);
}

/* ---- statements ---- */

static void fail(PgConn *c, QrError *e, QrCode code, const char *sqlstate, const char *fmt,
                 const char *arg)
{
    qr_error_set(e, code, fmt, arg);
    qr_error_set_sqlstate(e, sqlstate);
    pgw_send_error(c, "ERROR", e, 0);
}

static bool txn_failed(PgConn *c, QrError *e)
{
    if (qr_sql_session_txn_status(c->sess) != 'E')
        return false;
    fail(c, e, QR_EINVAL, "25P02",
         "current transaction is aborted, commands ignored until end of transaction %s",
         "block");
    return true;
}

static void send_tag(PgConn *c, const char *tag)
{
    size_t m = pgw_begin(&c->out, 'C');
    pgw_put_cstr(&c->out, tag);
    pgw_end(&c->out, m);
}

static bool do_declare(PgConn *c, Tok *t, const char *q, QrSqlSpan sp)
{
    QrError e;
    qr_error_clear(&e);
    if (!next_tok(t) || (!t->quoted && !(isalpha((unsigned char)t->word[0]) ||
                                        t->word[0] == '_'))) {
        fail(c, &e, QR_ESYNTAX, "42601", "syntax error in DECLARE: expected a cursor %s",
             "name");
        return false;
    }
    char name[128];
    snprintf(name, sizeof name, "%s", t->word);
    bool hold = false, binary = false;
    for (;;) {
        if (!next_tok(t)) {
            fail(c, &e, QR_ESYNTAX, "42601", "syntax error in DECLARE: expected %s",
                 "CURSOR ... FOR query");
            return false;
        }
        if (is_kw(t, "binary"))
            binary = true;
        else if (is_kw(t, "scroll")) {
            fail(c, &e, QR_EUNSUPPORTED, "0A000", "%s cursors are not supported", "SCROLL");
            return false;
        } else if (is_kw(t, "no") || is_kw(t, "insensitive") || is_kw(t, "asensitive") ||
                   is_kw(t, "cursor") || is_kw(t, "without"))
            continue; /* NO SCROLL, sensitivity and the CURSOR keyword itself */
        else if (is_kw(t, "with"))
            hold = true;
        else if (is_kw(t, "hold"))
            continue;
        else if (is_kw(t, "for"))
            break;
        else {
            fail(c, &e, QR_ESYNTAX, "42601", "syntax error at or near \"%s\" in DECLARE",
                 t->word);
            return false;
        }
    }
    if (txn_failed(c, &e))
        return false;
    if (!hold && qr_sql_session_txn_status(c->sess) != 'T') {
        fail(c, &e, QR_EINVAL, "25P01", "DECLARE CURSOR can only be used in transaction %s",
             "blocks");
        return false;
    }
    if (cursor_find(c, name)) {
        fail(c, &e, QR_EEXISTS, "42P03", "cursor \"%s\" already exists", name);
        return false;
    }
    size_t qoff = (size_t)(t->p - q);
    size_t qlen = sp.offset + sp.len - qoff;
    QrSqlResult *r = NULL;
    QrSqlStmt *st = NULL;
    int rc = qr_sql_prepare(c->sess, q + qoff, qlen, NULL, 0, &st, &e);
    if (rc == QR_OK)
        rc = qr_sql_execute(c->sess, st, NULL, &r, &e);
    if (rc != QR_OK) {
        qr_sql_stmt_unref(st);
        int64_t pos = e.offset > 0 ? e.offset + qr_sql_utf8_chars(q, qoff) : 0;
        pgw_send_error(c, "ERROR", &e, pos);
        return false;
    }
    if (r->kind != QR_SQL_RES_ROWS) {
        qr_sql_result_free(r);
        qr_sql_stmt_unref(st);
        fail(c, &e, QR_EUNSUPPORTED, "0A000", "a cursor must be declared for a %s",
             "SELECT");
        return false;
    }
    PgwCursor *k = qr_calloc(1, sizeof *k);
    char *nm = qr_strdup(name);
    if (!k || !nm) {
        qr_free(k);
        qr_free(nm);
        qr_sql_result_free(r);
        qr_sql_stmt_unref(st);
        fail(c, &e, QR_ENOMEM, "53200", "out of %s", "memory");
        return false;
    }
    k->link.name = nm;
    k->res = r;
    k->st = st;
    k->hold = hold;
    k->format = binary ? 1 : 0;
    k->link.next = c->cursors;
    c->cursors = &k->link;
    send_tag(c, "DECLARE CURSOR");
    return true;
}

/* FETCH / MOVE [FORWARD | NEXT] [count | ALL] [FROM | IN] name */
static bool do_fetch(PgConn *c, Tok *t, bool move)
{
    QrError e;
    qr_error_clear(&e);
    if (txn_failed(c, &e))
        return false;
    uint64_t count = 1;
    bool all = false;
    const char *what = move ? "MOVE" : "FETCH";
    if (!next_tok(t))
        goto syntax;
    if (is_kw(t, "forward") || is_kw(t, "next")) {
        bool fwd = is_kw(t, "forward");
        if (!next_tok(t))
            goto syntax;
        if (fwd && is_kw(t, "all")) {
            all = true;
            if (!next_tok(t))
                goto syntax;
        } else if (fwd && !t->quoted && isdigit((unsigned char)t->word[0])) {
            count = strtoull(t->word, NULL, 10);
            if (!next_tok(t))
                goto syntax;
        }
    } else if (is_kw(t, "all")) {
        all = true;
        if (!next_tok(t))
            goto syntax;
    } else if (!t->quoted && (isdigit((unsigned char)t->word[0]) || t->word[0] == '+')) {
        count = strtoull(t->word + (t->word[0] == '+'), NULL, 10);
        if (!next_tok(t))
            goto syntax;
    } else if (is_kw(t, "backward") || is_kw(t, "prior") || is_kw(t, "first") ||
               is_kw(t, "last") || is_kw(t, "absolute") || is_kw(t, "relative") ||
               (!t->quoted && t->word[0] == '-')) {
        fail(c, &e, QR_EUNSUPPORTED, "55000", "cursor can only scan forward (%s)", t->word);
        return false;
    }
    if (is_kw(t, "from") || is_kw(t, "in"))
        if (!next_tok(t))
            goto syntax;
    char name[128];
    snprintf(name, sizeof name, "%s", t->word);
    if (!at_end(t))
        goto syntax;
    PgwCursor *k = cursor_find(c, name);
    if (!k) {
        fail(c, &e, QR_ENOTFOUND, "34000", "cursor \"%s\" does not exist", name);
        return false;
    }
    const QrSqlValue *rows = NULL;
    uint64_t n = 0;
    if (all || count > 0)
        qr_sql_result_fetch(k->res, all ? 0 : count, &rows, &n);
    char tag[64];
    if (!move) {
        pgw_put_row_description(&c->out, k->res->cols, k->res->n_cols, &k->format, 1);
        for (uint64_t i = 0; i < n && !c->dead; i++) {
            const QrSqlValue *row = rows + i * (uint64_t)k->res->n_cols;
            size_t m = pgw_begin(&c->out, 'D');
            pgw_put_i16(&c->out, (int16_t)k->res->n_cols);
            for (int col = 0; col < k->res->n_cols; col++)
                pgw_put_value(&c->out, &row[col], k->format);
            pgw_end(&c->out, m);
            pgw_maybe_flush(c);
        }
    }
    snprintf(tag, sizeof tag, "%s %llu", what, (unsigned long long)n);
    send_tag(c, tag);
    return true;
syntax:
    fail(c, &e, QR_ESYNTAX, "42601", "syntax error in %s: expected [FORWARD] [count | ALL] "
                                     "[FROM] cursor",
         what);
    return false;
}

static bool do_close(PgConn *c, Tok *t)
{
    QrError e;
    qr_error_clear(&e);
    if (txn_failed(c, &e))
        return false;
    if (!next_tok(t)) {
        fail(c, &e, QR_ESYNTAX, "42601", "syntax error in CLOSE: expected a cursor %s", "name");
        return false;
    }
    if (is_kw(t, "all")) {
        pgw_cursor_reset(c);
    } else {
        PgwCursor *k = cursor_find(c, t->word);
        if (!k) {
            fail(c, &e, QR_ENOTFOUND, "34000", "cursor \"%s\" does not exist", t->word);
            return false;
        }
        cursor_drop(c, k);
    }
    send_tag(c, "CLOSE CURSOR");
    return true;
}

int pgw_cursor_try(PgConn *c, const char *q, QrSqlSpan sp)
{
    Tok t = {.p = q + sp.offset, .end = q + sp.offset + sp.len};
    if (!next_tok(&t) || t.quoted)
        return -1;
    if (!strcmp(t.word, "declare"))
        return do_declare(c, &t, q, sp);
    if (!strcmp(t.word, "fetch"))
        return do_fetch(c, &t, false);
    if (!strcmp(t.word, "move"))
        return do_fetch(c, &t, true);
    if (!strcmp(t.word, "close"))
        return do_close(c, &t);
    return -1;
}
