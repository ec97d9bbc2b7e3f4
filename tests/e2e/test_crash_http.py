"""Crash safety over HTTP and the PostgreSQL port: clients ingest (bulk JSONL
posts, single-document PUTs and DELETEs over HTTP; multi-row INSERT ... ON
CONFLICT and DELETE transactions over the PG port with psycopg2) into
`quarry serve` while the harness sends `kill -9` at a random moment (seeded;
20 cycles).  After each restart every acknowledged
write is there exactly once with its exact content (a 2xx answer is the
acknowledgement), every acknowledged delete stays deleted, and the exact
search count, the table's document count and the stored documents agree."""
import json
import os
import random
import signal
import threading
import time
import urllib.parse

from qserve import Server
from qtest import DataDir, check, finish, run, wait_until

try:
    import psycopg2
except ImportError:  # python3-psycopg2 is in make deps; without it only HTTP is tested
    psycopg2 = None

SEED = int(os.environ.get("QUARRY_CRASH_SEED", "11"))
CYCLES = int(os.environ.get("QUARRY_CRASH_CYCLES", "20"))
rng = random.Random(SEED)

SCHEMA = {"primary_key": "id", "fields": [
    {"name": "body", "type": "text", "language": "none"},
    {"name": "tag", "type": "keyword"},
    {"name": "n", "type": "int"}]}


class Truth:
    """What the server acknowledged: id -> exact JSON text, or None (deleted).
    An unacknowledged write may or may not have landed; those ids are
    'uncertain' until a later acknowledged write settles them."""

    def __init__(self):
        self.lock = threading.Lock()
        self.docs = {}
        self.uncertain = set()

    def begin(self, ids):
        with self.lock:
            self.uncertain.update(ids)

    def ack(self, pairs):
        with self.lock:
            for i, t in pairs:
                self.docs[i] = t
                self.uncertain.discard(i)


WRITERS = 4  # writer 3 speaks the PostgreSQL protocol


def pg_acked(truth):
    """Whether a document the PG writer wrote (tag "q...") is acknowledged."""
    with truth.lock:
        return any(t and '"tag": "q' in t for t in truth.docs.values())


def writer(srv, truth, cycle, wid, stop):
    """Writer wid owns the ids congruent to wid modulo WRITERS, so each id's
    writes are sequential and the order of acknowledgements is the order the
    server applied them."""
    r = random.Random(SEED * 1000 + cycle * 10 + wid)

    def some_id():
        return r.randint(0, 1000) * WRITERS + wid

    if wid == WRITERS - 1:
        return pg_writer(srv, truth, cycle, r, some_id, stop)

    seq = 0
    while not stop.is_set():
        seq += 1
        kind = r.random()
        try:
            if kind < 0.6:  # bulk post of a small batch
                batch = []
                for _ in range(r.randint(1, 40)):
                    i = some_id()
                    d = {"id": i, "body": "c%d w%d s%d %s" % (cycle, wid, seq, " ".join(
                        "t%d" % r.randint(0, 50) for _ in range(r.randint(1, 12)))),
                        "tag": "g%d" % (i % 7), "n": seq}
                    batch.append((i, json.dumps(d)))
                # later lines win for duplicate ids inside a batch
                last = {}
                for i, t in batch:
                    last[i] = t
                truth.begin(last.keys())
                st, body = srv.call("POST", "/tables/t/documents",
                                    "".join(t + "\n" for _, t in batch),
                                    {"Content-Type": "application/x-ndjson"})
                if st == 200 and isinstance(body, dict) and not body.get("rejected"):
                    truth.ack(last.items())
            elif kind < 0.85:
                i = some_id()
                d = {"id": i, "body": "c%d put%d" % (cycle, seq), "tag": "p", "n": -seq}
                t = json.dumps(d)
                truth.begin([i])
                st, _ = srv.call("PUT", "/tables/t/documents/%d" % i, t)
                if st in (200, 201):
                    truth.ack([(i, t)])
            else:
                i = some_id()
                truth.begin([i])
                st, _ = srv.call("DELETE", "/tables/t/documents/%d" % i)
                if st in (200, 404):
                    truth.ack([(i, None)])
        except (OSError, ConnectionError, ValueError):
            return  # the server died under us


