"""The sweep's tables as markdown: comparisons per experiment (ours beside the paper's) and primitives."""

from __future__ import annotations

from html import escape
from typing import Any

from windtunnel.evaluate.record import METRICS, SCORED_METRICS
from windtunnel.sweep.config import SweepConfig
from windtunnel.tables import table

_MARK = {"yes": "✓", "partial": "~", "no": "✗"}


def _fmt(x: float | None, digits: int = 4) -> str:
    if x is None:
        return "-"
    return f"{x:.{digits}f}" if abs(x) >= 10 ** -digits or x == 0 else f"{x:.1e}"


def _cell(row: dict[str, Any], metric: str, digits: int = 4) -> str:
    if row.get(metric) is None:
        return "-"
    return f"{_fmt(row[metric], digits)} [{_fmt(row[f'{metric}_lo'], digits)}, {_fmt(row[f'{metric}_hi'], digits)}]"


def _length_label(row: dict[str, Any]) -> str:
    if row["length"] is None:
        return "-"
    return f"{row['length']}" + (" (train)" if row["is_main"] else "")


def comparison_table(aggregated: list[dict[str, Any]], experiment: str) -> str:
    """Every model (and evaluation length) of one experiment, mean over seeds with 95% intervals."""
    rows = [r for r in aggregated if r["experiment"] == experiment]
    if not rows:
        return "_no finished runs_"
    grid_cols = sorted({k for r in rows for k in r if k.startswith("grid:")})
    shown = [METRICS[m] for m in SCORED_METRICS if any(r.get(m) is not None for r in rows)]  # accuracy: where it is
    head = ["model", *(c.removeprefix("grid:") for c in grid_cols), "length", "params", "seeds",
            *(m.heading for m in shown), "train s", "paper", "paper source"]
    body = []
    order = {m: i for i, m in enumerate(dict.fromkeys(r["model"] for r in rows))}  # the experiment's order
    key = (lambda r: (order[r["model"]], *(str(r.get(c)) for c in grid_cols), r["length"] or 0))
    for r in sorted(rows, key=key):
        paper_metric = "accuracy" if r.get("paper_accuracy") is not None else "entropy_error"
        paper = r.get(f"paper_{paper_metric}")
        cells = [r["model"], *(escape(str(r.get(c)), quote=False) for c in grid_cols), _length_label(r), f"{r['n_params']:,}",
                 str(r["n_seeds"]), *(_cell(r, m.name, m.digits) for m in shown), f"{r['train_seconds']:.0f}"]
        acc_note = " (acc.)" if paper_metric == "accuracy" and paper is not None else ""
        cells += [_fmt(paper, METRICS[paper_metric].digits) + acc_note,
                  r.get(f"paper_{paper_metric}_source") or "-"]
        body.append(cells)
    lines = table(head, body)
    base = {}
    for r in rows:
        if r["is_main"]:
            for m in SCORED_METRICS:
                if r.get(f"baseline_{m}") is not None:
                    base[m] = (r[f"baseline_{m}"], r[f"baseline_{m}_name"])
    if base:
        parts = [f"{METRICS[m].label} {_fmt(v, 4)} ({name})" for m, (v, name) in base.items()]
        lines.append("")
        lines.append("Best baseline at the training length: " + "; ".join(parts) + ".")
    return "\n".join(lines)


def score_text(v: dict[str, Any]) -> str:
    """A primitive's score, with the scores at the ends of its interval over seeds when there are several."""
    spread = f" [{v['score_lo']:.2f}, {v['score_hi']:.2f}]" if v.get("n_seeds", 1) > 1 else ""
    return f"{v['score']:.2f}{spread}"


def primitives_table(prims: dict[str, dict[str, dict[str, Any]]], rules: list[str],
                     paper_claims: dict[str, dict[str, str]] | None) -> str:
    """Model x primitive: verdict and score (and the paper's claim), in the order of ``rules``. The
    ``realised`` count (✓ 1, ~ ½) is over the profile's own settings: a ladder's other rungs
    (``PRIMITIVE@RUNG``) have a column but do not count, so that it counts primitives."""
    counted = [p for p in rules if "@" not in p] or rules
    credit = {"yes": 1.0, "partial": 0.5}
    head = ["model", *rules, "realised", *(["paper"] if paper_claims else [])]
    body = []
    for model, per in prims.items():
        cells = [model, *(f"{_MARK[per[p]['verdict']]} {score_text(per[p])}" if p in per else "-" for p in rules)]
        count = sum(credit.get(per[p]["verdict"], 0.0) for p in counted if p in per)
        cells.append(f"{count:g}/{len(counted)}")
        if paper_claims:
            claim = paper_claims.get(model)
            if claim and any(p in claim for p in counted):  # a paper that claims none of these primitives: "-"
                n = sum(credit.get(claim.get(p), 0.0) for p in counted)
                cells.append(" ".join(_MARK.get(claim.get(p), "-") for p in counted) + f" ({n:g}/{len(counted)})")
            else:
                cells.append("-")
        body.append(cells)
    return "\n".join(table(head, body))


