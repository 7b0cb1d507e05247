"""No module under ``streams/`` touches a private part of httpx or aiohttp (issue 36, item 6).

A private part is anything whose name starts with one underscore (dunders are the language's): a private
module (``httpx._utils``), a private attribute reached from the library's names (``aiohttp.ClientSession._request``),
a private member of one of their objects, reached directly (``client._transport_for_url(url)``) or by name
(``getattr(client, "_transport_for_url")``), or a private hook overridden in a subclass (``_init_transport``). The
judges once reached past httpx's client through ``_transport_for_url``; they now use aiohttp's public API only.

The scan reads the source (AST), so it cannot know every value's type: a member reached on something other than
``self``/``cls`` counts when its name is a private member of httpx or aiohttp (found by walking both packages)
and the module itself defines no member of that name. A contact that must stay goes into ``INDEXED``, with the
reason, and into the project's index of private contacts (docs/design.md §10), which guards it by version.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STREAMS = ROOT / "streams"
LIBRARIES = ("httpx", "aiohttp", "httpx_aiohttp")
GETATTR_FAMILY = frozenset({"getattr", "setattr", "hasattr", "delattr"})

#: (module path relative to the checkout, private name) pairs allowed because they are indexed. None today.
INDEXED: frozenset[tuple[str, str]] = frozenset()


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _library(dotted: str) -> str | None:
    top = dotted.split(".", 1)[0]
    return top if top in LIBRARIES else None


@cache
def library_private_names() -> frozenset[str]:
    """Every private name httpx and aiohttp define on their modules and classes."""
    names: set[str] = set()
    for top in ("httpx", "aiohttp"):
        package = importlib.import_module(top)
        modules = [package]
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{top}."):
            try:
                modules.append(importlib.import_module(info.name))
            except ImportError:  # optional extras (aiohttp.worker needs gunicorn)
                continue
        for module in modules:
            for name, value in vars(module).items():
                if is_private(name):
                    names.add(name)
                if inspect.isclass(value) and _library(value.__module__):
                    names.update(n for n in dir(value) if is_private(n))
    return frozenset(names)


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _own_names(tree: ast.Module) -> set[str]:
    """The private names the module defines itself: functions, classes, attributes assigned on ``self``/``cls``."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            own.add(node.target.id)
    return own


def private_contacts(source: str, filename: str = "<source>") -> list[str]:
    """Each contact with a private part of httpx or aiohttp in ``source``, as ``line: what``."""
    tree = ast.parse(source, filename)
    bound: dict[str, str] = {}  # local name -> the library it comes from
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if lib := _library(alias.name):
                    bound[(alias.asname or alias.name).split(".", 1)[0]] = lib
                    if any(is_private(part) for part in alias.name.split(".")):
                        found.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and (lib := _library(node.module)):
            private_module = any(is_private(part) for part in node.module.split("."))
            for alias in node.names:
                bound[alias.asname or alias.name] = lib
                if private_module or is_private(alias.name):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
    if not bound:
        return found
    library_private = library_private_names()
    own = _own_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            root = _root_name(node.value)
            reached_from_library = root in bound
            library_member = root not in ("self", "cls") and node.attr in library_private and node.attr not in own
            if reached_from_library or library_member:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in GETATTR_FAMILY
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and is_private(node.args[1].value)
            and node.args[1].value in library_private
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ClassDef) and any(_root_name(base) in bound for base in node.bases):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and is_private(item.name):
                    found.append(f"{item.lineno}: {node.name}.{item.name} overrides a library hook")
    return sorted(set(found), key=lambda line: int(line.split(":", 1)[0]))


def streams_modules() -> Iterator[Path]:
    yield from sorted(STREAMS.rglob("*.py"))


def test_no_module_under_streams_touches_a_private_part_of_httpx_or_aiohttp() -> None:
    offending: dict[str, list[str]] = {}
    for path in streams_modules():
        relative = path.relative_to(ROOT).as_posix()
        contacts = [
            line
            for line in private_contacts(path.read_text(), relative)
            if (relative, line.split(": ", 1)[1].split("(", 1)[0].rsplit(".", 1)[-1]) not in INDEXED
        ]
        if contacts:
            offending[relative] = contacts
    assert offending == {}, f"private httpx/aiohttp contacts outside the index: {offending}"


def test_the_scan_sees_every_files_http_imports() -> None:
    """The scan is not vacuous: the judges' client and endpoint are among the modules it reads with aiohttp bound."""
    read = {p.relative_to(ROOT).as_posix() for p in streams_modules()}
    assert {"streams/judges/client.py", "streams/judges/http.py", "streams/telemetry/alerts.py"} <= read
    assert "_transport_for_url" in library_private_names()
    assert "_request" in library_private_names()


# What the judges' client did before issue 36 (streams/judges/client.py at 1ee0396), and other shapes a contact takes.
CONTACTS = {
    "a private method looked up by name": (
        "import httpx\n"
        "def pick(client: httpx.AsyncClient, url: httpx.URL) -> object:\n"
        "    pick = getattr(client, '_transport_for_url', None)\n"
        "    return pick(url) if callable(pick) else None\n"
    ),
    "a private method called on a client": (
        "import httpx\n"
        "def pick(client: httpx.AsyncClient, url: str) -> object:\n"
        "    return client._transport_for_url(url)\n"
    ),
    "a private hook overridden": (
        "import httpx\n"
        "class HttpxAiohttpClient(httpx.AsyncClient):\n"
        "    def _init_transport(self, **kwargs: object) -> object:\n"
        "        return None\n"
    ),
    "a private module": "from httpx._utils import get_environment_proxies\n",
    "a private attribute of the library's name": (
        "import aiohttp\n"
        "async def f(s: aiohttp.ClientSession) -> None:\n"
        "    await aiohttp.ClientSession._request(s, 'GET', 'x')\n"
    ),
    "a private member of a response": (
        "from aiohttp import ClientResponse\n"
        "def cookies(r: ClientResponse) -> object:\n"
        "    return r._raw_cookie_headers\n"
    ),
}


@pytest.mark.parametrize("source", CONTACTS.values(), ids=CONTACTS.keys())
def test_the_scan_finds_each_kind_of_contact(source: str) -> None:
    assert private_contacts(source) != []


def test_the_scan_leaves_public_use_and_the_modules_own_privates_alone() -> None:
    source = (
        "import aiohttp\n"
        "class Endpoint:\n"
        "    def __init__(self) -> None:\n"
        "        self._session: aiohttp.ClientSession | None = None\n"
        "    async def close(self, other: 'Endpoint') -> None:\n"
        "        if other._session is not None:\n"
        "            await other._session.close()\n"
        "        print(aiohttp.__version__)\n"
    )
    assert private_contacts(source) == []
