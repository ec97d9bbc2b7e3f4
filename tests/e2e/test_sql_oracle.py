"""Differential test of Quarry's SQL engine against SQLite (python3's sqlite3)
and PostgreSQL 15 (a throwaway cluster started here on a free loopback port,
stopped at the end; skipped only when the binaries are absent).

The same generated data is loaded into the three engines, then hundreds of
generated queries (filters with NULLs and three-valued logic, expressions,
GROUP BY / HAVING, ORDER BY with total orders, LIMIT / OFFSET, joins, IN
subqueries, UNION ALL, CTEs) must return identical rows.  Full-text
predicates are checked against a brute-force matcher: `title @@ 'word'` in
Quarry is `(' ' || title || ' ') LIKE '% word %'` in the peers, whose titles
are made of whole lowercase words with distinct stems and no stop words.
Quarry is driven through `quarry sql --format json` (one process per batch).
"""
import json
import os
import random
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from qtest import BIN, check, finish, skip  # noqa: E402

SEED = int(os.environ.get("SQL_ORACLE_SEED", "20251129"))
N_ROWS = 1500
N_QUERIES = int(os.environ.get("SQL_ORACLE_QUERIES", "400"))
PG_BIN = "/usr/lib/postgresql/15/bin"
WORDS = ["apple", "river", "stone", "cloud", "engine", "garden", "silver", "market", "forest",
         "window", "planet", "doctor", "coffee", "bridge", "castle", "pencil", "rocket", "tiger"]
CATS = ["alpha", "beta", "gamma", "delta", "omega", "Zeta"]

rnd = random.Random(SEED)


# ---- data ------------------------------------------------------------------

def sql_lit(v):
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return "'" + v.replace("'", "''") + "'"


def gen_rows():
    rows = []
    for i in range(1, N_ROWS + 1):
        cat = rnd.choice(CATS) if rnd.random() > 0.08 else None
        n = rnd.randint(-50, 50) if rnd.random() > 0.1 else None
        f = round(rnd.uniform(-100, 100), 2) if rnd.random() > 0.1 else None
        ok = rnd.random() < 0.5 if rnd.random() > 0.1 else None
        title = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(2, 6)))
        day = rnd.randint(0, 364)
        ts = time.strftime("%Y-%m-%d %H:%M:%S",
                           time.gmtime(1735689600 + day * 86400 + rnd.randint(0, 86399)))
        rows.append((i, cat, n, f, ok, title, ts))
    return rows


CREATE = [
    "CREATE TABLE items (id bigint PRIMARY KEY, cat varchar(16), n integer, f double precision, "
    "ok boolean, title text, ts timestamp)",
    "CREATE TABLE cats (code varchar(16) PRIMARY KEY, label varchar(32), weight integer)",
]


def inserts(rows):
    out = []
    for k in range(0, len(rows), 250):
        vals = ",".join("(" + ",".join(sql_lit(v) for v in r) + ")" for r in rows[k:k + 250])
        out.append("INSERT INTO items VALUES " + vals)
    cats = [(c, "label of " + c, w) for c, w in zip(CATS[:5], [3, 1, 4, 1, 5])]
    cats.append(("nosuch", None, 9))
    out.append("INSERT INTO cats VALUES " +
               ",".join("(" + ",".join(sql_lit(v) for v in r) + ")" for r in cats))
    return out


# ---- query generation --------------------------------------------------------
# A query is written once with markers: {M:words} is a full-text predicate.

def num_pred():
    col = rnd.choice(["n", "f"])
    op = rnd.choice(["=", "<>", "<", "<=", ">", ">="])
    v = rnd.randint(-40, 40) if col == "n" else round(rnd.uniform(-80, 80), 1)
    return "%s %s %s" % (col, op, v)


