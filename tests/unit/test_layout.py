"""The package's layout holds: small modules, SQL in one package, no import
circle (type-only imports included), no mixins, no private attribute reached across
objects, no private name imported from another module; the integrations (every
package under ``integrations/*/src``) are held to the same size, circle and mixin
rules and use tiermem's public API only: no ``tiermem._`` module."""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import pytest

import tiermem

SRC = Path(tiermem.__file__).parent
ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 600
#: Private names of other libraries the storage package relies on: SQLAlchemy has
#: no public test for an AUTOCOMMIT connection. The upper bound on SQLAlchemy in
#: pyproject.toml keeps it to the versions this is tested with.
THIRD_PARTY_PRIVATE = {
    ("tiermem._storage.database", "_is_autocommit_isolation"),
    ("tiermem.mcp.transport", "_lowlevel_server"),  # the MCP SDK's, to filter its input
}
DRIVER_PACKAGES = ("sqlalchemy", "sqlmodel", "alembic")


def modules() -> dict[str, Path]:
    """Every product module by dotted name (migrations are Alembic's scripts)."""
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        parts = ["tiermem", *path.relative_to(SRC).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def integration_modules() -> dict[str, Path]:
    """Every module of the integrations' packages by dotted name."""
    found = {}
    for source in sorted(ROOT.glob("integrations/*/src")):
        for path in sorted(source.rglob("*.py")):
            parts = list(path.relative_to(source).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def all_modules() -> dict[str, Path]:
    """The product's modules and the integrations'."""
    return {**modules(), **integration_modules()}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(name: str, path: Path, *, module_level: bool, type_only: bool = False) -> set[str]:
    """What ``path`` imports when it runs: absolute names, ``TYPE_CHECKING`` blocks
    left out unless ``type_only``; with ``module_level`` only what importing the
    module imports (and, with ``type_only``, what type checking it imports)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node):
                visit(node.body if type_only else node.orelse)
                if type_only:
                    visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names)
            if module_level and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for field in ("body", "orelse", "finalbody", "handlers"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    visit([c for c in children if isinstance(c, ast.stmt | ast.ExceptHandler)])  # type: ignore[misc]

    visit(ast.parse(path.read_text()).body)
    return found


def test_no_module_is_longer_than_600_lines() -> None:
    """Every product module stays short enough to read in one sitting."""
    long = {
        name: lines
        for name, path in all_modules().items()
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_only_the_storage_package_imports_the_database_libraries() -> None:
    """SQLAlchemy, SQLModel and Alembic are imported by ``tiermem._storage`` alone."""
    offenders = {
        name: sorted(
            i for i in imports(name, path, module_level=False) if i.split(".")[0] in DRIVER_PACKAGES
        )
        for name, path in modules().items()
        if not name.startswith("tiermem._storage")
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_command_line_and_the_mcp_server_use_only_the_public_api() -> None:
    """``tiermem.cli*`` and ``tiermem.mcp`` are clients of the public API: they import
    no ``tiermem._ops``, ``tiermem._core`` or ``tiermem._storage`` module (nor the
    database libraries: a driver error reaches them as a ``TiermemError``)."""
    private = ("tiermem._ops", "tiermem._core", "tiermem._storage", "tiermem._compression")
    clients = {
        name: path
        for name, path in modules().items()
        if name.startswith(("tiermem.cli", "tiermem.mcp"))
    }
    assert "tiermem.cli" in clients and "tiermem.mcp.access" in clients
    offenders = {
        name: sorted(
            i
            for i in imports(name, path, module_level=False)
            if i.startswith(private) or i.split(".")[0] in DRIVER_PACKAGES
        )
        for name, path in clients.items()
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_no_import_circle_between_product_modules() -> None:
    """Importing (or type checking) any module never needs a module that needs it
    back, in the product and in the integrations."""
    known = all_modules()
    graph = {
        name: {
            dep
            for dep in imports(name, path, module_level=True, type_only=True)
            if dep in known and dep != name
        }
        for name, path in known.items()
    }
    # A package's __init__ importing its own modules is not a circle.
    for name in graph:
        graph[name] = {dep for dep in graph[name] if not name.startswith(dep + ".")}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def walk(node: str, trail: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append([*trail[trail.index(dep) :], dep] if dep in trail else [node, dep])
            elif dep not in state:
                walk(dep, [*trail, dep])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            walk(name, [name])
    assert cycles == []


def test_no_mixins() -> None:
    """Classes compose: none is a mixin, none inherits from two tiermem classes."""
    found = []
    for name, path in all_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                local_bases = [
                    b for b in node.bases if isinstance(b, ast.Name) and not hasattr(builtins, b.id)
                ]
                if node.name.endswith("Mixin") or len(local_bases) > 1:
                    found.append(f"{name}.{node.name}")
    assert found == []


def test_no_private_attribute_is_reached_across_objects() -> None:
    """Product code reads ``_private`` attributes of ``self`` (or ``cls``) only."""
    found = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"})
                and (name, node.attr) not in THIRD_PARTY_PRIVATE
            ):
                found.append(f"{name}:{node.lineno} .{node.attr}")
    assert found == []


def test_integrations_import_no_private_tiermem_module() -> None:
    """An integration uses tiermem's public API: it imports no ``tiermem._`` module
    (nor a private name of a public one), even for type checking."""
    found = {
        name: sorted(
            dep
            for dep in imports(name, path, module_level=False, type_only=True)
            if dep.split(".")[0] == "tiermem" and any(p.startswith("_") for p in dep.split("."))
        )
        for name, path in integration_modules().items()
    }
    assert {name: deps for name, deps in found.items() if deps} == {}


def test_no_private_name_is_imported_from_another_module() -> None:
    """A module imports another's public names (private modules of its own
    package are modules, not names), in the product and in the integrations."""
    known = all_modules()
    found = []
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and not _is_module(name, path, node, alias.name, known):
                    found.append(f"{name}:{node.lineno} {alias.name}")
    assert found == []


def _is_module(
    name: str, path: Path, node: ast.ImportFrom, imported: str, known: dict[str, Path]
) -> bool:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    base = node.module or ""
    if node.level:
        anchor = package.split(".")
        anchor = anchor[: len(anchor) - node.level + 1]
        base = ".".join(anchor + ([base] if base else []))
    return f"{base}.{imported}" in known


#: What a module writing a conversation table contains: a SQLAlchemy INSERT or
#: UPDATE of it, raw SQL doing so, or a name of a statement that does.
TABLE_WRITES = {
    "entry": (
        r"(insert|update)\(entry_table",
        r"(INSERT INTO|UPDATE) tiermem_entry\b",
        r"\bINSERT_ENTRIES\b",
    ),
    "session": (
        r"(insert|update)\((conn, )?session_table",
        r"(INSERT INTO|UPDATE) tiermem_session\b",
        r"_sql\.(TOUCH|TOUCH_RETURNING|TOUCH_RETURNING_RELAXED|ACTIVATE|RESERVE|RELEASE)\b",
        r"_sql\.(SET_PENDING|CLAIM|FINISH_CLAIM)\b",
    ),
    "summary": (
        r"(insert|update)\(summary_table",
        r"(INSERT INTO|UPDATE) tiermem_summary\b",
        r"\b(INSERT_SUMMARY|SET_PARENT)\b",
    ),
}
#: The one writer of each (``statements`` only declares the statements it runs).
TABLE_WRITERS = {
    "session": {"tiermem._storage.sessions", "tiermem._storage.statements"},
    "entry": {"tiermem._storage.entries", "tiermem._storage.statements"},
    "summary": {"tiermem._storage.summaries", "tiermem._storage.statements"},
}


@pytest.mark.parametrize("table", sorted(TABLE_WRITES))
def test_each_conversation_table_has_one_writer(table: str) -> None:
    """Sessions, entries and summaries are inserted and updated by one module each
    (the session delete cascade aside), so a rule about their rows has one place."""
    writers = {
        name
        for name, path in all_modules().items()
        if any(re.search(pattern, path.read_text()) for pattern in TABLE_WRITES[table])
    }
    assert writers == TABLE_WRITERS[table]
