/*
 * sequence.c — durable sequences (format and guarantees in sequence.h).
 *
 * Layer: query/.  Calls the base kit (util.h files, mem.h) and cJSON.
 *
 * One registry for the process, keyed by (data directory, name), holds the
 * sequences in use: the in-memory position (last, called) and the durable
 * mark.  Every operation holds the registry lock while it reads or writes a
 * file, so two sessions never get the same value and the mark only grows.
 */
#include "query/sequence.h"
#include "store/mem.h"
#include "store/util.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct Sequence {
    char *dir;             /* owns */
    char name[SEQ_NAME_MAX + 1];
    SeqDef def;
    int64_t last;          /* last value handed out (or set) */
    bool called;
    int64_t mark;          /* durable: the file's "last" */
    bool mark_called;
} Sequence;

static pthread_mutex_t seq_mu = PTHREAD_MUTEX_INITIALIZER;
static Sequence **seqs;    /* guarded by seq_mu */
static int n_seqs, cap_seqs;

/* ---- definitions ---- */

static void type_range(const char *type, int64_t *lo, int64_t *hi)
{
    if (!strcmp(type, "int2")) {
        *lo = INT16_MIN;
        *hi = INT16_MAX;
    } else if (!strcmp(type, "int4")) {
        *lo = INT32_MIN;
        *hi = INT32_MAX;
    } else {
        *lo = INT64_MIN;
        *hi = INT64_MAX;
    }
}

void seq_def_init(SeqDef *d, const char *type, int64_t increment)
{
    memset(d, 0, sizeof *d);
    snprintf(d->type, sizeof d->type, "%s", type ? type : "int8");
    int64_t lo, hi;
    type_range(d->type, &lo, &hi);
    d->increment = increment ? increment : 1;
    d->min = d->increment > 0 ? 1 : lo;
    d->max = d->increment > 0 ? hi : -1;
    d->start = d->increment > 0 ? d->min : d->max;
    d->cache = 1;
}

int seq_def_check(const SeqDef *d, const char *name, QrError *err)
{
    int64_t lo, hi;
    type_range(d->type, &lo, &hi);
    const char *bad = NULL;
    char msg[200];
    if (d->increment == 0)
        bad = "INCREMENT must not be zero";
    else if (d->min < lo || d->max > hi) {
        snprintf(msg, sizeof msg, "MINVALUE or MAXVALUE is out of range for sequence data type %s",
                 d->type);
        bad = msg;
    } else if (d->min >= d->max) {
        snprintf(msg, sizeof msg, "MINVALUE (%" PRId64 ") must be less than MAXVALUE (%" PRId64 ")",
                 d->min, d->max);
        bad = msg;
    } else if (d->start < d->min) {
        snprintf(msg, sizeof msg, "START value (%" PRId64 ") cannot be less than MINVALUE (%" PRId64 ")",
                 d->start, d->min);
        bad = msg;
    } else if (d->start > d->max) {
        snprintf(msg, sizeof msg,
                 "START value (%" PRId64 ") cannot be greater than MAXVALUE (%" PRId64 ")", d->start,
                 d->max);
        bad = msg;
    } else if (d->cache < 1) {
        snprintf(msg, sizeof msg, "CACHE (%" PRId64 ") must be greater than zero", d->cache);
        bad = msg;
    }
    if (!bad)
        return QR_OK;
    qr_error_set(err, QR_EINVAL, "%s", bad);
    qr_error_detail(err, "sequence \"%s\"", name);
    qr_error_set_sqlstate(err, "22023");
    return QR_EINVAL;
}

/* ---- files ---- */

static bool name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > SEQ_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(name[i] == '_' || (name[i] >= '0' && name[i] <= '9') ||
              (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z')))
            return false;
    return true;
}

static void seq_path(const char *dir, const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s/sequences/%s.json", dir, name);
}

static void put_i64(cJSON *o, const char *k, int64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRId64, v);
    cJSON_AddStringToObject(o, k, b);
}

static bool get_i64(const cJSON *o, const char *k, int64_t *v)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    if (!s || !*s)
        return false;
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (*end || errno)
        return false;
    *v = x;
    return true;
}

