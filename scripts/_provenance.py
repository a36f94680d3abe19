"""The provenance helpers live in the package (:mod:`windtunnel.provenance`), which every
record's builder calls; these names stay importable from here for the tests that check them."""

from __future__ import annotations

from windtunnel.provenance import MACHINE_PATH, portable, program

__all__ = ["MACHINE_PATH", "portable", "program"]
