/*
 * sql_guard.c — what a statement must pass before it runs: a bound on its
 * nesting before libpg_query sees it, a stack check for the recursion of
 * binding and execution, and the access a statement needs (read, write
 * rows, change the schema) decided from its parse tree.
 *
 * Layer: query/.  Calls libpg_query's scanner and the base kit.
 *
 * Nesting.  libpg_query recurses once per level of the parse tree while it
 * prints it (about 130 bytes of stack a level, 700 when normalizing), and
 * it has no depth check of its own: `SELECT 1+1+...+1` with 40,000 terms
 * overflows a 4 MB thread stack.  Left-deep chains (a + b + c, x::t::t,
 * UNION, JOIN) do not grow the grammar's stack, so only a count taken
 * before parsing can bound them.  The count is an upper bound on the
 * levels of any path from the root of the tree to a leaf:
 *
 *   - every level of nesting needs a bracket, an operator or a keyword
 *     token of its own; literals, names and commas only add siblings;
 *   - within one bracket, the tokens between two commas (a segment) are
 *     all the levels a path can pass there; AND and OR also end a segment,
 *     as the grammar flattens their chains into one list;
 *   - so the bound is, over the brackets, the most links of a segment plus
 *     the bound of the deepest bracket inside it, plus one per bracket.
 *
 * Statements of at most `limit` bytes cannot exceed it and are not looked
 * at; longer ones are first counted byte by byte (operator characters,
 * opening brackets and the starts of words, strings and comments included:
 * never lower than the bound, no lexer to fool), and only when that crude
 * count is over the limit are they tokenized by libpg_query's own scanner
 * and measured as above.  The parse that follows is then exact: the tree
 * is read without recursion and nesting past its limit is the same 54001.
 *
 * Access.  A statement needs the most any node of its tree needs
 * (sql_access_of), so nothing hides in a string a second tokenizer
 * misread: SELECT, VALUES, EXPLAIN, SHOW, SET, transactions, cursors and
 * COPY ... TO STDOUT read; INSERT, UPDATE, DELETE, MERGE, COPY FROM and
 * SELECT ... FOR UPDATE/SHARE write rows (in a WITH or under EXPLAIN
 * too); anything else, SELECT INTO, TRUNCATE and statements Quarry does not
 * know included, changes the schema.  A limited session checks it for
 * every statement as it executes (sql_session.c).
 */
#include "query/sql_int.h"

#include <pg_query.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---- the nesting bound ---- */

int sql_too_complex(QrError *err, int limit)
{
    qr_error_set(err, QR_ELIMIT, "statement too complex");
    qr_error_set_sqlstate(err, "54001");
    qr_error_detail(err, "expressions may nest about %d levels deep (operators in one chain, "
                         "brackets, subqueries)", limit);
    qr_error_hint(err, "Use an IN list or an array instead of a long chain of comparisons, "
                       "or split the statement.");
    return QR_ELIMIT;
}

/* The crude count: never below the bound, whatever the bytes mean. */
static size_t crude_links(const char *s, size_t n)
{
    size_t c = 0;
    bool in_word = false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        bool letter = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch >= 0x80;
        if (letter && !in_word)
            c++;
        in_word = letter;
        if (strchr("+-*/<>=~!@#%^&|`?:([", ch) && ch)
            c++;
    }
    return c;
}

/* libpg_query's scanner output is a protobuf ScanResult (pg_query.proto):
 * field 2 repeated ScanToken {1 start, 2 end, 4 token, 5 keyword_kind}.
 * Read with a few lines rather than linking protobuf-c. */
typedef struct Pb {
    const uint8_t *p, *end;
} Pb;

static bool pb_varint(Pb *b, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && b->p < b->end; shift += 7) {
        uint8_t c = *b->p++;
        *v |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80))
            return true;
    }
    return false;
}

/* Skip a field of wire type w; false when the message is cut. */
static bool pb_skip(Pb *b, int w)
{
    uint64_t v;
    switch (w) {
    case 0: return pb_varint(b, &v);
    case 1: return (b->p += 8) <= b->end;
    case 2: return pb_varint(b, &v) && v <= (uint64_t)(b->end - b->p) && (b->p += v, true);
    case 5: return (b->p += 4) <= b->end;
    default: return false;
    }
}

typedef struct ScanTok {
    uint32_t start, end, token, keyword;
} ScanTok;

