"""The pages' design system: one stylesheet for the review pages and the HTML report, the operators' controls in
plain words, sign-in's "please sign in" as information, and the accessibility engine's version in one place."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from pairjudge.schemas.kinds import CONTROLS
from pairjudge.streams.audit.report import AuditEvents, render_report
from pairjudge.streams.config.sections import PolicySettings
from pairjudge.streams.review import views
from pairjudge.streams.review.controls import allowed_range, control_rows
from tests.fixtures.browser import AXE_VERSION

ROOT = Path(__file__).resolve().parents[2]
STYLESHEET = (resources.files("pairjudge.streams.review") / "static" / "review.css").read_text(encoding="utf-8")


def test_the_report_embeds_the_pages_stylesheet_and_loads_nothing() -> None:
    page = render_report(AuditEvents(snapshots=[], alerts=[]))
    assert f"<style>{STYLESHEET}</style>" in page
    assert "<body class='report'>" in page
    assert not re.search(r"""(src|href)=["']""", page)


def test_the_font_stack_ends_in_colour_emoji_fonts_so_emoji_are_drawn() -> None:
    stacks = re.findall(r"--font-(?:sans|mono): ([^;]+);", STYLESHEET)
    assert len(stacks) == 2
    assert all("Noto Color Emoji" in " ".join(s.split()) for s in stacks)


def test_dark_mode_redefines_every_colour_variable() -> None:
    light, dark = STYLESHEET.split("@media (prefers-color-scheme: dark)")[:2]
    colours = {name for name in re.findall(r"(--[a-z0-9-]+): #", light)}
    assert colours
    assert colours <= set(re.findall(r"(--[a-z0-9-]+): #", dark))


def test_every_control_on_the_form_says_what_it_does_its_unit_and_its_range_in_plain_words() -> None:
    rows = control_rows(PolicySettings(), None, {})
    assert {r.key for r in rows} == {k for k, spec in CONTROLS.items() if spec.on_form}
    for row in rows:
        assert all((row.label, row.meaning, row.unit)), row.key
        assert "_" not in row.label + row.unit, row.key
        assert row.allowed
    assert allowed_range("audit_share") == "0 to 1"
    assert allowed_range("audit_floor") == "more than 0, up to 1"
    assert allowed_range("spend_hourly_cap_usd") == "0 or more"


def test_a_controls_source_is_the_default_the_configuration_or_a_live_change() -> None:
    from datetime import UTC, datetime

    from pairjudge.schemas import ControlUpdate

    update = ControlUpdate(
        key="audit_share", value=0.2, updated_by="olga (review UI)", updated_at=datetime(2026, 12, 6, tzinfo=UTC)
    )
    configured = PolicySettings(audit_uncertain_share=0.3)
    sources = {r.key: r.source for r in control_rows(configured, None, {"audit_share": update})}
    assert sources["audit_share"].startswith("set live by olga (review UI) at 2026-12-06 00:00:00 UTC")
    assert sources["audit_uncertain_share"].startswith(
        "from the configuration (PAIRJUDGE_POLICY__AUDIT_UNCERTAIN_SHARE"
    )
    assert sources["audit_floor"] == "the default"


def test_please_sign_in_is_information_and_a_wrong_password_an_error() -> None:
    template = views.templates().env.get_template("login.html")
    asked = template.render(csrf="t", user=None, error=None, notice="Sign in to continue.")
    assert '<p class="info" role="status">Sign in to continue.</p>' in asked
    assert 'class="error"' not in asked
    wrong = template.render(csrf="t", user=None, error="Wrong name or password.", notice=None)
    assert '<p class="error" role="alert">Wrong name or password.</p>' in wrong


def test_ci_installs_the_axe_core_version_the_browser_tests_look_for() -> None:
    assert f"AXE_VERSION={AXE_VERSION}\n" in (ROOT / ".ci" / "run").read_text()
