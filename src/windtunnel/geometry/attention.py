"""Attention focusing (Paper I section 6.2): entropy of attention, query-key alignment, and
where the attention goes in the bijection.

* Entropy: per layer and head, the entropy in bits of every causal attention row, averaged over
  sequences and query rows after it is taken; normalised by log2(t + 1), the entropy of uniform
  attention over the t + 1 attendable positions of row t. Reported at the scored query rows
  (where the prediction is read) and over all rows. Nulls: uniform attention (analytic) and the
  step-0 model; the test is a paired bootstrap over sequences of the layer-mean entropy
  difference trained - init (95% CI).
* Query-key alignment (the authors' ``qk-align``): per layer, cos(q at scored position i, k at
  scored position j) for j < i, averaged over heads and sequences: a (P, P) map, NaN above the
  diagonal, plus its mean.
* Bijection mass split (operationalising 6.2(c); tasks with ``alternates_keys_values``): at the
  k-th key position (k >= 2) the mass on
  the query itself, on earlier key tokens and on earlier value tokens. Every earlier value token
  is a value already used, i.e. an eliminated hypothesis, so the value-token mass is the mass
  on eliminated hypotheses; the still-feasible ones never appear as tokens. Reported per head
  with its per-k curve, beside uniform attention ((k-1)/(2k-1) on values) and the step-0 model.

It applies to models with attention (``model.has_attention``).
"""

from __future__ import annotations

import numpy as np
import torch

from windtunnel import stats
from windtunnel.analysis import Analysis
from windtunnel.evaluate.metrics import bootstrap_ci
from windtunnel.geometry import markdown, plots
from windtunnel.geometry.context import Activations, Context, missing

GROUPS = ("self", "keys", "values")


def applies(ctx: Context) -> str | None:
    return missing(ctx.model, "has_attention")


def entropy_per_layer(acts: Activations, rows) -> list[dict]:
    return [stats.attention_entropy_summary(acts.patterns[i], rows) for i in sorted(acts.patterns)]


def sequence_entropy(acts: Activations, rows) -> torch.Tensor:
    """(L, B): per layer and sequence, the entropy (bits) averaged over heads and ``rows``."""
    return torch.stack([stats.attention_entropy(acts.patterns[i][:, :, rows]).mean((1, 2))
                        for i in sorted(acts.patterns)])


def qk_alignment(acts: Activations) -> list[np.ndarray]:
    """Per layer the (P, P) map of mean cos(q_i, k_j) over heads and sequences, j < i (NaN elsewhere)."""
    out = []
    for i in sorted(acts.q):
        q = torch.nn.functional.normalize(acts.q[i].double(), dim=-1)
        k = torch.nn.functional.normalize(acts.k[i].double(), dim=-1)
        c = torch.einsum("bhid,bhjd->ij", q, k) / (q.shape[0] * q.shape[1])
        m = c.numpy()
        m[np.triu_indices(m.shape[0])] = np.nan
        out.append(m)
    return out


def bijection_groups(T: int) -> torch.Tensor:
    """(T,) group of each position in a bijection sequence: keys at even, values at odd indices."""
    lab = torch.full((T,), GROUPS.index("values"), dtype=torch.long)
    lab[0::2] = GROUPS.index("keys")
    return lab


def bijection_mass(acts: Activations, positions: torch.Tensor) -> list[dict]:
    """Per layer: mass on self / earlier keys / earlier values at key positions k >= 2."""
    rows = positions[1:]
    T = next(iter(acts.patterns.values())).shape[-1]
    base = bijection_groups(T)
    out = []
    for i in sorted(acts.patterns):
        p = acts.patterns[i]
        m = stats.mass_by_group(p, base, rows, len(GROUPS))  # (B, H, R, 3): self counted in its group
        self_mass = p[:, :, rows, rows].double()  # (B, H, R)
        m[..., GROUPS.index("keys")] -= self_mass  # the query is a key token: move it to "self"
        m[..., GROUPS.index("self")] = self_mass
        per_head = m.mean((0, 2))  # (H, 3)
        out.append({
            "per_head": {g: per_head[:, j].tolist() for j, g in enumerate(GROUPS)},
            "mean": {g: float(per_head[:, j].mean()) for j, g in enumerate(GROUPS)},
            "values_curve_per_head": m[..., GROUPS.index("values")].mean(0).tolist(),  # (H, R)
        })
    return out


