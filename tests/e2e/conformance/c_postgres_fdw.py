"""postgres_fdw in a throwaway PostgreSQL 15 reading and writing a Quarry table.
Reads go through cursors over the extended protocol (START TRANSACTION,
DECLARE c1 CURSOR FOR SELECT ... with parameters, FETCH 100 FROM c1, CLOSE
c1, COMMIT TRANSACTION); INSERT prepares a named statement, executes it with
parameters per row and ends with DEALLOCATE.  IMPORT FOREIGN SCHEMA reads
Quarry's catalog."""
N = 250


def run(ctx):
    srv = ctx.srv
    rc, out, err = srv.psql("-At", "-v", "ON_ERROR_STOP=1", "-c",
                            "CREATE TABLE fdw_t (id bigint PRIMARY KEY, n integer, name text)", "-c",
                            "INSERT INTO fdw_t SELECT g, g %% 13, 'r' || g FROM generate_series(1, %d) g" % N)
    if not ctx.check(rc == 0, "Quarry table for postgres_fdw: %s" % err):
        return
    pg = ctx.postgres()
    setup = ("CREATE EXTENSION postgres_fdw; "
             "CREATE SERVER quarry FOREIGN DATA WRAPPER postgres_fdw "
             "OPTIONS (host '127.0.0.1', port '%d', dbname 'quarry'); "
             "CREATE USER MAPPING FOR postgres SERVER quarry OPTIONS (user 'fdw'); "
             "CREATE FOREIGN TABLE ft (id bigint, n integer, name text) SERVER quarry "
             "OPTIONS (schema_name 'public', table_name 'fdw_t')" % srv.pg_port)
    rc, out, err = pg.psql(setup)
    if not ctx.check(rc == 0, "postgres_fdw server, user mapping and foreign table: %s" % err):
        return
    rc, out, err = pg.psql("SELECT count(*), sum(id), sum(n) FROM ft")
    want = "%d|%d|%d" % (N, N * (N + 1) // 2, sum(g % 13 for g in range(1, N + 1)))
    ctx.check(rc == 0 and out.strip() == want, "SELECT through a cursor, FETCH 100 at a time: %r %s"
              % (out, err))
    rc, out, err = pg.psql("SELECT name FROM ft WHERE id = 77")
    ctx.check(rc == 0 and out.strip() == "r77", "a pushed-down WHERE: %r %s" % (out, err))
    # a generic plan keeps $1, which postgres_fdw sends with its DECLARE
    rc, out, err = pg.psql("SET plan_cache_mode = force_generic_plan; "
                           "PREPARE q(bigint) AS SELECT n FROM ft WHERE id = $1; EXECUTE q(30)")
    ctx.check(rc == 0 and out.strip().splitlines()[-1:] == [str(30 % 13)],
              "a parameter sent with DECLARE over the extended protocol: %r %s" % (out, err))
    rc, out, err = pg.psql("INSERT INTO ft SELECT g, -g, 'fdw ' || g FROM generate_series(1001, 1020) g")
    ctx.check(rc == 0 and "WARNING" not in err,
              "INSERT through postgres_fdw (prepared, executed, DEALLOCATEd): %s" % err)
    rc, out, err = srv.psql("-At", "-c", "SELECT count(*), sum(n) FROM fdw_t WHERE id > 1000")
    ctx.check(out.strip() == "20|%d" % -sum(range(1001, 1021)), "the rows landed in Quarry: %r %s"
              % (out, err))
    rc, out, err = pg.psql("UPDATE ft SET n = n + 100 WHERE id = 5")
    rc2, out2, _ = srv.psql("-At", "-c", "SELECT n FROM fdw_t WHERE id = 5")
    ctx.check(rc == 0 and out2.strip() == str(5 % 13 + 100), "UPDATE through postgres_fdw: %s %r"
              % (err, out2))
    rc, out, err = pg.psql("CREATE SCHEMA imp; IMPORT FOREIGN SCHEMA public LIMIT TO (fdw_t) "
                           "FROM SERVER quarry INTO imp; SELECT count(*) FROM imp.fdw_t")
    ctx.check(rc == 0 and out.strip().endswith(str(N + 20)),
              "IMPORT FOREIGN SCHEMA reads the catalog: %r %s" % (out, err))
