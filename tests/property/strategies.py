"""Hypothesis strategies for messages, tool groups and session ids (shared by the
property tests and the stateful model test)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

__all__ = [
    "SESSION_IDS",
    "ToolGroupShape",
    "json_values",
    "messages",
    "texts",
    "tool_group_shapes",
]

#: A few ids, some hostile (LIKE wildcards, quotes, non-ASCII), so rules collide often.
SESSION_IDS = st.sampled_from(["s1", "s2", "a_c", "abc", "'; --", "ünï"])

_SPECIAL = st.sampled_from(
    ["\x00", "<|endoftext|>", "\U0001f9d1\u200d\U0001f4bb", "e\u0301", "\u202e", "\u2028", "\r\n"]
)

#: Valid Unicode (no lone surrogates), with NUL, special tokens, ZWJ emoji, RTL and CRLF.
texts = st.lists(st.one_of(st.text(max_size=12), _SPECIAL), max_size=4).map("".join)

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | texts,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=6,
)

_text_block = texts.map(lambda t: {"type": "text", "text": t})
_url_block = st.just({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}})
_b64_block = st.binary(min_size=1, max_size=24).map(
    lambda data: {
        "type": "image",
        "source_type": "base64",
        "mime_type": "image/png",
        "data": data.hex(),
    }
)
_blocks = st.lists(st.one_of(_text_block, _url_block, _b64_block), min_size=1, max_size=3)

_kwargs = st.dictionaries(st.sampled_from(["trace", "nul", "n"]), json_values, max_size=2)


@st.composite
def messages(draw: st.DrawFn) -> BaseMessage:
    """A human (text or multimodal blocks), assistant or system message without tool calls."""
    kind = draw(st.sampled_from(["human", "blocks", "ai", "system"]))
    kwargs = draw(_kwargs)
    if kind == "human":
        return HumanMessage(content=draw(texts), additional_kwargs=kwargs)
    if kind == "blocks":
        return HumanMessage(content=draw(_blocks), additional_kwargs=kwargs)  # type: ignore[arg-type]
    if kind == "ai":
        return AIMessage(content=draw(texts), additional_kwargs=kwargs)
    return SystemMessage(content=draw(texts))


@dataclass(frozen=True)
class ToolGroupShape:
    """An assistant turn with ``len(args)`` tool calls, answered in ``order``."""

    text: str
    args: tuple[Any, ...]
    order: tuple[int, ...]
    outputs: tuple[str, ...]


@st.composite
def tool_group_shapes(draw: st.DrawFn) -> ToolGroupShape:
    """The shape of a tool group; the caller assigns the call ids."""
    count = draw(st.integers(1, 3))
    return ToolGroupShape(
        text=draw(texts),
        args=tuple(
            draw(st.dictionaries(st.text(max_size=4), json_values, max_size=2))
            for _ in range(count)
        ),
        order=tuple(draw(st.permutations(range(count)))),
        outputs=tuple(draw(texts) for _ in range(count)),
    )
