#!/usr/bin/python3
"""A stand-in for build/quarry that speaks its command-line contract, backed by SQLite FTS5.

It exists to test the instruments' Quarry paths before the engine can answer:

  QUARRY_BIN=bench/mock_quarry.py bench/relevance.py --check
  QUARRY_BIN=bench/mock_quarry.py bench/news_bench.py --quick

Subcommands (see bench/engines.py for the contract): import, search (single query or
--queries batch), bench. The data directory holds one FTS5 database per table. The query
language is the one engines.QuarryEngine.query_text() writes: "a b" phrase, p* prefix,
a AND b, otherwise OR. It measures nothing about Quarry, so never report its numbers.
"""

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engines  # noqa: E402


def parse(text):
    text = text.strip()
    m = re.fullmatch(r'"([^"]*)"', text)
    if m:
        return ('phrase', m.group(1).split())
    if text.endswith('*') and ' ' not in text:
        return ('prefix', text[:-1])
    if ' AND ' in text:
        return ('and', text.split(' AND '))
    return ('or', text.split())


def open_table(data, table):
    path = Path(data) / (table + '.fts5')
    if not path.exists():
        sys.exit('quarry: table "%s" does not exist' % table)
    e = engines.Fts5Engine(path)
    e.int_ids = json.loads((Path(data) / (table + '.meta')).read_text())['int_ids']
    return e


def cmd_import(a):
    schema = json.loads(Path(a.schema).read_text())
    text = [f['name'] for f in schema['fields'] if f['type'] == 'text']
    stored = [f['name'] for f in schema['fields'] if f['type'] != 'text']
    src = sys.stdin if a.file == '-' else engines.open_text(a.file)
    docs = [json.loads(line) for line in src if line.strip()]
    int_ids = all(isinstance(d[schema['primary_key']], int) for d in docs)
    Path(a.data).mkdir(parents=True, exist_ok=True)
    e = engines.Fts5Engine(Path(a.data) / (a.table + '.fts5'))
    e.create(text, stored, int_ids=int_ids)
    e.add(docs)
    (Path(a.data) / (a.table + '.meta')).write_text(json.dumps({'int_ids': int_ids}))
    print('imported %d rows into %s' % (len(docs), a.table), file=sys.stderr)


def cmd_search(a):
    e = open_table(a.data, a.table)
    items = ([json.loads(line) for line in open(a.queries) if line.strip()] if a.queries
             else [{'qid': None, 'q': a.query}])
    for it in items:
        q = parse(it['q'])
        hits = e.top(q, a.offset + a.limit)[a.offset:]
        if a.queries:
            print(json.dumps({'qid': it['qid'], 'total': e.count(q),
                              'hits': [{'id': i, 'score': s} for i, s in hits]}))
        elif a.count:
            print(e.count(q))
        else:
            for i, s in hits:
                print(json.dumps({'id': i, 'score': s}) if a.json else '%s\t%.4f' % (i, s))


def cmd_bench(a):
    e = open_table(a.data, a.table)
    for line in open(a.queries):
        if not line.strip():
            continue
        it = json.loads(line)
        q, mode = parse(it['q']), it['mode']
        fn = {'count': lambda: e.count(q),
              'top': lambda: [i for i, _ in e.top(q, it.get('limit', 20))],
              'ids': lambda: e.ids(q)}[mode]
        times = []
        for _ in range(a.repeat + 1):
            t0 = time.perf_counter()
            ans = fn()
            times.append((time.perf_counter() - t0) * 1000)
        times = sorted(times[1:])
        out = {'qid': it['qid'], 'median_ms': times[len(times) // 2], 'min_ms': times[0]}
        out['count'] = ans if mode == 'count' else len(ans)
        if mode != 'count':
            out['ids'] = ans
        print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(prog='quarry')
    sub = ap.add_subparsers(dest='cmd', required=True)
    p = sub.add_parser('import')
    p.add_argument('--data', required=True)
    p.add_argument('table')
    p.add_argument('file')
    p.add_argument('--schema', required=True)
    p.add_argument('--batch', type=int)
    p.add_argument('--strict', action='store_true')
    p = sub.add_parser('search')
    p.add_argument('--data', required=True)
    p.add_argument('table')
    p.add_argument('query', nargs='?')
    p.add_argument('--queries')
    p.add_argument('--limit', type=int, default=10)
    p.add_argument('--offset', type=int, default=0)
    p.add_argument('--count', action='store_true')
    p.add_argument('--json', action='store_true')
    p.add_argument('--and', dest='and_', action='store_true')
    p.add_argument('--fields')
    p.add_argument('--typo')                   # accepted and ignored: FTS5 has none
    p.add_argument('--prefix', action='store_true')
    p.add_argument('--scoring')
    p = sub.add_parser('bench')
    p.add_argument('--data', required=True)
    p.add_argument('table')
    p.add_argument('--queries', required=True)
    p.add_argument('--repeat', type=int, default=11)
    a = ap.parse_args()
    {'import': cmd_import, 'search': cmd_search, 'bench': cmd_bench}[a.cmd](a)


if __name__ == '__main__':
    main()
