/*
 * op_scan.c — the table scan operator: one table access of sql_scan.c as
 * a leaf of the tree.  The access path (text index, column scan with zone
 * maps, B-tree, primary-key lookup or range, every row, the ordered walk)
 * is the one the scan's planner chose; the pushed conditions are applied
 * inside, and the batches are document rows whose other columns are
 * filled late (exec.h).
 *
 * Layer: query/ (SQL execution).  Calls sql_scan.c.
 */
#include "query/exec/exec.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef struct ScanOp {
    SqlOp op;
    SqlTableScan *sc;         /* borrows (the query block's) */
} ScanOp;

static int scan_open(SqlOp *op, SqlCtx *cx)
{
    ScanOp *s = (ScanOp *)op;
    return sql_scan_open(cx, s->sc);
}

static int scan_next(SqlOp *op, SqlCtx *cx, SqlBatch **out)
{
    ScanOp *s = (ScanOp *)op;
    return sql_scan_next(cx, s->sc, out);
}

static void scan_close(SqlOp *op, SqlCtx *cx)
{
    ScanOp *s = (ScanOp *)op;
    sql_scan_close(cx, s->sc);
}

/* The node type PostgreSQL's users would recognize for each path. */
static const char *path_node(const SqlTableScan *sc)
{
    if (sc->colagg_used)
        return "Column Aggregate Scan";
    switch (sc->path) {
    case SQL_PATH_TEXT:
    case SQL_PATH_CHECK:
        return "Text Scan";
    case SQL_PATH_SCAN:
        return sc->ordered ? "Ordered Column Scan" : "Column Scan";
    case SQL_PATH_BTREE:
        return "B-tree Scan";
    case SQL_PATH_PK:
        return sc->pk_range ? "Key Range Scan" : "Key Lookup";
    default:
        return sc->ordered ? "Ordered Seq Scan" : "Seq Scan";
    }
}

