/*
 * sql_numeric.c — numeric as an exact decimal: parsing and printing, + - *
 * / % with PostgreSQL's result scales (the sum's and difference's is the
 * larger input scale, the product's the sum of the scales, the quotient's
 * from select_div_scale: at least 16 significant digits), comparison,
 * round / trunc / ceil / floor half away from zero, numeric(p, s) typmods
 * (22003 "numeric field overflow"), conversions from integers and floats.
 *
 * Layer: query/.  Calls sql_value.c and the base kit.
 *
 * A numeric value is its decimal text in SqlValue.u.s ("-12.50": the text
 * keeps the scale, as PostgreSQL's dscale); "NaN", "Infinity", "-Infinity".
 * Arithmetic works on Dec: base-10 digits, most significant first, and a
 * scale (digits after the point), in the arena; inputs of more than
 * NUM_MAX_DIGITS digits are 22003, as PostgreSQL says past its limits.
 */
#include "query/sql_int.h"
#include "store/decimal.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NUM_MAX_DIGITS 20000   /* digits of one value (PostgreSQL: 131072 + 16383) */
#define NUM_MIN_SIG 16         /* NUMERIC_MIN_SIG_DIGITS */
#define NUM_MAX_SCALE 1000     /* NUMERIC_MAX_DISPLAY_SCALE */

typedef struct Dec {
    char special;              /* 0, 'n' NaN, 'p' +Infinity, 'm' -Infinity */
    bool neg;
    int nd;                    /* digits */
    int scale;                 /* of them, after the point */
    uint8_t *d;                /* arena */
} Dec;

static int nomem(SqlCtx *cx)
{
    return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
}

static int too_big(SqlCtx *cx)
{
    return sql_err_at(cx, -1, QR_EINVAL, "22003", "value overflows numeric format");
}

static uint8_t *digits(SqlCtx *cx, size_t n) { return qr_arena_calloc(cx->arena, n ? n : 1); }

/* ---- text ---- */

static int dec_parse(SqlCtx *cx, const char *s, size_t n, int loc, Dec *out)
{
    memset(out, 0, sizeof *out);
    DecLex x;
    if (dec_lex(s, n, &x) < 0)
        return sql_err_at(cx, loc, QR_EINVAL, "22P02",
                          "invalid input syntax for type numeric: \"%.*s\"", (int)(n > 80 ? 80 : n),
                          s);
    if (x.special) {
        out->special = x.special;
        return QR_OK;
    }
    const char *ip = x.ip, *fp = x.fp;
    size_t il = x.il, fl = x.fl;
    bool neg = x.neg;
    long ex = x.exp;
    if (il + fl > NUM_MAX_DIGITS)
        return too_big(cx);
    /* digits as written, the point moved by the exponent */
    long scale = (long)fl - ex;
    size_t extra = scale < 0 ? (size_t)-scale : 0; /* zeros appended (1e3) */
    out->d = digits(cx, il + fl + extra);
    if (!out->d)
        return nomem(cx);
    int k = 0;
    for (size_t i = 0; i < il; i++)
        out->d[k++] = (uint8_t)(ip[i] - '0');
    for (size_t i = 0; i < fl; i++)
        out->d[k++] = (uint8_t)(fp[i] - '0');
    for (size_t i = 0; i < extra; i++)
        out->d[k++] = 0;
    out->nd = k;
    out->scale = scale < 0 ? 0 : (int)scale;
    out->neg = neg;
    return QR_OK;
}

static bool is_zero(const Dec *a)
{
    for (int i = 0; i < a->nd; i++)
        if (a->d[i])
            return false;
    return true;
}

/* Text with exactly a->scale fraction digits. */
static int dec_text(SqlCtx *cx, const Dec *a, SqlValue *out)
{
    const char *sp = a->special == 'n' ? "NaN" : a->special == 'p' ? "Infinity"
                     : a->special == 'm' ? "-Infinity" : NULL;
    if (sp) {
        *out = sqlv_text(sp, strlen(sp));
        out->type = QR_SQL_NUMERIC;
        return QR_OK;
    }
    int ip = a->nd - a->scale; /* integer digits (may be <= 0) */
    int first = 0;
    while (first < ip - 1 && a->d[first] == 0)
        first++;
    size_t len = (size_t)(ip > 0 ? ip - first : 1) + (a->scale ? (size_t)a->scale + 1 : 0) + 2;
    char *s = qr_arena_alloc(cx->arena, len);
    if (!s)
        return nomem(cx);
    size_t k = 0;
    if (a->neg && !is_zero(a))
        s[k++] = '-';
    if (ip > 0)
        for (int i = first; i < ip; i++)
            s[k++] = (char)('0' + a->d[i]);
    else
        s[k++] = '0';
    if (a->scale) {
        s[k++] = '.';
        for (int i = 0; i < a->scale; i++) {
            int at = ip + i;
            s[k++] = (char)('0' + (at >= 0 ? a->d[at] : 0));
        }
    }
    s[k] = 0;
    *out = sqlv_text(s, k);
    out->type = QR_SQL_NUMERIC;
    return QR_OK;
}

