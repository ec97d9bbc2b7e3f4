/*
 * sql_utility.c — the statements that are not queries: dispatch to DDL
 * (sql_ddl.c), DML (sql_dml.c), COPY (sql_copy.c) and transactions
 * (sql_txn.c); SET / SHOW / RESET here; the result helpers they share.
 *
 * Layer: query/.  Reached from the SQL engine through the sqlu_* hooks of
 * sql_int.h.
 *
 * Statement rules every utility statement follows: a session in a failed
 * transaction block ('E') accepts only ROLLBACK / COMMIT (25P02 otherwise);
 * writes are buffered per statement and applied at its end outside a
 * block, at COMMIT inside one; any error discards the statement's writes
 * and, inside a block, turns the session 'E'.
 */
#include "query/sql_w.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---- result helpers ---- */

SqlValue *sqlw_rows_add(SqlCtx *cx, SqlwRows *rs)
{
    if (rs->n == rs->cap) {
        uint64_t cap = rs->cap ? rs->cap * 2 : 16;
        SqlValue *v = qr_arena_alloc(cx->arena, (size_t)(cap * (uint64_t)rs->n_cols) * sizeof *v + 1);
        if (!v) {
            qr_error_set(cx->err, QR_ENOMEM, "out of memory collecting rows");
            return NULL;
        }
        if (rs->n)
            memcpy(v, rs->vals, (size_t)(rs->n * (uint64_t)rs->n_cols) * sizeof *v);
        rs->vals = v;
        rs->cap = cap;
    }
    SqlValue *row = rs->vals + rs->n * (uint64_t)rs->n_cols;
    for (int i = 0; i < rs->n_cols; i++)
        row[i] = sqlv_null();
    rs->n++;
    return row;
}

void sqlw_rows_result(QrSqlResult *res, SqlwRows *rs, QrSqlColumn *cols, int n_cols)
{
    res->kind = QR_SQL_RES_ROWS;
    res->cols = cols;
    res->n_cols = n_cols;
    res->n_rows = rs->n;
    res->vals = rs->vals;
    res->pos = 0;
}

