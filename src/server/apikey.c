/*
 * apikey.c — API keys for the HTTP port (see apikey.h for the key and file
 * formats): loading and reloading the key file, constant-time checks,
 * adding and removing keys, and `quarry key`.
 *
 * Layer: server/.  Calls the base kit, cJSON and libcrypto.
 */
#include "server/apikey.h"
#include "server/secret_file.h"
#include "store/mem.h"
#include "store/util.h"

#include "query/quarry.h"

#include <cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define SALT_LEN 16

typedef struct ApiKey {
    char name[APIKEY_NAME_MAX + 1];
    ApiScope scope;
    uint8_t salt[SALT_LEN];
    uint8_t hash[SHA256_DIGEST_LENGTH];   /* SHA-256(salt || key) */
    char tables[APIKEY_TABLES_MAX];       /* "a,b", "" = every table */
    int64_t expires;                      /* Unix seconds, 0 = never */
} ApiKey;

/* Invariant: keys[0..n) is the file as of `mtime`/`size`; lock guards all. */
struct ApiKeys {
    char path[4096];
    pthread_mutex_t lock;
    ApiKey *keys;                 /* owns */
    int n;
    struct timespec mtime;        /* of the file loaded, zero when absent */
    off_t size;
    time_t checked;               /* last stat, seconds */
};

static const struct {
    ApiScope s;
    const char *name;
} SCOPES[] = {{API_SCOPE_SEARCH, "search"}, {API_SCOPE_WRITE, "write"}, {API_SCOPE_ADMIN, "admin"}};

const char *apikey_scope_name(ApiScope s)
{
    for (size_t i = 0; i < sizeof SCOPES / sizeof SCOPES[0]; i++)
        if (SCOPES[i].s == s)
            return SCOPES[i].name;
    return "none";
}

ApiScope apikey_scope_parse(const char *name)
{
    for (size_t i = 0; i < sizeof SCOPES / sizeof SCOPES[0]; i++)
        if (!strcmp(SCOPES[i].name, name))
            return SCOPES[i].s;
    return API_SCOPE_NONE;
}

static void hex_encode(const uint8_t *p, size_t n, char *out)
{
    static const char H[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = H[p[i] >> 4];
        out[2 * i + 1] = H[p[i] & 15];
    }
    out[2 * n] = 0;
}

static bool hex_decode(const char *s, uint8_t *out, size_t n)
{
    if (strlen(s) != 2 * n)
        return false;
    for (size_t i = 0; i < 2 * n; i++) {
        char c = s[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0)
            return false;
        if (i % 2 == 0)
            out[i / 2] = (uint8_t)(v << 4);
        else
            out[i / 2] |= (uint8_t)v;
    }
    return true;
}

/* SHA-256(salt || key).  Keys longer than APIKEY_LEN never match, and
 * their length says nothing secret, so they hash only a prefix. */
static void hash_key(const uint8_t *salt, const char *key, size_t len,
                     uint8_t out[SHA256_DIGEST_LENGTH])
{
    uint8_t buf[SALT_LEN + APIKEY_LEN + 1];
    if (len > APIKEY_LEN + 1)
        len = APIKEY_LEN + 1;
    memcpy(buf, salt, SALT_LEN);
    memcpy(buf + SALT_LEN, key, len);
    SHA256(buf, SALT_LEN + len, out);
    OPENSSL_cleanse(buf, sizeof buf);
}

