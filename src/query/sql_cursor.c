/*
 * sql_cursor.c — the statements that name things inside a session: SQL
 * cursors (DECLARE / FETCH / MOVE / CLOSE), prepared statements (PREPARE /
 * EXECUTE / DEALLOCATE, one namespace with the wire protocol's named
 * statements, as in PostgreSQL) and DISCARD ALL.
 *
 * Layer: query/.  Reached from sql_session.c through the sqlc_* hooks of
 * sql_int.h; runs queries through sql_select.c.
 *
 * Cursors are materialized: DECLARE runs its query to the end into a result
 * of its own (arena capped by quarry.mem_cap), and FETCH / MOVE move over
 * those rows, so every direction works (NEXT, PRIOR, FIRST, LAST, ABSOLUTE,
 * RELATIVE, FORWARD / BACKWARD n | ALL).  A NO SCROLL cursor refuses to move
 * backward (55000), as PostgreSQL does.  A cursor without WITH HOLD needs a
 * transaction block (25P01) and closes when the block ends; WITH HOLD lives
 * until CLOSE, DISCARD ALL or the session's end.
 *
 * A cursor's position is PostgreSQL's: 0 before the first row, k on row k
 * (1-based), n_rows + 1 after the last.
 */
#include "query/sql_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* DeclareCursorStmt.options bits (PostgreSQL's CURSOR_OPT_*) */
enum {
    CUR_BINARY = 0x1,
    CUR_SCROLL = 0x2,
    CUR_NO_SCROLL = 0x4,
    CUR_HOLD = 0x20,
};

/* A declared cursor: the rows of its query and where it stands. */
typedef struct SqlCursor {
    struct SqlCursor *next;
    char *name;          /* owns */
    QrSqlResult *rows;   /* owns: the query's materialized rows */
    uint64_t pos;        /* 0 .. rows->n_rows + 1 (see the file comment) */
    bool hold;           /* WITH HOLD: survives the end of its transaction */
    bool no_scroll;      /* NO SCROLL: forward only */
    bool binary;         /* BINARY: values go out in binary */
} SqlCursor;

/* A named prepared statement (SQL PREPARE or the protocol's Parse). */
typedef struct SqlNamed {
    struct SqlNamed *next;
    char *name;          /* owns */
    QrSqlStmt *st;       /* owns one reference */
} SqlNamed;

static const char *const SQLC_TAGS[] = {"DeclareCursorStmt", "FetchStmt", "ClosePortalStmt",
                                        "PrepareStmt",       "ExecuteStmt", "DeallocateStmt",
                                        "DiscardStmt"};

bool sqlc_handles(const char *tag)
{
    for (size_t i = 0; tag && i < sizeof SQLC_TAGS / sizeof *SQLC_TAGS; i++)
        if (!strcmp(tag, SQLC_TAGS[i]))
            return true;
    return false;
}

const char *sqlc_kind(const cJSON *stmt, const char *tag)
{
    const cJSON *b = sqlj_body(stmt);
    if (!strcmp(tag, "DeclareCursorStmt"))
        return "DECLARE CURSOR";
    if (!strcmp(tag, "FetchStmt"))
        return sqlj_bool(b, "ismove") ? "MOVE" : "FETCH";
    if (!strcmp(tag, "ClosePortalStmt"))
        return "CLOSE CURSOR";
    if (!strcmp(tag, "PrepareStmt"))
        return "PREPARE";
    if (!strcmp(tag, "ExecuteStmt"))
        return "EXECUTE";
    if (!strcmp(tag, "DeallocateStmt"))
        return sqlj_str(b, "name") ? "DEALLOCATE" : "DEALLOCATE ALL";
    if (!strcmp(tag, "DiscardStmt"))
        return "DISCARD";
    return NULL;
}

/* ---- the session's lists ---- */

static SqlCursor *cursor_find(const QrSqlSession *s, const char *name)
{
    for (SqlCursor *k = s->cursors; k; k = k->next)
        if (!strcmp(k->name, name))
            return k;
    return NULL;
}

static void cursor_unlink_free(QrSqlSession *s, SqlCursor *k)
{
    for (SqlCursor **pp = &s->cursors; *pp; pp = &(*pp)->next)
        if (*pp == k) {
            *pp = k->next;
            break;
        }
    qr_sql_result_free(k->rows);
    qr_free(k->name);
    qr_free(k);
}

