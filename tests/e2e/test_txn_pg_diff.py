"""Transactions against PostgreSQL 15 (issue 17): seeded scripts of two
sessions interleaving BEGIN (READ COMMITTED or REPEATABLE READ), writes,
SAVEPOINT / ROLLBACK TO / RELEASE, COMMIT / ROLLBACK and reads run step by
step against Quarry's PG port and a throwaway PostgreSQL 15; every step must
give the same outcome (its rows, or its error's SQLSTATE) on both.

Each session writes its own keys (PostgreSQL would make a second writer of a
row wait for the first, which a step-by-step script cannot do), while both
read every row, so what each sees of the other's committed, uncommitted and
rolled-back work is compared.  A second table t2 is written and read too:
a REPEATABLE READ block's snapshot covers every table from its first
statement, a commit to t2 after the block read t included.

The DDL scripts first add a column, a primary key and an index to tables in
the block that created them (then ROLLBACK TO / COMMIT / ROLLBACK), then give
each session a table of its own (u0, u1) that it drops,
creates, alters (SET / DROP DEFAULT, ADD COLUMN: the block's until COMMIT,
gone with a rollback), indexes and drops indexes of, inside and outside
blocks with savepoints, reading its rows, its columns and its catalog rows
as it goes.  PostgreSQL locks a table its DDL touches until the block ends, so
the other session reads that table only outside blocks and only while no
open block has changed it (Quarry would not make it wait); it reads the
table's catalog rows at any time (an open block's new table and indexes are
not there, its dropped ones still are)."""
import os
import random
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from qtest import DataDir, check, finish, skip  # noqa: E402
from pg_server import PgServe  # noqa: E402
from conformance import Postgres, PG_BIN  # noqa: E402

try:
    import psycopg2
except ImportError:
    psycopg2 = None

SEEDS = range(1, 9)
STEPS = 70


def connect(dsn):
    c = psycopg2.connect(dsn)
    c.autocommit = True  # the script sends BEGIN / COMMIT itself
    return c


def step(conn, sql):
    """The outcome of one statement: its rows, "ok", or the error's SQLSTATE."""
    cur = conn.cursor()
    try:
        cur.execute(sql)
        return [list(r) for r in cur.fetchall()] if cur.description else "ok"
    except psycopg2.Error as e:
        return "error " + str(e.pgcode)


def script(seed):
    """Two sessions' statements, interleaved: a list of (session, sql)."""
    rnd = random.Random(seed)
    out = []
    state = [None, None]  # per session: None idle, else "first" or "in"
    names = [[], []]
    for _ in range(STEPS):
        s = rnd.randrange(2)
        keys = range(s * 10, s * 10 + 6)
        k = rnd.choice(keys)
        if state[s] is None and rnd.random() < 0.4:
            lvl = rnd.choice(["", " ISOLATION LEVEL REPEATABLE READ", " ISOLATION LEVEL READ COMMITTED"])
            out.append((s, "BEGIN" + lvl))
            out.append((s, "SELECT id, v FROM t ORDER BY id"))
            state[s] = "in"
            names[s] = []
            continue
        r = rnd.random()
        if rnd.random() < 0.2:  # the second table: its writes, and reads of it late in blocks
            out.append((s, rnd.choice([
                "INSERT INTO t2 VALUES (%d, %d) ON CONFLICT (id) DO UPDATE SET v = excluded.v"
                % (k, rnd.randrange(100)),
                "DELETE FROM t2 WHERE id = %d" % k,
                "SELECT id, v FROM t2 ORDER BY id"])))
            continue
        if r < 0.15:
            out.append((s, "INSERT INTO t VALUES (%d, %d) ON CONFLICT (id) DO UPDATE SET v = excluded.v"
                        % (k, rnd.randrange(100))))
        elif r < 0.25:
            out.append((s, "UPDATE t SET v = v + 1 WHERE id >= %d AND id < %d" % (k, keys[-1] + 1)))
        elif r < 0.32:
            out.append((s, "DELETE FROM t WHERE id = %d" % k))
        elif r < 0.37:
            out.append((s, "INSERT INTO t VALUES (%d, 1)" % k))  # may be a duplicate: 23505
        elif r < 0.39:
            out.append((s, "SELECT nope FROM t"))  # 42703, or 25P02 in a failed block
        elif r < 0.60:
            out.append((s, rnd.choice(["SELECT id, v FROM t ORDER BY id",
                                       "SELECT count(*), sum(v) FROM t",
                                       "SELECT id % 2 AS odd, count(*) FROM t GROUP BY 1 ORDER BY 1"])))
        elif state[s] is None:
            continue
        elif r < 0.70:
            n = "s%d" % rnd.randrange(3)
            names[s].append(n)
            out.append((s, "SAVEPOINT " + n))
        elif r < 0.78:
            out.append((s, "ROLLBACK TO SAVEPOINT s%d" % rnd.randrange(3)))
        elif r < 0.82:
            out.append((s, "RELEASE SAVEPOINT s%d" % rnd.randrange(3)))
        else:
            out.append((s, rnd.choice(["COMMIT", "COMMIT", "ROLLBACK"])))
            state[s] = None
    for s in range(2):
        out.append((s, "COMMIT"))
    out.append((0, "SELECT id, v FROM t ORDER BY id"))
    return out