def pg_writer(srv, truth, cycle, r, some_id, stop):
    if psycopg2 is None or not srv.pg_port:
        return
    try:
        conn = psycopg2.connect(host="127.0.0.1", port=srv.pg_port, dbname="quarry",
                                user="crash", connect_timeout=10)
    except psycopg2.Error:
        return
    seq = 0
    try:
        while not stop.is_set():
            seq += 1
            cur = conn.cursor()
            if r.random() < 0.8:
                rows = {}
                for _ in range(r.randint(1, 20)):
                    i = some_id()
                    rows[i] = {"id": i, "body": "c%d pg%d %s" % (cycle, seq, " ".join(
                        "t%d" % r.randint(0, 50) for _ in range(r.randint(1, 8)))),
                        "tag": "q%d" % (i % 5), "n": seq}
                truth.begin(rows.keys())
                for d in rows.values():
                    cur.execute("INSERT INTO t (id, body, tag, n) VALUES (%s, %s, %s, %s) "
                                "ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, "
                                "tag = EXCLUDED.tag, n = EXCLUDED.n",
                                (d["id"], d["body"], d["tag"], d["n"]))
                conn.commit()  # the acknowledgement: the whole transaction or nothing
                truth.ack((i, json.dumps(d)) for i, d in rows.items())
            else:
                i = some_id()
                truth.begin([i])
                cur.execute("DELETE FROM t WHERE id = %s", (i,))
                conn.commit()
                truth.ack([(i, None)])
    except psycopg2.Error:
        return  # the server died under us
    finally:
        try:
            conn.close()
        except psycopg2.Error:
            pass


def verify(srv, truth, cycle, last):
    ok = True
    sure = {i: t for i, t in truth.docs.items() if i not in truth.uncertain}
    # acknowledged documents: exact content; acknowledged deletes: gone (a
    # sample per cycle, everything after the last one; search checks all ids)
    keys = sorted(sure)
    if not last:
        keys = rng.sample(keys, min(150, len(keys)))
    for i, t in ((k, sure[k]) for k in keys):
        st, body = srv.call("GET", "/tables/t/documents/%d" % i)
        if t is None:
            ok &= check(st == 404, "cycle %d: deleted doc %d stays deleted (got %d)" % (cycle, i, st))
        else:
            got = json.dumps(body) if isinstance(body, dict) else body
            ok &= check(st == 200 and json.loads(got) == json.loads(t),
                        "cycle %d: acknowledged doc %d intact (status %d)" % (cycle, i, st))
        if not ok:
            break
    # counts: search total (exact) == table docs == ids found
    st, body = srv.call("POST", "/tables/t/search",
                        {"q": " OR ".join("c%d" % c for c in range(cycle + 1)), "limit": 5000})
    st2, desc = srv.call("GET", "/tables/t")
    if check(st == 200 and st2 == 200, "cycle %d: search and describe answer" % cycle):
        ids = [h["id"] for h in body["hits"]]
        check(len(ids) == len(set(ids)), "cycle %d: no document twice" % cycle)
        check(body["total"] == len(ids), "cycle %d: total %d == hits %d" % (
            cycle, body["total"], len(ids)))
        ndocs = desc.get("stats", {}).get("docs")
        check(ndocs == len(ids), "cycle %d: table docs %s == matching docs %d" % (
            cycle, ndocs, len(ids)))
        present = {i for i, t in sure.items() if t is not None}
        check(present <= set(ids), "cycle %d: %d acknowledged docs not found by search" % (
            cycle, len(present - set(ids))))
        absent = {i for i, t in sure.items() if t is None}
        check(not (absent & set(ids)), "cycle %d: deleted docs found by search" % cycle)
    return ok


def main():
    with DataDir() as dd:
        data = os.path.join(dd.path, "data")
        truth = Truth()
        srv = Server(data, dd.path, pg=True)
        if not check(srv.port, "server starts: " + srv.text()[-400:]):
            finish()
        st, _ = srv.call("POST", "/tables", {"name": "t", "schema": SCHEMA})
        check(st in (200, 201), "create table (status %d)" % st)
        for c in range(CYCLES):
            stop = threading.Event()
            ws = [threading.Thread(target=writer, args=(srv, truth, c, w, stop)) for w in range(WRITERS)]
            for w in ws:
                w.start()
            if c == 0 and psycopg2 is not None:
                # the PG writer's first commit comes before the first kill,
                # however slow the machine (checked below, at the end)
                wait_until(lambda: pg_acked(truth), 120)
            time.sleep(rng.uniform(0.2, 1.5))
            srv.p.send_signal(signal.SIGKILL)
            srv.p.wait()
            stop.set()
            for w in ws:
                w.join()
            srv.log.close()
            srv = Server(data, dd.path, pg=True)
            if not check(srv.port, "cycle %d: restart after kill -9: %s" % (c, srv.text()[-600:])):
                break
            if not verify(srv, truth, c, c == CYCLES - 1):
                break
        check(psycopg2 is None or pg_acked(truth), "the PG writer's transactions were acknowledged")
        rc = srv.stop()
        check(rc == 0, "clean stop (rc %d)" % rc)
        rc, out, err = run(["check"], data)
        check(rc == 0, "checksums verify after %d kills: %s" % (CYCLES, (out + err)[-400:]))
    finish()


main()