static SqlNamed *named_find(const QrSqlSession *s, const char *name)
{
    for (SqlNamed *n = s->named; n; n = n->next)
        if (!strcmp(n->name, name))
            return n;
    return NULL;
}

static void named_unlink_free(QrSqlSession *s, SqlNamed *n)
{
    for (SqlNamed **pp = &s->named; *pp; pp = &(*pp)->next)
        if (*pp == n) {
            *pp = n->next;
            break;
        }
    qr_sql_stmt_unref(n->st);
    qr_free(n->name);
    qr_free(n);
}

void sqlc_end_txn(QrSqlSession *s)
{
    SqlCursor *k = s->cursors;
    while (k) {
        SqlCursor *next = k->next;
        if (!k->hold)
            cursor_unlink_free(s, k);
        k = next;
    }
}

void sqlc_session_free(QrSqlSession *s)
{
    while (s->cursors)
        cursor_unlink_free(s, s->cursors);
    while (s->named)
        named_unlink_free(s, s->named);
}

int qr_sql_named_add(QrSqlSession *s, const char *name, QrSqlStmt *st, QrError *err)
{
    if (named_find(s, name)) {
        qr_error_set(err, QR_EEXISTS, "prepared statement \"%s\" already exists", name);
        qr_error_set_sqlstate(err, "42P05");
        return QR_EEXISTS;
    }
    SqlNamed *n = qr_calloc(1, sizeof *n);
    char *nm = qr_strdup(name);
    if (!n || !nm) {
        qr_free(n);
        qr_free(nm);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    n->name = nm;
    n->st = st;
    st->refs++;
    n->next = s->named;
    s->named = n;
    return QR_OK;
}

QrSqlStmt *qr_sql_named_get(QrSqlSession *s, const char *name)
{
    SqlNamed *n = named_find(s, name);
    return n ? n->st : NULL;
}

bool qr_sql_named_drop(QrSqlSession *s, const char *name)
{
    SqlNamed *n = named_find(s, name);
    if (n)
        named_unlink_free(s, n);
    return n != NULL;
}

bool qr_sql_cursor_columns(QrSqlSession *s, const char *name, const QrSqlColumn **cols,
                           int *n_cols, bool *binary)
{
    SqlCursor *k = cursor_find(s, name);
    if (!k)
        return false;
    *cols = k->rows->cols;
    *n_cols = k->rows->n_cols;
    *binary = k->binary;
    return true;
}

bool qr_sql_cursor_close(QrSqlSession *s, const char *name)
{
    SqlCursor *k = cursor_find(s, name);
    if (k)
        cursor_unlink_free(s, k);
    return k != NULL;
}

const char *qr_sql_stmt_kind_in(QrSqlSession *s, const QrSqlStmt *st)
{
    if (!st->node_tag || strcmp(st->node_tag, "ExecuteStmt") != 0)
        return st->kind;
    SqlNamed *n = named_find(s, sqlj_str(sqlj_body(st->stmt), "name") ?: "");
    return n ? n->st->kind : st->kind;
}

void qr_sql_stmt_columns_in(QrSqlSession *s, const QrSqlStmt *st, const QrSqlColumn **cols,
                            int *n_cols)
{
    *cols = st->cols;
    *n_cols = st->n_cols;
    /* a FETCH returns what its cursor has now, which may be another cursor
     * of the same name than the one of prepare time */
    const cJSON *b = st->node_tag && !strcmp(st->node_tag, "FetchStmt") ? sqlj_body(st->stmt) : NULL;
    SqlCursor *k = b && !sqlj_bool(b, "ismove") ? cursor_find(s, sqlj_str(b, "portalname")) : NULL;
    if (k) {
        *cols = k->rows->cols;
        *n_cols = k->rows->n_cols;
    }
}

/* ---- DECLARE ---- */

static int declare_exec(SqlCtx *cx, QrSqlStmt *st, const cJSON *b, QrSqlResult *res)
{
    QrSqlSession *s = cx->sess;
    const char *name = sqlj_str(b, "portalname");
    int opt = sqlj_int(b, "options", 0);
    if (!name || !name[0])
        return sql_err_at(cx, -1, QR_ESYNTAX, "42601", "a cursor needs a name");
    if (!(opt & CUR_HOLD) && s->txn_status != 'T')
        return sql_err_at(cx, -1, QR_EINVAL, "25P01",
                          "DECLARE CURSOR can only be used in transaction blocks");
    if (cursor_find(s, name))
        return sql_err_at(cx, -1, QR_EEXISTS, "42P03", "cursor \"%s\" already exists", name);
    if ((opt & CUR_SCROLL) && (opt & CUR_NO_SCROLL))
        return sql_err_at(cx, -1, QR_ESYNTAX, "42601",
                          "cannot specify both SCROLL and NO SCROLL");
    QrArena *a = qr_arena_new(sql_session_mem_cap(s));
    QrSqlResult *rows = a ? qr_arena_calloc(a, sizeof *rows) : NULL;
    SqlCursor *k = qr_calloc(1, sizeof *k);
    char *nm = qr_strdup(name);
    if (!rows || !k || !nm) {
        qr_arena_free(a);
        qr_free(k);
        qr_free(nm);
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    }
    rows->arena = a;
    rows->kind = QR_SQL_RES_ROWS;
    /* the rows go to the cursor's arena; values that borrow the parameters
     * (in the DECLARE's result) are copied there too */
    QrArena *run_arena = cx->arena;
    QrSqlResult *run_res = cx->res;
    cx->arena = a;
    cx->res = rows;
    int rc = sql_query_run(cx, sqlj_get(b, "query"), rows);
    uint64_t nv = rows->n_rows * (uint64_t)rows->n_cols;
    for (uint64_t i = 0; rc == QR_OK && i < nv; i++)
        rc = sqlv_own(cx, &rows->vals[i]);
    cx->arena = run_arena;
    cx->res = run_res;
    if (rc) {
        qr_arena_free(a);
        qr_free(k);
        qr_free(nm);
        return rc;
    }
    st->refs++; /* the rows may borrow the statement's text */
    rows->stmt = st;
    rows->binary = opt & CUR_BINARY;
    k->name = nm;
    k->rows = rows;
    k->hold = opt & CUR_HOLD;
    k->no_scroll = opt & CUR_NO_SCROLL;
    k->binary = opt & CUR_BINARY;
    k->next = s->cursors;
    s->cursors = k;
    snprintf(res->tag, sizeof res->tag, "DECLARE CURSOR");
    return QR_OK;
}

/* ---- FETCH / MOVE ---- */

/* howMany of a FetchStmt: FETCH ALL is LONG_MAX, which JSON carries as a
 * double; absent is 0. */
static int64_t fetch_count(const cJSON *b)
{
    const cJSON *h = sqlj_get(b, "howMany");
    if (!cJSON_IsNumber(h))
        return 0;
    if (h->valuedouble >= 9.2e18)
        return INT64_MAX;
    if (h->valuedouble <= -9.2e18)
        return -INT64_MAX;
    return (int64_t)h->valuedouble;
}

static int fetch_exec(SqlCtx *cx, const cJSON *b, QrSqlResult *res)
{
    const char *name = sqlj_str(b, "portalname");
    bool move = sqlj_bool(b, "ismove");
    const char *dir = sqlj_str(b, "direction");
    int64_t how = fetch_count(b);
    SqlCursor *k = name ? cursor_find(cx->sess, name) : NULL;
    if (!k)
        return sql_err_at(cx, -1, QR_ENOTFOUND, "34000", "cursor \"%s\" does not exist",
                          name ? name : "");
    int64_t n = (int64_t)k->rows->n_rows;
    int64_t pos = (int64_t)k->pos;
    /* the rows to return, in order: first, step (+1 / -1), count; and the
     * position after */
    int64_t first = 0, step = 1, cnt = 0, after = pos;
    if (!dir || !strcmp(dir, "FETCH_FORWARD") || !strcmp(dir, "FETCH_BACKWARD")) {
        bool back = dir && !strcmp(dir, "FETCH_BACKWARD");
        if (how < 0) {
            back = !back;
            how = -how;
        }
        if (how == 0) { /* the current row again */
            cnt = pos >= 1 && pos <= n;
            first = pos;
        } else if (!back) {
            int64_t left = pos < n ? n - pos : 0;
            cnt = how < left ? how : left;
            first = pos + 1;
            after = how <= left ? pos + how : n + 1; /* on the last row returned */
        } else {
            int64_t start = pos - 1 < n ? pos - 1 : n; /* the row before pos */
            int64_t left = start > 0 ? start : 0;
            cnt = how < left ? how : left;
            first = start;
            step = -1;
            after = how <= left ? start - how + 1 : 0;
        }
    } else {
        int64_t target;
        if (!strcmp(dir, "FETCH_ABSOLUTE"))
            target = how >= 0 ? how : n + 1 + how;
        else /* FETCH_RELATIVE */
            target = pos + how;
        if (target < 0)
            target = 0;
        if (target > n + 1)
            target = n + 1;
        after = target;
        cnt = target >= 1 && target <= n;
        first = target;
    }
    if (k->no_scroll && (after < pos || (step < 0 && cnt > 0))) {
        sql_err_at(cx, -1, QR_EINVAL, "55000", "cursor can only scan forward");
        qr_error_hint(cx->err, "Declare it with SCROLL option to enable backward scan.");
        return cx->err->code;
    }
    k->pos = (uint64_t)after;
    snprintf(res->tag, sizeof res->tag, "%s %lld", move ? "MOVE" : "FETCH", (long long)cnt);
    if (move)
        return QR_OK;
    int nc = k->rows->n_cols;
    res->kind = QR_SQL_RES_ROWS;
    res->binary = k->binary;
    res->n_cols = nc;
    res->cols = qr_arena_alloc(cx->arena, ((size_t)nc + 1) * sizeof *res->cols);
    res->vals = qr_arena_alloc(cx->arena, ((size_t)cnt * (size_t)nc + 1) * sizeof *res->vals);
    if (!res->cols || !res->vals)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    memcpy(res->cols, k->rows->cols, (size_t)nc * sizeof *res->cols);
    for (int c = 0; c < nc; c++)
        if (res->cols[c].name &&
            !(res->cols[c].name = qr_arena_strndup(cx->arena, res->cols[c].name,
                                                   strlen(res->cols[c].name))))
            return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    for (int64_t i = 0; i < cnt; i++) {
        const SqlValue *src = k->rows->vals + (uint64_t)(first - 1 + i * step) * (uint64_t)nc;
        SqlValue *dst = res->vals + (uint64_t)i * (uint64_t)nc;
        memcpy(dst, src, (size_t)nc * sizeof *dst);
        for (int c = 0; c < nc; c++) {
            int rc = sqlv_own(cx, &dst[c]);
            if (rc)
                return rc;
        }
    }
    res->n_rows = (uint64_t)cnt;
    return QR_OK;
}

/* ---- PREPARE / EXECUTE / DEALLOCATE ---- */

static int prepare_exec(SqlCtx *cx, const cJSON *b, QrSqlResult *res)
{
    QrSqlSession *s = cx->sess;
    const char *name = sqlj_str(b, "name");
    const cJSON *types = sqlj_get(b, "argtypes");
    int nt = cJSON_GetArraySize(types);
    if (!name)
        return sql_err_at(cx, -1, QR_ESYNTAX, "42601", "a prepared statement needs a name");
    if (named_find(s, name))
        return sql_err_at(cx, -1, QR_EEXISTS, "42P05", "prepared statement \"%s\" already exists",
                          name);
    uint32_t *oids = qr_arena_calloc(cx->arena, (size_t)(nt + 1) * sizeof *oids);
    if (!oids)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, types)
    {
        const cJSON *tn = sqlj_is(it, "TypeName");
        const char *tname = sqlj_last_name(sqlj_get(tn, "names"));
        QrSqlType t;
        if (sqlj_get(tn, "arrayBounds"))
            return sql_err_at(cx, sqlj_loc(it), QR_EUNSUPPORTED, "0A000",
                              "array parameter types are not supported");
        if (!tname || !sqlt_from_name(tname, &t))
            return sql_err_at(cx, sqlj_loc(it), QR_ENOTFOUND, "42704",
                              "type \"%s\" does not exist", tname ? tname : "?");
        oids[i++] = qr_sql_type_oid(t);
    }
    QrSqlStmt *inner;
    int rc = sql_stmt_from_node(s, cx->sql, cx->sql_len, sqlj_get(b, "query"), oids, nt, &inner,
                                cx->err);
    if (rc)
        return rc;
    rc = qr_sql_named_add(s, name, inner, cx->err);
    qr_sql_stmt_unref(inner);
    if (rc == QR_OK)
        snprintf(res->tag, sizeof res->tag, "PREPARE");
    return rc;
}

