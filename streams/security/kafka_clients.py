"""Kafka client security, in one place: settings in, client configuration out.

``KafkaSettings`` (streams.config.settings) says how to reach the brokers: ``PLAINTEXT`` (the default),
``SSL`` (TLS, with a client certificate for mutual TLS), ``SASL_SSL`` or ``SASL_PLAINTEXT`` (a user name
and password, with ``SCRAM-SHA-512``, ``SCRAM-SHA-256`` or ``PLAIN``). This module turns them into

- ``client_config(kafka)``: a ``ClientConfig`` (bootstrap servers plus the aiokafka keyword arguments:
  ``security_protocol``, ``sasl_mechanism``, ``sasl_plain_username``/``_password``, ``ssl_context``) that
  every raw aiokafka client the project creates is built from (``AIOKafkaProducer(**config.kwargs())``),
  and that ``streams.kafka.admin`` takes in place of a bare bootstrap string;
- ``faust_credentials(kafka)``: Faust's ``broker_credentials`` (``faust.SASLCredentials``, with an SSL
  context for ``SASL_SSL``, or ``faust.SSLCredentials``), which Faust hands to its consumer, producer
  and every client it creates (streams.faust_compat.offsets' consumer subclass included).

Secrets (the SASL password, the key's password) are read here, when a client is built, and go nowhere
else: ``ClientConfig`` does not show them in its repr, and errors name the setting, never a value.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from aiokafka.helpers import create_ssl_context

from pairjudge.streams.security.cleartext import is_loopback

if TYPE_CHECKING:
    from faust.types.auth import CredentialsT

    from pairjudge.streams.config.settings import KafkaSettings

__all__ = [
    "PLAINTEXT_CLIENT",
    "ClientConfig",
    "KafkaSecurityError",
    "aiokafka_kwargs",
    "as_client_config",
    "check_kafka_security",
    "client_config",
    "faust_credentials",
    "ssl_context",
]

_PREFIX = "PAIRJUDGE_KAFKA__"


class KafkaSecurityError(ValueError):
    """The Kafka security settings cannot work; the message names the variable, never a value."""


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """What a Kafka client needs to reach the brokers: where they are, and how to authenticate.

    ``security`` holds aiokafka keyword arguments, the password among them: it is kept out of ``repr``.
    """

    bootstrap_servers: str
    security: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def security_protocol(self) -> str:
        return str(self.security.get("security_protocol", "PLAINTEXT"))

    def kwargs(self, **extra: Any) -> dict[str, Any]:
        """Keyword arguments for ``AIOKafkaProducer``/``AIOKafkaConsumer``/``AIOKafkaAdminClient``."""
        return {"bootstrap_servers": self.bootstrap_servers, **self.security, **extra}

    def __str__(self) -> str:
        return f"{self.bootstrap_servers} ({self.security_protocol})"


#: ``KafkaSettings`` fields that make a plaintext client (for the embedded broker, which has no TLS or SASL).
PLAINTEXT_CLIENT: Final[Mapping[str, Any]] = {
    "security_protocol": "PLAINTEXT",
    "sasl_username": None,
    "sasl_password": None,
    "sasl_password_file": None,
    "ssl_cafile": None,
    "ssl_certfile": None,
    "ssl_keyfile": None,
    "ssl_key_password": None,
    "ssl_key_password_file": None,
}


def as_client_config(target: str | ClientConfig) -> ClientConfig:
    """A bare ``host:port[,...]`` string is a plaintext client (the embedded broker, tests)."""
    return target if isinstance(target, ClientConfig) else ClientConfig(target)


def _uses_sasl(kafka: KafkaSettings) -> bool:
    return kafka.security_protocol.startswith("SASL_")


def _uses_tls(kafka: KafkaSettings) -> bool:
    return kafka.security_protocol in ("SSL", "SASL_SSL")


def _readable(path: Path, setting: str) -> None:
    if not path.is_file() or not os.access(path, os.R_OK):
        raise KafkaSecurityError(f"{_PREFIX}{setting}: cannot read {path} (missing, not a file, or not readable)")


def ssl_context(kafka: KafkaSettings) -> ssl.SSLContext:
    """The TLS context: the CA bundle (or the system's), the client certificate, the hostname check."""
    password = kafka.resolved_ssl_key_password()
    try:
        context: ssl.SSLContext = create_ssl_context(
            cafile=str(kafka.ssl_cafile) if kafka.ssl_cafile else None,
            certfile=str(kafka.ssl_certfile) if kafka.ssl_certfile else None,
            keyfile=str(kafka.ssl_keyfile) if kafka.ssl_keyfile else None,
            password=password.get_secret_value() if password is not None else None,
        )
    except (ssl.SSLError, OSError, ValueError) as exc:
        # ssl's messages name the failing step (e.g. "PEM lib"), never a file's content or the password.
        which = "SSL_CAFILE" if kafka.ssl_certfile is None else "SSL_CAFILE, SSL_CERTFILE or SSL_KEYFILE"
        reason = getattr(exc, "reason", None) or type(exc).__name__
        raise KafkaSecurityError(
            f"{_PREFIX}{which}: cannot load the TLS files ({reason}): is every file PEM, do the certificate and "
            f"key match, and is {_PREFIX}SSL_KEY_PASSWORD right for an encrypted key?"
        ) from None
    if kafka.ssl_cafile is None:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    context.check_hostname = kafka.ssl_check_hostname
    context.verify_mode = ssl.CERT_REQUIRED
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def check_kafka_security(kafka: KafkaSettings) -> None:
    """Whether the settings can work, checked at start-up: required settings, readable files, loadable keys.

    Raises ``KafkaSecurityError`` naming the variable and never a value.
    """
    sasl, tls = _uses_sasl(kafka), _uses_tls(kafka)
    protocol = f"{_PREFIX}SECURITY_PROTOCOL={kafka.security_protocol}"
    if sasl:
        if not kafka.sasl_username:
            raise KafkaSecurityError(f"{_PREFIX}SASL_USERNAME is not set: {protocol} needs a user name")
        if kafka.sasl_password_file is not None:
            _readable(kafka.sasl_password_file, "SASL_PASSWORD_FILE")
        password = kafka.resolved_sasl_password()
        if password is None or not password.get_secret_value():
            raise KafkaSecurityError(
                f"{_PREFIX}SASL_PASSWORD (or {_PREFIX}SASL_PASSWORD_FILE) is not set: {protocol} needs a password"
            )
        if kafka.security_protocol == "SASL_PLAINTEXT" and kafka.sasl_mechanism == "PLAIN":
            remote = [h for h in _hosts(kafka.bootstrap_servers) if not is_loopback(h)]
            if remote:
                raise KafkaSecurityError(
                    f"{protocol} with {_PREFIX}SASL_MECHANISM=PLAIN would send the password in clear to "
                    f"{', '.join(remote)}: use SASL_SSL"
                )
    else:
        extra = [name for name in ("sasl_username", "sasl_password", "sasl_password_file") if getattr(kafka, name)]
        if extra:
            raise KafkaSecurityError(
                f"{_PREFIX}{extra[0].upper()} is set but {protocol} does not use SASL: use SASL_SSL"
            )
    files = {"SSL_CAFILE": kafka.ssl_cafile, "SSL_CERTFILE": kafka.ssl_certfile, "SSL_KEYFILE": kafka.ssl_keyfile}
    if not tls:
        given = [name for name, path in files.items() if path is not None]
        if given:
            raise KafkaSecurityError(f"{_PREFIX}{given[0]} is set but {protocol} does not use TLS: use SSL or SASL_SSL")
        return
    if (kafka.ssl_certfile is None) != (kafka.ssl_keyfile is None):
        raise KafkaSecurityError(
            f"{_PREFIX}SSL_CERTFILE and {_PREFIX}SSL_KEYFILE go together (a client certificate and its key): set both"
        )
    if kafka.ssl_key_password_file is not None:
        _readable(kafka.ssl_key_password_file, "SSL_KEY_PASSWORD_FILE")
    for name, path in files.items():
        if path is not None:
            _readable(path, name)
    ssl_context(kafka)  # the files load, and the key matches its certificate


def _hosts(bootstrap: str) -> list[str]:
    hosts = []
    for entry in bootstrap.split(","):
        entry = entry.strip()
        if entry:
            hosts.append(entry.rpartition(":")[0].strip("[]") or entry)
    return hosts


def aiokafka_kwargs(kafka: KafkaSettings) -> dict[str, Any]:
    """aiokafka's security keyword arguments for these settings (no bootstrap servers)."""
    kwargs: dict[str, Any] = {"security_protocol": kafka.security_protocol}
    if _uses_tls(kafka):
        kwargs["ssl_context"] = ssl_context(kafka)
    if _uses_sasl(kafka):
        password = kafka.resolved_sasl_password()
        kwargs["sasl_mechanism"] = kafka.sasl_mechanism
        kwargs["sasl_plain_username"] = kafka.sasl_username
        kwargs["sasl_plain_password"] = password.get_secret_value() if password is not None else None
    return kwargs


def client_config(kafka: KafkaSettings) -> ClientConfig:
    """The bootstrap servers and security every raw aiokafka client is built from."""
    return ClientConfig(kafka.bootstrap_servers, aiokafka_kwargs(kafka))


def faust_credentials(kafka: KafkaSettings) -> CredentialsT | None:
    """Faust's ``broker_credentials``: None for PLAINTEXT.

    faust-streaming maps ``SASLCredentials`` to ``SASL_SSL`` when it carries an SSL context and to
    ``SASL_PLAINTEXT`` when not, and ``SSLCredentials(context)`` to ``SSL``
    (``faust.transport.drivers.aiokafka.credentials_to_aiokafka_auth``).
    """
    import faust

    if kafka.security_protocol == "PLAINTEXT":
        return None
    if kafka.security_protocol == "SSL":
        return faust.SSLCredentials(ssl_context(kafka))
    password = kafka.resolved_sasl_password()
    return faust.SASLCredentials(
        username=kafka.sasl_username,
        password=password.get_secret_value() if password is not None else None,
        ssl_context=ssl_context(kafka) if _uses_tls(kafka) else None,
        mechanism=kafka.sasl_mechanism,
    )


_AUTHZ_CODES: Final = {29: "TOPIC", 30: "GROUP", 31: "CLUSTER", 53: "TRANSACTIONAL_ID"}


async def explain(exc: BaseException, config: ClientConfig, *, what: str = "") -> str:
    """A clear sentence for a Kafka failure, without secrets: which authorisation was refused, or why a
    connection failed (a refused TLS certificate, refused SASL credentials).

    aiokafka reports refused SASL credentials as "connection closed" (it authenticates without the
    error-carrying SaslAuthenticate request until it knows the broker's versions), so a connection
    failure is diagnosed by one connection of our own that asks for the broker's reason.
    """
    from aiokafka import errors

    doing = f" ({what})" if what else ""
    errno = getattr(exc, "errno", None)
    if isinstance(errno, int) and errno in _AUTHZ_CODES:
        names = ", ".join(str(a) for a in getattr(exc, "args", ()) if isinstance(a, str))
        on = f" {names}" if names else ""
        return (
            f"not authorised{doing}: {_AUTHZ_CODES[errno]}_AUTHORIZATION_FAILED on{on or ' the resource'} at {config}: "
            "the principal lacks an ACL for this operation (see docs/operations/secured-kafka.md#topics-and-acls)"
        )
    if isinstance(exc, errors.KafkaConnectionError | errors.KafkaTimeoutError | OSError | errors.NodeNotReadyError):
        reason = await diagnose_connection(config)
        if reason is not None:
            return f"cannot connect to Kafka{doing} at {config}: {reason}"
    return f"Kafka failed{doing} at {config}: {type(exc).__name__}: {exc}"


async def diagnose_connection(config: ClientConfig, timeout: float = 10.0) -> str | None:
    """Why one connection to the first bootstrap server fails (TLS, SASL, refused), or None if it works."""
    import asyncio

    from aiokafka import errors
    from aiokafka.conn import create_conn

    first = config.bootstrap_servers.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    security = dict(config.security)
    mechanism = security.get("sasl_mechanism")
    user = security.get("sasl_plain_username")
    try:
        conn = await asyncio.wait_for(
            # version_hint: look the versions up first, so SASL uses SaslAuthenticate and the broker says why.
            create_conn(host.strip("[]"), int(port), version_hint=(2, 0, 0), **security),
            timeout,
        )
    except ssl.SSLCertVerificationError as err:
        return f"the broker's TLS certificate was not accepted ({err.verify_message}); check {_PREFIX}SSL_CAFILE"
    except ssl.SSLError as err:
        return (
            f"the TLS handshake failed ({err.reason or type(err).__name__}); a broker that requires a client "
            "certificate needs PAIRJUDGE_KAFKA__SSL_CERTFILE and __SSL_KEYFILE, and the right security protocol"
        )
    except errors.UnsupportedSaslMechanismError as err:
        return f"SASL mechanism refused: {err}"
    except (errors.SaslAuthenticationFailed, errors.AuthenticationFailedError, errors.IllegalSaslStateError) as err:
        return f"authentication failed for user {user!r} with {mechanism}: {err} (check the user name and password)"
    except TimeoutError:
        return f"no answer within {timeout:g}s"
    except (errors.KafkaConnectionError, OSError) as err:
        if security.get("security_protocol", "PLAINTEXT") == "PLAINTEXT":
            return f"{type(err).__name__}: {err}"
        return (
            f"the connection was closed ({type(err).__name__}): is PAIRJUDGE_KAFKA__SECURITY_PROTOCOL right for "
            "this listener, and does the broker accept this client's certificate or credentials?"
        )
    conn.close()
    return None
