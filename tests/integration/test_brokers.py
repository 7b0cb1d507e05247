"""Both brokers pairjudge runs itself, exercised for real: Apache Kafka (tests/CI) and Tansu (demo).

Each must create topics with the partition counts asked for, carry keyed messages to a consumer group
without loss or duplication, and listen on loopback only.
"""

from __future__ import annotations

import ipaddress
import itertools
import json
import os
import re
import socket
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped,unused-ignore]
from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped,unused-ignore]
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType  # type: ignore[import-untyped,unused-ignore]

from pairjudge.streams.kafka.admin import BrokerError, TopicSpec, create_topics
from pairjudge_dev.kafka import KAFKA_VERSION, kafka_server_properties, random_cluster_id

REPO = Path(__file__).resolve().parents[2]
N_MESSAGES = 200


@pytest.fixture(params=[pytest.param("kafka", marks=pytest.mark.kafka), "tansu"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    value: str = request.getfixturevalue(f"{request.param}_bootstrap")
    return value


# --- configuration kept in two places -----------------------------------------------------------------


def _template_properties(path: Path, values: dict[str, str]) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, _, value = line.partition("=")
        for name, replacement in values.items():
            value = value.replace(f"@{name}@", replacement)
        props[key.strip()] = value.strip()
    return props


def test_start_sh_template_and_python_render_the_same_kafka_config() -> None:
    data_dir = Path("/data/dir")
    rendered = kafka_server_properties(data_dir, 1111, 2222)
    template = _template_properties(
        REPO / "deploy/kafka/server.properties",
        {"PORT": "1111", "CONTROLLER_PORT": "2222", "DATA_DIR": str(data_dir)},
    )
    assert template == rendered
    assert not [v for v in template.values() if re.search(r"@[A-Z_]+@", v)], "a placeholder was left unfilled"
    # Only loopback listeners, and no topic appears by accident (docs/design.md §8).
    assert rendered["listeners"] == "PLAINTEXT://127.0.0.1:1111,CONTROLLER://127.0.0.1:2222"
    assert rendered["auto.create.topics.enable"] == "false"


def test_pom_and_python_agree_on_the_kafka_version() -> None:
    pom = (REPO / "deploy/kafka/pom.xml").read_text()
    match = re.search(r"<kafka.version>([^<]+)</kafka.version>", pom)
    assert match is not None
    assert match.group(1) == KAFKA_VERSION


# --- topics --------------------------------------------------------------------------------------------


async def _describe(bootstrap: str, names: list[str]) -> dict[str, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        topics = await admin.describe_topics(names)
    finally:
        await admin.close()
    return {t["topic"]: len(t["partitions"]) for t in topics if t["error_code"] == 0}


async def _cleanup_policy(bootstrap: str, topic: str) -> str | None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        await admin.close()
    for response in responses:
        for _code, _message, _type, name, entries in response.resources:
            if name == topic:
                for entry in entries:
                    if entry[0] == "cleanup.policy":
                        return str(entry[1])
    return None


async def test_topics_get_the_partitions_asked_for_and_creation_is_idempotent(
    bootstrap: str, unique_topic_prefix: str
) -> None:
    events, control = f"{unique_topic_prefix}events", f"{unique_topic_prefix}control"
    specs = {events: TopicSpec(partitions=4), control: TopicSpec(partitions=1, compacted=True)}

    await create_topics(bootstrap, specs)
    assert await _describe(bootstrap, [events, control]) == {events: 4, control: 1}
    assert await _cleanup_policy(bootstrap, control) == "compact"
    assert await _cleanup_policy(bootstrap, events) != "compact"

    # Again: existing topics with the same shape are fine.
    await create_topics(bootstrap, specs)
    # A different partition count is refused, not silently accepted (Faust would crash-loop on it).
    with pytest.raises(BrokerError, match="4 partitions, not 3"):
        await create_topics(bootstrap, {events: TopicSpec(partitions=3)})
    assert await _describe(bootstrap, [events]) == {events: 4}


# --- messages ------------------------------------------------------------------------------------------


async def test_keyed_messages_reach_a_consumer_group_exactly_once(bootstrap: str, unique_topic_prefix: str) -> None:
    topic = f"{unique_topic_prefix}pairs"
    await create_topics(bootstrap, {topic: TopicSpec(partitions=4)})

    sent: dict[str, int] = {}  # key -> partition the producer says it went to
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        futures = []
        for i in range(N_MESSAGES):
            key = f"pair-{i:03d}"
            value = json.dumps({"pair_id": key, "n": i}).encode()
            futures.append((key, await producer.send(topic, value=value, key=key.encode())))
        for key, future in futures:
            sent[key] = (await future).partition
    finally:
        await producer.stop()
    assert len(set(sent.values())) == 4, f"200 keys should spread over all 4 partitions: {sorted(set(sent.values()))}"

    received: list[tuple[str, int, dict[str, object]]] = []
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"{unique_topic_prefix}group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        # Tansu holds a join for half the session timeout; keep it short.
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
    )
    await consumer.start()
    try:
        deadline = time.monotonic() + 60
        while len(received) < N_MESSAGES and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for records in batches.values():
                received += [(r.key.decode(), r.partition, json.loads(r.value)) for r in records]
        # Keep polling briefly: a duplicate would arrive after the count is reached.
        quiet_until = time.monotonic() + 1.5
        while time.monotonic() < quiet_until:
            for records in (await consumer.getmany(timeout_ms=300)).values():
                received += [(r.key.decode(), r.partition, json.loads(r.value)) for r in records]
        assignment = {tp.partition for tp in consumer.assignment()}
    finally:
        await consumer.stop()

    keys = [key for key, _, _ in received]
    assert len(keys) == N_MESSAGES, f"received {len(keys)} messages, {len(set(keys))} distinct"
    assert set(keys) == set(sent)
    assert assignment == {0, 1, 2, 3}
    for key, partition, payload in received:
        assert partition == sent[key], f"{key} was produced to {sent[key]} but read from {partition}"
        assert payload == {"pair_id": key, "n": int(key.removeprefix("pair-"))}


# --- loopback only -------------------------------------------------------------------------------------

_LISTEN = "0A"


def _proc_net_address(hex_addr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    # /proc/net/tcp{,6} print addresses as 32-bit words in host byte order (little-endian here).
    raw = b"".join(bytes.fromhex(hex_addr[i : i + 8])[::-1] for i in range(0, len(hex_addr), 8))
    address = ipaddress.ip_address(raw)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # Java binds 127.0.0.1 as ::ffff:127.0.0.1 on a dual-stack socket
    return address


def _listening_sockets() -> dict[int, tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """inode -> (address, port) for every listening TCP socket in this network namespace."""
    sockets = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], int(fields[9])
            if state == _LISTEN:
                hex_addr, hex_port = local.split(":")
                sockets[inode] = (_proc_net_address(hex_addr), int(hex_port, 16))
    return sockets


def _socket_owners(inodes: set[int]) -> set[int]:
    owners = set()
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            for fd in (pid_dir / "fd").iterdir():
                match = re.fullmatch(r"socket:\[(\d+)\]", os.readlink(fd))
                if match and int(match.group(1)) in inodes:
                    owners.add(int(pid_dir.name))
        except OSError:  # gone, or not ours to read
            continue
    return owners


def _non_loopback_ipv4() -> list[str]:
    """This host's own IPv4 addresses other than 127/8 (from the kernel's local routing table)."""
    lines = Path("/proc/net/fib_trie").read_text().splitlines()
    found = set()
    for previous, line in itertools.pairwise(lines):
        if "/32 host LOCAL" in line:
            address = previous.split()[-1]
            if not ipaddress.ip_address(address).is_loopback:
                found.add(address)
    return sorted(found)


def _is_loopback(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return address.is_loopback  # 0.0.0.0 and :: (every interface) are not


async def test_the_broker_listens_on_loopback_only(bootstrap: str) -> None:
    port = int(bootstrap.rsplit(":", 1)[1])
    listening = _listening_sockets()
    on_port = {inode: addr for inode, addr in listening.items() if addr[1] == port}
    assert on_port, f"nothing listens on port {port}"
    assert all(_is_loopback(address) for address, _ in on_port.values()), on_port

    # Every listening socket of the broker process (Kafka also has its controller port), not only
    # the one we asked about.
    owners = _socket_owners(set(on_port))
    assert owners, "could not find the process that owns the broker's socket"
    for pid in owners:
        owned = {inode for inode in listening if inode in _socket_inodes(pid)}
        wide = [listening[inode] for inode in owned if not _is_loopback(listening[inode][0])]
        assert not wide, f"broker process {pid} listens beyond loopback: {wide}"

    # And from the outside: the port is closed on this host's other addresses.
    for address in _non_loopback_ipv4():
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(2)
            assert sock.connect_ex((address, port)) != 0, f"broker port {port} answers on {address}"


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            match = re.fullmatch(r"socket:\[(\d+)\]", os.readlink(fd))
        except OSError:
            continue
        if match:
            inodes.add(int(match.group(1)))
    return inodes


def test_cluster_ids_never_look_like_an_option() -> None:
    # One id in 64 would start with "-" and make the storage tool fail to format (seen in a test run).
    ids = [random_cluster_id() for _ in range(2000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(i) == 22 for i in ids)