# The cross-table REPEATABLE READ case, always: session 1 commits to t2 after
# session 0's block read t only; the block's first read of t2 must not show it.
RR_ACROSS = [(0, "BEGIN ISOLATION LEVEL REPEATABLE READ"), (0, "SELECT id, v FROM t ORDER BY id"),
             (1, "INSERT INTO t2 VALUES (15, 15)"),
             (1, "BEGIN"), (1, "INSERT INTO t VALUES (12, 12)"), (1, "INSERT INTO t2 VALUES (12, 12)"),
             (1, "COMMIT"),
             (0, "SELECT id, v FROM t2 ORDER BY id"), (0, "SELECT count(*) FROM t"), (0, "COMMIT"),
             (0, "SELECT id, v FROM t2 ORDER BY id")]

# ADD COLUMN, ADD PRIMARY KEY and a B-tree in the block that created the
# table (savepoints before the CREATE): they go or stay with it.  (ADD
# COLUMN on older tables is in ddl_script, ADD PRIMARY KEY in REKEYED.)
CREATED_ALTERED = [
    (0, "BEGIN"), (0, "SAVEPOINT a"), (0, "CREATE TABLE w0 (id bigint PRIMARY KEY, v int)"),
    (0, "ALTER TABLE w0 ADD COLUMN c int"), (0, "CREATE INDEX w0_c ON w0 (c)"),
    (0, "INSERT INTO w0 VALUES (1, 2, 3)"), (0, "SELECT id, v, c FROM w0 WHERE c = 3"),
    (1, "SELECT count(*) FROM pg_class WHERE relname LIKE 'w0%'"),
    (0, "ROLLBACK TO SAVEPOINT a"), (0, "SELECT count(*) FROM pg_class WHERE relname LIKE 'w0%'"),
    (0, "CREATE TABLE w0 (a int, b varchar(8))"), (0, "ALTER TABLE w0 ADD PRIMARY KEY (a)"),
    (0, "ALTER TABLE w0 ADD COLUMN c int"), (0, "INSERT INTO w0 VALUES (1, 'x', 5)"),
    (0, "COMMIT"), (1, "INSERT INTO w0 VALUES (1, 'y', 6)"), (1, "INSERT INTO w0 (a, b) VALUES (2, 'z')"),
    (1, "SELECT a, b, c FROM w0 ORDER BY a"),
    (0, "BEGIN"), (0, "CREATE TABLE w1 (id bigint PRIMARY KEY)"), (0, "ALTER TABLE w1 ADD COLUMN c int"),
    (0, "INSERT INTO w1 VALUES (1, 1)"), (0, "ROLLBACK"), (1, "SELECT * FROM w1")]