def pred(depth=0):
    r = rnd.random()
    if depth < 2 and r < 0.25:
        return "(%s %s %s)" % (pred(depth + 1), rnd.choice(["AND", "OR"]), pred(depth + 1))
    if depth < 2 and r < 0.30:
        return "NOT (%s)" % pred(depth + 1)
    c = rnd.randint(0, 12)
    if c == 12:  # primary-key ranges (the pk path's key-order read)
        lo = rnd.randint(-20, N_ROWS)
        return rnd.choice(["id BETWEEN %d AND %d" % (lo, lo + rnd.randint(0, 300)),
                           "id %s %d" % (rnd.choice(["<", "<=", ">", ">="]), lo),
                           "%d < id" % lo])
    if c == 0:
        return num_pred()
    if c == 1:
        lo = rnd.randint(-50, 30)
        return "n %sBETWEEN %d AND %d" % (rnd.choice(["", "NOT "]), lo, lo + rnd.randint(0, 40))
    if c == 2:
        return "cat %sIN (%s)" % (rnd.choice(["", "NOT "]),
                                  ", ".join(sql_lit(x) for x in rnd.sample(CATS, rnd.randint(1, 3))))
    if c == 3:
        return "%s IS %sNULL" % (rnd.choice(["cat", "n", "f", "ok"]), rnd.choice(["", "NOT "]))
    if c == 4:
        return "cat LIKE '%s'" % rnd.choice(["a%", "%a", "%et%", "_eta", "Z%", "gamma"])
    if c == 5:
        return rnd.choice(["ok", "NOT ok", "ok = true", "ok = false", "ok IS TRUE", "ok IS NOT FALSE"])
    if c == 6:
        return "ts %s '2025-%02d-%02d'" % (rnd.choice(["<", ">=", ">"]), rnd.randint(1, 12), rnd.randint(1, 28))
    if c == 7:
        return "n %% %d = %d" % (rnd.randint(2, 5), rnd.randint(0, 1))
    if c == 8:
        return "coalesce(n, 0) + %d > %d" % (rnd.randint(-5, 5), rnd.randint(-20, 20))
    if c == 9:
        return "{M:%s}" % rnd.choice(WORDS)
    if c == 10:
        return "cat IN (SELECT code FROM cats WHERE weight > %d)" % rnd.randint(0, 5)
    return "id %% %d = 0" % rnd.randint(2, 9)


def where():
    return pred() if rnd.random() < 0.9 else "true"


EXPRS = ["n * 2 + 1", "coalesce(n, -1)", "CASE WHEN n > 0 THEN 'pos' WHEN n < 0 THEN 'neg' END",
         "lower(cat)", "upper(cat)", "length(title)", "f", "n - id", "-n", "abs(n)",
         "cat || '-' || coalesce(cat, 'none')", "n IS NULL", "nullif(n, 0)",
         "CASE cat WHEN 'alpha' THEN 1 WHEN 'beta' THEN 2 ELSE 0 END", "n / 3", "n % 7",
         "substr(cat, 2, 3)", "f > 0 AND n > 0", "f > 0 OR n > 0", "ts", "cast(n AS double precision) / 4",
         "n IS DISTINCT FROM 3", "n IS NOT DISTINCT FROM NULL", "n & 5", "n | 3", "id & n"]


