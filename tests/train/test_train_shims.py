"""The signatures grouped in issue 55 (``Until``, ``StepSetup``): the calls of earlier versions
still work, with a DeprecationWarning (compat.legacy_group, compat.legacy_call)."""

import warnings

import pytest
import torch

from windtunnel.tasks import make_generator
from windtunnel.train.build import build
from windtunnel.train.checkpoint import list_checkpoints
from windtunnel.train.trainer import StepSetup, Until, check_loss, make_optimizer, train, train_step


def test_train_stop_at_and_decide_build_an_until(tiny_config, tmp_path):
    cfg = tiny_config()
    with pytest.warns(DeprecationWarning, match=r"train\(stop_at=...\) is deprecated; use train\(..., Until\(...\)\)"):
        old = train(cfg, tmp_path / "old", progress=False, stop_at=7)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = train(cfg, tmp_path / "new", progress=False, until=Until(step=7))
    assert old.steps == new.steps == 7 and not old.eval and not new.eval
    assert [s for s, _ in list_checkpoints(old.run_dir)] == [s for s, _ in list_checkpoints(new.run_dir)]
    with pytest.raises(TypeError, match="not both"):
        train(cfg, tmp_path / "x", progress=False, until=Until(step=3), decide=None)
    with pytest.raises(TypeError, match="unexpected keyword"):
        train(cfg, tmp_path / "x", progress=False, stop_after=3)
    with pytest.warns(DeprecationWarning, match=r"train\(tracking_group=...\)"),  \
            pytest.warns(DeprecationWarning, match=r"train\(stop_at=...\)"):  # the older shim still chains
        train(cfg, tmp_path / "old", progress=False, stop_at=7, tracking_group="g")


def _setup(cfg):
    task, model = build(cfg)
    tc = cfg.train
    return task, StepSetup(model, make_optimizer(model, tc), check_loss(tc.loss, task), tc, torch.device("cpu"))


def test_train_step_in_its_old_positional_form(tiny_config):
    cfg = tiny_config()
    task, new = _setup(cfg)
    _, old = _setup(cfg)
    for step in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            a = train_step(new, task, make_generator(step), step)
        with pytest.warns(DeprecationWarning, match=r"train_step\(model, opt, task, data_gen, loss_kind, step"):
            b = train_step(old.model, old.opt, task, make_generator(step), old.loss_kind, step, old.tc, old.device, None)
        assert a[0].item() == b[0].item() and a[1].item() == b[1].item()
    with pytest.raises(TypeError, match="missing argument"):
        train_step(old.model, old.opt, task, make_generator(0), old.loss_kind, 0, old.tc)
