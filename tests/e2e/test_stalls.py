"""End to end: what used to stall `quarry serve` no longer does.

- Long statements: four `select pg_sleep(6)` over POST /sql (more than the
  machine's cores) while /health, the admin page and a PG login answer.
  Before, HTTP ran one worker per core and /health waited for the sleeps.
- HTTP slowloris: 150 sockets from one client address, each sending a byte
  every half second.  Beyond max_connections_per_ip they get 503 at once; the
  others get 408 at header_timeout_s although bytes keep coming (an idle
  timeout would never fire); /health answers throughout.
- HTTP full: 130 trickling sockets from 130 addresses against
  max_connections 100.  Each newcomer closes the socket waiting longest (503
  "make room"), so /health gets in rather than 503 or a refused connection.
- PG slowloris: 100 sockets trickling a startup packet from one address, then
  from 100 addresses: FATAL 53300 beyond --pg-max-connections-per-ip or for
  room, FATAL 57014 at --pg-auth-timeout, and a psycopg2 login succeeds
  meanwhile.
- Statement ceiling: --statement-timeout bounds SQL on both ports; SET
  statement_timeout lowers it but neither a larger value nor 0 raises it;
  --pg-statement-timeout 0 lifts it on the PG port only; the default is 10 s.

Waits are generous upper bounds (2 s where the stall was 6 s or more); what
is asserted is who got answered, with what, and which sockets the server
closed while they were still sending."""
import os
import re
import select
import socket
import struct
import threading
import time

from qserve import Server
from qtest import DataDir, check, finish, skip

try:
    import psycopg2
    import psycopg2.errors
except ImportError:
    psycopg2 = None

BOUND = 2.0  # seconds: "answers while stalled" (the stalls last 6 s or more)


def timed(fn):
    t = time.time()
    r = fn()
    return r, time.time() - t


def health(srv):
    (st, _), took = timed(lambda: srv.call("GET", "/health"))
    return st == 200 and took < BOUND, "%d in %.2f s" % (st, took)


def pg_login(srv):
    """A psycopg2 login and select 1: (ok, what)."""
    t = time.time()
    try:
        c = psycopg2.connect(host="127.0.0.1", port=srv.pg_port, user="tester", dbname="quarry",
                             connect_timeout=10)
        cur = c.cursor()
        cur.execute("select 1")
        ok = cur.fetchone()[0] == 1
        c.close()
    except psycopg2.Error as e:
        return False, "login failed: %s" % str(e).strip()
    took = time.time() - t
    return ok and took < BOUND, "login and select 1 in %.2f s" % took


class Trickle:
    """Sockets that each send `first`, then one byte of `rest` every `every`
    seconds (from the given source addresses); records what the server sends
    each one and when it closes it."""

    def __init__(self, port, sources, first, rest, every=0.5):
        self.socks, self.data, self.end = [], [], []
        self.rest, self.every = rest, every
        for src in sources:
            s = socket.socket()
            s.bind((src, 0))
            s.settimeout(10)
            s.connect(("127.0.0.1", port))
            s.setblocking(False)
            try:
                s.send(first)
            except OSError:
                pass
            self.socks.append(s)
            self.data.append(b"")
            self.end.append(None)
        self.t0 = time.time()
        self.stop = threading.Event()
        self.th = threading.Thread(target=self.run)
        self.th.start()

    def run(self):
        sent, next_byte = 0, time.time() + self.every
        while not self.stop.is_set():
            open_ = [i for i, e in enumerate(self.end) if e is None]
            if not open_:
                return
            r, _, _ = select.select([self.socks[i] for i in open_], [], [], 0.05)
            for s in r:
                i = self.socks.index(s)
                try:
                    d = s.recv(65536)
                except OSError:
                    d = b""
                if d:
                    self.data[i] += d
                else:
                    self.end[i] = time.time() - self.t0
            if time.time() >= next_byte:
                b = self.rest[sent % len(self.rest):sent % len(self.rest) + 1]
                sent += 1
                next_byte += self.every
                for i in open_:
                    if self.end[i] is None and not self.data[i]:
                        try:
                            self.socks[i].send(b)
                        except OSError:
                            pass

    def bytes_sent(self):
        return int((time.time() - self.t0) / self.every)

    def wait_closed(self, secs):
        end = time.time() + secs
        while time.time() < end and any(e is None for e in self.end):
            time.sleep(0.1)
        return all(e is not None for e in self.end)

    def close(self):
        self.stop.set()
        self.th.join()
        for s in self.socks:
            s.close()


