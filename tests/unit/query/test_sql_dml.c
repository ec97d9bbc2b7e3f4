/*
 * test_sql_dml.c — the SQL write side: the COPY text/CSV codec (round trips
 * of random rows through any chunking, line numbers, bad input), value
 * coercion to stored JSON, and INSERT / UPDATE / DELETE / ON CONFLICT /
 * transactions / COPY through sessions, checked against a model of the
 * table kept in the test.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "sql_test_env.h"
#include "query/sql.h"
#include "query/sql_w.h"
#include "store/mem.h"

/* ---- COPY codec ---- */

typedef struct Rows {
    int n;
    int n_fields[512];
    char *f[512][6]; /* NULL = SQL NULL */
    int64_t line[512];
} Rows;

static int collect(void *ctx, int n, char **vals, size_t *lens, int64_t line, QrError *err)
{
    (void)err;
    Rows *r = ctx;
    cr_assert(r->n < 512 && n <= 6);
    r->n_fields[r->n] = n;
    r->line[r->n] = line;
    for (int i = 0; i < n; i++)
        r->f[r->n][i] = vals[i] ? strndup(vals[i], lens[i]) : NULL;
    r->n++;
    return QR_OK;
}

static void rows_free(Rows *r)
{
    for (int i = 0; i < r->n; i++)
        for (int k = 0; k < r->n_fields[i]; k++)
            free(r->f[i][k]);
    r->n = 0;
}

static char *random_field(uint64_t *rng)
{
    static const char alphabet[] = "ab,\t\"\\\n\r.NZ '";
    int n = (int)eu_below(rng, 8);
    char *s = malloc((size_t)n + 1);
    for (int i = 0; i < n; i++)
        s[i] = alphabet[eu_below(rng, sizeof alphabet - 1)];
    s[n] = 0;
    return s;
}

/* Feed `data` in random chunks. */
static int feed_chunks(CopyReader *rd, const char *data, size_t len, uint64_t *rng, QrError *err)
{
    size_t off = 0;
    while (off < len) {
        size_t n = 1 + eu_below(rng, 17);
        if (n > len - off)
            n = len - off;
        int rc = copy_reader_feed(rd, data + off, n, err);
        if (rc)
            return rc;
        off += n;
    }
    return copy_reader_finish(rd, err);
}

static void round_trip(bool csv, uint64_t seed)
{
    uint64_t rng = seed;
    CopyFmt fmt;
    copy_fmt_init(&fmt, csv);
    for (int iter = 0; iter < 50; iter++) {
        int n_rows = 1 + (int)eu_below(&rng, 30);
        int n_cols = 1 + (int)eu_below(&rng, 5);
        char *want[64][6];
        QrBuf out;
        qr_buf_init(&out);
        for (int r = 0; r < n_rows; r++) {
            size_t lens[6];
            for (int c = 0; c < n_cols; c++) {
                want[r][c] = eu_chance(&rng, 0.15) ? NULL : random_field(&rng);
                lens[c] = want[r][c] ? strlen(want[r][c]) : 0;
            }
            copy_write_row(&out, &fmt, n_cols, (const char *const *)want[r], lens);
        }
        Rows got = {0};
        CopyReader rd;
        copy_reader_init(&rd, &fmt, collect, &got);
        QrError err;
        qr_error_clear(&err);
        cr_assert_eq(feed_chunks(&rd, (const char *)out.data, out.len, &rng, &err), QR_OK,
                     "%s: %s", csv ? "csv" : "text", err.message);
        copy_reader_free(&rd);
        cr_assert_eq(got.n, n_rows, "%s: %d rows back, %d written", csv ? "csv" : "text", got.n,
                     n_rows);
        for (int r = 0; r < n_rows; r++) {
            cr_assert_eq(got.n_fields[r], n_cols);
            for (int c = 0; c < n_cols; c++) {
                if (!want[r][c])
                    cr_assert_null(got.f[r][c], "row %d col %d should be NULL", r, c);
                else
                    cr_assert(got.f[r][c] && !strcmp(got.f[r][c], want[r][c]),
                              "%s row %d col %d: [%s] != [%s]", csv ? "csv" : "text", r, c,
                              got.f[r][c] ? got.f[r][c] : "(null)", want[r][c]);
                free(want[r][c]);
            }
        }
        rows_free(&got);
        qr_buf_free(&out);
    }
}

Test(sql_copy, text_round_trip_any_chunking) { round_trip(false, 11); }
Test(sql_copy, csv_round_trip_any_chunking) { round_trip(true, 12); }

