"""Paper III's claims judged per model against the same architecture at initialisation.

A claim is about learned geometry, so a verdict must separate a trained model from an untrained
one. Each rule reads the model's ``llm.json`` and its controls' (:mod:`windtunnel.llm.control`:
the ``init_revision`` checkpoint, else re-initialisations from the model's own config), and judges
two parts:

- **the control**: the trained value beyond the control's: the 95% interval of the difference
  clears the smallest difference that counts (``Thresholds.control_share`` for shares, ``control_cos``
  for |cos|, ``control_rho`` for SULA's correlations; a difference below it, however certain, is
  no learned geometry: a random network's attention is uniform to a few millionths);
- **the paper's criterion** (§4.4, or the authors' config where the paper gives none).

Verdicts: **holds** (control beaten and criterion met), **partly** (control beaten, criterion not
met), **does not hold** (control not beaten: whatever the criterion says, an untrained network
does as well), **not testable** (with the reason: no control, or a precondition such as a
calibrated model), **not measured** (the analysis did not run). Per claim:

- value manifold: PC1 and PC1+PC2 of the mixed set's final-layer values, each above the control's
  (bootstrap replicates over prompts, the controls' pooled, so the value dimension cancels);
  criterion PC1 or PC1+PC2 > ``manifold_pc`` (0.30).
- key orthogonality: mean |cos| of the W_K columns below the control's, paired by layer and head
  (bootstrap over the heads of every layer); criterion: below ``key_orth_max`` in half the layers.
- focusing: the relative entropy drop first to last layer above the control's (replicates over
  prompts); criterion > ``focusing_min`` (0.30).
- domain restriction: the gain math - mixed of PC1+PC2 above the control's (the two sets resampled
  independently); criterion math PC1+PC2 >= :data:`DR_COLLAPSE`.
- SULA: only for a model whose entropy reads the labels (MAE below the best constant's and a
  positive within-k Spearman(H_model, H_Bayes), p < 0.01), else it does not hold. Control: the
  within-k (partial) Spearman of PC1 with -H_Bayes, and PC1's separation of the main prompts from
  the shuffled and label-ablation prompts at equal k, each above the control's (paired bootstrap
  over the same prompts). Criterion: |Spearman(PC1, H_Bayes)| >= :data:`SULA_RHO`, p < 0.01.
- entropy axis: testable only where the model is calibrated beyond the best constant predictor.
  Control: the true-axis cut's change of the downstream axis-entropy correlation below the 5%
  quantile of ``n_random_axes`` random-axis cuts; criterion: that change <= -:data:`GEOMETRY_DROP`
  and the calibration barely moves (|ΔMAE| <= :data:`CALIBRATION_TOLERANCE` bits).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from windtunnel.llm.claim_intervals import SEED, difference, paired_units, sula_differences
from windtunnel.llm.config import Thresholds
from windtunnel.llm.headline import get, headline
from windtunnel.tables import f, pct

#: the paper's "PC1+PC2 ~ 70-95%" after domain restriction: its lower end
DR_COLLAPSE = 0.70
#: |Spearman(PC1, H_Bayes)| the authors' config expects ("PC1-entropy correlation: > 0.5")
SULA_RHO = 0.5
#: drop in the downstream axis-entropy correlation that counts as destroying the local geometry
GEOMETRY_DROP = 0.10
#: |change of SULA calibration MAE| (bits) that counts as "barely moves"
CALIBRATION_TOLERANCE = 0.02
#: the random-cut quantile the true cut must fall below
RANDOM_AXIS_QUANTILE = 0.05

VERDICTS = ("holds", "partly", "does not hold", "not testable", "not measured")
CLAIMS = ("value_manifold", "key_orthogonality", "focusing", "domain_restriction", "sula", "entropy_axis")


@lru_cache(maxsize=1)
def paper_values() -> dict[str, Any]:
    """``data/paper3_values.json``: the paper's numbers per model (by hub id) and its claims."""
    return json.loads((resources.files("windtunnel") / "data" / "paper3_values.json").read_text())


def paper_entry(model_name: str) -> dict[str, Any] | None:
    """The paper's values for a model named by its hub id (case-insensitive), else None."""
    models = {k.lower(): v for k, v in paper_values()["models"].items()}
    return models.get(model_name.strip().lower())


