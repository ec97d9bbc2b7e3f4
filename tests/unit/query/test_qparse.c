/*
 * test_qparse.c — the text query language parser (src/query/qparse.c).
 *
 * Tables of (query, canonical form) for every construct and precedence rule,
 * tables of (bad query, code, message substring, byte offset), the tree's
 * invariants, limits, and two properties on generated input: format -> parse
 * -> format is a fixpoint, and arbitrary bytes never crash (run under ASan by
 * `make asan-unit`).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/qparse.h"

/* ---- helpers ---- */

/* Parse q with opts; on success write the canonical text into out (a
 * caller buffer of cap bytes).  Returns the qparse code. */
static int parse_fmt(const char *q, size_t len, const QParseOpts *opts, char *out, size_t cap,
                     QrError *err)
{
    QrArena *a = qr_arena_new(0);
    cr_assert(a);
    QNode *n = NULL;
    qr_error_clear(err);
    int rc = qparse(a, q, len, opts, &n, err);
    out[0] = '\0';
    if (rc == QR_OK) {
        QrBuf b;
        qr_buf_init(&b);
        cr_assert_eq(qnode_format(n, &b), QR_OK);
        cr_assert_lt(b.len, cap, "canonical form of %s is too long", q);
        memcpy(out, b.data, b.len);
        out[b.len] = '\0';
        qr_buf_free(&b);
    }
    qr_arena_free(a);
    return rc;
}

typedef struct Case {
    const char *q;
    const char *want;
} Case;

static void check_cases(const Case *cases, size_t n, const QParseOpts *opts)
{
    char got[1024];
    for (size_t i = 0; i < n; i++) {
        QrError err;
        int rc = parse_fmt(cases[i].q, strlen(cases[i].q), opts, got, sizeof got, &err);
        cr_expect_eq(rc, QR_OK, "query [%s]: %s", cases[i].q, err.message);
        cr_expect_str_eq(got, cases[i].want, "query [%s] gives %s", cases[i].q, got);
    }
}

/* ---- constructs and precedence, default OR ---- */

