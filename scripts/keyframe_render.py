"""Render the key-frame study (``scripts/keyframe_study.py``) from its results JSON alone:
``docs/results/keyframe.md`` and its figures, deterministically (the same JSON gives the same
bytes; ``tests/test_keyframe_results.py`` checks the committed page and figures against it).

Every number on the page is computed here from ``results/keyframe/*.json`` (and, when present,
``results/keyframe/gpu/*.json``); the prose around the tables only names them.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from windtunnel import stats
from windtunnel.figures import plt, save_figure
from windtunnel.tables import table

#: Paper I (v3, per summary C): layer-0 mean |off-diagonal cosine| of the hypothesis tokens' keys
PAPER_TRAINED, PAPER_RANDOM = 0.052, 0.082
#: the authors' "production" and v1 budgets (steps), for the extrapolation
PAPER_STEPS = (50_000, 100_000)
FACTORS = ("model", "format", "head", "norm", "bias", "init", "task")
HEADLINE = ("transformer", "tinygpt")
FRAME_RATIO, FRAME_DAMAGE = 2.0, 2.0  # a frame head: >= 2x the runner-up's damage, and the error at least doubled
PNG = {"Software": None}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")  # one per line of a figure, with its colour


# ---------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------
def load(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(Path(folder).glob("*.json"))]


def by_cell(docs: list[dict]) -> dict[tuple[str, int], list[dict]]:
    out: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for d in sorted(docs, key=lambda d: d["seed"]):
        out[(d["cell"], d["budget"])].append(d)
    return out


def cell_order(cells) -> list[str]:
    """Cells by factor (FACTORS order), then by model (the transformer's first: a cell's name starts
    with its model's), the model's own row first, then by name."""
    def key(cell: tuple[str, str]) -> tuple:
        name, factor = cell
        model = name.split("-")[0]
        return (FACTORS.index(factor) if factor in FACTORS else len(FACTORS),
                HEADLINE.index(model) if model in HEADLINE else len(HEADLINE), name not in HEADLINE, name)
    return [name for name, _ in sorted(set(cells), key=key)]


def raw0(d: dict) -> float:
    return d["key_frame"]["tokens_raw"]["mean"][0]


def centred0(d: dict) -> float:
    return d["key_frame"]["tokens_centred"]["mean"][0]


def values0(g: list[dict]) -> str:
    """The value tokens' layer-0 raw / centred statistic (sep-vocab; in the paired format the
    values are the key tokens)."""
    if "value_tokens_raw" not in g[0]["key_frame"]:
        return "(= keys)"
    return " / ".join(ms([d["key_frame"][f"value_tokens_{v}"]["mean"][0] for d in g]) for v in ("raw", "centred"))


def error(d: dict) -> float:
    return d["entropy_error"]["value"]


def learned(d: dict) -> bool:
    """Whether the run left its plateau: the probe's entropy error at the end below its step-0 value."""
    errors = d["dynamics"]["entropy_error"]
    return errors[-1] < errors[0]


# ---------------------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------------------
def ms(values: list[float], spec: str = ".3f") -> str:
    """Mean, and ± the sample standard deviation over seeds when there are several."""
    v = np.asarray(values, dtype=float)
    if v.size == 1:
        return format(v[0], spec)
    return f"{format(v.mean(), spec)} ± {format(v.std(ddof=1), spec)}"


def mean(values) -> float:
    return float(np.mean(values))


def head_kind(mc: dict) -> str:
    return "untied" if not mc["tie_head"] else f"tied, {mc['tie_scope']}"


def steps_text(n: float) -> str:
    if not math.isfinite(n):
        return "never (not falling)"
    if n >= 1e6:
        return f"{n:.1e}"
    return f"{n:,.0f}"


# ---------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------
def factor_table(groups) -> list[str]:
    cells = cell_order((c, g[0]["factor"]) for (c, b), g in groups.items() if b == 1)
    rows = []
    for cell in cells:
        g = groups[(cell, 1)]
        d, mc = g[0], g[0]["model_config"]
        per_layer = [ms([x["key_frame"]["tokens_raw"]["mean"][i] for x in g]) for i in range(1, mc["n_layers"])]
        rows.append([f"`{cell}`", d["factor"], d["model"], d["format"], head_kind(mc), mc["norm"],
                     "yes" if mc["bias"] else "no", mc["init"], f"{d['n_params']:,}", str(len(g)),
                     f"**{ms([raw0(x) for x in g])}**", ms([centred0(x) for x in g]), " / ".join(per_layer),
                     f"{mean([x['key_frame']['tokens_raw']['random'][0] for x in g]):.3f}", values0(g),
                     ms([error(x) for x in g], ".4f")])
    return table(["cell", "factor", "model", "format", "head", "norm", "biases", "init", "params", "seeds",
                  "L0 keys, raw", "L0 keys, centred", "L1 / L2 raw", "random (L0)", "value tokens L0 raw / centred",
                  "entropy error (bits)"], rows)


def budget_table(groups) -> list[str]:
    rows = []
    for cell in cell_order((c, g[0]["factor"]) for (c, b), g in groups.items() if b > 1):
        for budget in sorted(b for (c, b) in groups if c == cell):
            g = groups[(cell, budget)]
            n_layers = g[0]["model_config"]["n_layers"]
            per_layer = [ms([x["key_frame"]["tokens_raw"]["mean"][i] for x in g]) for i in range(1, n_layers)]
            rows.append([f"`{cell}`", f"{budget}x", f"{g[0]['steps']:,}", str(len(g)), f"**{ms([raw0(x) for x in g])}**",
                         ms([centred0(x) for x in g]), " / ".join(per_layer),
                         f"{mean([x['key_frame']['tokens_raw']['init'][0] for x in g]):.3f}", values0(g),
                         ms([error(x) for x in g], ".4f")])
    return table(["cell", "budget", "steps", "seeds", "L0 keys, raw", "L0 keys, centred", "L1 / L2 raw", "step 0 (L0)",
                  "value tokens L0 raw / centred", "entropy error (bits)"], rows)


