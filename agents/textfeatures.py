"""Measurable text features for the offline judge: small pure functions, standard library only.

Every function here is deterministic and looks at one text at a time, so the offline judge's scores
for an output never depend on which position it was shown in. These are proxies (a syllable
heuristic, word lists, regular expressions), not understanding; the judge says so in every reply.
"""

from __future__ import annotations

import functools
import re
import statistics
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

# --- tokenising -------------------------------------------------------------------------------

#: A word: letters/digits, with inner apostrophes ("don't", "it’s") and hyphens ("sign-in") kept.
_WORD_RE = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*")
_APOSTROPHES = str.maketrans({"’": "'", "‘": "'"})

#: Abbreviations whose trailing period does not end a sentence.
_ABBREVIATIONS = frozenset(
    {
        "e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "no", "approx",
        "inc", "ltd", "co", "corp", "fig", "cf", "al", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
        "sep", "sept", "oct", "nov", "dec", "u.s", "u.k", "a.m", "p.m",
    }
)  # fmt: skip
_SENTENCE_END_RE = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s|$)")
_BULLET_RE = re.compile(r"^\s*(?:[-*•‣▪◦–]|\d{1,3}[.)]|[a-zA-Z][.)])\s+")
_NUMBERED_RE = re.compile(r"^\s*\d{1,3}[.)]\s+")


def normalize(text: str) -> str:
    """NFKC-normalise and straighten curly apostrophes, so word lists match either spelling."""
    return unicodedata.normalize("NFKC", text).translate(_APOSTROPHES)


def words(text: str) -> list[str]:
    """The words of ``text`` in order, original case kept."""
    return _WORD_RE.findall(normalize(text))


def split_sentences(text: str) -> list[str]:
    """Split into sentences. Each non-empty line is at least its own unit (bullets, headings).

    A period after a known abbreviation or a single initial does not end a sentence. Segments with
    no word characters (a stray "---") are dropped.
    """
    sentences: list[str] = []
    for line in normalize(text).splitlines():
        line = line.strip()
        if not line:
            continue
        start = 0
        for match in _SENTENCE_END_RE.finditer(line):
            candidate = line[start : match.end()]
            if match.group().startswith(".") and _ends_with_abbreviation(line[start : match.start()]):
                continue
            sentences.append(candidate.strip())
            start = match.end()
        if start < len(line):
            sentences.append(line[start:].strip())
    return [s for s in sentences if _WORD_RE.search(s)]


def _ends_with_abbreviation(segment: str) -> bool:
    tail = segment.rsplit(maxsplit=1)[-1].lower() if segment.strip() else ""
    tail = tail.lstrip("(\"'")
    return tail in _ABBREVIATIONS or (len(tail) == 1 and tail.isalpha())


def lines(text: str) -> list[str]:
    return [ln for ln in normalize(text).splitlines() if ln.strip()]


def bullet_count(text: str) -> int:
    """Lines that start with a bullet marker or a list number ("- ", "* ", "1. ", "a) ")."""
    return sum(1 for ln in lines(text) if _BULLET_RE.match(ln))


def numbered_count(text: str) -> int:
    return sum(1 for ln in lines(text) if _NUMBERED_RE.match(ln))


# --- syllables and readability ----------------------------------------------------------------

_VOWEL_GROUP_RE = re.compile(r"[aeiouy]+")
#: Vowel pairs that are usually two syllables ("ratio", "actual", "medium"), but not "-tion", "-cial".
_HIATUS_RE = re.compile(r"(?<![ct])ia|(?<![qg])ua|(?<![qg])uo|iu|io(?!n)")


def count_syllables(word: str) -> int:
    """Estimate the syllables of one English word (a heuristic: vowel groups, silent endings).

    Tokens without letters (numbers) count as one syllable; an empty token counts zero.
    """
    letters = "".join(ch for ch in normalize(word).lower() if "a" <= ch <= "z")
    if not letters:
        return 1 if any(ch.isdigit() for ch in word) else 0
    if len(letters) <= 3:
        return 1
    count = len(_VOWEL_GROUP_RE.findall(letters))
    count += len(_HIATUS_RE.findall(letters))
    if letters.endswith("e") and not letters.endswith(("ee", "ye")):
        # A final "e" is silent ("make") except in consonant + "le" ("table").
        if not (letters.endswith("le") and letters[-3] not in "aeiouy"):
            count -= 1
    elif letters.endswith("es") and not letters.endswith(("ses", "xes", "zes", "ches", "shes", "ces", "ges")):
        count -= 1  # "makes", "times"; but "boxes", "houses" keep the extra syllable
    elif letters.endswith("ed") and not letters.endswith(("ted", "ded")):
        count -= 1  # "jumped"; but "wanted", "added" keep it
    return max(1, count)


