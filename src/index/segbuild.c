/*
 * segbuild.c — the in-memory segment: documents accumulate here (analyzed,
 * inverted, columns typed) until segb_finish writes an immutable segment.
 *
 * Layer: index/.  Calls analyzer, postings, termdict (index/) and sfile,
 * docstore, column, schema (store/).
 *
 * Inversion: each term of the builder has a small growable byte buffer of
 * varint-coded postings (doc delta, freq, position deltas).  A document's
 * tokens are gathered per field as (term id << 32 | position) pairs, sorted
 * so each term's positions are contiguous, then appended to the terms'
 * buffers.  segb_finish sorts the terms by key and streams them through the
 * postings and term-dictionary writers.
 *
 * The combined "_all" field is not inverted word by word: each field term
 * links to the "_all" term of its text (TermEnt.all_id), each doc records
 * where each field starts in its "_all" text (all_bases), and segb_finish
 * merges a "_all" term's postings from its field terms' (post_replay) --
 * the same postings, for half the per-word work of a load.
 *
 * Surface forms: for each stemmed field, every distinct word as written
 * (folded, not stemmed) is kept with the term it was indexed as and its
 * doc count, and written as SEC_SURFACES (with "_all" entries derived from
 * every field's forms), so typo and prefix matching can work on the words
 * users type (segment.h).
 */
#include "index/segment.h"
#include "index/analyzer.h"
#include "index/seg_int.h"
#include "store/decimal.h"
#include "store/mem.h"
#include "store/sfile.h"
#include "store/util.h"

#include <cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- primary keys ---- */

size_t pk_encode(const cJSON *v, uint8_t *out, QrError *err)
{
    if (cJSON_IsString(v)) {
        size_t n = strlen(v->valuestring);
        if (n == 0) {
            qr_error_set(err, QR_ECONSTRAINT, "primary key is an empty string");
            return 0;
        }
        if (n + 1 > PK_KEY_MAX) {
            qr_error_set(err, QR_ELIMIT, "primary key is too long (%zu bytes, at most %d)", n,
                         PK_KEY_MAX - 1);
            return 0;
        }
        out[0] = 's';
        memcpy(out + 1, v->valuestring, n);
        return n + 1;
    }
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d != floor(d) || fabs(d) > 9007199254740992.0) {
            qr_error_set(err, QR_ECONSTRAINT, "primary key %g is not an integer", d);
            return 0;
        }
        int64_t i = (int64_t)d;
        uint64_t u = (uint64_t)i ^ (1ull << 63);
        out[0] = 'i';
        for (int k = 0; k < 8; k++)
            out[1 + k] = (uint8_t)(u >> (56 - 8 * k));
        return 9;
    }
    qr_error_set(err, QR_ECONSTRAINT, "primary key must be a string or an integer");
    return 0;
}

void pk_to_json(const uint8_t *key, size_t len, QrBuf *out)
{
    if (len == 9 && key[0] == 'i') {
        uint64_t u = 0;
        for (int k = 0; k < 8; k++)
            u = (u << 8) | key[1 + k];
        int64_t i = (int64_t)(u ^ (1ull << 63));
        qr_buf_printf(out, "%lld", (long long)i);
        return;
    }
    qr_buf_json_str(out, (const char *)key + 1, len - 1);
}

/* ---- hashing ---- */

