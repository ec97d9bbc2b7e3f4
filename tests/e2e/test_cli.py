"""End to end through the real `quarry` binary: import (schema given and
inferred), bad lines with line numbers, upserts, deletes, and search results
compared with a brute-force evaluation of the same queries in Python.

Fields use language "none" so that the oracle's tokenizer (lowercase ASCII
words) is exactly the engine's."""
import json
import os
import random
import re

from qtest import DataDir, check, finish, run, write_jsonl

rng = random.Random(20261129)
SYL = ["ka", "lo", "mi", "ter", "sun", "ra", "ven", "do", "pix", "quo", "zel", "an", "bro"]
VOCAB = sorted({"".join(rng.choice(SYL) for _ in range(rng.randint(1, 3))) for _ in range(400)})
WEIGHTS = [1.0 / (i + 1) ** 1.05 for i in range(len(VOCAB))]

SCHEMA = {
    "primary_key": "id",
    "fields": [
        {"name": "title", "type": "text", "language": "none"},
        {"name": "body", "type": "text", "language": "none"},
        {"name": "views", "type": "int"},
    ],
}


def words(n):
    return rng.choices(VOCAB, WEIGHTS, k=n)


def make_doc(i):
    return {"id": i if i % 3 else "doc-%d" % i,
            "title": " ".join(words(rng.randint(1, 6))),
            "body": ", ".join(" ".join(words(rng.randint(2, 8))) for _ in range(rng.randint(1, 6))) + ".",
            "views": rng.randint(0, 10**6)}


def toks(text):
    return re.findall(r"[a-z0-9]+", text.lower())


class Oracle:
    def __init__(self):
        self.docs = {}

    def put(self, d):
        key = json.dumps(d["id"])
        self.docs[key] = {"title": toks(d.get("title", "")), "body": toks(d.get("body", "")),
                          "views": d.get("views")}

    def delete(self, idj):
        self.docs.pop(idj, None)

    def eval(self, q):
        """q is a (kind, ...) tuple mirroring the generated query."""
        return {k for k, d in self.docs.items() if self.match(q, d)}

    def match(self, q, d):
        kind = q[0]
        if kind == "term":
            _, field, w = q
            fs = [field] if field else ["title", "body"]
            return any(w in d[f] for f in fs)
        if kind == "prefix":
            return any(t.startswith(q[1]) for f in ("title", "body") for t in d[f])
        if kind == "phrase":
            ws = q[1]
            for f in ("title", "body"):
                t = d[f]
                for i in range(len(t) - len(ws) + 1):
                    if t[i:i + len(ws)] == ws:
                        return True
            return False
        if kind == "or":
            return any(self.match(x, d) for x in q[1])
        if kind == "and":
            return all(self.match(x, d) for x in q[1])
        if kind == "andnot":
            return self.match(q[1], d) and not self.match(q[2], d)
        raise ValueError(kind)


def gen_query():
    """Returns (query text, oracle tuple)."""
    r = rng.random()
    w = words(3)
    if r < 0.2:
        return w[0], ("term", None, w[0])
    if r < 0.3:
        return "title:" + w[0], ("term", "title", w[0])
    if r < 0.45:
        return w[0] + " " + w[1], ("or", [("term", None, w[0]), ("term", None, w[1])])
    if r < 0.6:
        return w[0] + " AND " + w[1], ("and", [("term", None, w[0]), ("term", None, w[1])])
    if r < 0.7:
        return "+%s -%s" % (w[0], w[1]), ("andnot", ("term", None, w[0]), ("term", None, w[1]))
    if r < 0.8:
        return '"%s %s"' % (w[0], w[1]), ("phrase", [w[0], w[1]])
    if r < 0.9:
        p = w[0][:2]
        return p + "*", ("prefix", p)
    return "(%s OR %s) AND %s" % (w[0], w[1], w[2]), (
        "and", [("or", [("term", None, w[0]), ("term", None, w[1])]), ("term", None, w[2])])


def ids_of(data, queries):
    """All matching ids per query through `quarry bench` (ids mode, one run)."""
    qfile = os.path.join(data, "..", "q-%d.jsonl" % rng.randint(0, 10**9))
    with open(qfile, "w") as f:
        for i, q in enumerate(queries):
            f.write(json.dumps({"qid": i, "q": q, "mode": "ids"}) + "\n")
    rc, out, err = run(["bench", "t", "--queries", qfile, "--repeat", "1"], data)
    os.unlink(qfile)
    check(rc == 0, "bench ids ran (rc %d): %s" % (rc, err[-300:]))
    res = {}
    for line in out.splitlines():
        o = json.loads(line)
        if "error" in o:
            res[o["qid"]] = None
        else:
            res[o["qid"]] = {json.dumps(x) for x in o["ids"]}
    return res


