"""The HTTP search as a search box would use it (issue 19), through the real
server: typo tolerance on by default, checked against a brute-force edit
distance over the words written into the table (a stemmed field, so a typo
must reach the word as written, not its stem); the last word completed as it
is typed; exact words ranked above their typo variants; the table's and the
request's settings; synonyms from the schema and from PUT
/tables/{t}/synonyms, in HTTP, SQL and EXPLAIN (SCORES), after a restart;
schema field weights; highlights of several fields in fragments; elision,
single CJK characters and custom stop words; bad parameters are 400 with a
JSON error.

The brute force knows the words it wrote but not the stemmer: the documents
of one word form are what the exact search finds for it (typo=off,
prefix=false, itself checked against brute force in test_http.py), and the
oracle unions them over the forms within the allowed edits."""
import json
import random
import urllib.parse

from qserve import Server
from qtest import DataDir, check, finish

rng = random.Random(19)
SYL = ["ka", "lo", "ter", "min", "al", "dat", "ab", "se", "lib", "rar", "con", "sol",
       "ve", "nor", "pi", "qu", "est", "ro"]
SUFFIX = ["", "", "", "s", "ing", "ed", "er"]
NDJSON = {"Content-Type": "application/x-ndjson"}


def osa(a, b):
    """Edit distance with adjacent transpositions (optimal string alignment)."""
    d = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        d[i][0] = i
    for j in range(len(b) + 1):
        d[0][j] = j
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


def allowed_edits(mode, n):
    """Edits a word of n letters may have: auto one from 5, two from 9."""
    if mode == "auto":
        return 2 if n >= 9 else 1 if n >= 5 else 0
    if mode == "1":
        return 1 if n >= 3 else 0
    if mode == "2":
        return 2 if n >= 5 else 1 if n >= 3 else 0
    return 0


def garble(w, k):
    w = list(w)
    for _ in range(k):
        at = rng.randrange(len(w))
        c = rng.choice("abcdefghijklmnopqrstuvwxyz")
        op = rng.randrange(4)
        if op == 0:
            w.insert(at, c)
        elif op == 1 and len(w) > 2:
            del w[at]
        elif op == 2:
            w[at] = c
        elif at + 1 < len(w):
            w[at], w[at + 1] = w[at + 1], w[at]
    return "".join(w)


def search(srv, table, q, **params):
    """GET search -> (status, body); params as the query string has them."""
    qs = dict({"q": q, "limit": 1000, "doc": "false"}, **params)
    return srv.call("GET", "/tables/%s/search?%s" % (table, urllib.parse.urlencode(qs)))


def ids(srv, table, q, **params):
    st, body = search(srv, table, q, **params)
    if st != 200:
        return "status %d: %s" % (st, body)
    return sorted(h["id"] for h in body["hits"])


def sql(srv, query):
    st, body = srv.call("POST", "/sql", {"query": query})
    return body["rows"] if st == 200 else "status %d: %s" % (st, body)


class Oracle:
    """Exact documents of each word form, asked once."""

    def __init__(self, srv, table, vocab):
        self.srv, self.table, self.vocab, self.cache = srv, table, vocab, {}

    def exact(self, w):
        if w not in self.cache:
            got = ids(self.srv, self.table, w, typo="off", prefix="false")
            self.cache[w] = set(got) if isinstance(got, list) else set()
        return self.cache[w]

    def typo_forms(self, q, mode):
        e = allowed_edits(mode, len(q))
        # the first letter is never a typo
        return [v for v in self.vocab if e and abs(len(v) - len(q)) <= e and v[:1] == q[:1]
                and osa(q[1:], v[1:]) <= e]

    def prefix_forms(self, q):
        return [v for v in self.vocab if v.startswith(q)]

    def union(self, q, forms):
        out = set(self.exact(q))
        for v in forms:
            out |= self.exact(v)
        return sorted(out)


