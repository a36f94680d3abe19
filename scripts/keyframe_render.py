"""Render the key-frame study (``scripts/keyframe_study.py``) from its results JSON alone:
``docs/results/keyframe.md`` and its figures, deterministically (the same JSON gives the same
bytes; ``tests/test_keyframe_results.py`` checks the committed page and figures against it).

Every number on the page is computed here from ``results/keyframe/*.json`` and, when present,
``results/keyframe/random/*.json`` (the random value without training, ``scripts/keyframe_random.py``),
``results/keyframe/authors/*.json`` (the authors' own code, ``scripts/keyframe_authors.py``) and
``results/keyframe/gpu/*.json``; the prose around the tables only names them. The numbers cited
from the paper and the authors' report are the constants below, each with its source.
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
#: the authors' production run (sep-vocab, 6 x 6 x 192, 50k steps): its reported entropy error
#: (bits; spec/paper1.md, the repo's follow-up: "Transformer 0.007 (0.0067)") and its steps
AUTHORS_PRODUCTION = {"error": 0.0067, "steps": 50_000}
FACTORS = ("model", "format", "head", "norm", "bias", "init", "task")
#: the factor of the trials on keys drawn with replacement (their own section, not the factor table)
REGIME = "regime"
HEADLINE = ("transformer", "tinygpt")
FRAME_RATIO, FRAME_DAMAGE = 2.0, 2.0  # a frame head: >= 2x the runner-up's damage, and the error at least doubled
PNG = {"Software": None}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")  # one per line of a figure, with its colour


# ---------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------
def load(folder: Path) -> list[dict]:
    """The JSON records directly in ``folder`` (none when it does not exist)."""
    return [json.loads(p.read_text()) for p in sorted(Path(folder).glob("*.json"))]


def with_replacement(d: dict) -> bool:
    return bool(d["task_params"].get("with_replacement", False))


def whole_layer(d: dict, kind: str = "raw") -> dict | None:
    """The layer-0 statistic of the whole layer's keys (every head together), ``raw`` or
    ``centred``: trained (``mean``), step 0 (``init``) and the run's fresh initialisations
    (``random``; None for the runs recorded before the whole layer was a variant of the analysis,
    whose record kept the raw reading alone, as ``whole_layer_raw``). None: not measured."""
    kf = d["key_frame"]
    if f"layer_{kind}" in kf:
        v = kf[f"layer_{kind}"]
        return {"mean": v["mean"][0], "init": v["init"][0], "random": v["random"][0]}
    if kind == "raw" and "whole_layer_raw" in kf:
        v = kf["whole_layer_raw"]
        return {"mean": v["mean"][0], "init": v["init"][0], "random": None}
    return None


def closed_form(d: dict, whole: bool, centred: bool) -> float:
    """The random value of the run's layer-0 keys in closed form (:func:`stats.random_key_abs_cosine`):
    m = d_model (the whole layer) or d_head (a head), 20 key tokens."""
    mc = d["model_config"]
    m = mc["d_model"] if whole else mc["d_model"] // mc["n_heads"]
    return stats.random_key_abs_cosine(m, mc["d_model"], d["task_params"]["V"], centred=centred)


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


#: a run left its plateau when its final entropy error is below this fraction of its step-0 value
#: (runs that learned end at 0.005-0.22 of it, runs on the plateau at 0.8-1.02: a larger initial
#: embedding starts them higher, at 2.3 bits, and they fall onto the same 1.87-bit plateau)
LEFT_PLATEAU = 0.5


def left_plateau(errors: list[float]) -> bool:
    """Whether an entropy-error curve left its plateau (:data:`LEFT_PLATEAU`)."""
    return errors[-1] < LEFT_PLATEAU * errors[0]


def learned(d: dict) -> bool:
    """Whether the run left its plateau: the probe's entropy error at the end below half its step-0 value."""
    return left_plateau(d["dynamics"]["entropy_error"])


def initialisation(d: dict) -> str:
    """How the run's weights were drawn, in words (the paper's N(0, 0.02) unless changed)."""
    c = d["model_config"]
    if c.get("init", "normal") != "normal":
        return f"init={c['init']}"
    if c.get("embed_std") not in (None, 0.02):
        return f"token embedding N(0, {c['embed_std']:g})"
    return "N(0, 0.02)"


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


def init_kind(mc: dict) -> str:
    """The initialisation law, with the token embedding's own scale where ``embed_std`` sets it."""
    return mc["init"] + (f", embedding N(0, {mc['embed_std']:g})" if mc.get("embed_std") is not None else "")


def head_kind(mc: dict) -> str:
    return "untied" if not mc["tie_head"] else f"tied, {mc['tie_scope']}"


# ---------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------
def one_factor_cells(groups) -> list[str]:
    """The cells at 1x that change one factor (the regime trials left out), in :func:`cell_order`."""
    return cell_order((c, g[0]["factor"]) for (c, b), g in groups.items() if b == 1 and g[0]["factor"] != REGIME)


def whole_cell(g: list[dict], kind: str = "raw") -> str:
    """The whole layer's layer-0 statistic over a cell's seeds ('-' where a run did not record it)."""
    values = [whole_layer(d, kind) for d in g]
    return "-" if not all(values) else ms([v["mean"] for v in values])


def factor_table(groups) -> list[str]:
    cells = one_factor_cells(groups)
    rows = []
    for cell in cells:
        g = groups[(cell, 1)]
        d, mc = g[0], g[0]["model_config"]
        per_layer = [ms([x["key_frame"]["tokens_raw"]["mean"][i] for x in g]) for i in range(1, mc["n_layers"])]
        rows.append([f"`{cell}`", d["factor"], d["model"], d["format"], head_kind(mc), mc["norm"],
                     "yes" if mc["bias"] else "no", init_kind(mc), f"{d['n_params']:,}", str(len(g)),
                     f"**{whole_cell(g)}**", whole_cell(g, "centred"),
                     ms([raw0(x) for x in g]), ms([centred0(x) for x in g]), " / ".join(per_layer),
                     f"{mean([x['key_frame']['tokens_raw']['random'][0] for x in g]):.3f}", values0(g),
                     ms([error(x) for x in g], ".4f")])
    return table(["cell", "factor", "model", "format", "head", "norm", "biases", "init", "params", "seeds",
                  "L0 whole layer, raw", "whole layer, centred", "L0 per head, raw", "per head, centred",
                  "per head L1 / L2 raw", "random per head (L0)", "value tokens L0 raw / centred",
                  "entropy error (bits)"], rows)


