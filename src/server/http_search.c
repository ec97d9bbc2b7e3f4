/*
 * http_search.c — ranked search over HTTP (GET with query parameters, POST
 * with a JSON body) and the SQL endpoint's placeholder.
 *
 * Layer: server/.  Calls query/quarry.h, the base kit and cJSON.
 *
 * Both forms are parsed through one parameter table (SEARCH_PARAMS) into a
 * SearchArgs, so they accept the same names and report the same errors.
 * Structured parts: filter (SQL WHERE text; a syntax error is 400 with the
 * 1-based position in the filter text), sort ("published:desc,_score" or a
 * JSON list), search_after (the "sort" array of a previous page's last hit),
 * facets (http_facets.c: terms / histogram / stats / percentiles /
 * cardinality / range over every match), access_path (tests and plan
 * comparisons).  Unknown parameters are refused: nothing is
 * silently ignored.
 */
#include "server/http_int.h"
#include "store/mem.h"
#include "store/util.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum ParamKind {
    P_Q,
    P_FIELDS,
    P_LIMIT,
    P_OFFSET,
    P_HIGHLIGHT,
    P_COUNT_ONLY,
    P_EXPLAIN,
    P_OPERATOR,
    P_DOC,
    P_TIMEOUT,
    P_TOTAL,
    P_FILTER,
    P_RANK,
    P_SORT,
    P_AFTER,
    P_FACETS,
    P_ACCESS,
    P_TYPO,
    P_PREFIX,
    P_SCORING,
    P_SYNONYMS,
    P_HL_FIELDS,
    P_FRAG_SIZE,
    P_FRAGMENTS,
    P_UNSUPPORTED,
} ParamKind;

typedef struct SearchParam {
    const char *name;
    ParamKind kind;
    const char *why; /* P_UNSUPPORTED: what is missing */
} SearchParam;

static const SearchParam SEARCH_PARAMS[] = {
    {"q", P_Q, NULL},
    {"fields", P_FIELDS, NULL},
    {"limit", P_LIMIT, NULL},
    {"offset", P_OFFSET, NULL},
    {"highlight", P_HIGHLIGHT, NULL},
    {"count_only", P_COUNT_ONLY, NULL},
    {"explain", P_EXPLAIN, NULL},
    {"default_operator", P_OPERATOR, NULL},
    {"doc", P_DOC, NULL},
    {"timeout_ms", P_TIMEOUT, NULL},
    {"total", P_TOTAL, NULL},
    {"filter", P_FILTER, NULL},
    {"rank", P_RANK, NULL},
    {"sort", P_SORT, NULL},
    {"search_after", P_AFTER, NULL},
    {"facets", P_FACETS, NULL},
    {"access_path", P_ACCESS, NULL},
    {"typo", P_TYPO, NULL},
    {"prefix", P_PREFIX, NULL},
    {"scoring", P_SCORING, NULL},
    {"synonyms", P_SYNONYMS, NULL},
    {"highlight_fields", P_HL_FIELDS, NULL},
    {"fragment_size", P_FRAG_SIZE, NULL},
    {"fragments", P_FRAGMENTS, NULL},
};
#define N_PARAMS (int)(sizeof SEARCH_PARAMS / sizeof SEARCH_PARAMS[0])

#define MAX_DOC_FIELDS 64

typedef struct SearchArgs {
    const char *q;          /* borrows (query argument or JSON body) */
    size_t q_len;
    char *fields;           /* owns: "title^2,body" or NULL */
    int limit, offset;
    bool highlight;
    char *hl_pre, *hl_post; /* owns, NULL = engine default */
    bool count_only, explain, default_and;
    bool total;             /* count every match (false: ranked hits only, "total": null) */
    bool doc;               /* include stored documents */
    int n_doc_fields;       /* 0 = the whole document */
    char *doc_fields[MAX_DOC_FIELDS]; /* owns */
    uint64_t timeout_ms;    /* 0 = the server's */
    char *filter;           /* owns: SQL WHERE text or NULL */
    char *rank;             /* owns: rank expression or NULL */
    char *sort;             /* owns: "f:desc,_score" or NULL */
    char *after;            /* owns: cursor JSON array text or NULL */
    int access_path;        /* qr_access_path_parse value */
    int typo;               /* QrTypo: the table's unless the request says */
    bool prefix;            /* as you type: the last word also completes (default on) */
    int scoring;            /* QrScoring: the table's unless the request says */
    bool synonyms;          /* the table's synonyms apply (default on) */
    char *hl_fields;        /* owns: "title,body" or NULL */
    int fragment_size, fragments; /* words per fragment, fragments per field; 0 = default */
    HttpFacets facets;      /* owns */
} SearchArgs;

static void args_free(SearchArgs *a)
{
    qr_free(a->fields);
    qr_free(a->hl_pre);
    qr_free(a->hl_post);
    for (int i = 0; i < a->n_doc_fields; i++)
        qr_free(a->doc_fields[i]);
    qr_free(a->filter);
    qr_free(a->rank);
    qr_free(a->sort);
    qr_free(a->after);
    qr_free(a->hl_fields);
    http_facets_free(&a->facets);
}

