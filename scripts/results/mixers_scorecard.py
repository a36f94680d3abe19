"""The primitive scorecard of every built-in mixer, its heat map, the ladders, the three newest
tunnels and what a scorecard costs."""

from _lib import Context, number

TITLE = "The primitive scorecard"
NAV = ""
ORDER = 30
PRIMITIVES = ("accumulation", "transport", "binding", "continuous", "sula", "continuous_transport", "counting", "revision")


def render(ctx: Context) -> str:
    import _plots

    figure = ctx.figure("heatmap", _plots.heatmap, heatmap_data(ctx.data("scorecard")),
                        "The primitive scorecard: each mixer's score per primitive (0 = the best baseline, 1 = Bayes)")
    kalman = ctx.curves("kalman-curves", "new-tunnels", every=150, unit="training step",
                        ylabel="probe KL(Bayes‖model) (bits)")
    return ctx.page(owns=("ladders", "new-tunnels", "scorecard-cost"),
                    figures={"heatmap": figure, "kalman-curves": kalman})


def heatmap_data(rec: dict) -> dict:
    rows = rec["rows"]
    return {"title": "", "rows": [r["model"] for r in rows], "cols": [p.replace("_", " ") for p in PRIMITIVES],
            "scores": [[number(r[p]) for p in PRIMITIVES] for r in rows],
            "verdicts": [[r[p].get("verdict", "") for p in PRIMITIVES] for r in rows]}


def blocks(ctx: Context) -> dict[str, str]:
    """docs/models.md's table of parameter counts at the quick profiles' sizes."""
    return {"models-capacity": ctx.table("quick", "capacity", title=False)}