/* The prepared statement EXECUTE names (26000 if none) and its arguments
 * bound against its parameter types. */
static int execute_bind(SqlCtx *cx, const cJSON *b, QrSqlStmt **inner, SqlExpr ***args)
{
    const char *name = sqlj_str(b, "name");
    SqlNamed *n = name ? named_find(cx->sess, name) : NULL;
    if (!n)
        return sql_err_at(cx, -1, QR_ENOTFOUND, "26000", "prepared statement \"%s\" does not exist",
                          name ? name : "");
    const cJSON *params = sqlj_get(b, "params");
    int np = cJSON_GetArraySize(params);
    if (np != n->st->n_params) {
        sql_err_at(cx, -1, QR_ESYNTAX, "42601",
                   "wrong number of parameters for prepared statement \"%s\"", name);
        qr_error_detail(cx->err, "Expected %d parameters but got %d.", n->st->n_params, np);
        return cx->err->code;
    }
    SqlExpr **e = qr_arena_calloc(cx->arena, (size_t)(np + 1) * sizeof *e);
    if (!e)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, params)
    {
        int rc = sql_expr_compile_as(cx, it, NULL, n->st->param_types[i], &e[i]);
        if (rc)
            return rc;
        i++;
    }
    *inner = n->st;
    *args = e;
    return QR_OK;
}

