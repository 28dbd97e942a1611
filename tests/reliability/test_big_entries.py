"""T25, T26: 10 MB entries are counted in bounded time and memory, stored and read back,
reach the summarizer truncated, and media blocks reach it as placeholders only."""

from __future__ import annotations

import base64
import random
import re
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from tiermem import ConversationMemory, MemoryConfig, SessionState
from tiermem.doctor import find_violations
from tiermem.testing import FakeSummarizer

from ..conftest import MemoryFactory
from .harness import StoreSpec, join_all, read_log, spawn
from .workers import memory_footprint

pytestmark = pytest.mark.slow


def test_ten_megabyte_entries(store: StoreSpec, tmp_path: Path) -> None:
    """Prose, one 10 MB run without whitespace, 10 MB of base64 text and a base64 image
    block are each counted in < 10 s, stored and read back equal, with peak RSS < 1 GB
    (measured in a fresh process); the image block costs a fixed token price."""
    log = tmp_path / "log.jsonl"
    worker = spawn(memory_footprint, store, str(log))
    join_all([worker], 240)
    records = read_log(log)
    results = {r["name"]: r for r in records if "name" in r}
    assert set(results) == {"prose", "run", "base64", "image"}
    for name, result in results.items():
        assert result["count_s"] < 10.0, f"{name}: counted in {result['count_s']:.1f} s"
        assert result["equal"], f"{name} did not round-trip"
        assert result["entry_tokens"] == result["tokens"]
    assert results["image"]["tokens"] < 200, "base64 image data was counted as text"
    assert results["run"]["tokens"] > 100_000
    peak = next(r["peak_mb"] for r in records if "peak_mb" in r)
    assert peak < 1024, f"peak RSS {peak:.0f} MB"
    # Shallow check: the deep one would recount 30 MB of text the worker just counted.
    engine = store.engine()
    try:
        assert find_violations(engine, deep=False) == []
    finally:
        engine.dispose()


TEN_MB = 10_000_000
#: What the summarizer sees of one entry at most (then " [...truncated]").
PREVIEW_CHARS = 8_000
#: A run of base64 long enough that it can only be a payload, never prose.
BASE64_RUN = re.compile(r"[A-Za-z0-9+/=]{100,}")
#: Manual compression, one round per call, a summarizer input cap a small model has.
CONFIG = MemoryConfig(
    auto_compress=False,
    recent_window=2,
    min_entries_to_compress=1,
    max_summarizer_input_tokens=4_000,
)


def _base64(size: int, seed: int) -> str:
    """``size`` characters of base64 of pseudo-random bytes."""
    data = random.Random(seed).randbytes(size * 3 // 4 + 3)
    return base64.b64encode(data).decode()[:size]


def _big_texts() -> dict[str, str]:
    """The three 10 MB texts of T25: prose, one run without whitespace, base64."""
    prose = ("lorem ipsum dolor sit amet, consectetur adipiscing elit " * 200_000)[:TEN_MB]
    return {"prose": prose, "run": "a" * TEN_MB, "base64": _base64(TEN_MB, 1)}


def _chat(memory: ConversationMemory, sid: str, index: int) -> None:
    """One ordinary user message of a few dozen tokens."""
    memory.add_user_message(
        sid,
        f"Message {index}: please keep track of the order numbers, the delivery dates "
        "and the addresses we discussed, because I will need all of them again later.",
    )


def _prompts(memory: ConversationMemory, sid: str, fake: FakeSummarizer) -> list[str]:
    """Compress ``sid`` round by round (keeping 2 entries); the prompts the model got."""
    while memory.compress(sid, force=True, keep=2) is not None:
        pass
    assert [e.compressed for e in memory.get_entries(sid)][-2:] == [False, False]
    return list(fake.calls)


def test_huge_entries_reach_the_summarizer_truncated(make_memory: MemoryFactory) -> None:
    """10 MB of prose, of one letter and of base64 are compressed, each in a round of its
    own (a round stops before an entry that would pass max_summarizer_input_tokens), and
    the model sees only the start of each (at most 8,000 characters, fewer when those
    would pass the cap) with a [...truncated] marker.
    Every prompt, summary merges included, stays within max_summarizer_input_tokens by
    the memory's own counter (T25)."""
    fake = FakeSummarizer()
    memory = make_memory(config=CONFIG, summarizer=fake)
    big = _big_texts()
    _chat(memory, "s", 0)
    _chat(memory, "s", 1)
    for text in big.values():
        memory.add_user_message("s", text)
    for index in range(2, 5):
        _chat(memory, "s", index)
    prompts = _prompts(memory, "s", fake)
    assert [e.compressed for e in memory.get_entries("s")] == [True] * 6 + [False] * 2
    # Rounds over entries; the others merge summaries (the context is over max_tokens).
    rounds = [p for p in prompts if not p.split("Conversation:\n", 1)[1].startswith("[Earlier")]
    assert len(rounds) == 5  # the two first messages, each big one alone, one more
    for prompt, (kind, text) in zip(rounds[1:4], big.items(), strict=True):
        line = prompt.split("Conversation:\n", 1)[1]
        assert line.startswith("User: ") and line.endswith(" [...truncated]"), kind
        shown = line.removeprefix("User: ").removesuffix(" [...truncated]")
        # The start of the entry: its first 8,000 characters, or fewer when those
        # would pass the cap (8,000 characters of base64 are some 5,700 tokens).
        assert text.startswith(shown) and 1_000 < len(shown) <= PREVIEW_CHARS, kind
    assert not any("[...truncated]" in p for p in (rounds[0], rounds[4]))
    sent = [memory.counter.count_text(prompt) for prompt in prompts]
    cap = CONFIG.max_summarizer_input_tokens
    assert [n for n in sent if n > cap] == [], f"prompts of {sent} tokens, cap {cap}"


def _media_messages(payload: str, small: str) -> list[BaseMessage]:
    """A user turn with every kind of media block, an assistant turn with thinking
    (signed) and tool_use blocks, and a tool result carrying an image."""
    return [
        HumanMessage(
            content=[
                {"type": "text", "text": "What is in these?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{payload}"}},
                {"type": "image", "source_type": "base64", "data": small, "mime_type": "image/png"},
                {"type": "image", "url": "https://example.com/dog.jpg"},
                {"type": "input_audio", "input_audio": {"data": small, "format": "wav"}},
                {"type": "audio", "source_type": "base64", "data": small, "mime_type": "audio/wav"},
                {
                    "type": "file",
                    "source_type": "base64",
                    "data": small,
                    "mime_type": "application/pdf",
                },
            ]
        ),
        AIMessage(
            content=[
                {"type": "thinking", "thinking": "Look closer.", "signature": small},
                {"type": "text", "text": "A cat and a dog; let me zoom in."},
                {"type": "tool_use", "id": "toolu_1", "name": "zoom", "input": {"x": 1}},
            ],
            tool_calls=[{"name": "zoom", "args": {"x": 1}, "id": "toolu_1"}],
        ),
        ToolMessage(
            content=[
                {"type": "text", "text": "zoomed"},
                {"type": "image", "source_type": "base64", "data": small, "mime_type": "image/png"},
            ],
            tool_call_id="toolu_1",
            name="zoom",
        ),
    ]


