"""Normal events of a busy memory are not logged as warnings: a merge skipped because
another worker is compressing the session (DEBUG), a summary refused because it is not
shorter than its input (INFO). A summarizer that raises is still a warning."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.conftest import MemoryFactory
from tiermem import MemoryConfig
from tiermem._storage import sessions, summaries
from tiermem.errors import CompressionInProgress, SummaryNotShorter
from tiermem.testing import FakeSummarizer

SMALL = MemoryConfig(max_entries=6, recent_window=2, min_entries_to_compress=2)


def tiermem_records(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    """tiermem's log records whose message holds ``text``."""
    return [r for r in caplog.records if r.name.startswith("tiermem") and text in r.getMessage()]


def test_a_summary_not_shorter_than_its_input_is_logged_at_info(
    make_memory: MemoryFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """An automatic compression whose summary would not save a token is an INFO line;
    the entries stay active, the append succeeds."""
    memory = make_memory(config=SMALL, summarizer=lambda prompt: "long " * 4_000)
    with caplog.at_level(logging.DEBUG, logger="tiermem"):
        for n in range(8):
            memory.add_user_message("s", f"turn {n}")
    records = tiermem_records(caplog, "summary not shorter than its input")
    assert records and {r.levelno for r in records} == {logging.INFO}
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert memory.get_stats("s").compressed_entries == 0


def test_a_merge_skipped_for_another_worker_is_logged_at_debug(
    make_memory: MemoryFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Another worker takes the session's claim right after a round commits: the merge
    that round would start is skipped at DEBUG, and the round's summary stands."""
    config = SMALL.replace(max_tokens=2_000, summary_share=0.01)  # two summaries merge
    memory = make_memory(config=config, summarizer=FakeSummarizer())
    for n in range(8):  # a first summary
        memory.add_user_message("s", f"turn {n} about the ferry timetable")
    assert memory.get_stats("s").summaries == 1

    def another_worker_claims(sender: Any, **kwargs: Any) -> None:
        def claim(conn: Any) -> None:
            session = sessions.get_session(conn, memory.project, "s")
            assert session is not None
            summaries.claim(conn, session, "another-worker", memory.now(), 60.0)

        memory.database.run(claim)

    disconnect = memory.on("compressed", another_worker_claims)
    with caplog.at_level(logging.DEBUG, logger="tiermem"):
        for n in range(8, 14):
            memory.add_user_message("s", f"turn {n} about the ferry timetable")
    disconnect()
    records = tiermem_records(caplog, "being compressed by another worker")
    assert records and {r.levelno for r in records} == {logging.DEBUG}
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert memory.get_stats("s").summaries == 2  # the round stands, unmerged


def test_a_summarizer_that_raises_is_still_a_warning(
    make_memory: MemoryFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """A model that fails is an operational problem: WARNING, as before."""

    def broken(prompt: str) -> str:
        raise RuntimeError("provider down")

    memory = make_memory(config=SMALL, summarizer=broken)
    with caplog.at_level(logging.DEBUG, logger="tiermem"):
        for n in range(8):
            memory.add_user_message("s", f"turn {n}")
    records = tiermem_records(caplog, "provider down")
    assert records and {r.levelno for r in records} == {logging.WARNING}


def test_the_levels_are_the_errors_own() -> None:
    """Code that carries on after an error logs it at the error class's level."""
    assert CompressionInProgress.log_level == logging.DEBUG
    assert SummaryNotShorter.log_level == logging.INFO
