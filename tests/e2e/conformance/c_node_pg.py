"""node-postgres (npm pg 8 with pg-cursor): conformance/node_pg.mjs."""


def run(ctx):
    ctx.node("node_pg.mjs")
