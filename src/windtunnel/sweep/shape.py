"""The shape of a scored model on each tunnel: what it takes from the reference transformer, what
its user pins (``--model-set``), and where each of its fields came from.

A user's model (``package.module:Class``, which no profile gives a shape) whose config has fields
named like the transformer's (:data:`SHAPE_FIELDS`) starts on each tunnel from that tunnel's
transformer's values; then its capacity knob is sized to the transformer's count. A field the
user pins is kept: ``--model-set field=value`` (every tunnel) or ``--model-set TUNNEL.field=value``
(one tunnel: a tunnel or its primitive's name), applied after the inherited values, and ``--set
model_params.field=value``, which sets every run (the transformer's too). A registered
architecture keeps the shape its profile gives it (its runs are those of before).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import TypeAdapter, ValidationError

from windtunnel.config import ConfigError, Override, as_overrides, parse_override
from windtunnel.models import model_class, model_names
from windtunnel.sweep.tunnels import PRIMITIVES, REFERENCE
from windtunnel.train.config import load_profile

#: the transformer's fields a user's model takes on each tunnel where its config has them
SHAPE_FIELDS = ("n_layers", "n_heads", "d_model")
#: where a field's value came from, as scorecard.json and the pre-flight name it
SOURCES = ("capacity knob", "--set", "--model-set", "transformer", "profile", "model default")

#: --model-set, parsed: tunnel (task name; None: every tunnel) -> field -> value
ModelSets = dict[str | None, dict[str, Any]]


def knob_of(model: str, params: dict[str, Any] | None = None) -> str:
    """The field capacity matching sizes: the knob of ``model``'s config with ``params`` (the
    per-position MLP's is d_ffn, the prefix MLP's width)."""
    return model_class(model).Config.build(params or {}, where=f"model '{model}'").capacity_knob()


def inherits_shape(model: str) -> bool:
    """Whether ``model`` takes the transformer's shape: a user's model, which no profile shapes."""
    return model != REFERENCE and model not in model_names()


def parse_model_sets(items: list[str], model: str, tasks: list[str]) -> ModelSets:
    """``--model-set`` text (``field=value`` or ``TUNNEL.field=value``) checked against ``model``'s
    config and the scorecard's tunnels ``tasks`` (a tunnel is named by its task or its primitive):
    a :class:`ConfigError` naming the item and what is allowed."""
    if items and model == REFERENCE:
        raise ConfigError("--model-set sets the scored model alone, and the transformer is the reference: "
                          "use --set for its runs")
    config = model_class(model).Config
    fields, knob = config.model_fields, knob_of(model) if items else None
    by_name = {**{t: t for t in tasks}, **{p: t for p, (t, _) in PRIMITIVES.items() if t in tasks}}
    out: ModelSets = {}
    for item in items:
        try:
            key, value = parse_override(item)
        except ConfigError:
            raise ConfigError(f"--model-set {item!r} must look like field=value or TUNNEL.field=value "
                              "(e.g. n_layers=2, sula.n_layers=2)") from None
        scope, dot, name = key.rpartition(".")
        if dot and scope not in by_name:
            raise ConfigError(f"--model-set {item!r}: '{scope}' is not a tunnel of this scorecard; its tunnels: "
                              + ", ".join(f"{t} ({p})" for p, (t, _) in PRIMITIVES.items() if t in tasks))
        if name not in fields:
            raise ConfigError(f"--model-set {item!r}: '{name}' is not a field of model '{model}'; its fields: "
                              + ", ".join(fields))
        if name == knob:
            raise ConfigError(f"--model-set {item!r}: '{knob}' is the capacity knob of model '{model}', which the "
                              "scorecard sizes to the transformer's count; pin another field")
        field = fields[name]
        try:
            kind = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
            value = TypeAdapter(kind).validate_python(value)
        except ValidationError as exc:
            allowed = "; ".join(e["msg"] for e in exc.errors())
            raise ConfigError(f"--model-set {item!r}: {name} = {value!r} is not allowed for model '{model}' "
                              f"({allowed})") from None
        out.setdefault(by_name[scope] if dot else None, {})[name] = value
    return out


def sets_within(items: list[str], tasks: list[str]) -> list[str]:
    """The ``--model-set`` items that apply to the tunnels ``tasks`` (those for every tunnel, and
    those naming one of them or its primitive): a scorecard that leaves a tunnel out keeps the rest."""
    names = {*tasks, *(p for p, (t, _) in PRIMITIVES.items() if t in tasks)}
    return [i for i in items if "." not in i.partition("=")[0] or i.partition("=")[0].rpartition(".")[0] in names]


def inherited(task: str, model: str, profile: str) -> dict[str, Any]:
    """The transformer's values on ``task`` of the shape fields ``model``'s config shares (none for a
    model its profile shapes)."""
    if not inherits_shape(model):
        return {}
    ref = load_profile(profile, task).get("models", {}).get(REFERENCE, {})
    fields = model_class(model).Config.model_fields
    return {k: ref[k] for k in SHAPE_FIELDS if k in ref and k in fields}


def model_pairs(task: str, model: str, profile: str, sets: ModelSets | None = None) -> list[Override]:
    """The overrides of ``model``'s runs alone on ``task``: the inherited shape, then ``--model-set``
    (every tunnel's, then this tunnel's)."""
    sets = sets or {}
    doc = {**inherited(task, model, profile), **sets.get(None, {}), **sets.get(task, {})}
    return [(f"model_params.{k}", v) for k, v in doc.items()]


def pair_texts(pairs: list[Override]) -> list[str]:
    """Override pairs as a sweep file writes them (``model_params.n_layers=2``)."""
    return [f"{k}={json.dumps(v)}" for k, v in pairs]


def shape_sources(task: str, model: str, profile: str, params: dict[str, Any], sets: ModelSets | None,
                  overrides: Any = None) -> dict[str, dict[str, Any]]:
    """Where each shape field, each pinned field and the knob of ``model``'s run on ``task`` came
    from (``params``: its sized model_params): field -> {value, from} (one of :data:`SOURCES`)."""
    sets, config = sets or {}, model_class(model).Config
    knob, pinned = knob_of(model, params), {**sets.get(None, {}), **sets.get(task, {})}
    set_keys = {k.removeprefix("model_params.") for k, _ in as_overrides(overrides) if k.startswith("model_params.")}
    inherit = inherited(task, model, profile)
    shaped = load_profile(profile, task).get("models", {}).get(model, {})
    names = [k for k in (*SHAPE_FIELDS, *pinned, knob) if k in config.model_fields]
    out = {}
    for name in dict.fromkeys(names):
        source = ("capacity knob" if name == knob else "--set" if name in set_keys else
                  "--model-set" if name in pinned else "transformer" if name in inherit else
                  "profile" if name in shaped else "model default")
        value = params.get(name, config.model_fields[name].default)
        out[name] = {"value": value, "from": source}
    return out
