"""Atomic commit across tables under kill -9 (issue 17): clients loop
`BEGIN; INSERT INTO a ...; INSERT INTO b ...; COMMIT` (one fresh key per
transaction, both tables) over the PG port while the server is killed with
SIGKILL at a seeded random moment, cycle after cycle.  After every restart
each key is in both tables or in neither (no partial transaction), every
acknowledged COMMIT is there in full, and at the end `quarry check` is
clean.  One more client drops a table in its blocks (`CREATE TABLE d_k`, then
`BEGIN; INSERT INTO a; INSERT INTO b; DROP TABLE d_k; COMMIT`): after every
restart d_k is gone exactly when key k is in a and b.  Another rekeys a table
older than its blocks (`CREATE TABLE r_k` without a key, two rows, then `BEGIN;
INSERT INTO a; INSERT INTO b; ALTER TABLE r_k ADD PRIMARY KEY; INSERT INTO r_k;
COMMIT`): after every restart r_k has its key and three rows exactly when key k
is in a and b, else no key and its two rows, and no copy is left in spares/."""
import os
import random
import signal
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from qtest import DataDir, check, finish, run, skip  # noqa: E402
from pg_server import PgServe  # noqa: E402

try:
    import psycopg2
except ImportError:
    psycopg2 = None

CYCLES = 10
CLIENTS = 3


def cursor(port, autocommit=True):
    """A cursor on the server's PG port as the test's role."""
    c = psycopg2.connect("host=127.0.0.1 port=%d user=tester dbname=quarry" % port)
    c.autocommit = autocommit
    return c.cursor()


def client(port, base, what, before, extra, created, acked, stop):
    """Until stop: the statements `before` outside a block (k then in created),
    then BEGIN, the pair rows of key k in a and b, the statements `extra`,
    COMMIT (k then in acked); k counts up from base.  Statements are
    templates over k."""
    try:
        cur = cursor(port)
        k = base
        while not stop.is_set():
            for sql in before:
                cur.execute(sql % {"k": k})
            if before:
                created.add(k)
            cur.execute("BEGIN")
            cur.execute("INSERT INTO a VALUES (%d, '%s %d')" % (k, what, k))
            cur.execute("INSERT INTO b VALUES (%d, %d)" % (k, k))
            for sql in extra:
                cur.execute(sql % {"k": k})
            cur.execute("COMMIT")
            acked.add(k)
            k += 1
    except Exception:
        pass  # the server was killed under us


def writer(port, base, acked, stop):
    client(port, base, "pair", [], [], None, acked, stop)


def dropper(port, base, created, acked, stop):
    client(port, base, "drop",
           ["CREATE TABLE d_%(k)d (id bigint PRIMARY KEY, n bigint)", "INSERT INTO d_%(k)d VALUES (1, 1)"],
           ["DROP TABLE d_%(k)d"], created, acked, stop)


def rekeyer(port, base, created, acked, stop):
    client(port, base, "rekey",
           ["CREATE TABLE r_%(k)d (a int, b text)", "INSERT INTO r_%(k)d VALUES (1, 'x'), (2, 'y')"],
           ["ALTER TABLE r_%(k)d ADD PRIMARY KEY (a)", "INSERT INTO r_%(k)d VALUES (3, 'z')"],
           created, acked, stop)


def rekeyed_state(port, k):
    """(has a primary key, rows) of r_k."""
    cur = cursor(port, autocommit=False)
    cur.execute("SELECT count(*) FROM pg_constraint WHERE conrelid = 'r_%d'::regclass "
                "AND contype = 'p'" % k)
    pk = cur.fetchone()[0]
    cur.execute("SELECT count(*) FROM r_%d" % k)
    n = cur.fetchone()[0]
    cur.connection.close()
    return pk, n


def first_column(port, sql):
    """The set of the first column's values of sql."""
    cur = cursor(port, autocommit=False)
    cur.execute(sql)
    got = {r[0] for r in cur.fetchall()}
    cur.connection.close()
    return got


