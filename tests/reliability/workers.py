"""Worker bodies run in spawned processes (module-level, so ``spawn`` can import them).

Each worker opens its own memory on the :class:`~.harness.StoreSpec`, reports
through an append-only JSON-lines log and lets unexpected errors end the
process with a non-zero exit code, which :func:`~.harness.join_all` turns into
a test failure.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from tiermem import ConversationMemory, MemoryConfig
from tiermem.errors import TiermemError
from tiermem.testing import FakeSummarizer

from .harness import StoreSpec, write_log

#: A config that never compresses on its own (tests call compress() explicitly).
NO_AUTO = MemoryConfig(auto_compress=False, recent_window=2, min_entries_to_compress=2)
#: A budget no test session reaches: get_messages then shows every active message.
WHOLE = NO_AUTO.replace(max_tokens=2**40)
BARRIER_TIMEOUT = 60.0


def open_memory(
    spec: StoreSpec,
    *,
    config: MemoryConfig = NO_AUTO,
    summarizer: Any = None,
    clock: Callable[[], datetime] | None = None,
    lock_timeout: float = 30.0,
) -> ConversationMemory:
    """A memory on the store with its own engine."""
    return ConversationMemory(
        engine=spec.engine(),
        config=config,
        summarizer=summarizer,
        clock=clock,
        lock_timeout=lock_timeout,
    )


@contextmanager
def opened(spec: StoreSpec, **kwargs: Any) -> Iterator[ConversationMemory]:
    """:func:`open_memory` closed (engine disposed) at the end of the block."""
    memory = open_memory(spec, **kwargs)
    try:
        yield memory
    finally:
        memory.close()


def tool_group(tag: str) -> list[BaseMessage]:
    """An assistant message with two tool calls followed by both results."""
    return [
        AIMessage(
            content=f"{tag}:call",
            tool_calls=[
                {"name": "lookup", "args": {"tag": tag}, "id": f"{tag}-a"},
                {"name": "lookup", "args": {"tag": tag, "n": 2}, "id": f"{tag}-b"},
            ],
        ),
        ToolMessage(content=f"{tag}:ra", tool_call_id=f"{tag}-a", name="lookup"),
        ToolMessage(content=f"{tag}:rb", tool_call_id=f"{tag}-b", name="lookup"),
    ]


def op_messages(tag: str, index: int, *, padding: int = 0) -> list[BaseMessage]:
    """Operation ``index`` of a writer: every fifth one a tool group, else one message."""
    if index % 5 == 4:
        return tool_group(f"{tag}.{index}")
    return [HumanMessage(content=f"{tag}.{index}|" + "x" * padding)]


def tag_of(message: BaseMessage) -> str:
    """The tag a worker wrote into a message's text."""
    return str(message.content).split("|", 1)[0]


def _fail(log_path: str, where: str) -> None:
    write_log(log_path, {"fatal": where, "trace": traceback.format_exc()})


# --------------------------------------------------------------------------- crash workers


def append_one(spec: StoreSpec, session_id: str, text: str) -> None:
    """Append one message (the parent pauses it at a failpoint and kills it)."""
    open_memory(spec).add_user_message(session_id, text)


def append_group(spec: StoreSpec, session_id: str, tag: str) -> None:
    """Append one tool group atomically (paused and killed by the parent)."""
    open_memory(spec).add_messages(session_id, tool_group(tag))


def append_forever(
    spec: StoreSpec, session_id: str, tag: str, log_path: str, ready: Event, go: Event
) -> None:
    """Warm up, then append operations as fast as possible, logging each that returned."""
    memory = open_memory(spec)
    memory.list_sessions()
    ready.set()
    go.wait(60)
    index = 0
    while True:
        entries = memory.add_messages(session_id, op_messages(tag, index))
        write_log(log_path, {"i": index, "seqs": [e.seq for e in entries]})
        index += 1


def compress_one(
    spec: StoreSpec,
    session_id: str,
    log_path: str,
    mode: str = "ok",
    claim_ttl: float = 120.0,
    summary_log: str | None = None,
    delay: float = 0.0,
) -> None:
    """Compress once with a FakeSummarizer in ``mode``; log the outcome."""
    fake = FakeSummarizer(mode=mode, delay=delay, log_path=summary_log)
    config = NO_AUTO.replace(claim_ttl=claim_ttl)
    memory = open_memory(spec, config=config, summarizer=fake)
    try:
        result = memory.compress(session_id, force=True)
    except TiermemError as exc:
        write_log(log_path, {"outcome": type(exc).__name__, "t": time.time()})
        return
    outcome = "none" if result is None else "ok"
    summary = None if result is None else result.summary.id
    write_log(log_path, {"outcome": outcome, "summary": summary, "t": time.time()})


