/*
 * schema.c — schema JSON form, validation, inference, timestamps.
 * Layer: store/.  Calls the base kit and cJSON.
 */
#include "store/schema.h"
#include "store/column.h"
#include "store/decimal.h"
#include "store/mem.h"

#include <cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *type_names[] = {
    [QR_FT_TEXT] = "text",   [QR_FT_KEYWORD] = "keyword", [QR_FT_INT] = "int",
    [QR_FT_FLOAT] = "float", [QR_FT_BOOL] = "bool",       [QR_FT_TIMESTAMP] = "timestamp",
    [QR_FT_NUMERIC] = "numeric",
};

const char *schema_type_name(QrFieldType t)
{
    return (unsigned)t <= QR_FT_NUMERIC ? type_names[t] : "unknown";
}

int schema_type_parse(const char *name, QrFieldType *t)
{
    static const struct {
        const char *n;
        QrFieldType t;
    } alias[] = {
        {"text", QR_FT_TEXT},       {"keyword", QR_FT_KEYWORD}, {"int", QR_FT_INT},
        {"integer", QR_FT_INT},     {"int64", QR_FT_INT},       {"bigint", QR_FT_INT},
        {"float", QR_FT_FLOAT},     {"double", QR_FT_FLOAT},    {"float64", QR_FT_FLOAT},
        {"bool", QR_FT_BOOL},       {"boolean", QR_FT_BOOL},    {"timestamp", QR_FT_TIMESTAMP},
        {"date", QR_FT_TIMESTAMP},  {"string", QR_FT_KEYWORD},
        {"numeric", QR_FT_NUMERIC}, {"decimal", QR_FT_NUMERIC},
    };
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (!strcasecmp(name, alias[i].n)) {
            *t = alias[i].t;
            return 0;
        }
    return -1;
}

bool qr_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > QR_NAME_MAX)
        return false;
    if (!(isalpha((unsigned char)name[0]) || name[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)name[i]) || name[i] == '_'))
            return false;
    return true;
}

void schema_init(QrSchema *s)
{
    memset(s, 0, sizeof *s);
    strcpy(s->primary_key, "id");
    s->k1 = 1.2f;
    s->b = 0.75f;
    s->idf = QR_IDF_ROBERTSON;
    s->scoring = QR_SCORING_BM25F;
    s->typo = QR_TYPO_AUTO;
}

/* ---- the pool: stop-word lists and synonyms ---- */

static bool pool_put(QrSchema *s, const char *p, size_t n, uint32_t *off)
{
    if (n > QR_SCHEMA_POOL_MAX - s->pool_len)
        return false;
    *off = s->pool_len;
    memcpy(s->pool + s->pool_len, p, n);
    s->pool_len += (uint32_t)n;
    return true;
}

static int pool_full(QrError *err)
{
    qr_error_set(err, QR_ELIMIT, "synonyms and stop-word lists exceed %d bytes",
                 QR_SCHEMA_POOL_MAX);
    qr_error_hint(err, "shorten the lists");
    return QR_ELIMIT;
}

const char *schema_synonyms(const QrSchema *s, size_t *len)
{
    *len = s->syn_len;
    return s->syn_len && s->syn_off + s->syn_len <= s->pool_len ? s->pool + s->syn_off : NULL;
}

const char *schema_stop_list(const QrSchema *s, int f, size_t *len)
{
    *len = 0;
    if (f < 0 || f >= s->n_fields)
        return NULL;
    const QrField *fd = &s->fields[f];
    if (!fd->stop_len || fd->stop_off + fd->stop_len > s->pool_len)
        return NULL;
    *len = fd->stop_len;
    return s->pool + fd->stop_off;
}

int schema_typo_parse(const char *name)
{
    if (!strcmp(name, "auto"))
        return QR_TYPO_AUTO;
    if (!strcmp(name, "off") || !strcmp(name, "0") || !strcmp(name, "false"))
        return QR_TYPO_OFF;
    if (!strcmp(name, "1"))
        return QR_TYPO_ONE;
    if (!strcmp(name, "2"))
        return QR_TYPO_TWO;
    return -1;
}

const char *schema_typo_name(QrTypo t)
{
    switch (t) {
    case QR_TYPO_OFF: return "off";
    case QR_TYPO_ONE: return "1";
    case QR_TYPO_TWO: return "2";
    case QR_TYPO_TABLE: return "table";
    default: return "auto";
    }
}

