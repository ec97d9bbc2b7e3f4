"""End to end: HTTP security of `quarry serve`.

- API keys: made with `quarry key add` (printed once, stored as a salted hash
  in a 0600 file), listed and removed; every route class answers 401 (with
  WWW-Authenticate: Bearer) without a valid key, 403 with a key of too small a
  scope, and its normal answer with a sufficient one; POST /sql needs search,
  write or admin according to its statements.  A loopback server without keys
  is open, and keys added or removed while it runs take effect.
- Listening beyond loopback is refused without keys (unless allow_remote).
- HTTPS from a certificate made here with openssl under a test CA: curl
  --cacert succeeds, curl with another CA fails, plain HTTP gets no answer.
- Limits: JSON body size, upload size, result window, clauses in a text query,
  per-query memory, query time, uploads at once (503 with Retry-After)."""
import json
import os
import random
import re
import shutil
import socket
import stat
import subprocess
import threading
import time
import urllib.parse

from qserve import Server
from qtest import BIN, DataDir, check, finish, run, skip, wait_until

SCHEMA = {"primary_key": "id", "fields": [
    {"name": "body", "type": "text", "language": "none"},
    {"name": "n", "type": "int"}]}
WORDS = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "zeta"]


def docs(lo, hi):
    # document i holds WORDS[j] when i % (j + 2) == 0: counts are computable
    out = []
    for i in range(lo, hi):
        ws = [w for j, w in enumerate(WORDS) if i % (j + 2) == 0] or ["none"]
        out.append({"id": i, "body": " ".join(ws), "n": i})
    return out


def expected_count(word, lo, hi):
    j = WORDS.index(word)
    return sum(1 for i in range(lo, hi) if i % (j + 2) == 0)


def ndjson(ds):
    return "".join(json.dumps(d) + "\n" for d in ds)


def call(srv, method, path, body=None, key=None, headers=None):
    """(status, parsed body, response headers)."""
    h = dict(headers or {})
    if key is not None:
        h["Authorization"] = "Bearer " + key
    if isinstance(body, str):
        # without keys, writes need a type no page may send (http_origin.c)
        h.setdefault("Content-Type", "application/x-ndjson" if path.endswith("/documents")
                     else "application/json")
    return srv.call_h(method, path, body, h)


def add_key(data, name, scope):
    rc, out, err = run(["key", "add", name, "--scope", scope], data)
    key = out.strip()
    check(rc == 0 and re.fullmatch(r"qk_[0-9a-f]{64}", key),
          "quarry key add %s prints one key: %r %r" % (name, out, err))
    return key


SCOPES = ["search", "write", "admin"]


