/*
 * engine_util.c — shared helpers of the engine tests; see engine_util.h.
 */
#include "engine_util.h"
#include "query/quarry.h"

#include <cJSON.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "store/mem.h"
#include "store/util.h"

/* ---- randomness ---- */

uint64_t eu_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t eu_below(uint64_t *state, uint64_t n) { return n ? eu_rand(state) % n : 0; }

bool eu_chance(uint64_t *state, double p)
{
    return (double)(eu_rand(state) >> 11) * (1.0 / 9007199254740992.0) < p;
}

void eu_zipf_init(EuZipf *z, int n, double s)
{
    z->n = n;
    z->cdf = malloc(sizeof(double) * (size_t)n);
    double tot = 0;
    for (int i = 0; i < n; i++)
        tot += 1.0 / pow(i + 1, s);
    double acc = 0;
    for (int i = 0; i < n; i++) {
        acc += 1.0 / pow(i + 1, s) / tot;
        z->cdf[i] = acc;
    }
    z->cdf[n - 1] = 1.0;
}

int eu_zipf_draw(const EuZipf *z, uint64_t *state)
{
    double u = (double)(eu_rand(state) >> 11) * (1.0 / 9007199254740992.0);
    int lo = 0, hi = z->n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (z->cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void eu_zipf_free(EuZipf *z)
{
    free(z->cdf);
    z->cdf = NULL;
}

char **eu_words(int n, uint64_t seed)
{
    static const char cons[] = "bcdfghklmnprstvz";
    static const char vow[] = "aeiou";
    char **w = calloc((size_t)n, sizeof *w);
    uint64_t rng = seed;
    int have = 0;
    while (have < n) {
        char buf[16];
        int len = 0;
        int syl = 1 + (int)eu_below(&rng, 3);
        for (int s = 0; s < syl; s++) {
            buf[len++] = cons[eu_below(&rng, sizeof cons - 1)];
            buf[len++] = vow[eu_below(&rng, sizeof vow - 1)];
            if (eu_chance(&rng, 0.3))
                buf[len++] = cons[eu_below(&rng, sizeof cons - 1)];
        }
        buf[len] = 0;
        if (!strcmp(buf, "not"))
            continue;
        bool dup = false;
        for (int i = 0; i < have && !dup; i++)
            dup = !strcmp(w[i], buf);
        if (!dup)
            w[have++] = strdup(buf);
    }
    return w;
}

void eu_words_free(char **w, int n)
{
    for (int i = 0; i < n; i++)
        free(w[i]);
    free(w);
}

/* ---- random documents ---- */

void eu_random_schema(QrSchema *s, bool with_columns)
{
    schema_init(s);
    QrField f;
    schema_field_defaults(&f, "title", QR_FT_TEXT);
    f.weight = 2.0f;
    cr_assert_geq(schema_add_field(s, &f, NULL), 0);
    schema_field_defaults(&f, "body", QR_FT_TEXT);
    snprintf(f.language, sizeof f.language, "none");
    cr_assert_geq(schema_add_field(s, &f, NULL), 0);
    if (!with_columns)
        return;
    static const struct {
        const char *name;
        QrFieldType t;
    } cols[] = {{"n", QR_FT_INT},           {"price", QR_FT_FLOAT}, {"flag", QR_FT_BOOL},
                {"ts", QR_FT_TIMESTAMP},    {"cat", QR_FT_KEYWORD}};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        schema_field_defaults(&f, cols[i].name, cols[i].t);
        cr_assert_geq(schema_add_field(s, &f, NULL), 0);
    }
    schema_field_defaults(&f, "label", QR_FT_TEXT);
    snprintf(f.language, sizeof f.language, "none");
    f.column = true;
    cr_assert_geq(schema_add_field(s, &f, NULL), 0);
}

char *eu_random_text(uint64_t *rng, char *const *words, const EuZipf *z, int n)
{
    QrBuf b;
    qr_buf_init(&b);
    for (int i = 0; i < n; i++) {
        if (i)
            qr_buf_putc(&b, ' ');
        const char *w = words[eu_zipf_draw(z, rng)];
        uint64_t r = eu_below(rng, 1000);
        if (r < 30) { /* Capitalized */
            qr_buf_putc(&b, (uint8_t)(w[0] - 'a' + 'A'));
            qr_buf_append(&b, w + 1, strlen(w + 1));
        } else if (r < 50) { /* hyphenated pair: two tokens */
            qr_buf_printf(&b, "%s-%s", w, words[eu_zipf_draw(z, rng)]);
        } else if (r < 70) {
            qr_buf_printf(&b, "%s%s", w, r & 1 ? "," : ".");
        } else if (r < 80 && strchr(w, 'e')) { /* accent that folds away */
            const char *e = strchr(w, 'e');
            qr_buf_append(&b, w, (size_t)(e - w));
            qr_buf_append(&b, "\xc3\xa9", 2);
            qr_buf_append(&b, e + 1, strlen(e + 1));
        } else if (r < 90) {
            qr_buf_printf(&b, "%u", (unsigned)eu_below(rng, 100));
        } else {
            qr_buf_append(&b, w, strlen(w));
        }
    }
    qr_buf_putc(&b, 0);
    char *out = strdup((char *)b.data);
    qr_buf_free(&b);
    return out;
}

char *eu_random_doc(uint64_t *rng, char *const *words, const EuZipf *z, const char *id_json,
                    const char *dup_of)
{
    cJSON *src = dup_of ? cJSON_Parse(dup_of) : NULL;
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_printf(&b, "{\"id\":%s", id_json);
    /* title */
    if (src) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(src, "title");
        if (t) {
            char *p = cJSON_PrintUnformatted(t);
            qr_buf_printf(&b, ",\"title\":%s", p);
            free(p);
        }
    } else if (eu_chance(rng, 0.9)) {
        char *t = eu_random_text(rng, words, z, 2 + (int)eu_below(rng, 7));
        qr_buf_printf(&b, ",\"title\":\"%s\"", t);
        free(t);
    } else if (eu_chance(rng, 0.5)) {
        qr_buf_printf(&b, ",\"title\":null");
    }
    /* body */
    if (src) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(src, "body");
        if (t) {
            char *p = cJSON_PrintUnformatted(t);
            qr_buf_printf(&b, ",\"body\":%s", p);
            free(p);
        }
    } else if (eu_chance(rng, 0.1)) {
        qr_buf_printf(&b, ",\"body\":[");
        int nv = 1 + (int)eu_below(rng, 3);
        for (int i = 0; i < nv; i++) {
            if (eu_chance(rng, 0.15)) {
                qr_buf_printf(&b, "%snull", i ? "," : "");
                continue;
            }
            char *t = eu_random_text(rng, words, z, 1 + (int)eu_below(rng, 12));
            qr_buf_printf(&b, "%s\"%s\"", i ? "," : "", t);
            free(t);
        }
        qr_buf_putc(&b, ']');
    } else if (eu_chance(rng, 0.95)) {
        char *t = eu_random_text(rng, words, z, 5 + (int)eu_below(rng, 50));
        qr_buf_printf(&b, ",\"body\":\"%s\"", t);
        free(t);
    }
    cJSON_Delete(src);
    if (eu_chance(rng, 0.9))
        qr_buf_printf(&b, ",\"n\":%lld", (long long)eu_below(rng, 2000000) - 1000000);
    if (eu_chance(rng, 0.8))
        qr_buf_printf(&b, ",\"price\":%.3f", (double)eu_below(rng, 100000) / 7.0);
    if (eu_chance(rng, 0.8))
        qr_buf_printf(&b, ",\"flag\":%s", eu_chance(rng, 0.5) ? "true" : "false");
    if (eu_chance(rng, 0.8))
        qr_buf_printf(&b, ",\"ts\":\"2024-%02d-%02dT%02d:%02d:00Z\"",
                      1 + (int)eu_below(rng, 12), 1 + (int)eu_below(rng, 28),
                      (int)eu_below(rng, 24), (int)eu_below(rng, 60));
    if (eu_chance(rng, 0.85))
        qr_buf_printf(&b, ",\"cat\":\"%s\"", words[eu_below(rng, 12)]);
    else if (eu_chance(rng, 0.3))
        qr_buf_printf(&b, ",\"cat\":null");
    if (eu_chance(rng, 0.7))
        qr_buf_printf(&b, ",\"label\":\"%s %s\"", words[eu_below(rng, 30)],
                      words[eu_below(rng, 30)]);
    qr_buf_putc(&b, '}');
    qr_buf_putc(&b, 0);
    char *out = strdup((char *)b.data);
    qr_buf_free(&b);
    return out;
}