def budget_table(groups) -> list[str]:
    rows = []
    for cell in cell_order((c, g[0]["factor"]) for (c, b), g in groups.items() if b > 1):
        for budget in sorted(b for (c, b) in groups if c == cell):
            g = groups[(cell, budget)]
            n_layers = g[0]["model_config"]["n_layers"]
            per_layer = [ms([x["key_frame"]["tokens_raw"]["mean"][i] for x in g]) for i in range(1, n_layers)]
            rows.append([f"`{cell}`", f"{budget}x", f"{g[0]['steps']:,}", str(len(g)), f"**{whole_cell(g)}**",
                         whole_cell(g, "centred"), ms([raw0(x) for x in g]), ms([centred0(x) for x in g]),
                         " / ".join(per_layer),
                         f"{mean([x['key_frame']['tokens_raw']['init'][0] for x in g]):.3f}", values0(g),
                         ms([error(x) for x in g], ".4f")])
    return table(["cell", "budget", "steps", "seeds", "L0 whole layer, raw", "whole layer, centred", "L0 per head, raw",
                  "per head, centred", "per head L1 / L2 raw", "step 0 per head (L0)",
                  "value tokens L0 raw / centred", "entropy error (bits)"], rows)


def measure_table(groups) -> list[str]:
    """Per run group: the per-head statistic (the authors' code) beside the whole layer's (the
    paper's reading), raw and centred, each with its random value from the run's fresh
    initialisations and in closed form; '-' where a run did not record a reading."""
    def cell_of(values: list[float | None], spec: str = ".3f") -> str:
        return "-" if any(v is None for v in values) else ms(values, spec)

    rows = []
    for (cell, budget), g in sorted(groups.items(), key=lambda kv: (kv[0][0] not in HEADLINE, kv[0])):
        keep = (cell in HEADLINE or (cell.endswith("-paired") and budget == 1)
                or all(whole_layer(d, "centred") for d in g))
        if not keep:
            continue
        kf = [x["key_frame"] for x in g]
        raw = [whole_layer(d) for d in g]
        cen = [whole_layer(d, "centred") for d in g]
        rows.append([f"`{cell}`", f"{budget}x", ms([k["tokens_raw"]["mean"][0] for k in kf]),
                     f"{mean([k['tokens_raw']['random'][0] for k in kf]):.3f}", f"{closed_form(g[0], False, False):.3f}",
                     f"**{cell_of([w and w['mean'] for w in raw])}**", cell_of([w and w["init"] for w in raw]),
                     cell_of([w and w["random"] for w in raw]), f"{closed_form(g[0], True, False):.3f}",
                     cell_of([w and w["mean"] for w in cen]), cell_of([w and w["random"] for w in cen]),
                     f"{closed_form(g[0], True, True):.3f}", ms([error(d) for d in g], ".4f")])
    return table(["cell", "budget", "per head: trained", "random", "closed form", "whole layer, raw: trained",
                  "step 0", "random", "closed form", "whole layer, centred: trained", "random", "closed form",
                  "entropy error (bits)"], rows)


def random_table(random_docs) -> list[str]:
    """The random value without training (``scripts/keyframe_random.py``): fresh models beside
    the closed form and its Monte Carlo, per shape, model and reading."""
    rows = []
    for doc in random_docs:
        for r in doc["rows"]:
            for x in (r["readings"][v] for v in ("tokens_raw", "tokens_centred", "layer_raw", "layer_centred")):
                rows.append([f"{r['shape']} ({r['n_layers']} × {r['n_heads']} × {r['d_model']})", f"`{r['model']}`",
                             x["reading"], f"{x['keys_dim']}", f"{x['effective_dim']:.1f}",
                             f"{x['models_mean']:.4f} ± {x['models_sd']:.4f} ({x['models_draws']})",
                             f"**{x['closed_form']:.4f}**", f"{x['monte_carlo']:.4f} ± {x['monte_carlo_se']:.4f}"])
    return table(["shape", "model", "keys", "m", "d_eff", "fresh models: mean ± sd (draws)", "closed form",
                  "Monte Carlo ± se"], rows)


def paper_size_whole_layer(random_docs) -> list[tuple[str, float, float]]:
    """(model, fresh models' mean, closed form) of the whole layer's raw keys at the paper's shape."""
    return [(r["model"], r["readings"]["layer_raw"]["models_mean"], r["readings"]["layer_raw"]["closed_form"])
            for doc in random_docs for r in doc["rows"] if r["shape"] == "paper"]


def regime_docs(docs) -> list[dict]:
    """The study's runs with keys drawn with replacement (the authors' production regime)."""
    order = cell_order((d["cell"], d["factor"]) for d in docs)
    return sorted((d for d in docs if with_replacement(d)), key=lambda d: (order.index(d["cell"]), d["budget"], d["seed"]))


