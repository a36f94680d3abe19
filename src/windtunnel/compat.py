"""Compatibility with what earlier versions wrote and accepted, in one place.

Each shim keeps an older spelling working (a renamed keyword or option, an old key in a file
that readers may still look for) or keeps the folder names of existing runs unchanged (a field
added to a config after folders were named by its content hash). A shim warns where it is used
(``DeprecationWarning`` in Python; the command line prints a note) and is listed in
``CHANGELOG.md``. Nothing outside this module spells out an old name.
"""

from __future__ import annotations

import copy
import importlib
import importlib.abc
import importlib.util
import inspect
import sys
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: the version that removes the deprecated names of this release
REMOVED_IN = "0.2.0"


def deprecated(old: str, new: str, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new``."""
    warnings.warn(f"{old} is deprecated; use {new}", DeprecationWarning, stacklevel=stacklevel)


# ---------------------------------------------------------------------------------------
# Content hashes: fields added after folders were named leave the old names as they were
# ---------------------------------------------------------------------------------------
def run_hash_doc(doc: dict[str, Any]) -> dict[str, Any]:
    """A run config's JSON as it is hashed: ``train.curriculum`` and ``train.cooldown`` (added
    later) are left out while unset, so the runs named before they existed keep their folder names."""
    doc = copy.deepcopy(doc)
    for later in ("curriculum", "cooldown"):
        if doc["train"].get(later, "unset") is None:
            del doc["train"][later]
    return doc


def sweep_hash_doc(doc: dict[str, Any]) -> dict[str, Any]:
    """A sweep config's JSON as it is hashed: an empty ``model_overrides`` and an unset
    ``decide_early`` (added later) are left out, so sweeps written before they existed keep their folders."""
    doc = copy.deepcopy(doc)
    for exp in doc["experiments"]:
        if not exp.get("model_overrides", True):
            del exp["model_overrides"]
    if doc.get("decide_early") is False:  # added later too
        del doc["decide_early"]
    return doc


# ---------------------------------------------------------------------------------------
# Old names still read or written
# ---------------------------------------------------------------------------------------
#: ``windtunnel tasks --json``: each record also carries its ``presets`` under their old key(s)
PRESETS_OLD_KEYS = ("profiles",)


def task_preset(preset: str | None, profile: str | None) -> str | None:
    """``make_task(..., profile=)``: the old name of ``preset=``."""
    if profile is not None:
        deprecated("make_task(profile=...)", "preset=...", stacklevel=4)
        return preset if preset is not None else profile
    return preset


@dataclass(frozen=True)
class EarlierContract:
    """What a model class keeps of the earlier model contract, read once when the class is created
    (:meth:`windtunnel.models.base.WindModel.__init_subclass__`), not on every forward pass:
    ``runs_itself`` (a ``_run(inputs, positions, capture)`` that runs the whole model) and
    ``mix_takes_capture`` (``mix(x, cache)``, called with the capture in progress). Removed in
    :data:`REMOVED_IN`, with the earlier contract."""

    runs_itself: bool = False
    mix_takes_capture: bool = False

    @classmethod
    def of(cls, model_class: type) -> EarlierContract:
        return cls(hasattr(model_class, "_run"), mix_takes_capture(model_class.mix))


def mix_takes_capture(mix: Callable[..., Any]) -> bool:
    """Whether a model's ``mix`` has the old signature ``mix(x, cache)``: it is then called with the
    capture in progress, so that its ``cache.put(name, value)`` calls keep recording (taps are the
    one capture mechanism now: docs/models.md)."""
    params = [p for p in inspect.signature(mix).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"]
    return len(params) >= 2


# ---------------------------------------------------------------------------------------
# Keywords of earlier versions
# ---------------------------------------------------------------------------------------
#: the keywords each entry point took before the Execution (``jobs`` is now ``workers``)
EXECUTION_KEYWORDS: dict[str, tuple[str, ...]] = {
    "run_sweep": ("backend", "address", "jobs", "trackers", "reuse", "progress", "log"),
    "tune": ("jobs", "log"),
    "tune_many": ("jobs", "log"),
    "compare": ("progress", "trackers"),
}


def legacy_execution(where: str, execution: Any, legacy: dict[str, Any], build: Callable[..., Any]) -> Any:
    """``execution``, or one built by ``build`` (the :class:`~windtunnel.engine.execution.Execution`
    class) from the keywords ``where`` took before it existed (:data:`EXECUTION_KEYWORDS`), with a
    deprecation warning; the keywords go in :data:`REMOVED_IN`."""
    unknown = legacy.keys() - set(EXECUTION_KEYWORDS[where])
    if unknown:
        raise TypeError(f"{where}() got unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    if not legacy:
        return execution or build()
    if execution is not None:
        raise TypeError(f"{where}(): give execution= or the keywords it replaces, not both")
    deprecated(f"{where}({'=..., '.join(legacy)}=...)", f"{where}(..., execution=Execution(...))", stacklevel=4)
    return build(**{("workers" if k == "jobs" else k): v for k, v in legacy.items() if v is not None})


def tracking_group(legacy: dict[str, Any]) -> str | None:
    """``train(tracking_group=...)``, the group now given to ``Trackers.parse``; any other keyword
    of ``legacy`` is a TypeError. Goes in :data:`REMOVED_IN`."""
    legacy = dict(legacy)
    group = legacy.pop("tracking_group", None)
    if legacy:
        raise TypeError(f"train() got unexpected keyword argument(s): {', '.join(legacy)}")
    if group is not None:
        deprecated("train(tracking_group=...)", "train(trackers=Trackers.parse(names, group=...))", stacklevel=4)
    return group


# ---------------------------------------------------------------------------------------
# Modules moved: the old import path still imports, with a warning
# ---------------------------------------------------------------------------------------
#: old module -> the module(s) that now hold its names, each old path removed in REMOVED_IN
MOVED_MODULES: dict[str, tuple[str, ...]] = {
    "windtunnel.sweep.jobs": ("windtunnel.engine.jobs",),
    "windtunnel.sweep.execution": ("windtunnel.engine.execution",),
    "windtunnel.sweep.folders": ("windtunnel.sweep.manifest", "windtunnel.engine.folders"),
    "windtunnel.sweep.tune": ("windtunnel.tune.search",),
    "windtunnel.sweep.tune_rules": ("windtunnel.tune.rules",),
    "windtunnel.sweep.tune_files": ("windtunnel.tune.outputs",),
    "windtunnel.sweep.scorecard": ("windtunnel.scorecard.score",),
    "windtunnel.sweep.scorecard_doc": ("windtunnel.scorecard.document",),
    "windtunnel.sweep.preflight": ("windtunnel.scorecard.preflight",),
    "windtunnel.sweep.reference": ("windtunnel.scorecard.reference",),
    # the LLM package's helpers named for what they hold, apart from the analyses of the same name
    "windtunnel.llm.sula": ("windtunnel.llm.sula_prompts",),
    "windtunnel.llm.interventions": ("windtunnel.llm.axis_operators",),
}


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The importer of :data:`MOVED_MODULES`' old paths: ``import windtunnel.sweep.jobs`` warns
    and gives the module that holds its names now (the very module, so its functions and classes
    are the same objects); an old module split in two gives a module whose names are looked up
    in each new one, in order."""

    def find_spec(self, name: str, path: Any = None, target: Any = None):
        return importlib.util.spec_from_loader(name, self) if name in MOVED_MODULES else None

    def create_module(self, spec):
        return None  # the default module, replaced in exec_module

    def exec_module(self, module: types.ModuleType) -> None:
        old, new = module.__name__, MOVED_MODULES[module.__name__]
        deprecated(f"the module {old}", f"{' or '.join(new)} ({old} goes in {REMOVED_IN})", stacklevel=2)
        targets = [importlib.import_module(n) for n in new]
        if len(targets) == 1:  # the import system returns what sys.modules holds once this has run
            sys.modules[old] = targets[0]
            return

        def lookup(name: str) -> Any:
            for t in targets:
                if hasattr(t, name):
                    return getattr(t, name)
            raise AttributeError(f"module {old!r} (moved to {', '.join(new)}) has no attribute {name!r}")

        module.__getattr__ = lookup


