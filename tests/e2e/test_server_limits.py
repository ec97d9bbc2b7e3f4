"""End to end: the server's memory and upload limits (`quarry serve` with
small limits, the real binary on 127.0.0.1).

- Uploads: a gzip bomb (a few hundred KB expanding a thousand times) is
  refused with 413 once it passes max_gzip_ratio; with the ratio off, a
  300 MB upload of 1 MB lines into a new table (schema inferred) streams
  in bounded memory (the server's peak RSS, VmHWM from /proc/PID/status,
  stays far below the upload's size) and the memory comes back after the
  request (VmRSS); a line of a million tiny JSON values is rejected with
  its line number, the lines around it imported.
- Memory for queries: SET quarry.mem_cap above --mem-limit is 22023 over
  PG and HTTP; while one psycopg2 connection holds a large cursor result,
  the same query from another connection fails with 53200 (not a crash,
  not the statement's own cap), and runs once the cursor is closed.
- TLS: HTTPS refuses TLS 1.0 and 1.1 handshakes (openssl s_client), as
  the PG port does, and completes 1.2 and 1.3.
- Browsers without API keys: foreign Host (DNS rebinding) 403, foreign
  Origin on writes 403, text/plain / form / multipart / missing
  Content-Type on writes 415 (the browser-style DROP TABLE); allowed_hosts
  and API keys let other names in.
- UTF-8: documents with bytes that are not UTF-8 are refused by upload
  (that line, with its column), PUT (400), INSERT and COPY over psycopg2
  (22021) and quarry import (the line); the stored rest reads back."""
import gzip
import io
import json
import os
import re
import shutil
import subprocess
import time

from qserve import Server
from qtest import DataDir, check, finish, run

try:
    import psycopg2
except ImportError:
    psycopg2 = None

MIB = 1 << 20


def status_kb(srv, field):
    """VmRSS / VmHWM of the server process, in kB."""
    with open("/proc/%d/status" % srv.p.pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def upload(srv, table, body, gz=False, ctype="application/x-ndjson", timeout=300):
    h = {"Content-Type": ctype}
    if gz:
        h["Content-Encoding"] = "gzip"
    return srv.call("POST", "/tables/%s/documents" % table, body, headers=h, timeout=timeout)


def big_lines(n, size):
    """n documents of `size` bytes each, stored only (no text field to
    analyze), as gzip: repetitive, so the gzip is about size * n / 1000."""
    pad = "a" * size
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=6) as z:
        for i in range(n):
            z.write((json.dumps({"id": i, "kind": "k", "pad": pad}) + "\n").encode())
    return out.getvalue()


