"""Apache Kafka for tests, CI and benchmarks: one KRaft node on 127.0.0.1 (development only).

The runtime never starts Kafka: production points ``PAIRJUDGE_KAFKA__BOOTSTRAP_SERVERS`` at a cluster,
and the demo embeds Tansu (``streams.kafka.embedded``). This starts the real broker the test suite
and the benchmarks run against: one JVM that is both broker and controller. Its jars come from
``deploy/kafka/fetch.sh``; the command line is built here rather than by calling
``deploy/kafka/start.sh``, so a test or bench can start it from Python and stop it with its process
group (``RunningBroker``).
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from pairjudge.streams.kafka.admin import BrokerError, wait_until_ready
from pairjudge.streams.kafka.embedded import RunningBroker, free_port, launch_broker, run_blocking

__all__ = [
    "KAFKA_VERSION",
    "default_kafka_home",
    "kafka_server_properties",
    "random_cluster_id",
    "start_kafka",
    "wait_until_ready_blocking",
]

#: Must match ``kafka.version`` in deploy/kafka/pom.xml (a test checks it).
KAFKA_VERSION: Final = "4.1.1"
#: Debian's JDK 17 location, used when neither JAVA_HOME nor ``java`` on PATH is set.
DEFAULT_JAVA_HOME: Final = Path("/usr/lib/jvm/java-17-openjdk-amd64")
KAFKA_HOME_ENV: Final = "PAIRJUDGE_KAFKA_HOME"


#: The broker settings; deploy/kafka/server.properties is the commented template for start.sh, and a
#: test keeps the two identical. ``{port}``, ``{controller_port}`` and ``{data_dir}`` are filled in.
_KAFKA_PROPERTIES: Final[Mapping[str, str]] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.voters": "1@127.0.0.1:{controller_port}",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "listeners": "PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
    "advertised.listeners": "PLAINTEXT://127.0.0.1:{port}",
    "log.dirs": "{data_dir}/kraft",
    "auto.create.topics.enable": "false",
    "num.partitions": "4",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "8",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "min.insync.replicas": "1",
    "default.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.threads": "1",
    "log.segment.bytes": "67108864",
}

_LOG4J2_PROPERTIES: Final = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log_path}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
logger.raft.name = kafka.server.KafkaRaftServer
logger.raft.level = info
logger.broker.name = kafka.server.BrokerServer
logger.broker.level = info
logger.controller.name = kafka.server.ControllerServer
logger.controller.level = info
"""

_JVM_OPTIONS: Final = (
    "-Xms256m",
    "-Xmx512m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-Djava.awt.headless=true",
)


def kafka_server_properties(data_dir: Path, port: int, controller_port: int) -> dict[str, str]:
    """The rendered broker configuration (what start_kafka writes to DATA_DIR/server.properties)."""
    values = {"port": port, "controller_port": controller_port, "data_dir": str(data_dir)}
    return {key: value.format(**values) for key, value in _KAFKA_PROPERTIES.items()}


def default_kafka_home() -> Path:
    """``$PAIRJUDGE_KAFKA_HOME``, else ``~/.cache/pairjudge/kafka-<version>`` (where fetch.sh puts the jars)."""
    env = os.environ.get(KAFKA_HOME_ENV)
    return Path(env) if env else Path.home() / ".cache" / "pairjudge" / f"kafka-{KAFKA_VERSION}"


def _java_binary() -> Path:
    candidates: list[Path] = []
    if java_home := os.environ.get("JAVA_HOME"):
        candidates.append(Path(java_home) / "bin" / "java")
    if on_path := shutil.which("java"):
        candidates.append(Path(on_path))
    candidates.append(DEFAULT_JAVA_HOME / "bin" / "java")
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise BrokerError("java not found: install a Java 17+ runtime (e.g. openjdk-17-jre-headless) or set JAVA_HOME")


def _kafka_libs(kafka_home: Path) -> Path:
    libs = kafka_home / "libs"
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise BrokerError(
            f"no Kafka jars in {libs}: run deploy/kafka/fetch.sh "
            f"(or set {KAFKA_HOME_ENV} to a folder whose libs/ holds the Kafka {KAFKA_VERSION} runtime jars)"
        )
    return libs


def random_cluster_id() -> str:
    # Kafka's Uuid text form: 16 random bytes, URL-safe base64, no padding (what `random-uuid` prints).
    # Like Kafka's own Uuid.randomUuid, never start with "-": the storage tool would read the id as
    # an option and fail to format (1 start in 64).
    while True:
        cluster_id = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def start_kafka(
    data_dir: Path, port: int | None = None, kafka_home: Path | None = None, ready_timeout: float = 90
) -> RunningBroker:
    """Start a single-node KRaft Kafka with its data in ``data_dir``; return once it answers metadata.

    ``data_dir`` is formatted on first use and reused after that (ports may change between runs).
    The broker log (log4j and the JVM's own output) is ``data_dir/kafka.log``.
    """
    libs = _kafka_libs(kafka_home or default_kafka_home())
    java = _java_binary()
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    controller_port = free_port()
    while controller_port == port:
        controller_port = free_port()
    log_path = data_dir / "kafka.log"

    properties = data_dir / "server.properties"
    rendered = kafka_server_properties(data_dir, port, controller_port)
    properties.write_text("".join(f"{key}={value}\n" for key, value in rendered.items()))
    log4j = data_dir / "log4j2.properties"
    log4j.write_text(_LOG4J2_PROPERTIES.format(log_path=log_path))

    jvm = [str(java), *_JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{libs}/*"]
    if not (data_dir / "kraft" / "meta.properties").exists():
        fmt = [*jvm, "kafka.tools.StorageTool", "format", "--ignore-formatted"]
        fmt += ["--cluster-id", random_cluster_id(), "--config", str(properties)]
        with log_path.open("ab") as log:
            done = subprocess.run(
                fmt, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, timeout=120, check=False
            )
        if done.returncode != 0:
            raise BrokerError(
                f"formatting {data_dir / 'kraft'} failed (exit {done.returncode}):\n{_tail(log_path, 20)}"
            )

    return launch_broker(
        "kafka",
        [*jvm, "kafka.Kafka", str(properties)],
        port=port,
        data_dir=data_dir,
        log_path=log_path,
        ready_timeout=ready_timeout,
    )


def wait_until_ready_blocking(bootstrap: str, timeout: float) -> None:
    """``wait_until_ready`` for synchronous callers such as session fixtures (safe inside a running loop)."""
    run_blocking(lambda: wait_until_ready(bootstrap, timeout))


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"
