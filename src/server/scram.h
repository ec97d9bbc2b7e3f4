/*
 * scram.h — SCRAM-SHA-256 (RFC 5802, RFC 7677) for the PostgreSQL port:
 * password verifiers, the server side of the exchange, and the user file.
 *
 * Layer: server/.  Calls the base kit, cJSON and OpenSSL's libcrypto
 * (PBKDF2, HMAC, SHA-256, RAND_bytes).
 *
 * A verifier is stored in PostgreSQL's own text form, so one made by
 * PostgreSQL works here and the other way round:
 *
 *   SCRAM-SHA-256$<iterations>:<base64 salt>$<base64 StoredKey>:<base64 ServerKey>
 *
 * The password itself is never stored.  SaltedPassword = PBKDF2-HMAC-SHA-256
 * (password, salt, iterations); ClientKey = HMAC(SaltedPassword, "Client
 * Key"); StoredKey = SHA-256(ClientKey); ServerKey = HMAC(SaltedPassword,
 * "Server Key").  Passwords are used as given (no SASLprep): ASCII passwords,
 * the usual case, normalize to themselves.
 *
 * The user file is <data>/pg_users.json, written atomically with mode 0600:
 *
 *   {"users": [{"name": "alice", "role": "read-write", "verifier": "SCRAM-SHA-256$..."}]}
 */
#ifndef QR_SCRAM_H
#define QR_SCRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/error.h"

#define SCRAM_ITERATIONS 4096   /* PostgreSQL's default scram_iterations */
#define SCRAM_KEY_LEN 32        /* SHA-256 */
#define SCRAM_SALT_LEN 16
#define SCRAM_NONCE_LEN 18      /* random bytes; sent base64-encoded (24 chars) */
#define SCRAM_USERS_FILE "pg_users.json"

typedef enum { SCRAM_ROLE_READ_WRITE = 0, SCRAM_ROLE_READ_ONLY } ScramRole;

/* One parsed verifier. */
typedef struct ScramVerifier {
    int iterations;
    uint8_t salt[64];
    size_t salt_len;
    uint8_t stored_key[SCRAM_KEY_LEN];
    uint8_t server_key[SCRAM_KEY_LEN];
} ScramVerifier;

/* Make a verifier for `password` with a fresh random salt; writes the text
 * form (NUL-terminated) into out[out_cap].  QR_EINTERNAL if libcrypto fails. */
int scram_make_verifier(const char *password, size_t password_len, int iterations,
                        char *out, size_t out_cap, QrError *err);
/* Parse the text form; QR_EINVAL naming what is wrong. */
int scram_parse_verifier(const char *text, ScramVerifier *v, QrError *err);

/* ---- the server side of one exchange ---- */

typedef enum { SCRAM_START, SCRAM_SENT_FIRST, SCRAM_DONE } ScramStage;

typedef struct ScramServer {
    ScramStage stage;
    ScramVerifier v;
    bool is_mock;                /* unknown user: run the exchange, then fail */
    char client_first_bare[512]; /* "n=...,r=..." */
    char server_first[256];      /* "r=...,s=...,i=..." */
    char nonce[160];             /* client nonce + server nonce */
    char gs2_header[64];         /* "n,," as sent by the client */
} ScramServer;

/* Start for a user whose verifier text is `verifier`, or NULL for an unknown
 * user (the exchange then runs against a made-up salt and fails at the end,
 * so a client cannot tell unknown users from wrong passwords). */
int scram_server_init(ScramServer *s, const char *verifier, QrError *err);
/* The client-first-message in, the server-first-message out (NUL-terminated
 * in out[out_cap]).  QR_EAUTH / QR_EINVAL on a malformed message. */
int scram_server_first(ScramServer *s, const char *msg, size_t len, char *out, size_t out_cap,
                       QrError *err);
/* The client-final-message in; on a correct proof the server-final-message
 * ("v=...") out and QR_OK, else QR_EAUTH (28P01). */
int scram_server_final(ScramServer *s, const char *msg, size_t len, char *out, size_t out_cap,
                       QrError *err);

/* The client side, for tests: compute the client-final-message for a
 * server-first-message, and check the server signature. */
int scram_client_final(const char *password, const char *client_first_bare,
                       const char *server_first, const char *gs2_header, char *out,
                       size_t out_cap, uint8_t server_sig[SCRAM_KEY_LEN], QrError *err);

/* ---- base64 (RFC 4648, with padding) ---- */
size_t scram_b64_encode(const uint8_t *in, size_t len, char *out, size_t out_cap);
/* Returns bytes written or -1 on bad input / too small. */
long scram_b64_decode(const char *in, size_t len, uint8_t *out, size_t out_cap);

/* ---- the user file ---- */

typedef struct ScramUser {
    char name[64];
    char verifier[256];
    ScramRole role;
} ScramUser;

typedef struct ScramUsers {
    ScramUser *users; /* owns */
    int n;
} ScramUsers;

/* Load <data_dir>/pg_users.json; a missing file is zero users, QR_OK. */
int scram_users_load(const char *data_dir, ScramUsers *out, QrError *err);
void scram_users_free(ScramUsers *u);
const ScramUser *scram_users_find(const ScramUsers *u, const char *name);
/* Add or replace a user and write the file atomically (mode 0600). */
int scram_users_put(const char *data_dir, const char *name, const char *password,
                    ScramRole role, QrError *err);
/* Remove a user; QR_ENOTFOUND if absent. */
int scram_users_remove(const char *data_dir, const char *name, QrError *err);

#endif
