"""The admin side of `quarry serve` over real HTTP: the query history
(GET /stats/queries: shapes by canonical query, filter constants and SQL
fingerprints, counts, p50/p99, rows, the plan and when it changed), column
statistics in GET /tables/{t} against brute force over the documents, and
table handles: DROP (DELETE /tables/{t}) while 8 clients search, describe
and fetch documents never crashes, answers only 200/404, and the name can be
reused at once (DROP_CYCLES times, default 6).  Run it with an ASan build of
quarry (QUARRY_BIN) to catch a handle used after its drop; the engine-level
semantics (waits, timeouts, acquire during a drop) are pinned by
tests/unit/query/test_table_ref.c."""
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from qserve import Server  # noqa: E402
from qtest import DataDir, check, finish, wait_until  # noqa: E402

WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi "
         "omicron pi rho sigma tau upsilon phi chi psi omega").split()
SECTIONS = ["libs", "net", "games", "admin", "devel"]
CYCLES = int(os.environ.get("DROP_CYCLES", "6"))
SCHEMA = {"primary_key": "id", "fields": [
    {"name": "title", "type": "text"}, {"name": "section", "type": "keyword", "index": "btree"},
    {"name": "size", "type": "int"}, {"name": "score", "type": "float"}]}


def make_docs(n, seed):
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        d = {"id": i, "title": " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 8))),
             "section": rng.choice(SECTIONS)}
        if rng.random() < 0.9:
            d["size"] = rng.randint(-500, 100000)
        if rng.random() < 0.7:
            d["score"] = round(rng.uniform(-5, 5), 3)
        docs.append(d)
    return docs


def load(srv, name, docs):
    st, _ = srv.call("POST", "/tables", {"name": name, "schema": SCHEMA})
    check(st == 201, "create %s: %s" % (name, st))
    body = "".join(json.dumps(d) + "\n" for d in docs)
    st, r = srv.call("POST", "/tables/%s/documents" % name, body,
                     {"Content-Type": "application/x-ndjson"})
    check(st == 200 and r.get("imported") == len(docs), "ingest %s: %s %s" % (name, st, r))


def shapes(srv):
    st, r = srv.call("GET", "/stats/queries")
    check(st == 200, "GET /stats/queries")
    return r


def test_history(srv, docs):
    q = lambda path: srv.call("GET", path)
    # three spellings of one query and two constants of one filter: one shape
    for text in ("alpha beta", "Alpha   beta", "(alpha beta)"):
        st, _ = q("/tables/t/search?q=%s&filter=size%%20%%3E%%2010&limit=3" % text.replace(" ", "%20"))
        check(st == 200, "search %r" % text)
    st, r = q("/tables/t/search?q=alpha%20beta&filter=size>500&limit=3")
    check(st == 200, "search with another filter constant")
    h = shapes(srv)
    mine = [s for s in h["shapes"] if s["kind"] == "search" and s["query"] == "(alpha beta)"]
    check(len(mine) == 1 and mine[0]["count"] == 4,
          "spellings and filter constants are one shape: %s" % [(s["query"], s["filter"], s["count"]) for s in mine])
    if mine:
        s = mine[0]
        check("$1" in s["filter"], "filter shown with its constant as $1: %r" % s["filter"])
        check(s["p50_ms"] <= s["p99_ms"] <= s["max_ms"] + 1e-9, "p50 <= p99 <= max")
        check(s["last_rows"] == min(3, r["total"]), "rows of the last run are the hits returned")
        check(s["plan"] != "", "the plan is recorded: %r" % s["plan"])
    rec = [e for e in h["recent"] if e["kind"] == "search"]
    check(len(rec) >= 4 and rec[0]["q"] == "alpha beta" and rec[0]["filter"] == "size>500",
          "recent runs keep the text as typed, newest first")

    # the plan changes when the filter's access path does: recorded with its time
    base = "/tables/t/search?q=gamma&filter=section%20%3D%20'net'&limit=5"
    st, _ = q(base + "&access_path=btree")
    check(st == 200, "search through the B-tree")
    before = [s for s in shapes(srv)["shapes"] if s["query"] == "gamma"]
    time.sleep(0.01)
    st, _ = q(base + "&access_path=scan")
    check(st == 200, "search through a column scan")
    after = [s for s in shapes(srv)["shapes"] if s["query"] == "gamma"]
    check(len(after) == 1 and after[0]["plan_changes"] == 1 and "btree" in after[0]["previous_plan"]
          and "scan" in after[0]["plan"] and after[0]["plan_since_ms"] >= before[0]["plan_since_ms"],
          "a plan change is recorded: %s" % after)

    # SQL statements: grouped by fingerprint, shown with constants as $n
    for sql in ("SELECT id FROM t WHERE size > 10 ORDER BY id LIMIT 4",
                "select id  from t where size>99 order by id limit 4"):
        st, r = srv.call("POST", "/sql", {"query": sql})
        check(st == 200 and len(r["rows"]) == 4, "SQL %r" % sql)
    st, _ = srv.call("POST", "/sql", {"query": "SELECT nope FROM t"})
    check(st >= 400, "SQL error answered (%d)" % st)
    h = shapes(srv)
    sq = [s for s in h["shapes"] if s["kind"] == "sql" and "ORDER BY id LIMIT" in s["query"]]
    check(len(sq) == 1 and sq[0]["count"] == 2 and "$1" in sq[0]["query"] and sq[0]["last_rows"] == 4,
          "SQL statements grouped by fingerprint: %s" % sq)
    bad = [s for s in h["shapes"] if s["kind"] == "sql" and "nope" in s["query"]]
    check(len(bad) == 1 and bad[0]["errors"] == 1, "failed SQL counted as an error")
    # a syntax error in a search is recorded under its squeezed text
    st, _ = q("/tables/t/search?q=alpha%20AND%20(")
    check(st == 400, "search syntax error")
    bad = [s for s in shapes(srv)["shapes"] if s["query"] == "alpha and ("]
    check(len(bad) == 1 and bad[0]["errors"] == 1, "a query that does not parse is its own shape")


