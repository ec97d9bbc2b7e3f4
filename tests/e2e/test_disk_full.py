"""A full disk (issue 13, item 8): writes fail with a clear error, every answer
tells the truth, and writes work again once space is freed -- without a
restart.

The data directory lives on a small tmpfs (mounted by the test, so it needs
root; otherwise the test is skipped).  Each cycle fills the file system with a
filler file, leaves a different number of bytes free (so that commits fail at
different points: the segment file, the WAL, the checkpoint after it), and
writes over HTTP (single-document PUTs from four concurrent writers, a JSONL upload
indexed by three threads and committed in batches)
and over the PG port (a 300-row INSERT).  A write that answered success must
be there, one that answered an error must not be -- now, after space is
freed, and after a restart (kill -9 or a clean stop, alternately).  Once the
filler is gone, the same server takes every kind of write again.  Last,
`quarry import` on two indexing threads meets a full disk the same way."""
import errno
import json
import os
import signal
import subprocess
import threading

from qserve import Server
from qtest import DataDir, check, finish, run, skip, write_jsonl

try:
    import psycopg2
except ImportError:
    psycopg2 = None

SCHEMA = {"primary_key": "id", "fields": [
    {"name": "src", "type": "keyword"},
    {"name": "body", "type": "text", "language": "none"},
    {"name": "n", "type": "int"}]}

FREE_BYTES = [0, 8 << 10, 20 << 10, 40 << 10, 80 << 10]
PUT_WRITERS = 4
CONFIG = {"threads": 3}  # uploads indexed by three threads, committed in line order


