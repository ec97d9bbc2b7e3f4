/*
 * sql_session.c — the SQL front door of sql.h: sessions and settings,
 * statement splitting, prepare (parse + describe, cached by text), execute
 * (parameter decoding, transaction-state gating, timeouts, dispatch to the
 * query engine or to the utility hooks), results and COPY row rendering.
 *
 * Layer: query/.  Calls libpg_query, sql_select.c (queries, EXPLAIN) and
 * the utility hooks of sql_int.h.
 */
#include "query/sql_int.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <pg_query.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "store/util.h"

#define SQL_DEFAULT_MEM_CAP (512u << 20)
#define SQL_STMT_CACHE_MAX 256

/* ---- errors, checks, notices ---- */

int64_t qr_sql_utf8_chars(const char *text, size_t n)
{
    int64_t c = 0;
    for (size_t i = 0; i < n && text[i]; i++)
        c += ((unsigned char)text[i] & 0xC0) != 0x80;
    return c;
}

int sql_err_at(SqlCtx *cx, int loc, QrCode code, const char *sqlstate, const char *fmt, ...)
{
    QrError *err = cx->err;
    if (err && err->code == QR_OK) {
        va_list ap;
        va_start(ap, fmt);
        qr_error_setv(err, code, fmt, ap);
        va_end(ap);
        if (sqlstate)
            qr_error_set_sqlstate(err, sqlstate);
        if (loc >= 0 && cx->sql && (size_t)loc <= cx->sql_len)
            qr_error_pos(err, qr_sql_utf8_chars(cx->sql, (size_t)loc) + 1, -1, -1);
    }
    return err && err->code ? (int)err->code : (int)code;
}

int sql_check(SqlCtx *cx)
{
    if (cx->err->code)
        return cx->err->code;
    if ((++cx->ticks & 1023) != 0)
        return QR_OK;
    return sql_check_now(cx);
}

int sql_check_now(SqlCtx *cx)
{
    if (cx->err->code)
        return cx->err->code;
    if (cx->sess && atomic_load(&cx->sess->cancel))
        return sql_err_at(cx, -1, QR_ECANCELED, "57014", "canceling statement due to user request");
    if (cx->deadline_ns && qr_now_ns() > cx->deadline_ns)
        return sql_err_at(cx, -1, QR_ETIMEOUT, "57014", "canceling statement due to statement timeout");
    if (qr_arena_over_budget(cx->arena))
        return quarry_budget_error(cx->err);
    if (qr_arena_over_cap(cx->arena)) {
        sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
        qr_error_hint(cx->err, "raise quarry.mem_cap or narrow the query");
        return QR_ELIMIT;
    }
    return QR_OK;
}

void sql_notice(SqlCtx *cx, const char *severity, const char *sqlstate, const char *fmt, ...)
{
    QrSqlResult *r = cx->res;
    if (!r)
        return;
    QrSqlNotice *nn = qr_arena_alloc(cx->arena, (size_t)(r->n_notices + 1) * sizeof *nn);
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *msg = qr_arena_strndup(cx->arena, buf, strlen(buf));
    if (!nn || !msg)
        return;
    if (r->n_notices)
        memcpy(nn, r->notices, (size_t)r->n_notices * sizeof *nn);
    QrSqlNotice *n = &nn[r->n_notices];
    memset(n, 0, sizeof *n);
    n->severity = severity;
    snprintf(n->sqlstate, sizeof n->sqlstate, "%s", sqlstate ? sqlstate : "00000");
    n->message = msg;
    r->notices = nn;
    r->n_notices++;
}

/* ---- sessions and settings ---- */

int qr_sql_session_new(QrDb *db, QrSqlSession **out, QrError *err)
{
    *out = NULL;
    QrSqlSession *s = qr_calloc(1, sizeof *s);
    if (!s)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    s->db = db;
    s->txn_status = 'I';
    s->access_max = QR_SQL_ACCESS_SCHEMA;
    atomic_init(&s->cancel, false);
    *out = s;
    return QR_OK;
}

void qr_sql_session_free(QrSqlSession *s)
{
    if (!s)
        return;
    sqlu_session_free(s);
    sqlc_session_free(s);
    for (int i = 0; i < s->n_settings; i++)
        qr_free(s->settings[i].value);
    qr_free(s->settings);
    for (int i = 0; i < s->n_cache; i++)
        qr_sql_stmt_unref(s->cache[i]);
    qr_free(s->cache);
    qr_free(s);
}

QrDb *qr_sql_session_db(const QrSqlSession *s) { return s->db; }
char qr_sql_session_txn_status(const QrSqlSession *s) { return s->txn_status; }
void qr_sql_session_cancel(QrSqlSession *s) { atomic_store(&s->cancel, true); }

static const char *ACCESS_PATHS[] = {"auto", "text", "btree", "scan", "check", "full", "pk"};

/* Known settings with their defaults; a NULL validator accepts any text. */
static const struct {
    const char *name, *dflt;
} SETTINGS[] = {
    {"statement_timeout", "0"},     {"quarry.access_path", "auto"},
    {"quarry.typo_tolerance", "off"}, {"quarry.prefix_search", "off"},
    {"quarry.mem_cap", "536870912"}, {"client_encoding", "UTF8"},
    {"server_encoding", "UTF8"},    {"datestyle", "ISO, MDY"},
    {"timezone", "UTC"},            {"search_path", "\"$user\", public"},
    {"application_name", ""},       {"extra_float_digits", "1"},
    {"standard_conforming_strings", "on"}, {"integer_datetimes", "on"},
    {"intervalstyle", "postgres"},  {"server_version", "15.0"},
    {"server_version_num", "150000"}, {"transaction_isolation", "read committed"},
    {"default_transaction_isolation", "read committed"}, {"lock_timeout", "0"},
    {"idle_in_transaction_session_timeout", "0"}, {"max_identifier_length", "63"},
    {"is_superuser", "on"},         {"bytea_output", "hex"},
    {"client_min_messages", "notice"}, {"transaction_read_only", "off"},
    {"session_authorization", ""},  /* the authenticated role (current_user) */
    /* accepted for pg_dump, pg_restore and psql scripts; no effect in Quarry */
    {"synchronize_seqscans", "on"}, {"row_security", "on"},
    {"check_function_bodies", "on"}, {"xmloption", "content"},
    {"default_table_access_method", "heap"}, {"default_tablespace", ""},
    {"quote_all_identifiers", "off"}, {"escape_string_warning", "on"},
    {"default_transaction_read_only", "off"}, {"lc_messages", "C"},
};

