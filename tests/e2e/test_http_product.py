"""End to end: what users of search products expect from the HTTP API.

- Facets (terms, histogram, stats, percentiles, cardinality, range; a
  multi-valued keyword field counted per element) over every match of a text
  query and a filter, each checked against the answer of the same server's
  SQL to the same question, on random documents spread over several segments
  with deletions.
- CORS (cors_origins, off by default): preflights answered for the origins
  named and refused for others, Access-Control-Allow-Origin on answers and
  errors, keyless writes taken from a named origin, "*" ignored without keys.
- Ingest of a JSON array body (pretty-printed, gzip too): one document per
  element, a bad element reported by its position, an unclosed array or text
  after it refused with the complete elements kept.
- PATCH: a JSON merge patch of a stored document (set, remove, nested merge),
  searchable at once; concurrent patches of one document lose nothing.
- Ranking by fields ("rank": "score * log(1 + views)"): hits in the order
  of the expression recomputed from every match's BM25 score and document,
  fewer candidates than matches, the GET form, errors with positions.
- Multi-search: each result equals the single search's answer, errors stay
  in their slot.
- The OpenAPI document is served as docs/openapi.yaml holds it, and it and
  docs/http-api.md name every route of the route table with its method.
- API keys limited to tables and with an expiry (quarry key add --tables
  --expires): other tables and cross-table routes 403, multi-search checked
  per query, an expired key 401."""
import gzip
import json
import math
import os
import random
import re
import subprocess
import threading

import yaml

from qserve import Server
from qtest import BIN, DataDir, check, finish

SCHEMA = {"primary_key": "id", "fields": [
    {"name": "body", "type": "text", "language": "none"},
    {"name": "cat", "type": "keyword"},
    {"name": "tags", "type": "keyword", "multi": True},
    {"name": "views", "type": "int"},
    {"name": "price", "type": "float"}]}
WORDS = ["red", "green", "blue", "apple", "pear", "plum"]
TAGS = ["a", "b", "c", "d", "e"]


def random_doc(rng, i):
    d = {"id": i, "body": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))}
    if rng.random() < 0.9:
        d["cat"] = "c%d" % rng.randint(0, 6)
    if rng.random() < 0.85:
        d["tags"] = rng.sample(TAGS, rng.randint(1, 3))
    if rng.random() < 0.9:
        d["views"] = rng.randint(0, 120)
    if rng.random() < 0.9:
        d["price"] = round(rng.uniform(0, 50), 2)
    return d


def ndjson(ds):
    return "".join(json.dumps(d) + "\n" for d in ds)


def sql(srv, q):
    st, body = srv.call("POST", "/sql", {"query": q})
    if not check(st == 200, "SQL %s: %s %s" % (q, st, body)):
        return []
    return body["rows"]


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)


def load(srv, rng):
    st, _ = srv.call("POST", "/tables", {"name": "p", "schema": SCHEMA})
    check(st == 201, "create table: %s" % st)
    ds = [random_doc(rng, i) for i in range(600)]
    for lo in (0, 200, 400):  # three segments
        st, body = srv.call("POST", "/tables/p/documents", ndjson(ds[lo:lo + 200]),
                            {"Content-Type": "application/x-ndjson"})
        check(st == 200 and body["imported"] == 200, "ingest: %s %s" % (st, body))
        srv.call("POST", "/tables/p/flush")
    for i in rng.sample(range(600), 60):
        st, _ = srv.call("DELETE", "/tables/p/documents/%d" % i)
        check(st == 200, "delete %d" % i)


# (q for HTTP, filter for HTTP, SQL WHERE for the same matches)
CASES = [
    ("apple", None, "body @@ 'apple'"),
    ("red OR pear", "views >= 30", "body @@ 'red OR pear' AND views >= 30"),
    ("green", "cat = 'c2'", "body @@ 'green' AND cat = 'c2'"),
    ("", "tags = 'b'", "'b' = ANY(tags)"),
    ("plum", "tags IN ('a', 'e') AND price < 30",
     "body @@ 'plum' AND ('a' = ANY(tags) OR 'e' = ANY(tags)) AND price < 30"),
]
PCTS = [10, 50, 95]
RANGES = [{"to": 20}, {"from": 20, "to": 60, "key": "mid"}, {"from": 50}]


