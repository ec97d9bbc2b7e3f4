"""pgcli: its completion refresher (every metadata query it runs in the background:
search_path, schemata, tables, columns, foreign keys, views, types, databases,
casing, functions) runs without an error against Quarry, and completion then
offers the tables and columns the module made.  pgcli's own classes are driven
in a child interpreter (no terminal needed)."""
import json
import subprocess

SCRIPT = r"""
import json, sys
from pgcli.pgexecute import PGExecute
from pgcli.pgcompleter import PGCompleter
from pgcli.completion_refresher import CompletionRefresher
refreshers = CompletionRefresher.refreshers
from prompt_toolkit.document import Document
from prompt_toolkit.completion import CompleteEvent
ex = PGExecute(database="quarry", user="tester", host="127.0.0.1", port=int(sys.argv[1]))
comp = PGCompleter(smart_completion=True)
errors = {}
for name, fn in refreshers.items():
    try:
        fn(comp, ex)
    except Exception as e:
        errors[name] = repr(e)
def complete(text, pos=None):
    doc = Document(text, len(text) if pos is None else pos)
    return sorted({c.text for c in comp.get_completions(doc, CompleteEvent())})
out = {"errors": errors, "refreshers": sorted(refreshers),
       "tables": complete("SELECT * FROM pgc_"),
       "cols": complete("SELECT  FROM pgc_orders", 7),
       "funcs": sorted({f.func_name for f in ex.functions()}),
       "search_path": list(ex.search_path())}
print(json.dumps(out))
"""


def run(ctx):
    rc, out, err = ctx.srv.psql("-v", "ON_ERROR_STOP=1", "-q", "-c",
                                "CREATE TABLE pgc_orders (order_id bigserial PRIMARY KEY, "
                                "customer varchar(30), total float8); "
                                "CREATE TABLE pgc_lines (line_id int PRIMARY KEY, qty int)")
    ctx.check(rc == 0, "schema made: %s" % err)
    p = subprocess.run(["/usr/bin/python3", "-c", SCRIPT, str(ctx.srv.pg_port)], capture_output=True,
                       text=True, timeout=120)
    if not ctx.check(p.returncode == 0, "pgcli's classes ran: %s" % p.stderr[-2000:]):
        return
    r = json.loads(p.stdout.strip().splitlines()[-1])
    ctx.check(len(r["refreshers"]) >= 7, "pgcli has its refreshers: %r" % r["refreshers"])
    # the foreign-key query of the "tables" refresher needs JOIN ... USING (the SQL
    # operator tree's joins); the others run on the catalog alone
    ctx.check(r["errors"] == {}, "every completion query ran (current_schemas, functions, "
                                 "datatypes, foreign keys...): %r" % r["errors"])
    ctx.check({"pgc_orders", "pgc_lines"} <= set(r["tables"]), "table names complete: %r" % r["tables"])
    ctx.check({"order_id", "customer", "total"} <= set(r["cols"]), "columns complete: %r" % r["cols"])
    ctx.check({"nextval", "setval", "current_schemas"} <= set(r["funcs"]),
              "functions listed: %r" % r["funcs"])
    ctx.check(r["search_path"] == ["pg_catalog", "public"], "search path: %r" % r["search_path"])
