"""The docs site's generated reference (pairjudge_dev.docs_reference) and the README that points into it.

- Every field of ``Settings`` (every section's, the top level's, and those of the models inside a field such
  as the review users) is rendered with its variable, found here by walking the class independently.
- Every command and group of the CLI is rendered with each of its parameters, every exported JSON Schema
  with each of its properties, every Faust hook of ``faust_compat.HOOKS`` with its attribute.
- The reference pages hold their markers, and an unknown marker stops the build.
- The README stays a front door (at most 250 lines, the two commands CI runs), and every link in it resolves.
- The docs and the README name only paths, modules and ``PAIRJUDGE_`` variables that exist.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from pairjudge.schemas.export import EXPORTED
from pairjudge.streams.capture.litellm_exchange import CALLBACK_VARIABLES
from pairjudge.streams.cli import app
from pairjudge.streams.config import Settings
from pairjudge.streams.config.settings import ReviewUser
from pairjudge.streams.faust_compat import HOOKS
from pairjudge_dev import docs_reference
from pairjudge_dev.docs_reference import (
    MARKER,
    RENDERERS,
    expand,
    render_cli,
    render_events,
    render_faust_hooks,
    render_settings,
)

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def _section(markdown: str, heading: str) -> str:
    """The text under ``heading`` (a whole heading line) up to the next heading of the same or a higher level."""
    level = heading.split(" ", 1)[0]
    markdown = "\n" + markdown
    assert f"\n{heading}\n" in markdown, f"no heading {heading!r}"
    start = markdown.index(f"\n{heading}\n")
    rest = markdown[start + len(heading) + 2 :]
    ends = [m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", rest, re.M)]
    return rest[: ends[0]] if ends else rest


def _rows(markdown: str) -> dict[str, str]:
    """Table rows by their first cell's code span."""
    return {m.group(1): m.group(0) for m in re.finditer(r"^\| `([^`]+)` \|.*$", markdown, re.M)}


# --- settings ----------------------------------------------------------------------------------------


def _expected_variables(settings: type[BaseModel]) -> set[str]:
    """PAIRJUDGE_<SECTION>__<FIELD> for every section field, PAIRJUDGE_<FIELD> for the rest."""
    names = set()
    for name, field in settings.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            names |= {f"PAIRJUDGE_{name.upper()}__{sub.upper()}" for sub in field.annotation.model_fields}
        else:
            names.add(f"PAIRJUDGE_{name.upper()}")
    return names


def test_every_settings_field_is_rendered_with_its_variable_type_and_default() -> None:
    page = render_settings()
    rows = _rows(page)
    expected = _expected_variables(Settings)
    assert len(expected) > 100
    missing = expected - set(rows)
    assert not missing, sorted(missing)
    for variable in expected:
        cells = [c.strip() for c in rows[variable].strip("|").split(" | ")]
        assert len(cells) == 4, rows[variable]
        assert cells[1], f"{variable}: no type in {rows[variable]}"
        assert cells[2], f"{variable}: no default in {rows[variable]}"
    assert f"({len(expected)} settings)" in page


def test_the_models_inside_a_field_are_rendered_too() -> None:
    page = render_settings()
    # The review users: a list of ReviewUser, each field of which a reviewer's entry takes.
    users = _section(page, "### ReviewUser")
    assert set(ReviewUser.model_fields) <= set(_rows(users)), users
    # A juror takes the judge's fields, and a named rubric is an event contract.
    assert "Each `JudgeSettings` item takes the fields of [judge](#judge)." in page
    assert "(events.md#def-tonestylerubric)" in page