def compare(data, oracle, n):
    qs = [gen_query() for _ in range(n)]
    got = ids_of(data, [q for q, _ in qs])
    bad = 0
    for i, (q, t) in enumerate(qs):
        want = oracle.eval(t)
        if got.get(i) != want:
            bad += 1
            if bad <= 5:
                g = got.get(i)
                print("mismatch for %r: engine %s, oracle %d (missing %s, extra %s)" % (
                    q, "error" if g is None else len(g), len(want),
                    sorted(want - (g or set()))[:5], sorted((g or set()) - want)[:5]))
    check(bad == 0, "%d of %d queries disagree with brute force" % (bad, n))
    # counts and ranked output agree with the id sets
    for q, t in qs[:20]:
        rc, out, _ = run(["search", "t", q, "--count"], data)
        check(rc == 0 and int(out.strip()) == len(oracle.eval(t)), "count of %r" % q)


def pk_key(idj):
    v = json.loads(idj)
    return (0, v, b"") if isinstance(v, int) else (1, 0, v.encode())


def filters_and_sorts(data, oracle):
    """--filter, --sort and --after against brute force; errors point into the filter."""
    for _ in range(12):
        lo = rng.randint(0, 10**6)
        hi = lo + rng.randint(0, 200000)
        w = words(1)[0]
        flt = "views BETWEEN %d AND %d" % (lo, hi)
        want = {k for k, d in oracle.docs.items() if lo <= d["views"] <= hi}
        rc, out, err = run(["search", "t", "--filter", flt, "--count"], data)
        check(rc == 0 and int(out) == len(want), "--filter count %s: %s vs %d" % (flt, out.strip(),
                                                                                  len(want)))
        want_t = {k for k in want if w in oracle.docs[k]["title"] or w in oracle.docs[k]["body"]}
        rc, out, err = run(["search", "t", w, "--filter", flt, "--json", "--limit", "100000",
                            "--access-path", rng.choice(["scan", "check", "btree", "auto"])],
                           data)
        got = {json.dumps(json.loads(l)["id"]) for l in out.splitlines()}
        check(rc == 0 and got == want_t, "text + --filter ids (%d vs %d)" % (len(got),
                                                                          len(want_t)))
    # sorted by a column without a query, every page through --after
    want = sorted((k for k, d in oracle.docs.items() if d["views"] < 300000), key=pk_key)
    want.sort(key=lambda k: -oracle.docs[k]["views"])
    got, after = [], None
    for _ in range(1000):
        args = ["search", "t", "--filter", "views < 300000", "--sort", "views:desc", "--json",
                "--limit", "250"]
        rc, out, err = run(args + (["--after", after] if after else []), data)
        hits = [json.loads(l) for l in out.splitlines()]
        if rc != 0 or not hits:
            break
        got += [json.dumps(h["id"]) for h in hits]
        after = json.dumps(hits[-1]["sort"])
    check(got == want, "--sort views:desc paged with --after: %d of %d in order" % (len(got),
                                                                                   len(want)))
    rc, out, err = run(["search", "t", "--sort", "views", "--limit", "3"], data)
    check(rc == 0 and "%d matches" % len(oracle.docs) in out, "--sort without a query: " + out)
    # errors point into the filter text
    rc, out, err = run(["search", "t", "x", "--filter", "views >= 10 AND viewz < 3"], data)
    check(rc == 1 and 'column "viewz" does not exist' in err and
          "QUERY:  views >= 10 AND viewz < 3\n" + " " * 8 + " " * 16 + "^" in err,
          "unknown filter column with a caret: " + err)
    rc, out, err = run(["search", "t", "x", "--filter", "views > 'many'"], data)
    check(rc == 1 and "ERROR" in err and "^" in err, "bad literal is an error: " + err)
    rc, out, err = run(["search", "t", "x", "--sort", "title"], data)
    check(rc == 1 and "full-text" in err, "sort by a text field is refused: " + err)


