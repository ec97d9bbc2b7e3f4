#!/usr/bin/python3
"""Write docs/benchmarks.md and its plots from bench/results/*.json (bench/suite.py output).

  bench/report.py [--results bench/results] [--doc docs/benchmarks.md]

For each corpus size the newest result file is used. The generated part of the document
sits between the markers <!-- generated:start --> and <!-- generated:end -->; text outside
them (the hand-written setup, analysis and caveats) is kept as it is. Plots are PNG files
drawn by gnuplot under docs/benchmarks/; without gnuplot the tables are still written and
the document says the plots are missing.
"""

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engines  # noqa: E402

REPO = engines.REPO
ENGINES = ['quarry', 'quarry-http', 'postgres', 'sqlite', 'xapian', 'sphinx', 'duckdb']
PEERS = ['postgres', 'sqlite', 'xapian', 'sphinx', 'duckdb']
TITLE = {'quarry': 'Quarry (PG port)', 'quarry-http': 'Quarry (HTTP)', 'postgres': 'PostgreSQL',
         'sqlite': 'SQLite FTS5', 'xapian': 'Xapian', 'sphinx': 'Sphinx', 'duckdb': 'DuckDB'}
GROUPS = [('text', 'Text search'), ('agg', 'Aggregation over the matches'),
          ('filter', 'Filters alone, and text with filters'), ('paging', 'Deep pagination'),
          ('point', 'Point lookup'), ('struct', 'Structured SQL without text')]
START, END = '<!-- generated:start -->', '<!-- generated:end -->'


def latest(results_dir):
    """{n: result dict} with the newest file per size (by date in the name, then mtime)."""
    best = {}
    for p in sorted(Path(results_dir).glob('*.json')):
        m = re.fullmatch(r'(\d{4}-\d{2}-\d{2})-(\d+)\.json', p.name)
        if not m:
            continue
        try:
            res = json.loads(p.read_text())
        except ValueError:
            continue
        if 'workloads' not in res:
            continue
        key = (m.group(1), p.stat().st_mtime)
        n = int(m.group(2))
        if n not in best or key > best[n][0]:
            best[n] = (key, res, p)
    return {n: (r, p) for n, (_, r, p) in best.items()}


def fmt_ms(t):
    if t is None:
        return '—'
    if t < 1:
        return '%.3f' % t
    if t < 10:
        return '%.2f' % t
    if t < 100:
        return '%.1f' % t
    return '%.0f' % t


def speed(q, other):
    """'3.1× faster' / '2.0× slower' for Quarry time q against another time."""
    if q is None or other is None or q <= 0:
        return '—'
    r = other / q
    return '%.1f× faster' % r if r >= 1 else '**%.1f× slower**' % (1 / r)


def med(wr, e):
    t = wr.get('times', {}).get(e)
    return t.get('median_ms') if t else None


def cell(wr, e):
    a = wr['answers'].get(e)
    if a is None:
        return '·'
    if isinstance(a, dict):
        return 'error¹'
    if any(m['workload'] == wr['id'] and m['engine'] == e for m in wr.get('_mm', [])):
        return 'MISMATCH'
    return fmt_ms(med(wr, e))


