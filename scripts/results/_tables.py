"""Tables as data: a results table's cells, parsed from markdown, stored as JSON, written back.

A table record (``results/<topic>/<name>.json``) holds ``columns`` (each a ``key``, a ``label``
and an optional ``format``) and ``rows`` (objects keyed by column key). A cell is one of:

- a number, ``null`` (an empty cell) or text;
- a series, a list of numbers, written ``a, b, c``, or with the column's ``"sep": "/"``
  ``a / b / c`` (say, one number per length or per learning rate); in a series ``null`` is a
  value not measured (written ``–``: a search's dropped candidate) and ``"..."`` values the
  record elides;
- an object with some of: ``value`` (or ``values``, a series), ``lo`` and ``hi`` (a 95%
  interval), ``score`` and ``verdict`` (✓ realised, ~ partial, ✗ not), ``lr`` and ``note`` (a
  learning rate the value was measured at; a ``note`` alone says what a series is), ``bold``.
  Written ``lr (note): value [lo, hi] (verdict score)``; without a value ``verdict score [lo,
  hi]``, or ``(score)``.

Numbers keep the digits they were recorded with: the files are read with ``Decimal`` for every
non-integer (``load_json``) and written back as the same digits (``dump_json``), so 0.0340 stays
0.0340. A float computed by a program is written with the column's ``format``: ``"dec": N``
decimals. ``"sci": true`` writes learning rates as ``3.16e-3``; ``"comma": true`` integers as
``603,520``. Negative numbers are written with the typographic minus.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

MINUS = "−"
_NUM = r"[−-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[−-]?\d+)?"
_ITEM = rf"(?:{_NUM}|\.\.\.|–)"
_SEP = r"(?:,\s+|\s+/\s+)"
_CELL = re.compile(
    rf"^(?:(?P<lr>{_NUM})(?:\s+\((?P<note>[^()]*)\))?:\s+)?"
    rf"(?:(?P<verdict>[✓~✗])\s+)?"
    rf"(?P<values>{_ITEM}(?:{_SEP}{_ITEM})*)"
    rf"(?:\s+\[(?P<lo>{_NUM}),\s*(?P<hi>{_NUM})\])?"
    rf"(?:\s+\((?:(?P<sverdict>[✓~✗])\s+)?(?P<score>{_NUM})\))?$"
)
_SCORE_ONLY = re.compile(rf"^\((?:(?P<sverdict>[✓~✗])\s+)?(?P<score>{_NUM})\)$")
Number = int | float | Decimal
_GAPS = {"–": None, "...": "..."}  # not measured (a candidate dropped), and elided by the record


# ------------------------------------------------------------------------------------------
# numbers
# ------------------------------------------------------------------------------------------
def parse_number(text: str) -> Number:
    """A number as written: an int, or a Decimal that keeps its digits (3.16e-3 -> 0.00316)."""
    t = text.replace(MINUS, "-").replace(",", "")
    if "e" in t:
        return Decimal(t).normalize() if "." in t or "-" in t.split("e")[1] else Decimal(t)
    return Decimal(t) if "." in t else int(t)


def format_number(x: Number, fmt: dict | None = None) -> str:
    fmt = fmt or {}
    if fmt.get("sci"):
        return _sci(float(x))
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        s = f"{x:,}" if fmt.get("comma") else str(x)
    elif isinstance(x, Decimal):
        s = format(x, "f")
    elif "dec" in fmt:
        s = f"{x:.{fmt['dec']}f}"
    else:
        s = f"{x:.6g}"
    return s.replace("-", MINUS)


def _sci(x: float) -> str:
    """Learning rates as the records write them: 1e-4, 3.16e-3, 3.16e-2."""
    if x == 0:
        return "0"
    e = math.floor(math.log10(abs(x)) + 1e-9)
    mant = f"{round(x / 10 ** e, 2):g}"
    return f"1e{e}" if mant == "1" else f"{mant}e{e}"


def is_sci(text: str) -> bool:
    return "e" in text


# ------------------------------------------------------------------------------------------
# cells
# ------------------------------------------------------------------------------------------
def parse_cell(text: str) -> tuple[Any, dict]:
    """A markdown cell -> (typed value, hints for the column's format); other text stays text."""
    t = text.strip()
    bold = len(t) > 4 and t.startswith("**") and t.endswith("**") and "**" not in t[2:-2]
    inner = t[2:-2].strip() if bold else t
    if inner == "":
        return None, {}
    m = _SCORE_ONLY.match(inner)
    if m:
        cell = {"score": parse_number(m["score"])}
        if m["sverdict"]:
            cell["verdict"] = m["sverdict"]
        return _bold(cell, bold), {}
    m = _CELL.match(inner)
    if not m:
        return t, {}
    items = re.split(_SEP, m["values"])
    seq = len(items) > 1
    if (seq and (m["verdict"] or (m["score"] and m["sverdict"]))) or (not seq and items[0] == "..."):
        return t, {}
    if not seq and items[0] == "–" and (m["score"] is None or m["lr"] or m["lo"]):
        return t, {}
    hints: dict[str, Any] = {}
    if seq:
        hints["sep"] = "/" if "/" in m["values"] else ","
    numbers = [i for i in items if i not in ("...", "–")]
    if any(is_sci(i) for i in numbers):
        if not all(is_sci(i) for i in numbers):
            return t, {}
        hints["sci"] = True
    if any("," in i for i in items):
        hints["comma"] = True
    values = [_GAPS.get(i) if i in _GAPS else parse_number(i) for i in items]
    cell: dict[str, Any] = {}
    if m["lr"]:
        cell["lr"] = parse_number(m["lr"])
        if m["note"]:
            cell["note"] = m["note"]
    if seq:
        cell["values"] = values
    elif m["verdict"]:
        cell["verdict"], cell["score"] = m["verdict"], values[0]
    else:
        cell["value"] = values[0]
    if m["lo"] is not None:
        cell["lo"], cell["hi"] = parse_number(m["lo"]), parse_number(m["hi"])
    if m["score"] is not None:
        if "score" in cell:
            return t, {}
        cell["score"] = parse_number(m["score"])
        if m["sverdict"]:
            cell["verdict"] = m["sverdict"]
    if not bold and list(cell) == ["value"]:
        return cell["value"], hints
    if not bold and list(cell) == ["values"]:
        return cell["values"], hints
    return _bold(cell, bold), hints


def _bold(cell: dict, bold: bool) -> dict:
    return {**cell, "bold": True} if bold else cell


def format_cell(cell: Any, fmt: dict | None = None) -> str:
    fmt = fmt or {}
    sep = " / " if fmt.get("sep") == "/" else ", "

    def num(v: Any) -> str:
        return "–" if v is None else v if isinstance(v, str) else format_number(v, fmt)

    def score(v: Number) -> str:
        return format_number(v, {"dec": fmt.get("score_dec", 2)})

    if cell is None:
        return ""
    if isinstance(cell, str):
        return cell
    if isinstance(cell, (int, float, Decimal)):
        return num(cell)
    if isinstance(cell, list):
        return sep.join(num(v) for v in cell)
    c = cell
    head = (sep.join(num(v) for v in c["values"]) if "values" in c
            else num(c["value"]) if "value" in c else None)
    if head is None and "verdict" in c:
        s = f"{c['verdict']} {score(c['score'])}"
        if "lo" in c:
            s += f" [{score(c['lo'])}, {score(c['hi'])}]"
    elif head is None:
        s = f"({c['verdict'] + ' ' if 'verdict' in c else ''}{score(c['score'])})"
    else:
        s = head
        if "lo" in c:
            s += f" [{num(c['lo'])}, {num(c['hi'])}]"
        if "score" in c:
            s += f" ({c['verdict'] + ' ' if 'verdict' in c else ''}{score(c['score'])})"
    if "lr" in c:
        note = f" ({c['note']})" if c.get("note") else ""
        s = f"{_sci(float(c['lr']))}{note}: {s}"
    elif c.get("note"):
        s = f"{c['note']}: {s}"
    return f"**{s}**" if c.get("bold") else s


# a decimal number in text: not a range's second end read as negative, a version or a mantissa
_TEXT_NUMBER = re.compile(r"(?<![\w.])[−-]?\d+\.\d+(?![\d.]*\d|e)")


def cell_numbers(cell: Any) -> list[float]:
    """Every number a cell holds, as floats (for the check of the prose that cites them)."""
    if cell is None or isinstance(cell, bool):
        return []
    if isinstance(cell, str):  # numbers written into text cells ("0.053; 1.15", a curve as text)
        return [float(x.replace("−", "-")) for x in _TEXT_NUMBER.findall(cell)]
    if isinstance(cell, (int, float, Decimal)):
        return [float(cell)]
    if isinstance(cell, list):
        return [n for v in cell for n in cell_numbers(v)]
    if isinstance(cell, dict):
        return [n for k, v in cell.items() if k not in ("bold", "note", "verdict") for n in cell_numbers(v)]
    return []


# ------------------------------------------------------------------------------------------
# tables
# ------------------------------------------------------------------------------------------
def split_row(line: str) -> list[str]:
    """The cells of one markdown table row (``\\|`` inside a cell is no border)."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip() for c in re.split(r"(?<!\\)\|", body)]


def parse_markdown_table(lines: list[str]) -> dict:
    """A markdown table (header, rule, rows) -> {"columns": [...], "rows": [...]}."""
    header = split_row(lines[0])
    keys = column_keys(header)
    rows, hints = [], {k: {} for k in keys}
    for line in lines[2:]:
        cells = split_row(line)
        if len(cells) != len(header):
            raise ValueError(f"a row of {len(cells)} cells under a header of {len(header)}: {line}")
        row = {}
        for k, text in zip(keys, cells):
            row[k], h = parse_cell(text)
            hints[k].update(h)
        rows.append(row)
    columns = []
    for k, label in zip(keys, header):
        col: dict[str, Any] = {"key": k, "label": label}
        fmt = {h: v for h, v in hints[k].items() if h != "sep" or v == "/"}
        if fmt:
            col["format"] = fmt
        columns.append(col)
    return {"columns": columns, "rows": rows}


def column_keys(labels: list[str]) -> list[str]:
    keys: list[str] = []
    for label in labels:
        k = re.sub(r"[^a-z0-9]+", "_", label.lower().replace("`", "")).strip("_") or "col"
        while k in keys:
            k += "_"
        keys.append(k)
    return keys


def render_table(table: dict) -> str:
    """The markdown of a table record."""
    cols = table["columns"]
    lines = ["| " + " | ".join(c["label"] for c in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in table["rows"]:
        cells = [re.sub(r"(?<!\\)\|", r"\\|", format_cell(row.get(c["key"]), c.get("format")).replace("\n", " "))
                 for c in cols]  # a bare | would split the cell
        lines.append("|" + "|".join(f" {c} " if c else " " for c in cells) + "|")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# JSON that keeps the recorded digits
# ------------------------------------------------------------------------------------------
def load_json(path: Path) -> Any:
    return json.loads(Path(path).read_text(), parse_float=Decimal)


def dump_json(obj: Any) -> str:
    """Stable JSON: two-space indents, one row of a table per line, numbers as recorded."""
    return _dump(obj, 0) + "\n"


def _dump(obj: Any, depth: int, inline: bool = False) -> str:
    pad, pad1 = "  " * depth, "  " * (depth + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        if inline or _flat(obj):
            return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {_dump(v, 0, True)}" for k, v in obj.items()) + "}"
        items = [f"{pad1}{json.dumps(k, ensure_ascii=False)}: {_dump(v, depth + 1, k == 'rows_inline')}"
                 for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list):
        if not obj:
            return "[]"
        if inline or all(not isinstance(v, (dict, list)) for v in obj):
            return "[" + ", ".join(_dump(v, 0, True) for v in obj) + "]"
        return "[\n" + ",\n".join(pad1 + _dump(v, depth + 1, isinstance(v, dict)) for v in obj) + "\n" + pad + "]"
    if isinstance(obj, Decimal):
        return format(obj, "f") if obj == obj.to_integral_value() or abs(obj) >= Decimal("1e-6") else str(obj)
    if isinstance(obj, float):
        return repr(obj)
    return json.dumps(obj, ensure_ascii=False)


def _flat(d: dict) -> bool:
    return len(d) <= 6 and all(not isinstance(v, (dict, list)) for v in d.values()) and len(json.dumps(d, default=str)) < 100
