// knex against Quarry's PG port (tests/e2e/conformance/c_knex.py runs it): migrations
// (knex's own tables, increments() keys, a table without a key), the query builder
// (insert ... returning the generated id, update with increment, delete, where, joins,
// aggregates, a transaction rolled back).  Prints one JSON object.
const path = require("path");
const fs = require("fs");
const os = require("os");
const knex = require("knex")({
  client: "pg",
  connection: { host: "127.0.0.1", port: Number(process.argv[2]), user: "tester", database: "quarry" },
  pool: { min: 1, max: 2 },
});

async function main() {
  const out = {};
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "knex-mig-"));
  fs.writeFileSync(path.join(dir, "20240101000000_init.js"), `
exports.up = async (knex) => {
  await knex.schema.createTable("kx_users", (t) => {
    t.increments("id");
    t.string("email", 100).notNullable();
    t.integer("visits").defaultTo(0);
    t.timestamps(true, true);
  });
  await knex.schema.createTable("kx_events", (t) => {
    t.integer("user_id");
    t.string("kind", 20);
    t.float("amount");
  });
};
exports.down = async (knex) => {
  await knex.schema.dropTable("kx_events");
  await knex.schema.dropTable("kx_users");
};`);
  const [batch, done] = await knex.migrate.latest({ directory: dir });
  out.migrated = [batch, done.map((f) => path.basename(f))];
  out.again = (await knex.migrate.latest({ directory: dir }))[1].length;
  out.has = [await knex.schema.hasTable("kx_users"), await knex.schema.hasColumn("kx_users", "email"),
             await knex.schema.hasTable("kx_nope")];
  const ids = [];
  for (const e of ["a@x", "b@x", "c@x"]) {
    const [row] = await knex("kx_users").insert({ email: e }).returning("id");
    ids.push(row.id);
  }
  out.ids = ids;
  await knex("kx_events").insert([
    { user_id: ids[0], kind: "buy", amount: 2.5 }, { user_id: ids[0], kind: "buy", amount: 1.5 },
    { user_id: ids[1], kind: "view", amount: 0 }]);
  await knex("kx_users").where({ id: ids[0] }).increment("visits", 5);
  await knex("kx_users").where("email", "c@x").del();
  out.users = await knex("kx_users").select("id", "email", "visits").orderBy("id");
  out.totals = await knex("kx_events").select("user_id").sum({ total: "amount" }).count({ n: "*" })
    .groupBy("user_id").orderBy("user_id");
  out.joined = await knex("kx_users as u").join("kx_events as e", "u.id", "e.user_id")
    .where("e.kind", "buy").select("u.email", "e.amount").orderBy("e.amount");
  try {
    await knex.transaction(async (trx) => {
      await trx("kx_users").insert({ email: "gone@x" });
      throw new Error("roll back");
    });
  } catch (e) { /* expected */ }
  out.rolled_back = Number((await knex("kx_users").where("email", "gone@x").count({ n: "*" }))[0].n);
  out.rollback = (await knex.migrate.rollback({ directory: dir }))[1].length;
  out.gone = await knex.schema.hasTable("kx_users");
  console.log(JSON.stringify(out));
  await knex.destroy();
}

main().catch(async (e) => {
  console.error("knex failed: " + (e && e.stack ? e.stack : e));
  await knex.destroy();
  process.exit(1);
});