def test_columns(srv, docs):
    st, d = srv.call("GET", "/tables/t")
    check(st == 200 and "columns" in d and "files" in d, "describe has columns and files")
    cols = {c["name"]: c for c in d.get("columns", [])}
    for name in ("size", "score"):
        vals = [x[name] for x in docs if name in x]
        c = cols.get(name, {})
        check(c.get("min") == min(vals) and c.get("max") == max(vals),
              "%s min/max %s/%s vs %s/%s" % (name, c.get("min"), c.get("max"), min(vals), max(vals)))
        check(c.get("nulls") == len(docs) - len(vals) and c.get("rows") == len(docs),
              "%s nulls %s vs %s" % (name, c.get("nulls"), len(docs) - len(vals)))
        dist = len(set(vals))
        check(c["distinct"]["at_least"] <= dist <= c["distinct"]["at_most"],
              "%s distinct bounds %s hold %d" % (name, c["distinct"], dist))
    sec = cols.get("section", {})
    check(sec.get("btree") is True and sec.get("min") == min(SECTIONS) and sec.get("max") == max(SECTIONS),
          "section: B-tree and min/max")
    bt = {b["field"]: b for b in d["files"]["btrees"]}
    check("section" in bt and bt["section"]["bytes"] > 0, "B-tree size of section listed")
    check(d["files"]["segments"]["bytes"] > 0, "segment bytes listed")


def test_drop_while_searching(srv, workdir):
    """8 keep-alive clients search table d in a loop while it is dropped,
    recreated and dropped again: every answer is 200 (before) or 404 (after
    the drop), never a 5xx or a dropped connection, and the server lives."""
    docs = make_docs(3000, 11)
    bad = []
    counts = {"200": 0, "404": 0}
    lock = threading.Lock()
    stop = threading.Event()

    def client(k):
        rng = random.Random(k)
        c = srv.conn()
        while not stop.is_set():
            # filter, facets and documents keep the handle busy after the search
            path = ("/tables/d/search?q=%s%%20%s&limit=20&filter=size%%20%%3E%%20%d"
                    "&facets=terms:section:3,stats:size" % (
                        rng.choice(WORDS), rng.choice(WORDS), rng.randint(0, 50000)))
            if k % 2:
                path = "/tables/d" if k % 4 == 1 else "/tables/d/documents/%d" % rng.randint(0, 2999)
            try:
                c.request("GET", path)
                r = c.getresponse()
                r.read()
                st = r.status
            except Exception as e:  # a crash shows here as a refused or reset connection
                with lock:
                    bad.append("client %d: %r" % (k, e))
                c.close()
                c = srv.conn()
                time.sleep(0.05)
                continue
            with lock:
                if st in (200, 404):
                    counts[str(st)] += 1
                else:
                    bad.append("client %d: status %d" % (k, st))
        c.close()

    for cycle in range(CYCLES):
        load(srv, "d", docs)
        counts["200"] = counts["404"] = 0
        stop.clear()
        ts = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in ts:
            t.start()
        # paced by the answers seen, not by sleeps (60 s only catches a hang)
        check(wait_until(lambda: counts["200"] > 0, 60),
              "cycle %d: searches answered before the drop: %s" % (cycle, counts))
        st, r = srv.call("DELETE", "/tables/d")
        check(st == 200 and r.get("dropped") == "d", "cycle %d: drop while searching: %s %s" % (cycle, st, r))
        check(wait_until(lambda: counts["404"] > 0, 60),
              "cycle %d: searches get 404 after the drop: %s" % (cycle, counts))
        stop.set()
        for t in ts:
            t.join()
        check(not bad, "cycle %d: no failed requests: %s" % (cycle, bad[:5]))
        bad.clear()
    st, _ = srv.call("GET", "/health")
    check(st == 200 and srv.p.poll() is None, "server alive after the drops")


def main():
    with DataDir() as dd:
        srv = Server(os.path.join(dd.path, "data"), dd.path)
        try:
            check(srv.port is not None, "server started")
            docs = make_docs(2000, 7)
            load(srv, "t", docs)
            test_history(srv, docs)
            test_columns(srv, docs)
            test_drop_while_searching(srv, dd.path)
        finally:
            rc = srv.stop()
            check(rc == 0, "clean shutdown (rc %s)" % rc)
            text = srv.text()
            check(" ERROR " not in text and "AddressSanitizer" not in text,
                  "no errors in the server log")
    finish()


if __name__ == "__main__":
    main()
