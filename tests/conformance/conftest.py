"""Markers the peers' test files apply when they are imported."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Register LangChain's ``requires`` marker, so its test files import."""
    config.addinivalue_line("markers", "requires(module): LangChain's optional-dependency mark")
    # langgraph-checkpoint-sqlite's TTL tests retry timing-sensitive cases with a
    # retry plugin; here their sleeps move a clock instead, so one run decides.
    config.addinivalue_line("markers", "flaky(retries): a retry plugin's mark (not installed)")
