"""SQL writes end to end through the real binary (`quarry sql` and POST /sql),
checked against SQLite (python sqlite3) running the same statements on the
same generated data: INSERT (multi-row, column lists, ON CONFLICT DO
NOTHING / DO UPDATE), UPDATE and DELETE with varied WHEREs must leave
identical tables and fail on the same statements (duplicate keys).  Also:
transaction rollback leaves nothing, a failed block answers 25P02 until
ROLLBACK, COPY reports the bad line and loads nothing, COPY round trips,
and the catalog (information_schema, pg_class) reflects the real tables."""
import http.client
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import time

from qtest import BIN, DataDir, check, finish, run

rng = random.Random(4242)
NAMES = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "it's", "x,y"]

QUARRY_DDL = ("CREATE TABLE items (id bigint PRIMARY KEY, name varchar(30), qty integer, "
              "price double precision, flag boolean);")
SQLITE_DDL = ("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, qty INTEGER, "
              "price REAL, flag INTEGER)")


def lit(v, dialect):
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        if dialect == "sqlite":
            return "1" if v else "0"
        return "true" if v else "false"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return repr(v)


def row():
    return (rng.randint(1, 60), rng.choice(NAMES + [None]),
            rng.choice([None] + list(range(-5, 50))),
            rng.choice([None, 0.25 * rng.randint(0, 400)]), rng.choice([True, False, None]))


