"""The schema listing (:mod:`tiermem._storage.tables`) is the whole schema, and no
module adds to it when it is imported."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import sqlalchemy as sa
from sqlmodel import SQLModel

import tiermem._storage
from tiermem._storage.tables import EXTRA_DDL, FULL_TEXT_INDEXES, TABLES, create_tables

STORAGE = Path(tiermem._storage.__file__).parent


def storage_modules() -> list[str]:
    """Every module of the storage package but the migrations (Alembic's scripts)."""
    return sorted(
        info.name
        for info in pkgutil.walk_packages([str(STORAGE)], "tiermem._storage.")
        if ".migrations" not in info.name
    )


def test_listed_tables_are_every_tiermem_table_of_the_metadata() -> None:
    """With every storage module imported, the tiermem tables of the models' metadata are
    exactly the listed ones: no model defines a table the listing leaves out."""
    for name in storage_modules():
        importlib.import_module(name)
    defined = {table.name for table in SQLModel.metadata.tables.values()}
    assert {name for name in defined if name.startswith("tiermem")} == {t.name for t in TABLES}
    assert len({table.name for table in TABLES}) == len(TABLES)
    assert all(table.metadata is TABLES[0].metadata for table in TABLES)


def test_listed_tables_come_after_the_tables_they_reference() -> None:
    """The listing is in creation order: every foreign key names a table listed earlier
    (or the table itself)."""
    for position, table in enumerate(TABLES):
        earlier = {t.name for t in TABLES[: position + 1]}
        assert {fk.column.table.name for fk in table.foreign_keys} <= earlier, table.name


def test_full_text_indexes_and_extra_ddl_belong_to_listed_tables() -> None:
    """Every full-text index is over a listed table; names are unique."""
    assert {index.table.name for index in FULL_TEXT_INDEXES} <= {t.name for t in TABLES}
    assert len({index.name for index in FULL_TEXT_INDEXES}) == len(FULL_TEXT_INDEXES)
    assert len({extra.name for extra in EXTRA_DDL}) == len(EXTRA_DDL)
    assert all(isinstance(listing, tuple) for listing in (TABLES, FULL_TEXT_INDEXES, EXTRA_DDL))


def _own_names(target: ast.expr) -> bool:
    """Whether an assignment target binds names of the module itself (``a`` or ``a, b``)."""
    if isinstance(target, ast.Tuple):
        return all(_own_names(element) for element in target.elts)
    return isinstance(target, ast.Name)


def _module_level_effects(path: Path) -> list[str]:
    """Statements a module runs at import beyond imports, definitions and assignments
    to its own names: where a module could add itself to a list elsewhere."""
    found = []
    body = ast.parse(path.read_text()).body
    for position, node in enumerate(body):
        if isinstance(
            node,
            ast.Import | ast.ImportFrom | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
        ):
            continue
        if position == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if all(_own_names(target) for target in targets):
                continue
        found.append(f"{path.name}:{node.lineno}: {ast.unparse(node).splitlines()[0]}")
    return found


def test_no_storage_module_registers_anything_when_imported() -> None:
    """Storage modules only define things at import: no loop, condition or call that
    could append a table, index or hook to another module's list."""
    effects = [
        effect for path in sorted(STORAGE.glob("*.py")) for effect in _module_level_effects(path)
    ]
    assert effects == []


def test_the_module_check_finds_a_registration(tmp_path: Path) -> None:
    """The check above reports the registration it guards against."""
    path = tmp_path / "module.py"
    path.write_text(
        textwrap.dedent(
            """
            '''A table module.'''
            from . import schema
            TABLE = object()
            if TABLE not in schema.tiermem_tables:
                schema.tiermem_tables.append(TABLE)
            schema.after_create.append(print)
            """
        )
    )
    assert [line.split(": ", 1)[1] for line in _module_level_effects(path)] == [
        "if TABLE not in schema.tiermem_tables:",
        "schema.after_create.append(print)",
    ]


#: Re-imports every storage module that defines no table (a model class cannot be
#: defined twice) and reports whether the listing, and what create_tables creates,
#: stayed the same.
_REIMPORT = """
import importlib, pkgutil, sys
import sqlalchemy as sa
import tiermem._storage
from tiermem._storage import tables

def objects():
    engine = sa.create_engine("sqlite://")
    tables.create_tables(engine)
    with engine.connect() as conn:
        found = set(conn.exec_driver_sql("SELECT type, name FROM sqlite_master").all())
    engine.dispose()
    return found

listing = (tables.TABLES, tables.FULL_TEXT_INDEXES, tables.EXTRA_DDL)
before = objects()
names = sorted(
    info.name
    for info in pkgutil.walk_packages(tiermem._storage.__path__, "tiermem._storage.")
    if ".migrations" not in info.name and info.name != "tiermem._storage.tables"
)
reloaded = 0
for name in names:
    module = importlib.import_module(name)
    if "table=True" in open(module.__file__).read():
        continue
    importlib.reload(module)
    reloaded += 1
assert (tables.TABLES, tables.FULL_TEXT_INDEXES, tables.EXTRA_DDL) == listing
assert all(a is b for a, b in zip(tables.TABLES, listing[0], strict=True))
assert objects() == before, objects() ^ before
print(reloaded)
"""


def test_importing_storage_modules_again_changes_nothing() -> None:
    """Importing the storage modules once more (in a fresh interpreter) leaves the
    listing and what ``create_tables`` creates as they were."""
    result = subprocess.run(
        [sys.executable, "-c", _REIMPORT], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) >= 15  # most of the package was imported again


def test_create_tables_reads_the_listing_only() -> None:
    """A table defined on the models' metadata but not listed is not created."""
    stray = sa.Table("tiermem_stray", TABLES[0].metadata, sa.Column("id", sa.Integer))
    try:
        engine = sa.create_engine("sqlite://")
        create_tables(engine)
        assert "tiermem_stray" not in sa.inspect(engine).get_table_names()
        engine.dispose()
    finally:
        TABLES[0].metadata.remove(stray)
