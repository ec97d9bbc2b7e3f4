"""End to end over the PostgreSQL wire protocol with real clients: psql
(\\copy in, queries, COPY TO STDOUT, the caret under a syntax error, \\dt,
\\d TABLE), psycopg2 (parameters, types, server-side cursors, transactions,
SQLSTATEs), SQLAlchemy Core and table reflection (inspector, MetaData.reflect),
the PostgreSQL JDBC driver (PreparedStatement with
fetch size, so portals are suspended and resumed, binary transfer and
metadata), and pgbench (custom scripts of ranked searches, a filtered
aggregate and a point lookup, 4 clients, in the prepared, extended and simple
protocols).  Every answer is checked against the rows the test generated
(a Python model of the table)."""
import csv
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile

from qtest import DataDir, check, finish, skip
from pg_server import PgServe

try:
    import psycopg2
    import psycopg2.errors
except ImportError:
    psycopg2 = None

if not shutil.which("psql"):
    skip("psql not installed (Debian postgresql-client)")

VOCAB = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee "
         "zulu amber basalt cobalt dune ember fjord glacier harbor island jungle").split()
N = 3000
EPOCH = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)


def make_rows():
    rows = []
    for i in range(1, N + 1):
        words = [VOCAB[(i * k * 31 + k * 7) % len(VOCAB)] for k in range(1, 3 + i % 4)]
        rows.append({
            "id": i,
            "title": " ".join(words),
            "views": (i * 7919) % 1000,
            "rating": i / 8.0,
            "published": EPOCH + datetime.timedelta(hours=i),
            "tag": "tag%d" % (i % 10),
            "flag": i % 3 == 0,
        })
    return rows


ROWS = make_rows()
BY_ID = {r["id"]: r for r in ROWS}
# The table's schema: the DDL is made from it, and what psql's \d and
# SQLAlchemy's reflection report is checked against it (format_type names).
COLUMNS = [("id", "bigint"), ("title", "text"), ("views", "integer"),
           ("rating", "double precision"), ("published", "timestamp with time zone"),
           ("tag", "character varying(20)"), ("flag", "boolean")]
PKEY = "id"
INDEXES = {"news_views": "views"}  # B-tree indexes besides the primary key's
DDL = "create table news (%s)" % ", ".join(
    "%s %s%s" % (n, t, " primary key" if n == PKEY else "") for n, t in COLUMNS)


def write_csv(path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "title", "views", "rating", "published", "tag", "flag"])
        for r in ROWS:
            w.writerow([r["id"], r["title"], r["views"], repr(r["rating"]),
                        r["published"].strftime("%Y-%m-%d %H:%M:%S+00"), r["tag"],
                        "t" if r["flag"] else "f"])


