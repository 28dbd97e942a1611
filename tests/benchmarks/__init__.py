"""Tests of the side-by-side benchmark harness (``benchmarks/``)."""