/* ---- a virtual clock ---- */

static _Atomic uint64_t vclock_step, vclock_reads;

static uint64_t vclock_now(void)
{
    uint64_t n = atomic_fetch_add(&vclock_reads, 1);
    return 1000000000ull + n * atomic_load(&vclock_step);
}

void eu_clock_virtual(uint64_t step_ns)
{
    atomic_store(&vclock_step, step_ns);
    atomic_store(&vclock_reads, 0);
    qr_clock_set_source(vclock_now);
}

void eu_clock_real(void) { qr_clock_set_source(NULL); }

uint64_t eu_clock_reads(void) { return atomic_load(&vclock_reads); }

/* ---- files ---- */

char *eu_tmpdir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    char *p = malloc(1024);
    snprintf(p, 1024, "%s/qr-%s-XXXXXX", base, tag);
    cr_assert_not_null(mkdtemp(p), "mkdtemp %s", p);
    return p;
}

void eu_rmtree(const char *path) { qr_remove_tree(path, NULL); }

#define EU_TRACKED_MAX 16
static char *tracked[EU_TRACKED_MAX];
static int n_tracked;

char *eu_tmpdir_tracked(const char *tag)
{
    cr_assert_lt(n_tracked, EU_TRACKED_MAX, "more than %d tracked temporary directories",
                 EU_TRACKED_MAX);
    return tracked[n_tracked++] = eu_tmpdir(tag);
}

void eu_tmpdirs_cleanup(void)
{
    for (int i = 0; i < n_tracked; i++) {
        eu_rmtree(tracked[i]);
        free(tracked[i]);
    }
    n_tracked = 0;
}

void eu_quiet(void) { qr_log_set_level(QR_LOG_ERROR); }

void eu_copy_tree(const char *src, const char *dst)
{
    mkdir(dst, 0755);
    DIR *d = opendir(src);
    cr_assert_not_null(d, "opendir %s", src);
    struct dirent *e;
    char sp[4096], dp[4096];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(sp, sizeof sp, "%s/%s", src, e->d_name);
        snprintf(dp, sizeof dp, "%s/%s", dst, e->d_name);
        struct stat st;
        if (stat(sp, &st) != 0)
            continue; /* removed meanwhile */
        if (S_ISDIR(st.st_mode)) {
            eu_copy_tree(sp, dp);
            continue;
        }
        int in = open(sp, O_RDONLY);
        if (in < 0)
            continue;
        int out = open(dp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        cr_assert(out >= 0, "create %s", dp);
        char buf[65536];
        ssize_t k;
        while ((k = read(in, buf, sizeof buf)) > 0)
            cr_assert_eq(write(out, buf, (size_t)k), k);
        close(in);
        close(out);
    }
    closedir(d);
}

char *eu_newest_wal(const char *table_dir)
{
    char wd[4096];
    snprintf(wd, sizeof wd, "%s/wal", table_dir);
    DIR *d = opendir(wd);
    if (!d)
        return NULL;
    struct dirent *e;
    char best[256] = "";
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "wal-", 4) || n < 8 || strcmp(e->d_name + n - 4, ".log"))
            continue;
        if (strcmp(e->d_name, best) > 0)
            snprintf(best, sizeof best, "%s", e->d_name);
    }
    closedir(d);
    if (!*best)
        return NULL;
    char *p = malloc(4400);
    snprintf(p, 4400, "%s/%s", wd, best);
    return p;
}

