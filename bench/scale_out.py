#!/usr/bin/python3
"""Scale-out benchmark (docs/scale-out.md): one Quarry node against three local nodes behind a
PostgreSQL 15 coordinator (postgres_fdw, the quarry extension, a table LIST-partitioned by
symbol, global BM25 statistics through --peers), on the generated news corpus.

  bench/scale_out.py [--n 200000] [--clients 8] [--seconds 6] [--repeat 15]
  bench/scale_out.py --report bench/results/<date>-scale-out-<n>.json   (the .md again)

Setups, each answering the same queries (answers compared before anything is timed):
  one       one Quarry node holding every article, asked directly on its PG port
  coord-1   the coordinator over that one node (one foreign table): the coordinator's cost
  coord-3   the coordinator over three nodes, each holding the articles of a third of the
            symbols, started with --peers naming each other

Workloads: ranked top-20 (two-word OR queries of mid-frequency words), the same top-20 written
per partition (UNION ALL of per-node ORDER BY _score LIMIT 20, which pushes the LIMIT down),
GROUP BY symbol over a common word (the partition key: aggregated on the nodes), and text +
filter counts.  Latency: median of --repeat runs per query, summed over the queries of a
workload; throughput: --clients clients for --seconds running the ranked queries.  The
ratio columns divide by the one-node figure.

Everything lives in bench/work/scale-out-<n>/ (git-ignored); servers bind 127.0.0.1 on free
ports and are stopped at the end, also on errors.  Results: bench/results/<date>-scale-out-<n>
.json and .md.  No assertion here is timed; the answers are compared exactly (ids; scores to
1e-9 relative).
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gen_news  # noqa: E402
import news_bench  # noqa: E402
import peers  # noqa: E402
import suite  # noqa: E402

REPO = HERE.parent
BIN = Path(os.environ.get('QUARRY_BIN', REPO / 'build' / 'quarry'))
N_NODES = 3
TOP = 20
PG_CONFIG = peers.PG_BIN / 'pg_config'


def log(*a):
    print('[scale-out]', *a, flush=True)


def import_jsonl(data, path):
    schema = data.parent / (data.name + '.schema.json')
    schema.write_text(json.dumps(news_bench.QUARRY_SCHEMA))
    t0 = time.perf_counter()
    r = subprocess.run([str(BIN), 'import', 'news', str(path), '--schema', str(schema),
                        '--data', str(data)], capture_output=True, text=True)
    if r.returncode != 0:
        raise peers.PeerError('import: ' + r.stderr[-300:])
    return time.perf_counter() - t0


def split_by_symbol(jsonl, work):
    """The symbols in three lists of about equal articles (greedy, biggest first), and one
    JSONL per node."""
    counts = {}
    with open(jsonl) as f:
        for line in f:
            s = json.loads(line)['symbol']
            counts[s] = counts.get(s, 0) + 1
    lists, sizes = [[] for _ in range(N_NODES)], [0] * N_NODES
    for s, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        k = sizes.index(min(sizes))
        lists[k].append(s)
        sizes[k] += n
    node_of = {s: k for k in range(N_NODES) for s in lists[k]}
    paths = [work / ('shard%d.jsonl' % k) for k in range(N_NODES)]
    outs = [open(p, 'w') for p in paths]
    with open(jsonl) as f:
        for line in f:
            outs[node_of[json.loads(line)['symbol']]].write(line)
    for o in outs:
        o.close()
    return lists, paths, sizes


def install_extension():
    share = subprocess.run([str(PG_CONFIG), '--sharedir'], capture_output=True,
                           text=True).stdout.strip()
    for f in ('quarry.control', 'quarry--1.0.sql'):
        shutil.copyfile(REPO / 'src' / 'pgext' / f, Path(share) / 'extension' / f)


def coordinator_sql(nodes, lists):
    """The coordinator's schema: news1 (one foreign table on the one node), news (LIST by
    symbol over the three nodes)."""
    sql = ['CREATE EXTENSION postgres_fdw', 'CREATE EXTENSION quarry']
    cols = ('id bigint NOT NULL, title text, body text, symbol text, published timestamp, '
            'views bigint, _score real')
    for name, n in nodes:
        sql += ["CREATE SERVER %s FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', "
                "port '%d', dbname 'quarry', extensions 'quarry', use_remote_estimate 'true', "
                "fetch_size '1000', fdw_tuple_cost '0.2')" % (name, n.pg_port),
                "CREATE USER MAPPING FOR bench SERVER %s OPTIONS (user 'fdw')" % name]
    sql.append('CREATE FOREIGN TABLE news1 (%s) SERVER one OPTIONS (table_name \'news\')' % cols)
    sql.append('CREATE TABLE news (%s) PARTITION BY LIST (symbol)' % cols)
    for k in range(N_NODES):
        sql.append("CREATE FOREIGN TABLE news_n%d PARTITION OF news FOR VALUES IN (%s) SERVER n%d "
                   "OPTIONS (table_name 'news')" % (k, ', '.join("'%s'" % s for s in lists[k]), k))
    return sql


def word_by_df(lo, hi, seed=1):
    words, cum, total = gen_news.vocabulary(seed)
    for r, wd in enumerate(words):
        p = (cum[r] - (cum[r - 1] if r else 0.0)) / total
        if lo <= news_bench.doc_fraction(p) <= hi and len(wd) >= 5 and \
                wd not in news_bench.STOP_WORDS and news_bench.porter_stems([wd]) == [wd]:
            return wd
    raise SystemExit('no word with df in [%g, %g]' % (lo, hi))


def workloads(n_queries):
    ranked = [' '.join(q[1]) for q in suite.ranked_queries(1, n_queries)]
    common = word_by_df(0.3, 0.6)
    mid = [' '.join(q[1]) for q in suite.ranked_queries(1, n_queries + 5)][n_queries:]
    per_node = ' UNION ALL '.join(
        '(SELECT id, _score FROM news_n%d WHERE quarry.matches(body, %%(q)s) '
        'ORDER BY _score DESC, id LIMIT %d)' % (k, TOP) for k in range(N_NODES))
    w = [
        ('ranked top-20', ranked,
         {'one': "SELECT id, score() FROM news WHERE body @@ %(q)s ORDER BY score() DESC, id "
                 "LIMIT 20",
          'coord-1': "SELECT id, _score FROM news1 WHERE quarry.matches(body, %(q)s) "
                     "ORDER BY _score DESC, id LIMIT 20",
          'coord-3': "SELECT id, _score FROM news WHERE quarry.matches(body, %(q)s) "
                     "ORDER BY _score DESC, id LIMIT 20"}),
        ('ranked top-20, LIMIT per node', ranked,
         {'coord-3': "SELECT id, _score FROM (%s) t ORDER BY _score DESC, id LIMIT 20" % per_node}),
        ('GROUP BY symbol, common word', [common],
         {'one': "SELECT symbol, count(*) FROM news WHERE body @@ %(q)s GROUP BY symbol "
                 "ORDER BY 2 DESC, 1 LIMIT 10",
          'coord-1': "SELECT symbol, count(*) FROM news1 WHERE quarry.matches(body, %(q)s) "
                     "GROUP BY symbol ORDER BY 2 DESC, 1 LIMIT 10",
          'coord-3': "SELECT symbol, count(*) FROM news WHERE quarry.matches(body, %(q)s) "
                     "GROUP BY symbol ORDER BY 2 DESC, 1 LIMIT 10"}),
        ('text + filter count', mid,
         {'one': "SELECT count(*) FROM news WHERE body @@ %(q)s AND views > 1000",
          'coord-1': "SELECT count(*) FROM news1 WHERE quarry.matches(body, %(q)s) AND "
                     "views > 1000",
          'coord-3': "SELECT count(*) FROM news WHERE quarry.matches(body, %(q)s) AND "
                     "views > 1000"}),
    ]
    return w, common


def same_answer(a, b):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            if isinstance(u, float) or isinstance(v, float):
                if abs(float(u) - float(v)) > 1e-9 * max(abs(float(u)), abs(float(v))):
                    return False
            elif str(u) != str(v):
                return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--n', type=int, default=200000, help='articles (default 200000)')
    ap.add_argument('--clients', type=int, default=8)
    ap.add_argument('--seconds', type=float, default=6.0)
    ap.add_argument('--repeat', type=int, default=15)
    ap.add_argument('--queries', type=int, default=10, help='ranked queries (default 10)')
    ap.add_argument('--report', metavar='JSON', help='only write the .md of an earlier result')
    a = ap.parse_args()
    if a.report:
        res = json.loads(Path(a.report).read_text())
        Path(a.report).with_suffix('.md').write_text(report(res))
        return
    work = HERE / 'work' / ('scale-out-%d' % a.n)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    jsonl = HERE / 'work' / ('news-%d.jsonl' % a.n)
    if not jsonl.exists():
        log('generating %s' % jsonl.name)
        gen_news.generate(a.n, jsonl, 1)
    lists, shards, sizes = split_by_symbol(jsonl, work)
    log('articles per node: %s' % sizes)
    install_extension()
    servers, pg = [], None
    res = {'n': a.n, 'date': datetime.date.today().isoformat(), 'nodes': N_NODES,
           'articles_per_node': sizes, 'clients': a.clients, 'cores': os.cpu_count(),
           'workloads': {}, 'load_avg_start': os.getloadavg()[0]}
    try:
        t_one = import_jsonl(work / 'one', jsonl)
        t_shards = sum(import_jsonl(work / ('n%d' % k), shards[k]) for k in range(N_NODES))
        res['import_s'] = {'one': round(t_one, 1), 'three_nodes': round(t_shards, 1)}
        log('imported: one node %.1f s, three nodes %.1f s' % (t_one, t_shards))
        ports = [peers.free_port() for _ in range(N_NODES)]
        one = peers.QuarryServer(BIN, work / 'one', work / 'one.log').start()
        servers.append(one)
        nodes = []
        for k in range(N_NODES):
            others = ','.join('http://127.0.0.1:%d' % ports[j] for j in range(N_NODES) if j != k)
            nodes.append(peers.QuarryServer(BIN, work / ('n%d' % k), work / ('n%d.log' % k),
                                            http='127.0.0.1:%d' % ports[k],
                                            extra=['--peers', others]).start())
            servers.append(nodes[-1])
        pg = peers.PgCluster(work / 'pg').init().start()
        cc = pg.connect()
        cur = cc.cursor()
        for s in coordinator_sql([('one', one)] + [('n%d' % k, nodes[k]) for k in range(N_NODES)],
                                 lists):
            cur.execute(s)
        cur.execute('SET enable_partitionwise_aggregate = on')
        cur.execute('ALTER DATABASE postgres SET enable_partitionwise_aggregate = on')
        res['postgres'] = peers.PgCluster.version()
        direct = one.connect().cursor()
        cursors = {'one': direct, 'coord-1': cur, 'coord-3': cur}
        ws, common = workloads(a.queries)
        res['common_word'] = common
        first = {}  # the first setup's answers per query list: what the others must equal
        for name, queries, sqls in ws:
            log(name)
            want = first.get(id(queries))
            out = {}
            for setup in ('one', 'coord-1', 'coord-3'):
                sql = sqls.get(setup)
                if not sql:
                    continue
                c = cursors[setup]
                answers = []
                for q in queries:
                    c.execute(sql, {'q': q})
                    answers.append(c.fetchall())
                ref = want if want is not None else answers
                ok = all(same_answer(x, y) for x, y in zip(answers, ref))
                if want is None:
                    want = first[id(queries)] = answers
                if not ok:
                    raise SystemExit('%s: %s answers differ from one node\'s' % (name, setup))
                ms = 0.0
                for q in queries:
                    ts = []
                    for _ in range(a.repeat):
                        t0 = time.perf_counter()
                        c.execute(sql, {'q': q})
                        c.fetchall()
                        ts.append((time.perf_counter() - t0) * 1000.0)
                    ms += sorted(ts)[len(ts) // 2]
                out[setup] = {'median_ms_per_query': ms / len(queries)}
                if name.startswith('ranked'):
                    spec = ({'port': one.pg_port, 'db': 'quarry'} if setup == 'one'
                            else {'port': pg.port, 'db': 'postgres'})
                    texts = [c.mogrify(sql, {'q': q}).decode() for q in queries]
                    out[setup]['throughput'] = suite.concurrent(
                        'quarry' if setup == 'one' else 'postgres', spec, texts,
                        clients=a.clients, run_s=a.seconds)
                log('  %-8s %8.2f ms/query %s' % (setup, out[setup]['median_ms_per_query'],
                                                 out[setup].get('throughput', '')))
            base = out.get('one', {}).get('median_ms_per_query') or \
                res['workloads'].get('ranked top-20', {}).get('one', {}).get('median_ms_per_query')
            for setup in out:
                if base:
                    out[setup]['latency_ratio'] = out[setup]['median_ms_per_query'] / base
            res['workloads'][name] = out
        cur.execute('EXPLAIN VERBOSE ' + ws[0][2]['coord-3'], {'q': ws[0][1][0]})
        res['plan_ranked'] = [r[0] for r in cur.fetchall()]
        cur.execute('EXPLAIN VERBOSE ' + ws[2][2]['coord-3'], {'q': common})
        res['plan_group'] = [r[0] for r in cur.fetchall()]
    finally:
        for s in servers:
            s.stop()
        if pg:
            pg.stop()
    res['load_avg_end'] = os.getloadavg()[0]  # the machine's other work, for the reader
    out = HERE / 'results' / ('%s-scale-out-%d' % (res['date'], a.n))
    out.with_suffix('.json').write_text(json.dumps(res, indent=1) + '\n')
    out.with_suffix('.md').write_text(report(res))
    log('wrote %s.{json,md}' % out)


def report(res):
    lines = ['# Scale-out: one Quarry node vs three behind PostgreSQL, %s articles (%s)' % (
        '{:,}'.format(res['n']), res['date']), '',
        '%s coordinator (postgres_fdw, use_remote_estimate, fdw_tuple_cost 0.2, fetch_size '
        '1000); three local Quarry nodes with --peers (global BM25 statistics); %d cores shared '
        'by every server and the clients. Articles per node: %s.' % (
            res.get('postgres', 'PostgreSQL 15'), res['cores'], res['articles_per_node']) +
        (' Load average of the machine (other work included): %.1f at the start, %.1f at the '
         'end.' % (res['load_avg_start'], res['load_avg_end']) if 'load_avg_end' in res else ''),
        '',
        '| workload | setup | median ms / query | ratio to one node | %d-client q/s | '
        'ratio to one node | p50 ms | p99 ms |' % res['clients'], '|---|---|---|---|---|---|---|---|']
    qps_one = res['workloads'].get('ranked top-20', {}).get('one', {}).get('throughput', {}).get(
        'qps')
    for name, out in res['workloads'].items():
        for setup, r in out.items():
            t = r.get('throughput', {})
            if qps_one and 'qps' in t:
                r['throughput_ratio'] = t['qps'] / qps_one
            lines.append('| %s | %s | %.2f | %s | %s | %s | %s | %s |' % (
                name, setup, r['median_ms_per_query'],
                '%.2f' % r['latency_ratio'] if 'latency_ratio' in r else '',
                '%.0f' % t['qps'] if 'qps' in t else '',
                '%.2f' % r['throughput_ratio'] if 'throughput_ratio' in r else '',
                '%.1f' % t['p50_ms'] if 'p50_ms' in t
                else '', '%.1f' % t['p99_ms'] if 'p99_ms' in t else ''))
    lines += ['', 'Answers were compared before timing: the same ids, scores equal to 1e-9 '
              'relative.', '', 'Ranked top-20 through the partitioned table:', '', '```'] + \
        res['plan_ranked'] + ['```', '', 'GROUP BY symbol (the partition key):', '', '```'] + \
        res['plan_group'] + ['```', '']
    return '\n'.join(lines)


if __name__ == '__main__':
    main()
