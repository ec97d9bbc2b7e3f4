/*
 * canonical.c — canonical forms of queries for grouping in a query history:
 * the text query language's canonical form (qparse + qnode_format) and a
 * normalized SQL statement (constants replaced by $n, whitespace collapsed)
 * with libpg_query's structural fingerprint.
 *
 * Layer: query/.  Calls query/qparse.h, libpg_query, the SQL nesting guard
 * (sql_guard.c) and the base kit.
 */
#include "query/qparse.h"
#include "query/quarry.h"
#include "query/sql_int.h"
#include "store/mem.h"

#include <pg_query.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int qr_query_canonical(const char *q, size_t len, bool default_and, QrBuf *out, QrError *err)
{
    QrArena *a = qr_arena_new(0);
    if (!a)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    QParseOpts o;
    memset(&o, 0, sizeof o);
    o.default_and = default_and;
    QNode *root = NULL;
    int rc = qparse(a, q, len, &o, &root, err);
    if (rc == QR_OK) {
        rc = qnode_format(root, out);
        if (rc != QR_OK)
            qr_error_set(err, rc, "could not format the query");
    }
    qr_arena_free(a);
    return rc;
}

/* Append s with runs of white space made one space, trimmed, outside
 * quoted strings and identifiers. */
static void squeeze(const char *s, QrBuf *out)
{
    bool space = false;
    char quote = 0;
    size_t start = out->len;
    for (; *s; s++) {
        char c = *s;
        if (!quote && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
            space = out->len > start;
            continue;
        }
        if (space)
            qr_buf_putc(out, ' ');
        space = false;
        if (quote && c == quote)
            quote = 0;
        else if (!quote && (c == '\'' || c == '"'))
            quote = c;
        qr_buf_putc(out, c);
    }
}

int qr_sql_normalize(const char *sql, size_t len, QrBuf *out, uint64_t *fingerprint,
                     QrError *err)
{
    if (fingerprint)
        *fingerprint = 0;
    char *z = qr_malloc(len + 1);
    if (!z)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    memcpy(z, sql, len);
    z[len] = 0;
    if (memchr(sql, 0, len)) {
        qr_free(z);
        return qr_error_set(err, QR_EINVAL, "SQL text contains a NUL byte");
    }
    /* normalizing recurses over the tree with no depth check of its own,
     * harder than parsing: deep statements are refused first (54001) */
    if (sql_guard_nesting(z, len, SQL_NORMALIZE_NESTING, err) != QR_OK) {
        qr_free(z);
        return err->code;
    }
    PgQueryNormalizeResult nr = pg_query_normalize(z);
    int rc = QR_OK;
    if (nr.error) {
        rc = qr_error_set(err, QR_ESYNTAX, "%s", nr.error->message ? nr.error->message
                                                                   : "syntax error");
        if (nr.error->cursorpos > 0)
            qr_error_pos(err, nr.error->cursorpos - 1, -1, -1);
    } else {
        squeeze(nr.normalized_query, out);
        if (!qr_buf_ok(out))
            rc = qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    pg_query_free_normalize_result(nr);
    if (rc == QR_OK && fingerprint) {
        PgQueryFingerprintResult fr = pg_query_fingerprint(z);
        if (!fr.error)
            *fingerprint = fr.fingerprint;
        pg_query_free_fingerprint_result(fr);
    }
    qr_free(z);
    return rc;
}
