"""node-postgres (npm pg 8) and Quarry's types: conformance/types_node.mjs node-pg."""


def run(ctx):
    ctx.node("types_node.mjs", args=["node-pg"])