def test_facets(srv):
    for q, flt, where in CASES:
        body = {"q": q, "limit": 0, "facets": [
            {"name": "cat", "type": "terms", "field": "cat", "size": 100},
            {"name": "tags", "type": "terms", "field": "tags", "size": 100},
            {"name": "hist", "type": "histogram", "field": "views", "interval": 25},
            {"name": "stats", "type": "stats", "field": "price"},
            {"name": "pct", "type": "percentiles", "field": "views", "percents": PCTS},
            {"name": "card_cat", "type": "cardinality", "field": "cat"},
            {"name": "card_tags", "type": "cardinality", "field": "tags"},
            {"name": "range", "type": "range", "field": "views", "ranges": RANGES}]}
        if flt:
            body["filter"] = flt
        what = "q=%r filter=%r" % (q, flt)
        st, res = srv.call("POST", "/tables/p/search", body)
        if not check(st == 200, "%s: %s %s" % (what, st, res)):
            continue
        f = res["facets"]
        total = sql(srv, "SELECT count(*) FROM p WHERE %s" % where)[0][0]
        check(res["total"] == total and total > 0, "%s: total %s, SQL %s" % (what, res["total"], total))

        want = {k: n for k, n in sql(srv, "SELECT cat, count(*) FROM p WHERE %s AND cat IS NOT "
                                          "NULL GROUP BY cat" % where)}
        got = {b["key"]: b["count"] for b in f["cat"]["buckets"]}
        check(got == want, "%s: terms cat %s, SQL %s" % (what, got, want))
        nulls = sql(srv, "SELECT count(*) FROM p WHERE %s AND cat IS NULL" % where)[0][0]
        check(f["cat"]["missing"] == nulls, "%s: cat missing %s, SQL %s"
              % (what, f["cat"]["missing"], nulls))

        want = {k: n for k, n in sql(srv, "SELECT t, count(*) FROM p, unnest(tags) AS t WHERE %s "
                                          "GROUP BY t" % where)}
        got = {b["key"]: b["count"] for b in f["tags"]["buckets"]}
        check(got == want, "%s: terms tags (per element) %s, SQL %s" % (what, got, want))
        nulls = sql(srv, "SELECT count(*) FROM p WHERE %s AND tags IS NULL" % where)[0][0]
        check(f["tags"]["missing"] == nulls, "%s: tags missing %s, SQL %s"
              % (what, f["tags"]["missing"], nulls))

        want = {int(k): n for k, n in sql(srv, "SELECT floor(views / 25.0) * 25, count(*) FROM p "
                                               "WHERE %s AND views IS NOT NULL GROUP BY 1" % where)}
        got = {int(b["key"]): b["count"] for b in f["hist"]["buckets"]}
        check(got == want, "%s: histogram %s, SQL %s" % (what, got, want))

        row = sql(srv, "SELECT count(price), min(price), max(price), sum(price), avg(price) "
                       "FROM p WHERE %s" % where)[0]
        s = f["stats"]
        check(s["count"] == row[0] and all(close(s[k], row[i + 1]) for i, k in
                                           enumerate(["min", "max", "sum", "avg"])),
              "%s: stats %s, SQL %s" % (what, s, row))

        cols = ", ".join("percentile_cont(%s) WITHIN GROUP (ORDER BY views)" % (p / 100)
                         for p in PCTS)
        row = sql(srv, "SELECT count(views), %s FROM p WHERE %s" % (cols, where))[0]
        p = f["pct"]
        check(p["count"] == row[0] and all(close(p["values"][str(x)], row[i + 1])
                                           for i, x in enumerate(PCTS)),
              "%s: percentiles %s, SQL %s" % (what, p, row))

        n = sql(srv, "SELECT count(DISTINCT cat) FROM p WHERE %s" % where)[0][0]
        check(f["card_cat"]["value"] == n, "%s: cardinality cat %s, SQL %s"
              % (what, f["card_cat"]["value"], n))
        n = sql(srv, "SELECT count(DISTINCT t) FROM p, unnest(tags) AS t WHERE %s" % where)[0][0]
        check(f["card_tags"]["value"] == n, "%s: cardinality tags %s, SQL %s"
              % (what, f["card_tags"]["value"], n))

        row = sql(srv, "SELECT count(*) FILTER (WHERE views < 20), count(*) FILTER (WHERE views "
                       ">= 20 AND views < 60), count(*) FILTER (WHERE views >= 50) FROM p WHERE %s"
                  % where)[0]
        got = [b["count"] for b in f["range"]["buckets"]]
        keys = [b["key"] for b in f["range"]["buckets"]]
        check(got == row and keys == ["*-20", "mid", "50-*"],
              "%s: range %s %s, SQL %s" % (what, keys, got, row))

    # the GET form asks the same as the JSON form
    st, a = srv.call("GET", "/tables/p/search?q=apple&limit=0&facets=percentiles:views:10|50|95,"
                            "range:views:*-20|20-60|50-*,cardinality:tags")
    st2, b = srv.call("POST", "/tables/p/search", {"q": "apple", "limit": 0, "facets": [
        {"type": "percentiles", "field": "views", "percents": PCTS},
        {"type": "range", "field": "views", "ranges": [{"to": 20}, {"from": 20, "to": 60},
                                                       {"from": 50}]},
        {"type": "cardinality", "field": "tags"}]})
    check(st == 200 and st2 == 200 and a["facets"] == b["facets"],
          "GET facets equal POST facets: %s %s / %s %s" % (st, a, st2, b))

    # too many or no percents / ranges: 400 naming the limit, in both forms
    for facet, words in (({"type": "percentiles", "field": "views", "percents": []}, "percents"),
                         ({"type": "range", "field": "views", "ranges": []}, "ranges")):
        st, res = srv.call("POST", "/tables/p/search", {"q": "apple", "facets": [facet]})
        msg = res.get("error", {}).get("message", "") if isinstance(res, dict) else ""
        check(st == 400 and ("takes 1 to" in msg and words in msg),
              "empty %s refused: %s %s" % (words, st, res))
    st, res = srv.call("GET", "/tables/p/search?q=apple&facets=percentiles:views:" +
                       "|".join(["50"] * 200))
    msg = res.get("error", {}).get("message", "") if isinstance(res, dict) else ""
    check(st == 400 and "takes 1 to" in msg, "200 percents refused: %s %s" % (st, res))

    # a keyword list is refused where one value is needed, and stored as sent
    st, res = srv.call("PUT", "/tables/p/documents/9999", {"body": "x", "tags": ["a", 1]})
    check(st in (400, 422) and "tags" in json.dumps(res), "list with a number: %s %s" % (st, res))
    st, res = srv.call("PUT", "/tables/p/documents/9999", {"body": "x", "cat": ["a", "b"]})
    check(st in (400, 422) and "cat" in json.dumps(res), "list in a single keyword: %s %s"
          % (st, res))
    st, _ = srv.call("PUT", "/tables/p/documents/9999", {"body": "x", "tags": ["q1", "q2"]})
    rows = sql(srv, "SELECT tags FROM p WHERE id = 9999")
    check(st == 201 and rows == [["{q1,q2}"]], "keyword list stored: %s %s" % (st, rows))
    srv.call("DELETE", "/tables/p/documents/9999")


