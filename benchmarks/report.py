"""Report the results: a table on the terminal, JSON, and a per-turn cost plot."""

from __future__ import annotations

import json
import platform
import shutil
import sys
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from corpus import AI_TOKENS, HUMAN_TOKENS, MESSAGE_OVERHEAD_TOKENS
from measure import RunResult

TOKEN_RULE = (
    f"tiktoken cl100k tokens of each message's content + {MESSAGE_OVERHEAD_TOKENS} per message"
)
PACKAGES = (
    "tiermem",
    "langchain-core",
    "langchain",
    "langchain-classic",
    "langgraph",
    "llama-index-core",
    "tiktoken",
    "SQLAlchemy",
    "psycopg",
    "aiosqlite",
)
"""Packages whose versions the JSON records."""

COLUMNS = (
    "contender",
    "status",
    "total s",
    "first10 ms",
    "last10 ms",
    "flat",
    "RSS MB",
    "ctx final",
    "ctx mean",
    "ctx max",
    "tm/x total",
    "tm/x last10",
)
"""Table columns; ``tm/x`` is tiermem-sqlite's figure divided by the row's (< 1: tiermem
is cheaper)."""


def _num(value: float | None, digits: int) -> str:
    """Format a number, or ``-`` when it is missing."""
    return "-" if value is None else f"{value:,.{digits}f}"


def _ratio(baseline: float | None, value: float | None) -> str:
    """Format ``baseline / value``, or ``-`` when either is missing."""
    if baseline is None or not value:
        return "-"
    return f"{baseline / value:.2f}x"


def _status(result: RunResult) -> str:
    """Return the status cell: ``timeout`` shows how far the run got."""
    if result.status == "timeout":
        return f"timeout @{result.turns_done:,}/{result.turns:,}"
    return result.status


def table_rows(results: Sequence[RunResult], baseline: RunResult | None) -> list[list[str]]:
    """Return the table's cells for one N, ratios relative to ``baseline``."""
    base_total = baseline.total_s if baseline is not None and baseline.ok else None
    base_last = baseline.last10_ms if baseline is not None and baseline.ok else None
    rows: list[list[str]] = []
    for r in results:
        total = r.total_s if r.ok else None
        cells = [
            r.contender,
            _status(r),
            _num(total, 2),
            _num(r.first10_ms, 3),
            _num(r.last10_ms, 3),
            _num(r.flatness, 2),
            _num(r.peak_rss_mb, 0),
            _num(r.final_ctx_tokens, 0) if r.ok else "-",
            _num(r.mean_ctx_tokens, 0),
            _num(r.max_ctx_tokens, 0),
            _ratio(base_total, total),
            _ratio(base_last, r.last10_ms),
        ]
        rows.append(cells)
    return rows


def _plain_table(title: str, rows: list[list[str]]) -> str:
    """Render rows as an aligned plain-text table."""
    grid = [list(COLUMNS), *rows]
    widths = [max(len(row[i]) for row in grid) for i in range(len(COLUMNS))]

    def line(row: list[str]) -> str:
        head = (cell.ljust(width) for cell, width in zip(row[:2], widths[:2], strict=True))
        rest = (cell.rjust(width) for cell, width in zip(row[2:], widths[2:], strict=True))
        return "  ".join((*head, *rest))

    rule = "-" * len(line(grid[0]))
    return "\n".join([title, rule, line(grid[0]), rule, *(line(r) for r in rows), rule])


def print_table(title: str, rows: list[list[str]]) -> None:
    """Print one N's table, with rich when it is installed."""
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(_plain_table(title, rows))
        return
    table = Table(title=title, title_justify="left")
    for i, name in enumerate(COLUMNS):
        table.add_column(name, justify="left" if i < 2 else "right", no_wrap=i == 0)
    for row in rows:
        table.add_row(*row)
    Console(width=max(160, shutil.get_terminal_size().columns)).print(table)


def report_tables(results: Sequence[RunResult], baseline_name: str) -> None:
    """Print one table per conversation length."""
    for turns in sorted({r.turns for r in results}):
        group = [r for r in results if r.turns == turns]
        baseline = next((r for r in group if r.contender == baseline_name), None)
        title = f"N = {turns:,} turns (tm/x: {baseline_name} / contender; < 1 = tiermem cheaper)"
        print_table(title, table_rows(group, baseline))


def _versions() -> dict[str, str | None]:
    """Return the installed version of each package in ``PACKAGES`` (None if missing)."""
    found: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def metadata_block(seed: int, turns: Sequence[int], budget_s: float) -> dict[str, Any]:
    """Return the run's settings and environment for the JSON file."""
    return {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "seed": seed,
        "turns": list(turns),
        "budget_s_per_contender_and_n": budget_s,
        "max_tokens": 2000,
        "corpus": {"human_tokens": HUMAN_TOKENS, "ai_tokens": AI_TOKENS},
        "token_rule": TOKEN_RULE,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": _versions(),
    }


def write_json(path: Path, meta: dict[str, Any], results: Sequence[RunResult]) -> None:
    """Write the settings and every result to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"meta": meta, "results": [asdict(r) for r in results]}
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def _longest_runs(results: Sequence[RunResult]) -> dict[str, RunResult]:
    """Pick, per contender, the run that got furthest (it has the longest curve)."""
    best: dict[str, RunResult] = {}
    for r in results:
        if r.curve and (r.contender not in best or r.turns_done > best[r.contender].turns_done):
            best[r.contender] = r
    return best


def write_plot(path: Path, results: Sequence[RunResult]) -> None:
    """Plot per-turn cost against conversation length, log-log, one line per contender."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(12.5, 6), dpi=120)
    for name, run in _longest_runs(results).items():
        xs = [x for x, _ in run.curve]
        ys = [y for _, y in run.curve]
        label = name if run.ok else f"{name} ({run.status} at {run.turns_done:,})"
        style: dict[str, Any] = {"linewidth": 2.6} if name.startswith("tiermem") else {}
        if name.startswith("floor"):
            style = {"linestyle": "--", "linewidth": 1.2}
        (line,) = ax.plot(xs, ys, label=label, **style)
        if not run.ok:
            ax.plot(xs[-1:], ys[-1:], marker="x", markersize=10, color=line.get_color())
    _decorate(ax)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def _decorate(ax: Any) -> None:
    """Label the axes, set log scales and place the legend."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("conversation length (turns so far)")
    ax.set_ylabel("per-turn cost, ms (store 2 messages + build context; bucket mean)")
    ax.set_title(
        "Per-turn cost vs conversation length (2,000-token budget; tiermem bold, floors dashed)"
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def copy_to_docs(png: Path, docs_dir: Path) -> Path:
    """Copy the plot to ``docs_dir/compare.png`` and return the destination."""
    docs_dir.mkdir(parents=True, exist_ok=True)
    target = docs_dir / "compare.png"
    shutil.copy2(png, target)
    return target