/* Milliseconds from "5000", "5s", "250ms", "2min"; -1 if bad. */
static int64_t parse_ms(const char *v)
{
    char *end;
    double d = strtod(v, &end);
    if (end == v || d < 0)
        return -1;
    while (*end == ' ')
        end++;
    if (!*end || !strcasecmp(end, "ms"))
        return (int64_t)d;
    if (!strcasecmp(end, "s"))
        return (int64_t)(d * 1000);
    if (!strcasecmp(end, "min"))
        return (int64_t)(d * 60000);
    if (!strcasecmp(end, "h"))
        return (int64_t)(d * 3600000);
    return -1;
}

int qr_sql_session_set(QrSqlSession *s, const char *name, const char *value, QrError *err)
{
    char lname[64];
    size_t n = strlen(name);
    if (n >= sizeof lname)
        return qr_error_set(err, QR_EINVAL, "unrecognized configuration parameter \"%s\"", name);
    for (size_t i = 0; i <= n; i++)
        lname[i] = (char)tolower((unsigned char)name[i]);
    bool known = strchr(lname, '.') != NULL && strncmp(lname, "quarry.", 7) != 0;
    for (size_t i = 0; i < sizeof SETTINGS / sizeof *SETTINGS; i++)
        if (!strcmp(SETTINGS[i].name, lname))
            known = true;
    if (!known) {
        qr_error_set(err, QR_EINVAL, "unrecognized configuration parameter \"%s\"", name);
        qr_error_set_sqlstate(err, "42704");
        return QR_EINVAL;
    }
    bool reset = !value; /* RESET: the default, which the ceiling lowers silently */
    if (!value)
        for (size_t i = 0; i < sizeof SETTINGS / sizeof *SETTINGS; i++)
            if (!strcmp(SETTINGS[i].name, lname))
                value = SETTINGS[i].dflt;
    if (!value)
        value = "";
    if (!strcmp(lname, "timezone") && !sqlz_valid(value)) {
        qr_error_set(err, QR_EINVAL, "invalid value for parameter \"TimeZone\": \"%s\"", value);
        qr_error_set_sqlstate(err, "22023");
        return QR_EINVAL;
    }
    if (!strcmp(lname, "statement_timeout") && parse_ms(value) < 0) {
        qr_error_set(err, QR_EINVAL, "invalid value for parameter \"statement_timeout\": \"%s\"", value);
        return QR_EINVAL;
    }
    if (!strcmp(lname, "bytea_output") && strcasecmp(value, "hex") && strcasecmp(value, "escape")) {
        qr_error_set(err, QR_EINVAL, "invalid value for parameter \"bytea_output\": \"%s\"", value);
        qr_error_hint(err, "Available values: escape, hex.");
        return QR_EINVAL;
    }
    if (!strcmp(lname, "quarry.access_path")) {
        bool ok = false;
        for (size_t i = 0; i < sizeof ACCESS_PATHS / sizeof *ACCESS_PATHS; i++)
            ok |= !strcasecmp(value, ACCESS_PATHS[i]);
        if (!ok) {
            qr_error_set(err, QR_EINVAL, "invalid value for parameter \"quarry.access_path\": \"%s\"",
                         value);
            qr_error_hint(err, "one of auto, text, btree, scan, check, full, pk");
            return QR_EINVAL;
        }
    }
    if (!strcmp(lname, "quarry.typo_tolerance")) {
        int t = schema_typo_parse(value);
        if (t < 0 || t == QR_TYPO_TABLE) {
            qr_error_set(err, QR_EINVAL,
                         "invalid value for parameter \"quarry.typo_tolerance\": \"%s\"", value);
            qr_error_hint(err, "one of off, auto, 1, 2");
            return QR_EINVAL;
        }
    }
    if (!strcmp(lname, "quarry.prefix_search") && strcasecmp(value, "on") &&
        strcasecmp(value, "off") && strcasecmp(value, "true") && strcasecmp(value, "false")) {
        qr_error_set(err, QR_EINVAL, "invalid value for parameter \"quarry.prefix_search\": \"%s\"",
                     value);
        qr_error_hint(err, "on or off");
        return QR_EINVAL;
    }
    if (!strcmp(lname, "quarry.mem_cap")) {
        char *end;
        unsigned long long v = strtoull(value, &end, 10);
        size_t ceiling = qr_mem_budget_limit();
        if (*end || (v != 0 && v < (1u << 20))) { /* 0: the default (RESET) */
            qr_error_set(err, QR_EINVAL, "invalid value for parameter \"quarry.mem_cap\": \"%s\"", value);
            qr_error_hint(err, "bytes, at least 1048576 (0 for the default)");
            return QR_EINVAL;
        }
        if (ceiling && v > ceiling && !reset) {
            /* no session may plan for more than the whole server has */
            qr_error_set(err, QR_EINVAL,
                         "%llu is outside the valid range for parameter \"quarry.mem_cap\" "
                         "(1048576 .. %zu)", v, ceiling);
            qr_error_detail(err, "the server's memory limit for all running queries is %zu "
                                 "bytes", ceiling);
            qr_error_hint(err, "ask for at most %zu, or start the server with a larger "
                               "--mem-limit", ceiling);
            return QR_EINVAL;
        }
    }
    char *copy = qr_strdup(value);
    if (!copy)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    for (int i = 0; i < s->n_settings; i++)
        if (!strcmp(s->settings[i].name, lname)) {
            qr_free(s->settings[i].value);
            s->settings[i].value = copy;
            return QR_OK;
        }
    if (s->n_settings == s->cap_settings) {
        int nc = s->cap_settings ? s->cap_settings * 2 : 8;
        SqlSetting *ns = qr_realloc(s->settings, (size_t)nc * sizeof *ns);
        if (!ns) {
            qr_free(copy);
            return qr_error_set(err, QR_ENOMEM, "out of memory");
        }
        s->settings = ns;
        s->cap_settings = nc;
    }
    snprintf(s->settings[s->n_settings].name, sizeof s->settings[0].name, "%s", lname);
    s->settings[s->n_settings++].value = copy;
    return QR_OK;
}

