"""Fixtures of the trigger tests: the operator tests' Blob container on Azurite (a trigger that keeps the
run ledger writes there)."""

from __future__ import annotations

from ..operators.conftest import blob

__all__ = ["blob"]
