/*
 * segment.c — opening and reading an immutable segment, and merging
 * segments term by term.
 *
 * Layer: index/.  Calls sfile, docstore, column (store/), postings and
 * termdict (index/).
 *
 * SEC_META layout (varints): n_docs, n_fields, then per field
 * (total_len, n_docs), then min_lsn, max_lsn, then — only when the table
 * indexes the combined "_all" field — its (total_len, n_docs).
 * SEC_PK layout: u32 n | u32 offs[n+1] | u32 sorted[n] | key bytes, where
 * key of doc d = bytes[offs[d] .. offs[d+1]) and `sorted` lists docs in
 * key order (binary search for lookups).
 */
#include "index/btree.h"
#include "index/seg_int.h"
#include "store/mem.h"
#include "store/sfile.h"
#include "store/util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct Segment {
    _Atomic int refs;
    uint64_t id;
    char *path;            /* owns: the file, or an in-memory segment's name */
    Sfile *sf;             /* owns a reference */
    bool in_mem;           /* the bytes live in memory (sfw_finish_mem), no file */
    uint32_t n_docs;
    uint64_t min_lsn, max_lsn;
    int n_fields;
    SegFieldStats fstats[QR_MAX_FIELDS];
    TermDict *td;          /* owns */
    TermDict *surf;        /* owns: SEC_SURFACES, NULL when absent */
    const uint8_t *surf_terms; /* borrows from sf: SEC_SURFACE_TERMS */
    size_t surf_terms_len;
    const uint8_t *post;   /* borrows from sf */
    size_t post_len;
    const uint8_t *pos;
    size_t pos_len;
    DocStore *ds;          /* owns */
    const uint32_t *pk_offs, *pk_sorted; /* borrow from sf */
    const uint8_t *pk_bytes;
    size_t pk_bytes_len;
    const uint32_t *norms[QR_MAX_FIELDS]; /* borrow from sf */
    const uint32_t *all_norms;            /* borrows; NULL without "_all" */
    SegFieldStats all_stats;
    Column *cols[QR_MAX_FIELDS];          /* own */
    uint64_t file_bytes;
    /* B-tree side files: attached and detached while readers run, so the
     * slots are atomic and a detached tree is kept (retired) until the
     * segment is freed — readers that loaded it hold a segment reference. */
    _Atomic(BTree *) bts[QR_MAX_FIELDS];  /* own */
    pthread_mutex_t bt_lock;              /* guards retired */
    BTree **retired;                      /* owns */
    int n_retired;
};

void seg_meta_write(QrBuf *out, uint32_t n_docs, int n_fields, const uint64_t *field_total,
                    const uint32_t *field_docs, uint64_t min_lsn, uint64_t max_lsn, bool has_all,
                    uint64_t all_total, uint32_t all_docs)
{
    qr_buf_put_varint(out, n_docs);
    qr_buf_put_varint(out, (uint64_t)n_fields);
    for (int f = 0; f < n_fields; f++) {
        qr_buf_put_varint(out, field_total[f]);
        qr_buf_put_varint(out, field_docs[f]);
    }
    qr_buf_put_varint(out, min_lsn);
    qr_buf_put_varint(out, max_lsn);
    if (has_all) {
        /* optional trailer: the "_all" field's statistics */
        qr_buf_put_varint(out, all_total);
        qr_buf_put_varint(out, all_docs);
    }
}

int seg_key_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    if (c)
        return c;
    return (an > bn) - (an < bn);
}
#define key_cmp seg_key_cmp

typedef struct DocKeys {
    const uint8_t *bytes;
    const uint32_t *offs;
} DocKeys;

static int cmp_doc_keys(const void *x, const void *y, void *arg)
{
    const DocKeys *k = arg;
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    int c = key_cmp(k->bytes + k->offs[a], k->offs[a + 1] - k->offs[a], k->bytes + k->offs[b],
                    k->offs[b + 1] - k->offs[b]);
    return c ? c : (a > b) - (a < b);
}

void seg_sort_docs_by_key(uint32_t *docs, uint32_t n, const uint8_t *bytes, const uint32_t *offs)
{
    DocKeys k = {bytes, offs};
    qsort_r(docs, n, sizeof *docs, cmp_doc_keys, &k); /* no shared state: sorts run in parallel */
}

static int corrupt(QrError *err, const char *path, const char *what)
{
    qr_error_set(err, QR_ECORRUPT, "segment file \"%s\" is damaged: %s", path, what);
    qr_error_hint(err, "run quarry check; restore from a backup or open with --salvage");
    return QR_ECORRUPT;
}

/* Open a segment over `sf` (an opened section file or in-memory image;
 * the reference moves to the segment, also on failure). */
