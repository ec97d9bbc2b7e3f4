"""Throwaway servers for bench/suite.py: Quarry (`quarry serve`), PostgreSQL 15, Sphinx 2.2
(searchd) and the DuckDB runner, each on loopback and a free port, each stopped by the suite.

Every server here lives in a directory the suite hands over (under bench/work/) and is
started by the suite's own process; stop() ends exactly the process it started (and waits
for it). Memory is read from /proc: the proportional set size (Pss) summed over the
server's processes, so that PostgreSQL's shared buffers count once and not once per backend.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import engines

PG_BIN = Path('/usr/lib/postgresql/15/bin')
BENCH = engines.REPO / 'bench'


class PeerError(Exception):
    """A peer could not start or answer; the message says why in one line."""


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc, seconds=60, what='server'):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise PeerError('%s exited with status %s while starting' % (what, proc.returncode))
        try:
            socket.create_connection(('127.0.0.1', port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise PeerError('%s did not listen on port %d within %d s' % (what, port, seconds))


# --------------------------------------------------------------------------------------
# Memory

def children(pid):
    """pid and its descendants, from /proc/*/stat."""
    parent = {}
    for d in os.listdir('/proc'):
        if d.isdigit():
            try:
                with open('/proc/%s/stat' % d) as f:
                    fields = f.read().rsplit(')', 1)[1].split()
                parent[int(d)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += [c for c, pp in parent.items() if pp == p]
    return out


def pss_bytes(pid):
    """Pss of pid and its descendants, in bytes; 0 when the process is gone."""
    total = 0
    for p in children(pid):
        try:
            with open('/proc/%d/smaps_rollup' % p) as f:
                for line in f:
                    if line.startswith('Pss:'):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            pass
    return total


class MemSampler:
    """Samples the Pss of a process tree every `period` seconds in a thread; .peak is the
    largest sample since start (or since reset_peak())."""

    def __init__(self, pid, period=0.25):
        self.pid, self.period, self.peak = pid, period, 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def _loop(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, pss_bytes(self.pid))
            self._stop.wait(self.period)

    def now(self):
        v = pss_bytes(self.pid)
        self.peak = max(self.peak, v)
        return v

    def stop(self):
        self._stop.set()
        self._t.join()


# --------------------------------------------------------------------------------------
# Quarry

class QuarryServer:
    """`quarry serve --data DIR --http 127.0.0.1:0 --pg 127.0.0.1:0`, ports read from its log."""

    # Limits raised for the benchmark: a whole-corpus upload, "all ids" pages over HTTP, and
    # no per-request log line (PostgreSQL logs no statements either).
    CONFIG = {'max_result_window': 10 ** 8, 'max_ingest_bytes': 10 ** 12,
              'query_timeout_ms': 600000, 'log_requests': False}

    def __init__(self, binary, data_dir, log_path, http='127.0.0.1:0', extra=()):
        self.binary, self.data_dir, self.log_path = Path(binary), Path(data_dir), Path(log_path)
        self.http, self.extra = http, list(extra)  # a fixed port and --peers (scale_out.py)
        self.proc = None

    def start(self):
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log = open(self.log_path, 'w')
        conf = self.log_path.with_suffix('.config.json')
        conf.write_text(json.dumps(self.CONFIG))
        self.proc = subprocess.Popen([str(self.binary), 'serve', '--data', str(self.data_dir),
                                      '--http', self.http, '--pg', '127.0.0.1:0',
                                      '--config', str(conf)] + self.extra,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise PeerError('quarry serve exited %s: %s' % (self.proc.returncode,
                                                                self.log_tail()))
            text = self.log_path.read_text()
            m = re.search(r'serve pg=\S+:(\d+) ', text)
            h = re.search(r'serve started .*http=http://127\.0\.0\.1:(\d+)/', text)
            if m and h:
                self.pg_port, self.http_port = int(m.group(1)), int(h.group(1))
                return self
            time.sleep(0.05)
        raise PeerError('quarry serve did not start within 120 s')

    def log_tail(self):
        try:
            lines = self.log_path.read_text().strip().splitlines()
        except OSError:
            return ''
        return lines[-1] if lines else ''

    @property
    def pid(self):
        return self.proc.pid

    def connect(self):
        import psycopg2
        c = psycopg2.connect(host='127.0.0.1', port=self.pg_port, user='bench', dbname='quarry',
                             connect_timeout=10)
        c.autocommit = True
        return c

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log.close()
        self.proc = None


# --------------------------------------------------------------------------------------
# PostgreSQL 15

PG_SETTINGS = {
    # A tuned single-node setup for a read-mostly search workload on a small machine.
    'shared_buffers': '512MB', 'work_mem': '64MB', 'maintenance_work_mem': '512MB',
    'effective_cache_size': '4GB', 'random_page_cost': '1.1', 'jit': 'off',
    'max_connections': '40', 'synchronous_commit': 'off', 'checkpoint_timeout': '30min',
    'max_wal_size': '8GB', 'listen_addresses': "'127.0.0.1'", 'unix_socket_directories': "''",
    'logging_collector': 'off', 'autovacuum': 'off',
}


class PgCluster:
    """A PostgreSQL 15 cluster made by initdb in `root`, run by pg_ctl on a free port."""

    def __init__(self, root):
        self.root = Path(root)
        self.data = self.root / 'pgdata'
        self.port = None
        self.pid = None

    @staticmethod
    def available():
        return (PG_BIN / 'initdb').exists() and (PG_BIN / 'pg_ctl').exists()

    @staticmethod
    def version():
        out = subprocess.run([str(PG_BIN / 'postgres'), '--version'], capture_output=True,
                             text=True).stdout.strip()
        return out.replace('postgres (PostgreSQL)', 'PostgreSQL')

    def _as_owner(self, cmd):
        """initdb and postgres refuse root: run as the 'postgres' user when we are root."""
        if os.geteuid() == 0:
            return ['runuser', '-u', 'postgres', '--'] + cmd
        return cmd

    def init(self):
        if self.root.exists():
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, 'postgres', 'postgres')
        subprocess.run(self._as_owner([str(PG_BIN / 'initdb'), '-D', str(self.data), '-U',
                                       'bench', '--auth=trust', '-E', 'UTF8', '--locale=C']),
                       check=True, capture_output=True)
        with open(self.data / 'postgresql.conf', 'a') as f:
            for k, v in PG_SETTINGS.items():
                f.write('%s = %s\n' % (k, v))
        return self

    def start(self):
        self.port = free_port()
        log = self.root / 'pg.log'
        r = subprocess.run(self._as_owner([str(PG_BIN / 'pg_ctl'), '-D', str(self.data), '-l',
                                           str(log), '-o', '-p %d' % self.port, '-w', '-t', '120',
                                           'start']), capture_output=True, text=True)
        if r.returncode != 0:
            raise PeerError('pg_ctl start failed: %s' % (r.stderr or r.stdout).strip()[:200])
        with open(self.data / 'postmaster.pid') as f:
            self.pid = int(f.readline())
        return self

    def connect(self, dbname='postgres'):
        import psycopg2
        c = psycopg2.connect(host='127.0.0.1', port=self.port, user='bench', dbname=dbname,
                             connect_timeout=10)
        c.autocommit = True
        return c

    def stop(self):
        if self.port is None:
            return
        subprocess.run(self._as_owner([str(PG_BIN / 'pg_ctl'), '-D', str(self.data), '-m',
                                       'fast', '-w', 'stop']), capture_output=True)
        self.port = None
        self.pid = None


# --------------------------------------------------------------------------------------
# Sphinx 2.2 (searchd + indexer, SphinxQL over the MySQL protocol)

SPHINX_CONF = '''
source news_src
{
    type = tsvpipe
    tsvpipe_command = cat %(tsv)s
    tsvpipe_field = title
    tsvpipe_field = body
    tsvpipe_attr_uint = sym
    tsvpipe_attr_timestamp = published
    tsvpipe_attr_uint = views
    tsvpipe_attr_uint = month
}

index news
{
    source = news_src
    path = %(dir)s/news
    morphology = stem_en
    min_word_len = 1
    min_prefix_len = 2
    index_exact_words = 0
    docinfo = extern
}

indexer
{
    mem_limit = 512M
}

searchd
{
    listen = 127.0.0.1:%(port)d:mysql41
    log = %(dir)s/searchd.log
    query_log = %(dir)s/query.log
    pid_file = %(dir)s/searchd.pid
    binlog_path =
    max_matches = 10000000
    workers = threads
    read_timeout = 30
}
'''


class SphinxServer:
    """Sphinx 2.2.11 from Debian's sphinxsearch: indexer builds from a TSV, searchd serves."""

    def __init__(self, root):
        self.root = Path(root)
        self.proc = None
        self.port = None

    @staticmethod
    def available():
        return bool(shutil.which('searchd') and shutil.which('indexer'))

    @staticmethod
    def version():
        out = subprocess.run(['searchd', '--help'], capture_output=True, text=True).stdout
        m = re.search(r'Sphinx (\S+)', out)
        return 'Sphinx ' + (m.group(1) if m else '?')

    def conf(self, tsv):
        self.port = self.port or free_port()
        path = self.root / 'sphinx.conf'
        path.write_text(SPHINX_CONF % {'tsv': tsv, 'dir': self.root, 'port': self.port})
        return path

    def build(self, tsv):
        self.root.mkdir(parents=True, exist_ok=True)
        conf = self.conf(tsv)
        r = subprocess.run(['indexer', '--config', str(conf), 'news'], capture_output=True,
                           text=True)
        if r.returncode != 0 or 'ERROR' in r.stdout:
            raise PeerError('sphinx indexer failed: %s' % (r.stdout + r.stderr).strip()[-300:])

    def start(self, tsv):
        conf = self.conf(tsv)
        self.proc = subprocess.Popen(['searchd', '--config', str(conf), '--nodetach'],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc, 60, 'searchd')
        return self

    @property
    def pid(self):
        return self.proc.pid

    def connect(self):
        import pymysql
        return pymysql.connect(host='127.0.0.1', port=self.port, user='', autocommit=True)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


# --------------------------------------------------------------------------------------
# DuckDB (npm @duckdb/node-api, installed under bench/node_modules by ensure_duckdb)

DUCKDB_PKG = '@duckdb/node-api'


def ensure_duckdb():
    """Install @duckdb/node-api under bench/ when it is absent; -> None or why not."""
    if (BENCH / 'node_modules' / '@duckdb' / 'node-api').exists():
        return None
    if not shutil.which('npm') or not shutil.which('node'):
        return 'node/npm not installed'
    r = subprocess.run(['npm', 'install', '--no-save', '--no-audit', '--no-fund', '--prefix',
                        str(BENCH), DUCKDB_PKG], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return 'npm install %s failed: %s' % (DUCKDB_PKG, (r.stderr or r.stdout).strip()[-200:])
    return None


def duckdb_run(db_path, spec, timeout=3600):
    """Run bench/duckdb_run.mjs with a job spec (dict); -> its JSON answer (dict)."""
    spec_path = Path(str(db_path) + '.job.json')
    spec_path.write_text(json.dumps(spec))
    r = subprocess.run(['node', str(BENCH / 'duckdb_run.mjs'), str(db_path), str(spec_path)],
                       capture_output=True, text=True, timeout=timeout, cwd=str(BENCH))
    if r.returncode != 0:
        raise PeerError('duckdb runner failed: %s' % (r.stderr or r.stdout).strip()[-300:])
    return json.loads(r.stdout)
