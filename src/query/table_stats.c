/*
 * table_stats.c — qr_table_column_stats (quarry.h): per-column statistics of
 * a table, summed or merged over the segments of its current snapshot.
 *
 * Layer: query/.  Calls index/table.h, index/segment.h, index/btree.h and
 * store/column.h.
 *
 * Per segment a column carries exact row, NULL and distinct counts, min and
 * max, a sortedness flag, an equi-depth histogram and HyperLogLog registers
 * (docs/columns.md).  Across segments: rows and NULLs add up, min/max
 * combine, exact distinct counts give a lower bound (the largest) and an
 * upper bound (the sum), and the HLL registers merge into one estimate of
 * the table-wide distinct count.  Segments written before a field existed
 * have no column: their rows count as NULL.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index/btree.h"
#include "query/filter.h"
#include "query/query_int.h"
#include "store/decimal.h"
#include "store/mem.h"

static void val_json(const ColVal *v, int ct, char *out, size_t cap, double *num)
{
    *num = 0;
    switch (v->kind) {
    case CV_INT:
        *num = (double)v->u.i;
        if (ct == QR_COL_TIMESTAMP) {
            char t[48];
            qr_format_timestamp(v->u.i, t, sizeof t);
            snprintf(out, cap, "\"%s\"", t);
        } else {
            snprintf(out, cap, "%lld", (long long)v->u.i);
        }
        break;
    case CV_FLOAT:
        *num = v->u.f;
        if (isnan(v->u.f) || isinf(v->u.f))
            snprintf(out, cap, "\"%s\"", isnan(v->u.f) ? "NaN" : v->u.f > 0 ? "Infinity" : "-Infinity");
        else
            snprintf(out, cap, "%.17g", v->u.f);
        break;
    case CV_BOOL:
        *num = v->u.b;
        snprintf(out, cap, "%s", v->u.b ? "true" : "false");
        break;
    case CV_STR: {
        /* a JSON string of at most 64 bytes of the value, cut on a character
         * boundary (marked "...") and further if escapes would overflow out */
        const unsigned char *p = (const unsigned char *)v->u.str.s;
        size_t ends[65], k = 0, n = 0; /* ends[i]: byte length of the first i characters */
        ends[k++] = 0;
        while (n < v->u.str.n) {
            int l = qr_utf8_seq_len(p + n, v->u.str.n - n);
            if (n + (size_t)(l ? l : 1) > 64)
                break;
            n += (size_t)(l ? l : 1);
            ends[k++] = n;
        }
        QrBuf b;
        qr_buf_init(&b);
        for (;;) {
            b.len = 0;
            qr_buf_json_str(&b, v->u.str.s, n);
            if (n < v->u.str.n && b.len) {
                b.len--; /* the closing quote */
                qr_buf_append(&b, "...\"", 4);
            }
            if (b.len < cap || k <= 1)
                break;
            n = ends[--k - 1]; /* one character less */
        }
        snprintf(out, cap, "%.*s", (int)b.len, b.data ? (const char *)b.data : "\"\"");
        qr_buf_free(&b);
        break;
    }
    }
}

/* Order of two values of one column type (keywords: memcmp, shorter first). */
static int val_cmp(const ColVal *a, const ColVal *b)
{
    switch (a->kind) {
    case CV_INT: return a->u.i < b->u.i ? -1 : a->u.i > b->u.i;
    case CV_FLOAT:
        if (isnan(a->u.f) || isnan(b->u.f))
            return isnan(a->u.f) - isnan(b->u.f);
        return a->u.f < b->u.f ? -1 : a->u.f > b->u.f;
    case CV_BOOL: return (int)a->u.b - (int)b->u.b;
    case CV_STR: {
        size_t n = a->u.str.n < b->u.str.n ? a->u.str.n : b->u.str.n;
        int c = n ? memcmp(a->u.str.s, b->u.str.s, n) : 0;
        return c ? c : (a->u.str.n < b->u.str.n ? -1 : a->u.str.n > b->u.str.n);
    }
    }
    return 0;
}