def measure_table(groups) -> list[str]:
    rows = []
    for (cell, budget), g in sorted(groups.items(), key=lambda kv: (kv[0][0] not in HEADLINE, kv[0])):
        if cell not in HEADLINE and not (cell.endswith("-paired") and budget == 1):
            continue
        kf = [x["key_frame"] for x in g]
        wl = kf[0]["whole_layer_raw"]
        rows.append([f"`{cell}`", f"{budget}x", ms([k["tokens_raw"]["mean"][0] for k in kf]),
                     f"{mean([k['tokens_raw']['init'][0] for k in kf]):.3f}",
                     f"{mean([k['tokens_raw']['random'][0] for k in kf]):.3f}", f"{wl['gaussian_d_head']:.3f}",
                     ms([k["whole_layer_raw"]["mean"][0] for k in kf]),
                     f"{mean([k['whole_layer_raw']['init'][0] for k in kf]):.3f}", f"{wl['gaussian']:.3f}"])
    return table(["cell", "budget", "per head: trained", "step 0", "random", "Gaussian, d_head",
                  "whole layer: trained", "step 0", "Gaussian, d_model"], rows)


def paper_random_dimension() -> int:
    """The dimension d whose Gaussian E|cos| is closest to the paper's random value."""
    return min(range(2, 4097), key=lambda d: abs(stats.gaussian_abs_cosine(d) - PAPER_RANDOM))


def frame_verdict(d: dict) -> str:
    fh, heads = d["ablation"]["frame_head"], d["ablation"]["heads"]
    damage = heads[0]["ratio"]
    single = fh["ratio_to_second"] >= FRAME_RATIO and damage >= FRAME_DAMAGE and heads[0]["delta_lo"] > 0
    return "**single frame head**" if single else "distributed"


def ablation_table(docs) -> list[str]:
    rows = []
    order = cell_order((d["cell"], d["factor"]) for d in docs)
    for d in sorted(docs, key=lambda d: (order.index(d["cell"]), d["budget"], d["seed"])):
        a = d["ablation"]
        top, second = a["heads"][0], a["heads"][1]
        block = max((b for b in a["blocks"] if b["name"].endswith(".block")), key=lambda b: b["ratio"])
        rows.append([f"`{d['cell']}`", f"{d['budget']}x", str(d["seed"]), f"{a['baseline_entropy_error']:.4f}",
                     f"{top['name']} {top['delta_entropy_error']:+.4f} [{top['delta_lo']:+.4f}, {top['delta_hi']:+.4f}]",
                     f"×{top['ratio']:.2f}", f"{second['name']} {second['delta_entropy_error']:+.4f}",
                     f"{a['frame_head']['ratio_to_second']:.2f}", str(a["frame_head"]["n_heads_at_least_half"]),
                     f"{block['name']} ×{block['ratio']:.1f}", frame_verdict(d)])
    return table(["cell", "budget", "seed", "error (bits)", "top head: Δ error [95% CI]", "error ×", "runner-up",
                  "top / runner-up", "heads ≥ half", "worst block bypass", "verdict"], rows)


# ---------------------------------------------------------------------------------------
# Extrapolation
# ---------------------------------------------------------------------------------------
def cell_budgets(groups, cell: str) -> list[int]:
    """The budgets at which ``cell`` ran, smallest first."""
    return sorted(b for (c, b) in groups if c == cell)


def budget_fit(groups, cell: str, variant: str = "tokens_raw") -> dict | None:
    """Least squares of the end-of-run layer-0 statistic ``variant`` (seed means) on log10(steps)
    over the budgets of ``cell``; the steps at which the line reaches the random value and the
    paper's level (the paper's trained/random ratio times our random value), and its value at
    the paper's budgets."""
    budgets = cell_budgets(groups, cell)
    if len(budgets) < 2:
        return None
    x = np.log10([groups[(cell, b)][0]["steps"] for b in budgets])
    y = np.array([mean([d["key_frame"][variant]["mean"][0] for d in groups[(cell, b)]]) for b in budgets])
    slope, icpt = np.polyfit(x, y, 1)
    random = mean([d["key_frame"][variant]["random"][0] for b in budgets for d in groups[(cell, b)]])
    target = PAPER_TRAINED / PAPER_RANDOM * random

    def reach(v: float) -> float:
        return 10 ** ((v - icpt) / slope) if slope < 0 and v < icpt + slope * x[-1] else float("inf")

    return {"slope": float(slope), "random": random, "target": target, "steps_random": reach(random),
            "steps_target": reach(target), "at_paper": [float(icpt + slope * math.log10(s)) for s in PAPER_STEPS],
            "points": len(budgets)}


def extrapolation_table(groups) -> list[str]:
    rows = []
    cells = cell_order((c, g[0]["factor"]) for (c, b), g in groups.items() if b > 1)
    for cell, variant in ((c, v) for c in cells for v in ("tokens_raw", "tokens_centred")):
        fit = budget_fit(groups, cell, variant)
        if fit is not None:
            rows.append([f"`{cell}`", variant.removeprefix("tokens_"), str(fit["points"]), f"{fit['slope']:+.3f}",
                         " / ".join(f"{v:.3f}" if v <= 1 else "> 1" for v in fit["at_paper"]), f"{fit['random']:.3f}",
                         steps_text(fit["steps_random"]), f"{fit['target']:.3f}", steps_text(fit["steps_target"])])
    return table(["cell", "keys", "budgets", "L0 statistic per decade of steps", "line at 50k / 100k steps", "random",
                  "steps to reach random", "paper's level (scaled)", "steps to reach it"], rows)