def compress_until_done(
    spec: StoreSpec, session_id: str, log_path: str, claim_ttl: float, deadline: float
) -> None:
    """Try to compress every 50 ms until it succeeds; log every attempt with its time."""
    memory = open_memory(
        spec, config=NO_AUTO.replace(claim_ttl=claim_ttl), summarizer=FakeSummarizer()
    )
    while time.time() < deadline:
        started = time.time()
        try:
            result = memory.compress(session_id, force=True)
        except TiermemError as exc:
            write_log(log_path, {"outcome": type(exc).__name__, "t": started})
            time.sleep(0.05)
            continue
        write_log(log_path, {"outcome": "ok" if result else "none", "t": started})
        return
    raise SystemExit(3)


def import_file(spec: StoreSpec, path: str, log_path: str) -> None:
    """Import an exported session from ``path``."""
    open_memory(spec).import_session(Path(path).read_bytes())
    write_log(log_path, {"outcome": "ok"})


def prune_now(spec: StoreSpec, log_path: str) -> None:
    """Prune the expired sessions (the parent pauses it at prune.after_select)."""
    removed = open_memory(spec).prune_expired()
    write_log(log_path, {"removed": removed})


def append_timed(
    spec: StoreSpec, session_id: str, log_path: str, lock_timeout: float, ready: Event, go: Event
) -> None:
    """Warm up, wait for ``go``, then log a start time, append one message, and log
    the outcome and the end time."""
    memory = open_memory(spec, lock_timeout=lock_timeout)
    memory.list_sessions()
    ready.set()
    go.wait(60)
    write_log(log_path, {"event": "start", "t": time.time()})
    try:
        entry = memory.add_user_message(session_id, "contender")
    except TiermemError as exc:
        write_log(log_path, {"event": "end", "outcome": type(exc).__name__, "t": time.time()})
        return
    write_log(log_path, {"event": "end", "outcome": "ok", "seq": entry.seq, "t": time.time()})


# --------------------------------------------------------------------------- concurrency


def concurrent_appender(
    spec: StoreSpec,
    session_id: str,
    worker: int,
    count: int,
    log_path: str,
    barrier: Barrier,
) -> None:
    """Append ``count`` operations (10% tool groups, mixed sizes) after the barrier."""
    try:
        memory = open_memory(spec)
        memory.list_sessions()
        barrier.wait(BARRIER_TIMEOUT)
        for index in range(count):
            # Every tenth operation is a tool group (index % 10 == 4), sizes 0..1.5 kB.
            messages = (
                tool_group(f"w{worker}.{index}")
                if index % 10 == 4
                else [HumanMessage(content=f"w{worker}.{index}|" + "x" * (index * 37 % 1500))]
            )
            started = time.time()
            try:
                entries = memory.add_messages(session_id, messages)
            except TiermemError as exc:
                write_log(log_path, {"i": index, "error": type(exc).__name__, "msg": str(exc)})
                continue
            write_log(
                log_path,
                {"i": index, "seqs": [e.seq for e in entries], "t0": started, "t1": time.time()},
            )
    except Exception:
        _fail(log_path, "appender")
        raise


def prefix_reader(
    spec: StoreSpec, session_id: str, log_path: str, barrier: Barrier, stop: Event
) -> None:
    """Read ``get_messages`` in a loop; log each snapshot's tags (compactly, by hash)."""
    import hashlib

    try:
        memory = open_memory(spec, config=WHOLE)
        memory.list_sessions()
        barrier.wait(BARRIER_TIMEOUT)
        while not stop.is_set():
            tags = [tag_of(m) for m in memory.get_messages(session_id)]
            digest = hashlib.sha256("\n".join(tags).encode()).hexdigest()
            write_log(log_path, {"n": len(tags), "sha": digest})
            time.sleep(0.005)
    except Exception:
        _fail(log_path, "reader")
        raise


def compress_loop(
    spec: StoreSpec,
    session_ids: Sequence[str],
    log_path: str,
    barrier: Barrier,
    stop: Event,
) -> None:
    """Compress (and prune) every session in turn until stopped; log outcomes."""
    try:
        config = NO_AUTO.replace(max_tokens=400, recent_window=3)
        memory = open_memory(spec, config=config, summarizer=FakeSummarizer())
        memory.list_sessions()
        barrier.wait(BARRIER_TIMEOUT)
        while not stop.is_set():
            for session_id in session_ids:
                try:
                    result = memory.compress(session_id)
                except TiermemError as exc:
                    write_log(log_path, {"s": session_id, "outcome": type(exc).__name__})
                    continue
                if result is not None:
                    write_log(log_path, {"s": session_id, "outcome": "ok"})
            memory.prune_expired()
    except Exception:
        _fail(log_path, "compressor")
        raise


