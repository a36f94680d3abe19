"""Markdown pieces the report pages share: embedded pages' headings pushed down, config blocks."""

from __future__ import annotations

import json
import re
from typing import Any


def _demote(markdown_text: str, levels: int = 2) -> str:
    """Headings of an embedded page pushed down ``levels`` levels (a run's diagnostics.md)."""
    return re.sub(r"^(#+) ", lambda m: "#" * min(6, len(m.group(1)) + levels) + " ", markdown_text, flags=re.M)


def _config_block(doc: Any) -> list[str]:
    return ["```json", json.dumps(doc, indent=1), "```", ""]