/* ---- magnitudes ---- */

/* The digit of a at decimal position `pos` (0: units, 1: tens, -1: tenths). */
static int dig(const Dec *a, int pos)
{
    int i = a->nd - a->scale - 1 - pos;
    return i >= 0 && i < a->nd ? a->d[i] : 0;
}

/* Position of the most significant non-zero digit, INT32_MIN for zero. */
static int top(const Dec *a)
{
    for (int i = 0; i < a->nd; i++)
        if (a->d[i])
            return a->nd - a->scale - 1 - i;
    return INT32_MIN;
}

static int cmp_abs(const Dec *a, const Dec *b)
{
    int ta = top(a), tb = top(b);
    if (ta != tb)
        return ta > tb ? 1 : -1;
    if (ta == INT32_MIN)
        return 0;
    int lo = -(a->scale > b->scale ? a->scale : b->scale);
    for (int p = ta; p >= lo; p--) {
        int x = dig(a, p), y = dig(b, p);
        if (x != y)
            return x > y ? 1 : -1;
    }
    return 0;
}

/* |a| + |b| or |a| - |b| (|a| >= |b|), at scale max(sa, sb). */
static int add_abs(SqlCtx *cx, const Dec *a, const Dec *b, bool sub, Dec *r)
{
    int scale = a->scale > b->scale ? a->scale : b->scale;
    int ia = a->nd - a->scale, ib = b->nd - b->scale;
    int ip = (ia > ib ? ia : ib) + 1;
    if (ip < 1)
        ip = 1;
    int nd = ip + scale;
    if (nd > NUM_MAX_DIGITS)
        return too_big(cx);
    uint8_t *d = digits(cx, (size_t)nd);
    if (!d)
        return nomem(cx);
    int carry = 0;
    for (int i = 0; i < nd; i++) {
        int pos = i - scale; /* from the lowest digit up */
        int x = dig(a, pos) + (sub ? -dig(b, pos) : dig(b, pos)) + carry;
        carry = 0;
        if (x < 0) {
            x += 10;
            carry = -1;
        } else if (x >= 10) {
            x -= 10;
            carry = 1;
        }
        d[nd - 1 - i] = (uint8_t)x;
    }
    r->special = 0;
    r->d = d;
    r->nd = nd;
    r->scale = scale;
    return QR_OK;
}

static int dec_add(SqlCtx *cx, const Dec *a, const Dec *b, bool sub, Dec *r)
{
    bool bneg = sub ? !b->neg : b->neg;
    int rc;
    if (a->neg == bneg) {
        rc = add_abs(cx, a, b, false, r);
        r->neg = a->neg;
    } else if (cmp_abs(a, b) >= 0) {
        rc = add_abs(cx, a, b, true, r);
        r->neg = a->neg;
    } else {
        rc = add_abs(cx, b, a, true, r);
        r->neg = bneg;
    }
    return rc;
}

static int dec_mul(SqlCtx *cx, const Dec *a, const Dec *b, Dec *r)
{
    int nd = a->nd + b->nd;
    if (nd > NUM_MAX_DIGITS)
        return too_big(cx);
    uint32_t *acc = qr_arena_calloc(cx->arena, (size_t)(nd ? nd : 1) * sizeof *acc);
    uint8_t *d = digits(cx, (size_t)nd);
    if (!acc || !d)
        return nomem(cx);
    for (int i = a->nd - 1; i >= 0; i--) {
        if ((i & 63) == 63 && sql_check(cx)) /* long operands: cancel and the deadline */
            return cx->err->code;
        if (!a->d[i])
            continue;
        for (int j = b->nd - 1; j >= 0; j--)
            acc[i + j + 1] += (uint32_t)a->d[i] * b->d[j];
        /* keep the accumulators small */
        for (int k = nd - 1; k > 0; k--) {
            acc[k - 1] += acc[k] / 10;
            acc[k] %= 10;
        }
    }
    for (int k = 0; k < nd; k++)
        d[k] = (uint8_t)acc[k];
    r->special = 0;
    r->neg = a->neg != b->neg;
    r->d = d;
    r->nd = nd;
    r->scale = a->scale + b->scale;
    return QR_OK;
}

/* a rounded (half away from zero) or truncated to `scale` fraction digits
 * (negative: to tens, hundreds...). */
