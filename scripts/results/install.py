"""Results page: what an install costs (scripts/record_install.py), and its table for docs/index.md."""

from _lib import Context

TITLE = "What an install costs"
NAV = ""
ORDER = 65


def render(ctx: Context) -> str:
    return ctx.page()


def blocks(ctx: Context) -> dict[str, str]:
    """Getting started's table of the installs: the core alone beside the extras."""
    return {"install": ctx.table("install", title=False)}
