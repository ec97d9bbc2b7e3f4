/*
 * test_sql_catalog.c — pg_catalog / information_schema relations and the
 * catalog functions reflect the real tables: columns with their declared
 * types, NOT NULL and DEFAULT, indexes, stable OIDs that join across
 * relations, and SET / SHOW / RESET.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_util.h"
#include "sql_test_env.h"
#include "query/sql.h"


static QrSqlResult *q(Env *e, const char *sql)
{
    QrSqlResult *r = NULL;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_exec(e->s, sql, strlen(sql), &r, &err), QR_OK, "%s: %s", sql,
                 err.message);
    return r;
}

#define text env_result_text

static void expect(Env *e, const char *sql, const char *want)
{
    QrSqlResult *r = q(e, sql);
    char *got = text(r);
    cr_assert_str_eq(got, want, "%s", sql);
    free(got);
    qr_sql_result_free(r);
}

static void setup(Env *e)
{
    env_open(e);
    qr_sql_result_free(q(e, "CREATE TABLE news (id bigint PRIMARY KEY, title text, "
                            "symbol varchar(12) NOT NULL, views integer DEFAULT 0, "
                            "score real, published timestamptz)"));
    qr_sql_result_free(q(e, "CREATE TABLE tags (name text PRIMARY KEY)"));
    qr_sql_result_free(q(e, "CREATE INDEX news_symbol ON news (symbol)"));
    qr_sql_result_free(q(e, "INSERT INTO news (id, symbol) VALUES (1, 'A'), (2, 'B')"));
}

Test(sql_catalog, information_schema_columns_follow_the_ddl)
{
    Env e;
    setup(&e);
    expect(&e,
           "SELECT table_name, column_name, ordinal_position, data_type, is_nullable, "
           "character_maximum_length, column_default FROM information_schema.columns "
           "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position",
           "news|id|1|bigint|NO||\n"
           "news|title|2|text|YES||\n"
           "news|symbol|3|character varying|NO|12|\n"
           "news|views|4|integer|YES||0\n"
           "news|score|5|real|YES||\n"
           "news|published|6|timestamp with time zone|YES||\n"
           "tags|name|1|text|NO||\n");
    expect(&e, "SELECT table_name, table_type FROM information_schema.tables ORDER BY 1",
           "news|BASE TABLE\ntags|BASE TABLE\n");
    qr_sql_result_free(q(&e, "ALTER TABLE tags ADD COLUMN n smallint"));
    expect(&e,
           "SELECT column_name, data_type FROM information_schema.columns "
           "WHERE table_name = 'tags' ORDER BY ordinal_position",
           "name|text\nn|smallint\n");
    qr_sql_result_free(q(&e, "DROP TABLE tags"));
    expect(&e, "SELECT table_name FROM information_schema.tables ORDER BY 1", "news\n");
    env_close(&e);
}

Test(sql_catalog, pg_class_attribute_index_join_by_oid)
{
    Env e;
    setup(&e);
    /* what psql's \d news asks, in the joins the engine supports */
    expect(&e,
           "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.atthasdef "
           "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
           "WHERE c.relname = 'news' AND a.attnum > 0 ORDER BY a.attnum",
           "id|bigint|t|f\n"
           "title|text|f|f\n"
           "symbol|character varying(12)|t|f\n"
           "views|integer|f|t\n"
           "score|real|f|f\n"
           "published|timestamp with time zone|f|f\n");
    expect(&e,
           "SELECT c2.relname, i.indisprimary, i.indisunique, pg_get_indexdef(i.indexrelid) "
           "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_index i ON c.oid = i.indrelid "
           "JOIN pg_catalog.pg_class c2 ON i.indexrelid = c2.oid "
           "WHERE c.relname = 'news' ORDER BY c2.relname",
           "news_pkey|t|t|CREATE UNIQUE INDEX news_pkey ON public.news USING btree (id)\n"
           "news_symbol|f|f|CREATE INDEX news_symbol ON public.news USING btree (symbol)\n");
    expect(&e,
           "SELECT n.nspname, c.relname, c.relkind, c.reltuples FROM pg_catalog.pg_class c "
           "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
           "WHERE c.relkind = 'r' ORDER BY 2",
           "public|news|r|2\npublic|tags|r|0\n");
    /* OIDs are stable across sessions */
    QrSqlResult *a = q(&e, "SELECT oid FROM pg_class WHERE relname = 'news'");
    QrSqlSession *s2;
    QrError err;
    qr_error_clear(&err);
    cr_assert_eq(qr_sql_session_new(e.db, &s2, &err), QR_OK);
    QrSqlResult *b = NULL;
    const char *sql = "SELECT oid FROM pg_class WHERE relname = 'news'";
    cr_assert_eq(qr_sql_exec(s2, sql, strlen(sql), &b, &err), QR_OK, "%s", err.message);
    cr_assert_eq(a->n_rows, 1);
    cr_assert_eq(a->vals[0].u.i, b->vals[0].u.i);
    cr_assert_geq(a->vals[0].u.i, 16384);
    qr_sql_result_free(a);
    qr_sql_result_free(b);
    qr_sql_session_free(s2);
    /* postgres and template1 too: psql -l and pg_dumpall connect there first */
    expect(&e, "SELECT datname, datallowconn FROM pg_database ORDER BY 1",
           "postgres|f\nquarry|t\ntemplate0|f\ntemplate1|f\n");
    /* PostgreSQL's comment on the public schema only (COMMENT is not kept) */
    expect(&e, "SELECT objoid, description FROM pg_description", "2200|standard public schema\n");
    env_close(&e);
}

