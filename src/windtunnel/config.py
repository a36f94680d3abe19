"""Validated configs: pydantic models that reject unknown fields and explain bad values.

Every config in windtunnel (tasks, models, training) derives from :class:`StrictConfig`, and
every validation failure surfaces as a :class:`ConfigError` whose message names the field,
the value given and what is allowed.
"""

from __future__ import annotations

import hashlib
import json
import os
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic_core import PydanticUndefined


class ConfigError(ValueError):
    """A config field is unknown, has the wrong type, or is out of its allowed range."""


class StrictConfig(BaseModel):
    """Base for configs: unknown fields rejected, values validated on assignment, frozen;
    numbers must be finite, and a boolean is not taken for a number (pydantic would read
    ``true`` as 1)."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_number(cls, value: Any, info: ValidationInfo) -> Any:
        if _bool_for_number(cls.model_fields[info.field_name].annotation, value):
            raise ValueError("a boolean is not a number")
        return value

    @classmethod
    def build(cls, params: Mapping[str, Any] | None = None, *, where: str | None = None, section: str = ""):
        """Validate ``params`` into this config, raising :class:`ConfigError` on bad input.

        ``section`` is where these params sit in a larger config (e.g. ``task_params``): the
        error then names the full dotted field, e.g. ``task_params.V``."""
        where = where or cls.__name__
        try:
            return cls.model_validate(dict(params or {}))
        except pydantic.ValidationError as exc:
            raise ConfigError(format_validation_error(cls, exc, where, section)) from None

    def replace(self, **changes: Any):
        """A copy with ``changes`` applied and validated (configs are immutable)."""
        return type(self).build({**self.model_dump(), **changes})

    @classmethod
    def describe_fields(cls) -> list[dict[str, Any]]:
        """One record per field: name, type, default, allowed range and description."""
        out = []
        for name, field in cls.model_fields.items():
            default = None if field.default is PydanticUndefined else field.default
            out.append(
                {
                    "name": name,
                    "type": _type_name(field.annotation),
                    "default": default,
                    "allowed": allowed_range(field),
                    "help": field.description or "",
                }
            )
        return out


def _bool_for_number(annotation: Any, value: Any) -> bool:
    """``value`` is (or holds, in a list, tuple or dict) a bool where ``annotation`` wants a number."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if isinstance(value, bool):
        options = args if origin in (typing.Union, types.UnionType) else (annotation,)
        return bool not in options and any(o in (int, float) for o in options)
    if origin in (typing.Union, types.UnionType):
        return any(_bool_for_number(a, value) for a in args if a is not type(None))
    if isinstance(value, (list, tuple)) and origin in (list, tuple, set, frozenset) and args:
        items = args if origin is tuple and Ellipsis not in args and len(args) == len(value) else (args[0],) * len(value)
        return any(_bool_for_number(a, v) for a, v in zip(items, value))
    if isinstance(value, dict) and origin is dict and len(args) == 2:
        return any(_bool_for_number(args[1], v) for v in value.values())
    return False


def _type_name(annotation: Any) -> str:
    name = getattr(annotation, "__name__", None)
    return name if name and not str(annotation).startswith("typing.") else str(annotation).replace("typing.", "")


def allowed_range(field: pydantic.fields.FieldInfo) -> str:
    """Human description of a field's constraints, e.g. '2 <= V <= 64' or 'one of a, b'."""
    lo = hi = None
    lo_strict = hi_strict = False
    for meta in field.metadata:
        if getattr(meta, "ge", None) is not None:
            lo = meta.ge
        if getattr(meta, "gt", None) is not None:
            lo, lo_strict = meta.gt, True
        if getattr(meta, "le", None) is not None:
            hi = meta.le
        if getattr(meta, "lt", None) is not None:
            hi, hi_strict = meta.lt, True
    args = getattr(field.annotation, "__args__", None)
    if args and all(isinstance(a, str) for a in args):  # typing.Literal
        return "one of " + ", ".join(args)
    if lo is None and hi is None:
        return "any " + _type_name(field.annotation)
    parts = []
    if lo is not None:
        parts.append(f"{lo} {'<' if lo_strict else '<='} ")
    parts.append("value")
    if hi is not None:
        parts.append(f" {'<' if hi_strict else '<='} {hi}")
    return "".join(parts)


def _model_at(cls: Any, loc: tuple) -> type[BaseModel] | None:
    """The config class of the (possibly nested) section at ``loc``, if it is one."""
    for part in loc:
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or part not in cls.model_fields:
            return None
        cls = cls.model_fields[part].annotation
    return cls if isinstance(cls, type) and issubclass(cls, BaseModel) else None


def _field_at(cls: type[BaseModel], loc: tuple) -> pydantic.fields.FieldInfo | None:
    """The FieldInfo at a (possibly nested) error location, if it names a field."""
    parent = _model_at(cls, loc[:-1]) if loc else None
    return parent.model_fields.get(loc[-1]) if parent is not None else None


