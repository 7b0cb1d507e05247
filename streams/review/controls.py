"""The operators' page's live controls, each in plain words: what it does, its unit, the values it allows and
where the value in force comes from (a live change, the configuration, or the default).

The words are the control registry's (``schemas.kinds.CONTROLS``); the allowed range is the ``policy`` setting's
own (``streams.config.sections.PolicySettings``), so the page cannot drift from what the workers accept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import annotated_types
from pydantic import BaseModel

from pairjudge.schemas import ControlUpdate
from pairjudge.schemas.kinds import CONTROLS
from pairjudge.streams.config.sections import PolicySettings


@dataclass(frozen=True, slots=True)
class ControlRow:
    key: str
    #: "switch", "number" or "choice": the form's field.
    kind: str
    label: str
    meaning: str
    unit: str
    allowed: str
    choices: tuple[str, ...]
    configured: str
    #: The value every worker uses now (None: the control topic is still being read).
    live: str | None
    #: Where ``live`` comes from, in words.
    source: str


def _number(value: float) -> str:
    return f"{value:g}"


def allowed_range(key: str) -> str:
    """The values the ``policy`` setting ``key`` accepts, in words ("0 to 1", "0 or more")."""
    spec = CONTROLS[key]  # type: ignore[index]
    if spec.value == "switch":
        return "on or off"
    if spec.value == "choice":
        return ", ".join(spec.choices)
    low, low_open, high = None, False, None
    for bound in PolicySettings.model_fields[key].metadata:
        if isinstance(bound, annotated_types.Ge):
            low = float(bound.ge)  # type: ignore[arg-type]
        elif isinstance(bound, annotated_types.Gt):
            low, low_open = float(bound.gt), True  # type: ignore[arg-type]
        elif isinstance(bound, annotated_types.Le):
            high = float(bound.le)  # type: ignore[arg-type]
    if low is not None and high is not None:
        return f"more than {_number(low)}, up to {_number(high)}" if low_open else f"{_number(low)} to {_number(high)}"
    if low is not None:
        return f"more than {_number(low)}" if low_open else f"{_number(low)} or more"
    return "any number"


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return _number(value)
    return str(value)


def control_rows(configured: object, live: object | None, overrides: Mapping[str, ControlUpdate]) -> list[ControlRow]:
    """One row per control on the operators' form, in the registry's order. ``configured`` is the ``policy``
    settings section: the keys it was given (environment, settings file) are its ``model_fields_set``."""
    given = configured.model_fields_set if isinstance(configured, BaseModel) else set()
    rows = []
    for key, spec in CONTROLS.items():
        if not spec.on_form:
            continue
        if key in overrides:
            update = overrides[key]
            source = (
                f"set live by {update.updated_by} at {update.updated_at:%Y-%m-%d %H:%M:%S} UTC"
                f" (configured: {_shown(getattr(configured, key))})"
            )
        elif key in given:
            source = f"from the configuration (PAIRJUDGE_POLICY__{key.upper()} or the settings file)"
        else:
            source = "the default"
        rows.append(
            ControlRow(
                key=key,
                kind=spec.value,
                label=spec.label,
                meaning=spec.meaning,
                unit=spec.unit,
                allowed=allowed_range(key),
                choices=spec.choices,
                configured=_shown(getattr(configured, key)),
                live=None if live is None else _shown(getattr(live, key)),
                source=source,
            )
        )
    return rows
