/*
 * error.c — QrError helpers and the code → name / SQLSTATE table.
 * Layer: store/ (base kit).
 */
#include "store/error.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    const char *sqlstate;
} code_table[QR_CODE_COUNT] = {
    [QR_OK] = {"ok", "00000"},
    [QR_EINVAL] = {"invalid_parameter_value", "22023"},
    [QR_ESYNTAX] = {"syntax_error", "42601"},
    [QR_ETYPE] = {"datatype_mismatch", "42804"},
    [QR_ENOTFOUND] = {"not_found", "42P01"},
    [QR_EEXISTS] = {"already_exists", "42P07"},
    [QR_ECONSTRAINT] = {"constraint_violation", "23502"},
    [QR_EUNSUPPORTED] = {"feature_not_supported", "0A000"},
    [QR_ELIMIT] = {"program_limit_exceeded", "54000"},
    [QR_ENOMEM] = {"out_of_memory", "53200"},
    [QR_EIO] = {"io_error", "58030"},
    [QR_ECORRUPT] = {"data_corrupted", "XX001"},
    [QR_ECANCELED] = {"query_canceled", "57014"},
    [QR_ETIMEOUT] = {"statement_timeout", "57014"},
    [QR_EBUSY] = {"too_many_connections", "53300"},
    [QR_EAUTH] = {"invalid_password", "28P01"},
    [QR_EPERM] = {"insufficient_privilege", "42501"},
    [QR_EINTERNAL] = {"internal_error", "XX000"},
    [QR_EUNAVAILABLE] = {"connection_failure", "08006"},
};

void qr_error_clear(QrError *err)
{
    if (!err)
        return;
    err->code = QR_OK;
    err->message[0] = err->detail[0] = err->hint[0] = '\0';
    err->offset = -1;
    err->line = -1;
    err->column = -1;
    err->sqlstate[0] = '\0';
}

int qr_error_setv(QrError *err, QrCode code, const char *fmt, va_list ap)
{
    if (!err || err->code != QR_OK)
        return code;
    qr_error_clear(err);
    err->code = code;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    return code;
}

int qr_error_set(QrError *err, QrCode code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    qr_error_setv(err, code, fmt, ap);
    va_end(ap);
    return code;
}

void qr_error_detail(QrError *err, const char *fmt, ...)
{
    if (!err || err->code == QR_OK || err->detail[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->detail, sizeof err->detail, fmt, ap);
    va_end(ap);
}

void qr_error_hint(QrError *err, const char *fmt, ...)
{
    if (!err || err->code == QR_OK || err->hint[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->hint, sizeof err->hint, fmt, ap);
    va_end(ap);
}

void qr_error_pos(QrError *err, int64_t offset, int64_t line, int32_t column)
{
    if (!err || err->code == QR_OK)
        return;
    if (err->offset < 0)
        err->offset = offset;
    if (err->line < 0)
        err->line = line;
    if (err->column < 0)
        err->column = column;
}

void qr_error_set_sqlstate(QrError *err, const char *sqlstate)
{
    if (!err || err->code == QR_OK || err->sqlstate[0] || !sqlstate || strlen(sqlstate) != 5)
        return;
    memcpy(err->sqlstate, sqlstate, 6);
}

const char *qr_error_sqlstate(const QrError *err)
{
    if (!err)
        return "00000";
    return err->sqlstate[0] ? err->sqlstate : qr_code_sqlstate(err->code);
}

void qr_error_copy(QrError *dst, const QrError *src)
{
    if (!dst || !src || dst->code != QR_OK || src->code == QR_OK)
        return;
    memcpy(dst, src, sizeof *dst);
}

const char *qr_code_name(QrCode code)
{
    if ((unsigned)code >= QR_CODE_COUNT)
        return "unknown";
    return code_table[code].name;
}

const char *qr_code_sqlstate(QrCode code)
{
    if ((unsigned)code >= QR_CODE_COUNT)
        return "XX000";
    return code_table[code].sqlstate;
}
