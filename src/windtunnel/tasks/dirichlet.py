"""Dirichlet-categorical counting: the simplest exact Bayesian in-context task.

Every sequence draws its own category probabilities p ~ Dirichlet(alpha, ..., alpha) over
``n_cat`` categories, then ``n_draws`` draws x_1..x_N ~ Categorical(p). The model reads
``[<bos>, x_1, ..., x_{N-1}]`` and predicts the next draw at every position: the start token
predicts x_1, each x_t predicts x_{t+1}. After n draws with n_k of them in category k the exact
posterior predictive is

    p(x_{n+1} = k | x_1..n) = (n_k + alpha) / (n + n_cat alpha),

the counts are a sufficient statistic, and alpha is the prior strength in pseudo-counts per
category. :func:`implied_alpha` reads back the alpha that a model's predictions imply.

Token ids: the categories are 0..n_cat-1 (so they are the answer tokens: tied heads and the
key-frame analysis use them), then ``<bos>`` (n_cat) and the reserved padding id (n_cat + 1),
which never occurs in a sequence.
"""

from __future__ import annotations

import math

import torch
from pydantic import Field

from windtunnel.infotheory import entropy_bits
from windtunnel.tasks.base import Batch, HypothesisSpace, Prediction, Task, TaskConfig, TaskSpec, register_task, uniform_probs
from windtunnel.tasks.sampling import categorical, flat_dirichlet, gamma
from windtunnel.tasks.streams import counts_before, predictive, stream_inputs, stream_spec

__all__ = ["DirichletConfig", "DirichletTask", "counts_before", "implied_alpha", "predictive"]


class DirichletConfig(TaskConfig):
    n_cat: int = Field(8, ge=2, le=1024, description="number of categories (answer tokens 0..n_cat-1)")
    alpha: float = Field(1.0, gt=0, le=1000, description="symmetric Dirichlet prior: pseudo-count per category")
    n_draws: int = Field(32, ge=1, le=4096, description="draws per sequence, each predicted before it is seen")

    length_field = "n_draws"
    presets = {
        "small": {"n_cat": 4, "n_draws": 16},
        "sparse": {"n_cat": 8, "alpha": 0.1},  # most mass on a few categories: trust the first draws
        "laplace": {"n_cat": 2, "alpha": 1.0, "n_draws": 16},  # Laplace's rule of succession (n_k + 1) / (n + 2)
    }


def implied_alpha(probs: torch.Tensor, counts: torch.Tensor, n_cat: int, method: str = "least_squares") -> float:
    """The prior strength alpha that a model's predictions imply, read as a Dirichlet-categorical
    predictive.

    ``probs`` (..., n_cat) is a predictive distribution (a model's, or any predictor's) at
    positions whose context holds ``counts`` (..., n_cat) draws of each category (n = their sum;
    :func:`counts_before` gives them for a batch, e.g. ``counts_before(batch.latent["draws"],
    n_cat)``). Returns the alpha for which (n_k + alpha) / (n + n_cat alpha) is closest to
    ``probs``:

    - ``method="least_squares"`` (default): minimises sum over positions and categories of
      (probs_k - (n_k + a) / (n + n_cat a))^2 over a > 0: a search on a log grid of a in
      [1e-8, 1e8], then Gauss-Newton steps in log a. It returns 0.0 when the best fit is at
      (or below) the grid's lower end (the predictions follow the empirical frequencies n_k / n:
      the ``plugin`` baseline) and ``math.inf`` at its upper end (they ignore the counts: uniform).
    - ``method="closed_form"``: the same relation solved for a as a linear equation,
      probs_k (n + n_cat a) = n_k + a, so a (n_cat probs_k - 1) = n_k - n probs_k, by least
      squares: a = sum (n_cat q - 1)(n_k - n q) / sum (n_cat q - 1)^2. Its residuals are in
      pseudo-counts (each squared error weighted by (n + n_cat a)^2), and noise in ``probs``
      enters both sides, so on noisy predictions it is biased towards 0; it can be negative, and it
      is nan when ``probs`` is uniform everywhere.

    Both are exact (to rounding) when ``probs`` is a Dirichlet-categorical predictive. Positions
    with n = 0 (or with all n_k equal) carry no information about alpha: every alpha predicts the
    uniform distribution there (with no other position, the least-squares answer is nan).
    """
    q = probs.detach().to(torch.float64).reshape(-1, probs.shape[-1])
    c = counts.detach().to(torch.float64, copy=False).to(q.device).reshape(-1, counts.shape[-1])
    if q.shape != c.shape or q.shape[-1] != n_cat:
        raise ValueError(f"probs {tuple(probs.shape)} and counts {tuple(counts.shape)} must have one shape "
                         f"ending in n_cat = {n_cat}")
    n = c.sum(-1, keepdim=True)
    if method == "closed_form":
        x = n_cat * q - 1
        return float((x * (c - n * q)).sum() / (x * x).sum())
    if method != "least_squares":
        raise ValueError(f"method must be 'least_squares' or 'closed_form', got {method!r}")
    fit = _CountGroups.of(q, c, n, n_cat)
    if not bool((fit.n != n_cat * fit.k).any()):  # no position where alpha changes the prediction
        return math.nan
    t = fit.gauss_newton(fit.grid_search())
    if t <= _LOG_LO:
        return 0.0
    if t >= _LOG_HI:
        return math.inf
    return math.exp(t)


