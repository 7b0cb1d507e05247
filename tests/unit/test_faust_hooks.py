"""Every Faust internal pairjudge replaces, reads or calls (``streams.faust_compat.HOOKS``) is still there, still
overridden by pairjudge, still called by the Faust code the index names, and, where pairjudge calls or reads
it, still of the signature (or declared type) it was verified with.

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


def declared(owner: Any, attribute: str) -> str:
    """A member's shape as ``Hook.signature`` pins it: a method's signature, else the attribute's declared type
    (from the class or a base), else its value."""
    member = inspect.getattr_static(owner, attribute, None)
    if inspect.isfunction(member):
        return str(inspect.signature(member))
    for klass in owner.__mro__:
        annotations = inspect.get_annotations(klass)
        if attribute in annotations:
            return repr(annotations[attribute])
    return repr(member)


@pytest.mark.parametrize("hook", [h for h in HOOKS if h.signature is not None], ids=ids)
def test_what_pairjudge_calls_still_has_the_signature_it_was_verified_with(hook: Hook) -> None:
    found = declared(resolve(hook.faust_class), hook.attribute)
    assert found == hook.signature, f"{hook.faust_class}.{hook.attribute} is now {found}: {hook.why}"


def test_every_private_method_or_state_pairjudge_calls_or_updates_is_pinned() -> None:
    """A new "calls" or "updates" contact must say what shape it relies on, or the check above would skip it."""
    unpinned = [ids(h) for h in HOOKS if h.kind in ("calls", "updates") and h.signature is None]
    assert not unpinned, f"give these HOOKS entries a signature: {unpinned}"


def test_the_signature_check_sees_a_changed_member(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: the check reads the installed class, so another parameter or another value shows."""
    store = resolve("faust.stores.rocksdb:Store")
    pinned = {h.attribute: h.signature for h in HOOKS if h.faust_class == "faust.stores.rocksdb:Store"}
    assert declared(store, "_del") == pinned["_del"]

    def _del(self: Any, key: bytes, *, sync: bool = False) -> None: ...

    monkeypatch.setattr(store, "_del", _del)
    monkeypatch.setattr(store, "offset_key", b"__faust\0offset2__")
    assert declared(store, "_del") != pinned["_del"]
    assert declared(store, "offset_key") != pinned["offset_key"]


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