/* One synonym: a non-empty string of at most QR_SYNONYM_WORDS_MAX words. */
static int synonym_check(const cJSON *v, QrError *err)
{
    if (!cJSON_IsString(v) || !v->valuestring[0])
        return qr_error_set(err, QR_EINVAL, "a synonym must be a non-empty string");
    int words = 0;
    bool in = false;
    for (const char *c = v->valuestring; *c; c++) {
        bool sp = *c == ' ' || *c == '\t' || *c == '\n' || *c == '\r';
        words += !sp && !in;
        in = !sp;
    }
    if (words == 0)
        return qr_error_set(err, QR_EINVAL, "a synonym must be a non-empty string");
    if (words > QR_SYNONYM_WORDS_MAX || strlen(v->valuestring) > 256)
        return qr_error_set(err, QR_EINVAL, "synonym \"%.40s\" is too long (at most %d words, "
                                            "256 bytes)",
                            v->valuestring, QR_SYNONYM_WORDS_MAX);
    return QR_OK;
}

/* Validate a synonyms value: [["a", "b"], ...] or {"a": ["b"] or "b", ...}. */
static int synonyms_check(const cJSON *j, QrError *err)
{
    const cJSON *it;
    if (cJSON_IsArray(j)) {
        cJSON_ArrayForEach(it, j)
        {
            if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) < 2) {
                qr_error_set(err, QR_EINVAL, "a synonym group must be a list of two or more words");
                qr_error_hint(err, "e.g. [[\"tty\", \"terminal\"]], or {\"tty\": [\"terminal\"]} "
                                   "for one-way synonyms");
                return QR_EINVAL;
            }
            const cJSON *w;
            cJSON_ArrayForEach(w, it) if (synonym_check(w, err) != QR_OK) return QR_EINVAL;
        }
        return QR_OK;
    }
    if (cJSON_IsObject(j)) {
        cJSON_ArrayForEach(it, j)
        {
            cJSON key = {.type = cJSON_String, .valuestring = it->string};
            if (synonym_check(&key, err) != QR_OK)
                return QR_EINVAL;
            if (cJSON_IsString(it)) {
                if (synonym_check(it, err) != QR_OK)
                    return QR_EINVAL;
                continue;
            }
            if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) < 1)
                return qr_error_set(err, QR_EINVAL, "one-way synonyms of \"%.40s\" must be a word "
                                                    "or a list of words",
                                    it->string);
            const cJSON *w;
            cJSON_ArrayForEach(w, it) if (synonym_check(w, err) != QR_OK) return QR_EINVAL;
        }
        return QR_OK;
    }
    qr_error_set(err, QR_EINVAL, "synonyms must be a list of groups or an object of one-way "
                                 "synonyms");
    qr_error_hint(err, "e.g. [[\"tty\", \"terminal\"]] or {\"tty\": [\"terminal\"]}");
    return QR_EINVAL;
}

/* Set the synonyms from a parsed value (NULL or empty: none), rebuilding the
 * pool so that replaced synonyms leave no garbage. */
static int synonyms_set_parsed(QrSchema *s, const cJSON *j, QrError *err)
{
    bool none = !j || cJSON_IsNull(j) ||
                ((cJSON_IsArray(j) || cJSON_IsObject(j)) && cJSON_GetArraySize(j) == 0);
    if (!none && synonyms_check(j, err) != QR_OK)
        return QR_EINVAL;
    char *txt = none ? NULL : cJSON_PrintUnformatted(j);
    if (!none && !txt)
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    char *old = qr_malloc(s->pool_len + 1);
    if (!old) {
        cJSON_free(txt);
        return qr_error_set(err, QR_ENOMEM, "out of memory");
    }
    memcpy(old, s->pool, s->pool_len);
    uint32_t old_len = s->pool_len;
    QrField saved[QR_MAX_FIELDS];
    memcpy(saved, s->fields, (size_t)s->n_fields * sizeof *saved);
    s->pool_len = 0;
    bool ok = true;
    for (int f = 0; f < s->n_fields && ok; f++) {
        QrField *fd = &s->fields[f];
        if (fd->stop_len)
            ok = pool_put(s, old + fd->stop_off, fd->stop_len, &fd->stop_off);
    }
    uint32_t off = 0;
    if (ok && txt)
        ok = pool_put(s, txt, strlen(txt), &off);
    if (!ok) { /* as it was */
        memcpy(s->pool, old, old_len);
        s->pool_len = old_len;
        memcpy(s->fields, saved, (size_t)s->n_fields * sizeof *saved);
    } else {
        s->syn_off = txt ? off : 0;
        s->syn_len = txt ? (uint32_t)strlen(txt) : 0;
    }
    qr_free(old);
    cJSON_free(txt);
    return ok ? QR_OK : pool_full(err);
}

int schema_set_synonyms(QrSchema *s, const char *json, size_t len, QrError *err)
{
    if (len == 0)
        return synonyms_set_parsed(s, NULL, err);
    cJSON *j = cJSON_ParseWithLength(json, len);
    if (!j)
        return qr_error_set(err, QR_ESYNTAX, "synonyms are not valid JSON");
    int rc = synonyms_set_parsed(s, j, err);
    cJSON_Delete(j);
    return rc;
}