# ---------------------------------------------------------------------------------------
# Findings stated from the data
# ---------------------------------------------------------------------------------------
def single_factor_effects(groups, base: str) -> list[tuple[str, str, float, float]]:
    """(cell, factor, baseline L0 raw, cell L0 raw) of the one-factor cells of ``base``'s model at 1x."""
    if (base, 1) not in groups:
        return []
    model = groups[(base, 1)][0]["model"]
    b = mean([raw0(d) for d in groups[(base, 1)]])
    out = []
    for (cell, budget), g in groups.items():
        if budget == 1 and cell != base and g[0]["model"] == model:
            out.append((cell, g[0]["factor"], b, mean([raw0(d) for d in g])))
    return sorted(out, key=lambda t: -abs(t[3] - t[2]))


def findings(groups, docs) -> list[str]:
    lines = []
    for base in HEADLINE:
        eff = single_factor_effects(groups, base)
        if eff:
            parts = ", ".join(f"`{c}` {v:.3f} ({v - b:+.3f})" for c, _, b, v in eff)
            lines.append(f"- From `{base}` ({eff[0][2]:.3f} at 1x), one factor at a time, largest change first: {parts}.")
    if ("transformer", 1) in groups and ("tinygpt", 1) in groups:
        t, g = (mean([raw0(d) for d in groups[(c, 1)]]) for c in HEADLINE)
        lines.append(f"- Model against model at 1x (sep-vocab): `transformer` {t:.3f}, `tinygpt` {g:.3f}; "
                     f"random {mean([d['key_frame']['tokens_raw']['random'][0] for d in groups[('transformer', 1)]]):.3f}.")
    for fmt in sorted({d["format"] for d in docs}, reverse=True):
        mine = [d for d in docs if d["format"] == fmt and not d["task_params"].get("with_replacement", False)]
        for name, get in (("raw", raw0), ("centred", centred0)):
            v = [get(d) for d in mine]
            r = mean([d["key_frame"][f"tokens_{name}"]["random"][0] for d in mine])
            lines.append(f"- Layer-0 keys, {name}, every {fmt} run with keys drawn without replacement ({len(mine)}): "
                         f"{min(v):.3f} to {max(v):.3f} "
                         f"(random {r:.3f}).")
    for cell in HEADLINE:
        budgets = sorted(b for (c, b) in groups if c == cell)
        if len(budgets) > 1:
            path = " → ".join(f"{b}x {mean([raw0(d) for d in groups[(cell, b)]]):.3f} / "
                              f"{mean([centred0(d) for d in groups[(cell, b)]]):.3f}" for b in budgets)
            lines.append(f"- Budget, `{cell}` (L0 raw / centred, seed means): {path}.")
    for name in ("raw", "centred"):
        below = [d["job"] for d in docs if d["key_frame"][f"tokens_{name}"]["p_below_random_layer0"] < 0.05]
        lines.append(f"- Runs whose layer-0 {name} statistic is below its random value with Monte Carlo p < 0.05 "
                     f"(the paper's direction): {len(below)} of {len(docs)}" + (f" ({', '.join(below)})." if below else "."))
    flat = [d["job"] for d in docs if not learned(d)]
    lines.append(f"- Runs that never left the plateau (entropy error at the end not below its step-0 value; their keys "
                 f"say nothing about the frame): {len(flat)} of {len(docs)}" + (f" ({', '.join(flat)})." if flat else "."))
    frame = [d["job"] for d in docs if frame_verdict(d).startswith("**")]
    lines.append(f"- Runs with a single frame head by the rule below: {len(frame)} of {len(docs)}"
                 + (f" ({', '.join(frame)})." if frame else "."))
    return lines


# ---------------------------------------------------------------------------------------
# The geometry guide's conclusions, stated from the data
# ---------------------------------------------------------------------------------------
#: measured with the authors' unchanged TinyGPT code (../shared/bench/authors) in the paired format
#: at our 1x budget and at 5x, as recorded in the study's issue (44): layer-0 raw statistic, error
AUTHORS_CODE = {"1x": 0.365, "5x": 0.332, "error_1x": 0.051}
#: where docs/geometry.md holds the conclusions this renders
BLOCK = ("<!-- keyframe:conclusions (generated by `python scripts/keyframe_study.py render`; do not edit) -->",
         "<!-- /keyframe:conclusions -->")


def _r(x: float) -> str:
    return f"{x:.3f}"


def _span(values, spec: str = ".3f") -> str:
    lo, hi = min(values), max(values)
    return format(lo, spec) if format(lo, spec) == format(hi, spec) else f"{format(lo, spec)}-{format(hi, spec)}"


def _seeds(g: list[dict]) -> str:
    return f"{len(g)} seed{'s' if len(g) > 1 else ''}"


