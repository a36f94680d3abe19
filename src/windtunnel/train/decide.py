"""Decide early when the answer is in: stop a run once its held-out probe has shown its primitive
realised, and let the full evaluation at that checkpoint be the verdict.

At every probe the run's **probe score** is the fraction of the gap between the task's best
baseline and the exact posterior that the model closes on the probe sequences (the same score as
the verdict's, :func:`~windtunnel.evaluate.record.primitive_score`, with the best baseline measured
on the same probe). When it has been at least ``threshold`` (0.9, realised) at ``patience`` (2)
probes in a row, the run pauses with a resumable checkpoint and is evaluated in full (the
held-out set, bootstrap intervals). If that evaluation realises the primitive, it is the run's
``eval.json``, marked ``decided`` (the rule and the step) with ``steps_to_realise``, and the run
is done. If it does not, the attempt is recorded in ``decision.json`` and training resumes to the
end, bit for bit as if it had never paused: a run is never stopped for looking hopeless, and a
verdict always comes from a full evaluation. A decided run resumed without a rule (``--no-early-stop``)
trains on to its end from the same checkpoint.

Runs that race (a search's candidates, compared at the earliest step at which any of them was
decided) share a **race** file (:class:`Race`): a run decided there records its step, and a rival
pauses, resumable, at its first probe at or past the earliest recorded step, since its training
beyond it cannot change the comparison. A rival that wins is resumed to its end, bit for bit.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from windtunnel.evaluate.evaluator import probe_baselines
from windtunnel.evaluate.record import METRICS, REALISED, Evaluation, primitive_score, realised_at
from windtunnel.files import atomic_write_text
from windtunnel.tasks import Batch, Task
from windtunnel.train.rundir import RunDir

DECISION_FILE = "decision.json"


@dataclass(frozen=True)
class Decision:
    """The early-decision rule of a run: its primitive's ``metric`` (``kl_bayes_model``,
    ``entropy_error`` or ``accuracy``), the score that counts as realised and how many probes in a
    row must show it."""

    metric: str
    threshold: float = REALISED
    patience: int = 2

    def __post_init__(self) -> None:
        probed = [m for m, spec in METRICS.items() if spec.probe_key]
        if self.metric not in probed:
            raise ValueError(f"decision metric {self.metric!r}: one the probe logs ({', '.join(probed)})")
        if self.patience < 1:
            raise ValueError(f"decision patience {self.patience}: at least 1")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def eval_score(self, ev: dict[str, Any]) -> float | None:
        """The primitive score of an evaluation at its training length (None without the metric
        or a baseline): what the verdict reads."""
        e = Evaluation(ev)
        spec = METRICS[self.metric]
        value = e.value(self.metric)
        base = [b[spec.eval_key] for name, b in ev["baselines"].get(e.main_key, {}).items()
                if name != "bayes" and spec.eval_key in b]
        if value is None or not base:
            return None
        return primitive_score(self.metric, value, (min if spec.lower_is_better else max)(base))


def decided(ev: dict[str, Any] | None, rule: Decision | None) -> bool:
    """``ev`` is the verdict of an early decision under ``rule`` (any rule when None)."""
    mark = (ev or {}).get("decided")
    return mark is not None and (rule is None or {k: mark.get(k) for k in ("metric", "threshold", "patience")} == rule.to_json())


@dataclass(frozen=True)
class Race:
    """The file runs racing to a decision share: the earliest step at which one of them was decided
    realised (``{"step": N, "run": name}``), or no file while none has been."""

    path: Path

    def step(self) -> int | None:
        try:
            return int(json.loads(self.path.read_text())["step"])
        except (OSError, ValueError, KeyError, TypeError):  # none yet (or half a file: read again at the next probe)
            return None

    def record(self, step: int, run: str) -> None:
        """``run`` was decided at ``step``: kept where it is earlier than the step recorded."""
        now = self.step()
        if now is None or step < now:
            atomic_write_text(self.path, json.dumps({"step": step, "run": run}))

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


class Decider:
    """One run's early decision as it trains: the probe score of each probe row, the streak read
    back from the log on resume, whether the run has tried (``decision.json``), and the
    :class:`Race` it runs in, if any."""

    def __init__(self, rule: Decision, task: Task, probe: Batch, run: RunDir, race: Race | None = None):
        self.rule, self.run, self.race = rule, run, race
        self.key = METRICS[rule.metric].probe_key
        self.baseline = probe_baselines(task, probe).get(self.key)
        self.path = run.path / DECISION_FILE
        tried = json.loads(self.path.read_text()) if self.path.is_file() else None
        self.tried = tried is not None and tried.get("rule") == rule.to_json()
        self.series: list[tuple[int, float | None]] = []

    def resume(self, rows: list[dict[str, Any]]) -> None:
        """The probe scores of the rows logged before a resume (however they were logged)."""
        self.series = [(r["step"], self._score(r[self.key])) for r in rows if self.key in r]

    def _score(self, value: float) -> float | None:
        return None if self.baseline is None else primitive_score(self.rule.metric, value, self.baseline)

    @property
    def realised_step(self) -> int | None:
        """The step at which the probe series has shown the primitive realised, if it has."""
        return realised_at(self.series, self.rule.threshold, self.rule.patience)

    @property
    def due(self) -> bool:
        """The probe has shown the primitive realised and the run has not tried a decision yet."""
        return not self.tried and self.realised_step is not None

    def beaten(self, step: int) -> bool:
        """A rival in the race was decided at ``step`` or before: training on changes nothing."""
        first = self.race.step() if self.race is not None else None
        return first is not None and first <= step

    def score(self, row: dict[str, Any]) -> bool:
        """Add the probe score to a probe ``row``; True when the rule asks for a decision now."""
        if self.key not in row or self.baseline is None:
            return False
        row["probe_score"] = self._score(row[self.key])
        self.series.append((row["step"], row["probe_score"]))
        return self.due

    def settle(self, ev: dict[str, Any], step: int) -> bool:
        """The evaluation at the decision checkpoint: realised (it becomes the verdict, marked) or
        not (the attempt is recorded and training resumes to the end)."""
        score = self.rule.eval_score(ev)
        realised = score is not None and score >= self.rule.threshold
        self.tried = True
        atomic_write_text(self.path, json.dumps({"rule": self.rule.to_json(), "step": step, "score": score,
                                                 "realised": realised}, indent=1))
        if realised:
            ev["decided"] = {**self.rule.to_json(), "step": step}
            ev["steps_to_realise"] = self.realised_step
            if self.race is not None:
                self.race.record(step, self.run.path.name)
        return realised
