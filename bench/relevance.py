#!/usr/bin/python3
"""Relevance of Quarry against its peers on the judged test collections.

For each collection found on disk: index title+body (English stemming), run every judged
query (lowercased, punctuation replaced by spaces, OR semantics, top 1000) and score the
ranking with nDCG@10, MAP (over the top 1000) and Recall@100. Engines: Quarry (through its
CLI), SQLite FTS5 and Xapian (see bench/engines.py for their settings). Quarry searches as
the HTTP search box does by default: typo tolerance "auto" and the last word completed as
typed (--exact measures exact words only).

Metrics follow trec_eval's rules. A run is sorted by score, descending, with ties broken by
docno, descending (trec_eval's comp_sim_docno). Only relevance > 0 counts as relevant. The
mean runs over every query that has a relevant document in the qrels, and a query without
results scores 0 (trec_eval -c). nDCG@10 takes its ideal ranking from the qrels and uses
gain 2^rel - 1 (trec_eval's default gain is rel itself; the two agree on binary judgements
and differ on cranfield's 1-4 and nfcorpus's 1-2 grades).

  bench/relevance.py                 all engines; prints a table, writes bench/results/relevance.json
  bench/relevance.py --check         Quarry vs FTS5 (same run): per-collection verdicts
  bench/relevance.py --selftest      metric code on hand-computed examples
  bench/relevance.py --paired        Quarry with the title weighted 2: BM25F against the
                                     weighted sum of per-field BM25, query by query
"""

import argparse
import datetime
import json
import math
import random
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engines  # noqa: E402
from engines import EngineError  # noqa: E402

# (name, folder, where): 'shared' = ../shared/corpora (research-only, never committed),
# 'repo' = corpora/ in this repository.
COLLECTIONS = [
    ('cranfield', 'cranfield', 'shared'),
    ('cisi', 'cisi', 'shared'),
    ('cacm', 'cacm', 'shared'),
    ('med', 'med', 'shared'),
    ('adi', 'adi', 'shared'),
    ('lisa', 'lisa', 'shared'),
    ('npl', 'npl', 'shared'),
    ('time', 'time', 'shared'),
    ('scifact', 'beir-scifact', 'repo'),
    ('nfcorpus', 'nfcorpus-test', 'shared'),
]
ALL_ENGINES = ('quarry', 'fts5', 'xapian')
TOP_K = 1000
CHECK_MARGIN = 0.005          # --check: Quarry nDCG@10 >= FTS5 nDCG@10 - CHECK_MARGIN
METRICS = ('ndcg@10', 'map', 'recall@100')
QUARRY_SCHEMA = {'primary_key': 'id', 'fields': [
    {'name': 'title', 'type': 'text', 'language': 'english'},
    {'name': 'body', 'type': 'text', 'language': 'english'}]}
SEARCH_BOX = ('--typo', 'auto', '--prefix')   # the HTTP search's defaults
PAIRED_RUNS = (  # --paired: (label, title weight, scoring)
    ('unweighted', 1, 'bm25f'), ('bm25f title*2', 2, 'bm25f'), ('sum title*2', 2, 'sum'))
PAIRED_SAMPLES = 10000  # sign flips of the paired randomization test


# --------------------------------------------------------------------------------------
# Metrics (trec_eval rules; see the module comment)

def trec_order(run):
    """[(docno, score)] -> docnos ranked as trec_eval ranks them: score desc, docno desc.
    A docno listed twice keeps its first (best) place."""
    ranked = sorted(run, key=lambda p: p[0], reverse=True)      # docno desc ...
    ranked.sort(key=lambda p: p[1], reverse=True)               # ... then stable by score
    seen, out = set(), []
    for docno, _ in ranked:
        if docno not in seen:
            seen.add(docno)
            out.append(docno)
    return out[:TOP_K]