Test(sql_copy, csv_line_numbers_count_quoted_newlines)
{
    CopyFmt fmt;
    copy_fmt_init(&fmt, true);
    fmt.header = true;
    const char *in = "a,b\n1,\"x\ny\"\n2,z\r\n3,\"\"\n";
    Rows got = {0};
    CopyReader rd;
    copy_reader_init(&rd, &fmt, collect, &got);
    QrError err;
    qr_error_clear(&err);
    uint64_t rng = 5;
    cr_assert_eq(feed_chunks(&rd, in, strlen(in), &rng, &err), QR_OK, "%s", err.message);
    copy_reader_free(&rd);
    cr_assert_eq(got.n, 3);
    cr_assert_eq(got.line[0], 2);
    cr_assert_eq(got.line[1], 4); /* the quoted field spans lines 2-3 */
    cr_assert_eq(got.line[2], 5);
    cr_assert_str_eq(got.f[0][1], "x\ny");
    cr_assert_str_eq(got.f[1][1], "z");
    cr_assert_str_eq(got.f[2][1], ""); /* quoted empty is not NULL */
    rows_free(&got);
}

Test(sql_copy, text_escapes_null_and_end_marker)
{
    CopyFmt fmt;
    copy_fmt_init(&fmt, false);
    const char *in = "a\\tb\t\\N\t\\\\N\n\\x41\\101\\n\t\t\n\\.\nignored\tafter\n";
    Rows got = {0};
    CopyReader rd;
    copy_reader_init(&rd, &fmt, collect, &got);
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(copy_reader_feed(&rd, in, strlen(in), &err), QR_OK);
    cr_assert_eq(copy_reader_finish(&rd, &err), QR_OK);
    copy_reader_free(&rd);
    cr_assert_eq(got.n, 2);
    cr_assert_str_eq(got.f[0][0], "a\tb");
    cr_assert_null(got.f[0][1]);
    cr_assert_str_eq(got.f[0][2], "\\N");
    cr_assert_str_eq(got.f[1][0], "AA\n");
    cr_assert_str_eq(got.f[1][1], "");
    rows_free(&got);
}

Test(sql_copy, unterminated_quote_names_its_line)
{
    CopyFmt fmt;
    copy_fmt_init(&fmt, true);
    const char *in = "1,a\n2,\"open\n3,c\n";
    Rows got = {0};
    CopyReader rd;
    copy_reader_init(&rd, &fmt, collect, &got);
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(copy_reader_feed(&rd, in, strlen(in), &err), QR_OK);
    cr_assert_neq(copy_reader_finish(&rd, &err), QR_OK);
    cr_assert_eq(err.line, 2, "line %lld", (long long)err.line);
    copy_reader_free(&rd);
    rows_free(&got);
}

/* ---- value coercion ---- */