def workload_tables(res):
    used = [e for e in ENGINES if any(e in wr['answers'] for wr in res['workloads'])]
    out, errors, slower = [], [], []
    for wr in res['workloads']:
        wr['_mm'] = res.get('mismatches', [])
    for gid, gtitle in GROUPS:
        rows = [wr for wr in res['workloads'] if wr['group'] == gid]
        if not rows:
            continue
        out += ['', '#### %s' % gtitle, '',
                '| query | answer | ' + ' | '.join(TITLE[e] for e in used) +
                ' | Quarry vs best peer | Quarry vs PostgreSQL |',
                '|---|---|' + '---:|' * len(used) + '---|---|']
        for wr in rows:
            ref = wr.get('reference')
            ans = wr['answers'].get(ref, '—') if ref else '—'
            peer_t = {e: med(wr, e) for e in PEERS if med(wr, e) is not None}
            best = min(peer_t, key=peer_t.get) if peer_t else None
            q = med(wr, 'quarry')
            vs_best = speed(q, peer_t[best]) + (' (%s)' % TITLE[best] if best else '') \
                if best and q else '—'
            vs_pg = speed(q, peer_t.get('postgres'))
            out.append('| %s | %s | ' % (wr['label'], ans) +
                       ' | '.join(cell(wr, e) for e in used) + ' | %s | %s |' % (vs_best, vs_pg))
            for e, a in wr['answers'].items():
                if isinstance(a, dict):
                    errors.append('%s, %s: %s' % (wr['label'], TITLE[e], a['error']))
            if best and q:
                if q > peer_t[best]:
                    slower.append('%s: Quarry %s ms, %s %s ms' % (wr['label'], fmt_ms(q),
                                                                  TITLE[best], fmt_ms(peer_t[best])))
                elif q * 2 > peer_t[best]:
                    slower.append('%s: Quarry %s ms is faster than %s (%s ms) but by less than '
                                  '2×' % (wr['label'], fmt_ms(q), TITLE[best], fmt_ms(peer_t[best])))
                if 'postgres' in peer_t and q * 10 > peer_t['postgres'] and q <= peer_t[best]:
                    slower.append('%s: less than 10× faster than PostgreSQL (%s vs %s ms)'
                                  % (wr['label'], fmt_ms(q), fmt_ms(peer_t['postgres'])))
            elif q is None and wr['answers'].get('quarry') is not None:
                slower.append('%s: Quarry did not answer' % wr['label'])
    out += ['', 'Milliseconds, median of %d runs after one warm-up, measured at the client. '
            '"·": the engine does not answer this query class here. "Quarry vs …" uses the PG '
            'port column.' % res['repeat']]
    return used, out, errors, slower


def build_table(res):
    b, fp = res['build'], res.get('footprint', {})
    used = [e for e in ENGINES if e in b or e in fp]
    lines = ['| | ' + ' | '.join(TITLE[e] for e in used) + ' |', '|---|' + '---:|' * len(used)]

    def row(label, fn):
        vals = []
        for e in used:
            try:
                v = fn(e)
            except (KeyError, TypeError, ZeroDivisionError):
                v = None
            vals.append(v if v is not None else '—')
        lines.append('| %s | %s |' % (label, ' | '.join(vals)))
    row('load + index build until queryable', lambda e: '%.1f s%s%s' % (
        b[e]['seconds'], ' (cached)' if b[e].get('cached') else '',
        ' †' if b[e].get('reused') else ''))
    row('rows/s', lambda e: '{:,.0f}'.format(b[e]['rows_per_s']))
    row('MB/s of JSON', lambda e: '%.1f' % b[e]['mb_per_s'])
    row('disk after load (MB)', lambda e: '%.0f' % (fp[e]['disk_bytes'] / 1e6))
    row('memory idle (MB, Pss)', lambda e: '%.0f' % (fp[e]['idle_bytes'] / 1e6))
    row('memory right after load (MB)', lambda e: '%.0f' % (fp[e]['after_load_bytes'] / 1e6))
    row('memory peak while querying (MB)', lambda e: '%.0f' % (fp[e]['peak_bytes'] / 1e6))
    hows = ['- %s: %s' % (TITLE[e], b[e]['how']) for e in used if e in b and b[e].get('how')]
    if any(r.get('reused') for r in b.values()):
        hows.append('- †: loaded by an earlier run (%s); the queries were timed on a fresh '
                    'start of the same data' % next(r['reused'] for r in b.values()
                                                    if r.get('reused')))
    for note in res.get('notes', []):
        hows.append('- ' + note)
    return lines, hows


