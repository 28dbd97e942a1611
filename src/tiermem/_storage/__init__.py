"""_storage."""

from __future__ import annotations