static char *coerce(QrFieldType t, QrSqlValue v, QrError *err)
{
    cJSON *j = NULL;
    qr_error_clear(err);
    if (sqlw_value_to_cjson(t, "c", &v, &j, err) != QR_OK)
        return NULL;
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

static QrSqlValue txt(const char *s)
{
    QrSqlValue v = {.type = QR_SQL_UNKNOWN, .u.s = {s, strlen(s)}};
    return v;
}

Test(sql_values, assignment_casts)
{
    QrError err;
    struct {
        QrFieldType t;
        QrSqlValue v;
        const char *want; /* NULL: error with sqlstate */
        const char *state;
    } cases[] = {
        {QR_FT_INT, txt(" 42 "), "42", NULL},
        {QR_FT_INT, txt("-9223372036854775808"), "-9223372036854775808", NULL},
        {QR_FT_INT, txt("99999999999999999999"), NULL, "22003"},
        {QR_FT_INT, txt("4.5"), NULL, "22P02"},
        {QR_FT_INT, {.type = QR_SQL_FLOAT8, .u.f = 2.5}, "3", NULL},
        {QR_FT_INT, {.type = QR_SQL_FLOAT8, .u.f = -2.5}, "-3", NULL},
        {QR_FT_INT, {.type = QR_SQL_BOOL, .u.b = true}, NULL, "42804"},
        {QR_FT_FLOAT, txt("1e3"), "1000", NULL},
        {QR_FT_FLOAT, {.type = QR_SQL_INT4, .u.i = 7}, "7", NULL},
        {QR_FT_FLOAT, txt("abc"), NULL, "22P02"},
        {QR_FT_BOOL, txt("YES"), "true", NULL},
        {QR_FT_BOOL, txt("off"), "false", NULL},
        {QR_FT_BOOL, txt("maybe"), NULL, "22P02"},
        {QR_FT_BOOL, {.type = QR_SQL_INT4, .u.i = 1}, NULL, "42804"},
        {QR_FT_TIMESTAMP, txt("2025-01-15 10:00:00+00"), "\"2025-01-15T10:00:00Z\"", NULL},
        {QR_FT_TIMESTAMP, txt("2025-01-15"), "\"2025-01-15T00:00:00Z\"", NULL},
        {QR_FT_TIMESTAMP, txt("yesterday-ish"), NULL, "22P02"},
        {QR_FT_KEYWORD, {.type = QR_SQL_INT8, .u.i = -5}, "\"-5\"", NULL},
        {QR_FT_TEXT, {.type = QR_SQL_BOOL, .u.b = false}, "\"f\"", NULL},
        {QR_FT_TEXT, {.type = QR_SQL_TEXT, .is_null = true}, "null", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = coerce(cases[i].t, cases[i].v, &err);
        if (cases[i].want) {
            cr_assert(got && !strcmp(got, cases[i].want), "case %zu: got %s want %s (%s)", i,
                      got ? got : "error", cases[i].want, err.message);
        } else {
            cr_assert_null(got, "case %zu: %s should fail", i, got);
            cr_assert_str_eq(qr_error_sqlstate(&err), cases[i].state, "case %zu: %s", i,
                             err.message);
        }
        free(got);
    }
}

/* ---- statements against a model ---- */


/* Run one statement; returns the code, *tag the command tag. */
static int exec(Env *e, const char *sql, char *tag, QrError *err)
{
    QrSqlResult *r = NULL;
    qr_error_clear(err);
    int rc = qr_sql_exec(e->s, sql, strlen(sql), &r, err);
    if (tag)
        snprintf(tag, 64, "%s", r ? r->tag : "");
    qr_sql_result_free(r);
    return rc;
}

static void exec_ok(Env *e, const char *sql)
{
    QrError err;
    cr_assert_eq(exec(e, sql, NULL, &err), QR_OK, "%s: %s", sql, err.message);
}

#define N_KEYS 40
typedef struct Model {
    bool live[N_KEYS];
    long long v[N_KEYS];
} Model;

/* The table's rows must equal the model. */
static void check_model(Env *e, const Model *m)
{
    QrSqlResult *r = NULL;
    QrError err;
    qr_error_clear(&err);
    const char *q = "SELECT id, v FROM kv ORDER BY id";
    cr_assert_eq(qr_sql_exec(e->s, q, strlen(q), &r, &err), QR_OK, "%s", err.message);
    uint64_t row = 0;
    for (int k = 0; k < N_KEYS; k++) {
        if (!m->live[k])
            continue;
        cr_assert(row < r->n_rows, "key %d missing", k);
        cr_assert_eq(r->vals[row * 2].u.i, k, "row %llu has key %lld, model %d",
                     (unsigned long long)row, (long long)r->vals[row * 2].u.i, k);
        cr_assert_eq(r->vals[row * 2 + 1].u.i, m->v[k], "key %d: v %lld, model %lld", k,
                     (long long)r->vals[row * 2 + 1].u.i, m->v[k]);
        row++;
    }
    cr_assert_eq(row, r->n_rows, "%llu rows, model %llu", (unsigned long long)r->n_rows,
                 (unsigned long long)row);
    qr_sql_result_free(r);
}

Test(sql_dml, random_writes_and_transactions_match_a_model)
{
    Env e;
    env_open(&e);
    exec_ok(&e, "CREATE TABLE kv (id bigint PRIMARY KEY, v bigint NOT NULL)");
    Model committed = {0}, cur = {0};
    bool in_block = false, failed = false;
    uint64_t rng = 99;
    char sql[256], tag[64];
    QrError err;
    for (int step = 0; step < 400; step++) {
        int k = (int)eu_below(&rng, N_KEYS);
        long long v = (long long)eu_below(&rng, 1000) - 500;
        int op = (int)eu_below(&rng, 10);
        int rc;
        if (op == 0 && !in_block) {
            exec_ok(&e, "BEGIN");
            in_block = true;
            continue;
        }
        if (op == 0 && in_block) {
            bool commit = eu_chance(&rng, 0.6);
            rc = exec(&e, commit ? "COMMIT" : "ROLLBACK", tag, &err);
            cr_assert_eq(rc, QR_OK);
            if (commit && !failed)
                committed = cur;
            else
                cur = committed;
            cr_assert_str_eq(tag, commit && !failed ? "COMMIT" : "ROLLBACK");
            in_block = failed = false;
            check_model(&e, &committed);
            continue;
        }
        if (op <= 3) {
            snprintf(sql, sizeof sql, "INSERT INTO kv VALUES (%d, %lld)", k, v);
        } else if (op == 4) {
            snprintf(sql, sizeof sql,
                     "INSERT INTO kv VALUES (%d, %lld) ON CONFLICT (id) DO UPDATE SET v = kv.v + "
                     "excluded.v",
                     k, v);
        } else if (op == 5) {
            snprintf(sql, sizeof sql, "INSERT INTO kv VALUES (%d, %lld) ON CONFLICT DO NOTHING",
                     k, v);
        } else if (op <= 7) {
            snprintf(sql, sizeof sql, "UPDATE kv SET v = v * 2 + 1 WHERE id >= %d AND id < %d", k,
                     k + 5);
        } else {
            snprintf(sql, sizeof sql, "DELETE FROM kv WHERE v < %lld AND id <> %d", v, k);
        }
        rc = exec(&e, sql, tag, &err);
        if (failed) {
            cr_assert_eq(rc, QR_EINVAL, "%s in a failed block", sql);
            cr_assert_str_eq(qr_error_sqlstate(&err), "25P02");
            continue;
        }
        /* the model, over the state this session sees (own writes included) */
        Model next = cur;
        bool dup = false;
        if (op <= 3) {
            dup = cur.live[k];
            if (!dup) {
                next.live[k] = true;
                next.v[k] = v;
            }
        } else if (op == 4) {
            next.v[k] = cur.live[k] ? cur.v[k] + v : v;
            next.live[k] = true;
        } else if (op == 5) {
            if (!cur.live[k]) {
                next.live[k] = true;
                next.v[k] = v;
            }
        } else if (op <= 7) {
            for (int j = k; j < k + 5 && j < N_KEYS; j++)
                if (cur.live[j])
                    next.v[j] = cur.v[j] * 2 + 1;
        } else {
            for (int j = 0; j < N_KEYS; j++)
                if (cur.live[j] && cur.v[j] < v && j != k)
                    next.live[j] = false;
        }
        if (dup) {
            cr_assert_neq(rc, QR_OK, "%s: duplicate key accepted", sql);
            cr_assert_str_eq(qr_error_sqlstate(&err), "23505", "%s", err.message);
            if (in_block)
                failed = true;
            continue;
        }
        cr_assert_eq(rc, QR_OK, "%s: %s", sql, err.message);
        cur = next;
        if (!in_block) {
            committed = cur;
            check_model(&e, &committed);
        } else {
            /* inside a block SELECT reads the block's own writes */
            check_model(&e, &cur);
        }
    }
    env_close(&e);
}

Test(sql_dml, copy_in_through_the_session_with_line_numbers)
{
    Env e;
    env_open(&e);
    exec_ok(&e, "CREATE TABLE kv (id bigint PRIMARY KEY, v bigint NOT NULL)");
    QrError err;
    qr_error_clear(&err);
    QrSqlResult *r = NULL;
    const char *copy = "COPY kv (v, id) FROM STDIN WITH (FORMAT csv)";
    cr_assert_eq(qr_sql_exec(e.s, copy, strlen(copy), &r, &err), QR_OK, "%s", err.message);
    cr_assert_eq(r->kind, QR_SQL_RES_COPY_IN);
    cr_assert_eq(r->n_cols, 2);
    qr_sql_result_free(r);
    const char *data = "10,1\n20,2\n30,3\n";
    for (size_t i = 0; i < strlen(data); i += 4)
        cr_assert_eq(qr_sql_copy_data(e.s, data + i, strlen(data + i) < 4 ? strlen(data + i) : 4,
                                      &err),
                     QR_OK, "%s", err.message);
    cr_assert_eq(qr_sql_copy_done(e.s, &r, &err), QR_OK, "%s", err.message);
    cr_assert_str_eq(r->tag, "COPY 3");
    qr_sql_result_free(r);
    Model m = {0};
    for (int k = 1; k <= 3; k++)
        m.live[k] = true, m.v[k] = 10 * k;
    check_model(&e, &m);
    /* a NULL into a NOT NULL column on line 2: nothing of this COPY lands */
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_exec(e.s, copy, strlen(copy), &r, &err), QR_OK);
    qr_sql_result_free(r);
    qr_error_clear(&err);
    int rc = qr_sql_copy_data(e.s, "40,4\n,5\n60,6\n", 13, &err);
    cr_assert_neq(rc, QR_OK);
    cr_assert_eq(err.line, 2, "line %lld: %s", (long long)err.line, err.message);
    cr_assert_str_eq(qr_error_sqlstate(&err), "23502");
    cr_assert(!qr_sql_copy_active(e.s));
    check_model(&e, &m);
    /* a duplicate key inside a block fails the block */
    exec_ok(&e, "BEGIN");
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_exec(e.s, copy, strlen(copy), &r, &err), QR_OK);
    qr_sql_result_free(r);
    /* the key is checked as the row arrives (line 2) */
    cr_assert_neq(qr_sql_copy_data(e.s, "70,7\n11,1\n", 10, &err), QR_OK);
    cr_assert_str_eq(qr_error_sqlstate(&err), "23505");
    cr_assert_eq(err.line, 2);
    cr_assert_eq(qr_sql_session_txn_status(e.s), 'E');
    exec_ok(&e, "ROLLBACK");
    check_model(&e, &m);
    env_close(&e);
}