def targets(res):
    """Issue 8's targets, each with the measured numbers and met / missed."""
    rows = []
    ws = [wr for wr in res['workloads'] if med(wr, 'quarry') is not None and wr['id'] != 'noop']
    n2 = n10 = n_pg = 0
    for wr in ws:
        peer_t = [med(wr, e) for e in PEERS if med(wr, e) is not None]
        if peer_t and med(wr, 'quarry') * 2 <= min(peer_t):
            n2 += 1
        if med(wr, 'postgres') is not None:
            n_pg += 1
            if med(wr, 'quarry') * 10 <= med(wr, 'postgres'):
                n10 += 1
    n_peer = sum(1 for wr in ws if any(med(wr, e) is not None for e in PEERS))
    rows.append(('every query class ≥ 2× faster than the best peer that answers it',
                 '%d of %d queries' % (n2, n_peer), n2 == n_peer))
    rows.append(('every query class ≥ 10× faster than PostgreSQL', '%d of %d queries' % (n10, n_pg),
                 n10 == n_pg))
    c = res.get('concurrency', {}).get('engines', {})
    q = c.get('quarry', {}).get('qps')
    best = max((r['qps'], e) for e, r in c.items() if e in PEERS and 'qps' in r) if any(
        e in PEERS and 'qps' in r for e, r in c.items()) else None
    if q and best:
        rows.append(('8-client ranked search ≥ 2× the best peer\'s queries/s',
                     '%.0f vs %.0f (%s): %.1f×' % (q, best[0], TITLE[best[1]], q / best[0]),
                     q >= 2 * best[0]))
    b = res['build']
    if 'quarry' in b:
        pb = [(r['seconds'], e) for e, r in b.items() if e in PEERS and e != 'duckdb']
        if pb:
            t, e = min(pb)
            rows.append(('load + index until queryable ≥ 2× faster than the fastest text peer',
                         '%.1f s vs %.1f s (%s)' % (b['quarry']['seconds'], t, TITLE[e]),
                         b['quarry']['seconds'] * 2 <= t))
    fp = res.get('footprint', {})
    if 'disk_bytes' in fp.get('quarry', {}):
        storing = [(fp[e]['disk_bytes'], e) for e in ('postgres', 'sqlite', 'xapian')
                   if 'disk_bytes' in fp.get(e, {})]
        if storing:
            d, e = min(storing)
            rows.append(('disk ≤ half of the smallest text peer that also stores the documents',
                         '%.0f MB vs %.0f MB (%s)' % (fp['quarry']['disk_bytes'] / 1e6, d / 1e6,
                                                      TITLE[e]),
                         fp['quarry']['disk_bytes'] * 2 <= d))
    if fp.get('quarry', {}).get('idle_bytes'):
        rows.append(('idle memory under 50 MB', '%.0f MB' % (fp['quarry']['idle_bytes'] / 1e6),
                     fp['quarry']['idle_bytes'] < 50e6))
    p = res.get('planner', {})
    worst = max(((r['auto_over_best'], wid) for wid, r in p.items() if r.get('auto_over_best')),
                default=None)
    if worst:
        rows.append(("planner's choice never > 1.5× the best forced path",
                     'worst %.2f× (%s)' % worst, worst[0] <= 1.5))
    lines = ['| target | measured | met |', '|---|---|---|']
    lines += ['| %s | %s | %s |' % (t, m, 'yes' if ok else '**no**') for t, m, ok in rows]
    return lines


def concurrency_table(res):
    c = res.get('concurrency', {}).get('engines', {})
    if not c:
        return []
    lines = ['| engine | queries/s | p50 ms | p99 ms |', '|---|---:|---:|---:|']
    for e in ENGINES:
        if e in c:
            r = c[e]
            if 'error' in r:
                lines.append('| %s | error: %s | | |' % (TITLE[e], r['error'][:80]))
            else:
                lines.append('| %s | %.0f | %s | %s |' % (TITLE[e], r['qps'], fmt_ms(r['p50_ms']),
                                                        fmt_ms(r['p99_ms'])))
    return lines


