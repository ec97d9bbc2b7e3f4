"""`quarry check` through the real binary: a flipped bit at every byte of the
last WAL records gets the right verdict (a damaged record followed by intact
ones is corruption: exit 1, named; damage in the final record is a torn write:
noted, exit 0 -- also when that record is the COMMIT of a bulk commit whose
SEGMENT record names a file) and never changes a byte of the file or a file
of the table; opening the table refuses
the same damage; a WAL that ends before an upload's COMMIT record is noted,
and the upload's segment file is an orphan; `check --salvage` keeps the commits before it and sets the
rest aside; a damaged B-tree side file is reported, then rebuilt by a salvage;
files are created 0600 and directories 0700."""
import json
import os
import shutil
import signal
import stat
import struct

from qserve import Server
from qtest import DataDir, check, finish, run

SCHEMA = {"primary_key": "id", "fields": [
    {"name": "body", "type": "text", "language": "none"},
    {"name": "n", "type": "int", "index": "btree"}]}
BATCHES = 6
PER_BATCH = 10


WAL_COMMIT, WAL_SEGMENT = 3, 4
# an upload is a bulk commit: its segment file by id (SEGMENT) and COMMIT,
# never its documents a second time
PER_COMMIT = [WAL_SEGMENT, WAL_COMMIT]


def wal_records(path):
    """(offset, length, type) of each record of a WAL file: 16-byte header,
    then [u32 len][u32 crc][u8 type][u64 lsn][payload]."""
    with open(path, "rb") as f:
        data = f.read()
    out, off = [], 16
    while off + 17 <= len(data):
        n = struct.unpack_from("<I", data, off)[0]
        out.append((off, 17 + n, data[off + 8]))
        off += 17 + n
    return data, out


def acked_data(dd):
    """A data directory whose one WAL file holds BATCHES acknowledged
    commits: a server takes them, then is killed -9 before any checkpoint."""
    data = os.path.join(dd.path, "acked")
    srv = Server(data, dd.path)
    if not check(srv.port, "server starts: " + srv.text()[-300:]):
        return None
    st, _ = srv.call("POST", "/tables", {"name": "t", "schema": SCHEMA})
    check(st in (200, 201), "create table")
    for b in range(BATCHES):
        docs = [{"id": b * PER_BATCH + i, "body": "every b%d" % b, "n": b * PER_BATCH + i}
                for i in range(PER_BATCH)]
        st, body = srv.call("POST", "/tables/t/documents",
                            "".join(json.dumps(d) + "\n" for d in docs),
                            {"Content-Type": "application/x-ndjson"})
        check(st == 200 and body.get("acked") == PER_BATCH, "batch %d acknowledged: %s" % (b, body))
    srv.stop(sig=signal.SIGKILL)
    return data


def count(data, q="every", extra=()):
    rc, out, err = run(["search", "t", q, "--count"] + list(extra), data)
    return rc, (out.strip().split()[0] if rc == 0 and out.strip() else None), err