static int seg_open_sf(Sfile *sf, const char *path, uint64_t id, Segment **out, QrError *err)
{
    *out = NULL;
    Segment *s = qr_calloc(1, sizeof *s);
    if (!s) {
        sf_unref(sf);
        return qr_error_set(err, QR_ENOMEM, "out of memory opening a segment");
    }
    atomic_init(&s->refs, 1);
    pthread_mutex_init(&s->bt_lock, NULL);
    s->id = id;
    s->sf = sf;
    s->in_mem = sf && sf_in_memory(sf);
    s->path = qr_strdup(path);
    int rc;
    if (!s->path) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory");
        goto fail;
    }
    if (!sf) {
        rc = qr_error_set(err, QR_EINTERNAL, "no file for segment \"%s\"", path);
        goto fail;
    }
    s->file_bytes = sf_bytes(sf);
    const uint8_t *p;
    size_t n;
    /* meta */
    if (!sf_section(s->sf, SEC_META, &p, &n)) {
        rc = corrupt(err, path, "no meta section");
        goto fail;
    }
    QrReader r;
    qr_rd_init(&r, p, n);
    uint64_t nd = qr_rd_varint(&r), nf = qr_rd_varint(&r);
    if (r.bad || nd > SEG_MAX_DOCS || nf > QR_MAX_FIELDS) {
        rc = corrupt(err, path, "bad meta section");
        goto fail;
    }
    s->n_docs = (uint32_t)nd;
    s->n_fields = (int)nf;
    for (int f = 0; f < s->n_fields; f++) {
        s->fstats[f].total_len = qr_rd_varint(&r);
        s->fstats[f].n_docs = (uint32_t)qr_rd_varint(&r);
    }
    s->min_lsn = qr_rd_varint(&r);
    s->max_lsn = qr_rd_varint(&r);
    bool has_all = qr_rd_left(&r) > 0;
    if (has_all) {
        s->all_stats.total_len = qr_rd_varint(&r);
        s->all_stats.n_docs = (uint32_t)qr_rd_varint(&r);
    }
    if (!qr_rd_done(&r)) {
        rc = corrupt(err, path, "bad meta section");
        goto fail;
    }
    /* terms and postings */
    if (!sf_section(s->sf, SEC_TERMS, &p, &n)) {
        rc = corrupt(err, path, "no term dictionary");
        goto fail;
    }
    if ((rc = td_open(p, n, &s->td, err)) != QR_OK)
        goto fail;
    if (!sf_section(s->sf, SEC_POSTINGS, &s->post, &s->post_len) ||
        !sf_section(s->sf, SEC_POSITIONS, &s->pos, &s->pos_len)) {
        rc = corrupt(err, path, "no postings");
        goto fail;
    }
    if (sf_section(s->sf, SEC_SURFACES, &p, &n)) {
        if (!sf_section(s->sf, SEC_SURFACE_TERMS, &s->surf_terms, &s->surf_terms_len)) {
            rc = corrupt(err, path, "word forms without their terms");
            goto fail;
        }
        if ((rc = td_open(p, n, &s->surf, err)) != QR_OK)
            goto fail;
    }
    /* docs */
    if (!sf_section(s->sf, SEC_DOCS, &p, &n)) {
        rc = corrupt(err, path, "no document store");
        goto fail;
    }
    if ((rc = ds_open(p, n, &s->ds, err)) != QR_OK)
        goto fail;
    if (ds_count(s->ds) != s->n_docs) {
        rc = corrupt(err, path, "document count disagrees with the meta section");
        goto fail;
    }
    /* primary keys */
    if (!sf_section(s->sf, SEC_PK, &p, &n) || n < 4) {
        rc = corrupt(err, path, "no primary key section");
        goto fail;
    }
    uint32_t pkn = qr_get_u32le(p);
    size_t need = 4 + ((size_t)pkn + 1) * 4 + (size_t)pkn * 4;
    if (pkn != s->n_docs || n < need) {
        rc = corrupt(err, path, "bad primary key section");
        goto fail;
    }
    s->pk_offs = (const uint32_t *)(p + 4);
    s->pk_sorted = s->pk_offs + pkn + 1;
    s->pk_bytes = p + need;
    s->pk_bytes_len = n - need;
    for (uint32_t d = 0; d < pkn; d++)
        if (s->pk_offs[d] > s->pk_offs[d + 1] || s->pk_sorted[d] >= pkn) {
            rc = corrupt(err, path, "bad primary key offsets");
            goto fail;
        }
    if (s->pk_offs[0] != 0 || s->pk_offs[pkn] != s->pk_bytes_len) {
        rc = corrupt(err, path, "bad primary key offsets");
        goto fail;
    }
    /* norms and columns */
    if (has_all) {
        if (!sf_section(s->sf, SEC_NORMS + QR_ALL_FIELD, &p, &n) || n != (size_t)s->n_docs * 4) {
            rc = corrupt(err, path, "bad norms section of the _all field");
            goto fail;
        }
        s->all_norms = (const uint32_t *)p;
    }
    for (int f = 0; f < s->n_fields; f++) {
        if (sf_section(s->sf, SEC_NORMS + f, &p, &n)) {
            if (n != (size_t)s->n_docs * 4) {
                rc = corrupt(err, path, "bad norms section");
                goto fail;
            }
            s->norms[f] = (const uint32_t *)p;
        }
        if (sf_section(s->sf, SEC_COLUMN + f, &p, &n)) {
            char name[32];
            snprintf(name, sizeof name, "field %d", f);
            s->cols[f] = col_open(p, n, name, err);
            if (!s->cols[f]) {
                rc = err && err->code ? err->code : QR_ECORRUPT;
                goto fail;
            }
            if (col_rows(s->cols[f]) != s->n_docs) {
                rc = corrupt(err, path, "column row count disagrees with the meta section");
                goto fail;
            }
        }
    }
    *out = s;
    return QR_OK;
fail:
    seg_unref(s);
    return rc;
}

int seg_open(const char *path, uint64_t id, Segment **out, QrError *err)
{
    *out = NULL;
    Sfile *sf;
    int rc = sf_open(path, SEG_FILE_KIND, &sf, err);
    return rc != QR_OK ? rc : seg_open_sf(sf, path, id, out, err);
}

/* The last step of building or merging: the file at `path`, or with mem_out
 * an in-memory segment named `path` with id `id`.  Frees sw. */
int seg_write_out(SfileWriter *sw, const char *path, bool do_fsync, uint64_t id,
                  Segment **mem_out, QrError *err)
{
    if (!mem_out)
        return sfw_finish(sw, path, do_fsync, err);
    Sfile *sf;
    int rc = sfw_finish_mem(sw, path, &sf, err);
    return rc != QR_OK ? rc : seg_open_sf(sf, path, id, mem_out, err);
}

