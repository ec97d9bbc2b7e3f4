"""Engines and plumbing shared by Quarry's measuring instruments.

Used by bench/relevance.py (judged collections) and bench/news_bench.py (speed). There are
three engines behind one small interface:

  Fts5Engine    SQLite FTS5, tokenize='porter unicode61', ranked by bm25() with default
                weights (1.0 for every column)
  XapianEngine  Xapian 1.4, BM25Weight with default parameters, Snowball english stemmer,
                TermGenerator STEM_SOME (unstemmed terms with positions + 'Z'-prefixed stems)
  QuarryEngine  build/quarry, driven only through its command-line contract (see below)

Queries are small tuples that each engine translates to its own dialect:

  ('term', w)             documents containing w (after stemming)
  ('or', [w1, w2, ..])    any of the words; ranked queries use this (OR semantics)
  ('and', [w1, w2, ..])   all of the words
  ('prefix', p)           any word starting with p
  ('phrase', [w1, w2])    the words adjacent and in order

Quarry CLI contract (every subcommand takes --data DIR, placed right after the subcommand):

  quarry import --data D TABLE FILE.jsonl[.gz] --schema S.json
  quarry search --data D TABLE --queries Q.jsonl --json --limit N
      Q.jsonl lines: {"qid": .., "q": ..}
      output lines:  {"qid": .., "total": N, "hits": [{"id": .., "score": ..}, ..]}
  quarry bench  --data D TABLE --queries Q.jsonl --repeat N
      Q.jsonl lines: {"qid": .., "q": .., "mode": "count"|"top"|"ids", "limit": 20}
      output lines:  {"qid": .., "median_ms": .., "min_ms": .., "count": N, "ids": [..]}

The query text handed to Quarry is written in its query language as assumed here: words
separated by spaces are OR-ed, `a AND b` requires both, `p*` is a prefix and `"a b"` a
phrase. QuarryEngine.query_text() is the one place to change if the language differs.
"""

import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SYSTEM_PYTHON = '/usr/bin/python3'


def ensure_system_python():
    """Re-run this script under the system python when the current one lacks xapian.

    Debian's python3-xapian is only importable by the system interpreter; a pyenv or venv
    python3 found first on PATH would silently drop the Xapian peer. Called at the top of
    each instrument's main(); a no-op when xapian already imports or there is no system
    python. QUARRY_BENCH_REEXEC guards against a loop.
    """
    try:
        import xapian  # noqa: F401
        return
    except ImportError:
        pass
    if (os.environ.get('QUARRY_BENCH_REEXEC') or not os.path.exists(SYSTEM_PYTHON)
            or os.path.realpath(sys.executable) == os.path.realpath(SYSTEM_PYTHON)):
        return
    os.environ['QUARRY_BENCH_REEXEC'] = '1'
    os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON] + sys.argv)


def shared_corpora_dir():
    """The folder of research-only corpora: $QUARRY_SHARED_CORPORA or ../shared/corpora."""
    env = os.environ.get('QUARRY_SHARED_CORPORA')
    return Path(env) if env else REPO.parent / 'shared' / 'corpora'


def show_path(path):
    """A path as printed in reports: relative to the repository when it lies in the
    repository or beside it (../shared/corpora), else as given; never this machine's
    absolute location of the repository."""
    rel = os.path.relpath(path, REPO)
    return str(path) if rel.startswith(os.path.join('..', '..')) else rel


def open_text(path):
    """Open a text file, gunzipping when the name ends in .gz."""
    path = str(path)
    if path.endswith('.gz'):
        return gzip.open(path, 'rt', encoding='utf-8')
    return open(path, encoding='utf-8')


