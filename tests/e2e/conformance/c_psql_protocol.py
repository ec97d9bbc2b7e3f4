"""psql against the statements around the protocol: \\set FETCH_COUNT (psql
sends BEGIN; DECLARE _psql_cursor NO SCROLL CURSOR; FETCH FORWARD n ...), the
\\copy CSV HEADER round trip, COPY errors with their line as CONTEXT,
PREPARE / EXECUTE / DEALLOCATE, DECLARE / FETCH / MOVE / CLOSE and DISCARD
ALL.  (psql 15 has no \\bind: the extended protocol is exercised by the driver
modules.)"""
import os

N = 210


def run(ctx):
    srv = ctx.srv
    rc, out, err = srv.psql("-At", "-v", "ON_ERROR_STOP=1", "-c",
                            "CREATE TABLE pq (id bigint PRIMARY KEY, n integer, name text)", "-c",
                            "INSERT INTO pq SELECT g, g %% 17, 'row ' || g FROM generate_series(1, %d) g" % N)
    if not ctx.check(rc == 0, "psql created and filled pq: %s" % err):
        return
    rc, out, err = srv.psql("-At", stdin="\\set FETCH_COUNT 7\nSELECT id FROM pq ORDER BY id;\n")
    ids = [int(x) for x in out.split()] if rc == 0 and not err.strip() else []
    ctx.check(ids == list(range(1, N + 1)), "\\set FETCH_COUNT 7 prints every row (%d): %s" %
              (len(ids), err.strip()[:200]))
    rc, out, err = srv.psql("-At", stdin="\\set FETCH_COUNT 50\nSELECT count(*) FROM pq WHERE n = 3;\n")
    ctx.check(rc == 0 and out.strip() == str(sum(1 for g in range(1, N + 1) if g % 17 == 3)),
              "FETCH_COUNT with an aggregate: %r %s" % (out, err))

    path = os.path.join(ctx.work, "pq.csv")
    rc, out, err = srv.psql("-c", "\\copy pq TO '%s' WITH (FORMAT csv, HEADER)" % path)
    with open(path) as f:
        lines = f.read().splitlines()
    ctx.check(rc == 0 and lines[0] == "id,n,name" and len(lines) == N + 1,
              "\\copy TO CSV HEADER writes the header and %d rows (%d lines): %s" % (N, len(lines), err))
    rc, out, err = srv.psql("-At", "-c", "CREATE TABLE pq2 (id bigint PRIMARY KEY, n integer, name text)",
                            "-c", "\\copy pq2 FROM '%s' WITH (FORMAT csv, HEADER)" % path,
                            "-c", "SELECT count(*), sum(id), sum(n) FROM pq2")
    want = "%d|%d|%d" % (N, N * (N + 1) // 2, sum(g % 17 for g in range(1, N + 1)))
    ctx.check(rc == 0 and out.strip().endswith(want),
              "\\copy CSV HEADER round trip keeps all %d rows: %r %s" % (N, out, err))

    bad = os.path.join(ctx.work, "bad.csv")
    with open(bad, "w") as f:
        f.write("1001,1,a\n1002,2,b\n1003,three,c\n")
    rc, out, err = srv.psql("-c", "\\copy pq2 FROM '%s' WITH (FORMAT csv)" % bad)
    ctx.check(rc != 0 and "invalid input syntax" in err and "CONTEXT:  COPY pq2, line 3" in err,
              "a bad COPY row names its line: %s" % err.strip())

    script = """
PREPARE pq_get (bigint) AS SELECT name FROM pq WHERE id = $1;
EXECUTE pq_get(42);
PREPARE pq_bump AS UPDATE pq SET n = n + $1 WHERE id = $2;
EXECUTE pq_bump(1000, 42);
EXECUTE pq_bump(1000, 43);
SELECT n FROM pq WHERE id = 42;
DEALLOCATE pq_bump;
DEALLOCATE ALL;
"""
    rc, out, err = srv.psql("-Atq", "-v", "ON_ERROR_STOP=1", stdin=script)
    ctx.check(rc == 0 and out.splitlines() == ["row 42", "%d" % (42 % 17 + 1000)],
              "PREPARE / EXECUTE / DEALLOCATE: %r %s" % (out, err))
    rc, out, err = srv.psql("-At", stdin="EXECUTE pq_get(1);\n")
    ctx.check("prepared statement \"pq_get\" does not exist" in err, "prepared statements are per session")

    script = """
BEGIN;
DECLARE c SCROLL CURSOR FOR SELECT id FROM pq WHERE id <= 10 ORDER BY id;
FETCH 3 FROM c;
MOVE FORWARD 4 IN c;
FETCH NEXT FROM c;
FETCH PRIOR FROM c;
FETCH LAST FROM c;
FETCH BACKWARD 2 FROM c;
CLOSE c;
COMMIT;
"""
    rc, out, err = srv.psql("-Atq", "-v", "ON_ERROR_STOP=1", stdin=script)
    ctx.check(rc == 0 and out.split() == ["1", "2", "3", "8", "7", "10", "9", "8"],
              "DECLARE SCROLL / FETCH / MOVE / CLOSE: %r %s" % (out, err))
    script = """
BEGIN;
DECLARE k NO SCROLL CURSOR FOR SELECT id FROM pq ORDER BY id;
FETCH 2 FROM k;
FETCH PRIOR FROM k;
ROLLBACK;
DECLARE h CURSOR WITH HOLD FOR SELECT count(*) FROM pq;
FETCH h;
DISCARD ALL;
FETCH h;
"""
    rc, out, err = srv.psql("-Atq", stdin=script)
    ctx.check("cursor can only scan forward" in err and 'cursor "h" does not exist' in err and
              out.split() == ["1", "2", str(N)],
              "NO SCROLL refuses to go back, WITH HOLD outlives its block, DISCARD ALL closes it: %r %s"
              % (out, err))
