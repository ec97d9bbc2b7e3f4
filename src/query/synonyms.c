/*
 * synonyms.c — a table's synonyms as a sorted array of folded keys, each
 * with the texts that stand for it (synonyms.h).
 *
 * Layer: query/.  Calls the analyzer (index/), cJSON and the base kit.
 */
#include "query/synonyms.h"

#include <cJSON.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "store/mem.h"

typedef struct SynEnt {
    char *key;            /* owns: folded words joined by ' ' */
    size_t key_len;
    const char **alts;    /* owns the array; the strings are owned by `texts` */
    int n_alts;
} SynEnt;

struct SynMap {
    _Atomic int refs;
    SynEnt *ents;         /* owns, sorted by key */
    int n;
    int max_words;
    char **texts;         /* owns: every alternative text (copies) */
    int n_texts;
};

typedef struct FoldCtx {
    QrBuf *out;
    int words;
} FoldCtx;

static int fold_sink(void *arg, const Token *tok)
{
    FoldCtx *f = arg;
    if (f->words++)
        qr_buf_putc(f->out, ' ');
    qr_buf_append(f->out, tok->text, tok->len);
    return 0;
}

int synmap_fold(Analyzer *fold, const char *text, size_t len, QrBuf *out, QrError *err)
{
    FoldCtx f = {out, 0};
    if (analyzer_run(fold, text, len, 0, ANALYZE_KEEP_STOPWORDS | ANALYZE_NO_STEM, fold_sink, &f,
                     err) != QR_OK)
        return -1;
    if (!qr_buf_ok(out)) {
        qr_error_set(err, QR_ENOMEM, "out of memory");
        return -1;
    }
    return f.words;
}

/* One (key text, alternative text) pair before sorting. */
typedef struct SynPair {
    char *key;
    size_t key_len;
    int words;
    const char *alt;      /* borrows SynMap.texts */
} SynPair;

typedef struct Build {
    Analyzer *fold;
    SynMap *m;
    SynPair *p;
    int n, cap;
    QrError *err;
} Build;

static const char *keep_text(Build *b, const char *t)
{
    char **nt = qr_realloc(b->m->texts, ((size_t)b->m->n_texts + 1) * sizeof *nt);
    if (!nt)
        return NULL;
    b->m->texts = nt;
    if (!(nt[b->m->n_texts] = qr_strdup(t)))
        return NULL;
    return nt[b->m->n_texts++];
}

static int add_pair(Build *b, const char *key, const char *alt)
{
    QrBuf k;
    qr_buf_init(&k);
    int words = synmap_fold(b->fold, key, strlen(key), &k, b->err);
    if (words < 0) {
        qr_buf_free(&k);
        return b->err->code ? (int)b->err->code : QR_ENOMEM;
    }
    if (words == 0) { /* punctuation only: nothing to look up */
        qr_buf_free(&k);
        return QR_OK;
    }
    if (b->n == b->cap) {
        int nc = b->cap ? b->cap * 2 : 32;
        SynPair *np = qr_realloc(b->p, (size_t)nc * sizeof *np);
        if (!np) {
            qr_buf_free(&k);
            return qr_error_set(b->err, QR_ENOMEM, "out of memory");
        }
        b->p = np;
        b->cap = nc;
    }
    const char *a = keep_text(b, alt);
    if (!a) {
        qr_buf_free(&k);
        return qr_error_set(b->err, QR_ENOMEM, "out of memory");
    }
    SynPair *p = &b->p[b->n++];
    p->key = (char *)qr_buf_steal(&k, &p->key_len);
    p->words = words;
    p->alt = a;
    if (!p->key) {
        b->n--;
        return qr_error_set(b->err, QR_ENOMEM, "out of memory");
    }
    return QR_OK;
}

