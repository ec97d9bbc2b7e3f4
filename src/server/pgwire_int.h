/*
 * pgwire_int.h — private to the PostgreSQL port (src/server/pgwire*.c): the
 * message codec (pgwire_msg.c) and the connection state the protocol files
 * share (pgwire.c: listener, startup, auth; pgwire_query.c: simple and
 * extended query protocol, COPY).
 *
 * Layer: server/.
 *
 * Framing (PostgreSQL protocol 3.0): after the startup packet, every
 * message is  type:u8  length:i32 (counts itself, not the type)  body.
 * The startup packet has no type byte:  length:i32  code:i32  body.
 * Integers are big-endian.  Decoders take the body only, check every
 * length before reading, and fail unless the body is consumed exactly
 * (PostgreSQL libpq/pqformat.c); a failure is QR_EINVAL with SQLSTATE
 * 08P01 (protocol_violation).  Decoded strings and byte ranges borrow the
 * body.
 */
#ifndef QR_PGWIRE_INT_H
#define QR_PGWIRE_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "query/sql.h"
#include "server/conn_guard.h"
#include "server/pgwire.h"
#include "server/scram.h"
#include "store/buf.h"
#include "store/error.h"

/* ================= pgwire_msg.c: the codec ================= */

#define PGW_PROTO_30 196608        /* 3 << 16 */
#define PGW_CANCEL_CODE 80877102   /* 1234 << 16 | 5678 */
#define PGW_SSL_CODE 80877103      /* 1234 << 16 | 5679 */
#define PGW_GSSENC_CODE 80877104   /* 1234 << 16 | 5680 */
#define PGW_MAX_STARTUP_LEN 10000  /* as PostgreSQL (MAX_STARTUP_PACKET_LENGTH) */
#define PGW_MAX_STARTUP_PARAMS 64
#define PGW_MAX_PARAMS 65535       /* Bind/Parse counts are int16 */

/* A bounds-checked big-endian cursor over one message body. */
typedef struct PgwRd {
    const uint8_t *p;   /* borrows: next byte */
    const uint8_t *end; /* borrows: one past the last byte */
    bool bad;           /* a read ran past the end or a string had no NUL */
} PgwRd;

void pgw_rd_init(PgwRd *r, const void *body, size_t len);
uint8_t pgw_rd_u8(PgwRd *r);
int16_t pgw_rd_i16(PgwRd *r);
int32_t pgw_rd_i32(PgwRd *r);
/* A NUL-terminated string inside the body (NULL and bad if none). */
const char *pgw_rd_cstr(PgwRd *r);
/* n bytes (NULL and bad if short). */
const uint8_t *pgw_rd_bytes(PgwRd *r, size_t n);
/* QR_OK when nothing went wrong and every byte was read; else QR_EINVAL
 * (08P01) "invalid <what> message" naming what was wrong. */
int pgw_rd_finish(const PgwRd *r, const char *what, QrError *err);

typedef enum { PGW_START_NORMAL, PGW_START_SSL, PGW_START_GSSENC, PGW_START_CANCEL } PgwStartKind;

/* The startup packet (without its length word). */
typedef struct PgwStartup {
    PgwStartKind kind;
    int major, minor;           /* protocol version (NORMAL) */
    int32_t cancel_pid, cancel_key; /* CANCEL */
    int n_params;
    const char *keys[PGW_MAX_STARTUP_PARAMS]; /* borrow the body */
    const char *vals[PGW_MAX_STARTUP_PARAMS];
} PgwStartup;
int pgw_decode_startup(const uint8_t *body, size_t len, PgwStartup *out, QrError *err);
/* The value of a startup parameter, or NULL. */
const char *pgw_startup_get(const PgwStartup *s, const char *key);

typedef struct PgwParse {
    const char *name, *query;
    int n_types;
    const uint8_t *types;       /* n_types big-endian int32 OIDs (borrowed) */
} PgwParse;
int pgw_decode_parse(const uint8_t *body, size_t len, PgwParse *out, QrError *err);
uint32_t pgw_parse_type(const PgwParse *p, int i);

