"""The PostgreSQL conformance suite's shared harness (tests/e2e/test_pg_conformance.py).

One Quarry server (HTTP + PG port) and, only when a client module asks for it, one
throwaway PostgreSQL 15 cluster (initdb in a temporary folder, a free loopback port)
serve every client module; each module is tests/e2e/conformance/c_<client>.py with a
`run(ctx)` function.  Checks go through ctx.check so the runner can report the pass
counts per client."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from qtest import check as _check  # noqa: E402
from pg_server import PgServe  # noqa: E402

PG_BIN = "/usr/lib/postgresql/15/bin"
NODE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pg_node")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Postgres:
    """A throwaway PostgreSQL 15 cluster on 127.0.0.1, trust auth, stopped by stop()."""

    def __init__(self, work):
        if os.geteuid() == 0:
            os.chmod(work, 0o711)  # the postgres user must reach its folder inside
        self.dir = tempfile.mkdtemp(prefix="pg-", dir=work)
        os.chmod(self.dir, 0o777)
        os.chmod(work, 0o711)  # the postgres user passes through the (private) work folder
        self.port = free_port()
        self.as_pg = [] if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--"]
        subprocess.run(self.as_pg + [PG_BIN + "/initdb", "-D", self.dir + "/data", "--no-locale",
                                     "-E", "UTF8", "-A", "trust", "-U", "postgres"],
                       check=True, capture_output=True)
        subprocess.run(self.as_pg + [PG_BIN + "/pg_ctl", "-D", self.dir + "/data", "-l",
                                     self.dir + "/log", "-w", "-o",
                                     "-p %d -k %s -c listen_addresses=127.0.0.1" % (self.port, self.dir),
                                     "start"], check=True, capture_output=True)

    def env(self, db="postgres"):
        e = dict(os.environ)
        e.update({"PGHOST": "127.0.0.1", "PGPORT": str(self.port), "PGUSER": "postgres",
                  "PGDATABASE": db})
        return e

    def psql(self, sql, db="postgres"):
        p = subprocess.run(["psql", "-X", "-v", "ON_ERROR_STOP=1", "-At", "-c", sql],
                           env=self.env(db), capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr

    def stop(self):
        subprocess.run(self.as_pg + [PG_BIN + "/pg_ctl", "-D", self.dir + "/data", "-m", "immediate",
                                     "stop"], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


class Ctx:
    """What every client module gets: the Quarry server (srv: HTTP port srv.port, PG
    port srv.pg_port, srv.psql(...), srv.env()), a work folder, PostgreSQL on demand
    (ctx.postgres()), and check() counting per client."""

    def __init__(self, data, work):
        self.data = data
        self.work = work
        self.srv = PgServe(data, work)
        self._pg = None
        self.client = None
        self.counts = {}

    def postgres(self):
        if self._pg is None:
            self._pg = Postgres(self.work)
        return self._pg

    def check(self, cond, what):
        ok, bad = self.counts.get(self.client, (0, 0))
        self.counts[self.client] = (ok + 1, bad) if cond else (ok, bad + 1)
        return _check(cond, "[%s] %s" % (self.client, what))

    def dsn(self, user="tester"):
        return "host=127.0.0.1 port=%d user=%s dbname=quarry" % (self.srv.pg_port, user)

    def close(self):
        self.srv.stop()
        if self._pg is not None:
            self._pg.stop()

    def node(self, script, timeout=120, args=()):
        """Run conformance/<script> (ES module) with node, its npm packages from
        tests/e2e/pg_node (npm_deps.sh installs them; missing ones fail the
        client).  The script prints one JSON line per check, {"ok": bool,
        "what": "..."}; each becomes a ctx.check.  Returns False when it could
        not run."""
        deps = os.path.join(os.path.dirname(NODE_DIR), "..", "npm_deps.sh")
        if not shutil.which("node"):
            return self.check(False, "node is not installed (make deps installs Debian nodejs)")
        p = subprocess.run([deps, NODE_DIR], capture_output=True, text=True, timeout=900)
        if not self.check(p.returncode == 0, "npm packages of tests/e2e/pg_node installed: " +
                          p.stderr[-500:]):
            return False
        env = dict(os.environ, PGPORT=str(self.srv.pg_port), PGHOST="127.0.0.1",
                   NODE_DIR=NODE_DIR)
        p = subprocess.run(["node", os.path.join(os.path.dirname(os.path.abspath(__file__)), script)] +
                           list(args),
                           env=env, capture_output=True, text=True, timeout=timeout)
        n = 0
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                self.check(r["ok"], r["what"])
                n += 1
        return self.check(p.returncode == 0 and n > 0, "%s ran to the end (%d checks): %s" %
                          (script, n, (p.stderr or p.stdout)[-1500:]))
