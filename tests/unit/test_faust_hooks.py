"""Every Faust internal pairjudge replaces or reads (``streams.faust_compat.HOOKS``) is still there, still
overridden by pairjudge, and still called by the Faust code the index names.

A Faust upgrade that renames a hook, or stops calling it, would otherwise go unnoticed until a crash
lost a pair: these checks read the installed Faust, not a copy of it.
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

import pytest

from pairjudge.streams.faust_compat import HOOKS, Hook


def resolve(path: str) -> Any:
    module, _, qualname = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def ids(hook: Hook) -> str:
    return f"{hook.faust_class.rsplit(':', 1)[1]}.{hook.attribute}"


@pytest.mark.parametrize("hook", HOOKS, ids=ids)
def test_faust_still_has_the_attribute(hook: Hook) -> None:
    faust_class = resolve(hook.faust_class)
    has = hasattr(faust_class, hook.attribute) or hook.attribute in inspect.getsource(faust_class)
    assert has, f"{hook.faust_class} has no {hook.attribute} any more: {hook.why}"


@pytest.mark.parametrize("hook", HOOKS, ids=ids)
def test_the_named_faust_caller_still_uses_it(hook: Hook) -> None:
    caller = resolve(hook.caller)
    # A mode ``@Service.task`` method is a ServiceTask wrapping the function.
    source = inspect.getsource(getattr(caller, "fun", caller))
    assert re.search(rf"\b{re.escape(hook.attribute)}\b", source), f"{hook.caller} no longer uses {hook.attribute}"


@pytest.mark.parametrize("hook", [h for h in HOOKS if h.kind == "overrides"], ids=ids)
def test_pairjudge_really_overrides_it(hook: Hook) -> None:
    ours = resolve(hook.ours)
    faust_class = resolve(hook.faust_class)
    assert inspect.isclass(ours)
    assert issubclass(ours, faust_class), f"{hook.ours} is not a {hook.faust_class}"
    assert hook.attribute in vars(ours), f"{hook.ours} does not define {hook.attribute}"


@pytest.mark.parametrize("hook", [h for h in HOOKS if h.kind != "overrides"], ids=ids)
def test_pairjudge_code_names_what_it_sets_or_reads(hook: Hook) -> None:
    source = inspect.getsource(resolve(hook.ours))
    assert re.search(rf"\b{re.escape(hook.attribute)}\b", source), f"{hook.ours} does not touch {hook.attribute}"


def test_every_override_in_the_package_is_indexed() -> None:
    """A new override of a Faust method in faust_compat must be added to HOOKS (and so to these checks)."""
    indexed = {(h.ours, h.attribute) for h in HOOKS}
    missing = []
    for hook in {h.ours for h in HOOKS if h.kind == "overrides"}:
        ours = resolve(hook)
        bases = [b for b in ours.__mro__[1:] if b.__module__.split(".")[0] in ("faust", "mode")]
        for name, value in vars(ours).items():
            if name.startswith("__") or not callable(value):
                continue
            if any(name in vars(b) for b in bases) and (hook, name) not in indexed:
                missing.append(f"{hook}.{name}")
    assert not missing, f"overrides of Faust missing from faust_compat.HOOKS: {missing}"