def route_cases():
    """(label, needed scope, request maker, success check).  Makers take a
    unique suffix so that each attempt that succeeds has its own objects."""
    cases = []

    def add(label, need, method, path, body=None, ok=None):
        cases.append((label, need, method, path, body, ok or (lambda st, b: 200 <= st < 300)))

    add("health", None, "GET", "/health")
    add("admin page", None, "GET", "/")
    add("tables list", "search", "GET", "/tables",
        ok=lambda st, b: st == 200 and any(t["name"] == "t" for t in b["tables"]))
    add("describe", "search", "GET", "/tables/t")
    add("search", "search", "GET", "/tables/t/search?q=gamma&count_only=true",
        ok=lambda st, b: st == 200 and b["total"] >= expected_count("gamma", 0, 200))
    add("search POST", "search", "POST", "/tables/t/search", {"q": "alpha", "limit": 3},
        ok=lambda st, b: st == 200 and len(b["hits"]) == 3)
    add("get", "search", "GET", "/tables/t/documents/6",
        ok=lambda st, b: st == 200 and b.get("body") == docs(6, 7)[0]["body"])
    add("sql select", "search", "POST", "/sql", {"query": "SELECT count(*) FROM t WHERE n < 200"},
        ok=lambda st, b: st == 200 and b["rows"] == [[200]])
    add("sql select with a write word in a string", "search", "POST", "/sql",
        {"query": "SELECT 'delete; drop table t' AS x -- update\n"})
    add("ingest", "write", "POST", "/tables/t/documents", "{sfx_doc}\n",
        ok=lambda st, b: st == 200 and b.get("imported") == 1)
    add("put", "write", "PUT", "/tables/t/documents/{sfx}", {"body": "sigma", "n": -1})
    # the handler answers (404: no such id) only once the key is accepted
    add("delete doc", "write", "DELETE", "/tables/t/documents/{sfx}",
        ok=lambda st, b: st == 404 and "does not exist" in b["error"]["message"])
    add("delete by query", "write", "POST", "/tables/t/delete_by_query", {"q": "nosuchword"})
    add("sql insert", "write", "POST", "/sql",
        {"query": "INSERT INTO t (id, body, n) VALUES ({sfx}, 'zeta', 0)"})
    add("sql data-modifying with", "write", "POST", "/sql",
        {"query": "WITH d AS (DELETE FROM t WHERE id = {sfx} RETURNING id) SELECT 1"},
        ok=lambda st, b: st == 400 and b["error"]["sqlstate"] == "0A000")
    add("create table", "admin", "POST", "/tables", {"name": "c{sfx}", "schema": SCHEMA})
    add("sql create", "admin", "POST", "/sql",
        {"query": "CREATE TABLE s{sfx} (id int PRIMARY KEY, body text)"})
    add("synonyms", "search", "GET", "/tables/t/synonyms",
        ok=lambda st, b: st == 200 and "synonyms" in b)
    add("set synonyms", "admin", "PUT", "/tables/t/synonyms", {"synonyms": None},
        ok=lambda st, b: st == 200 and b == {"synonyms": None})
    add("flush", "admin", "POST", "/tables/t/flush")
    add("merge", "admin", "POST", "/tables/t/merge")
    add("stats", "admin", "GET", "/stats")
    add("metrics", "admin", "GET", "/metrics")
    add("queries", "admin", "GET", "/stats/queries")
    return cases


def fill(x, sfx):
    if isinstance(x, str):
        return x.replace("{sfx_doc}", json.dumps({"id": sfx, "body": "omega", "n": sfx})) \
                .replace("{sfx}", str(sfx))
    if isinstance(x, dict):
        return {k: fill(v, sfx) for k, v in x.items()}
    return x


