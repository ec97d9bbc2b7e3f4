"""psql's backslash commands (\\d, \\d+, \\dt, \\di, \\ds, \\dn, \\du, \\df, \\l, \\dx), psql -l
and the catalog functions behind them, asserted against the schema the module makes:
a SERIAL key, an identity column, a table without a key, a B-tree index, a sequence."""

SETUP = """
CREATE TABLE cat_items (id serial PRIMARY KEY, name varchar(40) NOT NULL, price float8,
                        qty int, body text);
CREATE INDEX cat_items_name_idx ON cat_items (name);
CREATE TABLE cat_ident (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v int);
CREATE TABLE cat_nokey (a int, b text);
CREATE SEQUENCE cat_seq START 100 INCREMENT 5;
INSERT INTO cat_items (name, price, qty, body) VALUES ('a', 1.5, 3, 'hello'), ('b', 2.5, 4, 'world');
"""


def lines(out):
    return [ln.strip() for ln in out.splitlines()]


def run(ctx):
    psql = ctx.srv.psql
    rc, out, err = psql("-v", "ON_ERROR_STOP=1", "-q", "-c", SETUP)
    ctx.check(rc == 0, "schema made: %s" % err)

    rc, out, err = psql("-At", "-c", "\\d cat_items")
    rows = [ln.split("|") for ln in lines(out)]
    cols = {r[0]: r for r in rows if len(r) >= 5}
    ctx.check(rc == 0 and cols.get("id", [None, None])[1] == "integer"
              and cols["id"][3] == "not null"
              and cols["id"][4] == "nextval('cat_items_id_seq'::regclass)",
              "\\d: serial key is integer, not null, nextval default: %r %r" % (out, err))
    ctx.check(cols.get("name", [None, None])[1] == "character varying(40)" and
              cols["name"][3] == "not null", "\\d: varchar(40) not null: %r" % out)
    ctx.check(cols.get("price", [None, None])[1] == "double precision" and
              cols.get("qty", [None, None])[1] == "integer" and
              cols.get("body", [None, None])[1] == "text", "\\d: declared types: %r" % out)
    rc, out, err = psql("-c", "\\d cat_items")
    ctx.check('"cat_items_pkey" PRIMARY KEY, btree (id)' in out and
              '"cat_items_name_idx" btree (name)' in out, "\\d lists the indexes: %r %r" % (out, err))
    rc, out, err = psql("-c", "\\d+ cat_items")
    ctx.check(rc == 0 and "Access method: heap" in out and "extended" in out, "\\d+: %r %r" % (out, err))

    # a table made over HTTP, with an integer key and no SQL metadata: types from storage
    st, body = ctx.srv.call("POST", "/tables", {"name": "cat_http", "schema": {
        "primary_key": "id", "fields": [{"name": "n", "type": "int"}, {"name": "t", "type": "text"},
                                        {"name": "k", "type": "keyword"}]}})
    ctx.check(st == 201, "table made over HTTP: %r %r" % (st, body))
    st, body = ctx.srv.call("POST", "/tables/cat_http/documents", {"id": 7, "n": 1, "t": "x", "k": "y"})
    rc, out, err = psql("-At", "-c", "\\d cat_http")
    ctx.check(rc == 0 and lines(out) == ["id|bigint||not null|", "n|bigint|||", "t|text|||",
                                         "k|character varying|||"],
              "\\d of a table made over HTTP: the integer key is bigint: %r %r" % (out, err))

    rc, out, err = psql("-At", "-c", "\\d cat_ident")
    ctx.check(rc == 0 and "id|bigint||not null|generated always as identity" in lines(out),
              "\\d: identity column: %r %r" % (out, err))
    rc, out, err = psql("-At", "-c", "\\d cat_nokey")
    ctx.check(rc == 0 and [ln.split("|")[0] for ln in lines(out)] == ["a", "b"],
              "\\d: a table without a key shows its columns only (no row id): %r %r" % (out, err))

    rc, out, err = psql("-At", "-c", "\\dt cat_*")
    names = sorted(ln.split("|")[1] for ln in lines(out) if ln)
    ctx.check(rc == 0 and names == ["cat_http", "cat_ident", "cat_items", "cat_nokey"], "\\dt: %r %r" % (out, err))
    rc, out, err = psql("-At", "-c", "\\di cat_*")
    names = sorted(ln.split("|")[1] for ln in lines(out) if ln)
    ctx.check(rc == 0 and names == ["cat_http_pkey", "cat_ident_pkey", "cat_items_name_idx", "cat_items_pkey"],
              "\\di: %r %r" % (out, err))
    rc, out, err = psql("-At", "-c", "\\ds cat_*")
    names = sorted(ln.split("|")[1] for ln in lines(out) if ln)
    ctx.check(rc == 0 and names == ["cat_ident_id_seq", "cat_items_id_seq", "cat_seq"],
              "\\ds lists sequences (not the row id's): %r %r" % (out, err))
    rc, out, err = psql("-At", "-c", "\\d cat_seq")
    ctx.check(rc == 0 and "bigint|100|1|9223372036854775807|5|no|1" in lines(out),
              "\\d of a sequence: %r %r" % (out, err))
    rc, out, err = psql("-c", "\\d cat_items_id_seq")
    ctx.check(rc == 0 and "Owned by: public.cat_items.id" in out, "\\d: serial sequence owned: %r %r" % (out, err))
    rc, out, err = psql("-At", "-c", "\\dn")
    ctx.check(rc == 0 and "public|tester" in lines(out), "\\dn: %r %r" % (out, err))
    rc, out, err = psql("-At", "-c", "\\du")
    ctx.check(rc == 0 and any(ln.startswith("tester|") for ln in lines(out)),
              "\\du names the connected role (pg_auth_members): %r %r" % (out, err))
    rc, out, err = psql("-c", "\\df")
    ctx.check(rc == 0 and "List of functions" in out, "\\df (pg_function_is_visible): %r %r" % (out, err))
    rc, out, err = psql("-At", "-c", "\\df pg_catalog.nextval")
    ctx.check(rc == 0 and "pg_catalog|nextval|bigint" in out, "\\df pg_catalog.nextval: %r %r" % (out, err))
    rc, out, err = psql("-c", "\\dx")
    ctx.check(rc == 0 and "List of installed extensions" in out, "\\dx: %r %r" % (out, err))
    rc, out, err = psql("-At", "-c", "\\l")
    dbs = [ln.split("|")[0] for ln in lines(out)]
    ctx.check(rc == 0 and {"quarry", "postgres", "template1"} <= set(dbs), "\\l: %r %r" % (out, err))
    p_env = ctx.srv.env()
    p_env.pop("PGDATABASE", None)
    import subprocess
    p = subprocess.run(["psql", "-X", "-l", "-At"], env=p_env, capture_output=True, text=True, timeout=60)
    ctx.check(p.returncode == 0 and "quarry" in p.stdout, "psql -l (connects to postgres): %r" % p.stderr)

    rc, out, err = psql("-At", "-c",
                        "SELECT current_user, session_user, current_schemas(true), "
                        "pg_get_serial_sequence('cat_items', 'id'), "
                        "pg_relation_size('cat_items') > 0, pg_total_relation_size('cat_items') > 0")
    ctx.check(rc == 0 and out.strip() == "tester|tester|{pg_catalog,public}|public.cat_items_id_seq|t|t",
              "current_user is the role, current_schemas, serial sequence, sizes: %r %r" % (out, err))
    rc, out, err = psql("-At", "-c", "SELECT n.nspname FROM pg_namespace n "
                        "WHERE n.nspname = ANY(current_schemas(true)) ORDER BY 1")
    ctx.check(rc == 0 and lines(out) == ["pg_catalog", "public"], "= ANY(current_schemas()): %r %r" % (out, err))
    rc, out, err = psql("-At", "-c", "SELECT sequencename, data_type, start_value, increment_by "
                        "FROM pg_sequences WHERE sequencename LIKE 'cat_%' ORDER BY 1")
    ctx.check(rc == 0 and lines(out) == ["cat_ident_id_seq|bigint|1|1", "cat_items_id_seq|integer|1|1",
                                         "cat_seq|bigint|100|5"], "pg_sequences: %r %r" % (out, err))
    rc, out, err = psql("-At", "-c", "SELECT column_name, data_type, is_identity, column_default "
                        "FROM information_schema.columns WHERE table_name = 'cat_ident' ORDER BY ordinal_position")
    ctx.check(rc == 0 and lines(out) == ["id|bigint|YES|", "v|integer|NO|"],
              "information_schema.columns: identity: %r %r" % (out, err))
    rc, out, err = psql("-At", "-c", "SELECT tc.constraint_name, tc.constraint_type, k.column_name, "
                        "k.ordinal_position FROM information_schema.table_constraints tc "
                        "JOIN information_schema.key_column_usage k ON k.constraint_name = tc.constraint_name "
                        "WHERE tc.table_name LIKE 'cat_%' ORDER BY 1")
    ctx.check(rc == 0 and lines(out) == ["cat_http_pkey|PRIMARY KEY|id|1", "cat_ident_pkey|PRIMARY KEY|id|1",
                                         "cat_items_pkey|PRIMARY KEY|id|1"],
              "information_schema.table_constraints / key_column_usage: %r %r" % (out, err))
    rc, out, err = psql("-At", "-c", "SELECT count(*) FROM information_schema.views")
    ctx.check(rc == 0 and out.strip() == "0", "information_schema.views: %r %r" % (out, err))
    # DBeaver's navigator queries (schemas with comments, relations, columns with defaults)
    rc, out, err = psql("-At", "-c", "SELECT n.oid, n.nspname, d.description FROM pg_catalog.pg_namespace n "
                        "LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid = n.oid AND d.objsubid = 0 "
                        "AND d.classoid = 'pg_namespace'::regclass ORDER BY nspname")
    ctx.check(rc == 0 and "2200|public|standard public schema" in lines(out), "DBeaver: schemas: %r %r" % (out, err))
    rc, out, err = psql("-At", "-c", "SELECT c.relname, c.relkind, pg_catalog.pg_get_expr(c.relpartbound, c.oid), "
                        "pg_catalog.pg_get_partkeydef(c.oid) FROM pg_catalog.pg_class c LEFT OUTER JOIN "
                        "pg_catalog.pg_description d ON d.objoid = c.oid AND d.objsubid = 0 AND "
                        "d.classoid = 'pg_class'::regclass WHERE c.relnamespace = 'public'::regnamespace "
                        "AND c.relkind NOT IN ('i', 'I', 'c') AND c.relname LIKE 'cat_items%' ORDER BY 1")
    ctx.check(rc == 0 and lines(out) == ["cat_items|r||", "cat_items_id_seq|S||"],
              "DBeaver: relations: %r %r" % (out, err))
    rc, out, err = psql("-At", "-c", "SELECT a.attname, pg_catalog.pg_get_expr(ad.adbin, ad.adrelid, true), "
                        "dep.objid IS NOT NULL FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c "
                        "ON a.attrelid = c.oid LEFT OUTER JOIN pg_catalog.pg_attrdef ad ON "
                        "(a.attrelid = ad.adrelid AND a.attnum = ad.adnum) LEFT OUTER JOIN pg_depend dep "
                        "ON dep.refobjid = a.attrelid AND dep.deptype = 'i' AND dep.refobjsubid = a.attnum "
                        "AND dep.classid = dep.refclassid WHERE NOT a.attisdropped AND "
                        "c.oid = 'cat_ident'::regclass ORDER BY a.attnum")
    ctx.check(rc == 0 and lines(out) == ["id||t", "v||f"], "DBeaver: columns, identity: %r %r" % (out, err))
    rc, out, err = psql("-At", "-c", "SELECT setting FROM pg_catalog.pg_settings WHERE name = 'max_index_keys'")
    ctx.check(rc == 0 and out.strip() == "32", "DBeaver: max_index_keys: %r %r" % (out, err))
    # RowDescription names each column's table OID and attnum (psycopg 3's pgresult shows them)
    script = ("import psycopg, sys\n"
              "c = psycopg.connect(sys.argv[1])\n"
              "cur = c.execute('SELECT name, qty + 1, id FROM cat_items LIMIT 1')\n"
              "r = cur.pgresult\n"
              "oid = c.execute(\"SELECT 'cat_items'::regclass::oid\").fetchone()[0]\n"
              "print([(r.ftable(i) == oid, r.ftablecol(i)) for i in range(3)])\n")
    import subprocess
    p = subprocess.run(["/usr/bin/python3", "-c", script, ctx.dsn()], capture_output=True, text=True,
                       timeout=60)
    ctx.check(p.returncode == 0 and p.stdout.strip() == "[(True, 2), (False, 0), (True, 1)]",
              "RowDescription table OID and attnum: %r %r" % (p.stdout, p.stderr[-800:]))
    # SET TIME ZONE is honoured for timestamptz output (and reported to the client)
    rc, out, err = psql("-At", "-c", "SET TIME ZONE 'Asia/Kathmandu'", "-c",
                        "SELECT '2024-01-15 10:00:00+00'::timestamptz", "-c", "SHOW TimeZone")
    ctx.check(rc == 0 and lines(out) == ["SET", "2024-01-15 15:45:00+05:45", "Asia/Kathmandu"],
              "SET TIME ZONE: %r %r" % (out, err))
    rc, out, err = psql("-c", "SET TIME ZONE 'Nowhere/Land'")
    ctx.check("invalid value for parameter" in err, "an unknown zone is an error: %r" % err)
