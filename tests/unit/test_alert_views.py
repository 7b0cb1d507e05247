"""What an alert says in chat (streams.telemetry.alert_views) and how often (the webhook's rate limit): every kind's
Slack message is valid Block Kit, outside text cannot become a link or a mention, the series is named in words, the
links point at the page and the runbook, and one alert per kind and series per window gets through."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest
from pydantic import SecretStr

from pairjudge.schemas.audit import Alert, AlertKind, AuditSeries
from pairjudge.streams.app import _alert_webhook
from pairjudge.streams.config.oversight import AuditSettings
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.scores.plain import alert_series_name
from pairjudge.streams.telemetry.alert_views import RUNBOOKS, AlertLinks, slack_body
from pairjudge.streams.telemetry.alerts import AlertLimiter, AlertWebhook, webhook_body
from tests.fixtures.block_kit import block_kit_errors, check_block_kit

ROOT = Path(__file__).resolve().parents[2]
SERIES = AuditSeries(
    judge_provider="openai",
    judge_model="gpt-judge",
    judge_version="2026-11",
    prompt_template_hash="9f8e7d",
    rubric="tone_style",
    experiment_id="brand-voice-q4",
)
LINKS = AlertLinks(review_url="https://review.example.com/", runbook_url="https://docs.example.com/operations/alerts/")


def alert(kind: AlertKind = "tiebreak_rate_high", series: str = SERIES.key, message: str = "seen") -> Alert:
    return Alert(kind=kind, series=series, message=message, value=0.67, threshold=0.2)


@pytest.mark.parametrize("kind", get_args(AlertKind))
def test_every_kind_is_valid_block_kit_with_its_title_series_value_and_links(kind: AlertKind) -> None:
    body = slack_body(alert(kind), series=alert_series_name(SERIES.key), links=LINKS)
    check_block_kit(body)
    header, section, context, actions = body["blocks"]
    assert header["text"]["text"].startswith("pairjudge: ")
    assert "*Series:* brand-voice-q4 · tone and style · gpt-judge" in section["text"]["text"]
    assert "*Value:* " in section["text"]["text"]
    assert kind in context["elements"][0]["text"]
    page, runbook = (button["url"] for button in actions["elements"])
    assert page == ("https://review.example.com/scores" if kind == "spend_cap" else "https://review.example.com/audit")
    assert runbook == f"https://docs.example.com/operations/alerts/#{RUNBOOKS[kind]}"


def test_every_runbook_anchor_is_an_entry_of_the_runbooks_page() -> None:
    page = (ROOT / "docs/operations/alerts.md").read_text()
    anchors = set(re.findall(r"\{#([a-z0-9-]+)\}", page))
    assert set(RUNBOOKS.values()) <= anchors


def test_the_value_is_said_against_its_bound() -> None:
    kappa = Alert(kind="kappa_below_threshold", series="s", message="m", value=0.52, threshold=0.7)
    body = slack_body(kappa, series="s", links=AlertLinks())
    assert "*Value:* 0.52, below its floor of 0.70" in body["blocks"][1]["text"]["text"]
    rate = slack_body(alert("flip_rate_high"), series="s", links=AlertLinks())
    assert "*Value:* 67.0%, above its limit of 20.0%" in rate["blocks"][1]["text"]["text"]


def test_without_links_there_are_no_buttons_and_the_runbook_is_named() -> None:
    body = slack_body(alert(), series="s", links=AlertLinks())
    check_block_kit(body)
    assert [block["type"] for block in body["blocks"]] == ["header", "section", "context"]
    assert "runbook: docs/operations/alerts.md#pairjudgeauditalert" in body["blocks"][2]["elements"][0]["text"]


def test_outside_text_cannot_become_a_link_or_a_mention() -> None:
    hostile = "answered by <!channel> <https://evil.example|click here> & more"
    body = slack_body(alert("judge_model_mismatch", series="judge:<@U123>", message=hostile), series="x<y", links=LINKS)
    check_block_kit(body)
    shown = str(body)
    assert "<!channel>" not in shown
    assert "<https://evil" not in shown
    assert "<@U123>" not in shown
    assert "&lt;!channel&gt; &lt;https://evil.example|click here&gt; &amp; more" in body["blocks"][1]["text"]["text"]
    assert body["text"].endswith("on x&lt;y")


def test_long_texts_are_cut_to_slacks_limits() -> None:
    body = slack_body(alert(message="x" * 5000), series="y" * 500, links=LINKS)
    check_block_kit(body)
    assert len(body["blocks"][1]["text"]["text"]) == 3000


def test_the_schema_refuses_what_slack_refuses() -> None:
    body = slack_body(alert(), series="s", links=LINKS)
    too_long = {**body, "blocks": [{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}]}
    assert block_kit_errors(too_long)
    markdown_header = {**body, "blocks": [{"type": "header", "text": {"type": "mrkdwn", "text": "*h*"}}]}
    assert block_kit_errors(markdown_header)
    unknown = {**body, "blocks": [{"type": "sectoin", "text": {"type": "mrkdwn", "text": "t"}}]}
    assert block_kit_errors(unknown)
    no_text_button = {"blocks": [{"type": "actions", "elements": [{"type": "button", "url": "https://x"}]}]}
    assert block_kit_errors(no_text_button)


@pytest.mark.parametrize(
    "series",
    [
        SERIES,
        SERIES.model_copy(update={"experiment_id": None, "judge_version": ""}),
        SERIES.model_copy(update={"risk_level": "high", "judge_tier": "strong", "rubric": "named:brand"}),
    ],
)
def test_a_series_key_reads_back_as_its_series(series: AuditSeries) -> None:
    assert AuditSeries.from_key(series.key) == series


@pytest.mark.parametrize("key", ["spend:all", "judge-x", "openai:m|h|r", "openai:m|h|r|-|risk=medium", "a:b|c|d|e|x=1"])
def test_what_is_not_a_series_key_is_shown_as_it_is(key: str) -> None:
    assert AuditSeries.from_key(key) is None
    assert alert_series_name(key) == key


def test_the_generic_body_carries_the_title_series_and_links() -> None:
    body = webhook_body(alert(), series="brand-voice-q4 · tone and style · gpt-judge", links=LINKS, held_back=3)
    annotations = body["alerts"][0]["annotations"]
    assert annotations["title"] == "too many pairs need the tie-break"
    assert annotations["series_name"] == "brand-voice-q4 · tone and style · gpt-judge"
    assert annotations["runbook_url"] == "https://docs.example.com/operations/alerts/#pairjudgeauditalert"
    assert annotations["page_url"] == "https://review.example.com/audit"
    assert annotations["held_back"] == "3"


def test_the_rate_limit_lets_one_alert_per_kind_and_series_through_a_window() -> None:
    now = [0.0]
    limiter = AlertLimiter(600, clock=lambda: now[0])
    assert limiter.admit(alert()) == 0
    now[0] = 10
    assert limiter.admit(alert()) is None  # same kind, same series, inside the window
    assert limiter.admit(alert()) is None
    assert limiter.admit(alert("flip_rate_high")) == 0  # another kind
    assert limiter.admit(alert(series="other")) == 0  # another series
    now[0] = 599
    assert limiter.admit(alert()) is None
    now[0] = 601
    assert limiter.admit(alert()) == 3  # through again, saying how many were held back
    assert limiter.admit(alert()) is None
    off = AlertLimiter(0)
    assert [off.admit(alert()) for _ in range(3)] == [0, 0, 0]


def test_the_worker_builds_its_webhook_from_the_settings_with_the_url_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "hook"
    secret.write_text("https://hooks.slack.com/services/T0/B0/s3cr3t\n")
    secret.chmod(0o600)
    settings = Settings(
        audit=AuditSettings(
            webhook_url_file=secret,
            webhook_format="slack",
            webhook_rate_window_s=60,
            webhook_review_url="https://review.example.com",
        )
    )
    hook = _alert_webhook(settings)
    assert isinstance(hook, AlertWebhook)
    assert hook.where == "https://hooks.slack.com"
    body = hook.body(alert())
    check_block_kit(body)
    assert "brand-voice-q4 · tone and style · gpt-judge" in body["blocks"][1]["text"]["text"]
    assert "s3cr3t" not in str(body)
    assert hook.body(alert())["blocks"][-1]["elements"][0]["url"] == "https://review.example.com/audit"


def test_a_webhook_built_by_hand_keeps_the_generic_body() -> None:
    hook = AlertWebhook(SecretStr("https://hooks.example.com/x"))
    assert hook.body(alert())["version"] == "4"  # the generic body, as before