# ADD PRIMARY KEY in a block on a table older than it: the block sees the
# key and writes under it, ROLLBACK [TO] takes it back, COMMIT publishes it
# with the block's rows.  Session 1 reads the table only while no block
# holds it (PostgreSQL's ALTER TABLE would make it wait).
REKEYED = [
    (1, "CREATE TABLE w2 (a int, b varchar(8))"), (1, "INSERT INTO w2 VALUES (1, 'x'), (2, 'y')"),
    (0, "BEGIN"), (0, "ALTER TABLE w2 ADD PRIMARY KEY (a)"), (0, "INSERT INTO w2 VALUES (3, 'w')"),
    (0, "UPDATE w2 SET b = 'xx' WHERE a = 1"), (0, "SELECT a, b FROM w2 ORDER BY a"),
    (0, "INSERT INTO w2 VALUES (3, 'dup')"), (0, "ROLLBACK"),
    (1, "SELECT a, b FROM w2 ORDER BY a"), (1, "INSERT INTO w2 VALUES (1, 'dup')"),
    (1, "DELETE FROM w2 WHERE b = 'dup'"),
    (0, "BEGIN"), (0, "SAVEPOINT p"), (0, "ALTER TABLE w2 ADD PRIMARY KEY (a)"),
    (0, "INSERT INTO w2 VALUES (4, 'v')"), (0, "ROLLBACK TO SAVEPOINT p"),
    (0, "INSERT INTO w2 VALUES (1, 'again')"), (0, "SELECT a, b FROM w2 ORDER BY a, b"),
    (0, "COMMIT"), (1, "SELECT a, b FROM w2 ORDER BY a, b"),
    (0, "BEGIN"), (0, "ALTER TABLE w2 ADD PRIMARY KEY (a)"), (0, "ROLLBACK"),
    (1, "DELETE FROM w2 WHERE b = 'again'"),
    (0, "BEGIN ISOLATION LEVEL REPEATABLE READ"), (0, "ALTER TABLE w2 ADD PRIMARY KEY (a)"),
    (0, "INSERT INTO w2 VALUES (3, 'w')"), (0, "DELETE FROM w2 WHERE a = 2"),
    (0, "SELECT count(*) FROM w2"), (0, "COMMIT"),
    (1, "INSERT INTO w2 VALUES (3, 'dup')"), (1, "SELECT a, b FROM w2 ORDER BY a"),
    (1, "SELECT count(*) FROM pg_constraint WHERE conrelid = 'w2'::regclass AND contype = 'p'"),
    (1, "SELECT count(*) FROM w2 WHERE a = 3")]

