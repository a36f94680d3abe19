"""``tinygpt``: the authors' TinyGPT behind our contract, checked against their own module.

The parity tests load the authors' ``src/models/tinygpt.py`` by path from the shared bench
(``WINDTUNNEL_AUTHORS_DIR``, default ``../shared/bench/authors`` beside the repository) and skip
when it is absent; the file is only read, never copied or changed.
"""

import importlib.util
import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from windtunnel.config import ConfigError
from windtunnel.models import check_model, make_model
from windtunnel.tasks import make_generator, make_task
from windtunnel.train.config import TrainConfig
from windtunnel.train.trainer import StepSetup, loss_fn, make_optimizer, train_step

AUTHORS = Path(os.environ.get("WINDTUNNEL_AUTHORS_DIR", Path(__file__).resolve().parents[3] / "shared/bench/authors"))
SMALL = dict(n_layers=2, n_heads=4, d_model=32)
FORMATS = ("sepvocab", "paired")


@pytest.fixture(scope="module")
def authors_tinygpt():
    path = AUTHORS / "src" / "models" / "tinygpt.py"
    if not path.is_file():
        pytest.skip(f"the authors' TinyGPT is not at {path}")
    spec = importlib.util.spec_from_file_location("authors_tinygpt", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TinyGPT


def task_of(fmt: str):
    return make_task("bijection", {"V": 20, "L": 19, "format": fmt})


def authors_copy(ref_cls, model):
    """The authors' TinyGPT with ``model``'s weights (float64). Their vocabulary has no padding id:
    ours is the last id, so theirs is our embedding without its last row."""
    c, spec = model.config, model.spec
    assert spec.pad_id == spec.vocab_size - 1
    ref = ref_cls(vocab_size=spec.vocab_size - 1, dim=c.d_model, n_layers=c.n_layers, n_heads=c.n_heads,
                  max_seq_len=c.max_len).double().eval()
    ours = model.state_dict()
    theirs = {"tok_emb.weight": ours["embed.tok.weight"][:-1], "pos_emb.weight": ours["embed.pos.weight"],
              "ln_f.scale": ours["norm.weight"], "head.weight": ours["embed.tok.weight"][:-1]}
    for i in range(c.n_layers):
        o, t = f"blocks.{i}.", f"blocks.{i}."
        theirs |= {t + "ln1.scale": ours[o + "norm1.weight"], t + "ln2.scale": ours[o + "norm2.weight"],
                   t + "attn.qkv.weight": ours[o + "attn.qkv.weight"], t + "attn.out_proj.weight": ours[o + "attn.proj.weight"],
                   t + "mlp.fc1.weight": ours[o + "ffn.fc1.weight"], t + "mlp.fc2.weight": ours[o + "ffn.fc2.weight"]}
    missing, unexpected = ref.load_state_dict(theirs, strict=False)
    assert not unexpected and set(missing) <= {f"blocks.{i}.attn.head_mask" for i in range(c.n_layers)}
    assert ref.head.weight is ref.tok_emb.weight  # still tied
    return ref


def trained_like(fmt: str, seed: int = 0):
    """A tinygpt in float64 whose weights are not the initial ones (scales and every row perturbed),
    so that equal outputs test every weight."""
    torch.manual_seed(seed)
    model = make_model("tinygpt", task_of(fmt).spec, SMALL).double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
        model.embed.tok.weight[-1].zero_()  # the padding row, never an input
    return model


@pytest.mark.parametrize("fmt", FORMATS)
def test_equal_logits_to_the_authors_tinygpt(authors_tinygpt, fmt):
    task = task_of(fmt)
    model = trained_like(fmt).eval()
    ref = authors_copy(authors_tinygpt, model)
    batch = task.sample(8, make_generator(1))
    ours = model(batch.inputs)
    theirs, _ = ref(batch.inputs)
    answers = list(task.spec.answer_token_ids)
    assert ours.shape == (8, task.spec.seq_len, 20)
    torch.testing.assert_close(ours, theirs[..., answers], atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("fmt", FORMATS)
def test_training_loss_is_the_authors_whole_vocabulary_cross_entropy(authors_tinygpt, fmt):
    """Our loss (cross-entropy over the answers plus the head's whole-vocabulary term) equals the
    authors' cross-entropy over their whole vocabulary at the scored positions, and so do the
    gradients of every weight."""
    task = task_of(fmt)
    model = trained_like(fmt, seed=2).train()
    ref = authors_copy(authors_tinygpt, model).train()
    batch = task.sample(8, make_generator(3))
    out = model(batch.inputs, positions=batch.positions)
    aux = model.pop_auxiliary_loss()  # None in the paired format: the answers are the whole vocabulary
    assert (aux is None) == (fmt == "paired")
    ours = F.cross_entropy(out.flatten(0, 1), batch.target.flatten()) + (aux if aux is not None else 0.0)
    assert model.pop_auxiliary_loss() is None  # read once
    logits, _ = ref(batch.inputs)
    token = torch.tensor(task.spec.answer_token_ids)[batch.target]
    theirs = F.cross_entropy(logits[:, batch.positions].flatten(0, 1), token.flatten())
    torch.testing.assert_close(ours, theirs, atol=1e-12, rtol=1e-12)
    ours.backward()
    theirs.backward()
    g_ours, g_theirs = model.embed.tok.weight.grad[:-1], ref.tok_emb.weight.grad
    torch.testing.assert_close(g_ours, g_theirs, atol=1e-12, rtol=1e-9)
    torch.testing.assert_close(model.blocks[0].attn.qkv.weight.grad, ref.blocks[0].attn.qkv.weight.grad,
                               atol=1e-12, rtol=1e-9)


def test_head_mask_and_bypass_match_the_authors_ablations(authors_tinygpt):
    """Our head mask (on each head's output) and block bypass give the authors' outputs with their
    head_mask (on the attention weights) and their block.bypass."""
    task = task_of("sepvocab")
    model = trained_like("sepvocab", seed=4).eval()
    ref = authors_copy(authors_tinygpt, model)
    x = task.sample(4, make_generator(5)).inputs
    answers = list(task.spec.answer_token_ids)
    model.head_mask[0, 2] = 0.0
    ref.blocks[0].attn.head_mask[2] = 0.0
    torch.testing.assert_close(model(x), ref(x)[0][..., answers], atol=1e-10, rtol=1e-10)
    model.clear_ablations()
    ref.blocks[0].attn.head_mask.fill_(1.0)
    model.set_bypass(1, "block")
    ref.blocks[1].bypass = True
    torch.testing.assert_close(model(x), ref(x)[0][..., answers], atol=1e-10, rtol=1e-10)


def test_the_authors_defaults_and_parameter_count():
    """Defaults are the authors' TinyGPT: 6 layers, 6 heads, d 192, RMSNorm eps 1e-6, no biases, a
    head tied over the whole vocabulary. On the paired task (20 symbols, 39 positions) that is
    2,668,032 parameters, Paper I's "2.67M" (the 2,673,792 of our spec counts FFN biases TinyGPT
    has not), plus our padding row (192)."""
    spec = task_of("paired").spec
    model = make_model("tinygpt", spec)
    c = model.config
    assert (c.n_layers, c.n_heads, c.d_model, c.d_ffn) == (6, 6, 192, 768)
    assert (c.norm, c.norm_eps, c.bias, c.tie_head, c.tie_scope, c.init) == ("rmsnorm", 1e-6, False, True, "vocab",
                                                                             "normal")
    assert isinstance(model.norm, torch.nn.RMSNorm) and model.norm.eps == 1e-6
    assert not any(n.endswith(".bias") for n, _ in model.named_parameters())
    d, layers = 192, 6
    per_layer = 2 * d + 4 * d * d + 2 * d * 4 * d  # two norm scales, QKV + output, the 4x MLP
    assert model.n_params() == (20 + 1) * d + 39 * d + layers * per_layer + d == 2_668_032 + 192


@pytest.mark.parametrize("fmt", FORMATS)
def test_keeps_the_contract_with_its_capture_names(fmt):
    spec = task_of(fmt).spec
    model = make_model("tinygpt", spec, SMALL)
    check_model(model, spec)
    names = set(model.capture_names())
    for i in range(SMALL["n_layers"]):
        assert {f"blocks.{i}.attn.{k}" for k in ("q", "k", "v", "pattern", "z")} <= names
        assert f"blocks.{i}.resid_post" in names
    assert {"embed", "final"} <= names
    assert model.key_weights(0).shape == (4, 8, 32)


def test_whole_vocabulary_term_only_where_there_are_other_tokens():
    """Paired format: the answers are the whole vocabulary (bar the padding id), so the term is 0;
    sep-vocab: positive; none in evaluation mode or without gradients."""
    for fmt, positive in (("paired", False), ("sepvocab", True)):
        task = task_of(fmt)
        model = make_model("tinygpt", task.spec, SMALL).train()
        batch = task.sample(4, make_generator(0))
        model(batch.inputs, positions=batch.positions)
        aux = model.pop_auxiliary_loss()
        if positive:
            assert aux.item() > 0 and aux.requires_grad
        else:
            assert aux is None
        model.eval()
        model(batch.inputs)
        assert model.pop_auxiliary_loss() is None
        model.train()
        with torch.no_grad():
            model(batch.inputs)
        assert model.pop_auxiliary_loss() is None


def test_tie_scope_vocab_needs_a_tied_head():
    spec = task_of("sepvocab").spec
    with pytest.raises(ConfigError, match="tie_scope='vocab' needs tie_head=True"):
        make_model("transformer", spec, {**SMALL, "tie_scope": "vocab"})
    # the transformer with the authors' options is tinygpt, weight for weight
    a = make_model("transformer", spec, {**SMALL, "norm": "rmsnorm", "norm_eps": 1e-6, "bias": False,
                                         "tie_head": True, "tie_scope": "vocab"})
    b = make_model("tinygpt", spec, SMALL)
    assert {k: v.shape for k, v in a.state_dict().items()} == {k: v.shape for k, v in b.state_dict().items()}
    b.load_state_dict(a.state_dict())
    x = task_of("sepvocab").sample(2, make_generator(0)).inputs
    torch.testing.assert_close(a.eval()(x), b.eval()(x))


def test_the_trainer_adds_the_whole_vocabulary_term():
    """train_step's loss is the task's cross-entropy over the answers plus the head's term, on the
    batch the step draws (the same generator state gives the same batch)."""
    task = task_of("sepvocab")
    model = make_model("tinygpt", task.spec, SMALL)
    tc = TrainConfig(steps=1, lr=1e-9, batch_size=4)
    gen = make_generator(7)
    state = gen.get_state()
    loss, _ = train_step(StepSetup(model, make_optimizer(model, tc), "ce", tc, torch.device("cpu")), task, gen, 0)
    gen.set_state(state)
    batch = task.sample(4, gen)
    with torch.no_grad():
        out = model(batch.inputs, positions=batch.positions)
    answers_only = loss_fn("ce", out, batch)
    model.train()
    model(batch.inputs, positions=batch.positions)
    aux = model.pop_auxiliary_loss()
    assert aux.item() > 0
    torch.testing.assert_close(loss, answers_only + aux, atol=1e-4, rtol=1e-4)  # lr 1e-9: the step moves nothing visible


@pytest.mark.parametrize("name", ["transformer", "tinygpt", "hybrid"])
def test_embed_std_changes_the_token_embedding_alone(name):
    """``embed_std``: the token embedding drawn from N(0, embed_std), every other weight (W_K,
    positions, biases) exactly as the same seed's default init draws it."""
    import torch

    from windtunnel.models import make_model
    from windtunnel.tasks import make_task

    spec = make_task("bijection", {"V": 20, "L": 19}).spec
    params = {"n_layers": 2, "n_heads": 2, "d_model": 64}
    models = {}
    for std in (None, 1.0):
        torch.manual_seed(0)
        models[std] = make_model(name, spec, {**params, "embed_std": std})
    base, scaled = (dict(models[k].named_parameters()) for k in (None, 1.0))
    tok = "embed.tok.weight"
    assert float(base[tok][:-1].detach().std()) == pytest.approx(0.02, rel=0.1)
    assert float(scaled[tok][:-1].detach().std()) == pytest.approx(1.0, rel=0.1)
    assert scaled[tok][spec.pad_id].abs().sum() == 0  # the padding row stays zero
    for key, w in base.items():
        if key != tok and not (name == "tinygpt" and key == "head.weight"):
            assert torch.equal(w, scaled[key]), key
    with pytest.raises(Exception, match="embed_std"):
        make_model(name, spec, {**params, "embed_std": 0.0})
