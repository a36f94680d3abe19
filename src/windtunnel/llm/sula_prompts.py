"""SULA prompts for pretrained LMs, their exact posterior and the calibration metrics (Paper III §4).

Generative model: a hidden class y in {L1, L2} with a uniform prior; each of k examples is a
carrier word (one of Paper III's 70 sentiment words, ignored by the Bayes model) with a label that
equals y with probability alpha = 0.9. Exact posterior (:meth:`windtunnel.tasks.sula.SULATask.posterior`):
p(L1 | labels) = sigmoid((n_L1 - n_L2) ln(alpha / (1 - alpha))); H_Bayes is its binary entropy in bits.

Prompt text follows the authors' released generator: ``w1: lab1, w2: lab2. test:`` (k >= 1)
and ``test:`` (k = 0), with labels chosen per model as the first candidates that are exactly
one token with a leading space in the model's tokenizer. The model's posterior is read from
the full-vocabulary softmax at the last position, renormalised over the two labels; H_model
is its binary entropy in bits (not the full-vocabulary entropy).

Controls (paired with the main prompts: same words, classes and draws):

- ``lexical_remap``: the next single-token label pair; H_Bayes unchanged.
- ``shuffled``: every example label redrawn uniformly; labels carry no evidence, H_Bayes = 1.
- ``ablation_labels`` (option A): every example label replaced by the mask text; H_Bayes = 1.
- ``ablation_carriers`` (option B, the paper's "replace carrier tokens"): carrier words masked,
  labels kept; H_Bayes unchanged (the carriers were never evidence).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from windtunnel.config import ConfigError
from windtunnel.infotheory import binary_entropy_bits
from windtunnel.llm.stats import bootstrap_mean, pearson
from windtunnel.stats import spearman
from windtunnel.tasks.sula import CARRIER_WORDS, SULATask


def cvc_sweep():
    """Fallback label candidates: consonant-vowel-consonant strings in a fixed order."""
    cons, vows = "bcdfghjklmnpqrstvwxyz", "aeiou"
    for a, b, c in itertools.product(cons, vows, cons):
        yield a + b + c


def single_token_labels(tokenizer, candidates, n: int = 4, exclude=()) -> list[str]:
    """The first ``n`` candidates (then the CVC sweep) that tokenize to exactly one token with
    a leading space and no special tokens, distinct as tokens."""
    out, ids = [], set()
    for w in itertools.chain(candidates, cvc_sweep()):
        if w in out or w in exclude:
            continue
        t = tokenizer(" " + w, add_special_tokens=False)["input_ids"]
        if len(t) == 1 and t[0] not in ids:
            out.append(w)
            ids.add(t[0])
            if len(out) == n:
                return out
    raise ConfigError(f"could not find {n} labels that are single tokens (with a leading space) in this tokenizer "
                      "among sula_label_candidates and the consonant-vowel-consonant sweep")


@dataclass
class SULASet:
    """One condition's prompts with their exact posterior."""

    condition: str
    labels: tuple[str, str]
    texts: list[str]
    k: np.ndarray
    y: np.ndarray  # true class, 0 = L1
    example_labels: list[list[int]]  # 0 = L1, 1 = L2 (before masking)
    p_bayes: np.ndarray  # p(L1)
    h_bayes: np.ndarray  # bits
    meta: dict = field(default_factory=dict)


def _posterior_l1(labels: list[int], k: int, alpha: float) -> float:
    if k == 0:
        return 0.5
    t = SULATask(k=k, alpha=alpha, n_words=len(CARRIER_WORDS))
    return float(t.posterior(torch.tensor([labels]))[0, -1, 0])


@dataclass(frozen=True)
class Draws:
    """What the prompts draw: ``n_per_k`` prompts with k examples for each k of ``ks``, whose labels
    equal the hidden class with probability ``alpha``, from the generator seeded with ``seed``."""

    ks: Sequence[int]
    n_per_k: int
    alpha: float
    seed: int


@dataclass(frozen=True)
class Wording:
    """How the prompts are written: the main label pair, the lexical remap's pair (needed by the
    ``lexical_remap`` control) and the text that masks a label or a carrier word."""

    labels: tuple[str, str]
    remap_labels: tuple[str, str] | None = None
    mask: str = "[MASK]"