def conclusions(groups, docs) -> list[str]:
    """The bullets of docs/geometry.md's key-frame section: every number computed from the jobs'
    results (the authors' code's own numbers are :data:`AUTHORS_CODE`). A bullet whose cells have
    not all run is left out."""
    def g(cell: str, budget: int = 1) -> list[dict]:
        return groups.get((cell, budget), [])

    def have(*cells: str) -> bool:
        return all(g(c) for c in cells)

    rand_raw = mean([d["key_frame"]["tokens_raw"]["random"][0] for d in docs])
    rand_c = mean([d["key_frame"]["tokens_centred"]["random"][0] for d in docs])
    out = [f"What the data say (L0 = layer-0 mean |off-diagonal cosine| of the 20 key tokens' raw keys, per head "
           f"as the authors measure it; random {rand_raw:.3f}; centred: the keys minus their mean, random {rand_c:.3f}; "
           "entropy error in bits):", ""]
    if have("transformer", "tinygpt"):
        t, m = g("transformer"), g("tinygpt")
        line = (f"- **Not the model.** In the sep-vocab format of the main job the authors' architecture is as "
                f"collinear as ours: `tinygpt` L0 {ms([raw0(d) for d in m])} ({_seeds(m)}; centred "
                f"{_r(mean([centred0(d) for d in m]))}, error {mean([error(d) for d in m]):.3f}) against `transformer` "
                f"{ms([raw0(d) for d in t])} ({_seeds(t)}; centred {_r(mean([centred0(d) for d in t]))}, error "
                f"{mean([error(d) for d in t]):.3f}).")
        moves = [(label, cell) for label, cell in (
            ("the transformer's head tied over the whole vocabulary", "transformer-tie-vocab"),
            ("untied", "transformer-untied"), ("`tinygpt`'s tied over the answers only", "tinygpt-tie-answers"),
            ("the transformer with RMSNorm", "transformer-rmsnorm"), ("`tinygpt` with LayerNorm", "tinygpt-layernorm"),
            ("the transformer without biases", "transformer-nobias")) if g(cell)]
        if moves:
            line += (" Neither the head, the norm nor the biases moves it: "
                     + ", ".join(f"{label} {_r(mean([raw0(d) for d in g(cell)]))}" for label, cell in moves) + ".")
        out.append(line)
    if have("transformer-paired", "tinygpt-paired"):
        t, m = g("transformer-paired"), g("tinygpt-paired")
        out.append(f"- **The format.** The paired format gives {ms([raw0(d) for d in t])} (`transformer`, {_seeds(t)}) "
                   f"and {ms([raw0(d) for d in m])} (`tinygpt`, {_seeds(m)}); the authors' own code in that format at "
                   f"the same budget gave {AUTHORS_CODE['1x']} (measured with their code). The comparison that made our "
                   "keys look much more collinear than the authors' model's was a comparison of formats, not of models.")
    sep = [d for d in docs if d["format"] != "paired" and d["model_config"]["init"] != "torch" and learned(d)]
    if sep and have("transformer-init-torch", "tinygpt-init-torch"):
        crossing = []
        for d in (d for c in HEADLINE for d in g(c)):
            dyn = d["dynamics"]
            at = next((i for i, v in enumerate(dyn["tokens_raw_layer0"]) if v >= 0.5), None)
            if at is not None:
                crossing.append((dyn["steps"][at], dyn["entropy_error"][at]))
        t, m = g("transformer-init-torch"), g("tinygpt-init-torch")
        each = f"{len(t)} seeds each" if len(t) == len(m) else f"{_seeds(t)} and {_seeds(m)}"
        short, long_ = [d for d in sep if d["budget"] <= 3], [d for d in sep if d["budget"] > 3]
        short = short or sep  # (a study with only longer runs)
        line = (f"- **The measure reads one shared direction.** In every sep-vocab run with N(0, 0.02) embeddings "
                f"that learned the task up to 3x ({len(short)}) the centred keys sit at "
                f"{_span([centred0(d) for d in short], '.2f')} against {rand_c:.3f} random: the raw statistic's "
                f"{_span([raw0(d) for d in short], '.2f')} is one direction that all 20 key embeddings grow")
        if crossing:
            line += (f" (in the 1x runs of both models it passes 0.5 between steps {min(s for s, _ in crossing)} and "
                     f"{max(s for s, _ in crossing)}, while the error is still above {min(e for _, e in crossing):.2f} bits)")
        if long_:
            line += ("; trained longer, the centred keys leave random too (" + ", ".join(
                f"{_r(centred0(d))} `{d['model']}` at {d['budget']}x" for d in sorted(long_, key=lambda d: d["job"]))
                + "): past that direction the keys gather further, away from a frame")
        line += (f". With PyTorch's N(0, 1) embeddings (`init=torch`, {1 / 0.02:.0f} times the N(0, 0.02) scale of both "
                 "models) the same training leaves it small against the embeddings, in both models: L0 "
                 f"{ms([raw0(d) for d in t])} (`transformer`) and {ms([raw0(d) for d in m])} (`tinygpt`), centred "
                 f"{_r(mean([centred0(d) for d in t]))} and {_r(mean([centred0(d) for d in m]))} (random {rand_c:.3f}), "
                 f"and an error of {mean([error(d) for d in t]):.3f} and {mean([error(d) for d in m]):.3f} "
                 f"({each}). **The initialisation's scale is the factor that makes our raw keys "
                 "collinear**, in our model and the authors' alike; both use the paper's N(0, 0.02), so it is not a "
                 f"departure from the paper. The paper's random value, {PAPER_RANDOM}, is not that of a 32-dimensional "
                 f"head's keys ({stats.gaussian_abs_cosine(32):.3f} for Gaussian vectors, {rand_raw:.3f} measured): it "
                 f"is the Gaussian value of about {paper_random_dimension()} dimensions, so the paper's figure was "
                 "probably not taken on the per-head keys its code measures.")
        out.append(line)
    def budgets(c: str) -> list[int]:
        return cell_budgets(groups, c)

    grown = [c for c in HEADLINE if len(budgets(c)) >= 2]
    if grown:
        def path(values: list[float]) -> str:
            return " → ".join(_r(v) for v in values)

        def when(c: str) -> str:
            bs = budgets(c)
            steps = ", ".join(f"{g(c, b)[0]['steps']:,}" for b in bs)
            return f"over {', '.join(f'{b}x' for b in bs)} ({steps} steps)"

        shared = len({when(c) for c in grown}) == 1  # every model at the same budgets: say them once
        parts = []
        for c in grown:
            bs = budgets(c)
            raw, cen = ([mean([fn(d) for d in g(c, b)]) for b in bs] for fn in (raw0, centred0))
            away = all(y > x for values in (raw, cen) for x, y in zip(values, values[1:]))
            parts.append(f"{'' if shared else when(c) + ' '}`{c}`'s error goes "
                         f"{' → '.join(format(mean([error(d) for d in g(c, b)]), '.3f') for b in bs)} while its "
                         f"keys {'move further from orthogonal' if away else 'go'} (L0 {path(raw)}, centred "
                         f"{path(cen)})")
        lead = (when(grown[0]) + " " if shared else "") + "; ".join(parts)
        below = [d["job"] for d in docs for v in ("raw", "centred")
                 if d["key_frame"][f"tokens_{v}"]["p_below_random_layer0"] < 0.05]
        fits = {c: budget_fit(groups, c) for c in grown}
        longest = {c: budgets(c)[-1] for c in grown}
        line = ("- **Not the budget we can reach.** " + lead[0].upper() + lead[1:]
                + ". The earlier paired run at 10x rose too ([results](results/geometry.md#the-key-frame-over-a-ten-times-"
                f"longer-run)), and the authors' code at 5x stayed at {AUTHORS_CODE['5x']}. "
                + ("No run is below its random value in the paper's direction (Monte Carlo p < 0.05), raw or centred. "
                   if not below else f"Below their random value (p < 0.05): {', '.join(sorted(set(below)))}. ")
                + "The straight line in log10(steps) through the budgets has a slope of "
                + ", ".join(f"{f['slope']:+.3f} per decade (`{c}`)" for c, f in fits.items() if f) + "; ")
        never = all(f and not math.isfinite(f["steps_random"]) and not math.isfinite(f["steps_target"])
                    for f in fits.values())
        target = next(f["target"] for f in fits.values() if f)
        line += ((f"it reaches neither the random value nor the paper's level ({PAPER_TRAINED} / {PAPER_RANDOM} of "
                  f"random, {target:.3f}) at any budget, the paper's {PAPER_STEPS[0] // 1000}k and "
                  f"{PAPER_STEPS[1] // 1000}k steps included: on this trend the claim needs no longer run but another "
                  "regime.") if never else "the extrapolation table on the results page gives the steps it would need.")
        seeds = sorted({len(g(c, longest[c])) for c in grown})
        counts = sorted({len(budgets(c)) for c in grown})
        line += (f" {' or '.join(map(str, counts))} budgets per model, with {' or '.join(map(str, seeds))} "
                 f"seed{'s' if seeds != [1] else ''} at the longest, are a thin basis for a line.")
        out.append(line)
    singles = [d for d in docs if frame_verdict(d).startswith("**")]
    others = [d for d in docs if d not in singles]
    near = [d for d in others if d["ablation"]["heads"][0]["ratio"] >= FRAME_DAMAGE
            and d["ablation"]["frame_head"]["ratio_to_second"] >= 0.9 * FRAME_RATIO]

    def head(d: dict) -> str:
        return (f"`{d['job']}` {d['ablation']['heads'][0]['name']} (error ×{d['ablation']['heads'][0]['ratio']:.2f}, "
                f"{d['ablation']['frame_head']['ratio_to_second']:.2f}× the runner-up)")
    verb = "doubles" if FRAME_DAMAGE == 2 else f"multiplies by {FRAME_DAMAGE:g}"
    line = (f"- **A frame head by seed, not by orthogonality.** {len(singles)} run{'s' if len(singles) != 1 else ''} of "
            f"{len(docs)} {'has' if len(singles) == 1 else 'have'} a single frame head by the rule (the most damaging "
            f"head does at least {FRAME_RATIO:g}x the runner-up's damage and at least {verb} the error)"
            + (": " + "; ".join(f"{head(d)}, with L0 keys at {_r(raw0(d))}" for d in singles) if singles else "")
            + ".")
    if near:
        line += " Near misses (at least 0.9x the rule's ratio): " + "; ".join(head(d) for d in near) + "."
    rest = [d for d in others if d not in near]
    if rest:
        spread = _span([d["ablation"]["frame_head"]["ratio_to_second"] for d in rest], ".2f")
        line += f" The other runs' most damaging head does {spread}x the runner-up's damage."
    torch_init = [d for d in docs if d["model_config"]["init"] != "torch" and d["budget"] == 1 and learned(d)]
    torch_runs = [d for d in docs if d["model_config"]["init"] == "torch"]
    if torch_runs and torch_init:
        line += (f" With N(0, 1) embeddings, whose keys are near random, the most damaging head multiplies the error by "
                 f"{_span([d['ablation']['heads'][0]['ratio'] for d in torch_runs], '.1f')}, against "
                 f"{_span([d['ablation']['heads'][0]['ratio'] for d in torch_init], '.1f')} in the other 1x runs that "
                 "learned the task.")
    line += (" A frame head, where there is one, does not need orthogonal keys, as the authors' follow-up says "
             "(orthogonality picks the wrong head): the ablation, not the key statistic, is the test of it.")
    def bypass(budget: int) -> list[float]:  # the error's ratio with the block of layer 1 or 2 removed
        return [b["ratio"] for d in docs if d["budget"] == budget for b in d["ablation"]["blocks"]
                if b["name"] in ("L1.block", "L2.block")]

    if bypass(3):
        line += (f" At 3x the blocks of layers 1 and 2 can be bypassed at little cost (the error ×"
                 f"{_span(bypass(3), '.2f')}): layer 0 does the work.")
    for budget in sorted({d["budget"] for d in docs if d["budget"] > 3}):
        line += f" At {budget}x bypassing one of them multiplies the error by {_span(bypass(budget), '.2f')}."
    out.append(line)
    repl = [d for d in docs if d["task_params"].get("with_replacement", False)]
    paired = [d for c in ("transformer-paired", "tinygpt-paired") for d in g(c)]
    if repl and paired:
        flat = [d for d in repl if not learned(d)]
        keys = ", ".join(f"`{d['cell']}` {_r(raw0(d))}" for d in repl)
        paired_error = _span([error(d) for d in paired], ".2f")
        out.append(
            "- **What the keys are used for.** In none of these runs does a key's identity bear on what the model has "
            "learned: in sep-vocab without replacement every key is new, so only its role (a key is here) matters; in "
            "the paired format the one position that needs it, the final query (a lookup of a context key, delta "
            f"posterior), is not learned at 1x, which is why the paired runs' error is {paired_error} "
            f"against the authors' {AUTHORS_CODE['error_1x']} over the key positions alone (their evaluation leaves the "
            f"query out; the uniform guess there is log2 20 = {math.log2(20):.2f} bits); and with keys drawn with "
            f"replacement (where a repeated key has a delta posterior) {len(flat)} of {len(repl)} runs never left the "
            f"plateau in {repl[0]['steps']:,} steps (error {_span([error(d) for d in flat], '.2f') if flat else '-'}; "
            f"L0 raw {keys}, centred "
            f"{_span([centred0(d) for d in repl])}). A frame of distinguishable keys is what a lookup needs; that the "
            "paper's frame belongs to a regime where the lookup is learned (the paired query; or keys with replacement, "
            "if the authors' production run, named `bijection_v20_repl`, drew them so, as their data code does by "
            "default) is a reading these runs cannot test, not a finding.")
    return out


