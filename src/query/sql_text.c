/*
 * sql_text.c — full-text predicates of SQL at run time: each one compiled
 * once per scan open against the scan's own snapshot (search_int.h, the
 * text engine qr_search is built on), and what rows ask of it afterwards.
 *
 * Layer: query/ (SQL).  Calls search_int.h and the snapshot of index/.
 *
 * The driving predicate of a scan hands its matches straight from the
 * compiled query's iterators to the scan (sql_scan.c), segment by segment,
 * with their scores.  Every other use goes through per-segment match sets
 * built here, in the statement's arena so that rows kept past the scan's
 * close (a join's build side, a sort) still answer:
 *
 *   bits   one bit per doc of the segment: the live matches
 *   rank   (scored sets) per 64-bit word, the matches before it
 *   scores (scored sets) per match, in doc order: the score of doc d is
 *          scores[rank[d / 64] + popcount(bits[d / 64] below d)]
 *
 * so a row's membership and score cost O(1), and a set costs n_docs / 8
 * bytes (+ n_docs / 16 and 4 per match when scored), whatever the order in
 * which rows ask.  Snippets take the predicate's highlight terms, copied out
 * of the compiled query, and the text of the columns snippet() names.
 */
#include "query/sql_int.h"
#include "query/search_int.h"

#include <string.h>

#include "store/util.h"

typedef struct TextSeg {
    uint64_t *bits;           /* (n_docs + 63) / 64 words; NULL: no match */
    uint32_t *rank;           /* scored sets: matches before each word */
    float *scores;            /* scored sets: per match, doc order */
} TextSeg;

struct SqlTextRun {
    const SqlTextPred *tp;    /* borrows */
    QrTable *t;               /* borrows */
    const SqlScope *scope;    /* borrows: the query's scope (snippet columns) */
    QrArena *arena;           /* owns while open: child of the statement's arena (the
                                 compiled query and its iterators) */
    Search *search;           /* open: compiled against the scan's snapshot; NULL when the
                                 query is NULL or the run is closed */
    bool null_query;          /* the query value is NULL: nothing matches */
    /* per-row answers, statement arena, kept after close */
    bool has_sets, sets_scored;
    uint64_t sets_version;    /* the snapshot version they describe */
    int n_segs;
    DocId *base;              /* per segment: global id of its doc 0 */
    uint32_t *n_docs;
    TextSeg *segs;
    int hint;                 /* segment of the last lookup */
    uint64_t hl_version;
    SearchHl *hl;             /* highlight terms (statement arena) */
    bool warned;              /* the stats source's warning was told (once a run) */
};

SqlTextRun *sql_text_run_new(SqlCtx *cx, const SqlTextPred *tp, QrTable *t, const SqlScope *scope)
{
    SqlTextRun *r = qr_arena_calloc(cx->arena, sizeof *r);
    if (!r) {
        sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
        return NULL;
    }
    r->tp = tp;
    r->t = t;
    r->scope = scope;
    return r;
}

/* The search's error as the statement's: a bad query is the user's
 * (42601 / 22023 at the predicate), the statement's memory budget is
 * 54000 as everywhere in SQL, the rest as the engine said. */
static int text_err(SqlCtx *cx, const SqlTextRun *r, const QrError *e)
{
    if (e->code == QR_ESYNTAX || e->code == QR_EINVAL) {
        sql_err_at(cx, r->tp->loc, e->code, e->code == QR_ESYNTAX ? "42601" : "22023",
                   "full-text query: %s", e->message);
        return cx->err->code;
    }
    if (e->code == QR_ELIMIT && r->arena && qr_arena_over_cap(r->arena)) {
        sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
        qr_error_hint(cx->err, "raise quarry.mem_cap or narrow the query");
        return cx->err->code;
    }
    qr_error_copy(cx->err, e);
    return e->code;
}

int sql_text_check(SqlCtx *cx, SqlTextRun *r)
{
    IterCtx *ic = r->search ? search_ctx(r->search) : NULL;
    if (ic && ic->err.code != QR_OK)
        return text_err(cx, r, &ic->err);
    const char *w = r->search ? search_stats_warning(r->search) : NULL;
    if (w && !r->warned) { /* scores from some nodes' statistics only, as configured */
        r->warned = true;
        sql_notice(cx, "WARNING", "01000", "%s", w);
    }
    return QR_OK;
}