/* "_all" defaults to on with two or more full-text fields. */
static void schema_default_all(QrSchema *s)
{
    int n = 0;
    for (int f = 0; f < s->n_fields; f++)
        n += s->fields[f].type == QR_FT_TEXT && s->fields[f].indexed;
    s->all_field = n >= 2;
}

void schema_field_defaults(QrField *f, const char *name, QrFieldType t)
{
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->type = t;
    f->indexed = (t == QR_FT_TEXT);
    strcpy(f->language, t == QR_FT_TEXT ? "english" : "none");
    f->accent_fold = true;
    f->weight = 1.0f;
    f->scale = -1;
}

int schema_field_index(const QrSchema *s, const char *name)
{
    for (int i = 0; i < s->n_fields; i++)
        if (!strcmp(s->fields[i].name, name))
            return i;
    return -1;
}

int schema_add_field(QrSchema *s, const QrField *f, QrError *err)
{
    if (!qr_name_valid(f->name)) {
        qr_error_set(err, QR_EINVAL, "invalid field name \"%s\"", f->name);
        qr_error_hint(err, "names are letters, digits and underscores, starting with a letter, "
                           "at most %d bytes",
                      QR_NAME_MAX);
        return -1;
    }
    if (schema_field_index(s, f->name) >= 0 || !strcmp(f->name, s->primary_key)) {
        qr_error_set(err, QR_EEXISTS, "field \"%s\" already exists", f->name);
        return -1;
    }
    if (s->n_fields >= QR_MAX_FIELDS) {
        qr_error_set(err, QR_ELIMIT, "too many fields (at most %d)", QR_MAX_FIELDS);
        return -1;
    }
    s->fields[s->n_fields] = *f;
    return s->n_fields++;
}

static int field_from_json(const cJSON *j, QrField *f, QrSchema *s, QrError *err)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
    if (!cJSON_IsString(name))
        return qr_error_set(err, QR_EINVAL, "schema field without a \"name\" string");
    if (!cJSON_IsString(type))
        return qr_error_set(err, QR_EINVAL, "schema field \"%s\" has no \"type\" string",
                            name->valuestring);
    QrFieldType t;
    if (schema_type_parse(type->valuestring, &t) != 0) {
        qr_error_set(err, QR_EINVAL, "schema field \"%s\" has unknown type \"%s\"",
                     name->valuestring, type->valuestring);
        qr_error_hint(err, "types are text, keyword, int, float, bool, timestamp, numeric");
        return QR_EINVAL;
    }
    if (strlen(name->valuestring) > QR_NAME_MAX)
        return qr_error_set(err, QR_EINVAL, "field name \"%.64s...\" is too long",
                            name->valuestring);
    schema_field_defaults(f, name->valuestring, t);
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "language"))) {
        if (!cJSON_IsString(v) || strlen(v->valuestring) >= sizeof f->language)
            return qr_error_set(err, QR_EINVAL, "field \"%s\": \"language\" must be a string",
                                f->name);
        snprintf(f->language, sizeof f->language, "%s", v->valuestring);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "weight"))) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || v->valuedouble > 1000)
            return qr_error_set(err, QR_EINVAL,
                                "field \"%s\": \"weight\" must be a number in (0, 1000]",
                                f->name);
        f->weight = (float)v->valuedouble;
    }
#define BOOLOPT(key, dst)                                                                  \
    if ((v = cJSON_GetObjectItemCaseSensitive(j, key))) {                                  \
        if (!cJSON_IsBool(v))                                                              \
            return qr_error_set(err, QR_EINVAL, "field \"%s\": \"%s\" must be true or false", \
                                f->name, key);                                             \
        dst = cJSON_IsTrue(v);                                                             \
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "stopwords")) && cJSON_IsArray(v)) {
        /* the field's own list: words one per line in the pool */
        QrBuf b;
        qr_buf_init(&b);
        const cJSON *w;
        cJSON_ArrayForEach(w, v)
        {
            if (!cJSON_IsString(w) || !w->valuestring[0] || strchr(w->valuestring, '\n') ||
                strlen(w->valuestring) > 255) {
                qr_buf_free(&b);
                return qr_error_set(err, QR_EINVAL, "field \"%s\": \"stopwords\" must be true, "
                                                    "false or a list of words",
                                    f->name);
            }
            qr_buf_printf(&b, "%s\n", w->valuestring);
        }
        f->stopwords = b.len > 0;
        bool ok = qr_buf_ok(&b) && (b.len == 0 || pool_put(s, (const char *)b.data, b.len,
                                                               &f->stop_off));
        f->stop_len = ok ? (uint32_t)b.len : 0;
        qr_buf_free(&b);
        if (!ok)
            return pool_full(err);
    } else {
        BOOLOPT("stopwords", f->stopwords)
    }
    BOOLOPT("accent_fold", f->accent_fold)
    BOOLOPT("column", f->column)
    BOOLOPT("indexed", f->indexed)
    BOOLOPT("multi", f->multi)
