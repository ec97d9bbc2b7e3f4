"""PostgreSQL drivers, ORMs and tools against Quarry's PG port, unmodified (issue:
"Every PostgreSQL driver, ORM and tool works against Quarry unmodified").

Every module tests/e2e/conformance/c_*.py is one client (psql, psycopg2, psycopg 3,
SQLAlchemy, Django, pandas, node-pg, postgres.js, knex, JDBC, pgcli, pgbench,
pg_dump, postgres_fdw...); all share one Quarry server and, when asked, one throwaway
PostgreSQL 15.  A module whose client is not installed fails the run (make deps
installs every one).  The closing lines give the pass counts per client."""
import importlib
import os
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from qtest import DataDir, check, finish  # noqa: E402
from conformance import Ctx  # noqa: E402


def main():
    only = os.environ.get("CONFORMANCE_ONLY")
    mods = sorted(f[:-3] for f in os.listdir(os.path.join(HERE, "conformance"))
                  if f.startswith("c_") and f.endswith(".py"))
    with DataDir() as d, tempfile.TemporaryDirectory(prefix="conf-") as work:
        ctx = Ctx(os.path.join(d.path, "data"), work)
        try:
            if not check(ctx.srv.pg_port is not None, "quarry serve with a PG port started"):
                print(ctx.srv.text()[-3000:])
                finish()
            for m in mods:
                if only and only not in m:
                    continue
                ctx.client = m[2:]
                t0 = time.monotonic()
                try:
                    importlib.import_module("conformance." + m).run(ctx)
                except Exception:
                    ctx.check(False, "raised:\n" + traceback.format_exc())
                ok, bad = ctx.counts.get(ctx.client, (0, 0))
                print("client %-14s %4d passed, %d failed (%.1fs)" % (ctx.client, ok, bad,
                                                                     time.monotonic() - t0), flush=True)
        finally:
            ctx.close()
    finish()


if __name__ == "__main__":
    main()