def test_keys(data, dd):
    srv = Server(data, dd.path)
    if not check(srv.port is not None, "server started: " + srv.text()[-400:]):
        srv.stop()
        return
    try:
        # loopback, no keys: open as before
        st, b, _ = call(srv, "POST", "/tables", {"name": "t", "schema": SCHEMA})
        check(st in (200, 201), "no keys on loopback: create is open (%d %s)" % (st, b))
        st, b, _ = call(srv, "POST", "/tables/t/documents", ndjson(docs(0, 200)))
        check(st == 200 and b.get("imported") == 200, "no keys: ingest is open: %s" % (b,))
        # keys added while the server runs take effect within a second or so
        keys = {s: add_key(data, "k-" + s, s) for s in SCOPES}
        path = os.path.join(data, "api_keys.json")
        mode = stat.S_IMODE(os.stat(path).st_mode)
        check(mode == 0o600, "key file mode is 0600 (%o)" % mode)
        text = open(path).read()
        check(all(k not in text and k[3:] not in text for k in keys.values()),
              "the key file holds no key in clear")
        rc, out, _ = run(["key", "list"], data)
        check(rc == 0 and sorted(out.split("\n")[:-1]) ==
              sorted("k-%s\t%s" % (s, s) for s in SCOPES), "quarry key list: %r" % out)
        check(wait_until(lambda: call(srv, "GET", "/tables")[0] == 401),
              "keys made while serving are required within seconds")
        st, b, h = call(srv, "GET", "/tables")
        check(st == 401 and b["error"]["code"] == "unauthorized" and
              h.get("www-authenticate", "").startswith("Bearer"),
              "401 JSON with WWW-Authenticate: Bearer (%s %s)" % (h.get("www-authenticate"), b))
        st, b, h = call(srv, "GET", "/tables", headers={"Authorization": "Basic dTpw"})
        check(st == 401, "another auth scheme is 401")
        bad = keys["admin"][:-1] + ("0" if keys["admin"][-1] != "0" else "1")
        st, b, h = call(srv, "GET", "/tables", key=bad)
        check(st == 401 and "invalid_token" in h.get("www-authenticate", ""),
              "a key off by one digit is 401 invalid_token")
        st, b, h = call(srv, "GET", "/tables", key="")
        check(st == 401, "an empty bearer token is 401")
        # every route class with no key, a bad key, and each scope
        rank = {None: 0, "search": 1, "write": 2, "admin": 3}
        sfx = 100000
        n_cases = 0
        for label, need, method, path, body, ok in route_cases():
            for who in [None, "bad"] + SCOPES:
                sfx += 1
                key = None if who is None else bad if who == "bad" else keys[who]
                st, b, h = call(srv, method, fill(path, sfx), fill(body, sfx), key=key)
                if need is None:
                    good = ok(st, b)
                elif who in (None, "bad"):
                    good = st == 401 and "www-authenticate" in h
                elif rank[who] < rank[need]:
                    good = st == 403 and b["error"]["code"] == "insufficient_privilege"
                else:
                    good = ok(st, b)
                n_cases += 1
                check(good, "%s as %s: %d %s" % (label, who, st, str(b)[:200]))
        print("route x key cases: %d" % n_cases)
        # the scope POST /sql needs, from the parse of its statements:
        # a write key passes (any answer but 401/403) or gets 403 for admin SQL
        for q, need in [("/* drop table t */ SELECT 1", "search"),
                        ("SELECT $$delete$$, 'update', \"drop\" FROM (SELECT 1 AS \"drop\") s",
                         "search"),
                        ("EXPLAIN SELECT * FROM t WHERE n = 1", "search"),
                        ("BEGIN; SELECT 1; COMMIT", "search"),
                        ("SELECT 1; DELETE FROM t WHERE id = -5", "write"),
                        ("UPDATE t SET n = n WHERE id = -5", "write"),
                        ("SELECT 1; DROP TABLE nosuch", "admin"),
                        ("select 1;truncate nosuch", "admin"),
                        ("VACUUM", "admin"),
                        ("LOCK TABLE t", "admin")]:
            for who in SCOPES:
                st, b, _ = call(srv, "POST", "/sql", {"query": q}, key=keys[who])
                if rank[who] < rank[need]:
                    good = st == 403 and b["error"]["code"] == "insufficient_privilege"
                else:
                    good = st not in (401, 403)
                check(good, "SQL %r as %s (needs %s): %d %s" % (q, who, need, st, str(b)[:160]))
        # the writes made with sufficient keys are there: docs 100000+ from
        # "ingest" by write and admin keys
        st, b, _ = call(srv, "GET", "/tables/t/search?q=omega&count_only=true", key=keys["search"])
        want = expected_count("omega", 0, 200) + 2
        check(st == 200 and b["total"] == want, "omega count after keyed ingests %s vs %d" % (
            b.get("total"), want))
        # a removed key stops working
        rc, out, _ = run(["key", "remove", "k-write"], data)
        check(rc == 0, "quarry key remove")
        check(wait_until(lambda: call(srv, "GET", "/tables", key=keys["write"])[0] == 401),
              "a removed key is refused within seconds")
        check(call(srv, "GET", "/tables", key=keys["search"])[0] == 200,
              "the other keys still work")
        rc, out, err = run(["key", "add", "../x", "--scope", "admin"], data)
        check(rc == 1 and "invalid key name" in err, "a key name with a slash is refused")
        rc, out, err = run(["key", "add", "x", "--scope", "root"], data)
        check(rc == 2, "an unknown scope is refused")
    finally:
        check(srv.stop() == 0, "server stops cleanly")
    return keys


