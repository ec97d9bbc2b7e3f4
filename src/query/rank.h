/*
 * rank.h — ranking expressions: a search's order computed from its BM25
 * score and numeric columns ("score * log(1 + views)"), and the interval
 * bound that lets a ranked search stop early (search.c).
 *
 * Layer: query/.  Calls store/schema.h and the base kit.
 *
 * Grammar (function names and `score` in any case, field names as in the
 * schema, whitespace anywhere between tokens):
 *
 *   expr    := term (('+' | '-') term)*
 *   term    := unary (('*' | '/') unary)*
 *   unary   := '-' unary | primary
 *   primary := number | 'score' | field | func '(' expr (',' expr)? ')' | '(' expr ')'
 *   func    := log (natural) | log10 | log1p | sqrt | exp | abs   (one argument)
 *            | min | max                                          (two arguments)
 *
 * Fields are int, float, bool (0 / 1) or timestamp (seconds since 1970)
 * columns; a NULL value reads as 0.  Arithmetic is IEEE double: a result
 * that is NaN (sqrt of a negative, 0 / 0) ranks below every number, as does
 * -infinity (log 0).
 *
 * Bounds: rank_bound evaluates the expression over intervals (score in
 * [lo, hi], each field in its interval) and returns an interval that holds
 * every value the expression takes there (NaN aside) -- or [-inf, +inf]
 * when it cannot say (a division by an interval holding 0).  Monotone
 * rounding keeps the bound true for the computed doubles, not only for the
 * real numbers.
 */
#ifndef QR_RANK_H
#define QR_RANK_H

#include <stdbool.h>

#include "store/mem.h"
#include "store/error.h"
#include "store/schema.h"

#define RANK_MAX_FIELDS 8
#define RANK_MAX_NODES 128

typedef struct RankExpr RankExpr;

/* Compile `text` against the schema into arena memory.  QR_ESYNTAX with the
 * 0-based offset in err->offset (shown 1-based), QR_ENOTFOUND for an unknown field,
 * QR_ETYPE for a field that is not numeric, QR_ELIMIT past RANK_MAX_NODES
 * nodes or RANK_MAX_FIELDS fields. */
int rank_parse(const QrSchema *schema, const char *text, QrArena *arena, RankExpr **out,
               QrError *err);
/* The fields the expression reads (schema indexes, distinct), n <= RANK_MAX_FIELDS. */
int rank_n_fields(const RankExpr *e);
int rank_field(const RankExpr *e, int i);
/* Does the value depend on the score? */
bool rank_uses_score(const RankExpr *e);
/* The value for one document: vals[i] is field rank_field(e, i) (NULL as 0).
 * NaN and -inf are returned as -INFINITY (ranks last). */
double rank_eval(const RankExpr *e, double score, const double *vals);
/* The interval of the value with score in [s_lo, s_hi] and field i in
 * [lo[i], hi[i]]: *out_hi is an upper bound of every rank_eval there. */
void rank_bound(const RankExpr *e, double s_lo, double s_hi, const double *lo, const double *hi,
                double *out_lo, double *out_hi);

#endif
