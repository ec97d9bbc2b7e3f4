/*
 * sql_seq.c — sequences in SQL: CREATE / ALTER / DROP SEQUENCE, the
 * functions nextval, currval, setval and lastval, and the sequences behind
 * SERIAL, identity columns and the hidden row id of tables made without a
 * primary key (sequence.h keeps them durable).
 *
 * Layer: query/.  Calls sequence.h, quarry.h, the SQL internals and cJSON.
 *
 * currval and lastval are per session, as in PostgreSQL: the values live in
 * the session's settings under "seq.<hash of the name>" and "seq.lastval"
 * (custom-setting names, so RESET ALL forgets them too).
 */
#include "query/sequence.h"
#include "query/sql_w.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *db_dir(SqlCtx *cx) { return qr_db_dir(cx->sess->db); }

/* ---- options ---- */

/* The integer of a DefElem's argument.  libpg_query leaves zero and
 * negative integers out of its JSON ("Integer": {}), so those are read back
 * from the statement text after the option's keyword. */
static int defelem_i64(SqlCtx *cx, const cJSON *de, const char *what, int64_t *out)
{
    const cJSON *arg = sqlj_get(de, "arg");
    const cJSON *in = sqlj_is(arg, "Integer");
    const cJSON *fl = sqlj_is(arg, "Float");
    if (in && sqlj_get(in, "ival")) {
        *out = sqlj_int(in, "ival", 0);
        return QR_OK;
    }
    const char *text = NULL;
    char buf[32];
    if (fl) {
        text = sqlj_str(fl, "fval");
    } else if (in) {
        int loc = sqlj_loc(de);
        size_t i = loc >= 0 ? (size_t)loc : cx->sql_len;
        while (i < cx->sql_len && !(cx->sql[i] == '-' || cx->sql[i] == '+' ||
                                    isdigit((unsigned char)cx->sql[i])))
            i++;
        size_t k = 0;
        while (i < cx->sql_len && k + 1 < sizeof buf &&
               (isdigit((unsigned char)cx->sql[i]) || (k == 0 && strchr("+-", cx->sql[i]))))
            buf[k++] = cx->sql[i++];
        buf[k] = 0;
        text = buf;
    }
    char *end = NULL;
    long long v = text ? strtoll(text, &end, 10) : 0;
    if (!text || !*text || *end)
        return sql_err_at(cx, sqlj_loc(de), QR_EINVAL, "22023", "%s needs an integer", what);
    *out = v;
    return QR_OK;
}

/* Apply CREATE / ALTER SEQUENCE (or identity) options to d.  *restart is
 * set for ALTER ... RESTART [WITH n]; owned_by (may be NULL) receives OWNED
 * BY table.column. */