def call_h(srv, method, path, body=None, headers=None):
    return srv.call_h(method, path, body, headers)


APP, EVIL = "https://app.example", "https://evil.example"


def preflight(srv, origin, method="POST", path="/tables/p/search"):
    return call_h(srv, "OPTIONS", path, headers={
        "Origin": origin, "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": "content-type, authorization"})


def test_cors(dd):
    data = os.path.join(dd.path, "data")
    srv = Server(data, dd.path, config={"cors_origins": APP + ", https://other.example:8443"})
    try:
        st, _, h = preflight(srv, APP)
        check(st == 204 and h.get("access-control-allow-origin") == APP
              and "POST" in h.get("access-control-allow-methods", "")
              and "Content-Type" in h.get("access-control-allow-headers", "")
              and "Authorization" in h.get("access-control-allow-headers", ""),
              "preflight from a named origin: %s %s" % (st, h))
        st, _, h = preflight(srv, "https://other.example:8443", "PUT", "/tables/p/documents/1")
        check(st == 204 and "PUT" in h.get("access-control-allow-methods", ""),
              "preflight for PUT from the second origin: %s %s" % (st, h))
        st, body, h = preflight(srv, EVIL)
        check(st == 403 and "access-control-allow-origin" not in h
              and "cors_origins" in json.dumps(body), "preflight from another origin: %s %s %s"
              % (st, body, h))
        st, _, h = call_h(srv, "OPTIONS", "/tables/p/search")
        check(st == 204 and h.get("allow") == "GET, POST, HEAD, OPTIONS"
              and "access-control-allow-origin" not in h, "plain OPTIONS: %s %s" % (st, h))
        st, _, _ = call_h(srv, "OPTIONS", "/nothing/here", headers={"Origin": APP})
        check(st == 404, "OPTIONS on no endpoint: %s" % st)
        st, res, h = call_h(srv, "GET", "/tables/p/search?q=apple&limit=1", headers={"Origin": APP})
        check(st == 200 and h.get("access-control-allow-origin") == APP
              and "Origin" in h.get("vary", ""), "GET from a named origin: %s %s" % (st, h))
        st, res, h = call_h(srv, "GET", "/tables/p/search?q=apple", headers={"Origin": EVIL})
        check(st == 200 and "access-control-allow-origin" not in h,
              "GET from another origin has no CORS header: %s %s" % (st, h))
        st, res, h = call_h(srv, "POST", "/tables/p/search", {"q": "apple", "limit": 1},
                            headers={"Origin": APP})
        check(st == 200 and h.get("access-control-allow-origin") == APP and res["total"] > 0,
              "keyless POST from a named origin: %s %s" % (st, h))
        st, res, h = call_h(srv, "POST", "/tables/p/search", {"q": "apple"},
                            headers={"Origin": EVIL})
        check(st == 403 and "access-control-allow-origin" not in h,
              "keyless POST from another origin: %s %s" % (st, res))
        st, res, h = call_h(srv, "GET", "/tables/nope", headers={"Origin": APP})
        check(st == 404 and h.get("access-control-allow-origin") == APP,
              "an error carries the CORS header: %s %s" % (st, h))
    finally:
        srv.stop()
    for cfg in ({}, {"cors_origins": "*"}):  # off; "*" is not honoured without keys
        srv = Server(data, dd.path, config=cfg)
        try:
            st, _, h = preflight(srv, APP)
            check(st == 403 and "access-control-allow-origin" not in h,
                  "preflight with %s: %s %s" % (cfg, st, h))
            st, _, h = call_h(srv, "GET", "/tables/p/search?q=apple", headers={"Origin": APP})
            check(st == 200 and "access-control-allow-origin" not in h,
                  "GET with %s: %s %s" % (cfg, st, h))
        finally:
            srv.stop()


