/*
 * sql_scan.c — one table access of a SQL query: the table's SQL columns,
 * the cost-based choice of an access path, and the scan that produces rows,
 * with the text engine as a scan under it.
 *
 * Layer: query/.  Calls the text engine (search_int.h, through sql_text.c),
 * the filter engine (filter.h), index/ table snapshots and segments, store/
 * columns (zone-map scans, random access) and the document store (fields
 * without a column).
 *
 * Access paths (docs/planner.md):
 *   text   candidates = the driving text predicate's live matches, straight
 *          from its iterators segment by segment (with scores when they are
 *          read), every other condition checked per candidate
 *   check  same candidates; named separately for SET quarry.access_path
 *   scan   zone-map-pruned column scans of the column predicates, ANDed into
 *          a bitmap per segment; the driving text predicate's iterators are
 *          advanced into it; then the remaining conditions per row
 *   full   every live document, every condition per row
 *   btree  the filter engine (query/filter.h) over the column predicates,
 *          B-tree lookups for those whose column has a B-tree (CREATE INDEX),
 *          zone-map scans restricted to the B-tree rows for the others; the
 *          driving text predicate advanced into the result
 *   pk     `pk = v` / `pk IN (...)`: each key looked up in every segment's
 *          primary-key index, the other conditions checked per row
 * ORDER BY score() DESC LIMIT k over a driving predicate and column
 * predicates is a top-k of the text engine (block-max WAND across
 * segments, the column predicates' bitmaps fed in).  Text predicates that
 * do not drive are answered per row from per-segment match sets
 * (sql_text.c).  Costs are in "row units": one candidate row fetched and
 * checked costs C_ROW per needed column plus C_DOC when a stored document
 * must be parsed; a zone-map-pruned column block costs C_BLOCK; a posting
 * costs C_POST.
 *
 * Snapshots: the scan pins one snapshot at open; every text predicate is
 * compiled against it, so doc ids, deletes and BM25 statistics agree.
 */
#include "query/sql_int.h"
#include "query/colwalk.h"
#include "query/exec/exec.h"
#include "query/filter.h"
#include "query/search_int.h"
#include "query/sql_w.h"
#include "index/btree.h"

#include <cJSON.h>
#include <endian.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store/decimal.h"
#include "store/util.h"

#define C_ROW 1.0
#define C_DOC 25.0
#define C_BLOCK 40.0
#define C_POST 0.2
#define C_BT_PAGE 4.0 /* one B-tree page read */
#define C_BT_ROW 0.05 /* one row id out of a B-tree into a bitmap */
#define C_PK 2.0 /* one key looked up in one segment's primary-key index */
#define MAX_PK_KEYS 4096
/* Rows a top-k by score may ask the text engine for (its heap is in the
 * query arena, whose cap binds first; this keeps the count an int). */
#define MAX_TOPK_ROWS (1 << 26)

const char *sql_path_name(SqlAccessPath p)
{
    static const char *N[] = {"auto", "text", "btree", "scan", "check", "full", "pk"};
    return p <= SQL_PATH_PK ? N[p] : "?";
}

QrSqlType sql_field_type(QrFieldType t)
{
    switch (t) {
    case QR_FT_INT: return QR_SQL_INT8;
    case QR_FT_FLOAT: return QR_SQL_FLOAT8;
    case QR_FT_BOOL: return QR_SQL_BOOL;
    case QR_FT_TIMESTAMP: return QR_SQL_TIMESTAMPTZ;
    case QR_FT_NUMERIC: return QR_SQL_NUMERIC;
    default: return QR_SQL_TEXT;
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- the table's SQL columns ---- */

/* Primary key type: the field's if the schema lists it, else what the
 * first live document's key is (integers or strings), else text. */
static QrSqlType pk_type(QrTable *t)
{
    const QrSchema *s = qr_table_schema(t);
    int f = schema_field_index(s, s->primary_key);
    if (f >= 0)
        return sql_field_type(s->fields[f].type);
    QrSqlType ty = QR_SQL_TEXT;
    Snapshot *snap = table_snapshot(t->table);
    for (int i = 0; i < snap->n_segs; i++) {
        const uint8_t *key;
        size_t kl;
        if (seg_n_docs(snap->segs[i]) && seg_pk(snap->segs[i], 0, &key, &kl)) {
            ty = key[0] == 'i' ? QR_SQL_INT8 : QR_SQL_TEXT;
            break;
        }
    }
    snapshot_release(snap);
    return ty;
}

int sql_table_scope(SqlCtx *cx, QrTable *t, const char *alias, SqlScope **out)
{
    const QrSchema *s = qr_table_schema(t);
    SqlScope *sc = qr_arena_calloc(cx->arena, sizeof *sc);
    SqlCol *c = qr_arena_calloc(cx->arena, (size_t)(s->n_fields + 3) * sizeof *c);
    if (!sc || !c)
        return sql_err_at(cx, -1, QR_ELIMIT, NULL, "query memory limit exceeded");
    const char *q = alias ? alias : qr_table_name(t);
    /* declared SQL types (int4, timestamp, varchar...) kept by CREATE TABLE */
    cJSON *meta = sqlw_meta_load(cx, qr_table_name(t));
    int n = 0;
    QrSqlType pkt = meta ? sqlw_pk_type(meta) : QR_SQL_UNKNOWN;
    bool hidden_pk = meta && sqlw_hidden_pk(meta); /* a row id, not a column */
    QrSqlType pk_decl;
    const char *pk_dn = meta ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                                   sqlw_meta_col(meta, s->primary_key), "type"))
                             : NULL;
    if (pkt == QR_SQL_INT8 && pk_dn && sqlt_from_name(pk_dn, &pk_decl) && sqlt_is_int(pk_decl) &&
        pk_decl != QR_SQL_OID)
        pkt = pk_decl; /* an integer / smallint key reads as declared (SERIAL is int4) */
    c[n] = (SqlCol){.name = s->primary_key, .qual = q,
                    .type = pkt != QR_SQL_UNKNOWN ? pkt : pk_type(t), .field = -1,
                    .attnum = hidden_pk ? 0 : 1, .hidden = hidden_pk};
    n++;
    for (int f = 0; f < s->n_fields; f++) {
        if (!strcmp(s->fields[f].name, s->primary_key) || sqlw_col_pending(meta, s->fields[f].name))
            continue; /* (an ADD COLUMN of an open block, or of one that did not commit) */
        QrSqlType ty = sql_field_type(s->fields[f].type), decl;
        const char *dn = meta ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                                    sqlw_meta_col(meta, s->fields[f].name), "type"))
                              : NULL;
        if (dn && sqlt_from_name(dn, &decl) && decl != QR_SQL_OID && decl != QR_SQL_NAME)
            ty = decl;
        /* numeric(p, s) and varchar(n) are checked by writes */
        const cJSON *tm = ty == QR_SQL_NUMERIC || ty == QR_SQL_VARCHAR
                              ? cJSON_GetObjectItemCaseSensitive(
                                    sqlw_meta_col(meta, s->fields[f].name), "typmod")
                              : NULL;
        c[n] = (SqlCol){.name = qr_arena_strndup(cx->arena, s->fields[f].name,
                                                 strlen(s->fields[f].name)),
                        .qual = q, .type = ty, .field = f,
                        .attnum = (int16_t)(n + 1 - hidden_pk),
                        .typmod = cJSON_IsNumber(tm) ? (int32_t)tm->valuedouble : -1};
        n++;
    }
    cJSON_Delete(meta);
    c[n++] = (SqlCol){.name = "_id", .qual = q, .type = QR_SQL_INT8, .field = -2, .hidden = true};
    c[n++] = (SqlCol){.name = "_score", .qual = q, .type = QR_SQL_FLOAT4, .field = -3,
                      .hidden = true};
    sc->n = n;
    sc->cols = c;
    *out = sc;
    return QR_OK;
}

/* ---- the plan summary of the result ---- */

/* Append "qual:path" to the result's plan summary (at most ~500 bytes). */
static void plan_note(SqlCtx *cx, const SqlTableScan *sc, const char *path)
{
    QrSqlResult *res = cx->res;
    if (!res || !res->arena)
        return;
    size_t old = res->plan ? strlen(res->plan) : 0;
    if (old > 500)
        return;
    char buf[600];
    const char *q = sc->qual ? sc->qual : qr_table_name(sc->t);
    int n = snprintf(buf, sizeof buf, "%s%s%s:%s", old ? res->plan : "", old ? ", " : "", q, path);
    if (n > 0 && (size_t)n >= sizeof buf)
        n = (int)sizeof buf - 1;
    char *p = n > 0 ? qr_arena_strndup(res->arena, buf, (size_t)n) : NULL;
    if (p)
        res->plan = p;
}

/* ---- column predicates (for the scan path) ---- */

typedef struct ColPredRef {
    int field;
    ColPred pred;
    ColVal set_storage[64];
} ColPredRef;

/* A numeric constant as the double it equals exactly, if it does (at most
 * 15 significant digits: 0.1 is the double nearest 0.1, as a float column
 * holds it). */
static bool num_double(const SqlValue *v, double *out)
{
    char buf[48];
    size_t sig = 0;
    if (v->u.s.n >= sizeof buf)
        return false;
    for (size_t i = 0; i < v->u.s.n; i++) {
        char c = v->u.s.s[i];
        if (c != '-' && c != '.' && (c < '0' || c > '9'))
            return false; /* NaN, Infinity: the rows decide */
        sig += c >= '1' || (c == '0' && sig > 0);
    }
    if (sig > 15)
        return false;
    memcpy(buf, v->u.s.s, v->u.s.n);
    buf[v->u.s.n] = 0;
    *out = strtod(buf, NULL);
    return true;
}

/* A constant as a value of field fd's column, when a column predicate
 * compares exactly as SQL does (a numeric(p, s) field's column holds
 * value * 10^s: only constants with at most s fraction digits convert). */
static bool to_colval(const SqlValue *v, const QrField *fd, ColVal *out)
{
    if (v->is_null)
        return false;
    QrFieldType ft = fd->type;
    double d;
    switch (ft) {
    case QR_FT_NUMERIC: {
        char buf[48];
        int64_t sv;
        size_t n = sqlt_is_int(v->type)
                       ? (size_t)snprintf(buf, sizeof buf, "%lld", (long long)v->u.i)
                       : v->type == QR_SQL_NUMERIC && v->u.s.n < sizeof buf
                             ? (memcpy(buf, v->u.s.s, v->u.s.n), v->u.s.n)
                             : 0;
        if (fd->scale < 0 || n == 0 || dec_to_scaled(buf, n, fd->scale, &sv) != 0 ||
            sv == DEC_SCALED_NAN)
            return false;
        char back[48];
        int bn = dec_from_scaled(sv, fd->scale, back);
        SqlValue a = sqlv_text(buf, n), b = sqlv_text(back, (size_t)bn);
        a.type = b.type = QR_SQL_NUMERIC;
        if (sqlt_is_int(v->type) ? false : sqln_cmp(&a, &b) != 0)
            return false; /* more digits than the column's scale: rows decide */
        *out = col_val_int(sv);
        return true;
    }
    case QR_FT_INT:
    case QR_FT_FLOAT:
        if (sqlt_is_int(v->type))
            *out = ft == QR_FT_INT ? col_val_int(v->u.i) : col_val_float((double)v->u.i);
        else if (v->type == QR_SQL_FLOAT8 || v->type == QR_SQL_FLOAT4)
            *out = col_val_float(v->u.f);
        else if (v->type == QR_SQL_NUMERIC && num_double(v, &d))
            *out = col_val_float(d); /* (an int column places it between its keys) */
        else
            return false;
        return true;
    case QR_FT_TIMESTAMP:
        if (!sqlt_is_ts(v->type))
            return false;
        *out = col_val_int(v->u.i);
        return true;
    case QR_FT_BOOL:
        if (v->type != QR_SQL_BOOL)
            return false;
        *out = col_val_bool(v->u.b);
        return true;
    case QR_FT_KEYWORD:
        if (!sqlt_is_str(v->type))
            return false;
        *out = col_val_str(v->u.s.s, v->u.s.n);
        return true;
    default:
        return false;
    }
}

/* A column of this table with a typed column (not full text). */
static int col_field(const SqlTableScan *sc, const SqlExpr *e, const QrField **ft)
{
    if (e->kind != SE_COL || e->col < sc->first || e->col >= sc->first + sc->n_cols)
        return -1;
    int f = sc->scope->cols[e->col].field;
    if (f < 0)
        return -1;
    const QrField *fd = &qr_table_schema(sc->t)->fields[f];
    if (fd->type == QR_FT_TEXT)
        return -1;
    *ft = fd;
    return f;
}

static bool colpred_of(SqlCtx *cx, const SqlTableScan *sc, const SqlExpr *e, ColPredRef *out)
{
    const QrField *ft = NULL;
    memset(out, 0, sizeof *out);
    SqlEvalRow none = {.doc = -1};
    if (e->kind == SE_CMP && e->op < 100) {
        const SqlExpr *l = e->args[0], *r = e->args[1];
        int op = e->op;
        int f = col_field(sc, l, &ft);
        if (f < 0) {
            f = col_field(sc, r, &ft);
            const SqlExpr *t = l;
            l = r;
            r = t;
            static const int FLIP[] = {SQL_CMP_EQ, SQL_CMP_NE, SQL_CMP_GT, SQL_CMP_GE, SQL_CMP_LT,
                                       SQL_CMP_LE};
            op = FLIP[op];
        }
        if (f < 0 || !sql_expr_is_const(r))
            return false;
        SqlValue v;
        if (sql_expr_eval(cx, r, &none, &v) || !to_colval(&v, ft, &out->pred.v))
            return false;
        static const ColPredOp OPS[] = {CP_EQ, CP_NE, CP_LT, CP_LE, CP_GT, CP_GE};
        out->pred.op = OPS[op];
        out->field = f;
        return true;
    }
    if (e->kind == SE_IN && e->op == 0 && e->n_args - 1 <= 64) {
        int f = col_field(sc, e->args[0], &ft);
        if (f < 0)
            return false;
        size_t k = 0;
        for (int i = 1; i < e->n_args; i++) {
            SqlValue v;
            if (!sql_expr_is_const(e->args[i]) || sql_expr_eval(cx, e->args[i], &none, &v))
                return false;
            if (v.is_null)
                continue;
            if (!to_colval(&v, ft, &out->set_storage[k++]))
                return false;
        }
        out->pred.op = CP_IN;
        out->pred.set = out->set_storage;
        out->pred.n_set = k;
        out->field = f;
        return true;
    }
    if (e->kind == SE_IS_NULL || e->kind == SE_IS_NOT_NULL) {
        int f = col_field(sc, e->args[0], &ft);
        if (f < 0)
            return false;
        out->pred.op = e->kind == SE_IS_NULL ? CP_IS_NULL : CP_IS_NOT_NULL;
        out->field = f;
        return true;
    }
    return false;
}

