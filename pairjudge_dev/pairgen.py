"""Many distinct, realistic pairs for load tests, derived from the demo's sample set."""

from __future__ import annotations

import json
from importlib import resources

NAMES = ["Dana", "Sam", "Priya", "Lee", "Ana", "Tomás", "Kofi", "Mei", "Jonas", "Ravi", "Zoe", "Omar"]


def sample_dicts() -> list[dict[str, object]]:
    raw = resources.files("pairjudge.streams").joinpath("data/sample_pairs.jsonl").read_text()
    out = []
    for line in raw.splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if not str(data.get("pair_id", "")).startswith("bad-"):
            out.append(data)
    return out


def many_pairs(n: int, prefix: str) -> list[bytes]:
    """``n`` valid pairs with unique ids; outputs vary by a name so no two prompts are identical."""
    base = sample_dicts()
    events = []
    for i in range(n):
        data = json.loads(json.dumps(base[i % len(base)]))
        name = NAMES[(i // len(base)) % len(NAMES)]
        data["pair_id"] = f"{prefix}-{i:04d}"
        for cand in data["candidates"]:
            cand["output"] = cand["output"].replace("Dana", name).replace("Sam", name).replace("Priya", name) + (
                f" Ref {i}."
            )
        events.append(json.dumps(data).encode())
    return events


def malformed_events(prefix: str) -> dict[str, bytes]:
    """pair_id -> bytes that must be dead-lettered, each for a different reason."""
    good = json.loads(many_pairs(1, prefix)[0])
    unknown = dict(good, pair_id=f"{prefix}-bad-unknown", surprise=True)
    missing = {k: v for k, v in good.items() if k != "task"}
    missing["pair_id"] = f"{prefix}-bad-missing"
    oversized = json.loads(json.dumps(good))
    oversized["pair_id"] = f"{prefix}-bad-oversized"
    oversized["candidates"][1]["output"] = "x " * 15_000
    same_ids = json.loads(json.dumps(good))
    same_ids["pair_id"] = f"{prefix}-bad-same-ids"
    same_ids["candidates"][1]["candidate_id"] = same_ids["candidates"][0]["candidate_id"]
    return {
        f"{prefix}-bad-unknown": json.dumps(unknown).encode(),
        f"{prefix}-bad-missing": json.dumps(missing).encode(),
        f"{prefix}-bad-oversized": json.dumps(oversized).encode(),
        f"{prefix}-bad-same-ids": json.dumps(same_ids).encode(),
        f"{prefix}-bad-truncated": (f'{{"pair_id": "{prefix}-bad-truncated", "task": {{"prom').encode(),
    }
