"""Results page: The tuning searches, tunnel by tunnel (the template tuning_searches.md): every
search, its checks and the ladders at the committed rates, with their tables from results/."""

from _lib import Context

TITLE = "The tuning searches, tunnel by tunnel"
NAV = "The tuning searches"
NAV_TITLE = "Tunnel by tunnel"
ORDER = 41
DATA = "tuning-*"  # the folders it reads (the page's header names them)


def render(ctx: Context) -> str:
    searches = ("bijection", "changepoint", "dirichlet", "hmm", "kalman", "recall", "regression", "sula")
    kl = "probe KL(Bayes‖model) (bits)"
    figures = {"hmm-winner-curves": ctx.curves("winner-curves", "tuning-hmm", every=150, unit="training step", ylabel=kl),
               "regression-curves": ctx.curves("curves", "tuning-regression", every=150, unit="training step", ylabel=kl),
               "regression-d2-curves": ctx.curves("d2-curves", "tuning-regression", every=150, unit="training step",
                                                  ylabel=kl)}
    return ctx.page(owns=tuple(f"tuning-{s}" for s in searches), figures=figures)
