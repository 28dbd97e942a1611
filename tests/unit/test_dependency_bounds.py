"""Dependencies whose internals tiermem relies on are bounded to tested releases."""

from __future__ import annotations

from importlib import metadata

import sqlalchemy
from packaging.requirements import Requirement


def test_sqlalchemy_is_bounded_to_the_releases_storage_is_tested_with() -> None:
    """The SQLAlchemy requirement has an upper bound and the installed release is
    within it (``tiermem._storage._fast`` uses its statement compiler)."""
    requirements = [Requirement(text) for text in metadata.requires("tiermem") or []]
    (bound,) = [r for r in requirements if r.name.lower() == "sqlalchemy"]
    assert any(spec.operator == "<" for spec in bound.specifier)
    assert bound.specifier.contains(sqlalchemy.__version__)
