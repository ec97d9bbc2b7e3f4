"""A damaged segment is reported at open, never served: searches, `quarry
check` and the HTTP API name it; with --salvage the table opens without that
segment (its documents missing, everything else intact), on the CLI and in
`quarry serve`."""
import json
import os

from qserve import Server
from qtest import DataDir, check, finish, run, write_jsonl

SCHEMA = {"primary_key": "id", "fields": [
    {"name": "body", "type": "text", "language": "none"}, {"name": "n", "type": "int"}]}


def main():
    with DataDir() as dd:
        data = os.path.join(dd.path, "data")
        schema = os.path.join(dd.path, "s.json")
        with open(schema, "w") as f:
            json.dump(SCHEMA, f)
        src = os.path.join(dd.path, "d.jsonl")
        write_jsonl(src, [{"id": i, "body": "every doc%d part%d" % (i, i // 100), "n": i}
                          for i in range(300)])
        rc, out, err = run(["import", "t", src, "--schema", schema, "--batch", "100", "--threads", "1"],
                           data)  # one thread: segment k holds part k
        check(rc == 0, "import: " + err[-300:])
        tdir = os.path.join(data, "tables", "t")
        segs = sorted(f for f in os.listdir(tdir) if f.endswith(".qseg"))
        if not check(len(segs) == 3, "three segments: %s" % segs):
            finish()
        rc, out, err = run(["search", "t", "every", "--count"], data)
        check(rc == 0 and out.strip().startswith("300"), "intact table counts 300: %r" % out)
        # damage the middle segment in the middle of its bytes (postings or docs)
        victim = os.path.join(tdir, segs[1])
        size = os.path.getsize(victim)
        with open(victim, "r+b") as f:
            f.seek(size // 2)
            b = f.read(1)
            f.seek(size // 2)
            f.write(bytes([b[0] ^ 0x5A]))
        rc, out, err = run(["search", "t", "every", "--count"], data)
        check(rc == 1 and segs[1] in err and ("corrupt" in err.lower() or "damaged" in err),
              "damaged segment refused at open, named: %r" % err.strip()[-300:])
        rc, out, err = run(["check"], data)
        check(rc != 0 and segs[1] in (out + err), "quarry check names the damaged segment")
        rc, out, err = run(["search", "t", "every", "--count", "--salvage"], data)
        check(rc == 0 and out.strip().startswith("200"),
              "--salvage opens without it: 200 of 300 docs: %r %r" % (out, err[-200:]))
        rc, out, err = run(["search", "t", "part0 OR part2", "--count", "--salvage"], data)
        check(rc == 0 and out.strip().startswith("200"), "the other segments' docs all there")
        rc, out, err = run(["search", "t", "part1", "--count", "--salvage"], data)
        check(rc == 0 and out.strip().startswith("0"), "the damaged segment's docs are gone")
        check(os.path.exists(victim), "read-only --salvage opens leave the damaged file in place")
        # the server: a clear JSON error without --salvage, answers with it
        srv = Server(data, dd.path)
        if check(srv.port, "server starts"):
            st, body = srv.call("GET", "/tables/t/search?q=every")
            check(st == 500 and isinstance(body, dict) and
                  body.get("error", {}).get("code") == "data_corrupted",
                  "HTTP: damaged table answers 500 data_corrupted: %s %s" % (st, str(body)[:200]))
            srv.stop()
        srv = Server(data, dd.path, extra=["--salvage"])
        if check(srv.port, "server starts with --salvage"):
            st, body = srv.call("GET", "/tables/t/search?q=every&limit=0")
            check(st == 200 and body.get("total") == 200, "HTTP --salvage: 200 docs (%s)" % (
                body.get("total") if isinstance(body, dict) else body))
            srv.stop()
            check(os.path.exists(victim + ".damaged") and not os.path.exists(victim),
                  "a writable --salvage open moves the damaged file aside, never deletes it")
        # the salvaged state was recorded: a plain open now works, without the segment
        rc, out, err = run(["search", "t", "every", "--count"], data)
        check(rc == 0 and out.strip().startswith("200"),
              "a plain open after a writable salvage sees the 200 good docs: %r %r" % (
                  out, err[-200:]))
        rc, out, err = run(["check"], data)
        check(rc == 0, "quarry check passes after salvage: %r" % (out + err)[-200:])
    finish()


main()