def regime_table(docs, authors) -> list[str]:
    """What was tried on keys drawn with replacement: our trainer's runs and the authors' code's."""
    rows = []
    for d in regime_docs(docs):
        t, errors = d["train"], d["dynamics"]["entropy_error"]
        wl, wc = whole_layer(d), whole_layer(d, "centred")
        rows.append([f"`{d['job']}`", d["model"], initialisation(d), f"{t['lr']:g}", str(t["warmup"]),
                     f"{d['steps']:,}", f"{errors[0]:.3f}", f"{min(errors):.3f}", f"{error(d):.4f}",
                     "yes" if learned(d) else "**no**",
                     f"{raw0(d):.3f}", f"{wl['mean']:.3f}" if wl else "-", f"{wc['mean']:.3f}" if wc else "-",
                     f"×{d['ablation']['heads'][0]['ratio']:.2f}", frame_verdict(d)])
    for a in (a for a in authors if a["with_replacement"]):
        curve, p = a["curve"], a["protocol"]
        errors = [c["entropy_error"] for c in curve]
        rows.append([f"`{a['job']}`", "the authors' code", "N(0, 0.02)", f"{p['lr']:g}", str(p["warmup"]), f"{a['steps']:,}",
                     f"{errors[0]:.3f}", f"{min(errors):.3f}", f"{errors[-1]:.4f}",
                     "yes" if left_plateau(errors) else "**no**", f"{curve[-1]['per_head_raw']:.3f}",
                     f"{curve[-1]['whole_layer_raw']:.3f}", f"{curve[-1]['whole_layer_centred']:.3f}", "-", "-"])
    return table(["run", "model", "initialisation", "lr", "warm-up", "steps", "error at step 0", "lowest error", "final error",
                  "left the plateau", "L0 per head, raw", "whole layer, raw", "whole layer, centred",
                  "top head: error ×", "verdict"], rows)


def authors_table(authors) -> list[str]:
    """The authors' own code (``scripts/keyframe_authors.py``): layer 0 at each recorded step."""
    rows = []
    for a in sorted(authors, key=lambda a: (a["with_replacement"], a["steps"])):
        c = a["curve"][-1]
        path = " → ".join(f"{x['per_head_raw']:.3f}" for x in a["curve"])
        rows.append([f"`{a['job']}`", a["format"], "with" if a["with_replacement"] else "without", f"{a['steps']:,}",
                     f"**{c['per_head_raw']:.3f}**", f"{c['per_head_centred']:.3f}", f"{c['whole_layer_raw']:.3f}",
                     f"{c['whole_layer_centred']:.3f}", f"{c['entropy_error']:.4f}", path,
                     f"`{a['provenance']['command']}`"])
    return table(["run", "format", "keys with replacement", "steps", "L0 per head, raw", "centred", "whole layer, raw",
                  "centred", "entropy error (bits, key positions)", "per head raw over training (every 300 steps)",
                  "command"], rows)


def to_second(d: dict) -> float:
    """The most damaging head's damage over the runner-up's (inf where the runner-up did no damage:
    the ablation records None)."""
    r = d["ablation"]["frame_head"]["ratio_to_second"]
    return math.inf if r is None else r


def frame_verdict(d: dict) -> str:
    heads = d["ablation"]["heads"]
    damage = heads[0]["ratio"]
    single = to_second(d) >= FRAME_RATIO and damage >= FRAME_DAMAGE and heads[0]["delta_lo"] > 0
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
                     f"{to_second(d):.2f}", str(a["frame_head"]["n_heads_at_least_half"]),
                     f"{block['name']} ×{block['ratio']:.1f}", frame_verdict(d)])
    return table(["cell", "budget", "seed", "error (bits)", "top head: Δ error [95% CI]", "error ×", "runner-up",
                  "top / runner-up", "heads ≥ half", "worst block bypass", "verdict"], rows)


def cell_budgets(groups, cell: str) -> list[int]:
    """The budgets at which ``cell`` ran, smallest first."""
    return sorted(b for (c, b) in groups if c == cell)


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
        if budget == 1 and cell != base and g[0]["model"] == model and g[0]["factor"] != REGIME:
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
    for name in ("raw", "centred"):
        have = [d for d in docs if not with_replacement(d) and learned(d) and whole_layer(d, name)]
        if have:
            v = [whole_layer(d, name)["mean"] for d in have]
            lines.append(f"- Layer-0 keys of the whole layer (every head together: the paper's reading), {name}, every run "
                         f"that recorded it and learned the task, keys drawn without replacement ({len(have)}): "
                         f"{min(v):.3f} to {max(v):.3f} (random in closed form "
                         f"{_span([closed_form(d, True, name == 'centred') for d in have])}).")
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
    lines.append(f"- Runs that never left the plateau (entropy error at the end not below half its step-0 value; their keys "
                 f"say nothing about the frame): {len(flat)} of {len(docs)}" + (f" ({', '.join(flat)})." if flat else "."))
    frame = [d["job"] for d in docs if frame_verdict(d).startswith("**")]
    lines.append(f"- Runs with a single frame head by the rule below: {len(frame)} of {len(docs)}"
                 + (f" ({', '.join(frame)})." if frame else "."))
    return lines


# ---------------------------------------------------------------------------------------
# The geometry guide's conclusions, stated from the data
# ---------------------------------------------------------------------------------------
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


