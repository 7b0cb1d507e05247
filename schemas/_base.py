"""The base every contract shares: frozen, strict about unknown fields, versioned."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

#: Bumped when a contract changes incompatibly; consumers reject versions they do not know.
SCHEMA_VERSION = 1


class Contract(BaseModel):
    """A wire contract. Unknown fields are an error, never silently dropped."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")


class Event(Contract):
    """A contract that travels on a topic on its own, so it carries its version."""

    schema_version: int = SCHEMA_VERSION