static int seq_options(SqlCtx *cx, const cJSON *options, SeqDef *d, bool alter,
                       bool *has_restart, int64_t *restart)
{
    /* first the type and the increment: they decide the other defaults */
    const cJSON *it;
    int64_t inc = d->increment;
    char type[8];
    snprintf(type, sizeof type, "%s", d->type);
    cJSON_ArrayForEach(it, options)
    {
        const cJSON *de = sqlj_is(it, "DefElem");
        const char *n = sqlj_str(de, "defname");
        if (!n)
            continue;
        if (!strcmp(n, "as")) {
            const char *tn = sqlj_last_name(sqlj_get(sqlj_is(sqlj_get(de, "arg"), "TypeName"),
                                                     "names"));
            const char *pg = !tn ? NULL
                             : !strcmp(tn, "int2") || !strcmp(tn, "smallint") ? "int2"
                             : !strcmp(tn, "int4") || !strcmp(tn, "integer") || !strcmp(tn, "int")
                                 ? "int4"
                             : !strcmp(tn, "int8") || !strcmp(tn, "bigint") ? "int8"
                                                                            : NULL;
            if (!pg)
                return sql_err_at(cx, sqlj_loc(de), QR_EINVAL, "22023",
                                  "sequence type must be smallint, integer, or bigint");
            snprintf(type, sizeof type, "%s", pg);
        } else if (!strcmp(n, "increment")) {
            int rc = defelem_i64(cx, de, "INCREMENT", &inc);
            if (rc)
                return rc;
        }
    }
    if (alter) {
        snprintf(d->type, sizeof d->type, "%s", type);
        d->increment = inc;
    } else if (strcmp(type, d->type) != 0 || inc != d->increment) {
        SeqDef nd;
        seq_def_init(&nd, type, inc);
        /* keep what was given explicitly before (ALTER), re-derive the rest */
        nd.cycle = d->cycle;
        nd.internal = d->internal;
        memcpy(nd.owned_by, d->owned_by, sizeof nd.owned_by);
        nd.increment = inc; /* INCREMENT 0 stays 0: seq_def_check refuses it */
        *d = nd;
    }
    cJSON_ArrayForEach(it, options)
    {
        const cJSON *de = sqlj_is(it, "DefElem");
        const char *n = sqlj_str(de, "defname");
        if (!n || !strcmp(n, "as") || !strcmp(n, "increment"))
            continue;
        int rc = QR_OK;
        int64_t v = 0;
        bool has_arg = sqlj_get(de, "arg") != NULL;
        if (!strcmp(n, "start")) {
            rc = defelem_i64(cx, de, "START", &d->start);
        } else if (!strcmp(n, "minvalue")) {
            if (has_arg)
                rc = defelem_i64(cx, de, "MINVALUE", &d->min);
        } else if (!strcmp(n, "maxvalue")) {
            if (has_arg)
                rc = defelem_i64(cx, de, "MAXVALUE", &d->max);
        } else if (!strcmp(n, "cache")) {
            rc = defelem_i64(cx, de, "CACHE", &d->cache);
        } else if (!strcmp(n, "cycle")) {
            d->cycle = sqlj_bool(sqlj_is(sqlj_get(de, "arg"), "Boolean"), "boolval");
        } else if (!strcmp(n, "restart")) {
            *has_restart = true;
            *restart = d->start;
            if (has_arg && (rc = defelem_i64(cx, de, "RESTART", &v)) == QR_OK)
                *restart = v;
        } else if (!strcmp(n, "owned_by")) {
            const cJSON *items = sqlj_get(sqlj_is(sqlj_get(de, "arg"), "List"), "items");
            int k = cJSON_GetArraySize(items);
            const char *col = k >= 2 ? sqlj_sval(cJSON_GetArrayItem(items, k - 1)) : NULL;
            const char *tab = k >= 2 ? sqlj_sval(cJSON_GetArrayItem(items, k - 2)) : NULL;
            if (k == 1 && sqlj_sval(cJSON_GetArrayItem(items, 0)) &&
                !strcmp(sqlj_sval(cJSON_GetArrayItem(items, 0)), "none"))
                d->owned_by[0] = 0;
            else if (tab && col)
                snprintf(d->owned_by, sizeof d->owned_by, "%s.%s", tab, col);
            else
                rc = sql_err_at(cx, sqlj_loc(de), QR_EINVAL, "42P17",
                                "invalid OWNED BY option");
        } else if (!strcmp(n, "sequence_name")) {
            /* identity: a name given for the sequence is accepted, the name stays ours */
        } else {
            rc = sql_err_at(cx, sqlj_loc(de), QR_EUNSUPPORTED, "0A000",
                            "sequence option \"%s\" is not supported", n);
        }
        if (rc)
            return rc;
    }
    return QR_OK;
}

static int seq_err(SqlCtx *cx, int loc, const char *name)
{
    /* the sequence layer names the problem; add the SQLSTATE and position */
    const char *state = cx->err->code == QR_ENOTFOUND ? "42P01"
                        : cx->err->code == QR_EEXISTS ? "42P07"
                                                      : NULL;
    if (state) {
        QrCode code = cx->err->code;
        char msg[256];
        snprintf(msg, sizeof msg, "%s", cx->err->message);
        qr_error_clear(cx->err);
        return sql_err_at(cx, loc, code, state, "%s", msg);
    }
    (void)name;
    return cx->err->code;
}

static int seq_name(SqlCtx *cx, const cJSON *rv, const char **name)
{
    *name = sqlj_str(rv, "relname");
    const char *schema = sqlj_str(rv, "schemaname");
    if (schema && strcmp(schema, "public") != 0)
        return sql_err_at(cx, sqlj_loc(rv), QR_EINVAL, "3F000", "schema \"%s\" does not exist",
                          schema);
    if (!*name || !qr_name_valid(*name) || strlen(*name) > SEQ_NAME_MAX)
        return sql_err_at(cx, sqlj_loc(rv), QR_EINVAL, "42602", "invalid sequence name \"%s\"",
                          *name ? *name : "");
    return QR_OK;
}