def _render(words, labels, query, names) -> str:
    """``w1: name1, w2: name2. query:`` (``names``: the label names by class), or ``query:``."""
    if not labels:
        return f"{query}:"
    pairs = [f"{w}: {names[label]}" for w, label in zip(words, labels)]
    return ", ".join(pairs) + f". {query}:"


def generate(draws: Draws, wording: Wording, controls=()) -> dict[str, SULASet]:
    """Main SULA prompts and the requested paired controls, k-major order, seeded."""
    alpha, mask = draws.alpha, wording.mask
    rng = np.random.default_rng(draws.seed)
    drawn = []
    for k in draws.ks:
        for _ in range(draws.n_per_k):
            query = CARRIER_WORDS[rng.integers(len(CARRIER_WORDS))]
            y = int(rng.integers(2))
            words, labs, shuf = [], [], []
            for _ in range(k):
                words.append(CARRIER_WORDS[rng.integers(len(CARRIER_WORDS))])
                labs.append(y if rng.random() < alpha else 1 - y)
            shuf = [int(rng.integers(2)) for _ in range(k)]
            drawn.append((k, query, y, words, labs, shuf))

    def build(cond, names, *, use_shuf=False, mask_labels=False, mask_words=False, flat=False):
        texts, kk, yy, ll, pb = [], [], [], [], []
        shown = (mask, mask) if mask_labels else names
        for k, query, y, words, labs, shuf in drawn:
            lab = shuf if use_shuf else labs
            texts.append(_render([mask] * len(words) if mask_words else words, lab, query, shown))
            kk.append(k)
            yy.append(y)
            ll.append(lab)
            pb.append(0.5 if flat else _posterior_l1(lab, k, alpha))
        pb = np.array(pb)
        h = binary_entropy_bits(torch.tensor(pb, dtype=torch.float64)).numpy()
        return SULASet(cond, tuple(names), texts, np.array(kk), np.array(yy), ll, pb, h)

    labels = wording.labels
    sets = {"main": build("main", labels)}
    if "lexical_remap" in controls:
        if wording.remap_labels is None:
            raise ValueError("lexical_remap needs a second label pair")
        sets["lexical_remap"] = build("lexical_remap", wording.remap_labels)
    if "shuffled" in controls:
        sets["shuffled"] = build("shuffled", labels, use_shuf=True, flat=True)
    if "ablation_labels" in controls:
        sets["ablation_labels"] = build("ablation_labels", labels, mask_labels=True, flat=True)
    if "ablation_carriers" in controls:
        sets["ablation_carriers"] = build("ablation_carriers", labels, mask_words=True)
    posterior_note = {
        "main": "exact: sigmoid((n_L1 - n_L2) ln(alpha/(1-alpha)))",
        "lexical_remap": "exact, unchanged (same labels, different names)",
        "shuffled": "H_Bayes = 1 bit: shuffled labels carry no evidence",
        "ablation_labels": "H_Bayes = 1 bit: option A, labels masked, no evidence left",
        "ablation_carriers": "exact, unchanged: option B, carriers masked; the Bayes model never used them",
    }
    for name, s in sets.items():
        s.meta["posterior"] = posterior_note[name]
    return sets


