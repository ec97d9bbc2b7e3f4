// postgres.js (npm "postgres") against Quarry's PG port, run by
// c_postgres_js.py: tagged-template parameters (named statements described
// before binding, so the server must type every parameter from its context)
// in SELECT, INSERT, UPDATE and DELETE; transactions; a cursor reading in
// batches (Execute with a row limit).  Array parameters wait for array types
// (docs/pg-protocol.md).  One JSON line per check.
import { createRequire } from "module";
const require = createRequire(process.env.NODE_DIR + "/");
const postgres = require("postgres");

const out = (ok, what) => console.log(JSON.stringify({ ok: !!ok, what }));
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
async function attempt(what, fn) {
  try { await fn(); } catch (e) { out(false, `${what}: ${e.code || ""} ${e.message}`); }
}

const sql = postgres({ host: "127.0.0.1", port: Number(process.env.PGPORT), user: "pgjs",
                       database: "quarry", max: 2, idle_timeout: 1, connect_timeout: 10,
                       onnotice: () => {} });
const model = new Map();
const table = async () => (await sql`select id, n, name from pj_items order by id`)
  .map(r => [Number(r.id), r.n, r.name]);
const want = () => [...model.entries()].sort((a, b) => a[0] - b[0]).map(([id, v]) => [id, v.n, v.name]);

await attempt("create", async () => {
  await sql`create table pj_items (id bigint primary key, n integer, name text)`;
  out(true, "CREATE TABLE");
});
await attempt("INSERT", async () => {
  for (let i = 1; i <= 30; i++) {
    await sql`insert into pj_items (id, n, name) values (${i}, ${i * 11 % 17}, ${"row " + i})`;
    model.set(i, { n: i * 11 % 17, name: "row " + i });
  }
  out(same(await table(), want()), "INSERT with parameters");
});
await attempt("UPDATE n = n + $1", async () => {
  const r = await sql`update pj_items set n = n + ${4} where id = ${9}`;
  model.get(9).n += 4;
  out(r.count === 1 && same(await table(), want()), "UPDATE SET n = n + ${x} WHERE id = ${y}");
});
await attempt("DELETE", async () => {
  const r = await sql`delete from pj_items where id = ${2}`;
  model.delete(2);
  out(r.count === 1 && same(await table(), want()), "DELETE WHERE id = ${x}");
});
await attempt("SELECT with parameters", async () => {
  const r = await sql`select id from pj_items where n >= ${5} and name <> ${"row 1"} order by id`;
  const ids = [...model.entries()].filter(([id, v]) => v.n >= 5 && v.name !== "row 1")
    .map(([id]) => id).sort((a, b) => a - b);
  out(same(r.map(x => Number(x.id)), ids), `SELECT with two parameters (${ids.length} rows)`);
});
await attempt("transaction", async () => {
  try {
    await sql.begin(async tx => {
      await tx`update pj_items set name = ${"gone"} where id = ${1}`;
      throw new Error("roll back");
    });
  } catch (e) { /* rolled back */ }
  await sql.begin(async tx => {
    await tx`update pj_items set name = ${"kept"} where id = ${4}`;
  });
  model.get(4).name = "kept";
  out(same(await table(), want()), "sql.begin commits, and rolls back on a throw");
});
await attempt("cursor", async () => {
  const got = [];
  let batches = 0;
  await sql`select id from pj_items where id > ${0} order by id`.cursor(7, rows => {
    batches++;
    got.push(...rows.map(r => Number(r.id)));
  });
  const ids = [...model.keys()].sort((a, b) => a - b);
  out(same(got, ids) && batches === Math.ceil(ids.length / 7),
      `.cursor(7) reads ${got.length} rows in ${batches} batches`);
});
await attempt("error", async () => {
  let code = "";
  try { await sql`select * from pj_nosuch`; } catch (e) { code = e.code; }
  out(code === "42P01", `unknown table is 42P01 (${code})`);
});
await sql.end({ timeout: 5 });