bool seg_in_memory(const Segment *s) { return s->in_mem; }

void seg_set_lsn_range(Segment *s, uint64_t min_lsn, uint64_t max_lsn)
{
    s->min_lsn = min_lsn;
    s->max_lsn = max_lsn;
}

Segment *seg_ref(Segment *s)
{
    atomic_fetch_add(&s->refs, 1);
    return s;
}

void seg_unref(Segment *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    for (int f = 0; f < QR_MAX_FIELDS; f++) {
        if (s->cols[f])
            col_close(s->cols[f]);
        bt_close(atomic_load(&s->bts[f]));
    }
    for (int k = 0; k < s->n_retired; k++)
        bt_close(s->retired[k]);
    qr_free(s->retired);
    pthread_mutex_destroy(&s->bt_lock);
    ds_close(s->ds);
    td_close(s->td);
    td_close(s->surf);
    if (s->sf)
        sf_unref(s->sf);
    qr_free(s->path);
    qr_free(s);
}

uint64_t seg_id(const Segment *s) { return s->id; }
uint32_t seg_n_docs(const Segment *s) { return s->n_docs; }
const char *seg_path(const Segment *s) { return s->path; }
uint64_t seg_file_bytes(const Segment *s) { return s->file_bytes; }
void seg_lsn_range(const Segment *s, uint64_t *min_lsn, uint64_t *max_lsn)
{
    *min_lsn = s->min_lsn;
    *max_lsn = s->max_lsn;
}
const TermDict *seg_terms(const Segment *s) { return s->td; }
const TermDict *seg_surfaces(const Segment *s) { return s->surf; }

bool seg_surface_term(const Segment *s, const uint8_t *key, size_t key_len,
                      const TermPostings *tp, const char **term, size_t *len)
{
    if (key_len < 1)
        return false;
    if (tp->docs_len == 0) { /* indexed as written */
        *term = (const char *)key + 1;
        *len = key_len - 1;
        return true;
    }
    if (tp->docs_off > s->surf_terms_len || tp->docs_len > s->surf_terms_len - tp->docs_off)
        return false;
    *term = (const char *)s->surf_terms + tp->docs_off;
    *len = tp->docs_len;
    return true;
}

int seg_surf_add(TermDictWriter *tw, QrBuf *blob, const uint8_t *key, size_t key_len,
                 const uint8_t *term, size_t term_len, uint64_t df, uint64_t tf, QrError *err)
{
    TermPostings tp = {.df = (uint32_t)(df > UINT32_MAX ? UINT32_MAX : df)};
    tp.total_tf = tf > tp.df ? tf : tp.df;
    if (tp.df == 0)
        tp.df = 1, tp.total_tf = tp.total_tf ? tp.total_tf : 1;
    if (term_len != key_len - 1 || memcmp(term, key + 1, term_len)) {
        tp.docs_off = blob->len;
        tp.docs_len = (uint32_t)term_len;
        qr_buf_append(blob, term, term_len);
    }
    return tdw_add(tw, key, key_len, &tp, err);
}
const DocStore *seg_docs(const Segment *s) { return s->ds; }

SegFieldStats seg_field_stats(const Segment *s, int field)
{
    if (field == QR_ALL_FIELD)
        return s->all_stats;
    if (field < 0 || field >= s->n_fields)
        return (SegFieldStats){0, 0};
    return s->fstats[field];
}

const uint32_t *seg_norms(const Segment *s, int field)
{
    if (field == QR_ALL_FIELD)
        return s->all_norms;
    if (field < 0 || field >= s->n_fields)
        return NULL;
    return s->norms[field];
}

const Column *seg_column(const Segment *s, int field)
{
    if (field < 0 || field >= s->n_fields)
        return NULL;
    return s->cols[field];
}

const struct BTree *seg_btree(const Segment *s, int field)
{
    if (field < 0 || field >= QR_MAX_FIELDS)
        return NULL;
    return atomic_load(&((Segment *)s)->bts[field]);
}

void seg_btree_path(char *out, size_t n, const char *seg_path, int field)
{
    size_t len = strlen(seg_path);
    if (len >= 5 && !strcmp(seg_path + len - 5, ".qseg"))
        len -= 5;
    snprintf(out, n, "%.*s.f%d%s", (int)len, seg_path, field, BT_FILE_SUFFIX);
}

/* Swap field f's tree for `bt` (may be NULL); the old one is retired. */
static int seg_btree_swap(Segment *s, int f, BTree *bt, QrError *err)
{
    pthread_mutex_lock(&s->bt_lock);
    BTree *old = atomic_load(&s->bts[f]);
    if (old) {
        BTree **r = qr_realloc(s->retired, ((size_t)s->n_retired + 1) * sizeof *r);
        if (!r) {
            pthread_mutex_unlock(&s->bt_lock);
            bt_close(bt);
            return qr_error_set(err, QR_ENOMEM, "out of memory attaching an index");
        }
        s->retired = r;
        s->retired[s->n_retired++] = old;
    }
    atomic_store(&s->bts[f], bt);
    pthread_mutex_unlock(&s->bt_lock);
    return QR_OK;
}

/* Does the schema want a B-tree on field f of this segment (*c: its column)? */
static bool seg_wants_btree(const Segment *s, const QrSchema *schema, int f, const Column **c)
{
    *c = f < schema->n_fields ? seg_column(s, f) : NULL;
    return *c && schema->fields[f].btree;
}