/* Parse the key file at path into keys and n (absent file: none). */
static int keys_read(const char *path, ApiKey **keys, int *n, QrError *err)
{
    *keys = NULL;
    *n = 0;
    cJSON *root, *arr;
    int rc = secret_file_read(path, "keys", "key file", &root, &arr, err);
    if (rc != QR_OK || !root)
        return rc;
    int cap = cJSON_GetArraySize(arr);
    ApiKey *k = qr_calloc((size_t)(cap > 0 ? cap : 1), sizeof *k);
    if (!k) {
        cJSON_Delete(root);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, arr)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        const cJSON *scope = cJSON_GetObjectItemCaseSensitive(it, "scope");
        const cJSON *salt = cJSON_GetObjectItemCaseSensitive(it, "salt");
        const cJSON *hash = cJSON_GetObjectItemCaseSensitive(it, "hash");
        if (!cJSON_IsString(name) || !cJSON_IsString(scope) || !cJSON_IsString(salt) ||
            !cJSON_IsString(hash) || !secret_name_valid(name->valuestring, APIKEY_NAME_MAX) ||
            !(k[i].scope = apikey_scope_parse(scope->valuestring)) ||
            !hex_decode(salt->valuestring, k[i].salt, SALT_LEN) ||
            !hex_decode(hash->valuestring, k[i].hash, sizeof k[i].hash)) {
            qr_error_set(err, QR_ESYNTAX, "malformed entry %d in key file %s", i + 1, APIKEY_FILE);
            cJSON_Delete(root);
            qr_free(k);
            return QR_ESYNTAX;
        }
        snprintf(k[i].name, sizeof k[i].name, "%s", name->valuestring);
        const cJSON *tables = cJSON_GetObjectItemCaseSensitive(it, "tables");
        const cJSON *exp = cJSON_GetObjectItemCaseSensitive(it, "expires");
        bool ok = !exp || (cJSON_IsNumber(exp) && exp->valuedouble >= 0 && exp->valuedouble < 1e15);
        if (exp && ok)
            k[i].expires = (int64_t)exp->valuedouble;
        if (tables && !cJSON_IsArray(tables))
            ok = false;
        const cJSON *tn;
        cJSON_ArrayForEach(tn, tables)
        {
            size_t used = strlen(k[i].tables);
            if (!cJSON_IsString(tn) || !qr_name_valid(tn->valuestring) ||
                used + strlen(tn->valuestring) + 2 > sizeof k[i].tables) {
                ok = false;
                break;
            }
            snprintf(k[i].tables + used, sizeof k[i].tables - used, "%s%s", used ? "," : "",
                     tn->valuestring);
        }
        if (!ok || (tables && !k[i].tables[0])) {
            qr_error_set(err, QR_ESYNTAX, "malformed limits of key \"%s\" in key file %s",
                         k[i].name, APIKEY_FILE);
            qr_error_detail(err, "\"tables\" must be a non-empty list of table names, "
                                 "\"expires\" Unix seconds");
            cJSON_Delete(root);
            qr_free(k);
            return QR_ESYNTAX;
        }
        i++;
    }
    cJSON_Delete(root);
    *keys = k;
    *n = i;
    return QR_OK;
}

static int keys_write(const char *path, const ApiKey *keys, int n, QrError *err)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = root ? cJSON_AddArrayToObject(root, "keys") : NULL;
    for (int i = 0; arr && i < n; i++) {
        char salt[2 * SALT_LEN + 1], hash[2 * SHA256_DIGEST_LENGTH + 1];
        hex_encode(keys[i].salt, SALT_LEN, salt);
        hex_encode(keys[i].hash, sizeof keys[i].hash, hash);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", keys[i].name);
        cJSON_AddStringToObject(o, "scope", apikey_scope_name(keys[i].scope));
        cJSON_AddStringToObject(o, "salt", salt);
        cJSON_AddStringToObject(o, "hash", hash);
        if (keys[i].tables[0]) {
            cJSON *t = cJSON_AddArrayToObject(o, "tables");
            for (const char *p = keys[i].tables; t && *p;) {
                size_t w = strcspn(p, ",");
                char one[QR_NAME_MAX + 1];
                snprintf(one, sizeof one, "%.*s", (int)w, p);
                cJSON_AddItemToArray(t, cJSON_CreateString(one));
                p += w + (p[w] == ',');
            }
        }
        if (keys[i].expires)
            cJSON_AddNumberToObject(o, "expires", (double)keys[i].expires);
        cJSON_AddItemToArray(arr, o);
    }
    int rc = arr ? secret_file_write(path, root, err)
                 : qr_error_set(err, QR_ENOMEM, "out of memory");
    cJSON_Delete(root);
    return rc;
}

/* Reload when the file's mtime or size changed; caller holds k->lock.  A
 * file that became unreadable or malformed keeps the keys loaded before
 * (failing closed would lock everyone out on a half-edited file; failing
 * open is never done). */
static void keys_refresh(ApiKeys *k, bool force)
{
    time_t now = time(NULL);
    if (!force && now == k->checked)
        return;
    k->checked = now;
    struct stat st;
    struct timespec mt = {0, 0};
    off_t size = 0;
    if (stat(k->path, &st) == 0) {
        mt = st.st_mtim;
        size = st.st_size;
    }
    if (!force && mt.tv_sec == k->mtime.tv_sec && mt.tv_nsec == k->mtime.tv_nsec &&
        size == k->size)
        return;
    ApiKey *keys;
    int n;
    QrError e;
    qr_error_clear(&e);
    if (keys_read(k->path, &keys, &n, &e) != QR_OK) {
        qr_log(QR_LOG_WARN, "http api_keys reload failed: %s (keeping %d keys)", e.message, k->n);
        return;
    }
    qr_free(k->keys);
    k->keys = keys;
    k->n = n;
    k->mtime = mt;
    k->size = size;
}