def cli_keys(work, data):
    """`quarry get` / `delete` read a key as the HTTP API does: digits are an
    integer, "quoted" a string, anything else the string itself, never a prefix
    of the text ('12abc' once deleted document 12; '0ad-data' was not found)."""
    src = os.path.join(work, "keys.jsonl")
    write_jsonl(src, [{"id": 12, "title": "twelve"}, {"id": 13, "title": "thirteen"}])
    run(["import", "ints", src], data)
    write_jsonl(src, [{"id": "0ad-data", "title": "data"}, {"id": "0ad", "title": "game"},
                      {"id": "0042", "title": "digits"}])
    run(["import", "pkgs", src], data)
    rc, out, err = run(["delete", "ints", "12abc"], data)
    check(rc == 0 and "deleted 0 of 1" in out, "delete ints 12abc deletes nothing: " + out + err)
    rc, out, err = run(["get", "ints", "12"], data)
    check(rc == 0 and json.loads(out)["title"] == "twelve", "document 12 is still there: " + out + err)
    rc, out, err = run(["get", "pkgs", "0ad-data"], data)
    check(rc == 0 and json.loads(out)["title"] == "data", "get pkgs 0ad-data finds it: " + out + err)
    rc, out, err = run(["get", "pkgs", '"0042"'], data)
    check(rc == 0 and json.loads(out)["title"] == "digits", "a quoted key keeps its digits a string")
    rc, out, err = run(["delete", "ints", "13", "99999999999999999999"], data)
    check(rc == 1 and "out of the integer range" in err, "a key out of range is an error: " + err)
    rc, out, err = run(["get", "ints", "13"], data)
    check(rc == 0, "a bad key in the list deletes nothing")


def infer_from_all_values(tmp, data):
    """Inference counts every sampled value: one string among numbers keeps the field
    numeric (that line alone is rejected, naming the field), and a short repeating label
    becomes text with a keyword column: searchable, filterable and groupable."""
    src = os.path.join(tmp, "infer.jsonl")
    cats = ["sports", "politics", "science"]
    with open(src, "w") as f:
        for i in range(1, 61):
            price = "n/a" if i == 7 else i * 10
            f.write(json.dumps({"id": i, "price": price, "cat": cats[i % 3],
                                "title": "story %d about %s" % (i, cats[i % 3])}) + "\n")
    rc, out, err = run(["import", "inf", src], data)
    check(rc == 3 and "imported 59, replaced 0, rejected 1 of 60 lines" in err,
          "one odd value among numbers: only its line rejected: " + err[-300:])
    check('line 7: field "price" expects an integer, got a string' in err,
          "the rejected line names the field: " + err[-600:])
    check("price: int: 59 of 60 sampled values are integers" in err and
          "cat: text and keyword column" in err and "title: text: 60 of 60" in err,
          "the printed schema says why: " + err[-600:])
    rc, out, err = run(["schema", "inf"], data)
    fields = {f["name"]: f for f in json.loads(out)["fields"]}
    check(fields["price"]["type"] == "int" and fields["cat"]["type"] == "text" and
          fields["cat"].get("column") is True and not fields["title"].get("column"),
          "inferred fields: %s" % fields)
    rc2, out2, err2 = run(["search", "inf", "cat:sports", "--filter", "cat = 'sports'",
                           "--count"], data)
    check(rc2 == 0 and out2.split()[0] == "20", "keyword field searchable and filterable: %s %s"
          % (out2, err2))
    rc, out, err = run(["sql", "-c", "SELECT cat, count(*) FROM inf GROUP BY cat ORDER BY cat",
                        "--format", "csv"], data)
    check(rc == 0 and out.split() == ["cat,count", "politics,19", "science,20", "sports,20"],
          "keyword field groups: %r" % out)


