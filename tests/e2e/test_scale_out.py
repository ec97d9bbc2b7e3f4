"""Scale-out (issue 18, docs/scale-out.md): a throwaway PostgreSQL 15 coordinates three Quarry
nodes through postgres_fdw -- a table LIST-partitioned by section, one foreign partition per
node, the nodes started with --peers naming each other -- and everything asked through
PostgreSQL is compared with a fourth node holding all the documents, asked directly:

  - counts with column filters, GROUP BY (the partition key: aggregated on the nodes, the
    plan says so; another column: finished by PostgreSQL), text-predicate counts;
  - ORDER BY _score DESC LIMIT 10 across the partitions: the same ids with the same scores
    (to 1e-9 relative), which takes global BM25 statistics: each node alone scores with its
    own, and the first case checks that they would differ;
  - use_remote_estimate reads Quarry's EXPLAIN: PostgreSQL's row estimate of a partition is
    the node's own;
  - quarry.matches evaluated by PostgreSQL itself is an error (0A000), never an answer;
  - INSERT / UPDATE / DELETE routed by the partition key, visible at once, and the other
    nodes' statistics refreshed (scores again equal one node's after the same insert);
  - a node stopped: a query that needs it fails with postgres_fdw's connection error, a
    ranked query on a live node fails with Quarry's 08006 naming the peer, a count on a
    live node still answers, and a node started with --peer-unreachable warn answers with a
    warning.

One PostgreSQL and four Quarry servers serve every case; all are stopped at the end."""
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from qtest import BIN, DataDir, check, finish, skip  # noqa: E402
from pg_server import PgServe  # noqa: E402
from conformance import PG_BIN, Postgres, free_port  # noqa: E402

ROOT = os.path.join(HERE, "..", "..")
CORPUS = os.path.join(ROOT, "corpora", "debian-packages", "docs.jsonl.gz")
SCHEMA = os.path.join(ROOT, "corpora", "debian-packages", "schema.json")
EVERY = 3          # every 3rd package: about 21,000 documents over the whole alphabet
N_NODES = 3
QUERIES = ["python", "terminal emulator", "library AND development", '"window manager"',
           "title:rust OR compil*", "game -strategy", "haskell^2 OR ocaml"]


def install_extension():
    """The coordinator's side (make pg-extension): copy src/pgext into PostgreSQL 15's
    extension folder when it is not there yet (make check installs it as root first)."""
    share = subprocess.run([PG_BIN + "/pg_config", "--sharedir"], capture_output=True,
                           text=True).stdout.strip()
    dest = os.path.join(share, "extension")
    for f in ("quarry.control", "quarry--1.0.sql"):
        src = os.path.join(ROOT, "src", "pgext", f)
        dst = os.path.join(dest, f)
        with open(src, "rb") as a:
            want = a.read()
        if os.path.exists(dst) and open(dst, "rb").read() == want:
            continue
        try:
            shutil.copyfile(src, dst)
        except OSError as e:
            return "cannot install %s into %s (%s): run make pg-extension as root" % (f, dest, e)
    return None


def load_corpus(work):
    docs = []
    with gzip.open(CORPUS, "rt") as f:
        for i, line in enumerate(f):
            if i % EVERY == 0:
                docs.append(json.loads(line))
    # sections to nodes: greedy by size over the first two nodes; the third is DEFAULT
    by = {}
    for d in docs:
        by[d["section"]] = by.get(d["section"], 0) + 1
    lists, sizes = [[], []], [0, 0]
    for sec, n in sorted(by.items(), key=lambda kv: (-kv[1], kv[0])):
        if sum(sizes) + n > 2 * len(docs) / 3 and lists[0] and lists[1]:
            continue
        k = 0 if sizes[0] <= sizes[1] else 1
        lists[k].append(sec)
        sizes[k] += n
    node_of = {}
    for k in range(2):
        for sec in lists[k]:
            node_of[sec] = k
    paths = [os.path.join(work, "shard%d.jsonl" % k) for k in range(N_NODES)]
    outs = [open(p, "w") for p in paths]
    for d in docs:
        outs[node_of.get(d["section"], 2)].write(json.dumps(d) + "\n")
    for o in outs:
        o.close()
    allp = os.path.join(work, "all.jsonl")
    with open(allp, "w") as o:
        for d in docs:
            o.write(json.dumps(d) + "\n")
    return lists, paths, allp, len(docs)


