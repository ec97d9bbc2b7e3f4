#!/usr/bin/python3
"""Speed benchmark on a generated news corpus: Quarry against SQLite FTS5 and Xapian.

  bench/news_bench.py [--n 200000 | --quick] [--peers fts5,xapian] [--repeat 11]

1. Generates bench/work/news-N.jsonl with bench/gen_news.py if it is absent.
2. Builds each engine's index and times the build until the index answers (wall time and
   MB/s of JSON). Peer indexes are cached under bench/work/peers/<corpus sha256>/, so a rerun
   on the same corpus reuses them and reports the time of the original build. Quarry is
   imported afresh every run, with `quarry import`.
3. Runs the queries. Peers open their index once, warm up with one run, and take the median
   (and minimum) of --repeat runs through their Python bindings. Quarry runs them with
   `quarry bench --repeat` (one process, index opened once).
4. Compares the answers before it reports any time. Counts must be equal, and the id sets of
   'ids' queries too. Ranked top-20 lists are compared on their length only, because the
   engines score differently. A mismatch is printed loudly and marks its row.
5. Prints a Markdown table of medians and of Quarry's time over the best peer's, and writes
   it to bench/results/<date>-news-<n>.md, with everything else in the matching .json.

Words are picked from the generator's Zipf distribution: common (in ~89% of articles), mid
(~5%), rare (~0.05%), and a second word (~20%) for the two-word queries. Only words whose
stemming class (the dictionary words that share their stem) is the same under FTS5's porter
stemmer and Snowball english (Xapian, and Quarry's libstemmer) are picked, so that every
engine has the same right answer. Stop words are never picked.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engines  # noqa: E402
import gen_news  # noqa: E402
from engines import EngineError  # noqa: E402

WORK = engines.REPO / 'bench' / 'work'
RESULTS = engines.REPO / 'bench' / 'results'
PEERS = ('fts5', 'xapian')
TOP_LIMIT = 20
DOC_TOKENS = gen_news.TITLE_WORDS + gen_news.BODY_WORDS
TARGETS = {'common': 0.89, 'second': 0.20, 'mid': 0.05, 'rare': 0.0005}
PREFIX_TARGET = 0.25
QUARRY_SCHEMA = {'primary_key': 'id', 'fields': [
    {'name': 'title', 'type': 'text', 'language': 'english'},
    {'name': 'body', 'type': 'text', 'language': 'english'},
    {'name': 'symbol', 'type': 'keyword'},
    {'name': 'published', 'type': 'timestamp'},
    {'name': 'views', 'type': 'int'}]}
# Snowball's English stop list: an engine may drop these, so they are never picked.
STOP_WORDS = set('''i me my myself we our ours ourselves you your yours yourself yourselves he
him his himself she her hers herself it its itself they them their theirs themselves what which
who whom this that these those am is are was were be been being have has had having do does did
doing would should could ought a an the and but if or because as until while of at by for with
about against between into through during before after above below to from up down in out on off
over under again further then once here there when where why how all any both each few more most
other some such no nor not only own same so than too very s t can will just don now'''.split())


# --------------------------------------------------------------------------------------
# Picking the words

def porter_stems(words):
    """FTS5's own porter stems of words (its tokenizer run through fts5vocab)."""
    import sqlite3
    db = sqlite3.connect(':memory:')
    db.execute("CREATE VIRTUAL TABLE v USING fts5(w, tokenize='porter unicode61')")
    db.executemany('INSERT INTO v(rowid, w) VALUES (?, ?)', enumerate(words, 1))
    db.execute("CREATE VIRTUAL TABLE vi USING fts5vocab(v, 'instance')")
    stems = [None] * len(words)
    for term, doc in db.execute('SELECT term, doc FROM vi'):
        stems[doc - 1] = term
    db.close()
    return stems