/* EXECUTE runs the named statement with its arguments as text parameters;
 * its result is the EXECUTE's (*instead). */
static int execute_exec(SqlCtx *cx, const cJSON *b, QrSqlResult **instead)
{
    QrSqlStmt *inner;
    SqlExpr **args;
    int rc = execute_bind(cx, b, &inner, &args);
    if (rc)
        return rc;
    int np = inner->n_params;
    const char **vals = qr_arena_calloc(cx->arena, (size_t)(np + 1) * sizeof *vals);
    int *lens = qr_arena_calloc(cx->arena, (size_t)(np + 1) * sizeof *lens);
    if (!vals || !lens)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    QrBuf t;
    qr_buf_init(&t);
    SqlEvalRow none = {.doc = -1};
    for (int i = 0; i < np && rc == QR_OK; i++) {
        SqlValue v;
        if ((rc = sql_expr_eval(cx, args[i], &none, &v)) || v.is_null)
            continue;
        t.len = 0;
        qr_sql_value_text(&v, &t);
        char *s = qr_arena_strndup(cx->arena, t.data ? (const char *)t.data : "", t.len);
        if (!s)
            rc = sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
        vals[i] = s;
        lens[i] = (int)t.len;
    }
    qr_buf_free(&t);
    if (rc)
        return rc;
    QrSqlParams p = {.n = np, .values = vals, .lengths = lens};
    /* the named statement may be deallocated while its result lives: the
     * result holds its own reference (qr_sql_execute) */
    rc = qr_sql_execute(cx->sess, inner, &p, instead, cx->err);
    if (rc)
        cx->err->offset = -1; /* a position in the PREPARE's text, not this one's */
    return rc;
}