WSCHEMA = {"primary_key": "id", "fields": [
    {"name": "title", "type": "text", "language": "none"},
    {"name": "tags", "type": "keyword", "multi": True},
    {"name": "n", "type": "int"}]}


def get_doc(srv, i):
    st, d = srv.call("GET", "/tables/w/documents/%s" % i)
    return d if st == 200 else None


def test_array_ingest(srv):
    st, _ = srv.call("POST", "/tables", {"name": "w", "schema": WSCHEMA})
    check(st == 201, "create w: %s" % st)
    ds = [{"id": i, "title": "doc %d, with [brackets] {braces} \"quotes\" and \\ slash" % i,
           "tags": ["t%d" % (i % 3), "x,y"], "n": i, "meta": {"deep": [i, {"k": "]"}]}}
          for i in range(1, 8)]
    body = json.dumps(ds, indent=2)  # newlines between tokens
    st, res = srv.call("POST", "/tables/w/documents", body, {"Content-Type": "application/json"})
    check(st == 200 and res["imported"] == 7 and res["rejected"] == 0 and res["lines"] == 7,
          "JSON array ingest: %s %s" % (st, res))
    check(all(get_doc(srv, d["id"]) == d for d in ds), "array elements stored as sent")
    st, res = srv.call("GET", "/tables/w/search?q=brackets&limit=0")
    check(st == 200 and res["total"] == 7, "array documents searchable: %s" % res)

    gz = gzip.compress(json.dumps([{"id": 20, "title": "zipped"}, 5, {"id": 21, "n": "x"},
                                   {"id": 22, "title": "fine"}]).encode())
    st, res = srv.call("POST", "/tables/w/documents", gz, {
        "Content-Type": "application/json", "Content-Encoding": "gzip"})
    lines = sorted(e["line"] for e in res.get("errors", []))
    check(st == 200 and res["imported"] == 2 and res["rejected"] == 2 and lines == [2, 3],
          "gzip array with bad elements 2 and 3: %s %s" % (st, res))

    st, res = srv.call("POST", "/tables/w/documents", "[]", {"Content-Type": "application/json"})
    check(st == 200 and res["imported"] == 0 and res["rejected"] == 0, "empty array: %s %s"
          % (st, res))
    st, res = srv.call("POST", "/tables/w/documents", '[{"id": 30, "title": "a"}, {"id": 31, '
                       '"title": "b"}', {"Content-Type": "application/json"})
    check(st == 400 and "not closed" in res["error"]["message"] and res["acked"] == 1
          and get_doc(srv, 30) is not None and get_doc(srv, 31) is None,
          "unclosed array: %s %s" % (st, res))
    st, res = srv.call("POST", "/tables/w/documents", '[{"id": 32, "title": "a"}] {"id": 33}',
                       {"Content-Type": "application/json"})
    check(st == 400 and "after the end" in res["error"]["message"],
          "text after the array: %s %s" % (st, res))