def ndcg_at(ranked, rels, k=10):
    gain = lambda r: 2.0 ** r - 1.0
    dcg = sum(gain(rels.get(d, 0)) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted((r for r in rels.values() if r > 0), reverse=True)[:k]
    idcg = sum(gain(r) / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def average_precision(ranked, rels):
    n_rel = sum(1 for r in rels.values() if r > 0)
    hits, total = 0, 0.0
    for i, d in enumerate(ranked):
        if rels.get(d, 0) > 0:
            hits += 1
            total += hits / (i + 1)
    return total / n_rel if n_rel else 0.0


def recall_at(ranked, rels, k=100):
    n_rel = sum(1 for r in rels.values() if r > 0)
    found = sum(1 for d in ranked[:k] if rels.get(d, 0) > 0)
    return found / n_rel if n_rel else 0.0


def per_query_ndcg(runs, qrels):
    """{qid: nDCG@10} over the queries with a relevant document (for paired tests)."""
    return {q: ndcg_at(trec_order(runs.get(q, [])), rels) for q, rels in qrels.items()
            if any(r > 0 for r in rels.values())}


def paired_p(diffs, samples=PAIRED_SAMPLES, seed=1):
    """Two-sided paired randomization test: the share of random sign flips of the
    per-query differences whose mean is at least as far from 0 as the observed one."""
    if not diffs:
        return 1.0
    rnd = random.Random(seed)
    seen = abs(sum(diffs))
    hits = sum(abs(sum(d if rnd.random() < 0.5 else -d for d in diffs)) >= seen - 1e-12
               for _ in range(samples))
    return (hits + 1) / (samples + 1)


def evaluate(runs, qrels):
    """runs {qid: [(docno, score)]}, qrels {qid: {docno: rel}} -> mean of each metric over
    the queries with at least one relevant document (a missing run counts as empty)."""
    judged = [q for q, rels in qrels.items() if any(r > 0 for r in rels.values())]
    sums = dict.fromkeys(METRICS, 0.0)
    for q in judged:
        ranked = trec_order(runs.get(q, []))
        sums['ndcg@10'] += ndcg_at(ranked, qrels[q])
        sums['map'] += average_precision(ranked, qrels[q])
        sums['recall@100'] += recall_at(ranked, qrels[q])
    return {m: (s / len(judged) if judged else 0.0) for m, s in sums.items()}


def selftest():
    """Check the metrics on examples worked out by hand (the arithmetic is in comments)."""
    failures = []

    def near(name, got, want):
        ok = abs(got - want) < 1e-4
        print('%s %-52s got %.6f want %.6f' % ('ok  ' if ok else 'FAIL', name, got, want))
        if not ok:
            failures.append(name)

    # Binary: ranking d1 d2 d3; relevant d1, d3, d5.
    #   AP   = (1/1 + 2/3) / 3 = 0.555556
    #   DCG  = 1/log2(2) + 1/log2(4) = 1.5
    #   IDCG = 1 + 1/log2(3) + 1/log2(4) = 2.130930   nDCG@10 = 0.703918
    #   R@100 = 2/3
    rels = {'d1': 1, 'd3': 1, 'd5': 1}
    ranked = ['d1', 'd2', 'd3']
    near('binary AP', average_precision(ranked, rels), 0.555556)
    near('binary nDCG@10', ndcg_at(ranked, rels), 0.703918)
    near('binary R@100', recall_at(ranked, rels), 2 / 3)

    # Graded: ranking b a; rel a=2, b=1. Gains 2^2-1 = 3 and 2^1-1 = 1.
    #   DCG  = 1/1 + 3/log2(3) = 2.892789
    #   IDCG = 3/1 + 1/log2(3) = 3.630930             nDCG@10 = 0.796708
    near('graded nDCG@10 (gain 2^rel-1)', ndcg_at(['b', 'a'], {'a': 2, 'b': 1}), 0.796708)

    # Cut at 10: the only relevant doc at rank 11 adds nothing to nDCG@10; AP = 1/11.
    ranked = ['n%d' % i for i in range(10)] + ['r']
    near('nDCG@10 ignores rank 11', ndcg_at(ranked, {'r': 1}), 0.0)
    near('AP with the relevant doc at rank 11', average_precision(ranked, {'r': 1}), 1 / 11)

    # Recall@100: relevant at ranks 100 and 101 (2 relevant) -> 1/2.
    ranked = ['n%d' % i for i in range(99)] + ['r1', 'r2']
    near('R@100 counts rank 100, not 101', recall_at(ranked, {'r1': 1, 'r2': 1}), 0.5)

    # Ties: equal scores are ranked by docno descending (strcmp), as trec_eval does:
    #   run (a 1.0) (c 2.0) (b 1.0) -> c b a; with relevant a: AP = 1/3.
    order = trec_order([('a', 1.0), ('c', 2.0), ('b', 1.0)])
    near('tie order c,b,a', float(order == ['c', 'b', 'a']), 1.0)
    near('AP after tie-breaking', average_precision(order, {'a': 1}), 1 / 3)

    # Relevant docs never retrieved still count in the denominators, and queries with no
    # run count as 0 in the mean: q1 perfect (AP 1), q2 empty (0) -> MAP 0.5.
    m = evaluate({'q1': [('x', 1.0)]}, {'q1': {'x': 1}, 'q2': {'y': 1}})
    near('MAP over judged queries, empty run = 0', m['map'], 0.5)
    near('nDCG mean with an empty run', m['ndcg@10'], 0.5)

    # Judgements with relevance 0 are not relevant and do not enter the ideal ranking.
    near('rel 0 is not relevant', ndcg_at(['z', 'x'], {'z': 0, 'x': 1}), 1 / math.log2(3))

    print('%d passed, %d failed' % (12 - len(failures), len(failures)))
    return not failures


# --------------------------------------------------------------------------------------
# Collections

def collection_dir(folder, where):
    base = engines.REPO / 'corpora' if where == 'repo' else engines.shared_corpora_dir()
    return base / folder


def load_collection(path):
    """-> (docs [{id, title, body}], queries {qid: text}, qrels {qid: {docno: rel}})."""
    docs_file = next((path / n for n in ('docs.jsonl', 'docs.jsonl.gz') if (path / n).exists()),
                     None)
    if docs_file is None:
        raise FileNotFoundError('no docs.jsonl[.gz] in %s' % engines.show_path(path))
    docs = [{'id': str(d['id']), 'title': d.get('title') or '', 'body': d.get('body') or ''}
            for d in engines.read_jsonl(docs_file)]
    queries = {str(q['id']): q['text'] for q in engines.read_jsonl(path / 'queries.jsonl')}
    qrels = {}
    with open(path / 'qrels.tsv', encoding='utf-8') as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and int(parts[2]) > 0:
                qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return docs, queries, qrels


def query_words(text):
    """Lowercase, punctuation becomes a space, split on white space."""
    return re.sub(r'[^\w\s]', ' ', text.lower()).split()


# --------------------------------------------------------------------------------------
# Running the engines

def run_python_engine(engine, docs, items):
    engine.create(['title', 'body'], int_ids=False)
    engine.add(docs)
    return {qid: engine.top(q, TOP_K) for qid, q in items}


def run_quarry(name, docs, items, workdir, flags=SEARCH_BOX, title_weight=1):
    q = engines.QuarryEngine(Path(workdir) / ('quarry-' + name))
    docs_path = Path(workdir) / (name + '.docs.jsonl')
    with open(docs_path, 'w', encoding='utf-8') as f:
        for d in docs:
            f.write(json.dumps(d) + '\n')
    schema = json.loads(json.dumps(QUARRY_SCHEMA))
    schema['fields'][0]['weight'] = title_weight
    q.import_jsonl(name, docs_path, schema)
    return q.search_batch(name, items, TOP_K, flags)


def run_engine(engine_name, coll_name, docs, items, workdir, flags=SEARCH_BOX):
    """-> {qid: [(docno, score)]}; raises EngineError with the reason on failure."""
    if engine_name == 'quarry':
        return run_quarry(coll_name, docs, items, workdir, flags)
    try:
        if engine_name == 'fts5':
            engine = engines.Fts5Engine(':memory:')
        else:
            engine = engines.XapianEngine(None)
    except ImportError as e:
        raise EngineError('%s unavailable: %s' % (engine_name, e))
    try:
        return run_python_engine(engine, docs, items)
    finally:
        engine.close()


def engine_versions(names):
    out = {}
    for n in names:
        try:
            out[n] = {'fts5': engines.Fts5Engine.version, 'xapian': engines.XapianEngine.version,
                      'quarry': lambda: engines.QuarryEngine('.').version()}[n]()
        except ImportError as e:
            out[n] = 'unavailable: %s' % e
    return out


def measure(selected, engine_names, workdir, progress=True, flags=SEARCH_BOX):
    """Run every selected collection through every engine; returns the results dict."""
    results = {}
    for name, folder, where in selected:
        path = collection_dir(folder, where)
        entry = {'path': engines.show_path(path), 'engines': {}}
        results[name] = entry
        if not path.is_dir():
            entry['skipped'] = 'not found at %s' % engines.show_path(path)
            entry['research_only'] = where == 'shared'
            continue
        docs, queries, qrels = load_collection(path)
        judged = [q for q in qrels if q in queries]
        items = [(q, ('or', query_words(queries[q]))) for q in judged]
        entry.update(docs=len(docs), queries=len(judged))
        for e in engine_names:
            t0 = time.perf_counter()
            try:
                runs = run_engine(e, name, docs, items, workdir, flags)
            except EngineError as err:
                entry['engines'][e] = {'error': str(err)}
                continue
            m = evaluate(runs, {q: qrels[q] for q in judged})
            m['seconds'] = round(time.perf_counter() - t0, 2)
            entry['engines'][e] = m
        if progress:
            print('  %-10s %s' % (name, '  '.join(
                '%s %s' % (e, ('%.3f' % r['ndcg@10']) if 'ndcg@10' in r else 'error')
                for e, r in entry['engines'].items())), file=sys.stderr, flush=True)
    return results


def paired(selected, workdir, flags):
    """--paired: Quarry per PAIRED_RUNS on every collection; prints nDCG@10 of each run
    and, for BM25F against the weighted sum (both with the title weighted 2), the mean
    per-query difference, wins and losses, and the randomization test's p."""
    labels = [r[0] for r in PAIRED_RUNS]
    print('%-10s %5s | %s | %8s %9s %7s' % ('collection', 'qs', ' | '.join(
        '%-13s' % l for l in labels), 'f-s', 'won/lost', 'p'))
    totals = dict.fromkeys(labels, 0.0)
    done = 0
    for name, folder, where in selected:
        path = collection_dir(folder, where)
        if not path.is_dir():
            print('%-10s not found at %s' % (name, engines.show_path(path)))
            continue
        docs, queries, qrels = load_collection(path)
        judged = [q for q in qrels if q in queries]
        items = [(q, ('or', query_words(queries[q]))) for q in judged]
        per = {}
        for label, weight, scoring in PAIRED_RUNS:
            try:
                runs = run_quarry(name, docs, items, workdir,
                                  tuple(flags) + ('--scoring', scoring), weight)
            except EngineError as err:
                print('%-10s %s: %s' % (name, label, err))
                break
            per[label] = per_query_ndcg(runs, {q: qrels[q] for q in judged})
        if len(per) < len(labels):
            continue
        qs = sorted(per[labels[0]])
        mean = {l: sum(per[l].values()) / len(qs) for l in labels}
        diffs = [per[labels[1]][q] - per[labels[2]][q] for q in qs]
        won = sum(d > 1e-9 for d in diffs)
        lost = sum(d < -1e-9 for d in diffs)
        print('%-10s %5d | %s | %+8.3f %4d/%-4d %7.4f' % (
            name, len(qs), ' | '.join('%-13.3f' % mean[l] for l in labels),
            sum(diffs) / len(qs), won, lost, paired_p(diffs)), flush=True)
        for l in labels:
            totals[l] += mean[l]
        done += 1
    if done:
        print('%-10s %5s | %s' % ('mean', '', ' | '.join(
            '%-13.3f' % (totals[l] / done) for l in labels)))
    return 0


def means(results, engine_names):
    """Mean of each metric per engine over the collections that engine answered."""
    out = {}
    for e in engine_names:
        done = [r['engines'][e] for r in results.values()
                if 'ndcg@10' in r.get('engines', {}).get(e, {})]
        if done:
            out[e] = {m: sum(d[m] for d in done) / len(done) for m in METRICS}
            out[e]['collections'] = len(done)
    return out


def print_table(results, engine_names, mean):
    head1 = '%-10s %6s %5s' % ('', '', '')
    head2 = '%-10s %6s %5s' % ('collection', 'docs', 'qs')
    for e in engine_names:
        head1 += ' | %-22s' % e
        head2 += ' | %-7s %-6s %-7s' % ('nDCG@10', 'MAP', 'R@100')
    print(head1)
    print(head2)
    print('-' * len(head2))
    errors = []
    for name, r in results.items():
        if 'skipped' in r:
            print('%-10s skipped: %s' % (name, r['skipped']))
            continue
        line = '%-10s %6d %5d' % (name, r['docs'], r['queries'])
        for e in engine_names:
            m = r['engines'].get(e, {})
            if 'ndcg@10' in m:
                line += ' | %7.3f %6.3f %7.3f' % (m['ndcg@10'], m['map'], m['recall@100'])
            else:
                line += ' | %-22s' % 'error (see below)'
                errors.append('%s/%s: %s' % (name, e, m.get('error')))
        print(line)
    line = '%-10s %6s %5s' % ('mean', '', '')
    for e in engine_names:
        m = mean.get(e)
        line += (' | %7.3f %6.3f %7.3f' % (m['ndcg@10'], m['map'], m['recall@100'])
                 if m else ' | %-22s' % '-')
    print('-' * len(head2))
    print(line)
    counts = {e: m['collections'] for e, m in mean.items()}
    if len(set(counts.values())) > 1 or len(counts) < len(engine_names):
        print('(means are over different sets: %s collections)' % ', '.join(
            '%s %d' % (e, counts.get(e, 0)) for e in engine_names))
    for e in errors:
        print('error: ' + e)


def check(results):
    """--check verdicts; returns the number of failures."""
    passed = failed = absent = 0
    for name, r in results.items():
        # research-only collections are never committed, so a fresh checkout
        # lacks them by design: not a skip.  A committed one must be there.
        if 'skipped' in r and r.get('research_only'):
            print('n/a  %-10s research-only collection, %s' % (name, r['skipped']))
            absent += 1
            continue
        if 'skipped' in r:
            print('FAIL %-10s committed collection %s' % (name, r['skipped']))
            failed += 1
            continue
        q, f = r['engines'].get('quarry', {}), r['engines'].get('fts5', {})
        if 'ndcg@10' not in f:
            print('FAIL %-10s fts5 gave no baseline: %s' % (name, f.get('error')))
            failed += 1
        elif 'ndcg@10' not in q:
            print('FAIL %-10s quarry: %s' % (name, q.get('error')))
            failed += 1
        elif q['ndcg@10'] >= f['ndcg@10'] - CHECK_MARGIN:
            print('PASS %-10s quarry nDCG@10 %.3f >= fts5 %.3f - %.3f'
                  % (name, q['ndcg@10'], f['ndcg@10'], CHECK_MARGIN))
            passed += 1
        else:
            print('FAIL %-10s quarry nDCG@10 %.3f < fts5 %.3f - %.3f'
                  % (name, q['ndcg@10'], f['ndcg@10'], CHECK_MARGIN))
            failed += 1
    # and on average over the collections both answered, without the margin
    both = [r['engines'] for r in results.values()
            if all('ndcg@10' in r.get('engines', {}).get(e, {}) for e in ('quarry', 'fts5'))]
    if both:
        mq = sum(e['quarry']['ndcg@10'] for e in both) / len(both)
        mf = sum(e['fts5']['ndcg@10'] for e in both) / len(both)
        ok = mq >= mf
        print('%s mean       quarry nDCG@10 %.3f %s fts5 %.3f over %d collections'
              % ('PASS' if ok else 'FAIL', mq, '>=' if ok else '<', mf, len(both)))
        passed += ok
        failed += not ok
    print('%d passed, %d failed, %d research-only collections not here' % (passed, failed, absent))
    return failed


def main():
    engines.ensure_system_python()
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--check', action='store_true',
                    help='exit non-zero unless Quarry nDCG@10 >= FTS5 - %.3f everywhere'
                    % CHECK_MARGIN)
    ap.add_argument('--selftest', action='store_true', help='test the metric code and exit')
    ap.add_argument('--exact', action='store_true',
                    help='Quarry without typo tolerance and completion of the last word')
    ap.add_argument('--paired', action='store_true',
                    help='Quarry only: BM25F against the weighted sum, title weighted 2')
    ap.add_argument('--engines', help='comma list from %s (default: all; --check: quarry,fts5)'
                    % ','.join(ALL_ENGINES))
    ap.add_argument('--collections', help='comma list (default: all): %s'
                    % ','.join(c[0] for c in COLLECTIONS))
    ap.add_argument('--out', help='results JSON (default: bench/results/relevance.json; '
                    '--check writes none unless given)')
    args = ap.parse_args()

    if args.selftest:
        return 0 if selftest() else 1
    names = (args.engines.split(',') if args.engines
             else ['quarry', 'fts5'] if args.check else list(ALL_ENGINES))
    if args.check and not {'quarry', 'fts5'} <= set(names):
        ap.error('--check needs the quarry and fts5 engines')
    for n in names:
        if n not in ALL_ENGINES:
            ap.error('unknown engine %r' % n)
    wanted = args.collections.split(',') if args.collections else None
    selected = [c for c in COLLECTIONS if wanted is None or c[0] in wanted]
    if wanted and len(selected) != len(wanted):
        ap.error('unknown collection in %r' % args.collections)

    flags = () if args.exact else SEARCH_BOX
    with tempfile.TemporaryDirectory(prefix='quarry-relevance-') as workdir:
        if args.paired:
            return paired(selected, workdir, flags)
        results = measure(selected, names, workdir, progress=not args.check, flags=flags)
    mean = means(results, names)

    out = args.out or (None if args.check else engines.REPO / 'bench/results/relevance.json')
    if out:
        doc = {'generated': datetime.datetime.now().astimezone().isoformat(timespec='seconds'),
               'git_commit': engines.git_commit(),
               'versions': engine_versions(names),
               'settings': {'top_k': TOP_K, 'fields': 'title+body', 'semantics': 'OR',
                            'quarry_flags': ' '.join(flags),
                            'query_prep': 'lowercase, punctuation -> space',
                            'ndcg_gain': '2^rel-1', 'ties': 'score desc, docno desc'},
               'collections': results, 'mean': mean}
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(doc, indent=1) + '\n')
    if args.check:
        return 1 if check(results) else 0
    print_table(results, names, mean)
    if out:
        print('wrote %s' % engines.show_path(out))
    return 0


if __name__ == '__main__':
    sys.exit(main())