static int dec_round(SqlCtx *cx, const Dec *a, int scale, bool trunc_only, Dec *r)
{
    if (a->special) {
        *r = *a;
        return QR_OK;
    }
    int keep = scale < 0 ? 0 : scale;
    int ip = a->nd - a->scale;
    int nd = (ip > 0 ? ip : 0) + 1 + keep;
    if (nd > NUM_MAX_DIGITS)
        return too_big(cx);
    uint8_t *d = digits(cx, (size_t)nd);
    if (!d)
        return nomem(cx);
    /* digits at positions [nd - 2 - keep, -keep]: copied, the rest zero */
    for (int i = 0; i < nd; i++) {
        int pos = nd - 1 - i - keep; /* i = 0 is the highest */
        d[i] = pos >= -scale ? (uint8_t)dig(a, pos) : 0;
    }
    if (!trunc_only && dig(a, -scale - 1) >= 5) { /* carry from the position below the kept ones */
        int i = nd - 1 - (scale < 0 ? -scale : 0);
        while (i >= 0) {
            if (d[i] < 9) {
                d[i]++;
                break;
            }
            d[i--] = 0;
        }
    }
    r->special = 0;
    r->neg = a->neg;
    r->d = d;
    r->nd = nd;
    r->scale = keep;
    return QR_OK;
}

/* PostgreSQL's select_div_scale, from base-10000 weights. */
static int div_scale(const Dec *a, const Dec *b)
{
    int ta = top(a), tb = top(b);
    /* base-10000 weight of the top digit: floor(pos / 4); its group's value */
    int wa = ta == INT32_MIN ? 0 : (ta >= 0 ? ta / 4 : -((-ta + 3) / 4));
    int wb = tb == INT32_MIN ? 0 : (tb >= 0 ? tb / 4 : -((-tb + 3) / 4));
    int ga = 0, gb = 0;
    for (int p = wa * 4 + 3; p >= wa * 4; p--)
        ga = ga * 10 + (ta == INT32_MIN ? 0 : dig(a, p));
    for (int p = wb * 4 + 3; p >= wb * 4; p--)
        gb = gb * 10 + (tb == INT32_MIN ? 0 : dig(b, p));
    int qw = wa - wb;
    if (ga <= gb)
        qw--;
    int rs = NUM_MIN_SIG - qw * 4;
    if (rs < a->scale)
        rs = a->scale;
    if (rs < b->scale)
        rs = b->scale;
    if (rs < 0)
        rs = 0;
    return rs > NUM_MAX_SCALE ? NUM_MAX_SCALE : rs;
}

/* a / b to `scale` digits, rounded (or truncated); 22012 on zero. */
static int dec_div(SqlCtx *cx, const Dec *a, const Dec *b, int scale, bool trunc_only, Dec *r)
{
    if (is_zero(b))
        return sql_err_at(cx, -1, QR_EINVAL, "22012", "division by zero");
    /* integers A = a * 10^(sa'), B = b * 10^sb: quotient digits by long division
     * of A * 10^(scale + 1 + sb - sa) by B */
    int shift = scale + 1 + b->scale - a->scale;
    int na = a->nd + (shift > 0 ? shift : 0);
    if (na > NUM_MAX_DIGITS + NUM_MAX_SCALE)
        return too_big(cx);
    uint8_t *num = digits(cx, (size_t)na), *q = digits(cx, (size_t)na);
    int nbd = b->nd;
    uint8_t *rem = digits(cx, (size_t)nbd + 2);
    if (!num || !q || !rem)
        return nomem(cx);
    int drop = shift < 0 ? -shift : 0; /* a's lowest digits beyond what matters */
    int nn = 0;
    for (int i = 0; i < a->nd - drop; i++)
        num[nn++] = a->d[i];
    for (int i = 0; i < shift; i++)
        num[nn++] = 0;
    /* long division, the remainder kept in nbd + 1 digits */
    int rl = nbd + 1;
    memset(rem, 0, (size_t)rl);
    for (int i = 0; i < nn; i++) {
        if ((i & 63) == 63 && sql_check(cx)) /* long operands: cancel and the deadline */
            return cx->err->code;
        memmove(rem, rem + 1, (size_t)rl - 1);
        rem[rl - 1] = num[i];
        int qd = 0;
        for (;;) { /* rem >= b? (b padded to rl digits) */
            int c = 0;
            for (int k = 0; k < rl && !c; k++) {
                int bk = k - (rl - nbd) >= 0 ? b->d[k - (rl - nbd)] : 0;
                c = rem[k] - bk;
            }
            if (c < 0)
                break;
            int borrow = 0;
            for (int k = rl - 1; k >= 0; k--) {
                int bk = k - (rl - nbd) >= 0 ? b->d[k - (rl - nbd)] : 0;
                int x = rem[k] - bk - borrow;
                borrow = x < 0;
                rem[k] = (uint8_t)(x < 0 ? x + 10 : x);
            }
            qd++;
        }
        q[i] = (uint8_t)qd;
    }
    Dec full = {.neg = a->neg != b->neg, .nd = nn, .scale = scale + 1, .d = q};
    if (nn < scale + 1) { /* fewer digits than the scale: pad in front */
        uint8_t *p = digits(cx, (size_t)scale + 2);
        if (!p)
            return nomem(cx);
        memcpy(p + (scale + 2 - nn), q, (size_t)nn);
        full.d = p;
        full.nd = scale + 2;
    }
    return dec_round(cx, &full, scale, trunc_only, r);
}

