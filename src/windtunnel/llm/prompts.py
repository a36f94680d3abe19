"""Shipped prompt pools and the per-model stratified-entropy selection (Paper III §4.2).

Pools are JSON files ``{"name", "version", "description", "domains", "prompts": [{"id",
"domain", "text"}]}``. Two ship with the package (``windtunnel/data``): a mixed-domain pool
(prose, news, fiction, code, question answering, philosophy, mathematics; 214 prompts) and a
mathematics-only pool (100 prompts). A user pool in the same format replaces either.

Selection is per model: the model's own full-vocabulary next-token entropy at the final
position puts every candidate into one of ``n_quintiles`` equal-count strata, and
``n_per_quintile`` prompts are drawn from each without replacement with a seeded generator.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import numpy as np

from windtunnel.config import ConfigError

SHIPPED = {"mixed": "llm_prompts_mixed.json", "math": "llm_prompts_math.json"}


def load_pool(which: str, path: str | None = None) -> dict:
    """A prompt pool: the shipped ``mixed`` or ``math`` pool, or the JSON file at ``path``."""
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"field '{which}_pool' = {path!r}: no such file")
        text, source = p.read_text(), str(p)
    else:
        if which not in SHIPPED:
            raise ConfigError(f"unknown prompt pool '{which}'; allowed: {', '.join(SHIPPED)}")
        text = resources.files("windtunnel").joinpath("data", SHIPPED[which]).read_text(encoding="utf-8")
        source = f"windtunnel/data/{SHIPPED[which]}"
    try:
        pool = json.loads(text)
        prompts = pool["prompts"]
        assert all(isinstance(p["text"], str) and p["text"] for p in prompts)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise ConfigError(f"prompt pool {source}: expected JSON with a 'prompts' list of "
                          "{'id', 'domain', 'text'} records") from None
    for i, p in enumerate(prompts):
        p.setdefault("id", f"{which}-{i:04d}")
        p.setdefault("domain", which)
    pool["source"] = source
    pool["sha256"] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return pool


def stratified_select(entropy, n_strata: int = 5, per_stratum: int = 15, seed: int = 42) -> dict:
    """Indices of a stratified sample: equal-count entropy strata (quintiles for 5), then
    ``per_stratum`` draws without replacement from each (all of a stratum when it is smaller).

    Returns {"indices" (sorted by stratum then draw), "strata" (stratum of each selected
    prompt), "edges", "shortfall" (prompts missing per stratum)}."""
    h = np.asarray(entropy, dtype=np.float64)
    if h.ndim != 1 or h.size == 0:
        raise ValueError("entropy must be a non-empty vector")
    rng = np.random.default_rng(seed)
    edges = np.quantile(h, np.linspace(0, 1, n_strata + 1)[1:-1]) if n_strata > 1 else np.array([])
    # rank-based assignment: equal counts even with ties
    ranks = np.argsort(np.argsort(h, kind="stable"), kind="stable")
    stratum = (ranks * n_strata) // h.size
    idx, strata, shortfall = [], [], []
    for s in range(n_strata):
        members = np.flatnonzero(stratum == s)
        take = min(per_stratum, members.size)
        chosen = rng.choice(members, size=take, replace=False) if take else np.array([], dtype=int)
        idx.extend(int(i) for i in chosen)
        strata.extend([s] * take)
        shortfall.append(int(per_stratum - take))
    return {"indices": idx, "strata": strata, "edges": [float(e) for e in edges], "shortfall": shortfall}
