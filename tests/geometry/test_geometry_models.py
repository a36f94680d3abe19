"""Analyses on constructed models and activations: keys, capture, ablations, attention maps."""

import pytest
import torch

from windtunnel.geometry import ablation, attention, key_frame
from windtunnel.geometry.context import Activations, capture
from windtunnel.models import make_model
from windtunnel.tasks import make_generator, make_task


@pytest.fixture
def bijection():
    return make_task("bijection", {"V": 4, "L": 3})


def transformer(task, seed=0, **params):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make_model("transformer", task.spec, {"n_layers": 2, "n_heads": 2, "d_model": 8, **params}).eval()


def test_hypothesis_tokens(bijection):
    assert key_frame.hypothesis_tokens(bijection)[0] == [0, 1, 2, 3]
    assert key_frame.hypothesis_tokens(make_task("bijection", {"V": 4, "L": 3, "format": "paired"}))[0] == [0, 1, 2, 3]
    hmm = make_task("hmm", {"S": 3, "O": 3, "K": 4})
    o0 = hmm.token_ids["o0"]
    assert key_frame.hypothesis_tokens(hmm)[0] == [o0, o0 + 1, o0 + 2]
    assert key_frame.hypothesis_tokens(make_task("regression", {"d": 2, "n_points": 3})) is None


def test_the_task_contract_answers_what_geometry_asks(bijection):
    """hypothesis_tokens, value_tokens, state_labels, alternates_keys_values, length_test: asked of
    the task, never switched on its name."""
    from windtunnel.tasks.recall import KEY0

    recall = make_task("recall", {"N": 3, "M": 2, "n_keys": 8, "n_values": 8})
    assert recall.hypothesis_tokens()[0] == list(range(KEY0, KEY0 + 8))
    mqar = make_task("recall", {"format": "mqar", "N": 3, "vocab_size": 32, "seq_len": 16})
    assert mqar.hypothesis_tokens()[0] == list(range(2, 17))  # zoology's keys 1..15, shifted by one
    assert make_task("sula", {"k": 4, "n_words": 8}).hypothesis_tokens()[0] == [8, 9]
    assert bijection.value_tokens()[0] == [4, 5, 6, 7] and key_frame.extra_token_sets(bijection)["value_"][0] == [4, 5, 6, 7]
    assert make_task("bijection", {"V": 4, "L": 3, "format": "paired"}).value_tokens() is None
    assert bijection.alternates_keys_values and not make_task("sula", {"k": 4, "n_words": 8}).alternates_keys_values
    hmm = make_task("hmm", {"S": 3, "O": 3, "K": 4})
    assert hmm.length == 4 and hmm.length_test() == (4, 50) and bijection.length_test() == ()
    batch = hmm.sample(5, make_generator(0, "probe"))
    lab, k, what = hmm.state_labels(batch)
    assert k == 3 and "hidden state" in what and torch.equal(lab, batch.probs.argmax(-1))
    reg = make_task("regression", {"d": 2, "n_points": 3})
    assert reg.state_labels(reg.sample(2, make_generator(0, "probe"))) is None