static int set_owned(HttpReq *r, char **dst, const char *v)
{
    qr_free(*dst);
    if (!(*dst = qr_strdup(v)))
        return http_error(r, QR_ENOMEM, "out of memory");
    return QR_OK;
}

/* JSON sort: "f:desc,g" or ["f:desc", {"field": "g", "order": "asc"}]. */
static int set_sort_json(HttpReq *r, SearchArgs *a, const cJSON *v)
{
    if (cJSON_IsString(v))
        return set_owned(r, &a->sort, v->valuestring);
    if (!cJSON_IsArray(v))
        return http_error(r, QR_EINVAL, "sort must be a string or a list");
    QrBuf b;
    qr_buf_init(&b);
    const cJSON *it;
    cJSON_ArrayForEach(it, v)
    {
        if (b.len)
            qr_buf_putc(&b, ',');
        if (cJSON_IsString(it)) {
            qr_buf_printf(&b, "%s", it->valuestring);
            continue;
        }
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(it, "field");
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(it, "order");
        if (!cJSON_IsString(f) || (o && !cJSON_IsString(o)) || strchr(f->valuestring, ',')) {
            qr_buf_free(&b);
            return http_error(r, QR_EINVAL, "a sort key is \"field:asc|desc\" or "
                                            "{\"field\": NAME, \"order\": \"asc\"|\"desc\"}");
        }
        qr_buf_printf(&b, "%s%s%s", f->valuestring, o ? ":" : "", o ? o->valuestring : "");
    }
    qr_buf_putc(&b, 0);
    int rc = qr_buf_ok(&b) ? set_owned(r, &a->sort, (const char *)b.data)
                           : http_error(r, QR_ENOMEM, "out of memory");
    qr_buf_free(&b);
    return rc;
}

static int set_access(HttpReq *r, SearchArgs *a, const char *v)
{
    a->access_path = qr_access_path_parse(v);
    if (a->access_path < 0)
        return http_error(r, QR_EINVAL, "access_path must be auto, scan, check or btree");
    return QR_OK;
}

static int set_typo(HttpReq *r, SearchArgs *a, const char *v)
{
    int t = schema_typo_parse(v);
    if (t < 0 || t == QR_TYPO_TABLE)
        return http_error(r, QR_EINVAL, "typo must be off, auto, 1 or 2, not \"%.20s\"", v);
    a->typo = t;
    return QR_OK;
}

static int set_scoring(HttpReq *r, SearchArgs *a, const char *v)
{
    if (!strcmp(v, "bm25f"))
        a->scoring = QR_SCORING_BM25F;
    else if (!strcmp(v, "sum"))
        a->scoring = QR_SCORING_SUM;
    else
        return http_error(r, QR_EINVAL, "scoring must be bm25f or sum, not \"%.20s\"", v);
    return QR_OK;
}

/* fragment_size (words, 1..1000) and fragments (1..16). */
static int set_fragments(HttpReq *r, const SearchParam *p, double v, bool is_num, SearchArgs *a)
{
    int max = p->kind == P_FRAG_SIZE ? 1000 : 16;
    if (!is_num || !isfinite(v) || v != floor(v) || v < 1 || v > max)
        return http_error(r, QR_EINVAL, "%s must be a whole number from 1 to %d", p->name, max);
    if (p->kind == P_FRAG_SIZE)
        a->fragment_size = (int)v;
    else
        a->fragments = (int)v;
    return QR_OK;
}

static const SearchParam *param_find(const char *name)
{
    for (int i = 0; i < N_PARAMS; i++)
        if (!strcmp(SEARCH_PARAMS[i].name, name))
            return &SEARCH_PARAMS[i];
    return NULL;
}

static int unknown_param(HttpReq *r, const char *name)
{
    http_error(r, QR_EINVAL, "unknown search parameter \"%.60s\"", name);
    char list[400] = "";
    for (int i = 0; i < N_PARAMS; i++) {
        if (SEARCH_PARAMS[i].kind == P_UNSUPPORTED)
            continue;
        if (list[0])
            strcat(list, ", ");
        strcat(list, SEARCH_PARAMS[i].name);
    }
    http_error_hint(r, "search parameters: %s", list);
    return QR_EINVAL;
}

static int unsupported(HttpReq *r, const SearchParam *p)
{
    http_error(r, QR_EUNSUPPORTED, "search parameter \"%s\" is not supported yet", p->name);
    http_error_detail(r, "%s", p->why);
    http_error_hint(r, "remove \"%s\" from the request; it is part of the API and arrives with "
                       "the column and SQL work",
                    p->name);
    return QR_EUNSUPPORTED;
}

