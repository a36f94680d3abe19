"""Results page: What Mamba needs for transport (the template mamba_transport.md, its tables from results/)."""

from _lib import Context

TITLE = "What Mamba needs for transport"
NAV = ""
ORDER = 45


def render(ctx: Context) -> str:
    return ctx.page(owns=())
