"""Every README installs what exists, and each integration pins the core of its version."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.packaging.check_dist import READMES, ROOT, install_commands, quick_start

INTEGRATIONS = sorted(ROOT.glob("integrations/*/pyproject.toml"))
# A `pip install NAME` of tiermem or an integration, from an index: none is on one.
FROM_AN_INDEX = re.compile(r"pip install (?!--find-links|-e |dist/)['\"]?tiermem")


def core_version() -> str:
    """The version in the core's pyproject.toml."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


@pytest.mark.parametrize("pyproject", INTEGRATIONS, ids=lambda p: p.parent.name)
def test_each_integration_requires_the_core_of_its_own_version(pyproject: Path) -> None:
    """An integration's wheel installs with the tiermem it was built and tested with."""
    with pyproject.open("rb") as f:
        project = tomllib.load(f)["project"]
    assert project["version"] == core_version()
    cores = [d for d in project["dependencies"] if re.match(r"tiermem\b(?!-)", d)]
    assert cores == [f"tiermem=={core_version()}"]


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_readme_installs_from_the_built_wheels(readme: Path) -> None:
    """The install lines name dist/ (make dist), never an index that has no tiermem."""
    text = readme.read_text(encoding="utf-8")
    assert "make dist" in text
    commands = install_commands(readme)
    assert commands, "no `pip install --find-links dist` line"
    assert all(cmd[:4] == ["pip", "install", "--find-links", "dist"] for cmd in commands)
    assert FROM_AN_INDEX.findall(text) == []


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_readme_quick_start_is_a_whole_program(readme: Path) -> None:
    """The quick start compiles and prints something (dist-check runs it twice)."""
    code = quick_start(readme)
    compile(code, str(readme), "exec")
    assert "print(" in code