def test_typos_and_prefixes(srv):
    srv.call("POST", "/tables", {"name": "w", "schema": {"primary_key": "id", "fields": [
        {"name": "title", "type": "text", "language": "english", "weight": 2},
        {"name": "body", "type": "text", "language": "english"}]}})
    bases = sorted({"".join(rng.choice(SYL) for _ in range(rng.randint(2, 4))) for _ in range(90)})
    vocab, lines = set(), []
    for i in range(300):
        words = [rng.choice(bases) + rng.choice(SUFFIX) for _ in range(8)]
        vocab.update(words)
        lines.append(json.dumps({"id": i, "title": " ".join(words[:2]),
                                 "body": " ".join(words[2:])}))
    st, _ = srv.call("POST", "/tables/w/documents", "\n".join(lines), NDJSON)
    check(st == 200, "ingest into w")
    o = Oracle(srv, "w", sorted(vocab))
    checked = variants = 0
    # half the words around the lengths where the allowed edits change
    edges = [v for v in sorted(vocab) if len(v) in (4, 5, 6, 8, 9, 10)]
    for k in range(150):
        mode = ["auto", "1", "2", None][k % 4]   # None: the table's (auto)
        q = garble(rng.choice(edges if k % 8 < 4 else sorted(vocab)), rng.randrange(3))
        forms = o.typo_forms(q, mode or "auto")
        if len(forms) > 100:
            continue   # past max_expansions the best are kept: not this test's
        want = o.union(q, forms)
        params = {"prefix": "false"}
        if mode:
            params["typo"] = mode
        got = ids(srv, "w", q, **params)
        check(got == want, "typo %s %r (%d forms within %d edits): %s, want %s" % (
            mode or "default", q, len(forms), allowed_edits(mode or "auto", len(q)), got, want))
        checked += 1
        variants += bool(set(want) - o.exact(q))
    check(checked > 120 and variants > 30,
          "typos: %d queries checked, %d found more than the exact word" % (checked, variants))
    # at the edges of auto: 4 letters none, 5 one, 8 one, 9 two (substitutions keep the length)
    edge_cases = 0
    for n, subs in ((4, 1), (5, 1), (8, 1), (8, 2), (9, 2)):
        for w in [v for v in sorted(vocab) if len(v) == n][:6]:
            q = list(w)
            for at in rng.sample(range(1, n), subs):
                q[at] = "z" if q[at] != "z" else "x"
            q = "".join(q)
            forms = o.typo_forms(q, "auto")
            want = o.union(q, forms)
            got = ids(srv, "w", q, prefix="false")
            check(got == want and (w in forms) == (subs <= allowed_edits("auto", n)),
                  "auto at %d letters, %d edits: %r -> %s, want %s" % (n, subs, q, got, want))
            edge_cases += 1
    check(edge_cases >= 20, "%d typo cases at the edges of auto" % edge_cases)
    # as you type: the last word completes (by default), only the last
    done = 0
    for k in range(60):
        w = rng.choice(sorted(vocab))
        q = w[:rng.randint(2, len(w))]
        comp = o.prefix_forms(q)
        if len(comp) > 100:
            continue
        typos = o.typo_forms(q, "auto")
        want = o.union(q, comp + typos)
        got = ids(srv, "w", q)   # the search box's defaults: typo auto, prefix on
        check(got == want, "default search %r (%d completions, %d typo forms): %s, want %s" % (
            q, len(comp), len(typos), got, want))
        check(ids(srv, "w", q, typo="off") == o.union(q, comp),
              "completions of %r, typo off" % q)
        check(ids(srv, "w", q, typo="off", prefix="false") == sorted(o.exact(q)),
              "%r exact with prefix=false" % q)
        other = rng.choice(sorted(vocab))
        check(ids(srv, "w", q + " " + other, typo="off") ==
              sorted(o.exact(q) | set(o.union(other, o.prefix_forms(other)))),
              "only the last word of %r completes" % (q + " " + other))
        done += 1
    check(done > 40, "prefixes: %d queries checked" % done)


