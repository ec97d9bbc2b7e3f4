/*
 * sql_isolation.c — transaction isolation levels for SQL sessions: what
 * BEGIN ISOLATION LEVEL, SET TRANSACTION and the settings
 * transaction_isolation / default_transaction_isolation accept, and the
 * snapshot every read of a table in a statement takes (sql_snapshot).
 *
 * Layer: query/.  Calls index/table.h (snapshots) and the base kit.
 *
 * Levels (docs/sql-writes.md "Isolation levels"):
 *   READ COMMITTED (the default; READ UNCOMMITTED runs as it, as in
 *     PostgreSQL): every read takes the table's current snapshot.
 *   REPEATABLE READ: the block's first statement pins a snapshot of every
 *     table, all taken under the lock SQL commits publish under (pin_all),
 *     and every read of the block sees them, until COMMIT or ROLLBACK: one
 *     snapshot of the whole database, as PostgreSQL's.  A table created
 *     after the start is pinned at its first read.
 *   SERIALIZABLE is refused (0A000): Quarry has no predicate locks, and
 *     running it as a weaker level would break its promise silently.
 *
 * A pinned snapshot is kept only while the table's schema is the one it was
 * pinned under (a name, type and field count fingerprint): after a schema
 * change by another session, or a DROP and CREATE under the same name, the
 * next read takes a fresh snapshot, so a read never meets segments that do
 * not fit the table's schema.
 */
#include "query/query_int.h"
#include "query/sql_int.h"
#include "query/sql_w.h"
#include "store/util.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The one spelling of each level, as SHOW prints it. */
static const char *const LEVEL_NAMES[] = {"read committed", "repeatable read"};

const char *sqli_level_name(int level)
{
    return level == SQLI_REPEATABLE_READ ? LEVEL_NAMES[1] : LEVEL_NAMES[0];
}

int sqli_level_parse(const char *v, const char *param, int *level, QrError *err)
{
    if (v && (!strcasecmp(v, "read committed") || !strcasecmp(v, "read uncommitted"))) {
        *level = SQLI_READ_COMMITTED;
        return QR_OK;
    }
    if (v && !strcasecmp(v, "repeatable read")) {
        *level = SQLI_REPEATABLE_READ;
        return QR_OK;
    }
    if (v && !strcasecmp(v, "serializable")) {
        qr_error_set(err, QR_EUNSUPPORTED, "isolation level SERIALIZABLE is not supported");
        qr_error_detail(err, "Quarry has no predicate locks; it does not run SERIALIZABLE as "
                             "a weaker level");
        qr_error_hint(err, "Use REPEATABLE READ (one snapshot of the database for the "
                           "whole transaction, first committer wins on a written key) or READ "
                           "COMMITTED.");
        qr_error_set_sqlstate(err, "0A000");
        return QR_EUNSUPPORTED;
    }
    qr_error_set(err, QR_EINVAL, "invalid value for parameter \"%s\": \"%s\"", param,
                 v ? v : "");
    qr_error_hint(err, "Available values: serializable, repeatable read, read committed, "
                       "read uncommitted.");
    qr_error_set_sqlstate(err, "22023");
    return QR_EINVAL;
}

/* The level the session's default_transaction_isolation names (read
 * committed when unset or unreadable). */
static int default_level(const QrSqlSession *s)
{
    int level = SQLI_READ_COMMITTED;
    QrError e;
    qr_error_clear(&e);
    sqli_level_parse(qr_sql_session_get(s, "default_transaction_isolation"),
                     "default_transaction_isolation", &level, &e);
    return level;
}

/* Keep the setting SHOW transaction_isolation reads in step with the level. */
static void show_level(QrSqlSession *s, int level)
{
    QrError e;
    qr_error_clear(&e);
    qr_sql_session_set(s, "transaction_isolation", sqli_level_name(level), &e);
}

/* Set the running block's level: only before its first read or write
 * (25001 otherwise, as PostgreSQL). */
static int set_block_level(SqlCtx *cx, SqluState *st, int level)
{
    if (st->iso_used && level != st->iso) {
        qr_error_set(cx->err, QR_EINVAL,
                     "SET TRANSACTION ISOLATION LEVEL must be called before any query");
        qr_error_set_sqlstate(cx->err, "25001");
        return QR_EINVAL;
    }
    st->iso = level;
    show_level(cx->sess, level);
    return QR_OK;
}

/* Apply a list of transaction-mode DefElems (BEGIN's options, SET
 * TRANSACTION's args) to the level *level. */
