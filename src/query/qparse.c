/*
 * qparse.c — the text query language: lexer, precedence parser, normalizer
 * and canonical printer.
 *
 * Layer: query/.  Calls the store/ base kit (error, mem, buf) and libc.
 *
 * Pipeline.  The whole input is first checked to be UTF-8 without NUL bytes,
 * so later stages can index bytes freely and positions are meaningful.  A
 * lexer hands out one token of lookahead; it is context-sensitive in one
 * place only: right after `field:` (value mode) a leading + - ! and the
 * words AND/OR/NOT are plain term text.  The parser is recursive descent
 * with one function per precedence level:
 *
 *     or_expr  = and_expr { ("OR" | "||" | <implicit, default OR>) and_expr }
 *     and_expr = unary    { ("AND" | "&&" | <implicit, default AND>) unary }
 *     unary    = [ "+" | "-" | "NOT" | "!" ] primary
 *     primary  = [ field ":" ] ( word | phrase | "(" or_expr ")" ) { "^" n | "~" n }
 *              | "*:*" { "^" n }
 *
 * Recursion happens only at "(", which counts depth against max_depth, so
 * stack use is bounded whatever the input.  Every loop consumes a token per
 * turn, so the parser ends.
 *
 * While climbing, a clause's prefix operator travels in node->occur (SHOULD
 * = no operator).  make_bool() turns a chain into a QN_BOOL and normalizes
 * it (flattening, QN_ALL for pure-negative groups, one-kid unwrapping); the
 * rules are local and idempotent, which is what makes the canonical text a
 * fixpoint of format -> parse -> format.
 *
 * Errors go through fail(): the first one wins, carries the byte offset,
 * line and column, and turns every caller into an early `return NULL`.
 */
#include "query/qparse.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- tokens ---- */

typedef enum {
    QT_EOF,
    QT_LPAREN,
    QT_RPAREN,
    QT_AND,    /* AND && */
    QT_OR,     /* OR || */
    QT_NOT,    /* NOT ! */
    QT_PLUS,   /* +, must touch its clause */
    QT_MINUS,  /* -, must touch its clause */
    QT_FIELD,  /* name: (text = name) */
    QT_WORD,   /* bare term (text) */
    QT_PREFIX, /* term* (text without the star) */
    QT_PHRASE, /* "..." (text between the quotes) */
    QT_ALL,    /* *:* */
    QT_CARET,  /* ^ and the run after it: the boost */
    QT_TILDE   /* ~ and the run after it: slop or edits */
} QTokKind;

typedef struct QTok {
    QTokKind kind;
    uint32_t pos;      /* first byte in the query */
    uint32_t end;      /* one past the last byte */
    const char *text;  /* borrows (arena): resolved text of FIELD/WORD/PREFIX/PHRASE */
    uint32_t text_len;
} QTok;

/* Invariant: rc != 0 once an error was reported; every function then
 * returns NULL / false without looking at tok again. */
typedef struct QParser {
    QrArena *arena;            /* borrows */
    const char *q;             /* borrows: the query */
    uint32_t len;
    bool default_and;
    const char *const *fields; /* borrows: known fields or NULL */
    int max_clauses;
    int max_depth;
    int n_clauses;             /* leaves made so far */
    QTok tok;                  /* lookahead */
    uint32_t prev_end;         /* end of the last consumed token */
    int rc;                    /* first error code, 0 while none */
    bool own_err;              /* err was clean when we set it: detail/hint are ours */
    QrError *err;              /* borrows, may be NULL */
} QParser;

/* ---- errors ---- */

/* 1-based line and column (in code points) of byte `off`; q[0, off) is UTF-8. */
static void where(const char *q, uint32_t off, int64_t *line, int32_t *col)
{
    int64_t ln = 1;
    int32_t c = 1;
    for (uint32_t i = 0; i < off; i++) {
        unsigned char b = (unsigned char)q[i];
        if (b == '\n') {
            ln++;
            c = 1;
        } else if ((b & 0xC0) != 0x80) {
            c++;
        }
    }
    *line = ln;
    *col = c;
}