def test_media_blocks_reach_the_summarizer_as_placeholders(make_memory: MemoryFactory) -> None:
    """Image (https URL, data URI of 10 MB, base64 block), audio, file, signed thinking
    and tool_use blocks are summarized as placeholders: the prompt names the https
    images and never holds a base64 payload; the stored messages stay exact (T25, T26)."""
    fake = FakeSummarizer()
    memory = make_memory(config=CONFIG, summarizer=fake)
    payload, small = _base64(TEN_MB, 2), _base64(3_000, 3)
    messages = _media_messages(payload, small)
    memory.add_messages("s", messages)
    _chat(memory, "s", 0)
    _chat(memory, "s", 1)
    (prompt,) = _prompts(memory, "s", fake)
    assert (
        "User: What is in these?\n[image: https://example.com/cat.png]\n[image]\n[image]\n"
        "[image: https://example.com/dog.jpg]\n[input_audio]\n[audio]\n[file]\n"
    ) in prompt
    assert (
        "Assistant called tools: [thinking]\nA cat and a dog; let me zoom in.\n"
        '[tool_use]\nzoom({"x":1})'
    ) in prompt
    assert "Tool result (zoom): zoomed\n[image]" in prompt
    assert BASE64_RUN.search(prompt) is None, BASE64_RUN.findall(prompt)[:1]
    assert "base64," not in prompt and small[:40] not in prompt
    assert memory.counter.count_text(prompt) <= CONFIG.max_summarizer_input_tokens
    stored = [e.message for e in memory.get_entries("s")[:3]]
    assert stored == messages


def test_ten_megabyte_entry_export_import_round_trip(make_memory: MemoryFactory) -> None:
    """A session holding a 10 MB entry (base64 text, no whitespace) and a summary
    exports, imports and exports again byte for byte, and the entry comes back equal."""
    memory = make_memory(config=CONFIG, summarizer=FakeSummarizer())
    big = _base64(TEN_MB, 4)
    _chat(memory, "s", 0)
    _chat(memory, "s", 1)
    memory.compress("s", force=True, keep=0)
    memory.add_user_message("s", big)
    _chat(memory, "s", 2)
    original = memory.export_session("s").to_json()
    assert len(original) > TEN_MB
    assert memory.clear_session("s") == 4
    assert memory.import_session(original) == "s"
    assert memory.export_session("s").to_json() == original
    assert SessionState.from_json(original.encode("utf-8")).to_json() == original
    entries = memory.get_entries("s")
    assert [e.seq for e in entries] == [1, 2, 3, 4]
    assert entries[2].message == HumanMessage(content=big)
    assert entries[2].token_count == memory.counter.count_message(HumanMessage(content=big))