/* The column predicates among a scan's conjuncts (cp has n_conj slots). */
static int colpreds(SqlCtx *cx, const SqlTableScan *sc, ColPredRef *cp, int *n_cp)
{
    *n_cp = 0;
    for (int k = 0; k < sc->n_conj; k++)
        if (colpred_of(cx, sc, sc->conj[k], &cp[*n_cp]))
            (*n_cp)++;
    return cx->err->code;
}

/* The column predicates as a filter tree for the text engine, which then
 * advances the postings into the filter's bitmap. */
static QrFilter *colpred_filter(SqlCtx *cx, const ColPredRef *cp, int n_cp)
{
    QrFilter *kids[64];
    int n = 0;
    for (int k = 0; k < n_cp && n < 64; k++)
        kids[n++] = qr_filter_pred(cp[k].field, &cp[k].pred);
    for (int k = 0; k < n; k++)
        if (!kids[k]) {
            for (int j = 0; j < n; j++)
                qr_filter_free(kids[j]);
            sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
            return NULL;
        }
    QrFilter *f = qr_filter_and_n(kids, n);
    if (!f)
        sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    return f;
}

/* count(*) of column predicates alone, per segment through the filter
 * engine: from B-tree subtree counts when the segment has no deletes and
 * the predicates are one B-tree'd range, else from the filter's bitmap. */
static int filter_count(SqlCtx *cx, SqlTableScan *sc, const ColPredRef *cp, int n_cp,
                        uint64_t *count, bool *done)
{
    uint64_t t0 = qr_now_ns();
    QrFilter *filter = colpred_filter(cx, cp, n_cp);
    if (!filter)
        return cx->err->code;
    Snapshot *snap = sql_snapshot(cx, sc->t);
    if (!snap)
        return cx->err->code;
    int rc = QR_OK;
    uint64_t total = 0, bt_segs = 0;
    for (int si = 0; si < snap->n_segs && rc == QR_OK; si++) {
        if ((rc = sql_check(cx)))
            break;
        FilterSeg *fs = NULL;
        QrError e;
        qr_error_clear(&e);
        QrFilterStats st = {0};
        uint64_t c = 0;
        if (filter_seg_compile(filter, snap->segs[si], &fs, &e) != QR_OK) {
            rc = QR_ENOTFOUND; /* a column this segment cannot compare: rows decide */
            break;
        }
        bool clean = !snap->dels[si] || roaring_bitmap_is_empty(snap->dels[si]);
        if (clean && cx->path != SQL_PATH_SCAN && cx->path != SQL_PATH_FULL &&
            filter_seg_btree_count(fs, &c, &st)) {
            bt_segs++;
        } else {
            roaring_bitmap_t *hits = roaring_bitmap_create();
            QrAccessPath ap = cx->path == SQL_PATH_BTREE ? QR_ACCESS_BTREE
                              : cx->path == SQL_PATH_AUTO ? QR_ACCESS_AUTO
                                                          : QR_ACCESS_SCAN;
            if (!hits)
                rc = sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
            else if (filter_seg_eval(fs, ap, snap->dels[si], NULL, hits, &st, &e) != QR_OK) {
                qr_error_copy(cx->err, &e);
                rc = e.code;
            } else
                c = roaring_bitmap_get_cardinality(hits);
            if (hits)
                roaring_bitmap_free(hits);
        }
        total += c;
        sc->zm_blocks_total += st.blocks_total;
        sc->zm_blocks_skipped += st.blocks_skipped;
        sc->bt_pages += st.btree_pages;
        filter_seg_free(fs);
    }
    snapshot_release(snap);
    qr_filter_free(filter);
    if (rc == QR_ENOTFOUND && !cx->err->code)
        return QR_OK; /* *done stays false */
    if (rc)
        return rc;
    sc->ms = (double)(qr_now_ns() - t0) / 1e6;
    sc->rows_out = *count = total;
    sc->path = bt_segs || sc->bt_pages ? SQL_PATH_BTREE : SQL_PATH_SCAN;
    sc->n_colpreds = n_cp;
    *done = true;
    return QR_OK;
}

int sql_scan_count_text(SqlCtx *cx, SqlTableScan *sc, uint64_t *count, bool *done)
{
    *done = false;
    ColPredRef *cp = qr_arena_calloc(cx->arena, (size_t)(sc->n_conj + 1) * sizeof *cp);
    int n_cp;
    if (!cp)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    if (colpreds(cx, sc, cp, &n_cp))
        return cx->err->code;
    if (sc->drive < 0 && sc->n_texts == 0 && n_cp > 0 && n_cp == sc->n_conj)
        return filter_count(cx, sc, cp, n_cp, count, done);
    if (sc->drive < 0 || n_cp != sc->n_conj - 1)
        return QR_OK; /* some condition needs the rows */
    uint64_t t0 = qr_now_ns();
    QrFilter *f = n_cp ? colpred_filter(cx, cp, n_cp) : NULL;
    if (n_cp && !f)
        return cx->err->code;
    Snapshot *snap = sql_snapshot(cx, sc->t);
    if (!snap)
        return cx->err->code;
    SqlTextRun *tr = sql_text_run_new(cx, sc->texts[sc->drive], sc->t, sc->scope);
    int rc = tr ? sql_text_open(cx, tr, snap) : (int)cx->err->code;
    if (rc == QR_OK)
        rc = sql_text_count(cx, tr, snap, f, sc, count);
    sql_text_close(tr);
    snapshot_release(snap);
    qr_filter_free(f);
    sc->ms = (double)(qr_now_ns() - t0) / 1e6;
    sc->rows_out = sc->text_rows = *count;
    sc->path = n_cp ? SQL_PATH_SCAN : SQL_PATH_TEXT;
    sc->n_colpreds = n_cp;
    sc->text_strategy = "count";
    *done = rc == QR_OK;
    return rc;
}

/* Whole-table count(*), count(col), min(col), max(col) from the segments'
 * column statistics: no row is read.  Only when no segment has deletes
 * (statistics count deleted rows too); *done false otherwise. */
int sql_scan_stats_aggs(SqlCtx *cx, SqlTableScan *sc, SqlAgg *const *aggs, int n, SqlValue *out,
                        bool *done)
{
    *done = false;
    const QrSchema *schema = qr_table_schema(sc->t);
    for (int k = 0; k < n; k++) {
        const SqlAgg *a = aggs[k];
        if (a->filter)
            return QR_OK;  /* statistics cover every row */
        if (a->kind == SA_COUNT_STAR)
            continue;
        if ((a->kind != SA_COUNT && a->kind != SA_MIN && a->kind != SA_MAX) || a->distinct ||
            a->arg->kind != SE_COL || a->arg->col < sc->first || a->arg->col >= sc->first + sc->n_cols)
            return QR_OK;
        int f = sc->scope->cols[a->arg->col].field;
        if (f < 0 || schema->fields[f].type == QR_FT_TEXT ||
            (schema->fields[f].type == QR_FT_NUMERIC && a->kind != SA_COUNT))
            return QR_OK; /* (a numeric's text orders by its digits, not by memcmp) */
    }
    Snapshot *snap = sql_snapshot(cx, sc->t);
    if (!snap)
        return cx->err->code;
    bool clean = true; /* count(*) alone is exact with deletes too (n_live) */
    for (int i = 0; i < snap->n_segs; i++)
        if (snap->dels[i] && !roaring_bitmap_is_empty(snap->dels[i]))
            for (int k = 0; k < n; k++)
                clean &= aggs[k]->kind == SA_COUNT_STAR;
    if (!clean) {
        snapshot_release(snap);
        return QR_OK;
    }
    int rc = QR_OK;
    for (int k = 0; k < n && rc == QR_OK; k++) {
        const SqlAgg *a = aggs[k];
        out[k] = sqlv_null();
        out[k].type = a->type;
        if (a->kind == SA_COUNT_STAR) {
            out[k] = sqlv_int((int64_t)snap->n_live);
            continue;
        }
        int f = sc->scope->cols[a->arg->col].field;
        int64_t cnt = 0;
        for (int i = 0; i < snap->n_segs; i++) {
            const Column *c = seg_column(snap->segs[i], f);
            if (!c)
                continue;
            ColStats st = col_stats(c);
            cnt += (int64_t)st.rows - (int64_t)st.null_count;
            if (a->kind == SA_COUNT || !st.has_range)
                continue;
            const ColVal *cv = a->kind == SA_MIN ? &st.min : &st.max;
            SqlValue v;
            switch (cv->kind) {
            case CV_INT: v = sqlv_int(cv->u.i); v.type = a->type; break;
            case CV_FLOAT: v = sqlv_float(cv->u.f); break;
            case CV_BOOL: v = sqlv_bool(cv->u.b); break;
            default: v = sqlv_text(cv->u.str.s, cv->u.str.n); break;
            }
            int c2 = out[k].is_null ? 0 : sqlv_cmp(&v, &out[k]);
            if (out[k].is_null || (a->kind == SA_MIN ? c2 < 0 : c2 > 0)) {
                if ((rc = sqlv_own(cx, &v)))
                    break;
                out[k] = v;
            }
        }
        if (a->kind == SA_COUNT)
            out[k] = sqlv_int(cnt);
    }
    snapshot_release(snap);
    sc->from_stats = rc == QR_OK;
    *done = rc == QR_OK;
    return rc;
}

/* ---- fetching a row ---- */

typedef struct RowFetch {
    DocStoreCursor *dc;
    int dc_seg;
    cJSON *doc;           /* parsed stored document of the current row */
    bool doc_loaded;
} RowFetch;

static int load_doc(SqlCtx *cx, Snapshot *snap, int si, uint32_t local, RowFetch *rf)
{
    if (rf->doc_loaded)
        return QR_OK;
    rf->doc_loaded = true;
    if (rf->dc_seg != si) {
        ds_cursor_free(rf->dc);
        rf->dc = ds_cursor_new(seg_docs(snap->segs[si]));
        rf->dc_seg = si;
        if (!rf->dc)
            return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    }
    const uint8_t *d;
    size_t dl;
    QrError e;
    qr_error_clear(&e);
    if (ds_get(rf->dc, local, &d, &dl, &e) != QR_OK) {
        qr_error_copy(cx->err, &e);
        return e.code;
    }
    rf->doc = cJSON_ParseWithLength((const char *)d, dl);
    return QR_OK;
}

static void json_value(SqlCtx *cx, const cJSON *v, QrSqlType t, SqlValue *out)
{
    *out = sqlv_null();
    out->type = t;
    if (!v || cJSON_IsNull(v))
        return;
    if (cJSON_IsString(v)) {
        SqlValue tv = sqlv_text(v->valuestring, strlen(v->valuestring));
        if (t == QR_SQL_TEXT) {
            *out = tv;
            return;
        }
        QrError e, *save = cx->err;
        qr_error_clear(&e);
        cx->err = &e;
        if (sqlv_cast(cx, &tv, t, -1, out) != QR_OK) {
            *out = sqlv_null();
            out->type = t;
        }
        cx->err = save;
        return;
    }
    if (cJSON_IsBool(v)) {
        if (t == QR_SQL_BOOL)
            *out = sqlv_bool(cJSON_IsTrue(v));
        else
            *out = sqlv_text(cJSON_IsTrue(v) ? "true" : "false", cJSON_IsTrue(v) ? 4 : 5);
        return;
    }
    if (cJSON_IsNumber(v)) {
        if (t == QR_SQL_INT8)
            *out = sqlv_int((int64_t)v->valuedouble);
        else if (t == QR_SQL_FLOAT8)
            *out = sqlv_float(v->valuedouble);
        else {
            char *p = cJSON_PrintUnformatted(v);
            if (p) {
                char *s = qr_arena_strndup(cx->arena, p, strlen(p));
                if (s)
                    *out = sqlv_text(s, strlen(s));
                cJSON_free(p);
            }
        }
        return;
    }
    /* arrays of strings: the strings joined by a space; other shapes as JSON */
    if (cJSON_IsArray(v)) {
        QrBuf b;
        qr_buf_init(&b);
        const cJSON *it;
        bool plain = true;
        cJSON_ArrayForEach(it, v)
        {
            if (!cJSON_IsString(it)) {
                plain = false;
                break;
            }
            if (b.len)
                qr_buf_putc(&b, ' ');
            qr_buf_append(&b, it->valuestring, strlen(it->valuestring));
        }
        char *s = NULL;
        size_t n = 0;
        if (plain) {
            s = qr_arena_strndup(cx->arena, b.data ? (char *)b.data : "", b.len);
            n = b.len;
        } else {
            char *p = cJSON_PrintUnformatted(v);
            if (p) {
                n = strlen(p);
                s = qr_arena_strndup(cx->arena, p, n);
                cJSON_free(p);
            }
        }
        qr_buf_free(&b);
        if (s)
            *out = sqlv_text(s, n);
        return;
    }
}

/* ---- planning ---- */

static double row_cost(const SqlTableScan *sc)
{
    const QrSchema *s = qr_table_schema(sc->t);
    double c = 0;
    bool doc = false;
    for (int i = sc->first; i < sc->first + sc->n_cols; i++) {
        const SqlCol *col = &sc->scope->cols[i];
        if (!col->used)
            continue;
        c += C_ROW * 0.2;
        if (col->field >= 0 && s->fields[col->field].type == QR_FT_TEXT && !s->fields[col->field].column)
            doc = true;
    }
    return C_ROW + c + (doc ? C_DOC : 0) + 0.1 * sc->n_conj;
}

static void add_alt(SqlTableScan *sc, SqlAccessPath p, double rows, double cost)
{
    if (sc->n_alts < (int)(sizeof sc->alts / sizeof *sc->alts))
        sc->alts[sc->n_alts++] = (SqlScanAlt){p, rows, cost};
}

/* Estimated rows and zone-map cost of the column predicates over a snapshot. */
static int colpred_estimate(SqlCtx *cx, Snapshot *snap, ColPredRef *cp, int n_cp,
                            double *sel_out, double *scan_cost)
{
    double rows_total = 0, match_est = 0, blocks = 0;
    for (int i = 0; i < snap->n_segs; i++) {
        double segsel = 1.0;
        uint32_t nd = seg_n_docs(snap->segs[i]);
        rows_total += nd;
        for (int k = 0; k < n_cp; k++) {
            const Column *c = seg_column(snap->segs[i], cp[k].field);
            if (!c) {
                segsel *= cp[k].pred.op == CP_IS_NULL ? 1.0 : 0.0;
                continue;
            }
            ColFilter *f;
            QrError e;
            qr_error_clear(&e);
            if (col_filter_new(c, &cp[k].pred, &f, &e) != QR_OK)
                return sql_err_at(cx, -1, e.code, NULL, "%s", e.message);
            segsel *= col_filter_selectivity(f);
            ColScanStats st = {0};
            col_filter_zone_plan(f, &st);
            blocks += (double)st.blocks_scanned + 0.1 * (double)st.blocks_full;
            col_filter_free(f);
        }
        match_est += segsel * nd;
    }
    *sel_out = rows_total > 0 ? match_est / rows_total : 0;
    *scan_cost = blocks * C_BLOCK + (double)snap->n_segs;
    return QR_OK;
}


