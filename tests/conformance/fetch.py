"""Fetch the peers' test files from their pinned source distributions.

Run once after installing (``make install-tests`` does): downloads each pinned sdist
with pip, checks its sha256, and extracts only the listed test files into
``.conformance/`` at the repository root (git-ignored). The tests themselves then
run offline.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import tempfile
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / ".conformance"


class Pin(NamedTuple):
    """One peer sdist: its exact version, archive hash and the files taken from it."""

    version: str
    sha256: str
    files: tuple[str, ...]


PINS: dict[str, Pin] = {
    "langchain-core": Pin(
        "1.7.2",
        "7810d029eaa4286838baad56752efb771868a5eebaf52aefe45764645dbea649",
        (
            "tests/unit_tests/runnables/test_history.py",
            "tests/unit_tests/chat_history/test_chat_history.py",
            "tests/unit_tests/pydantic_utils.py",
        ),
    ),
    "langchain-classic": Pin(
        "1.0.8",
        "ada0cc341a8a5b80fb24d73bdfaaeb849056ee2d8a41cc468355163fd3667484",
        (
            "tests/unit_tests/chains/test_summary_buffer_memory.py",
            "tests/unit_tests/llms/fake_llm.py",
        ),
    ),
    "langchain": Pin(
        "1.4.7",
        "818275348cd707f7fbbe92ece0a725c25823140a054cf29865f420e0200fa2af",
        (
            "tests/unit_tests/agents/middleware/implementations/test_summarization.py",
            "tests/unit_tests/agents/model.py",
        ),
    ),
    "langgraph-checkpoint": Pin(
        "4.3.2",
        "fcab8468c7e965d7055e2a35c253d73a145624ef4728b150ca7c361f4afca286",
        ("tests/test_store.py", "tests/embed_test_utils.py"),
    ),
    "langgraph-checkpoint-sqlite": Pin(
        "3.1.2",
        "4e3f376fa6f192d6ad2a1a4643b039986f1593552ef870e9e45281575de6fbf2",
        ("tests/test_store.py", "tests/test_async_store.py", "tests/test_ttl.py"),
    ),
    "langgraph-checkpoint-postgres": Pin(
        "3.2.0",
        "dffef0e6822d7c614019f7f2c4bdbef42859746aee2d3e6d9d9747cf3744ca90",
        (
            "tests/test_store.py",
            "tests/test_async_store.py",
            "tests/conftest.py",
            "tests/embed_test_utils.py",
        ),
    ),
}


def peer_file(project: str, relative: str) -> Path:
    """Where a fetched test file of ``project`` lives."""
    return TARGET / project / relative


def _archive_name(project: str, version: str) -> str:
    return f"{project.replace('-', '_')}-{version}.tar.gz"


def fetch(project: str, pin: Pin) -> None:
    """Download, verify and extract one peer's test files.

    Raises:
        SystemExit: When the installed version differs from the pin, or the hash
            does not match.
    """
    installed = metadata.version(project)
    if installed != pin.version:
        sys.exit(f"{project} {installed} is installed but {pin.version} is pinned: update PINS")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"{project}=={pin.version}",
                "-d",
                tmp,
            ],
            check=True,
        )
        archive = Path(tmp) / _archive_name(project, pin.version)
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        if digest != pin.sha256:
            sys.exit(f"{archive.name}: sha256 {digest} is not the pinned {pin.sha256}")
        prefix = archive.name.removesuffix(".tar.gz")
        with tarfile.open(archive) as tar:
            for relative in pin.files:
                member = tar.extractfile(f"{prefix}/{relative}")
                if member is None:
                    sys.exit(f"{archive.name} has no {relative}")
                destination = peer_file(project, relative)
                destination.parent.mkdir(parents=True, exist_ok=True)
                destination.write_bytes(member.read())


def main() -> None:
    """Fetch every pinned peer."""
    for project, pin in PINS.items():
        fetch(project, pin)
        sys.stdout.write(f"{project} {pin.version}: {len(pin.files)} files in {TARGET / project}\n")


if __name__ == "__main__":
    main()