def test_uploads(dd):
    # a gzip bomb against the default ratio (100)
    srv = Server(os.path.join(dd.path, "bomb"), dd.path)
    try:
        bomb = big_lines(200, MIB)
        check(len(bomb) < 2 * MIB, "the bomb is small: %d bytes" % len(bomb))
        base = status_kb(srv, "VmRSS")
        st, b = upload(srv, "t", bomb, gz=True)
        err = b.get("error", {}) if isinstance(b, dict) else {}
        check(st == 413 and err.get("code") == "program_limit_exceeded" and
              "expands more than 100 times" in err.get("message", ""),
              "a gzip bomb is refused with 413: %s %s" % (st, str(b)[:300]))
        check("max_gzip_ratio" in err.get("hint", ""), "the hint names max_gzip_ratio")
        check(isinstance(b, dict) and b.get("lines", 10**9) < 40,
              "it stopped early: %s lines" % (b.get("lines") if isinstance(b, dict) else b))
        peak = status_kb(srv, "VmHWM")
        check(peak - base < 150 * 1024, "the bomb cost little memory: peak %d kB over %d kB" %
              (peak, base))
        check(srv.call("GET", "/health")[0] == 200, "the server answers after the bomb")
    finally:
        srv.stop()

    # with the ratio off, 300 MB in 1 MB lines into a new table streams in
    # bounded memory -- the indexing budget's, whatever the indexing threads
    # -- and the memory is given back afterwards
    srv = Server(os.path.join(dd.path, "stream"), dd.path,
                 config={"max_gzip_ratio": 0, "threads": 2, "index_memory_bytes": 96 * MIB})
    try:
        n = 300
        body = big_lines(n, MIB)
        base = status_kb(srv, "VmRSS")
        st, b = upload(srv, "big", body, gz=True)
        check(st == 200 and b.get("imported") == n and b.get("acked") == n and
              b.get("schema_inferred") is True,
              "300 MB upload imported in full: %s %s" % (st, str(b)[:300]))
        peak = status_kb(srv, "VmHWM")
        check(peak - base < 200 * 1024,
              "peak memory stays bounded while 300 MB stream in: %d kB over %d kB" % (peak, base))
        after = -1
        for _ in range(100):  # the upload's cleanup runs after the answer is sent
            after = status_kb(srv, "VmRSS")
            if after - base < 24 * 1024:
                break
            time.sleep(0.1)
        check(after - base < 24 * 1024,
              "memory is given back after the upload: %d kB now, %d kB before" % (after, base))
        st, b = srv.call("POST", "/sql", {"query": "SELECT count(*) FROM big"})
        check(st == 200 and b.get("rows") == [[n]], "every document is there: %s" % str(b)[:200])

        # a line of a million tiny values: rejected with its line number
        lines = [json.dumps({"id": "a", "kind": "ok"}),
                 json.dumps({"id": "b", "kind": "bomb", "v": [0] * (1100 * 1000)}),
                 json.dumps({"id": "c", "kind": "ok"})]
        st, b = upload(srv, "big", ("\n".join(lines) + "\n").encode())
        errs = b.get("errors", []) if isinstance(b, dict) else []
        check(st == 200 and b.get("imported") == 2 and b.get("rejected") == 1 and
              len(errs) == 1 and errs[0].get("line") == 2 and
              "JSON values" in errs[0].get("message", ""),
              "a line of a million values is rejected by line: %s %s" % (st, str(b)[:300]))
    finally:
        srv.stop()


def test_query_memory(dd):
    if psycopg2 is None:
        check(False, "psycopg2 is installed (make deps)")
        return
    # a large statement's memory goes back to the system when it ends
    srv = Server(os.path.join(dd.path, "trim"), dd.path)
    try:
        base = status_kb(srv, "VmRSS")
        st, b = srv.call("POST", "/sql", {"query": "SELECT count(*), max(r) FROM (SELECT g, "
                                                   "repeat('y', 200) || g AS r FROM "
                                                   "generate_series(1, 300000) g ORDER BY r) s"})
        check(st == 200 and b.get("rows", [[0]])[0][0] == 300000, "large sort: %s" % str(b)[:200])
        peak, after = status_kb(srv, "VmHWM"), -1
        for _ in range(100):  # the result is freed once the answer has been sent
            after = status_kb(srv, "VmRSS")
            if after - base < 16 * 1024:
                break
            time.sleep(0.1)
        check(peak - base > 100 * 1024 and after - base < 16 * 1024,
              "memory is given back after a large statement: %d kB before, %d kB peak, %d kB "
              "after" % (base, peak, after))
    finally:
        srv.stop()
    limit = 64 * MIB
    srv = Server(os.path.join(dd.path, "mem"), dd.path, pg=True,
                 extra=["--mem-limit", str(limit)])
    try:
        check("mem_limit_mib=64" in srv.text(), "the startup line states the limit")
        # HTTP: a cap above the server's limit, in the same request as a query
        st, b = srv.call("POST", "/sql", {"query": "SET quarry.mem_cap = %d" % (2 * limit)})
        err = b.get("error", {}) if isinstance(b, dict) else {}
        check(st == 400 and err.get("sqlstate") == "22023" and
              "(1048576 .. %d)" % limit in err.get("message", ""),
              "SET quarry.mem_cap above the limit over HTTP: %s %s" % (st, b))
        dsn = "host=127.0.0.1 port=%d dbname=quarry user=quarry" % srv.pg_port
        a = psycopg2.connect(dsn)
        other = psycopg2.connect(dsn)
        try:
            cur = a.cursor()
            try:
                cur.execute("SET quarry.mem_cap = %d" % (limit + 1))
                check(False, "SET above the limit must fail over PG")
            except psycopg2.Error as e:
                check(e.pgcode == "22023", "22023 over PG: %s %s" % (e.pgcode, e))
            a.rollback()
            # ~40 MB of rows held by a cursor, then the same from another session
            big = ("SELECT g, repeat('y', 200) AS r FROM generate_series(1, 80000) g "
                   "ORDER BY g DESC")
            held = a.cursor("held")
            held.execute(big)
            first = held.fetchmany(2)
            check([r[0] for r in first] == [80000, 79999], "the cursor streams: %s" %
                  [r[0] for r in first])
            oc = other.cursor()
            try:
                oc.execute(big)
                check(False, "the second statement must not fit in the limit")
            except psycopg2.Error as e:
                check(e.pgcode == "53200" and "mem_limit" in (e.diag.message_hint or ""),
                      "53200 with a hint while the cursor holds the memory: %s %s (%s)" %
                      (e.pgcode, e, e.diag.message_hint))
            other.rollback()
            oc.execute("SELECT 1")
            check(oc.fetchall() == [(1,)], "small statements still run")
            held.close()
            a.commit()
            oc.execute(big)
            rows = oc.fetchall()
            check(len(rows) == 80000 and rows[0][0] == 80000 and rows[-1][0] == 1 and
                  rows[0][1] == "y" * 200, "after the cursor closed the query runs in full")
        finally:
            a.close()
            other.close()
        check(srv.call("GET", "/health")[0] == 200, "the server is up")
    finally:
        srv.stop()


