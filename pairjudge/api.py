"""``from pairjudge.api import Evaluator, compare, tie_break``: the short name of ``pairjudge.streams.api``."""

from pairjudge.streams.api import *  # noqa: F403 - the whole public API, as it lists it
from pairjudge.streams.api import __all__ as __all__
from pairjudge.streams.api.outcomes import *  # noqa: F403 - its outcome wrappers, which it lists by their module's list