@dataclass(frozen=True, slots=True)
class Readability:
    words: int
    sentences: int
    syllables: int
    flesch_reading_ease: float
    fk_grade: float


def readability(text: str) -> Readability:
    """Flesch reading ease and Flesch-Kincaid grade. A text with no words scores 0 on both."""
    ws = words(text)
    n_sent = max(1, len(split_sentences(text)))
    if not ws:
        return Readability(0, 0, 0, 0.0, 0.0)
    syl = sum(count_syllables(w) for w in ws)
    return Readability(
        words=len(ws),
        sentences=n_sent,
        syllables=syl,
        flesch_reading_ease=flesch_reading_ease(len(ws), n_sent, syl),
        fk_grade=flesch_kincaid_grade(len(ws), n_sent, syl),
    )


def flesch_reading_ease(n_words: int, n_sentences: int, n_syllables: int) -> float:
    """206.835 - 1.015 (words/sentence) - 84.6 (syllables/word); higher is easier. 0 if no words."""
    if n_words <= 0 or n_sentences <= 0:
        return 0.0
    return 206.835 - 1.015 * (n_words / n_sentences) - 84.6 * (n_syllables / n_words)


def flesch_kincaid_grade(n_words: int, n_sentences: int, n_syllables: int) -> float:
    """0.39 (words/sentence) + 11.8 (syllables/word) - 15.59: a US school grade. 0 if no words."""
    if n_words <= 0 or n_sentences <= 0:
        return 0.0
    return 0.39 * (n_words / n_sentences) + 11.8 * (n_syllables / n_words) - 15.59


def coefficient_of_variation(values: Iterable[float]) -> float:
    """Population standard deviation over the mean; 0 for fewer than two values or a zero mean."""
    vals = list(values)
    if len(vals) < 2:
        return 0.0
    mean = statistics.fmean(vals)
    if mean == 0:
        return 0.0
    return statistics.pstdev(vals) / mean


def sentence_length_cv(text: str) -> float:
    """How much sentence lengths (in words) vary: a proxy for an even, consistent rhythm."""
    return coefficient_of_variation(len(words(s)) for s in split_sentences(text))


# --- word lists -------------------------------------------------------------------------------

