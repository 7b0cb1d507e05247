"""The base every contract shares: frozen, strict about unknown fields, versioned."""

from __future__ import annotations

from typing import Annotated, Final, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationInfo, model_validator

#: Every contract version this code can read. A new version is added here (and handled) in the
#: consumers first; producers switch to it only once every consumer accepts it
#: (docs/reference/events.md#schema-versions).
SupportedVersion = Literal[1, 2, 3]
SUPPORTED_SCHEMA_VERSIONS: Final[tuple[int, ...]] = get_args(SupportedVersion)
#: The version this code writes: bumped when a contract changes incompatibly. Version 2 added
#: conversations (``Task.messages``, ``Candidate.turns``) and ``CandidatePair.risk_level``; a version 1 event
#: is still read, and may not carry them. Version 3 added tools (``Task.tools``, tool turns in
#: ``Task.messages``, ``Candidate.tool_calls``); a version 1 or 2 event is still read, and may not carry them
#: (docs/reference/events.md#schema-versions).
SCHEMA_VERSION: Final = 3


def _exact_int(value: object) -> object:
    # Literal[1] alone takes true and 1.0, which equal 1 in Python, and the lax mode would take "1":
    # a version is a JSON integer or it is not a version. bool is an int subclass, hence type() is.
    if type(value) is not int:
        raise ValueError(f"schema_version must be an integer, one of {SUPPORTED_SCHEMA_VERSIONS}")
    return value


#: Unknown or malformed versions fail validation (the codec dead-letters them as
#: ``unsupported_schema_version``); nothing is coerced and no version is guessed.
SchemaVersion = Annotated[SupportedVersion, BeforeValidator(_exact_int)]


class Contract(BaseModel):
    """A wire contract. Unknown fields are an error, never silently dropped."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")


class Event(Contract):
    """A contract that travels on a topic on its own, so it carries its version."""

    schema_version: SchemaVersion = SCHEMA_VERSION

    @model_validator(mode="before")
    @classmethod
    def _unversioned_is_version_1(cls, data: object, info: ValidationInfo) -> object:
        # Producers wrote no schema_version before it was checked, and what they wrote is version 1; an
        # event built in code gets the current version instead. Only a read from the wire says which
        # (``WIRE_CONTEXT``), since both arrive here as a dict without the field.
        if isinstance(data, dict) and "schema_version" not in data and info.context == WIRE_CONTEXT:
            return {**data, "schema_version": 1}
        return data


#: The validation context of an event read from bytes (``model_validate(..., context=WIRE_CONTEXT)``):
#: an event without ``schema_version`` is then version 1, nested events included.
WIRE_CONTEXT: Final = {"source": "wire"}