static bool pb_token(Pb *b, ScanTok *t)
{
    memset(t, 0, sizeof *t);
    while (b->p < b->end) {
        uint64_t key, v;
        if (!pb_varint(b, &key))
            return false;
        int f = (int)(key >> 3), w = (int)(key & 7);
        if (w != 0) {
            if (!pb_skip(b, w))
                return false;
            continue;
        }
        if (!pb_varint(b, &v))
            return false;
        if (f == 1)
            t->start = (uint32_t)v;
        else if (f == 2)
            t->end = (uint32_t)v;
        else if (f == 4)
            t->token = (uint32_t)v;
        else if (f == 5)
            t->keyword = (uint32_t)v;
    }
    return true;
}

/* Token numbers of libpg_query's enum Token that this count tells apart
 * (the single characters are their ASCII codes). */
enum {
    TOK_IDENT = 258,   /* IDENT .. PARAM (258..267): names, literals, $n: leaves, */
    TOK_OP = 265,      /* except Op, an operator (as TYPECAST .. NOT_EQUALS, 268..274) */
    TOK_PARAM = 267,
    TOK_SQL_COMMENT = 275,
    TOK_C_COMMENT = 276,
};

/* Is token t the word w (any case)? */
static bool tok_is(const char *sql, size_t len, const ScanTok *t, const char *w)
{
    size_t n = strlen(w);
    return t->end <= len && t->start < t->end && t->end - t->start == n &&
           !strncasecmp(sql + t->start, w, n);
}

typedef struct Level {
    int64_t links, inner, best; /* the current segment; the deepest bracket in it; the level's bound */
} Level;

/* The bound of the file comment over libpg_query's tokens; -1 when the
 * scanner fails (the parser then reports the same error, before it builds
 * any deep tree). */
static int64_t scanned_bound(const char *sql, size_t len)
{
    PgQueryScanResult r = pg_query_scan(sql);
    if (r.error) {
        pg_query_free_scan_result(r);
        return -1;
    }
    Level *lv = qr_malloc(64 * sizeof *lv);
    int n = 0, cap = 64;
    int64_t bound = -1;
    if (!lv)
        goto out;
    memset(&lv[0], 0, sizeof lv[0]);
    n = 1;
    Pb b = {(const uint8_t *)r.pbuf.data, (const uint8_t *)r.pbuf.data + r.pbuf.len};
    while (b.p < b.end) {
        uint64_t key, mlen;
        if (!pb_varint(&b, &key))
            goto out;
        if ((key >> 3) != 2 || (key & 7) != 2) {
            if (!pb_skip(&b, (int)(key & 7)))
                goto out;
            continue;
        }
        if (!pb_varint(&b, &mlen) || mlen > (uint64_t)(b.end - b.p))
            goto out;
        Pb m = {b.p, b.p + mlen};
        b.p += mlen;
        ScanTok t;
        if (!pb_token(&m, &t))
            goto out;
        Level *L = &lv[n - 1];
        uint32_t k = t.token;
        if (k == '(' || k == '[') {
            if (n == cap) {
                Level *nl = qr_realloc(lv, (size_t)cap * 2 * sizeof *lv);
                if (!nl)
                    goto out;
                lv = nl;
                cap *= 2;
            }
            memset(&lv[n++], 0, sizeof *lv);
        } else if (k == ')' || k == ']' || k == ',' || k == ';' ||
                   (t.keyword && (tok_is(sql, len, &t, "and") || tok_is(sql, len, &t, "or")))) {
            /* the segment ends */
            if (L->links + L->inner > L->best)
                L->best = L->links + L->inner;
            L->links = L->inner = 0;
            if ((k == ')' || k == ']') && n > 1) {
                int64_t v = L->best + 1;
                n--;
                if (v > lv[n - 1].inner)
                    lv[n - 1].inner = v;
            }
        } else if ((k >= TOK_IDENT && k <= TOK_PARAM && k != TOK_OP) || k == TOK_SQL_COMMENT ||
                   k == TOK_C_COMMENT || k == '.' || k == ':') {
            /* a leaf, a comment, a qualified name: no level */
        } else {
            L->links++; /* an operator or a keyword */
        }
    }
    /* brackets left open (the parser will refuse them) are closed here */
    while (n > 0) {
        Level *L = &lv[--n];
        if (L->links + L->inner > L->best)
            L->best = L->links + L->inner;
        if (n > 0 && L->best + 1 > lv[n - 1].inner)
            lv[n - 1].inner = L->best + 1;
    }
    bound = lv[0].best;
out:
    qr_free(lv);
    pg_query_free_scan_result(r);
    return bound;
}

