"""Django's ORM on its PostgreSQL backend (Debian python3-django, psycopg2): a minimal
project made here (one app: django.contrib.auth's migrations need UNIQUE and FOREIGN KEY
constraints, ALTER COLUMN TYPE and DROP COLUMN, which Quarry does not have), `migrate`
(its migration table and the app's, AutoField keys as SERIAL), CRUD, filters,
aggregates and annotations, a transaction rolled back, nested atomic() blocks (savepoints)
whose inner block fails.  Then two more migrations, as Django runs them (each in a
transaction block): one adds a column with a default (ADD COLUMN ... DEFAULT ... NOT NULL,
then DROP DEFAULT) and commits; the next adds a column and fails, and its rollback must
take the column and its django_migrations row away."""
import os
import subprocess
import textwrap

MODELS = """
from django.db import models

class Shelf(models.Model):
    name = models.CharField(max_length=40)

class Item(models.Model):
    shelf_id = models.IntegerField()
    title = models.CharField(max_length=80)
    price = models.FloatField()
    stock = models.IntegerField(default=0)
    added = models.DateTimeField(null=True)
"""

SCRIPT = r"""
import json, os, sys, datetime
sys.path.insert(0, sys.argv[1])
os.environ["DJANGO_SETTINGS_MODULE"] = "djsite.settings"
import django
django.setup()
from django.core.management import call_command
from django.db import transaction
from django.db.models import Count, Sum, Avg, Max, F, Q
from djapp.models import Shelf, Item
out = {}
call_command("migrate", verbosity=0)
from django.db import connection
with connection.cursor() as c:
    c.execute("SELECT app, count(*) FROM django_migrations GROUP BY app ORDER BY app")
    out["migrations"] = [list(r) for r in c.fetchall()]
s1 = Shelf.objects.create(name="a")
s2 = Shelf.objects.create(name="b")
out["shelf_ids"] = [s1.id, s2.id]
for i in range(6):
    Item.objects.create(shelf_id=s1.id if i % 2 else s2.id, title="t%d" % i, price=2.0 * i, stock=i,
                        added=datetime.datetime(2024, 1, 1 + i, tzinfo=datetime.timezone.utc))
out["count"] = Item.objects.count()
Item.objects.filter(stock__gte=4).update(price=F("price") + 1)
Item.objects.filter(title="t0").delete()
out["after"] = list(Item.objects.order_by("id").values_list("title", "price"))
out["agg"] = Item.objects.aggregate(n=Count("id"), total=Sum("stock"), avg=Avg("price"), top=Max("price"))
out["per_shelf"] = list(Item.objects.values("shelf_id").annotate(n=Count("id"), s=Sum("stock"))
                        .order_by("shelf_id").values_list("shelf_id", "n", "s"))
out["q"] = list(Item.objects.filter(Q(stock__lt=2) | Q(title__startswith="t5")).order_by("title")
                .values_list("title", flat=True))
try:
    with transaction.atomic():
        Item.objects.create(shelf_id=1, title="gone", price=1.0)
        raise RuntimeError("roll back")
except RuntimeError:
    pass
out["rolled_back"] = Item.objects.filter(title="gone").count()
out["get"] = Item.objects.get(title="t3").stock
from django.db import IntegrityError
with transaction.atomic():                      # nested atomic(): savepoints
    Item.objects.create(shelf_id=1, title="outer", price=1.0)
    try:
        with transaction.atomic():
            Item.objects.create(shelf_id=1, title="inner", price=1.0)
            Item.objects.create(id=Item.objects.get(title="t3").id, shelf_id=1, title="dup", price=1.0)
    except IntegrityError:
        pass
    with transaction.atomic():
        Item.objects.create(shelf_id=1, title="kept", price=1.0)
out["nested"] = sorted(Item.objects.filter(title__in=["outer", "inner", "dup", "kept"])
                       .values_list("title", flat=True))
print(json.dumps(out, default=str))
"""


MIGRATIONS = {
    "djapp/migrations/0002_rating.py": """
from django.db import migrations, models

class Migration(migrations.Migration):
    dependencies = [("djapp", "0001_initial")]
    operations = [migrations.AddField("item", "rating", models.IntegerField(default=5))]
""",
    "djapp/migrations/0003_drop_added.py": """
from django.db import migrations, models

class Migration(migrations.Migration):
    dependencies = [("djapp", "0002_rating")]
    operations = [migrations.RemoveField("item", "added")]
""",
    "djapp/migrations/0004_note.py": """
from django.db import migrations, models

class Migration(migrations.Migration):
    dependencies = [("djapp", "0003_drop_added")]
    operations = [migrations.AddField("item", "note", models.CharField(max_length=20, null=True)),
                  migrations.RemoveField("item", "stock"),
                  migrations.RunSQL("SELECT nope FROM djapp_item")]
""",
}

MIGRATE = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
os.environ["DJANGO_SETTINGS_MODULE"] = "djsite.settings"
import django
django.setup()
from django.core.management import call_command
from django.db import connection
out = {}
try:
    call_command("migrate", verbosity=0)
    out["migrate"] = "ok"
except Exception as e:
    out["migrate"] = type(e).__name__
