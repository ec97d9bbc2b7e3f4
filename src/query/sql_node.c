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

/* ---- reading the parser's JSON without recursion ----
 *
 * cJSON_Parse refuses nesting deeper than 1000 (a 500-term sum) and
 * cJSON_Delete recurses once per level; libpg_query's output for a long
 * left-deep chain is thousands of levels deep.  The reader below keeps its
 * open containers on a heap stack, and the tree is freed and walked the
 * same way, so only the binder's and executor's recursion remain, and those
 * check their depth (sql_guard.c). */

/* Four hex digits at p as a code unit; -1 if they are not. */
static int32_t json_hex4(const char *p)
{
    int32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char h = p[i];
        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                                 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v << 4 | d;
    }
    return v;
}

/* Decode the JSON string at *pp (just past the opening quote) into buf,
 * NUL-terminated; *pp ends past the closing quote.  False when malformed. */
static bool json_str(const char **pp, QrBuf *buf)
{
    const char *p = *pp;
    buf->len = 0;
    for (;;) {
        const char *q = p;
        while (*q && *q != '"' && *q != '\\')
            q++;
        qr_buf_append(buf, p, (size_t)(q - p));
        p = q;
        if (*p == '"')
            break;
        if (*p != '\\' || !p[1])
            return false;
        char c = p[1];
        p += 2;
        switch (c) {
        case '"': case '\\': case '/': qr_buf_putc(buf, (uint8_t)c); continue;
        case 'b': qr_buf_putc(buf, '\b'); continue;
        case 'f': qr_buf_putc(buf, '\f'); continue;
        case 'n': qr_buf_putc(buf, '\n'); continue;
        case 'r': qr_buf_putc(buf, '\r'); continue;
        case 't': qr_buf_putc(buf, '\t'); continue;
        case 'u': break;
        default: return false;
        }
        int32_t cp = json_hex4(p);
        if (cp < 0)
            return false;
        p += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && p[0] == '\\' && p[1] == 'u') { /* surrogate pair */
            int32_t lo = json_hex4(p + 2);
            if (lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            }
        }
        uint8_t u[4];
        int n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        if (n == 1)
            u[0] = (uint8_t)cp;
        else {
            for (int i = n - 1; i > 0; i--, cp >>= 6)
                u[i] = (uint8_t)(0x80 | (cp & 0x3F));
            u[0] = (uint8_t)((n == 2 ? 0xC0 : n == 3 ? 0xE0 : 0xF0) | cp);
        }
        qr_buf_append(buf, u, (size_t)n);
    }
    *pp = p + 1;
    qr_buf_putc(buf, 0);
    return qr_buf_ok(buf);
}

static const char *json_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
        p++;
    return p;
}

/* What a node costs in memory, about: the cJSON record and its strings,
 * each with malloc's overhead. */
#define JSON_NODE_BYTES (sizeof(cJSON) + 16)