def test_stemmed_typos_and_ranking(srv):
    """databse~1 and a typo-tolerant databse reach "database" through the word
    as written (its stem "databas" is two edits away); exact words first."""
    srv.call("POST", "/tables", {"name": "r", "schema": {"primary_key": "id", "fields": [
        {"name": "title", "type": "text", "language": "english", "weight": 2},
        {"name": "body", "type": "text", "language": "english"}]}})
    docs = [{"id": 1, "title": "a database", "body": "rows"},
            {"id": 2, "title": "databases", "body": "of rows"},
            {"id": 3, "title": "library", "body": "books"},
            {"id": 4, "title": "terminal", "body": "emulator"},
            {"id": 5, "title": "terminals", "body": "consoles"}]
    docs += [{"id": 10 + i, "title": "keyboard", "body": "k%d" % i} for i in range(3)]
    docs += [{"id": 20 + i, "title": "keybaord", "body": "k%d" % i} for i in range(8)]
    srv.call("POST", "/tables/r/documents", "\n".join(json.dumps(d) for d in docs), NDJSON)
    check(ids(srv, "r", "database", typo="off") == [1, 2], "database (stemmed) finds both")
    check(ids(srv, "r", "databse~1", typo="off", prefix="false") == [1, 2],
          "databse~1 finds what database finds: %s" % ids(srv, "r", "databse~1", typo="off"))
    check(ids(srv, "r", "databse") == [1, 2], "databse finds database by default")
    check(ids(srv, "r", "libary") == [3], "libary finds library by default")
    check(ids(srv, "r", "libary", typo="off") == [], "typo=off: libary finds nothing")
    check(ids(srv, "r", "kibrary", typo="2") == [], "the first letter is never a typo")
    check(ids(srv, "r", "kibrary~1", typo="off") == [3], "but ~1 finds library from kibrary")
    check(ids(srv, "r", "termi") == [4, 5], "termi completes to terminal(s) as you type")
    check(ids(srv, "r", "termina") == [4, 5], "termina completes too")
    check(ids(srv, "r", "termi", prefix="false") == [], "prefix=false: termi finds nothing")
    st, body = search(srv, "r", "keyboard")
    order = [h["id"] for h in body["hits"]]
    check(st == 200 and sorted(order[:3]) == [10, 11, 12] and len(order) == 11,
          "exact keyboard above its eight typo variants: %s" % order)
    st, body = search(srv, "r", "keybaord")
    order = [h["id"] for h in body["hits"]]
    check(st == 200 and sorted(order[:8]) == list(range(20, 28)) and len(order) == 11,
          "exact keybaord above keyboard: %s" % order)
    # field weights of the schema drive the default search, under both scorings
    srv.call("POST", "/tables/r/documents",
             json.dumps({"id": 30, "title": "zebra", "body": "stripes"}) + "\n" +
             json.dumps({"id": 31, "title": "stripes", "body": "zebra"}), NDJSON)
    for scoring in ("bm25f", "sum"):
        st, body = search(srv, "r", "zebra", scoring=scoring)
        order = [h["id"] for h in body["hits"]]
        check(st == 200 and order == [30, 31],
              "title weight 2 ranks the title match first (scoring=%s): %s" % (scoring, order))
    # a table's own typo setting, and SQL's exact default
    srv.call("POST", "/tables", {"name": "x", "schema": {
        "primary_key": "id", "typo_tolerance": "off",
        "fields": [{"name": "body", "type": "text", "language": "english"}]}})
    srv.call("POST", "/tables/x/documents", json.dumps({"id": 1, "body": "library"}), NDJSON)
    st, desc = srv.call("GET", "/tables/x")
    check(st == 200 and desc["schema"].get("typo_tolerance") == "off",
          "the table's typo_tolerance is in its schema: %s" % desc.get("schema"))
    check(ids(srv, "x", "libary") == [], "typo_tolerance off: libary finds nothing")
    check(ids(srv, "x", "libary", typo="auto") == [1], "typo=auto asks for it per request")
    check(sql(srv, "SELECT id FROM r WHERE r @@ 'libary'") == [],
          "SQL stays exact: %s" % sql(srv, "SELECT id FROM r WHERE r @@ 'libary'"))
    check(sql(srv, "SET quarry.typo_tolerance = auto; SELECT id FROM r WHERE r @@ 'libary'")
          == [[3]], "SQL with quarry.typo_tolerance = auto finds library")
    check(sql(srv, "SELECT id FROM r WHERE r @@ 'termi'") == [], "SQL does not complete")
    check(sql(srv, "SET quarry.prefix_search = on; SELECT id FROM r WHERE r @@ 'termi' "
                   "ORDER BY id") == [[4], [5]], "SQL with quarry.prefix_search = on completes")