def gen_query():
    k = rnd.randint(0, 13)
    w = where()
    if k == 13:
        # aggregates read from column blocks: one keyword group (or none),
        # conditions that are a word and / or column predicates
        cw = rnd.choice(["true", num_pred(), "{M:%s}" % rnd.choice(WORDS),
                         "{M:%s} AND %s" % (rnd.choice(WORDS), num_pred()),
                         "%s AND %s" % (num_pred(), num_pred()), "cat IS NULL", "n IS NOT NULL"])
        aggs = "count(*), count(n), sum(n), avg(n), min(n), max(n), sum(f), avg(f), min(f), max(ts), min(ts)"
        if rnd.random() < 0.3:
            return "SELECT %s FROM items WHERE %s" % (aggs, cw), False
        return ("SELECT cat, %s FROM items WHERE %s GROUP BY cat%s" % (
            aggs, cw, rnd.choice(["", " HAVING count(*) > %d" % rnd.randint(0, 120),
                                  " HAVING sum(n) < %d" % rnd.randint(-50, 500)]))), False
    if k <= 2:
        return "SELECT id FROM items WHERE %s ORDER BY id" % w, True
    if k == 3:
        es = rnd.sample(EXPRS, 3)
        return ("SELECT id, %s FROM items WHERE %s ORDER BY id LIMIT %d OFFSET %d"
                % (", ".join(es), w, rnd.randint(1, 60), rnd.randint(0, 30)), True)
    if k == 4:
        g = rnd.choice(["cat", "ok", "n % 4", "cat, ok"])
        return ("SELECT %s, count(*), count(n), sum(n), min(n), max(f), avg(n), "
                "count(*) FILTER (WHERE %s), sum(n) FILTER (WHERE %s) FROM items WHERE %s "
                "GROUP BY %s" % (g, num_pred(), pred(), w, g)), False
    if k == 5:
        return ("SELECT cat, count(*) AS c, sum(n) FROM items WHERE %s GROUP BY cat HAVING count(*) > %d"
                % (w, rnd.randint(0, 150))), False
    if k == 6:
        return ("SELECT i.id, c.label, c.weight FROM items i JOIN cats c ON i.cat = c.code "
                "WHERE %s ORDER BY i.id" % w.replace("cat ", "i.cat ").replace("(cat", "(i.cat")
                .replace("lower(cat", "lower(i.cat")), True
    if k == 7 and rnd.random() < 0.5:
        # three tables: a hash join, then a key-less or LEFT join, conditions
        # over both sides applied after the joins (the pipelined join)
        iw = w.replace("cat ", "i.cat ").replace("(cat", "(i.cat").replace("lower(cat", "lower(i.cat")
        v = rnd.randint(0, 2)
        if v == 0:
            return ("SELECT c.label, count(*), sum(i.n), max(c2.weight) FROM items i "
                    "JOIN cats c ON i.cat = c.code JOIN cats c2 ON c2.weight >= c.weight "
                    "WHERE %s GROUP BY c.label" % iw), False
        if v == 1:
            return ("SELECT i.id, c.code, c2.code FROM items i JOIN cats c ON i.cat = c.code "
                    "LEFT JOIN cats c2 ON c2.weight = c.weight + %d WHERE %s" % (rnd.randint(0, 3), iw)), False
        return ("SELECT i.cat, count(*), count(c.code) FROM items i LEFT JOIN cats c ON i.cat = c.code "
                "WHERE c.code IS NULL OR c.weight > %d OR i.n < %d GROUP BY i.cat"
                % (rnd.randint(0, 5), rnd.randint(-10, 40))), False
    if k == 7:
        return ("SELECT i.id, c.weight FROM items i LEFT JOIN cats c ON i.cat = c.code AND c.weight > %d "
                "WHERE i.id %% 7 = %d ORDER BY i.id" % (rnd.randint(0, 4), rnd.randint(0, 6))), True
    if k == 8:
        return ("SELECT id, n FROM items WHERE %s UNION ALL SELECT id, n FROM items WHERE %s"
                % (pred(), pred())), False
    if k == 9:
        return ("WITH x AS (SELECT id, n, cat FROM items WHERE %s) SELECT cat, count(*) FROM x "
                "GROUP BY cat" % w), False
    if k == 10:
        col = rnd.choice(["n", "f", "cat", "ts"])
        d = rnd.choice(["ASC NULLS LAST", "DESC NULLS FIRST", "ASC NULLS FIRST", "DESC NULLS LAST"])
        return ("SELECT id, %s FROM items WHERE %s ORDER BY %s %s, id LIMIT %d OFFSET %d"
                % (col, w, col, d, rnd.randint(1, 50), rnd.choice([0, 0, 3, 40]))), True
    if k == 12 and rnd.random() < 0.3:
        # whole table: answered from column statistics
        return "SELECT count(*), count(n), min(n), max(f), min(cat), max(ts) FROM items", False
    if k == 11:
        # counted inside the text engine: a word and column predicates only
        return ("SELECT count(*) FROM items WHERE {M:%s} AND %s" % (rnd.choice(WORDS), num_pred())), False
    return ("SELECT count(*), count(DISTINCT cat), sum(n), min(ts), max(cat) FROM items WHERE %s" % w), False


def expand(q, form):
    """Replace each {M:word} marker with form % word."""
    out, i = "", 0
    while True:
        j = q.find("{M:", i)
        if j < 0:
            return out + q[i:]
        e = q.find("}", j)
        out += q[i:j] + form % q[j + 3:e]
        i = e + 1


def for_quarry(q):
    return expand(q, "title @@ '%s'")


def for_peer(q):
    return expand(q, "(' ' || title || ' ') LIKE '%% %s %%'")


# ---- value normalization -----------------------------------------------------

def canon(v):
    if v is None:
        return None
    if isinstance(v, bool):
        return "1" if v else "0"
    s = str(v)
    if s in ("t", "true"):
        return "1"
    if s in ("f", "false"):
        return "0"
    try:
        x = float(s)
    except ValueError:
        return s
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return "%.9g" % x


def canon_rows(rows, ordered):
    rs = [tuple(canon(v) for v in r) for r in rows]
    if not ordered:
        rs.sort(key=lambda r: tuple((0, "") if v is None else (1, v) for v in r))
    return rs


# ---- engines -------------------------------------------------------------------

def quarry_batch(data, stmts):
    """Run statements in one `quarry sql` process: each result line follows
    a marker line, so a failed statement shows as a missing result."""
    script = ""
    for i, s in enumerate(stmts):
        script += "SELECT 'QMARK%d' AS m;\n%s;\n" % (i, s)
    p = subprocess.run([BIN, "sql", "--data", data, "--format", "json"], input=script,
                       capture_output=True, text=True, timeout=600)
    res, cur = {}, None
    for line in p.stdout.splitlines():
        if not line.strip():
            continue
        o = json.loads(line)
        rows = o.get("rows") or []
        if len(rows) == 1 and rows[0] and isinstance(rows[0][0], str) and rows[0][0].startswith("QMARK") \
                and o["columns"][0]["name"] == "m":
            cur = int(rows[0][0][5:])
            continue
        if cur is not None:
            res[cur] = rows
            cur = None
    return res, p.stderr


