/*
 * http_facets.c — the "facets" search parameter: its JSON and GET text
 * forms read into QrFacetReq (query/quarry.h), and the answer's "facets"
 * object written from QrFacetRes.
 *
 * Layer: server/.  Calls query/quarry.h, the base kit and cJSON.
 *
 * JSON: a list of specs or an object of named specs,
 *   {"type": "terms", "field": F, "size": N}          (default size 10)
 *   {"type": "histogram", "field": F, "interval": X}
 *   {"type": "stats", "field": F}
 *   {"type": "percentiles", "field": F, "percents": [50, 99]}
 *                                       (default 1, 5, 25, 50, 75, 95, 99)
 *   {"type": "cardinality", "field": F}
 *   {"type": "range", "field": F, "ranges": [{"to": 10}, {"from": 10, "to": 20,
 *                                  "key": "mid"}, {"from": 20}]}
 * with "name" too in the list form.  Range ends are numbers in the
 * column's unit or, for timestamps, ISO 8601 text.  GET:
 * type:field[:arg],... with arg the size (terms), the interval (histogram),
 * percents separated by '|' (percentiles) or ranges "from-to|..." with '*'
 * for an open end (range).  Unnamed facets are keyed by field, or
 * "field:type" when that is taken.
 */
#include "server/http_int.h"
#include "store/mem.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const KINDS[] = {"terms", "histogram", "stats", "percentiles", "cardinality",
                                    "range"};
#define N_KINDS (int)(sizeof KINDS / sizeof KINDS[0])
static const double DEFAULT_PCTS[] = {1, 5, 25, 50, 75, 95, 99};

void http_facets_free(HttpFacets *fs)
{
    for (int i = 0; i < fs->n; i++) {
        qr_free(fs->names[i]);
        qr_free(fs->fields[i]);
        qr_free(fs->pcts[i]);
        for (int k = 0; k < fs->reqs[i].n_ranges; k++)
            qr_free((char *)fs->ranges[i][k].key);
        qr_free(fs->ranges[i]);
    }
    memset(fs, 0, sizeof *fs);
}

/* The facet being added: kind, field and name checked, keyed. */
static QrFacetReq *facet_new(HttpReq *r, HttpFacets *fs, const char *name, const char *kind,
                             const char *field)
{
    if (fs->n == HTTP_MAX_FACETS) {
        http_error(r, QR_ELIMIT, "at most %d facets", HTTP_MAX_FACETS);
        return NULL;
    }
    int k = 0;
    while (k < N_KINDS && strcmp(KINDS[k], kind))
        k++;
    if (k == N_KINDS) {
        http_error(r, QR_EINVAL, "facet type must be terms, histogram, stats, percentiles, "
                                 "cardinality or range, not \"%.20s\"", kind);
        return NULL;
    }
    if (!field || !*field) {
        http_error(r, QR_EINVAL, "facet \"%.60s\" needs a field", name ? name : kind);
        return NULL;
    }
    /* unnamed facets are keyed by field, or "field:type" when that is taken */
    char dflt[160];
    snprintf(dflt, sizeof dflt, "%s", field);
    const char *key = name && *name ? name : dflt;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < fs->n; i++)
            if (!strcmp(fs->names[i], key)) {
                if (key == dflt && pass == 0) {
                    snprintf(dflt, sizeof dflt, "%s:%s", field, kind);
                    break;
                }
                http_error(r, QR_EINVAL, "two facets are named \"%.60s\"", key);
                return NULL;
            }
    int i = fs->n;
    QrFacetReq *f = &fs->reqs[i];
    memset(f, 0, sizeof *f);
    f->kind = (QrFacetKind)k;
    fs->names[i] = qr_strdup(key);
    fs->fields[i] = qr_strdup(field);
    if (!fs->names[i] || !fs->fields[i]) {
        qr_free(fs->names[i]);
        qr_free(fs->fields[i]);
        http_error(r, QR_ENOMEM, "out of memory");
        return NULL;
    }
    f->field = fs->fields[i];
    fs->n++;
    return f;
}

