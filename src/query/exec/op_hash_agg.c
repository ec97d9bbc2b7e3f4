/*
 * op_hash_agg.c — GROUP BY and aggregates: rows are hashed on their group
 * keys, each group keeps a representative input row (for the grouped
 * columns the select list reads) and one state per aggregate; at the end
 * HAVING filters the groups and each surviving group becomes one row,
 * [representative row..., aggregate values...].  Without GROUP BY there is
 * exactly one group, even over no rows.
 *
 * GROUPING SETS / ROLLUP / CUBE: every row goes into one group per set,
 * the keys outside the set NULL (and the set in the hash, so a NULL key
 * and a rolled-up one differ); an empty set makes a group even over no
 * rows.  Grouped expressions above read the group's keys as SA_GROUP_KEY
 * aggregates and GROUPING(...) its set (plan/bind_group.c).
 *
 * When the child is a table scan whose conditions are column predicates
 * (and the driving text predicate), and the aggregates are count / sum /
 * avg / min / max of its columns grouped by at most one keyword column, the
 * scan aggregates column blocks itself (sql_scan_colagg) and hands each
 * segment's partial state per dictionary code here instead of rows.
 *
 * Memory: groups, states and the hash live in the statement's arena (its
 * cap is the statement's budget: 54000 past it).
 *
 * Layer: query/ (SQL execution).  Calls agg.c.
 */
#include "query/exec/exec.h"

#include <inttypes.h>
#include <string.h>

typedef struct Group {
    SqlValue *rep;            /* a representative input row (in_width), strings owned */
    SqlValue *keys;           /* n_groups (NULL outside its grouping set) */
    SqlAggState *st;          /* n_aggs */
    uint64_t hash;
    int set;                  /* its grouping set (0 without grouping sets) */
} Group;

typedef struct AggOp {
    SqlOp op;
    SqlAggSpec spec;
    SqlColAgg ca;             /* offered to the scan below (colagg_scan) */
    SqlCtx *cx;               /* while open (the column-block callback needs it) */
    SqlValue *ca_row;         /* a column-block group's row: NULLs but the key */
    const SqlColAggPart *ca_parts; /* through a join: the key's partial states */
    QrSqlType ca_key_type;
    bool colagg_used;
    int *same;                /* per aggregate: an earlier one whose state it reads at the end
                                 (percentiles of one argument: sql_agg_same_keys), or -1 */
    int *cols;                /* input columns the keys, aggregates and HAVING read */
    int n_cols;
    int64_t *slots;           /* hash: group index or -1 (arena) */
    uint64_t cap;
    Group *gs;                /* arena, doubling */
    uint64_t n_g, gcap;
    SqlValue *keyv;           /* scratch: the current row's keys */
    SqlValue *skeyv;          /* scratch: ... with the keys outside a grouping set NULL */
    uint64_t all_keys;        /* the one set without grouping sets: every key */
    int64_t *set_gi;          /* scratch: the current row's group in each set */
    bool made;                /* a group was made for the current row */
    SqlValue *out;            /* the groups' output rows (arena) */
    uint64_t n_out, pos;
    SqlBatch *b;
} AggOp;

static int grow_slots(AggOp *a, SqlCtx *cx, uint64_t nc)
{
    int64_t *ns = qr_arena_alloc(cx->arena, nc * sizeof *ns);
    if (!ns)
        return sql_nomem(cx);
    memset(ns, 0xff, nc * sizeof *ns);
    for (uint64_t g = 0; g < a->n_g; g++) {
        uint64_t q = a->gs[g].hash & (nc - 1);
        while (ns[q] >= 0)
            q = (q + 1) & (nc - 1);
        ns[q] = (int64_t)g;
    }
    a->slots = ns;
    a->cap = nc;
    return QR_OK;
}