#undef BOOLOPT
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "index"))) {
        if (cJSON_IsString(v) && !strcmp(v->valuestring, "btree"))
            f->btree = true;
        else if (!(cJSON_IsString(v) && !strcmp(v->valuestring, "none")))
            return qr_error_set(err, QR_EINVAL, "field \"%s\": \"index\" must be \"btree\" or \"none\"",
                                f->name);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "scale"))) {
        if (t != QR_FT_NUMERIC || !cJSON_IsNumber(v) || v->valuedouble != (int)v->valuedouble ||
            v->valuedouble < 0 || v->valuedouble > DEC_SCALED_MAX_PREC)
            return qr_error_set(err, QR_EINVAL, "field \"%s\": \"scale\" must be an integer in "
                                                "0..%d on a numeric field", f->name,
                                DEC_SCALED_MAX_PREC);
        f->scale = (int8_t)v->valueint;
    }
    if (t != QR_FT_TEXT)
        f->indexed = false;
    if (f->multi && t != QR_FT_KEYWORD)
        return qr_error_set(err, QR_EINVAL, "field \"%s\": \"multi\" applies to keyword fields "
                                            "only", f->name);
    if (f->multi && f->btree)
        return qr_error_set(err, QR_EINVAL, "field \"%s\": a multi-valued keyword field takes no "
                                            "B-tree index", f->name);
    return QR_OK;
}

int schema_from_json(const char *json, size_t len, QrSchema *out, QrError *err)
{
    schema_init(out);
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root)
        return qr_error_set(err, QR_ESYNTAX, "schema is not valid JSON");
    int rc = QR_OK;
    if (!cJSON_IsObject(root)) {
        rc = qr_error_set(err, QR_EINVAL, "schema must be a JSON object");
        goto done;
    }
    const cJSON *pk = cJSON_GetObjectItemCaseSensitive(root, "primary_key");
    if (pk) {
        if (!cJSON_IsString(pk) || !qr_name_valid(pk->valuestring)) {
            rc = qr_error_set(err, QR_EINVAL, "schema \"primary_key\" must be a valid field name");
            goto done;
        }
        snprintf(out->primary_key, sizeof out->primary_key, "%s", pk->valuestring);
    }
    const cJSON *bm = cJSON_GetObjectItemCaseSensitive(root, "bm25");
    if (bm) {
        const cJSON *k1 = cJSON_GetObjectItemCaseSensitive(bm, "k1");
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(bm, "b");
        if (k1) {
            if (!cJSON_IsNumber(k1) || k1->valuedouble < 0 || k1->valuedouble > 100) {
                rc = qr_error_set(err, QR_EINVAL, "schema bm25.k1 must be a number in [0, 100]");
                goto done;
            }
            out->k1 = (float)k1->valuedouble;
        }
        if (b) {
            if (!cJSON_IsNumber(b) || b->valuedouble < 0 || b->valuedouble > 1) {
                rc = qr_error_set(err, QR_EINVAL, "schema bm25.b must be a number in [0, 1]");
                goto done;
            }
            out->b = (float)b->valuedouble;
        }
        const cJSON *idf = cJSON_GetObjectItemCaseSensitive(bm, "idf");
        if (idf) {
            if (cJSON_IsString(idf) && !strcmp(idf->valuestring, "robertson"))
                out->idf = QR_IDF_ROBERTSON;
            else if (cJSON_IsString(idf) && !strcmp(idf->valuestring, "lucene"))
                out->idf = QR_IDF_LUCENE;
            else {
                rc = qr_error_set(err, QR_EINVAL, "schema bm25.idf must be \"robertson\" or \"lucene\"");
                goto done;
            }
        }
    }
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(root, "scoring");
    if (sc) {
        if (cJSON_IsString(sc) && !strcmp(sc->valuestring, "bm25f"))
            out->scoring = QR_SCORING_BM25F;
        else if (cJSON_IsString(sc) && !strcmp(sc->valuestring, "sum"))
            out->scoring = QR_SCORING_SUM;
        else {
            rc = qr_error_set(err, QR_EINVAL, "schema \"scoring\" must be \"bm25f\" or \"sum\"");
            goto done;
        }
    }
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(root, "typo_tolerance");
    if (ty) {
        char tb[16] = "";
        if (cJSON_IsString(ty))
            snprintf(tb, sizeof tb, "%s", ty->valuestring);
        else if (cJSON_IsNumber(ty) && (ty->valuedouble == 0 || ty->valuedouble == 1 ||
                                        ty->valuedouble == 2))
            snprintf(tb, sizeof tb, "%d", (int)ty->valuedouble);
        else if (cJSON_IsBool(ty))
            snprintf(tb, sizeof tb, "%s", cJSON_IsTrue(ty) ? "auto" : "off");
        int t = schema_typo_parse(tb);
        if (t < 0 || t == QR_TYPO_TABLE) {
            rc = qr_error_set(err, QR_EINVAL, "schema \"typo_tolerance\" must be \"auto\", "
                                              "\"off\", 1 or 2");
            goto done;
        }
        out->typo = (QrTypo)t;
    }
    const cJSON *fields = cJSON_GetObjectItemCaseSensitive(root, "fields");
    if (!cJSON_IsArray(fields)) {
        rc = qr_error_set(err, QR_EINVAL, "schema needs a \"fields\" array");
        goto done;
    }
    const cJSON *fj;
    cJSON_ArrayForEach(fj, fields)
    {
        QrField f;
        if ((rc = field_from_json(fj, &f, out, err)) != QR_OK)
            goto done;
        if (schema_add_field(out, &f, err) < 0) {
            rc = err ? err->code : QR_EINVAL;
            goto done;
        }
    }
    schema_default_all(out);
    if ((rc = synonyms_set_parsed(out, cJSON_GetObjectItemCaseSensitive(root, "synonyms"), err)) !=
        QR_OK)
        goto done;
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(root, "all_field");
    if (all) {
        if (!cJSON_IsBool(all)) {
            rc = qr_error_set(err, QR_EINVAL, "schema \"all_field\" must be true or false");
            goto done;
        }
        out->all_field = cJSON_IsTrue(all);
    }
