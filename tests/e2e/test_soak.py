"""Soak: 8 clients searching (HTTP ranked search, filtered search and facets;
SQL over the PostgreSQL port), 2 ingesting (JSONL over HTTP; INSERT
transactions over the PG port), 1 deleting (alternating HTTP and SQL), all at
once for SOAK_SECONDS (60 in make check; `make soak` runs 600).  Checked: no
error other than the expected ones, the server's anonymous memory stays flat
(sampled every second), and at the end every count agrees: the writers'
acknowledged inserts minus acknowledged deletes equal the ids SQL returns,
the HTTP search total and the table's document count."""
import json
import os
import random
import threading
import time

from qserve import Server
from qtest import DataDir, check, finish, skip

try:
    import psycopg2
except ImportError:
    psycopg2 = None

SECONDS = float(os.environ.get("SOAK_SECONDS", "60"))
SCHEMA = {"primary_key": "id", "fields": [
    {"name": "body", "type": "text", "language": "english"},
    {"name": "sym", "type": "keyword"},
    {"name": "views", "type": "int"}]}
WORDS = ["hydro", "power", "bank", "market", "share", "price", "river", "energy", "profit",
         "loss", "report", "annual", "quarter", "growth", "loan", "rate", "index", "fund"]


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.live = set()
        self.errors = []
        self.ops = {}

    def err(self, what):
        with self.lock:
            if len(self.errors) < 20:
                self.errors.append(what)

    def count(self, kind):
        with self.lock:
            self.ops[kind] = self.ops.get(kind, 0) + 1


def doc(i, r):
    return {"id": i, "body": " ".join(r.choice(WORDS) for _ in range(r.randint(5, 40))),
            "sym": "S%d" % r.randint(0, 30), "views": r.randint(0, 10000)}


def http_ingester(srv, st, stop):
    r = random.Random(1)
    nxt = 1000000
    while not stop.is_set():
        docs = [doc(nxt + k, r) for k in range(r.randint(10, 200))]
        nxt += len(docs)
        try:
            code, body = srv.call("POST", "/tables/t/documents",
                                  "".join(json.dumps(d) + "\n" for d in docs),
                                  {"Content-Type": "application/x-ndjson"})
        except OSError as e:
            st.err("http ingest: %s" % e)
            continue
        if code == 200 and body.get("imported") == len(docs):
            with st.lock:
                st.live.update(d["id"] for d in docs)
            st.count("http_ingest")
        elif code != 503:  # overload is an expected, clean answer
            st.err("http ingest %d %s" % (code, str(body)[:200]))


def pg_conn():
    return psycopg2.connect(host="127.0.0.1", port=SRV.pg_port, dbname="quarry", user="soak")


def pg_ingester(srv, st, stop):
    r = random.Random(2)
    nxt = 2000000
    conn = pg_conn()
    while not stop.is_set():
        docs = [doc(nxt + k, r) for k in range(r.randint(5, 50))]
        nxt += len(docs)
        try:
            cur = conn.cursor()
            cur.execute("INSERT INTO t (id, body, sym, views) VALUES " +
                        ",".join(["(%s,%s,%s,%s)"] * len(docs)),
                        [v for d in docs for v in (d["id"], d["body"], d["sym"], d["views"])])
            conn.commit()
            with st.lock:
                st.live.update(d["id"] for d in docs)
            st.count("pg_ingest")
        except psycopg2.Error as e:
            conn.rollback()
            if getattr(e, "pgcode", None) != "53300":
                st.err("pg ingest: %s %s" % (getattr(e, "pgcode", None), e))
    conn.close()


def deleter(srv, st, stop):
    r = random.Random(3)
    conn = pg_conn()
    n = 0
    while not stop.is_set():
        with st.lock:
            victims = r.sample(sorted(st.live), min(5, len(st.live))) if st.live else []
        if not victims:
            time.sleep(0.01)
            continue
        n += 1
        try:
            if n % 2:
                for i in victims:
                    code, body = srv.call("DELETE", "/tables/t/documents/%d" % i)
                    if code != 200:
                        st.err("http delete %d: %d %s" % (i, code, str(body)[:200]))
                        continue
                    with st.lock:
                        st.live.discard(i)
            else:
                cur = conn.cursor()
                cur.execute("DELETE FROM t WHERE id IN (%s)" % ",".join(["%s"] * len(victims)),
                            victims)
                conn.commit()
                if cur.rowcount != len(victims):
                    st.err("sql delete: rowcount %d != %d" % (cur.rowcount, len(victims)))
                with st.lock:
                    st.live.difference_update(victims)
            st.count("delete")
        except (OSError, psycopg2.Error) as e:
            st.err("delete: %s" % e)
            try:
                conn.rollback()
            except psycopg2.Error:
                pass
        time.sleep(0.005)
    conn.close()