static int new_group(AggOp *a, SqlCtx *cx, const SqlValue *row, const SqlValue *keys, int set,
                     uint64_t h, uint64_t p, int64_t *gi)
{
    const SqlAggSpec *sp = &a->spec;
    if (a->n_g == a->gcap) {
        uint64_t nc = a->gcap ? a->gcap * 2 : 16;
        Group *ng = qr_arena_alloc(cx->arena, nc * sizeof *ng);
        if (!ng)
            return sql_nomem(cx);
        if (a->n_g)
            memcpy(ng, a->gs, a->n_g * sizeof *ng);
        a->gs = ng;
        a->gcap = nc;
    }
    Group *G = &a->gs[a->n_g];
    G->hash = h;
    G->set = set;
    G->rep = qr_arena_alloc(cx->arena, ((size_t)sp->in_width + 1) * sizeof *G->rep);
    G->keys = qr_arena_alloc(cx->arena, ((size_t)sp->n_groups + 1) * sizeof *G->keys);
    G->st = qr_arena_calloc(cx->arena, ((size_t)sp->n_aggs + 1) * sizeof *G->st);
    if (!G->rep || !G->keys || !G->st)
        return sql_nomem(cx);
    memcpy(G->rep, row, (size_t)sp->in_width * sizeof *row);
    for (int c = 0; c < sp->in_width; c++)
        if (sqlv_own(cx, &G->rep[c]))
            return cx->err->code;
    for (int g = 0; g < sp->n_groups; g++) {
        G->keys[g] = keys[g];
        if (sqlv_own(cx, &G->keys[g]))
            return cx->err->code;
    }
    if (a->slots)
        a->slots[p] = (int64_t)a->n_g;
    *gi = (int64_t)a->n_g++;
    a->made = true;
    if (a->n_g * 2 > a->cap)
        return grow_slots(a, cx, a->cap * 2);
    return QR_OK;
}

/* The group of keys `keys` in grouping set `set` (made when new). */
static int lookup(AggOp *a, SqlCtx *cx, const SqlValue *row, const SqlValue *keys, int set,
                  int64_t *gi)
{
    const SqlAggSpec *sp = &a->spec;
    uint64_t h = (uint64_t)set * 0x9e3779b97f4a7c15ull;
    for (int g = 0; g < sp->n_groups; g++)
        h = h * 31 + sqlv_hash(&keys[g]);
    uint64_t p = h & (a->cap - 1);
    while (a->slots[p] >= 0) {
        Group *G = &a->gs[a->slots[p]];
        bool same = G->hash == h && G->set == set;
        for (int g = 0; g < sp->n_groups && same; g++)
            same = sqlv_same(&G->keys[g], &keys[g]);
        if (same) {
            *gi = a->slots[p];
            return QR_OK;
        }
        p = (p + 1) & (a->cap - 1);
    }
    return new_group(a, cx, row, keys, set, h, p, gi);
}

/* The group of a row (made when new): *gi indexes a->gs.  (Without
 * grouping sets: the only set.) */
static int find_group(AggOp *a, SqlCtx *cx, const SqlEvalRow *er, int64_t *gi)
{
    const SqlAggSpec *sp = &a->spec;
    if (sp->n_groups == 0) { /* one group */
        *gi = 0;
        return a->n_g ? QR_OK : new_group(a, cx, er->row, NULL, 0, 0, 0, gi);
    }
    int rc;
    QrArenaMark keys_mark = qr_arena_mark(cx->arena);
    for (int g = 0; g < sp->n_groups; g++)
        if ((rc = sql_expr_eval(cx, sp->groups[g], er, &a->keyv[g])))
            return rc;
    a->made = false;
    rc = lookup(a, cx, er->row, a->keyv, 0, gi);
    if (rc == QR_OK && !a->made)
        qr_arena_release(cx->arena, keys_mark); /* the group's keys are kept already */
    return rc;
}

/* One input row into its group of every grouping set.  (The keys'
 * evaluation is given back before the aggregates step: their states keep
 * what they allocate.) */