def uniform_bijection_mass(positions: torch.Tensor) -> dict:
    """Uniform attention's mass split over the same rows: row t = 2(k-1) sees k-1 keys, k-1 values, itself."""
    t = positions[1:].double()
    n = t + 1
    vals = torch.div(positions[1:], 2, rounding_mode="floor").double()  # earlier values at even t
    keys = n - 1 - vals
    return {"self": float((1 / n).mean()), "keys": float((keys / n).mean()), "values": float((vals / n).mean()),
            "values_curve": (vals / n).tolist()}


def run(ctx: Context, n_boot: int = 500) -> dict:
    acts, init = ctx.acts("final"), ctx.acts("init")
    pos = ctx.batch.positions
    out: dict = {"scored_rows": pos.tolist(), "null_init": ctx.init_source, "layers": []}
    ent_s, ent_a = entropy_per_layer(acts, pos), entropy_per_layer(acts, None)
    ent0_s, ent0_a = entropy_per_layer(init, pos), entropy_per_layer(init, None)
    seq, seq0 = sequence_entropy(acts, pos), sequence_entropy(init, pos)
    align, align0 = qk_alignment(acts), qk_alignment(init)
    for li in range(len(ent_s)):
        est, lo, hi = bootstrap_ci(seq[li] - seq0[li], n_boot=n_boot, generator=ctx.seed)
        out["layers"].append({
            "layer": li,
            "scored": ent_s[li],
            "all_rows": {k: v for k, v in ent_a[li].items() if k not in ("rows", "curve_bits")},
            "init_scored": {k: v for k, v in ent0_s[li].items() if k != "rows"},
            "init_all_rows": {k: v for k, v in ent0_a[li].items() if k not in ("rows", "curve_bits")},
            "diff_vs_init": {"value": est, "lo": lo, "hi": hi, "n_boot": n_boot,
                             "what": "scored-row entropy (bits), trained - init, bootstrap over sequences"},
            "qk_alignment": align[li].tolist(),
            "qk_alignment_mean": float(np.nanmean(align[li])) if np.isfinite(align[li]).any() else float("nan"),
            "qk_alignment_mean_init": float(np.nanmean(align0[li])) if np.isfinite(align0[li]).any() else float("nan"),
        })
    first, last = out["layers"][0]["scored"]["bits"], out["layers"][-1]["scored"]["bits"]
    out["reduction_first_to_last"] = float(1 - last / first) if first > 0 else float("nan")
    out["uniform_bits_scored"] = out["layers"][0]["scored"]["uniform_bits"]
    if ctx.task.alternates_keys_values and pos.numel() > 1:
        mass, mass0 = bijection_mass(acts, pos), bijection_mass(init, pos)
        out["bijection_mass"] = {
            "operationalisation": "mass of the k-th key position (k >= 2) on itself, on earlier key tokens and on "
                                  "earlier value tokens (= used values, i.e. eliminated hypotheses)",
            "k": list(range(2, pos.numel() + 1)),
            "layers": [{"layer": li, **m, "init_mean": m0["mean"]} for li, (m, m0) in enumerate(zip(mass, mass0))],
            "uniform": uniform_bijection_mass(pos),
        }
    return out


ANALYSIS = Analysis(name='attention', title='Attention focusing', applies=applies, run=run,
                    markdown=markdown.attention, plot=plots.attention, needs_activations=True)
