"""Differential test of Quarry's SQL engine against SQLite (python3's sqlite3)
and PostgreSQL 15 (a throwaway cluster started here on a free loopback port,
stopped at the end; skipped only when the binaries are absent).

The same generated data is loaded into the three engines, then hundreds of
generated queries (filters with NULLs and three-valued logic, expressions,
GROUP BY / HAVING, ORDER BY with total orders, LIMIT / OFFSET, joins, IN
subqueries, UNION ALL, CTEs) must return identical rows.  Then window
functions with every frame kind (compared with both peers: SQLite has them
too, but for RANGE over timestamps), and DISTINCT ON, GROUPING SETS /
ROLLUP / CUBE and the aggregates SQLite lacks (stddev / variance,
array_agg, ORDER BY inside the call), compared with PostgreSQL only.  A
further set covers the SQL surface built as operators: every join type (INNER, LEFT,
RIGHT, FULL, USING, NATURAL, aliases, parenthesized joins, LATERAL), semi
and anti joins with NULLs (IN, EXISTS, NOT EXISTS, NOT IN), set operations
with ALL and distinct, nested and ordered, WITH RECURSIVE over a tree and
over a graph with cycles, WITH ... [NOT] MATERIALIZED read once and twice,
and FROM subqueries; PostgreSQL checks them all, SQLite those it can
express (no LATERAL, INTERSECT / EXCEPT ALL or parenthesized set
operations).  Typed queries (dates, intervals and their arithmetic, age, to_char,
arrays with subscripts, slices, ANY / ALL and array_agg, json builders and operators,
format / quote_ident, numeric arithmetic, scales, rounding and typmods as text, to_char of
numbers; numeric columns stored exactly, their sums and averages, bare decimal literals) are
compared with PostgreSQL only.  Full-text
predicates are checked against a brute-force matcher: `title @@ 'word'` in
Quarry is `(' ' || title || ' ') LIKE '% word %'` in the peers, whose titles
are made of whole lowercase words with distinct stems and no stop words.
Quarry is driven through `quarry sql --format json` (one process per batch).
"""
import json
import os
import random
import re
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
N_OLAP = int(os.environ.get("SQL_ORACLE_OLAP_QUERIES", "160"))
N_SURFACE = int(os.environ.get("SQL_ORACLE_SURFACE_QUERIES", "240"))
N_TYPED = int(os.environ.get("SQL_ORACLE_TYPED_QUERIES", "120"))
N_NUMERIC = int(os.environ.get("SQL_ORACLE_NUMERIC_QUERIES", "60"))
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
    "CREATE TABLE tree (id integer PRIMARY KEY, parent integer, tag varchar(8))",
    "CREATE TABLE edges (id integer PRIMARY KEY, src integer, dst integer)",
    "CREATE TABLE amounts (id integer PRIMARY KEY, cat varchar(16), p numeric(12,2), q numeric)",
]
N_AMOUNTS = 400
arnd = random.Random(SEED + 1)  # (its own stream: the other generators' queries stay as they were)


def decimal_lit(r, digits, scale):
    """A decimal literal as written: random digits, `scale` of them after the point."""
    v = "".join(r.choice("0123456789") for _ in range(digits))
    v = v.lstrip("0") or "0"
    if scale:
        v = (v[:-scale] or "0") + "." + v[-scale:].rjust(scale, "0")
    return ("-" if r.random() < 0.3 else "") + v


def amount_rows():
    """numeric(12,2) values written with 0..4 fraction digits (rounded on the way in)
    and plain numerics keeping their written scales, up to 30 digits, NaN among them."""
    rows = []
    for i in range(1, N_AMOUNTS + 1):
        p = None if arnd.random() < 0.08 else decimal_lit(arnd, arnd.randint(1, 10), arnd.randint(0, 4))
        q = (None if arnd.random() < 0.08 else "'NaN'" if arnd.random() < 0.02
             else decimal_lit(arnd, arnd.randint(1, 30), arnd.randint(0, 8)))
        rows.append("(%d, %s, %s, %s)" % (i, sql_lit(arnd.choice(CATS)), p or "NULL", q or "NULL"))
    return ["INSERT INTO amounts VALUES " + ",".join(rows[k:k + 200]) for k in range(0, len(rows), 200)]