def test_long_statements(srv):
    res = []

    def sleeper():
        res.append(srv.call("POST", "/sql", {"query": "select pg_sleep(6)"})[0])
    ths = [threading.Thread(target=sleeper) for _ in range(4)]
    t0 = time.time()
    for th in ths:
        th.start()
    slowest = [0.0]

    def busy():
        (st, b), took = timed(lambda: srv.call("GET", "/stats"))
        slowest[0] = max(slowest[0], took)
        return st == 200 and b["in_flight"] >= 5
    end = time.time() + 10
    while time.time() < end and not busy():
        time.sleep(0.05)
    check(busy(), "four pg_sleep(6) statements are running")
    check(slowest[0] < BOUND, "/stats answered within %.1f s as they started (slowest %.2f s)"
          % (BOUND, slowest[0]))
    for k in range(5):
        ok, what = health(srv)
        check(ok, "/health answers while four statements sleep (%d): %s" % (k, what))
        time.sleep(0.2)
    (st, page), took = timed(lambda: srv.call("GET", "/"))
    check(st == 200 and "<html" in page.lower() and took < BOUND,
          "the admin page answers while they sleep: %d in %.2f s" % (st, took))
    if psycopg2:
        ok, what = pg_login(srv)
        check(ok, "a PG login answers while they sleep: " + what)
    # the stall lasted through every check
    check(busy() and time.time() - t0 < 6, "the statements were still running throughout")
    for th in ths:
        th.join()
    check(res == [200] * 4, "the four statements finished: %s" % res)


HTTP_HEAD = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: "


def test_http_per_client(srv, cfg):
    n = 150
    tr = Trickle(srv.port, ["127.0.0.2"] * n, HTTP_HEAD, b"abcdefgh")
    try:
        time.sleep(0.3)
        for k in range(4):
            ok, what = health(srv)
            check(ok, "/health answers with %d trickling sockets (%d): %s" % (n, k, what))
            time.sleep(0.3)
        check(tr.wait_closed(cfg["header_timeout_s"] + 6),
              "the server closed every trickling socket")
        refused = [d for d in tr.data if d.startswith(b"HTTP/1.1 503") and
                   b"max_connections_per_ip" in d and b"127.0.0.2" in d]
        late = [i for i, d in enumerate(tr.data) if d.startswith(b"HTTP/1.1 408") and
                b"request_timeout" in d and b"header_timeout_s" in d]
        limit = cfg["max_connections_per_ip"]
        check(len(refused) + len(late) == n and len(late) <= limit and
              len(refused) >= n - 2 * limit,
              "beyond %d per client: 503 at once, the others 408 at the deadline "
              "(%d refused, %d timed out)" % (limit, len(refused), len(late)))
        # closed while still sending: the deadline is absolute, not idle
        sending = [i for i in late if tr.end[i] > 1.5 * tr.every]
        check(len(sending) == len(late) and
              all(tr.end[i] < cfg["header_timeout_s"] + 4 for i in late),
              "408 after about header_timeout_s while bytes kept coming: %s" %
              sorted(round(tr.end[i], 1) for i in late)[:5])
    finally:
        tr.close()
    st, text = srv.call("GET", "/metrics")
    m = dict(re.findall(r'quarry_http_connections_closed_total\{reason="(\w+)"\} (\d+)', text))
    check(int(m.get("per_client_limit", -1)) >= len(refused) and
          int(m.get("deadline", -1)) >= len(late),
          "/metrics counts the refused and timed-out connections: %s" % m)