/* ---- primary-key lookups ---- */

typedef struct PkKeys {
    int n, cap;
    const uint8_t **key;
    size_t *len;
    int n_values;          /* values (each may give two encodings) */
} PkKeys;

static bool pk_add(SqlCtx *cx, PkKeys *k, const uint8_t *key, size_t len)
{
    if (k->n == k->cap) {
        int nc = k->cap ? k->cap * 2 : 16;
        const uint8_t **nk = qr_arena_alloc(cx->arena, (size_t)nc * sizeof *nk);
        size_t *nl = qr_arena_alloc(cx->arena, (size_t)nc * sizeof *nl);
        if (!nk || !nl)
            return false;
        if (k->n) {
            memcpy(nk, k->key, (size_t)k->n * sizeof *nk);
            memcpy(nl, k->len, (size_t)k->n * sizeof *nl);
        }
        k->key = nk;
        k->len = nl;
        k->cap = nc;
    }
    uint8_t *c = qr_arena_alloc(cx->arena, len + 1);
    if (!c)
        return false;
    memcpy(c, key, len);
    k->key[k->n] = c;
    k->len[k->n++] = len;
    return true;
}

static bool pk_add_int(SqlCtx *cx, PkKeys *k, int64_t i)
{
    uint8_t b[9];
    uint64_t u = (uint64_t)i ^ (1ull << 63);
    b[0] = 'i';
    for (int j = 0; j < 8; j++)
        b[1 + j] = (uint8_t)(u >> (56 - 8 * j));
    return pk_add(cx, k, b, 9);
}

/* The key encodings (index/segment.h pk_encode) a value may be stored
 * under: rows are still checked against the condition, so trying both an
 * integer and a string form only costs a lookup.  False: not a key value. */
static bool pk_add_value(SqlCtx *cx, PkKeys *k, const SqlValue *v)
{
    k->n_values++;
    if (v->is_null)
        return true; /* matches nothing */
    char num[32];
    if (sqlt_is_int(v->type)) {
        int n = snprintf(num, sizeof num, "%lld", (long long)v->u.i);
        uint8_t b[32];
        b[0] = 's';
        memcpy(b + 1, num, (size_t)n);
        return pk_add_int(cx, k, v->u.i) && pk_add(cx, k, b, (size_t)n + 1);
    }
    if (v->type == QR_SQL_NUMERIC) { /* an integer key equals it only if it is whole */
        SqlValue w, i;
        QrError e, *save = cx->err;
        qr_error_clear(&e);
        cx->err = &e;
        bool whole = sqln_round(cx, v, 0, SQLN_TRUNC, &w) == QR_OK && sqln_cmp(&w, v) == 0 &&
                     sqlv_cast(cx, &w, QR_SQL_INT8, -1, &i) == QR_OK;
        cx->err = save;
        return !whole || pk_add_int(cx, k, i.u.i);
    }
    if (sqlt_is_float(v->type)) {
        if (v->u.f != floor(v->u.f) || fabs(v->u.f) > 9007199254740992.0)
            return true; /* no integer key equals it; a string key compares as text */
        return pk_add_int(cx, k, (int64_t)v->u.f);
    }
    if (!sqlt_is_str(v->type))
        return false;
    size_t n = v->u.s.n;
    if (n == 0 || n + 1 > PK_KEY_MAX)
        return true; /* no such key can exist */
    uint8_t *b = qr_arena_alloc(cx->arena, n + 1);
    if (!b)
        return false;
    b[0] = 's';
    memcpy(b + 1, v->u.s.s, n);
    if (!pk_add(cx, k, b, n + 1))
        return false;
    if (n < sizeof num) {
        memcpy(num, v->u.s.s, n);
        num[n] = 0;
        char *end;
        long long i = strtoll(num, &end, 10);
        if (*end == 0 && end != num && !pk_add_int(cx, k, i))
            return false;
    }
    return true;
}

static bool pk_col(const SqlTableScan *sc, const SqlExpr *e)
{
    return e->kind == SE_COL && e->col >= sc->first && e->col < sc->first + sc->n_cols &&
           sc->scope->cols[e->col].field == -1;
}

/* Keys of a conjunct `pk = const` / `pk IN (consts)` (also inside a
 * top-level AND tree).  True when found. */
static bool pk_keys_of(SqlCtx *cx, const SqlTableScan *sc, const SqlExpr *e, PkKeys *k)
{
    SqlEvalRow none = {.doc = -1};
    if (e->kind == SE_AND) {
        for (int i = 0; i < e->n_args; i++)
            if (pk_keys_of(cx, sc, e->args[i], k))
                return true;
        return false;
    }
    const SqlExpr *vals[MAX_PK_KEYS];
    int nv = 0;
    if (e->kind == SE_CMP && e->op == SQL_CMP_EQ && e->n_args == 2) {
        if (pk_col(sc, e->args[0]) && sql_expr_is_const(e->args[1]))
            vals[nv++] = e->args[1];
        else if (pk_col(sc, e->args[1]) && sql_expr_is_const(e->args[0]))
            vals[nv++] = e->args[0];
        else
            return false;
    } else if (e->kind == SE_IN && e->op == 0 && e->n_args >= 2 && e->n_args - 1 <= MAX_PK_KEYS &&
               pk_col(sc, e->args[0])) {
        for (int i = 1; i < e->n_args; i++) {
            if (!sql_expr_is_const(e->args[i]))
                return false;
            vals[nv++] = e->args[i];
        }
    } else {
        return false;
    }
    /* evaluation errors (e.g. no parameter values while preparing) only
     * mean no key path: the row check reports them */
    QrError e2, *save = cx->err;
    qr_error_clear(&e2);
    cx->err = &e2;
    PkKeys got = {0};
    bool ok = true;
    for (int i = 0; i < nv && ok; i++) {
        SqlValue v;
        ok = sql_expr_eval(cx, vals[i], &none, &v) == QR_OK && pk_add_value(cx, &got, &v);
    }
    cx->err = save;
    if (ok)
        *k = got;
    return ok;
}

static int pk_find(SqlCtx *cx, const SqlTableScan *sc, PkKeys *k)
{
    memset(k, 0, sizeof *k);
    k->n_values = -1;
    for (int i = 0; i < sc->n_conj; i++)
        if (pk_keys_of(cx, sc, sc->conj[i], k))
            return 1;
    k->n_values = -1;
    return 0;
}

/* ---- primary-key ranges: pk > a, pk <= b, pk BETWEEN a AND b ----
 * Bounds are kept inclusive and widened to whole keys (a superset: every
 * row is checked against its conditions again).  Keys of the other kind
 * (a string key in an integer-keyed table, or the reverse) are always
 * candidates, since they compare by their SQL value, not their bytes. */

typedef struct PkRange {
    bool int_keys;             /* the range is over 'i' keys, else 's' keys */
    bool lo_on, hi_on;
    int64_t lo_i, hi_i;
    SqlValue lo_s, hi_s;
    uint64_t n;                /* keys in range in the snapshot (deletes included) */
} PkRange;

static void pk_range_tighten(SqlCtx *cx, const SqlTableScan *sc, const SqlExpr *e, PkRange *r,
                             bool *found)
{
    if (e->kind == SE_AND) {
        for (int i = 0; i < e->n_args; i++)
            pk_range_tighten(cx, sc, e->args[i], r, found);
        return;
    }
    if (e->kind != SE_CMP || e->n_args != 2 || e->op < SQL_CMP_LT)
        return;
    int op = e->op;
    const SqlExpr *c;
    if (pk_col(sc, e->args[0]) && sql_expr_is_const(e->args[1])) {
        c = e->args[1];
    } else if (pk_col(sc, e->args[1]) && sql_expr_is_const(e->args[0])) {
        c = e->args[0]; /* a < pk is pk > a */
        op = op == SQL_CMP_LT ? SQL_CMP_GT : op == SQL_CMP_LE ? SQL_CMP_GE
             : op == SQL_CMP_GT ? SQL_CMP_LT : SQL_CMP_LE;
    } else {
        return;
    }
    /* as for key lookups, an evaluation error only means no range */
    SqlEvalRow none = {.doc = -1};
    QrError e2, *save = cx->err;
    qr_error_clear(&e2);
    cx->err = &e2;
    SqlValue v;
    bool ok = sql_expr_eval(cx, c, &none, &v) == QR_OK && !v.is_null;
    cx->err = save;
    if (!ok)
        return;
    bool lower = op == SQL_CMP_GT || op == SQL_CMP_GE;
    if (r->int_keys) {
        int64_t x;
        SqlValue w, iv;
        if (sqlt_is_int(v.type))
            x = v.u.i;
        else if (v.type == QR_SQL_NUMERIC) { /* floor / ceil exactly; past int8: no range */
            qr_error_clear(&e2);
            cx->err = &e2;
            ok = sqln_round(cx, &v, 0, lower ? SQLN_FLOOR : SQLN_CEIL, &w) == QR_OK &&
                 sqlv_cast(cx, &w, QR_SQL_INT8, -1, &iv) == QR_OK;
            cx->err = save;
            if (!ok)
                return;
            x = iv.u.i;
        } else if (sqlt_is_float(v.type) && isfinite(v.u.f) && fabs(v.u.f) < 9.2e18)
            x = (int64_t)(lower ? floor(v.u.f) : ceil(v.u.f));
        else
            return;
        if (lower && (!r->lo_on || x > r->lo_i))
            r->lo_i = x;
        else if (!lower && (!r->hi_on || x < r->hi_i))
            r->hi_i = x;
        r->lo_on |= lower;
        r->hi_on |= !lower;
    } else {
        if (!sqlt_is_str(v.type))
            return;
        if (lower && (!r->lo_on || sqlv_cmp(&v, &r->lo_s) > 0))
            r->lo_s = v;
        else if (!lower && (!r->hi_on || sqlv_cmp(&v, &r->hi_s) < 0))
            r->hi_s = v;
        r->lo_on |= lower;
        r->hi_on |= !lower;
    }
    *found = true;
}

static size_t pk_range_key(const PkRange *r, bool hi, uint8_t *out)
{
    if (r->int_keys) {
        out[0] = 'i';
        if (!(hi ? r->hi_on : r->lo_on)) { /* "i" sorts before every int key, "i" ff.. after */
            memset(out + 1, 0xff, 8);
            return hi ? 9 : 1;
        }
        uint64_t u = (uint64_t)(hi ? r->hi_i : r->lo_i) ^ (1ull << 63);
        for (int j = 0; j < 8; j++)
            out[1 + j] = (uint8_t)(u >> (56 - 8 * j));
        return 9;
    }
    out[0] = 's';
    const SqlValue *v = hi ? &r->hi_s : &r->lo_s;
    if (!(hi ? r->hi_on : r->lo_on))
        return hi ? 0 : 1; /* 0: open above (no key kind sorts after 's') */
    size_t n = v->u.s.n < PK_KEY_MAX - 1 ? v->u.s.n : PK_KEY_MAX - 1; /* no key is longer */
    memcpy(out + 1, v->u.s.s, n);
    return n + 1;
}

/* Positions of segment si's sorted keys to visit: the range, then every
 * key of the other kind.  spans[0..1] = {from, to}, spans[2..3] likewise. */
static void pk_range_spans(const PkRange *r, const Segment *seg, uint32_t spans[4])
{
    uint8_t lo[PK_KEY_MAX + 1], hi[PK_KEY_MAX + 1];
    size_t ll = pk_range_key(r, false, lo), hl = pk_range_key(r, true, hi);
    seg_pk_range(seg, lo, ll, hl ? hi : NULL, hl, &spans[0], &spans[1]);
    static const uint8_t i_lo[1] = {'i'}, i_hi[9] = {'i', 0xff, 0xff, 0xff, 0xff,
                                                     0xff, 0xff, 0xff, 0xff};
    static const uint8_t s_lo[1] = {'s'};
    if (r->int_keys)
        seg_pk_range(seg, s_lo, 1, NULL, 0, &spans[2], &spans[3]);
    else
        seg_pk_range(seg, i_lo, 1, i_hi, 9, &spans[2], &spans[3]);
}

/* A range over the primary key among the conjuncts: true and *r counted
 * over the snapshot when there is one. */
static bool pk_range_find(SqlCtx *cx, const SqlTableScan *sc, Snapshot *snap, PkRange *r)
{
    memset(r, 0, sizeof *r);
    r->int_keys = pk_type(sc->t) == QR_SQL_INT8;
    bool found = false;
    for (int i = 0; i < sc->n_conj; i++)
        pk_range_tighten(cx, sc, sc->conj[i], r, &found);
    if (!found)
        return false;
    for (int si = 0; si < snap->n_segs; si++) {
        uint32_t sp[4];
        pk_range_spans(r, snap->segs[si], sp);
        r->n += (uint64_t)(sp[1] - sp[0]) + (sp[3] - sp[2]);
    }
    return true;
}

/* The live docs holding any of the keys, in doc order, without repeats. */
static int pk_docs(SqlCtx *cx, Snapshot *snap, const PkKeys *k, int64_t **docs, uint64_t *n)
{
    uint64_t cap = (uint64_t)k->n + 1, m = 0;
    int64_t *d = qr_arena_alloc(cx->arena, cap * sizeof *d);
    if (!d)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    for (int si = 0; si < snap->n_segs; si++)
        for (int i = 0; i < k->n; i++) {
            int64_t local = seg_pk_lookup(snap->segs[si], k->key[i], k->len[i]);
            if (local < 0 || snapshot_deleted(snap, si, (uint32_t)local))
                continue;
            if (m == cap) {
                int64_t *nd = qr_arena_alloc(cx->arena, cap * 2 * sizeof *nd);
                if (!nd)
                    return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
                memcpy(nd, d, m * sizeof *nd);
                d = nd;
                cap *= 2;
            }
            d[m++] = (int64_t)(snap->base[si] + (uint64_t)local);
        }
    qsort(d, m, sizeof *d, cmp_i64);
    uint64_t u = 0;
    for (uint64_t i = 0; i < m; i++)
        if (!u || d[u - 1] != d[i])
            d[u++] = d[i];
    *docs = d;
    *n = u;
    return QR_OK;
}

/* ---- the B-tree path ---- */


/* Cost of the column predicates through the filter engine with B-trees:
 * false when no segment has a B-tree on any of their columns.  Per segment,
 * the candidates are the fewest rows any B-tree'd predicate gives
 * (bt_estimate); predicates without a tree are scanned over the segment's
 * zone maps (a share of `scan_cost`). */