QrSqlColumn *sqlw_cols(SqlCtx *cx, int n, const char *const *names, const QrSqlType *types)
{
    QrSqlColumn *c = qr_arena_calloc(cx->arena, (size_t)(n ? n : 1) * sizeof *c);
    if (!c) {
        qr_error_set(cx->err, QR_ENOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        c[i].name = names[i];
        c[i].type = types[i];
        c[i].typmod = -1;
    }
    return c;
}

int sqlw_acquire(SqlCtx *cx, const char *name, QrTable **out, QrError *err)
{
    SqluState *st = sqlu_state(cx->sess, err);
    if (!st)
        return err ? err->code : QR_ENOMEM;
    if (st->n_held == st->cap_held) {
        int cap = st->cap_held ? st->cap_held * 2 : 8;
        void *h = qr_realloc(st->held, (size_t)cap * sizeof *st->held);
        if (!h)
            return qr_error_set(err, QR_ENOMEM, "out of memory");
        st->held = h;
        st->cap_held = cap;
    }
    int rc = qr_table_acquire(cx->sess->db, name, out, err);
    if (rc == QR_OK) {
        snprintf(st->held[st->n_held++], sizeof st->held[0], "%s", name);
        QrTable *v = sqld_view(cx->sess, name); /* the block rebuilt it: its copy */
        if (v && out)
            *out = v;
    }
    return rc;
}

void sqlw_release(QrSqlSession *s, const char *name)
{
    SqluState *st = s->u_state;
    for (int i = st ? st->n_held - 1 : -1; i >= 0; i--)
        if (!strcmp(st->held[i], name)) {
            qr_table_release(s->db, name);
            memmove(st->held[i], st->held[i + 1], (size_t)(st->n_held - i - 1) * sizeof st->held[0]);
            st->n_held--;
        }
}

void sqlw_release_all(QrSqlSession *s)
{
    SqluState *st = s->u_state;
    for (int i = 0; st && i < st->n_held; i++)
        qr_table_release(s->db, st->held[i]);
    if (st)
        st->n_held = 0;
}

int sqlw_table(SqlCtx *cx, const cJSON *rv, QrTable **out)
{
    const char *name = sqlj_str(rv, "relname");
    const char *schema = sqlj_str(rv, "schemaname");
    if (!name)
        return sql_err_at(cx, -1, QR_ESYNTAX, "42601", "table name expected");
    if (schema && strcmp(schema, "public") != 0)
        return sql_err_at(cx, sqlj_loc(rv), QR_ENOTFOUND, "42P01",
                          "relation \"%s.%s\" does not exist", schema, name);
    QrError e;
    qr_error_clear(&e);
    if (!qr_name_valid(name) || sqld_hidden(cx->sess, name) ||
        sqlw_acquire(cx, name, out, &e) != QR_OK) {
        if (e.code != QR_OK && e.code != QR_ENOTFOUND) {
            qr_error_copy(cx->err, &e);
            return e.code;
        }
        return sql_err_at(cx, sqlj_loc(rv), QR_ENOTFOUND, "42P01",
                          "relation \"%s\" does not exist", name);
    }
    return QR_OK;
}

const char *sqlw_const_text(SqlCtx *cx, const cJSON *n)
{
    const cJSON *b = sqlj_is(n, "A_Const");
    if (b) {
        if (sqlj_bool(b, "isnull"))
            return NULL;
        const cJSON *v;
        if ((v = sqlj_get(b, "sval")))
            return sqlj_str(v, "sval") ? sqlj_str(v, "sval") : "";
        if ((v = sqlj_get(b, "ival"))) {
            char tmp[32];
            snprintf(tmp, sizeof tmp, "%d", sqlj_int(v, "ival", 0));
            return qr_arena_strndup(cx->arena, tmp, strlen(tmp));
        }
        if ((v = sqlj_get(b, "fval")))
            return sqlj_str(v, "fval");
        if ((v = sqlj_get(b, "boolval")))
            return sqlj_bool(v, "boolval") ? "true" : "false";
        return NULL;
    }
    if (sqlj_is(n, "String"))
        return sqlj_sval(n);
    if ((b = sqlj_is(n, "Integer"))) {
        char tmp[32];
        snprintf(tmp, sizeof tmp, "%d", sqlj_int(b, "ival", 0));
        return qr_arena_strndup(cx->arena, tmp, strlen(tmp));
    }
    if ((b = sqlj_is(n, "Float")))
        return sqlj_str(b, "fval");
    if ((b = sqlj_is(n, "Boolean")))
        return sqlj_bool(b, "boolval") ? "true" : "false";
    return NULL;
}

/* libpg_query 15-4.0.0 prints zero and negative integer constants as
 * {"A_Const": {"ival": {}}} (libpg_query issue 243, fixed upstream in
 * PR 249, not in Debian 12's package): the value is read back from the
 * statement text at the node's location ("-5", "- 7", "0"). */
typedef struct FixInts {
    const char *sql;
    size_t len;
} FixInts;

static int fix_int(cJSON *n, void *arg)
{
    const char *sql = ((FixInts *)arg)->sql;
    size_t len = ((FixInts *)arg)->len;
    if (cJSON_IsObject(n)) {
        cJSON *ac = cJSON_GetObjectItemCaseSensitive(n, "A_Const");
        cJSON *iv = ac ? cJSON_GetObjectItemCaseSensitive(ac, "ival") : NULL;
        if (cJSON_IsObject(iv) && !cJSON_GetObjectItemCaseSensitive(iv, "ival")) {
            int loc = sqlj_int(ac, "location", -1);
            long long v = 0;
            if (loc >= 0 && (size_t)loc < len) {
                size_t i = (size_t)loc;
                bool neg = false;
                if (sql[i] == '-') {
                    neg = true;
                    i++;
                    while (i < len && isspace((unsigned char)sql[i]))
                        i++;
                }
                while (i < len && isdigit((unsigned char)sql[i]))
                    v = v * 10 + (sql[i++] - '0');
                v = neg ? -v : v;
            }
            cJSON_AddNumberToObject(iv, "ival", (double)v);
        }
    }
    return QR_OK;
}

void sqlw_fix_ints(cJSON *n, const char *sql, size_t len)
{
    FixInts f = {sql, len};
    if (n)
        sqlj_walk(n, fix_int, &f); /* on ENOMEM some stay empty: they read as 0, as before */
}

/* ---- SET / SHOW / RESET ---- */

static char *lower_dup(SqlCtx *cx, const char *s)
{
    size_t n = strlen(s);
    char *d = qr_arena_strndup(cx->arena, s, n);
    for (size_t i = 0; d && i < n; i++)
        d[i] = (char)tolower((unsigned char)d[i]);
    return d;
}

static int reset_one(SqlCtx *cx, const char *name)
{
    for (int i = 0; i < SQLW_N_SETTINGS; i++)
        if (!strcasecmp(SQLW_SETTINGS[i].name, name))
            return qr_sql_session_set(cx->sess, SQLW_SETTINGS[i].name, SQLW_SETTINGS[i].dflt,
                                      cx->err);
    if (strchr(name, '.'))
        return qr_sql_session_set(cx->sess, name, "", cx->err);
    /* the session's other settings (bytea_output, lock_timeout ...): their defaults, and
     * 42704 for an unknown name */
    return qr_sql_session_set(cx->sess, name, NULL, cx->err);
}

void sqlu_reset_all(QrSqlSession *s)
{
    /* every setting the session changed goes back to its default
     * (read-only ones such as server_version were never changed) */
    for (int i = 0; i < s->n_settings; i++) {
        const char *n = s->settings[i].name;
        const char *d = "";
        for (int k = 0; k < SQLW_N_SETTINGS; k++)
            if (!strcasecmp(SQLW_SETTINGS[k].name, n))
                d = SQLW_SETTINGS[k].dflt;
        QrError e;
        qr_error_clear(&e);
        char copy[64]; /* set may move the settings array */
        snprintf(copy, sizeof copy, "%s", n);
        qr_sql_session_set(s, copy, d, &e);
    }
}

static int exec_set(SqlCtx *cx, const cJSON *b, QrSqlResult *res)
{
    const char *kind = sqlj_str(b, "kind");
    const char *name = sqlj_str(b, "name");
    snprintf(res->tag, sizeof res->tag, "%s",
             kind && !strncmp(kind, "VAR_RESET", 9) ? "RESET" : "SET");
    res->kind = QR_SQL_RES_COMMAND;
    if (!kind)
        return sql_err_at(cx, -1, QR_ESYNTAX, "42601", "malformed SET");
    if (!strcmp(kind, "VAR_RESET_ALL")) {
        sqlu_reset_all(cx->sess);
        return QR_OK;
    }
    if (!name)
        return sql_err_at(cx, -1, QR_ESYNTAX, "42601", "malformed SET");
    if (!strcmp(kind, "VAR_RESET") || !strcmp(kind, "VAR_SET_DEFAULT"))
        return reset_one(cx, name);
    if (!strcmp(kind, "VAR_SET_MULTI")) /* SET TRANSACTION / SESSION CHARACTERISTICS */
        return sqli_set(cx, cx->sess->u_state, name, sqlj_get(b, "args"), NULL);
    if (strcmp(kind, "VAR_SET_VALUE") != 0)
        return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000", "SET %s is not supported", kind);
    QrBuf v;
    qr_buf_init(&v);
    const cJSON *a;
    int i = 0;
    cJSON_ArrayForEach(a, sqlj_get(b, "args"))
    {
        const char *t = sqlw_const_text(cx, a);
        if (!t) {
            qr_buf_free(&v);
            return sql_err_at(cx, sqlj_loc(a), QR_EINVAL, "22023",
                              "SET %s takes constant values", name);
        }
        if (i++)
            qr_buf_append(&v, ", ", 2);
        qr_buf_append(&v, t, strlen(t));
    }
    qr_buf_putc(&v, 0);
    bool level = !strcasecmp(name, "transaction_isolation") ||
                 !strcasecmp(name, "default_transaction_isolation");
    int rc = !qr_buf_ok(&v) ? qr_error_set(cx->err, QR_ENOMEM, "out of memory")
             : level ? sqli_set(cx, cx->sess->u_state, name, NULL, (const char *)v.data)
                     : qr_sql_session_set(cx->sess, name, (const char *)v.data, cx->err);
    qr_buf_free(&v);
    return rc;
}

static int exec_show(SqlCtx *cx, const cJSON *b, QrSqlResult *res)
{
    const char *name = sqlj_str(b, "name");
    if (!name)
        return sql_err_at(cx, -1, QR_ESYNTAX, "42601", "malformed SHOW");
    snprintf(res->tag, sizeof res->tag, "SHOW");
    if (!strcasecmp(name, "all")) {
        static const char *const names[] = {"name", "setting", "description"};
        static const QrSqlType types[] = {QR_SQL_TEXT, QR_SQL_TEXT, QR_SQL_TEXT};
        QrSqlColumn *cols = sqlw_cols(cx, 3, names, types);
        SqlwRows rs = {.n_cols = 3};
        if (!cols)
            return cx->err->code;
        for (int i = 0; i < SQLW_N_SETTINGS; i++) {
            SqlValue *row = sqlw_rows_add(cx, &rs);
            if (!row)
                return cx->err->code;
            const char *v = sqlw_setting(cx->sess, SQLW_SETTINGS[i].name);
            row[0] = sqlv_text(SQLW_SETTINGS[i].name, strlen(SQLW_SETTINGS[i].name));
            row[1] = sqlv_text(v, strlen(v));
            row[2] = sqlv_text(SQLW_SETTINGS[i].desc, strlen(SQLW_SETTINGS[i].desc));
        }
        sqlw_rows_result(res, &rs, cols, 3);
        return QR_OK;
    }
    const char *v = sqlw_setting(cx->sess, name);
    if (!v)
        return sql_err_at(cx, -1, QR_EINVAL, "42704",
                          "unrecognized configuration parameter \"%s\"", name);
    v = qr_arena_strndup(cx->arena, v, strlen(v));
    const char *cname = lower_dup(cx, name);
    QrSqlType ty = QR_SQL_TEXT;
    QrSqlColumn *cols = sqlw_cols(cx, 1, &cname, &ty);
    SqlwRows rs = {.n_cols = 1};
    SqlValue *row = cols && v ? sqlw_rows_add(cx, &rs) : NULL;
    if (!row)
        return qr_error_set(cx->err, QR_ENOMEM, "out of memory");
    row[0] = sqlv_text(v, strlen(v));
    sqlw_rows_result(res, &rs, cols, 1);
    return QR_OK;
}

/* ---- dispatch ---- */

static const struct {
    const char *tag;
    const char *kind;
} KINDS[] = {
    {"CreateStmt", "CREATE TABLE"},   {"DropStmt", NULL},
    {"IndexStmt", "CREATE INDEX"},    {"AlterTableStmt", "ALTER TABLE"},
    {"TruncateStmt", "TRUNCATE TABLE"}, {"InsertStmt", "INSERT"},
    {"UpdateStmt", "UPDATE"},         {"DeleteStmt", "DELETE"},
    {"CopyStmt", "COPY"},             {"TransactionStmt", NULL},
    {"VariableSetStmt", "SET"},       {"VariableShowStmt", "SHOW"},
    {"CreateTableAsStmt", "SELECT"},  {"DiscardStmt", "DISCARD ALL"},
    {"CreateSeqStmt", "CREATE SEQUENCE"}, {"AlterSeqStmt", "ALTER SEQUENCE"},
    {"LockStmt", "LOCK TABLE"},       {"CommentStmt", "COMMENT"},
    {"AlterOwnerStmt", "ALTER SCHEMA"}, {"RenameStmt", "ALTER TABLE"},
};

/* The command word of a transaction statement ("BEGIN" ...), NULL for the
 * kinds Quarry does not run (savepoints, two-phase). */
static const char *txn_kind(const cJSON *b)
{
    const char *k = sqlj_str(b, "kind");
    if (!k)
        return NULL;
    if (!strcmp(k, "TRANS_STMT_BEGIN") || !strcmp(k, "TRANS_STMT_START"))
        return "BEGIN";
    if (!strcmp(k, "TRANS_STMT_COMMIT"))
        return "COMMIT";
    if (!strcmp(k, "TRANS_STMT_ROLLBACK"))
        return "ROLLBACK";
    return NULL;
}

const char *sqlu_kind(const cJSON *stmt, const char *tag)
{
    const cJSON *b = sqlj_body(stmt);
    if (!tag)
        return NULL;
    if (!strcmp(tag, "TransactionStmt")) {
        const char *k = txn_kind(b), *sk = sqlj_str(b, "kind");
        return k                                              ? k
               : sk && !strcmp(sk, "TRANS_STMT_ROLLBACK_TO") ? "ROLLBACK"
               : sk && !strcmp(sk, "TRANS_STMT_RELEASE")     ? "RELEASE"
                                                              : "SAVEPOINT";
    }
    if (!strcmp(tag, "DropStmt")) {
        const char *rt = sqlj_str(b, "removeType");
        return rt && !strcmp(rt, "OBJECT_INDEX")      ? "DROP INDEX"
               : rt && !strcmp(rt, "OBJECT_SEQUENCE") ? "DROP SEQUENCE"
                                                      : "DROP TABLE";
    }
    if (!strcmp(tag, "VacuumStmt"))
        return sqlj_bool(b, "is_vacuumcmd") ? "VACUUM" : "ANALYZE";
    if (!strcmp(tag, "VariableSetStmt")) {
        const char *k = sqlj_str(b, "kind");
        return k && !strncmp(k, "VAR_RESET", 9) ? "RESET" : "SET";
    }
    for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++)
        if (!strcmp(KINDS[i].tag, tag))
            return KINDS[i].kind;
    return NULL;
}

