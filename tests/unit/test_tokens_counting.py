"""Exact token counting with the real cl100k_base encoding (the ``offline`` extra)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from tiermem import ConversationMemory, TokenCounter
from tiermem.errors import InvalidArgument, TokenizerUnavailable
from tiermem.tokens import (
    DEFAULT_ENCODING,
    MEDIA_BLOCK_TOKENS,
    MESSAGE_OVERHEAD,
    OFFLINE_ENCODING,
    load_encoding,
)

SAMPLES = [
    "",
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "naïve café, 東京, Ελληνικά, עברית, emoji 👩‍👩‍👧 and combining e\u0301",
    "code: def f(x):\n    return {'a': [1, 2, 3]}  # comment\r\n",
    "<|endoftext|> and <|fim_prefix|> are plain text here",
    "\x00NUL\x00 and \u2028 line separator and \u202e override",
    "word " * 5_000,  # longer than LONG_TEXT_CHARS, split at whitespace
]


@pytest.fixture(name="encoding")
def fixture_encoding() -> tiktoken.Encoding:
    """The real cl100k_base encoding shipped by the offline extra."""
    return tiktoken.get_encoding(OFFLINE_ENCODING)


@pytest.fixture(name="counter")
def fixture_counter() -> TokenCounter:
    """A counter on the default encoding."""
    return TokenCounter()


@pytest.fixture(name="fresh_loader")
def fixture_fresh_loader() -> Iterator[None]:
    """Empty the encoding cache before and after the test (``load_encoding`` is cached)."""
    load_encoding.cache_clear()
    yield
    load_encoding.cache_clear()


@pytest.fixture(name="offline_only")
def fixture_offline_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """tiktoken as on a machine with no network: only the offline copy loads."""
    real = tiktoken.get_encoding

    def offline_only(name: str) -> tiktoken.Encoding:
        if name == OFFLINE_ENCODING:
            return real(name)
        raise ConnectionError("no network")

    monkeypatch.setattr(tiktoken, "get_encoding", offline_only)


def test_offline_encoding_is_the_real_cl100k(encoding: tiktoken.Encoding) -> None:
    """The bundled file is the real cl100k_base: known ids for a known text."""
    assert encoding.encode("hello world") == [15339, 1917]
    assert encoding.n_vocab == tiktoken.get_encoding(OFFLINE_ENCODING).n_vocab >= 100_000


@pytest.mark.parametrize("text", SAMPLES, ids=range(len(SAMPLES)))
def test_text_counts_equal_tiktoken(
    counter: TokenCounter, encoding: tiktoken.Encoding, text: str
) -> None:
    """``count_text`` equals tiktoken's own count, special tokens encoded as text."""
    assert counter.count_text(text) == len(encoding.encode(text, disallowed_special=()))


def test_special_tokens_are_counted_as_text(
    counter: TokenCounter, encoding: tiktoken.Encoding
) -> None:
    """``<|endoftext|>`` is several ordinary tokens, never the single special token."""
    count = counter.count_text("<|endoftext|>")
    assert count == len(encoding.encode_ordinary("<|endoftext|>")) > 1


def _expected(encoding: tiktoken.Encoding, message: BaseMessage) -> int:
    """The documented rule, written out independently of the implementation."""

    def n(text: str) -> int:
        return len(encoding.encode(text, disallowed_special=()))

    total = MESSAGE_OVERHEAD + n(message.type)
    content = message.content
    if isinstance(content, str):
        total += n(content)
    else:
        for block in content:
            if isinstance(block, str):
                total += n(block)
            elif block.get("type") == "text":
                total += n(block["text"])
            else:
                total += MEDIA_BLOCK_TOKENS
    if message.name:
        total += 1 + n(message.name)
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            total += MESSAGE_OVERHEAD + n(call["name"])
            total += n(json.dumps(call["args"], ensure_ascii=False, sort_keys=True))
    return total


