/*
 * sql_lite_oracle.h — SQLite as an oracle for the SQL unit tests (static
 * functions: include once per test file): a result's rows and SQLite's
 * rows for the same statement, both as "a|b|c\n" text.
 */
#ifndef QR_SQL_LITE_ORACLE_H
#define QR_SQL_LITE_ORACLE_H

#include <criterion/criterion.h>
#include <string.h>

#include <sqlite3.h>

#include "query/sql.h"
#include "store/util.h"

/* Every row of a result as "a|b|c\n" text; booleans as SQLite's 1 / 0. */
__attribute__((unused)) static char *rows_text(const QrSqlResult *r)
{
    QrBuf b;
    qr_buf_init(&b);
    for (uint64_t i = 0; i < r->n_rows; i++) {
        for (int c = 0; c < r->n_cols; c++) {
            const QrSqlValue *v = &r->vals[i * (uint64_t)r->n_cols + (uint64_t)c];
            if (c)
                qr_buf_putc(&b, '|');
            if (v->is_null)
                qr_buf_append(&b, "NULL", 4);
            else if (v->type == QR_SQL_BOOL)
                qr_buf_putc(&b, v->u.b ? '1' : '0');
            else
                qr_sql_value_text(v, &b);
        }
        qr_buf_putc(&b, '\n');
    }
    qr_buf_putc(&b, 0);
    return (char *)qr_buf_steal(&b, NULL);
}

__attribute__((unused)) static char *sqlite_text(sqlite3 *lite, const char *sql)
{
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_prepare_v2(lite, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql,
                 sqlite3_errmsg(lite));
    QrBuf b;
    qr_buf_init(&b);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        for (int c = 0; c < sqlite3_column_count(st); c++) {
            if (c)
                qr_buf_putc(&b, '|');
            const unsigned char *t = sqlite3_column_text(st, c);
            if (t)
                qr_buf_append(&b, t, strlen((const char *)t));
            else
                qr_buf_append(&b, "NULL", 4);
        }
        qr_buf_putc(&b, '\n');
    }
    cr_assert_eq(rc, SQLITE_DONE, "%s: %s", sql, sqlite3_errmsg(lite));
    sqlite3_finalize(st);
    qr_buf_putc(&b, 0);
    return (char *)qr_buf_steal(&b, NULL);
}

#endif
