/*
 * http_tables.c — table endpoints: list, create, describe, drop, and the
 * operations flush and merge.
 *
 * Layer: server/.  Calls query/quarry.h, the base kit and cJSON.
 */
#include "server/http_int.h"
#include "store/mem.h"
#include "store/schema.h"
#include "store/util.h"

#include <cJSON.h>
#include <dirent.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>

QrTable *http_table_get(HttpReq *r)
{
    QrError e;
    qr_error_clear(&e);
    QrTable *t = NULL;
    if (qr_table_get(r->srv->db, r->t ? r->t : "", &t, &e) != QR_OK) {
        http_error_from(r, &e);
        if (e.code == QR_ENOTFOUND)
            http_error_hint(r, "GET /tables lists the tables; POST /tables creates one");
        return NULL;
    }
    return t;
}

void http_stats_fields(QrBuf *b, const QrTableStats *st)
{
    qr_buf_printf(b,
                  "\"docs\":%llu,\"docs_total\":%llu,\"segments\":%llu,\"disk_bytes\":%llu,"
                  "\"wal_bytes\":%llu,\"merges_done\":%llu,\"merges_running\":%llu,"
                  "\"commits\":%llu,\"checkpoints\":%llu,\"mem_segments\":%llu,"
                  "\"mem_bytes\":%llu,\"peak_segments\":%llu,\"wal_syncs\":%llu",
                  (unsigned long long)st->docs, (unsigned long long)st->docs_total,
                  (unsigned long long)st->segments, (unsigned long long)st->disk_bytes,
                  (unsigned long long)st->wal_bytes, (unsigned long long)st->merges_done,
                  (unsigned long long)st->merges_running, (unsigned long long)st->commits,
                  (unsigned long long)st->checkpoints, (unsigned long long)st->mem_segments,
                  (unsigned long long)st->mem_bytes, (unsigned long long)st->peak_segments,
                  (unsigned long long)st->wal_syncs);
}

/* GET /tables: names with their statistics. */
void http_tables_list(HttpReq *r)
{
    QrError e;
    qr_error_clear(&e);
    char **names = NULL;
    int n = 0;
    if (qr_table_list(r->srv->db, &names, &n, &e) != QR_OK) {
        http_error_from(r, &e);
        return;
    }
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_append(&b, "{\"tables\":[", 11);
    int shown = 0;
    for (int i = 0; i < n; i++) {
        if (http_table_enter(r->srv, names[i], false) == QR_OK) {
            QrTable *t;
            qr_error_clear(&e);
            if (qr_table_get(r->srv->db, names[i], &t, &e) == QR_OK) {
                QrTableStats st;
                qr_table_stats(t, &st);
                if (shown++)
                    qr_buf_putc(&b, ',');
                qr_buf_putc(&b, '{');
                jw_key(&b, "name");
                jw_cstr(&b, names[i]);
                qr_buf_putc(&b, ',');
                http_stats_fields(&b, &st);
                qr_buf_putc(&b, '}');
            } else if (e.code != QR_ENOTFOUND) {
                /* a damaged table is listed with its error, not hidden */
                if (shown++)
                    qr_buf_putc(&b, ',');
                qr_buf_putc(&b, '{');
                jw_key(&b, "name");
                jw_cstr(&b, names[i]);
                qr_buf_putc(&b, ',');
                QrBuf eb;
                qr_buf_init(&eb);
                http_error_json(&eb, e.code, &e);
                /* {"error":{...}} without its braces */
                if (eb.len > 2)
                    qr_buf_append(&b, eb.data + 1, eb.len - 2);
                qr_buf_free(&eb);
                qr_buf_putc(&b, '}');
            }
            http_table_leave(r->srv, names[i], false);
        }
        qr_free(names[i]);
    }
    qr_free(names);
    qr_buf_append(&b, "]}", 2);
    http_reply_json(r, 200, &b);
}

/* ,"columns":[...]: per-column statistics of the live snapshot (what the
 * planner costs with); omitted when they cannot be read. */