const char *qr_sql_session_get(const QrSqlSession *s, const char *name)
{
    for (int i = 0; i < s->n_settings; i++)
        if (!strcasecmp(s->settings[i].name, name))
            return s->settings[i].value;
    for (size_t i = 0; i < sizeof SETTINGS / sizeof *SETTINGS; i++)
        if (!strcasecmp(SETTINGS[i].name, name))
            return SETTINGS[i].dflt;
    return NULL;
}

uint64_t sql_session_timeout_ms(const QrSqlSession *s)
{
    int64_t ms = parse_ms(qr_sql_session_get(s, "statement_timeout"));
    uint64_t t = ms > 0 ? (uint64_t)ms : 0;
    if (s->timeout_cap_ms && (t == 0 || t > s->timeout_cap_ms))
        t = s->timeout_cap_ms;
    return t;
}

void qr_sql_session_limit_timeout(QrSqlSession *s, uint64_t max_ms) { s->timeout_cap_ms = max_ms; }

void qr_sql_session_limit_access(QrSqlSession *s, QrSqlAccess max, const char *hint)
{
    s->access_max = max;
    s->access_hint = hint;
    if (max == QR_SQL_ACCESS_READ) { /* what SHOW transaction_read_only says */
        QrError e;
        qr_error_clear(&e);
        qr_sql_session_set(s, "transaction_read_only", "on", &e);
    }
}

/* Refuse a statement needing more than the session may do (25006 for a
 * read-only session, 42501 for one that may not change the schema). */
static int access_check(const QrSqlSession *s, const QrSqlStmt *st, QrError *err)
{
    if (st->access <= s->access_max)
        return QR_OK;
    if (s->access_max == QR_SQL_ACCESS_READ) {
        qr_error_set(err, QR_EPERM, "cannot execute %s in a read-only transaction", st->access_what);
        qr_error_set_sqlstate(err, "25006");
    } else {
        qr_error_set(err, QR_EPERM, "permission denied to execute %s", st->access_what);
        qr_error_detail(err, "this session may read and write rows but not change the schema");
        qr_error_set_sqlstate(err, "42501");
    }
    if (s->access_hint)
        qr_error_hint(err, "%s", s->access_hint);
    return QR_EPERM;
}

static SqlAccessPath session_path(const QrSqlSession *s)
{
    const char *v = qr_sql_session_get(s, "quarry.access_path");
    for (size_t i = 0; v && i < sizeof ACCESS_PATHS / sizeof *ACCESS_PATHS; i++)
        if (!strcasecmp(v, ACCESS_PATHS[i]))
            return (SqlAccessPath)i;
    return SQL_PATH_AUTO;
}

/* ---- splitting ---- */

int qr_sql_split(const char *sql, size_t len, QrSqlSpan **spans, int *n, QrError *err)
{
    *spans = NULL;
    *n = 0;
    char *text = qr_strndup(sql, len);
    if (!text)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    PgQuerySplitResult r = pg_query_split_with_parser(text);
    int rc = QR_OK;
    if (r.error) {
        qr_error_set(err, QR_ESYNTAX, "%s", r.error->message);
        qr_error_set_sqlstate(err, "42601");
        if (r.error->cursorpos > 0)
            qr_error_pos(err, qr_sql_utf8_chars(text, (size_t)r.error->cursorpos - 1) + 1, -1, -1);
        rc = QR_ESYNTAX;
    } else {
        QrSqlSpan *sp = qr_calloc((size_t)r.n_stmts + 1, sizeof *sp);
        if (!sp) {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory");
        } else {
            int k = 0;
            for (int i = 0; i < r.n_stmts; i++) {
                size_t off = (size_t)r.stmts[i]->stmt_location, l = (size_t)r.stmts[i]->stmt_len;
                if (l == 0)
                    l = len - off;
                /* skip statements holding only spaces / comments */
                bool blank = true;
                for (size_t j = off; j < off + l && j < len; j++)
                    if (!isspace((unsigned char)text[j]) && text[j] != ';')
                        blank = false;
                if (blank)
                    continue;
                while (l > 0 && isspace((unsigned char)text[off])) { /* leading spaces */
                    off++;
                    l--;
                }
                sp[k].offset = off;
                sp[k].len = l;
                k++;
            }
            *spans = sp;
            *n = k;
        }
    }
    pg_query_free_split_result(r);
    qr_free(text);
    return rc;
}

/* ---- statements ---- */

/* sqlj_walk visitor: the highest $n of a ParamRef into *(int *)arg. */
static int max_param(cJSON *n, void *arg)
{
    int *mx = arg;
    if (n->string && !strcmp(n->string, "ParamRef")) {
        int k = sqlj_int(n, "number", 0);
        if (k > *mx)
            *mx = k;
    }
    return QR_OK;
}

