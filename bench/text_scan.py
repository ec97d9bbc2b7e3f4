#!/usr/bin/python3
"""SQL's text scan inside the server: EXPLAIN ANALYZE times of full-text queries over the news
corpus (issue 14's target: all ids of a word in ~90% of 200,000 articles within 10 ms).

  bench/text_scan.py [--n 200000] [--quarry build/quarry] [--repeat 30] [--data DIR]

The corpus is bench/gen_news.py's (generated into bench/work/ when missing) and is imported
once with `quarry import` into bench/work/textscan-<n>/ (or --data); the words are
bench/news_bench.py's picks (the "common" word is in about 88% of the articles). A throwaway
`quarry serve` on loopback free ports answers `psql` (bench/peers.py QuarryServer) and is
stopped at the end. Each query runs --repeat times after one warm-up; the report gives the
engine's own "Execution Time" (binding, planning, execution and the rows collected, not the
wire) as minimum and median, and the scan node's actual time. The machine's load average is
printed too: on a shared machine the minimum is the figure to compare.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import news_bench  # noqa: E402
import peers  # noqa: E402

BENCH = Path(__file__).resolve().parent
WORK = BENCH / 'work'


def corpus(n):
    path = WORK / ('news-%d.jsonl' % n)
    if not path.exists():
        WORK.mkdir(exist_ok=True)
        subprocess.run([sys.executable, str(BENCH / 'gen_news.py'), '--n', str(n), '--out',
                        str(path)], check=True)
    return path


def load(quarry, data, n):
    if (data / 'tables' / 'news').exists():
        return
    schema = WORK / 'textscan-schema.json'
    schema.write_text(json.dumps(news_bench.QUARRY_SCHEMA))
    t0 = time.time()
    subprocess.run([str(quarry), 'import', '--data', str(data), 'news', str(corpus(n)),
                    '--schema', str(schema)], check=True)
    print('imported %d articles in %.0f s' % (n, time.time() - t0), file=sys.stderr)


def explain(port, sql):
    out = subprocess.run(['psql', '-h', '127.0.0.1', '-p', str(port), '-X', '-A', '-t', '-q',
                          '-U', 'bench', 'quarry', '-c', 'EXPLAIN ANALYZE ' + sql],
                         check=True, capture_output=True, text=True).stdout
    total = float(re.search(r'Execution Time: ([\d.]+) ms', out).group(1))
    rows = int(re.search(r'\nRows: (\d+)', out).group(1))
    scan = re.search(r'Scan on news .*actual time=[\d.]+\.\.([\d.]+) rows=(\d+)', out)
    return total, float(scan.group(1)) if scan else None, rows, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--n', type=int, default=200000)
    ap.add_argument('--quarry', default=str(BENCH.parent / 'build' / 'quarry'))
    ap.add_argument('--repeat', type=int, default=30)
    ap.add_argument('--data', help='data directory (default bench/work/textscan-<n>)')
    ap.add_argument('--plans', action='store_true', help='print one EXPLAIN ANALYZE per query')
    a = ap.parse_args()
    data = Path(a.data) if a.data else WORK / ('textscan-%d' % a.n)
    load(a.quarry, data, a.n)
    words, _ = news_bench.pick_words(1)
    common, mid = words['common']['word'], words['mid']['word']
    queries = [
        ('ids_common', "SELECT id FROM news WHERE news @@ '%s'" % common),
        ('ids_common_scored', "SELECT id, score() FROM news WHERE news @@ '%s'" % common),
        ('count_common', "SELECT count(*) FROM news WHERE news @@ '%s'" % common),
        ('top10_common', "SELECT id, score() FROM news WHERE news @@ '%s' "
                         "ORDER BY score() DESC LIMIT 10" % common),
        ('ids_mid_filter', "SELECT id FROM news WHERE news @@ '%s' AND views > 1000" % mid),
        ('ids_common_or', "SELECT id FROM news WHERE news @@ '%s' OR views < 3" % common),
    ]
    srv = peers.QuarryServer(a.quarry, data, WORK / 'textscan-serve.log').start()
    try:
        print('quarry %s, %d articles, words: common "%s", mid "%s"; load average %s' % (
            a.quarry, a.n, common, mid, ' '.join('%.1f' % x for x in os.getloadavg())))
        print('%-18s %8s %10s %10s %10s' % ('query', 'rows', 'min ms', 'median ms', 'scan ms'))
        for name, sql in queries:
            _, _, _, plan = explain(srv.pg_port, sql)  # warm-up
            totals, scans, rows = [], [], 0
            for _ in range(a.repeat):
                total, scan, rows, _ = explain(srv.pg_port, sql)
                totals.append(total)
                if scan is not None:
                    scans.append(scan)
            print('%-18s %8d %10.2f %10.2f %10s' % (
                name, rows, min(totals), statistics.median(totals),
                '%.2f' % min(scans) if scans else '-'))
            if a.plans:
                print('  ' + sql + '\n' + '\n'.join('    ' + ln for ln in plan.splitlines()))
        print('load average at the end %s' % ' '.join('%.1f' % x for x in os.getloadavg()))
    finally:
        srv.stop()


if __name__ == '__main__':
    main()