int apikey_open(const char *data_dir, ApiKeys **out, QrError *err)
{
    *out = NULL;
    ApiKeys *k = qr_calloc(1, sizeof *k);
    if (!k)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    snprintf(k->path, sizeof k->path, "%s/%s", data_dir, APIKEY_FILE);
    int rc = keys_read(k->path, &k->keys, &k->n, err);
    if (rc != QR_OK) {
        qr_free(k);
        return rc;
    }
    struct stat st;
    if (stat(k->path, &st) == 0) {
        k->mtime = st.st_mtim;
        k->size = st.st_size;
    }
    k->checked = time(NULL);
    pthread_mutex_init(&k->lock, NULL);
    *out = k;
    return QR_OK;
}

void apikey_free(ApiKeys *k)
{
    if (!k)
        return;
    pthread_mutex_destroy(&k->lock);
    qr_free(k->keys);
    qr_free(k);
}

int apikey_count(ApiKeys *k)
{
    pthread_mutex_lock(&k->lock);
    keys_refresh(k, false);
    int n = k->n;
    pthread_mutex_unlock(&k->lock);
    return n;
}

ApiScope apikey_check(ApiKeys *k, const char *token, size_t len, char *name, size_t cap)
{
    ApiKeyInfo info;
    ApiScope s = apikey_check_info(k, token, len, &info);
    if (s != API_SCOPE_NONE && name && cap)
        snprintf(name, cap, "%s", info.name);
    return s;
}

bool apikey_table_ok(const char *tables, const char *table)
{
    if (!tables[0])
        return true;
    size_t tl = strlen(table);
    for (const char *p = tables; *p;) {
        size_t n = strcspn(p, ",");
        if (n == tl && !strncmp(p, table, n))
            return true;
        p += n + (p[n] == ',');
    }
    return false;
}

ApiScope apikey_check_info(ApiKeys *k, const char *token, size_t len, ApiKeyInfo *info)
{
    ApiScope found = API_SCOPE_NONE;
    pthread_mutex_lock(&k->lock);
    keys_refresh(k, false);
    /* every key is hashed and compared, so the time taken does not say
     * which key (or how much of one) matched */
    for (int i = 0; i < k->n; i++) {
        uint8_t h[SHA256_DIGEST_LENGTH];
        hash_key(k->keys[i].salt, token, len, h);
        if (CRYPTO_memcmp(h, k->keys[i].hash, sizeof h) == 0 && found == API_SCOPE_NONE) {
            found = k->keys[i].scope;
            if (info) {
                snprintf(info->name, sizeof info->name, "%s", k->keys[i].name);
                info->scope = found;
                memcpy(info->tables, k->keys[i].tables, sizeof info->tables);
                info->expires = k->keys[i].expires;
            }
        }
    }
    pthread_mutex_unlock(&k->lock);
    return found;
}

/* The key file of data_dir into path[cap], keys and n, with *at the index
 * of `name` (-1 when absent).  On failure nothing is left to free. */
static int keys_edit(const char *data_dir, const char *name, char *path, size_t cap,
                     ApiKey **keys, int *n, int *at, QrError *err)
{
    snprintf(path, cap, "%s/%s", data_dir, APIKEY_FILE);
    int rc = keys_read(path, keys, n, err);
    *at = -1;
    for (int i = 0; rc == QR_OK && i < *n; i++)
        if (!strcmp((*keys)[i].name, name))
            *at = i;
    return rc;
}

int apikey_add(const char *data_dir, const char *name, ApiScope scope, char *key, QrError *err)
{
    return apikey_add_limited(data_dir, name, scope, NULL, 0, key, err);
}

bool apikey_parse_expiry(const char *s, int64_t now, int64_t *out)
{
    if (s[0] == '+') {
        char *end;
        errno = 0;
        long long v = strtoll(s + 1, &end, 10);
        int64_t unit = *end == 'd' ? 86400 : *end == 'h' ? 3600 : *end == 'm' ? 60
                     : *end == 's' ? 1 : 0;
        if (errno || end == s + 1 || v < 0 || !unit || end[1] || v > (int64_t)1e12 / unit)
            return false;
        *out = now + v * unit;
        return true;
    }
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *e = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (e && (!strcmp(e, "Z") || !*e)) {
        *out = (int64_t)timegm(&tm);
        return *out > 0;
    }
    memset(&tm, 0, sizeof tm);
    e = strptime(s, "%Y-%m-%d", &tm);
    if (!e || *e)
        return false;
    *out = (int64_t)timegm(&tm);
    return *out > 0;
}