Test(sql_catalog, settings_and_functions)
{
    Env e;
    env_open(&e);
    expect(&e, "SELECT current_database(), current_schema()", "quarry|public\n");
    expect(&e, "SHOW search_path", "\"$user\", public\n");
    qr_sql_result_free(q(&e, "SET search_path TO public"));
    expect(&e, "SHOW search_path", "public\n");
    expect(&e, "SELECT current_setting('search_path')", "public\n");
    expect(&e, "SELECT setting FROM pg_settings WHERE name = 'search_path'", "public\n");
    qr_sql_result_free(q(&e, "RESET search_path"));
    expect(&e, "SHOW search_path", "\"$user\", public\n");
    qr_sql_result_free(q(&e, "SET application_name = 'tests'"));
    qr_sql_result_free(q(&e, "RESET ALL"));
    expect(&e, "SHOW application_name", "\n");
    QrSqlResult *r = q(&e, "SHOW ALL");
    cr_assert_eq(r->n_cols, 3);
    cr_assert_geq(r->n_rows, 10);
    qr_sql_result_free(r);
    r = q(&e, "SELECT version()");
    char *v = text(r);
    cr_assert(strstr(v, "PostgreSQL 15") && strstr(v, "Quarry"), "%s", v);
    free(v);
    qr_sql_result_free(r);
    QrSqlResult *bad = NULL;
    QrError err;
    qr_error_clear(&err);
    const char *sql = "SHOW no_such_setting";
    cr_assert_neq(qr_sql_exec(e.s, sql, strlen(sql), &bad, &err), QR_OK);
    cr_assert_str_eq(qr_error_sqlstate(&err), "42704");
    expect(&e, "SELECT format_type(1043, 24), format_type(20, -1), pg_encoding_to_char(6)",
           "character varying(20)|bigint|UTF8\n");
    env_close(&e);
}

/* psql 15's \d TABLE column query and SQLAlchemy's primary-key / index
 * reflection queries, verbatim: correlated subqueries, unnest and ANY over
 * catalog arrays, reg* casts. */