# DROP TABLE and CREATE TABLE of the same name in one block (pg_dump --clean
# restored with psql --single-transaction): the block sees the new table,
# session 1 (after the block) the old one or the new one with its rows.
REMADE = [
    (1, "CREATE TABLE w3 (id serial PRIMARY KEY, v int)"), (1, "INSERT INTO w3 (v) VALUES (1), (2)"),
    (0, "BEGIN"), (0, "DROP TABLE w3"), (0, "CREATE TABLE w3 (id serial PRIMARY KEY, v int, w text)"),
    (0, "INSERT INTO w3 (v, w) VALUES (10, 'a')"), (0, "SELECT id, v, w FROM w3 ORDER BY id"),
    (0, "ROLLBACK"), (1, "SELECT id, v FROM w3 ORDER BY id"),
    (0, "BEGIN"), (0, "DROP TABLE w3"), (0, "SAVEPOINT p"), (0, "CREATE TABLE w3 (k text PRIMARY KEY)"),
    (0, "INSERT INTO w3 VALUES ('x')"), (0, "ROLLBACK TO SAVEPOINT p"),
    (0, "SELECT count(*) FROM pg_class WHERE relname = 'w3'"),
    (0, "CREATE TABLE w3 (a int, b text)"), (0, "INSERT INTO w3 VALUES (5, 'five'), (6, 'six')"),
    (0, "ALTER TABLE w3 ADD PRIMARY KEY (a)"), (0, "SELECT a, b FROM w3 ORDER BY a"), (0, "COMMIT"),
    (1, "SELECT a, b FROM w3 ORDER BY a"), (1, "INSERT INTO w3 VALUES (5, 'again')"),
    (1, "SELECT column_name FROM information_schema.columns WHERE table_name = 'w3' ORDER BY 1"),
    (0, "BEGIN"), (0, "DROP TABLE w3"), (0, "CREATE TABLE w3 (id bigint PRIMARY KEY)"),
    (0, "DROP TABLE w3"), (0, "COMMIT"), (1, "SELECT count(*) FROM pg_class WHERE relname = 'w3'"),
    # CREATE SEQUENCE goes with the block too (nextval is never rolled back)
    (0, "BEGIN"), (0, "CREATE SEQUENCE w4_s START 5"), (0, "SELECT nextval('w4_s')"), (0, "ROLLBACK"),
    (1, "SELECT count(*) FROM pg_class WHERE relname = 'w4_s'"),
    (0, "BEGIN"), (0, "SAVEPOINT q"), (0, "CREATE SEQUENCE w4_s"), (0, "ROLLBACK TO SAVEPOINT q"),
    (0, "SELECT count(*) FROM pg_class WHERE relname = 'w4_s'"), (0, "CREATE SEQUENCE w4_s START 7"),
    (0, "COMMIT"), (1, "SELECT nextval('w4_s')")]

# ALTER TABLE ... DROP COLUMN (a rebuild too): the block's until COMMIT, with
# the index on the column and a serial's sequence going with it.
DROPPED_COLUMN = [
    (1, "CREATE TABLE w5 (id int PRIMARY KEY, a text, b varchar(8), n serial)"),
    (1, "CREATE INDEX w5_b ON w5 (b)"), (1, "INSERT INTO w5 (id, a, b) VALUES (1, 'x', 'p'), (2, 'y', 'q')"),
    (0, "BEGIN"), (0, "ALTER TABLE w5 DROP COLUMN b"), (0, "INSERT INTO w5 (id, a) VALUES (3, 'z')"),
    (0, "SELECT * FROM w5 ORDER BY id"),
    (0, "SELECT column_name FROM information_schema.columns WHERE table_name = 'w5' ORDER BY 1"),
    (0, "ROLLBACK"), (1, "SELECT * FROM w5 ORDER BY id"),
    (0, "BEGIN"), (0, "SAVEPOINT p"), (0, "ALTER TABLE w5 DROP COLUMN a"), (0, "ROLLBACK TO SAVEPOINT p"),
    (0, "INSERT INTO w5 (id, a, b) VALUES (4, 'w', 'r')"), (0, "ALTER TABLE w5 DROP COLUMN b"),
    (0, "ALTER TABLE w5 DROP COLUMN IF EXISTS b"), (0, "SELECT * FROM w5 ORDER BY id"), (0, "COMMIT"),
    (1, "SELECT * FROM w5 ORDER BY id"), (1, "SELECT count(*) FROM pg_class WHERE relname = 'w5_b'"),
    (1, "ALTER TABLE w5 DROP COLUMN n"),
    (1, "SELECT count(*) FROM pg_sequences WHERE sequencename LIKE 'w5%'"),
    (1, "ALTER TABLE w5 DROP COLUMN nope"), (1, "SELECT * FROM w5 ORDER BY id")]

