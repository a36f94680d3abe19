"""Properties every wind tunnel must have: valid posteriors, reproducible streams, sampler and
posterior in agreement (Monte Carlo), disjoint train/eval streams, named baselines."""

import hashlib
import math

import pytest
import torch

from windtunnel.config import ConfigError
from windtunnel.infotheory import entropy_bits, gaussian_entropy_bits
from windtunnel.tasks import make_generator, make_task, stream_seed, task_names
from windtunnel.train.config import load_profile

SMALL = {
    "bijection": {"V": 6, "L": 6},
    "hmm": {"S": 3, "O": 3, "K": 8},
    "recall": {"N": 8, "M": 3, "F": 4, "n_keys": 16, "n_values": 16},
    "regression": {"d": 3, "n_points": 6},
    "sula": {"k": 6},
    "dirichlet": {"n_cat": 4, "n_draws": 8},
    "changepoint": {"n_obs": 3, "n_steps": 8, "h": 0.2},
    "kalman": {"n": 2, "K": 8},
}
#: the difficulty ladders: each tunnel is scored at these task_params overrides on its quick
#: profile (src/windtunnel/configs/quick/<task>.json); the task's tests check every rung
LADDERS = {
    "bijection": [{"V": 5, "L": 4}, {"V": 10, "L": 9}, {"V": 20, "L": 19}],
    "hmm": [{"S": 2, "O": 2}, {"S": 3, "O": 3}, {"S": 5, "O": 5}],
    "recall": [{"N": 4, "M": 4}, {"N": 8, "M": 8}, {"N": 16, "M": 16}],
    "regression": [{"d": 2}, {"d": 4}, {"d": 8}],
    "dirichlet": [{"n_cat": 4}, {"n_cat": 8}, {"n_cat": 16}],
    "changepoint": [{"h": 0.02}, {"h": 0.05}, {"h": 0.1}],
    "kalman": [{"n": 1}, {"n": 2}, {"n": 4}],
}


def rung_params(name, rung, **more):
    """A rung's task parameters: the quick profile's task_params, the rung's overrides, then ``more``."""
    return {**load_profile("quick", name)["task_params"], **rung, **more}


def rung_id(rung):
    return "-".join(f"{k}{v}" for k, v in rung.items())


def ladder(name, **more):
    """pytest parameters for every rung of a task's ladder: ``rung_params`` with readable ids."""
    return [pytest.param(rung_params(name, r, **more), id=rung_id(r)) for r in LADDERS[name]]


RUNGS = {f"{name}-{rung_id(r)}": (name, rung_params(name, r)) for name, rungs in LADDERS.items() for r in rungs}
#: every named layout of a task, checked like the defaults, and every rung of the ladders
CASES = {**{name: (name, params) for name, params in SMALL.items()},
         "recall-mqar": ("recall", {"format": "mqar", "N": 4, "vocab_size": 40, "seq_len": 32}),
         **RUNGS}


def test_all_tasks_registered():
    assert task_names() == sorted(SMALL)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_ladders_are_the_rungs_the_quick_profiles_score(name):
    """A quick profile that names its rungs names these, so the tests cover every scored rung."""
    assert load_profile("quick", name).get("rungs", LADDERS.get(name)) == LADDERS.get(name)


@pytest.mark.parametrize("case", sorted(CASES))
def test_posteriors_are_valid(case):
    task = make_task(*CASES[case])
    b = task.sample(64, make_generator(0))
    spec = task.spec
    assert b.inputs.shape[:2] == (64, spec.seq_len)
    assert b.positions.shape == (spec.n_scored,) and b.step.tolist() == list(range(1, spec.n_scored + 1))
    if spec.output_kind == "categorical":
        assert b.probs.dtype == torch.float64 and (b.probs >= 0).all()
        torch.testing.assert_close(b.probs.sum(-1), torch.ones(64, spec.n_scored, dtype=torch.float64))
        torch.testing.assert_close(b.entropy, entropy_bits(b.probs))
        # the true answer always has positive posterior probability
        assert (b.probs.gather(2, b.target[..., None]) > 0).all()
        assert (b.inputs != spec.pad_id).all() and int(b.inputs.max()) < spec.vocab_size
    else:
        assert (b.var > 0).all()
        torch.testing.assert_close(b.entropy, gaussian_entropy_bits(b.var))


@pytest.mark.parametrize("name", sorted(SMALL))
def test_same_seed_same_batch_and_streams_differ(name):
    task = make_task(name, SMALL[name])
    a = task.sample(8, make_generator(5, "train"))
    b = task.sample(8, make_generator(5, "train"))
    c = task.sample(8, make_generator(5, "eval"))
    d = task.sample(8, make_generator(6, "train"))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.target, b.target)
    assert not torch.equal(a.inputs, c.inputs) and not torch.equal(a.inputs, d.inputs)


def test_stream_seeds_are_distinct():
    seeds = {stream_seed(s, split) for s in range(50) for split in ("train", "eval", "probe")}
    assert len(seeds) == 150


@pytest.mark.parametrize("name", sorted(SMALL))
def test_train_and_eval_streams_never_overlap(name):
    task = make_task(name)  # default sizes: the spaces are far too large for a collision
    digest = lambda b: {hashlib.sha1(row.numpy().tobytes()).hexdigest() for row in b.inputs}  # noqa: E731
    g = make_generator(0, "train")
    train = set().union(*(digest(task.sample(256, g)) for _ in range(4)))
    evals = digest(task.sample(512, make_generator(0, "eval")))
    assert len(evals) == 512 and not (train & evals)


