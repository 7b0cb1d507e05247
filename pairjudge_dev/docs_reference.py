"""The docs site's reference pages, generated from the code so that they cannot drift from it.

- **CLI**: the typer app (``pairjudge.streams.cli.app``), walked as the click command tree typer builds
  from it: each command's usage, help and parameters, as ``--help`` gives them.
- **Settings**: the pydantic-settings ``Settings`` class (``pairjudge.streams.config``): every field of every
  section, its environment variable (the class's own prefix and nesting delimiter), type, default, bounds
  and description (a ``Field`` description, or the ``#:`` comment above the field).
- **Event contracts**: the JSON Schemas that ``pairjudge schemas export`` writes
  (``pairjudge.schemas.export.export_json_schemas``), with each property's description taken from the
  schema, else from the ``#:`` comment in the model.
- **The Faust overrides** (the design's §10): ``pairjudge.streams.faust_compat.HOOKS``, one row a hook.
- **The kinds registries** (``pairjudge.schemas.kinds``, ``pairjudge.schemas.outcomes``): the topics with their
  keys and contracts, the outcome kinds, the live control keys with what each takes, and the risk levels'
  thresholds. A policy setting that is a live key says
  so in the settings reference.

It is a mkdocs hook (``hooks:`` in mkdocs.yml): a page holding ``<!-- pairjudge-reference: NAME -->``
(NAME one of ``RENDERERS``: ``cli``, ``settings``, ``events``, ``read-api``, ``faust-hooks``, and the kinds registries'
``topics``, ``outcomes``, ``worker-writes``, ``live-settings`` and ``risk-thresholds``, and ``pipeline``, the
README's drawing) gets the rendered
reference in its place, and the READMEs kept beside the code they describe (``INCLUDED``) are added to the site
as they are. To read one page without building the site::

    python -m pairjudge_dev.docs_reference settings
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import re
import sys
import tempfile
import textwrap
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"<!--\s*pairjudge-reference:\s*([\w-]+)\s*-->")
#: Included in the site as it is, beside the pages of docs/ (site path, checkout path).
INCLUDED = {
    "operations/bench-figures.md": "bench/README.md",
    "operations/deploy-details.md": "deploy/README.md",
    "operations/k8s-details.md": "deploy/k8s/README.md",
}

# --- shared helpers ----------------------------------------------------------------------------------


def _rst_to_md(text: str) -> str:
    """Docstrings and comments use RST's ``code``; Markdown's is `code`."""
    return re.sub(r"``(.+?)``", lambda m: "`" + " ".join(m.group(1).split()) + "`", text, flags=re.S)


def _cell(text: str) -> str:
    """Text safe in one Markdown table cell: one line, no bare pipe."""
    return " ".join(text.split()).replace("|", "\\|")


def _code(text: str) -> str:
    """Inline code that survives any backticks inside it."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def field_comments(cls: type) -> dict[str, str]:
    """The ``#:`` comment block right above each annotated field of ``cls`` and its bases, by field name."""
    comments: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not isinstance(klass, type) or klass.__module__.startswith("pydantic"):
            continue
        try:
            lines = textwrap.dedent(inspect.getsource(klass)).splitlines()
        except (OSError, TypeError):
            continue
        tree = ast.parse("\n".join(lines))
        node = tree.body[0]
        if not isinstance(node, ast.ClassDef):
            continue
        for statement in node.body:
            if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
                continue
            block: list[str] = []
            above = statement.lineno - 2
            while above >= 0 and lines[above].strip().startswith("#:"):
                block.insert(0, lines[above].strip()[2:].strip())
                above -= 1
            if block:
                comments[statement.target.id] = " ".join(block)
    return comments


def _paragraphs(text: str) -> str:
    """Docstring text as Markdown: RST code made Markdown's, each paragraph on one line."""
    paragraphs = [" ".join(p.split()) for p in _rst_to_md(inspect.cleandoc(text)).split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)


def _class_doc(cls: type) -> str:
    doc = cls.__dict__.get("__doc__")
    return _paragraphs(doc) if isinstance(doc, str) and doc.strip() else ""


def _number(value: object) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


