/*
 * test_apikey.c — HTTP API keys (server/apikey.c) and the request checks
 * that decide a scope or a query's size (server/http.c).
 *
 * Keys: each key made by apikey_add checks back to its own scope and no
 * other key does (random near-misses: one changed digit, a prefix, a suffix);
 * the file holds no key in clear and has mode 0600; replacing and removing
 * keys, the reload of a changed file, a malformed file, bad names.
 * max_query_terms word counts against hand-written expectations, including
 * words hidden in strings, comments and quotes.  (The SQL a scope allows is
 * decided from libpg_query's parse: tests/unit/query/test_sql_limits.c.)
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/apikey.h"
#include "server/http_int.h"
#include "store/mem.h"
#include "store/util.h"

static char *tmp_dir(void)
{
    char tmpl[] = "/tmp/quarry-apikey-XXXXXX";
    char *d = mkdtemp(tmpl);
    cr_assert(d);
    return strdup(d);
}

static char *slurp(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, APIKEY_FILE);
    uint8_t *t = NULL;
    size_t n = 0;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(qr_file_read_all(path, &t, &n, &e), QR_OK);
    return (char *)t;
}

Test(apikey, keys_check_to_their_scope_only)
{
    char *dir = tmp_dir();
    QrError e;
    qr_error_clear(&e);
    enum { N = 9 };
    char keys[N][APIKEY_LEN + 1];
    ApiScope scopes[N];
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "k%d", i);
        scopes[i] = (ApiScope)(1 + i % 3);
        cr_assert_eq(apikey_add(dir, name, scopes[i], keys[i], &e), QR_OK, "%s", e.message);
        cr_assert_eq(strlen(keys[i]), APIKEY_LEN);
        cr_assert(!strncmp(keys[i], "qk_", 3));
    }
    struct stat st;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, APIKEY_FILE);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600);
    char *text = slurp(dir);
    for (int i = 0; i < N; i++)
        cr_assert_null(strstr(text, keys[i] + 3), "key %d is in the file in clear", i);
    qr_free(text);

    ApiKeys *k = NULL;
    cr_assert_eq(apikey_open(dir, &k, &e), QR_OK);
    cr_assert_eq(apikey_count(k), N);
    srand(42);
    for (int i = 0; i < N; i++) {
        char name[APIKEY_NAME_MAX + 1] = "";
        cr_assert_eq(apikey_check(k, keys[i], APIKEY_LEN, name, sizeof name), scopes[i]);
        char want[32];
        snprintf(want, sizeof want, "k%d", i);
        cr_assert_str_eq(name, want);
        /* near misses */
        for (int t = 0; t < 20; t++) {
            char bad[APIKEY_LEN + 2];
            memcpy(bad, keys[i], APIKEY_LEN + 1);
            int at = 3 + rand() % 64;
            bad[at] = bad[at] == 'f' ? '0' : (bad[at] == '9' ? 'a' : bad[at] + 1);
            cr_assert_eq(apikey_check(k, bad, APIKEY_LEN, NULL, 0), API_SCOPE_NONE);
        }
        cr_assert_eq(apikey_check(k, keys[i], APIKEY_LEN - 1, NULL, 0), API_SCOPE_NONE);
        char longer[APIKEY_LEN + 2];
        memcpy(longer, keys[i], APIKEY_LEN);
        longer[APIKEY_LEN] = 'x';
        longer[APIKEY_LEN + 1] = 0;
        cr_assert_eq(apikey_check(k, longer, APIKEY_LEN + 1, NULL, 0), API_SCOPE_NONE);
    }
    cr_assert_eq(apikey_check(k, "", 0, NULL, 0), API_SCOPE_NONE);
    apikey_free(k);
    free(dir);
}

Test(apikey, replace_remove_and_reload)
{
    char *dir = tmp_dir();
    QrError e;
    qr_error_clear(&e);
    char a[APIKEY_LEN + 1], a2[APIKEY_LEN + 1], b[APIKEY_LEN + 1];
    cr_assert_eq(apikey_add(dir, "a", API_SCOPE_SEARCH, a, &e), QR_OK);
    cr_assert_eq(apikey_add(dir, "b", API_SCOPE_ADMIN, b, &e), QR_OK);
    ApiKeys *k = NULL;
    cr_assert_eq(apikey_open(dir, &k, &e), QR_OK);
    cr_assert_eq(apikey_check(k, a, APIKEY_LEN, NULL, 0), API_SCOPE_SEARCH);
    /* same name again: a new key and scope replace the old one */
    cr_assert_eq(apikey_add(dir, "a", API_SCOPE_WRITE, a2, &e), QR_OK);
    cr_assert_eq(apikey_remove(dir, "b", &e), QR_OK);
    sleep(2); /* the open store looks at the file at most once a second */
    cr_assert_eq(apikey_count(k), 1);
    cr_assert_eq(apikey_check(k, a, APIKEY_LEN, NULL, 0), API_SCOPE_NONE);
    cr_assert_eq(apikey_check(k, a2, APIKEY_LEN, NULL, 0), API_SCOPE_WRITE);
    cr_assert_eq(apikey_check(k, b, APIKEY_LEN, NULL, 0), API_SCOPE_NONE);
    qr_error_clear(&e);
    cr_assert_eq(apikey_remove(dir, "b", &e), QR_ENOTFOUND);
    /* a malformed file: opening fails, a running store keeps its keys */
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, APIKEY_FILE);
    FILE *f = fopen(path, "w");
    fputs("{\"keys\": [{\"name\": \"x\", \"scope\": \"root\"}]}", f);
    fclose(f);
    sleep(2);
    cr_assert_eq(apikey_check(k, a2, APIKEY_LEN, NULL, 0), API_SCOPE_WRITE);
    ApiKeys *k2 = NULL;
    qr_error_clear(&e);
    cr_assert_eq(apikey_open(dir, &k2, &e), QR_ESYNTAX);
    cr_assert_null(k2);
    apikey_free(k);
    apikey_free(NULL);
    free(dir);
}

