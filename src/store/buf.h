/*
 * buf.h — growable byte buffer (writer side) and bounds-checked reader.
 *
 * Layer: store/ (base kit). Calls mem.h.
 *
 * QrBuf owns `data` (qr_malloc'd).  Appends grow it geometrically; on OOM the
 * buffer sets `oom` and later appends are no-ops, so a writer checks once at
 * the end (qr_buf_ok) instead of after every byte.
 *
 * QrReader borrows bytes [p, end).  Every getter checks length first; reading
 * past the end sets `bad` and yields zeros.  Decoders check `bad` and that a
 * message was fully consumed (qr_rd_done), the PostgreSQL pqformat habit.
 *
 * Integers on disk are little-endian.  Varints are LEB128 (7 bits a byte,
 * low group first), at most 10 bytes for 64 bits.
 */
#ifndef QR_BUF_H
#define QR_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct QrBuf {
    uint8_t *data; /* owns */
    size_t len;
    size_t cap;
    bool oom;      /* an append failed: contents are incomplete */
} QrBuf;

void qr_buf_init(QrBuf *b);
void qr_buf_free(QrBuf *b);          /* frees data, leaves an empty buffer */
bool qr_buf_reserve(QrBuf *b, size_t extra);  /* false on OOM and the buffer is marked oom */
/* Like qr_buf_reserve, but a failure leaves the buffer usable (not marked
 * oom): for callers that undo and report the failure themselves. */
bool qr_buf_try_reserve(QrBuf *b, size_t extra);
void qr_buf_append(QrBuf *b, const void *p, size_t n);
void qr_buf_putc(QrBuf *b, uint8_t c);
void qr_buf_put_u16(QrBuf *b, uint16_t v);
void qr_buf_put_u32(QrBuf *b, uint32_t v);
void qr_buf_put_u64(QrBuf *b, uint64_t v);
void qr_buf_put_varint(QrBuf *b, uint64_t v);
void qr_buf_put_str(QrBuf *b, const char *s, size_t n); /* varint len + bytes */
void qr_buf_printf(QrBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hand over data (NUL-terminated for convenience) and reset the buffer. */
uint8_t *qr_buf_steal(QrBuf *b, size_t *len);
static inline bool qr_buf_ok(const QrBuf *b) { return !b->oom; }

/* Raw helpers for fixed-width little-endian values. */
static inline void qr_put_u32le(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void qr_put_u64le(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline uint32_t qr_get_u32le(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t qr_get_u64le(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint16_t qr_get_u16le(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

/* Varint into out (>= 10 bytes). Returns bytes written.  Inline: the
 * segment builder and the postings writer call it once per posting. */
static inline size_t qr_varint_encode(uint8_t *out, uint64_t v)
{
    size_t i = 0;
    while (v >= 0x80) {
        out[i++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[i++] = (uint8_t)v;
    return i;
}
/* Decode from [p, end). Returns bytes read, 0 if truncated or overlong. */
size_t qr_varint_decode(const uint8_t *p, const uint8_t *end, uint64_t *v);

typedef struct QrReader {
    const uint8_t *p;   /* borrows: next byte */
    const uint8_t *end; /* borrows: one past the last byte */
    bool bad;           /* a read ran past the end or a varint was malformed */
} QrReader;

static inline void qr_rd_init(QrReader *r, const void *p, size_t n)
{
    r->p = p;
    r->end = (const uint8_t *)p + n;
    r->bad = false;
}
static inline size_t qr_rd_left(const QrReader *r) { return (size_t)(r->end - r->p); }
static inline bool qr_rd_done(const QrReader *r) { return !r->bad && r->p == r->end; }
uint8_t qr_rd_u8(QrReader *r);
uint16_t qr_rd_u16(QrReader *r);
uint32_t qr_rd_u32(QrReader *r);
uint64_t qr_rd_u64(QrReader *r);
uint64_t qr_rd_varint_slow(QrReader *r); /* qr_rd_varint's general case */
/* A varint; the one-byte case (most postings deltas) inline. */
static inline uint64_t qr_rd_varint(QrReader *r)
{
    if (!r->bad && r->p < r->end && *r->p < 0x80)
        return *r->p++;
    return qr_rd_varint_slow(r);
}
/* Borrow n bytes (NULL and bad if short). */
const uint8_t *qr_rd_bytes(QrReader *r, size_t n);
/* varint length + bytes; returns borrowed pointer, length in *n. */
const uint8_t *qr_rd_str(QrReader *r, size_t *n);

/* Length of the well-formed UTF-8 sequence at p (1..4), or 0 when the bytes
 * there are not one (overlong, surrogate, truncated, beyond U+10FFFF). */
int qr_utf8_seq_len(const unsigned char *p, size_t left);
/* Offset of the first byte of s[0..n) that does not begin a well-formed
 * UTF-8 sequence (by qr_utf8_seq_len's rules), or n when all of it is
 * well-formed.  NUL bytes count as well-formed.  ASCII runs go 8 bytes a
 * step. */
size_t qr_utf8_invalid_at(const char *s, size_t n);
/* Append s[0..n) as a JSON string: quotes, escapes for '"', '\\' and control
 * characters, and U+FFFD for every byte that is not well-formed UTF-8, so the
 * output is valid JSON whatever the bytes. */
void qr_buf_json_str(QrBuf *b, const char *s, size_t n);

/* Append a finite double in the shortest %g form that reads back as the
 * same value (as a float when f4), PostgreSQL's float output; the caller
 * handles NaN and infinities. */
void qr_buf_double(QrBuf *b, double d, bool f4);

/* PostgreSQL's array text form ("{a,\"b c\",NULL}"), the text a
 * multi-valued keyword column holds and SQL reads as an array.
 * qr_buf_array_elem appends one element as array_out writes it: in double
 * quotes, with '"' and '\\' escaped, when it is empty, is NULL in any case,
 * or holds a brace, comma, quote, backslash or white space; bare otherwise
 * (no separator: the caller writes '{', ',' and '}'). */
void qr_buf_array_elem(QrBuf *b, const char *s, size_t n);
/* Read the next element of the array text s[0..n) from *pos (0 at the
 * start, which must be '{' after white space) into out[0..*len) (out has
 * room for n bytes); *is_null for an unquoted NULL.  Returns 1 with an
 * element, 0 at the closing brace (nothing may follow but white space), -1
 * for malformed text (an unclosed quote or brace, a missing comma).
 * Backslash escapes the next byte, quoted or not; unquoted elements lose
 * their surrounding white space. */
int qr_array_next(const char *s, size_t n, size_t *pos, char *out, size_t *len, bool *is_null);

#endif
