/*
 * sql_fuzz.c — libFuzzer target for the SQL front end and executor
 * (src/query/sql_*.c over libpg_query): splitting, parsing, binding,
 * planning and running whatever statements the input holds, against two
 * small tables (a text table with typed columns and a dimension table).
 *
 * The input is SQL text, or (first byte 0x01) a binary COPY stream fed to
 * COPY t (id, n, body, ok, at, f) FROM STDIN (FORMAT binary) in chunks of
 * 1 + byte 1 % 32 bytes.  SQL runs inside BEGIN ... ROLLBACK on one session
 * with statement_timeout 200 ms and a 64 MiB memory cap, statement by
 * statement as the simple protocol does.  Statements that escape the
 * transaction (DDL, COMMIT) may change the fixture; it is rebuilt whenever
 * it no longer has its 200 rows.
 * Promises checked beyond "no crash, no leak, no hang":
 *   - an error has a message and a 5-character SQLSTATE, and a position, when
 *     given, inside the statement;
 *   - a result's rows are all fetchable and render as text and COPY lines;
 *   - the session's transaction status is always 'I', 'T' or 'E';
 *   - a binary COPY ends in a count or a clean error, never a COPY left open.
 * Cursors and prepared statements are closed after each input (CLOSE ALL,
 * DEALLOCATE ALL), so none outlives the input that made it.
 */
#include "fuzz_util.h"
#include "query/quarry.h"
#include "query/sql.h"
#include "store/util.h"

static QrDb *db;
static QrSqlSession *sess;

static int exec1(const char *sql, QrSqlResult **res, QrError *e)
{
    qr_error_clear(e);
    *res = NULL;
    return qr_sql_exec(sess, sql, strlen(sql), res, e);
}

static void must(const char *sql)
{
    QrError e;
    QrSqlResult *r;
    if (exec1(sql, &r, &e) != QR_OK) {
        fprintf(stderr, "sql_fuzz fixture: %s: %s\n", sql, e.message);
        abort();
    }
    qr_sql_result_free(r);
}

static void build_fixture(void)
{
    QrError e;
    QrSqlResult *r;
    if (exec1("ROLLBACK", &r, &e) == QR_OK)
        qr_sql_result_free(r);
    if (exec1("DROP TABLE IF EXISTS t", &r, &e) == QR_OK)
        qr_sql_result_free(r);
    if (exec1("DROP TABLE IF EXISTS c", &r, &e) == QR_OK)
        qr_sql_result_free(r);
    must("CREATE TABLE t (id bigint PRIMARY KEY, body text, tag varchar(16), n integer, "
         "f double precision, ok boolean, at timestamp)");
    must("CREATE TABLE c (tag varchar(16) PRIMARY KEY, name text, size integer)");
    static const char *words[] = {"river", "power", "hydro", "bank", "market", "share",
                                  "price", "energy", "profit", "loss", "report", "annual"};
    char sql[4096];
    uint32_t seed = 3;
    for (int i = 0; i < 200; i++) {
        char body[256] = "";
        for (int w = 0; w < 8; w++) {
            seed = seed * 1103515245u + 12345u;
            strcat(body, words[(seed >> 8) % 12]);
            strcat(body, " ");
        }
        snprintf(sql, sizeof sql,
                 "INSERT INTO t VALUES (%d, '%s', %s, %s, %d.5, %s, '2025-0%d-1%d 10:00:00')", i,
                 body, i % 9 ? "'g%d'" : "NULL", i % 7 ? "%d" : "NULL", i - 100,
                 i % 3 ? "true" : "false", 1 + i % 9, i % 10);
        char fixed[4096];
        /* fill the two optional %d */
        snprintf(fixed, sizeof fixed, sql, i % 5, i * 3);
        must(fixed);
    }
    for (int g = 0; g < 5; g++) {
        snprintf(sql, sizeof sql, "INSERT INTO c VALUES ('g%d', 'group %d', %d)", g, g, g * 10);
        must(sql);
    }
}

static bool fixture_ok(void)
{
    QrError e;
    QrSqlResult *r;
    if (exec1("SELECT count(*) FROM t", &r, &e) != QR_OK)
        return false;
    bool ok = r->kind == QR_SQL_RES_ROWS && r->n_rows == 1 && !r->vals[0].is_null &&
              r->vals[0].u.i == 200;
    qr_sql_result_free(r);
    return ok;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    db = fz_db_open();
    QrError e;
    qr_error_clear(&e);
    CHECK(qr_sql_session_new(db, &sess, &e) == QR_OK);
    CHECK(qr_sql_session_set(sess, "statement_timeout", "200", &e) == QR_OK);
    CHECK(qr_sql_session_set(sess, "quarry.mem_cap", "67108864", &e) == QR_OK);
    build_fixture();
    return 0;
}

