"""The review service end to end: real Kafka, SQLite, uvicorn on 127.0.0.1, and Debian's Chromium
driven by Playwright (no browser download), as a reviewer and an operator would use it."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Page

from pairjudge.schemas import ControlUpdate, HeadToHeadRubric, ReviewRequest
from pairjudge.schemas.events import OrderingResult
from pairjudge.schemas.rubric import Criterion
from tests.fixtures.review import (
    PASSWORDS,
    read_labels,
    read_topic,
    review_settings,
    send_reviews,
    serving,
    wait_stored,
)
from tests.unit.factories import make_pair

pytestmark = [pytest.mark.kafka, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
SECRET_JUSTIFICATION = "JUDGE-SAID-A-IS-BETTER-7f3a9"
#: The docs' screenshots (docs/review-ui.png, docs/scoreboard.png) are rewritten only when asked for.
UPDATE_SCREENSHOTS = os.environ.get("PAIRJUDGE_UPDATE_SCREENSHOTS") == "1"
XSS = '<script>window.__xss = 1</script><img src="x" onerror="window.__xss = 2">Click <b>here</b>'


def _request(i: int, prefix: str, *, output: str | None = None, head_to_head: bool = False) -> ReviewRequest:
    pid = f"{prefix}-item-{i}"
    overrides: dict[str, object] = {"pair_id": pid}
    if output is not None:
        overrides["outputs"] = (output, "A plain and correct answer.")
    if head_to_head:
        overrides["rubric"] = HeadToHeadRubric(
            criteria=(Criterion(name="helpfulness", description="Which helps more?"),)
        )
    pair = make_pair(**overrides)  # type: ignore[arg-type]
    first, second = pair.candidates
    hidden = OrderingResult(
        order_shown="AB",
        swapped=False,
        shown_as_a=first.candidate_id,
        shown_as_b=second.candidate_id,
        valid=True,
        raw_winner="A",
        mapped_winner=first.candidate_id,
        confidence=0.91,
        justification=SECRET_JUSTIFICATION,
    )
    return ReviewRequest(
        pair_id=pid,
        reason="tiebreak_disagreement",
        stage="tiebreak",
        pair=pair,
        orderings=(hidden,),
        last_justification=SECRET_JUSTIFICATION,
    )


async def _sign_in(page: Page, url: str, name: str) -> None:
    await page.goto(f"{url}/login")
    await page.fill('input[name="name"]', name)
    await page.fill('input[name="password"]', PASSWORDS[name])
    await page.click('button[type="submit"]')


async def test_review_three_items_by_keyboard_and_the_labels_reach_the_topic(
    kafka_bootstrap: str, tmp_path: Path, browser: Browser
) -> None:
    prefix = f"ui-{uuid.uuid4().hex[:8]}"
    settings = review_settings(kafka_bootstrap, prefix, tmp_path)
    requests = [_request(0, prefix), _request(1, prefix, head_to_head=True), _request(2, prefix, output=XSS)]
    await send_reviews(settings, requests)
    async with serving(settings) as server:
        await wait_stored(server, 3)
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        dialogs: list[str] = []
        page.on("dialog", lambda d: dialogs.append(d.message))
        await _sign_in(page, server.url, "ana")
        chosen: dict[str, str] = {}
        displayed: list[str] = []
        for n, key in enumerate(("1", "2", "1")):
            article = page.locator("article.item")
            await article.wait_for()
            pair_id = await article.locator(".meta code").inner_text()
            html = await page.content()
            # Against anchoring: neither the judge's justification nor its verdict is in the page source.
            assert SECRET_JUSTIFICATION not in html
            assert "0.91" not in html
            if n == 0 and UPDATE_SCREENSHOTS:
                await page.screenshot(path=str(ROOT / "docs" / "review-ui.png"), full_page=False)
            # The key hints offer 3 (tie) only where the rubric has a tie; elsewhere 3 does nothing.
            allows_tie = await article.get_attribute("data-allow-tie") == "yes"
            assert ("tie" in await article.locator(".keys").inner_text()) == allows_tie
            await page.keyboard.press("3")
            assert await page.locator('input[name="choice"]:checked').count() == int(allows_tie)
            shown = "#output-a" if key == "1" else "#output-b"
            chosen[pair_id] = await page.locator(shown).inner_text()
            displayed.extend(
                [await page.locator("#output-a").inner_text(), await page.locator("#output-b").inner_text()]
            )
            await page.keyboard.press(key)
            await page.keyboard.press("Enter")
            if n < 2:
                await page.wait_for_function(
                    "id => !document.querySelector('article.item') ||"
                    " document.querySelector('article.item .meta code').textContent !== id",
                    arg=pair_id,
                )
        await page.locator("#empty").wait_for()
        assert await page.locator("#mine").inner_text() == "3"
        # The XSS payload was shown as text and never ran.
        assert await page.evaluate("window.__xss === undefined")
        assert dialogs == []
        labels = await read_labels(settings, 3)
    assert len(labels) == 3
    by_pair = {r.pair_id: r for r in requests}
    for label in labels:
        assert label.reviewer == "ana"
        assert label.from_audit is False
        # Mapped back from the position shown to the candidate's identity.
        assert by_pair[label.pair_id].pair.candidate(label.winner).output == chosen[label.pair_id]
    assert XSS in displayed  # shown as text, character for character


async def test_security_answers_401_403_409_429_and_csrf(
    kafka_bootstrap: str, tmp_path: Path, browser: Browser
) -> None:
    prefix = f"sec-{uuid.uuid4().hex[:8]}"
    settings = review_settings(kafka_bootstrap, prefix, tmp_path, claim_ttl_s=2.0, login_max_failures=3)
    await send_reviews(settings, [_request(0, prefix)])
    async with serving(settings) as server:
        await wait_stored(server, 1)
        async with httpx.AsyncClient(base_url=server.url) as anon:
            assert (await anon.get("/")).status_code == 401
            assert (await anon.get("/operators", headers={"accept": "application/json"})).status_code == 401
            assert (await anon.post("/login", data={"name": "bo", "password": PASSWORDS["bo"]})).status_code == 403

        context = await browser.new_context()
        page = await context.new_page()
        await _sign_in(page, server.url, "ana")
        await page.locator("article.item").wait_for()
        item_id = await page.locator("article.item").get_attribute("data-item-id")
        # A write without the CSRF token is refused, even with the session cookie.
        forged = await page.request.post(f"{server.url}/items/{item_id}/label", form={"choice": "left"})
        assert forged.status == 403
        # A reviewer cannot reach the operators' page.
        response = await page.goto(f"{server.url}/operators")
        assert response is not None
        assert response.status == 403
        # An expired claim returns to the queue: bo gets ana's item once her claim lapses.
        await asyncio.sleep(2.5)
        other = await (await browser.new_context()).new_page()
        await _sign_in(other, server.url, "bo")
        assert await other.locator("article.item").get_attribute("data-item-id") == item_id
        # ana's late submit is refused with 409, and nothing reaches the topic for her.
        await page.goto(server.url + "/login")
        late = await page.request.post(
            f"{server.url}/items/{item_id}/label",
            form={
                "choice": "left",
                "csrf_token": await page.locator('meta[name="csrf-token"]').get_attribute("content") or "",
            },
            headers={"accept": "application/json"},
        )
        assert late.status == 409
        async with httpx.AsyncClient(base_url=server.url) as anon:
            # Login attempts are limited (per name and per address).
            login = await anon.get("/login")
            token = login.text.split('name="csrf_token" value="')[1].split('"')[0]
            cookie = login.headers["set-cookie"]
            assert "httponly" in cookie.lower()
            assert "samesite=strict" in cookie.lower()
            assert "secure" in cookie.lower()
            # httpx (unlike a browser) keeps a Secure cookie off plain-HTTP loopback: send it by hand.
            session = {"cookie": cookie.split(";")[0]}
            statuses = [
                (
                    await anon.post(
                        "/login", data={"csrf_token": token, "name": "ana", "password": "wrong"}, headers=session
                    )
                ).status_code
                for _ in range(4)
            ]
            assert statuses == [401, 401, 401, 429]


async def test_an_operator_resumes_after_the_kappa_guard_and_is_recorded(
    kafka_bootstrap: str, tmp_path: Path, browser: Browser
) -> None:
    prefix = f"ops-{uuid.uuid4().hex[:8]}"
    settings = review_settings(kafka_bootstrap, prefix, tmp_path)
    from pairjudge.streams.control.live import publish_control

    async with serving(settings) as server:
        page = await browser.new_page()
        await _sign_in(page, server.url, "olga")
        await page.goto(f"{server.url}/operators")
        # Running: the page says so, and offers no resume button beside it.
        await page.locator("#automation .badge").wait_for()
        for _ in range(100):
            if "Running" in await page.locator("#automation").inner_text():
                break
            await asyncio.sleep(0.1)
            await page.goto(f"{server.url}/operators")
        assert await page.locator("#resume").count() == 0
        # The drift audit trips the guard: the page shows it paused, with the button to resume.
        await publish_control(settings, "kappa_guard_tripped", True, "drift audit")
        for _ in range(100):
            await page.goto(f"{server.url}/operators")
            if await page.locator("#resume").count():
                break
            await asyncio.sleep(0.1)
        assert "Paused" in await page.locator("#automation").inner_text()
        if UPDATE_SCREENSHOTS:
            await page.screenshot(path=str(ROOT / "docs" / "operators.png"), full_page=True)
        await page.click("#resume")
        await page.locator(".notice").wait_for()
        assert "Running" in await page.locator("#automation").inner_text()
        assert await page.locator("#resume").count() == 0
        await page.fill('form:has(input[value="audit_share"]) input[name="value"]', "0.1")
        await page.click('form:has(input[value="audit_share"]) button')
        await page.locator(".notice").wait_for()
        # The page shows the live value as every worker reads it, and who set it.
        live = await page.locator("#control-audit_share .live").inner_text()
        assert "0.1" in live
        assert "olga (review UI)" in live
        raw = await read_topic(settings, "control", 3)
    updates = [ControlUpdate.model_validate(json.loads(v)) for v in raw]
    assert (updates[0].key, updates[0].value) == ("kappa_guard_tripped", True)
    by_olga = [u for u in updates if u.updated_by.startswith("olga (review UI)")]
    assert {(u.key, u.value) for u in by_olga} == {("kappa_guard_tripped", False), ("audit_share", 0.1)}


def _score_snapshots(experiment: str) -> list[bytes]:
    """A judge biased towards the challenger, built step by step as the worker's timer would publish it
    (``tests.fixtures.scoreboard``): the judge basis promotes, the human basis continues."""
    from pairjudge.streams.kafka.codecs import encode
    from tests.fixtures.scoreboard import biased_judge_snapshots

    return [encode(snap) for snap in biased_judge_snapshots(experiment)]


def _old_score_snapshot(experiment: str) -> bytes:
    """The same experiment as a worker from before the human basis published it (no human fields)."""
    from pairjudge.streams.kafka.codecs import encode
    from tests.fixtures.scoreboard import biased_judge_snapshots, old_snapshot

    return encode(old_snapshot(biased_judge_snapshots(experiment, steps=4, challenger="<b>challenger-v2</b>")[-1]))


async def test_the_scoreboard_page_shows_the_human_basis_beside_the_judge_basis(
    kafka_bootstrap: str, tmp_path: Path, browser: Browser
) -> None:
    from pairjudge.streams.kafka.admin import create_topics
    from pairjudge.streams.kafka.topics import topic_specs
    from pairjudge_dev.workers import produce_raw

    prefix = f"board-{uuid.uuid4().hex[:8]}"
    settings = review_settings(kafka_bootstrap, prefix, tmp_path)
    await create_topics(kafka_bootstrap, topic_specs(settings))
    old_name = "old-<b>exp</b>"
    snaps = [*_score_snapshots("exp-ui"), _old_score_snapshot(old_name)]
    await produce_raw(kafka_bootstrap, settings.topics.name("scores"), snaps, keyed=False)
    async with serving(settings) as server:
        async with httpx.AsyncClient(base_url=server.url) as anon:
            assert (await anon.get("/scores")).status_code == 401
        page = await browser.new_page(viewport={"width": 1280, "height": 1100})
        dialogs: list[str] = []
        page.on("dialog", lambda d: dialogs.append(d.message))
        await _sign_in(page, server.url, "ana")
        board = page.locator('section.board[data-experiment="exp-ui"]')
        old = page.locator("section.board").filter(has_text="old-<b>exp</b>")
        for _ in range(100):
            await page.goto(f"{server.url}/scores")
            # Every snapshot read: the latest one has 16 steps of history (two series on the chart).
            if await old.count() and await board.locator("svg.chart polyline.human-rate").count():
                break
            await asyncio.sleep(0.2)
        await board.wait_for()
        human, judge = board.locator("#human-basis"), board.locator("#judge-basis")
        # The summary first: each basis's headline and gate are shown; the statistics are folded.
        assert await human.locator(".headline-rate").is_visible()
        assert await human.locator(".gate .decision").is_visible()
        assert not await human.locator("dl.figures").is_visible()
        assert not await board.locator("table.splits").first.is_visible()
        if UPDATE_SCREENSHOTS:
            box = await board.bounding_box()
            assert box is not None
            clip = {"x": 0.0, "y": 0.0, "width": 1280.0, "height": box["y"] + box["height"] + 12}
            await page.screenshot(path=str(ROOT / "docs" / "scoreboard.png"), full_page=True, clip=clip)  # type: ignore[arg-type]
        # Open them, as a reader would.
        for summary in await page.locator("details > summary").all():
            await summary.click()
        # Both bases are visible, side by side, the human basis first (left).
        assert await human.is_visible()
        assert await judge.is_visible()
        human_box, judge_box = await human.bounding_box(), await judge.bounding_box()
        assert human_box is not None
        assert judge_box is not None
        assert human_box["x"] + human_box["width"] <= judge_box["x"]
        assert abs(human_box["y"] - judge_box["y"]) < 2
        human_text = " ".join((await human.inner_text()).split())
        judge_text = " ".join((await judge.inner_text()).split())
        assert "Measured against people" in human_text
        assert "95% interval, right whenever it is read" in human_text
        assert "95% interval for a single look" in human_text
        assert "random checks waiting" in human_text
        assert "never labelled" in human_text
        assert "the judge on the same pairs" in human_text
        assert await human.locator(".gate .decision").inner_text() == "CONTINUE"
        assert "more labels expected to be needed" in await human.locator(".gate .reason").inner_text()
        assert "Measured against the judge" in judge_text
        assert await judge.locator(".gate .decision").inner_text() == "PROMOTE"
        rate = await human.locator(".headline-rate").inner_text()
        assert rate.endswith("%")
        assert float(rate[:-1]) < 60 < float((await judge.locator(".headline-rate").inner_text())[:-1])
        # The splits table: both bases per rubric and per traffic split.
        rows = await board.locator("table.splits").first.locator("tbody tr td:first-child").all_inner_texts()
        assert rows == ["all pairs", "rubric head_to_head", "rubric tone_style", "traffic live", "traffic shadow"]
        # The charts: both bases on the win-rate chart, with a legend; the judge gate's evidence; strengths.
        assert await board.locator("svg.chart").count() == 3
        assert await board.locator("svg.chart polyline.rate").count() == 1
        assert await board.locator("svg.chart polyline.human-rate").count() == 1
        legend = await board.locator("svg.chart text.legend").all_text_contents()
        assert legend == ["measured against the judge (95%)", "measured against people (95%)"]
        assert await board.locator("svg.chart line.boundary").count() == 1
        assert await board.locator("svg.chart circle.point").count() == 2
        # An old snapshot renders: the judge basis, and a word on the human basis it does not carry; its
        # name is text, not markup.
        await old.wait_for()
        assert "published before this measure existed" in await old.locator("#human-basis").inner_text()
        assert await old.locator("#judge-basis .gate .decision").inner_text() in ("PROMOTE", "CONTINUE")
        assert await old.locator("h2 code").inner_text() == old_name
        # A model name is text, not markup, in the chart too.
        texts = await old.locator("svg.chart text").all_text_contents()
        assert any("<b>challenger-v2</b>" in t for t in texts)
        html = await page.content()
        assert "&lt;b&gt;exp&lt;/b&gt;" in html
        assert "&lt;b&gt;challenger-v2&lt;/b&gt;" in html
        assert "<b>" not in html
        assert dialogs == []


async def test_an_operator_switches_a_tiebreak_back_on_and_is_recorded(
    kafka_bootstrap: str, tmp_path: Path, browser: Browser
) -> None:
    """The audit switched a series' tie-break off (its record on the thresholds topic): the operators' page says
    why and when, and its button writes the "on" record with the operator's name and reason."""
    from aiokafka import AIOKafkaProducer

    from pairjudge.agents.audit.stages import tiebreak_threshold_key
    from pairjudge.schemas.audit import ThresholdUpdate
    from pairjudge.streams.kafka.codecs import encode
    from pairjudge.streams.security.kafka_clients import client_config

    prefix = f"tbon-{uuid.uuid4().hex[:8]}"
    settings = review_settings(kafka_bootstrap, prefix, tmp_path)
    series = "openai-compatible:judge-1|7e0945bc9b57c410|tone_style|exp-tone"
    off = ThresholdUpdate(
        series=series, threshold=None, target=0.9, risk=0.1, labels=42, stage="tiebreak", switched_off=True
    )
    async with serving(settings) as server:
        page = await browser.new_page()
        await _sign_in(page, server.url, "olga")
        await page.goto(f"{server.url}/operators")
        assert await page.locator("#tiebreaks-none").count() == 1
        assert await page.locator("button.tiebreak-on").count() == 0
        producer = AIOKafkaProducer(**client_config(settings.kafka).kwargs(acks="all"))
        await producer.start()
        try:  # as the audit writes it
            key = tiebreak_threshold_key(series).encode()
            await producer.send_and_wait(settings.topics.name("thresholds"), value=encode(off), key=key)
        finally:
            await producer.stop()
        for _ in range(100):
            await page.goto(f"{server.url}/operators")
            if await page.locator("button.tiebreak-on").count():
                break
            await asyncio.sleep(0.1)
        text = await page.locator("#tiebreaks-off").inner_text()
        assert f"Switched off at {off.updated_at:%Y-%m-%d %H:%M:%S} UTC." in text
        assert "On 42 labels, its decisions were shown to agree with people less than 90% of the time" in text
        assert series not in text  # the key stays in its fold
        await page.fill("#why-1", "new tie-break prompt")
        await page.click("button.tiebreak-on")
        await page.locator(".notice").wait_for()
        assert "switched back on by olga" in await page.locator(".notice").inner_text()
        assert await page.locator("button.tiebreak-on").count() == 0
        assert "olga (review UI): new tie-break prompt" in await page.locator("#tiebreaks-on").inner_text()
        raw = await read_topic(settings, "thresholds", 2)
    on = ThresholdUpdate.model_validate_json(raw[-1])
    assert (on.series, on.stage, on.switched_off) == (series, "tiebreak", False)
    assert on.switched_on_by == "olga (review UI): new tie-break prompt"
    assert on.fresh_since is not None