def test_http_full(srv, cfg):
    n = 130
    tr = Trickle(srv.port, ["127.0.1.%d" % (i + 1) for i in range(n)], HTTP_HEAD, b"abcdefgh")
    try:
        time.sleep(0.3)
        for k in range(3):
            ok, what = health(srv)
            check(ok, "/health answers with %d trickling sockets over max_connections %d "
                      "(%d): %s" % (n, cfg["max_connections"], k, what))
            time.sleep(0.2)
        check(tr.wait_closed(cfg["header_timeout_s"] + 6),
              "the server closed every trickling socket")
        evicted = [i for i, d in enumerate(tr.data) if d.startswith(b"HTTP/1.1 503") and
                   b"make room" in d]
        late = [d for d in tr.data if d.startswith(b"HTTP/1.1 408")]
        check(len(evicted) >= n - cfg["max_connections"] and len(evicted) + len(late) == n,
              "room made from the longest-waiting sockets (%d closed with 503, %d with 408)"
              % (len(evicted), len(late)))
        check(min(evicted) < 10 if evicted else False,
              "the first sockets were the ones closed for room: %s" % evicted[:5])
    finally:
        tr.close()


def startup_packet():
    body = struct.pack("!i", 196608) + b"user\0tester\0database\0quarry\0\0"
    return struct.pack("!i", len(body) + 4) + body


def pg_errors(data):
    """SQLSTATEs of the ErrorResponses in what the server sent."""
    if not data.startswith(b"E"):
        return []
    return [c.decode() for c in re.findall(rb"\0C(\d{2}[0-9A-Z]{3})\0", data)]


def test_pg_slowloris(srv, per_ip, auth_s):
    pkt = startup_packet()
    tr = Trickle(srv.pg_port, ["127.0.0.2"] * 100, pkt[:1], pkt[1:])
    try:
        time.sleep(0.3)
        ok, what = pg_login(srv)
        check(ok, "a PG login succeeds with 100 trickling startups from one client: " + what)
        ok, what = health(srv)
        check(ok, "/health answers meanwhile: " + what)
        check(tr.wait_closed(auth_s + 6), "the server closed every trickling startup")
        codes = [pg_errors(d) for d in tr.data]
        refused = [c for c in codes if c == ["53300"]]
        late = [i for i, c in enumerate(codes) if c == ["57014"]]
        check(len(refused) + len(late) == 100 and len(late) <= per_ip + 2 and
              len(refused) >= 100 - 2 * (per_ip + 2),
              "beyond %d per client: 53300 at once, the others 57014 at the deadline "
              "(%d refused, %d timed out)" % (per_ip, len(refused), len(late)))
        check(all(b"canceling authentication due to timeout" in tr.data[i] and
                  1.5 * tr.every < tr.end[i] < auth_s + 4 for i in late),
              "57014 after about --pg-auth-timeout while bytes kept coming")
    finally:
        tr.close()


def test_pg_full(srv, max_conns, auth_s):
    pkt = startup_packet()
    n = 100
    tr = Trickle(srv.pg_port, ["127.0.2.%d" % (i + 1) for i in range(n)], pkt[:1], pkt[1:])
    try:
        time.sleep(0.3)
        ok, what = pg_login(srv)
        check(ok, "a PG login succeeds with %d trickling startups from %d addresses: %s"
              % (n, n, what))
        check(tr.wait_closed(auth_s + 6), "the server closed every trickling startup")
        codes = [pg_errors(d) for d in tr.data]
        evicted = [i for i, c in enumerate(codes) if c == ["53300"]]
        check(len(evicted) >= n - (max_conns + 64) and
              all(b"too many clients" in tr.data[i] for i in evicted) and
              len(evicted) + sum(c == ["57014"] for c in codes) == n,
              "room made from the longest startups (%d got 53300)" % len(evicted))
    finally:
        tr.close()