def gen_statement():
    """One statement as (quarry text, sqlite text)."""
    k = rng.random()
    if k < 0.35:
        rows = [row() for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.7:
            # distinct keys (PostgreSQL refuses DO UPDATE of one row twice, SQLite does not)
            rows = list({t[0]: t for t in rows}.values())
        cols = "(id, name, qty, price, flag)"
        tail = ""
        r = rng.random() if len({t[0] for t in rows}) == len(rows) else 0.9
        if r < 0.3:
            tail = " ON CONFLICT (id) DO NOTHING"
        elif r < 0.6:
            tail = (" ON CONFLICT (id) DO UPDATE SET qty = items.qty + excluded.qty, "
                    "name = excluded.name")
        q = "INSERT INTO items %s VALUES %s%s" % (
            cols, ", ".join("(" + ", ".join(lit(v, "pg") for v in t) + ")" for t in rows), tail)
        s = "INSERT INTO items %s VALUES %s%s" % (
            cols, ", ".join("(" + ", ".join(lit(v, "sqlite") for v in t) + ")" for t in rows),
            tail)
        return q, s
    if k < 0.45:
        # column list in another order, missing columns are NULL
        t = row()
        return ("INSERT INTO items (qty, id) VALUES (%s, %d)" % (lit(t[2], "pg"), t[0]),
                "INSERT INTO items (qty, id) VALUES (%s, %d)" % (lit(t[2], "sqlite"), t[0]))
    wheres = [
        ("qty > %d" % rng.randint(-5, 50),) * 2,
        ("id BETWEEN %d AND %d" % (rng.randint(1, 30), rng.randint(30, 60)),) * 2,
        ("name = %s" % lit(rng.choice(NAMES), "pg"),) * 2,
        ("qty IS NULL",) * 2,
        ("price < %s OR qty = %d" % (lit(0.25 * rng.randint(0, 400), "pg"), rng.randint(0, 9)),) * 2,
        ("flag", "flag = 1"),
        ("NOT flag", "flag = 0"),
        ("id IN (%d, %d, %d)" % tuple(rng.randint(1, 60) for _ in range(3)),) * 2,
        ("name LIKE 'e%'",) * 2,
    ]
    wq, ws = rng.choice(wheres)
    if k < 0.75:
        sets = rng.choice([
            ("qty = qty + 1",) * 2,
            ("price = price * 2, name = 'upd'",) * 2,
            ("flag = NOT flag", "flag = 1 - flag"),
            ("qty = NULL",) * 2,
            ("name = name || '!'",) * 2,
        ])
        return "UPDATE items SET %s WHERE %s" % (sets[0], wq), \
            "UPDATE items SET %s WHERE %s" % (sets[1], ws)
    return "DELETE FROM items WHERE %s" % wq, "DELETE FROM items WHERE %s" % ws


def quarry_rows(data, table="items"):
    rc, out, err = run(["sql", "--format", "json", "-c",
                        "SELECT id, name, qty, price, flag FROM %s ORDER BY id" % table], data)
    if not check(rc == 0, "select from quarry: %s" % err):
        return None
    return [tuple(r) for r in json.loads(out.splitlines()[-1])["rows"]]


def sqlite_rows(db):
    return [(i, n, q, p, None if f is None else bool(f))
            for (i, n, q, p, f) in db.execute(
                "SELECT id, name, qty, price, flag FROM items ORDER BY id")]


def test_differential(dd):
    data = os.path.join(dd.path, "diff")
    rc, out, err = run(["sql", "-c", QUARRY_DDL], data)
    check(rc == 0 and "CREATE TABLE" in out, "create table: %s %s" % (out, err))
    db = sqlite3.connect(":memory:")
    db.execute(SQLITE_DDL)
    for rnd in range(4):
        stmts = [gen_statement() for _ in range(120)]
        sqlite_fail = 0
        for _, s in stmts:
            try:
                with db:
                    db.execute(s)
            except sqlite3.IntegrityError:
                sqlite_fail += 1
        script = "".join(q + ";\n" for q, _ in stmts)
        rc, out, err = run(["sql"], data, stdin=script)
        errors = re.findall(r"^ERROR:  (.*)$", err, re.M)
        check(len(errors) == sqlite_fail and all("duplicate key" in e for e in errors),
              "round %d: quarry failed %d statements, sqlite %d: %s" %
              (rnd, len(errors), sqlite_fail, errors[:3]))
        got = quarry_rows(data)
        want = sqlite_rows(db)
        check(got == want, "round %d: final tables differ\nquarry %s\nsqlite %s" %
              (rnd, got[:8] if got else got, want[:8]))
    # INSERT ... SELECT, with and without a column list
    run(["sql", "-c", QUARRY_DDL.replace("items", "items2")], data)
    db.execute(SQLITE_DDL.replace("items", "items2"))
    for q, sq in (("INSERT INTO items2 SELECT * FROM items WHERE qty > 10",) * 2,
                  ("INSERT INTO items2 (id, qty, name) SELECT id + 100, qty * 2, name "
                   "FROM items WHERE flag", "INSERT INTO items2 (id, qty, name) SELECT id + 100, "
                   "qty * 2, name FROM items WHERE flag = 1")):
        with db:
            db.execute(sq)
        rc, out, err = run(["sql", "-c", q], data)
        check(rc == 0, "%s: %s" % (q, err))
    want2 = [(i, n, q, p, None if f is None else bool(f)) for (i, n, q, p, f) in db.execute(
        "SELECT id, name, qty, price, flag FROM items2 ORDER BY id")]
    check(quarry_rows(data, "items2") == want2 and len(want2) > 0,
          "INSERT ... SELECT: %s / %s" % (quarry_rows(data, "items2"), want2))
    # RETURNING gives the stored rows
    rc, out, err = run(["sql", "--format", "json", "-c",
                        "UPDATE items SET qty = 1000 WHERE id <= 10 RETURNING id, qty"], data)
    res = json.loads(out.splitlines()[-1]) if rc == 0 else {}
    want = [(i, 1000) for (i, *_r) in sqlite_rows(db) if i <= 10]
    check(sorted(tuple(r) for r in res.get("rows", [])) == want and
          res.get("command") == "UPDATE %d" % len(want),
          "UPDATE ... RETURNING: %s %s" % (res, err))


def test_transactions(dd):
    data = os.path.join(dd.path, "txn")
    run(["sql", "-c", QUARRY_DDL, "-c", "INSERT INTO items (id, qty) VALUES (1, 1), (2, 2)"], data)
    before = quarry_rows(data)
    rc, out, err = run(["sql"], data, stdin=(
        "BEGIN;\nINSERT INTO items (id, qty) VALUES (3, 3), (4, 4);\n"
        "UPDATE items SET qty = 99 WHERE id = 1;\nDELETE FROM items WHERE id = 2;\n"
        "ROLLBACK;\n"))
    check(rc == 0 and "ROLLBACK" in out, "rollback ran: %s %s" % (out, err))
    check(quarry_rows(data) == before, "ROLLBACK leaves nothing: %s" % quarry_rows(data))
    # read-your-writes of the write path inside a block, then COMMIT
    rc, out, err = run(["sql"], data, stdin=(
        "BEGIN;\nINSERT INTO items (id, qty) VALUES (5, 5);\n"
        "UPDATE items SET qty = qty + 10 WHERE id >= 2;\nDELETE FROM items WHERE id = 1;\n"
        "COMMIT;\n"))
    check(rc == 0, "commit block: %s" % err)
    check(quarry_rows(data) == [(2, None, 12, None, None), (5, None, 15, None, None)],
          "COMMIT applies the block with its own writes seen: %s" % quarry_rows(data))
    # a failed block: 25P02 until ROLLBACK, COMMIT answers ROLLBACK
    rc, out, err = run(["sql", "--format", "json"], data, stdin=(
        "BEGIN;\nINSERT INTO items (id, qty) VALUES (6, 6);\n"
        "INSERT INTO items (id, qty) VALUES (2, 0);\nSELECT 1;\n"
        "INSERT INTO items (id, qty) VALUES (7, 7);\nCOMMIT;\n"))
    errs = re.findall(r"^ERROR:  (.*)$", err, re.M)
    check(len(errs) == 3 and "duplicate key" in errs[0] and
          all("current transaction is aborted" in e for e in errs[1:]),
          "failed block errors: %s" % errs)
    check('"command":"ROLLBACK"' in out, "COMMIT of a failed block is ROLLBACK: %s" % out)
    check(quarry_rows(data) == [(2, None, 12, None, None), (5, None, 15, None, None)],
          "failed block applied nothing: %s" % quarry_rows(data))
    # the same 25P02 over the wire form of errors (SQLSTATE in JSON is tested in /sql)
    rc, out, err = run(["sql", "-c", "INSERT INTO items (id) VALUES (2)"], data)
    check(rc == 1 and "duplicate key value violates unique constraint \"items_pkey\"" in err,
          "plain INSERT of an existing key fails: %s" % err)


def test_copy(dd):
    data = os.path.join(dd.path, "copy")
    run(["sql", "-c", QUARRY_DDL], data)
    good = 'id,name,qty,price,flag\n1,"a,b",3,1.5,t\n2,,,,\n3,"say ""hi""",-4,0,false\n'
    rc, out, err = run(["sql", "-c", "COPY items FROM STDIN WITH (FORMAT csv, HEADER)"], data,
                       stdin=good + "\\.\n")
    check(rc == 0 and "COPY 3" in out, "COPY csv: %s %s" % (out, err))
    check(quarry_rows(data) == [(1, "a,b", 3, 1.5, True), (2, None, None, None, None),
                                (3, 'say "hi"', -4, 0, False)],
          "COPY csv rows: %s" % quarry_rows(data))
    # text format, a bad value on line 3: the line is named and nothing loads
    bad = "10\tx\t1\t\\N\tt\n11\ty\t2\t\\N\tf\n12\tz\tmany\t\\N\tt\n13\tw\t4\t\\N\tt\n"
    rc, out, err = run(["sql", "-c", "COPY items FROM STDIN"], data, stdin=bad)
    check(rc == 1 and "LINE 3" in err and "many" in err, "COPY bad line 3: %s" % err)
    check(len(quarry_rows(data)) == 3, "failed COPY loads nothing: %s" % quarry_rows(data))
    rc, out, err = run(["sql", "-c", "COPY items (id, name) FROM STDIN WITH (FORMAT csv)"],
                       data, stdin="20,a\n21,b,c\n")
    check(rc == 1 and "LINE 2" in err and "extra data" in err, "COPY extra column: %s" % err)
    # COPY TO STDOUT round trip through another table
    rc, out, err = run(["sql", "-c", "COPY items TO STDOUT"], data)
    check(rc == 0 and out.count("\n") == 3 and "a,b" in out and "\\N" in out,
          "COPY TO STDOUT text: %r" % out)
    run(["sql", "-c", QUARRY_DDL.replace("items", "items2")], data)
    rc, out2, err = run(["sql", "-c", "COPY items2 FROM STDIN"], data, stdin=out)
    check(rc == 0 and "COPY 3" in out2, "COPY the dump back: %s %s" % (out2, err))
    check(quarry_rows(data, "items2") == quarry_rows(data), "round trip equal")


def test_catalog(dd):
    data = os.path.join(dd.path, "cat")
    run(["sql", "-c", QUARRY_DDL, "-c",
         "CREATE TABLE notes (slug varchar(40) PRIMARY KEY, body text NOT NULL, n int DEFAULT 7)",
         "-c", "CREATE INDEX ON items (name)"], data)
    rc, out, err = run(["sql", "--format", "json", "-c",
                        "SELECT table_name, column_name, data_type, is_nullable "
                        "FROM information_schema.columns WHERE table_schema = 'public' "
                        "ORDER BY table_name, ordinal_position"], data)
    rows = [tuple(r) for r in json.loads(out.splitlines()[-1])["rows"]] if rc == 0 else err
    check(rows == [("items", "id", "bigint", "NO"), ("items", "name", "character varying", "YES"),
                   ("items", "qty", "integer", "YES"), ("items", "price", "double precision", "YES"),
                   ("items", "flag", "boolean", "YES"), ("notes", "slug", "character varying", "NO"),
                   ("notes", "body", "text", "NO"), ("notes", "n", "integer", "YES")],
          "information_schema.columns: %s" % (rows,))
    rc, out, err = run(["sql", "--format", "json", "-c",
                        "SELECT relname, relkind FROM pg_catalog.pg_class "
                        "WHERE relnamespace = 2200 ORDER BY relname"], data)
    rows = [tuple(r) for r in json.loads(out.splitlines()[-1])["rows"]] if rc == 0 else err
    check(rows == [("items", "r"), ("items_name_idx", "i"), ("items_pkey", "i"),
                   ("notes", "r"), ("notes_pkey", "i")], "pg_class: %s" % (rows,))
    run(["sql", "-c", "DROP TABLE notes", "-c", "DROP INDEX items_name_idx"], data)
    rc, out, err = run(["sql", "--format", "csv", "-c",
                        "SELECT table_name FROM information_schema.tables ORDER BY 1"], data)
    check(rc == 0 and out.split() == ["table_name", "items"], "after DROP: %r %s" % (out, err))
    rc, out, err = run(["sql", "--format", "csv", "-c",
                        "SELECT current_database(), current_schema()"], data)
    check(out.split() == ["current_database,current_schema", "quarry,public"],
          "current_database(): %r" % out)
    # bytea_output reaches every output format of the CLI, as psql shows it
    for fmt, want in (("csv", "\\012\\377A"), ("table", "\\012\\377A"),
                      ("json", '"\\\\012\\\\377A"')):
        rc, out, err = run(["sql", "--format", fmt, "-c", "SET bytea_output = 'escape'", "-c",
                            "SELECT '\\x0aff41'::bytea AS b", "-c", "RESET bytea_output", "-c",
                            "SELECT '\\x0aff41'::bytea AS b"], data)
        check(rc == 0 and want in out and "\\x0aff41" in out,
              "bytea_output escape, then hex again, --format %s: %r %s" % (fmt, out, err))


class Server:
    def __init__(self, data, workdir):
        self.log_path = os.path.join(workdir, "serve.log")
        self.log = open(self.log_path, "w")
        self.p = subprocess.Popen([BIN, "serve", "--data", data, "--http", "127.0.0.1:0"],
                                  stdout=self.log, stderr=self.log)
        self.port = None
        deadline = time.time() + 15
        while time.time() < deadline and self.p.poll() is None and not self.port:
            with open(self.log_path) as f:
                m = re.search(r"http=http://127\.0\.0\.1:(\d+)/", f.read())
            if m:
                self.port = int(m.group(1))
            time.sleep(0.05)

    def sql(self, body):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request("POST", "/sql", body=json.dumps(body),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        out = json.loads(r.read() or b"null")
        c.close()
        return r.status, out

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.log.close()


def test_http(dd):
    data = os.path.join(dd.path, "http")
    run(["sql", "-c", QUARRY_DDL], data)
    srv = Server(data, dd.path)
    try:
        if not check(srv.port is not None, "server started"):
            return
        st, out = srv.sql({"query": "INSERT INTO items (id, name, qty) VALUES ($1, $2, $3)",
                           "params": [1, "one", 10]})
        check(st == 200 and out.get("command") == "INSERT 0 1", "POST /sql insert: %s %s" % (st, out))
        st, out = srv.sql({"query": "INSERT INTO items (id, qty) VALUES (2, 20); "
                                    "SELECT id, name, qty FROM items ORDER BY id"})
        check(st == 200 and out.get("rows") == [[1, "one", 10], [2, None, 20]] and
              [c["name"] for c in out.get("columns", [])] == ["id", "name", "qty"] and
              len(out.get("results", [])) == 2,
              "POST /sql two statements: %s %s" % (st, out))
        st, out = srv.sql({"query": "INSERT INTO items (id) VALUES (1)"})
        e = out.get("error", {}) if isinstance(out, dict) else {}
        check(st == 409 and e.get("sqlstate") == "23505", "duplicate key 409: %s %s" % (st, out))
        st, out = srv.sql({"query": "SELECT id FROM nosuch"})
        e = out.get("error", {}) if isinstance(out, dict) else {}
        check(st == 404 and e.get("sqlstate") == "42P01" and e.get("position") == 16,
              "unknown table 404 with position: %s %s" % (st, out))
        st, out = srv.sql({"query": "SELEKT 1"})
        e = out.get("error", {}) if isinstance(out, dict) else {}
        check(st == 400 and e.get("sqlstate") == "42601" and e.get("position") == 1,
              "syntax error 400: %s %s" % (st, out))
        st, out = srv.sql({"query": "BEGIN; INSERT INTO items (id) VALUES (3); ROLLBACK"})
        st2, out2 = srv.sql({"query": "SELECT count(*) FROM items"})
        check(st == 200 and out2.get("rows") == [[2]], "rollback over HTTP: %s %s" % (out, out2))
        st, out = srv.sql({"nope": 1})
        check(st == 400, "bad body 400: %s %s" % (st, out))
        # bytea_output applies to the request's session; numerics stay exact JSON numbers
        st, out = srv.sql({"query": "SET bytea_output = 'escape'; SELECT '\\x0aff41'::bytea"})
        check(st == 200 and out.get("rows") == [["\\012\\377A"]], "bytea_output over HTTP: %s" % out)
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        c.request("POST", "/sql", body=json.dumps({"query": "SELECT 12.50, "
                  "'123456789012345678901234567890.5'::numeric, 'NaN'::numeric"}),
                  headers={"Content-Type": "application/json"})
        raw = c.getresponse().read().decode()
        c.close()
        check('[[12.50,123456789012345678901234567890.5,"NaN"]]' in raw,
              "numerics as written, NaN a string: %s" % raw)
    finally:
        srv.stop()


def main():
    if not os.path.exists(BIN):
        print("skip: no binary at " + BIN)
        raise SystemExit(77)
    with DataDir() as dd:
        test_differential(dd)
        test_transactions(dd)
        test_copy(dd)
        test_catalog(dd)
        test_http(dd)
    finish()


if __name__ == "__main__":
    main()
