"""The six Paper III analyses over one loaded model. Each returns a JSON-ready dict.

A :class:`Session` holds the loaded model, the options and the captures shared between
analyses (the mixed pool's pass feeds the value manifold, attention focusing, activation keys
and domain restriction; the SULA main pass feeds SULA and the interventions), so no prompt set
is run twice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from windtunnel.config import ConfigError
from windtunnel.stats import gaussian_abs_cosine, mean_offdiag_abs_cosine, monte_carlo_test, pca_components, spearman
from windtunnel.llm import interventions as iv
from windtunnel.llm import sula as S
from windtunnel.llm.capture import PromptCapture, run_prompts
from windtunnel.llm.config import LLMOptions
from windtunnel.llm.loading import LoadedModel, load_model
from windtunnel.llm.prompts import load_pool, stratified_select
from windtunnel.tasks.sula import CARRIER_WORDS
from windtunnel.llm.stats import blas1, bootstrap_mean, ci, single_threaded_blas, pca_report, pearson, variance_concentration


@dataclass
class Session:
    lm: LoadedModel
    opts: LLMOptions
    analyses: list[str]
    name: str = ""
    captures: dict[str, PromptCapture] = field(default_factory=dict)
    pools: dict[str, dict] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)
    n_prompts_run: int = 0

    @property
    def L(self) -> int:
        return self.lm.adapter.n_layers

    def manifold_layers(self) -> list[int]:
        o = self.opts.layers
        if o == "last":
            return [self.L - 1]
        if o == "all":
            return list(range(self.L))
        bad = [i for i in o if i >= self.L]
        if bad:
            raise ConfigError(f"field 'layers' = {o}: layers {bad} out of range; allowed: 0 <= layer <= {self.L - 1}, "
                              "last or all")
        return sorted(set(o) | {self.L - 1})

    def run(self, prompts, **kw) -> PromptCapture:
        t = time.perf_counter()
        cap = run_prompts(self.lm, prompts, batch_size=self.opts.batch_size, add_bos=self.opts.add_bos,
                          max_tokens=self.opts.max_prompt_tokens, **kw)
        self.timing["forward_s"] = self.timing.get("forward_s", 0.0) + time.perf_counter() - t
        self.n_prompts_run += len(prompts)
        return cap

    def pool(self, which: str) -> tuple[dict, PromptCapture]:
        """The pool and one pass over all its candidates (values at the manifold layers; for the
        mixed pool also keys at every layer and attention, when those analyses run)."""
        if which not in self.captures:
            pool = load_pool(which, getattr(self.opts, f"{which}_pool"))
            mixed = which == "mixed"
            cap = self.run([p["text"] for p in pool["prompts"]], value_layers=self.manifold_layers(),
                           key_layers=list(range(self.L)) if mixed and "key_orthogonality" in self.analyses else (),
                           attention=mixed and "attention_focusing" in self.analyses,
                           attention_positions=self.opts.attention_positions)
            self.pools[which], self.captures[which] = pool, cap
        return self.pools[which], self.captures[which]

    def selection(self, which: str) -> dict:
        pool, cap = self.pool(which)
        key = f"selection_{which}"
        if key not in self.pools:
            sel = stratified_select(cap.next_entropy, self.opts.n_quintiles, self.opts.n_per_quintile, self.opts.seed)
            if len(sel["indices"]) < 3:
                raise ConfigError(f"prompt pool '{which}' gave only {len(sel['indices'])} prompts; PCA needs at least 3")
            self.pools[key] = sel
        return self.pools[key]


def _stats(x) -> dict:
    x = np.asarray(x, dtype=np.float64)
    return {"mean": float(x.mean()), "min": float(x.min()), "max": float(x.max())}


def _selection_record(pool: dict, cap: PromptCapture, sel: dict) -> dict:
    idx = sel["indices"]
    domains = [pool["prompts"][i]["domain"] for i in idx]
    return {
        "pool": pool["source"], "pool_sha256": pool["sha256"], "n_candidates": len(pool["prompts"]),
        "n_selected": len(idx), "strata_edges_bits": sel["edges"], "shortfall_per_stratum": sel["shortfall"],
        "ids": [pool["prompts"][i]["id"] for i in idx],
        "domains": {d: domains.count(d) for d in sorted(set(domains))},
        "prompt_tokens": _stats(cap.lengths[idx]), "bos_added_fraction": float(cap.bos_added[idx].mean()),
        "next_token_entropy_bits": _stats(cap.next_entropy[idx]),
        "candidate_entropy_bits": _stats(cap.next_entropy),
    }


def _manifold(sess: Session, which: str) -> dict:
    o = sess.opts
    pool, cap = sess.pool(which)
    sel = sess.selection(which)
    idx = sel["indices"]
    h = cap.next_entropy[idx]
    layers = {}
    for i in sess.manifold_layers():
        x = cap.values[i][idx]
        layers[str(i)] = {
            "standardized": pca_report(x, h, True, o.n_bootstrap, o.bootstrap_seed, o.n_null, keep_boot=True),
            "raw": pca_report(x, h, False, o.n_bootstrap, o.bootstrap_seed, o.n_null, keep_boot=True),
            "variance_concentration": variance_concentration(x),
        }
    last = cap.values[sess.L - 1][idx]
    _, sc, _ = pca_components(last, standardize=(o.primary_pca == "standardized"), n=2)
    return {"prompt_set": which, "selection": _selection_record(pool, cap, sel), "layers": layers,
            "final_layer": sess.L - 1, "primary_pca": o.primary_pca,
            "value": "final-token value projections concatenated over key/value heads",
            "scatter": {"pc1": sc[:, 0].tolist(), "pc2": sc[:, 1].tolist() if sc.shape[1] > 1 else [],
                        "entropy_bits": h.tolist(), "domain": [pool["prompts"][i]["domain"] for i in idx]}}


def _strip_boot(d):
    if isinstance(d, dict):
        return {k: _strip_boot(v) for k, v in d.items() if k != "_boot"}
    return d


# ---------------------------------------------------------------------------------------------
# 1. Value manifold
# ---------------------------------------------------------------------------------------------
def value_manifold(sess: Session) -> dict:
    """Final-token values of the stratified mixed-domain set: standardized and raw PCA."""
    return _manifold(sess, "mixed")


# ---------------------------------------------------------------------------------------------
# 2. Key orthogonality
# ---------------------------------------------------------------------------------------------
def _key_layer_stats(ad, weights) -> list[dict]:
    out = []
    for i, w in enumerate(weights):
        per_head = np.atleast_1d(mean_offdiag_abs_cosine(w.float().cpu().numpy()))
        out.append({"layer": i, "mean": float(per_head.mean()), "median": float(np.median(per_head)),
                    "p10": float(np.quantile(per_head, 0.1)), "p90": float(np.quantile(per_head, 0.9)),
                    "per_head": per_head.tolist()})
    return out


def _init_from_config(lm: LoadedModel, seed: int) -> list[float] | None:
    """W_K drawn by the family's own initialiser (``_init_weights``) for a fresh linear of each
    layer's shape: a measured at-initialisation value when no step-0 checkpoint exists."""
    import torch

    init = getattr(lm.model, "_init_weights", None)
    if init is None:
        return None
    ad = lm.adapter
    out = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for i in range(ad.n_layers):
            o, n = ad.key_linear_shape(i)
            lin = torch.nn.Linear(n, o, bias=False)
            try:
                init(lin)
            except Exception:  # pragma: no cover - exotic initialisers
                return None
            w = ad.key_weight_from(lin.weight)
            out.append(float(np.mean(mean_offdiag_abs_cosine(w.numpy()))))
    return out