static bool btree_estimate(Snapshot *snap, const ColPredRef *cp, int n_cp, double scan_cost,
                           double *cost)
{
    bool any = false;
    double c = 0;
    int untreed = 0;
    for (int i = 0; i < snap->n_segs; i++) {
        double best = seg_n_docs(snap->segs[i]);
        for (int k = 0; k < n_cp; k++) {
            const struct BTree *bt = seg_btree(snap->segs[i], cp[k].field);
            if (!bt) {
                untreed++;
                continue;
            }
            any = true;
            double e = (double)bt_estimate(bt, &cp[k].pred);
            c += 3 * C_BT_PAGE + e / 512.0 * C_BT_PAGE;
            best = fmin(best, e);
        }
        c += best * C_BT_ROW;
    }
    if (!any)
        return false;
    *cost = c + (n_cp && snap->n_segs ? scan_cost * untreed / ((double)n_cp * snap->n_segs) : 0);
    return true;
}

/* ---- aggregates from column blocks ---- */

static int seg_scan_cand(SqlCtx *cx, SqlTableScan *sc, Snapshot *snap, int si, ColPredRef *cp,
                         int n_cp, const roaring_bitmap_t *within, roaring_bitmap_t **out,
                         bool *empty);


static int seg_text_bitmap(SqlCtx *cx, SqlTableScan *sc, int si, roaring_bitmap_t **out);

static bool colagg_field_ok(const SqlTableScan *sc, Snapshot *snap, int field, bool group)
{
    const QrField *fd = &qr_table_schema(sc->t)->fields[field];
    bool scaled = fd->type == QR_FT_NUMERIC && fd->scale >= 0; /* value * 10^scale, exact */
    if (group ? fd->type != QR_FT_KEYWORD
              : fd->type != QR_FT_INT && fd->type != QR_FT_TIMESTAMP && fd->type != QR_FT_FLOAT &&
                    !scaled)
        return false;
    for (int si = 0; si < snap->n_segs; si++) {
        const Column *c = seg_column(snap->segs[si], field);
        QrColType want = fd->type == QR_FT_KEYWORD ? QR_COL_KEYWORD
                       : fd->type == QR_FT_FLOAT ? QR_COL_FLOAT64
                       : fd->type == QR_FT_INT || scaled ? QR_COL_INT64
                                                 : QR_COL_TIMESTAMP;
        if (c && col_type(c) != want)
            return false;
    }
    return true;
}

/* Every condition is the driving text predicate or a column predicate,
 * the path reads candidates (not a B-tree or key lookup), and the columns
 * have the types the block readers serve. */
static bool colagg_ok(const SqlTableScan *sc, Snapshot *snap, int n_cp)
{
    const SqlColAgg *ca = sc->colagg;
    if (!ca || sc->keep_docs || n_cp + (sc->drive >= 0) != sc->n_conj ||
        sc->n_texts != (sc->drive >= 0) ||
        (sc->path != SQL_PATH_FULL && sc->path != SQL_PATH_SCAN && sc->path != SQL_PATH_TEXT))
        return false;
    if (ca->group_field >= 0 && !colagg_field_ok(sc, snap, ca->group_field, true))
        return false;
    for (int k = 0; k < ca->n; k++)
        if (ca->field[k] >= 0 && !colagg_field_ok(sc, snap, ca->field[k], false))
            return false;
    return true;
}

/* One segment's aggregates from column blocks: the candidates (text ∩
 * column predicates) grouped by the keyword's dictionary codes with the
 * value columns' partial states (colwalk_group, as the HTTP search's terms
 * and stats facets), each group handed to ca->emit. */
static int colagg_segment(SqlCtx *cx, SqlTableScan *sc, Snapshot *snap, int si, ColPredRef *cp,
                          int n_cp)
{
    const SqlColAgg *ca = sc->colagg;
    Segment *seg = snap->segs[si];
    uint32_t nd = seg_n_docs(seg);
    roaring_bitmap_t *cand = NULL;
    bool empty = false;
    int rc = QR_OK;
    roaring_bitmap_t *text = NULL;
    if (sc->drive >= 0 && (rc = seg_text_bitmap(cx, sc, si, &text)))
        return rc;
    if (n_cp || text)
        rc = seg_scan_cand(cx, sc, snap, si, cp, n_cp, text, &cand, &empty);
    if (text)
        roaring_bitmap_free(text);
    if (rc)
        return rc;
    if (empty || nd == 0) {
        if (cand)
            roaring_bitmap_free(cand);
        return QR_OK;
    }
    if (!cand) { /* no condition, or only NULL-tolerant ones on missing columns: every doc */
        if (!(cand = roaring_bitmap_create()))
            return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
        roaring_bitmap_add_range(cand, 0, nd);
    }
    if (snap->dels[si])
        roaring_bitmap_andnot_inplace(cand, snap->dels[si]);
    int n = ca->n;
    ColWalkCol *vals = qr_calloc((size_t)n + 1, sizeof *vals);
    if (!vals) {
        roaring_bitmap_free(cand);
        return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    }
    const QrSchema *schema = qr_table_schema(sc->t);
    for (int k = 0; k < n; k++) /* count(*) reads no column: field -1 reads NULL */
        vals[k] = (ColWalkCol){.field = ca->field[k],
                               .type = ca->field[k] >= 0
                                           ? (QrColType)schema_column_type(&schema->fields[ca->field[k]])
                                           : QR_COL_INT64,
                               .keep = ca->keep && ca->keep[k],
                               .skip_minmax = ca->minmax && !ca->minmax[k]};
    ColWalkGroup g;
    QrError e;
    qr_error_clear(&e);
    if ((rc = sql_check(cx)) == QR_OK &&
        (rc = colwalk_group(seg, cand, ca->group_field, vals, n, &g, &e)) != QR_OK)
        qr_error_copy(cx->err, &e);
    qr_free(vals);
    roaring_bitmap_free(cand);
    if (rc)
        return rc;
    sc->colagg_rows += g.rows;
    for (uint32_t gi = 0; gi <= g.n_codes && rc == QR_OK; gi++) {
        const ColWalkAgg *P = &g.parts[(size_t)gi * (size_t)g.stride];
        if (!P->rows)
            continue;
        SqlValue key = sqlv_null();
        const char *str;
        size_t len;
        if (gi < g.n_codes && col_dict_get(g.key, gi, &str, &len))
            key = sqlv_text(str, len);
        rc = ca->emit(ca->arg, &key, P);
    }
    colwalk_group_free(&g);
    return rc;
}

/* ---- ORDER BY <column> LIMIT k: blocks best zone-map bound first ---- */

/* The walk serves the full and column-scan paths when the first ORDER BY
 * key is an int, float, timestamp or keyword column, of that type in every
 * segment (documents are JSON, so a float column holds no NaN to escape
 * its zone maps). */
static bool order_walk_ok(const SqlTableScan *sc, Snapshot *snap)
{
    if (!sc->order_on || !sc->order_may_enter ||
        (sc->path != SQL_PATH_FULL && sc->path != SQL_PATH_SCAN))
        return false;
    int field = sc->scope->cols[sc->order_col].field;
    if (sc->order_col < sc->first || sc->order_col >= sc->first + sc->n_cols || field < 0)
        return false;
    const QrField *fd = &qr_table_schema(sc->t)->fields[field];
    if (fd->type != QR_FT_INT && fd->type != QR_FT_TIMESTAMP && fd->type != QR_FT_KEYWORD &&
        fd->type != QR_FT_FLOAT && !(fd->type == QR_FT_NUMERIC && fd->scale >= 0))
        return false; /* (a scaled numeric's int64 order is its value's, NaN last) */
    int ct = schema_column_type(fd); /* colwalk_order_open wants it in every segment */
    for (int si = 0; si < snap->n_segs; si++) {
        const Column *c = seg_column(snap->segs[si], field);
        if (c && (int)col_type(c) != ct)
            return false;
    }
    return true;
}

/* ---- the scan: candidates per path, batches of rows ---- */

SqlValue *sql_sink_slot(SqlCtx *cx, SqlRowSink *s)
{
    if (s->n == s->cap) {
        uint64_t nc = s->cap ? s->cap * 2 : 256;
        SqlValue *nr = qr_arena_alloc(cx->arena, nc * (uint64_t)s->width * sizeof *nr);
        if (!nr) {
            sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
            qr_error_hint(cx->err, "raise quarry.mem_cap or narrow the query");
            return NULL;
        }
        if (s->n)
            memcpy(nr, s->rows, s->n * (uint64_t)s->width * sizeof *nr);
        s->rows = nr;
        s->cap = nc;
    }
    return s->rows + s->n * (uint64_t)s->width;
}

/* What an open scan holds (SqlTableScan.run; arena memory unless said). */
/* One decoded block of one typed column (run_fill's dense path): every
 * value of the block at once, instead of a random access per row. */
typedef struct BlockCache {
    const Column *cc;         /* the column it was decoded from (NULL: none yet) */
    uint32_t block;
    union {
        int64_t i[COL_BLOCK_ROWS];
        double f[COL_BLOCK_ROWS];
        uint32_t code[COL_BLOCK_ROWS];
        uint8_t b[COL_BLOCK_ROWS];
    } v;
    uint64_t nulls[COL_BLOCK_ROWS / 64];
} BlockCache;

struct SqlScanRun {
    SqlTableScan *sc;         /* borrows: the scan this run belongs to */
    ColPredRef *cp;           /* the column predicates among the conjuncts */
    int n_cp;
    PkKeys pk;
    bool has_pk;
    PkRange range;
    bool planned;
    uint64_t planned_version; /* the snapshot version the plan counted */
    Snapshot *snap;           /* owns one reference while open */
    QrArena *scratch;         /* owns: per-batch values (fetched columns, checks) */
    RowFetch rf;              /* owns its cursor */
    SqlDocSrc src;            /* fills columns of this scan's batches */
    /* candidates: runs of local ids of one segment (or one block) */
    int si;                   /* segment of the current run, -1 before the first */
    uint32_t *ids;            /* owns (qr_malloc): the run's ids; NULL for a range */
    uint64_t n_ids, pos;
    uint32_t r_next, r_end;   /* a range run: [r_next, r_end) */
    bool ended;
    int64_t *gdocs;           /* key lookups, top-k by score: global ids, ascending */
    float *gscores;           /* top-k: their scores */
    uint64_t n_gdocs, gpos;
    const float *run_scores;  /* the run's ids' scores (top-k), or NULL */
    /* text predicates: one run each (sc->texts order), compiled at open */
    SqlTextRun **truns;
    bool drive_cands;         /* candidates come from the driving predicate */
    bool drive_scored;        /* ... with their scores (the _score column is read) */
    SearchCursor cur;         /* the driving predicate's live matches in segment si */
    roaring_bitmap_t *cur_filter; /* owns: the column bitmap cur is advanced into */
    QrFilter *bt_filter;      /* owns: btree path */
    QrFilter *scan_filter;    /* owns: the column predicates (cp) as one filter, scan path */
    ColWalkOrder *walk;       /* owns: the ordered walk's blocks, best first (colwalk.h) */
    roaring_bitmap_t **ocands;/* owns: per segment, the walk's candidates (NULL: all) */
    bool *oskip;              /* owns: per segment, no candidate at all */
    BlockCache **bcache;      /* arena, scope-wide: decoded column blocks (run_fill) */
    /* the batch */
    SqlBatch *b;
    int *cond_cols;           /* scope columns the conjuncts read */
    int n_cond_cols;
    int *doc_cols;            /* used columns read from stored documents */
    int n_doc_cols;
    int *used_cols;           /* every used column of the table */
    int n_used_cols;
    SqlExpr **check;          /* the conjuncts checked per row (not the driving
                                 predicate when it gives the candidates) */
    int n_check;
    int checks_for;           /* drive_cands value check was made for, -1: none yet */
    int prev_k;               /* rows of the previous batch (their filled columns are reset) */
    uint32_t docs[SQL_BATCH_ROWS];
    float scores[SQL_BATCH_ROWS];
    uint16_t sel[SQL_BATCH_ROWS];
};

static void run_reset_cursor(SqlScanRun *R)
{
    qr_free(R->ids);
    R->ids = NULL;
    R->n_ids = R->pos = 0;
    R->r_next = R->r_end = 0;
    R->si = -1;
    R->ended = false;
    R->gdocs = NULL;
    R->gscores = NULL;
    R->run_scores = NULL;
    R->n_gdocs = R->gpos = 0;
    memset(&R->cur, 0, sizeof R->cur);
    qr_filter_free(R->bt_filter);
    R->bt_filter = NULL;
    qr_filter_free(R->scan_filter);
    R->scan_filter = NULL;
    for (int si = 0; R->ocands && R->snap && si < R->snap->n_segs; si++)
        if (R->ocands[si])
            roaring_bitmap_free(R->ocands[si]);
    qr_free(R->ocands);
    qr_free(R->oskip);
    colwalk_order_close(R->walk);
    R->ocands = NULL;
    R->oskip = NULL;
    R->walk = NULL;
}

/* The column predicates' live matches in segment si (among `within`, when
 * not NULL) into *out, a new bitmap, through the filter engine's column
 * scans (colwalk_filter, as the HTTP search's filters); *out NULL with
 * *empty false means every doc of the segment (no predicate and no
 * `within`). */
static int seg_scan_cand(SqlCtx *cx, SqlTableScan *sc, Snapshot *snap, int si, ColPredRef *cp,
                         int n_cp, const roaring_bitmap_t *within, roaring_bitmap_t **out,
                         bool *empty)
{
    SqlScanRun *R = sc->run;
    *out = NULL;
    *empty = within && roaring_bitmap_is_empty(within);
    if (*empty)
        return QR_OK;
    if (n_cp == 0) {
        if (within && !(*out = roaring_bitmap_copy(within)))
            return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
        return QR_OK;
    }
    if (!R->scan_filter && !(R->scan_filter = colpred_filter(cx, cp, n_cp)))
        return cx->err->code;
    roaring_bitmap_t *cand = roaring_bitmap_create();
    if (!cand)
        return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    QrFilterStats st = {0};
    QrError e;
    qr_error_clear(&e);
    int rc = colwalk_filter(R->scan_filter, snap->segs[si], snap->dels[si], QR_ACCESS_SCAN, within,
                            NULL, cand, &st, &e);
    sc->zm_blocks_total += st.blocks_total;
    sc->zm_blocks_skipped += st.blocks_skipped;
    if (rc) {
        qr_error_copy(cx->err, &e);
        roaring_bitmap_free(cand);
        return rc;
    }
    *empty = roaring_bitmap_is_empty(cand);
    *out = cand;
    return QR_OK;
}

/* A numeric field's stored value as the numeric it is: an int64 column's
 * value * 10^scale (ct QR_COL_INT64, in v->u.i) printed into cx->arena, or
 * a keyword column's canonical text (borrowed). */
