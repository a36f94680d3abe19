"""Name -> item registries (tasks, models, analyses): one small mechanism for all of them.

A registry that declares a ``base`` class also resolves a user's own class, named
``package.module:Class`` wherever a registered name goes (as lm-eval's registry resolves
``module:attr``): :meth:`Registry.get` imports the module (that runs the user's code: it is the
user's choice, made by writing the name), takes the attribute, checks that it subclasses
``base``, names it as written (``cls.name``: run configs, tables and folders use it) and runs the
registry's ``check`` (the contract: e.g. :func:`windtunnel.tasks.contract.check_task`). A class
that passed is kept, so a second ``get`` does not check it again. User classes are not
registered: :meth:`~Registry.names` lists the registered ones only.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from windtunnel.config import ConfigError

T = TypeVar("T")

#: ``package.module:Class``
IMPORT_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")


def is_import_path(name: str) -> bool:
    """Whether ``name`` names a user's class (``package.module:Class``) rather than a registered item."""
    return ":" in name


def public_name(cls: type) -> str:
    """``cls`` as users import it: ``windtunnel.models.WindModel`` rather than
    ``windtunnel.models.base.WindModel`` when the package exports it."""
    module = cls.__module__
    parent = module.rpartition(".")[0]
    if parent and getattr(sys.modules.get(parent), cls.__qualname__, None) is cls:
        module = parent
    return f"{module}.{cls.__qualname__}"


class Registry(Generic[T]):
    """Items (classes or records) registered by their ``name`` attribute; unknown names give a
    ConfigError. :meth:`names` is sorted, or in registration order when ``ordered``.

    With a ``base`` class, :meth:`get` also loads a user's ``package.module:Class`` (a subclass
    of ``base``, then checked by ``check``, which raises a ConfigError naming the broken rule);
    ``guide`` (e.g. "see docs/models.md, 'Bring your own architecture'") ends the messages of a
    class that is not a subclass of ``base``."""

    def __init__(self, kind: str, ordered: bool = False, *, base: type | None = None,
                 check: Callable[[type], None] | None = None, guide: str = ""):
        self.kind = kind
        self.ordered = ordered
        self.base = base
        self.check = check
        self.guide = guide
        self._items: dict[str, T] = {}
        self._user: dict[str, T] = {}  # package.module:Class -> the class that passed the checks

    def register(self, item: T) -> T:
        """Make ``item`` available by ``item.name``; usable as a class decorator."""
        name = item.name  # type: ignore[attr-defined]
        if name in self._items and self._items[name] is not item:
            raise ValueError(f"{self.kind} name '{name}' is already registered by {self._items[name]}")
        self._items[name] = item
        return item

    def unregister(self, name: str) -> None:
        """Forget ``name`` (a test's temporary registration); unknown names are a ConfigError."""
        if name not in self._items:
            raise self._unknown(name)
        del self._items[name]

    def names(self) -> list[str]:
        """The registered names: in registration order for an ordered registry, else sorted."""
        return list(self._items) if self.ordered else sorted(self._items)

    def get(self, name: str) -> T:
        """The item registered as ``name`` or, with a ``base``, a user's ``package.module:Class``."""
        if name in self._items:
            return self._items[name]
        if self.base is not None and is_import_path(name):
            return self._load(name)
        raise self._unknown(name)

    def _unknown(self, name: str) -> ConfigError:
        more = "" if self.base is None else \
            f", or a user's package.module:Class (a subclass of {public_name(self.base)})"
        return ConfigError(f"unknown {self.kind} '{name}'; available: {', '.join(self.names())}{more}")

    def _load(self, name: str) -> T:
        if not IMPORT_PATH.match(name):
            raise ConfigError(f"{self.kind} '{name}' is not a registered name nor package.module:Class")
        module_name, _, attr = name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ConfigError(f"{self.kind} '{name}': cannot import module '{module_name}' ({exc}); "
                              "it must be importable (installed, or on PYTHONPATH)") from None
        cls = getattr(module, attr, None)
        if cls is None:
            raise ConfigError(f"{self.kind} '{name}': module '{module_name}' has no attribute '{attr}'")
        if self._user.get(name) is cls or any(cls is item for item in self._items.values()):
            return cls  # checked already (a re-imported module is checked again), or a registered one
        assert self.base is not None
        if not (inspect.isclass(cls) and issubclass(cls, self.base)):
            guide = f"; {self.guide}" if self.guide else ""
            raise ConfigError(f"{self.kind} '{name}' must be a subclass of {public_name(self.base)} "
                              f"(got {cls!r}){guide}")
        cls.name = name  # run configs, tables and folders name it as the user wrote it
        if self.check is not None:
            self.check(cls)
        self._user[name] = cls
        return cls

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[T]:
        return iter([self._items[n] for n in self.names()])
