"""The primitive scorecard of every built-in mixer, its heat map, the ladders, the three newest
tunnels and what a scorecard costs."""

import re

from _lib import Context, listed, number, provenance_line
from _tables import render_table

TITLE = "The primitive scorecard"
NAV = ""
ORDER = 30
PRIMITIVES = ("accumulation", "transport", "binding", "continuous", "sula", "continuous_transport", "counting", "revision")
#: why a registered mixer is not in the scorecard (a mixer missing from it without a reason here fails the rendering)
LEFT_OUT = {"mamba2": "it needs the `llm` extra",
            "tinygpt": "Paper I's transformer with the authors' defaults, studied on [the key-frame page](keyframe.md)"}


def render(ctx: Context) -> str:
    import _plots

    scorecard = ctx.data("scorecard")
    figure = ctx.figure("heatmap", _plots.heatmap, heatmap_data(scorecard),
                        "The primitive scorecard: each mixer's score per primitive (0 = the best baseline, 1 = Bayes)")
    kalman = ctx.curves("kalman-curves", "new-tunnels", every=150, unit="training step",
                        ylabel="probe KL(Bayes‖model) (bits)")
    return ctx.page(owns=("ladders", "new-tunnels", "scorecard-cost", "scorecard-agreement"),
                    figures={"heatmap": figure, "kalman-curves": kalman},
                    tables={"shipped-reference": shipped_reference(), "left-out": left_out(scorecard),
                            "decisive-cost": decisive_cost(ctx), "decisive-timed": decisive_timed(ctx),
                            "findings": findings(scorecard)})


def findings(rec: dict) -> str:
    """The opening sentences: per primitive, which mixers realise it (✓) and partly (~), the
    primitives every mixer realises said once."""
    rows = rec["rows"]
    every, said = [], []
    for p in PRIMITIVES:
        name = p.replace("_", " ")
        realised = [r["model"] for r in rows if r[p].get("verdict") == "✓"]
        partly = [r["model"] for r in rows if r[p].get("verdict") == "~"]
        if len(realised) == len(rows):
            every.append(name)
        else:
            said.append(f"{name} by {listed(realised) or 'none'}" + (f" (partly by {listed(partly)})" if partly else ""))
    return (f"{len(rows)} mixers on the {len(PRIMITIVES)} inference primitives, one seed each on 2 CPU cores. "
            + (f"Every mixer realises {listed(every, code=False)}. " if every else "")
            + "Realised: " + "; ".join(said) + ". The ladders, what a scorecard costs and how often its quick "
            "defaults give the full-budget verdicts follow.")


#: the priced protocols of benchmarks/bench_scorecard_budget.py, by the start of their summary line
PRICED = (("the floor", "one rate per tunnel, no search (the floor)"),
          ("the default", "the default: three rates, each trained to the end"),
          ("now, at most (the model alone, annealed searches with the guard holding",
           "the annealed search, the guard holding (before it settles)"))


#: the records of benchmarks/bench_scorecard_budget.py, one per priced mixer
PRICED_RECORDS = ("priced", "priced-rope")


def priced_minutes(output: list[str], start: str) -> tuple[float, float]:
    """A priced protocol's (core-minutes, minutes on two workers), from the summary line that
    begins with ``start`` in a priced record's output."""
    line = next(x for x in output if x.startswith(start))
    core, wall = re.search(r"([\d.]+) core-min, ([\d.]+) min on", line).groups()
    return float(core), float(wall)


def scored_model(text: str) -> str:
    """The model a scorecard record is of, from its title or its first output line."""
    return re.search(r"scorecard of (\S+)", text).group(1)


def decisive_cost(ctx: Context) -> str:
    """Each priced mixer's scorecard at the reference's shape: the floor, the default search and
    the annealed one, as upper bounds (no run stopped early), in minutes on two workers."""
    rows, lines = [], []
    for name in PRICED_RECORDS:
        doc = ctx.data(name, "scorecard-cost")
        row = {"model": f"`{scored_model(doc['title'])}`"}
        for i, (start, _) in enumerate(PRICED):
            core, wall = priced_minutes(doc["output"], start)
            row[f"p{i}"] = f"{wall:.0f} min ({core:.0f} core-min)"
        rows.append(row)
        lines.append(provenance_line(doc["provenance"], f"scorecard-cost/{name}.json"))
    table = render_table({"columns": [{"key": "model", "label": "model"},
                                      *({"key": f"p{i}", "label": label} for i, (_, label) in enumerate(PRICED))],
                          "rows": rows})
    return table + "\n\n" + "<br>\n".join(lines)