def write_block(path: Path, lines: list[str]) -> None:
    """Put ``lines`` between :data:`BLOCK`'s markers in ``path`` (which must hold both)."""
    text = Path(path).read_text()
    start, end = BLOCK
    if start not in text or end not in text:
        raise SystemExit(f"{path}: the markers {start!r} and {end!r} are missing")
    head, rest = text.split(start, 1)
    Path(path).write_text(head + start + "\n" + "\n".join(lines) + "\n" + end + rest.split(end, 1)[1])


# ---------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------
def curves_figure(groups, path: Path) -> Path:
    """Layer-0 key orthogonality over training, one line per single-factor cell; a factor has the
    same colour and marker in both panels."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    panels = {model: [c for c in cell_order((c, g[0]["factor"]) for (c, b), g in groups.items() if b == 1)
                      if groups[(c, 1)][0]["model"] == model] for model in HEADLINE}
    factors = list(dict.fromkeys(factor_name(c) for cells in panels.values() for c in cells))
    for ax, (model, cells) in zip(axes, panels.items()):
        for cell in cells:
            d = groups[(cell, 1)][0]
            dyn = d["dynamics"]
            steps = np.maximum(dyn["steps"], 1)
            k = factors.index(factor_name(cell))
            ax.plot(steps, dyn["tokens_raw_layer0"], marker=MARKERS[k % len(MARKERS)], ms=3.5, color=f"C{k % 10}",
                    lw=2.2 if cell in HEADLINE else 1.2, label=cell)
        if cells:
            ax.axhline(groups[(cells[0], 1)][0]["key_frame"]["tokens_raw"]["random"][0], color="k", ls="--", lw=1,
                       label="random weights")
        ax.set_xscale("log")
        ax.set_title(f"{model}: one factor at a time (1x, seed 0)")
        ax.set_xlabel("training step (step 0 drawn at 1)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("layer-0 keys: mean |off-diagonal cos| (raw)")
    return save_figure(fig, path, metadata=PNG)


def factor_name(cell: str) -> str:
    """The factor a cell changes ("paired" for "tinygpt-paired"), "" for a model's base cell."""
    return cell.partition("-")[2]


