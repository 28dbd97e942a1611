"""langchain v1's ``SummarizationMiddleware`` tests of its public configuration
contract, with the class replaced by ``TieredMemoryMiddleware``.

The test file comes from the pinned langchain sdist (``tests/conformance/fetch.py``).
Only the tests listed in ``ADOPTED`` run: the others exercise
``SummarizationMiddleware``'s private methods (``_create_summary``,
``_find_safe_cutoff``, ``_get_profile_limits``...), its model-written summary and
provider usage metadata, which ``TieredMemoryMiddleware`` does not have by design
(see the integration README).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from tiermem_agents import TieredMemoryMiddleware

from tiermem import MemoryConfig

from ..conftest import MemoryFactory
from ._peers import adopt, load

PROJECT = "langchain"

#: The peer tests of the public configuration contract.
ADOPTED = (
    "test_summarization_middleware_missing_profile",
    "test_summarization_middleware_validation_edge_cases",
    "test_trigger_validation_errors",
    "test_trigger_copies_mutable_inputs",
)

#: Documented, deliberate differences (mirrored in the integration README).
DIFFERENCES: dict[str, str] = {
    "test_trigger_copies_mutable_inputs": (
        "calls before_model outside an agent graph: TieredMemoryMiddleware reads its "
        "session id from the runnable config, which only exists inside a run"
    ),
}

_model = load(PROJECT, "tests/unit_tests/agents/model.py", "peer_agents_model", {})
PEER = load(
    PROJECT,
    "tests/unit_tests/agents/middleware/implementations/test_summarization.py",
    "peer_agents_summarization",
    {"tests.unit_tests.agents.model": _model},
)


@pytest.fixture(autouse=True)
def _substitute(make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every SummarizationMiddleware a peer test builds is a TieredMemoryMiddleware."""

    def build(
        model: BaseChatModel, *, keep: Any = ("messages", 20), **fields: Any
    ) -> TieredMemoryMiddleware:
        memory = make_memory(config=MemoryConfig(auto_compress=False))
        return TieredMemoryMiddleware(memory, model=model, keep=keep, **fields)

    monkeypatch.setattr(PEER, "SummarizationMiddleware", build)


globals().update(adopt(PEER, {name: "" for name in vars(PEER) if name not in ADOPTED}, DIFFERENCES))
