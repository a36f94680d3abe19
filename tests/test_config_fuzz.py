"""Property-based fuzzing of every config: random values and types at every field of every task,
model, run and sweep config, directly and through the command line. Each value is either accepted
(and then valid: finite numbers, no booleans for numbers, a config that validates again) or refused
with a ConfigError that names the field: never a traceback."""

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from typer.testing import CliRunner

from windtunnel.cli import app
from windtunnel.config import ConfigError
from windtunnel.models import model_class, model_names
from windtunnel.sweep.config import Diagnose, Experiment, PrimitiveRule, Primitives, Resources, SweepConfig
from windtunnel.tasks import make_task, task_class, task_names
from windtunnel.train.config import EvalConfig, RunConfig, TrainConfig

#: the smallest valid document of each config, to which one fuzzed field is added
BASES = {
    **{task_class(n).Config: {} for n in task_names()},
    **{model_class(n).Config: {} for n in model_names()},
    TrainConfig: {}, EvalConfig: {}, Resources: {}, Diagnose: {}, Primitives: {},
    RunConfig: {"task": "bijection", "model": "transformer"},
    Experiment: {"task": "bijection", "models": ["transformer"]},
    PrimitiveRule: {"experiment": "bijection", "metric": "kl_bayes_model"},
    SweepConfig: {"name": "fuzz", "experiments": [{"task": "bijection", "models": ["transformer"]}]},
}

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**12, 10**12), st.integers(-3, 70),
    st.floats(allow_nan=True, allow_infinity=True), st.floats(-2, 2), st.text(max_size=6),
    st.sampled_from(["nan", "inf", "-1", "0", "1e309", "true", "3.5", "transformer", "bijection", "[1,2]"]),
)
values = st.one_of(scalars, st.lists(scalars, max_size=3), st.dictionaries(st.text(max_size=4), scalars, max_size=2))
fuzz = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def numbers_in(obj):
    if isinstance(obj, BaseModel):
        return numbers_in(obj.model_dump())
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in numbers_in(v)]
    if isinstance(obj, (list, tuple)):
        return [x for v in obj for x in numbers_in(v)]
    return [obj] if isinstance(obj, float) else []


def check(cls, field, value, build):
    """``build()`` either gives a valid config or a ConfigError naming ``field``."""
    try:
        cfg = build()
    except ConfigError as exc:
        assert field in str(exc), str(exc)
        return
    assert all(math.isfinite(x) for x in numbers_in(cfg)), cfg
    assert type(cfg).build(cfg.model_dump(mode="json")) == cfg


@pytest.mark.parametrize("cls", list(BASES), ids=lambda c: c.__name__)
@fuzz
@given(data=st.data(), value=values)
def test_every_field_accepts_or_names_itself(cls, data, value):
    field = data.draw(st.sampled_from(sorted(cls.model_fields)))
    check(cls, field, value, lambda: cls.build({**BASES[cls], field: value}))


@pytest.mark.parametrize("task", task_names())
@fuzz
@given(data=st.data(), value=values)
def test_task_construction_accepts_or_names_the_field(task, data, value):
    """Beyond the config: the task built from it (cross-field checks, sizes) fails only with a ConfigError."""
    field = data.draw(st.sampled_from(sorted(task_class(task).Config.model_fields)))
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 70:
        value = 70  # keep accepted tasks small enough to build in a test
    check(task_class(task).Config, field, value, lambda: make_task(task, {field: value}).config)


class Accepted(Exception):
    """Raised instead of training: the command line accepted the config."""


def section_fields():
    out = [("train", f) for f in TrainConfig.model_fields] + [("eval", f) for f in EvalConfig.model_fields]
    out += [("task_params", f) for f in task_class("bijection").Config.model_fields]
    out += [("model_params", f) for f in model_class("transformer").Config.model_fields]
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(section_fields()), value=values,
       raw=st.one_of(st.none(), st.text(alphabet=st.characters(blacklist_categories=["Cs", "Cc"]), max_size=8)))
def test_the_command_line_gives_a_one_line_error_naming_the_field(key, value, raw):
    """`windtunnel train --set section.field=VALUE`: exit 2 and an error naming the field, or accepted."""
    section, field = key
    text = json.dumps(value) if raw is None else raw
    with pytest.MonkeyPatch.context() as mp:
        def accepted(*a, **k):
            raise Accepted

        mp.setattr("windtunnel.train.trainer.train", accepted)
        res = CliRunner().invoke(app, ["train", "--set", f"{section}.{field}={text}", "--quiet"])
    if isinstance(res.exception, Accepted):
        return
    assert res.exit_code == 2, (res.output, res.exception)
    assert res.output.startswith("run directory") is False and res.output.startswith("error: ")
    assert field in res.output, res.output