# --- the CLI -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandDoc:
    """One command of the tree, as ``--help`` describes it."""

    path: str  # "pairjudge labels import"
    usage: str
    help: str
    is_group: bool
    #: (kind, flags and metavar, help with its default, required) per parameter, --help left out.
    params: tuple[tuple[str, str, str, bool], ...]
    subcommands: tuple[str, ...]


def _typer_app() -> Any:
    from pairjudge.streams.cli import app

    return app


def cli_commands(app: Any = None, prog: str = "pairjudge") -> list[CommandDoc]:
    """Every command and group of the typer ``app``, depth first, in the order ``--help`` lists them."""
    import typer

    root = typer.main.get_command(_typer_app() if app is None else app)
    docs: list[CommandDoc] = []

    def walk(command: Any, ctx: Any, path: str) -> None:
        params: list[tuple[str, str, str, bool]] = []
        help_names = set(command.get_help_option_names(ctx)) if command.add_help_option else set()
        for param in command.get_params(ctx):
            if getattr(param, "hidden", False) or help_names & set(param.opts):
                continue
            record = param.get_help_record(ctx)
            flags, text = record if record else (param.human_readable_name, "")
            params.append((param.param_type_name, flags, text, bool(param.required)))
        names = list(command.list_commands(ctx)) if hasattr(command, "list_commands") else []
        children = [(name, command.get_command(ctx, name)) for name in names]
        children = [(name, child) for name, child in children if child is not None and not child.hidden]
        docs.append(
            CommandDoc(
                path=path,
                usage=command.get_usage(ctx).strip(),
                help=inspect.cleandoc(command.help or ""),
                is_group=hasattr(command, "list_commands"),
                params=tuple(params),
                subcommands=tuple(f"{path} {name}" for name, _ in children),
            )
        )
        for name, child in children:
            walk(child, child.context_class(child, info_name=name, parent=ctx), f"{path} {name}")

    walk(root, root.context_class(root, info_name=prog), prog)
    return docs


def _anchor(text: str) -> str:
    """The id Python-Markdown's toc gives a heading of plain words."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def _help_markdown(text: str) -> str:
    """Click help (``\\b`` blocks, RST code) as Markdown paragraphs."""
    return _paragraphs(text.replace("\b\n", ""))


def render_cli(app: Any = None) -> str:
    """The CLI reference page's body: one section per command, with usage, help and parameters."""
    parts: list[str] = []
    for command in cli_commands(app):
        depth = command.path.count(" ")
        heading = "#" * min(2 + max(depth - 1, 0), 4)
        if depth == 0:
            parts.append(_help_markdown(command.help))
            parts.append(f"```text\n{command.usage}\n```")
        else:
            parts.append(f"{heading} {command.path}")
            parts.append(f"```text\n{command.usage}\n```")
            if command.help:
                parts.append(_help_markdown(command.help))
        if command.params:
            rows = [(kind, _code(flags), _cell(_rst_to_md(text)) or " ") for kind, flags, text, _ in command.params]
            parts.append(_table(("", "parameter", "meaning"), rows))
        if command.subcommands:
            links = [f"[`{sub}`](#{_anchor(sub)})" for sub in command.subcommands]
            parts.append(("Commands: " if depth == 0 else "Subcommands: ") + ", ".join(links) + ".")
    return "\n\n".join(parts) + "\n"


# --- the settings ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SettingDoc:
    env: str  # PAIRJUDGE_KAFKA__PARTITIONS
    path: str  # kafka.partitions
    type: str
    default: str
    bounds: str
    description: str


@dataclass(frozen=True)
class SectionDoc:
    name: str  # "kafka", or "" for the top-level fields
    model: str  # the class, e.g. "KafkaSettings"
    doc: str
    settings: tuple[SettingDoc, ...]
    #: Models that appear inside a field (a list item, a dict value) and have fields of their own.
    item_models: tuple[type[BaseModel], ...]


def _settings_class() -> type[BaseModel]:
    from pairjudge.streams.config import Settings

    return Settings


def _union_args(tp: Any) -> tuple[Any, ...] | None:
    return get_args(tp) if get_origin(tp) in (Union, types.UnionType) else None