int sqlj_parse(const char *json, int max_depth, size_t max_bytes, cJSON **out, int *depth_seen)
{
    *out = NULL;
    *depth_seen = 0;
    size_t bytes = 0;
    cJSON *root = NULL, **stack = NULL;
    int depth = 0, cap = 0, rc = QR_EINTERNAL;
    QrBuf key, str;
    qr_buf_init(&key);
    qr_buf_init(&str);
    const char *p = json_ws(json);
    for (;;) {
        cJSON *top = depth ? stack[depth - 1] : NULL;
        if (top && cJSON_IsObject(top)) { /* "key": */
            if (*p != '"')
                goto fail;
            p++;
            if (!json_str(&p, &key))
                goto fail;
            p = json_ws(p);
            if (*p++ != ':')
                goto fail;
            p = json_ws(p);
        }
        cJSON *item;
        bool open = false;
        if (*p == '{' || *p == '[') {
            item = *p == '{' ? cJSON_CreateObject() : cJSON_CreateArray();
            open = true;
            p++;
        } else if (*p == '"') {
            p++;
            if (!json_str(&p, &str))
                goto fail;
            item = cJSON_CreateString((const char *)str.data);
        } else if (!strncmp(p, "true", 4) || !strncmp(p, "false", 5) || !strncmp(p, "null", 4)) {
            item = *p == 'n' ? cJSON_CreateNull() : cJSON_CreateBool(*p == 't');
            p += *p == 'f' ? 5 : 4;
        } else {
            char *end;
            double d = strtod(p, &end);
            if (end == p)
                goto fail;
            item = cJSON_CreateNumber(d);
            p = end;
        }
        if (!item) {
            rc = QR_ENOMEM;
            goto fail;
        }
        bytes += JSON_NODE_BYTES + (top && cJSON_IsObject(top) ? key.len + 16 : 0) +
                 (cJSON_IsString(item) ? str.len + 16 : 0);
        if (max_bytes && bytes > max_bytes) {
            cJSON_Delete(item);
            rc = QR_ELIMIT; /* *depth_seen stays within max_depth: the size, not the depth */
            goto fail;
        }
        if (!top)
            root = item;
        else if (cJSON_IsArray(top))
            cJSON_AddItemToArray(top, item);
        else if (!cJSON_AddItemToObject(top, (const char *)key.data, item)) {
            cJSON_Delete(item);
            rc = QR_ENOMEM;
            goto fail;
        }
        if (open) {
            if (depth >= max_depth) {
                *depth_seen = depth + 1;
                rc = QR_ELIMIT;
                goto fail;
            }
            if (depth == cap) {
                int nc = cap ? cap * 2 : 64;
                cJSON **ns = qr_realloc(stack, (size_t)nc * sizeof *ns);
                if (!ns) {
                    rc = QR_ENOMEM;
                    goto fail;
                }
                stack = ns;
                cap = nc;
            }
            stack[depth++] = item;
            if (depth > *depth_seen)
                *depth_seen = depth;
            p = json_ws(p);
            if (*p != (cJSON_IsObject(item) ? '}' : ']'))
                continue; /* the first member */
        } else {
            p = json_ws(p);
            if (depth == 0)
                break;
            if (*p == ',') {
                p = json_ws(p + 1);
                continue;
            }
        }
        /* close containers: *p is '}' or ']' */
        for (;;) {
            if (*p != (cJSON_IsObject(stack[depth - 1]) ? '}' : ']'))
                goto fail;
            depth--;
            p = json_ws(p + 1);
            if (depth == 0 || *p != (cJSON_IsObject(stack[depth - 1]) ? '}' : ']'))
                break;
        }
        if (depth == 0)
            break;
        if (*p++ != ',')
            goto fail;
        p = json_ws(p);
    }
    if (*p || !qr_buf_ok(&key) || !qr_buf_ok(&str))
        goto fail;
    *out = root;
    root = NULL;
    rc = QR_OK;
fail:
    sqlj_delete(root);
    qr_free(stack);
    qr_buf_free(&key);
    qr_buf_free(&str);
    return rc;
}

void sqlj_delete(cJSON *root)
{
    /* children are spliced in front of the work list, so the list holds
     * every node still to free and no recursion is needed */
    cJSON *work = root;
    if (root)
        root->next = NULL;
    while (work) {
        cJSON *it = work;
        work = it->next;
        if (it->child) {
            cJSON *last = it->child;
            while (last->next)
                last = last->next;
            last->next = work;
            work = it->child;
            it->child = NULL;
        }
        it->next = it->prev = NULL;
        cJSON_Delete(it);
    }
}

int sqlj_walk(cJSON *root, int (*visit)(cJSON *node, void *arg), void *arg)
{
    cJSON **stack = NULL;
    int n = 0, cap = 0, rc = QR_OK;
    cJSON *cur = root;
    while (cur && rc == QR_OK) {
        if ((rc = visit(cur, arg)))
            break;
        /* next: the first child, else the next sibling of the nearest
         * ancestor (the root's own siblings are not visited) */
        if (cur->child) {
            if (n == cap) {
                int nc = cap ? cap * 2 : 64;
                cJSON **ns = qr_realloc(stack, (size_t)nc * sizeof *ns);
                if (!ns) {
                    rc = QR_ENOMEM;
                    break;
                }
                stack = ns;
                cap = nc;
            }
            stack[n++] = cur;
            cur = cur->child;
            continue;
        }
        while (cur && cur != root && !cur->next)
            cur = n ? stack[--n] : NULL;
        cur = cur && cur != root ? cur->next : NULL;
    }
    qr_free(stack);
    return rc;
}