def tables(port):
    return first_column(port, "SELECT relname FROM pg_class WHERE relkind = 'r' AND relname LIKE 'd%'")


def keys(port, table):
    return first_column(port, "SELECT id FROM %s" % table)


def main():
    if psycopg2 is None:
        skip("psycopg2 is not installed")
    with DataDir() as d, tempfile.TemporaryDirectory(prefix="txncrash-") as work:
        data = os.path.join(d.path, "data")
        srv = PgServe(data, work)
        cur = cursor(srv.pg_port)
        cur.execute("CREATE TABLE a (id bigint PRIMARY KEY, body text)")
        cur.execute("CREATE TABLE b (id bigint PRIMARY KEY, n bigint)")
        cur.connection.close()
        acked = set()
        created = set()  # d_k made (and filled) before its block
        rekeyed = set()  # r_k made (and filled) before its block
        for cycle in range(CYCLES):
            rnd = random.Random(cycle)
            stop = threading.Event()
            ts = [threading.Thread(target=writer, args=(srv.pg_port, (cycle * CLIENTS + i) * 1000000,
                                                        acked, stop)) for i in range(CLIENTS)]
            ts.append(threading.Thread(target=dropper, args=(srv.pg_port, 900000000 + cycle * 1000000,
                                                             created, acked, stop)))
            fresh = set()  # r_k of this cycle
            ts.append(threading.Thread(target=rekeyer, args=(srv.pg_port, 800000000 + cycle * 1000000,
                                                             fresh, acked, stop)))
            for t in ts:
                t.start()
            time.sleep(0.3 + rnd.random() * 0.7)
            srv.stop(signal.SIGKILL)
            stop.set()
            for t in ts:
                t.join(30)
            srv = PgServe(data, work)
            if not check(srv.pg_port is not None, "cycle %d: restarted after kill -9" % cycle):
                print(srv.text()[-2000:])
                break
            ka, kb = keys(srv.pg_port, "a"), keys(srv.pg_port, "b")
            check(ka == kb, "cycle %d: no partial transaction (%d keys in a only, %d in b only)"
                  % (cycle, len(ka - kb), len(kb - ka)))
            check(acked <= ka, "cycle %d: %d acknowledged commits missing of %d"
                  % (cycle, len(acked - ka), len(acked)))
            left = tables(srv.pg_port)
            odd = [k for k in created if (k in ka) == ("d_%d" % k in left)]
            check(not odd, "cycle %d: each block's DROP TABLE went with its rows (%d of %d "
                  "not: %r)" % (cycle, len(odd), len(created), odd[:3]))
            rekeyed |= fresh
            bad = [(k, st) for k in sorted(fresh)
                   for st in [rekeyed_state(srv.pg_port, k)]
                   if st != ((1, 3) if k in ka else (0, 2))]
            check(not bad, "cycle %d: each block's ADD PRIMARY KEY went with its rows (%d of %d "
                  "not: %r)" % (cycle, len(bad), len(fresh), bad[:3]))
            spares = os.path.join(data, "spares")
            left_spares = os.listdir(spares) if os.path.isdir(spares) else []
            check(not left_spares, "cycle %d: no rebuilt copy left: %r" % (cycle, left_spares))
        srv.stop()
        check(len(acked) > CYCLES, "transactions were committed: %d" % len(acked))
        check(any(k >= 900000000 for k in acked), "blocks with a DROP TABLE were committed")
        n_rekeyed = len([k for k in acked if 800000000 <= k < 900000000])
        print("blocks with an ADD PRIMARY KEY: %d committed of %d begun over %d kills"
              % (n_rekeyed, len(rekeyed), CYCLES))
        check(any(800000000 <= k < 900000000 for k in acked),
              "blocks with an ADD PRIMARY KEY were committed: %d of %d"
              % (len([k for k in acked if 800000000 <= k < 900000000]), len(rekeyed)))
        rc, out, err = run(["check"], data)
        check(rc == 0, "quarry check is clean after %d kills: %s" % (CYCLES, (out + err)[-1500:]))
    finish()


if __name__ == "__main__":
    main()