static bool text_bool(const char *v, bool *out)
{
    if (!v[0] || !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes"))
        *out = true;
    else if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no"))
        *out = false;
    else
        return false;
    return true;
}

static int bad_int(HttpReq *r, const char *name, long long max)
{
    http_error(r, QR_EINVAL, "%s must be a whole number from 0 to %lld", name, max);
    return QR_EINVAL;
}

static int set_int(HttpReq *r, const SearchParam *p, double v, bool is_num, SearchArgs *a)
{
    /* limit / offset: max_result_window (up to 10^9) is checked on their sum */
    long long max = p->kind == P_TIMEOUT ? 86400000LL : 1000000000LL;
    if (!is_num || !isfinite(v) || v != floor(v) || v < 0 || v > (double)max)
        return bad_int(r, p->name, max);
    if (p->kind == P_LIMIT)
        a->limit = (int)v;
    else if (p->kind == P_OFFSET)
        a->offset = (int)v;
    else
        a->timeout_ms = (uint64_t)v;
    return QR_OK;
}

static int set_operator(HttpReq *r, const char *v, SearchArgs *a)
{
    if (!strcasecmp(v, "and"))
        a->default_and = true;
    else if (!strcasecmp(v, "or"))
        a->default_and = false;
    else
        return http_error(r, QR_EINVAL, "default_operator must be \"and\" or \"or\", not \"%.20s\"",
                          v);
    return QR_OK;
}

static int add_doc_field(HttpReq *r, SearchArgs *a, const char *name, size_t n)
{
    while (n && *name == ' ')
        name++, n--;
    while (n && name[n - 1] == ' ')
        n--;
    if (!n)
        return QR_OK;
    if (a->n_doc_fields == MAX_DOC_FIELDS)
        return http_error(r, QR_ELIMIT, "doc selects too many fields (at most %d)",
                          MAX_DOC_FIELDS);
    if (!(a->doc_fields[a->n_doc_fields] = qr_strndup(name, n)))
        return http_error(r, QR_ENOMEM, "out of memory");
    a->n_doc_fields++;
    return QR_OK;
}

/* One GET query parameter. */
static int set_text(HttpReq *r, const SearchParam *p, const char *v, SearchArgs *a)
{
    bool b;
    switch (p->kind) {
    case P_Q:
        a->q = v;
        a->q_len = strlen(v);
        return QR_OK;
    case P_FIELDS:
        qr_free(a->fields);
        if (!(a->fields = qr_strdup(v)))
            return http_error(r, QR_ENOMEM, "out of memory");
        return QR_OK;
    case P_LIMIT:
    case P_OFFSET:
    case P_TIMEOUT: {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        return set_int(r, p, d, !errno && *v && !*end && v[0] != ' ', a);
    }
    case P_HIGHLIGHT:
    case P_COUNT_ONLY:
    case P_EXPLAIN:
    case P_TOTAL:
        if (!text_bool(v, &b))
            return http_error(r, QR_EINVAL, "%s must be true or false, not \"%.20s\"", p->name, v);
        if (p->kind == P_HIGHLIGHT)
            a->highlight = b;
        else if (p->kind == P_COUNT_ONLY)
            a->count_only = b;
        else if (p->kind == P_TOTAL)
            a->total = b;
        else
            a->explain = b;
        return QR_OK;
    case P_OPERATOR:
        return set_operator(r, v, a);
    case P_DOC:
        if (text_bool(v, &b)) {
            a->doc = b;
            return QR_OK;
        }
        a->doc = true;
        for (const char *s = v; *s;) {
            const char *c = strchr(s, ',');
            size_t n = c ? (size_t)(c - s) : strlen(s);
            if (add_doc_field(r, a, s, n) != QR_OK)
                return r->err.code;
            s += n + (c ? 1 : 0);
        }
        return QR_OK;
    case P_FILTER: return set_owned(r, &a->filter, v);
    case P_RANK: return set_owned(r, &a->rank, v);
    case P_SORT: return set_owned(r, &a->sort, v);
    case P_AFTER: return set_owned(r, &a->after, v);
    case P_FACETS: return http_facets_text(r, &a->facets, v);
    case P_ACCESS: return set_access(r, a, v);
    case P_TYPO: return set_typo(r, a, v);
    case P_SCORING: return set_scoring(r, a, v);
    case P_PREFIX:
    case P_SYNONYMS:
        if (!text_bool(v, &b))
            return http_error(r, QR_EINVAL, "%s must be true or false, not \"%.20s\"", p->name, v);
        if (p->kind == P_PREFIX)
            a->prefix = b;
        else
            a->synonyms = b;
        return QR_OK;
    case P_HL_FIELDS: return set_owned(r, &a->hl_fields, v);
    case P_FRAG_SIZE:
    case P_FRAGMENTS: {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        return set_fragments(r, p, d, !errno && *v && !*end && v[0] != ' ', a);
    }
    case P_UNSUPPORTED:
        return unsupported(r, p);
    }
    return QR_OK;
}

/* "fields" in a JSON body: "title^2,body", ["title^2","body"],
 * [{"field":"title","weight":2}], or {"title":2,"body":1}. */
static int set_fields_json(HttpReq *r, const cJSON *v, SearchArgs *a)
{
    if (cJSON_IsString(v))
        return set_text(r, param_find("fields"), v->valuestring, a);
    QrBuf b;
    qr_buf_init(&b);
    const cJSON *it;
    int n = 0;
    bool ok = cJSON_IsArray(v) || cJSON_IsObject(v);
    cJSON_ArrayForEach(it, v)
    {
        if (!ok)
            break;
        const char *name = NULL;
        double w = -1;
        if (cJSON_IsObject(v)) {
            name = it->string;
            if (!cJSON_IsNumber(it))
                ok = false;
            w = it->valuedouble;
        } else if (cJSON_IsString(it)) {
            name = it->valuestring;
        } else if (cJSON_IsObject(it)) {
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(it, "field");
            const cJSON *wt = cJSON_GetObjectItemCaseSensitive(it, "weight");
            if (!cJSON_IsString(f) || (wt && !cJSON_IsNumber(wt)))
                ok = false;
            else {
                name = f->valuestring;
                if (wt)
                    w = wt->valuedouble;
            }
        } else {
            ok = false;
        }
        if (!ok)
            break;
        if (cJSON_IsObject(v) || w >= 0) {
            if (!(w > 0) || w > 1e6) {
                qr_buf_free(&b);
                return http_error(r, QR_EINVAL, "weight of field \"%.60s\" must be a number "
                                                "above 0 and at most 1000000",
                                  name);
            }
            qr_buf_printf(&b, "%s%s^%g", n++ ? "," : "", name, w);
        } else {
            qr_buf_printf(&b, "%s%s", n++ ? "," : "", name);
        }
    }
    if (!ok) {
        qr_buf_free(&b);
        http_error(r, QR_EINVAL, "fields must be a string, a list or an object of weights");
        http_error_hint(r, "e.g. \"title^2,body\", [\"title^2\",\"body\"], "
                           "[{\"field\":\"title\",\"weight\":2}] or {\"title\":2,\"body\":1}");
        return QR_EINVAL;
    }
    if (!qr_buf_ok(&b)) {
        qr_buf_free(&b);
        return http_error(r, QR_ENOMEM, "out of memory");
    }
    qr_free(a->fields);
    size_t len;
    a->fields = b.len ? (char *)qr_buf_steal(&b, &len) : NULL;
    qr_buf_free(&b);
    return QR_OK;
}

/* One key of a JSON body. */
static int set_json(HttpReq *r, const SearchParam *p, const cJSON *v, SearchArgs *a)
{
    switch (p->kind) {
    case P_Q:
        if (!cJSON_IsString(v))
            return http_error(r, QR_EINVAL, "q must be a string");
        a->q = v->valuestring;
        a->q_len = strlen(v->valuestring);
        return QR_OK;
    case P_FIELDS:
        return set_fields_json(r, v, a);
    case P_LIMIT:
    case P_OFFSET:
    case P_TIMEOUT:
        return set_int(r, p, cJSON_IsNumber(v) ? v->valuedouble : 0, cJSON_IsNumber(v), a);
    case P_HIGHLIGHT:
        if (cJSON_IsBool(v)) {
            a->highlight = cJSON_IsTrue(v);
            return QR_OK;
        }
        if (cJSON_IsObject(v)) {
            const cJSON *pre = cJSON_GetObjectItemCaseSensitive(v, "pre");
            const cJSON *post = cJSON_GetObjectItemCaseSensitive(v, "post");
            if (cJSON_GetArraySize(v) != (pre != NULL) + (post != NULL) ||
                (pre && !cJSON_IsString(pre)) || (post && !cJSON_IsString(post)) ||
                (pre && strlen(pre->valuestring) > 64) || (post && strlen(post->valuestring) > 64))
                return http_error(r, QR_EINVAL, "highlight must be true, false or "
                                                "{\"pre\": \"<b>\", \"post\": \"</b>\"} "
                                                "(markers of at most 64 bytes)");
            a->highlight = true;
            if ((pre && !(a->hl_pre = qr_strdup(pre->valuestring))) ||
                (post && !(a->hl_post = qr_strdup(post->valuestring))))
                return http_error(r, QR_ENOMEM, "out of memory");
            return QR_OK;
        }
        return http_error(r, QR_EINVAL, "highlight must be true, false or {\"pre\",\"post\"}");
    case P_COUNT_ONLY:
    case P_EXPLAIN:
    case P_TOTAL:
        if (!cJSON_IsBool(v))
            return http_error(r, QR_EINVAL, "%s must be true or false", p->name);
        if (p->kind == P_COUNT_ONLY)
            a->count_only = cJSON_IsTrue(v);
        else if (p->kind == P_TOTAL)
            a->total = cJSON_IsTrue(v);
        else
            a->explain = cJSON_IsTrue(v);
        return QR_OK;
    case P_OPERATOR:
        if (!cJSON_IsString(v))
            return http_error(r, QR_EINVAL, "default_operator must be \"and\" or \"or\"");
        return set_operator(r, v->valuestring, a);
    case P_DOC:
        if (cJSON_IsBool(v)) {
            a->doc = cJSON_IsTrue(v);
            return QR_OK;
        }
        if (cJSON_IsArray(v)) {
            const cJSON *it;
            a->doc = true;
            cJSON_ArrayForEach(it, v)
            {
                if (!cJSON_IsString(it))
                    return http_error(r, QR_EINVAL, "doc must be true, false or a list of "
                                                    "field names");
                if (add_doc_field(r, a, it->valuestring, strlen(it->valuestring)) != QR_OK)
                    return r->err.code;
            }
            return QR_OK;
        }
        return http_error(r, QR_EINVAL, "doc must be true, false or a list of field names");
    case P_FILTER:
        if (!cJSON_IsString(v))
            return http_error(r, QR_EINVAL, "filter must be a string (SQL WHERE syntax)");
        return set_owned(r, &a->filter, v->valuestring);
    case P_RANK:
        if (!cJSON_IsString(v))
            return http_error(r, QR_EINVAL, "rank must be a string like \"score * log(1 + "
                                             "views)\"");
        return set_owned(r, &a->rank, v->valuestring);
    case P_SORT: return set_sort_json(r, a, v);
    case P_AFTER: {
        if (!cJSON_IsArray(v))
            return http_error(r, QR_EINVAL, "search_after must be the \"sort\" array of a hit");
        char *t = cJSON_PrintUnformatted(v);
        int rc = t ? set_owned(r, &a->after, t) : http_error(r, QR_ENOMEM, "out of memory");
        cJSON_free(t);
        return rc;
    }
    case P_FACETS: return http_facets_json(r, &a->facets, v);
    case P_ACCESS:
        if (!cJSON_IsString(v))
            return http_error(r, QR_EINVAL, "access_path must be a string");
        return set_access(r, a, v->valuestring);
    case P_TYPO:
        if (cJSON_IsBool(v)) {
            a->typo = cJSON_IsTrue(v) ? QR_TYPO_AUTO : QR_TYPO_OFF;
            return QR_OK;
        }
        if (cJSON_IsNumber(v) && (v->valuedouble == 0 || v->valuedouble == 1 || v->valuedouble == 2)) {
            a->typo = (int)v->valuedouble;
            return QR_OK;
        }
        if (!cJSON_IsString(v))
            return http_error(r, QR_EINVAL, "typo must be \"off\", \"auto\", 1 or 2");
        return set_typo(r, a, v->valuestring);
    case P_SCORING:
        if (!cJSON_IsString(v))
            return http_error(r, QR_EINVAL, "scoring must be \"bm25f\" or \"sum\"");
        return set_scoring(r, a, v->valuestring);
    case P_PREFIX:
    case P_SYNONYMS:
        if (!cJSON_IsBool(v))
            return http_error(r, QR_EINVAL, "%s must be true or false", p->name);
        if (p->kind == P_PREFIX)
            a->prefix = cJSON_IsTrue(v);
        else
            a->synonyms = cJSON_IsTrue(v);
        return QR_OK;
    case P_HL_FIELDS: {
        if (cJSON_IsString(v))
            return set_owned(r, &a->hl_fields, v->valuestring);
        QrBuf b;
        qr_buf_init(&b);
        const cJSON *it;
        bool ok = cJSON_IsArray(v);
        cJSON_ArrayForEach(it, v)
        {
            if (!(ok = ok && cJSON_IsString(it) && !strchr(it->valuestring, ',')))
                break;
            qr_buf_printf(&b, "%s%s", b.len ? "," : "", it->valuestring);
        }
        qr_buf_putc(&b, 0);
        int rc = !ok ? http_error(r, QR_EINVAL, "highlight_fields must be a list of field names")
                 : qr_buf_ok(&b) ? set_owned(r, &a->hl_fields, (const char *)b.data)
                                 : http_error(r, QR_ENOMEM, "out of memory");
        qr_buf_free(&b);
        return rc;
    }
    case P_FRAG_SIZE:
    case P_FRAGMENTS:
        return set_fragments(r, p, cJSON_IsNumber(v) ? v->valuedouble : 0, cJSON_IsNumber(v), a);
    case P_UNSUPPORTED:
        return unsupported(r, p);
    }
    return QR_OK;
}

static void args_init(SearchArgs *a)
{
    memset(a, 0, sizeof *a);
    a->limit = 10;
    a->doc = true;
    a->total = true;
    /* a search box's defaults: the table's typo tolerance, the last word
     * completed as it is typed, the table's synonyms */
    a->typo = QR_TYPO_TABLE;
    a->prefix = true;
    a->synonyms = true;
}

/* Hit "doc": the stored document, or only the selected fields of it. */
static void write_doc(QrBuf *b, const SearchArgs *a, const char *doc_json)
{
    if (a->n_doc_fields == 0) {
        qr_buf_append(b, doc_json, strlen(doc_json));
        return;
    }
    cJSON *d = cJSON_Parse(doc_json);
    qr_buf_putc(b, '{');
    int n = 0;
    for (int i = 0; i < a->n_doc_fields && d; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(d, a->doc_fields[i]);
        if (!v)
            continue;
        if (n++)
            qr_buf_putc(b, ',');
        jw_key(b, a->doc_fields[i]);
        jw_cjson(b, v);
    }
    qr_buf_putc(b, '}');
    cJSON_Delete(d);
}

/* Hit "highlights": {field: [fragment, ...]} (highlight_fields). */
static void write_highlights(QrBuf *b, const QrHit *hit)
{
    qr_buf_append(b, ",\"highlights\":{", 15);
    for (int i = 0; i < hit->n_highlights; i++) {
        const QrHighlight *h = &hit->highlights[i];
        if (i)
            qr_buf_putc(b, ',');
        jw_key(b, h->field);
        qr_buf_putc(b, '[');
        for (int k = 0; k < h->n; k++) {
            if (k)
                qr_buf_putc(b, ',');
            jw_cstr(b, h->fragments[k]);
        }
        qr_buf_putc(b, ']');
    }
    qr_buf_putc(b, '}');
}

/* Run the search in `a` on {t} and answer. */
static void run_search(HttpReq *r, SearchArgs *a)
{
    HttpServer *s = r->srv;
    if (!a->q && (a->filter || a->sort)) {
        a->q = ""; /* every document matching the filter */
        a->q_len = 0;
    }
    if (!a->q) {
        http_error(r, QR_EINVAL, "search parameter \"q\" is required");
        http_error_hint(r, "e.g. ?q=terminal+emulator (docs/query-language.md)");
        return;
    }
    if (a->count_only && !a->total) {
        http_error(r, QR_EINVAL, "count_only needs the total: drop total=false");
        return;
    }
    if ((int64_t)a->offset + a->limit > s->cfg.max_result_window) {
        http_error(r, QR_ELIMIT, "result window offset + limit = %lld is larger than %d",
                   (long long)a->offset + a->limit, s->cfg.max_result_window);
        http_error_hint(r, "narrow the query, or raise max_result_window in the server config");
        return;
    }
    QrTable *t = http_table_get(r);
    if (!t)
        return;
    QrSearchReq req;
    qr_search_req_init(&req);
    req.q = a->q;
    req.q_len = a->q_len;
    req.fields = a->fields;
    req.default_and = a->default_and;
    req.limit = a->limit;
    req.offset = a->offset;
    req.count_only = a->count_only;
    req.skip_total = !a->total;
    req.snippets = a->highlight && !a->count_only;
    req.fetch_docs = a->doc && !a->count_only;
    if (a->hl_pre)
        req.hl_pre = a->hl_pre;
    if (a->hl_post)
        req.hl_post = a->hl_post;
    req.timeout_ms = s->cfg.query_timeout_ms;
    if (a->timeout_ms && (!req.timeout_ms || a->timeout_ms < req.timeout_ms))
        req.timeout_ms = a->timeout_ms;
    req.mem_cap = (size_t)s->cfg.query_mem_bytes;
    req.filter = a->filter;
    req.rank = a->rank;
    req.sort = a->sort;
    req.search_after = a->after;
    req.access_path = a->access_path;
    req.facets = a->facets.reqs;
    req.n_facets = a->facets.n;
    req.typo = a->typo;
    req.prefix_last = a->prefix;
    req.scoring = a->scoring;
    req.no_synonyms = !a->synonyms;
    req.hl_fields = a->count_only ? NULL : a->hl_fields;
    req.fragment_words = a->fragment_size;
    req.fragments = a->fragments;
    QrError e;
    qr_error_clear(&e);
    QrSearchRes *res = NULL;
    uint64_t t0 = qr_now_ns();
    int rc = qr_search(t, &req, &res, &e);
    uint64_t ns = qr_now_ns() - t0;
    HttpQueryRec rec = {.table = r->t, .q = a->q, .q_len = a->q_len, .fields = a->fields,
                        .default_and = a->default_and, .took_ms = (double)ns / 1e6,
                        .filter = a->filter, .sort = a->sort};
    if (rc != QR_OK) {
        if (e.code == QR_ENOTFOUND)
            e.code = QR_EINVAL; /* an unknown field is a bad parameter, not a missing page */
        if (e.code == QR_ETIMEOUT)
            qr_error_hint(&e, "the limit is %llu ms (query_timeout_ms / timeout_ms)",
                          (unsigned long long)req.timeout_ms);
        http_error_from(r, &e);
        rec.status = http_status_of(e.code);
        http_history_add(s->history, &rec);
        http_metrics_table(s, r->t, 1, ns, 0);
        return;
    }
    rec.total = res->total;
    rec.status = 200;
    rec.stats = &res->stats; /* the plan, for the history */
    rec.rows = (uint64_t)res->n_hits;
    http_history_add(s->history, &rec);
    http_metrics_table(s, r->t, 1, ns, 0);
    QrBuf b;
    qr_buf_init(&b);
    if (a->total)
        qr_buf_printf(&b, "{\"total\":%llu,\"hits\":[", (unsigned long long)res->total);
    else
        qr_buf_append(&b, "{\"total\":null,\"hits\":[", 22);
    for (int h = 0; h < res->n_hits; h++) {
        const QrHit *hit = &res->hits[h];
        if (h)
            qr_buf_putc(&b, ',');
        qr_buf_append(&b, "{\"id\":", 6);
        if (hit->id_json)
            qr_buf_append(&b, hit->id_json, strlen(hit->id_json));
        else
            qr_buf_append(&b, "null", 4);
        qr_buf_printf(&b, ",\"score\":%.6g", isfinite(hit->score) ? (double)hit->score : 0.0);
        if (req.snippets && hit->snippet) {
            qr_buf_append(&b, ",\"highlight\":", 13);
            jw_cstr(&b, hit->snippet);
        }
        if (hit->n_highlights)
            write_highlights(&b, hit);
        if (req.fetch_docs && hit->doc_json) {
            qr_buf_append(&b, ",\"doc\":", 7);
            write_doc(&b, a, hit->doc_json);
        }
        if (hit->sort_json) {
            qr_buf_append(&b, ",\"sort\":", 8);
            qr_buf_append(&b, hit->sort_json, strlen(hit->sort_json));
        }
        qr_buf_putc(&b, '}');
    }
    qr_buf_printf(&b, "],\"took_ms\":%.3f", res->took_ms);
    if (res->warning) { /* scored with some nodes' statistics missing (--peer-unreachable warn) */
        qr_buf_append(&b, ",\"warnings\":[", 13);
        jw_cstr(&b, res->warning);
        qr_buf_putc(&b, ']');
    }
    if (res->n_facets)
        http_facets_write(&b, &a->facets, res);
    if (a->explain) {
        qr_buf_append(&b, ",\"explain\":{", 12);
        jw_key(&b, "strategy");
        jw_cstr(&b, res->stats.strategy ? res->stats.strategy : "");
        qr_buf_printf(&b,
                      ",\"segments\":%u,\"postings_blocks_decoded\":%llu,"
                      "\"postings_blocks_skipped\":%llu,\"docs_scored\":%llu,"
                      "\"default_operator\":\"%s\",\"timeout_ms\":%llu,\"fields\":",
                      res->stats.segments,
                      (unsigned long long)res->stats.postings_blocks_decoded,
                      (unsigned long long)res->stats.postings_blocks_skipped,
                      (unsigned long long)res->stats.docs_scored, a->default_and ? "and" : "or",
                      (unsigned long long)req.timeout_ms);
        if (a->fields)
            jw_cstr(&b, a->fields);
        else
            qr_buf_append(&b, "null", 4);
        if (a->filter) {
            const QrSearchStats *st = &res->stats;
            qr_buf_printf(&b,
                          ",\"filter\":{\"segments_scan\":%u,\"segments_check\":%u,"
                          "\"segments_btree\":%u,\"blocks_total\":%llu,\"blocks_skipped\":%llu,"
                          "\"blocks_scanned\":%llu,\"btree_pages\":%llu,"
                          "\"candidates_checked\":%llu,\"rows\":%llu}",
                          st->filter_segs_scan, st->filter_segs_check, st->filter_segs_btree,
                          (unsigned long long)st->filter_blocks_total,
                          (unsigned long long)st->filter_blocks_skipped,
                          (unsigned long long)st->filter_blocks_scanned,
                          (unsigned long long)st->filter_btree_pages,
                          (unsigned long long)st->filter_candidates_checked,
                          (unsigned long long)st->filter_rows);
        }
        if (a->rank)
            qr_buf_printf(&b, ",\"rank\":{\"rounds\":%u,\"candidates\":%llu,\"exhaustive\":%s}",
                          res->stats.rank_rounds,
                          (unsigned long long)res->stats.rank_candidates,
                          res->stats.rank_exhaustive ? "true" : "false");
        qr_buf_putc(&b, '}');
    }
    qr_buf_putc(&b, '}');
    qr_search_res_free(res);
    http_reply_json(r, 200, &b);
}

/* GET /tables/{t}/search?q=... */
void http_search_get(HttpReq *r)
{
    SearchArgs a;
    args_init(&a);
    http_arg(r, "q"); /* parses the query string */
    if (r->args_bad) {
        args_free(&a);
        return;
    }
    for (int i = 0; i < r->n_args; i++) {
        const SearchParam *p = param_find(r->arg_k[i]);
        int rc = p ? set_text(r, p, r->arg_v[i], &a) : unknown_param(r, r->arg_k[i]);
        if (rc != QR_OK) {
            args_free(&a);
            return;
        }
    }
    run_search(r, &a);
    args_free(&a);
}

/* The search of the JSON object root on r->t; `skip` names a member that
 * is not a search parameter (multi-search's "table"), or NULL. */
static void search_json(HttpReq *r, const cJSON *root, const char *skip)
{
    SearchArgs a;
    args_init(&a);
    if (!cJSON_IsObject(root)) {
        http_error(r, QR_EINVAL, "%s must be a JSON object", skip ? "each query" : "request body");
        http_error_hint(r, "e.g. {\"q\": \"terminal emulator\", \"limit\": 5}");
        goto out;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, root)
    {
        if (skip && !strcmp(it->string, skip))
            continue;
        const SearchParam *p = param_find(it->string);
        int rc = p ? set_json(r, p, it, &a) : unknown_param(r, it->string);
        if (rc != QR_OK)
            goto out;
    }
    run_search(r, &a);
out:
    args_free(&a);
}

/* POST /tables/{t}/search with a JSON object body. */
void http_search_post(HttpReq *r)
{
    http_arg(r, "");
    if (r->args_bad)
        return;
    if (r->n_args) {
        http_error(r, QR_EINVAL, "POST search takes its parameters in the JSON body, not in "
                                 "the query string (\"%.40s\")",
                   r->arg_k[0]);
        return;
    }
    cJSON *root = http_body_json(r);
    if (!root)
        return;
    search_json(r, root, NULL);
    cJSON_Delete(root);
}

/* One query of a multi-search as a sub-request of r: its answer, or
 * {"error": {...}, "status": N}, appended to out. */
static void multi_one(HttpReq *r, const cJSON *q, QrBuf *out)
{
    HttpReq sub;
    memset(&sub, 0, sizeof sub);
    sub.srv = r->srv;
    sub.conn = r->conn;
    sub.t0_ns = qr_now_ns();
    sub.uri = r->uri;
    sub.method_name = r->method_name;
    sub.method = r->method;
    sub.route = r->route;
    sub.args_parsed = true;
    sub.granted = r->granted;
    memcpy(sub.key_name, r->key_name, sizeof sub.key_name);
    memcpy(sub.key_tables, r->key_tables, sizeof sub.key_tables);
    qr_error_clear(&sub.err);
    qr_buf_init(&sub.body);
    sub.capture = out;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(q, "table");
    const cJSON *qq = cJSON_GetObjectItemCaseSensitive(q, "q");
    if (!cJSON_IsObject(q) || !cJSON_IsString(t)) {
        http_error(&sub, QR_EINVAL, "each query needs \"table\" (a table name)");
        http_error_hint(&sub, "{\"queries\": [{\"table\": \"products\", \"q\": \"lamp\"}]}");
    } else if (http_key_table_ok(&sub, t->valuestring) &&
               http_query_terms_check(&sub, cJSON_IsString(qq) ? qq->valuestring : NULL) ==
                   QR_OK) {
        sub.t = t->valuestring; /* borrowed from the body for the sub-request */
        if (http_table_enter(r->srv, sub.t, false) != QR_OK) {
            http_error(&sub, QR_ENOMEM, "out of memory");
        } else {
            search_json(&sub, q, "table");
            http_table_leave(r->srv, sub.t, false);
        }
    }
    if (!sub.queued) {
        qr_buf_printf(out, "{\"status\":%d,", http_status_of(sub.err.code));
        QrBuf eb;
        qr_buf_init(&eb);
        http_error_json(&eb, sub.err.code, &sub.err);
        if (eb.len > 2)
            qr_buf_append(out, eb.data + 1, eb.len - 1); /* "error":{...}} */
        else
            qr_buf_putc(out, '}');
        qr_buf_free(&eb);
    }
    for (int i = 0; i < sub.n_hdr; i++)
        qr_free(sub.hdr_v[i]);
}

void http_search_multi(HttpReq *r)
{
    http_arg(r, "");
    if (r->args_bad)
        return;
    if (r->n_args) {
        http_error(r, QR_EINVAL, "multi-search takes its parameters in the JSON body, not in "
                                 "the query string (\"%.40s\")", r->arg_k[0]);
        return;
    }
    cJSON *root = http_body_json(r);
    if (!root)
        return;
    const cJSON *qs = cJSON_GetObjectItemCaseSensitive(root, "queries");
    const cJSON *it;
    cJSON_ArrayForEach(it, root)
    {
        if (strcmp(it->string, "queries")) {
            http_error(r, QR_EINVAL, "unknown key \"%.60s\"", it->string);
            http_error_hint(r, "multi-search takes {\"queries\": [...]}");
            goto out;
        }
    }
    if (!cJSON_IsObject(root) || !cJSON_IsArray(qs)) {
        http_error(r, QR_EINVAL, "multi-search needs {\"queries\": [...]}");
        http_error_hint(r, "each query is {\"table\": T, ...} with the parameters of POST "
                           "/tables/{t}/search");
        goto out;
    }
    int n = cJSON_GetArraySize(qs);
    if (n > HTTP_MAX_MULTI) {
        http_error(r, QR_ELIMIT, "multi-search has %d queries, more than the limit of %d", n,
                   HTTP_MAX_MULTI);
        goto out;
    }
    uint64_t t0 = qr_now_ns();
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_append(&b, "{\"results\":[", 12);
    int i = 0;
    cJSON_ArrayForEach(it, qs)
    {
        if (i++)
            qr_buf_putc(&b, ',');
        multi_one(r, it, &b);
    }
    qr_buf_printf(&b, "],\"took_ms\":%.3f}", (double)(qr_now_ns() - t0) / 1e6);
    http_reply_json(r, 200, &b);
out:
    cJSON_Delete(root);
}
