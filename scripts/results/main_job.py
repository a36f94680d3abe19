"""The main job (`windtunnel run`): its table, its calibration plot, bf16 and the per-position control."""

from _lib import Context, number

TITLE = "The main job"
NAV = ""
ORDER = 10


def render(ctx: Context) -> str:
    import _plots

    cal = ctx.data("calibration")
    ctx.used.add("main-job/calibration")
    figure = ctx.figure("calibration", _plots.calibration, calibration_data(cal),
                        "Predictive entropy per position against Bayes, and the per-position entropy error")
    return ctx.page(figures={"calibration": figure + "\n\n" + _source(ctx, cal)},
                    tables={"findings": findings(ctx.data("recorded"))})


def findings(rec: dict) -> str:
    """The page's opening sentences, from the main job's table: the spread of the entropy errors
    against the uniform predictor's, the best and the last, and whether any reaches 0.01 bits."""
    rows = {r["model"]: r for r in rec["rows"]}
    uniform = next(number(r["entropy_error_bits_95_ci"]) for m, r in rows.items() if m.startswith("uniform"))
    models = {m: number(r["entropy_error_bits_95_ci"]) for m, r in rows.items() if isinstance(r["params"], int)}
    best, last = min(models, key=models.get), max(models, key=models.get)
    below = [m for m, v in models.items() if v < 0.01]
    return (f"All {len(models)} architectures, sized alike and trained alike, learn the bijection's elimination "
            f"rule: entropy error from {models[best]:g} bits ({best}) to {models[last]:g} ({last}), "
            f"against the uniform predictor's {uniform:g}. "
            + (f"{' and '.join(below)} reach below 0.01 bits within the main job's budget." if below else
               "None reaches 0.01 bits within the main job's budget (the paper's models trained for far longer on a GPU)."))


def calibration_data(cal: dict) -> dict:
    return {"title": cal["title"], "k": cal["k"], "h_bayes": [number(v) for v in cal["h_bayes"]],
            "models": {m: {"h_model": [number(v) for v in c["h_model"]], "abs_dh": [number(v) for v in c["abs_dh"]]}
                       for m, c in cal["models"].items()}}


def _source(ctx: Context, rec: dict) -> str:
    from _lib import provenance_line

    return provenance_line(rec["provenance"], "main-job/calibration.json")


def minutes(wall: str) -> str:
    """A record's wall time as the README writes it: ``498 s`` -> ``8 min 18 s`` (one given in
    minutes already stays)."""
    if not wall.endswith(" s") or " min " in wall:
        return wall
    m, s = divmod(round(float(wall[:-2])), 60)
    return f"{m} min {s} s" if m else f"{s} s"


def blocks(ctx: Context) -> dict[str, str]:
    """The README's table of its five commands: the time each took on 2 CPU cores, from the
    records of the main job, paper1-quick, the timed scorecard and the offline LLM comparison."""
    main, p1 = ctx.data("recorded"), ctx.data("timing", "paper1-quick")
    llm = ctx.data("paper3-offline", "llm")
    ctx.used.add("llm/paper3-offline")
    scorecard = ctx.data("decisive-ema", "scorecard-cost")
    unsettled = sum(1 for r in scorecard["rows"] if "?" in r["model"])
    transformer = next(r for r in main["rows"] if r["model"] == "transformer")
    rows = [
        ("the main job", main["provenance"]["wall_time"],
         "the table of the four architectures below, and the folder with `summary.md`, `table.csv`, `calibration.png`",
         "main-job.md"),
        ("train one model", f"{transformer['train_s']} s of training (the main job's transformer)",
         "the run folder, a progress bar for the training and one for the evaluation, then the evaluation: entropy "
         "error with its 95% interval, KL and "
         "accuracy, beside the baselines' entropy error",
         "main-job.md"),
        ("score your own architecture",
         f"{round(int(scorecard['provenance']['wall_time'].split()[0]) / 60)} min, timed (the example mixer at the "
         f"reference's shape, the decisive default: three rates per tunnel, each trained to the end; {unsettled} of "
         f"its {len(scorecard['rows'])} verdicts left unsettled)",
         "a verdict and score per primitive beside the shipped transformer's, and `scorecard.json` with `report.html`",
         "mixers-scorecard.md#what-a-scorecard-costs-and-reuse"),
        ("Paper I's comparison", p1["provenance"]["wall_time"],
         "the comparison table with the paper's numbers beside ours, and the primitives table",
         "paper1-quick.md"),
        ("Paper III on language models",
         f"{minutes(llm['provenance']['wall_time'])} ({llm['summary']['n_models']} models: SmolLM2-135M and "
         f"{llm['summary']['n_models'] - 1} tiny random-weight ones)",
         "each model's progress, then the comparison: a verdict per Paper III criterion for every model, and the "
         "folder with `summary.md`, `table.csv` and the figures side by side",
         "llm.md#across-families-the-offline-comparison"),
    ]
    lines = ["| command | time on 2 CPU cores | what it prints |", "|---|---|---|"]
    lines += [f"| {what} | [{time}](docs/results/{page}) | {prints} |" for what, time, prints, page in rows]
    return {"readme-commands": "\n".join(lines),
            "readme-main-job": ctx.table("recorded", title=False).replace("<small>", "<sub>").replace("</small>", "</sub>")}
