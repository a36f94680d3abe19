"""train.curriculum: a task parameter grown over training (Garg et al.), evaluated at the full rung."""

import json

import pytest

from windtunnel.config import ConfigError
from windtunnel.tasks import make_generator
from windtunnel.train.build import curriculum
from windtunnel.train.config import Curriculum, RunConfig
from windtunnel.train.rundir import RunDir
from windtunnel.train.trainer import build, train


def regression(**train_fields) -> RunConfig:
    return RunConfig.build({
        "task": "regression", "task_params": {"d": 4, "n_points": 6}, "model": "transformer",
        "model_params": {"n_layers": 1, "n_heads": 2, "d_model": 16},
        "train": {"steps": 12, "batch_size": 8, "threads": 1, "checkpoints": 1, **train_fields},
        "eval": {"n_sequences": 16, "batch_size": 16, "n_boot": 10},
    })


def test_the_parameter_takes_every_value_in_equal_stages_then_stays():
    cur = Curriculum(param="d_active", start=2, end=8, until=0.5)  # 7 stages of 750 / 7 steps
    assert [cur.value_at(s, 1500, 8) for s in (0, 107, 108, 214, 215, 642, 643, 749, 750, 1499)] == \
        [2, 2, 3, 3, 4, 7, 8, 8, 8, 8]
    whole = Curriculum(param="d", start=1, until=1.0)  # the last stage is trained too
    assert [whole.value_at(s, 12, 4) for s in range(12)] == [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]


def test_batches_come_from_the_stage_and_the_run_is_evaluated_at_the_full_task(tmp_path):
    cfg = regression(curriculum={"param": "d_active", "start": 1, "end": 4, "until": 0.5})
    task, _ = build(cfg)
    stage = curriculum(cfg, task)
    first, last = stage(0).sample(8, make_generator(0)), stage(11).sample(8, make_generator(0))
    assert (first.latent["x"][:, :, 1:] == 0).all() and (first.latent["x"][:, :, 0] != 0).all()
    assert (last.latent["x"] != 0).all() and stage(11) is stage(6)  # by step 6 (half of 12), the full d
    assert stage(11).config.d_active == 4 and task.config.d_active is None
    res = train(cfg, tmp_path / "run", progress=False)
    assert res.steps == 12 and json.loads((tmp_path / "run" / "config.json").read_text())["train"]["curriculum"]["start"] == 1
    plain = train(regression(), tmp_path / "plain", progress=False)
    losses = [r["loss"] for r in RunDir(tmp_path / "run").metrics()]
    plain_losses = [r["loss"] for r in RunDir(tmp_path / "plain").metrics()]
    assert losses[0] != plain_losses[0]  # other batches from the first step
    assert res.eval["lengths"].keys() == plain.eval["lengths"].keys()  # the same (full) evaluation


def test_an_unset_curriculum_leaves_the_run_names_as_they_were():
    cfg = regression()
    doc = cfg.model_dump(mode="json")
    assert doc["train"]["curriculum"] is None
    assert cfg.run_name() != regression(curriculum={"param": "d_active", "start": 1, "end": 4}).run_name()
    # the hash of a config written before the field existed is the same
    del doc["train"]["curriculum"]
    assert RunConfig.build(doc, where="old run").run_name() == cfg.run_name()


@pytest.mark.parametrize("cur, message", [
    ({"param": "dd", "start": 1}, "'dd' is not a parameter of task regression"),
    ({"param": "d_active", "start": 1}, "give the value it grows to as train.curriculum.end"),
    ({"param": "n_points", "start": 2}, "changes the sequence format"),
    ({"param": "d_active", "start": 0, "end": 4}, "train.curriculum: d_active = 0 \\(from start = 0\\) is not a valid"),
    ({"param": "d_active", "start": 3, "end": 2}, "start = 3 exceeds its end 2"),
    ({"param": "d_active", "start": 1, "end": 4, "until": 0.25}, "4 stages .* do not fit in until x train.steps = 3"),
    ({"param": "d", "start": 2, "end": 3}, "end = 3, but the run's task_params.d is 4"),
])
def test_a_curriculum_that_cannot_work_is_refused_before_training(tmp_path, cur, message):
    with pytest.raises(ConfigError, match=message):
        train(regression(curriculum=cur), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
