/*
 * scram.c — SCRAM-SHA-256 verifiers, the server side of the exchange, and
 * the PostgreSQL port's user file (see scram.h for the formats).
 *
 * Layer: server/.  Calls the base kit, cJSON and libcrypto.
 *
 * The exchange (RFC 5802 §3, as PostgreSQL runs it inside
 * AuthenticationSASL / SASLInitialResponse / SASLResponse):
 *
 *   C: n,,n=,r=<cnonce>                           client-first-message
 *   S: r=<cnonce><snonce>,s=<salt>,i=<iterations> server-first-message
 *   C: c=biws,r=<cnonce><snonce>,p=<ClientProof>  client-final-message
 *   S: v=<ServerSignature>                        server-final-message
 *
 * AuthMessage = client-first-bare "," server-first "," client-final-without-proof;
 * ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage), and the proof
 * holds when SHA-256(ClientKey) == StoredKey.  The user name inside the
 * SCRAM message is ignored, as PostgreSQL does: the startup packet names
 * the user.
 */
#include "server/scram.h"
#include "server/secret_file.h"
#include "store/mem.h"
#include "store/util.h"

#include <cJSON.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- base64 ---- */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t scram_b64_encode(const uint8_t *in, size_t len, char *out, size_t out_cap)
{
    size_t need = (len + 2) / 3 * 4;
    if (out_cap < need + 1) {
        if (out_cap)
            out[0] = 0;
        return 0;
    }
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        out[o++] = B64[(v >> 18) & 63];
        out[o++] = B64[(v >> 12) & 63];
        out[o++] = i + 1 < len ? B64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? B64[v & 63] : '=';
    }
    out[o] = 0;
    return o;
}

