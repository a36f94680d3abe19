"""Results page: The tuning searches (the template tuning.md, its tables from results/)."""

from _lib import Context

TITLE = "The tuning searches"
NAV = ""
ORDER = 40


def render(ctx: Context) -> str:
    searches = ("bijection", "changepoint", "dirichlet", "hmm", "kalman", "recall", "regression", "sula")
    return ctx.page(owns=tuple(f"tuning-{s}" for s in searches))