def main():
    with DataDir() as dd:
        data = os.path.join(dd.path, "data")
        src = os.path.join(dd.path, "docs.jsonl")
        schema = os.path.join(dd.path, "schema.json")
        with open(schema, "w") as f:
            json.dump(SCHEMA, f)
        docs = [make_doc(i) for i in range(3000)]
        lines = [json.dumps(d) for d in docs]
        # bad lines at known positions (1-based line numbers)
        lines.insert(10, "{not json")
        lines.insert(20, json.dumps({"title": "no id here"}))
        lines.insert(30, json.dumps({"id": 99999, "views": "many"}))
        write_jsonl(src, lines)
        rc, out, err = run(["import", "t", src, "--schema", schema, "--batch", "700"], data)
        check(rc == 3, "import with rejected lines exits 3 (got %d)" % rc)
        for ln, what in ((11, "invalid JSON"), (21, "primary key"), (31, "views")):
            check(re.search(r"line %d: .*%s" % (ln, re.escape(what)), err) is not None,
                  "line %d reported (%s) in: %s" % (ln, what, err[:500]))
        check("imported 3000, replaced 0, rejected 3 of 3003 lines" in err,
              "summary counts: " + err.strip().splitlines()[-1])
        oracle = Oracle()
        for d in docs:
            oracle.put(d)
        compare(data, oracle, 150)

        # strict mode stops at the first bad line
        rc, out, err = run(["import", "t2", src, "--schema", schema, "--strict"], data)
        check(rc == 1 and "line 11" in err, "--strict aborts at line 11 (rc %d)" % rc)

        # upserts: re-import 500 docs with new text; deletes
        changed = []
        for d in rng.sample(docs, 500):
            d2 = make_doc(0)
            d2["id"] = d["id"]
            changed.append(d2)
            oracle.put(d2)
        write_jsonl(src, changed)
        rc, out, err = run(["import", "t", src, "--batch", "123"], data)
        check(rc == 0 and "imported 0, replaced 500, rejected 0" in err,
              "re-import replaces: " + err.strip()[-200:])
        gone = rng.sample(sorted(oracle.docs), 200)
        rc, out, err = run(["delete", "t"] + gone[:100], data)
        check(rc == 0 and "deleted 100 of 100" in out, "delete by id: " + out + err)
        rc, out, err = run(["delete", "t"] + gone[100:], data)
        for g in gone:
            oracle.delete(g)
        rc, out, err = run(["get", "t", gone[0]], data)
        check(rc == 1 and "does not exist" in err, "deleted doc is gone")
        probe = changed[0]
        rc, out, err = run(["get", "t", json.dumps(probe["id"])], data)
        if json.dumps(probe["id"]) in oracle.docs:
            check(rc == 0 and json.loads(out)["title"] == probe["title"], "get returns new version")
        compare(data, oracle, 150)

        # merging keeps every answer
        rc, out, err = run(["merge", "t"], data)
        check(rc == 0 and "1 segment" in out, "merge into one segment: " + out + err)
        compare(data, oracle, 100)
        rc, out, err = run(["stats", "t"], data)
        st = json.loads(out)
        check(st["docs"] == len(oracle.docs), "stats docs %s == %d" % (st["docs"], len(oracle.docs)))
        rc, out, err = run(["check"], data)
        check(rc == 0 and "t: ok" in out, "check passes: " + out)
        cols = {c["name"]: c for c in st.get("columns", [])}
        vs = [d["views"] for d in oracle.docs.values()]
        cv = cols.get("views", {})
        check(cv.get("type") == "int64" and cv.get("rows") == len(oracle.docs) and
              cv.get("nulls") == 0 and cv.get("min") == min(vs) and cv.get("max") == max(vs) and
              cv.get("distinct_min") == len(set(vs)) and
              abs(cv.get("distinct_hll", 0) - len(set(vs))) <= 0.1 * len(set(vs)),
              "stats: per-column statistics of views: %s" % (cv,))
        filters_and_sorts(data, oracle)

        # inferred schema
        rc, out, err = run(["import", "inferred", src], data)
        check(rc == 0 and "inferred schema" in err and '"views"' in err, "schema inferred")
        rc, out, err = run(["schema", "inferred"], data)
        sc = json.loads(out)
        types = {f["name"]: f["type"] for f in sc["fields"]}
        check(types == {"title": "text", "body": "text", "views": "int"}, "inferred types %s" % types)
        infer_from_all_values(dd.path, data)

        cli_keys(dd.path, data)
        # errors
        rc, out, err = run(["search", "t", "(unbalanced"], data)
        check(rc == 1 and "ERROR" in err and "^" in err, "syntax error with caret: " + err)
        rc, out, err = run(["search", "nosuch", "x"], data)
        check(rc == 1 and "does not exist" in err, "unknown table")
        rc, out, err = run(["import", "../evil", src], data)
        check(rc == 1 and "invalid table name" in err, "table name validated: " + err)
        rc, out, err = run(["search", "t", "x", "--limit", "abc"], data)
        check(rc == 2, "bad option value is a usage error")
    finish()


main()