static int set_size(HttpReq *r, QrFacetReq *f, double size)
{
    if (!(size >= 0 && size <= 10000 && size == floor(size)))
        return http_error(r, QR_EINVAL, "facet size must be a whole number from 0 to 10000");
    f->size = (int)size;
    return QR_OK;
}

static int set_interval(HttpReq *r, QrFacetReq *f, double x)
{
    if (!(x > 0 && isfinite(x)))
        return http_error(r, QR_EINVAL, "histogram facet on \"%.60s\" needs an interval > 0",
                          f->field);
    f->interval = x;
    return QR_OK;
}

/* n zeroed elements of `size` bytes for the facet just added (index
 * fs->n - 1): its percents or its ranges, at most `max` ("takes 1 to max
 * <what>"); owned through fs, NULL with the answer sent on failure. */
static void *facet_room(HttpReq *r, HttpFacets *fs, int n, int max, size_t size,
                        const char *kind, const char *what)
{
    QrFacetReq *f = &fs->reqs[fs->n - 1];
    if (n < 1 || n > max) {
        http_error(r, QR_EINVAL, "%s facet on \"%.60s\" takes 1 to %d %s", kind, f->field, max,
                   what);
        return NULL;
    }
    void *p = qr_calloc((size_t)n, size);
    if (!p)
        http_error(r, QR_ENOMEM, "out of memory");
    return p;
}

/* Room for n percents of the facet just added. */
static double *pct_room(HttpReq *r, HttpFacets *fs, int n)
{
    double *p = facet_room(r, fs, n, QR_FACET_MAX_PERCENTS, sizeof *p, "percentiles", "percents");
    if (p) {
        fs->pcts[fs->n - 1] = p;
        fs->reqs[fs->n - 1].percents = p;
        fs->reqs[fs->n - 1].n_percents = n;
    }
    return p;
}

/* Room for n ranges of the facet just added. */
static QrFacetRange *range_room(HttpReq *r, HttpFacets *fs, int n)
{
    QrFacetRange *rg = facet_room(r, fs, n, QR_FACET_MAX_RANGES, sizeof *rg, "range", "ranges");
    if (rg) {
        fs->ranges[fs->n - 1] = rg;
        fs->reqs[fs->n - 1].ranges = rg;
        fs->reqs[fs->n - 1].n_ranges = n;
    }
    return rg;
}

static int pct_check(HttpReq *r, double p)
{
    if (!(p >= 0 && p <= 100))
        return http_error(r, QR_EINVAL, "a percent must be a number from 0 to 100");
    return QR_OK;
}

/* A range end: a number, or ISO 8601 text read as a timestamp (µs). */
static int range_end_text(HttpReq *r, const char *s, size_t n, bool *has, double *out)
{
    if (n == 1 && *s == '*')
        return QR_OK;
    char buf[64];
    if (n == 0 || n >= sizeof buf)
        return http_error(r, QR_EINVAL, "bad range end \"%.*s\"", (int)(n > 40 ? 40 : n), s);
    memcpy(buf, s, n);
    buf[n] = 0;
    char *end;
    double d = strtod(buf, &end);
    int64_t us;
    if (*end == 0 && end != buf && isfinite(d))
        *out = d;
    else if (qr_parse_timestamp(buf, n, &us))
        *out = (double)us;
    else
        return http_error(r, QR_EINVAL, "range end \"%s\" is neither a number nor a timestamp",
                          buf);
    *has = true;
    return QR_OK;
}

static int range_end_json(HttpReq *r, const cJSON *v, bool *has, double *out)
{
    if (!v || cJSON_IsNull(v))
        return QR_OK;
    if (cJSON_IsNumber(v)) {
        *out = v->valuedouble;
        *has = true;
        return QR_OK;
    }
    if (cJSON_IsString(v))
        return range_end_text(r, v->valuestring, strlen(v->valuestring), has, out);
    return http_error(r, QR_EINVAL, "range ends are numbers or timestamps");
}

