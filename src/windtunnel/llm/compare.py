"""The comparison of several language models, written from their ``llm.json`` files alone.

:func:`write_comparison` reads a comparison folder (``compare.json`` and one folder per model, see
:mod:`windtunnel.sweep.llm_compare`) and writes:

- ``table.csv``: one row per model: its architecture (attention type, key/value-head ratio,
  sliding window, experts, parameters), its cost (seconds, peak memory against the estimate), the
  headline numbers of every analysis with their intervals and nulls
  (:func:`~windtunnel.llm.headline.headline`), the paper's values beside them, and the verdict of
  every Paper III claim (:mod:`windtunnel.llm.claims`);
- ``summary.json``: the same rows, each claim's verdict with its measured value, the comparison
  against the model's control (its ``control/`` folders) and the paper's value, the dissociation
  test over the trained models (:mod:`windtunnel.llm.dissociation`; random-weight models and
  controls are never a side), the families that hold several sizes, and which models failed
  (with their errors) or are missing;
- ``summary.md`` and the figures (:mod:`windtunnel.llm.compare_plots`).

Every number comes from the per-model files; nothing is computed again from a model, so the
comparison cannot disagree with the runs. It can be rewritten at any time (``windtunnel report``
does), also while some models are still missing.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from windtunnel.config import ConfigError
from windtunnel.files import atomic_write_text, jsonable
from windtunnel.llm.claims import CLAIMS, judge, paper_entry, paper_text, paper_values
from windtunnel.llm.compare_config import MANIFEST
from windtunnel.llm.dissociation import dissociation, focusing_inputs
from windtunnel.llm.headline import curves, headline

PAPER_COLUMNS = {"paper_mixed_pc1_pc2": ("mixed_pc1_pc2", True), "paper_math_pc1_pc2": ("math_pc1_pc2", True),
                 "paper_key_orth_early": ("key_orth_early", False), "paper_focusing": ("focusing", True),
                 "paper_sula_mae": ("sula_mae", False), "paper_sula_rho_k_pc1": ("sula_rho_k_pc1", False)}


def is_comparison(folder: Path | str) -> bool:
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return False
    try:
        return json.loads(path.read_text()).get("kind") == "llm-compare"
    except ValueError:
        return False


def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except ValueError:
        return None


def read_models(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The manifest and, per model in its order, its description, status (finished, failed or
    missing), ``llm.json`` document and error."""
    if not is_comparison(out):
        raise ConfigError(f"{out} is not a comparison of language models (no {MANIFEST})")
    manifest = json.loads((out / MANIFEST).read_text())
    models = []
    for m in manifest["models"]:
        doc, failed = _load(out / m["folder"] / "llm.json"), _load(out / m["folder"] / "failed.json")
        status = "finished" if doc else "failed" if failed else "missing"
        models.append({**m, "status": status, "doc": doc, "error": (failed or {}).get("error") if not doc else None})
        if doc:
            models[-1]["controls"] = read_model_controls(out, models[-1])
    return manifest, models


def read_model_controls(out: Path, m: dict[str, Any]) -> list[dict]:
    """The finished controls of a finished model (:mod:`windtunnel.llm.control`), read from its folder."""
    from windtunnel.llm.config import LLMOptions
    from windtunnel.llm.control import finished_controls

    doc = m["doc"]
    return finished_controls(out / m["folder"], doc["analyses"], LLMOptions.build(doc["options"])) or []


def model_row(m: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The table row of one model of :func:`read_models` (cells empty unless finished) and its
    claims (:func:`~windtunnel.llm.claims.judge`, against the controls in ``m["controls"]``)."""
    row: dict[str, Any] = {"model": m["name"], "family": m["family"], "source": m["kind"],
                           "random_weights": m["kind"] == "random", "status": m["status"], "error": m["error"]}
    if m["status"] != "finished":
        return row, []
    doc = m["doc"]
    row.update(headline(doc))
    paper = paper_entry(doc["model"]["name"]) or {}
    for col, (key, share) in PAPER_COLUMNS.items():
        row[col] = paper_text(paper.get(key), share) if key in paper else None
    claims = judge(doc, m.get("controls") or [])
    row.update({f"claim_{c['claim']}": c["verdict"] for c in claims})
    row["control"] = claims[0]["rests_on"] if claims else None
    row["control_seconds"] = sum(c.get("timing", {}).get("total_s") or 0 for c in m.get("controls") or []) or None
    return row, claims


def scaling_families(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Families with at least two finished models of different sizes: family -> models by size."""
    fams: dict[str, list[dict]] = {}
    for r in rows:
        if r["status"] == "finished":
            fams.setdefault(r["family"], []).append(r)
    return {f: [r["model"] for r in sorted(rs, key=lambda r: r["n_parameters"])] for f, rs in fams.items()
            if len({r["n_parameters"] for r in rs}) >= 2}


def _csv(rows: list[dict[str, Any]]) -> str:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else f"{r[k]:.6g}" if isinstance(r[k], float) else r[k]) for k in cols})
    return buf.getvalue()


def build_summary(manifest: dict[str, Any], models: list[dict[str, Any]]) -> dict[str, Any]:
    """``summary.json`` of a comparison (without the figures' names)."""
    judged = [model_row(m) for m in models]
    rows = [row for row, _ in judged]
    done = [(m, row, claims) for m, (row, claims) in zip(models, judged) if m["status"] == "finished"]
    inputs = [x for m, row, _ in done if m["kind"] != "random"
              and (x := focusing_inputs(m["name"], row["group"], m["doc"])) is not None]
    cfg = manifest["config"]
    return {
        "kind": "llm-compare-summary", "name": cfg["name"], "description": cfg.get("description", ""),
        "analyses": manifest["analyses"], "n_models": len(models), "finished": [m["name"] for m, _, _ in done],
        "failed": {m["name"]: m["error"] for m in models if m["status"] == "failed"},
        "missing": [m["name"] for m in models if m["status"] == "missing"],
        "rows": rows,
        "claims": {m["name"]: claims for m, _, claims in done},
        "claim_text": paper_values()["claims"], "claim_order": list(CLAIMS),
        "paper_source": paper_values()["_source"],
        "dissociation": dissociation(inputs),
        "scaling": scaling_families(rows),
    }


def write_comparison(out: Path | str) -> dict[str, Any]:
    """Write ``table.csv``, ``summary.json``, ``summary.md`` and the figures of the comparison in
    ``out``; returns the summary."""
    from windtunnel.llm.compare_md import summary_markdown
    from windtunnel.llm.compare_plots import plot_comparison

    out = Path(out)
    manifest, models = read_models(out)
    summary = build_summary(manifest, models)
    done = [m for m in models if m["status"] == "finished"]
    summary["figures"] = [p.name for p in plot_comparison(
        {m["name"]: curves(m["doc"]) for m in done}, summary, out)]
    summary = jsonable(summary)
    atomic_write_text(out / "table.csv", _csv(summary["rows"]))
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=1, allow_nan=False))
    atomic_write_text(out / "summary.md", summary_markdown(summary))
    return summary