def test_psql(srv, work):
    rc, out, err = srv.psql("-c", DDL)
    check(rc == 0 and "CREATE TABLE" in out, "psql create table: %s %s" % (out, err))
    path = os.path.join(work, "news.csv")
    write_csv(path)
    rc, out, err = srv.psql("-c", "\\copy news from '%s' csv header" % path)
    check(rc == 0 and out.strip() == "COPY %d" % N, "\\copy in: %r %r" % (out, err))

    rc, out, err = srv.psql("-At", "-c", "select count(*) from news")
    check(out.strip() == str(N), "count after \\copy: %r %r" % (out, err))

    rc, out, err = srv.psql("-At", "-F", ",", "-c",
                            "select id, views, tag, flag from news where views > 990 order by id")
    want = ["%d,%d,%s,%s" % (r["id"], r["views"], r["tag"], "t" if r["flag"] else "f")
            for r in ROWS if r["views"] > 990]
    check(out.split() == want, "filtered select: got %d lines, want %d (%s)" %
          (len(out.split()), len(want), err.strip()))

    # several statements in one Query message: psql prints each result
    rc, out, err = srv.psql("-At", "-c", "select 1; select 'two'; select 3")
    check(out.split() == ["1", "two", "3"], "multi-statement query: %r %r" % (out, err))

    # a syntax error: PostgreSQL's caret under the offending token
    rc, out, err = srv.psql("-c", "select id, views\n  from news order id")
    m = re.search(r"LINE 2: (.*)\n(\s*)\^", err)
    check('syntax error at or near "id"' in err and m is not None,
          "syntax error with LINE/caret: %r" % err)
    if m:
        line_prefix = len("LINE 2: ")
        caret_col = len(m.group(2)) - line_prefix
        check(m.group(1)[caret_col:] == "id", "caret under 'id': %r" % err)

    # an error in the second statement stops the rest of the string
    rc, out, err = srv.psql("-At", "-c", "select 10; select nope from news; select 30")
    check("column \"nope\" does not exist" in err and "30" not in out.split(),
          "error aborts the rest of the query string: %r %r" % (out, err))

    # full-text search with @@: every hit contains the word, the count agrees
    word = "glacier"
    rc, out, err = srv.psql("-At", "-c",
                            "select id from news where title @@ '%s' order by id" % word)
    want_ids = [r["id"] for r in ROWS if word in r["title"].split()]
    got = [int(x) for x in out.split()] if rc == 0 and not err.strip() else None
    check(got == want_ids, "title @@ '%s': %s ids, want %d (%s)" %
          (word, None if got is None else len(got), len(want_ids), err.strip()))

    # ranked: score() comes back in descending order, hits contain the words
    rc, out, err = srv.psql("-At", "-F", ",", "-c",
                            "select id, score() from news where title @@ 'glacier harbor' "
                            "order by score() desc limit 25")
    hits = [(int(a), float(b)) for a, b in (ln.split(",") for ln in out.split())] if rc == 0 \
        else []
    check(len(hits) == 25 and all(hits[i][1] >= hits[i + 1][1] for i in range(24)) and
          all(set(BY_ID[i]["title"].split()) & {"glacier", "harbor"} for i, _ in hits),
          "ranked search with score(): %r %s" % (hits[:3], err.strip()))

    # EXPLAIN ANALYZE goes through as rows of text
    rc, out, err = srv.psql("-c", "explain analyze select id from news where title @@ 'glacier' "
                            "order by score() desc limit 3")
    check(rc == 0 and "QUERY PLAN" in out and "news" in out, "EXPLAIN ANALYZE: %r %r" %
          (out[:300], err))

    # COPY TO STDOUT through psql (CopyOutResponse / CopyData / CopyDone)
    rc, out, err = srv.psql("-c", "copy news to stdout")
    lines = [ln.split("\t") for ln in out.splitlines()]
    got = {int(f[0]): (f[1], int(f[2])) for f in lines if len(f) == 7}
    want = {r["id"]: (r["title"], r["views"]) for r in ROWS}
    check(got == want, "COPY TO STDOUT: %d rows, want %d (%s)" % (len(got), len(want),
                                                                  err.strip()))

    # \copy of bad data: the error names the line; nothing of that COPY lands
    bad = os.path.join(work, "bad.csv")
    with open(bad, "w") as f:
        f.write("id,title,views,rating,published,tag,flag\n")
        f.write("900001,ok,1,1.0,2025-01-01 00:00:00+00,t,t\n")
        f.write("900002,bad,notanumber,1.0,2025-01-01 00:00:00+00,t,t\n")
    rc, out, err = srv.psql("-c", "\\copy news from '%s' csv header" % bad)
    check("ERROR" in err, "bad \\copy fails: %r %r" % (out, err))
    rc, out, err = srv.psql("-At", "-c", "select count(*) from news")
    check(out.strip() == str(N), "failed \\copy added nothing: %r" % out)

    # \dt and \d read the catalog (pg_class & co)
    for name, col in INDEXES.items():
        rc, out, err = srv.psql("-c", "create index %s on news (%s)" % (name, col))
        check(rc == 0 and "CREATE INDEX" in out, "create index %s: %r %r" % (name, out, err))
    rc, out, err = srv.psql("-c", "\\dt")
    check(not err.strip() and re.search(r"\bnews\b.*\btable\b", out) is not None,
          "\\dt lists news: %r %r" % (out, err))
    check_describe(srv)


