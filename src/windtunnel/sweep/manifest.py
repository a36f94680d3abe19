"""A sweep's folder: its name and its manifest (``sweep.json``, the sweep config and the runs it
lists). What is in a folder of runs (which are finished, runs copied in from other folders) is
:mod:`windtunnel.engine.folders`'s."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from windtunnel.config import ConfigError, Override, short_hash
from windtunnel.files import atomic_write_text
from windtunnel.sweep.config import SweepConfig
from windtunnel.sweep.expand import SweepRun
from windtunnel.train.config import RunConfig

MANIFEST = "sweep.json"


def default_out(sweep: SweepConfig, overrides: Iterable[str | Override] | Mapping[str, Any] | None = None) -> Path:
    """``runs/sweep-<name>-<hash>``, the hash of the sweep config and the ``--set`` overrides (not
    the ``--grid`` axes, so adding seeds to a sweep lands in the same folder and extends it).

    The command line passes the ``--set`` text as typed (the folder names of earlier versions
    are kept); an override given as a ``(key, value)`` pair counts as ``key=<value as JSON>``."""
    items = list(overrides.items()) if isinstance(overrides, Mapping) else list(overrides or [])
    texts = [o if isinstance(o, str) else f"{o[0]}={json.dumps(o[1])}" for o in items]
    return Path("runs") / f"sweep-{sweep.name}-{short_hash(f'{sweep.content_hash()} {json.dumps(texts)}')}"


def write_manifest(out: Path, sweep: SweepConfig, runs: list[SweepRun], log: Callable[[str], None], *,
                   plan: list[SweepRun] | None = None, retired: Mapping[str, str] | None = None) -> None:
    """Write ``sweep.json`` for ``runs``, a stage of ``plan`` (default: ``runs`` are the whole sweep).

    An existing manifest must list only runs of the plan, which it keeps listed (a later stage, or
    the sweep run again from its first stage, extends it), or runs of ``retired`` (name -> why: a
    search changed their setting), which move to its ``retired`` list, their folders untouched."""
    path = out / MANIFEST
    plan = runs if plan is None else plan
    new = {r.name for r in runs}
    old, entries, gone = set(), set(), {}
    if path.exists():
        try:
            doc = json.loads(path.read_text())
            entries = {(r["name"], r["experiment"]) for r in doc["runs"]}
            old, gone = {name for name, _ in entries}, dict(doc.get("retired", {}))
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(f"{path} is unreadable ({exc}); choose another --out (nothing was overwritten)") from None
        foreign = old - {r.name for r in plan} - set(retired or {})
        if foreign:
            raise ConfigError(
                f"{out} holds a different sweep ({len(foreign)} of its runs are not in this one); choose another "
                "--out (nothing was overwritten)"
            )
        if new - old:
            log(f"extending the sweep in {out} with {len(new - old)} new runs")
    now_retired = {name: why for name, why in (retired or {}).items() if name in old}
    for name, why in now_retired.items():
        log(f"retiring {name} from the sweep in {out} ({why}); its folder stays")
    out.mkdir(parents=True, exist_ok=True)
    keep = entries | {(r.name, r.experiment) for r in runs}
    listed = [r for r in plan if (r.name, r.experiment) in keep]
    doc = {"sweep": sweep.model_dump(mode="json"), "runs": [r.describe() for r in listed]}
    names = {r.name for r in listed}
    still = {name: why for name, why in {**gone, **now_retired}.items() if name not in names}
    if still:  # a run listed again (a search's winner back) is no longer retired
        doc["retired"] = still
    atomic_write_text(path, json.dumps(doc, indent=1))


def read_manifest(out: Path | str) -> tuple[SweepConfig, list[SweepRun]]:
    """The sweep config and runs recorded in ``out/sweep.json``."""
    path = Path(out) / MANIFEST
    if not path.is_file():
        raise ConfigError(f"{out} is not a sweep folder (no sweep.json)")
    doc = json.loads(path.read_text())
    sweep = SweepConfig.build(doc["sweep"], where=f"sweep ({path})")
    runs = [SweepRun(RunConfig.build(r["config"], where=f"run {r['name']}"), r["experiment"], r["labels"])
            for r in doc["runs"]]
    return sweep, runs


def unique_runs(runs: list[SweepRun]) -> list[SweepRun]:
    """One entry per run folder (a run shared by two experiments is trained once)."""
    first: dict[str, SweepRun] = {}
    for r in runs:
        first.setdefault(r.name, r)
    return list(first.values())
