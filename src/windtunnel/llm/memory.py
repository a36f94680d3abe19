"""Memory before a model loads, and the peak while it runs.

:func:`check_memory` reads the model's config (not its weights), counts its parameters exactly by
building it on PyTorch's ``meta`` device (no memory is allocated), and estimates what loading and
running it needs in the chosen dtype:

- the weights: parameters x bytes per parameter (float32 4, bfloat16 / float16 2);
- loading: a GGUF file is dequantized by transformers into float32 arrays before the model is
  filled, so its load holds about 4 bytes per parameter more; a model for a GPU is loaded on the
  CPU first and then moved (``load_model``), so the CPU holds its weights once;
- a second copy of the weights when ``init_revision`` loads a checkpoint at initialisation;
- activations of one batch, in float32: one layer's eager attention matrices (batch x query heads
  x T x T, T = ``max_prompt_tokens``, an upper bound) and the hidden states (batch x T x d_model x 8).

It compares that with what the machine has available (Linux ``MemAvailable``, the cgroup's limit,
each GPU's free memory, or ``memory_limit_gib``) and, when it does not fit, raises a
:class:`MemoryRefused` naming what the model needs, what the machine has, and the options that
would fit (a smaller dtype, ``device_map``), before anything is loaded or written.
:class:`PeakMemory` samples this process's resident memory (and the GPU's peak allocation) while a
model runs, so a comparison records the peak of each model, not of the process so far.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from windtunnel.config import ConfigError

GIB = 1024 ** 3
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
#: a model fits when its estimate is below this fraction of what is available (the rest: margin)
HEADROOM = 0.9


class MemoryRefused(ConfigError):
    """The model would not fit in this machine's memory with these options."""


def gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


# ---------------------------------------------------------------------------------------
# What the machine has
# ---------------------------------------------------------------------------------------
def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _cgroup_room() -> int | None:
    """Bytes left under this process's cgroup (v2) memory limit, when it has one."""
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
    except (OSError, ValueError):
        return None
    return None if limit == "max" else max(0, int(limit) - used)


def cpu_available() -> int | None:
    """Bytes of CPU memory this process may still take (None: unknown, e.g. not Linux)."""
    found = [x for x in (_meminfo_available(), _cgroup_room()) if x is not None]
    return min(found) if found else None


def gpu_free() -> list[int]:
    import torch

    if not torch.cuda.is_available():
        return []
    return [int(torch.cuda.mem_get_info(i)[0]) for i in range(torch.cuda.device_count())]


