#!/usr/bin/python3
"""The benchmark report's measuring run: Quarry against PostgreSQL 15, SQLite FTS5, Xapian,
Sphinx and DuckDB on the same generated news corpus, answers checked before anything is timed.

  bench/suite.py --n 200000 [--repeat 11] [--engines quarry,postgres,...] [--keep-going]

`bench/run` calls this once per size and then bench/report.py. One run:

1. Generates bench/work/news-N.jsonl (bench/gen_news.py, seed 1) and the files each peer
   loads from it (CSV for PostgreSQL's COPY, TSV for Sphinx's indexer).
2. Loads every engine and times it until it answers queries (load + index build). Quarry
   runs as `quarry serve` and is loaded over HTTP (the JSONL upload), then gets its B-tree
   indexes over its PostgreSQL port; PostgreSQL gets COPY, a stored tsvector with GIN and
   B-trees; SQLite a plain table with B-trees plus an external-content FTS5 index; Xapian
   (in-process, cached by corpus hash because it builds slowly) values for the filters;
   Sphinx an index built by `indexer`; DuckDB the plain columns (no text).
3. Runs every workload once on every engine that answers it and compares the answers
   (counts, id sets, group results, rows): any mismatch stops the run before timing
   (--keep-going only marks it). Ranked lists are compared on row count only, because the
   ranking functions differ by design (BM25 in Quarry, SQLite, Xapian and Sphinx;
   ts_rank_cd in PostgreSQL).
4. Times each workload: one warm-up run, then the median of --repeat (>= 11) runs, through
   the same client library per protocol (psycopg2 for PostgreSQL and Quarry's PG port,
   http.client for Quarry's HTTP API, the sqlite3/xapian modules in-process, pymysql for
   SphinxQL, DuckDB in-process in node). Then 8 concurrent clients on ranked search, the
   planner against each forced access path, footprint, and searches while ingesting.
5. Writes bench/results/<date>-<n>.json (everything, including every answer summary).
"""

import argparse
import csv
import datetime
import http.client
import json
import multiprocessing
import os
import platform
import shutil
import statistics
import sys
import time
import traceback
import urllib.parse
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engines  # noqa: E402
import gen_news  # noqa: E402
import news_bench  # noqa: E402
import peers  # noqa: E402

WORK = engines.REPO / 'bench' / 'work'
RESULTS = engines.REPO / 'bench' / 'results'
ALL_ENGINES = ['quarry', 'quarry-http', 'postgres', 'sqlite', 'xapian', 'sphinx', 'duckdb']
TOP = 20
CLIENTS = 8


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------
# Answers: every engine's rows are reduced to one comparable value per workload kind

def norm_value(v):
    if isinstance(v, Decimal):
        v = float(v)
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if abs(v - round(v)) < 1e-6 * max(1.0, abs(v)):
            return int(round(v))
        return float('%.6g' % v)
    if isinstance(v, bytes):
        return v.decode()
    return str(v)


def summarize(kind, rows):
    """rows (a list of sequences) -> the value compared between engines."""
    if kind == 'count':
        return norm_value(rows[0][0]) if rows else None
    if kind == 'top':
        return len(rows)
    if kind == 'ids':
        return sorted(int(r[0]) for r in rows)
    if kind == 'groups':
        return sorted(tuple(norm_value(v) for v in r) for r in rows)
    return [tuple(norm_value(v) for v in r) for r in rows]        # 'rows': ordered


def show_answer(kind, ans):
    if kind in ('count', 'top'):
        return str(ans)
    if kind == 'ids':
        return '%d ids' % len(ans)
    if kind == 'groups':
        return '%d groups' % len(ans)
    return '%d rows' % len(ans)


def diff_answer(kind, a, b):
    if kind == 'ids':
        sa, sb = set(a), set(b)
        return '%d vs %d ids (%d only in the first, %d only in the second; e.g. %s)' % (
            len(sa), len(sb), len(sa - sb), len(sb - sa), sorted(sa ^ sb)[:5])
    if kind in ('groups', 'rows'):
        sa, sb = set(map(tuple, a)), set(map(tuple, b))
        return '%d vs %d rows; first differences %s / %s' % (
            len(a), len(b), sorted(sa - sb, key=str)[:3], sorted(sb - sa, key=str)[:3])
    return '%s vs %s' % (a, b)


# --------------------------------------------------------------------------------------
# The corpus and what each peer loads from it

def corpus_files(n, seed=1):
    WORK.mkdir(parents=True, exist_ok=True)
    jsonl = WORK / ('news-%d.jsonl' % n if seed == 1 else 'news-%d-s%d.jsonl' % (n, seed))
    if not jsonl.exists():
        log('generating %s...' % engines.show_path(jsonl))
        gen_news.generate(n, jsonl, seed)
    comp = Path(gen_news.companies_path(jsonl))
    csv_path = jsonl.with_suffix('.csv')
    tsv_path = jsonl.with_suffix('.tsv')
    tickers, _ = gen_news.symbols()
    sym_no = {s: i + 1 for i, s in enumerate(tickers)}
    if not csv_path.exists() or not tsv_path.exists():
        log('writing %s and %s...' % (csv_path.name, tsv_path.name))
        with open(jsonl) as f, open(str(csv_path) + '.tmp', 'w', newline='') as c, \
                open(str(tsv_path) + '.tmp', 'w') as t:
            w = csv.writer(c)
            for line in f:
                d = json.loads(line)
                w.writerow([d['id'], d['title'], d['body'], d['symbol'], d['published'], d['views']])
                ts = datetime.datetime.strptime(d['published'], '%Y-%m-%dT%H:%M:%SZ').replace(
                    tzinfo=datetime.timezone.utc)
                t.write('%d\t%s\t%s\t%d\t%d\t%d\t%s\n' % (
                    d['id'], d['title'], d['body'], sym_no[d['symbol']], int(ts.timestamp()),
                    d['views'], d['published'][:4] + d['published'][5:7]))
        os.replace(str(csv_path) + '.tmp', csv_path)
        os.replace(str(tsv_path) + '.tmp', tsv_path)
    return {'jsonl': jsonl, 'companies': comp, 'csv': csv_path, 'tsv': tsv_path,
            'sym_no': sym_no, 'bytes': jsonl.stat().st_size,
            'sha256': news_bench.corpus_sha256(jsonl)}


# --------------------------------------------------------------------------------------
# Workloads

def text_dialects(q):
    """A text query tuple (engines.py) in each engine's language."""
    kind, arg = q
    if kind == 'term':
        tsq, sph = arg, arg
    elif kind == 'or':
        tsq, sph = ' | '.join(arg), ' | '.join(arg)
    elif kind == 'and':
        tsq, sph = ' & '.join(arg), ' '.join(arg)
    elif kind == 'prefix':
        tsq, sph = arg + ':*', arg + '*'
    else:
        tsq, sph = ' <-> '.join(arg), '"%s"' % ' '.join(arg)
    return {'quarry': engines.QuarryEngine.query_text(q), 'tsquery': tsq,
            'fts5': engines.Fts5Engine.match(q).replace("'", "''"), 'sphinx': sph}


class W:
    """One workload: a label, a group, an answer kind, and how each engine runs it.

    sql: {'quarry'|'postgres'|'sqlite'|'duckdb'|'sphinx': SQL text}; http: (method, path,
    params or body, extract(json) -> rows); xapian: fn(XapianPeer) -> rows.
    """

    def __init__(self, wid, group, label, kind, sql=None, http=None, xapian=None,
                 planner=False, note=None):
        self.id, self.group, self.label, self.kind = wid, group, label, kind
        self.sql = sql or {}
        self.http, self.xapian, self.planner, self.note = http, xapian, planner, note


def month_bounds(month):
    y, m = int(month[:4]), int(month[5:7])
    nxt = '%04d-%02d' % (y + (m == 12), m % 12 + 1)
    return month + '-01', nxt + '-01'


