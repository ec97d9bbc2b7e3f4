"""psycopg2 (Debian python3-psycopg2): parameters interpolated by the client
(lists become ARRAY[...], so `id = ANY(%s)` with a list), UPDATE / DELETE with
parameters, named (server-side) cursors with itersize, and COPY through
copy_expert both ways with CSV HEADER.  Answers are compared with a model."""
import io


def run(ctx):
    try:
        import psycopg2
    except ImportError:
        ctx.check(False, "psycopg2 is not installed (make deps installs python3-psycopg2)")
        return
    conn = psycopg2.connect(ctx.dsn("pg2"))
    cur = conn.cursor()
    model = {i: (i * 7 % 31, "w%d" % i) for i in range(1, 81)}
    cur.execute("CREATE TABLE p2 (id bigint PRIMARY KEY, n integer, name text)")
    cur.executemany("INSERT INTO p2 VALUES (%s, %s, %s)", [(i,) + model[i] for i in model])
    conn.commit()

    def table():
        cur.execute("SELECT id, n, name FROM p2 ORDER BY id")
        return cur.fetchall()

    def want():
        return [(i,) + model[i] for i in sorted(model)]

    ctx.check(table() == want(), "executemany INSERT")
    for ids in ([3, 5, 99], [7], []):
        try:
            cur.execute("SELECT id FROM p2 WHERE id = ANY(%s) ORDER BY id", (ids,))
            got = [r[0] for r in cur.fetchall()]
            ctx.check(got == sorted(i for i in ids if i in model), "id = ANY(%%s) with %r: %r" % (ids, got))
        except psycopg2.Error as e:
            conn.rollback()
            ctx.check(False, "id = ANY(%%s) with %r: %s" % (ids, e))
    cur.execute("UPDATE p2 SET n = n + %s WHERE id = %s", (10, 4))
    model[4] = (model[4][0] + 10, model[4][1])
    cur.execute("DELETE FROM p2 WHERE id = %s", (5,))
    del model[5]
    conn.commit()
    ctx.check(table() == want(), "UPDATE / DELETE with parameters")

    # a named cursor: DECLARE ... then FETCH FORWARD itersize
    try:
        nc = conn.cursor("p2_named")
        nc.itersize = 9
        nc.execute("SELECT id, name FROM p2 WHERE n < %s ORDER BY id", (20,))
        got = list(nc)
        nc.close()
        conn.commit()
        ctx.check(got == [(i, model[i][1]) for i in sorted(model) if model[i][0] < 20],
                  "named cursor, itersize 9 (%d rows)" % len(got))
    except psycopg2.Error as e:
        conn.rollback()
        ctx.check(False, "named cursor: %s" % e)

    # COPY with CSV HEADER: out, then back into a second table
    buf = io.StringIO()
    cur.copy_expert("COPY (SELECT id, n, name FROM p2 ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER)", buf)
    lines = buf.getvalue().splitlines()
    ctx.check(lines[:1] == ["id,n,name"] and len(lines) == len(model) + 1,
              "COPY TO STDOUT CSV HEADER: the header, then %d rows: %r" % (len(model), lines[:2]))
    cur.execute("CREATE TABLE p2_copy (id bigint PRIMARY KEY, n integer, name text)")
    cur.copy_expert("COPY p2_copy FROM STDIN WITH (FORMAT csv, HEADER)", io.StringIO(buf.getvalue()))
    conn.commit()
    cur.execute("SELECT id, n, name FROM p2_copy ORDER BY id")
    ctx.check(cur.fetchall() == want(), "CSV HEADER round trip through COPY keeps every row")
    # a bad row: the error names the line
    try:
        cur.copy_expert("COPY p2_copy FROM STDIN WITH (FORMAT csv)", io.StringIO("900,1,a\n901,x,b\n"))
        ctx.check(False, "COPY of a bad integer fails")
    except psycopg2.Error as e:
        conn.rollback()
        ctx.check(e.pgcode == "22P02" and "line 2" in (e.diag.context or ""),
                  "COPY error carries its line: %s / %r" % (e.pgcode, e.diag.context))
    conn.close()