def test_patch(srv):
    st, res = srv.call("PATCH", "/tables/w/documents/3", {"title": "patched words", "n": None,
                                                          "meta": {"deep": None, "new": 1}})
    want = {"id": 3, "title": "patched words", "tags": ["t0", "x,y"], "meta": {"new": 1}}
    check(st == 200 and res == {"id": 3, "patched": True}, "PATCH answer: %s %s" % (st, res))
    check(get_doc(srv, 3) == want, "patched document: %s" % get_doc(srv, 3))
    st, res = srv.call("POST", "/tables/w/search", {"q": "patched", "doc": False})
    check(res["total"] == 1 and res["hits"][0]["id"] == 3, "patch searchable: %s" % res)
    st, res = srv.call("POST", "/tables/w/search", {"q": "", "filter": "n IS NULL AND tags = 't0'",
                                                    "doc": False})
    check(st == 200 and [h["id"] for h in res["hits"]] == [3], "removed field is NULL: %s" % res)
    st, res = srv.call("PATCH", "/tables/w/documents/999", {"title": "x"})
    check(st == 404 and get_doc(srv, 999) is None, "PATCH of a missing document: %s %s"
          % (st, res))
    for bad in ([1, 2], {"id": 4}, {"id": None}, {"n": "text"}):
        st, res = srv.call("PATCH", "/tables/w/documents/3", bad)
        check(st in (400, 422) and get_doc(srv, 3) == want, "bad PATCH %s: %s %s"
              % (bad, st, res))
    st, _, h = srv.call_h("POST", "/tables/w/documents/3")
    check(st == 405 and "PATCH" in h.get("allow", ""), "Allow lists PATCH: %s %s" % (st, h))

    # concurrent patches of one document, each setting its own field: none lost
    fields = ["f%d" % k for k in range(16)]
    errs = []

    def patch(f):
        st, res = srv.call("PATCH", "/tables/w/documents/5", {f: f})
        if st != 200:
            errs.append((st, res))
    ts = [threading.Thread(target=patch, args=(f,)) for f in fields]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    d = get_doc(srv, 5) or {}
    check(not errs and all(d.get(f) == f for f in fields) and d.get("n") == 5,
          "16 concurrent patches all kept: %s %s" % (errs, d))