def lit(s):
    return "'" + s.replace("'", "''") + "'"


def close(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))


class Cluster:
    def __init__(self, work, d):
        self.work, self.d = work, d
        self.lists, shards, allp, self.n_docs = load_corpus(work)
        self.http = [free_port() for _ in range(N_NODES)]
        self.nodes, self.all_node, self.pg = [], None, None
        datas = [os.path.join(d, "node%d" % k) for k in range(N_NODES)] + [os.path.join(d, "all")]
        # imports run two at a time (the machine's cores), before any server holds a directory
        jobs = [subprocess.Popen([BIN, "import", "packages", p, "--schema", SCHEMA, "--data", dd],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for p, dd in zip(shards + [allp], datas)]
        self.import_ok = all(j.wait(timeout=600) == 0 for j in jobs)
        for k in range(N_NODES):
            peers = ",".join("http://127.0.0.1:%d" % self.http[j] for j in range(N_NODES) if j != k)
            extra = ["--http", "127.0.0.1:%d" % self.http[k], "--peers", peers]
            if k == 1:
                extra += ["--peer-unreachable", "warn"]
            self.nodes.append(PgServe(datas[k], work, extra=extra))
        self.all_node = PgServe(datas[N_NODES], work)

    def started(self):
        return self.import_ok and all(n.pg_port for n in self.nodes + [self.all_node])

    def coordinator(self):
        self.pg = Postgres(self.work)
        sql = ["CREATE EXTENSION postgres_fdw", "CREATE EXTENSION quarry"]
        for k, n in enumerate(self.nodes):
            sql += ["CREATE SERVER n%d FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', "
                    "port '%d', dbname 'quarry', extensions 'quarry', use_remote_estimate 'true', "
                    "fetch_size '1000', fdw_tuple_cost '0.2')" % (k, n.pg_port),
                    "CREATE USER MAPPING FOR postgres SERVER n%d OPTIONS (user 'fdw')" % k]
        sql += ["CREATE SCHEMA staging",
                "IMPORT FOREIGN SCHEMA public LIMIT TO (packages) FROM SERVER n0 INTO staging",
                "CREATE TABLE pkgs (LIKE staging.packages, _score real) PARTITION BY LIST (section)"]
        for k in range(N_NODES):
            bound = ("IN (%s)" % ", ".join(lit(s) for s in self.lists[k])) if k < 2 else "DEFAULT"
            sql.append("CREATE FOREIGN TABLE pkgs_n%d PARTITION OF pkgs %s SERVER n%d "
                       "OPTIONS (schema_name 'public', table_name 'packages')" %
                       (k, "FOR VALUES " + bound if k < 2 else bound, k))
        return self.pg.psql("; ".join(sql))

    def stop(self):
        for n in self.nodes + [self.all_node]:
            if n:
                n.stop()
        if self.pg:
            self.pg.stop()


def coord(c, sql):
    """Rows of sql through the coordinator (partitionwise aggregation on), '|'-separated."""
    rc, out, err = c.pg.psql("SET enable_partitionwise_aggregate = on; " + sql)
    return rc, [l for l in out.splitlines() if l and l != "SET"], err


def node(n, sql):
    rc, out, err = n.psql("-At", "-v", "ON_ERROR_STOP=1", "-c", sql)
    return rc, [l for l in out.splitlines() if l], err


def top10(rows):
    out = []
    for r in rows:
        i, s = r.rsplit("|", 1)
        out.append((i, float(s)))
    return out


def same_top(a, b):
    return len(a) == len(b) and all(x[0] == y[0] and close(x[1], y[1]) for x, y in zip(a, b))


def case_counts_and_groups(c):
    for where in ["installed_size_kb > 1000", "priority = 'optional' AND n_depends >= 3",
                  "essential"]:
        q = "SELECT count(*) FROM %%s WHERE %s" % where
        r1, a, e1 = coord(c, q % "pkgs")
        r2, b, e2 = node(c.all_node, q % "packages")
        check(r1 == 0 and r2 == 0 and a == b and a, "count with %s: %s vs one node %s %s%s"
              % (where, a, b, e1, e2))
    check(c.n_docs > 15000, "corpus of %d documents" % c.n_docs)
    rc, a, err = coord(c, "SELECT count(*) FROM pkgs")
    check(rc == 0 and a == [str(c.n_docs)], "every document is behind the coordinator: %s %s"
          % (a, err))
    # GROUP BY the partition key: aggregated on each node (partitionwise, pushed down)
    g = ("SELECT section, count(*), sum(installed_size_kb) FROM %s WHERE {m} "
         "GROUP BY section HAVING count(*) > 2 ORDER BY section")
    r1, a, e1 = coord(c, g.format(m="quarry.matches(body, 'library')") % "pkgs")
    r2, b, e2 = node(c.all_node, g.format(m="body @@ 'library'") % "packages")
    check(r1 == 0 and r2 == 0 and a == b and len(a) > 5, "GROUP BY section over a text predicate "
          "(%d groups) equals one node's: %s %s" % (len(a), e1, e2))
    rc, plan, err = coord(c, "EXPLAIN VERBOSE " + g.format(m="quarry.matches(body, 'library')")
                          % "pkgs")
    text = "\n".join(plan)
    check(rc == 0 and text.count("Relations: Aggregate on") == N_NODES and
          "GROUP BY 1 HAVING" in text and "quarry.matches(body, 'library'::text)" in text,
          "GROUP BY the partition key is aggregated on every node: %s %s" % (text[-1500:], err))
    # GROUP BY another column: PostgreSQL finishes it
    g2 = "SELECT priority, count(*) FROM %s WHERE {m} GROUP BY priority ORDER BY priority"
    r1, a, e1 = coord(c, g2.format(m="quarry.matches(title, 'tool OR utility')") % "pkgs")
    r2, b, e2 = node(c.all_node, g2.format(m="title @@ 'tool OR utility'") % "packages")
    check(r1 == 0 and r2 == 0 and a == b and a, "GROUP BY priority equals one node's: %s %s %s %s"
          % (a, b, e1, e2))


def case_text(c):
    for q in QUERIES:
        r1, a, e1 = coord(c, "SELECT count(*) FROM pkgs WHERE quarry.matches(body, %s)" % lit(q))
        r2, b, e2 = node(c.all_node, "SELECT count(*) FROM packages WHERE body @@ %s" % lit(q))
        check(r1 == 0 and r2 == 0 and a == b and a != ["0"], "text count of %r: %s vs %s %s%s"
              % (q, a, b, e1, e2))
        r1, a, e1 = coord(c, "SELECT id, _score FROM pkgs WHERE quarry.matches(body, %s) "
                             "ORDER BY _score DESC, id LIMIT 10" % lit(q))
        r2, b, e2 = node(c.all_node, "SELECT id, score() FROM packages WHERE body @@ %s "
                                     "ORDER BY score() DESC, id LIMIT 10" % lit(q))
        ta, tb = top10(a) if r1 == 0 else [], top10(b) if r2 == 0 else []
        check(len(tb) == 10 and same_top(ta, tb), "top-10 of %r through PostgreSQL equals one "
              "node's:\n  %s\n  %s %s%s" % (q, ta, tb, e1, e2))
    # the title field, a filter beside the predicate
    q = "SELECT id, _score FROM %s WHERE {m} AND installed_size_kb < 5000 ORDER BY {s} DESC, id LIMIT 10"
    r1, a, e1 = coord(c, q.format(m="quarry.matches(title, 'library')", s="_score") % "pkgs")
    r2, b, e2 = node(c.all_node, q.format(m="title @@ 'library'", s="score()") % "packages")
    check(r1 == 0 and r2 == 0 and same_top(top10(a), top10(b)) and len(a) == 10,
          "top-10 on title with a filter equals one node's: %s %s %s %s" % (a, b, e1, e2))
    # each node alone holds a part of the statistics: without the exchange it would score
    # differently, so the equalities above say something
    rc, st = c.nodes[0].call("POST", "/tables/packages/bm25_stats", {"terms": [["body", "python"]]})
    rc2, st2 = c.all_node.call("POST", "/tables/packages/bm25_stats",
                               {"terms": [["body", "python"]]})
    check(rc == 200 and rc2 == 200 and 0 < st["df"][0] < st2["df"][0] and
          st["docs"] < st2["docs"], "a node's own statistics are a part of the whole: %s %s"
          % (st, st2))


def case_explain(c):
    # the remote EXPLAIN parsed: PostgreSQL's estimate of a partition is the node's own
    k = 0
    rc, plan, err = coord(c, "EXPLAIN SELECT id FROM pkgs_n0 WHERE quarry.matches(body, 'python')")
    m = re.search(r"rows=(\d+)", plan[0]) if plan else None
    rc2, own, err2 = node(c.nodes[k], "EXPLAIN SELECT id FROM public.packages "
                                      "WHERE (quarry.matches(body, 'python'::text))")
    m2 = re.search(r"rows=(\d+)", own[0]) if own else None
    check(rc == 0 and rc2 == 0 and m and m2 and m.group(1) == m2.group(1),
          "use_remote_estimate takes the node's row estimate: %s / %s %s%s" % (plan[:1], own[:1],
                                                                               err, err2))
    rc, plan, err = coord(c, "EXPLAIN VERBOSE SELECT id, _score FROM pkgs WHERE "
                             "quarry.matches(body, 'python') ORDER BY _score DESC LIMIT 10")
    text = "\n".join(plan)
    check(rc == 0 and text.count("ORDER BY _score DESC") == N_NODES and
          text.count("quarry.matches(body, 'python'::text)") == N_NODES,
          "the predicate and the order are sent to every node: %s %s" % (text[-2000:], err))
    # a word in 60% of the packages (thousands of matches a node): the nodes' sorts cost
    # less than shipping every match, so PostgreSQL merges their sorted streams and stops
    # after 10 rows rather than fetching all matches to sort them itself
    q = ("SELECT id, _score FROM pkgs WHERE quarry.matches(body, 'package') "
         "ORDER BY _score DESC, id LIMIT 10")
    rc, plan, err = coord(c, "EXPLAIN VERBOSE " + q)
    text = "\n".join(plan)
    check(rc == 0 and "Merge Append" in text and
          text.count("ORDER BY _score DESC NULLS FIRST, id ASC NULLS LAST") == N_NODES,
          "a common word's top-k is merged from the nodes' sorted answers: %s %s"
          % (text[-2000:], err))
    r1, a, e1 = coord(c, q)
    r2, b, e2 = node(c.all_node, "SELECT id, score() FROM packages WHERE body @@ 'package' "
                                 "ORDER BY score() DESC, id LIMIT 10")
    check(r1 == 0 and r2 == 0 and len(a) == 10 and same_top(top10(a), top10(b)),
          "and equals one node's top-10: %s / %s %s%s" % (a, b, e1, e2))


def case_local_error(c):
    rc, out, err = c.pg.psql("SELECT quarry.matches('some text', 'text')")
    check(rc != 0 and "quarry.matches() can only run on a Quarry node" in err,
          "quarry.matches evaluated by PostgreSQL is an error: %s" % err)
    rc, out, err = c.pg.psql("CREATE TABLE loc (body text); INSERT INTO loc VALUES ('python'); "
                             "SELECT count(*) FROM loc WHERE quarry.matches(body, 'python')")
    check(rc != 0 and "can only run on a Quarry node" in err and "HINT" in err,
          "on a local table too, with a hint: %s" % err)
    rc, out, err = node(c.nodes[0], "SELECT count(*) FROM packages WHERE "
                                    "public.matches(body, 'python')")
    check(rc != 0 and "function public.matches(...) does not exist" in err,
          "Quarry accepts quarry.matches, not another schema's: %s" % err)


def case_writes(c):
    sec = c.lists[1][0]  # a section of node 1
    body = "zyzzogeton quarrytestword python packaging helper"
    cols = "id, title, body, section, priority, installed_size_kb"
    vals = "%s, 'zyzzogeton helper', %s, %s, 'optional', 42" % (lit("zz-scale-1"), lit(body), lit(sec))
    rc, out, err = c.pg.psql("INSERT INTO pkgs (%s) VALUES (%s)" % (cols, vals))
    check(rc == 0, "routed INSERT through the partitioned table: %s" % err)
    rc2, out2, err2 = node(c.all_node, "INSERT INTO packages (%s) VALUES (%s)" % (cols, vals))
    rc, a, err = node(c.nodes[1], "SELECT count(*) FROM packages WHERE id = 'zz-scale-1'")
    rc3, b, _ = node(c.nodes[0], "SELECT count(*) FROM packages WHERE id = 'zz-scale-1'")
    check(a == ["1"] and b == ["0"], "the row landed on the node of its section: %s %s %s"
          % (a, b, err))
    rc, a, err = coord(c, "SELECT id, installed_size_kb FROM pkgs WHERE quarry.matches(body, "
                          "'quarrytestword')")
    check(a == ["zz-scale-1|42"], "visible at once through PostgreSQL: %s %s" % (a, err))
    # the other nodes see the new document in their statistics: scores again equal one node's
    for q in ["python", "zyzzogeton OR python"]:
        r1, a, e1 = coord(c, "SELECT id, _score FROM pkgs WHERE quarry.matches(body, %s) "
                             "ORDER BY _score DESC, id LIMIT 10" % lit(q))
        r2, b, e2 = node(c.all_node, "SELECT id, score() FROM packages WHERE body @@ %s "
                                     "ORDER BY score() DESC, id LIMIT 10" % lit(q))
        check(r1 == 0 and r2 == 0 and same_top(top10(a), top10(b)),
              "after the insert, top-10 of %r equals one node's: %s %s %s%s" % (q, a, b, e1, e2))
    rc, out, err = c.pg.psql("UPDATE pkgs SET installed_size_kb = 7 WHERE id = 'zz-scale-1'")
    rc2, a, err2 = coord(c, "SELECT installed_size_kb FROM pkgs WHERE id = 'zz-scale-1'")
    check(rc == 0 and a == ["7"], "routed UPDATE, visible: %s %s %s" % (a, err, err2))
    rc, out, err = c.pg.psql("UPDATE pkgs SET installed_size_kb = installed_size_kb + 1 "
                             "WHERE section = %s AND quarry.matches(body, 'quarrytestword')"
                             % lit(sec))
    rc2, a, _ = coord(c, "SELECT installed_size_kb FROM pkgs WHERE id = 'zz-scale-1'")
    check(rc == 0 and a == ["8"], "UPDATE pruned to one partition with a text predicate: %s %s"
          % (a, err))
    rc, out, err = c.pg.psql("DELETE FROM pkgs WHERE quarry.matches(body, 'quarrytestword')")
    rc2, a, _ = coord(c, "SELECT count(*) FROM pkgs WHERE quarry.matches(body, 'quarrytestword')")
    rc3, b, _ = node(c.nodes[1], "SELECT count(*) FROM packages WHERE id = 'zz-scale-1'")
    check(rc == 0 and a == ["0"] and b == ["0"], "routed DELETE by a text predicate: %s %s %s"
          % (a, b, err))
    node(c.all_node, "DELETE FROM packages WHERE id = 'zz-scale-1'")
    rc, a, err = coord(c, "SELECT count(*) FROM pkgs WHERE quarry.matches(body, 'python')")
    rc2, b, _ = node(c.all_node, "SELECT count(*) FROM packages WHERE body @@ 'python'")
    check(a == b and a, "counts equal one node's after the writes: %s %s %s" % (a, b, err))


def case_node_stopped(c):
    c.nodes[2].stop()
    rc, out, err = c.pg.psql("SELECT count(*) FROM pkgs WHERE quarry.matches(body, 'python')")
    check(rc != 0 and 'could not connect to server "n2"' in err,
          "a query that needs the stopped node fails with postgres_fdw's error: %s" % err)
    # node 0's own partition: counting needs no peer, ranking needs every peer's statistics
    rc, out, err = c.pg.psql("SELECT count(*) FROM pkgs WHERE section = %s AND "
                             "quarry.matches(body, 'python')" % lit(c.lists[0][0]))
    check(rc == 0 and out.strip().isdigit(), "a count on a live node still answers: %s %s"
          % (out, err))
    rc, out, err = c.pg.psql("SELECT id, _score FROM pkgs WHERE section = %s AND "
                             "quarry.matches(body, 'python') ORDER BY _score DESC LIMIT 3"
                             % lit(c.lists[0][0]))
    want = 'could not reach peer "http://127.0.0.1:%d" for the BM25 statistics of table ' \
           '"packages"' % c.http[2]
    check(rc != 0 and want in err and "connect" in err,
          "ranking on a live node fails naming the stopped peer: %s" % err)
    p = subprocess.run(["psql", "-X", "-At", "-v", "VERBOSITY=verbose", "-c",
                        "SELECT id FROM packages WHERE body @@ 'python' ORDER BY score() DESC"],
                       env=c.nodes[0].env(), capture_output=True, text=True, timeout=60)
    check(p.returncode != 0 and "ERROR:  08006: could not reach peer" in p.stderr,
          "the node's own answer is SQLSTATE 08006: %s" % p.stderr)
    st, body = c.nodes[0].call("GET", "/tables/packages/search?q=python&limit=3")
    check(st == 502 and body.get("error", {}).get("code") == "peer_unavailable",
          "HTTP search answers 502 peer_unavailable: %s %s" % (st, body))
    # node 1 was started with --peer-unreachable warn: it answers, and says so
    st, body = c.nodes[1].call("GET", "/tables/packages/search?q=python&limit=3")
    warns = body.get("warnings", []) if st == 200 else []
    check(st == 200 and len(body.get("hits", [])) == 3 and warns and
          "leave out 1 of 2 peers" in warns[0] and str(c.http[2]) in warns[0],
          "with --peer-unreachable warn a ranked search answers with a warning: %s %s" % (st, body))
    rc = subprocess.run(["psql", "-X", "-At", "-c", "SELECT id FROM packages WHERE body @@ "
                         "'python' ORDER BY score() DESC LIMIT 1"], env=c.nodes[1].env(),
                        capture_output=True, text=True)
    check(rc.returncode == 0 and "WARNING:  BM25 statistics of table" in rc.stderr,
          "and the PG port sends a WARNING: %s" % rc.stderr)


def main():
    if not os.path.exists(PG_BIN + "/initdb"):
        skip("PostgreSQL 15 is not installed (make deps installs postgresql-15)")
    why = install_extension()
    if why:
        check(False, why)
        finish()
    with DataDir() as d, tempfile.TemporaryDirectory(prefix="scale-") as work:
        c = None
        try:
            c = Cluster(work, d.path)
            if not check(c.started(), "three nodes and a whole one imported and started"):
                finish()
            rc, out, err = c.coordinator()
            if not check(rc == 0, "coordinator: postgres_fdw, quarry, partitions: %s" % err):
                finish()
            for case in (case_counts_and_groups, case_text, case_explain, case_local_error,
                         case_writes, case_node_stopped):
                try:
                    case(c)
                except Exception as e:  # a case's crash is its failure, the others still run
                    import traceback
                    check(False, "%s raised:\n%s" % (case.__name__, traceback.format_exc()))
        finally:
            if c:
                c.stop()
    finish()


if __name__ == "__main__":
    main()