def test_every_setting_in_the_reference_says_what_it_means() -> None:
    """Every row of the generated page, the models inside a field included, has a meaning: the ``#:`` comment
    above its field (or a ``Field`` description). A field added without one fails here, naming it."""
    page = render_settings()
    rows = list(re.finditer(r"^\| `([^`]+)` \|.*$", page, re.M))
    assert len(rows) >= len(_expected_variables(Settings)) + len(ReviewUser.model_fields)
    empty = {m.group(1) for m in rows if not m.group(0).strip().strip("|").split(" | ")[-1].strip()}
    missing = sorted(empty)
    assert not missing, f"settings without a description (a #: comment above the field): {missing}"


def test_descriptions_come_from_the_field_or_the_comment_above_it() -> None:
    class Section(BaseModel):
        """A section of its own."""

        #: How many, said in a comment
        #: on two lines.
        count: int = Field(default=3, ge=1)
        described: str = Field(default="x", description="Said in the field.")
        bare: bool = False

    class Small(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="DEMO_", env_nested_delimiter="__")

        section: Section = Section()
        #: A top-level number.
        limit: float = 2.5

    rows = _rows(render_settings(Small))
    assert "How many, said in a comment on two lines." in rows["DEMO_SECTION__COUNT"]
    assert "≥ 1" in rows["DEMO_SECTION__COUNT"]
    assert "Said in the field." in rows["DEMO_SECTION__DESCRIBED"]
    assert "`false`" in rows["DEMO_SECTION__BARE"]
    assert "A top-level number." in rows["DEMO_LIMIT"]
    assert "A section of its own." in render_settings(Small)


# --- the CLI -----------------------------------------------------------------------------------------


def _commands(command: Any, path: str) -> dict[str, Any]:
    """Every command and group by its full path, walked from typer's click tree."""
    found = {path: command}
    for name, child in getattr(command, "commands", {}).items():
        found |= _commands(child, f"{path} {name}")
    return found


def test_every_cli_command_and_parameter_is_rendered() -> None:
    page = render_cli()
    commands = _commands(typer.main.get_command(app), "pairjudge")
    assert len(commands) > 20, sorted(commands)
    for path, command in commands.items():
        if path == "pairjudge":
            section = page[: page.index("\n## ")]
        else:
            heading = "#" * min(path.count(" ") + 1, 4) + " " + path
            assert f"\n{heading}\n" in page, f"{path} is not rendered"
            section = _section(page, heading)
        assert f"Usage: {path}" in section, path
        for param in command.params:
            if param.name == "help":
                continue
            flag = param.opts[0]
            assert f"`{flag}" in section or f", {flag}" in section, f"{path}: {flag} is not rendered"


# --- the event contracts and the Faust hooks ---------------------------------------------------------


def test_every_exported_contract_and_property_is_rendered() -> None:
    page = render_events()
    for model in EXPORTED:
        section = _section(page, f"## {model.__name__}")
        schema = json.loads(json.dumps(model.model_json_schema()))
        assert set(schema.get("properties", {})) <= set(_rows(section)), model.__name__
    # Every definition a contract refers to has its own anchored section.
    for ref in set(re.findall(r"\(#(def-[\w-]+)\)", page)):
        assert f"{{#{ref}}}" in page, ref


def test_every_faust_hook_is_rendered() -> None:
    page = render_faust_hooks()
    assert len(HOOKS) > 10
    for hook in HOOKS:
        assert f"`{hook.attribute}`" in page, hook


def test_the_reference_pages_hold_their_markers_and_an_unknown_marker_stops_the_build() -> None:
    pages = {
        "reference/cli.md": ["cli"],
        "reference/settings.md": ["settings"],
        "reference/events.md": ["topics", "outcomes", "events"],
        "reference/read-api.md": ["read-api"],
        "guides/python-api.md": ["outcomes"],
        "operations/secured-kafka.md": ["worker-writes"],
        "index.md": ["pipeline"],
        "design.md": ["faust-hooks"],
        "getting-started/configuration.md": ["live-settings"],
        "guides/risk-levels.md": ["risk-thresholds"],
    }
    assert {name for names in pages.values() for name in names} == set(RENDERERS)
    for page, names in pages.items():
        assert [m.group(1) for m in MARKER.finditer((DOCS / page).read_text())] == names, page
    with pytest.raises(ValueError, match="unknown reference 'nope'"):
        expand("text\n<!-- pairjudge-reference: nope -->\n")