def paper_text(value: Any, share: bool = True) -> str:
    """A paper value as printed: a share as 99.7% (or a range 15.0%-20.0%), a number as 0.11-0.13,
    or the paper's word where it gives no number."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    fmt = pct if share else (lambda v: f"{v:g}")
    return "-".join(fmt(v) for v in value) if isinstance(value, list) else fmt(value)


# --- the two parts and the verdict ---------------------------------------------------------------

def _verdict(beaten: bool | None, criterion: bool | None, why: str | None = None) -> str:
    if why:
        return "not testable"
    return "holds" if beaten and criterion else "partly" if beaten else "does not hold"


@dataclass(frozen=True)
class _Reading:
    """What a claim measured before its control is read: the claim, the measurement in words,
    whether the paper's criterion is met, and the paper's value."""

    name: str
    measured: str = "-"
    criterion: bool | None = None
    paper: str = "-"

    def claim(self, beaten: bool | None, control: str = "-", rests_on: str = "-", why: str | None = None,
              **numbers) -> dict[str, Any]:
        """The claim's record: its verdict from ``beaten`` and the criterion, or not testable ``why``."""
        return {"claim": self.name, "verdict": _verdict(beaten, self.criterion, why), "control_beaten": beaten,
                "criterion_met": self.criterion, "measured": self.measured, "control": control,
                "rests_on": rests_on, "reason": why, "paper": self.paper, **numbers}

    def untestable(self, why: str, rests_on: str = "-") -> dict[str, Any]:
        return self.claim(None, rests_on=rests_on, why=why)

    def no_control(self) -> dict[str, Any]:
        return self.untestable("no control: the model was run with control off (the model at initialisation is "
                               "its reference)")


def _not_measured(name: str) -> dict[str, Any]:
    return {**_Reading(name).claim(None), "verdict": "not measured"}


def control_description(controls: list[dict]) -> str:
    """Which control a verdict rests on, in words."""
    if not controls:
        return "-"
    m = controls[0]["model"]
    if m.get("revision") is not None and m.get("reinit_seed") is None:
        return f"checkpoint {m['revision']}"
    seeds = [c["model"].get("reinit_seed") for c in controls]
    return f"re-initialised from its config ({len(seeds)} seed{'s' if len(seeds) > 1 else ''}: {', '.join(map(str, seeds))})"


@dataclass(frozen=True)
class _Judging:
    """One model's ``llm.json`` (``doc``; its :func:`~windtunnel.llm.headline.headline` ``row``)
    and its controls' (``c_rows``), with what every rule reads beside them: the run's criteria, the
    paper's values, the control the verdicts rest on (``on``), the bootstrap size and the thresholds
    (the smallest differences that count)."""

    doc: dict
    controls: list[dict]
    row: dict
    c_rows: list[dict]
    criteria: dict
    paper: dict
    on: str
    n_boot: int
    thresholds: dict[str, Any]

    @classmethod
    def of(cls, doc: dict, controls: list[dict]) -> _Judging:
        options = doc.get("options", {})
        return cls(doc, controls, headline(doc), [headline(c) for c in controls], doc.get("criteria", {}),
                   paper_entry(doc["model"]["name"]) or {}, control_description(controls),
                   options.get("n_bootstrap", 1000), {**Thresholds().model_dump(), **options.get("thresholds", {})})


def _boot(doc: dict, which: str, key: str) -> list[float] | None:
    r = doc.get("results", {})
    vm = r.get("value_manifold") if which == "mixed" else get(r, "domain_restriction", "math")
    if vm is None and which == "mixed":
        vm = get(r, "domain_restriction", "mixed")
    return get(vm, "final_bootstrap", key)


def _value_manifold(j: _Judging) -> dict[str, Any]:
    row, margin = j.row, j.thresholds["control_share"]
    if row["mixed_pc1_pc2"] is None:
        return _not_measured("value_manifold")
    r = _Reading("value_manifold", f"PC1 {pct(row['mixed_pc1'])}, PC1+PC2 {pct(row['mixed_pc1_pc2'])} "
                                   f"(bootstrap mean {pct(row['mixed_pc1_pc2_boot'])})",
                 get(j.criteria, "value_manifold", "pass"), paper_text(j.paper.get("mixed_pc1_pc2")))
    if not j.controls:
        return r.no_control()
    ci1 = difference(_boot(j.doc, "mixed", "pc1"), [_boot(c, "mixed", "pc1") for c in j.controls])
    ci12 = difference(_boot(j.doc, "mixed", "pc1_pc2"), [_boot(c, "mixed", "pc1_pc2") for c in j.controls])
    if ci1 is None or ci12 is None:
        return r.untestable("no bootstrap replicates recorded", j.on)
    beaten = ci1[0] > margin and ci12[0] > margin
    text = (f"control PC1+PC2 {pct(np.mean([c['mixed_pc1_pc2'] for c in j.c_rows]))}; trained - control: PC1 "
            f"[{pct(ci1[0])}, {pct(ci1[1])}], PC1+PC2 [{pct(ci12[0])}, {pct(ci12[1])}]")
    return r.claim(beaten, text, j.on, diff_pc1_ci=ci1, diff_pc1_pc2_ci=ci12)