MESSAGES: list[BaseMessage] = [
    HumanMessage("What is the weather in Paris?"),
    HumanMessage("named", name="alice"),
    SystemMessage("You are a helpful assistant."),
    AIMessage("It is sunny."),
    AIMessage(
        "",
        tool_calls=[
            {"name": "get_weather", "args": {"city": "Paris", "unit": "°C"}, "id": "c1"},
            {"name": "get_time", "args": {"tz": "Europe/Paris", "fmt": "%H:%M"}, "id": "c2"},
        ],
    ),
    ToolMessage("18 degrees", tool_call_id="c1", name="get_weather"),
    HumanMessage(
        content=[
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "QUJD" * 50_000}},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        ]
    ),
]


@pytest.mark.parametrize("message", MESSAGES, ids=range(len(MESSAGES)))
def test_message_overhead_rule(
    counter: TokenCounter, encoding: tiktoken.Encoding, message: BaseMessage
) -> None:
    """A message costs overhead + role + content + name + tool calls, per the documented rule."""
    assert counter.count_message(message) == _expected(encoding, message)


def test_role_name_and_tool_arguments_are_counted(counter: TokenCounter) -> None:
    """Adding a name or tool-call arguments raises the count beyond the text alone."""
    plain = counter.count_message(HumanMessage("hi"))
    assert plain == MESSAGE_OVERHEAD + counter.count_text("human") + counter.count_text("hi")
    assert counter.count_message(HumanMessage("hi", name="bob")) == plain + 1 + counter.count_text(
        "bob"
    )
    small = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "a"}])
    large = AIMessage("", tool_calls=[{"name": "f", "args": {"q": "x " * 50}, "id": "a"}])
    assert counter.count_message(large) - counter.count_message(small) == counter.count_text(
        json.dumps({"q": "x " * 50})
    ) - counter.count_text("{}")


def test_media_blocks_cost_a_fixed_amount(counter: TokenCounter) -> None:
    """An image block costs MEDIA_BLOCK_TOKENS whatever the size of its base64 data."""

    def image(size: int) -> HumanMessage:
        url = "data:image/png;base64," + "A" * size
        return HumanMessage(content=[{"type": "image_url", "image_url": {"url": url}}])

    base = MESSAGE_OVERHEAD + counter.count_text("human")
    assert counter.count_message(image(10)) == base + MEDIA_BLOCK_TOKENS
    assert counter.count_message(image(5_000_000)) == base + MEDIA_BLOCK_TOKENS


def test_count_messages_is_the_sum(counter: TokenCounter) -> None:
    """``count_messages`` (and calling the counter) sums ``count_message``."""
    expected = sum(counter.count_message(m) for m in MESSAGES)
    assert counter.count_messages(MESSAGES) == expected
    assert counter(MESSAGES) == expected


@pytest.mark.usefixtures("fresh_loader")
def test_model_picks_the_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """``model=`` selects tiktoken's encoding for that model."""
    real = tiktoken.get_encoding
    # Tests run offline: serve every encoding from the bundled file, as a cache would.
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: real(OFFLINE_ENCODING))
    assert TokenCounter(model="gpt-4").requested_encoding == "cl100k_base"
    assert TokenCounter(model="gpt-4o-mini").requested_encoding == "o200k_base"
    assert TokenCounter(encoding="cl100k_base").requested_encoding == "cl100k_base"
    assert TokenCounter().requested_encoding == DEFAULT_ENCODING


def test_unknown_model_is_invalid_argument() -> None:
    """A model tiktoken does not know raises InvalidArgument naming the fix."""
    with pytest.raises(InvalidArgument, match="encoding="):
        TokenCounter(model="no-such-model-xyz")
    with pytest.raises(InvalidArgument):
        TokenCounter(model="gpt-4", encoding="cl100k_base")