static const Case or_cases[] = {
    /* terms and the implicit operator */
    {"rust", "rust"},
    {"hydro power", "(hydro power)"},
    {"  hydro \t\n power  ", "(hydro power)"},
    {"a and b or not c", "(a and b or not c)"}, /* lowercase words are terms */
    {"Not And", "(Not And)"},
    {"wi-fi C++ AT&T e-mail", "(wi-fi C++ AT&T e-mail)"},
    {"what?", "what?"},
    {"naïve 日本語", "(naïve 日本語)"},
    /* phrases and proximity */
    {"\"hydro power\"", "\"hydro power\""},
    {"\"hydro power\"~3", "\"hydro power\"~3"},
    {"\"hydro power\"~0", "\"hydro power\""},
    {"\"say \\\"hi\\\" \\\\ now\"", "\"say \\\"hi\\\" \\\\ now\""},
    {"\"a (b) c:d\"", "\"a (b) c:d\""},
    {"\"a\"\"b\"", "(\"a\" \"b\")"},
    {"x\"a b\"", "(x \"a b\")"},
    /* prefix and fuzzy */
    {"comput*", "comput*"},
    {"c*", "c*"},
    {"databse~1", "databse~1"},
    {"databse~2", "databse~2"},
    {"databse~", "databse~2"},
    {"databse~0", "databse~0"},
    {"dat~1^2", "dat~1^2"},
    {"dat^2~1", "dat~1^2"},
    {"dat~^2", "dat~2^2"},
    /* fields */
    {"title:rust", "title:rust"},
    {"title: rust", "title:rust"},
    {"title:\"memory safe\"", "title:\"memory safe\""},
    {"title:\"memory safe\"~2^3", "title:\"memory safe\"~2^3"},
    {"title:(rust OR go)", "(title:rust title:go)"},
    {"title:(rust go -c)", "(title:rust title:go -title:c)"},
    {"title:(rust body:go)", "(title:rust body:go)"}, /* the inner field wins */
    {"title:(rust)", "title:rust"},
    {"title:comp*", "title:comp*"},
    {"title:dat~1", "title:dat~1"},
    {"title:-rust", "title:\\-rust"},   /* after field: a leading - is text */
    {"title:AND", "title:\\AND"},       /* ...and so is an operator word */
    {"my\\ field:x", "my\\ field:x"},
    {"a.b:x", "a.b:x"},
    {"title:(-a)", "(+*:* -title:a)"},
    /* boosts */
    {"rust^2", "rust^2"},
    {"title:rust^1.5", "title:rust^1.5"},
    {"\"a b\"^3", "\"a b\"^3"},
    {"(a b)^2", "(a b)^2"},
    {"title:(a b)^2", "(title:a title:b)^2"},
    {"a^0.1", "a^0.1"},
    {"a^.5", "a^0.5"},
    {"a^3.", "a^3"},
    {"a^1.50", "a^1.5"},
    {"a^1", "a"},
    {"a^0", "a^0"},
    {"a^0.0001", "a^0.0001"},
    {"a^1000000", "a^1000000"},
    {"a^1.234567", "a^1.234567"},
    {"(a^2)^3", "a^6"},
    {"(a)^2", "a^2"},
    {"*:*^2", "*:*^2"},
    /* + and - */
    {"+required -excluded", "(+required -excluded)"},
    {"+a", "a"},
    {"+a b", "(+a b)"},
    {"a -b", "(a -b)"},
    {"a -b c", "(a -b c)"},
    {"-a", "(+*:* -a)"},
    {"-a -b", "(+*:* -a -b)"},
    {"-\"a b\"", "(+*:* -\"a b\")"},
    {"+(a b) c", "(+(a b) c)"},
    {"-(a b) c", "(-a -b c)"},
    {"-(a OR b) c", "(-a -b c)"},
    {"-(+a +b) c", "(-(+a +b) c)"},
    {"x-y", "x-y"},
    {"-5", "(+*:* -5)"},
    {"\\-5", "\\-5"},
    /* AND OR NOT and their symbols */
    {"a AND b", "(+a +b)"},
    {"a && b", "(+a +b)"},
    {"a&&b", "(+a +b)"},
    {"a OR b", "(a b)"},
    {"a || b", "(a b)"},
    {"a||b", "(a b)"},
    {"a&b a|b", "(a&b a|b)"},
    {"NOT a", "(+*:* -a)"},
    {"!a", "(+*:* -a)"},
    {"! a", "(+*:* -a)"},
    {"NOT(a)", "(+*:* -a)"},
    {"a NOT b", "(a -b)"},
    {"a AND NOT b", "(+a -b)"},
    {"a AND -b", "(+a -b)"},
    {"a && !b", "(+a -b)"},
    {"NOT a AND b", "(-a +b)"},
    {"NOT a OR b", "(-a b)"},
    {"a OR NOT b", "(a -b)"},     /* as in Lucene: NOT excludes from the group */
    {"a OR (NOT b)", "(a (+*:* -b))"}, /* ...a group makes it "a or not-b" */
    {"-a OR -b", "(+*:* -a -b)"},
    {"a OR +b", "(a +b)"},
    /* precedence: NOT > AND > OR, implicit = OR */
    {"a AND b OR c", "((+a +b) c)"},
    {"a OR b AND c", "(a (+b +c))"},
    {"a OR b AND c OR d", "(a (+b +c) d)"},
    {"a AND b OR c AND d", "((+a +b) (+c +d))"},
    {"a b AND c", "(a (+b +c))"},
    {"a AND b c", "((+a +b) c)"},
    {"a AND b -c", "((+a +b) -c)"},
    {"NOT a AND b OR c", "((-a +b) c)"},
    {"a && b || !c", "((+a +b) -c)"},
    {"(a OR b) AND c", "(+(a b) +c)"},
    {"a AND (b OR c)", "(+a +(b c))"},
    {"(a AND b) OR (c AND d)", "((+a +b) (+c +d))"},
    /* flattening */
    {"a OR (b OR c)", "(a b c)"},
    {"(a b) c", "(a b c)"},
    {"((((a))))", "a"},
    {"((a b) (c d))", "(a b c d)"},
    {"a AND (b AND c)", "(+a +b +c)"},
    {"a AND (b AND -c)", "(+a +b -c)"},
    {"(a AND b) AND (c AND d)", "(+a +b +c +d)"},
    {"x OR +(a +b)", "(x a +b)"},
    {"x AND (+a b)", "(+x +a b)"},
    {"(a b)^2 c", "((a b)^2 c)"},
    {"-(a (b c)^2)", "(+*:* -a -b -c)"},
    {"x -(-a)", "(x -(+*:* -a))"},
    /* match all */
    {"*:*", "*:*"},
    {"*:* -a", "(*:* -a)"},
    {"+*:* -a", "(+*:* -a)"},
    /* kept: if a analyzes to no word (a stop word), *:* AND a is every doc */
    {"*:* AND a", "(+*:* +a)"},
    {"*:* AND a OR b", "((+*:* +a) b)"},
    {"+*:* +a -b", "(+*:* +a -b)"},
    /* escapes */
    {"a\\:b", "a\\:b"},
    {"\\(x\\)", "\\(x\\)"},
    {"\\AND \\OR \\NOT", "(\\AND \\OR \\NOT)"},
    {"\\*", "\\*"},
    {"foo\\*", "foo\\*"},
    {"\\**", "\\**"},
    {"a\\\\*", "a\\\\*"},
    {"\\*\\:\\*", "\\*\\:\\*"},
    {"\\*\\:*", "\\*\\:*"},
    {"\\+a \\!b", "(\\+a \\!b)"},
    {"a\\ b", "a\\ b"},
    {"\\&&x", "\\&&x"},
    {"a\\^2 a\\~1", "(a\\^2 a\\~1)"},
    {"\\[1\\] x[0]", "(\\[1\\] x\\[0\\])"},
};

Test(qparse, constructs_default_or) { check_cases(or_cases, sizeof or_cases / sizeof *or_cases, NULL); }

/* ---- default AND ---- */

static const Case and_cases[] = {
    {"hydro power", "(+hydro +power)"},
    {"a -b", "(+a -b)"},
    {"a +b", "(+a +b)"},
    {"a b OR c", "((+a +b) c)"},
    {"a OR b c", "(a (+b +c))"},
    {"a OR b", "(a b)"},
    {"a OR -b", "(a -b)"},
    {"a NOT b", "(+a -b)"},
    {"(a b) c", "(+a +b +c)"},
    {"title:(a b)", "(+title:a +title:b)"},
    {"-a -b", "(+*:* -a -b)"},
    {"a (b OR c)", "(+a +(b c))"},
};

Test(qparse, constructs_default_and)
{
    QParseOpts o = {.default_and = true};
    check_cases(and_cases, sizeof and_cases / sizeof *and_cases, &o);
}

/* ---- errors ---- */

typedef struct BadCase {
    const char *q;
    int code;
    const char *msg; /* substring of the message */
    int64_t pos;     /* byte offset */
} BadCase;

