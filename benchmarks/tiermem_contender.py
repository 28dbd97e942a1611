"""tiermem itself, on a SQLite file and on PostgreSQL."""

from __future__ import annotations

import uuid

from base import MAX_TOKENS, SESSION_ID, Contender
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from sqlalchemy import Engine, create_engine, text

from tiermem import ConversationMemory, MemoryConfig
from tiermem.testing import FakeSummarizer

POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
"""The local server the PostgreSQL contender uses, in a fresh schema per run."""


class TiermemContender(Contender[list[BaseMessage]]):
    """``ConversationMemory`` with ``max_tokens=2000`` and the fake summariser."""

    def __init__(self, url: str | None = None, engine: Engine | None = None) -> None:
        """Open the memory on the database ``url`` or on an existing ``engine``."""
        config = MemoryConfig(max_tokens=MAX_TOKENS)
        # Keeping every prompt (FakeSummarizer's default, for tests) would add some
        # 9 MB of the fake model's own to tiermem's peak RSS by 10,000 turns.
        summarizer = FakeSummarizer(record_calls=False)
        if engine is not None:
            self._memory = ConversationMemory(engine=engine, config=config, summarizer=summarizer)
        else:
            self._memory = ConversationMemory(url=url, config=config, summarizer=summarizer)
        # Creating the tables is setup, as every other contender's constructor does
        # its own; tiermem would otherwise do it lazily inside the first timed turn.
        self._memory.database.ensure_schema()

    def step(self, human: str, ai: str) -> list[BaseMessage]:
        """Store the exchange and get the next context: ``add_and_get_messages``, one
        transaction unless the exchange triggers a compression."""
        return self._memory.add_and_get_messages(SESSION_ID, [HumanMessage(human), AIMessage(ai)])

    def texts(self, context: list[BaseMessage]) -> list[str]:
        """Return the message texts."""
        return [m.text for m in context]

    def close(self) -> None:
        """Close the memory."""
        self._memory.close()


class TiermemPostgresContender(TiermemContender):
    """tiermem on PostgreSQL, in a fresh schema that is dropped afterwards."""

    def __init__(self, url: str = POSTGRES_URL) -> None:
        """Create a schema and an engine whose ``search_path`` is that schema."""
        self._schema = f"bench_{uuid.uuid4().hex[:12]}"
        self._admin = create_engine(url)
        with self._admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{self._schema}"'))
        self._engine = create_engine(url, connect_args={"options": f"-csearch_path={self._schema}"})
        try:
            super().__init__(engine=self._engine)
        except BaseException:
            self._drop_schema()
            raise

    def _drop_schema(self) -> None:
        """Dispose the engine and drop the schema with everything in it."""
        self._engine.dispose()
        with self._admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{self._schema}" CASCADE'))
        self._admin.dispose()

    def close(self) -> None:
        """Close the memory, then drop the schema."""
        try:
            super().close()
        finally:
            self._drop_schema()