def test_key_weights_follow_the_fused_qkv_layout(bijection):
    m = transformer(bijection)
    x = torch.randn(1, 5, 8)
    d, H = 8, 2
    k = m.blocks[0].attn.qkv(x).view(1, 5, 3, H, d // H)[:, :, 1]  # (1, T, H, dh)
    wk = key_frame.key_weights(m)[0].float()  # (H, dh, d)
    assert torch.allclose(torch.einsum("btd,hkd->bthk", x, wk), k, atol=1e-6)


def test_orthogonal_keys_give_zero(bijection):
    m = transformer(bijection)
    with torch.no_grad():
        m.embed.tok.weight[:4] = 3.0 * torch.eye(8)[:4]  # token i -> e_i
        w = m.blocks[0].attn.qkv.weight
        w[8:16] = 0
        w[8:12, :4] = torch.eye(4)  # head 0: W_K = [I | 0]
        w[12:16, :4] = torch.eye(4).flip(0)  # head 1: a permutation
    per_head = key_frame.per_head(m, [0, 1, 2, 3], "tokens_raw")[0]
    assert per_head.tolist() == pytest.approx([0.0, 0.0], abs=1e-12)
    assert key_frame.per_head(m, [0, 1, 2, 3], "wk_columns")[0].tolist() == pytest.approx([0.0, 0.0], abs=1e-12)
    with torch.no_grad():  # a rank-one W_K maps every token to the same key direction
        w[8:12] = torch.outer(torch.ones(4), torch.arange(1.0, 9.0))
    assert key_frame.per_head(m, [0, 1, 2, 3], "tokens_raw")[0][0] == pytest.approx(1.0)


def test_whole_layer_keys_are_every_heads_keys_side_by_side(bijection):
    """``layer_raw``: the keys of both heads concatenated. Two heads, each with every token on one
    key direction (per head collinear), on orthogonal token pairs across heads: the whole layer's
    keys of tokens 0 and 1 share head 0's direction, those of 2 and 3 head 1's."""
    m = transformer(bijection)
    with torch.no_grad():
        m.embed.tok.weight[:4] = torch.eye(8)[:4]
        w = m.blocks[0].attn.qkv.weight
        w[8:16] = 0
        w[8, :2] = 1.0  # head 0: key (1, 0, 0, 0) for tokens 0, 1; zero for 2, 3
        w[12, 2:4] = 1.0  # head 1: key (1, 0, 0, 0) for tokens 2, 3; zero for 0, 1
    keys = key_frame.frame_vectors(m, [0, 1, 2, 3], "layer_raw")[0]
    assert keys.shape == (1, 4, 8)
    assert torch.equal(keys[0, 0], keys[0, 1]) and keys[0, 0, 0] == 1 and keys[0, 2, 4] == 1
    # pairs (0, 1) and (2, 3) collinear, the other four orthogonal: mean |cos| 2/6
    assert key_frame.per_head(m, [0, 1, 2, 3], "layer_raw")[0].tolist() == pytest.approx([1 / 3])
    assert key_frame.per_head(m, [0, 1, 2, 3], "layer_centred")[0].tolist() == pytest.approx([1.0])
    with pytest.raises(ValueError, match="layer_raw"):
        key_frame.frame_vectors(m, [0, 1], "layer")


def test_random_null_draws_the_models_own_initialisation(bijection):
    from windtunnel.stats import gaussian_abs_cosine

    jobs = {"cols": ("wk_columns", []), "keys": ("tokens_raw", list(range(4)))}
    nulls = {}
    for init in ("normal", "torch"):
        def draw(seed, init=init):
            return transformer(bijection, seed=seed, d_model=64, n_heads=2, init=init)

        nulls[init] = key_frame.random_null(draw, jobs, n_null=50, seed=0)
        assert len(nulls[init]["cols"]) == 2 and nulls[init]["cols"][0].shape == (50,)
        assert nulls[init]["cols"][0].mean() == pytest.approx(gaussian_abs_cosine(64), rel=0.1)
    # the statistic is scale-free: N(0, 0.02) and PyTorch's default laws give nearly the same null
    assert nulls["torch"]["keys"][0].mean() == pytest.approx(nulls["normal"]["keys"][0].mean(), rel=0.15)
    # and the draws differ from one another (fresh seeds, not one model repeated)
    assert nulls["normal"]["keys"][0].std() > 0


def test_ov_vectors_follow_value_and_output_projections(bijection):
    m = transformer(bijection)
    x = m.embed.tok.weight[:4].detach()  # (4, d)
    d, H, dh = 8, 2, 4
    v = m.blocks[0].attn.qkv(x).view(4, 3, H, dh)[:, 2]  # (n, H, dh)
    wo = m.blocks[0].attn.proj.weight.detach()
    ov = key_frame.frame_vectors(m, [0, 1, 2, 3], "ov")[0]  # (H, n, d)
    for h in range(H):  # attention output of head h alone: proj applied to v with the other heads zeroed
        z = torch.zeros(4, d)
        z[:, h * dh:(h + 1) * dh] = v[:, h]
        assert torch.allclose(ov[h].float(), z @ wo.T, atol=1e-6)


def test_centring_removes_a_shared_key_component(bijection):
    m = transformer(bijection)
    with torch.no_grad():  # orthogonal token directions plus one large component every token shares
        m.embed.tok.weight[:4] = torch.eye(8)[:4] + 10.0 * torch.eye(8)[7]
        w = m.blocks[0].attn.qkv.weight
        w[8:16] = 0
        w[8:12, :4] = torch.eye(4)
        w[8:12, 7] = 1.0  # head 0 keys = e_i + 10 * (1, 1, 1, 1): nearly collinear
    raw = key_frame.per_head(m, [0, 1, 2, 3], "tokens_raw")[0][0]
    centred = key_frame.per_head(m, [0, 1, 2, 3], "tokens_centred")[0][0]
    assert raw > 0.99
    assert centred == pytest.approx(1 / 3)  # centred one-hots of 4 tokens: cosines -1/3 off the diagonal


def test_capture_shapes_and_attention_output(bijection):
    m = transformer(bijection)
    batch = bijection.sample(6, make_generator(0, "probe"))
    acts = capture(m, batch, chunk=4)
    B, P, T = 6, 3, 5
    assert acts.logits.shape == (B, P, 4)
    assert list(acts.states) == ["embed", "blocks.0.resid_post", "blocks.1.resid_post", "final"]
    assert all(v.shape == (B, P, 8) for v in acts.states.values())
    assert acts.patterns[1].shape == (B, 2, T, T) and acts.q[0].shape == (B, 2, P, 4)
    assert torch.allclose(acts.logits, m(batch.inputs, positions=batch.positions), atol=1e-6)
    # with the FFN bypassed, a block adds exactly its attention output to the residual stream
    m.set_bypass(1, "ffn")
    acts = capture(m, batch)
    m.clear_ablations()
    delta = acts.states["blocks.1.resid_post"] - acts.states["blocks.0.resid_post"]
    assert torch.allclose(delta, acts.attn_out[1], atol=1e-6)


def test_zeroed_head_changes_the_output_and_is_restored(bijection):
    m = transformer(bijection)
    x = bijection.sample(4, make_generator(0, "probe")).inputs
    base = m(x)
    with ablation.ablated(m, heads=[(0, 1)]):
        assert m.head_mask[0, 1] == 0
        changed = m(x)
    assert not torch.allclose(changed, base, atol=1e-6)
    assert torch.equal(m(x), base)
    with pytest.raises(RuntimeError):
        with ablation.ablated(m, heads=[(1, 0)], bypass=[(0, "attn")]):
            raise RuntimeError("boom")
    assert bool((m.head_mask == 1).all()) and m.bypass == [None, None]


def test_bypass_really_bypasses(bijection):
    m = transformer(bijection)
    x = bijection.sample(4, make_generator(0, "probe")).inputs
    with ablation.ablated(m, bypass=[(0, "block"), (1, "block")]):
        out = m(x)
    expect = m.head(m.norm(m.embed(x)), m.embed.tok.weight)
    assert torch.allclose(out, expect, atol=1e-6)
    # bypassing the attention of every block leaves a per-position model: the output at a
    # position no longer depends on earlier tokens
    with ablation.ablated(m, bypass=[(0, "attn"), (1, "attn")]):
        y = x.clone()
        y[:, 0] = (y[:, 0] + 1) % 4
        assert torch.allclose(m(x)[:, 1:], m(y)[:, 1:], atol=1e-6)
        assert not torch.allclose(m(x)[:, 0], m(y)[:, 0])


def test_attention_mass_split_on_constructed_patterns(bijection):
    T = 7  # L = 4: keys at 0, 2, 4, 6
    pos = torch.tensor([0, 2, 4, 6])
    uni = torch.tril(torch.ones(T, T))
    uni = (uni / uni.sum(-1, keepdim=True)).expand(2, 3, T, T)
    acts = Activations(logits=torch.zeros(1), states={}, patterns={0: uni})
    got = attention.bijection_mass(acts, pos)[0]["mean"]
    want = attention.uniform_bijection_mass(pos)
    for g in ("self", "keys", "values"):
        assert got[g] == pytest.approx(want[g])
    assert want["values_curve"] == pytest.approx([1 / 3, 2 / 5, 3 / 7])
    # all mass on the previous value token
    p = torch.zeros(1, 1, T, T)
    p[0, 0, 0, 0] = 1
    for t in (2, 4, 6):
        p[0, 0, t, t - 1] = 1
    m = attention.bijection_mass(Activations(logits=torch.zeros(1), states={}, patterns={0: p}), pos)[0]
    assert m["mean"] == pytest.approx({"self": 0.0, "keys": 0.0, "values": 1.0})
    # all mass on itself
    p = torch.eye(T).expand(1, 1, T, T)
    m = attention.bijection_mass(Activations(logits=torch.zeros(1), states={}, patterns={0: p}), pos)[0]
    assert m["mean"] == pytest.approx({"self": 1.0, "keys": 0.0, "values": 0.0})


def test_qk_alignment_map():
    q = torch.randn(3, 2, 4, 5, generator=torch.Generator().manual_seed(0))
    acts = Activations(logits=torch.zeros(1), states={}, q={0: q}, k={0: 2 * q})
    m = attention.qk_alignment(acts)[0]
    assert m.shape == (4, 4)
    low = torch.tril(torch.ones(4, 4), -1).bool().numpy()
    assert torch.isnan(torch.tensor(m[~low])).all()
    acts = Activations(logits=torch.zeros(1), states={}, q={0: q}, k={0: q[:, :, [0, 0, 0, 0]]})
    m = attention.qk_alignment(acts)[0]
    # float32 sums in another order: equal to float32 precision, not to approx's relative 1e-6 near 0
    expected = float(torch.nn.functional.cosine_similarity(q[:, :, 3], q[:, :, 0], -1).mean())
    assert m[3, 0] == pytest.approx(expected, abs=1e-6)
