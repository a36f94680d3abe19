"""Name -> item registries (tasks, models, analyses): one small mechanism for all of them."""

from __future__ import annotations

from typing import Generic, Iterator, TypeVar

from windtunnel.config import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Items (classes or records) registered by their ``name`` attribute; unknown names give a
    ConfigError. :meth:`names` is sorted, or in registration order when ``ordered``."""

    def __init__(self, kind: str, ordered: bool = False):
        self.kind = kind
        self.ordered = ordered
        self._items: dict[str, T] = {}

    def register(self, item: T) -> T:
        """Make ``item`` available by ``item.name``; usable as a class decorator."""
        name = item.name  # type: ignore[attr-defined]
        if name in self._items and self._items[name] is not item:
            raise ValueError(f"{self.kind} name '{name}' is already registered by {self._items[name]}")
        self._items[name] = item
        return item

    def unregister(self, name: str) -> None:
        """Forget ``name`` (a test's temporary registration); unknown names are a ConfigError."""
        self.get(name)
        del self._items[name]

    def names(self) -> list[str]:
        return list(self._items) if self.ordered else sorted(self._items)

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise ConfigError(f"unknown {self.kind} '{name}'; available: {', '.join(self.names())}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[T]:
        return iter([self._items[n] for n in self.names()])
