"""Settings, read from the environment (``PAIRJUDGE_`` prefix, ``__`` for nesting) and secret files."""

from pairjudge.streams.config.settings import Settings, load_settings

__all__ = ["Settings", "load_settings"]
