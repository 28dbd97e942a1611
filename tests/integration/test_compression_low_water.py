"""Compression uses the budget: it takes only the oldest entries needed for the
context to fall to ``compress_to`` of ``max_tokens``, so the context keeps as many
verbatim entries as fit there (never fewer than ``recent_window``), compressions are
rare and deep, and ``max_entries`` limits nothing unless it is set."""

from __future__ import annotations

from typing import Any

from tiermem import ConversationMemory, MemoryConfig
from tiermem.testing import FakeSummarizer

from ..conftest import MemoryFactory


def _chat(memory: ConversationMemory, turns: int) -> list[dict[str, Any]]:
    """``turns`` user/assistant turns; the stats right after each compression."""
    after: list[dict[str, Any]] = []

    def record(sender: object, **kwargs: Any) -> None:
        stats = memory.get_stats("s")
        after.append({"stats": stats, "result": kwargs["result"]})

    memory.on("compressed", record)
    for turn in range(turns):
        memory.add_user_message("s", f"Question {turn}: where did parcel {turn} go after Leeds?")
        memory.add_assistant_message(
            "s", f"Parcel {turn} left Leeds for the York depot on day {turn}."
        )
    return after


def test_a_compression_keeps_the_context_near_the_low_water_mark(
    make_memory: MemoryFactory,
) -> None:
    """At 2,000 tokens every compression leaves a context between 40 % and 60 % of the
    budget, holding many more verbatim entries than recent_window; 200 turns need
    only a few compressions."""
    config = MemoryConfig(max_tokens=2_000)
    memory = make_memory(config=config, summarizer=FakeSummarizer())
    after = _chat(memory, 200)
    compressions = [a for a in after if a["result"].entries_compressed]
    total = memory.get_stats("s").total_tokens
    # Each compression frees about (1 - 0.6) of the budget: no more than that many.
    assert 3 <= len(compressions) <= total // (0.4 * 2_000 * (1 - config.compression_ratio)) + 1
    for record in compressions:
        stats = record["stats"]
        assert 0.4 * 2_000 <= stats.context_tokens <= 0.6 * 2_000 + 40
        assert stats.active_entries > 4 * config.recent_window


def test_the_verbatim_context_is_what_a_budget_of_60_percent_holds(
    make_memory: MemoryFactory,
) -> None:
    """Right after a compression, the entries kept verbatim are the newest ones, and
    the newest compressed entry would not have fitted under the low-water mark beside
    them and a summary of the expected size (compression took only what it had to)."""
    config = MemoryConfig(max_tokens=1_500)
    memory = make_memory(config=config, summarizer=FakeSummarizer())
    snapshots: list[tuple[int, int]] = []

    def record(sender: object, **kwargs: Any) -> None:
        entries = memory.get_entries("s")
        active = [e for e in entries if not e.compressed]
        newest_taken = max((e for e in entries if e.compressed), key=lambda e: e.seq)
        assert all(e.seq > newest_taken.seq for e in active)
        stats = memory.get_stats("s")
        snapshots.append((stats.context_tokens + newest_taken.token_count, len(active)))

    memory.on("compressed", record)
    for turn in range(120):
        memory.add_user_message("s", f"Note {turn}: the meeting with Ana moved to room {turn}.")
    assert snapshots
    # The plan counts on a summary of compression_ratio of what it takes; this
    # summarizer writes far less, so the context falls below the mark by up to that.
    low = 0.6 * config.max_tokens * (1 - config.compression_ratio)
    for context_with_one_more, _ in snapshots:
        assert context_with_one_more > low
    # Without the low-water mark every compression kept recent_window (10) entries.
    assert min(active for _, active in snapshots) > 20


#: Sentences of different lengths and words, so the heuristic summary is of its
#: usual size: about ``compression_ratio`` of what it quotes.
_FACTS = (
    "Ana moved the design review to room {n} on the second floor.",
    "The parcel for order {n} left the Leeds depot late, so it reaches York on Friday.",
    "Remind me that the dentist on Thursday is at {n} past nine.",
    "Kwame says the budget for the Lisbon trip is {n}00 euros, flights included.",
)


def test_a_compression_that_a_merge_follows_still_lands_at_the_low_water_mark(
    make_memory: MemoryFactory,
) -> None:
    """With the heuristic summarizer the summaries soon pass ``summary_share`` and each
    compression is followed by a merge that shrinks them too. The compression counts
    that shrinking, so the context falls to about ``compress_to`` of the budget, not
    far under it (it fell to about 0.35 of it when the merge was not counted), and the
    summaries stay near their share of it."""
    config = MemoryConfig(max_tokens=2_000)
    memory = make_memory(config=config)  # no summarizer: the heuristic, extractive one
    landed: list[int] = []
    merged = 0
    before = None
    for turn in range(240):
        memory.add_user_message("s", _FACTS[turn % 4].format(n=turn))
        memory.add_assistant_message("s", f"Noted, item {turn}.")
        after = memory.get_stats("s")
        if before is not None and after.context_tokens < before.context_tokens:
            landed.append(after.context_tokens)
            # A compression adds a summary; the merge after it folds them into one.
            merged += after.summaries <= before.summaries
        before = after
    assert len(landed) >= 4 and merged >= 2
    # Where the new summary comes out shorter than planned, the merge does not come
    # and the context stays somewhat above the mark: never far under it.
    for tokens in landed:
        assert 0.5 * 2_000 <= tokens <= 0.75 * 2_000
    assert 0.55 * 2_000 <= sum(landed) / len(landed) <= 0.65 * 2_000
    assert memory.get_stats("s").summary_tokens <= 0.2 * 2_000 * 1.5


def test_max_entries_is_no_limit_unless_set(make_memory: MemoryFactory) -> None:
    """300 short messages under a large budget are never compressed by default; with
    max_entries=50 the 51st message compresses down to compress_to of it (30 active)."""
    memory = make_memory(config=MemoryConfig(max_tokens=100_000), summarizer=FakeSummarizer())
    for turn in range(150):
        memory.add_user_message("s", f"hello {turn}")
        memory.add_assistant_message("s", f"hi {turn}")
    assert memory.get_stats("s").compressed_entries == 0
    limited = make_memory(
        config=MemoryConfig(max_tokens=100_000, max_entries=50), summarizer=FakeSummarizer()
    )
    for turn in range(51):
        limited.add_user_message("t", f"hello {turn}")
    stats = limited.get_stats("t")
    assert (stats.compressed_entries, stats.active_entries) == (21, 30)
