"""The rules of a search's comparisons: how candidates are ranked, which survive a comparison, and
what a reader should check before trusting the winner (the cautions).

At a comparison each candidate has its probe (annealed, when the search anneals: the probe after a
short cooldown branch) and its probe score (the fraction of the gap between the best baseline and
Bayes it closes on the probe). The best ``ceil(n / eta)`` survive (one at the last comparison),
and so do:

- **ties**: every candidate within :data:`PLATEAU_SPREAD` (2%) of the leader, where the ranking is
  noise (at the last comparison within the search's ``finalists`` spread, 15% by default: they
  all train to the end, and the best there wins);
- **the plateau guard**: when the leader's probe score is below the guard (0.5: not even partly
  realised), nothing has left the plateau in a way that tells the candidates apart, and a rate
  still on it (or below it) may be the one that leaves it later: every candidate survives an
  intermediate comparison. At the last comparison the search either trains them all to the end
  (``settle``) or keeps the leader and records the others as *unsettled*: the verdict then says
  that a stopped rate could turn it, and what settles it.

:func:`compare` is the search's decision at a comparison, and :func:`rank` its order of the
finalists: pure functions of the candidates' probes and the search's settings, with no I/O. The
live search (:mod:`windtunnel.tune.search`) calls them with the probes it reads from its runs; a
study of the search calls them with recorded probes (``benchmarks/study_search.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from windtunnel.evaluate.record import METRICS
from windtunnel.train.config import RunConfig
from windtunnel.train.rundir import RunDir

#: candidates whose probes at a comparison lie within this relative spread of each other are tied
PLATEAU_SPREAD = 0.02


class Compared(Protocol):
    """What the rules read of a candidate at a comparison."""

    point: dict[str, Any]
    scores: dict[int, float | None]


def rung_steps(config: RunConfig, fractions: list[float]) -> list[int]:
    """The steps at which candidates are compared: each fraction of ``train.steps`` snapped to the
    probe's grid (multiples of ``eval_every``, so that a run trained without pauses has its probe
    there too), at least one probe interval in and before the end; repeats dropped."""
    tc = config.train
    every = tc.eval_every or max(1, tc.steps // 10)
    steps = []
    for f in fractions:
        s = max(every, round(f * tc.steps / every) * every)
        if s < tc.steps and s not in steps:
            steps.append(s)
    return steps


def probe_at(run_dir: Path, step: int, metric: str) -> float | None:
    """The probe's ``metric`` logged at ``step`` (None when the run has no probe there)."""
    key = METRICS[metric].probe_key
    for row in reversed(RunDir(run_dir).metrics(step)):
        if row.get("step") == step and key in row:
            return float(row[key])
    return None


def _last_probe_row(run_dir: Path, metric: str) -> dict | None:
    key = METRICS[metric].probe_key
    return next((r for r in reversed(RunDir(run_dir).metrics()) if key in r), None)


def last_probe(run_dir: Path, metric: str) -> float | None:
    """The run's last logged probe of ``metric`` (at its end, or where an early decision stopped it)."""
    row = _last_probe_row(run_dir, metric)
    return float(row[METRICS[metric].probe_key]) if row else None


def last_probe_step(run_dir: Path, metric: str) -> int | None:
    """The step of the run's last logged probe of ``metric`` (None: it has none)."""
    row = _last_probe_row(run_dir, metric)
    return int(row["step"]) if row else None


def rank_key(metric: str, score: float | None, kl: float | None) -> tuple[float, float]:
    """Sort key, best first: a missing or non-finite score (a diverged run) ranks last."""
    def finite(v: float | None) -> float:
        return v if v is not None and math.isfinite(v) else math.inf

    if score is None or not math.isfinite(score):
        return math.inf, finite(kl)
    return (score if METRICS[metric].lower_is_better else -score), finite(kl)


def relative_spread(a: float, b: float) -> float:
    """|a - b| relative to the larger of the two in size."""
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


def survivors(ranked: list[tuple[Any, float | None, float | None]], keep: int, guard: float | None = None,
              ties: bool = False, spread: float = PLATEAU_SPREAD) -> tuple[list, bool]:
    """Which of ``ranked`` (best first: ``(candidate, value, probe score)``; a missing or non-finite
    value ranks last) survive a comparison that keeps ``keep``: the best ``keep``, with ``ties``
    every one within ``spread`` (:data:`PLATEAU_SPREAD`) of the leader, and, when the plateau ``guard`` holds (the
    leader's probe score below it), every candidate with a finite value. Returns (the survivors,
    whether the guard held)."""
    finite = [r for r in ranked if r[1] is not None and math.isfinite(r[1])]
    lead = finite[0] if finite else None
    held = guard is not None and lead is not None and lead[2] is not None and lead[2] < guard
    out = [r[0] for i, r in enumerate(ranked)
           if i < keep or (r in finite and (held or (ties and relative_spread(r[1], lead[1]) < spread)))]
    return out, held


class Settings(Protocol):
    """What :func:`compare` reads of a search's settings (a :class:`~windtunnel.tune.settings.TuneSpec`)."""

    metric: str
    eta: float
    guard: float | None
    settle: bool
    keep_ties: bool
    finalists: float