static int b64_val(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

long scram_b64_decode(const char *in, size_t len, uint8_t *out, size_t out_cap)
{
    if (len % 4)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (in[i + k] == '=' && i + 4 == len && k >= 2) {
                v[k] = 0;
                pad++;
            } else {
                if (pad)
                    return -1; /* data after padding */
                v[k] = b64_val(in[i + k]);
                if (v[k] < 0)
                    return -1;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        int n = 3 - pad;
        if (o + (size_t)n > out_cap)
            return -1;
        out[o++] = (uint8_t)(w >> 16);
        if (n > 1)
            out[o++] = (uint8_t)(w >> 8);
        if (n > 2)
            out[o++] = (uint8_t)w;
    }
    return (long)o;
}

/* ---- primitives ---- */

static int hmac256(const uint8_t *key, size_t key_len, const void *msg, size_t msg_len,
                   uint8_t out[SCRAM_KEY_LEN])
{
    unsigned int n = SCRAM_KEY_LEN;
    return HMAC(EVP_sha256(), key, (int)key_len, msg, msg_len, out, &n) ? 0 : -1;
}

/* SaltedPassword -> StoredKey, ServerKey. */
static int derive_keys(const char *password, size_t pw_len, const uint8_t *salt,
                       size_t salt_len, int iterations, uint8_t stored[SCRAM_KEY_LEN],
                       uint8_t server[SCRAM_KEY_LEN])
{
    uint8_t salted[SCRAM_KEY_LEN], client[SCRAM_KEY_LEN];
    if (PKCS5_PBKDF2_HMAC(password, (int)pw_len, salt, (int)salt_len, iterations, EVP_sha256(),
                          SCRAM_KEY_LEN, salted) != 1)
        return -1;
    if (hmac256(salted, sizeof salted, "Client Key", 10, client) ||
        hmac256(salted, sizeof salted, "Server Key", 10, server))
        return -1;
    SHA256(client, sizeof client, stored);
    OPENSSL_cleanse(salted, sizeof salted);
    OPENSSL_cleanse(client, sizeof client);
    return 0;
}

int scram_make_verifier(const char *password, size_t password_len, int iterations, char *out,
                        size_t out_cap, QrError *err)
{
    uint8_t salt[SCRAM_SALT_LEN], stored[SCRAM_KEY_LEN], server[SCRAM_KEY_LEN];
    if (RAND_bytes(salt, sizeof salt) != 1 ||
        derive_keys(password, password_len, salt, sizeof salt, iterations, stored, server))
        return qr_error_set(err, QR_EINTERNAL, "cannot compute a SCRAM verifier (libcrypto)");
    char s64[64], k1[64], k2[64];
    scram_b64_encode(salt, sizeof salt, s64, sizeof s64);
    scram_b64_encode(stored, sizeof stored, k1, sizeof k1);
    scram_b64_encode(server, sizeof server, k2, sizeof k2);
    int n = snprintf(out, out_cap, "SCRAM-SHA-256$%d:%s$%s:%s", iterations, s64, k1, k2);
    if (n < 0 || (size_t)n >= out_cap)
        return qr_error_set(err, QR_EINTERNAL, "SCRAM verifier buffer too small");
    return QR_OK;
}

int scram_parse_verifier(const char *text, ScramVerifier *v, QrError *err)
{
    memset(v, 0, sizeof *v);
    const char *p = text;
    if (strncmp(p, "SCRAM-SHA-256$", 14) != 0)
        goto bad;
    p += 14;
    char *end;
    long it = strtol(p, &end, 10);
    if (end == p || *end != ':' || it < 1 || it > 10000000)
        goto bad;
    v->iterations = (int)it;
    p = end + 1;
    const char *d1 = strchr(p, '$');
    if (!d1)
        goto bad;
    long n = scram_b64_decode(p, (size_t)(d1 - p), v->salt, sizeof v->salt);
    if (n <= 0)
        goto bad;
    v->salt_len = (size_t)n;
    p = d1 + 1;
    const char *c1 = strchr(p, ':');
    if (!c1 || scram_b64_decode(p, (size_t)(c1 - p), v->stored_key, SCRAM_KEY_LEN) !=
                   SCRAM_KEY_LEN)
        goto bad;
    p = c1 + 1;
    if (scram_b64_decode(p, strlen(p), v->server_key, SCRAM_KEY_LEN) != SCRAM_KEY_LEN)
        goto bad;
    return QR_OK;
bad:
    qr_error_set(err, QR_EINVAL, "malformed SCRAM-SHA-256 verifier");
    qr_error_hint(err, "set the password again with quarry user add");
    return QR_EINVAL;
}

/* ---- server side ---- */

int scram_server_init(ScramServer *s, const char *verifier, QrError *err)
{
    memset(s, 0, sizeof *s);
    if (verifier)
        return scram_parse_verifier(verifier, &s->v, err);
    /* unknown user: random keys nobody can match */
    s->is_mock = true;
    s->v.iterations = SCRAM_ITERATIONS;
    s->v.salt_len = SCRAM_SALT_LEN;
    if (RAND_bytes(s->v.salt, SCRAM_SALT_LEN) != 1 ||
        RAND_bytes(s->v.stored_key, SCRAM_KEY_LEN) != 1 ||
        RAND_bytes(s->v.server_key, SCRAM_KEY_LEN) != 1)
        return qr_error_set(err, QR_EINTERNAL, "cannot draw random bytes (libcrypto)");
    return QR_OK;
}

static int proto_err(QrError *err, const char *what)
{
    qr_error_set(err, QR_EAUTH, "malformed SCRAM message");
    qr_error_detail(err, "%s", what);
    qr_error_set_sqlstate(err, "08P01");
    return QR_EAUTH;
}

/* Bounded copy of [p, p+n) into dst[cap] as a C string; false if too long. */
static bool copy_str(char *dst, size_t cap, const char *p, size_t n)
{
    if (n >= cap)
        return false;
    memcpy(dst, p, n);
    dst[n] = 0;
    return true;
}

int scram_server_first(ScramServer *s, const char *msg, size_t len, char *out, size_t out_cap,
                       QrError *err)
{
    if (s->stage != SCRAM_START)
        return proto_err(err, "client-first-message out of order");
    if (memchr(msg, 0, len))
        return proto_err(err, "NUL byte in client-first-message");
    /* gs2-header: cbind-flag "," [authzid] "," */
    if (len < 3)
        return proto_err(err, "client-first-message too short");
    if (msg[0] == 'p')
        return proto_err(err, "channel binding is not supported (no TLS on this port)");
    if ((msg[0] != 'n' && msg[0] != 'y') || msg[1] != ',')
        return proto_err(err, "unexpected channel binding flag");
    const char *c2 = memchr(msg + 2, ',', len - 2);
    if (!c2)
        return proto_err(err, "gs2 header is not terminated");
    if (c2 != msg + 2)
        return proto_err(err, "authorization identity is not supported");
    size_t hdr_len = (size_t)(c2 + 1 - msg);
    if (!copy_str(s->gs2_header, sizeof s->gs2_header, msg, hdr_len))
        return proto_err(err, "gs2 header too long");
    const char *bare = c2 + 1;
    size_t bare_len = len - hdr_len;
    if (!copy_str(s->client_first_bare, sizeof s->client_first_bare, bare, bare_len))
        return proto_err(err, "client-first-message too long");
    /* n=<user>,r=<nonce>[,ext...] */
    const char *b = s->client_first_bare;
    if (strncmp(b, "n=", 2) != 0)
        return proto_err(err, "expected n= in client-first-message");
    const char *r = strstr(b, ",r=");
    if (!r)
        return proto_err(err, "expected r= in client-first-message");
    r += 3;
    size_t cn_len = strcspn(r, ",");
    if (cn_len == 0)
        return proto_err(err, "empty client nonce");
    for (size_t i = 0; i < cn_len; i++)
        if (r[i] < 0x21 || r[i] > 0x7e)
            return proto_err(err, "client nonce has non-printable characters");
    uint8_t rnd[SCRAM_NONCE_LEN];
    char snonce[64], salt64[128];
    if (RAND_bytes(rnd, sizeof rnd) != 1)
        return qr_error_set(err, QR_EINTERNAL, "cannot draw random bytes (libcrypto)");
    scram_b64_encode(rnd, sizeof rnd, snonce, sizeof snonce);
    scram_b64_encode(s->v.salt, s->v.salt_len, salt64, sizeof salt64);
    int n = snprintf(s->nonce, sizeof s->nonce, "%.*s%s", (int)cn_len, r, snonce);
    if (n < 0 || (size_t)n >= sizeof s->nonce)
        return proto_err(err, "client nonce too long");
    n = snprintf(s->server_first, sizeof s->server_first, "r=%s,s=%s,i=%d", s->nonce, salt64,
                 s->v.iterations);
    if (n < 0 || (size_t)n >= sizeof s->server_first || (size_t)n >= out_cap)
        return proto_err(err, "client nonce too long");
    memcpy(out, s->server_first, (size_t)n + 1);
    s->stage = SCRAM_SENT_FIRST;
    return QR_OK;
}

int scram_server_final(ScramServer *s, const char *msg, size_t len, char *out, size_t out_cap,
                       QrError *err)
{
    if (s->stage != SCRAM_SENT_FIRST)
        return proto_err(err, "client-final-message out of order");
    if (memchr(msg, 0, len) || len > 1024)
        return proto_err(err, "malformed client-final-message");
    char m[1100];
    memcpy(m, msg, len);
    m[len] = 0;
    s->stage = SCRAM_DONE;
    /* c=<b64 gs2 header>,r=<nonce>[,ext...],p=<proof> */
    if (strncmp(m, "c=", 2) != 0)
        return proto_err(err, "expected c= in client-final-message");
    size_t c_len = strcspn(m + 2, ",");
    uint8_t cb[128];
    long cbn = scram_b64_decode(m + 2, c_len, cb, sizeof cb);
    if (cbn < 0 || (size_t)cbn != strlen(s->gs2_header) ||
        memcmp(cb, s->gs2_header, (size_t)cbn) != 0)
        return proto_err(err, "channel binding data does not match the gs2 header");
    const char *r = m + 2 + c_len;
    if (strncmp(r, ",r=", 3) != 0)
        return proto_err(err, "expected r= in client-final-message");
    r += 3;
    size_t r_len = strcspn(r, ",");
    if (r_len != strlen(s->nonce) || memcmp(r, s->nonce, r_len) != 0)
        return proto_err(err, "nonce does not match");
    char *p = strstr(m, ",p=");
    if (!p)
        return proto_err(err, "expected p= in client-final-message");
    uint8_t proof[SCRAM_KEY_LEN];
    if (scram_b64_decode(p + 3, strlen(p + 3), proof, sizeof proof) != SCRAM_KEY_LEN)
        return proto_err(err, "malformed client proof");
    size_t without_proof = (size_t)(p - m);
    /* AuthMessage */
    char auth[2048];
    int an = snprintf(auth, sizeof auth, "%s,%s,%.*s", s->client_first_bare, s->server_first,
                      (int)without_proof, m);
    if (an < 0 || (size_t)an >= sizeof auth)
        return proto_err(err, "SCRAM messages too long");
    uint8_t sig[SCRAM_KEY_LEN], client_key[SCRAM_KEY_LEN], check[SCRAM_KEY_LEN];
    if (hmac256(s->v.stored_key, SCRAM_KEY_LEN, auth, (size_t)an, sig))
        return qr_error_set(err, QR_EINTERNAL, "HMAC failed (libcrypto)");
    for (int i = 0; i < SCRAM_KEY_LEN; i++)
        client_key[i] = proof[i] ^ sig[i];
    SHA256(client_key, SCRAM_KEY_LEN, check);
    if (s->is_mock || CRYPTO_memcmp(check, s->v.stored_key, SCRAM_KEY_LEN) != 0)
        return qr_error_set(err, QR_EAUTH, "password authentication failed");
    uint8_t server_sig[SCRAM_KEY_LEN];
    if (hmac256(s->v.server_key, SCRAM_KEY_LEN, auth, (size_t)an, server_sig))
        return qr_error_set(err, QR_EINTERNAL, "HMAC failed (libcrypto)");
    char sig64[64];
    scram_b64_encode(server_sig, SCRAM_KEY_LEN, sig64, sizeof sig64);
    if ((size_t)snprintf(out, out_cap, "v=%s", sig64) >= out_cap)
        return qr_error_set(err, QR_EINTERNAL, "SCRAM output buffer too small");
    return QR_OK;
}

int scram_client_final(const char *password, const char *client_first_bare,
                       const char *server_first, const char *gs2_header, char *out,
                       size_t out_cap, uint8_t server_sig[SCRAM_KEY_LEN], QrError *err)
{
    /* r=<nonce>,s=<salt>,i=<iter> */
    char nonce[256], salt64[128];
    int iter = 0;
    if (sscanf(server_first, "r=%255[^,],s=%127[^,],i=%d", nonce, salt64, &iter) != 3 ||
        iter < 1)
        return qr_error_set(err, QR_EINVAL, "malformed server-first-message");
    uint8_t salt[96], stored[SCRAM_KEY_LEN], server[SCRAM_KEY_LEN];
    long sl = scram_b64_decode(salt64, strlen(salt64), salt, sizeof salt);
    if (sl <= 0)
        return qr_error_set(err, QR_EINVAL, "malformed salt");
    uint8_t salted[SCRAM_KEY_LEN], client_key[SCRAM_KEY_LEN];
    if (PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt, (int)sl, iter, EVP_sha256(),
                          SCRAM_KEY_LEN, salted) != 1 ||
        hmac256(salted, sizeof salted, "Client Key", 10, client_key) ||
        hmac256(salted, sizeof salted, "Server Key", 10, server))
        return qr_error_set(err, QR_EINTERNAL, "libcrypto failed");
    SHA256(client_key, SCRAM_KEY_LEN, stored);
    char cb64[128], without[512];
    scram_b64_encode((const uint8_t *)gs2_header, strlen(gs2_header), cb64, sizeof cb64);
    snprintf(without, sizeof without, "c=%s,r=%s", cb64, nonce);
    char auth[2048];
    snprintf(auth, sizeof auth, "%s,%s,%s", client_first_bare, server_first, without);
    uint8_t sig[SCRAM_KEY_LEN], proof[SCRAM_KEY_LEN];
    hmac256(stored, SCRAM_KEY_LEN, auth, strlen(auth), sig);
    for (int i = 0; i < SCRAM_KEY_LEN; i++)
        proof[i] = client_key[i] ^ sig[i];
    char p64[64];
    scram_b64_encode(proof, SCRAM_KEY_LEN, p64, sizeof p64);
    hmac256(server, SCRAM_KEY_LEN, auth, strlen(auth), server_sig);
    if ((size_t)snprintf(out, out_cap, "%s,p=%s", without, p64) >= out_cap)
        return qr_error_set(err, QR_EINVAL, "output buffer too small");
    return QR_OK;
}

