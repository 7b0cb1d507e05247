"""A secured Apache Kafka for tests: TLS, SASL (SCRAM and PLAIN), mutual TLS and ACLs (development only).

One KRaft node on 127.0.0.1, started from the same jars as ``pairjudge_dev.kafka.start_kafka`` and with
the same base configuration, plus:

- a ``SASL_SSL`` listener: ``SCRAM-SHA-512``, ``SCRAM-SHA-256`` and ``PLAIN``; the broker talks to
  itself on it as the super user ``admin`` (SCRAM-SHA-512);
- an ``SSL`` listener that requires a client certificate (mutual TLS): the principal is the
  certificate's CN (``ssl.principal.mapping.rules``);
- the controller listener stays PLAINTEXT on loopback. Its principal (``ANONYMOUS``) must be a super
  user for the node to register with its own controller; nothing else listens in plain text, and it is
  never advertised to clients;
- ``StandardAuthorizer`` with ``super.users=User:admin;User:ANONYMOUS``: everyone else needs ACLs,
  granted with Kafka's own ``AclCommand`` (``SecureKafka.acl``).

The certificates (a CA, a broker certificate for 127.0.0.1/localhost, client certificates) are made
with the ``openssl`` command line; SCRAM users are created when the storage is formatted
(``kafka-storage format --add-scram``), PLAIN users live in the listener's JAAS configuration.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pairjudge.streams.config.settings import KafkaSettings
from pairjudge.streams.kafka.admin import BrokerError
from pairjudge.streams.kafka.embedded import RunningBroker, free_port, launch_broker
from pairjudge.streams.security.kafka_clients import ClientConfig, client_config
from pairjudge_dev.kafka import (
    _JVM_OPTIONS,
    _LOG4J2_PROPERTIES,
    _java_binary,
    _kafka_libs,
    _tail,
    default_kafka_home,
    kafka_server_properties,
    random_cluster_id,
)

__all__ = ["SCRAM_USERS", "SecureKafka", "make_certificates", "start_secure_kafka"]

#: SCRAM users created at format time, with their mechanism. ``admin`` is the super user.
SCRAM_USERS: Final[Mapping[str, str]] = {
    "admin": "SCRAM-SHA-512",
    "worker": "SCRAM-SHA-512",
    "operator": "SCRAM-SHA-512",
    "nobody": "SCRAM-SHA-512",
    "sha256user": "SCRAM-SHA-256",
}
#: PLAIN users (in the SASL_SSL listener's JAAS configuration).
PLAIN_USERS: Final = ("plainuser",)
#: The client certificates made: their CN is the principal on the mutual-TLS listener.
TLS_CLIENTS: Final = ("tlsclient",)
OPENSSL: Final = "openssl"


def _openssl(*args: str, cwd: Path) -> None:
    binary = shutil.which(OPENSSL)
    if binary is None:
        raise BrokerError("openssl not found: install it (apt-get install openssl) to make the test certificates")
    done = subprocess.run(
        [binary, *args], cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        raise BrokerError(f"openssl {args[0]} failed (exit {done.returncode}): {done.stderr.strip()[-1000:]}")


@dataclass(frozen=True)
class Certificates:
    directory: Path
    ca: Path
    #: The broker's key and certificate chain in one PEM file (Kafka's PEM keystore).
    broker_keystore: Path
    #: Per client CN: (certificate, encrypted key); the key's password is ``key_password``.
    clients: Mapping[str, tuple[Path, Path]]
    key_password: str = field(repr=False)


def make_certificates(directory: Path, clients: Sequence[str] = TLS_CLIENTS) -> Certificates:
    """A CA, a broker certificate for 127.0.0.1 and localhost (in the SAN), and one client certificate
    per CN (its key encrypted with a random password), all PEM, valid for two days."""
    directory.mkdir(parents=True, exist_ok=True)
    rsa = ("-newkey", "rsa:2048")
    _openssl("req", "-x509", *rsa, "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=pairjudge test CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)  # fmt: skip
    (directory / "broker.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
    )
    _openssl("req", *rsa, "-nodes", "-keyout", "broker.key", "-out", "broker.csr", "-subj", "/CN=localhost",
             cwd=directory)  # fmt: skip
    _openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "broker.crt", "-days", "2", "-extfile", "broker.ext", cwd=directory)  # fmt: skip
    keystore = directory / "broker-keystore.pem"
    keystore.write_text((directory / "broker.key").read_text() + (directory / "broker.crt").read_text())
    key_password = secrets.token_urlsafe(16)
    (directory / "client-key-password").write_text(key_password)
    (directory / "client.ext").write_text("extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n")
    made: dict[str, tuple[Path, Path]] = {}
    for cn in clients:
        _openssl("req", *rsa, "-keyout", f"{cn}.key", "-passout", "file:client-key-password",
                 "-out", f"{cn}.csr", "-subj", f"/O=pairjudge tests/CN={cn}", cwd=directory)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{cn}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{cn}.crt", "-days", "2", "-extfile", "client.ext", cwd=directory)  # fmt: skip
        made[cn] = (directory / f"{cn}.crt", directory / f"{cn}.key")
    for path in directory.iterdir():
        path.chmod(0o600)
    return Certificates(directory, directory / "ca.pem", keystore, made, key_password)


def _jaas_value(value: str) -> str:
    # Passwords here are token_urlsafe: no quote or backslash to escape.
    return f'"{value}"'


@dataclass
class SecureKafka:
    """A running secured broker and what a client needs to use it."""

    broker: RunningBroker
    sasl_bootstrap: str
    ssl_bootstrap: str
    certs: Certificates
    passwords: Mapping[str, str] = field(repr=False)
    admin_properties: Path
    jvm: Sequence[str]

    def sasl_settings(self, user: str, *, mechanism: str | None = None, password: str | None = None) -> dict[str, Any]:
        """``KafkaSettings`` fields for ``user`` on the SASL_SSL listener (the password from the environment)."""
        return {
            "bootstrap_servers": self.sasl_bootstrap,
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": mechanism or SCRAM_USERS.get(user, "PLAIN"),
            "sasl_username": user,
            "sasl_password": password if password is not None else self.passwords[user],
            "ssl_cafile": self.certs.ca,
        }

    def tls_settings(self, cn: str) -> dict[str, Any]:
        """``KafkaSettings`` fields for the client certificate ``cn`` on the mutual-TLS listener."""
        cert, key = self.certs.clients[cn]
        return {
            "bootstrap_servers": self.ssl_bootstrap,
            "security_protocol": "SSL",
            "ssl_cafile": self.certs.ca,
            "ssl_certfile": cert,
            "ssl_keyfile": key,
            "ssl_key_password": self.certs.key_password,
        }

    def admin_client(self) -> ClientConfig:
        return client_config(KafkaSettings.model_validate(self.sasl_settings("admin")))

    def acl(self, *args: str) -> None:
        """Run Kafka's ACL tool as the super user, e.g. ``acl("--add", "--allow-principal", "User:worker", ...)``."""
        argv = [*self.jvm, "org.apache.kafka.tools.AclCommand", "--bootstrap-server", self.sasl_bootstrap]
        argv += ["--command-config", str(self.admin_properties), *args]
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0 or "Error" in done.stdout:
            raise BrokerError(f"AclCommand {' '.join(args)} failed ({done.returncode}): {done.stdout}{done.stderr}")

    def stop(self) -> None:
        self.broker.stop()