def check_describe(srv):
    """psql's \\d news: every column with its type and nullability, then the
    primary key and the indexes, as the schema says."""
    rc, out, err = srv.psql("-c", "\\d news")
    check(rc == 0 and not err.strip() and 'Table "public.news"' in out,
          "\\d news answers: %r %r" % (out[:300], err))
    rows = [[c.strip() for c in ln.split("|")] for ln in out.splitlines() if ln.count("|") == 4]
    got = [(r[0], r[1], r[3]) for r in rows[1:]]  # after the header line
    want = [(n, t, "not null" if n == PKEY else "") for n, t in COLUMNS]
    check(got == want, "\\d news columns: %r, want %r" % (got, want))
    tail = out.split("Indexes:", 1)[1] if "Indexes:" in out else ""
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    want_idx = ['"news_pkey" PRIMARY KEY, btree (%s)' % PKEY] + \
        ['"%s" btree (%s)' % (n, c) for n, c in sorted(INDEXES.items())]
    check(lines == want_idx, "\\d news indexes: %r, want %r" % (lines, want_idx))
    # the same columns from information_schema (the catalog's other face)
    rc, out, err = srv.psql("-At", "-F", "|", "-c",
                            "select column_name, data_type, character_maximum_length, "
                            "is_nullable from information_schema.columns "
                            "where table_name = 'news' order by ordinal_position")
    info = []
    for ln in out.splitlines():
        n, t, ml, nul = ln.split("|")
        info.append((n, "%s(%s)" % (t, ml) if ml else t, "not null" if nul == "NO" else ""))
    check(info == got, "information_schema.columns agrees with \\d: %r vs %r" % (info, got))


def test_psycopg2(srv):
    if psycopg2 is None:
        print("SKIP: psycopg2 not installed (Debian python3-psycopg2)")
        return
    conn = psycopg2.connect(host="127.0.0.1", port=srv.pg_port, user="tester", dbname="quarry",
                            connect_timeout=10, application_name="e2e-psycopg2")
    cur = conn.cursor()
    # server parameters reported at startup
    check(conn.server_version >= 150000, "server_version: %r" % conn.server_version)
    check(conn.get_parameter_status("server_encoding") == "UTF8" and
          conn.get_parameter_status("integer_datetimes") == "on" and
          conn.get_parameter_status("standard_conforming_strings") == "on",
          "parameter status at startup")
    check(conn.get_parameter_status("application_name") == "e2e-psycopg2",
          "application_name reported back: %r" % conn.get_parameter_status("application_name"))

    # parameters (psycopg2 quotes them client-side: the text must survive)
    tricky = "it's \"quoted\" \\ back; é ☃"
    cur.execute("select %s::text, %s::int8, %s::float8, %s::bool, %s::text",
                (tricky, -(2 ** 40), 0.1, True, None))
    row = cur.fetchone()
    check(row == (tricky, -(2 ** 40), 0.1, True, None), "parameter round trip: %r" % (row,))
    check([d.type_code for d in cur.description] == [25, 20, 701, 16, 25],
          "result type OIDs: %r" % [d.type_code for d in cur.description])

    cur.execute("select id, title, views, rating, published, tag, flag from news "
                "where views between %s and %s and tag = %s order by id", (100, 200, "tag3"))
    got = cur.fetchall()
    want = [(r["id"], r["title"], r["views"], r["rating"], r["published"], r["tag"], r["flag"])
            for r in ROWS if 100 <= r["views"] <= 200 and r["tag"] == "tag3"]
    check(got == want, "typed rows with parameters: %d rows, want %d; first %r vs %r" %
          (len(got), len(want), got[:1], want[:1]))
    conn.commit()

    # server-side (named) cursor: DECLARE / FETCH FORWARD n in a transaction
    named = conn.cursor("e2e_cursor")
    named.itersize = 128
    named.execute("select id, views from news order by id")
    got = [r for r in named]
    check(got == [(r["id"], r["views"]) for r in ROWS],
          "named cursor streams every row in order: %d rows" % len(got))
    named.close()
    named = conn.cursor("e2e_cursor2")
    named.execute("select id from news where flag order by id")
    a = named.fetchmany(7)
    b = named.fetchone()
    rest = named.fetchall()
    flagged = [r["id"] for r in ROWS if r["flag"]]
    check([x[0] for x in a + [b] + rest] == flagged, "fetchmany/fetchone/fetchall on a cursor")
    named.close()
    conn.commit()

    # transactions: rollback discards, commit publishes to other sessions
    other = psycopg2.connect(host="127.0.0.1", port=srv.pg_port, user="tester", dbname="quarry")
    other.autocommit = True
    ocur = other.cursor()
    cur.execute("insert into news (id, title, views, rating, published, tag, flag) "
                "values (%s, %s, %s, %s, %s, %s, %s)",
                (700001, "rolled back", 1, 1.0, EPOCH, "t", False))
    check(cur.rowcount == 1, "insert rowcount: %r" % cur.rowcount)
    conn.rollback()
    ocur.execute("select count(*) from news where id = 700001")
    check(ocur.fetchone()[0] == 0, "rolled back insert is not visible")
    cur.execute("insert into news (id, title, views, rating, published, tag, flag) "
                "values (%s, %s, %s, %s, %s, %s, %s)",
                (700002, "committed row", 2, 2.0, EPOCH, "t", True))
    conn.commit()
    ocur.execute("select title, flag from news where id = %s", (700002,))
    check(ocur.fetchall() == [("committed row", True)], "committed insert is visible")

    # errors: SQLSTATEs, and the failed transaction state until ROLLBACK
    for sql, cls in (("select nope from news", psycopg2.errors.UndefinedColumn),
                     ("select * from no_such_table", psycopg2.errors.UndefinedTable),
                     ("select 1/0", psycopg2.errors.DivisionByZero),
                     ("selec 1", psycopg2.errors.SyntaxError)):
        try:
            cur.execute(sql)
            check(False, "%s should fail" % sql)
        except cls:
            check(True, sql)
        except psycopg2.Error as e:
            check(False, "%s: wrong error %s %s" % (sql, e.pgcode, e))
        try:
            cur.execute("select 1")
            check(False, "statement in a failed transaction should fail")
        except psycopg2.errors.InFailedSqlTransaction:
            check(conn.get_transaction_status() == 3, "transaction status E (INERROR)")
        conn.rollback()
    cur.execute("select 42")
    check(cur.fetchone() == (42,), "usable after rollback")
    conn.commit()
    other.close()
    conn.close()