static const char *node_kind(const cJSON *stmt, const char *tag)
{
    static const struct {
        const char *tag, *kind;
    } K[] = {
        {"SelectStmt", "SELECT"}, {"ExplainStmt", "EXPLAIN"}, {"InsertStmt", "INSERT"},
        {"UpdateStmt", "UPDATE"}, {"DeleteStmt", "DELETE"},   {"CopyStmt", "COPY"},
        {"CreateStmt", "CREATE TABLE"}, {"IndexStmt", "CREATE INDEX"}, {"DropStmt", "DROP"},
        {"VariableSetStmt", "SET"}, {"VariableShowStmt", "SHOW"}, {"TruncateStmt", "TRUNCATE TABLE"},
        {"TransactionStmt", "TRANSACTION"}, {"AlterTableStmt", "ALTER TABLE"},
    };
    const char *k = sqlu_kind(stmt, tag);
    if (k || (k = sqlc_kind(stmt, tag)))
        return k;
    for (size_t i = 0; i < sizeof K / sizeof *K; i++)
        if (!strcmp(K[i].tag, tag))
            return K[i].kind;
    return tag;
}

static void stmt_free(QrSqlStmt *st)
{
    if (!st)
        return;
    sqlj_delete(st->tree);
    qr_arena_free(st->arena);
}

void qr_sql_stmt_unref(QrSqlStmt *st)
{
    if (st && --st->refs <= 0)
        stmt_free(st);
}

void qr_sql_stmt_ref(QrSqlStmt *st) { st->refs++; }
int qr_sql_stmt_n_params(const QrSqlStmt *st) { return st->n_params; }
uint32_t qr_sql_stmt_param_oid(const QrSqlStmt *st, int i)
{
    return i >= 0 && i < st->n_params ? st->param_oids[i] : 0;
}
void qr_sql_stmt_columns(const QrSqlStmt *st, const QrSqlColumn **cols, int *n_cols)
{
    *cols = st->cols;
    *n_cols = st->n_cols;
}
const char *qr_sql_stmt_kind(const QrSqlStmt *st) { return st->kind; }

const char *qr_sql_stmt_text(const QrSqlStmt *st, size_t *len)
{
    *len = st->len;
    return st->sql;
}

static void ctx_init(SqlCtx *cx, QrSqlSession *s, QrArena *a, const char *sql, size_t len,
                     QrError *err)
{
    memset(cx, 0, sizeof *cx);
    cx->sess = s;
    cx->arena = a;
    cx->root_arena = a;
    cx->sql = sql;
    cx->sql_len = len;
    cx->err = err;
    cx->t0_ns = qr_now_ns();
    cx->path = s ? session_path(s) : SQL_PATH_AUTO;
    /* full-text predicates match exact words unless the session asks */
    const char *ty = s ? qr_sql_session_get(s, "quarry.typo_tolerance") : NULL;
    cx->typo = ty && schema_typo_parse(ty) > 0 ? schema_typo_parse(ty) : QR_TYPO_OFF;
    const char *px = s ? qr_sql_session_get(s, "quarry.prefix_search") : NULL;
    cx->prefix_last = px && (!strcasecmp(px, "on") || !strcasecmp(px, "true"));
    (void)sql_stack_left(); /* learn this thread's stack before recursing (sql_stack_low) */
}

/* A new statement (refs 1) holding a copy of the text and the declared
 * parameter types; no parse yet. */