def _properties(data_dir: Path, sasl_port: int, ssl_port: int, controller_port: int, certs: Certificates,
                passwords: Mapping[str, str]) -> dict[str, str]:  # fmt: skip
    base = kafka_server_properties(data_dir, sasl_port, controller_port)
    admin = passwords["admin"]
    plain_users = " ".join(f"user_{u}={_jaas_value(passwords[u])}" for u in ("admin", *PLAIN_USERS))
    secured = {
        "listeners": f"SASL_SSL://127.0.0.1:{sasl_port},SSL://127.0.0.1:{ssl_port},"
        f"CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"SASL_SSL://127.0.0.1:{sasl_port},SSL://127.0.0.1:{ssl_port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram."
        f"ScramLoginModule required username={_jaas_value('admin')} password={_jaas_value(admin)};",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": "org.apache.kafka.common.security.scram."
        "ScramLoginModule required;",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule"
        f" required username={_jaas_value('admin')} password={_jaas_value(admin)} {plain_users};",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "false",
    }
    return {**base, **secured}


def start_secure_kafka(data_dir: Path, kafka_home: Path | None = None, ready_timeout: float = 120) -> SecureKafka:
    """Start the secured broker in a fresh ``data_dir``; return once the admin can read its metadata."""
    libs = _kafka_libs(kafka_home or default_kafka_home())
    java = _java_binary()
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    certs = make_certificates(data_dir / "certs")
    passwords = {user: secrets.token_urlsafe(18) for user in (*SCRAM_USERS, *PLAIN_USERS)}
    ports: set[int] = set()
    while len(ports) < 3:
        ports.add(free_port())
    sasl_port, ssl_port, controller_port = sorted(ports)
    log_path = data_dir / "kafka.log"
    rendered = _properties(data_dir, sasl_port, ssl_port, controller_port, certs, passwords)
    properties = data_dir / "server.properties"
    properties.write_text("".join(f"{key}={value}\n" for key, value in rendered.items()))
    properties.chmod(0o600)
    log4j = data_dir / "log4j2.properties"
    log4j.write_text(_LOG4J2_PROPERTIES.format(log_path=log_path))
    jvm = [str(java), *_JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{libs}/*"]

    fmt = [*jvm, "kafka.tools.StorageTool", "format", "--cluster-id", random_cluster_id(), "--config", str(properties)]
    for user, mechanism in SCRAM_USERS.items():
        fmt += ["--add-scram", f"{mechanism}=[name={user},password={passwords[user]}]"]
    with log_path.open("ab") as log:
        done = subprocess.run(
            fmt, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, timeout=120, check=False
        )
    if done.returncode != 0:
        raise BrokerError(f"formatting {data_dir / 'kraft'} failed (exit {done.returncode}):\n{_tail(log_path, 20)}")

    admin_properties = data_dir / "admin.properties"
    admin_properties.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f"username={_jaas_value('admin')} password={_jaas_value(passwords['admin'])};\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={certs.ca}\n"
    )
    admin_properties.chmod(0o600)
    admin = KafkaSettings.model_validate(
        {
            "bootstrap_servers": f"127.0.0.1:{sasl_port}",
            "security_protocol": "SASL_SSL",
            "sasl_username": "admin",
            "sasl_password": passwords["admin"],
            "ssl_cafile": certs.ca,
        }
    )
    broker = launch_broker(
        "kafka",
        [*jvm, "kafka.Kafka", str(properties)],
        port=sasl_port,
        data_dir=data_dir,
        log_path=log_path,
        ready_timeout=ready_timeout,
        ready_client=client_config(admin),
    )
    return SecureKafka(
        broker=broker,
        sasl_bootstrap=f"127.0.0.1:{sasl_port}",
        ssl_bootstrap=f"127.0.0.1:{ssl_port}",
        certs=certs,
        passwords=passwords,
        admin_properties=admin_properties,
        jvm=jvm,
    )
