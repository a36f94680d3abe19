"""Results page: Geometry of trained models (the template geometry.md, its tables from results/)."""

from _lib import Context

TITLE = "Geometry of trained models"
NAV = ""
ORDER = 50


def render(ctx: Context) -> str:
    return ctx.page(owns=(), tables={"findings": findings(ctx.data("paper1-claims"))})


def findings(rec: dict) -> str:
    """The opening sentence: how many of Paper I's geometric claims hold at the quick scale."""
    verdicts = [r["verdict"] for r in rec["rows"]]
    counts = {v: verdicts.count(v) for v in dict.fromkeys(verdicts)}
    said = "; ".join(f"{v}: {n}" for v, n in counts.items())
    return (f"Of Paper I's {len(verdicts)} geometric claims judged on the quick profiles' transformer and Mamba "
            f"(the table below): {said}. The models are far from the paper's training budget, so a claim that does "
            "not hold here is not refuted at the paper's scale.")