def test_utf8(dd):
    """Documents that are not UTF-8 are refused wherever they come in, so
    what is stored is always valid JSON for clients (psycopg2 decodes every
    text value; a JSON parser refuses stray bytes)."""
    data = os.path.join(dd.path, "utf8")
    srv = Server(data, dd.path, pg=True)
    try:
        st, b = srv.call("POST", "/tables", {"name": "u", "schema": {
            "primary_key": "id", "fields": [{"name": "s", "type": "text"}]}})
        check(st in (200, 201), "table created: %s %s" % (st, b))
        body = (b'{"id": 1, "s": "caf\xc3\xa9"}\n'
                b'{"id": 2, "s": "latin-1 caf\xe9"}\n'
                b'{"id": 3, "s": "fine"}\n')
        st, b = upload(srv, "u", body)
        errs = b.get("errors", []) if isinstance(b, dict) else []
        check(st == 200 and b.get("imported") == 2 and b.get("rejected") == 1 and
              len(errs) == 1 and errs[0].get("line") == 2 and
              "invalid byte sequence" in errs[0].get("message", "") and
              errs[0].get("column") == 28,
              "upload: the bad line is named with its column: %s %s" % (st, str(b)[:400]))
        st, b = srv.call("PUT", "/tables/u/documents/9", b'{"s": "\xff"}',
                         headers={"Content-Type": "application/json"})
        err = b.get("error", {}) if isinstance(b, dict) else {}
        check(st == 400 and "invalid byte sequence" in err.get("message", ""),
              "PUT: 400 naming the bytes: %s %s" % (st, b))
        st, b = srv.call("POST", "/sql", {"query": "SELECT count(*) FROM u"})
        check(st == 200 and b.get("rows") == [[2]], "only the good documents: %s" % b)
        if psycopg2 is not None:
            conn = psycopg2.connect("host=127.0.0.1 port=%d dbname=quarry user=quarry" %
                                    srv.pg_port)
            try:
                cur = conn.cursor()
                try:
                    cur.execute(b"INSERT INTO u (id, s) VALUES (4, 'caf\xe9')")
                    check(False, "an INSERT of bytes that are not UTF-8 must fail")
                except psycopg2.Error as e:
                    check(e.pgcode == "22021", "INSERT: 22021 over PG: %s %s" % (e.pgcode, e))
                conn.rollback()
                try:
                    cur.copy_expert("COPY u (id, s) FROM STDIN",
                                    io.BytesIO(b"5\tgood\n6\tbad\xfe\n"))
                    check(False, "a COPY of bytes that are not UTF-8 must fail")
                except psycopg2.Error as e:
                    check(e.pgcode == "22021", "COPY: 22021: %s %s" % (e.pgcode, e))
                conn.rollback()
                cur.execute("SELECT id, s FROM u ORDER BY id")
                check(cur.fetchall() == [(1, "caf\u00e9"), (3, "fine")],
                      "psycopg2 reads every stored value")
            finally:
                conn.close()
        else:
            check(False, "psycopg2 is installed (make deps)")
    finally:
        srv.stop()
    # quarry import names the line too
    path = os.path.join(dd.path, "bad.jsonl")
    with open(path, "wb") as f:
        f.write(b'{"id": 7, "s": "ok"}\n{"id": 8, "s": "\xc3("}\n')
    rc, out, err = run(["import", "u", path], data)
    check(rc == 3 and "line 2: invalid byte sequence" in err + out and "imported 1" in err + out,
          "quarry import reports the line: %s %s" % (out, err))