static void columns_json(QrBuf *b, QrTable *t)
{
    QrError e;
    qr_error_clear(&e);
    QrColumnStats *cs = NULL;
    int n = 0;
    if (qr_table_column_stats(t, &cs, &n, &e) != QR_OK)
        return;
    qr_buf_append(b, ",\"columns\":[", 12);
    for (int i = 0; i < n; i++) {
        const QrColumnStats *c = &cs[i];
        if (i)
            qr_buf_putc(b, ',');
        qr_buf_putc(b, '{');
        jw_key(b, "name");
        jw_cstr(b, c->name);
        qr_buf_putc(b, ',');
        jw_key(b, "type");
        jw_cstr(b, c->col_type ? c->col_type : "");
        qr_buf_printf(b, ",\"rows\":%llu,\"nulls\":%llu", (unsigned long long)c->rows,
                      (unsigned long long)c->nulls);
        /* min_json/max_json are JSON values made by the engine */
        if (c->has_range)
            qr_buf_printf(b, ",\"min\":%s,\"max\":%s", c->min_json, c->max_json);
        else
            qr_buf_append(b, ",\"min\":null,\"max\":null", 22);
        qr_buf_printf(b,
                      ",\"distinct\":{\"at_least\":%llu,\"at_most\":%llu,\"estimate\":%.0f},"
                      "\"segments\":%u,\"segments_sorted\":%u,\"blocks\":%u,"
                      "\"histogram_buckets\":%u,\"btree\":%s,\"segments_btree\":%u}",
                      (unsigned long long)c->distinct_max, (unsigned long long)c->distinct_sum,
                      c->distinct_hll, c->segments, c->segments_sorted, c->blocks,
                      c->hist_buckets, c->btree ? "true" : "false", c->segments_btree);
    }
    qr_buf_putc(b, ']');
    qr_free(cs);
}

/* ,"files":{...}: bytes on disk by kind (segments hold postings, columns
 * and stored documents; B-tree side files are per field), read from the
 * table's directory. */
static void files_json(QrBuf *b, QrDb *db, QrTable *t)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tables/%s", qr_db_dir(db), qr_table_name(t));
    DIR *d = opendir(dir);
    if (!d)
        return;
    const QrSchema *sc = qr_table_schema(t);
    uint64_t seg_n = 0, seg_bytes = 0, other = 0; /* the WAL is in stats */
    uint64_t bt_n[QR_MAX_FIELDS] = {0}, bt_bytes[QR_MAX_FIELDS] = {0};
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat stt;
        if (stat(path, &stt) != 0)
            continue;
        uint64_t sz = (uint64_t)stt.st_size;
        const char *f = strstr(de->d_name, ".f");
        size_t len = strlen(de->d_name);
        int field;
        if (len > 5 && !strcmp(de->d_name + len - 5, ".qseg")) {
            seg_n++;
            seg_bytes += sz;
        } else if (len > 4 && !strcmp(de->d_name + len - 4, ".qbt") && f &&
                   sscanf(f, ".f%d", &field) == 1 && field >= 0 && field < QR_MAX_FIELDS) {
            bt_n[field]++;
            bt_bytes[field] += sz;
        } else if (S_ISREG(stt.st_mode)) {
            other += sz;
        }
    }
    closedir(d);
    qr_buf_printf(b, ",\"files\":{\"segments\":{\"count\":%llu,\"bytes\":%llu},"
                     "\"other_bytes\":%llu,\"btrees\":[",
                  (unsigned long long)seg_n, (unsigned long long)seg_bytes,
                  (unsigned long long)other);
    int shown = 0;
    for (int f = 0; f < QR_MAX_FIELDS && f < sc->n_fields; f++) {
        if (!bt_n[f])
            continue;
        if (shown++)
            qr_buf_putc(b, ',');
        qr_buf_putc(b, '{');
        jw_key(b, "field");
        jw_cstr(b, sc->fields[f].name);
        qr_buf_printf(b, ",\"files\":%llu,\"bytes\":%llu}", (unsigned long long)bt_n[f],
                      (unsigned long long)bt_bytes[f]);
    }
    qr_buf_append(b, "]}", 2);
}