#: the search range of log alpha in :func:`implied_alpha`: alpha in [1e-8, 1e8]
_LOG_LO, _LOG_HI = math.log(1e-8), math.log(1e8)


class _CountGroups:
    """The least-squares fit of :func:`implied_alpha`. The fitted f_k(a) = (n_k + a) / (n + n_cat a)
    depends only on the pair (n, n_k): the entries are grouped by that pair (``n``, ``k``, ``m``
    entries per group, ``sq`` their summed probabilities), so that the squared error is the sum over
    groups of m f^2 - 2 f sq (+ the constant sum q^2)."""

    def __init__(self, n: torch.Tensor, k: torch.Tensor, m: torch.Tensor, sq: torch.Tensor, n_cat: int):
        self.n, self.k, self.m, self.sq, self.n_cat = n, k, m, sq, n_cat

    @classmethod
    def of(cls, q: torch.Tensor, c: torch.Tensor, n: torch.Tensor, n_cat: int) -> _CountGroups:
        nn = n.expand_as(c).flatten()
        if bool((c == c.round()).all()) and bool((c >= 0).all()):  # integer counts: one sortable key per pair
            key = nn * (float(c.max()) + 1) + c.flatten()
            _, inv = torch.unique(key, return_inverse=True)
            uniq = torch.zeros(int(inv.max()) + 1, 2, dtype=torch.float64, device=q.device)
            uniq[inv] = torch.stack([nn, c.flatten()], dim=-1)
        else:
            uniq, inv = torch.unique(torch.stack([nn, c.flatten()], dim=-1), dim=0, return_inverse=True)
        zeros = torch.zeros(len(uniq), dtype=torch.float64, device=q.device)
        m = zeros.index_add(0, inv, torch.ones_like(q).flatten())  # entries per (n, n_k) group
        sq = zeros.index_add(0, inv, q.flatten())  # their summed probabilities
        return cls(uniq[:, 0], uniq[:, 1], m, sq, n_cat)

    def sse(self, a: torch.Tensor) -> torch.Tensor:
        """a (G,) -> (G,) squared error less sum q^2."""
        f = (self.k + a[:, None]) / (self.n + self.n_cat * a[:, None])
        return (self.m * f * f - 2 * f * self.sq).sum(-1)

    def _sse_at(self, t: float) -> float:
        return float(self.sse(torch.tensor([math.exp(t)], dtype=torch.float64, device=self.m.device)))

    def grid_search(self) -> float:
        """The best log a on a log grid of 321 points over [1e-8, 1e8]."""
        grid = torch.linspace(_LOG_LO, _LOG_HI, 321, dtype=torch.float64, device=self.m.device)
        return float(grid[int(self.sse(grid.exp()).argmin())])

    def gauss_newton(self, t: float) -> float:
        """Gauss-Newton steps in t = log a from ``t``: r = f(a) - q, dr/dt = a (n - n_cat n_k) / (n + n_cat a)^2,
        each step halved until the squared error does not grow."""
        for _ in range(100):
            a = math.exp(t)
            den = self.n + self.n_cat * a
            f = (self.k + a) / den
            jac = a * (self.n - self.n_cat * self.k) / den ** 2
            jj = float((self.m * jac * jac).sum())
            if jj == 0.0:
                break
            step = -float((jac * (self.m * f - self.sq)).sum()) / jj
            s_old = self._sse_at(t)
            while abs(step) > 1e-15:  # backtrack until the squared error does not grow
                t_new = min(max(t + step, _LOG_LO), _LOG_HI)
                if self._sse_at(t_new) <= s_old:
                    break
                step /= 2
            else:
                break
            t_prev, t = t, t_new
            if abs(t - t_prev) < 1e-13:
                break
        return t