static const BadCase bad_cases[] = {
    {"", QR_ESYNTAX, "empty query", 0},
    {"   \t\n ", QR_ESYNTAX, "empty query", 0},
    /* parentheses and quotes */
    {"(", QR_ESYNTAX, "\"(\" is not closed", 0},
    {"(a", QR_ESYNTAX, "\"(\" is not closed", 0},
    {"((((", QR_ESYNTAX, "\"(\" is not closed", 3},
    {"a (b (c) d", QR_ESYNTAX, "\"(\" is not closed", 2},
    {"a)", QR_ESYNTAX, "unexpected \")\"", 1},
    {")", QR_ESYNTAX, "unexpected \")\"", 0},
    {"(a))", QR_ESYNTAX, "unexpected \")\"", 3},
    {"()", QR_ESYNTAX, "empty parentheses", 0},
    {"a ( ) b", QR_ESYNTAX, "empty parentheses", 2},
    {"\"unterminated", QR_ESYNTAX, "unterminated quoted phrase", 0},
    {"a \"b c", QR_ESYNTAX, "unterminated quoted phrase", 2},
    {"\"a\\\"", QR_ESYNTAX, "unterminated quoted phrase", 0},
    {"\"\"", QR_ESYNTAX, "empty phrase", 0},
    {"a \"  \"", QR_ESYNTAX, "empty phrase", 2},
    /* dangling operators */
    {"a OR", QR_ESYNTAX, "dangling operator \"OR\"", 2},
    {"a AND", QR_ESYNTAX, "dangling operator \"AND\"", 2},
    {"a &&", QR_ESYNTAX, "dangling operator \"&&\"", 2},
    {"a ||", QR_ESYNTAX, "dangling operator \"||\"", 2},
    {"AND a", QR_ESYNTAX, "dangling operator \"AND\"", 0},
    {"OR", QR_ESYNTAX, "dangling operator \"OR\"", 0},
    {"a AND OR b", QR_ESYNTAX, "dangling operator \"AND\"", 2},
    {"a OR AND b", QR_ESYNTAX, "dangling operator \"OR\"", 2},
    {"(a OR)", QR_ESYNTAX, "dangling operator \"OR\"", 3},
    {"(AND a)", QR_ESYNTAX, "dangling operator \"AND\"", 1},
    {"NOT", QR_ESYNTAX, "dangling operator \"NOT\"", 0},
    {"a NOT", QR_ESYNTAX, "dangling operator \"NOT\"", 2},
    {"a AND NOT", QR_ESYNTAX, "dangling operator \"NOT\"", 6},
    {"!", QR_ESYNTAX, "dangling operator \"!\"", 0},
    {"-", QR_ESYNTAX, "dangling operator \"-\"", 0},
    {"a +", QR_ESYNTAX, "dangling operator \"+\"", 2},
    {"a - b", QR_ESYNTAX, "dangling operator \"-\"", 2},
    {"(a -)", QR_ESYNTAX, "dangling operator \"-\"", 3},
    {"NOT NOT a", QR_ESYNTAX, "cannot follow", 4},
    {"+-a", QR_ESYNTAX, "cannot follow", 1},
    {"-!a", QR_ESYNTAX, "cannot follow", 1},
    /* fields */
    {"title:", QR_ESYNTAX, "missing value for field \"title\"", 6},
    {"title:  ", QR_ESYNTAX, "missing value for field \"title\"", 8},
    {"(title:)", QR_ESYNTAX, "missing value for field \"title\"", 7},
    {"title:&& a", QR_ESYNTAX, "missing value for field \"title\"", 6},
    {"a title:^2", QR_ESYNTAX, "missing value for field \"title\"", 8},
    {":foo", QR_ESYNTAX, "missing field name", 0},
    {"a :b", QR_ESYNTAX, "missing field name", 2},
    {"\"a\":b", QR_ESYNTAX, "missing field name", 3},
    {"a:b:c", QR_ESYNTAX, "unexpected \":\" after field value", 3},
    {"ti*:x", QR_ESYNTAX, "wildcard field names", 0},
    /* boosts */
    {"a^", QR_ESYNTAX, "missing boost", 2},
    {"a^ b", QR_ESYNTAX, "missing boost", 2},
    {"a^x", QR_ESYNTAX, "invalid boost \"x\"", 2},
    {"a^-1", QR_ESYNTAX, "invalid boost \"-1\"", 2},
    {"a^1e3", QR_ESYNTAX, "invalid boost \"1e3\"", 2},
    {"a^1.2.3", QR_ESYNTAX, "invalid boost", 2},
    {"a^.", QR_ESYNTAX, "invalid boost", 2},
    {"a^2000000", QR_ESYNTAX, "boost 2000000 is out of range", 2},
    {"a^0.00001", QR_ESYNTAX, "out of range", 2},
    {"(a^1000)^1001", QR_ESYNTAX, "out of range", 9},
    {"a^99999999999999999999999", QR_ESYNTAX, "invalid boost", 2},
    {"a^2^3", QR_ESYNTAX, "syntax error at or near \"^3\"", 3},
    {"a ^2", QR_ESYNTAX, "syntax error at or near \"^2\"", 2},
    {"^2", QR_ESYNTAX, "syntax error at or near \"^2\"", 0},
    {"(a ^2)", QR_ESYNTAX, "syntax error at or near \"^2\"", 3},
    /* slop and edits */
    {"a~x", QR_ESYNTAX, "invalid edit distance \"x\"", 2},
    {"a~1.5", QR_ESYNTAX, "invalid edit distance \"1.5\"", 2},
    {"a~3", QR_ESYNTAX, "edit distance 3 is out of range", 2},
    {"a~99999999999999999999", QR_ESYNTAX, "out of range", 2},
    {"a~1~2", QR_ESYNTAX, "syntax error at or near \"~2\"", 3},
    {"a ~1", QR_ESYNTAX, "syntax error at or near \"~1\"", 2},
    {"~", QR_ESYNTAX, "syntax error at or near \"~\"", 0},
    {"\"a b\"~", QR_ESYNTAX, "missing slop", 6},
    {"\"a b\"~x", QR_ESYNTAX, "invalid slop \"x\"", 6},
    {"\"a b\"~-1", QR_ESYNTAX, "invalid slop", 6},
    {"\"a b\"~10001", QR_ESYNTAX, "slop 10001 is out of range", 6},
    {"\"a b\" ~2", QR_ESYNTAX, "syntax error at or near \"~2\"", 6},
    {"comp*~1", QR_ESYNTAX, "prefix terms cannot be fuzzy", 5},
    {"(a b)~2", QR_ESYNTAX, "cannot follow a group", 5},
    {"*:*~1", QR_ESYNTAX, "cannot follow a group", 3},
    /* wildcards */
    {"*", QR_ESYNTAX, "lone \"*\"", 0},
    {"a *", QR_ESYNTAX, "lone \"*\"", 2},
    {"-*", QR_ESYNTAX, "lone \"*\"", 1},
    {"title:*", QR_ESYNTAX, "lone \"*\"", 6},
    {"*^2", QR_ESYNTAX, "lone \"*\"", 0},
    {"*foo", QR_ESYNTAX, "unsupported wildcard", 0},
    {"fo*o", QR_ESYNTAX, "unsupported wildcard in \"fo*o\"", 2},
    {"foo**", QR_ESYNTAX, "unsupported wildcard", 3},
    {"title:*:*", QR_ESYNTAX, "unexpected \":\"", 7},
    /* reserved characters and escapes */
    {"[a TO b]", QR_ESYNTAX, "unsupported character \"[\"", 0},
    {"a {b}", QR_ESYNTAX, "unsupported character \"{\"", 2},
    {"a\\", QR_ESYNTAX, "escape character at end of query", 1},
    {"title:a\\", QR_ESYNTAX, "escape character at end of query", 7},
    /* encoding */
    {"a \xff b", QR_EINVAL, "invalid byte sequence for encoding \"UTF8\": 0xff", 2},
    {"\xc3\x28", QR_EINVAL, "0xc3", 0},
    {"ab\xe2\x82", QR_EINVAL, "0xe2", 2},
    {"\xed\xa0\x80", QR_EINVAL, "0xed", 0},  /* surrogate */
    {"\xc0\xaf", QR_EINVAL, "0xc0", 0},      /* overlong */
    {"\xf4\x90\x80\x80", QR_EINVAL, "0xf4", 0}, /* > U+10FFFF */
};

