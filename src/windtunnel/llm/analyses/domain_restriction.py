"""Domain restriction: the value manifold of a mathematics-only set against the mixed set."""

from __future__ import annotations

from windtunnel.analysis import Analysis
from windtunnel.llm import plots, report
from windtunnel.llm.analyses.value_manifold import manifold
from windtunnel.llm.session import Session
from windtunnel.llm.stats import ci


def domain_restriction(sess: Session, mixed: dict | None = None) -> dict:
    """Stratified mixed vs mathematics-only sets: PC1, PC1+PC2, gain = math - mixed."""
    mixed = mixed or manifold(sess, "mixed")
    math = manifold(sess, "math")
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


def run(sess: Session) -> dict:
    """Domain restriction, reusing the value manifold's mixed set when it has run."""
    return domain_restriction(sess, sess.results.get("value_manifold"))


ANALYSIS = Analysis(name="domain_restriction", title="Domain restriction", run=run,
                    markdown=report.domain_restriction, plot=plots.domain_restriction)
