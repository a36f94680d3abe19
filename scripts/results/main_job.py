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
    return ctx.page(figures={"calibration": figure + "\n\n" + _source(ctx, cal)})


def calibration_data(cal: dict) -> dict:
    return {"title": "", "k": cal["k"], "h_bayes": [number(v) for v in cal["h_bayes"]],
            "models": {m: {"h_model": [number(v) for v in c["h_model"]], "abs_dh": [number(v) for v in c["abs_dh"]]}
                       for m, c in cal["models"].items()}}


def _source(ctx: Context, rec: dict) -> str:
    from _lib import provenance_line

    return provenance_line(rec["provenance"], "main-job/calibration.json")


def blocks(ctx: Context) -> dict[str, str]:
    """The README's table of the four commands: the time each took on 2 CPU cores, from the
    records of the main job, paper1-quick and the timed scorecard."""
    main, p1 = ctx.data("recorded"), ctx.data("timing", "paper1-quick")
    scorecard = ctx.data("measured", "scorecard-cost")
    unsettled = sum(1 for r in scorecard["rows"] if "?" in r["model"])
    transformer = next(r for r in main["rows"] if r["model"] == "transformer")
    rows = [
        ("the main job", main["provenance"]["wall_time"],
         "the table of the four architectures below, and the folder with `summary.md`, `table.csv`, `calibration.png`",
         "main-job.md"),
        ("train one model", f"{transformer['train_s']} s of training (the main job's transformer)",
         "the run folder, a progress line, then the evaluation: entropy error with its 95% interval, KL and "
         "accuracy, beside the baselines' entropy error",
         "main-job.md"),
        ("score your own architecture",
         f"{round(int(scorecard['provenance']['wall_time'].split()[0]) / 60)} min (the example mixer, its eight "
         f"searches included, in its own 2-layer shape, by the search that is now `--no-settle`: {unsettled} of its 8 "
         "verdicts left unsettled; the decisive default is still to be timed)",
         "a verdict and score per primitive beside the shipped transformer's, and `scorecard.json` with `report.html`",
         "mixers-scorecard.md#what-a-scorecard-costs-and-reuse"),
        ("Paper I's comparison", p1["provenance"]["wall_time"],
         "the comparison table with the paper's numbers beside ours, and the primitives table",
         "paper1-quick.md"),
    ]
    lines = ["| command | time on 2 CPU cores | what it prints |", "|---|---|---|"]
    lines += [f"| {what} | [{time}](docs/results/{page}) | {prints} |" for what, time, prints, page in rows]
    return {"readme-commands": "\n".join(lines),
            "readme-main-job": ctx.table("recorded", title=False).replace("<small>", "<sub>").replace("</small>", "</sub>")}