Test(sql_dml, ddl_errors_are_clear)
{
    Env e;
    env_open(&e);
    QrError err;
    struct {
        const char *sql;
        const char *state;
    } bad[] = {
        {"CREATE TABLE t (a int, b int, PRIMARY KEY (a, b))", "0A000"}, /* a two-column key */
        {"CREATE TABLE t (a int PRIMARY KEY, b point)", "0A000"},      /* no such type */
        {"CREATE TABLE t (a float8 PRIMARY KEY)", "0A000"},            /* key type */
        {"CREATE TABLE t (a int PRIMARY KEY, a text)", "42701"},       /* twice */
        {"CREATE TABLE t (a int PRIMARY KEY, b int CHECK (b > 0))", "0A000"},
        {"INSERT INTO nosuch VALUES (1)", "42P01"},
        {"DROP TABLE nosuch", "42P01"},
        {"DROP INDEX nosuch", "42704"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_neq(exec(&e, bad[i].sql, NULL, &err), QR_OK, "%s accepted", bad[i].sql);
        cr_assert_str_eq(qr_error_sqlstate(&err), bad[i].state, "%s: %s", bad[i].sql,
                         err.message);
    }
    exec_ok(&e, "CREATE TABLE t (id text PRIMARY KEY, n int DEFAULT 5, s varchar(8))");
    exec_ok(&e, "CREATE TABLE IF NOT EXISTS t (id int PRIMARY KEY)");
    cr_assert_neq(exec(&e, "CREATE TABLE t (id int PRIMARY KEY)", NULL, &err), QR_OK);
    cr_assert_str_eq(qr_error_sqlstate(&err), "42P07");
    exec_ok(&e, "INSERT INTO t (id) VALUES ('a'), ('b')");
    exec_ok(&e, "INSERT INTO t VALUES ('c', DEFAULT, 'x')");
    exec_ok(&e, "ALTER TABLE t ADD COLUMN flag boolean");
    cr_assert_neq(exec(&e, "INSERT INTO t (id, n, n) VALUES ('d', 1, 2)", NULL, &err), QR_OK);
    cr_assert_neq(exec(&e, "INSERT INTO t (id, nope) VALUES ('d', 1)", NULL, &err), QR_OK);
    cr_assert_str_eq(qr_error_sqlstate(&err), "42703");
    cr_assert_neq(exec(&e, "INSERT INTO t (id) VALUES (NULL)", NULL, &err), QR_OK);
    cr_assert_str_eq(qr_error_sqlstate(&err), "23502");
    /* a WHERE that is a bare string follows boolean input rules (the fuzz
     * target found it matching every row); the rows keep n = 5 below */
    cr_assert_neq(exec(&e, "UPDATE t SET n = 7 WHERE 'river'", NULL, &err), QR_OK);
    cr_assert_str_eq(qr_error_sqlstate(&err), "22P02", "%s", err.message);
    exec_ok(&e, "UPDATE t SET n = 8 WHERE 'no'");
    QrSqlResult *r = NULL;
    const char *q = "SELECT id, n, flag FROM t ORDER BY id";
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_exec(e.s, q, strlen(q), &r, &err), QR_OK, "%s", err.message);
    cr_assert_eq(r->n_rows, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(r->vals[i * 3 + 1].u.i, 5, "DEFAULT 5 on row %d", i);
        cr_assert(r->vals[i * 3 + 2].is_null);
    }
    qr_sql_result_free(r);
    exec_ok(&e, "TRUNCATE t");
    q = "SELECT count(*) FROM t";
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_exec(e.s, q, strlen(q), &r, &err), QR_OK, "%s", err.message);
    cr_assert_eq(r->vals[0].u.i, 0);
    qr_sql_result_free(r);
    exec_ok(&e, "DROP TABLE t");
    exec_ok(&e, "DROP TABLE IF EXISTS t");
    env_close(&e);
}

