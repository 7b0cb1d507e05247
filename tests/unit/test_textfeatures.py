"""The offline judge's text features: each small function against hand-checked values."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pairjudge.agents.offline import features, markers, reading, text, words


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("cat", 1),
        ("the", 1),
        ("table", 2),
        ("simple", 2),
        ("people", 2),
        ("make", 1),
        ("makes", 1),
        ("whale", 1),
        ("jumped", 1),
        ("wanted", 2),
        ("boxes", 2),
        ("houses", 2),
        ("nation", 2),
        ("beautiful", 3),
        ("actual", 3),
        ("ratio", 3),
        ("university", 5),
        ("readability", 5),
        ("Readability!", 5),
        ("2024", 1),
        ("", 0),
        ("--", 0),
    ],
)
def test_count_syllables(word: str, expected: int) -> None:
    assert text.count_syllables(word) == expected


def test_words_keep_contractions_and_hyphens() -> None:
    assert text.words("We’re sign-in ready, aren't we? 30 min.") == [
        "We're",
        "sign-in",
        "ready",
        "aren't",
        "we",
        "30",
        "min",
    ]


def test_split_sentences_basic_and_abbreviations() -> None:
    assert text.split_sentences("Hello there. How are you? I'm fine!") == ["Hello there.", "How are you?", "I'm fine!"]
    assert text.split_sentences("See e.g. the docs. Then go.") == ["See e.g. the docs.", "Then go."]
    assert text.split_sentences("Dr. Smith arrived. He sat down.") == ["Dr. Smith arrived.", "He sat down."]
    assert text.split_sentences("Version 2. Next one.") == ["Version 2.", "Next one."]


def test_split_sentences_lines_and_noise() -> None:
    assert text.split_sentences("- first item\n- second item\n---\n") == ["- first item", "- second item"]
    assert text.split_sentences("") == []
    assert text.split_sentences("no final punctuation") == ["no final punctuation"]


def test_flesch_formulas_known_values() -> None:
    # 100 words, 5 sentences, 150 syllables.
    assert text.flesch_reading_ease(100, 5, 150) == pytest.approx(206.835 - 1.015 * 20 - 84.6 * 1.5)
    assert text.flesch_kincaid_grade(100, 5, 150) == pytest.approx(0.39 * 20 + 11.8 * 1.5 - 15.59)
    assert text.flesch_reading_ease(0, 1, 0) == 0.0
    assert text.flesch_kincaid_grade(0, 0, 0) == 0.0


def test_readability_orders_easy_and_hard_text() -> None:
    easy = text.readability("The cat sat on the mat. It was a good day. We had fun.")
    hard = text.readability(
        "Organisational interoperability necessitates comprehensive standardisation of heterogeneous "
        "infrastructural methodologies, notwithstanding considerable implementation complexity."
    )
    assert easy.flesch_reading_ease > 90 > 0 > hard.flesch_reading_ease
    assert easy.fk_grade < 3 < 18 < hard.fk_grade
    assert easy.sentences == 3
    assert hard.sentences == 1
    assert text.readability("").words == 0


def test_coefficient_of_variation_and_sentence_cv() -> None:
    assert text.coefficient_of_variation([]) == 0.0
    assert text.coefficient_of_variation([5.0]) == 0.0
    assert text.coefficient_of_variation([3.0, 3.0, 3.0]) == 0.0
    assert text.coefficient_of_variation([2.0, 4.0]) == pytest.approx(1 / 3)
    assert text.sentence_length_cv("One two three. Four five six. Seven eight nine.") == 0.0
    assert text.sentence_length_cv("Short. This one is a great deal longer than the first one was.") > 0.5


def test_marker_counts() -> None:
    assert markers.contraction_count("We're sure it's fine, don't worry. John's car isn't here.") == 4
    assert markers.contraction_count("The company's results") == 0  # a possessive, not a contraction
    assert markers.second_person_count("You and your team, do it yourself. The YouTube video.") == 3
    assert markers.exclamation_count("Wow! Great!!") == 3
    assert markers.question_count("Why? How?") == 2
    assert markers.emoji_count("Great news 🎉 see you :) soon") == 2
    assert markers.emoji_count("Call at 10:30 (today)") == 0
    assert markers.shouting_count("This is FREE and available NOW via the API") == 2
    assert markers.passive_count("The invoice was sent. Mistakes were made. We sent it. It is being reviewed.") == 3
    assert (
        markers.imperative_opener_count("Click Save. Please restart the app. The app restarts.\n- Open settings") == 3
    )
    assert markers.number_count("Walk 30 minutes, 2.5 km, at 10% incline on 3/4 days") == 5
    assert markers.proper_noun_count("We met Alice in Paris. Then we left.") == 2
    assert text.bullet_count("Intro\n- one\n* two\n1. three\n2) four\nNot a bullet") == 4
    assert text.numbered_count("1. a\n2. b\n- c") == 2


def test_jargon_count() -> None:
    jargon = "Invalidate the OAuth token cache and re-provision the API credentials via the endpoint; see config.yaml."
    assert markers.jargon_count(jargon) >= 7
    assert markers.jargon_count("Sign out, then sign back in. If it still fails, call us.") == 0


def test_phrases_and_terms_whole_words() -> None:
    assert markers.count_term("Awesome! That's awesome, not awesomeness.", "awesome") == 2
    assert markers.count_term("C++ and c++ and C", "C++") == 2
    assert markers.count_term("kick   off the\nmeeting", "kick off") == 1
    assert markers.count_phrases("I think it might work, kind of.", words.HEDGES) == 3
    assert markers.found_phrases("Yeah, gonna be cool lol", words.SLANG) == ["cool", "gonna", "lol", "yeah"]


def test_sentiment_counts_with_negation() -> None:
    assert markers.sentiment_counts("A great, reliable and easy product.") == (3, 0)
    assert markers.sentiment_counts("This is not good and the result was terrible.") == (0, 2)
    assert markers.sentiment_counts("It is not bad.") == (1, 0)


def test_register_axes() -> None:
    formal = features.register(
        "We are pleased to confirm that your request has been processed. Furthermore, the documentation "
        "will be provided accordingly."
    )
    casual = features.register("Hey! We're gonna sort it out, no worries lol 😄 It's all good!")
    assert formal.formality > 0.5 > -0.5 > casual.formality
    warm = features.register("Thank you so much for your patience. We understand, and we're happy to help you.")
    cold = features.register("The request failed. The error is unacceptable. The problem is your fault.")
    assert warm.warmth > 0.5 > 0 > cold.warmth
    energetic = features.register("Unleash your power! Get ready! Boost everything NOW!")
    calm = features.register("The service will continue to operate as usual during the planned maintenance window.")
    assert energetic.energy > 0.6 > 0.2 > calm.energy
    hedgy = features.register("Maybe it might work, perhaps, I think, possibly.")
    assert hedgy.authority < 0.2 < 0.9 < formal.authority


def test_register_drift_detects_a_switch_of_voice() -> None:
    switching = (
        "We are pleased to confirm receipt of your application. The committee will review it accordingly. "
        "Hey, that's awesome lol! Gonna be super fun, yeah!"
    )
    steady = (
        "We are pleased to confirm receipt of your application. The committee will review it accordingly. "
        "The decision will be communicated in writing. We appreciate your patience."
    )
    assert features.register_drift(switching) > 0.5
    assert features.register_drift(steady) < 0.3
    assert features.register_drift("One sentence only. Two.") == 0.0


def test_profile_collects_features() -> None:
    p = features.profile("Hey you! Click Save now. It's gonna work, I think. Call 555-0100.")
    assert p.word_count == 12  # "555-0100" is one token
    assert p.sentence_count == 4
    assert p.exclamations == 1
    assert p.second_person == 1
    assert p.contractions == 1
    assert p.slang == ("gonna", "hey")
    assert p.hedges == 1
    assert p.imperatives == 2
    assert p.numbers == 1
    assert p.per100(3) == 25.0


def test_extract_forbidden_terms() -> None:
    guide = (
        "Never say 'cheap'. Avoid: synergy, leverage. Do not use the word \"guys\". Avoid jargon and emoji.\n"
        "Don't call customers “users”. Banned phrases: circle back; touch base."
    )
    assert reading.extract_forbidden_terms(guide) == ("cheap", "synergy", "leverage", "guys", "users", "circle back")
    assert reading.extract_forbidden_terms("Avoid jargon, emoji and exclamation marks.") == ()
    assert reading.extract_forbidden_terms("Be warm and friendly.") == ()


def test_extract_required_terms_and_mixed_clauses() -> None:
    guide = "Always sign off with 'The Acme Team'. Always use 'customer', never 'user'."
    assert reading.extract_required_terms(guide) == ("The Acme Team", "customer")
    assert reading.extract_forbidden_terms(guide) == ("user",)
    assert reading.extract_required_terms("Include the word 'refund' in your answer.") == ("refund",)


@pytest.mark.parametrize(
    ("text", "minimum", "maximum"),
    [
        ("Answer in under 50 words.", None, 49),
        ("Use no more than 100 words.", None, 100),
        ("Keep it between 50 and 80 words.", 50, 80),
        ("Write 120-150 words.", 120, 150),
        ("Write at least 200 words.", 200, None),
        ("Write more than 10 words.", 11, None),
        ("Use no fewer than 20 words.", 20, None),
        ("A 50-word summary, please.", None, 55),
        ("Explain it in fifty words.", None, 55),
        ("Reply in twenty words or less.", None, 20),
    ],
)
def test_parse_word_limit(text: str, minimum: int | None, maximum: int | None) -> None:
    assert reading.parse_word_limit(text) == reading.Limit(minimum, maximum)


def test_parse_limits_absent_and_other_units() -> None:
    assert reading.parse_word_limit("Explain the benefits of exercise.") is None
    assert reading.parse_word_limit("Use a word like 'fast'.") is None
    assert reading.parse_sentence_limit("Answer in one sentence.") == reading.Limit(1, 1)
    assert reading.parse_sentence_limit("No more than 3 sentences.") == reading.Limit(None, 3)
    assert reading.parse_bullet_requirement("Give three bullet points on safety.") == reading.Limit(3, 3)
    assert reading.parse_bullet_requirement("List 5 steps.") == reading.Limit(5, 5)
    assert reading.parse_bullet_requirement("Answer as a bulleted list.") == reading.Limit(2, None)
    assert reading.parse_bullet_requirement("Explain briefly.") is None
    assert reading.asks_for_json("Return valid JSON with a name field.")
    assert not reading.asks_for_json("Explain what JSON is.")


def test_limit_allows_and_describes() -> None:
    assert reading.Limit(None, 10).allows(10)
    assert not reading.Limit(None, 10).allows(11)
    assert reading.Limit(3, 3).allows(3)
    assert not reading.Limit(3, 3).allows(2)
    assert reading.Limit(3, 3).describe("items") == "exactly 3 items"
    assert reading.Limit(None, 49).describe("words") == "at most 49 words"


def test_polarity_scopes() -> None:
    assert reading.polarity("Avoid jargon and be warm.", "jargon") == -1
    assert reading.polarity("Avoid jargon and be warm.", "warm") == 1
    assert reading.polarity("Avoid jargon, emoji and slang.", "slang") == -1
    assert reading.polarity("Keep it jargon-free.", "jargon") == -1
    assert reading.polarity("Friendly rather than formal.", "formal") == -1
    assert reading.polarity("Feel free to use contractions.", "contractions") == 1
    assert reading.polarity("Be concise.", "emoji") == 0


def test_style_rules() -> None:
    rules = reading.style_rules(
        "No emoji. Use contractions. Keep replies under 80 words and be concise. Write in active voice."
    )
    assert rules.emoji_allowed is False
    assert rules.contractions is True
    assert rules.word_limit == reading.Limit(None, 79)
    assert rules.concise is True
    assert rules.active_voice is True
    assert rules.exclamations_allowed is None
    plain = reading.style_rules(
        "Use plain language. Avoid contractions and exclamation marks. Address the reader directly."
    )
    assert plain.jargon_allowed is False
    assert plain.contractions is False
    assert plain.exclamations_allowed is False
    assert plain.second_person is True


def test_tone_targets() -> None:
    formal = reading.tone_targets("Use a formal, professional tone.", "Enterprise procurement managers")
    assert formal.formality is not None
    assert formal.formality > 0.5
    assert formal.warmth is None
    friendly = reading.tone_targets("Friendly and warm, never formal.", "")
    assert friendly.formality is not None
    assert friendly.formality < 0.2
    assert friendly.warmth is not None
    assert friendly.warmth > 0.5
    assert "not formal" in friendly.cues
    bold = reading.tone_targets("Bold and energetic, confident.", "")
    assert bold.energy == pytest.approx(0.7)
    assert bold.authority == pytest.approx(0.9)
    none = reading.tone_targets("Spell product names correctly.", "")
    assert (none.formality, none.warmth, none.energy, none.authority, none.cues) == (None, None, None, None, ())


@pytest.mark.parametrize(
    ("audience", "label", "max_grade"),
    [
        ("Non-technical customers of a bank", "non-technical", 8.0),
        ("beginners learning to cook", "non-technical", 8.0),
        ("children aged 8 to 10", "children", 5.0),
        ("C-suite executives", "executives", 12.0),
        ("senior backend developers", "expert", 16.0),
        ("", "general", 10.0),
    ],
)
def test_audience_profile(audience: str, label: str, max_grade: float) -> None:
    prof = reading.audience_profile(audience)
    assert (prof.label, prof.max_grade) == (label, max_grade)


def test_audience_profile_jargon_tolerance_ordering() -> None:
    assert reading.audience_profile("kids").jargon_tolerance < reading.audience_profile("developers").jargon_tolerance


def test_word_lists_are_package_data_read_once() -> None:
    folder = Path(words.__file__).parent / "words"
    files = sorted(folder.glob("*.txt"))
    package_data = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert package_data["package-data"]["pairjudge.agents.offline"] == ["words/*.txt"]
    assert "pairjudge.agents.offline" in package_data["packages"]
    lists = {name: value for name, value in vars(words).items() if isinstance(value, frozenset)}
    assert len(lists) == len(files)
    for name, terms in lists.items():
        assert terms, name
        # Terms are matched case-insensitively against lower-cased text; only acronyms keep their case.
        assert name == "ACRONYMS" or all(t == t.lower() for t in terms), name
        assert all(t == t.strip() and not t.startswith("#") for t in terms), name
    # The data files feed the features (SLANG here).
    assert features.profile("Hey, that's awesome lol").slang == ("awesome", "hey", "lol")
