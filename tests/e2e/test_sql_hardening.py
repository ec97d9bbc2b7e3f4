"""End to end: SQL answers to hostile input, over HTTP (POST /sql) and the
PostgreSQL port (psql), from one `quarry serve` with API keys and SCRAM users.

- Sizes from user values: repeat('abcd', 4611686018427387905) (a heap overflow
  that killed the server) answers 54000 over HTTP and to a read-only PG user,
  and the server answers the next query.
- Nesting: a 1,000-term sum answers 1001 on both ports; 40,000 terms over the
  PG port and 50,000 over HTTP answer 54001 "statement too complex" instead of
  overflowing the stack; json_build_object with 20,000 pairs answers 54023.
- Read-only: a search-scoped key and a read-only PG user run reads, and every
  way of slipping a write past a tokenizer (E'' escapes, dollar quotes, a
  data-modifying WITH, EXPLAIN ANALYZE, SELECT INTO, COPY, generated quoting
  variants) is refused (403 / 25006) with the data and schema unchanged; a
  write-scoped key gets 403 for DDL.
- A long statement ends at the deadline on the PG port (pg_sleep watches
  statement_timeout, as every loop does)."""
import itertools
import re

from pg_server import PgServe, add_user
from qtest import DataDir, check, finish, run

PW = {"reader": "reader pw", "writer": "writer pw"}


def sql(srv, key, q):
    """POST /sql with an API key: (status, body)."""
    return srv.call("POST", "/sql", {"query": q}, headers={"Authorization": "Bearer " + key})


def psql(srv, user, q):
    """(rc, stdout, stderr) of psql -c q as user, errors verbose (SQLSTATE)."""
    return srv.psql("-v", "VERBOSITY=verbose", "-At", "-c", q, user=user, password=PW[user])


def add_key(d, name, scope):
    rc, out, _ = run(["key", "add", name, "--scope", scope], d)
    key = out.strip()
    check(rc == 0 and re.fullmatch(r"qk_[0-9a-f]{64}", key), "quarry key add %s" % name)
    return key


def state(srv, admin):
    """The rows of t and the tables that exist: what refused SQL must not change."""
    st, b = sql(srv, admin, "SELECT id, v FROM t ORDER BY id")
    st2, b2 = sql(srv, admin, "SELECT table_name FROM information_schema.tables "
                              "WHERE table_schema = 'public' ORDER BY 1")
    check(st == 200 and st2 == 200, "state readable: %s %s" % (st, st2))
    return (b.get("rows"), b2.get("rows"))


def sqlstate(b):
    return b.get("error", {}).get("sqlstate") if isinstance(b, dict) else None


# Ways a write was slipped past the tokenizer POST /sql used to have, and
# others of the same kind: each must be refused to a search key.
BYPASS = [
    r"SELECT E'\'' AS a; DELETE FROM t WHERE id = 4; SELECT 'x'",
    r"SELECT E'\'' AS a; INSERT INTO t VALUES (99, 'x'); SELECT 'x'",
    r"SELECT E'\'' AS a; CREATE TABLE z (id bigint PRIMARY KEY); SELECT 'x'",
    r"SELECT E'\'' AS a; DROP TABLE t; SELECT 'x'",
    r"SELECT E'\\'; DELETE FROM t; --'",
    "SELECT $$'$$; DELETE FROM t WHERE id = 5; SELECT $$'$$",
    "SELECT $a$ $$ $a$; DROP TABLE t",
    "SELECT $x$'$x$; UPDATE t SET v = 'gone'; SELECT $y$'$y$",
    "WITH d AS (DELETE FROM t RETURNING *) SELECT count(*) FROM d",
    "EXPLAIN ANALYZE DELETE FROM t",
    "SELECT * INTO z FROM t",
    "SELECT 1 FROM t FOR UPDATE",
    "COPY t FROM STDIN",
    "/* select */ DELETE FROM t",
    "select 1;truncate t",
]
# generated: a literal in each quoting form, then a write
LITERALS = [r"E'\''", r"E'\\'", "'it''s'", "$$;$$", "$q$ ' $q$", "U&'\\0041'", "'--'",
            "'/*'", "$$ $x$ $$"]
WRITES = ["DELETE FROM t WHERE id = 3", "INSERT INTO t VALUES (77, 'w')", "DROP TABLE t",
          "UPDATE t SET v = 'u'", "CREATE TABLE z (id bigint PRIMARY KEY)"]


