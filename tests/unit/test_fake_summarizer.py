"""tiermem.testing.FakeSummarizer: prompts recorded for tests, or not for long runs."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

from tiermem.testing import FakeSummarizer

PROMPT = "Summarize.\nConversation:\nuser: the budget is ten tokens\nassistant: noted"


def test_prompts_are_recorded_by_default() -> None:
    """Each call's prompt is kept in ``calls``, in order."""
    fake = FakeSummarizer()
    fake.invoke(PROMPT)
    fake.invoke("second")
    assert fake.calls == [PROMPT, "second"]


def test_record_calls_off_keeps_nothing_and_answers_the_same() -> None:
    """With ``record_calls=False`` nothing is kept, and the answer does not change."""
    quiet = FakeSummarizer(record_calls=False)
    answer = quiet.invoke(PROMPT).content
    assert quiet.calls == []
    assert answer == FakeSummarizer().invoke(PROMPT).content
    assert answer == "Digest of 2 lines: user: the budget is ten tokens assistant: noted"


async def test_an_async_call_answers_on_the_event_loop() -> None:
    """``ainvoke`` answers without handing the call to a worker thread (a thread per
    call would cost a service more than the fake model does)."""
    loop = asyncio.get_running_loop()

    class NoThreads(concurrent.futures.ThreadPoolExecutor):
        def submit(self, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
            raise AssertionError("handed to a worker thread")

    loop.set_default_executor(NoThreads())
    fake = FakeSummarizer()
    answer = await fake.ainvoke(PROMPT)
    assert answer.content == FakeSummarizer().invoke(PROMPT).content
    assert fake.calls == [PROMPT]


async def test_a_blocking_async_call_leaves_the_event_loop_free() -> None:
    """In ``sleep`` mode ``ainvoke`` blocks a worker thread, not the event loop."""
    release = threading.Event()
    fake = FakeSummarizer(mode="sleep", release=release, delay=10)
    call = asyncio.ensure_future(fake.ainvoke(PROMPT))
    await asyncio.sleep(0.05)  # the loop runs while the call waits for its release
    assert not call.done()
    release.set()
    assert str((await asyncio.wait_for(call, 5)).content).startswith("Digest of 2 lines")
