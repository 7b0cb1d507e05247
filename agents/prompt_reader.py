"""Reading a rendered prompt back into the :class:`~agents.prompts.PromptSlots` it shows.

A judge gets the pair only as rendered text (``JudgeRequest.messages``); the offline judge reads it
back out here, the way a model reads it. The reader inverts ``agents.prompts``:

* outputs are found by their delimiter tags, which no inserted text can contain (``neutralise``);
* the rest is split at the template's fixed text, and the escaping is undone (``restore``);
* the result is accepted only if rendering it gives back the very same messages.

It never guesses: a prompt it cannot read exactly raises :class:`PromptUnreadable`. Rubric texts are
operator configuration, not delimited, so one that repeats the template's own fixed text where the
reader splits (a heading such as ``## TARGET AUDIENCE``) is refused rather than read one way or
the other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Final

from pydantic import TypeAdapter, ValidationError

from pairjudge.agents.judge import JudgeRequest, TemplateKind
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
    PromptSlots,
    render,
    restore,
)
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
    try:
        slots = _READERS[request.template](request.messages[1].content)
    except ValidationError as exc:
        raise PromptUnreadable(f"the prompt's rubric does not validate: {exc.error_count()} error(s)") from exc
    if render(request.template, slots).messages != request.messages[:2]:
        raise PromptUnreadable("what was read does not render back to the same messages")
    return slots


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


def _outputs(text: str, tag_a: str, tag_b: str) -> tuple[str, str, str, list[str]]:
    """Both outputs, the prompt's nonce, and the rest of ``text`` in three parts: before A, between A
    and B, after B.

    The first opening tag is the real one: every text inserted before it is escaped. Every delimiter
    of a prompt carries one nonce (``<output_a id="NONCE">``, seed 003's ``<response_a id="NONCE">``):
    the one read from A's opening tag must close A and open and close B. The data note before each
    opening tag belongs to the output's slot, like the tags.
    """
    begin, _ = _between(text, f'<{tag_a} id="', '">\n')
    nonce = text[begin : begin + 16]
    open_a, close_a = f'<{tag_a} id="{nonce}">\n', f'\n</{tag_a} id="{nonce}">'
    open_b, close_b = f'<{tag_b} id="{nonce}">\n', f'\n</{tag_b} id="{nonce}">'
    a_begin, a_end = _between(text, open_a, close_a)
    b_begin, b_end = _between(text, open_b, close_b, a_end + len(close_a))
    a, b = restore(text[a_begin:a_end]), restore(text[b_begin:b_end])
    note = DATA_NOTE + "\n"
    a_begin, a_end = a_begin - len(open_a) - len(note), a_end + len(close_a)
    b_begin, b_end = b_begin - len(open_b) - len(note), b_end + len(close_b)
    if not (text.startswith(note, a_begin) and text.startswith(note, b_begin)):
        raise PromptUnreadable("an output slot lacks its data note")
    return a, b, nonce, [text[:a_begin], text[a_end:b_begin], text[b_end:]]


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
    a, b, _, (before, _, _) = _outputs(text, "output_a", "output_b")
    head = TONE_STYLE_TEMPLATE.split("[OUTPUT_A]")[0]
    values = _fields(before, head, ("[STYLE_GUIDE]", "[AUDIENCE_DESCRIPTION]"))
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
        audience=restore(values["[AUDIENCE_DESCRIPTION]"]),
        forbidden_terms=forbidden or (),
        required_terms=required or (),
    )
    return PromptSlots(output_a=a, output_b=b, task_prompt="", task_context=None, rubric=rubric)


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
    # Criterion descriptions are escaped, so the first task block is the real one.
    at = criteria_block.find(f'{TASK_INTRO}<task id="{nonce}">\n')
    if at < 0:
        raise PromptUnreadable("no task after the criteria")
    prompt, context, trailing = _task(criteria_block[at + len(TASK_INTRO) :], nonce)
    if trailing:
        raise PromptUnreadable("text after the task")
    rubric = HeadToHeadRubric(
        criteria=_h2h_criteria(criteria_block[:at], names),
        constraints=_none_given(tail["[CONSTRAINTS]"]),
        examples=_none_given(tail["[EXAMPLES]"]),
    )
    return PromptSlots(output_a=a, output_b=b, task_prompt=prompt, task_context=context, rubric=rubric)


_PW_CRITERION = re.compile(r'\n      "criterion": "((?:[^"\\]|\\.)*)",\n')
_PW_CONTEXT_OPEN, _PW_CONTEXT_CLOSE = "## Additional Context\n\n", "\n\n"


def _read_pairwise(text: str) -> PromptSlots:
    template = PAIRWISE_TEMPLATE
    a, b, nonce, (before, _, after) = _outputs(text, "response_a", "response_b")
    head, rest = template.split(PW_RESPONSE_A)
    task, block = _tagged(_fields(before, head, (PW_TASK,))[PW_TASK], "task", nonce)
    if not block.startswith("\n\n"):
        raise PromptUnreadable("text after the task")
    block = block[2:]
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
    return PromptSlots(
        output_a=a,
        output_b=b,
        task_prompt=task,
        task_context=context,
        rubric=PairwiseRubric(criteria=names),
    )


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
    prompt, context, trailing = _task(_fields(before, head, ("[ORIGINAL_PROMPT]",))["[ORIGINAL_PROMPT]"], nonce)
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
    return PromptSlots(
        output_a=a, output_b=b, task_prompt=prompt, task_context=context, rubric=rubric, tiebreak=weights
    )


_READERS: Final[Mapping[TemplateKind, Callable[[str], PromptSlots]]] = MappingProxyType(
    {
        "tone_style": _read_tone_style,
        "head_to_head": _read_head_to_head,
        "pairwise": _read_pairwise,
        "tiebreak": _read_tiebreak,
    }
)