Test(sql_dml, drop_waits_for_a_copy_in_progress)
{
    Env e;
    env_open(&e);
    exec_ok(&e, "CREATE TABLE kv (id bigint PRIMARY KEY, v bigint NOT NULL)");
    QrSqlSession *other;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_new(e.db, &other, &err), QR_OK);
    QrSqlResult *r = NULL;
    const char *copy = "COPY kv FROM STDIN";
    cr_assert_eq(qr_sql_exec(e.s, copy, strlen(copy), &r, &err), QR_OK, "%s", err.message);
    qr_sql_result_free(r);
    cr_assert_eq(qr_sql_copy_data(e.s, "1\t10\n", 5, &err), QR_OK, "%s", err.message);
    /* the COPY holds the table: the drop gives up (after its wait) and changes nothing */
    const char *drop = "DROP TABLE kv";
    cr_assert_eq(qr_sql_exec(other, drop, strlen(drop), &r, &err), QR_EBUSY, "%s", err.message);
    cr_assert_eq(qr_sql_copy_done(e.s, &r, &err), QR_OK, "%s", err.message);
    cr_assert_str_eq(r->tag, "COPY 1");
    qr_sql_result_free(r);
    Model m = {0};
    m.live[1] = true, m.v[1] = 10;
    check_model(&e, &m);
    /* once the COPY is over the drop goes through */
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_exec(other, drop, strlen(drop), &r, &err), QR_OK, "%s", err.message);
    qr_sql_result_free(r);
    qr_sql_session_free(other);
    env_close(&e);
}

