#!/usr/bin/python3
"""Deterministic news-like corpus for the speed benchmark (bench/news_bench.py).

  bench/gen_news.py --n 200000 --out bench/work/news-200000.jsonl [--seed 1] [--gzip]

Writes N articles, one JSON object a line:
  {"id": 1, "title": <8 words>, "body": <250 words>, "symbol": "ABCD",
   "published": "2023-04-05T06:07:08Z", "views": 1234}
and, beside it, <out stem>.companies.jsonl: one line per ticker
  {"symbol": "ABCD", "name": "Foo Bar Holdings", "sector": "Energy", "country": "US"}
for later join benchmarks.

Words: the lowercase ASCII words of /usr/share/dict/words (Debian wamerican) with at least two
letters. Possessives ("'s"), proper nouns (capitalised) and accented words are left out, as is
"hydro". The words are ranked by a seeded shuffle and drawn from a Zipf distribution (P(rank r) proportional to r^-ZIPF_S) for titles and bodies alike.
Planted: "hydro power" replaces two adjacent body words in about PHRASE_RATE of the articles.
The word list, and with it the corpus, depends on the wamerican version. Same seed, same
word list: the same bytes. The first k articles of a larger corpus are the corpus of size k.

Symbols: 500 tickers (a fixed seed, whatever --seed is) with Zipf(1.0) popularity.
Published: uniform over the 730 days from 2023-01-01T00:00:00Z. Views: log-normal.
"""

import argparse
import datetime
import gzip
import itertools
import json
import random
import re
import sys
import time

DICT_PATH = '/usr/share/dict/words'
ZIPF_S = 1.05
TITLE_WORDS = 8
BODY_WORDS = 250
PHRASE = ('hydro', 'power')
PHRASE_RATE = 0.005
N_SYMBOLS = 500
SYMBOL_SEED = 500
START = datetime.datetime(2023, 1, 1, tzinfo=datetime.timezone.utc)
SPAN_SECONDS = 730 * 86400
CHUNK_DOCS = 2000      # constant, so that a corpus is a prefix of every larger one
SECTORS = ['Energy', 'Materials', 'Industrials', 'Consumer Discretionary', 'Consumer Staples',
           'Health Care', 'Financials', 'Information Technology', 'Communication Services',
           'Utilities', 'Real Estate']
COUNTRIES = [('US', 50), ('GB', 8), ('DE', 6), ('JP', 7), ('FR', 5), ('CA', 5), ('CN', 6),
             ('CH', 3), ('NL', 2), ('KR', 2), ('AU', 2), ('IN', 2), ('SE', 1), ('BR', 1)]
SUFFIXES = ['Inc', 'Corp', 'Holdings', 'Group', 'Ltd', 'Systems', 'Industries', 'Partners']


def vocabulary(seed):
    """-> (words ranked most frequent first, cumulative Zipf weights, total weight).

    Probability of the word at rank r (1-based): r^-ZIPF_S / total."""
    with open(DICT_PATH, encoding='utf-8') as f:
        words = sorted({w for w in (line.strip() for line in f)
                        if re.fullmatch(r'[a-z]{2,}', w) and w != PHRASE[0]})
    random.Random(seed).shuffle(words)
    cum = list(itertools.accumulate(r ** -ZIPF_S for r in range(1, len(words) + 1)))
    return words, cum, cum[-1]


def symbols():
    """The fixed 500 tickers, most popular first, with cumulative Zipf(1.0) weights."""
    rng = random.Random(SYMBOL_SEED)
    seen, out = set(), []
    while len(out) < N_SYMBOLS:
        s = ''.join(rng.choice('ABCDEFGHIJKLMNOPQRSTUVWXYZ') for _ in range(rng.choice((2, 3, 3, 4, 4, 4))))
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out, list(itertools.accumulate(1.0 / r for r in range(1, N_SYMBOLS + 1)))


def companies(words):
    rng = random.Random(SYMBOL_SEED + 1)
    tickers, _ = symbols()
    countries, weights = zip(*COUNTRIES)
    for s in tickers:
        name = ' '.join(rng.choice(words[200:5000]).capitalize() for _ in range(2))
        yield {'symbol': s, 'name': '%s %s' % (name, rng.choice(SUFFIXES)),
               'sector': rng.choice(SECTORS), 'country': rng.choices(countries, weights)[0]}


def generate(n, out, seed=1, gz=False, progress=True):
    """Write n articles to `out` and the companies beside it; returns bytes written."""
    words, cum, _ = vocabulary(seed)
    tickers, sym_cum = symbols()
    rng = random.Random(seed)
    opener = gzip.open if gz else open
    per_doc = TITLE_WORDS + BODY_WORDS
    written = 0
    t0 = time.time()
    with opener(out, 'wt', encoding='utf-8') as f:
        for start in range(0, n, CHUNK_DOCS):
            k = min(CHUNK_DOCS, n - start)
            drawn = rng.choices(words, cum_weights=cum, k=CHUNK_DOCS * per_doc)
            syms = rng.choices(tickers, cum_weights=sym_cum, k=CHUNK_DOCS)
            lines = []
            for j in range(k):
                base = j * per_doc
                title = ' '.join(drawn[base:base + TITLE_WORDS])
                body_words = drawn[base + TITLE_WORDS:base + per_doc]
                if rng.random() < PHRASE_RATE:
                    at = rng.randrange(BODY_WORDS - 1)
                    body_words[at:at + 2] = PHRASE
                stamp = START + datetime.timedelta(seconds=rng.randrange(SPAN_SECONDS))
                views = int(rng.lognormvariate(6.0, 1.3))
                # Every string is [a-z ] or [A-Z]: no JSON escaping needed.
                lines.append('{"id": %d, "title": "%s", "body": "%s", "symbol": "%s", '
                             '"published": "%s", "views": %d}\n'
                             % (start + j + 1, title, ' '.join(body_words), syms[j],
                                stamp.strftime('%Y-%m-%dT%H:%M:%SZ'), views))
            chunk = ''.join(lines)
            written += len(chunk)
            f.write(chunk)
            if progress and (start // CHUNK_DOCS) % 25 == 24:
                print('  gen_news: %d/%d articles, %.0f s' % (start + k, n, time.time() - t0),
                      file=sys.stderr, flush=True)
    comp_path = companies_path(out)
    with open(comp_path, 'w', encoding='utf-8') as f:
        for c in companies(words):
            f.write(json.dumps(c) + '\n')
    return written


def companies_path(out):
    out = str(out)
    for ext in ('.jsonl.gz', '.jsonl'):
        if out.endswith(ext):
            return out[:-len(ext)] + '.companies.jsonl'
    return out + '.companies.jsonl'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--n', type=int, default=200000, help='articles (default 200000)')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--out', help='output file (default bench/work/news-N.jsonl[.gz])')
    ap.add_argument('--gzip', action='store_true', help='gzip the articles')
    args = ap.parse_args()
    out = args.out or 'bench/work/news-%d.jsonl%s' % (args.n, '.gz' if args.gzip else '')
    t0 = time.time()
    nbytes = generate(args.n, out, args.seed, args.gzip)
    print('wrote %s: %d articles, %.1f MB of JSON, %.1f s'
          % (out, args.n, nbytes / 1e6, time.time() - t0))
    return 0


if __name__ == '__main__':
    sys.exit(main())