# ALTER COLUMN ... TYPE (Django's AlterField of max_length, IntegerField to
# BigIntegerField): the rows must fit (22001 / 22003), the block's until COMMIT.
ALTERED_TYPE = [
    (1, "CREATE TABLE w6 (id int PRIMARY KEY, name varchar(10), n int, body text)"),
    (1, "INSERT INTO w6 VALUES (1, 'abcdef', 40000, 'red foxes'), (2, 'ab', 5, 'blue')"),
    (0, "BEGIN"), (0, "ALTER TABLE w6 ALTER COLUMN name TYPE varchar(40)"),
    (0, "INSERT INTO w6 VALUES (3, 'abcdefghijklmnop', 1, 'x')"), (0, "SELECT id, name FROM w6 ORDER BY id"),
    (0, "ROLLBACK"), (1, "INSERT INTO w6 VALUES (3, 'abcdefghijklmnop', 1, 'x')"),
    (1, "SELECT character_maximum_length FROM information_schema.columns "
        "WHERE table_name = 'w6' AND column_name = 'name'"),
    (0, "BEGIN"), (0, "ALTER TABLE w6 ALTER COLUMN name TYPE varchar(4)"), (0, "ROLLBACK"),
    (0, "ALTER TABLE w6 ALTER COLUMN n TYPE smallint"),
    (0, "BEGIN"), (0, "SAVEPOINT a"), (0, "ALTER TABLE w6 ALTER COLUMN n TYPE bigint"),
    (0, "ROLLBACK TO SAVEPOINT a"),
    (0, "ALTER TABLE w6 ALTER COLUMN name TYPE varchar(20) USING name::varchar(20)"), (0, "COMMIT"),
    (1, "SELECT column_name, data_type, character_maximum_length FROM information_schema.columns "
        "WHERE table_name = 'w6' ORDER BY ordinal_position"),
    (0, "BEGIN"), (0, "ALTER TABLE w6 ALTER COLUMN body TYPE varchar(20)"),
    (0, "SELECT id FROM w6 WHERE body = 'blue'"), (0, "COMMIT"),
    (1, "SELECT id, body FROM w6 WHERE body = 'blue'"), (1, "SELECT data_type FROM information_schema.columns "
                                                          "WHERE table_name = 'w6' AND column_name = 'body'")]


# ALTER TABLE ... RENAME COLUMN (Django's RenameField), the key's included.
RENAMED = [
    (1, "CREATE TABLE w7 (id int PRIMARY KEY, a varchar(5), body text)"),
    (1, "CREATE INDEX w7_a ON w7 (a)"), (1, "INSERT INTO w7 VALUES (1, 'x', 'red'), (2, 'y', 'blue')"),
    (0, "BEGIN"), (0, "ALTER TABLE w7 RENAME COLUMN a TO b"), (0, "SELECT * FROM w7 ORDER BY id"),
    (0, "SELECT id FROM w7 WHERE b = 'y'"), (0, "ROLLBACK"), (1, "SELECT * FROM w7 ORDER BY id"),
    (0, "BEGIN"), (0, "SAVEPOINT s"), (0, "ALTER TABLE w7 RENAME a TO b"), (0, "ROLLBACK TO SAVEPOINT s"),
    (0, "ALTER TABLE w7 RENAME COLUMN id TO k"), (0, "INSERT INTO w7 (k, a) VALUES (3, 'z')"),
    (0, "COMMIT"), (1, "SELECT * FROM w7 ORDER BY k"), (1, "INSERT INTO w7 VALUES (3, 'd', 'd')"),
    (1, "ALTER TABLE w7 RENAME COLUMN a TO body"), (1, "ALTER TABLE w7 RENAME COLUMN nope TO x"),
    (1, "SELECT column_name FROM information_schema.columns WHERE table_name = 'w7' "
        "ORDER BY ordinal_position")]


# ADD COLUMN's names and types; a table's columns by name (a column Quarry
# takes over from an ADD COLUMN that rolled back keeps that one's place).
COL_TYPES = ["int", "varchar(8)", "bigint"]
COLUMNS = ("SELECT column_name FROM information_schema.columns WHERE table_name = '%s' "
           "ORDER BY 1")