def planner_table(res):
    p = res.get('planner', {})
    if not p:
        return []
    paths = ['auto', 'text', 'btree', 'scan', 'check', 'full']
    labels = {wr['id']: wr['label'] for wr in res['workloads']}
    lines = ['| query | chosen | ' + ' | '.join(paths) + ' | chosen / best forced |',
             '|---|---|' + '---:|' * len(paths) + '---:|']
    for wid, row in p.items():
        cells = []
        for x in paths:
            t = row['paths'].get(x, {})
            cells.append(fmt_ms(t['median_ms']) if 'median_ms' in t else
                         ('error²' if t else '—'))
        r = row.get('auto_over_best')
        lines.append('| %s | %s | %s | %s |' % (labels.get(wid, wid), row.get('chosen', '?'),
                                                ' | '.join(cells),
                                                ('**%.2f**' if r and r > 1.5 else '%.2f') % r
                                                if r else '—'))
    return lines


def mixed_table(res):
    m = res.get('mixed', {})
    if not m:
        return []
    lines = ['| engine | rows inserted/s (batches of 500) | reader p50 ms | reader p99 ms | '
             'reader queries/s |', '|---|---:|---:|---:|---:|']
    for e, r in m.items():
        if 'error' in r:
            lines.append('| %s | error: %s | | | |' % (TITLE[e], r['error'][:80]))
        else:
            lines.append('| %s | %.0f | %s | %s | %.0f |' % (
                TITLE[e], r['rows_per_s'], fmt_ms(r['reader_p50_ms']), fmt_ms(r['reader_p99_ms']),
                r['reader_qps']))
    return lines


def real_corpora_section(results_dir):
    """The newest <date>-real.json (bench/real_corpora.py) as a table."""
    files = sorted(results_dir.glob('*-real.json'), key=lambda p: (p.name, p.stat().st_mtime))
    if not files:
        return ['', '### Real corpora', '', 'Not measured yet (bench/real_corpora.py).']
    res = json.loads(files[-1].read_text())
    lines = ['', '### Real corpora (%s)' % res['date'], '',
             'Result file `%s`, load average %.1f at the start. Ranked top-10 of OR-ed words '
             '(SciFact: its test queries; Debian: package titles), median over the queries of '
             'each query\'s median of %d runs; only row counts are compared (tokenizers and '
             'ranking functions differ on real text).' % (engines.show_path(files[-1]),
                                                          res['loadavg_start'][0], res['repeat']),
             '', '| corpus | docs | queries | engine | load s | disk MB | median ms | p95 ms |',
             '|---|---:|---:|---|---:|---:|---:|---:|']
    for name, c in res['corpora'].items():
        if c.get('mismatch'):
            lines.append('| %s | %d | %d | row counts differ: %s | | | | |'
                         % (name, c['docs'], c['queries'], c['mismatch']))
            continue
        for e, r in c['engines'].items():
            lines.append('| %s | %d | %d | %s | %.1f | %.1f | %s | %s |' % (
                name, c['docs'], c['queries'], TITLE[e], r['load_s'], r['disk_bytes'] / 1e6,
                fmt_ms(r.get('median_ms')), fmt_ms(r.get('p95_ms'))))
    return lines


# --------------------------------------------------------------------------------------
# Plots

def gnuplot(script, data_files):
    if not shutil.which('gnuplot'):
        return False
    r = subprocess.run(['gnuplot'], input=script, capture_output=True, text=True)
    for f in data_files:
        f.unlink(missing_ok=True)
    if r.returncode != 0:
        print('gnuplot: ' + r.stderr.strip()[:300], file=sys.stderr)
    return r.returncode == 0


