"""What to compress and how to ask for it, without I/O: which entries to take,
the prompt and its budget, and the heuristic summary used without a model.

The protocol that uses it is in :mod:`tiermem._ops.compress`; calling the model
is :mod:`tiermem._compression.summarizer`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import Runnable

from .._core.messages import render_text
from .._core.tool_pairs import pair_messages
from ..errors import InvalidArgument
from ..tokens import TokenCounter
from ..types import MemoryConfig, MemoryEntry
from .extractive import extract

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "SummarizerLike",
    "build_prompt",
    "conversation_lines",
    "fit_prompt",
    "fit_summary",
    "heuristic_summary",
    "select_entries",
    "summary_prompt",
    "summary_target",
]

#: Anything that can summarize: a chat model, a Runnable, or a callable taking the
#: prompt text and returning (or awaiting) a str or message.
SummarizerLike = Runnable[Any, Any] | Callable[[str], Any]

DEFAULT_SUMMARY_PROMPT = """\
Summarize the conversation below so that it can be continued without the original messages.
Cover: the key topics discussed; decisions made; tools used and their outcomes; \
errors encountered; the context needed to continue.
Write at most about {target_tokens} tokens. Reply with the summary only.

Conversation:
{conversation}"""

_ENTRY_PREVIEW_CHARS = 8_000
PROMPT_ECHO = "Summarize the conversation below"


# --------------------------------------------------------------------------- selection


def _group_ends(active: Sequence[MemoryEntry]) -> dict[int, int | None]:
    """Index of each tool-call entry -> index of its last result, ``None`` while a call
    is unanswered. Results pair with the latest earlier call of their id, so an id
    reused after it was answered starts a new group."""
    pairs = pair_messages([entry.message for entry in active])
    return {
        index: pairs.answers[index][-1] if pairs.complete(index) else None for index in pairs.calls
    }


def _safe_prefix(active: Sequence[MemoryEntry], length: int) -> int:
    """Shrink ``length`` until ``active[:length]`` holds no unanswered tool call and
    no call whose results lie beyond it (a tool group is never split)."""
    ends = _group_ends(active)
    changed = True
    while changed and length > 0:
        changed = False
        for index in range(length):
            end = ends.get(index, index)
            if end is None or end >= length:
                length, changed = index, True
                break
    return length


def select_entries(
    active: Sequence[MemoryEntry],
    config: MemoryConfig,
    *,
    force: bool,
    keep: int | None = None,
    take: tuple[int, int] | None = None,
) -> list[MemoryEntry]:
    """The oldest active entries to compress, or ``[]`` when there is nothing to do.

    Pinned context is never taken. The newest ``keep`` (default
    ``recent_window``) unpinned entries stay; the run stops before the first
    unanswered tool call and never splits a call from its results; the run is
    capped at ``max_summarizer_input_tokens``. With ``take`` (tokens, entries)
    only the oldest entries holding at least that many tokens and entries are
    taken (at least ``min_entries_to_compress`` when there are that many), not
    everything older than ``keep``. Without ``force`` fewer than
    ``min_entries_to_compress`` entries is nothing to do.
    """
    window = config.recent_window if keep is None else keep
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise InvalidArgument(f"keep must be an int >= 0, got {window!r}")
    unpinned = [entry for entry in active if not entry.pinned]
    length = max(len(unpinned) - window, 0)
    budget, capped = config.max_summarizer_input_tokens, 0
    for index in range(length):
        budget -= unpinned[index].token_count
        if budget < 0:
            capped = max(index, 1)
            break
    if capped:
        length = min(length, capped)
    if take is not None:
        length = _enough(unpinned, length, take, config.min_entries_to_compress)
    length = _safe_prefix(unpinned, length)
    minimum = 1 if force else config.min_entries_to_compress
    return unpinned[:length] if length >= minimum else []


def _enough(
    unpinned: Sequence[MemoryEntry], length: int, take: tuple[int, int], minimum: int
) -> int:
    """The shortest prefix (at most ``length``) holding ``take`` (tokens, entries)
    and at least ``minimum`` entries, widened to the end of a tool group it starts."""
    tokens, entries = take
    count, taken = 0, 0
    while count < length and (taken < tokens or count < max(entries, minimum)):
        taken += unpinned[count].token_count
        count += 1
    ends = _group_ends(unpinned[:length])
    index = 0
    while index < count:  # a group begun inside the prefix ends inside it too
        end = ends.get(index, index)
        if end is not None and end >= count:
            count = end + 1
        index += 1
    return min(count, length)


# --------------------------------------------------------------------------- prompt


def _line(entry: MemoryEntry) -> str:
    text = render_text(entry.message)
    if len(text) > _ENTRY_PREVIEW_CHARS:
        text = text[:_ENTRY_PREVIEW_CHARS] + " [...truncated]"
    message = entry.message
    if isinstance(message, ToolMessage):
        status = " (error)" if message.status == "error" else ""
        return f"Tool result{status} ({message.name or 'tool'}): {text}"
    if isinstance(message, AIMessage) and message.tool_calls:
        return f"Assistant called tools: {text}"
    label = {"user": "User", "assistant": "Assistant", "system": "System"}.get(entry.role, "Tool")
    return f"{label}: {text}"


def conversation_lines(entries: Sequence[MemoryEntry], summaries: Sequence[str] = ()) -> list[str]:
    """The conversation as plain text lines (earlier summaries first), media as
    placeholders, each entry cut at a preview length."""
    lines = [f"[Earlier summary] {text}" for text in summaries]
    lines.extend(_line(entry) for entry in entries)
    return lines


_PLACEHOLDER = re.compile(r"\{(conversation|target_tokens)\}")


def build_prompt(conversation: str, target_tokens: int, template: str | None = None) -> str:
    """Fill the summary prompt (the default, or ``MemoryConfig.summary_prompt``).

    Only ``{conversation}`` and ``{target_tokens}`` are replaced, in one pass (so
    neither is looked for in the text substituted for the other); every other brace
    stays as written, so a template may hold a JSON example.
    """
    values = {"conversation": conversation, "target_tokens": str(target_tokens)}
    return _PLACEHOLDER.sub(
        lambda match: values[match.group(1)], template or DEFAULT_SUMMARY_PROMPT
    )


_TRUNCATED = " [...truncated]"
#: Rounds of cutting before giving up: each round removes at least what was over.
_FIT_ROUNDS = 8


def fit_prompt(
    lines: Sequence[str],
    target_tokens: int,
    counter: TokenCounter,
    limit: int,
    template: str | None = None,
) -> str:
    """The summary prompt for ``lines``, at most ``limit`` tokens in all
    (``max_summarizer_input_tokens``: the template's own words count too).

    When the whole prompt would be longer, the longest lines are cut to a common
    length (each keeps its start and ends with ``[...truncated]``), so every entry
    still reaches the model. Shorter prompts are returned without counting.

    Raises:
        InvalidArgument: when ``limit`` leaves no room for the conversation.
    """
    prompt = build_prompt("\n".join(lines), target_tokens, template)
    # A token covers at least one UTF-8 byte: a prompt of at most ``limit`` bytes
    # fits, and typical prompts (a few kB against a budget of thousands) stop here.
    if len(prompt) <= limit and len(prompt.encode("utf-8", "surrogatepass")) <= limit:
        return prompt
    over = counter.count_text(prompt) - limit
    if over <= 0:
        return prompt
    sizes = [counter.count_text(line) for line in lines]
    marker = counter.count_text(_TRUNCATED)
    budget = sum(sizes)
    for _ in range(_FIT_ROUNDS):
        budget -= over
        cap = _common_cap(sizes, budget)
        if cap <= marker:
            raise InvalidArgument(
                f"max_summarizer_input_tokens={limit} leaves no room for the conversation "
                f"of {len(lines)} lines (the prompt's own words take part of it)"
            )
        cut = [
            line if size <= cap else counter.truncate(line, cap - marker) + _TRUNCATED
            for line, size in zip(lines, sizes, strict=True)
        ]
        prompt = build_prompt("\n".join(cut), target_tokens, template)
        over = counter.count_text(prompt) - limit
        if over <= 0:
            return prompt
    raise InvalidArgument(f"cannot fit the summary prompt in {limit} tokens")


def summary_prompt(
    lines: Sequence[str], original_tokens: int, config: MemoryConfig, counter: TokenCounter
) -> str:
    """The prompt that asks for a summary of ``lines`` (``original_tokens`` in all):
    ``compression_ratio`` of them as the target length, within
    ``max_summarizer_input_tokens`` (see :func:`fit_prompt`)."""
    target = summary_target(original_tokens, config)
    return fit_prompt(
        lines, target, counter, config.max_summarizer_input_tokens, config.summary_prompt
    )


def summary_target(original_tokens: int, config: MemoryConfig) -> int:
    """The length a summary of ``original_tokens`` is asked for:
    ``compression_ratio`` of them, at least 16 tokens."""
    return max(int(original_tokens * config.compression_ratio), 16)


def _common_cap(sizes: Sequence[int], budget: int) -> int:
    """The largest ``cap`` with ``sum(min(size, cap)) <= budget`` (0 if none)."""
    remaining, left = budget, len(sizes)
    for size in sorted(sizes):
        if size * left > remaining:
            return max(remaining // left, 0)
        remaining -= size
        left -= 1
    return max(sizes, default=0)


def heuristic_summary(
    entries: Sequence[MemoryEntry], summaries: Sequence[str] = (), *, quote: int = 2_000
) -> str:
    """The summary used without a model (or as ``heuristic_fallback``): the most
    informative sentences of ``entries`` (of ``summaries`` when merging them), word
    for word with their speakers, in order, within about ``quote`` characters (see
    :mod:`tiermem._compression.extractive`). Deterministic."""
    return extract(entries, summaries, quote)


#: Rounds of shrinking the character budget before the text is cut.
_FIT_SUMMARY_ROUNDS = 6


def fit_summary(
    make: Callable[[int], str], original_tokens: int, config: MemoryConfig, counter: TokenCounter
) -> str:
    """A heuristic summary (``make(chars)``, see :func:`heuristic_summary`) within its
    target length and always shorter than the ``original_tokens`` it replaces, so it
    fits at any budget: the character budget shrinks until it fits, then the text is
    cut."""
    limit = min(summary_target(original_tokens, config), original_tokens - 1)
    chars = max(limit, 1) * 4  # about four characters a token in English
    text = ""
    for _ in range(_FIT_SUMMARY_ROUNDS):
        text = make(chars)
        tokens = counter.count_text(text)
        if tokens <= limit and text:
            return text
        chars = max(int(chars * limit / max(tokens, 1) * 0.9), 1)
    # Nothing is shorter than one token: then validation refuses the summary.
    return counter.truncate(text, limit) if limit >= 1 else text
