#!/usr/bin/python3
"""Ranked search on the real corpora in corpora/: Quarry, PostgreSQL 15 and SQLite FTS5.

  bench/real_corpora.py [--queries 50] [--repeat 11] [--engines quarry,postgres,sqlite]

The generated news corpus (bench/suite.py) has clean words; real text has punctuation,
versions, names and long documents. For each corpus in corpora/ (Debian package
descriptions, BEIR SciFact) this loads title + body into each engine (Quarry through
`quarry serve` and its HTTP upload, PostgreSQL with a stored tsvector + GIN, SQLite with an
FTS5 table), then runs --queries ranked top-10 queries of OR-ed words (SciFact: its own
test queries; Debian: package titles) over psycopg2 / sqlite3. Tokenizers differ on real
text (ICU word breaks, PostgreSQL's parser, unicode61), so only the number of rows is
compared (each engine must return 10 rows for each query); the ranked lists are not the
same by design (BM25 against ts_rank_cd). Reports load time, disk, and the median over
the queries of each query's median time. Writes bench/results/<date>-real.json.
"""

import argparse
import datetime
import gzip
import http.client
import json
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engines  # noqa: E402
import peers  # noqa: E402
import suite  # noqa: E402

WORK = engines.REPO / 'bench' / 'work' / 'real'
CORPORA = {'debian-packages': 'Debian package descriptions',
           'beir-scifact': 'BEIR SciFact (abstracts)'}
SCHEMA = {'primary_key': 'id', 'fields': [
    {'name': 'title', 'type': 'text', 'language': 'english'},
    {'name': 'body', 'type': 'text', 'language': 'english'}]}
STOP = suite.news_bench.STOP_WORDS


def words_of(text):
    return [w for w in re.sub(r'[^a-z0-9 ]', ' ', text.lower()).split()
            if w not in STOP and len(w) > 2 and not w.isdigit()]


def load_docs(name):
    with gzip.open(engines.REPO / 'corpora' / name / 'docs.jsonl.gz', 'rt') as f:
        return [json.loads(line) for line in f]


