#!/usr/bin/python3
"""Filter benchmark: Quarry's column filters against SQLite and DuckDB on the same rows.

  bench/filter_bench.py [--n 1000000] [--repeat 15] [--build BUILD_DIR] [--out bench/results]

Rows (generated, deterministic for a seed), one JSON object a line:
  {"id": 17, "title": <6 words, "hydro" planted in ~2%>, "symbol": "ABCD" (500 tickers,
   Zipf 1.0), "published": ISO time increasing with id (so the column is sorted),
   "views": log-normal int (random order), "price": uniform float}

Engines, each loaded with the same rows:
  Quarry   build/quarry import with B-trees on symbol, published and views (as SQLite's
           indexes); queries through `quarry bench` (the index opened once, median of
           --repeat runs after a warm-up), filters in the SQL WHERE syntax, the access path
           chosen by the cost model
  SQLite   a plain table with B-tree indexes on symbol, published and views (and FTS5 on
           title for the text queries), Python's sqlite3, median of --repeat runs
  DuckDB   @duckdb/node-api (bench/node_modules; `npm install @duckdb/node-api` there), a
           table from the same JSON lines, median of --repeat runs in one node process;
           text queries use title LIKE '%hydro%' (no FTS extension offline)

Every query's answer (a count, or the ids of a top-k) is checked equal across the engines
before any time is reported. Results go to bench/results/filter-<n>.json and .md.
"""

import argparse
import datetime
import json
import math
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORDS = ["river", "stone", "bank", "market", "share", "price", "news", "energy", "grid",
         "solar", "wind", "coal", "gas", "oil", "trade", "index", "bond", "rate", "loan",
         "fund", "asset", "equity", "profit", "loss", "cash", "debt", "yield", "growth"]
T0 = datetime.datetime(2023, 1, 1, tzinfo=datetime.timezone.utc)


def gen_rows(n, seed):
    rng = random.Random(seed)
    trng = random.Random(7)
    tickers = sorted({"".join(trng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
                              for _ in range(trng.randint(3, 5))) for _ in range(700)})[:500]
    trng.shuffle(tickers)
    weights = [1.0 / (i + 1) for i in range(len(tickers))]
    cum, acc = [], 0.0
    for w in weights:
        acc += w
        cum.append(acc)
    import bisect
    step = 730 * 86400 / n
    for i in range(n):
        words = [rng.choice(WORDS) for _ in range(6)]
        if rng.random() < 0.02:
            words[rng.randrange(6)] = "hydro"
        sym = tickers[bisect.bisect_left(cum, rng.random() * acc)]
        ts = T0 + datetime.timedelta(seconds=int(i * step))
        yield {"id": i, "title": " ".join(words), "symbol": sym,
               "published": ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
               "views": int(math.exp(rng.gauss(6, 1.5))), "price": round(rng.uniform(1, 1000), 2)}