def budget_figure(groups, path: Path) -> Path:
    """Key orthogonality (top) and entropy error (bottom) over training at each budget; a budget has
    the same colour in every panel (raw keys solid, centred keys dotted)."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex="col")
    budgets = sorted({b for (c, b) in groups if c in HEADLINE})
    for j, cell in enumerate(HEADLINE):
        for budget in sorted(b for (c, b) in groups if c == cell):
            d = groups[(cell, budget)][0]
            dyn = d["dynamics"]
            steps = np.maximum(dyn["steps"], 1)
            k = budgets.index(budget)
            look = {"color": f"C{k}", "marker": MARKERS[k], "ms": 3}
            axes[0, j].plot(steps, dyn["tokens_raw_layer0"], label=f"{budget}x, raw", **look)
            axes[0, j].plot(steps, dyn["tokens_centred_layer0"], ls=":", color=look["color"], label=f"{budget}x, centred")
            axes[1, j].plot(steps, dyn["entropy_error"], label=f"{budget}x", **look)
        if (cell, 1) in groups:
            axes[0, j].axhline(groups[(cell, 1)][0]["key_frame"]["tokens_raw"]["random"][0], color="k", ls="--", lw=1,
                               label="random weights")
        axes[0, j].set_title(f"{cell}, sep-vocab, seed 0: key frame")
        axes[1, j].set_title(f"{cell}, sep-vocab, seed 0: calibration")
        axes[0, j].set_ylabel("layer-0 keys: mean |off-diag cos|")
        axes[1, j].set_yscale("log")
        axes[1, j].set_ylabel("entropy error (bits, probe batch)")
        axes[1, j].set_xlabel("training step (step 0 drawn at 1)")
        for ax in axes[:, j]:
            ax.set_xscale("log")
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=7)
    fig.suptitle(f"Training longer ({', '.join(f'{b}x' for b in budgets)} the steps): the key frame and the "
                 "entropy error over training")
    return save_figure(fig, path, metadata=PNG)


def ablation_figure(docs, path: Path) -> Path:
    shown = [d for d in sorted(docs, key=lambda d: (d["budget"], d["cell"].split("-")[0] != "transformer", d["cell"]))
             if d["seed"] == 0
             and (d["cell"] in HEADLINE or d["cell"].endswith("-paired"))]
    fig, ax = plt.subplots(figsize=(11, 4))
    width = 0.8 / max(1, len(shown))
    for k, d in enumerate(shown):
        heads = d["ablation"]["heads"][:6]  # ranked, most damaging first
        ax.bar(np.arange(len(heads)) + k * width, [h["ratio"] for h in heads], width, label=f"{d['cell']} {d['budget']}x")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(np.arange(6) + 0.4 - width / 2, [f"#{i + 1}" for i in range(6)])
    ax.set_xlabel("heads, ranked by the damage their removal does (six most damaging)")
    ax.set_ylabel("entropy error with the head removed / intact")
    ax.set_title("Head ablations: a frame head would stand far above the rest")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7, ncol=2)
    return save_figure(fig, path, metadata=PNG)


# ---------------------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------------------
def provenance_table(docs) -> list[str]:
    rows = []
    for d in sorted(docs, key=lambda d: d["job"]):
        p = d["provenance"]
        load = p["load_while_running"]
        busiest = sorted(load["other_busy_processes"].items(), key=lambda kv: -kv[1])[:2]  # the JSON sorts its keys
        others = "; ".join(f"{cmd} ({cpu}%)" for cmd, cpu in busiest)
        rows.append([d["job"], p["commit"][:10] + (" (dirty)" if p["dirty"] else ""), p["started"],
                     f"{p['wall_seconds'] / 60:.1f}", f"{d['train_seconds'] / 60:.1f}",
                     f"{load['load1_mean']:.1f} (max {load['load1_max']:.1f})", others or "none seen"])
    return table(["job", "commit", "started (UTC)", "wall (min)", "training (min)", "load average",
                  "other busy processes (the two busiest)"], rows)


def machine_line(docs) -> str:
    m = sorted({json.dumps(d["provenance"]["machine"], sort_keys=True) for d in docs})
    return "; ".join(", ".join(f"{k} {v}" for k, v in json.loads(x).items()) for x in m)


def planned_jobs() -> list[str]:
    """The study's plan (``scripts/keyframe_study.py``, beside this file), job names in order."""
    import importlib.util
    import sys

    study = sys.modules.get("keyframe_study")
    if study is None:
        spec = importlib.util.spec_from_file_location("keyframe_study", Path(__file__).with_name("keyframe_study.py"))
        study = sys.modules["keyframe_study"] = importlib.util.module_from_spec(spec)  # its dataclass needs it there
        spec.loader.exec_module(study)
    return [study.job_name(*job) for job in study.PLAN]