uint64_t seg_hash_bytes(const void *p, size_t n)
{
    /* FNV-1a over 8-byte words, then a final avalanche (splitmix64) */
    const uint8_t *s = p;
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

/* ---- builder ---- */

/* A term's state: exactly one 64-byte cache line (the array is 64-byte
 * aligned), what every word touches first, its hash apart (SegBuilder.
 * term_hash, read only when the lookup table grows).  A word of a bulk load
 * misses the cache on its term's entry once, not on two lines. */
typedef struct TermEnt {
    /* per word (tok_push, an_sink) */
    uint32_t stamp;    /* TokBuf stamp of the doc-field being inverted */
    uint32_t first, last, cnt; /* its occurrences there: a chain through TokBuf.next */
    int32_t all_id;    /* the same word in the "_all" field, -1 until seen */
    /* per doc-field (invert_tokens) */
    uint32_t df;
    uint32_t last_doc; /* last doc appended (valid when df > 0) */
    uint32_t undo_stamp; /* segb_add call that saved this term's state */
    uint64_t total_tf;
    uint8_t *post;     /* owns: varint postings */
    uint32_t post_len, post_cap;
    /* per lookup and at the segment's end */
    uint32_t key_off;  /* into keys */
    uint32_t key_len;
} TermEnt;
_Static_assert(sizeof(TermEnt) == 64, "a term's entry is one cache line");

/* What a word the analyzer's stem cache names (Token.cache_id) was indexed
 * as: its term and surface form (index + 1; 0 = not yet known), valid while
 * the slot keeps its generation.  One entry holds both, so a repeated word
 * costs one memory access here, not two. */
typedef struct MemoEnt {
    uint32_t gen;
    uint32_t term1, surf1;
} MemoEnt;

/* A term's state before the document being added touched it. */
typedef struct UndoEnt {
    uint32_t id, post_len, df, last_doc;
    uint64_t total_tf;
} UndoEnt;

/* The words of one doc-field (or one doc for "_all") on their way into the
 * postings: occurrences are chained per term as they arrive, so inversion is
 * linear (no sort); positions come out ascending because they arrive so. */
typedef struct TokBuf {
    uint32_t *pos, *next;  /* owns: per occurrence */
    uint32_t n, cap;
    uint32_t *uniq;        /* owns: terms in first-occurrence order */
    uint32_t n_uniq, cap_uniq;
    uint32_t stamp;        /* never 0 */
} TokBuf;

/* A word form of a stemmed field and the term it was indexed as. */
typedef struct SurfEnt {
    uint32_t key_off, key_len; /* into surf_keys: [field][folded form] */
    uint64_t hash;
    uint32_t term;             /* its term id (the field's) */
    uint32_t df, tf;           /* docs and occurrences (failed adds may be counted) */
    uint32_t last_doc1;        /* last doc counted in df, + 1 */
} SurfEnt;

typedef struct ColAcc {
    ColWriter *w; /* owns; NULL for fields without a column */
} ColAcc;

struct SegBuilder {
    const QrSchema *schema;   /* borrows */
    Analyzer *an[QR_MAX_FIELDS]; /* owns; text fields analyzed alike share one
                                    (segb_shared_analyzer), released once */
    /* terms */
    TermEnt *terms;           /* 64-byte aligned inside terms_mem */
    void *terms_mem;          /* owns the terms' allocation */
    uint64_t *term_hash;      /* owns: per term, seg_hash_bytes of its key */
    uint32_t n_terms, cap_terms;
    uint64_t *slots;          /* owns: open addressing, hash high 32 bits << 32 | term + 1 */
    uint32_t n_slots;
    QrBuf keys;               /* term key bytes */
    /* surface forms of stemmed fields */
    bool stems[QR_MAX_FIELDS];  /* the field's analyzer stems */
    bool want_surf;             /* some field stems: SEC_SURFACES is written */
    SurfEnt *surfs;             /* owns */
    uint32_t n_surfs, cap_surfs;
    uint64_t *surf_slots;       /* owns: open addressing, hash high 32 bits << 32 | surf + 1 */
    uint32_t n_surf_slots;
    QrBuf surf_keys;
    /* per doc scratch */
    MemoEnt *memo[QR_MAX_FIELDS]; /* owns: per field, per stem-cache slot */
    UndoEnt *undo;            /* owns: terms touched by the segb_add in progress */
    uint32_t n_undo, cap_undo;
    uint32_t undo_stamp;      /* the segb_add in progress */
    uint32_t undo_n_terms;    /* terms that existed before it */
    bool poisoned;            /* a write that cannot be undone failed */
    TokBuf tok;               /* the current doc-field */
    uint32_t all_base;        /* position of the current field inside "_all" */
    bool all;                 /* schema->all_field */
    QrBuf all_bases;          /* u32 per doc per field: where the field's
                                 positions start in the doc's "_all" text */
    QrBuf all_norms;
    uint64_t all_total;
    uint32_t all_docs;
    /* norms */
    QrBuf norms[QR_MAX_FIELDS]; /* u32 per doc, only for indexed text fields */
    uint64_t field_total[QR_MAX_FIELDS];
    uint32_t field_docs[QR_MAX_FIELDS];
    /* docs, pks, columns */
    DocStoreWriter *docs;     /* owns */
    QrBuf pk_bytes;
    QrBuf pk_offs;            /* u32 offsets, n_docs + 1 */
    uint32_t *pk_slots;       /* owns: doc + 1 */
    uint32_t n_pk_slots;
    ColAcc cols[QR_MAX_FIELDS];
    QrBuf multi_text;         /* a multi-valued keyword's array text, per value */
    roaring_bitmap_t *deleted; /* owns */
    uint32_t n_docs;
    uint64_t min_lsn, max_lsn;
    size_t post_bytes;
};

static int an_sink(void *ctx, const Token *t);

/* Initial sizes: a builder per commit must be cheap for one document, and
 * the tables grow (rehash) as documents come. */
#define SEGB_TERM_SLOTS_MIN (1u << 10)
#define SEGB_MEMO_MIN_DOCS 64

/* An analyzer an earlier text field of b already holds that analyzes field f
 * alike (language, stop words, accent folding; no field-specific stop list),
 * or NULL.  Sharing keeps one stem cache (4 MiB) per language per builder
 * instead of one per field; the per-field memos stay apart, keyed by the
 * cache's (slot, generation), which name one text whichever field filled it. */
static Analyzer *segb_shared_analyzer(const SegBuilder *b, int f)
{
    const QrField *fd = &b->schema->fields[f];
    size_t n;
    if (schema_stop_list(b->schema, f, &n) && n)
        return NULL;
    for (int g = 0; g < f; g++) {
        const QrField *gd = &b->schema->fields[g];
        if (b->an[g] && strcmp(gd->language, fd->language) == 0 &&
            gd->stopwords == fd->stopwords && gd->accent_fold == fd->accent_fold &&
            !(schema_stop_list(b->schema, g, &n) && n))
            return b->an[g];
    }
    return NULL;
}

/* Whether an earlier field shares field f's analyzer (release it once). */
static bool segb_an_seen_before(const SegBuilder *b, int f)
{
    for (int g = 0; g < f; g++)
        if (b->an[f] && b->an[g] == b->an[f])
            return true;
    return false;
}

int segb_new(const QrSchema *schema, SegBuilder **out, QrError *err)
{
    *out = NULL;
    SegBuilder *b = qr_calloc(1, sizeof *b);
    if (!b)
        return qr_error_set(err, QR_ENOMEM, "out of memory creating a segment builder");
    b->schema = schema;
    qr_buf_init(&b->keys);
    qr_buf_init(&b->pk_bytes);
    qr_buf_init(&b->pk_offs);
    qr_buf_init(&b->all_norms);
    qr_buf_init(&b->all_bases);
    qr_buf_init(&b->surf_keys);
    b->all = schema->all_field;
    for (int f = 0; f < schema->n_fields; f++)
        qr_buf_init(&b->norms[f]);
    b->n_slots = SEGB_TERM_SLOTS_MIN; /* grows with the terms: small commits stay small */
    b->tok.stamp = 1;
    b->slots = qr_calloc(b->n_slots, sizeof *b->slots);
    b->n_pk_slots = 1 << 6;
    b->pk_slots = qr_calloc(b->n_pk_slots, sizeof *b->pk_slots);
    b->docs = dsw_new(16 * 1024);
    b->deleted = roaring_bitmap_create();
    if (!b->slots || !b->pk_slots || !b->docs || !b->deleted) {
        segb_free(b);
        return qr_error_set(err, QR_ENOMEM, "out of memory creating a segment builder");
    }
    qr_buf_put_u32(&b->pk_offs, 0);
    for (int f = 0; f < schema->n_fields; f++) {
        const QrField *fd = &schema->fields[f];
        if (fd->type == QR_FT_TEXT && fd->indexed) {
            AnalyzerOpts o = {.language = fd->language,
                              .stopwords = fd->stopwords,
                              .accent_fold = fd->accent_fold};
            o.stop_list = schema_stop_list(schema, f, &o.stop_list_len);
            b->an[f] = segb_shared_analyzer(b, f);
            if (!b->an[f] && analyzer_acquire(&o, &b->an[f], err) != QR_OK) {
                segb_free(b);
                return err ? err->code : QR_EINVAL;
            }
            b->stems[f] = analyzer_stems(b->an[f]);
            b->want_surf |= b->stems[f];
        }
        int ct = schema_column_type(fd);
        if (ct >= 0) {
            b->cols[f].w = colw_new((QrColType)ct);
            if (!b->cols[f].w) {
                segb_free(b);
                return qr_error_set(err, QR_ENOMEM, "out of memory creating a column");
            }
        }
    }
    *out = b;
    return QR_OK;
}

void segb_free(SegBuilder *b)
{
    if (!b)
        return;
    for (int f = 0; f < QR_MAX_FIELDS; f++) {
        if (!segb_an_seen_before(b, f))
            analyzer_release(b->an[f]);
        if (b->cols[f].w)
            colw_free(b->cols[f].w);
        qr_free(b->norms[f].data);
    }
    for (uint32_t i = 0; i < b->n_terms; i++)
        qr_free(b->terms[i].post);
    qr_free(b->terms_mem);
    qr_free(b->term_hash);
    qr_free(b->slots);
    qr_buf_free(&b->keys);
    qr_free(b->undo);
    for (int f = 0; f < QR_MAX_FIELDS; f++)
        qr_free(b->memo[f]);
    qr_free(b->surfs);
    qr_free(b->surf_slots);
    qr_buf_free(&b->surf_keys);
    qr_free(b->tok.pos);
    qr_free(b->tok.next);
    qr_free(b->tok.uniq);
    qr_buf_free(&b->all_bases);
    qr_buf_free(&b->all_norms);
    dsw_free(b->docs);
    qr_buf_free(&b->pk_bytes);
    qr_buf_free(&b->pk_offs);
    qr_buf_free(&b->multi_text);
    qr_free(b->pk_slots);
    if (b->deleted)
        roaring_bitmap_free(b->deleted);
    qr_free(b);
}

uint32_t segb_n_docs(const SegBuilder *b) { return b->n_docs; }
uint32_t segb_n_live(const SegBuilder *b)
{
    return b->n_docs - (uint32_t)roaring_bitmap_get_cardinality(b->deleted);
}
size_t segb_mem_bytes(const SegBuilder *b)
{
    return b->post_bytes + b->keys.len + (size_t)b->n_terms * (sizeof(TermEnt) + 8) +
           b->pk_bytes.len + (size_t)b->n_docs * 16 + b->all_bases.len + b->surf_keys.len +
           (size_t)b->n_surfs * sizeof(SurfEnt) + (size_t)b->n_surf_slots * 8;
}
void segb_set_lsn_range(SegBuilder *b, uint64_t min_lsn, uint64_t max_lsn)
{
    b->min_lsn = min_lsn;
    b->max_lsn = max_lsn;
}

/* Double an open-addressing table of n entries whose hashes are at
 * hash(i) (slot = hash high 32 bits << 32 | entry + 1).  false on OOM. */
static bool grow_slots(uint64_t **slots, uint32_t *n_slots, uint32_t n, const void *ents,
                       size_t stride, size_t hash_off)
{
    uint32_t ns = *n_slots * 2;
    uint64_t *sl = qr_calloc(ns, sizeof *sl);
    if (!sl)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t h;
        memcpy(&h, (const char *)ents + (size_t)i * stride + hash_off, sizeof h);
        uint32_t j = (uint32_t)h & (ns - 1);
        while (sl[j])
            j = (j + 1) & (ns - 1);
        sl[j] = (h & 0xFFFFFFFF00000000ull) | (i + 1);
    }
    qr_free(*slots);
    *slots = sl;
    *n_slots = ns;
    return true;
}

static bool grow_terms_table(SegBuilder *b)
{
    return grow_slots(&b->slots, &b->n_slots, b->n_terms, b->term_hash, sizeof *b->term_hash, 0);
}

/* Double the terms' room, the entries kept 64-byte aligned (qr_realloc
 * promises 16).  false on OOM, nothing changed. */
