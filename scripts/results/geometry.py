"""Results page: Geometry of trained models (the template geometry.md, its tables from results/)."""

from _lib import Context

TITLE = "Geometry of trained models"
NAV = ""
ORDER = 50


def render(ctx: Context) -> str:
    return ctx.page(owns=())