def render(results: Path, page: Path, figures: Path, guide: Path | None = None) -> list[Path]:
    """The page and its figures; with ``guide`` (docs/geometry.md), its conclusions block too."""
    docs = load(results)
    missing = [j for j in planned_jobs() if j not in {d["job"] for d in docs}]
    gpu = load(Path(results) / "gpu") if (Path(results) / "gpu").is_dir() else []
    groups = by_cell(docs)
    rel = Path(figures).name
    written = [curves_figure(groups, Path(figures) / "keyframe_factors.png"),
               budget_figure(groups, Path(figures) / "keyframe_budget.png"),
               ablation_figure(docs, Path(figures) / "keyframe_ablation.png")]
    d_random = paper_random_dimension()
    t = docs[0]["train"]
    lines = [
        "# Paper I's key frame: the model, the measure, or the budget?",
        "",
        "<!-- generated by `python scripts/keyframe_study.py render` from results/keyframe/*.json; do not edit -->",
        "",
        "Paper I reports that the keys of the hypothesis tokens in layer 0 are *more* orthogonal than at",
        f"random weights (mean |off-diagonal cosine| {PAPER_TRAINED} against {PAPER_RANDOM}) and that removing",
        "a single \"frame head\" is catastrophic. Our main-job transformer reads the opposite: nearly",
        "collinear keys. This page separates the candidate causes one factor at a time, on the",
        "bijection tunnel (V = 20, L = 19), with the same trainer, data and protocol for every cell.",
        "",
        "**What it found.**",
        "",
        *(line.replace("](results/", "](") for line in conclusions(groups, docs)),  # links from docs/results/
        "",
        f"![layer-0 key statistic over training, one factor at a time]({rel}/keyframe_factors.png)",
        "",
        "## How it was measured",
        "",
        "Reproduce (one torch thread; jobs resume from `runs/keyframe/<job>`):",
        "",
        "<!-- docs: fast; illustrative \"keyframe_study.py run\" (hours of CPU: 10-75 minutes a job on a shared core) -->",
        "```bash",
        "python scripts/keyframe_study.py plan      # the jobs and which are done",
        "python scripts/keyframe_study.py run       # train + diagnose the missing ones -> results/keyframe/<job>.json",
        "python scripts/keyframe_study.py render    # this page and docs/results/figures/keyframe_*.png",
        "```",
        "",
        f"Protocol: batch {t['batch_size']}, AdamW betas {tuple(t['betas'])}, weight decay {t['weight_decay']}, "
        f"{t['warmup']} warmup steps then {t['schedule']}, clip {t['grad_clip']}, lr {t['lr']} for every cell "
        "(the quick profile's shared rate and the authors' recipe; not searched per cell), 3 layers × 4 heads × "
        "d 128 for both models; budgets are multiples of the quick profile's 1200 steps. The statistic: "
        "mean |off-diagonal cosine| of the keys E·W_Kᵀ of the 20 key tokens' raw embeddings, per head "
        "(the authors' procedure, `tokens_raw`), averaged over a layer's heads; `centred`: the same keys "
        "minus their mean over the tokens. Random: 200 fresh initialisations of the same architecture. "
        f"Probe: {docs[0]['probe']['n_sequences']} sequences; entropy error on 2000 held-out sequences.",
        "",
        "## Every comparison, in numbers",
        "",
        *findings(groups, docs),
        "",
        f"Jobs: {len(docs)} of the plan's {len(docs) + len(missing)} ran"
        + (f"; not run (CPU time): {', '.join(f'`{j}`' for j in missing)}." if missing else "."),
        "",
        "## 1. One factor at a time (1x = 1200 steps)",
        "",
        "Each row changes one thing from its model's defaults (`transformer`: LayerNorm, biases, head "
        "tied over the answers, N(0, 0.02); `tinygpt`: RMSNorm eps 1e-6, no biases, head tied over the "
        "whole vocabulary, N(0, 0.02)). Mean ± standard deviation over seeds where there are several.",
        "",
        *factor_table(groups),
        "",
        "The layer-0 statistic of each of these runs over training is the figure at the top of the page.",
        "",
        "## 2. Budget",
        "",
        *budget_table(groups),
        "",
        f"![key statistic and entropy error over training at each budget run]({rel}/keyframe_budget.png)",
        "",
        "### Extrapolation",
        "",
        "A straight line of the end-of-run L0 raw statistic against log10(steps), over the budgets "
        "each run trained to the end of its own schedule. \"Paper's level (scaled)\" is the paper's "
        "trained/random ratio applied to our random value. A line that does not fall never reaches "
        "either; \"> 1\": the line has left the statistic's range (a mean |cosine| is at most 1).",
        "",
        *extrapolation_table(groups),
        "",
        "## 3. The measure",
        "",
        "Per head (d_head = 32 dimensions: the authors' code) against the keys of all heads of the "
        "layer taken together (d_model = 128). The paper's random value, "
        f"{PAPER_RANDOM}, is the Gaussian E|cos| of {d_random}-dimensional vectors "
        f"({stats.gaussian_abs_cosine(d_random):.4f}), not of a 32-dimensional head's keys: the "
        "paper's statistic was not taken on the per-head keys its code measures.",
        "",
        *measure_table(groups),
        "",
        "## 4. The frame head by ablation",
        "",
        "Every head zeroed in turn (`geometry/ablation.py`, 256 probe sequences, paired bootstrap 95% "
        f"CI). Verdict rule: a **single frame head** when the most damaging head does ≥ {FRAME_RATIO:g}× "
        f"the runner-up's damage, its removal multiplies the error by ≥ {FRAME_DAMAGE:g} and its CI "
        "excludes 0; otherwise distributed.",
        "",
        *ablation_table(docs),
        "",
        f"![ranked head ablations]({rel}/keyframe_ablation.png)",
        "",
        "## 5. Paper budget on a GPU",
        "",
    ]
    if gpu:
        lines += ["`python scripts/gpu/keyframe_paper_budget.py` (results/keyframe/gpu):", "",
                  *gpu_table(gpu), ""]
    else:
        lines += ["Not run yet. `python scripts/gpu/keyframe_paper_budget.py` trains our transformer (the quick "
                  "profile's options at the paper's size) and `tinygpt` at the paper's (paired, 100k steps) and "
                  "the authors' production (sep-vocab, 50k steps) budgets, diagnoses them and writes "
                  "`results/keyframe/gpu/*.json`, which this page then shows.", ""]
    lines += [
        "## Provenance",
        "",
        f"Machine: {machine_line(docs)}.",
        "",
        "<details markdown>",
        "<summary>Each job: its commit, start, wall and training time, the load and what ran beside it</summary>",
        "",
        *provenance_table(docs),
        "",
        "</details>",
        "",
    ]
    Path(page).parent.mkdir(parents=True, exist_ok=True)
    Path(page).write_text("\n".join(lines))
    if guide is not None:
        write_block(guide, conclusions(groups, docs))
    return [Path(page), *written, *([Path(guide)] if guide is not None else [])]


def gpu_table(docs) -> list[str]:
    rows = []
    for d in sorted(docs, key=lambda d: d["job"]):
        kf = d["key_frame"]["tokens_raw"]
        rows.append([d["job"], d["format"], f"{d['steps']:,}", f"{d['n_params']:,}", f"**{kf['mean'][0]:.3f}**",
                     f"{d['key_frame']['tokens_centred']['mean'][0]:.3f}",
                     " / ".join(f"{v:.3f}" for v in kf["mean"][1:]), f"{kf['random'][0]:.3f}",
                     f"{error(d):.4f}", frame_verdict(d), d["provenance"]["machine"].get("device", "?")])
    return table(["job", "format", "steps", "params", "L0 raw", "L0 centred", "deeper layers raw", "random",
                  "entropy error", "frame head", "device"], rows)