Test(qparse, error_table)
{
    char got[1024];
    for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
        const BadCase *c = &bad_cases[i];
        QrError err;
        int rc = parse_fmt(c->q, strlen(c->q), NULL, got, sizeof got, &err);
        cr_expect_eq(rc, c->code, "query [%s]: rc %d (%s), want %d; got [%s]", c->q, rc,
                     err.message, c->code, got);
        cr_expect_eq(err.code, (QrCode)rc, "query [%s]", c->q);
        cr_expect(strstr(err.message, c->msg) != NULL, "query [%s]: message [%s] lacks [%s]",
                  c->q, err.message, c->msg);
        cr_expect_eq(err.offset, c->pos, "query [%s]: offset %lld, want %lld", c->q,
                     (long long)err.offset, (long long)c->pos);
        cr_expect(err.message[0] && err.message[strlen(err.message) - 1] != '.',
                  "query [%s]: PostgreSQL style, no trailing period", c->q);
    }
}

Test(qparse, error_has_detail_or_hint)
{
    char got[64];
    QrError err;
    parse_fmt("a~3", 3, NULL, got, sizeof got, &err);
    cr_expect(strstr(err.detail, "largest edit distance is 2"), "detail: %s", err.detail);
    parse_fmt("*", 1, NULL, got, sizeof got, &err);
    cr_expect(strstr(err.hint, "*:*"), "hint: %s", err.hint);
    parse_fmt("a OR", 4, NULL, got, sizeof got, &err);
    cr_expect(strstr(err.detail, "right"), "detail: %s", err.detail);
    parse_fmt("AND b", 5, NULL, got, sizeof got, &err);
    cr_expect(strstr(err.detail, "left"), "detail: %s", err.detail);
}

Test(qparse, error_line_and_column)
{
    char got[64];
    QrError err;
    const char *q = "a\nb\n  ccé d)";
    cr_assert_eq(parse_fmt(q, strlen(q), NULL, got, sizeof got, &err), QR_ESYNTAX);
    cr_expect_eq(err.offset, 12);
    cr_expect_eq(err.line, 3);
    cr_expect_eq(err.column, 8, "column counts characters: %d", err.column); /* "  ccé d)" */
    cr_expect_str_eq(qr_code_sqlstate(err.code), "42601");
}

Test(qparse, first_error_wins_and_out_untouched)
{
    QrArena *a = qr_arena_new(0);
    QrError err;
    qr_error_clear(&err);
    qr_error_set(&err, QR_EIO, "earlier failure");
    QNode *sentinel = (QNode *)&err, *n = sentinel;
    cr_expect_eq(qparse(a, "a OR", 4, NULL, &n, &err), QR_ESYNTAX);
    cr_expect_eq(err.code, QR_EIO);
    cr_expect_str_eq(err.message, "earlier failure");
    cr_expect_eq(n, sentinel);
    /* err may be NULL */
    cr_expect_eq(qparse(a, "(", 1, NULL, &n, NULL), QR_ESYNTAX);
    cr_expect_eq(qparse(a, "ok", 2, NULL, &n, NULL), QR_OK);
    cr_expect_eq(n->kind, QN_TERM);
    /* bad arguments */
    cr_expect_eq(qparse(NULL, "a", 1, NULL, &n, NULL), QR_EINVAL);
    cr_expect_eq(qparse(a, NULL, 1, NULL, &n, NULL), QR_EINVAL);
    cr_expect_eq(qparse(a, NULL, 0, NULL, &n, NULL), QR_ESYNTAX); /* empty query */
    cr_expect_eq(qparse(a, "a", 1, NULL, NULL, NULL), QR_EINVAL);
    qr_arena_free(a);
}

Test(qparse, nul_bytes_and_unterminated_input)
{
    char got[64];
    QrError err;
    cr_expect_eq(parse_fmt("a\0b", 3, NULL, got, sizeof got, &err), QR_EINVAL);
    cr_expect_eq(err.offset, 1);
    cr_expect(strstr(err.message, "0x00"));
    /* len is honoured: the bytes after it are never read */
    cr_expect_eq(parse_fmt("rust OR go", 4, NULL, got, sizeof got, &err), QR_OK);
    cr_expect_str_eq(got, "rust");
}

