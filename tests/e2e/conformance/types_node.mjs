// node-pg (npm "pg") and postgres.js (npm "postgres") against Quarry's types,
// run by c_types_node_pg.py and c_types_postgres_js.py (argv[2] names the
// driver): arrays sent as parameters the way each driver sends them (node-pg:
// text of unknown type; postgres.js: typed by the array OIDs it read from
// pg_type at connect), read back as JS arrays, stored in array columns, and
// `id = ANY($1)` answering right (it used to answer 0 rows); dates, times and
// intervals parsed by each driver; numerics as their exact text.  One JSON
// line per check.
import { createRequire } from "module";
const require = createRequire(process.env.NODE_DIR + "/");

const driver = process.argv[2];
const out = (ok, what) => console.log(JSON.stringify({ ok: !!ok, what: `${driver}: ${what}` }));
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
async function attempt(what, fn) {
  try { await fn(); } catch (e) { out(false, `${what}: ${e.code || ""} ${e.message}`); }
}

let query, end;
if (driver === "node-pg") {
  const pg = require("pg");
  const c = new pg.Client({ host: "127.0.0.1", port: Number(process.env.PGPORT), user: "nodet",
                            database: "quarry" });
  await c.connect();
  query = async (text, params) => (await c.query(text, params)).rows;
  end = () => c.end();
} else {
  const postgres = require("postgres");
  const sql = postgres({ host: "127.0.0.1", port: Number(process.env.PGPORT), user: "pgjst",
                         database: "quarry", max: 1, idle_timeout: 1, connect_timeout: 10,
                         onnotice: () => {} });
  query = async (text, params) => [...(await sql.unsafe(text, params || []))];
  end = () => sql.end({ timeout: 5 });
}
const t = driver === "node-pg" ? "tn_arr" : "tj_arr";
// postgres.js reads an unquoted NULL inside a text array as the string "NULL"
// (its parser does so against PostgreSQL too): its text arrays here hold none
const pjs = driver !== "node-pg";

await attempt("array results", async () => {
  const r = await query("select ARRAY[1, 2, NULL]::int4[] a, '{x,\"y z\"" + (pjs ? "" : ",NULL") +
                        "}'::text[] b, ARRAY[1.5, -2]::float8[] c, '{{1,2},{3,4}}'::int4[] d, " +
                        "ARRAY[true, false] e");
  const w = { a: [1, 2, null], b: pjs ? ["x", "y z"] : ["x", "y z", null], c: [1.5, -2],
              d: [[1, 2], [3, 4]], e: [true, false] };
  out(same(r[0], w), `arrays read back as JS arrays: ${JSON.stringify(r[0])}`);
});
await attempt("= ANY($1)", async () => {
  const r = await query("select x from generate_series(1, 10) g(x) where x = any($1) order by x",
                        [[3, 5, 11]]);
  out(same(r.map(x => Number(x.x)), [3, 5]), `x = ANY($1) with a JS array: ${JSON.stringify(r)}`);
});
await attempt("columns", async () => {
  await query(`create table ${t} (id bigint primary key, tags text[], nums int4[])`);
  const rows = [[1, ["a", "b c"], [1, 2]], [2, [], null],
                [3, pjs ? ["q\"uote", "back\\slash"] : ["NULL", null], [7, null]]];
  for (const row of rows)
    await query(`insert into ${t} (id, tags, nums) values ($1, $2, $3)`, row);
  const got = (await query(`select id, tags, nums from ${t} order by id`))
    .map(r => [Number(r.id), r.tags, r.nums]);
  out(same(got, rows), `array columns store and read back: ${JSON.stringify(got)}`);
  const hit = await query(`select id from ${t} where id = any($1) and $2 = any(tags) order by id`,
                          [[1, 2, 3], "b c"]);
  out(same(hit.map(r => Number(r.id)), [1]), `id = ANY($1) on a table: ${JSON.stringify(hit)}`);
});
await attempt("dates", async () => {
  const r = (await query("select $1::date + 1 as d, interval '1 day 02:00:00' * 2 as iv, " +
                         "time '10:30' + interval '90 minutes' as t, $1::date - date '2024-01-01' as n",
                         [pjs ? "2024-02-29" : new Date(2024, 1, 29)]))[0];
  const day = pjs ? r.d.toISOString().slice(0, 10)
    : `${r.d.getFullYear()}-${String(r.d.getMonth() + 1).padStart(2, "0")}-${String(r.d.getDate()).padStart(2, "0")}`;
  const iv = pjs ? r.iv : `${r.iv.days} ${r.iv.hours}`;
  out(day === "2024-03-01" && iv === (pjs ? "2 days 04:00:00" : "2 4") && r.t === "12:00:00" &&
      Number(r.n) === 59, `date / interval / time values and arithmetic: ${day} ${iv} ${r.t} ${r.n}`);
});
await attempt("uuid, bytea, json", async () => {
  const u = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";
  const r = (await query("select $1::uuid as u, $2::bytea as b, $3::jsonb as j, " +
                         "$3::jsonb -> 'a' ->> 0 as a0, json_build_object('k', 1) as o",
                         [u, Buffer.from([0, 255, 7]),
                          // postgres.js serializes a jsonb parameter itself: it takes the object
                          pjs ? { b: 1, a: ["x", 2] } : JSON.stringify({ b: 1, a: ["x", 2] })]))[0];
  const j = typeof r.j === "string" ? JSON.parse(r.j) : r.j;
  const o = typeof r.o === "string" ? JSON.parse(r.o) : r.o;
  out(r.u === u && Buffer.isBuffer(r.b) && same([...r.b], [0, 255, 7]) && same(j, { a: ["x", 2], b: 1 }) &&
      r.a0 === "x" && same(o, { k: 1 }),
      `uuid / bytea / jsonb values: ${r.u} ${JSON.stringify(r.b)} ${JSON.stringify(r.j)} ${r.a0}`);
});
await attempt("numeric", async () => {
  // both drivers return numeric as its text, so the scale is visible
  const r = (await query("select '0.1'::numeric + '0.2'::numeric as s, $1::numeric * 2 as p, " +
                         "$1::numeric / 3 as q, round($1::numeric, 1) as r", ["12.50"]))[0];
  out(r.s === "0.3" && r.p === "25.00" && r.q === "4.1666666666666667" && r.r === "12.5",
      `numeric values keep PostgreSQL's scales: ${r.s} ${r.p} ${r.q} ${r.r}`);
});
await attempt("malformed", async () => {
  let code = null;
  try { await query("select 1 = any($1::text::int4[])", ["{1,2"]); } catch (e) { code = e.code; }
  out(code === "22P02", `a malformed array literal is 22P02 (got ${code})`);
});
await end();
