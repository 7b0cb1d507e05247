"""A tool pair on the review page (docs/guides/tool-calls.md), in a real browser: real Kafka, SQLite, uvicorn on
127.0.0.1 and Debian's Chromium driven by Playwright. The reviewer sees the tools offered, the conversation's
calls and results, and each output's calls, as text: a script in a call's arguments or in a tool's result is shown,
never run, and the item can be labelled."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from playwright.async_api import Browser

from pairjudge.schemas import ReviewRequest
from pairjudge_dev.tool_pairs import SECOND_ID, call, candidate, tool_pair, weak_arguments
from tests.fixtures.review import read_labels, review_settings, send_reviews, serving, wait_stored
from tests.integration.test_review_ui import XSS, _sign_in

pytestmark = [pytest.mark.kafka, pytest.mark.browser]


async def test_a_reviewer_sees_tool_calls_as_text_and_labels_the_pair(
    kafka_bootstrap: str, tmp_path: Path, browser: Browser
) -> None:
    prefix = f"uitools-{uuid.uuid4().hex[:8]}"
    settings = review_settings(kafka_bootstrap, prefix, tmp_path)
    hostile = candidate(SECOND_ID, "", (call("open_ticket", weak_arguments(XSS)),))
    pair = tool_pair(pair_id=f"{prefix}-tools", second=hostile, result=XSS)
    request = ReviewRequest(pair_id=pair.pair_id, reason="tiebreak_disagreement", stage="tiebreak", pair=pair)
    await send_reviews(settings, [request])
    async with serving(settings) as server:
        await wait_stored(server, 1)
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        dialogs: list[str] = []
        page.on("dialog", lambda d: dialogs.append(d.message))
        await _sign_in(page, server.url, "ana")
        await page.locator("article.item").wait_for()
        tools = await page.locator("#tools").inner_text()
        assert "lookup_order" in tools
        assert "open_ticket" in tools
        after = await page.locator("#after").inner_text()
        assert "call_lookup_1" in after
        assert XSS.replace('"', '\\"') in after  # the result, as its JSON shows it, as text
        calls = await page.locator("#calls-a").inner_text() + await page.locator("#calls-b").inner_text()
        assert '"name": "open_ticket"' in calls
        assert XSS.replace('"', '\\"') in calls  # the hostile argument, shown as its JSON string, as text
        assert await page.evaluate("window.__xss === undefined")
        assert dialogs == []
        await page.keyboard.press("1")
        await page.keyboard.press("Enter")
        await page.locator("#empty").wait_for()
    labels = await read_labels(settings, 1)
    assert [label.pair_id for label in labels] == [pair.pair_id]