/* ---- the operators ---- */

static int special_result(SqlCtx *cx, int op, const Dec *a, const Dec *b, SqlValue *out)
{
    /* NaN wins; infinities as PostgreSQL's numeric: inf - inf, inf * 0, x / 0 errors */
    Dec r = {0};
    if (a->special == 'n' || b->special == 'n') {
        r.special = 'n';
        return dec_text(cx, &r, out);
    }
    int sa = a->special == 'p' ? 1 : a->special == 'm' ? -1 : 0;
    int sb = b->special == 'p' ? 1 : b->special == 'm' ? -1 : 0;
    int fa = sa ? 0 : is_zero(a) ? 0 : a->neg ? -1 : 1;
    int fb = sb ? 0 : is_zero(b) ? 0 : b->neg ? -1 : 1;
    int s = 0;
    switch (op) {
    case '+':
    case '-': {
        int y = op == '-' ? -sb : sb;
        if (sa && y && sa != y)
            r.special = 'n';
        else
            s = sa ? sa : y;
        break;
    }
    case '*':
        if ((sa && !sb && fb == 0) || (sb && !sa && fa == 0))
            r.special = 'n';
        else
            s = (sa ? sa : fa) * (sb ? sb : fb);
        break;
    case '/':
        if (sb && sa)
            r.special = 'n';
        else if (sb) { /* x / inf = 0 */
            Dec z = {.nd = 1, .d = digits(cx, 1)};
            if (!z.d)
                return nomem(cx);
            return dec_text(cx, &z, out);
        } else if (fb == 0)
            return sql_err_at(cx, -1, QR_EINVAL, "22012", "division by zero");
        else
            s = sa * fb;
        break;
    default: /* % */
        if (sa || fb == 0) {
            if (fb == 0 && !sb)
                return sql_err_at(cx, -1, QR_EINVAL, "22012", "division by zero");
            r.special = 'n';
        } else { /* x % inf = x */
            return dec_text(cx, a, out);
        }
    }
    if (!r.special)
        r.special = s > 0 ? 'p' : 'm';
    return dec_text(cx, &r, out);
}

int sqln_arith(SqlCtx *cx, int op, const SqlValue *x, const SqlValue *y, SqlValue *out)
{
    Dec a, b, r;
    int rc;
    SqlValue tx, ty;
    if ((rc = sqlv_cast(cx, x, QR_SQL_NUMERIC, -1, &tx)) || (rc = sqlv_cast(cx, y, QR_SQL_NUMERIC, -1, &ty)) ||
        (rc = dec_parse(cx, tx.u.s.s, tx.u.s.n, -1, &a)) ||
        (rc = dec_parse(cx, ty.u.s.s, ty.u.s.n, -1, &b)))
        return rc;
    if (a.special || b.special)
        return special_result(cx, op, &a, &b, out);
    switch (op) {
    case '+':
    case '-':
        rc = dec_add(cx, &a, &b, op == '-', &r);
        break;
    case '*':
        rc = dec_mul(cx, &a, &b, &r);
        break;
    case '/':
        rc = dec_div(cx, &a, &b, div_scale(&a, &b), false, &r);
        break;
    default: { /* a - trunc(a / b) * b, at the larger scale */
        Dec q, m;
        int sc = a.scale > b.scale ? a.scale : b.scale;
        if ((rc = dec_div(cx, &a, &b, 0, true, &q)) || (rc = dec_mul(cx, &q, &b, &m)) ||
            (rc = dec_add(cx, &a, &m, true, &r)))
            return rc;
        if (r.scale != sc && (rc = dec_round(cx, &r, sc, true, &r)))
            return rc;
        r.neg = a.neg; /* the remainder takes the dividend's sign */
        break;
    }
    }
    return rc ? rc : dec_text(cx, &r, out);
}

