"""Signal subscribers: a JSON-lines audit log and live counters.

Needs only tiermem (``make demo`` installs it, as does ``make dist`` then
``pip install --find-links dist 'tiermem[offline]'``).
Run ``python examples/subscriber.py``. Receivers are connected with ``mem.on`` (held
strongly, so lambdas and closures work) to ``entry:added``, ``compressed``,
``compression_failed`` and ``session:cleared``. A summarizer that fails on its first
call shows that a failed compression changes nothing and is reported, and the next
attempt succeeds. The audit log is written next to the database file
(``subscriber.audit.jsonl`` by default).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from tiermem import ConversationMemory, MemoryConfig
from tiermem.errors import SummarizationError

DEFAULT_URL = "sqlite:///subscriber.db"
SESSION = "support-42"
SIGNALS = ("entry:added", "compressed", "compression_failed", "session:cleared")


class FlakySummarizer:
    """A summarizer that fails on its first call (an overloaded model), then works."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, prompt: str) -> str:
        """Summarize the prompt's conversation as its first and last lines."""
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("model overloaded, try again")
        lines = prompt.rsplit("Conversation:\n", 1)[-1].splitlines()
        return f"{len(lines)} lines, from {lines[0][:40]!r} to {lines[-1][:40]!r}"


def audit_path(url: str) -> Path:
    """Where the audit log goes: beside a SQLite file, else the working directory.

    Args:
        url: The memory's SQLAlchemy URL.

    Returns:
        ``<database stem>.audit.jsonl``.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        return Path(str(parsed.database)).with_suffix(".audit.jsonl")
    return Path("tiermem.audit.jsonl")


def _details(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The JSON-friendly part of a signal's keyword arguments."""
    if "entry" in kwargs:
        entry = kwargs["entry"]
        return {"seq": entry.seq, "role": entry.role, "tokens": entry.token_count}
    if "result" in kwargs:
        result = kwargs["result"]
        return {"entries": result.entries_compressed, "tokens_saved": result.tokens_saved}
    if "error" in kwargs:
        return {"error": type(kwargs["error"]).__name__, "message": str(kwargs["error"])}
    return {"entries_removed": kwargs.get("entries_removed")}


def subscribe(mem: ConversationMemory, log: Path, counts: Counter[str]) -> list[Callable[[], None]]:
    """Connect the audit log and the counters to every signal of interest.

    Args:
        mem: The memory whose signals are observed.
        log: The JSON-lines file to append to.
        counts: Incremented per signal name.

    Returns:
        The disconnect callables.
    """

    def receiver(name: str) -> Callable[..., None]:
        def on_signal(sender: ConversationMemory, **kwargs: Any) -> None:
            counts[name] += 1
            record = {"at": sender.now().isoformat(), "signal": name}
            record["session_id"] = kwargs["session_id"]
            with log.open("a", encoding="utf-8") as out:
                out.write(json.dumps({**record, **_details(kwargs)}) + "\n")

        return on_signal

    return [mem.on(name, receiver(name)) for name in SIGNALS]


def main(url: str | None = None) -> None:
    """Run a short support conversation with subscribers attached.

    Args:
        url: A SQLAlchemy URL for the memory (default: ``subscriber.db`` here).
    """
    url = url or DEFAULT_URL
    log, counts = audit_path(url), Counter[str]()
    log.unlink(missing_ok=True)  # this run's log only: the same output on every run
    config = MemoryConfig(auto_compress=False, recent_window=2, min_entries_to_compress=2)
    with ConversationMemory(url=url, config=config, summarizer=FlakySummarizer()) as mem:
        disconnects = subscribe(mem, log, counts)
        for i in range(4):
            mem.add_user_message(SESSION, f"My router drops Wi-Fi every {i + 2} hours.")
            mem.add_assistant_message(SESSION, f"Try step {i + 1}: update the firmware.")
        try:
            mem.compress(SESSION, force=True)
        except SummarizationError as exc:
            print(f"compression failed, nothing changed: {exc}")
        result = mem.compress(SESSION, force=True)
        print(f"compressed {result.entries_compressed if result else 0} entries on retry")
        mem.clear_session(SESSION)
        for disconnect in disconnects:
            disconnect()
    print(f"audit log: {log} ({len(log.read_text(encoding='utf-8').splitlines())} events)")
    for name in SIGNALS:
        print(f"  {name:<20} {counts[name]}")


if __name__ == "__main__":
    main()
