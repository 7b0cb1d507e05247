"""``python -m pairjudge.streams.cli``: the same command line as ``pairjudge``."""

from pairjudge.streams.cli.main import main

main()