SLANG = frozenset(
    {
        "gonna", "wanna", "gotta", "kinda", "sorta", "yeah", "yep", "yup", "nope", "nah", "hey", "dude",
        "bro", "lol", "omg", "btw", "tbh", "imo", "imho", "lmao", "ya", "y'all", "ain't", "cool", "awesome",
        "stuff", "totally", "super", "legit", "lit", "vibe", "vibes", "hype", "chill", "whoa", "woah", "yay",
        "wow", "ur", "pls", "plz", "thx", "cya", "gimme", "lemme", "dunno", "gotcha", "buddy", "crazy",
        "no worries", "no biggie", "my bad", "heads up", "hang tight",
    }
)  # fmt: skip
HEDGES = frozenset(
    {
        "maybe", "perhaps", "possibly", "probably", "might", "somewhat", "fairly", "arguably", "apparently",
        "presumably", "seems", "seem", "kind of", "sort of", "i think", "i believe", "i guess", "it seems",
        "in some cases", "tends to", "more or less", "not sure",
    }
)  # fmt: skip
FILLERS = frozenset(
    {
        "basically", "actually", "really", "very", "just", "literally", "in order to", "it is important to note that",
        "needless to say", "at the end of the day", "at this point in time", "due to the fact that",
        "for all intents and purposes", "in terms of", "kind of", "sort of",
    }
)  # fmt: skip
FORMAL_VOCABULARY = frozenset(
    {
        "pleased", "kindly", "regards", "sincerely", "accordingly", "therefore", "furthermore", "however",
        "moreover", "consequently", "hence", "thus", "regarding", "hereby", "pursuant", "respectively",
        "confirm", "ensure", "assist", "require", "request", "dear", "please", "we are pleased", "shall",
        "nevertheless", "additionally", "subsequently",
    }
)  # fmt: skip
POSITIVE = frozenset(
    {
        "good", "great", "excellent", "happy", "glad", "pleased", "love", "wonderful", "fantastic", "amazing",
        "awesome", "delighted", "thank", "thanks", "appreciate", "welcome", "helpful", "easy", "enjoy", "best",
        "better", "benefit", "benefits", "success", "successful", "perfect", "nice", "kind", "beautiful",
        "exciting", "excited", "improve", "improved", "improves", "support", "care", "confident", "bonus",
        "reward", "brilliant", "positive", "safe", "secure", "reliable", "smooth", "simple", "friendly",
        "warm", "proud", "hope", "congratulations", "congrats", "celebrate", "fun", "lovely", "gladly", "healthy",
        "stronger", "boost", "help", "helps",
    }
)  # fmt: skip
NEGATIVE = frozenset(
    {
        "bad", "poor", "terrible", "awful", "horrible", "hate", "angry", "annoying", "annoyed", "sad", "problem",
        "problems", "fail", "failed", "failure", "fails", "wrong", "broken", "difficult", "unfortunately",
        "frustrating", "frustrated", "worse", "worst", "refuse", "refused", "denied", "deny", "loss", "lose",
        "damage", "complaint", "disappointed", "disappointing", "useless", "stupid", "ugly", "painful", "hurt",
        "unacceptable", "regret", "mistake", "delay", "delayed", "impossible", "unable", "reject", "rejected",
        "penalty", "fault",
    }
)  # fmt: skip
EMPATHY = frozenset(
    {
        "sorry", "apologize", "apologise", "apologies", "understand", "appreciate", "thank you", "thanks",
        "patience", "sympathize", "sympathise", "rest assured", "here to help", "happy to help", "glad to help",
        "we're here", "i hear you", "no problem", "take care",
    }
)  # fmt: skip
RUDE = frozenset(
    {
        "stupid", "idiot", "dumb", "obviously", "whatever", "shut up", "ridiculous", "nonsense", "lazy",
        "your fault", "as i said", "calm down", "moron", "pathetic", "deal with it", "not my problem", "damn",
        "crap", "clearly you", "just read", "rtfm",
    }
)  # fmt: skip
ENERGY_WORDS = frozenset(
    {
        "amazing", "incredible", "unbelievable", "powerful", "bold", "unleash", "transform", "revolutionary",
        "game-changing", "boost", "supercharge", "ultimate", "epic", "massive", "huge", "blazing", "exciting",
        "thrilling", "dynamic", "get ready", "now", "instantly", "fearless", "electrifying", "explosive",
        "unstoppable", "next-level",
    }
)  # fmt: skip
IMPERATIVE_VERBS = frozenset(
    {
        "add", "ask", "avoid", "be", "book", "bring", "buy", "call", "check", "choose", "click", "close", "come",
        "compare", "configure", "confirm", "consider", "contact", "copy", "create", "delete", "discover", "do",
        "don't", "download", "drink", "eat", "email", "enable", "disable", "enter", "ensure", "explore", "find",
        "follow", "get", "give", "go", "grab", "install", "join", "keep", "learn", "let", "let's", "limit", "log",
        "look", "make", "note", "open", "order", "pick", "plan", "please", "press", "read", "remember", "remove",
        "replace", "reply", "reset", "restart", "review", "run", "save", "schedule", "see", "select", "send",
        "set", "share", "sign", "start", "stay", "stop", "submit", "switch", "take", "tap", "tell", "track",
        "try", "turn", "type", "update", "upgrade", "use", "visit", "wait", "walk", "write",
    }
)  # fmt: skip
ADVICE_PHRASES = frozenset({"you should", "you can", "try to", "make sure", "be sure to", "we recommend", "aim for"})
VAGUE = frozenset(
    {
        "thing", "things", "stuff", "something", "some", "various", "many", "lots", "a lot", "several",
        "great", "good", "nice", "really", "very", "somehow", "etc",
    }
)  # fmt: skip
#: Technical vocabulary a lay reader is unlikely to know, plus business jargon.
JARGON = frozenset(
    {
        "api", "apis", "endpoint", "endpoints", "latency", "throughput", "configuration", "config", "parameter",
        "parameters", "protocol", "algorithm", "authentication", "authorization", "oauth", "token", "tokens",
        "middleware", "backend", "frontend", "deployment", "kubernetes", "docker", "container", "containers",
        "microservice", "microservices", "database", "schema", "query", "cache", "caching", "server", "servers",
        "bandwidth", "encryption", "firmware", "kernel", "runtime", "compile", "compiler", "repository",
        "dependency", "dependencies", "instance", "cluster", "node", "nodes", "async", "asynchronous",
        "synchronous", "idempotent", "regex", "json", "yaml", "xml", "sdk", "cli", "http", "https", "tcp", "udp",
        "dns", "ssl", "tls", "cdn", "vpn", "url", "uri", "cpu", "gpu", "ssd", "firewall", "proxy", "payload",
        "serialization", "provisioning", "re-provision", "provision", "orchestration", "virtualization",
        "hypervisor", "granular", "leverage", "synergy", "paradigm", "stakeholder", "deliverable", "scalable",
        "scalability", "utilize", "ecosystem", "holistic", "remediate", "invalidate", "credentials", "console",
        "subnet", "daemon", "hash", "checksum", "refactor", "webhook", "namespace", "latencies", "heuristic",
        "interoperability", "telemetry", "instrumentation", "cron", "backoff", "sharding", "replication",
    }
)  # fmt: skip
#: All-caps words that are acronyms rather than shouting.
ACRONYMS = frozenset(
    {
        "API", "URL", "HTTP", "HTTPS", "SQL", "JSON", "CPU", "GPU", "RAM", "SSL", "TLS", "DNS", "USB", "PDF",
        "FAQ", "CEO", "CTO", "CFO", "COO", "USA", "EU", "UK", "ASAP", "FYI", "AI", "ML", "LLM", "SDK", "CLI", "UI",
        "UX", "HR", "IT", "PM", "AM", "ID", "OK", "VPN", "CDN", "TCP", "UDP", "XML", "YAML", "CSV", "HTML", "CSS",
        "AWS", "GCP", "SaaS", "B2B", "KPI", "ROI", "NASA", "FBI", "NHS", "GDPR", "HIPAA", "OAUTH", "SMS", "PIN",
    }
)  # fmt: skip
#: A small list of phrases that signal unsafe content; a marker count, not a safety classifier.
UNSAFE_MARKERS = frozenset(
    {
        "kill yourself", "kill himself", "kill herself", "hurt yourself", "self-harm", "suicide method",
        "make a bomb", "build a bomb", "pipe bomb", "explosive device", "make a weapon", "untraceable",
        "without getting caught", "hack into", "steal", "stealing", "shoplift", "launder", "overdose",
        "lethal dose", "poison", "credit card number", "social security number", "bypass security",
        "disable the alarm", "crack the password", "malware", "ransomware", "phishing", "meth", "hate them",
        "inferior race", "slur",
    }
)  # fmt: skip
_SECOND_PERSON = frozenset(
    {"you", "your", "yours", "yourself", "yourselves", "you're", "you'll", "you've", "you'd", "y'all", "ur"}
)
_FIRST_PERSON_SINGULAR = frozenset({"i", "me", "my", "mine", "myself", "i'm", "i've", "i'll", "i'd"})
_CONTRACTION_RE = re.compile(
    r"\b(?:[a-z]+n't|(?:i|you|we|they|he|she|it|that|there|here|what|who|where|how|let|everyone|"
    r"nobody|someone|this)'s|[a-z]+'(?:re|ve|ll|d)|i'm|y'all|ain't)\b"
)
_EMOJI_RE = re.compile(
    "[\U0001f300-\U0001faff\U00002600-\U000027bf\U0001f000-\U0001f2ff\U0001f600-\U0001f64f\u2b50\u2b55]"
    r"|(?<!\w)(?::-?\)|:-?D|;-?\)|:-?P|<3)(?!\w)"
)
_PASSIVE_RE = re.compile(
    r"\b(?:am|is|are|was|were|be|been|being|get|gets|got)\s+(?:\w+ly\s+)?"
    r"(?:\w+ed|known|shown|given|taken|made|done|seen|written|built|sent|held|kept|found|told|paid|sold|"
    r"brought|bought|thought|caught|left|lost|set|put|driven|chosen|broken|spoken|stolen|forgotten|hidden|"
    r"eaten|drawn|grown|thrown|worn|torn|begun|understood|met|led|fed|heard|won|cut|shut|spent|meant)\b"
)
_NUMBER_RE = re.compile(r"(?<![\w.])\d+(?:[.,:\-]\d+)*%?")
_CODEISH_RE = re.compile(
    r"^(?:[a-z]+[A-Z]\w*|\w+_\w+|v\d+(?:\.\d+)+|0x[0-9a-fA-F]+|"
    r"[\w-]+\.(?:py|js|ts|json|ya?ml|toml|cfg|ini|sh|exe|dll|conf|xml|html|md|log))$"
)


