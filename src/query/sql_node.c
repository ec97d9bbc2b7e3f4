/*
 * sql_node.c — reading libpg_query's JSON parse tree.
 *
 * Layer: query/.  Calls cJSON only.  A node is an object with one key, the
 * node tag, whose value is the body: {"ColumnRef": {"fields": [...],
 * "location": 7}}.  Absent fields are the parser's defaults (false, 0, "").
 */
#include "query/sql_int.h"

#include <string.h>

const char *sqlj_tag(const cJSON *n)
{
    if (!n || !cJSON_IsObject(n) || !n->child)
        return NULL;
    return n->child->string;
}

const cJSON *sqlj_is(const cJSON *n, const char *tag)
{
    const char *t = sqlj_tag(n);
    return t && strcmp(t, tag) == 0 ? n->child : NULL;
}

const cJSON *sqlj_body(const cJSON *n)
{
    return sqlj_tag(n) ? n->child : NULL;
}

const cJSON *sqlj_get(const cJSON *body, const char *key)
{
    return body ? cJSON_GetObjectItemCaseSensitive(body, key) : NULL;
}

const char *sqlj_str(const cJSON *body, const char *key)
{
    const cJSON *v = sqlj_get(body, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int sqlj_int(const cJSON *body, const char *key, int dflt)
{
    const cJSON *v = sqlj_get(body, key);
    return cJSON_IsNumber(v) ? v->valueint : dflt;
}

bool sqlj_bool(const cJSON *body, const char *key)
{
    return cJSON_IsTrue(sqlj_get(body, key));
}

int sqlj_loc(const cJSON *n)
{
    if (!n)
        return -1;
    const cJSON *b = sqlj_tag(n) && !cJSON_GetObjectItemCaseSensitive(n, "location") ? n->child : n;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(b, "location");
    return cJSON_IsNumber(v) ? v->valueint : -1;
}

const char *sqlj_sval(const cJSON *n)
{
    const cJSON *b = sqlj_is(n, "String");
    return b ? (sqlj_str(b, "sval") ? sqlj_str(b, "sval") : "") : NULL;
}

const char *sqlj_last_name(const cJSON *list)
{
    const char *last = NULL;
    const cJSON *it;
    cJSON_ArrayForEach(it, list)
    {
        const char *s = sqlj_sval(it);
        if (s)
            last = s;
    }
    return last;
}

const cJSON *sqlj_list(const cJSON *n)
{
    const cJSON *l = sqlj_is(n, "List");
    if (l)
        return sqlj_get(l, "items");
    return n;
}
