"""postgres.js (npm postgres 3) and Quarry's types: conformance/types_node.mjs postgres.js."""


def run(ctx):
    ctx.node("types_node.mjs", args=["postgres.js"])
