"""Import fetched peer test files and adopt their tests into a tiermem test module."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any

import pytest

from .fetch import peer_file


def load(project: str, relative: str, name: str, aliases: Mapping[str, ModuleType]) -> ModuleType:
    """Import a fetched peer file as module ``name``.

    Args:
        project: The peer distribution, e.g. ``"langchain-core"``.
        relative: The file's path inside the sdist.
        name: The module name to give it (unique, so peers never collide).
        aliases: Modules the file imports under the peer's own package names
            (``tests.unit_tests...``), importable only while it loads.

    Raises:
        FileNotFoundError: When the file has not been fetched.
    """
    path = peer_file(project, relative)
    if not path.exists():
        msg = f"{path} is missing: run `make install-tests` (python tests/conformance/fetch.py)"
        raise FileNotFoundError(msg)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved = {key: sys.modules.get(key) for key in aliases}
    sys.modules.update(aliases)
    try:
        spec.loader.exec_module(module)
    finally:
        for key, value in saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value
    return module


def adopt(
    peer: ModuleType, excluded: Mapping[str, str], differences: Mapping[str, str]
) -> Iterator[tuple[str, Callable[..., Any]]]:
    """The peer's test functions and ``Test*`` classes, with its module marks.

    Args:
        peer: The loaded peer test module.
        excluded: Tests that check something other than the substituted class,
            with the reason; they are not adopted.
        differences: Documented, deliberate differences, with the reason; they
            run as strict xfails.
    """
    module_marks = getattr(peer, "pytestmark", [])
    if not isinstance(module_marks, list):
        module_marks = [module_marks]
    for name, function in list(vars(peer).items()):
        is_test = name.startswith("test_") or (
            name.startswith("Test") and isinstance(function, type)
        )
        if not is_test or not callable(function) or name in excluded:
            continue
        marks = list(module_marks)
        if name in differences:
            marks.append(pytest.mark.xfail(reason=differences[name], strict=True))
        for mark in marks:
            function = mark(function)
        yield name, function


def narrow(function: Callable[..., Any], argname: str, values: Sequence[object]) -> None:
    """Keep only ``values`` of a peer test's ``argname`` parametrization.

    Raises:
        LookupError: When the test has no such parametrization (the peer changed).
    """
    marks: list[pytest.Mark] = list(getattr(function, "pytestmark", []))
    for position, mark in enumerate(marks):
        if mark.name == "parametrize" and mark.args[0] == argname:
            kept = [value for value in mark.args[1] if value in values]
            marks[position] = pytest.mark.parametrize(argname, kept).mark
            function.pytestmark = marks  # type: ignore[attr-defined]
            return
    raise LookupError(f"{function.__name__} has no parametrization of {argname!r}")