def conclusions(groups, docs, authors=(), random_docs=()) -> list[str]:
    """The bullets of docs/geometry.md's key-frame section: every number computed from the jobs'
    results, the authors' code's runs (``authors``: results/keyframe/authors) and the random value
    without training (``random_docs``: results/keyframe/random). A bullet whose cells have not all
    run is left out, and a sentence whose data are missing."""
    def g(cell: str, budget: int = 1) -> list[dict]:
        return groups.get((cell, budget), [])

    def have(*cells: str) -> bool:
        return all(g(c) for c in cells)

    def budgets(c: str) -> list[int]:
        return cell_budgets(groups, c)

    rand_raw = mean([d["key_frame"]["tokens_raw"]["random"][0] for d in docs])
    rand_c = mean([d["key_frame"]["tokens_centred"]["random"][0] for d in docs])
    ref = docs[0]
    out = [f"What the data say (L0 = layer-0 mean |off-diagonal cosine| of the 20 key tokens' raw keys, per head "
           f"as the authors' code measures it; random {rand_raw:.3f}; centred: the keys minus their mean, random "
           f"{rand_c:.3f}; whole layer: every head's keys together, random {closed_form(ref, True, False):.3f} raw and "
           f"{closed_form(ref, True, True):.3f} centred in closed form; entropy error in bits):", ""]
    learned_sep = [d for d in docs if not with_replacement(d) and learned(d) and whole_layer(d)]
    paper = paper_size_whole_layer(random_docs)
    if paper and learned_sep:
        head_paper = stats.random_key_abs_cosine(32, 192, 20)
        wl = [whole_layer(d)["mean"] for d in learned_sep]
        wc = [whole_layer(d, "centred")["mean"] for d in learned_sep if whole_layer(d, "centred")]
        out.append(
            f"- **The paper's number is the whole layer's.** Keys E·W_Kᵀ of isotropic embeddings under a random m × d "
            "W_K have an effective dimension of m·d/(m + d + 1), so their E|cos| is about √(2/(π·d_eff)) (closed form "
            "and Monte Carlo agree: the results page). At the paper's size (6 × 6 × 192) that is "
            f"{paper[0][2]:.4f} for the whole layer (m = d = 192) and {head_paper:.3f} per head (m = 32); fresh "
            "6 × 6 × 192 models read " + ", ".join(f"{v:.3f} (`{m}`)" for m, v, _ in paper)
            + f" on the whole layer (`python scripts/keyframe_random.py`, seconds, no training). The paper's random "
            f"value, {PAPER_RANDOM}, is the whole layer's, so the results page leads with the whole layer's keys. Ours, "
            f"at 3 × 4 × 128, trained: {_span(wl)} raw ({len(wl)} runs that learned the task)"
            + (f", {_span(wc)} centred ({len(wc)} recorded)" if wc else "")
            + f", against {closed_form(ref, True, False):.3f} / {closed_form(ref, True, True):.3f} random: the paper's "
            f"{PAPER_TRAINED} is below its random value, ours above it in "
            + ("every run." if all(v > closed_form(ref, True, False) for v in wl)
               and all(v > closed_form(ref, True, True) for v in wc) else "some runs, the table shows which."))
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
    if have("transformer-paired", "tinygpt-paired", "transformer", "tinygpt"):
        t, m = g("transformer-paired"), g("tinygpt-paired")
        sep1 = g("transformer") + g("tinygpt")
        paired_all = [d for d in docs if d["format"] == "paired" and not with_replacement(d)]
        line = (f"- **The format.** The paired format gives L0 {ms([raw0(d) for d in t])} (`transformer`, {_seeds(t)}) "
                f"and {ms([raw0(d) for d in m])} (`tinygpt`, {_seeds(m)}), against {_span([raw0(d) for d in sep1])} in "
                f"sep-vocab. Centred, the order turns: the paired keys are further from a frame "
                f"({_span([centred0(d) for d in paired_all])}, {len(paired_all)} runs) than the sep-vocab keys "
                f"({_span([centred0(d) for d in sep1])}, the {len(sep1)} runs of the two models at 1x; random "
                f"{rand_c:.3f}). The paired format's lower raw statistic is a smaller shared direction, not keys "
                "closer to orthogonal.")
        own = [a for a in authors if not a["with_replacement"] and a["steps"] == g("transformer-paired")[0]["steps"]]
        if own:
            a = own[0]["final"]
            line += (f" The authors' own code in the paired format at the same budget reads {a['per_head_raw']:.3f} "
                     f"(centred {a['per_head_centred']:.3f}; `{own[0]['provenance']['command']}`), near ours there: the "
                     "comparison that made our keys look much more collinear than the authors' model's was one of "
                     "formats, not of models.")
        out.append(line)
    sep = [d for d in docs if d["format"] != "paired" and d["model_config"]["init"] == "normal"
           and d["model_config"].get("embed_std") is None and not with_replacement(d) and learned(d)]
    if sep:
        crossing = []
        for d in (d for c in HEADLINE for d in g(c)):
            dyn = d["dynamics"]
            at = next((i for i, v in enumerate(dyn["tokens_raw_layer0"]) if v >= 0.5), None)
            if at is not None:
                crossing.append((dyn["steps"][at], dyn["entropy_error"][at]))
        short, long_ = [d for d in sep if d["budget"] <= 3], [d for d in sep if d["budget"] > 3]
        short = short or sep  # (a study with only longer runs)
        line = (f"- **The raw statistic reads one shared direction.** In every sep-vocab run with the paper's N(0, 0.02) "
                f"initialisation that learned the task up to 3x ({len(short)}) the centred keys sit at "
                f"{_span([centred0(d) for d in short], '.2f')} against {rand_c:.3f} random: the raw statistic's "
                f"{_span([raw0(d) for d in short], '.2f')} is one direction that all 20 key embeddings grow")
        if crossing:
            line += (f" (in the 1x runs of both models it passes 0.5 between steps {min(s for s, _ in crossing)} and "
                     f"{max(s for s, _ in crossing)}, while the error is still above {min(e for _, e in crossing):.2f} bits)")
        if long_:
            line += ("; trained longer, the centred keys leave random too (" + ", ".join(
                f"{_r(centred0(d))} `{d['model']}` at {d['budget']}x" for d in sorted(long_, key=lambda d: d["job"]))
                + "): past that direction the keys gather further, away from a frame")
        out.append(line + ".")
    if have("transformer-init-torch", "tinygpt-init-torch", "transformer", "tinygpt"):
        t, m = g("transformer-init-torch"), g("tinygpt-init-torch")
        each = f"{len(t)} seeds each" if len(t) == len(m) else f"{_seeds(t)} and {_seeds(m)}"
        title = "The initialisation, not yet its scale."
        line = ("With PyTorch's default initialisation (`init=torch`) the "
                f"same training leaves the raw statistic small, in both models: L0 {ms([raw0(d) for d in t])} "
                f"(`transformer`) and {ms([raw0(d) for d in m])} (`tinygpt`), centred {_r(mean([centred0(d) for d in t]))} "
                f"and {_r(mean([centred0(d) for d in m]))} (random {rand_c:.3f}), an error of "
                f"{mean([error(d) for d in t]):.3f} and {mean([error(d) for d in m]):.3f} ({each}). But `init=torch` "
                "changes more than the embedding's scale: the token embedding and the position table are drawn from "
                f"N(0, 1) ({1 / 0.02:.0f} times the paper's N(0, 0.02)), W_K and every other Linear weight are "
                "Kaiming-uniform, and the biases are uniform instead of zero.")
        et, em = g("transformer-init-embed"), g("tinygpt-init-embed")
        if et or em:
            base = {c: mean([raw0(d) for d in g(c)]) for c in ("transformer", "tinygpt", "transformer-init-torch",
                                                               "tinygpt-init-torch")}
            parts, verdicts = [], []
            for model, e in (("transformer", et), ("tinygpt", em)):
                if e:
                    v = mean([raw0(d) for d in e])
                    near_torch = abs(v - base[f"{model}-init-torch"]) < abs(v - base[model])
                    verdicts.append(near_torch)
                    parts.append(f"L0 {ms([raw0(d) for d in e])} (`{model}`, {_seeds(e)}; centred "
                                 f"{_r(mean([centred0(d) for d in e]))}, error {mean([error(d) for d in e]):.3f})")
            line += (" With the token embedding alone at N(0, 1) (`embed_std=1`: W_K, positions and biases as in the "
                     "paper): " + "; ".join(parts) + ". ")
            if all(verdicts):
                title = "The embedding's scale."
                line += ("That is nearer `init=torch`'s value than the N(0, 0.02) model's: the embedding's scale alone "
                         "moves the raw statistic")
            elif not any(verdicts):
                title = "The initialisation, not its embedding scale."
                line += ("That is nearer the N(0, 0.02) model's value than `init=torch`'s: the embedding's scale alone "
                         "does not move the raw statistic; `init=torch`'s other changes do")
            else:
                title = "The initialisation: the models disagree on its embedding scale."
                line += "The two models disagree on whether the embedding's scale alone moves it"
            missing = [c for c in ("transformer-init-embed", "tinygpt-init-embed") if len(g(c)) < 3]
            line += (f" (so far: {', '.join(f'`{c}` {len(g(c))} of 3 seeds' for c in missing)})." if missing else ".")
        else:
            line += (" Whether the embedding's scale alone does it (the `*-init-embed` cells: `embed_std=1`, W_K, "
                     "positions and biases as in the paper) is not measured yet, so the factor found is `init=torch` "
                     "as a whole, not the embedding's scale.")
        out.append(f"- **{title}** {line}")
    grown = [c for c in HEADLINE if len(budgets(c)) >= 2]
    if grown:
        def path(values: list[float], spec: str = ".3f") -> str:
            return " → ".join(format(v, spec) for v in values)

        def when(c: str) -> str:
            bs = budgets(c)
            steps = ", ".join(f"{g(c, b)[0]['steps']:,}" for b in bs)
            return f"over {', '.join(f'{b}x' for b in bs)} ({steps} steps)"

        shared = len({when(c) for c in grown}) == 1  # every model at the same budgets: say them once
        parts = []
        for c in grown:
            bs = budgets(c)
            raw, cen = ([mean([fn(d) for d in g(c, b)]) for b in bs] for fn in (raw0, centred0))
            whole = [whole_layer(g(c, b)[0]) for b in bs]
            parts.append(f"{'' if shared else when(c) + ' '}`{c}`'s error goes "
                         f"{path([mean([error(d) for d in g(c, b)]) for b in bs], '.4f')} while its keys go L0 "
                         f"{path(raw)}, centred {path(cen)}"
                         + (f", whole layer {path([w['mean'] for w in whole])}" if all(whole) else ""))
        lead = (when(grown[0]) + " " if shared else "") + "; ".join(parts)
        below = sorted({d["job"] for d in docs for v in ("raw", "centred")
                        if d["key_frame"][f"tokens_{v}"]["p_below_random_layer0"] < 0.05})
        line = ("- **Precision without a frame.** " + lead[0].upper() + lead[1:]
                + ". The earlier paired run at 10x rose too ([results](results/geometry.md#the-key-frame-over-a-ten-times-"
                "longer-run)). "
                + ("No run is below its random value in the paper's direction (Monte Carlo p < 0.05), raw or centred. "
                   if not below else f"Below their random value (p < 0.05): {', '.join(below)}. "))
        longest = [(c, budgets(c)[-1], g(c, budgets(c)[-1])) for c in grown]
        reached = [(c, b, x) for c, b, x in longest if mean([error(d) for d in x]) <= AUTHORS_PRODUCTION["error"] * 1.2
                   and all(whole_layer(d) for d in x)]
        if reached:
            line += "; ".join(
                f"At {b}x `{c}` reaches {mean([error(d) for d in x]):.4f} bits, about the authors' production run's "
                f"{AUTHORS_PRODUCTION['error']} (their report: 6 × 6 × 192, {AUTHORS_PRODUCTION['steps'] // 1000}k "
                f"steps), with its whole layer's keys at {mean([whole_layer(d)['mean'] for d in x]):.3f} against "
                f"{closed_form(x[0], True, False):.3f} random" for c, b, x in reached)
            line += (": at the precision the authors report, our keys are a shared direction, not a frame. In this "
                     "regime (keys drawn without replacement, 3 × 4 × 128, N(0, 0.02)) a longer run is not what the "
                     "frame lacks; whether another regime gives it (keys drawn with replacement, the paper's size) is "
                     "the open question of the next bullet and of the GPU script.")
        else:
            line += ("No model reaches the authors' reported precision "
                     f"({AUTHORS_PRODUCTION['error']} bits) here, so the budget is not settled by these runs.")
        out.append(line)
    taught = [d for d in docs if learned(d)]  # a run on its plateau has no head to find
    singles = [d for d in taught if frame_verdict(d).startswith("**")]
    others = [d for d in taught if d not in singles]
    near = [d for d in others if d["ablation"]["heads"][0]["ratio"] >= FRAME_DAMAGE
            and to_second(d) >= 0.9 * FRAME_RATIO]

    def head(d: dict) -> str:
        return (f"`{d['job']}` {d['ablation']['heads'][0]['name']} (error ×{d['ablation']['heads'][0]['ratio']:.2f}, "
                f"{to_second(d):.2f}× the runner-up)")
    verb = "doubles" if FRAME_DAMAGE == 2 else f"multiplies by {FRAME_DAMAGE:g}"
    line = (f"- **A frame head by seed, not by orthogonality.** {len(singles)} run{'s' if len(singles) != 1 else ''} of "
            f"{len(taught)} that learned the task {'has' if len(singles) == 1 else 'have'} a single frame head by the "
            "rule (the most damaging "
            f"head does at least {FRAME_RATIO:g}x the runner-up's damage and at least {verb} the error)"
            + (": " + "; ".join(f"{head(d)}, with L0 keys at {_r(raw0(d))}" for d in singles) if singles else "")
            + ".")
    if near:
        line += " Near misses (at least 0.9x the rule's ratio): " + "; ".join(head(d) for d in near) + "."
    rest = [d for d in others if d not in near]
    if rest:
        spread = _span([to_second(d) for d in rest], ".2f")
        line += f" The other runs' most damaging head does {spread}x the runner-up's damage."
    torch_init = [d for d in taught if d["model_config"]["init"] != "torch" and d["budget"] == 1]
    torch_runs = [d for d in taught if d["model_config"]["init"] == "torch"]
    if torch_runs and torch_init:
        line += (f" With `init=torch`, whose keys are near random, the most damaging head multiplies the error by "
                 f"{_span([d['ablation']['heads'][0]['ratio'] for d in torch_runs], '.1f')}, against "
                 f"{_span([d['ablation']['heads'][0]['ratio'] for d in torch_init], '.1f')} in the other 1x runs that "
                 "learned the task.")
    line += (" A frame head, where there is one, does not need orthogonal keys, as the authors' follow-up says "
             "(orthogonality picks the wrong head): the ablation, not the key statistic, is the test of it.")

    def bypass(budget: int) -> list[float]:  # the error's ratio with the block of layer 1 or 2 removed
        return [b["ratio"] for d in docs if d["budget"] == budget and not with_replacement(d)
                for b in d["ablation"]["blocks"] if b["name"] in ("L1.block", "L2.block")]

    if bypass(3):
        line += (f" At 3x the blocks of layers 1 and 2 can be bypassed at little cost (the error ×"
                 f"{_span(bypass(3), '.2f')}): layer 0 does the work.")
    for budget in sorted({d["budget"] for d in docs if d["budget"] > 3}):
        line += f" At {budget}x bypassing one of them multiplies the error by {_span(bypass(budget), '.2f')}."
    out.append(line)
    repl = regime_docs(docs)
    paired = [d for c in ("transformer-paired", "tinygpt-paired") for d in g(c)]
    if repl and paired:
        flat = [d for d in repl if not learned(d)]
        tried = sorted({(d["train"]["lr"], d["train"]["warmup"], d["steps"], initialisation(d)) for d in repl})
        theirs = [a for a in authors if a["with_replacement"]]
        key_err = [a for a in authors if not a["with_replacement"] and a["steps"] == paired[0]["steps"]]
        line = ("- **The authors' production regime: keys drawn with replacement.** Their data code draws the keys "
                "with replacement by default, so a repeated key has a delta posterior, a lookup the model must learn "
                "(the `repo` profile now draws them so; the main job's quick profile does not). With our trainer "
                f"{len(flat)} of {len(repl)} runs never left the plateau (error at the end "
                f"{_span([error(d) for d in flat], '.2f') if flat else '-'} bits, at step 0 "
                f"{_span([d['dynamics']['entropy_error'][0] for d in flat], '.2f') if flat else '-'}), over what was "
                "tried: " + "; ".join(f"lr {lr:g} with {w} warm-up steps for {s:,} steps, {init}" for lr, w, s, init in tried)
                + " (the results page has the table and the learning curves).")
        if theirs:
            a = theirs[0]
            errs = [c["entropy_error"] for c in a["curve"]]
            line += (f" The authors' own code in this regime ({a['format']}, {a['steps']:,} steps) goes from "
                     f"{errs[0]:.3f} to {errs[-1]:.3f} bits over the key positions"
                     + (", so it leaves the plateau where ours does not" if left_plateau(errs) and flat
                        else ": on its plateau too" if not left_plateau(errs) else "")
                     + ".")
        line += (f" In the paired format the final query (a lookup of a context key) is not learned at 1x either, "
                 f"which is why the paired runs' error is {_span([error(d) for d in paired], '.2f')} (the query "
                 f"averaged in; a uniform guess there costs log2 20 = {math.log2(20):.2f} bits)"
                 + (f", against {key_err[0]['final']['entropy_error']:.3f} over the key positions alone for the "
                    "authors' code" if key_err else "")
                 + ". A frame of distinguishable keys is what a lookup needs; that the paper's frame belongs to a "
                 "regime where the lookup is learned is a reading these runs cannot test, not a finding: no run here "
                 "learned a lookup.")
        out.append(line)
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
    panels = {model: [c for c in one_factor_cells(groups) if groups[(c, 1)][0]["model"] == model] for model in HEADLINE}
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
    """The study's plan (:mod:`windtunnel.sweep.studies.keyframe_plan`), job names in order."""
    from windtunnel.sweep.studies.keyframe_plan import PLAN, job_name

    return [job_name(*job) for job in PLAN]


