"""Reading rubrics and prompts: tone cues, style rules, audience, limits and quoted terms."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pairjudge.agents.offline.text import normalize

# --- reading rubrics and prompts: cues, rules, limits -----------------------------------------

_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "a hundred": 100,
    "one hundred": 100, "two hundred": 200, "three hundred": 300, "a single": 1, "single": 1,
}  # fmt: skip
_NUM = r"(\d{1,5}|" + "|".join(sorted((re.escape(k) for k in _NUMBER_WORDS), key=len, reverse=True)) + r")"


def parse_number(token: str) -> int | None:
    token = token.strip().lower()
    if token.isdigit():
        return int(token)
    return _NUMBER_WORDS.get(token)


@dataclass(frozen=True, slots=True)
class Limit:
    """An inclusive range; either end may be open."""

    minimum: int | None = None
    maximum: int | None = None

    def allows(self, value: int) -> bool:
        return (self.minimum is None or value >= self.minimum) and (self.maximum is None or value <= self.maximum)

    def describe(self, unit: str) -> str:
        if self.minimum is not None and self.maximum is not None:
            if self.minimum == self.maximum:
                return f"exactly {self.minimum} {unit}"
            return f"{self.minimum}-{self.maximum} {unit}"
        if self.maximum is not None:
            return f"at most {self.maximum} {unit}"
        return f"at least {self.minimum} {unit}"


def _limit_from(text: str, unit: str, singular: str) -> Limit | None:
    low = normalize(text).lower()
    u = unit
    m = re.search(rf"\bbetween\s+{_NUM}\s+and\s+{_NUM}\s+{u}", low) or re.search(
        rf"(?<![\w-]){_NUM}\s*(?:-|–|to)\s*{_NUM}\s+{u}", low
    )
    if m:
        lo, hi = parse_number(m.group(1)), parse_number(m.group(2))
        if lo is not None and hi is not None:
            return Limit(min(lo, hi), max(lo, hi))
    m = re.search(rf"(?<!no )(?<!not )\b(under|fewer than|less than|below|shorter than)\s+{_NUM}\s+{u}", low)
    if m and (n := parse_number(m.group(2))) is not None:
        return Limit(None, max(1, n - 1))
    m = re.search(
        rf"\b(?:at most|no more than|not more than|maximum of|max(?:imum)?|up to|within|not exceeding|"
        rf"no longer than|limit(?:ed)? to|not exceed)\s+{_NUM}\s+{u}",
        low,
    )
    if m and (n := parse_number(m.group(1))) is not None:
        return Limit(None, n)
    m = re.search(rf"\b{_NUM}\s+{u}\s+or\s+(?:less|fewer)", low)
    if m and (n := parse_number(m.group(1))) is not None:
        return Limit(None, n)
    m = re.search(rf"\b(at least|minimum of|no fewer than|no less than|more than|over)\s+{_NUM}\s+{u}", low)
    if m and (n := parse_number(m.group(2))) is not None:
        return Limit(n + 1 if m.group(1) in ("more than", "over") else n, None)
    m = re.search(rf"\b(?:in|as|write)\s+(?:exactly\s+)?{_NUM}\s+{u}", low) or re.search(
        rf"\b(?:in|as)\s+(?:exactly\s+)?{_NUM}[- ]{singular}\b", low
    )
    if m and (n := parse_number(m.group(1))) is not None:
        if u.startswith("words"):
            # "in 50 words" is a target, not an exact count: allow 10% over.
            return Limit(None, (n * 11 + 9) // 10)
        return Limit(n, n)
    m = re.search(rf"(?<![\w-]){_NUM}-{singular}\b", low)
    if m and (n := parse_number(m.group(1))) is not None:
        return Limit(None, (n * 11 + 9) // 10) if u.startswith("words") else Limit(n, n)
    return None


def parse_word_limit(text: str) -> Limit | None:
    """A word-count limit stated in a prompt or guide: "under 50 words", "100-200 words", "a 50-word reply"."""
    return _limit_from(text, r"words?", "word")


def parse_sentence_limit(text: str) -> Limit | None:
    """A sentence-count limit: "in one sentence", "no more than 3 sentences"."""
    return _limit_from(text, r"sentences?", "sentence")


def parse_bullet_requirement(text: str) -> Limit | None:
    """How many bullets/list items a prompt asks for: "three bullet points", "5 steps", "a bulleted list"."""
    low = normalize(text).lower()
    m = re.search(
        rf"(?<![\w-]){_NUM}\s+(?:key\s+|short\s+|concise\s+|numbered\s+|main\s+)?"
        r"(?:bullet(?:\s+point)?s?|bullets|list items|steps|tips|points)\b",
        low,
    )
    if m and (n := parse_number(m.group(1))) is not None and n > 1:
        return Limit(n, n)
    if re.search(r"\b(?:bullet(?:ed)?\s+(?:list|points?)|as bullets|numbered list|in a list|step-by-step list)\b", low):
        return Limit(2, None)
    return None


def asks_for_json(text: str) -> bool:
    return (
        re.search(r"\b(?:in|as|valid|return|output|respond with|reply with)\s+(?:a\s+)?json\b", text.lower())
        is not None
    )


_QUOTED_RE = re.compile(r"\"([^\"\n]{1,60})\"|“([^”\n]{1,60})”|(?<!\w)'([^'\n]{1,60}?)'(?!\w)|‘([^’\n]{1,60})’")
_FORBID_TRIGGER_RE = re.compile(
    r"\b(?:never|don't|do not|dont|must not|should not|shouldn't)\s+(?:ever\s+)?"
    r"(?:say|use|write|mention|call|refer to)\b"
    r"|\bavoid(?:\s+(?:using|saying|writing|the\s+(?:words?|terms?|phrases?)|words?|terms?|phrases?))?\b"
    r"|\b(?:forbidden|banned|prohibited|disallowed|off-limits|blacklisted)(?:\s+(?:words?|terms?|phrases?))?\b"
    r"|\bnot\s+allowed\b"
    r"|\b(?:never|not)\b(?=\s*[\"'“‘])",  # "Use 'customer', never 'user'"
    re.IGNORECASE,
)
_REQUIRE_TRIGGER_RE = re.compile(
    r"\balways\s+(?:say|use|write|include|mention|refer to|call|end with|sign off with|close with)\b"
    r"|\b(?:sign|close)\s+off\s+with\b|\bend\s+(?:every|each|all|the)?\s*(?:message|email|reply|response|post)s?\s+with\b"
    r"|\bmust\s+(?:include|mention|use|contain)\b|\brequired\s+(?:words?|terms?|phrases?)\b"
    r"|\b(?:include|mention)\s+(?:the\s+)?(?:words?|terms?|phrases?)\b",
    re.IGNORECASE,
)
_ANY_TRIGGER_RE = re.compile(f"(?:{_FORBID_TRIGGER_RE.pattern})|(?:{_REQUIRE_TRIGGER_RE.pattern})", re.IGNORECASE)
#: Where a trigger's terms end: the next trigger, or a word that turns the sense around.
_SEGMENT_END_RE = re.compile(
    f"(?:{_ANY_TRIGGER_RE.pattern})|\\b(?:never|not|instead of|rather than|but|unless)\\b", re.IGNORECASE
)
#: Rule categories that follow "avoid"/"never use" but are not literal terms; handled by ``style_rules``.
_CATEGORY_WORDS = re.compile(
    r"\b(?:jargon|emoji|emojis|emoticons|exclamation|contractions?|slang|passive|caps|capitals|acronyms|"
    r"abbreviations|technical|language|tone|voice|sentences?|words|paragraphs|terms|phrases|clichés?|cliches?|"
    r"hype|superlatives|humou?r|sarcasm|overly|too)\b",
    re.IGNORECASE,
)


def _clauses(text: str) -> list[str]:
    return [c for c in re.split(r"[\n.;!?]+(?:\s|$)", normalize(text)) if c.strip()]


def _terms_after_triggers(text: str, trigger: re.Pattern[str]) -> list[str]:
    """Terms introduced by ``trigger``: quoted strings up to the next trigger of any kind, or an
    unquoted list after a colon or after "say"/"call"/"like"/"such as" (never a bare category)."""
    found: list[str] = []
    for clause in _clauses(text):
        for m in trigger.finditer(clause):
            stop = _SEGMENT_END_RE.search(clause, m.end())
            end = stop.start() if stop else len(clause)
            segment = clause[m.end() : end]
            quoted = [next(g for g in q.groups() if g) for q in _QUOTED_RE.finditer(segment)]
            if quoted:
                found.extend(q.strip() for q in quoted if q.strip())
                continue
            tail = segment.strip()
            intro = re.match(r"^(?::|-|–|\s*(?:words?|terms?|phrases?)?\s*(?:like|such as|:))\s*", tail, re.IGNORECASE)
            says = re.search(r"\b(?:say|call|write|refer to|with)$", m.group(), re.IGNORECASE)
            if not intro and not says:
                continue
            if intro:
                tail = tail[intro.end() :]
            for item in re.split(r",|/|\bor\b|\band\b|\bnor\b", tail):
                item = item.strip(" \t-–:()\"'“”‘’").strip()
                if item and len(item.split()) <= 3 and not _CATEGORY_WORDS.search(item):
                    found.append(item)
    # Keep first-seen order, drop case-insensitive duplicates.
    seen: set[str] = set()
    unique: list[str] = []
    for term in found:
        key = term.lower()
        if key not in seen:
            seen.add(key)
            unique.append(term)
    return unique


def extract_forbidden_terms(text: str) -> tuple[str, ...]:
    """Terms a style guide or prompt forbids: "Never say 'cheap'", "Avoid: synergy, leverage", ...

    Best effort: quoted terms after a forbidding phrase, or a list after a colon/"like"/"such as".
    Bare categories ("Avoid jargon") are rules, not terms, and are left to ``style_rules``.
    """
    return tuple(_terms_after_triggers(text, _FORBID_TRIGGER_RE))


def extract_required_terms(text: str) -> tuple[str, ...]:
    """Terms a guide or prompt requires: "Always sign off with 'The Acme Team'", "Include the word 'refund'"."""
    return tuple(_terms_after_triggers(text, _REQUIRE_TRIGGER_RE))


_NEGATORS = frozenset(
    {
        "no", "not", "never", "avoid", "avoiding", "without", "don't", "dont", "do", "minimize", "minimise",
        "limit", "skip", "ban", "banned", "forbidden", "less", "than", "instead", "nor", "neither", "isn't",
        "aren't", "zero", "stop", "eliminate", "rather",
    }
)  # fmt: skip
# "do" alone is not negation; it only counts together with a following "not" (handled below).
_NEGATORS_STRICT = _NEGATORS - {"do"}


#: Where a negation's scope ends: a contrast word, or a new instruction starting after a comma/"and".
_SCOPE_BREAK_RE = re.compile(
    r"\b(?:but|while|yet|although|though|whereas|however)\b"
    r"|(?:,|:|\band\b)\s*(?=(?:be|use|keep|write|sound|stay|make|include|always|prefer|feel|aim)\b)"
)


#: A negation after the keyword: "Contractions are fine; slang and emoji are not", "emoji are not allowed".
#: A bare "are not" counts only at the end of its clause, so "emoji are not a substitute for words" is left alone.
_POSTPOSED_NEGATION_RE = re.compile(
    r"^[\w\s,'-]{0,40}?\b(?:are|is)\s+(?:not|never)"
    r"(?:\s+(?:allowed|permitted|welcome|ok|okay|acceptable|appropriate|used|wanted))?\s*$"
    r"|^[\w\s,'-]{0,40}?\b(?:are|is)\s+(?:banned|forbidden|prohibited|off-limits|not\s+(?:allowed|permitted|welcome))\b"
)


def polarity(text: str, keyword: str) -> int:
    """How ``text`` treats ``keyword`` (a regex): -1 if any mention is negated ("avoid jargon",
    "no emoji", "rather than formal", "jargon-free"), +1 if mentioned only positively, 0 if absent.

    A negator scopes over the rest of its clause ("Avoid jargon, emoji and slang" negates all three)
    until a contrast word or a new instruction ("Avoid jargon and be warm" leaves "warm" positive).
    """
    low = normalize(text).lower()
    seen = False
    for clause in re.split(r"[\n.;!?]+", low):
        for segment in _SCOPE_BREAK_RE.split(clause):
            for m in re.finditer(rf"\b(?:{keyword})", segment):
                seen = True
                before = re.findall(r"[\w']+", segment[: m.start()])
                after = segment[m.end() : m.end() + 6]
                if any(w in _NEGATORS_STRICT for w in before) or re.match(r"[- ]free\b", after):
                    return -1
                if _POSTPOSED_NEGATION_RE.search(segment[m.end() :]):
                    return -1
    return 1 if seen else 0


@dataclass(frozen=True, slots=True)
class StyleRules:
    """Explicit mechanical rules found in a guide; ``None`` means the guide says nothing."""

    emoji_allowed: bool | None = None
    exclamations_allowed: bool | None = None
    contractions: bool | None = None  # True: use them; False: avoid them
    jargon_allowed: bool | None = None
    caps_allowed: bool | None = None
    slang_allowed: bool | None = None
    active_voice: bool | None = None
    second_person: bool | None = None
    word_limit: Limit | None = None
    concise: bool = False
    max_emoji: int | None = None  # "at most one emoji per post"
    max_exclamations: int | None = None  # "one exclamation mark at most"


def _allowed(text: str, keyword: str) -> bool | None:
    p = polarity(text, keyword)
    return None if p == 0 else p > 0


def count_quota(text: str, keyword: str) -> int | None:
    """A numeric cap a guide puts on something it otherwise allows: "At most one emoji per post",
    "one exclamation mark at most", "no more than 2 emoji", "Emoji allowed sparingly: one per message
    at most". ``keyword`` is a regex for the thing counted; ``None`` when no cap is stated."""
    cap = r"(?:at\s+most|no\s+more\s+than|max(?:imum)?(?:\s+of)?|up\s+to|not\s+more\s+than)"
    for clause in re.split(r"[\n.;!?]+", normalize(text).lower()):
        if not re.search(rf"\b(?:{keyword})", clause):
            continue
        # The number must be tied to the keyword, so "20 words at most, emoji welcome" sets no emoji cap.
        patterns = (
            rf"\b{cap}\s+{_NUM}\s+(?:[\w-]+\s+)?(?:{keyword})",  # "at most one emoji"
            rf"(?<![\w-]){_NUM}\s+(?:[\w-]+\s+)?(?:{keyword})[\w-]*(?:\s+[\w-]+){{0,2}}?\s+{cap}(?![\w-])",
            rf"\b(?:{keyword})[^,]*?(?:\b{cap}\s+{_NUM}\s+per\b|(?<![\w-]){_NUM}\s+per\s+[\w-]+\s+{cap}(?![\w-]))",
        )
        for pattern in patterns:
            m = re.search(pattern, clause)
            if m:
                n = parse_number(next(g for g in m.groups() if g is not None))
                if n is not None:
                    return n
    return None