/* ---- the user file ---- */

static void users_path(const char *data_dir, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", data_dir, SCRAM_USERS_FILE);
}

int scram_users_load(const char *data_dir, ScramUsers *out, QrError *err)
{
    out->users = NULL;
    out->n = 0;
    char path[4096];
    users_path(data_dir, path, sizeof path);
    cJSON *root, *arr;
    int rc = secret_file_read(path, "users", "user file", &root, &arr, err);
    if (rc != QR_OK || !root)
        return rc;
    int n = cJSON_GetArraySize(arr);
    out->users = qr_calloc((size_t)(n > 0 ? n : 1), sizeof(ScramUser));
    if (!out->users) {
        cJSON_Delete(root);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        const cJSON *ver = cJSON_GetObjectItemCaseSensitive(it, "verifier");
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
        ScramVerifier v;
        if (!cJSON_IsString(name) || !cJSON_IsString(ver) || !secret_name_valid(name->valuestring, sizeof(((ScramUser *)0)->name) - 1) ||
            strlen(ver->valuestring) >= sizeof out->users[0].verifier ||
            scram_parse_verifier(ver->valuestring, &v, NULL) != QR_OK) {
            qr_error_set(err, QR_ESYNTAX, "malformed entry %d in user file %s", out->n + 1,
                         SCRAM_USERS_FILE);
            cJSON_Delete(root);
            scram_users_free(out);
            return QR_ESYNTAX;
        }
        ScramUser *u = &out->users[out->n++];
        snprintf(u->name, sizeof u->name, "%s", name->valuestring);
        snprintf(u->verifier, sizeof u->verifier, "%s", ver->valuestring);
        u->role = cJSON_IsString(role) && !strcmp(role->valuestring, "read-only")
                      ? SCRAM_ROLE_READ_ONLY
                      : SCRAM_ROLE_READ_WRITE;
    }
    cJSON_Delete(root);
    return QR_OK;
}

