"""The ``pairjudge`` command line: ``commands`` holds the typer app; ``demo`` and ``evaluate`` the two
commands that run the core without a deployment.
"""

from pairjudge.streams.cli.main import app, main

__all__ = ["app", "main"]