static int fail(QParser *p, QrCode code, uint32_t pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(QParser *p, QrCode code, uint32_t pos, const char *fmt, ...)
{
    if (p->rc)
        return p->rc;
    p->rc = code;
    p->own_err = p->err && p->err->code == QR_OK;
    if (!p->own_err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    qr_error_setv(p->err, code, fmt, ap);
    va_end(ap);
    int64_t line;
    int32_t col;
    where(p->q, pos, &line, &col);
    qr_error_pos(p->err, pos, line, col);
    return code;
}

/* Detail or hint for the error fail() just set (ignored if it was not ours). */
static void fail_note(QParser *p, bool is_hint, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail_note(QParser *p, bool is_hint, const char *fmt, ...)
{
    if (!p->own_err)
        return;
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (is_hint)
        qr_error_hint(p->err, "%s", tmp);
    else
        qr_error_detail(p->err, "%s", tmp);
}

/* Length of q[pos, end) cut to at most 40 bytes on a character boundary,
 * for quoting source text in messages. */
static int show_len(const QParser *p, uint32_t pos, uint32_t end)
{
    uint32_t n = end - pos;
    if (n <= 40)
        return (int)n;
    n = 40;
    while (n > 0 && ((unsigned char)p->q[pos + n] & 0xC0) == 0x80)
        n--;
    return (int)n;
}

/* "syntax error at or near ..." for a token the grammar does not allow here. */
static void *unexpected(QParser *p, const QTok *t)
{
    if (t->kind == QT_EOF) {
        fail(p, QR_ESYNTAX, t->pos, "syntax error at end of input");
        return NULL;
    }
    if (t->kind == QT_RPAREN) { /* every ")" the grammar does not expect closes nothing */
        fail(p, QR_ESYNTAX, t->pos, "unbalanced parentheses: unexpected \")\"");
        fail_note(p, true, "remove it, add \"(\" before it, or escape it as \\)");
        return NULL;
    }
    fail(p, QR_ESYNTAX, t->pos, "syntax error at or near \"%.*s\"", show_len(p, t->pos, t->end),
         p->q + t->pos);
    if (t->kind == QT_CARET || t->kind == QT_TILDE)
        fail_note(p, true, "write a boost or slop right after its clause, once, as in rust^2 or "
                           "\"a b\"~3; escape the character as \\%c to search for it",
                  p->q[t->pos]);
    return NULL;
}

static void *dangling(QParser *p, const QTok *op, bool right)
{
    fail(p, QR_ESYNTAX, op->pos, "dangling operator \"%.*s\"", show_len(p, op->pos, op->end),
         p->q + op->pos);
    fail_note(p, false, "the operator has no clause on its %s", right ? "right" : "left");
    fail_note(p, true, "escape it with a backslash or quote it to search for it as text");
    return NULL;
}

static void *oom(QParser *p)
{
    if (qr_arena_over_cap(p->arena))
        fail(p, QR_ELIMIT, p->tok.pos, "query exceeds the memory limit while parsing");
    else
        fail(p, QR_ENOMEM, p->tok.pos, "out of memory while parsing query");
    return NULL;
}

static void *palloc(QParser *p, size_t n)
{
    void *m = qr_arena_calloc(p->arena, n);
    return m ? m : oom(p);
}

/* ---- UTF-8 check ---- */

/* Offset of the first byte that does not start a valid UTF-8 sequence (NUL
 * counts as invalid), or len.  Rejects overlongs, surrogates, > U+10FFFF. */
static size_t utf8_bad(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        if (c >= 0x01 && c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            if (c == 0xE0)
                lo = 0xA0;
            if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            if (c == 0xF0)
                lo = 0x90;
            if (c == 0xF4)
                hi = 0x8F;
        } else {
            return i;
        }
        if (len - i <= n)
            return i;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return i;
        for (size_t k = 2; k <= n; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return i;
        i += n + 1;
    }
    return len;
}

/* ---- lexer ---- */

static bool is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Does q[j] end a bare word (or the number run after ^ and ~)? */
static bool ends_word(const QParser *p, uint32_t j)
{
    char c = p->q[j];
    if (is_ws((unsigned char)c))
        return true;
    switch (c) {
    case '(': case ')': case '"': case '^': case '~': case ':':
        return true;
    case '&': case '|':
        return j + 1 < p->len && p->q[j + 1] == c;
    default:
        return false;
    }
}

static bool set_tok(QParser *p, QTokKind kind, uint32_t pos, uint32_t end)
{
    p->tok = (QTok){.kind = kind, .pos = pos, .end = end};
    return true;
}

/* Copy raw q[from, to) into the arena with backslash escapes resolved. */
static char *unescape(QParser *p, uint32_t from, uint32_t to, uint32_t *out_len)
{
    char *t = palloc(p, (size_t)(to - from) + 1);
    if (!t)
        return NULL;
    uint32_t n = 0;
    for (uint32_t k = from; k < to; k++) {
        if (p->q[k] == '\\')
            k++;
        t[n++] = p->q[k];
    }
    t[n] = '\0';
    *out_len = n;
    return t;
}

static bool lex_phrase(QParser *p, uint32_t i)
{
    uint32_t j = i + 1;
    while (j < p->len && p->q[j] != '"')
        j += (p->q[j] == '\\' && j + 1 < p->len) ? 2 : 1;
    if (j >= p->len) {
        fail(p, QR_ESYNTAX, i, "unterminated quoted phrase");
        fail_note(p, true, "close the phrase with \", or escape the quote as \\\"");
        return false;
    }
    uint32_t n;
    const char *t = unescape(p, i + 1, j, &n);
    if (!t)
        return false;
    uint32_t k = 0;
    while (k < n && is_ws((unsigned char)t[k]))
        k++;
    if (k == n) {
        fail(p, QR_ESYNTAX, i, "empty phrase");
        return false;
    }
    set_tok(p, QT_PHRASE, i, j + 1);
    p->tok.text = t;
    p->tok.text_len = n;
    return true;
}

static bool is_operator_word(const char *s, uint32_t n, QTokKind *kind)
{
    if (n == 3 && memcmp(s, "AND", 3) == 0)
        *kind = QT_AND;
    else if (n == 2 && memcmp(s, "OR", 2) == 0)
        *kind = QT_OR;
    else if (n == 3 && memcmp(s, "NOT", 3) == 0)
        *kind = QT_NOT;
    else
        return false;
    return true;
}

/* A bare word starting at i: a term, a prefix, a field name or an operator. */
static bool lex_word(QParser *p, uint32_t i, bool value_mode)
{
    uint32_t j = i;
    bool has_escape = false;
    while (j < p->len && !ends_word(p, j)) {
        if (p->q[j] == '\\') {
            if (j + 1 >= p->len) {
                fail(p, QR_ESYNTAX, j, "escape character at end of query");
                fail_note(p, true, "write \\\\ to search for a backslash");
                return false;
            }
            has_escape = true;
            j += 2;
        } else {
            j++;
        }
    }
    bool colon = j < p->len && p->q[j] == ':';
    QTokKind op;
    if (!value_mode && !has_escape && !colon && is_operator_word(p->q + i, j - i, &op))
        return set_tok(p, op, i, j);

    /* unescaped stars: where the first is, and whether one ends the word */
    int stars = 0;
    uint32_t first_star = 0, last_star = 0;
    for (uint32_t k = i; k < j; k++) {
        if (p->q[k] == '\\') {
            k++;
        } else if (p->q[k] == '*') {
            if (!stars++)
                first_star = k;
            last_star = k;
        }
    }
    bool star_last = stars && last_star == j - 1;
    int w = show_len(p, i, j);

    if (colon) {
        if (value_mode) {
            fail(p, QR_ESYNTAX, j, "unexpected \":\" after field value \"%.*s\"", w, p->q + i);
            fail_note(p, true, "escape the colon as \\: or quote the value");
            return false;
        }
        if (stars) {
            fail(p, QR_ESYNTAX, i, "wildcard field names are not supported");
            return false;
        }
        set_tok(p, QT_FIELD, i, j + 1);
        p->tok.text = unescape(p, i, j, &p->tok.text_len);
        return p->tok.text != NULL;
    }
    QTokKind kind = QT_WORD;
    if (stars == 1 && star_last && j - i == 1) {
        fail(p, QR_ESYNTAX, i, "lone \"*\" is not a valid term");
        fail_note(p, true, "use *:* to match every document, or prefix* for a prefix search");
        return false;
    }
    if (stars > 1 || (stars == 1 && !star_last)) {
        fail(p, QR_ESYNTAX, first_star, "unsupported wildcard in \"%.*s\"", w, p->q + i);
        fail_note(p, false, "only a trailing * (a prefix search) is supported");
        fail_note(p, true, "escape the star as \\* to search for the character");
        return false;
    }
    if (stars)
        kind = QT_PREFIX;
    set_tok(p, kind, i, j);
    p->tok.text = unescape(p, i, kind == QT_PREFIX ? j - 1 : j, &p->tok.text_len);
    return p->tok.text != NULL;
}

/* Lex the token at the current position into p->tok.  value_mode: the token
 * right after `field:`. */
static bool lex(QParser *p, bool value_mode)
{
    uint32_t i = p->prev_end;
    while (i < p->len && is_ws((unsigned char)p->q[i]))
        i++;
    if (i >= p->len)
        return set_tok(p, QT_EOF, p->len, p->len);
    const char *q = p->q;
    bool twice = i + 1 < p->len && q[i + 1] == q[i];
    switch (q[i]) {
    case '(':
        return set_tok(p, QT_LPAREN, i, i + 1);
    case ')':
        return set_tok(p, QT_RPAREN, i, i + 1);
    case '"':
        return lex_phrase(p, i);
    case '^':
    case '~': {
        uint32_t j = i + 1;
        while (j < p->len && !ends_word(p, j))
            j++;
        return set_tok(p, q[i] == '^' ? QT_CARET : QT_TILDE, i, j);
    }
    case ':':
        fail(p, QR_ESYNTAX, i, "missing field name before \":\"");
        fail_note(p, true, "escape the colon as \\: to search for it");
        return false;
    case '[': case ']': case '{': case '}':
        fail(p, QR_ESYNTAX, i, "unsupported character \"%c\"", q[i]);
        fail_note(p, false, "range queries are not part of the text query language");
        fail_note(p, true, "escape the character as \\%c or quote the text", q[i]);
        return false;
    case '&':
        if (twice)
            return set_tok(p, QT_AND, i, i + 2);
        break;
    case '|':
        if (twice)
            return set_tok(p, QT_OR, i, i + 2);
        break;
    case '!':
        if (!value_mode)
            return set_tok(p, QT_NOT, i, i + 1);
        break;
    case '+':
        if (!value_mode)
            return set_tok(p, QT_PLUS, i, i + 1);
        break;
    case '-':
        if (!value_mode)
            return set_tok(p, QT_MINUS, i, i + 1);
        break;
    case '*':
        if (!value_mode && p->len - i >= 3 && q[i + 1] == ':' && q[i + 2] == '*' &&
            (i + 3 == p->len || ends_word(p, i + 3)))
            return set_tok(p, QT_ALL, i, i + 3);
        break;
    default:
        break;
    }
    return lex_word(p, i, value_mode);
}

static bool advance(QParser *p, bool value_mode)
{
    p->prev_end = p->tok.end;
    return lex(p, value_mode);
}

/* ---- numbers ---- */

static const double pow10_tab[] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10,
    1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21,
    1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31, 1e32,
};

/* mantissa / 10^frac as a float: the one conversion both the parser and the
 * boost printer use, so printed boosts read back bit-identical. */
static float dec_value(uint64_t mant, int frac) { return (float)((double)mant / pow10_tab[frac]); }

/* Decimal without sign or exponent ("2", "1.5", ".5", "3."), at most 32
 * bytes, locale-independent.  Digits past 19 significant ones are dropped
 * from the fraction; a longer integer part fails. */
static bool dec_parse(const char *s, uint32_t n, float *out)
{
    if (n == 0 || n > 32)
        return false;
    uint64_t mant = 0;
    int sig = 0, frac = 0;
    bool dot = false, digit = false;
    for (uint32_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '.') {
            if (dot)
                return false;
            dot = true;
            continue;
        }
        if (c < '0' || c > '9')
            return false;
        digit = true;
        if (sig >= 19) {
            if (!dot)
                return false;
            continue;
        }
        mant = mant * 10 + (uint64_t)(c - '0');
        if (mant)
            sig++;
        if (dot)
            frac++;
    }
    if (!digit)
        return false;
    *out = dec_value(mant, frac);
    return true;
}

/* Non-negative integer of at most `max`; false on anything else. */
static bool int_parse(const char *s, uint32_t n, int max, int *out)
{
    if (n == 0)
        return false;
    long v = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
        if (v > max)
            v = (long)max + 1; /* saturate: the caller reports "out of range" */
    }
    *out = (int)v;
    return true;
}