def plot_latency(res, out_png):
    eng = [e for e in ['quarry', 'postgres', 'sqlite', 'xapian', 'sphinx', 'duckdb']
           if any(med(wr, e) for wr in res['workloads'])]
    rows = [wr for wr in res['workloads'] if wr['group'] in ('text', 'agg', 'filter')]
    if not eng or not rows:  # a run stopped before timing: nothing to draw
        return False
    data = out_png.with_suffix('.dat')
    with open(data, 'w') as f:
        f.write('query ' + ' '.join(eng) + '\n')
        for wr in rows:
            f.write('%s %s\n' % (wr['id'], ' '.join(
                '%.6g' % med(wr, e) if med(wr, e) else '-' for e in eng)))
    cols = ', '.join("'%s' using %d%s title '%s'" % (data, i + 2, ':xtic(1)' if i == 0 else '',
                                                     TITLE[e]) for i, e in enumerate(eng))
    script = '''set terminal pngcairo size 1400,650 font ",10" noenhanced
set output '%s'
set title "Latency by query class, %s articles (median ms, log scale; lower is better)"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set yrange [0.001:*]
set datafile missing '-'
set xtics rotate by -40 scale 0
set key outside top center horizontal
set grid ytics
plot %s
''' % (out_png, '{:,}'.format(res['n']), cols)
    return gnuplot(script, [data])


def plot_scaling(small, big, out_png):
    eng = [e for e in ['quarry', 'postgres', 'sqlite', 'sphinx', 'duckdb']]
    ws = {wr['id']: wr for wr in big['workloads']}
    rows = [wr for wr in small['workloads'] if wr['id'] in ws and wr['group'] in ('text', 'agg')]
    eng = [e for e in eng if any(med(wr, e) and med(ws[wr['id']], e) for wr in rows)]
    if not eng or not rows:
        return False
    data = out_png.with_suffix('.dat')
    with open(data, 'w') as f:
        for wr in rows:
            vals = []
            for e in eng:
                a, b = med(wr, e), med(ws[wr['id']], e)
                vals.append('%.4g' % (b / a) if a and b else '-')
            f.write('%s %s\n' % (wr['id'], ' '.join(vals)))
    cols = ', '.join("'%s' using %d%s title '%s'" % (data, i + 2, ':xtic(1)' if i == 0 else '',
                                                     TITLE[e]) for i, e in enumerate(eng))
    script = '''set terminal pngcairo size 1400,650 font ",10" noenhanced
set output '%s'
set title "Growth of latency from %s to %s articles (time ratio; 10 = linear in the corpus)"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set datafile missing '-'
set xtics rotate by -40 scale 0
set key outside top center horizontal
set grid ytics
plot %s, 10 with lines dt 2 lc rgb "gray" title "linear"
''' % (out_png, '{:,}'.format(small['n']), '{:,}'.format(big['n']), cols)
    return gnuplot(script, [data])


# --------------------------------------------------------------------------------------

