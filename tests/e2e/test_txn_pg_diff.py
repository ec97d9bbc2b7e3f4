"""Transactions against PostgreSQL 15 (issue 17): seeded scripts of two
sessions interleaving BEGIN (READ COMMITTED or REPEATABLE READ), writes,
SAVEPOINT / ROLLBACK TO / RELEASE, COMMIT / ROLLBACK and reads run step by
step against Quarry's PG port and a throwaway PostgreSQL 15; every step must
give the same outcome (its rows, or its error's SQLSTATE) on both.

Each session writes its own keys (PostgreSQL would make a second writer of a
row wait for the first, which a step-by-step script cannot do), while both
read every row, so what each sees of the other's committed, uncommitted and
rolled-back work is compared.  A block's first statement is a read: Quarry
pins a REPEATABLE READ snapshot per table at its first read, PostgreSQL at
the block's first statement (docs/sql-writes.md)."""
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


def run_on(dsns, seed, setup):
    conns = [connect(d) for d in dsns]
    try:
        for sql in setup:
            step(conns[0], sql)
        return [(s, sql, step(conns[s], sql)) for s, sql in script(seed)]
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
            for seed in SEEDS:
                db = "t%d" % seed
                pg.psql("CREATE DATABASE " + db)
                setup = ["DROP TABLE IF EXISTS t",
                         "CREATE TABLE t (id bigint PRIMARY KEY, v bigint)",
                         "INSERT INTO t VALUES (1, 1), (3, 3), (11, 11), (14, 14)"]
                q = run_on(["host=127.0.0.1 port=%d user=tester dbname=quarry" % srv.pg_port] * 2,
                           seed, setup)
                p = run_on(["host=127.0.0.1 port=%d user=postgres dbname=%s" % (pg.port, db)] * 2,
                           seed, setup)
                diff = [(i, a, b[2]) for i, (a, b) in enumerate(zip(q, p)) if a[2] != b[2]]
                check(not diff, "seed %d: %d steps as PostgreSQL 15%s" % (
                    seed, len(q), "" if not diff else "; first difference at step %d: %r vs %r"
                    % diff[0]))
        finally:
            srv.stop()
            if pg is not None:
                pg.stop()
    finish()


if __name__ == "__main__":
    main()