static int add_row_sets(AggOp *a, SqlCtx *cx, const SqlEvalRow *er)
{
    const SqlAggSpec *sp = &a->spec;
    int rc = QR_OK;
    QrArenaMark keys_mark = qr_arena_mark(cx->arena);
    for (int g = 0; g < sp->n_groups && rc == QR_OK; g++)
        rc = sql_expr_eval(cx, sp->groups[g], er, &a->keyv[g]);
    a->made = false;
    for (int si = 0; si < sp->n_sets && rc == QR_OK; si++) {
        for (int g = 0; g < sp->n_groups; g++) {
            a->skeyv[g] = a->keyv[g];
            if (!(sp->sets[si] >> g & 1)) {
                a->skeyv[g] = sqlv_null();
                a->skeyv[g].type = sp->groups[g]->type;
            }
        }
        rc = lookup(a, cx, er->row, a->skeyv, si, &a->set_gi[si]);
    }
    if (rc == QR_OK && !a->made)
        qr_arena_release(cx->arena, keys_mark);
    for (int si = 0; si < sp->n_sets && rc == QR_OK; si++)
        for (int k = 0; k < sp->n_aggs && rc == QR_OK; k++)
            if (a->same[k] < 0)
                rc = sql_agg_step(cx, sp->aggs[k], &a->gs[a->set_gi[si]].st[k], er);
    return rc;
}

/* A joined row of a key's partial states (colagg_emit through a join)
 * into its group. */
static int colagg_joined(void *arg, const SqlValue *row)
{
    AggOp *a = arg;
    SqlCtx *cx = a->cx;
    const SqlAggSpec *sp = &a->spec;
    SqlEvalRow er = {.row = row, .doc = -1};
    int64_t gi;
    int rc = find_group(a, cx, &er, &gi);
    for (int k = 0; k < sp->n_aggs && rc == QR_OK; k++)
        if (a->same[k] < 0)
            rc = sql_agg_merge_part(cx, sp->aggs[k], &a->gs[gi].st[k], &a->ca_parts[k], a->ca_parts[0].rows);
    return rc;
}

/* SqlColAgg.emit: one group's partial states from one segment. */
static int colagg_emit(void *arg, const SqlValue *key, const SqlColAggPart *parts)
{
    AggOp *a = arg;
    SqlCtx *cx = a->cx;
    const SqlAggSpec *sp = &a->spec;
    if (sp->colagg_join) { /* joined to the inner rows of the key */
        if (key->is_null)
            return QR_OK; /* a NULL key joins nothing */
        a->ca_row[sp->colagg_col] = *key;
        a->ca_row[sp->colagg_col].type = a->ca_key_type;
        a->ca_parts = parts;
        return sql_hash_join_each(sp->colagg_join, cx, a->ca_row, colagg_joined, a);
    }
    if (sp->n_groups) {
        a->ca_row[sp->colagg_col] = *key;
        a->ca_row[sp->colagg_col].type = sp->groups[0]->type;
    }
    SqlEvalRow er = {.row = a->ca_row, .doc = -1};
    int64_t gi;
    int rc = find_group(a, cx, &er, &gi);
    for (int k = 0; k < sp->n_aggs && rc == QR_OK; k++)
        if (a->same[k] < 0)
            rc = sql_agg_merge_part(cx, sp->aggs[k], &a->gs[gi].st[k], &parts[k], parts[0].rows);
    return rc;
}

/* The values of a group's key references and GROUPING() calls. */
static void group_refs(const AggOp *a, const Group *G, SqlValue *aggv)
{
    const SqlAggSpec *sp = &a->spec;
    uint64_t in = sp->sets ? sp->sets[G->set] : a->all_keys;
    for (int k = 0; k < sp->n_aggs; k++) {
        const SqlAgg *A = sp->aggs[k];
        if (A->kind == SA_GROUP_KEY) {
            int g = A->keys[0];
            aggv[k] = in >> g & 1 ? G->keys[g] : sqlv_null();
            aggv[k].type = A->type;
        } else if (A->kind == SA_GROUPING) {
            int64_t bits = 0;
            for (int i = 0; i < A->n_keys; i++)
                bits = bits << 1 | (int64_t)!(in >> A->keys[i] & 1);
            aggv[k] = sqlv_int(bits);
            aggv[k].type = A->type;
        }
    }
}

