"""The capacity pre-flight of a scorecard: before anything trains, the scored model is sized on
every tunnel and rung it would train on (:func:`preflight`), and a user's model is checked
against the model contract there (:func:`check_contract`: a broken one stops the scorecard). A tunnel where it cannot be matched
to the transformer's count (or whose config its shape breaks, or whose model code raises) is
left out of the scorecard, with the reason and, for a count out of reach, the single shape
fields that would bring it within the tolerance (:func:`what_fits`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from windtunnel.config import ConfigError, Overrides, as_overrides
from windtunnel.engine.jobs import error_line
from windtunnel.models import count_params, make_model, model_class
from windtunnel.models.capacity import CapacityError
from windtunnel.registry import is_import_path
from windtunnel.sweep.config import SweepConfig
from windtunnel.sweep.expand import grid_points, matched_configs, reference_config, run_overrides
from windtunnel.sweep.primitives import REFERENCE
from windtunnel.sweep.shape import SHAPE_FIELDS, ModelSets, knob_of, shape_sources
from windtunnel.tables import table
from windtunnel.tasks import make_task
from windtunnel.train.build import sized_model_params
from windtunnel.train.config import RunConfig, resolve_run


@dataclass
class Sizing:
    """The scored model on one rung of one tunnel: the transformer's count (``target``), the count
    matched and the knob's value, the shape (field -> value and where it came from), or why it
    cannot be matched (``error``) and what would fit (``fits``: ``--model-set`` items)."""

    primitive: str
    rule: str
    experiment: str
    task: str
    target: int | None = None
    matched: int | None = None
    knob: str | None = None
    value: int | None = None
    shape: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None
    fits: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, [], {})}


def preflight(sweep: SweepConfig, model: str, overrides: Overrides | None = None,
              model_sets: ModelSets | None = None) -> list[Sizing]:
    """``model`` sized on every experiment of a scorecard's ``sweep`` (at its first grid point: the
    seed changes no count), as :func:`~windtunnel.sweep.expand.expand` would size it."""
    point = grid_points(sweep.grid)[0]
    rules = {r.experiment: name for name, r in sweep.primitives.rules.items()}
    out = []
    for exp in sweep.experiments:
        task = exp.tasks()[0]
        rule = rules[exp.label(task)]
        sizing = Sizing(rule.partition("@")[0], rule, exp.label(task), task)
        ovr = run_overrides(sweep, exp, point, overrides)
        profile = exp.profile or sweep.profile
        target = Target(task, exp.models, profile, ovr, model)
        try:
            ref = reference_config(task, REFERENCE, profile, ovr)
            task_obj = make_task(task, ref.task_params)
            sizing.target = count_params(REFERENCE, task_obj.spec, sized_model_params(ref, task_obj))
            sizing.knob = knob_of(model, resolve_run(task, model, profile, ovr(model)).model_params)
            cfg = target.matched()
            sizing.matched = _count(cfg)
            sizing.value = cfg.model_params[sizing.knob]
            sizing.shape = shape_sources(task, model, profile, cfg.model_params, model_sets, overrides)
        except CapacityError as exc:
            sizing.error = str(exc)
            sizing.fits = what_fits(target, exc, overrides)
        except ConfigError as exc:
            sizing.error = str(exc)
        except Exception as exc:  # noqa: BLE001  the user's model code: its tunnel is left out, the others go on
            sizing.error = f"the model raised {error_line(exc)}"
        if sizing.ok and is_import_path(model):
            check_contract(cfg)
        out.append(sizing)
    return out


def check_contract(cfg: RunConfig) -> None:
    """A user's model, built as ``cfg`` trains it, keeps the model contract on its task's shapes
    (:func:`~windtunnel.models.contract.check_model`, which the build runs): a :class:`ConfigError`
    naming what is broken, an exception of its code included, before anything trains."""
    task = make_task(cfg.task, cfg.task_params)
    try:
        make_model(cfg.model, task.spec, sized_model_params(cfg, task))
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001  the user's code, run on the task's shapes
        raise ConfigError(f"model '{cfg.model}' raised {error_line(exc)} when built and run on task '{cfg.task}' "
                          "(windtunnel.models.check_model)") from None


@dataclass(frozen=True)
class Target:
    """The scored ``model`` on one experiment, as the pre-flight sizes it: the experiment's
    ``task``, ``models`` and ``profile``, and ``ovr`` (model -> its runs' overrides there)."""

    task: str
    models: list[str]
    profile: str
    ovr: Callable[[str], Overrides]
    model: str

    def matched(self, ovr: Callable[[str], Overrides] | None = None) -> RunConfig:
        """The model's run, capacity-matched to the transformer (``ovr``: other overrides)."""
        configs = matched_configs(self.task, self.models, self.profile, ovr or self.ovr, REFERENCE)
        return next(c for c in configs if c.model == self.model)


def what_fits(target: Target, exc: CapacityError, overrides: Overrides | None = None) -> list[str]:
    """The ``--model-set TUNNEL.field=value`` items, one per shape field of the target's model
    (that no ``--set`` fixes), each the nearest value that brings the count within the tolerance:
    fewer layers or a narrower width where the smallest knob is too many, more where the largest is
    too few; with the knob's value and the count reached."""
    task, ovr, model = target.task, target.ovr, target.model
    base = resolve_run(task, model, target.profile, ovr(model)).model_params
    fields = model_class(model).Config.model_fields
    fixed = {k.removeprefix("model_params.") for k, _ in as_overrides(overrides)}
    shrink = exc.closest > exc.target
    fits = []
    for name in SHAPE_FIELDS:
        if name not in fields or name == exc.knob or name in fixed:
            continue
        now = base.get(name, fields[name].default)
        if not isinstance(now, int):
            continue
        tries = ([now - i for i in range(1, 9)] if shrink else [now + i for i in range(1, 9)]) if name == "n_layers" \
            else [now // 2 ** i for i in range(1, 5)] if shrink else [now * 2 ** i for i in range(1, 5)]
        for value in (v for v in tries if v >= 1):
            pinned = (lambda m, v=value, n=name: [*ovr(m), *([(f"model_params.{n}", v)] if m == model else [])])
            try:
                cfg = target.matched(pinned)
            except ConfigError:
                continue
            fits.append(f"{task}.{name}={value} ({exc.knob}={cfg.model_params[exc.knob]}: {_count(cfg):,} parameters)")
            break
    return fits


def _count(cfg: RunConfig) -> int:
    """A run's model's parameter count, as it trains (position tables sized for its evaluation)."""
    task = make_task(cfg.task, cfg.task_params)
    return count_params(cfg.model, task.spec, sized_model_params(cfg, task))


def unmatched(sizings: list[Sizing]) -> dict[str, Sizing]:
    """The primitives left out (primitive -> its first rung that cannot be matched)."""
    out: dict[str, Sizing] = {}
    for s in sizings:
        if not s.ok:
            out.setdefault(s.primitive, s)
    return out


def _shape_text(shape: dict[str, dict[str, Any]], knob: str | None) -> str:
    return ", ".join(f"{k}={v['value']} ({v['from']})" for k, v in shape.items() if k != knob)


def preflight_lines(sizings: list[Sizing]) -> list[str]:
    """The pre-flight as the command prints it: a table row per tunnel and rung, then each tunnel
    left out, why, and what would fit."""
    rows = [[s.experiment, s.primitive, f"{s.target:,}" if s.target else "-",
             f"{s.matched:,}" if s.ok else "not matched", f"{s.knob}={s.value}" if s.ok else (s.knob or "-"),
             _shape_text(s.shape, s.knob) if s.ok else "-"] for s in sizings]
    lines = ["Capacity pre-flight (the model sized on every tunnel before anything trains):", "",
             *table(["tunnel", "primitive", "target", "matched", "knob", "shape (from)"], rows), ""]
    for prim, s in unmatched(sizings).items():
        lines.append(f"not scored: capacity: {prim} ({s.experiment}): {s.error}")
        if s.fits:
            lines.append("  would fit with --model-set " + "; or ".join(s.fits))
    return lines
