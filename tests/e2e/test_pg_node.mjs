// node-postgres (npm "pg") against `quarry serve --pg`: a connection pool,
// parameterized queries ($1..$n, sent with the extended protocol), named
// prepared queries, a transaction with ROLLBACK, and 24 concurrent queries
// over a pool of 4.  Every answer is compared with the rows this script
// inserted (kept in an array).  Run by test_pg_node.sh with PGPORT set.
import { createRequire } from "module";
const require = createRequire(import.meta.url + "/../pg_node/");
const pg = require("pg");

let passed = 0, failed = 0;
function check(cond, what) {
  if (cond) passed++;
  else { failed++; console.log("FAILED: " + what); }
}
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

const pool = new pg.Pool({
  host: "127.0.0.1", port: Number(process.env.PGPORT), user: "node", database: "quarry",
  max: 4, idleTimeoutMillis: 1000,
});

const rows = [];
for (let i = 1; i <= 400; i++)
  rows.push({ id: i, name: `item ${i} ${["red", "green", "blue"][i % 3]}`, qty: (i * 37) % 101,
              price: i / 4, ok: i % 2 === 0 });

try {
  await pool.query("create table items (id bigint primary key, name text, qty integer, " +
                   "price double precision, ok boolean)");
  const c = await pool.connect();
  try {
    await c.query("BEGIN");
    for (const r of rows)
      await c.query("insert into items (id, name, qty, price, ok) values ($1, $2, $3, $4, $5)",
                    [r.id, r.name, r.qty, r.price, r.ok]);
    await c.query("COMMIT");
    await c.query("BEGIN");
    await c.query("insert into items (id, name, qty, price, ok) values ($1, $2, $3, $4, $5)",
                  [9999, "rolled back", 1, 1, true]);
    await c.query("ROLLBACK");
  } finally {
    c.release();
  }
  let res = await pool.query("select count(*) as n from items");
  check(Number(res.rows[0].n) === rows.length, `count ${JSON.stringify(res.rows)}`);

  res = await pool.query("select id, qty, price, ok from items where qty > $1 and ok = $2 order by id",
                         [90, true]);
  const want = rows.filter(r => r.qty > 90 && r.ok).map(r => [r.id, r.qty, r.price, r.ok]);
  const got = res.rows.map(r => [Number(r.id), r.qty, r.price, r.ok]);
  check(same(got, want), `parameterized filter: ${got.length} rows, want ${want.length}`);
  check(same(res.fields.map(f => f.dataTypeID), [20, 23, 701, 16]),
        `field type OIDs ${JSON.stringify(res.fields.map(f => f.dataTypeID))}`);

  // a named prepared statement, run several times with different values
  for (const q of [0, 50, 100]) {
    res = await pool.query({ name: "by_qty", text: "select id from items where qty = $1 order by id",
                             values: [q] });
    const w = rows.filter(r => r.qty === q).map(r => r.id);
    check(same(res.rows.map(r => Number(r.id)), w), `named query qty=${q}`);
  }

  // text parameters with quotes and unicode come back unchanged
  const tricky = "it's \"x\" \\ é ☃ ; --";
  res = await pool.query("select $1::text as t, $2::int8 as n", [tricky, "-9007199254740993"]);
  check(res.rows[0].t === tricky && res.rows[0].n === "-9007199254740993",
        `text/int8 round trip ${JSON.stringify(res.rows[0])}`);

  // errors carry SQLSTATEs; the pool stays usable
  try {
    await pool.query("select nope from items");
    check(false, "undefined column should fail");
  } catch (e) {
    check(e.code === "42703", `SQLSTATE ${e.code}`);
  }

  // concurrency: 24 queries at once over 4 pooled connections
  const ids = Array.from({ length: 24 }, (_, k) => 1 + ((k * 53) % rows.length));
  const all = await Promise.all(ids.map(id =>
    pool.query("select name from items where id = $1", [id])));
  check(all.every((r, k) => r.rows.length === 1 && r.rows[0].name === rows[ids[k] - 1].name),
        "24 concurrent queries over a pool of 4");
} catch (e) {
  check(false, "unexpected error: " + (e.stack || e));
} finally {
  await pool.end();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
