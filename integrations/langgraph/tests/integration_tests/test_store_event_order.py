"""The store's events of one key in commit order.

On PostgreSQL a DELETE takes its transaction id before it waits for the row's lock,
while the upsert of a put waits for it without one: a delete that queued behind a
put for the same key was delivered before that put, so a consumer mirroring the
store kept an item the store no longer held. Events of one document now come in
the order their writes committed.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from tiermem.testing import wait_for_feed

from tiermem_langgraph import TieredStore

StoreFactory = Callable[..., TieredStore]

NAMESPACE = ("users", "ada")


def mirrored_keys(store: TieredStore) -> set[tuple[tuple[str, ...], str]]:
    """The documents a consumer replaying the feed's document events holds."""
    held: set[tuple[tuple[str, ...], str]] = set()
    wait_for_feed(store.memory)  # on PostgreSQL other clients' transactions may delay it
    for event in store.memory.feed.follow(poll_interval=0.02, idle_timeout=0.05):
        address = (tuple(event.payload.get("namespace", ())), event.payload.get("key", ""))
        if event.kind == "document:put":
            held.add(address)
        elif event.kind == "document:deleted":
            held.discard(address)
    return held


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


@contextmanager
def _document_locked(url: str) -> Iterator[Callable[[int], bool]]:
    """Hold the (only) document's row lock from another connection (SQLite: the
    write lock); yields a test of whether ``n`` writers now queue behind it."""
    if url.startswith("sqlite"):
        database = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            database.execute("BEGIN IMMEDIATE")
            yield lambda _: True
            database.execute("COMMIT")
        finally:
            database.close()
        return
    engine = sa.create_engine(url)
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn, conn.begin(), admin.connect() as watch:
            conn.exec_driver_sql("SELECT 1 FROM tiermem_document FOR UPDATE")
            holder = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()

            def queued(count: int) -> bool:
                # Writers blocked by the holder, or by a writer blocked by it.
                blocked = {holder}
                for _ in range(count):
                    rows = watch.execute(
                        sa.text(
                            "SELECT pid FROM pg_stat_activity "
                            "WHERE pg_blocking_pids(pid) && CAST(:pids AS integer[])"
                        ),
                        {"pids": sorted(blocked)},
                    ).scalars()
                    blocked |= set(rows)
                return len(blocked) - 1 >= count

            yield queued
    finally:
        engine.dispose()
        admin.dispose()


def test_a_delete_queued_behind_a_put_is_delivered_after_it(
    url: str, make_store: StoreFactory
) -> None:
    """A put and then a delete of one key queue for its locked row, in that order:
    the put commits first, then the delete. The feed delivers them in that order, so
    a consumer replaying it holds what the store holds. (On SQLite writers queue for
    the database: whichever commits first, the feed follows.)"""
    store = make_store()
    store.put(NAMESPACE, "prefs", {"seat": "aisle"})
    errors: list[BaseException] = []

    def run(call: Callable[[], object]) -> threading.Thread:
        def target() -> None:
            try:
                call()
            except BaseException as exc:  # reported by the assertion below
                errors.append(exc)

        thread = threading.Thread(target=target)
        thread.start()
        return thread

    with _document_locked(url) as queued:
        put = run(lambda: store.put(NAMESPACE, "prefs", {"seat": "window"}))
        _until(lambda: queued(1), "the put waits")
        delete = run(lambda: store.delete(NAMESPACE, "prefs"))
        _until(lambda: queued(2), "the delete waits")
        if url.startswith("sqlite"):
            time.sleep(0.2)
    put.join()
    delete.join()
    assert errors == []

    held = {(NAMESPACE, "prefs")} if store.get(NAMESPACE, "prefs") is not None else set()
    assert mirrored_keys(store) == held
    if not url.startswith("sqlite"):
        assert held == set()  # the delete committed last


def test_concurrent_writers_of_few_keys_mirror_the_store(make_store: StoreFactory) -> None:
    """Threads putting and deleting a few shared keys: a consumer replaying the
    feed's document events ends holding exactly the documents the store holds."""
    store = make_store()
    keys = [f"k{number}" for number in range(3)]
    errors: list[BaseException] = []

    def writer(number: int) -> None:
        try:
            for turn in range(20):
                key = keys[(number + turn) % len(keys)]
                if (number + turn) % 3 == 0:
                    store.delete(NAMESPACE, key)
                else:
                    store.put(NAMESPACE, key, {"writer": number, "turn": turn})
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(number,)) for number in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []

    held = {(NAMESPACE, key) for key in keys if store.get(NAMESPACE, key) is not None}
    assert mirrored_keys(store) == held
