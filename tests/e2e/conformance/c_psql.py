"""psql: connects, and the server reports itself as PostgreSQL 15 compatible."""


def run(ctx):
    rc, out, err = ctx.srv.psql("-At", "-c", "SELECT 1 + 1, current_database()")
    ctx.check(rc == 0 and out.strip() == "2|quarry", "psql -c runs a query: %r %r" % (out, err))
    rc, out, err = ctx.srv.psql("-At", "-c", "SHOW server_version_num")
    ctx.check(rc == 0 and out.strip().startswith("15"), "server_version_num is 15xxxx: %r" % out)
