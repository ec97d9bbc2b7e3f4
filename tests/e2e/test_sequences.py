"""Sequences survive kill -9 and backups: rows with SERIAL keys and a table without a
key (hidden row id) are written through the PG port, the server is killed with SIGKILL
at a random moment while clients insert, and after a restart every new key is above every
key acknowledged before, none repeats; an online backup of the data directory restores
to a server whose sequences also go on above every key in the copied tables."""
import os
import random
import signal
import subprocess
import threading

from qtest import BIN, DataDir, check, finish, wait_until
from pg_server import PgServe

rng = random.Random(int(os.environ.get("QUARRY_SEQ_SEED", "11")))


def psql(srv, sql):
    return srv.psql("-Atq", "-v", "ON_ERROR_STOP=1", "-c", sql)


def keys(srv, table, col):
    rc, out, err = psql(srv, "SELECT %s FROM %s" % (col, table))
    check(rc == 0, "read %s: %s" % (table, err))
    return [int(x) for x in out.split()]


def main():
    with DataDir() as d:
        data = os.path.join(d.path, "data")
        srv = PgServe(data, d.path)
        if not check(srv.pg_port is not None, "server started"):
            finish()
        rc, out, err = psql(srv, "CREATE TABLE s_items (id serial PRIMARY KEY, w int); "
                                 "CREATE TABLE s_log (w int)")
        check(rc == 0, "tables made: %s" % err)
        acked = []
        stop = threading.Event()

        def writer(w):
            i = 0
            while not stop.is_set() and i < 400:
                rc, out, err = psql(srv, "INSERT INTO s_items (w) VALUES (%d) RETURNING id" % w)
                if rc != 0:
                    return
                acked.append(int(out.split()[0]))
                i += 1

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(2)]
        for t in threads:
            t.start()
        wait_until(lambda: len(acked) >= 20 + rng.randint(0, 40), secs=120)
        srv.stop(sig=signal.SIGKILL)
        stop.set()
        for t in threads:
            t.join()
        top = max(acked)
        srv = PgServe(data, d.path)
        check(srv.pg_port is not None, "server restarted after kill -9")
        ids = keys(srv, "s_items", "id")
        check(set(acked) <= set(ids), "every acknowledged row is there (%d acked)" % len(acked))
        rc, out, err = psql(srv, "INSERT INTO s_items (w) VALUES (9), (9) RETURNING id")
        new = [int(x) for x in out.split()]
        check(rc == 0 and all(k > top for k in new) and not set(new) & set(ids),
              "keys after the crash are above every acknowledged one (%d): %r" % (top, new))
        rc, out, err = psql(srv, "INSERT INTO s_log SELECT w FROM s_items")
        n_log = len(ids) + 2
        rc, out, err = psql(srv, "SELECT count(*), count(DISTINCT _rowid), max(_rowid) FROM s_log")
        check(rc == 0 and out.strip().split("|")[:2] == [str(n_log), str(n_log)],
              "row ids of a table without a key are distinct: %r %r" % (out, err))
        # an online backup, then a server on the copy
        dest = os.path.join(d.path, "copy")
        p = subprocess.run([BIN, "backup", "--data", data, "--to", dest], capture_output=True,
                           text=True, timeout=300)
        check(p.returncode == 0, "backup: %s" % p.stderr[-500:])
        max_item = max(keys(srv, "s_items", "id"))
        srv.stop()
        copy = PgServe(dest, d.path)
        if check(copy.pg_port is not None, "server on the backup started"):
            rc, out, err = psql(copy, "INSERT INTO s_items (w) VALUES (1) RETURNING id")
            check(rc == 0 and int(out.split()[0]) > max_item,
                  "the restored sequence goes on above the copied keys: %r %r (max %d)" %
                  (out, err, max_item))
            rc, out, err = psql(copy, "SELECT nextval('s_items_id_seq') > %d" % max_item)
            check(out.strip() == "t", "nextval on the copy: %r %r" % (out, err))
            copy.stop()
    finish()


if __name__ == "__main__":
    main()