int apikey_add_limited(const char *data_dir, const char *name, ApiScope scope,
                       const char *tables, int64_t expires, char *key, QrError *err)
{
    char tl[APIKEY_TABLES_MAX] = "";
    for (const char *p = tables ? tables : ""; *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        size_t n = strcspn(p, ", ");
        if (!n)
            break;
        char one[QR_NAME_MAX + 2];
        snprintf(one, sizeof one, "%.*s", (int)(n > QR_NAME_MAX + 1 ? QR_NAME_MAX + 1 : n), p);
        if (n > QR_NAME_MAX || !qr_name_valid(one))
            return qr_error_set(err, QR_EINVAL, "invalid table name \"%.80s\" in --tables", one);
        size_t used = strlen(tl);
        if (used + n + 2 > sizeof tl)
            return qr_error_set(err, QR_EINVAL, "the table list is longer than %d bytes",
                                APIKEY_TABLES_MAX - 1);
        snprintf(tl + used, sizeof tl - used, "%s%s", used ? "," : "", one);
        p += n;
    }
    if (expires < 0)
        return qr_error_set(err, QR_EINVAL, "invalid expiry time");
    if (!secret_name_valid(name, APIKEY_NAME_MAX)) {
        qr_error_set(err, QR_EINVAL, "invalid key name \"%.80s\"", name);
        qr_error_hint(err, "use 1 to %d letters, digits, '_', '-' or '.'", APIKEY_NAME_MAX);
        return QR_EINVAL;
    }
    if (scope < API_SCOPE_SEARCH || scope > API_SCOPE_ADMIN)
        return qr_error_set(err, QR_EINVAL, "invalid key scope");
    char path[4096];
    ApiKey *keys;
    int n, at;
    int rc = keys_edit(data_dir, name, path, sizeof path, &keys, &n, &at, err);
    if (rc != QR_OK)
        return rc;
    if (at < 0) {
        ApiKey *grown = qr_realloc(keys, (size_t)(n + 1) * sizeof *grown);
        if (!grown) {
            qr_free(keys);
            return qr_error_set(err, QR_ENOMEM, "out of memory");
        }
        keys = grown;
        at = n++;
        memset(&keys[at], 0, sizeof keys[at]);
        snprintf(keys[at].name, sizeof keys[at].name, "%s", name);
    }
    uint8_t secret[32];
    if (RAND_bytes(secret, sizeof secret) != 1 || RAND_bytes(keys[at].salt, SALT_LEN) != 1) {
        qr_free(keys);
        return qr_error_set(err, QR_EINTERNAL, "no random bytes from libcrypto");
    }
    memcpy(key, "qk_", 3);
    hex_encode(secret, sizeof secret, key + 3);
    OPENSSL_cleanse(secret, sizeof secret);
    keys[at].scope = scope;
    memcpy(keys[at].tables, tl, sizeof tl);
    keys[at].expires = expires;
    hash_key(keys[at].salt, key, APIKEY_LEN, keys[at].hash);
    rc = keys_write(path, keys, n, err);
    qr_free(keys);
    return rc;
}

int apikey_remove(const char *data_dir, const char *name, QrError *err)
{
    char path[4096];
    ApiKey *keys;
    int n, at;
    int rc = keys_edit(data_dir, name, path, sizeof path, &keys, &n, &at, err);
    if (rc != QR_OK)
        return rc;
    if (at < 0) {
        qr_free(keys);
        return qr_error_set(err, QR_ENOTFOUND, "key \"%.80s\" does not exist", name);
    }
    memmove(&keys[at], &keys[at + 1], (size_t)(n - at - 1) * sizeof keys[0]);
    rc = keys_write(path, keys, n - 1, err);
    qr_free(keys);
    return rc;
}

/* ---- quarry key ---- */

static void key_usage(void)
{
    fprintf(stderr, "usage: quarry key add NAME [--scope search|write|admin] [--tables T1,T2]\n"
                    "                      [--expires 2027-01-01|2027-01-01T12:00:00Z|+30d]"
                    " [--data DIR]\n"
                    "       quarry key remove NAME [--data DIR]\n"
                    "       quarry key list [--data DIR]\n"
                    "  add prints the new key once; only a salted hash is stored\n");
}

