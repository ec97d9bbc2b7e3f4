"""`quarry backup`: offline, the copy answers every query exactly as the
source; online, while writers post batches and merges run, the copy holds
every batch acknowledged before the backup started (exact content, once),
only whole documents that were really written, and it verifies.  Bad
destinations and sources are clear errors."""
import json
import os
import random
import threading
import time

from qserve import Server
from qtest import DataDir, check, finish, run, wait_until, write_jsonl

rng = random.Random(5)
SCHEMA = {"primary_key": "id", "fields": [
    {"name": "body", "type": "text", "language": "none"},
    {"name": "tag", "type": "keyword"},
    {"name": "n", "type": "int"}]}


def mkdoc(i, tag="x"):
    return {"id": i, "body": "all b%d %s" % (i % 97, " ".join(
        "w%d" % rng.randint(0, 200) for _ in range(rng.randint(3, 25)))), "tag": tag, "n": i}


def search_ids(srv, q):
    st, body = srv.call("POST", "/tables/t/search", {"q": q, "limit": 100000})
    return (st, [h["id"] for h in body["hits"]], body.get("total")) if st == 200 else (st, [], None)


def offline(dd):
    data = os.path.join(dd.path, "off")
    src = os.path.join(dd.path, "docs.jsonl")
    schema = os.path.join(dd.path, "schema.json")
    with open(schema, "w") as f:
        json.dump(SCHEMA, f)
    write_jsonl(src, [json.dumps(mkdoc(i)) for i in range(5000)])
    rc, out, err = run(["import", "t", src, "--schema", schema, "--batch", "700"], data)
    check(rc == 0, "import: " + err[-300:])
    rc, out, err = run(["delete", "t"] + [str(i) for i in range(0, 5000, 7)], data)
    check(rc == 0, "deletes: " + err[-300:])
    # a credential file of the data directory keeps its mode in the copy
    secret = os.path.join(data, "api_keys.json")
    with open(secret, "w") as f:
        f.write("{\"keys\": []}\n")
    os.chmod(secret, 0o600)
    dest = os.path.join(dd.path, "off-copy")
    rc, out, err = run(["backup", "--to", dest], data)
    if not check(rc == 0, "offline backup: " + err[-300:]):
        return
    rep = json.loads(out)
    check(rep["verified"] and rep["tables"] == 1 and rep["docs"] == 5000 - len(range(0, 5000, 7)),
          "backup report: %s" % out.strip())
    for q in ["all", "b3", "w7 w9", "b5 AND w1", "\"all b11\""]:
        res = []
        for d in (data, dest):
            rc1, hits, _ = run(["search", "t", q, "--limit", "100000", "--json"], d)
            rc2, count, _ = run(["search", "t", q, "--count"], d)
            res.append((rc1, rc2, [json.loads(x)["id"] for x in hits.splitlines()], count.strip()))
        check(res[0] == res[1] and res[0][0] == 0 and res[0][2],
              "copy answers %r like the source (%d hits)" % (q, len(res[0][2])))
    rc, out, err = run(["check"], dest)
    check(rc == 0, "copy passes quarry check: " + (out + err)[-300:])
    copied = os.path.join(dest, "api_keys.json")
    check(os.path.exists(copied) and (os.stat(copied).st_mode & 0o777) == 0o600,
          "credential files keep mode 0600 in the copy")
    # errors
    rc, out, err = run(["backup", "--to", dest], data)
    check(rc == 1 and "already exists" in err, "existing destination refused: " + err.strip())
    rc, out, err = run(["backup", "--to", dest + "2"], os.path.join(dd.path, "nothing"))
    check(rc == 1 and "not a Quarry data directory" in err, "non-data dir refused: " + err.strip())
    check(not os.path.exists(dest + "2"), "failed backup leaves no destination")
    rc, out, err = run(["backup"], data)
    check(rc == 2, "missing --to is a usage error")


def online(dd):
    data = os.path.join(dd.path, "on")
    srv = Server(data, dd.path)
    if not check(srv.port, "server starts: " + srv.text()[-300:]):
        return
    st, _ = srv.call("POST", "/tables", {"name": "t", "schema": SCHEMA})
    check(st in (200, 201), "create table")
    acked = {}          # id -> doc, acknowledged
    attempted = set()
    lock = threading.Lock()
    stop = threading.Event()

    def writer(wid):
        r = random.Random(wid)
        seq = 0
        while not stop.is_set():
            docs = []
            for _ in range(r.randint(5, 60)):
                seq += 1
                docs.append(mkdoc(wid * 1000000 + seq, "w%d" % wid))
            with lock:
                attempted.update(d["id"] for d in docs)
            st, body = srv.call("POST", "/tables/t/documents",
                                "".join(json.dumps(d) + "\n" for d in docs),
                                {"Content-Type": "application/x-ndjson"})
            if st == 200 and not body.get("rejected"):
                with lock:
                    for d in docs:
                        acked[d["id"]] = d

    def merger():
        while not stop.is_set():
            srv.call("POST", "/tables/t/merge")
            time.sleep(0.05)

    ws = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    ws.append(threading.Thread(target=merger))
    for w in ws:
        w.start()

    def written():
        with lock:
            return len(acked) > 100
    # the backup starts once the writers have work acknowledged, however long
    # that takes (the bound only turns a hang into a failure)
    wait_until(written, 120)
    with lock:
        before = dict(acked)
    dest = os.path.join(dd.path, "on-copy")
    rc, out, err = run(["backup", "--to", dest], data)
    time.sleep(0.5)
    stop.set()
    for w in ws:
        w.join()
    check(srv.stop() == 0, "server stops cleanly")
    if not check(rc == 0, "online backup while writing and merging: " + err[-400:]):
        return
    rep = json.loads(out)
    check(rep["verified"], "online copy verified: %s" % out.strip())
    copy = Server(dest, dd.path, config={"max_result_window": 1000000})
    if not check(copy.port, "the copy serves"):
        return
    st, ids, total = search_ids(copy, "all")
    check(st == 200 and total == len(ids) == len(set(ids)), "copy: no document twice")
    st2, desc = copy.call("GET", "/tables/t")
    check(desc["stats"]["docs"] == len(ids), "copy: table docs %s == found %d" % (
        desc["stats"]["docs"], len(ids)))
    check(rep["docs"] == len(ids), "backup report counts the copy's docs")
    got = set(ids)
    check(set(before) <= got, "copy holds all %d docs acknowledged before the backup (%d missing)"
          % (len(before), len(set(before) - got)))
    check(got <= attempted, "copy holds only documents that were written")
    check(len(before) > 100, "the test wrote enough before the backup (%d)" % len(before))
    for i in rng.sample(sorted(before), min(150, len(before))):
        st, body = copy.call("GET", "/tables/t/documents/%d" % i)
        check(st == 200 and body == before[i], "copy: doc %d exact" % i)
    copy.stop()


def main():
    with DataDir() as dd:
        offline(dd)
        online(dd)
    finish()


main()