def gen_numeric():
    """Stored numerics, their sums and averages, and bare decimal literals, against
    PostgreSQL (each value as 'v' || text so the scale is compared too)."""
    k = arnd.randint(2, 9)
    c = decimal_lit(arnd, arnd.randint(1, 6), arnd.randint(0, 3))
    lit = decimal_lit(arnd, arnd.randint(1, 5), arnd.randint(1, 4))
    q = arnd.choice([
        "SELECT id, 'v' || p::text, 'v' || q::text FROM amounts WHERE id %% %d = 0 ORDER BY id" % k,
        "SELECT cat, 'v' || sum(p)::text, 'v' || avg(p)::text, 'v' || sum(q)::text, "
        "'v' || avg(q)::text, 'v' || min(q)::text, 'v' || max(p)::text, count(q) FROM amounts "
        "WHERE id %% %d <> 0 GROUP BY cat ORDER BY cat" % k,
        "SELECT 'v' || sum(p)::text, 'v' || sum(q)::text, 'v' || avg(q)::text FROM amounts "
        "WHERE q <> 'NaN' AND id %% %d = 1" % k,
        "SELECT id, 'v' || p::text FROM amounts WHERE p > %s ORDER BY p, id LIMIT 40" % c,
        "SELECT id FROM amounts WHERE q <= %s AND p IS NOT NULL ORDER BY q DESC, id LIMIT 40" % c,
        "SELECT id, 'v' || (p * %s)::text, 'v' || (q + %s)::text FROM amounts WHERE id %% %d = 0 "
        "ORDER BY id" % (lit, lit, k),
        "SELECT 'v' || (%s)::text, 'v' || (%s + 0.10)::text, pg_typeof(%s)::text, "
        "'v' || (%s * 2)::text, 'v' || (CASE WHEN %d > 4 THEN %s ELSE 1 END)::text"
        % (lit, lit, lit, lit, k, lit),
        "SELECT 'v' || p::text, count(*) FROM amounts WHERE p IS NOT NULL GROUP BY p "
        "HAVING count(*) > 1 ORDER BY p",
        "SELECT count(*), count(DISTINCT q), count(*) FILTER (WHERE q > p) FROM amounts",
    ])
    return q, True, False
N_TREE, N_NODES = 120, 40


def inserts(rows):
    out = []
    for k in range(0, len(rows), 250):
        vals = ",".join("(" + ",".join(sql_lit(v) for v in r) + ")" for r in rows[k:k + 250])
        out.append("INSERT INTO items VALUES " + vals)
    cats = [(c, "label of " + c, w) for c, w in zip(CATS[:5], [3, 1, 4, 1, 5])]
    cats.append(("nosuch", None, 9))
    out.append("INSERT INTO cats VALUES " +
               ",".join("(" + ",".join(sql_lit(v) for v in r) + ")" for r in cats))
    # a forest (a few roots) and a directed graph with cycles and NULL ends
    tree = [(i, None if i <= 4 else rnd.randint(1, i - 1), rnd.choice(["x", "y", None]))
            for i in range(1, N_TREE + 1)]
    edges = [(i, rnd.randint(1, N_NODES), rnd.randint(1, N_NODES) if rnd.random() > 0.05 else None)
             for i in range(1, 3 * N_NODES)]
    for name, rs in (("tree", tree), ("edges", edges)):
        out.append("INSERT INTO %s VALUES " % name +
                   ",".join("(" + ",".join(sql_lit(v) for v in r) + ")" for r in rs))
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
        if rnd.random() < 0.4:  # x = ANY (ARRAY[...]), a client's list (peers get IN)
            if rnd.random() < 0.5:
                return "{A:cat:%s}" % ", ".join(sql_lit(x) for x in rnd.sample(CATS, rnd.randint(1, 3)))
            return "{A:n:%s}" % ", ".join(str(rnd.randint(-20, 20)) for _ in range(rnd.randint(1, 4)))
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


# ---- windows, DISTINCT ON, grouping sets, aggregates ---------------------------
# Each generator returns (query, ordered, sqlite_too).  Orders are total
# where a result depends on the order among peers (row_number, lag, ROWS
# frames, first_value ...); RANGE and GROUPS frames read whole peer groups.
# NULL ordering is always written out (SQLite sorts NULLs first).

def nulls():
    return rnd.choice(["NULLS FIRST", "NULLS LAST"])


def win_order(total):
    key = rnd.choice(["n", "f", "cat", "ts", "ok"])
    o = "%s %s %s" % (key, rnd.choice(["ASC", "DESC"]), nulls())
    return o + (", id" if total else ""), key


def win_partition():
    return rnd.choice(["", "", "PARTITION BY cat ", "PARTITION BY ok ", "PARTITION BY n % 3 ",
                       "PARTITION BY cat, ok "])


def frame(mode, numeric_key):
    """A frame clause the grammar accepts (a frame starting at the current
    row has no preceding rows, one starting after it ends after it);
    offsets only where the mode allows them."""
    def bound(choices):
        b = rnd.choice(choices)
        if "%d" in b:
            if mode == "RANGE" and not numeric_key:
                return "CURRENT ROW"
            return b % rnd.randint(0, 4 if mode != "RANGE" else 30)
        return b
    s = bound(["UNBOUNDED PRECEDING", "%d PRECEDING", "CURRENT ROW", "%d FOLLOWING"])
    ends = ["%d FOLLOWING", "UNBOUNDED FOLLOWING"]
    if "FOLLOWING" not in s:
        ends.append("CURRENT ROW")
    if "PRECEDING" in s:
        ends.append("%d PRECEDING")
    e = bound(ends)
    if "FOLLOWING" in s and e == "CURRENT ROW":  # (a RANGE offset that became CURRENT ROW)
        e = "UNBOUNDED FOLLOWING"
    excl = rnd.choice(["", "", "", " EXCLUDE CURRENT ROW", " EXCLUDE GROUP", " EXCLUDE TIES"])
    return "%s BETWEEN %s AND %s%s" % (mode, s, e, excl)