def ladder_rules(rules: list[str]) -> dict[str, list[str]]:
    """The rules of each primitive scored at more than one rung (``transport@S2_O2``, ``transport``,
    ...), in the sweep's order, which lists each ladder easiest first."""
    groups: dict[str, list[str]] = {}
    for name in rules:
        groups.setdefault(name.partition("@")[0], []).append(name)
    return {prim: names for prim, names in groups.items() if len(names) > 1}


def highest_realised(steps: list[tuple[str, dict[str, Any] | None]]) -> str | None:
    """The hardest rung realised: the last (label, result) of an easiest-first ladder whose verdict
    is ✓, or None."""
    return next((label for label, r in reversed(steps) if (r or {}).get("verdict") == "yes"), None)


def ladders_table(prims: dict[str, dict[str, dict[str, Any]]], rules: list[str],
                  experiments: dict[str, str]) -> str:
    """Model x laddered primitive: the hardest rung realised (its experiment, from ``experiments``:
    rule -> experiment) and, in brackets, the score at every rung, easiest first."""
    ladders = ladder_rules(rules)
    head = ["model", *(f"{prim} ({', '.join(experiments[n] for n in names)})" for prim, names in ladders.items())]
    body = []
    for model, per in prims.items():
        cells = [model]
        for names in ladders.values():
            if not any(per.get(n) for n in names):  # not run at any rung of this ladder
                cells.append("-")
                continue
            top = highest_realised([(experiments[n], per.get(n)) for n in names])
            scores = ", ".join("-" if per.get(n, {}).get("score") is None else f"{per[n]['score']:.2f}" for n in names)
            cells.append(f"{top or 'none'} ({scores})")
        body.append(cells)
    return "\n".join(table(head, body))


def primitives_note(sweep: SweepConfig) -> str:
    r = sweep.primitives
    rules = "; ".join(f"{p}: {METRICS[rule.metric].label} on {', '.join(rule.experiments())}" for p, rule in r.rules.items())
    return (
        f"Score = fraction of the best baseline's gap to the exact posterior that the model closes at the training "
        f"length ({rules}); ✓ at ≥ {r.realised}, ~ at ≥ {r.partial}, else ✗; with several seeds the score of "
        "the mean, with the scores at the ends of the metric's 95% interval over seeds in brackets. The paper column "
        "gives the paper's claims in the same column order."
    )


def results_markdown(summary: dict[str, Any], sweep: SweepConfig) -> list[str]:
    """Status, the comparison table of every experiment, and the primitives (``##`` sections)."""
    from windtunnel.sweep.paper import paper_results

    lines = [f"**{summary['finished']} of {summary['n_runs']} runs finished.**"]
    if summary["missing"]:
        lines.append(f"Not finished (run `windtunnel sweep` again to continue): {', '.join(summary['missing'])}.")
    if summary["failed"]:
        lines.append("Failed: " + "; ".join(f"`{k}`: {escape(v, quote=False)}" for k, v in summary["failed"].items()))
    lines += ["", "Entropy error = mean over held-out sequences and positions of |H_model − H_Bayes| (bits). "
              "Intervals are 95%: Student's t over seeds, or the run's bootstrap over sequences with one seed. "
              "Paper numbers are the papers' own, printed beside ours, never used in a computation.", "",
              "## Comparison", ""]
    for exp in dict.fromkeys(r["experiment"] for r in summary["table"]):
        lines += [f"### {escape(exp, quote=False)}", "", comparison_table(summary["table"], exp), ""]
    if summary.get("primitives"):
        claims = paper_results(sweep.paper).get("primitives") if sweep.paper else None
        lines += ["## Inference primitives", "",
                  primitives_table(summary["primitives"], list(sweep.primitives.rules), claims), "",
                  primitives_note(sweep), ""]
        rules = list(sweep.primitives.rules)
        if ladder_rules(rules):
            exps = {n: rule.experiment for n, rule in sweep.primitives.rules.items()}
            lines += ["## Difficulty ladders", "",
                      ladders_table(summary["primitives"], rules, exps), "",
                      "Per primitive scored at several rungs (in the sweep's order, easiest first): the hardest "
                      "rung realised (✓), or none, and in brackets the score at each rung.", ""]
    return lines


def sweep_markdown(summary: dict[str, Any], sweep: SweepConfig, title: str | None = None) -> str:
    lines = [f"# {title or 'Sweep ' + summary['sweep']}", ""]
    if summary["description"]:
        lines += [escape(summary["description"], quote=False), ""]
    return "\n".join(lines + results_markdown(summary, sweep))