def style_rules(text: str) -> StyleRules:
    """Read the mechanical rules out of a style guide (best effort, English)."""
    low = normalize(text).lower()
    contractions = polarity(low, r"contractions?")
    active = polarity(low, r"active voice")
    passive = polarity(low, r"passive voice|passive")
    second = polarity(low, r"second[- ]person|address (?:the )?(?:reader|readers|customers?|users?)(?: directly)?")
    plain = re.search(r"\bplain (?:language|english)\b|\bjargon-free\b", low) is not None
    jargon = _allowed(low, r"jargon|technical terms|acronyms")
    max_emoji = count_quota(low, r"emoji|emojis|emoticons")
    max_exclamations = count_quota(low, r"exclamation")
    return StyleRules(
        # A stated cap supersedes the yes/no reading ("no more than 2 emoji" allows two).
        emoji_allowed=max_emoji > 0 if max_emoji is not None else _allowed(low, r"emoji|emojis|emoticons"),
        exclamations_allowed=(max_exclamations > 0 if max_exclamations is not None else _allowed(low, r"exclamation")),
        contractions=None if contractions == 0 else contractions > 0,
        jargon_allowed=False if plain and jargon is None else jargon,
        caps_allowed=_allowed(low, r"all[- ]caps|all capitals|capital letters|shouting"),
        slang_allowed=_allowed(low, r"slang"),
        active_voice=True if active > 0 or passive < 0 else None,
        second_person=True if second > 0 else None,
        word_limit=parse_word_limit(low),
        max_emoji=max_emoji,
        max_exclamations=max_exclamations,
        concise=re.search(r"\b(?:concise|brief|succinct|short|to the point|crisp|tight|brevity)\b", low) is not None,
    )


