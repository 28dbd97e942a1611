"""The table ``tiermem eval retrieval`` prints (needs the ``cli`` extra: rich)."""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from .runner import RetrievalReport

__all__ = ["report_table"]


def report_table(report: RetrievalReport) -> Table:
    """Each category (then all questions), one row per method, side by side."""
    k = report.k
    table = Table(
        "category",
        "method",
        "n",
        f"any@{k}",
        f"all@{k}",
        f"nDCG@{k}",
        "mean ms",
        "p95 ms",
        box=box.SIMPLE_HEAD,
        title=Text(f"{report.dataset}: {report.questions} questions, {report.backend}"),
        caption=f"any@{k} / all@{k}: share of questions with any / every evidence turn "
        f"in the top {k} (recall_any, recall_all)",
    )
    categories = sorted({name for method in report.methods for name in method.categories})
    for category in [*categories, "overall"]:
        for method in report.methods:
            figures = method.overall if category == "overall" else method.categories[category]
            table.add_row(
                Text(category),
                method.name,
                str(figures.questions),
                f"{figures.recall_any:.3f}",
                f"{figures.recall_all:.3f}",
                f"{figures.ndcg:.3f}",
                f"{figures.mean_ms:.2f}",
                f"{figures.p95_ms:.2f}",
                end_section=method is report.methods[-1],
            )
    return table