/* Open field f's side file (path, name: out, for messages) and check it
 * matches its column c.  QR_ENOTFOUND when there is none; QR_ECORRUPT naming
 * it when damaged. */
static int seg_btree_load(const Segment *s, const QrSchema *schema, int f, const Column *c,
                          char path[4096], char name[160], BTree **out, QrError *err)
{
    seg_btree_path(path, 4096, s->path, f);
    snprintf(name, 160, "segment %llu field \"%s\"", (unsigned long long)s->id,
             schema->fields[f].name);
    BTree *bt = NULL;
    int rc = bt_open(path, name, &bt, err);
    if (rc == QR_OK && (bt_rows(bt) != col_rows(c) || bt_type(bt) != col_type(c))) {
        bt_close(bt);
        bt = NULL;
        rc = qr_error_set(err, QR_ECORRUPT, "B-tree index %s does not match its column", name);
    }
    *out = bt;
    return rc;
}

int seg_sync_btrees(Segment *s, const QrSchema *schema, bool build, bool do_fsync, QrError *err)
{
    char path[4096], name[160];
    if (s->in_mem)
        return QR_OK; /* no side files: its few rows are served by column scans */
    for (int f = 0; f < QR_MAX_FIELDS; f++) {
        const Column *c;
        bool want = seg_wants_btree(s, schema, f, &c);
        BTree *cur = atomic_load(&s->bts[f]);
        if (!want) {
            if (cur) {
                int rc = seg_btree_swap(s, f, NULL, err);
                if (rc)
                    return rc;
            }
            continue;
        }
        if (cur)
            continue;
        BTree *bt = NULL;
        QrError e;
        qr_error_clear(&e);
        int rc = seg_btree_load(s, schema, f, c, path, name, &bt, &e);
        if (rc != QR_OK) {
            if (!build)
                continue; /* read-only: the field is served by column scans */
            if (rc != QR_ENOTFOUND)
                qr_log(QR_LOG_WARN, "rebuilding %s from its column: %s", path, e.message);
            if ((rc = bt_write(c, path, do_fsync, err)) != QR_OK ||
                (rc = bt_open(path, name, &bt, err)) != QR_OK)
                return rc;
        }
        if ((rc = seg_btree_swap(s, f, bt, err)) != QR_OK)
            return rc;
    }
    return QR_OK;
}

int seg_check_btrees(const Segment *s, const QrSchema *schema, QrError *err)
{
    char path[4096], name[160];
    for (int f = 0; f < QR_MAX_FIELDS; f++) {
        const Column *c;
        if (!seg_wants_btree(s, schema, f, &c))
            continue;
        const BTree *cur = seg_btree(s, f);
        BTree *bt = NULL;
        QrError e;
        qr_error_clear(&e);
        int rc = cur ? QR_OK : seg_btree_load(s, schema, f, c, path, name, &bt, &e);
        if (rc == QR_ENOTFOUND)
            continue; /* derived data: the next writable open builds it */
        if (rc == QR_OK)
            rc = bt_verify(cur ? cur : bt, &e);
        bt_close(bt);
        if (rc != QR_OK) {
            /* the file's own hint says to restore it; a side file is rebuilt */
            qr_error_set(err, e.code, "%s", e.message);
            if (e.detail[0])
                qr_error_detail(err, "%s", e.detail);
            qr_error_hint(err, "a B-tree side file is derived from its column: the next "
                               "writable open (quarry serve, quarry check --salvage) rebuilds it");
            return rc;
        }
    }
    return QR_OK;
}

void seg_remove_btree_files(const char *seg_path)
{
    char path[4096];
    for (int f = 0; f < QR_MAX_FIELDS; f++) {
        seg_btree_path(path, sizeof path, seg_path, f);
        unlink(path);
    }
}

int seg_verify_btrees(const Segment *s, QrError *err)
{
    for (int f = 0; f < QR_MAX_FIELDS; f++) {
        const BTree *bt = seg_btree(s, f);
        int rc = bt ? bt_verify(bt, err) : QR_OK;
        if (rc)
            return rc;
    }
    return QR_OK;
}

bool seg_term(const Segment *s, int field, const char *term, size_t len, TermPostings *tp)
{
    uint8_t kb[1 + 1024];
    if (len > 1024 || field < 0 || field > 255)
        return false;
    kb[0] = (uint8_t)field;
    memcpy(kb + 1, term, len);
    return td_lookup(s->td, kb, len + 1, tp);
}

Iter *seg_postings(const Segment *s, IterCtx *ctx, const TermPostings *tp,
                   const PostScorer *scorer, bool want_positions)
{
    Iter *it = post_iter_open(ctx, s->post, s->post_len, s->pos, s->pos_len, tp, scorer,
                              want_positions);
    if (it)
        post_iter_set_doc_limit(it, s->n_docs);
    return it;
}

bool seg_pk(const Segment *s, uint32_t doc, const uint8_t **key, size_t *len)
{
    if (doc >= s->n_docs)
        return false;
    *key = s->pk_bytes + s->pk_offs[doc];
    *len = s->pk_offs[doc + 1] - s->pk_offs[doc];
    return true;
}