int sql_guard_nesting(const char *sql, size_t len, int limit, QrError *err)
{
    if (len <= (size_t)limit || crude_links(sql, len) <= (size_t)limit)
        return QR_OK;
    int64_t bound = scanned_bound(sql, len);
    if (bound > limit)
        return sql_too_complex(err, limit);
    return QR_OK;
}

/* ---- the stack ---- */

/* The lowest usable address of this thread's stack (0: unknown), found once
 * per thread. */
__thread uintptr_t sql_stack_lo;
static __thread bool tl_stack_known;

size_t sql_stack_left(void)
{
    if (!tl_stack_known) {
        tl_stack_known = true;
        pthread_attr_t at;
        if (pthread_getattr_np(pthread_self(), &at) == 0) {
            void *addr;
            size_t size;
            if (pthread_attr_getstack(&at, &addr, &size) == 0)
                sql_stack_lo = (uintptr_t)addr;
            pthread_attr_destroy(&at);
        }
    }
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    if (!sql_stack_lo)
        return SIZE_MAX;
    return sp > sql_stack_lo ? sp - sql_stack_lo : 0;
}

int sql_check_stack(SqlCtx *cx)
{
    if (sql_stack_left() >= SQL_STACK_MARGIN)
        return QR_OK;
    if (cx->err->code == QR_OK)
        sql_too_complex(cx->err, SQL_MAX_NESTING);
    return cx->err->code;
}

/* ---- parsing ---- */

int sql_parse(const char *sql, size_t len, size_t max_bytes, cJSON **tree, QrError *err)
{
    *tree = NULL;
    int rc = sql_guard_nesting(sql, len, SQL_MAX_NESTING, err);
    if (rc)
        return rc;
    PgQueryParseResult pr = pg_query_parse(sql);
    if (pr.error) {
        qr_error_set(err, QR_ESYNTAX, "%s", pr.error->message);
        qr_error_set_sqlstate(err, "42601");
        if (pr.error->cursorpos > 0)
            qr_error_pos(err, qr_sql_utf8_chars(sql, (size_t)pr.error->cursorpos - 1) + 1, -1, -1);
        pg_query_free_parse_result(pr);
        return QR_ESYNTAX;
    }
    int seen;
    rc = sqlj_parse(pr.parse_tree, SQL_MAX_JSON_DEPTH, max_bytes, tree, &seen);
    pg_query_free_parse_result(pr);
    if (rc == QR_ELIMIT && seen > SQL_MAX_JSON_DEPTH)
        return sql_too_complex(err, SQL_MAX_NESTING);
    if (rc == QR_ELIMIT) {
        qr_error_set(err, QR_ELIMIT, "statement too large");
        qr_error_set_sqlstate(err, "54000");
        qr_error_detail(err, "its parse tree would take more than quarry.mem_cap (%zu bytes)",
                        max_bytes);
        qr_error_hint(err, "Send long lists as an array parameter or load them with COPY, "
                           "or raise quarry.mem_cap.");
        return QR_ELIMIT;
    }
    if (rc == QR_ENOMEM)
        return qr_error_set(err, QR_ENOMEM, "out of memory reading the parse tree");
    if (rc)
        return qr_error_set(err, QR_EINTERNAL, "cannot read the parse tree");
    return QR_OK;
}

/* ---- access ---- */

/* Statement nodes by tag; a tag not listed changes the schema (unknown
 * statements fail closed). */
static const struct {
    const char *tag;
    QrSqlAccess access;
    const char *what;
} ACCESS[] = {
    {"SelectStmt", QR_SQL_ACCESS_READ, "SELECT"},
    {"ExplainStmt", QR_SQL_ACCESS_READ, "EXPLAIN"}, /* its query is walked too */
    {"VariableShowStmt", QR_SQL_ACCESS_READ, "SHOW"},
    {"VariableSetStmt", QR_SQL_ACCESS_READ, "SET"},  /* the session's own settings */
    {"TransactionStmt", QR_SQL_ACCESS_READ, "TRANSACTION"},
    {"DiscardStmt", QR_SQL_ACCESS_READ, "DISCARD"},
    {"DeclareCursorStmt", QR_SQL_ACCESS_READ, "DECLARE CURSOR"},
    {"FetchStmt", QR_SQL_ACCESS_READ, "FETCH"},
    {"ClosePortalStmt", QR_SQL_ACCESS_READ, "CLOSE"},
    {"InsertStmt", QR_SQL_ACCESS_WRITE, "INSERT"},
    {"UpdateStmt", QR_SQL_ACCESS_WRITE, "UPDATE"},
    {"DeleteStmt", QR_SQL_ACCESS_WRITE, "DELETE"},
    {"MergeStmt", QR_SQL_ACCESS_WRITE, "MERGE"},
    {"CopyStmt", QR_SQL_ACCESS_WRITE, "COPY FROM"}, /* COPY ... TO: see tag_access */
    {"CreateStmt", QR_SQL_ACCESS_SCHEMA, "CREATE TABLE"},
    {"CreateTableAsStmt", QR_SQL_ACCESS_SCHEMA, "CREATE TABLE AS"},
    {"IndexStmt", QR_SQL_ACCESS_SCHEMA, "CREATE INDEX"},
    {"DropStmt", QR_SQL_ACCESS_SCHEMA, "DROP"},
    {"AlterTableStmt", QR_SQL_ACCESS_SCHEMA, "ALTER TABLE"},
    {"TruncateStmt", QR_SQL_ACCESS_SCHEMA, "TRUNCATE TABLE"},
};