/* Write the sequence's definition with mark `last`/`called`; durable. */
static int seq_write(const Sequence *q, int64_t last, bool called, QrError *err)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    cJSON_AddNumberToObject(o, "v", 1);
    cJSON_AddStringToObject(o, "type", q->def.type);
    put_i64(o, "start", q->def.start);
    put_i64(o, "increment", q->def.increment);
    put_i64(o, "min", q->def.min);
    put_i64(o, "max", q->def.max);
    put_i64(o, "cache", q->def.cache);
    cJSON_AddBoolToObject(o, "cycle", q->def.cycle);
    put_i64(o, "last", last);
    cJSON_AddBoolToObject(o, "is_called", called);
    cJSON_AddStringToObject(o, "owned_by", q->def.owned_by);
    cJSON_AddBoolToObject(o, "internal", q->def.internal);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!text)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    char path[4096];
    seq_path(q->dir, q->name, path, sizeof path);
    int rc = qr_file_write_atomic(path, text, strlen(text), true, err);
    cJSON_free(text);
    return rc;
}

/* Read a sequence file into q (dir and name set). */
static int seq_read(Sequence *q, QrError *err)
{
    char path[4096];
    seq_path(q->dir, q->name, path, sizeof path);
    if (!qr_path_exists(path))
        return qr_error_set(err, QR_ENOTFOUND, "relation \"%s\" does not exist", q->name);
    uint8_t *data = NULL;
    size_t len = 0;
    int rc = qr_file_read_all(path, &data, &len, err);
    if (rc)
        return rc;
    cJSON *o = cJSON_ParseWithLength((const char *)data, len);
    qr_free(data);
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "type"));
    SeqDef *d = &q->def;
    memset(d, 0, sizeof *d);
    bool ok = o && type && strlen(type) < sizeof d->type && get_i64(o, "start", &d->start) &&
              get_i64(o, "increment", &d->increment) && get_i64(o, "min", &d->min) &&
              get_i64(o, "max", &d->max) && get_i64(o, "cache", &d->cache) &&
              get_i64(o, "last", &q->mark);
    if (ok) {
        snprintf(d->type, sizeof d->type, "%s", type);
        d->cycle = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "cycle"));
        d->internal = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "internal"));
        const char *ob = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "owned_by"));
        snprintf(d->owned_by, sizeof d->owned_by, "%s", ob ? ob : "");
        q->mark_called = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "is_called"));
        q->last = q->mark;
        q->called = q->mark_called;
    }
    cJSON_Delete(o);
    if (!ok)
        return qr_error_set(err, QR_ECORRUPT, "sequence file %s is damaged", path);
    return QR_OK;
}

/* ---- the registry (callers hold seq_mu) ---- */

static Sequence *reg_find(const char *dir, const char *name)
{
    for (int i = 0; i < n_seqs; i++)
        if (!strcmp(seqs[i]->name, name) && !strcmp(seqs[i]->dir, dir))
            return seqs[i];
    return NULL;
}

static void reg_forget(const char *dir, const char *name)
{
    for (int i = 0; i < n_seqs; i++)
        if (!strcmp(seqs[i]->name, name) && !strcmp(seqs[i]->dir, dir)) {
            qr_free(seqs[i]->dir);
            qr_free(seqs[i]);
            seqs[i] = seqs[--n_seqs];
            return;
        }
}

static Sequence *reg_new(const char *dir, const char *name, QrError *err)
{
    if (n_seqs == cap_seqs) {
        int nc = cap_seqs ? 2 * cap_seqs : 16;
        Sequence **ns = qr_realloc(seqs, (size_t)nc * sizeof *ns);
        if (!ns) {
            qr_error_set(err, QR_ENOMEM, "out of memory");
            return NULL;
        }
        seqs = ns;
        cap_seqs = nc;
    }
    Sequence *q = qr_calloc(1, sizeof *q);
    char *d = q ? qr_strdup(dir) : NULL;
    if (!d) {
        qr_free(q);
        qr_error_set(err, QR_ENOMEM, "out of memory");
        return NULL;
    }
    q->dir = d;
    snprintf(q->name, sizeof q->name, "%s", name);
    return q;
}

/* The loaded sequence `name` (from its file on first use). */
static Sequence *reg_get(const char *dir, const char *name, QrError *err)
{
    if (!name_ok(name)) {
        qr_error_set(err, QR_ENOTFOUND, "relation \"%s\" does not exist", name);
        return NULL;
    }
    Sequence *q = reg_find(dir, name);
    if (q)
        return q;
    if (!(q = reg_new(dir, name, err)))
        return NULL;
    if (seq_read(q, err) != QR_OK) {
        qr_free(q->dir);
        qr_free(q);
        return NULL;
    }
    seqs[n_seqs++] = q;
    return q;
}

/* ---- operations ---- */