static bool boost_ok(float b)
{
    return b == 0.0f || (b >= (float)QPARSE_MIN_BOOST && b <= (float)QPARSE_MAX_BOOST);
}

/* ---- tree building ---- */

typedef struct NodeVec {
    QNode **v; /* borrows (arena) */
    size_t n;
    size_t cap;
} NodeVec;

static bool vec_push(QParser *p, NodeVec *vec, QNode *x)
{
    if (vec->n == vec->cap) {
        size_t cap = vec->cap ? vec->cap * 2 : 8;
        QNode **v = palloc(p, cap * sizeof *v);
        if (!v)
            return false;
        if (vec->n)
            memcpy(v, vec->v, vec->n * sizeof *v);
        vec->v = v;
        vec->cap = cap;
    }
    vec->v[vec->n++] = x;
    return true;
}

static QNode *new_node(QParser *p, QNodeKind kind, uint32_t pos)
{
    QNode *n = palloc(p, sizeof *n);
    if (!n)
        return NULL;
    n->kind = kind;
    n->occur = QO_SHOULD;
    n->boost = 1.0f;
    n->pos = pos;
    return n;
}

/* A leaf clause the user wrote: counts against max_clauses. */
static QNode *new_leaf(QParser *p, QNodeKind kind, uint32_t pos, const QTok *t)
{
    if (++p->n_clauses > p->max_clauses) {
        fail(p, QR_ELIMIT, pos, "too many clauses in query");
        fail_note(p, false, "the limit is %d clauses", p->max_clauses);
        return NULL;
    }
    QNode *n = new_node(p, kind, pos);
    if (n && t) {
        n->text = t->text;
        n->text_len = t->text_len;
    }
    return n;
}