static bool table_exists(SqlCtx *cx, const char *name)
{
    QrTable *t;
    return qr_table_get(cx->sess->db, name, &t, NULL) == QR_OK;
}

bool sqlw_hidden_pk(const cJSON *meta)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(meta, "hidden_pk"));
}

/* ---- statements ---- */

/* The command tag, and the sequence a CREATE / ALTER names (and where). */
static int stmt_start(SqlCtx *cx, const cJSON *b, QrSqlResult *res, const char *tag,
                      const char **name, int *loc)
{
    snprintf(res->tag, sizeof res->tag, "%s", tag);
    *loc = sqlj_loc(sqlj_get(b, "sequence"));
    return seq_name(cx, sqlj_get(b, "sequence"), name);
}

int sqlseq_create(SqlCtx *cx, const cJSON *b, QrSqlResult *res)
{
    const char *name;
    int loc;
    int rc = stmt_start(cx, b, res, "CREATE SEQUENCE", &name, &loc);
    if (rc)
        return rc;
    if (seq_exists(db_dir(cx), name) || table_exists(cx, name)) {
        if (sqlj_bool(b, "if_not_exists")) {
            sql_notice(cx, "NOTICE", "42P07", "relation \"%s\" already exists, skipping", name);
            return QR_OK;
        }
        return sql_err_at(cx, loc, QR_EEXISTS, "42P07", "relation \"%s\" already exists", name);
    }
    SeqDef d;
    seq_def_init(&d, "int8", 1);
    bool has_restart = false;
    int64_t restart;
    if ((rc = seq_options(cx, sqlj_get(b, "options"), &d, false, &has_restart, &restart)) != QR_OK)
        return rc;
    qr_db_ddl_bump(cx->sess->db);
    if (seq_create(db_dir(cx), name, &d, cx->err) != QR_OK)
        return seq_err(cx, loc, name);
    return sqld_seq_created(cx, name); /* a block's ROLLBACK drops it again */
}

int sqlseq_alter(SqlCtx *cx, const cJSON *b, QrSqlResult *res)
{
    const char *name;
    int loc;
    int rc = stmt_start(cx, b, res, "ALTER SEQUENCE", &name, &loc);
    if (rc)
        return rc;
    SeqDef d;
    int64_t last;
    bool called;
    if (seq_get(db_dir(cx), name, &d, &last, &called, cx->err) != QR_OK) {
        if (cx->err->code == QR_ENOTFOUND && sqlj_bool(b, "missing_ok")) {
            qr_error_clear(cx->err);
            sql_notice(cx, "NOTICE", "00000", "relation \"%s\" does not exist, skipping", name);
            return QR_OK;
        }
        return seq_err(cx, loc, name);
    }
    bool has_restart = false;
    int64_t restart = 0;
    if ((rc = seq_options(cx, sqlj_get(b, "options"), &d, true, &has_restart, &restart)) != QR_OK)
        return rc;
    if ((rc = seq_def_check(&d, name, cx->err)) != QR_OK)
        return rc;
    /* a new definition: rewrite the file, keeping (or restarting) the position */
    const char *dir = db_dir(cx);
    qr_db_ddl_bump(cx->sess->db);
    if ((rc = seq_drop(dir, name, cx->err)) != QR_OK ||
        (rc = seq_create(dir, name, &d, cx->err)) != QR_OK)
        return rc;
    if (has_restart)
        return seq_set(dir, name, restart, false, cx->err);
    if (last < d.min || last > d.max)
        return QR_OK;
    return seq_set(dir, name, last, called, cx->err);
}

int sqlseq_drop(SqlCtx *cx, const cJSON *b, QrSqlResult *res)
{
    snprintf(res->tag, sizeof res->tag, "DROP SEQUENCE");
    bool missing_ok = sqlj_bool(b, "missing_ok");
    const cJSON *it;
    cJSON_ArrayForEach(it, sqlj_get(b, "objects"))
    {
        const cJSON *list = sqlj_get(sqlj_is(it, "List"), "items");
        const char *name = list ? sqlj_last_name(list) : sqlj_sval(it);
        if (!name)
            return sql_err_at(cx, -1, QR_ESYNTAX, "42601", "object name expected");
        SeqDef d;
        int64_t last;
        bool called;
        QrError e;
        qr_error_clear(&e);
        if (seq_get(db_dir(cx), name, &d, &last, &called, &e) != QR_OK || d.internal) {
            if (missing_ok) {
                sql_notice(cx, "NOTICE", "00000", "sequence \"%s\" does not exist, skipping",
                           name);
                continue;
            }
            return sql_err_at(cx, -1, QR_ENOTFOUND, "42P01", "sequence \"%s\" does not exist",
                              name);
        }
        qr_db_ddl_bump(cx->sess->db);
        int rc = seq_drop(db_dir(cx), name, cx->err);
        if (rc)
            return rc;
    }
    return QR_OK;
}