def type_name(tp: Any) -> str:
    """A reader's name for a field's type: `string`, `list of ReviewUser`, one of `a`, `b`..."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        return type_name(args[0])
    if origin is Literal:
        return "one of " + ", ".join(_code(str(a)) for a in args)
    union = _union_args(tp)
    if union is not None:
        named = [type_name(a) for a in union if a is not type(None)]
        text = " or ".join(named)
        return f"{text} (optional)" if type(None) in union else text
    if origin in (tuple, list, set, frozenset):
        return f"list of {type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"object of {type_name(args[1])}" if args else "object"
    simple = {bool: "boolean", int: "integer", float: "number", str: "string", SecretStr: "secret", Path: "path"}
    if tp in simple:
        return simple[tp]
    if isinstance(tp, type) and issubclass(tp, Enum):
        return "one of " + ", ".join(_code(str(m.value)) for m in tp)
    return getattr(tp, "__name__", str(tp))


def _models_in(tp: Any) -> Iterator[type[BaseModel]]:
    """The models a field's type carries (list items, dict values, union members), not the type itself."""
    for arg in get_args(tp):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            yield arg
        elif not isinstance(arg, FieldInfo):
            yield from _models_in(arg)


def _default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, SecretStr):
        value = value.get_secret_value()  # a default written in the code, never a deployment's secret
    if isinstance(value, bool):
        return _code("true" if value else "false")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, tuple | list | dict) and not value:
        return "empty"
    if isinstance(value, BaseModel | tuple | list | dict):
        return _code(json.dumps(value if not isinstance(value, BaseModel) else value.model_dump(mode="json")))
    return _code(str(value)) if str(value) else '`""`'


def _bounds_text(field: FieldInfo) -> str:
    marks: list[str] = []
    for meta in field.metadata:
        for attr, sign in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")):
            bound = getattr(meta, attr, None)
            if isinstance(meta, annotated_types.BaseMetadata) and bound is not None:
                marks.append(f"{sign} {_number(bound)}")
        if isinstance(meta, annotated_types.MinLen):
            marks.append(f"length ≥ {meta.min_length}")
        if isinstance(meta, annotated_types.MaxLen):
            marks.append(f"length ≤ {meta.max_length}")
        pattern = getattr(meta, "pattern", None)
        if isinstance(pattern, str):
            marks.append(f"matches {_code(pattern)}")
    return ", ".join(marks)


#: Appended to the description of a policy setting that is also a live control key (``schemas.kinds.CONTROLS``).
LIVE_NOTE = "A live setting ([live settings](../getting-started/configuration.md#live-settings))."


def _is_live(model: type[BaseModel], name: str) -> bool:
    from pairjudge.schemas.kinds import CONTROLS
    from pairjudge.streams.config.sections import PolicySettings

    return model is PolicySettings and name in CONTROLS


def _setting_docs(model: type[BaseModel], env_prefix: str, path_prefix: str) -> list[SettingDoc]:
    comments = field_comments(model)
    docs = []
    for name, field in model.model_fields.items():
        description = field.description or comments.get(name, "")
        if _is_live(model, name):
            description = f"{description} {LIVE_NOTE}".strip()
        docs.append(
            SettingDoc(
                env=f"{env_prefix}{name.upper()}",
                path=f"{path_prefix}{name}",
                type=type_name(field.annotation),
                default=_default_text(field),
                bounds=_bounds_text(field),
                description=_rst_to_md(description),
            )
        )
    return docs


def settings_sections(settings: type[BaseModel] | None = None) -> list[SectionDoc]:
    """Every section of ``Settings`` (a field whose type is a model), then its top-level fields."""
    cls = _settings_class() if settings is None else settings
    config: Any = cls.model_config
    prefix = str(config.get("env_prefix", "")).upper()
    nested = str(config.get("env_nested_delimiter") or "__")
    sections: list[SectionDoc] = []
    top_level: dict[str, FieldInfo] = {}
    comments = field_comments(cls)
    for name, field in cls.model_fields.items():
        tp = field.annotation
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            docs = _setting_docs(tp, f"{prefix}{name.upper()}{nested}", f"{name}.")
            items = {m for f in tp.model_fields.values() for m in _models_in(f.annotation)}
            doc = field.description or comments.get(name, "") or _class_doc(tp)
            sections.append(SectionDoc(name, tp.__name__, _rst_to_md(doc), tuple(docs), tuple(_ordered(items))))
        else:
            top_level[name] = field
    if top_level:
        docs = []
        for name, field in top_level.items():
            docs.append(
                SettingDoc(
                    env=f"{prefix}{name.upper()}",
                    path=name,
                    type=type_name(field.annotation),
                    default=_default_text(field),
                    bounds=_bounds_text(field),
                    description=_rst_to_md(field.description or comments.get(name, "")),
                )
            )
        items = {m for f in top_level.values() for m in _models_in(f.annotation)}
        sections.append(SectionDoc("", cls.__name__, "", tuple(docs), tuple(_ordered(items))))
    return sections


