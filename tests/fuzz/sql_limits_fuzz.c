/*
 * sql_limits_fuzz.c — libFuzzer target for the SQL engine's limits: sizes
 * computed from user values, nesting (the guard before libpg_query, the
 * parse tree reader, the binder's and executor's stack checks) and the
 * read-only session.
 *
 * An input is either SQL text, or a generator for the long statements the
 * limits are about, which libFuzzer's length cap would not reach:
 *
 *   '\x01' count_hi count_lo prefix '\x02' unit '\x02' middle '\x02' close '\x02' suffix
 *
 * is prefix + unit x count + middle + close x count + suffix (count up to
 * 65535: a 40,000-term sum is "\x01\x9c\x40SELECT \x021+\x021\x02\x02").
 *
 * Each statement runs, on a thread with a 4 MB stack, on a session limited
 * to reads over a fixed table, and through the query history's
 * normalization.  Promises beyond "no
 * crash, no leak, no hang":
 *   - an error has a message and a 5-character SQLSTATE;
 *   - the table's rows and the list of tables are what they were (the
 *     session is read-only: every write is refused, however it is quoted);
 *   - a statement refused as a write was one by its parse (qr_sql_access_needed).
 */
#include "fuzz_util.h"
#include "query/quarry.h"
#include "query/sql.h"
#include "store/util.h"

#include <pthread.h>

static QrDb *db;
static QrSqlSession *admin, *ro;
static char before[4096];

static void digest(char *out, size_t n)
{
    QrBuf b;
    qr_buf_init(&b);
    static const char *const Q[] = {
        "SELECT id, v FROM t ORDER BY id",
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1",
    };
    for (int k = 0; k < 2; k++) {
        QrError e;
        qr_error_clear(&e);
        QrSqlResult *r = NULL;
        CHECK(qr_sql_exec(admin, Q[k], strlen(Q[k]), &r, &e) == QR_OK);
        for (uint64_t i = 0; i < r->n_rows * (uint64_t)r->n_cols; i++) {
            qr_sql_value_text(&r->vals[i], &b);
            qr_buf_putc(&b, ',');
        }
        qr_buf_putc(&b, '|');
        qr_sql_result_free(r);
    }
    snprintf(out, n, "%.*s", (int)b.len, b.data ? (const char *)b.data : "");
    qr_buf_free(&b);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    db = fz_db_open();
    QrError e;
    qr_error_clear(&e);
    CHECK(qr_sql_session_new(db, &admin, &e) == QR_OK);
    CHECK(qr_sql_session_new(db, &ro, &e) == QR_OK);
    qr_sql_session_limit_access(ro, QR_SQL_ACCESS_READ, NULL);
    CHECK(qr_sql_session_set(ro, "statement_timeout", "300", &e) == QR_OK);
    CHECK(qr_sql_session_set(ro, "quarry.mem_cap", "67108864", &e) == QR_OK);
    static const char *const FIXTURE[] = {
        "CREATE TABLE t (id bigint PRIMARY KEY, v text, n integer)",
        "INSERT INTO t SELECT g, 'v' || g, g % 7 FROM generate_series(1, 50) g",
    };
    for (int i = 0; i < 2; i++) {
        QrSqlResult *r = NULL;
        CHECK(qr_sql_exec(admin, FIXTURE[i], strlen(FIXTURE[i]), &r, &e) == QR_OK);
        qr_sql_result_free(r);
    }
    digest(before, sizeof before);
    return 0;
}

/* The statement an input stands for (malloc'd, NUL-terminated), or NULL. */
static char *expand(const uint8_t *data, size_t size, size_t *len)
{
    if (size < 3 || data[0] != 1) {
        char *s = malloc(size + 1);
        CHECK(s);
        memcpy(s, data, size);
        s[size] = 0;
        *len = size;
        return s;
    }
    size_t count = (size_t)data[1] << 8 | data[2];
    const char *part[5] = {0};
    size_t plen[5] = {0};
    const char *p = (const char *)data + 3, *end = (const char *)data + size;
    for (int k = 0; k < 5; k++) {
        const char *q = k < 4 ? memchr(p, 2, (size_t)(end - p)) : NULL;
        part[k] = p;
        plen[k] = (size_t)((q ? q : end) - p);
        p = q ? q + 1 : end;
    }
    size_t n = plen[0] + count * (plen[1] + plen[3]) + plen[2] + plen[4];
    if (n > (4u << 20))
        return NULL;
    char *s = malloc(n + 1), *w = s;
    CHECK(s);
    memcpy(w, part[0], plen[0]), w += plen[0];
    for (size_t i = 0; i < count; i++)
        memcpy(w, part[1], plen[1]), w += plen[1];
    memcpy(w, part[2], plen[2]), w += plen[2];
    for (size_t i = 0; i < count; i++)
        memcpy(w, part[3], plen[3]), w += plen[3];
    memcpy(w, part[4], plen[4]), w += plen[4];
    *w = 0;
    *len = n;
    return s;
}

typedef struct Input {
    const uint8_t *data;
    size_t size;
} Input;

static void *one_input(void *arg)
{
    const uint8_t *data = ((Input *)arg)->data;
    size_t size = ((Input *)arg)->size, len;
    char *sql = expand(data, size, &len);
    if (!sql)
        return NULL;
    QrError e;
    qr_error_clear(&e);
    QrSqlAccess need = QR_SQL_ACCESS_SCHEMA;
    bool parsed = qr_sql_access_needed(sql, len, &need, &e) == QR_OK;
    if (!parsed)
        CHECK(e.message[0] && strlen(qr_error_sqlstate(&e)) == 5);
    QrBuf norm;
    qr_buf_init(&norm);
    qr_error_clear(&e);
    (void)qr_sql_normalize(sql, len, &norm, NULL, &e); /* the query history's path */
    qr_buf_free(&norm);
    QrSqlSpan *spans = NULL;
    int n = 0;
    qr_error_clear(&e);
    if (qr_sql_split(sql, len, &spans, &n, &e) == QR_OK) {
        for (int i = 0; i < n && i < 8; i++) {
            qr_error_clear(&e);
            QrSqlResult *r = NULL;
            if (qr_sql_exec(ro, sql + spans[i].offset, spans[i].len, &r, &e) != QR_OK) {
                CHECK(r == NULL && e.message[0] && strlen(qr_error_sqlstate(&e)) == 5);
                if (!strcmp(qr_error_sqlstate(&e), "25006"))
                    CHECK(parsed && need > QR_SQL_ACCESS_READ);
                continue;
            }
            const QrSqlValue *rows;
            uint64_t k;
            while (qr_sql_result_fetch(r, 16, &rows, &k))
                ;
            qr_sql_result_free(r);
        }
        QrSqlResult *r = NULL;
        qr_error_clear(&e);
        if (qr_sql_exec(ro, "ROLLBACK", 8, &r, &e) == QR_OK)
            qr_sql_result_free(r);
    }
    qr_free(spans);
    free(sql);
    char after[sizeof before];
    digest(after, sizeof after);
    CHECK(strcmp(after, before) == 0);
    return NULL;
}

/* Each input runs on a thread with a 4 MB stack: smaller than a server
 * thread's, so a guard that lets a deep statement through overflows here. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Input in = {data, size};
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 4u << 20);
    pthread_t t;
    CHECK(pthread_create(&t, &at, one_input, &in) == 0);
    pthread_join(t, NULL);
    pthread_attr_destroy(&at);
    return 0;
}
