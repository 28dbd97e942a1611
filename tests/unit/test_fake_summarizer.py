"""tiermem.testing.FakeSummarizer: prompts recorded for tests, or not for long runs."""

from __future__ import annotations

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