def install_moved_modules() -> None:
    """Let the old paths of :data:`MOVED_MODULES` import (once per interpreter; ``windtunnel``'s
    ``__init__`` calls it)."""
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.append(MovedModules())


# ---------------------------------------------------------------------------------------
# Issue 55, one config tree (helper wt55a): a scorecard's search settings nested, and the
# keywords grouped in small configs
# ---------------------------------------------------------------------------------------
#: a ScorecardRequest's learning-rate search settings, given flat before they were nested in its
#: ``lr_search`` (``full`` and ``halving`` were flat ``search`` values before that)
SCORECARD_SEARCH_KEYS = ("search", "lrs", "settle", "finalists")


def scorecard_search(data: Any) -> Any:
    """A ``ScorecardRequest``'s input with its search settings flat (``search``, ``lrs``, ``settle``,
    ``finalists``; the older ``full`` and ``halving`` booleans read as ``search``): moved into
    ``lr_search``, with a deprecation warning. Goes in :data:`REMOVED_IN`."""
    if not isinstance(data, dict) or not data.keys() & {*SCORECARD_SEARCH_KEYS, "full", "halving"}:
        return data
    data = dict(data)
    flat = {k: data.pop(k) for k in SCORECARD_SEARCH_KEYS if k in data}
    given = list(flat)  # the flat keys given (full and halving warn on their own)
    if {"full", "halving"} & data.keys():
        full, halving = bool(data.pop("full", False)), bool(data.pop("halving", False))
        old = "halving" if halving else "full" if full else "annealed"
        if full and halving:
            raise ValueError("full and halving: choose one search (search = full, annealed or halving)")
        if flat.get("search", old) != old:
            raise ValueError(f"search = {flat['search']!r} and the old flags full = {full}, halving = {halving} "
                             "disagree: give search alone")
        flat["search"] = old
        warnings.warn("ScorecardRequest's full and halving are deprecated: lr_search.search = 'full', 'annealed' or "
                      f"'halving' (removed in {REMOVED_IN})", DeprecationWarning, stacklevel=2)
    nested = data.get("lr_search") or {}
    nested = dict(nested.model_dump(exclude_unset=True) if hasattr(nested, "model_dump") else nested)
    both = sorted(flat.keys() & nested.keys())
    if both:
        raise ValueError(f"{', '.join(both)}: given flat and in lr_search; give lr_search alone")
    if given:
        deprecated(f"ScorecardRequest({'=..., '.join(given)}=...)", "ScorecardRequest(lr_search={"
                   + ", ".join(f"{k!r}: ..." for k in given) + f"}}) (the flat keys go in {REMOVED_IN})", stacklevel=3)
    return {**data, "lr_search": {**nested, **flat}}


