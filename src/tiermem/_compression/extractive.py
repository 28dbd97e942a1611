"""The heuristic summary: extractive, deterministic, without a model.

It keeps the most informative sentences of what it summarizes, word for word, each
with its speaker, in their original order: sentences naming people, places and
things (capitalized words inside a sentence), numbers and dates, decisions and
plans, tool results and errors score highest; greetings and bare questions lowest.
A merge of summaries picks among the sentences of the summaries the same way, so
merged summaries never nest headers. The same input always gives the same text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from langchain_core.messages import AIMessage, ToolMessage

from .._core.messages import render_text
from ..types import MemoryEntry

__all__ = ["extract"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_NUMBER = re.compile(r"\d")
_MONTHS = frozenset(
    "january february march april may june july august september october november "
    "december jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday "
    "thursday friday saturday sunday today tomorrow yesterday".split()
)
_DECISIONS = frozenset(
    "decided decide agreed agree chose choose booked book bought buy plan planned plans "
    "will going moved move switched switch need needs must prefer prefers confirmed "
    "scheduled cancelled canceled signed started finished paid ordered adopted hired "
    "married graduated visited lives live works work called named".split()
)
_ERRORS = frozenset("error errors failed fails failure exception traceback refused denied".split())
_FILLER = frozenset(
    "hi hello hey thanks thank ok okay sure great cool bye goodbye yes no welcome".split()
)
#: Labels of the summary lines, as a summarizer prompt shows the speakers.
_LABELS = {"user": "User", "assistant": "Assistant", "system": "System"}
_LABELLED = re.compile(r"^(User|Assistant|System|Tool result(?: \([^)]*\))?|Tool error[^:]*):\s*")


class _Sentence(NamedTuple):
    source: int  # the entry or summary it comes from, in order
    label: str
    text: str
    score: float


def extract(entries: Sequence[MemoryEntry], summaries: Sequence[str], budget: int) -> str:
    """The most informative sentences of ``entries`` (or of ``summaries`` when
    merging), at most about ``budget`` characters, in their original order, one
    line per source: ``"User: ..."``, ``"Assistant: ..."``, ``"Tool result (name): ..."``."""
    sentences = _from_summaries(summaries) if summaries else _from_entries(entries)
    if budget <= 0:
        return ""
    if not sentences:  # nothing but empty messages or media: say what there was
        return f"{len(entries)} messages without text." if entries else ""
    ranked = sorted(range(len(sentences)), key=lambda i: (-sentences[i].score, i))
    chosen: list[int] = []
    seen: set[str] = set()
    used = 0
    for index in ranked:
        sentence = sentences[index]
        cost = len(sentence.text) + len(sentence.label) + 3
        if sentence.score <= 0 or sentence.text in seen or used + cost > budget:
            continue  # nothing worth keeping, said already, or too long for what is left
        chosen.append(index)
        seen.add(sentence.text)
        used += cost
    if not chosen:  # nothing informative, or the best sentence alone is too long
        best = sentences[ranked[0]]
        room = max(budget - len(best.label) - 3, 1)
        text = best.text if len(best.text) <= room else best.text[:room].rstrip() + "…"
        return _line(best.label, [text])
    chosen.sort()
    lines: list[str] = []
    run: list[str] = []
    for position, index in enumerate(chosen):
        sentence = sentences[index]
        run.append(sentence.text)
        following = chosen[position + 1] if position + 1 < len(chosen) else None
        if following is None or sentences[following].source != sentence.source:
            lines.append(_line(sentence.label, run))
            run = []
    return "\n".join(lines)


def _line(label: str, texts: Sequence[str]) -> str:
    body = " ".join(texts)
    return f"{label}: {body}" if label else body


def _from_entries(entries: Sequence[MemoryEntry]) -> list[_Sentence]:
    sentences: list[_Sentence] = []
    for source, entry in enumerate(entries):
        message = entry.message
        bonus = 0.0
        if isinstance(message, ToolMessage):
            error = message.status == "error" or render_text(message).lower().startswith("error")
            label = f"Tool {'error' if error else 'result'} ({message.name or 'tool'})"
            bonus = 3.0 if error else 2.0
            text = render_text(message)
        elif isinstance(message, AIMessage) and message.tool_calls:
            label, bonus = "Assistant called", 1.0
            text = render_text(message)
        else:
            label = _LABELS.get(entry.role, "Tool")
            text = render_text(message)
        sentences += _sentences(source, label, text, bonus)
    return sentences


def _from_summaries(summaries: Sequence[str]) -> list[_Sentence]:
    sentences: list[_Sentence] = []
    source = 0
    for summary in summaries:
        for line in summary.splitlines():
            match = _LABELLED.match(line)
            label = match.group(1) if match else ""
            text = line[match.end() :] if match else line
            bonus = 2.0 if label.startswith("Tool") else 0.0
            sentences += _sentences(source, label, text, bonus)
            source += 1
    return sentences


def _sentences(source: int, label: str, text: str, bonus: float) -> list[_Sentence]:
    parts = [part.strip() for part in _SENTENCE_END.split(text)]
    return [_Sentence(source, label, part, _score(part) + bonus) for part in parts if part]


def _score(sentence: str) -> float:
    words = _WORD.findall(sentence)
    if not words:
        return -5.0
    lowered = [word.lower() for word in words]
    score = 0.0
    # Capitalized words inside a sentence: names of people, places and things.
    score += 2.0 * sum(1 for word in words[1:] if word[0].isupper() and word.lower() != "i")
    score += 2.0 * sum(1 for word in words if _NUMBER.search(word))
    score += 2.0 * sum(1 for word in lowered if word in _MONTHS)
    score += 1.5 * sum(1 for word in lowered if word in _DECISIONS)
    score += 3.0 * sum(1 for word in lowered if word in _ERRORS)
    if all(word in _FILLER for word in lowered):
        score -= 5.0
    if len(words) < 4:
        score -= 1.0
    if sentence.endswith("?"):
        score -= 1.0
    # Content words count a little, so that among plain sentences the fuller wins.
    return score + 0.1 * min(len(words), 30)