def test_synonyms(srv, data, workdir):
    st, _ = srv.call("POST", "/tables", {"name": "s", "schema": {
        "primary_key": "id", "synonyms": [["tty", "terminal"]],
        "fields": [{"name": "body", "type": "text", "language": "english"}]}})
    check(st == 201, "a table with synonyms in its schema")
    docs = ["tty console", "terminal emulator", "new york city", "nyc subway",
            "york minster", "new books", "teletype"]
    srv.call("POST", "/tables/s/documents", "\n".join(
        json.dumps({"id": i + 1, "body": b}) for i, b in enumerate(docs)), NDJSON)
    exact = {"typo": "off", "prefix": "false"}
    check(ids(srv, "s", "tty", **exact) == [1, 2], "tty finds terminal (group)")
    check(ids(srv, "s", "terminal", **exact) == [1, 2], "terminal finds tty (group)")
    check(ids(srv, "s", "tty", synonyms="false", **exact) == [1], "synonyms=false: tty only")
    check(sql(srv, "SELECT id FROM s WHERE body @@ 'tty' ORDER BY id") == [[1], [2]],
          "SQL applies the synonyms")
    rows = sql(srv, "EXPLAIN (SCORES) SELECT id FROM s WHERE body @@ 'tty'")
    src = sorted({(r[2], r[-1]) for r in rows}) if isinstance(rows, list) else rows
    check(src == [("termin", "synonym"), ("tti", "query")],
          "EXPLAIN (SCORES) shows the synonym's term: %s" % (src,))
    # PUT replaces them: one-way, several words
    st, body = srv.call("PUT", "/tables/s/synonyms", {"synonyms": {"nyc": ["new york"],
                                                                  "tty": ["teletype"]}})
    check(st == 200 and body == {"synonyms": {"nyc": ["new york"], "tty": ["teletype"]}},
          "PUT synonyms answers them: %s %s" % (st, body))
    st, body = srv.call("GET", "/tables/s/synonyms")
    check(st == 200 and body["synonyms"] == {"nyc": ["new york"], "tty": ["teletype"]},
          "GET synonyms: %s" % body)
    check(ids(srv, "s", "nyc", **exact) == [3, 4], "nyc finds the phrase new york, not york")
    check(ids(srv, "s", "\"new york\"", **exact) == [3], "one-way: new york does not find nyc")
    check(ids(srv, "s", "tty", **exact) == [1, 7], "tty finds teletype, no longer terminal")
    check(ids(srv, "s", "terminal", **exact) == [2], "the group is gone")
    for bad in ({"synonyms": 3}, {"synonyms": [["alone"]]}, {"synonyms": {"a": []}},
                {"synonyms": [["a", ""]]}, {}, {"synonyms": [], "x": 1}, [1]):
        st, body = srv.call("PUT", "/tables/s/synonyms", bad)
        check(st == 400 and isinstance(body, dict) and body["error"]["message"],
              "PUT %s is 400 with a message: %s %s" % (json.dumps(bad), st, body))
    st, body = srv.call("PUT", "/tables/s/synonyms", "{", {"Content-Type": "application/json"})
    check(st == 400, "PUT with broken JSON is 400")
    st, _ = srv.call("PUT", "/tables/nosuch/synonyms", {"synonyms": None})
    check(st == 404, "PUT synonyms of no table is 404")
    check(ids(srv, "s", "nyc", **exact) == [3, 4], "rejected PUTs change nothing")
    srv.stop()
    srv = Server(data, workdir)
    check(ids(srv, "s", "nyc", **exact) == [3, 4], "synonyms survive a restart")
    st, body = srv.call("PUT", "/tables/s/synonyms", {"synonyms": None})
    check(st == 200 and body == {"synonyms": None}, "null removes them: %s" % body)
    check(ids(srv, "s", "nyc", **exact) == [4], "without synonyms nyc is only nyc")
    return srv


def test_highlights(srv):
    srv.call("POST", "/tables", {"name": "h", "schema": {"primary_key": "id", "fields": [
        {"name": "title", "type": "text", "language": "english"},
        {"name": "body", "type": "text", "language": "english"}]}})
    filler = " ".join("w%d" % i for i in range(12))
    body = "terminal %s terminal %s terminal end" % (filler, filler)
    srv.call("POST", "/tables/h/documents", "\n".join(json.dumps(d) for d in [
        {"id": 1, "title": "the terminal", "body": body},
        {"id": 2, "title": "nothing here", "body": "a terminal"}]), NDJSON)
    st, res = srv.call("POST", "/tables/h/search", {
        "q": "terminal", "doc": False, "highlight_fields": ["title", "body"],
        "fragment_size": 4, "fragments": 2})
    check(st == 200 and len(res["hits"]) == 2, "highlight search answers: %s %s" % (st, res))
    for h in res.get("hits", []):
        hl = h.get("highlights", {})
        check(set(hl) == {"title", "body"}, "hit %s highlights both fields: %s" % (h["id"], hl))
        for field, frags in hl.items():
            check(1 <= len(frags) <= 2, "hit %s %s: at most 2 fragments: %s" % (h["id"], field, frags))
            for f in frags:
                words = f.replace("<b>", "").replace("</b>", "").replace("\u2026", " ").split()
                check(len(words) <= 4, "fragment of at most 4 words: %r" % f)
    one = next((h for h in res.get("hits", []) if h["id"] == 1), {})
    frags = one.get("highlights", {}).get("body", [])
    check(len(frags) == 2 and all("<b>terminal</b>" in f for f in frags),
          "two fragments of the long body, each with the word: %s" % frags)
    check("<b>terminal</b>" in "".join(one.get("highlights", {}).get("title", [])),
          "the title marks it too")
    st, res = search(srv, "h", "terminal", highlight_fields="body", fragments=1)
    one = next((h for h in res.get("hits", []) if h["id"] == 1), {})
    check(st == 200 and list(one.get("highlights", {})) == ["body"] and
          len(one["highlights"]["body"]) == 1, "GET highlight_fields=body fragments=1: %s" % one)


