"""What a results topic gets from the renderer: its data, tables, figures and templates.

A topic is a module ``scripts/results/<topic>.py`` (the name with ``-`` for ``_``) with

- ``TITLE`` (the page's title), ``NAV`` (its place in the site's Results menu: a section name,
  or ``""`` for the top level; ``NAV_TITLE``, its title there) and ``ORDER`` (a number: pages
  sort by it); ``DATA``, where its data are not ``results/<topic>/`` alone (its header says so);
- ``render(ctx) -> str``: the markdown of ``docs/results/<topic>.md``;
- optionally ``blocks(ctx) -> dict[str, str]``: named markdown blocks that the renderer puts into
  ``README.md`` and the docs pages between ``<!-- results:NAME -->`` and ``<!-- /results -->``.

``ctx`` (a :class:`Context`) reads ``results/<topic>/*.json`` (``ctx.data(name)``), writes a
table record as markdown with its provenance (``ctx.table(name)``), draws a figure
(``ctx.figure(name, draw, data, caption)``) and fills a page template
(``ctx.template(text, tables=..., figures=...)``). Everything it writes is a function of the
committed data, so rendering twice gives the same bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import _figures
from _tables import format_cell, load_json, render_table

REQUIRED = ("command", "commit", "date", "machine", "concurrent")
_DIRECTIVE = re.compile(r"\{\{\s*(table|figure|block)\s+([\w.\-/]+)\s*\}\}")  # NAME or TOPIC/NAME
_FOLD = re.compile(r"^\{\{ fold: (.+?) \}\}\n(.*?)^\{\{ /fold \}\}\n", re.S | re.M)  # a part folded, see fold()


@dataclass
class Context:
    root: Path  # the repository
    out: Path  # the results pages' folder (docs/results, or a temporary one for the check)
    topic: str
    files: dict[str, bytes] = field(default_factory=dict)  # what the topic wrote, relative to out
    used: set[str] = field(default_factory=set)  # the records ("topic/name") its page shows

    @property
    def data_dir(self) -> Path:
        return self.root / "results" / self.topic

    def data(self, name: str, topic: str | None = None) -> Any:
        """``results/<topic>/<name>.json``, numbers as recorded (Decimal for non-integers)."""
        return load_json(self.root / "results" / (topic or self.topic) / f"{name}.json")

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.data_dir.glob("*.json"))

    # -- tables -----------------------------------------------------------------------------
    def table(self, name: str, topic: str | None = None, *, title: bool = True, source: bool = True) -> str:
        """A record as markdown: its title, its table (or its recorded output), its provenance."""
        rec = self.data(name, topic)
        self.used.add(f"{topic or self.topic}/{name}")
        parts = [f"**{rec['title']}**", ""] if title and rec.get("title") else []
        parts.append(render_table(rec) if "rows" in rec else "```text\n" + "\n".join(rec["output"]) + "\n```")
        if source:
            parts += ["", provenance_line(rec["provenance"], f"{topic or self.topic}/{name}.json")]
        return "\n".join(parts)

    # -- figures ----------------------------------------------------------------------------
    def figure(self, name: str, draw: Callable[[Any], Any], data: Any, caption: str) -> str:
        """Draw ``draw(data)`` (it returns the matplotlib figure) into ``figures/<topic>-<name>.png``,
        its data beside it; return the markdown image."""
        stem = f"figures/{self.topic}-{name}"
        with _figures.style():
            fig = draw(data)
            self.files[f"{stem}.png"] = _figures.png_bytes(fig)
        sidecar = {"figure": f"{stem}.png", "caption": caption, "matplotlib": _figures.version(), "data": data}
        self.files[f"{stem}.json"] = (json.dumps(sidecar, indent=1, default=_plain, ensure_ascii=False) + "\n").encode()
        return f"![{caption}]({stem}.png)"

    def curves(self, name: str, topic: str, *, every: int, unit: str, ylabel: str, log: bool = True) -> str:
        """A learning-curve table (one row per run: its label, maybe its ``lr`` and its ``from_step``
        (default: ``every``), and one column of values every ``every`` ``unit``) drawn as a plot,
        one line per row; the markdown image."""
        rec = self.data(name, topic)
        series_key = next(c["key"] for c in rec["columns"] if all(isinstance(r.get(c["key"]), list) for r in rec["rows"]))
        label_key = rec["columns"][0]["key"]
        full = max(len(r[series_key]) for r in rec["rows"] if "..." not in r[series_key])
        series, xs = {}, {}
        for row in rec["rows"]:
            label = str(row[label_key]) + (f" (lr {format_cell(row['lr'], {'sci': True})})" if "lr" in row else "")
            values = row[series_key]
            cut = values.index("...") if "..." in values else len(values)  # values after "..." are the run's last
            first = int(row.get("from_step", every)) // every  # a curve recorded from a later step
            steps = [*range(first, first + cut), *range(full - (len(values) - cut - 1) + 1, full + 1)]
            points = [(every * k, number(v)) for k, v in zip(steps, [*values[:cut], *values[cut + 1:]])]
            xs[label], series[label] = [x for x, _ in points], [y for _, y in points]
        data = {"xs": xs, "series": series, "xlabel": unit, "ylabel": ylabel, "log": log, "title": rec.get("title", name)}
        import _plots

        return self.figure(f"{topic}-{name}" if topic != self.topic else name, _plots.curves, data, rec.get("title", name))

    # -- templates --------------------------------------------------------------------------
    def template(self, text: str, tables: dict[str, str] | None = None, figures: dict[str, str] | None = None) -> str:
        """Fill ``{{ table NAME }}`` (a table of this topic, or one given in ``tables``) and
        ``{{ figure NAME }}`` (markdown given in ``figures``), and fold the lines between
        ``{{ fold: SUMMARY }}`` and ``{{ /fold }}`` (each on a line of its own) under SUMMARY."""
        tables, figures = tables or {}, figures or {}

        def fill(m: re.Match) -> str:
            kind, name = m[1], m[2]
            if kind == "figure":
                if name not in figures:
                    raise KeyError(f"{self.topic}: no figure '{name}'")
                return figures[name]
            if name in tables:
                return tables[name]
            topic, _, local = name.rpartition("/")
            return self.table(local, topic or None)

        return _FOLD.sub(lambda m: fold(m[1], m[2]), _DIRECTIVE.sub(fill, text))

    def template_file(self) -> str:
        return (Path(__file__).parent / f"{self.topic.replace('-', '_')}.md").read_text()

    def page(self, owns: tuple[str, ...] = (), figures: dict[str, str] | None = None,
             tables: dict[str, str] | None = None) -> str:
        """The topic's template filled, then every record of its own folder and of the folders it
        ``owns`` that the template does not show, under "Other records", so none is left out."""
        text = self.template(self.template_file(), tables=tables, figures=figures).rstrip() + "\n"
        rest = [(t, p.stem) for t in (self.topic, *owns) for p in sorted((self.root / "results" / t).glob("*.json"))
                if f"{t}/{p.stem}" not in self.used]
        if rest:
            text += "\n## Other records\n\nRecorded with the tables above, cited by the prose of the guides.\n\n"
            text += fold(f"the {len(rest)} other records", "\n\n".join(self.table(n, t) for t, n in rest))
        return text


def listed(names: list[str], code: bool = True) -> str:
    """``a, b and c`` (each in backticks where ``code``), for the prose a page generates."""
    names = [f"`{n}`" if code else n for n in names]
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)


def fold(summary: str, body: str) -> str:
    """``body`` folded under a line that says what it holds (open on the site and on GitHub)."""
    return f"<details markdown>\n<summary>{summary}</summary>\n\n{body.strip()}\n\n</details>\n"


def provenance_line(p: dict, path: str) -> str:
    """One line under a table: how, when and where it was measured, and the data file (``path``
    under ``results/``, or a path from the repository's root where it starts with ``src/``)."""
    commit = p.get("commit", "")
    bits = [f"`{p['command']}`"] if p.get("command") else []
    bits.append(f"{p.get('date', '')[:10]}, commit {commit[:7]}" if commit else p.get("date", "")[:10])
    bits.append(p.get("machine", ""))
    if p.get("concurrent") and p["concurrent"] != "not recorded":
        bits.append(f"beside: {p['concurrent']}")
    if p.get("torch"):
        bits.append(f"torch {p['torch']}")
    data = path if path.startswith("src/") else f"results/{path}"
    return f"<small>Measured by {' · '.join(b for b in bits if b)} · data: `{data}`</small>"


def check_provenance(path: Path, rec: Any) -> list[str]:
    if not isinstance(rec, dict) or not isinstance(rec.get("provenance"), dict):
        return [f"{path}: no 'provenance' object"]
    return [f"{path}: provenance lacks '{k}'" for k in REQUIRED if not rec["provenance"].get(k)]


def cell(value: Any, fmt: dict | None = None) -> str:
    return format_cell(value, fmt)


def number(x: Any) -> float | None:
    """A cell's main number as a float (a score, a value), or None."""
    if isinstance(x, dict):
        x = x.get("value", x.get("score"))
    return float(x) if isinstance(x, (int, float, Decimal)) and not isinstance(x, bool) else None


def _plain(o: Any) -> Any:
    if isinstance(o, Decimal):
        return float(o)
    raise TypeError(type(o))


# ------------------------------------------------------------------------------------------
# prose that cites numbers
# ------------------------------------------------------------------------------------------
_PROSE_NUMBER = re.compile(r"(?<![\w.\-−/])[−-]?\d+\.\d{2,}(?![\d.]*\d)(?!e)")
_NOT_PROSE = [re.compile(p, re.S) for p in (r"```.*?```", r"`[^`\n]*`", r"\{\{.*?\}\}", r"<!--.*?-->", r"\]\([^)]*\)",
                                            r"<!-- results:[\w.\-]+ -->.*?<!-- /results -->")]


def prose_numbers(text: str) -> list[str]:
    """The numbers with two or more decimals that a page's prose writes (not in code, links,
    comments, generated blocks or template directives)."""
    for pattern in (_NOT_PROSE[-1], *_NOT_PROSE[:-1]):
        text = pattern.sub(" ", text)
    return _PROSE_NUMBER.findall(text)


def data_numbers(records: list[Any]) -> list[float]:
    """Every number the records hold (tables, outputs, titles), as floats."""
    from _tables import cell_numbers

    out: list[float] = []
    for rec in records:
        for row in rec.get("rows", []):
            for value in row.values():
                out += cell_numbers(value)
        for line in [*rec.get("output", []), rec.get("title", "")]:
            out += [float(x.replace("−", "-")) for x in re.findall(r"[−-]?\d+\.\d+", line)]
    return out


def uncited(text: str, numbers: list[float]) -> list[str]:
    """The prose numbers of ``text`` that no record holds (to the decimals the prose writes)."""
    have = set()
    for y in numbers:
        for d in range(2, 7):
            have.add(round(y, d))
    missing = []
    for n in prose_numbers(text):
        x = float(n.replace("−", "-"))
        if round(x, len(n.split(".")[1])) not in have:
            missing.append(n)
    return missing
