"""Async, watch-based triggers."""
