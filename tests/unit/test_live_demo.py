"""The pure parts of ``pairjudge demo --serve``: the demo users, the trickle's fresh ids, the head start's
labels, the output a script reads back, and the audit view's figures."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

from pairjudge.schemas.audit import AuditSnapshot
from pairjudge.streams.cli.demo import sample_labels, sample_pairs
from pairjudge.streams.cli.live_demo import (
    DEMO_AUDIT_SHARE,
    credentials,
    demo_users,
    drawn_for_audit,
    head_start_labels,
    live_pair_id,
    original_pair_id,
    parse_output,
    rename,
    round_events,
    users_file_text,
)
from pairjudge.streams.config.oversight import ReviewSettings
from pairjudge.streams.review.auth import verify_password
from pairjudge.streams.security.files import write_private_text


def test_the_demo_users_are_a_reviewer_and_an_operator_with_fresh_passwords() -> None:
    first, second = demo_users(), demo_users()
    assert [(u.name, u.role) for u in first] == [("demo-reviewer", "reviewer"), ("demo-operator", "operator")]
    assert all(len(u.password) >= 16 for u in first)
    assert {u.password for u in first}.isdisjoint(u.password for u in second)
    assert first[0].password != first[1].password


def test_the_users_file_holds_hashes_that_verify_and_never_the_passwords(tmp_path: Path) -> None:
    users = demo_users()
    text = users_file_text(users)
    for user in users:
        assert user.password not in text
    path = write_private_text(tmp_path / "users.json", text)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    resolved = ReviewSettings(users_file=path).resolved_users()
    assert [(u.name, u.role) for u in resolved] == [(u.name, u.role) for u in users]
    for user, entry in zip(users, resolved, strict=True):
        assert verify_password(user.password, entry.password_hash.get_secret_value())
        assert not verify_password(user.password + "x", entry.password_hash.get_secret_value())


def test_each_round_renames_every_pair_and_keeps_the_rest_of_the_line() -> None:
    pairs = sample_pairs()
    ids = [json.loads(raw)["pair_id"] for raw in round_events(pairs, 7)]
    assert ids
    assert all(pid.startswith("live-0007-") for pid in ids)
    assert len(set(ids)) == len(ids)
    assert set(ids).isdisjoint(json.loads(raw)["pair_id"] for raw in round_events(pairs, 8))
    original = next(raw for raw in pairs if rename(raw, 0) is not None)
    renamed = json.loads(rename(original, 3) or b"")
    body = json.loads(original)
    assert renamed.pop("pair_id") == live_pair_id(body.pop("pair_id"), 3)
    assert renamed == body
    assert original_pair_id(live_pair_id("email-card-delay", 12)) == "email-card-delay"
    assert original_pair_id("other") == "other"


def test_a_line_without_a_readable_id_is_left_out_of_the_trickle() -> None:
    assert rename(b'{"pair_id": "x", "candidates": [', 0) is None
    assert rename(b"[1, 2]", 0) is None
    assert rename(b'{"pair_id": 5}', 0) is None
    unreadable = [raw for raw in sample_pairs() if rename(raw, 0) is None]
    assert len(round_events(sample_pairs(), 0)) == len(sample_pairs()) - len(unreadable)


def test_the_head_start_imports_labels_only_for_pairs_the_audit_leaves_out_of_the_queue() -> None:
    lines = [json.loads(line) for line in head_start_labels(sample_labels(), 3).splitlines()]
    assert lines, "the head start should give agreement and kappa some labels"
    assert all(not drawn_for_audit(label["pair_id"]) for label in lines)
    every = [json.loads(rename(raw, n) or b"")["pair_id"] for n in range(3) for raw in sample_labels()]
    drawn = [pid for pid in every if drawn_for_audit(pid)]
    assert drawn, "some labelled pairs should be left for the reviewer"
    assert len(lines) + len(drawn) == len(every)
    # Roughly the demo's share is drawn (the draw is a hash of the id).
    assert 0.2 < len(drawn) / len(every) < 0.8
    assert DEMO_AUDIT_SHARE == 0.5
    assert head_start_labels(sample_labels(), 3, share=1.0) == b""


def test_the_printed_urls_and_credentials_parse_back() -> None:
    output = """pairjudge live demo: ready in 7.4 s
  review queue:    http://127.0.0.1:57449/
  audit samples:   http://127.0.0.1:57449/?reason=audit_sample
  audit view:      http://127.0.0.1:57449/audit
  broker:          127.0.0.1:42921
  report:          pairjudge report --bootstrap 127.0.0.1:42921 --out out/live-report.html
sign in with (the passwords are shown only this once):
  reviewer:        demo-reviewer  wsoFIKJFEGujb7o_
  operator:        demo-operator  oghAnwRgRTLYRSx7