int64_t seg_pk_lookup(const Segment *s, const uint8_t *key, size_t len)
{
    /* binary search for the LAST doc with this key: a re-added key inside
     * one segment keeps its newest doc live (older ones are in deletes) */
    uint32_t lo = 0, hi = s->n_docs;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        uint32_t d = s->pk_sorted[mid];
        int c = key_cmp(s->pk_bytes + s->pk_offs[d], s->pk_offs[d + 1] - s->pk_offs[d], key, len);
        if (c <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    uint32_t d = s->pk_sorted[lo - 1];
    if (key_cmp(s->pk_bytes + s->pk_offs[d], s->pk_offs[d + 1] - s->pk_offs[d], key, len) != 0)
        return -1;
    return d;
}

/* First position whose key is >= key (after_equal: > key). */
static uint32_t pk_bound(const Segment *s, const uint8_t *key, size_t len, bool after_equal)
{
    uint32_t lo = 0, hi = s->n_docs;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        uint32_t d = s->pk_sorted[mid];
        int c = key_cmp(s->pk_bytes + s->pk_offs[d], s->pk_offs[d + 1] - s->pk_offs[d], key, len);
        if (c < 0 || (after_equal && c == 0))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void seg_pk_range(const Segment *s, const uint8_t *lo, size_t lo_len, const uint8_t *hi,
                  size_t hi_len, uint32_t *from, uint32_t *to)
{
    *from = lo ? pk_bound(s, lo, lo_len, false) : 0;
    *to = hi ? pk_bound(s, hi, hi_len, true) : s->n_docs;
    if (*to < *from)
        *to = *from;
}

uint32_t seg_pk_at(const Segment *s, uint32_t pos)
{
    return s->pk_sorted[pos];
}

int seg_verify(const Segment *s, QrError *err)
{
    int rc = sf_verify(s->sf, err);
    return rc ? rc : seg_verify_btrees(s, err);
}

/* ---- merge ---- */

typedef struct MergeSrc {
    Segment *seg;
    const roaring_bitmap_t *del;
    uint32_t *remap;  /* owns until handed out */
    TermCursor *cur;
    bool live;        /* cursor not exhausted */
} MergeSrc;

size_t seg_merge_spill_keep = 8u << 20;

/* Merge the sources' postings into docs_s / pos_s and the term dictionary
 * `dict`.  With `spill` (docs and positions spills of the file at `near`),
 * the streams pass to them term by term as they grow: the offsets in the
 * dictionary count the spilled bytes, so each section is its spill then
 * what is left in the buffer. */
static int merge_postings(MergeSrc *src, int n, QrBuf *docs_s, QrBuf *pos_s, QrBuf *dict,
                          const uint32_t *const *new_norms /* 256 entries */, SfSpill *spill,
                          const char *near, QrError *err)
{
    int rc = QR_OK;
    QrArena *cur_arena = qr_arena_new(0);
    QrArena *it_arena = qr_arena_new(0);
    PostingsWriter *pw = postw_new(true);
    TermDictWriter *tw = tdw_new();
    if (!cur_arena || !it_arena || !pw || !tw) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory merging segments");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        src[i].cur = td_cursor_new(seg_terms(src[i].seg), cur_arena);
        if (!src[i].cur) {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory merging segments");
            goto done;
        }
        src[i].live = td_cursor_seek(src[i].cur, (const uint8_t *)"", 0);
    }
    uint8_t key[1 + 1024 + 8];
    for (;;) {
        /* smallest current key */
        const uint8_t *min = NULL;
        size_t min_len = 0;
        for (int i = 0; i < n; i++) {
            if (!src[i].live)
                continue;
            size_t kl;
            const uint8_t *k = td_cursor_key(src[i].cur, &kl);
            if (!min || key_cmp(k, kl, min, min_len) < 0) {
                min = k;
                min_len = kl;
            }
        }
        if (!min)
            break;
        if (min_len > sizeof key) {
            rc = qr_error_set(err, QR_ECORRUPT, "term key of %zu bytes while merging", min_len);
            goto done;
        }
        memcpy(key, min, min_len);
        size_t key_len = min_len;
        int field = key[0];
        postw_begin_term(pw);
        uint32_t added = 0;
        for (int i = 0; i < n; i++) {
            if (!src[i].live)
                continue;
            size_t kl;
            const uint8_t *k = td_cursor_key(src[i].cur, &kl);
            if (key_cmp(k, kl, key, key_len) != 0)
                continue;
            TermPostings tp;
            td_cursor_info(src[i].cur, &tp);
            IterCtx ctx;
            iter_ctx_init(&ctx, it_arena);
            Iter *it = seg_postings(src[i].seg, &ctx, &tp, NULL, true);
            if (!it) {
                rc = qr_error_set(err, QR_ENOMEM, "out of memory merging segments");
                goto done;
            }
            for (DocId d = iter_next(it); d != ITER_END; d = iter_next(it)) {
                uint32_t nd = src[i].remap[d];
                if (nd == UINT32_MAX)
                    continue;
                if (!new_norms[field]) { /* checked here: no survivors, no norms at all */
                    rc = qr_error_set(err, QR_ECORRUPT, "term of unknown field %d while merging",
                                      field);
                    goto done;
                }
                uint32_t np;
                const uint32_t *pos = it->vt->positions(it, &np);
                if ((rc = postw_add(pw, nd, it->vt->freq(it), pos, new_norms[field][nd], err)) !=
                    QR_OK)
                    goto done;
                added++;
            }
            iter_close(it);
            if (ctx.err.code != QR_OK) {
                qr_error_copy(err, &ctx.err);
                rc = ctx.err.code;
                goto done;
            }
            qr_arena_reset(it_arena);
            src[i].live = td_cursor_next(src[i].cur);
        }
        if (added) {
            TermPostings tp;
            if ((rc = postw_end_term(pw, docs_s, pos_s, &tp, err)) != QR_OK)
                goto done;
            if (spill) {
                tp.docs_off += spill[0].len;
                if (tp.pos_len)
                    tp.pos_off += spill[1].len;
            }
            if ((rc = tdw_add(tw, key, key_len, &tp, err)) != QR_OK)
                goto done;
            if (spill && docs_s->len >= seg_merge_spill_keep &&
                (rc = sf_spill_put(&spill[0], near, docs_s, err)) != QR_OK)
                goto done;
            if (spill && pos_s->len >= seg_merge_spill_keep &&
                (rc = sf_spill_put(&spill[1], near, pos_s, err)) != QR_OK)
                goto done;
        }
    }
    rc = tdw_finish(tw, dict, err);
done:
    postw_free(pw);
    tdw_free(tw);
    qr_arena_free(it_arena);
    qr_arena_free(cur_arena);
    return rc;
}

/* The word forms of the merged segment: every source's forms, their counts
 * added, each kept while its term survived into the merged dictionary
 * `dict`.  Written only when every source has forms (a source from before
 * them would leave words out, so the merged segment then has none and is
 * searched by its terms).  A form with two terms keeps the least.  Forms
 * of deleted documents stay while their term lives on in others: they
 * come from the sources, not from the documents read again.  *wrote tells
 * whether out_dict / blob are set. */
static int merge_surfaces(MergeSrc *src, int n, const QrBuf *dict, QrBuf *out_dict, QrBuf *blob,
                          bool *wrote, QrError *err)
{
    *wrote = false;
    for (int i = 0; i < n; i++)
        if (!seg_surfaces(src[i].seg))
            return QR_OK;
    TermDict *merged = NULL;
    QrArena *arena = qr_arena_new(0);
    TermDictWriter *tw = tdw_new();
    TermCursor **cur = qr_calloc((size_t)n, sizeof *cur);
    bool *live = qr_calloc((size_t)n, sizeof *live);
    int rc = arena && tw && cur && live ? QR_OK
                                        : qr_error_set(err, QR_ENOMEM, "out of memory merging segments");
    if (rc == QR_OK)
        rc = td_open(dict->data ? dict->data : (const uint8_t *)"", dict->len, &merged, err);
    for (int i = 0; i < n && rc == QR_OK; i++) {
        if (!(cur[i] = td_cursor_new(seg_surfaces(src[i].seg), arena)))
            rc = qr_error_set(err, QR_ENOMEM, "out of memory merging segments");
        else
            live[i] = td_cursor_seek(cur[i], (const uint8_t *)"", 0);
    }
    uint8_t key[1 + 1024 + 8], tkey[1 + 1024 + 8];
    while (rc == QR_OK) {
        const uint8_t *min = NULL;
        size_t min_len = 0;
        for (int i = 0; i < n; i++) {
            size_t kl;
            const uint8_t *k = live[i] ? td_cursor_key(cur[i], &kl) : NULL;
            if (k && (!min || key_cmp(k, kl, min, min_len) < 0)) {
                min = k;
                min_len = kl;
            }
        }
        if (!min)
            break;
        if (min_len > sizeof key || min_len < 1) {
            rc = qr_error_set(err, QR_ECORRUPT, "word form of %zu bytes while merging", min_len);
            break;
        }
        memcpy(key, min, min_len);
        uint64_t df = 0, tf = 0;
        const char *term = NULL;
        size_t term_len = 0;
        for (int i = 0; i < n; i++) {
            size_t kl;
            const uint8_t *k = live[i] ? td_cursor_key(cur[i], &kl) : NULL;
            if (!k || key_cmp(k, kl, key, min_len) != 0)
                continue;
            TermPostings tp;
            td_cursor_info(cur[i], &tp);
            df += tp.df;
            tf += tp.total_tf;
            const char *t;
            size_t tl;
            if (seg_surface_term(src[i].seg, k, kl, &tp, &t, &tl)) {
                if (t == (const char *)k + 1)
                    t = (const char *)key + 1; /* the cursor's key moves on */
                if (!term || key_cmp((const uint8_t *)t, tl, (const uint8_t *)term, term_len) < 0) {
                    term = t; /* the least term, as segbuild.c keeps */
                    term_len = tl;
                }
            }
            live[i] = td_cursor_next(cur[i]);
        }
        if (!term || term_len + 1 > sizeof tkey)
            continue;
        tkey[0] = key[0];
        memcpy(tkey + 1, term, term_len);
        TermPostings tp;
        if (td_lookup(merged, tkey, term_len + 1, &tp))
            rc = seg_surf_add(tw, blob, key, min_len, tkey + 1, term_len, df, tf, err);
    }
    if (rc == QR_OK && (rc = tdw_finish(tw, out_dict, err)) == QR_OK)
        *wrote = qr_buf_ok(blob) || (rc = qr_error_set(err, QR_ENOMEM, "out of memory")) == QR_OK;
    td_close(merged);
    tdw_free(tw);
    qr_free(cur);
    qr_free(live);
    qr_arena_free(arena);
    return rc;
}

int seg_column_copy_row(const Column *c, uint32_t row, ColWriter *w, const QrField *f,
                        QrError *err)
{
    int rc;
    if (!c) {
        rc = colw_add_null(w);
    } else {
        switch (schema_column_type(f)) { /* (a numeric field's: int64 or keyword) */
        case QR_COL_INT64:
        case QR_COL_TIMESTAMP: {
            int64_t v;
            rc = col_get_int(c, row, &v) ? colw_add_int(w, v) : colw_add_null(w);
            break;
        }
        case QR_COL_FLOAT64: {
            double v;
            rc = col_get_float(c, row, &v) ? colw_add_float(w, v) : colw_add_null(w);
            break;
        }
        case QR_COL_BOOL: {
            bool v;
            rc = col_get_bool(c, row, &v) ? colw_add_bool(w, v) : colw_add_null(w);
            break;
        }
        default: {
            const char *v;
            size_t n;
            rc = col_get_str(c, row, &v, &n) ? colw_add_str(w, v, n) : colw_add_null(w);
            break;
        }
        }
    }
    if (rc != QR_OK)
        return qr_error_set(err, QR_ENOMEM, "out of memory copying column \"%s\"", f->name);
    return QR_OK;
}

static int seg_merge_to(Segment *const *srcs, const roaring_bitmap_t *const *dels, int n,
                        const QrSchema *schema, const char *path, bool do_fsync, uint64_t id,
                        Segment **mem_out, uint32_t ***remap_out, QrError *err)
{
    int rc = QR_OK;
    MergeSrc *src = qr_calloc((size_t)n, sizeof *src);
    SfileWriter *sw = sfw_new(SEG_FILE_KIND, SEG_FORMAT_VERSION);
    DocStoreWriter *dw = dsw_new(16 * 1024);
    /* a merge into a file spills its large streams: postings, positions,
     * stored documents (one in memory is small: NRT segments) */
    SfSpill spill[3] = {SF_SPILL_INIT, SF_SPILL_INIT, SF_SPILL_INIT};
    bool to_file = !mem_out;
    if (dw && to_file)
        dsw_spill_to(dw, &spill[2], path, seg_merge_spill_keep);
    QrBuf docs_s, pos_s, dict, tmp, pk_bytes, pk_offs, surf_dict, surf_blob;
    qr_buf_init(&surf_dict);
    qr_buf_init(&surf_blob);
    qr_buf_init(&docs_s);
    qr_buf_init(&pos_s);
    qr_buf_init(&dict);
    qr_buf_init(&tmp);
    qr_buf_init(&pk_bytes);
    qr_buf_init(&pk_offs);
    QrBuf norms[QR_MAX_FIELDS];
    uint64_t ftotal[QR_MAX_FIELDS] = {0};
    uint32_t fdocs[QR_MAX_FIELDS] = {0};
    QrBuf all_norms;
    uint64_t all_total = 0;
    uint32_t all_docs = 0;
    qr_buf_init(&all_norms);
    bool has_all = schema->all_field;
    ColWriter *cw[QR_MAX_FIELDS] = {0};
    int nf = schema->n_fields;
    for (int f = 0; f < nf; f++)
        qr_buf_init(&norms[f]);
    if (!src || !sw || !dw) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory merging segments");
        goto done;
    }
    /* never launder damage into a fresh checksum: verify every source first
     * (CRC32C runs at GB/s, small next to the merge itself) */
    for (int i = 0; i < n; i++)
        if ((rc = seg_verify(srcs[i], err)) != QR_OK)
            goto done;
    /* doc remapping */
    uint32_t next = 0;
    uint64_t min_lsn = UINT64_MAX, max_lsn = 0;
    for (int i = 0; i < n; i++) {
        src[i].seg = srcs[i];
        src[i].del = dels ? dels[i] : NULL;
        uint32_t nd = seg_n_docs(srcs[i]);
        src[i].remap = qr_malloc(((size_t)nd + 1) * sizeof(uint32_t));
        if (!src[i].remap) {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory merging segments");
            goto done;
        }
        for (uint32_t d = 0; d < nd; d++)
            src[i].remap[d] =
                (src[i].del && roaring_bitmap_contains(src[i].del, d)) ? UINT32_MAX : next++;
        uint64_t a, b;
        seg_lsn_range(srcs[i], &a, &b);
        if (a < min_lsn)
            min_lsn = a;
        if (b > max_lsn)
            max_lsn = b;
    }
    if (next > SEG_MAX_DOCS) {
        rc = qr_error_set(err, QR_ELIMIT, "merged segment would exceed %u docs", SEG_MAX_DOCS);
        goto done;
    }
    for (int f = 0; f < nf; f++) {
        int ct = schema_column_type(&schema->fields[f]);
        if (ct >= 0 && !(cw[f] = colw_new((QrColType)ct))) {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory merging segments");
            goto done;
        }
    }
    /* per-doc data: norms, docs, keys, columns */
    qr_buf_put_u32(&pk_offs, 0);
    for (int i = 0; i < n; i++) {
        Segment *s = src[i].seg;
        /* stored documents: blocks whose documents all stay are copied
         * compressed, as they are (no snappy round trip) */
        bool *keep = NULL;
        if (src[i].del && !roaring_bitmap_is_empty(src[i].del)) {
            if (!(keep = qr_malloc((size_t)seg_n_docs(s) + 1))) {
                rc = qr_error_set(err, QR_ENOMEM, "out of memory merging segments");
                goto done;
            }
            for (uint32_t d = 0; d < seg_n_docs(s); d++)
                keep[d] = src[i].remap[d] != UINT32_MAX;
        }
        rc = dsw_add_from(dw, seg_docs(s), keep, err);
        qr_free(keep);
        if (rc != QR_OK)
            goto done;
        for (uint32_t d = 0; d < seg_n_docs(s); d++) {
            if (src[i].remap[d] == UINT32_MAX)
                continue;
            for (int f = 0; f < nf; f++) {
                const uint32_t *nm = seg_norms(s, f);
                uint32_t v = nm ? nm[d] : 0;
                qr_buf_put_u32(&norms[f], v);
                ftotal[f] += v;
                fdocs[f] += v > 0;
                if (cw[f] && (rc = seg_column_copy_row(seg_column(s, f), d, cw[f],
                                                       &schema->fields[f], err)) != QR_OK)
                    goto done;
            }
            if (has_all) {
                const uint32_t *an = seg_norms(s, QR_ALL_FIELD);
                uint32_t v = an ? an[d] : 0;
                qr_buf_put_u32(&all_norms, v);
                all_total += v;
                all_docs += v > 0;
            }
            const uint8_t *k = NULL;
            size_t kl = 0;
            seg_pk(s, d, &k, &kl);
            qr_buf_append(&pk_bytes, k, kl);
            qr_buf_put_u32(&pk_offs, (uint32_t)pk_bytes.len);
        }
    }
    for (int f = 0; f < nf; f++)
        if (!qr_buf_ok(&norms[f])) {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory merging segments");
            goto done;
        }
    if (!qr_buf_ok(&all_norms)) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory merging segments");
        goto done;
    }
    const uint32_t *nn[256];
    for (int f = 0; f < 256; f++)
        nn[f] = f < nf ? (const uint32_t *)norms[f].data : NULL;
    if (has_all)
        nn[QR_ALL_FIELD] = (const uint32_t *)all_norms.data;
    if ((rc = merge_postings(src, n, &docs_s, &pos_s, &dict, nn, to_file ? spill : NULL, path,
                             err)) != QR_OK)
        goto done;
    bool has_surf = false;
    if ((rc = merge_surfaces(src, n, &dict, &surf_dict, &surf_blob, &has_surf, err)) != QR_OK)
        goto done;

    seg_meta_write(&tmp, next, nf, ftotal, fdocs, min_lsn == UINT64_MAX ? 0 : min_lsn, max_lsn,
                   has_all, all_total, all_docs);
    if ((rc = sfw_add_buf(sw, SEC_META, &tmp, err)) != QR_OK ||
        (rc = sfw_add_buf(sw, SEC_TERMS, &dict, err)) != QR_OK ||
        (rc = sfw_add_spill(sw, SEC_POSTINGS, &spill[0], &docs_s, err)) != QR_OK ||
        (rc = sfw_add_spill(sw, SEC_POSITIONS, &spill[1], &pos_s, err)) != QR_OK)
        goto done;
    if (has_surf && ((rc = sfw_add_buf(sw, SEC_SURFACES, &surf_dict, err)) != QR_OK ||
                     (rc = sfw_add_buf(sw, SEC_SURFACE_TERMS, &surf_blob, err)) != QR_OK))
        goto done;
    qr_buf_init(&tmp);
    if ((rc = dsw_finish(dw, &tmp, err)) != QR_OK ||
        (rc = sfw_add_spill(sw, SEC_DOCS, &spill[2], &tmp, err)) != QR_OK)
        goto done;
    qr_buf_init(&tmp);
    if (!qr_buf_ok(&pk_bytes) || !qr_buf_ok(&pk_offs)) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory merging segments");
        goto done;
    }
    if ((rc = seg_write_pk_section(pk_bytes.data ? pk_bytes.data : (const uint8_t *)"",
                                   (const uint32_t *)pk_offs.data, next, &tmp, err)) != QR_OK ||
        (rc = sfw_add_buf(sw, SEC_PK, &tmp, err)) != QR_OK)
        goto done;
    if (has_all && (rc = sfw_add_buf(sw, SEC_NORMS + QR_ALL_FIELD, &all_norms, err)) != QR_OK)
        goto done;
    for (int f = 0; f < nf; f++) {
        const QrField *fd = &schema->fields[f];
        if (fd->type == QR_FT_TEXT && fd->indexed) {
            if ((rc = sfw_add_buf(sw, SEC_NORMS + f, &norms[f], err)) != QR_OK)
                goto done;
        }
        if (cw[f]) {
            qr_buf_init(&tmp);
            if ((rc = colw_finish(cw[f], &tmp, err)) != QR_OK ||
                (rc = sfw_add_buf(sw, SEC_COLUMN + f, &tmp, err)) != QR_OK)
                goto done;
        }
    }
    rc = seg_write_out(sw, path, do_fsync, id, mem_out, err);
    sw = NULL;
    if (rc == QR_OK && remap_out) {
        uint32_t **rm = qr_calloc((size_t)n, sizeof *rm);
        if (!rm) {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory");
            goto done;
        }
        for (int i = 0; i < n; i++) {
            rm[i] = src[i].remap;
            src[i].remap = NULL;
        }
        *remap_out = rm;
    }