def _ordered(models: set[type[BaseModel]]) -> list[type[BaseModel]]:
    return sorted(models, key=lambda m: m.__name__)


def all_settings(settings: type[BaseModel] | None = None) -> list[SettingDoc]:
    return [doc for section in settings_sections(settings) for doc in section.settings]


def _settings_rows(docs: tuple[SettingDoc, ...], *, env: bool) -> str:
    rows = []
    for doc in docs:
        first = _code(doc.env) if env else _code(doc.path.rsplit(".", 1)[-1])
        kind = f"{doc.type}, {doc.bounds}" if doc.bounds else doc.type
        rows.append((first, _cell(kind), _cell(doc.default), _cell(doc.description) or " "))
    return _table(("variable" if env else "field", "type", "default", "meaning"), rows)


def render_settings(settings: type[BaseModel] | None = None) -> str:
    """The settings reference page's body: a table per section, every field with its variable."""
    cls = _settings_class() if settings is None else settings
    config: Any = cls.model_config
    prefix = str(config.get("env_prefix", ""))
    nested = str(config.get("env_nested_delimiter") or "__")
    module = sys.modules[cls.__module__]
    config_env = getattr(module, "CONFIG_ENV", None)
    sections = settings_sections(cls)
    section_models = {s.model for s in sections}
    parts = [
        f"Every setting is an environment variable: the prefix {_code(prefix)}, then the section and the field "
        f"in upper case, joined by {_code(nested)}. Lists and objects take JSON. "
        + (
            f"{_code(config_env)} names a TOML file holding the same settings by section (`[judge]`, "
            "`[[jury]]`, `[rubrics.<name>]`); the environment wins over it. "
            if config_env
            else ""
        )
        + f"Generated from `{cls.__module__}.{cls.__name__}` ({len(all_settings(cls))} settings)."
    ]
    documented_items: set[str] = set()
    for section in sections:
        if section.name:
            parts.append(f"## {section.name}")
            parts.append(f"{_code(prefix + section.name.upper() + nested + '*')}, `{section.model}`.")
        else:
            parts.append("## Top level")
            parts.append(f"Fields of `{section.model}` itself, outside any section.")
        if section.doc:
            parts.append(section.doc)
        parts.append(_settings_rows(section.settings, env=True))
        for model in section.item_models:
            if model.__name__ in section_models:
                owner = next(s.name for s in sections if s.model == model.__name__)
                parts.append(f"Each `{model.__name__}` item takes the fields of [{owner}](#{_anchor(owner)}).")
                continue
            if model.__name__ in documented_items:
                continue
            documented_items.add(model.__name__)
            if model.__module__.startswith("pairjudge.schemas"):
                parts.append(
                    f"`{model.__name__}` is an event contract: its fields are in the "
                    f"[event contracts](events.md#{_def_anchor(model.__name__)})."
                )
                continue
            parts.append(f"### {model.__name__}")
            intro = _class_doc(model)
            parts.append((intro + "\n\n" if intro else "") + "Each item has these fields:")
            parts.append(_settings_rows(tuple(_setting_docs(model, "", f"{model.__name__}.")), env=False))
    return "\n\n".join(parts) + "\n"


# --- the event contracts -----------------------------------------------------------------------------


def exported_schemas() -> list[tuple[str, dict[str, Any]]]:
    """(file name, schema) for every file ``pairjudge schemas export`` writes, in its order."""
    from pairjudge.schemas.export import export_json_schemas

    with tempfile.TemporaryDirectory() as tmp:
        return [(path.name, json.loads(path.read_text())) for path in export_json_schemas(Path(tmp))]


