"""Draw the report plot of docs/guides/drift-audit.md#the-report from a real run: the sample pairs and their
demo labels, judged by the offline judge on Kafka in several short windows, then ``pairjudge report`` over
what the audit published.

    python -m pairjudge_dev.report_sample --bootstrap 127.0.0.1:19092 --out docs/

Writes ``<out>/audit-report-sample.html`` and the tie-break plot of the brand-voice series as
``<out>/audit-tiebreak-rate.svg``. The figures are the offline judge's on 12 sample pairs a round:
an illustration of the report, not evidence about any judge.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from pairjudge.streams.audit.report import latest_per_window, parse_audit_events, write_report
from pairjudge.streams.audit.report_charts import rates_plot
from pairjudge.streams.cli.demo import sample_labels, sample_pairs
from pairjudge.streams.kafka.collector import collect_outcomes, read_topic
from pairjudge.streams.kafka.producer import send_events
from pairjudge_dev.workers import kafka_run, produce_raw, running_worker

WINDOW_S = 20.0


def _tagged(raw: bytes, tag: str) -> bytes | None:
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(body, dict) or ("candidates" not in body and "winner" not in body):
        return None
    body["pair_id"] = f"{tag}-{body['pair_id']}"
    return json.dumps(body).encode()


async def run(bootstrap: str, out: Path, rounds: int) -> None:
    work = out / "report-sample-work"
    settings = await kafka_run(
        bootstrap,
        work,
        "report",
        audit={"window_s": WINDOW_S, "snapshot_interval_s": 1.0, "min_pairs": 5},
    )
    with running_worker(settings, work / "worker.log"):
        for n in range(rounds):
            tag = f"r{n}"
            pairs = [e for e in (_tagged(raw, tag) for raw in sample_pairs()) if e]
            ids = {json.loads(e)["pair_id"] for e in pairs}
            await send_events(settings, pairs)
            await collect_outcomes(settings, ids, timeout=120)
            labels = [e for e in (_tagged(raw, tag) for raw in sample_labels()) if e]
            await produce_raw(bootstrap, settings.topics.name("labels"), labels, keyed=True)
            # Into the next window before the next round.
            await asyncio.sleep(WINDOW_S - time.time() % WINDOW_S + 1)
        await asyncio.sleep(3)
        records = await read_topic(settings, "audit", timeout=10)
    events = parse_audit_events([value for _, value in records if value])
    write_report(events, out / "audit-report-sample.html", title="pairjudge drift audit: sample run")
    windows = next(w for key, w in latest_per_window(events.snapshots).items() if "brand-voice" in key)
    (out / "audit-tiebreak-rate.svg").write_text(rates_plot(windows), encoding="utf-8")
    print(f"wrote {out / 'audit-report-sample.html'} and {out / 'audit-tiebreak-rate.svg'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--out", type=Path, default=Path("docs"))
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    asyncio.run(run(args.bootstrap, args.out, args.rounds))


if __name__ == "__main__":
    main()