def _word_counts(low: str) -> Counter[str]:
    return Counter(_WORD_RE.findall(low))


def count_phrases(text: str, phrases: Iterable[str]) -> int:
    """Case-insensitive whole-word occurrences of each phrase, summed (a phrase may be several words).

    Single words are counted from one tokenisation; only multi-word phrases need a regex scan, which
    keeps long outputs cheap (the lexicons hold hundreds of entries).
    """
    low = normalize(text).lower()
    counts = _word_counts(low)
    total = 0
    for phrase in phrases:
        if _WORD_RE.fullmatch(phrase):
            total += counts[phrase]
        else:
            total += len(term_pattern(phrase).findall(low))
    return total


def found_phrases(text: str, phrases: Iterable[str]) -> list[str]:
    """The distinct phrases that occur in ``text``, sorted, for citing evidence."""
    low = normalize(text).lower()
    counts = _word_counts(low)
    return sorted(
        {p for p in phrases if (counts[p] if _WORD_RE.fullmatch(p) else term_pattern(p).search(low) is not None)}
    )


@functools.lru_cache(maxsize=4096)
def term_pattern(term: str) -> re.Pattern[str]:
    """A case-insensitive whole-word pattern for ``term``; inner whitespace matches any whitespace."""
    parts = [re.escape(p) for p in normalize(term).lower().split()]
    body = r"\s+".join(parts)
    # Word boundaries only where the term starts/ends with a word character ("C++" has none at the end).
    left = r"(?<!\w)" if parts and re.match(r"\w", parts[0][:1]) else ""
    right = r"(?!\w)" if parts and re.search(r"\w$", normalize(term)) else ""
    return re.compile(left + body + right, re.IGNORECASE)