def window_call():
    """(call, sqlite_too)"""
    k = rnd.randint(0, 9)
    part = win_partition()
    if k == 0:
        return "row_number() OVER (%sORDER BY %s)" % (part, win_order(True)[0]), True
    if k == 1:
        f = rnd.choice(["rank()", "dense_rank()", "percent_rank()", "cume_dist()"])
        return "%s OVER (%sORDER BY %s)" % (f, part, win_order(False)[0]), True
    if k == 2:
        return "ntile(%d) OVER (%sORDER BY %s)" % (rnd.randint(1, 9), part, win_order(True)[0]), True
    if k == 3:
        f = rnd.choice(["lag", "lead"])
        arg = rnd.choice(["n", "cat", "f"])
        extra = rnd.choice(["", ", %d" % rnd.randint(0, 3),
                            ", %d, %s" % (rnd.randint(1, 3), {"n": "-1", "cat": "'none'", "f": "0.5"}[arg])])
        return "%s(%s%s) OVER (%sORDER BY %s)" % (f, arg, extra, part, win_order(True)[0]), True
    if k == 4:
        f = rnd.choice(["first_value(n)", "last_value(cat)", "nth_value(f, %d)" % rnd.randint(1, 4)])
        mode = rnd.choice(["ROWS", "GROUPS", "RANGE"])
        return "%s OVER (%sORDER BY %s %s)" % (f, part, win_order(True)[0], frame(mode, False)), True
    # aggregates over frames
    agg = rnd.choice(["count(*)", "count(n)", "sum(n)", "min(f)", "max(n)", "avg(n)", "sum(f)",
                      "max(cat)", "count(cat)"])
    lite = True
    if rnd.random() < 0.15:  # (SQLite 3.40 filters window aggregates wrongly over RANGE frames)
        agg += " FILTER (WHERE n > %d)" % rnd.randint(-20, 20)
        lite = False
    mode = rnd.choice(["ROWS", "RANGE", "GROUPS", "DEFAULT"])
    if mode == "ROWS":
        return "%s OVER (%sORDER BY %s %s)" % (agg, part, win_order(True)[0], frame("ROWS", False)), lite
    if mode == "DEFAULT":
        order = rnd.choice(["", "ORDER BY %s" % win_order(False)[0]])
        return "%s OVER (%s%s)" % (agg, part, order), lite
    if mode == "GROUPS":
        return "%s OVER (%sORDER BY %s %s)" % (agg, part, win_order(False)[0], frame("GROUPS", False)), lite
    key = rnd.choice(["n", "f", "ts"])
    if key == "ts":  # interval offsets: PostgreSQL only
        b = lambda: rnd.choice(["'%d hours' PRECEDING" % rnd.randint(0, 300), "CURRENT ROW",
                                "'%d days' FOLLOWING" % rnd.randint(0, 20), "UNBOUNDED FOLLOWING"])
        return ("%s OVER (%sORDER BY ts %s %s RANGE BETWEEN '%d days' PRECEDING AND %s)"
                % (agg, part, rnd.choice(["ASC", "DESC"]), nulls(), rnd.randint(0, 30), b())), False
    o = "%s %s %s" % (key, rnd.choice(["ASC", "DESC"]), nulls())
    fr = frame("RANGE", True)
    # SQLite 3.40 frames a NULL key's row differently from PostgreSQL under
    # RANGE offsets: those are compared with PostgreSQL only
    offsets = re.search(r"\d+ (PRECEDING|FOLLOWING)", fr) is not None
    return "%s OVER (%sORDER BY %s %s)" % (agg, part, o, fr), lite and not offsets