@dataclass(frozen=True, slots=True)
class ToneTargets:
    """Target register read from a style guide and audience; ``None`` where nothing was said."""

    formality: float | None
    warmth: float | None
    energy: float | None
    authority: float | None
    cues: tuple[str, ...]
    politeness: float | None = None


#: cue word (regex) -> (axis, target value)
_TONE_CUES: tuple[tuple[str, str, float], ...] = (
    (r"formal", "formality", 0.8),
    (r"professional(?:ly|ism)?", "formality", 0.55),
    (r"authoritative", "formality", 0.5),
    (r"business-like|businesslike|corporate", "formality", 0.6),
    (r"polished", "formality", 0.45),
    (r"serious", "formality", 0.6),
    (r"respectful", "formality", 0.45),
    (r"polite(?:ness|ly)?|courteous|courtesy|respectful|tactful|considerate|diplomatic|gracious", "politeness", 0.8),
    (r"blunt|curt|brusque", "politeness", 0.0),
    (r"conversational", "formality", -0.25),
    (r"casual", "formality", -0.6),
    (r"informal", "formality", -0.6),
    (r"playful|fun|cheeky|witty|quirky", "formality", -0.55),
    (r"relaxed|laid-back|chatty", "formality", -0.45),
    (r"approachable|personable", "formality", 0.0),
    (r"warm(?:th)?|caring|compassionate", "warmth", 0.7),
    (r"friendly", "warmth", 0.6),
    (r"empath(?:y|etic)|supportive|reassuring|welcoming|encouraging|human", "warmth", 0.65),
    (r"neutral|objective|impersonal|matter-of-fact|detached|dry", "warmth", 0.0),
    (r"bold|energetic|exciting|enthusiastic|punchy|dynamic|upbeat|lively|vibrant|high-energy", "energy", 0.7),
    (r"calm|measured|understated|restrained|sober|serene|low-key", "energy", 0.1),
    (r"confident|assertive|decisive|direct|authoritative", "authority", 0.9),
)
_NEUTRAL = {"formality": 0.2, "warmth": 0.1, "energy": 0.3, "authority": 0.6, "politeness": 0.2}
#: Audience words imply a register too, at half the weight of the style guide's own words.
_AUDIENCE_CUES: tuple[tuple[str, str, float], ...] = (
    (r"executives?|leadership|board|c-suite|investors?|procurement|enterprise|legal|regulators?", "formality", 0.6),
    (r"children|kids|young readers|teens?|teenagers", "formality", -0.3),
    (r"children|kids|patients|customers|consumers|beginners?|newcomers", "warmth", 0.4),
)