def count_term(text: str, term: str) -> int:
    return len(term_pattern(term).findall(normalize(text)))


def contraction_count(text: str) -> int:
    return len(_CONTRACTION_RE.findall(normalize(text).lower()))


def second_person_count(text: str) -> int:
    return sum(1 for w in words(text) if w.lower() in _SECOND_PERSON)


def first_person_singular_count(text: str) -> int:
    return sum(1 for w in words(text) if w.lower() in _FIRST_PERSON_SINGULAR)


def exclamation_count(text: str) -> int:
    return text.count("!") + text.count("！")


def question_count(text: str) -> int:
    return text.count("?") + text.count("？")


def emoji_count(text: str) -> int:
    return len(_EMOJI_RE.findall(text))


def shouting_count(text: str) -> int:
    """All-caps words of three or more letters that are not known acronyms ("FREE", "NOW")."""
    return sum(1 for w in words(text) if len(w) >= 3 and w.isalpha() and w.isupper() and w not in ACRONYMS)


def acronym_count(text: str) -> int:
    """All-caps tokens of 2-6 letters (known acronyms or not): a jargon signal, not shouting."""
    return sum(1 for w in words(text) if 2 <= len(w) <= 6 and w.isupper() and w.isalpha() and w != "I")


def passive_count(text: str) -> int:
    """Passive-voice proxy: a form of "be"/"get" followed by a past participle."""
    return len(_PASSIVE_RE.findall(normalize(text).lower()))


