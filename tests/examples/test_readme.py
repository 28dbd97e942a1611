"""The README's quick start runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def quick_start() -> str:
    """The first Python block after the "Quick start" heading."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    return match.group(1)


def test_quick_start_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The quick start compresses, keeps the context in budget and finds an original."""
    monkeypatch.chdir(tmp_path)
    code = quick_start()
    assert len(code.strip().splitlines()) <= 15
    namespace: dict[str, object] = {}
    exec(compile(code, str(README), "exec"), namespace)
    out = capsys.readouterr().out
    assert "saved" in out and "200 stored," in out
    assert "question 7: when does order 7 ship?" in out
    assert (tmp_path / "tiermem.db").exists()
    mem = namespace["mem"]
    context = namespace["context"]
    assert mem.counter.count_messages(context) <= 2_000  # type: ignore[attr-defined]
    mem.close()  # type: ignore[attr-defined]


def test_quick_start_gives_the_same_output_on_a_second_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run again in the same directory, the quick start reports 200 originals again."""
    monkeypatch.chdir(tmp_path)
    code = compile(quick_start(), str(README), "exec")
    outputs = []
    for _ in range(2):
        namespace: dict[str, object] = {}
        exec(code, namespace)
        namespace["mem"].close()  # type: ignore[attr-defined]
        outputs.append(capsys.readouterr().out)
    assert "200 stored," in outputs[1]
    assert outputs[1] == outputs[0]


def test_the_readme_says_to_share_one_memory_per_process() -> None:
    """Next to the quick start, where a new user looks: one memory per process, shared."""
    section = README.read_text(encoding="utf-8").split("## Quick start", 1)[1]
    section = section.split("\n## ", 1)[0]
    assert "**One memory per process.**" in section and "thread-safe" in section
