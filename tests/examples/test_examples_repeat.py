"""Every example prints the same thing on every run: each starts its own session (or
store namespace, or audit log) afresh instead of appending to an earlier run's."""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path
from types import ModuleType

import pytest

from ..conftest import PG_URL

EXAMPLES = Path(__file__).parents[2] / "examples"
# chat_service.py is a server; its tests drive it (test_example_chat_service.py).
SCRIPTS = sorted(p.stem for p in EXAMPLES.glob("*.py") if p.stem != "chat_service")


def _load(name: str) -> ModuleType:
    """Import the example as a module."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(name="url", params=["sqlite", "postgres"])
def fixture_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for the examples: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/example.db"
    schema: str = request.getfixturevalue("pg_schema")
    return f"{PG_URL}?options=-csearch_path%3D{schema}"


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_second_run_prints_what_the_first_printed(
    name: str,
    url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Run twice on the same database (as `make examples` twice would), the output is
    the same and not empty."""
    monkeypatch.delenv("TIERMEM_CHAT_MODEL", raising=False)
    monkeypatch.chdir(tmp_path)
    example = _load(name)
    outputs = []
    for _ in range(2):
        monkeypatch.setattr("sys.stdin", io.StringIO(""))  # piped: the scripted run
        example.main(url)
        outputs.append(capsys.readouterr().out)
    assert outputs[0].strip()
    assert outputs[1] == outputs[0]


def test_every_example_is_repeated() -> None:
    """The list above is every example but the server."""
    assert len(SCRIPTS) == len(list(EXAMPLES.glob("*.py"))) - 1
