"""SQLAlchemy (Debian python3-sqlalchemy, psycopg2 dialect): the ORM creates its tables
(an Integer primary key becomes SERIAL, a table can have no key the ORM maps), inserts
with autoincrement keys it reads back, updates, deletes and queries; reflection
(inspect: tables, columns with types and defaults, primary keys, indexes, sequences)
reads the schema back."""
import subprocess

SCRIPT = r"""
import json, sys
from sqlalchemy import (create_engine, Column, Integer, BigInteger, String, Float, Boolean,
                        DateTime, Text, ForeignKey, Index, inspect, func, select, Sequence)
from sqlalchemy.orm import declarative_base, Session
import datetime
eng = create_engine("postgresql+psycopg2://tester@127.0.0.1:%s/quarry" % sys.argv[1])
Base = declarative_base()
class Author(Base):
    __tablename__ = "sa_authors"
    id = Column(Integer, primary_key=True)          # autoincrement: SERIAL
    name = Column(String(40), nullable=False, index=True)
    born = Column(DateTime(timezone=True))
class Book(Base):
    __tablename__ = "sa_books"
    id = Column(BigInteger, Sequence("sa_books_seq", start=100), primary_key=True)
    author_id = Column(Integer)
    title = Column(Text)
    price = Column(Float)
    in_print = Column(Boolean, default=True)
out = {}
Base.metadata.create_all(eng)
with Session(eng) as s:
    a = [Author(name="n%d" % i, born=datetime.datetime(1950 + i, 1, 1, tzinfo=datetime.timezone.utc))
         for i in range(5)]
    s.add_all(a)
    s.flush()
    out["author_ids"] = [x.id for x in a]
    books = [Book(author_id=a[i % 5].id, title="t%d" % i, price=1.5 * i) for i in range(7)]
    s.add_all(books)
    s.commit()
    out["book_ids"] = [b.id for b in books]
    b = s.get(Book, books[2].id)
    b.price = 99.0
    s.delete(s.get(Author, a[4].id))
    s.commit()
    out["price"] = s.execute(select(Book.price).where(Book.id == books[2].id)).scalar()
    out["authors"] = s.execute(select(func.count()).select_from(Author)).scalar()
    out["in_print"] = s.execute(select(func.count()).where(Book.in_print == True)).scalar()
    out["per_author"] = [list(r) for r in s.execute(
        select(Book.author_id, func.count()).group_by(Book.author_id).order_by(Book.author_id))]
ins = inspect(eng)
out["tables"] = sorted(t for t in ins.get_table_names() if t.startswith("sa_"))
out["columns"] = [[c["name"], str(c["type"]), c["nullable"], c.get("default"), bool(c.get("autoincrement"))]
                  for c in ins.get_columns("sa_authors")]
out["pk"] = ins.get_pk_constraint("sa_authors")
out["indexes"] = sorted([i["name"], i["column_names"], i["unique"]] for i in ins.get_indexes("sa_authors"))
out["sequences"] = sorted(q for q in ins.get_sequence_names() if q.startswith("sa_"))
out["has_table"] = [ins.has_table("sa_books"), ins.has_table("sa_nope")]
print(json.dumps(out, default=str))
"""


def run(ctx):
    p = subprocess.run(["/usr/bin/python3", "-c", SCRIPT, str(ctx.srv.pg_port)],
                       capture_output=True, text=True, timeout=180)
    if not ctx.check(p.returncode == 0, "the SQLAlchemy program ran: %s" % p.stderr[-2500:]):
        return
    import json
    r = json.loads(p.stdout.strip().splitlines()[-1])
    ctx.check(r["author_ids"] == [1, 2, 3, 4, 5], "SERIAL keys read back after flush: %r" % r["author_ids"])
    ctx.check(r["book_ids"] == list(range(100, 107)), "Sequence(start=100) keys: %r" % r["book_ids"])
    ctx.check(r["price"] == 99.0 and r["authors"] == 4 and r["in_print"] == 7,
              "update, delete, defaults: %r" % r)
    ctx.check(r["per_author"] == [[1, 2], [2, 2], [3, 1], [4, 1], [5, 1]], "group by: %r" % r["per_author"])
    ctx.check(r["tables"] == ["sa_authors", "sa_books"], "reflected tables: %r" % r["tables"])
    ctx.check(r["columns"] == [["id", "INTEGER", False, "nextval('sa_authors_id_seq'::regclass)", True],
                               ["name", "VARCHAR(40)", False, None, False],
                               ["born", "TIMESTAMP", True, None, False]],
              "reflected columns: %r" % r["columns"])
    ctx.check(r["pk"]["constrained_columns"] == ["id"] and r["pk"]["name"] == "sa_authors_pkey",
              "reflected primary key: %r" % r["pk"])
    ctx.check(r["indexes"] == [["ix_sa_authors_name", ["name"], False]], "reflected indexes: %r" % r["indexes"])
    ctx.check(r["sequences"] == ["sa_authors_id_seq", "sa_books_seq"], "reflected sequences: %r" % r["sequences"])
    ctx.check(r["has_table"] == [True, False], "has_table: %r" % r["has_table"])