done:
    cJSON_Delete(root);
    return rc;
}

int schema_to_json(const QrSchema *s, bool pretty, QrBuf *out, QrError *err)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return qr_error_set(err, QR_ENOMEM, "out of memory printing a schema");
    cJSON_AddStringToObject(root, "primary_key", s->primary_key);
    cJSON *bm = cJSON_AddObjectToObject(root, "bm25");
    cJSON_AddNumberToObject(bm, "k1", (double)s->k1);
    cJSON_AddNumberToObject(bm, "b", (double)s->b);
    cJSON_AddStringToObject(bm, "idf", s->idf == QR_IDF_LUCENE ? "lucene" : "robertson");
    cJSON_AddBoolToObject(root, "all_field", s->all_field);
    cJSON_AddStringToObject(root, "scoring", s->scoring == QR_SCORING_SUM ? "sum" : "bm25f");
    if (s->typo == QR_TYPO_ONE || s->typo == QR_TYPO_TWO)
        cJSON_AddNumberToObject(root, "typo_tolerance", (double)s->typo);
    else
        cJSON_AddStringToObject(root, "typo_tolerance", schema_typo_name(s->typo));
    size_t syn_len;
    const char *syn = schema_synonyms(s, &syn_len);
    if (syn) {
        cJSON *sj = cJSON_ParseWithLength(syn, syn_len);
        if (sj)
            cJSON_AddItemToObject(root, "synonyms", sj);
    }
    cJSON *arr = cJSON_AddArrayToObject(root, "fields");
    for (int i = 0; i < s->n_fields; i++) {
        const QrField *f = &s->fields[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", f->name);
        cJSON_AddStringToObject(o, "type", schema_type_name(f->type));
        if (f->type == QR_FT_TEXT) {
            cJSON_AddStringToObject(o, "language", f->language);
            cJSON_AddNumberToObject(o, "weight", (double)f->weight);
            size_t sl;
            const char *stop = schema_stop_list(s, i, &sl);
            if (stop) {
                cJSON *words = cJSON_AddArrayToObject(o, "stopwords");
                for (size_t a = 0; a < sl;) {
                    const char *e = memchr(stop + a, '\n', sl - a);
                    size_t wl = e ? (size_t)(e - (stop + a)) : sl - a;
                    char w[256];
                    snprintf(w, sizeof w, "%.*s", (int)(wl < 255 ? wl : 255), stop + a);
                    cJSON_AddItemToArray(words, cJSON_CreateString(w));
                    a += wl + 1;
                }
            } else {
                cJSON_AddBoolToObject(o, "stopwords", f->stopwords);
            }
            cJSON_AddBoolToObject(o, "accent_fold", f->accent_fold);
            if (!f->indexed)
                cJSON_AddBoolToObject(o, "indexed", false);
            if (f->column)
                cJSON_AddBoolToObject(o, "column", true);
        }
        if (f->type == QR_FT_NUMERIC && f->scale >= 0)
            cJSON_AddNumberToObject(o, "scale", f->scale);
        if (f->btree)
            cJSON_AddStringToObject(o, "index", "btree");
        if (f->multi)
            cJSON_AddBoolToObject(o, "multi", true);
        cJSON_AddItemToArray(arr, o);
    }
    char *txt = pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!txt)
        return qr_error_set(err, QR_ENOMEM, "out of memory printing a schema");
    qr_buf_append(out, txt, strlen(txt));
    cJSON_free(txt);
    return qr_buf_ok(out) ? QR_OK : qr_error_set(err, QR_ENOMEM, "out of memory");
}