def compress_at_barrier(
    spec: StoreSpec, session_id: str, log_path: str, summary_log: str, barrier: Barrier
) -> None:
    """Compress one session right after the barrier with a summarizer that takes 1 s."""
    try:
        fake = FakeSummarizer(mode="sleep", delay=1.0, log_path=summary_log)
        memory = open_memory(spec, summarizer=fake)
        memory.list_sessions()
        barrier.wait(BARRIER_TIMEOUT)
        try:
            result = memory.compress(session_id, force=True)
        except TiermemError as exc:
            write_log(log_path, {"outcome": type(exc).__name__})
            return
        write_log(log_path, {"outcome": "ok" if result else "none"})
    except Exception:
        _fail(log_path, "compress_at_barrier")
        raise


def gated_compress(
    spec: StoreSpec, session_id: str, log_path: str, summary_log: str, gate: str
) -> None:
    """Compress with a summarizer that blocks until the file ``gate`` exists."""
    release = threading.Event()

    def watch() -> None:
        while not os.path.exists(gate):
            time.sleep(0.01)
        release.set()

    threading.Thread(target=watch, daemon=True).start()
    fake = FakeSummarizer(mode="sleep", delay=120.0, release=release, log_path=summary_log)
    memory = open_memory(spec, summarizer=fake)
    try:
        result = memory.compress(session_id, force=True, keep=0)
    except TiermemError as exc:
        write_log(log_path, {"outcome": type(exc).__name__})
        return
    write_log(log_path, {"outcome": "ok" if result else "none"})


def first_start(spec: StoreSpec, how: str, worker: int, log_path: str, barrier: Barrier) -> None:
    """On a fresh store, at the barrier: create the schema (``how``: memory,
    create_tables or upgrade); then, at the barrier again, append to one new session."""
    try:
        barrier.wait(BARRIER_TIMEOUT)
        if how == "memory":
            open_memory(spec).add_user_message(f"s{worker}", "hello")
        elif how == "create_tables":
            from tiermem import create_tables

            engine = spec.engine()
            create_tables(engine)
            engine.dispose()
        else:
            from tiermem._storage.migrations import upgrade

            upgrade(spec.url)
        write_log(log_path, {"worker": worker, "outcome": "ok"})
        with opened(spec) as memory:
            memory.list_sessions()
            barrier.wait(BARRIER_TIMEOUT)
            memory.add_user_message("new-id", f"w{worker}")
        write_log(log_path, {"worker": worker, "outcome": "appended"})
    except Exception as exc:
        write_log(log_path, {"worker": worker, "outcome": repr(exc)})
        raise


def memory_footprint(spec: StoreSpec, log_path: str) -> None:
    """Store, count and read back three 10 MB entries; log times and peak RSS."""
    import base64
    import resource

    from tiermem.tokens import TokenCounter

    memory = open_memory(spec)
    counter = TokenCounter()
    blob = base64.b64encode(os.urandom(7_500_000)).decode()
    prose = ("lorem ipsum dolor sit amet, consectetur adipiscing elit " * 200_000)[:10_000_000]
    inputs: list[tuple[str, BaseMessage]] = [
        ("prose", HumanMessage(content=prose)),
        ("run", HumanMessage(content="a" * 10_000_000)),
        ("base64", HumanMessage(content=blob)),
        (
            "image",
            HumanMessage(
                content=[
                    {"type": "text", "text": "what is this"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + blob}},
                ]
            ),
        ),
    ]
    for name, message in inputs:
        started = time.monotonic()
        tokens = counter.count_message(message)
        counted = time.monotonic() - started
        entry = memory.add_message(f"big-{name}", message)
        stored = time.monotonic() - started
        back = memory.get_entries(f"big-{name}")[0].message
        write_log(
            log_path,
            {
                "name": name,
                "count_s": counted,
                "store_s": stored,
                "tokens": tokens,
                "entry_tokens": entry.token_count,
                "equal": back == message,
            },
        )
        del back, entry
    write_log(log_path, {"peak_mb": _peak_rss_kb(resource) / 1024})


def _peak_rss_kb(resource: Any) -> float:
    """This interpreter's own peak resident set, in KiB. Linux's ``ru_maxrss`` keeps
    the high-water mark of the process image that exec replaced (the forked copy of
    the test runner, as large as the runner had grown); ``VmHWM`` is this image's."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return float(line.split()[1])
    except OSError:
        pass
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def days_ago(days: float) -> Callable[[], datetime]:
    """A fixed clock ``days`` before now (for seeding sessions that are already old)."""
    moment = datetime.now(UTC) - timedelta(days=days)
    return lambda: moment