def _key_orthogonality(j: _Judging) -> dict[str, Any]:
    row = j.row
    if row["key_orth_mean"] is None:
        return _not_measured("key_orthogonality")
    r = _Reading("key_orthogonality", f"mean {f(row['key_orth_mean'], '.3f')} (early {f(row['key_orth_early'], '.3f')}); "
                                      f"{pct(row['key_orth_frac_below'])} of layers < {row['key_orth_threshold']}",
                 get(j.criteria, "key_orthogonality", "pass"), paper_text(j.paper.get("key_orth_early"), share=False))
    if not j.controls:
        return r.no_control()

    def heads(d):
        return np.concatenate([np.atleast_1d(x["per_head"]) for x in d["results"]["key_orthogonality"]["layers"]])

    t = heads(j.doc)
    cs = [heads(c) for c in j.controls]
    if any(c.shape != t.shape for c in cs):
        return r.untestable("the control has another number of heads", j.on)
    c = np.mean(cs, 0)
    ci = paired_units(t, c, j.n_boot)
    text = (f"control mean {f(float(c.mean()), '.3f')}; trained - control over {t.size} heads "
            f"[{f(ci[0], '+.4f')}, {f(ci[1], '+.4f')}]")
    return r.claim(ci[1] < -j.thresholds["control_cos"], text, j.on, diff_ci=ci)


def _focusing(j: _Judging) -> dict[str, Any]:
    row = j.row
    if row["focusing"] is None:
        return _not_measured("focusing")
    r = _Reading("focusing", f"{pct(row['focusing'])} [{pct(row['focusing_lo'])}, {pct(row['focusing_hi'])}]",
                 get(j.criteria, "attention_focusing", "pass"), paper_text(j.paper.get("focusing")))
    if not j.controls:
        return r.no_control()
    key = ("results", "attention_focusing", "focusing", "bootstrap", "relative_drop")
    ci = difference(get(j.doc, *key), [get(c, *key) for c in j.controls])
    if ci is None:
        return r.untestable("no bootstrap replicates recorded", j.on)
    ctl = np.mean([c["focusing"] for c in j.c_rows])
    text = f"control {pct(ctl)}; trained - control [{pct(ci[0])}, {pct(ci[1])}]"
    return r.claim(ci[0] > j.thresholds["control_share"], text, j.on, diff_ci=ci)


def _gain_reps(doc: dict, seed: int = SEED) -> list[float] | None:
    a, b = _boot(doc, "mixed", "pc1_pc2"), _boot(doc, "math", "pc1_pc2")
    if not a or not b:
        return None
    rng = np.random.default_rng(seed)
    n = min(len(a), len(b))
    return (np.asarray(b)[rng.permutation(len(b))[:n]] - np.asarray(a)[rng.permutation(len(a))[:n]]).tolist()


def _domain_restriction(j: _Judging) -> dict[str, Any]:
    row = j.row
    if row["math_pc1_pc2"] is None or row["dr_gain"] is None:
        return _not_measured("domain_restriction")
    r = _Reading("domain_restriction", f"math PC1+PC2 {pct(row['math_pc1_pc2'])}; gain {pct(row['dr_gain'])} "
                                       f"[{pct(row['dr_gain_lo'])}, {pct(row['dr_gain_hi'])}]",
                 row["math_pc1_pc2"] >= DR_COLLAPSE, paper_text(j.paper.get("math_pc1_pc2")))
    if not j.controls:
        return r.no_control()
    ci = difference(_gain_reps(j.doc), [_gain_reps(c) for c in j.controls])
    if ci is None:
        return r.untestable("no bootstrap replicates recorded", j.on)
    ctl = np.mean([c["dr_gain"] for c in j.c_rows])
    text = f"control gain {pct(ctl)}; trained - control [{pct(ci[0])}, {pct(ci[1])}]"
    return r.claim(ci[0] > j.thresholds["control_share"], text, j.on, diff_ci=ci)


