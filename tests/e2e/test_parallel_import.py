"""Parallel import is a differential of the single-threaded one: the same file imported
with --threads 1, 2, 3 and 5 (small batches: many chunks in flight) gives the same
report -- counts, rejected lines in line order, the commits' progress lines -- and the
same table: documents, search answers and counts, columns and aggregates, B-tree and
scan answers of filters; and the single-threaded import agrees with a model of the file
(the last good line of each id wins; "replaced" counts good lines whose id came before).
Every data directory passes `quarry check`."""
import json
import os
import random

from qtest import BIN, DataDir, check, finish, run

rng = random.Random(16)
WORDS = ["w%d" % i for i in range(400)] + ["hydro", "power", "grid", "river", "solar"]
SYMBOLS = ["S%02d" % i for i in range(30)]
SCHEMA = {"primary_key": "id", "fields": [
    {"name": "title", "type": "text", "language": "english"},
    {"name": "body", "type": "text", "language": "english"},
    {"name": "symbol", "type": "keyword", "index": "btree"},
    {"name": "views", "type": "int", "index": "btree"},
    {"name": "published", "type": "timestamp"},
    {"name": "score", "type": "float"}]}
N_LINES = 3000
THREADS = [1, 2, 3, 5]


def text(n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def make_lines():
    """(raw bytes of each line, the model: id -> the doc of its last good line, and how
    many good lines replaced an earlier good line of their id)."""
    lines, model, replaced = [], {}, 0
    next_id = 0
    for i in range(N_LINES):
        r = rng.random()
        if r < 0.012:
            lines.append(b'{"id": 5, "title": "broken')                  # invalid JSON
            continue
        if r < 0.02:
            lines.append(json.dumps({"id": 77777, "views": "many"}).encode())  # wrong type
            continue
        if r < 0.026:
            lines.append(json.dumps({"title": "no key"}).encode())        # no primary key
            continue
        if r < 0.03:
            lines.append(b'{"id": 88888, "title": "caf\xe9"}')            # not UTF-8
            continue
        if r < 0.15 and next_id:
            did = rng.randrange(next_id)   # an upsert: in this chunk or an earlier one
        else:
            did = next_id
            next_id += 1
        d = {"id": did, "title": text(6), "body": text(rng.randint(10, 80)),
             "symbol": rng.choice(SYMBOLS), "views": rng.randint(0, 100000),
             "published": "2025-%02d-%02dT%02d:00:00Z" % (rng.randint(1, 12), rng.randint(1, 28),
                                                         rng.randint(0, 23)),
             "score": round(rng.uniform(0, 10), 3)}
        if did in model:
            replaced += 1
        model[did] = d
        lines.append(json.dumps(d).encode())
    return lines, model, replaced


def import_with(dd, src, schema, threads):
    data = os.path.join(dd.path, "t%d" % threads)
    rc, out, err = run(["import", "t", src, "--schema", schema, "--batch", "97", "--threads",
                        str(threads), "--report-commits"], data)
    errors = [x for x in err.splitlines() if x.startswith("line ")]
    summary = [x for x in err.splitlines() if x.startswith("imported ")]
    commits = [x for x in out.splitlines() if x.startswith("committed ")]
    return data, rc, errors, summary[0].split(" in ")[0] if summary else "", commits


def sql(data, q):
    rc, out, err = run(["sql", "-c", q], data)
    check(rc == 0, "%s: %s" % (q, err[-300:]))
    return out


def answers(data):
    """Everything the table answers that a thread count must not change."""
    a = {}
    a["rows"] = sql(data, "SELECT id, title, symbol, views, published, score FROM t ORDER BY id")
    a["agg"] = sql(data, "SELECT count(*), sum(views), min(published), max(published), "
                         "min(score), max(score) FROM t")
    a["groups"] = sql(data, "SELECT symbol, count(*), sum(views) FROM t GROUP BY symbol "
                            "ORDER BY symbol")
    a["text"] = sql(data, "SELECT count(*) FROM t WHERE body @@ 'hydro power'")
    qf = os.path.join(data, "..", "q%s.jsonl" % os.path.basename(data))
    with open(qf, "w") as f:
        for k, q in enumerate(["hydro", "power grid", "river OR solar", "w1 AND w2", "w3*"]):
            f.write(json.dumps({"qid": 2 * k, "q": q, "mode": "ids"}) + "\n")
            f.write(json.dumps({"qid": 2 * k + 1, "q": q, "mode": "count"}) + "\n")
    rc, out, err = run(["bench", "t", "--queries", qf, "--repeat", "1"], data)
    check(rc == 0, "bench: " + err[-300:])
    a["search"] = [(x.get("qid"), x.get("count"), sorted(x.get("ids") or []))
                   for x in map(json.loads, out.splitlines())]
    for flt in ("views > 50000", "symbol = 'S07'", "views >= 100 AND views < 2000"):
        counts = []
        for path in ("btree", "scan"):
            rc, out, err = run(["search", "t", "*", "--filter", flt, "--count", "--access-path",
                                path], data)
            check(rc == 0, "filter %s (%s): %s" % (flt, path, err[-200:]))
            counts.append(out.strip())
        check(counts[0] == counts[1], "filter %s: B-tree %s, scan %s" % (flt, counts[0],
                                                                         counts[1]))
        a["filter %s" % flt] = counts[0]
    return a


def main():
    lines, model, replaced = make_lines()
    with DataDir() as dd:
        src = os.path.join(dd.path, "docs.jsonl")
        with open(src, "wb") as f:
            f.write(b"\n".join(lines) + b"\n")
        schema = os.path.join(dd.path, "schema.json")
        with open(schema, "w") as f:
            json.dump(SCHEMA, f)
        base = None
        for threads in THREADS:
            data, rc, errors, summary, commits = import_with(dd, src, schema, threads)
            what = "threads=%d" % threads
            check(rc == 3, "%s: exit status 3 (rejected lines): %d" % (what, rc))
            rc, out, err = run(["check"], data)
            check(rc == 0, "%s: quarry check: %s" % (what, out + err))
            got = (errors, summary, commits, answers(data))
            if base is None:
                base = got
                bad = sum(1 for x in lines if not x.startswith(b'{"id": ') or b'"many"' in x
                          or b'\xe9' in x or b'broken' in x)
                good = N_LINES - bad
                check(summary == "imported %d, replaced %d, rejected %d of %d lines" % (
                      good - replaced, replaced, bad, N_LINES),
                      "%s: the model's counts: %s" % (what, summary))
                check(len(errors) == bad and
                      [int(e.split()[1].rstrip(":")) for e in errors] ==
                      sorted(int(e.split()[1].rstrip(":")) for e in errors),
                      "%s: every rejected line reported, in order" % what)
                for did in rng.sample(sorted(model), 40):
                    rc, out, err = run(["get", "t", str(did)], data)
                    check(rc == 0 and json.loads(out) == model[did],
                          "%s: document %d is its last good line" % (what, did))
                agg = got[3]["agg"]
                check(str(len(model)) in agg and str(sum(d["views"] for d in model.values()))
                      in agg, "%s: count and sum(views) of the model: %s" % (what, agg))
                commit_lines = [int(c.split()[1]) for c in commits]
                check(commit_lines == sorted(commit_lines) and commit_lines and
                      commit_lines[-1] <= N_LINES, "%s: commits in line order" % what)
                continue
            check(got[0] == base[0], "%s: rejected lines as with one thread" % what)
            check(got[1] == base[1], "%s: counts as with one thread: %s vs %s" % (
                what, got[1], base[1]))
            check(got[2] == base[2], "%s: the same commits, in the same order" % what)
            for k in base[3]:
                check(got[3][k] == base[3][k], "%s: %s as with one thread" % (what, k))
    finish()


main()
