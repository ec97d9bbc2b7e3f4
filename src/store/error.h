/*
 * error.h — QrError, the one error record every layer fills in.
 *
 * Layer: store/ (base kit). Calls nothing but libc.
 *
 * Convention (STYLE.md §5): functions return int (0 = QR_OK, else a QrCode)
 * and take `QrError *err` last.  The first error set wins: later calls to
 * qr_error_set() on an error that already holds a code are ignored, so the
 * deepest, most specific cause survives the unwinding.  `err` may be NULL
 * everywhere (the caller does not want the text).
 *
 * Messages follow PostgreSQL style: one lowercase line, no trailing period,
 * naming the object.  `detail` says what was found, `hint` what to do.
 * Only server/ maps codes to HTTP statuses and import reports; the SQLSTATE
 * is derived from the code here so that every layer agrees.
 */
#ifndef QR_ERROR_H
#define QR_ERROR_H

#include <stdarg.h>
#include <stdint.h>

typedef enum QrCode {
    QR_OK = 0,
    QR_EINVAL,       /* bad argument or value (22023 / 400) */
    QR_ESYNTAX,      /* query / SQL / JSON syntax error (42601 / 400) */
    QR_ETYPE,        /* value of the wrong type for a field (42804 / 422) */
    QR_ENOTFOUND,    /* no such table, column, document (42P01 / 404) */
    QR_EEXISTS,      /* already exists (42P07 / 409) */
    QR_ECONSTRAINT,  /* constraint violated, e.g. missing primary key (23502 / 422) */
    QR_EUNSUPPORTED, /* feature not supported (0A000 / 400) */
    QR_ELIMIT,       /* a configured limit was exceeded (54000 / 413) */
    QR_ENOMEM,       /* out of memory (53200 / 503) */
    QR_EIO,          /* I/O error, disk full (58030 / 500) */
    QR_ECORRUPT,     /* damaged file: names file, segment, block (XX001 / 500) */
    QR_ECANCELED,    /* query canceled (57014 / 499) */
    QR_ETIMEOUT,     /* statement timeout (57014 / 504) */
    QR_EBUSY,        /* overloaded, try again (53300 / 503) */
    QR_EAUTH,        /* authentication failed (28P01 / 401) */
    QR_EPERM,        /* insufficient privilege (42501 / 403) */
    QR_EINTERNAL,    /* an invariant broke: a bug (XX000 / 500) */
    QR_EUNAVAILABLE, /* another node this answer needs could not be reached (08006 / 502) */
    QR_CODE_COUNT
} QrCode;

typedef struct QrError {
    QrCode code;          /* QR_OK while no error was set */
    char message[256];    /* primary message */
    char detail[256];     /* what was found ("" if none) */
    char hint[256];       /* what to do ("" if none) */
    int64_t offset;       /* byte offset in the input, -1 if none */
    int64_t line;         /* 1-based input line, -1 if none */
    int32_t column;       /* 1-based column, -1 if none */
    char sqlstate[6];     /* a more specific SQLSTATE than the code's ("" = the code's),
                             e.g. "42703" undefined_column under QR_ENOTFOUND */
} QrError;

/* Reset to "no error". */
void qr_error_clear(QrError *err);

/* Set code and printf-style message unless an error is already set.
 * Returns `code` so callers can `return qr_error_set(err, ...)`. */
int qr_error_set(QrError *err, QrCode code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int qr_error_setv(QrError *err, QrCode code, const char *fmt, va_list ap);

/* Add detail / hint / position to the error that is set (no-op if the
 * detail/hint is already filled, so the first writer wins there too). */
void qr_error_detail(QrError *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void qr_error_hint(QrError *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void qr_error_pos(QrError *err, int64_t offset, int64_t line, int32_t column);

/* Give the error that is set a more specific SQLSTATE (5 characters; first
 * writer wins).  qr_error_sqlstate() returns it, else the code's. */
void qr_error_set_sqlstate(QrError *err, const char *sqlstate);
const char *qr_error_sqlstate(const QrError *err);

/* Copy src into dst if dst holds no error yet. */
void qr_error_copy(QrError *dst, const QrError *src);

/* Static names: "invalid_parameter_value", the SQLSTATE "22023". */
const char *qr_code_name(QrCode code);
const char *qr_code_sqlstate(QrCode code);

/* An invariant no input can break.  Debug builds assert; release builds
 * keep the check and report QR_EINTERNAL (SQLite's ALWAYS/NEVER). */
#define QR_CHECK(cond, err)                                                    \
    ((cond) ? 1                                                                \
            : (qr_error_set((err), QR_EINTERNAL,                               \
                            "internal invariant failed: %s (%s:%d)", #cond,    \
                            __FILE__, __LINE__),                               \
               0))

#endif
