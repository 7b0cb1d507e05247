"""The read API (``/api/v1``) served by the review app on 127.0.0.1: bearer tokens kept as hashes, ETags, the
OpenAPI document (served, checked in, and the real answers valid against it), and the gate's answer shared
with the pages and ``pairjudge gate``."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from pairjudge.schemas.read_api import GateAnswer, Scoreboard
from pairjudge.schemas.scores import GateUpdate
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.codecs import encode
from pairjudge.streams.review.kafka import ScoresFeed
from pairjudge.streams.review.openapi import PATHS, openapi_document
from pairjudge.streams.review.tokens import TokenFile, new_token, parse_tokens, token_digest
from pairjudge.streams.review.views import audit_context, score_boards
from pairjudge.streams.scores.read_model import gate_answer
from tests.fixtures.read_api import EXPERIMENT, serving_api, snapshots

ROOT = Path(__file__).resolve().parents[2]
CHECKED_IN = ROOT / "docs" / "reference" / "openapi.json"


def _path(kind: str) -> str:
    return {
        "experiments": "/api/v1/experiments",
        "scoreboard": "/api/v1/experiments/exp%2Fapi%201/scoreboard",
        "gate": "/api/v1/experiments/exp%2Fapi%201/gate",
        "audit": "/api/v1/audit/series",
    }[kind]


def _validate(body: Any, model: str) -> None:
    doc = json.loads(openapi_document())
    schema = {"$ref": f"#/components/schemas/{model}", "components": doc["components"]}
    jsonschema.Draft202012Validator(schema).validate(body)


async def test_no_token_is_401_an_unknown_one_401_and_one_without_the_read_role_403(tmp_path: Path) -> None:
    async with serving_api(tmp_path) as api:
        for kind in ("experiments", "scoreboard", "gate", "audit"):
            async with api.client() as anonymous:
                r = await anonymous.get(_path(kind))
            assert r.status_code == 401, kind
            assert r.headers["www-authenticate"].startswith("Bearer")
            _validate(r.json(), "ApiError")
            async with api.client("pjt_not-a-token") as stranger:
                r = await stranger.get(_path(kind))
            assert r.status_code == 401
            assert 'error="invalid_token"' in r.headers["www-authenticate"]
            async with api.client(api.write_only) as other:
                r = await other.get(_path(kind))
            assert r.status_code == 403
            assert 'error="insufficient_scope"' in r.headers["www-authenticate"]
            _validate(r.json(), "ApiError")
            async with api.client(api.read) as reader:
                assert (await reader.get(_path(kind))).status_code == 200


async def test_a_token_removed_from_the_file_is_refused_at_once(tmp_path: Path) -> None:
    async with serving_api(tmp_path) as api:
        token, line = api.mint("ci", ("read",))
        async with api.client(token) as ci:
            assert (await ci.get(_path("gate"))).status_code == 200
            kept = [x for x in api.tokens.read_text().splitlines() if x != line]
            api.tokens.write_text("\n".join(kept) + "\n")
            assert (await ci.get(_path("gate"))).status_code == 401
        async with api.client(api.read) as reader:  # the others still work
            assert (await reader.get(_path("gate"))).status_code == 200


async def test_tokens_are_kept_as_hashes_and_never_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with serving_api(tmp_path) as api:
        async with api.client(api.read) as reader:
            await reader.get(_path("gate"))
        async with api.client(api.write_only) as other:
            await other.get(_path("gate"))
        (tmp_path / "tokens").write_text(api.tokens.read_text() + f"{api.read} broken line\n")
        async with api.client(api.read) as reader:
            await reader.get(_path("gate"))
        stored = api.tokens.read_text()
    assert token_digest(api.read) in stored
    assert caplog.records, "the broken line was not reported"
    for token in (api.read, api.write_only):
        assert token not in caplog.text
        assert token not in stored.splitlines()[1]


def test_the_tokens_file_keeps_good_lines_and_skips_bad_ones(tmp_path: Path) -> None:
    token, line = new_token("argo", ("read",))
    text = f"# comment\n{line}\nsha256:abc short read\nsha256:{'0' * 64} name BadRole\n"
    parsed = parse_tokens(text)
    assert [(t.name, sorted(t.roles)) for t in parsed] == [("argo", ["read"])]
    path = tmp_path / "tokens"
    tokens = TokenFile(path)
    assert tokens.find(token) is None  # no file yet: nothing accepted
    path.write_text(text)
    found = tokens.find(token)
    assert found is not None
    assert found.may("read")
    assert not found.may("write")
    assert tokens.find(token + "x") is None
    assert TokenFile(None).find(token) is None
    with pytest.raises(ValueError, match="roles"):
        new_token("x", ("Read!",))


def test_the_token_command_prints_the_token_and_its_hash_line(tmp_path: Path) -> None:
    from pairjudge.streams.cli.main import app

    result = CliRunner().invoke(app, ["review", "token", "new", "--name", "argo-rollouts", "--role", "read"])
    assert result.exit_code == 0, result.output
    token, line = result.stdout.split()[0], " ".join(result.stdout.splitlines()[1:])
    assert token.startswith("pjt_")
    assert line == f"sha256:{token_digest(token)} argo-rollouts read"
    path = tmp_path / "tokens"
    path.write_text(line + "\n")
    assert TokenFile(path).find(token) is not None


async def test_an_unchanged_answer_is_304_with_its_etag_and_a_short_max_age(tmp_path: Path) -> None:
    async with serving_api(tmp_path) as api, api.client(api.read) as reader:
        first = await reader.get(_path("gate"))
        etag = first.headers["etag"]
        assert first.headers["cache-control"] == "private, max-age=5"
        again = await reader.get(_path("gate"), headers={"if-none-match": etag})
        assert again.status_code == 304
        assert again.content == b""
        assert again.headers["etag"] == etag
        assert (await reader.get(_path("gate"), headers={"if-none-match": '"other"'})).status_code == 200
        # A newer scoreboard is a new answer.
        newer = snapshots()[-1].model_copy(update={"updated_at": datetime(2026, 12, 2, tzinfo=UTC)})
        assert api.scores.take(encode(newer))
        changed = await reader.get(_path("gate"), headers={"if-none-match": etag})
        assert changed.status_code == 200
        assert changed.headers["etag"] != etag


def test_the_openapi_document_is_a_valid_openapi_3_1_document() -> None:
    """Checked against the OpenAPI 3.1 meta-schema by openapi-spec-validator, as client generators and API
    gateways would read it; a broken reference or a misspelt keyword fails here."""
    from openapi_spec_validator import validate

    doc = json.loads(openapi_document())
    assert doc["openapi"].startswith("3.1")
    validate(doc)


def test_the_checked_in_openapi_document_is_the_generated_one() -> None:
    assert CHECKED_IN.read_text() == openapi_document(), (
        "regenerate it: python -m pairjudge.streams.review.openapi > docs/reference/openapi.json"
    )


async def test_the_served_openapi_document_is_the_checked_in_one_and_the_answers_follow_it(tmp_path: Path) -> None:
    async with serving_api(tmp_path) as api:
        async with api.client() as anonymous:
            served = await anonymous.get("/api/v1/openapi.json")
        assert served.status_code == 200
        assert served.text == CHECKED_IN.read_text()
        doc = served.json()
        jsonschema.Draft202012Validator.check_schema({"$defs": doc["components"]["schemas"]})
        async with api.client(api.read) as reader:
            for p in PATHS:
                r = await reader.get(_path(p.handler))
                assert r.status_code == 200, p.path
                _validate(r.json(), p.model.__name__)
                assert p.path in doc["paths"]
            judge = await reader.get(_path("gate"), params={"basis": "judge"})
            _validate(judge.json(), "GateAnswer")
            missing = await reader.get("/api/v1/experiments/nope/scoreboard")
            assert missing.status_code == 404
            _validate(missing.json(), "ApiError")
            assert (await reader.get(_path("gate"), params={"basis": "both"})).status_code == 400
            unknown = (await reader.get("/api/v1/experiments/nope/gate")).json()
            assert (unknown["decision"], unknown["exit_code"]) == ("continue", 2)


async def test_the_api_gives_both_bases_with_their_intervals_and_labels(tmp_path: Path) -> None:
    snap = snapshots()[-1]
    async with serving_api(tmp_path) as api, api.client(api.read) as reader:
        listed = (await reader.get(_path("experiments"))).json()["experiments"]
        board = Scoreboard.model_validate((await reader.get(listed[0]["scoreboard"])).json())
        human = GateAnswer.model_validate((await reader.get(listed[0]["gate"])).json())
        judge = GateAnswer.model_validate((await reader.get(listed[0]["gate"] + "?basis=judge")).json())
        series = (await reader.get(_path("audit"))).json()["series"]
    assert [e["experiment"] for e in listed] == [EXPERIMENT]
    assert listed[0]["gate"] == _path("gate")
    assert board.human is not None
    assert snap.human_basis is not None
    assert board.human.labels == snap.human_basis.labels
    assert board.human.anytime is not None
    assert (board.human.anytime.low, board.human.anytime.high) == (
        snap.human_basis.anytime_low,
        snap.human_basis.anytime_high,
    )
    assert board.judge.wins == snap.overall.wins
    assert [g.basis for g in board.gates] == ["human", "judge"]
    # The biased judge: it promotes; people do not (yet).
    assert (human.decision, human.exit_code) == ("continue", 2)
    assert (judge.decision, judge.exit_code) == ("promote", 0)
    assert human.labels_needed is not None
    assert judge.progress_share == 1.0
    assert judge.leaning == "promote"
    assert series[0]["cohen_kappa"] == 0.55
    assert series[0]["kappa_interval"] == {"low": 0.4, "high": 0.7, "level": 0.95, "kind": "single_look"}


def test_the_page_the_api_and_the_cli_give_the_same_gate(tmp_path: Path) -> None:
    """The scores and audit pages' gates and the API's answers come from ``gate_answer``; ``pairjudge gate`` exits
    with its exit code (``gate_reader`` calls it on the gate topic's update, which carries the same two gates)."""
    from pairjudge.streams.scores.gate_reader import EXIT_CODES

    snap = snapshots()[-1]
    settings = Settings()
    scores = ScoresFeed(settings)
    scores.take(encode(snap))
    page = audit_context(None, scores, settings.audit)["gates"][0]
    (board,) = score_boards(scores.latest)
    update = GateUpdate(experiment=EXPERIMENT, gate=snap.gate, human=snap.human_gate, decided_at=snap.updated_at)
    for basis in ("human", "judge"):
        answer = gate_answer(EXPERIMENT, basis, update.gate, update.human, update.decided_at)
        assert page[basis] == f"{answer.decision}: {answer.reason}"
        shown = getattr(board["view"], basis).gate
        assert (shown.decision, shown.reason, shown.detail) == (answer.decision, answer.reason, answer.detail)
        assert EXIT_CODES[answer.decision] == answer.exit_code
    paused = gate_answer(EXPERIMENT, "judge", update.gate, update.human, update.decided_at, paused_by="olga")
    assert (paused.decision, paused.exit_code) == ("continue", 2)
    assert paused.refused is not None
    assert "olga" in paused.refused


def test_no_api_route_is_served_without_the_token_guard() -> None:
    """Every data path goes through ``with_token``; only the OpenAPI document is open."""
    from pairjudge.streams.review.read_api import ReadApi, api_routes

    routes = api_routes(ReadApi(TokenFile(None)))
    open_paths = [r.path for r in routes if getattr(r.endpoint, "__qualname__", "").split(".")[0] != "with_token"]
    assert open_paths == ["/api/v1/openapi.json"]


def test_the_reference_page_lists_every_path_and_every_answer() -> None:
    from pairjudge_dev.docs_reference import expand

    page = expand((ROOT / "docs" / "reference" / "read-api.md").read_text())
    doc = json.loads(openapi_document())
    for p in PATHS:
        assert f"`GET {p.path}`" in page
    for name in doc["components"]["schemas"]:
        assert f"### {name} " in page
