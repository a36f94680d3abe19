"""Results page: Benchmarks (the template benchmarks.md, its tables from results/)."""

import re

from _lib import Context

TITLE = "Benchmarks"
NAV = ""
ORDER = 60


def render(ctx: Context) -> str:
    return ctx.page(owns=(), tables={"findings": findings(ctx)})


def findings(ctx: Context) -> str:
    """The opening sentences, read from the speed, sampling and diagnostics tables."""
    speed = {r["size"].split(":")[0]: re.search(r"[\d.]+x", r["mamba_transformer"])[0] for r in ctx.data("mamba-speed")["rows"]}
    shares = [r["share_of_a_step"] for r in ctx.data("task-sampling")["rows"]]
    worst = max(shares, key=lambda s: float(s.rstrip("%")))
    diagnose = ctx.data("diagnose")["rows"][0]
    return (f"On 2 CPU cores Mamba's training step runs at {speed['quick']} the same-size transformer's speed at "
            f"the quick size and {speed['paper']} at the paper's. Sampling a batch with its exact posterior costs "
            f"at most {worst} of a training step on any tunnel, and `windtunnel diagnose` takes {diagnose['total']} "
            f"on a quick run ({diagnose['col']}).")
