"""What the judges' client reads from the environment, as httpx read it for them: the proxy for the endpoint's
URL (``streams.judges.client.route_for``) and the trust store (``tls_context``).

The proxy's effect on the wire is tested with real servers in tests/integration/test_cleartext_http.py.
"""

from __future__ import annotations

import base64
import ssl
from pathlib import Path

import certifi
import pytest

from pairjudge.streams.judges.client import Route, origin_of, route_for, tls_context

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


def test_without_proxy_settings_requests_go_direct() -> None:
    assert route_for("https://api.openai.com/v1/chat/completions") == Route()


def test_the_scheme_picks_the_proxy_and_all_proxy_is_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://plain-proxy:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://tls-proxy:3128")
    assert route_for("http://judge.example.com/v1").proxy == "http://plain-proxy:3128"
    assert route_for("https://judge.example.com/v1").proxy == "http://tls-proxy:3128"
    monkeypatch.delenv("HTTPS_PROXY")
    monkeypatch.setenv("ALL_PROXY", "http://every-proxy:8080")
    assert route_for("https://judge.example.com/v1").proxy == "http://every-proxy:8080"


def test_no_proxy_exempts_a_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://tls-proxy:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example.com,127.0.0.1")
    assert route_for("https://judge.internal.example.com/v1") == Route()
    assert route_for("https://127.0.0.1:8443/v1") == Route()
    assert route_for("https://api.openai.com/v1").proxy == "http://tls-proxy:3128"


def test_a_proxy_without_a_scheme_is_http_and_its_credentials_become_a_header(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://us%40er:p%3Ass@tls-proxy:3128")
    route = route_for("https://api.anthropic.com/v1/messages")
    assert route.proxy == "http://tls-proxy:3128"  # the credentials never go out in the proxy's URL
    assert route.proxy_headers is not None
    scheme, encoded = route.proxy_headers["Proxy-Authorization"].split()
    assert (scheme, base64.b64decode(encoded).decode()) == ("Basic", "us@er:p:ss")
    monkeypatch.setenv("HTTPS_PROXY", "tls-proxy:3128")
    assert route_for("https://api.anthropic.com/v1/messages") == Route(proxy="http://tls-proxy:3128")


def test_origins_compare_with_default_ports_filled_in() -> None:
    assert origin_of("https://API.example.com/v1") == origin_of("https://api.example.com:443/other")
    assert origin_of("http://[::1]:8080/v1") == ("http", "::1", 8080)
    assert origin_of("http://judge.example.com") != origin_of("https://judge.example.com")


def test_the_trust_store_is_certifi_unless_the_environment_names_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def subjects(context: ssl.SSLContext) -> set[object]:
        return {str(cert.get("subject")) for cert in context.get_ca_certs()}

    default = tls_context()
    assert default.verify_mode == ssl.CERT_REQUIRED
    assert default.check_hostname
    assert subjects(default) == subjects(ssl.create_default_context(cafile=certifi.where()))
    # One certificate of certifi's bundle, named by SSL_CERT_FILE: only it is trusted then.
    bundle = Path(certifi.where()).read_text()
    first = bundle[bundle.index("-----BEGIN CERTIFICATE-----") : bundle.index("-----END CERTIFICATE-----") + 25]
    (tmp_path / "one.pem").write_text(first + "\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "one.pem"))
    assert len(tls_context().get_ca_certs()) == 1