def _model_registry() -> dict[str, type[BaseModel]]:
    """Every model reachable from the exported contracts, by class name (the schemas' titles)."""
    from pairjudge.schemas.export import EXPORTED

    seen: dict[str, type[BaseModel]] = {}
    todo: list[type[BaseModel]] = list(EXPORTED)
    while todo:
        model = todo.pop()
        if model.__name__ in seen:
            continue
        seen[model.__name__] = model
        for field in model.model_fields.values():
            todo.extend(_models_in(field.annotation))
            if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
                todo.append(field.annotation)
    return seen


def _def_anchor(name: str) -> str:
    return "def-" + _anchor(name)


def schema_type(node: dict[str, Any]) -> str:
    """A JSON Schema node in a few words, with links to the definitions it refers to."""
    if "$ref" in node:
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        return f"[{name}](#{_def_anchor(name)})"
    if "const" in node:
        return _code(json.dumps(node["const"]))
    if "enum" in node:
        return "one of " + ", ".join(_code(json.dumps(v)) for v in node["enum"])
    for key in ("anyOf", "oneOf", "allOf"):
        if key in node:
            members = [schema_type(n) for n in node[key] if n.get("type") != "null"]
            text = " or ".join(members)
            return f"{text} or null" if any(n.get("type") == "null" for n in node[key]) else text
    kind = node.get("type")
    if kind == "array":
        if "prefixItems" in node:
            return "[" + ", ".join(schema_type(n) for n in node["prefixItems"]) + "]"
        return f"array of {schema_type(node.get('items', {}))}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"object of {schema_type(node['additionalProperties'])}"
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind:
        fmt = node.get("format")
        return f"{kind} ({fmt})" if fmt else str(kind)
    return "any"


def _constraints(node: dict[str, Any]) -> str:
    keys = {
        "minimum": "≥",
        "exclusiveMinimum": ">",
        "maximum": "≤",
        "exclusiveMaximum": "<",
        "minLength": "length ≥",
        "maxLength": "length ≤",
        "minItems": "items ≥",
        "maxItems": "items ≤",
    }
    marks = [f"{sign} {_number(node[key])}" for key, sign in keys.items() if key in node]
    if "pattern" in node:
        marks.append(f"matches {_code(str(node['pattern']))}")
    return ", ".join(marks)


def _properties_table(schema: dict[str, Any], model: type[BaseModel] | None) -> str:
    comments = field_comments(model) if model is not None else {}
    required = set(schema.get("required", ()))
    rows = []
    for name, node in schema.get("properties", {}).items():
        description = node.get("description") or comments.get(name, "")
        default = _code(json.dumps(node["default"])) if "default" in node else ""
        rows.append(
            (
                _code(name),
                _cell(schema_type(node)),
                "yes" if name in required else "",
                _cell(default),
                _cell(_constraints(node)),
                _cell(_rst_to_md(description)) or " ",
            )
        )
    if not rows:
        return "No fields."
    return _table(("field", "type", "required", "default", "bounds", "meaning"), rows)


def render_events() -> str:
    """The event contracts page's body: each exported schema's fields, then every shared definition."""
    registry = _model_registry()
    parts: list[str] = []
    definitions: dict[str, dict[str, Any]] = {}
    for filename, schema in exported_schemas():
        title = str(schema.get("title", filename))
        model = registry.get(title)
        parts.append(f"## {title}")
        doc = schema.get("description") or (_class_doc(model) if model else "")
        parts.append(f"`{filename}`" + (f": {_rst_to_md(' '.join(str(doc).split()))}" if doc else ""))
        parts.append(_properties_table(schema, model))
        refs = sorted(set(re.findall(r'"#/\$defs/([^"]+)"', json.dumps(schema))))
        if refs:
            parts.append("Refers to " + ", ".join(f"[{r}](#{_def_anchor(r)})" for r in refs) + ".")
        for name, node in schema.get("$defs", {}).items():
            if name in definitions and definitions[name] != node:
                raise ValueError(f"two exported schemas define {name} differently")
            definitions[name] = node
    parts.append("## Definitions")
    parts.append("The types the contracts above refer to (`$defs` in their schemas).")
    for name in sorted(definitions):
        node = definitions[name]
        parts.append(f"### {name} {{#{_def_anchor(name)}}}")
        model = registry.get(name)
        doc = node.get("description") or (_class_doc(model) if model else "")
        if doc:
            parts.append(_rst_to_md(" ".join(str(doc).split())))
        if "properties" in node:
            parts.append(_properties_table(node, model))
        else:
            parts.append(f"{schema_type(node)}.")
    return "\n\n".join(parts) + "\n"