/* Bind.  The arrays live in one block owned by the struct (pgw_bind_free);
 * values point into the body, which must outlive the struct. */
typedef struct PgwBind {
    const char *portal, *stmt;
    int n_formats;
    int16_t *formats;           /* owns (with the block) */
    int n_params;
    const char **values;        /* NULL = SQL NULL */
    int *lengths;
    int n_result_formats;
    int16_t *result_formats;
    void *block;                /* owns the arrays */
} PgwBind;
int pgw_decode_bind(const uint8_t *body, size_t len, PgwBind *out, QrError *err);
void pgw_bind_free(PgwBind *b);

/* Describe / Close: 'S' statement or 'P' portal, and a name. */
typedef struct PgwTarget {
    char kind;
    const char *name;
} PgwTarget;
int pgw_decode_target(const uint8_t *body, size_t len, const char *what, PgwTarget *out,
                      QrError *err);

typedef struct PgwExecute {
    const char *portal;
    int32_t max_rows;           /* 0 = all */
} PgwExecute;
int pgw_decode_execute(const uint8_t *body, size_t len, PgwExecute *out, QrError *err);

/* Query and CopyFail: one string. */
int pgw_decode_string(const uint8_t *body, size_t len, const char *what, const char **out,
                      QrError *err);

/* SASLInitialResponse: mechanism, then the initial response (len -1 = none). */
typedef struct PgwSaslInit {
    const char *mechanism;
    const uint8_t *data;
    int32_t data_len;
} PgwSaslInit;
int pgw_decode_sasl_init(const uint8_t *body, size_t len, PgwSaslInit *out, QrError *err);

/* ---- encoding: messages are built in a QrBuf ---- */

/* Append the type byte and a length placeholder; returns the offset to
 * pass to pgw_end, which patches the length. */
size_t pgw_begin(QrBuf *b, char type);
void pgw_end(QrBuf *b, size_t start);
void pgw_put_i16(QrBuf *b, int16_t v);
void pgw_put_i32(QrBuf *b, int32_t v);
void pgw_put_i64(QrBuf *b, int64_t v);
void pgw_put_cstr(QrBuf *b, const char *s); /* with its NUL */

/* ErrorResponse ('E') or NoticeResponse ('N') from a QrError: S and V
 * severity, C SQLSTATE, M message, D detail, H hint, P position (when
 * position > 0: 1-based characters). */
void pgw_put_error(QrBuf *b, char type, const char *severity, const QrError *e,
                   int64_t position);
/* The same with a W (where: "COPY t, line 3") field when where is not NULL. */
void pgw_put_error_where(QrBuf *b, char type, const char *severity, const QrError *e,
                         int64_t position, const char *where);
/* One DataRow value in the given format (0 text, 1 binary) with its length
 * word; NULL is length -1.  Text follows the session's output settings
 * (bytea_output; s NULL: the defaults). */
void pgw_put_value(QrBuf *b, const QrSqlValue *v, int16_t format, const QrSqlSession *s);
/* RowDescription for cols with per-column formats (formats NULL: all text;
 * n_formats 1: one for all). */
void pgw_put_row_description(QrBuf *b, const QrSqlColumn *cols, int n_cols,
                             const int16_t *formats, int n_formats);
/* The format of column i under a Bind's result-format list. */
static inline int16_t pgw_format_of(const int16_t *formats, int n_formats, int i)
{
    return n_formats == 0 ? 0 : n_formats == 1 ? formats[0] : formats[i];
}

/* ================= connection state shared by pgwire*.c ================= */

/* A link in a connection's list of statements or portals (embedded first). */
typedef struct PgwNamed {
    struct PgwNamed *next;
    char *name;               /* owns */
} PgwNamed;