bool seq_exists(const char *dir, const char *name)
{
    if (!name_ok(name))
        return false;
    char path[4096];
    seq_path(dir, name, path, sizeof path);
    return qr_path_exists(path);
}

int seq_create(const char *dir, const char *name, const SeqDef *d, QrError *err)
{
    if (!name_ok(name))
        return qr_error_set(err, QR_EINVAL, "invalid sequence name \"%s\"", name);
    int rc = seq_def_check(d, name, err);
    if (rc)
        return rc;
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/sequences", dir);
    pthread_mutex_lock(&seq_mu);
    if (seq_exists(dir, name)) {
        pthread_mutex_unlock(&seq_mu);
        return qr_error_set(err, QR_EEXISTS, "relation \"%s\" already exists", name);
    }
    reg_forget(dir, name); /* a stale entry of a sequence dropped behind our back */
    Sequence q = {.dir = (char *)dir, .def = *d};
    snprintf(q.name, sizeof q.name, "%s", name);
    rc = qr_mkdir_p(sub, err);
    if (rc == QR_OK)
        rc = seq_write(&q, d->start, false, err);
    pthread_mutex_unlock(&seq_mu);
    return rc;
}

int seq_drop(const char *dir, const char *name, QrError *err)
{
    char path[4096];
    seq_path(dir, name, path, sizeof path);
    pthread_mutex_lock(&seq_mu);
    reg_forget(dir, name);
    int rc = QR_OK;
    if (!name_ok(name) || unlink(path) != 0)
        rc = qr_error_set(err, errno == ENOENT || !name_ok(name) ? QR_ENOTFOUND : QR_EIO,
                          "sequence \"%s\" does not exist", name);
    else {
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/sequences", dir);
        rc = qr_fsync_dir(sub, err);
    }
    pthread_mutex_unlock(&seq_mu);
    return rc;
}

int seq_next(const char *dir, const char *name, int64_t *out, QrError *err)
{
    pthread_mutex_lock(&seq_mu);
    Sequence *q = reg_get(dir, name, err);
    if (!q) {
        pthread_mutex_unlock(&seq_mu);
        return err->code;
    }
    const SeqDef *d = &q->def;
    int64_t next = q->last;
    if (q->called) {
        bool over = d->increment > 0 ? (q->last > d->max - d->increment)
                                     : (q->last < d->min - d->increment);
        if (over && !d->cycle) {
            pthread_mutex_unlock(&seq_mu);
            qr_error_set(err, QR_ELIMIT, "nextval: reached %s value of sequence \"%s\" (%" PRId64 ")",
                         d->increment > 0 ? "maximum" : "minimum", name,
                         d->increment > 0 ? d->max : d->min);
            qr_error_set_sqlstate(err, "2200H");
            return QR_ELIMIT;
        }
        next = over ? (d->increment > 0 ? d->min : d->max) : q->last + d->increment;
    }
    /* beyond the durable mark (or wrapped below it): move the mark first */
    bool beyond = !q->mark_called ||
                  (d->increment > 0 ? next > q->mark || next < q->last
                                    : next < q->mark || next > q->last);
    if (beyond) {
        int64_t ahead = d->internal ? SEQ_LOG_AHEAD_ROWID : SEQ_LOG_AHEAD;
        if (ahead < d->cache)
            ahead = d->cache;
        int64_t mark = next;
        for (int64_t k = 1; k < ahead; k++) {
            if (d->increment > 0 ? mark > d->max - d->increment : mark < d->min - d->increment)
                break;
            mark += d->increment;
        }
        int rc = seq_write(q, mark, true, err);
        if (rc) {
            pthread_mutex_unlock(&seq_mu);
            return rc;
        }
        q->mark = mark;
        q->mark_called = true;
    }
    q->last = next;
    q->called = true;
    *out = next;
    pthread_mutex_unlock(&seq_mu);
    return QR_OK;
}

int seq_set(const char *dir, const char *name, int64_t v, bool is_called, QrError *err)
{
    pthread_mutex_lock(&seq_mu);
    Sequence *q = reg_get(dir, name, err);
    int rc = q ? QR_OK : err->code;
    if (q && (v < q->def.min || v > q->def.max)) {
        qr_error_set(err, QR_EINVAL,
                     "setval: value %" PRId64 " is out of bounds for sequence \"%s\" (%" PRId64
                     "..%" PRId64 ")",
                     v, name, q->def.min, q->def.max);
        qr_error_set_sqlstate(err, "22003");
        rc = QR_EINVAL;
    }
    if (rc == QR_OK && (rc = seq_write(q, v, is_called, err)) == QR_OK) {
        q->mark = q->last = v;
        q->mark_called = q->called = is_called;
    }
    pthread_mutex_unlock(&seq_mu);
    return rc;
}