static void describe(HttpReq *r, QrTable *t, int status)
{
    QrError e;
    qr_error_clear(&e);
    QrBuf sb;
    qr_buf_init(&sb);
    if (schema_to_json(qr_table_schema(t), false, &sb, &e) != QR_OK) {
        qr_buf_free(&sb);
        http_error_from(r, &e);
        return;
    }
    QrTableStats st;
    qr_table_stats(t, &st);
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_putc(&b, '{');
    jw_key(&b, "name");
    jw_cstr(&b, qr_table_name(t));
    qr_buf_append(&b, ",\"schema\":", 10);
    qr_buf_append(&b, sb.data, sb.len);
    qr_buf_append(&b, ",\"stats\":{", 10);
    http_stats_fields(&b, &st);
    qr_buf_putc(&b, '}');
    columns_json(&b, t);
    files_json(&b, r->srv->db, t);
    qr_buf_putc(&b, '}');
    qr_buf_free(&sb);
    http_reply_json(r, status, &b);
}

/* POST /tables {"name": "...", "schema": {...}} */
void http_tables_create(HttpReq *r)
{
    cJSON *root = http_body_json(r);
    if (!root)
        return;
    QrSchema *schema = NULL;
    char *stxt = NULL;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    const cJSON *sch = cJSON_GetObjectItemCaseSensitive(root, "schema");
    if (!cJSON_IsObject(root)) {
        http_error(r, QR_EINVAL, "request body must be a JSON object");
        goto out;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, root)
    {
        if (strcmp(it->string, "name") != 0 && strcmp(it->string, "schema") != 0) {
            http_error(r, QR_EINVAL, "unknown key \"%.60s\" in the table definition", it->string);
            http_error_hint(r, "send {\"name\": ..., \"schema\": {...}}");
            goto out;
        }
    }
    if (!cJSON_IsString(name)) {
        http_error(r, QR_EINVAL, "\"name\" (a string) is required");
        goto out;
    }
    if (!cJSON_IsObject(sch)) {
        http_error(r, QR_EINVAL, "\"schema\" (an object) is required");
        http_error_hint(r, "e.g. {\"primary_key\":\"id\",\"fields\":[{\"name\":\"body\","
                           "\"type\":\"text\"}]}; or POST JSONL to /tables/%s/documents to "
                           "infer one",
                        name->valuestring);
        goto out;
    }
    stxt = cJSON_PrintUnformatted(sch);
    schema = qr_malloc(sizeof *schema);
    if (!stxt || !schema) {
        http_error(r, QR_ENOMEM, "out of memory");
        goto out;
    }
    QrError e;
    qr_error_clear(&e);
    if (schema_from_json(stxt, strlen(stxt), schema, &e) != QR_OK) {
        if (e.code == QR_ESYNTAX)
            e.code = QR_EINVAL; /* the JSON was fine; its content is not */
        e.offset = -1;
        http_error_from(r, &e);
        goto out;
    }
    if (http_table_enter(r->srv, name->valuestring, false) != QR_OK) {
        http_error(r, QR_ENOMEM, "out of memory");
        goto out;
    }
    QrTable *t;
    if (qr_table_create(r->srv->db, name->valuestring, schema, &t, &e) != QR_OK) {
        http_error_from(r, &e);
    } else {
        char loc[128];
        snprintf(loc, sizeof loc, "/tables/%s", name->valuestring);
        http_header(r, MHD_HTTP_HEADER_LOCATION, loc);
        describe(r, t, 201);
    }
    http_table_leave(r->srv, name->valuestring, false);
out:
    cJSON_free(stxt);
    qr_free(schema);
    cJSON_Delete(root);
}

/* GET /tables/{t} */
void http_tables_describe(HttpReq *r)
{
    QrTable *t = http_table_get(r);
    if (t)
        describe(r, t, 200);
}

/* DELETE /tables/{t} */
void http_tables_drop(HttpReq *r)
{
    QrError e;
    qr_error_clear(&e);
    int rc = http_table_drop(r->srv, r->t, &e);
    if (rc != QR_OK) {
        http_error_from(r, &e);
        return;
    }
    http_metrics_table_forget(r->srv, r->t);
    http_history_forget(r->srv->history, r->t);
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_append(&b, "{\"dropped\":", 11);
    jw_cstr(&b, r->t);
    qr_buf_putc(&b, '}');
    http_reply_json(r, 200, &b);
}

