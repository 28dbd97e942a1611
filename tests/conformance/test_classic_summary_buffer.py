"""langchain-classic's ``ConversationSummaryBufferMemory`` tests, with the class
replaced by ``TieredConversationMemory``, built with the same ``llm`` and
``max_token_limit`` keywords, on SQLite and PostgreSQL.

The test files come from the pinned langchain-classic sdist (``tests/conformance/fetch.py``).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from langchain_core.language_models import BaseLanguageModel
from tiermem_classic import TieredConversationMemory

from ..conftest import MemoryFactory
from ._peers import adopt, load

PROJECT = "langchain-classic"

#: Documented, deliberate differences (mirrored in the integration README).
_BUDGET = (
    "max_token_limit=5: tiermem's max_tokens bounds the whole rendered context in tiktoken "
    "tokens, message framing and summary included, so it holds no message; and its summary "
    "message starts with a header ('Summary of the earlier conversation:')"
)
DIFFERENCES: dict[str, str] = {
    "test_summary_buffer_memory_summary": _BUDGET,
    "test_summary_buffer_memory_summary_async": _BUDGET,
}

_fake_llm = load(PROJECT, "tests/unit_tests/llms/fake_llm.py", "peer_classic_fake_llm", {})
PEER = load(
    PROJECT,
    "tests/unit_tests/chains/test_summary_buffer_memory.py",
    "peer_classic_summary_buffer",
    {"tests.unit_tests.llms.fake_llm": _fake_llm},
)
_sessions = itertools.count()


@pytest.fixture(autouse=True)
def _substitute(make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ConversationSummaryBufferMemory a peer test builds is a tiermem session."""

    def build(
        *, llm: BaseLanguageModel[Any], max_token_limit: int = 2000, **fields: Any
    ) -> TieredConversationMemory:
        session = f"peer-{next(_sessions)}"
        return TieredConversationMemory(
            memory=make_memory(),
            session_id=session,
            llm=llm,
            max_token_limit=max_token_limit,
            **fields,
        )

    monkeypatch.setattr(PEER, "ConversationSummaryBufferMemory", build)


globals().update(adopt(PEER, {}, DIFFERENCES))
