// DuckDB side of bench/suite.py: load the news corpus into a DuckDB file and time queries.
//
//   node bench/duckdb_run.mjs DB.duckdb JOB.json
//
// JOB.json: {"load": {"news": "news.jsonl", "companies": "companies.jsonl"} | null,
//            "queries": [{"id": "...", "sql": "..."}], "repeat": 11}
// Prints one JSON object: {"version", "load_s", "queries": {id: {"rows": [[..]], "median_ms",
// "min_ms"}}} or {"queries": {id: {"error": "..."}}} per failing query. Each query runs once
// to warm up, then `repeat` times; the rows are those of the warm-up run.
import { DuckDBInstance } from '@duckdb/node-api';
import { readFileSync } from 'node:fs';

const [dbPath, jobPath] = process.argv.slice(2);
const job = JSON.parse(readFileSync(jobPath, 'utf8'));
const instance = await DuckDBInstance.create(dbPath);
const con = await instance.connect();

function plain(v) {
  if (typeof v === 'bigint') return Number(v);
  if (v === null || v === undefined) return null;
  if (typeof v === 'object') {
    if ('micros' in v) return Number(v.micros);            // timestamps
    if (typeof v.toDouble === 'function') return v.toDouble(); // decimals
    return String(v);
  }
  return v;
}

async function rowsOf(sql) {
  const reader = await con.runAndReadAll(sql);
  return reader.getRows().map((r) => r.map(plain));
}

const out = { version: null, load_s: null, queries: {} };
out.version = (await rowsOf('SELECT version()'))[0][0];
if (job.load) {
  const t0 = performance.now();
  await con.run(`CREATE OR REPLACE TABLE news AS SELECT id::BIGINT AS id, title, body,
      symbol, published::TIMESTAMPTZ AS published, views::BIGINT AS views
      FROM read_json('${job.load.news}', format = 'newline_delimited',
        columns = {id: 'BIGINT', title: 'VARCHAR', body: 'VARCHAR', symbol: 'VARCHAR',
                   published: 'VARCHAR', views: 'BIGINT'})`);
  await con.run(`CREATE OR REPLACE TABLE companies AS SELECT * FROM read_json('${job.load.companies}',
      format = 'newline_delimited')`);
  await con.run('CHECKPOINT');
  out.load_s = (performance.now() - t0) / 1000;
}
await con.run("SET TimeZone = 'UTC'");
const repeat = job.repeat || 11;
for (const q of job.queries) {
  try {
    const rows = await rowsOf(q.sql);
    const times = [];
    for (let i = 0; i < repeat; i++) {
      const t0 = performance.now();
      await rowsOf(q.sql);
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    const mid = times.length >> 1;
    const median = times.length % 2 ? times[mid] : (times[mid - 1] + times[mid]) / 2;
    out.queries[q.id] = { rows, median_ms: median, min_ms: times[0] };
  } catch (e) {
    out.queries[q.id] = { error: String(e.message || e).split('\n')[0] };
  }
}
process.stdout.write(JSON.stringify(out) + '\n');