static int modes(SqlCtx *cx, const cJSON *list, int *level)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, list)
    {
        const cJSON *d = sqlj_is(a, "DefElem");
        const char *dn = d ? sqlj_str(d, "defname") : NULL;
        const char *v = d ? sqlw_const_text(cx, sqlj_get(d, "arg")) : NULL;
        if (!dn)
            continue;
        if (!strcmp(dn, "transaction_isolation")) {
            if (sqli_level_parse(v, "transaction_isolation", level, cx->err) != QR_OK)
                return cx->err->code;
        } else if (!strcmp(dn, "transaction_read_only") && v && !strcmp(v, "true")) {
            return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                              "read-only transactions are not supported");
        }
        /* transaction_deferrable matters only to SERIALIZABLE READ ONLY */
    }
    return QR_OK;
}

int sqli_begin(SqlCtx *cx, SqluState *st, const cJSON *options)
{
    int level = default_level(cx->sess);
    int rc = modes(cx, options, &level);
    if (rc != QR_OK)
        return rc;
    st->iso = level;
    st->iso_used = false;
    show_level(cx->sess, level);
    return QR_OK;
}

int sqli_set(SqlCtx *cx, SqluState *st, const char *name, const cJSON *args, const char *value)
{
    if (!strcasecmp(name, "TRANSACTION") || !strcasecmp(name, "transaction_isolation")) {
        int level = st->iso;
        int rc = args ? modes(cx, args, &level)
                      : sqli_level_parse(value, "transaction_isolation", &level, cx->err);
        if (rc != QR_OK)
            return rc;
        if (!st->in_block) {
            /* PostgreSQL: a warning, and nothing changes */
            sql_notice(cx, "WARNING", "25P01", "SET TRANSACTION can only be used in "
                                               "transaction blocks");
            return QR_OK;
        }
        return set_block_level(cx, st, level);
    }
    /* SESSION CHARACTERISTICS AS TRANSACTION ... / default_transaction_isolation */
    int level = default_level(cx->sess);
    int rc = args ? modes(cx, args, &level)
                  : sqli_level_parse(value, "default_transaction_isolation", &level, cx->err);
    if (rc != QR_OK)
        return rc;
    rc = qr_sql_session_set(cx->sess, "default_transaction_isolation", sqli_level_name(level),
                            cx->err);
    if (rc == QR_OK && !st->in_block)
        show_level(cx->sess, level);
    return rc;
}

/* ---- pinned snapshots ---- */

/* Fingerprint of the schema's first n fields (names and types). */
static uint64_t schema_print(const QrSchema *s, int n)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)n;
    for (int f = 0; f < n && f < s->n_fields; f++) {
        for (const char *p = s->fields[f].name; *p; p++)
            h = (h ^ (uint8_t)*p) * 1099511628211ull;
        h = (h ^ (uint64_t)s->fields[f].type ^ 0x100u) * 1099511628211ull;
    }
    return h;
}

void sqli_end(QrSqlSession *s, SqluState *st)
{
    sqlx_block_end(st);
    for (int i = 0; i < st->n_pins; i++)
        snapshot_release(st->pins[i].snap);
    st->n_pins = 0;
    st->iso_used = false;
    st->iso = default_level(s);
    show_level(s, st->iso);
}

void sqli_unpin(SqluState *st, const QrTable *t)
{
    for (int i = 0; i < st->n_pins; i++)
        if (st->pins[i].tab == t->table) {
            snapshot_release(st->pins[i].snap);
            st->pins[i--] = st->pins[--st->n_pins];
        }
}

void sqli_session_free(SqluState *st)
{
    sqlx_block_end(st);
    for (int i = 0; i < st->n_pins; i++)
        snapshot_release(st->pins[i].snap);
    qr_free(st->pins);
    st->pins = NULL;
    st->n_pins = st->cap_pins = 0;
}

/* Pin snap (whose reference the pin takes over) as the block's snapshot of
 * table t; false (snap released) without memory. */
static bool pin_add(SqluState *st, QrTable *t, Snapshot *snap)
{
    if (st->n_pins == st->cap_pins) {
        int nc = st->cap_pins ? st->cap_pins * 2 : 4;
        SqliPin *np = qr_realloc(st->pins, (size_t)nc * sizeof *np);
        if (!np) {
            snapshot_release(snap);
            return false;
        }
        st->pins = np;
        st->cap_pins = nc;
    }
    SqliPin *p = &st->pins[st->n_pins++];
    snprintf(p->table, sizeof p->table, "%s", t->name);
    p->tab = t->table;
    p->n_fields = table_schema(t->table)->n_fields;
    p->schema_fp = schema_print(table_schema(t->table), p->n_fields);
    p->snap = snap;
    return true;
}