def make_workloads(n, words, files):
    w = {k: v['word'] for k, v in words.items()}
    tickers, _ = gen_news.symbols()
    top_sym, sel_sym = tickers[0], tickers[40]
    in_syms = tickers[10:15]
    month = '2024-03'
    m_lo, m_hi = month_bounds(month)
    d_lo, d_hi = '2024-01-01', '2024-04-01'
    v_lo, v_hi = 500, 600
    i_lo, i_hi = n // 2, n // 2 + n // 100 - 1
    point_id = n // 3 + 7
    page_off = min(99990, n // 2)
    out = []

    def text(wid, label, kind, q, mode):
        d = text_dialects(q)
        qq, tsq, fm, sp = d['quarry'], d['tsquery'], d['fts5'], d['sphinx']
        sql, http, xap = {}, None, None
        if mode == 'count':
            sql['quarry'] = "SELECT count(*) FROM news WHERE news @@ '%s'" % qq
            sql['postgres'] = "SELECT count(*) FROM news WHERE tsv @@ to_tsquery('english', '%s')" % tsq
            sql['sqlite'] = "SELECT count(*) FROM news_fts WHERE news_fts MATCH '%s'" % fm
            sql['sphinx'] = "SELECT COUNT(*) FROM news WHERE MATCH('%s')" % sp
            http = ('GET', '/tables/news/search', {'q': qq, 'count_only': 'true'},
                    lambda j: [[j['total']]])
            xap = lambda x, q=q: [[x.count(q)]]
        elif mode == 'top':
            sql['quarry'] = ("SELECT id FROM news WHERE news @@ '%s' ORDER BY score() DESC LIMIT %d"
                             % (qq, TOP))
            sql['postgres'] = ("SELECT id FROM news, to_tsquery('english', '%s') q WHERE tsv @@ q "
                               "ORDER BY ts_rank_cd(tsv, q) DESC LIMIT %d" % (tsq, TOP))
            sql['sqlite'] = ("SELECT rowid FROM news_fts WHERE news_fts MATCH '%s' ORDER BY rank "
                             "LIMIT %d" % (fm, TOP))
            sql['sphinx'] = "SELECT id FROM news WHERE MATCH('%s') LIMIT %d" % (sp, TOP)
            http = ('GET', '/tables/news/search', {'q': qq, 'limit': TOP, 'total': 'false',
                                                   'doc': 'false'},
                    lambda j: [[h['id']] for h in j['hits']])
            xap = lambda x, q=q: [[i] for i, _ in x.top(q, TOP)]
        else:  # ids
            sql['quarry'] = "SELECT id FROM news WHERE news @@ '%s'" % qq
            sql['postgres'] = "SELECT id FROM news WHERE tsv @@ to_tsquery('english', '%s')" % tsq
            sql['sqlite'] = "SELECT rowid FROM news_fts WHERE news_fts MATCH '%s'" % fm
            sql['sphinx'] = ("SELECT id FROM news WHERE MATCH('%s') LIMIT %d OPTION max_matches=%d"
                             % (sp, n, n))
            http = ('GET', '/tables/news/search', {'q': qq, 'limit': n,
                                                   'total': 'false', 'doc': 'false'},
                    lambda j: [[h['id']] for h in j['hits']])
            xap = lambda x, q=q: [[i] for i in x.ids(q)]
        out.append(W(wid, 'text', label, kind, sql, http, xap))

    text('count_common', 'count: common word "%s"' % w['common'], 'count', ('term', w['common']), 'count')
    text('count_mid', 'count: mid word "%s"' % w['mid'], 'count', ('term', w['mid']), 'count')
    text('count_rare', 'count: rare word "%s"' % w['rare'], 'count', ('term', w['rare']), 'count')
    text('count_and', 'count: "%s" AND "%s"' % (w['second'], w['mid']), 'count',
         ('and', [w['second'], w['mid']]), 'count')
    text('count_prefix', 'count: prefix "%s*"' % w['prefix'], 'count', ('prefix', w['prefix']), 'count')
    text('count_phrase', 'count: phrase "hydro power"', 'count', ('phrase', list(gen_news.PHRASE)), 'count')
    text('top_common', 'top-%d by rank: common word' % TOP, 'top', ('term', w['common']), 'top')
    text('top_mid', 'top-%d by rank: mid word' % TOP, 'top', ('term', w['mid']), 'top')
    text('top_two', 'top-%d by rank: "%s" OR "%s"' % (TOP, w['second'], w['mid']), 'top',
         ('or', [w['second'], w['mid']]), 'top')
    text('ids_common', 'all ids: common word', 'ids', ('term', w['common']), 'ids')

    # word + symbol + month: the case where a text-first plan loses to a filter-first one
    sw, sym_no = w['second'], files['sym_no']
    flt = "symbol = '%s' AND published >= '%s' AND published < '%s'" % (top_sym, m_lo, m_hi)
    m_lo_ts = int(datetime.datetime.fromisoformat(m_lo + 'T00:00:00+00:00').timestamp())
    m_hi_ts = int(datetime.datetime.fromisoformat(m_hi + 'T00:00:00+00:00').timestamp())
    for wid, kind, sel in (('wsm_ids', 'ids', 'id'), ('wsm_count', 'count', 'count(*)')):
        sql = {
            'quarry': "SELECT %s FROM news WHERE news @@ '%s' AND %s" % (sel, sw, flt),
            'postgres': "SELECT %s FROM news WHERE tsv @@ to_tsquery('english', '%s') AND %s"
                        % (sel, sw, flt),
            'sqlite': ("SELECT %s FROM news_fts JOIN news ON news.id = news_fts.rowid WHERE "
                       "news_fts MATCH '%s' AND %s" % (sel.replace('id', 'news.id'), sw, flt)),
            'sphinx': ("SELECT %s FROM news WHERE MATCH('%s') AND sym = %d AND published >= %d AND "
                       "published < %d%s" % ('id' if kind == 'ids' else 'COUNT(*)', sw,
                                             sym_no[top_sym], m_lo_ts, m_hi_ts,
                                             ' LIMIT %d OPTION max_matches=%d' % (n, n)
                                             if kind == 'ids' else ''))}
        hp = {'q': sw, 'filter': flt, 'doc': 'false'}
        hp.update({'count_only': 'true'} if kind == 'count' else {'limit': 100000, 'total': 'false'})
        ext = (lambda j: [[j['total']]]) if kind == 'count' else (lambda j: [[h['id']] for h in j['hits']])
        xap = (lambda x: [[i] for i in x.filtered_ids(('term', sw), top_sym, m_lo, m_hi)]) \
            if kind == 'ids' else (lambda x: [[len(x.filtered_ids(('term', sw), top_sym, m_lo, m_hi))]])
        out.append(W(wid, 'text', '%s: "%s" + symbol %s + month %s' % (
            'ids' if kind == 'ids' else 'count', sw, top_sym, month), kind, sql,
            ('GET', '/tables/news/search', hp, ext), xap, planner=True))

    # aggregation over the matches of a word
    cw, mw = w['common'], w['mid']
    out.append(W('agg_symbol', 'agg', 'GROUP BY symbol over "%s" (common)' % cw, 'groups', {
        'quarry': "SELECT symbol, count(*) FROM news WHERE news @@ '%s' GROUP BY symbol" % cw,
        'postgres': "SELECT symbol, count(*) FROM news WHERE tsv @@ to_tsquery('english', '%s') "
                    "GROUP BY symbol" % cw,
        'sqlite': "SELECT symbol, count(*) FROM news_fts JOIN news ON news.id = news_fts.rowid "
                  "WHERE news_fts MATCH '%s' GROUP BY symbol" % cw,
        'sphinx': "SELECT sym, COUNT(*) FROM news WHERE MATCH('%s') GROUP BY sym LIMIT 1000 "
                  "OPTION max_matches=1000" % cw},
        ('GET', '/tables/news/search', {'q': cw, 'limit': 0, 'total': 'false',
                                        'facets': 'terms:symbol:1000'},
         lambda j: [[b['key'], b['count']] for b in j['facets']['symbol']['buckets']]),
        lambda x: x.value_counts(('term', cw), 0), planner=True,
        note='Sphinx groups by a ticker number (its string attributes do not group in 2.2); '
             'the suite maps the numbers back to tickers before comparing'))
    ym = {'quarry': 'extract(year FROM published) * 100 + extract(month FROM published)',
          'postgres': "extract(year FROM published AT TIME ZONE 'UTC') * 100 + "
                      "extract(month FROM published AT TIME ZONE 'UTC')",
          'sqlite': 'CAST(substr(published, 1, 4) || substr(published, 6, 2) AS INTEGER)'}
    out.append(W('agg_month', 'agg', 'count per month over "%s" (mid)' % mw, 'groups', {
        'quarry': "SELECT %s, count(*) FROM news WHERE news @@ '%s' GROUP BY 1" % (ym['quarry'], mw),
        'postgres': "SELECT %s, count(*) FROM news WHERE tsv @@ to_tsquery('english', '%s') GROUP BY 1"
                    % (ym['postgres'], mw),
        'sqlite': "SELECT %s, count(*) FROM news_fts JOIN news ON news.id = news_fts.rowid WHERE "
                  "news_fts MATCH '%s' GROUP BY 1" % (ym['sqlite'], mw),
        'sphinx': "SELECT month, COUNT(*) FROM news WHERE MATCH('%s') GROUP BY month LIMIT 1000 "
                  "OPTION max_matches=1000" % mw},
        None, lambda x: x.month_counts(('term', mw)), planner=True))
    pct = ('percentile_cont(0.5) WITHIN GROUP (ORDER BY views), percentile_cont(0.9) WITHIN GROUP '
           '(ORDER BY views), percentile_cont(0.99) WITHIN GROUP (ORDER BY views)')
    out.append(W('agg_pct', 'agg', 'percentiles 50/90/99 of views over "%s"' % sw, 'rows', {
        'quarry': "SELECT %s FROM news WHERE news @@ '%s'" % (pct, sw),
        'postgres': "SELECT %s FROM news WHERE tsv @@ to_tsquery('english', '%s')" % (pct, sw)},
        None, None, planner=True, note='SQLite has no percentile function; Sphinx and Xapian '
                                       'compute none'))
    out.append(W('agg_join', 'agg', 'join to companies: count per sector over "%s"' % mw, 'groups', {
        'quarry': "SELECT c.sector, count(*) FROM news n JOIN companies c ON n.symbol = c.symbol "
                  "WHERE n @@ '%s' GROUP BY c.sector" % mw,
        'postgres': "SELECT c.sector, count(*) FROM news n JOIN companies c ON n.symbol = c.symbol "
                    "WHERE n.tsv @@ to_tsquery('english', '%s') GROUP BY c.sector" % mw,
        'sqlite': "SELECT c.sector, count(*) FROM news_fts JOIN news n ON n.id = news_fts.rowid "
                  "JOIN companies c ON n.symbol = c.symbol WHERE news_fts MATCH '%s' "
                  "GROUP BY c.sector" % mw}, planner=True))

    # filters alone, and text with a selective / an unselective filter
    def flt_w(wid, label, where, http_filter, xap=None, sph=None, note=None):
        sql = {e: 'SELECT count(*) FROM news WHERE %s' % where for e in
               ('quarry', 'postgres', 'sqlite', 'duckdb')}
        if sph:
            sql['sphinx'] = sph
        http = ('GET', '/tables/news/search', {'filter': http_filter, 'count_only': 'true'},
                lambda j: [[j['total']]]) if http_filter else None
        out.append(W(wid, 'filter', label, 'count', sql, http, xap, planner=True, note=note))

    ins = ', '.join("'%s'" % s for s in in_syms)
    flt_w('f_sorted', 'range on a sorted column: id BETWEEN %d AND %d' % (i_lo, i_hi),
          'id BETWEEN %d AND %d' % (i_lo, i_hi), None,
          sph='SELECT COUNT(*) FROM news WHERE id BETWEEN %d AND %d' % (i_lo, i_hi),
          note="the HTTP API's filters name columns, and the primary key is not one")
    flt_w('f_unsorted', 'range on an unsorted column: views BETWEEN %d AND %d' % (v_lo, v_hi),
          'views BETWEEN %d AND %d' % (v_lo, v_hi), 'views >= %d AND views <= %d' % (v_lo, v_hi),
          lambda x: [[x.value_range_count(2, v_lo, v_hi)]],
          'SELECT COUNT(*) FROM news WHERE views BETWEEN %d AND %d' % (v_lo, v_hi))
    epoch = lambda day: int(datetime.datetime.fromisoformat(day + 'T00:00:00+00:00').timestamp())
    flt_w('f_date', 'range on an unsorted timestamp: 3 months',
          "published >= '%s' AND published < '%s'" % (d_lo, d_hi),
          "published >= '%s' AND published < '%s'" % (d_lo, d_hi),
          lambda x: [[x.value_range_count(1, d_lo, '2024-03-31T23:59:59Z')]],
          'SELECT COUNT(*) FROM news WHERE published >= %d AND published < %d'
          % (epoch(d_lo), epoch(d_hi)))
    flt_w('f_in', 'IN-list on a keyword: symbol IN (5 tickers)', 'symbol IN (%s)' % ins,
          'symbol IN (%s)' % ins, lambda x: [[x.in_count(0, in_syms)]],
          'SELECT COUNT(*) FROM news WHERE sym IN (%s)' % ', '.join(str(sym_no[s]) for s in in_syms))
    for wid, label, cond, hcond, scond in (
            ('f_text_sel', 'text + selective filter: "%s" AND symbol = %s' % (mw, sel_sym),
             "symbol = '%s'" % sel_sym, "symbol = '%s'" % sel_sym, 'sym = %d' % sym_no[sel_sym]),
            ('f_text_unsel', 'text + unselective filter: "%s" AND views > 100' % mw,
             'views > 100', 'views > 100', 'views > 100')):
        out.append(W(wid, 'filter', label, 'count', {
            'quarry': "SELECT count(*) FROM news WHERE news @@ '%s' AND %s" % (mw, cond),
            'postgres': "SELECT count(*) FROM news WHERE tsv @@ to_tsquery('english', '%s') AND %s"
                        % (mw, cond),
            'sqlite': "SELECT count(*) FROM news_fts JOIN news ON news.id = news_fts.rowid WHERE "
                      "news_fts MATCH '%s' AND %s" % (mw, cond),
            'sphinx': "SELECT COUNT(*) FROM news WHERE MATCH('%s') AND %s" % (mw, scond)},
            ('GET', '/tables/news/search', {'q': mw, 'filter': hcond, 'count_only': 'true'},
             lambda j: [[j['total']]]), None, planner=True))

    # deep pagination and point lookups
    out.append(W('page_rank', 'paging', 'page 10,000 of a ranked search (10 per page, "%s"), offset %d'
                 % (cw, page_off), 'top', {
                     'quarry': "SELECT id FROM news WHERE news @@ '%s' ORDER BY score() DESC "
                               "LIMIT 10 OFFSET %d" % (cw, page_off),
                     'postgres': "SELECT id FROM news, to_tsquery('english', '%s') q WHERE tsv @@ q "
                                 "ORDER BY ts_rank_cd(tsv, q) DESC LIMIT 10 OFFSET %d" % (cw, page_off),
                     'sqlite': "SELECT rowid FROM news_fts WHERE news_fts MATCH '%s' ORDER BY rank "
                               "LIMIT 10 OFFSET %d" % (cw, page_off),
                     'sphinx': "SELECT id FROM news WHERE MATCH('%s') LIMIT %d, 10 OPTION "
                               "max_matches=%d" % (cw, page_off, page_off + 10)},
                 ('GET', '/tables/news/search', {'q': cw, 'limit': 10, 'offset': page_off,
                                                 'total': 'false', 'doc': 'false'},
                  lambda j: [[h['id']] for h in j['hits']]),
                 lambda x: [[i] for i, _ in x.top(('term', cw), 10, page_off)]))
    order = 'SELECT id, views FROM news ORDER BY views DESC, id LIMIT 10 OFFSET %d' % page_off
    sql = {e: order for e in ('quarry', 'postgres', 'sqlite', 'duckdb')}
    sql['sphinx'] = ('SELECT id, views FROM news ORDER BY views DESC, id ASC LIMIT %d, 10 '
                     'OPTION max_matches=%d' % (page_off, page_off + 10))
    out.append(W('page_col', 'paging', 'page 10,000 of all articles by views (10 per page)', 'rows',
                 sql,
                 ('GET', '/tables/news/search', {'sort': 'views:desc,_id', 'limit': 10,
                                                 'offset': page_off, 'total': 'false',
                                                 'doc': 'false'},
                  lambda j: [[h['id'], h['sort'][0]] for h in j['hits']])))
    out.append(W('noop', 'point', 'SELECT 1: the round trip alone', 'rows',
                 {e: 'SELECT 1' for e in ('quarry', 'postgres', 'sqlite', 'duckdb')},
                 ('GET', '/health', {}, lambda j: [[1]]),
                 note='the floor under every other time: client library, protocol and '
                      'loopback (none for the in-process SQLite)'))
    pt = 'SELECT id, symbol, views FROM news WHERE id = %d' % point_id
    sql = {e: pt for e in ('quarry', 'postgres', 'sqlite', 'duckdb')}
    sql['sphinx'] = 'SELECT id, sym, views FROM news WHERE id = %d' % point_id
    out.append(W('point', 'point', 'point lookup by id', 'rows', sql,
                 ('GET', '/tables/news/documents/%d' % point_id, {},
                  lambda j: [[j['id'], j['symbol'], j['views']]]),
                 lambda x: x.point(point_id)))

    # structured SQL without text (DuckDB is the anchor)
    def st(wid, label, kind, q, eng=('quarry', 'postgres', 'sqlite', 'duckdb')):
        out.append(W(wid, 'struct', label, kind, {e: q for e in eng}))

    st('s_group', 'GROUP BY symbol, count (500 groups)', 'groups',
       'SELECT symbol, count(*) FROM news GROUP BY symbol')
    st('s_sums', 'count, sum, avg of views per symbol', 'groups',
       'SELECT symbol, count(*), sum(views), avg(views) FROM news GROUP BY symbol')
    st('s_top10', 'top-10 by views', 'rows',
       'SELECT id, views FROM news ORDER BY views DESC, id LIMIT 10')
    st('s_pct', 'percentiles 50/90/99 of views', 'rows', 'SELECT %s FROM news' % pct,
       ('quarry', 'postgres', 'duckdb'))
    st('s_join', 'join to companies: count, sum of views per sector', 'groups',
       'SELECT c.sector, count(*), sum(n.views) FROM news n JOIN companies c ON n.symbol = c.symbol '
       'GROUP BY c.sector')
    st('s_count', 'whole-table count, min, max of views', 'rows',
       'SELECT count(*), min(views), max(views) FROM news')
    return out


# --------------------------------------------------------------------------------------
# Engines

class SqlPeer:
    """Any engine answering SQL through a DB-API connection."""

    def __init__(self, name, conn_fn):
        self.name, self.conn_fn = name, conn_fn
        self.conn = conn_fn()
        self.cur = self.conn.cursor()

    def prepare(self, w):
        sql = w.sql.get(self.name)
        if not sql:
            return None

        def run(sql=sql):
            self.cur.execute(sql)
            return self.cur.fetchall()
        return run

    def close(self):
        try:
            self.conn.close()
        except Exception:
            pass


class SphinxPeer(SqlPeer):
    def __init__(self, conn_fn, sym_no):
        super().__init__('sphinx', conn_fn)
        self.sym_name = {v: k for k, v in sym_no.items()}

    def prepare(self, w):
        fn = super().prepare(w)
        if fn and w.id == 'agg_symbol':
            return lambda: [(self.sym_name[int(s)], c) for s, c in fn()]
        if fn and w.id == 'point':
            return lambda: [(i, self.sym_name[int(s)], v) for i, s, v in fn()]
        return fn


class HttpPeer:
    name = 'quarry-http'

    def __init__(self, port):
        self.port = port
        self.conn = http.client.HTTPConnection('127.0.0.1', port, timeout=600)

    def request(self, method, path, params):
        url = path + ('?' + urllib.parse.urlencode(params) if params else '')
        try:
            self.conn.request(method, url)
            r = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            # the server closes keep-alive connections idle past idle_timeout_s (60 s),
            # which a peer's slow cell at 2M exceeds: reconnect once, as HTTP clients do
            self.conn.close()
            self.conn = http.client.HTTPConnection('127.0.0.1', self.port, timeout=600)
            self.conn.request(method, url)
            r = self.conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise RuntimeError('HTTP %d: %s' % (r.status, body[:300].decode('utf-8', 'replace')))
        return json.loads(body)

    def prepare(self, w):
        if not w.http:
            return None
        method, path, params, extract = w.http
        if path.endswith('/search') and params.get('q'):
            # the peers match words exactly: no typo tolerance, no completion
            params = dict(params, typo='off', prefix='false')
        return lambda: extract(self.request(method, path, params))

    def close(self):
        self.conn.close()


class XapianPeer:
    name = 'xapian'

    def __init__(self, path):
        self.e = engines.XapianEngine(path, writable=False)
        self.e.create(['title', 'body'], int_ids=True)
        self.x = self.e.x
        self.n = self.e.db.get_doccount()

    def prepare(self, w):
        if not w.xapian:
            return None
        return lambda: w.xapian(self)

    def count(self, q):
        return self.e.count(q)

    def top(self, q, limit, offset=0):
        mset = self.e._enquire(q, True).get_mset(offset, limit)
        return [(m.docid, m.weight) for m in mset]

    def ids(self, q):
        return self.e.ids(q)

    def _all(self, query, spy=None):
        enq = self.x.Enquire(self.e.db)
        enq.set_query(query)
        enq.set_weighting_scheme(self.x.BoolWeight())
        if spy is not None:
            enq.add_matchspy(spy)
        return enq.get_mset(0, self.n, self.n)

    def _filter(self, sym, lo, hi):
        x = self.x
        return x.Query(x.Query.OP_AND, [x.Query(x.Query.OP_VALUE_RANGE, 0, sym, sym),
                                        x.Query(x.Query.OP_VALUE_RANGE, 1, lo, hi)])

    def filtered_ids(self, q, sym, lo, hi):
        x = self.x
        # the upper bound is exclusive in SQL and inclusive here: step back one second
        hi_incl = (datetime.datetime.fromisoformat(hi + 'T00:00:00') -
                   datetime.timedelta(seconds=1)).strftime('%Y-%m-%dT%H:%M:%SZ')
        query = x.Query(x.Query.OP_FILTER, self.e.xquery(q), self._filter(sym, lo, hi_incl))
        return [m.docid for m in self._all(query)]

    def value_counts(self, q, slot):
        spy = self.x.ValueCountMatchSpy(slot)
        self._all(self.e.xquery(q), spy)
        return [(t.term.decode(), t.termfreq) for t in spy.values()]

    def month_counts(self, q):
        by = {}
        for ts, c in self.value_counts(q, 1):
            k = int(ts[:4] + ts[5:7])
            by[k] = by.get(k, 0) + c
        return sorted(by.items())

    def value_range_count(self, slot, lo, hi):
        x = self.x
        if slot == 2:
            lo, hi = x.sortable_serialise(lo), x.sortable_serialise(hi)
        return self._all(x.Query(x.Query.OP_VALUE_RANGE, slot, lo, hi)).size()

    def in_count(self, slot, values):
        x = self.x
        q = x.Query(x.Query.OP_OR, [x.Query(x.Query.OP_VALUE_RANGE, slot, v, v) for v in values])
        return self._all(q).size()

    def point(self, docid):
        d = json.loads(self.e.db.get_document(docid).get_data())
        return [[d['id'], d['symbol'], d['views']]]

    def close(self):
        self.e.close()


# --------------------------------------------------------------------------------------
# Loading each engine (timed until it answers)

QUARRY_SCHEMA = news_bench.QUARRY_SCHEMA
COMPANIES_DDL = ('CREATE TABLE companies (symbol varchar(8) PRIMARY KEY, name varchar(80), '
                 'sector varchar(40), country varchar(4))')


def companies_rows(files):
    return [json.loads(line) for line in open(files['companies'])]


def insert_companies(cur, files):
    rows = companies_rows(files)
    vals = ', '.join("('%s', '%s', '%s', '%s')" % (r['symbol'], r['name'].replace("'", "''"),
                                                   r['sector'], r['country']) for r in rows)
    cur.execute('INSERT INTO companies VALUES ' + vals)


def load_quarry(ctx):
    """quarry serve on an empty directory; POST /tables, stream the JSONL, B-trees by SQL."""
    d = ctx['dir'] / 'quarry'
    if d.exists():
        shutil.rmtree(d)
    srv = peers.QuarryServer(ctx['quarry_bin'], d / 'data', ctx['dir'] / 'quarry-serve.log')
    srv.data_dir.mkdir(parents=True)
    srv.start()
    t0 = time.perf_counter()
    c = http.client.HTTPConnection('127.0.0.1', srv.http_port, timeout=7200)
    c.request('POST', '/tables', json.dumps({'name': 'news', 'schema': QUARRY_SCHEMA}),
              {'Content-Type': 'application/json'})
    r = c.getresponse()
    body = r.read()
    if r.status != 201:
        raise peers.PeerError('POST /tables: %d %s' % (r.status, body[:200]))

    def chunks():
        with open(ctx['files']['jsonl'], 'rb') as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    return
                yield b
    c.request('POST', '/tables/news/documents?batch=50000', chunks(),
              {'Content-Type': 'application/x-ndjson'}, encode_chunked=True)
    r = c.getresponse()
    ans = json.loads(r.read())
    if r.status != 200 or ans.get('imported') != ctx['n']:
        raise peers.PeerError('ingest: %d %s' % (r.status, str(ans)[:300]))
    t_ingest = time.perf_counter() - t0
    conn = srv.connect()
    cur = conn.cursor()
    for col in ('symbol', 'published', 'views'):
        cur.execute('CREATE INDEX ON news (%s)' % col)
    cur.execute(COMPANIES_DDL)
    insert_companies(cur, ctx['files'])
    cur.execute("SELECT count(*) FROM news WHERE news @@ 'hydro'")
    cur.fetchall()
    total = time.perf_counter() - t0
    conn.close()
    c.close()
    return srv, {'seconds': total, 'ingest_s': t_ingest, 'index_s': total - t_ingest,
                 'how': 'HTTP JSONL upload (batch=50000) + CREATE INDEX x3 (B-trees) over the PG port'}


def load_postgres(ctx):
    d = ctx['dir'] / 'postgres'
    pg = peers.PgCluster(d).init().start()
    c = pg.connect()
    c.cursor().execute('CREATE DATABASE bench')
    c.close()
    pg.dbname = 'bench'
    t0 = time.perf_counter()
    conn = pg.connect('bench')
    cur = conn.cursor()
    cur.execute('CREATE TABLE news (id bigint PRIMARY KEY, title text, body text, symbol text, '
                'published timestamptz, views integer, tsv tsvector GENERATED ALWAYS AS '
                "(to_tsvector('english', title || ' ' || body)) STORED)")
    with open(ctx['files']['csv']) as f:
        cur.copy_expert('COPY news (id, title, body, symbol, published, views) FROM STDIN '
                        'WITH (FORMAT csv)', f)
    t_copy = time.perf_counter() - t0
    cur.execute('CREATE INDEX news_tsv ON news USING gin (tsv)')
    for col in ('symbol', 'published', 'views'):
        cur.execute('CREATE INDEX ON news (%s)' % col)
    cur.execute(COMPANIES_DDL)
    insert_companies(cur, ctx['files'])
    cur.execute('VACUUM ANALYZE news')
    cur.execute('ANALYZE companies')
    total = time.perf_counter() - t0
    conn.close()
    return pg, {'seconds': total, 'ingest_s': t_copy, 'index_s': total - t_copy,
                'how': 'COPY (CSV) with a stored generated tsvector, GIN on it, B-trees on '
                       'symbol/published/views, VACUUM ANALYZE'}


def load_sqlite(ctx):
    import sqlite3
    path = ctx['dir'] / 'sqlite.db'
    if path.exists():
        path.unlink()
    t0 = time.perf_counter()
    db = sqlite3.connect(str(path))
    db.executescript('PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-262144;')
    db.execute('CREATE TABLE news (id INTEGER PRIMARY KEY, title TEXT, body TEXT, symbol TEXT, '
               'published TEXT, views INTEGER)')
    with open(ctx['files']['csv']) as f, db:
        db.executemany('INSERT INTO news VALUES (?, ?, ?, ?, ?, ?)', csv.reader(f))
    t_ingest = time.perf_counter() - t0
    db.executescript("""
        CREATE VIRTUAL TABLE news_fts USING fts5(title, body, content='news', content_rowid='id',
                                                 tokenize='porter unicode61');
        INSERT INTO news_fts(news_fts) VALUES ('rebuild');
        INSERT INTO news_fts(news_fts) VALUES ('optimize');
        CREATE INDEX news_symbol ON news (symbol);
        CREATE INDEX news_published ON news (published);
        CREATE INDEX news_views ON news (views);
        CREATE TABLE companies (symbol TEXT PRIMARY KEY, name TEXT, sector TEXT, country TEXT);
    """)
    with db:
        db.executemany('INSERT INTO companies VALUES (?, ?, ?, ?)',
                       [(r['symbol'], r['name'], r['sector'], r['country'])
                        for r in companies_rows(ctx['files'])])
    db.execute('ANALYZE')
    db.close()
    total = time.perf_counter() - t0
    return path, {'seconds': total, 'ingest_s': t_ingest, 'index_s': total - t_ingest,
                  'how': 'one transaction of inserts into a plain table, then an external-'
                         "content FTS5 index (porter unicode61, 'rebuild' + 'optimize') and "
                         'B-trees on symbol/published/views, ANALYZE'}


def load_xapian(ctx):
    """Cached by corpus hash (bench/work/peers/<sha>/xapian, shared with news_bench.py)."""
    rec = news_bench.build_peer('xapian', ctx['files']['jsonl'],
                                WORK / 'peers' / ctx['files']['sha256'][:16], False)
    return rec['path'], {'seconds': rec['seconds'], 'cached': rec.get('cached', False),
                         'how': 'TermGenerator (Snowball english, STEM_SOME), values for symbol, '
                                'published, views; one commit'}


def load_sphinx(ctx):
    sph = peers.SphinxServer(ctx['dir'] / 'sphinx')
    if sph.root.exists():
        shutil.rmtree(sph.root)
    t0 = time.perf_counter()
    sph.build(ctx['files']['tsv'])
    sph.start(ctx['files']['tsv'])
    total = time.perf_counter() - t0
    return sph, {'seconds': total, 'how': 'indexer from a TSV pipe (stem_en), then searchd'}


def load_duckdb(ctx):
    path = ctx['dir'] / 'duckdb.db'
    for p in (path, Path(str(path) + '.wal')):
        if p.exists():
            p.unlink()
    ans = peers.duckdb_run(path, {'load': {'news': str(ctx['files']['jsonl']),
                                           'companies': str(ctx['files']['companies'])},
                                  'queries': [], 'repeat': 0})
    ctx['versions']['duckdb'] = 'DuckDB ' + ans['version']
    return path, {'seconds': ans['load_s'], 'how': 'CREATE TABLE AS SELECT from read_json '
                                                   '(no text index: DuckDB runs no text query here)'}


def reopen(ctx, e):
    """A handle on what load_<e> left in the run directory, not started yet."""
    d = ctx['dir']
    if e == 'quarry':
        return peers.QuarryServer(ctx['quarry_bin'], d / 'quarry' / 'data', d / 'quarry-serve.log')
    if e == 'postgres':
        return peers.PgCluster(d / 'postgres')
    if e == 'sphinx':
        return peers.SphinxServer(d / 'sphinx')
    if e == 'sqlite':
        return d / 'sqlite.db'
    if e == 'xapian':
        return load_xapian(ctx)[0]
    return d / 'duckdb.db'


# --------------------------------------------------------------------------------------
# Running: answers first, then timing

def time_fn(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
    return {'median_ms': statistics.median(times), 'min_ms': min(times),
            'p90_ms': sorted(times)[int(0.9 * (len(times) - 1))], 'runs': len(times)}


def collect_answers(workloads, live, duck_answers):
    """-> {wid: {engine: summary or {'error': text}}}"""
    answers = {}
    for w in workloads:
        a = answers[w.id] = {}
        for name, peer in live.items():
            fn = peer.prepare(w)
            if fn is None:
                continue
            try:
                a[name] = summarize(w.kind, fn())
            except Exception as e:  # an engine that cannot answer is reported, not fatal
                a[name] = {'error': ('%s: %s' % (type(e).__name__, e)).split('\n')[0][:300]}
                reset_conn(peer)
        if w.id in duck_answers:
            d = duck_answers[w.id]
            a['duckdb'] = ({'error': d['error']} if 'error' in d else summarize(w.kind, d['rows']))
    return answers


def reset_conn(peer):
    """After an error a psycopg2 connection in autocommit stays usable; pymysql too. HTTP
    connections are reopened."""
    if isinstance(peer, HttpPeer):
        peer.conn.close()
        peer.conn = http.client.HTTPConnection('127.0.0.1', peer.port, timeout=600)


def check_answers(workloads, answers):
    """-> list of mismatch descriptions; fills w.reference (the engine everyone is compared to)."""
    problems = []
    prefer = ['postgres', 'sqlite', 'duckdb', 'xapian', 'sphinx', 'quarry', 'quarry-http']
    for w in workloads:
        a = answers[w.id]
        ok = [e for e in prefer if e in a and not (isinstance(a[e], dict) and 'error' in a[e])]
        if not ok:
            continue
        ref = ok[0]
        w.reference = ref
        for e in ok[1:]:
            if a[e] != a[ref]:
                problems.append({'workload': w.id, 'engine': e, 'reference': ref,
                                 'query': w.sql.get(e if e in w.sql else 'quarry'),
                                 'diff': diff_answer(w.kind, a[e], a[ref])})
    return problems


def time_all(workloads, live, repeat, answers, revive=None):
    """Time every answered cell. A cell that fails is recorded as an error (and `revive`,
    when given, restarts a server that went away) instead of ending the run."""
    times = {}
    for w in workloads:
        times[w.id] = {}
        for name in list(live):
            if name not in answers[w.id] or isinstance(answers[w.id][name], dict):
                continue
            try:
                times[w.id][name] = time_fn(live[name].prepare(w), repeat)
            except Exception as e:
                times[w.id][name] = {'error': ('%s: %s' % (type(e).__name__, e))[:300]}
                log('  %s on %s failed: %s' % (name, w.id, times[w.id][name]['error']))
                reset_conn(live[name])
                if revive:
                    revive()
        log('  %-14s %s' % (w.id, '  '.join('%s=%s' % (e, '%.3g' % t['median_ms'] if 'median_ms'
                                                       in t else 'ERROR')
                                           for e, t in times[w.id].items())))
    return times


# --------------------------------------------------------------------------------------
# 8 concurrent clients on ranked search (processes, so no client shares an interpreter lock)

def ranked_queries(seed, k=50):
    """k two-word OR queries of mid-frequency words (df 1-10%), stemming-stable, no stop words."""
    words, cum, total = gen_news.vocabulary(seed)
    out, i = [], 0
    cands = []
    for r, wd in enumerate(words):
        p = (cum[r] - (cum[r - 1] if r else 0.0)) / total
        df = news_bench.doc_fraction(p)
        if 0.01 <= df <= 0.10 and len(wd) >= 5 and wd not in news_bench.STOP_WORDS:
            cands.append(wd)
    stems = news_bench.porter_stems(cands)
    en = news_bench.english_stems(cands) or stems
    # keep words that are their own stem under both stemmers: one right answer everywhere
    cands = [c for c, a, b in zip(cands, stems, en) if a == c and b == c]
    while len(out) < k and i + 1 < len(cands):
        out.append(('or', [cands[i], cands[i + 1]]))
        i += 2
    return out


def client_fn(engine, spec, queries):
    """A function running one ranked query (index i) for `engine` in a fresh process."""
    if engine in ('quarry', 'postgres'):
        import psycopg2
        c = psycopg2.connect(host='127.0.0.1', port=spec['port'], user='bench',
                             dbname=spec['db'])
        c.autocommit = True
        cur = c.cursor()

        def run(i):
            cur.execute(queries[i])
            return cur.fetchall()
        return run
    if engine == 'sphinx':
        import pymysql
        c = pymysql.connect(host='127.0.0.1', port=spec['port'], user='', autocommit=True)
        cur = c.cursor()

        def run(i):
            cur.execute(queries[i])
            return cur.fetchall()
        return run
    if engine == 'sqlite':
        import sqlite3
        db = sqlite3.connect(spec['path'])
        return lambda i: db.execute(queries[i]).fetchall()
    if engine == 'quarry-http':
        hp = HttpPeer(spec['port'])
        return lambda i: hp.request('GET', '/tables/news/search', queries[i])['hits']
    if engine == 'xapian':
        xp = XapianPeer(spec['path'])
        return lambda i: xp.top(queries[i], TOP)
    raise ValueError(engine)


def client_proc(engine, spec, queries, start_at, stop_at, offset, outq):
    try:
        run = client_fn(engine, spec, queries)
        lat, i = [], offset
        while time.time() < start_at:
            run(i % len(queries))
            i += 1
        while True:
            t0 = time.time()
            if t0 >= stop_at:
                break
            run(i % len(queries))
            lat.append((time.time() - t0) * 1000.0)
            i += 1
        outq.put(('ok', lat))
    except Exception as e:
        outq.put(('error', '%s: %s' % (type(e).__name__, e)))


def concurrent(engine, spec, queries, clients=CLIENTS, warm_s=1.0, run_s=6.0):
    ctx = multiprocessing.get_context('fork')
    q = ctx.Queue()
    now = time.time()
    start_at, stop_at = now + 1.0 + warm_s, now + 1.0 + warm_s + run_s
    procs = [ctx.Process(target=client_proc, args=(engine, spec, queries, start_at, stop_at,
                                                   k * 7, q)) for k in range(clients)]
    for p in procs:
        p.start()
    res = [q.get(timeout=run_s + 600) for _ in procs]
    for p in procs:
        p.join()
    errs = [r[1] for r in res if r[0] == 'error']
    if errs:
        return {'error': errs[0]}
    lat = sorted(x for r in res for x in r[1])
    if not lat:
        return {'error': 'no query finished'}
    return {'qps': len(lat) / run_s, 'p50_ms': lat[len(lat) // 2],
            'p99_ms': lat[min(len(lat) - 1, int(0.99 * len(lat)))], 'queries': len(lat),
            'clients': clients, 'seconds': run_s}


def concurrency_specs(qs, live_info):
    """Per engine: (spec, per-query objects, answer checker input)."""
    out = {}
    for e, info in live_info.items():
        if e == 'quarry':
            out[e] = (info, ["SELECT id FROM news WHERE news @@ '%s' ORDER BY score() DESC LIMIT %d"
                             % (text_dialects(q)['quarry'], TOP) for q in qs])
        elif e == 'postgres':
            out[e] = (info, ["SELECT id FROM news, to_tsquery('english', '%s') q WHERE tsv @@ q "
                             "ORDER BY ts_rank_cd(tsv, q) DESC LIMIT %d"
                             % (text_dialects(q)['tsquery'], TOP) for q in qs])
        elif e == 'sqlite':
            out[e] = (info, ["SELECT rowid FROM news_fts WHERE news_fts MATCH '%s' ORDER BY rank "
                             "LIMIT %d" % (text_dialects(q)['fts5'], TOP) for q in qs])
        elif e == 'sphinx':
            out[e] = (info, ["SELECT id FROM news WHERE MATCH('%s') LIMIT %d"
                             % (text_dialects(q)['sphinx'], TOP) for q in qs])
        elif e == 'quarry-http':
            out[e] = (info, [{'q': text_dialects(q)['quarry'], 'limit': TOP, 'total': 'false',
                              'doc': 'false'} for q in qs])
        elif e == 'xapian':
            out[e] = (info, list(qs))
    return out


# --------------------------------------------------------------------------------------
# Searches while ingesting (Quarry over its PG port and PostgreSQL, same client and batches)

def writer_proc(engine, spec, rows, start_at, stop_at, outq):
    import psycopg2
    from psycopg2.extras import execute_values
    try:
        c = psycopg2.connect(host='127.0.0.1', port=spec['port'], user='bench', dbname=spec['db'])
        c.autocommit = True
        cur = c.cursor()
        cols = 'id, title, body, symbol, published, views'
        n, i = 0, 0
        while time.time() < start_at:
            time.sleep(0.01)
        while time.time() < stop_at and i < len(rows):
            batch = rows[i:i + 500]
            execute_values(cur, 'INSERT INTO news (%s) VALUES %%s' % cols, batch, page_size=500)
            n += len(batch)
            i += 500
        outq.put(('ok', n, time.time() - start_at))
    except Exception as e:
        outq.put(('error', '%s: %s' % (type(e).__name__, e), 0))


def mixed(engine, spec, queries, rows, run_s=6.0):
    ctx = multiprocessing.get_context('fork')
    q, wq = ctx.Queue(), ctx.Queue()
    now = time.time()
    start_at, stop_at = now + 1.5, now + 1.5 + run_s
    reader = ctx.Process(target=client_proc, args=(engine, spec, queries, start_at, stop_at, 0, q))
    writer = ctx.Process(target=writer_proc, args=(engine, spec, rows, start_at, stop_at, wq))
    reader.start()
    writer.start()
    r = q.get(timeout=run_s + 600)
    wr = wq.get(timeout=run_s + 600)
    reader.join()
    writer.join()
    if r[0] == 'error' or wr[0] == 'error':
        return {'error': r[1] if r[0] == 'error' else wr[1]}
    lat = sorted(r[1])
    if not lat:
        return {'error': 'no search finished within %.0f s while ingesting (%d rows written)'
                         % (run_s, wr[1])}
    return {'reader_p50_ms': lat[len(lat) // 2], 'reader_p99_ms': lat[int(0.99 * (len(lat) - 1))],
            'reader_qps': len(lat) / run_s, 'rows_written': wr[1],
            'rows_per_s': wr[1] / max(wr[2], 1e-9), 'seconds': run_s}


def mixed_rows(files, n, count):
    """`count` articles copied from the start of the corpus under new ids after n."""
    rows = []
    with open(files['jsonl']) as f:
        for line in f:
            d = json.loads(line)
            rows.append((n + d['id'], d['title'], d['body'], d['symbol'], d['published'],
                         d['views']))
            if len(rows) >= count:
                break
    return rows


# --------------------------------------------------------------------------------------
# The planner against each forced access path

PATHS = ['auto', 'text', 'btree', 'scan', 'check', 'full']


def planner_table(conn, workloads, repeat):
    cur = conn.cursor()
    out = {}
    for w in workloads:
        if not w.planner or 'quarry' not in w.sql:
            continue
        sql = w.sql['quarry']
        row = {'paths': {}}
        cur.execute('SET quarry.access_path = auto')
        cur.execute('EXPLAIN ' + sql)
        plan = '\n'.join(r[0] for r in cur.fetchall())
        chosen = [p for p in ('text', 'btree', 'scan', 'check', 'full') if 'path=%s ' % p in plan]
        row['chosen'] = chosen[0] if chosen else '?'
        row['plan'] = plan
        ref = None
        for p in PATHS:
            cur.execute("SET quarry.access_path = '%s'" % p)

            def run(sql=sql):
                cur.execute(sql)
                return cur.fetchall()
            try:
                ans = summarize(w.kind, run())
            except Exception as e:
                row['paths'][p] = {'error': str(e).split('\n')[0][:200]}
                continue
            if ref is None:
                ref = ans
            if ans != ref:
                row['paths'][p] = {'error': 'different answer: ' + diff_answer(w.kind, ans, ref)}
                continue
            row['paths'][p] = time_fn(run, repeat)
        cur.execute('SET quarry.access_path = auto')
        ok = {p: t['median_ms'] for p, t in row['paths'].items() if 'median_ms' in t and p != 'auto'}
        if ok and 'median_ms' in row['paths'].get('auto', {}):
            best = min(ok, key=ok.get)
            row['best'] = best
            row['auto_over_best'] = row['paths']['auto']['median_ms'] / ok[best]
        out[w.id] = row
        log('  planner %-12s chosen=%s %s' % (w.id, row['chosen'], '  '.join(
            '%s=%s' % (p, '%.3g' % t['median_ms'] if 'median_ms' in t else 'ERR')
            for p, t in row['paths'].items())))
    return out


# --------------------------------------------------------------------------------------

def quarry_commit():
    """The commit the Quarry binary was built from: $QUARRY_COMMIT when the binary was built
    elsewhere (bench/run builds a clean export of HEAD), else this tree's HEAD (+dirty)."""
    return os.environ.get('QUARRY_COMMIT') or engines.git_commit()


def cpu_model():
    return news_bench.cpu_model()


def run_size(args, n, engine_names):
    files = corpus_files(n)
    words, notes = news_bench.pick_words(1)
    workloads = make_workloads(n, words, files)
    rundir = WORK / ('suite-%d' % n)
    rundir.mkdir(parents=True, exist_ok=True)
    ctx = {'n': n, 'files': files, 'dir': rundir, 'quarry_bin': args.quarry_bin, 'versions': {}}
    res = {'date': datetime.date.today().isoformat(), 'n': n, 'repeat': args.repeat,
           'git_commit': quarry_commit(), 'started': datetime.datetime.utcnow().isoformat(
               timespec='seconds') + 'Z',
           'corpus': {'path': engines.show_path(files['jsonl']), 'bytes': files['bytes'],
                      'sha256': files['sha256'], 'seed': 1},
           'machine': {'cpu': cpu_model(), 'cores': os.cpu_count(),
                       'loadavg_start': os.getloadavg(),
                       'mem_gb': round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
                                       / 2 ** 30, 1)},
           'words': words, 'notes': list(notes), 'build': {}, 'errors': {}, 'footprint': {},
           'versions': ctx['versions']}
    servers, live, info, samplers = {}, {}, {}, {}
    duck_path = None
    try:
        # ---- load every engine (or reopen what an earlier run of this size loaded)
        loaded_path = rundir / 'loaded.json'
        loaded, reused = None, {}
        if args.reuse and loaded_path.exists():
            loaded = json.loads(loaded_path.read_text())
            if loaded.get('sha256') == files['sha256'] and loaded.get('n') == n:
                reused = {e: r for e, r in loaded['build'].items()
                          if e not in args.reload and e in engine_names}
        if not args.reuse and loaded_path.exists():
            loaded_path.unlink()
        loaders = {'quarry': load_quarry, 'postgres': load_postgres, 'sqlite': load_sqlite,
                   'xapian': load_xapian, 'sphinx': load_sphinx, 'duckdb': load_duckdb}
        for e in engine_names:
            if e == 'quarry-http':
                continue
            if e == 'sphinx' and not peers.SphinxServer.available():
                res['errors'][e] = 'searchd/indexer not installed (Debian sphinxsearch)'
                continue
            if e == 'postgres' and not peers.PgCluster.available():
                res['errors'][e] = 'PostgreSQL 15 binaries not found'
                continue
            if e == 'duckdb':
                why = peers.ensure_duckdb()
                if why:
                    res['errors'][e] = why
                    continue
            if e == 'xapian' and n > args.xapian_max:
                res['errors'][e] = ('not built at %d articles: its index build is too slow on '
                                    'this machine (--xapian-max %d)' % (n, args.xapian_max))
                continue
            if e in reused:
                handle, rec = reopen(ctx, e), dict(reused[e], reused=loaded['loaded_at'])
                res['build'][e] = rec
                if e in ('quarry', 'postgres', 'sphinx'):
                    servers[e] = handle
                    res['footprint'][e] = {'after_load_bytes':
                                           loaded['after_load'].get(e, {}).get('after_load_bytes')}
                elif e in ('sqlite', 'xapian'):
                    servers[e] = handle
                else:
                    duck_path = handle
                log('[%d] reusing %s loaded at %s' % (n, e, loaded['loaded_at']))
                continue
            log('[%d] loading %s...' % (n, e))
            try:
                handle, rec = loaders[e](ctx)
            except Exception as ex:
                res['errors'][e] = 'load failed: %s' % str(ex).split('\n')[0][:300]
                log('  ' + res['errors'][e])
                traceback.print_exc()
                continue
            rec['mb_per_s'] = files['bytes'] / 1e6 / rec['seconds'] if rec['seconds'] else None
            rec['rows_per_s'] = n / rec['seconds'] if rec['seconds'] else None
            res['build'][e] = rec
            log('  %s loaded in %.1f s' % (e, rec['seconds']))
            if e in ('quarry', 'postgres', 'sphinx'):
                servers[e] = handle
                res['footprint'][e] = {'after_load_bytes': peers.pss_bytes(handle.pid)}
            elif e == 'sqlite' or e == 'xapian':
                servers[e] = handle
            else:
                duck_path = handle
            if not reused:
                # record each engine as soon as it is loaded: a run stopped
                # part-way (a 2,000,000-article load takes hours on 2 cores)
                # resumes with --reuse instead of loading everything again
                loaded_path.write_text(json.dumps({
                    'n': n, 'sha256': files['sha256'], 'build': res['build'],
                    'after_load': res['footprint'], 'loadavg': os.getloadavg(),
                    'partial': True,
                    'loaded_at': datetime.datetime.utcnow().isoformat(timespec='seconds') + 'Z'},
                    default=str))
        if not reused:
            loaded_path.write_text(json.dumps({
                'n': n, 'sha256': files['sha256'], 'build': res['build'],
                'after_load': res['footprint'], 'loadavg': os.getloadavg(),
                'loaded_at': datetime.datetime.utcnow().isoformat(timespec='seconds') + 'Z'},
                default=str))
        else:
            fresh = [e for e in res['build'] if e not in reused]
            for e in fresh:
                loaded['build'][e] = res['build'][e]
                loaded['after_load'][e] = res['footprint'].get(e, {})
            loaded_path.write_text(json.dumps(loaded, default=str))
            res['notes'].append('%s loaded by an earlier run at %s (load average then %.1f); '
                                'their load times and after-load memory are from that run%s'
                                % (', '.join(sorted(reused)), loaded['loaded_at'],
                                   loaded['loadavg'][0],
                                   '; %s loaded afresh in this run' % ', '.join(fresh)
                                   if fresh else ''))
        versions = ctx['versions']
        versions['sqlite'] = engines.Fts5Engine.version()
        if 'xapian' in servers:
            versions['xapian'] = engines.XapianEngine.version()
        if 'postgres' in servers:
            versions['postgres'] = peers.PgCluster.version()
        if 'sphinx' in servers:
            versions['sphinx'] = peers.SphinxServer.version()
        versions['quarry'] = 'Quarry %s' % (quarry_commit() or '?')

        # ---- restart the servers: idle memory, cold process caches for everyone
        for e in ('quarry', 'postgres', 'sphinx'):
            if e not in servers:
                continue
            s = servers[e]
            s.stop()
            if e == 'sphinx':
                s.start(files['tsv'])
            else:
                s.start()
            time.sleep(2)
            res['footprint'][e]['idle_bytes'] = peers.pss_bytes(s.pid)
            samplers[e] = peers.MemSampler(s.pid)
        # disk
        if 'quarry' in servers:
            res['footprint']['quarry']['disk_bytes'] = engines.dir_bytes(servers['quarry'].data_dir)
        if 'postgres' in servers:
            c = servers['postgres'].connect('bench')
            cur = c.cursor()
            cur.execute("SELECT pg_database_size('bench')")
            res['footprint']['postgres']['disk_bytes'] = cur.fetchone()[0]
            res['footprint']['postgres']['datadir_bytes'] = engines.dir_bytes(servers['postgres'].data)
            c.close()
        if 'sqlite' in servers:
            res['footprint']['sqlite'] = {'disk_bytes': engines.dir_bytes(servers['sqlite'])}
        if 'xapian' in servers:
            res['footprint']['xapian'] = {'disk_bytes': engines.dir_bytes(servers['xapian'])}
        if 'sphinx' in servers:
            res['footprint']['sphinx']['disk_bytes'] = sum(
                p.stat().st_size for p in (servers['sphinx'].root).glob('news.*'))
        if duck_path:
            res['footprint']['duckdb'] = {'disk_bytes': engines.dir_bytes(duck_path)}

        # ---- connect
        if 'quarry' in servers:
            live['quarry'] = SqlPeer('quarry', servers['quarry'].connect)
            info['quarry'] = {'port': servers['quarry'].pg_port, 'db': 'quarry'}
            if 'quarry-http' in engine_names:
                live['quarry-http'] = HttpPeer(servers['quarry'].http_port)
                info['quarry-http'] = {'port': servers['quarry'].http_port}
        if 'postgres' in servers:
            live['postgres'] = SqlPeer('postgres', lambda: servers['postgres'].connect('bench'))
            info['postgres'] = {'port': servers['postgres'].port, 'db': 'bench'}
        if 'sqlite' in servers:
            import sqlite3
            live['sqlite'] = SqlPeer('sqlite', lambda: sqlite3.connect(str(servers['sqlite'])))
            info['sqlite'] = {'path': str(servers['sqlite'])}
        if 'xapian' in servers:
            live['xapian'] = XapianPeer(servers['xapian'])
            info['xapian'] = {'path': str(servers['xapian'])}
        if 'sphinx' in servers:
            live['sphinx'] = SphinxPeer(servers['sphinx'].connect, files['sym_no'])
            info['sphinx'] = {'port': servers['sphinx'].port}

        # ---- answers first
        log('[%d] answers...' % n)
        duck_q = [{'id': w.id, 'sql': w.sql['duckdb']} for w in workloads if 'duckdb' in w.sql]
        duck_answers = {}
        if duck_path:
            dj = peers.duckdb_run(duck_path, {'load': None, 'queries': duck_q, 'repeat': 0})
            duck_answers = dj['queries']
            ctx['versions']['duckdb'] = 'DuckDB ' + dj['version']
        answers = collect_answers(workloads, live, duck_answers)
        problems = check_answers(workloads, answers)
        res['workloads'] = [{'id': w.id, 'group': w.group, 'label': w.label, 'kind': w.kind,
                             'sql': w.sql, 'note': w.note,
                             'reference': getattr(w, 'reference', None),
                             'answers': {e: (a if isinstance(a, dict) else show_answer(w.kind, a))
                                         for e, a in answers[w.id].items()}}
                            for w in workloads]
        res['mismatches'] = problems
        for w in workloads:
            log('  %-14s %s' % (w.id, '  '.join(
                '%s=%s' % (e, ('ERROR ' + a['error'][:80]) if isinstance(a, dict) else
                           show_answer(w.kind, a)) for e, a in answers[w.id].items())))
        if problems:
            log('\n!!! %d ANSWERS DIFFER:' % len(problems))
            for p in problems:
                log('  %s on %s (vs %s): %s\n    %s' % (p['engine'], p['workload'], p['reference'],
                                                     p['diff'], p['query']))
            if not args.keep_going:
                res['stopped'] = 'answers differ: nothing was timed'
                return res
        bad = {(p['workload'], p['engine']) for p in problems}
        if args.load_only:
            res['stopped'] = 'load and answers only (--load-only)'
            return res

        # ---- timing
        log('[%d] timing (median of %d after a warm-up)...' % (n, args.repeat))
        def revive():
            s = servers.get('quarry')
            if s is None or s.proc is None or s.proc.poll() is None:
                return
            log('  quarry serve exited (%s); restarting it' % s.log_tail())
            res['notes'].append('quarry serve was stopped from outside during the timing '
                                '(%s) and restarted; the cell running then is an error'
                                % s.log_tail())
            s.proc = None
            s.start()
            live['quarry'].close()
            live['quarry'] = SqlPeer('quarry', s.connect)
            info['quarry'] = {'port': s.pg_port, 'db': 'quarry'}
            if 'quarry-http' in live:
                live['quarry-http'].close()
                live['quarry-http'] = HttpPeer(s.http_port)
                info['quarry-http'] = {'port': s.http_port}
            samplers['quarry'].stop()
            samplers['quarry'] = peers.MemSampler(s.pid)

        times = time_all(workloads, live, args.repeat,
                         {w.id: {e: a for e, a in answers[w.id].items()
                                 if (w.id, e) not in bad} for w in workloads}, revive)
        if duck_path:
            dt = peers.duckdb_run(duck_path, {'load': None, 'queries': duck_q,
                                              'repeat': args.repeat})['queries']
            for wid, d in dt.items():
                if 'median_ms' in d and 'duckdb' in answers[wid] and (wid, 'duckdb') not in bad \
                        and not isinstance(answers[wid]['duckdb'], dict):
                    times[wid]['duckdb'] = {'median_ms': d['median_ms'], 'min_ms': d['min_ms'],
                                            'runs': args.repeat}
        for wr in res['workloads']:
            wr['times'] = times.get(wr['id'], {})

        # ---- planner
        if 'quarry' in live:
            log('[%d] planner vs forced paths...' % n)
            res['planner'] = planner_table(live['quarry'].conn, workloads, args.repeat)

        # ---- concurrency
        log('[%d] %d concurrent clients, ranked search...' % (n, CLIENTS))
        qs = ranked_queries(1)
        res['concurrency'] = {'queries': [' OR '.join(q[1]) for q in qs], 'engines': {}}
        for e, (spec, qq) in concurrency_specs(qs, info).items():
            # answers first: every engine returns TOP rows for every query (row counts only)
            run = client_fn(e, spec, qq)
            lens = [len(run(i)) for i in range(len(qq))]
            if any(x != TOP for x in lens):
                res['concurrency']['engines'][e] = {'error': 'returned %s rows' % sorted(set(lens))}
                continue
            res['concurrency']['engines'][e] = concurrent(e, spec, qq)
            log('  %s: %s' % (e, res['concurrency']['engines'][e]))

        # ---- footprint peaks
        for e, s in samplers.items():
            res['footprint'][e]['peak_bytes'] = s.peak

        # ---- searches while ingesting (last: it adds documents)
        if args.mixed:
            log('[%d] searches while ingesting...' % n)
            rows = mixed_rows(files, n, 50000)
            res['mixed'] = {}
            for e in ('quarry', 'postgres'):
                if e in info:
                    spec, qq = concurrency_specs(qs, {e: info[e]})[e]
                    try:
                        res['mixed'][e] = mixed(e, spec, qq, rows)
                        log('  %s: %s' % (e, res['mixed'][e]))
                    finally:
                        # leave the table as loaded, so that --reuse finds the same answers
                        cur = live[e].conn.cursor()
                        cur.execute('DELETE FROM news WHERE id > %d' % n)
                        cur.execute('SELECT count(*) FROM news')
                        left = cur.fetchone()[0]
                        if left != n:
                            res['mixed'].setdefault(e, {})['cleanup'] = \
                                'left %d rows instead of %d' % (left, n)
            for e, s in samplers.items():
                res['footprint'][e]['peak_bytes'] = s.peak
        return res
    except Exception as ex:  # keep what was measured: the result file is still written
        traceback.print_exc()
        res['crashed'] = '%s: %s' % (type(ex).__name__, str(ex)[:300])
        return res
    finally:
        for s in samplers.values():
            s.stop()
        for p in live.values():
            p.close()
        for e in ('quarry', 'postgres', 'sphinx'):
            if e in servers:
                try:
                    servers[e].stop()
                except Exception as ex:
                    log('stopping %s: %s' % (e, ex))
        res['finished'] = datetime.datetime.utcnow().isoformat(timespec='seconds') + 'Z'
        res['machine']['loadavg_end'] = os.getloadavg()


def main():
    engines.ensure_system_python()
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--n', type=int, default=200000, help='articles (default 200000)')
    ap.add_argument('--repeat', type=int, default=11, help='timed runs per query (min 11)')
    ap.add_argument('--engines', default=','.join(ALL_ENGINES))
    ap.add_argument('--keep-going', action='store_true',
                    help='time even when answers differ (the mismatching cells are not timed)')
    ap.add_argument('--no-mixed', dest='mixed', action='store_false')
    ap.add_argument('--reload', default='', type=lambda v: [x for x in v.split(',') if x],
                    help='with --reuse: engines to load afresh anyway (comma list)')
    ap.add_argument('--load-only', action='store_true',
                    help='load and compare answers, time nothing (for a later --reuse)')
    ap.add_argument('--reuse', action='store_true',
                    help='reopen the engines an earlier run of this size loaded (its load '
                         'times are reported, marked) instead of loading them again')
    ap.add_argument('--xapian-max', type=int, default=200000,
                    help='largest corpus Xapian is built for (default 200000)')
    ap.add_argument('--out', help='result file (default bench/results/<date>-<n>.json)')
    args = ap.parse_args()
    args.repeat = max(11, args.repeat)
    build = os.environ.get('BUILD', 'build')
    args.quarry_bin = Path(os.environ.get('QUARRY_BIN') or engines.REPO / build / 'quarry')
    if not os.access(args.quarry_bin, os.X_OK):
        ap.error('%s not found: run make first' % args.quarry_bin)
    names = args.engines.split(',')
    if any(e not in ALL_ENGINES for e in names):
        ap.error('--engines takes a comma list of ' + ', '.join(ALL_ENGINES))
    res = run_size(args, args.n, names)
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.out:
        out = Path(args.out)
    elif args.load_only:
        out = WORK / ('suite-%d' % args.n) / 'load-only.json'
    else:
        out = RESULTS / ('%s-%d.json' % (res['date'], args.n))
    out.write_text(json.dumps(res, indent=1, default=str) + '\n')
    log('wrote %s' % engines.show_path(out))
    if res.get('stopped'):
        log('STOPPED: ' + res['stopped'])
        return 1 if res.get('mismatches') or not args.load_only else 0
    return 1 if res.get('mismatches') else 0


if __name__ == '__main__':
    sys.exit(main())