def test_remote(dd):
    # no keys: refused with a message saying how
    empty = os.path.join(dd.path, "remote0")
    p = subprocess.run([BIN, "serve", "--data", empty, "--http", "0.0.0.0:0"],
                       capture_output=True, text=True, timeout=20)
    check(p.returncode == 1 and "refusing to listen" in p.stderr and "quarry key add" in p.stderr,
          "0.0.0.0 without keys is refused: " + p.stderr[-300:])
    # allow_remote (a proxy authenticates): starts
    cfg = os.path.join(dd.path, "remote.json")
    with open(cfg, "w") as f:
        json.dump({"allow_remote": True}, f)
    srv = RawServer(["--data", empty, "--http", "0.0.0.0:0", "--config", cfg], dd.path)
    check(srv.port is not None and "http=http://0.0.0.0:" in srv.text(),
          "allow_remote starts on 0.0.0.0: " + srv.text()[-300:])
    if srv.port:
        check(call(srv, "GET", "/tables")[0] == 200, "allow_remote without keys: open")
    srv.stop()
    # with a key: starts, and the key is required
    keyed = os.path.join(dd.path, "remote1")
    k = add_key(keyed, "ops", "admin")
    srv = RawServer(["--data", keyed, "--http", "0.0.0.0:0"], dd.path)
    if check(srv.port is not None, "0.0.0.0 with a key starts: " + srv.text()[-300:]):
        check(call(srv, "GET", "/tables")[0] == 401, "remote: no key is 401")
        check(call(srv, "GET", "/tables", key=k)[0] == 200, "remote: the key works")
        check(call(srv, "GET", "/health")[0] == 200, "remote: /health needs no key")
    srv.stop()


class RawServer(Server):
    """`quarry serve` with the arguments given (any listen address, TLS),
    ready once its startup line names the scheme and port."""

    def __init__(self, args, workdir):
        self.log_path = os.path.join(workdir, "raw-%d.log" % time.monotonic_ns())
        self.log = open(self.log_path, "w")
        self.p = subprocess.Popen([BIN, "serve"] + args, stdout=self.log, stderr=self.log)
        self.port = self.scheme = None
        deadline = time.time() + 30
        while time.time() < deadline and self.p.poll() is None:
            m = re.search(r"serve started .*http=(https?)://[0-9.]+:(\d+)/", self.text())
            if m:
                self.scheme, self.port = m.group(1), int(m.group(2))
                break
            time.sleep(0.05)