def test_sqlalchemy(srv):
    try:
        import sqlalchemy as sa
    except ImportError:
        print("SKIP: SQLAlchemy not installed (Debian python3-sqlalchemy)")
        return
    if psycopg2 is None:
        return
    eng = sa.create_engine("postgresql+psycopg2://tester@127.0.0.1:%d/quarry" % srv.pg_port)
    md = sa.MetaData()
    news = sa.Table("news", md, sa.Column("id", sa.BigInteger, primary_key=True),
                    sa.Column("title", sa.Text), sa.Column("views", sa.Integer),
                    sa.Column("tag", sa.String(20)))
    with eng.connect() as c:
        q = (sa.select(news.c.id, news.c.views).where(news.c.views > sa.bindparam("v"))
             .where(news.c.tag == "tag7").order_by(news.c.id))
        got = [tuple(r) for r in c.execute(q, {"v": 900})]
        want = [(r["id"], r["views"]) for r in ROWS if r["views"] > 900 and r["tag"] == "tag7"]
        check(got == want, "SQLAlchemy Core select: %d rows, want %d" % (len(got), len(want)))
        n = c.execute(sa.select(sa.func.count()).select_from(news)
                      .where(news.c.id <= 3000)).scalar()
        check(n == N, "SQLAlchemy count: %r" % n)
    check_reflection(sa, eng)
    eng.dispose()


def check_reflection(sa, eng):
    """SQLAlchemy's inspector and MetaData.reflect against the schema."""
    from sqlalchemy.dialects import postgresql as pg
    kinds = {"bigint": (pg.BIGINT, {}), "text": (pg.TEXT, {}), "integer": (pg.INTEGER, {}),
             "double precision": (pg.DOUBLE_PRECISION, {}),
             "timestamp with time zone": (pg.TIMESTAMP, {"timezone": True}),
             "character varying(20)": (pg.VARCHAR, {"length": 20}),
             "boolean": (pg.BOOLEAN, {})}

    def same_type(t, pgname):
        cls, attrs = kinds[pgname]
        return isinstance(t, cls) and all(getattr(t, k) == v for k, v in attrs.items())

    insp = sa.inspect(eng)
    cols = insp.get_columns("news")
    check([c["name"] for c in cols] == [n for n, _ in COLUMNS],
          "reflected column names: %r" % [c["name"] for c in cols])
    for c, (n, t) in zip(cols, COLUMNS):
        check(same_type(c["type"], t), "reflected type of %s: %r, want %s" % (n, c["type"], t))
        check(c["nullable"] == (n != PKEY), "reflected nullability of %s: %r" % (n, c["nullable"]))
        check(c["default"] is None, "reflected default of %s: %r" % (n, c["default"]))
    pk = insp.get_pk_constraint("news")
    check(pk["constrained_columns"] == [PKEY] and pk["name"] == "news_pkey",
          "reflected primary key: %r" % pk)
    idx = sorted((i["name"], i["column_names"], i["unique"]) for i in insp.get_indexes("news"))
    want = sorted((n, [c], False) for n, c in INDEXES.items())
    check(idx == want, "reflected indexes: %r, want %r" % (idx, want))
    check(insp.get_foreign_keys("news") == [] and insp.get_unique_constraints("news") == [],
          "no foreign keys or unique constraints reflected")
    check("news" in insp.get_table_names(), "inspector lists news: %r" % insp.get_table_names())
    md = sa.MetaData()
    md.reflect(eng)
    refl = md.tables.get("news")
    check(refl is not None and [c.name for c in refl.columns] == [n for n, _ in COLUMNS] and
          [c.name for c in refl.primary_key] == [PKEY] and
          sorted(i.name for i in refl.indexes) == sorted(INDEXES),
          "MetaData.reflect: %r" % (refl,))


