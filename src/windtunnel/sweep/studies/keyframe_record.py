"""What a key-frame record keeps of one run: its config, its evaluation and the key-frame, ablation
and dynamics numbers the study's page uses (``results/keyframe/<job>.json``, with the provenance
that :mod:`windtunnel.sweep.studies.keyframe` adds)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from windtunnel.sweep.studies.keyframe_plan import PROBE, VARIANTS


def layer_means(variant: dict[str, Any]) -> dict[str, Any]:
    """One key-frame variant's numbers, every layer's mean (trained, random, step 0) and layer 0's detail."""
    layers = variant["layers"]
    return {"mean": [x["mean"] for x in layers], "random": [x["random_mean"] for x in layers],
            "init": [x["init_mean"] for x in layers], "per_head_layer0": layers[0]["per_head"],
            "p_below_random_layer0": layers[0]["test_vs_random"]["p"],
            "p_two_sided_layer0": layers[0]["test_vs_random"]["p_two_sided"],
            **({"random_closed_form": variant["random_closed_form"]} if "random_closed_form" in variant else {})}


def resolved_model(cfg: dict[str, Any]) -> dict[str, Any]:
    """The run's model config with every default filled in (the head, norm, biases and init a
    cell really had, whatever its model_params left out)."""
    from windtunnel.models import model_class
    from windtunnel.tasks import make_task

    spec = make_task(cfg["task"], cfg["task_params"]).spec
    return model_class(cfg["model"]).Config.build(cfg["model_params"]).resolve(spec).model_dump(mode="json")


def _ablation(abl: dict[str, Any]) -> dict[str, Any]:
    heads = sorted(abl["heads"], key=lambda h: -h["delta_entropy_error"])
    return {"baseline_entropy_error": abl["baseline"]["entropy_error"], "frame_head": abl["frame_head"],
            "heads": [{k: h[k] for k in ("name", "delta_entropy_error", "delta_lo", "delta_hi", "ratio")} for h in heads],
            "blocks": [{k: b[k] for k in ("name", "ratio")} for b in abl["blocks"]]}


def _dynamics(dyn: dict[str, Any]) -> dict[str, Any]:
    rows = dyn["checkpoints"]
    return {"steps": dyn["steps"],
            "tokens_raw_layer0": [r["key_frame_layer0"] for r in rows],
            "tokens_raw_per_layer": [r["key_frame_per_layer"] for r in rows],
            **{f"{v}_layer0": [r["key_frame_variants_layer0"][v] for r in rows]
               for v in VARIANTS[1:] if v in rows[0]["key_frame_variants_layer0"]},
            "entropy_error": [r["entropy_error"] for r in rows]}


def summarise(run_dir: Path, diag: dict[str, Any], **meta: Any) -> dict[str, Any]:
    """What the page uses of one run (its folder and its diagnostics), with ``meta`` (job, cell,
    budget, seed, factor, what; a ``probe`` other than the study's)."""
    cfg = json.loads((Path(run_dir) / "config.json").read_text())
    ev = json.loads((Path(run_dir) / "eval.json").read_text())
    main = ev["lengths"][str(ev["main_length"])]
    res = diag["results"]
    kf = res["key_frame"]["variants"]
    return {
        "model": cfg["model"], "format": cfg["task_params"].get("format", "sepvocab"), "task_params": cfg["task_params"],
        "model_config": resolved_model(cfg), "train": cfg["train"],
        "steps": cfg["train"]["steps"], "lr": cfg["train"]["lr"], "n_params": ev["n_params"],
        "train_seconds": ev["train_seconds"],
        "entropy_error": main["entropy_error_mean_abs"], "kl_bayes_model": main["kl_bayes_model"],
        "key_frame": {v: layer_means(kf[v]) for v in VARIANTS if v in kf},  # value_: the sep-vocab's value tokens
        "ablation": _ablation(res["ablation"]),
        "dynamics": _dynamics(res["dynamics"]),
        "probe": PROBE, **meta,
    }
