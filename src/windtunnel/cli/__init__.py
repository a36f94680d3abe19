"""The ``windtunnel`` command (``app``): the commands that train (:mod:`~windtunnel.cli.runs`) and
those that look (:mod:`~windtunnel.cli.tools`), on the options they share (:mod:`~windtunnel.cli.common`)."""

from windtunnel.cli import runs, tools  # noqa: F401  (registers the commands)
from windtunnel.cli.common import app


def main() -> None:  # pragma: no cover
    app()
