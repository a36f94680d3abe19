"""Does a search agree with training every candidate to the end? The sixteen recorded reversals.

Earlier searches by successive halving (five learning rates, compared at 10% and 30% of a cosine
schedule) picked another rate than training all five to the end did in sixteen (tunnel,
architecture) cases: HMM 3, Kalman 5, bijection 1, regression 7. This study runs, for each case,
the annealed search with the plateau guard (keeping every candidate's state at each comparison,
so that other cooldowns can be branched later), and judges it by what it picks:

    python benchmarks/study_search.py run [--jobs 2] [--root runs/search-study]   # hours of two cores
    python benchmarks/study_search.py ground [--jobs 2] [--root ...]   # where the runs differ from the record
    python benchmarks/study_search.py cooldowns [--fractions 0.5,1] [--jobs 2] [--root ...]   # longer branches
    python benchmarks/study_search.py analyse [--root ...]

The ground truth is the record of every rate trained to the end (``results/search-study/recorded.json``,
from the earlier rounds' full searches), checked on each pick's final probe: where this machine's
run does not reproduce it (within 0.5%), ``ground`` trains that case's every rate to the end here,
and those finals are its ground truth. A search agrees when it picks the full search's winner, or
a rate whose final probe KL is within 2% of the winner's. ``analyse`` judges the live search (its pick), its
``settle`` mode (the leader and the rates the guard kept, each to the end: the best of them,
read from the record) and the halving of before, and writes ``results/search-study/study.json``
(every case, the picks, the costs in run lengths, the provenance) for the docs' generated page.
It also replays each case's last comparison with other rules (:func:`replay`: wider ties, the
longer branches ``cooldowns`` trained from the kept states, a power law through the probes) into
``results/search-study/replays.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
from pathlib import Path

from windtunnel.sweep import Execution
from windtunnel.tune.search import TuneRequest, run_tune

#: the sixteen reversals (docs of the earlier rounds: HMM 3, Kalman 5, bijection 1, regression 7)
CASES = {
    "hmm": ["mlp", "gru", "hybrid"],
    "kalman": ["mamba", "gru", "mlp", "deltanet", "hybrid"],
    "bijection": ["mamba"],
    "regression": ["mamba", "lstm", "mlp", "linear_attention", "deltanet", "swa_transformer", "hybrid"],
}
#: the search run live: annealed comparisons (cooldown 0.2 of the step), plateau guard 0.5, ties kept
#: within 2% at both comparisons (the default before its finalists' spread became 0.15)
LIVE = {"cooldown": 0.2, "guard": 0.5, "keep_ties": True, "finalists": 0.02, "keep_points": True}
#: a run reproduces its recorded final probe within 0.5% (recorded to 4 digits on another CPU; the
#: agreement criterion is 2%)
REPRODUCES = 0.005


def run(root: Path, jobs: int) -> None:
    """The live search of every case (its winner trained to the end), tunnel by tunnel."""
    how = Execution(workers=jobs, progress=False)
    for task, models in CASES.items():
        run_tune(TuneRequest.build({"task": task, "models": models, "spec": LIVE}), root / task, how)


@functools.cache
def _baseline(base_json: str, metric: str) -> float:
    """The best baseline's probe value of ``metric`` for a search's base config (as JSON text):
    computed once per case, however many replays ask."""
    from windtunnel.evaluate.evaluator import probe_baselines, sample_eval
    from windtunnel.evaluate.record import METRICS
    from windtunnel.tasks import make_task
    from windtunnel.train.config import RunConfig

    base = RunConfig.build(json.loads(base_json), where="search base")
    task = make_task(base.task, base.task_params)
    return probe_baselines(task, sample_eval(task, base.train.eval_probe_size, base.train.seed, "probe"))[
        METRICS[metric].probe_key]


def _scores(doc: dict):
    """Probe value -> its primitive score (the search's own probe and baseline)."""
    from windtunnel.evaluate.record import primitive_score

    baseline = _baseline(json.dumps(doc["base"], sort_keys=True), doc["metric"])
    return lambda value: primitive_score(doc["metric"], value, baseline)


def _verdicts(doc: dict):
    """KL at the end -> the verdict its probe score gives (the search's own probe and baseline; the
    thresholds of every scorecard, 0.9 and 0.5)."""
    from windtunnel.evaluate.record import PARTIAL, REALISED

    score = _scores(doc)

    def verdict(value: float) -> str:
        s = score(value)
        return f"{'✓' if s >= REALISED else '~' if s >= PARTIAL else '✗'} {s:.2f}"

    return verdict


def ground(root: Path, jobs: int) -> None:
    """Every rate of each case whose live pick did not reproduce its recorded final, trained to the
    end here (``--full``, in ``ROOT/full/TASK``, resuming the live search's paused candidates): the
    recorded finals came from another machine, and where this one's runs differ, the live pick is
    judged against this machine's finals."""
    recorded = json.loads((Path(__file__).resolve().parents[1] / "results" / "search-study" / "recorded.json").read_text())
    todo: dict[str, list[str]] = {}
    for case in recorded["cases"]:
        if not case_result(root, case)["reproduces"]:
            todo.setdefault(case["task"], []).append(case["model"])
    how = Execution(workers=jobs, progress=False, reuse=[root / task for task in todo])
    for task, models in todo.items():
        run_tune(TuneRequest.build({"task": task, "models": models, "spec": {"full": True}}), root / "full" / task, how)


@functools.cache
def last_points(root: Path, task: str, model: str) -> tuple[dict, int, list[tuple[float, Path, dict]]]:
    """A case's live search (its document), its last comparison step, and every candidate compared
    there: (rate, its kept state at that step, its config). Read once per case (the replays ask
    for it once per rule); the caller does not change it."""
    from windtunnel.tune.outputs import tune_name

    folder = root / task
    doc = json.loads((folder / f"{tune_name(task, model)}.json").read_text())
    last = doc["rung_steps"][-2]
    out = []
    for c in doc["candidates"]:
        if str(last) in c["scores"]:
            point = folder / "points" / f"{c['run']}-at{last}"
            out.append((c["point"]["train.lr"], point, json.loads((point / "config.json").read_text())))
    return doc, last, out


def rules(doc: dict, spread: float = 0.02, guard: bool = True):
    """The live search's settings (:data:`LIVE`) with ties at the last comparison within ``spread``,
    and the plateau guard on or off: what the package's comparison
    (:func:`windtunnel.tune.rules.compare`) decides by, replaying a case's recorded probes."""
    from windtunnel.tune.search import TuneSpec

    return TuneSpec(metric=doc["metric"], eta=doc["spec"]["eta"], guard=LIVE["guard"] if guard else None,
                    keep_ties=LIVE["keep_ties"], finalists=spread)


def cooldown_dir(root: Path, task: str, point: Path, fraction: float) -> Path:
    """Where :func:`cooldowns` trains the branch of ``fraction`` x the step from a kept ``point``."""
    return root / "cooldowns" / task / f"{point.name}-cool{fraction:g}"


def cooldowns(root: Path, jobs: int, fractions: list[float], cases: list[tuple[str, str]]) -> None:
    """Longer cooldown branches at each case's last comparison, from the states the live search
    kept there (``points/``): every candidate compared there, annealed to 0 over ``fraction`` x the
    step. What the live search would have picked with them is :func:`replay`."""
    from windtunnel.engine.jobs import Job, run_jobs
    from windtunnel.train.config import RunConfig
    from windtunnel.train.rundir import branch_run
    from windtunnel.tune.search import branch_config, train_to

    todo = []
    for task, model in cases:
        _, last, points = last_points(root, task, model)
        for _, point, cfg in points:
            for f in fractions:
                config = branch_config(RunConfig.build(cfg, where=str(point)), last, f)
                where = cooldown_dir(root, task, point, f)
                where.parent.mkdir(parents=True, exist_ok=True)
                branch_run(point, last, config, where)
                end = config.train.cooldown.at + config.train.cooldown.steps
                todo.append(Job(where.name, train_to, (config.model_dump(mode="json"), str(where), end)))
    log = root / "cooldowns" / "invocations.txt"  # the replays' provenance names every invocation
    log.parent.mkdir(parents=True, exist_ok=True)
    line = (f"python benchmarks/study_search.py cooldowns --root {root} --fractions {','.join(f'{f:g}' for f in fractions)}"
            f" --cases {','.join(f'{t}:{m}' for t, m in cases)}")
    if line not in (log.read_text().splitlines() if log.is_file() else []):
        with log.open("a") as f:
            f.write(line + "\n")
    run_jobs(todo, Execution(workers=jobs, progress=False))


def _annealed_at_last(root: Path, case: dict, fraction: float) -> list[tuple[float, float, float | None]] | None:
    """Every candidate compared at the case's last comparison, with its probe after a cooldown branch
    of ``fraction`` x the step there (the live branches, or those :func:`cooldowns` trained):
    (rate, the search's metric, probe KL), unsorted; None where a branch is not trained."""
    from windtunnel.train.config import RunConfig
    from windtunnel.tune.rules import probe_at
    from windtunnel.tune.search import branch_config

    doc, last, points = last_points(root, case["task"], case["model"])
    end = last + max(1, round(fraction * last))
    out = []
    for rate, point, cfg in points:
        where = (root / case["task"] / branch_config(RunConfig.build(cfg, where=str(point)), last, fraction).run_name()
                 if fraction == LIVE["cooldown"] else cooldown_dir(root, case["task"], point, fraction))
        value = probe_at(where, end, doc["metric"]) if where.is_dir() else None
        if value is None:
            return None
        out.append((rate, value, probe_at(where, end, "kl_bayes_model")))
    return out


def replay(root: Path, case: dict, finals: dict[float, float], fraction: float = LIVE["cooldown"],
           spread: float = 0.02, extrapolate: bool = False) -> dict | None:
    """The live search's last comparison again, with cooldown branches of ``fraction`` x the step
    (the live ones, or those :func:`cooldowns` trained; None where they are not all there) and ties
    kept within ``spread`` of the leader: the plateau guard on the annealed leader, the survivors,
    the pick (the best final of the survivors, or the leader where the guard holds) and the cost
    this adds to the live search's (longer branches, more finalists), in run lengths.

    ``extrapolate`` (live branches only): where the guard lets go, the candidates are ranked by
    their annealed probes at the two comparisons extended to the end as a power law in the step
    (``v(t) = v(last) (t / last)^-c``, ``c`` from the two probes)."""
    from windtunnel.tune.rules import Probe, compare

    doc, last, points = last_points(root, case["task"], case["model"])
    steps = doc["base"]["train"]["steps"]
    live = max(1, round(LIVE["cooldown"] * last))
    end = last + max(1, round(fraction * last))
    ranked = _annealed_at_last(root, case, fraction)
    if ranked is None:
        return None
    score = _scores(doc)
    verdict = compare([Probe(r, v, kl, score(v)) for r, v, kl in ranked], rules(doc, spread), last=True)
    kept, held = verdict.go_on + verdict.unsettled, verdict.held
    if extrapolate and not held:
        first = doc["rung_steps"][0]
        early = {c["point"]["train.lr"]: c["annealed"][str(first)] for c in doc["candidates"]}
        at_end = {r: v * (steps / last) ** -(math.log(early[r] / v) / math.log(last / first)) for r, v, _ in ranked}
        kept = compare([Probe(r, at_end[r]) for r, _, _ in ranked], rules(doc, spread, guard=False), last=True).go_on
    pick = kept[0] if held else min(kept, key=lambda r: finals[r])
    finalists = sum(str(steps) in c["scores"] for c in doc["candidates"])  # the live search's
    extra = (1 if held else len(kept)) - finalists
    return {"pick": pick, "held": held, "kept": kept,
            "added_runs": (len(points) * (end - live - last) + extra * (steps - last)) / steps}


def replay_first(root: Path, case: dict, finals: dict[float, float], probe: str = "annealed", guard: bool = True,
                 spread: float = 0.02) -> dict | None:
    """The whole search again from the live runs, with another first comparison: candidates ranked
    there by their ``annealed`` probe (the live rule: after a cooldown branch of 0.2 x the step) or
    their ``raw`` one (the run as it is, no branch), and the plateau ``guard`` there on or off; the
    last comparison as live (its branches, its guard), with ties within ``spread`` trained to the
    end. None where it cannot be judged: a rate the first comparison keeps has no state at the
    last one (the live search stopped it there), or a rate it trains to the end has no final in
    the ground truth (the record holds some cases' finals for a few rates only).

    Returns the pick, the survivors of each comparison, whether the guard held at the last, the
    rates stopped at the first while its leader was on the plateau (with the guard off: what the
    verdict would call unsettled) and the search's cost in run lengths, counted from its structure:
    every candidate to the first comparison (and its branch there when annealed), each survivor to
    the last (and its branch), each finalist to the end."""
    from windtunnel.tune.rules import Probe, compare, rank_key

    doc, last, _ = last_points(root, case["task"], case["model"])
    first, steps, metric = doc["rung_steps"][0], doc["base"]["train"]["steps"], doc["metric"]
    at_last = _annealed_at_last(root, case, LIVE["cooldown"])
    if at_last is None:
        return None
    at_last = {r: (v, kl) for r, v, kl in at_last}
    scored = _scores(doc)

    def score(v: float | None) -> float | None:  # a failed run has no probe, and no score
        return scored(v) if v is not None and math.isfinite(v) else None

    column = {"annealed": "annealed", "raw": "scores"}[probe]
    early = sorted(((c["point"]["train.lr"], c.get(column, {}).get(str(first))) for c in doc["candidates"]),
                   key=lambda r: rank_key(metric, r[1], None))
    n = len(early)
    # as live: the comparison of the runs that did not fail
    kept1 = compare([Probe(r, v, None, score(v)) for r, v in early if score(v) is not None],
                    rules(doc, guard=guard), last=False).go_on
    on_plateau = score(early[0][1]) is not None and score(early[0][1]) < LIVE["guard"]
    if any(r not in at_last for r in kept1):
        return None
    verdict = compare([Probe(r, *at_last[r], score(at_last[r][0])) for r in kept1], rules(doc, spread), last=True)
    kept2, held = verdict.go_on + verdict.unsettled, verdict.held
    to_end = verdict.go_on  # where the guard holds, the leader goes on alone
    if any(r not in finals for r in to_end):
        return None
    pick = min(to_end, key=lambda r: finals[r])
    finalists = len(to_end)

    def branch(s: int) -> int:
        return max(1, round(LIVE["cooldown"] * s))

    trained = (n * (first + (branch(first) if probe == "annealed" else 0)) + len(kept1) * (last - first + branch(last))
               + finalists * (steps - last))
    return {"pick": pick, "kept_first": kept1, "kept": kept2, "held": held,
            "plateau_stopped": [r for r, _ in early if r not in kept1] if on_plateau else [],
            "cost_runs": trained / steps}


def measured_finals(root: Path, task: str, model: str) -> dict[float, float] | None:
    """The final probe of every rate trained to the end here by :func:`ground`, or None."""
    from windtunnel.tune.outputs import tune_name

    path = root / "full" / task / f"{tune_name(task, model, full=True)}.json"
    if not path.is_file():
        return None
    doc = json.loads(path.read_text())
    end = str(doc["base"]["train"]["steps"])
    return {c["point"]["train.lr"]: c["scores"][end] for c in doc["candidates"] if end in c["scores"]}


def _finals(row: dict) -> dict[float, float]:
    """A case's ground truth (its row of :func:`case_result`): every rate's final probe KL, trained
    here where the record was not reproduced, else the record's."""
    return {float(k): v for k, v in (row["final_probe_kl_here"] or row["final_probe_kl"]).items()}


def _agrees(finals: dict[float, float], rate: float, final: float | None = None) -> bool:
    """A pick agrees with training every rate to the end: it is the full winner, or its final probe
    KL (``final``, or its entry in ``finals``) is within 2% of the winner's."""
    best = min(finals, key=finals.get)
    return rate == best or (finals[rate] if final is None else final) <= finals[best] * 1.02


def _lr(v: float) -> str:
    return f"{v:g}"


def case_result(root: Path, case: dict) -> dict:
    """One reversal judged: the recorded halving pick and full winner beside the live search's
    pick, its final probe (a check that the runs reproduce the recorded ones) and its cost."""
    from windtunnel.train.rundir import RunDir
    from windtunnel.tune.outputs import tune_name

    folder = root / case["task"]
    doc = json.loads((folder / f"{tune_name(case['task'], case['model'])}.json").read_text())
    steps = doc["base"]["train"]["steps"]
    recorded = {float(k): v for k, v in case["final_probe_kl"].items()}
    pick = doc["best"]["train.lr"]
    measured = doc["winner"]["scores"][str(steps)] if doc["metric"] == "kl_bayes_model" else doc["winner"]["kl"]
    reproduces = pick not in recorded or abs(recorded[pick] - measured) <= REPRODUCES * recorded[pick]
    here = measured_finals(root, case["task"], case["model"])
    finals = here if here else recorded  # the ground truth: this machine's runs where they differ from the record
    best_rate = min(finals, key=finals.get)
    pick_final = finals.get(pick, measured)

    def agrees(rate: float | None, final: float | None) -> bool | None:
        return None if rate is None or final is None else _agrees(finals, rate, final)

    last = doc["rung_steps"][-2] if len(doc["rung_steps"]) > 1 else None
    kept_last = [c for c in doc["candidates"] if str(last) in c["scores"] and not c["status"].startswith("stopped at step "
                                                                                                  + str(doc["rung_steps"][0]))]
    unsettled = doc.get("unsettled", [])
    settle = [c["point"]["train.lr"] for c in doc["candidates"] if c["status"] == "winner" or c["point"] in unsettled]
    settle_known = {r: finals.get(r, measured if r == pick else None) for r in settle}
    settle_pick = min(settle_known, key=lambda r: settle_known[r]) if None not in settle_known.values() else None
    # settling trains every rate of ``settle`` to the end and keeps the best: where the full winner is
    # one of them, what it keeps is the full winner or a rate that beats it, whatever the others' finals
    settle_agrees = (True if best_rate in settle else
                     agrees(settle_pick, settle_known.get(settle_pick)) if settle_pick is not None else None)
    trained = 0
    for d in folder.iterdir():
        cfg_path = d / "config.json"
        if not cfg_path.is_file() or d.parent.name == "points":
            continue
        cfg = json.loads(cfg_path.read_text())
        cool = cfg["train"].get("cooldown")
        if cfg["model"] != doc["base"]["model"] or (cool and cool["at"] not in doc["rung_steps"]):
            continue
        rows = RunDir(d).metrics()
        first = cfg["train"]["cooldown"]["at"] if cfg["train"].get("cooldown") else 0
        trained += (rows[-1]["step"] - first) if rows else 0
    verdict = _verdicts(doc)
    return {
        "pick_verdict": verdict(pick_final), "full_verdict": verdict(finals[best_rate]),
        "task": case["task"], "model": case["model"], "halving_pick": case["halving_pick"], "full_winner": best_rate,
        "recorded_winner": min(recorded, key=recorded.get), "full_winner_probe_kl": finals[best_rate],
        "final_probe_kl": case["final_probe_kl"], "pick": pick, "pick_final_probe_kl": pick_final,
        "pick_final_measured": measured,
        "reproduces": reproduces, "ground": "trained here" if here else "the record",
        "final_probe_kl_here": {_lr(k): round(v, 4) for k, v in here.items()} if here else None,
        "agrees": agrees(pick, pick_final), "halving_agrees": agrees(case["halving_pick"], finals.get(case["halving_pick"])),
        "guard_held_at_last": bool(unsettled), "unsettled": unsettled, "settle_pick": settle_pick,
        "settle_agrees": settle_agrees,
        "kept_at_last": len(kept_last), "cost_runs": round(trained / steps, 3), "seconds": doc["seconds"],
    }


def analyse(root: Path, out: Path, concurrent: str) -> dict:
    """Judge every case and write ``study.json``: a table record (a row per case) with the counts."""
    import datetime

    from windtunnel.provenance import portable, provenance

    recorded = json.loads((Path(__file__).resolve().parents[1] / "results" / "search-study" / "recorded.json").read_text())
    cases = [case_result(root, c) for c in recorded["cases"]]
    agree = sum(bool(c["agrees"]) for c in cases)
    halving = sum(bool(c["halving_agrees"]) for c in cases)
    settled = [c for c in cases if c["settle_agrees"] is not None]
    settle_agree = sum(bool(c["settle_agrees"]) for c in settled)
    cost = round(sum(c["cost_runs"] for c in cases) / len(cases), 3)
    rows = [{**c, "halving": f"{_lr(c['halving_pick'])} ({_yes(c['halving_agrees'])})",
             "live": f"{_lr(c['pick'])} ({_yes(c['agrees'])})", "best": _lr(c["full_winner"]),
             "settled": (f"{_lr(c['settle_pick'])} ({_yes(c['settle_agrees'])})" if c["settle_pick"] is not None else
                         f"the best of {len(c['unsettled']) + 1} ({_yes(c['settle_agrees'])})"),
             "unsettled_rates": ", ".join(_lr(p["train.lr"]) for p in c["unsettled"]) or "-",
             "verdicts": f"{c['pick_verdict']} / {c['full_verdict']}",
             "finals": f"{c['pick_final_probe_kl']:.4f} / {c['full_winner_probe_kl']:.4f}"} for c in cases]
    same_verdict = sum(c["pick_verdict"][0] == c["full_verdict"][0] for c in cases)
    columns = [("task", "tunnel"), ("model", "model"), ("best", "full winner"), ("halving", "halving's pick"),
               ("live", "annealed search's pick"), ("unsettled_rates", "rates left unsettled"),
               ("settled", "pick once settled"), ("finals", "final probe KL: pick / full winner"),
               ("verdicts", "verdict: pick / full winner"), ("ground", "full winner from"),
               ("cost_runs", "cost (runs)")]
    doc = {
        "title": (f"The annealed search with the plateau guard on the sixteen recorded reversals of the plain halving: "
                  f"its pick agrees with training every rate to the end in {agree} of {len(cases)} (the halving: "
                  f"{halving}); once its unsettled rates are settled, in {settle_agree} of {len(settled)}; its pick gives "
                  f"the full winner's verdict in {same_verdict} of {len(cases)}; "
                  f"mean cost {cost} runs"),
        "what": "The live search (annealed comparisons, cooldown 0.2 of the comparison step; plateau guard 0.5; ties "
                "kept; compared at 10% and 30%) on the sixteen recorded reversals of the plain halving, judged against "
                "every rate trained to the end (recorded.json).",
        "search": LIVE, "criterion": "agree: the full winner, or a rate whose final probe KL is within 2% of its",
        "columns": [{"key": k, "label": v} for k, v in columns], "rows": rows,
        "agree": agree, "halving_agree": halving, "same_verdict": same_verdict,
        "settle_agree": settle_agree, "settle_cases": len(settled),
        "mean_cost_runs": cost,
        "provenance": provenance(f"python benchmarks/study_search.py run --root {root} && "
                                 f"python benchmarks/study_search.py analyse --root {root}",
                                 concurrent=concurrent, root=Path(__file__).resolve().parents[1],
                                 date=datetime.date.today().isoformat()),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    rows = replays(root, recorded["cases"], cases)
    columns = [("variant", "variant"), ("cooldown", "cooldown at 30% (x the step)"), ("ties", "ties kept within"),
               ("cases", "cases"),
               ("agree", "agree"), ("live_agree", "the live search, same cases"),
               ("mean_cost_runs", "mean cost (runs)"), ("which", "cases replayed")]
    whole = [r for r in rows if r["cases"] == len(cases)]
    live_row = next(r for r in whole if r["variant"] == "the live search")
    enough = [r for r in whole if r["agree"] >= 14]
    cheapest = min(enough, key=lambda r: r["mean_cost_runs"]) if enough else max(whole, key=lambda r: r["agree"])
    title = ("The last comparison replayed from the kept states: the live search agrees in "
             f"{live_row['agree']} of {len(cases)} at a mean cost of {live_row['mean_cost_runs']} runs; "
             f"the cheapest variant replayed on all {len(cases)} that reaches 14 is {cheapest['variant']} within "
             f"{cheapest['ties']}: {cheapest['agree']} of {len(cases)}, at {cheapest['mean_cost_runs']} runs"
             if enough else
             f"the best variant replayed on all {len(cases)} is {cheapest['variant']} within {cheapest['ties']}: "
             f"{cheapest['agree']} of {len(cases)}, at {cheapest['mean_cost_runs']} runs (none reaches 14)")
    (out / "replays.json").write_text(json.dumps({
        "title": title,
        "what": "Each case's last comparison (30%) again, from the candidates' states the live search kept there: "
                "cooldown branches of the given length (0.2: the live ones), the plateau guard as live, and every "
                "candidate within the given spread of the leader kept to the end (the pick: the best of them at the "
                "end, read from the finals). Cost: the live search's, plus the longer branches and the extra "
                "finalists. The first comparison (10%) is the live one.",
        "columns": [{"key": k, "label": v} for k, v in columns], "rows": rows,
        "provenance": {**doc["provenance"], "command": portable(" && ".join([
            *(invocations.read_text().splitlines() if (invocations := root / "cooldowns" / "invocations.txt").is_file()
              else []), f"python benchmarks/study_search.py analyse --root {root}"]))},
    }, indent=1, ensure_ascii=False) + "\n")
    rows = first_replays(root, recorded["cases"], cases)
    columns = [("variant", "variant"), ("first_probe", "probe at 10%"), ("first_guard", "guard at 10%"),
               ("ties", "ties kept within at 30%"), ("cases", "cases"), ("agree", "agree"),
               ("same_verdict", "the full winner's verdict"), ("plateau_stops", "cases stopping rates on the plateau at 10%"),
               ("mean_cost_runs", "mean cost (runs)"), ("max_cost_runs", "most (runs)"),
               ("live_agree", "the live search, same cases and ties"), ("live_mean_cost_runs", "its mean cost (runs)"),
               ("which", "cases replayed")]
    (out / "first.json").write_text(json.dumps({
        "title": first_title(rows, len(cases)),
        "what": "Each case's search again from the live runs, with another first comparison (10%): the candidates "
                "ranked by their annealed probe (the live rule) or the raw one, with the plateau guard there on or "
                "off; the last comparison (30%) as live, with ties within 2% or 15% trained to the end (the pick: the "
                "best of them at the end, read from the finals). Cost in run lengths, from the search's structure: "
                "every candidate to 10% (and its branch there when annealed), each survivor to 30% and its branch, "
                "each finalist to the end. A case counts where it can be judged: the rates a variant keeps at 10% "
                "were kept live (only those have states at 30%), and the rates it trains to the end have finals in "
                "the ground truth (the record holds finals of a few rates only for some cases). Each variant is set "
                "beside the live search on the same cases, with the same ties.",
        "columns": [{"key": k, "label": v} for k, v in columns], "rows": rows,
        "provenance": {**doc["provenance"], "command": portable(f"python benchmarks/study_search.py analyse --root {root}")},
    }, indent=1, ensure_ascii=False) + "\n")
    return doc


#: the replays of the last comparison: (cooldown fraction, ties within) of each variant; the live
#: search is (0.2, 0.02); "extrapolated": the live branches, ranked by their power-law extrapolation
REPLAYS = [(0.2, 0.02), (0.2, 0.05), (0.2, 0.1), (0.2, 0.15), (0.2, 0.2), (0.5, 0.02), (0.5, 0.05), (0.5, 0.1),
           (0.5, 0.15), (1.0, 0.02), (1.0, 0.05), (1.0, 0.1), (1.0, 0.15), ("extrapolated", 0.02), ("extrapolated", 0.1)]


def replays(root: Path, recorded: list[dict], cases: list[dict]) -> list[dict]:
    """Each variant of :data:`REPLAYS` on every case whose branches are all trained: how many agree,
    against the live search on the same cases, and the mean cost."""
    rows = []
    for fraction, spread in REPLAYS:
        agree = live = 0
        cost, names = [], []
        for case, row in zip(recorded, cases, strict=True):
            finals = _finals(row)
            out = (replay(root, case, finals, spread=spread, extrapolate=True) if fraction == "extrapolated" else
                   replay(root, case, finals, fraction, spread))
            if out is None:
                continue
            agree += _agrees(finals, out["pick"])
            live += bool(row["agrees"])
            cost.append(row["cost_runs"] + out["added_runs"])
            names.append(f"{case['task']} {case['model']}")
        if names:
            variant = ("the live search" if (fraction, spread) == (LIVE["cooldown"], 0.02) else
                       "ranked by each probe's power law to the end" if fraction == "extrapolated" else
                       "wider ties" if fraction == LIVE["cooldown"] else "a longer cooldown at 30%")
            rows.append({"variant": variant, "cooldown": LIVE["cooldown"] if fraction == "extrapolated" else fraction,
                         "ties": f"{100 * spread:g}%", "cases": len(names),
                         "agree": agree, "live_agree": live, "mean_cost_runs": round(sum(cost) / len(cost), 2),
                         "which": "all sixteen" if len(names) == len(recorded) else ", ".join(names)})
    return rows


#: the first comparison's variants: (its probe, the plateau guard there); each replayed with ties
#: within 2% and within 15% at the last comparison. ("annealed", True) is the live search.
FIRSTS = [("annealed", True), ("annealed", False), ("raw", True), ("raw", False)]


def first_replays(root: Path, recorded: list[dict], cases: list[dict]) -> list[dict]:
    """Each variant of :data:`FIRSTS` on every case it can be replayed on: how many picks agree
    with the full winner (and give its verdict), how many cases stop rates on the plateau at the
    first comparison, and the search's cost in run lengths, on average and at most."""
    rows = []
    finals = [_finals(row) for row in cases]
    spreads = (0.02, 0.15)
    lives = {(i, s): replay_first(root, case, fin, "annealed", True, s)  # each variant is set beside it
             for i, (case, fin) in enumerate(zip(recorded, finals, strict=True)) for s in spreads}
    for (probe, guard), spread in ((v, s) for v in FIRSTS for s in spreads):
        agree = verdict = plateau = live_agree = 0
        cost, live_cost, names = [], [], []
        for i, case in enumerate(recorded):
            out, live = replay_first(root, case, finals[i], probe, guard, spread), lives[(i, spread)]
            if out is None or live is None:
                continue
            agree += _agrees(finals[i], out["pick"])
            live_agree += _agrees(finals[i], live["pick"])
            mark = _verdicts(last_points(root, case["task"], case["model"])[0])
            best = min(finals[i], key=finals[i].get)
            verdict += mark(finals[i][out["pick"]])[0] == mark(finals[i][best])[0]
            plateau += bool(out["plateau_stopped"])
            cost.append(out["cost_runs"])
            live_cost.append(live["cost_runs"])
            names.append(f"{case['task']} {case['model']}")
        if names:
            rows.append({"variant": "the live search" if (probe, guard) == ("annealed", True) else
                         f"{probe} probe at 10%, guard {'on' if guard else 'off'} there",
                         "first_probe": probe, "first_guard": "on" if guard else "off",
                         "ties": f"{100 * spread:g}%", "cases": len(names), "agree": agree, "same_verdict": verdict,
                         "plateau_stops": plateau, "mean_cost_runs": round(sum(cost) / len(cost), 2),
                         "max_cost_runs": round(max(cost), 2), "live_agree": live_agree,
                         "live_mean_cost_runs": round(sum(live_cost) / len(live_cost), 2),
                         "which": "all sixteen" if len(names) == len(recorded) else
                         "all but " + ", ".join(f"{c['task']} {c['model']}" for c in recorded
                                                if f"{c['task']} {c['model']}" not in names)})
    return rows


def first_title(rows: list[dict], n: int) -> str:
    """The replays' headline: how many variants stay within 2 runs on every case they replay,
    the cheapest on average, and whether any agrees as often as the live search on its cases."""
    within = [r for r in rows if r["max_cost_runs"] <= 2]
    cheapest = min(rows, key=lambda r: r["mean_cost_runs"])
    as_good = [r for r in rows if r["variant"] != "the live search" and r["agree"] >= r["live_agree"]
               and r["mean_cost_runs"] < r["live_mean_cost_runs"]]
    head = (f"{len(within)} of {len(rows)} variants stay within 2 runs on every case they replay" if within else
            "no variant stays within 2 runs on every case it replays")
    tail = (f"; the cheapest is {_variant(cheapest)}, against the live search's {cheapest['live_agree']} on the "
            f"same cases")
    if as_good:
        best = min(as_good, key=lambda r: r["mean_cost_runs"])
        tail += (f"; the cheapest that agrees as often as the live search on its cases is {_variant(best)}, against "
                 f"{best['live_mean_cost_runs']} runs for the live search there")
    return f"The first comparison replayed on the {n} reversals: {head}{tail}"


def _variant(row: dict) -> str:
    return (f"{row['variant']} with ties within {row['ties']} at 30% ({row['agree']} of {row['cases']}, "
            f"{row['mean_cost_runs']} runs on average, {row['max_cost_runs']} at most)")


def _yes(flag: bool | None) -> str:
    return "?" if flag is None else "agrees" if flag else "differs"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("phase", choices=["run", "ground", "cooldowns", "analyse"])
    ap.add_argument("--fractions", default="0.5,1", help="cooldowns: branch lengths, as fractions of the step")
    ap.add_argument("--cases", default="all", help="cooldowns: task:model,... (all: the sixteen)")
    ap.add_argument("--root", type=Path, default=Path("runs/search-study"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--concurrent", default="not stated", help="what else ran on the machine (for the record)")
    args = ap.parse_args()
    if args.phase == "cooldowns":
        cases = ([(t, m) for t, ms in CASES.items() for m in ms] if args.cases == "all" else
                 [tuple(c.split(":")) for c in args.cases.split(",")])
        cooldowns(args.root, args.jobs, [float(f) for f in args.fractions.split(",")], cases)
        return
    if args.phase in ("run", "ground"):
        (run if args.phase == "run" else ground)(args.root, args.jobs)
        return
    doc = analyse(args.root, Path(__file__).resolve().parents[1] / "results" / "search-study", args.concurrent)
    for c in doc["rows"]:
        print(f"{c['task']:<10} {c['model']:<16} halving {_lr(c['halving_pick']):<8} full {_lr(c['full_winner']):<8} "
              f"pick {_lr(c['pick']):<8} agrees {c['agrees']!s:<5} settle {c['settle_agrees']!s:<5} cost {c['cost_runs']}")
    print(f"agree {doc['agree']}/16 (halving {doc['halving_agree']}/16, settled {doc['settle_agree']}/{doc['settle_cases']}); "
          f"mean cost {doc['mean_cost_runs']} runs")


if __name__ == "__main__":
    main()