def test_rank(srv):
    st, allr = srv.call("POST", "/tables/p/search", {"q": "apple OR red", "limit": 10000})
    check(st == 200 and allr["total"] > 50, "every match: %s" % st)

    def brute(score, d):
        return score * math.log(1 + (d.get("views") or 0))
    # scores print with 6 digits: compare the order where ranks differ clearly
    want = sorted(allr["hits"], key=lambda h: -brute(h["score"], h["doc"]))
    st, res = srv.call("POST", "/tables/p/search", {"q": "apple OR red", "limit": 5,
                                                    "rank": "score * log(1 + views)",
                                                    "explain": True})
    ok = st == 200 and len(res["hits"]) == 5
    if check(ok, "rank search: %s %s" % (st, res)):
        got = [brute(allr_h["score"], allr_h["doc"]) for h in res["hits"]
               for allr_h in allr["hits"] if allr_h["id"] == h["id"]]
        exp = [brute(h["score"], h["doc"]) for h in want[:5]]
        check(all(math.isclose(g, e, rel_tol=1e-4) for g, e in zip(got, exp))
              and all(math.isclose(h["score"], g, rel_tol=1e-4) for h, g in zip(res["hits"], got)),
              "rank order and values %s, brute force %s" % (got, exp))
        rk = res["explain"]["rank"]
        check(res["explain"]["strategy"] == "rank" and not rk["exhaustive"]
              and rk["candidates"] < allr["total"], "pruned: %s of %d" % (rk, allr["total"]))
    st, g = srv.call("GET", "/tables/p/search?q=apple+OR+red&limit=5&rank=score*log(1%2Bviews)")
    check(st == 200 and [h["id"] for h in g["hits"]] == [h["id"] for h in res["hits"]],
          "GET rank equals POST: %s %s" % (st, g))
    st, e = srv.call("POST", "/tables/p/search", {"q": "apple", "rank": "score * nope"})
    check(st == 400 and e["error"].get("detail") == "in the rank expression"
          and e["error"].get("position") == 9, "unknown rank field: %s %s" % (st, e))
    st, e = srv.call("POST", "/tables/p/search", {"q": "apple", "rank": "score *"})
    check(st == 400 and e["error"]["code"] == "syntax_error", "rank syntax: %s %s" % (st, e))
    st, e = srv.call("POST", "/tables/p/search", {"q": "apple", "rank": "score", "sort": "views"})
    check(st == 400, "rank with sort: %s %s" % (st, e))


def strip_took(x):
    if isinstance(x, dict):
        return {k: strip_took(v) for k, v in x.items() if k != "took_ms"}
    if isinstance(x, list):
        return [strip_took(v) for v in x]
    return x


def test_multi(srv, key=None):
    h = {"Authorization": "Bearer " + key} if key else {}
    queries = [
        {"table": "p", "q": "apple", "limit": 3, "facets": [{"type": "cardinality", "field": "tags"}]},
        {"table": "w", "q": "brackets", "sort": "n:desc", "limit": 2, "doc": ["n"]},
        {"table": "nope", "q": "x"},
        {"table": "p", "q": "apple", "bogus": 1},
        {"q": "apple"},
        {"table": "p", "q": "(unclosed"},
    ]
    st, res = srv.call("POST", "/multi_search", {"queries": queries}, h)
    if not check(st == 200 and len(res.get("results", [])) == len(queries),
                 "multi-search: %s %s" % (st, res)):
        return
    for q, got in zip(queries, res["results"]):
        body = {k: v for k, v in q.items() if k != "table"}
        if "table" not in q:
            check(got.get("status") == 400 and "table" in got["error"]["message"],
                  "query without a table: %s" % got)
            continue
        st1, one = srv.call("POST", "/tables/%s/search" % q["table"], body, h)
        if st1 == 200:
            check(strip_took(got) == strip_took(one), "multi result %s equals the single search: "
                  "%s vs %s" % (q, got, one))
        else:
            check(got.get("status") == st1 and got.get("error") == one.get("error"),
                  "multi error %s equals the single one: %s vs %s %s" % (q, got, st1, one))
    st, res = srv.call("POST", "/multi_search", {"queries": [{"table": "p", "q": "a"}] * 65}, h)
    check(st == 413, "65 queries refused: %s" % st)
    st, res = srv.call("POST", "/multi_search", {"searches": []}, h)
    check(st == 400, "unknown key refused: %s %s" % (st, res))


def add_key(data, name, scope, *extra):
    out = subprocess.run([BIN, "key", "add", name, "--scope", scope, "--data", data] + list(extra),
                         capture_output=True, text=True, timeout=60)
    check(out.returncode == 0, "key add %s: %s" % (name, out.stderr))
    return out.stdout.strip()