def current_rss() -> int | None:
    """This process's resident memory in bytes (Linux), else None."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


# ---------------------------------------------------------------------------------------
# What the model needs
# ---------------------------------------------------------------------------------------
def read_config(name: str, src: dict[str, Any], trust_remote_code: bool, revision: str | None):
    """The model's transformers config from a folder, a hub id or a GGUF file's metadata."""
    import transformers

    kw: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if revision is not None:
        kw["revision"] = revision
    if src["gguf_file"]:
        kw["gguf_file"] = src["gguf_file"]
    try:
        return transformers.AutoConfig.from_pretrained(src["path"], **kw)
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"could not load model '{name}' ({src['kind']}"
                          + (f", revision {revision}" if revision else "") + f"): its config: {exc}") from None


def count_parameters(config, trust_remote_code: bool = False) -> int:
    """Exact parameter count of the model ``config`` describes, built on the meta device (tied
    weights counted once)."""
    import torch
    import transformers

    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)
    return int(sum(p.numel() for p in model.parameters()))


def _cfg_int(config, *names: str, default: int = 0) -> int:
    for n in names:
        v = getattr(config, n, None)
        if isinstance(v, int) and v > 0:
            return v
    return default


@dataclass(frozen=True)
class Workload:
    """What a run loads besides the weights and what it runs: a GGUF file (dequantized through
    float32), a second copy of the weights (``init_revision``), batches of ``batch_size`` prompts
    of up to ``max_tokens`` tokens."""

    gguf: bool
    second_copy: bool
    batch_size: int
    max_tokens: int


def estimate(config, n_params: int, dtype: str, work: Workload) -> dict[str, Any]:
    """Bytes needed to load and run a model of ``n_params`` parameters in ``dtype`` (see the module doc)."""
    weights = n_params * DTYPE_BYTES[dtype]
    heads = _cfg_int(config, "num_attention_heads", "n_head", "num_heads", default=1)
    d_model = _cfg_int(config, "hidden_size", "n_embd", "d_model", default=1)
    batch_size, max_tokens, second_copy = work.batch_size, work.max_tokens, work.second_copy
    activations = batch_size * heads * max_tokens ** 2 * 4 + batch_size * max_tokens * d_model * 4 * 8
    load_extra = n_params * 4 if work.gguf else 0
    copies = weights * (2 if second_copy else 1)
    return {"n_parameters": n_params, "dtype": dtype, "weights": weights, "second_copy": weights if second_copy else 0,
            "load_extra": load_extra, "activations": activations, "total": copies + load_extra + activations}


def _need_where(est: dict[str, Any], device: str, device_map: str | None) -> dict[str, int]:
    """Bytes needed on the CPU and on the GPU (one, or all of them together with a device map)."""
    run = est["weights"] + est["second_copy"] + est["activations"]
    if device_map is not None:
        return {"any": run + est["load_extra"]}
    if device.startswith("cuda"):
        return {"cpu": est["weights"] + est["load_extra"], "gpu": run}
    return {"cpu": est["total"]}


def _have_where(device: str, device_map: str | None, limit: int | None) -> dict[str, int | None]:
    cpu = limit if limit is not None else cpu_available()
    gpus = gpu_free()
    if device_map is not None:
        return {"any": None if cpu is None else cpu + sum(gpus)}
    if device.startswith("cuda"):
        idx = int(device.split(":")[1]) if ":" in device else 0
        return {"cpu": cpu, "gpu": limit if limit is not None else (gpus[idx] if idx < len(gpus) else 0)}
    return {"cpu": cpu}


def fits(need: dict[str, int], have: dict[str, int | None]) -> bool:
    return all(have.get(k) is None or need[k] <= HEADROOM * have[k] for k in need)


def check_memory(name: str, src: dict[str, Any], opts, device: str, dtype: str, config=None) -> dict[str, Any]:
    """The estimate for ``name`` with ``opts`` (an :class:`~windtunnel.llm.config.LLMOptions`) on
    ``device`` in ``dtype``, checked against the machine: returned when it fits (or when the check
    is off), else :class:`MemoryRefused` with what would fit."""
    config = config if config is not None else read_config(name, src, opts.trust_remote_code, opts.revision)
    n = count_parameters(config, opts.trust_remote_code)
    limit = None if opts.memory_limit_gib is None else int(opts.memory_limit_gib * GIB)

    work = Workload(gguf=bool(src["gguf_file"]), second_copy=opts.init_revision is not None,
                    batch_size=opts.batch_size, max_tokens=opts.max_prompt_tokens)

    def est_for(dt: str) -> dict[str, Any]:
        return estimate(config, n, dt, work)

    est = est_for(dtype)
    need, have = _need_where(est, device, opts.device_map), _have_where(device, opts.device_map, limit)
    record = {"estimate": est, "need": need, "available": have, "limit_gib": opts.memory_limit_gib,
              "checked": opts.memory_check, "fits": fits(need, have)}
    if record["fits"] or not opts.memory_check:
        return record
    options = []
    for dt in ("bfloat16", "float16"):
        if DTYPE_BYTES[dt] < DTYPE_BYTES[dtype]:
            e = est_for(dt)
            if fits(_need_where(e, device, opts.device_map), have):
                options.append(f"--dtype {dt} (about {gib(e['total'])}; bfloat16 on a CPU runs, slowly)")
                break
    if opts.device_map is None and gpu_free():
        e = est_for("bfloat16")
        if fits(_need_where(e, device, "auto"), _have_where(device, "auto", limit)):
            options.append(f"--device-map auto --dtype bfloat16 (spreads {gib(e['weights'])} of weights over "
                           f"{len(gpu_free())} GPU(s) and the CPU)")
    where = ", ".join(f"{k} {gib(need[k])} needed, {'unknown' if have[k] is None else gib(have[k])} available"
                      for k in need)
    parts = [f"{gib(est['weights'])} of weights ({n / 1e6:.1f}M parameters x {DTYPE_BYTES[dtype]} bytes in {dtype})"]
    if est["load_extra"]:
        parts.append(f"{gib(est['load_extra'])} while the GGUF file is dequantized")
    if est["second_copy"]:
        parts.append(f"{gib(est['second_copy'])} for the init_revision copy")
    parts.append(f"{gib(est['activations'])} of activations (batch {opts.batch_size}, {opts.max_prompt_tokens} tokens)")
    fix = ("options that would fit: " + "; ".join(options)) if options else (
        "no dtype or device map fits here: use a machine with more memory, or lower --batch-size / "
        "--max-prompt-tokens if the activations dominate")
    raise MemoryRefused(f"model '{name}' needs about {gib(est['total'])} ({' + '.join(parts)}); this machine: {where}"
                        + (f" (memory_limit_gib {opts.memory_limit_gib})" if limit is not None else "")
                        + f". Nothing was loaded or written; {fix}. The check is skipped with --memory-check false.")


# ---------------------------------------------------------------------------------------
# The peak while a model runs
# ---------------------------------------------------------------------------------------
class PeakMemory:
    """Sample this process's resident memory every ``interval`` seconds inside the block; after
    it, ``result()`` gives the peak and the start (MiB) and, with CUDA, the GPU's peak allocation."""

    def __init__(self, interval: float = 0.05):
        self.interval = interval
        self.start = self.peak = current_rss()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            rss = current_rss()
            if rss is not None and (self.peak is None or rss > self.peak):
                self.peak = rss

    def __enter__(self) -> PeakMemory:
        import torch

        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        self.t0 = time.perf_counter()
        if self.start is not None:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        rss = current_rss()
        if rss is not None and self.peak is not None:
            self.peak = max(self.peak, rss)

    def result(self) -> dict[str, Any]:
        import torch

        mib = 1024 ** 2
        out: dict[str, Any] = {"peak_rss_mib": None if self.peak is None else self.peak / mib,
                               "start_rss_mib": None if self.start is None else self.start / mib,
                               "rss_growth_mib": None if self.peak is None else (self.peak - self.start) / mib,
                               "sampled_every_s": self.interval}
        if torch.cuda.is_available():
            out["peak_gpu_allocated_mib"] = torch.cuda.max_memory_allocated() / mib
        return out
