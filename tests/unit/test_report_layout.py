"""The report reads well from the first window: time axes span exactly the windows there are, a plot with
nothing to draw says why in its place, and the demo-sized page stays small."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

from matplotlib.dates import num2date

from pairjudge.agents.audit import SeriesWindow, WindowStats
from pairjudge.schemas.audit import Alert, AuditObservation, AuditSnapshot, DecisionRecord, ThresholdSnapshot
from pairjudge.streams.audit.report import NO_ALERTS, NO_SCOREBOARD, parse_audit_events, render_report
from pairjudge.streams.audit.report_charts import (
    NO_LABELS,
    Empty,
    _time_figure,
    centre,
    compact_svg,
    kappa_chart,
    length_chart,
    rates_chart,
    rates_plot,
    threshold_chart,
    time_axis,
    window_label,
)
from tests.unit.test_report import HOSTILE, START, series, window

SVG = "{http://www.w3.org/2000/svg}"
#: The demo's page (five series of one window each, three with labels, one alert) was 906 KB before.
DEMO_PAGE_BOUND = 150_000


def _texts(svg: str) -> list[str]:
    """Every text an SVG shows (it must parse as XML: it is inlined in the page as it is)."""
    return [t.text or "" for t in ET.fromstring(svg).iter() if t.tag in (f"{SVG}text", "text")]


def _unlabelled(hour: int = 0, pairs: int = 6) -> AuditSnapshot:
    """A window of automatic verdicts that no person has labelled."""
    s = series("unlabelled")
    stats = WindowStats()
    for n in range(pairs):
        record = DecisionRecord(
            pair_id=f"u{n}",
            series=s,
            stage="primary",
            outcome="verdict",
            auto_decided=True,
            candidates=("a", "b"),
            judge_winner="a",
            confidence=0.8,
        )
        stats.add(AuditObservation(kind="decision", series=s, record=record))
    start = (START + timedelta(hours=hour)).timestamp()
    threshold = ThresholdSnapshot(source="configured", threshold=0.7, note="too few labels: 0 < 100")
    return SeriesWindow(s, start, 3600.0, 0, stats).snapshot(final=False, threshold=threshold)


def test_window_labels_read_as_times() -> None:
    day = datetime(2026, 12, 2, tzinfo=UTC)
    assert window_label(day + timedelta(hours=10), day + timedelta(hours=11)) == "2026-12-02 10:00–11:00"
    assert window_label(day, day + timedelta(days=1)) == "2026-12-02 00:00–24:00"
    assert window_label(day + timedelta(hours=22), day + timedelta(hours=26)) == "2026-12-02 22:00 – 12-03 02:00"
    assert window_label(day, day + timedelta(seconds=20)) == "2026-12-02 00:00:00–00:00:20"
    assert window_label(day, day + timedelta(hours=1), date=False) == "00:00–01:00"


def test_a_single_window_is_one_point_over_its_own_span_labelled_with_its_time() -> None:
    (only,) = [window(series("one"), 0, 45, 10)]
    axis = time_axis([only])
    assert (axis.low, axis.high) == (only.window_start, only.window_end)  # not a five-year axis
    assert axis.ticks == (centre(only),)
    assert axis.labels == ("2026-12-01 10:00–11:00",)
    figure, axes = _time_figure("drawn", [only])  # the limits the figure is drawn with
    assert tuple(num2date(x) for x in axes.get_xlim()) == (only.window_start, only.window_end)  # type: ignore[no-untyped-call]
    figure.clf()
    for plot in (kappa_chart, rates_chart, length_chart, threshold_chart):
        svg = plot([only])
        assert isinstance(svg, str), plot.__name__
        texts = _texts(svg)
        assert "2026-12-01 10:00–11:00" in texts, plot.__name__
        # No other time on the axis: no year or month tick such as "2025-01" … "2029-01".
        assert not [t for t in texts if re.fullmatch(r"\d{4}-\d{2}", t)], texts


def test_a_few_windows_get_an_axis_spanning_exactly_them_one_tick_each() -> None:
    windows = [window(series("few"), h, 30, 10) for h in range(3)]
    axis = time_axis(windows)
    assert (axis.low, axis.high) == (windows[0].window_start, windows[-1].window_end)
    assert axis.labels == ("10:00–11:00", "11:00–12:00", "12:00–13:00")
    assert axis.label == "window (UTC), 2026-12-01"
    svg = rates_chart(windows)
    assert isinstance(svg, str)
    texts = _texts(svg)
    assert {"10:00–11:00", "11:00–12:00", "12:00–13:00", "window (UTC), 2026-12-01"} <= set(texts)


def test_many_windows_get_date_ticks_chosen_from_the_span() -> None:
    windows = [window(series("many"), h, 45, 10) for h in range(12)]
    axis = time_axis(windows)
    assert (axis.low, axis.high) == (windows[0].window_start, windows[-1].window_end)
    assert axis.ticks == ()  # a date locator places them
    svg = kappa_chart(windows)
    assert isinstance(svg, str)
    ticks = [t for t in _texts(svg) if re.fullmatch(r"\d\d:\d\d", t)]
    assert len(ticks) >= 3
    assert all("10:00" <= t <= "22:00" for t in ticks), ticks  # within the twelve hours, nothing beyond
    days = [window(series("days"), d, 30, 10, hours=24) for d in range(30)]
    texts = _texts(str(rates_chart(days)))
    assert not [t for t in texts if t.startswith(("2025", "2027", "2029"))], texts


def test_empty_sections_say_why_they_are_empty() -> None:
    page = render_report(parse_audit_events([_unlabelled().model_dump_json()]))
    assert page.count(f"<p>{NO_LABELS}</p>") == 3  # kappa, calibration, longer output
    assert page.count("<figure class='empty'>") == 3
    assert page.count("<svg") == 2  # the tie-break rate and the threshold have something to draw
    assert NO_ALERTS in page
    assert NO_SCOREBOARD.replace("'", "&#x27;") in page
    assert "beside the no audit pair" not in page  # the sentence reads as one
    one_label = window(series("one label"), 0, 1, 0)  # agreement, but kappa is undefined on one label
    drawn = kappa_chart([one_label])
    assert isinstance(drawn, Empty)
    assert drawn.why == "not enough labels yet: 1 of the 50 needed in a window"
    drawn = kappa_chart([one_label], min_labels=1)
    assert isinstance(drawn, Empty)
    assert drawn.why.startswith("kappa cannot be measured yet: on its 1 labelled verdicts")


def test_event_text_in_a_plot_is_escaped_and_not_read_as_markup_or_maths() -> None:
    w = _unlabelled()
    assert w.threshold is not None
    hostile = w.model_copy(update={"threshold": w.threshold.model_copy(update={"note": f"{HOSTILE} $x^$"})})
    svg = threshold_chart([hostile])
    assert isinstance(svg, str)
    assert "<script" not in svg
    assert f"{HOSTILE} $x^$" in _texts(svg)


def test_the_demo_sized_report_is_small_and_its_text_is_text() -> None:
    snapshots = [window(series(f"demo-{n}"), 0, 4 - n, 1 if n == 0 else 0, final=False, hours=24) for n in range(3)]
    snapshots += [_unlabelled(pairs=1).model_copy(update={"series": f"unlabelled-{n}"}) for n in range(2)]
    alert = Alert(kind="tiebreak_rate_high", series=snapshots[0].series, message="tie-break", value=0.4, threshold=0.2)
    page = render_report(parse_audit_events([s.model_dump_json() for s in snapshots] + [alert.model_dump_json()]))
    assert page.count("<h2>") == 5
    assert len(page.encode()) < DEMO_PAGE_BOUND, len(page.encode())
    assert "DejaVuSans-" not in page  # no glyph drawn as a path
    for svg in re.findall(r"<svg.*?</svg>", page, flags=re.S):
        assert len(svg) < 12_000
        ET.fromstring(svg)


def test_compacting_keeps_every_id_something_refers_to() -> None:
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg"><g id="figure_1"><g>'
        '<defs><path id="m1" d="M 0 0.123456"/></defs><use href="#m1"/></g></g>'
        "<text>0.123456</text></svg>"
    )
    out = compact_svg(svg)
    assert 'id="m1"' in out
    assert 'id="figure_1"' not in out
    assert 'd="M 0 0.12"' in out
    assert "<text>0.123456</text>" in out  # text is left as written
    ET.fromstring(out)


def test_a_plot_with_nothing_to_draw_is_still_an_svg_for_the_docs_script() -> None:
    svg = rates_plot([_unlabelled(pairs=0)])
    assert _texts(svg) == ["Tie-break and flip rates per window", "no pairs judged in these windows"]


def test_a_scoreboard_of_one_point_shows_the_point_and_its_pair_count_once() -> None:
    from pairjudge.streams.scores.charts import evidence_chart, win_rate_chart
    from tests.fixtures.scoreboard import biased_judge_snapshots

    snap = biased_judge_snapshots("exp-one", steps=1)[0]
    assert len(snap.history) == 1
    chart = win_rate_chart(snap.history)
    assert chart.count('class="dot"') == 2  # its interval and its point: a one-vertex polyline shows nothing
    assert _texts(chart).count(str(snap.history[0].pairs)) == 1
    assert 'class="promote-dot"' in evidence_chart(snap.history, snap.gate.threshold)
    assert "no decisive pair counted yet" in evidence_chart([], snap.gate.threshold)