off_t eu_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

int eu_read_jsonl(const char *path, int max_docs, char ***lines_out)
{
    *lines_out = NULL;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return 0;
    int n = 0, cap = 0;
    char **v = NULL;
    size_t bcap = 1 << 16;
    char *buf = malloc(bcap);
    while (n < max_docs) {
        size_t len = 0;
        bool got = false;
        for (;;) {
            if (!gzgets(f, buf + len, (int)(bcap - len)))
                break;
            got = true;
            len += strlen(buf + len);
            if (len > 0 && buf[len - 1] == '\n')
                break;
            bcap *= 2;
            buf = realloc(buf, bcap);
        }
        if (!got)
            break;
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
            buf[--len] = 0;
        if (len == 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            v = realloc(v, sizeof *v * (size_t)cap);
        }
        v[n++] = strdup(buf);
    }
    free(buf);
    gzclose(f);
    *lines_out = v;
    return n;
}

void eu_lines_free(char **lines, int n)
{
    for (int i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
}

/* ---- store model ---- */

static uint64_t eu_hash(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

void eu_store_init(EuStore *s) { memset(s, 0, sizeof *s); }

void eu_store_free(EuStore *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->ents[i].json);
    free(s->ents);
    free(s->slots);
    memset(s, 0, sizeof *s);
}

static int *store_slot(const EuStore *s, const uint8_t *key, size_t len)
{
    if (!s->n_slots)
        return NULL;
    uint64_t h = eu_hash(key, len);
    int j = (int)(h & (uint64_t)(s->n_slots - 1));
    while (s->slots[j]) {
        const EuStoreEnt *e = &s->ents[s->slots[j] - 1];
        if (e->key_len == len && !memcmp(e->key, key, len))
            return &s->slots[j];
        j = (j + 1) & (s->n_slots - 1);
    }
    return &s->slots[j];
}

static void store_grow(EuStore *s)
{
    int ns = s->n_slots ? s->n_slots * 2 : 1024;
    free(s->slots);
    s->slots = calloc((size_t)ns, sizeof *s->slots);
    s->n_slots = ns;
    for (int i = 0; i < s->n; i++) {
        int *sl = store_slot(s, s->ents[i].key, s->ents[i].key_len);
        *sl = i + 1;
    }
}

void eu_store_put(EuStore *s, const uint8_t *key, size_t key_len, const char *json)
{
    if ((s->n + 1) * 2 > s->n_slots)
        store_grow(s);
    int *sl = store_slot(s, key, key_len);
    if (*sl) {
        EuStoreEnt *e = &s->ents[*sl - 1];
        free(e->json);
        e->json = json ? strdup(json) : NULL;
        return;
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->ents = realloc(s->ents, sizeof *s->ents * (size_t)s->cap);
    }
    EuStoreEnt *e = &s->ents[s->n];
    memcpy(e->key, key, key_len);
    e->key_len = key_len;
    e->json = json ? strdup(json) : NULL;
    *sl = ++s->n;
}

void eu_store_del(EuStore *s, const uint8_t *key, size_t key_len)
{
    int *sl = store_slot(s, key, key_len);
    if (sl && *sl) {
        free(s->ents[*sl - 1].json);
        s->ents[*sl - 1].json = NULL;
    }
}

const char *eu_store_get(const EuStore *s, const uint8_t *key, size_t key_len)
{
    int *sl = store_slot(s, key, key_len);
    return sl && *sl ? s->ents[*sl - 1].json : NULL;
}

int eu_store_live(const EuStore *s)
{
    int n = 0;
    for (int i = 0; i < s->n; i++)
        n += s->ents[i].json != NULL;
    return n;
}

void eu_store_copy(EuStore *dst, const EuStore *src)
{
    eu_store_init(dst);
    for (int i = 0; i < src->n; i++)
        eu_store_put(dst, src->ents[i].key, src->ents[i].key_len, src->ents[i].json);
}

size_t eu_doc_key(const char *json, uint8_t *key)
{
    cJSON *r = cJSON_Parse(json);
    cr_assert_not_null(r, "bad test JSON %s", json);
    QrError e;
    qr_error_clear(&e);
    size_t n = pk_encode(cJSON_GetObjectItemCaseSensitive(r, "id"), key, &e);
    cJSON_Delete(r);
    cr_assert(n > 0, "bad test key in %s: %s", json, e.message);
    return n;
}

bool eu_snapshot_equals(const Snapshot *snap, const EuStore *model, char *why, size_t why_len)
{
    EuStore seen;
    eu_store_init(&seen);
    uint64_t live = 0;
    bool ok = true;
    QrBuf kb;
    qr_buf_init(&kb);
    for (int i = 0; i < snap->n_segs && ok; i++) {
        const Segment *seg = snap->segs[i];
        DocStoreCursor *c = ds_cursor_new(seg_docs(seg));
        cr_assert_not_null(c);
        for (uint32_t d = 0; d < seg_n_docs(seg) && ok; d++) {
            if (snapshot_deleted(snap, i, d))
                continue;
            const uint8_t *key;
            size_t kl;
            const uint8_t *doc;
            size_t dl;
            QrError e;
            qr_error_clear(&e);
            if (!seg_pk(seg, d, &key, &kl) || ds_get(c, d, &doc, &dl, &e) != QR_OK) {
                snprintf(why, why_len, "seg %d doc %u unreadable: %s", i, d, e.message);
                ok = false;
                break;
            }
            kb.len = 0;
            pk_to_json(key, kl, &kb);
            char *j = strndup((const char *)doc, dl);
            const char *want = eu_store_get(model, key, kl);
            if (eu_store_get(&seen, key, kl)) {
                snprintf(why, why_len, "key %.*s is live twice", (int)kb.len, (char *)kb.data);
                ok = false;
            } else if (!want) {
                snprintf(why, why_len, "key %.*s is live but should not be (doc %.200s)",
                         (int)kb.len, (char *)kb.data, j);
                ok = false;
            } else if (strcmp(j, want)) {
                snprintf(why, why_len, "key %.*s has document %.200s, want %.200s", (int)kb.len,
                         (char *)kb.data, j, want);
                ok = false;
            }
            eu_store_put(&seen, key, kl, j);
            free(j);
            live++;
        }
        ds_cursor_free(c);
    }
    for (int i = 0; i < model->n && ok; i++) {
        const EuStoreEnt *m = &model->ents[i];
        if (!m->json || eu_store_get(&seen, m->key, m->key_len))
            continue;
        kb.len = 0;
        pk_to_json(m->key, m->key_len, &kb);
        snprintf(why, why_len, "key %.*s is missing (want %.200s)", (int)kb.len,
                 (char *)kb.data, m->json);
        ok = false;
    }
    if (ok && live != snap->n_live) {
        snprintf(why, why_len, "snapshot n_live %lu, counted %lu", (unsigned long)snap->n_live,
                 (unsigned long)live);
        ok = false;
    }
    qr_buf_free(&kb);
    eu_store_free(&seen);
    return ok;
}

void eu_assert_snapshot_is(const Snapshot *snap, const EuStore *model, const char *what)
{
    char why[1024];
    cr_assert(eu_snapshot_equals(snap, model, why, sizeof why), "%s: %s", what, why);
}

/* ---- brute-force index ---- */

void eu_index_init(EuIndex *ix, const QrSchema *schema)
{
    memset(ix, 0, sizeof *ix);
    ix->schema = schema;
    for (int f = 0; f < schema->n_fields; f++) {
        const QrField *fd = &schema->fields[f];
        if (fd->type != QR_FT_TEXT || !fd->indexed)
            continue;
        AnalyzerOpts o = {
            .language = fd->language, .stopwords = fd->stopwords, .accent_fold = fd->accent_fold};
        o.stop_list = schema_stop_list(schema, f, &o.stop_list_len);
        QrError e;
        qr_error_clear(&e);
        cr_assert_eq(analyzer_new(&o, &ix->an[f], &e), QR_OK, "analyzer: %s", e.message);
        ix->stems[f] = analyzer_stems(ix->an[f]);
        ix->any_stems |= ix->stems[f];
    }
    ix->n_slots = 1 << 12;
    ix->slots = calloc(ix->n_slots, sizeof *ix->slots);
    ix->n_form_slots = 1 << 12;
    ix->form_slots = calloc(ix->n_form_slots, sizeof *ix->form_slots);
}

bool eu_field_has_forms(const EuIndex *ix, int field)
{
    return field == QR_ALL_FIELD ? ix->any_stems : field < QR_MAX_FIELDS && ix->stems[field];
}

static uint32_t *form_slot(const EuIndex *ix, int seg, const uint8_t *key, size_t len)
{
    uint64_t h = eu_hash(key, len) ^ (uint64_t)seg * 0x9E3779B97F4A7C15ull;
    uint32_t j = (uint32_t)h & (ix->n_form_slots - 1);
    while (ix->form_slots[j]) {
        const EuForm *f = &ix->forms[ix->form_slots[j] - 1];
        if (f->seg == seg && f->key_len == len && !memcmp(f->key, key, len))
            return &ix->form_slots[j];
        j = (j + 1) & (ix->n_form_slots - 1);
    }
    return &ix->form_slots[j];
}

static int key_cmp_bytes(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

/* Note form key -> term in segment seg; a form met with another term keeps
 * the least (segbuild.c and the merge do the same). */
static void form_note(EuIndex *ix, int seg, const uint8_t *key, size_t len, uint32_t term)
{
    uint32_t *sl = form_slot(ix, seg, key, len);
    if (*sl) {
        EuForm *f = &ix->forms[*sl - 1];
        const EuTerm *a = &ix->terms[f->term], *b = &ix->terms[term];
        if (key_cmp_bytes(b->key, b->key_len, a->key, a->key_len) < 0)
            f->term = term;
        return;
    }
    if (ix->n_forms == ix->cap_forms) {
        ix->cap_forms = ix->cap_forms ? ix->cap_forms * 2 : 1024;
        ix->forms = realloc(ix->forms, sizeof *ix->forms * ix->cap_forms);
    }
    EuForm *f = &ix->forms[ix->n_forms];
    f->key = malloc(len);
    memcpy(f->key, key, len);
    f->key_len = (uint32_t)len;
    f->seg = seg;
    f->term = term;
    *sl = ++ix->n_forms;
    if (ix->n_forms * 2 > ix->n_form_slots) {
        uint32_t ns = ix->n_form_slots * 2;
        free(ix->form_slots);
        ix->form_slots = calloc(ns, sizeof *ix->form_slots);
        ix->n_form_slots = ns;
        for (uint32_t i = 0; i < ix->n_forms; i++)
            *form_slot(ix, ix->forms[i].seg, ix->forms[i].key, ix->forms[i].key_len) = i + 1;
    }
}

void eu_index_free(EuIndex *ix)
{
    for (int f = 0; f < QR_MAX_FIELDS; f++)
        analyzer_free(ix->an[f]);
    for (uint32_t i = 0; i < ix->n_docs; i++) {
        free(ix->docs[i].json);
        free(ix->docs[i].norms);
    }
    free(ix->docs);
    for (uint32_t i = 0; i < ix->n_terms; i++) {
        free(ix->terms[i].key);
        free(ix->terms[i].occ);
    }
    free(ix->terms);
    free(ix->slots);
    free(ix->pos);
    if (ix->seg_terms)
        for (int s = 0; s < ix->n_segs; s++)
            free(ix->seg_terms[s]);
    free(ix->seg_terms);
    free(ix->seg_n_terms);
    free(ix->sorted);
    for (uint32_t i = 0; i < ix->n_forms; i++)
        free(ix->forms[i].key);
    free(ix->forms);
    free(ix->form_slots);
    if (ix->seg_forms)
        for (int s = 0; s < ix->n_segs; s++)
            free(ix->seg_forms[s]);
    free(ix->seg_forms);
    free(ix->seg_n_forms);
    memset(ix, 0, sizeof *ix);
}

static uint32_t *term_slot(const EuIndex *ix, const uint8_t *key, size_t len)
{
    uint64_t h = eu_hash(key, len);
    uint32_t j = (uint32_t)h & (ix->n_slots - 1);
    while (ix->slots[j]) {
        const EuTerm *t = &ix->terms[ix->slots[j] - 1];
        if (t->key_len == len && !memcmp(t->key, key, len))
            return &ix->slots[j];
        j = (j + 1) & (ix->n_slots - 1);
    }
    return &ix->slots[j];
}

static uint32_t term_get_or_add(EuIndex *ix, const uint8_t *key, size_t len)
{
    uint32_t *sl = term_slot(ix, key, len);
    if (*sl)
        return *sl - 1;
    if (ix->n_terms == ix->cap_terms) {
        ix->cap_terms = ix->cap_terms ? ix->cap_terms * 2 : 1024;
        ix->terms = realloc(ix->terms, sizeof *ix->terms * ix->cap_terms);
    }
    EuTerm *t = &ix->terms[ix->n_terms];
    memset(t, 0, sizeof *t);
    t->key = malloc(len);
    memcpy(t->key, key, len);
    t->key_len = (uint32_t)len;
    *sl = ++ix->n_terms;
    if (ix->n_terms * 2 > ix->n_slots) {
        uint32_t ns = ix->n_slots * 2;
        free(ix->slots);
        ix->slots = calloc(ns, sizeof *ix->slots);
        ix->n_slots = ns;
        for (uint32_t i = 0; i < ix->n_terms; i++)
            *term_slot(ix, ix->terms[i].key, ix->terms[i].key_len) = i + 1;
    }
    return ix->n_terms - 1;
}

const EuTerm *eu_index_term(const EuIndex *ix, int field, const char *text, size_t len)
{
    uint8_t kb[1 + 1024];
    if (len > 1024)
        len = 1024;
    kb[0] = (uint8_t)field;
    memcpy(kb + 1, text, len);
    uint32_t *sl = term_slot(ix, kb, len + 1);
    return *sl ? &ix->terms[*sl - 1] : NULL;
}

const EuOcc *eu_term_occ(const EuTerm *t, uint32_t doc)
{
    uint32_t lo = 0, hi = t->n_occ;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (t->occ[mid].doc < doc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->n_occ && t->occ[lo].doc == doc ? &t->occ[lo] : NULL;
}

static int cmp_u64_fwd(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct TokAcc {
    EuIndex *ix;
    int field;
    int seg;
    uint64_t *v; /* term << 32 | pos */
    size_t n, cap;
    uint32_t words;   /* tokens that are words (CJK grams are not): the field length */
    bool all;         /* also gather "_all" occurrences */
    uint32_t all_base;
    uint64_t *va;     /* "_all": term << 32 | pos */
    size_t na, cap_a;
} TokAcc;

static void acc_push(uint64_t **v, size_t *n, size_t *cap, uint64_t x)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        *v = realloc(*v, sizeof **v * *cap);
    }
    (*v)[(*n)++] = x;
}

static int tok_acc_sink(void *arg, const Token *tok)
{
    TokAcc *a = arg;
    uint8_t kb[1 + 1024];
    uint32_t len = tok->len > 1024 ? 1024 : tok->len; /* segbuild truncates too */
    kb[0] = (uint8_t)a->field;
    memcpy(kb + 1, tok->text, len);
    uint32_t id = term_get_or_add(a->ix, kb, len + 1);
    acc_push(&a->v, &a->n, &a->cap, ((uint64_t)id << 32) | tok->pos);
    a->words += !tok->is_gram;
    uint32_t aid = 0;
    if (a->all) {
        kb[0] = QR_ALL_FIELD;
        aid = term_get_or_add(a->ix, kb, len + 1);
        acc_push(&a->va, &a->na, &a->cap_a, ((uint64_t)aid << 32) | (a->all_base + tok->pos));
    }
    if (!tok->is_gram && a->ix->any_stems) {
        /* word forms: the stemmed field's, and "_all"'s from every field */
        uint8_t fb[1 + 1024];
        const char *form = a->ix->stems[a->field] ? tok->surface : tok->text;
        uint32_t fl = a->ix->stems[a->field] ? tok->surface_len : tok->len;
        if (fl > 1024)
            fl = 1024;
        memcpy(fb + 1, form, fl);
        if (a->ix->stems[a->field]) {
            fb[0] = (uint8_t)a->field;
            form_note(a->ix, a->seg, fb, fl + 1, id);
        }
        if (a->all) {
            fb[0] = QR_ALL_FIELD;
            form_note(a->ix, a->seg, fb, fl + 1, aid);
        }
    }
    return 0;
}

/* Append one doc's occurrences (sorted by term, then position). */
static void acc_invert(EuIndex *ix, uint32_t di, uint64_t *v, size_t n)
{
    if (n == 0)
        return;
    qsort(v, n, sizeof *v, cmp_u64_fwd);
    size_t i = 0;
    while (i < n) {
        uint32_t id = (uint32_t)(v[i] >> 32);
        size_t j = i;
        while (j < n && (uint32_t)(v[j] >> 32) == id)
            j++;
        EuTerm *t = &ix->terms[id];
        if (t->n_occ == t->cap_occ) {
            t->cap_occ = t->cap_occ ? t->cap_occ * 2 : 4;
            t->occ = realloc(t->occ, sizeof *t->occ * t->cap_occ);
        }
        if (ix->n_pos + (j - i) > ix->cap_pos) {
            ix->cap_pos = (ix->cap_pos + (j - i)) * 2;
            ix->pos = realloc(ix->pos, sizeof *ix->pos * ix->cap_pos);
        }
        t->occ[t->n_occ++] = (EuOcc){.doc = di, .tf = (uint32_t)(j - i),
                                     .pos_off = (uint32_t)ix->n_pos};
        for (size_t k = i; k < j; k++)
            ix->pos[ix->n_pos++] = (uint32_t)v[k];
        t->total_tf += j - i;
        i = j;
    }
}

uint32_t eu_doc_norm(const EuIndex *ix, uint32_t d, int field)
{
    return field == QR_ALL_FIELD ? ix->docs[d].all_norm : ix->docs[d].norms[field];
}

Analyzer *eu_field_analyzer(const EuIndex *ix, int field)
{
    if (field != QR_ALL_FIELD)
        return field < QR_MAX_FIELDS ? ix->an[field] : NULL;
    for (int f = 0; f < ix->schema->n_fields; f++)
        if (ix->an[f])
            return ix->an[f];
    return NULL;
}


void eu_index_add(EuIndex *ix, const char *json, size_t len, bool live, int seg, uint32_t local,
                  int64_t gdoc)
{
    const QrSchema *sc = ix->schema;
    cJSON *root = cJSON_ParseWithLength(json, len);
    cr_assert_not_null(root, "stored document is not JSON: %.*s", (int)len, json);
    if (ix->n_docs == ix->cap_docs) {
        ix->cap_docs = ix->cap_docs ? ix->cap_docs * 2 : 1024;
        ix->docs = realloc(ix->docs, sizeof *ix->docs * ix->cap_docs);
    }
    uint32_t di = ix->n_docs++;
    EuDoc *d = &ix->docs[di];
    memset(d, 0, sizeof *d);
    d->json = strndup(json, len);
    d->json_len = len;
    d->live = live;
    d->seg = seg;
    d->local = local;
    d->gdoc = gdoc;
    d->norms = calloc((size_t)sc->n_fields + 1, sizeof *d->norms);
    QrError e;
    qr_error_clear(&e);
    d->key_len = pk_encode(cJSON_GetObjectItemCaseSensitive(root, sc->primary_key), d->key, &e);
    TokAcc acc = {.ix = ix, .all = sc->all_field, .seg = seg};
    for (int f = 0; f < sc->n_fields; f++) {
        if (!ix->an[f])
            continue;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, sc->fields[f].name);
        if (!v || !(cJSON_IsString(v) || cJSON_IsArray(v)))
            continue;
        acc.field = f;
        acc.n = 0;
        acc.words = 0;
        uint32_t pos = 0;
        const cJSON *el = cJSON_IsArray(v) ? v->child : v;
        for (; el; el = cJSON_IsArray(v) ? el->next : NULL) {
            if (!cJSON_IsString(el))
                continue;
            uint32_t n_pos = 0;
            int rc = analyzer_run_n(ix->an[f], el->valuestring, strlen(el->valuestring), pos,
                                    ANALYZE_CJK_GRAMS, tok_acc_sink, &acc, &n_pos, &e);
            cr_assert_eq(rc, QR_OK, "analyzer: %s", e.message);
            pos += n_pos + 100;
        }
        acc.all_base += pos + 100; /* segbuild: fields 100 positions apart in "_all" */
        d = &ix->docs[di];
        d->norms[f] = acc.words;
        d->all_norm += acc.words;
        acc_invert(ix, di, acc.v, acc.n);
    }
    if (acc.all)
        acc_invert(ix, di, acc.va, acc.na);
    free(acc.va);
    free(acc.v);
    cJSON_Delete(root);
}

static const EuIndex *sort_ix;
static int cmp_term_idx(const void *a, const void *b)
{
    const EuTerm *x = &sort_ix->terms[*(const uint32_t *)a];
    const EuTerm *y = &sort_ix->terms[*(const uint32_t *)b];
    uint32_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    if (c)
        return c;
    return (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

static int cmp_form_idx(const void *a, const void *b)
{
    const EuForm *x = &sort_ix->forms[*(const uint32_t *)a];
    const EuForm *y = &sort_ix->forms[*(const uint32_t *)b];
    return key_cmp_bytes(x->key, x->key_len, y->key, y->key_len);
}

void eu_index_finish(EuIndex *ix)
{
    const QrSchema *sc = ix->schema;
    memset(ix->field_total, 0, sizeof ix->field_total);
    memset(ix->field_docs, 0, sizeof ix->field_docs);
    int max_seg = -1;
    for (uint32_t i = 0; i < ix->n_docs; i++) {
        for (int f = 0; f < sc->n_fields; f++) {
            ix->field_total[f] += ix->docs[i].norms[f];
            ix->field_docs[f] += ix->docs[i].norms[f] > 0;
        }
        if (sc->all_field) {
            ix->field_total[QR_ALL_FIELD] += ix->docs[i].all_norm;
            ix->field_docs[QR_ALL_FIELD] += ix->docs[i].all_norm > 0;
        }
        if (ix->docs[i].seg > max_seg)
            max_seg = ix->docs[i].seg;
    }
    ix->sorted = malloc(sizeof *ix->sorted * (ix->n_terms + 1));
    for (uint32_t i = 0; i < ix->n_terms; i++)
        ix->sorted[i] = i;
    sort_ix = ix;
    qsort(ix->sorted, ix->n_terms, sizeof *ix->sorted, cmp_term_idx);
    ix->n_segs = max_seg + 1;
    ix->seg_terms = calloc((size_t)ix->n_segs + 1, sizeof *ix->seg_terms);
    ix->seg_n_terms = calloc((size_t)ix->n_segs + 1, sizeof *ix->seg_n_terms);
    for (int s = 0; s < ix->n_segs; s++)
        ix->seg_terms[s] = malloc(sizeof(uint32_t) * (ix->n_terms + 1));
    int *stamp = malloc(sizeof(int) * ((size_t)ix->n_segs + 1));
    for (int s = 0; s < ix->n_segs; s++)
        stamp[s] = -1;
    for (uint32_t k = 0; k < ix->n_terms; k++) {
        uint32_t ti = ix->sorted[k];
        const EuTerm *t = &ix->terms[ti];
        for (uint32_t o = 0; o < t->n_occ; o++) {
            int s = ix->docs[t->occ[o].doc].seg;
            if (stamp[s] != (int)k) {
                stamp[s] = (int)k;
                ix->seg_terms[s][ix->seg_n_terms[s]++] = ti;
            }
        }
    }
    free(stamp);
    /* per segment, its word forms by key */
    ix->seg_forms = calloc((size_t)ix->n_segs + 1, sizeof *ix->seg_forms);
    ix->seg_n_forms = calloc((size_t)ix->n_segs + 1, sizeof *ix->seg_n_forms);
    for (int s = 0; s < ix->n_segs; s++)
        ix->seg_forms[s] = malloc(sizeof(uint32_t) * (ix->n_forms + 1));
    for (uint32_t i = 0; i < ix->n_forms; i++) {
        int s = ix->forms[i].seg;
        if (s >= 0 && s < ix->n_segs)
            ix->seg_forms[s][ix->seg_n_forms[s]++] = i;
    }
    sort_ix = ix;
    for (int s = 0; s < ix->n_segs; s++)
        qsort(ix->seg_forms[s], ix->seg_n_forms[s], sizeof(uint32_t), cmp_form_idx);
}

void eu_index_load_forms(EuIndex *ix, const Snapshot *snap)
{
    for (uint32_t i = 0; i < ix->n_forms; i++)
        free(ix->forms[i].key);
    ix->n_forms = 0;
    memset(ix->form_slots, 0, sizeof *ix->form_slots * ix->n_form_slots);
    for (int s = 0; s < snap->n_segs && s < ix->n_segs; s++) {
        const TermDict *td = seg_surfaces(snap->segs[s]);
        ix->seg_n_forms[s] = 0;
        if (!td)
            continue;
        QrArena *a = qr_arena_new(0);
        TermCursor *c = td_cursor_new(td, a);
        cr_assert_not_null(c);
        for (bool ok = td_cursor_seek(c, (const uint8_t *)"", 0); ok; ok = td_cursor_next(c)) {
            size_t kl;
            const uint8_t *k = td_cursor_key(c, &kl);
            TermPostings tp;
            td_cursor_info(c, &tp);
            const char *t;
            size_t tl;
            cr_assert(seg_surface_term(snap->segs[s], k, kl, &tp, &t, &tl), "damaged form");
            const EuTerm *term = eu_index_term(ix, k[0], t, tl);
            if (!term)
                continue;
            form_note(ix, s, k, kl, (uint32_t)(term - ix->terms));
        }
        qr_arena_free(a);
    }
    for (int s = 0; s < ix->n_segs; s++) {
        ix->seg_forms[s] = realloc(ix->seg_forms[s], sizeof(uint32_t) * (ix->n_forms + 1));
        ix->seg_n_forms[s] = 0;
    }
    for (uint32_t i = 0; i < ix->n_forms; i++) {
        int s = ix->forms[i].seg;
        ix->seg_forms[s][ix->seg_n_forms[s]++] = i;
    }
    sort_ix = ix;
    for (int s = 0; s < ix->n_segs; s++)
        qsort(ix->seg_forms[s], ix->seg_n_forms[s], sizeof(uint32_t), cmp_form_idx);
}

void eu_index_from_snapshot(EuIndex *ix, const Snapshot *snap, const QrSchema *schema)
{
    eu_index_init(ix, schema);
    for (int i = 0; i < snap->n_segs; i++) {
        const Segment *seg = snap->segs[i];
        DocStoreCursor *c = ds_cursor_new(seg_docs(seg));
        cr_assert_not_null(c);
        for (uint32_t d = 0; d < seg_n_docs(seg); d++) {
            const uint8_t *doc;
            size_t dl;
            QrError e;
            qr_error_clear(&e);
            cr_assert_eq(ds_get(c, d, &doc, &dl, &e), QR_OK, "ds_get: %s", e.message);
            eu_index_add(ix, (const char *)doc, dl, !snapshot_deleted(snap, i, d), i, d,
                         snap->base[i] + d);
        }
        ds_cursor_free(c);
    }
    eu_index_finish(ix);
}

static void key_text(const uint8_t *k, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    o += (size_t)snprintf(out, cap, "[%u]", k[0]);
    for (size_t i = 1; i < n && o + 2 < cap; i++)
        out[o++] = (k[i] >= 0x20 && k[i] < 0x7f) ? (char)k[i] : '?';
    out[o < cap ? o : cap - 1] = 0;
}

void eu_assert_segment_consistent(const Segment *seg, const QrSchema *schema, const char *what)
{
    EuIndex ix;
    eu_index_init(&ix, schema);
    DocStoreCursor *c = ds_cursor_new(seg_docs(seg));
    cr_assert_not_null(c);
    uint32_t nd = seg_n_docs(seg);
    for (uint32_t d = 0; d < nd; d++) {
        const uint8_t *doc;
        size_t dl;
        QrError e;
        qr_error_clear(&e);
        cr_assert_eq(ds_get(c, d, &doc, &dl, &e), QR_OK, "%s: ds_get %u: %s", what, d,
                     e.message);
        eu_index_add(&ix, (const char *)doc, dl, true, 0, d, d);
    }
    ds_cursor_free(c);
    eu_index_finish(&ix);
    /* keys */
    for (uint32_t d = 0; d < nd; d++) {
        const uint8_t *k;
        size_t kl;
        cr_assert(seg_pk(seg, d, &k, &kl), "%s: doc %u has no key", what, d);
        cr_assert(kl == ix.docs[d].key_len && !memcmp(k, ix.docs[d].key, kl),
                  "%s: doc %u key differs from its stored JSON", what, d);
        int64_t last = -1;
        for (uint32_t x = 0; x < nd; x++)
            if (ix.docs[x].key_len == kl && !memcmp(ix.docs[x].key, k, kl))
                last = x;
        cr_assert_eq(seg_pk_lookup(seg, k, kl), last, "%s: pk lookup of doc %u", what, d);
    }
    /* norms and statistics */
    for (int fi = 0; fi <= schema->n_fields; fi++) {
        int f = fi < schema->n_fields ? fi : QR_ALL_FIELD;
        if (f == QR_ALL_FIELD ? !schema->all_field : !ix.an[f])
            continue;
        const uint32_t *nm = seg_norms(seg, f);
        cr_assert_not_null(nm, "%s: no norms for field %d", what, f);
        for (uint32_t d = 0; d < nd; d++)
            cr_assert_eq(nm[d], eu_doc_norm(&ix, d, f),
                         "%s: norm of doc %u field %d: %u, want %u", what, d, f, nm[d],
                         eu_doc_norm(&ix, d, f));
        SegFieldStats st = seg_field_stats(seg, f);
        cr_assert_eq(st.total_len, ix.field_total[f], "%s: field %d total_len", what, f);
        cr_assert_eq(st.n_docs, ix.field_docs[f], "%s: field %d n_docs", what, f);
    }
    /* terms and postings */
    const TermDict *td = seg_terms(seg);
    cr_assert_eq(td_count(td), ix.n_terms, "%s: %lu terms, the documents have %u", what,
                 (unsigned long)td_count(td), ix.n_terms);
    QrArena *arena = qr_arena_new(0);
    TermCursor *cur = td_cursor_new(td, arena);
    cr_assert_not_null(cur);
    IterCtx ctx;
    QrArena *it_arena = qr_arena_new(0);
    for (uint32_t k = 0; k < ix.n_terms; k++) {
        cr_assert(td_cursor_next(cur), "%s: dictionary ends after %u terms", what, k);
        size_t kl;
        const uint8_t *key = td_cursor_key(cur, &kl);
        const EuTerm *t = &ix.terms[ix.sorted[k]];
        char kt[128];
        key_text(t->key, t->key_len, kt, sizeof kt);
        cr_assert(kl == t->key_len && !memcmp(key, t->key, kl), "%s: term %u is not %s", what,
                  k, kt);
        TermPostings tp;
        td_cursor_info(cur, &tp);
        cr_assert_eq(tp.df, t->n_occ, "%s: df of %s: %u, want %u", what, kt, tp.df, t->n_occ);
        cr_assert_eq(tp.total_tf, t->total_tf, "%s: total_tf of %s", what, kt);
        qr_arena_reset(it_arena);
        iter_ctx_init(&ctx, it_arena);
        Iter *it = seg_postings(seg, &ctx, &tp, NULL, true);
        cr_assert_not_null(it);
        for (uint32_t o = 0; o < t->n_occ; o++) {
            const EuOcc *oc = &t->occ[o];
            DocId d = iter_next(it);
            cr_assert_eq(d, (DocId)oc->doc, "%s: posting %u of %s is doc %ld, want %u", what, o,
                         kt, (long)d, oc->doc);
            cr_assert_eq(it->vt->freq(it), oc->tf, "%s: freq of %s in doc %u", what, kt,
                         oc->doc);
            uint32_t np = 0;
            const uint32_t *p = it->vt->positions(it, &np);
            cr_assert_eq(np, oc->tf, "%s: %u positions of %s in doc %u, want %u", what, np, kt,
                         oc->doc, oc->tf);
            for (uint32_t q = 0; q < np; q++)
                cr_assert_eq(p[q], ix.pos[oc->pos_off + q], "%s: position %u of %s in doc %u",
                             what, q, kt, oc->doc);
        }
        cr_assert_eq(iter_next(it), ITER_END, "%s: extra postings for %s", what, kt);
        cr_assert_eq(ctx.err.code, QR_OK, "%s: postings of %s: %s", what, kt, ctx.err.message);
        iter_close(it);
    }
    cr_assert(!td_cursor_next(cur), "%s: dictionary has extra terms", what);
    qr_arena_free(it_arena);
    qr_arena_free(arena);
    eu_index_free(&ix);
}

int eu_osa(const uint32_t *a, size_t an, const uint32_t *b, size_t bn)
{
    int *d = malloc((an + 1) * (bn + 1) * sizeof *d);
#define D(i, j) d[(i) * (bn + 1) + (j)]
    for (size_t i = 0; i <= an; i++)
        D(i, 0) = (int)i;
    for (size_t j = 0; j <= bn; j++)
        D(0, j) = (int)j;
    for (size_t i = 1; i <= an; i++)
        for (size_t j = 1; j <= bn; j++) {
            int v = D(i - 1, j - 1) + (a[i - 1] != b[j - 1]);
            if (D(i - 1, j) + 1 < v)
                v = D(i - 1, j) + 1;
            if (D(i, j - 1) + 1 < v)
                v = D(i, j - 1) + 1;
            if (i >= 2 && j >= 2 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                D(i - 2, j - 2) + 1 < v)
                v = D(i - 2, j - 2) + 1;
            D(i, j) = v;
        }
    int r = D(an, bn);
#undef D
    free(d);
    return r;
}

/* ---- writing through the front door ---- */

void eu_put_docs(QrTable *t, char **docs, int n)
{
    QrError err;
    qr_error_clear(&err);
    QrBatch *b;
    cr_assert_eq(qr_batch_begin(t, &b, &err), QR_OK, "%s", err.message);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(qr_batch_put(b, docs[i], strlen(docs[i]), NULL, &err), QR_OK, "%s: %s",
                     err.message, docs[i]);
        free(docs[i]);
    }
    cr_assert_eq(qr_batch_commit(b, &err), QR_OK, "%s", err.message);
    qr_batch_free(b);
}

void eu_delete_random(QrTable *t, uint64_t *rng, int n, int64_t space)
{
    QrError err;
    qr_error_clear(&err);
    QrBatch *b;
    cr_assert_eq(qr_batch_begin(t, &b, &err), QR_OK, "%s", err.message);
    for (int i = 0; i < n; i++) {
        char k[32];
        snprintf(k, sizeof k, "%lld", (long long)eu_below(rng, (uint64_t)space));
        cr_assert_eq(qr_batch_delete(b, k, strlen(k), NULL, &err), QR_OK, "%s", err.message);
    }
    cr_assert_eq(qr_batch_commit(b, &err), QR_OK, "%s", err.message);
    qr_batch_free(b);
}