def handshake(port, version, starttls=None):
    """openssl s_client with only `version` on offer (security level 0, so
    the client itself would allow TLS 1.0/1.1): the protocol agreed, or
    None when the server refused."""
    args = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-" + version,
            "-cipher", "DEFAULT:@SECLEVEL=0"]
    if starttls:
        args += ["-starttls", starttls]
    p = subprocess.run(args, input="", capture_output=True, text=True, timeout=30)
    m = re.search(r"^New, (TLSv[0-9.]+), Cipher is (?!\(NONE\))", p.stdout, re.M)
    return m.group(1) if m and p.returncode == 0 else None


def test_tls(dd):
    """HTTPS, like the PG port, completes TLS 1.2 and 1.3 handshakes only."""
    if not shutil.which("openssl"):
        check(False, "openssl is installed (make deps)")
        return
    d = os.path.join(dd.path, "pki")
    os.makedirs(d)
    p = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-keyout", "k.pem", "-out", "c.pem", "-subj", "/CN=127.0.0.1"],
                       cwd=d, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, "test certificate: %s" % p.stderr[-200:])
    cert, key = os.path.join(d, "c.pem"), os.path.join(d, "k.pem")
    srv = Server(os.path.join(dd.path, "tls"), dd.path, pg=True,
                 extra=["--tls-cert", cert, "--tls-key", key, "--pg-tls-cert", cert,
                        "--pg-tls-key", key])
    try:
        m = re.search(r"http=https://127\.0\.0\.1:(\d+)/", srv.text())
        if not check(m is not None and srv.pg_port, "TLS server started: " + srv.text()[-300:]):
            return
        https = int(m.group(1))
        for port, starttls, what in ((https, None, "HTTPS"), (srv.pg_port, "postgres", "PG")):
            for v in ("tls1", "tls1_1"):
                got = handshake(port, v, starttls)
                check(got is None, "%s refuses %s: agreed %s" % (what, v, got))
            check(handshake(port, "tls1_2", starttls) == "TLSv1.2", "%s speaks TLS 1.2" % what)
            check(handshake(port, "tls1_3", starttls) == "TLSv1.3", "%s speaks TLS 1.3" % what)
    finally:
        srv.stop()