def tone_targets(style_guide: str, audience: str = "") -> ToneTargets:
    """Target formality/warmth/energy/authority from cue words in the guide and audience.

    A negated cue ("not formal", "rather than corporate") pulls the target to the other side of the
    axis' neutral point at half strength. Each axis' target is the weighted mean of its cues.
    """
    sums: dict[str, float] = {}
    weights: dict[str, float] = {}
    cues: list[str] = []
    for source, table, weight in ((style_guide, _TONE_CUES, 1.0), (audience, _AUDIENCE_CUES, 0.5)):
        low = normalize(source).lower()
        for pattern, axis_name, value in table:
            keyword = rf"(?<![\w-])(?:{pattern})(?![\w-])"
            # "non-formal" is a negation written as one word; the keyword itself skips hyphenated forms.
            if re.search(rf"\bnon-(?:{pattern})\b", low):
                p = -1
            elif re.search(keyword, low):
                p = polarity(low, keyword)
            else:
                continue
            neutral = _NEUTRAL[axis_name]
            target = value if p > 0 else neutral - (value - neutral) * 0.5
            sums[axis_name] = sums.get(axis_name, 0.0) + target * weight
            weights[axis_name] = weights.get(axis_name, 0.0) + weight
            word = re.search(rf"(?<![\w])(?:non-)?(?:{pattern})(?![\w-])", low)
            cues.append(("not " if p < 0 else "") + (word.group() if word else pattern))

    def axis(name: str) -> float | None:
        return round(sums[name] / weights[name], 4) if name in weights else None

    return ToneTargets(
        axis("formality"),
        axis("warmth"),
        axis("energy"),
        axis("authority"),
        tuple(dict.fromkeys(cues)),
        politeness=axis("politeness"),
    )