class Postgres:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="quarry-pg-")
        os.chmod(self.dir, 0o777)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.as_pg = [] if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--"]
        subprocess.run(self.as_pg + [PG_BIN + "/initdb", "-D", self.dir + "/data", "--no-locale",
                                     "-E", "UTF8", "-A", "trust", "-U", "postgres"],
                       check=True, capture_output=True, timeout=120)
        subprocess.run(self.as_pg + [PG_BIN + "/pg_ctl", "-D", self.dir + "/data", "-l",
                                     self.dir + "/log", "-w", "-o",
                                     "-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off"
                                     % (self.port, self.dir), "start"],
                       check=True, capture_output=True, timeout=120)

    def run(self, stmts):
        script = "\\set ON_ERROR_STOP 0\n\\pset null <NULL>\nSET TimeZone = 'UTC';\n"
        for i, s in enumerate(stmts):
            script += "\\echo QMARK%d\n%s;\n" % (i, s)
        p = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-F", "\x1f", "-h", "127.0.0.1",
                            "-p", str(self.port), "-U", "postgres", "-d", "postgres"],
                           input=script, capture_output=True, text=True, timeout=600)
        res, cur = {}, None
        for line in p.stdout.split("\n"):
            if line.startswith("QMARK"):
                cur = int(line[5:])
                res[cur] = []
                continue
            if cur is not None and line != "":
                res[cur].append([None if v == "<NULL>" else v for v in line.split("\x1f")])
        return res, p.stderr

    def stop(self):
        subprocess.run(self.as_pg + [PG_BIN + "/pg_ctl", "-D", self.dir + "/data", "-m", "immediate",
                                     "stop"], capture_output=True, timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)


def main():
    if not os.path.exists(BIN):
        skip("no quarry binary")
    rows = gen_rows()
    tmp = tempfile.mkdtemp(prefix="quarry-sql-oracle-")
    data = os.path.join(tmp, "data")
    pg = None
    try:
        load = CREATE + inserts(rows)
        res, err = quarry_batch(data, load)
        check(len(res) == len(load), "quarry loads the data (%s)" % err.strip()[:300])
        lite = sqlite3.connect(":memory:")
        lite.execute("PRAGMA case_sensitive_like = ON")
        for s in load:
            lite.execute(s)
        if os.path.exists(PG_BIN + "/initdb"):
            pg = Postgres()
            _, perr = pg.run(load)
            check("ERROR" not in perr, "postgres loads the data (%s)" % perr[:300])
        else:
            print("skip: PostgreSQL 15 binaries absent, SQLite only")
        queries = [gen_query() for _ in range(N_QUERIES)]
        qres, qerr = quarry_batch(data, [for_quarry(q) for q, _ in queries])
        pres = pg.run([for_peer(q) for q, _ in queries])[0] if pg else {}
        n_lite = n_pg = 0
        for i, (q, ordered) in enumerate(queries):
            got = qres.get(i)
            if not check(got is not None, "quarry answers: %s (%s)" % (for_quarry(q), qerr[-300:])):
                continue
            got = canon_rows(got, ordered)
            try:
                want = canon_rows(lite.execute(for_peer(q)).fetchall(), ordered)
                n_lite += 1
                check(got == want, "sqlite agrees on: %s\n  quarry %s\n  sqlite %s"
                      % (for_quarry(q), got[:6], want[:6]))
            except sqlite3.Error as e:
                check(False, "sqlite runs %s: %s" % (for_peer(q), e))
            if pg:
                pw = pres.get(i)
                if check(pw is not None, "postgres answers: %s" % for_peer(q)):
                    n_pg += 1
                    pw = canon_rows(pw, ordered)
                    check(got == pw, "postgres agrees on: %s\n  quarry %s\n  postgres %s"
                          % (for_quarry(q), got[:6], pw[:6]))
        print("compared %d queries with SQLite, %d with PostgreSQL" % (n_lite, n_pg))
        # planner: every forced access path gives the same answer as auto
        forced = ["SELECT id FROM items WHERE title @@ 'apple' AND n > 10 ORDER BY id",
                  "SELECT id FROM items WHERE title @@ 'river' AND cat = 'beta' AND f < 0 ORDER BY id",
                  "SELECT id FROM items WHERE n BETWEEN -5 AND 5 AND cat IN ('alpha', 'gamma') ORDER BY id",
                  "SELECT count(*), sum(n) FROM items WHERE title @@ 'stone' OR n IS NULL"]
        base, _ = quarry_batch(data, forced)
        for path in ["text", "scan", "check", "full", "btree"]:
            got, e = quarry_batch(data, ["SET quarry.access_path = %s" % path] + forced)
            # the SET produces no result line; results are shifted by one
            for k, q in enumerate(forced):
                check(got.get(k + 1) == base.get(k), "access path %s agrees on %s (%s)" % (path, q, e[-200:]))
    finally:
        if pg:
            pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    finish()


main()
