"""`quarry backup`: offline, the copy answers every query exactly as the
source; online, while writers post batches and merges run, the copy holds
every batch acknowledged before the backup started (exact content, once),
only whole documents that were really written, and it verifies.  Bad
destinations and sources are clear errors.  A backup killed at every table
boundary leaves no DEST and a work directory that `check` and a restore
refuse (the next backup removes it); damage in a source file stops the
backup, naming the file, except a damaged B-tree side file, which is left
out for the copy to rebuild."""
import fcntl
import json
import os
import random
import signal
import subprocess
import threading
import time

from qserve import Server
from qtest import BIN, DataDir, check, finish, run, wait_until, write_jsonl

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


def import_tables(dd, data, names, n_docs, schema=SCHEMA, batch=100):
    sf = os.path.join(dd.path, "schema-%s.json" % os.path.basename(data))
    with open(sf, "w") as f:
        json.dump(schema, f)
    src = os.path.join(dd.path, "docs.jsonl")
    write_jsonl(src, [json.dumps(mkdoc(i)) for i in range(n_docs)])
    for name in names:
        rc, out, err = run(["import", name, src, "--schema", sf, "--batch", str(batch)], data)
        check(rc == 0, "import %s: %s" % (name, err[-300:]))


def killed(dd):
    data = os.path.join(dd.path, "multi")
    tables = ["t0", "t1", "t2"]
    import_tables(dd, data, tables, 300)
    dest = os.path.join(dd.path, "multi-copy")
    work = dest + ".incomplete"
    for n in range(len(tables) + 1):
        # test-only hook: the backup kills itself (SIGKILL) after n tables
        p = subprocess.run([BIN, "backup", "--data", data, "--to", dest], capture_output=True,
                           text=True, timeout=300,
                           env=dict(os.environ, QUARRY_TEST_BACKUP_KILL_AFTER_TABLES=str(n)))
        what = "killed after %d of %d tables" % (n, len(tables))
        check(p.returncode == -signal.SIGKILL, "%s: rc %d %s" % (what, p.returncode, p.stderr))
        check(not os.path.exists(dest), what + ": no destination")
        copied = sorted(os.listdir(os.path.join(work, "tables")))
        check(copied == tables[:n], "%s: the work directory holds %s" % (what, copied))
        check(os.path.exists(os.path.join(work, "BACKUP_INCOMPLETE")), what + ": marked incomplete")
        rc, out, err = run(["check"], work)
        check(rc == 1 and "incomplete backup" in err, "%s: check refuses it: %r" % (what, err))
        rc, out, err = run(["search", "t0", "all", "--count"], work)
        check(rc == 1 and "incomplete backup" in err, "%s: a restore refuses it: %r" % (what, err))
        rc, out, err = run(["check"], dest)
        check(rc == 1 and "not a Quarry data directory" in err and not os.path.exists(dest),
              "%s: check of DEST fails and creates nothing: %r" % (what, err))
        if n == 1:
            srv = Server(work, dd.path)
            rc = srv.stop()
            check(srv.port is None and rc != 0 and "incomplete backup" in srv.text(),
                  "%s: quarry serve refuses it: %s" % (what, srv.text()[-300:]))
    # a backup still running (its marker locked) is not removed by another
    with open(os.path.join(work, "BACKUP_INCOMPLETE"), "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        rc, out, err = run(["backup", "--to", dest], data)
        check(rc == 1 and "another backup" in err and os.path.exists(work),
              "a running backup's work directory is left alone: %r" % err)
    rc, out, err = run(["backup", "--to", dest], data)
    if not check(rc == 0, "the next backup succeeds: " + err[-300:]):
        return
    rep = json.loads(out)
    check(rep["tables"] == 3 and rep["docs"] == 900, "full copy: %s" % out.strip())
    check(not os.path.exists(work), "the interrupted work directory was removed")
    rc, out, err = run(["check"], dest)
    check(rc == 0 and out.count(": ok,") == 3, "the copy passes check: %r" % out)


def damaged_source(dd):
    data = os.path.join(dd.path, "dmg")
    schema = {"primary_key": "id", "fields": [
        {"name": "body", "type": "text", "language": "none"},
        {"name": "n", "type": "int", "index": "btree"}]}
    import_tables(dd, data, ["t"], 300, schema)
    tdir = os.path.join(data, "tables", "t")
    segs = sorted(f for f in os.listdir(tdir) if f.endswith(".qseg"))
    qbts = sorted(f for f in os.listdir(tdir) if f.endswith(".qbt"))
    if not check(len(segs) == 3 and len(qbts) == 3, "segments %s, B-trees %s" % (segs, qbts)):
        return

    def flip(path):
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) // 2)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0x21]))

    dest = os.path.join(dd.path, "dmg-copy")
    victim = os.path.join(tdir, segs[1])
    flip(victim)
    rc, out, err = run(["backup", "--to", dest], data)
    check(rc == 1 and "backup source file" in err and segs[1] in err and "damaged" in err,
          "a damaged source segment stops the backup, named: %r" % err)
    check(not os.path.exists(dest) and not os.path.exists(dest + ".incomplete"),
          "nothing is left of the failed backup")
    flip(victim)  # the same flip again: the original bytes
    flip(os.path.join(tdir, qbts[0]))
    rc, out, err = run(["backup", "--to", dest], data)
    if not check(rc == 0, "a damaged B-tree side file does not stop it: " + err[-300:]):
        return
    rep = json.loads(out)
    check(rep["btrees_left_out"] == 1 and rep["docs"] == 300, "report: %s" % out.strip())
    check(not os.path.exists(os.path.join(dest, "tables", "t", qbts[0])),
          "the damaged side file was not copied")
    rc, out, err = run(["check"], dest)
    check(rc == 0, "the copy passes check: %r" % out)
    rc, out, err = run(["search", "t", "all", "--count", "--filter", "n >= 100"], dest)
    check(rc == 0 and out.strip().startswith("200"), "the copy answers a B-tree filter: %r %r" %
          (out, err[-200:]))


def main():
    with DataDir() as dd:
        offline(dd)
        online(dd)
        killed(dd)
        damaged_source(dd)
    finish()


main()
