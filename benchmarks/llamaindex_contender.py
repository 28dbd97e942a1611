"""llama-index-core ``Memory`` on a SQLite file, the other incumbent with a database."""

from __future__ import annotations

import asyncio
from pathlib import Path

from base import MAX_TOKENS, SESSION_ID, Contender
from corpus import encoding
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory


class LlamaIndexContender(Contender[list[ChatMessage]]):
    """``Memory.from_defaults(token_limit=2000)`` on ``sqlite+aiosqlite``, cl100k tokenizer.

    Driven through its async API on one long-lived event loop, which is
    cheaper than its sync wrappers (they start a loop per call). Its default
    ``chat_history_token_ratio`` of 0.7 is kept, so it flushes the active
    queue at about 1,400 tokens.
    """

    def __init__(self, workdir: Path) -> None:
        """Open the memory on ``workdir/llama_index.db``."""
        self._loop = asyncio.new_event_loop()
        self._memory = Memory.from_defaults(
            session_id=SESSION_ID,
            token_limit=MAX_TOKENS,
            tokenizer_fn=encoding().encode,
            async_database_uri=f"sqlite+aiosqlite:///{workdir / 'llama_index.db'}",
        )

    async def _astep(self, human: str, ai: str) -> list[ChatMessage]:
        """Put both messages, then get the context."""
        await self._memory.aput(ChatMessage(role="user", content=human))
        await self._memory.aput(ChatMessage(role="assistant", content=ai))
        return list(await self._memory.aget())

    def step(self, human: str, ai: str) -> list[ChatMessage]:
        """Run one exchange on the contender's event loop."""
        return self._loop.run_until_complete(self._astep(human, ai))

    def texts(self, context: list[ChatMessage]) -> list[str]:
        """Return the message texts."""
        return [m.content or "" for m in context]

    def close(self) -> None:
        """Close the event loop."""
        self._loop.close()
