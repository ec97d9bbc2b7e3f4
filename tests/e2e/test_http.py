"""End to end over HTTP: `quarry serve` on a free loopback port with a temporary
data directory, every endpoint exercised with real requests (success paths,
every error class, malformed JSON, oversized bodies, chunked and gzip ingest),
8 clients searching while 1 ingests, a drop refused while an upload streams,
SIGTERM in the middle of an upload (it finishes, the exit is clean), and the
data reopened by the CLI afterwards.

Search results are checked against a brute-force evaluation over the ingested
documents (fields with language "none", so the oracle's lowercase ASCII words
are the engine's tokens), and ranked hits against `quarry search --json` on
the same data once the server has stopped."""
import gzip
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import threading
import time

from qtest import BIN, DataDir, check, finish, run, wait_until

rng = random.Random(20261130)
SYL = ["ka", "lo", "mi", "ter", "sun", "ra", "ven", "do", "pix", "quo", "zel", "an", "bro"]
VOCAB = sorted({"".join(rng.choice(SYL) for _ in range(rng.randint(1, 3))) for _ in range(300)})
WEIGHTS = [1.0 / (i + 1) ** 1.05 for i in range(len(VOCAB))]
SCHEMA = {"primary_key": "id", "fields": [
    {"name": "title", "type": "text", "language": "none"},
    {"name": "body", "type": "text", "language": "none"},
    {"name": "views", "type": "int"}]}
CONFIG = {"max_body_bytes": 65536, "max_ingest_bytes": 4 << 20, "max_result_window": 500,
          "max_connections": 40, "query_timeout_ms": 5000, "shutdown_timeout_s": 20,
          "max_ingests": 3, "log_requests": True}


def words(n):
    return rng.choices(VOCAB, WEIGHTS, k=n)


def make_doc(i):
    return {"id": i if i % 3 else "doc-%d" % i,
            "title": " ".join(words(rng.randint(1, 5))),
            "body": " ".join(words(rng.randint(3, 30))),
            "views": rng.randint(0, 10**6)}


def toks(text):
    return re.findall(r"[a-z0-9]+", text.lower())


class Oracle:
    def __init__(self):
        self.docs = {}

    def put(self, d):
        self.docs[json.dumps(d["id"])] = {f: toks(d.get(f, "")) for f in ("title", "body")}
        self.docs[json.dumps(d["id"])]["views"] = d.get("views")

    def delete(self, idj):
        self.docs.pop(idj, None)

    def count(self, q):
        return sum(1 for d in self.docs.values() if self.match(q, d))

    def match(self, q, d):
        kind = q[0]
        if kind == "term":
            return any(q[1] in d[f] for f in ("title", "body"))
        if kind == "prefix":
            return any(t.startswith(q[1]) for f in ("title", "body") for t in d[f])
        if kind == "phrase":
            ws = q[1]
            return any(d[f][i:i + len(ws)] == ws for f in ("title", "body")
                       for i in range(len(d[f]) - len(ws) + 1))
        if kind == "or":
            return any(self.match(x, d) for x in q[1])
        if kind == "and":
            return all(self.match(x, d) for x in q[1])
        raise ValueError(kind)


def gen_query():
    w = words(3)
    r = rng.random()
    if r < 0.25:
        return w[0], ("term", w[0])
    if r < 0.45:
        return w[0] + " " + w[1], ("or", [("term", w[0]), ("term", w[1])])
    if r < 0.65:
        return w[0] + " AND " + w[1], ("and", [("term", w[0]), ("term", w[1])])
    if r < 0.8:
        return '"%s %s"' % (w[0], w[1]), ("phrase", [w[0], w[1]])
    return w[0][:2] + "*", ("prefix", w[0][:2])


class Server:
    """`quarry serve` on 127.0.0.1 with a free port (port 0, read back from the
    startup log line).  Always stopped by the test."""

    def __init__(self, data, workdir, config=None, extra=()):
        self.log_path = os.path.join(workdir, "serve-%d.log" % rng.randint(0, 10**9))
        args = [BIN, "serve", "--data", data, "--http", "127.0.0.1:0"]
        if config is not None:
            cfg = os.path.join(workdir, "serve.json")
            with open(cfg, "w") as f:
                json.dump(config, f)
            args += ["--config", cfg]
        self.log = open(self.log_path, "w")
        self.p = subprocess.Popen(args + list(extra), stdout=self.log, stderr=self.log)
        self.port = None
        deadline = time.time() + 15
        while time.time() < deadline and self.p.poll() is None:
            m = re.search(r"serve started .*http=http://127\.0\.0\.1:(\d+)/", self.text())
            if m:
                self.port = int(m.group(1))
                break
            time.sleep(0.05)

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def conn(self, timeout=30):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.p.poll() is None:
            self.p.send_signal(sig)
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        self.log.close()
        return rc


def exact_search(method, path, body):
    """The brute-force oracle here models exact words, so searches ask for no
    typo tolerance and no completion of the last word unless the request names
    either (the search box's defaults are tested in test_search_box.py)."""
    if "/search" not in path:
        return path, body
    if method == "GET" and "?" in path:
        query = path.split("?", 1)[1]
        if "typo=" in query or "prefix=" in query:
            return path, body
        return path + "&typo=off&prefix=false", body
    if method == "POST" and isinstance(body, dict) and "q" in body \
            and not ({"typo", "prefix"} & set(body)):
        body = dict(body, typo="off", prefix=False)
    return path, body


