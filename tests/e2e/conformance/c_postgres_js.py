"""postgres.js (npm postgres 3): conformance/postgres_js.mjs."""


def run(ctx):
    ctx.node("postgres_js.mjs")