static int stmt_alloc(const char *sql, size_t len, const uint32_t *oids, int n_oids,
                      QrSqlStmt **out, QrError *err)
{
    *out = NULL;
    QrArena *a = qr_arena_new(0);
    QrSqlStmt *st = a ? qr_arena_calloc(a, sizeof *st) : NULL;
    if (!st) {
        qr_arena_free(a);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    st->refs = 1;
    st->arena = a;
    st->sql = qr_arena_strndup(a, sql, len);
    st->len = len;
    if (n_oids > 0) {
        st->declared = qr_arena_alloc(a, (size_t)n_oids * sizeof *st->declared);
        if (st->declared)
            memcpy(st->declared, oids, (size_t)n_oids * sizeof *oids);
        st->n_declared = n_oids;
    }
    if (!st->sql || (n_oids > 0 && !st->declared)) {
        stmt_free(st);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    *out = st;
    return QR_OK;
}

/* Analyze st->stmt (its tag, kind, parameters, result columns): the
 * second half of preparing.  Frees st on failure. */
static int stmt_analyze(QrSqlSession *s, QrSqlStmt *st, const uint32_t *oids, int n_oids,
                        QrSqlStmt **out, QrError *err)
{
    QrArena *a = st->arena;
    size_t len = st->len;
    st->kind = node_kind(st->stmt, st->node_tag);
    if (sql_access_of(st->stmt, &st->access, &st->access_what)) {
        stmt_free(st);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    /* parameters: declared types, then inferred during analysis (PREPARE's
     * $n are its query's) */
    int mx = n_oids;
    if (strcmp(st->node_tag, "PrepareStmt") != 0 && sqlj_walk((cJSON *)st->stmt, max_param, &mx)) {
        stmt_free(st);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    st->n_params = mx;
    st->param_types = qr_arena_calloc(a, (size_t)(mx + 1) * sizeof *st->param_types);
    st->param_oids = qr_arena_calloc(a, (size_t)(mx + 1) * sizeof *st->param_oids);
    if (!st->param_types || !st->param_oids) {
        stmt_free(st);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    for (int i = 0; i < n_oids; i++) {
        if (oids[i] == 0)
            continue;
        if (!qr_sql_type_from_oid(oids[i], &st->param_types[i])) {
            qr_error_set(err, QR_EUNSUPPORTED, "parameter type %u is not supported", oids[i]);
            qr_error_set_sqlstate(err, "0A000");
            stmt_free(st);
            return QR_EUNSUPPORTED;
        }
    }
    SqlCtx cx;
    ctx_init(&cx, s, a, st->sql, len, err);
    cx.analyze_only = true;
    cx.param_types = st->param_types;
    cx.n_params = mx;
    int rc = QR_OK;
    if (!strcmp(st->node_tag, "SelectStmt")) {
        /* bound once: executions plan and run it while no DDL intervened */
        st->bound_gen = s ? qr_db_ddl_generation(s->db) : 0;
        rc = sql_query_bind(&cx, st->stmt, &st->query, &st->cols, &st->n_cols);
    }
    else if (!strcmp(st->node_tag, "ExplainStmt")) {
        st->cols = qr_arena_calloc(a, sizeof *st->cols);
        if (!st->cols)
            rc = qr_error_set(err, QR_ENOMEM, "out of memory");
        else {
            st->cols[0].name = "QUERY PLAN";
            st->cols[0].type = QR_SQL_TEXT;
            st->cols[0].typmod = -1;
            st->n_cols = 1;
        }
    } else if (sqlc_handles(st->node_tag))
        rc = sqlc_describe(&cx, st, &st->cols, &st->n_cols);
    else
        rc = sqlu_describe(&cx, st->stmt, st->node_tag, &st->cols, &st->n_cols);
    sql_ctx_done(&cx);
    if (rc) {
        stmt_free(st);
        return rc;
    }
    for (int i = 0; i < mx; i++) {
        if (st->param_types[i] == QR_SQL_UNKNOWN)
            st->param_types[i] = QR_SQL_TEXT;
        st->param_oids[i] = qr_sql_type_oid(st->param_types[i]);
    }
    *out = st;
    return QR_OK;
}

/* Parse + describe one statement into a new QrSqlStmt (refs 1). */
/* A statement that failed to build in a failed block: PostgreSQL only
 * parses it there, so binding errors (a missing column, an unknown
 * operator) are 25P02 like everything else; a syntax error stays one. */
static int failed_block_error(QrSqlSession *s, int rc, QrError *err)
{
    if (s->txn_status != 'E' || !err || !strcmp(qr_error_sqlstate(err), "42601"))
        return rc;
    qr_error_clear(err);
    qr_error_set(err, QR_EINVAL, "current transaction is aborted, commands ignored until end "
                                 "of transaction block");
    qr_error_set_sqlstate(err, "25P02");
    return QR_EINVAL;
}

static int stmt_build(QrSqlSession *s, const char *sql, size_t len, const uint32_t *oids, int n_oids,
                      QrSqlStmt **out, QrError *err)
{
    QrSqlStmt *st;
    int rc = stmt_alloc(sql, len, oids, n_oids, &st, err);
    if (rc)
        return rc;
    int prc = sql_parse(st->sql, len, s ? sql_session_mem_cap(s) : SQL_DEFAULT_MEM_CAP, &st->tree, err);
    if (prc) {
        stmt_free(st);
        return prc;
    }
    const cJSON *stmts = cJSON_GetObjectItemCaseSensitive(st->tree, "stmts");
    int ns = cJSON_GetArraySize(stmts);
    if (ns > 1) {
        qr_error_set(err, QR_ESYNTAX, "cannot insert multiple commands into a prepared statement");
        qr_error_set_sqlstate(err, "42601");
        stmt_free(st);
        return QR_ESYNTAX;
    }
    if (ns == 0) {
        st->kind = "";
        st->access = QR_SQL_ACCESS_READ;
        *out = st;
        return QR_OK;
    }
    st->stmt = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(stmts, 0), "stmt");
    st->node_tag = sqlj_tag(st->stmt);
    if (!st->node_tag) {
        stmt_free(st);
        return qr_error_set(err, QR_ESYNTAX, "empty statement");
    }
    return stmt_analyze(s, st, oids, n_oids, out, err);
}

int sql_stmt_from_node(QrSqlSession *s, const char *sql, size_t len, const cJSON *node,
                       const uint32_t *oids, int n_oids, QrSqlStmt **out, QrError *err)
{
    *out = NULL;
    QrSqlStmt *st;
    int rc = stmt_alloc(sql, len, oids, n_oids, &st, err);
    if (rc)
        return rc;
    st->tree = cJSON_Duplicate(node, 1);
    if (!st->tree) {
        stmt_free(st);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    st->stmt = st->tree;
    st->node_tag = sqlj_tag(st->stmt);
    if (!st->node_tag) {
        stmt_free(st);
        return qr_error_set(err, QR_ESYNTAX, "empty statement");
    }
    return stmt_analyze(s, st, oids, n_oids, out, err);
}

int qr_sql_prepare(QrSqlSession *s, const char *sql, size_t len, const uint32_t *param_oids,
                   int n_param_oids, QrSqlStmt **out, QrError *err)
{
    for (int i = 0; i < s->n_cache; i++) {
        QrSqlStmt *c = s->cache[i];
        if (c->len == len && memcmp(c->sql, sql, len) == 0 && c->n_declared == n_param_oids &&
            (n_param_oids == 0 ||
             memcmp(c->declared, param_oids, (size_t)n_param_oids * sizeof *param_oids) == 0)) {
            c->refs++;
            *out = c;
            return QR_OK;
        }
    }
    QrSqlStmt *st;
    int rc = stmt_build(s, sql, len, param_oids, n_param_oids, &st, err);
    if (rc) {
        rc = failed_block_error(s, rc, err);
        qr_sql_session_fail(s); /* a failed Parse aborts the transaction too */
        return rc;
    }
    /* cache queries only: utility statements may change what they describe */
    if (st->node_tag && !strcmp(st->node_tag, "SelectStmt")) {
        if (s->n_cache == SQL_STMT_CACHE_MAX) {
            qr_sql_stmt_unref(s->cache[0]);
            memmove(s->cache, s->cache + 1, (size_t)(s->n_cache - 1) * sizeof *s->cache);
            s->n_cache--;
        }
        if (s->n_cache == s->cap_cache) {
            int nc = s->cap_cache ? s->cap_cache * 2 : 16;
            QrSqlStmt **ncache = qr_realloc(s->cache, (size_t)nc * sizeof *ncache);
            if (ncache) {
                s->cache = ncache;
                s->cap_cache = nc;
            }
        }
        if (s->n_cache < s->cap_cache) {
            st->refs++;
            s->cache[s->n_cache++] = st;
        }
    }
    *out = st;
    return QR_OK;
}

/* ---- parameters ---- */

int sql_param_decode(SqlCtx *cx, QrSqlType t, const char *v, int len, int fmt, SqlValue *out)
{
    if (!v) {
        *out = sqlv_null();
        out->type = t;
        return QR_OK;
    }
    if (len < 0)
        len = (int)strlen(v);
    if (fmt == 0) {
        char *s = qr_arena_strndup(cx->arena, v, (size_t)len);
        if (!s)
            return sql_err_at(cx, -1, QR_ELIMIT, NULL, "query memory limit exceeded");
        SqlValue tv = sqlv_text(s, (size_t)len);
        return sqlv_cast(cx, &tv, t, -1, out);
    }
    const uint8_t *p = (const uint8_t *)v;
    uint64_t u = 0;
    out->is_null = false;
    out->type = t;
    if (QR_SQL_IS_ARRAY(t))
        return sqla_recv(cx, p, (size_t)len, QR_SQL_ELEM(t), out);
    if (t == QR_SQL_NUMERIC)
        return sqlv_numeric_recv(cx, p, (size_t)len, out);
    if (t == QR_SQL_DATE || t == QR_SQL_TIME || t == QR_SQL_INTERVAL)
        return sqld_recv(cx, t, p, (size_t)len, out);
    if (t == QR_SQL_UUID || t == QR_SQL_BYTEA)
        return sqlb_recv(cx, t, p, (size_t)len, out);
    if (t == QR_SQL_JSON || t == QR_SQL_JSONB) { /* jsonb: a version byte, 1, first */
        if (t == QR_SQL_JSONB && (len < 1 || p[0] != 1))
            return sql_err_at(cx, -1, QR_EINVAL, "22P03", "unsupported jsonb version number");
        size_t skip = t == QR_SQL_JSONB;
        return sqljs_in(cx, (const char *)p + skip, (size_t)len - skip, t, -1, out);
    }
    switch (t) {
    case QR_SQL_BOOL:
        if (len != 1)
            goto bad;
        out->u.b = p[0] != 0;
        return QR_OK;
    case QR_SQL_INT2:
    case QR_SQL_INT4:
    case QR_SQL_INT8:
    case QR_SQL_OID:
    case QR_SQL_TIMESTAMP:
    case QR_SQL_TIMESTAMPTZ:
    case QR_SQL_FLOAT4:
    case QR_SQL_FLOAT8: {
        int want = t == QR_SQL_INT2 ? 2 : (t == QR_SQL_INT4 || t == QR_SQL_OID || t == QR_SQL_FLOAT4) ? 4 : 8;
        if (len != want)
            goto bad;
        for (int i = 0; i < len; i++)
            u = u << 8 | p[i];
        if (t == QR_SQL_INT2)
            out->u.i = (int16_t)u;
        else if (t == QR_SQL_INT4)
            out->u.i = (int32_t)u;
        else if (t == QR_SQL_OID)
            out->u.i = (uint32_t)u;
        else if (t == QR_SQL_FLOAT4) {
            uint32_t w = (uint32_t)u;
            float f;
            memcpy(&f, &w, 4);
            out->u.f = f;
        } else if (t == QR_SQL_FLOAT8)
            memcpy(&out->u.f, &u, 8);
        else if (sqlt_is_ts(t))
            out->u.i = (int64_t)u + 946684800000000LL; /* 2000-01-01 -> 1970 */
        else
            out->u.i = (int64_t)u;
        return QR_OK;
    }
    default: {
        char *s = qr_arena_strndup(cx->arena, v, (size_t)len);
        if (!s)
            return sql_err_at(cx, -1, QR_ELIMIT, NULL, "query memory limit exceeded");
        out->u.s.s = s;
        out->u.s.n = (size_t)len;
        return QR_OK;
    }
    }
bad:
    return sql_err_at(cx, -1, QR_EINVAL, "22P03", "incorrect binary data format in bind parameter");
}

/* ---- execute ---- */

void qr_sql_session_fail(QrSqlSession *s)
{
    if (s && s->txn_status == 'T')
        s->txn_status = 'E';
}

static bool is_txn_end(const QrSqlStmt *st)
{
    if (!st->node_tag || strcmp(st->node_tag, "TransactionStmt") != 0)
        return false;
    const char *k = sqlj_str(sqlj_body(st->stmt), "kind");
    return k && (!strcmp(k, "TRANS_STMT_ROLLBACK") || !strcmp(k, "TRANS_STMT_COMMIT") ||
                 !strcmp(k, "TRANS_STMT_ROLLBACK_TO"));
}

/* The session's cap, never above the server's budget (the default of
 * 512 MiB is lowered on a server with less). */
size_t sql_session_mem_cap(const QrSqlSession *s)
{
    const char *v = qr_sql_session_get(s, "quarry.mem_cap");
    unsigned long long c = v ? strtoull(v, NULL, 10) : 0;
    size_t cap = c >= (1u << 20) ? (size_t)c : SQL_DEFAULT_MEM_CAP;
    size_t ceiling = qr_mem_budget_limit();
    return ceiling && cap > ceiling ? ceiling : cap;
}

/* The statement's bound query, bound again (into its own arena) when the
 * database's tables changed since. */
static int stmt_bound(SqlCtx *cx, QrSqlStmt *st)
{
    uint64_t gen = qr_db_ddl_generation(cx->sess->db);
    if (st->query && st->bound_gen == gen)
        return QR_OK;
    QrArena *run = cx->arena;
    QrSqlColumn *cols;
    int n_cols;
    cx->arena = st->arena;
    int rc = sql_query_bind(cx, st->stmt, &st->query, &cols, &n_cols);
    cx->arena = run;
    if (rc) {
        st->query = NULL;
        return rc;
    }
    st->bound_gen = gen;
    return QR_OK;
}

int qr_sql_execute(QrSqlSession *s, QrSqlStmt *st, const QrSqlParams *params, QrSqlResult **out,
                   QrError *err)
{
    *out = NULL;
    atomic_store(&s->cancel, false);
    sqlz_display_set(qr_sql_session_get(s, "timezone")); /* timestamptz output (sql_zone.c) */
    if (s->txn_status == 'E' && !is_txn_end(st)) {
        qr_error_set(err, QR_EINVAL,
                     "current transaction is aborted, commands ignored until end of transaction block");
        qr_error_set_sqlstate(err, "25P02");
        return QR_EINVAL;
    }
    if (access_check(s, st, err)) {
        qr_sql_session_fail(s); /* as any failed statement in a block */
        return QR_EPERM;
    }
    QrArena *a = qr_arena_new(sql_session_mem_cap(s));
    QrSqlResult *res = a ? qr_arena_calloc(a, sizeof *res) : NULL;
    if (!res) {
        qr_arena_free(a);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    res->arena = a;
    res->kind = QR_SQL_RES_COMMAND;
    res->copy_delim = '\t';
    res->copy_null = "\\N";
    SqlCtx cx;
    ctx_init(&cx, s, a, st->sql, st->len, err);
    cx.res = res;
    uint64_t tmo = sql_session_timeout_ms(s);
    if (tmo)
        cx.deadline_ns = cx.t0_ns + tmo * 1000000ull;
    cx.param_types = qr_arena_calloc(a, (size_t)(st->n_params + 1) * sizeof *cx.param_types);
    SqlParams *pv = qr_arena_calloc(a, sizeof *pv);
    QrSqlResult *instead = NULL;
    int rc = QR_OK;
    if (!cx.param_types || !pv) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory");
        goto done;
    }
    if (st->n_params)
        memcpy(cx.param_types, st->param_types, (size_t)st->n_params * sizeof *cx.param_types);
    cx.n_params = st->n_params;
    int given = params ? params->n : 0;
    if (given != st->n_params) {
        rc = sql_err_at(&cx, -1, QR_EINVAL, "08P01",
                        "bind message supplies %d parameters, but prepared statement requires %d",
                        given, st->n_params);
        goto done;
    }
    pv->n = given;
    pv->v = qr_arena_calloc(a, (size_t)(given + 1) * sizeof *pv->v);
    if (!pv->v) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < given; i++) {
        int fmt = !params->formats ? 0 : params->n_formats == 1 ? params->formats[0]
                                     : i < params->n_formats   ? params->formats[i]
                                                               : 0;
        if ((rc = sql_param_decode(&cx, st->param_types[i], params->values ? params->values[i] : NULL,
                               params->lengths ? params->lengths[i] : -1, fmt, &pv->v[i])))
            goto done;
    }
    cx.params = pv;
    if (!st->node_tag) {
        res->kind = QR_SQL_RES_EMPTY;
    } else if (!strcmp(st->node_tag, "SelectStmt")) {
        rc = stmt_bound(&cx, st);
        if (rc == QR_OK)
            rc = sql_query_run_bound(&cx, st->query, res);
        if (rc == QR_OK) {
            res->kind = QR_SQL_RES_ROWS;
            snprintf(res->tag, sizeof res->tag, "SELECT %" PRIu64, res->n_rows);
        }
    } else if (!strcmp(st->node_tag, "ExplainStmt")) {
        rc = sql_explain(&cx, st->stmt, res);
        if (rc == QR_OK) {
            res->kind = QR_SQL_RES_ROWS;
            snprintf(res->tag, sizeof res->tag, "EXPLAIN");
        }
    } else if (sqlc_handles(st->node_tag)) {
        rc = sqlc_exec(&cx, st, res, &instead);
    } else {
        rc = sqlu_exec(&cx, st->stmt, st->node_tag, res);
    }
done:
    sql_ctx_done(&cx);
    if (s->txn_status == 'I')
        sqlc_end_txn(s); /* cursors without HOLD end with their block */
    if (rc == QR_OK && instead) { /* EXECUTE: the executed statement's result */
        qr_arena_free(a);
        *out = instead;
        return QR_OK;
    }
    if (rc == QR_OK && err && err->code)
        rc = err->code;
    /* whichever check saw the failed allocation first, name the budget */
    if ((rc == QR_ELIMIT || rc == QR_ENOMEM) && qr_arena_over_budget(a))
        rc = quarry_budget_error(err);
    if (rc) {
        if (err && err->code == QR_OK)
            qr_error_set(err, (QrCode)rc, "statement failed");
        if (s->txn_status == 'T')
            s->txn_status = 'E';
        qr_arena_free(a);
        return rc;
    }
    /* the result outlives the caller's reference to the statement (qr_sql_exec
     * drops it at once): column names are copied, and the statement is pinned
     * for values that borrow its text or parse tree */
    for (int c = 0; c < res->n_cols; c++)
        if (res->cols[c].name &&
            !(res->cols[c].name = qr_arena_strndup(a, res->cols[c].name, strlen(res->cols[c].name)))) {
            qr_arena_free(a);
            return qr_error_set(err, QR_ENOMEM, "out of memory");
        }
    st->refs++;
    res->stmt = st;
    res->took_ms = (double)(qr_now_ns() - cx.t0_ns) / 1e6;
    *out = res;
    return QR_OK;
}

int qr_sql_exec(QrSqlSession *s, const char *sql, size_t len, QrSqlResult **out, QrError *err)
{
    *out = NULL;
    QrSqlStmt *st;
    int rc = stmt_build(s, sql, len, NULL, 0, &st, err);
    if (rc) {
        rc = failed_block_error(s, rc, err);
        qr_sql_session_fail(s);
        return rc;
    }
    QrSqlParams none = {0};
    if (st->n_params) {
        qr_error_set(err, QR_EINVAL, "there is no parameter $1");
        qr_error_set_sqlstate(err, "42P02");
        stmt_free(st);
        qr_sql_session_fail(s);
        return QR_EINVAL;
    }
    rc = qr_sql_execute(s, st, &none, out, err);
    qr_sql_stmt_unref(st);
    return rc;
}

void qr_sql_result_free(QrSqlResult *r)
{
    if (!r)
        return;
    QrSqlStmt *st = r->stmt;
    qr_arena_free(r->arena);
    qr_sql_stmt_unref(st);
}

bool qr_sql_result_fetch(QrSqlResult *r, uint64_t max, const QrSqlValue **rows, uint64_t *n)
{
    uint64_t left = r->pos < r->n_rows ? r->n_rows - r->pos : 0;
    uint64_t k = max == 0 || max > left ? left : max;
    *rows = r->vals ? r->vals + r->pos * (uint64_t)r->n_cols : NULL;
    *n = k;
    r->pos += k;
    return r->pos < r->n_rows;
}

/* ---- COPY ---- */

int qr_sql_copy_data(QrSqlSession *s, const char *data, size_t len, QrError *err)
{
    return sqlu_copy_data(s, data, len, err);
}

int qr_sql_copy_done(QrSqlSession *s, QrSqlResult **out, QrError *err)
{
    *out = NULL;
    QrArena *a = qr_arena_new(0);
    QrSqlResult *res = a ? qr_arena_calloc(a, sizeof *res) : NULL;
    if (!res) {
        qr_arena_free(a);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    res->arena = a;
    res->kind = QR_SQL_RES_COMMAND;
    int rc = sqlu_copy_done(s, res, err);
    if (rc) {
        if (s->txn_status == 'T')
            s->txn_status = 'E';
        qr_arena_free(a);
        return rc;
    }
    *out = res;
    return QR_OK;
}

void qr_sql_copy_fail(QrSqlSession *s, const char *message)
{
    sqlu_copy_fail(s, message);
    if (s->txn_status == 'T')
        s->txn_status = 'E';
}

bool qr_sql_copy_active(const QrSqlSession *s) { return sqlu_copy_active(s); }

/* One CSV field: quoted when it holds the delimiter, a quote or a line
 * break, or is empty while the NULL marker is empty. */
static void copy_csv_field(QrBuf *out, const char *p, size_t n, char delim, const char *null)
{
    bool quote = n == 0 && null[0] == 0;
    for (size_t i = 0; i < n && !quote; i++)
        quote = p[i] == delim || p[i] == '"' || p[i] == '\n' || p[i] == '\r';
    if (!quote) {
        qr_buf_append(out, p, n);
        return;
    }
    qr_buf_putc(out, '"');
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '"')
            qr_buf_putc(out, '"');
        qr_buf_putc(out, (uint8_t)p[i]);
    }
    qr_buf_putc(out, '"');
}

void qr_sql_copy_header(const QrSqlResult *r, QrBuf *out)
{
    if (!r->copy_header || r->copy_format != QR_SQL_COPY_CSV)
        return;
    char delim = r->copy_delim ? r->copy_delim : ',';
    for (int c = 0; c < r->n_cols; c++) {
        const char *name = r->cols[c].name ? r->cols[c].name : "?column?";
        if (c)
            qr_buf_putc(out, (uint8_t)delim);
        copy_csv_field(out, name, strlen(name), delim, "\n"); /* a name is never NULL */
    }
    qr_buf_putc(out, '\n');
}

void qr_sql_copy_row(const QrSqlResult *r, uint64_t row, QrBuf *out)
{
    bool csv = r->copy_format == QR_SQL_COPY_CSV;
    char delim = r->copy_delim ? r->copy_delim : (csv ? ',' : '\t');
    const char *null = r->copy_null ? r->copy_null : (csv ? "" : "\\N");
    QrBuf v;
    qr_buf_init(&v);
    for (int c = 0; c < r->n_cols; c++) {
        const QrSqlValue *x = &r->vals[row * (uint64_t)r->n_cols + (uint64_t)c];
        if (c)
            qr_buf_putc(out, (uint8_t)delim);
        if (x->is_null) {
            qr_buf_append(out, null, strlen(null));
            continue;
        }
        v.len = 0;
        qr_sql_value_text(x, &v);
        const char *p = v.data ? (const char *)v.data : "";
        if (csv) {
            copy_csv_field(out, p, v.len, delim, null);
        } else {
            for (size_t i = 0; i < v.len; i++) {
                char ch = p[i];
                if (ch == '\\' || ch == delim || ch == '\n' || ch == '\r' || ch == '\t') {
                    qr_buf_putc(out, '\\');
                    ch = ch == '\n' ? 'n' : ch == '\r' ? 'r' : ch == '\t' ? 't' : ch;
                }
                qr_buf_putc(out, (uint8_t)ch);
            }
        }
    }
    qr_buf_putc(out, '\n');
    qr_buf_free(&v);
}