def moved_to(section: str, name: str) -> property:
    """The attribute of a field moved into the nested config ``section``, read under its old name
    with a deprecation warning (``request.search``: ``request.lr_search.search``). Goes in
    :data:`REMOVED_IN`."""

    def read(self: Any) -> Any:
        cls = type(self).__name__
        deprecated(f"{cls}.{name}", f"{cls}.{section}.{name} (the old name goes in {REMOVED_IN})")
        return getattr(getattr(self, section), name)

    return property(read, doc=f"Deprecated: ``{section}.{name}``.")


#: the keywords each function took before they were grouped in one config (``legacy_group``): the
#: old names, the config's fields, or {old name: its field} where the field has another name; the
#: first is the one a value given by position in the config's place stands for
GROUPED_KEYWORDS: dict[str, tuple[str, ...] | dict[str, str]] = {
    "scorecard_sweep": ("tuned", "train_reference", "decide_early", "model_sets"),
    "scorecard_doc": ("out", "tuned", "overrides", "skipped", "reference"),
    # issue 55, helper c: the training loop, the evaluation, the sweeps, the statistics, progress
    "train": {"stop_at": "step", "decide": "decide"},
    "run_sweep": ("runs", "plan", "retired"),
    "evaluate": ("n_sequences", "seed", "batch_size", "n_boot", "lengths"),
    "summarize": ("n_boot", "level", "seed"),
    "probe_r2": ("seed", "test_frac", "groups"),
    "kmeans_summary": ("silhouette_sample", "n_init"),
    "progress_bar": ("file", "every_s"),
    "PlainProgress": ("file", "every_s", "clock"),
}