def format_validation_error(cls: type[BaseModel], exc: pydantic.ValidationError, where: str,
                            section: str = "") -> str:
    """One line per error, each naming the full dotted field (``section`` first, when given),
    the value given and what is allowed; an unknown field lists the fields of its own section."""
    lines = [f"invalid {where} config:"]
    for err in exc.errors():
        parts = [str(x) for x in err["loc"]]
        loc = ".".join([section, *parts] if section else parts)
        msg = err["msg"].removeprefix("Value error, ")
        if not parts:  # a check across fields: its message names the fields
            lines.append(f"  {msg}")
            continue
        if err["type"] == "extra_forbidden":
            parent = _model_at(cls, err["loc"][:-1])
            where_in = ".".join([section, *parts[:-1]] if section else parts[:-1])
            allowed = ", ".join(parent.model_fields) if parent is not None else "?"
            lines.append(f"  unknown field '{loc}'; allowed fields" + (f" of '{where_in}'" if where_in else "")
                         + f": {allowed}")
            continue
        given = err.get("input")
        field = _field_at(cls, err["loc"])
        if field is not None and isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            lines.append(f"  {loc}: {msg}")  # a check across the fields of a nested section
            continue
        allowed = f"; allowed: {allowed_range(field)}" if field is not None else ""
        lines.append(f"  field '{loc}' = {given!r}: {msg}{allowed}")
    return "\n".join(lines)


def short_hash(content: str | Mapping[str, Any] | list) -> str:
    """The content hash that names run, sweep and comparison folders: the first 10 hex digits of
    the SHA-256 of ``content`` (text as given; anything else as JSON with sorted keys). The one
    hashing routine of the package: what a folder name is made of is the caller's, how it is
    hashed is here."""
    text = content if isinstance(content, str) else json.dumps(content, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


# ---------------------------------------------------------------------------------------
# Optional dependencies
# ---------------------------------------------------------------------------------------
def install_hint(extra: str) -> str:
    """The exact commands that install the optional extra ``extra`` (llm, ray) of windtunnel."""
    return (f"from a clone: make setup EXTRAS={extra} (or .venv/bin/pip install -e '.[{extra}]'); "
            f"from a published package: pip install 'windtunnel[{extra}]'")


def require(module: str, extra: str, needed_by: str):
    """Import the optional dependency ``module`` of the extra ``extra``, or raise a
    :class:`ConfigError` saying what needs it and the exact command that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"{needed_by} needs the optional package '{module}' of the '{extra}' extra ({exc}); "
                          f"install it with: {install_hint(extra)}") from None


# ---------------------------------------------------------------------------------------
# Overrides: one syntax, parsed at the edges
# ---------------------------------------------------------------------------------------
#: one override: a dotted key (``train.steps``, ``model_params.d_model``) and its value
Override = tuple[str, Any]
#: what the library takes: ``{"train.steps": 500}`` or ``[("train.steps", 500), ...]`` (applied in order)
Overrides = Mapping[str, Any] | Iterable[Override]


def parse_override(text: str) -> Override:
    """``section.field=value`` -> ``("section.field", value)``; the value is JSON when it parses
    (``500``, ``1e-3``, ``true``, ``[30,50]``, ``{"V":6}``), else the string as written.

    The one override syntax of every command (``--set``), of sweep files (``overrides``) and of
    ``WINDTUNNEL_FORCE_SET``; the library itself takes the parsed pairs (:data:`Overrides`)."""
    key, eq, raw = text.partition("=")
    if not eq or not key:
        raise ConfigError(f"override {text!r} must look like section.field=value (e.g. train.steps=500)")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key, value


def parse_overrides(texts: Iterable[str]) -> list[Override]:
    """:func:`parse_override` of each of ``texts``, in order."""
    return [parse_override(t) for t in texts]


def as_overrides(overrides: Overrides | None) -> list[Override]:
    """``overrides`` as a list of ``(key, value)`` pairs, in the order they apply.

    A string is refused: ``a.b=value`` text is parsed once, where it is read (the command
    line, a sweep file), with :func:`parse_overrides`."""
    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        return list(overrides.items())
    if isinstance(overrides, str):
        raise TypeError(f"overrides must be key -> value pairs, not the string {overrides!r}; "
                        "parse command-line text with windtunnel.config.parse_overrides")
    out = []
    for item in overrides:
        if isinstance(item, str) or not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str)):
            raise TypeError(f"override {item!r} is not a (key, value) pair; parse command-line text "
                            "(section.field=value) with windtunnel.config.parse_overrides")
        out.append((item[0], item[1]))
    return out


# ---------------------------------------------------------------------------------------
# Overrides forced from the environment
# ---------------------------------------------------------------------------------------
FORCE_ENV = "WINDTUNNEL_FORCE_SET"


def forced_texts() -> list[str]:
    """The items of the environment variable ``WINDTUNNEL_FORCE_SET`` (whitespace-separated
    ``section.field=value`` items; ``llm.name=value`` for the options of ``windtunnel llm``),
    applied after every other override. The test of the documentation uses it to run the
    documented training, sweep and LLM commands in seconds; a run records them, since they are
    part of its resolved config."""
    return os.environ.get(FORCE_ENV, "").split()


def forced_overrides() -> list[Override]:
    """The run-config items of ``WINDTUNNEL_FORCE_SET``, parsed (the ``llm.*`` ones are
    :func:`forced_llm_options`)."""
    return parse_overrides(t for t in forced_texts() if not t.startswith("llm."))


def forced_llm_options() -> dict[str, str]:
    """The ``llm.name=value`` items of ``WINDTUNNEL_FORCE_SET``: option name -> value as written
    (the LLM options' own validation converts them)."""
    return dict(t.removeprefix("llm.").partition("=")[::2] for t in forced_texts() if t.startswith("llm."))


def json_names(folder: Any) -> list[str]:
    """The names (without ``.json``) of the JSON files in ``folder`` (a path or a package
    resource): the shipped profiles, sweeps and comparisons."""
    return sorted(p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json"))