@dataclass(frozen=True)
class Probe:
    """What a comparison reads of one candidate: ``value``, the probe it is ranked by (the annealed
    one where the search anneals; None or non-finite: a failed or diverged run, ranked last),
    ``kl`` (the probe KL, the tie-break) and ``score`` (the primitive score of ``value``, read by
    the plateau guard alone)."""

    candidate: Any
    value: float | None
    kl: float | None = None
    score: float | None = None


@dataclass
class Verdict:
    """What a comparison decides: the candidates that go on (best first), those stopped, those of
    them stopped while the plateau guard held at the last comparison (``unsettled``: they could
    still turn the verdict), and whether the guard held."""

    go_on: list = field(default_factory=list)
    stopped: list = field(default_factory=list)
    unsettled: list = field(default_factory=list)
    held: bool = False


def keep_count(n: int, eta: float, last: bool) -> int:
    """How many of ``n`` candidates a comparison keeps before ties and the guard: ``ceil(n / eta)``,
    one at the last comparison."""
    return 1 if last else math.ceil(n / eta)


def rank(probes: list[Probe], metric: str) -> list:
    """The candidates of ``probes``, best first by :func:`rank_key` (how the finalists are ranked)."""
    return [p.candidate for p in sorted(probes, key=lambda p: rank_key(metric, p.value, p.kl))]


def compare(probes: list[Probe], settings: Settings, last: bool) -> Verdict:
    """The decision at a comparison of the candidates still in the search (``last``: the last
    comparison before the end): the best :func:`keep_count` go on, with the ties and the plateau
    guard of :func:`survivors` (ties within ``finalists`` of the leader at the last comparison).
    Where the guard holds at the last comparison and the search does not ``settle``, the leader
    alone goes on and the others kept are unsettled."""
    ranked = sorted(probes, key=lambda p: rank_key(settings.metric, p.value, p.kl))
    kept, held = survivors([(p.candidate, p.value, p.score) for p in ranked], keep_count(len(ranked), settings.eta, last),
                           settings.guard, settings.keep_ties, settings.finalists if last else PLATEAU_SPREAD)
    unsettled = []
    if last and held and not settings.settle:  # the leader goes on; the others could not be ruled out
        unsettled, kept = kept[1:], kept[:1]
    return Verdict(kept, [p.candidate for p in ranked if p.candidate not in kept], unsettled, held)


def cautions(spec, candidates: list[Compared], best: dict[str, Any], steps_at: list[int]) -> list[str]:
    """What a reader of the search should check before trusting its winner:

    - **edge**: on a numeric axis with three or more values, the winner took the smallest or the
      largest, so the optimum may lie outside the grid (the next search should extend it that way);
    - **plateau**: at the last comparison before the end, the candidates still compared there had
      probes within ``PLATEAU_SPREAD`` (2%) of each other, so halving may have ranked noise (and
      stopped a candidate that would have left the plateau later): ``--full`` is the check.
    """
    out = []
    for key, values in spec.grid.items():
        nums = sorted({v for v in values if isinstance(v, int | float) and not isinstance(v, bool)})
        v = best.get(key)
        if len(nums) >= 3 and v in (nums[0], nums[-1]):
            side, step = ("upper", nums[-1] / nums[-2]) if v == nums[-1] else ("lower", nums[0] / nums[1])
            more = ",".join(f"{x:.3g}" for x in sorted(v * step ** i for i in range(3)))
            out.append(f"best {key} = {v:g} is the grid's {side} edge: the optimum may lie beyond it "
                       f"(search on: --grid {key}={more})")
    if steps_at:
        s = steps_at[-1]
        scores = [c.scores.get(s) for c in candidates if c.scores.get(s) is not None]
        finite = [x for x in scores if math.isfinite(x)]
        if len(finite) >= 2:
            lo, hi = min(finite), max(finite)
            spread = (hi - lo) / max(abs(lo), abs(hi), 1e-12)
            if spread < PLATEAU_SPREAD:
                out.append(f"the {len(finite)} candidates compared at step {s} were within {100 * spread:.1f}% "
                           f"of each other ({spec.metric} {lo:.4g} to {hi:.4g}): a plateau, where the ranking "
                           f"may be noise; train every candidate to the end (--full) before calling a result final")
    return out


def curriculum_cautions(configs: list, steps_at: list[int]) -> list[str]:
    """A candidate with a curriculum compared at a rung before its curriculum reaches the full
    task is scored on a task it has not trained on yet (the probes are at the full task)."""
    out = []
    for c in configs:
        cur = c.train.curriculum
        if cur is not None and steps_at and steps_at[0] < cur.until * c.train.steps:
            out.append(f"a candidate with train.curriculum ({cur.param} from {cur.start}) was compared at step "
                       f"{steps_at[0]}, before its curriculum reaches the full task (step "
                       f"{math.ceil(cur.until * c.train.steps)}): use --full, or --compare-at after {cur.until:g}")
            break
    return out
