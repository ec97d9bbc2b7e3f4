// node-postgres (npm "pg" and "pg-cursor") against Quarry's PG port, run by
// c_node_pg.py: untyped parameters in UPDATE / DELETE / INSERT / arithmetic /
// function arguments (42883 "operator does not exist: int8 = text" before),
// named prepared statements, and pg-cursor reading a query a few rows at a
// time (Execute with a row limit, PortalSuspended).  Every answer is compared
// with a model of the table kept here.  One JSON line per check.
import { createRequire } from "module";
const require = createRequire(process.env.NODE_DIR + "/");
const pg = require("pg");
const Cursor = require("pg-cursor");

const out = (ok, what) => console.log(JSON.stringify({ ok: !!ok, what }));
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
async function attempt(what, fn) {
  try { await fn(); } catch (e) { out(false, `${what}: ${e.code || ""} ${e.message}`); }
}

const c = new pg.Client({ host: "127.0.0.1", port: Number(process.env.PGPORT), user: "node",
                          database: "quarry" });
await c.connect();
const model = new Map();
const table = async () => (await c.query("select id, n, name from np_items order by id"))
  .rows.map(r => [Number(r.id), r.n, r.name]);
const want = () => [...model.entries()].sort((a, b) => a[0] - b[0]).map(([id, v]) => [id, v.n, v.name]);

await c.query("create table np_items (id bigint primary key, n integer, name text)");
await attempt("INSERT with $1..$3", async () => {
  for (let i = 1; i <= 40; i++) {
    await c.query("insert into np_items (id, n, name) values ($1, $2, $3)", [i, (i * 7) % 23, `item ${i}`]);
    model.set(i, { n: (i * 7) % 23, name: `item ${i}` });
  }
  out(same(await table(), want()), "INSERT with untyped parameters");
});
await attempt("UPDATE SET n = n + $1 WHERE id = $2", async () => {
  const r = await c.query("UPDATE np_items SET n = n + $1 WHERE id = $2", [5, 7]);
  model.get(7).n += 5;
  out(r.rowCount === 1 && same(await table(), want()), "UPDATE t SET n = n + $1 WHERE id = $2");
});
await attempt("DELETE WHERE id = $1", async () => {
  const r = await c.query("DELETE FROM np_items WHERE id = $1", [3]);
  model.delete(3);
  out(r.rowCount === 1 && same(await table(), want()), "DELETE FROM t WHERE id = $1");
});
await attempt("UPDATE SET name = $1 WHERE n > $2", async () => {
  const r = await c.query("UPDATE np_items SET name = $1 WHERE n > $2 AND id <= $3", ["big", 15, 30]);
  let k = 0;
  for (const [id, v] of model) if (v.n > 15 && id <= 30) { v.name = "big"; k++; }
  out(r.rowCount === k && k > 0 && same(await table(), want()), `UPDATE with three parameters (${k} rows)`);
});
await attempt("arithmetic and function arguments", async () => {
  const r = await c.query("select n * $1 + $2 as x, upper($3) as u, length($3) as l from np_items where id = $4",
                          [3, 1, "abc", 10]);
  out(r.rows.length === 1 && r.rows[0].x === model.get(10).n * 3 + 1 && r.rows[0].u === "ABC" &&
      r.rows[0].l === 3, `parameters in arithmetic and function arguments: ${JSON.stringify(r.rows)}`);
});
await attempt("named prepared statement", async () => {
  let good = true;
  for (const id of [1, 2, 10, 40]) {
    const r = await c.query({ name: "np_byid", text: "select n from np_items where id = $1", values: [id] });
    good &&= r.rows.length === 1 && r.rows[0].n === model.get(id).n;
  }
  out(good, "a named prepared statement executed four times");
});
await attempt("pg-cursor", async () => {
  await c.query("BEGIN");
  const cur = c.query(new Cursor("select id from np_items where id > $1 order by id", [4]));
  const got = [];
  let reads = 0;
  for (;;) {
    const rows = await cur.read(6);
    reads++;
    if (!rows.length) break;
    got.push(...rows.map(r => Number(r.id)));
  }
  await cur.close();
  await c.query("COMMIT");
  const ids = [...model.keys()].filter(id => id > 4).sort((a, b) => a - b);
  out(same(got, ids) && reads === Math.ceil(ids.length / 6) + 1,
      `pg-cursor reads ${got.length} rows six at a time in ${reads} reads`);
});
await attempt("error then recovery", async () => {
  let code = "";
  try { await c.query("select 1 / $1::int", [0]); } catch (e) { code = e.code; }
  const r = await c.query("select count(*)::int as n from np_items");
  out(code === "22012" && r.rows[0].n === model.size, `22012 then the connection works (${code})`);
});
await c.end();
