"""``setup()`` / ``asetup()``, as LangGraph users call them on their stores: they create
tiermem's tables when missing, are idempotent, and leave existing items alone."""

from __future__ import annotations

import sqlalchemy as sa

from tiermem_langgraph import TieredStore


def _has_documents_table(store: TieredStore) -> bool:
    return sa.inspect(store.memory.engine).has_table("tiermem_document")


def test_setup_creates_the_tables_once(url: str) -> None:
    """On a fresh database setup() creates the tables; calling it again, from the same
    store or another, changes nothing and keeps the items."""
    with TieredStore.from_url(url) as store:
        assert not _has_documents_table(store)
        store.setup()
        assert _has_documents_table(store)
        store.put(("users", "ada"), "seat", {"text": "aisle"})
        store.setup()
    with TieredStore.from_url(url) as again:
        again.setup()
        item = again.get(("users", "ada"), "seat")
        assert item is not None and item.value == {"text": "aisle"}


async def test_asetup_creates_the_tables_once(url: str) -> None:
    """The async twin does the same from an event loop."""
    with TieredStore.from_url(url) as store:
        assert not _has_documents_table(store)
        await store.asetup()
        assert _has_documents_table(store)
        await store.aput(("users", "ada"), "seat", {"text": "aisle"})
        await store.asetup()
        item = await store.aget(("users", "ada"), "seat")
        assert item is not None and item.value == {"text": "aisle"}