def imperative_opener_count(text: str) -> int:
    """Sentences (or list items) that open with a base-form verb: "Click...", "Please send...", "Don't..."."""
    count = 0
    for sentence in split_sentences(text):
        ws = [w.lower() for w in words(_BULLET_RE.sub("", sentence))]
        if not ws:
            continue
        first = ws[1] if ws[0] == "please" and len(ws) > 1 else ws[0]
        if first in IMPERATIVE_VERBS:
            count += 1
    return count


def number_count(text: str) -> int:
    return len(_NUMBER_RE.findall(normalize(text)))


def proper_noun_count(text: str) -> int:
    """Capitalised words not at a sentence start (names, products, places): a concreteness proxy."""
    count = 0
    for sentence in split_sentences(text):
        ws = words(_BULLET_RE.sub("", sentence))
        for w in ws[1:]:
            if w[:1].isupper() and not w.isupper() and w != "I":
                count += 1
    return count


def jargon_count(text: str) -> int:
    """Technical or business jargon: listed terms, acronyms, and code-like tokens (camelCase, snake_case)."""
    ws = words(text)
    listed = sum(1 for w in ws if w.lower() in JARGON)
    acronyms = sum(1 for w in ws if 2 <= len(w) <= 6 and w.isupper() and w.isalpha() and w != "I")
    acronyms -= sum(1 for w in ws if w.lower() in JARGON and w.isupper())  # "API" counted once
    codeish = sum(1 for tok in normalize(text).split() if _CODEISH_RE.match(tok.strip(".,;:!?()\"'")))
    return listed + max(0, acronyms) + codeish


def long_word_fraction(text: str) -> float:
    """Share of words with three or more syllables (a formality and difficulty signal)."""
    ws = [w for w in words(text) if any(c.isalpha() for c in w)]
    if not ws:
        return 0.0
    return sum(1 for w in ws if count_syllables(w) >= 3) / len(ws)


def sentiment_counts(text: str) -> tuple[int, int]:
    """(positive, negative) word counts from the built-in lexicons. A negator just before flips a word."""
    ws = [w.lower() for w in words(text)]
    pos = neg = 0
    for i, w in enumerate(ws):
        negated = i > 0 and ws[i - 1] in {"not", "no", "never", "isn't", "wasn't", "don't", "doesn't", "hardly"}
        if w in POSITIVE:
            if negated:
                neg += 1
            else:
                pos += 1
        elif w in NEGATIVE:
            if negated:
                pos += 1
            else:
                neg += 1
    return pos, neg


# --- the per-text profile ---------------------------------------------------------------------


def _rate(count: float, total: float, per: float = 100.0) -> float:
    return 0.0 if total <= 0 else count * per / total


def _sat(value: float, full: float) -> float:
    """Saturating 0..1: ``value`` / ``full``, capped at 1."""
    return 0.0 if full <= 0 else max(0.0, min(1.0, value / full))


def clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))


@dataclass(frozen=True, slots=True)
class Register:
    """Where a text sits on the register axes the style guides talk about."""

    formality: float  # -1 casual .. +1 formal
    warmth: float  # -1 cold/hostile .. +1 warm
    energy: float  # 0 calm .. 1 high-energy
    authority: float  # 0 hedging .. 1 assertive