static bool has_occur(const QNode *b, QOccur o)
{
    for (int i = 0; i < b->n_kids; i++)
        if (b->kids[i]->occur == o)
            return true;
    return false;
}

/* May bool k, joining its parent as `o`, be replaced by its kids? */
static bool spliceable(const QNode *k, QOccur o)
{
    if (k->kind != QN_BOOL)
        return false;
    bool only_should = !has_occur(k, QO_MUST) && !has_occur(k, QO_MUST_NOT);
    switch (o) {
    case QO_SHOULD: /* a OR (b OR c) = a OR b OR c */
        return k->boost == 1.0f && only_should;
    case QO_MUST:   /* its SHOULD kids are optional, as they are in a parent with a MUST */
        return k->boost == 1.0f && has_occur(k, QO_MUST);
    case QO_MUST_NOT: /* NOT (b OR c) = NOT b AND NOT c; the boost does not score */
        return only_should;
    }
    return false;
}

static bool add_kid(QParser *p, NodeVec *vec, QNode *k, QOccur o)
{
    if (!spliceable(k, o)) {
        k->occur = o;
        return vec_push(p, vec, k);
    }
    for (int i = 0; i < k->n_kids; i++) {
        QNode *kk = k->kids[i];
        if (!add_kid(p, vec, kk, o == QO_MUST ? kk->occur : o))
            return false;
    }
    return true;
}

