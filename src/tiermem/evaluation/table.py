"""The tables ``tiermem eval retrieval`` and ``tiermem eval context`` print (needs the
``cli`` extra: rich)."""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from .context import ContextReport
from .runner import RetrievalReport

__all__ = ["context_tables", "report_table"]


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


def context_tables(report: ContextReport) -> list[Table]:
    """The context figures (one row per method and budget) and the cache replay."""
    figures = Table(
        "budget",
        "method",
        "n",
        "evidence any",
        "evidence all",
        "answer",
        "mean tokens",
        "over",
        "mean ms",
        box=box.SIMPLE_HEAD,
        title=Text(f"{report.dataset}: what the model is handed ({report.backend})"),
        caption="evidence any / all: share of questions with any / every evidence turn word "
        "for word in the context; answer: the labelled answer string appears in it",
    )
    for row in report.figures:
        data = row.as_dict()
        figures.add_row(
            str(row.budget),
            row.method,
            str(row.questions),
            f"{data['evidence_any']:.3f}",
            f"{data['evidence_all']:.3f}",
            f"{data['answer']:.3f}",
            f"{data['mean_tokens']:.0f}",
            str(row.over_budget),
            f"{data['mean_ms']:.2f}",
        )
    replay = Table(
        "strategy",
        "budget",
        "calls",
        "cached share",
        "billed per call",
        "at a tenth",
        "verbatim",
        box=box.SIMPLE_HEAD,
        title=Text("prompt-cache replay"),
        caption="cached: the longest prefix shared with the previous call, counted from "
        "1,024 tokens in steps of 128; billed: input tokens per call, a cached token at "
        "half price, then at a tenth; verbatim: the mean share of the budget a call gives "
        "to messages word for word",
    )
    for item in report.replay:
        replay.add_row(
            item.strategy,
            str(item.budget),
            str(item.calls),
            f"{item.cached_share:.3f}",
            f"{item.billed_per_call:.0f}",
            f"{item.cheap_billed_per_call:.0f}",
            f"{item.verbatim_share:.2f}",
        )
    return [figures, replay]