/* Start a COPY FROM STDIN. */
static void copy_start(Env *e, const char *copy)
{
    QrError err;
    qr_error_clear(&err);
    QrSqlResult *r = NULL;
    cr_assert_eq(qr_sql_exec(e->s, copy, strlen(copy), &r, &err), QR_OK, "%s", err.message);
    cr_assert_eq(r->kind, QR_SQL_RES_COPY_IN);
    qr_sql_result_free(r);
}

/* The sqlstate and message of a failing statement. */
static void exec_fails(Env *e, const char *sql, const char *sqlstate, const char *msg_part)
{
    QrError err;
    cr_assert_neq(exec(e, sql, NULL, &err), QR_OK, "%s should fail", sql);
    cr_assert_str_eq(qr_error_sqlstate(&err), sqlstate, "%s: %s", sql, err.message);
    cr_assert(strstr(err.message, msg_part), "%s: message %s", sql, err.message);
}

Test(sql_dml, invalid_utf8_is_refused_by_every_write)
{
    /* bytes that are not UTF-8 never reach a stored document: INSERT,
     * UPDATE and COPY fail at the statement with 22021 (inside a
     * transaction it aborts; nothing of it lands), qr_batch_put refuses with the
     * byte's column, and well-formed multi-byte text is stored as sent */
    Env e;
    env_open(&e);
    exec_ok(&e, "CREATE TABLE tx (id bigint PRIMARY KEY, s text)");
    exec_ok(&e, "INSERT INTO tx VALUES (1, 'caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80')");
    exec_fails(&e, "INSERT INTO tx VALUES (2, 'caf\xff')", "22021", "\"UTF8\": 0xff");
    exec_fails(&e, "UPDATE tx SET s = 'x\xc3(' WHERE id = 1", "22021", "0xc3 0x28");
    exec_fails(&e, "INSERT INTO tx VALUES (3, '\xed\xa0\x80')", "22021", "0xed 0xa0 0x80");
    exec_ok(&e, "BEGIN");
    exec_ok(&e, "INSERT INTO tx VALUES (4, 'fine')");
    exec_fails(&e, "INSERT INTO tx VALUES (5, '\xe2\x82')", "22021", "0xe2 0x82");
    cr_assert_eq(qr_sql_session_txn_status(e.s), 'E');
    exec_ok(&e, "ROLLBACK");
    copy_start(&e, "COPY tx FROM STDIN");
    QrError err;
    qr_error_clear(&err);
    QrSqlResult *r = NULL;
    cr_assert_neq(qr_sql_copy_data(e.s, "6\tgood\n7\tbad\xfe\n", 15, &err), QR_OK);
    cr_assert_str_eq(qr_error_sqlstate(&err), "22021", "%s", err.message);
    cr_assert_eq(err.line, 2, "COPY names the line: %lld", (long long)err.line);
    /* the engine's front door: the byte's column, the table unchanged */
    QrTable *t;
    cr_assert_eq(qr_table_get(e.db, "tx", &t, &err), QR_OK);
    const char *doc = "{\"id\":8,\"s\":\"ab\x80\"}";
    QrBatch *b;
    qr_error_clear(&err);
    cr_assert_eq(qr_batch_begin(t, &b, &err), QR_OK, "%s", err.message);
    cr_assert_eq(qr_batch_put(b, doc, strlen(doc), NULL, &err), QR_EINVAL);
    cr_assert_str_eq(qr_error_sqlstate(&err), "22021");
    cr_assert_eq(err.column, 16, "column of the bad byte: %d", err.column);
    cr_assert_eq(qr_batch_commit(b, &err), QR_OK);
    qr_batch_free(b);
    r = NULL;
    qr_error_clear(&err);
    const char *q = "SELECT id, s FROM tx ORDER BY id";
    cr_assert_eq(qr_sql_exec(e.s, q, strlen(q), &r, &err), QR_OK, "%s", err.message);
    cr_assert_eq(r->n_rows, 1, "only the good row: %llu rows", (unsigned long long)r->n_rows);
    cr_assert_eq(r->vals[0].u.i, 1);
    const char *want = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";
    cr_assert(r->vals[1].u.s.n == strlen(want) && !memcmp(r->vals[1].u.s.s, want, strlen(want)),
              "stored as sent: %.*s", (int)r->vals[1].u.s.n, r->vals[1].u.s.s);
    qr_sql_result_free(r);
    env_close(&e);
}

/* varchar(n) holds n characters (not bytes): INSERT, UPDATE and COPY of a
 * longer string are 22001, unless the excess is spaces, which are cut. */