/* POST /tables/{t}/flush (checkpoint the write buffer into a segment) and
 * POST /tables/{t}/merge (merge every segment into one), both synchronous. */
static void table_op(HttpReq *r, bool merge)
{
    QrTable *t = http_table_get(r);
    if (!t)
        return;
    QrError e;
    qr_error_clear(&e);
    uint64_t t0 = qr_now_ns();
    if ((merge ? qr_merge(t, &e) : qr_flush(t, &e)) != QR_OK) {
        http_error_from(r, &e);
        return;
    }
    QrTableStats st;
    qr_table_stats(t, &st);
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_printf(&b, "{\"%s\":true,\"took_ms\":%.3f,\"stats\":{", merge ? "merged" : "flushed",
                  (double)(qr_now_ns() - t0) / 1e6);
    http_stats_fields(&b, &st);
    qr_buf_append(&b, "}}", 2);
    http_reply_json(r, 200, &b);
}

void http_tables_flush(HttpReq *r) { table_op(r, false); }
void http_tables_merge(HttpReq *r) { table_op(r, true); }

/* POST /tables/{t}/bm25_stats: this node's part of BM25's statistics, for
 * the other nodes of a split table (quarry serve --peers, server/peers.c;
 * docs/scale-out.md).  Body {"terms": [[field, term], ...], "generation":
 * G?}: terms as the asking node analyzed them, fields by name ("_all" for
 * the combined field; a field this table lacks counts 0).  Answer
 * {"generation": G', "docs": N, "fields": {name: [tokens, docs], ...},
 * "df": [...]}, all from one snapshot; when G' equals the G sent, the
 * totals the asker cached are still true and "docs"/"fields" are left out
 * ("unchanged": true).  G' moves with every published change of the table
 * (its snapshot version), with DDL, and with a restart of this server. */
#define BM25_STATS_MAX_TERMS 4096

void http_tables_bm25_stats(HttpReq *r)
{
    QrTable *t = http_table_get(r);
    if (!t)
        return;
    cJSON *root = http_body_json(r);
    if (!root)
        return;
    const cJSON *terms = cJSON_GetObjectItemCaseSensitive(root, "terms");
    const cJSON *gen = cJSON_GetObjectItemCaseSensitive(root, "generation");
    int n = cJSON_IsArray(terms) ? cJSON_GetArraySize(terms) : -1;
    QrTermStat *ts = NULL;
    if (n < 0 || (gen && !cJSON_IsString(gen))) {
        http_error(r, QR_EINVAL, "bm25_stats needs \"terms\": an array of [field, term] pairs");
        goto out;
    }
    if (n > BM25_STATS_MAX_TERMS) {
        http_error(r, QR_ELIMIT, "bm25_stats asks for %d terms (at most %d)", n,
                   BM25_STATS_MAX_TERMS);
        goto out;
    }
    const QrSchema *sc = qr_table_schema(t);
    if (!(ts = qr_calloc((size_t)n + 1, sizeof *ts))) {
        http_error(r, QR_ENOMEM, "out of memory");
        goto out;
    }
    int i = 0;
    const cJSON *pair;
    cJSON_ArrayForEach(pair, terms)
    {
        const cJSON *f = cJSON_GetArrayItem(pair, 0), *w = cJSON_GetArrayItem(pair, 1);
        if (cJSON_GetArraySize(pair) != 2 || !cJSON_IsString(f) || !cJSON_IsString(w)) {
            http_error(r, QR_EINVAL, "bm25_stats term %d is not a [field, term] pair of strings",
                       i + 1);
            goto out;
        }
        int fi = strcmp(f->valuestring, "_all") == 0 ? QR_ALL_FIELD : -1;
        for (int k = 0; fi < 0 && k < sc->n_fields; k++)
            if (!strcmp(sc->fields[k].name, f->valuestring))
                fi = k;
        ts[i++] = (QrTermStat){.field = fi, .text = w->valuestring,
                               .len = (uint32_t)strlen(w->valuestring)};
    }
    QrBm25Stats *st = qr_malloc(sizeof *st);
    QrError e;
    qr_error_clear(&e);
    if (!st || qr_table_bm25_stats(t, st, ts, n, &e) != QR_OK) {
        if (!st)
            http_error(r, QR_ENOMEM, "out of memory");
        else
            http_error_from(r, &e);
        qr_free(st);
        goto out;
    }
    char g[96];
    snprintf(g, sizeof g, "%lld.%llu.%llu", (long long)r->srv->started_wall_us,
             (unsigned long long)qr_db_ddl_generation(r->srv->db),
             (unsigned long long)st->version);
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_append(&b, "{\"generation\":", 14);
    jw_cstr(&b, g);
    if (gen && !strcmp(gen->valuestring, g)) {
        qr_buf_append(&b, ",\"unchanged\":true", 17);
    } else {
        qr_buf_printf(&b, ",\"docs\":%llu,\"fields\":{", (unsigned long long)st->n_docs);
        bool first = true;
        for (int f = 0; f <= sc->n_fields; f++) {
            int key = f < sc->n_fields ? f : QR_ALL_FIELD;
            if (!st->field_docs[key] && !st->field_tokens[key])
                continue;
            if (!first)
                qr_buf_putc(&b, ',');
            first = false;
            jw_cstr(&b, key == QR_ALL_FIELD ? "_all" : sc->fields[f].name);
            qr_buf_printf(&b, ":[%llu,%llu]", (unsigned long long)st->field_tokens[key],
                          (unsigned long long)st->field_docs[key]);
        }
        qr_buf_putc(&b, '}');
    }
    qr_buf_append(&b, ",\"df\":[", 7);
    for (int k = 0; k < n; k++)
        qr_buf_printf(&b, "%s%llu", k ? "," : "", (unsigned long long)ts[k].df);
    qr_buf_append(&b, "]}", 2);
    qr_free(st);
    http_reply_json(r, 200, &b);
out:
    qr_free(ts);
    cJSON_Delete(root);
}