/* ---- columns backed by a sequence ---- */

int sqlseq_for_column(SqlCtx *cx, const char *table, const char *col, const char *pg_type,
                      const cJSON *options, bool internal, char *seq_out, size_t seq_len)
{
    char name[SEQ_NAME_MAX + 1];
    /* PostgreSQL's <table>_<column>_seq, shortened to fit; a clash adds a digit */
    snprintf(name, sizeof name, "%.*s_%.*s_seq", 29, table, 29, col);
    const cJSON *it;
    cJSON_ArrayForEach(it, options) /* identity ( SEQUENCE NAME s ... ): pg_dump's restore */
    {
        const cJSON *de = sqlj_is(it, "DefElem");
        const char *dn = sqlj_str(de, "defname");
        const cJSON *items = sqlj_get(sqlj_is(sqlj_get(de, "arg"), "List"), "items");
        const char *given = dn && !strcmp(dn, "sequence_name") ? sqlj_last_name(items) : NULL;
        if (given && qr_name_valid(given) && strlen(given) <= SEQ_NAME_MAX)
            snprintf(name, sizeof name, "%s", given);
    }
    for (int k = 1; seq_exists(db_dir(cx), name) || table_exists(cx, name); k++) {
        if (k > 99)
            return sql_err_at(cx, -1, QR_EEXISTS, "42P07",
                              "could not choose a name for the sequence of \"%s.%s\"", table, col);
        snprintf(name, sizeof name, "%.*s_%.*s_seq%d", 28, table, 28, col, k);
    }
    SeqDef d;
    seq_def_init(&d, pg_type, 1);
    d.internal = internal;
    bool has_restart = false;
    int64_t restart;
    int rc = seq_options(cx, options, &d, false, &has_restart, &restart);
    if (rc)
        return rc;
    snprintf(d.owned_by, sizeof d.owned_by, "%s.%s", table, col);
    if ((rc = seq_create(db_dir(cx), name, &d, cx->err)) != QR_OK)
        return rc;
    snprintf(seq_out, seq_len, "%s", name);
    return QR_OK;
}

cJSON *sqlseq_default_tree(const char *seq)
{
    /* nextval('<seq>'::regclass), as libpg_query parses it */
    cJSON *fc = cJSON_CreateObject();
    cJSON *body = cJSON_AddObjectToObject(fc, "FuncCall");
    cJSON *fn = cJSON_AddArrayToObject(body, "funcname");
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(cJSON_AddObjectToObject(s, "String"), "sval", "nextval");
    cJSON_AddItemToArray(fn, s);
    cJSON *args = cJSON_AddArrayToObject(body, "args");
    cJSON *tc = cJSON_CreateObject();
    cJSON *tcb = cJSON_AddObjectToObject(tc, "TypeCast");
    cJSON *ac = cJSON_AddObjectToObject(cJSON_AddObjectToObject(tcb, "arg"), "A_Const");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(ac, "sval"), "sval", seq);
    cJSON_AddNumberToObject(ac, "location", -1);
    cJSON *names = cJSON_AddArrayToObject(cJSON_AddObjectToObject(tcb, "typeName"), "names");
    cJSON *rs = cJSON_CreateObject();
    cJSON_AddStringToObject(cJSON_AddObjectToObject(rs, "String"), "sval", "regclass");
    cJSON_AddItemToArray(names, rs);
    cJSON_AddNumberToObject(tcb, "location", -1);
    cJSON_AddItemToArray(args, tc);
    cJSON_AddNumberToObject(body, "location", -1);
    return fc;
}

/* ---- functions ---- */

/* The sequence an argument names: text ('public.s', '"S"') or a regclass
 * oid.  false (42P01 set) if none. */
