"""What a comparison of language models runs: its models, analyses and options, validated whole
before anything is written.

A comparison is given on the command line (``windtunnel llm A B C --out DIR``) or as a JSON file
(:class:`CompareConfig`), shipped (``src/windtunnel/llm/configs``: ``paper3``, ``paper3-offline``)
or a user's own: ``name``, ``description``, ``analyses``, ``options`` (every model's),
``resources`` (what one model's Ray task asks for) and ``models``. Each model (:class:`ModelEntry`)
is exactly one of: ``model`` (a hub id, a local folder or a ``.gguf`` file), ``package_file`` (a
file inside an installed Python package, e.g. a GGUF shipped on the package index, with an
``install`` hint) or ``random`` (a tiny random-weight model, :class:`TinySpec`, built into
``DIR/models/``). A model's options are the comparison's ``options``, then the command line's,
then its own (the most specific wins). :func:`plan` resolves every model and checks them: an
unknown path or package, two entries for the same model or the same name, an unknown analysis or
option all raise :class:`ConfigError` naming the entry. An example file: docs/llm.md, "Several
models side by side: a comparison".
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from windtunnel.config import ConfigError, StrictConfig, json_names
from windtunnel.llm.config import LLMOptions, build_options
from windtunnel.llm.tiny import FAMILIES, GQA_FAMILIES

MANIFEST = "compare.json"


class TinySpec(StrictConfig):
    """A tiny random-weight model (:mod:`windtunnel.llm.tiny`)."""

    family: Literal[tuple(FAMILIES)] = Field(description="transformers family of the model")
    n_layers: int = Field(4, ge=1, le=48)
    d_model: int = Field(64, ge=8, le=4096)
    n_heads: int = Field(4, ge=1, le=64)
    n_kv_heads: int | None = Field(None, ge=1, description="key/value heads (grouped-query families); none = n_heads")
    sliding_window: int | None = Field(None, ge=1, description="mistral only")
    seed: int = Field(0, ge=0, description="torch seed of the random weights")

    @model_validator(mode="after")
    def _check(self):
        if self.d_model % self.n_heads:
            raise ValueError("d_model must be a multiple of n_heads")
        if self.n_kv_heads is not None and (self.family not in GQA_FAMILIES or self.n_heads % self.n_kv_heads):
            raise ValueError(f"n_kv_heads needs a grouped-query family ({', '.join(GQA_FAMILIES)}) and must divide n_heads")
        if self.sliding_window is not None and self.family != "mistral":
            raise ValueError("sliding_window needs the mistral family")
        return self


class ModelEntry(StrictConfig):
    model: str | None = Field(None, description="hub id, local folder or .gguf file")
    package_file: str | None = Field(None, description="PACKAGE/PATH: a file inside an installed Python package")
    install: str | None = Field(None, description="how to install package_file's package (shown when it is missing)")
    random: TinySpec | None = Field(None, description="a tiny random-weight model built for the comparison")
    name: str | None = Field(None, description="label in tables and the model's folder name (default: from the model)")
    family: str | None = Field(None, description="family for the scaling plots (default: the name without its size)")
    options: dict[str, Any] = Field(default_factory=dict, description="this model's options (see docs/llm.md)")

    @model_validator(mode="after")
    def _one_source(self):
        given = [k for k in ("model", "package_file", "random") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of model, package_file and random")
        return self


class Resources(StrictConfig):
    num_cpus: float | None = Field(None, ge=0, description="CPUs of one model's Ray task (none: Ray's default, 1)")
    num_gpus: float = Field(0, ge=0, description="GPUs of one model's Ray task")


class CompareConfig(StrictConfig):
    """A comparison of language models (`windtunnel llm --config`): the same analyses, with the
    same options, run on every model, each in its own resumable folder, then tabled side by side."""

    name: str = Field("llm", description="name of the comparison")
    description: str = ""
    analyses: list[str] | str | None = Field(None, description="analyses run on every model (none or all: all)")
    options: dict[str, Any] = Field(default_factory=dict, description="options of every model")
    resources: Resources = Field(default_factory=Resources)
    models: list[ModelEntry] = Field(default_factory=list)


@dataclass(frozen=True)
class PlannedModel:
    """One model of a comparison, resolved: ``source`` is what ``run_llm`` loads (for a random
    model, the folder it is built in), ``folder`` its output folder's name."""

    name: str
    folder: str
    source: str
    kind: str  # hub | folder | gguf | package | random
    family: str
    options: LLMOptions
    random: dict[str, Any] | None = None

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "folder": self.folder, "source": self.source, "kind": self.kind, "family": self.family,
                "random": self.random, "options": self.options.model_dump(mode="json")}


def shipped_dir():
    return resources.files("windtunnel") / "llm" / "configs"