/* Combine a chain of clauses (each carrying its prefix operator in occur)
 * into one normalized node.  is_and: the chain was joined by AND, so plain
 * clauses are MUST.  Returns a QN_BOOL, or the single kid left. */
static QNode *make_bool(QParser *p, QNode **kids, size_t n, bool is_and, uint32_t pos)
{
    NodeVec vec = {0};
    for (size_t i = 0; i < n; i++) {
        QOccur o = kids[i]->occur;
        if (is_and && o == QO_SHOULD)
            o = QO_MUST;
        if (!add_kid(p, &vec, kids[i], o))
            return NULL;
    }
    /* "everything AND x" stays as written: x may analyze to no word (a stop
     * word) and drop out, and then the group is everything, not nothing */
    bool positive = false;
    for (size_t i = 0; i < vec.n; i++)
        positive |= vec.v[i]->occur != QO_MUST_NOT;
    if (!positive) { /* only exclusions: start from every doc */
        QNode *all = new_node(p, QN_ALL, pos);
        if (!all || !vec_push(p, &vec, all))
            return NULL;
        memmove(vec.v + 1, vec.v, (vec.n - 1) * sizeof *vec.v);
        all->occur = QO_MUST;
        vec.v[0] = all;
    }
    if (vec.n == 1 && vec.v[0]->occur != QO_MUST_NOT) {
        vec.v[0]->occur = QO_SHOULD; /* a fresh clause: no prefix operator of its own */
        return vec.v[0];
    }
    if (vec.n > (size_t)INT32_MAX) {
        fail(p, QR_ELIMIT, pos, "too many clauses in query");
        return NULL;
    }
    QNode *b = new_node(p, QN_BOOL, pos);
    if (!b)
        return NULL;
    b->kids = vec.v;
    b->n_kids = (int)vec.n;
    b->min_should = has_occur(b, QO_MUST) ? 0 : has_occur(b, QO_SHOULD) ? 1 : 0;
    return b;
}

/* The result of a parenthesized (or top-level) or_expr as one node: a
 * prefix operator inside means nothing on its own, except `-`, which
 * needs every doc to subtract from. */
static QNode *finish_group(QParser *p, QNode *c)
{
    if (c->occur == QO_MUST_NOT)
        return make_bool(p, &c, 1, false, c->pos);
    c->occur = QO_SHOULD;
    return c;
}

static void apply_field(QNode *n, const char *field)
{
    if (n->kind == QN_BOOL) {
        for (int i = 0; i < n->n_kids; i++)
            apply_field(n->kids[i], field);
    } else if (n->kind != QN_ALL && !n->field) {
        n->field = field;
    }
}

static bool known_field(QParser *p, const QTok *f)
{
    if (!p->fields)
        return true;
    for (const char *const *k = p->fields; *k; k++)
        if (strlen(*k) == f->text_len && memcmp(*k, f->text, f->text_len) == 0)
            return true;
    fail(p, QR_ESYNTAX, f->pos, "unknown field \"%s\"", f->text);
    char list[160];
    size_t used = 0;
    list[0] = '\0';
    for (const char *const *k = p->fields; *k && used + 4 < sizeof list; k++) {
        int w = snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", *k);
        if (w < 0 || (size_t)w >= sizeof list - used) {
            memcpy(list + sizeof list - 4, "...", 4);
            break;
        }
        used += (size_t)w;
    }
    fail_note(p, true, "known fields: %s; escape the colon as \\: to search for it", list);
    return false;
}

/* ---- parser ---- */

static QNode *parse_or(QParser *p, int depth);

static bool starts_primary(QTokKind k)
{
    return k == QT_WORD || k == QT_PREFIX || k == QT_PHRASE || k == QT_FIELD ||
           k == QT_LPAREN || k == QT_ALL;
}

static bool starts_clause(QTokKind k)
{
    return starts_primary(k) || k == QT_PLUS || k == QT_MINUS || k == QT_NOT;
}

/* The whole number after '~' (num_len > 0) into *out, at most `max`;
 * `what` names it in messages, `form` says how to write it. */
static bool tilde_number(QParser *p, const QTok *t, int max, const char *what, const char *form,
                         int *out)
{
    const char *num = p->q + t->pos + 1;
    int w = show_len(p, t->pos + 1, t->end);
    if (!int_parse(num, t->end - t->pos - 1, max, out)) {
        fail(p, QR_ESYNTAX, t->pos + 1, "invalid %s \"%.*s\"", what, w, num);
        fail_note(p, false, "%s", form);
        return false;
    }
    if (*out > max) {
        fail(p, QR_ESYNTAX, t->pos + 1, "%s %.*s is out of range", what, w, num);
        fail_note(p, false, "the largest %s is %d", what, max);
        return false;
    }
    return true;
}

