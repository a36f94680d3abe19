"""The model template: the base class builds the embedding and the head from the task's spec, an
architecture writes its blocks (``build``) and how they mix (``mix``); taps are the one capture
mechanism; a model written to the earlier contract keeps working, deprecated."""

from __future__ import annotations

import pytest
import torch
from pydantic import Field
from torch import nn

from windtunnel.models import InputAdapter, ModelConfig, OutputHead, Tap, WindModel, check_model
from windtunnel.models.base import check_model_class
from windtunnel.tasks import make_generator, make_task


class CumConfig(ModelConfig):
    d_model: int = Field(8, ge=1)


class CumBlock(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.resid_post = Tap()

    def forward(self, x):
        steps = torch.arange(1, x.shape[1] + 1, device=x.device)[None, :, None]
        return self.resid_post(x + self.lin(x.cumsum(1) / steps))  # a causal running mean


class Cum(WindModel):
    name = "cum"
    Config = CumConfig

    def build(self, c):
        self.blocks = nn.ModuleList([CumBlock(c.d_model), CumBlock(c.d_model)])

    def mix(self, x):
        for b in self.blocks:
            x = b(x)
        return x


class OldCum(WindModel):
    """The same model written to the earlier contract: its own embedding and head, mix(x, cache)."""

    name = "old_cum"
    Config = CumConfig

    def __init__(self, spec, config=None, **params):
        super().__init__(spec, config, **params)
        c = self.config
        self.embed = InputAdapter(spec, c.d_model, c.max_len, c.init)
        self.blocks = nn.ModuleList([CumBlock(c.d_model), CumBlock(c.d_model)])
        self.head = OutputHead(spec, c.d_model, tied=c.tie_head)

    def mix(self, x, cache):
        for b in self.blocks:
            x = b(x)
        cache.put("mid", x)  # recorded the old way, named in its own capture_names
        return x

    def capture_names(self):
        return [*super().capture_names(), "mid"]


@pytest.mark.parametrize("task", ["bijection", "regression"])
def test_the_base_class_builds_the_embedding_and_the_head(task):
    spec = make_task(task).spec
    torch.manual_seed(0)
    new = Cum(spec)
    torch.manual_seed(0)
    with pytest.warns(DeprecationWarning, match="earlier contract"):
        check_model_class(OldCum)
    old = OldCum(spec)
    check_model(new, spec)
    # the same modules in the same order, drawn in the same order: the same weights
    assert list(new.state_dict()) == list(old.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(new.state_dict().values(), old.state_dict().values()))
    assert new.capture_names() == ["embed", "blocks.0.resid_post", "blocks.1.resid_post", "final"]
    x = make_task(task).sample(3, make_generator(0, "eval")).inputs
    y_new, c_new = new.run_with_cache(x)
    y_old, c_old = old.run_with_cache(x)
    assert torch.equal(y_new, y_old) and torch.equal(new(x), y_new)
    assert set(c_old) == {*c_new, "mid"} and all(torch.equal(c_new[k], c_old[k]) for k in c_new)
    assert torch.equal(c_old["mid"], c_new["final"])


def test_the_earlier_contract_is_read_when_the_class_is_created_not_on_each_forward(monkeypatch):
    """compat.EarlierContract: read once per class; a forward pass inspects no signature."""
    import inspect

    from windtunnel import compat

    assert OldCum._earlier == compat.EarlierContract(runs_itself=False, mix_takes_capture=True)
    assert Cum._earlier == compat.EarlierContract() == WindModel._earlier
    spec = make_task("bijection").spec
    new, old = Cum(spec), OldCum(spec)
    x = make_task("bijection").sample(2, make_generator(0, "eval")).inputs

    def refuse(*args, **kwargs):
        raise AssertionError("a forward pass inspected a signature")

    monkeypatch.setattr(inspect, "signature", refuse)
    new(x), old(x), old.run_with_cache(x)


def test_a_backbone_that_draws_first_keeps_the_embedding_first_in_the_module_tree():
    class Late(Cum):
        name = "late"
        embed_first = False

    spec = make_task("bijection").spec
    torch.manual_seed(0)
    late = Late(spec)
    params = [n for n, _ in late.named_parameters()]
    assert params[:2] == ["embed.tok.weight", "embed.pos.weight"] and params[-2:] == ["head.proj.weight", "head.proj.bias"]
    torch.manual_seed(0)
    blocks_first = nn.ModuleList([CumBlock(8), CumBlock(8)])
    assert torch.equal(late.blocks[0].lin.weight, blocks_first[0].lin.weight)  # the blocks drew first
    check_model(late, spec)