/* ---- timestamps ---- */

static int digits(const char *s, size_t n, size_t at, int count, int *v)
{
    if (at + (size_t)count > n)
        return -1;
    int r = 0;
    for (int i = 0; i < count; i++) {
        char c = s[at + (size_t)i];
        if (c < '0' || c > '9')
            return -1;
        r = r * 10 + (c - '0');
    }
    *v = r;
    return 0;
}

/* days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm) */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const int64_t yoe = y - era * 400;
    const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

bool qr_parse_timestamp(const char *s, size_t n, int64_t *us_out)
{
    int Y, M, D, h = 0, mi = 0, sec = 0;
    if (n < 10 || digits(s, n, 0, 4, &Y) || s[4] != '-' || digits(s, n, 5, 2, &M) ||
        s[7] != '-' || digits(s, n, 8, 2, &D))
        return false;
    if (M < 1 || M > 12 || D < 1 || D > 31)
        return false;
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (D > mdays[M - 1])
        return false;
    if (M == 2 && D == 29 && !((Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0))
        return false;
    size_t i = 10;
    int64_t frac_us = 0;
    int64_t offset_s = 0;
    if (i < n) {
        if (s[i] != 'T' && s[i] != 't' && s[i] != ' ')
            return false;
        i++;
        /* a date with a zone and no time ("2024-01-02 +00", JDBC's setDate) */
        bool date_zone = s[i - 1] == ' ' && i < n && (s[i] == '+' || s[i] == '-');
        if (!date_zone &&
            (digits(s, n, i, 2, &h) || i + 2 >= n || s[i + 2] != ':' || digits(s, n, i + 3, 2, &mi)))
            return false;
        i += date_zone ? 0 : 5;
        if (!date_zone && i < n && s[i] == ':') {
            if (digits(s, n, i + 1, 2, &sec))
                return false;
            i += 3;
            if (i < n && (s[i] == '.' || s[i] == ',')) {
                i++;
                int nd = 0;
                int64_t scale = 100000;
                while (i < n && s[i] >= '0' && s[i] <= '9') {
                    if (nd < 6)
                        frac_us += (s[i] - '0') * scale;
                    scale /= 10;
                    nd++;
                    i++;
                }
                if (nd == 0)
                    return false;
            }
        }
        if (h > 23 || mi > 59 || sec > 60)
            return false;
        if (i < n) {
            if ((s[i] == 'Z' || s[i] == 'z') && i + 1 == n) {
                i++;
            } else if (s[i] == '+' || s[i] == '-') {
                int oh, om = 0;
                int sign = s[i] == '-' ? -1 : 1;
                if (digits(s, n, i + 1, 2, &oh))
                    return false;
                i += 3;
                if (i < n && s[i] == ':')
                    i++;
                if (i < n) {
                    if (digits(s, n, i, 2, &om))
                        return false;
                    i += 2;
                }
                if (oh > 23 || om > 59)
                    return false;
                offset_s = sign * (oh * 3600 + om * 60);
            } else {
                return false;
            }
        }
        if (i != n)
            return false;
    }
    int64_t days = days_from_civil(Y, M, D);
    int64_t secs = days * 86400 + h * 3600 + mi * 60 + sec - offset_s;
    *us_out = secs * 1000000 + frac_us;
    return true;
}

void qr_format_timestamp(int64_t us, char *out, size_t out_len)
{
    int64_t secs = us >= 0 ? us / 1000000 : -((-us + 999999) / 1000000);
    int64_t frac = us - secs * 1000000;
    time_t t = (time_t)secs;
    struct tm tm;
    gmtime_r(&t, &tm);
    if (frac)
        snprintf(out, out_len, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long long)frac);
    else
        snprintf(out, out_len, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* ---- inference ----
 *
 * Every sampled value of a field is counted by kind; the kind most values
 * have decides the type (a number among strings does not make a field
 * text, nor a string among numbers), and the odd values' lines are then
 * rejected at import, naming the field.  Strings also count their longest
 * length and distinct values (hashes, up to INFER_DISTINCT_MAX), which
 * tell a short, repeating label (a keyword: also kept as a column) from
 * prose. */

#define INFER_DISTINCT_MAX 256   /* distinct strings counted per field */
#define INFER_DISTINCT_SLOTS 512 /* open-addressing slots (twice the max) */
#define INFER_KEYWORD_MAX_LEN 64 /* bytes: a longer string is prose */

enum { K_BOOL, K_INT, K_FLOAT, K_TS, K_STR, K_ARR, K_OTHER, K_N };

typedef struct InferField {
    char name[QR_NAME_MAX + 1];
    uint64_t n[K_N];         /* non-null values of each kind */
    uint64_t n_null;
    size_t str_max_len;      /* longest string value, bytes */
    uint64_t *distinct;      /* owns: hashes of string values (0 = empty slot) */
    int n_distinct;          /* up to INFER_DISTINCT_MAX + 1 (= "more") */
    char why[200];           /* what schema_infer_finish decided, and why */
} InferField;

struct SchemaInfer {
    char pk[QR_NAME_MAX + 1];
    int n;
    InferField f[QR_MAX_FIELDS];
    bool too_many;
};

SchemaInfer *schema_infer_new(const char *primary_key)
{
    SchemaInfer *si = qr_calloc(1, sizeof *si);
    if (si)
        snprintf(si->pk, sizeof si->pk, "%s", primary_key ? primary_key : "id");
    return si;
}

void schema_infer_free(SchemaInfer *si)
{
    if (!si)
        return;
    for (int i = 0; i < si->n; i++)
        qr_free(si->f[i].distinct);
    qr_free(si);
}

static int classify(const cJSON *v)
{
    if (cJSON_IsBool(v))
        return K_BOOL;
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        return d == floor(d) && fabs(d) < 9.0e15 ? K_INT : K_FLOAT;
    }
    if (cJSON_IsString(v)) {
        int64_t us;
        return qr_parse_timestamp(v->valuestring, strlen(v->valuestring), &us) ? K_TS : K_STR;
    }
    if (cJSON_IsArray(v)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, v)
        {
            if (!cJSON_IsString(e))
                return K_OTHER;
        }
        return K_ARR;
    }
    return K_OTHER;
}