Test(apikey, names_and_scopes)
{
    char *dir = tmp_dir();
    char key[APIKEY_LEN + 1];
    const char *bad[] = {"", "../x", "a/b", "a b", "x\n",
                         "0123456789012345678901234567890123456789012345678901234567890123"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        QrError e;
        qr_error_clear(&e);
        cr_assert_eq(apikey_add(dir, bad[i], API_SCOPE_SEARCH, key, &e), QR_EINVAL, "%s", bad[i]);
    }
    ApiKeys *k = NULL;
    QrError e;
    qr_error_clear(&e);
    cr_assert_eq(apikey_open(dir, &k, &e), QR_OK); /* no file: no keys */
    cr_assert_eq(apikey_count(k), 0);
    apikey_free(k);
    cr_assert_eq(apikey_scope_parse("search"), API_SCOPE_SEARCH);
    cr_assert_eq(apikey_scope_parse("write"), API_SCOPE_WRITE);
    cr_assert_eq(apikey_scope_parse("admin"), API_SCOPE_ADMIN);
    cr_assert_eq(apikey_scope_parse("Admin"), API_SCOPE_NONE);
    cr_assert_str_eq(apikey_scope_name(API_SCOPE_WRITE), "write");
    free(dir);
}

Test(apikey, query_terms)
{
    static const struct {
        const char *q;
        int want;
    } C[] = {
        {"", 0},
        {"alpha", 1},
        {"alpha beta", 2},
        {"alpha AND beta OR NOT gamma", 3},
        {"and or not", 3}, /* lowercase words are terms */
        {"title:rust^2 OR compil*", 2},
        {"\"window manager\" -tiling", 3},
        {"\"a b\"~3 databse~1", 3},
        {"(a OR (b AND c))", 3},
        {"x^1.5 y", 2},
        {"caf\xc3\xa9 na\xc3\xafve", 2},
        {"snake_case two", 2},
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++)
        cr_expect_eq(http_query_terms(C[i].q), C[i].want, "%s -> %d", C[i].q,
                     http_query_terms(C[i].q));
}

/* Table lists and expiry times survive the key file and come back with the
 * key that matched; bad lists are refused; expiry text parses to the
 * seconds a hand computation gives. */
Test(apikey, limits_round_trip)
{
    char *dir = tmp_dir();
    QrError e;
    qr_error_clear(&e);
    char a[APIKEY_LEN + 1], b[APIKEY_LEN + 1], c[APIKEY_LEN + 1];
    cr_assert_eq(apikey_add_limited(dir, "a", API_SCOPE_SEARCH, "products, news", 0, a, &e),
                 QR_OK, "%s", e.message);
    cr_assert_eq(apikey_add_limited(dir, "b", API_SCOPE_WRITE, NULL, 1798761600, b, &e), QR_OK);
    cr_assert_eq(apikey_add(dir, "c", API_SCOPE_ADMIN, c, &e), QR_OK);
    cr_assert_eq(apikey_add_limited(dir, "d", API_SCOPE_SEARCH, "ok,no-good", 0, c, &e),
                 QR_EINVAL);
    ApiKeys *k = NULL;
    cr_assert_eq(apikey_open(dir, &k, &e), QR_OK, "%s", e.message);
    ApiKeyInfo info;
    cr_assert_eq(apikey_check_info(k, a, APIKEY_LEN, &info), API_SCOPE_SEARCH);
    cr_assert_str_eq(info.name, "a");
    cr_assert_str_eq(info.tables, "products,news");
    cr_assert_eq(info.expires, 0);
    cr_assert(apikey_table_ok(info.tables, "news"));
    cr_assert(apikey_table_ok(info.tables, "products"));
    cr_assert(!apikey_table_ok(info.tables, "new"));
    cr_assert(!apikey_table_ok(info.tables, "productsx"));
    cr_assert_eq(apikey_check_info(k, b, APIKEY_LEN, &info), API_SCOPE_WRITE);
    cr_assert_str_eq(info.tables, "");
    cr_assert_eq(info.expires, 1798761600);
    cr_assert(apikey_table_ok(info.tables, "anything"));
    char *text = slurp(dir);
    cr_assert(strstr(text, "[\"products\", \"news\"]"), "%s", text);
    cr_assert(strstr(text, "1798761600"), "%s", text);
    free(text);
    apikey_free(k);
    int64_t t;
    cr_assert(apikey_parse_expiry("2027-01-01", 0, &t));
    cr_assert_eq(t, 1798761600);
    cr_assert(apikey_parse_expiry("2027-01-01T01:02:03Z", 0, &t));
    cr_assert_eq(t, 1798761600 + 3723);
    cr_assert(apikey_parse_expiry("+30d", 1000, &t));
    cr_assert_eq(t, 1000 + 30 * 86400);
    cr_assert(apikey_parse_expiry("+90s", 1000, &t));
    cr_assert_eq(t, 1090);
    cr_assert(!apikey_parse_expiry("tomorrow", 0, &t));
    cr_assert(!apikey_parse_expiry("+5w", 0, &t));
    cr_assert(!apikey_parse_expiry("2027-01-01T00:00:00+02:00", 0, &t));
    free(dir);
}
