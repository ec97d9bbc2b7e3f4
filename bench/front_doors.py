#!/usr/bin/python3
"""The shapes both front doors share, timed inside the server: HTTP searches
that sort by a column, facet and filter, and the SQL queries that walk a
column in order, group by dictionary codes and build predicate bitmaps.
Compares two builds (before / after a change) on the same data.

  bench/front_doors.py --corpus bench/work/news-200000.jsonl \
      --bin build/quarry [--bin OTHER/quarry] [--repeat 15] [--data DIR]

Each binary serves its own copy of the imported data (imported and merged
once by the first binary: the on-disk format is the same) on 127.0.0.1 with a
free port; the runs of a shape alternate between the servers, so a change of
load on the machine meets every build alike.  Times are the engine's own: "took_ms" of the search answer, and
for SQL the "took_ms" of POST /sql.  Reported: the minimum and the median of
--repeat runs after one warm-up run.  Nothing here asserts a time.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'e2e'))
import qserve  # noqa: E402
from qserve import Server  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from news_bench import QUARRY_SCHEMA as SCHEMA  # noqa: E402  (the suites' news schema)


def shapes(sym, word):
    s = lambda body: ('search', body)  # noqa: E731
    q = lambda text: ('sql', text)  # noqa: E731
    return [
        ('search sort by a column', s({'q': '*', 'sort': 'views:desc', 'limit': 10, 'doc': False})),
        ('search filter + sort', s({'q': '*', 'filter': "symbol = '%s'" % sym,
                                    'sort': 'published:desc', 'limit': 10, 'doc': False})),
        ('search word + facets', s({'q': word, 'limit': 0, 'facets': [
            {'type': 'terms', 'field': 'symbol', 'size': 10}, {'type': 'stats', 'field': 'views'}]})),
        ('search all + facets', s({'q': '*', 'filter': 'views >= 0', 'limit': 0, 'facets': [
            {'type': 'terms', 'field': 'symbol', 'size': 10},
            {'type': 'histogram', 'field': 'views', 'interval': 1000}]})),
        ('search word + filter', s({'q': word, 'filter': 'views > 2000', 'limit': 10, 'doc': False})),
        ('search word + sort', s({'q': word, 'sort': 'published:desc', 'limit': 10, 'doc': False})),
        ('sql order by column', q('SELECT id FROM news ORDER BY views DESC LIMIT 10')),
        ('sql filter + order', q("SELECT id FROM news WHERE symbol = '%s' ORDER BY published DESC "
                                 "LIMIT 10" % sym)),
        ('sql order by keyword', q('SELECT id, views FROM news ORDER BY symbol DESC, views LIMIT 10')),
        ('sql group by keyword', q('SELECT symbol, count(*), sum(views), avg(views) FROM news '
                                   'GROUP BY symbol')),
        ('sql word group by', q("SELECT symbol, count(*) FROM news WHERE news @@ '%s' "
                                "GROUP BY symbol" % word)),
        ('sql filtered count', q("SELECT count(*) FROM news WHERE views > 2000 AND "
                                 "published >= '2024-01-01'")),
        ('sql scan path rows', q("SELECT id FROM news WHERE views BETWEEN 1000 AND 1100 AND "
                                 "symbol = '%s'" % sym)),
    ]


def took(srv, kind, body):
    if kind == 'search':
        st, r = srv.call('POST', '/tables/news/search', body)
    else:
        st, r = srv.call('POST', '/sql', {'query': body})
    if st != 200:
        raise SystemExit('%s failed: %s %s' % (kind, st, r))
    return r['took_ms']


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--corpus', required=True)
    ap.add_argument('--bin', action='append', required=True)
    ap.add_argument('--repeat', type=int, default=15)
    ap.add_argument('--data', help='a data directory holding the corpus as table news already '
                    '(copied, never changed); default: import --corpus into a new one')
    ap.add_argument('--word', help='the searched word (default: one in about 20%% of the '
                    'first 3,000 articles)')
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix='quarry-fd-')
    try:
        base = os.path.join(work, 'data0')
        sp = os.path.join(work, 'schema.json')
        with open(sp, 'w') as f:
            json.dump(SCHEMA, f)
        if args.data:
            base = args.data
        else:
            subprocess.run([args.bin[0], 'import', '--data', base, 'news', args.corpus,
                            '--schema', sp], check=True, capture_output=True)
            subprocess.run([args.bin[0], 'merge', '--data', base, 'news'], check=True,
                           capture_output=True)
        df, n = {}, 0
        with open(args.corpus) as f:
            sym = None
            for line in f:
                d = json.loads(line)
                sym = sym or d['symbol']
                for w in set(d['body'].split()):
                    df[w] = df.get(w, 0) + 1
                n += 1
                if n == 3000:
                    break
        if not args.word:
            args.word = min(sorted(df), key=lambda w: abs(df[w] / n - 0.2))
        servers = []
        try:
            for i, b in enumerate(args.bin):
                data = os.path.join(work, 'data%d' % (i + 1))
                shutil.copytree(base, data)
                qserve.BIN = b
                servers.append(Server(data, work, config={'query_timeout_ms': 60000}))
            # interleaved: run k of every shape goes to each server in turn, so a
            # change of load on the machine meets every build alike
            results = [{} for _ in servers]
            for name, (kind, body) in shapes(sym, args.word):
                for srv in servers:
                    took(srv, kind, body)
                ts = [[] for _ in servers]
                for _ in range(args.repeat):
                    for i, srv in enumerate(servers):
                        ts[i].append(took(srv, kind, body))
                for i in range(len(servers)):
                    results[i][name] = (min(ts[i]), statistics.median(ts[i]))
        finally:
            for srv in servers:
                srv.stop()
        names = [n for n, _ in shapes(sym, args.word)]
        print('word %r, symbol %r, %d runs each' % (args.word, sym, args.repeat))
        head = '| shape | ' + ' | '.join('%s min / median ms' % os.path.basename(os.path.dirname(
            os.path.abspath(b))) + (' (%d)' % i) for i, b in enumerate(args.bin)) + ' |'
        print(head)
        print('|---' * (len(args.bin) + 1) + '|')
        for n in names:
            print('| %s | %s |' % (n, ' | '.join('%.2f / %.2f' % r[n] for r in results)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
