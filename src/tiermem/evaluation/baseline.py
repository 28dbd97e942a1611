"""A plain BM25 baseline: SQLite FTS5 in memory, from the standard library.

Every turn is a row of an FTS5 table; a question is reduced to its words, common
English stopwords dropped, OR-ed, and ranked by FTS5's ``bm25()`` within its
conversation. It is what a developer gets from SQLite with no work, so a search
worth shipping should beat it.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence

from .dataset import Dataset, Question

__all__ = ["STOPWORDS", "BM25Baseline", "query_words"]

#: Common English function words, dropped from questions (never from the index).
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    few for from further had has have having he her here hers herself him himself his
    how i if in into is it its itself just me more most my myself no nor not now of off
    on once only or other our ours ourselves out over own same she should so some such
    than that the their theirs them themselves then there these they this those through
    to too under until up very was we were what when where which while who whom why will
    with would you your yours yourself yourselves s t d ll m re ve""".split()
)
_WORD = re.compile(r"[^\W_]+")


def query_words(question: str) -> list[str]:
    """The distinct lower-cased words of ``question`` that are not stopwords, in order."""
    words: list[str] = []
    for word in _WORD.findall(question.lower()):
        if word not in STOPWORDS and word not in words:
            words.append(word)
    return words


class BM25Baseline:
    """Turns of a dataset in an in-memory FTS5 table with ``tokenizer``.

    Args:
        dataset: the conversations to index.
        tokenizer: an FTS5 tokenizer spec (``porter unicode61`` stems English words;
            ``unicode61`` is FTS5's default).
    """

    def __init__(self, dataset: Dataset, tokenizer: str = "porter unicode61") -> None:
        self.tokenizer = tokenizer
        self._db = sqlite3.connect(":memory:")
        # The tokenizer spec is one of ours, never user text: it is safe to format.
        self._db.execute(
            "CREATE VIRTUAL TABLE turns USING fts5("
            f"conversation UNINDEXED, turn UNINDEXED, content, tokenize='{tokenizer}')"
        )
        rows = [
            (conversation.id, turn.id, turn.content)
            for conversation in dataset.conversations
            for session in conversation.sessions
            for turn in session.turns
        ]
        with self._db:
            self._db.executemany("INSERT INTO turns VALUES (?, ?, ?)", rows)

    def search(self, question: str, conversation: str, k: int) -> list[str]:
        """The ids of the best ``k`` turns of ``conversation`` for ``question``."""
        words = query_words(question)
        if not words:
            return []
        # Each word is quoted: FTS5 reads it as a string, never as query syntax.
        match = " OR ".join('"' + word.replace('"', '""') + '"' for word in words)
        rows: Sequence[tuple[str]] = self._db.execute(
            "SELECT turn FROM turns WHERE turns MATCH ? AND conversation = ? "
            "ORDER BY bm25(turns) LIMIT ?",
            (match, conversation, k),
        ).fetchall()
        return [row[0] for row in rows]

    def ask(self, question: Question, k: int) -> list[str]:
        """:meth:`search` for a dataset question, within its conversation."""
        return self.search(question.question, question.conversation, k)

    def close(self) -> None:
        """Release the in-memory database."""
        self._db.close()