int seq_get(const char *dir, const char *name, SeqDef *d, int64_t *last, bool *called,
            QrError *err)
{
    pthread_mutex_lock(&seq_mu);
    Sequence *q = reg_get(dir, name, err);
    if (q) {
        *d = q->def;
        *last = q->last;
        *called = q->called;
    }
    pthread_mutex_unlock(&seq_mu);
    return q ? QR_OK : err->code;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int seq_list(const char *dir, char ***names, int *n, QrError *err)
{
    *names = NULL;
    *n = 0;
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/sequences", dir);
    DIR *dh = opendir(sub);
    if (!dh)
        return QR_OK; /* none yet */
    char **out = NULL;
    int k = 0, cap = 0, rc = QR_OK;
    struct dirent *de;
    while ((de = readdir(dh)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len <= 5 || strcmp(de->d_name + len - 5, ".json") != 0)
            continue;
        if (k == cap) {
            cap = cap ? 2 * cap : 16;
            char **no = qr_realloc(out, (size_t)cap * sizeof *no);
            if (!no) {
                rc = qr_error_set(err, QR_ENOMEM, "out of memory");
                break;
            }
            out = no;
        }
        char *nm = qr_malloc(len - 4);
        if (!nm) {
            rc = qr_error_set(err, QR_ENOMEM, "out of memory");
            break;
        }
        memcpy(nm, de->d_name, len - 5);
        nm[len - 5] = 0;
        if (!name_ok(nm)) {
            qr_free(nm);
            continue;
        }
        out[k++] = nm;
    }
    closedir(dh);
    if (rc) {
        for (int i = 0; i < k; i++)
            qr_free(out[i]);
        qr_free(out);
        return rc;
    }
    if (k)
        qsort(out, (size_t)k, sizeof *out, cmp_names);
    *names = out;
    *n = k;
    return QR_OK;
}

void seq_forget_all(void)
{
    pthread_mutex_lock(&seq_mu);
    for (int i = 0; i < n_seqs; i++) {
        qr_free(seqs[i]->dir);
        qr_free(seqs[i]);
    }
    qr_free(seqs);
    seqs = NULL;
    n_seqs = cap_seqs = 0;
    pthread_mutex_unlock(&seq_mu);
}

int seq_owned_names(const char *dir, const char *table, char **out, QrError *err)
{
    *out = NULL;
    char **names;
    int n;
    int rc = seq_list(dir, &names, &n, err);
    size_t tl = strlen(table), len = 0;
    char *s = rc == QR_OK ? qr_malloc((size_t)n * (SEQ_NAME_MAX + 1) + 1) : NULL;
    if (rc == QR_OK && !s)
        rc = qr_error_set(err, QR_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        SeqDef d;
        int64_t last;
        bool called;
        QrError e;
        qr_error_clear(&e);
        if (rc == QR_OK && seq_get(dir, names[i], &d, &last, &called, &e) == QR_OK &&
            !strncmp(d.owned_by, table, tl) && d.owned_by[tl] == '.')
            len += (size_t)sprintf(s + len, "%.*s\n", SEQ_NAME_MAX, names[i]);
        qr_free(names[i]);
    }
    qr_free(names);
    if (rc != QR_OK) {
        qr_free(s);
        return rc;
    }
    s[len] = 0;
    *out = s;
    return QR_OK;
}

int seq_drop_names(const char *dir, const char *names, QrError *err)
{
    int rc = QR_OK;
    for (const char *p = names; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        char name[SEQ_NAME_MAX + 1];
        snprintf(name, sizeof name, "%.*s", (int)l, p);
        QrError e;
        qr_error_clear(&e);
        int r = name[0] ? seq_drop(dir, name, &e) : QR_OK;
        if (r != QR_OK && r != QR_ENOTFOUND && rc == QR_OK) {
            qr_error_copy(err, &e);
            rc = r;
        }
        p += l + (nl != NULL);
    }
    return rc;
}

int seq_drop_owned(const char *dir, const char *table, QrError *err)
{
    char *names;
    int rc = seq_owned_names(dir, table, &names, err);
    if (rc == QR_OK)
        rc = seq_drop_names(dir, names, err);
    qr_free(names);
    return rc;
}