#: the time a decisive scorecard of a user's model is to take on two cores, and the aim (issue 54), in minutes
TARGET_MIN, AIM_MIN = 60, 30


def decisive_timed(ctx: Context) -> str:
    """The decisive default scorecards timed with GNU time (results/scorecard-cost/decisive-*.json):
    wall and CPU time against the target and against the same model's price, its verdicts left
    unsettled, and the records' provenance; a row saying so for each model not timed yet."""
    timed, rows, lines = {}, [], []
    for name in sorted(p.stem for p in (ctx.root / "results" / "scorecard-cost").glob("decisive-*.json")):
        doc = ctx.data(name, "scorecard-cost")
        ctx.used.add(f"scorecard-cost/{name}")
        timed[scored_model(doc["title"])] = (name, doc)
    for priced in PRICED_RECORDS:
        doc = ctx.data(priced, "scorecard-cost")
        model, price = scored_model(doc["title"]), f"{priced_minutes(doc['output'], 'the default')[1]:.0f} min"
        if model not in timed:
            rows.append({"model": f"`{model}`", "wall": "not timed yet", "cpu": "-", "same": "-", "unsettled": "-",
                         "priced": price, "target": f"{TARGET_MIN} min (aim {AIM_MIN})"})
            continue
        name, doc = timed[model]
        p = doc["provenance"]
        wall, cpu = (float(p[k].split()[0]) / 60 for k in ("wall_time", "cpu_time"))
        unsettled = sum(1 for r in doc["rows"] if "?" in r["model"])
        rows.append({"model": f"`{model}`", "wall": f"{wall:.0f} min", "cpu": f"{cpu:.0f} core-min",
                     "same": _same_verdicts(ctx, model, doc),
                     "unsettled": f"{unsettled} of {len(doc['rows'])}", "priced": price,
                     "target": f"{TARGET_MIN} min (aim {AIM_MIN}): "
                               + ("met" if wall <= TARGET_MIN else f"{wall / TARGET_MIN:.1f}x over")})
        lines.append(provenance_line(p, f"scorecard-cost/{name}.json"))
    columns = (("model", "model"), ("wall", "timed: wall, 2 cores"), ("cpu", "CPU"), ("same", "verdicts as before"),
               ("unsettled", "verdicts left with a ?"), ("priced", "priced default (at most)"), ("target", "the target"))
    table = render_table({"columns": [{"key": k, "label": v} for k, v in columns], "rows": rows})
    picked = "; ".join(_rates_picked(model, doc) for model, (_, doc) in timed.items())
    return table + ("\n\n" + "<br>\n".join(lines) if lines else "") + (
        f"\n\nThe rates the searches picked, tunnel by tunnel: {picked}." if picked else "")


def _rates_picked(model: str, doc: dict) -> str:
    """How often each candidate rate won a timed scorecard's searches, and how many of those wins
    the cheaper two-rate set of the candidates' study (the upper two) would not have held."""
    from windtunnel.scorecard.request import SCORECARD_LRS

    def held(w: float, rates: list[float]) -> bool:  # the rates as written, to three significant digits
        return any(abs(w - lr) <= 0.01 * lr for lr in rates)

    won = [float(r["lr"]) for r in doc["rows"] if r.get("lr", "-") != "-"]
    counts = ", ".join(f"{lr:g} on {sum(held(w, [lr]) for w in won)}" for lr in SCORECARD_LRS)
    outside = sum(not held(w, SCORECARD_LRS[1:]) for w in won)
    return f"`{model}` {counts} ({outside} of {len(won)} outside the upper two)"


#: an earlier scorecard of the same model to set a timed one beside: the record and how it was made
BEFORE = {"my_mixer:EMAMixer": ("settled", "the old 2-layer shape, annealed search, settled")}


def _same_verdicts(ctx: Context, model: str, doc: dict) -> str:
    """How many primitives get the same verdict word as the model's earlier recorded scorecard."""
    if model not in BEFORE:
        return "no earlier record"
    name, how = BEFORE[model]
    before = {r["primitive"]: r["model"].split()[0].rstrip("?") for r in ctx.data(name, "scorecard-cost")["rows"]}
    now = {r["primitive"]: r["model"].split()[0].rstrip("?") for r in doc["rows"]}
    same = sum(before.get(p) == v for p, v in now.items())
    return f"{same} of {len(now)} ({how})"