/* A numeric field's bound: a scaled int64 as its decimal (NaN a string); a
 * text column's bounds order by bytes, not value, so they are null. */
static void num_json(const ColVal *v, const QrField *fd, char *out, size_t cap, double *num)
{
    *num = 0;
    if (v->kind != CV_INT || fd->scale < 0) {
        snprintf(out, cap, "null");
        return;
    }
    char d[48];
    dec_from_scaled(v->u.i, fd->scale, d);
    *num = v->u.i == DEC_SCALED_NAN ? NAN : strtod(d, NULL);
    snprintf(out, cap, v->u.i == DEC_SCALED_NAN ? "\"%s\"" : "%s", d);
}

int qr_table_column_stats(QrTable *t, QrColumnStats **out, int *n, QrError *err)
{
    const QrSchema *sc = qr_table_schema(t);
    QrColumnStats *v = qr_calloc((size_t)sc->n_fields + 1, sizeof *v);
    uint8_t *regs = qr_malloc(COL_HLL_REGS);
    if (!v || !regs) {
        qr_free(v);
        qr_free(regs);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    Snapshot *snap = table_snapshot(t->table);
    int m = 0;
    for (int f = 0; f < sc->n_fields; f++) {
        const QrField *fd = &sc->fields[f];
        int ct = fd->type == QR_FT_NUMERIC ? schema_column_type(fd) : qr_filter_field_coltype(sc, f);
        if (ct < 0)
            continue;
        QrColumnStats *cs = &v[m++];
        snprintf(cs->name, sizeof cs->name, "%s", sc->fields[f].name);
        cs->field = f;
        cs->ftype = sc->fields[f].type;
        cs->col_type = fd->type == QR_FT_NUMERIC ? "numeric" : col_type_name((QrColType)ct);
        cs->btree = sc->fields[f].btree;
        memset(regs, 0, COL_HLL_REGS);
        ColVal mn = {0}, mx = {0};
        for (int i = 0; i < snap->n_segs; i++) {
            const Segment *seg = snap->segs[i];
            const Column *c = seg_column(seg, f);
            if (!c) {
                cs->rows += seg_n_docs(seg);
                cs->nulls += seg_n_docs(seg);
                continue;
            }
            ColStats st = col_stats(c);
            cs->rows += st.rows;
            cs->nulls += st.null_count;
            cs->segments++;
            cs->segments_sorted += st.is_sorted;
            cs->hist_buckets += st.n_buckets;
            cs->blocks += st.n_blocks;
            cs->distinct_sum += st.distinct;
            if (st.distinct > cs->distinct_max)
                cs->distinct_max = st.distinct;
            uint8_t seg_regs[COL_HLL_REGS];
            col_hll_registers(c, seg_regs);
            col_hll_merge(regs, seg_regs);
            if (st.has_range) {
                if (!cs->has_range || val_cmp(&st.min, &mn) < 0)
                    mn = st.min;
                if (!cs->has_range || val_cmp(&st.max, &mx) > 0)
                    mx = st.max;
                cs->has_range = true;
            }
            if (seg_btree(seg, f))
                cs->segments_btree++;
        }
        cs->distinct_hll = cs->segments ? col_hll_estimate(regs) : 0;
        if (cs->has_range && fd->type == QR_FT_NUMERIC) { /* value * 10^scale, or text */
            num_json(&mn, fd, cs->min_json, sizeof cs->min_json, &cs->min_num);
            num_json(&mx, fd, cs->max_json, sizeof cs->max_json, &cs->max_num);
        } else if (cs->has_range) {
            val_json(&mn, ct, cs->min_json, sizeof cs->min_json, &cs->min_num);
            val_json(&mx, ct, cs->max_json, sizeof cs->max_json, &cs->max_num);
        } else {
            strcpy(cs->min_json, "null");
            strcpy(cs->max_json, "null");
        }
    }
    snapshot_release(snap);
    qr_free(regs);
    *out = v;
    *n = m;
    return QR_OK;
}