@register_task
class DirichletTask(Task):
    name = "dirichlet"
    Config = DirichletConfig
    description = ("predict the next draw of a categorical whose probabilities p ~ Dirichlet(alpha) "
                   "are fresh per sequence")
    baseline_names = ("uniform", "plugin")

    @property
    def bos_id(self) -> int:
        return self.config.n_cat

    @property
    def spec(self) -> TaskSpec:
        return stream_spec(self.name, self.config.n_cat, self.config.n_draws, "ce")

    def hypothesis_space(self) -> HypothesisSpace:
        k = self.config.n_cat
        return HypothesisSpace(
            math.inf, f"a point p of the {k - 1}-simplex, fresh per sequence; the {k} counts are a sufficient statistic"
        )

    def sample_p(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """(n, n_cat) float64 rows of Dirichlet(alpha). alpha = 1 (the default): normalised
        exponentials (``sampling.flat_dirichlet``). Otherwise drawn in log space,
        log G = log G' + log(U) / alpha with G' ~ Gamma(alpha + 1) (the boost that ``sampling.gamma``
        applies), so that a small alpha cannot underflow every Gamma of a row to 0 (rows then have
        exact zeros, never nan)."""
        c, dev = self.config, generator.device
        if c.alpha == 1.0:
            return flat_dirichlet((n, c.n_cat), generator)
        g1 = gamma(torch.full((n, c.n_cat), c.alpha + 1.0, dtype=torch.float64, device=dev), generator)
        u = 1.0 - torch.rand(n, c.n_cat, generator=generator, device=dev, dtype=torch.float64)  # in (0, 1]
        logg = (g1.log() + u.log() / c.alpha).clamp_min(-1e300)
        return torch.softmax(logg, dim=-1)

    def posterior(self, draws: torch.Tensor) -> torch.Tensor:
        """p(x_t | x_1..x_{t-1}) for every t: draws (B, N) -> (B, N, n_cat), float64."""
        return predictive(counts_before(draws, self.config.n_cat), self.config.alpha)

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        self._check_n(n)
        c, dev = self.config, generator.device
        p = self.sample_p(n, generator)
        draws = categorical(p, generator, c.n_draws)
        inputs = stream_inputs(draws, c.n_cat)
        probs = self.posterior(draws)
        return Batch(
            inputs=inputs,
            positions=torch.arange(c.n_draws, device=dev),
            step=torch.arange(1, c.n_draws + 1, device=dev),
            target=draws,
            probs=probs,
            entropy=entropy_bits(probs),
            latent={"p": p, "draws": draws},
        )

    def _baselines(self, batch: Batch) -> dict[str, Prediction]:
        """``uniform``: 1/n_cat everywhere (the prior predictive: the best context-blind predictor).
        ``plugin``: the empirical frequencies n_k / n (uniform before the first draw), the maximum
        likelihood estimate of p with no prior. It gives probability 0 to every category not yet
        seen, so KL(Bayes || plugin) is infinite unclipped; the evaluation clips the model's
        probabilities from below at ``AUTHORS_KL_EPS`` = 1e-10 (evaluate/metrics.py), which turns each
        unseen category into a finite penalty of about -log2(1e-10) = 33 bits times its Bayes
        probability."""
        c = self.config
        counts = counts_before(batch.latent["draws"], c.n_cat)
        n = counts.sum(-1, keepdim=True)
        plugin = torch.where(n > 0, counts / n.clamp_min(1), torch.full_like(counts, 1.0 / c.n_cat))
        return {
            "uniform": Prediction(probs=uniform_probs(tuple(batch.target.shape), c.n_cat, batch.target.device)),
            "plugin": Prediction(probs=plugin),
        }

    def state_labels(self, batch: Batch) -> tuple[torch.Tensor, int, str] | None:
        """The most frequent category so far (ties to the lowest; category 0 before the first draw),
        which is also the argmax of the exact posterior predictive."""
        counts = counts_before(batch.latent["draws"], self.config.n_cat)
        return counts.argmax(-1), self.config.n_cat, "most frequent category so far (ties to the lowest)"

    def token_names(self) -> list[str]:
        return [f"c{k}" for k in range(self.config.n_cat)] + ["<bos>", "<pad>"]

