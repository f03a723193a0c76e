"""Operators: orchestration only (build, submit or reattach, defer, turn the final event into a result)."""
