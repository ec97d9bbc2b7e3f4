/*
 * qparse.h — the text query language: parser, normalized tree, canonical form.
 *
 * Layer: query/.  Calls the store/ base kit only (error, mem, buf).  The tree
 * is raw text: the planner analyzes each leaf with its field's analyzer.
 *
 * The language is documented for users in docs/query-language.md (grammar,
 * semantics, errors, limits); this header is the contract for callers.
 *
 * The tree.  qparse() returns a normalized tree:
 *   - leaves are QN_TERM, QN_PHRASE, QN_PREFIX, QN_FUZZY and QN_ALL (`*:*`,
 *     or added for a pure-negative group);
 *   - every QN_BOOL has >= 2 kids, and each kid says how it combines
 *     (`occur`): AND operands are QO_MUST, OR operands and bare clauses under
 *     the default OR are QO_SHOULD, `-x` / `NOT x` / `!x` are QO_MUST_NOT,
 *     `+x` is QO_MUST;
 *   - a bool has at least one QO_MUST or QO_SHOULD kid: a group that would
 *     only exclude gets a QO_MUST QN_ALL kid first (`-a` = all docs minus a);
 *   - nested bools are flattened where that keeps the meaning: a SHOULD
 *     bool of only SHOULD kids and boost 1 into its parent, a MUST bool that
 *     has a MUST kid and boost 1 into its parent, a MUST_NOT bool of only
 *     SHOULD kids as MUST_NOT kids (De Morgan); a redundant MUST QN_ALL is
 *     dropped, and a one-kid bool is replaced by its kid;
 *   - a field scope on a group is pushed down onto the leaves that name no
 *     field of their own, so `field` is only ever set on leaves.
 * Matching: a doc matches a bool when it matches every MUST kid, no
 * MUST_NOT kid, and at least `min_should` SHOULD kids.  The root's `occur`
 * is QO_MUST.
 *
 * Memory: every node, kid array and string comes from the caller's arena and
 * lives as long as it does.  On error nothing is returned (`*out` is left
 * untouched); what was allocated stays in the arena until it is reset.
 */
#ifndef QR_QPARSE_H
#define QR_QPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/buf.h"
#include "store/error.h"
#include "store/mem.h"

/* Limits.  A QParseOpts value <= 0 selects the default. */
#define QPARSE_DEFAULT_MAX_CLAUSES 1024 /* leaf clauses (terms, phrases, *:*, ...) */
#define QPARSE_DEFAULT_MAX_DEPTH 32     /* nesting of parentheses */
#define QPARSE_MAX_DEPTH_LIMIT 256      /* larger max_depth requests are clamped */
#define QPARSE_MAX_SLOP 10000           /* "a b"~N */
#define QPARSE_MAX_EDITS 2              /* term~N */
#define QPARSE_DEFAULT_EDITS 2          /* term~ */
#define QPARSE_MIN_BOOST 0.0001         /* a boost is 0 or in [min, max] */
#define QPARSE_MAX_BOOST 1000000.0

typedef enum {
    QN_TERM,   /* text = the term */
    QN_PHRASE, /* text = the words between the quotes; slop */
    QN_PREFIX, /* text = the prefix, without the '*' */
    QN_FUZZY,  /* text = the term; edits */
    QN_BOOL,   /* kids, min_should */
    QN_ALL     /* matches every doc (`*:*`, pure-negative groups) */
} QNodeKind;

typedef enum { QO_SHOULD, QO_MUST, QO_MUST_NOT } QOccur;