with connection.cursor() as c:
    c.execute("SELECT name FROM django_migrations WHERE app = 'djapp' ORDER BY name")
    out["applied"] = [r[0] for r in c.fetchall()]
    c.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'djapp_item' "
              "ORDER BY 1")
    out["columns"] = [r[0] for r in c.fetchall()]
    c.execute("SELECT count(*), min(rating), max(rating) FROM djapp_item")
    out["rating"] = list(c.fetchone())
    c.execute("INSERT INTO djapp_item (shelf_id, title, price, stock, rating) VALUES (1, 'r', 1, 0, 9)")
    c.execute("SELECT column_default FROM information_schema.columns "
              "WHERE table_name = 'djapp_item' AND column_name = 'rating'")
    out["rating_default"] = c.fetchone()[0]
print(json.dumps(out, default=str))
"""


def migrate_more(ctx, root, env):
    """0002 adds a column with a default and commits; 0003 removes one and commits; 0004
    adds one, removes another and fails."""
    for name, text in MIGRATIONS.items():
        with open(os.path.join(root, name), "w") as f:
            f.write(text)
    p = subprocess.run(["/usr/bin/python3", "-c", MIGRATE, root], cwd=root, env=env,
                       capture_output=True, text=True, timeout=180)
    if not ctx.check(p.returncode == 0, "the migrating program ran: %s" % p.stderr[-2500:]):
        return
    import json
    r = json.loads(p.stdout.strip().splitlines()[-1])
    ctx.check(r["migrate"] == "ProgrammingError", "0004's failure reached Django: %r" % r["migrate"])
    ctx.check(r["applied"] == ["0001_initial", "0002_rating", "0003_drop_added"],
              "0002 and 0003 recorded, 0004 rolled back: %r" % r["applied"])
    ctx.check(r["columns"] == ["id", "price", "rating", "shelf_id", "stock", "title"],
              "AddField with a default kept, RemoveField done, the rolled back migration's "
              "column gone and its removed one back: %r" % r["columns"])
    ctx.check(r["rating"][1:] == [5, 5] and r["rating"][0] > 0,
              "the rows there read the default: %r" % r["rating"])
    ctx.check(r["rating_default"] is None, "Django's DROP DEFAULT after it: %r" % r["rating_default"])


def run(ctx):
    root = os.path.join(ctx.work, "django")
    os.makedirs(os.path.join(root, "djsite"), exist_ok=True)
    os.makedirs(os.path.join(root, "djapp", "migrations"), exist_ok=True)
    files = {
        "djsite/__init__.py": "",
        "djsite/settings.py": textwrap.dedent("""
            SECRET_KEY = "conformance"
            INSTALLED_APPS = ["djapp"]
            DATABASES = {"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "quarry",
                                     "USER": "tester", "HOST": "127.0.0.1", "PORT": "%d"}}
            USE_TZ = True
            DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
            """ % ctx.srv.pg_port),
        "djapp/__init__.py": "",
        "djapp/models.py": MODELS,
        "djapp/migrations/__init__.py": "",
    }
    for name, text in files.items():
        with open(os.path.join(root, name), "w") as f:
            f.write(text)
    env = dict(os.environ, PYTHONPATH=root, DJANGO_SETTINGS_MODULE="djsite.settings")
    p = subprocess.run(["/usr/bin/python3", "-m", "django", "makemigrations", "djapp"], cwd=root,
                       env=env, capture_output=True, text=True, timeout=180)
    if not ctx.check(p.returncode == 0, "makemigrations: %s" % (p.stdout + p.stderr)[-1500:]):
        return
    p = subprocess.run(["/usr/bin/python3", "-c", SCRIPT, root], cwd=root, env=env,
                       capture_output=True, text=True, timeout=180)
    if not ctx.check(p.returncode == 0, "the Django program ran: %s" % p.stderr[-2500:]):
        return
    import json
    r = json.loads(p.stdout.strip().splitlines()[-1])
    apps = dict(r["migrations"])
    ctx.check(apps == {"djapp": 1}, "migrate ran and recorded the app's migration: %r" % r["migrations"])
    ctx.check(r["shelf_ids"] == [1, 2], "AutoField keys: %r" % r["shelf_ids"])
    ctx.check(r["count"] == 6, "created: %r" % r["count"])
    ctx.check(r["after"] == [["t1", 2.0], ["t2", 4.0], ["t3", 6.0], ["t4", 9.0], ["t5", 11.0]],
              "update with F() and delete: %r" % r["after"])
    agg = r["agg"]
    ctx.check(agg["n"] == 5 and agg["total"] == 15 and abs(agg["avg"] - 6.4) < 1e-9 and agg["top"] == 11.0,
              "aggregate: %r" % agg)
    ctx.check(r["per_shelf"] == [[1, 3, 9], [2, 2, 6]], "annotate per group: %r" % r["per_shelf"])
    ctx.check(r["q"] == ["t1", "t5"], "Q objects: %r" % r["q"])
    ctx.check(r["rolled_back"] == 0, "transaction.atomic rolled back: %r" % r["rolled_back"])
    ctx.check(r["get"] == 3, "get(): %r" % r["get"])
    ctx.check(r["nested"] == ["kept", "outer"],
              "nested atomic(): the inner block rolled back to its savepoint: %r" % r["nested"])
    migrate_more(ctx, root, env)