static int cmp_key(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

static int cmp_pair(const void *x, const void *y)
{
    const SynPair *a = x, *b = y;
    int c = cmp_key(a->key, a->key_len, b->key, b->key_len);
    return c ? c : strcmp(a->alt, b->alt);
}

static int build_rules(Build *b, const cJSON *j)
{
    const cJSON *it;
    if (cJSON_IsArray(j)) { /* groups: every member for every other */
        cJSON_ArrayForEach(it, j)
        {
            const cJSON *x, *y;
            cJSON_ArrayForEach(x, it) cJSON_ArrayForEach(y, it)
            {
                if (x == y || !cJSON_IsString(x) || !cJSON_IsString(y))
                    continue;
                int rc = add_pair(b, x->valuestring, y->valuestring);
                if (rc)
                    return rc;
            }
        }
        return QR_OK;
    }
    cJSON_ArrayForEach(it, j)
    {
        if (cJSON_IsString(it)) {
            int rc = add_pair(b, it->string, it->valuestring);
            if (rc)
                return rc;
            continue;
        }
        const cJSON *y;
        cJSON_ArrayForEach(y, it) if (cJSON_IsString(y))
        {
            int rc = add_pair(b, it->string, y->valuestring);
            if (rc)
                return rc;
        }
    }
    return QR_OK;
}

int synmap_build(const char *json, size_t len, Analyzer *fold, SynMap **out, QrError *err)
{
    *out = NULL;
    SynMap *m = qr_calloc(1, sizeof *m);
    if (!m)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    atomic_init(&m->refs, 1);
    Build b = {.fold = fold, .m = m, .err = err};
    cJSON *j = len ? cJSON_ParseWithLength(json, len) : NULL;
    int rc = QR_OK;
    if (len && !(cJSON_IsArray(j) || cJSON_IsObject(j)))
        rc = qr_error_set(err, QR_EINVAL, "synonyms are not a list or an object");
    if (rc == QR_OK && j)
        rc = build_rules(&b, j);
    cJSON_Delete(j);
    if (rc == QR_OK && b.n) {
        qsort(b.p, (size_t)b.n, sizeof *b.p, cmp_pair);
        m->ents = qr_calloc((size_t)b.n, sizeof *m->ents);
        if (!m->ents)
            rc = qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    for (int i = 0; rc == QR_OK && i < b.n;) {
        int k = i + 1;
        while (k < b.n && !cmp_key(b.p[k].key, b.p[k].key_len, b.p[i].key, b.p[i].key_len))
            k++;
        SynEnt *e = &m->ents[m->n];
        e->alts = qr_calloc((size_t)(k - i), sizeof *e->alts);
        if (!e->alts) {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory");
            break;
        }
        m->n++;
        e->key = b.p[i].key;
        e->key_len = b.p[i].key_len;
        b.p[i].key = NULL;
        for (int x = i; x < k; x++)
            if (!e->n_alts || strcmp(e->alts[e->n_alts - 1], b.p[x].alt))
                e->alts[e->n_alts++] = b.p[x].alt;
        if (b.p[i].words > m->max_words)
            m->max_words = b.p[i].words;
        i = k;
    }
    for (int i = 0; i < b.n; i++)
        qr_free(b.p[i].key);
    qr_free(b.p);
    if (rc != QR_OK) {
        synmap_unref(m);
        return rc;
    }
    *out = m;
    return QR_OK;
}

SynMap *synmap_ref(SynMap *m)
{
    if (m)
        atomic_fetch_add(&m->refs, 1);
    return m;
}

void synmap_unref(SynMap *m)
{
    if (!m || atomic_fetch_sub(&m->refs, 1) != 1)
        return;
    for (int i = 0; i < m->n; i++) {
        qr_free(m->ents[i].key);
        qr_free(m->ents[i].alts);
    }
    qr_free(m->ents);
    for (int i = 0; i < m->n_texts; i++)
        qr_free(m->texts[i]);
    qr_free(m->texts);
    qr_free(m);
}

int synmap_count(const SynMap *m) { return m ? m->n : 0; }
int synmap_max_words(const SynMap *m) { return m ? m->max_words : 0; }

const char *const *synmap_get(const SynMap *m, const char *key, size_t len, int *n)
{
    *n = 0;
    int lo = 0, hi = m ? m->n : 0;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = cmp_key(m->ents[mid].key, m->ents[mid].key_len, key, len);
        if (c == 0) {
            *n = m->ents[mid].n_alts;
            return m->ents[mid].alts;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}