static void scan_explain(const SqlOp *op, SqlCtx *cx, SqlExplainNode *n)
{
    const ScanOp *s = (const ScanOp *)op;
    const SqlTableScan *sc = s->sc;
    sql_explain_type(n, path_node(sc), qr_table_name(sc->t), sc->qual);
    sql_explain_prop(n, cx, "Access Path", "%s", sql_path_name(sc->path));
    for (int i = 0; i < sc->n_texts; i++) {
        SqlValue q;
        SqlEvalRow r = {.doc = -1};
        QrBuf qb;
        qr_buf_init(&qb);
        if (sql_expr_eval(cx, sc->texts[i]->query, &r, &q) == QR_OK)
            qr_sql_value_text(&q, &qb);
        char matches[80] = "";
        if (i == sc->drive)
            snprintf(matches, sizeof matches,
                     sc->uncounted ? " (driving, matches not counted: top-%" PRIu64 " only)"
                                   : " (driving, matches=%" PRIu64 ")",
                     sc->text_rows);
        sql_explain_prop(n, cx, "Text Query", "%s @@ '%.*s'%s",
                         sc->texts[i]->field ? sc->texts[i]->field : sc->qual, (int)qb.len,
                         qb.data ? (char *)qb.data : "", matches);
        qr_buf_free(&qb);
    }
    /* the conditions checked per row (the driving predicate holds for its set) */
    SqlExpr *rest[64];
    int n_rest = 0;
    for (int i = 0; i < sc->n_conj && n_rest < 64; i++)
        if (!(sc->drive >= 0 && sc->conj[i]->kind == SE_MATCH &&
              sc->conj[i]->text == sc->texts[sc->drive] &&
              (sc->path == SQL_PATH_TEXT || sc->path == SQL_PATH_CHECK ||
               sc->path == SQL_PATH_SCAN)))
            rest[n_rest++] = sc->conj[i];
    if (n_rest)
        sql_explain_prop(n, cx, "Filter", "%s", sql_conj_sql(cx, rest, n_rest, sc->scope, false));
    if (sc->n_colpreds)
        sql_explain_prop(n, cx, "Column Predicates", "%d (zone maps)", sc->n_colpreds);
    if (sc->topk >= 0)
        sql_explain_prop(n, cx, "Top-k", "%" PRId64 " by score from the text index", sc->topk);
    if (sc->path == SQL_PATH_PK && sc->pk_range)
        sql_explain_prop(n, cx, "Key Range", "%" PRIu64 " keys", sc->pk_range_keys);
    if (sc->ordered)
        sql_explain_prop(n, cx, "Order", "%s %s, blocks best zone-map bound first",
                         sc->scope->cols[sc->order_col].name, sc->order_desc ? "DESC" : "ASC");
    if (sc->ordered && sc->rank_on)
        sql_explain_prop(n, cx, "Deep Page", "ranks %" PRIu64 " to %" PRIu64
                         ", by rank on the column when every condition is a column predicate",
                         sc->rank_from, sc->rank_from + sc->rank_count - 1);
    QrBuf b;
    qr_buf_init(&b);
    for (int i = 0; i < sc->n_alts; i++)
        qr_buf_printf(&b, "%s%s (rows=%.0f cost=%.2f)%s", i ? ", " : "", sql_path_name(sc->alts[i].path),
                      sc->alts[i].rows, sc->alts[i].cost, sc->alts[i].path == sc->path ? " *" : "");
    if (b.len)
        sql_explain_prop(n, cx, "Alternatives", "%.*s", (int)b.len, (char *)b.data);
    qr_buf_free(&b);
    if (sc->note)
        sql_explain_prop(n, cx, "Note", "%s", sc->note);
    sql_explain_actual(n, cx, "Candidates Checked", "%" PRIu64, sc->candidates);
    if (sc->candidates >= sc->rows_out && !sc->colagg_used)
        sql_explain_actual(n, cx, "Rows Removed by Filter", "%" PRIu64, sc->candidates - sc->rows_out);
    if (sc->zm_blocks_total)
        sql_explain_actual(n, cx, "Zone Map Blocks", "%" PRIu64 " of %" PRIu64 " skipped",
                           sc->zm_blocks_skipped, sc->zm_blocks_total);
    if (sc->bt_pages)
        sql_explain_actual(n, cx, "B-tree Pages", "%" PRIu64, sc->bt_pages);
    if (sc->colagg_used)
        sql_explain_actual(n, cx, "Aggregated from Column Blocks", "%" PRIu64 " rows", sc->colagg_rows);
    if (sc->ordered)
        sql_explain_actual(n, cx, "Ordered Walk",
                           "%" PRIu64 " of %" PRIu64 " blocks read, %" PRIu64 " rows skipped by their key",
                           sc->ord_blocks_read, sc->ord_blocks_total, sc->ord_rows_skipped);
    if (sc->rank_used)
        sql_explain_actual(n, cx, "Rank Window",
                           "rows %" PRIu64 " to %" PRIu64 ": %" PRIu64 " rows kept with their ties, %"
                           PRIu64 " before",
                           sc->rank_from, sc->rank_from + sc->rank_count - 1, sc->rank_rows,
                           sc->rank_before);
    if (sc->n_texts)
        sql_explain_actual(n, cx, "Posting Blocks", "%" PRIu64 " decoded, %" PRIu64 " skipped%s%s",
                           sc->post_blocks_decoded, sc->post_blocks_skipped,
                           sc->text_strategy ? ", strategy " : "",
                           sc->text_strategy ? sc->text_strategy : "");
}

static const SqlOpVt SCAN_VT = {"scan", scan_open, scan_next, scan_close, scan_explain};

SqlOp *sql_op_scan(SqlCtx *cx, SqlTableScan *sc, int width)
{
    ScanOp *s = sql_op_new(cx, sizeof *s, &SCAN_VT, NULL, NULL, width);
    if (!s)
        return NULL;
    s->sc = sc;
    s->op.est_rows = sc->est_rows;
    s->op.total_cost = sc->cost;
    return &s->op;
}

SqlTableScan *sql_op_scan_of(const SqlOp *op)
{
    return op && op->vt == &SCAN_VT ? ((const ScanOp *)op)->sc : NULL;
}

static void scans_of(const SqlOp *op, const SqlTableScan **v, int *n, int cap)
{
    if (!op)
        return;
    if (op->vt == &SCAN_VT && *n < cap)
        v[(*n)++] = ((const ScanOp *)op)->sc;
    for (int k = 0; k < op->n_kids; k++)
        scans_of(op->kids[k], v, n, cap);
}

void sql_op_scan_notes(SqlCtx *cx, const SqlOp *op)
{
    /* in FROM order (a scan's first scope column), whatever side of a join
     * the planner put each table on */
    const SqlTableScan *v[64];
    int n = 0;
    scans_of(op, v, &n, 64);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1]->scope == v[j]->scope && v[j - 1]->first > v[j]->first; j--) {
            const SqlTableScan *t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    for (int i = 0; i < n; i++)
        sql_scan_note(cx, v[i]);
}