/* ---- known fields ---- */

Test(qparse, known_fields)
{
    static const char *const fields[] = {"title", "body", NULL};
    QParseOpts o = {.fields = fields};
    char got[256];
    QrError err;
    cr_expect_eq(parse_fmt("title:a body:\"b c\" d", 20, &o, got, sizeof got, &err), QR_OK);
    cr_expect_str_eq(got, "(title:a body:\"b c\" d)");
    const char *q = "a titel:rust";
    cr_expect_eq(parse_fmt(q, strlen(q), &o, got, sizeof got, &err), QR_ESYNTAX);
    cr_expect_str_eq(err.message, "unknown field \"titel\"");
    cr_expect_eq(err.offset, 2);
    cr_expect(strstr(err.hint, "title, body"), "hint: %s", err.hint);
    q = "http://example.com";
    cr_expect_eq(parse_fmt(q, strlen(q), &o, got, sizeof got, &err), QR_ESYNTAX);
    cr_expect(strstr(err.message, "unknown field \"http\""));
    q = "http\\://example.com";
    cr_expect_eq(parse_fmt(q, strlen(q), &o, got, sizeof got, &err), QR_OK);
    cr_expect_str_eq(got, "http\\://example.com");
    q = "title:(a BODY:b)";
    cr_expect_eq(parse_fmt(q, strlen(q), &o, got, sizeof got, &err), QR_ESYNTAX);
    cr_expect_eq(err.offset, 9);
    static const char *const none[] = {NULL};
    o.fields = none;
    cr_expect_eq(parse_fmt("x:y", 3, &o, got, sizeof got, &err), QR_ESYNTAX);
    cr_expect_eq(parse_fmt("y", 1, &o, got, sizeof got, &err), QR_OK);
}

/* ---- the tree itself ---- */

static QNode *must_parse(QrArena *a, const char *q, const QParseOpts *o)
{
    QNode *n = NULL;
    QrError err;
    qr_error_clear(&err);
    int rc = qparse(a, q, strlen(q), o, &n, &err);
    cr_assert_eq(rc, QR_OK, "query [%s]: %s", q, err.message);
    return n;
}

Test(qparse, tree_shape)
{
    QrArena *a = qr_arena_new(0);
    QNode *n = must_parse(a, "+title:rust^2 -\"a  b\"~2 comp* dat~1", NULL);
    cr_assert_eq(n->kind, QN_BOOL);
    cr_expect_eq(n->occur, QO_MUST);
    cr_expect_eq(n->field, NULL);
    cr_expect_eq(n->text, NULL);
    cr_assert_eq(n->n_kids, 4);
    cr_expect_eq(n->min_should, 0);
    QNode **k = n->kids;
    cr_expect_eq(k[0]->kind, QN_TERM);
    cr_expect_eq(k[0]->occur, QO_MUST);
    cr_expect_str_eq(k[0]->field, "title");
    cr_expect_str_eq(k[0]->text, "rust");
    cr_expect_eq(k[0]->text_len, 4);
    cr_expect_float_eq(k[0]->boost, 2.0f, 1e-6);
    cr_expect_eq(k[0]->pos, 1);
    cr_expect_eq(k[1]->kind, QN_PHRASE);
    cr_expect_eq(k[1]->occur, QO_MUST_NOT);
    cr_expect_str_eq(k[1]->text, "a  b");
    cr_expect_eq(k[1]->slop, 2);
    cr_expect_eq(k[1]->pos, 15);
    cr_expect_eq(k[2]->kind, QN_PREFIX);
    cr_expect_eq(k[2]->occur, QO_SHOULD);
    cr_expect_str_eq(k[2]->text, "comp");
    cr_expect_eq(k[2]->text_len, 4);
    cr_expect_eq(k[2]->pos, 24);
    cr_expect_eq(k[3]->kind, QN_FUZZY);
    cr_expect_eq(k[3]->edits, 1);
    cr_expect_str_eq(k[3]->text, "dat");
    cr_expect_float_eq(k[3]->boost, 1.0f, 0);
    cr_expect_eq(k[3]->pos, 30);

    n = must_parse(a, "a b -c", NULL);
    cr_expect_eq(n->min_should, 1);
    n = must_parse(a, "-c", NULL);
    cr_assert_eq(n->n_kids, 2);
    cr_expect_eq(n->kids[0]->kind, QN_ALL);
    cr_expect_eq(n->kids[0]->occur, QO_MUST);
    cr_expect_eq(n->kids[1]->occur, QO_MUST_NOT);
    cr_expect_eq(n->min_should, 0);

    n = must_parse(a, "x (a\\\"b c)", NULL);
    cr_assert_eq(n->n_kids, 3);
    cr_expect_str_eq(n->kids[1]->text, "a\"b");
    cr_expect_eq(n->kids[1]->pos, 3);

    n = must_parse(a, "x +(a b)^2", NULL);
    cr_expect_eq(n->kids[1]->kind, QN_BOOL);
    cr_expect_eq(n->kids[1]->pos, 3, "a group's pos is its '('");
    cr_expect_eq(n->kids[1]->min_should, 1);

    n = must_parse(a, "rust", NULL);
    cr_expect_eq(n->kind, QN_TERM);
    cr_expect_eq(n->occur, QO_MUST);
    cr_expect_eq(n->text[n->text_len], '\0');
    qr_arena_free(a);
}