int sql_text_open(SqlCtx *cx, SqlTextRun *r, Snapshot *snap)
{
    sql_text_close(r);
    SqlValue v;
    SqlEvalRow row = {.doc = -1};
    int rc = sql_expr_eval(cx, r->tp->query, &row, &v);
    if (rc)
        return rc;
    r->null_query = v.is_null;
    if (v.is_null)
        return QR_OK;
    if (!(r->arena = qr_arena_new_child(cx->arena)))
        return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = v.u.s.s;
    req.q_len = v.u.s.n;
    req.fields = r->tp->field;
    req.typo = cx->typo;
    req.prefix_last = cx->prefix_last;
    req.cancel = cx->sess ? &cx->sess->cancel : NULL;
    QrError e;
    qr_error_clear(&e);
    if (search_open(r->t, snap, r->arena, &req, &r->search, &e) != QR_OK)
        return text_err(cx, r, &e);
    search_ctx(r->search)->deadline_ns = cx->deadline_ns;
    if (r->hl_version != snap->version || !r->hl) {
        if (!(r->hl = search_hl(r->search, cx->arena)))
            return sql_text_check(cx, r);
        r->hl_version = snap->version;
    }
    return QR_OK;
}

void sql_text_close(SqlTextRun *r)
{
    if (!r)
        return;
    search_close(r->search);
    r->search = NULL;
    qr_arena_free(r->arena);
    r->arena = NULL;
}

Search *sql_text_search(SqlTextRun *r) { return r ? r->search : NULL; }

void sql_text_stats(SqlTextRun *r, SqlTableScan *sc)
{
    if (!r || !r->search)
        return;
    uint64_t d, s;
    search_stats(r->search, &d, &s);
    sc->post_blocks_decoded += d;
    sc->post_blocks_skipped += s;
}

int sql_text_count(SqlCtx *cx, SqlTextRun *r, Snapshot *snap, const QrFilter *filter,
                   SqlTableScan *sc, uint64_t *count)
{
    *count = 0;
    if (r->null_query)
        return QR_OK;
    Search *s = r->search;
    QrFilterStats st = {0};
    int rc = QR_OK;
    uint64_t d0, s0;
    search_stats(s, &d0, &s0);
    for (int si = 0; si < snap->n_segs && rc == QR_OK; si++) {
        roaring_bitmap_t *fb = NULL;
        if (filter) {
            if (!(fb = roaring_bitmap_create()))
                return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
            search_seg_filter(s, si, filter, QR_ACCESS_AUTO, fb, &st);
        }
        if (sql_text_check(cx, r) == QR_OK)
            *count += search_seg_count(s, si, fb);
        if (fb)
            roaring_bitmap_free(fb);
        if ((rc = sql_text_check(cx, r)) == QR_OK)
            rc = sql_check(cx);
    }
    uint64_t d1, s1;
    search_stats(s, &d1, &s1);
    sc->post_blocks_decoded += d1 - d0;
    sc->post_blocks_skipped += s1 - s0;
    sc->zm_blocks_total += st.blocks_total;
    sc->zm_blocks_skipped += st.blocks_skipped;
    sc->bt_pages += st.btree_pages;
    return rc;
}

/* ---- per-row answers ---- */

int sql_text_sets(SqlCtx *cx, SqlTextRun *r, Snapshot *snap, bool scored)
{
    if (r->has_sets && r->sets_version == snap->version && (r->sets_scored || !scored))
        return QR_OK;
    r->has_sets = false;
    int n = snap->n_segs;
    r->n_segs = n;
    r->hint = 0;
    r->sets_scored = scored;
    r->base = qr_arena_alloc(cx->arena, ((size_t)n + 1) * sizeof *r->base);
    r->n_docs = qr_arena_alloc(cx->arena, ((size_t)n + 1) * sizeof *r->n_docs);
    r->segs = qr_arena_calloc(cx->arena, ((size_t)n + 1) * sizeof *r->segs);
    if (!r->base || !r->n_docs || !r->segs)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    uint32_t docs[512];
    float scores[512];
    int rc = QR_OK;
    for (int si = 0; si < n && rc == QR_OK; si++) {
        uint32_t nd = seg_n_docs(snap->segs[si]);
        r->base[si] = snap->base[si];
        r->n_docs[si] = nd;
        if (r->null_query || nd == 0)
            continue;
        SearchCursor c;
        search_seg_cursor(r->search, si, scored, NULL, &c);
        if (!c.it) {
            rc = sql_text_check(cx, r);
            continue;
        }
        size_t words = ((size_t)nd + 63) / 64;
        TextSeg *ts = &r->segs[si];
        ts->bits = qr_arena_calloc(cx->arena, words * sizeof *ts->bits);
        if (!ts->bits)
            return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
        uint64_t m = 0, cap = 0;
        size_t k;
        while ((k = search_cursor_next(&c, docs, scores, 512)) > 0) {
            for (size_t j = 0; j < k; j++)
                ts->bits[docs[j] / 64] |= 1ull << (docs[j] % 64);
            if (scored) {
                if (m + k > cap) { /* grows by doubling, in the arena */
                    uint64_t nc = cap ? cap * 2 : 1024;
                    while (nc < m + k)
                        nc *= 2;
                    float *ns = qr_arena_alloc(cx->arena, nc * sizeof *ns);
                    if (!ns)
                        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
                    if (m)
                        memcpy(ns, ts->scores, m * sizeof *ns);
                    ts->scores = ns;
                    cap = nc;
                }
                memcpy(ts->scores + m, scores, k * sizeof *scores);
            }
            m += k;
            if ((rc = sql_check(cx)))
                break;
        }
        if (rc == QR_OK)
            rc = sql_text_check(cx, r);
        if (rc == QR_OK && scored) {
            if (!(ts->rank = qr_arena_alloc(cx->arena, (words + 1) * sizeof *ts->rank)))
                return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
            uint32_t before = 0;
            for (size_t w = 0; w < words; w++) {
                ts->rank[w] = before;
                before += (uint32_t)__builtin_popcountll(ts->bits[w]);
            }
        }
    }
    if (rc)
        return rc;
    r->has_sets = true;
    r->sets_version = snap->version;
    return QR_OK;
}