@blas1
def key_orthogonality(sess: Session) -> dict:
    """Mean |off-diagonal cosine| of the d_head columns of W_K (each in R^d_model) per
    key/value head; per layer mean, median, 10/90 percentiles; Gaussian and init baselines."""
    o, lm, ad = sess.opts, sess.lm, sess.lm.adapter
    layers = _key_layer_stats(ad, [ad.key_weight(i) for i in range(ad.n_layers)])
    means = np.array([x["mean"] for x in layers])
    # empirical Gaussian null of one head (d_head columns in R^d_model), then of a layer mean over n_kv heads
    rng = np.random.default_rng(o.seed)
    head_null = np.array([mean_offdiag_abs_cosine(rng.standard_normal((ad.head_dim, ad.d_model)))
                          for _ in range(o.n_null)])
    layer_null = rng.choice(head_null, (o.n_null, ad.n_kv_heads)).mean(1)
    for x in layers:
        x["test_vs_gaussian"] = monte_carlo_test(x["mean"], layer_null, alternative="two-sided")
    t = o.thresholds
    res = {
        "definition": "W_K columns per key/value head (weight-only; bias ignored; rotary irrelevant)",
        "d_model": ad.d_model, "d_head": ad.head_dim, "n_kv_heads": ad.n_kv_heads, "layers": layers,
        "summary": {
            "mean": float(means.mean()), "min": float(means.min()), "max": float(means.max()),
            "early_mean": float(means[: max(1, ad.n_layers // 3)].mean()),
            "fraction_layers_below_threshold": float((means < t.key_orth_max).mean()),
            "threshold": t.key_orth_max,
        },
        "null": {
            "gaussian_analytic": gaussian_abs_cosine(ad.d_model),
            "gaussian_analytic_formula": "E|cos| of two N(0, I_d_model) vectors (the columns live in R^d_model)",
            "gaussian_paper_sec45_d_head": float(np.sqrt(2 / (np.pi * ad.head_dim))),
            "gaussian_empirical": {"head_mean": float(head_null.mean()), "layer_mean": float(layer_null.mean()),
                                   "layer_q05": float(np.quantile(layer_null, 0.05)),
                                   "layer_q95": float(np.quantile(layer_null, 0.95)), "n_draws": int(o.n_null)},
        },
    }
    res["summary"]["ratio_to_gaussian"] = float(means.mean() / layer_null.mean())
    res["summary"]["fraction_layers_outside_gaussian_q05_q95"] = float(
        ((means < np.quantile(layer_null, 0.05)) | (means > np.quantile(layer_null, 0.95))).mean())
    if o.init_from_config:
        init = _init_from_config(lm, o.seed)
        if init is not None:
            res["null"]["init_from_config"] = {"per_layer": init, "mean": float(np.mean(init)),
                                               "how": "the family's _init_weights on a fresh linear of each layer's shape"}
    if o.init_revision is not None:
        init_lm = load_model(sess.name, o, revision=o.init_revision, weights_only=True)
        try:
            init_layers = _key_layer_stats(init_lm.adapter, [init_lm.adapter.key_weight(i)
                                                             for i in range(init_lm.adapter.n_layers)])
        finally:
            init_lm.close()
        m0 = np.array([x["mean"] for x in init_layers])
        res["null"]["init_revision"] = {"revision": o.init_revision, "per_layer": m0.tolist(), "mean": float(m0.mean())}
        res["summary"]["ratio_to_init_revision"] = float(means.mean() / m0.mean())
    # named alternative (the authors' analyze_icl_sula): |cos| between key/value heads' key vectors
    if "mixed" in sess.captures and sess.captures["mixed"].keys and ad.n_kv_heads > 1:
        pool, cap = sess.pool("mixed")
        idx = sess.selection("mixed")["indices"]
        act = []
        for i in range(ad.n_layers):
            k = cap.keys[i][idx].reshape(len(idx), ad.n_kv_heads, ad.head_dim)
            act.append(float(np.mean(mean_offdiag_abs_cosine(k))))
        res["activation_variant"] = {
            "definition": "final-token keys (pre-rotary), mean |cos| between the key/value heads, averaged over the "
                          "stratified mixed prompts (the authors' analyze_icl_sula variant; not the paper's definition)",
            "per_layer": act, "gaussian_null_d_head": gaussian_abs_cosine(ad.head_dim)}
    return res


# ---------------------------------------------------------------------------------------------
# 3. Attention focusing
# ---------------------------------------------------------------------------------------------
def attention_focusing(sess: Session) -> dict:
    """Per-head entropy at the final query, averaged over query heads after the entropy, per
    layer; focusing = (H_first - H_last) / H_first; normalised by log2(#attendable keys); sink mass."""
    pool, cap = sess.pool("mixed")  # forward passes with the model's own threads
    idx = sess.selection("mixed")["indices"]
    with single_threaded_blas():
        return _attention_stats(sess, cap, idx)


def _attention_stats(sess: Session, cap: PromptCapture, idx) -> dict:
    from scipy.stats import ttest_rel, wilcoxon

    o = sess.opts
    if cap.attn_entropy is None:
        raise ConfigError("attention was not captured")
    H = cap.attn_entropy[idx].mean(2)  # (N, L): mean over query heads after the entropy
    Hn = cap.attn_entropy_norm[idx].mean(2)
    sink = cap.sink_mass[idx].mean(2)
    nb, sd = o.n_bootstrap, o.bootstrap_seed
    rng = np.random.default_rng(sd)
    n = len(idx)
    boots = rng.integers(0, n, (nb, n))

    def drop(a):
        m = a.mean(0)
        return (m[0] - m[-1]) / m[0] if m[0] > 0 else float("nan")

    def drop_ci(a):
        return ci([drop(a[b]) for b in boots])

    layers = []
    for i in range(sess.L):
        m, (lo, hi) = bootstrap_mean(H[:, i], nb, sd)
        mn, (lon, hin) = bootstrap_mean(Hn[:, i], nb, sd)
        ms, (los, his) = bootstrap_mean(sink[:, i], nb, sd)
        layers.append({"layer": i, "entropy_bits": float(m), "entropy_ci": [float(lo), float(hi)],
                       "normalised": float(mn), "normalised_ci": [float(lon), float(hin)],
                       "sink_mass": float(ms), "sink_mass_ci": [float(los), float(his)],
                       "per_head_bits": cap.attn_entropy[idx][:, i].mean(0).tolist()})
    diff = H[:, 0] - H[:, -1]
    tt = ttest_rel(H[:, 0], H[:, -1]) if np.ptp(diff) > 0 else None
    try:
        wx = wilcoxon(H[:, 0], H[:, -1]) if np.any(diff != 0) else None
    except ValueError:
        wx = None
    curve = H.mean(0)
    rho, _ = spearman(np.arange(sess.L), curve)
    lengths = cap.lengths[idx]
    n_att = lengths if sess.lm.adapter.sliding_window is None else np.minimum(lengths, sess.lm.adapter.sliding_window)
    return {
        "positions": o.attention_positions, "n_prompts": n, "n_query_heads": sess.lm.adapter.n_heads,
        "prompt_tokens": _stats(lengths), "uniform_bits_mean": float(np.log2(n_att).mean()),
        "sliding_window": sess.lm.adapter.sliding_window,
        "bos_added_fraction": float(cap.bos_added[idx].mean()),
        "layers": layers,
        "focusing": {"relative_drop": drop(H), "ci": drop_ci(H),
                     "normalised_relative_drop": drop(Hn), "normalised_ci": drop_ci(Hn),
                     "first_layer_bits": float(curve[0]), "last_layer_bits": float(curve[-1]),
                     "min_layer": int(curve.argmin()), "min_layer_relative_drop": float((curve[0] - curve.min()) / curve[0])
                     if curve[0] > 0 else float("nan"),
                     "spearman_layer_entropy": rho,
                     "paired_t_p": float(tt.pvalue) if tt is not None else float("nan"),
                     "wilcoxon_p": float(wx.pvalue) if wx is not None else float("nan")},
    }


# ---------------------------------------------------------------------------------------------
# 4. Domain restriction
# ---------------------------------------------------------------------------------------------
def domain_restriction(sess: Session, mixed: dict | None = None) -> dict:
    """Stratified mixed vs mathematics-only sets: PC1, PC1+PC2, gain = math - mixed."""
    mixed = mixed or _manifold(sess, "mixed")
    math = _manifold(sess, "math")
    gains = {}
    for layer in mixed["layers"]:
        g = {}
        for space in ("standardized", "raw"):
            a, b = mixed["layers"][layer][space], math["layers"][layer][space]
            diff = b["_boot"]["pc1_pc2"] - a["_boot"]["pc1_pc2"]
            g[space] = {"pc1_pc2_gain": b["pc1_pc2"] - a["pc1_pc2"], "ci": ci(diff),
                        "pc1_gain": b["pc1"] - a["pc1"], "ci_pc1": ci(b["_boot"]["pc1"] - a["_boot"]["pc1"])}
        gains[layer] = g
    return {"mixed": mixed, "math": math, "gain": gains, "final_layer": sess.L - 1,
            "note": "restriction lowers both task heterogeneity and lexical variability (paper §6.6)"}


# ---------------------------------------------------------------------------------------------
# 5. SULA
# ---------------------------------------------------------------------------------------------
def _sula_sets(sess: Session) -> dict:
    o = sess.opts
    tok = sess.lm.tokenizer
    if o.sula_labels is not None:
        for w in o.sula_labels:
            if len(tok(" " + w, add_special_tokens=False)["input_ids"]) != 1:
                raise ConfigError(f"field 'sula_labels': ' {w}' is not a single token in this tokenizer")
        main = tuple(o.sula_labels)
        remap = tuple(S.single_token_labels(tok, o.sula_label_candidates, 2, exclude={*main, *CARRIER_WORDS}))
    else:
        # labels must not be carrier words (the CVC sweep would otherwise offer e.g. 'bad')
        four = S.single_token_labels(tok, o.sula_label_candidates, 4, exclude=set(CARRIER_WORDS))
        main, remap = tuple(four[:2]), tuple(four[2:])
    sets = S.generate(o.sula_ks, o.sula_n_per_k, o.sula_alpha, main, o.seed, o.sula_controls, remap, o.mask_token)
    return sets


def _label_ids(sess: Session, names) -> list[int]:
    return [sess.lm.tokenizer(" " + w, add_special_tokens=False)["input_ids"][0] for w in names]


def sula_capture(sess: Session) -> tuple[dict, dict[str, PromptCapture]]:
    if "sula" not in sess.captures:
        sets = _sula_sets(sess)
        caps = {}
        all_layers = "interventions" in sess.analyses
        if "sula" not in sess.analyses:  # the interventions need only the main prompts
            sets = {"main": sets["main"]}
        for name, s in sets.items():
            layers = list(range(sess.L)) if (all_layers and name == "main") else [sess.L - 1]
            caps[name] = sess.run(s.texts, value_layers=layers, label_ids=_label_ids(sess, s.labels),
                                  residual=all_layers and name == "main")
        sess.captures["sula"] = caps  # type: ignore[assignment]
        sess.pools["sula_sets"] = sets
    return sess.pools["sula_sets"], sess.captures["sula"]  # type: ignore[return-value]


def sula(sess: Session) -> dict:
    sets, caps = sula_capture(sess)  # forward passes with the model's own threads
    with single_threaded_blas():
        return _sula_stats(sess, sets, caps)


def _sula_stats(sess: Session, sets, caps) -> dict:
    o = sess.opts
    L1 = sess.L - 1
    main, cm = sets["main"], caps["main"]
    p1, hm, mass = S.model_posterior(cm.label_probs)
    std = o.sula_pca == "standardized"
    x = cm.values[L1]
    ratios, sc, _ = pca_components(x, standardize=std, n=2)
    pc1 = sc[:, 0]
    if pearson(pc1, main.h_bayes) < 0:  # orient PC1 so that it rises with H_Bayes
        pc1 = -pc1
    align = {"pca": o.sula_pca, "layer": L1, "pc1": float(ratios[0]), "pc1_pc2": float(ratios[:2].sum()),
             "pearson_pc1_h_bayes": pearson(pc1, main.h_bayes), "spearman_pc1_h_bayes": spearman(pc1, main.h_bayes)[0],
             "pearson_pc1_h_model": pearson(pc1, hm), "spearman_pc1_h_model": spearman(pc1, hm)[0],
             "orientation": "PC1 sign chosen so that corr(PC1, H_Bayes) >= 0"}
    res = {
        "labels": list(main.labels), "alpha": o.sula_alpha, "ks": list(o.sula_ks), "n_per_k": o.sula_n_per_k,
        "n_prompts": len(main.texts), "seed": o.seed, "example_prompts": {str(k): main.texts[int(np.flatnonzero(main.k == k)[0])]
                                                                         for k in o.sula_ks},
        "posterior": main.meta["posterior"],
        "h_model": "binary entropy (bits) of p(L1), p(L2) renormalised from the full-vocabulary softmax",
        "label_mass": _stats(mass),
        "calibration": S.calibration(hm, main.h_bayes, main.k, p1, main.y),
        "alignment": align,
        "trajectory": S.trajectory(pc1, main.k, o.n_bootstrap, o.bootstrap_seed),
        "prompt_tokens": _stats(cm.lengths), "bos_added_fraction": float(cm.bos_added.mean()),
        "per_prompt": {"k": main.k.tolist(), "h_bayes": main.h_bayes.tolist(), "h_model": hm.tolist(),
                       "pc1": pc1.tolist()},
    }
    # controls: one shared basis fitted on the union of all conditions' final-layer values
    if len(sets) > 1:
        names = list(sets)
        union = np.concatenate([caps[n].values[L1] for n in names])
        _, usc, _ = pca_components(union, standardize=std, n=1)
        upc = usc[:, 0]
        hs_main = np.concatenate([S.model_posterior(caps[n].label_probs)[1] for n in names])
        if pearson(upc[: len(main.texts)], hs_main[: len(main.texts)]) < 0:
            upc = -upc
        controls = {}
        start = 0
        for n in names:
            s, c = sets[n], caps[n]
            cp1, ch, cmass = S.model_posterior(c.label_probs)
            seg = upc[start:start + len(s.texts)]
            start += len(s.texts)
            controls[n] = {"labels": list(s.labels), "posterior": s.meta["posterior"],
                           "example_prompt": s.texts[int(np.argmax(s.k))],
                           "label_mass": _stats(cmass), "calibration": S.calibration(ch, s.h_bayes, s.k, cp1, s.y),
                           "shared_pc1": S.trajectory(seg, s.k, o.n_bootstrap, o.bootstrap_seed)}
        res["controls"] = controls
        res["controls_basis"] = f"PC1 ({o.sula_pca}) of the union of all conditions' layer-{L1} values"
    return res


# ---------------------------------------------------------------------------------------------
# 6. Interventions
# ---------------------------------------------------------------------------------------------
def interventions(sess: Session) -> dict:
    o = sess.opts
    ad = sess.lm.adapter
    sets, caps = sula_capture(sess)
    main, base = sets["main"], caps["main"]
    _, h0, _ = S.model_posterior(base.label_probs)
    axes = {i: iv.estimate_axis(base.values[i], h0, o.axis_space, o.axis_sign) for i in range(sess.L)}
    layer_sets = iv.check_layer_sets(o.intervention_layers or iv.default_layer_sets(sess.L), sess.L)
    base_cal = S.calibration(h0, main.h_bayes, main.k)
    base_corr = iv.axis_correlations(base.values, h0, axes, range(sess.L))
    out = {
        "axis": {"space": o.axis_space, "sign": o.axis_sign,
                 "definition": "PC1 of unperturbed SULA final-token values per layer"
                               + (" (centred raw values)" if o.axis_space == "raw" else
                                  " (standardized; mapped to raw space as u ~ D^-1 w, renormalised)"),
                 "sigma_per_layer": [axes[i].sigma for i in range(sess.L)],
                 "corr_v_u_h_model_per_layer": [axes[i].corr for i in range(sess.L)]},
        "random_axis": {"seed": f"seed + layer = {o.seed} + layer", "orthogonalised": o.random_axis_orthogonal},
        "applied_to": "value projection output, all token positions, before attention mixing",
        "layer_sets": layer_sets, "baseline": {"calibration": base_cal, "axis_corr": base_corr,
                                               "residual_pc1_abs_corr": iv.residual_pc1_corr(base.residual, h0)},
        "runs": [],
    }
    for layers in layer_sets:
        for cond in o.intervention_conditions:
            ops = iv.condition_ops(cond, layers, axes, ad.value_dim, o.seed, o.shift_sigma, o.random_axis_orthogonal)
            measured = list(range(min(layers), sess.L))
            cap = sess.run(main.texts, value_layers=measured, label_ids=_label_ids(sess, main.labels), residual=True,
                           interventions=ops)
            _, h, _ = S.model_posterior(cap.label_probs)
            cal = S.calibration(h, main.h_bayes, main.k)
            corr = iv.axis_correlations(cap.values, h, axes, measured)
            last_cut = max(layers)
            down = [corr[str(i)]["fixed_axis"] for i in measured if i > last_cut]
            down_re = [corr[str(i)]["reestimated_abs"] for i in measured if i > last_cut]
            out["runs"].append({
                "layers": layers, "condition": cond,
                "calibration": {"mae": cal["mae"], "corr": cal["corr"],
                                "per_k": {k: {"mae": v["mae"], "mean_h_model": v["mean_h_model"]}
                                          for k, v in cal["per_k"].items()}},
                "delta_mae": cal["mae"] - base_cal["mae"], "delta_corr": cal["corr"] - base_cal["corr"],
                "mean_abs_change_h_model": float(np.abs(h - h0).mean()),
                "axis_corr_at_cut": corr[str(last_cut)]["fixed_axis"],
                "axis_projection_std_ratio_at_cut": corr[str(last_cut)]["projection_std_ratio"],
                "axis_corr_at_cut_note": "post-intervention values at the cut layer (the authors' measure); for a true "
                                         "cut v.u is rounding noise by construction, reported as null (NaN)",
                "axis_corr_downstream_mean": float(np.nanmean(down)) if down else float("nan"),
                "axis_corr_downstream_reestimated_mean": float(np.nanmean(down_re)) if down_re else float("nan"),
                "axis_corr_final_layer": corr[str(sess.L - 1)]["fixed_axis"],
                "baseline_axis_corr_final_layer": base_corr[str(sess.L - 1)]["fixed_axis"],
                "residual_pc1_abs_corr": iv.residual_pc1_corr(cap.residual, h),
                "axis_corr_per_layer": corr,
            })
    return out


# ---------------------------------------------------------------------------------------------
# Criteria
# ---------------------------------------------------------------------------------------------
def criteria(results: dict, opts: LLMOptions) -> dict:
    t = opts.thresholds
    out: dict = {"thresholds": t.model_dump()}
    pca = opts.primary_pca
    vm = None
    if t.manifold_set == "mixed" and "value_manifold" in results:
        vm = results["value_manifold"]
    elif "domain_restriction" in results:
        vm = results["domain_restriction"][t.manifold_set]
    if vm is not None:
        r = vm["layers"][str(vm["final_layer"])][pca]
        out["value_manifold"] = {"pass": bool(r["pc1"] > t.manifold_pc or r["pc1_pc2"] > t.manifold_pc),
                                 "pc1": r["pc1"], "pc1_pc2": r["pc1_pc2"], "set": t.manifold_set, "pca": pca,
                                 "gaussian_null_pc1_pc2": r["null"]["gaussian"]["pc1_pc2_mean"]}
    if "key_orthogonality" in results:
        s = results["key_orthogonality"]["summary"]
        out["key_orthogonality"] = {"pass": bool(s["fraction_layers_below_threshold"] >= t.key_orth_layer_frac),
                                    "fraction_layers_below": s["fraction_layers_below_threshold"]}
    if "attention_focusing" in results:
        f = results["attention_focusing"]["focusing"]
        out["attention_focusing"] = {"pass": bool(f["relative_drop"] > t.focusing_min),
                                     "relative_drop": f["relative_drop"]}
    if "domain_restriction" in results:
        dr = results["domain_restriction"]
        g = dr["gain"][str(dr["final_layer"])][pca]
        out["domain_restriction"] = {"pass": bool(g["pc1_pc2_gain"] > t.dr_gain_min), "gain": g["pc1_pc2_gain"],
                                     "note": "derived criterion, not one of the paper's three"}
    three = [k for k in ("value_manifold", "key_orthogonality", "attention_focusing") if k in out]
    passed = sum(out[k]["pass"] for k in three)
    if len(three) < 3:
        verdict = f"incomplete ({len(three)} of the 3 paper criteria evaluated, {passed} passed)"
    elif passed == 3:
        verdict = "all three criteria met: Bayesian geometric signatures (paper §4.4)"
    elif passed == 2:
        verdict = "partial validation (2/3 criteria): preserved qualitative structure (paper §4.4)"
    else:
        verdict = f"{passed}/3 criteria met"
    out["paper_criteria_passed"] = passed
    out["verdict"] = verdict
    return out


def strip(results):
    """Drop bootstrap arrays kept for differences before writing JSON."""
    return _strip_boot(results)