def regime_figure(docs, authors, path: Path) -> Path:
    """The learning curves (entropy error on the probe batch) of every run with keys drawn with
    replacement, the authors' code's among them, beside our 1x run without replacement."""
    fig, ax = plt.subplots(figsize=(11, 4))
    for d in regime_docs(docs):
        dyn = d["dynamics"]
        ax.plot(np.maximum(dyn["steps"], 1), dyn["entropy_error"], marker=".", label=d["job"])
    for a in (a for a in authors if a["with_replacement"]):
        ax.plot([max(c["step"], 1) for c in a["curve"]], [c["entropy_error"] for c in a["curve"]], marker="s", ls="--",
                label=f"{a['job']} (the authors' code)")
    ref = next((d for d in docs if d["job"] == "transformer-1x-s0"), None)
    if ref is not None:
        ax.plot(np.maximum(ref["dynamics"]["steps"], 1), ref["dynamics"]["entropy_error"], color="k", lw=1, ls=":",
                label="transformer-1x-s0 (keys without replacement)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("step (step 0 drawn at 1)")
    ax.set_ylabel("entropy error (bits, probe batch)")
    ax.set_title("Keys drawn with replacement: learning curves of what was tried")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    return save_figure(fig, path, metadata=PNG)


def render(results: Path, page: Path, figures: Path, guide: Path | None = None) -> list[Path]:
    """The page and its figures; with ``guide`` (docs/geometry.md), its conclusions block too."""
    docs = load(results)
    missing = [j for j in planned_jobs() if j not in {d["job"] for d in docs}]
    gpu, authors, random_docs = (load(Path(results) / sub) for sub in ("gpu", "authors", "random"))
    groups = by_cell(docs)
    rel = Path(figures).name
    written = [curves_figure(groups, Path(figures) / "keyframe_factors.png"),
               budget_figure(groups, Path(figures) / "keyframe_budget.png"),
               ablation_figure(docs, Path(figures) / "keyframe_ablation.png")]
    if regime_docs(docs):
        written.append(regime_figure(docs, authors, Path(figures) / "keyframe_regime.png"))
    t = next(d for d in docs if d["cell"] == "transformer")["train"]
    paper = paper_size_whole_layer(random_docs)
    lines = [
        "# Paper I's key frame: the model, the measure, or the budget?",
        "",
        "<!-- generated by `python scripts/keyframe_study.py render` from results/keyframe/; do not edit -->",
        "",
        "Paper I reports that the keys of the hypothesis tokens in layer 0 are *more* orthogonal than at",
        f"random weights (mean |off-diagonal cosine| {PAPER_TRAINED} against {PAPER_RANDOM}) and that removing",
        "a single \"frame head\" is catastrophic. Our main-job transformer reads the opposite: nearly",
        "collinear keys. This page separates the candidate causes one factor at a time, on the",
        "bijection tunnel (V = 20, L = 19), with the same trainer, data and protocol for every cell.",
        "",
        "**What it found.**",
        "",
        # the same conclusions as docs/geometry.md's block, their links made relative to docs/results/
        *(line.replace("](results/", "](") for line in conclusions(groups, docs, authors, random_docs)),
        "",
        f"![layer-0 key statistic over training, one factor at a time]({rel}/keyframe_factors.png)",
        "",
        "## How it was measured",
        "",
        "Reproduce (one torch thread a job; jobs resume from `runs/keyframe/<job>`; the study is the package's "
        "`windtunnel.sweep.studies.keyframe`, whose jobs go through the job runner as a sweep's runs do):",
        "",
        "<!-- docs: fast; illustrative \"keyframe_study.py run\" (hours of CPU: 10-75 minutes a job on a shared core); "
        "illustrative \"keyframe_random.py\" (half a minute; section 1 shows what it wrote); illustrative "
        "\"keyframe_authors.py\" (minutes of CPU, and the authors' code beside the repository) -->",
        "```bash",
        "python scripts/keyframe_study.py plan      # the jobs and which are done",
        "python scripts/keyframe_study.py run       # train + diagnose the missing ones -> results/keyframe/<job>.json",
        "python scripts/keyframe_study.py run --jobs 2   # the same, two jobs at once (each in its own process)",
        "python scripts/keyframe_random.py          # the random value without training (seconds)",
        "python scripts/keyframe_authors.py         # the authors' own code (../shared/bench/authors)",
        "python scripts/keyframe_study.py render    # this page and docs/results/figures/keyframe_*.png",
        "```",
        "",
        f"Protocol: batch {t['batch_size']}, AdamW betas {tuple(t['betas'])}, weight decay {t['weight_decay']}, "
        f"{t['warmup']} warmup steps then {t['schedule']}, clip {t['grad_clip']}, lr {t['lr']} for every cell "
        "(the quick profile's shared rate and the authors' recipe; not searched per cell; the trials of section 4 "
        "change it), 3 layers × 4 heads × d 128 for both models; budgets are multiples of the quick profile's 1200 "
        "steps. The statistic: mean |off-diagonal cosine| of the keys E·W_Kᵀ of the 20 key tokens' raw "
        "embeddings, for the **whole layer** (every head's keys side by side, d_model dimensions: the reading "
        "whose random value is the paper's, section 1) and per head (the authors' code, `tokens_raw`, averaged "
        "over a layer's heads); `centred`: the same keys minus their mean over the tokens. Random: 200 fresh "
        "initialisations of the same architecture, and the closed form. "
        f"Probe: {docs[0]['probe']['n_sequences']} sequences; entropy error on 2000 held-out sequences.",
        "",
        "## Every comparison, in numbers",
        "",
        *findings(groups, docs),
        "",
        f"Jobs: {len(docs)} of the plan's {len(docs) + len(missing)} ran"
        + (f"; not run (CPU time): {', '.join(f'`{j}`' for j in missing)}." if missing else "."),
        "",
        "## 1. The measure: the whole layer, and its random value",
        "",
        "Keys K = E·W_Kᵀ of n isotropic embeddings E (d = d_model dimensions) under a random m × d W_K: given "
        "W_K they are Gaussian with covariance S = W_K W_Kᵀ, whose effective dimension tr(S)² / tr(S²) is "
        "m·d/(m + d + 1) in expectation (E tr S = m·d·s², E tr S² = m·d·(m + d + 1)·s⁴, the second moment of a "
        "Wishart matrix). The cosine of two keys is then about N(ρ, σ²) with σ = (1 − ρ²)/√d_eff, ρ = 0 raw "
        "(E|cos| ≈ √(2/(π·d_eff))) and ρ = −1/(n − 1) centred (the folded normal's mean): "
        "`windtunnel.stats.random_key_abs_cosine`, tested against its Monte Carlo at seven (m, d) "
        "(`tests/geometry/test_geometry_stats.py`). Per head m = d_head; for the whole layer m = d_model.",
        "",
        "Without training (`python scripts/keyframe_random.py`, results/keyframe/random): fresh models, the "
        f"closed form and its Monte Carlo, against the paper's random value {PAPER_RANDOM}"
        + (": at the paper's size the whole layer reads " + ", ".join(f"{v:.3f} (`{m}`)" for m, v, _ in paper)
           + f", closed form {paper[0][2]:.4f}." if paper else "."),
        "",
        *(random_table(random_docs) if random_docs else ["Not run yet."]),
        "",
        "Trained, layer 0 (the headline cells, the paired cells at 1x, and every run that recorded the whole layer "
        "centred; '-': not recorded, the runs before the whole layer was a variant of the analysis kept its raw "
        "reading alone):",
        "",
        *measure_table(groups),
        "",
        "## 2. One factor at a time (1x = 1200 steps)",
        "",
        "Each row changes one thing from its model's defaults (`transformer`: LayerNorm, biases, head "
        "tied over the answers, N(0, 0.02); `tinygpt`: RMSNorm eps 1e-6, no biases, head tied over the "
        "whole vocabulary, N(0, 0.02)). `init=torch` is PyTorch's defaults (embedding and positions N(0, 1), "
        "Linear weights and biases Kaiming-uniform); `*-init-embed` changes the token embedding alone to N(0, 1) "
        "(`embed_std=1`; with the tied head, the head with it). Mean ± standard deviation over seeds where there "
        "are several.",
        "",
        *factor_table(groups),
        "",
        "The layer-0 statistic of each of these runs over training is the figure at the top of the page.",
        "",
        "## 3. Budget",
        "",
        *budget_table(groups),
        "",
        f"![key statistic and entropy error over training at each budget run]({rel}/keyframe_budget.png)",
        "",
        "## 4. The authors' production regime: keys drawn with replacement",
        "",
        "The authors' data code draws the keys with replacement by default (`with_replacement=True`), so a "
        "repeated key has a delta posterior: a lookup. Our bijection tunnel has it as "
        "`task_params.with_replacement` (default false, the main job's), recorded in every run's config; the "
        "`repo` profile and the GPU script set it. Why it starts on a plateau: averaged over the key that comes, "
        "each value already revealed is the answer with probability 1/V, as each one not yet revealed, so "
        "elimination alone gains nothing and the first gain needs the whole lookup ([geometry guide]"
        "(../geometry.md#why-our-layer-0-keys-are-collinear-the-key-frame-study)). What was tried on the CPU (one "
        "torch thread; rates, a long warm-up, a longer budget), with the key frame and the head ablation at the "
        "end of each run; a curriculum (`train.curriculum`) is not among them: it grows an integer task "
        "parameter that keeps the sequence format, and the bijection's V and L both change it:",
        "",
        *(regime_table(docs, authors) if regime_docs(docs) else ["No run yet."]),
        "",
        *([f"![learning curves with keys drawn with replacement]({rel}/keyframe_regime.png)", ""]
          if regime_docs(docs) else []),
        "## 5. The authors' own code",
        "",
        "Their TinyGPT and bijection data, unchanged (`../shared/bench/authors`), trained with this page's CPU "
        "protocol at 3 × 4 × 128 in the paired format and measured their way (`scripts/keyframe_authors.py`: "
        "per head, raw token embeddings through layer 0's W_K; the entropy error over the key positions, the "
        "query left out as their evaluation does):",
        "",
        *(authors_table(authors) if authors else ["Not run yet."]),
        "",
        "## 6. The frame head by ablation",
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
        "## 7. Paper budget on a GPU",
        "",
    ]
    if gpu:
        lines += ["`python scripts/gpu/keyframe_paper_budget.py` (results/keyframe/gpu):", "",
                  *gpu_table(gpu), ""]
    else:
        lines += ["Not run yet (no GPU was available). `python scripts/gpu/keyframe_paper_budget.py` trains our "
                  "transformer (the quick profile's options at the paper's size) and `tinygpt` at the paper's "
                  "(paired, 100k steps) and the authors' production (sep-vocab, keys drawn with replacement, the "
                  "`repo` profile's 50k steps) budgets, diagnoses them and writes `results/keyframe/gpu/*.json`, "
                  "which this page then shows.", ""]
    extra = [*random_docs, *authors]
    lines += [
        "## Provenance",
        "",
        f"Machine: {machine_line(docs + extra)}.",
        "",
        "<details markdown>",
        "<summary>Each job: its commit, start, wall and training time, the load and what ran beside it</summary>",
        "",
        *provenance_table(docs),
        "",
        "</details>",
        "",
        *(["The random value and the authors' code:", "", *extra_provenance_table(extra), ""] if extra else []),
    ]
    Path(page).parent.mkdir(parents=True, exist_ok=True)
    Path(page).write_text("\n".join(lines))
    if guide is not None:
        write_block(guide, conclusions(groups, docs, authors, random_docs))
    return [Path(page), *written, *([Path(guide)] if guide is not None else [])]


def extra_provenance_table(docs) -> list[str]:
    rows = []
    for d in docs:
        p = d["provenance"]
        load_ = p["load_while_running"]
        rows.append([f"`{p['command']}`", p["commit"][:10] + (" (dirty)" if p["dirty"] else ""), p["started"],
                     f"{p['wall_seconds'] / 60:.1f}", f"{load_['load1_mean']:.1f} (max {load_['load1_max']:.1f})"])
    return table(["command", "commit", "started (UTC)", "wall (min)", "load average"], rows)


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