static QrSqlAccess tag_access(const char *tag, const cJSON *body, const char **what)
{
    if (!strcmp(tag, "CopyStmt") && !sqlj_bool(body, "is_from") && !sqlj_get(body, "filename") &&
        !sqlj_bool(body, "is_program")) {
        *what = "COPY TO";
        return QR_SQL_ACCESS_READ;
    }
    for (size_t i = 0; i < sizeof ACCESS / sizeof ACCESS[0]; i++)
        if (!strcmp(ACCESS[i].tag, tag)) {
            *what = ACCESS[i].what;
            /* COPY with a file or a program reaches the server's files */
            if (!strcmp(tag, "CopyStmt") && (sqlj_get(body, "filename") || sqlj_bool(body, "is_program")))
                return QR_SQL_ACCESS_SCHEMA;
            return ACCESS[i].access;
        }
    *what = tag;
    return QR_SQL_ACCESS_SCHEMA;
}

typedef struct AccessWalk {
    QrSqlAccess need;
    const char *what;
} AccessWalk;

static void access_note(AccessWalk *w, QrSqlAccess a, const char *what)
{
    if (a > w->need) {
        w->need = a;
        w->what = what;
    }
}

/* sqlj_walk visitor: every statement node below the top one (the key of a
 * node's member is its tag), and the clauses that make a SELECT more */
static int access_visit(cJSON *n, void *arg)
{
    AccessWalk *w = arg;
    const char *k = n->string, *what;
    size_t kl = k ? strlen(k) : 0;
    /* node tags are capitalized; fields are not ("selectStmt" of INSERT) */
    if (kl > 4 && k[0] >= 'A' && k[0] <= 'Z' && !strcmp(k + kl - 4, "Stmt") && cJSON_IsObject(n)) {
        QrSqlAccess a = tag_access(k, n, &what);
        access_note(w, a, what);
    } else if (k && !strcmp(k, "intoClause") && !cJSON_IsNull(n)) {
        access_note(w, QR_SQL_ACCESS_SCHEMA, "SELECT INTO");
    } else if (k && !strcmp(k, "lockingClause") && !cJSON_IsNull(n)) {
        access_note(w, QR_SQL_ACCESS_WRITE, "SELECT FOR UPDATE");
    }
    return QR_OK;
}

int sql_access_of(const cJSON *stmt, QrSqlAccess *need, const char **what)
{
    /* the top node by its tag, whatever it is called; then every node
     * below (the walk meets the top one again, which changes nothing) */
    const char *tag = sqlj_tag(stmt), *top = "SELECT";
    AccessWalk w = {QR_SQL_ACCESS_READ, NULL};
    if (tag)
        w.need = tag_access(tag, sqlj_body(stmt), &top);
    w.what = top;
    int rc = sqlj_walk((cJSON *)stmt, access_visit, &w);
    *need = rc ? QR_SQL_ACCESS_SCHEMA : w.need; /* out of memory: fail closed */
    *what = w.what;
    return rc;
}

int qr_sql_access_needed(const char *sql, size_t len, QrSqlAccess *need, QrError *err)
{
    char *text = qr_strndup(sql, len);
    if (!text)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    cJSON *tree;
    int rc = sql_parse(text, len, SQL_PARSE_MAX_BYTES, &tree, err);
    qr_free(text);
    if (rc)
        return rc;
    QrSqlAccess most = QR_SQL_ACCESS_READ;
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(tree, "stmts"))
    {
        QrSqlAccess a;
        const char *what;
        sql_access_of(cJSON_GetObjectItemCaseSensitive(it, "stmt"), &a, &what);
        if (a > most)
            most = a;
    }
    sqlj_delete(tree);
    *need = most;
    return QR_OK;
}