def ddl_script(seed):
    """Two sessions' DDL on their own tables u0 / u1, interleaved."""
    rnd = random.Random(seed)
    fixed = CREATED_ALTERED + REKEYED + REMADE + DROPPED_COLUMN + ALTERED_TYPE + RENAMED
    out = RR_ACROSS + (fixed if seed == SEEDS[0] else [])  # once is enough
    in_block = [False, False]
    ddl = [False, False]      # the open block changed its table (PostgreSQL holds its lock)
    dropped = [False, False]  # ... dropped it (and has not created it again)
    for _ in range(STEPS):
        s = rnd.randrange(2)
        o = 1 - s
        u = "u%d" % s
        k = rnd.randrange(s * 10, s * 10 + 5)
        if not in_block[s] and rnd.random() < 0.3:
            out.append((s, rnd.choice(["BEGIN", "BEGIN ISOLATION LEVEL REPEATABLE READ"])))
            in_block[s], ddl[s], dropped[s] = True, False, False
            continue
        r = rnd.random()
        if r < 0.07:
            if dropped[s]:
                continue
            out.append((s, "DROP TABLE " + u))
            ddl[s], dropped[s] = in_block[s], in_block[s]
        elif r < 0.13:  # also after its DROP in the same block
            out.append((s, "CREATE TABLE %s (id bigint PRIMARY KEY, v int, tag varchar(8))" % u))
            ddl[s], dropped[s] = ddl[s] or in_block[s], False
        elif r < 0.23:
            out.append((s, rnd.choice(["ALTER TABLE %s ALTER COLUMN v SET DEFAULT %d" % (u, k),
                                       "ALTER TABLE %s ALTER COLUMN v DROP DEFAULT" % u])))
            ddl[s] = ddl[s] or in_block[s]
        elif r < 0.29:
            out.append((s, rnd.choice(["CREATE INDEX %s_tag ON %s (tag)" % (u, u),
                                       "CREATE INDEX %s_v ON %s (v)" % (u, u)])))
            ddl[s] = ddl[s] or in_block[s]
        elif r < 0.35:
            out.append((s, rnd.choice(["DROP INDEX %s_tag" % u, "DROP INDEX %s_v" % u,
                                       "DROP INDEX IF EXISTS %s_tag" % u])))
            ddl[s] = ddl[s] or in_block[s]
        elif r < 0.41:  # columns: each name with one type, added again after a rollback
            n = rnd.randrange(3)
            lit = "'%d'" % k if n == 1 else str(k)
            out.append((s, rnd.choice(["ALTER TABLE %s ADD COLUMN c%d %s" % (u, n, COL_TYPES[n]),
                                       "ALTER TABLE %s ADD COLUMN IF NOT EXISTS c%d %s"
                                       % (u, n, COL_TYPES[n]),
                                       "ALTER TABLE %s ADD COLUMN c%d %s DEFAULT %s"
                                       % (u, n, COL_TYPES[n], lit),
                                       "ALTER TABLE %s ADD COLUMN c%d %s NOT NULL%s"
                                       % (u, n, COL_TYPES[n], rnd.choice(["", " DEFAULT " + lit])),
                                       "CREATE INDEX %s_c%d ON %s (c%d)" % (u, n, u, n)])))
            ddl[s] = ddl[s] or in_block[s]
        elif r < 0.47:
            n = rnd.randrange(3)
            out.append((s, rnd.choice([
                "UPDATE %s SET c%d = %s WHERE id = %d" % (u, n, "'%d'" % k if n == 1 else k, k),
                "SELECT id, c%d FROM %s ORDER BY id" % (n, u),
                "SELECT count(c%d) FROM %s" % (n, u)])))
        elif r < 0.53:
            out.append((s, "INSERT INTO %s (id, tag) VALUES (%d, 'x') ON CONFLICT (id) DO NOTHING"
                        % (u, k)))
        elif r < 0.56:
            out.append((s, "INSERT INTO t VALUES (%d, %d) ON CONFLICT (id) DO UPDATE SET v = excluded.v"
                        % (k, rnd.randrange(100))))
        elif r < 0.70:
            out.append((s, rnd.choice([
                "SELECT id, v, tag FROM %s ORDER BY id" % u, COLUMNS % u,
                "SELECT relname FROM pg_class WHERE relname LIKE '%s%%' ORDER BY 1" % u])))
        elif r < 0.76:
            if rnd.random() < 0.5 and not in_block[s]:  # read without waiting in PostgreSQL too
                # (not in a block: a REPEATABLE READ one reads PostgreSQL's catalog in its snapshot)
                out.append((s, rnd.choice(["SELECT relname FROM pg_class WHERE relname LIKE "
                                           "'u%d%%' ORDER BY 1" % o, COLUMNS % ("u%d" % o)])))
                continue
            if in_block[s] or in_block[o] and ddl[o]:
                continue
            out.append((s, "SELECT id, v, tag FROM u%d ORDER BY id" % o))
        elif not in_block[s]:
            continue
        elif r < 0.84:
            out.append((s, "SAVEPOINT a"))
        elif r < 0.90:
            out.append((s, "ROLLBACK TO SAVEPOINT a"))
        else:
            out.append((s, rnd.choice(["COMMIT", "COMMIT", "ROLLBACK"])))
            in_block[s] = False
    for s in range(2):
        out.append((s, "COMMIT"))
    for u in ("u0", "u1"):
        out.append((0, "SELECT id, v, tag FROM %s ORDER BY id" % u))
        out.append((0, "SELECT relname FROM pg_class WHERE relname LIKE '%s%%' ORDER BY 1" % u))
        out.append((0, COLUMNS % u))
    return out