/* Every invariant the header promises, over a whole tree. */
static void check_invariants(const QNode *n, bool is_root)
{
    cr_assert(n);
    if (is_root)
        cr_assert_eq(n->occur, QO_MUST);
    cr_assert(n->boost == 0.0f || (n->boost >= (float)QPARSE_MIN_BOOST && n->boost <= (float)QPARSE_MAX_BOOST));
    switch (n->kind) {
    case QN_BOOL: {
        cr_assert_geq(n->n_kids, 2);
        cr_assert_eq(n->field, NULL);
        bool must = false, should = false;
        for (int i = 0; i < n->n_kids; i++) {
            must |= n->kids[i]->occur == QO_MUST;
            should |= n->kids[i]->occur == QO_SHOULD;
            check_invariants(n->kids[i], false);
        }
        cr_assert(must || should, "a bool never only excludes");
        cr_assert_eq(n->min_should, must ? 0 : 1);
        break;
    }
    case QN_ALL:
        cr_assert_eq(n->text, NULL);
        cr_assert_eq(n->field, NULL);
        break;
    default:
        cr_assert(n->text);
        cr_assert_eq(strlen(n->text), n->text_len);
        cr_assert_eq(n->n_kids, 0);
        if (n->kind == QN_FUZZY)
            cr_assert(n->edits >= 0 && n->edits <= QPARSE_MAX_EDITS);
        if (n->kind == QN_PHRASE)
            cr_assert(n->slop >= 0 && n->slop <= QPARSE_MAX_SLOP);
    }
}

/* ---- limits ---- */

static char *repeat(const char *unit, int n, const char *tail)
{
    size_t ul = strlen(unit), tl = strlen(tail);
    char *s = malloc(ul * (size_t)n + tl + 1);
    cr_assert(s);
    for (int i = 0; i < n; i++)
        memcpy(s + ul * (size_t)i, unit, ul);
    memcpy(s + ul * (size_t)n, tail, tl + 1);
    return s;
}

Test(qparse, ten_thousand_terms)
{
    char *q = repeat("term ", 10000, "");
    QrArena *a = qr_arena_new(0);
    QNode *n = NULL;
    QrError err;
    qr_error_clear(&err);
    cr_expect_eq(qparse(a, q, strlen(q), NULL, &n, &err), QR_ELIMIT);
    cr_expect_str_eq(err.message, "too many clauses in query");
    cr_expect_eq(err.offset, 5 * QPARSE_DEFAULT_MAX_CLAUSES);
    qr_error_clear(&err);
    QParseOpts o = {.max_clauses = 10000};
    cr_assert_eq(qparse(a, q, strlen(q), &o, &n, &err), QR_OK, "%s", err.message);
    cr_expect_eq(n->n_kids, 10000);
    check_invariants(n, true);
    free(q);
    /* 10,000 terms joined by AND, and by OR inside nested groups */
    q = repeat("t AND ", 9999, "t");
    cr_assert_eq(qparse(a, q, strlen(q), &o, &n, &err), QR_OK);
    cr_expect_eq(n->n_kids, 10000);
    cr_expect_eq(n->kids[9999]->occur, QO_MUST);
    free(q);
    qr_arena_free(a);
}

Test(qparse, nesting_depth)
{
    QrArena *a = qr_arena_new(0);
    QNode *n;
    QrError err;
    for (int d = 1; d <= QPARSE_DEFAULT_MAX_DEPTH + 1; d += QPARSE_DEFAULT_MAX_DEPTH) {
        char *open = repeat("(x ", d, "y");
        char *q = repeat(")", d, "");
        size_t ol = strlen(open);
        char *full = malloc(ol + strlen(q) + 1);
        memcpy(full, open, ol);
        strcpy(full + ol, q);
        qr_error_clear(&err);
        int rc = qparse(a, full, strlen(full), NULL, &n, &err);
        if (d <= QPARSE_DEFAULT_MAX_DEPTH) {
            cr_expect_eq(rc, QR_OK, "depth %d: %s", d, err.message);
        } else {
            cr_expect_eq(rc, QR_ELIMIT, "depth %d", d);
            cr_expect_str_eq(err.message, "query nesting too deep");
            cr_expect_eq(err.offset, 3 * QPARSE_DEFAULT_MAX_DEPTH);
        }
        free(open);
        free(q);
        free(full);
    }
    /* a million '(' or NOTs: an error, not a stack overflow */
    char *q = repeat("(", 1000000, "");
    cr_expect_eq(qparse(a, q, strlen(q), NULL, &n, NULL), QR_ELIMIT);
    QParseOpts o = {.max_depth = 1 << 30};
    cr_expect_eq(qparse(a, q, strlen(q), &o, &n, NULL), QR_ELIMIT, "max_depth is clamped");
    free(q);
    q = repeat("NOT ", 100000, "a");
    cr_expect_eq(qparse(a, q, strlen(q), NULL, &n, NULL), QR_ESYNTAX);
    free(q);
    q = repeat("-(", 200, "a");
    o.max_depth = 3;
    qr_error_clear(&err);
    cr_expect_eq(qparse(a, q, strlen(q), &o, &n, &err), QR_ELIMIT);
    cr_expect_eq(err.offset, 7);
    free(q);
    qr_arena_free(a);
}

Test(qparse, memory_cap_and_oom)
{
    const char *q = "title:(rust OR go) AND \"memory safe\"~2 -unsafe comp* dat~1";
    QrArena *a = qr_arena_new(256);
    QNode *n;
    QrError err;
    qr_error_clear(&err);
    cr_expect_eq(qparse(a, q, strlen(q), NULL, &n, &err), QR_ELIMIT);
    cr_expect(strstr(err.message, "memory limit"), "%s", err.message);
    qr_arena_free(a);
    /* fail the Nth allocation for every N until the parse succeeds */
    for (int64_t k = 0;; k++) {
        a = qr_arena_new(0);
        if (!a)
            continue;
        qr_error_clear(&err);
        qr_mem_fail_after(k);
        int rc = qparse(a, q, strlen(q), NULL, &n, &err);
        qr_mem_fail_after(-1);
        qr_arena_free(a);
        if (rc == QR_OK)
            break;
        cr_assert_eq(rc, QR_ENOMEM, "k=%lld: %s", (long long)k, err.message);
        cr_assert_lt(k, 1000);
    }
}