/* Every group's output row, HAVING applied. */
static int finish(AggOp *a, SqlCtx *cx)
{
    const SqlAggSpec *sp = &a->spec;
    int W = a->op.width, rc = QR_OK;
    /* no GROUP BY, and every empty grouping set (GROUP BY ()): one group
     * even over no rows */
    int n_sets = sp->sets ? sp->n_sets : 1;
    for (int si = 0; si < n_sets; si++) {
        if (sp->sets ? sp->sets[si] != 0 : sp->n_groups != 0)
            continue;
        bool seen = false;
        for (uint64_t g = 0; g < a->n_g && !seen; g++)
            seen = a->gs[g].set == si;
        if (seen)
            continue;
        SqlValue *nullrow = qr_arena_alloc(cx->arena, ((size_t)sp->in_width + sp->n_groups + 1) * sizeof *nullrow);
        if (!nullrow)
            return sql_nomem(cx);
        for (int c = 0; c < sp->in_width + sp->n_groups; c++)
            nullrow[c] = sqlv_null();
        int64_t gi;
        if ((rc = sp->sets ? lookup(a, cx, nullrow, nullrow + sp->in_width, si, &gi)
                           : new_group(a, cx, nullrow, NULL, 0, 0, 0, &gi)))
            return rc;
    }
    a->out = qr_arena_alloc(cx->arena, (a->n_g * (uint64_t)W + 1) * sizeof *a->out);
    if (!a->out)
        return sql_nomem(cx);
    a->n_out = 0;
    for (uint64_t g = 0; g < a->n_g && rc == QR_OK; g++) {
        SqlValue *o = a->out + a->n_out * (uint64_t)W;
        memcpy(o, a->gs[g].rep, (size_t)sp->in_width * sizeof *o);
        SqlValue *aggv = o + sp->in_width;
        for (int k = 0; k < sp->n_aggs && rc == QR_OK; k++) {
            SqlAggState shared, *st = &a->gs[g].st[k];
            if (a->same[k] >= 0) { /* the earlier one's keys (its final left them a multiset) */
                shared = a->gs[g].st[a->same[k]];
                st = &shared;
            }
            rc = sql_agg_final(cx, sp->aggs[k], st, &aggv[k]);
        }
        group_refs(a, &a->gs[g], aggv);
        bool pass = true;
        SqlEvalRow er = {.row = o, .aggv = aggv, .doc = -1};
        if (rc == QR_OK && sp->having)
            rc = sql_expr_test(cx, sp->having, &er, &pass);
        if ((rc = rc ? rc : sql_check(cx)))
            break;
        if (pass)
            a->n_out++;
    }
    return rc;
}

static int agg_open(SqlOp *op, SqlCtx *cx)
{
    AggOp *a = (AggOp *)op;
    const SqlAggSpec *sp = &a->spec;
    a->n_g = a->gcap = 0;
    a->gs = NULL;
    a->n_out = a->pos = 0;
    a->colagg_used = false;
    if (!a->b && !(a->b = qr_arena_calloc(cx->arena, sizeof *a->b)))
        return sql_nomem(cx);
    if (!(a->keyv = qr_arena_alloc(cx->arena, ((size_t)sp->n_groups + 1) * sizeof *a->keyv)) ||
        !(a->skeyv = qr_arena_alloc(cx->arena, ((size_t)sp->n_groups + 1) * sizeof *a->skeyv)) ||
        !(a->set_gi = qr_arena_alloc(cx->arena, ((size_t)sp->n_sets + 1) * sizeof *a->set_gi)))
        return sql_nomem(cx);
    int rc = grow_slots(a, cx, 64);
    if (rc || (rc = sql_op_open(op->kids[0], cx)))
        return rc;
    if (sp->colagg_scan) {
        a->cx = cx;
        if ((rc = sql_scan_colagg(cx, sp->colagg_scan, &a->colagg_used)))
            return rc;
    }
    /* the rows */
    for (;;) {
        SqlBatch *b;
        if ((rc = sql_op_next(op->kids[0], cx, &b)) || !b)
            break;
        if ((rc = sql_batch_need(cx, b, a->cols, a->n_cols)))
            break;
        for (int i = 0; i < b->n && rc == QR_OK; i++) {
            int p = sql_batch_at(b, i);
            SqlEvalRow er = {.row = b->rows + (size_t)p * (size_t)b->width,
                             .doc = b->src ? b->base + b->docs[p] : -1};
            if (sp->sets) {
                rc = add_row_sets(a, cx, &er);
                continue;
            }
            int64_t gi;
            if ((rc = find_group(a, cx, &er, &gi)))
                break;
            for (int k = 0; k < sp->n_aggs && rc == QR_OK; k++)
                if (a->same[k] < 0)
                    rc = sql_agg_step(cx, sp->aggs[k], &a->gs[gi].st[k], &er);
        }
        if (rc == QR_OK)
            rc = sql_check_now(cx);
        if (rc)
            break;
    }
    sql_op_close(op->kids[0], cx);
    return rc ? rc : finish(a, cx);
}

