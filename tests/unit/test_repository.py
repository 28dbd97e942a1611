"""What the repository tracks."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_no_symbolic_link_is_tracked() -> None:
    """No tracked file is a symbolic link: a link to one machine's folder (the fetched
    peers' sources, say) breaks every other checkout."""
    listed = subprocess.run(
        ["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    links = [line.split("\t", 1)[1] for line in listed.splitlines() if line.startswith("120000")]
    assert links == []
