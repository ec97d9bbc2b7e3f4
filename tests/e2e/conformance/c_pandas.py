"""pandas (Debian python3-pandas) through SQLAlchemy: to_sql makes a table without a
primary key (Quarry gives it a hidden row id) and loads a frame in chunks (and appends),
with its index as a column; read_sql reads it back equal, with a query, parameters and
dtypes; if_exists='replace' drops and remakes it."""
import subprocess

SCRIPT = r"""
import json, sys
import numpy as np
import pandas as pd
from sqlalchemy import create_engine, text
eng = create_engine("postgresql+psycopg2://tester@127.0.0.1:%s/quarry" % sys.argv[1])
n = 500
df = pd.DataFrame({"k": np.arange(n, dtype="int64"),
                   "x": np.round(np.linspace(0, 1, n), 6),
                   "name": ["row%d" % i for i in range(n)],
                   "flag": [i % 3 == 0 for i in range(n)],
                   "at": pd.date_range("2024-01-01", periods=n, freq="H", tz="UTC")})
out = {}
df.to_sql("pd_frame", eng, index=True, chunksize=128)
df.iloc[:10].to_sql("pd_frame", eng, if_exists="append", index=True)
back = pd.read_sql("SELECT * FROM pd_frame ORDER BY k, index", eng)
out["rows"] = len(back)
out["columns"] = list(back.columns)
first = back.drop_duplicates("k").reset_index(drop=True)
out["equal"] = bool((first["k"] == df["k"]).all() and (first["name"] == df["name"]).all()
                    and np.allclose(first["x"], df["x"]) and (first["flag"] == df["flag"]).all()
                    and (pd.to_datetime(first["at"], utc=True) == df["at"]).all())
out["dtypes"] = {c: str(t) for c, t in back.dtypes.items()}
q = pd.read_sql(text("SELECT name, x FROM pd_frame WHERE k BETWEEN :a AND :b ORDER BY k"), eng,
                params={"a": 10, "b": 12})
out["query"] = q.values.tolist()
agg = pd.read_sql("SELECT flag, count(*) AS n, sum(k) AS s FROM pd_frame GROUP BY flag ORDER BY flag", eng)
out["agg"] = agg.values.tolist()
df.iloc[:3].to_sql("pd_frame", eng, if_exists="replace", index=False)
out["replaced"] = int(pd.read_sql("SELECT count(*) AS n FROM pd_frame", eng)["n"][0])
print(json.dumps(out, default=str))
"""


def run(ctx):
    p = subprocess.run(["/usr/bin/python3", "-c", SCRIPT, str(ctx.srv.pg_port)],
                       capture_output=True, text=True, timeout=180)
    if not ctx.check(p.returncode == 0, "the pandas program ran: %s" % p.stderr[-2500:]):
        return
    import json
    r = json.loads(p.stdout.strip().splitlines()[-1])
    ctx.check(r["rows"] == 510, "to_sql in chunks and append: %r rows" % r["rows"])
    ctx.check(r["columns"] == ["index", "k", "x", "name", "flag", "at"], "columns: %r" % r["columns"])
    ctx.check(r["equal"], "read_sql gives the frame back")
    ctx.check(r["dtypes"]["k"] == "int64" and r["dtypes"]["flag"] == "bool" and r["dtypes"]["x"] == "float64",
              "dtypes: %r" % r["dtypes"])
    want_x = [round(i / 499, 6) for i in (10, 11, 12)]
    ctx.check([q[0] for q in r["query"]] == ["row10", "row11", "row12"] and
              all(abs(a - b) < 1e-9 for a, b in zip([q[1] for q in r["query"]], want_x)),
              "read_sql with parameters: %r" % r["query"])
    trues = [i for i in range(500) if i % 3 == 0]
    want = [[False, 500 - len(trues) + sum(1 for i in range(10) if i % 3), sum(range(500)) - sum(trues) +
             sum(i for i in range(10) if i % 3)],
            [True, len(trues) + sum(1 for i in range(10) if i % 3 == 0), sum(trues) +
             sum(i for i in range(10) if i % 3 == 0)]]
    ctx.check(r["agg"] == want, "group by over the loaded rows: %r, want %r" % (r["agg"], want))
    ctx.check(r["replaced"] == 3, "if_exists='replace': %r" % r["replaced"])