static bool apply_tilde(QParser *p, QNode *n, const QTok *t)
{
    bool has_num = t->end > t->pos + 1;
    if (n->kind == QN_TERM) {
        int e = QPARSE_DEFAULT_EDITS;
        if (has_num && !tilde_number(p, t, QPARSE_MAX_EDITS, "edit distance",
                                     "write term~ or term~N with N = 0, 1 or 2", &e))
            return false;
        n->kind = QN_FUZZY;
        n->edits = e;
        return true;
    }
    if (n->kind == QN_PHRASE) {
        if (!has_num) {
            fail(p, QR_ESYNTAX, t->pos + 1, "missing slop after \"~\"");
            fail_note(p, false, "write \"a b\"~N, N being how far the words may move");
            return false;
        }
        return tilde_number(p, t, QPARSE_MAX_SLOP, "slop", "the slop is a whole number such as 2",
                            &n->slop);
    }
    if (n->kind == QN_PREFIX)
        fail(p, QR_ESYNTAX, t->pos, "prefix terms cannot be fuzzy");
    else
        fail(p, QR_ESYNTAX, t->pos, "\"~\" cannot follow a group or *:*");
    fail_note(p, false, "\"~\" makes a term fuzzy or gives a phrase its slop");
    return false;
}

static bool apply_caret(QParser *p, QNode *n, const QTok *t)
{
    const char *num = p->q + t->pos + 1;
    uint32_t num_len = t->end - t->pos - 1;
    int w = show_len(p, t->pos + 1, t->end);
    float b;
    if (!num_len) {
        fail(p, QR_ESYNTAX, t->pos + 1, "missing boost after \"^\"");
        fail_note(p, false, "write clause^N, as in rust^2 or title:rust^0.5");
        return false;
    }
    if (!dec_parse(num, num_len, &b)) {
        fail(p, QR_ESYNTAX, t->pos + 1, "invalid boost \"%.*s\"", w, num);
        fail_note(p, false, "a boost is a decimal number such as 2 or 0.5");
        return false;
    }
    b *= n->boost; /* (a^2)^3 = a^6 */
    if (!boost_ok(b)) {
        fail(p, QR_ESYNTAX, t->pos + 1, "boost %.*s is out of range", w, num);
        fail_note(p, false, "a boost is 0 or between %g and %g, after multiplying nested boosts",
                  QPARSE_MIN_BOOST, QPARSE_MAX_BOOST);
        return false;
    }
    n->boost = b;
    return true;
}

/* '(' or_expr ')' — the only recursion, bounded by max_depth. */
static QNode *parse_group(QParser *p, int depth)
{
    QTok lp = p->tok;
    if (depth + 1 > p->max_depth) {
        fail(p, QR_ELIMIT, lp.pos, "query nesting too deep");
        fail_note(p, false, "at most %d levels of parentheses are allowed", p->max_depth);
        return NULL;
    }
    if (!advance(p, false))
        return NULL;
    if (p->tok.kind == QT_RPAREN) {
        fail(p, QR_ESYNTAX, lp.pos, "empty parentheses");
        return NULL;
    }
    QNode *c = p->tok.kind == QT_EOF ? NULL : parse_or(p, depth + 1);
    if (p->rc)
        return NULL;
    if (p->tok.kind != QT_RPAREN) {
        if (p->tok.kind != QT_EOF)
            return unexpected(p, &p->tok);
        fail(p, QR_ESYNTAX, lp.pos, "unbalanced parentheses: \"(\" is not closed");
        fail_note(p, true, "add \")\" or escape the parenthesis as \\(");
        return NULL;
    }
    QNode *n = finish_group(p, c);
    if (n && n->kind == QN_BOOL)
        n->pos = lp.pos;
    return n;
}

static QNode *parse_primary(QParser *p, int depth)
{
    QTok field = {.kind = QT_EOF};
    if (p->tok.kind == QT_FIELD) {
        field = p->tok;
        if (!known_field(p, &field) || !advance(p, true))
            return NULL;
        QTokKind k = p->tok.kind;
        if (k != QT_WORD && k != QT_PREFIX && k != QT_PHRASE && k != QT_LPAREN) {
            fail(p, QR_ESYNTAX, p->tok.pos, "missing value for field \"%s\"", field.text);
            fail_note(p, true, "write field:term, field:\"a phrase\" or field:(a OR b)");
            return NULL;
        }
    }
    uint32_t pos = field.kind == QT_FIELD ? field.pos : p->tok.pos;
    QNode *n;
    switch (p->tok.kind) {
    case QT_WORD:
        n = new_leaf(p, QN_TERM, pos, &p->tok);
        break;
    case QT_PREFIX:
        n = new_leaf(p, QN_PREFIX, pos, &p->tok);
        break;
    case QT_PHRASE:
        n = new_leaf(p, QN_PHRASE, pos, &p->tok);
        break;
    case QT_ALL:
        n = new_leaf(p, QN_ALL, pos, NULL);
        break;
    case QT_LPAREN:
        n = parse_group(p, depth);
        break;
    default:
        return unexpected(p, &p->tok);
    }
    if (!n || !advance(p, false))
        return NULL;
    bool had_caret = false, had_tilde = false;
    while ((p->tok.kind == QT_CARET || p->tok.kind == QT_TILDE) && p->tok.pos == p->prev_end) {
        bool caret = p->tok.kind == QT_CARET;
        if (caret ? had_caret : had_tilde)
            return unexpected(p, &p->tok);
        if (!(caret ? apply_caret(p, n, &p->tok) : apply_tilde(p, n, &p->tok)))
            return NULL;
        if (caret)
            had_caret = true;
        else
            had_tilde = true;
        if (!advance(p, false))
            return NULL;
    }
    if (field.kind == QT_FIELD)
        apply_field(n, field.text);
    return n;
}

