"""Style-guide rules the offline judge reads (heuristic-2): caps on emoji and exclamation marks,
negations placed after the thing negated, and a letter's frame kept out of voice measures."""

from __future__ import annotations

import pytest

from pairjudge.agents.offline import ToneGuide, features, reading, score_tone_dimensions, text
from pairjudge.schemas.rubric import ToneStyleRubric


@pytest.mark.parametrize(
    ("guide", "emoji_allowed", "max_emoji"),
    [
        ("At most one emoji per post.", True, 1),
        ("Emoji allowed sparingly: one per message at most.", True, 1),
        ("No more than 2 emoji.", True, 2),
        ("Emoji: at most one per post.", True, 1),
        ("Keep sentences to 20 words at most, emoji welcome.", True, None),
        ("Contractions are fine; slang and emoji are not.", False, None),
        ("Emoji are not a substitute for words.", True, None),
        ("Use emoji freely.", True, None),
        ("An emoji-free voice.", False, None),
    ],
)
def test_emoji_rules(guide: str, emoji_allowed: bool, max_emoji: int | None) -> None:
    rules = reading.style_rules(guide)
    assert rules.emoji_allowed is emoji_allowed
    assert rules.max_emoji == max_emoji


def test_exclamation_caps_and_postposed_negation() -> None:
    assert reading.style_rules("One exclamation mark at most per piece.").max_exclamations == 1
    assert reading.style_rules("You can use up to three exclamation marks.").max_exclamations == 3
    assert reading.style_rules("Exclamation marks are not allowed.").exclamations_allowed is False
    slang = reading.style_rules("Contractions are fine; slang and emoji are not.")
    assert slang.slang_allowed is False
    assert slang.contractions is True


def test_a_cap_costs_guideline_adherence_only_above_the_cap() -> None:
    guide = ToneGuide.from_rubric(
        ToneStyleRubric(style_guide="Bold and energetic. One exclamation mark at most.", audience="Hikers")
    )
    one = "Six hours up. Worth every step!"
    three = "Made it! What a climb! Worth every step!"
    score_one = score_tone_dimensions(one, features.profile(one), guide)["guideline_adherence"]
    score_three = score_tone_dimensions(three, features.profile(three), guide)["guideline_adherence"]
    assert score_one.score == 5
    assert score_three.score < 5
    assert "at most 1" in score_three.evidence


def test_letter_frame_is_not_part_of_the_voice() -> None:
    letter = (
        "Dear Ms Hartley,\n\nI confirm the transfer. The funds arrive today.\n\n"
        "Yours sincerely,\nEdward Lyle\nPrivate Banker"
    )
    assert features.letter_body(letter) == "I confirm the transfer. The funds arrive today."
    casual = "Hey Tom, ugh, sorry about the bag. Good news tho."
    assert features.letter_body(casual) == casual
    assert features.letter_body("Thank you for your patience.") == "Thank you for your patience."
    # The frame's short lines no longer read as uneven rhythm.
    assert features.profile(letter).sentence_length_cv < text.sentence_length_cv(letter)


def test_drift_counts_less_on_short_halves_and_ignores_fragments() -> None:
    formal = ["We are pleased to confirm receipt of your application.", "The committee will review it accordingly."]
    slang = ["Hey, that's awesome lol, truly!", "Gonna be super fun, yeah!"]
    short = " ".join(formal + slang)
    long = " ".join(formal * 3 + slang * 3)
    # The same switch of voice, measured on halves three times longer, is surer evidence.
    assert 0.5 < features.register_drift(short) < features.register_drift(long)
    # Fragments carry too few markers to place on the register scale: three full sentences are too few.
    assert features.register_drift(" ".join([*formal, "Okay, fair.", "Yeah!", slang[0]])) == 0.0
