"""Every public method of ConversationMemory has an ``a``-prefixed coroutine twin."""

from __future__ import annotations

import inspect

import pytest

from tiermem import ConversationMemory

#: Public methods that do no database or model work, so have no async twin.
SYNC_ONLY = {"history", "on", "set_summarizer", "update_config", "with_config", "now", "layers"}


def _public_sync_methods() -> list[str]:
    names = []
    for name, member in inspect.getmembers(ConversationMemory, inspect.isfunction):
        if name.startswith("_") or name in SYNC_ONLY or inspect.iscoroutinefunction(member):
            continue
        if name.startswith("a") and hasattr(ConversationMemory, name[1:]):
            continue  # itself a twin of a method whose name starts with the letter a
        names.append(name)
    return sorted(names)


def test_the_method_list_is_not_empty() -> None:
    """The introspection finds the documented public methods."""
    names = _public_sync_methods()
    for expected in ("add_user_message", "get_messages", "compress", "import_session"):
        assert expected in names


@pytest.mark.parametrize("name", _public_sync_methods())
def test_async_twin_exists(name: str) -> None:
    """``a<name>`` exists, is a coroutine function and takes the same parameters."""
    twin = getattr(ConversationMemory, f"a{name}", None)
    assert twin is not None, f"{name} has no async twin"
    assert inspect.iscoroutinefunction(twin)
    sync_params = inspect.signature(getattr(ConversationMemory, name)).parameters
    async_params = inspect.signature(twin).parameters
    assert list(async_params) == list(sync_params)
    for key, param in sync_params.items():
        assert async_params[key].kind == param.kind, key
        assert async_params[key].default == param.default, key