int sqln_cmp(const SqlValue *x, const SqlValue *y)
{
    /* parse without an arena: compare the texts digit by digit */
    const char *a = x->u.s.s ? x->u.s.s : "", *b = y->u.s.s ? y->u.s.s : "";
    size_t na = x->u.s.n, nb = y->u.s.n;
    bool nan_a = na == 3 && !strncmp(a, "NaN", 3), nan_b = nb == 3 && !strncmp(b, "NaN", 3);
    if (nan_a || nan_b)
        return nan_a - nan_b; /* NaN above everything, equal to itself */
    int ia = na && a[na - 1] == 'y' ? (a[0] == '-' ? -1 : 1) : 0; /* +-Infinity */
    int ib = nb && b[nb - 1] == 'y' ? (b[0] == '-' ? -1 : 1) : 0;
    if (ia || ib) /* -Infinity < every number < Infinity */
        return (ia > ib) - (ia < ib);
    bool ga = na && a[0] == '-', gb = nb && b[0] == '-';
    if (na && (a[0] == '-' || a[0] == '+'))
        a++, na--;
    if (nb && (b[0] == '-' || b[0] == '+'))
        b++, nb--;
    /* integer and fraction parts, leading zeros skipped */
    while (na > 1 && a[0] == '0' && a[1] != '.')
        a++, na--;
    while (nb > 1 && b[0] == '0' && b[1] != '.')
        b++, nb--;
    const char *pa = memchr(a, '.', na), *pb = memchr(b, '.', nb);
    size_t la = pa ? (size_t)(pa - a) : na, lb = pb ? (size_t)(pb - b) : nb;
    bool za = true, zb = true;
    for (size_t i = 0; i < na; i++)
        za &= a[i] == '0' || a[i] == '.';
    for (size_t i = 0; i < nb; i++)
        zb &= b[i] == '0' || b[i] == '.';
    if (za)
        ga = false;
    if (zb)
        gb = false;
    if (ga != gb)
        return ga ? -1 : 1;
    int sign = ga ? -1 : 1, c = 0;
    if (za || zb)
        c = za && zb ? 0 : za ? -1 : 1;
    else if (la != lb)
        c = la < lb ? -1 : 1;
    else {
        c = memcmp(a, b, la);
        c = c < 0 ? -1 : c > 0;
        const char *fa = pa ? pa + 1 : a + na, *fb = pb ? pb + 1 : b + nb;
        size_t ma = (size_t)(a + na - fa), mb = (size_t)(b + nb - fb);
        for (size_t i = 0; !c && (i < ma || i < mb); i++) {
            char x1 = i < ma ? fa[i] : '0', y1 = i < mb ? fb[i] : '0';
            c = x1 < y1 ? -1 : x1 > y1;
        }
    }
    return sign * c;
}

int sqln_neg(SqlCtx *cx, const SqlValue *x, SqlValue *out)
{
    Dec a;
    int rc = dec_parse(cx, x->u.s.s, x->u.s.n, -1, &a);
    if (rc)
        return rc;
    if (a.special == 'p' || a.special == 'm')
        a.special = a.special == 'p' ? 'm' : 'p';
    a.neg = !a.neg;
    return dec_text(cx, &a, out);
}

int sqln_round(SqlCtx *cx, const SqlValue *x, int64_t scale, int how, SqlValue *out)
{
    Dec a, r;
    if (scale > NUM_MAX_SCALE)
        scale = NUM_MAX_SCALE;
    if (scale < -NUM_MAX_SCALE)
        scale = -NUM_MAX_SCALE;
    int rc = dec_parse(cx, x->u.s.s, x->u.s.n, -1, &a);
    if (rc)
        return rc;
    if (how == SQLN_CEIL || how == SQLN_FLOOR) { /* toward +inf / -inf */
        if ((rc = dec_round(cx, &a, 0, true, &r)))
            return rc;
        bool frac = false;
        for (int p = -1; p >= -a.scale && !frac; p--)
            frac = dig(&a, p) != 0;
        if (frac && !a.special && (how == SQLN_CEIL) != a.neg) {
            Dec one = {.nd = 1, .d = digits(cx, 1)};
            if (!one.d)
                return nomem(cx);
            one.d[0] = 1;
            one.neg = a.neg;
            if ((rc = dec_add(cx, &r, &one, false, &r)))
                return rc;
        }
    } else if ((rc = dec_round(cx, &a, (int)scale, how == SQLN_TRUNC, &r))) {
        return rc;
    }
    return dec_text(cx, &r, out);
}