/* ---- GET: type:field[:arg],... ---- */

int http_facets_text(HttpReq *r, HttpFacets *fs, const char *v)
{
    char buf[1024];
    if (strlen(v) >= sizeof buf)
        return http_error(r, QR_ELIMIT, "facets text is longer than %zu bytes", sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        char *field = strchr(tok, ':');
        if (!field)
            return http_error(r, QR_EINVAL, "facets must be a list of type:field[:arg], e.g. "
                                            "terms:symbol:5,stats:views,percentiles:views:50|99");
        *field++ = 0;
        char *arg = strchr(field, ':');
        if (arg)
            *arg++ = 0;
        QrFacetReq *f = facet_new(r, fs, NULL, tok, field);
        if (!f)
            return r->err.code;
        if (f->kind == QR_FACET_PERCENTILES || f->kind == QR_FACET_RANGE) {
            int n = 1;
            for (const char *p = arg; p && *p; p++)
                n += *p == '|';
            if (f->kind == QR_FACET_PERCENTILES && !arg) {
                double *p = pct_room(r, fs, 7);
                if (!p)
                    return r->err.code;
                memcpy(p, DEFAULT_PCTS, sizeof DEFAULT_PCTS);
                continue;
            }
            if (!arg)
                return http_error(r, QR_EINVAL, "range facet on \"%.60s\" needs ranges, e.g. "
                                                "range:%s:*-10|10-100|100-*", field, field);
            double *p = f->kind == QR_FACET_PERCENTILES ? pct_room(r, fs, n) : NULL;
            QrFacetRange *rg = f->kind == QR_FACET_RANGE ? range_room(r, fs, n) : NULL;
            if (!p && !rg)
                return r->err.code;
            char *s2 = NULL;
            int i = 0;
            for (char *part = strtok_r(arg, "|", &s2); part; part = strtok_r(NULL, "|", &s2), i++) {
                if (p) {
                    char *end;
                    p[i] = strtod(part, &end);
                    if (end == part || *end || pct_check(r, p[i]) != QR_OK)
                        return http_error(r, QR_EINVAL, "bad percent \"%.20s\"", part);
                    continue;
                }
                /* from-to; a timestamp holds '-' too: split at the '-' that
                 * leaves two valid ends */
                size_t len = strlen(part);
                bool done = false;
                for (size_t d = 1; d + 1 < len && !done; d++) {
                    if (part[d] != '-')
                        continue;
                    QrFacetRange t = {0};
                    QrError save_err = r->err;
                    int save_x = r->xcode;
                    if (range_end_text(r, part, d, &t.has_from, &t.from) == QR_OK &&
                        range_end_text(r, part + d + 1, len - d - 1, &t.has_to, &t.to) == QR_OK) {
                        rg[i] = t;
                        done = true;
                    } else {
                        r->err = save_err; /* try the next '-' */
                        r->xcode = save_x;
                    }
                }
                if (!done)
                    return http_error(r, QR_EINVAL, "bad range \"%.40s\": from-to, '*' for an "
                                                    "open end", part);
            }
            f->n_percents = p ? i : f->n_percents;
            f->n_ranges = rg ? i : f->n_ranges;
            continue;
        }
        if (f->kind == QR_FACET_HISTOGRAM && !arg)
            return set_interval(r, f, 0);
        if (arg) {
            char *end;
            double x = strtod(arg, &end);
            if (end == arg || *end)
                return http_error(r, QR_EINVAL, "bad facet argument \"%.20s\"", arg);
            if ((f->kind == QR_FACET_HISTOGRAM ? set_interval(r, f, x) : set_size(r, f, x)) != QR_OK)
                return r->err.code;
        }
    }
    return QR_OK;
}

/* ---- JSON ---- */

