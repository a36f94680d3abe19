"""Results page: Benchmarks (the template benchmarks.md, its tables from results/)."""

from _lib import Context

TITLE = "Benchmarks"
NAV = ""
ORDER = 60


def render(ctx: Context) -> str:
    return ctx.page(owns=())