def call(srv, method, path, body=None, headers=None, conn=None):
    """One request; returns (status, headers dict (lowercase), parsed JSON or text)."""
    path, body = exact_search(method, path, body)
    own = conn is None
    c = conn or srv.conn()
    h = dict(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
        h.setdefault("Content-Type", "application/json")
    if isinstance(body, str):
        body = body.encode()
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    hdrs = {k.lower(): v for k, v in r.getheaders()}
    if own:
        c.close()
    if hdrs.get("content-type", "").startswith("application/json"):
        try:
            return r.status, hdrs, json.loads(data)
        except ValueError:
            return r.status, hdrs, {"unparsable": data[:200]}
    return r.status, hdrs, data.decode("utf-8", "replace")


def is_error(res, status, code=None):
    st, _, body = res
    ok = st == status and isinstance(body, dict) and "error" in body and \
        isinstance(body["error"].get("message"), str)
    if ok and code:
        ok = body["error"].get("code") == code
    return ok


def ndjson(docs):
    return "".join((d if isinstance(d, str) else json.dumps(d)) + "\n" for d in docs).encode()


def post_jsonl(srv, table, payload, headers=None, query="", chunked=False, chunk=7000):
    h = {"Content-Type": "application/x-ndjson"}
    h.update(headers or {})
    c = srv.conn()
    if chunked:
        parts = [payload[i:i + chunk] for i in range(0, len(payload), chunk)]
        c.request("POST", "/tables/%s/documents%s" % (table, query), body=iter(parts),
                  headers=h, encode_chunked=True)
    else:
        c.request("POST", "/tables/%s/documents%s" % (table, query), body=payload, headers=h)
    r = c.getresponse()
    body = json.loads(r.read())
    c.close()
    return r.status, body


def raw_upload_start(srv, table, first):
    """Start a chunked upload and leave it open; returns the connection."""
    c = srv.conn()
    c.putrequest("POST", "/tables/%s/documents" % table)
    c.putheader("Content-Type", "application/x-ndjson")
    c.putheader("Transfer-Encoding", "chunked")
    c.endheaders()
    if first:
        c.send(b"%x\r\n%s\r\n" % (len(first), first))
    return c


def raw_upload_finish(c, rest):
    if rest:
        c.send(b"%x\r\n%s\r\n" % (len(rest), rest))
    c.send(b"0\r\n\r\n")
    r = c.getresponse()
    body = json.loads(r.read())
    c.close()
    return r.status, body


# ---------------------------------------------------------------- sections

def test_basics(srv):
    st, h, body = call(srv, "GET", "/health")
    check(st == 200 and body.get("status") == "ok", "GET /health: %s %s" % (st, body))
    c = srv.conn()
    c.request("HEAD", "/health")
    r = c.getresponse()
    check(r.status == 200 and r.read() == b"", "HEAD /health has no body")
    c.close()
    st, h, page = call(srv, "GET", "/")
    check(st == 200 and h.get("content-type", "").startswith("text/html") and
          "<title>Quarry" in page, "admin page served at /")
    check("default-src 'self'" in h.get("content-security-policy", ""), "admin page has a CSP")
    check("http://" not in page.replace("http://www.w3.org", "") and "https://" not in page,
          "admin page loads nothing from other hosts")
    for asset in ("/admin/app.js", "/admin/app.css"):
        st, h, txt = call(srv, "GET", asset)
        check(st == 200 and len(txt) > 500 and "https://" not in txt, "asset %s" % asset)
        st2, _, _ = call(srv, "GET", asset, headers={"If-None-Match": h.get("etag", "")})
        check(st2 == 304, "asset %s revalidates with its ETag (got %d)" % (asset, st2))
    check(is_error(call(srv, "GET", "/admin/nope.js"), 404, "not_found"), "unknown asset 404")
    check(is_error(call(srv, "GET", "/no/such/endpoint"), 404, "not_found"), "unknown path 404")
    res = call(srv, "PUT", "/tables")
    check(is_error(res, 405, "method_not_allowed") and "POST" in res[1].get("allow", ""),
          "PUT /tables is 405 with Allow: %s" % res[1].get("allow"))
    res = call(srv, "PATCH", "/health")
    check(is_error(res, 405) and "GET" in res[1].get("allow", ""), "PATCH /health 405")
    check(is_error(call(srv, "GET", "/tables/%zz"), 400), "bad percent-encoding in path is 400")
    res = call(srv, "POST", "/sql", {"query": "select 1"})
    check(res[0] == 200 and res[2].get("rows") == [[1]], "POST /sql answers SELECT 1: %s" % (res,))
    check(is_error(call(srv, "POST", "/sql", "{oops", {"Content-Type": "application/json"}), 400,
                   "syntax_error"), "/sql bad JSON")


def test_tables(srv):
    st, h, body = call(srv, "POST", "/tables", {"name": "t", "schema": SCHEMA})
    check(st == 201 and body.get("name") == "t" and h.get("location") == "/tables/t",
          "create table t: %s %s" % (st, body))
    check(body.get("schema", {}).get("primary_key") == "id", "create answers the schema")
    check(is_error(call(srv, "POST", "/tables", {"name": "t", "schema": SCHEMA}), 409,
                   "already_exists"), "create twice is 409")
    check(is_error(call(srv, "POST", "/tables", {"name": "../x", "schema": SCHEMA}), 400),
          "path-like table name is 400")
    check(is_error(call(srv, "POST", "/tables", {"name": "u"}), 400), "missing schema is 400")
    check(is_error(call(srv, "POST", "/tables", {"name": "u", "schema": {"fields": [
        {"name": "x", "type": "nosuchtype"}]}}), 400), "bad field type is 400")
    check(is_error(call(srv, "POST", "/tables", {"name": "u", "schema": SCHEMA, "x": 1}), 400),
          "unknown key in table definition is 400")
    check(is_error(call(srv, "POST", "/tables", [1, 2]), 400), "non-object body is 400")
    res = call(srv, "POST", "/tables", '{"name": "u", "schema": {', {"Content-Type":
                                                                       "application/json"})
    check(is_error(res, 400, "syntax_error") and res[2]["error"].get("position", 0) > 0,
          "malformed JSON is 400 with a position: %s" % (res[2],))
    check(is_error(call(srv, "POST", "/tables", "", {"Content-Type": "application/json"}), 400),
          "empty body is 400")
    check(is_error(call(srv, "POST", "/tables", '{"name":"u"}',
                        {"Content-Type": "text/plain"}), 415, "unsupported_media_type"),
          "text/plain body is 415")
    check(is_error(call(srv, "POST", "/tables", '{"name":"u"}', {
        "Content-Type": "application/json", "Content-Encoding": "br"}), 415),
        "unknown Content-Encoding on JSON is 415")
    st, _, body = call(srv, "GET", "/tables")
    check(st == 200 and [t["name"] for t in body.get("tables", [])] == ["t"],
          "list tables: %s" % (body,))
    st, _, body = call(srv, "GET", "/tables/t")
    check(st == 200 and "stats" in body and body["stats"]["docs"] == 0 and
          [f["name"] for f in body["schema"]["fields"]] == ["title", "body", "views"],
          "describe t")
    check(is_error(call(srv, "GET", "/tables/nosuch"), 404, "not_found"), "describe missing 404")
    check(is_error(call(srv, "DELETE", "/tables/nosuch"), 404), "drop missing 404")
    st, _, body = call(srv, "POST", "/tables", {"name": "tmp", "schema": SCHEMA})
    st, _, body = call(srv, "DELETE", "/tables/tmp")
    check(st == 200 and body.get("dropped") == "tmp", "drop tmp")
    check(is_error(call(srv, "GET", "/tables/tmp"), 404), "dropped table is gone")


def test_ingest(srv, oracle):
    docs = [make_doc(i) for i in range(1, 2401)]
    lines = [json.dumps(d) for d in docs]
    lines.insert(9, "{not json")                              # line 10
    lines.insert(19, json.dumps({"title": "no id"}))          # line 20
    lines.insert(29, json.dumps({"id": 777777, "views": "many"}))  # line 30
    lines.insert(39, "")                                       # blank: skipped
    payload = ndjson(lines)
    st, body = post_jsonl(srv, "t", payload, chunked=True, query="?batch=500")
    check(st == 200 and body.get("imported") == 2400 and body.get("rejected") == 3 and
          body.get("acked") == 2400, "chunked ingest counts: %s" % {
              k: body.get(k) for k in ("imported", "rejected", "acked", "error")})
    lines_rep = {e["line"]: e for e in body.get("errors", [])}
    check(sorted(lines_rep) == [10, 20, 30], "rejected lines by number: %s" % sorted(lines_rep))
    check(lines_rep.get(10, {}).get("code") == "syntax_error", "line 10 is a JSON error")
    check("primary key" in lines_rep.get(20, {}).get("message", ""), "line 20 misses its key")
    check("views" in lines_rep.get(30, {}).get("message", ""), "line 30 has a bad int")
    for d in docs:
        oracle.put(d)
    # every acknowledged doc is searchable right away
    st, _, body = call(srv, "GET", "/tables/t/search?q=*&count_only=true")
    if st != 200:  # "*" alone may not be a query: count through a known word instead
        pass
    w = docs[5]["title"].split()[0]
    st, _, body = call(srv, "GET", "/tables/t/search?q=%s&count_only=true" % w)
    check(st == 200 and body.get("total") == oracle.count(("term", w)),
          "count right after ingest: %s vs %d" % (body, oracle.count(("term", w))))

    # gzip, two concatenated members, sent chunked; replaces 300 docs
    upd = []
    for d in rng.sample(docs, 300):
        d2 = make_doc(0)
        d2["id"] = d["id"]
        upd.append(d2)
    half = len(upd) // 2
    gz = gzip.compress(ndjson(upd[:half])) + gzip.compress(ndjson(upd[half:]))
    st, body = post_jsonl(srv, "t", gz, {"Content-Encoding": "gzip"}, chunked=True, chunk=999)
    check(st == 200 and body.get("replaced") == 300 and body.get("imported") == 0,
          "gzip ingest replaces: %s" % {k: body.get(k) for k in ("imported", "replaced", "error")})
    for d in upd:
        oracle.put(d)
    st, body = post_jsonl(srv, "t", b"this is not gzip", {"Content-Encoding": "gzip"})
    check(st == 400 and "gzip" in body.get("error", {}).get("message", ""), "bad gzip is 400")
    st, body = post_jsonl(srv, "t", gzip.compress(ndjson(upd[:3]))[:-10],
                          {"Content-Encoding": "gzip"})
    check(st == 400 and "truncated" in body.get("error", {}).get("message", ""),
          "truncated gzip is 400: %s" % body)
    check(body.get("acked") == body.get("imported", 0) + body.get("replaced", 0),
          "truncated gzip: accepted lines are acknowledged")
    st, body = post_jsonl(srv, "t", b"{}", {"Content-Encoding": "deflate"})
    check(st == 415, "deflate is 415")
    st, body = post_jsonl(srv, "t", b"{}", {"Content-Type": "text/csv"})
    check(st == 415, "text/csv upload is 415")
    st, body = post_jsonl(srv, "t", b"{}", query="?bogus=1")
    check(st == 400 and "bogus" in body["error"]["message"], "unknown upload parameter 400")
    st, body = post_jsonl(srv, "bad-name", b"{}")
    check(st == 400, "upload to a bad table name is 400")

    # strict mode: stops at the first bad line, earlier lines are committed
    strict_docs = [make_doc(i) for i in range(50000, 50010)]
    st, body = post_jsonl(srv, "t", ndjson(strict_docs[:4] + ["{bad"] + strict_docs[4:]),
                          query="?strict=true")
    check(st == 400 and body.get("acked") == 4 and body["error"].get("line") == 5,
          "strict upload stops at line 5 with 4 acked: %s" % body)
    for d in strict_docs[:4]:
        oracle.put(d)

    # over max_ingest_bytes (4 MiB): by Content-Length before reading, and by streaming
    big = b'{"id": "big", "body": "' + b"x" * (5 << 20) + b'"}\n'
    c = srv.conn()
    c.putrequest("POST", "/tables/t/documents")
    c.putheader("Content-Type", "application/x-ndjson")
    c.putheader("Content-Length", str(len(big)))
    c.endheaders()
    r = c.getresponse()   # answered without the body (never sent: waiting for it would hang)
    body = json.loads(r.read())
    c.close()
    check(r.status == 413, "Content-Length over the limit is 413 without reading the body (%d)"
          % r.status)
    st, body = post_jsonl(srv, "t", big, chunked=True, chunk=1 << 16)
    check(st == 413 and body.get("error", {}).get("code") == "program_limit_exceeded",
          "chunked upload over the limit is 413: %s" % st)
    bomb = gzip.compress(b"\n" * (6 << 20))
    st, body = post_jsonl(srv, "t", bomb, {"Content-Encoding": "gzip"})
    check(st == 413, "gzip expanding over the limit is 413 (%d)" % st)

    # a new table gets an inferred schema, like `quarry import`
    st, body = post_jsonl(srv, "inferred", ndjson([{"id": 1, "name": "alpha beta"},
                                                   {"id": 2, "name": "beta", "n": 3}]))
    check(st == 200 and body.get("table_created") and body.get("schema_inferred") and
          body.get("imported") == 2, "ingest creates an inferred table: %s" % body)
    check(body.get("schema_notes") == [
        "name: text: 2 of 2 sampled values are strings (up to 10 bytes, 2 distinct)",
        "n: int: 1 of 1 sampled values are integers"],
        "the answer says why each field got its type: %s" % body.get("schema_notes"))
    st, _, body = call(srv, "GET", "/tables/inferred")
    check(st == 200 and any(f["name"] == "name" and f["type"] == "text"
                            for f in body["schema"]["fields"]), "inferred schema has name:text")
    return docs


def test_documents(srv, oracle):
    st, _, body = call(srv, "GET", "/tables/t/documents/1")
    check(st == 200 and body.get("id") == 1, "get integer key 1: %s" % body)
    st, _, body = call(srv, "GET", "/tables/t/documents/doc-3")
    check(st == 200 and body.get("id") == "doc-3", "get string key doc-3")
    check(is_error(call(srv, "GET", "/tables/t/documents/424242"), 404), "missing doc 404")
    check(is_error(call(srv, "GET", "/tables/nosuch/documents/1"), 404), "missing table 404")
    check(is_error(call(srv, "GET", "/tables/t/documents/99999999999999999999999"), 400),
          "integer id out of range is 400")
    check(is_error(call(srv, "GET", "/tables/t/documents/%22unterminated"), 400),
          "bad quoted id is 400")
    # PUT creates (201), replaces (200); id from the path fills the key
    doc = {"title": "putword alpha", "body": "zzput one", "views": 5}
    st, _, body = call(srv, "PUT", "/tables/t/documents/900001", doc)
    check(st == 201 and body == {"id": 900001, "replaced": False}, "PUT creates: %s" % body)
    doc2 = dict(doc, title="putword beta", id=900001)
    st, _, body = call(srv, "PUT", "/tables/t/documents/900001", doc2)
    check(st == 200 and body.get("replaced") is True, "PUT replaces: %s" % body)
    oracle.put(doc2)
    st, _, body = call(srv, "GET", "/tables/t/documents/900001")
    check(body.get("title") == "putword beta", "PUT visible right away")
    # a string key made of digits, quoted in the path; a key with a slash
    st, _, body = call(srv, "PUT", "/tables/t/documents/%220042%22", {"title": "zero"})
    check(st == 201 and body.get("id") == "0042", "quoted digits are a string key: %s" % body)
    oracle.put({"id": "0042", "title": "zero"})
    st, _, body = call(srv, "PUT", "/tables/t/documents/a%2Fb%20c", {"title": "slash"})
    check(st == 201 and body.get("id") == "a/b c", "encoded slash stays in the id: %s" % body)
    oracle.put({"id": "a/b c", "title": "slash"})
    st, _, body = call(srv, "GET", "/tables/t/documents/a%2Fb%20c")
    check(st == 200 and body.get("title") == "slash", "get the id with a slash")
    check(is_error(call(srv, "PUT", "/tables/t/documents/5", {"id": 6, "title": "x"}), 400),
          "PUT with a different key in the body is 400")
    check(is_error(call(srv, "PUT", "/tables/t/documents/5", [1]), 400), "PUT non-object 400")
    check(is_error(call(srv, "PUT", "/tables/t/documents/5", {"views": "many"}), 422),
          "PUT with a wrongly typed field is 422")
    check(is_error(call(srv, "PUT", "/tables/t/documents/5", "{\"title\": ",
                        {"Content-Type": "application/json"}), 400, "syntax_error"),
          "PUT malformed JSON 400")
    check(is_error(call(srv, "PUT", "/tables/t/documents/5", b"x" * 70000,
                        {"Content-Type": "application/json"}), 413), "PUT over max_body 413")
    st, _, body = call(srv, "DELETE", "/tables/t/documents/900001")
    check(st == 200 and body.get("deleted") is True, "DELETE a document")
    oracle.delete("900001")
    check(is_error(call(srv, "DELETE", "/tables/t/documents/900001"), 404), "DELETE twice 404")
    st, _, body = call(srv, "GET", "/tables/t/search?q=putword&count_only=true")
    check(st == 200 and body.get("total") == 0, "deleted doc no longer matches")


def test_search(srv, oracle):
    # totals against brute force, GET and POST alike
    bad = 0
    for i in range(60):
        q, t = gen_query()
        want = oracle.count(t)
        if i % 2:
            st, _, body = call(srv, "GET", "/tables/t/search?" + urlencode(
                {"q": q, "count_only": "true"}))
        else:
            st, _, body = call(srv, "POST", "/tables/t/search", {"q": q, "limit": 3})
        if st != 200 or body.get("total") != want:
            bad += 1
            if bad <= 3:
                print("mismatch %r: %s %s want %d" % (q, st, body.get("total"), want))
    check(bad == 0, "%d of 60 search totals disagree with brute force" % bad)
    # AND as the default operator
    w = words(2)
    st, _, body = call(srv, "POST", "/tables/t/search", {"q": " ".join(w),
                                                          "default_operator": "AND",
                                                          "count_only": True})
    check(st == 200 and body["total"] == oracle.count(("and", [("term", x) for x in w])),
          "default_operator and")
    # hits: ids, scores descending, docs, highlights with custom markers, paging
    q = VOCAB[0] + " " + VOCAB[3]
    st, _, body = call(srv, "POST", "/tables/t/search", {
        "q": q, "limit": 5, "highlight": {"pre": "[[", "post": "]]"}, "doc": ["title"],
        "explain": True, "fields": [{"field": "title", "weight": 2}, "body"]})
    hits = body.get("hits", [])
    check(st == 200 and len(hits) == 5 and all(set(h["doc"]) <= {"title"} for h in hits),
          "POST search: 5 hits with selected doc fields")
    check(all(hits[i]["score"] >= hits[i + 1]["score"] for i in range(len(hits) - 1)),
          "scores descend")
    check(any("[[" in h.get("highlight", "") for h in hits), "highlights use the markers")
    check(body.get("explain", {}).get("fields") == "title^2,body", "explain echoes the fields")
    check(isinstance(body.get("took_ms"), float), "took_ms present")
    st, _, page2 = call(srv, "GET", "/tables/t/search?" + urlencode(
        {"q": q, "limit": 5, "offset": 5, "fields": "title^2,body", "doc": "false"}))
    check(st == 200 and not set(h["id"] for h in hits) & set(h["id"] for h in page2["hits"])
          and all("doc" not in h for h in page2["hits"]), "offset pages on, doc=false")
    st, _, both = call(srv, "POST", "/tables/t/search", {"q": q, "limit": 10,
                                                          "fields": {"title": 2, "body": 1}})
    check([h["id"] for h in both["hits"]] == [h["id"] for h in hits + page2["hits"]],
          "two pages equal one page of 10")
    st, _, nt = call(srv, "GET", "/tables/t/search?" + urlencode({"q": q, "limit": 5,
                                                                  "fields": "title^2,body",
                                                                  "total": "false"}))
    check(st == 200 and nt["total"] is None and [h["id"] for h in nt["hits"]] ==
          [h["id"] for h in hits], "total=false: same hits, total null")
    check(is_error(call(srv, "GET", "/tables/t/search?q=a&total=false&count_only=true"), 400),
          "count_only with total=false is 400")
    test_filters(srv, oracle)
    # every error class of search
    res = call(srv, "GET", "/tables/t/search?q=" + urlencode({"": "ka AND (lo"})[1:])
    check(is_error(res, 400, "syntax_error") and res[2]["error"].get("position") == 8,
          "query syntax error with its position: %s" % (res[2],))
    check(is_error(call(srv, "GET", "/tables/t/search"), 400), "missing q is 400")
    check(is_error(call(srv, "GET", "/tables/t/search?q=a&limit=x"), 400), "limit=x is 400")
    check(is_error(call(srv, "GET", "/tables/t/search?q=a&limit=-1"), 400), "limit=-1 is 400")
    check(is_error(call(srv, "GET", "/tables/t/search?q=a&offset=1e99"), 400), "huge offset 400")
    check(is_error(call(srv, "POST", "/tables/t/search", {"q": "a", "limit": 2.5}), 400),
          "fractional limit is 400")
    check(is_error(call(srv, "POST", "/tables/t/search", {"q": 5}), 400), "q must be a string")
    check(is_error(call(srv, "GET", "/tables/t/search?q=a&limit=400&offset=200"), 413,
                   "program_limit_exceeded"), "result window over the limit is 413")
    # limit and offset are bounded by max_result_window (up to 10^9), not a fixed 10^6
    check(is_error(call(srv, "GET", "/tables/t/search?q=a&limit=1500000"), 413,
                   "program_limit_exceeded"), "a limit above 10^6 meets the window: 413")
    check(is_error(call(srv, "GET", "/tables/t/search?q=a&nosuch=1"), 400), "unknown param 400")
    check(is_error(call(srv, "GET", "/tables/t/search?q=a&q=b"), 400), "repeated param is 400")
    check(is_error(call(srv, "GET", "/tables/t/search?q=a&fields=nosuch"), 400),
          "unknown field is 400")
    check(is_error(call(srv, "GET", "/tables/t/search?q=a&fields=views"), 400),
          "non-text field is 400")
    check(is_error(call(srv, "POST", "/tables/t/search", {"q": "a", "fields": {"title": -1}}),
                   400), "negative weight is 400")
    check(is_error(call(srv, "POST", "/tables/t/search", {"q": "a", "highlight": "yes"}), 400),
          "bad highlight is 400")
    check(is_error(call(srv, "POST", "/tables/t/search?limit=3", {"q": "a"}), 400),
          "POST search with query-string params is 400")
    check(is_error(call(srv, "POST", "/tables/t/search", "[1,", {"Content-Type":
                                                                 "application/json"}), 400,
                   "syntax_error"), "POST search malformed JSON")
    check(is_error(call(srv, "GET", "/tables/nosuch/search?q=a"), 404), "search missing table")
    check(is_error(call(srv, "POST", "/tables/t/search", {"q": "a", "x": "y" * 70000}), 413),
          "POST search body over max_body_bytes is 413")


def pk_order(idj):
    """The engine's primary-key order: integers (numerically) before strings (bytewise)."""
    v = json.loads(idj)
    return (0, v, b"") if isinstance(v, int) else (1, 0, v.encode())


def test_filters(srv, oracle):
    """filter / sort / search_after / facets against brute force over the oracle."""
    docs = oracle.docs
    # counts with filters, with and without text, every access path
    bad = 0
    for i in range(30):
        lo = rng.randint(0, 10**6)
        hi = lo + rng.randint(0, 300000)
        q, t = gen_query()
        if i % 3 == 0:
            q, t = "", None
        flt = "views BETWEEN %d AND %d OR views IS NULL" % (lo, hi) if i % 4 == 1 else \
            "views >= %d AND NOT views > %d" % (lo, hi)
        def fmatch(d):
            v = d["views"]
            if i % 4 == 1:
                return v is None or lo <= v <= hi
            return v is not None and lo <= v <= hi
        want = sum(1 for d in docs.values() if fmatch(d) and (t is None or oracle.match(t, d)))
        path = ["auto", "scan", "check", "btree"][i % 4]
        if i % 2:
            st, _, body = call(srv, "GET", "/tables/t/search?" + urlencode(
                {"q": q, "filter": flt, "count_only": "true", "access_path": path}))
        else:
            st, _, body = call(srv, "POST", "/tables/t/search", {"q": q, "filter": flt,
                                                                  "limit": 3,
                                                                  "access_path": path})
        if st != 200 or body.get("total") != want:
            bad += 1
            if bad <= 3:
                print("filter mismatch q=%r filter=%r: %s %s want %d" % (q, flt, st, body, want))
    check(bad == 0, "%d of 30 filtered totals disagree with brute force" % bad)
    # filter-only, sorted by a column (NULLs first descending), then paged by cursor
    lo = 300000
    rows = [(idj, d["views"]) for idj, d in docs.items() if d["views"] is None or
            d["views"] >= lo]
    rows.sort(key=lambda r: pk_order(r[0]))
    rows.sort(key=lambda r: (0, 0) if r[1] is None else (1, -r[1]))  # NULLs first
    want_ids = [json.loads(r[0]) for r in rows]
    flt = "views >= %d OR views IS NULL" % lo
    st, _, body = call(srv, "GET", "/tables/t/search?" + urlencode(
        {"filter": flt, "sort": "views:desc", "limit": 20, "doc": "false"}))
    check(st == 200 and body["total"] == len(rows) and
          [h["id"] for h in body["hits"]] == want_ids[:20],
          "filter-only search sorted by views desc (%s)" % (body.get("error"),))
    check(all(h["sort"][-1] == h["id"] for h in body.get("hits", [])),
          "each hit's sort array ends with its id")
    got, after = [], None
    for _ in range(1000):
        req = {"filter": flt, "sort": [{"field": "views", "order": "desc"}], "limit": 37,
               "doc": False}
        if after is not None:
            req["search_after"] = after
        st, _, page = call(srv, "POST", "/tables/t/search", req)
        if st != 200 or not page["hits"]:
            break
        got += [h["id"] for h in page["hits"]]
        after = page["hits"][-1]["sort"]
    if got != want_ids:
        k = next(i for i in range(min(len(got), len(want_ids))) if got[i] != want_ids[i])
        print("first difference at %d: got %s want %s" % (k, got[max(0, k - 2):k + 3], want_ids[max(0, k - 2):k + 3]))
        print([docs[json.dumps(x)]["views"] for x in got[max(0, k - 2):k + 3]])
    check(got == want_ids, "search_after pages through every match in order (%d of %d)" % (
        len(got), len(want_ids)))
    # ranked search with a filter = ranked search without it, restricted
    q = VOCAB[0] + " " + VOCAB[1]
    st, _, full = call(srv, "POST", "/tables/t/search", {"q": q, "limit": 500, "doc": False})
    st2, _, flt_res = call(srv, "POST", "/tables/t/search", {"q": q, "limit": 10, "doc": False,
                                                             "filter": "views < 500000"})
    keep = [h["id"] for h in full["hits"] if (docs[json.dumps(h["id"])]["views"] or 10**7)
            < 500000][:10]
    check(st2 == 200 and [h["id"] for h in flt_res["hits"]] == keep,
          "ranked hits with a filter are the unfiltered ranking restricted to it")
    # facets over every match of q + filter
    t = ("or", [("term", VOCAB[0]), ("term", VOCAB[1])])
    vals = [d["views"] for d in docs.values() if oracle.match(t, d) and
            d["views"] is not None and d["views"] >= 1000]
    st, _, body = call(srv, "POST", "/tables/t/search", {
        "q": q, "filter": "views >= 1000", "limit": 0, "explain": True,
        "facets": [{"type": "stats", "field": "views"},
                   {"type": "histogram", "field": "views", "interval": 250000},
                   {"type": "terms", "field": "views", "size": 2, "name": "top"}]})
    fc = body.get("facets", {})
    stats = fc.get("views", {})
    check(st == 200 and stats.get("count") == len(vals) and stats.get("min") == min(vals) and
          stats.get("max") == max(vals) and stats.get("sum") == sum(vals),
          "stats facet equals brute force: %s" % (stats,))
    hist = {}
    for v in vals:
        hist[v // 250000 * 250000] = hist.get(v // 250000 * 250000, 0) + 1
    got_hist = {b["key"]: b["count"] for b in fc.get("views:histogram", {}).get("buckets", [])}
    check(got_hist == hist, "histogram facet equals brute force: %s vs %s" % (got_hist, hist))
    top = fc.get("top", {})
    check(len(top.get("buckets", [])) == min(2, len(set(vals))) and
          top.get("other", -1) + sum(b["count"] for b in top["buckets"]) == len(vals),
          "terms facet: top 2 plus the rest is every match")
    ex = body.get("explain", {}).get("filter", {})
    check(ex.get("rows", -1) >= len(vals) and "blocks_total" in ex,
          "explain reports the filter's rows and blocks: %s" % (ex,))
    # errors: position in the filter, unknown column, bad sort/cursor/facet
    res = call(srv, "GET", "/tables/t/search?" + urlencode({"q": "a", "filter": "views >> 3"}))
    check(is_error(res, 400, "syntax_error") and res[2]["error"].get("position") == 8,
          "filter syntax error with its position: %s" % (res[2],))
    res = call(srv, "POST", "/tables/t/search", {"filter": "viewz > 3"})
    check(is_error(res, 400) and "viewz" in res[2]["error"]["message"] and
          res[2]["error"].get("position") == 1, "unknown filter column is 400 with a position")
    check(is_error(call(srv, "POST", "/tables/t/search", {"filter": "title = 'x'"}), 422),
          "a full-text field cannot be filtered (422)")
    check(is_error(call(srv, "POST", "/tables/t/search", {"q": "a", "sort": "title"}), 422),
          "sort by a full-text field is 422")
    check(is_error(call(srv, "POST", "/tables/t/search", {"q": "a", "sort": "views:up"}), 400),
          "bad sort direction is 400")
    check(is_error(call(srv, "POST", "/tables/t/search", {"q": "a", "sort": "views",
                                                          "search_after": ["x", 1]}), 400),
          "cursor of the wrong shape is 400")
    check(is_error(call(srv, "POST", "/tables/t/search", {"q": "a", "facets": [
        {"type": "histogram", "field": "views"}]}), 400), "histogram without interval is 400")
    check(is_error(call(srv, "POST", "/tables/t/search", {"q": "a", "facets": [
        {"type": "stats", "field": "title"}]}), 422), "facet on a full-text field is 422")
    check(is_error(call(srv, "GET", "/tables/t/search?q=a&access_path=fast"), 400),
          "unknown access_path is 400")


def urlencode(d):
    from urllib.parse import urlencode as ue
    return ue(d)


def test_ops(srv, oracle):
    st, _, body = call(srv, "POST", "/tables/t/flush")
    check(st == 200 and body.get("flushed") is True, "flush")
    st, _, body = call(srv, "POST", "/tables/t/merge")
    check(st == 200 and body.get("stats", {}).get("segments") == 1 and
          body["stats"]["docs"] == len(oracle.docs), "merge to one segment, docs %s vs %d" % (
              body.get("stats", {}).get("docs"), len(oracle.docs)))
    check(is_error(call(srv, "POST", "/tables/nosuch/merge"), 404), "merge missing table 404")
    # delete by query
    w = VOCAB[7]
    want = oracle.count(("term", w))
    st, _, body = call(srv, "POST", "/tables/t/delete_by_query", {"q": w})
    check(st == 200 and body.get("deleted") == want, "delete_by_query %s: %s want %d" % (
        w, body, want))
    for k in [k for k, d in oracle.docs.items() if w in d["title"] or w in d["body"]]:
        oracle.delete(k)
    st, _, body = call(srv, "GET", "/tables/t/search?q=%s&count_only=1" % w)
    check(body.get("total") == 0, "nothing matches after delete_by_query")
    check(is_error(call(srv, "POST", "/tables/t/delete_by_query", {"x": 1}), 400),
          "delete_by_query without q")
    # metrics and stats
    st, h, text = call(srv, "GET", "/metrics")
    check(st == 200 and h.get("content-type", "").startswith("text/plain"), "GET /metrics")
    check(re.search(r'quarry_http_requests_total\{route="search",status="200"\} \d+', text),
          "metrics count requests by route and status")
    check(re.search(r'quarry_http_request_duration_seconds_bucket\{route="search_post",'
                    r'le="\+Inf"\} \d+', text), "metrics have latency histograms")
    m = re.search(r'quarry_table_docs\{table="t"\} (\d+)', text)
    check(m and int(m.group(1)) == len(oracle.docs), "metrics docs gauge for t")
    for fam in ("quarry_table_segments", "quarry_table_wal_bytes", "quarry_table_merges_total",
                "quarry_table_searches_total", "quarry_table_documents_ingested_total"):
        check(re.search(fam + r'\{table="t"\} ', text), "metrics have " + fam)
    st, _, body = call(srv, "GET", "/stats")
    tt = [t for t in body.get("tables", []) if t["name"] == "t"]
    check(st == 200 and tt and tt[0]["docs"] == len(oracle.docs) and tt[0]["searches"] > 50,
          "GET /stats for the admin page")
    st, _, body = call(srv, "GET", "/stats/queries")
    check(st == 200 and len(body.get("recent", [])) > 10 and body.get("shapes") and
          all("p99_ms" in s and "count" in s for s in body["shapes"]), "query history")
    p99s = [s["p99_ms"] for s in body["shapes"]]
    check(p99s == sorted(p99s, reverse=True), "query shapes sorted slowest first")


def test_concurrency(srv, oracle):
    """8 clients search while 1 ingests batches; each batch must be fully
    searchable as soon as its upload is acknowledged."""
    stop = threading.Event()
    errors = []
    counts = [0] * 8

    def searcher(k):
        c = srv.conn()
        while not stop.is_set():
            q, _ = gen_query()
            try:
                st, _, body = call(srv, "GET", "/tables/t/search?" + urlencode(
                    {"q": q, "limit": 5}), conn=c)
            except Exception as e:  # noqa: BLE001 - report any failure
                errors.append("searcher %d: %r" % (k, e))
                c.close()
                c = srv.conn()
                continue
            if st != 200:
                errors.append("searcher %d: %d %s" % (k, st, body))
            counts[k] += 1
        c.close()

    threads = [threading.Thread(target=searcher, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    unseen = 0
    for b in range(25):
        # paced by the searchers, not the clock: 4 searches between batches,
        # so 100 of them interleave with the writes on any machine
        n0 = sum(counts)
        wait_until(lambda: sum(counts) >= n0 + 4)
        batch = [{"id": 700000 + b * 40 + j, "title": "batchmark%d" % b,
                  "body": " ".join(words(8))} for j in range(40)]
        st, body = post_jsonl(srv, "t", ndjson(batch), chunked=(b % 2 == 0))
        if st != 200 or body.get("acked") != 40:
            errors.append("ingest batch %d: %d %s" % (b, st, body))
            continue
        for d in batch:
            oracle.put(d)
        st, _, res = call(srv, "GET", "/tables/t/search?q=batchmark%d&count_only=true" % b)
        if res.get("total") != 40:
            unseen += 1
    stop.set()
    for th in threads:
        th.join()
    check(not errors, "no errors with 8 searchers and 1 writer: %s" % errors[:3])
    check(unseen == 0, "every acknowledged batch searchable at once (%d not)" % unseen)
    check(sum(counts) >= 100, "searchers made progress (%d searches)" % sum(counts))


def uploads(srv, n):
    """A condition for wait_until: /stats counts n uploads running (from an
    upload's first call to its completion, just after its answer)."""
    return lambda: call(srv, "GET", "/stats")[2].get("uploads") == n


def test_limits(srv):
    # a drop is refused while an upload streams into the table, then works
    call(srv, "POST", "/tables", {"name": "busy", "schema": SCHEMA})
    check(wait_until(uploads(srv, 0)), "no upload running before the limits")
    c = raw_upload_start(srv, "busy", ndjson([make_doc(i) for i in range(5)]))
    check(wait_until(uploads(srv, 1)), "the upload into busy is running")
    res = call(srv, "DELETE", "/tables/busy")
    check(is_error(res, 503, "overloaded"), "drop during an upload is 503: %s" % (res[2],))
    st, body = raw_upload_finish(c, ndjson([make_doc(i) for i in range(5, 9)]))
    check(st == 200 and body.get("imported") == 9, "the upload completes after the refused drop")
    st, _, _ = call(srv, "DELETE", "/tables/busy")
    check(st == 200, "drop after the upload")
    # uploads at once beyond max_ingests (3) are 503
    check(wait_until(uploads(srv, 0)), "the upload into busy no longer counts")
    open_c = [raw_upload_start(srv, "t", b"") for _ in range(3)]
    check(wait_until(uploads(srv, 3)), "three uploads running")
    st, body = post_jsonl(srv, "t", b"")
    check(st == 503, "a fourth concurrent upload is 503 (%d)" % st)
    for c in open_c:
        raw_upload_finish(c, b"")
    # at max_connections (40) a new connection makes room: the one that has
    # waited longest for a request is closed with 503, and /health answers
    socks = []
    for _ in range(45):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        socks.append(s)
    check(call(srv, "GET", "/health")[0] == 200, "/health answers with 45 idle sockets open")
    data = socks[0].recv(4096)
    check(data.startswith(b"HTTP/1.1 503") and b"overloaded" in data and
          b"make room" in data, "the oldest idle socket was closed with 503: %r" % data[:80])
    s = socks[-1]
    s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    data = s.recv(4096)
    check(data.startswith(b"HTTP/1.1 200"), "the newest socket is served: %r" % data[:60])
    for s in socks:
        s.close()
    check(wait_until(lambda: call(srv, "GET", "/tables")[0] == 200),
          "healthy again after the connections closed")
    # garbage on the socket: an answer or a close, and the server stays up
    for junk in (b"\x00\x01\x02garbage\r\n\r\n", b"GET /health HTTP/1.1\r\nHost: x\r\n" +
                 b"X-Big: " + b"a" * 200000 + b"\r\n\r\n", b"POST /tables HTTP/1.1\r\n"
                 b"Host: x\r\nContent-Length: 5\r\n\r\n{"):
        try:
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=3)
            s.sendall(junk)
            s.shutdown(socket.SHUT_WR)
            s.recv(1000)
            s.close()
        except OSError:
            pass
    st, _, _ = call(srv, "GET", "/health")
    check(st == 200, "still healthy after malformed requests")


def ranked_http(srv, queries):
    out = {}
    for q in queries:
        # both front doors with the search box's defaults (typo, prefix)
        st, _, body = call(srv, "GET", "/tables/t/search?" + urlencode(
            {"q": q, "limit": 10, "doc": "false", "typo": "auto", "prefix": "true"}))
        out[q] = [(json.dumps(h["id"]), h["score"]) for h in body.get("hits", [])]
    return out


def ranked_cli(data, queries):
    out = {}
    for q in queries:
        rc, txt, err = run(["search", "t", q, "--json", "--limit", "10", "--typo", "auto",
                            "--prefix"], data)
        out[q] = [(json.dumps(h["id"]), h["score"])
                  for h in map(json.loads, txt.splitlines())] if rc == 0 else None
    return out


def same_ranking(a, b):
    """Scores equal within float noise, in the same order, with the same ids
    per run of tied scores; ids tied at the last score may differ (ties order
    by internal doc number, which depends on the segment layout)."""
    if a is None or b is None or len(a) != len(b):
        return False
    close = lambda x, y: abs(x - y) <= 1e-3 * max(1.0, abs(x))
    if not all(close(x[1], y[1]) for x, y in zip(a, b)):
        return False
    i = 0
    while i < len(a):
        j = i
        while j + 1 < len(a) and close(a[j + 1][1], a[i][1]):
            j += 1
        if j + 1 < len(a) and sorted(x[0] for x in a[i:j + 1]) != sorted(y[0] for y in b[i:j + 1]):
            return False
        i = j + 1
    return True


def test_shutdown(srv, data, oracle):
    """SIGTERM while an upload streams: it finishes, then a clean exit."""
    docs = [make_doc(i) for i in range(800000, 800030)]
    c = raw_upload_start(srv, "late", ndjson(docs[:10]))
    time.sleep(0.2)
    srv.p.send_signal(signal.SIGTERM)
    check(wait_until(lambda: "serve stopping" in srv.text()), "SIGTERM seen")

    def refused():
        try:
            socket.create_connection(("127.0.0.1", srv.port), timeout=1).close()
        except OSError:
            return True
        return False
    check(wait_until(refused), "no new connections once stopping")
    st, body = raw_upload_finish(c, ndjson(docs[10:]))
    check(st == 200 and body.get("acked") == 30, "in-flight upload finishes after SIGTERM: %s"
          % st)
    rc = srv.stop()
    check(rc == 0, "clean exit after SIGTERM (rc %d)" % rc)
    check("serve stopped" in srv.text(), "shutdown logged")


def main():
    with DataDir() as dd:
        data = os.path.join(dd.path, "data")
        r = subprocess.run(["python3", os.path.join(os.path.dirname(__file__), "..", "..", "src",
                                                    "server", "admin", "embed.py"), "--check"],
                           capture_output=True, text=True)
        check(r.returncode == 0, "embedded admin assets are up to date: " + r.stdout)
        srv = Server(data, dd.path, CONFIG)
        if not check(srv.port is not None, "server started: " + srv.text()[-500:]):
            srv.stop()
            finish()
        oracle = Oracle()
        t0 = time.time()
        try:
            # a second server on the same directory is refused, as is a public address
            p = subprocess.run([BIN, "serve", "--data", data, "--http", "127.0.0.1:0"],
                               capture_output=True, text=True, timeout=20)
            check(p.returncode == 1 and "in use" in p.stderr, "second server on the data dir")
            p = subprocess.run([BIN, "serve", "--data", os.path.join(dd.path, "d2"), "--http",
                                "0.0.0.0:0"], capture_output=True, text=True, timeout=20)
            check(p.returncode == 1 and "refusing" in p.stderr, "public address refused")
            test_basics(srv)
            test_tables(srv)
            test_ingest(srv, oracle)
            test_documents(srv, oracle)
            test_search(srv, oracle)
            test_concurrency(srv, oracle)
            test_ops(srv, oracle)
            test_limits(srv)
            rq = [gen_query()[0] for _ in range(15)]
            call(srv, "POST", "/tables/t/merge")
            http_ranked = ranked_http(srv, rq)
            log = srv.text()
            check(re.search(r"INFO http method=GET path=/tables/t/search status=200 ms=[\d.]+",
                            log), "one log line per request with status and latency")
            test_shutdown(srv, data, oracle)
        finally:
            if srv.p.poll() is None:
                srv.stop()
        print("server phase took %.1f s" % (time.time() - t0))
        # the data reopens; the CLI sees the same ranked hits and the same count
        cli = ranked_cli(data, rq)
        same = sum(1 for q in rq if same_ranking(cli[q], http_ranked[q]))
        for q in [q for q in rq if not same_ranking(cli[q], http_ranked[q])][:2]:
            print("ranked mismatch %r:\n http %s\n cli  %s" % (q, http_ranked[q], cli[q]))
        check(same == len(rq), "HTTP ranked hits equal `quarry search --json` for %d of %d" % (
            same, len(rq)))
        rc, out, err = run(["stats", "t"], data)
        check(rc == 0 and json.loads(out)["docs"] == len(oracle.docs),
              "reopened table has every acknowledged doc (%s vs %d)" % (out.strip(),
                                                                        len(oracle.docs)))
        rc, out, err = run(["stats", "late"], data)
        check(rc == 0 and json.loads(out)["docs"] == 30, "the upload finished during shutdown "
              "is all there: " + out.strip())
        rc, out, err = run(["check"], data)
        check(rc == 0, "checksums verify after shutdown: " + out + err)
    finish()


if __name__ == "__main__":
    main()