static void check_error(const QrError *e, size_t len)
{
    CHECK(e->message[0]);
    const char *ss = qr_error_sqlstate(e);
    CHECK(strlen(ss) == 5);
    CHECK(e->offset < 0 || (size_t)e->offset <= len + 1);
}

static void check_result(QrSqlResult *r)
{
    QrBuf b;
    qr_buf_init(&b);
    if (r->kind == QR_SQL_RES_ROWS || r->kind == QR_SQL_RES_COPY_OUT) {
        for (uint64_t i = 0; i < r->n_rows && i < 2000; i++) {
            for (int c = 0; c < r->n_cols; c++) {
                b.len = 0;
                qr_sql_value_text(&r->vals[i * (uint64_t)r->n_cols + (uint64_t)c], &b);
            }
            b.len = 0;
            qr_sql_copy_row(r, i, &b);
            CHECK(b.len > 0 && b.data[b.len - 1] == '\n');
        }
        const QrSqlValue *rows;
        uint64_t n, seen = 0;
        while (qr_sql_result_fetch(r, 7, &rows, &n))
            seen += n;
        seen += n;
        CHECK(seen == r->n_rows);
    }
    qr_buf_free(&b);
}

/* A binary COPY stream into t: any bytes end in "COPY n" or an error. */
static void binary_copy(const uint8_t *data, size_t size)
{
    QrError e;
    QrSqlResult *r;
    const char *copy = "COPY t (id, n, body, ok, at, f) FROM STDIN (FORMAT binary)";
    if (exec1("BEGIN", &r, &e) == QR_OK)
        qr_sql_result_free(r);
    CHECK(exec1(copy, &r, &e) == QR_OK && r->kind == QR_SQL_RES_COPY_IN);
    qr_sql_result_free(r);
    size_t chunk = size > 1 ? 1 + data[1] % 32 : 1, off = size > 1 ? 2 : size;
    int rc = QR_OK;
    qr_error_clear(&e);
    while (rc == QR_OK && off < size) {
        size_t n = size - off < chunk ? size - off : chunk;
        rc = qr_sql_copy_data(sess, (const char *)data + off, n, &e);
        off += n;
    }
    if (rc == QR_OK) {
        rc = qr_sql_copy_done(sess, &r, &e);
        if (rc == QR_OK)
            qr_sql_result_free(r);
    }
    if (rc != QR_OK)
        check_error(&e, 0);
    CHECK(!qr_sql_copy_active(sess));
    if (exec1("ROLLBACK", &r, &e) == QR_OK)
        qr_sql_result_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    if (size > 0 && data[0] == 0x01) {
        binary_copy(data, size);
        return 0;
    }
    char *sql = malloc(size + 1);
    CHECK(sql);
    memcpy(sql, data, size);
    sql[size] = '\0';
    QrError e;
    QrSqlResult *r;
    if (exec1("BEGIN", &r, &e) == QR_OK)
        qr_sql_result_free(r);
    QrSqlSpan *spans = NULL;
    int n = 0;
    qr_error_clear(&e);
    if (qr_sql_split(sql, size, &spans, &n, &e) != QR_OK) {
        check_error(&e, size);
    } else {
        for (int i = 0; i < n && i < 8; i++) {
            CHECK(spans[i].offset + spans[i].len <= size);
            qr_error_clear(&e);
            r = NULL;
            int rc = qr_sql_exec(sess, sql + spans[i].offset, spans[i].len, &r, &e);
            if (rc != QR_OK) {
                CHECK(r == NULL);
                check_error(&e, spans[i].len);
            } else {
                CHECK(r);
                check_result(r);
                if (r->kind == QR_SQL_RES_COPY_IN) {
                    qr_error_clear(&e);
                    (void)qr_sql_copy_data(sess, "1\tx\n", 4, &e);
                    qr_sql_copy_fail(sess, "fuzz");
                }
                qr_sql_result_free(r);
            }
            char st = qr_sql_session_txn_status(sess);
            CHECK(st == 'I' || st == 'T' || st == 'E');
        }
    }
    qr_free(spans);
    free(sql);
    if (qr_sql_copy_active(sess))
        qr_sql_copy_fail(sess, "fuzz");
    if (exec1("ROLLBACK", &r, &e) == QR_OK)
        qr_sql_result_free(r);
    if (exec1("CLOSE ALL", &r, &e) == QR_OK)
        qr_sql_result_free(r);
    if (exec1("DEALLOCATE ALL", &r, &e) == QR_OK)
        qr_sql_result_free(r);
    if (!fixture_ok())
        build_fixture();
    return 0;
}