def test_languages(srv):
    srv.call("POST", "/tables", {"name": "l", "schema": {"primary_key": "id", "fields": [
        {"name": "fr", "type": "text", "language": "french"},
        {"name": "it", "type": "text", "language": "italian"},
        {"name": "ja", "type": "text", "language": "none"},
        {"name": "note", "type": "text", "language": "english", "stopwords": ["foo", "bar"]}]}})
    docs = [{"id": 1, "fr": "L'homme est là", "it": "dell'amico", "ja": "東京大学", "note": "foo the"},
            {"id": 2, "fr": "une femme", "it": "la casa", "ja": "京都", "note": "bar baz"},
            {"id": 3, "fr": "d'homme à homme", "it": "l'uomo", "ja": "大阪", "note": "the end"}]
    srv.call("POST", "/tables/l/documents", "\n".join(json.dumps(d) for d in docs), NDJSON)
    exact = {"typo": "off", "prefix": "false"}
    check(ids(srv, "l", "fr:homme", **exact) == [1, 3], "French elision: homme finds L'homme")
    check(ids(srv, "l", "it:amico", **exact) == [1], "Italian elision: amico finds dell'amico")
    check(ids(srv, "l", "it:uomo", **exact) == [3], "uomo finds l'uomo")
    check(ids(srv, "l", "ja:京", **exact) == [1, 2], "one CJK character finds its words")
    check(ids(srv, "l", "ja:大学", **exact) == [1], "two characters find their word")
    check(ids(srv, "l", "ja:阪", **exact) == [3], "阪 finds 大阪")
    check(ids(srv, "l", "note:foo", **exact) == [], "the field's own stop word foo drops out")
    check(ids(srv, "l", "note:bar OR note:baz", **exact) == [2], "bar drops, baz finds")
    check(ids(srv, "l", "note:the", **exact) == [1, 3],
          "the list replaces the built-in one: the is searchable")


def test_bad_parameters(srv):
    for qs in ("typo=3", "typo=on", "prefix=maybe", "synonyms=2", "scoring=bm26",
               "fragment_size=0", "fragment_size=1001", "fragments=17", "fragments=x"):
        st, body = srv.call("GET", "/tables/r/search?q=x&" + qs)
        check(st == 400 and isinstance(body, dict) and body["error"]["code"] ==
              "invalid_parameter_value", "%s is 400 invalid_parameter_value: %s %s" % (qs, st, body))
    for extra in ({"typo": "often"}, {"typo": 3}, {"prefix": "yes"}, {"synonyms": 1},
                  {"scoring": 1}, {"highlight_fields": [1]}, {"highlight_fields": ["a,b"]},
                  {"fragments": 2.5}):
        st, body = srv.call("POST", "/tables/r/search", dict({"q": "x"}, **extra))
        check(st == 400 and isinstance(body, dict) and "error" in body,
              "POST %s is 400: %s %s" % (json.dumps(extra), st, body))
    for ok in ({"typo": True}, {"typo": False}, {"typo": 2}, {"typo": "auto"}):
        st, _ = srv.call("POST", "/tables/r/search", dict({"q": "x"}, **ok))
        check(st == 200, "POST %s is accepted" % json.dumps(ok))


def main():
    with DataDir() as dd:
        data = dd.path + "/data"
        srv = Server(data, dd.path)
        try:
            check(srv.port is not None, "server started")
            test_typos_and_prefixes(srv)
            test_stemmed_typos_and_ranking(srv)
            srv = test_synonyms(srv, data, dd.path)
            test_highlights(srv)
            test_languages(srv)
            test_bad_parameters(srv)
        finally:
            check(srv.stop() == 0, "clean shutdown")
    finish()


if __name__ == "__main__":
    main()