def test_unknown_model_fails_memory_construction(tmp_path: Path) -> None:
    """ConversationMemory refuses an unknown model before it opens any database."""
    with pytest.raises(InvalidArgument):
        ConversationMemory(f"sqlite:///{tmp_path / 'm.db'}", model="no-such-model-xyz")
    assert not (tmp_path / "m.db").exists()


@pytest.mark.usefixtures("fresh_loader", "offline_only")
def test_fallback_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """Without the downloadable file the offline copy is used and the fact logged once."""
    with caplog.at_level(logging.INFO, logger="tiermem.tokens"):
        first = TokenCounter()
        second = TokenCounter()
        assert first.count_text("hello world") == 2
    records = [r for r in caplog.records if r.name == "tiermem.tokens"]
    assert len(records) == 1
    assert OFFLINE_ENCODING in records[0].getMessage()
    assert second.encoding_name == OFFLINE_ENCODING
    assert second.requested_encoding == DEFAULT_ENCODING


@pytest.mark.usefixtures("fresh_loader")
def test_no_encoding_raises_tokenizer_unavailable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With neither encoding loadable, construction fails with TokenizerUnavailable."""

    def broken(name: str) -> Any:
        raise ConnectionError(f"cannot fetch {name}")

    monkeypatch.setattr(tiktoken, "get_encoding", broken)
    with pytest.raises(TokenizerUnavailable, match=r"tiermem\[offline\]") as info:
        TokenCounter()
    assert isinstance(info.value.__cause__, ConnectionError)
    with pytest.raises(TokenizerUnavailable):
        ConversationMemory(f"sqlite:///{tmp_path / 'm.db'}")
    assert not (tmp_path / "m.db").exists()


@pytest.mark.parametrize("name", ["cl100k", "nope", "CL100K_BASE"])
@pytest.mark.usefixtures("fresh_loader")
def test_unknown_encoding_is_refused_with_the_valid_names(name: str, tmp_path: Path) -> None:
    """An encoding name tiktoken does not register raises InvalidArgument listing the
    valid names, never counting with another encoding; no database is created."""
    with pytest.raises(InvalidArgument, match=r"unknown encoding .*valid: .*cl100k_base"):
        TokenCounter(encoding=name)
    with pytest.raises(InvalidArgument, match=r"o200k_base"):
        ConversationMemory(f"sqlite:///{tmp_path / 'm.db'}", encoding=name)
    assert not (tmp_path / "m.db").exists()


@pytest.mark.usefixtures("fresh_loader", "offline_only")
def test_unfetchable_encoding_without_offline_copy_is_unavailable() -> None:
    """A known encoding that cannot be fetched and that the offline extra does not hold
    raises TokenizerUnavailable naming the fix instead of counting with cl100k_base."""
    with pytest.raises(TokenizerUnavailable, match="TIKTOKEN_CACHE_DIR") as info:
        TokenCounter(encoding="o200k_base")
    assert isinstance(info.value.__cause__, ConnectionError)
    assert TokenCounter(encoding=DEFAULT_ENCODING).encoding_name == OFFLINE_ENCODING


def test_long_text_is_counted_in_chunks_close_to_exact(
    counter: TokenCounter, encoding: tiktoken.Encoding
) -> None:
    """Prose longer than the chunk size is counted within a few tokens per chunk of exact."""
    text = "The quick brown fox jumps over the lazy dog. " * 2_000
    exact = len(encoding.encode_ordinary(text))
    assert abs(counter.count_text(text) - exact) <= len(text) // 20_000 + 1


@pytest.mark.slow
def test_ten_megabytes_without_whitespace_is_bounded(counter: TokenCounter) -> None:
    """A 10 MB run without whitespace is counted in well under 10 seconds."""
    text = "a" * 10_000_000
    started = time.perf_counter()
    count = counter.count_text(text)
    elapsed = time.perf_counter() - started
    assert elapsed < 10, elapsed
    assert 1_000_000 <= count <= 10_000_000
