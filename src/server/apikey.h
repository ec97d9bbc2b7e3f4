/*
 * apikey.h — API keys for the HTTP port: scopes, the key file, checking a
 * bearer token, and `quarry key add|list|remove`.
 *
 * Layer: server/.  Calls the base kit, cJSON and OpenSSL's libcrypto
 * (RAND_bytes, SHA-256, CRYPTO_memcmp).
 *
 * A key is "qk_" followed by 64 hex digits (32 random bytes).  It is shown
 * once by `quarry key add` and never stored: the key file keeps a random
 * salt and SHA-256(salt || key) per key.  The key file is
 * <data>/api_keys.json, written atomically with mode 0600:
 *
 *   {"keys": [{"name": "ci", "scope": "search", "salt": "<32 hex>",
 *              "hash": "<64 hex>", "tables": ["products"], "expires": 1798761600}]}
 *
 * Scopes are ordered: admin includes write, write includes search.  A key
 * may be limited to some tables ("tables", absent = every table) and may
 * expire ("expires", Unix seconds, absent = never); the HTTP server refuses
 * an expired key (401) and a limited key on other tables or on routes that
 * reach beyond one table (403).
 */
#ifndef QR_APIKEY_H
#define QR_APIKEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/error.h"

#define APIKEY_FILE "api_keys.json"
#define APIKEY_LEN 67       /* "qk_" + 64 hex digits */
#define APIKEY_NAME_MAX 63
#define APIKEY_TABLES_MAX 1024 /* bytes of a key's comma-separated table list */

typedef enum ApiScope {
    API_SCOPE_NONE = 0,     /* no key needed (health, the admin page's files) */
    API_SCOPE_SEARCH = 1,   /* read: search, get, describe, SELECT */
    API_SCOPE_WRITE = 2,    /* + ingest, put, delete, SQL writes */
    API_SCOPE_ADMIN = 3,    /* + create/drop table, flush, merge, stats, DDL */
} ApiScope;

const char *apikey_scope_name(ApiScope s);
/* "search" / "write" / "admin" -> scope; API_SCOPE_NONE when unknown. */
ApiScope apikey_scope_parse(const char *name);

/* The keys of one data directory, reloaded when the file changes (checked
 * at most once a second), so keys added or removed while the server runs
 * take effect without a restart.  Thread-safe. */
typedef struct ApiKeys ApiKeys;

/* Load <data_dir>/api_keys.json (absent = no keys).  QR_ESYNTAX on a
 * malformed file, QR_EIO when it cannot be read. */
int apikey_open(const char *data_dir, ApiKeys **out, QrError *err);
void apikey_free(ApiKeys *k);   /* NULL is a no-op */
/* Number of keys now (after a reload check). */
int apikey_count(ApiKeys *k);
/* The scope of `token` (len bytes), or API_SCOPE_NONE when it matches no
 * key.  Every stored hash is compared in constant time; the key's name goes
 * to name[cap] when it matches. */
ApiScope apikey_check(ApiKeys *k, const char *token, size_t len, char *name, size_t cap);

/* What a matching key allows beyond its scope. */
typedef struct ApiKeyInfo {
    char name[APIKEY_NAME_MAX + 1];
    ApiScope scope;
    char tables[APIKEY_TABLES_MAX]; /* "a,b": the only tables it may use; "" = every table */
    int64_t expires;                /* Unix seconds it stops working at; 0 = never */
} ApiKeyInfo;
/* apikey_check that also fills *info (when not NULL) for the matching key. */
ApiScope apikey_check_info(ApiKeys *k, const char *token, size_t len, ApiKeyInfo *info);
/* Is `table` in a key's table list (tables as ApiKeyInfo.tables; "" = any)? */
bool apikey_table_ok(const char *tables, const char *table);

/* Add key `name` (replacing a key of that name) and write the new key,
 * NUL-terminated, to key[APIKEY_LEN + 1].  QR_EINVAL on a bad name. */
int apikey_add(const char *data_dir, const char *name, ApiScope scope, char *key, QrError *err);
/* apikey_add with limits: `tables` a comma-separated list of table names
 * (NULL or "" = every table; QR_EINVAL on a bad name or a list over
 * APIKEY_TABLES_MAX), `expires` Unix seconds (0 = never). */
int apikey_add_limited(const char *data_dir, const char *name, ApiScope scope,
                       const char *tables, int64_t expires, char *key, QrError *err);
/* "2027-01-01", "2027-01-01T12:00:00Z" (UTC) or "+30d" / "+12h" / "+45m" /
 * "+90s" from `now` into Unix seconds; false when malformed. */
bool apikey_parse_expiry(const char *s, int64_t now, int64_t *out);
/* QR_ENOTFOUND when there is no such key. */
int apikey_remove(const char *data_dir, const char *name, QrError *err);

/* `quarry key add NAME --scope S | list | remove NAME [--data DIR]`. */
int cmd_key(int argc, char **argv);

#endif
