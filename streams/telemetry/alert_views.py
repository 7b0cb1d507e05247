"""What an alert says to the people who get it: its plain title, the series in words, the value against its
bound, a link to its page and to its runbook; and the Slack message (Block Kit) that shows them.

Pure formatting, no I/O (``alerts.AlertWebhook`` sends). Every text that reaches Slack's ``mrkdwn`` is escaped
(:func:`mrkdwn`): a series key, a judge's model name or a refusal's detail come from outside and must not turn
into a link or a mention.

Slack's limits, from its Block Kit reference: a header's text at most 150 characters, a section's text 3000,
a context element's 2000, a button's text 75 and its URL 3000, at most 50 blocks; the top-level ``text`` is the
notification's fallback. ``tests/fixtures/block_kit.schema.json`` holds the same shapes, and the tests check
every body against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from pairjudge.schemas.audit import ALERT_TITLES, Alert

#: Alerts that pause automation, or say the judge is not what was asked for: "critical"; others "warning".
CRITICAL_KINDS: Final = frozenset(
    {"kappa_below_threshold", "agreement_below_floor", "judge_model_mismatch", "judge_rejected", "canary_accuracy_low"}
)

#: Each alert kind's runbook: its entry on docs/operations/alerts.md (the anchors of the Prometheus alerts that
#: fire for it).
RUNBOOKS: Final[dict[str, str]] = {
    "kappa_below_threshold": "pairjudgekappaguardtripped",
    "agreement_below_floor": "pairjudgekappaguardtripped",
    "tiebreak_rate_high": "pairjudgeauditalert",
    "flip_rate_high": "pairjudgeauditalert",
    "invalid_reply_rate_high": "pairjudgeauditalert",
    "ece_high": "pairjudgeauditalert",
    "judge_model_mismatch": "pairjudgeauditalert",
    "canary_accuracy_low": "pairjudgeauditalert",
    "judge_unavailable": "pairjudgejudgecircuitopen",
    "judge_rejected": "pairjudgejudgeerrorratiohigh",
    "internal_error": "pairjudgeinternalerrors",
    "spend_cap": "pairjudgespendcapreached",
    "tiebreak_below_target": "pairjudgeauditalert",
}
assert set(RUNBOOKS) == set(ALERT_TITLES), "every alert kind needs a runbook"
#: The runbooks' page in the repository, named when no published docs site is configured.
RUNBOOK_PATH: Final = "docs/operations/alerts.md"

#: The review service's page that shows each kind's series (the spend table is on the scoreboard), and its name.
PAGES: Final[dict[str, tuple[str, str]]] = {kind: ("/audit", "Open the audit view") for kind in ALERT_TITLES} | {
    "spend_cap": ("/scores", "Open the scoreboard")
}

#: The bound is a floor (the value fell below it) for these; a ceiling for the rates and the calibration error.
_FLOORS: Final = frozenset({"kappa_below_threshold", "agreement_below_floor", "canary_accuracy_low"})
_RATES: Final = frozenset({"tiebreak_rate_high", "flip_rate_high", "invalid_reply_rate_high"})


@dataclass(frozen=True)
class AlertLinks:
    """Where an alert's links point: the review service and the docs site as people open them (None: no link)."""

    #: The review service's address, e.g. ``https://pairjudge.example.com``.
    review_url: str | None = None
    #: The runbooks' page on a published docs site, e.g. ``https://docs.example.com/operations/alerts/``.
    runbook_url: str | None = None

    def page(self, alert: Alert) -> str | None:
        return None if self.review_url is None else self.review_url.rstrip("/") + _page(alert)[0]

    def runbook(self, alert: Alert) -> str | None:
        return None if self.runbook_url is None else f"{self.runbook_url}#{RUNBOOKS.get(alert.kind, '')}"


def _page(alert: Alert) -> tuple[str, str]:
    return PAGES.get(alert.kind, ("/audit", "Open the audit view"))


def severity(alert: Alert) -> str:
    return "critical" if alert.kind in CRITICAL_KINDS else "warning"


def title(alert: Alert) -> str:
    """The kind in plain words (``schemas.audit.ALERT_TITLES``)."""
    return ALERT_TITLES.get(alert.kind, alert.kind.replace("_", " "))


def value_text(alert: Alert) -> str:
    """The value against its bound, in words: "0.52, below its floor of 0.70"."""
    value, bound = alert.value, alert.threshold
    if alert.kind in _FLOORS:
        return f"{value:.2f}, below its floor of {bound:.2f}"
    if alert.kind in _RATES:
        return f"{100 * value:.1f}%, above its limit of {100 * bound:.1f}%"
    if alert.kind == "ece_high":
        return f"{value:.2f}, above its limit of {bound:.2f}"
    # The counted kinds (a judge that failed or answered as another model, an error, a spending cap): any is one.
    return f"{value:g} counted, where any is too many" if bound == 0 else f"{value:g}, against a bound of {bound:g}"


def mrkdwn(text: str) -> str:
    """``text`` shown as written in Slack's mrkdwn: the three characters Slack asks to escape, escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def slack_body(alert: Alert, *, series: str, links: AlertLinks, held_back: int = 0) -> dict[str, Any]:
    """The incoming-webhook body for ``alert``: Block Kit blocks, and ``text`` for the notification.

    ``series`` is the series in words (experiment · rubric · judge); ``held_back`` how many alerts of this kind
    and series the rate limit kept back since the last one sent.
    """
    level = severity(alert)
    lines = [
        f"*Series:* {mrkdwn(series)}",
        f"*Value:* {mrkdwn(value_text(alert))}",
        f"*What was seen:* {mrkdwn(alert.message)}",
    ]
    if held_back:
        lines.append(f"_{held_back} more alert{'s' if held_back > 1 else ''} like this one were held back._")
    context = [f"{level} · `{mrkdwn(alert.kind)}` · series key `{mrkdwn(alert.series)}`"]
    if alert.window_start is not None:
        context.append(f"window from {alert.window_start:%d %b %H:%M} UTC")
    page, runbook = links.page(alert), links.runbook(alert)
    if runbook is None:
        context.append(f"runbook: {RUNBOOK_PATH}#{RUNBOOKS.get(alert.kind, '')}")
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _cut(f"pairjudge: {title(alert)}", 150)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _cut("\n".join(lines), 3000)}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": _cut(" · ".join(context), 2000)}]},
    ]
    buttons = [
        {"type": "button", "text": {"type": "plain_text", "text": text}, "url": url}
        for text, url in ((_page(alert)[1], page), ("Runbook", runbook))
        if url is not None
    ]
    if buttons:
        blocks.append({"type": "actions", "elements": buttons})
    # The fallback text is mrkdwn too (Slack renders it in notifications).
    return {"text": _cut(f"[pairjudge] {level}: {title(alert)} on {mrkdwn(series)}", 3000), "blocks": blocks}