# pgbench: each script is one transaction, and pgbench picks one at random per
# transaction (-f several times). Ranked searches, a search with a filter and a
# grouped aggregate, and a point lookup by a random id.
PGBENCH_SCRIPTS = {
    "ranked_glacier": "select id from news where title @@ 'glacier' order by score() desc limit 10;\n",
    "ranked_two": "select id, score() from news where title @@ 'harbor ember' "
                  "order by score() desc limit 10;\n",
    "agg": "select tag, count(*), avg(views) from news where title @@ 'fjord' and views > 100 "
           "group by tag;\n",
    "point": "\\set id random(1, %d)\nselect id, title, views from news where id = :id;\n" % N,
}
PGBENCH_CLIENTS, PGBENCH_TX = 4, 50
LOG_TROUBLE = re.compile(r"^\S+ (ERROR|WARN|FATAL|PANIC) ", re.M)


def test_pgbench(srv, work):
    """pgbench in each query protocol: every transaction of every client runs,
    none fails, and the server stays up with nothing logged at WARN or ERROR."""
    if not shutil.which("pgbench"):
        print("SKIP: pgbench not installed (Debian postgresql-client)")
        return
    files = []
    for name, text in PGBENCH_SCRIPTS.items():
        path = os.path.join(work, "pgbench-%s.sql" % name)
        with open(path, "w") as f:
            f.write(text)
        files += ["-f", path]
    log_before = len(srv.text())
    for mode in ("prepared", "extended", "simple"):
        p = subprocess.run(["pgbench", "-n", "-M", mode, "-c", str(PGBENCH_CLIENTS), "-j", "2",
                            "-t", str(PGBENCH_TX)] + files, env=srv.env(), capture_output=True,
                           text=True, timeout=300)
        out = p.stdout
        m = re.search(r"number of transactions actually processed: (\d+)", out)
        f = re.search(r"number of failed transactions: (\d+)", out)
        check(p.returncode == 0, "pgbench -M %s exits 0: %s" % (mode, (p.stderr or out)[-800:]))
        check(m is not None and int(m.group(1)) == PGBENCH_CLIENTS * PGBENCH_TX,
              "pgbench -M %s processed %s transactions, want %d" %
              (mode, m.group(1) if m else None, PGBENCH_CLIENTS * PGBENCH_TX))
        check(f is not None and int(f.group(1)) == 0,
              "pgbench -M %s: no failed transaction: %r" % (mode, f.group(0) if f else out[-300:]))
    rc, out, err = srv.psql("-At", "-c", "select count(*) from news where title @@ 'glacier'")
    want = sum(1 for r in ROWS if "glacier" in r["title"].split())
    check(rc == 0 and out.strip() == str(want),
          "server answers after pgbench: %r %r" % (out, err))
    trouble = LOG_TROUBLE.findall(srv.text()[log_before:])
    check(not trouble, "no WARN/ERROR logged during pgbench: %s" % srv.text()[log_before:][-1500:])