/* The segment of a global doc id (the last one asked first). */
static int text_seg(SqlTextRun *r, int64_t doc, uint32_t *local)
{
    int h = r->hint;
    if (h < r->n_segs && doc >= r->base[h] && doc - r->base[h] < r->n_docs[h]) {
        *local = (uint32_t)(doc - r->base[h]);
        return h;
    }
    int si = snapshot_base_find(r->base, r->n_segs, doc);
    if (si < 0 || doc - r->base[si] >= r->n_docs[si])
        return -1;
    r->hint = si;
    *local = (uint32_t)(doc - r->base[si]);
    return si;
}

int sql_text_has(SqlCtx *cx, SqlTextRun *r, int64_t doc, bool *match, float *score)
{
    *match = false;
    if (score)
        *score = 0;
    if (!r || !r->has_sets)
        return sql_err_at(cx, -1, QR_EINTERNAL, "XX000",
                          "full-text predicate evaluated outside its table's scan");
    uint32_t d;
    int si = doc < 0 ? -1 : text_seg(r, doc, &d);
    if (si < 0 || !r->segs[si].bits)
        return QR_OK;
    const TextSeg *ts = &r->segs[si];
    uint64_t w = ts->bits[d / 64], bit = 1ull << (d % 64);
    if (!(w & bit))
        return QR_OK;
    *match = true;
    if (score && ts->scores)
        *score = ts->scores[ts->rank[d / 64] + (uint32_t)__builtin_popcountll(w & (bit - 1))];
    return QR_OK;
}

/* ---- snippets ---- */

int sql_text_snippet(SqlCtx *cx, const SqlExpr *e, const SqlEvalRow *row, SqlValue *out)
{
    *out = sqlv_null();
    out->type = QR_SQL_TEXT;
    SqlTextRun *r = e->text->run;
    if (!r || !r->hl || e->n_args == 0)
        return QR_OK;
    /* a row outside the predicate's matches (under OR, a LEFT JOIN's NULL
     * side) has no passage; the rows of a scan driven by the predicate all
     * match it (no sets are built for it then).  snippet(col) takes the
     * first predicate on the table the row matches: under OR, a row found
     * by the second is marked with its words */
    const SqlValue *id = &row->row[e->col];
    if (id->is_null)
        return QR_OK;
    for (const SqlTextPred *p = e->text; r && r->has_sets;) {
        bool m;
        int rc = sql_text_has(cx, r, id->u.i, &m, NULL);
        if (rc)
            return rc;
        if (m)
            break;
        p = e->op ? p->next : NULL;
        while (p && (!p->run || !p->run->hl))
            p = p->next;
        r = p ? p->run : NULL;
    }
    if (!r)
        return QR_OK;
    const QrSchema *schema = qr_table_schema(r->t);
    int fields[QR_MAX_FIELDS];
    const char *texts[QR_MAX_FIELDS];
    size_t lens[QR_MAX_FIELDS];
    int n = 0;
    bool any = false;
    for (int i = 0; i < e->n_args && n < QR_MAX_FIELDS; i++) {
        int f = r->scope->cols[e->args[i]->col].field;
        /* snippet(t): the indexed text fields only, as the search's */
        if (!e->op && (f < 0 || f >= schema->n_fields || schema->fields[f].type != QR_FT_TEXT ||
                       !schema->fields[f].indexed))
            continue;
        SqlValue v;
        int rc = sql_expr_eval(cx, e->args[i], row, &v);
        if (rc)
            return rc;
        fields[n] = f;
        texts[n] = v.is_null || !sqlt_is_str(v.type) ? NULL : v.u.s.s;
        lens[n] = texts[n] ? v.u.s.n : 0;
        any |= texts[n] != NULL;
        n++;
    }
    if (!any)
        return QR_OK;
    char *s;
    QrError err;
    qr_error_clear(&err);
    if (search_hl_snippet(r->t, r->hl, true, NULL, NULL, fields, texts, lens, n, cx->arena, &s,
                          &err) != QR_OK)
        return text_err(cx, r, &err);
    if (s)
        *out = sqlv_text(s, strlen(s));
    return QR_OK;
}