def expect_cancel(cur, sql):
    try:
        cur.execute(sql)
        return "ran"
    except psycopg2.errors.QueryCanceled as e:
        cur.connection.rollback()
        return "57014" if "statement timeout" in str(e) else str(e)


def test_statement_ceiling(dd):
    srv = Server(os.path.join(dd.path, "ceiling"), dd.path, pg=True,
                 extra=["--statement-timeout", "1000"])
    try:
        if not check(srv.pg_port, "server with --statement-timeout 1000 started"):
            return
        st, b = srv.call("POST", "/sql", {"query": "select pg_sleep(3)"})
        check(st == 504 and b["error"].get("sqlstate") == "57014",
              "HTTP SQL over --statement-timeout: 504 57014 (%d)" % st)
        c = psycopg2.connect(host="127.0.0.1", port=srv.pg_port, user="tester", dbname="quarry")
        cur = c.cursor()
        check(expect_cancel(cur, "select pg_sleep(3)") == "57014",
              "PG statement over the ceiling: 57014")
        for v in ("5000", "0"):
            cur.execute("set statement_timeout = " + v)
            check(expect_cancel(cur, "select pg_sleep(3)") == "57014",
                  "SET statement_timeout = %s does not raise the ceiling" % v)
        cur.execute("set statement_timeout = 100")
        check(expect_cancel(cur, "select pg_sleep(0.5)") == "57014",
              "SET statement_timeout = 100 lowers it below the ceiling")
        cur.execute("reset statement_timeout")
        check(expect_cancel(cur, "select pg_sleep(0.2)") == "ran",
              "a statement under the ceiling runs")
        c.close()
    finally:
        srv.stop()
    srv = Server(os.path.join(dd.path, "ceiling"), dd.path, pg=True,
                 extra=["--statement-timeout", "1000", "--pg-statement-timeout", "0"])
    try:
        c = psycopg2.connect(host="127.0.0.1", port=srv.pg_port, user="tester", dbname="quarry")
        check(expect_cancel(c.cursor(), "select pg_sleep(1.5)") == "ran",
              "--pg-statement-timeout 0 lifts the PG port's ceiling")
        c.close()
        st, b = srv.call("POST", "/sql", {"query": "select pg_sleep(1.5)"})
        check(st == 504, "while HTTP keeps --statement-timeout (%d)" % st)
    finally:
        srv.stop()


def main():
    if psycopg2 is None:
        skip("psycopg2 is not installed (Debian python3-psycopg2)")
    t0 = time.time()
    with DataDir() as dd:
        cfg = {"header_timeout_s": 2, "max_connections_per_ip": 40, "max_connections": 100}
        per_ip, auth_s, pg_max = 30, 2, 20
        srv = Server(os.path.join(dd.path, "data"), dd.path, pg=True, config=cfg,
                     extra=["--pg-auth-timeout", str(auth_s), "--pg-max-connections-per-ip",
                            str(per_ip), "--pg-max-connections", str(pg_max)])
        try:
            if not check(srv.port and srv.pg_port, "server started"):
                return finish()
            check(re.search(r"serve pg=\S+ .*statement_timeout_ms=10000 ", srv.text()),
                  "the PG port's default statement ceiling is 10 s")
            for name, f in (("long statements", lambda: test_long_statements(srv)),
                            ("http per client", lambda: test_http_per_client(srv, cfg)),
                            ("http full", lambda: test_http_full(srv, cfg)),
                            ("pg slowloris", lambda: test_pg_slowloris(srv, per_ip, auth_s)),
                            ("pg full", lambda: test_pg_full(srv, pg_max, auth_s))):
                t = time.time()
                f()
                print("%s took %.1f s" % (name, time.time() - t))
        finally:
            srv.stop()
        t = time.time()
        test_statement_ceiling(dd)
        print("statement ceiling took %.1f s" % (time.time() - t))
    print("took %.1f s" % (time.time() - t0))
    finish()


if __name__ == "__main__":
    main()