/* ---- escaping helper ---- */

Test(qparse, escape_term_reads_back)
{
    static const char *const words[] = {
        "plain", "a b", "AND", "OR", "NOT", "and", "-x", "+x", "!x", "x-y", "*", "*:*",
        "a*", "(x)", "\"q\"", "a\\b", "&&", "a&&b", "||x", "x|", "^2", "~", "[a TO b]",
        "{}", ":", "é日本", "t\ta", "end\\",
    };
    QrArena *a = qr_arena_new(0);
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        QrBuf b;
        qr_buf_init(&b);
        qr_buf_append(&b, "f:", 2);
        qparse_escape_term(words[i], strlen(words[i]), &b);
        for (int with_field = 0; with_field < 2; with_field++) {
            const char *q = (const char *)b.data + (with_field ? 0 : 2);
            size_t ql = b.len - (with_field ? 0 : 2);
            QNode *n = NULL;
            QrError err;
            qr_error_clear(&err);
            cr_assert_eq(qparse(a, q, ql, NULL, &n, &err), QR_OK, "[%.*s]: %s", (int)ql, q,
                         err.message);
            cr_expect_eq(n->kind, QN_TERM, "[%.*s]", (int)ql, q);
            cr_expect_str_eq(n->text, words[i], "[%.*s]", (int)ql, q);
            if (with_field)
                cr_expect_str_eq(n->field, "f");
        }
        qr_buf_free(&b);
    }
    qr_arena_free(a);
}

Test(qparse, format_hand_built_tree)
{
    QNode t1 = {.kind = QN_TERM, .occur = QO_MUST, .field = "title", .text = "rust",
                .text_len = 4, .boost = 2.0f};
    QNode t2 = {.kind = QN_PHRASE, .occur = QO_MUST_NOT, .text = "a b", .text_len = 3,
                .slop = 2, .boost = 1.0f};
    QNode t3 = {.kind = QN_PREFIX, .text = "comp", .text_len = 4, .boost = 1.0f};
    QNode t4 = {.kind = QN_FUZZY, .text = "dat", .text_len = 3, .edits = 1, .boost = 1.0f};
    QNode *kids[] = {&t1, &t2, &t3, &t4};
    QNode root = {.kind = QN_BOOL, .occur = QO_MUST, .kids = kids, .n_kids = 4, .boost = 1.0f};
    QrBuf b;
    qr_buf_init(&b);
    cr_assert_eq(qnode_format(&root, &b), QR_OK);
    cr_expect_eq(b.len, strlen("(+title:rust^2 -\"a b\"~2 comp* dat~1)"));
    cr_expect(memcmp(b.data, "(+title:rust^2 -\"a b\"~2 comp* dat~1)", b.len) == 0);
    qr_buf_free(&b);
    kids[2] = NULL;
    cr_expect_eq(qnode_format(&root, &b), QR_EINVAL);
    qr_buf_free(&b);
    cr_expect_str_eq(qnode_kind_name(QN_FUZZY), "fuzzy");
    cr_expect_str_eq(qnode_kind_name((QNodeKind)99), "unknown");
}

/* ---- properties on generated input ---- */

typedef struct Rng {
    uint64_t s;
} Rng;

static uint32_t rnd(Rng *r, uint32_t n)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return (uint32_t)((r->s >> 11) % n);
}

static void put(QrBuf *b, const char *s) { qr_buf_append(b, s, strlen(s)); }

static const char *pick(Rng *r, const char *const *v, size_t n) { return v[rnd(r, (uint32_t)n)]; }
#define PICK(r, arr) pick((r), (arr), sizeof(arr) / sizeof *(arr))

static void gen_or(Rng *r, QrBuf *b, int depth);

static void gen_primary(Rng *r, QrBuf *b, int depth)
{
    static const char *const words[] = {
        "a", "rust", "go", "and", "or", "wi-fi", "C++", "AT&T", "x|y", "é", "日本", "a\\:b",
        "\\*", "\\AND", "\\-x", "q\\\"t", "a\\ b", "\\(p\\)", "n0", "what?", "e\\^2", "x\\\\",
    };
    static const char *const phrases[] = {
        "\"a b\"", "\"hydro power\"", "\"x\"", "\"say \\\"hi\\\"\"", "\"a (b) c:d\"",
        "\"back\\\\slash\"",
    };
    static const char *const fields[] = {"title:", "body:", "my\\ f:", "t.x:"};
    static const char *const boosts[] = {"^2", "^0.5", "^1.25", "^3.", "^.75", "^0", "^10",
                                         "^1", "^0.0001", "^1000"};
    uint32_t kind = rnd(r, depth < 4 ? 7 : 6);
    bool all = kind == 5 && rnd(r, 8) == 0; /* *:* takes no field */
    if (!all && rnd(r, 5) == 0)
        put(b, PICK(r, fields));
    switch (kind) {
    case 0: case 1:
        put(b, PICK(r, words));
        break;
    case 2:
        put(b, PICK(r, words));
        put(b, "*");
        break;
    case 3:
        put(b, PICK(r, words));
        put(b, rnd(r, 2) ? "~" : rnd(r, 2) ? "~1" : "~0");
        break;
    case 4:
        put(b, PICK(r, phrases));
        if (rnd(r, 3) == 0)
            put(b, rnd(r, 2) ? "~3" : "~0");
        break;
    case 5:
        put(b, all ? "*:*" : PICK(r, words));
        break;
    default:
        put(b, "(");
        gen_or(r, b, depth + 1);
        put(b, ")");
        break;
    }
    if (rnd(r, 4) == 0)
        put(b, PICK(r, boosts));
}

static void gen_unary(Rng *r, QrBuf *b, int depth)
{
    static const char *const mods[] = {"+", "-", "NOT ", "!", "! "};
    if (rnd(r, 3) == 0)
        put(b, PICK(r, mods));
    gen_primary(r, b, depth);
}