/* Count a string value's length and (while few) its distinct value. */
static void infer_string(InferField *f, const char *s)
{
    size_t len = strlen(s);
    if (len > f->str_max_len)
        f->str_max_len = len;
    if (f->n_distinct > INFER_DISTINCT_MAX)
        return;
    if (!f->distinct && !(f->distinct = qr_calloc(INFER_DISTINCT_SLOTS, sizeof *f->distinct))) {
        f->n_distinct = INFER_DISTINCT_MAX + 1; /* no memory: count it as "many" */
        return;
    }
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    h |= 1; /* never 0, the empty slot */
    for (size_t k = h % INFER_DISTINCT_SLOTS;; k = (k + 1) % INFER_DISTINCT_SLOTS) {
        if (f->distinct[k] == h)
            return;
        if (!f->distinct[k]) {
            f->distinct[k] = h;
            f->n_distinct++;
            return;
        }
    }
}

int schema_infer_add(SchemaInfer *si, const char *json, size_t len, QrError *err)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return qr_error_set(err, QR_ESYNTAX, "document is not a JSON object");
    }
    const cJSON *v;
    cJSON_ArrayForEach(v, root)
    {
        if (!v->string || !strcmp(v->string, si->pk) || !qr_name_valid(v->string))
            continue;
        int idx = -1;
        for (int i = 0; i < si->n; i++)
            if (!strcmp(si->f[i].name, v->string)) {
                idx = i;
                break;
            }
        if (idx < 0) {
            if (si->n >= QR_MAX_FIELDS) {
                si->too_many = true;
                continue;
            }
            idx = si->n++;
            memset(&si->f[idx], 0, sizeof si->f[idx]);
            snprintf(si->f[idx].name, sizeof si->f[idx].name, "%s", v->string);
        }
        InferField *f = &si->f[idx];
        if (cJSON_IsNull(v)) {
            f->n_null++;
            continue;
        }
        int k = classify(v);
        f->n[k]++;
        if (k == K_STR)
            infer_string(f, v->valuestring);
    }
    cJSON_Delete(root);
    return QR_OK;
}

/* Decide field f's type from its counts: *t, whether text also keeps a
 * keyword column, and f->why.  False: not indexed (only nulls, or mostly
 * nested values). */