def english_stems(words):
    """Snowball english stems (Xapian's copy of libstemmer), or None without xapian."""
    try:
        import xapian
    except ImportError:
        return None
    st = xapian.Stem('english')
    out = []
    for w in words:
        s = st(w)
        out.append(s.decode('utf-8') if isinstance(s, bytes) else s)
    return out


def doc_fraction(p):
    """Expected share of articles holding at least one of the words of total probability p."""
    return 1.0 - (1.0 - p) ** DOC_TOKENS


def pick_words(seed):
    """-> {'common': {word, expected_df}, 'second', 'mid', 'rare', 'prefix'} and notes."""
    words, cum, total = gen_news.vocabulary(seed)
    prob = [(cum[i] - (cum[i - 1] if i else 0.0)) / total for i in range(len(words))]
    stemmers = [s for s in (porter_stems(words), english_stems(words)) if s is not None]
    notes = []
    if len(stemmers) < 2:
        notes.append('xapian is not importable, so words were checked against the porter '
                     'stemmer only; english-stemming engines may disagree on counts')
    classes = []
    for st in stemmers:
        by_stem = {}
        for i, s in enumerate(st):
            by_stem.setdefault(s, []).append(i)
        classes.append([tuple(by_stem[s]) for s in st])
    picked, used = {}, set()
    for name, target in TARGETS.items():
        best = None
        for i, w in enumerate(words):
            cls = classes[0][i]
            if (w in STOP_WORDS or len(w) < 4 or w in used
                    or any(c[i] != cls for c in classes[1:])):
                continue
            df = doc_fraction(sum(prob[j] for j in cls))
            err = abs(df - target) / target
            if best is None or err < best[0]:
                best = (err, w, df, len(cls))
        _, w, df, n_forms = best
        used.add(w)
        picked[name] = {'word': w, 'expected_df': round(df, 6), 'forms': n_forms}
    picked['prefix'] = pick_prefix(words, prob, stemmers)
    return picked, notes


def pick_prefix(words, prob, stemmers):
    """A 3-letter prefix that selects the same words before and after stemming, under
    every stemmer, and is its own stem; the one whose expected df is nearest PREFIX_TARGET
    among those with at least 50 words."""
    members, unstable = {}, set()
    for i, w in enumerate(words):
        p = w[:3]
        members.setdefault(p, []).append(i)
        for st in stemmers:
            if st[i][:3] != p:
                unstable.add(p)       # a word whose stem leaves (or enters) the prefix
                unstable.add(st[i][:3])
    stem_of = [dict(zip(words, st)) for st in stemmers]
    best = None
    for p, idx in members.items():
        if len(p) < 3 or p in unstable or p in STOP_WORDS or len(idx) < 50:
            continue
        if any(s.get(p, p) != p for s in stem_of):
            continue
        df = doc_fraction(sum(prob[i] for i in idx))
        err = abs(df - PREFIX_TARGET)
        if best is None or err < best[0]:
            best = (err, p, df, len(idx))
    _, p, df, n = best
    return {'word': p, 'expected_df': round(df, 6), 'forms': n}


def make_queries(picked):
    w = {k: v['word'] for k, v in picked.items()}
    two = [w['second'], w['mid']]
    return [
        dict(qid='count_common', label='count: common word "%s"' % w['common'],
             mode='count', query=('term', w['common'])),
        dict(qid='count_mid', label='count: mid word "%s"' % w['mid'],
             mode='count', query=('term', w['mid'])),
        dict(qid='count_rare', label='count: rare word "%s"' % w['rare'],
             mode='count', query=('term', w['rare'])),
        dict(qid='count_and', label='count: "%s" AND "%s"' % tuple(two),
             mode='count', query=('and', two)),
        dict(qid='count_prefix', label='count: prefix "%s*"' % w['prefix'],
             mode='count', query=('prefix', w['prefix'])),
        dict(qid='count_phrase', label='count: phrase "hydro power"',
             mode='count', query=('phrase', list(gen_news.PHRASE))),
        dict(qid='top_common', label='top-%d: common word' % TOP_LIMIT,
             mode='top', limit=TOP_LIMIT, query=('term', w['common'])),
        dict(qid='top_mid', label='top-%d: mid word' % TOP_LIMIT,
             mode='top', limit=TOP_LIMIT, query=('term', w['mid'])),
        dict(qid='top_two', label='top-%d: "%s" OR "%s"' % ((TOP_LIMIT,) + tuple(two)),
             mode='top', limit=TOP_LIMIT, query=('or', two)),
        dict(qid='ids_common', label='all ids: common word',
             mode='ids', query=('term', w['common'])),
    ]