def test_browser_guards(dd):
    """Without API keys (the loopback default) a web page must not steer the
    server through the user's browser: a foreign Host (DNS rebinding) is
    403, a write with a foreign Origin is 403, and a write whose
    Content-Type a page may send without asking (text/plain, a form, none
    where a body is expected) is 415 -- the browser-style POST that used to
    run DROP TABLE.  CLI clients that name their JSON keep working; with a
    key the checks are off."""
    data = os.path.join(dd.path, "guards")
    srv = Server(data, dd.path)
    try:
        port = srv.port
        st, b = srv.call("POST", "/tables", {"name": "t", "schema": {
            "primary_key": "id", "fields": [{"name": "s", "type": "text"}]}})
        check(st in (200, 201), "table created: %s %s" % (st, b))

        def table_exists():
            return srv.call("GET", "/tables/t")[0] == 200

        for host, want in (("evil.example", 403), ("evil.example:%d" % port, 403),
                           ("10.9.8.7:%d" % port, 403), ("localhost.evil.example", 403),
                           ("localhost:%d" % port, 200), ("LOCALHOST.", 200),
                           ("app.localhost:%d" % port, 200), ("127.0.0.1:%d" % port, 200),
                           ("127.3.4.5", 200), ("[::1]:%d" % port, 200)):
            st, b = srv.call("GET", "/tables", headers={"Host": host})
            check(st == want, "GET with Host %s: %s, want %s (%s)" % (host, st, want, b))
        st, b = srv.call("GET", "/tables", headers={"Host": "evil.example"})
        check(b.get("error", {}).get("code") == "insufficient_privilege" and
              "allowed_hosts" in b["error"].get("hint", ""), "the 403 says what to do: %s" % b)
        drop = json.dumps({"query": "DROP TABLE t"})
        for ct in ("text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                   "multipart/form-data; boundary=x", None):
            h = {"Content-Type": ct} if ct else {}
            st, b = srv.call("POST", "/sql", drop, headers=h)
            check(st == 415 and table_exists(),
                  "a browser-style POST /sql with Content-Type %s is refused: %s %s" % (ct, st, b))
        st, b = srv.call("POST", "/sql", drop, headers={"Content-Type": "application/json",
                                                        "Origin": "http://evil.example"})
        check(st == 403 and table_exists(), "a foreign Origin is refused: %s %s" % (st, b))
        st, b = srv.call("DELETE", "/tables/t", headers={"Origin": "null"})
        check(st == 403 and table_exists(), "Origin null is refused: %s %s" % (st, b))
        st, b = srv.call("POST", "/tables/t/documents", b'{"id":1,"s":"x"}\n',
                         headers={"Content-Type": "text/plain"})
        check(st == 415, "a text/plain upload is refused without keys: %s %s" % (st, b))
        st, b = srv.call("POST", "/tables/t/flush", "a=b",
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
        check(st == 415, "a form post to flush is refused: %s %s" % (st, b))
        # what the admin page and CLI clients send still works
        st, b = srv.call("POST", "/sql", {"query": "SELECT 1"},
                         headers={"Origin": "http://127.0.0.1:%d" % port})
        check(st == 200 and b.get("rows") == [[1]], "same-origin JSON works: %s %s" % (st, b))
        st, b = srv.call("POST", "/tables/t/documents", b'{"id":1,"s":"x"}\n',
                         headers={"Content-Type": "application/x-ndjson"})
        check(st == 200 and b.get("imported") == 1, "an ndjson upload works: %s %s" % (st, b))
        st, b = srv.call("POST", "/tables/t/flush")
        check(st == 200, "a body-less flush without Content-Type works: %s %s" % (st, b))
        if shutil.which("curl"):
            url = "http://127.0.0.1:%d/sql" % port
            p = subprocess.run(["curl", "-sS", "-d", '{"query":"SELECT 2"}', url],
                               capture_output=True, text=True, timeout=30)
            check('"unsupported_media_type"' in p.stdout and "application/json" in p.stdout,
                  "curl -d (a form type) gets 415 naming the type to send: %s" % p.stdout)
            p = subprocess.run(["curl", "-sS", "-H", "Content-Type: application/json", "-d",
                                '{"query":"SELECT 2"}', url],
                               capture_output=True, text=True, timeout=30)
            check('"rows":[[2]]' in p.stdout, "curl with -H Content-Type works: %s" % p.stdout)
    finally:
        srv.stop()
    # allowed_hosts names more hosts (a proxy, an internal name); Origin too
    srv = Server(os.path.join(dd.path, "guards2"), dd.path,
                 config={"allowed_hosts": "quarry.internal, other.example"})
    try:
        st, b = srv.call("GET", "/tables", headers={"Host": "Quarry.Internal:%d" % srv.port})
        check(st == 200, "a host in allowed_hosts is served: %s %s" % (st, b))
        st, b = srv.call("GET", "/tables", headers={"Host": "quarry.internal.evil"})
        check(st == 403, "only the names listed: %s" % st)
        st, b = srv.call("POST", "/sql", {"query": "SELECT 3"},
                         headers={"Origin": "https://other.example:3000"})
        check(st == 200, "an Origin in allowed_hosts may write: %s %s" % (st, b))
    finally:
        srv.stop()
    # with an API key, Bearer auth protects; Host and Origin are not checked
    data3 = os.path.join(dd.path, "guards3")
    rc, out, _ = run(["key", "add", "k", "--scope", "admin"], data3)
    key = out.strip()
    srv = Server(data3, dd.path)
    try:
        st, b = srv.call("POST", "/sql", {"query": "SELECT 4"},
                         headers={"Host": "db.example", "Origin": "https://app.example",
                                  "Authorization": "Bearer " + key})
        check(rc == 0 and st == 200, "with a key, any Host and Origin: %s %s" % (st, b))
    finally:
        srv.stop()


def main():
    with DataDir() as dd:
        test_browser_guards(dd)
        test_tls(dd)
        test_uploads(dd)
        test_query_memory(dd)
        test_utf8(dd)
    finish()


if __name__ == "__main__":
    main()