/* 1..max_n clauses written by `next`, separated by one of `ops`. */
static void gen_chain(Rng *r, QrBuf *b, int depth, const char *const *ops, uint32_t max_n,
                      void (*next)(Rng *, QrBuf *, int))
{
    int n = 1 + (int)rnd(r, max_n);
    for (int i = 0; i < n; i++) {
        if (i)
            put(b, pick(r, ops, 4));
        next(r, b, depth);
    }
}

static void gen_and(Rng *r, QrBuf *b, int depth)
{
    static const char *const ops[4] = {" AND ", " && ", " ", "&&"};
    gen_chain(r, b, depth, ops, 3, gen_unary);
}

static void gen_or(Rng *r, QrBuf *b, int depth)
{
    static const char *const ops[4] = {" OR ", " || ", " ", "  \t"};
    gen_chain(r, b, depth, ops, 4, gen_and);
}

/* format(parse(q)) parsed again (default OR, large limits) and formatted must
 * give the same text, and the trees must keep every invariant. */
static void check_fixpoint(const char *q, size_t len, const QParseOpts *o, int *n_ok)
{
    QrArena *a = qr_arena_new(0);
    QNode *n = NULL;
    QrError err;
    qr_error_clear(&err);
    int rc = qparse(a, q, len, o, &n, &err);
    cr_assert(rc == QR_OK || rc == QR_ESYNTAX || rc == QR_EINVAL || rc == QR_ELIMIT,
              "rc %d for [%.*s]", rc, (int)len, q);
    if (rc != QR_OK) {
        cr_assert_eq(err.code, (QrCode)rc);
        cr_assert(err.message[0]);
        cr_assert(err.offset >= 0 && (size_t)err.offset <= len, "offset %lld for [%.*s]",
                  (long long)err.offset, (int)len, q);
        qr_arena_free(a);
        return;
    }
    ++*n_ok;
    check_invariants(n, true);
    QrBuf f1, f2;
    qr_buf_init(&f1);
    qr_buf_init(&f2);
    cr_assert_eq(qnode_format(n, &f1), QR_OK);
    QParseOpts again = {.fields = o ? o->fields : NULL, .max_clauses = 1 << 30,
                        .max_depth = QPARSE_MAX_DEPTH_LIMIT};
    QNode *n2 = NULL;
    rc = qparse(a, (const char *)f1.data, f1.len, &again, &n2, &err);
    cr_assert_eq(rc, QR_OK, "[%.*s] -> [%.*s] does not parse: %s", (int)len, q, (int)f1.len,
                 f1.data, err.message);
    check_invariants(n2, true);
    cr_assert_eq(qnode_format(n2, &f2), QR_OK);
    cr_assert(f1.len == f2.len && memcmp(f1.data, f2.data, f1.len) == 0,
              "not a fixpoint: [%.*s] -> [%.*s] -> [%.*s]", (int)len, q, (int)f1.len, f1.data,
              (int)f2.len, f2.data);
    qr_buf_free(&f1);
    qr_buf_free(&f2);
    qr_arena_free(a);
}

Test(qparse, roundtrip_fixpoint_on_generated_queries)
{
    Rng r = {0x9E3779B97F4A7C15ull};
    int n_ok = 0, n = 20000;
    for (int i = 0; i < n; i++) {
        QrBuf b;
        qr_buf_init(&b);
        gen_or(&r, &b, 0);
        QParseOpts o = {.default_and = rnd(&r, 2)};
        check_fixpoint((const char *)b.data, b.len, &o, &n_ok);
        qr_buf_free(&b);
    }
    /* the generator writes mostly valid queries: the property is not vacuous */
    cr_expect_gt(n_ok, n * 9 / 10, "only %d of %d generated queries parsed", n_ok, n);
}

Test(qparse, random_bytes_never_crash)
{
    static const char alphabet[] = "ab ()\"\\:*^~+-!&|.0123ANDORNT[]{}\t\n\xc3\xa9\xff";
    static const char *const fields[] = {"a", "title", NULL};
    Rng r = {0xD1B54A32D192ED03ull};
    int n_ok = 0;
    char q[96];
    for (int i = 0; i < 60000; i++) {
        size_t len = rnd(&r, sizeof q);
        bool raw = rnd(&r, 4) == 0;
        for (size_t k = 0; k < len; k++)
            q[k] = raw ? (char)rnd(&r, 256) : alphabet[rnd(&r, sizeof alphabet - 1)];
        QParseOpts o = {.default_and = rnd(&r, 2), .fields = rnd(&r, 3) ? NULL : fields,
                        .max_clauses = (int)rnd(&r, 40), .max_depth = (int)rnd(&r, 6)};
        check_fixpoint(q, len, &o, &n_ok);
    }
    cr_expect_gt(n_ok, 100, "some random inputs parse (%d)", n_ok);
}

/* Mutations of valid queries reach the error paths deep inside a parse. */
Test(qparse, mutated_queries_never_crash)
{
    static const char *const noise[] = {"(", ")", "\"", "\\", ":", "*", "^", "~", "-", "+",
                                        "!", "&&", "||", " AND ", " OR ", "NOT ", "^x", "~9",
                                        "\xff", "[", " ", "*:*"};
    Rng r = {0x2545F4914F6CDD1Dull};
    int n_ok = 0;
    for (int i = 0; i < 20000; i++) {
        QrBuf b, m;
        qr_buf_init(&b);
        qr_buf_init(&m);
        gen_or(&r, &b, 0);
        size_t at = rnd(&r, (uint32_t)b.len + 1);
        qr_buf_append(&m, b.data, at);
        put(&m, PICK(&r, noise));
        size_t skip = at < b.len ? rnd(&r, 2) : 0; /* insert, or replace one byte */
        qr_buf_append(&m, b.data + at + skip, b.len - at - skip);
        check_fixpoint((const char *)m.data, m.len, NULL, &n_ok);
        qr_buf_free(&b);
        qr_buf_free(&m);
    }
}