def fill(path):
    """Write `path` until the file system is full; returns its size."""
    chunk = b"\0" * (64 << 10)
    size = 0
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                size += f.write(chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
        # the last partial chunks
        for small in (4096, 512):
            while True:
                try:
                    size += f.write(b"\0" * small)
                except OSError:
                    break
    return size


def body_of(i, src, cycle):
    return {"id": i, "src": src, "body": "cycle %d row %d some words to index" % (cycle, i),
            "n": i}


class Truth:
    def __init__(self):
        self.present = set()  # ids whose write was acknowledged
        self.absent = set()   # ids whose write answered an error (nothing written)

    def ack(self, ids):
        self.present.update(ids)
        self.absent.difference_update(ids)

    def fail(self, ids):
        self.absent.update(i for i in ids if i not in self.present)


def put_doc(srv, truth, i, src, cycle, answers):
    st, body = srv.call("PUT", "/tables/t/documents/%d" % i, body_of(i, src, cycle))
    if st in (200, 201):
        truth.ack([i])
        answers["ok"] += 1
    else:
        truth.fail([i])
        answers["err"] += 1
        err = body.get("error", {}) if isinstance(body, dict) else {}
        check(st == 500 and "No space left" in err.get("message", ""),
              "cycle %d: a failed PUT says the disk is full (%d %s)" % (cycle, st, body))


def upload(srv, truth, first, n, src, cycle, answers):
    ids = list(range(first, first + n))
    data = "".join(json.dumps(body_of(i, src, cycle)) + "\n" for i in ids)
    st, body = srv.call("POST", "/tables/t/documents?batch=100", data,
                        {"Content-Type": "application/x-ndjson"})
    if not check(isinstance(body, dict) and "acked" in body,
                 "cycle %d: the upload answers with counts (%d %s)" % (cycle, st, body)):
        return
    acked = body["acked"]
    answers.setdefault("acked", []).append(acked)
    check(acked % 100 == 0 or acked == n, "cycle %d: whole batches acknowledged (%d)" % (
        cycle, acked))
    truth.ack(ids[:acked])
    truth.fail(ids[acked:])
    if st == 200:
        answers["ok"] += 1
        check(acked == n, "cycle %d: a 200 upload acknowledged everything" % cycle)
    else:
        answers["err"] += 1
        err = body.get("error", {})
        check(st == 500 and "No space left" in err.get("message", ""),
              "cycle %d: a failed upload says the disk is full (%d %s)" % (cycle, st, err))


def pg_insert(srv, truth, first, n, src, cycle, answers):
    ids = list(range(first, first + n))
    try:
        conn = psycopg2.connect(host="127.0.0.1", port=srv.pg_port, dbname="quarry",
                                user="df", connect_timeout=10)
    except psycopg2.Error as e:
        check(False, "cycle %d: PG connect: %s" % (cycle, e))
        return
    conn.autocommit = True
    try:
        values = ",".join("(%d, '%s', 'pg row %d', %d)" % (i, src, i, i) for i in ids)
        conn.cursor().execute("INSERT INTO t (id, src, body, n) VALUES " + values)
        truth.ack(ids)
        answers["ok"] += 1
    except psycopg2.Error as e:
        truth.fail(ids)
        answers["err"] += 1
        check(e.pgcode == "53100" and "No space left" in str(e),
              "cycle %d: a failed INSERT says the disk is full (%s %s)" % (cycle, e.pgcode, e))
    finally:
        conn.close()


def write_round(srv, truth, next_id, sizes, cycle):
    """sizes[0] PUTs from PUT_WRITERS concurrent writers (their commits share
    syncs and in-memory segments), an upload of sizes[1] documents (indexed
    by the server's pool of threads), an INSERT of sizes[2] rows, with ids
    from next_id on; returns the answers and the next id."""
    answers = {"ok": 0, "err": 0}
    lock = threading.Lock()

    def writer(ids):
        for i in ids:
            mine = {"ok": 0, "err": 0}
            put_doc(srv, truth, i, "put", cycle, mine)
            with lock:
                answers["ok"] += mine["ok"]
                answers["err"] += mine["err"]
    ids = list(range(next_id, next_id + sizes[0]))
    ws = [threading.Thread(target=writer, args=(ids[w::PUT_WRITERS],))
          for w in range(PUT_WRITERS)]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    next_id += sizes[0]
    upload(srv, truth, next_id, sizes[1], "up", cycle, answers)
    next_id += sizes[1]
    pg_insert(srv, truth, next_id, sizes[2], "pg", cycle, answers)
    return answers, next_id + sizes[2]


def verify(srv, truth, what):
    st, body = srv.call("POST", "/tables/t/search", {"q": "*", "limit": 10000})
    if not check(st == 200, "%s: search answers (%d %s)" % (what, st, str(body)[:200])):
        return False
    ids = {h["id"] for h in body["hits"]}
    lost = truth.present - ids
    extra = truth.absent & ids
    ok = check(not lost, "%s: %d acknowledged rows missing, e.g. %s" % (
        what, len(lost), sorted(lost)[:5]))
    ok &= check(not extra, "%s: %d rows of failed writes are there, e.g. %s" % (
        what, len(extra), sorted(extra)[:5]))
    ok &= check(body["total"] == len(truth.present) == len(ids),
                "%s: exactly the acknowledged rows (%d, want %d)" % (
                    what, body["total"], len(truth.present)))
    return ok


def cli_import(tmp, mnt, filler):
    """`quarry import` on two indexing threads into a nearly full disk: it stops with the
    disk's error and the line from which nothing was imported; exactly the lines its
    commits reported are there; once space is freed the same import completes."""
    src = os.path.join(tmp, "cli.jsonl")
    schema = os.path.join(tmp, "cli-schema.json")
    with open(schema, "w") as f:
        json.dump(SCHEMA, f)
    write_jsonl(src, [body_of(i, "cli", 9) for i in range(1, 4001)])
    data = os.path.join(mnt, "cli")
    seed = os.path.join(tmp, "seed.jsonl")
    write_jsonl(seed, [body_of(0, "seed", 9)])
    rc, out, err = run(["import", "t", seed, "--schema", schema], data)
    check(rc == 0, "the table exists before the disk fills: " + err[-300:])

    def count():
        rc, out, err = run(["search", "t", "row", "--filter", "src = 'cli'", "--count"], data)
        return int(out.split()[0]) if rc == 0 else "error: " + err[-200:]
    there = 0
    for free in (0, 64 << 10, 256 << 10):
        size = fill(filler)
        os.truncate(filler, max(0, size - free))
        rc, out, err = run(["import", "t", src, "--schema", schema, "--threads", "2",
                            "--batch", "500", "--report-commits"], data)
        commits = [tuple(map(int, x.split()[1:])) for x in out.splitlines()
                   if x.startswith("committed ")]
        last_line, acked = commits[-1] if commits else (0, 0)
        if rc == 0 and free > 0:
            # every batch fitted (the WAL holds them; only a later segment write or
            # checkpoint met the full disk, which loses nothing): success means all of it
            check(acked == 4000 and "not imported" not in err,
                  "an import that succeeds on a nearly full disk (%d bytes free) committed "
                  "every line: through %d" % (free, acked))
        else:
            check(rc == 1 and "No space left on device" in err,
                  "import into a full disk (%d bytes free) fails with the disk's error: rc %d %s"
                  % (free, rc, err[-300:]))
            check("line %d and later were not imported" % (last_line + 1) in err,
                  "the import says from which line nothing was imported (committed through "
                  "%d): %s" % (last_line, err[-300:]))
        check(last_line == acked and acked % 500 == 0,
              "whole batches committed in line order: %s" % (commits,))
        os.unlink(filler)
        # ids 1.. in line order: the longest committed prefix so far is what is there
        there = max(there, acked)
        n = count()
        check(n == there, "%d bytes free: exactly the %d committed lines are there: %s" % (
            free, there, n))
    rc, out, err = run(["import", "t", src, "--threads", "2", "--batch", "500"], data)
    check(rc == 0, "with space again the import completes: " + err[-300:])
    n = count()
    check(n == 4000, "every line there once: %s" % n)
    rc, out, err = run(["check"], data)
    check(rc == 0, "quarry check is clean: " + out + err)


def main():
    if psycopg2 is None:
        skip("python3-psycopg2 is not installed")
    if os.geteuid() != 0:
        skip("mounting a small tmpfs needs root")
    with DataDir() as dd:
        mnt = os.path.join(dd.path, "mnt")
        os.mkdir(mnt)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", mnt],
                          capture_output=True).returncode != 0:
            skip("could not mount a tmpfs")
        srv = None
        try:
            data = os.path.join(mnt, "data")
            filler = os.path.join(mnt, "filler")
            srv = Server(data, dd.path, pg=True, config=CONFIG)
            if not check(srv.port and srv.pg_port, "server starts: " + srv.text()[-400:]):
                return
            st, _ = srv.call("POST", "/tables", {"name": "t", "schema": SCHEMA})
            check(st in (200, 201), "create table (status %d)" % st)
            truth = Truth()
            next_id = 1
            failed_total = 0
            for cycle, free in enumerate(FREE_BYTES):
                # the disk fills up, leaving `free` bytes
                size = fill(filler)
                os.truncate(filler, max(0, size - free))
                answers, next_id = write_round(srv, truth, next_id, (12, 500, 300), cycle)
                failed_total += answers["err"]
                print("cycle %d, %d bytes free: %d writes answered success, %d an error "
                      "(upload: %s of 500 acknowledged)" % (
                          cycle, free, answers["ok"], answers["err"], answers.get("acked")))
                check(srv.p.poll() is None, "cycle %d: the server survives a full disk" % cycle)
                verify(srv, truth, "cycle %d, disk full (%d bytes free)" % (cycle, free))
                # space comes back: the same server takes every kind of write
                os.unlink(filler)
                answers, next_id = write_round(srv, truth, next_id, (8, 300, 100), cycle)
                answers.pop("acked", None)
                check(answers == {"ok": 10, "err": 0},
                      "cycle %d: every write works once space is freed (%s)" % (cycle, answers))
                verify(srv, truth, "cycle %d, space freed" % cycle)
                # and a restart finds exactly what was acknowledged
                if cycle % 2 == 0:
                    srv.p.send_signal(signal.SIGKILL)
                    srv.p.wait()
                    srv.log.close()
                else:
                    check(srv.stop() == 0, "cycle %d: clean stop" % cycle)
                srv = Server(data, dd.path, pg=True, config=CONFIG)
                if not check(srv.port, "cycle %d: restart: %s" % (cycle, srv.text()[-600:])):
                    return
                verify(srv, truth, "cycle %d, restarted" % cycle)
            check(failed_total > 0, "the full disk failed some writes (%d)" % failed_total)
            check(len(truth.present) > 0 and len(truth.absent) > 0,
                  "both acknowledged (%d) and failed (%d) rows were checked" % (
                      len(truth.present), len(truth.absent)))
            check(srv.stop() == 0, "clean stop")
            srv = None
            cli_import(dd.path, mnt, filler)
        finally:
            if srv is not None:
                srv.stop(signal.SIGKILL)
            subprocess.run(["umount", mnt], capture_output=True)


main()
finish()
