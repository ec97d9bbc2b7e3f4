"""Write isolation between writers (issue 13, item 5): a writer's commit
publishes, and makes durable, its own batch only.

While other writers hold unfinished work -- an HTTP upload whose body is only
half sent, an open SQL transaction over the PG port, a COPY being applied --
single-document PUTs commit again and again.  After every PUT a reader must
see none of the unfinished work (and a COPY all or nothing), and after
`kill -9` no row of a batch that was never acknowledged may be durable, while
every acknowledged PUT and COPY is there."""
import json
import os
import signal
import socket
import threading
import time

from qserve import Server
from qtest import DataDir, check, finish, skip

try:
    import psycopg2
except ImportError:
    psycopg2 = None

SCHEMA = {"primary_key": "id", "fields": [
    {"name": "src", "type": "keyword"},
    {"name": "body", "type": "text", "language": "none"},
    {"name": "n", "type": "int"}]}

COPY_ROWS = 30000


def count(srv, src):
    st, body = srv.call("POST", "/tables/t/search",
                        {"q": "*", "filter": "src = '%s'" % src, "count_only": True})
    if st != 200:
        return "status %d: %s" % (st, body)
    return body["total"]


class Upload:
    """POST /tables/t/documents with a chunked body sent piece by piece."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.s.sendall(b"POST /tables/t/documents?batch=1000000 HTTP/1.1\r\n"
                       b"Host: 127.0.0.1\r\nContent-Type: application/x-ndjson\r\n"
                       b"Transfer-Encoding: chunked\r\n\r\n")

    def send(self, docs):
        data = "".join(json.dumps(d) + "\n" for d in docs).encode()
        self.s.sendall(b"%x\r\n" % len(data) + data + b"\r\n")

    def finish(self):
        self.s.sendall(b"0\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got or not got.rstrip().endswith(b"}"):
            part = self.s.recv(65536)
            if not part:
                break
            got += part
        self.s.close()
        head, _, body = got.partition(b"\r\n\r\n")
        return int(head.split()[1]), body


def put(srv, i, acked):
    d = {"id": i, "src": "put", "body": "single %d" % i, "n": i}
    st, _ = srv.call("PUT", "/tables/t/documents/%d" % i, d)
    if st in (200, 201):
        acked.add(i)
    return st


def copy_rows(port, first, n, src, result):
    """COPY n rows over the PG port; result["acked"] once COPY returned."""
    try:
        conn = psycopg2.connect(host="127.0.0.1", port=port, dbname="quarry", user="iso",
                                connect_timeout=10)
        conn.autocommit = True
        import io
        buf = io.StringIO("".join("%d\t%s\tcopied row %d\t%d\n" % (first + k, src, k, k)
                                  for k in range(n)))
        conn.cursor().copy_expert("COPY t (id, src, body, n) FROM STDIN", buf)
        result["acked"] = True
        conn.close()
    except psycopg2.Error as e:
        result["error"] = str(e)


def main():
    if psycopg2 is None:
        skip("python3-psycopg2 is not installed")
    with DataDir() as dd:
        data = os.path.join(dd.path, "data")
        srv = Server(data, dd.path, pg=True)
        if not check(srv.port and srv.pg_port, "server starts: " + srv.text()[-400:]):
            finish()
        st, _ = srv.call("POST", "/tables", {"name": "t", "schema": SCHEMA})
        check(st in (200, 201), "create table (status %d)" % st)
        acked = set()
        next_put = 1

        # 1. an upload half sent and an open transaction; PUTs commit beside them
        up = Upload(srv.port)
        up.send([{"id": 100000 + k, "src": "up", "body": "uploaded %d" % k, "n": k}
                 for k in range(400)])
        txn = psycopg2.connect(host="127.0.0.1", port=srv.pg_port, dbname="quarry", user="iso",
                               connect_timeout=10)
        cur = txn.cursor()
        for k in range(300):
            cur.execute("INSERT INTO t (id, src, body, n) VALUES (%s, 'txn', %s, %s)",
                        (200000 + k, "in a transaction %d" % k, k))
        seen = []
        for _ in range(25):
            put(srv, next_put, acked)
            next_put += 1
            seen.append((count(srv, "up"), count(srv, "txn"), count(srv, "put")))
            time.sleep(0.02)  # lets the server take in the upload's chunk meanwhile
        check(all(s[0] == 0 for s in seen),
              "the unfinished upload's documents stay invisible: %s" % [s[0] for s in seen])
        check(all(s[1] == 0 for s in seen),
              "the open transaction's rows stay invisible: %s" % [s[1] for s in seen])
        check(seen[-1][2] == len(acked) == 25,
              "every acknowledged PUT is visible (%s of %d)" % (seen[-1][2], len(acked)))

        # 2. a COPY being applied: readers see all of it or none of it
        res = {}
        th = threading.Thread(target=copy_rows,
                              args=(srv.pg_port, 300000, COPY_ROWS, "copy", res))
        th.start()
        partial = []
        rounds = 0
        while th.is_alive() or rounds < 3:
            put(srv, next_put, acked)
            next_put += 1
            c = count(srv, "copy")
            rounds += 1
            if c not in (0, COPY_ROWS):
                partial.append(c)
        th.join()
        print("COPY: %d reader rounds while it ran" % rounds)
        check(res.get("acked"), "the COPY is acknowledged: %s" % res.get("error"))
        check(not partial, "no reader saw part of the COPY (saw %s in %d rounds)" % (
            partial[:10], rounds))
        check(count(srv, "copy") == COPY_ROWS, "the acknowledged COPY is visible")
        check(count(srv, "up") == 0 and count(srv, "txn") == 0,
              "still nothing of the upload and the transaction")

        # 3. kill -9 with the upload, the transaction and another COPY unfinished
        up.send([{"id": 110000 + k, "src": "up", "body": "more %d" % k, "n": k}
                 for k in range(200)])
        cur.execute("INSERT INTO t (id, src, body, n) VALUES (299999, 'txn', 'last', 0)")
        res2 = {}
        th2 = threading.Thread(target=copy_rows,
                               args=(srv.pg_port, 400000, COPY_ROWS, "copy2", res2))
        th2.start()
        for _ in range(5):
            put(srv, next_put, acked)
            next_put += 1
        srv.p.send_signal(signal.SIGKILL)
        srv.p.wait()
        srv.log.close()
        th2.join()
        for c in (txn, up.s):
            try:
                c.close()
            except (OSError, psycopg2.Error):
                pass
        srv = Server(data, dd.path, pg=True)
        if not check(srv.port, "restart after kill -9: " + srv.text()[-600:]):
            finish()
        check(count(srv, "up") == 0, "no document of the unacknowledged upload is durable "
              "(found %s)" % count(srv, "up"))
        check(count(srv, "txn") == 0, "no row of the uncommitted transaction is durable "
              "(found %s)" % count(srv, "txn"))
        got = count(srv, "put")
        check(got == len(acked), "every acknowledged PUT survived (%s of %d)" % (got, len(acked)))
        check(count(srv, "copy") == COPY_ROWS, "the acknowledged COPY survived")
        c2 = count(srv, "copy2")
        print("COPY in flight at the kill: acknowledged=%s, %s rows after restart" % (
            bool(res2.get("acked")), c2))
        check(c2 in (0, COPY_ROWS), "the COPY in flight at the kill is all or nothing (%s)" % c2)
        if res2.get("acked"):
            check(c2 == COPY_ROWS, "the second COPY was acknowledged, so it is all there")
        st, desc = srv.call("GET", "/tables/t")
        total = len(acked) + COPY_ROWS + (c2 if isinstance(c2, int) else 0)
        check(st == 200 and desc.get("stats", {}).get("docs") == total,
              "the table holds exactly the acknowledged rows (%s, want %d)" % (
                  desc.get("stats", {}).get("docs"), total))
        rc = srv.stop()
        check(rc == 0, "clean stop (rc %d)" % rc)
    finish()


main()
