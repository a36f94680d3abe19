"""The session the LLM analyses share: one loaded model, the options, and the prompt passes.

A :class:`Session` holds the loaded model, the options, the captures shared between analyses
(the mixed pool's pass feeds the value manifold, attention focusing, activation keys and domain
restriction; the SULA main pass feeds SULA and the interventions), so no prompt set is run
twice, and the results of the analyses that have run (domain restriction reuses the value
manifold's).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from windtunnel.config import ConfigError
from windtunnel.llm.capture import Batching, Keep, PromptCapture, ValueFn, run_prompts
from windtunnel.llm.config import LLMOptions
from windtunnel.llm.loading import LoadedModel
from windtunnel.llm.prompts import load_pool, stratified_select


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
    results: dict[str, dict] = field(default_factory=dict)

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

    @property
    def batching(self) -> Batching:
        """How every pass of the session feeds its prompts (the options' ``batch_size``, ``add_bos``
        and ``max_prompt_tokens``)."""
        return Batching(self.opts.batch_size, self.opts.add_bos, self.opts.max_prompt_tokens)

    def run(self, prompts, keep: Keep, interventions: dict[int, ValueFn] | None = None) -> PromptCapture:
        """One pass over ``prompts`` (timed and counted) keeping what ``keep`` says."""
        t = time.perf_counter()
        cap = run_prompts(self.lm, prompts, keep, self.batching, interventions=interventions)
        self.timing["forward_s"] = self.timing.get("forward_s", 0.0) + time.perf_counter() - t
        self.n_prompts_run += len(prompts)
        return cap

    def pool(self, which: str) -> tuple[dict, PromptCapture]:
        """The pool and one pass over all its candidates (values at the manifold layers; for the
        mixed pool also keys at every layer and attention, when those analyses run)."""
        if which not in self.captures:
            pool = load_pool(which, getattr(self.opts, f"{which}_pool"))
            mixed = which == "mixed"
            keep = Keep(value_layers=self.manifold_layers(),
                        key_layers=list(range(self.L)) if mixed and "key_orthogonality" in self.analyses else (),
                        attention=mixed and "attention_focusing" in self.analyses,
                        attention_positions=self.opts.attention_positions)
            cap = self.run([p["text"] for p in pool["prompts"]], keep)
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


def min_mean_max(x) -> dict:
    """Mean, min and max of ``x`` as plain floats."""
    x = np.asarray(x, dtype=np.float64)
    return {"mean": float(x.mean()), "min": float(x.min()), "max": float(x.max())}


def strip_boot(d):
    """Drop the bootstrap arrays kept for differences (``_boot``) before writing JSON."""
    if isinstance(d, dict):
        return {k: strip_boot(v) for k, v in d.items() if k != "_boot"}
    return d
