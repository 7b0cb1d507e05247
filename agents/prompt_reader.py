"""Reading a rendered prompt back into the :class:`~agents.prompt_slots.PromptSlots` it shows.

A judge gets the pair only as rendered text (``JudgeRequest.messages``); the offline judge reads it
back out here, the way a model reads it. The reader inverts ``agents.prompts``:

* outputs are found by their delimiter tags, which no inserted text can contain (``neutralise``);
* the rest is split at the template's fixed text, and the escaping is undone (``restore``);
* the result is accepted only if rendering it gives back the very same messages.

A conversation's turns are read the same way: each is found by its delimiter tags
(``agents.prompt_blocks``); a transcript is read out of each output's slot, and its last reply is the
output (the offline judge compares the replies to the last user turn).

A datamarked prompt (its system message carries the datamarking note) has each delimited section
unmarked first (``agents.untrusted.unmark``, section by section, so a mark at a section's edge is never
taken for the template's own line break), so the slots read back hold the texts as written, never the
marked ones: the offline judge scores the same text with marking on or off.

It never guesses: a prompt it cannot read exactly raises :class:`PromptUnreadable`. Rubric texts are
operator configuration, not delimited, so one that repeats the template's own fixed text where the
reader splits (a heading such as ``## TARGET AUDIENCE``) is refused rather than read one way or
the other.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Final

from pydantic import TypeAdapter, ValidationError

from pairjudge.agents.judge import JudgeRequest, TemplateKind
from pairjudge.agents.prompt_blocks import (
    HISTORY_INTRO,
    QUESTION_INTRO,
    RISK_LEVELS,
    TRANSCRIPT_INTRO,
    TRANSCRIPT_NOTE,
    PromptForm,
    Turn,
    risk_line,
    turn_tag,
)
from pairjudge.agents.prompt_slots import PromptSlots
from pairjudge.agents.prompts import (
    DATA_NOTE,
    FORBIDDEN_TERMS,
    H2H_CRITERION_ROWS,
    HEAD_TO_HEAD_TEMPLATE,
    NONE_GIVEN,
    PAIRWISE_TEMPLATE,
    PW_COMPARISON_ITEM,
    PW_EACH_COMPARE,
    PW_EACH_LIST,
    PW_RESPONSE_A,
    PW_RESPONSE_B,
    PW_TASK,
    REQUIRED_TERMS,
    RUBRIC_INTRO,
    TASK_INTRO,
    TIEBREAK_TEMPLATE,
    TONE_STYLE_TEMPLATE,
    render,
    restore,
    system_prompt,
)
from pairjudge.agents.untrusted import unmark
from pairjudge.schemas.pair import ChatRole, RiskLevel
from pairjudge.schemas.rubric import (
    Criterion,
    HeadToHeadRubric,
    InlineRubric,
    PairwiseRubric,
    TieBreakWeights,
    ToneStyleRubric,
    WeightedCriterion,
)


class PromptUnreadable(ValueError):
    """The messages are not a prompt that ``agents.prompts`` rendered, or their parts cannot be told apart."""


def read_prompt(request: JudgeRequest) -> PromptSlots:
    """The slots ``request``'s first ask shows (re-asks only append messages after it)."""
    if len(request.messages) < 2 or request.messages[1].role != "user":
        raise PromptUnreadable("expected a system and a user message")
    marked = request.messages[0].content == system_prompt(datamark=True)
    content = request.messages[1].content
    try:
        slots = _READERS[request.template](_unmarked(content) if marked else content)
    except ValidationError as exc:
        raise PromptUnreadable(f"the prompt's rubric does not validate: {exc.error_count()} error(s)") from exc
    if marked:
        slots = dataclasses.replace(slots, datamark=True)
    if render(request.template, slots).messages != request.messages[:2]:
        raise PromptUnreadable("what was read does not render back to the same messages")
    return slots


_SECTION_TAGS: Final = r"(?:output_[ab]|response_[ab]|task|context|(?:user|assistant|system)_turn)"
# An innermost delimited section: its content opens no section of ours (it cannot: it was neutralised),
# so a transcript's output tags, which hold turn sections, are left to their turns.
_SECTION: Final = re.compile(
    rf'(<({_SECTION_TAGS}) id="([0-9a-f]{{16}})">\n)((?:(?!<{_SECTION_TAGS} id=")[\s\S])*?)(\n</\2 id="\3">)'
)