def test_keys(dd):
    data = os.path.join(dd.path, "data")
    admin = add_key(data, "admin", "admin")
    kp = add_key(data, "web_p", "search", "--tables", "p")
    kw = add_key(data, "writer_w", "write", "--tables", "w,other")
    old = add_key(data, "old", "search", "--expires", "2020-01-01")
    soon = add_key(data, "soon", "search", "--expires", "+1d")
    out = subprocess.run([BIN, "key", "list", "--data", data], capture_output=True, text=True,
                         timeout=60)
    check("web_p\tsearch\ttables=p\n" in out.stdout and "admin\tadmin\n" in out.stdout
          and "old\tsearch\texpires=2020-01-01T00:00:00Z\n" in out.stdout,
          "key list shows limits: %s" % out.stdout)
    bad = subprocess.run([BIN, "key", "add", "x", "--tables", "no-good", "--data", data],
                         capture_output=True, text=True, timeout=60)
    check(bad.returncode != 0 and "no-good" in bad.stderr, "bad table name refused: %s"
          % bad.stderr)
    bad = subprocess.run([BIN, "key", "add", "x", "--expires", "tomorrow", "--data", data],
                         capture_output=True, text=True, timeout=60)
    check(bad.returncode != 0 and "--expires" in bad.stderr, "bad expiry refused: %s" % bad.stderr)
    srv = Server(data, dd.path)
    try:
        def call(key, method, path, body=None):
            return srv.call(method, path, body, {"Authorization": "Bearer " + key})
        st, res = call(kp, "GET", "/tables/p/search?q=apple&limit=1")
        check(st == 200 and res["total"] > 0, "table key on its table: %s" % st)
        for method, path, body in (("GET", "/tables/w/search?q=doc", None),
                                   ("GET", "/tables/w/documents/1", None),
                                   ("GET", "/tables", None),
                                   ("POST", "/sql", {"query": "SELECT 1"})):
            st, res = call(kp, method, path, body)
            check(st == 403 and "web_p" in res["error"]["message"],
                  "table key on %s %s: %s %s" % (method, path, st, res))
        st, res = call(kw, "PATCH", "/tables/w/documents/2", {"n": 200})
        check(st == 200, "write key on its table: %s %s" % (st, res))
        st, res = call(kw, "PUT", "/tables/p/documents/5000", {"body": "x"})
        check(st == 403, "write key on another table: %s %s" % (st, res))
        st, res = call(kp, "POST", "/multi_search", {"queries": [
            {"table": "p", "q": "apple", "limit": 0}, {"table": "w", "q": "doc"}]})
        r = res.get("results", [{}, {}])
        check(st == 200 and r[0].get("total", 0) > 0 and r[1].get("status") == 403,
              "multi-search checks each table against the key: %s %s" % (st, res))
        st, res = call(old, "GET", "/tables/p/search?q=apple")
        check(st == 401 and "expired" in res["error"]["message"], "expired key: %s %s"
              % (st, res))
        st, res = call(soon, "GET", "/tables/p/search?q=apple")
        check(st == 200, "key expiring tomorrow: %s %s" % (st, res))
        st, res = call(admin, "GET", "/tables")
        check(st == 200, "unlimited admin key: %s" % st)
        test_multi(srv, admin)
    finally:
        srv.stop()


ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def test_openapi(srv):
    st, body, h = srv.call_h("GET", "/openapi.yaml")
    with open(os.path.join(ROOT, "docs", "openapi.yaml")) as f:
        text = f.read()
    check(st == 200 and body == text and h.get("content-type", "").startswith("application/yaml"),
          "GET /openapi.yaml serves docs/openapi.yaml: %s %s" % (st, h))
    doc = yaml.safe_load(text)
    with open(os.path.join(ROOT, "src", "server", "http.c")) as f:
        routes = re.findall(r'\{HM_(\w+), "(/[^"]*)"', f.read())
    with open(os.path.join(ROOT, "docs", "http-api.md")) as f:
        manual = f.read()
    check(len(routes) > 20, "routes read from http.c: %d" % len(routes))
    for method, path in routes:
        if path.startswith("/admin") or path == "/":
            continue
        check(method.lower() in doc["paths"].get(path, {}),
              "openapi.yaml has %s %s" % (method, path))
        check("| %s | `%s` |" % (method, path) in manual, "http-api.md lists %s %s" % (method, path))


def main():
    rng = random.Random(int(os.environ.get("SEED", "19")))
    with DataDir() as dd:
        srv = Server(os.path.join(dd.path, "data"), dd.path)
        try:
            check(srv.port is not None, "server started")
            load(srv, rng)
            test_facets(srv)
            test_rank(srv)
            test_array_ingest(srv)
            test_patch(srv)
            test_multi(srv)
            test_openapi(srv)
        finally:
            srv.stop()
        test_cors(dd)
        test_keys(dd)
    finish()


if __name__ == "__main__":
    main()
