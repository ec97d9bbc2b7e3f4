#!/usr/bin/python3
"""Throughput through the PostgreSQL wire protocol: pgbench custom scripts against Quarry's
PG port and PostgreSQL 15, on the same data, in the same run.

  bench/pgbench.py [--n 200000] [--seconds 10] [--clients 1,8] [--words 5]

It reopens what `bench/suite.py --n N` loaded in bench/work/suite-N/ (Quarry's data
directory and the PostgreSQL cluster, as `--reuse` does) and starts both on loopback and
free ports; it stops them at the end, also on errors. Nothing is loaded or changed. Then:

1. Writes the pgbench scripts (bench/work/pgbench-N/scripts/), one file per word so that
   pgbench rotates the words (`-f a.sql -f b.sql ...` picks a script at random per
   transaction):
   - point:  `\\set id random(1, N)` and the suite's point lookup by primary key;
   - ranked: top-10 by rank of one mid-frequency word (df 3-7%): Quarry
     `news @@ 'w' ORDER BY score() DESC`, PostgreSQL the stored tsvector with GIN and
     `ORDER BY ts_rank_cd(tsv, q) DESC`, the suite's query texts;
   - agg:    count and avg of views per symbol over a word's matches in a half year.
2. Checks the answers of every script's query on both engines through psycopg2 (point
   rows, counts of the words' matches, ranked lists by row count only since the ranking
   functions differ by design, group results) and stops on a mismatch before timing.
3. Runs pgbench -n -M prepared -T S at each client count, Quarry then PostgreSQL back to
   back per script, after a short warm-up; reads tps, latency and failures from its
   output; samples the load average around each run.
4. Streams a 50,000-row result (`SELECT id, views` over the matches of the common word,
   cut at the id where the 50,000th match lies) through psycopg2 on both engines, checks
   the rows are the same, and takes the median of --stream-runs runs.
5. Writes bench/results/<date>-pgbench-<n>.json and .md (the table and the targets of
   issue 6: point lookup >= PostgreSQL's tps, ranked search and search + aggregate >= 10x,
   the 50,000-row stream at least as fast as PostgreSQL).

The machine is shared, so only ratios within one run mean much; the load average is in
the report.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

try:
    import psycopg2  # noqa: F401  (Debian python3-psycopg2, for the answers and the stream)
except ImportError:
    if sys.executable != '/usr/bin/python3' and os.path.exists('/usr/bin/python3'):
        os.execv('/usr/bin/python3', ['/usr/bin/python3'] + sys.argv)
    raise

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engines  # noqa: E402
import gen_news  # noqa: E402
import news_bench  # noqa: E402
import peers  # noqa: E402
import suite  # noqa: E402

WORK = engines.REPO / 'bench' / 'work'
RESULTS = engines.REPO / 'bench' / 'results'
ENGINES = ('quarry', 'postgres')
NAMES = {'quarry': 'Quarry', 'postgres': 'PostgreSQL'}
HALF_YEAR = ('2024-01-01', '2024-07-01')
STREAM_ROWS = 50000
# issue 6's targets: Quarry's tps (rows/s for the stream) over PostgreSQL's, at least
TARGETS = {'point': 1.0, 'ranked': 10.0, 'agg': 10.0, 'stream': 1.0}
LABELS = {'point': 'point lookup by id',
          'ranked': 'ranked search, top-10 of a mid-frequency word',
          'agg': 'search + date filter + count/avg of views per symbol',
          'stream': '50,000-row result streamed (psycopg2)'}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def pick_words(k):
    """k stemming-stable mid-frequency words (expected df 3-7%, own stem under both
    stemmers, no stop word), the suite's 'mid' word first, the rest spread over the list."""
    mid = news_bench.pick_words(1)[0]['mid']['word']
    words, cum, total = gen_news.vocabulary(1)
    cands = []
    for r, wd in enumerate(words):
        p = (cum[r] - (cum[r - 1] if r else 0.0)) / total
        if 0.03 <= news_bench.doc_fraction(p) <= 0.07 and len(wd) >= 5 \
                and wd not in news_bench.STOP_WORDS and wd != mid:
            cands.append(wd)
    stems = news_bench.porter_stems(cands)
    en = news_bench.english_stems(cands) or stems
    cands = [c for c, a, b in zip(cands, stems, en) if a == c and b == c]
    step = max(1, len(cands) // max(1, k - 1))
    return [mid] + cands[::step][:k - 1]


def sql_texts(n, words, common, stream_cut):
    """{script: [(quarry SQL, postgres SQL) per pgbench file]} plus the answer checks."""
    lo, hi = HALF_YEAR
    point = 'SELECT id, symbol, views FROM news WHERE id = :id'
    out = {'point': [(point, point)], 'ranked': [], 'agg': []}
    for w in words:
        out['ranked'].append((
            "SELECT id FROM news WHERE news @@ '%s' ORDER BY score() DESC LIMIT 10" % w,
            "SELECT id FROM news, to_tsquery('english', '%s') q WHERE tsv @@ q "
            "ORDER BY ts_rank_cd(tsv, q) DESC LIMIT 10" % w))
        flt = "published >= '%s' AND published < '%s'" % (lo, hi)
        out['agg'].append((
            "SELECT symbol, count(*), avg(views) FROM news WHERE news @@ '%s' AND %s "
            "GROUP BY symbol" % (w, flt),
            "SELECT symbol, count(*), avg(views) FROM news WHERE tsv @@ to_tsquery('english', "
            "'%s') AND %s GROUP BY symbol" % (w, flt)))
    stream = ("SELECT id, views FROM news WHERE news @@ '%s' AND id <= %d" % (common, stream_cut),
              "SELECT id, views FROM news WHERE tsv @@ to_tsquery('english', '%s') AND id <= %d"
              % (common, stream_cut))
    return out, stream


def write_scripts(sdir, n, scripts):
    """One pgbench file per (engine, script, query); -> {engine: {script: [paths]}}."""
    if sdir.exists():
        shutil.rmtree(sdir)
    sdir.mkdir(parents=True)
    files = {e: {} for e in ENGINES}
    for name, pairs in scripts.items():
        for i, pair in enumerate(pairs):
            for e, sql in zip(ENGINES, pair):
                p = sdir / ('%s-%s-%d.sql' % (e, name, i))
                head = '\\set id random(1, %d)\n' % n if ':id' in sql else ''
                p.write_text(head + sql + ';\n')
                files[e].setdefault(name, []).append(p)
    return files


# --------------------------------------------------------------------------------------
# Answers, through psycopg2, before anything is timed

def answers(conns, scripts, stream, n):
    """[(what, {engine: summary})]; the point rows at a few ids, per word the count of
    matches, the ranked list's length and the groups, and the stream's rows."""
    checks = []

    def ask(what, kind, pair):
        got = {}
        for e, sql in zip(ENGINES, pair):
            cur = conns[e].cursor()
            cur.execute(sql)
            got[e] = suite.summarize(kind, cur.fetchall())
        checks.append((what, kind, got))

    for pid in (1, n // 3 + 7, n // 2, n):
        q = scripts['point'][0][0].replace(':id', str(pid))
        ask('point id=%d' % pid, 'rows', (q, q))
    for (rq, rp), (aq, ap) in zip(scripts['ranked'], scripts['agg']):
        w = re.search(r"@@ '([^']+)'", rq).group(1)
        ask('count of "%s"' % w, 'count', (
            "SELECT count(*) FROM news WHERE news @@ '%s'" % w,
            "SELECT count(*) FROM news WHERE tsv @@ to_tsquery('english', '%s')" % w))
        ask('ranked "%s" (row count)' % w, 'top', (rq, rp))
        ask('agg "%s"' % w, 'groups', (aq, ap))
    ask('stream (rows)', 'groups', stream)
    return checks


def explain(conns, pair):
    """EXPLAIN ANALYZE text of one query on each engine (for the report's diagnosis)."""
    out = {}
    for e, sql in zip(ENGINES, pair):
        cur = conns[e].cursor()
        try:
            cur.execute('EXPLAIN ANALYZE ' + sql)
            out[e] = [r[0] for r in cur.fetchall()]
        except Exception as ex:  # report, don't stop: EXPLAIN is only an aid
            out[e] = ['EXPLAIN failed: %s' % str(ex).strip()]
    return out


# --------------------------------------------------------------------------------------
# pgbench

def pgbench(port, dbname, files, clients, seconds, mode='prepared'):
    """Run pgbench; -> {'tps', 'latency_ms', 'processed', 'failed', 'rc', ...}."""
    cmd = ['pgbench', '-n', '-M', mode, '-c', str(clients), '-j', str(min(clients, 2)),
           '-T', str(seconds), '-h', '127.0.0.1', '-p', str(port), '-U', 'bench']
    for f in files:
        cmd += ['-f', str(f)]
    cmd.append(dbname)
    env = dict(os.environ, PGCONNECT_TIMEOUT='10', PGSSLMODE='disable')
    load0 = os.getloadavg()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 4 + 120, env=env)
    res = {'rc': p.returncode, 'clients': clients, 'seconds': seconds, 'mode': mode,
           'loadavg_before': [round(x, 2) for x in load0],
           'loadavg_after': [round(x, 2) for x in os.getloadavg()]}

    def grab(rx, conv=float):
        m = re.search(rx, p.stdout)
        return conv(m.group(1)) if m else None
    res['tps'] = grab(r'tps = ([\d.]+) \(without initial connection time\)')
    res['latency_ms'] = grab(r'latency average = ([\d.]+) ms')
    res['processed'] = grab(r'number of transactions actually processed: (\d+)', int)
    res['failed'] = grab(r'number of failed transactions: (\d+)', int)
    if p.returncode != 0 or res['tps'] is None:
        res['error'] = (p.stderr or p.stdout).strip()[-500:]
    return res


def stream_time(conn, sql, runs):
    """Median seconds of execute + fetchall (after one warm-up run) and the row count."""
    cur = conn.cursor()
    cur.execute(sql)
    n_rows = len(cur.fetchall())
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        cur.execute(sql)
        rows = cur.fetchall()
        times.append(time.perf_counter() - t0)
        assert len(rows) == n_rows
    return statistics.median(times), min(times), n_rows


# --------------------------------------------------------------------------------------
# Report

def verdict(ratio, target):
    if ratio is None:
        return 'not measured'
    return 'met' if ratio >= target else 'missed'


def fmt(v, digits=0):
    if v is None:
        return '—'
    if v < 100 and not digits:
        digits = 1
    return '{:,.{}f}'.format(v, digits)


def markdown(res):
    lines = ['# pgbench: Quarry\'s PG port against PostgreSQL 15, %s articles' % fmt(res['n']),
             '',
             '%s, commit %s, %s, %d cores. pgbench %s, `-n -M prepared -T %d`, `-j` = min(clients, '
             '2). Load average %s at the start and %s at the end (the machine is shared: the '
             'ratios within this run are what counts).' % (
                 res['date'], res['git_commit'], res['machine']['cpu'], res['machine']['cores'],
                 res['versions'].get('pgbench', '?'), res['seconds'],
                 ' / '.join('%.2f' % x for x in res['machine']['loadavg_start']),
                 ' / '.join('%.2f' % x for x in res['machine']['loadavg_end'])),
             '',
             'Command: `%s`' % res['command'], '',
             '| script | clients | Quarry tps | PostgreSQL tps | ratio | target | |',
             '|---|---|---|---|---|---|---|']
    for r in res['table']:
        unit = ' rows/s' if r['script'] == 'stream' else ''
        lines.append('| %s | %s | %s%s | %s%s | %s | ≥ %sx | %s |' % (
            LABELS[r['script']], r['clients'], fmt(r['quarry']), unit, fmt(r['postgres']), unit,
            '—' if r['ratio'] is None else '%.2fx' % r['ratio'], ('%g' % r['target']),
            r['verdict']))
    lines += ['', 'Scripts (one pgbench file per word, picked at random per transaction):', '']
    for name, pairs in res['scripts'].items():
        lines.append('- **%s**: Quarry `%s`; PostgreSQL `%s`%s' % (
            name, pairs[0][0], pairs[0][1],
            ' (and %d more words: %s)' % (len(pairs) - 1, ', '.join(res['words'][1:]))
            if len(pairs) > 1 else ''))
    lines.append('- **stream**: Quarry `%s`; PostgreSQL `%s` (%s rows, median of %d runs of '
                 'execute + fetchall)' % (res['stream']['sql'][0], res['stream']['sql'][1],
                                          fmt(res['stream']['rows']), res['stream']['runs']))
    lines += ['', 'Answers checked before timing (%d checks, all equal): point rows, counts of '
              'each word\'s matches, ranked lists by row count (the ranking functions differ '
              'by design), group results, the stream\'s rows.' % len(res['checks']), '']
    lines += ['Load average around each run (1 min, before → after): ' + '; '.join(
        '%s/%s/%d: %.1f → %.1f' % (r['script'], r['engine'], r['clients'],
                                   r['loadavg_before'][0], r['loadavg_after'][0])
        for r in res['runs']) + '.', '']
    return '\n'.join(lines)


def pgbench_version():
    out = subprocess.run(['pgbench', '--version'], capture_output=True, text=True).stdout
    m = re.search(r'\d+\.\d+', out)
    return m.group(0) if m else '?'


def quarry_commit():
    return suite.quarry_commit()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--n', type=int, default=200000, help='corpus size loaded by bench/suite.py')
    ap.add_argument('--seconds', type=int, default=10, help='pgbench -T per run (default 10)')
    ap.add_argument('--clients', default='1,8', help='client counts (default 1,8)')
    ap.add_argument('--words', type=int, default=5, help='words rotated per script (default 5)')
    ap.add_argument('--warm', type=int, default=2, help='seconds of warm-up per script/engine')
    ap.add_argument('--stream-runs', type=int, default=7)
    ap.add_argument('--scripts', default='point,ranked,agg')
    ap.add_argument('--out', help='result stem (default bench/results/<date>-pgbench-<n>)')
    args = ap.parse_args()
    clients = [int(c) for c in args.clients.split(',')]
    chosen = args.scripts.split(',')
    if not shutil.which('pgbench'):
        ap.error('pgbench not found (Debian postgresql-client)')
    build = os.environ.get('BUILD', 'build')
    qbin = Path(os.environ.get('QUARRY_BIN') or engines.REPO / build / 'quarry')
    src = WORK / ('suite-%d' % args.n)
    if not (src / 'quarry' / 'data').is_dir() or not (src / 'postgres' / 'pgdata').is_dir():
        ap.error('%s has no loaded Quarry and PostgreSQL: run bench/suite.py --n %d '
                 '--load-only first' % (engines.show_path(src), args.n))
    wdir = WORK / ('pgbench-%d' % args.n)
    wdir.mkdir(parents=True, exist_ok=True)
    words = pick_words(args.words)
    common = news_bench.pick_words(1)[0]['common']['word']
    log('words: %s; stream over "%s"' % (', '.join(words), common))

    res = {'date': datetime.date.today().isoformat(), 'n': args.n, 'seconds': args.seconds,
           'clients': clients, 'git_commit': quarry_commit(), 'words': words,
           'command': ' '.join(['bench/pgbench.py'] + sys.argv[1:]),
           'machine': {'cpu': suite.cpu_model(), 'cores': os.cpu_count(),
                       'loadavg_start': [round(x, 2) for x in os.getloadavg()]},
           'versions': {'pgbench': pgbench_version(),
                        'postgres': peers.PgCluster.version()},
           'runs': [], 'table': [], 'explain': {}}
    q = peers.QuarryServer(qbin, src / 'quarry' / 'data', wdir / 'quarry-serve.log')
    pg = peers.PgCluster(src / 'postgres')
    conns = {}
    status = 0
    try:
        q.start()
        pg.start()
        log('quarry pg port %d, postgres port %d' % (q.pg_port, pg.port))
        conns = {'quarry': q.connect(), 'postgres': pg.connect('bench')}
        ports = {'quarry': (q.pg_port, 'quarry'), 'postgres': (pg.port, 'bench')}
        cur = conns['postgres'].cursor()
        cur.execute("SELECT id FROM news WHERE tsv @@ to_tsquery('english', %s) ORDER BY id "
                    "OFFSET %s LIMIT 1", (common, STREAM_ROWS - 1))
        cut = cur.fetchone()[0]
        scripts, stream = sql_texts(args.n, words, common, cut)
        scripts = {k: v for k, v in scripts.items() if k in chosen}
        res['scripts'] = scripts
        files = write_scripts(wdir / 'scripts', args.n, scripts)

        # ---- answers first
        checks = answers(conns, dict(sql_texts(args.n, words, common, cut)[0]), stream, args.n)
        res['checks'] = [{'what': w, 'answers': {e: suite.show_answer(k, a) for e, a in g.items()}}
                         for w, k, g in checks]
        bad = [(w, k, g) for w, k, g in checks if g['quarry'] != g['postgres']]
        for w, k, g in checks:
            log('  %-40s %s' % (w, ' / '.join('%s %s' % (e, suite.show_answer(k, a))
                                              for e, a in g.items())))
        if bad:
            for w, k, g in bad:
                log('MISMATCH %s: %s' % (w, suite.diff_answer(k, g['quarry'], g['postgres'])))
            res['mismatches'] = [w for w, _, _ in bad]
            status = 1
            return status
        for name in scripts:
            res['explain'][name] = explain(conns, scripts[name][0] if name != 'point' else
                                           tuple(s.replace(':id', str(args.n // 3 + 7))
                                                 for s in scripts[name][0]))
        res['explain']['stream'] = explain(conns, stream)

        # ---- pgbench, Quarry then PostgreSQL back to back per script and client count
        for name in scripts:
            for e in ENGINES:
                if args.warm:
                    pgbench(*ports[e], files[e][name], 2, args.warm)
            for c in clients:
                row = {'script': name, 'clients': c, 'target': TARGETS[name]}
                for e in ENGINES:
                    r = pgbench(*ports[e], files[e][name], c, args.seconds)
                    r.update(script=name, engine=e)
                    res['runs'].append(r)
                    ok = r['rc'] == 0 and r['failed'] in (0, None) and r['tps'] is not None
                    row[e] = r['tps'] if ok else None
                    log('%-7s %-8s %d clients: %s tps, latency %s ms, load %.1f%s' % (
                        name, e, c, r['tps'], r['latency_ms'], r['loadavg_after'][0],
                        '' if ok else '  ERROR: %s' % r.get('error', 'failed transactions')))
                    if not ok:
                        status = 1
                row['ratio'] = (row['quarry'] / row['postgres']
                                if row['quarry'] and row['postgres'] else None)
                row['verdict'] = verdict(row['ratio'], row['target'])
                res['table'].append(row)

        # ---- a 50,000-row result through the protocol
        st = {'sql': list(stream), 'runs': args.stream_runs}
        for e in ENGINES:
            med, best, n_rows = stream_time(conns[e], stream[ENGINES.index(e)], args.stream_runs)
            st[e] = {'median_s': med, 'min_s': best, 'rows_per_s': n_rows / med}
            st['rows'] = n_rows
            log('stream  %-8s %d rows: median %.3f s, %.0f rows/s' % (e, n_rows, med, n_rows / med))
        res['stream'] = st
        ratio = st['quarry']['rows_per_s'] / st['postgres']['rows_per_s']
        res['table'].append({'script': 'stream', 'clients': 1, 'target': TARGETS['stream'],
                             'quarry': st['quarry']['rows_per_s'],
                             'postgres': st['postgres']['rows_per_s'], 'ratio': ratio,
                             'verdict': verdict(ratio, TARGETS['stream'])})

        # ---- the server is alive and logged no error
        cur = conns['quarry'].cursor()
        cur.execute('SELECT 1')
        res['quarry_alive'] = cur.fetchone() == (1,)
        res['quarry_log_errors'] = [ln for ln in (wdir / 'quarry-serve.log').read_text()
                                    .splitlines() if ' ERROR ' in ln][:20]
    finally:
        for c in conns.values():
            c.close()
        q.stop()
        pg.stop()
        res['machine']['loadavg_end'] = [round(x, 2) for x in os.getloadavg()]
        stem = Path(args.out) if args.out else RESULTS / ('%s-pgbench-%d' % (res['date'], args.n))
        stem.parent.mkdir(parents=True, exist_ok=True)
        Path(str(stem) + '.json').write_text(json.dumps(res, indent=1) + '\n')
        if res['table'] and not res.get('mismatches'):
            Path(str(stem) + '.md').write_text(markdown(res))
        log('wrote %s.json' % engines.show_path(stem))
    return status


if __name__ == '__main__':
    sys.exit(main())