static int facet_json(HttpReq *r, HttpFacets *fs, const char *name, const cJSON *it)
{
    static const char *const KEYS[] = {"type", "field", "size", "interval", "name", "percents",
                                       "ranges", NULL};
    if (!cJSON_IsObject(it))
        return http_error(r, QR_EINVAL, "a facet is an object {\"type\": ..., \"field\": ...}");
    const cJSON *k;
    cJSON_ArrayForEach(k, it)
    {
        int i = 0;
        while (KEYS[i] && strcmp(KEYS[i], k->string))
            i++;
        if (!KEYS[i])
            return http_error(r, QR_EINVAL, "unknown facet key \"%.40s\"", k->string);
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(it, "type");
    const cJSON *field = cJSON_GetObjectItemCaseSensitive(it, "field");
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(it, "size");
    const cJSON *iv = cJSON_GetObjectItemCaseSensitive(it, "interval");
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
    const cJSON *pc = cJSON_GetObjectItemCaseSensitive(it, "percents");
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(it, "ranges");
    if ((type && !cJSON_IsString(type)) || !cJSON_IsString(field) ||
        (size && !cJSON_IsNumber(size)) || (iv && !cJSON_IsNumber(iv)) ||
        (nm && !cJSON_IsString(nm)) || (pc && !cJSON_IsArray(pc)) || (rs && !cJSON_IsArray(rs)))
        return http_error(r, QR_EINVAL, "a facet is {\"type\": \"terms\"|\"histogram\"|\"stats\"|"
                                        "\"percentiles\"|\"cardinality\"|\"range\", \"field\": "
                                        "NAME, \"size\": N, \"interval\": X, \"percents\": [...], "
                                        "\"ranges\": [...]}");
    QrFacetReq *f = facet_new(r, fs, name ? name : nm ? nm->valuestring : NULL,
                              type ? type->valuestring : "terms", field->valuestring);
    if (!f)
        return r->err.code;
    if (size && set_size(r, f, size->valuedouble) != QR_OK)
        return r->err.code;
    if (f->kind == QR_FACET_HISTOGRAM && set_interval(r, f, iv ? iv->valuedouble : 0) != QR_OK)
        return r->err.code;
    if ((pc && f->kind != QR_FACET_PERCENTILES) || (rs && f->kind != QR_FACET_RANGE) ||
        (iv && f->kind != QR_FACET_HISTOGRAM))
        return http_error(r, QR_EINVAL, "\"%s\" does not apply to a %s facet",
                          pc && f->kind != QR_FACET_PERCENTILES ? "percents"
                          : rs && f->kind != QR_FACET_RANGE     ? "ranges"
                                                                : "interval",
                          KINDS[f->kind]);
    if (f->kind == QR_FACET_PERCENTILES) {
        int n = pc ? cJSON_GetArraySize(pc) : 7;
        double *p = pct_room(r, fs, n);
        if (!p)
            return r->err.code;
        if (!pc)
            memcpy(p, DEFAULT_PCTS, sizeof DEFAULT_PCTS);
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, pc)
        {
            if (!cJSON_IsNumber(e) || pct_check(r, e->valuedouble) != QR_OK)
                return http_error(r, QR_EINVAL, "a percent must be a number from 0 to 100");
            p[i++] = e->valuedouble;
        }
    }
    if (f->kind == QR_FACET_RANGE) {
        if (!rs)
            return http_error(r, QR_EINVAL, "range facet on \"%.60s\" needs \"ranges\": "
                                            "[{\"to\": X}, {\"from\": X, \"to\": Y}, ...]",
                              f->field);
        QrFacetRange *rg = range_room(r, fs, cJSON_GetArraySize(rs));
        if (!rg)
            return r->err.code;
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, rs)
        {
            const cJSON *from = cJSON_GetObjectItemCaseSensitive(e, "from");
            const cJSON *to = cJSON_GetObjectItemCaseSensitive(e, "to");
            const cJSON *key = cJSON_GetObjectItemCaseSensitive(e, "key");
            if (!cJSON_IsObject(e) || (key && !cJSON_IsString(key)) ||
                cJSON_GetArraySize(e) != !!from + !!to + !!key)
                return http_error(r, QR_EINVAL, "a range is {\"from\": X, \"to\": Y, \"key\": "
                                                "NAME}, each optional");
            QrFacetRange *g = &rg[i++];
            if (range_end_json(r, from, &g->has_from, &g->from) != QR_OK ||
                range_end_json(r, to, &g->has_to, &g->to) != QR_OK)
                return r->err.code;
            if (key && !(g->key = qr_strdup(key->valuestring)))
                return http_error(r, QR_ENOMEM, "out of memory");
        }
    }
    return QR_OK;
}