def median_ms(fn, repeat):
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1000)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = ap.parse_args()
    quarry = os.path.join(args.build, "quarry")
    work = Path(tempfile.mkdtemp(prefix="filter-bench-", dir=str(REPO / "bench" / "work")
                                 if (REPO / "bench" / "work").is_dir() else None))
    try:
        run(args, quarry, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args, quarry, work):
    n = args.n
    rows_path = work / "rows.jsonl"
    t = time.time()
    rows = list(gen_rows(n, args.seed))
    with open(rows_path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print("generated %d rows in %.1f s" % (n, time.time() - t), flush=True)
    by_sym = {}
    for r in rows:
        by_sym[r["symbol"]] = by_sym.get(r["symbol"], 0) + 1
    syms = sorted(by_sym, key=lambda s: -by_sym[s])
    top, rare = syms[0], syms[len(syms) // 2]
    in3 = syms[5:8]
    views_sorted = sorted(r["views"] for r in rows)
    v_lo, v_hi = views_sorted[n // 2], views_sorted[n // 2 + n // 100]  # ~1% of rows
    v_med = views_sorted[n // 2]
    day = rows[n // 3]["published"][:10]
    day_end = (datetime.date.fromisoformat(day) + datetime.timedelta(days=1)).isoformat()

    # ---- load ----
    schema = {"primary_key": "id", "fields": [
        {"name": "title", "type": "text", "language": "none"},
        {"name": "symbol", "type": "keyword", "index": "btree"},
        {"name": "published", "type": "timestamp", "index": "btree"},
        {"name": "views", "type": "int", "index": "btree"}, {"name": "price", "type": "float"}]}
    (work / "schema.json").write_text(json.dumps(schema))
    data = work / "qdata"
    t = time.time()
    subprocess.run([quarry, "import", "--data", str(data), "f", str(rows_path), "--schema",
                    str(work / "schema.json")], check=True, capture_output=True)
    subprocess.run([quarry, "merge", "--data", str(data), "f"], check=True, capture_output=True)
    load_q = time.time() - t
    t = time.time()
    db = sqlite3.connect(str(work / "s.db"))
    db.execute("CREATE TABLE f(id INTEGER PRIMARY KEY, title TEXT, symbol TEXT, published TEXT,"
               " views INTEGER, price REAL)")
    db.executemany("INSERT INTO f VALUES (?,?,?,?,?,?)",
                   ((r["id"], r["title"], r["symbol"], r["published"], r["views"], r["price"])
                    for r in rows))
    for c in ("symbol", "published", "views"):
        db.execute("CREATE INDEX f_%s ON f(%s)" % (c, c))
    db.execute("CREATE VIRTUAL TABLE ft USING fts5(title, content='f', content_rowid='id')")
    db.execute("INSERT INTO ft(ft) VALUES ('rebuild')")
    db.commit()
    db.execute("ANALYZE")
    load_s = time.time() - t
    print("loaded: quarry %.1f s, sqlite %.1f s" % (load_q, load_s), flush=True)

    # ---- queries: (name, quarry line, sqlite sql, duckdb sql, kind) ----
    Q = [
        ("sorted range: 1 day of published (zone maps)",
         {"q": "", "filter": "published >= '%s' AND published < '%s'" % (day, day_end)},
         "SELECT count(*) FROM f WHERE published >= '%s' AND published < '%s'" % (day, day_end),
         "SELECT count(*) FROM f WHERE published >= TIMESTAMP '%s' AND published < TIMESTAMP '%s'"
         % (day, day_end), "count"),
        ("range on random data: views, ~1%",
         {"q": "", "filter": "views BETWEEN %d AND %d" % (v_lo, v_hi)},
         "SELECT count(*) FROM f WHERE views BETWEEN %d AND %d" % (v_lo, v_hi),
         "SELECT count(*) FROM f WHERE views BETWEEN %d AND %d" % (v_lo, v_hi), "count"),
        ("full-column scan: views > median (50%)",
         {"q": "", "filter": "views > %d" % v_med},
         "SELECT count(*) FROM f WHERE views > %d" % v_med,
         "SELECT count(*) FROM f WHERE views > %d" % v_med, "count"),
        ("IN on a keyword: 3 tickers",
         {"q": "", "filter": "symbol IN ('%s', '%s', '%s')" % tuple(in3)},
         "SELECT count(*) FROM f WHERE symbol IN ('%s','%s','%s')" % tuple(in3),
         "SELECT count(*) FROM f WHERE symbol IN ('%s','%s','%s')" % tuple(in3), "count"),
        ("equality on the top ticker",
         {"q": "", "filter": "symbol = '%s'" % top},
         "SELECT count(*) FROM f WHERE symbol = '%s'" % top,
         "SELECT count(*) FROM f WHERE symbol = '%s'" % top, "count"),
        ("text + selective filter: hydro AND symbol = rare ticker",
         {"q": "hydro", "filter": "symbol = '%s'" % rare},
         "SELECT count(*) FROM ft JOIN f ON f.id = ft.rowid WHERE ft MATCH 'hydro' AND "
         "f.symbol = '%s'" % rare,
         "SELECT count(*) FROM f WHERE regexp_matches(title, '\\bhydro\\b') AND symbol = '%s'"
         % rare, "count"),
        ("text + unselective filter: hydro AND views > 10",
         {"q": "hydro", "filter": "views > 10"},
         "SELECT count(*) FROM ft JOIN f ON f.id = ft.rowid WHERE ft MATCH 'hydro' AND "
         "f.views > 10",
         "SELECT count(*) FROM f WHERE regexp_matches(title, '\\bhydro\\b') AND views > 10",
         "count"),
        ("top 10 by published desc where symbol = top ticker",
         {"q": "", "filter": "symbol = '%s'" % top, "sort": "published:desc", "limit": 10},
         "SELECT id FROM f WHERE symbol = '%s' ORDER BY published DESC, id LIMIT 10" % top,
         "SELECT id FROM f WHERE symbol = '%s' ORDER BY published DESC, id LIMIT 10" % top,
         "top"),
    ]

    # Quarry
    qfile = work / "q.jsonl"
    with open(qfile, "w") as f:
        for i, (_, line, _, _, kind) in enumerate(Q):
            d = dict(line, qid=i, mode="count" if kind == "count" else "top")
            f.write(json.dumps(d) + "\n")
    out = subprocess.run([quarry, "bench", "--data", str(data), "f", "--queries", str(qfile),
                          "--repeat", str(args.repeat)], check=True, capture_output=True,
                         text=True).stdout
    qres = {j["qid"]: j for j in map(json.loads, out.splitlines())}

    # SQLite
    sres = {}
    for i, (_, _, sql, _, kind) in enumerate(Q):
        ans = db.execute(sql).fetchall()
        val = ans[0][0] if kind == "count" else [r[0] for r in ans]
        sres[i] = (val, median_ms(lambda: db.execute(sql).fetchall(), args.repeat))

    # DuckDB (node)
    dres = {}
    duck_note = ""
    node_mod = REPO / "bench" / "node_modules" / "@duckdb" / "node-api"
    if node_mod.is_dir():
        js = work / "duck.js"
        js.write_text(DUCK_JS)
        qs = [{"sql": d, "kind": k} for (_, _, _, d, k) in Q]
        (work / "duck_q.json").write_text(json.dumps(qs))
        env = dict(os.environ, NODE_PATH=str(REPO / "bench" / "node_modules"))
        p = subprocess.run(["node", str(js), str(rows_path), str(work / "duck_q.json"),
                            str(args.repeat)], capture_output=True, text=True, env=env)
        if p.returncode == 0:
            for i, j in enumerate(json.loads(p.stdout)):
                dres[i] = (j["answer"], j["median_ms"])
        else:
            duck_note = "DuckDB failed: " + p.stderr[-300:]
    else:
        duck_note = "DuckDB not installed (cd bench && npm install @duckdb/node-api)"

    # ---- check answers, then report ----
    results = []
    ok = True
    for i, (name, line, _, _, kind) in enumerate(Q):
        qa = qres[i]
        q_ans = qa["count"] if kind == "count" else qa["ids"]
        s_ans, s_ms = sres[i]
        d_ans, d_ms = dres.get(i, (None, None))
        agree = q_ans == s_ans and (d_ans is None or d_ans == q_ans)
        if not agree:
            ok = False
            print("ANSWERS DIFFER for %s: quarry %s sqlite %s duckdb %s" % (
                name, str(q_ans)[:80], str(s_ans)[:80], str(d_ans)[:80]))
        best_peer = min(x for x in (s_ms, d_ms) if x is not None)
        results.append({"query": name, "quarry": line, "answer": q_ans if kind == "count" else
                        len(q_ans), "quarry_ms": qa["median_ms"], "sqlite_ms": round(s_ms, 4),
                        "duckdb_ms": round(d_ms, 4) if d_ms is not None else None,
                        "speedup_vs_best_peer": round(best_peer / max(qa["median_ms"], 1e-6), 2),
                        "answers_agree": agree})
    # the unskipped scan of the same shape as the sorted range, for the zone-map ratio
    # (scans forced: the zone-map ratio is between two column scans)
    zl = work / "z.jsonl"
    zl.write_text(json.dumps({"qid": 0, "q": "", "mode": "count", "access_path": "scan",
                              "filter": "views >= %d AND views < %d" % (v_lo, v_lo + 1)}) +
                  "\n" + json.dumps(dict(Q[0][1], qid=1, mode="count", access_path="scan")) +
                  "\n")
    zs = [json.loads(x) for x in subprocess.run(
        [quarry, "bench", "--data", str(data), "f", "--queries", str(zl), "--repeat",
         str(args.repeat)], check=True, capture_output=True, text=True).stdout.splitlines()]
    z, zsorted = zs[0], zs[1]
    report = {"rows": n, "repeat": args.repeat, "load_s": {"quarry": round(load_q, 1),
                                                            "sqlite": round(load_s, 1)},
              "cpus": os.cpu_count(), "loadavg": os.getloadavg(), "results": results,
              "scan_point_range_on_random_views_ms": z["median_ms"],
              "scan_day_range_on_sorted_published_ms": zsorted["median_ms"], "note": duck_note,
              "answers_agree": ok}
    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / ("filter-%d.json" % n)).write_text(json.dumps(report, indent=1) + "\n")
    md = ["# Filter benchmark, %d rows" % n, "",
          "`bench/filter_bench.py --n %d --repeat %d`; medians in ms; %d CPUs, load average %.1f "
          "at the end. Answers checked equal across engines first: %s. %s" % (
              n, args.repeat, os.cpu_count(), os.getloadavg()[0], "yes" if ok else "NO",
              duck_note), "",
          "| query | answer | Quarry | SQLite | DuckDB | vs best peer |", "|---|---|---|---|---|---|"]
    for r in results:
        md.append("| %s | %s | %.3f | %.3f | %s | %.1fx |" % (
            r["query"], r["answer"], r["quarry_ms"], r["sqlite_ms"],
            "%.3f" % r["duckdb_ms"] if r["duckdb_ms"] is not None else "-",
            r["speedup_vs_best_peer"]))
    md += ["", "Column scans forced (`access_path: scan`): a point range on random `views` "
           "reads every block in %.3f ms; the day range on sorted `published` skips all but "
           "one or two blocks by zone map in %.3f ms (%.0fx)." % (
               z["median_ms"], zsorted["median_ms"], z["median_ms"] / max(zsorted["median_ms"],
                                                                          1e-6))]
    (outdir / ("filter-%d.md" % n)).write_text("\n".join(md) + "\n")
    print("\n".join(md))
    if not ok:
        sys.exit(1)


DUCK_JS = r"""
const { DuckDBInstance } = require('@duckdb/node-api');
const fs = require('fs');
(async () => {
  const [rowsPath, qPath, repeat] = process.argv.slice(2);
  const inst = await DuckDBInstance.create(':memory:');
  const con = await inst.connect();
  await con.run(`CREATE TABLE f AS SELECT id::BIGINT AS id, title, symbol,
                   published::TIMESTAMP AS published, views::BIGINT AS views,
                   price::DOUBLE AS price
                 FROM read_json('${rowsPath}', format='newline_delimited',
                   columns={id:'BIGINT', title:'VARCHAR', symbol:'VARCHAR', published:'VARCHAR',
                            views:'BIGINT', price:'DOUBLE'})`);
  const qs = JSON.parse(fs.readFileSync(qPath, 'utf8'));
  const out = [];
  for (const q of qs) {
    const run = async () => (await con.runAndReadAll(q.sql)).getRows();
    let rows = await run();
    const answer = q.kind === 'count' ? Number(rows[0][0]) : rows.map(r => Number(r[0]));
    const ts = [];
    for (let i = 0; i < Number(repeat); i++) {
      const t = process.hrtime.bigint();
      await run();
      ts.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    ts.sort((a, b) => a - b);
    out.push({ answer, median_ms: ts[Math.floor(ts.length / 2)] });
  }
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e); process.exit(1); });
"""

if __name__ == "__main__":
    main()