def gen_olap():
    k = rnd.randint(0, 11)
    w = where()
    if k <= 4:  # window functions in the select list
        calls = [window_call() for _ in range(rnd.randint(1, 3))]
        lim = rnd.choice(["", "", " LIMIT %d OFFSET %d" % (rnd.randint(1, 40), rnd.randint(0, 20))])
        return ("SELECT id, %s FROM items WHERE %s ORDER BY id%s"
                % (", ".join(c for c, _ in calls), w, lim)), True, all(lite for _, lite in calls)
    if k == 5:  # over groups, and in ORDER BY
        g = rnd.choice(["cat", "ok", "n % 5"])
        return ("SELECT %s, count(*), sum(count(*)) OVER (), rank() OVER (ORDER BY count(*) DESC, %s %s), "
                "sum(sum(n)) OVER (ORDER BY %s %s ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) "
                "FROM items WHERE %s GROUP BY %s ORDER BY %s %s"
                % (g, g, "NULLS LAST", g, "NULLS FIRST", w, g, g, "NULLS FIRST")), True, True
    if k == 6:  # a window's result filtered outside, named windows
        f = rnd.choice(["rank()", "row_number()", "dense_rank()"])
        return ("SELECT * FROM (SELECT id, cat, %s OVER w AS r, sum(n) OVER (w ROWS BETWEEN 2 PRECEDING AND "
                "CURRENT ROW) AS s FROM items WHERE %s WINDOW w AS (PARTITION BY cat ORDER BY n DESC NULLS LAST, "
                "id)) x WHERE r <= %d ORDER BY id" % (f, w, rnd.randint(1, 4))), True, True
    if k == 7:
        return ("SELECT id FROM items WHERE %s ORDER BY row_number() OVER (ORDER BY %s) DESC LIMIT %d"
                % (w, win_order(True)[0], rnd.randint(1, 30))), True, True
    if k == 8:  # DISTINCT ON
        keys = rnd.choice([["cat"], ["ok"], ["cat", "ok"], ["n % 4"]])
        order = ", ".join("%s %s" % (x, nulls()) for x in keys)
        lim = rnd.choice(["", " LIMIT %d" % rnd.randint(1, 5)])
        return ("SELECT DISTINCT ON (%s) %s, id, n FROM items WHERE %s ORDER BY %s, n DESC NULLS LAST, id%s"
                % (", ".join(keys), ", ".join(keys), w, order, lim)), True, False
    if k == 9:  # grouping sets
        gb = rnd.choice(["ROLLUP(cat, ok)", "CUBE(cat, ok)", "GROUPING SETS ((cat), (ok), ())",
                         "cat, ROLLUP(ok)", "ROLLUP(cat), ROLLUP(ok)", "DISTINCT ROLLUP(cat, ok), ok",
                         "GROUPING SETS ((cat, ok), (cat), (cat))", "ROLLUP((cat, ok))",
                         "CUBE(cat, n % 2)", "ROLLUP(date_trunc('month', ts))"])
        cols = [c for c in ["cat", "ok", "n % 2", "date_trunc('month', ts)"] if c in gb]
        gr = "GROUPING(%s)" % ", ".join(cols)
        hv = rnd.choice(["", " HAVING count(*) > %d" % rnd.randint(0, 60), " HAVING %s > 0" % gr])
        return ("SELECT %s, count(*), sum(n), max(f), %s FROM items WHERE %s GROUP BY %s%s"
                % (", ".join(cols), gr, w, gb, hv)), False, False
    # aggregates SQLite lacks
    g = rnd.choice(["cat", "ok"])
    aggs = ", ".join(rnd.sample([
        "stddev(n)", "stddev_pop(f)", "variance(f)", "var_pop(n)", "var_samp(n)", "stddev_samp(f)",
        "array_agg(id ORDER BY n DESC NULLS LAST, id)", "array_agg(DISTINCT n)",
        "string_agg(DISTINCT cat, ',' ORDER BY cat DESC)", "string_agg(cat, '-' ORDER BY id)",
        "array_agg(ok ORDER BY id) FILTER (WHERE n > 0)", "array_agg(ts ORDER BY ts, id)",
        "count(DISTINCT n)", "sum(DISTINCT n)", "avg(DISTINCT n)", "string_agg(DISTINCT cat, '|')"], 4))
    return "SELECT %s, %s FROM items WHERE %s GROUP BY %s" % (g, aggs, w, g), False, False


# ---- the operator surface: joins, semi joins, set operations, recursion ----
# Each generator returns (query, ordered, sqlite_can_run).

def ipred():
    """A WHERE predicate over items i (i.cat qualified)."""
    return pred().replace("cat ", "i.cat ").replace("(cat", "(i.cat").replace("lower(cat", "lower(i.cat")


