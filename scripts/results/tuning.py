"""Results page: The tuning searches (the template tuning.md): what they found, the rates the
quick profiles commit, what a search costs and how often it agrees with training every rate to
the end; the searches themselves are the sub-page tuning-searches."""

from _lib import Context, number
from _tables import format_cell, render_table

TITLE = "The tuning searches"
NAV = "The tuning searches"
NAV_TITLE = "What they found"
ORDER = 40


def render(ctx: Context) -> str:
    return ctx.page(tables={"findings": findings(ctx), "committed-rates": committed_rates(),
                            "candidates-finding": candidates_finding(ctx)})


#: the agreement study's bar on the sixteen reversals for a change of the scorecard's protocol (issue 54)
REVERSALS_BAR = 14


def candidates_finding(ctx: Context) -> str:
    """Which candidate sets meet the bar on the reversals, at what cost, and what the proxy for the
    nine mixers' cells (the committed rates a set holds) says; read from candidates.json."""
    rows = ctx.data("candidates", "search-study")["rows"]

    def agree(r: dict) -> int:
        return int(r["agree"].split(" of ")[0])

    cases = rows[0]["agree"].split(" of ")[1]  # the reversals every set is judged on

    default = rows[1]
    cheaper = [r for r in rows if agree(r) >= REVERSALS_BAR and r["cost_runs"] < default["cost_runs"]]
    short = [r for r in rows if agree(r) < REVERSALS_BAR]
    held = ", ".join(f"{r['candidates']}: {r['committed_held']}" for r in [default, *cheaper])
    passing = "; ".join(f"{r['candidates']} agree in {r['agree']} at {r['cost_runs']} runs" for r in cheaper)
    return (f"Of the sets that cost fewer runs than the default ({default['candidates']}, {default['agree']}), "
            f"{passing or 'none'}, {'which meets' if len(cheaper) == 1 else 'which meet'} the bar of {REVERSALS_BAR} of {cases} "
            f"that a change of the scorecard's protocol must pass; "
            f"{', '.join(r['candidates'] for r in short[:-1])} and {short[-1]['candidates']} do not. "
            f"The bar has a second half: the nine "
            f"built-in mixers' verdicts against mixers-quick in at least 95% of their cells. The committed rates "
            f"each set holds are its proxy here ({held}): where a set does not hold the committed rate, the verdict "
            f"at the rate it picks is not recorded, and training those cells is the part of the study not yet "
            f"run. Until it is, a cheaper set stays an option (`--lrs`), and the default keeps three rates.")


def findings(ctx: Context) -> str:
    """The page's few sentences, their numbers read from the records they summarise (and the
    default search's finalists from ``windtunnel.tune.search.SEARCH``)."""
    from windtunnel.tune.search import SEARCH

    cost = {r["what"].split(" (")[0].split(":")[0]: r for r in ctx.data("search-cost")["rows"]}
    search, halving = cost["the default search"], cost["plain successive halving"]
    study = ctx.data("study", "search-study")
    spread = f"{round(100 * SEARCH['finalists'])}%"
    wide = next(r for r in ctx.data("replays", "search-study")["rows"]
                if r["variant"] == "wider ties" and r["ties"] == spread and number(r["cooldown"]) == SEARCH["cooldown"])
    return (f"Every architecture has its own learning rate on every tunnel (the table below). The default "
            f"search costs {number(search['steps_runs']):g} runs in optimiser steps and {number(search['wall_runs']):g} "
            f"in wall time against one run (the plain halving: {number(halving['steps_runs']):g} and "
            f"{number(halving['wall_runs']):g}). On the {study['settle_cases']} cases where training every rate to the "
            f"end overturned the plain halving's pick, the search's rules pick the winner (or a rate within 2% of it) "
            f"in {study['agree']} with 2% ties at the last comparison (the halving: {study['halving_agree']}) and in "
            f"{wide['agree']} of {wide['cases']} with the {spread} finalists it now keeps ({number(wide['mean_cost_runs']):g} "
            f"runs on average); its pick gives the winner's verdict in {study['same_verdict']} of "
            f"{study['settle_cases']}.")


def committed_rates() -> str:
    """The learning rate each quick profile's ``tuned`` block commits, a row per tunnel."""
    import json
    from importlib import resources

    profiles = resources.files("windtunnel.configs") / "quick"
    tuned = {p.name.removesuffix(".json"): json.loads(p.read_text()).get("tuned", {})
             for p in sorted(profiles.iterdir(), key=lambda p: p.name) if p.name.endswith(".json")}
    models = list(dict.fromkeys(m for block in tuned.values() for m in block if not m.startswith("_")))
    rows = [{"tunnel": task, **{m: format_cell(block[m]["lr"], {"sci": True}) if m in block else "-" for m in models}}
            for task, block in tuned.items()]
    table = render_table({"columns": [{"key": "tunnel", "label": "tunnel"}, *({"key": m, "label": m} for m in models)],
                          "rows": rows})
    source = "Read from `src/windtunnel/configs/quick/*.json` (each entry names the search it came from)."
    return f"{table}\n\n<small>{source}</small>"