def config_names() -> list[str]:
    return json_names(shipped_dir())


def load_config(name_or_path: str | Path) -> CompareConfig:
    """A shipped comparison by name (``paper3``, ``paper3-offline``) or a JSON file by path."""
    p = Path(name_or_path)
    if not p.is_file():
        shipped = shipped_dir() / f"{name_or_path}.json"
        if not shipped.is_file():
            raise ConfigError(f"no comparison '{name_or_path}': give a JSON file or one of {', '.join(config_names())}")
        p = shipped
    try:
        doc = json.loads(p.read_text())
    except ValueError as exc:
        raise ConfigError(f"comparison {p}: not JSON ({exc})") from None
    return CompareConfig.build({k: v for k, v in doc.items() if not k.startswith("_")}, where=f"comparison {p}")


def _looks_like_path(s: str) -> bool:
    return s.startswith(("/", "./", "../", "~")) or s.count("/") > 1 or s.endswith(".gguf") or Path(s).exists()


_SIZE = re.compile(r"[-_.]?\d+(\.\d+)?[mMbBkK]\b.*$")


def family_of(name: str) -> str:
    """A model's family for the scaling plots: its name without the size and what follows
    (``pythia-410m`` -> ``pythia``, ``SmolLM2-135M-Instruct`` -> ``SmolLM2``)."""
    base = name.rstrip("/").split("/")[-1]
    return _SIZE.sub("", base) or base


def _family(entry: ModelEntry, name: str) -> str:
    return f"random-{entry.random.family}" if entry.random is not None else family_of(name)


def _source(entry: ModelEntry, i: int, out: Path) -> tuple[str, str, str]:
    """(what run_llm loads, its kind, the default name) of an entry, checked to exist."""
    where = f"model {i + 1}"
    if entry.random is not None:
        r = entry.random
        kv = r.n_kv_heads or r.n_heads
        kind = "MHA" if kv == r.n_heads else "MQA" if kv == 1 else f"GQA{r.n_heads}-{kv}"
        name = f"random-{r.family}-{kind}" + (f"-SW{r.sliding_window}" if r.sliding_window else "") + f"-L{r.n_layers}"
        return str(out / "models" / name), "random", name
    if entry.package_file is not None:
        package, _, rel = entry.package_file.partition("/")
        spec = importlib.util.find_spec(package) if package.isidentifier() else None
        hint = f"; install it with: {entry.install}" if entry.install else ""
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError(f"{where}: package '{package}' of package_file '{entry.package_file}' is not installed{hint}")
        path = Path(list(spec.submodule_search_locations)[0]) / rel
        if not rel or not path.is_file():
            raise ConfigError(f"{where}: package '{package}' has no file '{rel}'{hint}")
        return str(path), "package", path.name.removesuffix(".gguf")
    m = entry.model
    p = Path(m).expanduser()
    if _looks_like_path(m):
        if not p.exists():
            raise ConfigError(f"{where}: no such model path '{m}' (a local folder or .gguf file; a hub id is ORG/NAME)")
        return str(p.resolve()), "gguf" if m.endswith(".gguf") else "folder", p.name.removesuffix(".gguf")
    return m, "hub", m.split("/")[-1]


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name).strip(".") or "model"


def plan(config: CompareConfig, out: Path | str, cli_options: dict[str, Any] | None = None,
         extra_models: list[str] = ()) -> tuple[list[str], list[PlannedModel]]:
    """The analyses and the resolved models of ``config`` (plus ``extra_models`` from the command
    line), every one checked; nothing is written."""
    from windtunnel.llm.run import resolve_analyses

    out = Path(out)
    analyses = resolve_analyses(config.analyses)
    entries = list(config.models) + [ModelEntry(model=m) for m in extra_models]
    if not entries:
        raise ConfigError("give at least one model (windtunnel llm MODEL [MODEL ...]) or a comparison with --config")
    planned: list[PlannedModel] = []
    seen: dict[tuple, int] = {}
    for i, e in enumerate(entries):
        source, kind, default = _source(e, i, out)
        name = e.name or default
        opts = build_options({**config.options, **(cli_options or {}), **e.options})
        key = (kind, source, opts.revision, opts.gguf_file) if kind != "random" else ("random", json.dumps(e.random.model_dump()))
        if key in seen:
            raise ConfigError(f"model {i + 1} ('{name}') is the same model as model {seen[key] + 1}; give each model once")
        seen[key] = i
        if any(p.folder == slug(name) for p in planned):
            raise ConfigError(f"model {i + 1}: two models are named '{name}'; give one of them another \"name\"")
        planned.append(PlannedModel(name=name, folder=slug(name), source=source, kind=kind, family=e.family or _family(e, name),
                                    options=opts, random=e.random.model_dump() if e.random else None))
    return analyses, planned
