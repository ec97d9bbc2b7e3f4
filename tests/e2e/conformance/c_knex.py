"""knex (npm, with node-postgres, installed by make deps into tests/e2e/knex/): migrations
with knex's own bookkeeping tables, increments() keys returned by insert ... returning,
updates, deletes, joins, aggregates, a transaction rolled back, and the migration rolled
back (DROP TABLE)."""
import json
import os
import subprocess

DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "knex")


def run(ctx):
    if not ctx.check(os.path.isdir(os.path.join(DIR, "node_modules", "knex")),
                     "knex is installed (make deps: tests/npm_deps.sh)"):
        return
    p = subprocess.run(["node", os.path.join(DIR, "knex_conformance.js"), str(ctx.srv.pg_port)],
                       cwd=DIR, capture_output=True, text=True, timeout=180)
    if not ctx.check(p.returncode == 0, "the knex program ran: %s" % p.stderr[-2500:]):
        return
    r = json.loads(p.stdout.strip().splitlines()[-1])
    ctx.check(r["migrated"] == [1, ["20240101000000_init.js"]] and r["again"] == 0,
              "migrate.latest, then nothing left to run: %r" % r)
    ctx.check(r["has"] == [True, True, False], "hasTable / hasColumn: %r" % r["has"])
    ctx.check(r["ids"] == [1, 2, 3], "increments() ids from insert ... returning: %r" % r["ids"])
    ctx.check(r["users"] == [{"id": 1, "email": "a@x", "visits": 5}, {"id": 2, "email": "b@x", "visits": 0}],
              "increment, delete, default: %r" % r["users"])
    ctx.check([[t["user_id"], t["total"], int(t["n"])] for t in r["totals"]] == [[1, 4, 2], [2, 0, 1]],
              "sum / count per group: %r" % r["totals"])
    ctx.check(r["joined"] == [{"email": "a@x", "amount": 1.5}, {"email": "a@x", "amount": 2.5}],
              "join: %r" % r["joined"])
    ctx.check(r["rolled_back"] == 0, "transaction rolled back: %r" % r["rolled_back"])
    ctx.check(r["rollback"] == 1 and r["gone"] is False, "migrate.rollback dropped the tables: %r" % r)