typedef struct PgwPortal {
    PgwNamed link;            /* first: the connection's list */
    QrSqlStmt *st;            /* holds a reference: Close of the statement leaves the
                                 portal running */
    uint8_t *raw;             /* owns: the Bind body the parameters point into */
    PgwBind bind;             /* owns its arrays */
    QrSqlResult *res;         /* owns: set by the first Execute */
    bool done;                /* every row was sent */
} PgwPortal;

typedef struct PgServer PgServer;
/* The server's settings (pgwire.c). */
const PgConfig *pgw_config(const PgServer *s);

typedef struct PgConn {
    ConnSlot slot;            /* the server's ConnGuard: limits, startup deadline */
    PgServer *srv;            /* borrows */
    int fd;                   /* owns */
    void *ssl;                /* owns: the TLS session (SSL *), NULL in the clear */
    bool peer_loopback;
    int32_t pid, key;         /* BackendKeyData */
    bool counted;             /* holds a slot of max_connections */
    atomic_bool busy;         /* a message is being handled (gone-client check) */
    char user[64];
    ScramRole role;
    QrSqlSession *sess;       /* owns */
    uint8_t *rbuf;            /* owns: bytes read and not consumed */
    size_t rpos, rlen, rcap;
    QrBuf out;                /* owns: replies not yet sent */
    bool dead;                /* the socket failed or Terminate came: stop */
    bool skip_to_sync;        /* extended protocol: an error, wait for Sync */
    QrSqlStmt *unnamed;       /* owns a reference: the unnamed statement (named ones
                                 live in the SQL session, with SQL PREPARE's) */
    PgwNamed *portals;        /* owns: PgwPortal list (SQL cursors live in the session) */
    char reported[6][64];     /* last ParameterStatus values sent (PGW_REPORTED) */
    struct PgConn *reg_next;  /* the server's registry (cancel, shutdown) */
    struct PgConn *reg_prev;
} PgConn;

/* pgwire.c */
/* Read one message: *type and a body borrowed until the next read.
 * Returns false when the connection is over (EOF, error, shutdown, a
 * framing error that was reported to the client). */
bool pgw_read_msg(PgConn *c, char *type, const uint8_t **body, size_t *len);
/* Send what is buffered; false and c->dead on a socket error. */
bool pgw_flush(PgConn *c);
/* Flush when the buffer is large (called between DataRows). */
void pgw_maybe_flush(PgConn *c);
void pgw_send_error(PgConn *c, const char *severity, const QrError *e, int64_t position);
void pgw_send_ready(PgConn *c);
/* ParameterStatus for reported settings that changed (after SET). */
void pgw_report_changes(PgConn *c);
uint64_t pgw_max_message(const PgConn *c);

/* pgwire_query.c */
/* The named entry of a connection list, or NULL; unlink one (not freed). */
PgwNamed *pgw_named_find(PgwNamed *head, const char *name);
void pgw_named_unlink(PgwNamed **head, PgwNamed *n);
/* Handle one message after startup; false ends the connection. */
bool pgw_dispatch(PgConn *c, char type, const uint8_t *body, size_t len);
/* Free every statement, portal and cursor (connection end). */
void pgw_query_reset(PgConn *c);

/* pgwire_tls.c (OpenSSL types stay out of this header) */
/* An SSL_CTX from PEM files; QR_EINVAL naming the file that failed. */
int pgw_tls_ctx_new(const char *cert, const char *key, void **out, QrError *err);
void pgw_tls_ctx_free(void *ctx);
/* The server side of the handshake on c->fd; false on failure (logged). */
bool pgw_tls_accept(PgConn *c, void *ctx, int timeout_ms);
/* recv / send through TLS when the connection has it. */
ssize_t pgw_conn_recv(PgConn *c, void *buf, size_t n);
ssize_t pgw_conn_send(PgConn *c, const void *buf, size_t n);
/* Decrypted bytes wait inside OpenSSL (poll would not see them). */
bool pgw_conn_pending(const PgConn *c);
void pgw_tls_close(PgConn *c);

#endif