static bool arg_seq(SqlCtx *cx, const SqlValue *a, char *out, size_t n)
{
    if (sqlt_is_str(a->type) || a->type == QR_SQL_UNKNOWN) {
        char buf[2 * SEQ_NAME_MAX + 8];
        snprintf(buf, sizeof buf, "%.*s", (int)a->u.s.n, a->u.s.s);
        const char *p = buf;
        if (!strncmp(p, "public.", 7))
            p += 7;
        size_t len = strlen(p);
        if (len >= 2 && p[0] == '"' && p[len - 1] == '"')
            snprintf(out, n, "%.*s", (int)(len - 2 < n - 1 ? len - 2 : n - 1), p + 1);
        else {
            snprintf(out, n, "%.*s", (int)(n - 1), p);
            for (char *q = out; *q; q++)
                *q = (char)tolower((unsigned char)*q);
        }
        if (seq_exists(db_dir(cx), out))
            return true;
        sql_err_at(cx, -1, QR_ENOTFOUND, "42P01", "relation \"%s\" does not exist", buf);
        return false;
    }
    char **names;
    int k;
    bool found = false;
    if (seq_list(db_dir(cx), &names, &k, cx->err) == QR_OK) {
        for (int i = 0; i < k; i++) {
            if (!found && sqlcat_table_oid(names[i]) == (uint32_t)a->u.i) {
                snprintf(out, n, "%s", names[i]);
                found = true;
            }
            qr_free(names[i]);
        }
        qr_free(names);
    }
    if (!found && cx->err->code == QR_OK)
        sql_err_at(cx, -1, QR_ENOTFOUND, "42P01", "could not open relation with OID %" PRId64,
                   a->u.i);
    return found;
}

static void cur_key(const char *seq, char *out, size_t n)
{
    uint32_t h = 2166136261u;
    for (const char *s = seq; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    snprintf(out, n, "seq.%08x", h);
}

static int remember(SqlCtx *cx, const char *seq, int64_t v)
{
    char key[32], val[24];
    cur_key(seq, key, sizeof key);
    snprintf(val, sizeof val, "%" PRId64, v);
    int rc = qr_sql_session_set(cx->sess, key, val, cx->err);
    return rc ? rc : qr_sql_session_set(cx->sess, "seq.lastval", val, cx->err);
}

static int recalled(SqlCtx *cx, const char *key, const char *what, const char *seq,
                    SqlValue *out)
{
    const char *v = qr_sql_session_get(cx->sess, key);
    if (!v || !*v) {
        if (seq)
            return sql_err_at(cx, -1, QR_EINVAL, "55000",
                              "currval of sequence \"%s\" is not yet defined in this session",
                              seq);
        return sql_err_at(cx, -1, QR_EINVAL, "55000", "%s is not yet defined in this session",
                          what);
    }
    *out = sqlv_int(strtoll(v, NULL, 10));
    return QR_OK;
}

bool sqlseq_func_known(const char *name)
{
    return !strcmp(name, "nextval") || !strcmp(name, "currval") || !strcmp(name, "setval") ||
           !strcmp(name, "lastval");
}

int sqlseq_func_call(SqlCtx *cx, const char *name, int n_args, const SqlValue *args,
                     SqlValue *out)
{
    *out = sqlv_null();
    out->type = QR_SQL_INT8;
    if (!strcmp(name, "lastval"))
        return recalled(cx, "seq.lastval", "lastval", NULL, out);
    if (n_args < 1 || args[0].is_null)
        return QR_OK;
    char seq[SEQ_NAME_MAX + 1];
    if (!arg_seq(cx, &args[0], seq, sizeof seq))
        return cx->err->code;
    if (!strcmp(name, "currval")) {
        char key[32];
        cur_key(seq, key, sizeof key);
        return recalled(cx, key, NULL, seq, out);
    }
    if (!strcmp(name, "nextval")) {
        if (cx->analyze_only)
            return QR_OK;
        int64_t v;
        if (seq_next(db_dir(cx), seq, &v, cx->err) != QR_OK)
            return cx->err->code;
        *out = sqlv_int(v);
        return remember(cx, seq, v);
    }
    /* setval(seq, v [, is_called]) */
    if (n_args < 2 || args[1].is_null)
        return QR_OK;
    bool called = n_args < 3 || args[2].is_null || args[2].u.b;
    int64_t v = sqlt_is_int(args[1].type) ? args[1].u.i : (int64_t)args[1].u.f;
    if (seq_set(db_dir(cx), seq, v, called, cx->err) != QR_OK)
        return cx->err->code;
    *out = sqlv_int(v);
    return called ? remember(cx, seq, v) : QR_OK;
}
