"""pgbench: `pgbench -i` (tables without keys made, loaded with COPY ... FREEZE, VACUUM,
primary keys added afterwards: Quarry rebuilds each table keyed by the column), the
built-in TPC-B-like script, and a custom script whose writes are checked: the sum of the
deltas in pgbench_history equals the change of the balances."""
import os
import subprocess


def run(ctx):
    env = ctx.srv.env()
    p = subprocess.run(["pgbench", "-i", "-s", "1", "-q"], env=env, capture_output=True, text=True,
                       timeout=600)
    if not ctx.check(p.returncode == 0, "pgbench -i: %s" % p.stderr[-1500:]):
        return
    rc, out, err = ctx.srv.psql("-At", "-c",
                                "SELECT (SELECT count(*) FROM pgbench_accounts), "
                                "(SELECT count(*) FROM pgbench_branches), "
                                "(SELECT count(*) FROM pgbench_tellers), "
                                "(SELECT count(*) FROM pgbench_history), "
                                "(SELECT sum(abalance) FROM pgbench_accounts)")
    ctx.check(rc == 0 and out.strip() == "100000|1|10|0|0", "pgbench -i loaded the tables: %r %r" % (out, err))
    rc, out, err = ctx.srv.psql("-At", "-c", "SELECT conname FROM pg_constraint WHERE contype = 'p' "
                                "AND conname LIKE 'pgbench%' ORDER BY 1")
    ctx.check(rc == 0 and out.split() == ["pgbench_accounts_pkey", "pgbench_branches_pkey",
                                          "pgbench_tellers_pkey"],
              "the keys pgbench added are primary keys now: %r %r" % (out, err))
    rc, out, err = ctx.srv.psql("-c", "INSERT INTO pgbench_branches VALUES (1, 0, '')")
    ctx.check(rc != 0 and "duplicate key" in err, "the added key is enforced: %r" % err)
    p = subprocess.run(["pgbench", "-n", "-t", "20", "-c", "2"], env=env, capture_output=True,
                       text=True, timeout=600)
    ctx.check(p.returncode == 0 and "number of failed transactions: 0" in p.stdout,
              "the built-in script: %s %s" % (p.stdout[-600:], p.stderr[-600:]))
    script = os.path.join(ctx.work, "pgbench_custom.sql")
    with open(script, "w") as f:
        f.write("\\set aid random(1, 100000)\n"
                "\\set delta random(-5000, 5000)\n"
                "BEGIN;\n"
                "UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;\n"
                "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n"
                "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) "
                "VALUES (1, 1, :aid, :delta, CURRENT_TIMESTAMP);\n"
                "END;\n")
    rc, before, err = ctx.srv.psql("-At", "-c", "SELECT sum(abalance), (SELECT coalesce(sum(delta), 0) "
                                   "FROM pgbench_history) FROM pgbench_accounts")
    p = subprocess.run(["pgbench", "-n", "-f", script, "-t", "40", "-c", "2"], env=env,
                       capture_output=True, text=True, timeout=600)
    ctx.check(p.returncode == 0 and "processed: 80/80" in p.stdout,
              "the custom script: %s %s" % (p.stdout[-600:], p.stderr[-600:]))
    rc, after, err = ctx.srv.psql("-At", "-c", "SELECT sum(abalance), (SELECT sum(delta) FROM "
                                  "pgbench_history), (SELECT count(*) FROM pgbench_history) "
                                  "FROM pgbench_accounts")
    b = [int(x) for x in before.strip().split("|")]
    a = [int(x) for x in after.strip().split("|")]
    ctx.check(rc == 0 and a[0] - b[0] == a[1] - b[1], "balances moved by the history's deltas: %r %r" %
              (before, after))