int sqln_typmod(SqlCtx *cx, const SqlValue *x, int32_t typmod, int loc, SqlValue *out)
{
    if (typmod < 4) {
        *out = *x;
        return QR_OK;
    }
    int prec = (typmod - 4) >> 16 & 0xffff, scale = (typmod - 4) & 0xffff;
    Dec a, r;
    int rc = dec_parse(cx, x->u.s.s, x->u.s.n, loc, &a);
    if (rc)
        return rc;
    if (a.special) {
        if (a.special != 'n') {
            sql_err_at(cx, loc, QR_EINVAL, "22003", "numeric field overflow");
            qr_error_detail(cx->err, "A field with precision %d, scale %d cannot hold an "
                            "infinite value.", prec, scale);
            return QR_EINVAL;
        }
        *out = *x;
        return QR_OK;
    }
    if ((rc = dec_round(cx, &a, scale, false, &r)))
        return rc;
    int t = top(&r);
    if (t != INT32_MIN && t + 1 > prec - scale) {
        sql_err_at(cx, loc, QR_EINVAL, "22003", "numeric field overflow");
        if (prec == scale)
            qr_error_detail(cx->err, "A field with precision %d, scale %d must round to an "
                            "absolute value less than 1.", prec, scale);
        else
            qr_error_detail(cx->err, "A field with precision %d, scale %d must round to an "
                            "absolute value less than 10^%d.", prec, scale, prec - scale);
        return QR_EINVAL;
    }
    return dec_text(cx, &r, out);
}

int32_t sqln_make_typmod(int prec, int scale) { return ((prec << 16) | scale) + 4; }

int sqln_typmod_of(SqlCtx *cx, const cJSON *typmods, int loc, int32_t *out)
{
    int n = cJSON_GetArraySize(typmods), v[2] = {0, 0};
    *out = -1;
    if (n == 0)
        return QR_OK;
    if (n > 2)
        return sql_err_at(cx, loc, QR_EINVAL, "22023", "invalid NUMERIC type modifier");
    for (int i = 0; i < n; i++) {
        const cJSON *ac = sqlj_is(cJSON_GetArrayItem(typmods, i), "A_Const");
        const cJSON *iv = ac ? sqlj_get(ac, "ival") : NULL;
        if (!iv) /* ival {} is 0 */
            return sql_err_at(cx, loc, QR_EINVAL, "22023", "invalid NUMERIC type modifier");
        v[i] = sqlj_int(iv, "ival", 0);
    }
    if (v[0] < 1 || v[0] > NUM_MAX_SCALE)
        return sql_err_at(cx, loc, QR_EINVAL, "22023",
                          "NUMERIC precision %d must be between 1 and %d", v[0], NUM_MAX_SCALE);
    if (v[1] < 0 || v[1] > v[0])
        return sql_err_at(cx, loc, QR_EINVAL, "22023",
                          "NUMERIC scale %d must be between 0 and precision %d", v[1], v[0]);
    *out = sqln_make_typmod(v[0], v[1]);
    return QR_OK;
}