# --- the Faust overrides -----------------------------------------------------------------------------


def faust_hooks() -> tuple[Any, ...]:
    """``pairjudge.streams.faust_compat.HOOKS``: every point where pairjudge touches Faust's internals."""
    from pairjudge.streams import faust_compat

    hooks: tuple[Any, ...] = tuple(faust_compat.HOOKS)
    return hooks


def _short(path: str) -> str:
    """``module:Name`` as ``Name`` (module), for a table cell."""
    module, _, name = path.partition(":")
    return f"{_code(name)} ({_code(module)})" if name else _code(module)


def render_faust_hooks(hooks: tuple[Any, ...] | None = None) -> str:
    """The design's §10 list: one row per hook, grouped by pairjudge's module."""
    rows = []
    for hook in faust_hooks() if hooks is None else hooks:
        rows.append(
            (
                _short(hook.faust_class),
                _code(hook.attribute),
                _cell(str(getattr(hook, "kind", "overrides"))),
                _short(hook.ours),
                _short(hook.caller),
                _cell(hook.why),
            )
        )
    header = ("Faust class", "attribute", "how", "pairjudge", "called by", "why")
    return _table(header, rows) + "\n"


# --- the kinds registry: topics, live settings, risk thresholds ---------------------------------------

_MODEL_REF = re.compile(r"\{(\w+)\}")


def render_topics() -> str:
    """The events page's topic table: every topic kind of ``schemas.kinds.TOPICS``, its key and contracts."""
    from pairjudge.schemas.kinds import TOPICS

    rows = []
    for kind, spec in TOPICS.items():
        topic = _code(f"pairjudge.{kind}") + (" (compacted)" if spec.single_partition else "")
        # Each contract's own section ("## CandidatePair"), further down the events page.
        contract = _MODEL_REF.sub(lambda m: f"[{m.group(1)}](#{_anchor(m.group(1))})", spec.contract)
        rows.append((topic, _cell(spec.key), _cell(contract)))
    return _table(("topic", "key", "contract"), rows) + "\n"


def render_pipeline() -> str:
    """The README's pipeline drawing (its first fenced block), so the site's front page shows the same picture."""
    text = (ROOT / "README.md").read_text()
    match = re.search(r"^```\n.*?^```\n", text, re.M | re.S)
    if match is None:
        raise ValueError("README.md has no fenced block to show")
    return match.group(0)


def render_worker_writes() -> str:
    """The topics a worker writes (``TopicKindSpec.worker_writes``), for the secured-Kafka page's ACL table."""
    from pairjudge.schemas.kinds import TOPICS

    return ", ".join(_code(f"P.{kind}") for kind, spec in TOPICS.items() if spec.worker_writes)


def render_outcomes() -> str:
    """Every outcome kind (``schemas.outcomes.OUTCOMES``): its topic, event, Python API class, results row and when.

    Links point at the events page from any page one folder deep (``guides/``, ``reference/``)."""
    from pairjudge.schemas.outcomes import OUTCOMES
    from pairjudge.streams.api.outcomes import WRAPPERS

    rows = []
    for kind, entry in OUTCOMES.items():
        event = entry.event.__name__
        rows.append(
            (
                _code(kind),
                _code(f"pairjudge.{entry.topic}"),
                f"[{event}](../reference/events.md#{_anchor(event)})",
                _code(WRAPPERS[kind].__name__),
                _code(entry.row),
                _cell(entry.when) + ("" if entry.ends_story else " (not the end of the pair's story)"),
            )
        )
    header = ("kind", "topic", "event", "Python API", "`evaluate` row", "when")
    return _table(header, rows) + "\n"


def _control_takes(key: str, spec: Any) -> str:
    from pairjudge.streams.config.sections import PolicySettings

    if spec.value == "switch":
        return "`true` or `false`"
    if spec.value == "choice":
        return "one of " + ", ".join(_code(word) for word in spec.choices)
    if spec.value == "text":
        return "a text (its setting says what it lists)"
    field = PolicySettings.model_fields.get(key)
    bounds = _bounds_text(field) if field is not None else ""
    return f"a number, {bounds}" if bounds else "a number"