def register(text: str) -> Register:
    """Score formality, warmth, energy and authority from marker rates (per 100 words / per sentence).

    The weights are hand-set so that plain, marker-free prose sits slightly on the formal side (0.3),
    slang or emoji pull hard towards casual, and formal connectives and passives push towards formal.
    """
    ws = words(text)
    n = len(ws)
    n_sent = max(1, len(split_sentences(text)))
    if n == 0:
        return Register(0.0, 0.0, 0.0, 0.5)
    contractions = _sat(_rate(contraction_count(text), n), 5)
    slang = _sat(_rate(count_phrases(text, SLANG), n), 2)
    exclaim = _sat(exclamation_count(text) / n_sent, 0.5)
    emoji = _sat(_rate(emoji_count(text), n), 2)
    shouting = _sat(_rate(shouting_count(text), n), 2)
    you = _sat(_rate(second_person_count(text), n), 5)
    long_words = clamp((long_word_fraction(text) - 0.08) / 0.15, 0.0, 1.0)
    passive = _sat(passive_count(text) / n_sent, 0.3)
    formal_vocab = _sat(_rate(count_phrases(text, FORMAL_VOCABULARY), n), 2)
    formality = (
        0.3
        + 0.3 * long_words
        + 0.15 * passive
        + 0.25 * formal_vocab
        - 0.45 * contractions
        - 0.7 * slang
        - 0.35 * exclaim
        - 0.5 * emoji
        - 0.4 * shouting
        - 0.1 * you
    )
    pos, neg = sentiment_counts(text)
    empathy = _sat(_rate(count_phrases(text, EMPATHY), n), 2)
    rude = _sat(_rate(count_phrases(text, RUDE), n), 1)
    # Negative words weigh less than positive ones: support replies name "the problem" without being cold.
    warmth = (
        0.45 * _sat(_rate(pos, n), 4)
        + 0.4 * empathy
        + 0.25 * you
        + 0.1 * exclaim
        - 0.35 * _sat(_rate(neg, n), 6)
        - 0.8 * rude
    )
    mean_sentence = n / n_sent
    energy = (
        0.4 * exclaim
        + 0.3 * _sat(_rate(count_phrases(text, ENERGY_WORDS), n), 3)
        + 0.2 * _sat(imperative_opener_count(text) / n_sent, 0.5)
        + 0.1 * clamp((14 - mean_sentence) / 8, 0.0, 1.0)
        + 0.1 * shouting
    )
    authority = 1.0 - _sat(_rate(count_phrases(text, HEDGES), n), 3)
    return Register(
        formality=round(clamp(formality, -1.0, 1.0), 4),
        warmth=round(clamp(warmth, -1.0, 1.0), 4),
        energy=round(clamp(energy, 0.0, 1.0), 4),
        authority=round(clamp(authority, 0.0, 1.0), 4),
    )


#: Words per half at which a half's register counts half (shrinkage): rates per 100 words saturate on one
#: marker in a short half, so without it a lone sign-off emoji or contraction reads as a change of voice.
DRIFT_HALF_WORDS = 15
#: Sentences shorter than this carry too few markers to place on the register scale ("Okay, fair.").
DRIFT_MIN_SENTENCE_WORDS = 4


def register_drift(text: str) -> float:
    """How far the register moves between the first and second half of the sentences.

    The larger of the formality shift and half the warmth shift (a warm closing line in a formal letter
    is normal; a switch from formal to slang is not), scaled by how much text each half holds
    (``n / (n + DRIFT_HALF_WORDS)`` for the shorter half). Fragments are left out, and the result is 0
    for fewer than four sentences, where halves are single sentences and the difference would be noise.
    """
    sentences = [s for s in split_sentences(text) if len(words(s)) >= DRIFT_MIN_SENTENCE_WORDS]
    if len(sentences) < 4:
        return 0.0
    mid = len(sentences) // 2
    first_text, second_text = " ".join(sentences[:mid]), " ".join(sentences[mid:])
    first, second = register(first_text), register(second_text)
    shift = max(abs(first.formality - second.formality), 0.5 * abs(first.warmth - second.warmth))
    shorter = min(len(words(first_text)), len(words(second_text)))
    return round(shift * shorter / (shorter + DRIFT_HALF_WORDS), 4)


_SALUTATION_RE = re.compile(
    r"^(?:dear|hi|hello|hey|hiya|greetings|good\s+(?:morning|afternoon|evening))\b[^.!?]{0,60}[,:]?$", re.IGNORECASE
)
_SIGN_OFF_RE = re.compile(
    r"^(?:yours(?:\s+(?:sincerely|faithfully|truly))?|sincerely|(?:(?:kind|warm|warmest|best|with\s+(?:warm|kind|best))\s+)?"
    r"regards|best(?:\s+wishes)?|all\s+the\s+best|cheers|thanks|many\s+thanks|with\s+thanks|thank\s+you|take\s+care)"
    r"(?:,[^.!?]*)?$",
    re.IGNORECASE,
)


