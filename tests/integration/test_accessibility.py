"""Accessibility: axe-core (Deque's engine, the npm package ``axe-core``) in Debian's Chromium, through Playwright,
over the five pages a newcomer meets (the review queue, the audit view, the scoreboard, the operators' page and
the HTML report), in light and in dark mode, with every folded section opened. Any serious or critical
violation fails the test; the lesser ones are printed.

The pages are served by the real review service (uvicorn on 127.0.0.1, real Kafka) with content on every one
of them: a review item, an audit snapshot, scoreboards, a paused kappa guard; the report is written from the
same snapshots and opened as a file, as a user opens it.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Literal

import pytest
from aiokafka import AIOKafkaProducer
from playwright.async_api import Browser, Page

from pairjudge.agents.audit.stages import tiebreak_threshold_key
from pairjudge.schemas import ReviewRequest
from pairjudge.schemas.audit import AuditSnapshot, ThresholdUpdate
from pairjudge.streams.audit.report import parse_audit_events, write_report
from pairjudge.streams.control.live import publish_control
from pairjudge.streams.kafka.codecs import encode
from tests.fixtures.browser import AXE_FAILING_IMPACTS, axe_violations
from tests.fixtures.review import PASSWORDS, review_settings, send_reviews, serving, wait_stored
from tests.fixtures.scoreboard import biased_judge_snapshots
from tests.unit.factories import make_pair, tone_rubric
from tests.unit.test_report import series, window

pytestmark = [pytest.mark.kafka, pytest.mark.browser]

Scheme = Literal["light", "dark"]
SCHEMES: tuple[Scheme, ...] = ("light", "dark")


def _audit_snapshots() -> list[AuditSnapshot]:
    calm, drifting = series("exp-a11y"), series("exp-drift")
    return [window(calm, h, 40, 5) for h in range(3)] + [window(drifting, h, 25 - 5 * h, 5 + 5 * h) for h in range(3)]


async def _check(page: Page, name: str, scheme: Scheme, found: dict[str, list[dict[str, Any]]]) -> None:
    """Open every folded section, run axe, keep what it found under ``name (scheme)``."""
    await page.emulate_media(color_scheme=scheme)
    await page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
    found[f"{name} ({scheme})"] = await axe_violations(page)


def _report(found: dict[str, list[dict[str, Any]]]) -> str:
    lines = []
    for where, violations in found.items():
        for v in violations:
            lines.append(f"{where}: [{v['impact']}] {v['id']}: {v['help']}")
            lines.extend(f"    {node}" for node in v["nodes"])
    return "\n".join(lines) or "none"


async def test_the_five_pages_have_no_serious_or_critical_accessibility_violation(
    kafka_bootstrap: str, tmp_path: Path, browser: Browser
) -> None:
    prefix = f"a11y-{uuid.uuid4().hex[:8]}"
    settings = review_settings(kafka_bootstrap, prefix, tmp_path)
    pair = make_pair(
        pair_id=f"{prefix}-pair",
        rubric=tone_rubric(),
        outputs=("Happy first birthday, Biscuit! \N{BIRTHDAY CAKE} One whole year of zoomies.", "Happy birthday."),
    )
    await send_reviews(
        settings, [ReviewRequest(pair_id=pair.pair_id, reason="audit_sample", stage="primary", pair=pair, audit=True)]
    )
    snapshots = _audit_snapshots()
    scores = biased_judge_snapshots("exp-a11y")
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:
        for snap in snapshots:
            await producer.send_and_wait(settings.topics.name("audit"), encode(snap), key=snap.series.encode())
        for score in scores:
            await producer.send_and_wait(settings.topics.name("scores"), encode(score))
        # One series' tie-break switched off by the audit: the operators' page offers to switch it back on.
        off = ThresholdUpdate(
            series=snapshots[0].series,
            threshold=None,
            target=0.9,
            risk=0.1,
            labels=60,
            stage="tiebreak",
            switched_off=True,
        )
        key = tiebreak_threshold_key(off.series).encode()
        await producer.send_and_wait(settings.topics.name("thresholds"), encode(off), key=key)
    finally:
        await producer.stop()
    await publish_control(settings, "kappa_guard_tripped", True, "drift audit")
    report = write_report(
        parse_audit_events([s.model_dump_json() for s in snapshots] + [s.model_dump_json() for s in scores]),
        tmp_path / "report.html",
    )

    found: dict[str, list[dict[str, Any]]] = {}
    async with serving(settings) as server:
        await wait_stored(server, 1)
        # The pages' Content-Security-Policy (rightly) refuses injected scripts: axe is let in by the browser.
        context = await browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
        page = await context.new_page()
        await page.goto(f"{server.url}/login")
        await _check(page, "sign-in", "light", found)
        await page.fill('input[name="name"]', "olga")
        await page.fill('input[name="password"]', PASSWORDS["olga"])
        await page.click('button[type="submit"]')
        await page.locator("article.item").wait_for()
        pages = {"queue": "/", "audit": "/audit", "scoreboard": "/scores", "operators": "/operators"}
        ready = {
            "queue": "article.item",
            "audit": "#audit-series",
            "scoreboard": "section.board svg.chart",
            "operators": "section:has(#resume) ~ section .tiebreak-on",
        }
        for name, path in pages.items():
            for _ in range(100):  # the service reads the topics in the background
                await page.goto(server.url + path)
                if await page.locator(ready[name]).count():
                    break
                await page.wait_for_timeout(100)
            await page.locator(ready[name]).first.wait_for(state="attached")
            for scheme in SCHEMES:
                await _check(page, name, scheme, found)
        await page.goto(report.as_uri())
        for scheme in SCHEMES:
            await _check(page, "report", scheme, found)
        await context.close()

    assert set(found) == {
        f"{n} ({s})" for n in ("queue", "audit", "scoreboard", "operators", "report") for s in ("light", "dark")
    } | {"sign-in (light)"}
    print("axe-core found:\n" + _report(found))
    failing = {where: [v for v in vs if v["impact"] in AXE_FAILING_IMPACTS] for where, vs in found.items()}
    failing = {where: vs for where, vs in failing.items() if vs}
    assert not failing, "serious or critical accessibility violations:\n" + _report(failing)
