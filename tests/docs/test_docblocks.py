"""The parser of the docs' code blocks and their markers (docblocks.py)."""

import pytest
from docblocks import Clause, MarkerError, parse_blocks, parse_marker

DOC = '''# Title

<!-- docs: fast -->
```bash
windtunnel tasks        # a comment
# a comment line
windtunnel sample bijection \\
    --V 6
```

<!-- docs: fails 2; illustrative "--device cuda" (needs a GPU; or two) -->
```bash
windtunnel train --set train.nosuch=1
windtunnel llm x --device cuda
```

```text
output, not run
```

```python
print("no marker")
```

<!-- docs: file my_sweep.json -->
```json
{"name": "x"}
```
'''


def test_blocks_commands_and_markers(tmp_path):
    blocks = parse_blocks(tmp_path / "doc.md", DOC)
    assert [(b.line, b.lang) for b in blocks] == [(4, "bash"), (12, "bash"), (17, "text"), (21, "python"), (26, "json")]
    fast, fails, text, python, data = blocks
    assert [(c.line, c.text, c.kind) for c in fast.commands] == [
        (5, "windtunnel tasks        # a comment", "fast"),
        (7, "windtunnel sample bijection \n    --V 6", "fast"),
    ]
    assert [(c.kind, c.clause.code) for c in fails.commands] == [("fails", 2), ("illustrative", 0)]
    assert fails.commands[1].clause.reason == "needs a GPU; or two"
    assert fails.kinds() == {"fails", "illustrative"}
    assert not text.error and not text.clauses
    assert "no <!-- docs" in python.error
    assert data.kind == "file" and data.clauses[0].name == "my_sweep.json" and not data.error


@pytest.mark.parametrize("marker, clauses", [
    ("<!-- docs: slow -->", (Clause("slow"),)),
    ("<!-- docs: fails 4 -->", (Clause("fails", 4),)),
    ("<!-- docs: illustrative (needs the hub) -->", (Clause("illustrative", reason="needs the hub"),)),
    ('<!-- docs: fast; slow "sweep paper1-quick" -->', (Clause("fast"), Clause("slow", pattern="sweep paper1-quick"))),
])
def test_markers(marker, clauses):
    assert parse_marker(marker) == clauses


@pytest.mark.parametrize("marker, message", [
    ("<!-- docs: quick -->", "bad clause"),
    ("<!-- docs: fails -->", "expected exit code"),
    ("<!-- docs: fails 0 -->", "non-zero"),
    ("<!-- docs: slow 2 -->", "expected exit code"),
    ("<!-- docs: illustrative -->", "say why"),
    ('<!-- docs: fast "x" -->', "first clause has no pattern"),
    ("<!-- docs: fast; slow -->", "every later one has one"),
    ("<!-- docs: file -->", "file name"),
])
def test_bad_markers(marker, message):
    with pytest.raises(MarkerError, match=message):
        parse_marker(marker)


def test_markers_must_fit_their_block(tmp_path):
    doc = ('<!-- docs: file x.json -->\n```bash\nls\n```\n\n<!-- docs: fast -->\n```json\n{}\n```\n\n'
           '<!-- docs: fast; slow "x" -->\n```python\nx = 1\n```\n')
    errors = [b.error for b in parse_blocks(tmp_path / "d.md", doc)]
    assert "data block" in errors[0] and "not run" in errors[1] and "run whole" in errors[2]
