"""The API reference has an entry for every public name of each package.

``mkdocs build --strict`` (``make docs``, in ``.ci/run``) fails on an entry whose object
does not exist; this test fails on a public name without an entry.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["tiermem", "tiermem_agents", "tiermem_classic", "tiermem_langgraph"]
ENTRY = re.compile(r"^::: ([\w.]+)$", re.MULTILINE)


def entries() -> set[str]:
    """Every object the reference pages render (``::: dotted.path`` lines)."""
    pages = (ROOT / "docs" / "reference").glob("*.md")
    return {name for page in pages for name in ENTRY.findall(page.read_text("utf-8"))}


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_has_a_reference_entry(package: str) -> None:
    """Each name in the package's ``__all__`` is rendered under its package's name."""
    public = importlib.import_module(package).__all__
    missing = [name for name in public if f"{package}.{name}" not in entries()]
    assert missing == []


def test_the_reference_reads_every_package_source() -> None:
    """mkdocstrings is pointed at the core's and each integration's sources."""
    config = (ROOT / "mkdocs.yml").read_text("utf-8")
    sources = ["src", *(f"integrations/{p.name}/src" for p in ROOT.glob("integrations/*"))]
    assert all(f"- {source}\n" in config for source in sources)


def test_every_guide_is_in_the_navigation() -> None:
    """A page left out of ``nav`` would be built but never linked."""
    config = (ROOT / "mkdocs.yml").read_text("utf-8")
    pages = [p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")]
    assert [page for page in pages if f": {page}\n" not in config] == []


def test_the_readme_links_every_guide() -> None:
    """The README is the landing page: it links each page of the site's guides."""
    readme = (ROOT / "README.md").read_text("utf-8")
    guides = [p.name for p in (ROOT / "docs").glob("*.md")]
    assert [guide for guide in guides if f"](docs/{guide})" not in readme] == []