def wal_bit_flips(dd, pristine):
    wdir = os.path.join(pristine, "tables", "t", "wal")
    names = sorted(os.listdir(wdir))
    if not check(len(names) == 1, "one WAL file: %s" % names):
        return
    orig, recs = wal_records(os.path.join(wdir, names[0]))
    # SEGMENT + COMMIT per batch
    types = [r[2] for r in recs]
    if not check(types == PER_COMMIT * BATCHES, "records: %s" % types):
        return
    data = os.path.join(dd.path, "flip")
    shutil.copytree(pristine, data)
    wal = os.path.join(data, "tables", "t", "wal", names[0])
    final_off = recs[-1][0]
    # every byte of the last two records (the final SEGMENT and the COMMIT; the
    # unit test store/test_wal.c flips every bit of the whole file), every
    # 5th of the record before, and the first byte of a few earlier ones
    offsets = list(range(recs[-2][0], len(orig))) + \
        list(range(recs[-3][0], recs[-2][0], 5)) + [recs[k][0] for k in (0, 5, len(recs) // 2)]
    tdir = os.path.join(data, "tables", "t")
    files = sorted(os.listdir(tdir))
    verdicts = {"torn": 0, "corrupt": 0}
    for pos in offsets:
        bad = bytearray(orig)
        bad[pos] ^= 1 << (pos % 8)
        with open(wal, "wb") as f:
            f.write(bad)
        rc, out, err = run(["check"], data)
        with open(wal, "rb") as f:
            after = f.read()
        if not check(after == bytes(bad), "byte %d: check left the WAL file untouched" % pos):
            break
        # an uncommitted SEGMENT record's file is an orphan for the next
        # writable open: check opens nothing of it and removes nothing
        if not check(sorted(os.listdir(tdir)) == files,
                     "byte %d: check left the table's files as they were" % pos):
            break
        if pos >= final_off:
            ok = rc == 0 and "t: ok" in out and "torn write" in out
            verdicts["torn"] += ok
            if not check(ok, "byte %d (final record): torn write noted, exit 0: %r" % (pos, out)):
                break
        else:
            ok = rc == 1 and "t: DAMAGED" in out and "corrupt wal file" in out and names[0] in out
            verdicts["corrupt"] += ok
            if not check(ok, "byte %d: corruption reported, exit 1: %r" % (pos, out[-300:])):
                break
    check(verdicts["torn"] == 17 and verdicts["corrupt"] == len(offsets) - 17,
          "verdicts over %d offsets: %s" % (len(offsets), verdicts))

    # the table refuses to open on the same damage; nothing changes
    first_of_last = len(recs) - len(PER_COMMIT)  # first record of the last batch
    bad = bytearray(orig)
    bad[recs[first_of_last][0] + 20] ^= 0x10
    with open(wal, "wb") as f:
        f.write(bad)
    rc, n, err = count(data)
    check(rc == 1 and "corrupt wal file" in err and "--salvage" in err,
          "search refuses the damaged table: %r" % err[-300:])
    srv = Server(data, dd.path)
    if check(srv.port, "server starts with a damaged table"):
        st, body = srv.call("GET", "/tables/t/search?q=every")
        check(st == 500 and isinstance(body, dict) and
              body.get("error", {}).get("code") == "data_corrupted",
              "HTTP: 500 data_corrupted: %s %s" % (st, str(body)[:200]))
        srv.stop()
    with open(wal, "rb") as f:
        check(f.read() == bytes(bad), "refused opens left the WAL file untouched")

    # salvage, knowingly: the commits before the damaged one stay
    rc, out, err = run(["check", "--salvage"], data)
    check(rc == 0 and "t: salvaged" in out and "set aside" in out,
          "check --salvage: %r %r" % (out, err[-200:]))
    check(os.path.exists(wal + ".damaged"), "the damaged WAL file is kept as .damaged")
    with open(wal + ".damaged", "rb") as f:
        check(f.read() == bytes(bad), "the kept copy is the damaged file, byte for byte")
    rc, n, err = count(data)
    check(rc == 0 and n == str((BATCHES - 1) * PER_BATCH),
          "after salvage: the first %d batches (%s docs): %r" % (BATCHES - 1, n, err[-200:]))
    rc, out, err = run(["check"], data)
    check(rc == 0 and "t: ok" in out, "check passes after the salvage: %r" % out)


def missing_commit(dd, pristine):
    """The WAL ends after the last upload's SEGMENT record, its COMMIT never
    written (a crash between the pages of one write): check notes a batch
    without its COMMIT, exit 0, and changes nothing; the commit is absent;
    a writable open removes its segment file, an orphan."""
    data = os.path.join(dd.path, "nocommit")
    shutil.copytree(pristine, data)
    wdir = os.path.join(data, "tables", "t", "wal")
    wal = os.path.join(wdir, sorted(os.listdir(wdir))[0])
    orig, recs = wal_records(wal)
    if not check([r[2] for r in recs[-2:]] == PER_COMMIT, "last upload: SEGMENT, COMMIT"):
        return
    with open(wal, "r+b") as f:
        f.truncate(recs[-1][0])
    with open(wal, "rb") as f:
        cut = f.read()
    tdir = os.path.join(data, "tables", "t")
    files = sorted(os.listdir(tdir))
    rc, out, err = run(["check"], data)
    check(rc == 0 and "t: ok" in out and "without its COMMIT record" in out and
          "torn write" not in out, "check notes the batch without its COMMIT: %r" % out)
    with open(wal, "rb") as f:
        check(f.read() == cut, "check left the WAL file untouched")
    check(sorted(os.listdir(tdir)) == files, "check left the table's files as they were")
    rc, n, err = count(data)
    check(rc == 0 and n == str((BATCHES - 1) * PER_BATCH),
          "the uncommitted upload is absent: %s %r" % (n, err[-200:]))
    rc, out, err = run(["flush", "t"], data)
    check(rc == 0, "a writable open: " + err[-200:])
    segs = lambda: sorted(f for f in os.listdir(tdir) if f.endswith(".qseg"))
    check(len(segs()) == len([f for f in files if f.endswith(".qseg")]) - 1,
          "the orphan segment file is removed: %s" % segs())
    rc, out, err = run(["check"], data)
    check(rc == 0 and "t: ok" in out and "note" not in out, "check is clean after: %r" % out)
    rc, n, err = count(data)
    check(rc == 0 and n == str((BATCHES - 1) * PER_BATCH), "still %s docs" % n)


def btree_damage(dd, pristine):
    data = os.path.join(dd.path, "bt")
    shutil.copytree(pristine, data)
    rc, out, err = run(["flush", "t"], data)  # replay into segments and their B-trees
    check(rc == 0, "flush: " + err[-200:])
    tdir = os.path.join(data, "tables", "t")
    qbt = sorted(f for f in os.listdir(tdir) if f.endswith(".qbt"))
    if not check(qbt, "B-tree side files exist"):
        return
    victim = os.path.join(tdir, qbt[0])
    with open(victim, "r+b") as f:
        f.seek(os.path.getsize(victim) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x44]))
    with open(victim, "rb") as f:
        damaged = f.read()
    rc, out, err = run(["check"], data)
    check(rc == 1 and "DAMAGED" in out and qbt[0] in out and "rebuilds" in out,
          "check reports the damaged B-tree side file: %r" % out[-300:])
    with open(victim, "rb") as f:
        check(f.read() == damaged, "check left the side file as it was")
    rc, out, err = run(["check", "--salvage"], data)
    check(rc == 0 and "t: ok" in out, "a writable check --salvage rebuilds it: %r" % out)
    rc, out, err = run(["check"], data)
    check(rc == 0, "check passes after the rebuild: %r" % out)
    rc, n, err = count(data, extra=["--filter", "n >= 0"])
    check(rc == 0 and n == str(BATCHES * PER_BATCH), "the rebuilt tree answers: %s" % n)