/* REPEATABLE READ's start: one snapshot of every table, all taken under
 * the lock SQL commits publish under, together with the commit number the
 * conflict rule counts from.  So the block sees exactly the SQL commits
 * numbered up to its start, in every table, whenever it first reads one
 * (a multi-table commit wholly or not at all).  The snapshots are the
 * latest, commits ordered but not yet synced included, and are waited on
 * until those are durable before the block reads them.  A table that
 * cannot be opened (or pinned) now is pinned at its first read instead. */
static void pin_all(QrSqlSession *s, SqluState *st)
{
    char **names = NULL;
    int n = 0;
    QrError e;
    qr_error_clear(&e);
    QrTable **ts = NULL;
    if (qr_table_list(s->db, &names, &n, &e) == QR_OK)
        ts = qr_calloc((size_t)n + 1, sizeof *ts);
    /* opened before the lock (may replay a WAL); one being dropped is not
     * waited for (its dropper may wait for a table this holds) */
    for (int i = 0; ts && i < n; i++)
        if (qr_table_try_acquire(s->db, names[i], &ts[i], NULL) != QR_OK)
            ts[i] = NULL;
    int first = st->n_pins;
    txn_lock();
    sqlx_block_start(st); /* the conflict rule counts from here */
    for (int i = 0; ts && i < n; i++)
        if (ts[i])
            pin_add(st, ts[i], table_snapshot_latest(ts[i]->table));
    txn_unlock();
    for (int i = first; i < st->n_pins; i++) {
        SqliPin *p = &st->pins[i];
        qr_error_clear(&e);
        if (table_snapshot_wait_acked((Table *)p->tab, p->snap, &e) != QR_OK) {
            qr_log(QR_LOG_WARN, "REPEATABLE READ snapshot of table \"%s\": %s", p->table,
                   e.message);
            snapshot_release(p->snap); /* pinned at its first read instead */
            *p = st->pins[--st->n_pins];
            i--;
        }
    }
    for (int i = 0; i < n; i++) {
        if (ts && ts[i])
            qr_table_release(s->db, names[i]);
        qr_free(names[i]);
    }
    qr_free(names);
    qr_free(ts);
}

void sqli_mark_used(QrSqlSession *s, SqluState *st)
{
    if (!st->in_block || st->iso_used)
        return;
    st->iso_used = true;
    if (st->iso == SQLI_REPEATABLE_READ)
        pin_all(s, st);
}

/* The committed snapshot a read of t sees at the block's level. */
static Snapshot *level_snapshot(SqluState *st, QrTable *t)
{
    if (st->iso != SQLI_REPEATABLE_READ)
        return table_snapshot(t->table);
    const QrSchema *sc = table_schema(t->table);
    for (int i = 0; i < st->n_pins; i++) {
        SqliPin *p = &st->pins[i];
        if (strcmp(p->table, t->name) != 0)
            continue;
        /* fields added since (ADD COLUMN) keep the snapshot: its segments
         * read them as NULL, as any segment older than a field does */
        if (p->tab != t->table || sc->n_fields < p->n_fields ||
            p->schema_fp != schema_print(sc, p->n_fields)) {
            /* the table changed shape (or is another table by that name) */
            snapshot_release(p->snap);
            p->snap = table_snapshot(t->table);
            p->tab = t->table;
            p->n_fields = sc->n_fields;
            p->schema_fp = schema_print(sc, p->n_fields);
        }
        atomic_fetch_add(&p->snap->refs, 1);
        return p->snap;
    }
    /* not pinned at the start (created since, or could not be opened) */
    Snapshot *snap = table_snapshot(t->table);
    atomic_fetch_add(&snap->refs, 1); /* one for the pin, one for the caller */
    if (!pin_add(st, t, snap))
        return snap; /* no pin: this read still works, at read committed */
    return snap;
}

Snapshot *sql_snapshot(SqlCtx *cx, QrTable *t)
{
    SqluState *st = cx->sess ? cx->sess->u_state : NULL;
    if (!st || !st->in_block)
        return table_snapshot(t->table);
    sqli_mark_used(cx->sess, st);
    return sqlo_overlay(cx, st, t, level_snapshot(st, t));
}
