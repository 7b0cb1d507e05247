"""The read API's OpenAPI document, generated from its response models (``schemas.read_api``) by pydantic's JSON
Schema: served at ``/api/v1/openapi.json`` and checked in at ``docs/reference/openapi.json`` (a test holds the two
equal). Regenerate the checked-in copy with
``python -m pairjudge.streams.review.openapi > docs/reference/openapi.json``.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from pairjudge.schemas.read_api import (
    API_VERSION,
    ApiError,
    AuditSeriesList,
    Experiments,
    GateAnswer,
    Scoreboard,
)

REF = "#/components/schemas/{model}"


@dataclass(frozen=True, slots=True)
class ApiPath:
    path: str
    handler: str
    model: type[BaseModel]
    summary: str
    description: str
    #: Answers 404 for an experiment without a scoreboard.
    may_be_missing: bool = False
    query: tuple[dict[str, Any], ...] = ()

    @property
    def starlette(self) -> str:
        """The route's path for Starlette, which matches the decoded path: an experiment's name may hold a slash."""
        return self.path.replace("{experiment}", "{experiment:path}")


_EXPERIMENT = {
    "name": "experiment",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "The experiment's name, as the pairs carry it (URL-encoded).",
}
_BASIS = {
    "name": "basis",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "enum": ["human", "judge"], "default": "human"},
    "description": "human: what people would decide (the default); judge: the judge's opinion, not people's.",
}

PATHS = (
    ApiPath(
        f"/api/{API_VERSION}/experiments",
        "experiments",
        Experiments,
        "Every experiment with a scoreboard",
        "Each experiment's latest scoreboard in brief: its pairs, labels and both gates' decisions.",
    ),
    ApiPath(
        f"/api/{API_VERSION}/experiments/{{experiment}}/scoreboard",
        "scoreboard",
        Scoreboard,
        "An experiment's scoreboard on both bases",
        "The challenger's win rate as people would judge it and as the judge does, with their intervals, the "
        "labels they rest on, both gates and the per-rubric and per-traffic splits.",
        may_be_missing=True,
        query=(),
    ),
    ApiPath(
        f"/api/{API_VERSION}/experiments/{{experiment}}/gate",
        "gate",
        GateAnswer,
        "The gate's decision with its evidence",
        "promote, reject or continue, why, and what it rests on; the same answer `pairjudge gate` exits with "
        "(exit_code). An experiment without a scoreboard yet answers continue.",
        query=(_BASIS,),
    ),
    ApiPath(
        f"/api/{API_VERSION}/audit/series",
        "audit",
        AuditSeriesList,
        "The drift audit's series",
        "Each series' latest window: how far the judge agrees with people, beside people's agreement with each other.",
    ),
)


def _response(description: str, model: str, headers: bool = False) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": REF.format(model=model)}}},
    }
    if headers:
        answer["headers"] = {
            "ETag": {"schema": {"type": "string"}, "description": "A hash of the body; send it as If-None-Match."},
            "Cache-Control": {"schema": {"type": "string"}, "description": "private, max-age=5"},
        }
    return answer


def _operation(p: ApiPath) -> dict[str, Any]:
    params: list[dict[str, Any]] = [_EXPERIMENT] if "{experiment}" in p.path else []
    params += list(p.query)
    params.append(
        {"name": "If-None-Match", "in": "header", "required": False, "schema": {"type": "string"}},
    )
    responses = {
        "200": _response("The answer.", p.model.__name__, headers=True),
        "304": {"description": "Not modified since the ETag sent as If-None-Match."},
        "401": _response("No token, or a token that is not known (WWW-Authenticate: Bearer).", "ApiError"),
        "403": _response("The token has no read role.", "ApiError"),
    }
    if p.may_be_missing:
        responses["404"] = _response("No scoreboard published for this experiment.", "ApiError")
    if p.query:
        responses["400"] = _response("A query parameter is not one the path takes.", "ApiError")
    return {
        "operationId": p.handler,
        "summary": p.summary,
        "description": p.description,
        "parameters": params,
        "security": [{"bearer": []}],
        "responses": responses,
    }


@functools.cache
def openapi_document() -> str:
    """The document as JSON text (sorted keys, indented): the bytes served and checked in."""
    models: list[type[BaseModel]] = [p.model for p in PATHS] + [ApiError]
    _, schemas = models_json_schema([(m, "serialization") for m in models], ref_template=REF)
    doc = {
        "openapi": "3.1.0",
        "info": {
            "title": "pairjudge read API",
            "version": API_VERSION,
            "description": "The scoreboards, the deployment gate and the drift audit, read-only, for delivery "
            "tools and dashboards. Every data path needs a bearer token with the read role "
            "(`pairjudge review token new`).",
        },
        "paths": {p.path: {"get": _operation(p)} for p in PATHS},
        "components": {
            "schemas": schemas["$defs"],
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(openapi_document(), end="")
