"""Fixtures shared by the tests of several packages."""

import pytest

from windtunnel.cli.terminal import cells


@pytest.fixture
def assert_printed_as_in():
    """``check(output, markdown, first)``: the table row of ``markdown`` whose first cell is
    ``first`` is printed as one line of aligned cells, every cell (every number) as the file has it."""

    def check(output: str, markdown: str, first: str) -> None:
        row = next(cells(line) for line in markdown.splitlines() if line.startswith(f"| {first} |"))
        line = next(line for line in output.splitlines() if line.startswith(first + " "))
        at = 0
        for cell in row:
            assert cell in line[at:], f"{cell!r} is not printed after column {at} of {line!r}"
            at = line.index(cell, at) + len(cell)

    return check