int sqlu_describe(SqlCtx *cx, const cJSON *stmt, const char *tag, QrSqlColumn **cols,
                  int *n_cols)
{
    const cJSON *b = sqlj_body(stmt);
    *cols = NULL;
    *n_cols = 0;
    if (!tag)
        return QR_OK;
    sqlw_fix_ints((cJSON *)stmt, cx->sql, cx->sql_len);
    if (!strcmp(tag, "VariableShowStmt")) {
        const char *name = sqlj_str(b, "name");
        if (name && !strcasecmp(name, "all")) {
            static const char *const names[] = {"name", "setting", "description"};
            static const QrSqlType types[] = {QR_SQL_TEXT, QR_SQL_TEXT, QR_SQL_TEXT};
            *cols = sqlw_cols(cx, 3, names, types);
            *n_cols = 3;
        } else if (name) {
            const char *cname = lower_dup(cx, name);
            QrSqlType ty = QR_SQL_TEXT;
            *cols = sqlw_cols(cx, 1, &cname, &ty);
            *n_cols = 1;
        }
        return *cols || !*n_cols ? QR_OK : cx->err->code;
    }
    if (!strcmp(tag, "InsertStmt") || !strcmp(tag, "UpdateStmt") || !strcmp(tag, "DeleteStmt"))
        return sqlw_dml_describe(cx, b, cols, n_cols);
    return QR_OK;
}