def read_jsonl(path):
    with open_text(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def dir_bytes(path):
    """Bytes on disk under path (a file or a directory); 0 when it does not exist."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob('*') if p.is_file())


def git_commit():
    """Short HEAD commit, with '+dirty' when src/ or the Makefile has uncommitted changes
    (then build/quarry need not match the commit)."""
    try:
        head = subprocess.run(['git', '-C', str(REPO), 'rev-parse', '--short', 'HEAD'],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(['git', '-C', str(REPO), 'status', '--porcelain', '--',
                                'src', 'Makefile'],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + ('+dirty' if dirty else '')) if head else None


def time_calls(fn, repeat):
    """Run fn once to warm up, then `repeat` times; returns (answer, median_ms, min_ms)."""
    answer = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
    return answer, statistics.median(times), min(times)


class EngineError(Exception):
    """An engine could not build, load or answer; the message says why, in one line."""


# --------------------------------------------------------------------------------------
# SQLite FTS5


class Fts5Engine:
    """SQLite FTS5 over a table t(text columns..., stored columns UNINDEXED).

    With int_ids the document id is the rowid (news); otherwise it is an UNINDEXED
    first column `id` (relevance collections, whose ids are strings).
    """
    name = 'fts5'

    def __init__(self, path=':memory:'):
        import sqlite3
        self.sqlite3 = sqlite3
        self.path = str(path)
        self.db = sqlite3.connect(self.path)
        self.int_ids = True

    @staticmethod
    def version():
        import sqlite3
        return 'SQLite ' + sqlite3.sqlite_version

    def create(self, text_fields, stored_fields=(), int_ids=True):
        self.int_ids = int_ids
        self.text_fields = list(text_fields)
        self.stored_fields = list(stored_fields)
        cols = [] if int_ids else ['id UNINDEXED']
        cols += self.text_fields + ['%s UNINDEXED' % f for f in self.stored_fields]
        self.db.executescript('PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;')
        self.db.execute("CREATE VIRTUAL TABLE t USING fts5(%s, tokenize='porter unicode61')"
                        % ', '.join(cols))

    def add(self, docs):
        """Insert an iterable of dicts in one transaction."""
        fields = self.text_fields + self.stored_fields
        if self.int_ids:
            sql = 'INSERT INTO t(rowid, %s) VALUES (?%s)' % (', '.join(fields), ', ?' * len(fields))
        else:
            sql = 'INSERT INTO t VALUES (?%s)' % (', ?' * len(fields))
        rows = ((d['id'],) + tuple(d.get(f) or '' for f in fields) for d in docs)
        with self.db:
            self.db.executemany(sql, rows)

    def optimize(self):
        with self.db:
            self.db.execute("INSERT INTO t(t) VALUES('optimize')")

    @staticmethod
    def match(query):
        kind, arg = query
        quote = lambda w: '"%s"' % w.replace('"', '""')
        if kind == 'term':
            return quote(arg)
        if kind == 'or':
            return ' OR '.join(quote(w) for w in arg)
        if kind == 'and':
            return ' AND '.join(quote(w) for w in arg)
        if kind == 'prefix':
            return quote(arg) + '*'
        if kind == 'phrase':
            return quote(' '.join(arg))
        raise ValueError('unknown query kind %r' % kind)

    def count(self, query):
        return self.db.execute('SELECT count(*) FROM t WHERE t MATCH ?',
                               (self.match(query),)).fetchone()[0]

    def top(self, query, limit):
        """[(id, score)] best first; score = -bm25() so that higher is better."""
        idcol = 'rowid' if self.int_ids else 'id'
        sql = 'SELECT %s, -rank FROM t WHERE t MATCH ? ORDER BY rank LIMIT ?' % idcol
        return self.db.execute(sql, (self.match(query), limit)).fetchall()

    def ids(self, query):
        """All matching ids. group_concat keeps the row loop inside SQLite, so the time is
        the engine's rather than the Python binding's per-row cost."""
        idcol = 'rowid' if self.int_ids else 'id'
        row = self.db.execute('SELECT group_concat(%s) FROM t WHERE t MATCH ?' % idcol,
                              (self.match(query),)).fetchone()
        if not row[0]:
            return []
        conv = int if self.int_ids else str
        return [conv(x) for x in row[0].split(',')]

    def close(self):
        self.db.close()


# --------------------------------------------------------------------------------------
# Xapian


class XapianEngine:
    """Xapian with BM25Weight. In memory (path None) or a disk database at path.

    Document ids: with int_ids the Xapian docid is the document's own integer id (news);
    otherwise the id is kept as document data (relevance collections).
    Values: slot 0 symbol, slot 1 published (ISO text sorts by time), slot 2 views
    (sortable_serialise), when the documents have them.
    """
    name = 'xapian'

    def __init__(self, path=None, writable=True):
        import xapian
        self.x = xapian
        self.path = path
        if path is None:
            self.db = xapian.WritableDatabase('', xapian.DB_BACKEND_INMEMORY)
        elif writable:
            self.db = xapian.WritableDatabase(str(path), xapian.DB_CREATE_OR_OVERWRITE)
        else:
            self.db = xapian.Database(str(path))
        self.stem = xapian.Stem('english')
        self.int_ids = True

    @staticmethod
    def version():
        import xapian
        return 'Xapian ' + xapian.version_string()

    def create(self, text_fields, stored_fields=(), int_ids=True):
        self.text_fields = list(text_fields)
        self.int_ids = int_ids

    def add(self, docs):
        """Index dicts. With int_ids the document data is d['_raw'] (the JSON line as read)
        when present, else the dict as JSON; otherwise it is the id."""
        x = self.x
        tg = x.TermGenerator()
        tg.set_stemmer(self.stem)
        tg.set_stemming_strategy(x.TermGenerator.STEM_SOME)
        for d in docs:
            doc = x.Document()
            tg.set_document(doc)
            for i, f in enumerate(self.text_fields):
                if i:
                    tg.increase_termpos()
                tg.index_text(d.get(f) or '')
            if 'symbol' in d:
                doc.add_value(0, d['symbol'])
            if 'published' in d:
                doc.add_value(1, d['published'])
            if 'views' in d:
                doc.add_value(2, x.sortable_serialise(d['views']))
            if self.int_ids:
                doc.set_data(d.get('_raw') or json.dumps(d))
                self.db.replace_document(int(d['id']), doc)
            else:
                doc.set_data(str(d['id']))
                self.db.add_document(doc)
        self.db.commit()

    def stemmed(self, word):
        s = self.stem(word)
        return s.decode('utf-8') if isinstance(s, bytes) else s

    def xquery(self, query):
        x = self.x
        kind, arg = query
        stemmed = lambda w: x.Query('Z' + self.stemmed(w))
        if kind == 'term':
            return stemmed(arg)
        if kind in ('or', 'and'):
            op = x.Query.OP_OR if kind == 'or' else x.Query.OP_AND
            return x.Query(op, [stemmed(w) for w in arg])
        if kind == 'prefix':
            return x.Query(x.Query.OP_WILDCARD, arg, 0, x.Query.WILDCARD_LIMIT_ERROR,
                           x.Query.OP_SYNONYM)
        if kind == 'phrase':
            return x.Query(x.Query.OP_PHRASE, [x.Query(w) for w in arg])
        raise ValueError('unknown query kind %r' % kind)

    def _enquire(self, query, weighted):
        enq = self.x.Enquire(self.db)
        enq.set_query(self.xquery(query))
        enq.set_weighting_scheme(self.x.BM25Weight() if weighted else self.x.BoolWeight())
        return enq

    def count(self, query):
        n = self.db.get_doccount()
        mset = self._enquire(query, False).get_mset(0, 0, n)
        return mset.get_matches_estimated()

    def top(self, query, limit):
        mset = self._enquire(query, True).get_mset(0, limit)
        if self.int_ids:
            return [(m.docid, m.weight) for m in mset]
        return [(m.document.get_data().decode(), m.weight) for m in mset]

    def ids(self, query):
        mset = self._enquire(query, False).get_mset(0, self.db.get_doccount())
        if self.int_ids:
            return [m.docid for m in mset]
        return [m.document.get_data().decode() for m in mset]

    def close(self):
        self.db.close()


# --------------------------------------------------------------------------------------
# Quarry, through the command line


def quarry_binary():
    return Path(os.environ.get('QUARRY_BIN') or REPO / 'build' / 'quarry')


class QuarryEngine:
    """build/quarry driven through its CLI; every call is a subprocess."""
    name = 'quarry'

    def __init__(self, data_dir, binary=None):
        self.binary = Path(binary) if binary else quarry_binary()
        self.data_dir = Path(data_dir)

    def version(self):
        return 'Quarry ' + (git_commit() or 'unknown')

    @staticmethod
    def query_text(query):
        """The query in Quarry's text query language (see the module comment)."""
        kind, arg = query
        if kind == 'term':
            return arg
        if kind == 'or':
            return ' '.join(arg)
        if kind == 'and':
            return ' AND '.join(arg)
        if kind == 'prefix':
            return arg + '*'
        if kind == 'phrase':
            return '"%s"' % ' '.join(arg)
        raise ValueError('unknown query kind %r' % kind)

    def run(self, sub, *args, timeout=3600):
        """Run `quarry SUB --data DIR ARGS..`; returns stdout or raises EngineError."""
        if not os.access(self.binary, os.X_OK):
            raise EngineError('%s not found; run make first' % show_path(self.binary))
        cmd = [str(self.binary), sub, '--data', str(self.data_dir)] + [str(a) for a in args]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise EngineError('quarry %s timed out after %d s' % (sub, timeout))
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            why = lines[0] if lines else 'no message'
            raise EngineError('quarry %s exited %d: %s' % (sub, proc.returncode, why))
        return proc.stdout

    def import_jsonl(self, table, path, schema, extra=()):
        """Import a JSONL file into a fresh data directory; returns wall seconds."""
        if self.data_dir.exists():
            shutil.rmtree(self.data_dir)
        self.data_dir.mkdir(parents=True)
        schema_path = self.data_dir.parent / (self.data_dir.name + '.schema.json')
        schema_path.write_text(json.dumps(schema))
        t0 = time.perf_counter()
        self.run('import', table, path, '--schema', schema_path, *extra)
        return time.perf_counter() - t0

    def _batch(self, sub, table, lines, args):
        qpath = self.data_dir.parent / (self.data_dir.name + '.%s.jsonl' % sub)
        with open(qpath, 'w') as f:
            for obj in lines:
                f.write(json.dumps(obj) + '\n')
        out = self.run(sub, table, '--queries', qpath, *args)
        answers = {}
        for line in out.splitlines():
            if line.strip():
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    raise EngineError('quarry %s printed a line that is not JSON: %.80s'
                                      % (sub, line))
                answers[str(obj.get('qid'))] = obj
        missing = [o['qid'] for o in lines if str(o['qid']) not in answers]
        if missing:
            raise EngineError('quarry %s gave no answer for %d of %d queries (first: qid %s)'
                              % (sub, len(missing), len(lines), missing[0]))
        return answers

    def search_batch(self, table, items, limit, flags=()):
        """items: [(qid, query tuple)] -> {qid: [(id, score)]} best first.  flags: more
        `quarry search` options (e.g. --typo auto --prefix, --scoring sum)."""
        lines = [{'qid': qid, 'q': self.query_text(q)} for qid, q in items]
        answers = self._batch('search', table, lines, ['--json', '--limit', limit] + list(flags))
        return {qid: [(str(h['id']), float(h['score'])) for h in a.get('hits', [])]
                for qid, a in answers.items()}

    def bench(self, table, items, repeat):
        """items: [dict(qid, query, mode, limit)] -> {qid: bench answer dict}."""
        lines = []
        for it in items:
            obj = {'qid': it['qid'], 'q': self.query_text(it['query']), 'mode': it['mode']}
            if it.get('limit'):
                obj['limit'] = it['limit']
            lines.append(obj)
        return self._batch('bench', table, lines, ['--repeat', repeat])
