#!/usr/bin/python3
"""Write storm: many concurrent single-document writers against `quarry serve`, over HTTP
(`PUT /tables/storm/documents/{id}`) and over the PG port (autocommit INSERT), each write
acknowledged = committed, while one client runs ranked searches.

  bench/write_storm.py [--writers 1,8,32] [--seconds 10] [--proto http,pg]
                       [--fsync commit|batched|off] [--preload 20000]
                       [--search-rate 0|N] [--out FILE]

Per protocol and writer count it reports the acknowledged writes per second, the writers'
p50/p99 latency, the p99 of the concurrent ranked searches, and the peak segment count of
the table (sampled every 20 ms from GET /tables/storm), the server's CPU time (user +
system) and the writer processes' CPU time per acknowledged write, plus the ratio of each
rate to the one-writer rate.  A fresh server and data directory (bench/work/write-storm/)
per protocol; the server binds 127.0.0.1 on free ports and is stopped at the end, also on
errors.  The machine is shared: the load average around each run is in the report, and
only ratios within one run mean much.  After each run it checks the answer: every
acknowledged id is in the table exactly once (count of the table = preload + acked).
"""

import argparse
import datetime
import http.client
import json
import multiprocessing as mp
import os
import random
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

try:
    import psycopg2  # noqa: F401  (Debian python3-psycopg2)
except ImportError:
    if sys.executable != '/usr/bin/python3' and os.path.exists('/usr/bin/python3'):
        os.execv('/usr/bin/python3', ['/usr/bin/python3'] + sys.argv)
    raise

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engines  # noqa: E402
import peers  # noqa: E402

WORDS = ('river valley power grid solar wind storage battery market price energy hydro '
         'plant water dam turbine coal gas nuclear demand supply winter summer rain snow '
         'budget policy report growth export import bank loan rate index share').split()
TAGS = ['t%02d' % i for i in range(40)]
SCHEMA = {'primary_key': 'id', 'fields': [
    {'name': 'title', 'type': 'text', 'language': 'english'},
    {'name': 'body', 'type': 'text', 'language': 'english'},
    {'name': 'tag', 'type': 'keyword'},
    {'name': 'n', 'type': 'int', 'index': 'btree'}]}


def make_doc(i, rnd):
    return {'id': i, 'title': ' '.join(rnd.choice(WORDS) for _ in range(6)),
            'body': ' '.join(rnd.choice(WORDS) for _ in range(60)),
            'tag': rnd.choice(TAGS), 'n': rnd.randrange(1000000)}


def http_req(conn, method, path, body=None):
    hdr = {'Content-Type': 'application/json'} if body is not None else {}
    conn.request(method, path, body=body, headers=hdr)
    r = conn.getresponse()
    data = r.read()
    return r.status, data


def writer(proto, port, run, wid, n_writers, start_at, stop_at, out):
    """Writes ids base + wid, base + wid + n_writers, ... until stop_at; base is above the
    preload and distinct per run, so every acknowledged write is a new document."""
    rnd = random.Random(wid)
    lat, acked, errors = [], [], 0
    i = 10_000_000 * (run + 1) + wid
    if proto == 'http':
        conn = http.client.HTTPConnection('127.0.0.1', port, timeout=120)
    else:
        import psycopg2
        conn = psycopg2.connect(host='127.0.0.1', port=port, user='bench', dbname='quarry',
                                connect_timeout=30)
        conn.autocommit = True
        cur = conn.cursor()
    while time.time() < start_at:
        time.sleep(0.001)
    cpu0 = sum(os.times()[:2])
    while time.time() < stop_at:
        d = make_doc(i, rnd)
        t0 = time.perf_counter()
        try:
            if proto == 'http':
                st, _ = http_req(conn, 'PUT', '/tables/storm/documents/%d' % i, json.dumps(d))
                ok = st in (200, 201)
            else:
                cur.execute('INSERT INTO storm (id, title, body, tag, n) VALUES (%s,%s,%s,%s,%s)',
                            (d['id'], d['title'], d['body'], d['tag'], d['n']))
                ok = True
        except Exception:  # noqa: BLE001  (counted, the run goes on)
            ok = False
            if proto == 'http':
                conn.close()
                conn = http.client.HTTPConnection('127.0.0.1', port, timeout=120)
        if ok:
            lat.append(time.perf_counter() - t0)
            acked.append(i)
        else:
            errors += 1
        i += n_writers
    out.put({'lat': lat, 'acked': acked, 'errors': errors, 'cpu_s': sum(os.times()[:2]) - cpu0})


