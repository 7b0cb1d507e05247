"""OTLP export over TLS to a real receiver on 127.0.0.1: the CA, the auth header, mutual TLS.

The receiver (``tests/fixtures/otlp_tls.py``) serves HTTPS with a certificate from a CA made for the
test by ``openssl``. Spans go through the worker's own tracer provider and exporter
(``streams.telemetry.tracing.make_tracer_provider``), configured only by ``TelemetrySettings``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import SecretStr

from pairjudge.streams.config.settings import TelemetrySettings
from pairjudge.streams.telemetry.tracing import make_tracer_provider
from tests.fixtures.otlp_tls import OTLPReceiver, TLSMaterial, otlp_receiver, tls_material

__all__ = ["otlp_receiver", "tls_material"]

TOKEN = "tok-Zq9vOTLP-DO-NOT-LEAK-77f1"


def export_one(settings: TelemetrySettings, name: str) -> bool:
    """One span through the configured provider; whether the flush reported success."""
    provider = make_tracer_provider(settings)
    try:
        with provider.get_tracer("test").start_as_current_span(name) as span:
            span.set_attribute("pairjudge.pair_id", "p-1")
        return provider.force_flush(timeout_millis=15_000)
    finally:
        provider.shutdown()


def settings(receiver: OTLPReceiver, **extra: object) -> TelemetrySettings:
    return TelemetrySettings(exporter="otlp", otlp_endpoint=receiver.endpoint, **extra)


@pytest.fixture(autouse=True)
def short_export_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    # A failed handshake is retried until the export's deadline: keep the failing cases short.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2")


def test_spans_and_the_auth_header_arrive_verified_by_the_ca(
    otlp_receiver: OTLPReceiver, tls_material: TLSMaterial, caplog: pytest.LogCaptureFixture
) -> None:
    configured = settings(
        otlp_receiver,
        otlp_headers=SecretStr(f"authorization=Bearer%20{TOKEN},x-scope-orgid=team-7"),
        otlp_certificate_file=tls_material.ca,
    )
    with caplog.at_level(logging.DEBUG):
        export_one(configured, "pairjudge.primary")
    [export] = otlp_receiver.exports
    assert export.path == "/v1/traces"
    assert export.span_names == ("pairjudge.primary",)
    assert export.headers["authorization"] == f"Bearer {TOKEN}"
    assert export.headers["x-scope-orgid"] == "team-7"
    assert export.client_cn is None  # no client certificate configured, none presented
    # The token is a header and nothing else: not in the spans, not in any log line.
    assert TOKEN.encode() not in export.body
    assert TOKEN not in caplog.text
    assert TOKEN not in repr(configured)


def test_without_the_ca_the_collector_is_not_trusted_and_nothing_is_sent(
    otlp_receiver: OTLPReceiver, tls_material: TLSMaterial, caplog: pytest.LogCaptureFixture
) -> None:
    headers = SecretStr(f"authorization=Bearer%20{TOKEN}")
    with caplog.at_level(logging.DEBUG):
        export_one(settings(otlp_receiver, otlp_headers=headers), "system-trust")
        export_one(
            settings(otlp_receiver, otlp_headers=headers, otlp_certificate_file=tls_material.other_ca), "wrong-ca"
        )
    assert otlp_receiver.exports == []
    assert any("CERTIFICATE_VERIFY_FAILED" in r.getMessage() or "SSLError" in r.getMessage() for r in caplog.records)
    assert TOKEN not in caplog.text
    # The same receiver, trusted: the setup does deliver (so the refusals above are real).
    export_one(settings(otlp_receiver, otlp_headers=headers, otlp_certificate_file=tls_material.ca), "trusted")
    assert [e.span_names for e in otlp_receiver.exports] == [("trusted",)]


def test_mutual_tls_presents_the_client_certificate(otlp_receiver: OTLPReceiver, tls_material: TLSMaterial) -> None:
    export_one(
        settings(
            otlp_receiver,
            otlp_certificate_file=tls_material.ca,
            otlp_client_certificate_file=tls_material.client_cert,
            otlp_client_key_file=tls_material.client_key,
        ),
        "mtls",
    )
    [export] = otlp_receiver.exports
    assert export.span_names == ("mtls",)
    assert export.client_cn == "pairjudge-client"


def test_headers_come_from_a_secret_file(
    otlp_receiver: OTLPReceiver, tls_material: TLSMaterial, tmp_path: Path
) -> None:
    secret = tmp_path / "otlp-headers"
    secret.write_text(f"authorization=Bearer%20{TOKEN}\n")
    export_one(settings(otlp_receiver, otlp_headers_file=secret, otlp_certificate_file=tls_material.ca), "from-file")
    [export] = otlp_receiver.exports
    assert export.headers["authorization"] == f"Bearer {TOKEN}"
