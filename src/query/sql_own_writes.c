/*
 * sql_own_writes.c — read your own writes: inside a transaction block a
 * read of a table sees the block's buffered writes to it, for this session
 * alone.
 *
 * Layer: query/.  Calls index/ (segment builder and reader, snapshots) and
 * the base kit.
 *
 * The block's buffered ops on the table (sql_txn.c, in order; inside a
 * write statement only those of earlier statements, so a statement never
 * sees its own rows) are built into a private segment: puts are added, a
 * later put of a key replaces the earlier one, deletes remove it.  The
 * overlay snapshot is the committed (or REPEATABLE READ pinned) snapshot
 * with that segment appended and the committed copy of every key the block
 * wrote marked deleted -- an ordinary Snapshot, so every access path (text
 * predicates and their scores, counts, aggregates, B-trees on the committed
 * segments, key lookups) reads it unchanged.  Nothing of it is published:
 * other sessions' snapshots never contain the segment.
 *
 * The segment file is written into the table's directory as
 * "txn-<pid>-<n>.tmp", mapped, and unlinked at once (a crash in between
 * leaves a stray ".tmp" that the next writable open removes).  The overlay
 * is cached per session and table, keyed by the base snapshot's version
 * and the buffer's generation, so reads between writes build it once.
 * Overlay versions have the top bit set, so no cache keyed by a snapshot
 * version mistakes one for a committed snapshot.
 *
 * The target table of an UPDATE or DELETE is read without the overlay: the
 * write path merges the block's writes into the rows it found by key
 * (sql_dml.c dml_rows), so a block of many single-row updates does not
 * rebuild a segment per statement.
 */
#include "query/query_int.h"
#include "query/sql_int.h"
#include "query/sql_w.h"
#include "index/segment.h"

#include <cJSON.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define OVERLAY_VERSION_BIT (1ull << 63)

static _Atomic uint64_t overlay_counter;

void sqlo_clear(SqluState *st)
{
    for (int i = 0; i < st->n_ovl; i++)
        snapshot_release(st->ovl[i].snap);
    st->n_ovl = 0;
}

void sqlo_session_free(SqluState *st)
{
    sqlo_clear(st);
    qr_free(st->ovl);
    st->ovl = NULL;
    st->cap_ovl = 0;
}

/* Key bytes of a buffered op's key (JSON text); 0 when it cannot be encoded. */
static size_t op_key(const TxnOp *o, uint8_t *out, QrError *err)
{
    cJSON *v = cJSON_Parse(o->key);
    if (!v) {
        qr_error_set(err, QR_ENOMEM, "out of memory");
        return 0;
    }
    size_t n = pk_encode(v, out, err);
    cJSON_Delete(v);
    return n;
}

/* The block's writes to t among ops[0, lim) as a segment, or *out NULL
 * when there are no documents to add.  The keys written (puts and deletes)
 * go into *keys / *key_lens (arena). */
static int build_segment(SqlCtx *cx, QrTable *t, const SqluState *st, int lim, Segment **out,
                         roaring_bitmap_t **seg_dels, uint8_t ***keys, size_t **key_lens,
                         int *n_keys)
{
    *out = NULL;
    *seg_dels = NULL;
    *n_keys = 0;
    int n = 0;
    for (int i = 0; i < lim; i++)
        n += !st->ops[i].absorbed && !strcmp(st->ops[i].table, t->name);
    *keys = qr_arena_alloc(cx->arena, (size_t)n * sizeof **keys + 1);
    *key_lens = qr_arena_alloc(cx->arena, (size_t)n * sizeof **key_lens + 1);
    if (!*keys || !*key_lens)
        return sql_err_at(cx, -1, QR_ELIMIT, NULL, "query memory limit exceeded");
    SegBuilder *b = NULL;
    int rc = segb_new(table_schema(t->table), &b, cx->err);
    for (int i = 0; rc == QR_OK && i < lim; i++) {
        const TxnOp *o = &st->ops[i];
        if (o->absorbed || strcmp(o->table, t->name) != 0)
            continue;
        uint8_t key[PK_KEY_MAX];
        size_t kl = op_key(o, key, cx->err);
        uint8_t *kc = kl ? qr_arena_alloc(cx->arena, kl) : NULL;
        if (!kc) {
            rc = cx->err->code ? (int)cx->err->code
                               : sql_err_at(cx, -1, QR_ELIMIT, NULL, "query memory limit exceeded");
            break;
        }
        memcpy(kc, key, kl);
        (*keys)[*n_keys] = kc;
        (*key_lens)[(*n_keys)++] = kl;
        if (o->is_delete) {
            segb_delete_key(b, key, kl);
            continue;
        }
        cJSON *root = cJSON_ParseWithLength(o->doc, o->doc_len);
        uint32_t doc;
        rc = root ? segb_add(b, o->doc, o->doc_len, root, &doc, cx->err)
                  : qr_error_set(cx->err, QR_ENOMEM, "out of memory");
        cJSON_Delete(root);
    }
    if (rc == QR_OK && segb_n_docs(b) > 0) {
        char path[4096];
        uint64_t n_ovl = atomic_fetch_add(&overlay_counter, 1);
        snprintf(path, sizeof path, "%s/tables/%s/txn-%ld-%llu.tmp", qr_db_dir(t->db), t->name,
                 (long)getpid(), (unsigned long long)n_ovl);
        rc = segb_finish(b, path, false, seg_dels, cx->err);
        if (rc == QR_OK) {
            rc = seg_open(path, UINT64_MAX - n_ovl, out, cx->err);
            unlink(path); /* the mapping keeps it; nobody else may see it */
        }
    }
    segb_free(b);
    if (rc != QR_OK && *seg_dels) {
        roaring_bitmap_free(*seg_dels);
        *seg_dels = NULL;
    }
    return rc;
}

