"""Savepoints through real clients, each run against Quarry and a throwaway
PostgreSQL 15 and compared: psql's ON_ERROR_ROLLBACK (a savepoint around every
statement of a block, rolled back to on an error), psycopg2 with explicit
SAVEPOINT / ROLLBACK TO / RELEASE (nested, a name reused), and SQLAlchemy's
Session.begin_nested() reading its own flushed rows inside the nested block and
after rolling it back.  What each sees and leaves must be the same on both
servers."""
import json
import subprocess
import sys

PSQL_SCRIPT = """
CREATE TABLE sp_psql (id bigint PRIMARY KEY, v bigint);
BEGIN;
INSERT INTO sp_psql VALUES (1, 10);
INSERT INTO sp_psql VALUES (1, 11);
INSERT INTO sp_psql VALUES (2, 20);
SELECT no_such_column FROM sp_psql;
UPDATE sp_psql SET v = v + 1 WHERE id = 2;
INSERT INTO sp_psql VALUES (3, 'three');
COMMIT;
SELECT id, v FROM sp_psql ORDER BY id;
"""

SA_SCRIPT = r"""
import json, sys
from sqlalchemy import create_engine, Column, BigInteger, Text, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import declarative_base, Session
eng = create_engine(sys.argv[1])
Base = declarative_base()
class Row(Base):
    __tablename__ = "sp_sa"
    id = Column(BigInteger, primary_key=True, autoincrement=False)
    note = Column(Text)
Base.metadata.create_all(eng)
out = {}
with Session(eng) as s:
    s.add(Row(id=1, note="outer"))
    s.flush()
    try:
        with s.begin_nested():                    # SAVEPOINT
            s.add(Row(id=1, note="duplicate"))    # 23505 -> ROLLBACK TO SAVEPOINT
    except IntegrityError:
        out["duplicate"] = "caught"
    with s.begin_nested():                        # SAVEPOINT ... RELEASE
        s.add(Row(id=2, note="kept"))
    nested = s.begin_nested()
    s.add(Row(id=3, note="rolled back"))
    s.flush()
    out["inside"] = s.execute(select(Row.id).order_by(Row.id)).scalars().all()
    nested.rollback()
    out["after_rollback"] = s.execute(select(Row.id).order_by(Row.id)).scalars().all()
    s.commit()
with Session(eng) as s:
    out["rows"] = [[r.id, r.note] for r in s.execute(select(Row).order_by(Row.id)).scalars()]
print(json.dumps(out))
"""


def psycopg2_steps(dsn):
    """Explicit savepoints; returns what was seen along the way and at the end."""
    import psycopg2
    conn = psycopg2.connect(dsn)
    cur = conn.cursor()
    seen = []
    cur.execute("CREATE TABLE sp_pg2 (id bigint PRIMARY KEY, v bigint)")
    conn.commit()
    cur.execute("INSERT INTO sp_pg2 VALUES (1, 1)")
    cur.execute("SAVEPOINT a")
    cur.execute("INSERT INTO sp_pg2 VALUES (2, 2)")
    cur.execute("SAVEPOINT b")
    cur.execute("UPDATE sp_pg2 SET v = 100 WHERE id = 1")
    cur.execute("SAVEPOINT a")                     # a second "a": the inner one
    cur.execute("DELETE FROM sp_pg2 WHERE id = 2")
    cur.execute("ROLLBACK TO SAVEPOINT a")         # the inner a: id 2 is back
    cur.execute("RELEASE SAVEPOINT a")
    try:
        cur.execute("INSERT INTO sp_pg2 VALUES (1, 5)")
    except psycopg2.Error as e:
        seen.append(["error", e.pgcode])
    try:
        cur.execute("SELECT 1")
    except psycopg2.Error as e:
        seen.append(["aborted", e.pgcode])
    cur.execute("ROLLBACK TO b")                   # undoes the UPDATE, leaves the block working
    cur.execute("INSERT INTO sp_pg2 VALUES (3, 3)")
    cur.execute("RELEASE a")                       # the outer a: b goes with it
    try:
        cur.execute("ROLLBACK TO b")
    except psycopg2.Error as e:
        seen.append(["gone", e.pgcode])
    conn.rollback()
    cur.execute("INSERT INTO sp_pg2 VALUES (1, 1), (2, 2)")
    cur.execute("SAVEPOINT x")
    cur.execute("UPDATE sp_pg2 SET v = v * 10")
    cur.execute("ROLLBACK TO x")
    cur.execute("UPDATE sp_pg2 SET v = v + 1 WHERE id = 2")
    conn.commit()
    cur.execute("SELECT id, v FROM sp_pg2 ORDER BY id")
    seen.append(["rows", [list(r) for r in cur.fetchall()]])
    conn.close()
    return seen


def run(ctx):
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        ctx.check(False, "psycopg2 is not installed (make deps installs python3-psycopg2)")
        return
    pg = ctx.postgres()
    pg.psql("CREATE DATABASE sp")
    pg_dsn = "host=127.0.0.1 port=%d user=postgres dbname=sp" % pg.port

    # psql ON_ERROR_ROLLBACK: each failed statement is rolled back to its savepoint
    outs = []
    for env in (ctx.srv.env(), pg.env("sp")):
        p = subprocess.run(["psql", "-X", "-At", "-v", "ON_ERROR_ROLLBACK=on", "-v",
                            "ON_ERROR_STOP=0"], input=PSQL_SCRIPT, env=env, capture_output=True,
                           text=True, timeout=60)
        outs.append(p.stdout.strip().splitlines()[-2:])
    ctx.check(outs[0] == outs[1] == ["1|10", "2|21"],
              "psql ON_ERROR_ROLLBACK keeps the good statements of a block: %r" % outs)

    got = psycopg2_steps(ctx.dsn())
    want = psycopg2_steps(pg_dsn)
    ctx.check(got == want, "psycopg2 explicit savepoints as PostgreSQL: %r vs %r" % (got, want))

    res = []
    for url in ("postgresql+psycopg2://tester@127.0.0.1:%d/quarry" % ctx.srv.pg_port,
                "postgresql+psycopg2://postgres@127.0.0.1:%d/sp" % pg.port):
        p = subprocess.run([sys.executable, "-c", SA_SCRIPT, url], capture_output=True,
                           text=True, timeout=120)
        if not ctx.check(p.returncode == 0, "SQLAlchemy begin_nested ran: %s" % p.stderr[-2000:]):
            return
        res.append(json.loads(p.stdout.strip().splitlines()[-1]))
    for k in ("duplicate", "inside", "after_rollback", "rows"):
        ctx.check(res[0].get(k) == res[1].get(k),
                  "SQLAlchemy begin_nested as PostgreSQL: %s %r vs %r" % (k, res[0].get(k), res[1].get(k)))
    ctx.check(res[0]["rows"] == [[1, "outer"], [2, "kept"]], "SQLAlchemy rows: %r" % res[0])
