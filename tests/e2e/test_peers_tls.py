"""Nodes of a split table asking each other over HTTPS with an API key (quarry serve --peers
https://... --peer-ca --peer-key-file; docs/scale-out.md#security, docs/security.md).

Node B holds part of a table, serves HTTPS with a certificate of a test CA and has API keys;
node A holds the rest and names B in --peers. Compared with node C holding every document:

  - A's ranked search over HTTPS with B's search key scores as C does (and A without
    --peers does not: the statistics crossed);
  - another CA in --peer-ca: the certificate is refused, the search fails with 502
    peer_unavailable naming B and saying why;
  - B's certificate not naming the host of the URL: refused the same way;
  - no key: B answers 401, A fails naming B with a hint to set --peer-key-file, also with
    --peer-unreachable warn (a refusal is configuration, never skipped).

Every server binds 127.0.0.1 on a free port and is stopped here."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from qtest import DataDir, check, finish, run, skip, write_jsonl  # noqa: E402
from qserve import Server  # noqa: E402
from test_http_security import add_key, make_pki, openssl  # noqa: E402

SCHEMA = ('{"primary_key": "id", "fields": [{"name": "body", "type": "text", '
          '"language": "none"}]}')
QUERY = "alpha AND omega"


def corpus():
    """B: 300 documents, alpha in most, omega in none; A: 40, omega in some. So A alone
    and A with B's statistics score A's documents differently."""
    b = [{"id": i, "body": "alpha %s %s" % ("beta" * (i % 3 + 1), "gamma" if i % 4 else "")}
         for i in range(300)]
    a = [{"id": 1000 + i, "body": "alpha %s delta %s" % ("omega" if i % 3 == 0 else "",
                                                          "epsilon " * (i % 5))}
         for i in range(40)]
    return a, b


def load(dd, name, docs):
    data = os.path.join(dd, name)
    src = os.path.join(dd, name + ".jsonl")
    schema = os.path.join(dd, "schema.json")
    with open(schema, "w") as f:
        f.write(SCHEMA)
    write_jsonl(src, docs)
    rc, out, err = run(["import", "docs", src, "--schema", schema], data)
    check(rc == 0, "import %s: %s" % (name, err[-300:]))
    return data


def ranked(srv):
    st, body = srv.call("GET", "/tables/docs/search?q=" + QUERY.replace(" ", "+") + "&limit=20")
    hits = [(h["id"], h["score"]) for h in body.get("hits", [])] if st == 200 else None
    return st, body, hits


def failure(srv):
    """A ranked search expected to fail: (status, body, its "error" object)."""
    st, body, _ = ranked(srv)
    return st, body, body.get("error", {}) if isinstance(body, dict) else {}


def node_a(data, work, extra):
    a = Server(data, work, extra=extra)
    check(a.port is not None, "node A started: %s" % a.text()[-300:])
    return a


def main():
    with DataDir() as d:
        pki = os.path.join(d.path, "pki")
        try:
            make_pki(pki)
            # a certificate of the same CA for a name that is not the URL's host
            openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "wrong.key", "-out",
                     "wrong.csr", "-subj", "/CN=other.invalid"], pki)
            with open(os.path.join(pki, "wrong.cnf"), "w") as f:
                f.write("subjectAltName=DNS:other.invalid\n")
            openssl(["x509", "-req", "-in", "wrong.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                     "-CAcreateserial", "-days", "2", "-out", "wrong.pem", "-extfile",
                     "wrong.cnf"], pki)
        except (OSError, RuntimeError) as e:
            skip("openssl could not make test certificates: %s" % e)
        a_docs, b_docs = corpus()
        da, db, dc = (load(d.path, "a", a_docs), load(d.path, "b", b_docs),
                      load(d.path, "c", a_docs + b_docs))
        key = add_key(db, "peer", "search")
        key_file = os.path.join(d.path, "peer.key")
        with open(key_file, "w") as f:
            f.write(key + "\n")
        os.chmod(key_file, 0o600)
        ca, other = os.path.join(pki, "ca.pem"), os.path.join(pki, "other.pem")
        servers = []

        def b_with(cert):
            b = Server(db, d.path, extra=["--tls-cert", os.path.join(pki, cert + ".pem"),
                                          "--tls-key", os.path.join(pki, cert + ".key")])
            servers.append(b)
            check(b.port is not None, "node B started with HTTPS: %s" % b.text()[-300:])
            return b

        def a_with(url, extra, old=None):
            """Node A naming url in --peers (old, a previous node A, stopped first)."""
            if old:
                old.stop()
                servers.remove(old)
            a = node_a(da, d.path, ["--peers", url] + extra)
            servers.append(a)
            return a

        try:
            c = Server(dc, d.path)
            servers.append(c)
            st, _, want = ranked(c)
            check(st == 200 and want and len(want) == 14, "node C ranks every document: %s" % want)
            alone = node_a(da, d.path, [])
            servers.append(alone)
            st, _, own = ranked(alone)
            check(st == 200 and own and sorted(own) != sorted(want) and
                  sorted(h[0] for h in own) == sorted(h[0] for h in want),
                  "A alone scores with its own statistics, not C's: %s / %s" % (own, want))
            alone.stop()
            servers.remove(alone)

            b = b_with("server")
            url = "https://127.0.0.1:%d" % b.port
            a = a_with(url, ["--peer-ca", ca, "--peer-key-file", key_file])
            st, body, got = ranked(a)
            check(st == 200 and got == want and "warnings" not in body,
                  "A over HTTPS with B's key scores as one node holding everything: %s %s / %s"
                  % (st, got if got else body, want))
            a = a_with(url, ["--peer-ca", other, "--peer-key-file", key_file], a)
            st, body, e = failure(a)
            check(st == 502 and e.get("code") == "peer_unavailable" and
                  ('could not reach peer "%s"' % url) in e.get("message", "") and
                  "certificate" in e.get("detail", ""),
                  "a peer certificate of another CA is refused: %s %s" % (st, body))
            for warn in (False, True):
                a = a_with(url, ["--peer-ca", ca] + (["--peer-unreachable", "warn"] if warn
                                                      else []), a)
                st, body, e = failure(a)
                check(st == 502 and ('peer "%s" refused' % url) in e.get("message", "") and
                      "401" in e.get("detail", "") and "--peer-key-file" in e.get("hint", ""),
                      "without a key B refuses and A fails%s: %s %s"
                      % (" in warn mode too" if warn else "", st, body))
            b.stop()
            servers.remove(b)
            b = b_with("wrong")
            url = "https://127.0.0.1:%d" % b.port
            a = a_with(url, ["--peer-ca", ca, "--peer-key-file", key_file], a)
            st, body, e = failure(a)
            check(st == 502 and ('could not reach peer "%s"' % url) in e.get("message", "") and
                  "mismatch" in e.get("detail", ""),
                  "a peer certificate for another name is refused: %s %s" % (st, body))
        finally:
            for s in servers:
                s.stop()
    finish()


if __name__ == "__main__":
    main()