def modes(dd, pristine):
    data = os.path.join(dd.path, "modes")
    shutil.copytree(pristine, data)
    rc, out, err = run(["flush", "t"], data)
    check(rc == 0, "flush: " + err[-200:])
    loose = []
    for root, dirs, files in os.walk(data):
        for d in dirs:
            m = stat.S_IMODE(os.stat(os.path.join(root, d)).st_mode)
            if m != 0o700:
                loose.append("%s %o" % (os.path.join(root, d), m))
        for f in files:
            m = stat.S_IMODE(os.stat(os.path.join(root, f)).st_mode)
            if m != 0o600:
                loose.append("%s %o" % (os.path.join(root, f), m))
    check(not loose, "every file 0600 and directory 0700: %s" % loose[:5])
    # a data directory an older version made 0755 is restricted by a writable open
    os.chmod(data, 0o755)
    rc, out, err = run(["search", "t", "every", "--count"], data)
    check(stat.S_IMODE(os.stat(data).st_mode) == 0o755, "a read-only command changes no mode")
    rc, out, err = run(["flush", "t"], data)
    check(rc == 0 and stat.S_IMODE(os.stat(data).st_mode) == 0o700,
          "a writable open restricts the data directory to 0700: %o"
          % stat.S_IMODE(os.stat(data).st_mode))


def main():
    with DataDir() as dd:
        pristine = acked_data(dd)
        if pristine:
            rc, n, err = count(pristine)
            check(rc == 0 and n == str(BATCHES * PER_BATCH),
                  "all %d acknowledged docs recover: %s %r" % (BATCHES * PER_BATCH, n, err[-200:]))
            wal_bit_flips(dd, pristine)
            missing_commit(dd, pristine)
            btree_damage(dd, pristine)
            modes(dd, pristine)
        rc, out, err = run(["check"], os.path.join(dd.path, "nowhere"))
        check(rc == 1 and "not a Quarry data directory" in err, "check of a missing dir: %r" % err)
        check(not os.path.exists(os.path.join(dd.path, "nowhere")), "check creates nothing")
    finish()


main()