@dataclass(frozen=True, slots=True)
class AudienceProfile:
    """What an audience description implies for readability."""

    label: str
    max_grade: float  # Flesch-Kincaid grade above which the text is too hard
    jargon_tolerance: float  # 0 = every jargon term costs; 1 = jargon is fine
    concise: bool


def audience_profile(audience: str) -> AudienceProfile:
    """Map audience cue words to a target reading grade and jargon tolerance (first match wins,
    most demanding first, so "non-technical developers' managers" reads as non-technical)."""
    low = normalize(audience).lower()
    if re.search(r"\b(?:children|kids|young readers|elementary|primary school|ages? \d)\b", low):
        return AudienceProfile("children", 5.0, 0.0, False)
    if re.search(
        r"\b(?:non-?technical|not technical|beginners?|novices?|newcomers?|laypeople|lay readers|general public|"
        r"first-time|seniors|elderly|plain language|everyday|consumers?|customers?|patients|shoppers)\b",
        low,
    ):
        return AudienceProfile("non-technical", 8.0, 0.1, False)
    if re.search(r"\b(?:executives?|leadership|c-suite|board|managers?|decision[- ]makers|investors?)\b", low):
        return AudienceProfile("executives", 12.0, 0.4, True)
    if re.search(r"\b(?:professionals?|business|colleagues|clients|officials|academics?|scholars?)\b", low):
        return AudienceProfile("professional", 16.0, 0.6, False)
    if re.search(
        r"\b(?:developers?|engineers?|technical|experts?|specialists?|researchers?|scientists?|clinicians|"
        r"practitioners|sysadmins?|devops|programmers?)\b",
        low,
    ):
        return AudienceProfile("expert", 16.0, 1.0, False)
    return AudienceProfile("general", 10.0, 0.4, False)