typedef struct QNode QNode;
struct QNode {
    QNodeKind kind;
    QOccur occur;       /* how this node combines into its parent bool */
    const char *field;  /* borrows (arena): NUL-terminated; NULL = the default fields */
    const char *text;   /* borrows (arena): raw (unanalyzed) text, escapes resolved,
                           NUL-terminated; NULL for QN_BOOL and QN_ALL */
    uint32_t text_len;  /* bytes of text (no NUL bytes inside: the parser rejects them) */
    int slop;           /* QN_PHRASE: max position moves, 0 = exact */
    int edits;          /* QN_FUZZY: 0..QPARSE_MAX_EDITS */
    float boost;        /* 1.0 default; 0 or in [QPARSE_MIN_BOOST, QPARSE_MAX_BOOST] */
    uint32_t pos;       /* byte offset of the clause in the query (its field name, its
                           first byte, or its '('), for errors and highlighting */
    QNode **kids;       /* borrows (arena): QN_BOOL kids, in query order */
    int n_kids;         /* >= 2 for QN_BOOL, 0 otherwise */
    int min_should;     /* QN_BOOL: SHOULD kids that must match: 1 when there is no
                           MUST kid (and some SHOULD kid), 0 when a MUST kid exists */
};

typedef struct QParseOpts {
    bool default_and;          /* implicit operator between clauses: AND (true) or OR */
    const char *const *fields; /* borrows: known field names, NULL-terminated; NULL
                                  accepts any field name */
    int max_clauses;           /* leaf clauses, <= 0: QPARSE_DEFAULT_MAX_CLAUSES */
    int max_depth;             /* parentheses nesting, <= 0: QPARSE_DEFAULT_MAX_DEPTH,
                                  clamped to QPARSE_MAX_DEPTH_LIMIT */
} QParseOpts;

/*
 * Parse the query q[0, len) (any bytes; it need not be NUL-terminated) into a
 * normalized tree allocated from `arena`.  opts may be NULL (defaults: OR,
 * any field, default limits).  On success *out is the root and 0 is returned.
 *
 * Errors (err gets a PostgreSQL-style message, often a detail or hint, and
 * the byte offset / 1-based line / column of the offending text):
 *   QR_ESYNTAX  empty query, unbalanced parentheses or quotes, dangling
 *               operator, missing field name or value, unknown field, bad
 *               boost / slop / edit distance, lone or inner '*', misplaced
 *               '^' or '~', reserved character ([ ] { } at a clause start),
 *               backslash at the end
 *   QR_EINVAL   bytes that are not UTF-8 (NUL included), bad arguments
 *   QR_ELIMIT   more than max_clauses leaves, parentheses nested deeper than
 *               max_depth, a query of 4 GiB or more, the arena's byte cap
 *   QR_ENOMEM   allocation failed
 * Cost: O(len) time and arena bytes, plus O(leaves x depth) for flattening;
 * recursion is bounded by max_depth.
 */
int qparse(QrArena *arena, const char *q, size_t len, const QParseOpts *opts, QNode **out,
           QrError *err);

/*
 * Append the canonical text of `n` to `out`, e.g.
 *   (+title:rust^2 -"a b"~2 comp* dat~1)
 * A bool prints as its kids in parentheses, each prefixed with '+' (MUST),
 * '-' (MUST_NOT) or nothing (SHOULD); the root prints without prefix.
 * QN_ALL prints as `*:*`, fuzzy edits and non-zero slop always explicitly,
 * boosts other than 1 as the shortest decimal that reads back as the same
 * float, and special characters are backslash-escaped.  Parsed again with
 * the default OR operator, the text gives the same tree, so format -> parse
 * -> format is a fixpoint (the text may nest up to 2 x depth + 2 levels).
 * Returns 0, or QR_ENOMEM when the buffer could not grow, or QR_EINVAL for a
 * tree deeper than 4 x QPARSE_MAX_DEPTH_LIMIT or with NULL kids.
 */
int qnode_format(const QNode *n, QrBuf *out);

/* Append text so that the parser reads it back as one bare term with exactly
 * these bytes (backslash before every special character, and before a
 * leading + - ! or an operator word).  For callers that build queries from
 * user values: "title:" + escaped value. */
void qparse_escape_term(const char *s, size_t n, QrBuf *out);

/* "term", "phrase", "prefix", "fuzzy", "bool", "all" (for EXPLAIN). */
const char *qnode_kind_name(QNodeKind kind);

#endif
