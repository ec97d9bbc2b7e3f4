"""psycopg 3 (Debian python3-psycopg): server-side (named) cursors over the
extended protocol, scrollable and WITH HOLD; prepared statements (protocol
named statements) and SQL PREPARE/EXECUTE on one namespace; pipeline mode,
with an error skipping to the Sync; COPY text and binary both ways; the table
OID and column number of RowDescription.  Answers are compared with a model of
the table."""
import datetime

N = 60


def run(ctx):
    try:
        import psycopg
    except ImportError:
        ctx.check(False, "psycopg 3 is not installed (make deps installs python3-psycopg)")
        return
    conn = psycopg.connect(ctx.dsn("pg3"))

    def recover():
        """After a failed section: roll back, or reconnect when even that fails."""
        nonlocal conn
        try:
            conn.rollback()
        except psycopg.Error:
            conn = psycopg.connect(ctx.dsn("pg3"))

    model = {i: (i * 13 % 29, "name %d" % i, i % 3 == 0) for i in range(1, N + 1)}

    def table():
        return [tuple(r) for r in conn.execute("SELECT id, n, name, ok FROM p3 ORDER BY id")]

    def want():
        return [(i,) + model[i] for i in sorted(model)]

    conn.execute("CREATE TABLE p3 (id bigint PRIMARY KEY, n integer, name text, ok boolean, "
                 "at timestamptz)")
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO p3 (id, n, name, ok) VALUES (%s, %s, %s, %s)",
                        [(i,) + model[i] for i in sorted(model)])
    conn.commit()
    ctx.check(table() == want(), "executemany INSERT")

    # named cursors: DECLARE through the extended protocol, FETCH FORWARD n
    try:
        with conn.cursor(name="p3_named") as cur:
            cur.itersize = 7
            cur.execute("SELECT id, name FROM p3 WHERE n >= %s ORDER BY id", (10,))
            first = cur.fetchmany(5)
            rest = list(cur)
        conn.commit()
        exp = [(i, model[i][1]) for i in sorted(model) if model[i][0] >= 10]
        ctx.check(first + rest == exp, "named cursor with a parameter, fetchmany then iteration")
    except Exception as e:
        recover()
        ctx.check(False, "named cursor: %r" % e)
    try:
        with conn.cursor(name="p3_scroll", scrollable=True) as cur:
            cur.execute("SELECT id FROM p3 ORDER BY id")
            a = cur.fetchmany(3)
            cur.scroll(-2)
            b = cur.fetchone()
            cur.scroll(10, mode="absolute")
            c = cur.fetchone()
        conn.commit()
        ctx.check(a == [(1,), (2,), (3,)] and b == (2,) and c == (11,),
                  "scrollable cursor: relative back and absolute: %r %r %r" % (a, b, c))
    except Exception as e:
        recover()
        ctx.check(False, "scrollable cursor: %r" % e)
    try:
        with conn.cursor(name="p3_hold", withhold=True) as cur:
            cur.execute("SELECT count(*) FROM p3")
            conn.commit()  # a WITH HOLD cursor survives the commit
            got = cur.fetchone()
        ctx.check(got == (N,), "WITH HOLD cursor read after COMMIT: %r" % (got,))
    except Exception as e:
        recover()
        ctx.check(False, "WITH HOLD cursor: %r" % e)

    # RowDescription: table OID and attnum of plain columns
    conn.autocommit = True
    cur = conn.execute("SELECT name, n + 1 AS m, id FROM p3 LIMIT 1")
    oid = conn.execute("SELECT oid FROM pg_class WHERE relname = 'p3'").fetchone()[0]
    att = dict(conn.execute("SELECT attname, attnum FROM pg_attribute WHERE attrelid = %s",
                            (oid,)).fetchall())
    res = cur.pgresult
    ctx.check((res.ftable(0), res.ftablecol(0)) == (oid, att.get("name")) and
              (res.ftable(1), res.ftablecol(1)) == (0, 0) and
              (res.ftable(2), res.ftablecol(2)) == (oid, att.get("id")),
              "RowDescription names table %s and columns %r: %r" %
              (oid, att, [(res.ftable(i), res.ftablecol(i)) for i in range(3)]))

    # prepared statements: psycopg's own names, and SQL PREPARE on the same namespace
    try:
        for i in (5, 6, 7, 8, 9, 10):
            got = conn.execute("SELECT n FROM p3 WHERE id = %s", (i,), prepare=True).fetchone()
            ctx.check(got == (model[i][0],), "prepared SELECT id = %d" % i)
        conn.execute("PREPARE p3_upd (int, bigint) AS UPDATE p3 SET n = n + $1 WHERE id = $2")
        conn.execute("EXECUTE p3_upd (100, 4)")
        model[4] = (model[4][0] + 100,) + model[4][1:]
        conn.execute("DEALLOCATE p3_upd")
        ctx.check(table() == want(), "SQL PREPARE / EXECUTE / DEALLOCATE")
    except Exception as e:
        ctx.check(False, "prepared statements: %r" % e)

    # pipeline mode: many Parse/Bind/Execute before one Sync
    try:
        c1, c2 = conn.cursor(), conn.cursor()
        with conn.pipeline():
            c1.execute("UPDATE p3 SET name = %s WHERE id = %s", ("piped", 1))
            c1.execute("DELETE FROM p3 WHERE id = %s", (2,))
            c2.execute("SELECT name FROM p3 WHERE id <= %s ORDER BY id", (2,))
        model[1] = (model[1][0], "piped", model[1][2])
        del model[2]
        ctx.check(c2.fetchall() == [("piped",)] and table() == want(),
                  "pipeline: UPDATE, DELETE, SELECT before one Sync")
    except Exception as e:
        ctx.check(False, "pipeline: %r" % e)
    err = None
    try:
        with conn.pipeline():
            conn.execute("SELECT 1 / %s", (0,))
            conn.execute("UPDATE p3 SET n = 0 WHERE id = %s", (5,))
    except psycopg.Error as e:
        err = e
    ctx.check(err is not None and err.sqlstate == "22012" and table() == want(),
              "pipeline: an error skips the rest to the Sync (%r)" % err)

    # COPY, text and binary, both ways
    try:
        with conn.cursor().copy("COPY p3 (id, n, name, ok) FROM STDIN") as cp:
            for i in range(100, 110):
                cp.write_row((i, i, "copied %d" % i, None))
                model[i] = (i, "copied %d" % i, None)
        ctx.check(table() == want(), "COPY FROM STDIN, text rows")
        with conn.cursor().copy("COPY (SELECT id, name FROM p3 ORDER BY id) TO STDOUT") as cp:
            rows = [(int(a), b) for a, b in cp.rows()]
        ctx.check(rows == [(i, model[i][1]) for i in sorted(model)], "COPY TO STDOUT, text")
    except Exception as e:
        ctx.check(False, "COPY text: %r" % e)
    try:
        at = datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.timezone.utc)
        with conn.cursor().copy("COPY p3 (id, n, name, ok, at) FROM STDIN (FORMAT binary)") as cp:
            cp.set_types(["int8", "int4", "text", "bool", "timestamptz"])
            for i in range(200, 205):
                cp.write_row((i, -i, "bin %d é" % i, i % 2 == 0, at))
                model[i] = (-i, "bin %d é" % i, i % 2 == 0)
        ctx.check(table() == want(), "COPY FROM STDIN (FORMAT binary)")
        with conn.cursor().copy("COPY (SELECT id, n, name, ok, at FROM p3 WHERE id >= 200 "
                                "ORDER BY id) TO STDOUT (FORMAT binary)") as cp:
            cp.set_types(["int8", "int4", "text", "bool", "timestamptz"])
            rows = list(cp.rows())
        ctx.check(rows == [(i, -i, "bin %d é" % i, i % 2 == 0, at) for i in range(200, 205)],
                  "COPY TO STDOUT (FORMAT binary): %r" % rows[:2])
    except Exception as e:
        ctx.check(False, "COPY binary: %r" % e)
    conn.close()