# --------------------------------------------------------------------------------------
# Corpus and builds

def corpus_sha256(path):
    """sha256 of the corpus, remembered beside it (keyed by size and mtime)."""
    st = path.stat()
    memo = path.with_name(path.name + '.sha256')
    stamp = '%d %d' % (st.st_size, int(st.st_mtime))
    if memo.exists():
        saved = memo.read_text().split('\n')
        if len(saved) >= 2 and saved[0] == stamp:
            return saved[1]
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 22), b''):
            h.update(block)
    memo.write_text('%s\n%s\n' % (stamp, h.hexdigest()))
    return h.hexdigest()


def stream_docs(path):
    """(parsed doc, raw line) pairs, one at a time."""
    with engines.open_text(path) as f:
        for line in f:
            if line.strip():
                yield json.loads(line), line.rstrip('\n')


def build_fts5(corpus, db_path):
    if db_path.exists():
        db_path.unlink()
    t0 = time.perf_counter()
    e = engines.Fts5Engine(db_path)
    e.create(['title', 'body'], ['symbol', 'published', 'views'], int_ids=True)
    e.add(d for d, _ in stream_docs(corpus))
    t1 = time.perf_counter()
    e.optimize()
    t2 = time.perf_counter()
    e.close()
    return {'seconds': t2 - t0, 'load_s': t1 - t0, 'optimize_s': t2 - t1}


def build_xapian(corpus, db_dir):
    if db_dir.exists():
        shutil.rmtree(db_dir)
    t0 = time.perf_counter()
    e = engines.XapianEngine(db_dir, writable=True)
    e.create(['title', 'body'], int_ids=True)
    e.add(dict(d, _raw=line) for d, line in stream_docs(corpus))
    e.close()
    return {'seconds': time.perf_counter() - t0}


