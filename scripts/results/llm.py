"""Results page: Language models (the comparisons of results/llm/ and the single-model records),
and the blocks of docs/llm.md that show them."""

import json

from _lib import Context, provenance_line

TITLE = "Language models"
NAV = ""
ORDER = 70
#: the single-model records, each a block of docs/llm.md named llm-<record>
RECORDS = ("smollm2", "smollm2-defaults", "capture-cost", "pythia-cost", "control-rules")
#: the comparisons (records with the ``summary.json`` that ``windtunnel llm --config`` writes)
COMPARISONS = ("paper3-offline",)


def comparison(ctx: Context, name: str) -> str:
    """A recorded comparison: its provenance with the time it took, then the models, headline
    numbers, claims and dissociation (``windtunnel.llm.compare_md``, the command's own tables)."""
    from windtunnel.llm.compare_md import results_markdown

    path = ctx.data_dir / f"{name}.json"
    rec = json.loads(path.read_text())  # floats, as the comparison wrote them
    ctx.used.add(f"{ctx.topic}/{name}")
    p = rec["provenance"]
    parts = [f"{label} {p[key]}" for key, label in (("wall_time", "Wall time"), ("cpu_time", "CPU time (user + system)"),
                                                     ("peak_rss", "peak resident memory")) if p.get(key)]
    cost = "; ".join(parts) + "." + (f" Note: {p['note']}." if p.get("note") else "")
    return "\n".join([f"**{rec['title']}**", "", provenance_line(p, f"{ctx.topic}/{name}.json"), "", cost, "",
                      *results_markdown(rec["summary"])])


def blocks(ctx: Context) -> dict[str, str]:
    out = {f"llm-{n}": comparison(ctx, n) for n in COMPARISONS}
    out |= {f"llm-{n}": ctx.table(n) for n in RECORDS}
    return out


def render(ctx: Context) -> str:
    shown = blocks(ctx)
    return ctx.template(ctx.template_file(), tables={**{k.removeprefix("llm-"): v for k, v in shown.items()},
                                                     "findings": findings(ctx)})


def findings(ctx: Context) -> str:
    """The opening sentences: the trained model's verdict on each of Paper III's claims in the
    offline comparison, against its control, and what the random-weight models got against theirs."""
    from windtunnel.llm.report import CLAIM_TITLES

    summary = json.loads((ctx.data_dir / "paper3-offline.json").read_text())["summary"]
    rows = {r["model"]: r for r in summary["rows"] if r["status"] == "finished"}
    trained = [m for m, r in rows.items() if not r.get("random_weights")]
    parts = []
    for model in trained:
        verdicts = {c["claim"]: c["verdict"] for c in summary["claims"][model]}
        by = {v: [CLAIM_TITLES[c] for c in summary["claim_order"] if verdicts[c] == v]
              for v in ("holds", "partly", "does not hold", "not testable")}
        parts.append(f"{model}, the trained model of the offline comparison, against its control "
                     f"({rows[model]['control']}): " + "; ".join(f"{v}: {', '.join(cs)}" for v, cs in by.items() if cs))
    random = [m for m in rows if m not in trained]
    held = sum(c["verdict"] in ("holds", "partly") for m in random for c in summary["claims"][m])
    return (". ".join(parts) + f". The {len(random)} random-weight models beside it, each against another random model "
            f"of its shape, hold or partly hold {held} of their {len(random) * len(summary['claim_order'])} claims.")
