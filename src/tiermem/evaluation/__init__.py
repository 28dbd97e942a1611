"""Retrieval evaluation of tiermem's search (``tiermem eval retrieval``).

Loads a labelled dataset of multi-session conversations into a fresh memory, asks
its questions through :meth:`~tiermem.ConversationMemory.search` and scores the hits
against the evidence turns, beside plain BM25 baselines on the same data.
"""

from __future__ import annotations

from .baseline import BM25Baseline
from .dataset import Conversation, Dataset, Question, Session, Turn, load_dataset, parse_dataset
from .metrics import Summary, ndcg_at_k, recall_all_at_k, recall_any_at_k
from .runner import BASELINES, MethodReport, RetrievalReport, run_retrieval

__all__ = [
    "BASELINES",
    "BM25Baseline",
    "Conversation",
    "Dataset",
    "MethodReport",
    "Question",
    "RetrievalReport",
    "Session",
    "Summary",
    "Turn",
    "load_dataset",
    "ndcg_at_k",
    "parse_dataset",
    "recall_all_at_k",
    "recall_any_at_k",
    "run_retrieval",
]