static int agg_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    AggOp *a = (AggOp *)op;
    (void)cx;
    *out = NULL;
    if (a->pos >= a->n_out)
        return QR_OK;
    uint64_t n = a->n_out - a->pos < SQL_BATCH_ROWS ? a->n_out - a->pos : SQL_BATCH_ROWS;
    SqlBatch *b = a->b;
    memset(b, 0, sizeof *b);
    b->width = op->width;
    b->rows = a->out + a->pos * (uint64_t)op->width;
    b->n = b->n_phys = (int)n;
    b->stable = true; /* groups are kept to the end, strings owned */
    a->pos += n;
    *out = b;
    return QR_OK;
}

static void agg_close(SqlOp *op, SqlCtx *cx)
{
    sql_op_close(op->kids[0], cx);
}

static void agg_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    const AggOp *a = (const AggOp *)op;
    const SqlAggSpec *sp = &a->spec;
    if (sp->sets) {
        /* PostgreSQL's labels: a key list per set, () for an empty one */
        bool empty = false, keyed = false;
        for (int si = 0; si < sp->n_sets; si++)
            *(sp->sets[si] ? &keyed : &empty) = true;
        sql_explain_type(n, keyed && empty ? "MixedAggregate" : keyed ? "HashAggregate" : "Aggregate",
                         NULL, NULL);
        for (int si = 0; si < sp->n_sets && n->n_props < SQL_EXPLAIN_MAX_PROPS - 4; si++) {
            QrBuf b;
            qr_buf_init(&b);
            for (int g = 0, k = 0; g < sp->n_groups; g++)
                if (sp->sets[si] >> g & 1)
                    qr_buf_printf(&b, "%s%s", k++ ? ", " : "", sql_expr_sql(cx, sp->groups[g], NULL, false));
            if (sp->sets[si])
                sql_explain_prop(n, cx, "Hash Key", "%.*s", (int)b.len, (char *)b.data);
            else
                sql_explain_prop(n, cx, "Group Key", "()");
            qr_buf_free(&b);
        }
    } else {
        sql_explain_type(n, sp->n_groups ? "HashAggregate" : "Aggregate", NULL, NULL);
    }
    if (sp->n_groups && !sp->sets) {
        QrBuf b;
        qr_buf_init(&b);
        for (int g = 0; g < sp->n_groups; g++)
            qr_buf_printf(&b, "%s%s", g ? ", " : "", sql_expr_sql(cx, sp->groups[g], NULL, false));
        sql_explain_prop(n, cx, "Group Key", "%.*s", (int)b.len, (char *)b.data);
        qr_buf_free(&b);
    }
    if (sp->n_aggs) {
        QrBuf b;
        qr_buf_init(&b);
        for (int k = 0, shown = 0; k < sp->n_aggs; k++)
            if (sp->aggs[k]->kind != SA_GROUP_KEY) /* (the keys, not aggregates) */
                qr_buf_printf(&b, "%s%s", shown++ ? ", " : "", sql_agg_name(sp->aggs[k]));
        if (b.len)
            sql_explain_prop(n, cx, "Aggregates", "%.*s", (int)b.len, (char *)b.data);
        qr_buf_free(&b);
    }
    if (sp->having)
        sql_explain_prop(n, cx, "Filter", "%s", sql_expr_sql(cx, sp->having, NULL, false));
    if (a->colagg_used)
        sql_explain_actual(n, cx, "Input", "partial states from column blocks%s",
                           sp->colagg_join ? ", joined per key" : "");
    sql_explain_actual(n, cx, "Groups", "%" PRIu64, a->n_g);
}

