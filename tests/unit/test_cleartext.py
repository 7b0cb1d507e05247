"""Secrets never go over plain HTTP off this machine unless a setting named for it allows it.

The rule (``streams.security.cleartext``) and where it is enforced: the settings at start-up (the judge, every
juror, the alert webhook, the OTLP headers), the judge adapters and the webhook when they are built,
and the OTLP exporter. Every message names the variable and the host, never the secret.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from pairjudge.streams.config.settings import (
    AuditSettings,
    JudgeSettings,
    Settings,
    TelemetrySettings,
    parse_otlp_headers,
)
from pairjudge.streams.judges.anthropic import AnthropicJudge
from pairjudge.streams.judges.openai import OpenAICompatibleJudge
from pairjudge.streams.security.cleartext import CleartextSecretError, check_cleartext, cleartext_host, is_loopback
from pairjudge.streams.telemetry.alerts import AlertWebhook
from pairjudge.streams.telemetry.tracing import otlp_exporter

KEY = "sk-live-Zq9vKEYxx-DO-NOT-LEAK"
HOOK = "https://hooks.slack.com/services/T000/B000/XXXXsecretXXXX"


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.0.0.2",
        "127.255.255.254",
        "127.1.2.3",
        "::1",
        "[::1]",
        "0:0:0:0:0:0:0:1",
        "::ffff:127.0.0.1",
        "localhost",
        "LOCALHOST",
        "localhost.",
        "judge.localhost",
    ],
)
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize(
    "host",
    [
        "",
        "10.0.0.1",
        "192.168.1.10",
        "0.0.0.0",  # every interface, not loopback
        "128.0.0.1",
        "::",
        "::2",
        "fe80::1",
        "::ffff:10.0.0.1",
        "localhost.example.com",
        "mylocalhost",
        "127.0.0.1.nip.io",  # resolves to loopback today; a name's answer can change
        "judge.example.com",
    ],
)
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://judge.example.com/v1", "judge.example.com"),
        ("HTTP://Judge.Example.com:8080/v1", "judge.example.com"),
        ("http://10.0.0.5:8080", "10.0.0.5"),
        ("http://[2001:db8::1]:8080/v1", "2001:db8::1"),
        ("http://user:pw@judge.example.com/", "judge.example.com"),
        ("http:///nohost", "?"),
        ("https://judge.example.com/v1", None),
        ("https://10.0.0.5/v1", None),
        ("http://127.0.0.1:8080/v1", None),
        ("http://127.3.4.5/v1", None),
        ("http://[::1]:4318", None),
        ("http://localhost:4318", None),
    ],
)
def test_cleartext_host(url: str, host: str | None) -> None:
    assert cleartext_host(url) == host


def test_check_cleartext_names_setting_switch_and_host_but_not_the_url() -> None:
    url = "http://collector.example.com/v1/traces?token=abc123secret"
    with pytest.raises(CleartextSecretError) as err:
        check_cleartext(url, allowed=False, what="the headers", setting="SETTING_X", allow_setting="SWITCH_Y")
    message = str(err.value)
    assert "SETTING_X" in message
    assert "SWITCH_Y" in message
    assert "collector.example.com" in message
    assert "abc123secret" not in message
    assert "/v1/traces" not in message
    check_cleartext(url, allowed=True, what="the headers", setting="S", allow_setting="A")
    check_cleartext("https://collector.example.com", allowed=False, what="x", setting="S", allow_setting="A")


# --- the judge and the jury at start-up -----------------------------------------------------------


def judge(base_url: str, **extra: object) -> JudgeSettings:
    return JudgeSettings(kind="openai", base_url=base_url, api_key=SecretStr(KEY), **extra)


def test_a_key_over_http_to_a_remote_judge_stops_start_up() -> None:
    with pytest.raises(ValidationError) as err:
        Settings(judge=judge("http://judge.example.com/v1"))
    message = str(err.value)
    assert "PAIRJUDGE_JUDGE__API_KEY" in message
    assert "PAIRJUDGE_JUDGE__ALLOW_CLEARTEXT_KEY" in message
    assert "judge.example.com" in message
    assert KEY not in message


@pytest.mark.parametrize(
    "base_url",
    ["https://judge.example.com/v1", "http://127.0.0.1:8080/v1", "http://127.9.9.9/v1", "http://[::1]:8080/v1"],
)
def test_a_key_over_https_or_to_loopback_is_fine(base_url: str) -> None:
    assert Settings(judge=judge(base_url)).judge.base_url == base_url


def test_the_switch_allows_a_key_in_clear_text() -> None:
    settings = Settings(judge=judge("http://judge.internal:8080/v1", allow_cleartext_key=True))
    assert settings.judge.allow_cleartext_key


def test_the_anthropic_judge_and_a_key_file_are_checked_too(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    with pytest.raises(ValidationError) as err:
        Settings(judge=JudgeSettings(kind="anthropic", base_url="http://gateway.example.com", api_key_file=key_file))
    assert "gateway.example.com" in str(err.value)
    assert KEY not in str(err.value)


def test_every_juror_is_checked() -> None:
    with pytest.raises(ValidationError) as err:
        Settings(jury=(judge("https://a.example.com/v1"), judge("http://b.example.com/v1")))
    message = str(err.value)
    assert "jury[1]" in message
    assert "jury[1].allow_cleartext_key" in message
    assert "b.example.com" in message
    assert KEY not in message
    Settings(jury=(judge("https://a.example.com/v1"), judge("http://b.example.com/v1", allow_cleartext_key=True)))


def test_the_env_switch_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAIRJUDGE_JUDGE__KIND", "openai")
    monkeypatch.setenv("PAIRJUDGE_JUDGE__BASE_URL", "http://judge.lan:8000/v1")
    monkeypatch.setenv("PAIRJUDGE_JUDGE__API_KEY", KEY)
    with pytest.raises(ValidationError):
        Settings()
    monkeypatch.setenv("PAIRJUDGE_JUDGE__ALLOW_CLEARTEXT_KEY", "true")
    assert Settings().judge.allow_cleartext_key


# --- the adapters refuse too, however they were built ---------------------------------------------


def test_the_adapters_refuse_a_key_in_clear_text_when_built() -> None:
    with pytest.raises(ValueError, match=r"judge\.example\.com") as err:
        OpenAICompatibleJudge(base_url="http://judge.example.com/v1", model="m", api_key=SecretStr(KEY))
    assert KEY not in str(err.value)
    with pytest.raises(ValueError, match=r"gateway\.example\.com"):
        AnthropicJudge(base_url="http://gateway.example.com", model="m", api_key=SecretStr(KEY))
    # No key, a loopback server, https, or the switch: built.
    OpenAICompatibleJudge(base_url="http://judge.example.com/v1", model="m")
    OpenAICompatibleJudge(base_url="http://127.0.0.1:8080/v1", model="m", api_key=SecretStr(KEY))
    AnthropicJudge(base_url="https://api.anthropic.com", model="m", api_key=SecretStr(KEY))
    OpenAICompatibleJudge(
        base_url="http://judge.example.com/v1", model="m", api_key=SecretStr(KEY), allow_cleartext_key=True
    )


# --- the alert webhook ------------------------------------------------------------------------------


def test_a_webhook_over_http_to_a_remote_host_stops_start_up(tmp_path: Path) -> None:
    url = "http://hooks.example.com/services/T000/B000/XXXXsecretXXXX"
    with pytest.raises(ValidationError) as err:
        Settings(audit=AuditSettings(webhook_url=SecretStr(url)))
    message = str(err.value)
    assert "PAIRJUDGE_AUDIT__WEBHOOK_URL" in message
    assert "PAIRJUDGE_AUDIT__WEBHOOK_ALLOW_CLEARTEXT" in message
    assert "hooks.example.com" in message
    assert "XXXXsecretXXXX" not in message
    secret_file = tmp_path / "hook"
    secret_file.write_text(url)
    with pytest.raises(ValidationError):
        Settings(audit=AuditSettings(webhook_url_file=secret_file))
    Settings(audit=AuditSettings(webhook_url=SecretStr(url), webhook_allow_cleartext=True))
    Settings(audit=AuditSettings(webhook_url=SecretStr(HOOK)))
    Settings(audit=AuditSettings(webhook_url=SecretStr("http://127.0.0.1:9000/hook/secret")))


async def test_the_webhook_refuses_when_built() -> None:
    with pytest.raises(CleartextSecretError) as err:
        AlertWebhook(SecretStr("http://hooks.example.com/T/B/XXXXsecretXXXX"))
    assert "XXXXsecretXXXX" not in str(err.value)
    hook = AlertWebhook(SecretStr("http://hooks.example.com/T/B/XXXXsecretXXXX"), allow_cleartext=True)
    await hook.aclose()
    hook = AlertWebhook(SecretStr(HOOK))
    await hook.aclose()


# --- OTLP headers -----------------------------------------------------------------------------------


def test_otlp_headers_parse_in_the_otel_form() -> None:
    assert parse_otlp_headers("Authorization=Bearer%20abc, x-scope-orgid = team-1 ,,", "S") == {
        "authorization": "Bearer abc",
        "x-scope-orgid": "team-1",
    }
    assert parse_otlp_headers("api-key=a=b=c", "S") == {"api-key": "a=b=c"}
    assert parse_otlp_headers("", "S") == {}


@pytest.mark.parametrize("text", ["token-without-name", "=s3cr3tvalue", "bad name=x", "x=a%0Ab"])
def test_malformed_otlp_headers_are_refused_without_their_text(text: str) -> None:
    with pytest.raises(ValueError, match="OTLP_HEADERS") as err:
        TelemetrySettings(exporter="otlp", otlp_headers=SecretStr(text)).resolved_otlp_headers()
    assert "PAIRJUDGE_TELEMETRY__OTLP_HEADERS" in str(err.value)
    assert text not in str(err.value)


def test_otlp_headers_over_http_to_a_remote_collector_stop_start_up() -> None:
    headers = SecretStr("authorization=Bearer%20tok-SECRET-123")
    with pytest.raises(ValidationError) as err:
        Settings(
            telemetry=TelemetrySettings(
                exporter="otlp", otlp_endpoint="http://collector.example.com:4318", otlp_headers=headers
            )
        )
    message = str(err.value)
    assert "PAIRJUDGE_TELEMETRY__OTLP_ALLOW_CLEARTEXT_HEADERS" in message
    assert "collector.example.com" in message
    assert "tok-SECRET-123" not in message
    # Without headers there is nothing to protect; https, loopback and the switch are fine.
    Settings(telemetry=TelemetrySettings(exporter="otlp", otlp_endpoint="http://collector.example.com:4318"))
    Settings(
        telemetry=TelemetrySettings(
            exporter="otlp", otlp_endpoint="https://collector.example.com:4318", otlp_headers=headers
        )
    )
    Settings(telemetry=TelemetrySettings(exporter="otlp", otlp_endpoint="http://127.0.0.1:4318", otlp_headers=headers))
    Settings(
        telemetry=TelemetrySettings(
            exporter="otlp",
            otlp_endpoint="http://collector.example.com:4318",
            otlp_headers=headers,
            otlp_allow_cleartext_headers=True,
        )
    )


def test_the_otlp_exporter_refuses_too_and_the_settings_never_show_headers() -> None:
    settings = TelemetrySettings(
        exporter="otlp",
        otlp_endpoint="http://collector.example.com:4318",
        otlp_headers=SecretStr("authorization=tok-SECRET-123"),
    )
    with pytest.raises(CleartextSecretError):
        otlp_exporter(settings)
    assert "tok-SECRET-123" not in repr(settings)
    assert "tok-SECRET-123" not in str(settings.model_dump())


def test_client_certificate_and_key_go_together(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="OTLP_CLIENT_KEY_FILE"):
        TelemetrySettings(otlp_client_certificate_file=tmp_path / "client.pem")