def main():
    with DataDir() as dd:
        d = dd.path
        keys = {s: add_key(d, "k-" + s, s) for s in ("search", "write", "admin")}
        for user in PW:
            rc, _, err = add_user(d, user, PW[user],
                                  role="read-only" if user == "reader" else "read-write")
            check(rc == 0, "quarry user add %s: %s" % (user, err))
        srv = PgServe(d, d)
        check(srv.port and srv.pg_port, "server started: %s" % srv.text()[-300:])
        try:
            admin = keys["admin"]
            st, b = sql(srv, admin, "CREATE TABLE t (id bigint PRIMARY KEY, v text); "
                                    "INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 10) g")
            check(st == 200, "fixture: %s %s" % (st, str(b)[:200]))
            before = state(srv, admin)
            check(len(before[0] or []) == 10, "ten rows: %r" % (before,))

            # ---- item 1: sizes from user values ----
            crash = "SELECT repeat('abcd', 4611686018427387905)"
            st, b = sql(srv, keys["search"], crash)
            check(st == 413 and sqlstate(b) == "54000", "HTTP repeat: %s %s" % (st, b))
            rc, out, err = psql(srv, "reader", crash)
            check(rc != 0 and "54000" in err, "PG repeat as read-only: %r" % err)
            st, b = sql(srv, keys["search"], "SELECT length(repeat('ab', 1000))")
            check(st == 200 and b["rows"] == [[2000]], "server still answers: %s %s" % (st, b))

            # ---- item 2: nesting ----
            sum1000 = "SELECT " + "+".join(["1"] * 1001)
            st, b = sql(srv, keys["search"], sum1000)
            check(st == 200 and b["rows"] == [[1001]], "HTTP 1001-term sum: %s %s" % (st, str(b)[:200]))
            rc, out, err = psql(srv, "reader", sum1000)
            check(rc == 0 and out.strip() == "1001", "PG 1001-term sum: %r %r" % (out, err[:200]))
            st, b = sql(srv, keys["search"], "SELECT " + "+".join(["1"] * 50000))
            check(st == 413 and sqlstate(b) == "54001" and "too complex" in b["error"]["message"],
                  "HTTP 50,000 terms: %s %s" % (st, str(b)[:300]))
            rc, out, err = srv.psql("-v", "VERBOSITY=verbose", "-At", user="reader",
                                    password=PW["reader"],
                                    stdin="SELECT " + "+".join(["1"] * 40000) + ";\n")
            check("54001" in err and "too complex" in err, "PG 40,000 terms: %r" % err[:300])
            pairs = ", ".join("'k%d', %d" % (i, i) for i in range(20000))
            st, b = sql(srv, keys["search"], "SELECT json_build_object(%s)" % pairs)
            check(sqlstate(b) == "54023", "json_build_object x 20,000: %s %s" % (st, str(b)[:200]))
            in_list = "SELECT count(*) FROM generate_series(1, 20000) g(x) WHERE x IN (%s)" % (
                ", ".join(str(2 * i) for i in range(1, 10001)))
            rc, out, err = psql(srv, "reader", in_list)
            check(rc == 0 and out.strip() == "10000", "PG 10,000-item IN: %r %r" % (out, err[:200]))
            rc, out, err = psql(srv, "reader", "SELECT 1")
            check(rc == 0 and out.strip() == "1", "PG still answers: %r" % err)

            # ---- item 3: read-only from the parse, enforced by the engine ----
            generated = ["SELECT %s AS a; %s; SELECT 1" % (lit, w)
                         for lit, w in itertools.product(LITERALS, WRITES)]
            for q in BYPASS + generated:
                st, b = sql(srv, keys["search"], q)
                check(st == 403 and b["error"]["code"] == "insufficient_privilege",
                      "search key, %r: %s %s" % (q, st, str(b)[:200]))
            for q in BYPASS[:8] + generated[::3]:
                rc, out, err = psql(srv, "reader", q)
                check(rc != 0 and "25006" in err, "read-only PG user, %r: %r" % (q, err[:200]))
            for q in ["DROP TABLE t", r"SELECT E'\'' AS a; DROP TABLE t; SELECT 'x'",
                      "SELECT $$;$$; CREATE TABLE z (id bigint PRIMARY KEY)", "TRUNCATE t",
                      "SELECT * INTO z FROM t"]:
                st, b = sql(srv, keys["write"], q)
                check(st == 403, "write key, DDL %r: %s %s" % (q, st, str(b)[:200]))
            check(state(srv, admin) == before, "nothing changed: %r" % (state(srv, admin),))
            # reads in the same quoting forms run
            st, b = sql(srv, keys["search"], r"SELECT E'\'' AS a, $$;DROP$$ AS b, count(*) FROM t")
            check(st == 200 and b["rows"] == [["'", ";DROP", 10]], "quoted read: %s %s" % (st, b))
            rc, out, err = psql(srv, "reader", "SELECT $$;DELETE$$, count(*) FROM t")
            check(rc == 0 and out.strip() == ";DELETE|10", "PG quoted read: %r %r" % (out, err))
            rc, out, err = psql(srv, "reader", "SHOW transaction_read_only")
            check(rc == 0 and out.strip() == "on", "read-only session says so: %r" % out)
            rc, out, err = psql(srv, "writer", "DELETE FROM t WHERE id = 10")
            check(rc == 0 and "DELETE 1" in out, "read-write PG user writes: %r %r" % (out, err))

            # ---- item 9: statements end at their deadline ----
            rc, out, err = srv.psql("-v", "VERBOSITY=verbose", "-At", "-c",
                                    "SET statement_timeout = 300", "-c", "SELECT pg_sleep(60)",
                                    user="reader", password=PW["reader"])
            check("57014" in err, "long statement ends: %r" % err[:200])
        finally:
            rc = srv.stop()
            check(rc == 0, "server exits cleanly: %s" % rc)
    finish()


if __name__ == "__main__":
    main()