/* GET /tables/{t}/synonyms: {"synonyms": [...] or {...} or null} */
void http_synonyms_get(HttpReq *r)
{
    QrTable *t = http_table_get(r);
    if (!t)
        return;
    char *txt;
    size_t len;
    QrError e;
    qr_error_clear(&e);
    if (qr_table_synonyms(t, &txt, &len, &e) != QR_OK) {
        http_error_from(r, &e);
        return;
    }
    QrBuf b;
    qr_buf_init(&b);
    qr_buf_append(&b, "{\"synonyms\":", 12);
    if (txt)
        qr_buf_append(&b, txt, len);
    else
        qr_buf_append(&b, "null", 4);
    qr_buf_putc(&b, '}');
    qr_free(txt);
    http_reply_json(r, 200, &b);
}

/* PUT /tables/{t}/synonyms {"synonyms": [["tty", "terminal"]] or
 * {"tty": ["terminal"]} or null}: replaces them, durable on return; every
 * search compiled afterwards (HTTP and SQL) applies them. */
void http_synonyms_put(HttpReq *r)
{
    QrTable *t = http_table_get(r);
    if (!t)
        return;
    cJSON *root = http_body_json(r);
    if (!root)
        return;
    const cJSON *syn = cJSON_GetObjectItemCaseSensitive(root, "synonyms");
    if (!cJSON_IsObject(root) || !syn || cJSON_GetArraySize(root) != 1) {
        http_error(r, QR_EINVAL, "request body must be {\"synonyms\": ...}");
        http_error_hint(r, "e.g. {\"synonyms\": [[\"tty\", \"terminal\"]]} or "
                           "{\"synonyms\": {\"tty\": [\"terminal\"]}}; null removes them");
        cJSON_Delete(root);
        return;
    }
    char *txt = cJSON_IsNull(syn) ? NULL : cJSON_PrintUnformatted(syn);
    QrError e;
    qr_error_clear(&e);
    int rc = qr_table_set_synonyms(t, txt ? txt : "", txt ? strlen(txt) : 0, &e);
    cJSON_free(txt);
    cJSON_Delete(root);
    if (rc != QR_OK) {
        if (e.code == QR_ESYNTAX)
            e.code = QR_EINVAL;
        http_error_from(r, &e);
        return;
    }
    http_synonyms_get(r);
}