int sqln_from_double(SqlCtx *cx, double d, SqlValue *out)
{
    if (isnan(d) || isinf(d)) {
        const char *s = isnan(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity";
        *out = sqlv_text(s, strlen(s));
        out->type = QR_SQL_NUMERIC;
        return QR_OK;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%.15g", d); /* float8_numeric: DBL_DIG digits */
    Dec a;
    int rc = dec_parse(cx, buf, strlen(buf), -1, &a);
    return rc ? rc : dec_text(cx, &a, out);
}

/* avg(numeric): the sum over the count at the division's scale. */
int sqln_avg(SqlCtx *cx, const SqlValue *sum, int64_t count, SqlValue *out)
{
    SqlValue c = sqlv_int(count);
    return sqln_arith(cx, '/', sum, &c, out);
}

int sqln_in(SqlCtx *cx, const char *s, size_t n, int loc, SqlValue *out)
{
    Dec a;
    int rc = dec_parse(cx, s, n, loc, &a);
    return rc ? rc : dec_text(cx, &a, out);
}

/* ---- to_char(number, format) ---- */

/* The format's parts, PostgreSQL's NUM_ keywords (case-insensitive). */
typedef enum {
    NF_LIT, NF_D9, NF_D0, NF_DEC, NF_GROUP, NF_S, NF_MI, NF_SG, NF_PR, NF_V,
} NfKind;

typedef struct NumFmt {
    NfKind *kind;              /* per part (arena) */
    const char **lit;          /* NF_LIT: its text */
    size_t *lit_n;
    int n;
    bool fm;                   /* fill mode: no padding, no trailing 9-zeros */
    int pre, post;             /* digit positions before / after the point */
    int zero_pre;              /* first pre position (0 = leftmost) that prints zeros */
    int zero_post;             /* post positions up to here always print (last 0 + 1) */
    int v_digits;              /* digits after V: the value times 10^v */
    bool sign_in_place;        /* S after the digits, MI, SG or PR: no leading sign slot */
    bool plus;                 /* a leading S: '+' for positive values */
    bool pr;                   /* PR: <negative> */
    bool has_dec;              /* a decimal point: a zero integer part prints nothing */
} NumFmt;

static bool kw(const char *p, const char *end, const char *k)
{
    size_t n = strlen(k);
    return (size_t)(end - p) >= n && !strncasecmp(p, k, n);
}

static int nf_unsupported(SqlCtx *cx, const char *k)
{
    return sql_err_at(cx, -1, QR_EUNSUPPORTED, "0A000",
                      "to_char of a number with the \"%s\" pattern is not supported", k);
}

static int nf_parse(SqlCtx *cx, const char *s, size_t n, NumFmt *f)
{
    memset(f, 0, sizeof *f);
    f->zero_pre = INT32_MAX;
    f->kind = qr_arena_alloc(cx->arena, (n + 1) * sizeof *f->kind);
    f->lit = qr_arena_alloc(cx->arena, (n + 1) * sizeof *f->lit);
    f->lit_n = qr_arena_alloc(cx->arena, (n + 1) * sizeof *f->lit_n);
    if (!f->kind || !f->lit || !f->lit_n)
        return nomem(cx);
    const char *p = s, *end = s + n;
    bool seen_dec = false, seen_digit = false, after_v = false, has_s = false;
    static const char *const UNSUPPORTED[] = {"EEEE", "RN", "TH", "PL", "L"};
    while (p < end) {
        NfKind k = NF_LIT;
        size_t len = 1;
        const char *lit = p;
        size_t lit_n = 1;
        if (kw(p, end, "FM")) {
            f->fm = true;
            p += 2;
            continue;
        }
        for (size_t i = 0; i < sizeof UNSUPPORTED / sizeof *UNSUPPORTED; i++)
            if (kw(p, end, UNSUPPORTED[i]))
                return nf_unsupported(cx, UNSUPPORTED[i]);
        if (*p == '9' || *p == '0') {
            k = *p == '9' ? NF_D9 : NF_D0;
            if (seen_dec) {
                f->post++;
                if (k == NF_D0)
                    f->zero_post = f->post;
            } else {
                if (k == NF_D0 && f->zero_pre == INT32_MAX)
                    f->zero_pre = f->pre;
                f->pre++;
                if (after_v)
                    f->v_digits++;
            }
            seen_digit = true;
        } else if (*p == '.' || *p == 'D' || *p == 'd') {
            if (seen_dec)
                return sql_err_at(cx, -1, QR_ESYNTAX, "42601", "multiple decimal points");
            if (after_v)
                return sql_err_at(cx, -1, QR_ESYNTAX, "42601",
                                  "cannot use \"V\" and decimal point together");
            seen_dec = f->has_dec = true;
            k = NF_DEC;
        } else if (*p == ',' || *p == 'G' || *p == 'g') {
            k = NF_GROUP;
        } else if (kw(p, end, "MI") || kw(p, end, "SG") || kw(p, end, "PR")) {
            k = kw(p, end, "MI") ? NF_MI : kw(p, end, "SG") ? NF_SG : NF_PR;
            len = 2;
            if (has_s || (k == NF_PR && (f->sign_in_place || f->pr)))
                return sql_err_at(cx, -1, QR_ESYNTAX, "42601",
                                  "cannot use \"%s\" and \"%s\" together",
                                  has_s ? "S" : "PR", has_s ? (k == NF_MI ? "MI" : k == NF_SG ? "SG" : "PR")
                                                        : "MI\"/\"SG");
            f->sign_in_place = true;
            f->pr |= k == NF_PR;
        } else if (*p == 'S' || *p == 's') {
            if (has_s || f->sign_in_place || f->pr)
                return sql_err_at(cx, -1, QR_ESYNTAX, "42601", has_s ? "cannot use \"S\" twice"
                                  : "cannot use \"S\" and \"PL\"/\"MI\"/\"SG\"/\"PR\" together");
            has_s = true;
            k = NF_S;
            if (seen_digit)
                f->sign_in_place = true;
            else
                f->plus = true;
        } else if (*p == 'V' || *p == 'v') {
            if (seen_dec)
                return sql_err_at(cx, -1, QR_ESYNTAX, "42601",
                                  "cannot use \"V\" and decimal point together");
            k = NF_V;
            after_v = true;
        } else if (*p == '"') { /* quoted text */
            const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
            lit = p + 1;
            lit_n = q ? (size_t)(q - p - 1) : (size_t)(end - p - 1);
            len = q ? (size_t)(q - p + 1) : (size_t)(end - p);
        } else if (*p == '\\' && p + 1 < end) {
            lit = p + 1;
            len = 2;
        }
        f->kind[f->n] = k;
        f->lit[f->n] = lit;
        f->lit_n[f->n] = lit_n;
        f->n++;
        p += len;
    }
    if (f->pr) /* PR brackets the number: no other sign */
        f->plus = false;
    return QR_OK;
}

int sqln_to_char(SqlCtx *cx, const SqlValue *x, const char *fmt, size_t fmt_n, SqlValue *out)
{
    NumFmt f;
    SqlValue num, r;
    Dec a;
    int rc;
    if ((rc = nf_parse(cx, fmt, fmt_n, &f)) || (rc = sqlv_cast(cx, x, QR_SQL_NUMERIC, -1, &num)))
        return rc;
    if (f.v_digits) { /* V: the value times 10^v */
        char *p10 = qr_arena_alloc(cx->arena, (size_t)f.v_digits + 2);
        if (!p10)
            return nomem(cx);
        p10[0] = '1';
        memset(p10 + 1, '0', (size_t)f.v_digits);
        SqlValue m = sqlv_text(p10, (size_t)f.v_digits + 1);
        m.type = QR_SQL_NUMERIC;
        if ((rc = sqln_arith(cx, '*', &num, &m, &num)))
            return rc;
    }
    if ((rc = dec_parse(cx, num.u.s.s, num.u.s.n, -1, &a)))
        return rc;
    bool neg = a.special ? a.special == 'm' : a.neg && !is_zero(&a);
    Dec rd;
    if (!a.special && (rc = dec_round(cx, &a, f.post, false, &rd)))
        return rc;
    /* integer digits without leading zeros, fraction digits (exactly post) */
    int ip = 0, first = 0;
    if (!a.special) {
        ip = rd.nd - rd.scale;
        while (first < ip && rd.d[first] == 0)
            first++;
    }
    int n_int = ip - first;
    if (n_int == 0 && !f.has_dec && !a.special) /* 0 in an integer format prints its 0 */
        n_int = 1;
    bool overflow = a.special || n_int > f.pre;
    int keep_post = f.post; /* FM drops trailing zeros past the last 0 position */
    if (f.fm && !overflow) {
        while (keep_post > f.zero_post && rd.d[ip + keep_post - 1] == 0)
            keep_post--;
    }
    QrBuf b;
    qr_buf_init(&b);
    bool sign_pending = !f.sign_in_place || f.plus || f.pr, started = false;
    char lead = f.pr ? (neg ? '<' : ' ') : neg ? '-' : f.plus ? '+' : ' ';
    if (f.pr && !neg && f.fm)
        sign_pending = false;
    int pre_at = 0, post_at = 0;
    for (int i = 0; i < f.n; i++) {
        NfKind k = f.kind[i];
        bool digit_part = k == NF_D9 || k == NF_D0;
        if (digit_part && pre_at < f.pre) {
            int power = f.pre - 1 - pre_at++;
            char c;
            if (overflow)
                c = '#';
            else if (power < n_int)
                c = (char)('0' + rd.d[ip - 1 - power]);
            else if (pre_at - 1 >= f.zero_pre)
                c = '0';
            else {
                if (!f.fm)
                    qr_buf_putc(&b, ' ');
                continue;
            }
            if (sign_pending && (lead != ' ' || !f.fm))
                qr_buf_putc(&b, (uint8_t)lead);
            sign_pending = false;
            qr_buf_putc(&b, (uint8_t)c);
            started = true;
        } else if (digit_part) { /* after the point */
            int j = post_at++;
            if (j < keep_post)
                qr_buf_putc(&b, (uint8_t)(overflow ? '#' : '0' + rd.d[ip + j]));
        } else if (k == NF_DEC) {
            if (sign_pending && (lead != ' ' || !f.fm))
                qr_buf_putc(&b, (uint8_t)lead);
            sign_pending = false;
            qr_buf_putc(&b, '.');
        } else if (k == NF_GROUP) {
            if (started)
                qr_buf_putc(&b, ',');
            else if (!f.fm)
                qr_buf_putc(&b, ' ');
        } else if (k == NF_S) {
            if (f.sign_in_place && !f.plus)
                qr_buf_putc(&b, neg ? '-' : '+');
        } else if (k == NF_MI) {
            if (neg || !f.fm)
                qr_buf_putc(&b, neg ? '-' : ' ');
        } else if (k == NF_SG) {
            qr_buf_putc(&b, neg ? '-' : '+');
        } else if (k == NF_PR) {
            if (neg || !f.fm)
                qr_buf_putc(&b, neg ? '>' : ' ');
        } else if (k == NF_LIT) {
            qr_buf_append(&b, f.lit[i], f.lit_n[i]);
        }
    }
    rc = sqlv_buf_text(cx, &b, &r);
    if (!rc)
        *out = r;
    return rc;
}