static int num_stored(SqlCtx *cx, const QrField *fd, QrColType ct, SqlValue *v)
{
    if (!v->is_null && ct == QR_COL_INT64) {
        char buf[48];
        int n = dec_from_scaled(v->u.i, fd->scale, buf);
        char *p = qr_arena_strndup(cx->arena, buf, (size_t)n);
        if (!p)
            return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
        *v = sqlv_text(p, (size_t)n);
    }
    v->type = QR_SQL_NUMERIC;
    return QR_OK;
}

/* One column of one row (local doc of segment si) into v; stored
 * documents are parsed once per row (rf) for every document column. */
static int fetch_col(SqlCtx *cx, SqlTableScan *sc, Snapshot *snap, int si, uint32_t local, int c,
                     SqlValue *v, RowFetch *rf)
{
    Segment *seg = snap->segs[si];
    const QrSchema *schema = qr_table_schema(sc->t);
    SqlCol *col = &sc->scope->cols[c];
    *v = sqlv_null();
    v->type = col->type;
    switch (col->field) {
    case -1: {
        const uint8_t *key;
        size_t kl;
        if (!seg_pk(seg, local, &key, &kl))
            break;
        if (kl == 9 && key[0] == 'i') {
            uint64_t u = 0;
            for (int k = 0; k < 8; k++)
                u = u << 8 | key[1 + k];
            *v = sqlv_int((int64_t)(u ^ (1ull << 63)));
            if (col->type != QR_SQL_INT8) {
                SqlValue o;
                if (sqlv_cast(cx, v, col->type, -1, &o) == QR_OK)
                    *v = o;
            }
        } else if (kl >= 1) {
            *v = sqlv_text((const char *)key + 1, kl - 1);
            v->type = col->type == QR_SQL_INT8 ? QR_SQL_TEXT : col->type;
        }
        break;
    }
    case -2:
        *v = sqlv_int((int64_t)(snap->base[si] + local));
        break;
    case -3: { /* without the batch's scores: from the match sets */
        int64_t gdoc = (int64_t)(snap->base[si] + local);
        SqlScanRun *R = sc->run;
        *v = sqlv_float(0);
        v->type = QR_SQL_FLOAT4;
        /* the driving predicate's score, else the first predicate matching */
        for (int i = 0; i < sc->n_texts; i++) {
            int k = sc->drive >= 0 ? sc->drive : i;
            bool m;
            float f;
            if (sql_text_has(cx, R->truns[k], gdoc, &m, &f))
                return cx->err->code;
            if (m || k == sc->drive) {
                v->u.f = f;
                break;
            }
        }
        break;
    }
    default: {
        const QrField *fd = &schema->fields[col->field];
        const Column *cc = fd->type == QR_FT_TEXT && !fd->column ? NULL : seg_column(seg, col->field);
        if (cc) {
            const char *s;
            size_t n;
            int64_t iv;
            double dv;
            bool bv;
            switch (col_type(cc)) {
            case QR_COL_INT64:
            case QR_COL_TIMESTAMP:
                if (col_get_int(cc, local, &iv)) {
                    *v = sqlv_int(iv);
                    v->type = col->type;
                }
                break;
            case QR_COL_FLOAT64:
                if (col_get_float(cc, local, &dv))
                    *v = sqlv_float(dv);
                break;
            case QR_COL_BOOL:
                if (col_get_bool(cc, local, &bv))
                    *v = sqlv_bool(bv);
                break;
            case QR_COL_KEYWORD:
                if (col_get_str(cc, local, &s, &n))
                    *v = sqlv_text(s, n);
                break;
            default:
                break;
            }
            if (fd->type == QR_FT_NUMERIC)
                return num_stored(cx, fd, col_type(cc), v);
            break;
        }
        if (fd->type != QR_FT_TEXT && fd->type != QR_FT_KEYWORD)
            break; /* a segment written before the field existed: NULL */
        if (load_doc(cx, snap, si, local, rf))
            return cx->err->code;
        json_value(cx, rf->doc ? cJSON_GetObjectItemCaseSensitive(rf->doc, fd->name) : NULL,
                   col->type, v);
        break;
    }
    }
    return QR_OK;
}

/* Is column c read from stored documents (a text field without a column)? */
static bool doc_column(const SqlTableScan *sc, int c)
{
    int f = sc->scope->cols[c].field;
    if (f < 0)
        return false;
    const QrField *fd = &qr_table_schema(sc->t)->fields[f];
    return fd->type == QR_FT_TEXT && !fd->column;
}

/* Column c of a batch whose rows lie close together (at most 16 row ids
 * apart on average) from whole decoded blocks: false when the column is
 * not a typed column of the batch's segment (the row path decides), or the
 * rows are too sparse for whole blocks to pay. */
static bool fill_dense(SqlCtx *cx, SqlScanRun *R, SqlBatch *b, int c)
{
    const SqlCol *col = &R->sc->scope->cols[c];
    const QrField *fd = &qr_table_schema(R->sc->t)->fields[col->field];
    if (fd->type == QR_FT_TEXT && !fd->column)
        return false;
    const Column *cc = seg_column(R->snap->segs[b->seg], col->field);
    if (!cc)
        return false;
    QrColType ct = col_type(cc);
    if (ct != QR_COL_INT64 && ct != QR_COL_TIMESTAMP && ct != QR_COL_FLOAT64 && ct != QR_COL_BOOL &&
        ct != QR_COL_KEYWORD)
        return false;
    uint32_t lo = b->docs[sql_batch_at(b, 0)], hi = b->docs[sql_batch_at(b, b->n - 1)];
    if (hi < lo || (uint64_t)(hi - lo) > (uint64_t)b->n * 16)
        return false;
    BlockCache **slot = &R->bcache[c];
    if (!*slot && !(*slot = qr_calloc(1, sizeof **slot)))
        return false;
    BlockCache *k = *slot;
    size_t W = (size_t)b->width;
    for (int i = 0; i < b->n; i++) {
        int p = sql_batch_at(b, i);
        uint32_t d = b->docs[p], blk = d / COL_BLOCK_ROWS, r = d % COL_BLOCK_ROWS;
        if (k->cc != cc || k->block != blk) {
            uint32_t got = 0;
            switch (ct) {
            case QR_COL_INT64:
            case QR_COL_TIMESTAMP: got = col_read_int(cc, blk, 1, k->v.i, k->nulls); break;
            case QR_COL_FLOAT64: got = col_read_float(cc, blk, 1, k->v.f, k->nulls); break;
            case QR_COL_BOOL: got = col_read_bool(cc, blk, 1, k->v.b, k->nulls); break;
            default: got = col_read_code(cc, blk, 1, k->v.code, k->nulls); break;
            }
            if (got == 0) {
                k->cc = NULL;
                return false; /* (nothing written yet: the row path starts over) */
            }
            k->cc = cc;
            k->block = blk;
        }
        SqlValue *v = &b->rows[(size_t)p * W + (size_t)c];
        if (k->nulls[r / 64] >> (r % 64) & 1) {
            *v = sqlv_null();
            v->type = col->type;
            continue;
        }
        switch (ct) {
        case QR_COL_INT64:
        case QR_COL_TIMESTAMP:
            *v = sqlv_int(k->v.i[r]);
            v->type = col->type;
            break;
        case QR_COL_FLOAT64: *v = sqlv_float(k->v.f[r]); break;
        case QR_COL_BOOL: *v = sqlv_bool(k->v.b[r] != 0); break;
        default: {
            const char *s = NULL;
            size_t n = 0;
            if (col_dict_get(cc, k->v.code[r], &s, &n))
                *v = sqlv_text(s, n);
            else {
                *v = sqlv_null();
                v->type = col->type;
            }
            break;
        }
        }
        if (fd->type == QR_FT_NUMERIC) { /* its text, in the batch's arena */
            QrArena *saved = cx->arena;
            cx->arena = R->scratch;
            int rc = num_stored(cx, fd, ct, v);
            cx->arena = saved;
            if (rc) {
                qr_error_clear(cx->err);
                return false; /* (the row path reports it) */
            }
        }
    }
    return true;
}

/* SqlDocSrc.fill: column c of the live rows.  Document columns are all
 * filled together, each document parsed once. */
static int run_fill(SqlDocSrc *src, SqlCtx *cx, SqlBatch *b, int c)
{
    SqlScanRun *R = (SqlScanRun *)((char *)src - offsetof(SqlScanRun, src));
    SqlTableScan *sc = R->sc;
    const SqlCol *col = &sc->scope->cols[c];
    size_t W = (size_t)b->width;
    /* the columns every row of a text scan reads, without per-row dispatch */
    if (col->field == -3 && b->scores) { /* the driving predicate's scores */
        for (int i = 0; i < b->n; i++) {
            int p = sql_batch_at(b, i);
            SqlValue *v = &b->rows[(size_t)p * W + (size_t)c];
            *v = sqlv_float(b->scores[p]);
            v->type = QR_SQL_FLOAT4;
        }
        return QR_OK;
    }
    if (col->field == -2) {
        for (int i = 0; i < b->n; i++) {
            int p = sql_batch_at(b, i);
            b->rows[(size_t)p * W + (size_t)c] = sqlv_int(b->base + b->docs[p]);
        }
        return QR_OK;
    }
    if (col->field == -1 && col->type == QR_SQL_INT8) { /* integer keys: 'i' + 8 bytes */
        Segment *seg = R->snap->segs[b->seg];
        int i = 0;
        for (; i < b->n; i++) {
            int p = sql_batch_at(b, i);
            const uint8_t *key;
            size_t kl;
            if (!seg_pk(seg, b->docs[p], &key, &kl) || kl != 9 || key[0] != 'i')
                break; /* a string key: the general path below */
            uint64_t u;
            memcpy(&u, key + 1, 8);
            b->rows[(size_t)p * W + (size_t)c] = sqlv_int((int64_t)(be64toh(u) ^ (1ull << 63)));
        }
        if (i == b->n)
            return QR_OK;
    }
    if (col->field >= 0 && b->n >= 64 && fill_dense(cx, R, b, c))
        return QR_OK;
    QrArena *saved = cx->arena;
    cx->arena = R->scratch;
    int rc = QR_OK;
    bool docs = doc_column(sc, c);
    for (int i = 0; i < b->n && rc == QR_OK; i++) {
        int p = sql_batch_at(b, i);
        SqlValue *row = b->rows + (size_t)p * (size_t)b->width;
        R->rf.doc_loaded = false;
        R->rf.doc = NULL;
        if (!docs) {
            rc = fetch_col(cx, sc, R->snap, b->seg, b->docs[p], c, &row[c], &R->rf);
            if (R->rf.doc) { /* a segment older than the column: read from the document */
                if (rc == QR_OK)
                    rc = sqlv_own(cx, &row[c]);
                cJSON_Delete(R->rf.doc);
                R->rf.doc = NULL;
            }
            continue;
        }
        for (int k = 0; k < R->n_doc_cols && rc == QR_OK; k++)
            if (!b->filled[R->doc_cols[k]] &&
                (rc = fetch_col(cx, sc, R->snap, b->seg, b->docs[p], R->doc_cols[k],
                                &row[R->doc_cols[k]], &R->rf)) == QR_OK)
                rc = sqlv_own(cx, &row[R->doc_cols[k]]); /* the parsed document goes next */
        if (R->rf.doc) {
            cJSON_Delete(R->rf.doc);
            R->rf.doc = NULL;
        }
    }
    for (int k = 0; docs && rc == QR_OK && k < R->n_doc_cols; k++)
        b->filled[R->doc_cols[k]] = 1;
    cx->arena = saved;
    return rc;
}

/* ---- choosing the path ---- */

/* The column predicates, key lookups and ranges of the conjuncts, and the
 * columns the scan's batches fill; once per scan. */
static int run_new(SqlCtx *cx, SqlTableScan *sc)
{
    SqlScanRun *R = qr_arena_calloc(cx->arena, sizeof *R);
    int W = sc->scope->n;
    uint8_t *dmarks = qr_arena_calloc(cx->arena, (size_t)W + 1);
    uint8_t *umarks = qr_arena_calloc(cx->arena, (size_t)W + 1);
    if (!R || !dmarks || !umarks ||
        !(R->cp = qr_arena_calloc(cx->arena, (size_t)(sc->n_conj + 1) * sizeof *R->cp)))
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    if (!(R->bcache = qr_arena_calloc(cx->arena, ((size_t)W + 1) * sizeof *R->bcache)))
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    R->sc = sc;
    R->si = -1;
    R->rf.dc_seg = -1;
    R->src.fill = run_fill;
    R->src.first = sc->first;
    R->src.n_cols = sc->n_cols;
    if (colpreds(cx, sc, R->cp, &R->n_cp))
        return cx->err->code;
    sc->n_colpreds = R->n_cp;
    R->has_pk = pk_find(cx, sc, &R->pk);
    for (int c = sc->first; c < sc->first + sc->n_cols; c++) {
        if (doc_column(sc, c) && sc->scope->cols[c].used)
            dmarks[c] = 1;
        if (sc->scope->cols[c].used)
            umarks[c] = 1;
    }
    if (!(R->doc_cols = sql_cols_list(cx, dmarks, W, &R->n_doc_cols)) ||
        !(R->used_cols = sql_cols_list(cx, umarks, W, &R->n_used_cols)))
        return cx->err->code;
    if (!(R->truns = qr_arena_calloc(cx->arena, ((size_t)sc->n_texts + 1) * sizeof *R->truns)))
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    for (int i = 0; i < sc->n_texts; i++)
        if (!(R->truns[i] = sql_text_run_new(cx, sc->texts[i], sc->t, sc->scope)))
            return cx->err->code;
    R->src.used = R->used_cols;
    R->src.n_used = R->n_used_cols;
    R->checks_for = -1;
    sc->run = R;
    return QR_OK;
}

/* The conjuncts checked per row and the columns they read, for candidates
 * that come from the driving predicate (drive_cands) or not. */
static int run_checks(SqlCtx *cx, SqlTableScan *sc)
{
    SqlScanRun *R = sc->run;
    if (R->checks_for == (int)R->drive_cands)
        return QR_OK;
    int W = sc->scope->n;
    uint8_t *marks = qr_arena_calloc(cx->arena, (size_t)W + 1);
    R->check = qr_arena_alloc(cx->arena, ((size_t)sc->n_conj + 1) * sizeof *R->check);
    if (!marks || !R->check)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    R->n_check = 0;
    for (int k = 0; k < sc->n_conj; k++) {
        if (R->drive_cands && sc->conj[k]->kind == SE_MATCH &&
            sc->conj[k]->text == sc->texts[sc->drive])
            continue; /* it holds for its own matches */
        R->check[R->n_check++] = sc->conj[k];
        sql_expr_cols(sc->conj[k], marks);
    }
    for (int c = 0; c < W; c++)
        if (c < sc->first || c >= sc->first + sc->n_cols)
            marks[c] = 0; /* outer columns are the caller's */
    if (!(R->cond_cols = sql_cols_list(cx, marks, W, &R->n_cond_cols)))
        return cx->err->code;
    R->checks_for = (int)R->drive_cands;
    return QR_OK;
}

