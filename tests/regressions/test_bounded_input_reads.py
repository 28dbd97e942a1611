"""`tiermem import` and `tiermem eval retrieval` read at most one byte past their size
limit: an endless input (``/dev/zero``, as a file or on stdin) or an oversized file is
refused with one line and exit code 1, not a MemoryError traceback. The commands run
as processes with a bounded address space, so a read without a bound fails fast."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tiermem.evaluation.dataset import MAX_DATASET_BYTES
from tiermem.state import MAX_IMPORT_BYTES

#: Address space of a command: room for one import-sized read, far less than /dev/zero.
ADDRESS_SPACE = 3 * 1024**3


def _bounded_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def tiermem(*args: str, stdin: str | None = None, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``tiermem args`` in ``cwd`` with bounded memory (stdin from the file ``stdin``)."""
    with open(stdin or os.devnull, "rb") as source:
        return subprocess.run(
            [sys.executable, "-m", "tiermem.cli", *args],
            env={**os.environ, "COLUMNS": "200"},
            stdin=source,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=cwd,
            preexec_fn=_bounded_memory,
        )


def assert_refused(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for text in expected:
        assert text in lines[0]


def sparse_file(path: Path, size: int) -> Path:
    """A file of ``size`` zero bytes that takes no disk space."""
    with open(path, "wb") as file:
        file.truncate(size)
    return path


@pytest.mark.parametrize("how", ["file", "stdin"])
def test_import_refuses_an_endless_input(how: str, tmp_path: Path) -> None:
    """`tiermem import /dev/zero` (or `- < /dev/zero`) is refused; no database is made."""
    if how == "file":
        done = tiermem("import", "/dev/zero", cwd=tmp_path)
    else:
        done = tiermem("import", "-", stdin="/dev/zero", cwd=tmp_path)
    assert_refused(done, f"export larger than {MAX_IMPORT_BYTES} bytes")
    assert not (tmp_path / "tiermem.db").exists()


def test_import_refuses_an_oversized_file(tmp_path: Path) -> None:
    """A file one byte over the limit is refused by its size."""
    big = sparse_file(tmp_path / "big.json", MAX_IMPORT_BYTES + 1)
    assert_refused(tiermem("import", str(big), cwd=tmp_path), "larger than")
    assert not (tmp_path / "tiermem.db").exists()


def test_eval_refuses_an_endless_or_oversized_dataset(tmp_path: Path) -> None:
    """`tiermem eval retrieval` refuses /dev/zero and a file over its limit."""
    assert_refused(tiermem("eval", "retrieval", "/dev/zero", cwd=tmp_path), "larger than")
    big = sparse_file(tmp_path / "big.json", MAX_DATASET_BYTES + 1)
    assert_refused(
        tiermem("eval", "retrieval", str(big), cwd=tmp_path),
        f"larger than {MAX_DATASET_BYTES} bytes",
    )