static bool infer_decide(InferField *f, QrFieldType *t, bool *column)
{
    uint64_t n = 0;
    for (int k = 0; k < K_N; k++)
        n += f->n[k];
    uint64_t num = f->n[K_INT] + f->n[K_FLOAT];
    uint64_t odd; /* values the type will reject: their lines are */
    const char *what;
    *column = false;
    if (n == 0) {
        snprintf(f->why, sizeof f->why, "not indexed: only null in %llu sampled lines",
                 (unsigned long long)f->n_null);
        return false;
    }
    if (num * 2 > n) {
        *t = f->n[K_FLOAT] ? QR_FT_FLOAT : QR_FT_INT;
        what = f->n[K_FLOAT] ? "numbers, some with a fraction" : "integers";
        odd = n - num;
    } else if (f->n[K_BOOL] * 2 > n) {
        *t = QR_FT_BOOL;
        what = "booleans";
        odd = n - f->n[K_BOOL];
    } else if (f->n[K_TS] * 2 > n) {
        *t = QR_FT_TIMESTAMP;
        what = "ISO-8601 timestamps";
        odd = n - f->n[K_TS];
    } else if (f->n[K_OTHER] * 2 > n) {
        snprintf(f->why, sizeof f->why,
                 "not indexed (stored): %llu of %llu sampled values are objects or mixed arrays",
                 (unsigned long long)f->n[K_OTHER], (unsigned long long)n);
        return false;
    } else {
        *t = QR_FT_TEXT;
        uint64_t strs = f->n[K_STR] + f->n[K_TS] + f->n[K_ARR];
        odd = n - strs;
        /* a short label that repeats (no arrays): filterable and facetable
         * as a keyword column, searchable as text too */
        *column = f->n[K_ARR] == 0 && f->n[K_TS] == 0 && f->n[K_STR] > 0 &&
                  f->str_max_len <= INFER_KEYWORD_MAX_LEN &&
                  f->n_distinct <= INFER_DISTINCT_MAX &&
                  (uint64_t)f->n_distinct * 2 <= f->n[K_STR];
        char dist[32];
        if (f->n_distinct > INFER_DISTINCT_MAX)
            snprintf(dist, sizeof dist, "over %d", INFER_DISTINCT_MAX);
        else
            snprintf(dist, sizeof dist, "%d", f->n_distinct);
        if (*column)
            snprintf(f->why, sizeof f->why,
                     "text and keyword column: %llu of %llu sampled values are short strings "
                     "(at most %zu bytes) with %s distinct values",
                     (unsigned long long)strs, (unsigned long long)n, f->str_max_len, dist);
        else
            snprintf(f->why, sizeof f->why,
                     "text: %llu of %llu sampled values are strings (up to %zu bytes, %s "
                     "distinct)",
                     (unsigned long long)strs, (unsigned long long)n, f->str_max_len, dist);
        what = NULL;
    }
    if (what)
        snprintf(f->why, sizeof f->why, "%s: %llu of %llu sampled values are %s",
                 schema_type_name(*t), (unsigned long long)(n - odd), (unsigned long long)n,
                 what);
    if (odd) {
        size_t l = strlen(f->why);
        snprintf(f->why + l, sizeof f->why - l, "; lines with the other %llu are rejected",
                 (unsigned long long)odd);
    }
    return true;
}

int schema_infer_finish(SchemaInfer *si, QrSchema *out, QrError *err)
{
    schema_init(out);
    snprintf(out->primary_key, sizeof out->primary_key, "%s", si->pk);
    for (int i = 0; i < si->n; i++) {
        QrFieldType t;
        bool column;
        if (!infer_decide(&si->f[i], &t, &column))
            continue;
        QrField f;
        schema_field_defaults(&f, si->f[i].name, t);
        f.column = column;
        if (schema_add_field(out, &f, err) < 0)
            return err ? err->code : QR_EINVAL;
    }
    schema_default_all(out);
    return QR_OK;
}

int schema_infer_explain(const SchemaInfer *si, QrBuf *out)
{
    for (int i = 0; i < si->n; i++) {
        const InferField *f = &si->f[i];
        qr_buf_append(out, "  ", 2);
        qr_buf_append(out, f->name, strlen(f->name));
        qr_buf_append(out, ": ", 2);
        qr_buf_append(out, f->why, strlen(f->why));
        qr_buf_append(out, "\n", 1);
    }
    if (si->too_many) {
        const char *m = "  (more fields than a table may have: the rest are stored, not indexed)\n";
        qr_buf_append(out, m, strlen(m));
    }
    return qr_buf_ok(out) ? QR_OK : QR_ENOMEM;
}

int schema_column_type(const QrField *f)
{
    switch (f->type) {
    case QR_FT_KEYWORD: return QR_COL_KEYWORD;
    case QR_FT_INT: return QR_COL_INT64;
    case QR_FT_FLOAT: return QR_COL_FLOAT64;
    case QR_FT_BOOL: return QR_COL_BOOL;
    case QR_FT_TIMESTAMP: return QR_COL_TIMESTAMP;
    case QR_FT_TEXT: return f->column ? QR_COL_KEYWORD : -1;
    case QR_FT_NUMERIC: return f->scale >= 0 ? QR_COL_INT64 : QR_COL_KEYWORD;
    }
    return -1;
}