static bool grow_terms(SegBuilder *b)
{
    uint32_t nc = b->cap_terms ? b->cap_terms * 2 : 256;
    uint64_t *nh = qr_realloc(b->term_hash, nc * sizeof *nh);
    if (!nh)
        return false;
    b->term_hash = nh;
    void *mem = qr_malloc((size_t)nc * sizeof(TermEnt) + 64);
    if (!mem)
        return false;
    TermEnt *nt = (TermEnt *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
    if (b->n_terms)
        memcpy(nt, b->terms, (size_t)b->n_terms * sizeof *nt);
    qr_free(b->terms_mem);
    b->terms_mem = mem;
    b->terms = nt;
    b->cap_terms = nc;
    return true;
}

/* Find or add the term with key [field][text]; returns index or -1 (OOM).
 * Slots carry the hash's high half, so a probe touches the term's key only
 * when the fingerprint agrees. */
static int64_t term_id(SegBuilder *b, uint8_t field, const char *text, uint32_t len)
{
    uint8_t kb[1 + 1024];
    if (len > 1024)
        len = 1024; /* absurdly long tokens are truncated; ICU rarely yields them */
    kb[0] = field;
    memcpy(kb + 1, text, len);
    uint32_t klen = len + 1;
    uint64_t h = seg_hash_bytes(kb, klen);
    uint64_t fp = h & 0xFFFFFFFF00000000ull;
    uint32_t mask = b->n_slots - 1;
    uint32_t j = (uint32_t)h & mask;
    uint64_t sv;
    while ((sv = b->slots[j])) {
        if ((sv & 0xFFFFFFFF00000000ull) == fp) {
            uint32_t id = (uint32_t)sv - 1;
            TermEnt *t = &b->terms[id];
            if (t->key_len == klen && !memcmp(b->keys.data + t->key_off, kb, klen))
                return id;
        }
        j = (j + 1) & mask;
    }
    if (b->n_terms == b->cap_terms && !grow_terms(b))
        return -1;
    if (!qr_buf_try_reserve(&b->keys, klen))
        return -1;
    TermEnt *t = &b->terms[b->n_terms];
    memset(t, 0, sizeof *t);
    t->all_id = -1;
    t->key_off = (uint32_t)b->keys.len;
    t->key_len = klen;
    b->term_hash[b->n_terms] = h;
    qr_buf_append(&b->keys, kb, klen);
    if (!qr_buf_ok(&b->keys))
        return -1;
    b->slots[j] = fp | ++b->n_terms;
    if (b->n_terms * 2 > b->n_slots && !grow_terms_table(b))
        return -1;
    return b->n_terms - 1;
}

/* Record an occurrence of term `id` at `pos` in tb. */
static bool tok_push(SegBuilder *b, TokBuf *tb, uint32_t id, uint32_t pos)
{
    if (tb->n == tb->cap) {
        uint32_t nc = tb->cap ? tb->cap * 2 : 1024;
        uint32_t *np = qr_realloc(tb->pos, nc * sizeof *np);
        if (!np)
            return false;
        tb->pos = np;
        uint32_t *nn = qr_realloc(tb->next, nc * sizeof *nn);
        if (!nn)
            return false;
        tb->next = nn;
        tb->cap = nc;
    }
    uint32_t i = tb->n++;
    tb->pos[i] = pos;
    tb->next[i] = UINT32_MAX;
    TermEnt *t = &b->terms[id];
    if (t->stamp != tb->stamp) {
        if (tb->n_uniq == tb->cap_uniq) {
            uint32_t nc = tb->cap_uniq ? tb->cap_uniq * 2 : 256;
            uint32_t *nu = qr_realloc(tb->uniq, nc * sizeof *nu);
            if (!nu)
                return false;
            tb->uniq = nu;
            tb->cap_uniq = nc;
        }
        tb->uniq[tb->n_uniq++] = id;
        t->stamp = tb->stamp;
        t->first = t->last = i;
        t->cnt = 1;
    } else {
        tb->next[t->last] = i;
        t->last = i;
        t->cnt++;
    }
    return true;
}

static void tok_reset(SegBuilder *b, TokBuf *tb)
{
    tb->n = tb->n_uniq = 0;
    if (++tb->stamp == 0) { /* wrapped: forget every stamp */
        for (uint32_t i = 0; i < b->n_terms; i++)
            b->terms[i].stamp = 0;
        tb->stamp = 1;
    }
}

static bool post_put(SegBuilder *b, TermEnt *t, uint64_t v)
{
    if (t->post_len + 10 > t->post_cap) {
        uint32_t nc = t->post_cap ? t->post_cap * 2 : 16;
        uint8_t *np = qr_realloc(t->post, nc);
        if (!np)
            return false;
        b->post_bytes += nc - t->post_cap;
        t->post = np;
        t->post_cap = nc;
    }
    t->post_len += (uint32_t)qr_varint_encode(t->post + t->post_len, v);
    return true;
}

/* Find or add the surface form (field, form) of term `term`; NULL on OOM. */
static SurfEnt *surf_find(SegBuilder *b, uint8_t field, const char *form, uint32_t len,
                          uint32_t term)
{
    uint8_t kb[1 + 1024];
    if (len > 1024)
        len = 1024;
    kb[0] = field;
    memcpy(kb + 1, form, len);
    uint32_t klen = len + 1;
    if (!b->surf_slots) {
        b->n_surf_slots = 1 << 14;
        if (!(b->surf_slots = qr_calloc(b->n_surf_slots, sizeof *b->surf_slots)))
            return NULL;
    }
    uint64_t h = seg_hash_bytes(kb, klen);
    uint64_t fp = h & 0xFFFFFFFF00000000ull;
    uint32_t mask = b->n_surf_slots - 1;
    uint32_t j = (uint32_t)h & mask;
    uint64_t sv;
    while ((sv = b->surf_slots[j])) {
        if ((sv & 0xFFFFFFFF00000000ull) == fp) {
            SurfEnt *e = &b->surfs[(uint32_t)sv - 1];
            if (e->key_len == klen && !memcmp(b->surf_keys.data + e->key_off, kb, klen))
                return e;
        }
        j = (j + 1) & mask;
    }
    if (b->n_surfs == b->cap_surfs) {
        uint32_t nc = b->cap_surfs ? b->cap_surfs * 2 : 4096;
        SurfEnt *ns = qr_realloc(b->surfs, nc * sizeof *ns);
        if (!ns)
            return NULL;
        b->surfs = ns;
        b->cap_surfs = nc;
    }
    if (!qr_buf_try_reserve(&b->surf_keys, klen))
        return NULL;
    SurfEnt *e = &b->surfs[b->n_surfs];
    *e = (SurfEnt){.key_off = (uint32_t)b->surf_keys.len, .key_len = klen, .hash = h,
                   .term = term};
    qr_buf_append(&b->surf_keys, kb, klen);
    b->surf_slots[j] = fp | ++b->n_surfs;
    if (b->n_surfs * 2 > b->n_surf_slots &&
        !grow_slots(&b->surf_slots, &b->n_surf_slots, b->n_surfs, b->surfs, sizeof *b->surfs,
                    offsetof(SurfEnt, hash)))
        return NULL;
    return e;
}

/* Count one occurrence of token t (indexed as term `term`) in the doc being
 * added; `me` (may be NULL) memoizes its surface entry.  false on OOM. */
static bool surf_note(SegBuilder *b, uint8_t field, const Token *t, uint32_t term, MemoEnt *me)
{
    SurfEnt *e;
    if (me && me->surf1) {
        e = &b->surfs[me->surf1 - 1];
    } else {
        if (!(e = surf_find(b, field, t->surface, t->surface_len, term)))
            return false;
        if (me)
            me->surf1 = (uint32_t)(e - b->surfs + 1);
    }
    if (e->last_doc1 != b->n_docs + 1) {
        e->df++;
        e->last_doc1 = b->n_docs + 1;
    }
    e->tf++;
    return true;
}

typedef struct SinkCtx {
    SegBuilder *b;
    uint8_t field;
    uint32_t n_tokens;
    bool oom;
} SinkCtx;

static int an_sink(void *ctx, const Token *t)
{
    SinkCtx *sc = ctx;
    SegBuilder *b = sc->b;
    int64_t id = -1;
    /* the analyzer's stem cache names repeated words: memoize their term
     * ids and surface forms per cache slot instead of hashing the text
     * again (a builder of a few documents -- one commit of one writer --
     * hashes instead: the memo costs a zeroed entry per stem cache slot) */
    MemoEnt *me = NULL;
    if (t->cache_id) {
        MemoEnt *memo = b->memo[sc->field];
        if (!memo && b->n_docs >= SEGB_MEMO_MIN_DOCS)
            memo = b->memo[sc->field] = qr_calloc(analyzer_cache_slots(), sizeof *memo);
        if (memo) {
            me = &memo[t->cache_id - 1];
            if (me->gen != t->cache_gen)
                *me = (MemoEnt){.gen = t->cache_gen};
            id = (int64_t)me->term1 - 1;
        }
    }
    if (id < 0) {
        id = term_id(b, sc->field, t->text, t->len);
        if (me && id >= 0)
            me->term1 = (uint32_t)id + 1;
    }
    if (id < 0 || !tok_push(b, &b->tok, (uint32_t)id, t->pos) ||
        (b->stems[sc->field] && !t->is_gram && !surf_note(b, sc->field, t, (uint32_t)id, me))) {
        sc->oom = true;
        return QR_ENOMEM;
    }
    sc->n_tokens += !t->is_gram; /* grams share their word's position: no length */
    /* "_all": only the link from the field's term to the "_all" term of
     * the same text; the "_all" postings are the fields' postings merged
     * at the segment's end (all_merge), not a second inversion per word */
    if (b->all && b->terms[id].all_id < 0) {
        int64_t aid = term_id(b, QR_ALL_FIELD, t->text, t->len);
        if (aid < 0) {
            sc->oom = true;
            return QR_ENOMEM;
        }
        b->terms[id].all_id = (int32_t)aid; /* re-index: term_id may move terms */
    }
    return 0;
}

/* Analyze one text value (string or array of strings) into b->tok. */
static int analyze_value(SegBuilder *b, int f, const cJSON *v, SinkCtx *sc, uint32_t *n_pos_out,
                         QrError *err)
{
    uint32_t pos = 0;
    const cJSON *e = cJSON_IsArray(v) ? v->child : v;
    for (; e; e = cJSON_IsArray(v) ? e->next : NULL) {
        if (!cJSON_IsString(e))
            continue; /* validated earlier */
        uint32_t n_pos = 0;
        int rc = analyzer_run_n(b->an[f], e->valuestring, strlen(e->valuestring), pos,
                                ANALYZE_CJK_GRAMS, an_sink, sc, &n_pos, err);
        if (rc != QR_OK)
            return sc->oom ? qr_error_set(err, QR_ENOMEM, "out of memory indexing a document")
                           : rc;
        pos += n_pos + 100; /* gap between array values: no phrase spans two */
    }
    *n_pos_out = pos;
    return QR_OK;
}

/* Append the occurrences gathered in tb (one doc-field, or one doc's
 * "_all") to the terms' postings, then reset tb. */
static int invert_tokens(SegBuilder *b, uint32_t doc, TokBuf *tb)
{
    for (uint32_t u = 0; u < tb->n_uniq; u++) {
        TermEnt *t = &b->terms[tb->uniq[u]];
        if (t->undo_stamp != b->undo_stamp) {
            if (b->n_undo == b->cap_undo) {
                uint32_t nc = b->cap_undo ? b->cap_undo * 2 : 256;
                UndoEnt *nu = qr_realloc(b->undo, nc * sizeof *nu);
                if (!nu)
                    return QR_ENOMEM;
                b->undo = nu;
                b->cap_undo = nc;
            }
            b->undo[b->n_undo++] = (UndoEnt){tb->uniq[u], t->post_len, t->df, t->last_doc,
                                             t->total_tf};
            t->undo_stamp = b->undo_stamp;
        }
        uint32_t delta = t->df ? doc - t->last_doc : doc;
        if (!post_put(b, t, delta) || !post_put(b, t, t->cnt))
            return QR_ENOMEM;
        uint32_t prev = 0;
        for (uint32_t i = t->first; i != UINT32_MAX; i = tb->next[i]) {
            if (!post_put(b, t, tb->pos[i] - prev))
                return QR_ENOMEM;
            prev = tb->pos[i];
        }
        t->df++;
        t->last_doc = doc;
        t->total_tf += t->cnt;
    }
    tok_reset(b, tb);
    return QR_OK;
}


int seg_value_check(const QrField *f, const cJSON *v, SegValue *out, QrError *err)
{
    out->is_null = true;
    if (!v || cJSON_IsNull(v))
        return QR_OK;
    switch (f->type) {
    case QR_FT_TEXT:
        if (cJSON_IsString(v)) {
            out->is_null = false;
            out->s = v->valuestring;
            out->n = strlen(v->valuestring);
            return QR_OK;
        }
        if (cJSON_IsArray(v)) {
            const cJSON *e;
            cJSON_ArrayForEach(e, v) if (!cJSON_IsString(e) && !cJSON_IsNull(e)) goto bad;
            out->is_null = false;
            out->s = v->child && cJSON_IsString(v->child) ? v->child->valuestring : "";
            out->n = strlen(out->s);
            return QR_OK;
        }
        goto bad;
    case QR_FT_KEYWORD:
        if (f->multi && cJSON_IsArray(v)) { /* the column gets the array text (col_multi_text) */
            const cJSON *e;
            cJSON_ArrayForEach(e, v) if (!cJSON_IsString(e)) goto bad;
            out->is_null = false;
            out->s = NULL;
            out->n = 0;
            return QR_OK;
        }
        if (!cJSON_IsString(v))
            goto bad;
        out->is_null = false;
        out->s = v->valuestring;
        out->n = strlen(v->valuestring);
        return QR_OK;
    case QR_FT_INT: {
        if (!cJSON_IsNumber(v))
            goto bad;
        double d = v->valuedouble;
        if (d != floor(d) || fabs(d) > 9.2e18)
            goto bad;
        out->is_null = false;
        out->i = (int64_t)d;
        return QR_OK;
    }
    case QR_FT_FLOAT:
        if (!cJSON_IsNumber(v))
            goto bad;
        out->is_null = false;
        out->d = v->valuedouble;
        return QR_OK;
    case QR_FT_NUMERIC: {
        /* exact: a string holds the decimal as written, a number its double */
        char buf[DEC_TEXT_MAX];
        if (!cJSON_IsString(v) && !cJSON_IsNumber(v))
            goto bad;
        const char *t = cJSON_IsString(v) ? v->valuestring : buf;
        if (cJSON_IsNumber(v))
            dec_from_double(v->valuedouble, buf);
        int r = f->scale >= 0 ? dec_to_scaled(t, strlen(t), f->scale, &out->i)
                              : dec_canon(t, strlen(t), buf, sizeof buf) < 0 ? -1 : 0;
        if (r == -2) {
            qr_error_set(err, QR_ETYPE, "numeric value \"%.64s\" is out of range for field \"%s\"",
                         t, f->name);
            qr_error_detail(err, "a field of scale %d holds fewer than %d integer digits",
                            f->scale, DEC_SCALED_MAX_PREC - f->scale + 1);
            return QR_ETYPE;
        }
        if (r < 0) {
            qr_error_set(err, QR_ETYPE, "invalid numeric \"%.64s\" for field \"%s\"", t, f->name);
            qr_error_hint(err, "give a decimal number, as a JSON number or string (\"12.50\")");
            return QR_ETYPE;
        }
        out->is_null = false;
        out->s = cJSON_IsString(v) ? v->valuestring : NULL;
        out->d = v->valuedouble;
        return QR_OK;
    }
    case QR_FT_BOOL:
        if (!cJSON_IsBool(v))
            goto bad;
        out->is_null = false;
        out->b = cJSON_IsTrue(v);
        return QR_OK;
    case QR_FT_TIMESTAMP:
        if (cJSON_IsString(v)) {
            if (!qr_parse_timestamp(v->valuestring, strlen(v->valuestring), &out->i)) {
                qr_error_set(err, QR_ETYPE, "invalid timestamp \"%.64s\" for field \"%s\"",
                             v->valuestring, f->name);
                qr_error_hint(err, "use ISO 8601 (2025-01-15 or 2025-01-15T10:00:00Z) or epoch "
                                   "seconds");
                return QR_ETYPE;
            }
            out->is_null = false;
            return QR_OK;
        }
        if (cJSON_IsNumber(v) && fabs(v->valuedouble) < 1e13) {
            out->is_null = false;
            out->i = (int64_t)llround(v->valuedouble * 1e6);
            return QR_OK;
        }
        goto bad;
    }
bad:
    qr_error_set(err, QR_ETYPE, "field \"%s\" expects %s, got %s%s", f->name,
                 f->type == QR_FT_TEXT || (f->type == QR_FT_KEYWORD && f->multi)
                     ? "a string or an array of strings"
                 : f->type == QR_FT_KEYWORD ? "a string"
                 : f->type == QR_FT_INT ? "an integer"
                 : f->type == QR_FT_FLOAT ? "a number"
                 : f->type == QR_FT_NUMERIC ? "a decimal number or string"
                 : f->type == QR_FT_BOOL ? "true or false"
                                          : "a timestamp",
                 cJSON_IsString(v) ? "a string"
                 : cJSON_IsNumber(v) ? "a number"
                 : cJSON_IsBool(v) ? "a boolean"
                 : cJSON_IsArray(v) ? "an array"
                 : cJSON_IsObject(v) ? "an object"
                                     : "another value",
                 cJSON_IsArray(v) && (f->type == QR_FT_TEXT || f->multi) ? " holding another value"
                                                                         : "");
    if (f->type == QR_FT_KEYWORD && !f->multi && cJSON_IsArray(v))
        qr_error_hint(err, "declare the field with \"multi\": true to keep a list of keywords");
    return QR_ETYPE;
}

/* The slot of `key` in the table slots[0..n) (a power of two): the entry
 * naming the newest doc with that key, or the empty slot where it goes. */
static uint32_t *pk_probe(const SegBuilder *b, uint32_t *slots, uint32_t n, const uint8_t *key,
                          size_t len, uint64_t h)
{
    uint32_t mask = n - 1;
    uint32_t j = (uint32_t)h & mask;
    const uint32_t *offs = (const uint32_t *)b->pk_offs.data;
    while (slots[j]) {
        uint32_t d = slots[j] - 1;
        if (offs[d + 1] - offs[d] == len && !memcmp(b->pk_bytes.data + offs[d], key, len))
            return &slots[j];
        j = (j + 1) & mask;
    }
    return &slots[j];
}

static uint32_t *pk_slot(SegBuilder *b, const uint8_t *key, size_t len, uint64_t h)
{
    return pk_probe(b, b->pk_slots, b->n_pk_slots, key, len, h);
}

static bool grow_pk_table(SegBuilder *b)
{
    uint32_t ns = b->n_pk_slots * 2;
    uint32_t *s = qr_calloc(ns, sizeof *s);
    if (!s)
        return false;
    /* in doc order, so that a key added again ends up naming its newest doc
     * (one slot per key, as segb_add keeps it) */
    const uint32_t *offs = (const uint32_t *)b->pk_offs.data;
    for (uint32_t d = 0; d < b->n_docs; d++) {
        const uint8_t *key = b->pk_bytes.data + offs[d];
        size_t len = offs[d + 1] - offs[d];
        *pk_probe(b, s, ns, key, len, seg_hash_bytes(key, len)) = d + 1;
    }
    qr_free(b->pk_slots);
    b->pk_slots = s;
    b->n_pk_slots = ns;
    return true;
}

bool segb_delete_key(SegBuilder *b, const uint8_t *key, size_t len)
{
    uint32_t *slot = pk_slot(b, key, len, seg_hash_bytes(key, len));
    if (!*slot)
        return false;
    uint32_t d = *slot - 1;
    if (roaring_bitmap_contains(b->deleted, d))
        return false;
    roaring_bitmap_add(b->deleted, d);
    return true;
}

/* Undo the postings a failed segb_add wrote: terms it touched get their
 * state back, terms it created are left empty (df 0: skipped by finish). */
static void segb_rollback(SegBuilder *b)
{
    for (uint32_t i = 0; i < b->n_undo; i++) {
        const UndoEnt *u = &b->undo[i];
        TermEnt *t = &b->terms[u->id];
        t->post_len = u->post_len;
        t->df = u->df;
        t->last_doc = u->last_doc;
        t->total_tf = u->total_tf;
    }
    for (uint32_t id = b->undo_n_terms; id < b->n_terms; id++) {
        b->terms[id].df = 0;
        b->terms[id].post_len = 0;
        b->terms[id].total_tf = 0;
    }
    b->n_undo = 0;
    tok_reset(b, &b->tok);
}

bool segb_poisoned(const SegBuilder *b) { return b->poisoned; }

int segb_add(SegBuilder *b, const char *json, size_t len, const cJSON *root, uint32_t *doc_out,
             QrError *err)
{
    if (b->poisoned)
        return qr_error_set(err, QR_EINTERNAL, "segment builder unusable after an earlier failure");
    const QrSchema *s = b->schema;
    if (!cJSON_IsObject(root))
        return qr_error_set(err, QR_ETYPE, "document is not a JSON object");
    if (b->n_docs >= SEG_MAX_DOCS)
        return qr_error_set(err, QR_ELIMIT, "segment is full");
    const cJSON *pkv = cJSON_GetObjectItemCaseSensitive(root, s->primary_key);
    if (!pkv || cJSON_IsNull(pkv)) {
        qr_error_set(err, QR_ECONSTRAINT, "document has no primary key \"%s\"", s->primary_key);
        qr_error_hint(err, "every document needs a \"%s\" field (a string or an integer)",
                      s->primary_key);
        return QR_ECONSTRAINT;
    }
    uint8_t key[PK_KEY_MAX];
    size_t klen = pk_encode(pkv, key, err);
    if (!klen)
        return err ? err->code : QR_ECONSTRAINT;
    /* validate every field before touching any structure */
    SegValue vals[QR_MAX_FIELDS];
    const cJSON *raw[QR_MAX_FIELDS];
    for (int f = 0; f < s->n_fields; f++) {
        raw[f] = cJSON_GetObjectItemCaseSensitive(root, s->fields[f].name);
        int rc = seg_value_check(&s->fields[f], raw[f], &vals[f], err);
        if (rc != QR_OK)
            return rc;
    }
    uint32_t doc = b->n_docs;
    /* Everything that can fail is either reserved up front or undoable, so a
     * failed add leaves the builder as it was (segb_rollback); only the
     * document store and column writers cannot be rolled back, and a failure
     * there poisons the builder. */
    if (++b->undo_stamp == 0) {
        for (uint32_t i = 0; i < b->n_terms; i++)
            b->terms[i].undo_stamp = 0;
        b->undo_stamp = 1;
    }
    b->n_undo = 0;
    b->undo_n_terms = b->n_terms;
    for (int f = 0; f < s->n_fields; f++)
        if (b->an[f] && !qr_buf_try_reserve(&b->norms[f], 4))
            return qr_error_set(err, QR_ENOMEM, "out of memory indexing a document");
    if ((b->all && (!qr_buf_try_reserve(&b->all_norms, 4) ||
                    !qr_buf_try_reserve(&b->all_bases, 4 * (size_t)s->n_fields))) ||
        !qr_buf_try_reserve(&b->pk_bytes, klen) ||
        !qr_buf_try_reserve(&b->pk_offs, 4))
        return qr_error_set(err, QR_ENOMEM, "out of memory indexing a document");
    if ((b->n_docs + 1) * 2 > b->n_pk_slots && !grow_pk_table(b))
        return qr_error_set(err, QR_ENOMEM, "out of memory indexing a document");
    /* text fields: analyze and invert; "_all" gathers every field's words,
     * fields 100 positions apart so no phrase spans two */
    b->all_base = 0;
    uint32_t all_tokens = 0;
    uint32_t ntoks[QR_MAX_FIELDS], bases[QR_MAX_FIELDS] = {0};
    for (int f = 0; f < s->n_fields; f++) {
        if (!b->an[f])
            continue;
        bases[f] = b->all_base;
        SinkCtx sc = {.b = b, .field = (uint8_t)f};
        tok_reset(b, &b->tok);
        if (!vals[f].is_null) {
            uint32_t n_pos = 0;
            int rc = analyze_value(b, f, raw[f], &sc, &n_pos, err);
            if (rc == QR_OK && invert_tokens(b, doc, &b->tok) != QR_OK)
                rc = qr_error_set(err, QR_ENOMEM, "out of memory indexing a document");
            b->all_base += n_pos + 100;
            if (rc != QR_OK) {
                segb_rollback(b);
                return rc;
            }
        }
        ntoks[f] = sc.n_tokens;
        all_tokens += sc.n_tokens;
    }
    /* from here nothing fails but the stored doc and the columns */
    if (dsw_add(b->docs, json, len, err) != QR_OK) {
        segb_rollback(b);
        b->poisoned = true;
        return err ? err->code : QR_ENOMEM;
    }
    for (int f = 0; f < s->n_fields; f++) {
        if (!b->an[f])
            continue;
        qr_buf_put_u32(&b->norms[f], ntoks[f]);
        b->field_total[f] += ntoks[f];
        b->field_docs[f] += ntoks[f] > 0;
    }
    if (b->all) {
        qr_buf_append(&b->all_bases, bases, 4 * (size_t)s->n_fields);
        qr_buf_put_u32(&b->all_norms, all_tokens);
        b->all_total += all_tokens;
        b->all_docs += all_tokens > 0;
    }
    /* columns */
    for (int f = 0; f < s->n_fields; f++) {
        ColWriter *w = b->cols[f].w;
        if (!w)
            continue;
        const SegValue *v = &vals[f];
        int rc;
        if (v->is_null)
            rc = colw_add_null(w);
        else
            switch (s->fields[f].type) {
            case QR_FT_INT:
            case QR_FT_TIMESTAMP: rc = colw_add_int(w, v->i); break;
            case QR_FT_FLOAT: rc = colw_add_float(w, v->d); break;
            case QR_FT_BOOL: rc = colw_add_bool(w, v->b); break;
            case QR_FT_NUMERIC: {
                if (s->fields[f].scale >= 0) {
                    rc = colw_add_int(w, v->i);
                    break;
                }
                char buf[DEC_TEXT_MAX];
                int n = v->s ? dec_canon(v->s, strlen(v->s), buf, sizeof buf)
                             : dec_from_double(v->d, buf);
                rc = colw_add_str(w, buf, n > 0 ? (size_t)n : 0);
                break;
            }
            default:
                if (s->fields[f].multi) {
                    QrBuf *t = &b->multi_text;
                    t->len = 0;
                    qr_buf_putc(t, '{');
                    const cJSON *e = cJSON_IsArray(raw[f]) ? raw[f]->child : raw[f];
                    for (int k = 0; e; e = cJSON_IsArray(raw[f]) ? e->next : NULL, k++) {
                        if (k)
                            qr_buf_putc(t, ',');
                        qr_buf_array_elem(t, e->valuestring, strlen(e->valuestring));
                    }
                    qr_buf_putc(t, '}');
                    rc = qr_buf_ok(t) ? colw_add_str(w, (const char *)t->data, t->len) : QR_ENOMEM;
                    break;
                }
                rc = colw_add_str(w, v->s, v->n);
                break;
            }
        if (rc != QR_OK) {
            b->poisoned = true; /* norms and the stored doc are in: a half document */
            return qr_error_set(err, QR_ENOMEM, "out of memory adding to column \"%s\"",
                                s->fields[f].name);
        }
    }
    /* primary key (space reserved above) */
    uint64_t h = seg_hash_bytes(key, klen);
    uint32_t *slot = pk_slot(b, key, klen, h);
    if (*slot)
        roaring_bitmap_add(b->deleted, *slot - 1);
    qr_buf_append(&b->pk_bytes, key, klen);
    qr_buf_put_u32(&b->pk_offs, (uint32_t)b->pk_bytes.len);
    if (!qr_buf_ok(&b->pk_bytes) || !qr_buf_ok(&b->pk_offs))
        return qr_error_set(err, QR_ENOMEM, "out of memory storing a primary key");
    *slot = doc + 1;
    b->n_docs++;
    if (doc_out)
        *doc_out = doc;
    return QR_OK;
}

/* ---- finish ---- */

/* The first 8 bytes of a key as a big-endian number, zero-padded: keys
 * whose prefixes differ sort as their prefixes do (a shorter key pads with
 * zeros, and is a proper prefix of the other where they differ), so sorts
 * compare the keys' bytes only on a tie, without touching them. */
static uint64_t key_prefix(const uint8_t *k, size_t n)
{
    uint8_t b[8] = {0};
    memcpy(b, k, n < 8 ? n : 8);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | b[i];
    return v;
}

typedef struct TermOrd {
    uint64_t pre; /* key_prefix of the term's key */
    uint32_t id;
} TermOrd;

static int cmp_term_ord(const void *a, const void *b, void *arg)
{
    const TermOrd *p = a, *q = b;
    if (p->pre != q->pre)
        return p->pre < q->pre ? -1 : 1;
    const SegBuilder *sb = arg;
    const TermEnt *x = &sb->terms[p->id];
    const TermEnt *y = &sb->terms[q->id];
    return seg_key_cmp(sb->keys.data + x->key_off, x->key_len, sb->keys.data + y->key_off,
                       y->key_len);
}

int seg_write_pk_section(const uint8_t *bytes, const uint32_t *offs, uint32_t n_docs, QrBuf *out,
                         QrError *err)
{
    uint32_t *sorted = qr_malloc(((size_t)n_docs + 1) * sizeof *sorted);
    if (!sorted)
        return qr_error_set(err, QR_ENOMEM, "out of memory writing primary keys");
    for (uint32_t i = 0; i < n_docs; i++)
        sorted[i] = i;
    seg_sort_docs_by_key(sorted, n_docs, bytes, offs);
    qr_buf_put_u32(out, n_docs);
    qr_buf_append(out, offs, ((size_t)n_docs + 1) * 4);
    qr_buf_append(out, sorted, (size_t)n_docs * 4);
    qr_buf_append(out, bytes, offs[n_docs]);
    qr_free(sorted);
    return qr_buf_ok(out) ? QR_OK : qr_error_set(err, QR_ENOMEM, "out of memory");
}

/* One entry to write: offsets into a scratch buffer holding its key, then
 * its term. */
typedef struct SurfOut {
    uint64_t pre; /* key_prefix of its key */
    uint32_t off, key_len, term_len;
    uint32_t df, tf;
} SurfOut;

static int cmp_surf_out(const void *x, const void *y, void *arg)
{
    const uint8_t *d = arg;
    const SurfOut *a = x, *c = y;
    if (a->pre != c->pre)
        return a->pre < c->pre ? -1 : 1;
    int k = seg_key_cmp(d + a->off, a->key_len, d + c->off, c->key_len);
    return k ? k
             : seg_key_cmp(d + a->off + a->key_len, a->term_len, d + c->off + c->key_len,
                           c->term_len);
}

static bool surf_out_push(QrBuf *sb, SurfOut **v, uint32_t *n, uint32_t *cap, uint8_t field,
                          const uint8_t *form, uint32_t form_len, const uint8_t *term,
                          uint32_t term_len, uint32_t df, uint32_t tf)
{
    if (*n == *cap) {
        uint32_t nc = *cap ? *cap * 2 : 1024;
        SurfOut *nv = qr_realloc(*v, nc * sizeof *nv);
        if (!nv)
            return false;
        *v = nv;
        *cap = nc;
    }
    uint8_t k[8] = {field};
    memcpy(k + 1, form, form_len < 7 ? form_len : 7);
    (*v)[(*n)++] = (SurfOut){key_prefix(k, (size_t)form_len + 1), (uint32_t)sb->len,
                             form_len + 1, term_len, df, tf};
    qr_buf_putc(sb, (char)field);
    qr_buf_append(sb, form, form_len);
    qr_buf_append(sb, term, term_len);
    return qr_buf_ok(sb);
}

/* SEC_SURFACES and SEC_SURFACE_TERMS: the forms of stemmed fields, and the
 * "_all" forms of every field (a stemmed field's forms, an unstemmed
 * field's terms), sorted; a form met twice keeps its first term and adds
 * up its counts.  Terms of adds that were rolled back are left out. */
static int surf_write(SegBuilder *b, SfileWriter *sw, QrError *err)
{
    QrBuf sb, dict, blob;
    qr_buf_init(&sb);
    qr_buf_init(&dict);
    qr_buf_init(&blob);
    SurfOut *v = NULL;
    uint32_t n = 0, cap = 0;
    TermDictWriter *tw = tdw_new();
    bool ok = tw != NULL;
    for (uint32_t i = 0; i < b->n_surfs && ok; i++) {
        const SurfEnt *e = &b->surfs[i];
        const TermEnt *t = &b->terms[e->term];
        if (t->df == 0)
            continue;
        const uint8_t *k = b->surf_keys.data + e->key_off;
        const uint8_t *tt = b->keys.data + t->key_off + 1;
        ok = surf_out_push(&sb, &v, &n, &cap, k[0], k + 1, e->key_len - 1, tt, t->key_len - 1,
                           e->df, e->tf);
        if (ok && b->all && t->all_id >= 0 && b->terms[t->all_id].df > 0)
            ok = surf_out_push(&sb, &v, &n, &cap, QR_ALL_FIELD, k + 1, e->key_len - 1, tt,
                               t->key_len - 1, e->df, e->tf);
    }
    for (uint32_t i = 0; i < b->n_terms && ok && b->all; i++) {
        const TermEnt *t = &b->terms[i];
        const uint8_t *k = b->keys.data + t->key_off;
        if (k[0] == QR_ALL_FIELD || b->stems[k[0]] || t->df == 0 || t->all_id < 0)
            continue;
        ok = surf_out_push(&sb, &v, &n, &cap, QR_ALL_FIELD, k + 1, t->key_len - 1, k + 1,
                           t->key_len - 1, t->df, (uint32_t)t->total_tf);
    }
    int rc = ok ? QR_OK : qr_error_set(err, QR_ENOMEM, "out of memory writing word forms");
    if (rc == QR_OK && n)
        qsort_r(v, n, sizeof *v, cmp_surf_out, sb.data);
    for (uint32_t i = 0; i < n && rc == QR_OK;) {
        const uint8_t *key = sb.data + v[i].off;
        uint64_t df = v[i].df, tf = v[i].tf;
        uint32_t j = i + 1;
        /* equal keys have equal prefixes and lengths: compare bytes only then */
        for (; j < n && v[j].pre == v[i].pre && v[j].key_len == v[i].key_len &&
               !memcmp(key, sb.data + v[j].off, v[i].key_len);
             j++) {
            df += v[j].df;
            tf += v[j].tf;
        }
        rc = seg_surf_add(tw, &blob, key, v[i].key_len, key + v[i].key_len, v[i].term_len, df,
                          tf, err);
        i = j;
    }
    if (rc == QR_OK)
        rc = tdw_finish(tw, &dict, err);
    if (rc == QR_OK && !qr_buf_ok(&blob))
        rc = qr_error_set(err, QR_ENOMEM, "out of memory writing word forms");
    if (rc == QR_OK && (rc = sfw_add_buf(sw, SEC_SURFACES, &dict, err)) == QR_OK)
        rc = sfw_add_buf(sw, SEC_SURFACE_TERMS, &blob, err);
    tdw_free(tw);
    qr_free(v);
    qr_buf_free(&sb);
    qr_buf_free(&dict);
    qr_buf_free(&blob);
    return rc;
}

/* One field term's in-memory postings being replayed (post_replay). */
typedef struct ReplaySrc {
    QrReader r;
    uint32_t left;       /* docs not yet taken */
    uint32_t doc, freq;  /* the current doc (valid while left > 0 or taken) */
    uint8_t field;
} ReplaySrc;

static void replay_next_doc(ReplaySrc *s)
{
    if (s->left == 0)
        return;
    s->doc += (uint32_t)qr_rd_varint(&s->r);
    s->freq = (uint32_t)qr_rd_varint(&s->r);
    s->left--;
}

/* Feed pw the postings of terms ids[0..n) (one term, or the field terms of
 * one "_all" term in field order), merged by doc: a doc's positions are
 * the terms' in id order, each shifted by where its field starts in the
 * doc's "_all" text (bases: SegBuilder.all_bases, or NULL for none); norms
 * is the field's (or "_all"'s) length per doc.  The "_all" postings are
 * thus exactly those one inversion of every field's words would give.
 * *df_out and *tf_out get the docs and occurrences fed.  *posbuf is
 * scratch, grown as needed.  QR_ENOMEM, QR_EINTERNAL on damaged memory, or
 * postw_add's error. */
static int post_replay(SegBuilder *b, const uint32_t *ids, uint32_t n, const uint32_t *bases,
                       const uint32_t *norms, PostingsWriter *pw, uint32_t **posbuf,
                       size_t *posbuf_cap, uint32_t *df_out, uint64_t *tf_out, QrError *err)
{
    ReplaySrc src[QR_MAX_FIELDS];
    uint32_t n_fields = (uint32_t)b->schema->n_fields;
    *df_out = 0;
    *tf_out = 0;
    for (uint32_t j = 0; j < n; j++) {
        const TermEnt *t = &b->terms[ids[j]];
        src[j] = (ReplaySrc){.left = t->df, .field = b->keys.data[t->key_off]};
        qr_rd_init(&src[j].r, t->post, t->post_len);
        replay_next_doc(&src[j]);
    }
    uint32_t live = n;
    while (live) {
        uint32_t doc = UINT32_MAX;
        uint64_t freq = 0;
        for (uint32_t j = 0; j < n; j++)
            if (src[j].freq && src[j].doc < doc)
                doc = src[j].doc;
        for (uint32_t j = 0; j < n; j++)
            if (src[j].freq && src[j].doc == doc)
                freq += src[j].freq;
        if (freq > UINT32_MAX)
            return qr_error_set(err, QR_ELIMIT, "a word occurs more than 4294967295 times in a document");
        if (freq > *posbuf_cap) {
            size_t nc = freq * 2;
            uint32_t *np = qr_realloc(*posbuf, nc * sizeof *np);
            if (!np)
                return qr_error_set(err, QR_ENOMEM, "out of memory writing a segment");
            *posbuf = np;
            *posbuf_cap = nc;
        }
        uint32_t k = 0;
        for (uint32_t j = 0; j < n; j++) {
            ReplaySrc *sj = &src[j];
            if (!sj->freq || sj->doc != doc)
                continue;
            uint32_t p = bases ? bases[(size_t)doc * n_fields + sj->field] : 0;
            for (uint32_t q = 0; q < sj->freq; q++) {
                p += (uint32_t)qr_rd_varint(&sj->r);
                (*posbuf)[k++] = p;
            }
            if (sj->left)
                replay_next_doc(sj);
            else {
                sj->freq = 0; /* exhausted */
                live--;
            }
        }
        for (uint32_t j = 0; j < n; j++)
            if (src[j].r.bad)
                return qr_error_set(err, QR_EINTERNAL, "in-memory postings damaged");
        int rc = postw_add(pw, doc, (uint32_t)freq, *posbuf, norms[doc], err);
        if (rc != QR_OK)
            return rc;
        ++*df_out;
        *tf_out += freq;
    }
    return QR_OK;
}

/* The field terms linked to each "_all" term (TermEnt.all_id) with docs,
 * as lists in field order: those of term a are ids[off[a] .. off[a + 1]).
 * false on OOM. */
static bool all_sources(const SegBuilder *b, uint32_t **off_out, uint32_t **ids_out)
{
    uint32_t *off = qr_calloc((size_t)b->n_terms + 1, sizeof *off);
    uint32_t *ids = qr_malloc(((size_t)b->n_terms + 1) * sizeof *ids);
    uint32_t *fill = qr_calloc((size_t)b->n_terms + 1, sizeof *fill); /* per list: placed */
    if (!off || !ids || !fill) {
        qr_free(off);
        qr_free(ids);
        qr_free(fill);
        return false;
    }
    for (uint32_t i = 0; i < b->n_terms; i++)
        if (b->terms[i].all_id >= 0 && b->terms[i].df)
            off[b->terms[i].all_id + 1]++;
    for (uint32_t a = 0; a < b->n_terms; a++)
        off[a + 1] += off[a];
    for (uint32_t i = 0; i < b->n_terms; i++) {
        const TermEnt *t = &b->terms[i];
        if (t->all_id < 0 || !t->df)
            continue;
        /* insert in field order among those placed so far (a list holds at
         * most one term per field) */
        uint32_t *list = ids + off[t->all_id];
        uint32_t k = fill[t->all_id]++;
        uint8_t f = b->keys.data[t->key_off];
        while (k > 0 && b->keys.data[b->terms[list[k - 1]].key_off] > f) {
            list[k] = list[k - 1];
            k--;
        }
        list[k] = i;
    }
    qr_free(fill);
    *off_out = off;
    *ids_out = ids;
    return true;
}

static int segb_finish_to(SegBuilder *b, const char *path, bool do_fsync, uint64_t id,
                          Segment **mem_out, roaring_bitmap_t **deleted_out, QrError *err)
{
    const QrSchema *s = b->schema;
    int rc = QR_OK;
    uint32_t *order = NULL;
    PostingsWriter *pw = NULL;
    TermDictWriter *tw = NULL;
    SfileWriter *sw = NULL;
    QrBuf docs_s, pos_s, dict, tmp;
    qr_buf_init(&docs_s);
    qr_buf_init(&pos_s);
    qr_buf_init(&dict);
    qr_buf_init(&tmp);
    uint32_t *posbuf = NULL;
    size_t posbuf_cap = 0;
    uint32_t *all_off = NULL, *all_ids = NULL; /* all_sources */

    order = qr_malloc(((size_t)b->n_terms + 1) * sizeof *order);
    pw = postw_new(true);
    tw = tdw_new();
    sw = sfw_new(SEG_FILE_KIND, SEG_FORMAT_VERSION);
    if (!order || !pw || !tw || !sw) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory writing a segment");
        goto done;
    }
    TermOrd *ord = qr_malloc(((size_t)b->n_terms + 1) * sizeof *ord);
    if (!ord) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory writing a segment");
        goto done;
    }
    for (uint32_t i = 0; i < b->n_terms; i++)
        ord[i] = (TermOrd){key_prefix(b->keys.data + b->terms[i].key_off, b->terms[i].key_len), i};
    qsort_r(ord, b->n_terms, sizeof *ord, cmp_term_ord, b);
    for (uint32_t i = 0; i < b->n_terms; i++)
        order[i] = ord[i].id;
    qr_free(ord);

    if (b->all && !all_sources(b, &all_off, &all_ids)) {
        rc = qr_error_set(err, QR_ENOMEM, "out of memory writing a segment");
        goto done;
    }
    /* field terms first (their key's first byte is the field), then the
     * "_all" terms (QR_ALL_FIELD, the largest), each merged from its field
     * terms, whose postings are kept until then */
    for (uint32_t oi = 0; oi < b->n_terms; oi++) {
        uint32_t tid = order[oi];
        TermEnt *t = &b->terms[tid];
        const uint8_t *key = b->keys.data + t->key_off;
        bool is_all = b->all && key[0] == QR_ALL_FIELD;
        if (!is_all && t->df == 0)
            continue; /* created by an add that was rolled back */
        const uint32_t *norms = is_all ? (const uint32_t *)b->all_norms.data
                                       : (const uint32_t *)b->norms[key[0]].data;
        const uint32_t *src = is_all ? all_ids + all_off[tid] : &tid;
        uint32_t n_src = is_all ? all_off[tid + 1] - all_off[tid] : 1;
        postw_begin_term(pw);
        uint32_t df = 0;
        uint64_t total_tf = 0;
        if ((rc = post_replay(b, src, n_src, is_all ? (const uint32_t *)b->all_bases.data : NULL,
                              norms, pw, &posbuf, &posbuf_cap, &df, &total_tf, err)) != QR_OK)
            goto done;
        if (is_all) {
            t->df = df; /* surf_write reads them */
            t->total_tf = total_tf;
            if (df == 0)
                continue; /* every add that used it was rolled back */
        }
        TermPostings tp;
        if ((rc = postw_end_term(pw, &docs_s, &pos_s, &tp, err)) != QR_OK)
            goto done;
        if ((rc = tdw_add(tw, key, t->key_len, &tp, err)) != QR_OK)
            goto done;
        /* release the in-memory postings as we go: peak memory stays flat
         * (a field term's once its "_all" term is written) */
        for (uint32_t j = 0; j < n_src; j++) {
            TermEnt *u = &b->terms[src[j]];
            if (!is_all && b->all && u->all_id >= 0)
                continue;
            qr_free(u->post);
            u->post = NULL;
            u->post_len = u->post_cap = 0;
        }
    }
    if ((rc = tdw_finish(tw, &dict, err)) != QR_OK)
        goto done;

    /* meta */
    seg_meta_write(&tmp, b->n_docs, s->n_fields, b->field_total, b->field_docs, b->min_lsn,
                   b->max_lsn, b->all, b->all_total, b->all_docs);
    if ((rc = sfw_add_buf(sw, SEC_META, &tmp, err)) != QR_OK)
        goto done;
    if ((rc = sfw_add_buf(sw, SEC_TERMS, &dict, err)) != QR_OK ||
        (rc = sfw_add_buf(sw, SEC_POSTINGS, &docs_s, err)) != QR_OK ||
        (rc = sfw_add_buf(sw, SEC_POSITIONS, &pos_s, err)) != QR_OK)
        goto done;
    if (b->want_surf && (rc = surf_write(b, sw, err)) != QR_OK)
        goto done;
    qr_buf_init(&tmp);
    if ((rc = dsw_finish(b->docs, &tmp, err)) != QR_OK ||
        (rc = sfw_add_buf(sw, SEC_DOCS, &tmp, err)) != QR_OK)
        goto done;
    qr_buf_init(&tmp);
    if ((rc = seg_write_pk_section(b->pk_bytes.data, (const uint32_t *)b->pk_offs.data, b->n_docs,
                                   &tmp, err)) != QR_OK ||
        (rc = sfw_add_buf(sw, SEC_PK, &tmp, err)) != QR_OK)
        goto done;
    if (b->all) {
        qr_buf_init(&tmp);
        qr_buf_append(&tmp, b->all_norms.data, b->all_norms.len);
        if (!qr_buf_ok(&tmp)) {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory writing norms");
            goto done;
        }
        if ((rc = sfw_add_buf(sw, SEC_NORMS + QR_ALL_FIELD, &tmp, err)) != QR_OK)
            goto done;
    }
    for (int f = 0; f < s->n_fields; f++) {
        if (b->an[f]) {
            qr_buf_init(&tmp);
            qr_buf_append(&tmp, b->norms[f].data, b->norms[f].len);
            if (!qr_buf_ok(&tmp)) {
                rc = qr_error_set(err, QR_ENOMEM, "out of memory writing norms");
                goto done;
            }
            if ((rc = sfw_add_buf(sw, SEC_NORMS + f, &tmp, err)) != QR_OK)
                goto done;
        }
        if (b->cols[f].w) {
            qr_buf_init(&tmp);
            if ((rc = colw_finish(b->cols[f].w, &tmp, err)) != QR_OK ||
                (rc = sfw_add_buf(sw, SEC_COLUMN + f, &tmp, err)) != QR_OK)
                goto done;
        }
    }
    rc = seg_write_out(sw, path, do_fsync, id, mem_out, err);
    sw = NULL;
    if (rc == QR_OK && deleted_out) {
        *deleted_out = roaring_bitmap_copy(b->deleted);
        if (!*deleted_out) {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory");
            if (mem_out) {
                seg_unref(*mem_out);
                *mem_out = NULL;
            }
        }
    }
done:
    qr_free(order);
    qr_free(posbuf);
    qr_free(all_off);
    qr_free(all_ids);
    postw_free(pw);
    tdw_free(tw);
    sfw_free(sw);
    qr_buf_free(&docs_s);
    qr_buf_free(&pos_s);
    qr_buf_free(&dict);
    qr_buf_free(&tmp);
    return rc;
}

int segb_finish(SegBuilder *b, const char *path, bool do_fsync, roaring_bitmap_t **deleted_out,
                QrError *err)
{
    return segb_finish_to(b, path, do_fsync, 0, NULL, deleted_out, err);
}

int segb_finish_mem(SegBuilder *b, const char *name, uint64_t id, Segment **out,
                    roaring_bitmap_t **deleted_out, QrError *err)
{
    *out = NULL;
    return segb_finish_to(b, name, false, id, out, deleted_out, err);
}