Test(sql_dml, varchar_n_holds_n_characters)
{
    Env e;
    env_open(&e);
    exec_ok(&e, "CREATE TABLE vc (id bigint PRIMARY KEY, a varchar(3))");
    exec_fails(&e, "INSERT INTO vc VALUES (1, 'abcd')", "22001", "character varying(3)");
    exec_ok(&e, "INSERT INTO vc VALUES (2, '\xc3\xa9\xe2\x98\x83\xc3\xa9')"); /* 3 characters */
    exec_fails(&e, "INSERT INTO vc VALUES (3, '\xc3\xa9\xe2\x98\x83\xc3\xa9x')", "22001",
               "varying(3)");
    exec_ok(&e, "INSERT INTO vc VALUES (4, 'ab     ')");
    exec_fails(&e, "UPDATE vc SET a = 'abc d' WHERE id = 4", "22001", "varying(3)");
    exec_ok(&e, "INSERT INTO vc VALUES (5, NULL)");
    copy_start(&e, "COPY vc FROM STDIN");
    QrError err;
    qr_error_clear(&err);
    cr_assert_neq(qr_sql_copy_data(e.s, "6\tok\n7\ttoo long\n", 17, &err), QR_OK);
    cr_assert_str_eq(qr_error_sqlstate(&err), "22001", "%s", err.message);
    cr_assert_eq(err.line, 2, "COPY names the line: %lld", (long long)err.line);
    QrSqlResult *r = NULL;
    qr_error_clear(&err);
    const char *q = "SELECT string_agg(id || ':' || length(a), ',' ORDER BY id) FROM vc";
    cr_assert_eq(qr_sql_exec(e.s, q, strlen(q), &r, &err), QR_OK, "%s", err.message);
    cr_assert_eq(r->n_rows, 1);
    cr_assert(r->vals[0].u.s.n == 7 && !memcmp(r->vals[0].u.s.s, "2:3,4:3", 7), "%.*s",
              (int)r->vals[0].u.s.n, r->vals[0].u.s.s);
    qr_sql_result_free(r);
    env_close(&e);
}

Test(sql_dml, buffered_writes_draw_on_the_server_budget)
{
    /* a COPY (or a block) keeps every row until it ends: the rows count
     * against the server's budget, a COPY larger than it fails with 53200
     * and writes nothing, the budget is whole again after, and a COPY that
     * fits lands in full */
    Env e;
    env_open(&e);
    exec_ok(&e, "CREATE TABLE kv (id bigint PRIMARY KEY, v bigint NOT NULL)");
    qr_mem_budget_set(8u << 20);
    copy_start(&e, "COPY kv (id, v) FROM STDIN");
    QrError err;
    qr_error_clear(&err);
    char line[64];
    int rc = QR_OK, sent = 0;
    for (int i = 0; rc == QR_OK && i < 200000; i++, sent++) {
        int n = snprintf(line, sizeof line, "%d\t%d\n", i, i * 3);
        rc = qr_sql_copy_data(e.s, line, (size_t)n, &err);
    }
    cr_assert_eq(rc, QR_ENOMEM, "a COPY over the budget fails: %s", err.message);
    cr_assert_str_eq(qr_error_sqlstate(&err), "53200");
    cr_assert(strstr(err.hint, "smaller transactions"), "%s", err.hint);
    cr_assert(sent > 1000 && sent < 200000, "it failed part way: %d rows", sent);
    cr_assert(!qr_sql_copy_active(e.s));
    cr_assert_eq(qr_mem_budget_used(), 0, "the failed COPY gave its rows back");
    Model m = {0};
    check_model(&e, &m);
    /* a block of INSERTs: the same accounting, given back at COMMIT */
    exec_ok(&e, "BEGIN");
    for (int k = 0; k < N_KEYS; k++) {
        snprintf(line, sizeof line, "INSERT INTO kv VALUES (%d, %d)", k, k + 100);
        exec_ok(&e, line);
        m.live[k] = true;
        m.v[k] = k + 100;
    }
    cr_assert(qr_mem_budget_used() >= (size_t)N_KEYS * sizeof(TxnOp), "the block holds its rows");
    exec_ok(&e, "COMMIT");
    cr_assert_eq(qr_mem_budget_used(), 0);
    check_model(&e, &m);
    qr_mem_budget_set(0);
    env_close(&e);
}

/* What postgres_fdw sends a Quarry partition (docs/scale-out.md): every
 * routed INSERT names the foreign table's _score column (NULL or DEFAULT:
 * accepted, stores nothing; a value: refused, never dropped); with
 * use_remote_estimate an UPDATE or DELETE is first costed by EXPLAIN of
 * SELECT ..., ctid ... FOR UPDATE (planned, not run); the text functions
 * come as quarry.matches, and no other schema names them. */