/* [ "+" | "-" | "NOT" | "!" ] primary.  `op` is the binary operator just
 * consumed (NULL for the first operand or an implicit one), for messages. */
static QNode *parse_unary(QParser *p, int depth, const QTok *op)
{
    QTok mod = {.kind = QT_EOF};
    QOccur occ = QO_SHOULD;
    QTokKind k = p->tok.kind;
    if (k == QT_PLUS || k == QT_MINUS || k == QT_NOT) {
        mod = p->tok;
        occ = k == QT_PLUS ? QO_MUST : QO_MUST_NOT;
        if (!advance(p, false))
            return NULL;
        k = p->tok.kind;
        if (k == QT_PLUS || k == QT_MINUS || k == QT_NOT) {
            fail(p, QR_ESYNTAX, p->tok.pos, "operator \"%.*s\" cannot follow \"%.*s\"",
                 show_len(p, p->tok.pos, p->tok.end), p->q + p->tok.pos,
                 show_len(p, mod.pos, mod.end), p->q + mod.pos);
            fail_note(p, true, "use parentheses, as in -(-a), or escape the character");
            return NULL;
        }
        if ((mod.kind == QT_PLUS || mod.kind == QT_MINUS) && p->tok.pos != mod.end)
            return dangling(p, &mod, true);
    }
    if (!starts_primary(k)) {
        if (mod.kind != QT_EOF)
            return dangling(p, &mod, true);
        if (op)
            return dangling(p, op, true);
        if (k == QT_AND || k == QT_OR)
            return dangling(p, &p->tok, false);
        return unexpected(p, &p->tok);
    }
    QNode *n = parse_primary(p, depth);
    if (n)
        n->occur = occ;
    return n;
}

/* One precedence level: operands joined by `op_kind` or, when the default
 * operator is this one, by adjacency. */
static QNode *parse_level(QParser *p, int depth, bool is_and)
{
    QTokKind op_kind = is_and ? QT_AND : QT_OR;
    bool implicit = p->default_and == is_and;
    QNode *first = is_and ? parse_unary(p, depth, NULL) : parse_level(p, depth, true);
    if (!first)
        return NULL;
    NodeVec chain = {0};
    for (;;) {
        bool explicit_op = p->tok.kind == op_kind;
        if (!explicit_op && !(implicit && starts_clause(p->tok.kind)))
            break;
        QTok op = p->tok;
        if (explicit_op && !advance(p, false))
            return NULL;
        if (!chain.n && !vec_push(p, &chain, first))
            return NULL;
        QNode *x = is_and ? parse_unary(p, depth, explicit_op ? &op : NULL)
                          : explicit_op && !starts_clause(p->tok.kind)
                                ? dangling(p, &op, true)
                                : parse_level(p, depth, true);
        if (!x || !vec_push(p, &chain, x))
            return NULL;
    }
    return chain.n ? make_bool(p, chain.v, chain.n, is_and, first->pos) : first;
}

static QNode *parse_or(QParser *p, int depth) { return parse_level(p, depth, false); }

int qparse(QrArena *arena, const char *q, size_t len, const QParseOpts *opts, QNode **out,
           QrError *err)
{
    if (!arena || !out || (!q && len))
        return qr_error_set(err, QR_EINVAL, "invalid argument to qparse");
    if (len >= UINT32_MAX)
        return qr_error_set(err, QR_ELIMIT, "query is too long");
    QParser p = {
        .arena = arena,
        .q = q ? q : "",
        .len = (uint32_t)len,
        .max_clauses = QPARSE_DEFAULT_MAX_CLAUSES,
        .max_depth = QPARSE_DEFAULT_MAX_DEPTH,
        .err = err,
    };
    if (opts) {
        p.default_and = opts->default_and;
        p.fields = opts->fields;
        if (opts->max_clauses > 0)
            p.max_clauses = opts->max_clauses;
        if (opts->max_depth > 0)
            p.max_depth = opts->max_depth < QPARSE_MAX_DEPTH_LIMIT ? opts->max_depth
                                                                   : QPARSE_MAX_DEPTH_LIMIT;
    }
    size_t bad = utf8_bad((const unsigned char *)p.q, len);
    if (bad < len) {
        fail(&p, QR_EINVAL, (uint32_t)bad, "invalid byte sequence for encoding \"UTF8\": 0x%02x",
             (unsigned char)p.q[bad]);
        fail_note(&p, false, "queries are UTF-8 text without NUL bytes");
        return p.rc;
    }
    if (!lex(&p, false))
        return p.rc;
    if (p.tok.kind == QT_EOF)
        return fail(&p, QR_ESYNTAX, 0, "empty query");
    QNode *c = parse_or(&p, 0);
    if (c && p.tok.kind != QT_EOF)
        unexpected(&p, &p.tok);
    QNode *root = p.rc ? NULL : finish_group(&p, c);
    if (!root)
        return p.rc ? p.rc : qr_error_set(err, QR_EINTERNAL, "qparse produced no tree");
    root->occur = QO_MUST;
    *out = root;
    return QR_OK;
}

