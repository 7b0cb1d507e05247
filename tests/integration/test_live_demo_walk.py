"""The live demo's first minutes, read as a newcomer would, in Debian's Chromium: every page (the queue, the audit
view, the scoreboard, the glossary, the operators page) and the report, visited again and again while the demo's
traffic and labels come in, must never show

- an e-value, or a number in scientific notation (``5.52e+06``),
- an estimate or interval from fewer labels than the minimum the page states (``kappa 1.00 (1.00 to 1.00)`` from
  4 labels; a human-basis interval below the human gate's minimum),
- an internal series key (``offline:pairjudge-heuristic@heuristic-4|7e0945bc…|tone_style|…``) outside its
  ``<details>``, or a review reason as a snake_case code.

The schedule is compressed: the demo sends 9 pairs a second instead of 3 (``--rate``), so about 100 seconds of
it carry the traffic of its first five minutes at the default rate.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, BrowserContext, Page

from pairjudge.streams.cli.live_demo import credentials, parse_output
from tests.integration.test_live_demo_browser import Demo

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: Pairs a second: three times the default, so the walk covers the first five minutes' traffic in about 100 s.
RATE = 9.0
WALK_S = 100.0
#: "5.52e+06", "1.33E14": scientific notation (a hex hash like 7e0945bc is a word, not a number).
SCIENTIFIC = re.compile(r"(?<![\w.])\d+(?:\.\d+)?[eE][+-]?\d+(?![\w.])")
INTERVAL = re.compile(r"\d+(?:\.\d+)?%? to -?\d+(?:\.\d+)?%?")
#: What the reader sees: the page's text without the folded part of every <details> (its summary stays), with
#: the charts' SVG text (drawn for the reader) but no script, style or head.
VISIBLE_TEXT = """() => {
  const root = document.body.cloneNode(true);
  root.querySelectorAll('script, style').forEach(n => n.remove());
  root.querySelectorAll('details').forEach(d => {
    [...d.childNodes].forEach(n => { if (!(n.nodeType === 1 && n.tagName === 'SUMMARY')) n.remove(); });
  });
  return root.textContent.replace(/\\s+/g, ' ');
}"""


@pytest.fixture
def fast_demo(tmp_path: Path) -> Iterator[Demo]:
    running = Demo(tmp_path, "--rate", str(RATE))
    try:
        yield running
    finally:
        if running.proc.poll() is None:
            running.proc.send_signal(signal.SIGINT)
            try:
                running.proc.wait(60)
            except subprocess.TimeoutExpired:
                running.proc.kill()


async def _signed_in(browser: Browser, base: str, name: str, password: str) -> tuple[BrowserContext, Page]:
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    await page.goto(f"{base}/login")
    await page.fill('input[name="name"]', name)
    await page.fill('input[name="password"]', password)
    await page.click('button[type="submit"]')
    await page.locator("nav a[href='/audit']").wait_for()
    return context, page


class Walk:
    """What every visit found wrong, and the series keys seen (folded) so far."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.keys: set[str] = set()
        self.visits = 0

    def check_text(self, where: str, text: str) -> None:
        self.visits += 1
        for found in SCIENTIFIC.findall(text):
            self.problems.append(f"{where}: a number in scientific notation: {found}")
        for word in ("e-value", "log-odds", "seed 00", "log e"):
            if word in text.lower():
                self.problems.append(f"{where}: shows {word!r}")
        for key in self.keys:
            if key in text:
                self.problems.append(f"{where}: the series key {key} outside its details")

    async def page(self, where: str, page: Page) -> str:
        # A reader opens what is folded (the scoreboard's figures, its breakdowns): those are read too, all but
        # the folded series keys, which are allowed there.
        await page.evaluate("document.querySelectorAll('details:not(.series-key)').forEach(d => { d.open = true; })")
        text: str = await page.evaluate(VISIBLE_TEXT)
        self.check_text(where, text)
        return text


async def _check_audit(walk: Walk, page: Page, url: str) -> None:
    await page.goto(url)
    await page.locator("#audit-labels").wait_for()
    # A folded key has no rendered text (inner_text is empty): read its text content.
    folded = await page.locator("#audit-series details.series-key code").all_text_contents()
    walk.keys |= {k.strip() for k in folded if k.strip()}
    text = await walk.page("audit view", page)
    stated = re.search(r"Kappa is shown from (\d+) labels", text)
    assert stated, text[:400]
    needed = int(stated.group(1))
    for row in await page.locator("#audit-series tbody tr").all():
        labels = int(await row.locator("td.labels").inner_text())
        kappa = (await row.locator("td.kappa").inner_text()).strip()
        if labels < needed:
            if kappa != f"not enough labels yet: {labels} of the {needed} needed":
                walk.problems.append(f"audit view: kappa {kappa!r} from {labels} labels (minimum {needed})")
        elif f"from {labels:,} labels" not in kappa and not kappa.startswith("not measurable"):
            walk.problems.append(f"audit view: kappa {kappa!r} does not say the {labels} labels it rests on")
        # Agreement by deciding stage: each stage's interval says the labels it rests on, never fewer than the minimum.
        for line in (await row.locator("td.by-stage").inner_text()).splitlines():
            rests_on = re.search(r"from ([\d,]+) labels?", line)
            if INTERVAL.search(line) and (rests_on is None or int(rests_on.group(1).replace(",", "")) < needed):
                walk.problems.append(f"audit view: by-stage figure {line!r} (minimum {needed} labels)")