def openssl(args, cwd):
    p = subprocess.run(["openssl"] + args, cwd=cwd, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError("openssl %s: %s" % (args[0], p.stderr))


def make_pki(d):
    """A CA, a server certificate for 127.0.0.1 signed by it, and a second CA."""
    os.makedirs(d, exist_ok=True)
    for ca in ("ca", "other"):
        openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                 "-keyout", ca + ".key", "-out", ca + ".pem", "-subj", "/CN=Quarry test " + ca],
                d)
    openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
             "server.csr", "-subj", "/CN=127.0.0.1"], d)
    with open(os.path.join(d, "ext.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl(["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-out", "server.pem", "-extfile", "ext.cnf"], d)


def curl(args):
    p = subprocess.run(["curl", "-sS", "--max-time", "10"] + args, capture_output=True,
                       text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def test_tls(dd):
    if not shutil.which("openssl") or not shutil.which("curl"):
        check(False, "openssl and curl are installed (make deps)")
        return
    pki = os.path.join(dd.path, "pki")
    make_pki(pki)
    data = os.path.join(dd.path, "tls")
    k = add_key(data, "tls", "admin")
    srv = RawServer(["--data", data, "--http", "127.0.0.1:0", "--tls-cert",
                     os.path.join(pki, "server.pem"), "--tls-key", os.path.join(pki, "server.key")],
                    dd.path)
    if not check(srv.port is not None and srv.scheme == "https",
                 "HTTPS server started: " + srv.text()[-400:]):
        srv.stop()
        return
    port = srv.port
    base = "https://127.0.0.1:%d" % port
    try:
        rc, out, err = curl(["--cacert", os.path.join(pki, "ca.pem"), base + "/health"])
        check(rc == 0 and json.loads(out)["status"] == "ok", "curl --cacert CA: %s %s" % (out, err))
        rc, out, err = curl(["--cacert", os.path.join(pki, "ca.pem"), "-H",
                             "Authorization: Bearer " + k, "-X", "POST", "-H",
                             "Content-Type: application/json", "-d",
                             json.dumps({"name": "t", "schema": SCHEMA}), base + "/tables"])
        check(rc == 0 and "error" not in out, "a keyed create over TLS: " + out + err)
        rc, out, err = curl(["--cacert", os.path.join(pki, "ca.pem"), "-H",
                             "Authorization: Bearer " + k, base + "/tables"])
        check(rc == 0 and [t["name"] for t in json.loads(out)["tables"]] == ["t"],
              "keyed list over TLS: " + out)
        rc, out, err = curl(["--cacert", os.path.join(pki, "other.pem"), base + "/health"])
        check(rc == 60 and not out, "another CA fails verification (rc %d: %s)" % (rc, err))
        rc, out, err = curl(["http://127.0.0.1:%d/health" % port])
        check(rc != 0 and "ok" not in out, "plain HTTP on the TLS port gets no answer (rc %d)" % rc)
    finally:
        check(srv.stop() == 0, "TLS server stops cleanly")
    p = subprocess.run([BIN, "serve", "--data", data, "--http", "127.0.0.1:0", "--tls-cert",
                        os.path.join(pki, "server.pem")], capture_output=True, text=True,
                       timeout=20)
    check(p.returncode == 1 and "tls_key" in p.stderr, "a certificate without a key is refused")
    p = subprocess.run([BIN, "serve", "--data", data, "--http", "127.0.0.1:0", "--tls-cert",
                        os.path.join(pki, "server.pem"), "--tls-key",
                        os.path.join(pki, "other.key")], capture_output=True, text=True,
                       timeout=20)
    check(p.returncode == 1, "a key that does not match the certificate is refused: " +
          p.stderr[-200:])


def test_limits(dd):
    data = os.path.join(dd.path, "limits")
    cfg = {"max_body_bytes": 4096, "max_ingest_bytes": 64 << 10, "max_result_window": 50,
           "max_ingests": 1, "query_mem_bytes": 0, "max_query_terms": 2000,
           "max_line_bytes": 2048, "max_connections": 6}
    srv = Server(data, dd.path, config=cfg)
    if not check(srv.port is not None, "limits server started"):
        srv.stop()
        return
    try:
        call(srv, "POST", "/tables", {"name": "t", "schema": SCHEMA})
        st, b, _ = call(srv, "POST", "/tables/t/documents", ndjson(docs(0, 300)))
        check(st == 200 and b["imported"] == 300, "limits: ingest")
        # JSON body over max_body_bytes
        st, b, _ = call(srv, "POST", "/tables/t/search", {"q": "alpha " * 1000})
        check(st == 413 and "max_body_bytes" in b["error"].get("hint", ""),
              "a JSON body over max_body_bytes is 413 naming the setting: %d" % st)
        # an upload over max_ingest_bytes
        big = ndjson({"id": 10**6 + i, "body": "kappa " * 50, "n": i} for i in range(400))
        st, b, _ = call(srv, "POST", "/tables/t/documents", big)
        check(st == 413, "an upload over max_ingest_bytes is 413: %d %s" % (st, str(b)[:200]))
        # result window
        st, b, _ = call(srv, "GET", "/tables/t/search?q=alpha&offset=45&limit=10")
        check(st == 413 and "50" in json.dumps(b), "offset + limit over max_result_window: %d %s"
              % (st, b))
        st, b, _ = call(srv, "GET", "/tables/t/search?q=alpha&offset=40&limit=10")
        check(st == 200 and len(b["hits"]) == 10, "a window just inside the limit works")
        # clauses in a text query: the parser's limit (1024 leaf clauses)
        q = " OR ".join("w%d" % i for i in range(1100))
        st, b, _ = call(srv, "GET", "/tables/t/search?q=" + q.replace(" ", "+"))
        check(st == 413 and "too many clauses" in b["error"]["message"],
              "a query with 1100 terms is refused with a clear error: %d %s" % (st, str(b)[:200]))
        q = " OR ".join("w%d" % i for i in range(500)) + " OR alpha"
        st, b, _ = call(srv, "GET", "/tables/t/search?count_only=true&q=" + q.replace(" ", "+"))
        check(st == 200 and b["total"] == expected_count("alpha", 0, 300),
              "a query with 501 terms is answered: %d %s" % (st, str(b)[:200]))
        # too many query parameters
        st, b, _ = call(srv, "GET", "/tables/t/search?q=a&" + "&".join("x%d=1" % i
                                                                        for i in range(40)))
        check(st == 413 and "too many query parameters" in b["error"]["message"],
              "too many query parameters: %d" % st)
        # uploads at once beyond max_ingests (1): 503 with Retry-After.  /stats
        # "uploads" says when an upload counts (from its first call to its
        # completion, which comes just after its answer)
        def uploads(n):
            return lambda: call(srv, "GET", "/stats")[1].get("uploads") == n
        check(wait_until(uploads(0)), "no upload running")
        c = srv.conn()
        c.putrequest("POST", "/tables/t/documents")
        c.putheader("Content-Type", "application/x-ndjson")
        c.putheader("Transfer-Encoding", "chunked")
        c.endheaders()
        c.send(b"5\r\n\n\n\n\n\n\r\n")
        check(wait_until(uploads(1)), "the first upload is running")
        st, b, h = call(srv, "POST", "/tables/t/documents", ndjson(docs(500, 501)))
        check(st == 503 and h.get("retry-after") == "1" and b["error"]["code"] == "overloaded",
              "a second upload beyond max_ingests is 503 with Retry-After: %d %s" % (st, h))
        c.send(b"0\r\n\r\n")
        r = c.getresponse()
        r.read()
        c.close()
        check(r.status == 200, "the first upload finishes")
        # a line over max_line_bytes is rejected with its line number; the others load
        lines = ndjson([{"id": 900, "body": "alpha", "n": 1},
                        {"id": 901, "body": "beta " * 600, "n": 2},
                        {"id": 902, "body": "gamma", "n": 3}])
        check(wait_until(uploads(0)), "the finished upload no longer counts")
        st, b, _ = call(srv, "POST", "/tables/t/documents", lines)
        check(st == 200 and b["imported"] == 2 and b["rejected"] == 1 and
              b["errors"] and b["errors"][0].get("line") == 2,
              "a line over max_line_bytes is rejected by number: %d %s" % (st, str(b)[:300]))
        # max_connections (6) busy connections: other requests get 503 with
        # Retry-After, /health still answers
        def sleeper():
            # a connection still waiting for its request may be closed to
            # make room for a newer one (a 503, or the socket closed while the
            # request was still being sent): send it again
            for _ in range(20):
                try:
                    if call(srv, "POST", "/sql", {"query": "select pg_sleep(3)"})[0] != 503:
                        return
                except OSError:
                    pass
        sleepers = [threading.Thread(target=sleeper) for _ in range(6)]
        for th in sleepers:
            th.start()
        try:
            def running():
                b = call(srv, "GET", "/stats")[1]
                return isinstance(b, dict) and b.get("in_flight", 0) >= 7
            check(wait_until(running, 10), "six statements are running")
            st, b, h = call(srv, "GET", "/tables")
            check(st == 503 and h.get("retry-after") == "1" and
                  "max_connections" in b["error"].get("hint", ""),
                  "connections over max_connections: 503, Retry-After: %d %s" % (st, b))
            check(call(srv, "GET", "/health")[0] == 200, "/health answers over max_connections")
        finally:
            for th in sleepers:
                th.join()
        check(wait_until(lambda: call(srv, "GET", "/tables")[0] == 200, 10),
              "answers again once the connections closed")
    finally:
        srv.stop()
    # query time: fuzzy expansions of 150 clauses over many distinct terms take
    # seconds; the server's limit (query_timeout_ms) and a request's lower
    # timeout_ms both cancel it with 504, and the server goes on answering
    srv = Server(data, dd.path, config={"query_timeout_ms": 200})
    try:
        rng = random.Random(7)
        syl = ["ka", "lo", "mi", "ter", "sun", "ra", "ven", "do", "pix", "quo", "zel", "an"]

        def word():
            return "".join(rng.choice(syl) for _ in range(rng.randint(2, 4)))
        call(srv, "POST", "/tables", {"name": "slow", "schema": SCHEMA})
        st, b, _ = call(srv, "POST", "/tables/slow/documents", ndjson(
            {"id": i, "body": " ".join(word() for _ in range(30)), "n": i} for i in range(6000)))
        check(st == 200 and b["imported"] == 6000, "slow table loaded")
        q = " OR ".join(word() + "~2" for _ in range(150))
        for extra, limit in (("", 200), ("&timeout_ms=20", 20)):
            t = time.time()
            st, b, _ = call(srv, "GET", "/tables/slow/search?q=%s%s" % (
                urllib.parse.quote(q), extra))
            took = time.time() - t
            check(st == 504 and b["error"]["code"] == "statement_timeout" and
                  ("%d ms" % limit) in b["error"].get("hint", ""),
                  "a search over %d ms is cancelled with 504 naming the limit (%.2f s): %d %s"
                  % (limit, took, st, str(b)[:200]))
        st, b, _ = call(srv, "GET", "/tables/slow/search?q=" + urllib.parse.quote(word()))
        check(st == 200, "searches still answer after the cancelled ones")
        # SQL is bounded by the same limit, and SET cannot raise it
        for sql in ("select pg_sleep(30)",
                    "set statement_timeout = 0; select pg_sleep(30)",
                    "select count(*) from slow a, slow b where a.body || b.body like '%zzz%'"):
            t = time.time()
            st, b, _ = call(srv, "POST", "/sql", {"query": sql})
            took = time.time() - t
            check(st == 504 and b["error"].get("sqlstate") == "57014",
                  "SQL over query_timeout_ms is cancelled with 504 (%.2f s): %s: %d %s"
                  % (took, sql[:40], st, str(b)[:200]))
        st, b, _ = call(srv, "POST", "/sql", {"query": "set statement_timeout = 20; "
                                                       "select pg_sleep(0.1)"})
        check(st == 504, "SET may lower the limit: %d %s" % (st, str(b)[:200]))
        st, b, _ = call(srv, "POST", "/sql", {"query": "select count(*) from slow"})
        check(st == 200 and b["rows"] == [[6000]], "SQL answers after the cancelled ones: %s"
              % str(b)[:200])
    finally:
        srv.stop()
    # per-query memory: a tiny memory cap
    srv = Server(data, dd.path, config={"query_mem_bytes": 4096, "max_query_terms": 100})
    try:
        # max_query_terms: words count, operators, field names and numbers do not
        q100 = "body:(" + " OR ".join('"w%d x"^2' % i for i in range(49)) + ") AND NOT y~1 OR v^3"
        q101 = q100 + " z"
        for method, q, over in (("GET", q100, False), ("GET", q101, True), ("POST", q101, True)):
            if method == "GET":
                st, b, _ = call(srv, "GET", "/tables/t/search?count_only=true&q=" +
                                urllib.parse.quote(q))
            else:
                st, b, _ = call(srv, "POST", "/tables/t/search", {"q": q, "count_only": True})
            if over:
                good = st == 413 and "101 terms, more than the limit of 100" in \
                    b["error"]["message"] and "max_query_terms" in b["error"]["hint"]
            else:
                good = st != 413 or "terms" not in b["error"]["message"]
            check(good, "max_query_terms %s %s: %d %s" % (method, over, st, str(b)[:200]))
        st, b, _ = call(srv, "POST", "/tables/t/delete_by_query", {"q": q101})
        check(st == 413, "delete_by_query with too many terms is refused: %d" % st)
        st, b, _ = call(srv, "GET", "/tables/t/search?q=alpha+OR+beta+OR+gamma&limit=50")
        check(st in (413, 503) and b["error"]["code"] in ("limit_exceeded", "out_of_memory",
                                                          "program_limit_exceeded"),
              "a search over query_mem_bytes is refused clearly: %d %s" % (st, str(b)[:300]))
        check(call(srv, "GET", "/health")[0] == 200, "the server is fine after the memory cap")
    finally:
        srv.stop()


def main():
    if not shutil.which("curl"):
        skip("curl is not installed")
    t0 = time.time()
    with DataDir() as dd:
        data = os.path.join(dd.path, "data")
        for f in (lambda: test_keys(data, dd), lambda: test_remote(dd), lambda: test_tls(dd),
                  lambda: test_limits(dd)):
            t = time.time()
            f()
            print("phase took %.1f s" % (time.time() - t))
    print("took %.1f s" % (time.time() - t0))
    finish()


if __name__ == "__main__":
    main()