static int deallocate_exec(SqlCtx *cx, const cJSON *b, QrSqlResult *res)
{
    const char *name = sqlj_str(b, "name");
    if (!name) {
        while (cx->sess->named)
            named_unlink_free(cx->sess, cx->sess->named);
        snprintf(res->tag, sizeof res->tag, "DEALLOCATE ALL");
        return QR_OK;
    }
    if (!qr_sql_named_drop(cx->sess, name))
        return sql_err_at(cx, -1, QR_ENOTFOUND, "26000", "prepared statement \"%s\" does not exist",
                          name);
    snprintf(res->tag, sizeof res->tag, "DEALLOCATE");
    return QR_OK;
}

/* DISCARD ALL: as a new session (cursors, prepared statements, settings). */
static int discard_exec(SqlCtx *cx, const cJSON *b, QrSqlResult *res)
{
    const char *target = sqlj_str(b, "target");
    if (target && strcmp(target, "DISCARD_ALL") != 0) {
        /* PLANS / SEQUENCES / TEMP: Quarry caches no plans across
         * statements that could go stale, and has neither of the others */
        snprintf(res->tag, sizeof res->tag, "DISCARD %s", target + 8);
        return QR_OK;
    }
    if (cx->sess->txn_status != 'I')
        return sql_err_at(cx, -1, QR_EINVAL, "25001",
                          "DISCARD ALL cannot run inside a transaction block");
    sqlc_session_free(cx->sess);
    sqlu_reset_all(cx->sess);
    snprintf(res->tag, sizeof res->tag, "DISCARD ALL");
    return QR_OK;
}

