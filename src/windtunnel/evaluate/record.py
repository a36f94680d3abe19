"""What the package knows about its metrics, in one table, and a reader of a run's evaluation.

:data:`METRICS` is the one table of the headline metrics: the name tables and sweeps use, the
key of ``eval.json`` it is read from, the key of the held-out probe in ``metrics.jsonl``, which
way is better, the label a table prints and the digits it shows. Every table, search, summary
and data frame reads its metrics from here, in this order (the order of the columns of
``results.csv`` and ``table.csv``).

:class:`Evaluation` reads an ``eval.json`` (what :func:`~windtunnel.evaluate.evaluator.evaluate`
returns): the metrics at the training length (:attr:`Evaluation.main`) or at any evaluated
length, and the baselines'.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class MetricSpec:
    """One headline metric (all in bits but accuracy)."""

    name: str  #: the name in tables, sweep files and searches (``entropy_error``)
    eval_key: str  #: its key in each length's summary of ``eval.json`` (``entropy_error_mean_abs``)
    probe_key: str | None  #: its key in ``metrics.jsonl`` rows with a probe (``probe_entropy_error``), if logged
    lower_is_better: bool
    label: str  #: how a table heads it
    digits: int  #: decimals a table shows
    unit: str = "bits"  #: its unit ("" for a fraction)

    @property
    def heading(self) -> str:
        """Its column's heading, with the unit: ``entropy error (bits)``, ``accuracy``."""
        return f"{self.label} ({self.unit})" if self.unit else self.label

    def better(self, a: float, b: float) -> bool:
        """``a`` is strictly better than ``b``."""
        return a < b if self.lower_is_better else a > b


#: the headline metrics, in table order
METRICS: dict[str, MetricSpec] = {m.name: m for m in (
    MetricSpec("entropy_error", "entropy_error_mean_abs", "probe_entropy_error", True, "entropy error", 4),
    MetricSpec("kl_bayes_model", "kl_bayes_model", "probe_kl_bayes_model", True, "KL(Bayes‖model)", 4),
    MetricSpec("kl_model_bayes", "kl_model_bayes", None, True, "KL(model‖Bayes)", 4),
    MetricSpec("accuracy", "accuracy", "probe_accuracy", False, "accuracy", 3, unit=""),
)}
#: the metrics a primitive can be scored by and a search can rank by
ScoredMetric = Literal["entropy_error", "kl_bayes_model", "accuracy"]
SCORED_METRICS: tuple[str, ...] = ScoredMetric.__args__


#: a primitive is realised at a score of at least this, partly realised at ``PARTIAL``
REALISED, PARTIAL = 0.9, 0.5


def primitive_score(metric: str, value: float, baseline: float) -> float:
    """Fraction of the gap between the best baseline and the exact posterior that ``value`` closes:
    1 - value / baseline for errors, (value - baseline) / (1 - baseline) for accuracy; 0 is the
    baseline, 1 is Bayes, below 0 is worse than the baseline."""
    if METRICS[metric].lower_is_better:
        return 1.0 - value / baseline if baseline > 0 else float("nan")
    return (value - baseline) / (1.0 - baseline) if baseline < 1 else float("nan")


def realised_at(scores: list[tuple[int, float]], threshold: float = REALISED, patience: int = 2) -> int | None:
    """The step at which a probe series ``[(step, score), ...]`` has shown the primitive realised:
    the ``patience``-th probe in a row whose score is at least ``threshold`` (None if none is)."""
    run = 0
    for step, score in scores:
        run = run + 1 if score is not None and score >= threshold else 0
        if run >= patience:
            return step
    return None


def metric(name: str) -> MetricSpec:
    """The spec of the metric ``name`` (a ``KeyError`` naming the known ones otherwise)."""
    try:
        return METRICS[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(METRICS)}") from None


class Evaluation(Mapping[str, Any]):
    """A run's ``eval.json``, read: ``main`` is the summary at the training length (each metric's
    ``{"value", "lo", "hi"}`` under its ``eval_key``, the curves, ``step``), :meth:`at` any
    length's, :meth:`value` one metric's number. It is the dict itself too (``ev["n_params"]``)."""

    def __init__(self, doc: Mapping[str, Any]):
        self.doc = doc

    def __getitem__(self, key: str) -> Any:
        return self.doc[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.doc)

    def __len__(self) -> int:
        return len(self.doc)

    @property
    def main_key(self) -> str:
        """The training length as the key of ``lengths`` (``"None"`` for a task without one)."""
        return str(self.doc.get("main_length"))

    @property
    def main(self) -> dict[str, Any]:
        """The summary at the training length ({} when the evaluation has none)."""
        return self.doc.get("lengths", {}).get(self.main_key, {})

    def at(self, length: str | int | None = None) -> dict[str, Any]:
        """The summary at ``length`` (None: the training length)."""
        return self.main if length is None else self.doc["lengths"][str(length)]

    def value(self, name: str, length: str | int | None = None) -> float | None:
        """The number of metric ``name`` at ``length`` (None: the training length), or None when
        that length's summary has no such metric (accuracy of a Gaussian task)."""
        entry = self.at(length).get(metric(name).eval_key)
        return None if entry is None else entry["value"]

    def headline(self, length: str | int | None = None) -> dict[str, float]:
        """``{eval_key: value}`` of the KL, the entropy error and the accuracy at ``length``, those
        it has (what a search records of its winner)."""
        s = self.at(length)
        keys = [METRICS[n].eval_key for n in ("kl_bayes_model", "entropy_error", "accuracy")]
        return {k: s[k]["value"] for k in keys if k in s}


def evaluation_lines(ev: Mapping[str, Any]) -> list[str]:
    """An evaluation as ``windtunnel train`` and ``windtunnel eval`` print it: parameters, steps and
    seconds, then per evaluated length the entropy error with its interval, the KL and the accuracy,
    and each baseline's entropy error (keys and decimals from :data:`METRICS`; the terminal spells
    the KL ``KL(Bayes||model)``)."""
    e, kl, acc = METRICS["entropy_error"], METRICS["kl_bayes_model"], METRICS["accuracy"]
    lines = [f"{ev['n_params']:,} parameters, {ev['steps']} steps, {ev['train_seconds']:.0f} s of training"]
    for L, s in ev["lengths"].items():
        name = f"{ev['length_field']}={L}" if ev["length_field"] else "eval"
        v = s[e.eval_key]
        line = f"  {name}: {e.label} {v['value']:.{e.digits}f} {e.unit} [{v['lo']:.{e.digits}f}, {v['hi']:.{e.digits}f}]"
        line += f", KL(Bayes||model) {s[kl.eval_key]['value']:.{kl.digits}f} {kl.unit}"
        if acc.eval_key in s:
            line += f", {acc.label} {s[acc.eval_key]['value']:.{acc.digits}f}"
        lines.append(line)
        lines += [f"      baseline {b}: {e.label} {v[e.eval_key]:.{e.digits}f} {e.unit}" for b, v in ev["baselines"][L].items()]
    return lines
