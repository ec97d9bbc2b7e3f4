"""The extended protocol as drivers pipeline it, frame by frame: a named
portal run with a row limit (PortalSuspended) and resumed, Close of portals
and statements, several Parse/Bind/Execute before one Sync with an error that
skips the rest to the Sync, and SQL cursors seen as portals (DECLARE over
Parse/Bind/Execute, Describe and Close of the cursor by name)."""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from pg_server import cstr, error_fields, frame, login  # noqa: E402


def P(name, q, oids=()):
    return frame("P", cstr(name) + cstr(q) + struct.pack("!h", len(oids)) +
                 b"".join(struct.pack("!i", o) for o in oids))


def B(portal, stmt, params=()):
    body = cstr(portal) + cstr(stmt) + struct.pack("!hh", 0, len(params))
    for p in params:
        body += struct.pack("!i", len(p)) + p.encode()
    return frame("B", body + struct.pack("!h", 0))


def E(portal, max_rows=0):
    return frame("E", cstr(portal) + struct.pack("!i", max_rows))


def D(kind, name):
    return frame("D", kind.encode() + cstr(name))


def C(kind, name):
    return frame("C", kind.encode() + cstr(name))


S = frame("S")


def rows(msgs):
    return [m[1][6:].decode() for m in msgs if m[0] == "D"]


def run(ctx):
    r, _ = login(ctx.srv.pg_port, "wire")
    r.send(frame("Q", cstr("CREATE TABLE w (id bigint PRIMARY KEY, v text); "
                           "INSERT INTO w SELECT g, 'v' || g FROM generate_series(1, 9) g")))
    r.read_until("Z")

    # a named portal, four rows at a time
    r.send(P("s1", "SELECT id FROM w WHERE id > $1 ORDER BY id") + B("p1", "s1", ["2"]) +
           E("p1", 4) + E("p1", 4) + E("p1", 4) + C("P", "p1") + C("S", "s1") + S)
    m = r.read_until("Z")
    types = "".join(t for t, _ in m)
    # 4 rows and PortalSuspended, the last 3 and SELECT, an exhausted portal's SELECT 0,
    # CloseComplete for the portal and the statement
    ctx.check(types == "12DDDDsDDDCC33Z",
              "named portal with row limit 4: suspended, resumed, complete: %s" % types)
    tags = [b[:-1].decode() for t, b in m if t == "C"]
    ctx.check(rows(m) == [str(i) for i in range(3, 10)] and tags == ["SELECT 3", "SELECT 0"],
              "the portal's seven rows and tags: %r %r" % (rows(m), tags))
    r.send(B("p2", "s1", ["1"]) + S)
    m = r.read_until("Z")
    ctx.check(m[0][0] == "E" and error_fields(m[0][1]).get("C") == "26000",
              "Bind to a closed statement is 26000: %r" % (m[0],))

    # pipelined: three statements, the second fails, the third is skipped
    r.send(P("", "INSERT INTO w VALUES ($1, 'a')") + B("", "", ["100"]) + E("") +
           P("", "SELECT 1 / 0") + B("", "") + E("") +
           P("", "INSERT INTO w VALUES ($1, 'b')") + B("", "", ["101"]) + E("") + S)
    m = r.read_until("Z")
    types = "".join(t for t, _ in m)
    errs = [error_fields(b) for t, b in m if t == "E"]
    ctx.check(types == "12C12EZ" and errs[0].get("C") == "22012",
              "pipeline: the error skips to Sync: %s %r" % (types, errs))
    r.send(frame("Q", cstr("SELECT id FROM w WHERE id >= 100 ORDER BY id")))
    m = r.read_until("Z")
    ctx.check(rows(m) == ["100"], "the statement before the error ran, the one after did not: %r"
              % rows(m))

    # a SQL cursor over the extended protocol is a portal by its name
    r.send(P("", "BEGIN") + B("", "") + E("") +
           P("", "DECLARE wc CURSOR FOR SELECT v FROM w WHERE id <= $1 ORDER BY id") +
           B("", "", ["5"]) + E("") + D("P", "wc") +
           P("", "FETCH 3 FROM wc") + B("", "") + D("P", "") + E("") + S)
    m = r.read_until("Z")
    types = "".join(t for t, _ in m)
    ctx.check(types == "12C12CT12TDDDCZ" and rows(m) == ["v1", "v2", "v3"],
              "DECLARE with a parameter, Describe of the cursor, FETCH: %s %r" % (types, rows(m)))
    r.send(C("P", "wc") + P("", "FETCH 1 FROM wc") + B("", "") + E("") + S)
    m = r.read_until("Z")
    errs = [error_fields(b) for t, b in m if t == "E"]
    ctx.check(m[0][0] == "3" and errs and errs[0].get("C") == "34000",
              "protocol Close of the cursor closes it: %r" % errs)
    r.send(frame("Q", cstr("ROLLBACK")))
    r.read_until("Z")

    # DISCARD ALL (what poolers send between clients) forgets Parse'd named statements
    r.send(P("keep", "SELECT 1") + S)
    r.read_until("Z")
    r.send(frame("Q", cstr("DISCARD ALL")))
    r.read_until("Z")
    r.send(B("", "keep") + S)
    m = r.read_until("Z")
    errs = [error_fields(b) for t, b in m if t == "E"]
    ctx.check(errs and errs[0].get("C") == "26000",
              "DISCARD ALL drops the protocol's named statements: %r" % errs)
    r.close()
