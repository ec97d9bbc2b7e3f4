"""psycopg 3 and Quarry's types: arrays (lists as typed array parameters, 1007 / 1009 /
1016 / 1022..., in text and in binary; results read back as lists; columns that store
them; = ANY with a list; a malformed literal is 22P02); date, time and interval
(datetime.date / time / timedelta both ways, text and binary, date arithmetic, columns);
uuid (uuid.UUID), bytea (bytes, also with bytea_output = escape) and json / jsonb (psycopg.types.json.Json / Jsonb, read
back as Python objects); numeric (decimal.Decimal both ways, text and binary, scales kept,
exact arithmetic on parameters).  Every value is compared with the Python value it
started as."""
import datetime
import decimal
import uuid


def run(ctx):
    try:
        import psycopg
    except ImportError:
        ctx.check(False, "psycopg 3 is not installed (make deps installs python3-psycopg)")
        return
    conn = psycopg.connect(ctx.dsn("types3"), autocommit=True)

    def attempt(what, fn):
        try:
            fn()
        except Exception as e:  # a failed check, not a crashed suite
            ctx.check(False, "%s: %r" % (what, e))

    values = [
        ("int4[]", [1, -2, None, 2147483647]),
        ("int8[]", [9000000000, None]),
        ("int2[]", [1, 2]),
        ("float8[]", [1.5, -0.25, None]),
        ("text[]", ["a", "b c", "", None, "NULL", 'q"uote', "back\\slash", "é"]),
        ("bool[]", [True, False, None]),
        ("int4[]", [[1, 2], [3, 4]]),
        ("text[]", []),
        ("date", datetime.date(2024, 2, 29)),
        ("date", datetime.date(1999, 12, 31)),
        ("time", datetime.time(23, 59, 59, 500000)),
        ("interval", datetime.timedelta(days=3, hours=4, minutes=5, seconds=6, microseconds=7)),
        ("interval", datetime.timedelta(days=-2, hours=5)),
        ("date[]", [datetime.date(2024, 1, 1), None]),
        ("uuid", uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")),
        ("bytea", b"\x00\xffabc\\"),
        ("bytea", b""),
        ("numeric", decimal.Decimal("12.50")),
        ("numeric", decimal.Decimal("-0.001")),
        ("numeric", decimal.Decimal("123456789012345678901234567890.123456789")),
        ("numeric", decimal.Decimal("0")),
        ("numeric[]", [decimal.Decimal("1.10"), None, decimal.Decimal("-2")]),
    ]
    for binary in (False, True):
        mode = "binary" if binary else "text"

        def round_trip(t=None, v=None, mode=mode, binary=binary):
            cur = conn.cursor(binary=binary)
            got = cur.execute("SELECT %%s::%s" % t, (v,)).fetchone()[0]
            ctx.check(got == v, "%s %s round-trips (%s): %r" % (t, mode, v, got))
        for t, v in values:
            attempt("%s %s" % (t, mode), lambda t=t, v=v: round_trip(t, v))

    def any_list():
        got = conn.execute("SELECT x FROM generate_series(1, 10) g(x) WHERE x = ANY(%s) "
                           "ORDER BY x", ([3, 5, 11],)).fetchall()
        ctx.check(got == [(3,), (5,)], "x = ANY(list): %r" % got)
        got = conn.execute("SELECT %s::int[] @> %s::int[], array_length(%s::text[], 1)",
                           ([1, 2, 3], [2], ["a", "b"])).fetchone()
        ctx.check(got == (True, 2), "array operators and functions on list parameters: %r" % (got,))
    attempt("= ANY(list)", any_list)

    def columns():
        conn.execute("CREATE TABLE t3_arrays (id int PRIMARY KEY, tags text[], nums int8[], "
                     "fs float8[])")
        rows = [(1, ["x", "y z"], [1, 2, None], [0.5]), (2, [], None, [1e300, -1.0]),
                (3, ["NULL", None], [[1, 2], [3, 4]], None)]
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO t3_arrays VALUES (%s, %s, %s, %s)", rows)
        got = conn.execute("SELECT id, tags, nums, fs FROM t3_arrays ORDER BY id").fetchall()
        ctx.check(got == rows, "array columns store and read back: %r" % got)
        got = conn.cursor(binary=True).execute("SELECT id, tags, nums, fs FROM t3_arrays "
                                               "ORDER BY id").fetchall()
        ctx.check(got == rows, "array columns read back in binary: %r" % got)
        got = conn.execute("SELECT id FROM t3_arrays WHERE %s = ANY (tags) ORDER BY id",
                           ("y z",)).fetchall()
        ctx.check(got == [(1,)], "WHERE param = ANY (column): %r" % got)
    attempt("array columns", columns)

    def numerics():
        D = decimal.Decimal
        for binary in (False, True):
            cur = conn.cursor(binary=binary)
            got = cur.execute("SELECT %s + %s, %s::numeric / 3, round(%s, 1), %s::numeric(6,2), "
                              "pg_typeof(%s * 2)::text",
                              (D("0.1"), D("0.2"), D(1), D("2.25"), D("3.14159"), D("1.5"))).fetchone()
            want = (D("0.3"), D("0.33333333333333333333"), D("2.3"), D("3.14"), "numeric")
            ctx.check(got == want and str(got[0]) == "0.3" and str(got[3]) == "3.14",
                      "numeric arithmetic on Decimal parameters (%s): %r" %
                      ("binary" if binary else "text", got))
        conn.execute("CREATE TABLE t3_num (id int PRIMARY KEY, p numeric(10,2), q numeric)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO t3_num VALUES (%s, %s, %s)",
                            [(1, D("12.5"), D("12.5")), (2, D("0.005"), D("-0.001")), (3, None, None)])
        for binary in (False, True):
            cur = conn.cursor(binary=binary)
            got = cur.execute("SELECT p, q FROM t3_num ORDER BY id").fetchall()
            ctx.check(got == [(D("12.50"), D("12.5")), (D("0.01"), D("-0.001")), (None, None)] and
                      str(got[0][0]) == "12.50",
                      "numeric(10,2) column rounds and keeps its scale (%s): %r" %
                      ("binary" if binary else "text", got))
            d = cur.description[0]
            ctx.check((d.precision, d.scale) == (10, 2),
                      "numeric(10,2) column described with its typmod: %r" % ((d.precision, d.scale),))
        # stored exactly: a plain numeric keeps its written scale and all its digits, sums are exact
        big = D("123456789012345678901234567890.123456789")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO t3_num VALUES (%s, %s, %s)",
                            [(4, D("0.10"), D("12.50")), (5, D("99999999.99"), big)])
        for binary in (False, True):
            cur = conn.cursor(binary=binary)
            got = cur.execute("SELECT q, sum(p) OVER () FROM t3_num WHERE id >= 4 ORDER BY id").fetchall()
            ctx.check(got == [(D("12.50"), D("100000000.09")), (big, D("100000000.09"))] and
                      str(got[0][0]) == "12.50" and str(got[0][1]) == "100000000.09",
                      "numeric columns keep scale and digits, sums exact (%s): %r" %
                      ("binary" if binary else "text", got))
        try:
            conn.execute("SELECT %s::numeric(4,2)", (D("123.4"),))
            ctx.check(False, "numeric(4,2) accepted 123.4")
        except psycopg.Error as e:
            ctx.check(e.sqlstate == "22003", "numeric field overflow is 22003: %s" % e.sqlstate)
    attempt("numeric", numerics)

    def bytea_escape():
        raw = b"\x00\xffab\\\n~"
        conn.execute("SET bytea_output = 'escape'")
        try:
            got = conn.execute("SELECT %s::bytea, %s::bytea::text", (raw, raw)).fetchone()
            ctx.check(got == (raw, "\\000\\377ab\\\\\\012~"),
                      "bytea_output = escape: psycopg 3 reads the escape form back: %r" % (got,))
        finally:
            conn.execute("SET bytea_output = 'hex'")
    attempt("bytea_output escape", bytea_escape)

    def dates():
        d = datetime.date(2024, 1, 31)
        got = conn.execute("SELECT %s + 1, %s - %s::date, %s + interval '1 month', "
                           "now() - interval '7 days' < now()",
                           (d, d, datetime.date(2024, 1, 1), d)).fetchone()
        ctx.check(got == (datetime.date(2024, 2, 1), 30, datetime.datetime(2024, 2, 29), True),
                  "date arithmetic on date parameters: %r" % (got,))
        conn.execute("CREATE TABLE t3_dates (id int PRIMARY KEY, d date, t time, iv interval)")
        rows = [(1, datetime.date(2024, 2, 29), datetime.time(10, 30), datetime.timedelta(hours=26)),
                (2, None, datetime.time(0, 0, 0, 1), datetime.timedelta(days=-1, seconds=7200))]
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO t3_dates VALUES (%s, %s, %s, %s)", rows)
        for binary in (False, True):
            got = conn.cursor(binary=binary).execute(
                "SELECT id, d, t, iv FROM t3_dates ORDER BY id").fetchall()
            ctx.check(got == rows, "date / time / interval columns (%s): %r" %
                      ("binary" if binary else "text", got))
    attempt("dates", dates)

    def more():
        from psycopg.types.json import Json, Jsonb
        doc = {"b": [1, 2.5, None, "x"], "a": {"c": True}}
        for binary in (False, True):
            cur = conn.cursor(binary=binary)
            got = cur.execute("SELECT %s::json, %s::jsonb, %s::jsonb -> 'a' ->> 'c', "
                              "jsonb_build_object('k', %s::int)",
                              (Json(doc), Jsonb(doc), Jsonb(doc), 7)).fetchone()
            ctx.check(got == (doc, doc, "true", {"k": 7}),
                      "json / jsonb (%s): %r" % ("binary" if binary else "text", got))
        conn.execute("CREATE TABLE t3_misc (n int PRIMARY KEY, id uuid, b bytea, j jsonb)")
        u = uuid.uuid4()
        conn.execute("INSERT INTO t3_misc VALUES (1, %s, %s, %s)", (u, b"\x01\x02", Jsonb(doc)))
        got = conn.execute("SELECT id, b, j, gen_random_uuid() <> id FROM t3_misc").fetchone()
        ctx.check(got == (u, b"\x01\x02", doc, True), "uuid / bytea / jsonb columns: %r" % (got,))
    attempt("uuid, bytea, json", more)

    err = None
    try:
        conn.execute("SELECT 1 = ANY(%s::text::int[])", ("{1,2",))
    except psycopg.Error as e:
        err = e
    ctx.check(err is not None and err.sqlstate == "22P02",
              "a malformed array literal is 22P02: %r" % err)
    conn.close()