def _unmarked(text: str) -> str:
    """``text`` with the content of every delimited section unmarked, and nothing else touched."""
    return _SECTION.sub(lambda m: m.group(1) + unmark(m.group(4)) + m.group(5), text)


# --- splitting at the template's fixed text ---------------------------------------------------


def _fields(text: str, template: str, keys: Sequence[str]) -> dict[str, str]:
    """The values that replaced ``keys`` in ``template`` to give ``text``.

    Each fixed piece between two values must occur exactly once from where it is looked for, so a
    value that repeats it makes the prompt unreadable instead of being split in the wrong place.
    """
    pattern = re.compile("|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True)))
    pieces, names = pattern.split(template), pattern.findall(template)
    head, tail = pieces[0], pieces[-1]
    if len(text) < len(head) + len(tail) or not text.startswith(head) or not text.endswith(tail):
        raise PromptUnreadable("the template's fixed text is not where it belongs")
    if not names:
        if text != template:
            raise PromptUnreadable("the template's fixed text differs")
        return {}
    pos, end = len(head), len(text) - len(tail)
    values: dict[str, str] = {}
    for name, sep in zip(names[:-1], pieces[1:-1], strict=True):
        at = text.find(sep, pos, end)
        if at < 0:
            raise PromptUnreadable(f"missing template text {sep[:40]!r}")
        if text.find(sep, at + 1, end) >= 0:
            raise PromptUnreadable(f"template text {sep[:40]!r} occurs twice: ambiguous")
        values[name] = text[pos:at]
        pos = at + len(sep)
    values[names[-1]] = text[pos:end]
    return values


def _between(text: str, opening: str, closing: str, start: int = 0) -> tuple[int, int]:
    """The span of the content between the first ``opening`` from ``start`` and the ``closing`` after it."""
    first = text.find(opening, start)
    if first < 0:
        raise PromptUnreadable(f"no {opening.strip()!r}")
    begin = first + len(opening)
    last = text.find(closing, begin)
    if last < 0:
        raise PromptUnreadable(f"no {closing.strip()!r}")
    return begin, last


#: What an output slot shows: one output, or (a transcript comparison) a whole conversation's turns.
Shown = str | tuple[Turn, ...]


def _outputs(text: str, tag_a: str, tag_b: str) -> tuple[Shown, Shown, str, list[str]]:
    """Both outputs, the prompt's nonce, and the rest of ``text`` in three parts: before A, between A
    and B, after B.

    The first opening tag is the real one: every text inserted before it is escaped. Every delimiter
    of a prompt carries one nonce (``<output_a id="NONCE">``, seed 003's ``<response_a id="NONCE">``):
    the one read from A's opening tag must close A and open and close B. The note before each
    opening tag belongs to the output's slot, like the tags: the data note before an output, the
    transcript note before a whole conversation (whose turns are read out of the slot).
    """
    begin, _ = _between(text, f'<{tag_a} id="', '">\n')
    nonce = text[begin : begin + 16]
    open_a, close_a = f'<{tag_a} id="{nonce}">\n', f'\n</{tag_a} id="{nonce}">'
    open_b, close_b = f'<{tag_b} id="{nonce}">\n', f'\n</{tag_b} id="{nonce}">'
    a_begin, a_end = _between(text, open_a, close_a)
    b_begin, b_end = _between(text, open_b, close_b, a_end + len(close_a))
    shown: list[Shown] = []
    for begin, end, opening in ((a_begin, a_end, open_a), (b_begin, b_end, open_b)):
        if text.startswith(DATA_NOTE + "\n" + opening, begin - len(opening) - len(DATA_NOTE) - 1):
            shown.append(restore(text[begin:end]))
        elif text.startswith(TRANSCRIPT_NOTE + "\n" + opening, begin - len(opening) - len(TRANSCRIPT_NOTE) - 1):
            turns, rest = _turns(text[begin:end], nonce)
            if rest:
                raise PromptUnreadable("text in a transcript that is not a turn")
            shown.append(turns)
        else:
            raise PromptUnreadable("an output slot lacks its data note")
    a_begin -= len(open_a) + 1 + len(DATA_NOTE if isinstance(shown[0], str) else TRANSCRIPT_NOTE)
    b_begin -= len(open_b) + 1 + len(DATA_NOTE if isinstance(shown[1], str) else TRANSCRIPT_NOTE)
    a_end, b_end = a_end + len(close_a), b_end + len(close_b)
    return shown[0], shown[1], nonce, [text[:a_begin], text[a_end:b_begin], text[b_end:]]


_TURN_OPEN = re.compile(r"<(system|user|assistant)_turn id=\"([0-9a-f]{16})\">\n")
_ROLES: Final[Mapping[str, ChatRole]] = MappingProxyType({"system": "system", "user": "user", "assistant": "assistant"})


def _turns(block: str, nonce: str) -> tuple[tuple[Turn, ...], str]:
    """The delimited turns ``block`` starts with (one a line, see ``agents.prompt_blocks.turns_block``),
    and what follows them. Turn texts are neutralised, so every turn tag found is a real one."""
    turns: list[Turn] = []
    rest = block
    while True:
        match = _TURN_OPEN.match(rest)
        if match is None or match.group(2) != nonce:
            break
        role = _ROLES[match.group(1)]
        content, rest = _tagged(rest, turn_tag(role), nonce)
        turns.append((role, content))
        if not rest.startswith("\n<") or _TURN_OPEN.match(rest, 1) is None:
            break
        rest = rest[1:]
    if not turns:
        raise PromptUnreadable("no turn where the conversation belongs")
    return tuple(turns), rest


def _lead(block: str, nonce: str) -> tuple[PromptForm, tuple[Turn, ...], str]:
    """The conversation's lead before the task block (``agents.prompt_blocks.conversation_lead``): its form,
    the conversation so far (a reply comparison), and the rest, which starts at the ``<task>``."""
    if block.startswith(TRANSCRIPT_INTRO):
        return "transcript", (), block[len(TRANSCRIPT_INTRO) :]
    if block.startswith(HISTORY_INTRO):
        history, rest = _turns(block[len(HISTORY_INTRO) :], nonce)
        if not rest.startswith("\n\n" + QUESTION_INTRO):
            raise PromptUnreadable("no last user turn after the conversation")
        return "reply", history, rest[2 + len(QUESTION_INTRO) :]
    return "prompt", (), block


def _section(block: str, nonce: str) -> tuple[PromptForm, tuple[Turn, ...], str]:
    """:func:`_lead` of a task section that follows other text (``agents.prompts.task_section``)."""
    if block.startswith(TASK_INTRO):
        return "prompt", (), block[len(TASK_INTRO) :]
    if not block.startswith("\n\n"):
        raise PromptUnreadable("no task section where it belongs")
    form, history, rest = _lead(block[2:], nonce)
    if form == "prompt":
        raise PromptUnreadable("no task section where it belongs")
    return form, history, rest


def _section_start(block: str, nonce: str) -> int:
    """Where the task section starts in ``block`` (criteria or an audience, which are escaped, so the
    first delimiter with the nonce is the section's), or -1."""
    tags = [block.find(f'<{tag} id="{nonce}">\n') for tag in ("task", "system_turn", "user_turn", "assistant_turn")]
    found = [at for at in tags if at >= 0]
    if not found:
        return -1
    first = min(found)
    for intro in (TASK_INTRO, "\n\n" + HISTORY_INTRO, "\n\n" + TRANSCRIPT_INTRO):
        if block.endswith(intro, 0, first):
            return first - len(intro)
    return -1


def _risk(block: str, *, suffix: str = "") -> tuple[str, RiskLevel | None]:
    """``block`` without a trailing risk line (``"\\n\\n" + line + suffix``), and the level it states."""
    for level in RISK_LEVELS:
        line = "\n\n" + risk_line(level) + suffix
        if block.endswith(line):
            return block[: -len(line)], level
    return block, None


def _slots(
    a: Shown,
    b: Shown,
    form: PromptForm,
    history: tuple[Turn, ...],
    prompt: str,
    context: str | None,
    rubric: ToneStyleRubric | HeadToHeadRubric | PairwiseRubric | None,
    *,
    tiebreak: TieBreakWeights | None = None,
    risk_level: RiskLevel | None = None,
) -> PromptSlots:
    """The slots of what was read. The rendering check afterwards (``read_prompt``) makes sure every piece
    agrees, e.g. that both transcripts hold the same user turns and end with the task's."""
    if form != "transcript":
        if not (isinstance(a, str) and isinstance(b, str)):
            raise PromptUnreadable("a transcript in a prompt that compares replies")
        return PromptSlots(
            output_a=a,
            output_b=b,
            task_prompt=prompt,
            task_context=context,
            rubric=rubric,
            tiebreak=tiebreak,
            history=history,
            risk_level=risk_level,
        )
    if isinstance(a, str) or isinstance(b, str):
        raise PromptUnreadable("a single output in a transcript comparison")
    if len(a) < 2 or a[-1][0] != "assistant" or a[-2][0] != "user":
        raise PromptUnreadable("a transcript that does not end with a user turn and its reply")
    earlier = a[:-2]
    return PromptSlots(
        output_a=a[-1][1],
        output_b=b[-1][1],
        task_prompt=prompt,
        task_context=context,
        history=tuple(t for t in earlier if t[0] != "assistant"),
        transcript=True,
        replies_a=tuple(text for role, text in earlier if role == "assistant"),
        replies_b=tuple(text for role, text in b[:-2] if role == "assistant"),
        rubric=rubric,
        tiebreak=tiebreak,
        risk_level=risk_level,
    )


def _tagged(block: str, tag: str, nonce: str) -> tuple[str, str]:
    """The text of ``block``'s leading ``<tag id="NONCE">`` element (escaping undone), and what follows it."""
    opening, closing = f'<{tag} id="{nonce}">\n', f'\n</{tag} id="{nonce}">'
    if not block.startswith(opening):
        raise PromptUnreadable(f"no <{tag}> where it belongs")
    begin, end = _between(block, opening, closing)
    return restore(block[begin:end]), block[end + len(closing) :]


def _task(block: str, nonce: str) -> tuple[str, str | None, str]:
    """``<task>`` and an optional ``<context>`` (see ``agents.prompts.task_block``), and what follows."""
    prompt, rest = _tagged(block, "task", nonce)
    if not rest.startswith("\n<context "):
        return prompt, None, rest
    context, rest = _tagged(rest[1:], "context", nonce)
    return prompt, context, rest


def _none_given(value: str) -> str:
    return "" if value == NONE_GIVEN else restore(value)


# --- one reader per seed ----------------------------------------------------------------------


def _terms(line: str, label: str) -> tuple[str, ...] | None:
    """A ``Forbidden terms: "a", "b"`` line's terms, or None if the line is not one."""
    if not line.startswith(label):
        return None
    try:
        terms = json.loads(f"[{line[len(label) :]}]")
    except ValueError:
        return None
    return tuple(terms) if terms and all(isinstance(t, str) for t in terms) else None


def _read_tone_style(text: str) -> PromptSlots:
    a, b, nonce, (before, _, _) = _outputs(text, "output_a", "output_b")
    head = TONE_STYLE_TEMPLATE.split("[OUTPUT_A]")[0]
    values = _fields(before, head, ("[STYLE_GUIDE]", "[AUDIENCE_DESCRIPTION]"))
    # The audience may be followed by a conversation's task section, then the risk line.
    audience, risk = _risk(values["[AUDIENCE_DESCRIPTION]"])
    form: PromptForm = "prompt"
    history: tuple[Turn, ...] = ()
    prompt, context = "", None
    at = _section_start(audience, nonce)
    if at >= 0:
        form, history, rest = _section(audience[at:], nonce)
        prompt, context, trailing = _task(rest, nonce)
        if trailing:
            raise PromptUnreadable("text after the task")
        audience = audience[:at]
    # The rubric's own term lists are the guide's last lines (required after forbidden), as rendered.
    lines = restore(values["[STYLE_GUIDE]"]).split("\n")
    required = _terms(lines[-1], REQUIRED_TERMS) if len(lines) > 1 else None
    if required is not None:
        lines.pop()
    forbidden = _terms(lines[-1], FORBIDDEN_TERMS) if len(lines) > 1 else None
    if forbidden is not None:
        lines.pop()
    rubric = ToneStyleRubric(
        style_guide="\n".join(lines),
        audience=restore(audience),
        forbidden_terms=forbidden or (),
        required_terms=required or (),
    )
    return _slots(a, b, form, history, prompt, context, rubric, risk_level=risk)


_H2H_ROW = re.compile(r'    "([A-Za-z0-9_ \-]+)": \{"winner": "A" \| "B" \| "TIE", "explanation": "\.\.\."\}')


def _h2h_criteria(text: str, names: Sequence[str]) -> tuple[Criterion, ...]:
    """``- name: description`` (or ``- name``) per criterion, in order; descriptions may span lines.

    Criterion ``i`` starts at the one line ``- name_i`` after criterion ``i - 1``'s start; a second
    such line (a description that quotes the next criterion) could be read two ways, so it is refused.
    """
    if not text.startswith(f"- {names[0]}"):
        raise PromptUnreadable("the criteria list does not start with the first criterion")
    starts = [0]
    for name in names[1:]:
        hits = [m.start() + 1 for m in re.finditer(rf"\n- {re.escape(name)}(?=: |\n|$)", text[starts[-1] :])]
        if len(hits) != 1:
            raise PromptUnreadable(f"criterion {name!r} is listed {len(hits)} times")
        starts.append(starts[-1] + hits[0])
    criteria = []
    for i, name in enumerate(names):
        end = starts[i + 1] - 1 if i + 1 < len(names) else len(text)
        entry = text[starts[i] + len(f"- {name}") : end]
        criteria.append(Criterion(name=name, description=restore(entry[2:]) if entry else ""))
    return tuple(criteria)


def _read_head_to_head(text: str) -> PromptSlots:
    template = HEAD_TO_HEAD_TEMPLATE
    a, b, nonce, (before, _, after) = _outputs(text, "output_a", "output_b")
    head, rest = template.split("[OUTPUT_A]")
    criteria_block = _fields(before, head, ("[CRITERIA]",))["[CRITERIA]"]
    tail = _fields(after, rest.split("[OUTPUT_B]")[1], ("[CONSTRAINTS]", H2H_CRITERION_ROWS, "[EXAMPLES]"))
    names = []
    for row in tail[H2H_CRITERION_ROWS].split(",\n"):
        match = _H2H_ROW.fullmatch(row)
        if match is None:
            raise PromptUnreadable("a criteria_breakdown row is not one the renderer writes")
        names.append(match.group(1))
    # Criterion descriptions are escaped, so the first task (or turn) block is the real one.
    at = _section_start(criteria_block, nonce)
    if at < 0:
        raise PromptUnreadable("no task after the criteria")
    form, history, rest = _section(criteria_block[at:], nonce)
    prompt, context, trailing = _task(rest, nonce)
    trailing, risk = _risk(trailing)
    if trailing:
        raise PromptUnreadable("text after the task")
    rubric = HeadToHeadRubric(
        criteria=_h2h_criteria(criteria_block[:at], names),
        constraints=_none_given(tail["[CONSTRAINTS]"]),
        examples=_none_given(tail["[EXAMPLES]"]),
    )
    return _slots(a, b, form, history, prompt, context, rubric, risk_level=risk)


_PW_CRITERION = re.compile(r'\n      "criterion": "((?:[^"\\]|\\.)*)",\n')
_PW_CONTEXT_OPEN, _PW_CONTEXT_CLOSE = "## Additional Context\n\n", "\n\n"


def _read_pairwise(text: str) -> PromptSlots:
    template = PAIRWISE_TEMPLATE
    a, b, nonce, (before, _, after) = _outputs(text, "response_a", "response_b")
    head, rest = template.split(PW_RESPONSE_A)
    form, history, lead_rest = _lead(_fields(before, head, (PW_TASK,))[PW_TASK], nonce)
    task, block = _tagged(lead_rest, "task", nonce)
    if not block.startswith("\n\n"):
        raise PromptUnreadable("text after the task")
    block = block[2:]
    risk: RiskLevel | None = None
    for level in RISK_LEVELS:  # the risk line closes the section: "Risk level: ...\n\n"
        if block.endswith(risk_line(level) + "\n\n"):
            block, risk = block[: -len(risk_line(level)) - 2], level
            break
    context = None
    if block:
        if not (block.startswith(_PW_CONTEXT_OPEN) and block.endswith(_PW_CONTEXT_CLOSE)):
            raise PromptUnreadable("the context section is not one the renderer writes")
        context, trailing = _tagged(block[len(_PW_CONTEXT_OPEN) : -len(_PW_CONTEXT_CLOSE)], "context", nonce)
        if trailing:
            raise PromptUnreadable("text after the context")
    tail = _fields(after, rest.split(PW_RESPONSE_B)[1], (PW_EACH_LIST, PW_EACH_COMPARE, PW_COMPARISON_ITEM))
    # The comparison rows carry each name as a JSON string: one line, quotes escaped.
    names = tuple(restore(json.loads(f'"{m}"')) for m in _PW_CRITERION.findall("\n" + tail[PW_COMPARISON_ITEM]))
    return _slots(a, b, form, history, task, context, PairwiseRubric(criteria=names), risk_level=risk)


_TB_HEAD = re.compile(r"(\d+)\. ([A-Za-z0-9_ \-]+) \(weight: ([0-9.e+\-]+)\)(?:(: )|$)")
_RUBRIC: Final = TypeAdapter[InlineRubric](InlineRubric)


def _tiebreak_criteria(text: str) -> tuple[WeightedCriterion, ...]:
    """``n. name (weight: w): description`` per criterion (seed 002's example format)."""
    criteria: list[tuple[str, float, list[str]]] = []
    for line in text.split("\n"):
        head = _TB_HEAD.match(line)
        if head is not None and int(head.group(1)) == len(criteria) + 1:
            description = [line[head.end() :]] if head.group(4) else []
            criteria.append((head.group(2), float(head.group(3)), description))
        elif criteria and criteria[-1][2]:
            criteria[-1][2].append(line)
        else:
            raise PromptUnreadable("a tie-break criterion line is not one the renderer writes")
    for number in range(1, len(criteria) + 1):
        if len(re.findall(rf"(?m)^{number}\. [A-Za-z0-9_ \-]+ \(weight: ", text)) != 1:
            raise PromptUnreadable(f"criterion {number} is listed twice: ambiguous")
    return tuple(WeightedCriterion(name=n, weight=w, description=restore("\n".join(d))) for n, w, d in criteria)


def _read_tiebreak(text: str) -> PromptSlots:
    template = TIEBREAK_TEMPLATE
    a, b, nonce, (before, _, after) = _outputs(text, "output_a", "output_b")
    head, rest = template.split("[OUTPUT_A]")
    form, history, lead_rest = _lead(_fields(before, head, ("[ORIGINAL_PROMPT]",))["[ORIGINAL_PROMPT]"], nonce)
    prompt, context, trailing = _task(lead_rest, nonce)
    rubric: InlineRubric | None = None
    if trailing:
        if not trailing.startswith(RUBRIC_INTRO) or "\n" in trailing[len(RUBRIC_INTRO) :]:
            raise PromptUnreadable("text after the task that is not the primary rubric")
        try:
            rubric = _RUBRIC.validate_python(json.loads(trailing[len(RUBRIC_INTRO) :]))
        except ValueError as exc:  # json.JSONDecodeError and pydantic's ValidationError are both ValueErrors
            raise PromptUnreadable("the primary rubric is not valid JSON of a rubric") from exc
    tail = _fields(after, rest.split("[OUTPUT_B]")[1], ("[CRITERIA]", "[ESCALATION_RULE]"))
    weights = TieBreakWeights(
        criteria=_tiebreak_criteria(tail["[CRITERIA]"]), escalation_rule=restore(tail["[ESCALATION_RULE]"])
    )
    return _slots(a, b, form, history, prompt, context, rubric, tiebreak=weights)


_READERS: Final[Mapping[TemplateKind, Callable[[str], PromptSlots]]] = MappingProxyType(
    {
        "tone_style": _read_tone_style,
        "head_to_head": _read_head_to_head,
        "pairwise": _read_pairwise,
        "tiebreak": _read_tiebreak,
    }
)