def letter_body(text: str) -> str:
    """``text`` without a letter's frame: a salutation line at the start ("Dear Ms Hartley,") and a
    sign-off line near the end with the signature after it ("Yours sincerely," / "Edward Lyle").

    The frame is a convention, not the writer's voice: a three-word "Yours sincerely," between body
    sentences would otherwise count as uneven rhythm. Only whole short lines are removed, so a reply
    that opens "Hey Tom, ugh, sorry about the bag..." keeps its opening.
    """
    ls = [ln.strip() for ln in lines(text)]
    start, end = 0, len(ls)
    if ls and len(words(ls[0])) <= 6 and _SALUTATION_RE.match(ls[0]):
        start = 1
    for i in range(len(ls) - 1, max(start, len(ls) - 5) - 1, -1):
        if len(words(ls[i])) <= 6 and _SIGN_OFF_RE.match(ls[i]) and all(len(words(x)) <= 6 for x in ls[i + 1 :]):
            end = i
            break
    body = ls[start:end]
    return "\n".join(body) if body else text


@dataclass(frozen=True, slots=True)
class Profile:
    """Every feature the offline judge uses for one text, measured once."""

    word_count: int
    sentence_count: int
    flesch_reading_ease: float
    fk_grade: float
    sentence_length_cv: float
    mean_sentence_words: float
    contractions: int
    second_person: int
    exclamations: int
    questions: int
    hedges: int
    slang: tuple[str, ...]
    emoji: int
    shouting: int
    imperatives: int
    passives: int
    jargon: int
    numbers: int
    proper_nouns: int
    vague: int
    fillers: int
    advice: int
    bullets: int
    numbered: int
    positive: int
    negative: int
    empathy: int
    rude: tuple[str, ...]
    unsafe: tuple[str, ...]
    register: Register
    drift: float

    def per100(self, count: float) -> float:
        return _rate(count, self.word_count)


def profile(text: str) -> Profile:
    rd = readability(text)
    body = letter_body(text)  # rhythm and drift are about the writer's voice, not a letter's frame
    sentences = split_sentences(text)
    pos, neg = sentiment_counts(text)
    return Profile(
        word_count=rd.words,
        sentence_count=len(sentences),
        flesch_reading_ease=round(rd.flesch_reading_ease, 2),
        fk_grade=round(rd.fk_grade, 2),
        sentence_length_cv=round(sentence_length_cv(body), 4),
        mean_sentence_words=round(rd.words / max(1, len(sentences)), 2),
        contractions=contraction_count(text),
        second_person=second_person_count(text),
        exclamations=exclamation_count(text),
        questions=question_count(text),
        hedges=count_phrases(text, HEDGES),
        slang=tuple(found_phrases(text, SLANG)),
        emoji=emoji_count(text),
        shouting=shouting_count(text),
        imperatives=imperative_opener_count(text),
        passives=passive_count(text),
        jargon=jargon_count(text),
        numbers=number_count(text),
        proper_nouns=proper_noun_count(text),
        vague=count_phrases(text, VAGUE),
        fillers=count_phrases(text, FILLERS),
        advice=count_phrases(text, ADVICE_PHRASES),
        bullets=bullet_count(text),
        numbered=numbered_count(text),
        positive=pos,
        negative=neg,
        empathy=count_phrases(text, EMPATHY),
        rude=tuple(found_phrases(text, RUDE)),
        unsafe=tuple(found_phrases(text, UNSAFE_MARKERS)),
        register=register(text),
        drift=register_drift(body),
    )


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


#: cue word (regex) -> (axis, target value)
_TONE_CUES: tuple[tuple[str, str, float], ...] = (
    (r"formal", "formality", 0.8),
    (r"professional(?:ly|ism)?", "formality", 0.55),
    (r"authoritative", "formality", 0.5),
    (r"business-like|businesslike|corporate", "formality", 0.6),
    (r"polished", "formality", 0.45),
    (r"serious", "formality", 0.6),
    (r"respectful", "formality", 0.45),
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
_NEUTRAL = {"formality": 0.2, "warmth": 0.1, "energy": 0.3, "authority": 0.6}
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

    return ToneTargets(axis("formality"), axis("warmth"), axis("energy"), axis("authority"), tuple(dict.fromkeys(cues)))


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
    if re.search(
        r"\b(?:developers?|engineers?|technical|experts?|specialists?|researchers?|scientists?|clinicians|"
        r"practitioners|sysadmins?|devops|programmers?)\b",
        low,
    ):
        return AudienceProfile("expert", 16.0, 1.0, False)
    return AudienceProfile("general", 10.0, 0.4, False)


def syllables_total(text: str) -> int:
    return sum(count_syllables(w) for w in words(text))