what to try first:
  1. Open the audit samples as the reviewer: press 1 (A), 2 (B) or 3 (tie), then Enter.
Ctrl-C stops everything."""
    fields = parse_output(output.splitlines())
    assert fields["review queue"] == "http://127.0.0.1:57449/"
    assert fields["audit samples"] == "http://127.0.0.1:57449/?reason=audit_sample"
    assert fields["audit view"] == "http://127.0.0.1:57449/audit"
    assert fields["broker"] == "127.0.0.1:42921"
    assert fields["report"].startswith("pairjudge report --bootstrap 127.0.0.1:42921")
    assert credentials(fields, "reviewer") == ("demo-reviewer", "wsoFIKJFEGujb7o_")
    assert credentials(fields, "operator") == ("demo-operator", "oghAnwRgRTLYRSx7")
    assert "1. Open the audit samples as the reviewer" not in fields


def _snapshot(series: str, labels: int, agreement: float | None, kappa: float | None) -> AuditSnapshot:
    start = datetime(2026, 12, 2, tzinfo=UTC)
    return AuditSnapshot(
        series=series,
        window_start=start,
        window_end=start.replace(day=3),
        pairs=10,
        verdicts=8,
        flips=0,
        tiebreaks=2,
        reviews=2,
        invalid_replies=0,
        position_a_wins=4,
        human_labels=labels,
        human_decided=1,
        agreement=agreement,
        cohen_kappa=kappa,
        kappa_low=None if kappa is None else kappa - 0.2,
        kappa_high=None if kappa is None else min(1.0, kappa + 0.2),
    )


def test_the_audit_view_shows_each_series_and_the_total_labels() -> None:
    from pairjudge.streams.review.auth import User
    from pairjudge.streams.review.views import audit_context, templates

    latest = {
        "a<b>": _snapshot("a<b>", 4, 0.75, 1.0),
        "b": _snapshot("b", 0, None, None),
        "c": _snapshot("c", 60, 0.75, 0.5),
    }
    feed = SimpleNamespace(latest=latest)
    settings = SimpleNamespace(min_labels=50, kappa_min=0.7)
    context = audit_context(feed, None, settings)  # type: ignore[arg-type]
    assert context["total_labels"] == 64
    assert context["total_decided"] == 3
    page = templates().env.get_template("audit.html").render(user=User("ana", "reviewer", "x"), csrf="t", **context)
    assert '<strong id="audit-labels">64</strong>' in page
    assert "3 of 4 labels (75%)" in page
    # From the kappa guard's minimum of labels, kappa with its interval and the labels it rests on ...
    assert "0.50 (0.30 to 0.70), from 60 labels" in page
    # ... and below it, no estimate (a kappa of 1.00 from 4 labels would only look exact).
    assert "not enough labels yet: 4 of the 50 needed" in page
    assert "1.00" not in page
    assert "a&lt;b&gt;" in page
    assert "<b>" not in page
    assert 'data-refresh="/audit/live"' in page
    assert 'href="/audit"' in page


def test_each_run_draws_the_sides_afresh_and_a_label_follows_its_output() -> None:
    """The live demo swaps the two outputs of about half the pairs of a round, so the same side does not win
    the same pairs round after round (evidence that grows without bound); a pair's label follows its output."""
    from pairjudge.streams.cli.live_demo import swapped

    pairs = {json.loads(raw)["pair_id"]: raw for raw in sample_pairs() if rename(raw, 0) is not None}
    labels = {json.loads(raw)["pair_id"]: raw for raw in sample_labels()}
    draw = "run-1"
    flips = 0
    for round_no in range(20):
        for pair_id, raw in pairs.items():
            live = json.loads(rename(raw, round_no, draw) or b"")
            original = json.loads(raw)
            changed = swapped(live["pair_id"], draw)
            flips += changed
            roles = [c["source"]["role"] for c in live["candidates"]]
            outputs = {c["candidate_id"]: c["output"] for c in live["candidates"]}
            before = {c["candidate_id"]: c["output"] for c in original["candidates"]}
            if changed:
                assert roles == ["challenger", "champion"]
                assert outputs == {"champion": before["challenger"], "challenger": before["champion"]}
            else:
                assert live["candidates"] == original["candidates"]
            if pair_id in labels:
                label = json.loads(rename(labels[pair_id], round_no, draw) or b"")
                won = json.loads(labels[pair_id])["winner"]
                if won in ("champion", "challenger"):
                    # The same text wins, under whichever id it now has.
                    assert outputs[label["winner"]] == before[won]
    total = 20 * len(pairs)
    assert 0.35 * total < flips < 0.65 * total
    # Without a draw nothing changes sides (the batch demo and older callers).
    assert all(
        json.loads(rename(raw, 0) or b"")["candidates"] == json.loads(raw)["candidates"] for raw in pairs.values()
    )