def http_searcher(srv, st, stop, k):
    r = random.Random(100 + k)
    while not stop.is_set():
        w = r.sample(WORDS, 2)
        kind = r.randint(0, 2)
        if kind == 0:
            req = {"q": " ".join(w), "limit": 10}
        elif kind == 1:
            req = {"q": w[0], "filter": "views >= %d AND sym != 'S3'" % r.randint(0, 9000),
                   "sort": "views:desc", "limit": 20}
        else:
            req = {"q": w[0], "limit": 0, "facets": {"sym": {"type": "terms", "field": "sym", "size": 5}}}
        try:
            code, body = srv.call("POST", "/tables/t/search", req)
        except OSError as e:
            st.err("http search: %s" % e)
            continue
        if code == 200 and isinstance(body, dict) and "total" in body:
            st.count("http_search")
        elif code != 503:
            st.err("http search %d %s %s" % (code, req, str(body)[:200]))


def pg_searcher(srv, st, stop, k):
    r = random.Random(200 + k)
    conn = pg_conn()
    conn.autocommit = True
    qs = ["SELECT id, score() FROM t WHERE body @@ %s ORDER BY score() DESC LIMIT 10",
          "SELECT sym, count(*), avg(views) FROM t WHERE body @@ %s GROUP BY sym ORDER BY 2 DESC LIMIT 5",
          "SELECT count(*) FROM t WHERE body @@ %s AND views > 5000"]
    while not stop.is_set():
        try:
            cur = conn.cursor()
            cur.execute(r.choice(qs), (r.choice(WORDS),))
            cur.fetchall()
            st.count("pg_search")
        except psycopg2.Error as e:
            if getattr(e, "pgcode", None) != "53300":
                st.err("pg search: %s %s" % (getattr(e, "pgcode", None), e))
    conn.close()


def rss_anon_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


SRV = None


def main():
    global SRV
    if psycopg2 is None:
        skip("python3-psycopg2 is not installed (make deps installs it)")
    with DataDir() as dd:
        SRV = srv = Server(os.path.join(dd.path, "data"), dd.path, pg=True)
        if not check(srv.port and srv.pg_port, "server starts: " + srv.text()[-300:]):
            finish()
        code, _ = srv.call("POST", "/tables", {"name": "t", "schema": SCHEMA})
        check(code in (200, 201), "create table")
        st = State()
        stop = threading.Event()
        ts = [threading.Thread(target=http_ingester, args=(srv, st, stop)),
              threading.Thread(target=pg_ingester, args=(srv, st, stop)),
              threading.Thread(target=deleter, args=(srv, st, stop))]
        ts += [threading.Thread(target=http_searcher, args=(srv, st, stop, k)) for k in range(5)]
        ts += [threading.Thread(target=pg_searcher, args=(srv, st, stop, k)) for k in range(3)]
        for t in ts:
            t.start()
        samples = []
        t0 = time.time()
        while time.time() - t0 < SECONDS:
            time.sleep(1)
            samples.append(rss_anon_kb(srv.p.pid))
        stop.set()
        for t in ts:
            t.join()
        check(not st.errors, "no unexpected errors: %s" % st.errors[:5])
        check(all(st.ops.get(k, 0) > 0 for k in
                  ("http_ingest", "pg_ingest", "delete", "http_search", "pg_search")),
              "every client made progress: %s" % st.ops)
        # memory: the second half must not keep growing past the first half's peak
        half = len(samples) // 2
        first, second = max(samples[:half] or [0]), max(samples[half:] or [0])
        check(second <= first * 1.5 + 64 * 1024,
              "anonymous memory flat: first half peak %d KiB, second half peak %d KiB" % (
                  first, second))
        # consistency at the end
        conn = pg_conn()
        cur = conn.cursor()
        cur.execute("SELECT id FROM t")
        sql_ids = {row[0] for row in cur.fetchall()}
        cur.execute("SELECT count(*) FROM t")
        sql_count = cur.fetchone()[0]
        conn.close()
        code, desc = srv.call("GET", "/tables/t")
        code2, res = srv.call("POST", "/tables/t/search", {"q": " OR ".join(WORDS), "limit": 0})
        check(sql_ids == st.live, "SQL ids == acknowledged inserts - deletes (%d vs %d; %d extra, "
              "%d missing)" % (len(sql_ids), len(st.live), len(sql_ids - st.live),
                               len(st.live - sql_ids)))
        check(sql_count == len(sql_ids), "count(*) %d == ids %d" % (sql_count, len(sql_ids)))
        check(desc["stats"]["docs"] == len(st.live), "table docs %d == model %d" % (
            desc["stats"]["docs"], len(st.live)))
        check(code2 == 200 and res["total"] == len(st.live),
              "search total %s == model %d" % (res.get("total"), len(st.live)))
        check(srv.stop() == 0, "clean shutdown after the soak")
        print("soak: %.0f s, ops %s, RSS anon peak %d KiB" % (SECONDS, st.ops, max(samples)))
    finish()


main()