def reliability_z(probs, target):
    """Largest z-score over probability bins: among all (sequence, position, answer) triples
    whose posterior probability falls in a bin, the true answer (drawn by the sampler) must
    occur with the bin's mean posterior probability."""
    q = probs.flatten(0, 1)  # (N, A)
    hit = torch.nn.functional.one_hot(target.flatten(), q.shape[-1]).double()
    edges = torch.linspace(0, 1, 11, dtype=torch.float64)
    zs = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = (q > lo) & (q <= hi)
        if sel.sum() < 200:
            continue
        pred, freq = q[sel], hit[sel]
        se = math.sqrt((pred * (1 - pred)).sum().item()) / sel.sum().item()
        zs.append(abs(freq.mean().item() - pred.mean().item()) / max(se, 1e-12))
    assert zs, "no bin had enough samples"
    return max(zs)


def randomized_pit(probs, target, generator):
    """The randomised probability integral transform of each true answer, in answer-index
    order: F(target - 1) + U p(target) with U ~ U(0, 1); uniform on (0, 1) when the sampler
    draws the answers from the posterior. Unlike the reliability bins it sees which of several
    equally likely answers the sampler picks (bijection: a posterior uniform over the free
    values makes every bin exact, whichever free value the sampler draws)."""
    p = probs.gather(-1, target[..., None])[..., 0]
    below = probs.cumsum(-1).gather(-1, target[..., None])[..., 0] - p
    u = torch.rand(p.shape, generator=generator, dtype=torch.float64)
    return (below + u * p).flatten().numpy()


@pytest.mark.parametrize("case", ["bijection", "hmm", "recall", "recall-mqar", "sula",
                                  *(case for case, (name, _) in RUNGS.items() if name == "hmm"),
                                  "dirichlet", *(case for case, (name, _) in RUNGS.items() if name == "dirichlet"),
                                  "changepoint", *(case for case, (name, _) in RUNGS.items() if name == "changepoint")])
def test_monte_carlo_frequencies_agree_with_posterior(case):
    task = make_task(*CASES[case])
    b = task.sample(20000, make_generator(1))
    assert reliability_z(b.probs, b.target) < 5


@pytest.mark.parametrize("case", ["bijection", *(case for case, (name, _) in RUNGS.items() if name == "bijection")])
def test_monte_carlo_bijection_pit_is_uniform(case):
    """Bijection keys are drawn independently of the permutation, so the PITs of one sequence
    are independent too (the Lehmer code of a uniform permutation): a KS test over all of them."""
    from scipy import stats

    b = make_task(*CASES[case]).sample(20000, make_generator(1))
    assert stats.kstest(randomized_pit(b.probs, b.target, make_generator(2)), "uniform").pvalue > 1e-3


def test_monte_carlo_check_catches_a_wrong_posterior():
    from scipy import stats

    from windtunnel.tasks.hmm import forward_filter

    task = make_task("hmm", SMALL["hmm"])  # sampled with the observe_first convention
    b = task.sample(20000, make_generator(1))
    wrong = forward_filter(b.latent["transition"], b.latent["emission"], b.latent["observations"], "transition_first")
    assert reliability_z(wrong, b.target) > 5
    # a sampler that always reveals the lowest free value: every reliability bin stays exact
    bij = make_task(*CASES["bijection-V10-L9"]).sample(2000, make_generator(1))
    lowest = (bij.probs > 0).double().argmax(-1)
    assert reliability_z(bij.probs, lowest) < 1e-6
    assert stats.kstest(randomized_pit(bij.probs, lowest, make_generator(2)), "uniform").pvalue < 1e-10
    sula = make_task("sula", {"k": 6, "alpha": 0.9})
    b = sula.sample(20000, make_generator(1))
    assert reliability_z(make_task("sula", {"k": 6, "alpha": 0.8}).posterior(b.latent["labels"]), b.target) > 5


def test_monte_carlo_regression_pit_is_uniform():
    from scipy import stats

    task = make_task("regression", SMALL["regression"])
    b = task.sample(20000, make_generator(1))
    z = ((b.target - b.mean) / b.var.sqrt()).flatten().numpy()
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.02


@pytest.mark.parametrize("name", sorted(SMALL))
def test_baselines(name):
    task = make_task(name, SMALL[name])
    b = task.sample(32, make_generator(0))
    base = task.baselines(b)
    assert set(base) == {"bayes", *task.baseline_names} and len(task.baseline_names) >= 1
    for pred in base.values():
        if pred.probs is not None:
            torch.testing.assert_close(pred.probs.sum(-1), torch.ones(b.target.shape, dtype=torch.float64))
        else:
            assert (pred.var > 0).all() and pred.mean.shape == b.target.shape
    assert base["bayes"].probs is b.probs


@pytest.mark.parametrize("name", sorted(SMALL))
def test_hypothesis_space_and_decode(name):
    task = make_task(name)
    hs = task.hypothesis_space()
    assert hs.log10_size > 0 and str(hs)
    b = task.sample(2, make_generator(0))
    assert len(task.decode(b, 0)) == task.spec.seq_len


@pytest.mark.parametrize("name", sorted(SMALL))
def test_unknown_field_and_bad_n(name):
    with pytest.raises(ConfigError, match="unknown field 'nonsense'"):
        make_task(name, {"nonsense": 1})
    with pytest.raises(ConfigError, match="positive integer"):
        make_task(name, SMALL[name]).sample(0, make_generator(0))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", sorted(SMALL))
def test_samples_on_cuda(name):
    b = make_task(name, SMALL[name]).sample(16, make_generator(0, device="cuda"))
    assert b.inputs.is_cuda and b.entropy.is_cuda