Test(sql_catalog, psql_describe_and_sqlalchemy_reflection_queries)
{
    Env e;
    setup(&e);
    expect(&e,
           "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod),\n"
           "  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)\n"
           "   FROM pg_catalog.pg_attrdef d\n"
           "   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),\n"
           "  a.attnotnull,\n"
           "  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t\n"
           "   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> "
           "t.typcollation) AS attcollation,\n"
           "  a.attidentity, a.attgenerated\n"
           "FROM pg_catalog.pg_attribute a\n"
           "WHERE a.attrelid = 'news'::regclass AND a.attnum > 0 AND NOT a.attisdropped\n"
           "ORDER BY a.attnum",
           "id|bigint||t|||\n"
           "title|text||f|||\n"
           "symbol|character varying(12)||t|||\n"
           "views|integer|0|f|||\n"
           "score|real||f|||\n"
           "published|timestamp with time zone||f|||\n");
    expect(&e,
           "SELECT a.attname FROM pg_attribute a JOIN (\n"
           "  SELECT unnest(ix.indkey) attnum, generate_subscripts(ix.indkey, 1) ord\n"
           "  FROM pg_index ix WHERE ix.indrelid = 'news'::regclass AND ix.indisprimary\n"
           ") k ON a.attnum=k.attnum\n"
           "WHERE a.attrelid = 'news'::regclass ORDER BY k.ord",
           "id\n");
    expect(&e,
           "SELECT i.relname, ix.indisunique, a.attname, ix.indkey::varchar, am.amname\n"
           "FROM pg_class t join pg_index ix on t.oid = ix.indrelid\n"
           "  join pg_class i on i.oid = ix.indexrelid\n"
           "  left outer join pg_attribute a on t.oid = a.attrelid and a.attnum = ANY(ix.indkey)\n"
           "  left outer join pg_am am on i.relam = am.oid\n"
           "WHERE t.oid = 'news'::regclass ORDER BY i.relname",
           "news_pkey|t|id|1|btree\n"
           "news_symbol|f|symbol|3|btree\n");
    expect(&e,
           "SELECT 'news'::regclass::text, 'news_symbol'::regclass = "
           "(SELECT indexrelid FROM pg_index WHERE NOT indisprimary AND indrelid = "
           "'news'::regclass), 'int4'::regtype::text, 2200::regnamespace::text, "
           "0::regtype::text",
           "news|t|integer|public|-\n");
    /* ::regtype[] and kin of names or oids print the names, as PostgreSQL's
     * regtype[] output does (a name with a space quoted, an unknown oid as its
     * number) */
    expect(&e,
           "SELECT '{int4,text,float8}'::regtype[], ARRAY[23, 25]::oid[]::regtype[], "
           "'{16,NULL,99999}'::regtype[], ('{bigint}'::regtype[])[1], "
           "'{news,news_symbol}'::regclass[]",
           "{integer,text,\"double precision\"}|{integer,text}|{boolean,NULL,99999}|bigint|"
           "{news,news_symbol}\n");
    QrError err;
    qr_error_clear(&err);
    QrSqlResult *r = NULL;
    cr_assert_neq(qr_sql_exec(e.s, "select 'nope'::regclass", 23, &r, &err), QR_OK);
    cr_assert_str_eq(qr_error_sqlstate(&err), "42P01");
    qr_error_clear(&err);
    cr_assert_neq(qr_sql_exec(e.s, "select '{int4,nope}'::regtype[]", 31, &r, &err), QR_OK);
    cr_assert_str_eq(qr_error_sqlstate(&err), "42704");
    env_close(&e);
}

/* SET TIME ZONE: timestamptz prints as the local time there, with its offset
 * (daylight saving included); storage and comparisons stay UTC. */
Test(sql_catalog, set_time_zone_shows_timestamptz_there)
{
    Env e;
    env_open(&e);
    const char *ts = "SELECT '2024-01-15 10:00:00+00'::timestamptz, "
                     "'2024-07-15 10:00:00.25+00'::timestamptz, "
                     "'2024-01-15 10:00:00+00'::timestamptz = '2024-01-15 05:00:00-05'::timestamptz";
    expect(&e, ts, "2024-01-15 10:00:00+00|2024-07-15 10:00:00.25+00|t\n");
    qr_sql_result_free(q(&e, "SET TIME ZONE 'America/New_York'"));
    expect(&e, ts, "2024-01-15 05:00:00-05|2024-07-15 06:00:00.25-04|t\n");
    qr_sql_result_free(q(&e, "SET TimeZone = 'Asia/Kathmandu'"));
    expect(&e, ts, "2024-01-15 15:45:00+05:45|2024-07-15 15:45:00.25+05:45|t\n");
    qr_sql_result_free(q(&e, "SET TIME ZONE '-03:30'"));
    expect(&e, ts, "2024-01-15 06:30:00-03:30|2024-07-15 06:30:00.25-03:30|t\n");
    expect(&e, "SHOW timezone", "-03:30\n");
    QrSqlResult *r = NULL;
    QrError err;
    qr_error_clear(&err);
    const char *bad = "SET TIME ZONE 'Nowhere/Land'";
    cr_assert_neq(qr_sql_exec(e.s, bad, strlen(bad), &r, &err), QR_OK);
    cr_assert_str_eq(qr_error_sqlstate(&err), "22023", "%s", err.message);
    qr_sql_result_free(r);
    qr_sql_result_free(q(&e, "RESET TIME ZONE"));
    expect(&e, ts, "2024-01-15 10:00:00+00|2024-07-15 10:00:00.25+00|t\n");
    env_close(&e);
}
