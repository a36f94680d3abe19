"""The fenced code blocks of README.md and docs/*.md, and how the test of the docs treats each.

Every ``bash`` (``sh``, ``shell``) and ``python`` block is preceded by a marker comment, the
last non-blank line before its opening fence::

    <!-- docs: fast -->                      run in CI (tests/docs/test_docs.py)
    <!-- docs: slow -->                      run by `make test-slow` (reduced steps)
    <!-- docs: fails 2 -->                   run in CI; must exit with code 2 (an error example)
    <!-- docs: illustrative (needs a GPU) --> never run; the reason is required

A marker may add clauses, separated by ``;``, for the commands of a shell block that contain a
quoted pattern: ``<!-- docs: fast; slow "windtunnel train"; illustrative "--device cuda" (needs a
GPU) -->``. A command takes the first clause whose pattern it contains, else the first clause
(which has no pattern). A python block is one unit and takes the first clause. A ``json`` block
may carry ``<!-- docs: file NAME -->``: the test writes it to NAME in its working folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL = {"bash", "sh", "shell"}
RUNNABLE = SHELL | {"python"}
KINDS = ("fast", "slow", "fails", "illustrative", "file")

_MARKER = re.compile(r"^<!--\s*docs:\s*(?P<body>.*?)\s*-->$")
_CLAUSE = re.compile(
    r'^(?P<kind>[a-z]+)(?:\s+(?P<code>\d+))?(?:\s+"(?P<pattern>[^"]+)")?(?:\s+(?P<name>[\w.\-/]+))?'
    r"(?:\s*\((?P<reason>[^()]*(?:\([^()]*\)[^()]*)*)\))?$"
)
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")


class MarkerError(ValueError):
    """A marker that does not parse, or one that does not fit its block."""


@dataclass(frozen=True)
class Clause:
    kind: str  # fast | slow | fails | illustrative | file
    code: int = 0  # expected exit code
    pattern: str | None = None  # commands containing it take this clause
    reason: str = ""
    name: str = ""  # file: the file name


@dataclass(frozen=True)
class Command:
    text: str  # as the shell reads it: continuation lines joined
    line: int  # 1-based line of its first line in the file
    clause: Clause

    @property
    def kind(self) -> str:
        return self.clause.kind


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    body: str
    clauses: tuple[Clause, ...] = ()
    error: str = ""  # why the marker is missing or invalid ("" when it is fine)
    commands: tuple[Command, ...] = field(default=())

    @property
    def name(self) -> str:
        try:
            rel = self.path.relative_to(ROOT)
        except ValueError:
            rel = self.path
        return f"{rel}:{self.line}"

    @property
    def kind(self) -> str:
        return self.clauses[0].kind if self.clauses else ""

    def kinds(self) -> set[str]:
        """The kinds of its commands (a python block's: its own)."""
        return {c.kind for c in self.commands} if self.lang in SHELL else {self.kind}


def parse_marker(text: str) -> tuple[Clause, ...]:
    """The clauses of one marker comment (``<!-- docs: ... -->``); raises :class:`MarkerError`."""
    m = _MARKER.match(text.strip())
    if not m:
        raise MarkerError(f"not a docs marker: {text.strip()!r}")
    clauses = []
    for i, part in enumerate(p.strip() for p in _split_clauses(m["body"])):
        c = _CLAUSE.match(part)
        if not c or c["kind"] not in KINDS:
            raise MarkerError(f"bad clause {part!r}; a clause is KIND [CODE] [\"pattern\"] [(reason)], "
                              f"KIND one of {', '.join(KINDS)}")
        kind, code = c["kind"], c["code"]
        if (kind == "fails") != (code is not None):
            raise MarkerError(f"clause {part!r}: 'fails' takes the expected exit code (fails 2), no other kind does")
        if kind == "fails" and int(code) == 0:
            raise MarkerError(f"clause {part!r}: an expected failure needs a non-zero exit code")
        if kind == "illustrative" and not (c["reason"] or "").strip():
            raise MarkerError(f"clause {part!r}: say why it is illustrative, e.g. illustrative (needs a GPU)")
        if (kind == "file") != bool(c["name"]):
            raise MarkerError(f"clause {part!r}: 'file' takes a file name (file my_sweep.json), no other kind does")
        if (i == 0) == bool(c["pattern"]):
            raise MarkerError(f"clause {part!r}: the first clause has no pattern, every later one has one")
        clauses.append(Clause(kind, int(code or 0), c["pattern"], (c["reason"] or "").strip(), c["name"] or ""))
    return tuple(clauses)


def _split_clauses(body: str) -> list[str]:
    """``body`` split at the semicolons outside quotes and parentheses."""
    parts, depth, quoted, cur = [], 0, False, ""
    for ch in body:
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in "()":
            depth += 1 if ch == "(" else -1
        elif ch == ";" and not quoted and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    return [*parts, cur]


def split_commands(body: str, first_line: int, clauses: tuple[Clause, ...]) -> tuple[Command, ...]:
    """The commands of a shell block: one per line, backslash continuations joined, comment
    lines and blank lines skipped; each with the clause that applies to it."""
    out: list[Command] = []
    pending: list[str] = []
    start = 0
    for i, raw in enumerate(body.splitlines()):
        if not pending:
            start = first_line + i
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
        if raw.endswith("\\"):
            pending.append(raw[:-1])
            continue
        text = "\n".join([*pending, raw]) if pending else raw
        pending = []
        out.append(Command(text, start, _clause_for(text, clauses)))
    if pending:
        out.append(Command("\n".join(pending), start, _clause_for("\n".join(pending), clauses)))
    return tuple(out)


def _clause_for(text: str, clauses: tuple[Clause, ...]) -> Clause:
    return next((c for c in clauses[1:] if c.pattern in text), clauses[0])


def parse_blocks(path: Path, text: str | None = None) -> list[Block]:
    """Every fenced block of one markdown file, with its marker (if any) parsed."""
    lines = (text if text is not None else Path(path).read_text()).splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m["fence"], m["lang"].lower()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        body = "\n".join(lines[i + 1:j])
        prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        clauses: tuple[Clause, ...] = ()
        error = ""
        if _MARKER.match(prev.strip()):
            try:
                clauses = parse_marker(prev)
            except MarkerError as exc:
                error = str(exc)
        elif lang in RUNNABLE:
            error = "no <!-- docs: ... --> marker before this block (fast, slow, fails N or illustrative (why))"
        if clauses and not error:
            error = _check_fit(lang, clauses)
        commands = split_commands(body, i + 2, clauses) if lang in SHELL and clauses and not error else ()
        blocks.append(Block(Path(path), i + 1, lang, body, clauses, error, commands))
        i = j + 1
    return blocks


def _check_fit(lang: str, clauses: tuple[Clause, ...]) -> str:
    if clauses[0].kind == "file":
        return "" if lang not in RUNNABLE else "a 'file' marker belongs before a data block (json, text), not code"
    if lang not in RUNNABLE:
        return f"a ```{lang or 'plain'} block is not run; only 'file NAME' markers apply to it"
    if lang == "python" and len(clauses) > 1:
        return "a python block is run whole: give it one clause"
    if any(c.kind == "file" for c in clauses):
        return "'file' cannot be a clause of a code block"
    return ""


def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md and every page of docs/ (the generated results pages included)."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def all_blocks(root: Path = ROOT) -> list[Block]:
    return [b for p in doc_files(root) for b in parse_blocks(p)]