def generate(results, doc_dir):
    sizes = sorted(results)
    lines = []
    img_dir = doc_dir / 'benchmarks'
    img_dir.mkdir(parents=True, exist_ok=True)
    for n in sizes:
        res, path = results[n]
        used, tables, errors, slower = workload_tables(res)
        m = res['machine']
        lines += ['', '### %s articles (%s)' % ('{:,}'.format(n), res['date']), '',
                  'Result file `%s`. Corpus `%s`, %.0f MB of JSON, sha256 %s…. Quarry at `%s`. '
                  '%s. Machine: %s, %d cores, %s GB; load average %.1f at the start and %.1f '
                  'at the end.' % (
                      engines.show_path(path), res['corpus']['path'], res['corpus']['bytes'] / 1e6,
                      res['corpus']['sha256'][:12], res.get('git_commit'),
                      ', '.join(v for k, v in sorted(res.get('versions', {}).items())),
                      m.get('cpu'), m.get('cores'), m.get('mem_gb'),
                      m['loadavg_start'][0], (m.get('loadavg_end') or [float('nan')])[0])]
        if res.get('crashed'):
            lines += ['', '**This run ended early: %s.** What it measured is below.' % res['crashed']]
        if res.get('stopped'):
            lines += ['', '**This run stopped: %s.**' % res['stopped']]
        for e, why in res.get('errors', {}).items():
            lines.append('')
            lines.append('- %s was not measured: %s' % (TITLE.get(e, e), why))
        if res.get('mismatches'):
            lines += ['', '**Answers that differ** (these cells were not timed):', '']
            for mm in res['mismatches']:
                lines.append('- %s on `%s` (against %s): %s' % (TITLE[mm['engine']], mm['workload'],
                                                              TITLE[mm['reference']], mm['diff']))
        lines += ['', '#### Targets of issue 8 at this size', ''] + targets(res)
        bt, hows = build_table(res)
        lines += ['', '#### Load, index build and footprint', ''] + bt + [''] + hows
        lines += tables
        if errors:
            lines += ['', '¹ Errors:', ''] + ['- ' + e for e in errors]
        ct = concurrency_table(res)
        if ct:
            c = res['concurrency']['engines']
            any_c = next(iter(c.values()))
            lines += ['', '#### %d concurrent clients, ranked top-20 search' % any_c.get('clients', 8), '',
                      'Each client is a process with its own connection, cycling through %d two-word '
                      'OR queries for %s s after a 1 s warm-up; latencies are per query at the client.'
                      % (len(res['concurrency']['queries']), any_c.get('seconds', '?')), ''] + ct
        pt = planner_table(res)
        if pt:
            lines += ['', '#### Quarry\'s planner against each forced access path', '',
                      '`SET quarry.access_path = …`, same answers checked first; ms.', ''] + pt
            errs = [(wid, x, t['error']) for wid, row in res['planner'].items()
                    for x, t in row['paths'].items() if 'error' in t]
            if errs:
                lines += ['', '² ' + '; '.join('%s with %s: %s' % e for e in errs[:12])]
        mt = mixed_table(res)
        if mt:
            lines += ['', '#### Searches while ingesting', '',
                      'One client runs ranked top-20 searches while another inserts articles in '
                      'multi-row INSERTs of 500 over the same protocol (psycopg2).', ''] + mt
        png = img_dir / ('latency-%d.png' % n)
        if plot_latency(res, png):
            lines += ['', '![latency by query class, %s articles](benchmarks/%s)'
                      % ('{:,}'.format(n), png.name)]
        lines += ['', '#### Where Quarry is slower, or misses a target, at this size', '']
        lines += ['- ' + s for s in slower] or ['- nothing: every query meets its target']
    lines += real_corpora_section(Path(engines.REPO / 'bench' / 'results'))
    if len(sizes) >= 2:
        png = img_dir / 'scaling.png'
        if plot_scaling(results[sizes[0]][0], results[sizes[-1]][0], png):
            lines += ['', '### Scaling', '', '![scaling](benchmarks/scaling.png)']
    return '\n'.join(lines) + '\n'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--results', default=str(REPO / 'bench' / 'results'))
    ap.add_argument('--doc', default=str(REPO / 'docs' / 'benchmarks.md'))
    ap.add_argument('--min-size', type=int, default=100000,
                    help='leave out smaller runs (bench/run --quick is a wiring check)')
    args = ap.parse_args()
    results = {n: r for n, r in latest(args.results).items() if n >= args.min_size}
    if not results:
        print('report: no bench/results/<date>-<n>.json yet; run bench/run', file=sys.stderr)
        return 1
    doc = Path(args.doc)
    body = generate(results, doc.parent)
    old = doc.read_text() if doc.exists() else '# Benchmarks\n\n%s\n%s\n' % (START, END)
    if START not in old or END not in old:
        old += '\n%s\n%s\n' % (START, END)
    head, rest = old.split(START, 1)
    tail = rest.split(END, 1)[1]
    doc.write_text(head + START + '\n' + body + END + tail)
    print('wrote %s' % engines.show_path(doc))
    return 0


if __name__ == '__main__':
    sys.exit(main())