static const SqlOpVt AGG_VT = {"hash_agg", agg_open, agg_next, agg_close, agg_explain};

SqlOp *sql_op_hash_agg(SqlCtx *cx, SqlOp *kid, const SqlAggSpec *spec)
{
    AggOp *a = sql_op_new(cx, sizeof *a, &AGG_VT, kid, NULL, spec->in_width + spec->n_aggs);
    uint8_t *marks = qr_arena_calloc(cx->arena, (size_t)kid->width + 1);
    if (!a || !marks) {
        sql_nomem(cx);
        return NULL;
    }
    a->spec = *spec;
    a->all_keys = spec->n_groups >= 64 ? ~0ull : (1ull << spec->n_groups) - 1;
    for (int g = 0; g < spec->n_groups; g++)
        sql_expr_cols(spec->groups[g], marks);
    for (int k = 0; k < spec->n_aggs; k++) {
        sql_expr_cols(spec->aggs[k]->arg, marks);
        sql_expr_cols(spec->aggs[k]->arg2, marks);
        sql_expr_cols(spec->aggs[k]->filter, marks);
        for (int o = 0; o < spec->aggs[k]->n_order; o++)
            sql_expr_cols(spec->aggs[k]->order[o], marks);
    }
    /* the representative row feeds HAVING and the select list: the columns
     * they read outside aggregates */
    for (int c = 0; c < kid->width; c++)
        marks[c] |= spec->need ? spec->need[c] : 1;
    if (!(a->cols = sql_cols_list(cx, marks, kid->width, &a->n_cols)))
        return NULL;
    if (!(a->same = qr_arena_alloc(cx->arena, ((size_t)spec->n_aggs + 1) * sizeof *a->same))) {
        sql_nomem(cx);
        return NULL;
    }
    for (int k = 0; k < spec->n_aggs; k++) {
        a->same[k] = -1;
        for (int j = 0; j < k && a->same[k] < 0; j++)
            if (a->same[j] < 0 && sql_agg_same_keys(spec->aggs[j], spec->aggs[k]))
                a->same[k] = j;
    }
    if (spec->colagg_scan) {
        SqlTableScan *sc = spec->colagg_scan;
        a->ca.group_field = spec->colagg_col >= 0 ? sc->scope->cols[spec->colagg_col].field : -1;
        a->ca.n = spec->n_aggs;
        a->ca.field = spec->colagg_field;
        a->ca.keep = spec->colagg_keep;
        bool *mm = qr_arena_calloc(cx->arena, (size_t)spec->n_aggs + 1);
        if (!mm) {
            sql_nomem(cx);
            return NULL;
        }
        for (int k = 0; k < spec->n_aggs; k++)
            mm[k] = spec->aggs[k]->kind == SA_MIN || spec->aggs[k]->kind == SA_MAX;
        a->ca.minmax = mm;
        a->ca.emit = colagg_emit;
        a->ca.arg = a;
        if (!(a->ca_row = qr_arena_alloc(cx->arena, ((size_t)spec->in_width + 1) * sizeof *a->ca_row))) {
            sql_nomem(cx);
            return NULL;
        }
        for (int c = 0; c < spec->in_width; c++)
            a->ca_row[c] = sqlv_null();
        sc->colagg = &a->ca;
        if (spec->colagg_join)
            a->ca_key_type = sql_op_hash_join_spec(spec->colagg_join)->lk[0]->type;
    }
    a->op.est_rows = spec->n_groups ? kid->est_rows * 0.1 + 1 : 1;
    a->op.startup_cost = kid->total_cost + kid->est_rows * 0.05;
    a->op.total_cost = a->op.startup_cost + a->op.est_rows * 0.01;
    return &a->op;
}