def test_the_included_files_exist() -> None:
    for source in docs_reference.INCLUDED.values():
        assert (ROOT / source).is_file(), source


# --- the README and what the docs name ---------------------------------------------------------------


def test_the_readme_is_a_front_door_with_the_commands_ci_runs() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    assert "```bash\npython3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/pairjudge demo\n```" in text
    # The live demo, as tests/integration/test_live_demo_browser.py runs it.
    assert "```bash\n.venv/bin/pip install -e '.[review,report]' && .venv/bin/pairjudge demo --serve\n```" in text
    assert "```bash\nbash .ci/run\n```" in text
    ci = (ROOT / ".ci" / "run").read_text()
    steps = re.findall(r"^step \"[^\"]+\" (.+)$", ci, re.M)
    assert steps[-2:] == ['make docs VENV="$VENV"', 'make test VENV="$VENV"'], steps


def _slug(heading: str) -> str:
    """Python-Markdown's toc id for a heading (its text, code marks dropped), or its explicit ``{#id}``."""
    explicit = re.search(r"\{#([\w.-]+)\}\s*$", heading)
    if explicit:
        return explicit.group(1)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def test_every_link_in_the_readme_resolves() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", README.read_text())
    assert len(links) > 30
    for link in links:
        if re.match(r"^[a-z]+://", link):
            continue
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.exists(), link
        if anchor:
            assert anchor in _anchors(target), f"{link}: no such heading"


def _docs_texts() -> dict[str, str]:
    pages = {str(p.relative_to(ROOT)): p.read_text() for p in sorted(DOCS.rglob("*.md"))}
    pages["README.md"] = README.read_text()
    return pages


CHECKED_FOLDERS = "agents|streams|schemas|pairjudge_dev|bench|deploy|tests|evaldata"
#: Named in the docs, never in the repository: made by a script, or by the tests.
NOT_IN_THE_REPOSITORY = ("deploy/compose/secrets/",)


def test_the_docs_name_only_paths_and_modules_that_exist() -> None:
    """A file moved or removed without its docs fails here, naming the page."""
    missing = []
    for page, text in _docs_texts().items():
        for path in re.findall(rf"`((?:{CHECKED_FOLDERS})/[\w./-]*)`", text):
            if "*" in path or path.startswith(NOT_IN_THE_REPOSITORY):
                continue
            if not (ROOT / path).exists():
                missing.append(f"{page}: {path}")
        for dotted in re.findall(r"`(pairjudge\.(?:streams|agents|schemas)(?:\.\w+)+)`", text):
            if not _resolves(dotted):
                missing.append(f"{page}: {dotted}")
    assert not missing, missing


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


#: PAIRJUDGE_ variables that are not settings: the config file's path, the tests' and tools' own, and the LiteLLM
#: callback's (read in the proxy's process, beside pairjudge's settings).
NOT_SETTINGS = {
    "PAIRJUDGE_CONFIG",
    "PAIRJUDGE_TEST_BOOTSTRAP",
    "PAIRJUDGE_KUSTOMIZE",
    "PAIRJUDGE_PROMTOOL",
    *CALLBACK_VARIABLES,
}


def test_the_docs_name_only_variables_that_exist() -> None:
    variables = _expected_variables(Settings) | NOT_SETTINGS
    unknown = []
    for page, text in _docs_texts().items():
        for name in set(re.findall(r"PAIRJUDGE_[A-Z0-9_]+\*?", text)):
            prefix = name.removesuffix("*")
            if name in variables or (prefix.endswith("_") and any(v.startswith(prefix) for v in variables)):
                continue
            unknown.append(f"{page}: {name}")
    assert not unknown, sorted(unknown)