def model_posterior(label_probs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p_model(L1), H_model bits, label mass p(L1) + p(L2)) from full-vocabulary label probabilities."""
    lp = np.asarray(label_probs, dtype=np.float64)
    mass = lp.sum(1)
    p1 = lp[:, 0] / np.where(mass > 0, mass, 1.0)
    h = binary_entropy_bits(torch.tensor(p1)).numpy()
    return p1, h, mass


def constant_mae(h_bayes, ks=None) -> float:
    """MAE of the best constant entropy predictor (the median of H_Bayes, which minimises it); with
    ``ks``, of the best constant per number of examples (the median within each k): a predictor
    that counts the examples and never reads a label."""
    h = np.asarray(h_bayes, dtype=np.float64)
    if ks is None:
        return float(np.abs(h - np.median(h)).mean())
    ks = np.asarray(ks)
    return float(np.mean([abs(v - np.median(h[ks == k])) for v, k in zip(h, ks)]))


def within_k(h_model, h_bayes, ks) -> tuple[float, float]:
    """Spearman rho (and p) of H_model against H_Bayes after each k's mean is taken out of both:
    does the model's entropy follow the labels' evidence beyond the number of examples, which
    the prompt's length alone gives away?"""
    h_model, h_bayes, ks = (np.asarray(a, dtype=np.float64) for a in (h_model, h_bayes, ks))
    _, group = np.unique(ks, return_inverse=True)
    counts = np.bincount(group)

    def resid(h):  # each prompt minus its k's mean (vectorised: the claims' bootstrap calls it thousands of times)
        return h - (np.bincount(group, h) / counts)[group]

    return spearman(resid(h_model), resid(h_bayes))


def reads_labels(mae, constant_mae, within_k_spearman, within_k_p) -> bool:
    """Is a model calibrated beyond the best constant predictor: its SULA MAE below the best
    constant's, and its entropy following the labels' evidence within each k (Spearman > 0,
    p < 0.01)? The precondition of the SULA and entropy-axis claims."""
    vals = (mae, constant_mae, within_k_spearman, within_k_p)
    if any(v is None or v != v for v in vals):
        return False
    return bool(mae < constant_mae and within_k_spearman > 0 and within_k_p < 0.01)


def calibration(h_model, h_bayes, ks, p_model=None, y=None) -> dict:
    """MAE |H_model - H_Bayes| and Pearson corr(H_model, H_Bayes), overall and per k (corr is
    NaN where H_Bayes is constant, e.g. k = 0). Beside the MAE: the 1-bit predictor's
    (``uniform_mae``), the best constant's (``constant_mae``), the best constant per k's
    (``count_mae``: it counts the examples, reads no label), and the within-k Spearman of H_model
    against H_Bayes (``within_k_spearman``, ``within_k_p``: does the entropy read the labels)."""
    h_model, h_bayes, ks = map(np.asarray, (h_model, h_bayes, ks))
    out = {"mae": float(np.abs(h_model - h_bayes).mean()), "corr": pearson(h_model, h_bayes),
           "uniform_mae": float(np.abs(1.0 - h_bayes).mean()),
           "constant_mae": constant_mae(h_bayes), "count_mae": constant_mae(h_bayes, ks),
           "mean_h_model": float(h_model.mean()), "mean_h_bayes": float(h_bayes.mean()), "per_k": {}}
    rho_k, _ = spearman(ks, h_model)
    out["spearman_k_h_model"] = rho_k
    out["within_k_spearman"], out["within_k_p"] = within_k(h_model, h_bayes, ks)
    if p_model is not None and y is not None:
        p_true = np.where(np.asarray(y) == 0, p_model, 1 - np.asarray(p_model))
        out["accuracy"] = float((p_true > 0.5).mean())
    for k in np.unique(ks):
        m = ks == k
        out["per_k"][str(int(k))] = {
            "n": int(m.sum()), "mae": float(np.abs(h_model[m] - h_bayes[m]).mean()),
            "corr": pearson(h_model[m], h_bayes[m]),
            "mean_h_model": float(h_model[m].mean()), "mean_h_bayes": float(h_bayes[m].mean()),
        }
    return out


def trajectory(pc1, ks, n_boot: int, seed: int) -> dict:
    """Mean PC1 per k with bootstrap 95% intervals, and Spearman rho(k, PC1) across prompts."""
    pc1, ks = np.asarray(pc1, dtype=np.float64), np.asarray(ks)
    per_k = {}
    for k in np.unique(ks):
        v = pc1[ks == k]
        mean, (lo, hi) = bootstrap_mean(v, n_boot, seed)
        per_k[str(int(k))] = {"mean": float(mean), "std": float(v.std()), "ci": [float(lo), float(hi)], "n": int(v.size)}
    rho, p = spearman(ks, pc1)
    return {"per_k": per_k, "spearman_k_pc1": rho, "spearman_p": p}