def render_live_settings() -> str:
    """The live control keys (``schemas.kinds.CONTROLS``): what each takes, its setting and default, its meaning."""
    from pairjudge.schemas.kinds import CONTROLS
    from pairjudge.streams.config.sections import PolicySettings

    comments = field_comments(PolicySettings)
    rows = []
    for key, spec in CONTROLS.items():
        field = PolicySettings.model_fields.get(key)
        if field is None:
            configured, default, meaning = "no setting", "`false`", spec.about
        else:
            configured = _code(f"PAIRJUDGE_POLICY__{key.upper()}")
            default, meaning = _default_text(field), field.description or comments.get(key, "")
        takes = _control_takes(key, spec)
        rows.append((_code(key), _cell(takes), configured, _cell(default), _cell(_rst_to_md(meaning))))
    return _table(("key", "takes", "configured by", "default", "meaning"), rows) + "\n"


def render_risk_thresholds() -> str:
    """The risk levels' three thresholds each (``schemas.kinds.RISK_THRESHOLDS``), with their defaults."""
    from pairjudge.schemas.kinds import RISK_THRESHOLDS
    from pairjudge.streams.config.sections import PolicySettings

    def cell(key: str) -> str:
        return f"{_code(key)} ({_default_text(PolicySettings.model_fields[key])})"

    rows = [(_code(level), *(cell(key) for key in keys)) for level, keys in RISK_THRESHOLDS.items()]
    header = ("level", "primary verdict needs", "tie-break reply needs", "review below")
    return _table(header, rows) + "\n"


# --- the mkdocs hook ---------------------------------------------------------------------------------


def render_read_api() -> str:
    """The read API reference's body, from its OpenAPI document: the paths, then each response's fields."""
    from pairjudge.schemas import read_api
    from pairjudge.streams.review.openapi import openapi_document

    doc = json.loads(openapi_document())
    rows = []
    for path, item in doc["paths"].items():
        op = item["get"]
        answer = op["responses"]["200"]["content"]["application/json"]["schema"]
        statuses = ", ".join(code for code in op["responses"] if code != "200")
        rows.append((_code(f"GET {path}"), _cell(schema_type(answer)), _cell(op["description"]), statuses))
    parts = [_table(("path", "answer", "what", "other answers"), rows), "## Answers"]
    for name, node in sorted(doc["components"]["schemas"].items()):
        model = getattr(read_api, name, None)
        parts.append(f"### {name} {{#{_def_anchor(name)}}}")
        description = node.get("description") or (_class_doc(model) if model else "")
        if description:
            parts.append(_rst_to_md(" ".join(str(description).split())))
        parts.append(_properties_table(node, model))
    return "\n\n".join(parts) + "\n"


RENDERERS: dict[str, Callable[[], str]] = {
    "read-api": render_read_api,
    "cli": render_cli,
    "settings": render_settings,
    "events": render_events,
    "faust-hooks": render_faust_hooks,
    "topics": render_topics,
    "outcomes": render_outcomes,
    "pipeline": render_pipeline,
    "worker-writes": render_worker_writes,
    "live-settings": render_live_settings,
    "risk-thresholds": render_risk_thresholds,
}


def expand(markdown: str) -> str:
    """``markdown`` with every reference marker replaced by its rendered page body."""

    def render(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in RENDERERS:
            raise ValueError(f"unknown reference {name!r} (known: {', '.join(RENDERERS)})")
        return RENDERERS[name]()

    return MARKER.sub(render, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs hook: render the reference markers of a page."""
    return expand(markdown)


def on_files(files: Any, config: Any) -> Any:
    """mkdocs hook: add the files that live outside docs/ (``INCLUDED``) as pages of the site."""
    from mkdocs.structure.files import File

    root = Path(config.config_file_path).resolve().parent
    for site_path, source in INCLUDED.items():
        text = (root / source).read_text()
        note = f'!!! note "This page is `{source}`"\n\n    Kept beside what it describes, and shown here as it is.\n\n'
        files.append(File.generated(config, site_path, content=note + text))
    return files


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Print one generated reference page (Markdown).")
    parser.add_argument("page", choices=sorted(RENDERERS))
    args = parser.parse_args(argv)
    print(RENDERERS[args.page](), end="")


if __name__ == "__main__":
    main()