JAVA = r"""
import java.sql.*;
import java.util.Properties;

public class PgJdbc {
    public static void main(String[] a) throws Exception {
        Properties p = new Properties();
        p.setProperty("user", "tester");
        p.setProperty("prepareThreshold", "2");
        Connection c = DriverManager.getConnection("jdbc:postgresql://127.0.0.1:" + a[0] + "/quarry", p);
        c.setAutoCommit(false);
        PreparedStatement ps = c.prepareStatement(
            "select id, title, views, rating, published, flag from news where views > ? and tag = ? order by id");
        ps.setFetchSize(7);
        for (int round = 0; round < 4; round++) {
            ps.setInt(1, 900 + round);
            ps.setString(2, "tag" + round);
            ResultSet rs = ps.executeQuery();
            if (round == 0) {
                ResultSetMetaData md = rs.getMetaData();
                StringBuilder sb = new StringBuilder("META");
                for (int i = 1; i <= md.getColumnCount(); i++)
                    sb.append(" ").append(md.getColumnName(i)).append(":").append(md.getColumnTypeName(i));
                System.out.println(sb);
            }
            while (rs.next())
                System.out.println("ROW " + round + " " + rs.getLong(1) + "|" + rs.getString(2) + "|" + rs.getInt(3)
                    + "|" + rs.getDouble(4) + "|" + rs.getTimestamp(5).toInstant().getEpochSecond() + "|" + rs.getBoolean(6));
            rs.close();
        }
        ps.close();
        c.commit();
        try (Statement st = c.createStatement()) {
            st.executeQuery("select nope from news");
        } catch (SQLException e) {
            System.out.println("ERR " + e.getSQLState());
        }
        c.rollback();
        try (PreparedStatement p2 = c.prepareStatement("select ?::int8 * 2, ?::text")) {
            p2.setLong(1, 21);
            p2.setString(2, "é☃");
            ResultSet rs = p2.executeQuery();
            rs.next();
            System.out.println("PARAM " + rs.getLong(1) + " " + rs.getString(2));
        }
        c.close();
    }
}
"""


def test_jdbc(srv, work):
    jar = "/usr/share/java/postgresql.jar"
    if not (shutil.which("javac") and shutil.which("java") and os.path.exists(jar)):
        print("SKIP: JDBC: javac or the driver is missing (Debian libpostgresql-jdbc-java, "
              "openjdk-17-jdk-headless)")
        return
    src = os.path.join(work, "PgJdbc.java")
    with open(src, "w") as f:
        f.write(JAVA)
    p = subprocess.run(["javac", "-d", work, src], capture_output=True, text=True, timeout=180)
    if not check(p.returncode == 0, "javac: %s" % p.stderr[-500:]):
        return
    p = subprocess.run(["java", "-cp", "%s:%s" % (work, jar), "PgJdbc", str(srv.pg_port)],
                       capture_output=True, text=True, timeout=180)
    check(p.returncode == 0, "JDBC program: %s" % p.stderr[-800:])
    out = p.stdout.splitlines()
    meta = [ln for ln in out if ln.startswith("META")]
    check(meta == ["META id:int8 title:text views:int4 rating:float8 published:timestamptz "
                   "flag:bool"], "JDBC metadata: %r" % meta)
    for rnd in range(4):
        got = [ln.split(" ", 2)[2] for ln in out if ln.startswith("ROW %d " % rnd)]
        want = ["%d|%s|%d|%r|%d|%s" % (r["id"], r["title"], r["views"], r["rating"],
                                         int(r["published"].timestamp()),
                                         "true" if r["flag"] else "false")
                for r in ROWS if r["views"] > 900 + rnd and r["tag"] == "tag%d" % rnd]
        check(got == want, "JDBC round %d (fetch size 7, %s): %d rows, want %d; %r vs %r" %
              (rnd, "server-prepared" if rnd >= 2 else "unnamed", len(got), len(want),
               got[:1], want[:1]))
    check("ERR 42703" in out, "JDBC SQLState: %r" % [ln for ln in out if ln.startswith("ERR")])
    check("PARAM 42 é☃" in out, "JDBC parameters: %r" % [ln for ln in out if "PARAM" in ln])


def main():
    work = tempfile.mkdtemp(prefix="quarry-pg-")
    try:
        with DataDir() as d:
            srv = PgServe(d.path, work)
            if not check(srv.pg_port is not None, "server started: %s" % srv.text()[-2000:]):
                srv.stop()
                finish()
            try:
                test_psql(srv, work)
                test_psycopg2(srv)
                test_sqlalchemy(srv)
                test_jdbc(srv, work)
                test_pgbench(srv, work)
            finally:
                rc = srv.stop()
                check(rc == 0, "server exits 0 on SIGTERM: %d" % rc)
                check("Sanitizer" not in srv.text() and "runtime error" not in srv.text(),
                      "no sanitizer report under an ASan build: %s" % srv.text()[-3000:])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
