"""Floors: the least work a token-aware memory can do, as a lower bound for the others.

Both floors count each message once with tiktoken and keep the newest messages
that fit the budget; they use nothing but the standard library and tiktoken.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from pathlib import Path

from base import MAX_TOKENS, SESSION_ID, Contender
from corpus import MESSAGE_OVERHEAD_TOKENS, count_text_tokens


class TiktokenFloor(Contender[list[str]]):
    """In memory: count each message with tiktoken, keep a deque under the budget."""

    def __init__(self) -> None:
        """Start an empty buffer."""
        self._buffer: deque[tuple[str, int]] = deque()
        self._total = 0

    def _push(self, text: str) -> None:
        """Append ``text``, then drop the oldest messages while over the budget."""
        tokens = count_text_tokens(text) + MESSAGE_OVERHEAD_TOKENS
        self._buffer.append((text, tokens))
        self._total += tokens
        while self._total > MAX_TOKENS and len(self._buffer) > 1:
            self._total -= self._buffer.popleft()[1]

    def step(self, human: str, ai: str) -> list[str]:
        """Count and buffer both messages; the context is the buffer's texts."""
        self._push(human)
        self._push(ai)
        return [text for text, _ in self._buffer]

    def texts(self, context: list[str]) -> list[str]:
        """The context already is the texts."""
        return context


class SqliteFloor(Contender[list[str]]):
    """On disk: raw sqlite3 insert of both messages, then read the newest that fit.

    One transaction per exchange (WAL, ``synchronous=NORMAL``). Token counts
    are computed once with tiktoken and stored; the read walks the
    ``(session, id)`` index backwards only as far as the budget reaches.
    """

    _INSERT = "INSERT INTO messages (session, role, content, tokens) VALUES (?, ?, ?, ?)"
    _READ = "SELECT content, tokens FROM messages WHERE session = ? ORDER BY id DESC"

    def __init__(self, workdir: Path) -> None:
        """Create ``workdir/floor.db`` and its one table."""
        self._conn = sqlite3.connect(workdir / "floor.db", isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(
            "CREATE TABLE messages (id INTEGER PRIMARY KEY, session TEXT NOT NULL,"
            " role TEXT NOT NULL, content TEXT NOT NULL, tokens INTEGER NOT NULL)"
        )
        self._conn.execute("CREATE INDEX messages_session ON messages (session, id)")

    def _insert(self, human: str, ai: str) -> None:
        """Insert both messages with their token counts in one transaction."""
        rows = [
            (SESSION_ID, role, text, count_text_tokens(text) + MESSAGE_OVERHEAD_TOKENS)
            for role, text in (("user", human), ("assistant", ai))
        ]
        self._conn.execute("BEGIN")
        self._conn.executemany(self._INSERT, rows)
        self._conn.execute("COMMIT")

    def _read(self) -> list[str]:
        """Return the newest messages whose stored counts fit the budget, oldest first."""
        picked: list[str] = []
        total = 0
        for content, tokens in self._conn.execute(self._READ, (SESSION_ID,)):
            if picked and total + tokens > MAX_TOKENS:
                break
            picked.append(content)
            total += tokens
        picked.reverse()
        return picked

    def step(self, human: str, ai: str) -> list[str]:
        """Insert the exchange and read the context back."""
        self._insert(human, ai)
        return self._read()

    def texts(self, context: list[str]) -> list[str]:
        """The context already is the texts."""
        return context

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()