/* Cost every path this scan could take over snapshot snap and choose one
 * (or the forced one): sc->path, cost, est_rows, alts, note, ordered. */
static int run_choose(SqlCtx *cx, SqlTableScan *sc, Snapshot *snap)
{
    SqlScanRun *R = sc->run;
    int rc = QR_OK;
    uint64_t drive_n = 0;
    int n_cp = R->n_cp;
    /* a top-k whose only condition is its text predicate has one sensible
     * path, and counting every match first (a pass over all postings that
     * block-max WAND then skips) would cost more than the top-k */
    if (sc->topk >= 0 && (n_cp != sc->n_conj - 1 || sc->topk > MAX_TOPK_ROWS))
        sc->topk = -1;
    sc->uncounted = sc->drive >= 0 && sc->topk >= 0 && sc->n_texts == 1 && sc->n_conj == 1 &&
                    n_cp == 0 && cx->path == SQL_PATH_AUTO;
    if (sc->uncounted)
        drive_n = (uint64_t)sc->topk < snap->n_live ? (uint64_t)sc->topk : snap->n_live;
    else if (sc->drive >= 0 &&
             (rc = sql_text_count(cx, R->truns[sc->drive], snap, NULL, sc, &drive_n)))
        return rc;
    sc->text_rows = drive_n;
    double N = (double)snap->n_live, rc_row = row_cost(sc);
    double sel = 1, scan_cost = 0;
    sc->n_alts = 0;
    if (n_cp && (rc = colpred_estimate(cx, snap, R->cp, n_cp, &sel, &scan_cost)))
        return rc;
    double text_frac = sc->drive >= 0 && N > 0 ? (double)drive_n / N : 1;
    double est_out = N * sel * text_frac;
    sc->pk_range = !R->has_pk && pk_range_find(cx, sc, snap, &R->range);
    if (sc->pk_range) { /* the range bounds every path's output */
        sc->pk_range_keys = R->range.n;
        est_out = fmin(est_out, (double)R->range.n);
    }
    double post = sc->drive >= 0 ? (double)drive_n * C_POST : 0;
    /* the paths the driving predicate gives candidates to fetch only the
     * top-k's rows under ORDER BY score() DESC LIMIT k */
    double k_out = sc->topk >= 0 ? fmin(est_out, (double)sc->topk) : est_out;
    double k_text = sc->topk >= 0 ? fmin((double)drive_n, (double)sc->topk) : (double)drive_n;
    add_alt(sc, SQL_PATH_FULL, est_out, N * rc_row + post);
    if (sc->drive >= 0)
        add_alt(sc, SQL_PATH_TEXT, k_out, post + k_text * rc_row);
    if (n_cp && sc->drive >= 0) /* filter bitmap, postings advanced into it */
        add_alt(sc, SQL_PATH_SCAN, k_out,
                scan_cost + fmin((double)drive_n, N * sel) * C_POST + k_out * rc_row);
    else if (n_cp)
        add_alt(sc, SQL_PATH_SCAN, est_out, scan_cost + N * sel * rc_row);
    double bt_cost;
    /* (with a driving predicate the B-tree path reads its postings whole,
     * as the text path does: measured slower than the text path alone) */
    if (n_cp && btree_estimate(snap, R->cp, n_cp, scan_cost, &bt_cost))
        add_alt(sc, SQL_PATH_BTREE, sc->drive >= 0 ? k_out : est_out,
                bt_cost + (sc->drive >= 0 ? k_out : est_out) * rc_row + post);
    if (R->has_pk) /* each key in each segment's key index, the rows checked */
        add_alt(sc, SQL_PATH_PK, fmin((double)R->pk.n_values, est_out),
                (double)R->pk.n * (double)snap->n_segs * C_PK + (double)R->pk.n_values * rc_row + post);
    if (sc->pk_range) /* two searches per segment, then the rows in key order */
        add_alt(sc, SQL_PATH_PK, fmin((double)R->range.n, est_out),
                (double)snap->n_segs * 4 * C_PK + (double)R->range.n * rc_row + post);
    SqlAccessPath want = cx->path, chosen = SQL_PATH_FULL;
    double best = INFINITY, rows = est_out;
    for (int i = 0; i < sc->n_alts; i++)
        if (sc->alts[i].cost < best) {
            best = sc->alts[i].cost;
            chosen = sc->alts[i].path;
            rows = sc->alts[i].rows;
        }
    sc->note = NULL;
    if (want == SQL_PATH_CHECK)
        want = SQL_PATH_TEXT;
    if (want != SQL_PATH_AUTO) {
        bool ok = false;
        for (int i = 0; i < sc->n_alts; i++)
            if (sc->alts[i].path == want) {
                ok = true;
                best = sc->alts[i].cost;
                rows = sc->alts[i].rows;
            }
        if (ok)
            chosen = want;
        else
            sc->note = want == SQL_PATH_TEXT ? "forced text path needs a full-text predicate"
                       : want == SQL_PATH_PK     ? "forced pk path needs pk = value, pk IN (values) "
                                                   "or a range of the primary key"
                       : want == SQL_PATH_BTREE  ? "forced btree path needs a column predicate on a "
                                                   "column with CREATE INDEX"
                                                 : "forced scan path needs a column predicate";
    }
    sc->path = chosen;
    sc->cost = best;
    sc->est_rows = rows;
    /* (a column scan driven by a text predicate reads the text set instead) */
    sc->ordered = order_walk_ok(sc, snap) && !(sc->path == SQL_PATH_SCAN && sc->drive >= 0);
    R->planned = true;
    R->planned_version = snap->version;
    return QR_OK;
}

int sql_scan_plan(SqlCtx *cx, SqlTableScan *sc)
{
    if (!sc->run && run_new(cx, sc))
        return cx->err->code;
    if (sc->run->planned)
        return QR_OK;
    /* the driving predicate is compiled for the count only; open compiles
     * it again against the scan's own snapshot */
    Snapshot *snap = sql_snapshot(cx, sc->t);
    if (!snap)
        return cx->err->code;
    SqlTextRun *tr = sc->drive >= 0 ? sc->run->truns[sc->drive] : NULL;
    int rc = tr ? sql_text_open(cx, tr, snap) : QR_OK;
    if (rc == QR_OK)
        rc = run_choose(cx, sc, snap);
    sql_text_close(tr);
    snapshot_release(snap);
    return rc;
}

/* ---- candidates ---- */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The ids of a bitmap as the run (owned). */
static int run_from_bitmap(SqlCtx *cx, SqlScanRun *R, const roaring_bitmap_t *bm)
{
    uint64_t n = roaring_bitmap_get_cardinality(bm);
    R->ids = qr_malloc((n + 1) * sizeof *R->ids);
    if (!R->ids)
        return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    roaring_bitmap_to_uint32_array(bm, R->ids);
    R->n_ids = n;
    R->pos = 0;
    return QR_OK;
}

static void run_range(SqlScanRun *R, uint32_t from, uint32_t to)
{
    R->r_next = from;
    R->r_end = to;
}

/* A key of the ordered walk as the column's SQL value. */
static SqlValue walk_value(const ColWalkKey *k, QrColType ct, QrSqlType type)
{
    SqlValue v = sqlv_null();
    if (!k->null)
        v = ct == QR_COL_KEYWORD   ? sqlv_text(k->s, k->n)
            : ct == QR_COL_FLOAT64 ? sqlv_float(k->f)
                                   : sqlv_int(k->i);
    v.type = type;
    return v;
}

/* A scaled numeric key (v->u.i, value * 10^scale) as the numeric it is,
 * printed into buf[48] (compared, not kept). */
static void num_key(SqlValue *v, int scale, char *buf)
{
    int n = dec_from_scaled(v->u.i, scale, buf);
    *v = sqlv_text(buf, (size_t)n);
    v->type = QR_SQL_NUMERIC;
}

/* A row's key of the block the walk read last, as the column's SQL value,
 * straight from the decoded block: this runs per row, so fields are set
 * in place (a struct built and copied stalls the store buffer). */
static inline void view_value(const ColWalkView *w, uint32_t row, QrSqlType type, SqlValue *v)
{
    uint32_t r = row - w->first_row;
    v->type = type;
    v->is_null = true;
    if (!w->col || (w->nulls[r / 64] >> (r % 64) & 1))
        return;
    if (w->ct == QR_COL_FLOAT64) {
        v->u.f = ((const double *)w->vals)[r];
        v->is_null = false;
    } else if (w->ct != QR_COL_KEYWORD) {
        v->u.i = w->vals[r];
        v->is_null = false;
    } else if (col_dict_get(w->col, ((const uint32_t *)w->vals)[r], &v->u.s.s, &v->u.s.n)) {
        v->is_null = false;
    }
}

/* A deep page (ORDER BY <number column> LIMIT n OFFSET k, rank_on): the
 * walk's candidates narrowed to the rows of ranks [k, k + n) and those
 * tied with them (colwalk_rank_window), when the candidates are exactly
 * the rows that pass every condition (no text predicate; column predicates
 * only, each segment's matched as a bitmap) and the column is a number:
 * the top-N above then sorts a page's worth of rows instead of k + n, and
 * the Limit skips k - rank_before. */
static int run_rank_window(SqlCtx *cx, SqlTableScan *sc, QrColType ct, int n_cp)
{
    SqlScanRun *R = sc->run;
    Snapshot *snap = R->snap;
    sc->rank_before = 0;
    if (sc->n_texts || sc->drive >= 0 || n_cp != sc->n_conj ||
        (ct != QR_COL_INT64 && ct != QR_COL_TIMESTAMP && ct != QR_COL_FLOAT64))
        return QR_OK;
    for (int si = 0; si < snap->n_segs; si++)
        if (n_cp && !R->oskip[si] && !R->ocands[si])
            return QR_OK; /* rows of a segment are checked one by one (a field retyped since) */
    roaring_bitmap_t **win = qr_calloc((size_t)snap->n_segs + 1, sizeof *win);
    if (!win)
        return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    QrError e;
    qr_error_clear(&e);
    uint64_t before;
    int rc = colwalk_rank_window(snap->segs, (const roaring_bitmap_t *const *)snap->dels,
                                 snap->n_segs, sc->scope->cols[sc->order_col].field, ct,
                                 sc->order_desc, sc->order_nulls_first, R->ocands, R->oskip,
                                 sc->rank_from, sc->rank_count, win, &before, &e);
    if (rc == QR_EUNSUPPORTED) {
        qr_free(win);
        return QR_OK; /* the walk alone, as planned */
    }
    if (rc != QR_OK) {
        qr_free(win);
        qr_error_copy(cx->err, &e);
        return rc;
    }
    sc->rank_used = true;
    sc->rank_before = before;
    for (int si = 0; si < snap->n_segs; si++) {
        if (R->ocands[si])
            roaring_bitmap_free(R->ocands[si]);
        R->ocands[si] = win[si];
        uint64_t n = win[si] ? roaring_bitmap_get_cardinality(win[si]) : 0;
        R->oskip[si] = n == 0;
        sc->rank_rows += n;
    }
    qr_free(win);
    return QR_OK;
}

/* The ordered walk: every block holding a candidate, best zone-map bound
 * first (colwalk.h, as the HTTP search's sort by a column). */
static int run_ordered_setup(SqlCtx *cx, SqlTableScan *sc)
{
    SqlScanRun *R = sc->run;
    Snapshot *snap = R->snap;
    const SqlCol *col = &sc->scope->cols[sc->order_col];
    int n_cp = sc->path == SQL_PATH_SCAN ? R->n_cp : 0;
    R->ocands = qr_calloc((size_t)snap->n_segs + 1, sizeof *R->ocands);
    R->oskip = qr_calloc((size_t)snap->n_segs + 1, sizeof *R->oskip);
    if (!R->ocands || !R->oskip)
        return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    int rc = QR_OK;
    for (int si = 0; si < snap->n_segs && rc == QR_OK && n_cp; si++)
        rc = seg_scan_cand(cx, sc, snap, si, R->cp, n_cp, NULL, &R->ocands[si], &R->oskip[si]);
    if (rc)
        return rc;
    QrError e;
    qr_error_clear(&e);
    QrColType ct = (QrColType)schema_column_type(&qr_table_schema(sc->t)->fields[col->field]);
    if (sc->rank_on && (rc = run_rank_window(cx, sc, ct, n_cp)))
        return rc;
    if (colwalk_order_open(snap->segs, (const roaring_bitmap_t *const *)snap->dels, snap->n_segs,
                           col->field, ct, sc->order_desc, sc->order_nulls_first, R->ocands,
                           R->oskip, &R->walk, &e) != QR_OK) {
        qr_error_copy(cx->err, &e);
        return e.code;
    }
    sc->ord_blocks_total += colwalk_order_blocks(R->walk);
    return QR_OK;
}

/* The ordered walk's next block: its candidates whose key may still enter
 * the first k; *more false once no later block can. */
static int run_ordered_next(SqlCtx *cx, SqlTableScan *sc, bool *more)
{
    SqlScanRun *R = sc->run;
    const SqlCol *col = &sc->scope->cols[sc->order_col];
    const QrField *fd = &qr_table_schema(sc->t)->fields[col->field];
    QrColType ct = (QrColType)schema_column_type(fd);
    int scale = fd->type == QR_FT_NUMERIC ? fd->scale : -1; /* keys are value * 10^scale */
    char nb[48];
    *more = false;
    const ColWalkKey *best;
    while (colwalk_order_peek(R->walk, &best)) {
        SqlValue bv = walk_value(best, ct, col->type);
        if (scale >= 0 && !bv.is_null)
            num_key(&bv, scale, nb);
        if (!sc->order_may_enter(sc->order_arg, &bv))
            return QR_OK; /* every later block is as bad or worse */
        sc->ord_blocks_read++;
        int si;
        const uint32_t *rows;
        const ColWalkView *view;
        QrError e;
        qr_error_clear(&e);
        uint32_t n = colwalk_order_read(R->walk, &si, &rows, &view, &e);
        if (e.code != QR_OK) {
            qr_error_copy(cx->err, &e);
            qr_error_set_sqlstate(cx->err, "XX001");
            return e.code;
        }
        R->ids = qr_malloc(((size_t)n + 1) * sizeof *R->ids);
        if (!R->ids)
            return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
        R->n_ids = R->pos = 0;
        R->si = si;
        const ColWalkView vw = *view; /* a local: loads stay out of the loop */
        SqlValue v;
        for (uint32_t r = 0; r < n; r++) {
            uint32_t row = rows ? rows[r] : vw.first_row + r;
            view_value(&vw, row, col->type, &v);
            if (scale >= 0 && !v.is_null)
                num_key(&v, scale, nb);
            if (!sc->order_may_enter(sc->order_arg, &v)) {
                sc->ord_rows_skipped++;
                continue;
            }
            R->ids[R->n_ids++] = row;
        }
        if (R->n_ids) {
            *more = true;
            return QR_OK;
        }
        qr_free(R->ids);
        R->ids = NULL;
    }
    return QR_OK;
}