def build_peer(name, corpus, cache_dir, rebuild):
    """Build (or reuse) a peer index; -> build record with seconds, disk_bytes, cached."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    record_path = cache_dir / 'build.json'
    records = json.loads(record_path.read_text()) if record_path.exists() else {}
    target = cache_dir / ('fts5.db' if name == 'fts5' else 'xapian')
    if not rebuild and name in records and target.exists():
        rec = dict(records[name], cached=True)
    else:
        print('  building %s index (%s)...' % (name, engines.show_path(target)),
              file=sys.stderr, flush=True)
        rec = build_fts5(corpus, target) if name == 'fts5' else build_xapian(corpus, target)
        rec['built'] = datetime.datetime.now().isoformat(timespec='seconds')
        records[name] = rec
        record_path.write_text(json.dumps(records, indent=1) + '\n')
        rec = dict(rec, cached=False)
    rec['disk_bytes'] = engines.dir_bytes(target)
    rec['path'] = target
    return rec


def open_peer(name, path):
    if name == 'fts5':
        return engines.Fts5Engine(path)
    e = engines.XapianEngine(path, writable=False)
    e.create(['title', 'body'], int_ids=True)
    return e


def run_peer(engine, queries, repeat):
    out = {}
    for q in queries:
        if q['mode'] == 'count':
            fn = lambda q=q: engine.count(q['query'])
        elif q['mode'] == 'top':
            fn = lambda q=q: [i for i, _ in engine.top(q['query'], q['limit'])]
        else:
            fn = lambda q=q: engine.ids(q['query'])
        answer, med, low = engines.time_calls(fn, repeat)
        out[q['qid']] = {'answer': answer, 'median_ms': med, 'min_ms': low}
    return out


def run_quarry(corpus, n, queries, repeat):
    """Import into bench/work/quarry-<n>/ and run `quarry bench`; -> (build, answers)."""
    q = engines.QuarryEngine(WORK / ('quarry-%d' % n))
    seconds = q.import_jsonl('news', corpus, QUARRY_SCHEMA)
    build = {'seconds': seconds, 'disk_bytes': engines.dir_bytes(q.data_dir),
             'cached': False, 'path': q.data_dir}
    raw = q.bench('news', queries, repeat)
    out = {}
    for item in queries:
        a = raw[item['qid']]
        if item['mode'] == 'count':
            answer = a.get('count')
        else:
            answer = [int(i) if str(i).isdigit() else i for i in a.get('ids', [])]
        out[item['qid']] = {'answer': answer, 'median_ms': a.get('median_ms'),
                            'min_ms': a.get('min_ms'), 'reported_count': a.get('count')}
    return build, out


# --------------------------------------------------------------------------------------
# Comparing and reporting

def summarize(mode, answer):
    if mode == 'count':
        return answer
    if mode == 'top':
        return len(answer)
    return len(answer)


def compare(queries, runs):
    """Fill q['answers'], q['mismatch'] (text or None) for each query."""
    order = [e for e in ('fts5', 'xapian', 'quarry') if e in runs]
    for q in queries:
        got = {e: runs[e][q['qid']]['answer'] for e in order}
        q['answers'] = {e: summarize(q['mode'], a) for e, a in got.items()}
        q['mismatch'] = None
        if not got:
            continue
        ref_name = order[0]
        ref = got[ref_name]
        problems = []
        for e in order[1:]:
            a = got[e]
            if q['mode'] == 'count' and a != ref:
                problems.append('%s counts %s, %s counts %s' % (e, a, ref_name, ref))
            elif q['mode'] == 'top' and len(a) != len(ref):
                problems.append('%s returns %d hits, %s %d' % (e, len(a), ref_name, len(ref)))
            elif q['mode'] == 'ids' and set(a) != set(ref):
                sa, sr = set(a), set(ref)
                problems.append('%s has %d ids, %s %d (%d only in %s, %d only in %s)'
                                % (e, len(sa), ref_name, len(sr), len(sa - sr), e,
                                   len(sr - sa), ref_name))
        if problems:
            q['mismatch'] = '; '.join(problems)


def fmt_ms(t):
    if t is None:
        return '—'
    return '%.3f' % t if t < 1 else '%.2f' % t if t < 10 else '%.1f' % t if t < 100 else '%.0f' % t


def ratio(quarry, peers):
    vals = [p for p in peers if p]
    if quarry is None or not vals:
        return '—'
    return '%.2f×' % (quarry / min(vals))


def markdown(res, engine_names):
    peers = [e for e in engine_names if e != 'quarry']
    n = res['n']
    lines = ['# News benchmark: %d articles, %s' % (n, res['date']), '',
             'Corpus `%s`: %.1f MB of JSON, sha256 %s…, seed %d (bench/gen_news.py). '
             'Machine: %s, %d cores, load average %s at the start. %s. Quarry: `%s` at %s.'
             % (res['corpus']['path'], res['corpus']['bytes'] / 1e6, res['corpus']['sha256'][:12],
                res['corpus']['seed'], res['machine']['cpu'], res['machine']['cores'],
                res['machine']['loadavg'], ', '.join(res['versions'].get(e, e) for e in peers),
                res['quarry_binary'], res['git_commit']),
             '']
    if res['quarry_binary'] != 'build/quarry' and 'quarry' in engine_names:
        lines += ['**The quarry column comes from `%s`, not build/quarry.**' % res['quarry_binary'],
                  '']
    lines += ['Medians of %d runs after one warm-up, in milliseconds. Ratio = Quarry / best peer '
              '(below 1 means Quarry is faster).' % res['repeat'], '']
    head = '| query | answer |' + ''.join(' %s ms |' % e for e in engine_names) + \
        ' Quarry / best peer |'
    lines += [head, '|' + '---|' * (len(engine_names) + 3)]
    for q in res['queries']:
        ans = q['answers'].get('fts5', next(iter(q['answers'].values()), '—'))
        if q['mode'] == 'top':
            ans = '%s hits' % ans
        elif q['mode'] == 'ids':
            ans = '%s ids' % ans
        if q['mismatch']:
            ans = '**MISMATCH** %s' % ans
        t = {e: q['times'].get(e, {}).get('median_ms') for e in engine_names}
        lines.append('| %s | %s |' % (q['label'], ans) + ''.join(' %s |' % fmt_ms(t[e])
                                                                for e in engine_names)
                     + ' %s |' % ratio(t.get('quarry'), [t[e] for e in peers]))
    b = res['build']
    row = '| load + index build (s) | %d docs |' % n
    for e in engine_names:
        r = b.get(e)
        row += (' %.1f s, %.1f MB/s%s |' % (r['seconds'], res['corpus']['bytes'] / 1e6 / r['seconds'],
                                          ' (cached)' if r.get('cached') else '')
                if r else ' — |')
    row += ' %s |' % ratio(b.get('quarry', {}).get('seconds'),
                           [b[e]['seconds'] for e in peers if e in b])
    lines.append(row)
    row = '| disk footprint (MB) | |'
    for e in engine_names:
        row += ' %.1f |' % (b[e]['disk_bytes'] / 1e6) if e in b else ' — |'
    row += ' %s |' % ratio(b.get('quarry', {}).get('disk_bytes'),
                           [b[e]['disk_bytes'] for e in peers if e in b])
    lines.append(row)
    lines += ['', 'Notes:',
              '- Answers were compared before timing was reported. Counts must be equal, and so '
              'must the id sets of "all ids". Ranked top-%d lists are compared on their length '
              'only (scores differ between engines).' % TOP_LIMIT,
              '- Words (expected share of articles): ' + ', '.join(
                  '%s "%s" %.2f%%' % (k, v['word'], 100 * v['expected_df'])
                  for k, v in res['words'].items()) + '. Two-word top-%d queries use OR.'
              % TOP_LIMIT,
              '- Peers are timed through their Python bindings (sqlite3, xapian), so their times '
              'include binding overhead. FTS5 returns all ids with group_concat(rowid); Xapian '
              'walks an MSet in Python, which dominates its "all ids" time. Quarry times come '
              'from `quarry bench`, inside its own process.',
              '- FTS5 build = inserts in one transaction + \'optimize\'. Xapian build = '
              'TermGenerator (STEM_SOME) + commit, with the JSON line stored as document data. '
              'Peer builds are cached by corpus hash: a "(cached)" time is the original build\'s.']
    for e, why in res['errors'].items():
        lines.append('- **%s was not measured**: %s' % (e, why))
    for q in res['queries']:
        if q['mismatch']:
            lines.append('- **MISMATCH in %s**: %s' % (q['qid'], q['mismatch']))
    for note in res['notes']:
        lines.append('- ' + note)
    return '\n'.join(lines) + '\n'


def main():
    engines.ensure_system_python()
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--n', type=int, default=200000, help='articles (default 200000)')
    ap.add_argument('--quick', action='store_true', help='20,000 articles')
    ap.add_argument('--seed', type=int, default=1, help='corpus seed (default 1)')
    ap.add_argument('--peers', default=','.join(PEERS), help='comma list from fts5,xapian, '
                    'or "none" (default fts5,xapian)')
    ap.add_argument('--no-quarry', action='store_true', help='measure the peers only')
    ap.add_argument('--repeat', type=int, default=11, help='timed runs per query (min 11)')
    ap.add_argument('--rebuild', action='store_true', help='rebuild cached peer indexes')
    args = ap.parse_args()
    n = 20000 if args.quick else args.n
    peers = [] if args.peers == 'none' else args.peers.split(',')
    if any(p not in PEERS for p in peers):
        ap.error('--peers takes fts5, xapian or none')
    repeat = max(args.repeat, 11)
    engine_names = ([] if args.no_quarry else ['quarry']) + peers

    WORK.mkdir(parents=True, exist_ok=True)
    corpus = WORK / ('news-%d%s.jsonl' % (n, '' if args.seed == 1 else '-s%d' % args.seed))
    if not corpus.exists():
        print('generating %s...' % engines.show_path(corpus), file=sys.stderr, flush=True)
        gen_news.generate(n, corpus, args.seed)
    sha = corpus_sha256(corpus)
    corpus_bytes = corpus.stat().st_size
    picked, notes = pick_words(args.seed)
    queries = make_queries(picked)

    loadavg = '%.1f' % os.getloadavg()[0]
    builds, runs, errors, versions = {}, {}, {}, {}
    for p in peers:
        try:
            versions[p] = (engines.Fts5Engine if p == 'fts5' else engines.XapianEngine).version()
            builds[p] = build_peer(p, corpus, WORK / 'peers' / sha[:16], args.rebuild)
            print('  timing %s...' % p, file=sys.stderr, flush=True)
            engine = open_peer(p, builds[p]['path'])
            runs[p] = run_peer(engine, queries, repeat)
            engine.close()
        except ImportError as e:
            errors[p] = 'python module missing (%s); run make deps' % e
    if not args.no_quarry:
        print('  importing into quarry and timing...', file=sys.stderr, flush=True)
        try:
            builds['quarry'], runs['quarry'] = run_quarry(corpus, n, queries, repeat)
            versions['quarry'] = engines.QuarryEngine('.').version()
        except EngineError as e:
            errors['quarry'] = str(e)
            builds.pop('quarry', None)

    compare(queries, runs)
    print('\nAnswers (compared before any time is reported):')
    for q in queries:
        print('  %-4s %-42s %s%s' % ('BAD' if q['mismatch'] else 'ok', q['label'],
                                     '  '.join('%s=%s' % kv for kv in q['answers'].items()),
                                     '' if not q['mismatch'] else '\n       MISMATCH: ' + q['mismatch']))
    n_bad = sum(1 for q in queries if q['mismatch'])
    if n_bad:
        print('\n!!! %d QUERIES GAVE DIFFERENT ANSWERS: their times compare different work !!!\n'
              % n_bad)

    for q in queries:
        q['times'] = {e: {k: runs[e][q['qid']][k] for k in ('median_ms', 'min_ms')} for e in runs}
        q['query'] = list(q['query'])
    for b in builds.values():
        b['path'] = engines.show_path(b['path'])
        b['mb_per_s'] = corpus_bytes / 1e6 / b['seconds'] if b['seconds'] else None
    date = datetime.date.today().isoformat()
    res = {'date': date, 'git_commit': engines.git_commit(), 'n': n, 'repeat': repeat,
           'corpus': {'path': engines.show_path(corpus), 'bytes': corpus_bytes, 'sha256': sha,
                      'seed': args.seed},
           'machine': {'cpu': cpu_model(), 'cores': os.cpu_count(), 'loadavg': loadavg,
                       'python': platform.python_version()},
           'quarry_binary': engines.show_path(engines.quarry_binary()),
           'versions': versions, 'words': picked, 'build': builds, 'queries': queries,
           'errors': errors, 'notes': notes}
    md = markdown(res, [e for e in engine_names if e in runs or e == 'quarry'])
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = RESULTS / ('%s-news-%d' % (date, n))
    stem.with_suffix('.json').write_text(json.dumps(res, indent=1, default=str) + '\n')
    stem.with_suffix('.md').write_text(md)
    print(md)
    print('wrote %s.{json,md}' % engines.show_path(stem))
    return 1 if n_bad else 0


def cpu_model():
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


if __name__ == '__main__':
    sys.exit(main())
