"""``pairjudge demo --serve`` as the README says to run it, driven by Debian's Chromium through Playwright:
sign in with the printed reviewer credentials, label three audit samples by keyboard, watch the audit
view's label count rise by three, open the scoreboard and the report, then Ctrl-C (SIGINT) and check that
nothing of the demo is left running or listening.

The report is written by ``pairjudge report --bootstrap <the demo's broker>`` (the command the demo
prints) while the demo runs, and opened as a file.

With ``PAIRJUDGE_UPDATE_SCREENSHOTS=1`` the test also writes the docs' screenshots of the queue, the audit view,
the scoreboard, the operators' page and the report (docs/live-*.png).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.async_api import Browser, Page

from pairjudge.streams.cli.live_demo import credentials, parse_output

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
UPDATE_SCREENSHOTS = os.environ.get("PAIRJUDGE_UPDATE_SCREENSHOTS") == "1"


class Demo:
    """The demo process and every line it printed (read on a thread, so the pipe never fills)."""

    def __init__(self, cwd: Path, *args: str) -> None:
        pairjudge = shutil.which("pairjudge", path=str(Path(sys.executable).parent))
        assert pairjudge, "the pairjudge console script is not installed"
        self.proc = subprocess.Popen(
            [pairjudge, "demo", "--serve", *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for_line(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._reader.join(2)
                pytest.fail(f"no {text!r} from the demo:\n" + "\n".join(self.lines[-60:]), pytrace=False)
            time.sleep(0.1)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, session id, start time) of a live process, from /proc; None if it is gone (or a zombie)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[1]), int(fields[3]), int(fields[19])


def _all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _descendants(root: int) -> dict[int, tuple[int, int, int]]:
    """Every live descendant of ``root``: pid -> (ppid, session, start time)."""
    stats = {pid: st for pid in _all_pids() if (st := _stat(pid)) is not None}
    found: dict[int, tuple[int, int, int]] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, st in stats.items():
            if st[0] == parent and pid not in found:
                found[pid] = st
                frontier.append(pid)
    return found


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    running = Demo(tmp_path)
    try:
        yield running
    finally:
        if running.proc.poll() is None:  # the test failed before its own SIGINT
            running.proc.send_signal(signal.SIGINT)
            try:
                running.proc.wait(60)
            except subprocess.TimeoutExpired:
                running.proc.kill()


async def _audit_labels(page: Page) -> int:
    return int(await page.locator("#audit-labels").inner_text())


async def _steady_label_count(page: Page, quiet_s: float = 5.0, timeout_s: float = 90.0) -> int:
    """The audit view's label count once the head start's imported labels are all in (unchanged for ``quiet_s``)."""
    deadline = time.monotonic() + timeout_s
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = await _audit_labels(page) if await page.locator("#audit-labels").count() else -1
        if now != last:
            last, since = now, time.monotonic()
        elif now > 0 and time.monotonic() - since >= quiet_s:
            return now
        await page.wait_for_timeout(500)
    pytest.fail(f"the audit view's label count never settled (last {last})", pytrace=False)


async def test_the_live_demo_from_the_readme_to_ctrl_c(demo: Demo, browser: Browser, tmp_path: Path) -> None:
    demo.wait_for_line("Ctrl-C stops everything.", timeout=120)
    fields = parse_output(demo.lines)
    assert "ready in" in demo.output
    queue, samples, audit = fields["review queue"], fields["audit samples"], fields["audit view"]
    scoreboard, operators, bootstrap = fields["scoreboard"], fields["operators page"], fields["broker"]
    name, password = credentials(fields, "reviewer")
    assert name == "demo-reviewer"
    assert len(password) >= 16
    base = queue.rstrip("/")
    review_port = urlsplit(queue).port
    broker_port = int(bootstrap.rsplit(":", 1)[1])
    assert review_port is not None
    for url in (queue, samples, audit, scoreboard, operators):
        assert url.startswith("http://127.0.0.1:"), url
    assert bootstrap.startswith("127.0.0.1:")
    children = _descendants(demo.proc.pid)
    own = _stat(os.getpid())
    assert own is not None
    # The demo's children lead their own sessions (process groups): what of them must be gone at the end.
    sessions = {st[1] for st in children.values()} - {own[1]}
    assert sessions
    assert len(children) >= 3, children  # the broker, the worker and the review service (at least)

    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    dialogs: list[str] = []
    context.on("page", lambda p: p.on("dialog", lambda d: dialogs.append(d.message)))
    page = await context.new_page()
    await page.goto(f"{base}/login")
    await page.fill('input[name="name"]', name)
    await page.fill('input[name="password"]', password)
    await page.click('button[type="submit"]')
    await page.locator("nav a[href='/audit']").wait_for()

    # The audit view, left open: it refreshes its own figures.
    audit_page = await context.new_page()
    await audit_page.goto(audit)
    before = await _steady_label_count(audit_page)
    assert await audit_page.locator("#audit-series tbody tr").count() >= 1
    # Some series has agreement from the head start's labels (which one sorts first depends on the template hashes).
    agreements = await audit_page.locator("#audit-series td.agreement").all_inner_texts()
    assert any("n/a" not in a for a in agreements), agreements

    # Three audit samples, labelled by keyboard.
    await page.goto(samples)
    for n, key in enumerate(("1", "2", "1")):
        article = page.locator("article.item")
        await article.wait_for(timeout=30_000)
        pair_id = await article.locator(".meta code").inner_text()
        assert pair_id.startswith("live-"), pair_id
        if n == 0 and UPDATE_SCREENSHOTS:
            await page.screenshot(path=str(ROOT / "docs" / "live-queue.png"))
        await page.keyboard.press(key)
        await page.keyboard.press("Enter")
        await page.wait_for_function(
            "id => !document.querySelector('article.item') ||"
            " document.querySelector('article.item .meta code').textContent !== id",
            arg=pair_id,
        )
    assert await page.locator("#mine").inner_text() == "3"

    # Within 30 s the audit view (not reloaded) counts the three labels.
    await audit_page.wait_for_function(
        "n => Number(document.querySelector('#audit-labels').textContent) >= n", arg=before + 3, timeout=30_000
    )
    await audit_page.wait_for_timeout(3000)
    assert await _audit_labels(audit_page) == before + 3
    if UPDATE_SCREENSHOTS:
        await audit_page.screenshot(path=str(ROOT / "docs" / "live-audit.png"), full_page=True)

    # The scoreboard: a board per experiment, with its gates.
    for _ in range(60):
        await page.goto(scoreboard)
        if await page.locator("section.board").count():
            break
        await page.wait_for_timeout(500)
    assert await page.locator("section.board .gate .decision").count() >= 2
    if UPDATE_SCREENSHOTS:
        await page.screenshot(path=str(ROOT / "docs" / "live-scoreboard.png"))
        # The operators' page, as the demo's operator (in a context of its own).
        operator = await browser.new_context(viewport={"width": 1280, "height": 900})
        ops = await operator.new_page()
        await ops.goto(f"{base}/login")
        op_name, op_password = credentials(fields, "operator")
        await ops.fill('input[name="name"]', op_name)
        await ops.fill('input[name="password"]', op_password)
        await ops.click('button[type="submit"]')
        await ops.locator("nav a[href='/operators']").wait_for()
        await ops.goto(operators)
        await ops.screenshot(path=str(ROOT / "docs" / "live-operators.png"), full_page=True)
        await operator.close()

    # The report, as the demo's output says to write it, opened in the browser.
    pairjudge = shutil.which("pairjudge", path=str(Path(sys.executable).parent))
    assert pairjudge
    report = tmp_path / "report.html"
    written = await asyncio.to_thread(
        subprocess.run,
        [pairjudge, "report", "--bootstrap", bootstrap, "--out", str(report)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert written.returncode == 0, written.stdout + written.stderr
    await page.goto(report.as_uri())
    if UPDATE_SCREENSHOTS:
        await page.screenshot(path=str(ROOT / "docs" / "live-report.png"))
    assert "snapshots" in written.stdout
    assert await page.locator("h1").count() >= 1
    assert await page.locator("svg").count() >= 1
    assert dialogs == []
    await context.close()

    # Ctrl-C: everything stops, nothing is left running or listening.
    demo.proc.send_signal(signal.SIGINT)
    assert demo.proc.wait(60) == 0, demo.output[-3000:]
    demo.wait_for_line("stopped:", timeout=5)
    left = {
        pid: st
        for pid, st in ((pid, _stat(pid)) for pid in _all_pids())
        if st is not None and ((pid in children and st[2] == children[pid][2]) or st[1] in sessions)
    }
    assert left == {}, f"demo processes still running: {left}"
    assert not _listening(review_port), "the review service's port is still open"
    assert not _listening(broker_port), "the broker's port is still open"
    work_dir = next(line.rsplit(" ", 1)[1] for line in demo.lines if line.startswith("stopped:"))
    assert not os.path.exists(work_dir)  # noqa: ASYNC240 - one stat, after the demo ended