def calibrated(row: dict[str, Any]) -> tuple[bool, str]:
    """Does the model's SULA entropy read the labels: MAE below the best constant predictor's and a
    positive within-k Spearman(H_model, H_Bayes) with p < 0.01. (The answer, and why.)"""
    from windtunnel.llm.sula_prompts import reads_labels

    mae, const, wk, wk_p = (row.get(k) for k in ("sula_mae", "sula_constant_mae", "sula_within_k_spearman",
                                                  "sula_within_k_p"))
    if mae is None or const is None:
        return False, "no SULA calibration measured"
    ok = reads_labels(mae, const, wk, wk_p)
    why = (f"MAE {f(mae, '.3f')} against the best constant's {f(const, '.3f')}; within-k rho(H_model, H_Bayes) "
           f"{f(wk, '+.2f')} (p {f(wk_p, '.1g')})")
    return ok, why


def _sula(j: _Judging) -> dict[str, Any]:
    row, paper = j.row, j.paper
    if row["sula_mae"] is None:
        return _not_measured("sula")
    rho, p_rho = row["sula_spearman_pc1_h_bayes"], row["sula_spearman_p"]
    r = _Reading("sula", f"|rho(PC1, H_Bayes)| {f(abs(rho) if rho is not None else None, '.2f')}; rho(k, PC1) "
                         f"{f(row['sula_rho_k_pc1'], '+.2f')}; MAE {f(row['sula_mae'], '.3f')} bits",
                 rho is not None and abs(rho) >= SULA_RHO and p_rho is not None and p_rho < 0.01,
                 f"MAE {paper_text(paper.get('sula_mae'), share=False)} bits" if paper.get("sula_mae") else "-")
    ok, why = calibrated(row)
    if not ok:  # not beaten: does not hold
        return r.claim(None, f"the entropy does not read the labels: {why}", j.on)
    if not j.controls:
        return r.no_control()
    d = sula_differences(j.doc, j.controls, j.n_boot)
    if d is None or any(v["ci"] is None for v in d.values()) or len(d) < 3:
        return r.untestable("the control's SULA prompts or its shuffled and label-ablation conditions are missing",
                            j.on)
    beaten = all(v["ci"][0] > j.thresholds["control_rho"] for v in d.values())
    names = {"within_k": "within-k rho(PC1, -H_Bayes)", "shuffled": "separation from shuffled",
             "ablation_labels": "separation from label ablation"}
    text = "; ".join(f"{names[k]} {f(v['trained'], '+.2f')} vs control {f(v['control'], '+.2f')} "
                     f"[{f(v['ci'][0], '+.2f')}, {f(v['ci'][1], '+.2f')}]" for k, v in d.items())
    return r.claim(beaten, f"{why}; {text}", j.on, differences=d)


def _entropy_axis(j: _Judging) -> dict[str, Any]:
    row = j.row
    if row["iv_true_dmae"] is None:
        return _not_measured("entropy_axis")
    tg = row["iv_true_dgeometry"]
    r = _Reading("entropy_axis", f"layers {row['iv_layers']}: Δcorr downstream true {f(tg, '+.3f')}; ΔMAE true "
                                 f"{f(row['iv_true_dmae'], '+.4f')} bits",
                 tg is not None and tg <= -GEOMETRY_DROP and abs(row["iv_true_dmae"]) <= CALIBRATION_TOLERANCE,
                 paper_text(j.paper.get("entropy_axis")))
    ok, why = calibrated(row)
    if not ok:
        return r.untestable(f"the model is not calibrated beyond the best constant predictor ({why}): cutting its "
                            "entropy axis cannot show that calibration survives")
    dist = [v for v in (row.get("iv_random_dgeometry_all") or []) if v is not None]
    if tg is None or not dist:
        return r.untestable("no random-axis distribution at a layer set with layers downstream (n_random_axes = 0, "
                            "or every layer set ends at the last layer)")
    q = float(np.mean(np.asarray(dist) <= tg))
    text = (f"true cut at quantile {q:.2f} of {len(dist)} random cuts (Δcorr {f(float(np.min(dist)), '+.3f')} to "
            f"{f(float(np.max(dist)), '+.3f')})")
    return r.claim(q < RANDOM_AXIS_QUANTILE, text, f"{len(dist)} random axes", quantile=q)


#: one rule per claim of :data:`CLAIMS`, in its order
_RULES = (_value_manifold, _key_orthogonality, _focusing, _domain_restriction, _sula, _entropy_axis)


def judge(doc: dict, controls: list[dict]) -> list[dict[str, Any]]:
    """Every claim of :data:`CLAIMS` for one model's ``llm.json`` (``doc``) against its controls'."""
    j = _Judging.of(doc, controls)
    return [rule(j) for rule in _RULES]
