"""Kafka security settings: checked at start-up (naming variables, never values), turned into aiokafka
keyword arguments and Faust credentials, and handed to worker processes intact."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import faust
import pytest

from pairjudge.streams.config.settings import KafkaSettings, Settings, environ_for
from pairjudge.streams.security.kafka_clients import (
    ClientConfig,
    aiokafka_kwargs,
    as_client_config,
    client_config,
    faust_credentials,
)
from pairjudge_dev.kafka_secure import Certificates, make_certificates

PASSWORD = "s3cret-Pa55word-xyz"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    # Real PEM files made with the openssl command line, as for the secured test broker.
    return make_certificates(tmp_path_factory.mktemp("certs"), clients=("unit-client",))


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for key in [k for k in os.environ if k.startswith("PAIRJUDGE_")]:
        monkeypatch.delenv(key)
    return monkeypatch


def _sasl(**extra: object) -> dict[str, object]:
    return {"security_protocol": "SASL_SSL", "sasl_username": "worker", "sasl_password": PASSWORD, **extra}


def test_plaintext_is_the_default_and_needs_nothing() -> None:
    kafka = KafkaSettings()
    assert aiokafka_kwargs(kafka) == {"security_protocol": "PLAINTEXT"}
    assert faust_credentials(kafka) is None
    assert as_client_config("h:9092") == ClientConfig("h:9092")


def test_sasl_ssl_scram_gives_aiokafka_and_faust_the_same_client(certs: Certificates) -> None:
    kafka = KafkaSettings.model_validate(_sasl(ssl_cafile=certs.ca, sasl_mechanism="SCRAM-SHA-256"))
    kwargs = aiokafka_kwargs(kafka)
    assert kwargs["security_protocol"] == "SASL_SSL"
    assert kwargs["sasl_mechanism"] == "SCRAM-SHA-256"
    assert (kwargs["sasl_plain_username"], kwargs["sasl_plain_password"]) == ("worker", PASSWORD)
    context = kwargs["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED
    credentials = faust_credentials(kafka)
    assert isinstance(credentials, faust.SASLCredentials)
    # What Faust's aiokafka driver makes of it: SASL_SSL because the credentials carry an SSL context.
    from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

    auth = credentials_to_aiokafka_auth(credentials)
    assert auth["security_protocol"] == "SASL_SSL"
    assert auth["sasl_mechanism"] == "SCRAM-SHA-256"
    assert auth["sasl_plain_password"] == PASSWORD
    assert isinstance(auth["ssl_context"], ssl.SSLContext)
    # The password is in the kwargs (aiokafka needs it) but never in a repr or str.
    config = client_config(kafka)
    assert PASSWORD not in repr(config) + str(config) + repr(kafka) + repr(credentials)


def test_sasl_plaintext_scram_has_no_tls() -> None:
    kafka = KafkaSettings.model_validate(_sasl(security_protocol="SASL_PLAINTEXT", bootstrap_servers="kafka-1:9092"))
    assert "ssl_context" not in aiokafka_kwargs(kafka)
    from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

    assert credentials_to_aiokafka_auth(faust_credentials(kafka))["security_protocol"] == "SASL_PLAINTEXT"


def test_mutual_tls_loads_an_encrypted_client_key(certs: Certificates) -> None:
    cert, key = certs.clients["unit-client"]
    kafka = KafkaSettings(
        security_protocol="SSL",
        ssl_cafile=certs.ca,
        ssl_certfile=cert,
        ssl_keyfile=key,
        ssl_key_password=certs.key_password,
    )
    kwargs = aiokafka_kwargs(kafka)
    assert kwargs["security_protocol"] == "SSL"
    assert "sasl_mechanism" not in kwargs
    credentials = faust_credentials(kafka)
    assert isinstance(credentials, faust.SSLCredentials)


def test_the_password_file_wins_and_is_read_when_a_client_is_built(tmp_path: Path) -> None:
    secret = tmp_path / "kafka-password"
    secret.write_text(PASSWORD + "\n")
    kafka = KafkaSettings(security_protocol="SASL_PLAINTEXT", sasl_username="w", sasl_password_file=secret)
    assert aiokafka_kwargs(kafka)["sasl_plain_password"] == PASSWORD


@pytest.mark.parametrize(
    ("fields", "variable"),
    [
        ({"security_protocol": "SASL_SSL", "sasl_password": PASSWORD}, "PAIRJUDGE_KAFKA__SASL_USERNAME"),
        ({"security_protocol": "SASL_SSL", "sasl_username": "w"}, "PAIRJUDGE_KAFKA__SASL_PASSWORD"),
        ({"security_protocol": "SASL_PLAINTEXT", "sasl_username": "w", "sasl_password": ""}, "SASL_PASSWORD"),
        ({"sasl_username": "w", "sasl_password": PASSWORD}, "PAIRJUDGE_KAFKA__SASL_USERNAME is set"),
        ({"ssl_cafile": "/etc/hosts"}, "PAIRJUDGE_KAFKA__SSL_CAFILE is set"),
        ({"security_protocol": "SSL", "ssl_certfile": "/etc/hosts"}, "SSL_CERTFILE and PAIRJUDGE_KAFKA__SSL_KEYFILE"),
        ({"security_protocol": "SSL", "ssl_keyfile": "/etc/hosts"}, "SSL_CERTFILE and PAIRJUDGE_KAFKA__SSL_KEYFILE"),
        ({"security_protocol": "SSL", "ssl_cafile": "/nonexistent/ca.pem"}, "PAIRJUDGE_KAFKA__SSL_CAFILE: cannot read"),
        (
            {"security_protocol": "SASL_SSL", "sasl_username": "w", "sasl_password_file": "/nonexistent/pw"},
            "PAIRJUDGE_KAFKA__SASL_PASSWORD_FILE: cannot read",
        ),
        (  # PLAIN in clear text to another host would give the password away
            {
                "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "PLAIN",
                "bootstrap_servers": "kafka.example.com:9092",
                "sasl_username": "w",
                "sasl_password": PASSWORD,
            },
            "in clear to kafka.example.com",
        ),
    ],
)
def test_unusable_settings_fail_at_start_up_naming_the_variable(
    fields: dict[str, object], variable: str, clean_env: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match=variable) as info:
        Settings(kafka=fields)
    assert PASSWORD not in str(info.value)


def test_a_wrong_key_password_or_a_foreign_key_fails_clearly(certs: Certificates, tmp_path: Path) -> None:
    cert, key = certs.clients["unit-client"]
    with pytest.raises(ValueError, match="SSL_KEY_PASSWORD") as info:
        KafkaSettings(
            security_protocol="SSL", ssl_cafile=certs.ca, ssl_certfile=cert, ssl_keyfile=key, ssl_key_password=PASSWORD
        )
    assert PASSWORD not in str(info.value)
    # The CA's key does not belong to the client's certificate.
    with pytest.raises(ValueError, match="do the certificate and key match"):
        KafkaSettings(security_protocol="SSL", ssl_certfile=cert, ssl_keyfile=certs.directory / "ca.key")


def test_plain_plaintext_is_allowed_on_loopback() -> None:
    kafka = KafkaSettings(
        security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username="w", sasl_password=PASSWORD
    )
    assert aiokafka_kwargs(kafka)["sasl_mechanism"] == "PLAIN"


def test_environ_for_hands_a_worker_the_kafka_security_settings(
    certs: Certificates, clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cert, key = certs.clients["unit-client"]
    key_password = tmp_path / "key-password"
    key_password.write_text(certs.key_password)
    settings = Settings(
        kafka=_sasl(
            ssl_cafile=certs.ca,
            ssl_certfile=cert,
            ssl_keyfile=key,
            ssl_key_password_file=key_password,
            ssl_check_hostname=False,
            sasl_mechanism="PLAIN",
        ),
        control={"signing_key": "k" * 32, "key_id": "ops-2026"},
    )
    for name, value in environ_for(settings).items():
        if name.startswith("PAIRJUDGE_"):
            clean_env.setenv(name, value)
    child = Settings()
    assert child == settings
    assert child.kafka.resolved_sasl_password() is not None
    assert aiokafka_kwargs(child.kafka)["sasl_plain_password"] == PASSWORD
    assert child.control.resolved_signing_key() is not None