def searcher(port, start_at, stop_at, rate, out):
    """Ranked searches beside the writers: back to back when rate is 0 (a closed loop that
    competes with the writers for CPU), else open-loop at `rate` searches a second, each
    one started on its schedule (a late search is not skipped, the next waits less)."""
    rnd = random.Random(7)
    conn = http.client.HTTPConnection('127.0.0.1', port, timeout=120)
    lat = []
    while time.time() < start_at:
        time.sleep(0.001)
    k = 0
    while time.time() < stop_at:
        if rate:
            due = start_at + k / rate
            k += 1
            if due > time.time():
                time.sleep(due - time.time())
            if time.time() >= stop_at:
                break
        q = '%s %s' % (rnd.choice(WORDS), rnd.choice(WORDS))
        t0 = time.perf_counter()
        st, _ = http_req(conn, 'GET', '/tables/storm/search?q=%s&limit=10&total=false&doc=false'
                         % q.replace(' ', '+'))
        if st == 200:
            lat.append(time.perf_counter() - t0)
    out.put({'lat': lat})


def table_stats(port):
    conn = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
    st, data = http_req(conn, 'GET', '/tables/storm')
    conn.close()
    return json.loads(data)['stats'] if st == 200 else {}


def proc_cpu_s(pid):
    """The process's CPU time so far (user + system, all threads), from /proc/PID/stat: CPU
    per acknowledged write does not depend on how busy the machine is, unlike the rates."""
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def pct(v, p):
    if not v:
        return None
    v = sorted(v)
    return v[min(len(v) - 1, int(p / 100 * len(v)))]


def run_one(proto, srv, run, n_writers, seconds, search_rate):
    port = srv.http_port if proto == 'http' else srv.pg_port
    q = mp.Queue()
    start_at = time.time() + 1.5
    stop_at = start_at + seconds
    procs = [mp.Process(target=writer, args=(proto, port, run, w, n_writers, start_at, stop_at, q))
             for w in range(n_writers)]
    procs.append(mp.Process(target=searcher, args=(srv.http_port, start_at, stop_at, search_rate, q)))
    for p in procs:
        p.start()
    peak, stop = [0], threading.Event()

    def sample():
        while not stop.is_set():
            try:
                peak[0] = max(peak[0], int(table_stats(srv.http_port).get('segments', 0)))
            except Exception:  # noqa: BLE001
                pass
            time.sleep(0.02)
    th = threading.Thread(target=sample)
    st0 = table_stats(srv.http_port)
    th.start()
    load0 = os.getloadavg()[0]
    cpu0 = proc_cpu_s(srv.proc.pid)
    res = [q.get() for _ in procs]
    for p in procs:
        p.join()
    cpu1 = proc_cpu_s(srv.proc.pid)
    stop.set()
    th.join()
    st1 = table_stats(srv.http_port)
    commits = st1.get('commits', 0) - st0.get('commits', 0)
    syncs = st1.get('wal_syncs', 0) - st0.get('wal_syncs', 0)
    wlat = [x for r in res if 'acked' in r for x in r['lat']]
    acked = [x for r in res if 'acked' in r for x in r['acked']]
    errors = sum(r['errors'] for r in res if 'acked' in r)
    slat = [x for r in res if 'acked' not in r for x in r['lat']]
    return {'proto': proto, 'writers': n_writers, 'seconds': seconds, 'acked': len(acked),
            'errors': errors, 'rate': len(acked) / seconds,
            'write_p50_ms': 1000 * pct(wlat, 50) if wlat else None,
            'write_p99_ms': 1000 * pct(wlat, 99) if wlat else None,
            'searches': len(slat), 'search_p99_ms': 1000 * pct(slat, 99) if slat else None,
            'search_p50_ms': 1000 * pct(slat, 50) if slat else None,
            'peak_segments': peak[0], 'load_avg': [load0, os.getloadavg()[0]],
            'commits': commits, 'wal_syncs': syncs,
            'commits_per_sync': commits / syncs if syncs else None,
            'server_cpu_s': cpu1 - cpu0,
            'server_cpu_us_per_write': 1e6 * (cpu1 - cpu0) / len(acked) if acked else None,
            'client_cpu_us_per_write': 1e6 * sum(r['cpu_s'] for r in res if 'acked' in r) /
            len(acked) if acked else None,
            'ids': acked}