def pick_queries(name, docs, k):
    if name == 'beir-scifact':
        qs = [json.loads(line) for line in open(engines.REPO / 'corpora' / name / 'queries.jsonl')]
        texts = [q['text'] for q in qs if q.get('split') == 'test']
    else:
        texts = [d['title'] for d in docs[::max(1, len(docs) // (3 * k))]]
    out = []
    for t in texts:
        w = list(dict.fromkeys(words_of(t)))[:8]
        if len(w) >= 2:
            out.append(w)
        if len(out) >= k:
            break
    return out


def run_corpus(name, args, res):
    docs = load_docs(name)
    queries = pick_queries(name, docs, args.queries)
    d = WORK / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    jsonl = d / 'docs.jsonl'
    with open(jsonl, 'w') as f:
        for i, doc in enumerate(docs, 1):
            f.write(json.dumps({'id': i, 'title': doc.get('title') or '',
                                'body': doc.get('body') or ''}) + '\n')
    out = {'docs': len(docs), 'bytes': jsonl.stat().st_size, 'queries': len(queries),
           'engines': {}}
    res['corpora'][name] = out
    handles = {}
    try:
        if 'quarry' in args.engines:
            srv = peers.QuarryServer(args.quarry_bin, d / 'quarry', d / 'serve.log')
            srv.start()
            t0 = time.perf_counter()
            c = http.client.HTTPConnection('127.0.0.1', srv.http_port, timeout=3600)
            c.request('POST', '/tables', json.dumps({'name': 'docs', 'schema': SCHEMA}),
                      {'Content-Type': 'application/json'})
            c.getresponse().read()
            c.request('POST', '/tables/docs/documents?batch=50000', open(jsonl, 'rb').read(),
                      {'Content-Type': 'application/x-ndjson'})
            r = c.getresponse()
            body = json.loads(r.read())
            if r.status != 200 or body.get('imported') != len(docs):
                raise peers.PeerError('quarry ingest: %s' % str(body)[:200])
            handles['quarry'] = srv
            out['engines']['quarry'] = {'load_s': time.perf_counter() - t0,
                                        'disk_bytes': engines.dir_bytes(srv.data_dir)}
        if 'postgres' in args.engines and peers.PgCluster.available():
            pg = peers.PgCluster(d / 'pg').init().start()
            handles['postgres'] = pg
            conn = pg.connect()
            cur = conn.cursor()
            t0 = time.perf_counter()
            cur.execute('CREATE TABLE docs (id bigint PRIMARY KEY, title text, body text, tsv '
                        "tsvector GENERATED ALWAYS AS (to_tsvector('english', title || ' ' || "
                        'body)) STORED)')
            from psycopg2.extras import execute_values
            with open(jsonl) as f:
                rows = [(x['id'], x['title'], x['body']) for x in map(json.loads, f)]
            execute_values(cur, 'INSERT INTO docs (id, title, body) VALUES %s', rows,
                           page_size=2000)
            cur.execute('CREATE INDEX ON docs USING gin (tsv)')
            cur.execute('VACUUM ANALYZE docs')
            cur.execute("SELECT pg_total_relation_size('docs')")
            out['engines']['postgres'] = {'load_s': time.perf_counter() - t0,
                                          'disk_bytes': cur.fetchone()[0]}
            conn.close()
        if 'sqlite' in args.engines:
            import sqlite3
            path = d / 'fts5.db'
            t0 = time.perf_counter()
            db = sqlite3.connect(str(path))
            db.executescript('PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;')
            db.execute("CREATE VIRTUAL TABLE docs USING fts5(title, body, tokenize='porter "
                       "unicode61')")
            with open(jsonl) as f, db:
                db.executemany('INSERT INTO docs(rowid, title, body) VALUES (?, ?, ?)',
                               ((x['id'], x['title'], x['body']) for x in map(json.loads, f)))
            db.execute("INSERT INTO docs(docs) VALUES ('optimize')")
            db.commit()
            db.close()
            handles['sqlite'] = path
            out['engines']['sqlite'] = {'load_s': time.perf_counter() - t0,
                                        'disk_bytes': path.stat().st_size}
        # run: answers (row counts) first, then timing
        sqls = {
            'quarry': ["SELECT id FROM docs WHERE docs @@ '%s' ORDER BY score() DESC LIMIT 10"
                       % ' '.join(q) for q in queries],
            'postgres': ["SELECT id FROM docs, to_tsquery('english', '%s') q WHERE tsv @@ q "
                         "ORDER BY ts_rank_cd(tsv, q) DESC LIMIT 10" % ' | '.join(q)
                         for q in queries],
            'sqlite': ["SELECT rowid FROM docs WHERE docs MATCH '%s' ORDER BY rank LIMIT 10"
                       % ' OR '.join('"%s"' % w for w in q) for q in queries]}
        cursors = {}
        if 'quarry' in handles:
            cursors['quarry'] = handles['quarry'].connect().cursor()
        if 'postgres' in handles:
            cursors['postgres'] = handles['postgres'].connect().cursor()
        if 'sqlite' in handles:
            import sqlite3
            cursors['sqlite'] = sqlite3.connect(str(handles['sqlite'])).cursor()
        counts = {}
        for e, cur in cursors.items():
            counts[e] = []
            for s in sqls[e]:
                cur.execute(s)
                counts[e].append(len(cur.fetchall()))
        ref = next(iter(counts.values()))
        bad = {e: [i for i, (a, b) in enumerate(zip(c, ref)) if a != b] for e, c in counts.items()}
        bad = {e: v for e, v in bad.items() if v}
        if bad:
            out['mismatch'] = {e: ['%s: %d vs %d rows' % (' '.join(queries[i]), counts[e][i], ref[i])
                                   for i in v[:5]] for e, v in bad.items()}
            print('real corpora: %s: row counts differ: %s' % (name, out['mismatch']),
                  file=sys.stderr)
            return False
        for e, cur in cursors.items():
            per_q = []
            for s in sqls[e]:
                def run(s=s):
                    cur.execute(s)
                    return cur.fetchall()
                per_q.append(suite.time_fn(run, args.repeat)['median_ms'])
            per_q.sort()
            out['engines'][e].update({'median_ms': statistics.median(per_q),
                                      'p95_ms': per_q[int(0.95 * (len(per_q) - 1))],
                                      'mean_ms': statistics.mean(per_q)})
            print('  %s %s: %s' % (name, e, out['engines'][e]), file=sys.stderr)
        return True
    finally:
        for e in ('quarry', 'postgres'):
            if e in handles:
                handles[e].stop()


def main():
    engines.ensure_system_python()
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--queries', type=int, default=50)
    ap.add_argument('--repeat', type=int, default=11)
    ap.add_argument('--engines', default='quarry,postgres,sqlite')
    args = ap.parse_args()
    args.repeat = max(11, args.repeat)
    args.engines = args.engines.split(',')
    build = os.environ.get('BUILD', 'build')
    args.quarry_bin = Path(os.environ.get('QUARRY_BIN') or engines.REPO / build / 'quarry')
    res = {'date': datetime.date.today().isoformat(), 'git_commit': engines.git_commit(),
           'repeat': args.repeat, 'loadavg_start': os.getloadavg(), 'corpora': {}}
    ok = True
    for name in CORPORA:
        print('real corpora: %s...' % name, file=sys.stderr, flush=True)
        ok = run_corpus(name, args, res) and ok
    res['loadavg_end'] = os.getloadavg()
    out = engines.REPO / 'bench' / 'results' / ('%s-real.json' % res['date'])
    out.write_text(json.dumps(res, indent=1) + '\n')
    print('wrote %s' % engines.show_path(out), file=sys.stderr)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