def gen_join():
    jt = rnd.choice(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"])
    v = rnd.randint(0, 7)
    if v == 0:
        on = "i.cat = c.code" + rnd.choice(["", " AND c.weight > %d" % rnd.randint(0, 4),
                                          " AND i.n > %d" % rnd.randint(-20, 20)])
        w = rnd.choice(["", " WHERE " + ipred(), " WHERE c.weight IS NULL OR i.id %% 5 = %d" % rnd.randint(0, 4),
                        " WHERE i.id IS NULL", " WHERE c.code IS NULL"])
        return ("SELECT i.id, i.n, c.code, c.weight FROM items i %s cats c ON %s%s" % (jt, on, w), False, True)
    if v == 1:
        # USING / NATURAL: merged columns (COALESCE for FULL), SELECT * order
        sub = "(SELECT code AS cat, weight FROM cats WHERE weight <> %d) c" % rnd.randint(1, 5)
        items = "(SELECT id, cat, n FROM items WHERE id %% %d = 0) i" % rnd.randint(3, 9)
        if rnd.random() < 0.5:  # SQLite's * keeps the left's column order
            return ("SELECT * FROM %s %s %s USING (cat)" % (items, jt, sub), False, False)
        return ("SELECT cat, count(*), sum(weight) FROM %s NATURAL %s %s GROUP BY cat" % (items, jt, sub),
                False, True)
    if v == 2:
        # an alias on a join names its columns
        return ("SELECT j.cat, j.weight, j.id FROM (items JOIN (SELECT code AS cat, weight FROM cats) c "
                "USING (cat)) AS j WHERE j.id %% %d = 0" % rnd.randint(2, 9), False, True)
    if v == 3:
        # parenthesized joins on either side
        jt2 = rnd.choice(["JOIN", "LEFT JOIN", "FULL JOIN"])
        if rnd.random() < 0.5:
            return ("SELECT i.id, c.code, c2.code FROM items i %s (cats c %s cats c2 ON c2.weight = c.weight + %d) "
                    "ON i.cat = c.code WHERE i.id %% 11 = %d" % (jt, jt2, rnd.randint(-1, 2), rnd.randint(0, 10)),
                    False, True)
        return ("SELECT c3.code, i.id, c.weight FROM (items i %s cats c ON i.cat = c.code AND i.id %% 13 = 0) "
                "%s cats c3 ON c3.code = c.code" % (jt2, jt), False, True)
    if v == 4:
        # LATERAL: a subquery and a function run per row
        if rnd.random() < 0.2:  # LATERAL reading only the enclosing query
            return ("SELECT c.code, (SELECT max(s.id) FROM LATERAL (SELECT id FROM items i WHERE i.cat = c.code "
                    "ORDER BY id LIMIT %d) s) FROM cats c" % rnd.randint(1, 5), False, False)
        if rnd.random() < 0.5:
            return ("SELECT c.code, x.id, x.n FROM cats c %s LATERAL (SELECT id, n FROM items i "
                    "WHERE i.cat = c.code AND i.n > %d ORDER BY id LIMIT %d) x ON true"
                    % (rnd.choice(["JOIN", "LEFT JOIN"]), rnd.randint(-50, 40), rnd.randint(1, 4)), False, False)
        return ("SELECT c.code, g FROM cats c, LATERAL generate_series(1, c.weight) g WHERE g <> %d"
                % rnd.randint(1, 5), False, False)
    if v == 5:
        # joins on keys with NULLs and duplicates, non-equi conditions
        op = rnd.choice(["=", "=", "<", "<>"])
        return ("SELECT i.id, j.id FROM items i %s items j ON i.n %s j.n AND j.id < %d WHERE i.id < %d"
                % (jt, op, rnd.randint(5, 40), rnd.randint(5, 40)), False, True)
    if v == 6:
        # three items, comma and JOIN mixed, conditions over all
        return ("SELECT c.code, count(*), count(i.id), sum(e.dst) FROM cats c %s items i ON i.cat = c.code "
                "AND i.id %% 17 = 0, edges e WHERE e.src = c.weight AND (e.dst > %d OR i.n IS NULL) "
                "GROUP BY c.code" % (jt, rnd.randint(0, N_NODES)), False, True)
    # FROM subqueries streaming into joins and filters
    return ("SELECT s.cat, s.c, t.code FROM (SELECT cat, count(*) AS c FROM items WHERE %s GROUP BY cat) s "
            "%s (SELECT code FROM cats WHERE weight > %d) t ON s.cat = t.code WHERE s.c > %d"
            % (pred(), jt, rnd.randint(0, 4), rnd.randint(0, 200)), False, True)


def gen_semi():
    v = rnd.randint(0, 7)
    k = rnd.randint(0, 5)
    if v == 0:
        return ("SELECT id FROM items i WHERE %sEXISTS (SELECT 1 FROM cats c WHERE c.code = i.cat AND c.weight > %d)"
                " AND i.id %% 3 = 0" % (rnd.choice(["", "NOT "]), k), False, True)
    if v == 1:
        # keys with NULLs on both sides, duplicates inside
        return ("SELECT id FROM items i WHERE %sEXISTS (SELECT 1 FROM items j WHERE j.n = i.n AND j.id < %d) "
                "AND i.id < 300" % (rnd.choice(["", "NOT "]), rnd.randint(1, 100)), False, True)
    if v == 2:
        return ("SELECT id, n FROM items WHERE n IN (SELECT n FROM items WHERE id < %d) AND id %% 4 = 0"
                % rnd.randint(1, 60), False, True)
    if v == 3:
        # NOT IN: a NULL inside makes every answer NULL (no rows)
        inner = rnd.choice(["SELECT weight FROM cats", "SELECT weight FROM cats WHERE weight IS NOT NULL",
                            "SELECT n FROM items WHERE id < %d" % rnd.randint(1, 40),
                            "SELECT n FROM items WHERE id < %d AND n IS NOT NULL" % rnd.randint(1, 40)])
        return ("SELECT id FROM items WHERE n %% 6 NOT IN (%s) AND id < 200" % inner, False, True)
    if v == 4:
        # correlated IN: two keys
        return ("SELECT id FROM items i WHERE i.n IN (SELECT j.n FROM items j WHERE j.cat = i.cat AND j.id < %d)"
                % rnd.randint(10, 200), False, True)
    if v == 7:
        # one table and a semi join: no shortcut (counts from filters or
        # column statistics) may answer without it
        return ("SELECT count(*), min(n), max(id) FROM items i WHERE %sEXISTS (SELECT 1 FROM edges e WHERE "
                "e.src = i.n)%s" % (rnd.choice(["", "NOT "]), rnd.choice(["", " AND n > %d" % rnd.randint(-40, 40)])),
                False, True)
    if v == 5:
        # a semi join under grouping, text in the outer block
        return ("SELECT cat, count(*) FROM items i WHERE {M:%s} AND EXISTS (SELECT 1 FROM edges e "
                "WHERE e.src = i.id %% %d) GROUP BY cat" % (rnd.choice(WORDS), N_NODES), False, True)
    return ("SELECT c.code FROM cats c WHERE NOT EXISTS (SELECT 1 FROM items i WHERE i.cat = c.code AND "
            "i.n > %d)" % rnd.randint(30, 52), False, True)


def setop_branch():
    return rnd.choice(["SELECT cat, n %% 3 FROM items WHERE %s" % pred(),
                       "SELECT code, weight %% 3 FROM cats WHERE weight > %d" % rnd.randint(0, 4),
                       "SELECT cat, CAST(NULL AS integer) FROM items WHERE id %% %d = 0" % rnd.randint(5, 50)])


def gen_setop():
    ops = ["UNION", "INTERSECT", "EXCEPT"]
    a, b, c = setop_branch(), setop_branch(), setop_branch()
    v = rnd.randint(0, 3)
    if v == 0:
        op = rnd.choice(ops)
        return ("%s %s %s" % (a, op, b), False, True)
    if v == 1:
        op, al = rnd.choice(ops), rnd.choice(["ALL", ""])
        return ("%s %s %s %s" % (a, op, al, b), False, op == "UNION" or al == "")
    if v == 2:
        # nesting and precedence (INTERSECT binds tighter)
        o1, o2 = rnd.choice(ops), rnd.choice(ops)
        al1, al2 = rnd.choice(["ALL ", ""]), rnd.choice(["ALL ", ""])
        if rnd.random() < 0.5:
            return ("%s %s %s%s %s %s%s" % (a, o1, al1, b, o2, al2, c), False, False)
        return ("(%s %s %s%s) %s %s(%s)" % (a, o1, al1, b, o2, al2, c), False, False)
    # ORDER BY / LIMIT over the result (distinct rows: a total order)
    op = rnd.choice(ops)
    return ("%s %s %s ORDER BY 1 %s NULLS FIRST, 2 NULLS LAST LIMIT %d OFFSET %d"
            % (a, op, b, rnd.choice(["ASC", "DESC"]), rnd.randint(1, 8), rnd.randint(0, 3)), True, True)


def gen_recursive():
    v = rnd.randint(0, 4)
    x = rnd.randint(1, N_NODES)
    if v == 0:
        return ("WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < %d) "
                "SELECT count(*), sum(n), max(n) FROM t" % rnd.randint(1, 300), False, True)
    if v == 1:
        # a tree: the descendants of a node with their depth
        return ("WITH RECURSIVE d(id, depth) AS (SELECT id, 0 FROM tree WHERE id = %d UNION ALL "
                "SELECT t.id, d.depth + 1 FROM tree t JOIN d ON t.parent = d.id) SELECT id, depth FROM d"
                % rnd.randint(1, 30), False, True)
    if v == 2:
        # a graph with cycles: UNION ends the walk
        return ("WITH RECURSIVE r(node) AS (SELECT %d UNION SELECT e.dst FROM edges e JOIN r ON e.src = r.node) "
                "SELECT node FROM r" % x, False, True)
    if v == 3:
        # walks of bounded length, counted (UNION ALL)
        return ("WITH RECURSIVE p(node, len) AS (SELECT %d, 0 UNION ALL SELECT e.dst, p.len + 1 FROM p, edges e "
                "WHERE e.src = p.node AND p.len < %d) SELECT node, len, count(*) FROM p GROUP BY node, len"
                % (x, rnd.randint(1, 4)), False, True)
    # ancestors, the CTE read twice (materialized once)
    return ("WITH RECURSIVE a(id, parent) AS (SELECT id, parent FROM tree WHERE id = %d UNION "
            "SELECT t.id, t.parent FROM tree t, a WHERE t.id = a.parent) "
            "SELECT x.id, y.id FROM a x LEFT JOIN a y ON y.id = x.parent" % rnd.randint(1, N_TREE), False, True)


def gen_cte():
    m = rnd.choice(["", "MATERIALIZED ", "NOT MATERIALIZED "])
    w = pred()
    if rnd.random() < 0.5:
        return ("WITH x AS %s(SELECT id, n, cat FROM items WHERE %s) SELECT cat, count(*), sum(n) FROM x GROUP BY cat"
                % (m, w), False, True)
    return ("WITH x AS %s(SELECT id, n, cat FROM items WHERE %s) SELECT a.id, b.id FROM x a JOIN x b "
            "ON a.n = b.n AND a.id < b.id WHERE a.id < 200" % (m, w), False, True)


def gen_surface():
    return rnd.choice([gen_join, gen_join, gen_join, gen_semi, gen_semi, gen_setop, gen_setop,
                       gen_recursive, gen_cte])()


def gen_typed():
    """Queries over the types SQLite lacks (dates, intervals, arrays, json), checked
    against PostgreSQL only: (query, ordered, sqlite_too=False)."""
    k, m = rnd.randint(1, 40), rnd.choice([1, 2, 3, 7, 13])
    lo = rnd.randint(1, N_ROWS - 80)
    rng = "id BETWEEN %d AND %d" % (lo, lo + rnd.randint(10, 70))
    iv = rnd.choice(["'%d days'" % k, "'%d hours 30 minutes'" % k, "'1 mon %d days'" % k,
                     "'-%d days 02:00'" % k, "'P%dDT%dH'" % (k, m)])
    q = rnd.choice([
        "SELECT id, ts::date + n AS d FROM items WHERE %s AND n IS NOT NULL ORDER BY id" % rng,
        "SELECT id, ts + interval %s, ts - interval %s * %d FROM items WHERE %s ORDER BY id"
        % (iv, iv, m, rng),
        "SELECT id, ts::date - date '2025-01-01', ts - timestamp '2025-06-01 12:00' FROM items "
        "WHERE %s ORDER BY id" % rng,
        "SELECT id, age(timestamp '2026-03-01', ts), justify_hours(ts - timestamp '2025-01-01') "
        "FROM items WHERE %s ORDER BY id" % rng,
        "SELECT id, extract(dow from ts::date), extract(epoch from interval %s * %d), "
        "date_trunc('month', ts)::date FROM items WHERE %s ORDER BY id" % (iv, m, rng),
        "SELECT id, to_char(ts, 'YYYY-MM-DD HH24:MI:SS Dy Mon FMDD'), ts::time FROM items "
        "WHERE %s ORDER BY id" % rng,
        "SELECT ts::date AS d, count(*) FROM items WHERE ts::date < date '2025-01-01' + %d "
        "GROUP BY ts::date ORDER BY d" % (k * 3),
        "SELECT id, interval %s < ts - date '2025-01-01', ts::date + time '10:30' FROM items "
        "WHERE %s ORDER BY id" % (iv, rng),
        "SELECT cat, array_agg(n ORDER BY id) FROM items WHERE %s GROUP BY cat ORDER BY cat" % rng,
        "SELECT id FROM items WHERE n = ANY (ARRAY[%d, %d, %d]::int[]) AND %s ORDER BY id"
        % (k, -k, m, rng),
        "SELECT id, n FROM items WHERE n > ALL ('{%d,%d}'::int[]) AND %s ORDER BY id" % (k, -m, rng),
        "SELECT id, (string_to_array(title, ' '))[%d], array_length(string_to_array(title, ' '), 1), "
        "(string_to_array(title, ' '))[2:3] FROM items WHERE %s ORDER BY id" % (rnd.randint(1, 4), rng),
        "SELECT id, ARRAY[n, n * %d] || %d, cardinality(ARRAY[[n, 1], [2, 3]]) FROM items WHERE %s "
        "ORDER BY id" % (m, k, rng),
        "SELECT array_to_string(array_agg(DISTINCT cat), ',', '-') FROM items WHERE %s" % rng,
        "SELECT id, json_build_object('n', n, 'cat', cat, 'ok', ok)::text FROM items WHERE %s "
        "ORDER BY id" % rng,
        "SELECT id, jsonb_build_object('n', n, 'cat', cat) ->> 'cat', "
        "(jsonb_build_object('a', ARRAY[n, %d]) -> 'a' ->> 1)::int FROM items WHERE %s ORDER BY id"
        % (k, rng),
        "SELECT cat, json_agg(n ORDER BY id)::text FROM items WHERE %s GROUP BY cat ORDER BY cat" % rng,
        "SELECT id, format('%%s-%%L-%%I', cat, n, coalesce(cat, 'x y')), quote_ident(cat) FROM items WHERE %s "
        "ORDER BY id" % rng,
        # numeric: each result as 'v' || text, so the scale is compared too
        "SELECT id, 'v' || ((n::numeric + '0.%02d'::numeric) * %d)::text, 'v' || (n::numeric / %d)::text, "
        "'v' || round(n::numeric / 7, %d)::text, 'v' || trunc(n::numeric / 3, 2)::text, "
        "'v' || (n::numeric / 3)::numeric(12, 4)::text, 'v' || (n::numeric %% %d)::text, "
        "'v' || (-n::numeric * '1.5'::numeric)::text FROM items WHERE %s AND n IS NOT NULL ORDER BY id"
        % (k, m, m, rnd.randint(-1, 4), m, rng),
        "SELECT id, 'v' || (n::numeric * 1.%02d)::text, 'v' || (n::numeric - 0.5 * %d)::text, "
        "'v' || round(n::numeric * 1.075, 2)::text FROM items WHERE %s AND n IS NOT NULL ORDER BY id"
        % (k, m, rng),
        "SELECT cat, 'v' || sum(n::numeric)::text, 'v' || avg(n::numeric)::text, "
        "'v' || max(n::numeric / %d)::text FROM items WHERE %s GROUP BY cat ORDER BY cat" % (m, rng),
        "SELECT id FROM items WHERE n::numeric / %d > '%d.5'::numeric AND %s ORDER BY n::numeric / 7, id"
        % (m, k % 5, rng),
        "SELECT id, '[' || to_char(n * %d, '999,999') || ']', '[' || to_char(n::numeric / 7, "
        "'FM99990.000') || ']', '[' || to_char(-n, '9999S') || ']', '[' || to_char(n::numeric / %d, "
        "'00.9') || ']', '[' || to_char(n, 'SG9999') || ']', '[' || to_char(n, '9999PR') || ']' FROM items WHERE %s AND n IS NOT NULL "
        "ORDER BY id" % (k * 37, m, rng),
    ])
    return q, True, False


def markers(q, tag, fn):
    """Replace each {tag:body} marker with fn(body)."""
    out, i = "", 0
    while True:
        j = q.find("{%s:" % tag, i)
        if j < 0:
            return out + q[i:]
        e = q.find("}", j)
        out += q[i:j] + fn(q[j + len(tag) + 2:e])
        i = e + 1


def expand(q, form):
    """Replace each {M:word} marker with form % word."""
    return markers(q, "M", lambda w: form % w)


def expand_lists(q, quarry):
    """Replace each {A:col:list} marker with col = ANY(ARRAY[list]) for Quarry,
    col IN (list) for the peers."""
    return markers(q, "A", lambda b: ("%s = ANY(ARRAY[%s])" if quarry else "%s IN (%s)")
                   % tuple(b.split(":", 1)))


def for_quarry(q):
    return expand(expand_lists(q, True), "title @@ '%s'")


def for_peer(q):
    return expand(expand_lists(q, False), "(' ' || title || ' ') LIKE '%% %s %%'")


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


def same_rows(a, b):
    """Rows equal cell by cell, floats to 1e-8 relative: an aggregate of
    floats summed in another order (stddev, variance, moving sums) may
    differ in its last digits."""
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b):
        if len(ra) != len(rb):
            return False
        for x, y in zip(ra, rb):
            if x == y:
                continue
            try:
                fx, fy = float(x), float(y)
            except (TypeError, ValueError):
                return False
            if abs(fx - fy) > 1e-8 * max(1.0, abs(fy)):
                return False
    return True


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
        load = CREATE + inserts(rows) + amount_rows()
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
        queries = [gen_query() + (True,) for _ in range(N_QUERIES)]
        queries += [gen_olap() for _ in range(N_OLAP)]
        queries += [gen_surface() for _ in range(N_SURFACE)]
        queries += [gen_typed() for _ in range(N_TYPED)]
        queries += [gen_numeric() for _ in range(N_NUMERIC)]
        qres, qerr = quarry_batch(data, [for_quarry(q) for q, _, _ in queries])
        pres = pg.run([for_peer(q) for q, _, _ in queries])[0] if pg else {}
        n_lite = n_pg = 0
        for i, (q, ordered, sqlite_too) in enumerate(queries):
            got = qres.get(i)
            if not check(got is not None, "quarry answers: %s (%s)" % (for_quarry(q), qerr[-300:])):
                continue
            got = canon_rows(got, ordered)
            try:
                if sqlite_too:  # (else PostgreSQL only: SQLite cannot say it)
                    want = canon_rows(lite.execute(for_peer(q)).fetchall(), ordered)
                    n_lite += 1
                    check(same_rows(got, want), "sqlite agrees on: %s\n  quarry %s\n  sqlite %s"
                          % (for_quarry(q), got[:6], want[:6]))
            except sqlite3.Error as e:
                check(False, "sqlite runs %s: %s" % (for_peer(q), e))
            if pg:
                pw = pres.get(i)
                if check(pw is not None, "postgres answers: %s" % for_peer(q)):
                    n_pg += 1
                    pw = canon_rows(pw, ordered)
                    check(same_rows(got, pw), "postgres agrees on: %s\n  quarry %s\n  postgres %s"
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