/* "--flag VALUE" / "--flag=VALUE" into the matching slot of vals, other
 * words into pos[0..n_pos); false (message printed) on anything else. */
static bool key_args(int argc, char **argv, const char *const *flags, const char **vals,
                     const char **pos, int n_pos)
{
    int n_seen = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            if (n_seen == n_pos) {
                fprintf(stderr, "quarry key: unexpected argument \"%s\"\n", a);
                return false;
            }
            pos[n_seen++] = a;
            continue;
        }
        int f = -1;
        size_t fl = 0;
        for (int k = 0; flags[k]; k++) {
            fl = strlen(flags[k]);
            if (!strncmp(a, "--", 2) && !strncmp(a + 2, flags[k], fl) &&
                (a[2 + fl] == 0 || a[2 + fl] == '=')) {
                f = k;
                break;
            }
        }
        if (f < 0 || (a[2 + fl] == 0 && i + 1 >= argc)) {
            fprintf(stderr, "quarry key: %s option %s\n", f < 0 ? "unknown" : "no value for", a);
            return false;
        }
        vals[f] = a[2 + fl] == '=' ? a + 3 + fl : argv[++i];
    }
    return true;
}

int cmd_key(int argc, char **argv)
{
    static const char *const FLAGS[] = {"data", "scope", "tables", "expires", NULL};
    const char *vals[] = {"./data", "search", NULL, NULL};
    const char *pos[2] = {NULL, NULL};
    if (!key_args(argc, argv, FLAGS, vals, pos, 2)) {
        key_usage();
        return 2;
    }
    const char *data = vals[0], *scope = vals[1], *verb = pos[0], *name = pos[1];
    QrError err;
    qr_error_clear(&err);
    if (verb && !strcmp(verb, "list") && !name) {
        char path[4096];
        ApiKey *keys;
        int n, at;
        if (keys_edit(data, "", path, sizeof path, &keys, &n, &at, &err) != QR_OK) {
            fprintf(stderr, "quarry key: %s\n", err.message);
            return 1;
        }
        for (int i = 0; i < n; i++) {
            /* name, scope, then the limits a key has */
            printf("%s\t%s", keys[i].name, apikey_scope_name(keys[i].scope));
            if (keys[i].tables[0])
                printf("\ttables=%s", keys[i].tables);
            if (keys[i].expires) {
                char exp[32];
                time_t t = (time_t)keys[i].expires;
                struct tm tm;
                strftime(exp, sizeof exp, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
                printf("\texpires=%s", exp);
            }
            putchar('\n');
        }
        qr_free(keys);
        return 0;
    }
    if (!verb || !name || (strcmp(verb, "add") != 0 && strcmp(verb, "remove") != 0)) {
        key_usage();
        return 2;
    }
    if (!strcmp(verb, "remove")) {
        if (apikey_remove(data, name, &err) != QR_OK) {
            fprintf(stderr, "quarry key: %s\n", err.message);
            return 1;
        }
        printf("removed key %s\n", name);
        return 0;
    }
    ApiScope s = apikey_scope_parse(scope);
    if (s == API_SCOPE_NONE) {
        fprintf(stderr, "quarry key: --scope must be search, write or admin\n");
        return 2;
    }
    int64_t expires = 0;
    if (vals[3] && !apikey_parse_expiry(vals[3], (int64_t)time(NULL), &expires)) {
        fprintf(stderr, "quarry key: --expires \"%s\" is not a date (2027-01-01, "
                        "2027-01-01T12:00:00Z, UTC) or a span (+30d, +12h, +45m, +90s)\n", vals[3]);
        return 2;
    }
    char key[APIKEY_LEN + 1];
    if (qr_mkdir_p(data, &err) != QR_OK ||
        apikey_add_limited(data, name, s, vals[2], expires, key, &err) != QR_OK) {
        fprintf(stderr, "quarry key: %s\n", err.message);
        if (err.hint[0])
            fprintf(stderr, "hint: %s\n", err.hint);
        return 1;
    }
    /* the key alone on stdout, so scripts can capture it */
    printf("%s\n", key);
    fprintf(stderr, "key %s (%s) saved in %s/%s; it is shown only this once\n", name, scope, data,
            APIKEY_FILE);
    OPENSSL_cleanse(key, sizeof key);
    return 0;
}
