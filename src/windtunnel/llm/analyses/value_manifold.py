"""Value manifold: PCA of the final-token values of a stratified mixed-domain prompt set."""

from __future__ import annotations

from windtunnel.analysis import Analysis
from windtunnel.llm import plots, report
from windtunnel.llm.capture import PromptCapture
from windtunnel.llm.session import Session, min_mean_max
from windtunnel.llm.stats import Resampling, pca_report, variance_concentration
from windtunnel.stats import pca_components

#: added to ``bootstrap_seed`` per prompt set, so that the mixed and the math sets are resampled
#: independently (the domain-restriction gain and every difference against a control pair them)
SET_SEED_OFFSET = {"mixed": 0, "math": 1}


def selection_record(pool: dict, cap: PromptCapture, sel: dict) -> dict:
    idx = sel["indices"]
    domains = [pool["prompts"][i]["domain"] for i in idx]
    return {
        "pool": pool["source"], "pool_sha256": pool["sha256"], "n_candidates": len(pool["prompts"]),
        "n_selected": len(idx), "strata_edges_bits": sel["edges"], "shortfall_per_stratum": sel["shortfall"],
        "ids": [pool["prompts"][i]["id"] for i in idx],
        "domains": {d: domains.count(d) for d in sorted(set(domains))},
        "prompt_tokens": min_mean_max(cap.lengths[idx]), "bos_added_fraction": float(cap.bos_added[idx].mean()),
        "next_token_entropy_bits": min_mean_max(cap.next_entropy[idx]),
        "candidate_entropy_bits": min_mean_max(cap.next_entropy),
    }


def manifold(sess: Session, which: str) -> dict:
    """PCA (standardized and raw, with bootstrap and nulls) of the final-token values of the
    stratified selection from pool ``which``, at every manifold layer."""
    o = sess.opts
    pool, cap = sess.pool(which)
    sel = sess.selection(which)
    idx = sel["indices"]
    h = cap.next_entropy[idx]
    seed = o.bootstrap_seed + SET_SEED_OFFSET[which]  # each set resampled independently of the other
    resampling = Resampling(o.n_bootstrap, o.n_null, seed)
    layers = {}
    for i in sess.manifold_layers():
        x = cap.values[i][idx]
        layers[str(i)] = {
            "standardized": pca_report(x, h, True, resampling, keep_boot=True),
            "raw": pca_report(x, h, False, resampling, keep_boot=True),
            "variance_concentration": variance_concentration(x),
        }
    last = cap.values[sess.L - 1][idx]
    _, sc, _ = pca_components(last, standardize=(o.primary_pca == "standardized"), n=2)
    boot = layers[str(sess.L - 1)][o.primary_pca]["_boot"]
    return {"prompt_set": which, "selection": selection_record(pool, cap, sel), "layers": layers,
            "final_layer": sess.L - 1, "primary_pca": o.primary_pca, "bootstrap_seed": seed,
            "final_bootstrap": {k: [round(float(v), 6) for v in boot[k]] for k in ("pc1", "pc1_pc2")},
            "value": "final-token value projections concatenated over key/value heads",
            "scatter": {"pc1": sc[:, 0].tolist(), "pc2": sc[:, 1].tolist() if sc.shape[1] > 1 else [],
                        "entropy_bits": h.tolist(), "domain": [pool["prompts"][i]["domain"] for i in idx]}}


def value_manifold(sess: Session) -> dict:
    """Final-token values of the stratified mixed-domain set: standardized and raw PCA."""
    return manifold(sess, "mixed")


ANALYSIS = Analysis(name="value_manifold", title="Value manifold", run=value_manifold,
                    markdown=report.value_manifold, plot=plots.value_manifold)
