/*
 * sql_utility.c — statements other than queries (DDL, DML, COPY,
 * transactions, SET/SHOW) and the catalog hooks declared in sql_int.h.
 *
 * Layer: query/.  This first version only rejects them cleanly so that the
 * SQL engine links; the utility side replaces it.
 */
#include "query/sql_int.h"

#include <string.h>

int sqlu_exec(SqlCtx *cx, const cJSON *stmt, const char *tag, QrSqlResult *res)
{
    (void)res;
    return sql_err_at(cx, sqlj_loc(stmt), QR_EUNSUPPORTED, NULL, "%s is not supported yet",
                      tag ? tag : "this statement");
}

int sqlu_describe(SqlCtx *cx, const cJSON *stmt, const char *tag, QrSqlColumn **cols,
                  int *n_cols)
{
    (void)cx, (void)stmt, (void)tag;
    *cols = NULL;
    *n_cols = 0;
    return QR_OK;
}

const char *sqlu_kind(const cJSON *stmt, const char *tag)
{
    (void)stmt, (void)tag;
    return NULL;
}

int sqlu_copy_data(QrSqlSession *s, const char *data, size_t len, QrError *err)
{
    (void)s, (void)data, (void)len;
    return qr_error_set(err, QR_EINVAL, "no COPY is in progress");
}

int sqlu_copy_done(QrSqlSession *s, QrSqlResult *res, QrError *err)
{
    (void)s, (void)res;
    return qr_error_set(err, QR_EINVAL, "no COPY is in progress");
}

void sqlu_copy_fail(QrSqlSession *s, const char *message)
{
    (void)s, (void)message;
}

bool sqlu_copy_active(const QrSqlSession *s)
{
    (void)s;
    return false;
}

void sqlu_session_free(QrSqlSession *s)
{
    (void)s;
}

int sqlcat_open(SqlCtx *cx, const char *schema, const char *name, SqlSource **out)
{
    (void)cx, (void)schema, (void)name;
    *out = NULL;
    return QR_OK;
}

int sqlcat_func_lookup(const char *schema, const char *name, int n_args, QrSqlType *ret)
{
    (void)schema;
    if (n_args == 0 && strcmp(name, "version") == 0) {
        *ret = QR_SQL_TEXT;
        return QR_OK;
    }
    return QR_ENOTFOUND;
}

int sqlcat_func_call(SqlCtx *cx, const char *schema, const char *name, int n_args,
                     const SqlValue *args, SqlValue *out)
{
    (void)schema, (void)args;
    if (n_args == 0 && strcmp(name, "version") == 0) {
        static const char v[] = "PostgreSQL 15.0 (Quarry " QUARRY_VERSION ")";
        *out = sqlv_text(v, sizeof v - 1);
        return QR_OK;
    }
    return sql_err_at(cx, -1, QR_ENOTFOUND, "42883", "function %s does not exist", name);
}
