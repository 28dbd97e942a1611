"""How much of a context a provider's prompt cache could serve.

Providers cache the longest prefix a request shares with an earlier one and bill
it at a fraction of the input price. Replaying a conversation turn by turn, each
context is compared with the one sent before it: the tokens of their common prefix
count as cached by OpenAI's rule (nothing under 1,024 tokens, then in steps of
128). A context is tokenized message by message, each as its role and its text.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass

import tiktoken
from langchain_core.messages import AIMessage, BaseMessage

from .._core.messages import render_text
from ..tokens import load_encoding

__all__ = ["CACHE_MINIMUM", "CACHE_STEP", "CacheReplay", "cacheable", "prompt_tokens"]

#: OpenAI caches nothing shorter than this many tokens...
CACHE_MINIMUM = 1_024
#: ...and beyond it, prefixes in steps of this many.
CACHE_STEP = 128


def prompt_tokens(messages: Sequence[BaseMessage], encoding: str) -> list[int]:
    """``messages`` as one token sequence: each message's role, then its text (tool
    calls as JSON), in order."""
    coder = _encoding(encoding)
    tokens: list[int] = []
    for message in messages:
        text = message.content if isinstance(message.content, str) else render_text(message)
        if isinstance(message, AIMessage) and message.tool_calls:
            text += json.dumps(message.tool_calls, sort_keys=True)
        tokens += coder.encode_ordinary(f"<|{message.type}|>\n{text}\n")
    return tokens


@functools.lru_cache(maxsize=4)
def _encoding(name: str) -> tiktoken.Encoding:
    return load_encoding(name)


def cacheable(previous: Sequence[int], current: Sequence[int]) -> int:
    """The tokens of ``current`` a cache holding ``previous`` serves."""
    shared = 0
    for left, right in zip(previous, current, strict=False):
        if left != right:
            break
        shared += 1
    if shared < CACHE_MINIMUM:
        return 0
    return CACHE_MINIMUM + (shared - CACHE_MINIMUM) // CACHE_STEP * CACHE_STEP


@dataclass
class CacheReplay:
    """Contexts sent one after the other, and what a prefix cache would serve."""

    encoding: str = "cl100k_base"
    sent: int = 0
    cached: int = 0
    calls: int = 0
    _previous: tuple[int, ...] = ()

    def send(self, messages: Sequence[BaseMessage]) -> None:
        """Count one call with ``messages`` as its input."""
        tokens = prompt_tokens(messages, self.encoding)
        self.cached += cacheable(self._previous, tokens)
        self.sent += len(tokens)
        self.calls += 1
        self._previous = tuple(tokens)

    @property
    def share(self) -> float:
        """The share of the tokens sent that the cache served."""
        return self.cached / self.sent if self.sent else 0.0

    def billed(self, cached_price: float = 0.5) -> float:
        """Input tokens billed per call, a cached token costing ``cached_price`` of one."""
        if not self.calls:
            return 0.0
        return (self.sent - self.cached + cached_price * self.cached) / self.calls