def run_on(dsns, seed, setup, make=script):
    conns = [connect(d) for d in dsns]
    try:
        for sql in setup:
            step(conns[0], sql)
        return [(s, sql, step(conns[s], sql)) for s, sql in make(seed)]
    finally:
        for c in conns:
            c.close()


def main():
    if psycopg2 is None:
        skip("psycopg2 is not installed")
    if not os.path.exists(PG_BIN + "/initdb"):
        skip("PostgreSQL 15 is not installed")
    with DataDir() as d, tempfile.TemporaryDirectory(prefix="txn-") as work:
        srv = PgServe(os.path.join(d.path, "data"), work)
        pg = None
        try:
            check(srv.pg_port is not None, "quarry serve with a PG port started")
            pg = Postgres(work)
            for kind, make in (("", script), ("DDL ", ddl_script)):
                for seed in SEEDS:
                    db = "t%d%s" % (seed, "d" if kind else "")
                    pg.psql("CREATE DATABASE " + db)
                    setup = ["DROP TABLE IF EXISTS t, t2, u0, u1, w0, w1",
                             "CREATE TABLE t (id bigint PRIMARY KEY, v bigint)",
                             "INSERT INTO t VALUES (1, 1), (3, 3), (11, 11), (14, 14)",
                             "CREATE TABLE t2 (id bigint PRIMARY KEY, v bigint)",
                             "INSERT INTO t2 VALUES (2, 2), (13, 13)"]
                    for u in ("u0", "u1"):
                        setup += ["CREATE TABLE %s (id bigint PRIMARY KEY, v int, tag varchar(8))" % u,
                                  "CREATE INDEX %s_tag ON %s (tag)" % (u, u)]
                    q = run_on(["host=127.0.0.1 port=%d user=tester dbname=quarry" % srv.pg_port] * 2,
                               seed, setup, make)
                    p = run_on(["host=127.0.0.1 port=%d user=postgres dbname=%s" % (pg.port, db)] * 2,
                               seed, setup, make)
                    diff = [(i, a, b[2]) for i, (a, b) in enumerate(zip(q, p)) if a[2] != b[2]]
                    check(not diff, "%sseed %d: %d steps as PostgreSQL 15%s" % (
                        kind, seed, len(q), "" if not diff else
                        "; first difference at step %d: %r vs %r" % diff[0]))
        finally:
            srv.stop()
            if pg is not None:
                pg.stop()
    finish()


if __name__ == "__main__":
    main()