static bool ends_block(const char *tag, const cJSON *b)
{
    if (strcmp(tag, "TransactionStmt") != 0)
        return false;
    const char *k = txn_kind(b), *sk = sqlj_str(b, "kind");
    return (k && (!strcmp(k, "COMMIT") || !strcmp(k, "ROLLBACK"))) ||
           (sk && !strcmp(sk, "TRANS_STMT_ROLLBACK_TO"));
}

static bool is_savepoint_kind(const char *k)
{
    return k && (!strcmp(k, "TRANS_STMT_SAVEPOINT") || !strcmp(k, "TRANS_STMT_RELEASE") ||
                 !strcmp(k, "TRANS_STMT_ROLLBACK_TO"));
}

int sqlu_exec(SqlCtx *cx, const cJSON *stmt, const char *tag, QrSqlResult *res)
{
    QrSqlSession *s = cx->sess;
    const cJSON *b = sqlj_body(stmt);
    SqluState *st = sqlu_state(s, cx->err);
    if (!st)
        return cx->err->code;
    /* the tree belongs to the statement; filling in lost constants is
     * idempotent and only makes it say what the text says */
    sqlw_fix_ints((cJSON *)stmt, cx->sql, cx->sql_len);
    if (!tag || !b)
        return sql_err_at(cx, -1, QR_ESYNTAX, "42601", "malformed statement");
    res->kind = QR_SQL_RES_COMMAND;
    if (s->txn_status == 'E' && !ends_block(tag, b))
        return sql_err_at(cx, -1, QR_EINVAL, "25P02",
                          "current transaction is aborted, commands ignored until end of "
                          "transaction block");
    if (st->copy)
        return sql_err_at(cx, -1, QR_EINVAL, "08P01", "a COPY FROM STDIN is in progress");
    txn_stmt_begin(st);
    int rc;
    if (!strcmp(tag, "TransactionStmt")) {
        const char *k = txn_kind(b), *sk = sqlj_str(b, "kind");
        if (is_savepoint_kind(sk))
            rc = svp_exec(cx, st, sk, sqlj_str(b, "savepoint_name"), res->tag, sizeof res->tag);
        else if (!k)
            rc = sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                            "two-phase commit is not supported");
        else if (!strcmp(k, "BEGIN") && !st->in_block &&
                 (rc = sqli_begin(cx, st, sqlj_get(b, "options"))) != QR_OK)
            return rc; /* no block began */
        else {
            bool was_in_block = st->in_block;
            rc = txn_exec(cx, st, k, res->tag, sizeof res->tag);
            if (was_in_block && !st->in_block) {
                sqli_end(s, st);
                svp_clear(st);
                sqlo_clear(st);
                sqld_rebuilds_to(s, st, 0); /* exchanged at COMMIT, or dropped */
                sqld_drops_to(s, st, 0); /* dropped at COMMIT, or back */
                sqld_meta_forget(s, st); /* published at COMMIT, or forgotten */
                if (rc == QR_OK && !strcmp(res->tag, "COMMIT"))
                    sqld_forget(s, st); /* what it created stays */
                else
                    sqld_undo_to(s, st, 0); /* rolled back: so are its CREATE TABLEs */
            }
        }
        return rc; /* the block's state is txn_exec's business */
    }
    if (strcmp(tag, "VariableSetStmt") != 0 && strcmp(tag, "VariableShowStmt") != 0)
        sqli_mark_used(s, st);
    st->in_stmt = true; /* its reads see the block's writes of earlier statements only */
    char undo[3 * QR_NAME_MAX + 64] = ""; /* CREATE TABLE / INDEX in a block: its undo */
    if (!strcmp(tag, "CreateStmt") || !strcmp(tag, "IndexStmt"))
        sqld_before_create(cx, st, tag, b, undo, sizeof undo);
    if (!strcmp(tag, "VariableSetStmt"))
        rc = exec_set(cx, b, res);
    else if (!strcmp(tag, "VariableShowStmt"))
        rc = exec_show(cx, b, res);
    else if (!strcmp(tag, "InsertStmt"))
        rc = sqlw_insert(cx, st, b, res);
    else if (!strcmp(tag, "UpdateStmt"))
        rc = sqlw_update(cx, st, b, res);
    else if (!strcmp(tag, "DeleteStmt"))
        rc = sqlw_delete(cx, st, b, res);
    else if (!strcmp(tag, "TruncateStmt"))
        rc = sqlw_truncate(cx, st, b, res);
    else if (!strcmp(tag, "CopyStmt"))
        rc = sqlw_copy_exec(cx, st, b, res);
    else if (!strcmp(tag, "DiscardStmt")) {
        snprintf(res->tag, sizeof res->tag, "DISCARD ALL");
        rc = QR_OK;
    } else
        rc = sqlw_ddl_exec(cx, b, tag, res);
    st->in_stmt = false;
    if (rc == QR_OK)
        rc = sqld_created(cx, st, undo);
    if (rc == QR_OK && !st->copy)
        rc = txn_stmt_end(s, st, cx->err);
    if (!st->in_block && !st->undoing && (st->meta || st->n_undo)) {
        /* a statement that staged DDL on its own (ADD COLUMN ... DEFAULT):
         * published with its writes, or forgotten */
        sqld_meta_forget(s, st);
        if (rc == QR_OK)
            sqld_forget(s, st);
        else
            sqld_undo_to(s, st, 0);
    }
    if (!st->copy)
        sqlw_release_all(s); /* a COPY keeps its table until it ends */
    if (rc != QR_OK) {
        txn_stmt_fail(st);
        if (st->in_block)
            s->txn_status = 'E';
    }
    return rc;
}

void sqlu_session_free(QrSqlSession *s)
{
    SqluState *st = s->u_state;
    if (!st)
        return;
    if (st->in_block && (st->n_undo || sqld_pending(st))) { /* it ends inside its block: roll back */
        sqlw_copy_free(st);
        txn_discard(st);
        st->in_block = false;
        s->txn_status = 'I';
        sqld_rebuilds_to(s, st, 0);
        sqld_drops_to(s, st, 0);
        sqld_meta_forget(s, st); /* before the undo: a B-tree no index names goes */
        sqld_undo_to(s, st, 0);
    }
    qr_free(st->drops);
    qr_free(st->rebuilds);
    cJSON_Delete(st->meta);
    sqld_forget(s, st);
    qr_free(st->undo);
    st->undo = NULL;
    sqlw_copy_free(st);
    sqlw_release_all(s);
    qr_free(st->held);
    sqli_session_free(st);
    svp_session_free(st);
    sqlo_session_free(st);
    txn_discard(st);
    qr_free(st->ops);
    qr_free(st->slots);
    qr_free(st);
    s->u_state = NULL;
}