done:
    if (src)
        for (int i = 0; i < n; i++)
            qr_free(src[i].remap);
    qr_free(src);
    sfw_free(sw);
    dsw_free(dw);
    for (int k = 0; k < 3; k++)
        sf_spill_close(&spill[k]);
    for (int f = 0; f < nf; f++) {
        qr_buf_free(&norms[f]);
        if (cw[f])
            colw_free(cw[f]);
    }
    qr_buf_free(&docs_s);
    qr_buf_free(&pos_s);
    qr_buf_free(&dict);
    qr_buf_free(&tmp);
    qr_buf_free(&pk_bytes);
    qr_buf_free(&pk_offs);
    qr_buf_free(&all_norms);
    qr_buf_free(&surf_dict);
    qr_buf_free(&surf_blob);
    return rc;
}

int seg_merge(Segment *const *srcs, const roaring_bitmap_t *const *dels, int n,
              const QrSchema *schema, const char *path, bool do_fsync, uint32_t ***remap_out,
              QrError *err)
{
    return seg_merge_to(srcs, dels, n, schema, path, do_fsync, 0, NULL, remap_out, err);
}

int seg_merge_mem(Segment *const *srcs, const roaring_bitmap_t *const *dels, int n,
                  const QrSchema *schema, const char *name, uint64_t id, Segment **out,
                  uint32_t ***remap_out, QrError *err)
{
    *out = NULL;
    return seg_merge_to(srcs, dels, n, schema, name, false, id, out, remap_out, err);
}