int http_facets_json(HttpReq *r, HttpFacets *fs, const cJSON *v)
{
    if (cJSON_IsString(v))
        return http_facets_text(r, fs, v->valuestring);
    if (!cJSON_IsArray(v) && !cJSON_IsObject(v))
        return http_error(r, QR_EINVAL, "facets must be a list or an object of facet specs");
    const cJSON *it;
    cJSON_ArrayForEach(it, v)
    {
        if (facet_json(r, fs, cJSON_IsObject(v) ? it->string : NULL, it) != QR_OK)
            return r->err.code;
    }
    return QR_OK;
}

/* ---- the answer ---- */

void http_facets_write(QrBuf *b, const HttpFacets *fs, const QrSearchRes *res)
{
    qr_buf_append(b, ",\"facets\":{", 11);
    for (int i = 0; i < res->n_facets; i++) {
        const QrFacetRes *f = &res->facets[i];
        if (i)
            qr_buf_putc(b, ',');
        jw_key(b, fs->names[i]);
        qr_buf_printf(b, "{\"type\":\"%s\",", KINDS[f->kind]);
        jw_key(b, "field");
        jw_cstr(b, f->field);
        qr_buf_printf(b, ",\"missing\":%llu", (unsigned long long)f->missing);
        switch (f->kind) {
        case QR_FACET_STATS:
            qr_buf_printf(b, ",\"count\":%llu", (unsigned long long)f->count);
            if (f->count)
                qr_buf_printf(b, ",\"min\":%.17g,\"max\":%.17g,\"sum\":%.17g,\"avg\":%.17g", f->min,
                              f->max, f->sum, f->avg);
            else
                qr_buf_printf(b, ",\"min\":null,\"max\":null,\"sum\":null,\"avg\":null");
            break;
        case QR_FACET_PERCENTILES:
            qr_buf_printf(b, ",\"count\":%llu,\"values\":%s", (unsigned long long)f->count,
                          f->values_json ? f->values_json : "{}");
            break;
        case QR_FACET_CARDINALITY:
            qr_buf_printf(b, ",\"value\":%llu", (unsigned long long)f->count);
            break;
        case QR_FACET_TERMS:
        case QR_FACET_HISTOGRAM:
        case QR_FACET_RANGE:
            if (f->kind == QR_FACET_TERMS)
                qr_buf_printf(b, ",\"other\":%llu", (unsigned long long)f->other);
            qr_buf_append(b, ",\"buckets\":[", 12);
            for (int k = 0; k < f->n_buckets; k++) {
                const QrFacetBucket *bk = &f->buckets[k];
                qr_buf_printf(b, "%s{\"key\":%s", k ? "," : "", bk->key_json ? bk->key_json : "null");
                if (bk->from_json)
                    qr_buf_printf(b, ",\"from\":%s", bk->from_json);
                if (bk->to_json)
                    qr_buf_printf(b, ",\"to\":%s", bk->to_json);
                qr_buf_printf(b, ",\"count\":%llu}", (unsigned long long)bk->count);
            }
            qr_buf_putc(b, ']');
            break;
        }
        qr_buf_putc(b, '}');
    }
    qr_buf_putc(b, '}');
}