Test(sql_dml, what_postgres_fdw_sends_a_partition)
{
    Env e;
    env_open(&e);
    exec_ok(&e, "CREATE TABLE d (id bigint PRIMARY KEY, body text, n integer)");
    exec_ok(&e, "INSERT INTO d (id, body, n, _score) VALUES (1, 'hydro power', 5, NULL)");
    exec_ok(&e, "INSERT INTO d (id, body, _score, n) VALUES (2, 'wind power', DEFAULT, 6)");
    exec_fails(&e, "INSERT INTO d (id, body, _score) VALUES (3, 'x', 1.5)", "428C9",
               "cannot insert a non-DEFAULT value into column \"_score\"");
    exec_fails(&e, "INSERT INTO d (id, _id) VALUES (3, 7)", "42703", "column \"_id\" does not exist");
    QrSqlResult *r = NULL;
    QrError err;
    qr_error_clear(&err);
    const char *q = "SELECT id, n, _score FROM d WHERE quarry.matches(body, 'power') ORDER BY id";
    cr_assert_eq(qr_sql_exec(e.s, q, strlen(q), &r, &err), QR_OK, "%s", err.message);
    cr_assert_eq(r->n_rows, 2);
    cr_assert_eq(r->vals[0].u.i, 1);
    cr_assert_eq(r->vals[1].u.i, 5);
    cr_assert_eq(r->vals[4].u.i, 6);
    cr_assert(r->vals[2].u.f > 0, "scored under the predicate");
    qr_sql_result_free(r);
    exec_fails(&e, "SELECT id FROM d WHERE public.matches(body, 'power')", "42883",
               "function public.matches(...) does not exist");
    exec_fails(&e, "SELECT pg_catalog.score() FROM d", "42883", "does not exist");
    /* the cost of an UPDATE's scan: EXPLAIN plans it, only EXPLAIN */
    q = "EXPLAIN SELECT id, body, n, _score, ctid FROM public.d WHERE ((id = 1)) FOR UPDATE";
    cr_assert_eq(qr_sql_exec(e.s, q, strlen(q), &r, &err), QR_OK, "%s", err.message);
    cr_assert(r->n_rows >= 1 && strstr(r->vals[0].u.s.s, "(cost="), "a plan with costs");
    qr_sql_result_free(r);
    exec_fails(&e, "SELECT id, ctid FROM d WHERE id = 1 FOR UPDATE", "0A000",
               "FOR UPDATE is not supported");
    exec_fails(&e, "EXPLAIN ANALYZE SELECT ctid FROM d FOR UPDATE", "0A000",
               "FOR UPDATE is not supported");
    exec_fails(&e, "SELECT ctid FROM d", "42703", "column \"ctid\" does not exist");
    env_close(&e);
}

/* A coordinator with use_remote_estimate asks a partition for EXPLAIN of
 * its scan sorted (ORDER BY _score DESC, ...) and unsorted, and sorts
 * locally unless the node's sort costs less than shipping the rows; so the
 * Sort's cost must be PostgreSQL's cost_sort (2 * cpu_operator_cost per
 * comparison, cpu_operator_cost per row out), else a partitioned top-k
 * fetches every match from every node (docs/scale-out.md). */
Test(sql_dml, sort_costs_as_postgresql_does)
{
    Env e;
    env_open(&e);
    exec_ok(&e, "CREATE TABLE d (id bigint PRIMARY KEY, body text)");
    char sql[64 * 1024];
    size_t off = (size_t)snprintf(sql, sizeof sql, "INSERT INTO d VALUES ");
    for (int i = 0; i < 1000; i++)
        off += (size_t)snprintf(sql + off, sizeof sql - off, "%s(%d, '%s power %d')", i ? "," : "",
                                i, i % 3 ? "wind" : "hydro", i % 7);
    exec_ok(&e, sql);
    QrSqlResult *r = NULL;
    QrError err;
    qr_error_clear(&err);
    const char *q = "EXPLAIN SELECT id, _score FROM d WHERE quarry.matches(body, 'wind') "
                    "ORDER BY _score DESC NULLS FIRST, id ASC NULLS LAST";
    cr_assert_eq(qr_sql_exec(e.s, q, strlen(q), &r, &err), QR_OK, "%s", err.message);
    double s0, s1, k0, k1, n, kn;
    cr_assert(r->n_rows >= 3, "a sort over a scan");
    const char *sort = r->vals[0].u.s.s, *scan = NULL;
    cr_assert(sscanf(sort, "Sort  (cost=%lf..%lf rows=%lf", &s0, &s1, &n) == 3, "%s", sort);
    for (uint64_t i = 1; i < r->n_rows && !scan; i++)
        if (strstr(r->vals[i].u.s.s, "Scan") && strstr(r->vals[i].u.s.s, "(cost="))
            scan = strstr(r->vals[i].u.s.s, "(cost=");
    cr_assert(scan && sscanf(scan, "(cost=%lf..%lf rows=%lf", &k0, &k1, &kn) == 3, "the scan's cost");
    cr_assert_eq(n, 666, "the matches, exactly: %s", sort);
    cr_assert_eq(kn, n);
    /* startup: the input (the scan, and the projection of two columns under
     * the sort, a few hundredths a row) + the comparisons */
    double extra = s0 - k1 - 0.005 * n * log2(n);
    cr_assert(extra >= -0.011 && extra <= 0.05 * n, "startup: input + comparisons: %s / %s",
              sort, scan);
    cr_assert_float_eq(s1, s0 + 0.0025 * n, 0.011, "total: + a cpu_operator_cost per row: %s", sort);
    qr_sql_result_free(r);
    env_close(&e);
}