/* base with seg appended and the committed copies of keys marked deleted.
 * Takes seg's reference and seg_dels; base is borrowed. */
static Snapshot *overlay_new(const Snapshot *base, Segment *seg, roaring_bitmap_t *seg_dels,
                             uint8_t *const *keys, const size_t *key_lens, int n_keys)
{
    int n = base->n_segs + (seg != NULL);
    Snapshot *s = qr_calloc(1, sizeof *s);
    Segment **segs = qr_calloc((size_t)n + 1, sizeof *segs);
    roaring_bitmap_t **dels = qr_calloc((size_t)n + 1, sizeof *dels);
    DocId *bases = qr_calloc((size_t)n + 1, sizeof *bases);
    if (!s || !segs || !dels || !bases) {
        qr_free(s);
        qr_free(segs);
        qr_free(dels);
        qr_free(bases);
        if (seg)
            seg_unref(seg);
        if (seg_dels)
            roaring_bitmap_free(seg_dels);
        return NULL;
    }
    s->segs = segs;
    s->dels = dels;
    s->base = bases;
    atomic_store(&s->refs, 1);
    s->version = OVERLAY_VERSION_BIT | atomic_fetch_add(&overlay_counter, 1);
    s->n_segs = base->n_segs;
    s->n_docs = base->n_docs;
    s->n_live = base->n_live;
    bool oom = false;
    for (int i = 0; i < base->n_segs; i++) {
        segs[i] = seg_ref(base->segs[i]);
        bases[i] = base->base[i];
        if (base->dels[i] && !(dels[i] = roaring_bitmap_copy(base->dels[i])))
            oom = true;
    }
    for (int k = 0; k < n_keys && !oom; k++) {
        int si;
        uint32_t local;
        if (!snapshot_find_key(base, keys[k], key_lens[k], &si, &local))
            continue;
        if (!dels[si] && !(dels[si] = roaring_bitmap_create())) {
            oom = true;
            break;
        }
        if (roaring_bitmap_add_checked(dels[si], local))
            s->n_live--;
    }
    if (seg) {
        int i = s->n_segs++;
        segs[i] = seg;
        dels[i] = seg_dels;
        bases[i] = (DocId)base->n_docs;
        uint64_t nd = seg_n_docs(seg);
        s->n_docs += nd;
        s->n_live += nd - (seg_dels ? roaring_bitmap_get_cardinality(seg_dels) : 0);
        if (seg_dels && roaring_bitmap_is_empty(seg_dels)) {
            roaring_bitmap_free(seg_dels);
            dels[i] = NULL;
        }
    }
    if (oom) {
        snapshot_release(s);
        return NULL;
    }
    return s;
}

Snapshot *sqlo_overlay(SqlCtx *cx, SqluState *st, QrTable *t, Snapshot *base)
{
    int lim = st->in_stmt ? st->stmt_start : st->n_ops;
    if (st->dml_target[0] && !strcmp(st->dml_target, t->name))
        return base;
    bool any = false;
    for (int i = 0; i < lim && !any; i++)
        any = !st->ops[i].absorbed && !strcmp(st->ops[i].table, t->name);
    if (!any)
        return base;
    for (int i = 0; i < st->n_ovl; i++) {
        SqloCache *c = &st->ovl[i];
        if (strcmp(c->table, t->name) != 0)
            continue;
        if (c->tab == t->table && c->base_version == base->version && c->ops_gen == st->ops_gen &&
            c->lim == lim) {
            snapshot_release(base);
            atomic_fetch_add(&c->snap->refs, 1);
            return c->snap;
        }
        snapshot_release(c->snap); /* stale: replaced below */
        st->ovl[i] = st->ovl[--st->n_ovl];
        break;
    }
    Segment *seg;
    roaring_bitmap_t *seg_dels;
    uint8_t **keys;
    size_t *key_lens;
    int n_keys;
    if (build_segment(cx, t, st, lim, &seg, &seg_dels, &keys, &key_lens, &n_keys) != QR_OK) {
        snapshot_release(base);
        return NULL;
    }
    Snapshot *s = overlay_new(base, seg, seg_dels, keys, key_lens, n_keys);
    if (!s) {
        snapshot_release(base);
        qr_error_set(cx->err, QR_ENOMEM, "out of memory reading the transaction's own writes");
        return NULL;
    }
    SqloCache c = {.tab = t->table, .base_version = base->version, .ops_gen = st->ops_gen,
                   .lim = lim, .snap = s};
    snprintf(c.table, sizeof c.table, "%s", t->name);
    snapshot_release(base);
    if (st->n_ovl == st->cap_ovl) {
        int nc = st->cap_ovl ? st->cap_ovl * 2 : 4;
        SqloCache *no = qr_realloc(st->ovl, (size_t)nc * sizeof *no);
        if (!no)
            return s; /* uncached: built again next time */
        st->ovl = no;
        st->cap_ovl = nc;
    }
    atomic_fetch_add(&s->refs, 1); /* the cache's */
    st->ovl[st->n_ovl++] = c;
    return s;
}