def run_proto(proto, args, binary):
    work = engines.REPO / 'bench' / 'work' / 'write-storm'
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    srv = peers.QuarryServer(binary, work / 'data', work / 'serve.log',
                             extra=["--fsync", args.fsync])
    srv.start()
    rows = []
    try:
        conn = http.client.HTTPConnection('127.0.0.1', srv.http_port, timeout=600)
        st, data = http_req(conn, 'POST', '/tables', json.dumps({'name': 'storm', 'schema': SCHEMA}))
        if st != 201:
            raise peers.PeerError('create table: %d %s' % (st, data[:200]))
        rnd = random.Random(1)
        body = '\n'.join(json.dumps(make_doc(i, rnd)) for i in range(args.preload)).encode()
        conn.request('POST', '/tables/storm/documents', body=body,
                     headers={'Content-Type': 'application/x-ndjson'})
        r = conn.getresponse()
        ans = json.loads(r.read())
        if r.status != 200 or ans.get('acked') != args.preload:
            raise peers.PeerError('preload: %d %s' % (r.status, str(ans)[:200]))
        st, _ = http_req(conn, 'POST', '/tables/storm/merge')
        expect = args.preload
        for run, w in enumerate(args.writers):
            row = run_one(proto, srv, run, w, args.seconds, args.search_rate)
            expect += row['acked']
            got = table_stats(srv.http_port).get('docs')
            ids = row.pop('ids')
            row['check'] = 'ok' if got == expect and len(set(ids)) == len(ids) else \
                'MISMATCH: table has %s docs, expected %d' % (got, expect)
            rows.append(row)
            print(fmt_row(row, rows), flush=True)
    finally:
        srv.stop()
    return rows


def fmt_row(r, rows):
    base = next((x['rate'] for x in rows if x['proto'] == r['proto'] and x['writers'] == 1), None)
    ratio = '%.2fx' % (r['rate'] / base) if base else '-'
    f = lambda v: '-' if v is None else '%.1f' % v  # noqa: E731
    us = lambda v: '-' if v is None else '%.0f' % v  # noqa: E731
    return ('| %s | %d | %.0f | %s | %s | %s | %s | %d | %d | %s | %s | %s | %.1f/%.1f | %s |' % (
        r['proto'], r['writers'], r['rate'], ratio, f(r['write_p50_ms']), f(r['write_p99_ms']),
        f(r['search_p99_ms']), r['searches'], r['peak_segments'], f(r['commits_per_sync']),
        us(r['server_cpu_us_per_write']), us(r['client_cpu_us_per_write']),
        r['load_avg'][0], r['load_avg'][1], r['check']))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--writers', default='1,8,32')
    ap.add_argument('--seconds', type=float, default=10)
    ap.add_argument('--proto', default='http,pg')
    ap.add_argument('--fsync', default='commit', choices=['commit', 'batched', 'off'])
    ap.add_argument('--preload', type=int, default=20000)
    ap.add_argument('--search-rate', type=float, default=0,
                    help='ranked searches a second beside the writers (0: back to back)')
    ap.add_argument('--out', default=None)
    args = ap.parse_args()
    args.writers = [int(x) for x in args.writers.split(',')]
    binary = os.environ.get('QUARRY_BIN', str(engines.REPO / 'build' / 'quarry'))
    print('write storm: fsync=%s, %g s per run, preload %d, %d cores, load %.1f' % (
        args.fsync, args.seconds, args.preload, os.cpu_count(), os.getloadavg()[0]))
    print('| proto | writers | acked/s | vs 1 | write p50 ms | write p99 ms | search p99 ms | '
          'searches | peak segments | commits per fsync | server CPU us per write | '
          'writers\' CPU us per write | load before/after | check |')
    print('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|')
    rows = []
    for proto in args.proto.split(','):
        rows += run_proto(proto, args, binary)
    out = args.out or str(engines.REPO / 'bench' / 'results' / ('%s-write-storm-%s.json' % (
        datetime.date.today().isoformat(), args.fsync)))
    Path(out).write_text(json.dumps({'fsync': args.fsync, 'seconds': args.seconds,
                                     'preload': args.preload,
                                     'search_rate': args.search_rate, 'rows': rows}, indent=1) + '\n')
    print('wrote', out)
    return 0 if all(r['check'] == 'ok' for r in rows) else 1


if __name__ == '__main__':
    sys.exit(main())