/* The column predicates' matches in segment si through the filter engine
 * with B-trees, live docs only, into *out (a new bitmap); *out NULL when
 * the segment cannot compare an operand (a field retyped since): every row
 * is a candidate, the rows checked. */
static int seg_btree_hits(SqlCtx *cx, SqlTableScan *sc, int si, roaring_bitmap_t **out)
{
    SqlScanRun *R = sc->run;
    Snapshot *snap = R->snap;
    FilterSeg *fs = NULL;
    QrError e;
    qr_error_clear(&e);
    QrFilterStats st = {0};
    int rc = QR_OK;
    *out = NULL;
    roaring_bitmap_t *hits = roaring_bitmap_create();
    if (!hits)
        return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    if (filter_seg_compile(R->bt_filter, snap->segs[si], &fs, &e) != QR_OK) {
        roaring_bitmap_free(hits);
        return QR_OK;
    }
    if (filter_seg_eval(fs, QR_ACCESS_BTREE, snap->dels[si], NULL, hits, &st, &e) != QR_OK) {
        qr_error_copy(cx->err, &e);
        rc = e.code;
        roaring_bitmap_free(hits);
    } else {
        *out = hits;
    }
    sc->zm_blocks_total += st.blocks_total;
    sc->zm_blocks_skipped += st.blocks_skipped;
    sc->bt_pages += st.btree_pages;
    filter_seg_free(fs);
    return rc;
}

/* The B-tree path's candidates of segment si (no driving predicate). */
static int run_btree_seg(SqlCtx *cx, SqlTableScan *sc, int si)
{
    SqlScanRun *R = sc->run;
    roaring_bitmap_t *hits;
    int rc = seg_btree_hits(cx, sc, si, &hits);
    if (rc)
        return rc;
    if (!hits) {
        run_range(R, 0, seg_n_docs(R->snap->segs[si]));
        return QR_OK;
    }
    rc = run_from_bitmap(cx, R, hits);
    roaring_bitmap_free(hits);
    return rc;
}

/* The live docs of segment si the driving predicate's iterators are
 * advanced into: the column predicates' bitmap of the path (zone-map
 * scans, the filter engine with B-trees, or for a top-k on the text path
 * the filter engine's own choice), into *out; NULL: no filter (every live
 * doc).  *empty: nothing can pass in this segment. */
static int seg_drive_filter(SqlCtx *cx, SqlTableScan *sc, int si, roaring_bitmap_t **out,
                            bool *empty)
{
    SqlScanRun *R = sc->run;
    Snapshot *snap = R->snap;
    *out = NULL;
    *empty = false;
    if (R->n_cp == 0 || (sc->path == SQL_PATH_TEXT && sc->topk < 0))
        return QR_OK;
    int rc = QR_OK;
    if (sc->path == SQL_PATH_SCAN) {
        rc = seg_scan_cand(cx, sc, snap, si, R->cp, R->n_cp, NULL, out, empty);
        if (rc == QR_OK && *out && snap->dels[si])
            roaring_bitmap_andnot_inplace(*out, snap->dels[si]);
    } else if (sc->path == SQL_PATH_BTREE) {
        rc = seg_btree_hits(cx, sc, si, out);
    } else { /* the text path's top-k: as the text engine filters */
        QrFilterStats st = {0};
        if (!(*out = roaring_bitmap_create()))
            return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
        search_seg_filter(sql_text_search(R->truns[sc->drive]), si, R->bt_filter, QR_ACCESS_AUTO,
                          *out, &st);
        sc->zm_blocks_total += st.blocks_total;
        sc->zm_blocks_skipped += st.blocks_skipped;
        sc->bt_pages += st.btree_pages;
        rc = sql_text_check(cx, R->truns[sc->drive]);
    }
    if (rc && *out) {
        roaring_bitmap_free(*out);
        *out = NULL;
    }
    if (rc == QR_OK && *out && roaring_bitmap_is_empty(*out))
        *empty = true;
    return rc;
}

/* The driving predicate's live matches of segment si as a new bitmap
 * (aggregates from column blocks). */
static int seg_text_bitmap(SqlCtx *cx, SqlTableScan *sc, int si, roaring_bitmap_t **out)
{
    SqlTextRun *tr = sc->run->truns[sc->drive];
    roaring_bitmap_t *bm = roaring_bitmap_create();
    *out = NULL;
    if (!bm)
        return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    Search *s = sql_text_search(tr);
    SearchCursor c = {0};
    if (s)
        search_seg_cursor(s, si, false, NULL, &c);
    uint32_t docs[512];
    size_t k;
    while ((k = search_cursor_next(&c, docs, NULL, 512)) > 0)
        roaring_bitmap_add_many(bm, k, docs);
    int rc = sql_text_check(cx, tr);
    if (rc) {
        roaring_bitmap_free(bm);
        return rc;
    }
    *out = bm;
    return QR_OK;
}

/* The driving predicate's cursor is done with segment R->si. */
static void run_cursor_end(SqlScanRun *R)
{
    memset(&R->cur, 0, sizeof R->cur);
    if (R->cur_filter)
        roaring_bitmap_free(R->cur_filter);
    R->cur_filter = NULL;
}

/* Move to the next run of candidates; *more false at the end. */
static int run_next(SqlCtx *cx, SqlTableScan *sc, bool *more)
{
    SqlScanRun *R = sc->run;
    Snapshot *snap = R->snap;
    int rc = QR_OK;
    qr_free(R->ids);
    R->ids = NULL;
    R->run_scores = NULL;
    R->n_ids = R->pos = 0;
    R->r_next = R->r_end = 0;
    run_cursor_end(R);
    *more = false;
    if (R->ended)
        return QR_OK;
    if (sc->ordered && sc->path != SQL_PATH_PK && sc->path != SQL_PATH_BTREE && !R->drive_cands) {
        rc = run_ordered_next(cx, sc, more);
        R->ended = !*more;
        return rc;
    }
    if (R->gdocs) { /* looked-up keys, the top-k: one segment's run */
        while (R->gpos < R->n_gdocs) {
            int si;
            uint32_t local;
            if (!snapshot_locate(snap, (DocId)R->gdocs[R->gpos], &si, &local)) {
                R->gpos++;
                continue;
            }
            uint64_t end = R->gpos;
            uint64_t seg_end = snap->base[si] + seg_n_docs(snap->segs[si]);
            while (end < R->n_gdocs && (uint64_t)R->gdocs[end] < seg_end)
                end++;
            R->ids = qr_malloc((end - R->gpos + 1) * sizeof *R->ids);
            if (!R->ids)
                return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
            for (uint64_t i = R->gpos; i < end; i++)
                R->ids[R->n_ids++] = (uint32_t)((uint64_t)R->gdocs[i] - snap->base[si]);
            R->run_scores = R->gscores ? R->gscores + R->gpos : NULL;
            R->gpos = end;
            R->si = si;
            *more = true;
            return QR_OK;
        }
        R->ended = true;
        return QR_OK;
    }
    while (++R->si < snap->n_segs) {
        int si = R->si;
        uint32_t nd = seg_n_docs(snap->segs[si]);
        if (nd == 0)
            continue;
        if (R->drive_cands) { /* the driving predicate, advanced into the column bitmap */
            bool empty;
            if ((rc = seg_drive_filter(cx, sc, si, &R->cur_filter, &empty)))
                return rc;
            Search *s = sql_text_search(R->truns[sc->drive]);
            if (!empty && s)
                search_seg_cursor(s, si, R->drive_scored, R->cur_filter, &R->cur);
            if ((rc = sql_text_check(cx, R->truns[sc->drive])))
                return rc;
            if (!R->cur.it) {
                run_cursor_end(R);
                continue;
            }
            *more = true;
            return QR_OK;
        }
        if (sc->path == SQL_PATH_PK && sc->pk_range) {
            uint32_t sp[4];
            pk_range_spans(&R->range, snap->segs[si], sp);
            uint64_t n = (uint64_t)(sp[1] - sp[0]) + (sp[3] - sp[2]);
            if (n == 0)
                continue;
            R->ids = qr_malloc((n + 1) * sizeof *R->ids);
            if (!R->ids)
                return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
            for (int k = 0; k < 4; k += 2)
                for (uint32_t p = sp[k]; p < sp[k + 1]; p++)
                    R->ids[R->n_ids++] = seg_pk_at(snap->segs[si], p);
            qsort(R->ids, R->n_ids, sizeof *R->ids, cmp_u32);
        } else if (sc->path == SQL_PATH_BTREE) {
            if ((rc = run_btree_seg(cx, sc, si)))
                return rc;
        } else if (sc->path == SQL_PATH_SCAN) {
            roaring_bitmap_t *cand = NULL;
            bool empty = false;
            if ((rc = seg_scan_cand(cx, sc, snap, si, R->cp, R->n_cp, NULL, &cand, &empty)))
                return rc;
            if (empty) {
                if (cand)
                    roaring_bitmap_free(cand);
                continue;
            }
            if (!cand) { /* only NULL-tolerant predicates on missing columns */
                run_range(R, 0, nd);
            } else {
                rc = run_from_bitmap(cx, R, cand);
                roaring_bitmap_free(cand);
                if (rc)
                    return rc;
            }
        } else {
            run_range(R, 0, nd);
        }
        if (R->n_ids == 0 && R->r_next == R->r_end)
            continue;
        *more = true;
        return QR_OK;
    }
    R->ended = true;
    return QR_OK;
}

/* ---- open, next, close ---- */

static int hit_doc_cmp(const void *a, const void *b)
{
    DocId x = ((const TopHit *)a)->doc, y = ((const TopHit *)b)->doc;
    return x < y ? -1 : x > y;
}

/* The matches of segment si (within its filter f, may be NULL) scoring
 * exactly thr that are not among tk's hits, appended to R->gdocs /
 * R->gscores (*cap slots, grown in the arena). */
static int topk_ties_seg(SqlCtx *cx, SqlScanRun *R, Search *s, int si, roaring_bitmap_t *f,
                         const TopK *tk, float thr, uint64_t *cap)
{
    int lo0 = tk->n; /* tk is sorted best-first: hits scoring thr end it, by doc */
    while (lo0 > 0 && tk->hits[lo0 - 1].score == thr)
        lo0--;
    SearchCursor c;
    search_seg_cursor(s, si, true, f, &c);
    uint32_t docs[512];
    float scores[512];
    size_t k;
    DocId base = R->snap->base[si];
    while (c.it && (k = search_cursor_next(&c, docs, scores, 512)) > 0) {
        for (size_t j = 0; j < k; j++) {
            if (scores[j] != thr)
                continue;
            DocId g = base + docs[j];
            int lo = lo0, hi = tk->n;
            while (lo < hi) {
                int mid = (lo + hi) / 2;
                if (tk->hits[mid].doc < g)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo < tk->n && tk->hits[lo].doc == g)
                continue;
            if (R->n_gdocs == *cap) {
                uint64_t nc = *cap * 2;
                int64_t *nd = qr_arena_alloc(cx->arena, nc * sizeof *nd);
                float *ns = qr_arena_alloc(cx->arena, nc * sizeof *ns);
                if (!nd || !ns)
                    return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
                memcpy(nd, R->gdocs, R->n_gdocs * sizeof *nd);
                memcpy(ns, R->gscores, R->n_gdocs * sizeof *ns);
                R->gdocs = nd;
                R->gscores = ns;
                *cap = nc;
            }
            R->gdocs[R->n_gdocs] = (int64_t)g;
            R->gscores[R->n_gdocs++] = thr;
        }
        int rc = sql_check(cx);
        if (rc)
            return rc;
    }
    return QR_OK;
}

/* ORDER BY score() DESC LIMIT k: the text engine's top-k over every
 * segment (one heap, so the first segments' threshold prunes the later
 * ones), the column predicates' bitmaps fed in; the hits become the
 * candidates, in doc order, with their scores.  The heap breaks ties at
 * the k-th score by document; with further sort keys (topk_ties) a second
 * pass adds every other match scoring exactly the k-th score, and the
 * top-N above ranks them by those keys. */
static int run_topk(SqlCtx *cx, SqlTableScan *sc)
{
    SqlScanRun *R = sc->run;
    Snapshot *snap = R->snap;
    SqlTextRun *tr = R->truns[sc->drive];
    Search *s = sql_text_search(tr);
    int rc = QR_OK;
    uint64_t cap = (uint64_t)sc->topk + 1;
    R->gdocs = qr_arena_alloc(cx->arena, cap * sizeof *R->gdocs);
    R->gscores = qr_arena_alloc(cx->arena, cap * sizeof *R->gscores);
    /* the filters, kept for the ties' pass */
    roaring_bitmap_t **fs = qr_arena_calloc(cx->arena, ((size_t)snap->n_segs + 1) * sizeof *fs);
    bool *skip = qr_arena_calloc(cx->arena, (size_t)snap->n_segs + 1);
    if (!R->gdocs || !R->gscores || !fs || !skip)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    R->n_gdocs = 0;
    if (!s) /* a NULL query */
        return QR_OK;
    TopK *tk = topk_new(search_ctx(s), (int)sc->topk);
    for (int si = 0; tk && si < snap->n_segs && rc == QR_OK; si++) {
        if ((rc = seg_drive_filter(cx, sc, si, &fs[si], &skip[si])))
            break;
        if (!skip[si])
            search_seg_topk(s, si, fs[si], tk);
        if ((rc = sql_text_check(cx, tr)) == QR_OK)
            rc = sql_check(cx);
    }
    if (rc == QR_OK && (rc = sql_text_check(cx, tr)) == QR_OK) {
        topk_sorted(tk);
        for (int i = 0; i < tk->n; i++) {
            R->gdocs[i] = tk->hits[i].doc;
            R->gscores[i] = tk->hits[i].score;
        }
        R->n_gdocs = (uint64_t)tk->n;
        if (sc->topk_ties && tk->n > 0 && tk->n == tk->k) {
            float thr = tk->hits[tk->n - 1].score;
            for (int si = 0; si < snap->n_segs && rc == QR_OK; si++)
                if (!skip[si] && (rc = topk_ties_seg(cx, R, s, si, fs[si], tk, thr, &cap)) == QR_OK)
                    rc = sql_text_check(cx, tr);
        }
    }
    for (int si = 0; si < snap->n_segs; si++)
        if (fs[si])
            roaring_bitmap_free(fs[si]);
    if (rc == QR_OK && R->n_gdocs > 1) { /* doc order: the rows of a segment come together */
        TopHit *h = qr_arena_alloc(cx->arena, R->n_gdocs * sizeof *h);
        if (!h)
            return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
        for (uint64_t i = 0; i < R->n_gdocs; i++)
            h[i] = (TopHit){.score = R->gscores[i], .doc = (DocId)R->gdocs[i]};
        qsort(h, R->n_gdocs, sizeof *h, hit_doc_cmp);
        for (uint64_t i = 0; i < R->n_gdocs; i++) {
            R->gdocs[i] = (int64_t)h[i].doc;
            R->gscores[i] = h[i].score;
        }
    }
    sc->text_strategy = search_strategy(s);
    return rc;
}

