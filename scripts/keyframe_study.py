"""Paper I's key frame: the model, the measure, or the budget? (issue 44)

One factor at a time on the bijection tunnel, with our trainer and data: the layer-0 key-frame
statistic (mean |off-diagonal cosine| of the keys of the V key tokens, per head as the authors'
code, raw and centred; every layer), the entropy error, the curves over training and the head
ablations, for our ``transformer`` and the authors' architecture (``tinygpt``).

    python scripts/keyframe_study.py plan                # the jobs, and which are done
    python scripts/keyframe_study.py run [--only GLOB]   # train + diagnose what is missing (resumable)
    python scripts/keyframe_study.py run --jobs 2        # two jobs at once, each in its own process
    python scripts/keyframe_study.py run --only JOB --again  # run a job with results again (new analyses)
    python scripts/keyframe_study.py collect             # rebuild the JSON data from the run folders
    python scripts/keyframe_study.py render              # results/keyframe/*.json -> docs/results/keyframe.md
                                                         # and docs/geometry.md's conclusions

The study is the package's (:mod:`windtunnel.sweep.studies.keyframe`: the plan, the records, the
jobs, which go through the job runner as every sweep's runs do); this script parses the options
and renders the page. Every job is one run folder ``runs/keyframe/<job>`` (git-ignored; training
resumes from it) and one small JSON ``results/keyframe/<job>.json`` (committed): the run's config,
its evaluation, the key-frame, ablation and dynamics numbers the page uses, and the provenance
(command, commit, date, machine, and the load and other busy processes seen while it trained).
``render`` reads only those JSON files, so the page and its figures follow from committed data
(``tests/test_keyframe_results.py`` renders them again and compares). ``--out`` and ``--runs``
write elsewhere and ``--steps`` shortens every job (a check of the machinery, not the study).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs" / "keyframe"
RESULTS = ROOT / "results" / "keyframe"
PAGE = ROOT / "docs" / "results" / "keyframe.md"
FIGURES = ROOT / "docs" / "results" / "figures"


def options(args):
    """The study's folders and options from the command line."""
    from windtunnel.sweep.studies.keyframe import StudyOptions

    return StudyOptions(args.out, args.runs, again=getattr(args, "again", False), steps=getattr(args, "steps", None),
                        root=ROOT)


def cmd_plan(args) -> None:
    from windtunnel.sweep.studies.keyframe_plan import BASE_STEPS, CELLS, job_name, job_overrides, selected

    for cell, budget, seed in selected(args.only):
        name = job_name(cell, budget, seed)
        state = "done" if (args.out / f"{name}.json").is_file() else "todo"
        print(f"{state:5} {name:36} {CELLS[cell].model:12} {BASE_STEPS * budget:6} steps  {job_overrides(cell, budget, seed)}")


def cmd_run(args) -> None:
    from windtunnel.config import ConfigError
    from windtunnel.engine.execution import Execution
    from windtunnel.engine.jobs import failures
    from windtunnel.interrupt import Interrupted
    from windtunnel.sweep.studies.keyframe import run_study

    try:
        outcomes = run_study(args.only, options(args), Execution(workers=args.jobs, progress=False))
    except ConfigError as exc:
        raise SystemExit(f"--jobs: {exc}") from None
    except Interrupted as exc:
        raise SystemExit(f"{exc}; run the command again to resume") from None
    failed = failures(outcomes)
    if failed:
        raise SystemExit(f"{len(failed)} of {len(outcomes)} jobs failed (run again to retry them):\n"
                         + "\n".join(f"  {name}: {error}" for name, error in failed.items()))


def cmd_collect(args) -> None:
    """Rebuild the data of every results JSON from its run folder's config, evaluation and
    diagnostics (after a change to what the records keep), keeping its provenance."""
    from windtunnel.sweep.studies.keyframe import collect

    for name in collect(args.only, options(args)):
        print(f"{name}: rebuilt from {args.runs / name}")


def cmd_render(args) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    from keyframe_render import render

    render(RESULTS, PAGE, FIGURES, ROOT / "docs" / "geometry.md")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    for step in ("plan", "run", "collect"):
        p = sub.add_parser(step)
        p.add_argument("--only", nargs="*", help="job names or glob patterns (default: the whole plan)")
        p.add_argument("--out", type=Path, default=RESULTS, help="the records' folder (default: results/keyframe)")
        if step == "plan":
            continue
        p.add_argument("--runs", type=Path, default=RUNS, help="the run folders' folder (default: runs/keyframe)")
        if step == "run":
            p.add_argument("--again", action="store_true",
                           help="run the jobs whose results exist again (the analyses added since: e.g. the whole "
                                "layer's centred keys); the record keeps the earlier run's commit and error")
            p.add_argument("--jobs", default=None,
                           help="jobs at once, each in its own process (an integer, or 'auto': one per core; "
                                "default: one after another in this process)")
            p.add_argument("--steps", type=int, default=None,
                           help="train every job this many steps instead of its budget (a check of the machinery; "
                                "write such records elsewhere with --out and --runs)")
    sub.add_parser("render")
    args = ap.parse_args(argv)
    {"plan": cmd_plan, "run": cmd_run, "collect": cmd_collect, "render": cmd_render}[args.step](args)


if __name__ == "__main__":
    main()
