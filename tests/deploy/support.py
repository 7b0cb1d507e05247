"""Shared by the deployment tests: which ``PAIRJUDGE_*`` names are real settings."""

from __future__ import annotations

import re

from pydantic import BaseModel

from pairjudge.streams.config.settings import Settings

#: A pairjudge setting's environment variable, as written anywhere in a manifest.
SETTING_NAME = re.compile(r"\bPAIRJUDGE_[A-Z0-9_]+\b")


def setting_problem(name: str) -> str | None:
    """Why ``name`` is not a variable pairjudge's Settings reads (``PAIRJUDGE_<SECTION>__<FIELD>`` or a
    top-level ``PAIRJUDGE_<FIELD>``), or None when it is one. Settings ignores unknown top-level names and
    a section rejects unknown fields only when its variable is set, so a typo would otherwise pass silently
    or fail only at start-up."""
    if not name.startswith("PAIRJUDGE_"):
        return f"{name}: not a PAIRJUDGE_ variable"
    rest = name.removeprefix("PAIRJUDGE_").lower()
    section, sep, field = rest.partition("__")
    top = Settings.model_fields.get(section)
    if top is None:
        return f"{name}: Settings has no field or section {section!r}"
    model = top.annotation
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return f"{name}: {section!r} is not a section" if sep else None
    if not sep:
        # A whole section as JSON is legal for pydantic-settings, but the deployments set single values.
        return f"{name}: {section!r} is a whole section, not one setting"
    inner = model.model_fields.get(field)
    if inner is None:
        return f"{name}: section {section!r} has no field {field!r}"
    if isinstance(inner.annotation, type) and issubclass(inner.annotation, BaseModel):
        return f"{name}: {section}.{field} is a whole section, not one setting"
    return None