async def _check_scores(walk: Walk, page: Page, url: str) -> None:
    await page.goto(url)
    text = await walk.page("scoreboard", page)
    for board in await page.locator("section.board").all():
        human = board.locator(".basis-human")
        if not await human.locator(".gate-detail").count():
            continue
        detail = await human.locator(".gate-detail").inner_text()
        minimum = re.search(r"decides nothing below ([\d,]+) labels", detail)
        assert minimum, detail
        needed = int(minimum.group(1).replace(",", ""))
        figures = await human.locator("dl.figures").inner_text()
        rests = re.search(r"([\d,]+) labels? from people", figures)
        assert rests, figures
        labels = int(rests.group(1).replace(",", ""))
        shown = INTERVAL.findall(figures) + INTERVAL.findall(await human.locator(".headline").inner_text())
        if labels < needed and shown:
            walk.problems.append(f"scoreboard: an interval {shown} from {labels} labels (minimum {needed})")
        for row in await board.locator("table.splits tbody tr").all():
            cells = await row.locator("td.human").all_inner_texts()
            has_labels = len(cells) == 4 and cells[2].strip() not in ("–", "")
            if has_labels and INTERVAL.search(cells[1]) and int(cells[2].replace(",", "")) < needed:
                walk.problems.append(f"scoreboard: split interval {cells[1]!r} from {cells[2]} labels")
    assert "Measured against people" in text or "No experiment has a scoreboard yet" in text


async def _check_queue(walk: Walk, page: Page, url: str) -> None:
    await page.goto(url)
    await walk.page("queue", page)
    for reason in await page.locator("article.item .reason").all_inner_texts():
        if re.search(r"\b[a-z]+_[a-z_]+\b", reason):
            walk.problems.append(f"queue: the reason {reason!r} is a code, not a sentence")


async def test_the_first_minutes_of_the_live_demo_show_no_number_that_looks_broken(
    fast_demo: Demo, browser: Browser, tmp_path: Path
) -> None:
    fast_demo.wait_for_line("Ctrl-C stops everything.", timeout=120)
    fields = parse_output(fast_demo.lines)
    base = fields["review queue"].rstrip("/")
    reviewer, operator = credentials(fields, "reviewer"), credentials(fields, "operator")
    context, page = await _signed_in(browser, base, *reviewer)
    op_context, op_page = await _signed_in(browser, base, *operator)
    walk = Walk()
    started = time.monotonic()
    labelled = 0
    rounds = 0
    while True:
        rounds += 1
        await _check_audit(walk, page, fields["audit view"])
        # Label a few audit samples by keyboard each round, as a newcomer trying the demo would.
        await page.goto(fields["audit samples"])
        for key in ("1", "2"):
            article = page.locator("article.item")
            if not await article.count():
                break
            await _check_queue(walk, page, fields["audit samples"])
            pair_id = await page.locator("article.item .meta code").inner_text()
            await page.keyboard.press(key)
            await page.keyboard.press("Enter")
            await page.wait_for_function(
                "id => !document.querySelector('article.item') ||"
                " document.querySelector('article.item .meta code').textContent !== id",
                arg=pair_id,
            )
            labelled += 1
        await _check_queue(walk, page, fields["review queue"])
        await _check_scores(walk, page, fields["scoreboard"])
        await page.goto(f"{base}/glossary")
        await walk.page("glossary", page)
        await op_page.goto(fields["operators page"])
        await walk.page("operators page", op_page)
        if time.monotonic() - started > WALK_S:
            break
        await page.wait_for_timeout(10_000)

    # The report, as the demo says to write it, read in the browser too.
    pairjudge = shutil.which("pairjudge", path=str(Path(sys.executable).parent))
    assert pairjudge
    report = tmp_path / "report.html"
    written = await asyncio.to_thread(
        subprocess.run,
        [pairjudge, "report", "--bootstrap", fields["broker"], "--out", str(report)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert written.returncode == 0, written.stdout + written.stderr
    await page.goto(report.as_uri())
    text = await walk.page("report", page)
    for cell in re.findall(r"not enough labels yet: (\d+) of the (\d+) needed", text):
        assert int(cell[0]) < int(cell[1]), cell
    await context.close()
    await op_context.close()

    assert walk.keys, "no series key was seen folded on the audit view"
    assert rounds >= 4
    assert labelled >= 4
    assert walk.problems == [], "\n".join(walk.problems[:40])
    fast_demo.proc.send_signal(signal.SIGINT)
    assert fast_demo.proc.wait(60) == 0
