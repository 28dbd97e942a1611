"""_compression."""

from __future__ import annotations