/* ---- canonical form ---- */

void qparse_escape_term(const char *s, size_t n, QrBuf *out)
{
    QTokKind op;
    bool is_op = n <= 3 && is_operator_word(s, (uint32_t)n, &op);
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool esc = is_ws((unsigned char)c) || (c && strchr("()\"^~:*\\[]{}", c)) ||
                   (i == 0 && (is_op || c == '+' || c == '-' || c == '!')) ||
                   ((c == '&' || c == '|') && i + 1 < n && s[i + 1] == c);
        if (esc)
            qr_buf_putc(out, '\\');
        qr_buf_putc(out, (uint8_t)c);
    }
}

static void put_phrase(QrBuf *out, const char *s, size_t n)
{
    qr_buf_putc(out, '"');
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\')
            qr_buf_putc(out, '\\');
        qr_buf_putc(out, (uint8_t)s[i]);
    }
    qr_buf_putc(out, '"');
}

static void put_uint(QrBuf *out, uint64_t v, int min_digits)
{
    char d[24];
    int n = 0;
    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v || n < min_digits);
    while (n)
        qr_buf_putc(out, (uint8_t)d[--n]);
}

/* The shortest decimal (no exponent, locale-independent) that dec_parse
 * reads back as exactly `f`. */
static void put_boost(QrBuf *out, float f)
{
    if (!(f >= 0.0f && f <= QPARSE_MAX_BOOST)) { /* not from the parser: show it as is */
        qr_buf_printf(out, "%.9g", (double)f);
        return;
    }
    uint64_t mant;
    int d = 0;
    for (;; d++) { /* 12 decimals give >= 9 significant digits from QPARSE_MIN_BOOST on */
        mant = (uint64_t)((double)f * pow10_tab[d] + 0.5);
        if (d == 12 || dec_value(mant, d) == f)
            break;
    }
    uint64_t unit = (uint64_t)pow10_tab[d];
    put_uint(out, mant / unit, 1);
    if (d) {
        qr_buf_putc(out, '.');
        put_uint(out, mant % unit, d);
    }
}

static int format_node(const QNode *n, QrBuf *out, bool is_root, int depth)
{
    if (!n || depth > 4 * QPARSE_MAX_DEPTH_LIMIT)
        return QR_EINVAL;
    if (!is_root && n->occur != QO_SHOULD)
        qr_buf_putc(out, n->occur == QO_MUST ? '+' : '-');
    if (n->field && n->kind != QN_BOOL && n->kind != QN_ALL) {
        qparse_escape_term(n->field, strlen(n->field), out);
        qr_buf_putc(out, ':');
    }
    const char *text = n->text ? n->text : "";
    switch (n->kind) {
    case QN_TERM:
        qparse_escape_term(text, n->text_len, out);
        break;
    case QN_PREFIX:
        qparse_escape_term(text, n->text_len, out);
        qr_buf_putc(out, '*');
        break;
    case QN_FUZZY:
        qparse_escape_term(text, n->text_len, out);
        qr_buf_putc(out, '~');
        put_uint(out, (uint64_t)(n->edits < 0 ? 0 : n->edits), 1);
        break;
    case QN_PHRASE:
        put_phrase(out, text, n->text_len);
        if (n->slop > 0) {
            qr_buf_putc(out, '~');
            put_uint(out, (uint64_t)n->slop, 1);
        }
        break;
    case QN_ALL:
        qr_buf_append(out, "*:*", 3);
        break;
    case QN_BOOL:
        qr_buf_putc(out, '(');
        for (int i = 0; i < n->n_kids; i++) {
            if (i)
                qr_buf_putc(out, ' ');
            int rc = format_node(n->kids ? n->kids[i] : NULL, out, false, depth + 1);
            if (rc)
                return rc;
        }
        qr_buf_putc(out, ')');
        break;
    }
    if (n->boost != 1.0f) {
        qr_buf_putc(out, '^');
        put_boost(out, n->boost);
    }
    return QR_OK;
}

int qnode_format(const QNode *n, QrBuf *out)
{
    int rc = format_node(n, out, true, 0);
    if (rc)
        return rc;
    return qr_buf_ok(out) ? QR_OK : QR_ENOMEM;
}

const char *qnode_kind_name(QNodeKind kind)
{
    static const char *const names[] = {
        [QN_TERM] = "term", [QN_PHRASE] = "phrase", [QN_PREFIX] = "prefix",
        [QN_FUZZY] = "fuzzy", [QN_BOOL] = "bool",   [QN_ALL] = "all",
    };
    return (unsigned)kind < sizeof names / sizeof *names ? names[kind] : "unknown";
}
