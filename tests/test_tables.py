"""windtunnel.tables: the Markdown table every page windtunnel writes is built with."""

from windtunnel.tables import table


def test_a_cell_stays_on_its_row_and_in_its_column():
    # a recorded command line with a line break and a pipe (what a process monitor may capture)
    lines = table(["job", "beside"], [["a", "python -c from x import y\nfrom z | w"]])
    assert lines == ["| job | beside |", "|---|---|", "| a | python -c from x import y from z \\| w |"]