def left_out(rec: dict) -> str:
    """"every built-in mixer but ...": the registered mixers the scorecard leaves out, each with its
    reason (from LEFT_OUT)."""
    import windtunnel.models  # noqa: F401  (registers every built-in model)
    from windtunnel.models.base import MODELS

    missing = sorted(set(MODELS.names()) - {r["model"] for r in rec["rows"]})
    unexplained = [m for m in missing if m not in LEFT_OUT]
    if unexplained:
        raise ValueError(f"mixers-scorecard: registered mixers without a scorecard row or a reason in LEFT_OUT: {unexplained}")
    named = [f"`{m}` ({LEFT_OUT[m]})" for m in missing]
    return "every built-in mixer" + (f" but {', '.join(named[:-1])} and {named[-1]}" if len(named) > 1 else
                                     f" but {named[0]}" if named else "")


def shipped_reference() -> str:
    """The quick profile's shipped reference (the package's data, validated as a scorecard reads
    it): a row per rung, with the file's provenance."""
    from windtunnel.scorecard.reference import load_reference
    from windtunnel.sweep.markdown import _MARK as verdicts  # the sweep tables' verdict marks

    data = load_reference("quick")
    columns = [("rule", "primitive@rung"), ("experiment", "tunnel@rung"), ("metric", "metric"), ("value", "value [95% CI]"),
               ("score", "score"), ("verdict", "verdict"), ("steps_to_realise", "steps to realise")]
    rows = [{"rule": r.rule, "experiment": r.experiment, "metric": r.metric,
             "value": f"{r.value:.4g} [{r.lo:.4g}, {r.hi:.4g}]", "score": f"{r.score:.2f}",
             "verdict": verdicts[r.verdict],
             "steps_to_realise": f"{r.steps_to_realise} of {r.budget_steps}" if r.steps_to_realise is not None else "-"}
            for r in sorted(data.rungs, key=lambda r: r.rule)]
    table = render_table({"columns": [{"key": k, "label": v} for k, v in columns], "rows": rows})
    provenance = {"command": data.command, "commit": data.commit, "date": data.date, "machine": data.machine,
                  "concurrent": data.concurrent, "torch": data.torch}
    return table + "\n\n" + provenance_line(provenance, "src/windtunnel/data/reference/quick.json")


def heatmap_data(rec: dict) -> dict:
    """Each mixer's score per primitive, the columns named by their primitive and tunnel."""
    from windtunnel.sweep.primitives import PRIMITIVES as TUNNELS

    rows = rec["rows"]
    return {"title": "The primitive scorecard (quick profiles, one seed): each mixer's score and verdict per primitive",
            "xlabel": "primitive (its tunnel)", "ylabel": "mixer", "rows": [r["model"] for r in rows],
            "cols": [f"{p.replace('_', chr(10))}\n({TUNNELS[p][0]})" for p in PRIMITIVES],
            "scores": [[number(r[p]) for p in PRIMITIVES] for r in rows],
            "verdicts": [[r[p].get("verdict", "") for p in PRIMITIVES] for r in rows]}


def blocks(ctx: Context) -> dict[str, str]:
    """docs/models.md's table of parameter counts at the quick profiles' sizes, and each mixer's
    spread against the transformer's count."""
    table = ctx.table("quick", "capacity", title=False)
    return {"models-capacity": table + "\n\n" + capacity_spread(ctx.data("quick", "capacity"))}


def capacity_spread(rec: dict) -> str:
    """One line: how far each mixer's count lies from the transformer's, over the tasks."""
    def count(cell) -> int:
        return int(str(cell).split(" (")[0].replace(",", ""))

    mixers = [c["key"] for c in rec["columns"][1:] if c["key"] != "transformer"]
    parts = []
    for m in mixers:
        rel = [100 * (count(r[m]) / count(r["transformer"]) - 1) for r in rec["rows"]]
        lo, hi = min(rel), max(rel)
        parts.append(f"{m} {'exactly' if lo == hi == 0 else f'{lo:+.2f}% to {hi:+.2f}%'.replace('-', '−')}")
    return "Against the transformer's count, over these tasks: " + "; ".join(parts) + "."