/* Every text predicate compiled against the open scan's snapshot. */
static int run_texts_open(SqlCtx *cx, SqlTableScan *sc, Snapshot *snap)
{
    SqlScanRun *R = sc->run;
    int rc = QR_OK;
    for (int i = 0; i < sc->n_texts && rc == QR_OK; i++) {
        rc = sql_text_open(cx, R->truns[i], snap);
        sc->texts[i]->run = R->truns[i];
    }
    return rc;
}

/* After the path is chosen: where candidates come from, the match sets of
 * every predicate rows ask about (all but the driving one when it gives the
 * candidates), the top-k. */
static int run_texts_plan(SqlCtx *cx, SqlTableScan *sc, Snapshot *snap)
{
    SqlScanRun *R = sc->run;
    int rc = QR_OK;
    bool score_read = sc->n_texts && sc->scope->cols[sc->texts[0]->score_col].used;
    R->drive_cands = sc->drive >= 0 && (sc->path == SQL_PATH_TEXT || sc->path == SQL_PATH_SCAN ||
                                        sc->path == SQL_PATH_BTREE);
    R->drive_scored = R->drive_cands && score_read;
    if (sc->topk >= 0 && !R->drive_cands)
        sc->topk = -1; /* the rows come another way: the top-N above ranks them */
    if ((R->drive_cands && sc->path != SQL_PATH_SCAN && R->n_cp) || sc->path == SQL_PATH_BTREE) {
        if (!R->bt_filter && !(R->bt_filter = colpred_filter(cx, R->cp, R->n_cp)))
            return cx->err->code;
    }
    /* aggregates from column blocks read the driving predicate's matches
     * per segment themselves, and there is no other predicate then */
    bool colagg = sc->colagg && colagg_ok(sc, snap, R->n_cp);
    for (int i = 0; i < sc->n_texts && rc == QR_OK && !colagg; i++) {
        if (i == sc->drive && R->drive_cands)
            continue;
        /* _score is the driving predicate's score, else the first matching one's */
        bool scored = score_read && (sc->drive < 0 || i == sc->drive);
        rc = sql_text_sets(cx, R->truns[i], snap, scored);
    }
    if (rc == QR_OK && R->drive_cands)
        sc->text_strategy = R->drive_scored ? "scored, doc order" : "doc order";
    else if (rc == QR_OK && sc->n_texts)
        sc->text_strategy = "match sets";
    if (rc == QR_OK && R->drive_cands && sc->topk >= 0)
        rc = run_topk(cx, sc);
    return rc;
}

int sql_scan_open(SqlCtx *cx, SqlTableScan *sc)
{
    uint64_t t0 = qr_now_ns();
    if (!sc->run && run_new(cx, sc))
        return cx->err->code;
    SqlScanRun *R = sc->run;
    int rc = QR_OK;
    if (!R->scratch && !(R->scratch = qr_arena_new_child(cx->arena)))
        return sql_err_at(cx, -1, QR_ENOMEM, NULL, "out of memory");
    if (!R->b) {
        if (!(R->b = sql_batch_new(cx, sc->scope->n)))
            return cx->err->code;
        /* the batch's rows are NULL but for the columns filled (reset per batch) */
        for (size_t i = 0; i < (size_t)SQL_BATCH_ROWS * (size_t)sc->scope->n; i++)
            R->b->rows[i] = sqlv_null();
        R->prev_k = 0;
    }
    if (!R->b->filled && !(R->b->filled = qr_arena_calloc(cx->arena, (size_t)sc->scope->n + 1)))
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    /* one snapshot for the plan, the text predicates and the rows */
    Snapshot *snap = sql_snapshot(cx, sc->t);
    if (!snap)
        return cx->err->code;
    R->snap = snap;
    run_reset_cursor(R);
    sc->from_drive = false;
    if ((rc = run_texts_open(cx, sc, snap)))
        return rc;
    if ((!R->planned || R->planned_version != snap->version) && (rc = run_choose(cx, sc, snap)))
        return rc;
    if ((rc = run_texts_plan(cx, sc, snap)) || (rc = run_checks(cx, sc)))
        return rc;
    sc->from_drive = R->drive_cands;
    if (sc->path == SQL_PATH_PK && !sc->pk_range) {
        rc = pk_docs(cx, snap, &R->pk, &R->gdocs, &R->n_gdocs);
        if (rc == QR_OK && R->n_gdocs == 0)
            R->ended = true;
    } else if (R->drive_cands && sc->topk >= 0) {
        R->ended = R->n_gdocs == 0;
    } else if (sc->path == SQL_PATH_BTREE) {
        if (!R->bt_filter && !(R->bt_filter = colpred_filter(cx, R->cp, R->n_cp)))
            rc = cx->err->code;
    } else if (sc->ordered && sc->path != SQL_PATH_PK && !R->drive_cands) {
        rc = run_ordered_setup(cx, sc);
    }
    sc->ms += (double)(qr_now_ns() - t0) / 1e6;
    return rc;
}

int sql_scan_next(SqlCtx *cx, SqlTableScan *sc, SqlBatch **out)
{
    SqlScanRun *R = sc->run;
    SqlBatch *b = R->b;
    Snapshot *snap = R->snap;
    uint64_t t0 = qr_now_ns();
    size_t W = (size_t)b->width;
    int rc = QR_OK;
    *out = NULL;
    qr_arena_reset(R->scratch);
    for (;;) {
        if (!R->cur.it && R->pos >= R->n_ids && R->r_next >= R->r_end) {
            bool more;
            if ((rc = run_next(cx, sc, &more)) || !more)
                break;
        }
        int si = R->si, k = 0;
        const float *scores = NULL;
        if (R->cur.it) { /* the driving predicate's live matches, with their scores */
            while (k < SQL_BATCH_ROWS) {
                size_t got = search_cursor_next(&R->cur, R->docs + k, R->scores + k,
                                                (size_t)(SQL_BATCH_ROWS - k));
                if (got == 0) {
                    run_cursor_end(R);
                    break;
                }
                k += (int)got;
            }
            if ((rc = sql_text_check(cx, R->truns[sc->drive])))
                break;
            scores = R->drive_scored ? R->scores : NULL;
        } else {
            while (k < SQL_BATCH_ROWS && (R->pos < R->n_ids || R->r_next < R->r_end)) {
                uint64_t p = R->pos;
                uint32_t local = R->ids ? R->ids[R->pos++] : R->r_next++;
                if (snapshot_deleted(snap, si, local))
                    continue;
                if (R->run_scores)
                    R->scores[k] = R->run_scores[p];
                R->docs[k++] = local;
            }
            scores = R->run_scores ? R->scores : NULL;
        }
        if (k == 0)
            continue;
        sc->candidates += (uint64_t)k;
        /* the columns the previous batch filled go back to NULL (the others
         * never leave it) */
        for (size_t c = 0; c < W; c++)
            if (b->filled[c]) {
                for (int i = 0; i < R->prev_k; i++)
                    b->rows[(size_t)i * W + c] = sqlv_null();
                b->filled[c] = 0;
            }
        R->prev_k = k;
        b->n = b->n_phys = k;
        b->sel = NULL;
        b->src = &R->src;
        b->seg = si;
        b->base = (int64_t)snap->base[si];
        b->docs = R->docs;
        b->scores = scores;
        if ((rc = sql_batch_need(cx, b, R->cond_cols, R->n_cond_cols)) || (rc = sql_check_now(cx)))
            break;
        /* the conditions left to check per row */
        int n = k;
        if (R->n_check) {
            QrArena *saved = cx->arena;
            cx->arena = R->scratch;
            n = 0;
            for (int i = 0; i < k && rc == QR_OK; i++) {
                SqlEvalRow er = {.row = b->rows + (size_t)i * W, .doc = b->base + R->docs[i],
                                 .score = scores ? scores[i] : 0};
                bool pass = true;
                for (int c = 0; rc == QR_OK && pass && c < R->n_check; c++)
                    rc = sql_expr_test(cx, R->check[c], &er, &pass);
                if (pass)
                    R->sel[n++] = (uint16_t)i;
            }
            cx->arena = saved;
        }
        if (rc)
            break;
        if (n == 0)
            continue;
        b->n = n;
        b->sel = n == k ? NULL : R->sel;
        if (sc->keep_docs)
            for (int i = 0; i < n && sc->n_kept < 1000; i++) {
                if (!sc->kept_docs &&
                    !(sc->kept_docs = qr_arena_alloc(cx->arena, 1000 * sizeof *sc->kept_docs)))
                    return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
                sc->kept_docs[sc->n_kept++] = b->base + b->docs[sql_batch_at(b, i)];
            }
        sc->rows_out += (uint64_t)n;
        *out = b;
        break;
    }
    sc->ms += (double)(qr_now_ns() - t0) / 1e6;
    return rc;
}

int sql_scan_colagg(SqlCtx *cx, SqlTableScan *sc, bool *used)
{
    SqlScanRun *R = sc->run;
    int rc = QR_OK;
    uint64_t t0 = qr_now_ns();
    *used = sc->colagg_used = colagg_ok(sc, R->snap, R->n_cp);
    for (int si = 0; *used && si < R->snap->n_segs && rc == QR_OK; si++)
        rc = colagg_segment(cx, sc, R->snap, si, R->cp, R->n_cp);
    if (*used) {
        R->ended = true;
        sc->rows_out = sc->colagg_rows;
        if (sc->drive >= 0)
            sc->text_strategy = "doc order";
    }
    sc->ms += (double)(qr_now_ns() - t0) / 1e6;
    return rc;
}

void sql_scan_close(SqlCtx *cx, SqlTableScan *sc)
{
    SqlScanRun *R = sc->run;
    if (!R)
        return;
    run_reset_cursor(R);
    run_cursor_end(R);
    for (int i = 0; i < sc->n_texts; i++) {
        sql_text_stats(R->truns[i], sc);
        sql_text_close(R->truns[i]);
    }
    if (R->snap) {
        snapshot_release(R->snap);
        R->snap = NULL;
    }
    ds_cursor_free(R->rf.dc);
    R->rf.dc = NULL;
    R->rf.dc_seg = -1;
    for (int c = 0; c < sc->scope->n; c++) { /* (they point into the snapshot's columns) */
        qr_free(R->bcache[c]);
        R->bcache[c] = NULL;
    }
    qr_arena_free(R->scratch);
    R->scratch = NULL;
    sc->from_drive = false;
}

void sql_scan_note(SqlCtx *cx, const SqlTableScan *sc)
{
    if (sc->from_stats)
        plan_note(cx, sc, "stats");
    else if (sc->run && sc->run->planned)
        plan_note(cx, sc, sql_path_name(sc->path));
}

/* Every row of a scan with every used column (for UPDATE / DELETE). */
int sql_scan_table(SqlCtx *cx, SqlTableScan *sc, SqlValue **rows, uint64_t *n_rows)
{
    *rows = NULL;
    *n_rows = 0;
    SqlRowSink out = {.width = sc->scope->n};
    int rc = sql_scan_open(cx, sc);
    while (rc == QR_OK) {
        SqlBatch *b;
        if ((rc = sql_scan_next(cx, sc, &b)) || !b)
            break;
        if ((rc = sql_sink_batch(cx, &out, b)))
            break;
    }
    sql_scan_close(cx, sc);
    if (rc)
        return rc;
    sql_scan_note(cx, sc);
    *rows = out.rows;
    *n_rows = out.n;
    return QR_OK;
}


/* ---- for the utility side: rows of a table matching a WHERE ---- */

int sql_table_rows(SqlCtx *cx, QrTable *t, const char *alias, const cJSON *where, SqlTableRows *out)
{
    memset(out, 0, sizeof *out);
    SqlScope *scope;
    int rc = sql_table_scope(cx, t, alias, &scope);
    if (rc)
        return rc;
    for (int i = 0; i < scope->n; i++) /* the key too when it is a hidden row id */
        scope->cols[i].used = !scope->cols[i].hidden || scope->cols[i].field >= -2;
    SqlBind b;
    memset(&b, 0, sizeof b);
    b.cx = cx;
    b.scope = scope;
    SqlExpr *w = NULL;
    if (where && (rc = sql_expr_bind(&b, where, &w)))
        return rc;
    if (w && w->kind == SE_CONST && w->type == QR_SQL_UNKNOWN) { /* WHERE 'yes': boolean input rules */
        SqlValue v;
        if ((rc = sqlv_cast(cx, &w->val, QR_SQL_BOOL, w->loc, &v)))
            return rc;
        w->val = v;
        w->type = QR_SQL_BOOL;
    }
    if (w && w->type != QR_SQL_BOOL && w->type != QR_SQL_UNKNOWN)
        return sql_err_at(cx, w->loc, QR_ETYPE, "42804", "argument of WHERE must be type boolean");
    SqlTableScan sc;
    memset(&sc, 0, sizeof sc);
    sc.t = t;
    sc.qual = alias ? alias : qr_table_name(t);
    sc.scope = scope;
    sc.first = 0;
    sc.n_cols = scope->n;
    sc.conj = w ? &w : NULL;
    sc.n_conj = w ? 1 : 0;
    sc.texts = b.texts;
    sc.n_texts = b.n_texts;
    sc.drive = -1;
    sc.topk = -1;
    if (w && w->kind == SE_MATCH)
        for (int i = 0; i < b.n_texts; i++)
            if (b.texts[i] == w->text)
                sc.drive = i;
    SqlValue *rows;
    uint64_t n;
    if ((rc = sql_scan_table(cx, &sc, &rows, &n)))
        return rc;
    out->scope = scope;
    out->n = n;
    out->vals = rows;
    out->docs = qr_arena_alloc(cx->arena, (n + 1) * sizeof *out->docs);
    if (!out->docs)
        return sql_err_at(cx, -1, QR_ELIMIT, "54000", "query memory limit exceeded");
    int idc = scope->n - 2;
    for (uint64_t i = 0; i < n; i++)
        out->docs[i] = rows[i * (uint64_t)scope->n + (uint64_t)idc].u.i;
    return QR_OK;
}
