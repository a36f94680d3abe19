"""Why keys drawn with replacement start on a plateau (docs/geometry.md, the key-frame study):
averaged over the key that comes, every value already revealed is the answer with probability
1/V, as every value not yet revealed: a predictor that does not compare keys gains nothing from
elimination. Checked on the task's exact posteriors; without replacement the revealed values
have probability 0 (elimination is the whole gain)."""

import torch

from windtunnel.tasks import make_generator, make_task


def revealed_and_unrevealed_mass(with_replacement: bool, V: int = 8, L: int = 8, n: int = 40000):
    """Mean posterior probability of one revealed value and of one unrevealed value, over the key
    positions past the first (the task's exact posteriors, the keys' randomness averaged out)."""
    task = make_task("bijection", {"V": V, "L": L, "with_replacement": with_replacement})
    b = task.sample(n, make_generator(0, "train"))
    values = b.latent["values"]  # (n, L)
    onehot = torch.nn.functional.one_hot(values, V).bool()
    revealed = torch.zeros_like(onehot)
    revealed[:, 1:] = onehot[:, :-1].cumsum(1).gt(0)
    probs = b.probs.double()
    rev = (probs * revealed).sum(-1)[:, 1:].sum() / revealed[:, 1:].sum()
    unrev = (probs * ~revealed).sum(-1)[:, 1:].sum() / (~revealed[:, 1:]).sum()
    return float(rev), float(unrev)


def test_with_replacement_a_revealed_value_is_as_likely_as_an_unrevealed_one():
    rev, unrev = revealed_and_unrevealed_mass(True)
    assert abs(rev - 1 / 8) < 0.003 and abs(unrev - 1 / 8) < 0.003


def test_without_replacement_a_revealed_value_has_no_mass():
    rev, unrev = revealed_and_unrevealed_mass(False)
    assert rev == 0 and unrev > 1 / 8 + 0.02
