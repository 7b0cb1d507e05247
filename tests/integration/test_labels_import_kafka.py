"""``pairjudge labels import`` on the real broker: every good label once, keyed and partitioned with its
pair; every bad line a dead letter with its reason and its original bytes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from typer.testing import CliRunner

from pairjudge.schemas import WIRE_CONTEXT, DeadLetter, HumanLabel
from pairjudge.streams.cli import app
from pairjudge.streams.config.settings import Settings
from pairjudge.streams.kafka.admin import BrokerError, create_topics, topic_partitions
from pairjudge.streams.kafka.topics import topic_specs
from pairjudge_dev.pairgen import many_pairs

pytestmark = [pytest.mark.kafka]

#: The checkout these tests belong to, so the subprocess runs this code, not an installed copy.
ROOT = Path(__file__).resolve().parents[2]


def _setup(
    bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> tuple[str, list[dict[str, object]]]:
    """A fresh topic prefix with its topics, and five pairs sent to it (as `pairjudge send` does)."""
    prefix = f"labels-{kind}-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("PAIRJUDGE_TOPICS__PREFIX", prefix)
    asyncio.run(create_topics(bootstrap, topic_specs(Settings())))
    pairs = many_pairs(5, prefix)
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(b"\n".join(pairs) + b"\n")
    sent = CliRunner().invoke(app, ["send", str(path), "--bootstrap", bootstrap])
    assert sent.exit_code == 0, sent.output
    return prefix, [json.loads(p) for p in pairs]


def _label(pair: dict[str, object], winner_index: int | None, reviewer: str = "alice") -> bytes:
    candidates = pair["candidates"]
    assert isinstance(candidates, list)
    winner = "TIE" if winner_index is None else candidates[winner_index]["candidate_id"]
    return json.dumps({"pair_id": pair["pair_id"], "winner": winner, "reviewer": reviewer}).encode()


def test_import_jsonl_as_a_user_would(kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix, pairs = _setup(kafka_bootstrap, tmp_path, monkeypatch, "jsonl")
    good = [
        _label(pairs[0], 0),
        _label(pairs[1], 1),
        _label(pairs[2], None),
        _label(pairs[0], 1, reviewer="bob"),  # a second label for pairs[0]: kept, and counted
    ]
    bad = {
        b'{"pair_id": "' + str(pairs[3]["pair_id"]).encode() + b'", "winner": ': "malformed_json",
        _label(pairs[3], 0)[:-1] + b', "score": 5}': "unknown_field",
        b'{"pair_id": "' + str(pairs[4]["pair_id"]).encode() + b'", "winner": "TIE"}': "missing_field",
        _label(pairs[4], 0)[:-1] + b', "rationale": "' + b"x" * 70_000 + b'"}': "oversized_line",
        b'{"pair_id": "p-\xff", "winner": "TIE", "reviewer": "r"}': "not_utf8",
    }
    lines = [good[0], *list(bad)[:2], good[1], b"", good[2], *list(bad)[2:], good[3]]
    path = tmp_path / "labels.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(lines) + b"\r\n")  # as a Windows tool writes it

    env = {**os.environ, "PYTHONPATH": str(ROOT), "PAIRJUDGE_TOPICS__PREFIX": prefix}
    done = subprocess.run(
        [sys.executable, "-m", "pairjudge.streams.cli", "labels", "import", str(path), "--bootstrap", kafka_bootstrap],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    out = done.stdout.decode()
    assert done.returncode == 1, (out, done.stderr.decode())  # lines were dead-lettered
    assert f"published 4 labels to {prefix}.labels" in out
    assert f"5 lines dead-lettered to {prefix}.deadletter" in out
    assert "1 pair ids labelled more than once" in out

    labels = asyncio.run(_read_all(kafka_bootstrap, f"{prefix}.labels"))
    # Every good label exactly once, byte for byte what the contract encodes, keyed by its pair id.
    got = Counter(
        (r.key, HumanLabel.model_validate_json(r.value).model_dump_json(exclude={"labelled_at"})) for r in labels
    )
    want = Counter(
        (
            json.loads(line)["pair_id"].encode(),
            # read as the import reads it: a line without schema_version is version 1
            HumanLabel.model_validate_json(line, context=WIRE_CONTEXT).model_dump_json(exclude={"labelled_at"}),
        )
        for line in good
    )
    assert got == want
    # On the partition of its pair: the pairs were keyed by pair id by `pairjudge send`.
    pair_partition = {r.key: r.partition for r in asyncio.run(_read_all(kafka_bootstrap, f"{prefix}.pairs"))}
    assert all(r.partition == pair_partition[r.key] for r in labels)

    letters = asyncio.run(_read_all(kafka_bootstrap, f"{prefix}.deadletter"))
    decoded = [DeadLetter.model_validate_json(r.value) for r in letters]
    assert Counter((d.original, d.reason) for d in decoded) == Counter(bad.items())
    for record, letter in zip(letters, decoded, strict=True):
        assert letter.stage == "decode"
        assert letter.topic == f"{prefix}.labels"
        assert (letter.partition, letter.offset) == (None, None)
        assert not letter.original_truncated
        assert letter.error.startswith("labels.jsonl line ")
        if letter.pair_id is not None:  # the JSON lines whose pair id could be read
            assert record.key == letter.pair_id.encode()
    by_reason = {d.reason: d for d in decoded}
    assert by_reason["malformed_json"].pair_id == pairs[3]["pair_id"]  # read from the broken line, as a guess
    assert "line 2:" in by_reason["malformed_json"].error
    assert "score" in by_reason["unknown_field"].error


def test_import_csv_with_bad_rows(kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix, pairs = _setup(kafka_bootstrap, tmp_path, monkeypatch, "csv")
    ids = [str(p["pair_id"]) for p in pairs]
    rows = [
        b"pair_id,winner,reviewer,rationale,labelled_at,from_audit",
        f'{ids[0]},TIE,alice,"equal, really",2026-11-30T10:00:00Z,true'.encode(),
        f"{ids[1]},,alice,,,".encode(),  # missing winner
        f"{ids[2]},TIE".encode(),  # wrong field count
        f'{ids[3]},TIE,carol,"two\nlines",,'.encode(),
    ]
    path = tmp_path / "export.csv"
    path.write_bytes(b"\r\n".join(rows) + b"\r\n")

    result = CliRunner().invoke(app, ["labels", "import", str(path), "--bootstrap", kafka_bootstrap, "--allow-bad"])
    assert result.exit_code == 0, result.output  # --allow-bad
    assert f"published 2 labels to {prefix}.labels" in result.output
    assert "2 lines dead-lettered" in result.output

    labels = asyncio.run(_read_all(kafka_bootstrap, f"{prefix}.labels"))
    decoded = sorted((HumanLabel.model_validate_json(r.value) for r in labels), key=lambda x: x.pair_id)
    assert sorted(r.key for r in labels) == sorted([ids[0].encode(), ids[3].encode()])
    pair_partition = {r.key: r.partition for r in asyncio.run(_read_all(kafka_bootstrap, f"{prefix}.pairs"))}
    assert all(r.partition == pair_partition[r.key] for r in labels)
    assert [(x.pair_id, x.rationale, x.from_audit) for x in decoded] == [
        (ids[0], "equal, really", True),
        (ids[3], "two\nlines", False),
    ]
    letters = asyncio.run(_read_all(kafka_bootstrap, f"{prefix}.deadletter"))
    found = {
        DeadLetter.model_validate_json(r.value).reason: (r.key, DeadLetter.model_validate_json(r.value))
        for r in letters
    }
    assert set(found) == {"missing_field", "wrong_field_count"}
    key, letter = found["missing_field"]
    assert (key, letter.original) == (ids[1].encode(), rows[2])  # keyed by the row's pair id
    key, letter = found["wrong_field_count"]
    assert (key, letter.original) == (None, rows[3])  # misaligned: no key claimed
    assert "export.csv line 4:" in letter.error


def test_missing_topics_are_an_error_and_are_not_created(
    kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = f"labels-none-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("PAIRJUDGE_TOPICS__PREFIX", prefix)
    path = tmp_path / "labels.jsonl"
    path.write_bytes(b'{"pair_id": "p-1", "winner": "TIE", "reviewer": "alice"}\n')
    result = CliRunner().invoke(app, ["labels", "import", str(path), "--bootstrap", kafka_bootstrap])
    assert result.exit_code == 3, result.output
    assert f"{prefix}.labels" in result.output
    with pytest.raises(BrokerError):
        asyncio.run(topic_partitions(kafka_bootstrap, [f"{prefix}.labels"]))


async def _read_all(bootstrap: str, topic: str) -> list[ConsumerRecord[bytes, bytes]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in (await topic_partitions(bootstrap, [topic]))[topic]]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        records: list[ConsumerRecord[bytes, bytes]] = []
        while batch := await consumer.getmany(timeout_ms=2000):
            records.extend(r for rs in batch.values() for r in rs)
        return records
    finally:
        await consumer.stop()