/* ---- the hooks ---- */

int sqlc_describe(SqlCtx *cx, const QrSqlStmt *st, QrSqlColumn **cols, int *n_cols)
{
    const cJSON *b = sqlj_body(st->stmt);
    *cols = NULL;
    *n_cols = 0;
    if (!strcmp(st->node_tag, "DeclareCursorStmt")) {
        /* NoData, as PostgreSQL; binding the query types its parameters */
        QrSqlColumn *c;
        int n;
        struct SqlQuery *q;
        return sql_query_bind(cx, sqlj_get(b, "query"), &q, &c, &n);
    }
    const QrSqlColumn *src = NULL;
    int n = 0;
    if (!strcmp(st->node_tag, "FetchStmt") && !sqlj_bool(b, "ismove")) {
        SqlCursor *k = cursor_find(cx->sess, sqlj_str(b, "portalname"));
        if (k) {
            src = k->rows->cols;
            n = k->rows->n_cols;
        }
    } else if (!strcmp(st->node_tag, "ExecuteStmt")) {
        QrSqlStmt *inner;
        SqlExpr **args;
        int rc = execute_bind(cx, b, &inner, &args);
        if (rc)
            return rc;
        src = inner->cols;
        n = inner->n_cols;
    }
    if (n == 0)
        return QR_OK;
    /* copied: the cursor or the named statement may go before this one */
    QrSqlColumn *c = qr_arena_alloc(cx->arena, (size_t)n * sizeof *c);
    if (!c)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    memcpy(c, src, (size_t)n * sizeof *c);
    for (int i = 0; i < n; i++)
        if (c[i].name && !(c[i].name = qr_arena_strndup(cx->arena, c[i].name, strlen(c[i].name))))
            return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    *cols = c;
    *n_cols = n;
    return QR_OK;
}

int sqlc_exec(SqlCtx *cx, QrSqlStmt *st, QrSqlResult *res, QrSqlResult **instead)
{
    const cJSON *b = sqlj_body(st->stmt);
    const char *tag = st->node_tag;
    *instead = NULL;
    res->kind = QR_SQL_RES_COMMAND;
    if (!strcmp(tag, "DeclareCursorStmt"))
        return declare_exec(cx, st, b, res);
    if (!strcmp(tag, "FetchStmt"))
        return fetch_exec(cx, b, res);
    if (!strcmp(tag, "ClosePortalStmt")) {
        const char *name = sqlj_str(b, "portalname");
        if (!name) {
            while (cx->sess->cursors)
                cursor_unlink_free(cx->sess, cx->sess->cursors);
        } else if (!qr_sql_cursor_close(cx->sess, name)) {
            return sql_err_at(cx, -1, QR_ENOTFOUND, "34000", "cursor \"%s\" does not exist", name);
        }
        snprintf(res->tag, sizeof res->tag, "CLOSE CURSOR");
        return QR_OK;
    }
    if (!strcmp(tag, "PrepareStmt"))
        return prepare_exec(cx, b, res);
    if (!strcmp(tag, "ExecuteStmt"))
        return execute_exec(cx, b, instead);
    if (!strcmp(tag, "DeallocateStmt"))
        return deallocate_exec(cx, b, res);
    return discard_exec(cx, b, res);
}