def legacy_group(where: str, group: Any, legacy: dict[str, Any], build: Callable[..., Any], rest: bool = False) -> Any:
    """``group`` (an instance of ``build``, a small config of a function's related keywords), or
    one built from the keywords ``where`` took before it (:data:`GROUPED_KEYWORDS`; a value in
    its place that is not one is the first of them, given by position), with a deprecation
    warning; the keywords go in :data:`REMOVED_IN`. Those keywords are taken out of ``legacy``;
    any other is a TypeError, unless ``rest`` (another shim reads it)."""
    names = GROUPED_KEYWORDS[where]
    fields = names if isinstance(names, dict) else {n: n for n in names}
    mine = {k: legacy.pop(k) for k in list(legacy) if k in fields}
    if group is not None and not isinstance(group, build):
        mine, group = {next(iter(fields)): group, **mine}, None
    if legacy and not rest:
        raise TypeError(f"{where}() got unexpected keyword argument(s): {', '.join(sorted(legacy))}")
    if not mine:
        return group if group is not None else build()
    if group is not None:
        raise TypeError(f"{where}(): give {build.__name__}(...) or the keywords it replaces, not both")
    deprecated(f"{where}({'=..., '.join(mine)}=...)", f"{where}(..., {build.__name__}(...))", stacklevel=4)
    return build(**{fields[k]: v for k, v in mine.items()})


# ---------------------------------------------------------------------------------------
# Issue 55 (helper c): calls whose leading positional parameters were grouped. The positions
# and keywords of before still work, with a warning; they go in REMOVED_IN.
# ---------------------------------------------------------------------------------------
#: function -> (the parameters it took before, in their order, and how many of them were required)
OLD_SIGNATURES: dict[str, tuple[tuple[str, ...], int]] = {
    "train_step": (("model", "opt", "task", "data_gen", "loss_kind", "step", "tc", "device", "amp"), 9),
    "compare": (("task", "models", "profile", "overrides", "out", "execution", "reference"), 0),
    "paper_value": (("paper", "task", "model", "metric", "length", "main_length", "task_params"), 6),
}


def legacy_call(where: str, args: tuple[Any, ...], kwargs: dict[str, Any], new: str, stacklevel: int = 4) -> dict[str, Any]:
    """The arguments of a call of ``where`` in its old signature (:data:`OLD_SIGNATURES`), by name,
    with a deprecation warning naming the ``new`` call (``stacklevel``: the old call's frame,
    from :func:`deprecated`'s); None in an optional position is left out (its old default). A
    TypeError as the old signature would have raised it."""
    names, required = OLD_SIGNATURES[where]
    if len(args) > len(names):
        raise TypeError(f"{where}() takes {len(names)} arguments in its old form but {len(args)} were given")
    given = {name: value for i, (name, value) in enumerate(zip(names, args)) if value is not None or i < required}
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError(f"{where}() got an unexpected keyword argument {k!r}")
        if k in given:
            raise TypeError(f"{where}() got multiple values for argument {k!r}")
        given[k] = v
    missing = [n for n in names[:required] if n not in given]
    if missing:
        raise TypeError(f"{where}() missing argument(s): {', '.join(missing)}")
    deprecated(f"{where}({', '.join(names)})", new, stacklevel=stacklevel)
    return given
