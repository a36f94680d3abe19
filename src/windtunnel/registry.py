"""Name -> class registries (tasks, models): one small mechanism for both."""

from __future__ import annotations

from typing import Generic, TypeVar

from windtunnel.config import ConfigError

T = TypeVar("T", bound=type)


class Registry(Generic[T]):
    """Classes registered by their ``name`` attribute; unknown names give a ConfigError."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, cls: T) -> T:
        """Class decorator: make ``cls`` available by ``cls.name``."""
        if cls.name in self._items and self._items[cls.name] is not cls:
            raise ValueError(f"{self.kind} name '{cls.name}' is already registered by {self._items[cls.name]}")
        self._items[cls.name] = cls
        return cls

    def names(self) -> list[str]:
        return sorted(self._items)

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise ConfigError(f"unknown {self.kind} '{name}'; available: {', '.join(self.names())}") from None