void scram_users_free(ScramUsers *u)
{
    if (!u)
        return;
    qr_free(u->users);
    u->users = NULL;
    u->n = 0;
}

const ScramUser *scram_users_find(const ScramUsers *u, const char *name)
{
    for (int i = 0; i < u->n; i++)
        if (!strcmp(u->users[i].name, name))
            return &u->users[i];
    return NULL;
}

static int users_write(const char *data_dir, const ScramUsers *u, QrError *err)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(root, "users");
    for (int i = 0; i < u->n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", u->users[i].name);
        cJSON_AddStringToObject(o, "role", u->users[i].role == SCRAM_ROLE_READ_ONLY
                                               ? "read-only"
                                               : "read-write");
        cJSON_AddStringToObject(o, "verifier", u->users[i].verifier);
        cJSON_AddItemToArray(arr, o);
    }
    char path[4096];
    users_path(data_dir, path, sizeof path);
    int rc = secret_file_write(path, root, err);
    cJSON_Delete(root);
    return rc;
}

int scram_users_put(const char *data_dir, const char *name, const char *password,
                    ScramRole role, QrError *err)
{
    if (!secret_name_valid(name, sizeof(((ScramUser *)0)->name) - 1)) {
        qr_error_set(err, QR_EINVAL, "invalid user name \"%s\"", name);
        qr_error_hint(err, "use 1 to 63 letters, digits, '_', '-' or '.'");
        return QR_EINVAL;
    }
    if (!password[0])
        return qr_error_set(err, QR_EINVAL, "empty password");
    ScramUsers u;
    int rc = scram_users_load(data_dir, &u, err);
    if (rc != QR_OK)
        return rc;
    ScramUser *slot = (ScramUser *)scram_users_find(&u, name);
    if (!slot) {
        ScramUser *grown = qr_realloc(u.users, (size_t)(u.n + 1) * sizeof *grown);
        if (!grown) {
            scram_users_free(&u);
            return qr_error_set(err, QR_ENOMEM, "out of memory");
        }
        u.users = grown;
        slot = &u.users[u.n++];
        memset(slot, 0, sizeof *slot);
        snprintf(slot->name, sizeof slot->name, "%s", name);
    }
    slot->role = role;
    rc = scram_make_verifier(password, strlen(password), SCRAM_ITERATIONS, slot->verifier,
                             sizeof slot->verifier, err);
    if (rc == QR_OK)
        rc = users_write(data_dir, &u, err);
    scram_users_free(&u);
    return rc;
}

int scram_users_remove(const char *data_dir, const char *name, QrError *err)
{
    ScramUsers u;
    int rc = scram_users_load(data_dir, &u, err);
    if (rc != QR_OK)
        return rc;
    int at = -1;
    for (int i = 0; i < u.n; i++)
        if (!strcmp(u.users[i].name, name))
            at = i;
    if (at < 0) {
        scram_users_free(&u);
        return qr_error_set(err, QR_ENOTFOUND, "user \"%s\" does not exist", name);
    }
    memmove(&u.users[at], &u.users[at + 1], (size_t)(u.n - at - 1) * sizeof u.users[0]);
    u.n--;
    rc = users_write(data_dir, &u, err);
    scram_users_free(&u);
    return rc;
}
