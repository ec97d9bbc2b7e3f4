"""Helpers of the PostgreSQL port's end-to-end tests (test_pg_*.py): run
`quarry serve --pg 127.0.0.1:0` on a temporary data directory, read the bound
port back from the log, and stop it."""
import os
import re
import subprocess

from qtest import BIN
from qserve import Server


class PgServe(Server):
    """`quarry serve --http 127.0.0.1:0 --pg LISTEN` (port 0: read back from the
    log into pg_port); always stopped by the test."""

    def __init__(self, data, workdir, extra=(), listen="127.0.0.1:0"):
        super().__init__(data, workdir, extra=["--pg", listen] + list(extra))
        m = re.search(r"serve pg=\S+:(\d+) ", self.text())
        self.pg_port = int(m.group(1)) if m and self.port else None

    def env(self, user="tester", password=None):
        """Environment for libpq tools (psql) pointing at this server."""
        e = dict(os.environ)
        e.update({"PGHOST": "127.0.0.1", "PGPORT": str(self.pg_port), "PGUSER": user,
                  "PGDATABASE": "quarry", "PGCONNECT_TIMEOUT": "10", "PGSSLMODE": "prefer"})
        e.pop("PGPASSWORD", None)
        if password is not None:
            e["PGPASSWORD"] = password
        return e

    def psql(self, *args, user="tester", password=None, stdin=None, timeout=60):
        p = subprocess.run(["psql", "-X", "-v", "ON_ERROR_STOP=0"] + list(args),
                           env=self.env(user, password), input=stdin, capture_output=True,
                           text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr

def add_user(data, name, password, role="read-write"):
    p = subprocess.run([BIN, "user", "add", name, "--role", role, "--data", data],
                       input=password + "\n", capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


# ---- raw protocol frames, for the robustness and protocol-state tests ----

import socket  # noqa: E402
import struct  # noqa: E402


def startup_packet(user="tester", database="quarry", **extra):
    body = struct.pack("!i", 196608)
    for k, v in [("user", user), ("database", database)] + list(extra.items()):
        body += k.encode() + b"\0" + v.encode() + b"\0"
    body += b"\0"
    return struct.pack("!i", len(body) + 4) + body


def frame(t, body=b""):
    return t.encode() + struct.pack("!i", len(body) + 4) + body


def cstr(s):
    return s.encode() + b"\0"


class Raw:
    """A socket speaking frames: send bytes, read backend messages."""

    def __init__(self, port, timeout=10):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk

    def read_byte(self):
        self._need(1)
        b, self.buf = self.buf[:1], self.buf[1:]
        return b

    def read_msg(self):
        """(type, body) of the next backend message."""
        self._need(5)
        t = self.buf[:1].decode()
        n = struct.unpack("!i", self.buf[1:5])[0]
        self._need(1 + n)
        body = self.buf[5:1 + n]
        self.buf = self.buf[1 + n:]
        return t, body

    def read_until(self, t_end="Z"):
        msgs = []
        while True:
            m = self.read_msg()
            msgs.append(m)
            if m[0] == t_end:
                return msgs

    def closed(self, wait=5):
        """True when the server closes the connection (EOF) within `wait` s."""
        self.s.settimeout(wait)
        try:
            while True:
                if not self.s.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self):
        self.s.close()


def error_fields(body):
    """ErrorResponse / NoticeResponse body -> {code letter: value}."""
    out = {}
    for part in body.split(b"\0"):
        if part:
            out[chr(part[0])] = part[1:].decode("utf-8", "replace")
    return out


def login(port, user="tester"):
    """A raw connection past startup (trust auth): returns (Raw, messages)."""
    r = Raw(port)
    r.send(startup_packet(user))
    return r, r.read_until("Z")
